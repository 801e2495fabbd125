//! Per-object integrity, verified in pieces (FORMAT.md, "object v2"). An object is stored
//! as a 16-byte header (`STB2`, payload length, segment size, CRC32C of the header) and
//! the payload cut into segments of [`SEGMENT`] bytes, each followed by an 8-byte trailer:
//! a CRC32C of the segment bound to the object's key, the segment's index and whether it
//! is the last, and the tag `SEG2`. A ranged read fetches only the segments it needs, in
//! one request, and verifies each; a whole read verifies them all. Wrong bytes — flipped
//! bits, a truncated object, a segment from another object or place — fail with
//! `Corrupt` and are counted; they are never returned.
//!
//! Objects of the previous format (object v1: `STB1`, one CRC32C over the whole payload)
//! stay readable: a ranged read of one is recognised by its missing segment tag and served
//! by a whole read (remembered, so later ranged reads of it go straight there).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::Mutex;

use crate::metered::ObjectStats;
use crate::{ObjectError, ObjectInfo, ObjectStore, Result, corrupt, slice_range};

/// Payload bytes per segment: the unit a ranged read fetches and verifies.
pub const SEGMENT: usize = 32 << 10;
const SEGMENT_U64: u64 = 32 << 10;
/// Bytes after each segment: CRC32C and tag.
const TRAILER: usize = 8;
/// Bytes of the object header.
const HEADER: usize = 16;
const MAGIC: &[u8; 4] = b"STB2";
/// Trailer tags: more segments follow, or this is the object's last one.
const TAG_MORE: &[u8; 4] = b"SEG2";
const TAG_LAST: &[u8; 4] = b"END2";
/// The previous format's header.
const V1_MAGIC: &[u8; 4] = b"STB1";
const V1_HEADER: usize = 12;
/// Keys of old-format objects remembered (ranged reads of them read whole at once).
const V1_KEYS_KEPT: usize = 4096;

/// Adds and verifies the integrity framing.
#[derive(Debug)]
pub struct Checksummed<S> {
    inner: S,
    stats: Arc<ObjectStats>,
    /// Keys found to hold old-format objects.
    v1_keys: Mutex<HashSet<String>>,
}

impl<S: ObjectStore> Checksummed<S> {
    pub fn new(inner: S, stats: Arc<ObjectStats>) -> Checksummed<S> {
        Checksummed {
            inner,
            stats,
            v1_keys: Mutex::default(),
        }
    }

    fn corrupt(&self, e: ObjectError) -> ObjectError {
        self.stats.record_corrupt();
        tracing::warn!("{e}");
        e
    }
}

/// Bytes stored for a payload of `payload` bytes (what a listing shows).
pub fn stored_size(payload: u64) -> u64 {
    let segments = payload.div_ceil(SEGMENT_U64);
    to_u64(HEADER) + payload + segments * to_u64(TRAILER)
}

/// Bytes an object of the previous format stored for `payload` bytes.
pub fn stored_size_v1(payload: u64) -> u64 {
    to_u64(V1_HEADER) + payload
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The checksum of segment `index` of the object at `key`: CRC32C of the key, the index
/// (u32 LE), a last-segment byte, then the data (one pass over the data).
fn segment_crc(key: &str, index: u32, last: bool, data: &[u8]) -> u32 {
    let mut place = [0u8; 5];
    place[..4].copy_from_slice(&index.to_le_bytes());
    place[4] = u8::from(last);
    let seed = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), &place);
    crc32c::crc32c_append(seed, data)
}

fn header(key: &str, payload_len: usize) -> Result<Bytes> {
    let len =
        u32::try_from(payload_len).map_err(|_| ObjectError::Other("object too large".into()))?;
    let mut out = BytesMut::with_capacity(HEADER);
    out.put_slice(MAGIC);
    out.put_u32_le(len);
    out.put_u32_le(u32::try_from(SEGMENT).unwrap_or(u32::MAX));
    let crc = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), &out);
    out.put_u32_le(crc);
    Ok(out.freeze())
}

