//! Object v2 framing: whole and ranged reads give the payload's bytes, only the needed
//! segments are fetched, and any damage, truncation or misplaced segment is caught;
//! objects of the previous format still read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::backend::Backend;

/// Counts requests and the bytes they return.
#[derive(Debug)]
struct Counting {
    inner: Backend,
    gets: AtomicU64,
    bytes: AtomicU64,
}

#[async_trait]
impl ObjectStore for Counting {
    fn describe(&self) -> String {
        "counting".into()
    }
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let data = self.inner.get(key, range).await?;
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(to_u64(data.len()), Ordering::Relaxed);
        Ok(data)
    }
    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put(key, data).await
    }
    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.inner.put_parts(key, parts).await
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

fn store() -> Checksummed<Counting> {
    let counting = Counting {
        inner: Backend::memory(),
        gets: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    };
    Checksummed::new(counting, Arc::new(ObjectStats::default()))
}

fn payload(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i.to_le_bytes()[0] ^ i.to_le_bytes()[1]).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

const SIZES: [usize; 8] = [
    0,
    1,
    SEGMENT - 1,
    SEGMENT,
    SEGMENT + 1,
    3 * SEGMENT,
    3 * SEGMENT + 7,
    (4 << 20) + 5,
];

#[tokio::test]
async fn whole_and_ranged_reads_give_the_payload() {
    let s = store();
    for (n, len) in SIZES.into_iter().enumerate() {
        let key = format!("chunks/0/0/{n}_0_{len}");
        let data = payload(len, n.to_le_bytes()[0]);
        s.put(&key, data.clone()).await.unwrap();
        assert_eq!(s.get(&key, None).await.unwrap(), data, "whole {len}");
        let stored = s.inner.inner.head(&key).await.unwrap().size;
        assert_eq!(stored, stored_size(to_u64(len)), "stored size of {len}");
        assert_eq!(payload_size(stored), to_u64(len));
        let len64 = to_u64(len);
        let probes = [
            (0, 1),
            (0, len64),
            (len64 / 2, len64 / 2 + 4096),
            (SEGMENT_U64 - 3, SEGMENT_U64 + 3),
            (len64.saturating_sub(10), len64 + 100),
            (len64 + 5, len64 + 9),
        ];
        for (a, b) in probes {
            let want = slice_range(data.clone(), Some(a..b));
            let got = s.get(&key, Some(a..b)).await.unwrap();
            assert_eq!(got, want, "range {a}..{b} of {len}");
        }
    }
}

#[tokio::test]
async fn a_ranged_read_fetches_only_its_segments_in_one_request() {
    let s = store();
    let data = payload(4 << 20, 3);
    s.put("blk", data.clone()).await.unwrap();
    let before = (
        s.inner.gets.load(Ordering::Relaxed),
        s.inner.bytes.load(Ordering::Relaxed),
    );
    let at = 1_000_000;
    let got = s.get("blk", Some(at..at + 4096)).await.unwrap();
    assert_eq!(&got[..], &data[1_000_000..1_004_096]);
    let gets = s.inner.gets.load(Ordering::Relaxed) - before.0;
    let bytes = s.inner.bytes.load(Ordering::Relaxed) - before.1;
    assert_eq!(gets, 1, "one request");
    assert!(bytes <= 2 * (SEGMENT_U64 + 8), "{bytes} bytes for 4 KiB");
}

