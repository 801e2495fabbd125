//! Conformance cases for inode protections: the immutable and append-only flags as
//! Linux enforces them (EPERM even for root), S3 object lock (retention modes, legal
//! hold), the gateway's version moves, another client's view, dump and load, the trash's
//! expiry, `rmr`, and the metadata version a protected volume rises to.

use strata_types::{Errno, FileType, Ino, Nanos, Retention, RetentionMode, Slice};

use super::lifecycle::{dump_of, load_fresh};
use super::{
    TestStore, client, errno_of, mkdir, names, slice, test_format, touch, volume, volume_with,
};
use crate::format::PROTECTION_VERSION;
use crate::meta::{
    Ctx, DumpOptions, FallocateMode, Meta, RemoveOptions, RenameFlags, SetAttr, TimeSet,
    XattrFlags, now_ns,
};

const O_RDONLY: u32 = 0;
const O_WRONLY: u32 = 1;
const O_TRUNC: u32 = 0o1000;
const O_APPEND: u32 = 0o2000;
const HOUR: Nanos = 3_600_000_000_000;

fn keeper() -> Ctx {
    Ctx {
        version_keeper: true,
        ..Ctx::root()
    }
}

fn retention(mode: RetentionMode, until: Nanos) -> Option<Retention> {
    Some(Retention { mode, until })
}

async fn rename(meta: &Meta, ctx: &Ctx, from: (Ino, &str), to: (Ino, &str)) -> crate::Result<()> {
    meta.rename(
        ctx,
        from.0,
        from.1.as_bytes(),
        to.0,
        to.1.as_bytes(),
        RenameFlags::default(),
    )
    .await
}

/// Every way of changing a file refused with EPERM for `ctx` (root in these cases).
async fn assert_unchangeable(meta: &Meta, ctx: &Ctx, dir: Ino, name: &str, ino: Ino) {
    let eperm = Errno::EPERM;
    assert_eq!(errno_of(meta.open(ctx, ino, O_WRONLY).await), eperm);
    assert_eq!(
        errno_of(meta.open(ctx, ino, O_RDONLY | O_TRUNC).await),
        eperm
    );
    let changes = [
        SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        },
        SetAttr {
            uid: Some(7),
            ..SetAttr::default()
        },
        SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
        SetAttr {
            mtime: Some(TimeSet::At(1)),
            ..SetAttr::default()
        },
    ];
    for change in &changes {
        assert_eq!(
            errno_of(meta.setattr(ctx, ino, change).await),
            eperm,
            "{change:?}"
        );
    }
    let written = meta
        .write_chunk(ino, 0, slice(900, 10), Some(now_ns()))
        .await;
    assert_eq!(errno_of(written), eperm);
    let keep = FallocateMode::from_bits(FallocateMode::KEEP_SIZE).unwrap();
    assert_eq!(errno_of(meta.fallocate(ino, keep, 0, 10).await), eperm);
    let set = meta.setxattr(ctx, ino, b"user.k", b"v", XattrFlags::default());
    assert_eq!(errno_of(set.await), eperm);
    assert_eq!(
        errno_of(meta.unlink(ctx, dir, name.as_bytes()).await),
        eperm
    );
    assert_eq!(
        errno_of(rename(meta, ctx, (dir, name), (dir, "moved")).await),
        eperm
    );
    touch(meta, dir, "other").await;
    assert_eq!(
        errno_of(rename(meta, ctx, (dir, "other"), (dir, name)).await),
        eperm
    );
    meta.unlink(ctx, dir, b"other").await.unwrap();
    assert_eq!(errno_of(meta.link(ctx, ino, dir, b"again").await), eperm);
    // Reading is untouched.
    meta.open(ctx, ino, O_RDONLY).await.unwrap();
}

