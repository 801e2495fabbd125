//! Conformance cases for POSIX access control lists: the `system.posix_acl_*`
//! attributes, the access check, chmod and the mask, inheritance, one record per
//! distinct list, another client's view, dump and load, and volumes without lists.

use strata_types::{Errno, FileType, Ino};

use super::lifecycle::{dump_of, load_fresh};
use super::{TestStore, client, errno_of, test_format, volume, volume_with};
use crate::acl::{Acl, XATTR_ACCESS, XATTR_DEFAULT};
use crate::keys;
use crate::kv::{Txn, prefix_end};
use crate::meta::{Ctx, MAY_EXEC, MAY_READ, MAY_WRITE, Meta, SetAttr, XattrFlags};

fn user(uid: u32, gid: u32, groups: &[u32]) -> Ctx {
    Ctx {
        uid,
        gid,
        groups: groups.to_vec(),
        pid: 7,
        umask: 0o022,
        version_keeper: false,
    }
}

/// `user::rw-, user:BOB:rw-, group::r--, group:ENG:r-x, mask::rwx, other::---`.
fn shared_list() -> Acl {
    Acl {
        owner: 6,
        group: 4,
        mask: Some(7),
        other: 0,
        users: vec![(BOB, 6)],
        groups: vec![(ENG, 5)],
    }
}

const ALICE: u32 = 1000;
const BOB: u32 = 1001;
const CAROL: u32 = 1002;
const STAFF: u32 = 100;
const ENG: u32 = 300;

async fn set(meta: &Meta, ctx: &Ctx, ino: Ino, name: &[u8], acl: &Acl) -> crate::Result<()> {
    meta.setxattr(ctx, ino, name, &acl.to_xattr(), XattrFlags::default())
        .await
}

async fn get(meta: &Meta, ino: Ino, name: &[u8]) -> crate::Result<Acl> {
    let bytes = meta.getxattr(&Ctx::root(), ino, name, 0).await?;
    Ok(Acl::from_xattr(&bytes).unwrap().unwrap())
}

/// How many list records the volume holds.
async fn records(meta: &Meta) -> usize {
    let mut tx = Txn::begin(meta.engine().as_ref()).await.unwrap();
    let start = keys::acl(0);
    tx.scan(&start, &prefix_end(b"R"), usize::MAX, false)
        .await
        .unwrap()
        .len()
}

pub async fn access_lists_grant_and_chmod_moves_the_mask<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(ALICE, STAFF, &[]);
    let bob = user(BOB, 101, &[]);
    let carol = user(CAROL, 102, &[]);
    let engineer = user(1003, 103, &[ENG]);
    let f = meta
        .mknod(&alice, Ino::ROOT, b"f", FileType::Regular, 0o600, 0)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, XATTR_ACCESS, 0).await),
        Errno::ENODATA
    );
    assert_eq!(
        errno_of(meta.access(&bob, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    // Only the owner (or root) sets a list.
    assert_eq!(
        errno_of(set(&meta, &bob, f.ino, XATTR_ACCESS, &shared_list()).await),
        Errno::EPERM
    );
    set(&meta, &alice, f.ino, XATTR_ACCESS, &shared_list())
        .await
        .unwrap();
    let attr = meta.getattr(f.ino).await.unwrap();
    assert_eq!(attr.mode, 0o670, "the mode's group bits are the mask");
    assert_eq!(
        get(&meta, f.ino, XATTR_ACCESS).await.unwrap(),
        shared_list()
    );
    meta.access(&bob, f.ino, MAY_READ | MAY_WRITE)
        .await
        .unwrap();
    meta.access(&engineer, f.ino, MAY_READ | MAY_EXEC)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.access(&engineer, f.ino, MAY_WRITE).await),
        Errno::EACCES
    );
    assert_eq!(
        errno_of(meta.access(&carol, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    meta.open_file(&bob, f.ino, libc_flags::O_RDWR)
        .await
        .unwrap();
    let listed = meta.listxattr(&alice, f.ino, 0).await.unwrap();
    assert_eq!(listed, [XATTR_ACCESS, b"\0"].concat());

    // chmod g-w sets the mask: bob keeps read, loses write.
    let chmod = |mode| SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    };
    meta.setattr(&alice, f.ino, &chmod(0o640)).await.unwrap();
    let after = get(&meta, f.ino, XATTR_ACCESS).await.unwrap();
    assert_eq!((after.mask, after.users.clone()), (Some(4), vec![(BOB, 6)]));
    meta.access(&bob, f.ino, MAY_READ).await.unwrap();
    assert_eq!(
        errno_of(meta.access(&bob, f.ino, MAY_WRITE).await),
        Errno::EACCES
    );
    assert_eq!(
        errno_of(meta.open_file(&bob, f.ino, libc_flags::O_RDWR).await),
        Errno::EACCES
    );

    // A list that says no more than a mode is kept as the mode alone.
    set(&meta, &alice, f.ino, XATTR_ACCESS, &Acl::from_mode(0o751))
        .await
        .unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().mode, 0o751);
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, XATTR_ACCESS, 0).await),
        Errno::ENODATA
    );
    assert!(meta.listxattr(&alice, f.ino, 0).await.unwrap().is_empty());

    // Removing a list keeps the mode; removing none is no error.
    set(&meta, &alice, f.ino, XATTR_ACCESS, &shared_list())
        .await
        .unwrap();
    meta.removexattr(&alice, f.ino, XATTR_ACCESS).await.unwrap();
    meta.removexattr(&alice, f.ino, XATTR_ACCESS).await.unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().mode, 0o670);
    assert_eq!(
        errno_of(meta.access(&bob, f.ino, MAY_READ).await),
        Errno::EACCES
    );
}

