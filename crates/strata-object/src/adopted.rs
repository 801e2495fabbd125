//! Blocks another file system wrote, read in place (docs/FORMAT.md, "Foreign blocks"):
//! a volume imported from JuiceFS keeps JuiceFS's objects where they are, under the same
//! names Strata gives its own blocks. Every block of a slice whose id is below the
//! import's `nextChunk` is such a block: stored raw or compressed whole (LZ4 block format
//! or a zstd frame, the block's length in its name), with no framing and no checksum.
//! This layer sends those reads past the integrity layer to the raw objects and decodes
//! them; everything else (all writes: new slices have higher ids) goes to the native
//! stack. A raw foreign block is read by range like a native one; a compressed or
//! encrypted one whole (decrypted, then decompressed).

mod encrypted;
mod names;
pub mod sums;

pub use encrypted::ForeignCipher;
pub use names::ForeignNames;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use crate::checksum::SEGMENT;
use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, ObjectVisitor, Result, corrupt, slice_range};
use sums::Sums;

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignBlocks {
    /// Slice ids below this are foreign.
    pub below: u64,
    pub codec: ForeignCodec,
    /// The objects are encrypted (each whole, after compression).
    pub encrypted: bool,
    /// With `encrypted`: the key to read them with (none where only names and sizes
    /// matter, as for `fsck`).
    pub cipher: Option<ForeignCipher>,
    /// Every foreign block has recorded checksums (`sums`), which reads check.
    pub checksums: bool,
}

impl ForeignBlocks {
    /// (slice id, block length) of `key` when it is a foreign block's.
    pub fn block_of(&self, key: &str) -> Option<(u64, usize)> {
        let (id, _, len) = crate::parse_block_name(key)?;
        let len = usize::try_from(len).ok()?;
        (id != 0 && id < self.below).then_some((id, len))
    }

    /// Whether a foreign block is stored as its payload, byte for byte (so a ranged read
    /// fetches only the bytes asked for, and its size is its length).
    pub fn stored_as_is(&self) -> bool {
        self.codec == ForeignCodec::Raw && !self.encrypted
    }
}

/// Checksums objects kept in memory (about 4 KiB each for a 4 MiB block).
const SUMS_KEPT: usize = 4096;

/// The volume's store with foreign blocks read raw.
#[derive(Debug)]
pub struct Adopted<N, R> {
    native: N,
    raw: R,
    foreign: ForeignBlocks,
    /// Recorded checksums read lately, by block key (emptied when full).
    sums: Mutex<HashMap<String, Arc<Sums>>>,
}

impl<N: ObjectStore, R: ObjectStore> Adopted<N, R> {
    /// `raw` must reach the same objects as `native` without its framing.
    pub fn new(native: N, raw: R, foreign: ForeignBlocks) -> Adopted<N, R> {
        Adopted {
            native,
            raw,
            foreign,
            sums: Mutex::new(HashMap::new()),
        }
    }

