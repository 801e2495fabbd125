//! Writeback (`mount --writeback`): puts land in a staging directory on the local disk
//! and return; background uploaders copy them to the object store in the order they were
//! staged (FIFO, so no block waits behind newer ones) after `upload_delay`, and delete the
//! staged copy once the store has it. A failed upload stays staged and is retried with
//! backoff (the object store may be down for a while); nothing is dropped.
//!
//! Durability: puts are appended to the staging log ([`staging_log`], a few large segment
//! files, not a file per block), and [`ObjectStore::sync`] — which `fsync` and the
//! metadata engine's sync call — `fdatasync`s every segment written since the last sync
//! (and the directory, if a segment was created) before returning. A restart finds the
//! staged blocks and uploads them (after `kill -9`, and after a machine crash for what was
//! synced). Blocks staged as files by an earlier version (staging v1) are moved into the
//! log when it opens.
//!
//! Reads of a staged block are served from the staging copy. Beyond `max_bytes` staged,
//! puts go straight to the object store.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use strata_types::metrics::{Exposition, Kind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::local::INLINE_MAX_U64;
use crate::seal::Domain;
use crate::sealed::Unit;
use crate::{ObjectError, ObjectInfo, ObjectStore, ObjectVisitor, Result};

mod staging_log;
use staging_log::StagingLog;

/// Settings of a writeback store.
#[derive(Clone, Debug)]
pub struct WritebackOptions {
    /// The staging directory (created 0700).
    pub dir: PathBuf,
    /// Most bytes staged at once; puts beyond it go to the object store directly.
    pub max_bytes: u64,
    /// How long a staged block waits before its upload starts.
    pub upload_delay: Duration,
    /// Uploads at once.
    pub uploaders: usize,
    /// An encrypted volume's keys: staged blocks are sealed (FORMAT.md, "staging v2").
    pub keys: Option<Arc<crate::seal::Keys>>,
    /// Whether new puts are staged. Without it the store only uploads what an earlier
    /// run staged (a client started without `--writeback` on a cache directory that
    /// holds staged blocks) and sends every put straight to the object store.
    pub stage_new: bool,
}

/// A staged object waiting for (or in) its upload.
#[derive(Debug)]
struct Queued {
    key: String,
    /// When its upload may start.
    due: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// Staged objects by key, with their sizes.
    staged: HashMap<String, u64>,
    /// Staged objects not being uploaded, oldest first.
    queue: VecDeque<Queued>,
    bytes: u64,
}

/// Counters of a writeback store (docs/METRICS.md).
#[derive(Debug, Default)]
struct Counters {
    staged: AtomicU64,
    uploaded: AtomicU64,
    upload_failures: AtomicU64,
    bypassed: AtomicU64,
}

/// Called with each object once it is uploaded (and before its staged copy goes): the
/// data layer keeps small blocks in its cache then rather than when they are written, so
/// a small file costs one local file on the write path, not two.
pub type UploadedHook = Box<dyn Fn(String, Bytes) -> BoxFuture<'static, ()> + Send + Sync>;

/// A store that stages puts locally and uploads them in the background.
#[derive(Debug)]
pub struct Writeback {
    staging: Arc<StagingLog>,
    remote: Arc<dyn ObjectStore>,
    opts: WritebackOptions,
    state: Mutex<State>,
    /// Woken when something is queued or an upload ends.
    changed: Notify,
    counters: Counters,
    uploaded: OnceLock<HookSlot>,
}

/// The uploaded hook, in a wrapper that `Debug` can print.
struct HookSlot(UploadedHook);

impl std::fmt::Debug for HookSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UploadedHook")
    }
}