pub async fn lists_are_checked_where_linux_checks_them<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(ALICE, STAFF, &[]);
    let bob = user(BOB, 101, &[]);
    let d = meta.mkdir(&alice, Ino::ROOT, b"d", 0o700).await.unwrap();
    assert_eq!(
        errno_of(meta.lookup(&bob, d.ino, b"x").await),
        Errno::EACCES
    );
    let mut list = Acl::from_mode(0o700);
    list.users.push((BOB, 3));
    list.mask = Some(7);
    set(&meta, &alice, d.ino, XATTR_ACCESS, &list)
        .await
        .unwrap();
    // Search and write through the named entry: bob creates in alice's 0700 directory.
    assert_eq!(
        errno_of(meta.lookup(&bob, d.ino, b"x").await),
        Errno::ENOENT
    );
    let x = meta
        .mknod(&bob, d.ino, b"x", FileType::Regular, 0o644, 0)
        .await
        .unwrap();
    meta.unlink(&bob, d.ino, b"x").await.unwrap();
    assert_eq!(x.attr.uid, BOB);
    // A named entry for a group member decides before the group, and a matching group
    // that grants too little denies even when other would grant.
    let f = meta
        .mknod(&alice, Ino::ROOT, b"g", FileType::Regular, 0o644, 0)
        .await
        .unwrap();
    let strict = Acl {
        owner: 6,
        group: 0,
        mask: Some(7),
        other: 4,
        users: Vec::new(),
        groups: vec![(ENG, 0)],
    };
    set(&meta, &alice, f.ino, XATTR_ACCESS, &strict)
        .await
        .unwrap();
    let engineer = user(1003, 103, &[ENG]);
    assert_eq!(
        errno_of(meta.access(&engineer, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    meta.access(&user(1004, 104, &[]), f.ino, MAY_READ)
        .await
        .unwrap();
    // Linux consults the list only while the mask is not empty: with `chmod g=` the mode
    // decides, and the named group gets what other gets; a mode granting everyone read
    // does not bypass the list.
    let chmod = |mode| SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    };
    meta.setattr(&alice, f.ino, &chmod(0o604)).await.unwrap();
    meta.access(&engineer, f.ino, MAY_READ).await.unwrap();
    meta.setattr(&alice, f.ino, &chmod(0o644)).await.unwrap();
    assert_eq!(
        errno_of(meta.access(&engineer, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    meta.setattr(&alice, f.ino, &chmod(0o674)).await.unwrap();
    assert_eq!(
        errno_of(meta.access(&engineer, f.ino, MAY_READ).await),
        Errno::EACCES
    );
    // No lists on symlinks; default lists on directories only (removing one is fine).
    let l = meta.symlink(&alice, Ino::ROOT, b"l", b"g").await.unwrap();
    assert_eq!(
        errno_of(set(&meta, &alice, l.ino, XATTR_ACCESS, &strict).await),
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        errno_of(set(&meta, &alice, f.ino, XATTR_DEFAULT, &strict).await),
        Errno::EACCES
    );
    meta.removexattr(&alice, f.ino, XATTR_DEFAULT)
        .await
        .unwrap();
    // Malformed lists are EINVAL; another version is EOPNOTSUPP.
    let mut bad = strict.to_xattr();
    bad.truncate(bad.len() - 8);
    assert_eq!(
        errno_of(
            meta.setxattr(&alice, f.ino, XATTR_ACCESS, &bad, XattrFlags::default())
                .await
        ),
        Errno::EINVAL
    );
    bad[0] = 9;
    assert_eq!(
        errno_of(
            meta.setxattr(&alice, f.ino, XATTR_ACCESS, &bad, XattrFlags::default())
                .await
        ),
        Errno::EOPNOTSUPP
    );
    // Setting a list drops set-group-ID when the caller is not in the group.
    meta.setattr(
        &Ctx::root(),
        f.ino,
        &SetAttr {
            mode: Some(0o2644),
            gid: Some(555),
            ..SetAttr::default()
        },
    )
    .await
    .unwrap();
    set(&meta, &alice, f.ino, XATTR_ACCESS, &strict)
        .await
        .unwrap();
    assert_eq!(meta.getattr(f.ino).await.unwrap().mode, 0o674);
}

pub async fn new_entries_inherit_the_default_list<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(ALICE, STAFF, &[]);
    let bob = user(BOB, 101, &[]);
    let plain = meta
        .mkdir(&alice, Ino::ROOT, b"plain", 0o777)
        .await
        .unwrap();
    assert_eq!(
        plain.attr.mode, 0o755,
        "without a default list the umask applies"
    );
    let d = meta
        .mkdir(&alice, Ino::ROOT, b"shared", 0o777)
        .await
        .unwrap();
    let default = Acl {
        owner: 7,
        group: 5,
        mask: Some(7),
        other: 0,
        users: vec![(BOB, 7)],
        groups: Vec::new(),
    };
    set(&meta, &alice, d.ino, XATTR_DEFAULT, &default)
        .await
        .unwrap();
    assert_eq!(get(&meta, d.ino, XATTR_DEFAULT).await.unwrap(), default);
    assert_eq!(
        errno_of(meta.getxattr(&alice, d.ino, XATTR_ACCESS, 0).await),
        Errno::ENODATA
    );
    // A file: the umask is ignored, the list cut down to the mode asked for.
    let f = meta
        .mknod(&alice, d.ino, b"f", FileType::Regular, 0o666, 0)
        .await
        .unwrap();
    assert_eq!(f.attr.mode, 0o660);
    let access = get(&meta, f.ino, XATTR_ACCESS).await.unwrap();
    assert_eq!((access.owner, access.mask, access.other), (6, Some(6), 0));
    assert_eq!(access.users, vec![(BOB, 7)]);
    meta.access(&bob, f.ino, MAY_READ | MAY_WRITE)
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.getxattr(&alice, f.ino, XATTR_DEFAULT, 0).await),
        Errno::ENODATA
    );
    // A directory gets the default list as its own default too, and passes it on.
    let sub = meta.mkdir(&alice, d.ino, b"sub", 0o777).await.unwrap();
    assert_eq!(sub.attr.mode, 0o770);
    assert_eq!(get(&meta, sub.ino, XATTR_DEFAULT).await.unwrap(), default);
    let deep = meta.mkdir(&bob, sub.ino, b"deep", 0o755).await.unwrap();
    assert_eq!(deep.attr.mode, 0o750);
    assert_eq!(get(&meta, deep.ino, XATTR_DEFAULT).await.unwrap(), default);
    // Symlinks and files made with O_TMPFILE.
    let l = meta.symlink(&alice, d.ino, b"l", b"f").await.unwrap();
    assert_eq!(l.attr.mode, 0o777);
    let t = meta.tmpfile(&alice, d.ino, 0o640).await.unwrap();
    assert_eq!(t.attr.mode, 0o640);
    assert_eq!(
        get(&meta, t.ino, XATTR_ACCESS).await.unwrap().users,
        vec![(BOB, 7)]
    );
    // A default list with nothing named still decides the mode, umask aside.
    let minimal = meta
        .mkdir(&alice, Ino::ROOT, b"minimal", 0o777)
        .await
        .unwrap();
    set(
        &meta,
        &alice,
        minimal.ino,
        XATTR_DEFAULT,
        &Acl::from_mode(0o777),
    )
    .await
    .unwrap();
    let m = meta
        .mknod(&alice, minimal.ino, b"m", FileType::Regular, 0o666, 0)
        .await
        .unwrap();
    assert_eq!(m.attr.mode, 0o666);
    assert_eq!(
        errno_of(meta.getxattr(&alice, m.ino, XATTR_ACCESS, 0).await),
        Errno::ENODATA
    );
}

pub async fn identical_lists_share_one_record<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(ALICE, STAFF, &[]);
    assert_eq!(records(&meta).await, 0);
    let mut files = Vec::new();
    for (i, mode) in [0o600u16, 0o640, 0o755, 0o700].iter().enumerate() {
        let f = meta
            .mknod(
                &alice,
                Ino::ROOT,
                format!("f{i}").as_bytes(),
                FileType::Regular,
                0o644,
                0,
            )
            .await
            .unwrap();
        // Lists that differ only where the mode keeps them (owner, mask, other).
        let list = shared_list().with_mode(*mode);
        set(&meta, &alice, f.ino, XATTR_ACCESS, &list)
            .await
            .unwrap();
        files.push((f.ino, list));
    }
    assert_eq!(records(&meta).await, 1);
    let mut other = shared_list();
    other.users.push((CAROL, 4));
    set(&meta, &alice, files[0].0, XATTR_ACCESS, &other)
        .await
        .unwrap();
    assert_eq!(records(&meta).await, 2);
    // Another client, with nothing cached, reads the same lists and checks the same.
    let second = client(&store).await;
    for (ino, list) in &files[1..] {
        assert_eq!(get(&second, *ino, XATTR_ACCESS).await.unwrap(), *list);
    }
    let carol = user(CAROL, 102, &[]);
    second.access(&carol, files[0].0, MAY_READ).await.unwrap();
    assert_eq!(
        errno_of(second.access(&carol, files[1].0, MAY_READ).await),
        Errno::EACCES
    );
}

