//! Conformance cases of the lifecycle tools' metadata side: whole-volume scans (gc),
//! namespace checks and repairs (fsck).

use strata_types::{Ino, Slice};

use super::{TestStore, mkdir, names, slice, touch, volume};
use crate::codec;
use crate::keys;
use crate::kv::{RetryPolicy, run_txn};
use crate::meta::{Ctx, Meta, RemoveOptions};

/// Overwrite one key with `value`, bypassing the file-system logic (to break things).
pub(super) async fn poke(meta: &Meta, key: Vec<u8>, value: Vec<u8>) {
    run_txn(meta.engine().as_ref(), &RetryPolicy::default(), |tx| {
        let (key, value) = (key.clone(), value.clone());
        Box::pin(async move {
            tx.put(key, value);
            Ok::<_, crate::MetaError>(())
        })
    })
    .await
    .unwrap();
}

pub async fn scans_see_every_chunk_and_queued_slice<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let mut expected = Vec::new();
    let mut f5_slice = 0;
    for i in 0..30u64 {
        let f = touch(&meta, Ino::ROOT, &format!("f{i}")).await;
        let id = meta.new_slice_id().await.unwrap();
        meta.write_chunk(f.ino, (i % 3) as u32, slice(id, 100), Some(1))
            .await
            .unwrap();
        expected.push((f.ino, (i % 3) as u32, id));
        if i == 5 {
            f5_slice = id;
        }
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = meta.chunk_page(&cursor, 7).await.unwrap();
        seen.extend(page.iter().map(|c| (c.ino, c.index, c.slices[0].id)));
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    expected.sort();
    assert_eq!(seen, expected, "every chunk once, in key order");

    let epoch = meta.share_epoch().await.unwrap();
    let (src, dst) = (expected[0].0, expected[1].0);
    meta.copy_file_range(src, 0, dst, 0, 100, 0).await.unwrap();
    assert!(
        meta.share_epoch().await.unwrap() > epoch,
        "sharing a slice moves the share epoch"
    );

    meta.unlink(&Ctx::root(), Ino::ROOT, b"f5").await.unwrap();
    while let Some(ino) = meta
        .pending_file_deletions(10)
        .await
        .unwrap()
        .first()
        .copied()
    {
        while !meta.free_file_chunks(ino).await.unwrap() {}
    }
    let (queued, next) = meta.queued_slice_page(&None, 100).await.unwrap();
    assert_eq!(
        queued,
        vec![(f5_slice, 100)],
        "the deleted file's slice is queued"
    );
    assert!(next.is_none());
}

/// Every inode the walk reaches, once (names, hard links, the trash, files kept open by
/// a session), and every inode record the scan finds: on a sound volume the same set.
pub async fn namespace_walk_reaches_every_inode_record<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    meta.new_session(crate::SessionInfo::default())
        .await
        .unwrap();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let f = touch(&meta, d.ino, "f").await;
    let open = touch(&meta, d.ino, "open").await;
    meta.open(&Ctx::root(), open.ino, 0).await.unwrap();
    meta.unlink(&Ctx::root(), d.ino, b"open").await.unwrap();
    meta.link(&Ctx::root(), f.ino, Ino::ROOT, b"f-link")
        .await
        .unwrap();
    let trashed = touch(&meta, d.ino, "trashed").await;
    meta.unlink(&Ctx::root(), d.ino, b"trashed").await.unwrap();
    let tmp = meta.tmpfile(&Ctx::root(), d.ino, 0o600).await.unwrap();

    let mut reached = Vec::new();
    meta.check_namespace_with(false, |_| {}, |ino| reached.push(ino))
        .await
        .unwrap();
    let count = reached.len();
    reached.sort();
    reached.dedup();
    assert_eq!(reached.len(), count, "each inode reached once: {reached:?}");
    for ino in [Ino::ROOT, d.ino, f.ino, open.ino, trashed.ino, tmp.ino] {
        assert!(reached.contains(&ino), "{ino} reached: {reached:?}");
    }
    let mut records = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = meta.record_page(&cursor, 3).await.unwrap();
        records.extend(page.inodes);
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    let mut sorted = records.clone();
    sorted.sort();
    assert_eq!(records, sorted, "records come in inode order");
    assert_eq!(records, reached, "every record is reached, and only those");
    for ino in [f.ino, open.ino, trashed.ino, tmp.ino] {
        assert!(records.contains(&ino), "{ino} has a record: {records:?}");
    }
    let named = meta
        .named_among(&[f.ino, open.ino, tmp.ino, d.ino, Ino(999_999)])
        .await
        .unwrap();
    // With the trash on, the open file went to the trash (a name there); the O_TMPFILE
    // file is kept by the session alone.
    let expected: std::collections::HashSet<Ino> = [f.ino, open.ino, d.ino].into();
    assert_eq!(
        named, expected,
        "names: hard link, trash, directory; none for the rest"
    );
    meta.close_session().await.unwrap();
}

