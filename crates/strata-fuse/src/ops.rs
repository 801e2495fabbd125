//! `fuser::Filesystem` for [`StrataFs`]: each call copies what it needs out of the
//! request and runs a handler that calls the VFS and replies ([`crate::dispatch`]).

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, CopyFileRangeFlags, FileHandle, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use strata_types::{Errno, Ino};
use strata_vfs::Vfs;
use strata_vfs::{LockKind, SetAttr};

use crate::dispatch::{
    F_RDLCK, F_UNLCK, F_WRLCK, FromBytesCompat, empty, fill_page, placeholder_attr, posix_lock,
    time_set,
};
use crate::{StrataFs, bare_attr, errno, file_attr, file_type, name_bytes};

/// Background requests (readahead, writeback) the kernel may have in flight.
const MAX_BACKGROUND: u16 = 64;

impl fuser::Filesystem for StrataFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(self.max_write);
        // Readahead and writeback requests are "background" requests: the kernel's default
        // of 12 in flight (9 before it throttles) starves parallel sequential readers.
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
        for cap in [
            InitFlags::FUSE_POSIX_LOCKS,
            InitFlags::FUSE_FLOCK_LOCKS,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            // chattr/lsattr on directories too (ioctl.rs).
            InitFlags::FUSE_HAS_IOCTL_DIR,
        ] {
            let _ = config.add_capabilities(cap);
        }
        // New inodes' modes are Strata's to decide: a directory's default access
        // control list replaces the umask (sent with each request).
        let _ = config.add_capabilities(InitFlags::FUSE_DONT_MASK);
        if self.kernel_acl
            && let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_ACL)
        {
            tracing::error!(
                "the kernel does not offer {missing:?}: it would check the mode bits only; \
                 mount with --non-default-permission to let Strata check access control lists"
            );
            return Err(std::io::Error::from_raw_os_error(Errno::EOPNOTSUPP.0));
        }
        if self.writeback_cache
            && let Err(missing) = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
        {
            tracing::warn!("the kernel does not offer {missing:?}: writes are not cached");
        }
        Ok(())
    }

    fn destroy(&mut self) {
        if self.handing_over.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let vfs = self.vfs.clone();
        let _ = self.rt.block_on(async move { vfs.flush_all().await });
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (ctx, name) = (self.ctx(req), name_bytes(name).to_vec());
        self.spawn(req, "lookup", |vfs| async move {
            let r = vfs.lookup(&ctx, vfs.from_front(parent.0), &name).await;
            if let (Err(Errno::ENOENT), ttl) = (&r, vfs.options().negative_ttl)
                && !ttl.is_zero()
            {
                let attr = fuser::FileAttr {
                    ino: INodeNo(0),
                    ..file_attr(&vfs, Ino(0), &placeholder_attr())
                };
                return reply.entry(&ttl, &attr, Generation(0));
            }
            StrataFs::reply_entry(&vfs, reply, r)
        });
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(req, "getattr", |vfs| async move {
            match vfs.getattr(vfs.from_front(ino.0)).await {
                Ok(a) => reply.attr(&vfs.options().attr_ttl, &file_attr(&vfs, Ino(ino.0), &a)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let ctx = self.ctx(req);
        // A new owner is named in the host's numbering.
        let (uid, gid) = self.vfs.options().identity.to_volume(uid, gid);
        let set = SetAttr {
            mode: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
            size_from_open_file: fh.is_some(),
            ..SetAttr::default()
        };
        self.spawn(req, "setattr", |vfs| async move {
            match vfs.setattr(&ctx, vfs.from_front(ino.0), &set).await {
                Ok(a) => reply.attr(&vfs.options().attr_ttl, &file_attr(&vfs, Ino(ino.0), &a)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(req, "readlink", |vfs| async move {
            match vfs.readlink(vfs.from_front(ino.0)).await {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let (ctx, name) = (self.ctx_with_umask(req, umask), name_bytes(name).to_vec());
        self.spawn(req, "mknod", |vfs| async move {
            let r = vfs
                .mknod(&ctx, vfs.from_front(parent.0), &name, mode, rdev)
                .await;
            StrataFs::reply_entry(&vfs, reply, r)
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (ctx, name) = (self.ctx_with_umask(req, umask), name_bytes(name).to_vec());
        self.spawn(req, "mkdir", |vfs| async move {
            let r = vfs.mkdir(&ctx, vfs.from_front(parent.0), &name, mode).await;
            StrataFs::reply_entry(&vfs, reply, r)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (ctx, name) = (self.ctx(req), name_bytes(name).to_vec());
        self.spawn(req, "unlink", |vfs| async move {
            empty(
                reply,
                vfs.unlink(&ctx, vfs.from_front(parent.0), &name).await,
            )
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (ctx, name) = (self.ctx(req), name_bytes(name).to_vec());
        self.spawn(req, "rmdir", |vfs| async move {
            empty(
                reply,
                vfs.rmdir(&ctx, vfs.from_front(parent.0), &name).await,
            )
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (ctx, name) = (self.ctx(req), name_bytes(link_name).to_vec());
        let target = name_bytes(target.as_os_str()).to_vec();
        self.spawn(req, "symlink", |vfs| async move {
            let r = vfs
                .symlink(&ctx, vfs.from_front(parent.0), &name, &target)
                .await;
            StrataFs::reply_entry(&vfs, reply, r)
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (ctx, name, newname) = (
            self.ctx(req),
            name_bytes(name).to_vec(),
            name_bytes(newname).to_vec(),
        );
        let flags = flags.bits();
        self.spawn(req, "rename", |vfs| async move {
            empty(
                reply,
                vfs.rename(
                    &ctx,
                    vfs.from_front(parent.0),
                    &name,
                    vfs.from_front(newparent.0),
                    &newname,
                    flags,
                )
                .await,
            )
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (ctx, name) = (self.ctx(req), name_bytes(newname).to_vec());
        self.spawn(req, "link", |vfs| async move {
            let r = vfs
                .link(
                    &ctx,
                    vfs.from_front(ino.0),
                    vfs.from_front(newparent.0),
                    &name,
                )
                .await;
            StrataFs::reply_entry(&vfs, reply, r)
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let ctx = self.ctx(req);
        self.spawn(req, "open", |vfs| async move {
            match vfs.open(&ctx, vfs.from_front(ino.0), flags.0 as u32).await {
                Ok((fh, _)) if strata_vfs::is_internal(vfs.from_front(ino.0)) => {
                    reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
                }
                Ok((fh, attr)) => {
                    let flags = if vfs.keep_kernel_cache(vfs.from_front(ino.0), &attr) {
                        FopenFlags::FOPEN_KEEP_CACHE
                    } else {
                        FopenFlags::empty()
                    };
                    reply.opened(FileHandle(fh), flags)
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.adopt_file(ino, fh);
        // Reads of the internal files are not logged nor counted: a reader of
        // `.accesslog` would otherwise be fed a line for each of its own reads, forever.
        let internal = strata_vfs::is_internal(self.vfs.from_front(ino.0));
        let serve = move |vfs: Arc<Vfs>| async move {
            match vfs.read(fh.0, offset, size).await {
                Ok(data) => {
                    if !internal {
                        vfs.front_metrics().count_fuse_read(data.len());
                    }
                    reply.data(&data)
                }
                Err(e) => reply.error(errno(e)),
            }
        };
        if internal {
            self.rt.spawn(serve(self.vfs.clone()));
        } else {
            self.spawn(req, "read", serve);
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.adopt_file(ino, fh);
        let data = data.to_vec();
        if self.vfs.from_front(ino.0) == strata_vfs::CONTROL_INO {
            // A path tool's request: it runs as the writer.
            let caller = self.ctx(req);
            self.spawn(req, "write", |vfs| async move {
                match vfs.control_write(fh.0, &caller, &data).await {
                    Ok(n) => reply.written(n),
                    Err(e) => reply.error(errno(e)),
                }
            });
            return;
        }
        // With FUSE_HANDLE_KILLPRIV_V2 the kernel no longer asks for security.capability
        // before every write (a metadata read each); it flags the writes that must drop
        // setuid/setgid/capabilities instead.
        let unprivileged = write_flags
            .contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
            .then(|| self.ctx(req));
        self.spawn(req, "write", |vfs| async move {
            match vfs
                .write_as(fh.0, offset, &data, unprivileged.as_ref())
                .await
            {
                Ok(n) => {
                    vfs.front_metrics().count_fuse_write(data.len());
                    reply.written(n)
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.adopt_file(ino, fh);
        self.spawn(req, "flush", |vfs| async move {
            empty(reply, vfs.flush(fh.0, lock_owner.0).await)
        });
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.adopt_file(ino, fh);
        self.spawn(req, "release", |vfs| async move {
            // Set when the file had flock() locks: they end with the open file.
            if let Some(owner) = lock_owner
                && let Err(e) = vfs.release_locks(fh.0, owner.0).await
            {
                tracing::warn!("cannot release flock locks at close: {e:?}");
            }
            empty(reply, vfs.release(fh.0).await)
        });
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.adopt_file(ino, fh);
        self.spawn(req, "fsync", |vfs| async move {
            empty(reply, vfs.fsync(fh.0).await)
        });
    }

    /// fsync of a directory: its entries, like everything committed before, become durable.
    fn fsyncdir(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(req, "fsyncdir", |vfs| async move {
            empty(reply, vfs.sync().await)
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let ctx = self.ctx(req);
        self.spawn(req, "opendir", |vfs| async move {
            match vfs.opendir(&ctx, vfs.from_front(ino.0)).await {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.adopt_dir(ino, fh);
        self.spawn(req, "readdir", |vfs| async move {
            let entries = match vfs.readdir(fh.0, offset, false).await {
                Ok(e) => e,
                Err(e) => return reply.error(errno(e)),
            };
            fill_page(&vfs, fh.0, entries, |e| {
                let name = std::ffi::OsStr::from_bytes_compat(&e.name);
                reply.add(
                    INodeNo(vfs.to_front(e.ino)),
                    e.next_offset,
                    file_type(e.kind),
                    name,
                )
            });
            reply.ok();
        });
    }

    /// Directory entries with their attributes (`ls -l` costs one request per page instead
    /// of one lookup per entry). The kernel asks for this instead of readdir when it
    /// expects the attributes to be used.
    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.adopt_dir(ino, fh);
        self.spawn(req, "readdirplus", |vfs| async move {
            let entries = match vfs.readdir(fh.0, offset, true).await {
                Ok(e) => e,
                Err(e) => return reply.error(errno(e)),
            };
            fill_page(&vfs, fh.0, entries, |e| {
                let name = std::ffi::OsStr::from_bytes_compat(&e.name);
                let front = Ino(vfs.to_front(e.ino));
                // "." and ".." (and an entry whose inode vanished meanwhile) come without
                // attributes: the kernel gets a zero TTL, so it caches nothing for them.
                let (attr, ttl) = match &e.attr {
                    Some(a) if a.is_dir() => {
                        (file_attr(&vfs, front, a), vfs.options().dir_entry_ttl)
                    }
                    Some(a) => (file_attr(&vfs, front, a), vfs.options().entry_ttl),
                    None => (bare_attr(front, e.kind), Duration::ZERO),
                };
                reply.add(
                    INodeNo(front.0),
                    e.next_offset,
                    name,
                    &ttl,
                    &attr,
                    Generation(0),
                )
            });
            reply.ok();
        });
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.adopt_dir(ino, fh);
        self.spawn(req, "releasedir", |vfs| async move {
            empty(reply, vfs.releasedir(fh.0).await)
        });
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(req, "statfs", |vfs| async move {
            match vfs.statfs().await {
                Ok(s) => {
                    let bsize = 4096u64;
                    let files = s.used_inodes + s.avail_inodes;
                    reply.statfs(
                        s.total_space / bsize,
                        s.avail_space / bsize,
                        s.avail_space / bsize,
                        files,
                        s.avail_inodes,
                        bsize as u32,
                        255,
                        bsize as u32,
                    );
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    /// `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` (`lsattr`, `chattr`): see `ioctl.rs`.
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        crate::ioctl::ioctl(self, req, (ino, fh), cmd, in_data, reply);
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if let Some(e) = self.refused_xattr(name) {
            reply.error(errno(e));
            return;
        }
        let (ctx, name, value) = (self.ctx(req), name_bytes(name).to_vec(), value.to_vec());
        self.spawn(req, "setxattr", |vfs| async move {
            empty(
                reply,
                vfs.setxattr(&ctx, vfs.from_front(ino.0), &name, &value, flags as u32)
                    .await,
            )
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if let Some(e) = self.refused_xattr(name) {
            reply.error(errno(e));
            return;
        }
        let (ctx, name) = (self.ctx(req), name_bytes(name).to_vec());
        self.spawn(req, "getxattr", |vfs| async move {
            match vfs
                .getxattr(&ctx, vfs.from_front(ino.0), &name, size as usize)
                .await
            {
                Ok(v) if size == 0 => reply.size(v.len() as u32),
                Ok(v) => reply.data(&v),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if !self.enable_xattr {
            reply.error(errno(Errno::ENOSYS));
            return;
        }
        let ctx = self.ctx(req);
        self.spawn(req, "listxattr", |vfs| async move {
            match vfs
                .listxattr(&ctx, vfs.from_front(ino.0), size as usize)
                .await
            {
                Ok(v) if size == 0 => reply.size(v.len() as u32),
                Ok(v) => reply.data(&v),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Some(e) = self.refused_xattr(name) {
            reply.error(errno(e));
            return;
        }
        let (ctx, name) = (self.ctx(req), name_bytes(name).to_vec());
        self.spawn(req, "removexattr", |vfs| async move {
            empty(
                reply,
                vfs.removexattr(&ctx, vfs.from_front(ino.0), &name).await,
            )
        });
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let ctx = self.ctx(req);
        let mask = mask.bits() as u32;
        self.spawn(req, "access", |vfs| async move {
            empty(reply, vfs.access(&ctx, vfs.from_front(ino.0), mask).await)
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let (ctx, name) = (self.ctx_with_umask(req, umask), name_bytes(name).to_vec());
        self.spawn(req, "create", |vfs| async move {
            let created = vfs
                .create(&ctx, vfs.from_front(parent.0), &name, mode)
                .await;
            StrataFs::reply_created(&vfs, reply, created)
        });
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        self.adopt_file(ino, fh);
        self.spawn(req, "getlk", |vfs| async move {
            let lock = match posix_lock(start, end, typ, pid) {
                Ok(l) => l,
                Err(e) => return reply.error(errno(e)),
            };
            match vfs.getlk(fh.0, lock_owner.0, lock).await {
                Ok(Some(l)) => {
                    let typ = if l.kind == LockKind::Write {
                        F_WRLCK
                    } else {
                        F_RDLCK
                    };
                    reply.locked(l.start, l.end.saturating_sub(1).max(l.start), typ, l.pid)
                }
                Ok(None) => reply.locked(start, end, F_UNLCK, 0),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    /// A blocking request waits until the lock is free or the caller is interrupted
    /// (a signal; `kill -9`): then it ends with EINTR and takes nothing.
    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        self.adopt_file(ino, fh);
        let registration = self.interrupts.register(req.unique().0);
        self.spawn(req, "setlk", |vfs| async move {
            let r = match posix_lock(start, end, typ, pid) {
                Ok(lock) => {
                    vfs.setlk(fh.0, lock_owner.0, lock, sleep, &registration.token)
                        .await
                }
                Err(e) => Err(e),
            };
            drop(registration);
            empty(reply, r)
        });
    }

    /// The kernel interrupts a request: a waiting lock request gives up (EINTR).
    fn interrupt(&self, _req: &Request, unique: fuser::RequestId) {
        self.interrupts.interrupt(unique.0);
    }

    /// open(O_TMPFILE) in directory `parent`.
    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let ctx = self.ctx_with_umask(req, umask);
        self.spawn(req, "tmpfile", |vfs| async move {
            let created = vfs.tmpfile(&ctx, vfs.from_front(parent.0), mode).await;
            StrataFs::reply_created(&vfs, reply, created)
        });
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.adopt_file(ino, fh);
        self.spawn(req, "fallocate", |vfs| async move {
            empty(
                reply,
                vfs.fallocate(fh.0, mode as u32, offset, length).await,
            )
        });
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.adopt_file(ino_in, fh_in);
        self.adopt_file(ino_out, fh_out);
        let flags = flags.bits() as u32;
        self.spawn(req, "copy_file_range", |vfs| async move {
            match vfs
                .copy_file_range(fh_in.0, offset_in, fh_out.0, offset_out, len, flags)
                .await
            {
                Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }
}