pub async fn immutable_files_refuse_every_change<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let f = touch(&meta, d.ino, "f").await;
    meta.write_chunk(f.ino, 0, slice(1, 100), None)
        .await
        .unwrap();
    // Only root changes the flag; the owner may call with the flags unchanged.
    let alice = Ctx::user(1000, 1000);
    let hers = touch(&meta, d.ino, "hers").await;
    let chown = SetAttr {
        uid: Some(1000),
        ..SetAttr::default()
    };
    meta.setattr(&root, hers.ino, &chown).await.unwrap();
    let by_owner = meta.set_inode_flags(&alice, hers.ino, true, false).await;
    assert_eq!(errno_of(by_owner), Errno::EPERM);
    meta.set_inode_flags(&alice, hers.ino, false, false)
        .await
        .unwrap();
    let bob = Ctx::user(1001, 1001);
    let by_other = meta.set_inode_flags(&bob, f.ino, false, false);
    assert_eq!(errno_of(by_other.await), Errno::EPERM);

    let attr = meta
        .set_inode_flags(&root, f.ino, true, false)
        .await
        .unwrap();
    assert!(attr.protection.immutable);
    assert_unchangeable(&meta, &root, d.ino, "f", f.ino).await;
    // Another client sees the flag and refuses as well.
    let other = client(&store).await;
    assert!(other.getattr(f.ino).await.unwrap().protection.immutable);
    assert_eq!(
        errno_of(other.unlink(&root, d.ino, b"f").await),
        Errno::EPERM
    );
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 100);
    // Root clears it; then the file goes like any other.
    meta.set_inode_flags(&root, f.ino, false, false)
        .await
        .unwrap();
    meta.unlink(&root, d.ino, b"f").await.unwrap();
}

pub async fn append_only_files_take_appends_only<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let f = touch(&meta, Ino::ROOT, "log").await;
    meta.set_inode_flags(&root, f.ino, false, true)
        .await
        .unwrap();
    let eperm = Errno::EPERM;
    assert_eq!(errno_of(meta.open(&root, f.ino, O_WRONLY).await), eperm);
    let trunc = meta.open(&root, f.ino, O_WRONLY | O_APPEND | O_TRUNC).await;
    assert_eq!(errno_of(trunc), eperm);
    meta.open(&root, f.ino, O_WRONLY | O_APPEND).await.unwrap();
    meta.write_chunk(f.ino, 0, slice(1, 10), Some(now_ns()))
        .await
        .unwrap();
    let appended = Slice {
        pos: 10,
        ..slice(2, 5)
    };
    meta.write_chunk(f.ino, 0, appended, None).await.unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().length, 15);
    // Touching the times to now is allowed; any other change is not.
    let touch_now = SetAttr {
        mtime: Some(TimeSet::Now),
        ..SetAttr::default()
    };
    meta.setattr(&root, f.ino, &touch_now).await.unwrap();
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(errno_of(meta.setattr(&root, f.ino, &truncate).await), eperm);
    let punch = FallocateMode::from_bits(FallocateMode::KEEP_SIZE | FallocateMode::PUNCH_HOLE);
    let punched = meta.fallocate(f.ino, punch.unwrap(), 0, 5).await;
    assert_eq!(errno_of(punched), eperm);
    assert_eq!(errno_of(meta.unlink(&root, Ino::ROOT, b"log").await), eperm);
    // An append-only directory takes new entries and keeps them.
    let d = mkdir(&meta, Ino::ROOT, "spool").await;
    meta.set_inode_flags(&root, d.ino, false, true)
        .await
        .unwrap();
    touch(&meta, d.ino, "job").await;
    assert_eq!(errno_of(meta.unlink(&root, d.ino, b"job").await), eperm);
    let moved = rename(&meta, &root, (d.ino, "job"), (Ino::ROOT, "job")).await;
    assert_eq!(errno_of(moved), eperm);
    assert_eq!(names(&meta, d.ino).await, vec!["job"]);
}

