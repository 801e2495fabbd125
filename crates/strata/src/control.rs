//! The path tools' side of `.control` (`strata rmr`, `clone`, `info`, `summary`,
//! `compact`): find the FUSE mount that serves a path in the kernel's mount table (by
//! device number — never by a file found walking up the path, which anyone could plant),
//! check that its `.control` is a Strata mount's (inode number and device), hand it one
//! request, draw its progress, and return its result. The mount does the work as the
//! calling user, under its own view (subdir, read-only); no credentials are needed or
//! sent.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use strata_types::Errno;
use strata_vfs::CONTROL_INO;
use strata_vfs::control_wire::{
    CONTROL_PROTOCOL, ControlOp, ControlReply, ControlRequest, ControlResult,
};
use strata_vfs::maintenance::Progress;

use crate::progress::ProgressView;

/// A Strata mount, as the kernel's mount table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrataMount {
    pub root: PathBuf,
    pub dev: u64,
}

/// The mount serving `path` (which must exist), if it is a FUSE one: the deepest mount
/// point above it whose device is the path's. (Root mounts show as `fuse`, others as
/// `fuse.strata`; [`request`] checks the mount's `.control` before using it.)
pub fn mount_of(path: &Path) -> Result<StrataMount> {
    let canonical = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
    let dev = std::fs::metadata(&canonical)
        .with_context(|| format!("{}", canonical.display()))?
        .dev();
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .context("cannot read the mount table (/proc/self/mountinfo)")?;
    strata_mount_in(&table, &canonical, dev)
        .ok_or_else(|| anyhow::anyhow!("{} is not on a mounted Strata volume", path.display()))
}

/// The mount of `path` (on device `dev`) in a `mountinfo` table, if it is a Strata one.
fn strata_mount_in(table: &str, path: &Path, dev: u64) -> Option<StrataMount> {
    let (major, minor) = split_dev(dev);
    let mut best: Option<PathBuf> = None;
    for line in table.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = mount.split(' ').collect();
        let fstype = fs.split(' ').next().unwrap_or("");
        let (Some(device), Some(point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        let deeper = best
            .as_ref()
            .is_none_or(|b| point.components().count() > b.components().count());
        if (fstype == "fuse" || fstype.starts_with("fuse."))
            && *device == format!("{major}:{minor}")
            && path.starts_with(&point)
            && deeper
        {
            best = Some(point);
        }
    }
    best.map(|root| StrataMount { root, dev })
}

/// Linux device numbers: major in bits 8..20 and 32..44, minor in 0..8 and 20..32.
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// `mountinfo` writes space, tab, newline and backslash in paths as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let value = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Send `op` to `mount` and wait for its result, drawing progress on a terminal.
pub fn request(mount: &StrataMount, op: ControlOp) -> Result<ControlResult> {
    let path = mount.root.join(".control");
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} is not a Strata mount", mount.root.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::ReadOnlyFilesystem => bail!(
            "{} is mounted with -o ro, which keeps path tools out: mount with --read-only \
             instead (the mount refuses changes itself)",
            mount.root.display()
        ),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot reach the mount at {}", mount.root.display()));
        }
    };
    let meta = file.metadata()?;
    if meta.ino() != CONTROL_INO.0 || meta.dev() != mount.dev {
        bail!(
            "{} is not a Strata mount's control file (is the mount older than this command?)",
            path.display()
        );
    }
    let mut line = serde_json::to_vec(&ControlRequest {
        version: CONTROL_PROTOCOL,
        op,
    })?;
    line.push(b'\n');
    file.write_all(&line)
        .with_context(|| format!("sending the request to {}", mount.root.display()))?;
    let progress = Arc::new(Progress::default());
    let view = ProgressView::start(progress.clone());
    let answer = read_replies(&mut file, &progress);
    drop(view);
    answer
}

fn read_replies(file: &mut std::fs::File, progress: &Progress) -> Result<ControlResult> {
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf).context("reading the mount's answer")?;
        if n == 0 {
            bail!("the mount ended the request without an answer (see its log)");
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            match serde_json::from_slice::<ControlReply>(&line[..end])? {
                ControlReply::Progress {
                    stage,
                    done,
                    total,
                    bytes,
                } => show_progress(progress, &stage, done, total, bytes),
                ControlReply::Done { result } => return Ok(result),
                ControlReply::Failed { errno, message } => {
                    let name = Errno(errno).name();
                    if message.is_empty() {
                        let text = std::io::Error::from_raw_os_error(errno);
                        bail!("{text} ({name})")
                    }
                    bail!("{message} ({name})")
                }
            }
        }
    }
}

fn show_progress(progress: &Progress, stage: &str, done: u64, total: u64, bytes: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    if progress.stage_name() != stage {
        progress.stage(stage, total);
    }
    progress.total.store(total, Relaxed);
    progress.done.store(done, Relaxed);
    progress.bytes.store(bytes, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw
80 22 0:55 / /mnt/a rw,nosuid shared:40 - fuse.strata strata:vol rw,user_id=0
81 80 0:56 / /mnt/a/inner\\040dir rw shared:41 - fuse.strata strata:two rw,user_id=0
82 22 0:57 / /mnt/other rw shared:42 - ext4 /dev/vdb rw
83 22 0:58 / /mnt/root rw shared:43 - fuse strata:vol rw,user_id=0";

    #[test]
    fn the_deepest_strata_mount_of_the_same_device_serves_a_path() {
        let dev = |major: u64, minor: u64| (major << 8) | minor;
        let found = strata_mount_in(TABLE, Path::new("/mnt/a/x/y"), dev(0, 55)).unwrap();
        assert_eq!(found.root, PathBuf::from("/mnt/a"));
        let inner = strata_mount_in(TABLE, Path::new("/mnt/a/inner dir/f"), dev(0, 56)).unwrap();
        assert_eq!(
            inner.root,
            PathBuf::from("/mnt/a/inner dir"),
            "escaped space"
        );
        assert!(
            strata_mount_in(TABLE, Path::new("/mnt/a/x"), dev(0, 99)).is_none(),
            "a path on another device (another file system mounted below) is not served"
        );
        assert!(strata_mount_in(TABLE, Path::new("/mnt/other/x"), dev(0, 57)).is_none());
        let root = strata_mount_in(TABLE, Path::new("/mnt/root/x"), dev(0, 58)).unwrap();
        assert_eq!(
            root.root,
            PathBuf::from("/mnt/root"),
            "root mounts show as fuse"
        );
        assert!(strata_mount_in(TABLE, Path::new("/home/u"), dev(254, 0)).is_none());
    }
}
