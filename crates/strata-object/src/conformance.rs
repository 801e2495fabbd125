//! The `ObjectStore` conformance suite, written once and run against every backend
//! (memory, local directory, s3s-fs, SeaweedFS, Azurite) through
//! [`object_conformance_tests!`](crate::object_conformance_tests). Every case works under
//! its own random key prefix, so stores may be shared between cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::backend::{AzureConfig, Backend, S3Config};
use crate::prefix::Prefixed;
use crate::{ObjectError, ObjectStore};

/// A store under test, and whatever keeps it alive (temp dirs, server processes).
pub trait TestBackend: Send + Sync + Sized + 'static {
    fn start() -> Self;
    fn store(&self) -> Arc<dyn ObjectStore>;
}

/// S3-compatible test servers: their settings, to open them again differently.
pub trait S3TestBackend: TestBackend {
    fn config(&self) -> S3Config;
}

/// Test servers that can also be opened with a wrong secret or a missing bucket.
pub trait CredentialedBackend: TestBackend {
    /// The store opened again with a wrong secret (`wrong_secret`) or in a bucket that
    /// does not exist (`missing_bucket`), or as it is when neither.
    fn reopened(&self, wrong_secret: bool, missing_bucket: bool) -> Backend;
}

impl<B: S3TestBackend> CredentialedBackend for B {
    fn reopened(&self, wrong_secret: bool, missing_bucket: bool) -> Backend {
        let mut cfg = self.config();
        if wrong_secret {
            cfg.secret_key = "not-the-secret".into();
        }
        if missing_bucket {
            cfg.bucket = "no-such-bucket-here".into();
        }
        Backend::s3(&cfg).unwrap()
    }
}

#[derive(Debug)]
pub struct MemoryBackend(Arc<dyn ObjectStore>);

impl TestBackend for MemoryBackend {
    fn start() -> Self {
        MemoryBackend(Arc::new(Backend::memory()))
    }
    fn store(&self) -> Arc<dyn ObjectStore> {
        self.0.clone()
    }
}

#[derive(Debug)]
pub struct LocalBackend {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
}

impl TestBackend for LocalBackend {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Backend::local(dir.path()).unwrap());
        LocalBackend { _dir: dir, store }
    }
    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

pub const TEST_ACCESS_KEY: &str = "strata";
pub const TEST_SECRET_KEY: &str = "strata-secret";
pub const TEST_BUCKET: &str = "strata-test";

/// The `s3s-fs` binary: `$S3S_FS_BIN`, else `~/.cache/strata/tools/bin/s3s-fs`, else PATH.
pub fn s3s_fs_binary() -> PathBuf {
    if let Ok(p) = std::env::var("S3S_FS_BIN") {
        return PathBuf::from(p);
    }
    let cached =
        std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache/strata/tools/bin/s3s-fs"));
    match cached {
        Ok(p) if p.exists() => p,
        _ => PathBuf::from("s3s-fs"),
    }
}

/// An s3s-fs server started for one test, on a free loopback port, killed on drop.
#[derive(Debug)]
pub struct S3sFs {
    _root: tempfile::TempDir,
    child: Child,
    endpoint: String,
    store: Arc<dyn ObjectStore>,
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_port(port: u16, child: &mut Child) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("s3s-fs exited at start: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "s3s-fs did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl TestBackend for S3sFs {
    fn start() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(TEST_BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bin = s3s_fs_binary();
        let mut child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--access-key",
                TEST_ACCESS_KEY,
                "--secret-key",
                TEST_SECRET_KEY,
            ])
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): run ./scripts/test.sh, which installs it",
                    bin.display()
                )
            });
        wait_for_port(port, &mut child);
        let endpoint = format!("http://127.0.0.1:{port}");
        let cfg = s3_config(&endpoint, TEST_SECRET_KEY, TEST_BUCKET);
        let store = Arc::new(Backend::s3(&cfg).unwrap());
        S3sFs {
            _root: root,
            child,
            endpoint,
            store,
        }
    }
    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

impl S3TestBackend for S3sFs {
    fn config(&self) -> S3Config {
        s3_config(&self.endpoint, TEST_SECRET_KEY, TEST_BUCKET)
    }
}

