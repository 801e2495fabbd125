//! Conformance cases for the less common file kinds and times: `O_TMPFILE` inodes,
//! `RENAME_WHITEOUT`, directories kept while open after their removal, the times a data
//! commit gives (never overriding a later explicit change), access times, and `rm -r`'s
//! permission checks in `remove_tree`.

use strata_types::{Errno, FileType, Ino};

use super::{TestStore, client, errno_of, mkdir, names, slice, touch, volume};
use crate::meta::{Ctx, RemoveOptions, RenameFlags, SessionInfo, SetAttr, TimeSet};

async fn session(meta: &crate::Meta) {
    meta.new_session(SessionInfo {
        host: "t".into(),
        ..SessionInfo::default()
    })
    .await
    .unwrap();
}

pub async fn tmpfiles_live_until_closed_or_linked<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    session(&meta).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let t = meta.tmpfile(&root, d.ino, 0o600).await.unwrap();
    assert_eq!((t.attr.nlink, t.attr.kind), (0, FileType::Regular));
    assert!(names(&meta, d.ino).await.is_empty(), "no name");
    meta.mark_open(t.ino);
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(t.ino, 0, slice(id, 100), Some(crate::now_ns()))
        .await
        .unwrap();
    let linked = meta.link(&root, t.ino, d.ino, b"kept").await.unwrap();
    assert_eq!((linked.nlink, linked.length), (1, 100));
    meta.close(t.ino).await.unwrap();
    assert_eq!(meta.lookup(&root, d.ino, b"kept").await.unwrap().ino, t.ino);
    assert_eq!(meta.dir_usage(d.ino).await.unwrap(), (4096, 1));
    // A second link works as for any file; an ordinary unlinked file may not be linked.
    meta.link(&root, t.ino, Ino::ROOT, b"again").await.unwrap();
    let gone = touch(&meta, Ino::ROOT, "gone").await;
    meta.mark_open(gone.ino);
    meta.unlink(&root, Ino::ROOT, b"gone").await.unwrap();
    assert_eq!(
        errno_of(meta.link(&root, gone.ino, Ino::ROOT, b"back").await),
        Errno::ENOENT
    );
    // Never linked: gone at the last close.
    let lost = meta.tmpfile(&root, Ino::ROOT, 0o600).await.unwrap();
    meta.mark_open(lost.ino);
    meta.close(lost.ino).await.unwrap();
    assert_eq!(errno_of(meta.getattr(lost.ino).await), Errno::ENOENT);
    // A dead client's unnamed files go with its session.
    let other = client(&store).await;
    session(&other).await;
    let orphan = other.tmpfile(&root, Ino::ROOT, 0o600).await.unwrap();
    other.close_session().await.unwrap();
    assert_eq!(errno_of(meta.getattr(orphan.ino).await), Errno::ENOENT);
    let user = Ctx::user(1000, 1000);
    assert_eq!(
        errno_of(meta.tmpfile(&user, d.ino, 0o600).await),
        Errno::EACCES,
        "creating needs write permission on the directory"
    );
}

pub async fn rename_whiteout_leaves_a_char_device<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let a = touch(&meta, Ino::ROOT, "a").await;
    let whiteout = RenameFlags::from_bits(RenameFlags::WHITEOUT).unwrap();
    meta.rename(&root, Ino::ROOT, b"a", Ino::ROOT, b"b", whiteout)
        .await
        .unwrap();
    assert_eq!(
        meta.lookup(&root, Ino::ROOT, b"b").await.unwrap().ino,
        a.ino
    );
    let w = meta.lookup(&root, Ino::ROOT, b"a").await.unwrap();
    assert_ne!(w.ino, a.ino);
    assert_eq!(
        (w.attr.kind, w.attr.mode, w.attr.rdev),
        (FileType::CharDevice, 0, 0)
    );
    assert_eq!(meta.dir_usage(Ino::ROOT).await.unwrap().1, 2);
    let both = RenameFlags::WHITEOUT | RenameFlags::EXCHANGE;
    assert_eq!(errno_of(RenameFlags::from_bits(both)), Errno::EINVAL);
    assert_eq!(errno_of(RenameFlags::from_bits(8)), Errno::EINVAL);
    let noreplace = RenameFlags::from_bits(RenameFlags::WHITEOUT | RenameFlags::NOREPLACE);
    assert_eq!(
        errno_of(
            meta.rename(&root, Ino::ROOT, b"b", Ino::ROOT, b"a", noreplace.unwrap())
                .await
        ),
        Errno::EEXIST
    );
}

