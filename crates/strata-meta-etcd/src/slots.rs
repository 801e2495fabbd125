//! Commit markers, one per commit in flight: how a commit whose answer was lost is
//! settled (applied or not) on etcd.
//!
//! Each writing commit takes a **slot** of this client, `{prefix}#commit/{client}/{slot}`,
//! that no other commit of the client uses until this one's fate is known. The commit
//! compares the slot's marker with the value the client last knew it to hold, and puts
//! its own number there. After a lost answer the client sends one **fence** transaction:
//! "if the marker still holds what it held before the commit, write `fenced-N` there;
//! otherwise read it". etcd applies transactions in log order, so either the lost commit
//! came first (the fence finds its number: applied) or the fence did (the commit's
//! compare can no longer hold: it never applies, however late it arrives). A single
//! marker per client could not tell this: a later commit of the same client overwrites
//! it, and a commit still in flight could apply after the marker was read.
//!
//! A slot whose value is unknown (its commit was cancelled half way, or an error left it
//! unclear) is read again before its next use. The number of slots is the most commits
//! the client ever had in flight at once; they stay in etcd (a few bytes each).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use etcd_client::{Compare, CompareOp, TxnOp, TxnOpResponse, TxnResponse};
use strata_meta::kv::KvError;

/// What the client knows a slot's marker holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    Absent,
    Value(Vec<u8>),
    /// Must be read before the slot is used again.
    Unknown,
}

/// A slot taken by one commit.
#[derive(Debug)]
pub(crate) struct Slot {
    pub index: u32,
    pub known: Known,
}

/// This client's slots not in use.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    free: Mutex<Vec<Slot>>,
    made: AtomicU32,
}

impl Slots {
    /// A free slot, or a new one (never written: this client's id is new).
    pub fn take(&self) -> SlotGuard<'_> {
        let slot = self.free.lock().pop().unwrap_or_else(|| Slot {
            index: self.made.fetch_add(1, Ordering::Relaxed),
            known: Known::Absent,
        });
        SlotGuard {
            slots: self,
            slot: Some(slot),
        }
    }
}

/// A slot in use; goes back to the free list when dropped, as unknown unless its commit
/// said what the marker holds ([`SlotGuard::set`]).
#[derive(Debug)]
pub(crate) struct SlotGuard<'a> {
    slots: &'a Slots,
    slot: Option<Slot>,
}

impl SlotGuard<'_> {
    pub fn index(&self) -> u32 {
        self.slot.as_ref().map_or(0, |s| s.index)
    }

    pub fn known(&self) -> Known {
        self.slot
            .as_ref()
            .map_or(Known::Unknown, |s| s.known.clone())
    }

    /// Record what the marker holds now (kept when the guard is dropped).
    pub fn set(&mut self, known: Known) {
        if let Some(slot) = &mut self.slot {
            slot.known = known;
        }
    }

    /// The slot is being settled or committed: if the future is dropped now, its value
    /// is unknown.
    pub fn in_doubt(&mut self) -> Known {
        let before = self.known();
        self.set(Known::Unknown);
        before
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.slots.free.lock().push(slot);
        }
    }
}

/// "The marker at `key` still holds what is known" (`Known::Unknown` never reaches here).
pub(crate) fn unchanged(key: Vec<u8>, known: &Known) -> Compare {
    match known {
        Known::Value(v) => Compare::value(key, CompareOp::Equal, v.clone()),
        Known::Absent | Known::Unknown => Compare::version(key, CompareOp::Equal, 0),
    }
}

/// What a failed transaction's `else` branch read of the marker (its only operation).
pub(crate) fn read_back(resp: &TxnResponse) -> Result<Known, KvError> {
    match resp.op_responses().first() {
        Some(TxnOpResponse::Get(got)) => Ok(match got.kvs().first() {
            Some(kv) => Known::Value(kv.value().to_vec()),
            None => Known::Absent,
        }),
        _ => Err(KvError::Engine(
            "etcd: a failed commit did not read its marker back".into(),
        )),
    }
}

/// The `else` branch of a commit or a fence: read the marker.
pub(crate) fn read_marker(key: Vec<u8>) -> Vec<TxnOp> {
    vec![TxnOp::get(key, None)]
}

/// The value a fence writes for commit number `seq` (never parses as a commit's
/// "`{number} {client number}`", so the feed does not take it for a commit).
pub(crate) fn fence_value(seq: u64) -> Vec<u8> {
    format!("fenced-{seq}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_with_what_their_commit_left() {
        let slots = Slots::default();
        let (a, b) = {
            let mut first = slots.take();
            let second = slots.take();
            first.set(Known::Value(b"1 7".to_vec()));
            (first.index(), second.index())
            // both dropped: first known, second still absent
        };
        assert_ne!(a, b);
        let again = slots.take();
        let other = slots.take();
        let mut seen = [
            (again.index(), again.known()),
            (other.index(), other.known()),
        ];
        seen.sort_by_key(|(i, _)| *i);
        assert_eq!(
            seen[0],
            (
                a.min(b),
                if a < b {
                    Known::Value(b"1 7".to_vec())
                } else {
                    Known::Absent
                }
            )
        );
        // A third slot is made only when none is free.
        assert_eq!(slots.take().index(), 2);
    }

    #[test]
    fn a_slot_dropped_in_doubt_is_unknown() {
        let slots = Slots::default();
        {
            let mut g = slots.take();
            g.set(Known::Value(b"3 1".to_vec()));
            assert_eq!(g.in_doubt(), Known::Value(b"3 1".to_vec()));
        }
        assert_eq!(slots.take().known(), Known::Unknown);
    }

    #[test]
    fn fence_values_are_not_commit_numbers() {
        assert_eq!(crate::marker_client_seq(&fence_value(9)), None);
    }
}
