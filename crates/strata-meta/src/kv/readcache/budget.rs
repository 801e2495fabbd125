//! How much the read cache keeps within a memory budget (`MetaOptions::cache_size`,
//! `mount --meta-cache-size`): how many point values, and how many rows of listing pages
//! and of whole directories.
//!
//! Recent changes remembered (the invalidation history and the listing pages' change
//! marks) are paid from the budget too.
//!
//! The costs are what one kept item holds in memory, measured on a mount listing a
//! million entries on Redis (docs/PERFORMANCE.md): a value's table slot (the table has a
//! power-of-two number of slots and fills them to 7/8 before doubling) plus its key and
//! value buffers; a row's key and value buffers and its place in a page. The counts are
//! chosen so that the tables at their largest stay within the budget. A full cache drops
//! what is no longer worth keeping and, when that is not enough, keeps its newest half
//! (pages likewise, newest first): a burst pushes out the oldest values, not all of them.
//! The values' table is also kept from doubling itself to get rid of removals' marks
//! ([`State::before_insert`]).

use std::collections::HashMap;
use std::mem::size_of;
use std::time::Instant;

use foldhash::fast::RandomState;

use super::{Entry, FRESH_FOR, State, TRUSTED_FOR};
use crate::kv::Key;

/// Share of the budget for point values, in quarters (the rest keeps rows).
const ENTRY_QUARTERS: usize = 3;
/// Heap bytes of a kept value beside its slot: its key (~20 B) and value (an inode
/// record, ~100 B) buffers, rounded up by the allocator.
const ENTRY_HEAP: usize = 160;
/// Bytes of a kept row: its key and value buffers and its place in a page or tree.
const ROW_COST: usize = 128;
/// The fewest items kept whatever the budget (so a tiny one still helps a listing).
const FLOOR: usize = 1024;
/// Bytes of one remembered change: the key in the invalidation history (queue and
/// per-key map) and among the listing pages' change marks.
const HISTORY_COST: usize = 256;
/// Budget bytes per remembered change (2 KiB: 16,384 changes for 32 MiB).
const BYTES_PER_CHANGE: usize = 2048;

/// Items the cache keeps at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limits {
    /// Point values.
    pub entries: usize,
    /// Rows of kept listing pages; whole directories may keep as many again.
    pub rows: usize,
    /// Recent changes remembered (to tell whether a read under way is older than a
    /// change); older ones only raise a floor.
    pub history: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::within(super::DEFAULT_BUDGET)
    }
}

impl Limits {
    /// The limits for a budget of `bytes`.
    pub(super) fn within(bytes: usize) -> Limits {
        let history = (bytes / BYTES_PER_CHANGE).max(FLOOR);
        let rest = bytes.saturating_sub(history * HISTORY_COST);
        let for_entries = rest / 4 * ENTRY_QUARTERS;
        let for_rows = rest - for_entries;
        Limits {
            entries: entries_within(for_entries, size_of::<(Key, Entry)>() + 1),
            rows: (for_rows / 2 / ROW_COST).max(FLOOR),
            history,
        }
    }
}

impl State {
    /// Before a value is inserted: make room when the values are at their limit, or when
    /// the insert would make the table double itself. Removals leave marks (hashbrown's
    /// tombstones) that use up the table's free slots; when none is left, an insert
    /// cleans the table in place if it is less than half full, and otherwise moves it to
    /// one of twice the size — twice what the budget pays for.
    pub(super) fn before_insert(&mut self, now: Instant) {
        let len = self.entries.len();
        let room = self.entries.capacity();
        self.entries_room = self.entries_room.max(room);
        let would_double =
            room == len && len >= self.entries_room / 2 && self.entries_room >= self.limits.entries;
        if len >= self.limits.entries || would_double {
            self.make_room(now);
        }
    }

