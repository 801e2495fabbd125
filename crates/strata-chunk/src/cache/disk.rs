//! The local disk block cache (`--cache-dir a:b`, `--cache-size`, `--free-space-ratio`).
//!
//! Each block is a sparse file `{dir}/seg2/{object key}` (an encrypted volume's:
//! `{dir}/sealed4/...`, sealed in 16 KiB units) with a slot per segment
//! ([`super::segment_file`], FORMAT.md "cache v2"/"cache v4"), so the cache holds whole blocks of
//! sequential readers and single segments of random readers alike, and serves partial
//! hits. Whole blocks are written to a temporary name and renamed; segments are written
//! into their slots and counted only once written, and each carries its own checksum, so a
//! crash or a flipped bit costs at most a re-read of that segment. The index (which
//! segments each file holds, LRU order and sizes) lives in memory and is rebuilt at start
//! from the files' allocated extents. Files of earlier formats (`{dir}/raw`, cache v1;
//! `{dir}/sealed3`, cache v3) are removed at start. All file I/O runs on the blocking pool.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;

use super::segment_file::{self as seg, Framing, Layout, RangeRead, Slot};
use super::{BlockCache, CacheStats, Lru, RangeHit};
use strata_object::checksum::SEGMENT;

/// Subdirectories of earlier formats, dropped at start: whole blocks with one checksum
/// (`raw`), and sealed files whose segments were sealed whole (`sealed3`, cache v3).
const OLD_FORMAT_DIRS: [&str; 2] = ["raw", "sealed3"];

/// Blocks and segments of blocks cached in local directories.
#[derive(Debug, Clone)]
pub struct DiskCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dirs: Vec<PathBuf>,
    capacity: u64,
    free_ratio: f64,
    index: Mutex<Index>,
    stats: CacheStats,
    framing: Framing,
}

/// What the cache holds: LRU order with bytes per block, and which segments.
#[derive(Debug, Default)]
struct Index {
    lru: Lru,
    blocks: HashMap<String, Held>,
    /// The shape of the files (what a segment takes on disk).
    layout: Layout,
}

/// The segments of one block the cache holds.
#[derive(Debug, Clone)]
struct Held {
    block_len: usize,
    present: Vec<bool>,
    layout: Layout,
}

impl Held {
    fn bytes(&self) -> u64 {
        let held: usize = (0..self.present.len())
            .filter(|&i| self.present[i])
            .map(|i| self.layout.stored_len(seg::segment_len(self.block_len, i)))
            .sum();
        u64::try_from(held).unwrap_or(u64::MAX)
    }

    fn all(&self) -> bool {
        self.present.iter().all(|p| *p)
    }
}

impl Index {
    /// Record segments `first..first+count` of `key` as held.
    fn mark(&mut self, key: &str, block_len: usize, first: usize, count: usize) {
        let layout = self.layout;
        let held = self.blocks.entry(key.to_string()).or_insert_with(|| Held {
            block_len,
            present: vec![false; seg::segment_count(block_len)],
            layout,
        });
        for slot in held.present.iter_mut().skip(first).take(count) {
            *slot = true;
        }
        let bytes = held.bytes();
        self.lru.insert(key, bytes);
    }

    /// Record segment `index` of `key` as no longer held.
    fn unmark(&mut self, key: &str, index: usize) {
        let Some(held) = self.blocks.get_mut(key) else {
            return;
        };
        if let Some(slot) = held.present.get_mut(index) {
            *slot = false;
        }
        if held.present.iter().any(|p| *p) {
            let bytes = held.bytes();
            self.lru.insert(key, bytes);
        } else {
            self.forget(key);
        }
    }

    fn forget(&mut self, key: &str) {
        self.lru.remove(key);
        self.blocks.remove(key);
    }
}

impl DiskCache {
    /// Open (creating) the cache directories and index what they already hold. Blocks
    /// beyond `capacity` bytes are evicted; `free_ratio` (0..1) of each disk is kept free.
    pub fn open(dirs: &[PathBuf], capacity: u64, free_ratio: f64) -> std::io::Result<DiskCache> {
        DiskCache::open_with(dirs, capacity, free_ratio, Framing::Checked)
    }

