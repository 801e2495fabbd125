//! Whole directories the read cache knows entry by entry: directories this client created
//! (known empty at their creation) and has changed alone since. Their listings read
//! nothing from the engine: any page of them is cut from the rows kept here.
//!
//! A whole range is kept current by this client's own commits, applied in place as each
//! returns (their written values are known); it is dropped when another client changes a
//! key in it (the feed), when one of this client's commits touches it in a way that is not
//! known (a field update the engine did not report), and when trust is lost. Own commits
//! may return in any order; two that wrote the same key conflict unless one read the
//! other's result, so the one applied last at the engine has the higher number (it was
//! numbered after the other applied). Each row, and each name removed, remembers the
//! number of the commit that wrote it; a write numbered below that is stale: ignored.
//!
//! Like pages, whole ranges must not overlap (directories' prefixes are disjoint): the one
//! a key can be in is the one with the smallest end above it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Instant;

use super::ranges::Rows;
use super::{Seen, TRUSTED_FOR};
use crate::kv::{Key, Value};

#[derive(Debug)]
struct Whole {
    start: Key,
    /// Each name's entry and the number of the own commit that wrote it (0: none).
    rows: BTreeMap<Key, (Value, u64)>,
    /// Names removed by own commits, with the number of the commit that removed each.
    removed: std::collections::HashMap<Key, u64>,
    /// Every own commit up to this number had returned when the range became known.
    after: u64,
    /// Own commits announced before they returned: the rows do not hold them yet, so
    /// nothing is answered until each is applied.
    pending: std::collections::BTreeSet<u64>,
    at: Instant,
    /// When its rows last changed.
    updated: Instant,
}

impl Whole {
    fn answers(&self, start: &[u8], now: Instant) -> bool {
        start >= &self.start[..]
            && self.pending.is_empty()
            && now.duration_since(self.at) < TRUSTED_FOR
    }
}

/// What the cache knows of an own commit when its announcement arrives.
#[derive(Clone, Copy, Debug)]
pub(super) struct Announced {
    /// Applied or surely not (no error other than a conflict).
    pub certain: bool,
    /// It returned (its writes were applied to the kept rows, or dropped them).
    pub returned: bool,
}

/// Whole ranges by their end.
#[derive(Debug)]
pub(super) struct Wholes {
    by_end: BTreeMap<Key, Whole>,
    rows: usize,
    /// Rows (and names removed, per range) kept at most over all whole ranges.
    max_rows: usize,
}

impl Default for Wholes {
    fn default() -> Wholes {
        Wholes::with_limit(super::budget::Limits::default().rows)
    }
}

impl Wholes {
    /// No whole ranges, keeping at most `max_rows` rows.
    pub(super) fn with_limit(max_rows: usize) -> Wholes {
        Wholes {
            by_end: BTreeMap::new(),
            rows: 0,
            max_rows,
        }
    }

    /// Up to `limit` rows of the whole range ending at `end`, from `start` on, if that
    /// range is kept, holds `start` and became known less than [`TRUSTED_FOR`] ago; with
    /// when they last changed (own commits change them one by one: no single view).
    pub(super) fn get(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        now: Instant,
    ) -> Option<(Rows, Seen)> {
        let whole = self.by_end.get(end)?;
        if !whole.answers(start, now) {
            return None;
        }
        let from = (Bound::Included(start), Bound::Unbounded);
        let rows = whole.rows.range::<[u8], _>(from).take(limit);
        let rows = rows.map(|(k, (v, _))| (k.clone(), v.clone())).collect();
        // Own commits change the rows one by one: no single view.
        let seen = Seen {
            views: Default::default(),
            at: whole.updated,
            version: 0,
            confirmed: false,
        };
        Some((rows, seen))
    }

    /// Whether [`get`](Self::get) would answer, without cutting the rows.
    pub(super) fn holds(&self, start: &[u8], end: &[u8], now: Instant) -> bool {
        self.by_end
            .get(end)
            .is_some_and(|whole| whole.answers(start, now))
    }

