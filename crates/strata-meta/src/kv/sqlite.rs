//! The SQLite engine, Strata's embedded default: one database file in WAL mode, one table
//! of ordered binary keys, durable commits (`synchronous=FULL`), several processes may open
//! the same file.
//!
//! Reads run on pooled read connections, each snapshot inside one SQLite read transaction
//! (WAL gives it a consistent view). Commits go to one writer thread per engine, which
//! takes every commit waiting in its queue, validates and applies each inside its own
//! savepoint, and makes the whole batch durable with a single `COMMIT` — group commit: one
//! fsync is shared by all operations that arrived while the previous one was running, and
//! no caller is answered before its batch is durable. Other processes are serialised by
//! SQLite's own write lock (`BEGIN IMMEDIATE` with a busy timeout).
//!
//! Reads are short indexed lookups and run inline on the calling task's thread.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::{
    CommitRequest, Key, KvEngine, KvError, KvSnapshot, ReadCheck, Value, Write, apply_field_ops,
};

/// Most commits folded into one SQLite transaction.
const MAX_BATCH: usize = 512;
/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 16;
/// How long to wait for another process's write lock before reporting the engine busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// WAL size past which the writer forces a log restart.
const WAL_RESTART_BYTES: u64 = 64 << 20;
/// Batches between two checks of the WAL size.
const WAL_CHECK_EVERY: u64 = 256;

type Pool = Arc<Mutex<Vec<Connection>>>;

struct CommitJob {
    req: CommitRequest,
    reply: oneshot::Sender<Result<(), KvError>>,
}

/// A metadata engine in one SQLite database file.
pub struct SqliteEngine {
    path: PathBuf,
    readers: Pool,
    writer: Mutex<mpsc::Sender<CommitJob>>,
}

impl std::fmt::Debug for SqliteEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEngine")
            .field("path", &self.path)
            .finish()
    }
}

fn sql_err(e: rusqlite::Error) -> KvError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            KvError::Unavailable(format!("sqlite database is locked: {e}"))
        }
        _ => KvError::Engine(format!("sqlite: {e}")),
    }
}

fn open_connection(path: &Path, create: bool) -> Result<Connection, KvError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        KvError::Unavailable(format!(
            "cannot open sqlite database {}: {e}",
            path.display()
        ))
    })?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// WAL mode and the table. Two processes creating one database at the same moment can
/// get SQLITE_BUSY here without the busy handler being asked (SQLite's deadlock
/// avoidance on lock upgrades), so that is retried for the busy timeout.
fn set_up_schema(conn: &Connection) -> Result<(), KvError> {
    let started = std::time::Instant::now();
    loop {
        let outcome = conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             PRAGMA journal_size_limit=67108864;
             CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
        );
        match outcome {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other.map_err(sql_err),
        }
    }
}

impl SqliteEngine {
    /// Open (creating if needed) the database at `path`. Its directory must exist.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteEngine, KvError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(KvError::Unavailable(format!(
                "directory {} of sqlite database does not exist",
                dir.display()
            )));
        }
        let writer_conn = open_connection(&path, true)?;
        set_up_schema(&writer_conn)?;
        let (tx, rx) = mpsc::channel();
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        std::thread::Builder::new()
            .name("strata-sqlite-commit".into())
            .spawn(move || writer_loop(writer_conn, wal, rx))
            .map_err(|e| KvError::Engine(format!("cannot start sqlite writer thread: {e}")))?;
        Ok(SqliteEngine {
            path,
            readers: Arc::default(),
            writer: Mutex::new(tx),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copy everything in the WAL into the database file and truncate the WAL (waits for
    /// readers). Used before measuring or copying the file.
    pub fn checkpoint(&self) -> Result<(), KvError> {
        let conn = open_connection(&self.path, false)?;
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(sql_err)
    }

    fn reader(&self) -> Result<Connection, KvError> {
        let pooled = self.readers.lock().ok().and_then(|mut p| p.pop());
        match pooled {
            Some(conn) => Ok(conn),
            None => open_connection(&self.path, false),
        }
    }
}

fn writer_loop(conn: Connection, wal: PathBuf, rx: mpsc::Receiver<CommitJob>) {
    let mut batches = 0u64;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let results = commit_batch(&conn, batch.iter().map(|j| &j.req));
        for (job, result) in batch.into_iter().zip(results) {
            // A caller that went away no longer needs the answer.
            let _ = job.reply.send(result);
        }
        batches += 1;
        if batches.is_multiple_of(WAL_CHECK_EVERY) {
            restart_wal_if_large(&conn, &wal);
        }
    }
}

/// Under steady concurrent load some reader is always inside the WAL, so SQLite's passive
/// auto-checkpoint can never restart it and the file grows without bound. When it passes
/// [`WAL_RESTART_BYTES`], wait briefly for readers and restart it.
fn restart_wal_if_large(conn: &Connection, wal: &Path) {
    let large = std::fs::metadata(wal)
        .map(|m| m.len() > WAL_RESTART_BYTES)
        .unwrap_or(false);
    if large && let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(RESTART)") {
        tracing::warn!("sqlite WAL checkpoint failed: {e}");
    }
}

