//! A small pool of PostgreSQL connections, each with its statements prepared. A connection
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
use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::{CONNECT_TIMEOUT, pg_error};

/// The prepared statements of one connection.
pub(crate) struct Statements {
    pub get: Statement,
    pub get_many: Statement,
    /// `$1` keys, `$2` the key holding a little-endian `u64` at byte `$3` (0-based), `$4`
    /// and `$5` prefixes and suffixes: the rows of the keys and of `prefix || number
    /// big-endian || suffix`, in one statement (one snapshot).
    pub linked: Statement,
    /// `$1` keys, rows `$2 <= k < $3` (at most `$4`), and the rows each of those links
    /// to (number at byte `$5`, `$6`/`$7` prefixes and suffixes), in one statement: each
    /// row's first column says which part it is (0 keys, 1 range, 2 linked).
    pub scan_linked: Statement,
    pub scan_asc: Statement,
    pub scan_desc: Statement,
    pub upsert: Statement,
    pub delete: Statement,
    /// `pg_notify($1, $2)`: a change announcement or a beat.
    pub notify: Statement,
    /// The check of a pipelined commit (`pipelined.rs`).
    pub check_points: Statement,
    /// Sets this connection's commit marker (`settle.rs`): `$1` the connection's marker
    /// id, `$2` the commit's state, `$3` its fence; divides by zero (aborting the
    /// transaction) when the commit was fenced off.
    pub mark: Statement,
}

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

struct Inner {
    config: Config,
    table: String,
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
    pub fn new(config: Config, table: String, size: usize) -> Pool {
        Pool {
            inner: Arc::new(Inner {
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

    async fn connect(&self) -> Result<Conn, KvError> {
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
        // Every statement reads the table by key. A volume's table starts empty, and a
        // plan cached while it was small kept scanning it whole after it grew (lookups
        // fell from ~3,000/s to ~700/s until the next ANALYZE); without sequential scans
        // the cached plans use the primary key at any size.
        timed_setup(&client, "SET enable_seqscan = off").await?;
        let stmts = prepare(&client, &self.inner.table).await?;
        let backend = crate::sql::backend_of(&client).await?;
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

async fn prepare(client: &Client, table: &str) -> Result<Statements, KvError> {
    let p = |sql: String| async move { client.prepare(&sql).await.map_err(pg_error) };
    Ok(Statements {
        get: p(format!("SELECT v FROM {table} WHERE k = $1")).await?,
        get_many: p(format!("SELECT k, v FROM {table} WHERE k = ANY($1)")).await?,
        linked: p(linked_sql(table)).await?,
        scan_linked: p(scan_linked_sql(table)).await?,
        scan_asc: p(format!(
            "SELECT k, v FROM {table} WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3"
        ))
        .await?,
        scan_desc: p(format!(
            "SELECT k, v FROM {table} WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3"
        ))
        .await?,
        upsert: p(format!(
            "INSERT INTO {table} (k, v) SELECT * FROM UNNEST($1::bytea[], $2::bytea[]) \
             ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
        ))
        .await?,
        delete: p(format!("DELETE FROM {table} WHERE k = ANY($1)")).await?,
        notify: p("SELECT pg_notify($1, $2)".to_string()).await?,
        check_points: p(crate::sql::check_points_sql(table)).await?,
        mark: p(crate::sql::mark_sql(table)).await?,
    })
}

/// See [`Statements::scan_linked`]: a page of readdirplus (the directory, its entries and
/// their inodes) in one statement, so one snapshot and one round trip.
fn scan_linked_sql(table: &str) -> String {
    let number = (1..=8)
        .rev()
        .map(|i| format!("substring(page.v from $5::int + {i} for 1)"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!(
        "WITH page AS (SELECT k, v FROM {table} WHERE k >= $2 AND k < $3 ORDER BY k LIMIT $4) \
         SELECT 0::int2, k, v FROM {table} WHERE k = ANY($1::bytea[]) \
         UNION ALL SELECT 1::int2, k, v FROM page \
         UNION ALL SELECT 2::int2, k, v FROM {table} WHERE k = ANY(ARRAY( \
           SELECT u.p || {number} || u.s FROM page, \
             UNNEST($6::bytea[], $7::bytea[]) AS u(p, s) \
           WHERE length(page.v) >= $5::int + 8))"
    )
}

/// See [`Statements::linked`]: one index scan for the keys and the linked keys, which a
/// sub-select computes from the holder's value (its number's eight bytes reversed one by
/// one: bytea has no reverse).
fn linked_sql(table: &str) -> String {
    let number = (1..=8)
        .rev()
        .map(|i| format!("substring(v from $3::int + {i} for 1)"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!(
        "SELECT k, v FROM {table} WHERE k = ANY($1::bytea[] || ARRAY( \
           SELECT u.p || h.n || u.s FROM \
             (SELECT {number} AS n FROM {table} WHERE k = $2 AND length(v) >= $3::int + 8) h, \
             UNNEST($4::bytea[], $5::bytea[]) AS u(p, s)))"
    )
}
