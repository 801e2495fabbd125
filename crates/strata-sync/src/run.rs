//! One sync run: both sides listed at once into bounded channels, merged in key order,
//! each key's action run by at most `threads` tasks at once; directories' attributes and
//! deletions, which must wait for what they hold, at the end; then one sync of each side
//! that changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use strata_object::limit::Pacer;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::decide::{Action, Options};
use crate::endpoint::{Endpoint, Entry, Kind};
use crate::filter::Filter;
use crate::job::Job;
use crate::manager::Enqueuer;
use crate::stats::{SyncStats, bump};
use crate::{Result, SyncError};

/// Bytes read or written at once when copying a big file.
pub const PART: u64 = 8 << 20;
/// Parts of one file read ahead while earlier ones are written.
const PARTS_AHEAD: usize = 4;
/// Entries a listing may run ahead of the merge.
const LISTED_AHEAD: usize = 4096;

/// Which keys take part.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub filter: Filter,
    /// Only these keys (a `dir/` line stands for everything in it): `--files-from`.
    pub files_from: Option<BTreeSet<String>>,
}

impl Selection {
    fn selects(&self, key: &str) -> bool {
        self.filter.selects(key) && self.listed(key)
    }

    fn listed(&self, key: &str) -> bool {
        let Some(keys) = &self.files_from else {
            return true;
        };
        if keys.contains(key)
            || key.ends_with('/')
                && keys
                    .range(key.to_string()..)
                    .next()
                    .is_some_and(|k| k.starts_with(key))
        {
            return true;
        }
        let mut at = 0;
        while let Some(i) = key[at..].find('/') {
            at += i + 1;
            if keys.contains(&key[..at]) {
                return true;
            }
        }
        false
    }
}

/// What one run shares between its tasks.
pub(crate) struct Run {
    pub(crate) src: Arc<dyn Endpoint>,
    pub(crate) dst: Arc<dyn Endpoint>,
    pub(crate) opts: Options,
    pub(crate) stats: Arc<SyncStats>,
    pub(crate) pacer: Option<Arc<Pacer>>,
}

/// Copy `src` to `dst` as `opts` and `sel` say, counting into `stats`. A key that fails is
/// counted and logged and the run goes on (unless `fail_fast`); `Err` is for a run that
/// could not go on.
pub async fn sync(
    src: Arc<dyn Endpoint>,
    dst: Arc<dyn Endpoint>,
    opts: Options,
    sel: Selection,
    stats: Arc<SyncStats>,
) -> Result<()> {
    merge_all(src, dst, opts, sel, stats, None).await
}

/// [`sync`] as the manager of a queued job: the work on each key goes into `queued`'s
/// queue as tasks for the workers (this process's own among them); directories'
/// attributes and deletions wait for every task to be done.
pub async fn sync_queued(
    src: Arc<dyn Endpoint>,
    dst: Arc<dyn Endpoint>,
    opts: Options,
    sel: Selection,
    stats: Arc<SyncStats>,
    queued: Enqueuer,
) -> Result<()> {
    merge_all(src, dst, opts, sel, stats, Some(queued)).await
}