pub async fn namespace_check_finds_and_repairs_counters<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    mkdir(&meta, d.ino, "sub").await;
    let f = touch(&meta, d.ino, "f").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(f.ino, 0, slice(id, 5000), Some(1))
        .await
        .unwrap();
    let g = touch(&meta, d.ino, "g").await;
    meta.link(&Ctx::root(), g.ino, Ino::ROOT, b"g-link")
        .await
        .unwrap();

    meta.flush_usage().await.unwrap();
    let clean = meta.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(clean.problems, vec![], "a fresh volume is clean");
    assert_eq!(clean.files, 3, "f, g and g-link");
    assert_eq!(
        clean.volume_recorded, clean.volume_counted,
        "volume counters"
    );
    assert_eq!(
        clean.volume_counted,
        (4096 + 4096 + 8192, 4),
        "d, sub, f (5000 B), g once"
    );
    poke(&meta, keys::counter("usedSpace"), codec::encode_slots(&[7])).await;
    let drifted = meta.check_namespace(true, |_| {}).await.unwrap();
    assert_eq!(drifted.volume_recorded.0, 7);
    assert!(drifted.volume_repaired);
    let fixed = meta.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(fixed.volume_recorded, fixed.volume_counted);

    poke(&meta, keys::dir_usage(d.ino), codec::encode_slots(&[1, 99])).await;
    let length = meta.getattr(f.ino).await.unwrap().length;
    let mut record = codec::InodeFields {
        atime: 1,
        mtime: 1,
        ctime: 1,
        nlink: 3,
        length,
    };
    poke(&meta, keys::inode_fields(f.ino), record.encode()).await;
    record.nlink = 7;
    record.length = 4096;
    poke(&meta, keys::inode_fields(d.ino), record.encode()).await;

    let found = meta.check_namespace(false, |_| {}).await.unwrap();
    let about = |ino: Ino| found.problems.iter().filter(|p| p.ino == ino).count();
    assert_eq!(
        about(d.ino),
        2,
        "usage and link count of d: {:?}",
        found.problems
    );
    assert_eq!(about(f.ino), 1, "link count of f: {:?}", found.problems);
    assert!(found.problems.iter().all(|p| !p.repaired));

    let repaired = meta.check_namespace(true, |_| {}).await.unwrap();
    assert_eq!(repaired.problems.len(), 3);
    assert!(repaired.problems.iter().all(|p| p.repaired));
    let after = meta.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(after.problems, vec![], "repairs hold");
    assert_eq!(meta.getattr(d.ino).await.unwrap().nlink, 3);
    assert_eq!(
        meta.dir_usage(d.ino).await.unwrap(),
        (4096 + 8192, 3),
        "sub, f (5000 B), g (empty)"
    );

    assert_eq!(meta.path_of(f.ino).await.unwrap().as_deref(), Some("/d/f"));
    assert!(meta.path_of(g.ino).await.unwrap().is_some());
}

