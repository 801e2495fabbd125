//! Conformance cases of binary dumps (dump v2): a volume dumped with any number of scans
//! loads into an empty engine as the same volume (its JSON dump is byte for byte the
//! original's), sessions and what only they keep alive are left out, and a damaged,
//! cut-off or foreign file is refused with nothing half loaded.

use strata_types::{Errno, Ino, Secret};

use super::lifecycle::{dump_of, load_fresh, rich_volume};
use super::{TestStore, errno_of, touch};
use crate::meta::{BinaryDumpOptions, Ctx, Meta, QuotaTarget, SessionInfo, binary_dump_summary};

async fn binary_of(meta: &Meta, threads: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let opts = BinaryDumpOptions {
        threads,
        keep_secret_key: false,
        one_moment: true,
    };
    meta.dump_binary(&mut out, &opts, &mut |_| {})
        .await
        .unwrap();
    out
}

async fn load_binary_into(meta: &Meta, dump: &[u8]) -> crate::Result<crate::DumpStats> {
    meta.load_binary(&mut std::io::Cursor::new(dump), 4, &mut |_| {})
        .await
}

pub async fn binary_dumps_round_trip<S: TestStore>() {
    let store = S::create();
    let format = crate::Format {
        access_key: Some("ak".into()),
        secret_key: Some(Secret::new("hunter2")),
        session_token: Some(Secret::new("token-7")),
        ..super::test_format(1)
    };
    let meta = super::volume_with(&store, format).await;
    let made = rich_volume(&meta).await;
    meta.set_quota(QuotaTarget::Dir(made[0]), Some(1 << 30), Some(100))
        .await
        .unwrap();
    meta.set_quota(QuotaTarget::User(1000), None, Some(5))
        .await
        .unwrap();
    meta.flush_usage().await.unwrap();
    let json = dump_of(&meta, &Default::default()).await;
    let text = String::from_utf8(json.clone()).unwrap();
    let (_reference_store, reference) = load_fresh::<S>(&json).await;

    for threads in [1, 3] {
        let dump = binary_of(&meta, threads).await;
        let summary = binary_dump_summary(&dump[..]).unwrap();
        let lines = |kind: &str| {
            let tag = format!("\"k\":\"{kind}\"");
            u64::try_from(text.lines().filter(|l| l.contains(&tag)).count()).unwrap()
        };
        assert_eq!(summary.records["inodes"], lines("node"), "{summary:?}");
        assert_eq!(summary.records["entries"], lines("entry"), "{summary:?}");
        assert_eq!(summary.meta_version, crate::META_VERSION);
        assert_eq!(
            summary.out_of_order, 0,
            "{threads} scans, frames in key order"
        );

        let target = S::create();
        let loaded = Meta::new(target.client(), super::test_options());
        let stats = load_binary_into(&loaded, &dump).await.unwrap();
        assert_eq!(stats.nodes, lines("node"));
        let format = loaded.load().await.unwrap();
        assert_eq!(format.access_key.as_deref(), Some("ak"));
        assert!(
            format.secret_key.is_none() && format.session_token.is_none(),
            "secrets are left out by default"
        );
        assert_eq!(
            String::from_utf8(dump_of(&loaded, &Default::default()).await).unwrap(),
            text,
            "{threads} scans: the loaded volume dumps to the original's JSON"
        );
        assert_eq!(
            loaded.statfs().await.unwrap(),
            reference.statfs().await.unwrap()
        );
        assert_eq!(
            loaded.list_quotas().await.unwrap(),
            meta.list_quotas().await.unwrap()
        );
        let check = loaded.check_namespace(false, |_| {}).await.unwrap();
        assert_eq!(check.problems, vec![]);
        assert!(
            load_binary_into(&loaded, &dump).await.is_err(),
            "a non-empty engine is refused"
        );
    }
}

