//! Whole-volume scans for the maintenance tools (gc, fsck, dump): every chunk's slice list
//! page by page, the queue of slices awaiting deletion, and the *share epoch* — a counter
//! bumped whenever a slice gains a reference in a new place (copy_file_range, clone), so a
//! scan that runs while clients work can tell whether a slice may have moved past it.

use strata_types::{Ino, Slice};

use super::{Meta, SHARE_EPOCH};
use crate::codec;
use crate::error::{MetaError, Result};
use crate::keys;
use crate::kv::Key;

/// One chunk's slice list, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    pub ino: Ino,
    pub index: u32,
    pub slices: Vec<Slice>,
}

/// One page of the inode key space ([`Meta::record_page`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordPage {
    pub chunks: Vec<ChunkRecord>,
    /// Inodes whose core record is in the page, in inode order.
    pub inodes: Vec<Ino>,
}

/// Where a paged scan stopped; pass it back to continue (None = done).
pub type ScanCursor = Option<Key>;

/// The first key strictly after `key`.
pub(super) fn after(key: &[u8]) -> Key {
    let mut k = key.to_vec();
    k.push(0);
    k
}

/// A chunk record from its key (`A` ino `C` index) and value.
fn chunk_record(key: &[u8], value: &[u8]) -> Result<ChunkRecord> {
    let (Some(ino), Some(index)) = (keys::be_u64(key, 1), keys::be_u32(key, 10)) else {
        return Err(MetaError::corrupt(key, "malformed chunk key"));
    };
    Ok(ChunkRecord {
        ino: Ino(ino),
        index,
        slices: codec::decode_slices(key, value)?,
    })
}

impl Meta {
    /// The next page of chunk records in key order (inode, then chunk index), reading at
    /// most `limit` keys of the inode space. Start with `None`; the returned cursor is
    /// `None` after the last page.
    pub async fn chunk_page(
        &self,
        cursor: &ScanCursor,
        limit: usize,
    ) -> Result<(Vec<ChunkRecord>, ScanCursor)> {
        let (page, next) = self.record_page(cursor, limit).await?;
        Ok((page.chunks, next))
    }

    /// The next page of the inode key space as [`Self::chunk_page`] reads it, with the
    /// inodes whose core record the page held (in inode order) beside the chunk records.
    pub async fn record_page(
        &self,
        cursor: &ScanCursor,
        limit: usize,
    ) -> Result<(RecordPage, ScanCursor)> {
        let start = cursor.as_deref().map_or_else(|| b"A".to_vec(), after);
        self.txn(|tx| {
            let start = start.clone();
            Box::pin(async move {
                let rows = tx.scan(&start, b"B", limit, false).await?;
                let next = if rows.len() < limit {
                    None
                } else {
                    rows.last().map(|(k, _)| k.clone())
                };
                let mut page = RecordPage::default();
                for (key, value) in &rows {
                    match (key.len(), key.get(9)) {
                        (10, Some(b'I')) => {
                            let ino = keys::be_u64(key, 1)
                                .ok_or_else(|| MetaError::corrupt(key, "malformed inode key"))?;
                            page.inodes.push(Ino(ino));
                        }
                        (14, Some(b'C')) => page.chunks.push(chunk_record(key, value)?),
                        _ => {}
                    }
                }
                Ok((page, next))
            })
        })
        .await
    }

    /// The next page of slices queued for block deletion (any age), as (id, size).
    pub async fn queued_slice_page(
        &self,
        cursor: &ScanCursor,
        limit: usize,
    ) -> Result<(Vec<(u64, u32)>, ScanCursor)> {
        let start = cursor.as_deref().map_or_else(|| b"L".to_vec(), after);
        self.txn(|tx| {
            let start = start.clone();
            Box::pin(async move {
                let rows = tx.scan(&start, b"M", limit, false).await?;
                let next = if rows.len() < limit {
                    None
                } else {
                    rows.last().map(|(k, _)| k.clone())
                };
                let mut out = Vec::with_capacity(rows.len());
                for (key, _) in &rows {
                    match (keys::be_u64(key, 9), keys::be_u32(key, 17)) {
                        (Some(id), Some(size)) if key.len() == 21 => out.push((id, size)),
                        _ => return Err(MetaError::corrupt(key, "malformed slice deletion key")),
                    }
                }
                Ok((out, next))
            })
        })
        .await
    }

    /// The share epoch: changes whenever some slice gains a reference in a new place.
    pub async fn share_epoch(&self) -> Result<i64> {
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::counter(SHARE_EPOCH);
                codec::decode_counter(&key, tx.get(&key).await?.as_deref())
            })
        })
        .await
    }
}

impl Meta {
    /// Delete every key of the volume (for `destroy`), a page per transaction; returns how
    /// many. The format record goes last, so an interrupted run can be repeated.
    pub async fn erase_everything(&self, done: &mut (dyn FnMut(u64) + Send)) -> Result<u64> {
        let format_key = keys::setting("format");
        let mut erased = 0;
        loop {
            let rows = self
                .txn(|tx| {
                    let format_key = format_key.clone();
                    Box::pin(async move {
                        let rows = tx.scan(b"", &[0xff; 4], 1000, false).await?;
                        let keys: Vec<Key> = rows
                            .into_iter()
                            .map(|(k, _)| k)
                            .filter(|k| *k != format_key)
                            .collect();
                        for k in &keys {
                            tx.delete(k.clone());
                        }
                        Ok(keys.len())
                    })
                })
                .await?;
            erased += rows as u64;
            done(rows as u64);
            if rows == 0 {
                break;
            }
        }
        self.txn(|tx| {
            let format_key = format_key.clone();
            Box::pin(async move {
                tx.delete(format_key);
                Ok(())
            })
        })
        .await?;
        Ok(erased + 1)
    }
}
