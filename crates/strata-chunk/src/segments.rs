//! Ranged reads of blocks: a random read fetches only the segments of a block it needs
//! (`strata_object::checksum::SEGMENT` bytes each, verified by the object layer), in one
//! request per run of consecutive missing segments. Segments are kept in a memory cache
//! of hot segments and in the block cache (which may hold some segments of a block and
//! serve partial hits); concurrent readers of one segment share one fetch. A store that
//! verifies pieces smaller than a segment (an encrypted volume's 16 KiB units) is asked
//! for only the piece a small read lies in when nothing would keep the whole segment.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use strata_object::checksum::SEGMENT;

use crate::group::Peer;
use crate::inflight::{RunFetch, SegmentRun};
use crate::store::{ChunkStore, Shared, cache_segments_in_background};
use crate::{ChunkError, ChunkStats, Result};

/// The memory-cache key of segment `index` of block `key`.
fn segment_key(key: &str, index: usize) -> String {
    format!("{key}#{index}")
}

/// The memory-cache key of piece `index` (of the store's range unit) of block `key`.
fn unit_key(key: &str, index: usize) -> String {
    format!("{key}#u{index}")
}

/// The memory-cache key of the sealed slot of segment `index` of block `key` (an
/// encrypted volume's disk cache slot, kept sealed).
fn sealed_slot_key(key: &str, index: usize) -> String {
    format!("{key}#{index}/sealed")
}

impl ChunkStore {
    /// Bytes `[from, to)` of block `key` (`block_len` bytes in all), fetching only the
    /// segments they lie in — from the block's owner when a peer in the cache group owns it.
    pub(crate) async fn fetch_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Result<Bytes> {
        if let Some(bytes) = self.recent_range(key, block_len, from, to) {
            return Ok(bytes);
        }
        let (first, last) = (from / SEGMENT, (to - 1) / SEGMENT);
        let mut found: Vec<Option<Bytes>> = Vec::with_capacity(last - first + 1);
        for index in first..=last {
            found.push(self.shared.segments.peek(&segment_key(key, index)));
        }
        if found.iter().any(Option::is_none)
            && first == last
            && self.shared.cache.serves_ranges()
            && let Some(bytes) = self.sealed_range(key, block_len, from, to).await
        {
            return Ok(bytes);
        }
        if found[0].is_none()
            && let Some(bytes) = self.unit_range(key, block_len, from, to).await?
        {
            return Ok(bytes);
        }
        if self.shared.cache.holds_segments() && found.iter().any(Option::is_none) {
            self.fill_from_cache(key, block_len, first, &mut found)
                .await;
        }
        // A fetch joined in flight may cover only the start of a missing run: go round
        // until every segment is there (each round fills at least the first of each run).
        loop {
            let runs = missing_runs(first, &found);
            if runs.is_empty() {
                break;
            }
            let peer = self.owner_peer(key);
            let missing_before = found.iter().filter(|s| s.is_none()).count();
            let waits = runs.into_iter().map(|(run_first, run_last)| {
                self.shared_run(key, block_len, (run_first, run_last), peer.clone())
            });
            for run in futures::future::join_all(waits).await {
                let run = run?;
                for (i, slot) in found.iter_mut().enumerate() {
                    if slot.is_none() {
                        *slot = run.get(first + i);
                    }
                }
            }
            if found.iter().filter(|s| s.is_none()).count() == missing_before {
                return Err(short(key, to, from));
            }
        }
        assemble(key, &found, first, from, to)
    }

    /// Bytes `[from, to)` of the whole block, if it was read lately and is in memory.
    fn recent_range(&self, key: &str, block_len: usize, from: usize, to: usize) -> Option<Bytes> {
        let block = self.shared.recent.peek(key)?;
        (block.len() == block_len).then(|| block.slice(from..to))
    }

