//! A volume kept entirely in memory (metadata engine, object store, block cache), for the
//! tests of front ends that may depend on nothing below the VFS (feature `testing`).

use std::sync::Arc;

use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::memory::MemoryCache;
use strata_meta::Meta;
use strata_meta::conformance::{MemoryStore, TestStore, test_format, test_options};
use strata_object::backend::Backend;
use strata_object::stack::{StackOptions, build};

use crate::{Vfs, VfsOptions};

/// A formatted in-memory volume and one client of it.
///
/// # Panics
/// If formatting the fresh memory engine fails (it cannot).
pub async fn memory_vfs() -> Vfs {
    let store = MemoryStore::create();
    let meta = Meta::new(store.client(), test_options());
    #[allow(clippy::expect_used)] // test helper
    meta.format(&test_format(0), false)
        .await
        .expect("formatting a memory volume");
    let (objects, _) = build(Arc::new(Backend::memory()), &StackOptions::default());
    let opts = ChunkOptions {
        block_size: 64 << 10,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(objects, Arc::new(MemoryCache::new(64 << 20)), opts);
    Vfs::new(Arc::new(meta), chunks, VfsOptions::default())
}
