//! Model-based: one random sequence of access-control steps — set and remove lists,
//! chmod, chown, create and mkdir under a umask, open and access(2) — run by several
//! users on a local ext4 directory and on a mount, step by step. Every step must end the
//! same on both: its errno, and the mode, owner and lists of the path it touched. Also
//! with the steps spread over two mounts of one volume.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use common::Volume;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Who runs a step: uid, gid, supplementary groups.
const USERS: [(u32, u32, &[u32]); 5] = [
    (0, 0, &[]),
    (1001, 1001, &[]),
    (1002, 1002, &[300]),
    (1003, 300, &[]),
    (1004, 1004, &[300, 1001]),
];
const NAMED_USERS: [u32; 4] = [1001, 1002, 1003, 1004];
const NAMED_GROUPS: [u32; 3] = [300, 1001, 1002];
const ACCESS: &str = "system.posix_acl_access";
const DEFAULT: &str = "system.posix_acl_default";

#[derive(Clone, Debug)]
enum Op {
    SetAcl {
        path: usize,
        default: bool,
        acl: Vec<u8>,
    },
    RemoveAcl {
        path: usize,
        default: bool,
    },
    Chmod {
        path: usize,
        mode: u32,
    },
    Chown {
        path: usize,
        user: usize,
    },
    Create {
        dir: usize,
        mode: u32,
        umask: u32,
        directory: bool,
    },
    Open {
        path: usize,
        flags: i32,
    },
    Access {
        path: usize,
        mask: i32,
    },
}

#[derive(Clone, Debug)]
struct Step {
    who: usize,
    op: Op,
}

/// A list in the kernel's binary form; invalid now and then (no mask with named
/// entries), which both sides must refuse alike.
fn arb_acl() -> impl Strategy<Value = Vec<u8>> {
    let named = |ids: &'static [u32]| {
        proptest::sample::subsequence(ids, 0..=ids.len()).prop_flat_map(|ids| {
            proptest::collection::vec(0u16..8, ids.len()).prop_map(move |p| (ids.clone(), p))
        })
    };
    (
        (0u16..8, 0u16..8, 0u16..8),
        proptest::option::weighted(0.8, 0u16..8),
        named(&NAMED_USERS),
        named(&NAMED_GROUPS),
    )
        .prop_map(
            |((owner, group, other), mask, (uids, uperms), (gids, gperms))| {
                let mut out = 2u32.to_le_bytes().to_vec();
                let mut entry = |tag: u16, perm: u16, id: u32| {
                    out.extend_from_slice(&tag.to_le_bytes());
                    out.extend_from_slice(&perm.to_le_bytes());
                    out.extend_from_slice(&id.to_le_bytes());
                };
                entry(0x01, owner, u32::MAX);
                for (uid, perm) in uids.iter().zip(&uperms) {
                    entry(0x02, *perm, *uid);
                }
                entry(0x04, group, u32::MAX);
                for (gid, perm) in gids.iter().zip(&gperms) {
                    entry(0x08, *perm, *gid);
                }
                if let Some(mask) = mask {
                    entry(0x10, mask, u32::MAX);
                }
                entry(0x20, other, u32::MAX);
                out
            },
        )
}

fn arb_op() -> impl Strategy<Value = Op> {
    let path = 0usize..64;
    let mode = prop_oneof![
        Just(0o777u32),
        Just(0o755),
        Just(0o750),
        Just(0o700),
        Just(0o640),
        Just(0o2775),
        0u32..0o10000
    ];
    prop_oneof![
        3 => (path.clone(), any::<bool>(), arb_acl())
            .prop_map(|(path, default, acl)| Op::SetAcl { path, default, acl }),
        1 => (path.clone(), any::<bool>()).prop_map(|(path, default)| Op::RemoveAcl { path, default }),
        2 => (path.clone(), mode.clone()).prop_map(|(path, mode)| Op::Chmod { path, mode }),
        1 => (path.clone(), 0usize..USERS.len()).prop_map(|(path, user)| Op::Chown { path, user }),
        3 => (path.clone(), mode, prop_oneof![Just(0o022u32), Just(0o077), Just(0o002), Just(0)], any::<bool>())
            .prop_map(|(dir, mode, umask, directory)| Op::Create { dir, mode, umask, directory }),
        3 => (path.clone(), prop_oneof![Just(libc::O_RDONLY), Just(libc::O_WRONLY), Just(libc::O_RDWR)])
            .prop_map(|(path, flags)| Op::Open { path, flags }),
        3 => (path, 1i32..8).prop_map(|(path, mask)| Op::Access { path, mask }),
    ]
}

fn arb_steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (0usize..USERS.len(), arb_op()).prop_map(|(who, op)| Step { who, op }),
        10..40,
    )
}

