//! Conformance cases for attributes and permissions: setattr, access, sticky bit, xattrs,
//! statfs and volume limits.

use strata_types::{Errno, FileType, Ino};

use super::{TestStore, errno_of, test_format, touch, volume, volume_with};
use crate::meta::{Ctx, MAY_EXEC, MAY_READ, MAY_WRITE, SetAttr, TimeSet, XattrFlags};

fn user(uid: u32, gid: u32, groups: &[u32]) -> Ctx {
    Ctx {
        uid,
        gid,
        groups: groups.to_vec(),
        pid: 42,
        umask: 0,
        version_keeper: false,
    }
}

pub async fn setattr_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(1000, 100, &[200]);
    let bob = user(1001, 101, &[]);
    let f = meta
        .mknod(&alice, Ino::ROOT, b"f", FileType::Regular, 0o644, 0)
        .await
        .unwrap();
    // chmod: owner or root only.
    let set_mode = |m| SetAttr {
        mode: Some(m),
        ..SetAttr::default()
    };
    assert_eq!(
        errno_of(meta.setattr(&bob, f.ino, &set_mode(0o777)).await),
        Errno::EPERM
    );
    let a = meta.setattr(&alice, f.ino, &set_mode(0o600)).await.unwrap();
    assert_eq!(a.mode, 0o600);
    assert!(a.ctime >= f.attr.ctime);
    // setgid is dropped when the owner is not in the file's group.
    meta.setattr(
        &Ctx::root(),
        f.ino,
        &SetAttr {
            gid: Some(300),
            ..SetAttr::default()
        },
    )
    .await
    .unwrap();
    let a = meta
        .setattr(&alice, f.ino, &set_mode(0o2755))
        .await
        .unwrap();
    assert_eq!(a.mode, 0o755);
    // chown: only root changes the owner; the owner may change the group to one of theirs.
    let chown = |uid, gid| SetAttr {
        uid,
        gid,
        ..SetAttr::default()
    };
    assert_eq!(
        errno_of(meta.setattr(&alice, f.ino, &chown(Some(1001), None)).await),
        Errno::EPERM
    );
    assert_eq!(
        errno_of(meta.setattr(&alice, f.ino, &chown(None, Some(101))).await),
        Errno::EPERM
    );
    assert_eq!(
        meta.setattr(&alice, f.ino, &chown(None, Some(200)))
            .await
            .unwrap()
            .gid,
        200
    );
    assert_eq!(
        meta.setattr(&alice, f.ino, &chown(Some(1000), None))
            .await
            .unwrap()
            .uid,
        1000,
        "no-op chown is fine"
    );
    // chown clears setuid and (group-executable) setgid.
    meta.setattr(&alice, f.ino, &set_mode(0o6755))
        .await
        .unwrap();
    let a = meta
        .setattr(&Ctx::root(), f.ino, &chown(Some(1001), Some(101)))
        .await
        .unwrap();
    assert_eq!((a.uid, a.gid, a.mode), (1001, 101, 0o755));
    // Times: explicit needs ownership; "now" needs ownership or write permission.
    let explicit = SetAttr {
        mtime: Some(TimeSet::At(1_000_000_000)),
        ..SetAttr::default()
    };
    assert_eq!(
        errno_of(meta.setattr(&alice, f.ino, &explicit).await),
        Errno::EPERM
    );
    let now = SetAttr {
        atime: Some(TimeSet::Now),
        mtime: Some(TimeSet::Now),
        ..SetAttr::default()
    };
    assert_eq!(
        errno_of(meta.setattr(&alice, f.ino, &now).await),
        Errno::EACCES
    );
    meta.setattr(&bob, f.ino, &set_mode(0o666)).await.unwrap();
    meta.setattr(&alice, f.ino, &now).await.unwrap();
    let a = meta.setattr(&bob, f.ino, &explicit).await.unwrap();
    assert_eq!(a.mtime, 1_000_000_000);
    let omit = SetAttr {
        atime: Some(TimeSet::At(5)),
        ..SetAttr::default()
    };
    let a = meta.setattr(&bob, f.ino, &omit).await.unwrap();
    assert_eq!(
        (a.atime, a.mtime),
        (5, 1_000_000_000),
        "an omitted time is left alone"
    );
    // Size: write permission, regular files only.
    let size = |n| SetAttr {
        size: Some(n),
        ..SetAttr::default()
    };
    meta.setattr(&bob, f.ino, &set_mode(0o644)).await.unwrap();
    assert_eq!(
        errno_of(meta.setattr(&alice, f.ino, &size(10)).await),
        Errno::EACCES
    );
    let via_fd = SetAttr {
        size: Some(10),
        size_from_open_file: true,
        ..SetAttr::default()
    };
    assert_eq!(
        meta.setattr(&alice, f.ino, &via_fd).await.unwrap().length,
        10
    );
    assert_eq!(meta.setattr(&bob, f.ino, &size(3)).await.unwrap().length, 3);
    assert_eq!(
        errno_of(meta.setattr(&Ctx::root(), Ino::ROOT, &size(0)).await),
        Errno::EISDIR
    );
    let fifo = meta
        .mknod(&bob, Ino::ROOT, b"p", FileType::Fifo, 0o644, 0)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.setattr(&bob, fifo.ino, &size(0)).await),
        Errno::EINVAL
    );
    // A non-root truncate drops setuid.
    meta.setattr(&bob, f.ino, &set_mode(0o4755)).await.unwrap();
    assert_eq!(
        meta.setattr(&bob, f.ino, &size(0)).await.unwrap().mode,
        0o755
    );
}