pub async fn immutable_directories_keep_their_entries<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "frozen").await;
    touch(&meta, d.ino, "inside").await;
    touch(&meta, Ino::ROOT, "outside").await;
    meta.set_inode_flags(&root, d.ino, true, false)
        .await
        .unwrap();
    let eperm = Errno::EPERM;
    let made = meta.mknod(&root, d.ino, b"new", FileType::Regular, 0o644, 0);
    assert_eq!(errno_of(made.await), eperm);
    assert_eq!(
        errno_of(meta.mkdir(&root, d.ino, b"sub", 0o755).await),
        eperm
    );
    assert_eq!(errno_of(meta.unlink(&root, d.ino, b"inside").await), eperm);
    let into = rename(&meta, &root, (Ino::ROOT, "outside"), (d.ino, "outside")).await;
    assert_eq!(errno_of(into), eperm);
    let itself = rename(&meta, &root, (Ino::ROOT, "frozen"), (Ino::ROOT, "thawed")).await;
    assert_eq!(errno_of(itself), eperm);
    assert_eq!(
        errno_of(meta.rmdir(&root, Ino::ROOT, b"frozen").await),
        eperm
    );
    assert_eq!(names(&meta, d.ino).await, vec!["inside"]);
}

pub async fn object_locks_hold_until_they_end<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let later = now_ns() + HOUR;
    let gov = touch(&meta, Ino::ROOT, "gov").await;
    let governed = retention(RetentionMode::Governance, later);
    let attr = meta
        .set_retention(&root, gov.ino, governed, false)
        .await
        .unwrap();
    assert_eq!(attr.protection.retention, governed);
    assert_unchangeable(&meta, &root, Ino::ROOT, "gov", gov.ino).await;
    // Clearing the chattr flags does not lift a lock.
    meta.set_inode_flags(&root, gov.ino, false, false)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.unlink(&root, Ino::ROOT, b"gov").await),
        Errno::EPERM
    );
    // Governance: shortened only with the bypass.
    let sooner = retention(RetentionMode::Governance, later - HOUR / 2);
    let refused = meta.set_retention(&root, gov.ino, sooner, false).await;
    assert_eq!(errno_of(refused), Errno::EPERM);
    meta.set_retention(&root, gov.ino, None, true)
        .await
        .unwrap();
    meta.unlink(&root, Ino::ROOT, b"gov").await.unwrap();

    // Compliance: never shortened, not even by root with the bypass; extended freely.
    let comp = touch(&meta, Ino::ROOT, "comp").await;
    let complied = retention(RetentionMode::Compliance, later);
    meta.set_retention(&root, comp.ino, complied, false)
        .await
        .unwrap();
    for weaker in [None, retention(RetentionMode::Governance, later)] {
        let refused = meta.set_retention(&root, comp.ino, weaker, true).await;
        assert_eq!(errno_of(refused), Errno::EPERM);
    }
    let longer = retention(RetentionMode::Compliance, later + HOUR);
    meta.set_retention(&root, comp.ino, longer, false)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.unlink(&root, Ino::ROOT, b"comp").await),
        Errno::EPERM
    );

    // A legal hold holds until lifted; an ended retention holds nothing.
    let held = touch(&meta, Ino::ROOT, "held").await;
    let ended = retention(RetentionMode::Compliance, now_ns() - 1);
    meta.set_retention(&root, held.ino, ended, false)
        .await
        .unwrap();
    meta.set_legal_hold(&root, held.ino, true).await.unwrap();
    assert_eq!(
        errno_of(meta.unlink(&root, Ino::ROOT, b"held").await),
        Errno::EPERM
    );
    meta.set_legal_hold(&root, held.ino, false).await.unwrap();
    meta.unlink(&root, Ino::ROOT, b"held").await.unwrap();
    // Locks are for files only.
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let on_dir = meta.set_legal_hold(&root, d.ino, true).await;
    assert_eq!(errno_of(on_dir), Errno::EINVAL);
    // The volume now says older clients may not serve it.
    assert_eq!(
        meta.current_format().unwrap().meta_version,
        PROTECTION_VERSION
    );
    assert_eq!(
        client(&store).await.current_format().unwrap().meta_version,
        PROTECTION_VERSION
    );
}