    /// Bytes `[from, to)` from memory or the block cache alone (`None` unless they hold
    /// all of them). For a block the store sends only whole (compressed, or adopted and
    /// encoded), a random read takes a cached block's bytes by range this way, and fetches
    /// (and caches) the whole block otherwise.
    pub(crate) async fn cached_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<Bytes> {
        if let Some(bytes) = self.recent_range(key, block_len, from, to) {
            return Some(bytes);
        }
        if to <= from {
            return Some(Bytes::new());
        }
        let (first, last) = (from / SEGMENT, (to - 1) / SEGMENT);
        if first == last && self.shared.cache.serves_ranges() {
            return self.sealed_range(key, block_len, from, to).await;
        }
        let mut found: Vec<Option<Bytes>> = (first..=last)
            .map(|index| self.shared.segments.peek(&segment_key(key, index)))
            .collect();
        if found.iter().any(Option::is_none) && self.shared.cache.holds_segments() {
            self.fill_from_cache(key, block_len, first, &mut found)
                .await;
        }
        if found.iter().any(Option::is_none) {
            return None;
        }
        assemble(key, &found, first, from, to).ok()
    }

    /// Bytes `[from, to)` (inside one segment) from a cache that keeps slots sealed: the
    /// segment's sealed slot is kept in memory, and every read of it opens only the units
    /// its bytes lie in (a 4 KiB read decrypts one 16 KiB unit, not 32 KiB; memory holds
    /// no plaintext of it).
    async fn sealed_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<Bytes> {
        let cache = &self.shared.cache;
        let slot_key = sealed_slot_key(key, from / SEGMENT);
        if let Some(slot) = self.shared.segments.peek(&slot_key) {
            if let Some(bytes) = cache.open_range(key, block_len, (from, to), &slot) {
                return Some(bytes);
            }
            self.shared.segments.forget(&slot_key);
        }
        let hit = cache.get_range(key, block_len, from, to).await?;
        self.shared.segments.insert(&slot_key, hit.slot);
        Some(hit.bytes)
    }

    /// Bytes `[from, to)`, when they lie in one piece of the store's range unit and that
    /// is smaller than a segment, fetched as that piece alone — if nothing would keep the
    /// whole segment: no block cache that holds segments, no peer owning the block. The
    /// piece is kept in the memory cache of segments for the next read of it.
    async fn unit_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Result<Option<Bytes>> {
        let unit = self.shared.range_unit;
        if unit == 0
            || to <= from
            || unit >= SEGMENT
            || from / unit != (to - 1) / unit
            || self.shared.cache.holds_segments()
            || self.owner_peer(key).is_some()
        {
            return Ok(None);
        }
        let index = from / unit;
        let (start, end) = (index * unit, ((index + 1) * unit).min(block_len));
        let memory_key = unit_key(key, index);
        let piece = match self.shared.segments.peek(&memory_key) {
            Some(piece) => piece,
            None => {
                let range = u64::try_from(start).unwrap_or(u64::MAX)
                    ..u64::try_from(end).unwrap_or(u64::MAX);
                let piece = self.shared.store.get(key, Some(range)).await?;
                if piece.len() != end - start {
                    return Err(short(key, end, start + piece.len()));
                }
                self.shared.segments.insert(&memory_key, piece.clone());
                piece
            }
        };
        Ok(Some(piece.slice(from - start..to - start)))
    }

    /// Take what the block cache holds of the missing segments.
    async fn fill_from_cache(
        &self,
        key: &str,
        block_len: usize,
        first: usize,
        found: &mut [Option<Bytes>],
    ) {
        let last = first + found.len() - 1;
        let cached = self
            .shared
            .cache
            .get_segments(key, block_len, first, last)
            .await;
        for (i, (slot, segment)) in found.iter_mut().zip(cached).enumerate() {
            if slot.is_none()
                && let Some(segment) = segment
            {
                self.shared
                    .segments
                    .insert(&segment_key(key, first + i), segment.clone());
                *slot = Some(segment);
            }
        }
    }

    /// The fetch of segments `first..=last` of `key`: one already in flight for the first
    /// of them, or a new one.
    fn shared_run(
        &self,
        key: &str,
        block_len: usize,
        (first, last): (usize, usize),
        peer: Option<Arc<Peer>>,
    ) -> RunFetch {
        let via_peer = peer.is_some();
        let mut inflight = self.shared.inflight_segments.lock();
        if let Some(existing) = inflight.get(&(key.to_string(), first, via_peer)) {
            ChunkStats::bump(&self.shared.stats.joined_fetches);
            return existing.clone();
        }
        let run = Run {
            key: key.to_string(),
            block_len,
            first,
            last,
        };
        let fetch = fetch_run(self.shared.clone(), run, peer).boxed().shared();
        for index in first..=last {
            inflight.insert((key.to_string(), index, via_peer), fetch.clone());
        }
        fetch
    }
}