    /// `start..end` is known to hold nothing (a directory this client just created; the
    /// caller checked that nothing in it changed since). `after`: every own commit up to
    /// this number had returned before the creation began.
    pub(super) fn insert_empty(&mut self, start: &[u8], end: &[u8], after: u64, now: Instant) {
        if start >= end || self.overlaps(start, end) {
            return;
        }
        let whole = Whole {
            start: start.to_vec(),
            rows: BTreeMap::new(),
            removed: Default::default(),
            after,
            pending: Default::default(),
            at: now,
            updated: now,
        };
        if let Some(old) = self.by_end.insert(end.to_vec(), whole) {
            self.rows -= old.rows.len();
        }
    }

    /// Another client changed `key`: drop the whole range holding it.
    pub(super) fn changed(&mut self, key: &[u8]) {
        if let Some(end) = self.holding(key) {
            self.drop_range(&end);
        }
    }

    /// This client's commit `seq` wrote `key`: `Some(value)` (`Some(None)`: deleted) when
    /// the written value is known, `None` when it is not.
    pub(super) fn own_write(&mut self, key: &[u8], value: Option<Option<&[u8]>>, seq: u64) {
        let Some(end) = self.holding(key) else { return };
        let Some(whole) = self.by_end.get_mut(&end) else {
            return;
        };
        let Some(value) = value else {
            self.drop_range(&end);
            return;
        };
        whole.pending.remove(&seq);
        let last = whole.rows.get(key).map(|(_, by)| *by);
        if last.or_else(|| whole.removed.get(key).copied()) > Some(seq) {
            // A later commit of this key applied after it at the engine.
            return;
        }
        let before = whole.rows.len();
        whole.updated = Instant::now();
        match value {
            Some(v) => {
                whole.removed.remove(key);
                whole.rows.insert(key.to_vec(), (v.to_vec(), seq));
            }
            None => {
                whole.rows.remove(key);
                whole.removed.insert(key.to_vec(), seq);
            }
        }
        let size = whole.rows.len() + whole.removed.len();
        self.rows = self.rows + whole.rows.len() - before;
        if self.rows > self.max_rows || size > self.max_rows {
            self.drop_range(&end);
        }
    }

    /// This client's commit `seq` that wrote `key` was announced. `held(after)` says
    /// whether a range known since `after` holds its effect already (it had returned,
    /// surely applied, before); `certain` whether it surely applied or not (an uncertain
    /// one drops the range); `returned` whether its return was already applied here (if
    /// the range is still kept, it took the commit in place). A commit announced before
    /// it returned keeps the range from answering until it is applied.
    pub(super) fn own_announced(&mut self, key: &[u8], seq: u64, how: Announced) {
        let Some(end) = self.holding(key) else { return };
        let Some(whole) = self.by_end.get_mut(&end) else {
            return;
        };
        if !how.certain {
            self.drop_range(&end);
        } else if seq > whole.after && !how.returned {
            whole.pending.insert(seq);
        }
    }

    /// Trust was lost: forget every whole range.
    pub(super) fn clear(&mut self) {
        self.by_end.clear();
        self.rows = 0;
    }

    /// The end of the whole range holding `key`, if one does.
    fn holding(&self, key: &[u8]) -> Option<Key> {
        let above = (Bound::Excluded(key), Bound::Unbounded);
        let (end, whole) = self.by_end.range::<[u8], _>(above).next()?;
        (&whole.start[..] <= key).then(|| end.clone())
    }

    fn overlaps(&self, start: &[u8], end: &[u8]) -> bool {
        let above = (Bound::Excluded(start), Bound::Unbounded);
        self.by_end
            .range::<[u8], _>(above)
            .next()
            .is_some_and(|(other_end, other)| &other.start[..] < end && other_end[..] != end[..])
    }

    /// Forget the ranges too old to answer (known [`TRUSTED_FOR`] ago or longer).
    pub(super) fn sweep(&mut self, now: Instant) {
        let old: Vec<Key> = self
            .by_end
            .iter()
            .filter(|(_, whole)| now.duration_since(whole.at) >= TRUSTED_FOR)
            .map(|(end, _)| end.clone())
            .collect();
        for end in old {
            self.drop_range(&end);
        }
    }

