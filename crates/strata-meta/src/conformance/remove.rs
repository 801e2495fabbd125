//! Removing whole trees several entries at a time (`Meta::remove_tree`): everything goes
//! and the counters add up, the trash can be skipped only by root, and an error stops the
//! walk with every removal under way finished.

use futures::StreamExt;
use strata_types::{Errno, FileType, Ino};

use super::{TestStore, mkdir, names, volume_with};
use crate::meta::{Ctx, Meta, RemoveOptions, TrashUse};

/// Create `count` files named `{prefix}{i}` in `dir` as `ctx`, 32 at a time.
async fn files(meta: &Meta, ctx: &Ctx, dir: Ino, prefix: &str, count: usize) {
    futures::stream::iter(0..count)
        .map(|i| async move {
            let name = format!("{prefix}{i:05}");
            meta.mknod(ctx, dir, name.as_bytes(), FileType::Regular, 0o644, 0)
                .await
                .unwrap_or_else(|e| panic!("create {name}: {e}"));
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

async fn trash_count(meta: &Meta) -> u64 {
    let mut count = 0;
    meta.trash_entries(0, i64::MAX, b"", |_| count += 1)
        .await
        .unwrap();
    count
}

async fn assert_clean(meta: &Meta) {
    assert_eq!(
        meta.check_namespace(false, |_| {}).await.unwrap().problems,
        vec![],
        "counters, link counts and usage add up"
    );
}

pub async fn many_removals_at_once_leave_the_counters_right<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, super::test_format(1)).await;
    let root = Ctx::root();
    let top = mkdir(&meta, Ino::ROOT, "top").await;
    // More than one page of entries in one directory, and two subdirectories.
    files(&meta, &root, top.ino, "f", 1_100).await;
    for sub in ["a", "b"] {
        let d = mkdir(&meta, top.ino, sub).await;
        files(&meta, &root, d.ino, "g", 30).await;
    }
    let mut seen = 0;
    let options = RemoveOptions {
        threads: 32,
        trash: TrashUse::Volume,
    };
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"top"), options, &mut |n| {
            seen += n;
            true
        })
        .await
        .unwrap();
    assert_eq!(removed, 1 + 1_100 + 2 + 60);
    assert_eq!(seen, removed);
    assert!(names(&meta, Ino::ROOT).await.is_empty());
    assert_eq!(trash_count(&meta).await, removed, "all of it in the trash");
    assert_clean(&meta).await;
}

pub async fn skipping_the_trash_is_for_root<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, super::test_format(1)).await;
    let root = Ctx::root();
    let top = meta.mkdir(&root, Ino::ROOT, b"top", 0o777).await.unwrap();
    files(&meta, &root, top.ino, "f", 40).await;
    let skip = RemoveOptions {
        threads: 8,
        trash: TrashUse::Never,
    };
    let user = Ctx::user(1000, 1000);
    let err = meta
        .remove_tree(&user, (Ino::ROOT, b"top"), skip, &mut |_| true)
        .await
        .expect_err("a user may not skip the trash");
    assert_eq!(err.errno(), Errno::EPERM);
    assert_eq!(names(&meta, top.ino).await.len(), 40, "nothing went");
    let inodes: Vec<Ino> = meta
        .readdir(top.ino, None, usize::MAX, false)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.ino)
        .collect();
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"top"), skip, &mut |_| true)
        .await
        .unwrap();
    assert_eq!(removed, 41);
    assert!(names(&meta, Ino::ROOT).await.is_empty());
    assert_eq!(trash_count(&meta).await, 0, "nothing in the trash");
    for ino in inodes.into_iter().chain([top.ino]) {
        assert_eq!(
            super::errno_of(meta.getattr(ino).await),
            Errno::ENOENT,
            "inode {ino} deleted for good"
        );
    }
    assert_clean(&meta).await;
}

pub async fn an_error_stops_the_walk_and_is_returned<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, super::test_format(0)).await;
    let root = Ctx::root();
    let user = Ctx::user(1000, 1000);
    // A sticky directory: the user may remove only the files the user owns.
    let shared = meta
        .mkdir(&root, Ino::ROOT, b"shared", 0o1777)
        .await
        .unwrap();
    files(&meta, &user, shared.ino, "a-user", 200).await;
    files(&meta, &root, shared.ino, "b-root", 5).await;
    files(&meta, &user, shared.ino, "c-user", 200).await;
    let options = RemoveOptions {
        threads: 16,
        trash: TrashUse::Volume,
    };
    let err = meta
        .remove_tree(&user, (Ino::ROOT, b"shared"), options, &mut |_| true)
        .await
        .expect_err("root's files are not the user's to remove");
    assert_eq!(err.errno(), Errno::EPERM);
    let left = names(&meta, shared.ino).await;
    assert!(
        left.iter().all(|n| !n.starts_with("a-user")),
        "what came before the error went"
    );
    assert_eq!(
        left.iter().filter(|n| n.starts_with("b-root")).count(),
        5,
        "root's files stay"
    );
    assert!(
        left.iter().filter(|n| n.starts_with("c-user")).count() > 0,
        "no new removal started after the error"
    );
    assert_clean(&meta).await;
}

pub async fn hard_links_in_one_batch_keep_the_counts_right<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, super::test_format(0)).await;
    let root = Ctx::root();
    let top = mkdir(&meta, Ino::ROOT, "top").await;
    files(&meta, &root, top.ino, "f", 10).await;
    // One inode with two names in the batch and one outside it; one with both its
    // names in the batch.
    let kept = super::touch(&meta, top.ino, "kept").await;
    meta.link(&root, kept.ino, top.ino, b"kept-too")
        .await
        .unwrap();
    meta.link(&root, kept.ino, Ino::ROOT, b"outside")
        .await
        .unwrap();
    let gone = super::touch(&meta, top.ino, "gone").await;
    meta.link(&root, gone.ino, top.ino, b"gone-too")
        .await
        .unwrap();
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"top"), RemoveOptions::RMR, &mut |_| {
            true
        })
        .await
        .unwrap();
    assert_eq!(removed, 1 + 10 + 4);
    let attr = meta.getattr(kept.ino).await.unwrap();
    assert_eq!(attr.nlink, 1, "one name left");
    assert_eq!(names(&meta, Ino::ROOT).await, ["outside"]);
    assert_eq!(super::errno_of(meta.getattr(gone.ino).await), Errno::ENOENT);
    assert_clean(&meta).await;
}

/// The files of a directory go in batches: a few engine calls per batch of files, not a
/// transaction per file (one round trip each on a network engine).
pub async fn files_go_in_batches<S: TestStore>() {
    let store = S::create();
    let (meta, counting) = super::round_trips::counted_volume(&store).await;
    let root = Ctx::root();
    let big = mkdir(&meta, Ino::ROOT, "big").await;
    files(&meta, &root, big.ino, "f", 1_000).await;
    counting.take();
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"big"), RemoveOptions::RMR, &mut |_| {
            true
        })
        .await
        .unwrap();
    assert_eq!(removed, 1_001);
    let calls = counting.take();
    assert!(
        calls <= 100,
        "{calls} engine calls to remove 1,000 files (a transaction each would be 1,000+)"
    );
    assert_clean(&meta).await;
}