pub async fn lists_survive_dump_and_load<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let alice = user(ALICE, STAFF, &[]);
    let d = meta.mkdir(&alice, Ino::ROOT, b"d", 0o750).await.unwrap();
    set(&meta, &alice, d.ino, XATTR_DEFAULT, &shared_list())
        .await
        .unwrap();
    let searchable = Acl {
        owner: 7,
        ..shared_list()
    };
    set(&meta, &alice, d.ino, XATTR_ACCESS, &searchable)
        .await
        .unwrap();
    let f = meta
        .mknod(&alice, d.ino, b"f", FileType::Regular, 0o640, 0)
        .await
        .unwrap();
    meta.setxattr(&alice, f.ino, b"user.k", b"v", XattrFlags::default())
        .await
        .unwrap();
    let dump = dump_of(&meta, &Default::default()).await;
    let (_target, loaded) = load_fresh::<S>(&dump).await;
    assert_eq!(dump_of(&loaded, &Default::default()).await, dump);
    for (ino, name) in [
        (d.ino, XATTR_DEFAULT),
        (d.ino, XATTR_ACCESS),
        (f.ino, XATTR_ACCESS),
    ] {
        assert_eq!(
            get(&loaded, ino, name).await.unwrap(),
            get(&meta, ino, name).await.unwrap()
        );
    }
    assert_eq!(records(&loaded).await, records(&meta).await);
    let bob = user(BOB, 101, &[]);
    // Inherited with mode 0640: the mask is r--, so bob's rw- entry gives read only.
    loaded.access(&bob, f.ino, MAY_READ).await.unwrap();
    assert_eq!(
        errno_of(loaded.access(&bob, f.ino, MAY_WRITE).await),
        Errno::EACCES
    );
    assert_eq!(
        loaded.getxattr(&alice, f.ino, b"user.k", 0).await.unwrap(),
        b"v"
    );
    assert!(loaded.current_format().unwrap().enable_acl);

    // A binary dump carries the lists' records as they are.
    let mut binary = Vec::new();
    let opts = crate::meta::BinaryDumpOptions {
        threads: 2,
        keep_secret_key: false,
        one_moment: true,
    };
    meta.dump_binary(&mut binary, &opts, &mut |_| {})
        .await
        .unwrap();
    let target = S::create();
    let from_binary = Meta::new(target.client(), super::test_options());
    from_binary
        .load_binary(&mut std::io::Cursor::new(&binary), 2, &mut |_| {})
        .await
        .unwrap();
    from_binary.load().await.unwrap();
    assert_eq!(dump_of(&from_binary, &Default::default()).await, dump);
    assert_eq!(records(&from_binary).await, records(&meta).await);
}