    fn drop_range(&mut self, end: &[u8]) {
        if let Some(old) = self.by_end.remove(end) {
            self.rows -= old.rows.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(rows: &Rows) -> Vec<&[u8]> {
        rows.iter().map(|(k, _)| &k[..]).collect()
    }

    #[test]
    fn own_commits_in_order_keep_a_new_directory_whole() {
        let mut w = Wholes::default();
        let now = Instant::now();
        w.insert_empty(b"d/", b"d0", 0, now);
        assert_eq!(w.get(b"d/", b"d0", 10, now).unwrap().0.len(), 0);
        w.own_write(b"d/b", Some(Some(b"1")), 1);
        w.own_write(b"d/a", Some(Some(b"2")), 2);
        w.own_write(b"d/c", Some(Some(b"3")), 3);
        w.own_write(b"d/b", Some(None), 4);
        w.own_write(b"e/x", Some(Some(b"4")), 5);
        let all = w.get(b"d/", b"d0", 10, now).unwrap().0;
        assert_eq!(names(&all), [&b"d/a"[..], b"d/c"]);
        let page = w.get(b"d/a\0", b"d0", 1, now).unwrap().0;
        assert_eq!(
            names(&page),
            [&b"d/c"[..]],
            "a later page, cut from the rows"
        );
        assert!(
            w.get(b"c", b"d0", 10, now).is_none(),
            "starts before the range"
        );
    }

    #[test]
    fn own_writes_returning_out_of_order_keep_the_newest_per_name() {
        let mut w = Wholes::default();
        let now = Instant::now();
        w.insert_empty(b"d/", b"d0", 0, now);
        w.own_write(b"d/a", Some(Some(b"1")), 5);
        w.own_write(b"d/b", Some(Some(b"1")), 4);
        w.own_write(b"d/a", Some(None), 7);
        w.own_write(b"d/a", Some(Some(b"old")), 6);
        w.own_write(b"d/b", Some(None), 3);
        let all = w.get(b"d/", b"d0", 10, now).unwrap().0;
        assert_eq!(
            names(&all),
            [&b"d/b"[..]],
            "other names' order does not matter"
        );
    }

    #[test]
    fn unknown_own_writes_and_other_clients_drop_it() {
        let mut w = Wholes::default();
        let now = Instant::now();
        w.insert_empty(b"d/", b"d0", 0, now);
        w.own_write(b"d/a", None, 6);
        assert!(w.get(b"d/", b"d0", 10, now).is_none(), "value not known");
        w.insert_empty(b"d/", b"d0", 0, now);
        w.changed(b"d/z");
        assert!(w.get(b"d/", b"d0", 10, now).is_none(), "another client");
        assert_eq!(w.rows, 0);
    }

    #[test]
    fn own_announcements_before_the_return_hold_answers_back() {
        let mut w = Wholes::default();
        let now = Instant::now();
        let returned = Announced {
            certain: true,
            returned: true,
        };
        let early = Announced {
            certain: true,
            returned: false,
        };
        w.insert_empty(b"d/", b"d0", 3, now);
        w.own_write(b"d/a", Some(Some(b"1")), 7);
        w.own_announced(b"d/a", 7, returned);
        assert!(w.get(b"d/", b"d0", 10, now).is_some(), "applied before");
        w.own_announced(b"d/b", 8, early);
        assert!(
            w.get(b"d/", b"d0", 10, now).is_none(),
            "announced, not applied"
        );
        assert!(!w.holds(b"d/", b"d0", now));
        w.own_write(b"d/b", Some(Some(b"2")), 8);
        assert_eq!(w.get(b"d/", b"d0", 10, now).unwrap().0.len(), 2);
        w.own_announced(b"d/a", 2, early);
        assert!(
            w.get(b"d/", b"d0", 10, now).is_some(),
            "returned before it was known"
        );
        let uncertain = Announced {
            certain: false,
            returned: true,
        };
        w.own_announced(b"d/a", 9, uncertain);
        assert!(w.get(b"d/", b"d0", 10, now).is_none());
    }

    #[test]
    fn overlapping_ranges_are_not_kept_and_old_ones_not_answered() {
        let mut w = Wholes::default();
        let now = Instant::now();
        w.insert_empty(b"b", b"d", 0, now);
        w.insert_empty(b"c", b"e", 0, now);
        w.insert_empty(b"a", b"c", 0, now);
        assert!(w.get(b"c", b"e", 10, now).is_none());
        assert!(w.get(b"a", b"c", 10, now).is_none());
        w.insert_empty(b"d", b"f", 0, now);
        assert!(w.get(b"d", b"f", 10, now).is_some(), "adjacent");
        let later = now + TRUSTED_FOR;
        assert!(w.get(b"b", b"d", 10, later).is_none());
    }
}
