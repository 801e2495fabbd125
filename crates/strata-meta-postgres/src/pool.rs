//! A small pool of PostgreSQL connections, each with its statements prepared (or, through
//! a transaction pooler, sent unnamed: `stmt.rs`). A connection
//! is made when none is idle (up to the pool size); one that broke is dropped, not reused,
//! and so is one given back in the middle of a transaction (its user was cancelled between
//! `BEGIN` and `COMMIT`/`ROLLBACK`): reused, it would run the next user's statements inside
//! the abandoned transaction and commit both. The first connection of an engine creates
//! the volume's table if it does not exist.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use parking_lot::Mutex;

use strata_meta::kv::{KvError, within};
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, Config, Error, NoTls, Row};

use crate::stmt::{Params, Sql, Statements};
use crate::{CONNECT_TIMEOUT, pg_error};

/// One connection and its statements.
pub(crate) struct Conn {
    pub client: Client,
    pub stmts: Statements,
    /// This connection's commit marker row (random, `settle.rs`).
    pub marker: [u8; 16],
    /// Writing commits sent on this connection so far.
    pub commits: u64,
    /// The server process serving this connection: its pid and start (microseconds since
    /// the epoch), so a commit it may still be running can be ended (`settle.rs`).
    pub backend: Option<(i32, i64)>,
}

/// The statements on this connection ([`Statements`]).
impl Conn {
    pub async fn query(&self, sql: Sql, params: Params<'_>) -> Result<Vec<Row>, Error> {
        self.stmts.query(&self.client, sql, params).await
    }

    pub async fn query_one(&self, sql: Sql, params: Params<'_>) -> Result<Row, Error> {
        self.stmts.query_one(&self.client, sql, params).await
    }

    pub async fn query_opt(&self, sql: Sql, params: Params<'_>) -> Result<Option<Row>, Error> {
        self.stmts.query_opt(&self.client, sql, params).await
    }

    pub async fn execute(&self, sql: Sql, params: Params<'_>) -> Result<u64, Error> {
        self.stmts.execute(&self.client, sql, params).await
    }
}

struct Inner {
    config: Config,
    table: String,
    /// The statements' texts when the server is reached through a transaction pooler
    /// (statements unnamed, no session state); `None` when connected directly.
    pooled_texts: Option<Arc<[String; Sql::COUNT]>>,
    idle: Mutex<Vec<Conn>>,
    slots: Arc<Semaphore>,
    table_ready: OnceCell<()>,
}

/// Connections to one database for one volume's table.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("table", &self.inner.table)
            .finish()
    }
}

/// A connection taken from the pool; goes back when dropped unless marked broken or left
/// inside a transaction.
pub(crate) struct Pooled {
    conn: Option<Conn>,
    pool: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
    pub broken: bool,
    /// Set from before `BEGIN` is sent until its `COMMIT` or `ROLLBACK` has answered.
    pub in_transaction: bool,
}

impl Deref for Pooled {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        // Only `Drop` takes the connection out.
        self.conn
            .as_ref()
            .unwrap_or_else(|| unreachable!("pooled connection taken"))
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("pooled connection taken"))
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && !self.broken
            && !self.in_transaction
            && !conn.client.is_closed()
        {
            self.pool.idle.lock().push(conn);
        }
    }
}

impl Pool {
    /// `pooler`: the server is reached through a transaction pooler (PgBouncer's
    /// `pool_mode = transaction`).
    pub fn new(config: Config, table: String, size: usize, pooler: bool) -> Pool {
        Pool {
            inner: Arc::new(Inner {
                pooled_texts: pooler.then(|| Statements::texts(&table)),
                config,
                table,
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(size.max(1))),
                table_ready: OnceCell::new(),
            }),
        }
    }

    /// The volume's table.
    pub fn table(&self) -> &str {
        &self.inner.table
    }

    /// How to connect (for a connection outside the pool).
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// An idle connection, or a new one.
    pub async fn get(&self) -> Result<Pooled, KvError> {
        let permit = self
            .inner
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| KvError::Engine("connection pool closed".into()))?;
        let idle = self.inner.idle.lock().pop();
        let conn = match idle {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => self.connect().await?,
        };
        Ok(Pooled {
            conn: Some(conn),
            pool: self.inner.clone(),
            _permit: permit,
            broken: false,
            in_transaction: false,
        })
    }

    /// A new connection, not counted among the pool's (the pool's own calls count it).
    pub(crate) async fn connect(&self) -> Result<Conn, KvError> {
        let connecting = async {
            self.inner
                .config
                .connect(NoTls)
                .await
                .map_err(connect_error)
        };
        let (client, connection) = within(CONNECT_TIMEOUT, "PostgreSQL", connecting).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        self.inner
            .table_ready
            .get_or_try_init(|| create_table(&client, &self.inner.table))
            .await?;
        let (stmts, backend) = match &self.inner.pooled_texts {
            // Through a pooler: no session state (the next statement may run on another
            // server connection), and no server process to end after a lost answer (the
            // fence alone settles it).
            Some(texts) => (Statements::Unnamed(texts.clone()), None),
            None => {
                // Every statement reads the table by key. A volume's table starts empty,
                // and a plan cached while it was small kept scanning it whole after it
                // grew (lookups fell from ~3,000/s to ~700/s until the next ANALYZE);
                // without sequential scans the cached plans use the primary key at any
                // size. (Unnamed statements are planned at each run, with current sizes.)
                timed_setup(&client, "SET enable_seqscan = off").await?;
                let stmts = Statements::prepare(&client, &self.inner.table).await?;
                (stmts, crate::sql::backend_of(&client).await?)
            }
        };
        Ok(Conn {
            client,
            stmts,
            marker: rand::random(),
            commits: 0,
            backend,
        })
    }
}

async fn timed_setup(client: &Client, sql: &str) -> Result<(), KvError> {
    within(CONNECT_TIMEOUT, "PostgreSQL", async {
        client.batch_execute(sql).await.map_err(pg_error)
    })
    .await
}

/// Errors while connecting: refused or unreachable servers are unavailable (maybe later);
/// a wrong password or database is a clear engine error.
fn connect_error(e: tokio_postgres::Error) -> KvError {
    if e.code().is_some() {
        return pg_error(e);
    }
    KvError::Unavailable(format!("cannot connect to PostgreSQL: {}", with_causes(&e)))
}

/// An error and its causes, as one line.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The volume's table and its commit markers' table (`settle.rs`); markers of
/// connections unused for a week are dropped.
async fn create_table(client: &Client, table: &str) -> Result<(), KvError> {
    let markers = crate::sql::markers_table(table);
    for sql in [
        format!("CREATE TABLE IF NOT EXISTS {table} (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)"),
        format!(
            "CREATE TABLE IF NOT EXISTS {markers} (conn BYTEA PRIMARY KEY, state INT8 NOT NULL, \
             at TIMESTAMPTZ NOT NULL DEFAULT now())"
        ),
        format!("DELETE FROM {markers} WHERE at < now() - interval '7 days'"),
    ] {
        match client.batch_execute(&sql).await {
            Ok(()) => {}
            // Two clients creating a table at once: one wins, the other sees it exist.
            Err(e)
                if e.code()
                    .is_some_and(|c| matches!(c.code(), "23505" | "42P07")) => {}
            Err(e) => return Err(pg_error(e)),
        }
    }
    Ok(())
}
