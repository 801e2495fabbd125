//! The SQLite engine, Strata's embedded default: one database file in WAL mode, one table
//! of ordered binary keys, several processes may open the same file. Commits are durable
//! when they return (`synchronous=FULL`), or, with deferred syncs (a mount), only
//! committed to the WAL (`synchronous=NORMAL`: they survive a crash of the process, and
//! SQLite stays consistent through a crash of the machine) until a `sync` fsyncs the WAL.
//!
//! Reads run on pooled read connections, each snapshot inside one SQLite read transaction
//! (WAL gives it a consistent view). Commits go to one writer thread per engine, which
//! takes every commit waiting in its queue, validates and applies each inside its own
//! savepoint, and commits the whole batch with a single `COMMIT` — group commit: one
//! fsync is shared by all operations that arrived while the previous one was running, and
//! no caller is answered before its batch is committed. Syncs go through the same queue,
//! so one WAL fsync answers every sync that arrived together. Other processes are serialised by
//! SQLite's own write lock (`BEGIN IMMEDIATE` with a busy timeout).
//!
//! Reads are short indexed lookups and run inline on the calling task's thread.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

type Reply = oneshot::Sender<Result<(), KvError>>;

/// What the writer thread is asked to do.
enum Job {
    Commit { req: CommitRequest, reply: Reply },
    Sync(Reply),
}

/// What the writer thread and the engine share.
#[derive(Debug, Default)]
struct WriterShared {
    /// Commits wait only for the WAL write; `sync` makes them durable.
    deferred: AtomicBool,
    /// WAL fsyncs made for syncs.
    wal_syncs: AtomicU64,
}

