//! `strata._native.NativeFile`: positional reads and writes on an open handle. The Python
//! layer (`strata._io`) keeps the position and puts `io.Buffered*` and `TextIOWrapper`
//! on top, so file objects behave like Python's own. A handle opened for reading before
//! a `fork()` is reopened in the child on first use; one opened for writing is not (its
//! buffered writes belong to the parent) and fails with EBADF there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strata_types::{Errno, FileType, Ino};
use strata_vfs::SetAttr;

use crate::error::{OnPath, Result, SdkError, posix};
use crate::paths::{parent_of, resolve_attr};
use crate::shared::Shared;
use crate::volume::Volume;

const O_ACCMODE: u32 = 0o3;
const O_CREAT: u32 = 0o100;
const O_EXCL: u32 = 0o200;
const O_TRUNC: u32 = 0o1000;
const O_APPEND: u32 = 0o2000;
const O_DIRECTORY: u32 = 0o200000;
const O_NOFOLLOW: u32 = 0o400000;
/// The largest piece one VFS read or write is asked for.
const PIECE: usize = 8 << 20;

/// A handle in the process that opened it.
#[derive(Debug)]
pub struct Opened {
    vol: Arc<Volume>,
    fh: u64,
    ino: Ino,
    /// The length at open: how much a whole-file read asks for first.
    length_hint: u64,
    released: AtomicBool,
}

impl Drop for Opened {
    fn drop(&mut self) {
        // A file dropped without close(): release it in the background. In a forked
        // child the handle belongs to the parent's session: nothing to do here.
        if !self.released.swap(true, Ordering::AcqRel) && self.vol.is_current() {
            let (vfs, fh) = (self.vol.vfs.clone(), self.fh);
            self.vol.spawn(async move {
                if vfs.release(fh).await.is_err() {
                    // Reported by the periodic sync's retry and its log.
                }
            });
        }
    }
}

/// open(2): look the name up (creating it with `O_CREAT`), check `O_EXCL`, `O_DIRECTORY`,
/// `O_NOFOLLOW`, open it and truncate it with `O_TRUNC`.
pub async fn open(vol: &Arc<Volume>, path: &[u8], flags: u32, mode: u32) -> Result<Opened> {
    let began = std::time::Instant::now();
    let writing = flags & O_ACCMODE != 0;
    let follow = flags & O_NOFOLLOW == 0;
    let found = resolve_attr(vol, path, follow).await;
    let (ino, (fh, length_hint), created) = match found {
        Err(SdkError::Posix { errno, .. }) if errno == Errno::ENOENT && flags & O_CREAT != 0 => {
            let (dir, name) = parent_of(vol, path, Errno::EISDIR).await?;
            let mode = mode & 0o7777;
            match vol.vfs.create(&vol.ctx, dir, &name, mode).await {
                Ok((entry, fh)) => (entry.ino, (fh, 0), true),
                // Created by someone else in between: open theirs (unless O_EXCL).
                Err(e) if e == Errno::EEXIST && flags & O_EXCL == 0 => {
                    let (ino, attr) = resolve_attr(vol, path, follow).await?;
                    (
                        ino,
                        open_existing(vol, (ino, attr), path, flags, began).await?,
                        false,
                    )
                }
                Err(e) => return Err(posix(e, path)),
            }
        }
        Err(e) => return Err(e),
        Ok(_) if flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL => {
            return Err(posix(Errno::EEXIST, path));
        }
        Ok((ino, attr)) => (
            ino,
            open_existing(vol, (ino, attr), path, flags, began).await?,
            false,
        ),
    };
    let opened = Opened {
        vol: vol.clone(),
        fh,
        ino,
        length_hint,
        released: AtomicBool::new(false),
    };
    if writing && flags & O_TRUNC != 0 && !created {
        let set = SetAttr {
            size: Some(0),
            size_from_open_file: true,
            ..SetAttr::default()
        };
        vol.vfs.setattr(&vol.ctx, ino, &set).await.on(path)?;
    }
    Ok(opened)
}

