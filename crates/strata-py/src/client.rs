//! `strata._native.Client`: the namespace calls of the SDK (stat, listdir, mkdir, rename,
//! xattrs, summary, clone, warmup, open). Paths are bytes (the Python layer encodes them
//! with `os.fsencode`); every call runs without the GIL.

use std::sync::Arc;

use pyo3::prelude::*;
use strata_types::{Attr, Errno, FileType, MetaUrl};
use strata_vfs::control_wire::{ControlOp, ControlResult};
use strata_vfs::control_wire::{WarmAction, WarmSpec};
use strata_vfs::{Identity, SetAttr, TimeSet};

use crate::error::{OnPath, Result, SdkError, posix};
use crate::file::NativeFile;
use crate::options::client_options;
use crate::paths::{parent_of, resolve};
use crate::shared::Shared;
use crate::volume::Volume;

/// `os.stat_result` fields in order: mode, ino, dev, nlink, uid, gid, size, atime_ns,
/// mtime_ns, ctime_ns, blocks, rdev.
pub type StatTuple = (u32, u64, u64, u32, u32, u32, u64, i64, i64, i64, u64, u32);

/// A directory entry: name, inode number, kind letter (f, d, l, o), attributes.
pub type EntryTuple = (Vec<u8>, u64, char, Option<StatTuple>);

/// A summary row: path below the asked one, bytes, files, directories.
pub type SummaryTuple = (Vec<u8>, i64, i64, i64);

/// The stat tuple of `attr` for inode number `ino` (as the client numbers it), its
/// owner as this host numbers it (`uid_map`, `gid_map`).
pub fn stat_tuple(identity: &Identity, ino: u64, attr: &Attr) -> StatTuple {
    let (uid, gid) = identity.shown_owner(attr.uid, attr.gid);
    (
        attr.st_mode(),
        ino,
        0,
        attr.nlink,
        uid,
        gid,
        attr.length,
        attr.atime,
        attr.mtime,
        attr.ctime,
        attr.blocks(),
        attr.rdev,
    )
}

fn kind_letter(kind: FileType) -> char {
    match kind {
        FileType::Regular => 'f',
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        _ => 'o',
    }
}

/// A volume opened without FUSE.
#[pyclass(frozen, module = "strata._native")]
#[derive(Debug)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

impl Client {
    /// Run `f` on this process's volume without the GIL.
    fn call<T, F, Fut>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(Arc<Volume>) -> Fut + Send,
        Fut: Future<Output = Result<T>>,
    {
        let shared = &self.shared;
        let done = py.detach(move || -> Result<T> {
            let vol = shared.volume()?;
            vol.run(f(vol.clone()))?
        });
        Ok(done?)
    }
}

fn now_or(ns: Option<i64>) -> TimeSet {
    ns.map_or(TimeSet::Now, TimeSet::At)
}

#[pymethods]
impl Client {
    /// Open the volume at `meta_url` (blocking until the session is registered).
    #[new]
    #[pyo3(signature = (meta_url, options, read_only=false))]
    fn new(
        py: Python<'_>,
        meta_url: String,
        options: &Bound<'_, pyo3::types::PyDict>,
        read_only: bool,
    ) -> PyResult<Client> {
        let (opts, identity) = client_options(options)?;
        let url = MetaUrl::new(meta_url);
        let shared = py.detach(move || Shared::open(url, opts, identity, read_only))?;
        Ok(Client {
            shared: Arc::new(shared),
        })
    }