    /// Make room for many more inserts at once, so a full cache costs one pass per half
    /// of its size, not one per insert: drop what is no longer worth keeping, and if that
    /// leaves half the limit or more, keep the newest values up to just under half (so the
    /// next insert that finds no free slot cleans the table in place).
    pub(super) fn make_room(&mut self, now: Instant) {
        let trusting = self.trusting(now);
        self.entries.retain(|_, e| worth_keeping(e, now, trusting));
        let keep = (self.limits.entries / 2).saturating_sub(1);
        if self.entries.len() > keep {
            let mut times: Vec<Instant> = self.entries.values().map(|e| e.at).collect();
            let at = times.len() - keep;
            let (_, oldest_kept, _) = times.select_nth_unstable(at);
            let oldest_kept = *oldest_kept;
            self.entries.retain(|_, e| e.at > oldest_kept);
        }
    }
}

/// Whether `entry` is worth assuming at `now`: read less than [`FRESH_FOR`] ago, or
/// trusted and younger than [`TRUSTED_FOR`] while trust holds (`trusting`). What
/// [`State::is_recent`] answers, and what a full cache or a sweep keeps.
pub(super) fn worth_keeping(entry: &Entry, now: Instant, trusting: bool) -> bool {
    let age = now.saturating_duration_since(entry.at);
    age < FRESH_FOR || (entry.trusted && trusting && age < TRUSTED_FOR)
}

/// Give back most of `map`'s room when it holds under a quarter of what it could.
/// Returns whether it shrank.
pub(super) fn shrink_if_sparse<V>(map: &mut HashMap<Key, V, RandomState>) -> bool {
    let sparse = map.len() < map.capacity() / 4;
    if sparse {
        map.shrink_to(map.len() * 2);
    }
    sparse
}

/// The most values a table with slots of `slot` bytes may hold within `bytes`: 7/8 of
/// the largest power-of-two slot count whose slots and values' buffers fit.
fn entries_within(bytes: usize, slot: usize) -> usize {
    let cost = |slots: usize| slots * slot + slots / 8 * 7 * ENTRY_HEAP;
    let mut slots = FLOOR;
    while slots
        .checked_mul(2)
        .is_some_and(|bigger| bigger <= bytes && cost(bigger) <= bytes)
    {
        slots *= 2;
    }
    slots / 8 * 7
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_at_their_largest_fit_the_budget() {
        let slot = size_of::<(Key, Entry)>() + 1;
        for mib in [4usize, 16, 32, 100, 1024] {
            let bytes = mib << 20;
            let limits = Limits::within(bytes);
            // The table holding `entries` values has `entries * 8 / 7` slots.
            let slots = limits.entries / 7 * 8;
            assert!(slots.is_power_of_two(), "{mib} MiB: {slots} slots");
            let entries_cost = slots * slot + limits.entries * ENTRY_HEAP;
            let rows_cost = 2 * limits.rows * ROW_COST;
            let history_cost = limits.history * HISTORY_COST;
            assert!(
                entries_cost + rows_cost + history_cost <= bytes,
                "{mib} MiB: {limits:?}"
            );
            // And the next size up would not fit the values' share.
            let doubled = 2 * slots * slot + 2 * limits.entries * ENTRY_HEAP;
            assert!(
                doubled > (bytes - history_cost) / 4 * ENTRY_QUARTERS,
                "{mib} MiB: too cautious"
            );
        }
    }

    #[test]
    fn the_default_budget_keeps_a_20000_entry_directory() {
        // A 20,000-entry `ls -l` warm needs its values (and rows) kept: at the default the
        // values' table must stay at 65,536 slots (57,344 values), as measured.
        let limits = Limits::within(super::super::DEFAULT_BUDGET);
        assert_eq!(limits.entries, 57_344);
        assert!(limits.rows >= 20_000, "{limits:?}");
    }

    #[test]
    fn a_tiny_budget_still_keeps_a_few_pages_worth() {
        let limits = Limits::within(0);
        assert_eq!(limits.entries, FLOOR / 8 * 7);
        assert_eq!(limits.rows, FLOOR);
        assert!(Limits::within(64 << 20).entries > Limits::within(16 << 20).entries);
    }
}
