//! Objects of an encrypted volume (FORMAT.md, "object v3"): the integrity framing of
//! [`crate::checksum`] with every segment sealed instead of checksummed. An object is the
//! magic `STS3`, a sealed 12-byte header (payload length, segment size) and the payload cut
//! into segments of one [`Unit`] (32 KiB, or 16 KiB on volumes encrypted since session 40),
//! each sealed with a key derived from the volume's data key and the object's key (see
//! [`crate::seal`]). Segment `i` sits at a fixed offset, so a ranged read fetches only the
//! segments it needs, in one request, and opens each; a whole read opens them all.
//! Anything tampered, cut, moved or sealed under another key fails with `Corrupt`
//! (counted, logged with the object's name) and is never returned.
//! An encrypted volume reads nothing but sealed objects: a plain object put in the bucket
//! by someone else is corrupt, not data.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};

pub use crate::checksum::SEGMENT;
use crate::metered::ObjectStats;
use crate::seal::{Domain, KeyRing, Keys, OpenFailure, SEALED_TRAILER};
use crate::{ObjectError, ObjectInfo, ObjectStore, Result, corrupt, slice_range};

const MAGIC: &[u8; 4] = b"STS3";
const HEADER_FIELDS: usize = 12;
/// Bytes before the first segment: magic, sealed header fields, their trailer.
pub const HEADER: usize = 4 + HEADER_FIELDS + SEALED_TRAILER;
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

/// Payload bytes per sealed segment of an object: fixed per volume (its encryption
/// record says which), so a ranged read knows where segments are without the header.
/// Smaller units make a small random read fetch and open less; larger ones cost less per
/// byte of a big read (one open's fixed cost per unit). Staged blocks use [`Unit::LARGE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit(usize);

impl Unit {
    /// 32 KiB: volumes encrypted before session 40, and staged blocks.
    pub const LARGE: Unit = Unit(SEGMENT);
    /// 16 KiB: volumes encrypted since session 40 (a 4 KiB read opens 16 KiB).
    pub const SMALL: Unit = Unit(SEGMENT / 2);

    /// The unit of `kib` KiB, when it is one of the two.
    pub fn of_kib(kib: u32) -> Option<Unit> {
        [Unit::LARGE, Unit::SMALL]
            .into_iter()
            .find(|u| u32::try_from(u.0 >> 10).ok() == Some(kib))
    }

    /// Payload bytes per segment.
    pub fn bytes(self) -> usize {
        self.0
    }

    /// Stored bytes from one segment to the next.
    pub fn stride(self) -> usize {
        self.0 + SEALED_TRAILER
    }

    /// Bytes stored for a payload of `payload` bytes.
    pub fn stored_size(self, payload: u64) -> u64 {
        let segments = payload.div_ceil(to_u64(self.0));
        to_u64(HEADER) + payload + segments * to_u64(SEALED_TRAILER)
    }

    /// The payload size of an object stored in `stored` bytes.
    pub fn payload_size(self, stored: u64) -> u64 {
        let body = stored.saturating_sub(to_u64(HEADER));
        let stride = to_u64(self.stride());
        let tail = (body % stride).saturating_sub(to_u64(SEALED_TRAILER));
        body / stride * to_u64(self.0) + tail
    }
}

impl Default for Unit {
    /// What an encryption record that names no unit means.
    fn default() -> Unit {
        Unit::LARGE
    }
}

fn index_of(key: &str, i: usize) -> Result<u32> {
    u32::try_from(i).map_err(|_| corrupt(key, "object too large"))
}

/// The stored form of `payload` under `key`, sealed with the ring's current key.
pub fn seal_object(ring: &KeyRing, unit: Unit, key: &str, payload: &[u8]) -> Result<Bytes> {
    seal_in(ring, Domain::Object, unit, key, payload)
}

/// `payload` sealed in this format for another use (`domain`): a staged block.
pub fn seal_in(
    ring: &KeyRing,
    domain: Domain,
    unit: Unit,
    key: &str,
    payload: &[u8],
) -> Result<Bytes> {
    let sealer = ring.sealer(domain, key)?;
    let len =
        u32::try_from(payload.len()).map_err(|_| ObjectError::Other("object too large".into()))?;
    let stored = unit.stored_size(to_u64(payload.len()));
    let mut out = BytesMut::with_capacity(usize::try_from(stored).unwrap_or(0));
    out.put_slice(MAGIC);
    let mut fields = [0u8; HEADER_FIELDS];
    fields[..4].copy_from_slice(&len.to_le_bytes());
    fields[4..8].copy_from_slice(&index_of(key, unit.0)?.to_le_bytes());
    let trailer = sealer.seal(HEADER_INDEX, TAG_HEADER, &mut fields)?;
    out.put_slice(&fields);
    out.put_slice(&trailer);
    let step = unit.0;
    let segments = payload.len().div_ceil(step);
    for i in 0..segments {
        let data = &payload[i * step..payload.len().min((i + 1) * step)];
        let tag = if i + 1 == segments {
            TAG_LAST
        } else {
            TAG_MORE
        };
        let start = out.len();
        out.put_slice(data);
        let trailer = sealer.seal(index_of(key, i)?, tag, &mut out[start..])?;
        out.put_slice(&trailer);
    }
    Ok(out.freeze())
}

