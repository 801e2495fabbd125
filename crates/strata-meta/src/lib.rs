//! Strata's metadata layer: the [`kv`] transaction trait and its engines (memory, SQLite),
//! and [`Meta`], the file-system metadata logic written once above them — namespace,
//! attributes, chunk slice lists, sessions, locks, trash, deletion queues.
//!
//! Persistent formats are specified in `docs/FORMAT.md`; behaviour in `docs/SEMANTICS.md`.

pub mod acl;
pub mod codec;
pub mod error;
pub mod format;
pub mod juicefs;
pub mod keys;
pub mod kv;
mod meta;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::{MetaError, Result};
pub use format::{DEFAULT_STORE, Encryption, Format, META_VERSION, StoreSpec, WrappedKey};
pub use kv::render_txn_metrics;
pub use meta::{
    BinaryDumpOptions, BinaryDumpSummary, ChunkRecord, CompactCandidate, Ctx, DUMP_BIN_VERSION,
    DUMP_VERSION, DirEntry, DumpLine, DumpNode, DumpOptions, DumpProtection, DumpStats, Entry,
    FallocateMode, GroupMember, LockKind, MAX_SLICES_PER_CHUNK, MAY_EXEC, MAY_READ, MAY_WRITE,
    Meta, MetaOptions, NamespaceProblem, NamespaceReport, OpenState, Opened, Placement,
    PopulateLayout, PopulateShape, PopulateSpec, Population, PosixLock, Quota, QuotaTarget, Raw,
    RecordPage, RemoveOptions, RenameFlags, RestoreOutcome, ScanCursor, SessionDetail, SessionInfo,
    SetAttr, SliceDeletion, StatFs, SubtreeUsage, TRASH_NAME, TierPolicy, TimeSet, TrashEntry,
    TrashUse, WriteOutcome, XattrFlags, absent_xattr_is_enodata, binary_dump_summary,
    days_from_civil, hour_name, is_binary, now_ns, parse_hour_name, trash_entry_name,
};