/// Run `f` on a thread of its own with the file-system identity of `USERS[who]` and
/// `umask` (the thread's credentials and umask only).
fn as_user<T: Send>(who: usize, umask: u32, f: impl FnOnce() -> T + Send) -> T {
    let (uid, gid, groups) = USERS[who];
    std::thread::scope(|s| {
        s.spawn(|| {
            sys::become_user(uid, gid, groups, umask);
            f()
        })
        .join()
        .unwrap()
    })
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

fn errno_of(rc: i64) -> String {
    if rc >= 0 {
        "ok".into()
    } else {
        std::io::Error::last_os_error().to_string()
    }
}

/// The system calls the steps make, on the calling thread, as libc gives them: nix has
/// no extended attributes, and its setgroups is libc's, which changes every thread.
#[allow(unsafe_code)]
mod sys {
    use std::ffi::CStr;

    /// Make this thread act as `uid`:`gid` with `groups` and `umask`, for file access.
    pub fn become_user(uid: u32, gid: u32, groups: &[u32], umask: u32) {
        // SAFETY: syscalls that change only this thread's credentials and fs context;
        // `groups` is a live slice whose length is passed with it.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_FS), 0);
            libc::umask(umask);
            let rc = libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
            assert_eq!(rc, 0);
            libc::syscall(libc::SYS_setfsgid, gid);
            libc::syscall(libc::SYS_setfsuid, uid);
        }
    }

    pub fn lsetxattr(path: &CStr, name: &CStr, value: &[u8]) -> i64 {
        // SAFETY: NUL-terminated strings and a live buffer with its length.
        i64::from(unsafe {
            libc::lsetxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        })
    }

    pub fn lremovexattr(path: &CStr, name: &CStr) -> i64 {
        // SAFETY: NUL-terminated strings.
        i64::from(unsafe { libc::lremovexattr(path.as_ptr(), name.as_ptr()) })
    }

    /// The attribute's value, or the errno's text.
    pub fn lgetxattr(path: &CStr, name: &CStr) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: NUL-terminated strings and a live buffer with its length.
        let len = unsafe {
            libc::lgetxattr(
                path.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let len = usize::try_from(len).map_err(|_| std::io::Error::last_os_error().to_string())?;
        buf.truncate(len);
        Ok(buf)
    }

    pub fn chmod(path: &CStr, mode: u32) -> i64 {
        // SAFETY: a NUL-terminated string.
        i64::from(unsafe { libc::chmod(path.as_ptr(), mode) })
    }

    pub fn lchown(path: &CStr, uid: u32, gid: u32) -> i64 {
        // SAFETY: a NUL-terminated string.
        i64::from(unsafe { libc::lchown(path.as_ptr(), uid, gid) })
    }

    pub fn mkdir(path: &CStr, mode: u32) -> i64 {
        // SAFETY: a NUL-terminated string.
        i64::from(unsafe { libc::mkdir(path.as_ptr(), mode) })
    }

    /// open(2) with `flags` (and `mode` when creating), closed at once.
    pub fn open_close(path: &CStr, flags: i32, mode: u32) -> i64 {
        // SAFETY: a NUL-terminated string; the descriptor is closed once.
        unsafe {
            let fd = libc::open(path.as_ptr(), flags, mode);
            if fd >= 0 {
                libc::close(fd);
            }
            i64::from(fd)
        }
    }

    /// access(2) as the thread's file-system identity (`AT_EACCESS`).
    pub fn access(path: &CStr, mask: i32) -> i64 {
        // SAFETY: a NUL-terminated string.
        unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                libc::AT_FDCWD,
                path.as_ptr(),
                mask,
                libc::AT_EACCESS,
            )
        }
    }

    /// Permission bits, owner and group, without following a symlink.
    pub fn lstat(path: &CStr) -> Result<(u32, u32, u32), String> {
        // SAFETY: a NUL-terminated string and a zeroed stat buffer the call fills.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::lstat(path.as_ptr(), &mut st) != 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
            Ok((st.st_mode & 0o7777, st.st_uid, st.st_gid))
        }
    }
}

/// What a path looks like to root: mode, owner and both lists.
fn observe(path: &Path) -> String {
    let p = c(path);
    let mut out = match sys::lstat(&p) {
        Ok((mode, uid, gid)) => format!("{mode:o} {uid}:{gid}"),
        Err(e) => return format!("lstat: {e}"),
    };
    for name in [ACCESS, DEFAULT] {
        match sys::lgetxattr(&p, &CString::new(name).unwrap()) {
            Ok(value) => out.push_str(&format!(" {name}: {value:02x?}")),
            Err(e) => out.push_str(&format!(" {name}: {e}")),
        }
    }
    out
}

/// The tree a sequence works in: paths relative to the root, all made by the steps.
struct Tree {
    paths: Vec<PathBuf>,
    made: usize,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            paths: vec![PathBuf::from(".")],
            made: 0,
        }
    }

    fn pick(&self, i: usize) -> &Path {
        &self.paths[i % self.paths.len()]
    }
}