/// A metadata engine in one SQLite database file.
pub struct SqliteEngine {
    path: PathBuf,
    readers: Pool,
    writer: Mutex<mpsc::Sender<Job>>,
    shared: Arc<WriterShared>,
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
        let shared = Arc::new(WriterShared::default());
        let writer = Writer {
            conn: writer_conn,
            wal: PathBuf::from(wal),
            wal_file: None,
            shared: shared.clone(),
            full: true,
            dirty: false,
        };
        std::thread::Builder::new()
            .name("strata-sqlite-commit".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| KvError::Engine(format!("cannot start sqlite writer thread: {e}")))?;
        Ok(SqliteEngine {
            path,
            readers: Arc::default(),
            writer: Mutex::new(tx),
            shared,
        })
    }

    /// WAL fsyncs made to answer syncs so far.
    pub fn wal_syncs(&self) -> u64 {
        self.shared.wal_syncs.load(Ordering::Relaxed)
    }

    fn send(&self, job: Job) -> Result<(), KvError> {
        let sent = self
            .writer
            .lock()
            .map_err(|_| KvError::Engine("sqlite writer queue poisoned".into()))?
            .send(job);
        sent.map_err(|_| KvError::Engine("sqlite writer thread has stopped".into()))
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

/// The writer thread: the one write connection, and what it knows of the WAL's durability.
struct Writer {
    conn: Connection,
    wal: PathBuf,
    /// The WAL, opened at the first sync and kept open (SQLite holds no locks on it, so
    /// this descriptor cannot disturb them; the database file itself is never opened here).
    wal_file: Option<std::fs::File>,
    shared: Arc<WriterShared>,
    /// `synchronous=FULL` is set on the connection (else `NORMAL`).
    full: bool,
    /// Commits were made since the WAL was last known durable.
    dirty: bool,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Job>) {
        let mut batches = 0u64;
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            let mut commits = Vec::with_capacity(jobs.len());
            let mut syncs = Vec::new();
            for job in jobs {
                match job {
                    Job::Commit { req, reply } => commits.push((req, reply)),
                    Job::Sync(reply) => syncs.push(reply),
                }
            }
            if !commits.is_empty() {
                self.commit(commits);
            }
            if !syncs.is_empty() {
                let result = self.sync();
                for reply in syncs {
                    let answer = match &result {
                        Ok(()) => Ok(()),
                        Err(e) => Err(clone_err(e)),
                    };
                    // A caller that went away no longer needs the answer.
                    let _ = reply.send(answer);
                }
            }
            batches += 1;
            if batches.is_multiple_of(WAL_CHECK_EVERY) {
                restart_wal_if_large(&self.conn, &self.wal);
            }
        }
        // The engine is gone: leave nothing it committed waiting for the disk.
        if let Err(e) = self.sync() {
            tracing::warn!("sqlite: final WAL sync failed: {e}");
        }
    }

    fn commit(&mut self, commits: Vec<(CommitRequest, Reply)>) {
        let full = !self.shared.deferred.load(Ordering::Relaxed);
        if full != self.full {
            let pragma = if full {
                "PRAGMA synchronous=FULL"
            } else {
                "PRAGMA synchronous=NORMAL"
            };
            match self.conn.execute_batch(pragma) {
                Ok(()) => self.full = full,
                Err(e) => tracing::warn!("sqlite: {pragma} failed: {e}"),
            }
        }
        let results = commit_batch(&self.conn, commits.iter().map(|(req, _)| req));
        if results.iter().any(Result::is_ok) {
            // A FULL commit fsyncs the WAL, and with it every commit before it.
            self.dirty = !self.full;
        }
        for ((_, reply), result) in commits.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }

    /// fsync the WAL if anything was committed since it was last durable. Every commit is
    /// in the WAL or, once checkpointed, in the database file, which SQLite fsyncs before
    /// it lets the WAL be reused.
    fn sync(&mut self) -> Result<(), KvError> {
        if !self.dirty {
            return Ok(());
        }
        let failed = |e: std::io::Error| KvError::Engine(format!("sqlite: cannot sync WAL: {e}"));
        if self.wal_file.is_none() {
            match std::fs::File::open(&self.wal) {
                Ok(file) => self.wal_file = Some(file),
                // No WAL: everything is in the database file; let SQLite sync it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.conn
                        .execute_batch("PRAGMA wal_checkpoint(FULL)")
                        .map_err(sql_err)?;
                    self.dirty = false;
                    return Ok(());
                }
                Err(e) => return Err(failed(e)),
            }
        }
        if let Some(file) = &self.wal_file {
            file.sync_data().map_err(failed)?;
        }
        self.dirty = false;
        self.shared.wal_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
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
        self.send(Job::Commit { req, reply })?;
        answer
            .await
            .map_err(|_| KvError::Engine("sqlite writer thread has stopped".into()))?
    }

    fn set_deferred_sync(&self, deferred: bool) {
        self.shared.deferred.store(deferred, Ordering::Relaxed);
    }

    async fn sync(&self) -> Result<(), KvError> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Sync(reply))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &[u8]) -> CommitRequest {
        CommitRequest {
            reads: Vec::new(),
            writes: vec![(key.to_vec(), Write::Put(b"v".to_vec()))],
        }
    }

    #[tokio::test]
    async fn deferred_commits_are_synced_once_per_sync() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteEngine::open(dir.path().join("m.db")).unwrap();
        // Durable commits leave nothing for a sync to do.
        engine.commit(put(b"a")).await.unwrap();
        engine.sync().await.unwrap();
        assert_eq!(engine.wal_syncs(), 0);

        engine.set_deferred_sync(true);
        for key in [b"b", b"c", b"d"] {
            engine.commit(put(key)).await.unwrap();
        }
        assert_eq!(engine.wal_syncs(), 0, "deferred commits do not sync");
        let (first, second) = tokio::join!(engine.sync(), engine.sync());
        first.unwrap();
        second.unwrap();
        assert_eq!(engine.wal_syncs(), 1, "one fsync for what was pending");
        engine.sync().await.unwrap();
        assert_eq!(engine.wal_syncs(), 1, "nothing new: no fsync");

        // Back to durable commits: the next FULL commit covers the deferred one before it.
        engine.commit(put(b"e")).await.unwrap();
        engine.set_deferred_sync(false);
        engine.commit(put(b"f")).await.unwrap();
        engine.sync().await.unwrap();
        assert_eq!(engine.wal_syncs(), 1);

        let mut snap = engine.snapshot().await.unwrap();
        for key in [b"a", b"b", b"c", b"d", b"e", b"f"] {
            assert!(snap.get(key).await.unwrap().is_some());
        }
    }

    #[tokio::test]
    async fn deferred_commits_are_seen_by_another_engine_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let writer = SqliteEngine::open(&path).unwrap();
        writer.set_deferred_sync(true);
        writer.commit(put(b"k")).await.unwrap();
        let reader = SqliteEngine::open(&path).unwrap();
        let mut snap = reader.snapshot().await.unwrap();
        assert_eq!(snap.get(b"k").await.unwrap(), Some(b"v".to_vec()));
    }
}
