//! Conformance cases for the `Kv` contract itself: what every engine must do.

use std::sync::Arc;
use std::time::Duration;

use super::TestStore;
use crate::kv::{FieldOp, FieldUpdate, KvEngine, KvError, RetryPolicy, Txn, run_txn};

fn slot(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

async fn put_all(engine: &dyn crate::kv::KvEngine, pairs: &[(&[u8], &[u8])]) {
    let mut tx = Txn::begin(engine).await.unwrap();
    for (k, v) in pairs {
        tx.put(k.to_vec(), v.to_vec());
    }
    tx.commit().await.unwrap();
}

pub async fn point_ops<S: TestStore>() {
    let store = S::create();
    let engine = store.client();
    put_all(
        engine.as_ref(),
        &[(b"a", b"1"), (b"b", b""), (b"\x00\xff", b"bin")],
    )
    .await;
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    assert_eq!(tx.get(b"a").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(
        tx.get(b"b").await.unwrap(),
        Some(Vec::new()),
        "empty values are values"
    );
    assert_eq!(tx.get(b"zz").await.unwrap(), None);
    let many = tx
        .get_many(&[b"zz".to_vec(), b"\x00\xff".to_vec(), b"a".to_vec()])
        .await
        .unwrap();
    assert_eq!(many, vec![None, Some(b"bin".to_vec()), Some(b"1".to_vec())]);
    tx.delete(b"a".to_vec());
    tx.commit().await.unwrap();
    // Another client of the same store sees the committed state.
    let other = store.client();
    let mut tx = Txn::begin(other.as_ref()).await.unwrap();
    assert_eq!(tx.get(b"a").await.unwrap(), None);
    assert_eq!(tx.get(b"b").await.unwrap(), Some(Vec::new()));
}

/// With deferred syncs, commits are seen by another client at once, and `sync` (with
/// work to do, with none, and several at once) succeeds on every engine.
pub async fn deferred_commits_and_sync<S: TestStore>() {
    let store = S::create();
    let writer = store.client();
    writer.set_deferred_sync(true);
    writer.sync().await.unwrap();
    put_all(writer.as_ref(), &[(b"d1", b"1"), (b"d2", b"2")]).await;
    let other = store.client();
    let mut tx = Txn::begin(other.as_ref()).await.unwrap();
    assert_eq!(tx.get(b"d1").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(tx.get(b"d2").await.unwrap(), Some(b"2".to_vec()));
    drop(tx);
    let (a, b) = tokio::join!(writer.sync(), writer.sync());
    a.unwrap();
    b.unwrap();
    writer.sync().await.unwrap();
    put_all(writer.as_ref(), &[(b"d3", b"3")]).await;
    writer.sync().await.unwrap();
    let mut tx = Txn::begin(other.as_ref()).await.unwrap();
    assert_eq!(tx.get(b"d3").await.unwrap(), Some(b"3".to_vec()));
}

/// A linked read returns the first keys' values and those of the keys one of them names,
/// as the same reads done one by one would; nothing is linked from a missing or short
/// value.
pub async fn linked_reads_follow_a_number<S: TestStore>() {
    use crate::kv::Link;
    let store = S::create();
    let engine = store.client();
    let id: u64 = 0x0102_0304_0506_0708;
    let mut pointer = vec![9u8];
    pointer.extend_from_slice(&id.to_le_bytes());
    let target = |suffix: &[u8]| [&b"T"[..], &id.to_be_bytes(), suffix].concat();
    put_all(
        engine.as_ref(),
        &[
            (b"dir", b"d"),
            (b"ptr", &pointer),
            (b"short", b"\x09\x01"),
            (&target(b"x"), b"X"),
        ],
    )
    .await;
    let link = Link {
        from: 1,
        offset: 1,
        targets: vec![
            (b"T".to_vec(), b"x".to_vec()),
            (b"T".to_vec(), b"y".to_vec()),
        ],
    };
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    let got = tx
        .get_linked(&[b"dir".to_vec(), b"ptr".to_vec()], &link)
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![
            Some(b"d".to_vec()),
            Some(pointer.clone()),
            Some(b"X".to_vec()),
            None
        ]
    );
    tx.commit().await.unwrap();
    for missing in [&b"none"[..], b"short"] {
        let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
        let got = tx
            .get_linked(&[b"dir".to_vec(), missing.to_vec()], &link)
            .await
            .unwrap();
        let expected_ptr = (missing == b"short").then(|| b"\x09\x01".to_vec());
        assert_eq!(got, vec![Some(b"d".to_vec()), expected_ptr, None, None]);
        tx.commit().await.unwrap();
    }
    // A transaction that read a linked value conflicts when it changes.
    let mut reader = Txn::begin(engine.as_ref()).await.unwrap();
    reader
        .get_linked(&[b"dir".to_vec(), b"ptr".to_vec()], &link)
        .await
        .unwrap();
    reader.put(b"other".to_vec(), b"1".to_vec());
    put_all(engine.as_ref(), &[(&target(b"x"), b"changed")]).await;
    assert!(matches!(reader.commit().await, Err(KvError::Conflict)));
}

/// A frozen view reads the moment it was made, from several scans at once, whatever is
/// committed meanwhile (a dump of a whole volume is one state). Redis cannot hold a
/// moment and says so.
pub async fn frozen_views_hold_one_moment<S: TestStore>() {
    let store = S::create();
    let engine = store.client();
    let keys: Vec<Vec<u8>> = (0..40u8).map(|i| vec![b'f', i]).collect();
    let before: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"old"[..])).collect();
    put_all(engine.as_ref(), &before).await;
    let Some(view) = engine.frozen_view(3).await.unwrap() else {
        assert_eq!(engine.name(), "redis", "only Redis holds no moment");
        return;
    };
    // Changed, deleted and added keys, committed by this client and by another.
    let other = store.client();
    put_all(
        other.as_ref(),
        &[(&keys[0][..], b"new"), (b"f\x05\x00", b"added")],
    )
    .await;
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    tx.delete(keys[7].clone());
    tx.put(keys[39].clone(), b"new".to_vec());
    tx.commit().await.unwrap();

    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        keys.iter().map(|k| (k.clone(), b"old".to_vec())).collect();
    let (a, b, c) = tokio::join!(
        view.scan(b"f", b"g", 100),
        view.scan(b"f", b"g", 100),
        view.scan(&keys[5], &keys[9], 100)
    );
    assert_eq!(a.unwrap(), expected, "the whole range as it was");
    assert_eq!(b.unwrap(), expected, "a scan beside it sees the same");
    assert_eq!(c.unwrap(), expected[5..9].to_vec(), "no key added later");
    let paged = view.scan(&keys[1], b"g", 3).await.unwrap();
    assert_eq!(paged, expected[1..4].to_vec(), "limits apply");
    assert!(view.scan(b"g", b"f", 10).await.unwrap().is_empty());
    // The engine itself has moved on.
    let mut now = Txn::begin(engine.as_ref()).await.unwrap();
    assert_eq!(now.get(&keys[0]).await.unwrap(), Some(b"new".to_vec()));
    assert_eq!(now.get(&keys[7]).await.unwrap(), None);
    drop(view);
    // Released: writes go on, and a new view sees them.
    put_all(engine.as_ref(), &[(&keys[1][..], b"newer")]).await;
    let fresh = engine.frozen_view(1).await.unwrap().unwrap();
    let rows = fresh.scan(&keys[0], &keys[2], 10).await.unwrap();
    assert_eq!(
        rows,
        vec![
            (keys[0].clone(), b"new".to_vec()),
            (keys[1].clone(), b"newer".to_vec())
        ]
    );
}