fn failure(key: &str, what: &str, f: OpenFailure) -> ObjectError {
    match f {
        OpenFailure::NoKey(id) => {
            ObjectError::NoKey(format!("{key} ({what}) is sealed with data key {id}"))
        }
        other => corrupt(key, format!("{what}: {other}")),
    }
}

/// The payload length from the first [`HEADER`] stored bytes (segments of `unit`).
fn open_header(
    ring: &KeyRing,
    domain: Domain,
    unit: Unit,
    key: &str,
    stored: &[u8],
) -> Result<u64> {
    if stored.get(..4) != Some(&MAGIC[..]) {
        return Err(corrupt(key, "not a sealed object (no STS3 header)"));
    }
    let sealed = stored
        .get(4..HEADER)
        .ok_or_else(|| corrupt(key, "header cut short"))?;
    let mut opener = ring.opener(domain, key);
    let mut fields = [0u8; HEADER_FIELDS];
    opener
        .open_into(HEADER_INDEX, sealed, &[TAG_HEADER], &mut fields)
        .map_err(|f| failure(key, "header", f))?;
    let segment = u32::from_le_bytes([fields[4], fields[5], fields[6], fields[7]]);
    if usize::try_from(segment).ok() != Some(unit.0) {
        return Err(corrupt(
            key,
            format!("segments of {segment} bytes, the volume's are {}", unit.0),
        ));
    }
    Ok(u64::from(u32::from_le_bytes([
        fields[0], fields[1], fields[2], fields[3],
    ])))
}

/// The bytes of `stored` to decrypt in place: its own buffer when nothing else holds
/// it, else a copy.
fn writable(stored: Bytes) -> BytesMut {
    stored
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]))
}

/// A whole payload sealed by [`seal_in`] for `domain`, opened (in the stored bytes' own
/// buffer when it can be).
pub fn open_in(
    ring: &KeyRing,
    domain: Domain,
    unit: Unit,
    key: &str,
    stored: Bytes,
) -> Result<Bytes> {
    let len = open_header(ring, domain, unit, key, &stored)?;
    let expected = unit.stored_size(len);
    if to_u64(stored.len()) != expected {
        return Err(corrupt(
            key,
            format!("{} bytes stored, expected {expected}", stored.len()),
        ));
    }
    let len = usize::try_from(len).map_err(|_| corrupt(key, "too large"))?;
    let mut buf = writable(stored);
    let place = (ring, domain, unit, key);
    let (written, ended) = open_run(place, 0, &mut buf, HEADER)?;
    if written != len || (len > 0 && !ended) {
        return Err(corrupt(key, "last segment missing"));
    }
    buf.truncate(len);
    Ok(buf.freeze())
}

/// Open the stored segments in `buf[from..]` (from index `first`), each in place, and
/// move their payloads to the front of `buf`; the payload bytes and whether the object's
/// last segment was among them. A segment tagged last must be the run's final one, and
/// only the last may be shorter than the unit.
fn open_run(
    (ring, domain, unit, key): (&KeyRing, Domain, Unit, &str),
    first: u32,
    buf: &mut [u8],
    from: usize,
) -> Result<(usize, bool)> {
    let mut opener = ring.opener(domain, key);
    let mut written = 0;
    let mut at = from;
    let mut n = 0usize;
    let stride = unit.stride();
    while at < buf.len() {
        let end = (at + stride).min(buf.len());
        let index = first
            .checked_add(index_of(key, n)?)
            .ok_or_else(|| corrupt(key, "offset too large"))?;
        let tag = opener
            .open_in_place(index, &mut buf[at..end], &[TAG_MORE, TAG_LAST])
            .map_err(|f| failure(key, &format!("segment {index}"), f))?;
        let last = tag == *TAG_LAST;
        if (last && end != buf.len()) || (!last && end - at < stride) {
            return Err(corrupt(key, format!("segment {index}: cut short")));
        }
        let plain = end - at - SEALED_TRAILER;
        if at != written {
            // The run's first segment is already in place (a lone segment's read: no copy).
            buf.copy_within(at..at + plain, written);
        }
        written += plain;
        at = end;
        n += 1;
        if last {
            return Ok((written, true));
        }
    }
    Ok((written, false))
}

