//! When a mount's changes reach the disk (SQLite engine, local-directory bucket, syncs
//! deferred as on a mount): `close()` makes data visible to every client without syncing;
//! `fsync`, a directory sync, compaction and the freeing of deleted data sync first.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::memory::MemoryCache;
use strata_meta::conformance::{test_format, test_options};
use strata_meta::kv::KvEngine;
use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::{Ctx, Meta};
use strata_object::backend::Backend;
use strata_object::fault::{FaultControl, FaultPlan, Faulty};
use strata_object::stack::{StackOptions, build};
use strata_types::Ino;
use strata_vfs::{Vfs, VfsOptions};

struct Volume {
    dir: tempfile::TempDir,
    bucket: Arc<Backend>,
    objects: Arc<dyn strata_object::ObjectStore>,
    faults: Arc<FaultControl>,
}

impl Volume {
    async fn new() -> Volume {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bucket")).unwrap();
        let bucket = Arc::new(Backend::local(&dir.path().join("bucket")).unwrap());
        let faults = Arc::new(FaultControl::default());
        let faulty = Arc::new(Faulty::sharing(bucket.clone(), faults.clone()));
        let (objects, _) = build(faulty, &StackOptions::default());
        let vol = Volume {
            dir,
            bucket,
            objects,
            faults,
        };
        let (_, meta) = vol.meta().await;
        meta.format(&test_format(0), false).await.unwrap();
        vol
    }

    async fn meta(&self) -> (Arc<SqliteEngine>, Meta) {
        let engine = Arc::new(SqliteEngine::open(self.dir.path().join("meta.db")).unwrap());
        let meta = Meta::new(engine.clone() as Arc<dyn KvEngine>, test_options());
        (engine, meta)
    }

    /// A client, and its engine to count WAL syncs.
    async fn client(&self) -> (Vfs, Arc<SqliteEngine>) {
        let (engine, meta) = self.meta().await;
        meta.load().await.unwrap();
        let opts = ChunkOptions {
            block_size: 64 << 10,
            ..ChunkOptions::default()
        };
        let cache = Arc::new(MemoryCache::new(16 << 20));
        let chunks = ChunkStore::new(self.objects.clone(), cache, opts);
        (
            Vfs::new(Arc::new(meta), chunks, VfsOptions::default()),
            engine,
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_is_visible_and_fsync_makes_it_durable() {
    let vol = Volume::new().await;
    let ((a, a_engine), (b, _)) = (vol.client().await, vol.client().await);
    let ctx = Ctx::root();
    let (entry, fh) = a.create(&ctx, Ino::ROOT, b"f", 0o644).await.unwrap();
    a.write(fh, 0, &[7u8; 200_000]).await.unwrap();
    a.release(fh).await.unwrap();
    assert_eq!(
        vol.bucket.unsynced(),
        4,
        "four 64 KiB blocks, written, not synced"
    );
    assert_eq!(a_engine.wal_syncs(), 0, "close does not wait for the disk");

    // Another client reads it before anything was synced.
    let (fh, attr) = b.open(&ctx, entry.ino, 0).await.unwrap();
    assert_eq!(attr.length, 200_000);
    assert_eq!(b.read(fh, 199_990, 10).await.unwrap().as_ref(), &[7u8; 10]);
    b.release(fh).await.unwrap();

    let (fh, _) = a.open(&ctx, entry.ino, 2).await.unwrap();
    a.write(fh, 0, b"new").await.unwrap();
    a.fsync(fh).await.unwrap();
    assert_eq!(vol.bucket.unsynced(), 0, "fsync synced every block");
    assert_eq!(a_engine.wal_syncs(), 1, "and the WAL, once");
    a.fsync(fh).await.unwrap();
    assert_eq!(a_engine.wal_syncs(), 1, "nothing new: no second WAL sync");
    a.release(fh).await.unwrap();

    // A directory sync (fsyncdir) covers namespace changes.
    a.mkdir(&ctx, Ino::ROOT, b"d", 0o755).await.unwrap();
    a.sync().await.unwrap();
    assert_eq!(a_engine.wal_syncs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_and_freeing_sync_before_they_replace_or_delete() {
    let vol = Volume::new().await;
    let (a, engine) = vol.client().await;
    let ctx = Ctx::root();
    let (entry, fh) = a.create(&ctx, Ino::ROOT, b"frag", 0o644).await.unwrap();
    for i in 0..5u64 {
        a.write(fh, i * 1000, &[i as u8; 1000]).await.unwrap();
        a.flush(fh, 0).await.unwrap();
    }
    a.release(fh).await.unwrap();
    assert_eq!(vol.bucket.unsynced(), 5);
    a.compact_chunk(entry.ino, 0).await.unwrap();
    assert_eq!(
        vol.bucket.unsynced(),
        0,
        "the merged slice is durable before it replaces the others"
    );
    let before = engine.wal_syncs();
    a.unlink(&ctx, Ino::ROOT, b"frag").await.unwrap();
    a.delete_pending_data().await.unwrap();
    assert!(
        engine.wal_syncs() > before,
        "the unlink is durable before its blocks are deleted"
    );
    assert_eq!(
        files_under(&vol.dir.path().join("bucket")),
        0,
        "blocks freed"
    );
}

fn files_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { files_under(&p) } else { 1 })
        .sum()
}

/// A commit that lands between a sync's store sync and its metadata sync could be made
/// durable by the metadata sync while its blocks are not (a machine crash would then
/// leave a file whose blocks are missing): such a commit waits until the sync is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_waits_while_a_sync_is_between_its_store_and_metadata_syncs() {
    let vol = Volume::new().await;
    let (a, _) = vol.client().await;
    let a = Arc::new(a);
    let ctx = Ctx::root();
    let (_, synced) = a.create(&ctx, Ino::ROOT, b"synced", 0o644).await.unwrap();
    let (late, loose) = a.create(&ctx, Ino::ROOT, b"loose", 0o644).await.unwrap();
    a.write(synced, 0, b"durable").await.unwrap();
    a.write(loose, 0, &[9u8; 1000]).await.unwrap();
    vol.faults.set(FaultPlan {
        hold_syncs: true,
        ..FaultPlan::default()
    });
    let syncing = tokio::spawn({
        let a = a.clone();
        async move { a.fsync(synced).await }
    });
    while vol.faults.held_syncs() == 0 {
        tokio::task::yield_now().await;
    }
    let puts = vol.faults.counts().0;
    let closing = tokio::spawn({
        let a = a.clone();
        async move { a.release(loose).await }
    });
    // The loose file's block goes out; its commit must then wait for the sync.
    while vol.faults.counts().0 == puts {
        tokio::task::yield_now().await;
    }
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), async {
        while !closing.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        waited.is_err(),
        "the commit went in while the sync was in progress"
    );
    let (_, meta) = vol.meta().await;
    meta.load().await.unwrap();
    assert_eq!(
        meta.getattr(late.ino).await.unwrap().length,
        0,
        "not committed yet"
    );
    vol.faults.set(FaultPlan::default());
    syncing.await.unwrap().unwrap();
    closing.await.unwrap().unwrap();
    assert_eq!(meta.getattr(late.ino).await.unwrap().length, 1000);
}
