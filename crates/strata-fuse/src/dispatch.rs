//! Request plumbing for [`crate::ops`]: the caller's context, conversions of lock and time
//! arguments, running a handler (polled once on the dispatch thread, then on the runtime,
//! logged to `.accesslog` when someone reads it), and filling replies.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use fuser::{
    FileHandle, FopenFlags, Generation, ReplyCreate, ReplyEmpty, ReplyEntry, Request, TimeOrNow,
};
use strata_types::{Errno, Ino};
use strata_vfs::Vfs;
use strata_vfs::{Ctx, Entry, LockKind, PosixLock, TimeSet};

use crate::{StrataFs, errno, file_attr, groups_of};

pub(crate) const F_RDLCK: i32 = 0;
pub(crate) const F_WRLCK: i32 = 1;
pub(crate) const F_UNLCK: i32 = 2;

/// The caller of `req` as the host knows it (before any identity mapping).
fn host_ctx(req: &Request) -> Ctx {
    let (uid, gid, pid) = (req.uid(), req.gid(), req.pid());
    // Root passes every check; only other callers need their supplementary groups.
    let groups = if uid == 0 { Vec::new() } else { groups_of(pid) };
    Ctx {
        uid,
        gid,
        groups,
        pid,
        umask: 0,
        version_keeper: false,
    }
}

impl StrataFs {
    /// Who `req`'s caller acts as in the volume (`--root-squash`, `--uid-map`, ...).
    pub(crate) fn ctx(&self, req: &Request) -> Ctx {
        self.vfs.options().identity.caller(host_ctx(req))
    }

    /// [`StrataFs::ctx`] of a request that makes an inode, with the creator's umask
    /// (the kernel leaves it to us: `FUSE_DONT_MASK`).
    pub(crate) fn ctx_with_umask(&self, req: &Request, umask: u32) -> Ctx {
        let ctx = Ctx {
            umask: u16::try_from(umask & 0o777).unwrap_or(0o022),
            ..host_ctx(req)
        };
        self.vfs.options().identity.caller(ctx)
    }
}

pub(crate) fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(st) => TimeSet::At(match st.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
        }),
    }
}

pub(crate) fn lock_kind(typ: i32) -> Result<LockKind, Errno> {
    match typ {
        F_RDLCK => Ok(LockKind::Read),
        F_WRLCK => Ok(LockKind::Write),
        F_UNLCK => Ok(LockKind::Unlock),
        _ => Err(Errno::EINVAL),
    }
}

/// FUSE lock ranges are inclusive; ours end exclusively (`u64::MAX` = to end of file).
pub(crate) fn posix_lock(start: u64, end: u64, typ: i32, pid: u32) -> Result<PosixLock, Errno> {
    Ok(PosixLock {
        kind: lock_kind(typ)?,
        start,
        end: end.saturating_add(1),
        pid,
    })
}

impl StrataFs {
    /// The error for an xattr request this mount does not serve: every name when xattrs
    /// are off (ENOSYS, so the kernel stops asking), `security.selinux` unless
    /// `--enable-selinux` (EOPNOTSUPP, which `ls` remembers per device).
    pub(crate) fn refused_xattr(&self, name: &OsStr) -> Option<Errno> {
        if !self.enable_xattr {
            Some(Errno::ENOSYS)
        } else if !self.enable_selinux && crate::name_bytes(name) == b"security.selinux" {
            Some(Errno::EOPNOTSUPP)
        } else {
            None
        }
    }

    /// Run `f` on the runtime, recording its latency under `op`; when someone reads
    /// `.accesslog`, log the call with the caller and its latency.
    pub(crate) fn spawn<F>(&self, req: &Request, op: &'static str, f: impl FnOnce(Arc<Vfs>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let vfs = self.vfs.clone();
        let fut = f(vfs.clone());
        let started = std::time::Instant::now();
        let answering = self.inflight.enter();
        if !vfs.access_log_active() {
            self.run(async move {
                fut.await;
                drop(answering);
                vfs.front_metrics().fuse.observe(op, started.elapsed());
            });
            return;
        }
        let who = format!("[uid:{},gid:{},pid:{}]", req.uid(), req.gid(), req.pid());
        self.rt.spawn(async move {
            fut.await;
            drop(answering);
            let took = started.elapsed();
            vfs.front_metrics().fuse.observe(op, took);
            let secs = took.as_secs_f64();
            vfs.log_access(format!("{} {who} {op} <{secs:.6}>", strata_vfs::log_time()));
        });
    }

    /// Run a request: polled once right here on the dispatch thread, and only if it has to
    /// wait (a metadata round trip, an upload, a lock) handed to the runtime, which polls
    /// it again with a real waker. Requests that complete at once (buffered writes, cached
    /// attributes) are answered without a hop to another thread — half the latency of a
    /// 4 KiB write.
    fn run<F>(&self, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let _runtime = self.rt.enter();
        let mut fut = Box::pin(fut);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if fut.as_mut().poll(&mut cx).is_pending() {
            self.rt.spawn(fut);
        }
    }

    /// Answer a create (or O_TMPFILE): the new entry and its open handle.
    pub(crate) fn reply_created(vfs: &Vfs, reply: ReplyCreate, r: Result<(Entry, u64), Errno>) {
        match r {
            Ok((e, fh)) => {
                let attr = file_attr(vfs, Ino(vfs.to_front(e.ino)), &e.attr);
                reply.created(
                    &vfs.options().entry_ttl,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                )
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    pub(crate) fn reply_entry(vfs: &Vfs, reply: ReplyEntry, r: Result<Entry, Errno>) {
        match r {
            Ok(e) => {
                let ttl = if e.attr.is_dir() {
                    vfs.options().dir_entry_ttl
                } else {
                    vfs.options().entry_ttl
                };
                reply.entry(
                    &ttl,
                    &file_attr(vfs, Ino(vfs.to_front(e.ino)), &e.attr),
                    Generation(0),
                );
            }
            Err(e) => reply.error(errno(e)),
        }
    }
}

pub(crate) fn empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// Add directory entries to a reply page with `add` (true = page full) and remember where
/// the page ended, so the next page continues by name.
pub(crate) fn fill_page(
    vfs: &Vfs,
    fh: u64,
    entries: Vec<strata_vfs::DirEntryPlus>,
    mut add: impl FnMut(&strata_vfs::DirEntryPlus) -> bool,
) {
    let mut last = None;
    for e in entries {
        if add(&e) {
            break;
        }
        last = Some((e.next_offset, e.name));
    }
    if let Some((next, name)) = last {
        vfs.set_dir_cursor(fh, next, name);
    }
}

/// Attributes for a negative entry (inode 0): never shown to programs.
pub(crate) fn placeholder_attr() -> strata_types::Attr {
    strata_types::Attr {
        kind: strata_types::FileType::Regular,
        mode: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        atime: 0,
        mtime: 0,
        ctime: 0,
        nlink: 0,
        length: 0,
        parent: Ino(0),
        xattrs: false,
        protection: Default::default(),
    }
}

pub(crate) trait FromBytesCompat {
    fn from_bytes_compat(b: &[u8]) -> &OsStr;
}

impl FromBytesCompat for OsStr {
    fn from_bytes_compat(b: &[u8]) -> &OsStr {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(b)
    }
}