fn s3_config(endpoint: &str, secret: &str, bucket: &str) -> S3Config {
    S3Config {
        endpoint: endpoint.into(),
        region: "us-east-1".into(),
        bucket: bucket.into(),
        access_key: TEST_ACCESS_KEY.into(),
        secret_key: secret.into(),
        session_token: None,
        path_style: true,
    }
}

/// A SeaweedFS S3 endpoint started by `scripts/test.sh` (`$STRATA_TEST_SEAWEEDFS`, e.g.
/// `http://127.0.0.1:8333`), with bucket `strata-test` and the test credentials.
#[derive(Debug)]
pub struct SeaweedFs {
    endpoint: String,
    store: Arc<dyn ObjectStore>,
}

impl TestBackend for SeaweedFs {
    fn start() -> Self {
        let endpoint = std::env::var("STRATA_TEST_SEAWEEDFS").unwrap_or_else(|_| {
            panic!(
                "STRATA_TEST_SEAWEEDFS is not set: run ./scripts/test.sh, which starts SeaweedFS"
            )
        });
        let store =
            Arc::new(Backend::s3(&s3_config(&endpoint, TEST_SECRET_KEY, TEST_BUCKET)).unwrap());
        SeaweedFs { endpoint, store }
    }
    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

impl S3TestBackend for SeaweedFs {
    fn config(&self) -> S3Config {
        s3_config(&self.endpoint, TEST_SECRET_KEY, TEST_BUCKET)
    }
}

/// Azurite's well-known development account and key (public, in Microsoft's docs).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// An Azurite blob service started by `scripts/test.sh` (`$STRATA_TEST_AZURITE`, e.g.
/// `http://127.0.0.1:10000`), with container `strata-test` in the development account.
#[derive(Debug)]
pub struct Azurite {
    endpoint: String,
    store: Arc<dyn ObjectStore>,
}

impl Azurite {
    pub fn config(&self) -> AzureConfig {
        azurite_config(&self.endpoint, AZURITE_KEY, TEST_BUCKET)
    }
}

fn azurite_config(endpoint: &str, key: &str, container: &str) -> AzureConfig {
    AzureConfig {
        account: AZURITE_ACCOUNT.into(),
        key: key.into(),
        container: container.into(),
        endpoint: format!("{}/{AZURITE_ACCOUNT}", endpoint.trim_end_matches('/')),
    }
}

impl TestBackend for Azurite {
    fn start() -> Self {
        let endpoint = std::env::var("STRATA_TEST_AZURITE").unwrap_or_else(|_| {
            panic!("STRATA_TEST_AZURITE is not set: run ./scripts/test.sh, which starts Azurite")
        });
        let store =
            Arc::new(Backend::azure(&azurite_config(&endpoint, AZURITE_KEY, TEST_BUCKET)).unwrap());
        Azurite { endpoint, store }
    }
    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

impl CredentialedBackend for Azurite {
    fn reopened(&self, wrong_secret: bool, missing_bucket: bool) -> Backend {
        // A wrong key must still be base64 of the right length.
        let key = if wrong_secret {
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
        } else {
            AZURITE_KEY
        };
        let container = if missing_bucket {
            "no-such-container-here"
        } else {
            TEST_BUCKET
        };
        Backend::azure(&azurite_config(&self.endpoint, key, container)).unwrap()
    }
}

/// The backend's store under a fresh random prefix.
fn scoped<B: TestBackend>(backend: &B) -> Arc<dyn ObjectStore> {
    let prefix = format!("t{:016x}", rand::random::<u64>());
    Arc::new(Prefixed::new(backend.store(), &prefix))
}

fn pattern(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i.to_le_bytes()[0]).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<_>>(),
    )
}

pub async fn put_get_round_trip<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    for (key, data) in [
        ("a", Bytes::from_static(b"hello")),
        ("empty", Bytes::new()),
        ("dir/sub/obj", pattern(1000, 1)),
        ("big/5mib", pattern(5 << 20, 2)),
    ] {
        s.put(key, data.clone()).await.unwrap();
        assert_eq!(s.get(key, None).await.unwrap(), data, "{key}");
        assert_eq!(s.head(key).await.unwrap().size, data.len() as u64, "{key}");
    }
    // Overwrite replaces.
    s.put("a", Bytes::from_static(b"again")).await.unwrap();
    assert_eq!(
        s.get("a", None).await.unwrap(),
        Bytes::from_static(b"again")
    );
}

