//! Binary dumps (dump v2, docs/FORMAT.md; `strata dump --binary`): the engine's records
//! as they are, in compressed, checksummed frames, written by several scans at once and
//! loaded by several batches at once — the format for large volumes (the JSON lines of
//! dump v1 stay the readable, engine-neutral and layout-neutral one). A binary dump loads
//! into an empty engine of any kind whose client understands its metadata version.
//! `frame.rs` owns the byte layout, `write.rs` the dump (`order.rs`: its records in key
//! order), `read.rs` the load and `--stat`.

mod frame;
mod order;
mod read;
mod write;

use serde::{Deserialize, Serialize};

pub use frame::is_binary;
pub use read::{BinaryDumpSummary, binary_dump_summary};
pub use write::BinaryDumpOptions;

use super::DumpStats;

/// Version of the binary dump format (`strata_dump` in its header).
pub const DUMP_BIN_VERSION: u32 = 2;

/// The header frame.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BinaryHeader {
    /// [`DUMP_BIN_VERSION`].
    pub strata_dump: u32,
    /// The format record (its `meta_version` is the layout of every record), secret key
    /// removed unless asked to keep it.
    pub format: serde_json::Value,
}

/// The end frame: what came before it, so a cut-off or spliced dump is detected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryEnd {
    pub pairs: u64,
    pub frames: u64,
    pub inodes: u64,
    pub entries: u64,
}

/// Running counts of the records of a dump, by kind.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    pairs: u64,
    /// Inode core records.
    inodes: u64,
    /// Directory entries.
    entries: u64,
    /// Shared slices' reference counts.
    slice_refs: u64,
}

impl Tally {
    fn count(&mut self, key: &[u8]) {
        self.pairs += 1;
        match (key.first(), key.get(9)) {
            (Some(b'A'), Some(b'I')) if key.len() == 10 => self.inodes += 1,
            (Some(b'A'), Some(b'D')) if key.len() > 10 => self.entries += 1,
            (Some(b'K'), _) => self.slice_refs += 1,
            _ => {}
        }
    }

    /// The end frame that `frames` pairs frames holding these records call for.
    fn end(&self, frames: u64) -> BinaryEnd {
        BinaryEnd {
            pairs: self.pairs,
            frames,
            inodes: self.inodes,
            entries: self.entries,
        }
    }

    fn stats(&self) -> DumpStats {
        DumpStats {
            nodes: self.inodes,
            entries: self.entries,
            slice_refs: self.slice_refs,
        }
    }
}
