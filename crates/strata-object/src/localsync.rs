//! Deferred durability of a local-directory bucket. A put writes the object's file and
//! renames it into place without waiting for the disk, which is all other clients need to
//! read it; the key is remembered here, and [`LocalSync::sync`] later makes every
//! remembered file and the directories naming them durable, so many objects share the cost
//! of reaching the disk. Only a crash of the machine (not of a process) can lose a put that
//! was not synced.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{ObjectError, Result};

/// Above this many files a sync flushes the whole file system at once (`syncfs`): one
/// journal commit instead of one per file.
const SYNCFS_ABOVE: usize = 64;

/// The files of a local bucket written since the last sync.
#[derive(Debug)]
pub(crate) struct LocalSync {
    root: PathBuf,
    unsynced: Mutex<HashSet<String>>,
    /// One sync at a time: a sync that returns has waited for the one that was running
    /// when it was called, so everything put before the call is durable.
    running: tokio::sync::Mutex<()>,
}

impl LocalSync {
    pub(crate) fn new(root: &Path) -> LocalSync {
        LocalSync {
            root: root.to_path_buf(),
            unsynced: Mutex::default(),
            running: tokio::sync::Mutex::const_new(()),
        }
    }

    /// `key` was written and renamed into place.
    pub(crate) fn written(&self, key: &str) {
        if let Ok(mut keys) = self.unsynced.lock() {
            keys.insert(key.to_string());
        }
    }

    /// Files written and not yet synced.
    pub(crate) fn pending(&self) -> usize {
        self.unsynced.lock().map(|k| k.len()).unwrap_or(0)
    }

    /// Make every file written so far durable; returns how many there were.
    pub(crate) async fn sync(&self) -> Result<u64> {
        let _turn = self.running.lock().await;
        let keys: Vec<String> = match self.unsynced.lock() {
            Ok(mut keys) => keys.drain().collect(),
            Err(_) => return Err(ObjectError::Other("local sync list poisoned".into())),
        };
        if keys.is_empty() {
            return Ok(0);
        }
        let root = self.root.clone();
        let count = keys.len() as u64;
        tokio::task::spawn_blocking(move || {
            if keys.len() > SYNCFS_ABOVE {
                sync_file_system(&root)
            } else {
                sync_files(&root, &keys)
            }
        })
        .await
        .map_err(|e| ObjectError::Other(format!("local sync task failed: {e}")))??;
        Ok(count)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ObjectError {
    ObjectError::Other(format!("cannot sync {}: {e}", path.display()))
}

/// `fsync` each file, then each directory between it and the bucket root once (new
/// directories must be named durably by their parents too).
fn sync_files(root: &Path, keys: &[String]) -> Result<()> {
    let mut dirs = BTreeSet::new();
    for key in keys {
        let file = root.join(key);
        match File::open(&file) {
            Ok(f) => f.sync_all().map_err(|e| io_error(&file, e))?,
            // Deleted since it was written: nothing left to make durable.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&file, e)),
        }
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root)) {
            if !dirs.insert(d.to_path_buf()) {
                break; // its ancestors are in already
            }
            dir = d.parent();
        }
    }
    for dir in dirs {
        match File::open(&dir) {
            Ok(d) => d.sync_all().map_err(|e| io_error(&dir, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&dir, e)),
        }
    }
    Ok(())
}

/// Flush the whole file system the bucket is on.
fn sync_file_system(root: &Path) -> Result<()> {
    let dir = File::open(root).map_err(|e| io_error(root, e))?;
    nix::unistd::syncfs(&dir).map_err(|e| io_error(root, e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, key: &str) {
        let path = root.join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    #[tokio::test]
    async fn sync_takes_every_written_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let sync = LocalSync::new(dir.path());
        for key in ["a/1", "a/2", "b/c/3"] {
            write(dir.path(), key);
            sync.written(key);
        }
        sync.written("a/1");
        assert_eq!(sync.pending(), 3);
        assert_eq!(sync.sync().await.unwrap(), 3);
        assert_eq!(sync.pending(), 0);
        assert_eq!(sync.sync().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn files_deleted_before_the_sync_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let sync = LocalSync::new(dir.path());
        write(dir.path(), "gone/1");
        sync.written("gone/1");
        std::fs::remove_dir_all(dir.path().join("gone")).unwrap();
        assert_eq!(sync.sync().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn many_files_are_synced_with_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let sync = LocalSync::new(dir.path());
        for i in 0..(SYNCFS_ABOVE + 5) {
            let key = format!("d{}/{i}", i % 7);
            write(dir.path(), &key);
            sync.written(&key);
        }
        assert_eq!(sync.sync().await.unwrap(), (SYNCFS_ABOVE + 5) as u64);
        assert_eq!(sync.pending(), 0);
    }

    #[tokio::test]
    async fn an_unreadable_file_fails_the_sync() {
        let dir = tempfile::tempdir().unwrap();
        let sync = LocalSync::new(dir.path());
        write(dir.path(), "f");
        // A key naming a path through a regular file cannot be opened (ENOTDIR).
        sync.written("f/under");
        assert!(matches!(sync.sync().await, Err(ObjectError::Other(_))));
    }
}
