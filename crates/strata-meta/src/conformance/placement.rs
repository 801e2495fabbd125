//! Conformance cases of placement (docs/PLACEMENT.md): placement records switch only
//! from what the switcher read, list in id order and go with their slice's deletion;
//! tier policies are kept per directory; a mover's lease excludes other movers until it
//! ends or is released; dumps (binary and JSON) carry records and policies, and a volume with
//! stores keeps them (and its version) when formatted again.

use strata_types::Ino;

use super::{TestStore, client, mkdir, slice, touch, volume, volume_with};
use crate::meta::{Ctx, Placement, TierPolicy};
use crate::{Format, StoreSpec};

fn moved(to: u8, from: u8) -> Placement {
    Placement {
        stores: vec![to],
        leaving: vec![from],
        leave_after: 42,
    }
}

pub async fn placement_records_switch_atomically_and_go_with_their_slice<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let other = client(&store).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(f.ino, 0, slice(id, 100), Some(crate::now_ns()))
        .await
        .unwrap();
    assert_eq!(meta.placements(&[id]).await.unwrap(), vec![None]);
    // Expecting "no record" holds for a slice in store 0 only.
    let first = moved(1, 0);
    assert!(
        meta.swap_placement(id, Some(None), Some(&first))
            .await
            .unwrap()
    );
    // Another client that read before the switch cannot switch it again.
    assert!(
        !other
            .swap_placement(id, Some(None), Some(&moved(2, 0)))
            .await
            .unwrap()
    );
    assert_eq!(
        other.placements(&[id]).await.unwrap(),
        vec![Some(first.clone())]
    );
    let done = Placement::only(1);
    assert!(
        other
            .swap_placement(id, Some(Some(&first)), Some(&done))
            .await
            .unwrap()
    );
    // Store 0 only is no record at all.
    let second = meta.new_slice_id().await.unwrap() + 1000;
    meta.set_placement(second, Some(&Placement::only(2)))
        .await
        .unwrap();
    meta.set_placement(second + 1, Some(&Placement::only(0)))
        .await
        .unwrap();
    let listed = meta.list_placements(0, 10).await.unwrap();
    assert_eq!(
        listed,
        vec![(id, done.clone()), (second, Placement::only(2))]
    );
    assert_eq!(
        meta.list_placements(id, 10).await.unwrap().len(),
        1,
        "after `id`"
    );
    // Freeing the slice drops its record with its deletion record.
    meta.unlink(&Ctx::root(), Ino::ROOT, b"f").await.unwrap();
    for ino in meta.pending_file_deletions(10).await.unwrap() {
        meta.free_file_chunks(ino).await.unwrap();
    }
    let pending = meta.pending_slice_deletions(i64::MAX, 10).await.unwrap();
    assert_eq!(pending.iter().map(|d| d.id).collect::<Vec<_>>(), vec![id]);
    meta.finish_slice_deletions(&pending).await.unwrap();
    assert_eq!(
        meta.placements(&[id, second]).await.unwrap(),
        vec![None, Some(Placement::only(2))]
    );
}

pub async fn tier_policies_and_mover_leases<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let other = client(&store).await;
    let cold = mkdir(&meta, Ino::ROOT, "cold").await;
    let crit = mkdir(&meta, Ino::ROOT, "crit").await;
    let p1 = TierPolicy {
        store: 1,
        copies: Vec::new(),
        after_secs: 86_400,
    };
    let p2 = TierPolicy {
        store: 0,
        copies: vec![2],
        after_secs: 0,
    };
    meta.set_tier_policy(crit.ino, Some(&p2)).await.unwrap();
    meta.set_tier_policy(cold.ino, Some(&p1)).await.unwrap();
    let mut expected = vec![(cold.ino, p1.clone()), (crit.ino, p2)];
    expected.sort_by_key(|(ino, _)| *ino);
    assert_eq!(other.tier_policies().await.unwrap(), expected);
    meta.set_tier_policy(crit.ino, None).await.unwrap();
    assert_eq!(other.tier_policies().await.unwrap(), vec![(cold.ino, p1)]);
    // One mover at a time per directory, until its lease ends or it lets go.
    let far = crate::now_ns() + 60_000_000_000;
    assert!(meta.take_mover_lease(cold.ino, 7, far).await.unwrap());
    assert!(!other.take_mover_lease(cold.ino, 8, far).await.unwrap());
    assert!(
        meta.take_mover_lease(cold.ino, 7, far).await.unwrap(),
        "renewed"
    );
    assert!(
        other.take_mover_lease(crit.ino, 8, far).await.unwrap(),
        "another directory"
    );
    other.release_mover_lease(cold.ino, 8).await.unwrap();
    assert!(
        !other.take_mover_lease(cold.ino, 8, far).await.unwrap(),
        "not its lease"
    );
    meta.release_mover_lease(cold.ino, 7).await.unwrap();
    assert!(other.take_mover_lease(cold.ino, 8, far).await.unwrap());
    let past = crate::now_ns() - 1;
    assert!(other.take_mover_lease(crit.ino, 8, past).await.unwrap());
    assert!(
        meta.take_mover_lease(crit.ino, 7, far).await.unwrap(),
        "an ended lease"
    );
}

pub async fn placements_survive_binary_dumps_and_reformatting<S: TestStore>() {
    let store = S::create();
    let spec = StoreSpec {
        id: 0,
        name: "cold".into(),
        storage: "file".into(),
        bucket: "/tmp/cold".into(),
        access_key: None,
        secret_key: Some(strata_types::Secret::new("store-secret")),
        storage_class: None,
    };
    let format = super::test_format(0).with_store(spec).unwrap();
    let meta = volume_with(&store, format.clone()).await;
    let f = touch(&meta, Ino::ROOT, "f").await;
    let id = meta.new_slice_id().await.unwrap();
    meta.write_chunk(f.ino, 0, slice(id, 100), Some(crate::now_ns()))
        .await
        .unwrap();
    let d = mkdir(&meta, Ino::ROOT, "d").await;
    let policy = TierPolicy {
        store: 1,
        copies: vec![0],
        after_secs: 0,
    };
    meta.set_tier_policy(d.ino, Some(&policy)).await.unwrap();
    meta.set_placement(id, Some(&Placement::only(1)))
        .await
        .unwrap();
    // Formatting again without the stores keeps them, and the version they need.
    let again = meta.format(&super::test_format(0), false).await.unwrap();
    assert_eq!(again.stores, format.stores);
    assert_eq!(again.meta_version, crate::format::PLACEMENT_VERSION);
    let mut dump = Vec::new();
    let opts = crate::meta::BinaryDumpOptions {
        threads: 2,
        keep_secret_key: false,
        one_moment: true,
    };
    meta.dump_binary(&mut dump, &opts, &mut |_| {})
        .await
        .unwrap();
    let target = S::create();
    let loaded = crate::Meta::new(target.client(), super::test_options());
    loaded
        .load_binary(&mut std::io::Cursor::new(&dump), 2, &mut |_| {})
        .await
        .unwrap();
    let loaded_format: std::sync::Arc<Format> = loaded.load().await.unwrap();
    assert_eq!(loaded_format.store_id("cold"), Some(1));
    assert!(
        loaded_format.stores[0].secret_key.is_none(),
        "store secrets stay out"
    );
    assert_eq!(
        loaded.placements(&[id]).await.unwrap(),
        vec![Some(Placement::only(1))]
    );
    assert_eq!(loaded.tier_policies().await.unwrap(), vec![(d.ino, policy)]);
}