/// An object written piece by piece reads back as one: empty, within one part (one plain
/// put), and across several parts (a multipart upload on S3 stores); an aborted upload
/// leaves nothing a listing or a read finds.
pub async fn uploads_in_pieces_read_as_one_object<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    let big = pattern(crate::upload::PART_SIZE * 2 + 12345, 7);
    for (key, data, piece) in [
        ("up/empty", Bytes::new(), 1),
        ("up/small", pattern(100_000, 3), 4096),
        ("up/big", big.clone(), 1 << 20),
    ] {
        let mut up = s.upload(key).await.unwrap();
        let mut at = 0;
        while at < data.len() {
            let end = (at + piece).min(data.len());
            up.write(data.slice(at..end)).await.unwrap();
            at = end;
        }
        up.finish().await.unwrap();
        assert_eq!(s.get(key, None).await.unwrap(), data, "{key}");
        assert_eq!(s.head(key).await.unwrap().size, data.len() as u64, "{key}");
    }
    let mut up = s.upload("up/aborted").await.unwrap();
    up.write(big.slice(..crate::upload::PART_SIZE + 1))
        .await
        .unwrap();
    up.abort().await.unwrap();
    assert!(matches!(
        s.head("up/aborted").await,
        Err(crate::ObjectError::NotFound(_))
    ));
    let keys: Vec<String> = s
        .list("up/", None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, ["up/big", "up/empty", "up/small"]);
}

/// `sync` succeeds with nothing to do, after puts, and after some of them were deleted;
/// it changes nothing anyone reads, and a second sync has nothing left to do.
pub async fn sync_after_puts_and_deletes<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    s.sync().await.unwrap();
    for i in 0..5u8 {
        s.put(&format!("s/{i}"), pattern(3000, i)).await.unwrap();
    }
    s.delete("s/3").await.unwrap();
    let synced = s.sync().await.unwrap();
    assert!(synced <= 5, "at most the objects put: {synced}");
    assert_eq!(s.sync().await.unwrap(), 0, "nothing new to sync");
    for i in [0u8, 1, 2, 4] {
        assert_eq!(
            s.get(&format!("s/{i}"), None).await.unwrap(),
            pattern(3000, i)
        );
    }
    assert!(matches!(
        s.get("s/3", None).await,
        Err(ObjectError::NotFound(_))
    ));
}

pub async fn range_reads<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    let data = pattern(100_000, 3);
    s.put("r", data.clone()).await.unwrap();
    assert_eq!(s.get("r", Some(0..10)).await.unwrap(), data.slice(0..10));
    assert_eq!(
        s.get("r", Some(4096..8192)).await.unwrap(),
        data.slice(4096..8192)
    );
    assert_eq!(
        s.get("r", Some(99_990..200_000)).await.unwrap(),
        data.slice(99_990..),
        "end clipped"
    );
    assert_eq!(
        s.get("r", Some(5..5)).await.unwrap(),
        Bytes::new(),
        "empty range"
    );
}

pub async fn missing_objects<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    assert!(matches!(
        s.get("nope", None).await,
        Err(ObjectError::NotFound(_))
    ));
    assert!(matches!(
        s.get("nope", Some(0..4)).await,
        Err(ObjectError::NotFound(_))
    ));
    assert!(matches!(
        s.head("nope").await,
        Err(ObjectError::NotFound(_))
    ));
    s.delete("nope")
        .await
        .expect("deleting a missing object succeeds");
    s.put("x", Bytes::from_static(b"1")).await.unwrap();
    s.delete("x").await.unwrap();
    assert!(matches!(
        s.get("x", None).await,
        Err(ObjectError::NotFound(_))
    ));
    for bad in ["", "a//b", "../up", "a/./b"] {
        assert!(
            matches!(
                s.put(bad, Bytes::new()).await,
                Err(ObjectError::InvalidKey(_))
            ),
            "{bad:?}"
        );
    }
}

