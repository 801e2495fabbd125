//! The operations path tools run through `.control` ([`crate::control`]): each runs as
//! the caller, with the permission checks the equivalent shell command meets, and reports
//! progress as it goes.

use strata_chunk::{block_key, block_sizes};
use strata_meta::{Ctx, MAY_EXEC, MAY_READ, MAY_WRITE, MetaError};
use strata_types::{CHUNK_SIZE, Errno, FileType, Ino, Slice};

use crate::Vfs;
use crate::control::Job;
use crate::control_wire::{ChunkInfo, ControlResult, FileInfo, SliceInfo, SummaryRow};
use crate::errno::from_meta;

/// An operation's failure: the errno and a one-line message.
pub(crate) type Failure = (Errno, String);

/// A POSIX outcome carries no message (the tool names the errno); anything else says
/// what failed.
pub(crate) fn meta_failure(e: MetaError) -> Failure {
    let message = match e {
        MetaError::Posix(_) => String::new(),
        ref other => other.to_string(),
    };
    (from_meta(e), message)
}

fn errno_failure(e: Errno) -> Failure {
    (e, String::new())
}

impl Vfs {
    pub(crate) async fn control_rmr(
        &self,
        job: &Job<'_>,
        (parent, name): (Ino, &[u8]),
        options: strata_meta::RemoveOptions,
    ) -> Result<ControlResult, Failure> {
        self.writable().map_err(errno_failure)?;
        job.progress.stage("removing", 0);
        let removed = self
            .meta
            .remove_tree(job.ctx, (parent, name), options, &mut job.step())
            .await;
        // What is gone must not linger in the kernel's cache, whatever the outcome.
        self.invalidate_entry(parent, name).await;
        let entries = removed.map_err(meta_failure)?;
        Ok(ControlResult::Removed { entries })
    }

    pub(crate) async fn control_clone(
        &self,
        job: &Job<'_>,
        src: Ino,
        (parent, name): (Ino, &[u8]),
        preserve: bool,
    ) -> Result<ControlResult, Failure> {
        self.writable().map_err(errno_failure)?;
        // The clone shares committed slices: whatever this client still buffers goes first.
        let pending: Vec<Ino> = self.pending.lock().keys().copied().collect();
        for ino in pending {
            self.flush_inode(ino).await.map_err(errno_failure)?;
        }
        job.progress.stage("cloning", 0);
        let cloned = self
            .meta
            .clone_tree(job.ctx, src, parent, name, preserve, &mut job.step())
            .await;
        self.invalidate_entry(parent, name).await;
        let inodes = cloned.map_err(meta_failure)?;
        self.meta.flush_usage().await.map_err(meta_failure)?;
        Ok(ControlResult::Cloned { inodes })
    }

    pub(crate) async fn control_info(&self, ino: Ino) -> Result<ControlResult, Failure> {
        self.flush_inode(ino).await.map_err(errno_failure)?;
        let attr = self.getattr(ino).await.map_err(errno_failure)?;
        let mut info = FileInfo {
            ino: self.to_front(ino),
            kind: format!("{:?}", attr.kind),
            mode: attr.mode,
            uid: attr.uid,
            gid: attr.gid,
            nlink: attr.nlink,
            length: attr.length,
            dir_usage: None,
            chunks: Vec::new(),
        };
        match attr.kind {
            FileType::Directory => {
                info.dir_usage = Some(self.meta.dir_usage(ino).await.map_err(meta_failure)?);
            }
            FileType::Regular => {
                let format = self.meta.current_format().map_err(meta_failure)?;
                let block_size = format.block_size_kib << 10;
                let objects = |s: &Slice| -> Vec<String> {
                    if s.id == 0 {
                        return Vec::new();
                    }
                    block_sizes(s.size, block_size)
                        .map(|(b, size)| format!("{}/{}", format.name, block_key(s.id, b, size)))
                        .collect()
                };
                for (index, slices) in self.chunk_lists(ino, attr.length).await? {
                    let slices = slices
                        .iter()
                        .map(|s| SliceInfo {
                            pos: s.pos,
                            len: s.len,
                            id: s.id,
                            size: s.size,
                            off: s.off,
                            objects: objects(s),
                        })
                        .collect();
                    info.chunks.push(ChunkInfo { index, slices });
                }
            }
            _ => {}
        }
        Ok(ControlResult::Info(info))
    }

