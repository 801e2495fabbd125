//! What the local-directory bucket does itself rather than through `object_store`: small
//! puts and gets done on the calling thread, and deferred durability. A put writes the object's
//! file and renames it into place without waiting for the disk, which is all other
//! clients need to read it; the key is remembered here, and [`LocalSync::sync`] later
//! makes every remembered file and the directories naming them durable, so many objects
//! share the cost of reaching the disk. Only a crash of the machine (not of a process) can
//! lose a put that was not synced.

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::{ObjectError, Result};

/// Puts and gets up to this size are done on the calling thread: a page-cache copy this
/// small costs less than the hand-off to a blocking thread and back. Larger ones go to
/// `object_store`'s blocking pool, where many can wait on the disk at once.
pub(crate) const INLINE_MAX: usize = 256 << 10;
pub(crate) const INLINE_MAX_U64: u64 = 256 << 10;

/// Bytes `range` (clipped at the end) of object `key`, read on the calling thread when
/// that is small: a range of at most [`INLINE_MAX`] bytes (a random read's few segments),
/// or a whole object of at most that size. `None` for larger reads (see [`get`]).
pub(crate) fn get_small(
    root: &Path,
    key: &str,
    range: Option<Range<u64>>,
) -> Result<Option<Bytes>> {
    let path = root.join(key);
    let file = open_object(&path, key)?;
    let range = match range {
        Some(r) if r.end.saturating_sub(r.start) <= INLINE_MAX_U64 => r,
        range => {
            let len = file.metadata().map_err(|e| read_error(&path, e))?.len();
            if len > INLINE_MAX_U64 {
                return Ok(None);
            }
            range.unwrap_or(0..len)
        }
    };
    read_range(&file, range)
        .map(Some)
        .map_err(|e| read_error(&path, e))
}

/// Bytes `range` (clipped at the end; all of it for `None`) of object `key`: a blocking
/// read, for a blocking thread.
pub(crate) fn get(root: &Path, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
    let path = root.join(key);
    let file = open_object(&path, key)?;
    let range = match range {
        Some(r) => r,
        None => 0..file.metadata().map_err(|e| read_error(&path, e))?.len(),
    };
    read_range(&file, range).map_err(|e| read_error(&path, e))
}

fn open_object(path: &Path, key: &str) -> Result<File> {
    File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ObjectError::NotFound(key.into()),
        _ => read_error(path, e),
    })
}

fn read_error(path: &Path, e: std::io::Error) -> ObjectError {
    ObjectError::from_io(format_args!("cannot read {}", path.display()), &e)
}

/// Read bytes `range` of `file` into a buffer the reads fill (never zeroed first).
fn read_range(file: &File, range: Range<u64>) -> std::io::Result<Bytes> {
    let want = range.end.saturating_sub(range.start);
    let mut data = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    let mut reader = file;
    reader.seek(SeekFrom::Start(range.start))?;
    reader.take(want).read_to_end(&mut data)?;
    Ok(Bytes::from(data))
}

/// Write `parts` as object `key` under `root`: into a staging file named `<file>#<n>`
/// (the name `object_store` gives its own staged uploads, which listings skip), then
/// renamed over the object's file, so readers see the old object or the whole new one.
pub(crate) fn put_inline(root: &Path, key: &str, parts: &[Bytes]) -> Result<()> {
    let dest = root.join(key);
    let (mut file, staging) = create_staging(&dest)?;
    let written = parts.iter().try_for_each(|p| file.write_all(p));
    drop(file);
    let outcome = written.and_then(|()| std::fs::rename(&staging, &dest));
    outcome.map_err(|e| {
        let _ = std::fs::remove_file(&staging);
        ObjectError::from_io(format_args!("cannot write {}", dest.display()), &e)
    })
}

