//! The FUSE front end: the only crate that uses `fuser`. Every request is handed to a tokio
//! task that calls the VFS and replies from there, so a slow read never stalls a stat;
//! several dispatch threads each read their own `/dev/fuse` clone.

mod dispatch;
pub mod handover;
mod interrupt;
mod ioctl;
mod ops;

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Config, FileAttr, INodeNo, MountOption, SessionACL};
use strata_types::{Attr, Errno, FileType, Ino};
use strata_vfs::Vfs;

pub use handover::{InFlight, KernelSettings, Served, Stopped};

/// Mount settings of the FUSE layer.
#[derive(Clone, Debug)]
pub struct FuseOptions {
    pub fs_name: String,
    pub allow_other: bool,
    pub default_permissions: bool,
    pub read_only: bool,
    /// Largest write the kernel sends (`--max-fuse-io`).
    pub max_write: u32,
    pub threads: usize,
    /// The kernel's readahead for this mount in KiB (its bdi `read_ahead_kb`); the
    /// kernel's default of 128 KiB keeps only one small read in flight per file.
    pub kernel_readahead_kib: u32,
    /// Let the kernel buffer writes and send them in large batches (`-o writeback_cache`).
    pub writeback_cache: bool,
    /// Serve extended attributes (`--enable-xattr`, on by default); when off, xattr
    /// requests get ENOSYS and the kernel stops sending them (EOPNOTSUPP to programs).
    pub enable_xattr: bool,
    /// Keep `security.selinux` labels (`--enable-selinux`, off by default as in JuiceFS).
    /// When off, that one name fails with EOPNOTSUPP: SELinux labels FUSE mounts without
    /// xattrs, and `ls -l`, which asks every entry for its label, stops asking after the
    /// first "not supported" instead of making one request per entry.
    pub enable_selinux: bool,
    /// Let root's processes in too when the mount is not `allow_other` (`-o allow_root`).
    pub allow_root: bool,
    /// The volume keeps access control lists: with `default_permissions` the kernel is
    /// asked to check them (`FUSE_POSIX_ACL`), and the mount fails where it cannot;
    /// without, Strata checks them itself.
    pub posix_acl: bool,
    /// Other `-o` options, passed to the kernel mount as given (`nodev`, `nosuid`,
    /// `noexec`, `sync`, `dirsync`, `auto_unmount`, `max_read=N`, ...).
    pub extra: Vec<String>,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            fs_name: "strata".into(),
            allow_other: false,
            default_permissions: true,
            read_only: false,
            max_write: 1 << 20,
            threads: 4,
            kernel_readahead_kib: 8192,
            writeback_cache: false,
            enable_xattr: true,
            enable_selinux: false,
            allow_root: false,
            posix_acl: false,
            extra: Vec::new(),
        }
    }
}

/// The `fuser` file system over a [`Vfs`].
#[derive(Debug)]
pub struct StrataFs {
    pub(crate) vfs: Arc<Vfs>,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) max_write: u32,
    pub(crate) writeback_cache: bool,
    pub(crate) enable_xattr: bool,
    pub(crate) enable_selinux: bool,
    /// Ask the kernel to check access control lists (`FUSE_POSIX_ACL`).
    pub(crate) kernel_acl: bool,
    pub(crate) interrupts: std::sync::Arc<interrupt::Interrupts>,
    /// Requests being answered (a hand-over waits for none).
    pub(crate) inflight: Arc<InFlight>,
    /// The process that served this mount before died: rebuild the handles it had.
    pub(crate) restarted: bool,
    /// The session stops for a hand-over: its end commits nothing (the hand-over
    /// commits once every request read is answered).
    pub(crate) handing_over: Arc<std::sync::atomic::AtomicBool>,
}

impl StrataFs {
    pub(crate) fn new(
        vfs: Arc<Vfs>,
        rt: tokio::runtime::Handle,
        opts: &FuseOptions,
        settings: &KernelSettings,
    ) -> StrataFs {
        StrataFs {
            vfs,
            rt,
            max_write: settings.max_write,
            writeback_cache: settings.writeback_cache,
            enable_xattr: opts.enable_xattr,
            enable_selinux: opts.enable_selinux,
            kernel_acl: settings.kernel_acl,
            interrupts: Arc::default(),
            inflight: Arc::default(),
            restarted: false,
            handing_over: Arc::default(),
        }
    }

    /// What the serving side keeps of this file system once the session runs it.
    pub(crate) fn shared(&self) -> handover::FsShared {
        handover::FsShared {
            inflight: self.inflight.clone(),
            interrupts: self.interrupts.clone(),
            handing_over: self.handing_over.clone(),
        }
    }
}

