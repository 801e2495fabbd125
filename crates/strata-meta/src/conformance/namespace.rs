//! Conformance cases for the namespace: format, create, lookup, unlink, rmdir, rename,
//! links, readdir, trash, directory usage, corrupt values.

use strata_types::{Errno, FileType, Ino};

use super::{TestStore, errno_of, mkdir, names, test_format, touch, volume, volume_with};
use crate::error::MetaError;
use crate::keys;
use crate::kv::Txn;
use crate::meta::{Ctx, Meta, RenameFlags, TRASH_NAME};

pub async fn format_rules<S: TestStore>() {
    let store = S::create();
    let empty = Meta::new(store.client(), super::test_options());
    assert!(matches!(empty.load().await, Err(MetaError::NotFormatted)));
    let meta = volume(&store).await;
    // Same immutable settings: accepted, mutable ones updated.
    let again = crate::Format {
        trash_days: 3,
        capacity: 1 << 30,
        ..test_format(0)
    };
    let stored = meta.format(&again, false).await.unwrap();
    assert_eq!(stored.trash_days, 3);
    assert_eq!(stored.uuid, test_format(0).uuid);
    // Different bucket: refused without force.
    let other = crate::Format {
        bucket: "elsewhere".into(),
        ..test_format(0)
    };
    assert!(matches!(
        meta.format(&other, false).await,
        Err(MetaError::FormatMismatch(_))
    ));
    meta.format(&other, true).await.unwrap();
    assert_eq!(meta.load().await.unwrap().bucket, "elsewhere");
    encryption_rules::<S>(&meta, &other).await;
    // Root exists and is a directory with two links.
    let root = meta.getattr(Ino::ROOT).await.unwrap();
    assert_eq!(root.kind, FileType::Directory);
    assert_eq!(root.nlink, 2);
}

/// Encryption is chosen at creation only; settings that do not mention it keep the
/// keys; a rotation may add keys but never drop one.
async fn encryption_rules<S: TestStore>(plain_meta: &Meta, plain: &crate::Format) {
    use crate::format::{Encryption, WrappedKey};
    let sealed = |ids: &[u32]| Encryption {
        wrapping: "kek".into(),
        kek_source: None,
        rsa_private_key: None,
        current_key: ids.iter().copied().max().unwrap_or(1),
        keys: ids
            .iter()
            .map(|&id| WrappedKey {
                id,
                cipher: "aes256gcm".into(),
                wrapped: format!("{id:02x}"),
                created_at: 0,
            })
            .collect(),
        object_unit_kib: None,
    };
    let turned_on = plain.clone().with_encryption(Some(sealed(&[1])));
    assert!(
        plain_meta.format(&turned_on, true).await.is_err(),
        "not on a plain volume, even with force"
    );
    let store = S::create();
    let encrypted = test_format(0).with_encryption(Some(sealed(&[1])));
    let meta = super::volume_with(&store, encrypted.clone()).await;
    // Reformatting with settings that do not mention encryption keeps the keys.
    let again = crate::Format {
        trash_days: 5,
        ..test_format(0)
    };
    let kept = meta.format(&again, false).await.unwrap();
    assert_eq!(kept.encryption, encrypted.encryption);
    assert_eq!(kept.meta_version, crate::format::ENCRYPTION_VERSION);
    assert!(
        meta.format(&again, true)
            .await
            .unwrap()
            .encryption
            .is_some()
    );
    // A rotation adds a key; one that drops a key is refused.
    let rotated = encrypted.clone().with_encryption(Some(sealed(&[1, 2])));
    let stored = meta.format(&rotated, false).await.unwrap();
    assert_eq!(stored.encryption.as_ref().map(|e| e.current_key), Some(2));
    let dropped = encrypted.with_encryption(Some(sealed(&[2])));
    assert!(meta.format(&dropped, false).await.is_err());
    assert_eq!(meta.load().await.unwrap().encryption, rotated.encryption);
}

