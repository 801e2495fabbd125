//! The open-file cache: for files this client has open, their length and chunk slice
//! lists, so sequential reads cost no metadata round trip per request. Entries are filled
//! on first use and dropped whenever this client changes the file, at every open
//! (close-to-open: an open sees what other clients closed before it) and at the last
//! close. A generation number per file keeps a read that raced with a change from
//! storing what it fetched before the change.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use strata_types::{Ino, Slice};

#[derive(Debug, Default)]
struct CachedFile {
    generation: u64,
    length: Option<u64>,
    chunks: HashMap<u32, Arc<Vec<Slice>>>,
}

/// Cached length and slice lists of open files.
#[derive(Debug, Default)]
pub(crate) struct OpenFileCache {
    files: Mutex<HashMap<Ino, CachedFile>>,
    next_generation: std::sync::atomic::AtomicU64,
}

impl OpenFileCache {
    /// The generation to pass to the setters after fetching from metadata.
    pub fn generation(&self, ino: Ino) -> u64 {
        self.files.lock().get(&ino).map_or(0, |c| c.generation)
    }

    pub fn length(&self, ino: Ino) -> Option<u64> {
        self.files.lock().get(&ino).and_then(|c| c.length)
    }

    pub fn chunk(&self, ino: Ino, index: u32) -> Option<Arc<Vec<Slice>>> {
        self.files
            .lock()
            .get(&ino)
            .and_then(|c| c.chunks.get(&index).cloned())
    }

    pub fn set_length(&self, ino: Ino, generation: u64, length: u64) {
        self.update(ino, generation, |c| c.length = Some(length));
    }

    pub fn set_chunk(&self, ino: Ino, generation: u64, index: u32, slices: Arc<Vec<Slice>>) {
        self.update(ino, generation, |c| {
            c.chunks.insert(index, slices);
        });
    }

    fn update(&self, ino: Ino, generation: u64, f: impl FnOnce(&mut CachedFile)) {
        let mut files = self.files.lock();
        let entry = files.entry(ino).or_default();
        if entry.generation == generation {
            f(entry);
        }
    }

    /// Forget what is cached about `ino` (it changed, or is being reopened).
    pub fn invalidate(&self, ino: Ino) {
        let generation = self
            .next_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        self.files.lock().insert(
            ino,
            CachedFile {
                generation,
                ..CachedFile::default()
            },
        );
    }

    /// Drop the entry of a file no longer open here.
    pub fn remove(&self, ino: Ino) {
        self.files.lock().remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_during_a_fetch_is_not_overwritten_by_it() {
        let cache = OpenFileCache::default();
        let ino = Ino(5);
        let before = cache.generation(ino);
        cache.invalidate(ino);
        cache.set_length(ino, before, 10);
        assert_eq!(cache.length(ino), None, "stale fetch dropped");
        let now = cache.generation(ino);
        cache.set_length(ino, now, 20);
        cache.set_chunk(ino, now, 0, Arc::new(vec![Slice::hole(0, 1)]));
        assert_eq!(cache.length(ino), Some(20));
        assert!(cache.chunk(ino, 0).is_some());
        cache.remove(ino);
        assert_eq!(cache.length(ino), None);
    }
}
