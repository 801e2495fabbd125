//! The `.control` protocol's lines (`docs/FORMAT.md`, ".control protocol"): the requests
//! path tools write and the replies the mount reads back, with what each operation
//! reports. Plain data: the handles are in [`crate::control`], the operations in
//! `control_ops` and `control_warmup`.

use serde::{Deserialize, Serialize};

/// The version of the request and reply lines.
pub const CONTROL_PROTOCOL: u32 = 1;
/// Removal transactions at once of an `rmr` request that does not say.
fn rmr_threads() -> usize {
    strata_meta::RemoveOptions::RMR.threads
}

/// A request line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRequest {
    pub version: u32,
    #[serde(flatten)]
    pub op: ControlOp,
}

/// What a path tool asks the mount to do. Inodes are as the mount shows them (`st_ino`;
/// 1 is the mount's root); names are raw bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlOp {
    /// Remove `parent/name` and everything below it, `threads` transactions at once (a
    /// request without it: 50), through the trash unless `skip_trash` (root only).
    Rmr {
        parent: u64,
        name: Vec<u8>,
        #[serde(default = "rmr_threads")]
        threads: usize,
        #[serde(default)]
        skip_trash: bool,
    },
    /// Copy `src` to `parent/name` sharing its data.
    Clone {
        src: u64,
        parent: u64,
        name: Vec<u8>,
        preserve: bool,
    },
    /// What `ino` is made of.
    Info { ino: u64 },
    /// Sizes and counts of the tree at `ino`, `depth` levels of directories deep.
    Summary { ino: u64, depth: usize },
    /// Merge the fragmented chunks of `ino` (a file, or every file below a directory),
    /// `threads` chunks at a time.
    Compact { ino: u64, threads: usize },
    /// Warm, check or evict the cached blocks of `ino` (a file, or every file below a
    /// directory).
    Warmup {
        ino: u64,
        #[serde(flatten)]
        spec: WarmSpec,
    },
    /// Commit every buffered write, then upload every staged block (`--writeback`),
    /// waiting at most `timeout_secs` (`strata umount --flush`).
    Flush { timeout_secs: u64 },
}

/// A reply line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum ControlReply {
    Progress {
        stage: String,
        done: u64,
        total: u64,
        bytes: u64,
    },
    Done {
        result: ControlResult,
    },
    Failed {
        errno: i32,
        message: String,
    },
}

/// What a finished operation reports, tagged by the operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlResult {
    Removed {
        entries: u64,
    },
    Cloned {
        inodes: u64,
    },
    Info(FileInfo),
    Summary {
        rows: Vec<SummaryRow>,
    },
    Compacted {
        chunks: u64,
        skipped_files: u64,
    },
    Warmed(WarmReport),
    /// Everything is committed and uploaded; `blocks` were staged when the flush began.
    Flushed {
        blocks: u64,
    },
}

/// What `strata info` shows of a file or directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub ino: u64,
    pub kind: String,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub length: u64,
    /// Bytes and inodes of a directory's direct children.
    pub dir_usage: Option<(i64, i64)>,
    pub chunks: Vec<ChunkInfo>,
}

/// One chunk of a file: its slice records and the objects of their blocks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkInfo {
    pub index: u32,
    pub slices: Vec<SliceInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceInfo {
    pub pos: u32,
    pub len: u32,
    pub id: u64,
    pub size: u32,
    pub off: u32,
    pub objects: Vec<String>,
}

/// One directory of a `strata summary`: its path below the asked one, and its totals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub path: Vec<u8>,
    pub bytes: i64,
    pub files: i64,
    pub dirs: i64,
}

/// What `warmup` does to each block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmAction {
    /// Fetch it into the cache that owns it.
    Warm,
    /// Report how much of it is cached.
    Check,
    /// Drop it from the caches.
    Evict,
}

/// A warmup request: which action, on which byte ranges (`(offset, length)`, length 0 =
/// to the end; none = whole files), with how many blocks at once, and whether to return
/// before the blocks are done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmSpec {
    pub action: WarmAction,
    #[serde(default)]
    pub ranges: Vec<(u64, u64)>,
    pub threads: usize,
    #[serde(default)]
    pub background: bool,
    /// Handle a block only while no read of this client is fetching data.
    #[serde(default)]
    pub low_priority: bool,
}

/// What a warmup did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmReport {
    pub files: u64,
    /// Files the caller may not read (left alone).
    pub skipped_files: u64,
    pub blocks: u64,
    /// Bytes of the blocks handled.
    pub bytes: u64,
    /// With `check`: bytes of those blocks found cached.
    pub cached_bytes: u64,
    /// Blocks that failed.
    pub failed: u64,
    /// The blocks are handled in the background (the counts above are the plan).
    pub background: bool,
}