    /// Bytes `range` of foreign block `key` (`len` bytes), checked against its recorded
    /// checksums when the volume has them (a range is widened to whole segments).
    async fn get_foreign(&self, key: &str, len: usize, range: Option<Range<u64>>) -> Result<Bytes> {
        if !self.foreign.checksums {
            return self.fetch_foreign(key, len, range).await;
        }
        let clip = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).min(len);
        let (start, end) = match &range {
            None => (0, len),
            Some(r) => (clip(r.start), clip(r.end).max(clip(r.start))),
        };
        if start == end && range.is_some() {
            return Ok(Bytes::new());
        }
        let from = start - start % SEGMENT;
        let to = end.div_ceil(SEGMENT).saturating_mul(SEGMENT).min(len);
        let widened = (from != 0 || to != len).then(|| as_u64(from)..as_u64(to));
        let (bytes, sums) =
            tokio::try_join!(self.fetch_foreign(key, len, widened), self.sums_of(key))?;
        sums.check(len, from, &bytes)
            .map_err(|reason| corrupt(key, reason))?;
        Ok(bytes.slice(start - from..end - from))
    }

    /// The recorded checksums of foreign block `key`.
    async fn sums_of(&self, key: &str) -> Result<Arc<Sums>> {
        if let Some(found) = self.kept_sums().get(key) {
            return Ok(found.clone());
        }
        let stored = match self.raw.get(&sums::sums_key(key), None).await {
            Err(ObjectError::NotFound(_)) => {
                return Err(corrupt(key, "its recorded checksums are missing"));
            }
            other => other?,
        };
        let decoded = Arc::new(Sums::decode(&stored).map_err(|reason| corrupt(key, reason))?);
        let mut kept = self.kept_sums();
        if kept.len() >= SUMS_KEPT {
            kept.clear();
        }
        kept.insert(key.to_string(), decoded.clone());
        Ok(decoded)
    }

    fn kept_sums(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Sums>>> {
        self.sums
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn fetch_foreign(
        &self,
        key: &str,
        len: usize,
        range: Option<Range<u64>>,
    ) -> Result<Bytes> {
        if self.foreign.stored_as_is() {
            let got = self.raw.get(key, range.clone()).await?;
            if range.is_none() && got.len() != len {
                let reason = format!("{} bytes, its name says {len}", got.len());
                return Err(corrupt(key, reason));
            }
            return Ok(got);
        }
        let cipher = match (self.foreign.encrypted, &self.foreign.cipher) {
            (true, None) => {
                return Err(ObjectError::NoKey(
                    "the imported blocks are encrypted and no key was given".into(),
                ));
            }
            (_, cipher) => cipher.clone(),
        };
        let stored = self.raw.get(key, None).await?;
        let codec = self.foreign.codec;
        // Decrypting (an RSA operation) and decompressing a block are CPU work.
        let whole = tokio::task::spawn_blocking(move || decode(&stored, codec, cipher, len))
            .await
            .map_err(|e| ObjectError::Other(format!("decoding a foreign block: {e}")))?
            .map_err(|reason| corrupt(key, reason))?;
        Ok(slice_range(Bytes::from(whole), range))
    }
}

/// The payload of a foreign block stored as `stored`, `len` bytes long by its name.
fn decode(
    stored: &[u8],
    codec: ForeignCodec,
    cipher: Option<ForeignCipher>,
    len: usize,
) -> std::result::Result<Vec<u8>, String> {
    let opened;
    let compressed = match &cipher {
        Some(cipher) => {
            opened = cipher
                .open(stored)
                .map_err(|e| format!("foreign encrypted block: {e}"))?;
            &opened[..]
        }
        None => stored,
    };
    let whole = match codec {
        ForeignCodec::Raw => compressed.to_vec(),
        ForeignCodec::Lz4 => lz4_flex::block::decompress(compressed, len)
            .map_err(|e| format!("foreign lz4 block: {e}"))?,
        ForeignCodec::Zstd => zstd::bulk::decompress(compressed, len)
            .map_err(|e| format!("foreign zstd block: {e}"))?,
    };
    if whole.len() != len {
        return Err(format!(
            "decoded to {} bytes, its name says {len}",
            whole.len()
        ));
    }
    Ok(whole)
}

#[async_trait]
impl<N: ObjectStore, R: ObjectStore> ObjectStore for Adopted<N, R> {
    fn describe(&self) -> String {
        self.native.describe()
    }

    fn cheap_ranges(&self) -> bool {
        self.native.cheap_ranges()
    }

    fn cheap_ranges_of(&self, key: &str) -> bool {
        match self.foreign.block_of(key) {
            Some(_) => self.foreign.stored_as_is() && self.raw.cheap_ranges(),
            None => self.native.cheap_ranges(),
        }
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

    /// (A foreign block's recorded checksums go with it: `ForeignNames`.)
    async fn delete(&self, key: &str) -> Result<()> {
        self.kept_sums().remove(key);
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