/// Who the kernel lets in, from the mount options.
pub(crate) fn session_acl(opts: &FuseOptions) -> SessionACL {
    if opts.allow_other {
        SessionACL::All
    } else if opts.allow_root {
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    }
}

/// Let the VFS drop kernel entries it changed behind the kernel's back.
pub(crate) fn set_entry_invalidator(vfs: &Vfs, session: &fuser::BackgroundSession) {
    let notifier = session.notifier();
    vfs.set_entry_invalidator(strata_vfs::EntryInvalidator(Arc::new(
        move |parent: u64, name: &[u8]| {
            // ENOENT: the kernel had nothing cached for it.
            if let Err(e) = notifier.inval_entry(INodeNo(parent), name_os(name))
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::debug!("invalidating a kernel entry: {e}");
            }
        },
    )));
}

/// Mount `vfs` at `mountpoint`; requests are served on `rt` until the returned session is
/// unmounted (or stopped for a hand-over).
pub fn mount(
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
    opts: &FuseOptions,
) -> std::io::Result<Served> {
    // The kernel never updates a FUSE file's atime itself; the flag only shows the mode.
    let atime = if vfs.options().atime_mode == strata_vfs::AtimeMode::NoAtime {
        MountOption::NoAtime
    } else {
        MountOption::Atime
    };
    let mut mount_options = vec![
        MountOption::FSName(opts.fs_name.clone()),
        MountOption::Subtype("strata".into()),
        atime,
    ];
    mount_options.extend(opts.extra.iter().map(|o| mount_option(o)));
    if opts.default_permissions {
        mount_options.push(MountOption::DefaultPermissions);
    }
    if opts.read_only {
        mount_options.push(MountOption::RO);
    }
    let mut config = Config::default();
    config.mount_options = mount_options;
    config.acl = session_acl(opts);
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = true;
    let settings = KernelSettings::of(opts);
    let fs = StrataFs::new(vfs.clone(), rt, opts, &settings);
    let shared = fs.shared();
    let session = fuser::spawn_mount(fs, mountpoint, &config)?;
    set_entry_invalidator(&vfs, &session);
    set_kernel_readahead(mountpoint, opts.kernel_readahead_kib);
    Ok(Served::new(session, shared, settings, mountpoint, true))
}

/// A `-o` option as the kernel mount takes it: flags by name, anything else as given.
fn mount_option(option: &str) -> MountOption {
    match option {
        "dev" => MountOption::Dev,
        "nodev" => MountOption::NoDev,
        "suid" => MountOption::Suid,
        "nosuid" => MountOption::NoSuid,
        "exec" => MountOption::Exec,
        "noexec" => MountOption::NoExec,
        "sync" => MountOption::Sync,
        "async" => MountOption::Async,
        "dirsync" => MountOption::DirSync,
        "auto_unmount" => MountOption::AutoUnmount,
        other => MountOption::CUSTOM(other.to_string()),
    }
}

/// Raise the kernel's readahead of the mount at `mountpoint` through its backing device
/// info in sysfs. Needs root; without it the kernel default stays (logged, not an error).
fn set_kernel_readahead(mountpoint: &Path, kib: u32) {
    use std::os::unix::fs::MetadataExt;
    let dev = match std::fs::metadata(mountpoint) {
        Ok(meta) => meta.dev(),
        Err(e) => {
            tracing::debug!("cannot stat {}: {e}", mountpoint.display());
            return;
        }
    };
    // Linux device numbers: major in bits 8..20 and 32..44, minor in 0..8 and 20..32.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let path = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    if let Err(e) = std::fs::write(&path, kib.to_string()) {
        tracing::debug!("cannot set kernel readahead in {path}: {e}");
    }
}

pub(crate) fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.0)
}

fn name_os(name: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name)
}

pub(crate) fn name_bytes(name: &OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes()
}

fn system_time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

pub(crate) fn file_type(kind: FileType) -> fuser::FileType {
    match kind {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

/// `a` as the kernel gets it: the owner numbered as the caller's host numbers it.
pub(crate) fn file_attr(vfs: &Vfs, ino: Ino, a: &Attr) -> FileAttr {
    let (uid, gid) = vfs.options().identity.shown_owner(a.uid, a.gid);
    FileAttr {
        ino: INodeNo(ino.0),
        size: a.length,
        blocks: a.blocks(),
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: file_type(a.kind),
        perm: a.mode,
        nlink: a.nlink,
        uid,
        gid,
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

/// Attributes that say only what kind of file `ino` is (for entries without attributes).
pub(crate) fn bare_attr(ino: Ino, kind: FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino.0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: file_type(kind),
        perm: 0,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// Supplementary groups of process `pid`, from `/proc` (empty when unknown).
pub(crate) fn groups_of(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