pub async fn create_and_lookup<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let ctx = Ctx {
        uid: 1000,
        gid: 100,
        groups: vec![],
        pid: 1,
        umask: 0,
        version_keeper: false,
    };
    let before = meta.getattr(Ino::ROOT).await.unwrap();
    let kinds = [
        ("file", FileType::Regular, 0),
        ("fifo", FileType::Fifo, 0),
        ("sock", FileType::Socket, 0),
        ("chr", FileType::CharDevice, 0x0103),
        ("blk", FileType::BlockDevice, 0x0801),
    ];
    for (name, kind, rdev) in kinds {
        let e = meta
            .mknod(&ctx, Ino::ROOT, name.as_bytes(), kind, 0o640, rdev)
            .await
            .unwrap();
        assert_eq!(e.attr.kind, kind);
        assert_eq!(
            (e.attr.mode, e.attr.uid, e.attr.gid, e.attr.rdev),
            (0o640, 1000, 100, rdev)
        );
        assert_eq!(e.attr.nlink, 1);
        assert_eq!(e.attr.parent, Ino::ROOT);
        let found = meta.lookup(&ctx, Ino::ROOT, name.as_bytes()).await.unwrap();
        assert_eq!(found, e);
        assert_eq!(meta.getattr(e.ino).await.unwrap(), e.attr);
    }
    let d = meta.mkdir(&ctx, Ino::ROOT, b"dir", 0o755).await.unwrap();
    assert_eq!(
        (d.attr.kind, d.attr.nlink, d.attr.length),
        (FileType::Directory, 2, 4096)
    );
    let root = meta.getattr(Ino::ROOT).await.unwrap();
    assert_eq!(root.nlink, 3, "a subdirectory adds a link to its parent");
    assert!(root.mtime >= before.mtime && root.ctime >= before.ctime);
    assert_eq!(
        meta.lookup(&ctx, d.ino, b"..").await.unwrap().ino,
        Ino::ROOT
    );
    assert_eq!(meta.lookup(&ctx, d.ino, b".").await.unwrap().ino, d.ino);
    assert_eq!(
        errno_of(
            meta.mknod(&ctx, Ino::ROOT, b"file", FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::EEXIST
    );
    assert_eq!(
        errno_of(meta.mkdir(&ctx, Ino::ROOT, b"dir", 0o755).await),
        Errno::EEXIST
    );
    assert_eq!(
        errno_of(meta.lookup(&ctx, Ino::ROOT, b"nope").await),
        Errno::ENOENT
    );
    let file = meta.lookup(&ctx, Ino::ROOT, b"file").await.unwrap();
    assert_eq!(
        errno_of(meta.lookup(&ctx, file.ino, b"x").await),
        Errno::ENOTDIR
    );
    assert_eq!(
        errno_of(
            meta.mknod(&ctx, file.ino, b"x", FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::ENOTDIR
    );
    assert_eq!(
        errno_of(
            meta.mknod(&ctx, Ino(999_999), b"x", FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::ENOENT
    );
    // setgid directories pass their group and the bit on.
    let sg = meta
        .mkdir(&Ctx::root(), Ino::ROOT, b"sg", 0o2777)
        .await
        .unwrap();
    let meta_ctx = Ctx {
        uid: 1000,
        gid: 100,
        groups: vec![],
        pid: 1,
        umask: 0,
        version_keeper: false,
    };
    let inner = meta
        .mkdir(&meta_ctx, sg.ino, b"inner", 0o755)
        .await
        .unwrap();
    assert_eq!(inner.attr.gid, 0);
    assert_eq!(inner.attr.mode & 0o2000, 0o2000);
    // A file a non-member creates there keeps setgid only without group execute (then it
    // marks mandatory locking), as Linux's mode_strip_sgid.
    for (mode, dir, kept) in [(0o2750, sg.ino, false), (0o2640, sg.ino, true)] {
        let name = format!("f{mode:o}");
        let f = meta
            .mknod(&meta_ctx, dir, name.as_bytes(), FileType::Regular, mode, 0)
            .await
            .unwrap();
        assert_eq!(f.attr.mode & 0o2000 != 0, kept, "{mode:o}");
    }
    // `.trash` at the root is the trash directory and cannot be created.
    assert_eq!(
        meta.lookup(&Ctx::root(), Ino::ROOT, TRASH_NAME)
            .await
            .unwrap()
            .ino,
        Ino::TRASH
    );
    assert_eq!(
        errno_of(meta.mkdir(&Ctx::root(), Ino::ROOT, TRASH_NAME, 0o755).await),
        Errno::EPERM
    );
}

pub async fn name_limits<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let ok = "n".repeat(255);
    let long = "n".repeat(256);
    touch(&meta, Ino::ROOT, &ok).await;
    let too_long = meta
        .mknod(
            &root,
            Ino::ROOT,
            long.as_bytes(),
            FileType::Regular,
            0o644,
            0,
        )
        .await;
    assert_eq!(errno_of(too_long), Errno::ENAMETOOLONG);
    assert_eq!(
        errno_of(meta.lookup(&root, Ino::ROOT, long.as_bytes()).await),
        Errno::ENAMETOOLONG
    );
    assert_eq!(
        errno_of(meta.mkdir(&root, Ino::ROOT, b"a/b", 0o755).await),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.mkdir(&root, Ino::ROOT, b"", 0o755).await),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.mkdir(&root, Ino::ROOT, b"..", 0o755).await),
        Errno::EEXIST
    );
}

pub async fn symlinks<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let l = meta
        .symlink(&root, Ino::ROOT, b"link", b"../target/path")
        .await
        .unwrap();
    assert_eq!(l.attr.kind, FileType::Symlink);
    assert_eq!(l.attr.length, 14);
    assert_eq!(
        meta.readlink(l.ino).await.unwrap(),
        b"../target/path".to_vec()
    );
    let f = touch(&meta, Ino::ROOT, "file").await;
    assert_eq!(errno_of(meta.readlink(f.ino).await), Errno::EINVAL);
    let max = vec![b'x'; 4096];
    let big = meta.symlink(&root, Ino::ROOT, b"big", &max).await.unwrap();
    assert_eq!(meta.readlink(big.ino).await.unwrap().len(), 4096);
    assert_eq!(
        errno_of(meta.symlink(&root, Ino::ROOT, b"huge", &[b'x'; 4097]).await),
        Errno::ENAMETOOLONG
    );
    assert_eq!(
        errno_of(meta.symlink(&root, Ino::ROOT, b"empty", b"").await),
        Errno::ENOENT
    );
    meta.unlink(&root, Ino::ROOT, b"link").await.unwrap();
    assert_eq!(errno_of(meta.readlink(l.ino).await), Errno::ENOENT);
}

pub async fn unlink_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let f = touch(&meta, d.ino, "f").await;
    assert_eq!(
        errno_of(meta.unlink(&root, Ino::ROOT, b"d").await),
        Errno::EISDIR
    );
    assert_eq!(
        errno_of(meta.unlink(&root, d.ino, b"missing").await),
        Errno::ENOENT
    );
    assert_eq!(
        errno_of(meta.unlink(&root, f.ino, b"x").await),
        Errno::ENOTDIR
    );
    let before = meta.getattr(d.ino).await.unwrap();
    meta.unlink(&root, d.ino, b"f").await.unwrap();
    assert_eq!(
        errno_of(meta.getattr(f.ino).await),
        Errno::ENOENT,
        "no trash: the inode is gone"
    );
    assert_eq!(
        errno_of(meta.lookup(&root, d.ino, b"f").await),
        Errno::ENOENT
    );
    let after = meta.getattr(d.ino).await.unwrap();
    assert!(after.mtime >= before.mtime);
    assert_eq!(after.nlink, 2);
}

