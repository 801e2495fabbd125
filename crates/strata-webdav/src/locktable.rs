//! The WebDAV lock table and its rules (RFC 4918 §6–7), apart from where it is stored:
//! which locks cover a path, when a new lock conflicts, what a request must submit to
//! change a locked resource. Paths are volume paths (`/sub/dir/file`, URL-encoded), so
//! servers serving different `--subdir`s of one volume share one table.

use serde::{Deserialize, Serialize};

/// Version of the stored table (FORMAT.md "webdav v1").
pub const TABLE_VERSION: u32 = 1;

/// One lock as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLock {
    pub token: String,
    /// The locked resource's volume path, URL-encoded.
    pub path: String,
    pub principal: Option<String>,
    /// The `<D:owner>` element the client sent, as XML.
    pub owner: Option<String>,
    /// Milliseconds since the epoch when the lock lapses; `None`: never.
    pub expires_ms: Option<i64>,
    /// The timeout granted, in seconds; `None`: infinite.
    pub timeout_s: Option<u64>,
    pub shared: bool,
    /// Depth infinity: the lock covers everything below the path.
    pub deep: bool,
}

/// The table as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockTable {
    pub v: u32,
    pub locks: Vec<StoredLock>,
}

/// The segments of a path (no empty ones: `/a/b/` is `["a", "b"]`).
pub fn segs(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

impl StoredLock {
    /// Whether the lock is in force at `now_ms`.
    pub fn live(&self, now_ms: i64) -> bool {
        self.expires_ms.is_none_or(|t| t > now_ms)
    }

    /// Whether the lock applies to `target`: on it, or deep on one of its ancestors.
    pub fn covers(&self, target: &[&str]) -> bool {
        let own = segs(&self.path);
        own == target || (self.deep && target.starts_with(&own))
    }

    /// Whether the lock is on something strictly below `target`.
    pub fn below(&self, target: &[&str]) -> bool {
        let own = segs(&self.path);
        own.len() > target.len() && own.starts_with(target)
    }
}

/// Who asks, and with which lock tokens (from the `If:` header).
#[derive(Clone, Copy, Debug)]
pub struct Submitted<'a> {
    pub principal: Option<&'a str>,
    pub ignore_principal: bool,
    pub tokens: &'a [String],
}

impl Submitted<'_> {
    fn holds(&self, lock: &StoredLock) -> bool {
        self.tokens.contains(&lock.token)
            && (self.ignore_principal || self.principal == lock.principal.as_deref())
    }
}

impl LockTable {
    /// An empty table of the current version.
    pub fn new() -> LockTable {
        LockTable {
            v: TABLE_VERSION,
            locks: Vec::new(),
        }
    }

    /// Drop the locks that lapsed; whether any did.
    pub fn prune(&mut self, now_ms: i64) -> bool {
        let before = self.locks.len();
        self.locks.retain(|l| l.live(now_ms));
        self.locks.len() != before
    }

    fn live(&self, now_ms: i64) -> impl Iterator<Item = &StoredLock> {
        self.locks.iter().filter(move |l| l.live(now_ms))
    }

    /// The lock a new lock at `path` would conflict with, if any: an exclusive lock
    /// conflicts with every lock on the path, on a deep ancestor, or (when `deep`) below;
    /// shared locks only with exclusive ones.
    pub fn conflict(
        &self,
        path: &str,
        shared: bool,
        deep: bool,
        now_ms: i64,
    ) -> Option<&StoredLock> {
        let target = segs(path);
        self.live(now_ms)
            .find(|l| (l.covers(&target) || (deep && l.below(&target))) && !(l.shared && shared))
    }

    /// May a request that submitted `who` change `path` (and, when `deep`, everything
    /// below it)? The lock in the way if not: an exclusive lock it does not hold, a
    /// shared lock when it holds none of those on the path, or (deep) any lock below it
    /// does not hold.
    pub fn check(
        &self,
        path: &str,
        who: Submitted<'_>,
        deep: bool,
        now_ms: i64,
    ) -> Result<(), &StoredLock> {
        let target = segs(path);
        let mut holds = false;
        let mut first_shared = None;
        for l in self.live(now_ms).filter(|l| l.covers(&target)) {
            if who.holds(l) {
                holds = true;
            } else if !l.shared {
                return Err(l);
            } else {
                first_shared.get_or_insert(l);
            }
        }
        if !holds && let Some(l) = first_shared {
            return Err(l);
        }
        if deep
            && let Some(l) = self
                .live(now_ms)
                .find(|l| l.below(&target) && !who.holds(l))
        {
            return Err(l);
        }
        Ok(())
    }

