//! `.control`: how path tools (`strata rmr`, `clone`, `info`, `summary`, `compact`,
//! `warmup`) act
//! through the mount that serves a path instead of opening the engine themselves. A tool
//! opens `MOUNT/.control`, writes one request (a JSON line naming inodes as the mount
//! shows them), and reads JSON lines back: progress while the operation runs, then its
//! result or its errno. The operation runs in the mount, as the caller — the uid, gid and
//! groups the kernel gave the write — under the mount's own view: `--subdir` (inode 1 is
//! the mount's root) and `--read-only` apply, and no credentials are needed. Closing the
//! file stops the operation between two steps (never inside a transaction).
//!
//! The wire format is versioned (`docs/FORMAT.md`, ".control protocol") and defined in
//! [`crate::control_wire`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use strata_meta::Ctx;
use strata_types::Errno;
use tokio_util::sync::CancellationToken;

use crate::control_wire::{
    CONTROL_PROTOCOL, ControlOp, ControlReply, ControlRequest, ControlResult,
};
use crate::maintenance::Progress;
use crate::{Result, Vfs};

/// Largest request accepted (a request is a few hundred bytes).
const MAX_REQUEST: usize = 64 << 10;
/// How long a read waits for output before it returns a progress line instead.
const PROGRESS_EVERY: Duration = Duration::from_millis(300);

/// One open `.control`.
#[derive(Debug, Default)]
pub(crate) struct ControlHandle {
    /// Request bytes written so far (until the newline).
    input: Mutex<Vec<u8>>,
    started: std::sync::atomic::AtomicBool,
    progress: Arc<Progress>,
    output: Mutex<ControlOutput>,
    ready: tokio::sync::Notify,
    cancel: CancellationToken,
}

#[derive(Debug, Default)]
struct ControlOutput {
    bytes: Vec<u8>,
    finished: bool,
}

impl ControlHandle {
    /// Queue a reply line for the reader and wake it.
    fn push(&self, reply: &ControlReply, last: bool) {
        self.append(reply, last);
        self.ready.notify_one();
    }

    /// Queue a reply line without waking anyone: for the progress line a read itself
    /// makes (a wake-up here would be kept as a permit by `notify_one` and end the next
    /// read's wait at once, turning the tool's reads into a busy loop).
    fn append(&self, reply: &ControlReply, last: bool) {
        let mut line = serde_json::to_vec(reply).unwrap_or_else(|e| {
            format!("{{\"reply\":\"failed\",\"errno\":5,\"message\":\"{e}\"}}").into_bytes()
        });
        line.push(b'\n');
        let mut out = self.output.lock();
        out.bytes.extend_from_slice(&line);
        out.finished |= last;
    }