/// Runs of consecutive segments not found, from segment `first` on.
fn missing_runs(first: usize, found: &[Option<Bytes>]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, slot) in found.iter().enumerate() {
        if slot.is_some() {
            continue;
        }
        let index = first + i;
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == index => *end = index,
            _ => runs.push((index, index)),
        }
    }
    runs
}

/// Bytes `[from, to)` of the block out of its segments `first..` (no copy when they lie in
/// one segment).
fn assemble(
    key: &str,
    found: &[Option<Bytes>],
    first: usize,
    from: usize,
    to: usize,
) -> Result<Bytes> {
    let missing = || short(key, to, from);
    let base = first * SEGMENT;
    if let [Some(only)] = found {
        let (a, b) = (from - base, to - base);
        if b > only.len() {
            return Err(short(key, to, base + only.len()));
        }
        return Ok(only.slice(a..b));
    }
    let mut out = BytesMut::with_capacity(to - from);
    for (i, segment) in found.iter().enumerate() {
        let segment = segment.as_ref().ok_or_else(missing)?;
        let start = base + i * SEGMENT;
        let a = from.max(start) - start;
        let b = to.min(start + segment.len()).saturating_sub(start);
        if a < b {
            out.extend_from_slice(&segment[a..b]);
        }
    }
    if out.len() != to - from {
        return Err(short(key, to, from + out.len()));
    }
    Ok(out.freeze())
}

fn short(key: &str, expected: usize, actual: usize) -> ChunkError {
    ChunkError::BadBlock {
        key: key.to_string(),
        actual,
        expected,
    }
}

/// Segments `first..=last` of block `key` (`block_len` bytes).
struct Run {
    key: String,
    block_len: usize,
    first: usize,
    last: usize,
}

/// Fetch a run of segments from the block's owner in the group (`peer`) or else the
/// store, keep them in the memory cache and (in the background, unless a peer served
/// them) the block cache, and leave the in-flight table.
async fn fetch_run(
    shared: Arc<Shared>,
    run: Run,
    peer: Option<Arc<Peer>>,
) -> Result<Arc<SegmentRun>> {
    let Run {
        key,
        block_len,
        first,
        last,
    } = run;
    let start = first * SEGMENT;
    let end = ((last + 1) * SEGMENT).min(block_len);
    let via_peer = peer.is_some();
    let from_peer = match (peer, shared.group.get()) {
        (Some(peer), Some(group)) => group.get(&peer, &key, block_len, start, end).await,
        _ => None,
    };
    let fetched = match from_peer.clone() {
        Some(data) => Ok(data),
        None => {
            let range =
                u64::try_from(start).unwrap_or(u64::MAX)..u64::try_from(end).unwrap_or(u64::MAX);
            shared.store.get(&key, Some(range)).await
        }
    };
    {
        let mut inflight = shared.inflight_segments.lock();
        for index in first..=last {
            inflight.remove(&(key.clone(), index, via_peer));
        }
    }
    let data = fetched?;
    if data.len() != end - start {
        return Err(short(&key, end, start + data.len()));
    }
    let segments: Vec<Bytes> = (first..=last)
        .map(|i| data.slice(i * SEGMENT - start..((i + 1) * SEGMENT).min(end) - start))
        .collect();
    for (i, segment) in segments.iter().enumerate() {
        shared
            .segments
            .insert(&segment_key(&key, first + i), segment.clone());
    }
    if from_peer.is_none() {
        cache_segments_in_background(&shared, &key, block_len, first, &segments);
    }
    Ok(Arc::new(SegmentRun { first, segments }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_segments_group_into_runs() {
        let b = Some(Bytes::from_static(b"x"));
        let found = [None, None, b.clone(), None, b, None, None];
        assert_eq!(missing_runs(10, &found), vec![(10, 11), (13, 13), (15, 16)]);
        assert!(missing_runs(0, &[]).is_empty());
    }
}