async fn merge_all(
    src: Arc<dyn Endpoint>,
    dst: Arc<dyn Endpoint>,
    opts: Options,
    sel: Selection,
    stats: Arc<SyncStats>,
    queued: Option<Enqueuer>,
) -> Result<()> {
    if opts.links && !dst.has_dirs() {
        return Err(SyncError::Usage(format!(
            "--links: {} cannot hold symlinks",
            dst.describe()
        )));
    }
    let run = Arc::new(Run {
        pacer: Pacer::new(opts.bwlimit_mbps).map(Arc::new),
        src,
        dst,
        opts,
        stats,
    });
    let sel = Arc::new(sel);
    let mut src_rx = listing(run.src.clone(), sel.clone());
    let mut dst_rx = listing(run.dst.clone(), sel.clone());
    let mut merge = Merge::new(run.clone(), queued);
    let mut src_next = merge.next_src(&mut src_rx).await;
    let mut dst_next = merge.next_dst(&mut dst_rx).await;
    let mut looked = 0u64;
    loop {
        let (s, d) = match (src_next.take(), dst_next.take()) {
            (None, None) => break,
            (Some(s), None) => (Some(s), None),
            (None, Some(d)) => (None, Some(d)),
            (Some(s), Some(d)) => match s.key.cmp(&d.key) {
                std::cmp::Ordering::Less => {
                    dst_next = Some(d);
                    (Some(s), None)
                }
                std::cmp::Ordering::Greater => {
                    src_next = Some(s);
                    (None, Some(d))
                }
                std::cmp::Ordering::Equal => (Some(s), Some(d)),
            },
        };
        if s.is_some() {
            src_next = merge.next_src(&mut src_rx).await;
        }
        if d.is_some() {
            dst_next = merge.next_dst(&mut dst_rx).await;
        }
        if merge.stopped() {
            break;
        }
        let key = s
            .as_ref()
            .or(d.as_ref())
            .map(|e| e.key.clone())
            .unwrap_or_default();
        if !sel.selects(&key) {
            continue;
        }
        // --limit: the first N source keys the filters select, and what the destination
        // holds up to the last of them.
        if run.opts.limit.is_some_and(|limit| looked >= limit) {
            break;
        }
        looked += u64::from(s.is_some());
        merge.handle(s, d).await;
        if merge.stopped() {
            break;
        }
    }
    merge.finish().await
}

/// Start listing `ep` into a bounded channel; a listing that fails sends its error last.
fn listing(ep: Arc<dyn Endpoint>, sel: Arc<Selection>) -> mpsc::Receiver<Result<Entry>> {
    let (tx, rx) = mpsc::channel(LISTED_AHEAD);
    tokio::spawn(async move {
        let prune: Arc<crate::endpoint::Prune> = Arc::new(move |dir: &str| sel.filter.prunes(dir));
        if let Err(e) = ep.list(None, prune, tx.clone()).await {
            let _ = tx.send(Err(e)).await;
        }
    });
    rx
}

/// The merge's state: running tasks and what waits for the end.
struct Merge {
    run: Arc<Run>,
    slots: Arc<Semaphore>,
    tasks: JoinSet<bool>,
    now: i64,
    /// The source listing failed somewhere: from there on, nothing is deleted from the
    /// destination (a key missing from the source may only be unlisted).
    src_incomplete: bool,
    /// Directories whose attributes are set at the end (after what they hold is written).
    dir_attrs: Vec<Entry>,
    /// Destination directories to delete at the end, deepest last in this list.
    dirs_to_delete: Vec<Entry>,
    stop: bool,
    /// The queue the work goes to, for a queued job.
    queued: Option<Enqueuer>,
}

impl Merge {
    fn new(run: Arc<Run>, queued: Option<Enqueuer>) -> Merge {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Merge {
            slots: Arc::new(Semaphore::new(run.opts.threads.max(1))),
            run,
            tasks: JoinSet::new(),
            now,
            src_incomplete: false,
            dir_attrs: Vec::new(),
            dirs_to_delete: Vec::new(),
            stop: false,
            queued,
        }
    }

    fn stopped(&self) -> bool {
        self.stop
    }

    fn failed(&mut self, what: &str, e: &SyncError) {
        tracing::error!("{what}: {e}");
        bump(&self.run.stats.failed, 1);
        self.stop_if_too_many_failures();
    }

    fn stop_if_too_many_failures(&mut self) {
        let failed = self
            .run
            .stats
            .failed
            .load(std::sync::atomic::Ordering::Relaxed);
        if self.run.opts.too_many_failures(failed) {
            self.stop = true;
        }
    }

    async fn next_src(&mut self, rx: &mut mpsc::Receiver<Result<Entry>>) -> Option<Entry> {
        loop {
            match rx.recv().await? {
                Ok(e) => {
                    bump(&self.run.stats.listed_src, 1);
                    return Some(e);
                }
                Err(e) => {
                    self.src_incomplete = true;
                    self.failed(&format!("listing {}", self.run.src.describe()), &e);
                    if self.stop {
                        return None;
                    }
                }
            }
        }
    }