pub async fn trash_restore_and_purge<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let keep = touch(&meta, d.ino, "model.bin").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(keep.ino, 0, slice(id, 777), Some(1))
        .await
        .unwrap();
    touch(&meta, d.ino, "notes.txt").await;
    touch(&meta, Ino::ROOT, "taken.txt").await;
    let before = strata_types::Nanos::from(crate::meta::now_ns());
    meta.unlink(&root, d.ino, b"model.bin").await.unwrap();
    meta.unlink(&root, d.ino, b"notes.txt").await.unwrap();
    meta.unlink(&root, Ino::ROOT, b"taken.txt").await.unwrap();
    touch(&meta, Ino::ROOT, "taken.txt").await; // a new file took the name
    let after = crate::meta::now_ns() + 1;

    let mut listed = Vec::new();
    meta.trash_entries(before, after, b"", |e| listed.push(e))
        .await
        .unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    let mut none = Vec::new();
    meta.trash_entries(0, before, b"", |e| none.push(e))
        .await
        .unwrap();
    assert!(none.is_empty(), "nothing deleted before the window");

    let mut models = Vec::new();
    meta.trash_entries(before, after, b"model", |e| models.push(e))
        .await
        .unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].name, b"model.bin");
    assert_eq!(models[0].parent, d.ino);
    assert_eq!(
        meta.restore_entry(&models[0]).await.unwrap(),
        crate::meta::RestoreOutcome::Restored
    );
    let back = meta.lookup(&root, d.ino, b"model.bin").await.unwrap();
    assert_eq!(back.ino, keep.ino, "the same inode, data not copied");
    assert_eq!(meta.read_chunk(keep.ino, 0).await.unwrap()[0].id, id);
    assert_eq!(back.attr.parent, d.ino);

    let taken: Vec<_> = listed.iter().filter(|e| e.name == b"taken.txt").collect();
    assert_eq!(
        meta.restore_entry(taken[0]).await.unwrap(),
        crate::meta::RestoreOutcome::NameTaken,
        "an existing name is never overwritten"
    );
    let clean = meta.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(clean.problems, vec![], "restores keep the counters right");

    assert_eq!(
        meta.purge_trash(crate::meta::now_ns()).await.unwrap(),
        0,
        "nothing expired"
    );
    let later = crate::meta::now_ns() + 26 * 3_600_000_000_000;
    let purged = meta.purge_trash(later).await.unwrap();
    assert_eq!(purged, 3, "two entries and their hour directory");
    assert!(meta.trash_hours().await.unwrap().is_empty());
    let clean = meta.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(clean.problems, vec![]);
}

pub async fn remove_tree_goes_through_the_trash<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    let root = Ctx::root();
    let top = mkdir(&meta, Ino::ROOT, "top").await;
    for i in 0..5 {
        let sub = mkdir(&meta, top.ino, &format!("sub{i}")).await;
        for j in 0..7 {
            touch(&meta, sub.ino, &format!("f{j}")).await;
        }
    }
    let mut seen = 0;
    let removed = meta
        .remove_tree(&root, (Ino::ROOT, b"top"), RemoveOptions::RMR, &mut |n| {
            seen += n;
            true
        })
        .await
        .unwrap();
    assert_eq!(removed, 1 + 5 + 35);
    assert_eq!(seen, removed);
    assert_eq!(super::names(&meta, Ino::ROOT).await, Vec::<String>::new());
    let mut in_trash = 0;
    meta.trash_entries(0, i64::MAX, b"", |_| in_trash += 1)
        .await
        .unwrap();
    assert_eq!(in_trash, removed, "every entry went to the trash");
    assert_eq!(
        meta.check_namespace(false, |_| {}).await.unwrap().problems,
        vec![]
    );
}

