//! Conformance cases for file contents in metadata: slice commits and reads, the slice cap,
//! truncate, fallocate, copy_file_range with shared slices, compaction, deletion queues.

use strata_types::{CHUNK_SIZE, Errno, Ino, Slice, build_read_plan};

use super::{TestStore, errno_of, touch, volume};
use crate::error::MetaError;
use crate::meta::{Ctx, FallocateMode, MAX_SLICES_PER_CHUNK, Meta, SetAttr};
use crate::now_ns;

/// Commit a fresh slice of `len` bytes at `pos` in chunk `index`.
async fn write(meta: &Meta, ino: Ino, index: u32, pos: u32, len: u32) -> Slice {
    let id = meta.new_slice_id().await.unwrap();
    let s = Slice {
        pos,
        id,
        size: len,
        off: 0,
        len,
    };
    meta.write_chunk(ino, index, s, Some(now_ns()))
        .await
        .unwrap();
    s
}

/// Which slice id each byte range of chunk 0 shows (holes as 0), up to `end`.
async fn visible(meta: &Meta, ino: Ino, index: u32, end: u32) -> Vec<(u32, u32, u64)> {
    let slices = meta.read_chunk(ino, index).await.unwrap();
    build_read_plan(&slices, 0, end)
        .into_iter()
        .map(|p| (p.pos, p.len, p.id))
        .collect()
}

async fn queued_slices(meta: &Meta) -> Vec<u64> {
    let mut ids: Vec<u64> = meta
        .pending_slice_deletions(i64::MAX, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    ids.sort_unstable();
    ids
}

pub async fn write_and_read_chunks<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    assert!(meta.read_chunk(f.ino, 0).await.unwrap().is_empty());
    let a = write(&meta, f.ino, 0, 0, 1000).await;
    let b = write(&meta, f.ino, 0, 500, 1000).await;
    assert_eq!(
        meta.read_chunk(f.ino, 0).await.unwrap(),
        vec![a, b],
        "records in commit order"
    );
    let attr = meta.getattr(f.ino).await.unwrap();
    assert_eq!(attr.length, 1500);
    assert!(attr.mtime >= f.attr.mtime);
    // A write in a later chunk extends the length across the gap.
    write(&meta, f.ino, 2, 10, 5).await;
    assert_eq!(
        meta.getattr(f.ino).await.unwrap().length,
        2 * CHUNK_SIZE + 15
    );
    assert!(meta.read_chunk(f.ino, 1).await.unwrap().is_empty());
    // Invalid records are refused.
    let bad = Slice {
        pos: (CHUNK_SIZE - 1) as u32,
        id: 9,
        size: 2,
        off: 0,
        len: 2,
    };
    assert!(matches!(
        meta.write_chunk(f.ino, 0, bad, Some(now_ns())).await,
        Err(MetaError::Invalid(_))
    ));
    let d = super::mkdir(&meta, Ino::ROOT, "d").await;
    let s = Slice {
        pos: 0,
        id: 9,
        size: 1,
        off: 0,
        len: 1,
    };
    assert_eq!(
        errno_of(meta.write_chunk(d.ino, 0, s, Some(now_ns())).await),
        Errno::EISDIR
    );
    assert_eq!(
        errno_of(meta.write_chunk(Ino(987_654), 0, s, Some(now_ns())).await),
        Errno::ENOENT
    );
}

pub async fn slice_cap_is_enforced<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    for i in 0..MAX_SLICES_PER_CHUNK as u32 {
        let s = Slice {
            pos: i,
            id: u64::from(i) + 1,
            size: 1,
            off: 0,
            len: 1,
        };
        meta.write_chunk(f.ino, 0, s, Some(now_ns())).await.unwrap();
    }
    let s = Slice {
        pos: 0,
        id: 99_999,
        size: 1,
        off: 0,
        len: 1,
    };
    match meta.write_chunk(f.ino, 0, s, Some(now_ns())).await {
        Err(MetaError::TooManySlices { count, .. }) => assert_eq!(count, MAX_SLICES_PER_CHUNK),
        other => panic!("expected TooManySlices, got {other:?}"),
    }
    // Other chunks are unaffected.
    meta.write_chunk(f.ino, 1, s, Some(now_ns())).await.unwrap();
}