    /// [`Self::open`] with the framing of the volume's files (sealed for an encrypted one).
    pub fn open_with(
        dirs: &[PathBuf],
        capacity: u64,
        free_ratio: f64,
        framing: Framing,
    ) -> std::io::Result<DiskCache> {
        let mut index = Index {
            layout: framing.layout(),
            ..Index::default()
        };
        for dir in dirs {
            let root = dir.join(framing.dir_name());
            // Cached blocks are user data: the directories are the owner's alone.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&root)?;
            for old in OLD_FORMAT_DIRS.map(|name| dir.join(name)) {
                if old.exists() {
                    tracing::info!(
                        "removing cache files of an earlier format in {}",
                        old.display()
                    );
                    std::fs::remove_dir_all(&old)?;
                }
            }
            scan(&root, &root, &mut index, &framing)?;
        }
        let inner = Inner {
            dirs: dirs.to_vec(),
            capacity,
            free_ratio: free_ratio.clamp(0.0, 0.99),
            index: Mutex::new(index),
            stats: CacheStats::default(),
            framing,
        };
        inner.evict_to_fit(0);
        Ok(DiskCache {
            inner: Arc::new(inner),
        })
    }

    /// Blocks indexed (whole or in part).
    pub fn len(&self) -> usize {
        self.inner.index.lock().lru.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `key`'s block lives.
    pub fn path_of(&self, key: &str) -> PathBuf {
        self.inner.path_of(key)
    }

    /// Run `job` on the blocking pool (file I/O must not hold up async workers).
    async fn blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Inner) -> T + Send + 'static,
    ) -> Option<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || job(&inner)).await.ok()
    }
}

impl Inner {
    fn path_of(&self, key: &str) -> PathBuf {
        let n = self.dirs.len().max(1);
        let pick = usize::try_from(crc32c::crc32c(key.as_bytes())).unwrap_or(0) % n;
        self.dirs[pick].join(self.framing.dir_name()).join(key)
    }

    /// Evict until `incoming` more bytes fit within the capacity and the disks keep their
    /// free-space ratio.
    fn evict_to_fit(&self, incoming: u64) {
        loop {
            let victim = {
                let mut index = self.index.lock();
                let over = index.lru.total() + incoming > self.capacity;
                if !over && !self.disks_too_full() {
                    return;
                }
                match index.lru.pop_oldest() {
                    Some((key, _)) => {
                        index.blocks.remove(&key);
                        key
                    }
                    None => return,
                }
            };
            let _ = std::fs::remove_file(self.path_of(&victim));
            CacheStats::bump(&self.stats.evictions);
        }
    }

    fn disks_too_full(&self) -> bool {
        if self.free_ratio <= 0.0 {
            return false;
        }
        self.dirs
            .iter()
            .any(|d| match nix::sys::statvfs::statvfs(d.as_path()) {
                Ok(st) => {
                    let total = st.blocks() as f64;
                    total > 0.0 && (st.blocks_available() as f64) / total < self.free_ratio
                }
                Err(_) => false,
            })
    }

    /// A read found `key`'s file gone or a segment absent or damaged: forget it.
    fn drop_segment(&self, key: &str, index: usize, damaged: bool) {
        if damaged {
            tracing::warn!(
                "cache file {} is damaged (segment {index}): dropped",
                self.path_of(key).display()
            );
            CacheStats::bump(&self.stats.corrupt);
        }
        self.index.lock().unmark(key, index);
    }

    fn read_whole(&self, key: &str, block_len: usize) -> Option<Bytes> {
        let path = self.path_of(key);
        let read = File::open(&path)
            .and_then(|file| seg::read_whole(&file, key, block_len, &self.framing));
        match read {
            Ok(Ok(data)) => Some(data),
            Ok(Err((index, damaged))) => {
                self.drop_segment(key, index, damaged);
                if damaged {
                    let _ = std::fs::remove_file(&path);
                    self.index.lock().forget(key);
                }
                None
            }
            Err(_) => {
                self.index.lock().forget(key);
                None
            }
        }
    }