    async fn next_dst(&mut self, rx: &mut mpsc::Receiver<Result<Entry>>) -> Option<Entry> {
        loop {
            match rx.recv().await? {
                Ok(e) => {
                    bump(&self.run.stats.listed_dst, 1);
                    return Some(e);
                }
                Err(e) => {
                    self.failed(&format!("listing {}", self.run.dst.describe()), &e);
                    if self.stop {
                        return None;
                    }
                }
            }
        }
    }

    async fn handle(&mut self, s: Option<Entry>, d: Option<Entry>) {
        let run = self.run.clone();
        let opts = &run.opts;
        if let Some(src) = &s
            && !opts.wants(src, self.now)
        {
            bump(&self.run.stats.filtered, 1);
            return;
        }
        let action = opts.decide(s.as_ref(), d.as_ref(), self.run.dst.has_dirs());
        let key = s
            .as_ref()
            .or(d.as_ref())
            .map(|e| e.key.clone())
            .unwrap_or_default();
        if opts.dry {
            self.dry(action, &key, s.as_ref());
            return;
        }
        match (action, s, d) {
            (Action::Filtered, ..) => bump(&self.run.stats.filtered, 1),
            (Action::Conflict, ..) => {
                let e = SyncError::Check("a file on one side, a directory on the other".into());
                self.failed(&key, &e);
            }
            (Action::Skip, Some(src), _) if src.kind != Kind::Dir => {
                bump(&self.run.stats.skipped, 1);
                bump(&self.run.stats.skipped_bytes, src.size);
                if opts.delete_src {
                    self.spawn(Job::DeleteSrc(src)).await;
                }
            }
            (Action::Skip, ..) => {}
            (Action::Mkdir, Some(src), _) => {
                self.spawn(Job::Mkdir(src.key.clone())).await;
                if opts.perms {
                    self.dir_attrs.push(src);
                }
            }
            (Action::SetAttrs, Some(src), _) => self.dir_attrs.push(src),
            (Action::DeleteDst, _, Some(dst)) => {
                if self.src_incomplete {
                    tracing::warn!("{key}: not deleted: the source's listing failed earlier");
                } else if dst.is_dir() {
                    self.dirs_to_delete.push(dst);
                } else {
                    self.spawn(Job::DeleteDst(dst)).await;
                }
            }
            (Action::Copy, Some(src), _) => self.spawn(Job::Copy(src)).await,
            (Action::Compare, Some(src), Some(dst)) => self.spawn(Job::Compare(src, dst)).await,
            (other, ..) => tracing::debug!("{key}: nothing to do for {other:?}"),
        }
    }

    fn dry(&mut self, action: Action, key: &str, src: Option<&Entry>) {
        let stats = &self.run.stats;
        let size = src.map_or(0, |e| e.size);
        let line = match action {
            Action::Copy => {
                bump(&stats.copied, 1);
                bump(&stats.copied_bytes, size);
                "copy"
            }
            Action::Compare => {
                bump(&stats.checked, 1);
                "compare"
            }
            Action::Mkdir => {
                bump(&stats.dirs_made, 1);
                "mkdir"
            }
            Action::SetAttrs => "set attributes of",
            Action::DeleteDst => {
                bump(&stats.deleted_dst, 1);
                "delete from destination"
            }
            Action::Filtered => {
                bump(&stats.filtered, 1);
                return;
            }
            Action::Conflict => {
                bump(&stats.failed, 1);
                "conflict (file against directory) at"
            }
            Action::Skip => {
                if src.is_some_and(|e| e.kind != Kind::Dir) {
                    bump(&stats.skipped, 1);
                    bump(&stats.skipped_bytes, size);
                }
                return;
            }
        };
        println!("{line} {key}");
    }

