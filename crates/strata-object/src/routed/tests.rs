use std::collections::HashMap;

use super::*;
use crate::backend::Backend;
use crate::fault::{FaultControl, FaultPlan, Faulty};

/// Placements in memory, as metadata would keep them.
#[derive(Debug, Default)]
struct Table {
    stores: Mutex<HashMap<u64, Vec<u8>>>,
}

#[async_trait]
impl PlacementLookup for Table {
    async fn stores_of(&self, id: u64) -> Result<Vec<u8>> {
        Ok(self.stores.lock().get(&id).cloned().unwrap_or_default())
    }
    async fn written_to(&self, id: u64, stores: &[u8]) -> Result<()> {
        self.stores.lock().insert(id, stores.to_vec());
        Ok(())
    }
}

struct Set {
    routed: Routed,
    table: Arc<Table>,
    bare: Vec<Arc<dyn ObjectStore>>,
    faults: Vec<Arc<FaultControl>>,
}

fn three_stores() -> Set {
    let table = Arc::new(Table::default());
    let mut members = Vec::new();
    let mut bare = Vec::new();
    let mut faults = Vec::new();
    for (id, name) in [(0u8, "default"), (1, "cold"), (2, "backup")] {
        let store: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
        let (faulty, control) = Faulty::new(store.clone());
        members.push(Member::new(id, name, Arc::new(faulty)));
        bare.push(store);
        faults.push(control);
    }
    let routed = Routed::new(members, table.clone(), Duration::from_secs(60)).unwrap();
    Set {
        routed,
        table,
        bare,
        faults,
    }
}

const KEY: &str = "vol/chunks/0/0/7_0_5";

async fn held(set: &Set, key: &str) -> Vec<bool> {
    let mut held = Vec::new();
    for s in &set.bare {
        held.push(s.head(key).await.is_ok());
    }
    held
}

#[tokio::test]
async fn blocks_go_where_their_placement_says_and_other_objects_to_store_0() {
    let set = three_stores();
    set.table.stores.lock().insert(7, vec![1, 2]);
    set.routed
        .put(KEY, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(held(&set, KEY).await, vec![false, true, true]);
    set.routed
        .put("vol/chunks/0/0/8_0_5", Bytes::from_static(b"other"))
        .await
        .unwrap();
    assert_eq!(
        held(&set, "vol/chunks/0/0/8_0_5").await,
        vec![true, false, false]
    );
    set.routed
        .put("vol/meta/backup", Bytes::from_static(b"m"))
        .await
        .unwrap();
    assert_eq!(
        held(&set, "vol/meta/backup").await,
        vec![true, false, false]
    );
    assert_eq!(&set.routed.get(KEY, Some(1..3)).await.unwrap()[..], b"el");
    let listed = set.routed.list("vol/chunks/", None, 10).await.unwrap();
    let keys: Vec<_> = listed.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, vec![KEY, "vol/chunks/0/0/8_0_5"], "one key once");
    set.routed.delete(KEY).await.unwrap();
    assert_eq!(held(&set, KEY).await, vec![false, false, false]);
}

