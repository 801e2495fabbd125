//! The wrappers over the memory backend with fault injection: integrity checks catch
//! damaged and truncated objects (and count them), retries ride out transient faults,
//! timeouts fire, limits hold, compression and prefixes land where they should, and the
//! counters count.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use strata_object::backend::Backend;
use strata_object::compress::Codec;
use strata_object::fault::{FaultControl, FaultPlan, Faulty, RandomFaults};
use strata_object::limit::Limits;
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_object::{ObjectError, ObjectInfo, ObjectStore, Result};

fn quick_retry(retries: u32) -> RetryPolicy {
    RetryPolicy {
        retries,
        get_timeout: Duration::from_secs(5),
        put_timeout: Duration::from_secs(5),
        base_delay: Duration::from_millis(1),
    }
}

/// A stack over a faulty memory backend; returns the stack, the raw backend, the fault
/// switch and the counters.
fn faulty_stack(
    opts: StackOptions,
) -> (
    Arc<dyn ObjectStore>,
    Arc<Backend>,
    Arc<FaultControl>,
    Arc<strata_object::metered::ObjectStats>,
) {
    let raw = Arc::new(Backend::memory());
    let (faulty, control) = Faulty::new(raw.clone());
    let (store, stats) = build(Arc::new(faulty), &opts);
    (store, raw, control, stats)
}

fn data(len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (i * 7 % 253) as u8).collect::<Vec<_>>())
}

#[tokio::test]
async fn damaged_objects_are_detected_never_returned() {
    let opts = StackOptions {
        retry: quick_retry(2),
        ..StackOptions::default()
    };
    let (store, _, control, stats) = faulty_stack(opts);
    let d = data(100_000);
    store.put("blk", d.clone()).await.unwrap();
    assert_eq!(
        store.get("blk", Some(10..20)).await.unwrap(),
        d.slice(10..20)
    );
    for plan in [
        FaultPlan {
            flip_bits: true,
            ..FaultPlan::default()
        },
        FaultPlan {
            short_reads: true,
            ..FaultPlan::default()
        },
    ] {
        control.set(plan);
        let before = stats.corrupt();
        let err = store
            .get("blk", None)
            .await
            .expect_err("damage is an error");
        assert!(matches!(err, ObjectError::Corrupt { .. }), "{err}");
        assert_eq!(
            stats.corrupt(),
            before + 3,
            "each of the 3 attempts is counted"
        );
    }
    // Once the damage is gone, the same object reads back intact.
    control.set(FaultPlan::default());
    assert_eq!(store.get("blk", None).await.unwrap(), d);
}

#[tokio::test]
async fn retries_ride_out_transient_failures() {
    let (store, _, control, stats) = faulty_stack(StackOptions {
        retry: quick_retry(3),
        ..StackOptions::default()
    });
    control.set(FaultPlan {
        fail_every: Some(2),
        ..FaultPlan::default()
    });
    for i in 0..20 {
        let key = format!("k{i}");
        store.put(&key, data(1000 + i)).await.unwrap();
        assert_eq!(store.get(&key, None).await.unwrap(), data(1000 + i));
    }
    assert!(
        stats.requests("put", "error") > 0,
        "failures happened and were retried"
    );
    // Without retries the same faults surface.
    let (bare, _, control, _) = faulty_stack(StackOptions {
        retry: quick_retry(0),
        ..StackOptions::default()
    });
    control.set(FaultPlan {
        fail_puts_after: Some(0),
        ..FaultPlan::default()
    });
    assert!(matches!(
        bare.put("x", data(10)).await,
        Err(ObjectError::Injected(_))
    ));
    // Missing objects are not retried: one request.
    let (store, _, _, stats) = faulty_stack(StackOptions {
        retry: quick_retry(5),
        ..StackOptions::default()
    });
    assert!(matches!(
        store.get("missing", None).await,
        Err(ObjectError::NotFound(_))
    ));
    assert_eq!(stats.requests("get", "not_found"), 1);
}

/// A flaky store from a seed: server errors, timeouts, truncated bodies and slow first
/// bytes all fire, the stack's retries and checks turn every one of them into either the
/// right bytes or an error (never wrong bytes), and the same seed fires the same faults.
#[tokio::test]
async fn random_faults_are_ridden_out_and_replay_from_their_seed() {
    let plan = FaultPlan {
        random: Some(RandomFaults {
            seed: 11,
            server_errors: 100,
            timeouts: 30,
            timeout: Duration::from_millis(5),
            truncated: 100,
            slow: 50,
            first_byte: Duration::from_millis(2),
        }),
        ..FaultPlan::default()
    };
    let mut fired = Vec::new();
    for _ in 0..2 {
        let (store, _, control, _) = faulty_stack(StackOptions {
            retry: quick_retry(8),
            ..StackOptions::default()
        });
        control.set(plan.clone());
        for i in 0..60 {
            let key = format!("k{i}");
            let d = data(70_000 + i);
            store.put(&key, d.clone()).await.unwrap();
            assert_eq!(store.get(&key, None).await.unwrap(), d);
            assert_eq!(
                store.get(&key, Some(100..40_000)).await.unwrap(),
                d.slice(100..40_000)
            );
        }
        fired.push(control.fired());
    }
    let f = fired[0];
    assert!(
        f.server_errors > 0 && f.timeouts > 0 && f.truncated > 0 && f.slow > 0,
        "{f:?}"
    );
    assert_eq!(fired[0], fired[1], "one seed, one sequence of faults");
}

