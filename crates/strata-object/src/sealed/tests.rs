//! Object v3: sealed objects read back whole and by range (one request, only the segments
//! needed), hide their bytes, and refuse anything tampered, moved, cut or sealed under a
//! key the volume does not have; keys added by a rotation are fetched when first needed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;

use super::*;
use crate::backend::Backend;
use crate::metered::Metered;
use crate::seal::{Cipher, DataKey, KEY_LEN, KeySource};

#[derive(Debug)]
struct Counting {
    inner: Arc<Backend>,
    gets: AtomicU64,
}

#[async_trait]
impl ObjectStore for Counting {
    fn describe(&self) -> String {
        "counting".into()
    }
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key, range).await
    }
    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put(key, data).await
    }
    async fn sync(&self) -> Result<u64> {
        Ok(0)
    }
    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key).await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn list(&self, p: &str, a: Option<&str>, l: usize) -> Result<Vec<ObjectInfo>> {
        self.inner.list(p, a, l).await
    }
}

fn key(id: u32, cipher: Cipher, byte: u8) -> DataKey {
    DataKey::new(id, cipher, [byte; KEY_LEN])
}

fn keys(cipher: Cipher) -> Arc<Keys> {
    Arc::new(Keys::new(
        KeyRing::new(1, vec![key(1, cipher, 1)]).unwrap(),
        None,
    ))
}

/// Both units a volume may have: every format test runs on each.
const UNITS: [Unit; 2] = [Unit::LARGE, Unit::SMALL];

fn store_with(inner: Arc<Backend>, keys: Arc<Keys>) -> Sealed<Counting> {
    store_in(inner, keys, Unit::SMALL)
}

fn store_in(inner: Arc<Backend>, keys: Arc<Keys>, unit: Unit) -> Sealed<Counting> {
    let counting = Counting {
        inner,
        gets: AtomicU64::new(0),
    };
    Sealed::new(counting, keys, unit, Arc::new(ObjectStats::default()))
}

fn payload(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| u8::try_from(i % 251).unwrap() ^ seed)
        .collect::<Vec<_>>()
        .into()
}

/// Payload sizes around the unit's and the segment's boundaries.
fn sizes(unit: Unit) -> [usize; 10] {
    let u = unit.bytes();
    [
        0,
        1,
        u - 1,
        u,
        u + 1,
        SEGMENT - 1,
        SEGMENT + 1,
        3 * u + 5,
        3 * SEGMENT + 5,
        4 << 20,
    ]
}