pub async fn rmdir_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let sub = mkdir(&meta, d.ino, "sub").await;
    touch(&meta, Ino::ROOT, "f").await;
    assert_eq!(meta.getattr(d.ino).await.unwrap().nlink, 3);
    assert_eq!(
        errno_of(meta.rmdir(&root, Ino::ROOT, b"d").await),
        Errno::ENOTEMPTY
    );
    assert_eq!(
        errno_of(meta.rmdir(&root, Ino::ROOT, b"f").await),
        Errno::ENOTDIR
    );
    assert_eq!(
        errno_of(meta.rmdir(&root, Ino::ROOT, b"none").await),
        Errno::ENOENT
    );
    assert_eq!(
        errno_of(meta.rmdir(&root, d.ino, b".").await),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(meta.rmdir(&root, d.ino, b"..").await),
        Errno::ENOTEMPTY
    );
    meta.rmdir(&root, d.ino, b"sub").await.unwrap();
    assert_eq!(errno_of(meta.getattr(sub.ino).await), Errno::ENOENT);
    assert_eq!(meta.getattr(d.ino).await.unwrap().nlink, 2);
    meta.rmdir(&root, Ino::ROOT, b"d").await.unwrap();
    assert_eq!(meta.getattr(Ino::ROOT).await.unwrap().nlink, 2);
    assert_eq!(
        errno_of(
            meta.mknod(&root, d.ino, b"x", FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::ENOENT
    );
}

pub async fn rename_rules<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let none = RenameFlags::default();
    let a = mkdir(&meta, Ino::ROOT, "a").await;
    let b = mkdir(&meta, Ino::ROOT, "b").await;
    let f = touch(&meta, a.ino, "f").await;
    let g = touch(&meta, b.ino, "g").await;
    // Move a file between directories.
    meta.rename(&root, a.ino, b"f", b.ino, b"f2", none)
        .await
        .unwrap();
    assert_eq!(names(&meta, a.ino).await, Vec::<String>::new());
    assert_eq!(meta.lookup(&root, b.ino, b"f2").await.unwrap().ino, f.ino);
    assert_eq!(meta.getattr(f.ino).await.unwrap().parent, b.ino);
    // Replace a file: the old target is gone.
    meta.rename(&root, b.ino, b"f2", b.ino, b"g", none)
        .await
        .unwrap();
    assert_eq!(meta.lookup(&root, b.ino, b"g").await.unwrap().ino, f.ino);
    assert_eq!(errno_of(meta.getattr(g.ino).await), Errno::ENOENT);
    // Directory rules.
    let d1 = mkdir(&meta, a.ino, "d1").await;
    let d2 = mkdir(&meta, b.ino, "d2").await;
    assert_eq!(
        errno_of(meta.rename(&root, b.ino, b"g", b.ino, b"d2", none).await),
        Errno::EISDIR
    );
    assert_eq!(
        errno_of(meta.rename(&root, a.ino, b"d1", b.ino, b"g", none).await),
        Errno::ENOTDIR
    );
    touch(&meta, d2.ino, "inside").await;
    assert_eq!(
        errno_of(meta.rename(&root, a.ino, b"d1", b.ino, b"d2", none).await),
        Errno::ENOTEMPTY
    );
    meta.unlink(&root, d2.ino, b"inside").await.unwrap();
    meta.rename(&root, a.ino, b"d1", b.ino, b"d2", none)
        .await
        .unwrap();
    assert_eq!(errno_of(meta.getattr(d2.ino).await), Errno::ENOENT);
    assert_eq!(meta.getattr(a.ino).await.unwrap().nlink, 2);
    assert_eq!(meta.getattr(b.ino).await.unwrap().nlink, 3);
    assert_eq!(meta.lookup(&root, d1.ino, b"..").await.unwrap().ino, b.ino);
    // A directory cannot move into its own subtree.
    let deep = mkdir(&meta, d1.ino, "deep").await;
    assert_eq!(
        errno_of(
            meta.rename(&root, Ino::ROOT, b"b", deep.ino, b"x", none)
                .await
        ),
        Errno::EINVAL
    );
    assert_eq!(
        errno_of(
            meta.rename(&root, b.ino, b"d2", d1.ino, b"self", none)
                .await
        ),
        Errno::EINVAL
    );
    // Missing source, renaming onto itself, dot names.
    assert_eq!(
        errno_of(meta.rename(&root, a.ino, b"nope", b.ino, b"x", none).await),
        Errno::ENOENT
    );
    meta.rename(&root, b.ino, b"g", b.ino, b"g", none)
        .await
        .unwrap();
    assert_eq!(meta.lookup(&root, b.ino, b"g").await.unwrap().ino, f.ino);
    assert_eq!(
        errno_of(meta.rename(&root, b.ino, b".", a.ino, b"x", none).await),
        Errno::EBUSY
    );
    assert_eq!(errno_of(RenameFlags::from_bits(3)), Errno::EINVAL);
    assert!(RenameFlags::from_bits(4).unwrap().whiteout);
    assert_eq!(errno_of(RenameFlags::from_bits(6)), Errno::EINVAL);
}