#[tokio::test]
async fn slow_requests_time_out() {
    let retry = RetryPolicy {
        get_timeout: Duration::from_millis(30),
        ..quick_retry(1)
    };
    let (store, _, control, _) = faulty_stack(StackOptions {
        retry,
        ..StackOptions::default()
    });
    store.put("k", data(10)).await.unwrap();
    control.set(FaultPlan {
        delay: Duration::from_millis(300),
        ..FaultPlan::default()
    });
    let started = Instant::now();
    let err = store.get("k", None).await.expect_err("times out");
    assert!(matches!(err, ObjectError::Timeout(_)), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "gave up per attempt, not after the delay"
    );
}

/// Counts how many requests are inside it at once.
#[derive(Debug, Default)]
struct Gauge {
    inner: Option<Arc<Backend>>,
    now: AtomicUsize,
    peak: AtomicUsize,
}

#[async_trait]
impl ObjectStore for Gauge {
    fn describe(&self) -> String {
        "gauge".into()
    }
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.inner.as_ref().unwrap().get(key, range).await
    }
    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(10)).await; // the thing under test: a slow store holding requests
        let r = self.inner.as_ref().unwrap().put(key, data).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        r
    }
    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.as_ref().unwrap().delete(key).await
    }
    async fn sync(&self) -> Result<u64> {
        self.inner.as_ref().unwrap().sync().await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.as_ref().unwrap().head(key).await
    }
    async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.inner
            .as_ref()
            .unwrap()
            .list(prefix, after, limit)
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_and_bandwidth_limits_hold() {
    let gauge = Arc::new(Gauge {
        inner: Some(Arc::new(Backend::memory())),
        ..Gauge::default()
    });
    let limits = Limits {
        max_uploads: 3,
        ..Limits::default()
    };
    let (store, _) = build(
        gauge.clone(),
        &StackOptions {
            limits,
            ..StackOptions::default()
        },
    );
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let s = store.clone();
            tokio::spawn(async move { s.put(&format!("p{i}"), data(100)).await.unwrap() })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        gauge.peak.load(Ordering::SeqCst),
        3,
        "never more than --max-uploads at once"
    );
    // 8 Mbps = 1 MB/s: 1.5 MB of puts take at least ~1 s after the first.
    let limits = Limits {
        upload_mbps: 8,
        ..Limits::default()
    };
    let (slow, _) = build(
        Arc::new(Backend::memory()),
        &StackOptions {
            limits,
            ..StackOptions::default()
        },
    );
    let started = Instant::now();
    for i in 0..3 {
        slow.put(&format!("b{i}"), data(500_000)).await.unwrap();
    }
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn compression_prefix_and_counters() {
    let raw = Arc::new(Backend::memory());
    let opts = StackOptions {
        prefix: "vol1".into(),
        compression: Some(Codec::Zstd),
        ..StackOptions::default()
    };
    let (store, stats) = build(raw.clone(), &opts);
    let zeros = Bytes::from(vec![0u8; 1 << 20]);
    store
        .put("chunks/0/0/1_0_1048576", zeros.clone())
        .await
        .unwrap();
    assert_eq!(
        store
            .get("chunks/0/0/1_0_1048576", Some(100..200))
            .await
            .unwrap(),
        zeros.slice(100..200)
    );
    let stored = raw.head("vol1/chunks/0/0/1_0_1048576").await.unwrap();
    assert!(
        stored.size < 10_000,
        "stored compressed under the prefix ({} bytes)",
        stored.size
    );
    let listed = store.list("chunks/", None, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
        vec!["chunks/0/0/1_0_1048576"]
    );
    assert_eq!(stats.requests("put", "ok"), 1);
    assert_eq!(stats.requests("get", "ok"), 1);
    assert_eq!(stats.requests("list", "ok"), 1);
    assert_eq!(
        stats.bytes_up(),
        stored.size,
        "bytes up count what went over the wire"
    );
    assert_eq!(stats.bytes_down(), stored.size);
    store.delete("chunks/0/0/1_0_1048576").await.unwrap();
    assert_eq!(stats.requests("delete", "ok"), 1);
    assert!(raw.list("", None, 10).await.unwrap().is_empty());
}
