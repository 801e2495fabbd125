//! The pages of directory listings (key ranges) the read cache keeps while a change feed
//! is live, so listing an unchanged directory again reads no entries from the engine.
//!
//! A page is the answer to one range read: `start..end`, at most `limit` entries. It is
//! kept only if nothing in its range changed between the start of the transaction that
//! read it and its storing (a bounded history of changed keys, like the point cache's),
//! and dropped as soon as a key in its range changes: another client's commit announced
//! through the feed, or this client's own commit when it returns. Whether a kept page may
//! be used at all (the feed is live, and a barrier made every earlier change arrive) is
//! the caller's question; this module only keeps pages exact with respect to the changes
//! it is told about.
//!
//! Pages are grouped by their `end`. Ranges with different ends must not overlap (a
//! directory's pages all end at the end of its prefix, and directories' prefixes are
//! disjoint); a page that would break this is not kept. So the pages a key can be in are
//! all in one group: the one with the smallest end above the key.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use foldhash::fast::RandomState;

use super::{Seen, TRUSTED_FOR};
use crate::kv::{Key, Value};

/// The rows of one range read, shared with every transaction that uses them.
pub type Rows = Arc<[(Key, Value)]>;

#[derive(Debug)]
struct Page {
    rows: Rows,
    /// Which view it came from, and when it was stored.
    seen: Seen,
}

/// The kept pages whose ranges end at one key: `(start, limit)` → page.
type Group = HashMap<(Key, usize), Page, RandomState>;

/// Kept range pages and the recent changes that decide whether a new one may be kept.
#[derive(Debug)]
pub(super) struct Ranges {
    groups: BTreeMap<Key, Group>,
    rows: usize,
    /// Rows kept at most over all pages.
    max_rows: usize,
    /// Changed keys remembered at most (older ones raise the floor instead).
    max_marks: usize,
    /// Keys changed, with the generation of the change, oldest first.
    marks: VecDeque<(u64, Key)>,
    /// Pages read by a transaction that started before this generation are not kept.
    floor: u64,
}

impl Default for Ranges {
    fn default() -> Ranges {
        let limits = super::budget::Limits::default();
        Ranges::with_limit(limits.rows, limits.history)
    }
}

impl Ranges {
    /// No pages, keeping at most `max_rows` rows and remembering `max_marks` changes.
    pub(super) fn with_limit(max_rows: usize, max_marks: usize) -> Ranges {
        Ranges {
            groups: BTreeMap::new(),
            rows: 0,
            max_rows,
            max_marks,
            marks: VecDeque::new(),
            floor: 0,
        }
    }

    /// The rows of the page `start..end` (at most `limit`), if kept and read less than
    /// [`TRUSTED_FOR`] ago, and which view they came from.
    pub(super) fn get(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        now: Instant,
    ) -> Option<(Rows, Seen)> {
        let page = self.groups.get(end)?.get(&(start.to_vec(), limit))?;
        (now.duration_since(page.seen.at) < TRUSTED_FOR).then(|| (page.rows.clone(), page.seen))
    }

    /// Keep what a range read returned, if nothing in the range changed since `since`
    /// (the generation its transaction started at) and it keeps ranges disjoint.
    pub(super) fn store(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        rows: &[(Key, Value)],
        since: u64,
        seen: Seen,
    ) {
        let now = seen.at;
        if since < self.floor || start >= end || self.changed_since(start, end, since) {
            return;
        }
        if !self.fits(start, end) {
            return;
        }
        if self.rows + rows.len() > self.max_rows {
            self.make_room(now, rows.len());
        }
        let page = Page {
            rows: rows.to_vec().into(),
            seen,
        };
        let group = self.groups.entry(end.to_vec()).or_default();
        if let Some(old) = group.insert((start.to_vec(), limit), page) {
            self.rows -= old.rows.len();
        }
        self.rows += rows.len();
    }

    /// `key` changed at `generation`: drop every page whose range holds it.
    pub(super) fn changed(&mut self, key: &[u8], generation: u64) {
        self.marks.push_back((generation, key.to_vec()));
        while self.marks.len() > self.max_marks {
            if let Some((at, _)) = self.marks.pop_front() {
                self.floor = self.floor.max(at + 1);
            }
        }
        let Some((end, group)) = self
            .groups
            .range_mut::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
        else {
            return;
        };
        let before = group.len();
        let mut dropped = 0;
        group.retain(|(start, _), page| {
            let keep = &start[..] > key;
            if !keep {
                dropped += page.rows.len();
            }
            keep
        });
        if group.len() != before {
            self.rows -= dropped;
            if group.is_empty() {
                let end = end.clone();
                self.groups.remove(&end);
            }
        }
    }

