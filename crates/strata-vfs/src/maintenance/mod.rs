//! Whole-volume maintenance that needs both metadata and objects: `gc` (leaked objects,
//! pending deletions) and `fsck` (missing blocks, namespace counters). Both compare two
//! sorted streams — the bucket listing and the metadata's block references — through an
//! [external sort](extsort), so their memory stays fixed however many objects a volume has.
//! Also automatic metadata backups into the bucket ([`backup`]). Progress is published
//! through [`Progress`] for the CLI to draw.

pub mod backup;
pub mod extsort;
pub mod fsck;
pub mod gc;
pub mod mover;
mod orphans;
pub mod placement_check;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use strata_chunk::{block_key, block_sizes};
use strata_meta::{Meta, MetaError, ScanCursor};
use strata_object::{ObjectError, ObjectInfo, ObjectStore};
use strata_types::Ino;

use extsort::{ExternalSorter, SortedLines};

/// Errors of the maintenance tools.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    #[error("metadata: {0}")]
    Meta(#[from] MetaError),
    #[error("object store: {0}")]
    Object(#[from] ObjectError),
    #[error("sort spill directory: {0}")]
    Io(#[from] std::io::Error),
    /// The volume kept changing under the scan (slices shared meanwhile) so no safe
    /// answer could be given.
    #[error("{0}")]
    Unstable(String),
}

pub type Result<T, E = MaintenanceError> = std::result::Result<T, E>;

/// Live progress of a long command: a stage name, items and bytes done, and the expected
/// total when known (0 = unknown).
#[derive(Debug, Default)]
pub struct Progress {
    stage: Mutex<String>,
    pub done: AtomicU64,
    pub bytes: AtomicU64,
    pub total: AtomicU64,
}

impl Progress {
    /// Start a new stage; counters restart at zero.
    pub fn stage(&self, name: &str, total: u64) {
        *self.stage.lock() = name.to_string();
        self.done.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    pub fn stage_name(&self) -> String {
        self.stage.lock().clone()
    }

    pub fn add(&self, items: u64, bytes: u64) {
        self.done.fetch_add(items, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Where external sorts spill, and the memory of each in-memory run (bytes).
#[derive(Clone, Debug)]
pub struct SortSpace {
    pub dir: PathBuf,
    pub budget: usize,
}

impl SortSpace {
    pub fn sorter(&self) -> std::io::Result<ExternalSorter> {
        ExternalSorter::new(&self.dir, self.budget)
    }
}

/// The lines `line_of` makes of the objects under `prefix` (`None` skips one), sorted.
pub async fn sorted_listing(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    space: &SortSpace,
    progress: &Progress,
    mut line_of: impl FnMut(&ObjectInfo) -> Option<String> + Send,
) -> Result<SortedLines> {
    let mut sorter = space.sorter()?;
    let mut spill_error = None;
    store
        .scan_all(prefix, &mut |info| {
            progress.add(1, info.size);
            let Some(line) = line_of(&info) else {
                return Ok(());
            };
            sorter.push(line).map_err(|e| {
                spill_error = Some(e);
                ObjectError::Other("the external sort could not spill".into())
            })
        })
        .await
        .map_err(|e| match spill_error.take() {
            Some(io) => MaintenanceError::Io(io),
            None => MaintenanceError::Object(e),
        })?;
    Ok(sorter.finish()?)
}

/// Every block that a chunk of some file references, once per chunk, handed to `each`
/// with the file's inode; reads the metadata in pages. Chunks of deleted files still
/// waiting to be freed are included.
pub async fn for_each_block_ref(
    meta: &Meta,
    block_size: u32,
    progress: &Progress,
    each: impl FnMut(Ino, String) -> Result<()>,
) -> Result<()> {
    for_each_record(meta, block_size, progress, each, |_| Ok(())).await
}

/// [`for_each_block_ref`], also handing `each_inode` every inode that has a core record,
/// in inode order, from the same scan.
pub async fn for_each_record(
    meta: &Meta,
    block_size: u32,
    progress: &Progress,
    mut each: impl FnMut(Ino, String) -> Result<()>,
    mut each_inode: impl FnMut(Ino) -> Result<()>,
) -> Result<()> {
    let mut cursor: ScanCursor = None;
    loop {
        let (page, next) = meta.record_page(&cursor, SCAN_PAGE).await?;
        for ino in &page.inodes {
            each_inode(*ino)?;
        }
        for chunk in &page.chunks {
            let mut seen: Vec<(u64, u32)> = Vec::new();
            for s in chunk.slices.iter().filter(|s| s.id != 0) {
                if seen.contains(&(s.id, s.size)) {
                    continue;
                }
                seen.push((s.id, s.size));
                for (index, len) in block_sizes(s.size, block_size) {
                    each(chunk.ino, block_key(s.id, index, len))?;
                }
            }
            progress.add(1, 0);
        }
        cursor = next;
        if cursor.is_none() {
            return Ok(());
        }
    }
}

/// Keys read per metadata scan page.
pub(crate) const SCAN_PAGE: usize = 2000;

/// Where a block object's name says it belongs: (slice id, block index, block size).
pub fn parse_block_key(key: &str) -> Option<(u64, u32, u32)> {
    let (id, index, size) = strata_object::parse_block_name(key)?;
    (strata_chunk::block_key(id, index, size) == key).then_some((id, index, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_keys_parse_back() {
        let key = strata_chunk::block_key(1_234_567, 3, 4096);
        assert_eq!(parse_block_key(&key), Some((1_234_567, 3, 4096)));
        assert_eq!(parse_block_key("chunks/0/0/1_0"), None);
        assert_eq!(parse_block_key("chunks/9/9/1_0_4"), None, "wrong directory");
        assert_eq!(parse_block_key("meta/dump.json.gz"), None);
    }
}