#[tokio::test]
async fn whole_and_ranged_reads_give_the_payload_for_every_size() {
    for (cipher, unit) in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305]
        .into_iter()
        .flat_map(|c| UNITS.map(|u| (c, u)))
    {
        let store = store_in(Arc::new(Backend::memory()), keys(cipher), unit);
        for (n, len) in sizes(unit).into_iter().enumerate() {
            let k = format!("chunks/0/0/{n}_0_{len}");
            let data = payload(len, 3);
            store.put(&k, data.clone()).await.unwrap();
            let stored = store.inner.inner.get(&k, None).await.unwrap();
            assert_eq!(to_u64(stored.len()), unit.stored_size(to_u64(len)));
            assert_eq!(unit.payload_size(to_u64(stored.len())), to_u64(len));
            assert_eq!(store.head(&k).await.unwrap().size, to_u64(len));
            assert_eq!(store.get(&k, None).await.unwrap(), data);
            let len64 = to_u64(len);
            for r in [
                0..1,
                0..len64,
                len64 / 3..len64 / 2 + 1,
                len64.saturating_sub(7)..len64 + 9,
                len64..len64 + 4,
                len64 + 10..len64 + 20,
            ] {
                let want = slice_range(data.clone(), Some(r.clone()));
                assert_eq!(
                    store.get(&k, Some(r.clone())).await.unwrap(),
                    want,
                    "{len} {r:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_ranged_read_is_one_request_for_only_its_segments() {
    for unit in UNITS {
        let stats = Arc::new(ObjectStats::default());
        let metered = Metered::new(Arc::new(Backend::memory()), stats.clone());
        let store = Sealed::new(metered, keys(Cipher::Aes256Gcm), unit, stats.clone());
        let gets = || stats.requests("get", "ok");
        let data = payload(4 << 20, 1);
        store.put("b", data.clone()).await.unwrap();
        let (before, bytes) = (gets(), stats.bytes_down());
        // 4 KiB inside one unit: one request for that unit's stored bytes.
        let at = to_u64(unit.bytes()) * 30 + 100;
        let got = store.get("b", Some(at..at + 4096)).await.unwrap();
        assert_eq!(got, slice_range(data, Some(at..at + 4096)));
        assert_eq!(gets() - before, 1);
        assert_eq!(
            stats.bytes_down() - bytes,
            to_u64(unit.stride()),
            "{unit:?}"
        );
        assert_eq!(store.range_unit(), unit.bytes());
    }
}

#[tokio::test]
async fn a_volume_reads_only_objects_of_its_own_unit() {
    let backend = Arc::new(Backend::memory());
    let large = store_in(backend.clone(), keys(Cipher::Aes256Gcm), Unit::LARGE);
    let small = store_in(backend, keys(Cipher::Aes256Gcm), Unit::SMALL);
    large.put("l", payload(100_000, 1)).await.unwrap();
    assert!(matches!(
        small.get("l", None).await,
        Err(ObjectError::Corrupt { .. })
    ));
    assert!(small.get("l", Some(40_000..40_010)).await.is_err());
    assert_eq!(Unit::of_kib(16), Some(Unit::SMALL));
    assert_eq!(Unit::of_kib(32), Some(Unit::LARGE));
    assert_eq!(Unit::of_kib(64), None);
}

#[tokio::test]
async fn stored_bytes_hold_none_of_the_plaintext() {
    let store = store_with(Arc::new(Backend::memory()), keys(Cipher::ChaCha20Poly1305));
    let secret = b"THE-PLANTED-PLAINTEXT-0123456789".repeat(4096);
    store.put("p", Bytes::from(secret.clone())).await.unwrap();
    let stored = store.inner.inner.get("p", None).await.unwrap();
    assert!(!stored.windows(16).any(|w| w == &secret[..16]));
}

#[tokio::test]
async fn any_damage_fails_the_reads_that_touch_it() {
    for unit in UNITS {
        let stride = unit.stride();
        let backend = Arc::new(Backend::memory());
        let store = store_in(backend.clone(), keys(Cipher::Aes256Gcm), unit);
        let data = payload(3 * unit.bytes() + 100, 9);
        store.put("d", data.clone()).await.unwrap();
        let stored = backend.get("d", None).await.unwrap();
        // One byte in segment 1's ciphertext, then one in its trailer, then in the header.
        for at in [HEADER + stride + 10, HEADER + 2 * stride - 3, 9] {
            let mut bad = stored.to_vec();
            bad[at] ^= 0x40;
            backend.put("d", Bytes::from(bad)).await.unwrap();
            let whole = store.get("d", None).await;
            assert!(
                matches!(whole, Err(ObjectError::Corrupt { .. })),
                "{at}: {whole:?}"
            );
            if at > HEADER {
                let seg = to_u64(unit.bytes());
                assert!(store.get("d", Some(seg + 5..seg + 6)).await.is_err());
                let fine = store.get("d", Some(2 * seg..2 * seg + 50)).await.unwrap();
                assert_eq!(fine, slice_range(data.clone(), Some(2 * seg..2 * seg + 50)));
            }
        }
        // Cut at a segment boundary: the last segment is missing.
        backend
            .put("d", stored.slice(..HEADER + 2 * stride))
            .await
            .unwrap();
        assert!(store.get("d", None).await.is_err());
        let seg = to_u64(unit.bytes());
        assert!(store.get("d", Some(2 * seg..3 * seg)).await.is_err());
        // A plain (unsealed) object is not data.
        backend.put("d", data.clone()).await.unwrap();
        assert!(store.get("d", None).await.is_err());
    }
}

#[tokio::test]
async fn segments_moved_between_objects_or_places_are_refused() {
    for unit in UNITS {
        let stride = unit.stride();
        let backend = Arc::new(Backend::memory());
        let store = store_in(backend.clone(), keys(Cipher::Aes256Gcm), unit);
        store.put("x", payload(2 * unit.bytes(), 1)).await.unwrap();
        store.put("y", payload(2 * unit.bytes(), 2)).await.unwrap();
        let x = backend.get("x", None).await.unwrap();
        let y = backend.get("y", None).await.unwrap();
        // y's segment 0 in x's place.
        let mut mixed = x.to_vec();
        mixed[HEADER..HEADER + stride].copy_from_slice(&y[HEADER..HEADER + stride]);
        backend.put("x", Bytes::from(mixed)).await.unwrap();
        assert!(store.get("x", Some(0..10)).await.is_err());
        // x's own two segments swapped (same length, both valid under x's key).
        let mut swapped = x.to_vec();
        let (a, b) = (
            HEADER..HEADER + stride,
            HEADER + stride..HEADER + 2 * stride,
        );
        swapped[a.clone()].copy_from_slice(&x[b.clone()]);
        swapped[b].copy_from_slice(&x[a]);
        backend.put("x", Bytes::from(swapped)).await.unwrap();
        assert!(store.get("x", None).await.is_err());
    }
}

#[tokio::test]
async fn a_wrong_key_reads_nothing() {
    let backend = Arc::new(Backend::memory());
    let store = store_with(backend.clone(), keys(Cipher::Aes256Gcm));
    store.put("w", payload(1000, 1)).await.unwrap();
    let wrong = Arc::new(Keys::new(
        KeyRing::new(1, vec![key(1, Cipher::Aes256Gcm, 2)]).unwrap(),
        None,
    ));
    let other = store_with(backend, wrong);
    assert!(matches!(
        other.get("w", None).await,
        Err(ObjectError::Corrupt { .. })
    ));
    assert!(matches!(
        other.get("w", Some(0..5)).await,
        Err(ObjectError::Corrupt { .. })
    ));
}

/// Hands out the rotated ring: both keys, the second current.
#[derive(Debug)]
struct Rotated(AtomicU64);

#[async_trait]
impl KeySource for Rotated {
    async fn reload(&self) -> Result<KeyRing> {
        self.0.fetch_add(1, Ordering::Relaxed);
        // A reload takes a round trip: other readers run meanwhile.
        tokio::task::yield_now().await;
        KeyRing::new(
            2,
            vec![
                key(1, Cipher::Aes256Gcm, 1),
                key(2, Cipher::ChaCha20Poly1305, 5),
            ],
        )
    }
}

#[tokio::test]
async fn keys_added_by_a_rotation_are_fetched_once_needed() {
    let backend = Arc::new(Backend::memory());
    let old = store_with(backend.clone(), keys(Cipher::Aes256Gcm));
    old.put("before", payload(5000, 1)).await.unwrap();
    let rotated_keys = Rotated(AtomicU64::new(0)).reload().await.unwrap();
    let new = store_with(backend.clone(), Arc::new(Keys::new(rotated_keys, None)));
    new.put("after", payload(70_000, 2)).await.unwrap();
    assert_eq!(new.get("before", None).await.unwrap(), payload(5000, 1));
    // A client that started before the rotation: no source, a clear error.
    assert!(matches!(
        old.get("after", None).await,
        Err(ObjectError::NoKey(_))
    ));
    let source = Arc::new(Rotated(AtomicU64::new(0)));
    let ring = KeyRing::new(1, vec![key(1, Cipher::Aes256Gcm, 1)]).unwrap();
    let following = store_with(backend, Arc::new(Keys::new(ring, Some(source.clone()))));
    assert_eq!(
        following.get("after", Some(10..20)).await.unwrap(),
        payload(70_000, 2).slice(10..20)
    );
    assert_eq!(
        following.get("after", None).await.unwrap(),
        payload(70_000, 2)
    );
    assert_eq!(source.0.load(Ordering::Relaxed), 1, "fetched once");
    // Readers meeting the new key together fetch it once.
    let source = Arc::new(Rotated(AtomicU64::new(0)));
    let ring = KeyRing::new(1, vec![key(1, Cipher::Aes256Gcm, 1)]).unwrap();
    let keys = Arc::new(Keys::new(ring, Some(source.clone())));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let keys = keys.clone();
            tokio::spawn(async move { keys.reload_for(2).await.unwrap() })
        })
        .collect();
    for r in readers {
        assert!(r.await.unwrap());
    }
    assert_eq!(
        source.0.load(Ordering::Relaxed),
        1,
        "one reload for eight readers"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_range_of_every_size_reads_back(
        len in 0usize..(5 * SEGMENT),
        small in proptest::bool::ANY,
        start in 0u64..(6 * 32768),
        width in 1u64..(3 * 32768),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let unit = if small { Unit::SMALL } else { Unit::LARGE };
            let store = store_in(Arc::new(Backend::memory()), keys(Cipher::Aes256Gcm), unit);
            let data = payload(len, 7);
            store.put("r", data.clone()).await.unwrap();
            let r = start..start + width;
            let got = store.get("r", Some(r.clone())).await.unwrap();
            assert_eq!(got, slice_range(data, Some(r)));
        });
    }
}

/// With compression on, a volume's blocks are compressed and then sealed: what is stored
/// is smaller than the payload (ciphertext does not compress), and reads give it back.
#[tokio::test]
async fn compression_happens_before_sealing() {
    use crate::compress::Codec;
    use crate::stack::{StackOptions, build};
    let backend = Arc::new(Backend::memory());
    let opts = StackOptions {
        compression: Some(Codec::Zstd),
        keys: Some(keys(Cipher::Aes256Gcm)),
        ..StackOptions::default()
    };
    let (store, _) = build(backend.clone(), &opts);
    let data = Bytes::from(b"compressible, sealed ".repeat(50_000));
    store.put("z", data.clone()).await.unwrap();
    let stored = backend.get("z", None).await.unwrap();
    assert!(stored.starts_with(MAGIC));
    assert!(stored.len() < data.len() / 10, "{} stored", stored.len());
    assert_eq!(store.get("z", None).await.unwrap(), data);
    assert_eq!(
        store.get("z", Some(100..200)).await.unwrap(),
        data.slice(100..200)
    );
}
