//! Field updates run in a Lua script with 64-bit arithmetic done on two 32-bit halves.
//! They must give exactly what the reference implementation (`apply_field_ops`) gives,
//! including carries, negative numbers, wrap-around and nanosecond timestamps — and the
//! commit reports the values it left.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use strata_meta::kv::{CommitRequest, FieldOp, FieldUpdate, KvEngine, Write, apply_field_ops};
use strata_meta_redis::{RedisEngine, RedisUrl};

fn record(slots: &[i64]) -> Vec<u8> {
    slots.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[tokio::test]
async fn lua_field_arithmetic_matches_the_reference() {
    let server = std::env::var("STRATA_TEST_REDIS")
        .expect("STRATA_TEST_REDIS must name a Redis server (scripts/test.sh starts one)");
    let prefix = format!("f{}", uuid::Uuid::new_v4().simple());
    let url = RedisUrl::parse(&format!("{server}?prefix={prefix}")).unwrap();
    let engine = RedisEngine::connect(&url).await.unwrap();
    let interesting = [
        0i64,
        1,
        -1,
        0xFFFF_FFFF,
        0x1_0000_0000,
        -0x1_0000_0000,
        1_796_000_000_123_456_789, // a time in ns
        i64::MAX,
        i64::MIN,
        i64::MAX - 5,
        -7_000_000_000,
    ];
    let mut case = 0u32;
    for &start in &interesting {
        for &operand in &interesting {
            for update in [
                FieldUpdate::Add(operand),
                FieldUpdate::Max(operand),
                FieldUpdate::Set(operand),
            ] {
                case += 1;
                let key = format!("rec{case}").into_bytes();
                let initial = record(&[42, start, -3]);
                let ops = vec![
                    FieldOp { slot: 1, update },
                    FieldOp {
                        slot: 2,
                        update: FieldUpdate::Add(operand),
                    },
                ];
                engine
                    .commit(CommitRequest {
                        seq: 0,
                        reads: Vec::new(),
                        writes: vec![(key.clone(), Write::Put(initial.clone()))],
                    })
                    .await
                    .unwrap();
                let reported = engine
                    .commit_fields(CommitRequest {
                        seq: 0,
                        reads: Vec::new(),
                        writes: vec![(key.clone(), Write::Fields(ops.clone()))],
                    })
                    .await
                    .unwrap();
                let got = engine.snapshot().await.unwrap().get(&key).await.unwrap();
                let want = apply_field_ops(&key, Some(&initial), &ops).unwrap();
                assert_eq!(got, want, "start {start}, {update:?}");
                // The commit reports what it left, so the client need not read it.
                assert_eq!(reported, Some(vec![want]), "reported, {update:?}");
            }
        }
    }
    // Updates of a missing key do nothing (and report it missing), among other writes.
    let reported = engine
        .commit_fields(CommitRequest {
            seq: 0,
            reads: Vec::new(),
            writes: vec![
                (b"before".to_vec(), Write::Put(record(&[1]))),
                (
                    b"missing".to_vec(),
                    Write::Fields(vec![FieldOp {
                        slot: 0,
                        update: FieldUpdate::Add(1),
                    }]),
                ),
            ],
        })
        .await
        .unwrap();
    assert_eq!(reported, Some(vec![None]));
    let got = engine
        .snapshot()
        .await
        .unwrap()
        .get(b"missing")
        .await
        .unwrap();
    assert_eq!(got, None);
}