    /// Flush, close the session; later calls raise ValueError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        Ok(py.detach(move || shared.close())?)
    }

    /// Attributes of `path` (a final symlink followed when `follow`).
    fn stat(&self, py: Python<'_>, path: &[u8], follow: bool) -> PyResult<StatTuple> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            let attr = vol.vfs.getattr(ino).await.on(path)?;
            Ok(stat_tuple(
                &vol.vfs.options().identity,
                vol.vfs.to_front(ino),
                &attr,
            ))
        })
    }

    /// The entries of directory `path`: (name, inode, kind letter f/d/l/o, stat tuple).
    fn scandir(&self, py: Python<'_>, path: &[u8]) -> PyResult<Vec<EntryTuple>> {
        self.call(py, |vol| async move {
            let dir = resolve(&vol, path, true).await?;
            vol.vfs.access(&vol.ctx, dir, 4).await.on(path)?;
            let out = vol
                .vfs
                .list_all(dir)
                .await
                .on(path)?
                .into_iter()
                .map(|e| {
                    let ino = vol.vfs.to_front(e.ino);
                    let stat = e
                        .attr
                        .as_ref()
                        .map(|a| stat_tuple(&vol.vfs.options().identity, ino, a));
                    (e.name, ino, kind_letter(e.kind), stat)
                })
                .collect();
            Ok(out)
        })
    }

    /// mkdir(2); the process's umask applies (through `vol.ctx`).
    fn mkdir(&self, py: Python<'_>, path: &[u8], mode: u32) -> PyResult<()> {
        self.call(py, |vol| async move {
            let (dir, name) = parent_of(&vol, path, Errno::EEXIST).await?;
            let mode = mode & 0o7777;
            vol.vfs.mkdir(&vol.ctx, dir, &name, mode).await.on(path)?;
            Ok(())
        })
    }

    fn rmdir(&self, py: Python<'_>, path: &[u8]) -> PyResult<()> {
        self.call(py, |vol| async move {
            let (dir, name) = parent_of(&vol, path, Errno::EBUSY).await?;
            let removed = vol.vfs.rmdir(&vol.ctx, dir, &name).await.on(path);
            vol.dirs.clear();
            removed
        })
    }

    fn unlink(&self, py: Python<'_>, path: &[u8]) -> PyResult<()> {
        self.call(py, |vol| async move {
            let (dir, name) = parent_of(&vol, path, Errno::EISDIR).await?;
            vol.vfs.unlink(&vol.ctx, dir, &name).await.on(path)
        })
    }

    /// rename(2)/renameat2(2): `flags` 1 = RENAME_NOREPLACE, 2 = RENAME_EXCHANGE.
    fn rename(&self, py: Python<'_>, src: &[u8], dst: &[u8], flags: u32) -> PyResult<()> {
        self.call(py, |vol| async move {
            let (sdir, sname) = parent_of(&vol, src, Errno::EBUSY).await?;
            let (ddir, dname) = parent_of(&vol, dst, Errno::EBUSY).await?;
            let renamed = vol
                .vfs
                .rename(&vol.ctx, sdir, &sname, ddir, &dname, flags)
                .await
                .on(src);
            vol.dirs.clear();
            renamed
        })
    }

    fn symlink(&self, py: Python<'_>, target: &[u8], path: &[u8]) -> PyResult<()> {
        self.call(py, |vol| async move {
            let (dir, name) = parent_of(&vol, path, Errno::EEXIST).await?;
            vol.vfs
                .symlink(&vol.ctx, dir, &name, target)
                .await
                .on(path)?;
            Ok(())
        })
    }

    fn readlink(&self, py: Python<'_>, path: &[u8]) -> PyResult<Vec<u8>> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, false).await?;
            vol.vfs.readlink(ino).await.on(path)
        })
    }

    /// link(2): a new name `dst` for the file `src` (not following a final symlink).
    fn link(&self, py: Python<'_>, src: &[u8], dst: &[u8]) -> PyResult<()> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, src, false).await?;
            let (dir, name) = parent_of(&vol, dst, Errno::EEXIST).await?;
            vol.vfs.link(&vol.ctx, ino, dir, &name).await.on(dst)?;
            Ok(())
        })
    }

    /// chmod / chown / utime / truncate in one: `None` leaves a field alone. Times are
    /// nanoseconds; `touch` sets both times to now.
    #[pyo3(signature = (path, follow, mode=None, uid=None, gid=None, size=None, atime_ns=None, mtime_ns=None, touch=false))]
    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        py: Python<'_>,
        path: &[u8],
        follow: bool,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime_ns: Option<i64>,
        mtime_ns: Option<i64>,
        touch: bool,
    ) -> PyResult<()> {
        let mode = mode
            .map(|m| u16::try_from(m & 0o7777))
            .transpose()
            .map_err(|_| SdkError::BadArgument("mode out of range".into()))?;
        let times = touch || atime_ns.is_some() || mtime_ns.is_some();
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: times.then(|| now_or(atime_ns)),
            mtime: times.then(|| now_or(mtime_ns)),
            ..SetAttr::default()
        };
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            // A new owner is named in this host's numbering.
            let (uid, gid) = vol.vfs.options().identity.to_volume(set.uid, set.gid);
            let set = SetAttr { uid, gid, ..set };
            vol.vfs.setattr(&vol.ctx, ino, &set).await.on(path)?;
            Ok(())
        })
    }

    fn getxattr(
        &self,
        py: Python<'_>,
        path: &[u8],
        name: &[u8],
        follow: bool,
    ) -> PyResult<Vec<u8>> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            vol.vfs.getxattr(&vol.ctx, ino, name, 0).await.on(path)
        })
    }

    /// setxattr(2); `flags` 1 = XATTR_CREATE, 2 = XATTR_REPLACE.
    fn setxattr(
        &self,
        py: Python<'_>,
        path: &[u8],
        name: &[u8],
        value: &[u8],
        flags: u32,
        follow: bool,
    ) -> PyResult<()> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            vol.vfs
                .setxattr(&vol.ctx, ino, name, value, flags)
                .await
                .on(path)
        })
    }

    fn listxattr(&self, py: Python<'_>, path: &[u8], follow: bool) -> PyResult<Vec<Vec<u8>>> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            let names = vol.vfs.listxattr(&vol.ctx, ino, 0).await.on(path)?;
            Ok(names
                .split(|b| *b == 0)
                .filter(|n| !n.is_empty())
                .map(<[u8]>::to_vec)
                .collect())
        })
    }

    fn removexattr(&self, py: Python<'_>, path: &[u8], name: &[u8], follow: bool) -> PyResult<()> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, follow).await?;
            vol.vfs.removexattr(&vol.ctx, ino, name).await.on(path)
        })
    }

    /// Bytes, files and directories below `path`, per directory down to `depth` levels:
    /// (relative path, bytes, files, dirs) rows, `path` itself first.
    fn summary(&self, py: Python<'_>, path: &[u8], depth: usize) -> PyResult<Vec<SummaryTuple>> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, true).await?;
            let op = ControlOp::Summary {
                ino: vol.vfs.to_front(ino),
                depth,
            };
            match tool(&vol, op, path).await? {
                ControlResult::Summary { rows } => Ok(rows
                    .into_iter()
                    .map(|r| (r.path, r.bytes, r.files, r.dirs))
                    .collect()),
                _ => Err(posix(Errno::EIO, path)),
            }
        })
    }

    /// Copy `src` (a file or a whole tree) to `dst` sharing its data: metadata only.
    /// Returns the inodes created.
    fn clone(&self, py: Python<'_>, src: &[u8], dst: &[u8], preserve: bool) -> PyResult<u64> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, src, false).await?;
            let (dir, name) = parent_of(&vol, dst, Errno::EEXIST).await?;
            let op = ControlOp::Clone {
                src: vol.vfs.to_front(ino),
                parent: vol.vfs.to_front(dir),
                name,
                preserve,
            };
            match tool(&vol, op, src).await? {
                ControlResult::Cloned { inodes } => Ok(inodes),
                _ => Err(posix(Errno::EIO, src)),
            }
        })
    }

    /// Fetch the blocks of every file at or below `path` into the cache that owns them
    /// (this client's, or the owners' in a cache group), as `strata warmup` does.
    /// Returns (files, bytes of their blocks).
    fn warmup(&self, py: Python<'_>, path: &[u8]) -> PyResult<(u64, u64)> {
        self.call(py, |vol| async move {
            let ino = resolve(&vol, path, true).await?;
            let spec = WarmSpec {
                action: WarmAction::Warm,
                ranges: Vec::new(),
                threads: WARMUP_THREADS,
                background: false,
                low_priority: false,
            };
            let op = ControlOp::Warmup {
                ino: vol.vfs.to_front(ino),
                spec,
            };
            match tool(&vol, op, path).await? {
                ControlResult::Warmed(r) if r.failed == 0 => Ok((r.files, r.bytes)),
                ControlResult::Warmed(r) => Err(SdkError::Posix {
                    errno: Errno::EIO,
                    path: format!(
                        "{}: {} blocks failed",
                        String::from_utf8_lossy(path),
                        r.failed
                    ),
                }),
                _ => Err(posix(Errno::EIO, path)),
            }
        })
    }

    /// statvfs: (total bytes, available bytes, used inodes, available inodes).
    fn statvfs(&self, py: Python<'_>) -> PyResult<(u64, u64, u64, u64)> {
        self.call(py, |vol| async move {
            let s = vol.vfs.statfs().await.on(b"/")?;
            Ok((s.total_space, s.avail_space, s.used_inodes, s.avail_inodes))
        })
    }

    /// open(2) with `os.O_*` flags; returns the native file (the Python layer buffers it).
    fn open(&self, py: Python<'_>, path: &[u8], flags: u32, mode: u32) -> PyResult<NativeFile> {
        let shared = self.shared.clone();
        let opened = self.call(py, |vol| async move {
            crate::file::open(&vol, path, flags, mode).await
        })?;
        Ok(NativeFile::new(shared, opened, path, flags))
    }
}

/// Blocks warmed at once by `warmup` (as `strata warmup`'s default).
const WARMUP_THREADS: usize = 50;

/// Run a path tool's operation (summary, clone, warmup) in this process, as the caller.
async fn tool(vol: &Volume, op: ControlOp, path: &[u8]) -> Result<ControlResult> {
    vol.vfs
        .run_tool(&vol.ctx, op)
        .await
        .map_err(|(errno, message)| {
            if message.is_empty() {
                posix(errno, path)
            } else {
                SdkError::Posix {
                    errno,
                    path: format!("{}: {message}", String::from_utf8_lossy(path)),
                }
            }
        })
}
