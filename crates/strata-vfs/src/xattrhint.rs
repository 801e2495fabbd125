//! Which inodes are known to have no extended attributes, so a getxattr of them is
//! answered (ENODATA) without a metadata round trip.
//!
//! `ls -l` asks every entry for `security.selinux` (and coreutils keeps asking after an
//! ENODATA): on a network engine that was one round trip per entry after the listing.
//! Attributes carry the inode's "may have xattrs" flag (FORMAT.md, metadata version 3);
//! whenever this client receives attributes without it (readdirplus, lookup, getattr,
//! create) it remembers the inode as xattr-free for as long as the kernel may keep those
//! attributes (`--attr-cache`). A setxattr by this client forgets it at once; one by
//! another client is seen within that time, like any other attribute change.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_types::{Attr, Ino};

/// Inodes remembered at most (7/8 of 65,536: the table never grows past 65,536 slots,
/// 1.6 MB); past this the table is emptied of expired entries, and started over when
/// none had expired. `ls -l` asks right after each listed page, well within this.
const MAX_TRACKED: usize = 57_344;

/// Inodes without extended attributes, each until the time its attributes expire.
#[derive(Debug)]
pub(crate) struct XattrFreeInodes {
    /// False on volumes older than metadata version 3, whose flags are not kept.
    enabled: bool,
    ttl: Duration,
    until: Mutex<HashMap<Ino, Instant>>,
}

impl XattrFreeInodes {
    pub fn new(enabled: bool, ttl: Duration) -> XattrFreeInodes {
        XattrFreeInodes {
            enabled: enabled && !ttl.is_zero(),
            ttl,
            until: Mutex::default(),
        }
    }

    /// Attributes of `ino` just read from the metadata engine.
    pub fn seen(&self, ino: Ino, attr: &Attr) {
        if !self.enabled {
            return;
        }
        let mut until = self.until.lock();
        if attr.xattrs {
            until.remove(&ino);
            return;
        }
        let now = Instant::now();
        if until.len() >= MAX_TRACKED {
            until.retain(|_, t| *t > now);
            if until.len() >= MAX_TRACKED {
                until.clear();
            }
        }
        until.insert(ino, now + self.ttl);
    }

    /// This client is about to give `ino` an extended attribute.
    pub fn forget(&self, ino: Ino) {
        if self.enabled {
            self.until.lock().remove(&ino);
        }
    }

    /// True when `ino` is known, right now, to have no extended attributes.
    pub fn has_none(&self, ino: Ino) -> bool {
        self.has_none_at(ino, Instant::now())
    }

    fn has_none_at(&self, ino: Ino, now: Instant) -> bool {
        self.enabled && self.until.lock().get(&ino).is_some_and(|t| *t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_types::FileType;

    fn attr(xattrs: bool) -> Attr {
        Attr {
            kind: FileType::Regular,
            mode: 0o644,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: 0,
            mtime: 0,
            ctime: 0,
            nlink: 1,
            length: 0,
            parent: Ino::ROOT,
            xattrs,
            protection: Default::default(),
        }
    }

    #[test]
    fn remembers_inodes_without_xattrs_until_their_attributes_expire() {
        let hints = XattrFreeInodes::new(true, Duration::from_secs(60));
        let ino = Ino(7);
        assert!(!hints.has_none(ino), "unknown inode");
        hints.seen(ino, &attr(false));
        assert!(hints.has_none(ino));
        hints.seen(ino, &attr(true));
        assert!(!hints.has_none(ino), "flag set: ask the engine");
        hints.seen(ino, &attr(false));
        hints.forget(ino);
        assert!(!hints.has_none(ino), "this client set an xattr");
        hints.seen(ino, &attr(false));
        let later = Instant::now() + Duration::from_secs(61);
        assert!(!hints.has_none_at(ino, later), "past the attribute TTL");
    }

    #[test]
    fn old_volumes_and_uncached_attributes_always_ask() {
        for hints in [
            XattrFreeInodes::new(false, Duration::from_secs(60)),
            XattrFreeInodes::new(true, Duration::ZERO),
        ] {
            hints.seen(Ino(7), &attr(false));
            assert!(!hints.has_none(Ino(7)));
        }
    }
}