impl Writeback {
    /// Open the staging directory over `remote` and queue what an earlier run left there.
    pub async fn open(opts: WritebackOptions, remote: Arc<dyn ObjectStore>) -> Result<Arc<Self>> {
        create_private_dir(&opts.dir)?;
        let dir = opts.dir.clone();
        let (staging, found) = blocking(move || StagingLog::open(&dir)).await?;
        let staging = Arc::new(staging);
        let mut found: Vec<(String, u64)> = found.into_iter().map(|r| (r.key, r.size)).collect();
        found.extend(import_staging_v1(&opts.dir, &staging).await?);
        let wb = Arc::new(Writeback {
            staging,
            remote,
            opts,
            state: Mutex::default(),
            changed: Notify::new(),
            counters: Counters::default(),
            uploaded: OnceLock::new(),
        });
        let mut state = wb.state.lock();
        // In the order they were staged, oldest first.
        for (key, size) in found {
            state.bytes += size;
            state.staged.insert(key.clone(), size);
            // Left over from an earlier run: due at once, whatever the delay.
            state.queue.push_back(Queued {
                key,
                due: Instant::now(),
            });
        }
        if !state.staged.is_empty() {
            tracing::info!(
                "writeback: {} blocks ({} bytes) staged by an earlier run: uploading them",
                state.staged.len(),
                state.bytes
            );
        }
        drop(state);
        Ok(wb)
    }

    /// Call `hook` with each object once it is uploaded; false if a hook was set already.
    pub fn on_uploaded(&self, hook: UploadedHook) -> bool {
        self.uploaded.set(HookSlot(hook)).is_ok()
    }