pub async fn rename_exchange_and_noreplace<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let a = mkdir(&meta, Ino::ROOT, "a").await;
    let x = touch(&meta, Ino::ROOT, "x").await;
    let y = touch(&meta, a.ino, "y").await;
    let noreplace = RenameFlags {
        noreplace: true,
        ..RenameFlags::default()
    };
    let exchange = RenameFlags {
        exchange: true,
        ..RenameFlags::default()
    };
    assert_eq!(
        errno_of(
            meta.rename(&root, Ino::ROOT, b"x", a.ino, b"y", noreplace)
                .await
        ),
        Errno::EEXIST
    );
    meta.rename(&root, Ino::ROOT, b"x", a.ino, b"z", noreplace)
        .await
        .unwrap();
    meta.rename(&root, a.ino, b"z", Ino::ROOT, b"x", noreplace)
        .await
        .unwrap();
    // Replacing only a given inode: a compare-and-swap on the destination.
    let replacing = |ino| RenameFlags {
        replacing: Some(ino),
        ..RenameFlags::default()
    };
    let w = touch(&meta, Ino::ROOT, "w").await;
    for (target, wrong) in [(&b"y"[..], x.ino), (&b"none"[..], y.ino)] {
        let refused = meta
            .rename(&root, Ino::ROOT, b"w", a.ino, target, replacing(wrong))
            .await;
        assert_eq!(errno_of(refused), Errno::ESTALE);
    }
    assert_eq!(meta.lookup(&root, a.ino, b"y").await.unwrap().ino, y.ino);
    let w2 = touch(&meta, Ino::ROOT, "w2").await;
    meta.rename(&root, Ino::ROOT, b"w2", Ino::ROOT, b"w", replacing(w.ino))
        .await
        .unwrap();
    assert_eq!(
        meta.lookup(&root, Ino::ROOT, b"w").await.unwrap().ino,
        w2.ino
    );
    // Moving only a given inode: a compare-and-swap on the source.
    let moving = |ino| RenameFlags {
        moving: Some(ino),
        ..RenameFlags::default()
    };
    for (source, wrong) in [(&b"w"[..], w.ino), (&b"none"[..], w2.ino)] {
        let refused = meta
            .rename(&root, Ino::ROOT, source, a.ino, b"moved", moving(wrong))
            .await;
        assert_eq!(errno_of(refused), Errno::ESTALE);
    }
    meta.rename(&root, Ino::ROOT, b"w", a.ino, b"moved", moving(w2.ino))
        .await
        .unwrap();
    assert_eq!(
        meta.lookup(&root, a.ino, b"moved").await.unwrap().ino,
        w2.ino
    );
    meta.unlink(&root, a.ino, b"moved").await.unwrap();
    // Exchange a file with a file in another directory.
    meta.rename(&root, Ino::ROOT, b"x", a.ino, b"y", exchange)
        .await
        .unwrap();
    assert_eq!(
        meta.lookup(&root, Ino::ROOT, b"x").await.unwrap().ino,
        y.ino
    );
    assert_eq!(meta.lookup(&root, a.ino, b"y").await.unwrap().ino, x.ino);
    assert_eq!(meta.getattr(x.ino).await.unwrap().parent, a.ino);
    assert_eq!(meta.getattr(y.ino).await.unwrap().parent, Ino::ROOT);
    // Exchange a directory with a file: link counts follow the directory.
    let sub = mkdir(&meta, a.ino, "sub").await;
    meta.rename(&root, a.ino, b"sub", Ino::ROOT, b"x", exchange)
        .await
        .unwrap();
    assert_eq!(
        meta.lookup(&root, Ino::ROOT, b"x").await.unwrap().ino,
        sub.ino
    );
    assert_eq!(
        meta.getattr(Ino::ROOT).await.unwrap().nlink,
        4,
        "root: a and the moved sub"
    );
    assert_eq!(meta.getattr(a.ino).await.unwrap().nlink, 2);
    assert_eq!(
        meta.lookup(&root, sub.ino, b"..").await.unwrap().ino,
        Ino::ROOT
    );
    assert_eq!(
        errno_of(
            meta.rename(&root, Ino::ROOT, b"x", a.ino, b"none", exchange)
                .await
        ),
        Errno::ENOENT
    );
}

