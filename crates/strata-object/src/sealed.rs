//! Objects of an encrypted volume (FORMAT.md, "object v3"): the integrity framing of
//! [`crate::checksum`] with every segment sealed instead of checksummed. An object is the
//! magic `STS3`, a sealed 12-byte header (payload length, segment size) and the payload cut
//! into segments of [`SEGMENT`] bytes, each sealed with a key derived from the volume's data
//! key and the object's key (see [`crate::seal`]). Segment `i` sits at a fixed offset, so
//! a ranged read fetches only the segments it needs, in one request, and opens each; a
//! whole read opens them all. Anything tampered, cut, moved or sealed under another key
//! fails with `Corrupt` (counted, logged with the object's name) and is never returned.
//! An encrypted volume reads nothing but sealed objects: a plain object put in the bucket
//! by someone else is corrupt, not data.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};

pub use crate::checksum::SEGMENT;
use crate::metered::ObjectStats;
use crate::seal::{Domain, KeyRing, Keys, OpenFailure, SEALED_TRAILER};
use crate::{ObjectError, ObjectInfo, ObjectStore, Result, slice_range};

const MAGIC: &[u8; 4] = b"STS3";
const HEADER_FIELDS: usize = 12;
/// Bytes before the first segment: magic, sealed header fields, their trailer.
pub const HEADER: usize = 4 + HEADER_FIELDS + SEALED_TRAILER;
/// Stored bytes from one segment to the next.
pub const STRIDE: usize = SEGMENT + SEALED_TRAILER;
const TAG_HEADER: &[u8; 4] = b"HDR3";
const TAG_MORE: &[u8; 4] = b"SEG3";
const TAG_LAST: &[u8; 4] = b"END3";
/// The index the header is sealed under (no segment has it).
const HEADER_INDEX: u32 = u32::MAX;
/// Whole objects at least this big are sealed and opened on the blocking pool.
const OFFLOAD_BYTES: usize = 256 << 10;

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Bytes stored for a payload of `payload` bytes.
pub fn stored_size(payload: u64) -> u64 {
    let segments = payload.div_ceil(to_u64(SEGMENT));
    to_u64(HEADER) + payload + segments * to_u64(SEALED_TRAILER)
}

/// The payload size of an object stored in `stored` bytes.
pub fn payload_size(stored: u64) -> u64 {
    let body = stored.saturating_sub(to_u64(HEADER));
    let stride = to_u64(STRIDE);
    let tail = (body % stride).saturating_sub(to_u64(SEALED_TRAILER));
    body / stride * to_u64(SEGMENT) + tail
}

fn corrupt(key: &str, reason: impl Into<String>) -> ObjectError {
    ObjectError::Corrupt {
        key: key.into(),
        reason: reason.into(),
    }
}

fn index_of(key: &str, i: usize) -> Result<u32> {
    u32::try_from(i).map_err(|_| corrupt(key, "object too large"))
}

/// The stored form of `payload` under `key`, sealed with the ring's current key.
pub fn seal_object(ring: &KeyRing, key: &str, payload: &[u8]) -> Result<Bytes> {
    seal_in(ring, Domain::Object, key, payload)
}

/// `payload` sealed in this format for another use (`domain`): a staged block.
pub fn seal_in(ring: &KeyRing, domain: Domain, key: &str, payload: &[u8]) -> Result<Bytes> {
    let sealer = ring.sealer(domain, key)?;
    let len =
        u32::try_from(payload.len()).map_err(|_| ObjectError::Other("object too large".into()))?;
    let mut out =
        BytesMut::with_capacity(usize::try_from(stored_size(to_u64(payload.len()))).unwrap_or(0));
    out.put_slice(MAGIC);
    let mut fields = [0u8; HEADER_FIELDS];
    fields[..4].copy_from_slice(&len.to_le_bytes());
    fields[4..8].copy_from_slice(&index_of(key, SEGMENT)?.to_le_bytes());
    let trailer = sealer.seal(key, HEADER_INDEX, TAG_HEADER, &mut fields)?;
    out.put_slice(&fields);
    out.put_slice(&trailer);
    let segments = payload.len().div_ceil(SEGMENT);
    for i in 0..segments {
        let data = &payload[i * SEGMENT..payload.len().min((i + 1) * SEGMENT)];
        let tag = if i + 1 == segments {
            TAG_LAST
        } else {
            TAG_MORE
        };
        let start = out.len();
        out.put_slice(data);
        let trailer = sealer.seal(key, index_of(key, i)?, tag, &mut out[start..])?;
        out.put_slice(&trailer);
    }
    Ok(out.freeze())
}

/// What opening failed on: a key this client lacks (worth reloading the keys), or bytes
/// that are not what was sealed.
enum Failed {
    NoKey(u32),
    Corrupt(ObjectError),
}