    /// Start the uploaders; they stop (between uploads) when `stop` is cancelled.
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        for _ in 0..self.opts.uploaders.max(1) {
            let (wb, stop) = (self.clone(), stop.clone());
            tokio::spawn(async move { wb.upload_loop(stop).await });
        }
    }

    /// `key` (or its `range`) from the staging copy alone; `None` when it is not staged
    /// here (never was, or uploaded and removed since). Reads through this store use it
    /// first, and so does a cache-group peer asking the writer for a block it staged.
    pub async fn get_staged(&self, key: &str, range: Option<Range<u64>>) -> Option<Result<Bytes>> {
        if !self.is_staged(key) {
            return None;
        }
        if let Some(keys) = &self.opts.keys {
            return self.get_sealed(keys.ring(), key, range).await;
        }
        // Uploaded since the check (`None`): the store has it.
        let small = range
            .as_ref()
            .is_some_and(|r| r.end.saturating_sub(r.start) <= INLINE_MAX_U64)
            || self.staging.size(key).is_some_and(|n| n <= INLINE_MAX_U64);
        if small {
            return self.staging.read(key, range);
        }
        let (staging, key) = (self.staging.clone(), key.to_string());
        blocking(move || Ok(staging.read(&key, range)))
            .await
            .unwrap_or_else(|e| Some(Err(e)))
    }

    /// `range` of the sealed staged copy of `key`: the whole copy read and opened.
    async fn get_sealed(
        &self,
        ring: Arc<crate::seal::KeyRing>,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Option<Result<Bytes>> {
        let (staging, key) = (self.staging.clone(), key.to_string());
        blocking(move || {
            Ok(staging.read(&key, None).map(|read| {
                let stored = read?;
                crate::sealed::open_in(&ring, Domain::Staging, Unit::LARGE, &key, stored)
                    .map(|plain| crate::slice_range(plain, range))
            }))
        })
        .await
        .unwrap_or_else(|e| Some(Err(e)))
    }

    /// Objects and bytes staged now.
    pub fn staged(&self) -> (usize, u64) {
        let state = self.state.lock();
        (state.staged.len(), state.bytes)
    }

    /// Upload everything staged now, ignoring the upload delay; returns when nothing is
    /// staged, or with an error once `timeout` passed.
    pub async fn flush(&self, timeout: Duration) -> Result<()> {
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now);
        for q in self.state.lock().queue.iter_mut() {
            q.due = q.due.min(now);
        }
        self.changed.notify_waiters();
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let (blocks, _) = self.staged();
            if blocks == 0 {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ObjectError::Timeout(timeout));
            }
            // Uploaders wake waiters at each end of an upload.
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), changed).await;
        }
    }

    async fn upload_loop(self: Arc<Self>, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        loop {
            // Listen before looking, so a put queued in between is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let next = self.next_due();
            let Some(key) = next.key else {
                let wait = next.wait.unwrap_or(Duration::from_secs(3600));
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = changed => {}
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            };
            match self.upload_staged(&key).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(e) => {
                    self.counters
                        .upload_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "writeback: uploading {key} failed (kept staged, retried in {backoff:?}): {e}"
                    );
                    self.requeue_front(key);
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
            self.changed.notify_waiters();
        }
    }

    /// The oldest staged object whose delay has passed (taken off the queue), or how long
    /// until the oldest one is due.
    fn next_due(&self) -> Due {
        let mut state = self.state.lock();
        let Some(front) = state.queue.front() else {
            return Due {
                key: None,
                wait: None,
            };
        };
        let now = Instant::now();
        if front.due > now {
            return Due {
                key: None,
                wait: Some(front.due - now),
            };
        }
        let key = state.queue.pop_front().map(|q| q.key);
        Due { key, wait: None }
    }

    fn requeue_front(&self, key: String) {
        let mut state = self.state.lock();
        if state.staged.contains_key(&key) {
            let due = Instant::now();
            state.queue.push_front(Queued { key, due });
        }
    }

    /// Copy one staged object to the store, then drop the staged copy.
    async fn upload_staged(&self, key: &str) -> Result<()> {
        let data = match self.get_staged(key, None).await {
            Some(read) => read?,
            // Deleted while queued (the file was removed): nothing to upload.
            None => {
                self.forget(key);
                return Ok(());
            }
        };
        self.remote.put(key, data.clone()).await?;
        // The staged copy is the only durable one until the store's own sync (a local
        // bucket's put is in the page cache): a power cut after releasing it would lose
        // the block. (A no-op for stores whose puts are durable at once.)
        self.remote.sync().await?;
        if let Some(hook) = self.uploaded.get() {
            (hook.0)(key.to_string(), data).await;
        }
        // Gone from the staged set before the file goes, so readers never miss it.
        if !self.forget(key) {
            // Deleted while it was being uploaded: the copy just stored is an orphan.
            return match self.remote.delete(key).await {
                Ok(()) | Err(ObjectError::NotFound(_)) => Ok(()),
                Err(e) => Err(e),
            };
        }
        self.counters.uploaded.fetch_add(1, Ordering::Relaxed);
        // May delete a segment file.
        let (staging, key) = (self.staging.clone(), key.to_string());
        blocking(move || {
            staging.uploaded(&key);
            Ok(())
        })
        .await
    }

    /// Drop `key` from the staged set; false if it was not there.
    fn forget(&self, key: &str) -> bool {
        let mut state = self.state.lock();
        match state.staged.remove(key) {
            Some(size) => {
                state.bytes = state.bytes.saturating_sub(size);
                state.queue.retain(|q| q.key != key);
                true
            }
            None => false,
        }
    }

    fn is_staged(&self, key: &str) -> bool {
        self.state.lock().staged.contains_key(key)
    }

    /// Stage `data` under `key`, or `false` when the staging area is full.
    async fn stage(&self, key: &str, data: Bytes) -> Result<bool> {
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        // The segments' size on disk, which counts every staged block, and uploaded ones
        // whose segment waits for an older block.
        if self.staging.disk_bytes().saturating_add(len) > self.opts.max_bytes {
            return Ok(false);
        }
        // On the blocking pool even when small: appends take turns, and a large one holds
        // the turn for its whole write.
        let (staging, staged_key) = (self.staging.clone(), key.to_string());
        let ring = self.opts.keys.as_ref().map(|k| k.ring());
        blocking(move || {
            let sealed = match ring {
                Some(ring) => {
                    crate::sealed::seal_in(&ring, Domain::Staging, Unit::LARGE, &staged_key, &data)?
                }
                None => data,
            };
            staging.put(&staged_key, &sealed)
        })
        .await?;
        let mut state = self.state.lock();
        if let Some(old) = state.staged.insert(key.to_string(), len) {
            state.bytes = state.bytes.saturating_sub(old);
        } else {
            let now = Instant::now();
            state.queue.push_back(Queued {
                key: key.to_string(),
                due: now.checked_add(self.opts.upload_delay).unwrap_or(now),
            });
        }
        state.bytes += len;
        drop(state);
        self.counters.staged.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
        Ok(true)
    }

    /// The writeback counters in the Prometheus text format.
    pub fn render_metrics(&self, e: &mut Exposition) {
        let (blocks, bytes) = self.staged();
        e.single(
            "strata_staged_blocks",
            Kind::Gauge,
            "Blocks staged on local disk, not uploaded yet (--writeback).",
            u64::try_from(blocks).unwrap_or(u64::MAX),
        );
        e.single(
            "strata_staged_bytes",
            Kind::Gauge,
            "Bytes staged on local disk, not uploaded yet (--writeback).",
            bytes,
        );
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        for (name, help, value) in [
            (
                "strata_staged_total",
                "Blocks staged since start.",
                load(&self.counters.staged),
            ),
            (
                "strata_staged_uploaded",
                "Staged blocks uploaded since start.",
                load(&self.counters.uploaded),
            ),
            (
                "strata_staged_upload_failures",
                "Uploads of staged blocks that failed (retried).",
                load(&self.counters.upload_failures),
            ),
            (
                "strata_staged_bypassed",
                "Puts sent straight to the object store because staging was full or failed.",
                load(&self.counters.bypassed),
            ),
        ] {
            e.single(name, Kind::Counter, help, value);
        }
    }
}

