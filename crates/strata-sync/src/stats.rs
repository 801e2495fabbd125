//! Counters of a sync run, read live by the progress view and once for the summary.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a run has done so far.
#[derive(Debug, Default)]
pub struct SyncStats {
    pub listed_src: AtomicU64,
    pub listed_dst: AtomicU64,
    /// Files (and symlinks) copied, and their bytes.
    pub copied: AtomicU64,
    pub copied_bytes: AtomicU64,
    /// Files whose contents were compared (`--check-new`, `--check-all`), and their bytes.
    pub checked: AtomicU64,
    pub checked_bytes: AtomicU64,
    /// Keys left alone because the destination already matches.
    pub skipped: AtomicU64,
    pub skipped_bytes: AtomicU64,
    /// Keys left out by size, age or `--existing`.
    pub filtered: AtomicU64,
    pub dirs_made: AtomicU64,
    pub deleted_src: AtomicU64,
    pub deleted_dst: AtomicU64,
    pub failed: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub listed_src: u64,
    pub listed_dst: u64,
    pub copied: u64,
    pub copied_bytes: u64,
    pub checked: u64,
    pub checked_bytes: u64,
    pub skipped: u64,
    pub skipped_bytes: u64,
    pub filtered: u64,
    pub dirs_made: u64,
    pub deleted_src: u64,
    pub deleted_dst: u64,
    pub failed: u64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl SyncStats {
    /// Add what another run (a queued task, every worker's tasks) counted.
    pub fn add(&self, s: &Snapshot) {
        let pairs = [
            (&self.listed_src, s.listed_src),
            (&self.listed_dst, s.listed_dst),
            (&self.copied, s.copied),
            (&self.copied_bytes, s.copied_bytes),
            (&self.checked, s.checked),
            (&self.checked_bytes, s.checked_bytes),
            (&self.skipped, s.skipped),
            (&self.skipped_bytes, s.skipped_bytes),
            (&self.filtered, s.filtered),
            (&self.dirs_made, s.dirs_made),
            (&self.deleted_src, s.deleted_src),
            (&self.deleted_dst, s.deleted_dst),
            (&self.failed, s.failed),
        ];
        for (counter, by) in pairs {
            bump(counter, by);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            listed_src: get(&self.listed_src),
            listed_dst: get(&self.listed_dst),
            copied: get(&self.copied),
            copied_bytes: get(&self.copied_bytes),
            checked: get(&self.checked),
            checked_bytes: get(&self.checked_bytes),
            skipped: get(&self.skipped),
            skipped_bytes: get(&self.skipped_bytes),
            filtered: get(&self.filtered),
            dirs_made: get(&self.dirs_made),
            deleted_src: get(&self.deleted_src),
            deleted_dst: get(&self.deleted_dst),
            failed: get(&self.failed),
        }
    }
}

impl Snapshot {
    /// The summary line printed at the end of a run.
    pub fn summary(&self) -> String {
        format!(
            "found {} in source, {} in destination; copied {} ({} bytes), checked {}, skipped {} ({} bytes), \
             filtered {}, dirs made {}, deleted {} from source and {} from destination, failed {}",
            self.listed_src,
            self.listed_dst,
            self.copied,
            self.copied_bytes,
            self.checked,
            self.skipped,
            self.skipped_bytes,
            self.filtered,
            self.dirs_made,
            self.deleted_src,
            self.deleted_dst,
            self.failed
        )
    }
}
