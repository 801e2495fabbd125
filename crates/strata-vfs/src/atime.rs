//! Access times (`--atime-mode`). `noatime` (the default, as JuiceFS) never updates them;
//! `relatime` updates a file's atime on a read (a directory's on a listing) when it is not
//! newer than the mtime or ctime, or is more than a day old — Linux's rule;
//! `strictatime` updates it on every read that reaches this client. Reads the kernel
//! serves from its page cache never reach the client and update nothing.
//!
//! The decision uses the times this client last saw of the inode (at open, listing, or
//! its own update), so a relatime read costs nothing but a map lookup, and at most one
//! metadata write per file per day.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;
use strata_types::{Attr, Ino, Nanos};

use crate::Vfs;

/// When reads update access times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtimeMode {
    #[default]
    NoAtime,
    RelAtime,
    StrictAtime,
}

impl AtimeMode {
    /// `noatime`, `relatime` or `strictatime`.
    pub fn parse(text: &str) -> Option<AtimeMode> {
        match text {
            "noatime" => Some(AtimeMode::NoAtime),
            "relatime" => Some(AtimeMode::RelAtime),
            "strictatime" => Some(AtimeMode::StrictAtime),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AtimeMode::NoAtime => "noatime",
            AtimeMode::RelAtime => "relatime",
            AtimeMode::StrictAtime => "strictatime",
        }
    }
}

/// A day in nanoseconds: relatime's longest gap between updates.
const DAY_NS: Nanos = 86_400 * 1_000_000_000;
/// Inodes remembered at most; past this the table starts over.
const MAX_TRACKED: usize = 100_000;

/// The times this client last saw of each inode, and the updates in flight.
#[derive(Debug, Default)]
pub(crate) struct AtimeTracker {
    seen: Mutex<HashMap<Ino, (Nanos, Nanos, Nanos)>>,
    updating: Mutex<HashSet<Ino>>,
}

/// Linux's relatime rule: update when atime is not after mtime or ctime, or a day old.
fn relatime_due(atime: Nanos, mtime: Nanos, ctime: Nanos, now: Nanos) -> bool {
    atime <= mtime || atime <= ctime || now.saturating_sub(atime) >= DAY_NS
}

impl Vfs {
    /// Remember the times of `ino` as just read from metadata.
    pub(crate) fn note_times(&self, ino: Ino, attr: &Attr) {
        if self.opts.atime_mode == AtimeMode::NoAtime {
            return;
        }
        let mut seen = self.atimes.seen.lock();
        if seen.len() >= MAX_TRACKED {
            seen.clear();
        }
        seen.insert(ino, (attr.atime, attr.mtime, attr.ctime));
    }

    /// `ino` was read (or listed): update its atime if the mode says so. Never fails the
    /// read: a failed update is logged.
    pub(crate) async fn accessed(&self, ino: Ino) {
        let mode = self.opts.atime_mode;
        if mode == AtimeMode::NoAtime || self.opts.read_only {
            return;
        }
        let now = strata_meta::now_ns();
        let due = match (mode, self.atimes.seen.lock().get(&ino)) {
            (AtimeMode::StrictAtime, _) | (_, None) => true,
            (_, Some(&(atime, mtime, ctime))) => relatime_due(atime, mtime, ctime, now),
        };
        if !due || !self.atimes.updating.lock().insert(ino) {
            return;
        }
        match self.meta.touch_atime(ino, now).await {
            Ok(attr) => self.note_times(ino, &attr),
            Err(e) => tracing::debug!("updating the atime of inode {ino}: {e}"),
        }
        self.atimes.updating.lock().remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relatime_follows_linux() {
        let now = 10 * DAY_NS;
        assert!(relatime_due(100, 200, 50, now), "atime before mtime");
        assert!(relatime_due(100, 50, 100, now), "atime equal to ctime");
        assert!(!relatime_due(300, 200, 200, 300 + 1000), "newer and recent");
        assert!(relatime_due(300, 200, 200, 300 + DAY_NS), "a day old");
        assert_eq!(AtimeMode::parse("relatime"), Some(AtimeMode::RelAtime));
        assert_eq!(AtimeMode::parse("lazytime"), None);
    }
}