    /// Anything may have changed (the feed was lost or came up): drop every page, and
    /// keep none read before `generation`.
    pub(super) fn clear(&mut self, generation: u64) {
        self.groups.clear();
        self.rows = 0;
        self.marks.clear();
        self.floor = self.floor.max(generation);
    }

    /// True when nothing in `start..end` changed after generation `since` and that is
    /// still known (`since` not below the floor).
    pub(super) fn unchanged_since(&self, start: &[u8], end: &[u8], since: u64) -> bool {
        since >= self.floor && !self.changed_since(start, end, since)
    }

    /// True when a key in `start..end` changed after generation `since`.
    fn changed_since(&self, start: &[u8], end: &[u8], since: u64) -> bool {
        self.marks
            .iter()
            .rev()
            .take_while(|(at, _)| *at > since)
            .any(|(_, key)| &key[..] >= start && &key[..] < end)
    }

    /// Whether a page `start..end` keeps the groups' spans disjoint.
    fn fits(&self, start: &[u8], end: &[u8]) -> bool {
        let span_start = |group: &Group| group.keys().map(|(s, _)| s.clone()).min();
        let lowest = self
            .groups
            .get(end)
            .and_then(span_start)
            .map_or(start.to_vec(), |s| s.min(start.to_vec()));
        let below = self
            .groups
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(end)))
            .next_back();
        if below.is_some_and(|(below_end, _)| below_end[..] > lowest[..]) {
            return false;
        }
        let above = self
            .groups
            .range::<[u8], _>((Bound::Excluded(end), Bound::Unbounded))
            .next();
        above.is_none_or(|(_, group)| span_start(group).is_none_or(|s| &s[..] >= end))
    }

    /// Drop the pages too old to answer (read [`TRUSTED_FOR`] ago or longer).
    pub(super) fn sweep(&mut self, now: Instant) {
        self.keep_pages(|page| now.duration_since(page.seen.at) < TRUSTED_FOR);
        if self.marks.len() < self.marks.capacity() / 4 {
            self.marks.shrink_to(self.marks.len() * 2);
        }
    }

    /// Make room for `incoming` more rows: drop old pages, and if that is not enough, the
    /// oldest pages until half the limit is left.
    fn make_room(&mut self, now: Instant, incoming: usize) {
        self.sweep(now);
        if self.rows + incoming <= self.max_rows {
            return;
        }
        let mut pages: Vec<(Instant, usize)> = self
            .groups
            .values()
            .flat_map(|g| g.values())
            .map(|p| (p.seen.at, p.rows.len()))
            .collect();
        pages.sort_unstable_by_key(|page| std::cmp::Reverse(page.0));
        // The time of the oldest page kept: newest first, while they fit in half.
        let mut kept = 0;
        let mut oldest_kept = None;
        for (at, rows) in pages {
            if kept + rows > self.max_rows / 2 {
                break;
            }
            kept += rows;
            oldest_kept = Some(at);
        }
        self.keep_pages(|page| oldest_kept.is_some_and(|t| page.seen.at >= t));
    }

    /// Keep only the pages `keep` accepts, and count the rows left.
    fn keep_pages(&mut self, keep: impl Fn(&Page) -> bool) {
        for group in self.groups.values_mut() {
            group.retain(|_, page| keep(page));
        }
        self.groups.retain(|_, group| !group.is_empty());
        self.rows = self
            .groups
            .values()
            .flat_map(|g| g.values())
            .map(|p| p.rows.len())
            .sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(now: Instant) -> Seen {
        Seen {
            views: Default::default(),
            at: now,
            version: 0,
            confirmed: false,
        }
    }

    fn row(k: &str) -> (Key, Value) {
        (k.as_bytes().to_vec(), b"v".to_vec())
    }

    #[test]
    fn keeps_a_page_until_a_key_in_its_range_changes() {
        let mut r = Ranges::default();
        let now = Instant::now();
        r.store(b"d1/", b"d10", 10, &[row("d1/a"), row("d1/b")], 0, at(now));
        r.store(b"d2/", b"d20", 10, &[row("d2/a")], 0, at(now));
        assert_eq!(r.get(b"d1/", b"d10", 10, now).unwrap().0.len(), 2);
        assert!(r.get(b"d1/", b"d10", 5, now).is_none(), "another limit");
        // A key outside both ranges, then one in the second.
        r.changed(b"d1", 1);
        r.changed(b"d3/x", 2);
        assert!(r.get(b"d1/", b"d10", 10, now).is_some());
        r.changed(b"d2/zz", 3);
        assert!(r.get(b"d2/", b"d20", 10, now).is_none());
        assert!(r.get(b"d1/", b"d10", 10, now).is_some());
        // A new name before every kept entry of the first.
        r.changed(b"d1/", 4);
        assert!(r.get(b"d1/", b"d10", 10, now).is_none());
        assert_eq!(r.rows, 0);
    }

    #[test]
    fn a_later_page_survives_a_change_before_its_start() {
        let mut r = Ranges::default();
        let now = Instant::now();
        r.store(b"d/", b"e", 2, &[row("d/a"), row("d/b")], 0, at(now));
        r.store(b"d/b\0", b"e", 2, &[row("d/c")], 0, at(now));
        r.changed(b"d/aa", 1);
        assert!(r.get(b"d/", b"e", 2, now).is_none());
        assert!(r.get(b"d/b\0", b"e", 2, now).is_some());
        r.changed(b"d/c", 2);
        assert!(r.get(b"d/b\0", b"e", 2, now).is_none());
    }

    #[test]
    fn a_page_read_across_a_change_in_its_range_is_not_kept() {
        let mut r = Ranges::default();
        let now = Instant::now();
        r.changed(b"d/x", 5);
        r.store(b"d/", b"e", 10, &[row("d/a")], 4, at(now));
        assert!(r.get(b"d/", b"e", 10, now).is_none(), "read before it");
        r.store(b"d/", b"e", 10, &[row("d/a"), row("d/x")], 5, at(now));
        assert!(r.get(b"d/", b"e", 10, now).is_some(), "read after it");
        r.clear(9);
        assert!(r.get(b"d/", b"e", 10, now).is_none());
        r.store(b"d/", b"e", 10, &[row("d/a")], 8, at(now));
        assert!(r.get(b"d/", b"e", 10, now).is_none(), "below the floor");
    }

    #[test]
    fn overlapping_ranges_with_other_ends_are_not_kept() {
        let mut r = Ranges::default();
        let now = Instant::now();
        r.store(b"b", b"d", 10, &[row("c")], 0, at(now));
        r.store(b"a", b"c", 10, &[], 0, at(now));
        r.store(b"c", b"e", 10, &[], 0, at(now));
        r.store(b"a", b"z", 10, &[], 0, at(now));
        assert!(r.get(b"a", b"c", 10, now).is_none());
        assert!(r.get(b"c", b"e", 10, now).is_none());
        assert!(r.get(b"a", b"z", 10, now).is_none());
        r.store(b"d", b"f", 10, &[], 0, at(now));
        r.store(b"a", b"b", 10, &[], 0, at(now));
        assert!(r.get(b"d", b"f", 10, now).is_some(), "adjacent");
        assert!(r.get(b"a", b"b", 10, now).is_some(), "adjacent");
        r.changed(b"c", 1);
        assert!(r.get(b"b", b"d", 10, now).is_none());
        assert!(r.get(b"d", b"f", 10, now).is_some());
    }

    #[test]
    fn a_full_cache_keeps_its_newest_pages() {
        let mut r = Ranges::with_limit(8, 1024);
        let then = Instant::now();
        let later = then + std::time::Duration::from_secs(1);
        r.store(
            b"a/",
            b"b",
            10,
            &[row("a/1"), row("a/2"), row("a/3")],
            0,
            at(then),
        );
        r.store(
            b"c/",
            b"d",
            10,
            &[row("c/1"), row("c/2"), row("c/3")],
            0,
            at(later),
        );
        r.store(
            b"e/",
            b"f",
            10,
            &[row("e/1"), row("e/2"), row("e/3")],
            0,
            at(later),
        );
        assert!(r.rows <= 8, "within the limit: {}", r.rows);
        assert!(
            r.get(b"a/", b"b", 10, later).is_none(),
            "the oldest page went first"
        );
        assert!(
            r.get(b"e/", b"f", 10, later).is_some(),
            "the newest is kept"
        );
    }

    #[test]
    fn old_pages_are_not_answered() {
        let mut r = Ranges::default();
        let then = Instant::now();
        r.store(b"d/", b"e", 10, &[row("d/a")], 0, at(then));
        let later = then + TRUSTED_FOR + std::time::Duration::from_secs(1);
        assert!(r.get(b"d/", b"e", 10, later).is_none());
    }
}