/// Open `ino` (its attributes from the lookup that found it during this open, which
/// began at `began`, when there was one); returns the handle and the file's length.
async fn open_existing(
    vol: &Volume,
    (ino, attr): (Ino, Option<strata_types::Attr>),
    path: &[u8],
    flags: u32,
    began: std::time::Instant,
) -> Result<(u64, u64)> {
    let kind = match attr {
        Some(a) => a.kind,
        None => vol.vfs.getattr(ino).await.on(path)?.kind,
    };
    match kind {
        FileType::Directory => return Err(posix(Errno::EISDIR, path)),
        FileType::Symlink => return Err(posix(Errno::ELOOP, path)),
        _ if flags & O_DIRECTORY != 0 => return Err(posix(Errno::ENOTDIR, path)),
        _ => {}
    }
    let (fh, attr) = vol
        .vfs
        .open_after(
            &vol.ctx,
            ino,
            flags & !(O_CREAT | O_EXCL | O_TRUNC),
            Some(began),
        )
        .await
        .on(path)?;
    Ok((fh, attr.length))
}

/// An open file of the volume.
#[pyclass(frozen, module = "strata._native")]
#[derive(Debug)]
pub struct NativeFile {
    shared: Arc<Shared>,
    state: ArcSwap<Opened>,
    path: Vec<u8>,
    writable: bool,
    append: bool,
    closed: AtomicBool,
}

impl NativeFile {
    pub fn new(shared: Arc<Shared>, opened: Opened, path: &[u8], flags: u32) -> NativeFile {
        NativeFile {
            shared,
            state: ArcSwap::from_pointee(opened),
            path: path.to_vec(),
            writable: flags & O_ACCMODE != 0,
            append: flags & O_APPEND != 0,
            closed: AtomicBool::new(false),
        }
    }

    /// The handle for this process: reopened by inode after a fork (reads only).
    fn handle(&self) -> Result<Arc<Opened>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SdkError::Closed("file"));
        }
        let seen = self.state.load_full();
        if seen.vol.is_current() {
            return Ok(seen);
        }
        if self.writable {
            return Err(posix(Errno::EBADF, &self.path));
        }
        let vol = self.shared.volume()?;
        let (fh, attr) =
            vol.run(async { vol.vfs.open(&vol.ctx, seen.ino, 0).await.on(&self.path) })??;
        let fresh = Arc::new(Opened {
            vol,
            fh,
            ino: seen.ino,
            length_hint: attr.length,
            released: AtomicBool::new(false),
        });
        self.state.store(fresh.clone());
        Ok(fresh)
    }

    /// Run `f` on this process's handle without the GIL.
    fn call<T, F, Fut>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(Arc<Opened>) -> Fut + Send,
        Fut: Future<Output = Result<T>>,
    {
        let done = py.detach(move || -> Result<T> {
            let h = self.handle()?;
            let vol = h.vol.clone();
            vol.run(f(h))?
        });
        Ok(done?)
    }
}

/// Up to `size` bytes at `off` (fewer only at the end of the file), as the pieces the
/// VFS returned (no copy yet), and their total length.
async fn read_at(h: &Opened, path: &[u8], off: u64, size: usize) -> Result<(Vec<Bytes>, usize)> {
    let mut pieces = Vec::new();
    let mut got = 0usize;
    while got < size {
        let want = (size - got).min(PIECE);
        let at = off
            .checked_add(u64::try_from(got).map_err(|_| posix(Errno::EOVERFLOW, path))?)
            .ok_or_else(|| posix(Errno::EOVERFLOW, path))?;
        let piece = u32::try_from(want).map_err(|_| posix(Errno::EINVAL, path))?;
        let data = h.vol.vfs.read(h.fh, at, piece).await.on(path)?;
        if data.is_empty() {
            break;
        }
        got += data.len();
        pieces.push(data);
    }
    Ok((pieces, got))
}

/// One Python `bytes` holding `pieces` (one copy, straight into the object).
fn to_pybytes<'py>(py: Python<'py>, pieces: &[Bytes], len: usize) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, len, |dst| {
        let mut at = 0;
        for p in pieces {
            dst[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        Ok(())
    })
}

async fn write_at(h: &Opened, path: &[u8], off: u64, data: &[u8]) -> Result<usize> {
    let mut done = 0usize;
    for piece in data.chunks(PIECE) {
        let at = off
            .checked_add(u64::try_from(done).map_err(|_| posix(Errno::EFBIG, path))?)
            .ok_or_else(|| posix(Errno::EFBIG, path))?;
        let n = h.vol.vfs.write(h.fh, at, piece).await.on(path)?;
        done += usize::try_from(n).map_err(|_| posix(Errno::EIO, path))?;
    }
    Ok(done)
}

fn length(n: u64, path: &[u8]) -> Result<usize> {
    usize::try_from(n).map_err(|_| posix(Errno::EOVERFLOW, path))
}

