//! `strata sync --queue META-URL`: the manager (lists, queues tasks, works on them too,
//! finishes directories, prints the job's summary) and `--worker` (takes the job's
//! addresses from the queue, works until the job is done). The queue is `strata-sync`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use strata_sync::manager::Enqueuer;
use strata_sync::open::{OpenHow, close_all};
use strata_sync::queue::{CopyOptions, JobRecord, Queue, now_ns};
use strata_sync::worker::{WorkerSetup, wait_for_job, work as run_worker};
use strata_sync::{Endpoint, Options, Selection, Shape, SyncStats};
use strata_types::{MetaUrl, redact_url};

use crate::progress::ProgressView;
use crate::sync_args::SyncArgs;
use crate::sync_report::{finish, progress_line};
use strata_sync::pair::open_pair;

/// How often a worker looks for a job when the queue has none.
const JOB_POLL: Duration = Duration::from_millis(500);

/// Both sides of the manager's run, opened, and their addresses as given.
pub(crate) struct Sides<'a> {
    pub src: Arc<dyn Endpoint>,
    pub dst: Arc<dyn Endpoint>,
    pub src_addr: &'a str,
    pub dst_addr: &'a str,
    pub shape: Shape,
}

async fn open_queue(url: &str) -> Result<Queue> {
    let url = MetaUrl::new(url.to_string());
    let engine = strata_client::open_engine(&url)
        .await
        .with_context(|| format!("--queue {url}"))?;
    Ok(Queue::new(engine))
}

/// Run as the manager of a new job in `queue_url`; `stats` ends up holding the whole
/// job's counts (every worker's).
pub(crate) async fn manage(
    a: &SyncArgs,
    queue_url: &str,
    sides: Sides<'_>,
    opts: Options,
    sel: Selection,
    stats: Arc<SyncStats>,
    started: Instant,
) -> Result<()> {
    let queue = open_queue(queue_url).await?;
    let copy = CopyOptions {
        perms: opts.perms,
        links: opts.links,
        check_new: opts.check_new,
        delete_src: opts.delete_src,
        no_https: a.no_https,
        check_change: opts.check_change,
    };
    let job = JobRecord::new(
        crate::hide_args::revealed_address(sides.src_addr),
        crate::hide_args::revealed_address(sides.dst_addr),
        sides.shape,
        copy,
        a.lease,
    );
    queue.start_job(&job).await?;
    tracing::info!("sync job {:x} queued in {}", job.id, redact_url(queue_url));
    let own = Arc::new(SyncStats::default());
    let worker = tokio::spawn(run_worker(WorkerSetup {
        queue: queue.clone(),
        job: job.clone(),
        src: sides.src.clone(),
        dst: sides.dst.clone(),
        threads: a.threads.max(1),
        bwlimit_mbps: a.bwlimit,
        stats: own.clone(),
    }));
    let enqueuer = Enqueuer::new(queue.clone(), job.clone(), worker);
    let (listing, working) = (stats.clone(), own);
    let view = ProgressView::start_line(move || {
        let both = SyncStats::default();
        both.add(&listing.snapshot());
        both.add(&working.snapshot());
        format!("{} (this host)", progress_line(&both, started))
    });
    let outcome =
        strata_sync::sync_queued(sides.src, sides.dst, opts, sel, stats.clone(), enqueuer).await;
    drop(view);
    let (counted, tasks) = queue.counters().await?;
    stats.add(&counted);
    queue.mark_finished(job.id).await?;
    outcome?;
    if !crate::wiring::quiet() {
        eprintln!("sync job {:x}: {tasks} tasks done", job.id);
    }
    Ok(())
}

/// `strata sync --worker --queue META-URL`: wait for a job that is not finished, open its
/// addresses, work on it until every task is done.
pub(crate) async fn work(a: &SyncArgs) -> Result<()> {
    let Some(queue_url) = &a.queue else {
        bail!("--worker needs --queue META-URL");
    };
    if a.src.is_some() || a.dst.is_some() {
        bail!("--worker takes SRC and DST from the queue's job: leave them out");
    }
    let started_ns = now_ns();
    let queue = open_queue(queue_url).await?;
    let waiting = || tracing::info!("waiting for a sync job in {}", redact_url(queue_url));
    let Some(job) = wait_for_job(&queue, started_ns, JOB_POLL, waiting)
        .await
        .with_context(|| format!("--queue {}", redact_url(queue_url)))?
    else {
        if !crate::wiring::quiet() {
            eprintln!("the sync job in the queue was done before this worker took a task");
        }
        return Ok(());
    };
    let how = OpenHow {
        links: job.copy.links,
        acls: job.copy.perms,
        threads: a.threads.max(1),
        list_threads: 1,
        no_https: job.copy.no_https,
        reveal: crate::hide_args::revealed_address_secret,
    };
    let mut clients = Vec::new();
    let pair = open_pair(&job.src, &job.dst, how, Some(job.shape), &mut clients).await?;
    let (src, dst) = (pair.src, pair.dst);
    tracing::info!(
        "working on sync job {:x}: {} to {}",
        job.id,
        redact_url(&job.src),
        redact_url(&job.dst)
    );
    let stats = Arc::new(SyncStats::default());
    let started = Instant::now();
    let counted = stats.clone();
    let view = ProgressView::start_line(move || progress_line(&counted, started));
    let outcome = run_worker(WorkerSetup {
        queue,
        job: job.clone(),
        src,
        dst,
        threads: a.threads.max(1),
        bwlimit_mbps: a.bwlimit,
        stats: stats.clone(),
    })
    .await;
    drop(view);
    close_all(clients).await;
    outcome?;
    finish(
        &stats,
        started,
        &format!("worker on sync job {:x}: ", job.id),
    )
}
