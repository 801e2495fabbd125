//! Files opened by GET and PUT. A whole-file PUT writes a temporary file in the server's
//! hidden directory and renames it over the target only when the body arrived in full and
//! was committed: a reader sees the old file or the new one, never a part, and an upload
//! cut short leaves the old file as it was. The permission bits and dead properties of
//! the file replaced carry over to the new one. A ranged PUT (`Content-Range`, SabreDAV's PATCH) writes in
//! place.

use std::io::SeekFrom;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use dav_server::davpath::DavPath;
use dav_server::fs::{DavFile, DavMetaData, FsError, FsFuture, FsResult, OpenOptions};
use futures::FutureExt;
use strata_types::{Errno, Ino};
use strata_vfs::{Ctx, SetAttr, Vfs};

use crate::error::fs_error;
use crate::fs::{FILE_MODE, Meta, VolumeFs};
use crate::props::copy_props;

/// O_RDONLY / O_WRONLY.
const O_RDONLY: u32 = 0;
const O_WRONLY: u32 = 1;
/// RENAME_NOREPLACE.
const NOREPLACE: u32 = 1;
/// Largest single read handed to the VFS.
const MAX_READ: usize = 4 << 20;

/// A whole-file PUT's temporary file and where it goes.
#[derive(Debug)]
struct Pending {
    tmp_dir: Ino,
    tmp_name: Vec<u8>,
    parent: Ino,
    name: Vec<u8>,
    /// The file being replaced, if it has extended attributes (its dead properties
    /// carry over).
    replaced: Option<Ino>,
    /// The permission bits of the file being replaced (kept, as a truncating write
    /// would keep them).
    replaced_mode: Option<u16>,
    /// Fail rather than replace a file that appeared meanwhile (`If-None-Match: *`).
    create_new: bool,
    /// The length the request announced: a body that ends short is not installed.
    expected: Option<u64>,
    installed: bool,
}

/// An open file of one request.
#[derive(Debug)]
pub(crate) struct File {
    vfs: Arc<Vfs>,
    ctx: Ctx,
    fs: VolumeFs,
    fh: u64,
    ino: Ino,
    pos: u64,
    pending: Option<Pending>,
    /// Released (and a temporary file removed) already.
    closed: bool,
}

/// Open `path` as dav-server asks.
pub(crate) async fn open(
    fs: &VolumeFs,
    path: &DavPath,
    options: OpenOptions,
) -> FsResult<Box<dyn DavFile>> {
    let file = if !options.write {
        open_read(fs, path).await
    } else if options.truncate && !options.append {
        open_replace(fs, path, &options).await
    } else {
        open_in_place(fs, path, &options).await
    };
    file.map(|f| Box::new(f) as Box<dyn DavFile>)
        .map_err(fs_error)
}

fn new_file(fs: &VolumeFs, fh: u64, ino: Ino, pending: Option<Pending>) -> File {
    File {
        vfs: fs.vol.vfs.clone(),
        ctx: fs.ctx().clone(),
        fs: fs.clone(),
        fh,
        ino,
        pos: 0,
        pending,
        closed: false,
    }
}

async fn open_read(fs: &VolumeFs, path: &DavPath) -> Result<File, Errno> {
    let (ino, attr) = fs.stat_target(path).await?;
    if attr.is_dir() {
        return Err(Errno::EISDIR);
    }
    let (fh, _) = fs.vfs().open(fs.ctx(), ino, O_RDONLY).await?;
    Ok(new_file(fs, fh, ino, None))
}

/// A whole-file PUT: a temporary file, installed at flush.
async fn open_replace(fs: &VolumeFs, path: &DavPath, o: &OpenOptions) -> Result<File, Errno> {
    let (parent, name) = fs.parent_of(path).await?;
    // Whether the name is taken is checked again by the rename at the end.
    let replaced = match fs.entry_at(path, parent, &name).await? {
        Some(e) if e.attr.is_dir() => return Err(Errno::EISDIR),
        Some(_) if o.create_new => return Err(Errno::EEXIST),
        Some(e) => Some(e),
        None if !o.create && !o.create_new => return Err(Errno::ENOENT),
        None => None,
    };
    let tmp_dir = fs.tmp_dir().await?;
    let tmp_name = uuid::Uuid::new_v4().simple().to_string().into_bytes();
    let (entry, fh) = fs
        .vfs()
        .create(fs.ctx(), tmp_dir, &tmp_name, FILE_MODE)
        .await?;
    let pending = Pending {
        tmp_dir,
        tmp_name,
        parent,
        name,
        replaced_mode: replaced.as_ref().map(|e| e.attr.mode),
        replaced: replaced.filter(|e| e.attr.xattrs).map(|e| e.ino),
        create_new: o.create_new,
        expected: o.size,
        installed: false,
    };
    Ok(new_file(fs, fh, entry.ino, Some(pending)))
}