    /// The slice list of every chunk of a file of `length` bytes.
    pub(crate) async fn chunk_lists(
        &self,
        ino: Ino,
        length: u64,
    ) -> Result<Vec<(u32, Vec<Slice>)>, Failure> {
        let mut chunks = Vec::new();
        for index in 0..length.div_ceil(CHUNK_SIZE) {
            let index = u32::try_from(index).map_err(|_| errno_failure(Errno::EFBIG))?;
            let slices = self
                .meta
                .read_chunk(ino, index)
                .await
                .map_err(meta_failure)?;
            chunks.push((index, slices));
        }
        Ok(chunks)
    }

    pub(crate) async fn control_summary(
        &self,
        job: &Job<'_>,
        top: Ino,
        depth: usize,
    ) -> Result<ControlResult, Failure> {
        job.progress.stage("summing up", 0);
        let mut rows = Vec::new();
        let mut stack = vec![(top, Vec::new(), 0usize)];
        while let Some((dir, path, level)) = stack.pop() {
            job.check()?;
            let children = self.readable_subdirs(job.ctx, dir).await?;
            let u = self.meta.subtree_usage(dir).await.map_err(meta_failure)?;
            rows.push(SummaryRow {
                path: path.clone(),
                bytes: u.bytes,
                files: u.files,
                dirs: u.dirs,
            });
            job.progress.add(1, 0);
            if level >= depth {
                continue;
            }
            for (name, ino) in children.into_iter().rev() {
                let mut child = path.clone();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(&name);
                stack.push((ino, child, level + 1));
            }
        }
        Ok(ControlResult::Summary { rows })
    }

    /// The subdirectories of `dir`, in name order, if `ctx` may list it.
    async fn readable_subdirs(&self, ctx: &Ctx, dir: Ino) -> Result<Vec<(Vec<u8>, Ino)>, Failure> {
        self.meta
            .access(ctx, dir, MAY_READ | MAY_EXEC)
            .await
            .map_err(meta_failure)?;
        self.meta.subdirectories(dir).await.map_err(meta_failure)
    }

    pub(crate) async fn control_compact(
        &self,
        job: &Job<'_>,
        top: Ino,
        threads: usize,
    ) -> Result<ControlResult, Failure> {
        use futures::StreamExt;
        self.writable().map_err(errno_failure)?;
        job.progress.stage("finding fragmented chunks", 0);
        let (targets, skipped_files) = self.fragmented_chunks(job, top).await?;
        let total = u64::try_from(targets.len()).unwrap_or(u64::MAX);
        job.progress.stage("compacting chunks", total);
        let mut done = futures::stream::iter(targets)
            .take_while(|_| std::future::ready(!job.cancel.is_cancelled()))
            .map(|(ino, index)| self.compact_chunk(ino, index))
            .buffer_unordered(threads.clamp(1, 64));
        let mut chunks = 0;
        while let Some(compacted) = done.next().await {
            compacted.map_err(errno_failure)?;
            chunks += 1;
            job.progress.add(1, 0);
        }
        job.check()?;
        Ok(ControlResult::Compacted {
            chunks,
            skipped_files,
        })
    }

    /// Chunks with more than one slice in the files at or below `top` that the caller may
    /// write; and how many files were skipped because the caller may not.
    async fn fragmented_chunks(
        &self,
        job: &Job<'_>,
        top: Ino,
    ) -> Result<(Vec<(Ino, u32)>, u64), Failure> {
        let (files, skipped) = self.files_below(job, top, MAY_WRITE).await?;
        let mut targets = Vec::new();
        for (ino, length) in files {
            for (index, slices) in self.chunk_lists(ino, length).await? {
                if slices.len() > 1 {
                    targets.push((ino, index));
                }
            }
        }
        Ok((targets, skipped))
    }
}

impl Vfs {
    /// `.control`'s flush: commit every buffered write, make it durable, then wait until
    /// every staged block (`--writeback`) is in the object store.
    pub(crate) async fn control_flush(
        &self,
        timeout_secs: u64,
    ) -> std::result::Result<ControlResult, (Errno, String)> {
        self.flush_all().await.map_err(|e| {
            (
                e,
                "committing buffered writes failed (see the mount's log)".into(),
            )
        })?;
        self.sync().await.map_err(|e| {
            (
                e,
                "syncing staged blocks failed (see the mount's log)".into(),
            )
        })?;
        let Some(wb) = self.writeback() else {
            return Ok(ControlResult::Flushed { blocks: 0 });
        };
        let blocks = u64::try_from(wb.staged().0).unwrap_or(u64::MAX);
        wb.flush(std::time::Duration::from_secs(timeout_secs))
            .await
            .map_err(|e| {
                let (left, _) = wb.staged();
                (
                    Errno::EIO,
                    format!("{left} staged blocks not uploaded yet: {e}"),
                )
            })?;
        Ok(ControlResult::Flushed { blocks })
    }
}
