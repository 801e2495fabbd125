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

impl strata_vfs::paths::DirCache for DirCache {
    /// The directory at `key` if it was seen less than [`DIR_TTL`] ago.
    fn get(&self, key: &[u8]) -> Option<Ino> {
        let dirs = self.dirs.lock().ok()?;
        dirs.get(key)
            .filter(|(_, seen)| seen.elapsed() < DIR_TTL)
            .map(|(ino, _)| *ino)
    }

    fn put(&self, key: &[u8], ino: Ino) {
        if let Ok(mut dirs) = self.dirs.lock() {
            if dirs.len() >= MAX_ENTRIES {
                dirs.clear();
            }
            dirs.insert(key.to_vec(), (ino, Instant::now()));
        }
    }
}

impl DirCache {
    /// Forget everything (after this client renamed or removed a directory).
    pub fn clear(&self) {
        if let Ok(mut dirs) = self.dirs.lock() {
            dirs.clear();
        }
    }
}