pub async fn hard_links<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let a = mkdir(&meta, Ino::ROOT, "a").await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let attr = meta.link(&root, f.ino, a.ino, b"f-link").await.unwrap();
    assert_eq!(attr.nlink, 2);
    assert_eq!(attr.parent, Ino(0), "several parents");
    assert_eq!(
        meta.lookup(&root, a.ino, b"f-link").await.unwrap().ino,
        f.ino
    );
    assert_eq!(
        errno_of(meta.link(&root, a.ino, Ino::ROOT, b"dirlink").await),
        Errno::EPERM
    );
    assert_eq!(
        errno_of(meta.link(&root, f.ino, a.ino, b"f-link").await),
        Errno::EEXIST
    );
    meta.link(&root, f.ino, Ino::ROOT, b"second").await.unwrap();
    meta.unlink(&root, Ino::ROOT, b"f").await.unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().nlink, 2);
    meta.rename(
        &root,
        Ino::ROOT,
        b"second",
        a.ino,
        b"moved",
        RenameFlags::default(),
    )
    .await
    .unwrap();
    meta.unlink(&root, a.ino, b"f-link").await.unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().nlink, 1);
    meta.unlink(&root, a.ino, b"moved").await.unwrap();
    assert_eq!(errno_of(meta.getattr(f.ino).await), Errno::ENOENT);
    // No parent records are left behind.
    let mut tx = Txn::begin(meta.engine().as_ref()).await.unwrap();
    let prefix = keys::link_parent_prefix(f.ino);
    assert!(
        tx.scan(&prefix, &crate::kv::prefix_end(&prefix), 10, false)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn readdir_pages<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let d = mkdir(&meta, Ino::ROOT, "big").await;
    let mut expected = Vec::new();
    for i in 0..300 {
        let name = format!("entry-{i:04}");
        touch(&meta, d.ino, &name).await;
        expected.push(name);
    }
    let mut seen = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = meta
            .readdir(d.ino, after.as_deref(), 64, true)
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 64);
        for e in &page {
            let attr = e.attr.as_ref().expect("readdirplus returns attributes");
            assert_eq!(attr.kind, FileType::Regular);
            assert_eq!(e.kind, FileType::Regular);
        }
        after = page.last().map(|e| e.name.clone());
        seen.extend(page.into_iter().map(|e| String::from_utf8(e.name).unwrap()));
    }
    assert_eq!(seen, expected);
    let f = meta
        .lookup(&Ctx::root(), d.ino, b"entry-0000")
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.readdir(f.ino, None, 10, false).await),
        Errno::ENOTDIR
    );
    let plain = meta.readdir(d.ino, None, 5, false).await.unwrap();
    assert!(plain.iter().all(|e| e.attr.is_none()));
}