    /// The lock `token` if it applies to `path` (UNLOCK and refresh name the resource
    /// and a lock that covers it).
    pub fn find(&self, path: &str, token: &str, now_ms: i64) -> Option<usize> {
        let target = segs(path);
        self.locks
            .iter()
            .position(|l| l.token == token && l.live(now_ms) && l.covers(&target))
    }

    /// The locks in force on `path` (lockdiscovery).
    pub fn discover(&self, path: &str, now_ms: i64) -> Vec<StoredLock> {
        let target = segs(path);
        self.live(now_ms)
            .filter(|l| l.covers(&target))
            .cloned()
            .collect()
    }

    /// Remove the locks on `path` and below (the resource was deleted or moved); whether
    /// any were.
    pub fn remove_under(&mut self, path: &str) -> bool {
        let target = segs(path);
        let before = self.locks.len();
        self.locks.retain(|l| {
            let own = segs(&l.path);
            !own.starts_with(&target)
        });
        self.locks.len() != before
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    fn lock(token: &str, path: &str, shared: bool, deep: bool) -> StoredLock {
        StoredLock {
            token: token.into(),
            path: path.into(),
            principal: None,
            owner: None,
            expires_ms: None,
            timeout_s: None,
            shared,
            deep,
        }
    }

    fn who(tokens: &[String]) -> Submitted<'_> {
        Submitted {
            principal: None,
            ignore_principal: false,
            tokens,
        }
    }

    #[test]
    fn exclusive_locks_conflict_on_the_path_and_deep_ancestors() {
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/dir", false, true));
        assert!(t.conflict("/dir/file", true, false, 0).is_some());
        assert!(t.conflict("/dir", false, false, 0).is_some());
        assert!(t.conflict("/other", false, false, 0).is_none());
        // A deep new lock conflicts with locks below it.
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/dir/file", false, false));
        assert!(t.conflict("/dir", false, true, 0).is_some());
        assert!(t.conflict("/dir", false, false, 0).is_none());
        // A depth-0 lock does not cover what is below it.
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/dir", false, false));
        assert!(t.conflict("/dir/file", false, false, 0).is_none());
    }

    #[test]
    fn shared_locks_share() {
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/f", true, false));
        assert!(t.conflict("/f", true, false, 0).is_none());
        assert!(t.conflict("/f", false, false, 0).is_some());
    }

    #[test]
    fn changes_need_the_token_of_every_lock_in_the_way() {
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/dir", false, true));
        t.locks.push(lock("b", "/dir/sub/x", false, false));
        assert_eq!(
            t.check("/dir/f", who(&[]), false, 0).unwrap_err().token,
            "a"
        );
        assert!(t.check("/dir/f", who(&["a".into()]), false, 0).is_ok());
        // Deleting /dir/sub needs b as well.
        let err = t
            .check("/dir/sub", who(&["a".into()]), true, 0)
            .unwrap_err();
        assert_eq!(err.token, "b");
        assert!(
            t.check("/dir/sub", who(&["a".into(), "b".into()]), true, 0)
                .is_ok()
        );
        // The owner of a lock must match unless told to ignore it.
        t.locks[0].principal = Some("alice".into());
        let tokens = ["a".to_string()];
        let bob = Submitted {
            principal: Some("bob"),
            ignore_principal: false,
            tokens: &tokens,
        };
        assert!(t.check("/dir/f", bob, false, 0).is_err());
    }

    #[test]
    fn lapsed_locks_are_gone() {
        let mut t = LockTable::new();
        let mut l = lock("a", "/f", false, false);
        l.expires_ms = Some(1000);
        t.locks.push(l);
        assert!(t.check("/f", who(&[]), false, 999).is_err());
        assert!(t.check("/f", who(&[]), false, 1000).is_ok());
        assert!(t.find("/f", "a", 1000).is_none());
        assert!(t.prune(1000));
        assert!(t.locks.is_empty());
    }

    #[test]
    fn unlock_finds_a_covering_lock_and_delete_removes_the_subtree() {
        let mut t = LockTable::new();
        t.locks.push(lock("a", "/dir", false, true));
        t.locks.push(lock("b", "/dir/x", true, false));
        t.locks.push(lock("c", "/dirx", true, false));
        assert_eq!(t.find("/dir/x", "a", 0), Some(0));
        assert_eq!(t.find("/other", "a", 0), None);
        assert_eq!(t.discover("/dir/x", 0).len(), 2);
        assert!(t.remove_under("/dir"));
        assert_eq!(t.locks.len(), 1);
        assert_eq!(t.locks[0].token, "c");
    }
}