/// What [`Writeback::next_due`] found.
struct Due {
    key: Option<String>,
    wait: Option<Duration>,
}

/// Run blocking file work on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ObjectError::Other(format!("staging task failed: {e}")))?
}

/// Move blocks an earlier version staged as files (staging v1: `dir/KEY`) into the log,
/// oldest first, make them durable there, then remove the files; returns them.
async fn import_staging_v1(dir: &Path, log: &Arc<StagingLog>) -> Result<Vec<(String, u64)>> {
    let files = Backend::local(dir)?;
    let mut found = Vec::new();
    files
        .scan_all("", &mut |info: ObjectInfo| {
            // Segments are `log-…` at the top; staged keys are `chunks/…`.
            if info.key.contains('/') {
                found.push(info);
            }
            Ok(())
        })
        .await?;
    found.sort_by(|a, b| (a.modified, &a.key).cmp(&(b.modified, &b.key)));
    let mut imported = Vec::with_capacity(found.len());
    for info in &found {
        let data = files.get(&info.key, None).await?;
        let (staging, key) = (log.clone(), info.key.clone());
        blocking(move || staging.put(&key, &data)).await?;
        imported.push((info.key.clone(), info.size));
    }
    if found.is_empty() {
        return Ok(imported);
    }
    let staging = log.clone();
    blocking(move || staging.sync()).await?;
    for info in &found {
        files.delete(&info.key).await?;
    }
    tracing::info!(
        "writeback: moved {} blocks staged as files by an earlier version into the staging log",
        found.len()
    );
    Ok(imported)
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            ObjectError::from_io(
                format_args!("cannot create the staging directory {}", dir.display()),
                &e,
            )
        })
}

#[async_trait]
impl ObjectStore for Writeback {
    fn describe(&self) -> String {
        format!(
            "{} (writeback through {})",
            self.remote.describe(),
            self.opts.dir.display()
        )
    }

    fn cheap_ranges(&self) -> bool {
        self.remote.cheap_ranges()
    }

    fn cheap_ranges_of(&self, key: &str) -> bool {
        self.remote.cheap_ranges_of(key)
    }

    fn range_unit(&self) -> usize {
        self.remote.range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        match self.get_staged(key, range.clone()).await {
            Some(staged) => staged,
            None => self.remote.get(key, range).await,
        }
    }