pub async fn listing_is_ordered_and_paged<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    let mut keys = BTreeSet::new();
    for i in 0..57u32 {
        let key = format!("chunks/{}/{}/{i}_0_4", i % 3, i % 5);
        s.put(&key, Bytes::from_static(b"data")).await.unwrap();
        keys.insert(key);
    }
    s.put("chunksX/not-under-prefix", Bytes::from_static(b"x"))
        .await
        .unwrap();
    s.put("other/x", Bytes::from_static(b"x")).await.unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s.list("chunks/", after.as_deref(), 10).await.unwrap();
        assert!(page.len() <= 10);
        if page.is_empty() {
            break;
        }
        after = page.last().map(|o| o.key.clone());
        for o in page {
            assert_eq!(o.size, 4);
            seen.push(o.key);
        }
    }
    let expected: Vec<String> = keys.into_iter().collect();
    assert_eq!(
        seen, expected,
        "all keys under the prefix, ascending, each once"
    );
    let all = s.list("", None, 1000).await.unwrap();
    assert_eq!(all.len(), 59);
    assert!(all.windows(2).all(|w| w[0].key < w[1].key));
    s.delete(&expected[0]).await.unwrap();
    assert_eq!(s.list("chunks/", None, 1000).await.unwrap().len(), 56);
}

pub async fn scan_all_streams_every_object_once<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    let mut keys = BTreeSet::new();
    for i in 0..1203u32 {
        let key = format!("chunks/{}/{}/{i}_0_3", i % 2, i % 7);
        keys.insert(key);
    }
    let puts = keys.iter().map(|k| s.put(k, Bytes::from_static(b"abc")));
    for r in futures::future::join_all(puts).await {
        r.unwrap();
    }
    s.put("meta/dump-1.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut duplicates = 0;
    s.scan_all("chunks/", &mut |info| {
        assert_eq!(info.size, 3, "{}", info.key);
        assert!(info.modified > 0, "modification time of {}", info.key);
        if !seen.insert(info.key) {
            duplicates += 1;
        }
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(duplicates, 0);
    assert_eq!(seen, keys, "every key under the prefix, nothing else");
    let mut count = 0;
    let stopped = s
        .scan_all("", &mut |_| {
            count += 1;
            if count == 5 {
                Err(ObjectError::Other("stop".into()))
            } else {
                Ok(())
            }
        })
        .await;
    assert!(stopped.is_err(), "an error from the visitor ends the scan");
    assert_eq!(count, 5);
}

pub async fn concurrent_requests<B: TestBackend>() {
    let b = B::start();
    let s = scoped(&b);
    let mut tasks = Vec::new();
    for i in 0..32u8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("c/{i}");
            let data = pattern(64 * 1024 + usize::from(i), i);
            s.put(&key, data.clone()).await.unwrap();
            assert_eq!(s.get(&key, None).await.unwrap(), data);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(s.list("c/", None, 100).await.unwrap().len(), 32);
}

pub async fn wrong_secret_is_an_auth_error<B: CredentialedBackend>() {
    let b = B::start();
    let store = b.reopened(true, false);
    let err = store
        .check()
        .await
        .expect_err("a wrong secret key is refused");
    assert!(
        matches!(err, ObjectError::Auth(_)),
        "clear authentication error, got: {err}"
    );
    let err = store
        .put("x", Bytes::from_static(b"1"))
        .await
        .expect_err("put refused");
    assert!(matches!(err, ObjectError::Auth(_)), "{err}");
}

pub async fn missing_bucket_is_reported<B: CredentialedBackend>() {
    let b = B::start();
    let err = b
        .reopened(false, true)
        .check()
        .await
        .expect_err("missing bucket");
    assert!(
        matches!(err, ObjectError::NoBucket(_)),
        "clear missing-bucket error, got: {err}"
    );
    b.reopened(false, false).check().await.unwrap();
}

/// One `#[tokio::test]` per case for the backend type given; `s3` (or `credentialed`)
/// adds the cases of servers with credentials and buckets.
#[macro_export]
macro_rules! object_conformance_tests {
    ($backend:ty) => {
        $crate::object_conformance_tests!(@cases $backend; put_get_round_trip, range_reads, missing_objects,
            sync_after_puts_and_deletes, listing_is_ordered_and_paged, scan_all_streams_every_object_once, concurrent_requests,
            uploads_in_pieces_read_as_one_object);
    };
    ($backend:ty, s3) => {
        $crate::object_conformance_tests!($backend, credentialed);
    };
    ($backend:ty, credentialed) => {
        $crate::object_conformance_tests!($backend);
        $crate::object_conformance_tests!(@cases $backend; wrong_secret_is_an_auth_error, missing_bucket_is_reported);
    };
    (@cases $backend:ty; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::conformance::$case::<$backend>().await;
            }
        )*
    };
}