fn create_staging(dest: &Path) -> Result<(File, PathBuf)> {
    let failed = |e: std::io::Error| ObjectError::from_io(dest.display(), &e);
    let mut n = 1u32;
    loop {
        let mut name = dest.as_os_str().to_owned();
        name.push(format!("#{n}"));
        let staging = PathBuf::from(name);
        match File::options().write(true).create_new(true).open(&staging) {
            Ok(file) => return Ok((file, staging)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = dest.parent().ok_or_else(|| failed(e))?;
                std::fs::create_dir_all(parent).map_err(failed)?;
            }
            Err(e) => return Err(failed(e)),
        }
    }
}

/// Above this many files a sync flushes the whole file system at once (`syncfs`): one
/// journal commit instead of one per file.
const SYNCFS_ABOVE: usize = 64;

/// A local bucket's directory and the files written since the last sync.
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
        self.unsynced.lock().insert(key.to_string());
    }

    /// The bucket directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Files written and not yet synced.
    pub(crate) fn pending(&self) -> usize {
        self.unsynced.lock().len()
    }

    /// Make every file written so far durable; returns how many there were. If it fails,
    /// the files stay on the list, so the next sync tries them again and reports the
    /// failure again rather than success.
    pub(crate) async fn sync(&self) -> Result<u64> {
        let _turn = self.running.lock().await;
        let keys: Vec<String> = self.unsynced.lock().drain().collect();
        if keys.is_empty() {
            return Ok(0);
        }
        let root = self.root.clone();
        let count = u64::try_from(keys.len()).unwrap_or(u64::MAX);
        let keys = Arc::new(keys);
        let syncing = keys.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            if syncing.len() > SYNCFS_ABOVE {
                sync_file_system(&root)
            } else {
                sync_files(&root, &syncing)
            }
        })
        .await
        .map_err(|e| ObjectError::Other(format!("local sync task failed: {e}")))
        .and_then(|r| r);
        if let Err(e) = outcome {
            self.unsynced.lock().extend(keys.iter().cloned());
            return Err(e);
        }
        Ok(count)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ObjectError {
    ObjectError::from_io(format_args!("cannot sync {}", path.display()), &e)
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

    #[test]
    fn small_gets_read_ranges_and_leave_large_objects_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s"), b"0123456789").unwrap();
        let got = |r| get_small(dir.path(), "s", r).unwrap().unwrap();
        assert_eq!(&got(None)[..], b"0123456789");
        assert_eq!(&got(Some(2..5))[..], b"234");
        assert_eq!(&got(Some(8..100))[..], b"89", "clipped at the end");
        assert!(got(Some(20..30)).is_empty());
        std::fs::write(dir.path().join("big"), vec![1u8; INLINE_MAX + 1]).unwrap();
        assert!(get_small(dir.path(), "big", None).unwrap().is_none());
        assert!(matches!(
            get_small(dir.path(), "nope", None),
            Err(ObjectError::NotFound(_))
        ));
    }

    #[test]
    fn inline_puts_replace_whole_files_and_leave_no_staging() {
        let dir = tempfile::tempdir().unwrap();
        let parts = [Bytes::from_static(b"ab"), Bytes::from_static(b"cd")];
        put_inline(dir.path(), "x/y/obj", &parts).unwrap();
        assert_eq!(std::fs::read(dir.path().join("x/y/obj")).unwrap(), b"abcd");
        // A staging file left by a crash is stepped over, not reused.
        std::fs::write(dir.path().join("x/y/obj#1"), b"stale").unwrap();
        put_inline(dir.path(), "x/y/obj", &[Bytes::from_static(b"new")]).unwrap();
        assert_eq!(std::fs::read(dir.path().join("x/y/obj")).unwrap(), b"new");
        let mut names: Vec<_> = std::fs::read_dir(dir.path().join("x/y"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["obj", "obj#1"]);
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
        assert_eq!(sync.pending(), 1, "a failed sync keeps its files");
        assert!(
            matches!(sync.sync().await, Err(ObjectError::Other(_))),
            "and the next sync reports the failure again, not success"
        );
    }
}