/// A volume with one of everything a dump must carry.
pub(super) async fn rich_volume(meta: &Meta) -> Vec<Ino> {
    let root = Ctx::root();
    let d = mkdir(meta, Ino::ROOT, "data").await;
    let sub = mkdir(meta, d.ino, "sub").await;
    let f = touch(meta, sub.ino, "weights.bin").await;
    for index in 0..2u32 {
        let id = meta.new_slice_id().await.unwrap();
        meta.write_chunk(f.ino, index, slice(id, 3000 + index), Some(5))
            .await
            .unwrap();
    }
    let g = touch(meta, d.ino, "g").await;
    meta.copy_file_range(f.ino, 0, g.ino, 0, 2000, 0)
        .await
        .unwrap();
    meta.link(&root, g.ino, Ino::ROOT, b"g-link").await.unwrap();
    meta.link(&root, g.ino, sub.ino, b"g-link2").await.unwrap();
    meta.symlink(&root, d.ino, b"ln", b"sub/weights.bin")
        .await
        .unwrap();
    meta.setxattr(
        &root,
        f.ino,
        b"user.tag",
        &[0xff, 0, 1],
        crate::meta::XattrFlags::default(),
    )
    .await
    .unwrap();
    touch(meta, Ino::ROOT, "caf\u{e9}-\u{1F600}").await;
    meta.mknod(
        &root,
        d.ino,
        &[b'x', 0xfe, b'y'],
        strata_types::FileType::Regular,
        0o600,
        0,
    )
    .await
    .unwrap();
    let gone = touch(meta, Ino::ROOT, "deleted.txt").await;
    meta.unlink(&root, Ino::ROOT, b"deleted.txt").await.unwrap();
    meta.flush_usage().await.unwrap();
    vec![d.ino, sub.ino, f.ino, g.ino, gone.ino]
}

pub(super) async fn dump_of(meta: &Meta, opts: &crate::meta::DumpOptions) -> Vec<u8> {
    let mut out = Vec::new();
    meta.dump(&mut out, opts, &mut |_| {}).await.unwrap();
    out
}

/// A new store with `dump` loaded into it, and a client of the loaded volume.
pub(super) async fn load_fresh<S: TestStore>(dump: &[u8]) -> (S, Meta) {
    let target = S::create();
    let loaded = Meta::new(target.client(), super::test_options());
    loaded
        .load_dump(&mut std::io::Cursor::new(dump), &mut |_| {})
        .await
        .unwrap();
    loaded.load().await.unwrap();
    (target, loaded)
}

pub async fn dump_and_load_round_trip<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    rich_volume(&meta).await;
    let dump = dump_of(&meta, &Default::default()).await;
    let text = String::from_utf8(dump.clone()).unwrap();
    assert!(text.starts_with("{\"k\":\"header\""), "{text}");
    assert!(text.trim_end().ends_with('}') && text.contains("\"k\":\"end\""));
    assert!(
        text.contains("\"hex\":\"78fe79\""),
        "non-UTF-8 names as hex"
    );

    let (_target, loaded) = load_fresh::<S>(&dump).await;
    let nodes = text
        .lines()
        .filter(|l| l.contains("\"k\":\"node\""))
        .count();
    assert!(nodes >= 10, "{nodes} nodes");
    assert_eq!(
        String::from_utf8(dump_of(&loaded, &Default::default()).await).unwrap(),
        text,
        "a loaded volume dumps to the same bytes"
    );
    assert_eq!(loaded.statfs().await.unwrap(), meta.statfs().await.unwrap());
    let check = loaded.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(check.problems, vec![]);
    let again = loaded
        .load_dump(&mut std::io::Cursor::new(&dump), &mut |_| {})
        .await;
    assert!(again.is_err(), "a non-empty engine is refused");

    let cut = &dump[..dump.len() - 30];
    let empty = S::create();
    let partial = Meta::new(empty.client(), super::test_options());
    let err = partial
        .load_dump(&mut std::io::Cursor::new(cut), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("dump line") || err.to_string().contains("cut off"),
        "{err}"
    );
}

