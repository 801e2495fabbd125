//! The write side of the SQLite engine: its one write connection and what is known of the
//! WAL's durability. Commits reach it two ways. Queued, to the commit thread, which takes
//! every job waiting and applies the commits as one SQLite transaction in savepoints
//! (group commit: one `fsync` shared by everything that arrived while the previous
//! commit ran) and answers syncs with one WAL `fsync`. Or, when syncs are deferred (no
//! `fsync` per commit, so nothing to share) and the connection is free, inline on the
//! committing thread, which saves two thread hand-offs per operation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::sqlite_sql::{BUSY_TIMEOUT, get, scan, sql_err};
use super::{CommitRequest, Key, KvError, ReadCheck, Value, Write, apply_field_ops};

/// Most jobs taken from the queue at once.
const MAX_BATCH: usize = 512;
/// WAL size past which the writer forces a log restart.
const WAL_RESTART_BYTES: u64 = 64 << 20;
/// Transactions between two checks of the WAL size.
const WAL_CHECK_EVERY: u64 = 256;
/// How long a restart of the WAL waits for readers to leave it. A reader that stays (a
/// dump's frozen view, seconds to minutes) is not waited for: commits go on, the WAL
/// grows, and the restart is tried again after [`WAL_RESTART_BACKOFF`].
const WAL_RESTART_WAIT: Duration = Duration::from_millis(10);
/// How long after a restart that found readers the next one is tried.
const WAL_RESTART_BACKOFF: Duration = Duration::from_secs(1);

pub(super) type Reply = oneshot::Sender<Result<(), KvError>>;

/// What the commit thread is asked to do.
pub(super) enum Job {
    Commit { req: CommitRequest, reply: Reply },
    Sync(Reply),
}

/// What the writer and the engine share without a lock.
#[derive(Debug, Default)]
pub(super) struct WriterShared {
    /// Commits wait only for the WAL write; `sync` makes them durable.
    pub(super) deferred: AtomicBool,
    /// WAL fsyncs made for syncs.
    pub(super) wal_syncs: AtomicU64,
}

/// The write connection, shared by the commit thread and inline committers.
pub(super) type SharedWriter = Arc<Mutex<Writer>>;

/// The one write connection of an engine.
pub(super) struct Writer {
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
    transactions: u64,
    /// No restart of the WAL is tried before this (a reader stayed in it).
    restart_after: Option<Instant>,
}

impl Writer {
    pub(super) fn new(conn: Connection, db: &Path, shared: Arc<WriterShared>) -> Writer {
        let mut wal = db.to_path_buf().into_os_string();
        wal.push("-wal");
        Writer {
            conn,
            wal: PathBuf::from(wal),
            wal_file: None,
            shared,
            full: true,
            dirty: false,
            transactions: 0,
            restart_after: None,
        }
    }

    /// Apply `reqs` as one SQLite transaction, each in its own savepoint; one result each.
    pub(super) fn commit(&mut self, reqs: &[&CommitRequest]) -> Vec<Result<(), KvError>> {
        self.set_synchronous();
        let results = commit_batch(&self.conn, reqs);
        if results.iter().any(Result::is_ok) {
            // A FULL commit fsyncs the WAL, and with it every commit before it.
            self.dirty = !self.full;
        }
        self.transactions += 1;
        if self.transactions.is_multiple_of(WAL_CHECK_EVERY) {
            self.restart_wal_if_large();
        }
        results
    }

    fn set_synchronous(&mut self) {
        let full = !self.shared.deferred.load(Ordering::Relaxed);
        if full == self.full {
            return;
        }
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

    /// Insert `rows` (keys the table does not hold) in one transaction that waits for no
    /// `fsync` (`synchronous=NORMAL`; the next [`sync`](Self::sync) makes it durable): a
    /// bulk load's step (`sqlite_bulk.rs`). A repeated key fails it, and it then writes
    /// nothing.
    pub(super) fn insert_new(&mut self, rows: &[Vec<(Key, Value)>]) -> Result<(), KvError> {
        if self.full {
            self.conn
                .execute_batch("PRAGMA synchronous=NORMAL")
                .map_err(sql_err)?;
            self.full = false;
        }
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(sql_err)?;
        let inserted = insert_rows(&self.conn, rows);
        let end = if inserted.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = self.conn.execute_batch(end).map_err(sql_err);
        if ended.is_err() && inserted.is_ok() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        inserted?;
        ended?;
        self.dirty = true;
        self.transactions += 1;
        self.restart_wal_if_large();
        Ok(())
    }

    /// fsync the WAL if anything was committed since it was last durable. Every commit is
    /// in the WAL or, once checkpointed, in the database file, which SQLite fsyncs before
    /// it lets the WAL be reused.
    pub(super) fn sync(&mut self) -> Result<(), KvError> {
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

/// Commit `req` on the calling thread if syncs are deferred and the connection is free;
/// `None` means: queue it.
pub(super) fn try_commit_inline(
    writer: &SharedWriter,
    shared: &WriterShared,
    req: &CommitRequest,
) -> Option<Result<(), KvError>> {
    if !shared.deferred.load(Ordering::Relaxed) {
        return None;
    }
    let mut writer = writer.try_lock()?;
    writer.commit(&[req]).pop()
}

/// The commit thread: serve queued jobs until the engine is dropped, then sync.
pub(super) fn run(writer: SharedWriter, rx: mpsc::Receiver<Job>) {
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
        let mut writer = writer.lock();
        if !commits.is_empty() {
            let reqs: Vec<&CommitRequest> = commits.iter().map(|(req, _)| req).collect();
            let results = writer.commit(&reqs);
            for ((_, reply), result) in commits.into_iter().zip(results) {
                // A caller that went away no longer needs the answer.
                let _ = reply.send(result);
            }
        }
        if !syncs.is_empty() {
            let result = writer.sync();
            for reply in syncs {
                let _ = reply.send(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(clone_err(e)),
                });
            }
        }
    }
    // The engine is gone: leave nothing it committed waiting for the disk.
    if let Err(e) = writer.lock().sync() {
        tracing::warn!("sqlite: final WAL sync failed: {e}");
    }
}

impl Writer {
    /// Under steady concurrent load some reader is always inside the WAL, so SQLite's
    /// passive auto-checkpoint can never restart it and the file grows without bound.
    /// When it passes [`WAL_RESTART_BYTES`], wait briefly for readers and restart it.
    fn restart_wal_if_large(&mut self) {
        if self.restart_after.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let large = std::fs::metadata(&self.wal)
            .map(|m| m.len() > WAL_RESTART_BYTES)
            .unwrap_or(false);
        if !large {
            return;
        }
        match restart_wal(&self.conn) {
            Ok(true) => self.restart_after = None,
            Ok(false) => self.restart_after = Some(Instant::now() + WAL_RESTART_BACKOFF),
            Err(e) => tracing::warn!("sqlite WAL checkpoint failed: {e}"),
        }
    }
}

/// A checkpoint that restarts the WAL, waiting [`WAL_RESTART_WAIT`] at most for readers;
/// false when one was still in it.
pub(super) fn restart_wal(conn: &Connection) -> Result<bool, KvError> {
    conn.busy_timeout(WAL_RESTART_WAIT).map_err(sql_err)?;
    let outcome = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| {
        row.get::<_, i64>(0)
    });
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_err)?;
    Ok(outcome.map_err(sql_err)? == 0)
}