#[tokio::test]
async fn any_damage_is_detected_by_the_reads_that_touch_it() {
    let s = store();
    let len = 3 * SEGMENT + 100;
    let data = payload(len, 9);
    s.put("k", data.clone()).await.unwrap();
    let stored = s.inner.inner.get("k", None).await.unwrap();
    let stride = SEGMENT + TRAILER;
    // A flipped bit in segment 1's data, its trailer, or the header.
    for at in [
        HEADER + stride + 5,
        HEADER + 2 * stride - 3,
        HEADER + 2 * stride - 7,
        6,
    ] {
        let mut bad = stored.to_vec();
        bad[at] ^= 0x10;
        s.inner.inner.put("k", Bytes::from(bad)).await.unwrap();
        assert!(s.get("k", None).await.is_err(), "whole read, flip at {at}");
        if at > HEADER {
            let seg1 = to_u64(SEGMENT) + 10..to_u64(SEGMENT) + 20;
            assert!(
                matches!(
                    s.get("k", Some(seg1)).await,
                    Err(ObjectError::Corrupt { .. })
                ),
                "ranged read of segment 1, flip at {at}"
            );
            assert_eq!(s.get("k", Some(0..10)).await.unwrap(), data.slice(0..10));
        }
    }
    // Cut at a segment border: reads past the cut fail instead of coming back short.
    s.inner
        .inner
        .put("k", stored.slice(..HEADER + 2 * stride))
        .await
        .unwrap();
    let past = to_u64(2 * SEGMENT) + 5..to_u64(2 * SEGMENT) + 50;
    assert!(
        s.get("k", Some(past)).await.is_err(),
        "truncated at a border"
    );
    let across = to_u64(SEGMENT)..to_u64(3 * SEGMENT);
    assert!(
        s.get("k", Some(across)).await.is_err(),
        "truncated in the range"
    );
    assert!(s.get("k", None).await.is_err());
    // A segment from another object (same place, other key) is not accepted.
    s.put("other", data.clone()).await.unwrap();
    let foreign = s.inner.inner.get("other", None).await.unwrap();
    let mut swapped = stored.to_vec();
    swapped[HEADER..HEADER + stride].copy_from_slice(&foreign[HEADER..HEADER + stride]);
    swapped[HEADER + stride..HEADER + 2 * stride].fill(0);
    let mut moved = stored.to_vec();
    moved.copy_within(HEADER + stride..HEADER + 2 * stride, HEADER);
    for (name, bytes) in [("swapped in", swapped), ("moved", moved)] {
        s.inner.inner.put("k", Bytes::from(bytes)).await.unwrap();
        assert!(s.get("k", Some(0..10)).await.is_err(), "{name}");
    }
}

#[tokio::test]
async fn previous_format_objects_still_read_whole_and_by_range() {
    let s = store();
    let data = payload(100_000, 5);
    let mut v1 = BytesMut::new();
    v1.put_slice(V1_MAGIC);
    v1.put_u32_le(crc32c::crc32c(&data));
    v1.put_u32_le(100_000);
    v1.put_slice(&data);
    s.inner.inner.put("old", v1.freeze()).await.unwrap();
    assert_eq!(s.get("old", None).await.unwrap(), data);
    let gets = s.inner.gets.load(Ordering::Relaxed);
    assert_eq!(
        s.get("old", Some(40_000..40_010)).await.unwrap(),
        data.slice(40_000..40_010)
    );
    assert_eq!(
        s.inner.gets.load(Ordering::Relaxed) - gets,
        2,
        "tried by range, then whole"
    );
    let gets = s.inner.gets.load(Ordering::Relaxed);
    assert_eq!(s.get("old", Some(7..9)).await.unwrap(), data.slice(7..9));
    assert_eq!(
        s.inner.gets.load(Ordering::Relaxed) - gets,
        1,
        "remembered: whole at once"
    );
    assert_eq!(stored_size_v1(100_000), 100_012);
}

#[test]
fn segment_checksums_cover_key_index_and_place() {
    let data = payload(5000, 1);
    let mut place = [0u8; 5];
    place[..4].copy_from_slice(&7u32.to_le_bytes());
    place[4] = 1;
    let mut prefixed = b"key".to_vec();
    prefixed.extend_from_slice(&place);
    prefixed.extend_from_slice(&data);
    let direct = crc32c::crc32c(&prefixed);
    assert_eq!(segment_crc("key", 7, true, &data), direct);
}

#[test]
fn whole_objects_open_in_their_own_buffer_or_a_copy() {
    for len in [0, 1, SEGMENT, SEGMENT + 1, 5 * SEGMENT - 3] {
        let data = payload(len, 9);
        let stored = crate::concat(frame("k", &data).unwrap());
        // Held elsewhere too: copied out.
        assert_eq!(open("k", stored.clone()).unwrap(), data, "len {len}");
        // Held only here: moved together in place.
        let unique = Bytes::from(stored.to_vec());
        assert_eq!(open("k", unique).unwrap(), data, "len {len}");
        assert!(open("other-key", stored).is_err(), "bound to its key");
    }
}
