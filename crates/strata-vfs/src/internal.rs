//! Internal files at the root of a mount: `.stats` (live counters of this client),
//! `.config` (the client's settings, without secrets), `.accesslog` (a stream of the
//! operations served) and `.control` (path tools' channel into the mount,
//! [`crate::control`]). They are not listed by readdir; all but `.control` are read-only
//! and generated when opened. Inode numbers come from the reserved range
//! (docs/FORMAT.md).

use std::sync::Arc;

use strata_object::metered::ObjectStats;
use strata_types::{Attr, FileType, Ino};
use tokio::sync::broadcast::error::RecvError;

use crate::Vfs;

/// How long a read of `.accesslog` waits for a line before returning a "#" line.
const ACCESS_LOG_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

pub const STATS_INO: Ino = Ino(0x7FFF_FFFF_0000_0001);
pub const CONFIG_INO: Ino = Ino(0x7FFF_FFFF_0000_0002);
pub const ACCESSLOG_INO: Ino = Ino(0x7FFF_FFFF_0000_0003);
pub const CONTROL_INO: Ino = Ino(0x7FFF_FFFF_0000_0004);
/// Lines an `.accesslog` reader may fall behind before older ones are dropped.
pub(crate) const ACCESS_LOG_LINES: usize = 4096;

/// An open `.accesslog`: its subscription to the stream of log lines.
pub(crate) type AccessReader = Arc<tokio::sync::Mutex<tokio::sync::broadcast::Receiver<Arc<str>>>>;

/// The internal file named `name` at the root, if any.
pub fn internal_ino(name: &[u8]) -> Option<Ino> {
    match name {
        b".stats" => Some(STATS_INO),
        b".config" => Some(CONFIG_INO),
        b".accesslog" => Some(ACCESSLOG_INO),
        b".control" => Some(CONTROL_INO),
        _ => None,
    }
}

/// True for the inodes of internal files (front ends serve them with direct I/O: their
/// size is not known before they are read).
pub fn is_internal(ino: Ino) -> bool {
    ino == STATS_INO || ino == CONFIG_INO || ino == ACCESSLOG_INO || ino == CONTROL_INO
}

/// Local time of day for log lines (UTC, `YYYY.MM.DD hh:mm:ss.uuuuuu`).
pub fn log_time() -> String {
    let ns = strata_meta::now_ns();
    let hour = strata_meta::hour_name(ns); // YYYY-MM-DD-HH
    let secs_of_hour = (ns / 1_000_000_000).rem_euclid(3600);
    let micros = (ns / 1000).rem_euclid(1_000_000);
    let (date, hh) = hour.rsplit_once('-').unwrap_or((&hour, "00"));
    format!(
        "{} {hh}:{:02}:{:02}.{micros:06}",
        date.replace('-', "."),
        secs_of_hour / 60,
        secs_of_hour % 60
    )
}

pub(crate) fn internal_attr(ino: Ino, length: u64) -> Attr {
    let now = strata_meta::now_ns();
    Attr {
        kind: FileType::Regular,
        // Anyone may talk to the mount through `.control`: what a request may do is
        // checked against its caller.
        mode: if ino == CONTROL_INO { 0o666 } else { 0o444 },
        uid: 0,
        gid: 0,
        rdev: 0,
        atime: now,
        mtime: now,
        ctime: now,
        nlink: 1,
        length,
        parent: Ino::ROOT,
        xattrs: false,
        protection: Default::default(),
    }
}

impl Vfs {
    /// open(2) of an internal file: read-only; its contents are generated now.
    pub(crate) fn open_internal(&self, ino: Ino, flags: u32) -> crate::Result<(u64, Attr)> {
        if ino == CONTROL_INO {
            return Ok((self.open_control(), internal_attr(ino, 0)));
        }
        if flags & 3 != 0 {
            return Err(strata_types::Errno::EACCES);
        }
        let fh = self.register(ino, false, false);
        if ino == ACCESSLOG_INO {
            self.subscribe_access_log(fh);
            return Ok((fh, internal_attr(ino, 0)));
        }
        let content = bytes::Bytes::from(self.internal_content(ino));
        let attr = internal_attr(ino, u64::try_from(content.len()).unwrap_or(u64::MAX));
        self.internal_reads.lock().insert(fh, content);
        Ok((fh, attr))
    }

