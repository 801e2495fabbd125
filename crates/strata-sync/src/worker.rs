//! A worker of a queued job (`strata sync --worker --queue`, and the manager's own): it
//! leases tasks, does their keys `threads` at a time, renews its leases while it works and
//! completes each task with its counts. A task taken over from a silent worker is done
//! again key by key, leaving out each copy the destination already has from this job, so
//! nothing that worker finished is copied twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use strata_object::limit::Pacer;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::decide::Options;
use crate::endpoint::{Endpoint, Entry, Kind};
use crate::job::Job;
use crate::queue::{JobRecord, Leased, QUEUE_VERSION, Queue, Taken, now_ns};
use crate::run::Run;
use crate::stats::{SyncStats, bump};
use crate::{Result, SyncError};

/// Tasks a worker holds at once (one is started while the last keys of another finish).
const LANES: usize = 2;
/// How often a worker with nothing to take looks again.
const POLL: Duration = Duration::from_millis(200);

/// What a worker needs: the job, both sides opened from its addresses, and its own
/// `threads` and bandwidth limit.
#[derive(Debug)]
pub struct WorkerSetup {
    pub queue: Queue,
    pub job: JobRecord,
    pub src: Arc<dyn Endpoint>,
    pub dst: Arc<dyn Endpoint>,
    pub threads: usize,
    pub bwlimit_mbps: u64,
    /// What this worker did, for its progress line and summary.
    pub stats: Arc<SyncStats>,
}

/// Tasks this worker holds: attempt, and whether the lease was lost.
type Held = Mutex<HashMap<u64, (u32, Arc<AtomicBool>)>>;

struct Worker {
    setup: WorkerSetup,
    opts: Options,
    pacer: Option<Arc<Pacer>>,
    slots: Arc<Semaphore>,
    held: Held,
}

/// Work on the job until every task is done; then make the destination (and, with
/// `--delete-src`, the source) durable.
pub async fn work(setup: WorkerSetup) -> Result<()> {
    let copy = setup.job.copy;
    let opts = Options {
        threads: setup.threads.max(1),
        perms: copy.perms,
        links: copy.links,
        check_new: copy.check_new,
        check_change: copy.check_change,
        delete_src: copy.delete_src,
        bwlimit_mbps: setup.bwlimit_mbps,
        ..Options::default()
    };
    let worker = Arc::new(Worker {
        pacer: Pacer::new(opts.bwlimit_mbps).map(Arc::new),
        slots: Arc::new(Semaphore::new(opts.threads)),
        opts,
        setup,
        held: Mutex::new(HashMap::new()),
    });
    let stop = CancellationToken::new();
    let renewing = tokio::spawn(renew(worker.clone(), stop.clone()));
    let mut lanes = JoinSet::new();
    for _ in 0..LANES {
        lanes.spawn(lane(worker.clone()));
    }
    let mut outcome = Ok(());
    while let Some(done) = lanes.join_next().await {
        let r =
            done.unwrap_or_else(|e| Err(SyncError::Check(format!("a worker task failed: {e}"))));
        if let Err(e) = r
            && outcome.is_ok()
        {
            outcome = Err(e);
        }
    }
    stop.cancel();
    if let Err(e) = renewing.await {
        tracing::warn!("the lease renewal task failed: {e}");
    }
    outcome?;
    worker.setup.dst.sync().await?;
    if worker.opts.delete_src {
        worker.setup.src.sync().await?;
    }
    Ok(())
}

/// Take and do tasks one after another until the job is done.
async fn lane(w: Arc<Worker>) -> Result<()> {
    let (id, lease) = (w.setup.job.id, w.setup.job.lease());
    loop {
        match w.setup.queue.take(id, lease).await? {
            Taken::Task(task) => do_task(&w, task).await?,
            Taken::Wait => tokio::time::sleep(POLL).await,
            Taken::Done => return Ok(()),
        }
    }
}

/// Every third of a lease, extend the leases this worker holds; mark lost ones.
async fn renew(w: Arc<Worker>, stop: CancellationToken) {
    let lease = w.setup.job.lease();
    let every = (lease / 3).max(Duration::from_millis(50));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let held: Vec<(u64, u32, Arc<AtomicBool>)> = w
            .held
            .lock()
            .iter()
            .map(|(id, (attempt, lost))| (*id, *attempt, lost.clone()))
            .collect();
        let until = now_ns().saturating_add(i64::try_from(lease.as_nanos()).unwrap_or(i64::MAX));
        for (id, attempt, lost) in held {
            match w.setup.queue.renew(id, attempt, until).await {
                Ok(true) => {}
                Ok(false) => lost.store(true, Ordering::Relaxed),
                Err(e) => tracing::warn!("task {id}: renewing its lease: {e}"),
            }
        }
    }
}