/// A ranged PUT or an append: writes go to the file itself.
async fn open_in_place(fs: &VolumeFs, path: &DavPath, o: &OpenOptions) -> Result<File, Errno> {
    let (parent, name) = fs.parent_of(path).await?;
    let (ino, fh) = match fs.vfs().lookup(fs.ctx(), parent, &name).await {
        Ok(e) if e.attr.is_dir() => return Err(Errno::EISDIR),
        Ok(_) if o.create_new => return Err(Errno::EEXIST),
        Ok(e) => (e.ino, fs.vfs().open(fs.ctx(), e.ino, O_WRONLY).await?.0),
        Err(Errno::ENOENT) if o.create || o.create_new => {
            fs.changed();
            let (e, fh) = fs.vfs().create(fs.ctx(), parent, &name, FILE_MODE).await?;
            (e.ino, fh)
        }
        Err(e) => return Err(e),
    };
    let mut file = new_file(fs, fh, ino, None);
    if o.append {
        file.pos = fs.vfs().getattr(ino).await?.length;
    } else if o.truncate {
        let set = SetAttr {
            size: Some(0),
            size_from_open_file: true,
            ..SetAttr::default()
        };
        fs.vfs().setattr(fs.ctx(), ino, &set).await?;
    }
    Ok(file)
}

impl File {
    async fn write_all(&mut self, data: &[u8]) -> Result<(), Errno> {
        let mut done = 0;
        while done < data.len() {
            let n = self.vfs.write(self.fh, self.pos, &data[done..]).await?;
            if n == 0 {
                return Err(Errno::EIO);
            }
            let n = usize::try_from(n).map_err(|_| Errno::EIO)?;
            done += n;
            self.pos = self
                .pos
                .checked_add(u64::try_from(n).map_err(|_| Errno::EIO)?)
                .ok_or(Errno::EFBIG)?;
        }
        Ok(())
    }

    async fn read_some(&mut self, count: usize) -> Result<Bytes, Errno> {
        let size = u32::try_from(count.min(MAX_READ)).map_err(|_| Errno::EINVAL)?;
        let data = self.vfs.read(self.fh, self.pos, size).await?;
        let len = u64::try_from(data.len()).map_err(|_| Errno::EIO)?;
        self.pos = self.pos.checked_add(len).ok_or(Errno::EIO)?;
        Ok(data)
    }

    async fn seek_to(&mut self, pos: SeekFrom) -> Result<u64, Errno> {
        let (base, delta) = match pos {
            SeekFrom::Start(n) => (n, 0),
            SeekFrom::Current(d) => (self.pos, d),
            SeekFrom::End(d) => (self.vfs.getattr(self.ino).await?.length, d),
        };
        let to = base.checked_add_signed(delta).ok_or(Errno::EINVAL)?;
        self.pos = to;
        Ok(to)
    }

    /// Commit what was written; a whole-file PUT's temporary file takes the target's
    /// place.
    async fn commit(&mut self) -> Result<(), Errno> {
        self.vfs.flush(self.fh, 0).await?;
        let Some(p) = self.pending.as_mut() else {
            return Ok(());
        };
        if p.installed {
            return Ok(());
        }
        if p.expected.is_some_and(|n| n != self.pos) {
            return Err(Errno::EIO);
        }
        if let Some(old) = p.replaced {
            copy_props(&self.vfs, &self.ctx, old, self.ino).await?;
        }
        let created = FILE_MODE & !u32::from(self.ctx.umask);
        if let Some(mode) = p.replaced_mode.filter(|m| u32::from(*m) != created) {
            let set = SetAttr {
                mode: Some(mode),
                ..SetAttr::default()
            };
            self.vfs.setattr(&self.ctx, self.ino, &set).await?;
        }
        let flags = if p.create_new { NOREPLACE } else { 0 };
        self.fs.changed();
        self.vfs
            .rename(&self.ctx, p.tmp_dir, &p.tmp_name, p.parent, &p.name, flags)
            .await?;
        p.installed = true;
        Ok(())
    }
}

impl Drop for File {
    /// Release the handle, and remove a temporary file never installed.
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("a WebDAV file was dropped outside the runtime: handle leaked");
            return;
        };
        let (vfs, ctx, fh) = (self.vfs.clone(), self.ctx.clone(), self.fh);
        let discard = self
            .pending
            .take()
            .filter(|p| !p.installed)
            .map(|p| (p.tmp_dir, p.tmp_name));
        runtime.spawn(async move {
            if let Err(e) = vfs.release(fh).await {
                tracing::warn!("closing a WebDAV file: errno {e}");
            }
            if let Some((dir, name)) = discard
                && let Err(e) = vfs.unlink(&ctx, dir, &name).await
            {
                tracing::warn!("removing an unfinished upload: errno {e}");
            }
        });
    }
}

impl DavFile for File {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        async move {
            let attr = self.vfs.getattr(self.ino).await.map_err(fs_error)?;
            let meta: Box<dyn DavMetaData> = Box::new(Meta {
                ino: self.ino,
                attr,
            });
            Ok(meta)
        }
        .boxed()
    }

    fn write_buf(&mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async move {
            let data = buf.copy_to_bytes(buf.remaining());
            self.write_all(&data).await.map_err(fs_error)
        }
        .boxed()
    }

    fn write_bytes(&mut self, buf: Bytes) -> FsFuture<'_, ()> {
        async move { self.write_all(&buf).await.map_err(fs_error) }.boxed()
    }

    fn read_bytes(&mut self, count: usize) -> FsFuture<'_, Bytes> {
        async move { self.read_some(count).await.map_err(fs_error) }.boxed()
    }

    fn seek(&mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        async move { self.seek_to(pos).await.map_err(fs_error) }.boxed()
    }

    fn flush(&mut self) -> FsFuture<'_, ()> {
        async move {
            self.commit().await.map_err(|e| match e {
                // The target appeared while an `If-None-Match: *` upload ran.
                Errno::EEXIST => FsError::Exists,
                e => fs_error(e),
            })
        }
        .boxed()
    }
}