    /// Run `job` once a slot is free; reap finished tasks so their results do not pile up.
    async fn spawn(&mut self, job: Job) {
        if let Some(queued) = &mut self.queued {
            if let Err(e) = queued.push(job).await {
                self.failed("queueing a task", &e);
                self.stop = true;
            }
            return;
        }
        let Ok(permit) = self.slots.clone().acquire_owned().await else {
            return;
        };
        while let Some(done) = self.tasks.try_join_next() {
            self.reaped(done);
        }
        let run = self.run.clone();
        self.tasks.spawn(async move {
            let ok = job.run(&run).await;
            drop(permit);
            ok
        });
    }

    fn reaped(&mut self, done: std::result::Result<bool, tokio::task::JoinError>) {
        match done {
            Ok(true) => {}
            Ok(false) => self.stop_if_too_many_failures(),
            Err(e) => self.failed("a copy task", &SyncError::Check(e.to_string())),
        }
    }

    /// Wait for every task, then do what waited for them, then make both sides durable.
    async fn finish(mut self) -> Result<()> {
        while let Some(done) = self.tasks.join_next().await {
            self.reaped(done);
        }
        if let Some(queued) = self.queued.take() {
            // Every task must be done before directories are finished.
            queued.finish(self.stop).await?;
        }
        let run = self.run.clone();
        if !self.stop {
            for dir in std::mem::take(&mut self.dir_attrs).iter().rev() {
                if let Err(e) = run.dst.set_attrs(&dir.key, dir, run.opts.perms).await {
                    self.failed(&dir.key, &e);
                }
            }
            for dir in std::mem::take(&mut self.dirs_to_delete).iter().rev() {
                match run.dst.delete(dir).await {
                    Ok(()) => bump(&run.stats.deleted_dst, 1),
                    // Still holds what the filters kept: not an error.
                    Err(e) => tracing::info!("{}: kept: {e}", dir.key),
                }
            }
        }
        if !run.opts.dry {
            run.dst.sync().await?;
            if run.opts.delete_src {
                run.src.sync().await?;
            }
        }
        Ok(())
    }
}

impl Job {
    /// Do it; false when it failed (already counted and logged).
    pub(crate) async fn run(self, run: &Run) -> bool {
        let stats = &run.stats;
        let (key, outcome) = match self {
            Job::Copy(src) => {
                let r = copy_then_check(run, &src).await;
                (src.key, r)
            }
            Job::Compare(src, dst) => {
                let r = compare_then_copy(run, &src, &dst).await;
                (src.key, r)
            }
            Job::Mkdir(key) => {
                let r = run.dst.mkdir(&key).await;
                if r.is_ok() {
                    bump(&stats.dirs_made, 1);
                }
                (key, r)
            }
            Job::DeleteSrc(src) => {
                let r = run.src.delete(&src).await;
                if r.is_ok() {
                    bump(&stats.deleted_src, 1);
                }
                (src.key, r)
            }
            Job::DeleteDst(dst) => {
                let r = run.dst.delete(&dst).await;
                if r.is_ok() {
                    bump(&stats.deleted_dst, 1);
                }
                (dst.key, r)
            }
        };
        match outcome {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("{key}: {e}");
                bump(&stats.failed, 1);
                false
            }
        }
    }
}

/// Copy `src`, compare the copy with `--check-new`, delete the source with `--delete-src`.
async fn copy_then_check(run: &Run, src: &Entry) -> Result<()> {
    copy(run, src).await?;
    if run.opts.check_change && src.kind == Kind::File {
        unchanged_since_listed(run, src).await?;
    }
    bump(&run.stats.copied, 1);
    bump(&run.stats.copied_bytes, src.size);
    if run.opts.check_new && src.kind == Kind::File {
        let copy = Entry {
            id: 0,
            ..src.clone()
        };
        if !same_contents(run, src, &copy).await? {
            return Err(SyncError::Check("the copy differs from its source".into()));
        }
        bump(&run.stats.checked, 1);
        bump(&run.stats.checked_bytes, src.size);
    }
    if run.opts.delete_src {
        run.src.delete(src).await?;
        bump(&run.stats.deleted_src, 1);
    }
    Ok(())
}

