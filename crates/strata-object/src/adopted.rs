//! Blocks another file system wrote, read in place (docs/FORMAT.md, "Foreign blocks"):
//! a volume imported from JuiceFS keeps JuiceFS's objects where they are, under the same
//! names Strata gives its own blocks. Every block of a slice whose id is below the
//! import's `nextChunk` is such a block: stored raw or compressed whole (LZ4 block format
//! or a zstd frame, the block's length in its name), with no framing and no checksum.
//! This layer sends those reads past the integrity layer to the raw objects and decodes
//! them; everything else (all writes: new slices have higher ids) goes to the native
//! stack. A raw foreign block is read by range like a native one; a compressed one whole.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;

use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, ObjectVisitor, Result, slice_range};

/// How foreign blocks are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignCodec {
    Raw,
    /// LZ4 block format, no header (the block's length is in its name).
    Lz4,
    /// One zstd frame.
    Zstd,
}

impl ForeignCodec {
    /// From the compression a JuiceFS volume names.
    pub fn parse(name: &str) -> Result<ForeignCodec> {
        match name {
            "" | "none" => Ok(ForeignCodec::Raw),
            "lz4" => Ok(ForeignCodec::Lz4),
            "zstd" => Ok(ForeignCodec::Zstd),
            other => Err(ObjectError::Other(format!(
                "foreign blocks compressed with {other:?}, which this build does not read"
            ))),
        }
    }
}

/// Which blocks are foreign and how they are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignBlocks {
    /// Slice ids below this are foreign.
    pub below: u64,
    pub codec: ForeignCodec,
}

impl ForeignBlocks {
    /// (slice id, block length) of `key` when it is a foreign block's.
    pub fn block_of(&self, key: &str) -> Option<(u64, usize)> {
        let (id, _, len) = crate::parse_block_name(key)?;
        let len = usize::try_from(len).ok()?;
        (id != 0 && id < self.below).then_some((id, len))
    }
}

/// The volume's store with foreign blocks read raw.
#[derive(Debug)]
pub struct Adopted<N, R> {
    native: N,
    raw: R,
    foreign: ForeignBlocks,
}

impl<N: ObjectStore, R: ObjectStore> Adopted<N, R> {
    /// `raw` must reach the same objects as `native` without its framing.
    pub fn new(native: N, raw: R, foreign: ForeignBlocks) -> Adopted<N, R> {
        Adopted {
            native,
            raw,
            foreign,
        }
    }

    async fn get_foreign(&self, key: &str, len: usize, range: Option<Range<u64>>) -> Result<Bytes> {
        let corrupt = |reason: String| ObjectError::Corrupt {
            key: key.to_string(),
            reason,
        };
        let whole = match self.foreign.codec {
            ForeignCodec::Raw => {
                let got = self.raw.get(key, range.clone()).await?;
                if range.is_none() && got.len() != len {
                    return Err(corrupt(format!("{} bytes, its name says {len}", got.len())));
                }
                return Ok(got);
            }
            ForeignCodec::Lz4 => {
                let stored = self.raw.get(key, None).await?;
                lz4_flex::block::decompress(&stored, len)
                    .map_err(|e| corrupt(format!("foreign lz4 block: {e}")))?
            }
            ForeignCodec::Zstd => {
                let stored = self.raw.get(key, None).await?;
                zstd::bulk::decompress(&stored, len)
                    .map_err(|e| corrupt(format!("foreign zstd block: {e}")))?
            }
        };
        if whole.len() != len {
            return Err(corrupt(format!(
                "decompressed to {} bytes, its name says {len}",
                whole.len()
            )));
        }
        Ok(slice_range(Bytes::from(whole), range))
    }
}

#[async_trait]
impl<N: ObjectStore, R: ObjectStore> ObjectStore for Adopted<N, R> {
    fn describe(&self) -> String {
        self.native.describe()
    }

    fn cheap_ranges(&self) -> bool {
        self.native.cheap_ranges()
    }

    fn range_unit(&self) -> usize {
        self.native.range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        match self.foreign.block_of(key) {
            Some((_, len)) => self.get_foreign(key, len, range).await,
            None => self.native.get(key, range).await,
        }
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.native.put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.native.put_parts(key, parts).await
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        self.native.upload(key).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.native.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.native.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        match self.foreign.block_of(key) {
            Some(_) => self.raw.head(key).await,
            None => self.native.head(key).await,
        }
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.native.list(prefix, start_after, limit).await
    }

    async fn scan_all(&self, prefix: &str, each: &mut ObjectVisitor<'_>) -> Result<()> {
        self.native.scan_all(prefix, each).await
    }

    async fn check(&self) -> Result<()> {
        self.native.check().await
    }
}

#[cfg(test)]
mod tests;