pub async fn open_directories_outlive_their_removal<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    session(&meta).await;
    let root = Ctx::root();
    let victim = mkdir(&meta, Ino::ROOT, "victim").await;
    mkdir(&meta, Ino::ROOT, "winner").await;
    meta.mark_open(victim.ino);
    meta.rename(
        &root,
        Ino::ROOT,
        b"winner",
        Ino::ROOT,
        b"victim",
        RenameFlags::default(),
    )
    .await
    .unwrap();
    let attr = meta.getattr(victim.ino).await.unwrap();
    assert_eq!(
        (attr.nlink, attr.kind),
        (0, FileType::Directory),
        "fstat of the open, replaced directory"
    );
    assert!(
        meta.readdir(victim.ino, None, 10, false)
            .await
            .unwrap()
            .is_empty()
    );
    meta.close(victim.ino).await.unwrap();
    assert_eq!(errno_of(meta.getattr(victim.ino).await), Errno::ENOENT);
    assert_eq!(names(&meta, Ino::ROOT).await, ["victim"]);
    let again = mkdir(&meta, Ino::ROOT, "again").await;
    meta.mark_open(again.ino);
    meta.rmdir(&root, Ino::ROOT, b"again").await.unwrap();
    assert_eq!(meta.getattr(again.ino).await.unwrap().nlink, 0);
    meta.close_session().await.unwrap();
    assert_eq!(errno_of(meta.getattr(again.ino).await), Errno::ENOENT);
}

pub async fn data_commits_never_override_later_times<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let f = touch(&meta, Ino::ROOT, "f").await;
    let written = crate::now_ns();
    // An explicit time set after the write (by this client or another), then the commit.
    let set = SetAttr {
        mtime: Some(TimeSet::At(1_153_699_200_000_000_000)),
        ..SetAttr::default()
    };
    meta.setattr(&root, f.ino, &set).await.unwrap();
    let id = meta.new_slice_id().await.unwrap();
    let out = meta
        .write_chunk(f.ino, 0, slice(id, 10), Some(written))
        .await
        .unwrap();
    assert_eq!(out.attr.mtime, 1_153_699_200_000_000_000, "2006 stays");
    assert!(out.attr.ctime > written, "ctime still moves");
    // A commit of writes made after the last change gives them their own time.
    let later = crate::now_ns();
    let id = meta.new_slice_id().await.unwrap();
    let out = meta
        .write_chunk(f.ino, 0, slice(id, 20), Some(later))
        .await
        .unwrap();
    assert_eq!((out.attr.mtime, out.attr.ctime), (later, later));
    // A change that stores the writes' time with it (chmod of a file with buffered data).
    let at = crate::now_ns();
    let chmod = SetAttr {
        mode: Some(0o600),
        written_at: Some(at),
        ..SetAttr::default()
    };
    let attr = meta.setattr(&root, f.ino, &chmod).await.unwrap();
    assert_eq!(attr.mtime, at);
    assert!(attr.ctime >= at);
    let id = meta.new_slice_id().await.unwrap();
    let out = meta
        .write_chunk(f.ino, 0, slice(id, 20), None)
        .await
        .unwrap();
    assert_eq!(out.attr.mtime, at, "a commit without a time leaves it");
    let before = meta.getattr(f.ino).await.unwrap();
    let touched = meta.touch_atime(f.ino, before.atime + 5).await.unwrap();
    assert_eq!(touched.atime, before.atime + 5);
    assert_eq!(
        (touched.mtime, touched.ctime),
        (before.mtime, before.ctime),
        "atime only"
    );
}

pub async fn remove_tree_checks_what_rm_r_checks<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let user = Ctx::user(1000, 1000);
    let top = meta.mkdir(&root, Ino::ROOT, b"top", 0o777).await.unwrap();
    meta.setattr(
        &root,
        top.ino,
        &SetAttr {
            uid: Some(1000),
            ..SetAttr::default()
        },
    )
    .await
    .unwrap();
    let locked = meta.mkdir(&root, top.ino, b"locked", 0o700).await.unwrap();
    touch(&meta, locked.ino, "inside").await;
    touch(&meta, top.ino, "mine").await;
    let err = meta
        .remove_tree(&user, (Ino::ROOT, b"top"), RemoveOptions::RMR, &mut |_| {
            true
        })
        .await
        .expect_err("root's unreadable directory stops the user");
    assert_eq!(err.errno(), Errno::EACCES);
    assert_eq!(
        names(&meta, locked.ino).await,
        ["inside"],
        "nothing inside went"
    );
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"top"), RemoveOptions::RMR, &mut |_| {
            true
        })
        .await
        .unwrap();
    assert!(removed >= 3, "root may");
    assert!(names(&meta, Ino::ROOT).await.is_empty());
    let d = mkdir(&meta, Ino::ROOT, "stop").await;
    touch(&meta, d.ino, "a").await;
    touch(&meta, d.ino, "b").await;
    let err = meta
        .remove_tree(&root, (Ino::ROOT, b"stop"), RemoveOptions::RMR, &mut |_| {
            false
        })
        .await
        .expect_err("stopped");
    assert_eq!(err.errno(), Errno::EINTR);
}