#[pymethods]
impl NativeFile {
    /// Up to `size` bytes at `offset`.
    fn pread<'py>(
        &self,
        py: Python<'py>,
        size: usize,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let path = &self.path;
        let (pieces, len) =
            self.call(py, |h| async move { read_at(&h, path, offset, size).await })?;
        to_pybytes(py, &pieces, len)
    }

    /// Fill `buf` from `offset`: returns (bytes read, None) when it was filled, or (bytes
    /// read, the bytes) at the end of the file, for the caller to copy (a buffer cannot
    /// be filled in part without unsafe code).
    fn readinto<'py>(
        &self,
        py: Python<'py>,
        buf: PyBuffer<u8>,
        offset: u64,
    ) -> PyResult<(usize, Option<Bound<'py, PyBytes>>)> {
        let size = buf.len_bytes();
        let path = &self.path;
        let (pieces, len) =
            self.call(py, |h| async move { read_at(&h, path, offset, size).await })?;
        if len < size {
            return Ok((len, Some(to_pybytes(py, &pieces, len)?)));
        }
        match pieces.as_slice() {
            [one] => buf.copy_from_slice(py, one)?,
            many => buf.copy_from_slice(py, &many.concat())?,
        }
        Ok((len, None))
    }

    /// Everything from `offset` to the end of the file.
    fn readall<'py>(&self, py: Python<'py>, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let path = &self.path;
        let (pieces, len) = self.call(py, |h| async move {
            // Up to the length seen at open, then on until a read comes back empty: the
            // file may have changed since.
            let want = length(h.length_hint.saturating_sub(offset), path)?;
            let (mut pieces, mut got) = read_at(&h, path, offset, want).await?;
            // The file may have grown since: read on to its end.
            loop {
                let at = offset + u64::try_from(got).map_err(|_| posix(Errno::EOVERFLOW, path))?;
                let (more, n) = read_at(&h, path, at, PIECE).await?;
                if n == 0 {
                    break;
                }
                got += n;
                pieces.extend(more);
            }
            Ok((pieces, got))
        })?;
        to_pybytes(py, &pieces, len)
    }

    /// Write `data` at `offset` (at the end of the file if opened with O_APPEND); returns
    /// (bytes written, the offset after them).
    fn pwrite(&self, py: Python<'_>, data: PyBuffer<u8>, offset: u64) -> PyResult<(usize, u64)> {
        let bytes = data.to_vec(py)?;
        let (path, append) = (&self.path, self.append);
        self.call(py, |h| async move {
            let at = if append {
                h.vol.vfs.getattr(h.ino).await.on(path)?.length
            } else {
                offset
            };
            let n = write_at(&h, path, at, &bytes).await?;
            let end = at + u64::try_from(n).map_err(|_| posix(Errno::EFBIG, path))?;
            Ok((n, end))
        })
    }

    /// The file's length as this client sees it (its own unflushed writes included).
    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        let path = &self.path;
        self.call(py, |h| async move {
            Ok(h.vol.vfs.getattr(h.ino).await.on(path)?.length)
        })
    }

    /// ftruncate(2).
    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        if !self.writable {
            return Err(posix(Errno::EBADF, &self.path).into());
        }
        let path = &self.path;
        self.call(py, |h| async move {
            let set = SetAttr {
                size: Some(size),
                size_from_open_file: true,
                ..SetAttr::default()
            };
            h.vol.vfs.setattr(&h.vol.ctx, h.ino, &set).await.on(path)?;
            Ok(())
        })
    }

    /// Commit buffered writes so other clients see them.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let path = &self.path;
        self.call(
            py,
            |h| async move { h.vol.vfs.flush(h.fh, 0).await.on(path) },
        )
    }

    /// fsync(2): committed and durable.
    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        let path = &self.path;
        self.call(py, |h| async move { h.vol.vfs.fsync(h.fh).await.on(path) })
    }

    /// Commit and release the handle; a failure to commit is raised (the data is kept
    /// and retried by the client's periodic sync). Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let path = &self.path;
        let done = self.call(py, |h| async move {
            let flushed = h.vol.vfs.flush(h.fh, 0).await.on(path);
            let released = if h.released.swap(true, Ordering::AcqRel) {
                Ok(())
            } else {
                h.vol.vfs.release(h.fh).await.on(path)
            };
            flushed.and(released)
        });
        self.closed.store(true, Ordering::Release);
        done
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The inode number.
    #[getter]
    fn ino(&self) -> u64 {
        let h = self.state.load();
        h.vol.vfs.to_front(h.ino)
    }
}