    /// Staged, or else (staging full, or the cache disk failing) put to the store itself:
    /// staging only makes a put return sooner, so its failure loses nothing.
    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        if !self.opts.stage_new {
            return self.remote.put(key, data).await;
        }
        match self.stage(key, data.clone()).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                "writeback: cannot stage {key}, sending it to the object store directly: {e}"
            ),
        }
        self.counters.bypassed.fetch_add(1, Ordering::Relaxed);
        self.remote.put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.put(key, crate::concat(parts)).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        // Also after its upload: its record may still be on disk.
        self.forget(key);
        if self.staging.holds(key) {
            let (staging, staged_key) = (self.staging.clone(), key.to_string());
            blocking(move || staging.delete(&staged_key)).await?;
        }
        match self.remote.delete(key).await {
            Ok(()) | Err(ObjectError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Make every staged object durable (segments and directory), then the store's own.
    async fn sync(&self) -> Result<u64> {
        let staging = self.staging.clone();
        let staged = blocking(move || staging.sync()).await?;
        let remote = self.remote.sync().await?;
        Ok(staged + remote)
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        if self.is_staged(key)
            && let Some(size) = self.staging.size(key)
        {
            let modified = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let size = match self.opts.keys {
                Some(_) => Unit::LARGE.payload_size(size),
                None => size,
            };
            return Ok(ObjectInfo {
                key: key.to_string(),
                size,
                modified,
            });
        }
        self.remote.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.remote.list(prefix, start_after, limit).await
    }

    async fn scan_all(&self, prefix: &str, each: &mut ObjectVisitor<'_>) -> Result<()> {
        self.remote.scan_all(prefix, each).await
    }
}

/// What the other clients of the volume that write back (`--writeback`) say about a
/// block the object store does not have.
#[derive(Debug)]
pub enum Staged {
    /// No other client writes back: the block is not coming.
    NoWriters,
    /// Some do, but none handed the block over: wait for its upload.
    Elsewhere,
    /// A writer handed over its staged copy (a cache-group peer, DESIGN.md).
    Fetched(Bytes),
}

/// The other clients that stage their writes. Asked only when a block is not found, so
/// it costs nothing on reads that succeed.
#[async_trait]
pub trait StagingWriters: Send + Sync + std::fmt::Debug {
    /// Whether some other client writes back, and its staged copy of `key` (or its
    /// `range`) if one can hand it over.
    async fn ask(&self, key: &str, range: Option<Range<u64>>) -> Staged;
}

/// Reads of blocks another client has staged (`--writeback`) but not uploaded yet: a GET
/// of a block the store does not have asks the writers (a cache-group member hands its
/// staged copy over at once); otherwise, if some client writes back, waits for the block
/// to land, up to `max_wait`, polling with backoff; then the read fails as before, with
/// a log line saying why.
#[derive(Debug)]
pub struct AwaitLanding {
    inner: Arc<dyn ObjectStore>,
    writers: Arc<dyn StagingWriters>,
    max_wait: Duration,
}

impl AwaitLanding {
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        writers: Arc<dyn StagingWriters>,
        max_wait: Duration,
    ) -> AwaitLanding {
        AwaitLanding {
            inner,
            writers,
            max_wait,
        }
    }

    /// Poll the store until the block lands or `max_wait` passes. The writers were asked
    /// already: a copy not handed over then is one being uploaded (or a writer that is
    /// down, whose uploads wait too), so asking again — a listing of the sessions each
    /// time — would only cost metadata round trips.
    async fn wait_for_landing(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            let left = self.max_wait.saturating_sub(started.elapsed());
            if left.is_zero() {
                tracing::error!(
                    "block {key} is still not in the object store after {:?}: the client \
                     that wrote it with --writeback has not uploaded it (is it running?)",
                    self.max_wait
                );
                return Err(ObjectError::NotFound(key.to_string()));
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            match self.inner.get(key, range.clone()).await {
                Err(ObjectError::NotFound(_)) => {}
                landed => return landed,
            }
        }
    }
}

#[async_trait]
impl ObjectStore for AwaitLanding {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn cheap_ranges(&self) -> bool {
        self.inner.cheap_ranges()
    }

    fn cheap_ranges_of(&self, key: &str) -> bool {
        self.inner.cheap_ranges_of(key)
    }

    fn range_unit(&self) -> usize {
        self.inner.range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let first = self.inner.get(key, range.clone()).await;
        if !matches!(first, Err(ObjectError::NotFound(_))) || !key.starts_with("chunks/") {
            return first;
        }
        match self.writers.ask(key, range.clone()).await {
            Staged::NoWriters => first,
            Staged::Fetched(data) => Ok(data),
            Staged::Elsewhere => self.wait_for_landing(key, range).await,
        }
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.inner.put_parts(key, parts).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix, start_after, limit).await
    }

    async fn scan_all(&self, prefix: &str, each: &mut ObjectVisitor<'_>) -> Result<()> {
        self.inner.scan_all(prefix, each).await
    }
}

#[cfg(test)]
mod tests;
