//! Per-object integrity: every object is stored as a 12-byte header (magic `STB1`, CRC32C
//! of the payload, payload length) followed by the payload, see FORMAT.md. A read whose
//! bytes do not match — flipped bits, a truncated or foreign object — fails with
//! `Corrupt` and is counted; wrong bytes are never returned. Range reads fetch the whole
//! object to verify it.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};

use crate::metered::ObjectStats;
use crate::{ObjectError, ObjectInfo, ObjectStore, Result, slice_range};

const MAGIC: &[u8; 4] = b"STB1";
/// Bytes of the integrity header.
pub const HEADER: usize = 12;

/// Adds and verifies the integrity header.
#[derive(Debug)]
pub struct Checksummed<S> {
    inner: S,
    stats: Arc<ObjectStats>,
}

impl<S: ObjectStore> Checksummed<S> {
    pub fn new(inner: S, stats: Arc<ObjectStats>) -> Checksummed<S> {
        Checksummed { inner, stats }
    }
}

/// The integrity header of `payload`.
pub fn header(payload: &[u8]) -> Result<Bytes> {
    let len =
        u32::try_from(payload.len()).map_err(|_| ObjectError::Other("object too large".into()))?;
    let mut out = BytesMut::with_capacity(HEADER);
    out.put_slice(MAGIC);
    out.put_u32_le(crc32c::crc32c(payload));
    out.put_u32_le(len);
    Ok(out.freeze())
}

/// Frame `payload` with its integrity header (one buffer).
pub fn seal(payload: &[u8]) -> Result<Bytes> {
    let mut out = BytesMut::with_capacity(HEADER + payload.len());
    out.put_slice(&header(payload)?);
    out.put_slice(payload);
    Ok(out.freeze())
}

/// Verify a framed object and return its payload.
pub fn open(key: &str, framed: Bytes) -> Result<Bytes> {
    let corrupt = |reason: String| ObjectError::Corrupt {
        key: key.into(),
        reason,
    };
    if framed.len() < HEADER || &framed[..4] != MAGIC {
        return Err(corrupt(format!(
            "no integrity header ({} bytes)",
            framed.len()
        )));
    }
    let crc = u32::from_le_bytes([framed[4], framed[5], framed[6], framed[7]]);
    let len = u32::from_le_bytes([framed[8], framed[9], framed[10], framed[11]]) as usize;
    let payload = framed.slice(HEADER..);
    if payload.len() != len {
        return Err(corrupt(format!(
            "{} bytes of payload, header says {len}",
            payload.len()
        )));
    }
    let actual = crc32c::crc32c(&payload);
    if actual != crc {
        return Err(corrupt(format!(
            "checksum {actual:08x}, header says {crc:08x}"
        )));
    }
    Ok(payload)
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Checksummed<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let framed = self.inner.get(key, None).await?;
        match open(key, framed) {
            Ok(payload) => Ok(slice_range(payload, range)),
            Err(e) => {
                self.stats.record_corrupt();
                tracing::warn!("{e}");
                Err(e)
            }
        }
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let header = header(&data)?;
        self.inner.put_parts(key, vec![header, data]).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let mut info = self.inner.head(key).await?;
        info.size = info.size.saturating_sub(HEADER as u64);
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
            info.size = info.size.saturating_sub(HEADER as u64);
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_damage_is_detected() {
        let framed = seal(b"hello world").unwrap();
        assert_eq!(
            open("k", framed.clone()).unwrap(),
            Bytes::from_static(b"hello world")
        );
        for i in 0..framed.len() {
            let mut bad = framed.to_vec();
            bad[i] ^= 0x40;
            assert!(
                open("k", Bytes::from(bad)).is_err(),
                "flip at byte {i} detected"
            );
        }
        for cut in 0..framed.len() {
            assert!(
                open("k", framed.slice(..cut)).is_err(),
                "truncation to {cut} detected"
            );
        }
        let mut longer = framed.to_vec();
        longer.push(0);
        assert!(
            open("k", Bytes::from(longer)).is_err(),
            "extra bytes detected"
        );
    }
}
