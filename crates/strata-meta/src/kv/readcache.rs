//! Recently read values that a writing transaction may assume instead of reading them
//! again: speculative reads, so a create, unlink or rename after the kernel's lookup is
//! one round trip (the commit) on a network engine.
//!
//! Nothing here is ever trusted: a value taken from this cache is recorded in the
//! transaction's read set like any other read and re-checked by the engine at commit.
//! If it was stale the commit conflicts, the keys it used are dropped, and the
//! transaction runs again with fresh reads. A speculative attempt that fails or writes
//! nothing is also run again before anything is returned, since nothing validated what
//! it read. Which keys may be cached is the metadata layer's choice (small, rarely
//! changing records: inode attributes and directory entries).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Key, Value, Write};

/// Entries kept at most; past this expired ones are dropped, and all of them when none had.
const MAX_ENTRIES: usize = 100_000;
/// How long a value stays worth assuming: a stale one costs a retry, nothing more.
const FRESH_FOR: Duration = Duration::from_secs(10);

/// Values (or absences) recently read or written by this client.
pub struct ReadCache {
    cacheable: fn(&[u8]) -> bool,
    entries: Mutex<HashMap<Key, (Option<Value>, Instant)>>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("entries", &self.entries.lock().len())
            .finish()
    }
}

impl ReadCache {
    /// A cache of the keys `cacheable` accepts.
    pub fn new(cacheable: fn(&[u8]) -> bool) -> ReadCache {
        ReadCache {
            cacheable,
            entries: Mutex::default(),
        }
    }

    /// The value last seen under `key`, if recent (`Some(None)`: seen absent).
    pub fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        let entries = self.entries.lock();
        let (value, at) = entries.get(key)?;
        (at.elapsed() < FRESH_FOR).then(|| value.clone())
    }

    /// True when a recent value of `key` is here.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.entries
            .lock()
            .get(key)
            .is_some_and(|(_, at)| at.elapsed() < FRESH_FOR)
    }

    /// Remember what a read returned (ignored for keys not cacheable).
    pub fn remember(&self, key: &[u8], value: Option<&[u8]>) {
        self.remember_all([(key, value)]);
    }

    /// Remember what several reads returned, under one lock (a readdirplus page is a
    /// thousand records).
    pub fn remember_all<'k>(&self, reads: impl IntoIterator<Item = (&'k [u8], Option<&'k [u8]>)>) {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        for (key, value) in reads {
            if !(self.cacheable)(key) {
                continue;
            }
            if entries.len() >= MAX_ENTRIES {
                entries.retain(|_, (_, at)| at.elapsed() < FRESH_FOR);
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
            }
            entries.insert(key.to_vec(), (value.map(<[u8]>::to_vec), now));
        }
    }

    /// A commit of `writes` succeeded: what it put or deleted is now known; records
    /// changed by field updates (applied by the engine to whatever was current) are not.
    pub fn committed(&self, writes: &[(Key, Write)]) {
        for (key, write) in writes {
            match write {
                Write::Put(v) => self.remember(key, Some(v)),
                Write::Delete => self.remember(key, None),
                Write::Fields(_) => self.forget(key),
            }
        }
    }

    /// Drop `key` (it may be stale).
    pub fn forget(&self, key: &[u8]) {
        self.entries.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{FieldOp, FieldUpdate};

    fn only_a(key: &[u8]) -> bool {
        key.first() == Some(&b'A')
    }

    #[test]
    fn remembers_reads_and_commits_of_cacheable_keys() {
        let cache = ReadCache::new(only_a);
        cache.remember(b"A1", Some(b"v1"));
        cache.remember(b"A2", None);
        cache.remember(b"B1", Some(b"x"));
        assert_eq!(cache.get(b"A1"), Some(Some(b"v1".to_vec())));
        assert_eq!(cache.get(b"A2"), Some(None), "absence is remembered");
        assert_eq!(cache.get(b"B1"), None, "not cacheable");
        let ops = vec![FieldOp {
            slot: 0,
            update: FieldUpdate::Add(1),
        }];
        cache.committed(&[
            (b"A1".to_vec(), Write::Delete),
            (b"A2".to_vec(), Write::Put(b"v2".to_vec())),
            (b"A3".to_vec(), Write::Fields(ops)),
        ]);
        assert_eq!(cache.get(b"A1"), Some(None));
        assert_eq!(cache.get(b"A2"), Some(Some(b"v2".to_vec())));
        assert_eq!(cache.get(b"A3"), None, "field updates make it unknown");
        cache.forget(b"A2");
        assert_eq!(cache.get(b"A2"), None);
    }
}