pub async fn scan_order_and_limits<S: TestStore>() {
    let store = S::create();
    let engine = store.client();
    let keys: Vec<Vec<u8>> = vec![
        b"k\x00".to_vec(),
        b"k\x01".to_vec(),
        b"k\x01\x00".to_vec(),
        b"k\xff".to_vec(),
        b"l".to_vec(),
    ];
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"v"[..])).collect();
    put_all(engine.as_ref(), &pairs).await;
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    let fwd: Vec<_> = tx
        .scan(b"k", b"l", 100, false)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(fwd, keys[..4].to_vec(), "byte order, end exclusive");
    let rev: Vec<_> = tx
        .scan(b"k", b"l", 2, true)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        rev,
        vec![keys[3].clone(), keys[2].clone()],
        "reverse with limit"
    );
    let limited = tx.scan(b"k\x01", b"l\x00", 2, false).await.unwrap();
    assert_eq!(limited.len(), 2);
    assert_eq!(limited[0].0, keys[1]);
    assert!(tx.scan(b"m", b"n", 10, false).await.unwrap().is_empty());
    assert!(
        tx.scan(b"l", b"k", 10, false).await.unwrap().is_empty(),
        "empty range"
    );
    assert!(
        tx.scan(b"k", b"l", 0, false).await.unwrap().is_empty(),
        "limit 0"
    );
}