pub async fn access_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let owner = user(1000, 100, &[]);
    let member = user(1001, 999, &[100]);
    let other = user(1002, 102, &[]);
    let f = meta
        .mknod(&owner, Ino::ROOT, b"f", FileType::Regular, 0o640, 0)
        .await
        .unwrap();
    meta.access(&owner, f.ino, MAY_READ | MAY_WRITE)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.access(&owner, f.ino, MAY_EXEC).await),
        Errno::EACCES
    );
    meta.access(&member, f.ino, MAY_READ).await.unwrap();
    assert_eq!(
        errno_of(meta.access(&member, f.ino, MAY_WRITE).await),
        Errno::EACCES
    );
    assert_eq!(
        errno_of(meta.access(&other, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    // Root reads and writes anything, but executes only with some x bit.
    meta.access(&Ctx::root(), f.ino, MAY_READ | MAY_WRITE)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.access(&Ctx::root(), f.ino, MAY_EXEC).await),
        Errno::EACCES
    );
    // Opening checks the same rules.
    assert_eq!(errno_of(meta.open(&other, f.ino, 0).await), Errno::EACCES);
    assert_eq!(errno_of(meta.open(&member, f.ino, 2).await), Errno::EACCES);
    meta.open(&member, f.ino, 0).await.unwrap();
    meta.close(f.ino).await.unwrap();
    assert_eq!(
        errno_of(meta.open(&Ctx::root(), Ino::ROOT, 1).await),
        Errno::EISDIR
    );
    // Directories: create needs write+search, lookup needs search.
    let d = meta
        .mkdir(&owner, Ino::ROOT, b"private", 0o700)
        .await
        .unwrap();
    let mk = meta
        .mknod(&other, d.ino, b"x", FileType::Regular, 0o644, 0)
        .await;
    assert_eq!(errno_of(mk), Errno::EACCES);
    assert_eq!(
        errno_of(meta.lookup(&other, d.ino, b"x").await),
        Errno::EACCES
    );
    let ro = meta.mkdir(&owner, Ino::ROOT, b"ro", 0o555).await.unwrap();
    assert_eq!(
        errno_of(meta.mkdir(&owner, ro.ino, b"x", 0o755).await),
        Errno::EACCES
    );
    meta.mkdir(&Ctx::root(), ro.ino, b"x", 0o755).await.unwrap();
    assert_eq!(
        errno_of(meta.unlink(&owner, ro.ino, b"x").await),
        Errno::EACCES
    );
}

pub async fn sticky_directories<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(1000, 100, &[]);
    let bob = user(1001, 100, &[]);
    let tmp = meta
        .mkdir(&Ctx::root(), Ino::ROOT, b"tmp", 0o1777)
        .await
        .unwrap();
    meta.mknod(&alice, tmp.ino, b"a", FileType::Regular, 0o666, 0)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.unlink(&bob, tmp.ino, b"a").await),
        Errno::EPERM
    );
    let rename = meta
        .rename(&bob, tmp.ino, b"a", tmp.ino, b"b", Default::default())
        .await;
    assert_eq!(errno_of(rename), Errno::EPERM);
    meta.unlink(&alice, tmp.ino, b"a").await.unwrap();
    meta.mknod(&alice, tmp.ino, b"c", FileType::Regular, 0o666, 0)
        .await
        .unwrap();
    meta.unlink(&Ctx::root(), tmp.ino, b"c").await.unwrap();
}