/// The data key id the first sealed piece of `stored` names (from `at`, `len` bytes).
fn first_key_id(stored: &[u8], at: usize, len: usize) -> Option<u32> {
    crate::seal::key_id_of(stored.get(at..(at + len).min(stored.len()))?)
}

/// Seals what is put and opens what is read.
#[derive(Debug)]
pub struct Sealed<S> {
    inner: S,
    keys: Arc<Keys>,
    unit: Unit,
    stats: Arc<ObjectStats>,
}

impl<S: ObjectStore> Sealed<S> {
    pub fn new(inner: S, keys: Arc<Keys>, unit: Unit, stats: Arc<ObjectStats>) -> Sealed<S> {
        Sealed {
            inner,
            keys,
            unit,
            stats,
        }
    }

    fn corrupt(&self, e: ObjectError) -> ObjectError {
        self.stats.record_corrupt();
        tracing::warn!("{e}");
        e
    }

    /// The client's keys, holding data key `id` when the volume has it: a key added by a
    /// rotation since this client started is fetched once.
    async fn ring_with(&self, key: &str, id: Option<u32>) -> Result<Arc<KeyRing>> {
        let ring = self.keys.ring();
        let Some(id) = id.filter(|id| ring.get(*id).is_none()) else {
            return Ok(ring);
        };
        if self.keys.reload_for(id).await? {
            return Ok(self.keys.ring());
        }
        Err(ObjectError::NoKey(format!(
            "object {key} is sealed with data key {id}, which the volume's settings do not hold"
        )))
    }

    /// Count and log a corrupt object; other errors pass.
    fn checked<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| match e {
            ObjectError::Corrupt { .. } => self.corrupt(e),
            other => other,
        })
    }

    async fn get_whole(&self, key: &str) -> Result<Bytes> {
        let stored = self.inner.get(key, None).await?;
        let ring = self
            .ring_with(key, first_key_id(&stored, 4, HEADER - 4))
            .await?;
        let unit = self.unit;
        if stored.len() < OFFLOAD_BYTES {
            return self.checked(open_in(&ring, Domain::Object, unit, key, stored));
        }
        let owned = key.to_string();
        let opened = tokio::task::spawn_blocking(move || {
            open_in(&ring, Domain::Object, unit, &owned, stored)
        })
        .await
        .map_err(|e| ObjectError::Other(format!("opening {key}: {e}")))?;
        self.checked(opened)
    }

    async fn get_segments(&self, key: &str, range: &Range<u64>) -> Result<Bytes> {
        let segment = to_u64(self.unit.0);
        let first = range.start / segment;
        let last = (range.end - 1) / segment;
        let stride = to_u64(self.unit.stride());
        let stored_range = to_u64(HEADER) + first * stride..to_u64(HEADER) + (last + 1) * stride;
        let wanted = stored_range.end - stored_range.start;
        let bytes = self.inner.get(key, Some(stored_range)).await?;
        let fetched = to_u64(bytes.len());
        let first_index = u32::try_from(first).map_err(|_| corrupt(key, "offset too large"))?;
        let ring = self
            .ring_with(key, first_key_id(&bytes, 0, self.unit.stride()))
            .await?;
        let mut buf = writable(bytes);
        let place = (&*ring, Domain::Object, self.unit, key);
        let (written, ended) = self.checked(open_run(place, first_index, &mut buf, 0))?;
        if fetched < wanted && !ended {
            // Fewer bytes than asked for are fine only past the object's end.
            let past_the_end = written == 0 && self.payload_len(key).await? <= range.start;
            if !past_the_end {
                return Err(self.corrupt(corrupt(key, "object cut short")));
            }
        }
        buf.truncate(written);
        let start = range.start - first * segment;
        Ok(slice_range(
            buf.freeze(),
            Some(start..range.end - first * segment),
        ))
    }

    async fn payload_len(&self, key: &str) -> Result<u64> {
        let head = self.inner.get(key, Some(0..to_u64(HEADER))).await?;
        let ring = self
            .ring_with(key, first_key_id(&head, 4, HEADER - 4))
            .await?;
        self.checked(open_header(&ring, Domain::Object, self.unit, key, &head))
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Sealed<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn range_unit(&self) -> usize {
        self.unit.0
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
        let unit = self.unit;
        let stored = if data.len() < OFFLOAD_BYTES {
            seal_object(&ring, unit, key, &data)?
        } else {
            let owned = key.to_string();
            tokio::task::spawn_blocking(move || seal_object(&ring, unit, &owned, &data))
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
        info.size = self.unit.payload_size(info.size);
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
            info.size = self.unit.payload_size(info.size);
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests;