/// A deleted file keeps its list in the trash and brings it back when restored.
pub async fn lists_survive_the_trash<S: TestStore>() {
    let store = S::create();
    let meta = volume_with(&store, test_format(1)).await;
    let alice = user(ALICE, STAFF, &[]);
    let bob = user(BOB, 101, &[]);
    let d = meta.mkdir(&alice, Ino::ROOT, b"d", 0o777).await.unwrap();
    let f = meta
        .mknod(&alice, d.ino, b"f", FileType::Regular, 0o600, 0)
        .await
        .unwrap();
    set(&meta, &alice, f.ino, XATTR_ACCESS, &shared_list())
        .await
        .unwrap();
    let before = crate::meta::now_ns();
    meta.unlink(&alice, d.ino, b"f").await.unwrap();
    let mut trashed = Vec::new();
    meta.trash_entries(before, crate::meta::now_ns() + 1, b"", |e| trashed.push(e))
        .await
        .unwrap();
    assert_eq!(trashed.len(), 1, "{trashed:?}");
    assert_eq!(
        get(&meta, f.ino, XATTR_ACCESS).await.unwrap(),
        shared_list()
    );
    assert_eq!(
        meta.restore_entry(&trashed[0]).await.unwrap(),
        crate::meta::RestoreOutcome::Restored
    );
    let back = meta.lookup(&alice, d.ino, b"f").await.unwrap();
    assert_eq!(back.ino, f.ino);
    assert_eq!(
        get(&meta, f.ino, XATTR_ACCESS).await.unwrap(),
        shared_list()
    );
    // bob's named entry still lets him write; carol, with none, may not read.
    meta.access(&bob, f.ino, MAY_WRITE).await.unwrap();
    let carol = user(CAROL, 102, &[]);
    assert_eq!(
        errno_of(meta.access(&carol, f.ino, MAY_READ).await),
        Errno::EACCES
    );
}

pub async fn volumes_without_lists_refuse_them<S: TestStore>() {
    let store = S::create();
    let format = crate::Format {
        enable_acl: false,
        ..test_format(0)
    };
    let meta = volume_with(&store, format.clone()).await;
    let f = super::touch(&meta, Ino::ROOT, "f").await;
    let root = Ctx::root();
    assert_eq!(
        errno_of(set(&meta, &root, f.ino, XATTR_ACCESS, &shared_list()).await),
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        errno_of(meta.getxattr(&root, f.ino, XATTR_ACCESS, 0).await),
        Errno::EOPNOTSUPP
    );
    // Turning them on later works; formatting again without the flag keeps them on.
    let on = meta
        .format(&format.clone().with_acl(true), false)
        .await
        .unwrap();
    assert!(on.enable_acl && on.meta_version >= crate::format::ACL_VERSION);
    set(&meta, &root, f.ino, XATTR_ACCESS, &shared_list())
        .await
        .unwrap();
    let again = meta.format(&format, false).await.unwrap();
    assert!(again.enable_acl, "lists once on stay on");
}

/// open(2) flags used here.
mod libc_flags {
    pub const O_RDWR: u32 = 2;
}
