//! Background work of a client: the periodic sync that makes committed changes durable,
//! quota refresh, session heartbeat (which also flushes usage counters and
//! cleans sessions of dead clients), freeing the data of deleted files and replaced slices
//! (after the delay window), compacting fragmented chunks, and purging trash hours older
//! than the volume's trash days, automatic metadata backups, and following the metadata
//! engine's change feed.
//!
//! Jobs stop through a cancellation token, between two steps: a job is never cut off in
//! the middle of a transaction or an upload. [`BackgroundJobs::stop`] waits for that.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Vfs;

/// The running background tasks. [`BackgroundJobs::stop`] ends them at their next safe
/// point and waits; dropping them asks them to stop without waiting.
#[derive(Debug)]
pub struct BackgroundJobs {
    tasks: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

impl Drop for BackgroundJobs {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Sleep `every`; false when the jobs are stopping instead.
async fn wait(stop: &CancellationToken, every: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(every) => true,
    }
}

impl BackgroundJobs {
    /// Start heartbeats every `heartbeat`; with `cleanup`, also data deletion and
    /// compaction (off with `--no-bgjob`).
    pub fn start(
        vfs: Arc<Vfs>,
        heartbeat: Duration,
        cleanup: bool,
        backup: Option<MetaBackup>,
    ) -> BackgroundJobs {
        let stop = CancellationToken::new();
        let s = || stop.clone();
        // Keeps the client's metadata cache current (nothing where there is no feed).
        vfs.meta.start_following(s());
        let mut tasks = vec![
            tokio::spawn(sync_loop(vfs.clone(), s())),
            tokio::spawn(heartbeat_loop(vfs.clone(), heartbeat, s())),
            tokio::spawn(quota_loop(vfs.clone(), s())),
        ];
        if cleanup {
            tasks.push(tokio::spawn(deletion_loop(vfs.clone(), s())));
            tasks.push(tokio::spawn(compaction_loop(vfs.clone(), s())));
            tasks.push(tokio::spawn(trash_loop(vfs.clone(), s())));
        }
        if let Some(plan) = backup {
            tasks.push(tokio::spawn(backup_loop(vfs, plan, s())));
        }
        BackgroundJobs { tasks, stop }
    }