pub async fn truncate_clips_and_frees<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let f = touch(&meta, Ino::ROOT, "f").await;
    let a = write(&meta, f.ino, 0, 0, 4096).await;
    let b = write(&meta, f.ino, 0, 8192, 4096).await;
    let c = write(&meta, f.ino, 1, 0, 100).await;
    let size = |n| SetAttr {
        size: Some(n),
        ..SetAttr::default()
    };
    // Shrink into the middle of a: b and c lose their only reference.
    meta.setattr(&root, f.ino, &size(1000)).await.unwrap();
    assert_eq!(
        meta.read_chunk(f.ino, 0).await.unwrap(),
        vec![Slice { len: 1000, ..a }]
    );
    assert!(meta.read_chunk(f.ino, 1).await.unwrap().is_empty());
    assert_eq!(queued_slices(&meta).await, vec![b.id, c.id]);
    // Growing again shows zeros past the old cut, never old data.
    meta.setattr(&root, f.ino, &size(10_000)).await.unwrap();
    assert_eq!(
        visible(&meta, f.ino, 0, 10_000).await,
        vec![(0, 1000, a.id), (1000, 9000, 0)]
    );
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 10_000);
    // Truncate to zero drops everything.
    meta.setattr(&root, f.ino, &size(0)).await.unwrap();
    assert!(meta.read_chunk(f.ino, 0).await.unwrap().is_empty());
    assert_eq!(queued_slices(&meta).await, vec![a.id, b.id, c.id]);
    let big = SetAttr {
        size: Some(u64::MAX),
        ..SetAttr::default()
    };
    assert_eq!(
        errno_of(meta.setattr(&root, f.ino, &big).await),
        Errno::EFBIG
    );
}

pub async fn fallocate_modes<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let a = write(&meta, f.ino, 0, 0, 10_000).await;
    let mode = |bits| FallocateMode::from_bits(bits).unwrap();
    // Plain allocation extends; KEEP_SIZE does not.
    meta.fallocate(f.ino, mode(0), 0, 20_000).await.unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 20_000);
    meta.fallocate(f.ino, mode(FallocateMode::KEEP_SIZE), 0, 50_000)
        .await
        .unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 20_000);
    // Punching a hole zeroes the range and keeps the size.
    meta.fallocate(
        f.ino,
        mode(FallocateMode::PUNCH_HOLE | FallocateMode::KEEP_SIZE),
        100,
        200,
    )
    .await
    .unwrap();
    assert_eq!(
        visible(&meta, f.ino, 0, 10_000).await,
        vec![(0, 100, a.id), (100, 200, 0), (300, 9700, a.id)]
    );
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 20_000);
    // Zeroing a range past the end extends the file.
    meta.fallocate(f.ino, mode(FallocateMode::ZERO_RANGE), 9000, 30_000)
        .await
        .unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 39_000);
    assert_eq!(
        visible(&meta, f.ino, 0, 10_000).await.last().copied(),
        Some((9000, 1000, 0))
    );
    // Modes Linux refuses.
    assert_eq!(
        errno_of(FallocateMode::from_bits(FallocateMode::PUNCH_HOLE)),
        Errno::EINVAL
    );
    assert_eq!(errno_of(FallocateMode::from_bits(0x08)), Errno::EOPNOTSUPP);
    assert_eq!(
        errno_of(meta.fallocate(f.ino, mode(0), 0, 0).await),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.fallocate(Ino::ROOT, mode(0), 0, 1).await),
        Errno::EISDIR
    );
    assert_eq!(
        errno_of(meta.fallocate(f.ino, mode(0), u64::MAX - 1, 10).await),
        Errno::EFBIG
    );
}