pub async fn dump_of_a_subdir_becomes_a_volume<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let inos = rich_volume(&meta).await;
    let opts = crate::meta::DumpOptions {
        subdir: Some(inos[0]),
        subdir_path: Some("/data".into()),
        keep_secret_key: false,
    };
    let dump = dump_of(&meta, &opts).await;
    let (_target, loaded) = load_fresh::<S>(&dump).await;
    let mut top = super::names(&loaded, Ino::ROOT).await;
    top.sort();
    assert_eq!(top, ["g", "ln", "sub", "x\u{fffd}y"]);
    let f = loaded
        .lookup(&Ctx::root(), inos[1], b"weights.bin")
        .await
        .unwrap();
    assert_eq!(f.ino, inos[2]);
    assert_eq!(loaded.read_chunk(f.ino, 1).await.unwrap().len(), 1);
    let g = loaded.lookup(&Ctx::root(), Ino::ROOT, b"g").await.unwrap();
    assert_eq!(g.attr.nlink, 2, "links outside the subdir are not carried");
    let check = loaded.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(check.problems, vec![]);
}

pub async fn quotas_limit_and_count<S: TestStore>() {
    use crate::meta::QuotaTarget;
    let store = S::create();
    let meta = volume(&store).await;
    let root = Ctx::root();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let sub = mkdir(&meta, d.ino, "sub").await;
    let outside = mkdir(&meta, Ino::ROOT, "outside").await;
    touch(&meta, sub.ino, "before").await;
    let q = meta
        .set_quota(QuotaTarget::Dir(d.ino), Some(3 * 4096), Some(4))
        .await
        .unwrap();
    assert_eq!(
        (q.used_space, q.used_inodes),
        (4096, 2),
        "sub and before, counted at set"
    );

    let f = touch(&meta, sub.ino, "f").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(f.ino, 0, slice(id, 8000), Some(1))
        .await
        .unwrap();
    let id = meta.new_slice_id().await.unwrap();
    let over = meta
        .write_chunk(
            f.ino,
            0,
            Slice {
                pos: 8000,
                ..slice(id, 5000)
            },
            Some(1),
        )
        .await;
    assert_eq!(
        super::errno_of(over),
        strata_types::Errno::EDQUOT,
        "bytes limit"
    );
    touch(&meta, d.ino, "g").await;
    let too_many = meta
        .mknod(
            &root,
            sub.ino,
            b"h",
            strata_types::FileType::Regular,
            0o644,
            0,
        )
        .await;
    assert_eq!(
        super::errno_of(too_many),
        strata_types::Errno::EDQUOT,
        "inode limit"
    );
    touch(&meta, outside.ino, "free").await;

    // Moving a directory between quota trees is refused; a file must fit.
    let moved = meta
        .rename(
            &root,
            d.ino,
            b"sub",
            outside.ino,
            b"sub",
            Default::default(),
        )
        .await;
    assert_eq!(super::errno_of(moved), strata_types::Errno::EXDEV);
    let into = meta
        .rename(
            &root,
            outside.ino,
            b"free",
            d.ino,
            b"free",
            Default::default(),
        )
        .await;
    assert_eq!(super::errno_of(into), strata_types::Errno::EDQUOT);
    meta.rename(&root, d.ino, b"g", outside.ino, b"g", Default::default())
        .await
        .unwrap();
    let checked = meta.check_quotas(false).await.unwrap();
    let (_, recorded, counted) = checked[0];
    assert_eq!(
        (recorded.used_space, recorded.used_inodes),
        counted,
        "{checked:?}"
    );
    assert_eq!(counted, (4096 + 8192, 3));

    // User quotas count what a user owns anywhere.
    meta.setattr(
        &root,
        outside.ino,
        &crate::meta::SetAttr {
            mode: Some(0o777),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    meta.set_quota(QuotaTarget::User(1000), None, Some(2))
        .await
        .unwrap();
    let user = Ctx::user(1000, 1000);
    for name in ["u1", "u2"] {
        meta.mknod(
            &user,
            outside.ino,
            name.as_bytes(),
            strata_types::FileType::Regular,
            0o644,
            0,
        )
        .await
        .unwrap();
    }
    let third = meta
        .mknod(
            &user,
            outside.ino,
            b"u3",
            strata_types::FileType::Regular,
            0o644,
            0,
        )
        .await;
    assert_eq!(super::errno_of(third), strata_types::Errno::EDQUOT);
    meta.unlink(&user, outside.ino, b"u1").await.unwrap();
    meta.flush_usage().await.unwrap();
    let q = meta
        .get_quota(QuotaTarget::User(1000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.used_inodes, 1);
    for (target, recorded, counted) in meta.check_quotas(false).await.unwrap() {
        assert_eq!(
            (recorded.used_space, recorded.used_inodes),
            counted,
            "{target:?}"
        );
    }
    assert!(meta.delete_quota(QuotaTarget::User(1000)).await.unwrap());
    meta.mknod(
        &user,
        outside.ino,
        b"u3",
        strata_types::FileType::Regular,
        0o644,
        0,
    )
    .await
    .unwrap();
}

pub async fn subdir_dumps_never_undercount_shared_slices<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let a = touch(&meta, d.ino, "a").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(a.ino, 0, slice(id, 1000), Some(1))
        .await
        .unwrap();
    let b = touch(&meta, d.ino, "b").await;
    meta.copy_file_range(a.ino, 0, b.ino, 0, 1000, 0)
        .await
        .unwrap();
    let opts = crate::meta::DumpOptions {
        subdir: Some(d.ino),
        subdir_path: Some("/d".into()),
        keep_secret_key: false,
    };
    let dump = dump_of(&meta, &opts).await;
    let (_target, loaded) = load_fresh::<S>(&dump).await;
    loaded.unlink(&Ctx::root(), Ino::ROOT, b"a").await.unwrap();
    while let Some(ino) = loaded
        .pending_file_deletions(10)
        .await
        .unwrap()
        .first()
        .copied()
    {
        while !loaded.free_file_chunks(ino).await.unwrap() {}
    }
    let (queued, _) = loaded.queued_slice_page(&None, 10).await.unwrap();
    assert!(queued.is_empty(), "b still uses the slice: {queued:?}");
}

/// A generated namespace (`bench populate`) loads into an empty engine as a volume the
/// namespace check finds whole: every file where the layout puts it, usage and link counts
/// right, the volume's counters matching.
pub async fn populated_volumes_check_clean<S: TestStore>() {
    use crate::meta::{PopulateShape, PopulateSpec, Population};
    let spec = PopulateSpec {
        files: 250,
        shape: PopulateShape::Deep { depth: 3 },
        per_dir: 10,
        size_min: 1,
        size_max: 1 << 20,
        seed: 7,
    };
    let layout = spec.layout().unwrap();
    let store = S::create();
    let meta = Meta::new(store.client(), super::test_options());
    let lines = Population::new(spec, &super::test_format(1), 1_700_000_000_000_000_000).unwrap();
    let stats = meta.load_lines(lines, &mut |_| {}).await.unwrap();
    meta.load().await.unwrap();
    assert_eq!(stats.entries, 250 + layout.dirs);
    let report = meta.check_namespace(false, |_| {}).await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.files, 250);
    assert_eq!(
        report.directories,
        layout.dirs + 2,
        "with the root and the trash"
    );
    assert_eq!(report.volume_recorded, report.volume_counted);
    assert_eq!(names(&meta, Ino::ROOT).await, ["deep"]);
    // Leaf 24 of 25 (the last) is d2/d2/d0 under a fanout of 3: files 240..249.
    let mut dir = meta
        .lookup(&Ctx::root(), Ino::ROOT, b"deep")
        .await
        .unwrap()
        .ino;
    for name in ["d2", "d2", "d0"] {
        dir = meta
            .lookup(&Ctx::root(), dir, name.as_bytes())
            .await
            .unwrap()
            .ino;
    }
    let leaf = names(&meta, dir).await;
    assert_eq!(leaf.first().map(String::as_str), Some("f240"));
    assert_eq!(leaf.len(), 10);
    let file = meta.lookup(&Ctx::root(), dir, b"f245").await.unwrap();
    assert!(
        (1..=1 << 20).contains(&file.attr.length),
        "{}",
        file.attr.length
    );
    // The next inode a client makes is past the generated ones.
    let new = touch(&meta, Ino::ROOT, "after").await;
    assert!(new.ino.0 > 250 + layout.dirs, "{:?}", new.ino);
}
