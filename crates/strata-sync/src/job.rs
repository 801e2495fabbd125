//! [`Job`]: the work the merge decides on one key. It is run at once ([`crate::run`]) or
//! carried by a queued task to a worker ([`crate::queue`], [`crate::manager`]); this
//! module is the one all of them import.

use crate::endpoint::Entry;

/// The work on one key, as decided by the merge: run at once, or carried by a queued
/// task (sync queue v2, docs/FORMAT.md) to a worker.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Job {
    Copy(Entry),
    Compare(Entry, Entry),
    Mkdir(String),
    DeleteSrc(Entry),
    DeleteDst(Entry),
}
