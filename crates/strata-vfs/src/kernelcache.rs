//! Whether the kernel's page cache of a file may be kept at open (FOPEN_KEEP_CACHE).
//!
//! The kernel drops a FUSE file's cached pages at every open unless told to keep them.
//! This client remembers, per inode, the modification and change times and the length the
//! cached pages belong to: the attributes seen at this client's last open, or those its last committed
//! write left (written bytes go through the page cache). An open that finds the
//! same times and length keeps the pages (a commit of new data always moves ctime); any change — by this client or
//! another — drops them, so close-to-open consistency holds.

use std::collections::HashMap;

use parking_lot::Mutex;
use strata_types::{Attr, Ino, Nanos};

/// Inodes remembered at most; past this the table starts over (opens then re-read).
const MAX_TRACKED: usize = 100_000;

/// What the kernel's cached pages of each inode belong to.
#[derive(Debug, Default)]
pub(crate) struct KernelCacheTracker {
    seen: Mutex<HashMap<Ino, (Nanos, Nanos, u64)>>,
}

impl KernelCacheTracker {
    /// At open: true when the cached pages match `attr`; remembers `attr` either way.
    pub fn check_at_open(&self, ino: Ino, attr: &Attr) -> bool {
        let mut seen = self.seen.lock();
        let now = (attr.mtime, attr.ctime, attr.length);
        let keep = seen.get(&ino) == Some(&now);
        if !keep {
            if seen.len() >= MAX_TRACKED {
                seen.clear();
            }
            seen.insert(ino, now);
        }
        keep
    }

    /// After this client's writes to `ino` were committed: its pages hold what `attr` says.
    pub fn record(&self, ino: Ino, attr: &Attr) {
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_TRACKED {
            seen.clear();
        }
        seen.insert(ino, (attr.mtime, attr.ctime, attr.length));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(mtime: Nanos, length: u64) -> Attr {
        Attr {
            kind: strata_types::FileType::Regular,
            mode: 0o644,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: 0,
            mtime,
            ctime: 0,
            nlink: 1,
            length,
            parent: Ino::ROOT,
            xattrs: false,
            protection: Default::default(),
        }
    }

    #[test]
    fn keeps_only_unchanged_files() {
        let t = KernelCacheTracker::default();
        let ino = Ino(5);
        assert!(
            !t.check_at_open(ino, &attr(10, 100)),
            "first open: nothing cached"
        );
        assert!(t.check_at_open(ino, &attr(10, 100)), "unchanged: keep");
        assert!(!t.check_at_open(ino, &attr(11, 100)), "mtime changed: drop");
        assert!(
            !t.check_at_open(ino, &attr(11, 200)),
            "length changed: drop"
        );
        t.record(ino, &attr(12, 300));
        assert!(
            t.check_at_open(ino, &attr(12, 300)),
            "after own writes: keep"
        );
    }
}
