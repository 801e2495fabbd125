//! The SQLite engine, Strata's embedded default: one database file in WAL mode, one table
//! of ordered binary keys, several processes may open the same file. Commits are durable
//! when they return (`synchronous=FULL`), or, with deferred syncs (a mount), only
//! committed to the WAL (`synchronous=NORMAL`: they survive a crash of the process, and
//! SQLite stays consistent through a crash of the machine) until a `sync` fsyncs the WAL.
//!
//! Reads run on pooled read connections, each snapshot inside one SQLite read transaction
//! (WAL gives it a consistent view). Commits go through the engine's one write connection
//! ([`super::sqlite_writer`]: a commit thread with group commit, or inline when syncs are
//! deferred). Other processes are serialised by SQLite's own write lock
//! (`BEGIN IMMEDIATE` with a busy timeout).
//!
//! Reads are short indexed lookups and run inline on the calling task's thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use super::sqlite_bulk::SqliteBulk;
use super::sqlite_sql::{BUSY_TIMEOUT, get, scan, sql_err};
use super::sqlite_writer::{self, Job, SharedWriter, Writer, WriterShared};
use super::{BulkWriter, CommitRequest, FrozenView, Key, KvEngine, KvError, KvSnapshot, Value};

/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 16;

type Pool = Arc<Mutex<Vec<Connection>>>;

/// A metadata engine in one SQLite database file.
pub struct SqliteEngine {
    path: PathBuf,
    readers: Pool,
    queue: Mutex<mpsc::Sender<Job>>,
    writer: SharedWriter,
    shared: Arc<WriterShared>,
}

impl std::fmt::Debug for SqliteEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEngine")
            .field("path", &self.path)
            .finish()
    }
}

/// Create the database file readable by its owner only (0600) if it does not exist:
/// it holds every name and attribute of the volume. SQLite gives its `-wal` and `-shm`
/// files the database file's permissions.
fn create_private(path: &Path) -> Result<(), KvError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(KvError::Unavailable(format!(
            "cannot create sqlite database {}: {e}",
            path.display()
        ))),
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
        create_private(&path)?;
        let writer_conn = open_connection(&path, true)?;
        set_up_schema(&writer_conn)?;
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(WriterShared::default());
        let writer = Arc::new(Mutex::new(Writer::new(writer_conn, &path, shared.clone())));
        let for_thread = writer.clone();
        std::thread::Builder::new()
            .name("strata-sqlite-commit".into())
            .spawn(move || sqlite_writer::run(for_thread, rx))
            .map_err(|e| KvError::Engine(format!("cannot start sqlite writer thread: {e}")))?;
        Ok(SqliteEngine {
            path,
            readers: Arc::default(),
            queue: Mutex::new(tx),
            writer,
            shared,
        })
    }

    /// WAL fsyncs made to answer syncs so far.
    pub fn wal_syncs(&self) -> u64 {
        self.shared.wal_syncs.load(Ordering::Relaxed)
    }

    fn send(&self, job: Job) -> Result<(), KvError> {
        let sent = self.queue.lock().send(job);
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
        let pooled = self.readers.lock().pop();
        match pooled {
            Some(conn) => Ok(conn),
            None => open_connection(&self.path, false),
        }
    }
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
        let mut pool = self.pool.lock();
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
    }
}

/// A frozen view: one read transaction on one connection, begun (and its WAL snapshot
/// taken) when the view is made. Its scans take turns on that connection: SQLite cannot
/// share one snapshot between connections of another process's writes. A scan waiting
/// for its turn yields its thread (an async lock: a mount's requests run beside a
/// backup's scans, and a thread blocked on a lock would stall them). While the view is
/// kept, checkpoints stop at its snapshot and the WAL grows; commits go on.
struct SqliteFrozen(tokio::sync::Mutex<SqliteSnapshot>);

impl SqliteFrozen {
    fn new(mut snapshot: SqliteSnapshot) -> Result<SqliteFrozen, KvError> {
        // The first read of a transaction is what fixes its snapshot.
        get(snapshot.conn()?, b"")?;
        Ok(SqliteFrozen(tokio::sync::Mutex::new(snapshot)))
    }
}

#[async_trait]
impl FrozenView for SqliteFrozen {
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end {
            return Ok(Vec::new());
        }
        let mut snapshot = self.0.lock().await;
        scan(snapshot.conn()?, start, end, limit, false)
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
        if let Some(result) = sqlite_writer::try_commit_inline(&self.writer, &self.shared, &req) {
            return result;
        }
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

    async fn bulk_writer(&self) -> Result<Option<Box<dyn BulkWriter>>, KvError> {
        Ok(Some(Box::new(SqliteBulk::new(self.writer.clone()))))
    }

    async fn frozen_view(&self, _readers: usize) -> Result<Option<Arc<dyn FrozenView>>, KvError> {
        let snapshot = SqliteSnapshot {
            conn: Some(self.reader()?),
            pool: self.readers.clone(),
            in_txn: false,
        };
        Ok(Some(Arc::new(SqliteFrozen::new(snapshot)?)))
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
    use crate::kv::Write;

    fn put(key: &[u8]) -> CommitRequest {
        CommitRequest {
            seq: 0,
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

    /// A restart of the WAL does not wait for a reader that stays (a dump's frozen
    /// view): it reports the reader and commits go on; once the view is dropped the
    /// restart succeeds.
    #[tokio::test]
    async fn wal_restarts_do_not_wait_for_a_frozen_view() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let engine = SqliteEngine::open(&path).unwrap();
        engine.commit(put(b"a")).await.unwrap();
        let view = engine.frozen_view(1).await.unwrap().unwrap();
        engine.commit(put(b"b")).await.unwrap();
        let writer = open_connection(&path, false).unwrap();
        let started = std::time::Instant::now();
        assert!(
            !sqlite_writer::restart_wal(&writer).unwrap(),
            "a reader is in the WAL"
        );
        assert!(
            started.elapsed() < BUSY_TIMEOUT / 10,
            "waited {:?} for the reader",
            started.elapsed()
        );
        engine.commit(put(b"c")).await.unwrap();
        assert_eq!(view.scan(b"a", b"z", 10).await.unwrap().len(), 1);
        drop(view);
        assert!(
            sqlite_writer::restart_wal(&writer).unwrap(),
            "no reader left"
        );
    }
}
