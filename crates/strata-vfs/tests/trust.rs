//! The VFS keeps what it is given and tells the truth about it: times set explicitly are
//! final whatever is still buffered, a stat never waits for object storage, a failed
//! upload or sync loses nothing and is reported (every failure, to every file that must
//! hear of it), huge offsets are EFBIG instead of landing in chunk 0, a writer short of
//! buffer makes room instead of waiting forever, a blocked lock request ends when
//! interrupted, background jobs stop between steps, and access times follow the mode.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::NoCache;
use strata_meta::conformance::{MemoryStore, TestStore, test_format, test_options};
use strata_meta::{Meta, SessionInfo};
use strata_object::ObjectStore;
use strata_object::backend::Backend;
use strata_object::fault::{FaultControl, FaultPlan, Faulty};
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_types::{Errno, Ino, MAX_FILE_SIZE};
use strata_vfs::{
    AtimeMode, BackgroundJobs, CancellationToken, Ctx, LockKind, PosixLock, SetAttr, TimeSet, Vfs,
    VfsOptions,
};

const BLOCK: u32 = 64 << 10;
/// 2006-07-24, as a tarball's file would carry it.
const OLD: i64 = 1_153_699_200_000_000_000;

struct Volume {
    meta: MemoryStore,
    objects: Arc<dyn ObjectStore>,
    faults: Arc<FaultControl>,
}

impl Volume {
    async fn new() -> Volume {
        let meta = MemoryStore::create();
        let m = Meta::new(meta.client(), test_options());
        m.format(&test_format(0), false).await.unwrap();
        let (faulty, faults) = Faulty::new(Backend::memory());
        let retry = RetryPolicy {
            retries: 0,
            base_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        };
        let stack = StackOptions {
            retry,
            ..StackOptions::default()
        };
        let (objects, _) = build(Arc::new(faulty), &stack);
        Volume {
            meta,
            objects,
            faults,
        }
    }

    async fn client_with(&self, buffer: u64, opts: VfsOptions) -> Arc<Vfs> {
        let meta = Meta::new(self.meta.client(), test_options());
        meta.load().await.unwrap();
        meta.new_session(SessionInfo::default()).await.unwrap();
        let chunk_opts = ChunkOptions {
            block_size: BLOCK,
            buffer_size: buffer,
            ..ChunkOptions::default()
        };
        let chunks = ChunkStore::new(
            self.objects.clone(),
            Arc::new(NoCache::default()),
            chunk_opts,
        );
        Arc::new(Vfs::new(Arc::new(meta), chunks, opts))
    }

    async fn client(&self) -> Arc<Vfs> {
        self.client_with(64 << 20, VfsOptions::default()).await
    }
}

fn root() -> Ctx {
    Ctx::root()
}