pub async fn binary_dumps_leave_out_what_only_sessions_keep<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(0)).await;
    meta.new_session(SessionInfo {
        host: "dumper".into(),
        ..SessionInfo::default()
    })
    .await
    .unwrap();
    let kept = touch(&meta, Ino::ROOT, "kept").await;
    let open = touch(&meta, Ino::ROOT, "open-then-unlinked").await;
    meta.open(&Ctx::root(), open.ino, 0).await.unwrap();
    meta.unlink(&Ctx::root(), Ino::ROOT, b"open-then-unlinked")
        .await
        .unwrap();
    assert!(meta.getattr(open.ino).await.is_ok(), "sustained while open");
    meta.flush_usage().await.unwrap();
    let dump = binary_of(&meta, 2).await;
    let target = S::create();
    let loaded = Meta::new(target.client(), super::test_options());
    load_binary_into(&loaded, &dump).await.unwrap();
    loaded.load().await.unwrap();
    assert!(loaded.list_sessions().await.unwrap().is_empty());
    assert_eq!(errno_of(loaded.getattr(open.ino).await), Errno::ENOENT);
    assert!(loaded.getattr(kept.ino).await.is_ok());
    assert_eq!(loaded.statfs().await.unwrap().used_inodes, 1);
    let check = loaded.check_namespace(false, |_| {}).await.unwrap();
    assert_eq!(check.problems, vec![]);
}

pub async fn damaged_binary_dumps_are_refused<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    rich_volume(&meta).await;
    let dump = binary_of(&meta, 2).await;
    let json = dump_of(&meta, &Default::default()).await;
    let mut flipped = dump.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x10;
    let cases: [(&str, &[u8]); 5] = [
        ("cut before its end frame", &dump[..dump.len() - 20]),
        ("cut after a frame", &dump[..dump.len() / 3]),
        ("a flipped bit", &flipped),
        ("a JSON dump", &json),
        ("nothing", b""),
    ];
    for (what, bytes) in cases {
        let target = S::create();
        let loading = Meta::new(target.client(), super::test_options());
        let err = load_binary_into(&loading, bytes).await.unwrap_err();
        assert!(err.to_string().contains("binary dump"), "{what}: {err}");
        assert!(
            loading.load().await.is_err(),
            "{what}: no volume after a refused load"
        );
    }
}

/// What an interrupted load leaves (records, no volume) is named as such and erased on
/// request; a volume is never erased that way.
pub async fn leftovers_of_an_interrupted_load_are_erased_on_request<S: TestStore>() {
    let store = S::create();
    let meta = super::volume_with(&store, super::test_format(1)).await;
    rich_volume(&meta).await;
    meta.flush_usage().await.unwrap();
    let dump = binary_of(&meta, 2).await;
    let target = S::create();
    let loading = Meta::new(target.client(), super::test_options());
    // Records without a format record, as a load stopped half way leaves them.
    for i in 0..3u8 {
        super::lifecycle::poke(&loading, vec![b'A', 0, 0, 0, 0, 0, 0, 0, i, b'I'], vec![1]).await;
    }
    let err = load_binary_into(&loading, &dump).await.unwrap_err();
    assert!(err.to_string().contains("--force"), "{err}");
    let erased = loading.erase_leftovers().await.unwrap();
    assert!(
        erased >= 3,
        "the three records, and any the engine keeps beside them: {erased}"
    );
    load_binary_into(&loading, &dump).await.unwrap();
    loading.load().await.expect("the volume loaded");
    assert_eq!(
        dump_of(&loading, &Default::default()).await,
        dump_of(&meta, &Default::default()).await,
        "the same volume"
    );
    let err = loading.erase_leftovers().await.unwrap_err();
    assert!(err.to_string().contains("holds a volume"), "{err}");
    loading.load().await.expect("the volume is still there");
}

#[cfg(test)]
mod frozen_tests {
    //! A binary dump reads every record through the engine's frozen view: given a view
    //! taken before the volume changed, it dumps the volume as it was then.

