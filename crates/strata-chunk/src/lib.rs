//! Strata's data layer: slices → blocks → objects. A slice (one contiguous write inside a
//! 64 MiB chunk) is stored as blocks of at most the volume's block size, each an immutable
//! object named by [`block_key`]. [`ChunkStore`] is the entry point: it hands out
//! [`writer::SliceWriter`]s (buffered under a global [`buffer::BufferBudget`], blocks
//! uploaded as soon as they fill), reads byte ranges of a chunk from its slice list through
//! the block cache ([`cache`]) with one in-flight fetch per block, prefetches for
//! sequential readers ([`readahead`]), and deletes slices' blocks. Clients of one volume
//! may share their caches as a cache group ([`group`]).
//!
//! This crate never sees metadata: callers pass slice lists in and get slice records out.

// The data path converts sizes and offsets with checked conversions, never `as`.
#![warn(clippy::cast_possible_truncation)]

pub mod buffer;
pub mod cache;
pub mod group;
mod inflight;
pub mod readahead;
pub mod reader;
mod segments;
mod store;
mod warm;
pub mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use strata_object::{ObjectError, ObjectStore};

pub use buffer::BufferBudget;
pub use cache::{BlockCache, CacheStats};
pub use store::{ChunkOptions, ChunkStore};
pub use writer::SliceWriter;

/// Errors of the data layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChunkError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A write that a slice writer cannot take (it would leave a gap or touch a block
    /// already uploaded): the caller starts a new slice for it.
    #[error("write at {offset} does not continue this slice: start a new slice")]
    NeedNewSlice { offset: u64 },
    /// A write beyond the end of the chunk.
    #[error("write of {len} bytes at {offset} passes the end of the chunk")]
    OutOfChunk { offset: u64, len: u64 },
    /// A block came back with a different size than its name says.
    #[error("block {key} has {actual} bytes, expected {expected}")]
    BadBlock {
        key: String,
        actual: usize,
        expected: usize,
    },
    #[error("data layer error: {0}")]
    Other(String),
}

pub type Result<T, E = ChunkError> = std::result::Result<T, E>;

/// The object key of block `index` of slice `id`, whose size is `size` bytes:
/// `chunks/{id/1000/1000}/{id/1000}/{id}_{index}_{size}` — JuiceFS's layout.
pub fn block_key(id: u64, index: u32, size: u32) -> String {
    format!(
        "chunks/{}/{}/{id}_{index}_{size}",
        id / 1_000_000,
        id / 1000
    )
}

/// The block length a block key ends with (`…/{id}_{index}_{len}`, [`block_key`]).
pub fn block_len_of(key: &str) -> Option<usize> {
    key.rsplit('_').next()?.parse().ok()
}

/// Sizes of the blocks of a slice of `slice_size` bytes with blocks of `block_size`.
pub fn block_sizes(slice_size: u32, block_size: u32) -> impl Iterator<Item = (u32, u32)> {
    let count = slice_size.div_ceil(block_size);
    (0..count).map(move |i| (i, (slice_size - i * block_size).min(block_size)))
}

/// Counters of the data layer beyond the object store's own.
#[derive(Debug, Default)]
pub struct ChunkStats {
    /// Block fetches that joined another reader's in-flight fetch.
    pub joined_fetches: AtomicU64,
    /// Prefetches started and dropped (queue full).
    pub prefetches: AtomicU64,
    pub prefetches_dropped: AtomicU64,
    /// Blocks uploaded by slice writers.
    pub blocks_uploaded: AtomicU64,
}

impl ChunkStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Delete every block of slice `id` (of `size` bytes) from `store`.
pub async fn delete_slice_blocks(
    store: &Arc<dyn ObjectStore>,
    block_size: u32,
    id: u64,
    size: u32,
) -> Result<()> {
    let deletes = block_sizes(size, block_size).map(|(i, len)| {
        let key = block_key(id, i, len);
        let store = store.clone();
        async move { store.delete(&key).await }
    });
    for r in futures::future::join_all(deletes).await {
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_names_follow_the_juicefs_layout() {
        assert_eq!(block_key(1, 0, 4096), "chunks/0/0/1_0_4096");
        assert_eq!(block_key(1_234_567, 3, 100), "chunks/1/1234/1234567_3_100");
    }

    #[test]
    fn slices_split_into_blocks() {
        let sizes: Vec<_> = block_sizes(10, 4).collect();
        assert_eq!(sizes, vec![(0, 4), (1, 4), (2, 2)]);
        assert_eq!(block_sizes(8, 4).count(), 2);
        assert_eq!(block_sizes(0, 4).count(), 0);
    }
}