pub async fn read_your_writes<S: TestStore>() {
    let store = S::create();
    let engine = store.client();
    put_all(
        engine.as_ref(),
        &[(b"p1", b"old"), (b"p2", b"x"), (b"p3", b"y")],
    )
    .await;
    let mut tx = Txn::begin(engine.as_ref()).await.unwrap();
    tx.put(b"p1".to_vec(), b"new".to_vec());
    tx.delete(b"p2".to_vec());
    tx.put(b"p0".to_vec(), b"added".to_vec());
    assert_eq!(tx.get(b"p1").await.unwrap(), Some(b"new".to_vec()));
    assert_eq!(tx.get(b"p2").await.unwrap(), None);
    let seen: Vec<_> = tx.scan(b"p", b"q", 10, false).await.unwrap();
    assert_eq!(
        seen,
        vec![
            (b"p0".to_vec(), b"added".to_vec()),
            (b"p1".to_vec(), b"new".to_vec()),
            (b"p3".to_vec(), b"y".to_vec())
        ]
    );
    // A limit applies after merging: the deleted p2 must not shorten the page.
    let page = tx.scan(b"p1", b"q", 2, false).await.unwrap();
    assert_eq!(
        page.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        vec![b"p1".to_vec(), b"p3".to_vec()]
    );
    let rev = tx.scan(b"p", b"q", 1, true).await.unwrap();
    assert_eq!(rev[0].0, b"p3".to_vec());
    tx.commit().await.unwrap();
}

