//! The one path walker (`strata_vfs::paths`): the path table every front end shares, and
//! what the table cannot show (the cache, reserved names, fixed paths, parents).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::HashMap;
use std::sync::Mutex;

use strata_types::{Errno, Ino};
use strata_vfs::paths::{DirCache, PathWalk};
use strata_vfs::testing::{make_path_tree, memory_vfs, path_table, read_through_vfs};
use strata_vfs::{Ctx, Vfs};

async fn volume_with_tree() -> (Vfs, Ctx, Ino) {
    let vfs = memory_vfs().await;
    let ctx = Ctx::root();
    let top = vfs.mkdir(&ctx, Ino::ROOT, b"top", 0o755).await.unwrap().ino;
    make_path_tree(&vfs, &ctx, top).await;
    (vfs, ctx, top)
}

#[tokio::test]
async fn every_row_of_the_path_table_reads_as_it_says() {
    let (vfs, ctx, top) = volume_with_tree().await;
    let table = path_table();
    assert!(table.len() >= 15, "the table has its rows");
    for case in table {
        let got = read_through_vfs(&vfs, &ctx, top, &case.path).await;
        assert_eq!(got, case.expect, "{}", case.path);
    }
}

#[derive(Default)]
struct Remembered(Mutex<HashMap<Vec<u8>, Ino>>);

impl DirCache for Remembered {
    fn get(&self, key: &[u8]) -> Option<Ino> {
        self.0.lock().unwrap().get(key).copied()
    }
    fn put(&self, key: &[u8], ino: Ino) {
        self.0.lock().unwrap().insert(key.to_vec(), ino);
    }
}

#[tokio::test]
async fn a_cached_walk_gives_the_same_answers_and_remembers_plain_directories() {
    let (vfs, ctx, top) = volume_with_tree().await;
    let cache = Remembered::default();
    for _ in 0..2 {
        for case in path_table() {
            let how = PathWalk::from(top).cached(&cache);
            let got = vfs.resolve(&ctx, how, case.path.as_bytes()).await;
            let plain = vfs
                .resolve(&ctx, PathWalk::from(top), case.path.as_bytes())
                .await;
            assert_eq!(
                got.as_ref().map(|r| r.ino),
                plain.as_ref().map(|r| r.ino),
                "{}",
                case.path
            );
        }
    }
    let remembered = cache.0.lock().unwrap().clone();
    assert!(remembered.contains_key(&b"d"[..]));
    assert!(remembered.contains_key(&b"d/sub"[..]));
    assert!(
        !remembered.keys().any(|k| k.starts_with(b"ld")),
        "nothing reached through a symlink is remembered: {remembered:?}"
    );
    // A `..` in a symlink's target below a cached directory still climbs physically:
    // d/sub/back is ../f from d/sub.
    let how = PathWalk::from(top).cached(&cache);
    let back = vfs.resolve(&ctx, how, b"d/sub/back").await.unwrap();
    let f = vfs
        .resolve(&ctx, PathWalk::from(top), b"d/f")
        .await
        .unwrap();
    assert_eq!(back.ino, f.ino);
}

#[tokio::test]
async fn reserved_names_in_the_root_are_missing_however_they_are_reached() {
    let (vfs, ctx, top) = volume_with_tree().await;
    vfs.mkdir(&ctx, top, b".strata-own", 0o700).await.unwrap();
    vfs.symlink(&ctx, top, b"sneak", b"/.strata-own")
        .await
        .unwrap();
    let d = vfs
        .resolve(&ctx, PathWalk::from(top), b"d")
        .await
        .unwrap()
        .ino;
    vfs.mkdir(&ctx, d, b".strata-own", 0o755).await.unwrap();
    let how = PathWalk::from(top).reserving(b".strata-");
    for path in [
        ".strata-own",
        "sneak/",
        "d/../.strata-own",
        "ld/../.strata-own",
    ] {
        assert_eq!(
            vfs.resolve(&ctx, how, path.as_bytes()).await.map(|r| r.ino),
            Err(Errno::ENOENT),
            "{path}"
        );
    }
    // Below the root the prefix is an ordinary name.
    assert!(vfs.resolve(&ctx, how, b"d/.strata-own").await.is_ok());
    assert_eq!(
        vfs.resolve_parent(&ctx, how, b".strata-own/x", Errno::EEXIST)
            .await
            .map(|(r, _)| r.ino),
        Err(Errno::ENOENT)
    );
}

#[tokio::test]
async fn a_walk_without_symlinks_refuses_them_and_a_final_one_is_kept_when_asked() {
    let (vfs, ctx, top) = volume_with_tree().await;
    let strict = PathWalk::from(top).no_symlinks();
    assert_eq!(
        vfs.resolve(&ctx, strict, b"ld/f").await.map(|r| r.ino),
        Err(Errno::ELOOP)
    );
    assert!(vfs.resolve(&ctx, strict, b"d/f").await.is_ok());
    let link = vfs
        .resolve(&ctx, PathWalk::from(top).follow(false), b"fl")
        .await
        .unwrap();
    assert_eq!(link.attr.unwrap().kind, strata_types::FileType::Symlink);
    assert_eq!(
        vfs.resolve(&ctx, PathWalk::from(top).follow(false), b"fl/")
            .await
            .map(|r| r.ino),
        Err(Errno::ENOTDIR),
        "a trailing slash follows the link and asks for a directory"
    );
}

#[tokio::test]
async fn parents_chains_and_paths_without_a_last_name() {
    let (vfs, ctx, top) = volume_with_tree().await;
    let how = PathWalk::from(top);
    let (dir, name) = vfs
        .resolve_parent(&ctx, how, b"ld/new", Errno::EEXIST)
        .await
        .unwrap();
    let d = vfs.resolve(&ctx, how, b"d").await.unwrap();
    assert_eq!((dir.ino, name.as_slice()), (d.ino, &b"new"[..]));
    assert_eq!(dir.chain, None, "the walk passed a symlink");
    let sub = vfs.resolve(&ctx, how, b"d/sub/").await.unwrap();
    assert_eq!(sub.chain.as_deref(), Some(&[top, d.ino, sub.ino][..]));
    for path in ["/", "", ".", "d/..", "d/."] {
        assert_eq!(
            vfs.resolve_parent(&ctx, how, path.as_bytes(), Errno::EBUSY)
                .await
                .map(|(r, _)| r.ino),
            Err(Errno::EBUSY),
            "{path:?}"
        );
    }
    assert_eq!(
        vfs.resolve_parent(&ctx, how, b"d/f/x", Errno::EBUSY)
            .await
            .map(|(r, _)| r.ino),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        vfs.resolve(&ctx, how, b"d/\0x").await.map(|r| r.ino),
        Err(Errno::EINVAL)
    );
}

#[tokio::test]
async fn search_permission_is_checked_as_the_caller() {
    let (vfs, ctx, top) = volume_with_tree().await;
    let d = vfs
        .resolve(&ctx, PathWalk::from(top), b"d")
        .await
        .unwrap()
        .ino;
    let set = strata_vfs::SetAttr {
        mode: Some(0o700),
        ..Default::default()
    };
    vfs.setattr(&ctx, d, &set).await.unwrap();
    let user = Ctx::user(1000, 1000);
    assert_eq!(
        vfs.resolve(&user, PathWalk::from(top), b"ld/f")
            .await
            .map(|r| r.ino),
        Err(Errno::EACCES)
    );
}