fn explicit_mtime(at: i64) -> SetAttr {
    SetAttr {
        mtime: Some(TimeSet::At(at)),
        ..SetAttr::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_times_survive_the_flush_of_buffered_writes() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    // open; write; futimens(fd, 2006); close — as tar does.
    let (f, fh) = a
        .create(&root(), Ino::ROOT, b"tarred", 0o644)
        .await
        .unwrap();
    a.write(fh, 0, b"contents").await.unwrap();
    let written = a.getattr(f.ino).await.unwrap();
    assert!(written.mtime > OLD, "a write sets mtime when it returns");
    a.setattr(&root(), f.ino, &explicit_mtime(OLD))
        .await
        .unwrap();
    a.flush(fh, 0).await.unwrap();
    a.release(fh).await.unwrap();
    let stored = a.meta().getattr(f.ino).await.unwrap();
    assert_eq!(stored.mtime, OLD, "the flush left the explicit time");
    assert_eq!(stored.length, 8);

    // utimensat by path from another client while this one still buffers data.
    let b = vol.client().await;
    let (g, gh) = a
        .create(&root(), Ino::ROOT, b"shared", 0o644)
        .await
        .unwrap();
    a.write(gh, 0, b"unflushed").await.unwrap();
    b.setattr(&root(), g.ino, &explicit_mtime(OLD))
        .await
        .unwrap();
    a.release(gh).await.unwrap();
    let seen_by_b = b.getattr(g.ino).await.unwrap();
    assert_eq!((seen_by_b.mtime, seen_by_b.length), (OLD, 9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_changes_after_buffered_writes_order_as_on_ext4() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    let (f, fh) = a.create(&root(), Ino::ROOT, b"f", 0o644).await.unwrap();
    a.write(fh, 0, &[7; 5000]).await.unwrap();
    let at_write = a.getattr(f.ino).await.unwrap().mtime;
    // chmod after the write: mtime stays the write's, ctime is the chmod's.
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    let after = a.setattr(&root(), f.ino, &chmod).await.unwrap();
    assert_eq!(after.mtime, at_write);
    assert!(after.ctime >= at_write);
    a.release(fh).await.unwrap();
    let stored = a.meta().getattr(f.ino).await.unwrap();
    assert_eq!(
        (stored.mtime, stored.mode, stored.length),
        (at_write, 0o600, 5000)
    );
    // truncate after a write: the truncate comes last, in size and in times.
    let fh = a.open(&root(), f.ino, 2).await.unwrap().0;
    a.write(fh, 5000, &[8; 100]).await.unwrap();
    let shrink = SetAttr {
        size: Some(10),
        size_from_open_file: true,
        ..SetAttr::default()
    };
    let truncated = a.setattr(&root(), f.ino, &shrink).await.unwrap();
    a.release(fh).await.unwrap();
    let stored = a.meta().getattr(f.ino).await.unwrap();
    assert_eq!(stored.length, 10);
    assert_eq!(stored.mtime, truncated.mtime);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stat_never_waits_for_object_storage() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    let (f, fh) = a.create(&root(), Ino::ROOT, b"big", 0o644).await.unwrap();
    a.write(fh, 0, &vec![1; 3 * BLOCK as usize + 100])
        .await
        .unwrap();
    vol.faults.set(FaultPlan {
        hold_puts: true,
        ..FaultPlan::default()
    });
    let flushing = {
        let a = a.clone();
        tokio::spawn(async move { a.flush(fh, 0).await })
    };
    // The flush holds the file's writes while its uploads wait.
    while vol.faults.held_puts() == 0 {
        tokio::task::yield_now().await;
    }
    let stat = tokio::time::timeout(Duration::from_secs(10), a.getattr(f.ino)).await;
    let attr = stat.expect("getattr waited for the upload").unwrap();
    assert_eq!(attr.length, 3 * u64::from(BLOCK) + 100);
    let entry = tokio::time::timeout(
        Duration::from_secs(10),
        a.lookup(&root(), Ino::ROOT, b"big"),
    )
    .await
    .expect("lookup waited for the upload")
    .unwrap();
    assert_eq!(entry.attr.length, attr.length);
    vol.faults.set(FaultPlan::default());
    flushing.await.unwrap().unwrap();
    a.release(fh).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_uploads_keep_every_file_buffered_until_a_flush_succeeds() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    let mut files = Vec::new();
    for name in ["one", "two", "three"] {
        let (e, fh) = a
            .create(&root(), Ino::ROOT, name.as_bytes(), 0o644)
            .await
            .unwrap();
        a.write(fh, 0, name.repeat(1000).as_bytes()).await.unwrap();
        files.push((e.ino, fh, name));
    }
    vol.faults.set(FaultPlan {
        fail_puts_after: Some(0),
        ..FaultPlan::default()
    });
    assert_eq!(a.flush_all().await, Err(Errno::EIO));
    for (ino, fh, _) in &files {
        // Every file was tried and kept: each still reports the failure.
        assert_eq!(a.flush(*fh, 0).await, Err(Errno::EIO));
        assert!(a.getattr(*ino).await.unwrap().length > 0, "still buffered");
    }
    // The last close fails too, and keeps the data for the periodic retry.
    let (last_ino, last_fh, _) = files[2];
    assert_eq!(a.release(last_fh).await, Err(Errno::EIO));
    assert_eq!(a.retry_kept_writes().await, 1, "still waiting");
    vol.faults.set(FaultPlan::default());
    assert_eq!(
        a.retry_kept_writes().await,
        0,
        "committed once the store is back"
    );
    a.flush_all().await.unwrap();
    let b = vol.client().await;
    for (ino, _, name) in &files {
        let (fh, attr) = b.open(&root(), *ino, 0).await.unwrap();
        assert_eq!(attr.length, 1000 * name.len() as u64);
        let data = b.read(fh, 0, 1 << 20).await.unwrap();
        assert_eq!(&data[..], name.repeat(1000).as_bytes(), "{name}");
    }
    assert!(b.getattr(last_ino).await.unwrap().length > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_is_reported_once_to_each_file_open_for_writing() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    let (_, w1) = a.create(&root(), Ino::ROOT, b"w1", 0o644).await.unwrap();
    let (e2, w2) = a.create(&root(), Ino::ROOT, b"w2", 0o644).await.unwrap();
    let (r, _) = a.open(&root(), e2.ino, 0).await.unwrap();
    vol.faults.set(FaultPlan {
        fail_syncs: true,
        ..FaultPlan::default()
    });
    assert_eq!(a.fsync(w1).await, Err(Errno::EIO));
    vol.faults.set(FaultPlan::default());
    assert_eq!(a.fsync(w1).await, Ok(()), "w1 was told already");
    assert_eq!(a.fsync(w2).await, Err(Errno::EIO), "w2 hears of it once");
    assert_eq!(a.fsync(w2).await, Ok(()));
    assert_eq!(a.flush(r, 0).await, Ok(()), "a reader is not told");
    let (_, later) = a.create(&root(), Ino::ROOT, b"later", 0o644).await.unwrap();
    assert_eq!(
        a.fsync(later).await,
        Ok(()),
        "opened after: nothing to report"
    );
    // A failure of the periodic sync (no fsync in flight) reaches close.
    vol.faults.set(FaultPlan {
        fail_syncs: true,
        ..FaultPlan::default()
    });
    assert!(a.sync().await.is_err());
    vol.faults.set(FaultPlan::default());
    assert_eq!(a.flush(later, 0).await, Err(Errno::EIO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_the_largest_file_are_efbig_not_chunk_zero() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    let (f, fh) = a
        .create(&root(), Ino::ROOT, b"sparse", 0o644)
        .await
        .unwrap();
    a.write(fh, 0, b"head").await.unwrap();
    assert_eq!(a.write(fh, 1 << 58, b"x").await, Err(Errno::EFBIG));
    assert_eq!(
        a.write(fh, MAX_FILE_SIZE - 2, b"xyz").await,
        Err(Errno::EFBIG)
    );
    assert_eq!(a.write(fh, u64::MAX - 1, b"xyz").await, Err(Errno::EFBIG));
    a.write(fh, MAX_FILE_SIZE - 4, b"tail").await.unwrap();
    a.flush(fh, 0).await.unwrap();
    assert_eq!(
        &a.read(fh, 0, 4).await.unwrap()[..],
        b"head",
        "chunk 0 untouched"
    );
    assert_eq!(
        &a.read(fh, MAX_FILE_SIZE - 4, 4).await.unwrap()[..],
        b"tail"
    );
    assert_eq!(a.getattr(f.ino).await.unwrap().length, MAX_FILE_SIZE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_short_of_buffer_make_room_instead_of_waiting_forever() {
    let vol = Volume::new().await;
    // Room for four partly filled blocks; eight files each hold one.
    let a = vol
        .client_with(4 * u64::from(BLOCK), VfsOptions::default())
        .await;
    let mut handles = Vec::new();
    for i in 0..8u8 {
        let (e, fh) = a
            .create(&root(), Ino::ROOT, &[b'f', b'0' + i], 0o644)
            .await
            .unwrap();
        handles.push((e.ino, fh, i));
    }
    let writing = async {
        for round in 0..3u64 {
            for (_, fh, i) in &handles {
                a.write(*fh, round * 20_000, &[*i; 20_000]).await.unwrap();
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), writing)
        .await
        .expect("writers waited for buffer nobody would free");
    for (ino, fh, i) in handles {
        a.release(fh).await.unwrap();
        let (rh, attr) = a.open(&root(), ino, 0).await.unwrap();
        assert_eq!(attr.length, 60_000);
        assert!(a.read(rh, 0, 60_000).await.unwrap().iter().all(|b| *b == i));
        a.release(rh).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_lock_request_ends_with_eintr_when_interrupted() {
    let vol = Volume::new().await;
    let (a, b) = (vol.client().await, vol.client().await);
    let (f, ah) = a
        .create(&root(), Ino::ROOT, b"locked", 0o644)
        .await
        .unwrap();
    let (bh, _) = b.open(&root(), f.ino, 2).await.unwrap();
    let whole = |kind| PosixLock {
        kind,
        start: 0,
        end: u64::MAX,
        pid: 1,
    };
    let never = CancellationToken::new();
    a.setlk(ah, 1, whole(LockKind::Write), false, &never)
        .await
        .unwrap();
    let interrupt = CancellationToken::new();
    let waiting = {
        let (b, interrupt) = (b.clone(), interrupt.clone());
        tokio::spawn(async move {
            b.setlk(bh, 2, whole(LockKind::Write), true, &interrupt)
                .await
        })
    };
    // It waits while the lock is held...
    assert!(
        tokio::time::timeout(Duration::from_millis(200), async {
            while !waiting.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .is_err()
    );
    interrupt.cancel();
    assert_eq!(waiting.await.unwrap(), Err(Errno::EINTR));
    // ...and once the holder lets go, the interrupted waiter holds nothing.
    a.setlk(ah, 1, whole(LockKind::Unlock), false, &never)
        .await
        .unwrap();
    assert_eq!(a.getlk(ah, 3, whole(LockKind::Write)).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_stop_between_steps_not_inside_one() {
    let vol = Volume::new().await;
    let a = vol.client().await;
    for i in 0..6u8 {
        let (_, fh) = a
            .create(&root(), Ino::ROOT, &[b'd', b'0' + i], 0o644)
            .await
            .unwrap();
        a.write(fh, 0, &vec![i; 4 * BLOCK as usize]).await.unwrap();
        a.release(fh).await.unwrap();
        a.unlink(&root(), Ino::ROOT, &[b'd', b'0' + i])
            .await
            .unwrap();
    }
    // Slow deletes: the deletion job is mid-way through its batch when asked to stop.
    vol.faults.set(FaultPlan {
        delay: Duration::from_millis(30),
        ..FaultPlan::default()
    });
    let jobs = BackgroundJobs::start(a.clone(), Duration::from_secs(60), true, None);
    // Stop once some blocks are gone but not all: the job is inside its batch.
    while vol.objects.list("", None, 1000).await.unwrap().len() == 24 {
        tokio::task::yield_now().await;
    }
    jobs.stop().await;
    let deleted_when_stopped = vol.faults.deletes();
    vol.faults.set(FaultPlan::default());
    // Every slice is either fully gone (blocks and its queue entry) or fully there.
    let queued = a
        .meta()
        .pending_slice_deletions(i64::MAX, 100)
        .await
        .unwrap();
    let left = vol.objects.list("", None, 1000).await.unwrap().len();
    assert_eq!(
        left,
        queued.len() * 4,
        "no half-deleted slice (4 blocks each)"
    );
    assert!(deleted_when_stopped > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_times_follow_the_mode() {
    let vol = Volume::new().await;
    let writer = vol.client().await;
    let (f, fh) = writer
        .create(&root(), Ino::ROOT, b"f", 0o644)
        .await
        .unwrap();
    writer.write(fh, 0, b"data").await.unwrap();
    writer.release(fh).await.unwrap();
    let old_atime = writer.meta().getattr(f.ino).await.unwrap().atime;
    let (vol, ino) = (&vol, f.ino);
    let read_with = |mode| async move {
        let opts = VfsOptions {
            atime_mode: mode,
            ..VfsOptions::default()
        };
        let c = vol.client_with(1 << 20, opts).await;
        let (h, _) = c.open(&root(), ino, 0).await.unwrap();
        c.read(h, 0, 4).await.unwrap();
        let first = c.meta().getattr(ino).await.unwrap().atime;
        c.read(h, 0, 4).await.unwrap();
        let second = c.meta().getattr(ino).await.unwrap().atime;
        c.release(h).await.unwrap();
        (first, second)
    };
    let (first, second) = read_with(AtimeMode::NoAtime).await;
    assert_eq!((first, second), (old_atime, old_atime), "noatime: never");
    let (first, second) = read_with(AtimeMode::RelAtime).await;
    assert!(first > old_atime, "relatime: atime was not after mtime");
    assert_eq!(second, first, "relatime: now newer than mtime and recent");
    let (first, second) = read_with(AtimeMode::StrictAtime).await;
    assert!(
        first > old_atime && second > first,
        "strictatime: every read"
    );
}