pub async fn xattr_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(1000, 100, &[]);
    let bob = user(1001, 101, &[]);
    let f = meta
        .mknod(&alice, Ino::ROOT, b"f", FileType::Regular, 0o644, 0)
        .await
        .unwrap();
    let none = XattrFlags::default();
    let create = XattrFlags {
        create: true,
        replace: false,
    };
    let replace = XattrFlags {
        create: false,
        replace: true,
    };
    meta.setxattr(&alice, f.ino, b"user.a", b"1", none)
        .await
        .unwrap();
    assert_eq!(
        meta.getxattr(&alice, f.ino, b"user.a", 0).await.unwrap(),
        b"1".to_vec()
    );
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"user.a", b"2", create).await),
        Errno::EEXIST
    );
    meta.setxattr(&alice, f.ino, b"user.a", b"22", replace)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"user.b", b"2", replace).await),
        Errno::ENODATA
    );
    meta.setxattr(&alice, f.ino, b"user.b", b"", create)
        .await
        .unwrap();
    assert_eq!(
        meta.getxattr(&alice, f.ino, b"user.b", 0).await.unwrap(),
        Vec::<u8>::new()
    );
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, b"user.none", 0).await),
        Errno::ENODATA
    );
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, b"user.a", 1).await),
        Errno::ERANGE
    );
    assert_eq!(
        meta.getxattr(&alice, f.ino, b"user.a", 2).await.unwrap(),
        b"22".to_vec()
    );
    assert_eq!(
        meta.listxattr(&alice, f.ino, 0).await.unwrap(),
        b"user.a\0user.b\0".to_vec()
    );
    assert_eq!(
        errno_of(meta.listxattr(&alice, f.ino, 5).await),
        Errno::ERANGE
    );
    // Permissions: others may read (0644) but not write.
    assert_eq!(
        meta.getxattr(&bob, f.ino, b"user.a", 0).await.unwrap(),
        b"22".to_vec()
    );
    assert_eq!(
        errno_of(meta.setxattr(&bob, f.ino, b"user.c", b"x", none).await),
        Errno::EACCES
    );
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"trusted.t", b"x", none).await),
        Errno::EPERM
    );
    meta.setxattr(&Ctx::root(), f.ino, b"trusted.t", b"x", none)
        .await
        .unwrap();
    assert_eq!(
        meta.listxattr(&alice, f.ino, 0).await.unwrap(),
        b"user.a\0user.b\0".to_vec(),
        "trusted.* is hidden"
    );
    // Names and sizes.
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"", b"x", none).await),
        Errno::ERANGE
    );
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, &[b'u'; 256], b"x", none).await),
        Errno::ERANGE
    );
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"other.x", b"x", none).await),
        Errno::EOPNOTSUPP
    );
    let big = vec![0u8; 65537];
    assert_eq!(
        errno_of(meta.setxattr(&alice, f.ino, b"user.big", &big, none).await),
        Errno::E2BIG
    );
    assert_eq!(errno_of(XattrFlags::from_bits(4)), Errno::EINVAL);
    // Remove.
    meta.removexattr(&alice, f.ino, b"user.a").await.unwrap();
    assert_eq!(
        errno_of(meta.removexattr(&alice, f.ino, b"user.a").await),
        Errno::ENODATA
    );
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, b"user.a", 0).await),
        Errno::ENODATA
    );
    // user.* on a symlink is refused.
    let l = meta.symlink(&alice, Ino::ROOT, b"l", b"f").await.unwrap();
    assert_eq!(
        errno_of(meta.setxattr(&alice, l.ino, b"user.a", b"1", none).await),
        Errno::EPERM
    );
    // Deleting the file deletes its xattrs.
    meta.unlink(&alice, Ino::ROOT, b"f").await.unwrap();
    assert_eq!(
        errno_of(meta.getxattr(&Ctx::root(), f.ino, b"trusted.t", 0).await),
        Errno::ENOENT
    );
}

pub async fn statfs_and_limits<S: TestStore>() {
    let store = S::create();
    let format = crate::Format {
        capacity: 1 << 20,
        inodes: 3,
        ..test_format(0)
    };
    let meta = volume_with(&store, format).await;
    let fs = meta.statfs().await.unwrap();
    assert_eq!(fs.total_space, 1 << 20);
    assert_eq!((fs.used_inodes, fs.avail_inodes), (0, 3));
    let f = touch(&meta, Ino::ROOT, "a").await;
    touch(&meta, Ino::ROOT, "b").await;
    touch(&meta, Ino::ROOT, "c").await;
    let over = meta
        .mknod(&Ctx::root(), Ino::ROOT, b"d", FileType::Regular, 0o644, 0)
        .await;
    assert_eq!(errno_of(over), Errno::ENOSPC);
    assert_eq!(meta.statfs().await.unwrap().avail_inodes, 0);
    // Space: a write past the capacity fails.
    let id = meta.new_slice_id().await.unwrap();
    let half = strata_types::Slice {
        pos: 0,
        id,
        size: 1 << 19,
        off: 0,
        len: 1 << 19,
    };
    meta.write_chunk(f.ino, 0, half, Some(crate::now_ns()))
        .await
        .unwrap();
    let fs = meta.statfs().await.unwrap();
    assert_eq!(fs.avail_space, (1 << 20) - (1 << 19));
    let id = meta.new_slice_id().await.unwrap();
    let more = strata_types::Slice {
        pos: 1 << 19,
        id,
        size: 1 << 20,
        off: 0,
        len: 1 << 20,
    };
    assert_eq!(
        errno_of(
            meta.write_chunk(f.ino, 0, more, Some(crate::now_ns()))
                .await
        ),
        Errno::ENOSPC
    );
    // Usage is shared with other clients through the counters.
    meta.flush_usage().await.unwrap();
    let other = super::client(&store).await;
    let fs = other.statfs().await.unwrap();
    assert_eq!((fs.used_inodes, fs.avail_space), (3, (1 << 20) - (1 << 19)));
}