impl Failed {
    fn at(key: &str, what: &str, f: OpenFailure) -> Failed {
        match f {
            OpenFailure::NoKey(id) => Failed::NoKey(id),
            other => Failed::Corrupt(corrupt(key, format!("{what}: {other}"))),
        }
    }
}

/// The payload length and segment size from the first [`HEADER`] stored bytes.
fn open_header(ring: &KeyRing, domain: Domain, key: &str, stored: &[u8]) -> Result<u64, Failed> {
    if stored.get(..4) != Some(&MAGIC[..]) {
        return Err(Failed::Corrupt(corrupt(
            key,
            "not a sealed object (no STS3 header)",
        )));
    }
    let sealed = stored
        .get(4..HEADER)
        .ok_or_else(|| Failed::Corrupt(corrupt(key, "header cut short")))?;
    let mut opener = ring.opener(domain, key);
    let mut fields = [0u8; HEADER_FIELDS];
    opener
        .open_into(HEADER_INDEX, sealed, &[TAG_HEADER], &mut fields)
        .map_err(|f| Failed::at(key, "header", f))?;
    let segment = u32::from_le_bytes([fields[4], fields[5], fields[6], fields[7]]);
    if usize::try_from(segment).ok() != Some(SEGMENT) {
        return Err(Failed::Corrupt(corrupt(key, "unknown segment size")));
    }
    Ok(u64::from(u32::from_le_bytes([
        fields[0], fields[1], fields[2], fields[3],
    ])))
}

/// Open a whole stored object and return its payload.
fn open_object(ring: &KeyRing, key: &str, stored: &[u8]) -> Result<Bytes, Failed> {
    open_whole(ring, Domain::Object, key, stored)
}

/// A whole payload sealed by [`seal_in`] for `domain`, opened.
pub fn open_in(ring: &KeyRing, domain: Domain, key: &str, stored: &[u8]) -> Result<Bytes> {
    open_whole(ring, domain, key, stored).map_err(|f| match f {
        Failed::NoKey(id) => ObjectError::NoKey(format!("{key} is sealed with data key {id}")),
        Failed::Corrupt(e) => e,
    })
}

fn open_whole(ring: &KeyRing, domain: Domain, key: &str, stored: &[u8]) -> Result<Bytes, Failed> {
    let len = open_header(ring, domain, key, stored)?;
    if to_u64(stored.len()) != stored_size(len) {
        return Err(Failed::Corrupt(corrupt(
            key,
            format!(
                "{} bytes stored, expected {}",
                stored.len(),
                stored_size(len)
            ),
        )));
    }
    let len = usize::try_from(len).map_err(|_| Failed::Corrupt(corrupt(key, "too large")))?;
    let mut out = BytesMut::zeroed(len);
    let (tags, _) = open_run(ring, domain, key, 0, &stored[HEADER..], &mut out)?;
    if len > 0 && tags.last() != Some(&TAG_LAST) {
        return Err(Failed::Corrupt(corrupt(key, "last segment missing")));
    }
    Ok(out.freeze())
}

/// Open the stored segments in `run` (from index `first`) into `out`; the tags seen and
/// the payload bytes written. A segment tagged last must be the run's final one, and only
/// the last may be shorter than [`SEGMENT`].
fn open_run(
    ring: &KeyRing,
    domain: Domain,
    key: &str,
    first: u32,
    run: &[u8],
    out: &mut [u8],
) -> Result<(Vec<&'static [u8; 4]>, usize), Failed> {
    let mut opener = ring.opener(domain, key);
    let mut tags = Vec::new();
    let mut written = 0;
    for (n, sealed) in run.chunks(STRIDE).enumerate() {
        let index = first
            .checked_add(index_of(key, n).map_err(Failed::Corrupt)?)
            .ok_or_else(|| Failed::Corrupt(corrupt(key, "offset too large")))?;
        let plain = sealed.len().saturating_sub(SEALED_TRAILER);
        let target = out
            .get_mut(written..written + plain)
            .ok_or_else(|| Failed::Corrupt(corrupt(key, "more bytes than expected")))?;
        let tag = opener
            .open_into(index, sealed, &[TAG_MORE, TAG_LAST], target)
            .map_err(|f| Failed::at(key, &format!("segment {index}"), f))?;
        let last = tag == *TAG_LAST;
        let final_chunk = (n + 1) * STRIDE >= run.len();
        if (last && !final_chunk) || (!last && sealed.len() < STRIDE) {
            return Err(Failed::Corrupt(corrupt(
                key,
                format!("segment {index}: cut short"),
            )));
        }
        tags.push(if last { TAG_LAST } else { TAG_MORE });
        written += plain;
    }
    Ok((tags, written))
}