pub async fn the_version_keeper_moves_locked_names_but_keeps_one<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let (root, keeper) = (Ctx::root(), keeper());
    let bucket = mkdir(&meta, Ino::ROOT, "bucket").await;
    let versions = mkdir(&meta, Ino::ROOT, "versions").await;
    let v1 = touch(&meta, bucket.ino, "key").await;
    meta.set_legal_hold(&root, v1.ino, true).await.unwrap();
    // Anyone else: no new name.
    let linked = meta.link(&root, v1.ino, versions.ino, b"v1").await;
    assert_eq!(errno_of(linked), Errno::EPERM);
    // The keeper links the old version into the store, then a new one replaces the key.
    meta.link(&keeper, v1.ino, versions.ino, b"v1")
        .await
        .unwrap();
    touch(&meta, bucket.ino, "temp").await;
    rename(&meta, &keeper, (bucket.ino, "temp"), (bucket.ino, "key"))
        .await
        .unwrap();
    assert_eq!(meta.getattr(v1.ino).await.unwrap().nlink, 1);
    // The last name stays, for the keeper too; a move keeps it, so it may.
    let last = meta.unlink(&keeper, versions.ino, b"v1").await;
    assert_eq!(errno_of(last), Errno::EPERM);
    rename(&meta, &keeper, (versions.ino, "v1"), (bucket.ino, "back"))
        .await
        .unwrap();
    touch(&meta, bucket.ino, "over").await;
    let over = rename(&meta, &keeper, (bucket.ino, "over"), (bucket.ino, "back")).await;
    assert_eq!(errno_of(over), Errno::EPERM);
    // Its data and attributes stay frozen even for the keeper.
    assert_eq!(
        errno_of(meta.open(&keeper, v1.ino, O_WRONLY).await),
        Errno::EPERM
    );
    // A chattr-immutable file is not the keeper's to move.
    let chattr = touch(&meta, bucket.ino, "chattr").await;
    meta.set_inode_flags(&root, chattr.ino, true, false)
        .await
        .unwrap();
    let moved = rename(&meta, &keeper, (bucket.ino, "chattr"), (versions.ino, "x")).await;
    assert_eq!(errno_of(moved), Errno::EPERM);
}

pub async fn protections_survive_dump_load_the_trash_and_rmr<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, test_format(1)).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let locked = touch(&meta, d.ino, "locked").await;
    touch(&meta, d.ino, "free").await;
    let until = now_ns() + HOUR;
    let kept = retention(RetentionMode::Compliance, until);
    meta.set_retention(&root, locked.ino, kept, false)
        .await
        .unwrap();
    let log = touch(&meta, Ino::ROOT, "log").await;
    meta.set_inode_flags(&root, log.ino, false, true)
        .await
        .unwrap();

    // rmr removes what it may and stops at the locked file with EPERM.
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"d"), RemoveOptions::RMR, &mut |_| true)
        .await;
    assert_eq!(errno_of(removed), Errno::EPERM);
    assert!(names(&meta, d.ino).await.contains(&"locked".to_string()));

    // Dump and load keep every protection and the metadata version.
    let dump = dump_of(&meta, &DumpOptions::default()).await;
    let (_target, loaded) = load_fresh::<S>(&dump).await;
    assert_eq!(
        loaded
            .getattr(locked.ino)
            .await
            .unwrap()
            .protection
            .retention,
        kept
    );
    assert!(
        loaded
            .getattr(log.ino)
            .await
            .unwrap()
            .protection
            .append_only
    );
    assert_eq!(
        loaded.current_format().unwrap().meta_version,
        PROTECTION_VERSION
    );
    let refused = loaded.unlink(&root, d.ino, b"locked").await;
    assert_eq!(errno_of(refused), Errno::EPERM);

    // A file locked in the trash outlives the trash's expiry; the hour stays.
    let doomed = touch(&meta, Ino::ROOT, "doomed").await;
    meta.unlink(&root, Ino::ROOT, b"doomed").await.unwrap();
    meta.set_legal_hold(&root, doomed.ino, true).await.unwrap();
    let purged = meta.purge_trash(now_ns() + 30 * 24 * HOUR).await;
    assert_eq!(errno_of(purged), Errno::EPERM);
    assert!(meta.getattr(doomed.ino).await.is_ok());
    assert_eq!(names(&meta, Ino::TRASH).await.len(), 1);
    meta.set_legal_hold(&root, doomed.ino, false).await.unwrap();
    meta.purge_trash(now_ns() + 30 * 24 * HOUR).await.unwrap();
    assert_eq!(errno_of(meta.getattr(doomed.ino).await), Errno::ENOENT);
}
