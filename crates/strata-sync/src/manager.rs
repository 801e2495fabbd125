//! The manager's side of a queued job (`strata sync --queue`): the merge's work on each
//! key batched into tasks and queued, the manager's heartbeat kept while it lists, and
//! the wait for every task (this process's own worker runs some of them) before the
//! directories are finished.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::job::Job;
use crate::queue::{CopyOptions, JobRecord, QUEUE_VERSION, Queue, TaskBody, now_ns};
use crate::{Result, Shape, SyncError};

impl JobRecord {
    /// A new job copying `src` to `dst` (addresses with their credentials: workers on
    /// other hosts open them), read as `shape`, with leases of `lease`; a random id tells
    /// it from the job before it.
    pub fn new(
        src: String,
        dst: String,
        shape: Shape,
        copy: CopyOptions,
        lease: Duration,
    ) -> JobRecord {
        let bytes = *uuid::Uuid::new_v4().as_bytes();
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[..8]);
        JobRecord {
            queue: QUEUE_VERSION,
            id: u64::from_le_bytes(id),
            src,
            dst,
            shape,
            copy,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1),
            created_ns: now_ns(),
            listed: false,
            finished: false,
        }
    }
}

/// Keys per task at most.
const TASK_KEYS: usize = 100;
/// Bytes to copy per task at most (one bigger file is a task of its own).
const TASK_BYTES: u64 = 256 << 20;

fn bytes_of(job: &Job) -> u64 {
    match job {
        Job::Copy(e) | Job::Compare(e, _) => e.size,
        _ => 0,
    }
}

/// Batches the merge's work into tasks of the job in `queue`.
pub struct Enqueuer {
    queue: Queue,
    job: JobRecord,
    next_task: u64,
    batch: Vec<Job>,
    batch_bytes: u64,
    /// This process's own worker on the job.
    worker: JoinHandle<Result<()>>,
    heartbeat: CancellationToken,
    beating: JoinHandle<()>,
}

impl std::fmt::Debug for Enqueuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueuer")
            .field("job", &self.job.id)
            .field("next_task", &self.next_task)
            .finish()
    }
}

impl Enqueuer {
    /// Queue tasks of `job` (already started in `queue`); `worker` is this process's own
    /// worker on it. The manager's heartbeat runs until [`Enqueuer::finish`].
    pub fn new(queue: Queue, job: JobRecord, worker: JoinHandle<Result<()>>) -> Enqueuer {
        let heartbeat = CancellationToken::new();
        let beating = tokio::spawn(beat(queue.clone(), job.lease(), heartbeat.clone()));
        Enqueuer {
            queue,
            job,
            next_task: 0,
            batch: Vec::with_capacity(TASK_KEYS),
            batch_bytes: 0,
            worker,
            heartbeat,
            beating,
        }
    }

    /// Add the work on one key; a full batch is queued as a task.
    pub(crate) async fn push(&mut self, job: Job) -> Result<()> {
        let bytes = bytes_of(&job);
        if !self.batch.is_empty() && self.batch_bytes.saturating_add(bytes) > TASK_BYTES {
            self.flush().await?;
        }
        self.batch_bytes = self.batch_bytes.saturating_add(bytes);
        self.batch.push(job);
        if self.batch.len() >= TASK_KEYS {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let body = TaskBody {
            jobs: std::mem::take(&mut self.batch),
        };
        self.batch_bytes = 0;
        self.queue.enqueue(self.next_task, &body).await?;
        self.next_task += 1;
        Ok(())
    }

    /// Queue what is left (unless the merge `stopped`), tell the workers the listing is
    /// over, and wait for every task to be done.
    pub(crate) async fn finish(mut self, stopped: bool) -> Result<()> {
        let queued = if stopped { Ok(()) } else { self.flush().await };
        let listed = self.queue.mark_listed(self.job.id).await;
        let worked = match (&mut self.worker).await {
            Ok(r) => r,
            Err(e) => Err(SyncError::Check(format!(
                "this process's worker failed: {e}"
            ))),
        };
        self.heartbeat.cancel();
        if let Err(e) = (&mut self.beating).await {
            tracing::warn!("the manager's heartbeat task failed: {e}");
        }
        queued.and(listed).and(worked)
    }
}

/// Tell the workers the manager is alive, every third of a lease, until `stop`.
async fn beat(queue: Queue, lease: Duration, stop: CancellationToken) {
    let every = (lease / 3).max(Duration::from_millis(100));
    loop {
        let until = now_ns().saturating_add(i64::try_from(lease.as_nanos()).unwrap_or(i64::MAX));
        if let Err(e) = queue.manager_alive_until(until).await {
            tracing::warn!("telling the workers this manager is alive: {e}");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