pub async fn conflicts_are_detected<S: TestStore>() {
    let store = S::create();
    let (a, b) = (store.client(), store.client());
    put_all(a.as_ref(), &[(b"x", b"0")]).await;
    // Two transactions read x and both write: the second to commit must fail.
    let mut t1 = Txn::begin(a.as_ref()).await.unwrap();
    let mut t2 = Txn::begin(b.as_ref()).await.unwrap();
    assert_eq!(t1.get(b"x").await.unwrap(), Some(b"0".to_vec()));
    assert_eq!(t2.get(b"x").await.unwrap(), Some(b"0".to_vec()));
    t1.put(b"x".to_vec(), b"1".to_vec());
    t2.put(b"x".to_vec(), b"2".to_vec());
    t1.commit().await.unwrap();
    assert!(matches!(t2.commit().await, Err(KvError::Conflict)));
    // A range read conflicts with an insert into the range (no phantoms).
    let mut t3 = Txn::begin(a.as_ref()).await.unwrap();
    assert!(t3.scan(b"r", b"s", 10, false).await.unwrap().is_empty());
    t3.put(b"flag".to_vec(), b"empty".to_vec());
    put_all(b.as_ref(), &[(b"r1", b"v")]).await;
    assert!(matches!(t3.commit().await, Err(KvError::Conflict)));
    // Reading a missing key conflicts with its creation.
    let mut t4 = Txn::begin(a.as_ref()).await.unwrap();
    assert_eq!(t4.get(b"new").await.unwrap(), None);
    t4.put(b"other".to_vec(), b"v".to_vec());
    put_all(b.as_ref(), &[(b"new", b"v")]).await;
    assert!(matches!(t4.commit().await, Err(KvError::Conflict)));
    // Nothing from the failed transactions was applied.
    let mut check = Txn::begin(a.as_ref()).await.unwrap();
    assert_eq!(check.get(b"x").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(check.get(b"flag").await.unwrap(), None);
    assert_eq!(check.get(b"other").await.unwrap(), None);
}

pub async fn field_updates_commute<S: TestStore>() {
    let store = S::create();
    let (a, b) = (store.client(), store.client());
    let mut rec = slot(10);
    rec.extend_from_slice(&slot(100));
    put_all(a.as_ref(), &[(b"rec", &rec)]).await;
    let mut t1 = Txn::begin(a.as_ref()).await.unwrap();
    let mut t2 = Txn::begin(b.as_ref()).await.unwrap();
    t1.update_fields(
        b"rec".to_vec(),
        &[FieldOp {
            slot: 0,
            update: FieldUpdate::Add(5),
        }],
    )
    .unwrap();
    t2.update_fields(
        b"rec".to_vec(),
        &[FieldOp {
            slot: 0,
            update: FieldUpdate::Add(-3),
        }],
    )
    .unwrap();
    t2.update_fields(
        b"rec".to_vec(),
        &[FieldOp {
            slot: 1,
            update: FieldUpdate::Max(50),
        }],
    )
    .unwrap();
    t1.update_fields(
        b"missing".to_vec(),
        &[FieldOp {
            slot: 0,
            update: FieldUpdate::Set(1),
        }],
    )
    .unwrap();
    t1.commit().await.unwrap();
    t2.commit().await.expect("field updates never conflict");
    let mut check = Txn::begin(a.as_ref()).await.unwrap();
    let got = check.get(b"rec").await.unwrap().unwrap();
    assert_eq!(&got[0..8], &slot(12)[..]);
    assert_eq!(&got[8..16], &slot(100)[..]);
    assert_eq!(
        check.get(b"missing").await.unwrap(),
        None,
        "updates to a missing key vanish"
    );
    // Inside a transaction, reading an updated key shows the update.
    let mut t3 = Txn::begin(a.as_ref()).await.unwrap();
    t3.update_fields(
        b"rec".to_vec(),
        &[FieldOp {
            slot: 1,
            update: FieldUpdate::Set(7),
        }],
    )
    .unwrap();
    assert_eq!(&t3.get(b"rec").await.unwrap().unwrap()[8..16], &slot(7)[..]);
    t3.commit().await.unwrap();
}

pub async fn retry_loop_gives_up<S: TestStore>() {
    let store = S::create();
    let (a, b) = (store.client(), store.client());
    put_all(a.as_ref(), &[(b"hot", b"0")]).await;
    let mut policy = RetryPolicy {
        max_attempts: 3,
        conflict_timeout: Duration::ZERO,
        base_delay: Duration::from_micros(10),
        max_delay: Duration::from_millis(1),
        unavailable_timeout: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    let (attempts, result) = always_conflicting(a.as_ref(), b.clone(), &policy).await;
    assert_eq!(attempts, 3);
    match result {
        Err(KvError::RetriesExhausted { attempts, .. }) => assert_eq!(attempts, 3),
        other => panic!("expected RetriesExhausted, got {other:?}"),
    }
    // Conflicts are retried for `conflict_timeout` however many attempts that takes.
    policy.conflict_timeout = Duration::from_millis(150);
    let started = std::time::Instant::now();
    let (attempts, result) = always_conflicting(a.as_ref(), b.clone(), &policy).await;
    assert!(started.elapsed() >= policy.conflict_timeout);
    assert!(attempts > 3, "only {attempts} attempts");
    match result {
        Err(KvError::RetriesExhausted { attempts: n, .. }) => assert_eq!(n, attempts),
        other => panic!("expected RetriesExhausted, got {other:?}"),
    }
    // A transaction that does not conflict succeeds through the same loop.
    let ok: Result<u32, KvError> = run_txn(a.as_ref(), &policy, |tx| {
        Box::pin(async move {
            tx.put(b"calm".to_vec(), b"1".to_vec());
            Ok(7)
        })
    })
    .await;
    assert_eq!(ok.unwrap(), 7);
}

/// Run a transaction that another client makes conflict before every commit: how many
/// attempts it made and how it ended.
async fn always_conflicting(
    engine: &dyn KvEngine,
    interferer: Arc<dyn KvEngine>,
    policy: &RetryPolicy,
) -> (u32, Result<(), KvError>) {
    let mut attempts = 0u32;
    let result: Result<(), KvError> = run_txn(engine, policy, |tx| {
        attempts += 1;
        let interferer = interferer.clone();
        Box::pin(async move {
            let v = tx.get(b"hot").await?.unwrap_or_default();
            put_all(
                interferer.as_ref(),
                &[(b"hot", &[v.as_slice(), b"!"].concat())],
            )
            .await;
            tx.put(b"hot".to_vec(), b"mine".to_vec());
            Ok(())
        })
    })
    .await;
    (attempts, result)
}