/// Seals what is put and opens what is read.
#[derive(Debug)]
pub struct Sealed<S> {
    inner: S,
    keys: Arc<Keys>,
    stats: Arc<ObjectStats>,
}

impl<S: ObjectStore> Sealed<S> {
    pub fn new(inner: S, keys: Arc<Keys>, stats: Arc<ObjectStats>) -> Sealed<S> {
        Sealed { inner, keys, stats }
    }

    fn corrupt(&self, e: ObjectError) -> ObjectError {
        self.stats.record_corrupt();
        tracing::warn!("{e}");
        e
    }

    /// Run `open` with the client's keys; when the bytes name a key it lacks, fetch the
    /// volume's keys again (a rotation since it started) and try once more.
    async fn with_keys<T>(
        &self,
        key: &str,
        open: impl Fn(&KeyRing) -> Result<T, Failed>,
    ) -> Result<T> {
        let missing = match open(&self.keys.ring()) {
            Ok(v) => return Ok(v),
            Err(Failed::Corrupt(e)) => return Err(self.corrupt(e)),
            Err(Failed::NoKey(id)) => id,
        };
        if self.keys.reload_for(missing).await? {
            match open(&self.keys.ring()) {
                Ok(v) => return Ok(v),
                Err(Failed::Corrupt(e)) => return Err(self.corrupt(e)),
                Err(Failed::NoKey(_)) => {}
            }
        }
        Err(ObjectError::NoKey(format!(
            "object {key} is sealed with data key {missing}, which the volume's settings do not hold"
        )))
    }

    async fn get_whole(&self, key: &str) -> Result<Bytes> {
        let stored = self.inner.get(key, None).await?;
        if stored.len() < OFFLOAD_BYTES {
            return self
                .with_keys(key, |ring| open_object(ring, key, &stored))
                .await;
        }
        let ring = self.keys.ring();
        let owned = key.to_string();
        let (opened, stored) = tokio::task::spawn_blocking(move || {
            let opened = open_object(&ring, &owned, &stored);
            (opened, stored)
        })
        .await
        .map_err(|e| ObjectError::Other(format!("opening {key}: {e}")))?;
        match opened {
            Ok(payload) => Ok(payload),
            Err(Failed::Corrupt(e)) => Err(self.corrupt(e)),
            Err(Failed::NoKey(_)) => {
                self.with_keys(key, |ring| open_object(ring, key, &stored))
                    .await
            }
        }
    }

    async fn get_segments(&self, key: &str, range: &Range<u64>) -> Result<Bytes> {
        let segment = to_u64(SEGMENT);
        let first = range.start / segment;
        let last = (range.end - 1) / segment;
        let stride = to_u64(STRIDE);
        let stored_range = to_u64(HEADER) + first * stride..to_u64(HEADER) + (last + 1) * stride;
        let wanted = stored_range.end - stored_range.start;
        let bytes = self.inner.get(key, Some(stored_range)).await?;
        let first_index = u32::try_from(first).map_err(|_| corrupt(key, "offset too large"))?;
        let (payload, ended) = self
            .with_keys(key, |ring| {
                let mut out = vec![0u8; bytes.len()];
                let (tags, n) = open_run(ring, Domain::Object, key, first_index, &bytes, &mut out)?;
                out.truncate(n);
                Ok((out, tags.last() == Some(&TAG_LAST)))
            })
            .await?;
        if to_u64(bytes.len()) < wanted && !ended {
            // Fewer bytes than asked for are fine only past the object's end.
            let past_the_end = payload.is_empty() && self.payload_len(key).await? <= range.start;
            if !past_the_end {
                return Err(self.corrupt(corrupt(key, "object cut short")));
            }
        }
        let start = range.start - first * segment;
        Ok(slice_range(
            Bytes::from(payload),
            Some(start..range.end - first * segment),
        ))
    }

    async fn payload_len(&self, key: &str) -> Result<u64> {
        let head = self.inner.get(key, Some(0..to_u64(HEADER))).await?;
        self.with_keys(key, |ring| open_header(ring, Domain::Object, key, &head))
            .await
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Sealed<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        match range {
            None => self.get_whole(key).await,
            Some(r) if r.start >= r.end => Ok(Bytes::new()),
            Some(r) => self.get_segments(key, &r).await,
        }
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let ring = self.keys.ring();
        let stored = if data.len() < OFFLOAD_BYTES {
            seal_object(&ring, key, &data)?
        } else {
            let owned = key.to_string();
            tokio::task::spawn_blocking(move || seal_object(&ring, &owned, &data))
                .await
                .map_err(|e| ObjectError::Other(format!("sealing {key}: {e}")))??
        };
        self.inner.put(key, stored).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
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

#[cfg(test)]
mod tests;