#[tokio::test]
async fn reads_fall_back_to_other_stores_and_skip_a_failing_one() {
    let set = three_stores();
    // The record says cold, the block is still only in store 0 (a move not yet made).
    set.table.stores.lock().insert(7, vec![1]);
    set.bare[0]
        .put(KEY, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(&set.routed.get(KEY, None).await.unwrap()[..], b"hello");
    assert_eq!(set.routed.stats().fallback_reads.load(Ordering::Relaxed), 1);
    // Cold fails: it is marked down, and the next read does not ask it first.
    set.faults[1].set(FaultPlan {
        fail_every: Some(1),
        ..FaultPlan::default()
    });
    assert_eq!(&set.routed.get(KEY, None).await.unwrap()[..], b"hello");
    let gets_before = set.faults[1].counts();
    assert_eq!(&set.routed.get(KEY, None).await.unwrap()[..], b"hello");
    assert_eq!(
        set.faults[1].counts(),
        gets_before,
        "a down store is not asked first"
    );
    assert!(set.routed.stats().skipped_down.load(Ordering::Relaxed) >= 1);
    let mut e = Exposition::new();
    set.routed.render_metrics(&mut e);
    let text = e.finish();
    assert!(text.contains("strata_store_fallback_reads 2"), "{text}");
    assert!(
        text.contains("strata_store_down{store=\"cold\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("strata_store_down{store=\"default\"} 0"),
        "{text}"
    );
    // Missing everywhere: NotFound; missing where up but a store failed: its error.
    set.faults[1].set(FaultPlan::default());
    let none = set
        .routed
        .get("vol/chunks/0/0/9_0_5", None)
        .await
        .unwrap_err();
    assert!(matches!(none, ObjectError::NotFound(_)), "{none}");
}

#[tokio::test]
async fn a_missing_block_behind_a_failed_store_is_not_called_missing() {
    let set = three_stores();
    set.table.stores.lock().insert(7, vec![1]);
    set.faults[1].set(FaultPlan {
        fail_every: Some(1),
        ..FaultPlan::default()
    });
    let e = set.routed.get(KEY, None).await.unwrap_err();
    assert!(!matches!(e, ObjectError::NotFound(_)), "{e}");
}

#[tokio::test]
async fn writes_to_a_stopped_store_land_in_store_0_and_say_so() {
    let set = three_stores();
    set.table.stores.lock().insert(7, vec![1]);
    set.faults[1].set(FaultPlan {
        fail_every: Some(1),
        ..FaultPlan::default()
    });
    set.routed
        .put(KEY, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(held(&set, KEY).await, vec![true, false, false]);
    assert_eq!(set.table.stores.lock().get(&7), Some(&vec![0]));
    assert_eq!(
        set.routed.stats().fallback_writes.load(Ordering::Relaxed),
        1
    );
    // A copy store that fails: the block is where it could go, and the record says so.
    set.table.stores.lock().insert(8, vec![2, 1]);
    let key8 = "vol/chunks/0/0/8_0_5";
    set.routed
        .put(key8, Bytes::from_static(b"world"))
        .await
        .unwrap();
    assert_eq!(held(&set, key8).await, vec![false, false, true]);
    assert_eq!(set.table.stores.lock().get(&8), Some(&vec![2]));
}

#[tokio::test]
async fn slice_ids_come_from_block_names_only() {
    assert_eq!(slice_of("vol/chunks/0/0/7_0_5"), Some(7));
    assert_eq!(slice_of("chunks/1/1234/1234567_3_100"), Some(1_234_567));
    assert_eq!(slice_of("vol/meta/dump-1"), None);
    assert_eq!(slice_of("vol/chunks/0/0/notablock"), None);
}

#[tokio::test]
async fn a_slow_store_delays_reads_and_writes_only_so_long() {
    let set = three_stores();
    let routed = set
        .routed
        .with_patience(Duration::from_millis(100), Duration::from_millis(100));
    // The record says cold first, with a copy at home; cold answers after 5 s.
    set.table.stores.lock().insert(7, vec![1, 0]);
    set.faults[1].set(FaultPlan {
        delay: Duration::from_secs(5),
        ..FaultPlan::default()
    });
    let started = std::time::Instant::now();
    routed.put(KEY, Bytes::from_static(b"hello")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        set.table.stores.lock().get(&7),
        Some(&vec![0]),
        "cold left out"
    );
    assert_eq!(routed.stats().slow_writes.load(Ordering::Relaxed), 1);
    // A read that asks cold first gets its answer from home after the hedge delay.
    let mut routed = routed;
    for m in &mut routed.members {
        *m.down_until.lock() = None;
    }
    set.table.stores.lock().insert(7, vec![1, 0]);
    let started = std::time::Instant::now();
    assert_eq!(&routed.get(KEY, None).await.unwrap()[..], b"hello");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(routed.stats().hedged_reads.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_write_every_store_took_keeps_its_record_whatever_order_they_answered_in() {
    let set = three_stores();
    set.table.stores.lock().insert(7, vec![2, 0]);
    // Store 2 answers last: the record must still read it first.
    set.faults[2].set(FaultPlan {
        delay: Duration::from_millis(50),
        ..FaultPlan::default()
    });
    set.routed
        .put(KEY, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(set.table.stores.lock().get(&7), Some(&vec![2, 0]));
    assert_eq!(set.routed.stats().partial_writes.load(Ordering::Relaxed), 0);
    assert_eq!(slice_of("datachunks/meta/12_3_4"), None);
    assert_eq!(slice_of("datachunks/chunks/0/0/12_3_4"), Some(12));
}
