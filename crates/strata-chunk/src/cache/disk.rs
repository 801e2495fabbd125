//! The local disk block cache (`--cache-dir a:b`, `--cache-size`, `--free-space-ratio`).
//!
//! Each block is a file `{dir}/raw/{object key}` holding the block's bytes followed by
//! their CRC32C (4 bytes, little-endian), see FORMAT.md. Files are written to a temporary
//! name and renamed, so a crash never leaves a half-written block under its real name. The
//! index (LRU order and sizes) lives in memory and is rebuilt by scanning the directories
//! at start. A file that fails its checksum or is truncated is dropped and reported as a
//! miss, so the block is read again from the object store.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;

use super::{BlockCache, CacheStats, Lru};

const TRAILER: usize = 4;
const TMP_MARK: &str = ".tmp.";

/// Blocks cached in local directories.
#[derive(Debug)]
pub struct DiskCache {
    dirs: Vec<PathBuf>,
    capacity: u64,
    free_ratio: f64,
    lru: Mutex<Lru>,
    stats: CacheStats,
}

impl DiskCache {
    /// Open (creating) the cache directories and index what they already hold. Blocks
    /// beyond `capacity` bytes are evicted; `free_ratio` (0..1) of each disk is kept free.
    pub fn open(dirs: &[PathBuf], capacity: u64, free_ratio: f64) -> std::io::Result<DiskCache> {
        let mut lru = Lru::default();
        for dir in dirs {
            let raw = dir.join("raw");
            // Cached blocks are user data: the directories are the owner's alone.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&raw)?;
            scan(&raw, &raw, &mut lru)?;
        }
        let cache = DiskCache {
            dirs: dirs.to_vec(),
            capacity,
            free_ratio: free_ratio.clamp(0.0, 0.99),
            lru: Mutex::new(lru),
            stats: CacheStats::default(),
        };
        cache.evict_to_fit(0);
        Ok(cache)
    }

    /// Blocks indexed.
    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `key`'s block lives.
    pub fn path_of(&self, key: &str) -> PathBuf {
        let n = self.dirs.len().max(1);
        let dir = &self.dirs[crc32c::crc32c(key.as_bytes()) as usize % n];
        dir.join("raw").join(key)
    }

    fn forget(&self, key: &str) {
        self.lru.lock().remove(key);
    }

    /// Evict until `incoming` more bytes fit within the capacity and the disks keep their
    /// free-space ratio.
    fn evict_to_fit(&self, incoming: u64) {
        loop {
            let victim = {
                let mut lru = self.lru.lock();
                let over = lru.total() + incoming > self.capacity;
                if !over && !self.disks_too_full() {
                    return;
                }
                match lru.pop_oldest() {
                    Some((key, _)) => key,
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
}

/// Index every block file under `root`; remove leftovers of interrupted writes.
fn scan(root: &Path, dir: &Path, lru: &mut Lru) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = entry.metadata()?;
        if meta.is_dir() {
            scan(root, &path, lru)?;
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(TMP_MARK) || meta.len() < TRAILER as u64 {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if let Ok(rel) = path.strip_prefix(root) {
            lru.insert(&rel.to_string_lossy(), meta.len() - TRAILER as u64);
        }
    }
    Ok(())
}

fn verify(file: Vec<u8>) -> Option<Bytes> {
    if file.len() < TRAILER {
        return None;
    }
    let (data, trailer) = file.split_at(file.len() - TRAILER);
    let stored = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if crc32c::crc32c(data) != stored {
        return None;
    }
    let mut file = file;
    file.truncate(file.len() - TRAILER);
    Some(Bytes::from(file))
}

async fn write_atomically(path: &Path, data: &Bytes) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .await?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!("{TMP_MARK}{:08x}", rand::random::<u32>()));
    let (tmp, path) = (PathBuf::from(tmp), path.to_path_buf());
    let data = data.clone();
    // One blocking task for the whole write: no intermediate copy of the block.
    let written = tokio::task::spawn_blocking(move || {
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&data)?;
            file.write_all(&crc32c::crc32c(&data).to_le_bytes())?;
            std::fs::rename(&tmp, &path)
        };
        let result = write();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    })
    .await;
    written.unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

#[async_trait]
impl BlockCache for DiskCache {
    async fn get(&self, key: &str) -> Option<Bytes> {
        let known = self.lru.lock().touch(key);
        if !known {
            CacheStats::bump(&self.stats.misses);
            return None;
        }
        let path = self.path_of(key);
        let found = match tokio::fs::read(&path).await {
            Ok(file) => {
                let verified = verify(file);
                if verified.is_none() {
                    tracing::warn!("cache file {} is damaged: dropped", path.display());
                    CacheStats::bump(&self.stats.corrupt);
                    let _ = tokio::fs::remove_file(&path).await;
                }
                verified
            }
            Err(_) => None,
        };
        if found.is_none() {
            self.forget(key);
        }
        self.stats.record_lookup(found.is_some());
        found
    }

    async fn put(&self, key: &str, data: Bytes) {
        let size = data.len() as u64;
        let cached = self.lru.lock().contains(key);
        if cached || size > self.capacity {
            return;
        }
        self.evict_to_fit(size);
        let path = self.path_of(key);
        match write_atomically(&path, &data).await {
            Ok(()) => {
                self.lru.lock().insert(key, size);
            }
            Err(e) => tracing::warn!("cannot write cache file {}: {e}", path.display()),
        }
    }

    async fn remove(&self, key: &str) {
        self.forget(key);
        let _ = tokio::fs::remove_file(self.path_of(key)).await;
    }

    fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn used_bytes(&self) -> u64 {
        self.lru.lock().total()
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
        assert_eq!(mode(&root.join("raw")), 0o700);
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
        let stray = paths[0].join("raw/chunks/0/0/x.tmp.1234");
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
        cache.put("k/a", block(100, 1)).await;
        cache.put("k/b", block(100, 2)).await;
        assert_eq!(cache.len(), 1);
        assert!(cache.get("k/a").await.is_none());
        let roomy = DiskCache::open(&[dir.path().to_path_buf()], 1 << 30, 0.0).unwrap();
        roomy.put("k/c", block(100, 3)).await;
        assert_eq!(roomy.len(), 2, "without the ratio both stay");
    }

    #[tokio::test]
    async fn damaged_files_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(&[dir.path().to_path_buf()], 1 << 20, 0.0).unwrap();
        cache.put("k/a", block(1000, 7)).await;
        cache.put("k/b", block(1000, 8)).await;
        let a = cache.path_of("k/a");
        let mut bytes = std::fs::read(&a).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&a, bytes).unwrap();
        let b = cache.path_of("k/b");
        let bytes = std::fs::read(&b).unwrap();
        std::fs::write(&b, &bytes[..500]).unwrap();
        assert!(cache.get("k/a").await.is_none(), "flipped bit detected");
        assert!(cache.get("k/b").await.is_none(), "truncation detected");
        assert_eq!(CacheStats::get(&cache.stats().corrupt), 2);
        assert!(!a.exists() && !b.exists(), "damaged files removed");
        cache.put("k/a", block(1000, 7)).await;
        assert_eq!(
            cache.get("k/a").await.unwrap(),
            block(1000, 7),
            "re-cached after a re-read"
        );
    }
}