    fn read_segments(
        &self,
        key: &str,
        block_len: usize,
        first: usize,
        last: usize,
    ) -> Vec<Option<Bytes>> {
        let read = File::open(self.path_of(key))
            .and_then(|file| seg::read_slots(&file, key, block_len, (first, last), &self.framing));
        let Ok(slots) = read else {
            self.index.lock().forget(key);
            return vec![None; last + 1 - first];
        };
        slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| match slot {
                Slot::Held(data) => Some(data),
                Slot::Absent => {
                    self.drop_segment(key, first + i, false);
                    None
                }
                Slot::Damaged => {
                    self.drop_segment(key, first + i, true);
                    None
                }
            })
            .collect()
    }

    /// Bytes `[from, to)` (inside one segment) of block `key` with that segment's sealed
    /// slot; a unit that fails to open drops its segment.
    fn read_range(&self, key: &str, block_len: usize, from: usize, to: usize) -> Option<RangeHit> {
        let segment = from / SEGMENT;
        let slot = File::open(self.path_of(key))
            .and_then(|file| seg::read_sealed_slot(&file, block_len, segment, &self.framing));
        let slot = match slot {
            Ok(Some(slot)) => slot,
            Ok(None) => return None,
            Err(_) => {
                self.index.lock().forget(key);
                return None;
            }
        };
        match seg::open_slot_range(key, block_len, (from, to), &slot, &self.framing) {
            Ok(RangeRead::Held(bytes)) => Some(RangeHit { bytes, slot }),
            Ok(RangeRead::Absent(index)) => {
                self.drop_segment(key, index, false);
                None
            }
            Ok(RangeRead::Damaged(index)) => {
                self.drop_segment(key, index, true);
                None
            }
            Err(_) => None,
        }
    }

    fn write_whole(&self, key: &str, data: &Bytes) {
        let block_len = data.len();
        let size = u64::try_from(seg::full_file_len(block_len, &self.framing)).unwrap_or(u64::MAX);
        self.evict_to_fit(size);
        let path = self.path_of(key);
        match seg::write_whole(&path, key, data, &self.framing) {
            Ok(()) => {
                let mut index = self.index.lock();
                index.forget(key);
                index.mark(key, block_len, 0, seg::segment_count(block_len));
            }
            Err(e) => tracing::warn!("cannot write cache file {}: {e}", path.display()),
        }
    }

    fn write_segments(&self, key: &str, block_len: usize, first: usize, segments: &[Bytes]) {
        let size: usize = segments
            .iter()
            .map(|s| self.framing.stored_len(s.len()))
            .sum();
        self.evict_to_fit(u64::try_from(size).unwrap_or(u64::MAX));
        let path = self.path_of(key);
        match seg::write_slots(&path, key, first, segments, &self.framing) {
            Ok(()) => self
                .index
                .lock()
                .mark(key, block_len, first, segments.len()),
            Err(e) => tracing::warn!("cannot write cache file {}: {e}", path.display()),
        }
    }
}

