//! The FUSE operations of the crash file system: names, attributes and directories go
//! straight to the backing directory (as LazyFS does: metadata is never lost); file data
//! goes to each inode's unsynced pages and reaches the backing file on `fsync`.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::DirEntryExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat, readlinkat, renameat2};
use nix::sys::stat::{
    FchmodatFlags, Mode, SFlag, UtimensatFlags, fchmodat, mkdirat, mknodat, utimensat,
};
use nix::sys::statvfs::fstatvfs;
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, linkat, symlinkat, unlinkat};
use parking_lot::Mutex;

use super::nodes::{Node, NodeData, Nodes, io, open_path, proc_path, stat_at};
use super::pages::Pages;

/// Attributes and entries are never cached by the kernel: every question comes here.
const TTL: Duration = Duration::ZERO;

/// One entry of an open directory: inode number shown, kind, name.
type DirRow = (u64, FileType, OsString);

/// What the mounted file system and its handle share.
pub struct State {
    pub nodes: Mutex<Nodes>,
    /// Set by a power cut: every operation fails from then on.
    pub cut: AtomicBool,
    dirs: Mutex<HashMap<u64, Vec<DirRow>>>,
    next_handle: AtomicU64,
}

impl State {
    pub fn new(root: &Path) -> io::Result<State> {
        let root = open_path(AT_FDCWD, root.as_os_str())?;
        Ok(State {
            nodes: Mutex::new(Nodes::new(root)?),
            cut: AtomicBool::new(false),
            dirs: Mutex::default(),
            next_handle: AtomicU64::new(1),
        })
    }

    /// Bytes written and not yet `fsync`ed, over all files.
    pub fn unsynced_bytes(&self) -> u64 {
        let nodes = self.nodes.lock().all();
        nodes
            .iter()
            .filter_map(|n| n.data.lock().pages.as_ref().map(Pages::bytes))
            .sum()
    }

    /// The power goes out: unsynced pages are gone and nothing more is done. The bytes
    /// dropped.
    pub fn power_cut(&self) -> u64 {
        self.cut.store(true, Ordering::SeqCst);
        let nodes = self.nodes.lock().all();
        let mut dropped = 0;
        for node in nodes {
            if let Some(pages) = node.data.lock().pages.take() {
                dropped += pages.bytes();
            }
        }
        dropped
    }

    /// An orderly shutdown: every unsynced page is written back.
    pub fn write_back_all(&self) -> io::Result<()> {
        let nodes = self.nodes.lock().all();
        for node in nodes {
            fsync_node(self, &node)?;
        }
        Ok(())
    }
}

/// The crash file system served by fuser.
pub struct CrashFsOps(pub Arc<State>);

fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

fn nix_errno(e: nix::Error) -> Errno {
    errno(io(e))
}

/// Permission bits of a mode, with the caller's umask applied.
fn perm(mode: u32, umask: u32) -> Mode {
    Mode::from_bits_truncate(mode & !umask & 0o7777)
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    let nanos = u32::try_from(nanos).unwrap_or(0);
    match u64::try_from(secs) {
        Ok(s) => UNIX_EPOCH + Duration::new(s, nanos),
        Err(_) => UNIX_EPOCH,
    }
}

/// Attributes of `node` (`ino`): the backing file's, with the readers' size.
fn attr_of(ino: u64, node: &Node) -> io::Result<FileAttr> {
    let st = stat_at(&node.path_fd, OsStr::new(""))?;
    let size = match &node.data.lock().pages {
        Some(pages) => pages.size,
        None => u64::try_from(st.st_size).unwrap_or(0),
    };
    Ok(FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: time(st.st_ctime, st.st_ctime_nsec),
        kind: file_type(st.st_mode),
        perm: u16::try_from(st.st_mode & 0o7777).unwrap_or(0),
        nlink: u32::try_from(st.st_nlink).unwrap_or(u32::MAX),
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: u32::try_from(st.st_rdev).unwrap_or(0),
        blksize: 4096,
        flags: 0,
    })
}

