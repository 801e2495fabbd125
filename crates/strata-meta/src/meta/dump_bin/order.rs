//! Pages of several key ranges read at once but written in range order, so a binary dump
//! holds its records in key order whatever the number of scans. Order is what makes a
//! load fast on SQLite: rows that arrive in key order are appended to the table's B-tree
//! (a million files loaded in 1.5 s), rows from many places at once are each inserted
//! after a seek from the root (2.2 s; docs/PERFORMANCE.md, session 36).
//!
//! A page of the range being written (the *head*) goes out at once; pages of later ranges
//! wait in memory until their range is the head. Waiting pages are bounded
//! ([`WAITING_BYTES`]): past the bound only the head's range is read further.

use std::collections::{BTreeMap, VecDeque};

use crate::error::Result;
use crate::kv::{Key, Value};

/// Memory that pages waiting for their turn may take.
pub(super) const WAITING_BYTES: usize = 8 << 20;

type Rows = Vec<(Key, Value)>;

/// The pages waiting for their turn, and which ranges are done (see the module doc).
pub(super) struct RangeOrder {
    ranges: usize,
    /// The first range not yet completely written.
    head: usize,
    waiting: BTreeMap<usize, VecDeque<Rows>>,
    finished: Vec<bool>,
    waiting_bytes: usize,
}

/// Memory a waiting row takes beside its bytes: two vectors' headers and allocations.
const ROW_OVERHEAD: usize = 80;

/// Memory `rows` take while they wait.
fn size_of(rows: &Rows) -> usize {
    rows.iter()
        .map(|(k, v)| k.len() + v.len() + ROW_OVERHEAD)
        .sum()
}

impl RangeOrder {
    pub(super) fn new(ranges: usize) -> RangeOrder {
        RangeOrder {
            ranges,
            head: 0,
            waiting: BTreeMap::new(),
            finished: vec![false; ranges],
            waiting_bytes: 0,
        }
    }

    /// Whether range `range` may be read further: it is the head, or waiting pages leave
    /// room.
    pub(super) fn may_read(&self, range: usize) -> bool {
        range == self.head || self.has_room()
    }

    /// Whether waiting pages leave room for more.
    pub(super) fn has_room(&self) -> bool {
        self.waiting_bytes < WAITING_BYTES
    }

    /// Everything was written.
    pub(super) fn all_written(&self) -> bool {
        self.head >= self.ranges
    }

    /// A page of `range` arrived (`last`: the range has no more): write what is now in
    /// turn through `write`, in order.
    pub(super) fn arrived(
        &mut self,
        range: usize,
        rows: Rows,
        last: bool,
        write: &mut impl FnMut(&[(Key, Value)]) -> Result<()>,
    ) -> Result<()> {
        if range == self.head {
            write(&rows)?;
        } else {
            self.waiting_bytes += size_of(&rows);
            self.waiting.entry(range).or_default().push_back(rows);
        }
        if let Some(done) = self.finished.get_mut(range) {
            *done |= last;
        }
        while self.finished.get(self.head).copied().unwrap_or(false) {
            self.head += 1;
            if let Some(pages) = self.waiting.remove(&self.head) {
                for page in pages {
                    self.waiting_bytes -= size_of(&page);
                    write(&page)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(range: u8, n: u8) -> Rows {
        vec![(vec![range, n], vec![0; 10])]
    }

    #[test]
    fn pages_are_written_in_range_order_whatever_order_they_arrive_in() {
        let mut order = RangeOrder::new(3);
        let mut out: Vec<Key> = Vec::new();
        let mut write = |rows: &[(Key, Value)]| {
            out.extend(rows.iter().map(|(k, _)| k.clone()));
            Ok(())
        };
        order.arrived(2, page(2, 0), true, &mut write).unwrap();
        order.arrived(1, page(1, 0), false, &mut write).unwrap();
        order.arrived(0, page(0, 0), false, &mut write).unwrap();
        order.arrived(1, page(1, 1), true, &mut write).unwrap();
        assert!(!order.all_written());
        order.arrived(0, page(0, 1), true, &mut write).unwrap();
        assert!(order.all_written());
        assert_eq!(order.waiting_bytes, 0);
        assert_eq!(
            out,
            vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1], vec![2, 0]]
        );
    }

    #[test]
    fn past_the_bound_only_the_head_is_read_further() {
        let mut order = RangeOrder::new(2);
        let big = vec![(vec![1], vec![0; WAITING_BYTES])];
        order.arrived(1, big, false, &mut |_| Ok(())).unwrap();
        assert!(order.may_read(0), "the head always");
        assert!(!order.may_read(1), "a later range waits");
        order.arrived(0, Vec::new(), true, &mut |_| Ok(())).unwrap();
        assert!(order.may_read(1), "its pages written, it is the head");
        assert_eq!(order.waiting_bytes, 0);
    }
}