    /// Stop every job at its next safe point and wait until all have.
    pub async fn stop(mut self) {
        self.stop.cancel();
        for task in std::mem::take(&mut self.tasks) {
            if let Err(e) = task.await {
                tracing::warn!("a background job ended abnormally: {e}");
            }
        }
    }
}

/// How long a change may stay committed but not durable (ext4 commits its journal every
/// 5 s too).
pub const SYNC_EVERY: Duration = Duration::from_secs(5);

async fn sync_loop(vfs: Arc<Vfs>, stop: CancellationToken) {
    while wait(&stop, SYNC_EVERY).await {
        // Writes whose last close could not commit them are retried first.
        vfs.retry_kept_writes().await;
        if let Err(e) = vfs.sync().await {
            tracing::error!("periodic sync failed: errno {e} (reported to open files)");
        }
    }
}

async fn heartbeat_loop(vfs: Arc<Vfs>, every: Duration, stop: CancellationToken) {
    while wait(&stop, every).await {
        if let Err(e) = vfs.meta().heartbeat().await {
            tracing::warn!("session heartbeat failed: {e}");
        }
        let now = strata_meta::now_ns();
        if let Err(e) = vfs.meta().clean_stale_sessions_if_due(now, every).await {
            tracing::warn!("cleaning stale sessions failed: {e}");
        }
    }
}

async fn deletion_loop(vfs: Arc<Vfs>, stop: CancellationToken) {
    while wait(&stop, Duration::from_secs(1)).await {
        if let Err(e) = vfs.delete_pending_data().await {
            tracing::warn!("freeing deleted data failed: {e}");
        }
    }
}

async fn compaction_loop(vfs: Arc<Vfs>, stop: CancellationToken) {
    while wait(&stop, Duration::from_secs(5)).await {
        let Ok(candidates) = vfs.meta().compaction_candidates(16).await else {
            continue;
        };
        for c in candidates {
            if stop.is_cancelled() {
                return;
            }
            if let Err(e) = vfs.compact_chunk(c.ino, c.index).await {
                tracing::debug!("compacting chunk {} of {}: errno {e}", c.index, c.ino);
            }
        }
    }
}

/// Automatic metadata backups: how often, and the bucket (raw objects under the volume's
/// prefix) to write them to.
#[derive(Debug, Clone)]
pub struct MetaBackup {
    pub every: Duration,
    /// Each backup is one moment of the engine (see `BinaryDumpOptions::one_moment`).
    pub one_moment: bool,
    pub store: Arc<dyn strata_object::ObjectStore>,
    /// An encrypted volume's keys and the header of its sealed files: backups are sealed.
    pub seal: Option<crate::maintenance::backup::BackupSeal>,
}

async fn backup_loop(vfs: Arc<Vfs>, plan: MetaBackup, stop: CancellationToken) {
    while wait(&stop, plan.every.min(Duration::from_secs(600))).await {
        match crate::maintenance::backup::backup_if_due(
            vfs.meta(),
            &plan.store,
            plan.every,
            plan.one_moment,
            plan.seal.as_ref(),
        )
        .await
        {
            Ok(Some(name)) => tracing::info!("metadata backed up to {name}"),
            Ok(None) => {}
            Err(e) => tracing::warn!("metadata backup failed: {e}"),
        }
    }
}

/// How often quotas (limits and usage) are re-read; between refreshes a client counts
/// only its own changes, so several clients may overshoot a limit by this much writing.
const QUOTA_REFRESH_EVERY: Duration = Duration::from_secs(2);

async fn quota_loop(vfs: Arc<Vfs>, stop: CancellationToken) {
    while wait(&stop, QUOTA_REFRESH_EVERY).await {
        // Owner usage is written with the volume counters; write it before re-reading.
        if vfs.meta().has_quotas()
            && let Err(e) = vfs.meta().flush_usage().await
        {
            tracing::warn!("writing usage counters: {e}");
        }
        if let Err(e) = vfs.meta().refresh_quotas().await {
            tracing::warn!("reading quotas: {e}");
        }
    }
}

/// How often expired trash hours are purged.
const TRASH_PURGE_EVERY: Duration = Duration::from_secs(600);

async fn trash_loop(vfs: Arc<Vfs>, stop: CancellationToken) {
    while wait(&stop, TRASH_PURGE_EVERY).await {
        match vfs.meta().purge_trash(strata_meta::now_ns()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("purged {n} expired trash entries"),
            Err(strata_meta::MetaError::Posix(strata_types::Errno::EPERM)) => {
                tracing::warn!("expired trash hours holding immutable or locked files are kept")
            }
            // Another client may be purging the same hour.
            Err(e) => tracing::debug!("purging the trash: {e}"),
        }
    }
}

impl Vfs {
    /// Free chunks of deleted files, then delete blocks of slices whose last reference
    /// went away before the delay window (1 hour with a trash, else at once).
    pub async fn delete_pending_data(&self) -> Result<(), String> {
        let meta = self.meta();
        for ino in meta
            .pending_file_deletions(64)
            .await
            .map_err(|e| e.to_string())?
        {
            while !meta
                .free_file_chunks(ino)
                .await
                .map_err(|e| e.to_string())?
            {}
        }
        let trash = meta
            .current_format()
            .map(|f| f.trash_days > 0)
            .unwrap_or(false);
        let delay = if trash { 3600 * 1_000_000_000 } else { 0 };
        let before = strata_meta::now_ns() - delay;
        let due = meta
            .pending_slice_deletions(before, 256)
            .await
            .map_err(|e| e.to_string())?;
        if due.is_empty() {
            return Ok(());
        }
        // The changes that let these blocks go must survive a crash before the blocks are
        // gone, or a crash could bring back a file whose data is deleted. (The whole
        // sync: a metadata sync alone could make durable a commit whose blocks are not.)
        self.sync().await.map_err(|e| e.to_string())?;
        let mut done = Vec::with_capacity(due.len());
        for d in due {
            match self.chunks().delete_slice(d.id, d.size).await {
                Ok(()) => done.push(d),
                Err(e) => tracing::warn!("deleting blocks of slice {}: {e}", d.id),
            }
        }
        meta.finish_slice_deletions(&done)
            .await
            .map_err(|e| e.to_string())
    }
}