    fn progress_line(&self) -> ControlReply {
        ControlReply::Progress {
            stage: self.progress.stage_name(),
            done: self.progress.done.load(Ordering::Relaxed),
            total: self.progress.total.load(Ordering::Relaxed),
            bytes: self.progress.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Handles of open `.control` files.
pub(crate) type ControlHandles = Mutex<HashMap<u64, Arc<ControlHandle>>>;

impl Vfs {
    pub(crate) fn open_control(&self) -> u64 {
        let fh = self.new_fh();
        self.restore_control(fh);
        fh
    }

    /// Register `.control` handle `fh` (new, or one a handed-over mount had open; a
    /// request it was running is not carried over).
    pub(crate) fn restore_control(&self, fh: u64) {
        self.register_as(fh, crate::CONTROL_INO, true, false);
        self.controls
            .lock()
            .insert(fh, Arc::new(ControlHandle::default()));
    }

    fn control(&self, fh: u64) -> Option<Arc<ControlHandle>> {
        self.controls.lock().get(&fh).cloned()
    }

    /// A write to `.control` by `ctx`: collects the request line, then starts it.
    pub async fn control_write(self: &Arc<Self>, fh: u64, ctx: &Ctx, data: &[u8]) -> Result<u32> {
        let handle = self.control(fh).ok_or(Errno::EBADF)?;
        let written = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        let line = {
            let mut input = handle.input.lock();
            if handle.started.load(Ordering::Acquire) || input.len() + data.len() > MAX_REQUEST {
                return Err(Errno::EINVAL);
            }
            input.extend_from_slice(data);
            let Some(end) = input.iter().position(|b| *b == b'\n') else {
                return Ok(written);
            };
            handle.started.store(true, Ordering::Release);
            input[..end].to_vec()
        };
        let request = match serde_json::from_slice::<ControlRequest>(&line) {
            Ok(r) if r.version == CONTROL_PROTOCOL => r,
            Ok(r) => {
                let message = format!(
                    "protocol version {} (this mount speaks {CONTROL_PROTOCOL}): use the \
                     strata binary the mount runs",
                    r.version
                );
                handle.push(&failed(Errno::EPROTO, message), true);
                return Ok(written);
            }
            Err(e) => {
                handle.push(&failed(Errno::EINVAL, format!("bad request: {e}")), true);
                return Ok(written);
            }
        };
        let vfs = self.clone();
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let reply = match vfs.run_control(&ctx, request.op, &handle).await {
                Ok(result) => ControlReply::Done { result },
                Err((errno, message)) => failed(errno, message),
            };
            handle.push(&reply, true);
        });
        Ok(written)
    }

    /// A read of `.control`: the reply lines so far (waiting a little for some), else the
    /// current progress; end of file once the result was read.
    pub(crate) async fn read_control(&self, fh: u64, size: usize) -> Option<bytes::Bytes> {
        let handle = self.control(fh)?;
        let wait = handle.ready.notified();
        if handle.output.lock().bytes.is_empty() && !handle.output.lock().finished {
            let _ = tokio::time::timeout(PROGRESS_EVERY, wait).await;
        }
        let mut out = handle.output.lock();
        if out.bytes.is_empty() && !out.finished {
            drop(out);
            handle.append(&handle.progress_line(), false);
            out = handle.output.lock();
        }
        let take = size.min(out.bytes.len());
        Some(bytes::Bytes::from(
            out.bytes.drain(..take).collect::<Vec<u8>>(),
        ))
    }

    /// The last close of a `.control` handle stops its operation.
    pub(crate) fn release_control(&self, fh: u64) {
        if let Some(handle) = self.controls.lock().remove(&fh) {
            handle.cancel.cancel();
        }
    }

    /// Run a path tool's operation in this process, as `ctx`, without a `.control`
    /// file (for front ends with no mount to write to, such as the Python SDK). Inode
    /// numbers in `op` are the front end's (its root is 1).
    pub async fn run_tool(
        &self,
        ctx: &Ctx,
        op: ControlOp,
    ) -> std::result::Result<ControlResult, (Errno, String)> {
        let handle = ControlHandle::default();
        self.run_control(ctx, op, &handle).await
    }

    async fn run_control(
        &self,
        ctx: &Ctx,
        op: ControlOp,
        handle: &ControlHandle,
    ) -> std::result::Result<ControlResult, (Errno, String)> {
        let job = Job {
            ctx,
            progress: &handle.progress,
            cancel: &handle.cancel,
        };
        let front = |ino: u64| self.from_front(ino);
        match op {
            ControlOp::Rmr {
                parent,
                name,
                threads,
                skip_trash,
            } => {
                let options = strata_meta::RemoveOptions {
                    threads,
                    trash: if skip_trash {
                        strata_meta::TrashUse::Never
                    } else {
                        strata_meta::TrashUse::Volume
                    },
                };
                self.control_rmr(&job, (front(parent), &name), options)
                    .await
            }
            ControlOp::Clone {
                src,
                parent,
                name,
                preserve,
            } => {
                self.control_clone(&job, front(src), (front(parent), &name), preserve)
                    .await
            }
            ControlOp::Info { ino } => self.control_info(front(ino)).await,
            ControlOp::Summary { ino, depth } => {
                self.control_summary(&job, front(ino), depth).await
            }
            ControlOp::Compact { ino, threads } => {
                self.control_compact(&job, front(ino), threads).await
            }
            ControlOp::Warmup { ino, spec } => self.control_warmup(&job, front(ino), &spec).await,
            ControlOp::Flush { timeout_secs } => self.control_flush(timeout_secs).await,
        }
    }
}

/// A running `.control` operation: who asked, where its progress goes, and whether the
/// asker is still there.
pub(crate) struct Job<'a> {
    pub ctx: &'a Ctx,
    pub progress: &'a Progress,
    pub cancel: &'a CancellationToken,
}

impl Job<'_> {
    /// For the metadata walks: counts progress; false (stop) once the asker left.
    pub fn step(&self) -> impl FnMut(u64) -> bool + Send + '_ {
        move |n| {
            self.progress.add(n, 0);
            !self.cancel.is_cancelled()
        }
    }

    /// EINTR once the asker closed `.control`.
    pub fn check(&self) -> std::result::Result<(), (Errno, String)> {
        if self.cancel.is_cancelled() {
            Err((Errno::EINTR, String::new()))
        } else {
            Ok(())
        }
    }
}

fn failed(errno: Errno, message: String) -> ControlReply {
    ControlReply::Failed {
        errno: errno.0,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With nothing new to say, each read waits for the progress interval: the tool's
    /// read loop costs a wake-up per interval, not a busy loop of FUSE round trips.
    #[tokio::test(start_paused = true)]
    async fn reads_without_news_wait_the_progress_interval() {
        let vfs = crate::testing::memory_vfs().await;
        let fh = vfs.open_control();
        for read in 0..3 {
            let started = tokio::time::Instant::now();
            let line = vfs.read_control(fh, 4096).await.expect("an open handle");
            assert!(
                line.starts_with(b"{\"reply\":\"progress\""),
                "read {read}: {line:?}"
            );
            assert!(
                started.elapsed() >= PROGRESS_EVERY,
                "read {read} returned after {:?}",
                started.elapsed()
            );
        }
        vfs.release_control(fh);
    }
}