pub async fn copy_file_range_shares_slices<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let src = touch(&meta, Ino::ROOT, "src").await;
    let dst = touch(&meta, Ino::ROOT, "dst").await;
    let a = write(&meta, src.ino, 0, 0, 8192).await;
    // Copy 4096 bytes from offset 1000 to the end of chunk 0 of dst: the copy straddles
    // dst's chunk boundary.
    let at = CHUNK_SIZE - 2048;
    let (copied, attr) = meta
        .copy_file_range(src.ino, 1000, dst.ino, at, 4096, 0)
        .await
        .unwrap();
    assert_eq!(copied, 4096);
    assert_eq!(attr.length, at + 4096);
    let tail = meta.read_chunk(dst.ino, 0).await.unwrap();
    assert_eq!(
        tail,
        vec![Slice {
            pos: (CHUNK_SIZE - 2048) as u32,
            id: a.id,
            size: 8192,
            off: 1000,
            len: 2048
        }]
    );
    let head = meta.read_chunk(dst.ino, 1).await.unwrap();
    assert_eq!(
        head,
        vec![Slice {
            pos: 0,
            id: a.id,
            size: 8192,
            off: 3048,
            len: 2048
        }]
    );
    // Copies are clipped at the source's end.
    let (copied, _) = meta
        .copy_file_range(src.ino, 8000, dst.ino, 0, 1 << 20, 0)
        .await
        .unwrap();
    assert_eq!(copied, 192);
    let (copied, _) = meta
        .copy_file_range(src.ino, 9000, dst.ino, 0, 10, 0)
        .await
        .unwrap();
    assert_eq!(copied, 0);
    // Overlapping ranges in one file and unknown flags are refused.
    assert_eq!(
        errno_of(
            meta.copy_file_range(src.ino, 0, src.ino, 100, 1000, 0)
                .await
        ),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.copy_file_range(src.ino, 0, dst.ino, 0, 10, 1).await),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.copy_file_range(Ino::ROOT, 0, dst.ino, 0, 10, 0).await),
        Errno::EISDIR
    );
    // The shared slice stays until every file referencing it is gone.
    meta.unlink(&root, Ino::ROOT, b"src").await.unwrap();
    drain_file_deletions(&meta).await;
    assert!(
        queued_slices(&meta).await.is_empty(),
        "dst still references the slice"
    );
    meta.unlink(&root, Ino::ROOT, b"dst").await.unwrap();
    drain_file_deletions(&meta).await;
    assert_eq!(queued_slices(&meta).await, vec![a.id]);
}

async fn drain_file_deletions(meta: &Meta) {
    for ino in meta.pending_file_deletions(usize::MAX).await.unwrap() {
        while !meta.free_file_chunks(ino).await.unwrap() {}
    }
    assert!(
        meta.pending_file_deletions(usize::MAX)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn compaction_support<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let threshold = meta.options().compact_threshold;
    let mut written = Vec::new();
    for i in 0..threshold as u32 {
        written.push(write(&meta, f.ino, 0, i * 100, 150).await);
    }
    let candidates = meta.compaction_candidates(10).await.unwrap();
    assert_eq!(candidates.len(), 1);
    assert_eq!((candidates[0].ino, candidates[0].index), (f.ino, 0));
    let end = written.last().map(|s| s.end()).unwrap_or(0) as u32;
    let id = meta.new_slice_id().await.unwrap();
    let merged = Slice {
        pos: 0,
        id,
        size: end,
        off: 0,
        len: end,
    };
    // A concurrent append after the snapshot is kept after the replacement.
    let late = write(&meta, f.ino, 0, 5, 5).await;
    assert!(
        meta.replace_slices(f.ino, 0, &written, merged)
            .await
            .unwrap()
    );
    assert_eq!(meta.read_chunk(f.ino, 0).await.unwrap(), vec![merged, late]);
    assert!(meta.compaction_candidates(10).await.unwrap().is_empty());
    // The replaced slices are queued for deletion; a stale expectation changes nothing.
    assert_eq!(
        queued_slices(&meta).await,
        written.iter().map(|s| s.id).collect::<Vec<_>>()
    );
    assert!(
        !meta
            .replace_slices(f.ino, 0, &written, merged)
            .await
            .unwrap()
    );
    assert_eq!(meta.read_chunk(f.ino, 0).await.unwrap(), vec![merged, late]);
}

pub async fn deletion_queues<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let a = write(&meta, f.ino, 0, 0, 100).await;
    let b = write(&meta, f.ino, 3, 0, 100).await;
    meta.unlink(&Ctx::root(), Ino::ROOT, b"f").await.unwrap();
    assert_eq!(meta.pending_file_deletions(10).await.unwrap(), vec![f.ino]);
    drain_file_deletions(&meta).await;
    // The file is gone: its chunks read as missing, never as holes (zeros).
    assert!(matches!(
        meta.read_chunk(f.ino, 3).await,
        Err(crate::MetaError::Posix(Errno::ENOENT))
    ));
    let pending = meta.pending_slice_deletions(i64::MAX, 10).await.unwrap();
    assert_eq!(
        pending.iter().map(|d| (d.id, d.size)).collect::<Vec<_>>(),
        vec![(a.id, 100), (b.id, 100)]
    );
    assert!(
        meta.pending_slice_deletions(0, 10)
            .await
            .unwrap()
            .is_empty(),
        "filtered by queue time"
    );
    meta.finish_slice_deletions(&pending).await.unwrap();
    assert!(queued_slices(&meta).await.is_empty());
    // An empty file needs no data deletion at all.
    touch(&meta, Ino::ROOT, "empty").await;
    meta.unlink(&Ctx::root(), Ino::ROOT, b"empty")
        .await
        .unwrap();
    assert!(meta.pending_file_deletions(10).await.unwrap().is_empty());
}
