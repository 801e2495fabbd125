//! Compression of object contents: none, lz4 or zstd. A compressed object starts with a
//! one-byte codec tag and the uncompressed length (u32, little-endian), see FORMAT.md.
//! Range reads fetch and decompress the whole object, then return the range.

use std::ops::Range;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};

use crate::{ObjectError, ObjectInfo, ObjectStore, Result, slice_range};

/// A compression algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Lz4,
    Zstd,
}

impl Codec {
    /// Parse a `--compress` value; `none` gives `None`.
    pub fn parse(name: &str) -> Result<Option<Codec>> {
        match name {
            "none" | "" => Ok(None),
            "lz4" => Ok(Some(Codec::Lz4)),
            "zstd" => Ok(Some(Codec::Zstd)),
            other => Err(ObjectError::Other(format!(
                "unknown compression {other:?}: use none, lz4 or zstd"
            ))),
        }
    }

    fn tag(self) -> u8 {
        match self {
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
        }
    }
}

const HEADER: usize = 5;
/// zstd level: fast, most of the gain.
const ZSTD_LEVEL: i32 = 1;

/// Compresses on put, decompresses on get.
#[derive(Debug)]
pub struct Compressed<S> {
    inner: S,
    codec: Codec,
}

impl<S: ObjectStore> Compressed<S> {
    pub fn new(inner: S, codec: Codec) -> Compressed<S> {
        Compressed { inner, codec }
    }
}

/// Compress `data` into the framed form.
pub fn encode(codec: Codec, data: &[u8]) -> Result<Bytes> {
    let len =
        u32::try_from(data.len()).map_err(|_| ObjectError::Other("object too large".into()))?;
    let body = match codec {
        Codec::Lz4 => lz4_flex::block::compress(data),
        Codec::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL)
            .map_err(|e| ObjectError::Other(format!("zstd: {e}")))?,
    };
    let mut out = BytesMut::with_capacity(HEADER + body.len());
    out.put_u8(codec.tag());
    out.put_u32_le(len);
    out.put_slice(&body);
    Ok(out.freeze())
}

/// Decompress a framed object; a malformed frame is `Corrupt`.
pub fn decode(key: &str, framed: &[u8]) -> Result<Bytes> {
    let corrupt = |reason: String| ObjectError::Corrupt {
        key: key.into(),
        reason,
    };
    if framed.len() < HEADER {
        return Err(corrupt(format!(
            "compressed object of {} bytes",
            framed.len()
        )));
    }
    let len = u32::from_le_bytes([framed[1], framed[2], framed[3], framed[4]]) as usize;
    let body = &framed[HEADER..];
    let data = match framed[0] {
        1 => lz4_flex::block::decompress(body, len).map_err(|e| corrupt(format!("lz4: {e}")))?,
        2 => zstd::bulk::decompress(body, len).map_err(|e| corrupt(format!("zstd: {e}")))?,
        tag => return Err(corrupt(format!("unknown compression tag {tag}"))),
    };
    if data.len() != len {
        return Err(corrupt(format!(
            "decompressed to {} bytes, expected {len}",
            data.len()
        )));
    }
    Ok(Bytes::from(data))
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Compressed<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn cheap_ranges(&self) -> bool {
        false
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let framed = self.inner.get(key, None).await?;
        Ok(slice_range(decode(key, &framed)?, range))
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let framed = encode(self.codec, &data)?;
        self.inner.put(key, framed).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix, start_after, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_codecs_round_trip_and_detect_damage() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in [Codec::Lz4, Codec::Zstd] {
            let framed = encode(codec, &data).unwrap();
            assert!(framed.len() < data.len() / 2, "compresses");
            assert_eq!(decode("k", &framed).unwrap(), Bytes::from(data.clone()));
            let truncated = &framed[..framed.len() / 2];
            assert!(matches!(
                decode("k", truncated),
                Err(ObjectError::Corrupt { .. })
            ));
        }
        assert!(matches!(
            decode("k", &[9, 0, 0, 0, 0]),
            Err(ObjectError::Corrupt { .. })
        ));
        assert_eq!(Codec::parse("none").unwrap(), None);
        assert!(Codec::parse("gzip").is_err());
    }
}