/// `--check-change`: the source file still has the size and time it was listed with.
async fn unchanged_since_listed(run: &Run, src: &Entry) -> Result<()> {
    let now = run.src.stat(&src.key).await?;
    let same = now
        .as_ref()
        .is_some_and(|n| (n.size, n.mtime, n.mtime_nsec) == (src.size, src.mtime, src.mtime_nsec));
    if same {
        return Ok(());
    }
    let what = match now {
        None => "was deleted".to_string(),
        Some(n) => format!("now has {} bytes, mtime {}", n.size, n.mtime),
    };
    Err(SyncError::Check(format!(
        "the source changed while it was copied ({what}; listed with {} bytes, mtime {})",
        src.size, src.mtime
    )))
}

/// `--check-all` on a key whose sizes agree: copy only if the contents differ.
async fn compare_then_copy(run: &Run, src: &Entry, dst: &Entry) -> Result<()> {
    let same = same_contents(run, src, dst).await?;
    bump(&run.stats.checked, 1);
    bump(&run.stats.checked_bytes, src.size);
    if !same {
        return copy_then_check(run, src).await;
    }
    bump(&run.stats.skipped, 1);
    bump(&run.stats.skipped_bytes, src.size);
    if run.opts.delete_src {
        run.src.delete(src).await?;
        bump(&run.stats.deleted_src, 1);
    }
    Ok(())
}

/// The ranges a file of `size` bytes is copied in.
fn parts(size: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..size.div_ceil(PART)).map(move |i| {
        let off = i * PART;
        (off, PART.min(size - off))
    })
}

/// Copy one file or symlink; a file appears whole at its key or not at all.
async fn copy(run: &Run, src: &Entry) -> Result<()> {
    if src.kind == Kind::Symlink {
        let target = src.target.as_deref().unwrap_or_default();
        run.dst.symlink(&src.key, target).await?;
        if run.opts.perms {
            run.dst.set_attrs(&src.key, src, true).await?;
        }
        return Ok(());
    }
    let mut writer = run.dst.create(&src.key).await?;
    let written = async {
        let mut reads = futures::stream::iter(parts(src.size))
            .map(|(off, len)| async move { (len, run.src.read(src, off, len).await) })
            .buffered(PARTS_AHEAD);
        while let Some((len, data)) = reads.next().await {
            let data = data?;
            if u64::try_from(data.len()).ok() != Some(len) {
                return Err(SyncError::Check(
                    "the source file changed size while it was copied".into(),
                ));
            }
            if let Some(p) = &run.pacer {
                p.pace(data.len()).await;
            }
            writer.write(data).await?;
        }
        Ok(())
    }
    .await;
    match written {
        Ok(()) => writer.finish(src, run.opts.perms).await,
        Err(e) => {
            writer.abort().await;
            Err(e)
        }
    }
}

/// Whether `src` and `dst` hold the same bytes, read part by part from both.
async fn same_contents(run: &Run, src: &Entry, dst: &Entry) -> Result<bool> {
    if src.size != dst.size {
        return Ok(false);
    }
    for (off, len) in parts(src.size) {
        let (a, b): (Result<Bytes>, Result<Bytes>) =
            tokio::join!(run.src.read(src, off, len), run.dst.read(dst, off, len));
        if a? != b? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_from_selects_listed_keys_their_directories_and_what_is_in_them() {
        let keys: BTreeSet<String> = ["a/b", "d/"].iter().map(|s| s.to_string()).collect();
        let sel = Selection {
            files_from: Some(keys),
            ..Selection::default()
        };
        assert!(sel.selects("a/b"));
        assert!(sel.selects("a/"));
        assert!(sel.selects("d/x/y"));
        assert!(!sel.selects("a/c"));
        assert!(!sel.selects("e"));
    }

    #[test]
    fn big_files_are_cut_in_parts() {
        let all: Vec<(u64, u64)> = parts(2 * PART + 1).collect();
        assert_eq!(all, [(0, PART), (PART, PART), (2 * PART, 1)]);
        assert_eq!(parts(0).count(), 0);
    }
}