/// Write `node`'s unsynced pages back (its `fsync`).
fn fsync_node(state: &State, node: &Node) -> io::Result<()> {
    let mut data = node.data.lock();
    if state.cut.load(Ordering::SeqCst) {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    let Some(pages) = data.pages.take() else {
        return Ok(());
    };
    let written = node.file(&mut data).and_then(|f| pages.write_back(f));
    if written.is_err() {
        data.pages = Some(pages);
    }
    written
}

impl CrashFsOps {
    fn alive(&self) -> Result<(), Errno> {
        if self.0.cut.load(Ordering::SeqCst) {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }

    fn node(&self, ino: INodeNo) -> Result<Arc<Node>, Errno> {
        self.alive()?;
        self.0.nodes.lock().get(ino.0).map_err(errno)
    }

    /// Look `name` up in `parent`, counting the kernel's reference.
    fn entry(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let dir = self.node(parent)?;
        let st = stat_at(&dir.path_fd, name).map_err(errno)?;
        let fd = open_path(&dir.path_fd, name).map_err(errno)?;
        let ino = self.0.nodes.lock().remember(&st, fd);
        let node = self.node(INodeNo(ino))?;
        attr_of(ino, &node).map_err(errno)
    }

    fn reply_entry(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.entry(parent, name) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    /// Make `name` in `parent` with `call` (given the parent's descriptor), then look
    /// the name up.
    fn make(
        &self,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEntry,
        call: impl FnOnce(BorrowedFd<'_>) -> nix::Result<()>,
    ) {
        let made = self
            .node(parent)
            .and_then(|dir| call(dir.path_fd.as_fd()).map_err(nix_errno));
        match made {
            Ok(_) => self.reply_entry(parent, name, reply),
            Err(e) => reply.error(e),
        }
    }

    fn truncate(&self, node: &Node, size: u64) -> io::Result<()> {
        let mut data = node.data.lock();
        let file = node.file(&mut data)?;
        let backing = file.metadata()?.len();
        // The backing file is never longer than what readers see.
        if size < backing {
            file.set_len(size)?;
        }
        match &mut data.pages {
            Some(pages) => pages.truncate(size),
            None if size > backing => {
                let mut pages = Pages::new(backing);
                pages.truncate(size);
                data.pages = Some(pages);
            }
            None => {}
        }
        Ok(())
    }

    fn set_attrs(
        &self,
        node: &Node,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        size: Option<u64>,
        times: [Option<TimeOrNow>; 2],
    ) -> io::Result<()> {
        let path = proc_path(node.path_fd.as_raw_fd());
        if let Some(mode) = mode {
            let mode = Mode::from_bits_truncate(mode & 0o7777);
            fchmodat(AT_FDCWD, path.as_str(), mode, FchmodatFlags::FollowSymlink).map_err(io)?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            let flags = AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW;
            let (uid, gid) = (owner.0.map(Uid::from_raw), owner.1.map(Gid::from_raw));
            fchownat(&node.path_fd, "", uid, gid, flags).map_err(io)?;
        }
        if let Some(size) = size {
            self.truncate(node, size)?;
        }
        if times.iter().any(Option::is_some) {
            let spec = |t: &Option<TimeOrNow>| match t {
                None => TimeSpec::UTIME_OMIT,
                Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
                Some(TimeOrNow::SpecificTime(t)) => {
                    TimeSpec::from(t.duration_since(UNIX_EPOCH).unwrap_or_default())
                }
            };
            let follow = UtimensatFlags::FollowSymlink;
            utimensat(
                AT_FDCWD,
                path.as_str(),
                &spec(&times[0]),
                &spec(&times[1]),
                follow,
            )
            .map_err(io)?;
        }
        Ok(())
    }

    fn list_dir(&self, node: &Node) -> io::Result<Vec<DirRow>> {
        let mut rows = vec![
            (1, FileType::Directory, OsString::from(".")),
            (1, FileType::Directory, OsString::from("..")),
        ];
        for entry in std::fs::read_dir(proc_path(node.path_fd.as_raw_fd()))? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let kind = fuser::FileType::from_std(kind).unwrap_or(FileType::RegularFile);
            rows.push((entry.ino().max(2), kind, entry.file_name()));
        }
        Ok(rows)
    }
}

impl Filesystem for CrashFsOps {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(parent, name, reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.0.nodes.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self
            .node(ino)
            .and_then(|n| attr_of(ino.0, &n).map_err(errno))
        {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let done = self.node(ino).and_then(|node| {
            self.set_attrs(&node, mode, (uid, gid), size, [atime, mtime])
                .and_then(|()| attr_of(ino.0, &node))
                .map_err(errno)
        });
        match done {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let target = self.node(ino).and_then(|node| {
            let target = readlinkat(&node.path_fd, "").map_err(nix_errno)?;
            Ok(target.as_encoded_bytes().to_vec())
        });
        match target {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let kind = SFlag::from_bits_truncate(mode & libc::S_IFMT);
        self.make(parent, name, reply, |dir| {
            mknodat(dir, name, kind, perm(mode, umask), u64::from(rdev))
        });
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.make(parent, name, reply, |dir| {
            mkdirat(dir, name, perm(mode, umask))
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, UnlinkatFlags::NoRemoveDir, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, UnlinkatFlags::RemoveDir, reply);
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.make(parent, link_name, reply, |dir| {
            symlinkat(target, dir, link_name)
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let done = self.node(parent).and_then(|from| {
            let to = self.node(newparent)?;
            let flags = nix::fcntl::RenameFlags::from_bits_truncate(flags.bits());
            renameat2(&from.path_fd, name, &to.path_fd, newname, flags).map_err(nix_errno)
        });
        match done {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let source = match self.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let path = proc_path(source.path_fd.as_raw_fd());
        self.make(newparent, newname, reply, |dir| {
            linkat(
                AT_FDCWD,
                path.as_str(),
                dir,
                newname,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = self.node(ino).and_then(|node| {
            if flags.0 & libc::O_TRUNC != 0 {
                self.truncate(&node, 0).map_err(errno)?;
            }
            Ok(())
        });
        match opened {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let bytes = self.node(ino).and_then(|node| {
            let mut data = node.data.lock();
            node.file(&mut data).map_err(errno)?;
            let NodeData {
                file: Some(file),
                pages,
            } = &*data
            else {
                return Err(Errno::EIO);
            };
            match pages {
                Some(pages) => pages.read(file, offset, size).map_err(errno),
                None => {
                    let len = file.metadata().map_err(errno)?.len();
                    Pages::new(len).read(file, offset, size).map_err(errno)
                }
            }
        });
        match bytes {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        bytes: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let written = self.node(ino).and_then(|node| {
            let mut data = node.data.lock();
            self.alive()?;
            let file = node
                .file(&mut data)
                .map_err(errno)?
                .try_clone()
                .map_err(errno)?;
            if data.pages.is_none() {
                data.pages = Some(Pages::new(file.metadata().map_err(errno)?.len()));
            }
            let pages = data.pages.as_mut().ok_or(Errno::EIO)?;
            pages.write(&file, offset, bytes).map_err(errno)
        });
        match written {
            Ok(()) => reply.written(u32::try_from(bytes.len()).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        match self
            .node(ino)
            .and_then(|n| fsync_node(&self.0, &n).map_err(errno))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let rows = self
            .node(ino)
            .and_then(|n| self.list_dir(&n).map_err(errno));
        match rows {
            Ok(rows) => {
                let fh = self.0.next_handle.fetch_add(1, Ordering::Relaxed);
                self.0.dirs.lock().insert(fh, rows);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dirs = self.0.dirs.lock();
        let Some(rows) = dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (ino, kind, name)) in rows.iter().enumerate().skip(start) {
            let next = u64::try_from(i + 1).unwrap_or(u64::MAX);
            if reply.add(INodeNo(*ino), next, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.0.dirs.lock().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _ds: bool,
        reply: ReplyEmpty,
    ) {
        // Names are written through at once; nothing is pending.
        match self.node(ino) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = match self.node(INodeNo(1)) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let st = match fstatvfs(&root.path_fd) {
            Ok(st) => st,
            Err(e) => return reply.error(nix_errno(e)),
        };
        let bsize = u32::try_from(st.block_size()).unwrap_or(4096);
        let namelen = u32::try_from(st.name_max()).unwrap_or(255);
        reply.statfs(
            st.blocks(),
            st.blocks_free(),
            st.blocks_available(),
            st.files(),
            st.files_free(),
            bsize,
            namelen,
            bsize,
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let created = self.node(parent).and_then(|dir| {
            let keep = OFlag::from_bits_truncate(flags) & (OFlag::O_EXCL | OFlag::O_TRUNC);
            let open_flags = keep | OFlag::O_CREAT | OFlag::O_RDWR | OFlag::O_CLOEXEC;
            // Opened to create it; data goes through the node's own descriptor.
            drop(openat(&dir.path_fd, name, open_flags, perm(mode, umask)).map_err(nix_errno)?);
            let attr = self.entry(parent, name)?;
            if flags & libc::O_TRUNC != 0 {
                let node = self.node(attr.ino)?;
                self.truncate(&node, 0).map_err(errno)?;
                return attr_of(attr.ino.0, &node).map_err(errno);
            }
            Ok(attr)
        });
        match created {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}

impl CrashFsOps {
    fn remove(&self, parent: INodeNo, name: &OsStr, how: UnlinkatFlags, reply: ReplyEmpty) {
        let done = self
            .node(parent)
            .and_then(|dir| unlinkat(&dir.path_fd, name, how).map_err(nix_errno));
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