/// Run a batch of commits in one SQLite transaction; one result per commit.
fn commit_batch<'r>(
    conn: &Connection,
    reqs: impl ExactSizeIterator<Item = &'r CommitRequest>,
) -> Vec<Result<(), KvError>> {
    let count = reqs.len();
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let e = sql_err(e);
        return (0..count).map(|_| Err(clone_err(&e))).collect();
    }
    let mut results: Vec<Result<(), KvError>> = reqs.map(|req| commit_one(conn, req)).collect();
    if let Err(e) = conn.execute_batch("COMMIT") {
        let e = sql_err(e);
        let _ = conn.execute_batch("ROLLBACK");
        for r in results.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(clone_err(&e));
        }
    }
    results
}

fn clone_err(e: &KvError) -> KvError {
    match e {
        KvError::Unavailable(m) => KvError::Unavailable(m.clone()),
        other => KvError::Engine(other.to_string()),
    }
}

/// Validate and apply one commit inside a savepoint of the batch transaction.
fn commit_one(conn: &Connection, req: &CommitRequest) -> Result<(), KvError> {
    conn.execute_batch("SAVEPOINT one").map_err(sql_err)?;
    let outcome = validate_and_apply(conn, req);
    let end = if outcome.is_ok() {
        "RELEASE one"
    } else {
        "ROLLBACK TO one; RELEASE one"
    };
    conn.execute_batch(end).map_err(sql_err)?;
    outcome
}

fn validate_and_apply(conn: &Connection, req: &CommitRequest) -> Result<(), KvError> {
    for check in &req.reads {
        let holds = match check {
            ReadCheck::Point { key, value } => get(conn, key)? == *value,
            ReadCheck::Range {
                start,
                end,
                limit,
                reverse,
                entries,
            } => scan(conn, start, end, *limit, *reverse)? == *entries,
        };
        if !holds {
            return Err(KvError::Conflict);
        }
    }
    for (key, write) in &req.writes {
        match write {
            Write::Put(v) => put(conn, key, v)?,
            Write::Delete => {
                let mut stmt = conn
                    .prepare_cached("DELETE FROM kv WHERE k = ?1")
                    .map_err(sql_err)?;
                stmt.execute(params![key]).map_err(sql_err)?;
            }
            Write::Fields(ops) => {
                if let Some(v) = apply_field_ops(key, get(conn, key)?.as_deref(), ops)? {
                    put(conn, key, &v)?;
                }
            }
        }
    }
    Ok(())
}

fn put(conn: &Connection, key: &[u8], value: &[u8]) -> Result<(), KvError> {
    let mut stmt = conn
        .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")
        .map_err(sql_err)?;
    stmt.execute(params![key, value]).map_err(sql_err)?;
    Ok(())
}

fn get(conn: &Connection, key: &[u8]) -> Result<Option<Value>, KvError> {
    let mut stmt = conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")
        .map_err(sql_err)?;
    stmt.query_row(params![key], |row| row.get::<_, Vec<u8>>(0))
        .optional()
        .map_err(sql_err)
}

fn scan(
    conn: &Connection,
    start: &[u8],
    end: &[u8],
    limit: usize,
    reverse: bool,
) -> Result<Vec<(Key, Value)>, KvError> {
    let sql = if reverse {
        "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k DESC LIMIT ?3"
    } else {
        "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k ASC LIMIT ?3"
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params![start, end, limit], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .map_err(sql_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql_err)
}

/// A read view: one pooled connection holding one SQLite read transaction.
struct SqliteSnapshot {
    conn: Option<Connection>,
    pool: Pool,
    in_txn: bool,
}

impl SqliteSnapshot {
    fn conn(&mut self) -> Result<&Connection, KvError> {
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| KvError::Engine("sqlite snapshot used after release".into()))?;
        if !self.in_txn {
            conn.execute_batch("BEGIN DEFERRED").map_err(sql_err)?;
            self.in_txn = true;
        }
        Ok(conn)
    }
}

impl Drop for SqliteSnapshot {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.in_txn && conn.execute_batch("COMMIT").is_err() {
            return; // drop a connection in an unknown state instead of pooling it
        }
        if let Ok(mut pool) = self.pool.lock()
            && pool.len() < MAX_IDLE_READERS
        {
            pool.push(conn);
        }
    }
}

#[async_trait]
impl KvSnapshot for SqliteSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        get(self.conn()?, key)
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        let conn = self.conn()?;
        keys.iter().map(|k| get(conn, k)).collect()
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end {
            return Ok(Vec::new());
        }
        scan(self.conn()?, start, end, limit, reverse)
    }
}

#[async_trait]
impl KvEngine for SqliteEngine {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(SqliteSnapshot {
            conn: Some(self.reader()?),
            pool: self.readers.clone(),
            in_txn: false,
        }))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        let (reply, answer) = oneshot::channel();
        let sent = self
            .writer
            .lock()
            .map_err(|_| KvError::Engine("sqlite writer queue poisoned".into()))?
            .send(CommitJob { req, reply });
        if sent.is_err() {
            return Err(KvError::Engine("sqlite writer thread has stopped".into()));
        }
        answer
            .await
            .map_err(|_| KvError::Engine("sqlite writer thread has stopped".into()))?
    }

    fn snapshot_isolation(&self) -> bool {
        true
    }

    fn native_field_ops(&self) -> bool {
        true
    }
}
