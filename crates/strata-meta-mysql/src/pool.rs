//! A small pool of MySQL connections. A connection is made when none is idle (up to the
//! pool size). One is never reused when it broke, when it was given back in the middle
//! of a transaction (its user was cancelled between `START TRANSACTION` and
//! `COMMIT`/`ROLLBACK`: reused, it would run the next user's statements inside the
//! abandoned transaction), or when a statement's answer was not read to its end (the
//! next reader would take the rest for its own answer). The first connection of an
//! engine creates the volume's tables if they do not exist.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Row};
use parking_lot::Mutex;
use strata_meta::kv::{KvError, within};
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};

use crate::sql::{create_tables, my_error};
use crate::url::{Address, MysqlUrl};
use crate::{CONNECT_TIMEOUT, QUERY_TIMEOUT};

/// What every connection sets first: strict mode (the commit marker relies on a refused
/// NULL, `sql::mark`), repeatable read (locking reads then lock the gaps of the ranges
/// they read), and lock waits bounded well inside the query timeout.
const SESSION_SETUP: &str = "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'; \
     SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
     SET SESSION innodb_lock_wait_timeout = 5";

/// One connection.
pub(crate) struct Conn {
    pub conn: mysql_async::Conn,
    /// This connection's commit marker row (random, `settle.rs`).
    pub marker: [u8; 16],
    /// Writing commits sent on this connection so far.
    pub commits: u64,
}

/// A statement batch failed: `at` statements of it had completed.
#[derive(Debug)]
pub(crate) struct Failed {
    pub at: usize,
    pub error: mysql_async::Error,
}

/// [`Pooled::run_failing`]'s error: where the batch failed, the server's error code
/// (`None` when the server gave none), and what it means.
#[derive(Debug)]
pub(crate) struct RunFailure {
    pub at: usize,
    pub code: Option<u16>,
    pub error: KvError,
}

impl Conn {
    /// The server's id of this connection (what `KILL` takes).
    pub fn id(&self) -> u32 {
        self.conn.id()
    }

    /// Run `sql` (one statement or several separated by `;`) and read every result set.
    /// Not cancellation safe: the caller keeps track ([`Pooled::run`]).
    pub async fn run_raw(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, Failed> {
        let mut sets = Vec::new();
        let mut result = self
            .conn
            .query_iter(sql)
            .await
            .map_err(|error| Failed { at: 0, error })?;
        loop {
            let failed = |error| Failed {
                at: sets.len(),
                error,
            };
            let rows = result.collect::<Row>().await.map_err(failed)?;
            sets.push(rows);
            if result.is_empty() {
                // A statement after the first that failed also looks like the end: the
                // error waits in the connection until the next read, so read once more.
                let failed = |error| Failed {
                    at: sets.len(),
                    error,
                };
                result.collect::<Row>().await.map_err(failed)?;
                return Ok(sets);
            }
        }
    }

    /// [`run_raw`](Self::run_raw) within the query timeout, errors as [`KvError`].
    pub async fn run(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, KvError> {
        within(QUERY_TIMEOUT, "MySQL", async {
            self.run_raw(sql).await.map_err(|f| my_error(f.error))
        })
        .await
    }
}

struct Inner {
    opts: Opts,
    table: String,
    idle: Mutex<Vec<Conn>>,
    slots: Arc<Semaphore>,
    tables_ready: OnceCell<()>,
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

/// A connection taken from the pool; goes back when dropped unless marked broken, left
/// inside a transaction, or in the middle of an answer.
pub(crate) struct Pooled {
    conn: Option<Conn>,
    pool: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
    pub broken: bool,
    /// Set from before `START TRANSACTION` is sent until its `COMMIT` or `ROLLBACK` has
    /// answered.
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
        {
            self.pool.idle.lock().push(conn);
        }
    }
}

impl Pooled {
    /// Run `sql` within the query timeout. Until its answer has been read to the end the
    /// connection counts as broken, so a caller cancelled meanwhile (or a timeout) never
    /// gives a connection with an unread answer back to the pool.
    pub async fn run_failing(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, RunFailure> {
        self.broken = true;
        let conn = self
            .conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("pooled connection taken"));
        let outcome = tokio::time::timeout(QUERY_TIMEOUT, conn.run_raw(sql)).await;
        match outcome {
            Ok(Ok(sets)) => {
                self.broken = false;
                Ok(sets)
            }
            Ok(Err(Failed { at, error })) => {
                // A server error ends the answer cleanly; anything else broke it.
                let code = match &error {
                    mysql_async::Error::Server(s) => Some(s.code),
                    _ => None,
                };
                self.broken = code.is_none();
                Err(RunFailure {
                    at,
                    code,
                    error: my_error(error),
                })
            }
            Err(_) => Err(RunFailure {
                at: 0,
                code: None,
                error: KvError::Unavailable(format!(
                    "no answer from MySQL within {} s",
                    QUERY_TIMEOUT.as_secs()
                )),
            }),
        }
    }

    /// [`run_failing`](Self::run_failing) without where it failed.
    pub async fn run(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, KvError> {
        self.run_failing(sql).await.map_err(|f| f.error)
    }
}

impl Pool {
    pub fn new(url: &MysqlUrl, size: usize) -> Pool {
        let mut builder = OptsBuilder::default()
            .user(url.user.clone())
            .pass(url.password.as_ref().map(|p| p.expose().to_string()))
            .db_name(Some(url.database.clone()))
            // Otherwise a client of 127.0.0.1 moves to the server's Unix socket.
            .prefer_socket(false)
            .tcp_nodelay(true)
            .stmt_cache_size(0);
        builder = match &url.address {
            Address::Tcp { host, port } => builder.ip_or_hostname(host.clone()).tcp_port(*port),
            Address::Socket(path) => builder.socket(Some(path.clone())),
        };
        Pool {
            inner: Arc::new(Inner {
                opts: Opts::from(builder),
                table: url.table(),
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(size.max(1))),
                tables_ready: OnceCell::new(),
            }),
        }
    }

    /// The volume's table.
    pub fn table(&self) -> &str {
        &self.inner.table
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
            Some(conn) => conn,
            None => self.connect().await?,
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
            mysql_async::Conn::new(self.inner.opts.clone())
                .await
                .map_err(connect_error)
        };
        let conn = within(CONNECT_TIMEOUT, "MySQL", connecting).await?;
        let mut conn = Conn {
            conn,
            marker: rand::random(),
            commits: 0,
        };
        conn.run(SESSION_SETUP).await?;
        self.inner
            .tables_ready
            .get_or_try_init(|| create(&mut conn, &self.inner.table))
            .await?;
        Ok(conn)
    }
}

/// Errors while connecting: refused or unreachable servers are unavailable (maybe later);
/// a wrong password or database is a clear engine error.
fn connect_error(e: mysql_async::Error) -> KvError {
    match e {
        mysql_async::Error::Server(_) => my_error(e),
        mysql_async::Error::Io(io) => KvError::Unavailable(format!(
            "cannot connect to MySQL: {}",
            crate::sql::io_text(&io)
        )),
        other => KvError::Unavailable(format!("cannot connect to MySQL: {other}")),
    }
}

async fn create(conn: &mut Conn, table: &str) -> Result<(), KvError> {
    for sql in create_tables(table) {
        conn.run(&sql).await?;
    }
    Ok(())
}
