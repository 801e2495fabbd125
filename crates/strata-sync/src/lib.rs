//! `strata sync SRC DST`: copy a tree of files from one place to another and keep the two
//! in step, between local directories ([`fs`]), object stores ([`objects`]) and Strata
//! volumes opened without a mount ([`volume`]).
//!
//! Both sides are listed at once, as streams in ascending key order ([`Endpoint::list`]),
//! and merged ([`run`]): memory stays fixed whatever the number of keys (a few directory
//! listings at a time on file systems and volumes, read ahead by `walk`; one page on
//! object stores). What to do with each key is decided by [`decide`] from the flags,
//! filtered by [`filter`]; the copies run
//! `threads` at a time, big files in parts. [`stats::SyncStats`] counts everything for
//! the progress view and the summary. An address naming one file or a key prefix
//! rather than a directory is seen through [`narrow`]; `--start`/`--end` through
//! [`range`]. SRC and DST are opened from their addresses by [`open`], and what they
//! name (a tree, one file, a key prefix) is read by [`pair`].
//!
//! A run may also be shared by processes on many hosts ([`queue`]): the manager lists
//! and merges as above but queues the work as tasks ([`manager`]), which workers
//! lease and do ([`worker`]).

pub mod decide;
pub mod endpoint;
pub mod filter;
pub mod fs;
pub mod job;
pub mod manager;
pub mod narrow;
pub mod objects;
pub mod open;
pub mod pair;
pub mod queue;
pub mod range;
pub mod run;
pub mod stats;
pub mod volume;
mod walk;
pub mod worker;

pub use decide::Options;
pub use endpoint::{Endpoint, Entry, Kind, Writer};
pub use filter::Filter;
pub use narrow::{Narrowed, Shape};
pub use range::Ranged;
pub use run::{Selection, sync, sync_queued};
pub use stats::SyncStats;

use strata_object::ObjectError;
use strata_types::Errno;

/// What went wrong with one key or with the run.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{key}: {source}")]
    Object {
        key: String,
        #[source]
        source: ObjectError,
    },
    #[error("{path}: {errno}")]
    Volume { path: String, errno: Errno },
    /// A pattern of --include/--exclude that cannot be read.
    #[error("bad pattern {pattern:?}: {reason}")]
    BadPattern { pattern: String, reason: String },
    /// Contents differ after a copy (--check-new) or a listing went wrong.
    #[error("{0}")]
    Check(String),
    /// The queue of a job shared by many workers (`--queue`) failed.
    #[error("sync queue: {0}")]
    Queue(#[source] strata_meta::kv::KvError),
    /// Flags or addresses that cannot work together.
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = SyncError> = std::result::Result<T, E>;

impl SyncError {
    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> SyncError {
        SyncError::Io {
            path: path.to_string(),
            source,
        }
    }

    pub(crate) fn object(key: impl std::fmt::Display, source: ObjectError) -> SyncError {
        SyncError::Object {
            key: key.to_string(),
            source,
        }
    }

    pub(crate) fn volume(path: impl std::fmt::Display, errno: Errno) -> SyncError {
        SyncError::Volume {
            path: path.to_string(),
            errno,
        }
    }
}