/// Run one step under `root`; its outcome and what the touched path then looks like.
fn run(root: &Path, tree: &mut Tree, step: &Step) -> String {
    let who = step.who;
    let (touched, outcome) = match &step.op {
        Op::SetAcl { path, default, acl } => {
            let (rel, p, name) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
                list_name(*default),
            );
            (
                rel,
                as_user(who, 0, || errno_of(sys::lsetxattr(&p, &name, acl))),
            )
        }
        Op::RemoveAcl { path, default } => {
            let (rel, p, name) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
                list_name(*default),
            );
            (
                rel,
                as_user(who, 0, || errno_of(sys::lremovexattr(&p, &name))),
            )
        }
        Op::Chmod { path, mode } => {
            let (rel, p) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
            );
            (rel, as_user(who, 0, || errno_of(sys::chmod(&p, *mode))))
        }
        Op::Chown { path, user } => {
            let (rel, p) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
            );
            let (uid, gid, _) = USERS[*user];
            (rel, as_user(who, 0, || errno_of(sys::lchown(&p, uid, gid))))
        }
        Op::Create {
            dir,
            mode,
            umask,
            directory,
        } => {
            let rel = tree.pick(*dir).join(format!("n{}", tree.made));
            tree.made += 1;
            let p = c(&root.join(&rel));
            let outcome = as_user(who, *umask, || {
                errno_of(if *directory {
                    sys::mkdir(&p, *mode)
                } else {
                    sys::open_close(&p, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, *mode)
                })
            });
            if outcome == "ok" {
                tree.paths.push(rel.clone());
            }
            (rel, outcome)
        }
        Op::Open { path, flags } => {
            let (rel, p) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
            );
            let flags = *flags | libc::O_NOFOLLOW;
            (
                rel,
                as_user(who, 0, || errno_of(sys::open_close(&p, flags, 0))),
            )
        }
        Op::Access { path, mask } => {
            let (rel, p) = (
                tree.pick(*path).to_path_buf(),
                c(&under(root, tree.pick(*path))),
            );
            (rel, as_user(who, 0, || errno_of(sys::access(&p, *mask))))
        }
    };
    format!("{outcome} | {}", observe(&under(root, &touched)))
}

/// `rel` under `root`; the root itself by its own name, not as `root/.` (whose walk
/// needs search permission on the root).
fn under(root: &Path, rel: &Path) -> PathBuf {
    if rel == Path::new(".") {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

fn list_name(default: bool) -> CString {
    CString::new(if default { DEFAULT } else { ACCESS }).unwrap()
}

/// A fresh directory for one sequence under `base`, open to everyone (as the root of
/// a shared volume would be).
fn fresh_dir(base: &Path, case: usize) -> PathBuf {
    let dir = base.join(format!("case{case}"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    dir
}

/// Run many random sequences on local disk and on `roots` (steps taken in turn from each
/// root, which all show one directory), comparing every step. `no_umask`: creates run
/// with umask 0 (for mounts where the kernel applies the umask before Strata decides).
fn compare_with_local_disk(roots: &[PathBuf], cases: u32, no_umask: bool) {
    let local = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        local.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&arb_steps(), |mut steps| {
            if no_umask {
                for step in &mut steps {
                    if let Op::Create { umask, .. } = &mut step.op {
                        *umask = 0;
                    }
                }
            }
            let case = case.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let expected_root = fresh_dir(local.path(), case);
            let name = expected_root.file_name().unwrap().to_owned();
            fresh_dir(&roots[0], case);
            let (mut expected_tree, mut tree) = (Tree::new(), Tree::new());
            for (i, step) in steps.iter().enumerate() {
                let expected = run(&expected_root, &mut expected_tree, step);
                let root = roots[i % roots.len()].join(&name);
                let got = run(&root, &mut tree, step);
                if got != expected {
                    return Err(TestCaseError::fail(format!(
                        "step {i} {step:?}\n  local disk: {expected}\n  mount:      {got}"
                    )));
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_list_steps_end_as_on_local_disk() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let m = vol.mount("mnt");
    compare_with_local_disk(std::slice::from_ref(&m.path), 128, false);
}

#[test]
fn random_list_steps_spread_over_two_mounts_end_as_on_local_disk() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let no_cache = [
        "--attr-cache",
        "0",
        "--entry-cache",
        "0",
        "--dir-entry-cache",
        "0",
    ];
    let a = vol.mount_with("a", &no_cache);
    let b = vol.mount_with("b", &no_cache);
    compare_with_local_disk(&[a.path.clone(), b.path.clone()], 64, false);
}

/// With `--non-default-permission` every check is Strata's own (the kernel checks
/// nothing): the same steps must still end as on local disk. Without entry caching,
/// since the kernel does not ask again about search permission on directories whose
/// entries it has cached (docs/SEMANTICS.md).
#[test]
fn random_list_steps_checked_by_strata_alone_end_as_on_local_disk() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let flags = [
        "--non-default-permission",
        "--entry-cache",
        "0",
        "--dir-entry-cache",
        "0",
        "--negative-entry-cache",
        "0",
    ];
    let m = vol.mount_with("mnt", &flags);
    compare_with_local_disk(std::slice::from_ref(&m.path), 256, true);
}
