//! The SDK's directory cache: directories reached by a path, remembered for a second (as
//! a mount's kernel keeps entries for `--entry-cache 1`), so a loop over
//! `/data/shard7/f0 ... f9999` looks up `data` and `shard7` once a second instead of per
//! file. This client's own renames and rmdirs clear it at once; other clients' changes
//! show within the TTL, as through a mount.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strata_types::Ino;

/// How long a directory stays remembered.
pub const DIR_TTL: Duration = Duration::from_secs(1);
/// Entries kept at most (the cache starts over beyond it).
const MAX_ENTRIES: usize = 65_536;

/// Directory paths (normalised names joined by `/`) → inode, with when they were seen.
#[derive(Debug, Default)]
pub struct DirCache {
    dirs: Mutex<HashMap<Vec<u8>, (Ino, Instant)>>,
}

impl DirCache {
    /// The directory at `key` if it was seen less than [`DIR_TTL`] ago.
    pub fn get(&self, key: &[u8]) -> Option<Ino> {
        let dirs = self.dirs.lock().ok()?;
        dirs.get(key)
            .filter(|(_, seen)| seen.elapsed() < DIR_TTL)
            .map(|(ino, _)| *ino)
    }

    pub fn put(&self, key: Vec<u8>, ino: Ino) {
        if let Ok(mut dirs) = self.dirs.lock() {
            if dirs.len() >= MAX_ENTRIES {
                dirs.clear();
            }
            dirs.insert(key, (ino, Instant::now()));
        }
    }

    /// Forget everything (after this client renamed or removed a directory).
    pub fn clear(&self) {
        if let Ok(mut dirs) = self.dirs.lock() {
            dirs.clear();
        }
    }
}

/// The cache key of the first `n` names of a path.
pub fn key(names: &[Vec<u8>]) -> Vec<u8> {
    names.join(&b'/')
}