/// The stored form of `payload` under `key`: the header, then each segment followed by
/// its trailer (parts that share the payload's memory).
pub fn frame(key: &str, payload: &Bytes) -> Result<Vec<Bytes>> {
    let segments = payload.len().div_ceil(SEGMENT);
    let mut trailers = BytesMut::with_capacity(segments * TRAILER);
    let mut parts = Vec::with_capacity(1 + 2 * segments);
    parts.push(header(key, payload.len())?);
    for i in 0..segments {
        let data = payload.slice(i * SEGMENT..payload.len().min((i + 1) * SEGMENT));
        let index = u32::try_from(i).map_err(|_| ObjectError::Other("object too large".into()))?;
        let last = i + 1 == segments;
        trailers.put_u32_le(segment_crc(key, index, last, &data));
        trailers.put_slice(if last { TAG_LAST } else { TAG_MORE });
        parts.push(data);
    }
    let trailers = trailers.freeze();
    let mut framed = Vec::with_capacity(parts.len() + segments);
    let mut rest = parts.into_iter();
    framed.extend(rest.next());
    for (i, data) in rest.enumerate() {
        framed.push(data);
        framed.push(trailers.slice(i * TRAILER..(i + 1) * TRAILER));
    }
    Ok(framed)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Verify a whole stored object (either format) and return its payload.
pub fn open(key: &str, stored: Bytes) -> Result<Bytes> {
    match stored.get(..4) {
        Some(m) if m == MAGIC => open_v2(key, stored),
        Some(m) if m == V1_MAGIC => open_v1(key, stored),
        _ => Err(corrupt(
            key,
            format!("no integrity header ({} bytes)", stored.len()),
        )),
    }
}

fn open_v2(key: &str, stored: Bytes) -> Result<Bytes> {
    if stored.len() < HEADER {
        return Err(corrupt(key, "header cut short"));
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), &stored[..12]);
    if crc != u32_at(&stored, 12) {
        return Err(corrupt(key, "header checksum mismatch"));
    }
    let len = usize::try_from(u32_at(&stored, 4)).unwrap_or(usize::MAX);
    if usize::try_from(u32_at(&stored, 8)).ok() != Some(SEGMENT) {
        return Err(corrupt(key, "unknown segment size"));
    }
    let expected = stored_size(to_u64(len));
    if to_u64(stored.len()) != expected {
        return Err(corrupt(
            key,
            format!("{} bytes stored, expected {expected}", stored.len()),
        ));
    }
    let segments = verified_segments(key, 0, &stored.slice(HEADER..), Some(len))?;
    if segments.len() <= 1 {
        return Ok(join(segments, len));
    }
    drop(segments);
    Ok(payload_in_place(stored, len))
}

/// The payload of a verified stored object with several segments: the segments moved
/// together over the header and trailers in the object's own buffer when nothing else
/// holds it (no second buffer), else copied out.
fn payload_in_place(stored: Bytes, len: usize) -> Bytes {
    // Where segment data lies in the stored bytes: (stored offset, payload offset, length).
    let pieces = (0..len.div_ceil(SEGMENT)).map(|i| {
        let at = i * SEGMENT;
        (
            HEADER + i * (SEGMENT + TRAILER),
            at,
            (len - at).min(SEGMENT),
        )
    });
    match stored.try_into_mut() {
        Ok(mut buf) => {
            for (from, at, n) in pieces {
                buf.copy_within(from..from + n, at);
            }
            buf.truncate(len);
            buf.freeze()
        }
        Err(stored) => {
            let mut out = BytesMut::with_capacity(len);
            for (from, _, n) in pieces {
                out.extend_from_slice(&stored[from..from + n]);
            }
            out.freeze()
        }
    }
}

fn open_v1(key: &str, stored: Bytes) -> Result<Bytes> {
    if stored.len() < V1_HEADER {
        return Err(corrupt(key, "header cut short"));
    }
    let crc = u32_at(&stored, 4);
    let len = usize::try_from(u32_at(&stored, 8)).unwrap_or(usize::MAX);
    let payload = stored.slice(V1_HEADER..);
    if payload.len() != len {
        return Err(corrupt(
            key,
            format!("{} bytes of payload, header says {len}", payload.len()),
        ));
    }
    let actual = crc32c::crc32c(&payload);
    if actual != crc {
        return Err(corrupt(
            key,
            format!("checksum {actual:08x}, header says {crc:08x}"),
        ));
    }
    Ok(payload)
}

/// What checking a run of segments found.
enum Run {
    /// The bytes are not in segment form: an object of the previous format.
    NotSegmented,
    /// The segments' payloads, and whether the object's last segment was among them.
    Verified(Vec<Bytes>, bool),
}

/// Check the segments in `bytes` (stored segments from index `first` on) and return their
/// payloads. `total`, when known, is the payload length (a whole read); else the last
/// segment is recognised by its checksum. Fails on anything damaged or cut short.
fn verified_segments(
    key: &str,
    first: u32,
    bytes: &Bytes,
    total: Option<usize>,
) -> Result<Vec<Bytes>> {
    match check_run(key, first, bytes, total)? {
        Run::Verified(segments, _) => Ok(segments),
        Run::NotSegmented => Err(corrupt(key, "segment tag missing")),
    }
}

fn check_run(key: &str, first: u32, bytes: &Bytes, total: Option<usize>) -> Result<Run> {
    let mut segments = Vec::new();
    let mut pos = 0;
    let mut index = first;
    while pos < bytes.len() {
        let rest = bytes.len() - pos;
        if rest <= TRAILER {
            return Err(corrupt(key, format!("segment {index} cut short")));
        }
        let data_len = (rest - TRAILER).min(SEGMENT);
        let data = bytes.slice(pos..pos + data_len);
        let trailer = &bytes[pos + data_len..pos + data_len + TRAILER];
        let last = match &trailer[4..] {
            t if t == TAG_LAST => true,
            t if t == TAG_MORE => false,
            _ if segments.is_empty() && total.is_none() => return Ok(Run::NotSegmented),
            _ => return Err(corrupt(key, format!("segment {index}: tag missing"))),
        };
        // The tag is covered by the checksum; the length must agree with it.
        let ends_here = match total {
            Some(len) => u64::from(index) * SEGMENT_U64 + to_u64(data_len) == to_u64(len),
            None => data_len < SEGMENT,
        };
        if segment_crc(key, index, last, &data) != u32_at(trailer, 0) {
            return Err(corrupt(key, format!("segment {index}: checksum mismatch")));
        }
        if (ends_here && !last) || (total.is_some() && last && !ends_here) {
            return Err(corrupt(key, format!("segment {index}: cut short")));
        }
        segments.push(data);
        pos += data_len + TRAILER;
        index = index.saturating_add(1);
        if last {
            if pos != bytes.len() {
                return Err(corrupt(key, "bytes after the last segment"));
            }
            return Ok(Run::Verified(segments, true));
        }
    }
    if total.is_some() && !segments.is_empty() {
        return Err(corrupt(key, "last segment missing"));
    }
    Ok(Run::Verified(segments, total == Some(0)))
}