pub async fn trash_keeps_deleted_files<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, test_format(1)).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let f = touch(&meta, d.ino, "precious.txt").await;
    let g = touch(&meta, Ino::ROOT, "target").await;
    meta.unlink(&root, d.ino, b"precious.txt").await.unwrap();
    // Still there, in the trash hour directory, named parent-inode-name.
    let hours = names(&meta, Ino::TRASH).await;
    assert_eq!(hours.len(), 1);
    let hour = meta
        .lookup(&root, Ino::TRASH, hours[0].as_bytes())
        .await
        .unwrap();
    let expected = format!("{}-{}-precious.txt", d.ino.0, f.ino.0);
    assert_eq!(names(&meta, hour.ino).await, vec![expected.clone()]);
    let kept = meta.getattr(f.ino).await.unwrap();
    assert_eq!((kept.nlink, kept.parent), (1, hour.ino));
    // A replaced rename target goes to the trash too.
    touch(&meta, Ino::ROOT, "new").await;
    meta.rename(
        &root,
        Ino::ROOT,
        b"new",
        Ino::ROOT,
        b"target",
        RenameFlags::default(),
    )
    .await
    .unwrap();
    assert!(meta.getattr(g.ino).await.is_ok());
    assert_eq!(names(&meta, hour.ino).await.len(), 2);
    // Removed directories are kept so their files can be restored under them.
    meta.rmdir(&root, Ino::ROOT, b"d").await.unwrap();
    assert_eq!(meta.getattr(d.ino).await.unwrap().parent, hour.ino);
    // Deleting inside the trash deletes for real; creating there is refused.
    meta.unlink(&root, hour.ino, expected.as_bytes())
        .await
        .unwrap();
    assert_eq!(errno_of(meta.getattr(f.ino).await), Errno::ENOENT);
    assert_eq!(
        errno_of(
            meta.mknod(&root, hour.ino, b"x", FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::EPERM
    );
}

pub async fn dir_usage_is_kept<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let f = touch(&meta, d.ino, "f").await;
    mkdir(&meta, d.ino, "sub").await;
    assert_eq!(meta.dir_usage(d.ino).await.unwrap(), (4096, 2));
    let id = meta.new_slice_id().await.unwrap();
    let s = strata_types::Slice {
        pos: 0,
        id,
        size: 10_000,
        off: 0,
        len: 10_000,
    };
    meta.write_chunk(f.ino, 0, s, Some(crate::now_ns()))
        .await
        .unwrap();
    assert_eq!(meta.dir_usage(d.ino).await.unwrap(), (4096 + 12_288, 2));
    meta.rename(&root, d.ino, b"f", Ino::ROOT, b"f", RenameFlags::default())
        .await
        .unwrap();
    assert_eq!(meta.dir_usage(d.ino).await.unwrap(), (4096, 1));
    let root_usage = meta.dir_usage(Ino::ROOT).await.unwrap();
    assert_eq!(root_usage, (4096 + 12_288, 2));
    meta.unlink(&root, Ino::ROOT, b"f").await.unwrap();
    assert_eq!(meta.dir_usage(Ino::ROOT).await.unwrap(), (4096, 1));
    meta.flush_usage().await.unwrap();
    let fs = meta.statfs().await.unwrap();
    assert_eq!(fs.used_inodes, 2, "d and sub remain");
}

pub async fn corrupt_values_name_their_key<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let engine = meta.engine().clone();
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    tx.put(keys::inode_core(f.ino), vec![1, 2, 3]);
    tx.put(keys::chunk(f.ino, 0), vec![0; 23]);
    tx.put(keys::dentry(Ino::ROOT, b"bad"), vec![9; 9]);
    tx.commit().await.unwrap();
    // Written behind the client's back, as another client would: its cache hears of it
    // through the change feed.
    meta.sync_changes().await.unwrap();
    for err in [
        meta.getattr(f.ino).await.unwrap_err(),
        meta.read_chunk(f.ino, 0).await.unwrap_err(),
        meta.readdir(Ino::ROOT, None, 100, false).await.unwrap_err(),
    ] {
        assert!(matches!(err, MetaError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("\\x00"), "the key is named: {err}");
        assert_eq!(err.errno(), Errno::EIO);
    }
}