    /// A read of an internal file's handle; `None` for other handles.
    pub(crate) async fn read_internal(&self, fh: u64, off: u64, size: u32) -> Option<bytes::Bytes> {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if let Some(replies) = self.read_control(fh, size).await {
            return Some(replies);
        }
        if let Some(lines) = self.read_access_log(fh, size).await {
            return Some(bytes::Bytes::from(lines));
        }
        let content = self.internal_reads.lock().get(&fh).cloned()?;
        let start = usize::try_from(off)
            .unwrap_or(usize::MAX)
            .min(content.len());
        let end = start.saturating_add(size).min(content.len());
        Some(content.slice(start..end))
    }

    /// The last close of an internal file's handle.
    pub(crate) fn release_internal(&self, fh: u64) {
        self.release_control(fh);
        self.unsubscribe_access_log(fh);
        self.internal_reads.lock().remove(&fh);
    }

    /// Whether anyone is reading `.accesslog` (callers skip formatting lines otherwise).
    pub fn access_log_active(&self) -> bool {
        self.access_log.receiver_count() > 0
    }

    /// Send one line to every `.accesslog` reader.
    pub fn log_access(&self, line: String) {
        let _ = self.access_log.send(Arc::from(line));
    }

    pub(crate) fn subscribe_access_log(&self, fh: u64) {
        let reader = Arc::new(tokio::sync::Mutex::new(self.access_log.subscribe()));
        self.access_readers.lock().insert(fh, reader);
    }

    /// Lines of `.accesslog` for handle `fh`: waits for the first (up to a second), then
    /// takes whatever else is queued.
    pub(crate) async fn read_access_log(&self, fh: u64, size: usize) -> Option<Vec<u8>> {
        let reader = self.access_readers.lock().get(&fh).cloned()?;
        let mut rx = reader.lock().await;
        let mut out = Vec::new();
        loop {
            let next = if out.is_empty() {
                // A read waits at most a second: a FUSE read cannot be interrupted once the
                // daemon has it, so an idle reader gets a "#" line and can be killed.
                match tokio::time::timeout(ACCESS_LOG_IDLE, rx.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        out.extend_from_slice(b"#\n");
                        break;
                    }
                }
            } else {
                rx.try_recv().map_err(|_| RecvError::Closed)
            };
            match next {
                Ok(line) => {
                    out.extend_from_slice(line.as_bytes());
                    out.push(b'\n');
                    if out.len() >= size.saturating_sub(512) {
                        break;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    out.extend_from_slice(format!("# {n} lines dropped\n").as_bytes())
                }
                Err(RecvError::Closed) => break,
            }
        }
        Some(out)
    }

    pub(crate) fn unsubscribe_access_log(&self, fh: u64) {
        self.access_readers.lock().remove(&fh);
    }

    /// Record the settings `.config` shows.
    pub fn set_config_text(&self, text: String) {
        *self.config_text.lock() = text;
    }

    /// Let `.stats` show the object store's counters.
    pub fn set_object_stats(&self, stats: Arc<ObjectStats>) {
        *self.object_stats.lock() = Some(stats);
    }

    /// The object store's counters, if set.
    pub fn object_stats(&self) -> Option<Arc<ObjectStats>> {
        self.object_stats.lock().clone()
    }

    /// Current contents of an internal file.
    pub(crate) fn internal_content(&self, ino: Ino) -> Vec<u8> {
        if ino == CONFIG_INO {
            return self.config_text.lock().clone().into_bytes();
        }
        self.metrics_text().into_bytes()
    }
}