/// Rows per insert statement of a bulk load: one statement keeps its cursor from row to
/// row, where a statement per row seeks from the root each time.
const ROWS_PER_INSERT: usize = 256;

/// Plain inserts of `rows`, within the caller's transaction, in key order.
fn insert_rows(conn: &Connection, rows: &[Vec<(Key, Value)>]) -> Result<(), KvError> {
    let mut sorted: Vec<&(Key, Value)> = rows.iter().flatten().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let repeated = |e: rusqlite::Error, group: &[&(Key, Value)]| match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            let key = group.first().map(|(k, _)| super::display_key(k));
            KvError::Engine(format!(
                "sqlite: the rows loaded repeat a key (near {})",
                key.unwrap_or_default()
            ))
        }
        e => sql_err(e),
    };
    let mut groups = sorted.chunks_exact(ROWS_PER_INSERT);
    if groups.len() > 0 {
        let mut many = conn
            .prepare_cached(&insert_sql(ROWS_PER_INSERT))
            .map_err(sql_err)?;
        for group in &mut groups {
            let values = group.iter().flat_map(|(k, v)| [k, v]);
            many.execute(rusqlite::params_from_iter(values))
                .map_err(|e| repeated(e, group))?;
        }
    }
    let rest = groups.remainder();
    if !rest.is_empty() {
        let mut one = conn.prepare_cached(&insert_sql(1)).map_err(sql_err)?;
        for row in rest {
            one.execute(params![row.0, row.1])
                .map_err(|e| repeated(e, std::slice::from_ref(row)))?;
        }
    }
    Ok(())
}

/// `INSERT INTO kv (k, v) VALUES (?, ?), …` with `rows` pairs of parameters.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from("INSERT INTO kv (k, v) VALUES (?, ?)");
    for _ in 1..rows {
        sql.push_str(", (?, ?)");
    }
    sql
}

/// Run a batch of commits in one SQLite transaction; one result per commit.
fn commit_batch(conn: &Connection, reqs: &[&CommitRequest]) -> Vec<Result<(), KvError>> {
    let count = reqs.len();
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let e = sql_err(e);
        return (0..count).map(|_| Err(clone_err(&e))).collect();
    }
    let mut results: Vec<Result<(), KvError>> =
        reqs.iter().map(|req| commit_one(conn, req)).collect();
    if let Err(e) = conn.execute_batch("COMMIT") {
        let e = sql_err(e);
        let _ = conn.execute_batch("ROLLBACK");
        for r in results.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(clone_err(&e));
        }
    }
    results
}

pub(super) fn clone_err(e: &KvError) -> KvError {
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
    // One statement for all of the commit's puts: looking it up per row cost a bulk
    // load (thousands of puts per commit) a tenth of the writer thread.
    let mut insert = conn
        .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")
        .map_err(sql_err)?;
    let mut put = |key: &[u8], value: &[u8]| -> Result<(), KvError> {
        insert.execute(params![key, value]).map_err(sql_err)?;
        Ok(())
    };
    for (key, write) in &req.writes {
        match write {
            Write::Put(v) => put(key, v)?,
            Write::Delete => {
                let mut stmt = conn
                    .prepare_cached("DELETE FROM kv WHERE k = ?1")
                    .map_err(sql_err)?;
                stmt.execute(params![key]).map_err(sql_err)?;
            }
            Write::Fields(ops) => {
                if let Some(v) = apply_field_ops(key, get(conn, key)?.as_deref(), ops)? {
                    put(key, &v)?;
                }
            }
        }
    }
    Ok(())
}