/// Do one task's keys, then complete it (unless its lease was lost meanwhile).
async fn do_task(w: &Arc<Worker>, task: Leased) -> Result<()> {
    let lost = Arc::new(AtomicBool::new(false));
    w.held.lock().insert(task.id, (task.attempt, lost.clone()));
    let stats = Arc::new(SyncStats::default());
    let run = Arc::new(Run {
        src: w.setup.src.clone(),
        dst: w.setup.dst.clone(),
        opts: w.opts.clone(),
        stats: stats.clone(),
        pacer: w.pacer.clone(),
    });
    let mut running = JoinSet::new();
    for job in task.body.jobs {
        if lost.load(Ordering::Relaxed) {
            break;
        }
        if task.attempt > 1 && done_before(&run, &job, w.setup.job.created_ns).await {
            continue;
        }
        let Ok(permit) = w.slots.clone().acquire_owned().await else {
            break;
        };
        let run = run.clone();
        running.spawn(async move {
            let ok = job.run(&run).await;
            drop(permit);
            ok
        });
    }
    while let Some(done) = running.join_next().await {
        if let Err(e) = done {
            tracing::error!("task {}: a copy failed: {e}", task.id);
            bump(&stats.failed, 1);
        }
    }
    w.held.lock().remove(&task.id);
    let counts = stats.snapshot();
    if lost.load(Ordering::Relaxed)
        || !w
            .setup
            .queue
            .complete(task.id, task.attempt, &counts)
            .await?
    {
        tracing::warn!(
            "task {}: another worker took it over while this one was silent; left to it",
            task.id
        );
        return Ok(());
    }
    w.setup.stats.add(&counts);
    Ok(())
}

/// Whether a retaken task's copy of `job` was already made during this job (started at
/// `job_started_ns`) by the worker that lost it: the destination holds the source's size,
/// written after the job began or with the source's mtime. Counted as skipped (and, with
/// `--delete-src`, the source deleted).
async fn done_before(run: &Run, job: &Job, job_started_ns: i64) -> bool {
    let Job::Copy(src) = job else {
        return false;
    };
    if src.kind != Kind::File {
        return false;
    }
    let there: Option<Entry> = match run.dst.stat(&src.key).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("{}: looking at the destination again: {e}", src.key);
            return false;
        }
    };
    let started = job_started_ns.div_euclid(1_000_000_000);
    let copied = there.is_some_and(|d| {
        d.kind == Kind::File
            && d.size == src.size
            && (d.mtime >= started || (d.mtime, d.mtime_nsec) == (src.mtime, src.mtime_nsec))
    });
    if !copied {
        return false;
    }
    bump(&run.stats.skipped, 1);
    bump(&run.stats.skipped_bytes, src.size);
    if run.opts.delete_src {
        match run.src.delete(src).await {
            Ok(()) => bump(&run.stats.deleted_src, 1),
            Err(e) => {
                tracing::error!("{}: {e}", src.key);
                bump(&run.stats.failed, 1);
            }
        }
    }
    true
}

/// The job a worker started at `started_ns` works on: the one in `queue` not finished
/// yet, waited for (a look every `poll`; `waiting` is called once when there is none).
/// `None` when the job there was begun after the worker started and is done already: the
/// job it was started for needed no help. A job of a newer queue version is refused.
pub async fn wait_for_job(
    queue: &Queue,
    started_ns: i64,
    poll: Duration,
    waiting: impl FnOnce(),
) -> Result<Option<JobRecord>> {
    let mut waiting = Some(waiting);
    let job = loop {
        match queue.job().await? {
            Some(job) if !job.finished => break job,
            Some(job) if job.created_ns >= started_ns => return Ok(None),
            _ => {
                if let Some(tell) = waiting.take() {
                    tell();
                }
            }
        }
        tokio::time::sleep(poll).await;
    };
    if job.queue > QUEUE_VERSION {
        return Err(SyncError::Usage(format!(
            "the sync job is of queue version {}; this strata knows {QUEUE_VERSION}",
            job.queue
        )));
    }
    Ok(Some(job))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use std::sync::atomic::AtomicUsize;

    use strata_meta::kv::memory::MemoryEngine;

    use super::*;
    use crate::queue::CopyOptions;

    fn new_job(created_ns: i64) -> JobRecord {
        let mut job = JobRecord::new(
            "/src".into(),
            "/dst".into(),
            crate::Shape::Tree,
            CopyOptions::default(),
            Duration::from_secs(30),
        );
        job.created_ns = created_ns;
        job
    }

    #[tokio::test]
    async fn a_worker_waits_for_an_unfinished_job_and_skips_one_done_without_it() {
        let queue = Queue::new(Arc::new(MemoryEngine::new()));
        let poll = Duration::from_millis(1);
        // None yet: the worker says it waits (once) until a job appears.
        let told = Arc::new(AtomicUsize::new(0));
        let waiter = {
            let (queue, told) = (queue.clone(), told.clone());
            tokio::spawn(async move {
                let tell = move || {
                    told.fetch_add(1, Ordering::SeqCst);
                };
                wait_for_job(&queue, now_ns(), poll, tell).await
            })
        };
        while told.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let job = new_job(now_ns());
        queue.start_job(&job).await.unwrap();
        let found = waiter.await.unwrap().unwrap().unwrap();
        assert_eq!((found.id, told.load(Ordering::SeqCst)), (job.id, 1));
        // A job begun after the worker started and finished before it looked: no work.
        let started = now_ns();
        let later = new_job(started + 1);
        queue.start_job(&later).await.unwrap();
        queue.mark_finished(later.id).await.unwrap();
        assert!(
            wait_for_job(&queue, started, poll, || {})
                .await
                .unwrap()
                .is_none()
        );
        // A job of a newer queue version is refused.
        let mut newer = new_job(now_ns());
        newer.queue = QUEUE_VERSION + 1;
        queue.start_job(&newer).await.unwrap();
        assert!(matches!(
            wait_for_job(&queue, now_ns(), poll, || {}).await,
            Err(SyncError::Usage(_))
        ));
    }
}