/// The payloads of consecutive segments as one buffer (no copy for one segment).
fn join(segments: Vec<Bytes>, len: usize) -> Bytes {
    if segments.len() == 1 {
        return segments.into_iter().next().unwrap_or_default();
    }
    let mut out = BytesMut::with_capacity(len);
    for s in segments {
        out.extend_from_slice(&s);
    }
    out.freeze()
}

impl<S: ObjectStore> Checksummed<S> {
    /// Bytes `range` of the payload at `key`, fetching and verifying only the segments
    /// that hold them; `None` when the object is of the previous format.
    async fn get_segments(&self, key: &str, range: &Range<u64>) -> Result<Option<Bytes>> {
        let first = range.start / SEGMENT_U64;
        let last = (range.end - 1) / SEGMENT_U64;
        let stride = SEGMENT_U64 + to_u64(TRAILER);
        let stored_range = to_u64(HEADER) + first * stride..to_u64(HEADER) + (last + 1) * stride;
        let wanted = stored_range.end - stored_range.start;
        let bytes = self.inner.get(key, Some(stored_range)).await?;
        let first_index = u32::try_from(first).map_err(|_| corrupt(key, "offset too large"))?;
        let (segments, ended) = match check_run(key, first_index, &bytes, None) {
            Ok(Run::Verified(segments, ended)) => (segments, ended),
            Ok(Run::NotSegmented) => return Ok(None),
            Err(e) => return Err(self.corrupt(e)),
        };
        // Fewer bytes than asked for are fine only where the object ends: its last
        // segment came, or the range starts at or past the end of the payload.
        if to_u64(bytes.len()) < wanted && !ended {
            let past_the_end = segments.is_empty() && self.payload_len(key).await? <= range.start;
            if !past_the_end {
                return Err(self.corrupt(corrupt(key, "object cut short")));
            }
        }
        let got: usize = segments.iter().map(Bytes::len).sum();
        let payload = join(segments, got);
        let start = range.start - first * SEGMENT_U64;
        Ok(Some(slice_range(
            payload,
            Some(start..range.end - first * SEGMENT_U64),
        )))
    }

    /// The payload length the object's header gives (one small read).
    async fn payload_len(&self, key: &str) -> Result<u64> {
        let head = self.inner.get(key, Some(0..to_u64(HEADER))).await?;
        match head.get(..4) {
            Some(m) if m == MAGIC && head.len() == HEADER => {
                let crc = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), &head[..12]);
                if crc != u32_at(&head, 12) {
                    return Err(self.corrupt(corrupt(key, "header checksum mismatch")));
                }
                Ok(u64::from(u32_at(&head, 4)))
            }
            _ => Err(self.corrupt(corrupt(key, "no integrity header"))),
        }
    }

    async fn get_whole(&self, key: &str) -> Result<Bytes> {
        let stored = self.inner.get(key, None).await?;
        open(key, stored).map_err(|e| self.corrupt(e))
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Checksummed<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let Some(range) = range else {
            return self.get_whole(key).await;
        };
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        if !self.v1_keys.lock().contains(key)
            && let Some(bytes) = self.get_segments(key, &range).await?
        {
            return Ok(bytes);
        }
        let payload = self.get_whole(key).await?;
        let mut v1 = self.v1_keys.lock();
        if v1.len() >= V1_KEYS_KEPT {
            v1.clear();
        }
        v1.insert(key.to_string());
        drop(v1);
        Ok(slice_range(payload, Some(range)))
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put_parts(key, frame(key, &data)?).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.v1_keys.lock().remove(key);
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let mut info = self.inner.head(key).await?;
        info.size = payload_size(info.size);
        Ok(info)
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let mut page = self.inner.list(prefix, start_after, limit).await?;
        for info in &mut page {
            info.size = payload_size(info.size);
        }
        Ok(page)
    }
}

/// The payload size of an object stored in `stored` bytes (the current format's).
fn payload_size(stored: u64) -> u64 {
    let body = stored.saturating_sub(to_u64(HEADER));
    let stride = SEGMENT_U64 + to_u64(TRAILER);
    let full = body / stride;
    let tail = (body % stride).saturating_sub(to_u64(TRAILER));
    full * SEGMENT_U64 + tail
}

#[cfg(test)]
mod tests;