    use std::fmt;
    use std::sync::Arc;

    use async_trait::async_trait;
    use strata_types::Ino;

    use super::super::lifecycle::{dump_of, rich_volume};
    use super::super::{MemoryStore, TestStore, mkdir, touch, volume};
    use super::{BinaryDumpOptions, binary_of, load_binary_into};
    use crate::kv::{CommitRequest, FrozenView, KvEngine, KvError, KvSnapshot};
    use crate::meta::{Ctx, Meta, RenameFlags};

    /// An engine whose frozen view is one taken earlier.
    struct ViewFromBefore {
        live: Arc<dyn KvEngine>,
        view: Arc<dyn FrozenView>,
    }

    impl fmt::Debug for ViewFromBefore {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("ViewFromBefore")
        }
    }

    #[async_trait]
    impl KvEngine for ViewFromBefore {
        fn name(&self) -> &'static str {
            "memory"
        }
        async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
            self.live.snapshot().await
        }
        async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
            self.live.commit(req).await
        }
        fn snapshot_isolation(&self) -> bool {
            self.live.snapshot_isolation()
        }
        fn native_field_ops(&self) -> bool {
            self.live.native_field_ops()
        }
        async fn frozen_view(&self, _: usize) -> Result<Option<Arc<dyn FrozenView>>, KvError> {
            Ok(Some(self.view.clone()))
        }
    }

    #[tokio::test]
    async fn dumps_read_the_frozen_moment_only() {
        let store = MemoryStore::create();
        let meta = volume(&store).await;
        let made = rich_volume(&meta).await;
        meta.flush_usage().await.unwrap();
        let then = dump_of(&meta, &Default::default()).await;
        let view = store.client().frozen_view(3).await.unwrap().unwrap();

        // New files and directories (new inode numbers and counters), a rename between
        // directories, and an unlink.
        let root = Ctx::root();
        let late = mkdir(&meta, Ino::ROOT, "late").await;
        for i in 0..40 {
            touch(&meta, late.ino, &format!("f{i}")).await;
        }
        touch(&meta, made[0], "moved").await;
        meta.rename(
            &root,
            made[0],
            b"moved",
            late.ino,
            b"here",
            RenameFlags::default(),
        )
        .await
        .unwrap();
        meta.unlink(&root, late.ino, b"f3").await.unwrap();
        meta.flush_usage().await.unwrap();
        assert_ne!(dump_of(&meta, &Default::default()).await, then);

        let frozen = Meta::new(
            Arc::new(ViewFromBefore {
                live: store.client(),
                view,
            }),
            super::super::test_options(),
        );
        frozen.load().await.unwrap();
        for threads in [1, 3] {
            let dump = binary_of(&frozen, threads).await;
            let target = MemoryStore::create();
            let loaded = Meta::new(target.client(), super::super::test_options());
            load_binary_into(&loaded, &dump).await.unwrap();
            loaded.load().await.unwrap();
            assert_eq!(
                String::from_utf8(dump_of(&loaded, &Default::default()).await).unwrap(),
                String::from_utf8(then.clone()).unwrap(),
                "{threads} scans: the volume as it was when the view was taken"
            );
        }
        // Asked for no snapshot, the dump reads the volume as it is now.
        let mut out = Vec::new();
        let opts = BinaryDumpOptions {
            threads: 3,
            keep_secret_key: false,
            one_moment: false,
        };
        frozen
            .dump_binary(&mut out, &opts, &mut |_| {})
            .await
            .unwrap();
        let target = MemoryStore::create();
        let loaded = Meta::new(target.client(), super::super::test_options());
        load_binary_into(&loaded, &out).await.unwrap();
        loaded.load().await.unwrap();
        assert_eq!(
            dump_of(&loaded, &Default::default()).await,
            dump_of(&meta, &Default::default()).await,
            "without a snapshot: the volume as it stands"
        );
    }
}