/// Index every block file under `root`; remove leftovers of interrupted writes and files
/// holding nothing.
fn scan(root: &Path, dir: &Path, index: &mut Index, framing: &Framing) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.metadata()?.is_dir() {
            scan(root, &path, index, framing)?;
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let key = path
            .strip_prefix(root)
            .map(|rel| rel.to_string_lossy().into_owned())
            .unwrap_or_default();
        let held = match crate::block_len_of(&key) {
            Some(block_len) if !name.contains(seg::TMP_MARK) => File::open(&path)
                .and_then(|file| seg::slots_on_disk(&file, block_len, framing))
                .ok()
                .map(|present| Held {
                    block_len,
                    present,
                    layout: framing.layout(),
                }),
            _ => None,
        };
        match held {
            Some(held) if held.present.iter().any(|p| *p) => {
                index.lru.insert(&key, held.bytes());
                index.blocks.insert(key, held);
            }
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    Ok(())
}

#[async_trait]
impl BlockCache for DiskCache {
    async fn get(&self, key: &str) -> Option<Bytes> {
        let block_len = {
            let mut index = self.inner.index.lock();
            match index.blocks.get(key) {
                Some(held) if held.all() => {
                    let block_len = held.block_len;
                    index.lru.touch(key);
                    Some(block_len)
                }
                _ => None,
            }
        };
        let found = match block_len {
            Some(block_len) => {
                let key = key.to_string();
                self.blocking(move |inner| inner.read_whole(&key, block_len))
                    .await
                    .flatten()
            }
            None => None,
        };
        self.inner.stats.record_lookup(found.is_some());
        found
    }

    async fn put(&self, key: &str, data: Bytes) {
        let size =
            u64::try_from(seg::full_file_len(data.len(), &self.inner.framing)).unwrap_or(u64::MAX);
        let cached = matches!(self.inner.index.lock().blocks.get(key), Some(h) if h.all());
        if cached || size > self.inner.capacity {
            return;
        }
        let key = key.to_string();
        self.blocking(move |inner| inner.write_whole(&key, &data))
            .await;
    }

    async fn get_segments(
        &self,
        key: &str,
        block_len: usize,
        first: usize,
        last: usize,
    ) -> Vec<Option<Bytes>> {
        let wanted = {
            let mut index = self.inner.index.lock();
            let present: &[bool] = match index.blocks.get(key) {
                Some(held) if held.block_len == block_len => &held.present,
                _ => &[],
            };
            let held = |i: usize| present.get(i).copied().unwrap_or(false);
            let from = (first..=last).find(|&i| held(i));
            let to = (first..=last).rev().find(|&i| held(i));
            if from.is_some() {
                index.lru.touch(key);
            }
            from.zip(to)
        };
        let mut found = vec![None; last + 1 - first];
        if let Some((from, to)) = wanted {
            let key = key.to_string();
            let read = self
                .blocking(move |inner| inner.read_segments(&key, block_len, from, to))
                .await
                .unwrap_or_default();
            for (i, segment) in read.into_iter().enumerate() {
                found[from - first + i] = segment;
            }
        }
        self.inner
            .stats
            .record_lookup(found.iter().all(Option::is_some));
        found
    }

    fn serves_ranges(&self) -> bool {
        matches!(self.inner.framing, Framing::Sealed(_))
    }

    async fn get_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<RangeHit> {
        let segment = from / SEGMENT;
        if !self.serves_ranges() || from >= to || to > block_len || (to - 1) / SEGMENT != segment {
            return None;
        }
        {
            let mut index = self.inner.index.lock();
            match index.blocks.get(key) {
                Some(held)
                    if held.block_len == block_len
                        && held.present.get(segment).copied().unwrap_or(false) => {}
                _ => return None,
            }
            index.lru.touch(key);
        }
        let key = key.to_string();
        let hit = self
            .blocking(move |inner| inner.read_range(&key, block_len, from, to))
            .await
            .flatten();
        if hit.is_some() {
            self.inner.stats.record_lookup(true);
        }
        hit
    }

    fn open_range(
        &self,
        key: &str,
        block_len: usize,
        (from, to): (usize, usize),
        slot: &[u8],
    ) -> Option<Bytes> {
        match seg::open_slot_range(key, block_len, (from, to), slot, &self.inner.framing) {
            Ok(RangeRead::Held(bytes)) => Some(bytes),
            _ => None,
        }
    }

    async fn put_segments(&self, key: &str, block_len: usize, first: usize, segments: &[Bytes]) {
        let framing = &self.inner.framing;
        let size: usize = segments.iter().map(|s| framing.stored_len(s.len())).sum();
        if u64::try_from(size).unwrap_or(u64::MAX) > self.inner.capacity || segments.is_empty() {
            return;
        }
        let (key, segments) = (key.to_string(), segments.to_vec());
        self.blocking(move |inner| inner.write_segments(&key, block_len, first, &segments))
            .await;
    }

    async fn remove(&self, key: &str) {
        self.inner.index.lock().forget(key);
        let key = key.to_string();
        self.blocking(move |inner| {
            let _ = std::fs::remove_file(inner.path_of(&key));
        })
        .await;
    }

    fn cached_bytes(&self, key: &str) -> u64 {
        let index = self.inner.index.lock();
        let Some(held) = index.blocks.get(key) else {
            return 0;
        };
        let bytes: usize = (0..held.present.len())
            .filter(|&i| held.present[i])
            .map(|i| seg::segment_len(held.block_len, i))
            .sum();
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    fn stats(&self) -> &CacheStats {
        &self.inner.stats
    }

    fn holds_segments(&self) -> bool {
        true
    }

    fn used_bytes(&self) -> u64 {
        self.inner.index.lock().lru.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(n: usize, seed: u8) -> Bytes {
        Bytes::from(vec![seed; n])
    }

    #[tokio::test]
    async fn cached_blocks_are_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache/volume-uuid");
        let cache = DiskCache::open(std::slice::from_ref(&root), 1 << 20, 0.0).unwrap();
        cache.put("chunks/0/0/1_0_10", block(10, 1)).await;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("cache")), 0o700);
        assert_eq!(mode(&root.join("seg2")), 0o700);
        assert_eq!(mode(&cache.path_of("chunks/0/0/1_0_10")), 0o600);
    }

    #[tokio::test]
    async fn blocks_survive_reopen_and_limits_hold() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        let cache = DiskCache::open(&paths, 10_000, 0.0).unwrap();
        for i in 0..5u8 {
            cache
                .put(&format!("chunks/0/0/{i}_0_3000"), block(3000, i))
                .await;
        }
        assert!(cache.used_bytes() <= 10_000, "size limit holds");
        assert_eq!(cache.len(), 3);
        assert!(CacheStats::get(&cache.stats().evictions) >= 2);
        assert!(
            cache.get("chunks/0/0/0_0_3000").await.is_none(),
            "oldest evicted"
        );
        assert_eq!(
            cache.get("chunks/0/0/4_0_3000").await.unwrap(),
            block(3000, 4)
        );
        // A leftover temporary file is cleaned up; the index is rebuilt from the files.
        let stray = paths[0].join("seg2/chunks/0/0/x.tmp.1234");
        std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
        std::fs::write(&stray, b"partial").unwrap();
        drop(cache);
        let cache = DiskCache::open(&paths, 10_000, 0.0).unwrap();
        assert_eq!(cache.len(), 3);
        assert!(!stray.exists());
        assert_eq!(
            cache.get("chunks/0/0/3_0_3000").await.unwrap(),
            block(3000, 3)
        );
    }

    #[tokio::test]
    async fn the_free_space_ratio_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        // No real disk is 99.9 % free: every new block pushes out the older ones.
        let cache = DiskCache::open(&[dir.path().to_path_buf()], 1 << 30, 0.999).unwrap();
        cache.put("k/1_0_100", block(100, 1)).await;
        cache.put("k/2_0_100", block(100, 2)).await;
        assert_eq!(cache.len(), 1);
        assert!(cache.get("k/1_0_100").await.is_none());
        let roomy = DiskCache::open(&[dir.path().to_path_buf()], 1 << 30, 0.0).unwrap();
        roomy.put("k/3_0_100", block(100, 3)).await;
        assert_eq!(roomy.len(), 2, "without the ratio both stay");
    }

    #[tokio::test]
    async fn damaged_files_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(&[dir.path().to_path_buf()], 1 << 20, 0.0).unwrap();
        cache.put("k/1_0_1000", block(1000, 7)).await;
        cache.put("k/2_0_1000", block(1000, 8)).await;
        let a = cache.path_of("k/1_0_1000");
        let mut bytes = std::fs::read(&a).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&a, bytes).unwrap();
        let b = cache.path_of("k/2_0_1000");
        let bytes = std::fs::read(&b).unwrap();
        std::fs::write(&b, &bytes[..500]).unwrap();
        assert!(
            cache.get("k/1_0_1000").await.is_none(),
            "flipped bit detected"
        );
        assert!(
            cache.get("k/2_0_1000").await.is_none(),
            "truncation detected"
        );
        assert_eq!(CacheStats::get(&cache.stats().corrupt), 2);
        assert!(!a.exists() && !b.exists(), "damaged files removed");
        cache.put("k/1_0_1000", block(1000, 7)).await;
        assert_eq!(
            cache.get("k/1_0_1000").await.unwrap(),
            block(1000, 7),
            "re-cached after a re-read"
        );
    }

    #[tokio::test]
    async fn segments_are_cached_apart_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        let cache = DiskCache::open(&dirs, 1 << 30, 0.0).unwrap();
        let len = 4 * SEGMENT + 100;
        let key = format!("chunks/0/0/9_0_{len}");
        let data = Bytes::from(
            (0..len)
                .map(|i| u8::try_from(i % 253).unwrap())
                .collect::<Vec<u8>>(),
        );
        let seg = |i: usize| data.slice(i * SEGMENT..((i + 1) * SEGMENT).min(len));
        cache.put_segments(&key, len, 1, &[seg(1), seg(2)]).await;
        cache.put_segments(&key, len, 4, &[seg(4)]).await;
        let expect = vec![None, Some(seg(1)), Some(seg(2)), None, Some(seg(4))];
        assert_eq!(cache.get_segments(&key, len, 0, 4).await, expect);
        assert!(
            cache.get(&key).await.is_none(),
            "a partial block is no whole hit"
        );
        assert_eq!(
            cache.used_bytes(),
            (2 * SEGMENT + 100 + 3 * seg::TRAILER) as u64
        );
        // Rebuilt from the file's allocated extents.
        drop(cache);
        let cache = DiskCache::open(&dirs, 1 << 30, 0.0).unwrap();
        assert_eq!(cache.get_segments(&key, len, 0, 4).await, expect);
        // A damaged segment is dropped alone; the rest still serve.
        let path = cache.path_of(&key);
        let mut raw = std::fs::read(&path).unwrap();
        raw[2 * seg::STRIDE + 3] ^= 4;
        std::fs::write(&path, raw).unwrap();
        let got = cache.get_segments(&key, len, 1, 2).await;
        assert_eq!(got, vec![Some(seg(1)), None]);
        assert_eq!(CacheStats::get(&cache.stats().corrupt), 1);
        cache.put(&key, data.clone()).await;
        assert_eq!(cache.get(&key).await, Some(data), "whole after a full put");
    }

    #[tokio::test]
    async fn a_sealed_cache_serves_ranges_and_drops_what_fails_to_open() {
        use strata_object::seal::{Cipher, DataKey, KeyRing, Keys};
        let ring = KeyRing::new(1, vec![DataKey::generate(1, Cipher::Aes256Gcm).unwrap()]);
        let framing = Framing::Sealed(Arc::new(Keys::new(ring.unwrap(), None)));
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        let earlier = dir.path().join("sealed3/chunks/old");
        std::fs::create_dir_all(&earlier).unwrap();
        let cache = DiskCache::open_with(&dirs, 1 << 30, 0.0, framing.clone()).unwrap();
        assert!(cache.serves_ranges());
        assert!(!earlier.exists(), "files of cache v3 removed at start");
        let len = 3 * SEGMENT;
        let key = format!("chunks/0/0/4_0_{len}");
        let data = Bytes::from(
            (0..len)
                .map(|i| u8::try_from(i % 251).unwrap())
                .collect::<Vec<u8>>(),
        );
        let seg = |i: usize| data.slice(i * SEGMENT..(i + 1) * SEGMENT);
        cache.put_segments(&key, len, 0, &[seg(0), seg(1)]).await;
        let two_slots = u64::try_from(2 * framing.stride()).unwrap();
        assert_eq!(cache.used_bytes(), two_slots);
        let hit = cache.get_range(&key, len, 5000, 9096).await.unwrap();
        assert_eq!(hit.bytes, data.slice(5000..9096));
        let again = cache.open_range(&key, len, (100, 200), &hit.slot);
        assert_eq!(again, Some(data.slice(100..200)), "the slot opens again");
        assert_eq!(
            cache.open_range(&key, len, (SEGMENT, SEGMENT + 1), &hit.slot),
            None
        );
        assert_eq!(CacheStats::get(&cache.stats().hits), 1);
        let miss = cache
            .get_range(&key, len, 2 * SEGMENT, 2 * SEGMENT + 1)
            .await;
        assert!(miss.is_none());
        let across = cache.get_range(&key, len, SEGMENT - 1, SEGMENT + 1).await;
        assert!(across.is_none(), "one segment at a time");
        assert!(
            cache.get_range(&key, len + 1, 0, 1).await.is_none(),
            "another length"
        );
        assert_eq!(
            CacheStats::get(&cache.stats().hits),
            1,
            "misses left to count"
        );
        // Rebuilt from the file's extents; a damaged unit drops its segment alone.
        drop(cache);
        let cache = DiskCache::open_with(&dirs, 1 << 30, 0.0, framing).unwrap();
        let path = cache.path_of(&key);
        let mut raw = std::fs::read(&path).unwrap();
        raw[SEGMENT + 4000] ^= 1;
        std::fs::write(&path, raw).unwrap();
        let hit = cache.get_range(&key, len, 0, 10).await.unwrap();
        assert_eq!(hit.bytes, data.slice(..10));
        assert!(
            cache
                .get_range(&key, len, SEGMENT, SEGMENT + 10)
                .await
                .is_none()
        );
        assert_eq!(CacheStats::get(&cache.stats().corrupt), 1);
        let slots = cache.get_segments(&key, len, 0, 2).await;
        assert_eq!(slots, vec![Some(seg(0)), None, None]);
    }
}
