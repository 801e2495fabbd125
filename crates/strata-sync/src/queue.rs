//! The task queue of `strata sync --queue` (format "sync queue v2", docs/FORMAT.md), kept
//! in a metadata engine the user already runs (Redis, PostgreSQL, etcd, SQLite) through
//! the `Kv` transactions of `strata-meta`, under keys starting with `Y`.
//!
//! One job at a time: the manager writes the job record, then tasks (batches of keys to
//! copy or delete) as it lists. A worker leases a task (`Yp` → `Yl`), renews its leases
//! while it works, and completes a task by deleting it and adding its counts to the job's
//! counters — only while the lease is still its own. A lease not renewed for the job's
//! lease time is taken over by another worker. Every state change is one transaction, so
//! two workers never hold the same task.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;
use serde::{Deserialize, Serialize};
use strata_meta::kv::{FieldOp, FieldUpdate, KvEngine, KvError, RetryPolicy, Txn, run_txn};
use strata_types::redact_url;

use crate::job::Job;
use crate::stats::Snapshot;
use crate::{Result, SyncError};

/// The version written in the job record; a worker refuses a newer one.
pub const QUEUE_VERSION: u32 = 2;

const JOB: &[u8] = b"Yj";
const MANAGER: &[u8] = b"Ym";
const COUNTERS: &[u8] = b"Yc";
const TASK: u8 = b't';
const PENDING: u8 = b'p';
const LEASED: u8 = b'l';
/// Records deleted per transaction when a new job clears the old one (etcd allows 128
/// operations in one transaction).
const CLEAR_BATCH: usize = 100;
/// Pending tasks looked at per take; one is picked at random so workers rarely collide.
const PICK_FROM: usize = 16;
/// Leases looked at for expired ones per take.
const LEASES_SCANNED: usize = 1000;

fn key(kind: u8, task: u64) -> Vec<u8> {
    let mut k = vec![b'Y', kind];
    k.extend_from_slice(&task.to_be_bytes());
    k
}

fn kind_range(kind: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![b'Y', kind], vec![b'Y', kind + 1])
}

fn task_of(k: &[u8]) -> Option<u64> {
    strata_meta::keys::be_u64(k, 2)
}

/// Nanoseconds since the Unix epoch, by this host's clock.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// What a worker needs of the flags to do a task the way the manager decided it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyOptions {
    pub perms: bool,
    pub links: bool,
    pub check_new: bool,
    pub delete_src: bool,
    /// `s3://` endpoints over http (`--no-https`); absent: https.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_https: bool,
    /// `--check-change`; absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_change: bool,
}

/// The job record (`Yj`). Its `Debug` shows the addresses without their credentials.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// [`QUEUE_VERSION`].
    pub queue: u32,
    /// Random; tells this job from the one before it.
    pub id: u64,
    /// SRC and DST as given to the manager, credentials included.
    pub src: String,
    pub dst: String,
    /// How SRC and DST were read (queue v2; a v1 job is two trees).
    #[serde(default)]
    pub shape: crate::Shape,
    pub copy: CopyOptions,
    /// How long a lease lasts without renewal, ms.
    pub lease_ms: u64,
    /// When the manager started the job (ns).
    pub created_ns: i64,
    /// Every task has been queued.
    pub listed: bool,
    /// Every task is done and the manager has finished (directories, summary).
    pub finished: bool,
}

impl std::fmt::Debug for JobRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRecord")
            .field("queue", &self.queue)
            .field("id", &self.id)
            .field("src", &redact_url(&self.src))
            .field("dst", &redact_url(&self.dst))
            .field("shape", &self.shape)
            .field("copy", &self.copy)
            .field("lease_ms", &self.lease_ms)
            .field("created_ns", &self.created_ns)
            .field("listed", &self.listed)
            .field("finished", &self.finished)
            .finish()
    }
}

impl JobRecord {
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }
}

/// A task's keys (`Yt` task): what the manager decided for each.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskBody {
    pub jobs: Vec<Job>,
}

/// A lease (`Yl` task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Lease {
    worker: u64,
    /// Times this task has been leased, this lease included.
    attempt: u32,
    expires_ns: i64,
}

/// A task this worker holds.
#[derive(Debug)]
pub struct Leased {
    pub id: u64,
    /// 1 for a task never leased before; more for one taken over from a silent worker.
    pub attempt: u32,
    pub body: TaskBody,
}

/// What a worker does to a task it still holds.
enum HeldChange {
    /// Extend the lease to this time (ns).
    Renew(i64),
    /// Drop the task, adding these to the counters.
    Complete(Vec<FieldOp>),
}

/// What a take found.
#[derive(Debug)]
pub enum Taken {
    Task(Leased),
    /// Nothing to take now; more may come.
    Wait,
    /// Every task is done and nothing more will come.
    Done,
}

/// The job's counters (`Yc`): a field record of i64 slots, updated without conflicts.
const COUNTER_SLOTS: usize = 12;

fn counter_ops(s: &Snapshot, tasks_done: u64) -> Vec<FieldOp> {
    let values = [
        tasks_done,
        s.copied,
        s.copied_bytes,
        s.checked,
        s.checked_bytes,
        s.skipped,
        s.skipped_bytes,
        s.dirs_made,
        s.deleted_src,
        s.deleted_dst,
        s.failed,
        0,
    ];
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(slot, v)| FieldOp {
            slot,
            update: FieldUpdate::Add(i64::try_from(*v).unwrap_or(i64::MAX)),
        })
        .collect()
}

fn counters_of(value: &[u8]) -> (Snapshot, u64) {
    let slot = |i: usize| {
        value
            .get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| u64::try_from(i64::from_le_bytes(b)).unwrap_or(0))
    };
    let s = Snapshot {
        copied: slot(1),
        copied_bytes: slot(2),
        checked: slot(3),
        checked_bytes: slot(4),
        skipped: slot(5),
        skipped_bytes: slot(6),
        dirs_made: slot(7),
        deleted_src: slot(8),
        deleted_dst: slot(9),
        failed: slot(10),
        ..Snapshot::default()
    };
    (s, slot(0))
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> KvError {
    KvError::Corrupt {
        key: what.to_string(),
        reason: e.to_string(),
    }
}

fn decode<T: for<'de> Deserialize<'de>>(what: &str, value: &[u8]) -> Result<T, KvError> {
    serde_json::from_slice(value).map_err(|e| corrupt(what, e))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, KvError> {
    serde_json::to_vec(value).map_err(|e| KvError::Engine(format!("encoding a record: {e}")))
}

fn queue_error(e: KvError) -> SyncError {
    SyncError::Queue(e)
}

/// One process's handle on the queue; `worker` names its leases.
#[derive(Clone, Debug)]
pub struct Queue {
    engine: Arc<dyn KvEngine>,
    policy: RetryPolicy,
    worker: u64,
}

impl Queue {
    pub fn new(engine: Arc<dyn KvEngine>) -> Queue {
        Queue {
            engine,
            policy: RetryPolicy::default(),
            worker: rand::rng().random(),
        }
    }

    /// Run one transaction body with the engine's retries.
    async fn txn<'a, T, F>(&'a self, body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'a>) -> strata_meta::kv::TxnFuture<'t, T, KvError>,
    {
        run_txn(self.engine.as_ref(), &self.policy, body)
            .await
            .map_err(queue_error)
    }

    /// The current job, if there is one.
    pub async fn job(&self) -> Result<Option<JobRecord>> {
        self.txn(|tx| {
            Box::pin(async move {
                match tx.get(JOB).await? {
                    Some(v) => decode("sync job record", &v).map(Some),
                    None => Ok(None),
                }
            })
        })
        .await
    }

    /// Replace whatever job the queue held (its tasks and leases too) with `job`.
    pub async fn start_job(&self, job: &JobRecord) -> Result<()> {
        loop {
            let cleared = self
                .txn(|tx| {
                    Box::pin(async move {
                        let rows = tx.scan(b"Y", b"Z", CLEAR_BATCH, false).await?;
                        for (k, _) in &rows {
                            tx.delete(k.clone());
                        }
                        Ok(rows.len())
                    })
                })
                .await?;
            if cleared < CLEAR_BATCH {
                break;
            }
        }
        let record = encode(job).map_err(queue_error)?;
        let expires = now_ns().saturating_add(ns(job.lease()));
        self.txn(|tx| {
            let record = record.clone();
            Box::pin(async move {
                tx.put(JOB.to_vec(), record);
                tx.put(MANAGER.to_vec(), expires.to_le_bytes().to_vec());
                tx.put(COUNTERS.to_vec(), vec![0; COUNTER_SLOTS * 8]);
                Ok(())
            })
        })
        .await
    }

    /// Change the job record, if it is still job `id`.
    async fn update_job(&self, id: u64, change: fn(&mut JobRecord)) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                let Some(v) = tx.get(JOB).await? else {
                    return Ok(());
                };
                let mut job: JobRecord = decode("sync job record", &v)?;
                if job.id == id {
                    change(&mut job);
                    tx.put(JOB.to_vec(), encode(&job)?);
                }
                Ok(())
            })
        })
        .await
    }

    /// Every task of job `id` is queued.
    pub async fn mark_listed(&self, id: u64) -> Result<()> {
        self.update_job(id, |j| j.listed = true).await
    }

    /// Job `id` is over.
    pub async fn mark_finished(&self, id: u64) -> Result<()> {
        self.update_job(id, |j| j.finished = true).await
    }

    /// The manager is alive until `until_ns`.
    pub async fn manager_alive_until(&self, until_ns: i64) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                tx.put(MANAGER.to_vec(), until_ns.to_le_bytes().to_vec());
                Ok(())
            })
        })
        .await
    }

    /// Queue task `id`.
    pub async fn enqueue(&self, id: u64, body: &TaskBody) -> Result<()> {
        let record = encode(body).map_err(queue_error)?;
        self.txn(|tx| {
            let record = record.clone();
            Box::pin(async move {
                tx.put(key(TASK, id), record);
                tx.put(key(PENDING, id), Vec::new());
                Ok(())
            })
        })
        .await
    }

    /// Lease a task of job `job_id` for `lease`: a pending one, or one whose lease
    /// expired. `Err(Gone)`-like conditions (another job, a dead manager) are errors.
    pub async fn take(&self, job_id: u64, lease: Duration) -> Result<Taken> {
        loop {
            let (pending, leases, job, manager) = self.look().await?;
            let job = self.check_job(job, job_id)?;
            let now = now_ns();
            let expires = now.saturating_add(ns(lease));
            if !pending.is_empty() {
                let pick = pending[rand::rng().random_range(0..pending.len())];
                if let Some(body) = self.claim(pick, None, expires).await? {
                    return Ok(Taken::Task(Leased {
                        id: pick,
                        attempt: 1,
                        body,
                    }));
                }
                continue;
            }
            if let Some((id, old)) = leases.iter().find(|(_, l)| l.expires_ns < now) {
                if let Some(body) = self.claim(*id, Some(*old), expires).await? {
                    tracing::warn!(
                        "task {id}: its worker stopped renewing its lease; taken over (attempt {})",
                        old.attempt + 1
                    );
                    return Ok(Taken::Task(Leased {
                        id: *id,
                        attempt: old.attempt + 1,
                        body,
                    }));
                }
                continue;
            }
            if job.listed {
                return Ok(if leases.is_empty() {
                    Taken::Done
                } else {
                    Taken::Wait
                });
            }
            if manager < now {
                return Err(SyncError::Check(format!(
                    "the manager of sync job {job_id:x} stopped before it listed everything \
                     (silent for {} s): run it again",
                    (now - manager) / 1_000_000_000
                )));
            }
            return Ok(Taken::Wait);
        }
    }

    fn check_job(&self, job: Option<JobRecord>, job_id: u64) -> Result<JobRecord> {
        match job {
            Some(j) if j.id == job_id => Ok(j),
            Some(j) => Err(SyncError::Check(format!(
                "the queue now holds another sync job ({:x}, not {job_id:x}): this one was replaced",
                j.id
            ))),
            None => Err(SyncError::Check(format!(
                "sync job {job_id:x} is no longer in the queue"
            ))),
        }
    }

    /// Pending task ids (a few), leases, the job and the manager's heartbeat, in one view.
    async fn look(&self) -> Result<(Vec<u64>, Vec<(u64, Lease)>, Option<JobRecord>, i64)> {
        self.txn(|tx| {
            Box::pin(async move {
                let (start, end) = kind_range(PENDING);
                let pending = tx.scan(&start, &end, PICK_FROM, false).await?;
                let (start, end) = kind_range(LEASED);
                let leased = tx.scan(&start, &end, LEASES_SCANNED, false).await?;
                let mut leases = Vec::with_capacity(leased.len());
                for (k, v) in &leased {
                    let id = task_of(k).ok_or_else(|| corrupt("sync lease key", "too short"))?;
                    leases.push((id, decode::<Lease>("sync lease", v)?));
                }
                let job = match tx.get(JOB).await? {
                    Some(v) => Some(decode("sync job record", &v)?),
                    None => None,
                };
                let manager = tx
                    .get(MANAGER)
                    .await?
                    .and_then(|v| v.try_into().ok())
                    .map_or(0, i64::from_le_bytes);
                let pending = pending.iter().filter_map(|(k, _)| task_of(k)).collect();
                Ok((pending, leases, job, manager))
            })
        })
        .await
    }

    /// Lease task `id` if it is still pending (`old` None) or still holds the expired
    /// lease `old`; its body, or `None` when another worker was faster.
    async fn claim(
        &self,
        id: u64,
        old: Option<Lease>,
        expires_ns: i64,
    ) -> Result<Option<TaskBody>> {
        let worker = self.worker;
        self.txn(|tx| {
            Box::pin(async move {
                let attempt = match old {
                    None => {
                        if tx.get(&key(PENDING, id)).await?.is_none() {
                            return Ok(None);
                        }
                        tx.delete(key(PENDING, id));
                        1
                    }
                    Some(old) => {
                        let now = tx.get(&key(LEASED, id)).await?;
                        let current = now.map(|v| decode::<Lease>("sync lease", &v)).transpose()?;
                        if current != Some(old) {
                            return Ok(None);
                        }
                        old.attempt + 1
                    }
                };
                let Some(body) = tx.get(&key(TASK, id)).await? else {
                    return Err(corrupt("sync task", format!("task {id} has no body")));
                };
                let lease = Lease {
                    worker,
                    attempt,
                    expires_ns,
                };
                tx.put(key(LEASED, id), encode(&lease)?);
                decode("sync task", &body).map(Some)
            })
        })
        .await
    }

    /// If this worker still holds task `id` at `attempt`, apply `change`; false when the
    /// lease was taken over.
    async fn while_held(&self, id: u64, attempt: u32, change: HeldChange) -> Result<bool> {
        let worker = self.worker;
        let change = &change;
        self.txn(|tx| {
            Box::pin(async move {
                let Some(v) = tx.get(&key(LEASED, id)).await? else {
                    return Ok(false);
                };
                let lease: Lease = decode("sync lease", &v)?;
                if lease.worker != worker || lease.attempt != attempt {
                    return Ok(false);
                }
                match change {
                    HeldChange::Renew(expires_ns) => {
                        let renewed = Lease {
                            expires_ns: *expires_ns,
                            ..lease
                        };
                        tx.put(key(LEASED, id), encode(&renewed)?);
                    }
                    HeldChange::Complete(ops) => {
                        tx.delete(key(LEASED, id));
                        tx.delete(key(TASK, id));
                        tx.update_fields(COUNTERS.to_vec(), ops)?;
                    }
                }
                Ok(true)
            })
        })
        .await
    }

    /// Extend this worker's lease of task `id` to `expires_ns`; false when it is lost.
    pub async fn renew(&self, id: u64, attempt: u32, expires_ns: i64) -> Result<bool> {
        self.while_held(id, attempt, HeldChange::Renew(expires_ns))
            .await
    }

    /// Task `id` is done: drop it and add `counts` to the job's counters. False (and
    /// nothing counted) when the lease was taken over meanwhile.
    pub async fn complete(&self, id: u64, attempt: u32, counts: &Snapshot) -> Result<bool> {
        let ops = counter_ops(counts, 1);
        self.while_held(id, attempt, HeldChange::Complete(ops))
            .await
    }

    /// The job's counters: what every worker's completed tasks did, and how many tasks.
    pub async fn counters(&self) -> Result<(Snapshot, u64)> {
        self.txn(|tx| Box::pin(async move { Ok(tx.get(COUNTERS).await?.map(|v| counters_of(&v))) }))
            .await
            .map(Option::unwrap_or_default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Entry;
    use strata_meta::kv::memory::MemoryEngine;

    fn job(id: u64, lease_ms: u64) -> JobRecord {
        JobRecord {
            queue: QUEUE_VERSION,
            id,
            src: "/src".into(),
            dst: "/dst".into(),
            shape: crate::Shape::Tree,
            copy: CopyOptions::default(),
            lease_ms,
            created_ns: now_ns(),
            listed: false,
            finished: false,
        }
    }

    #[test]
    fn a_job_record_keeps_its_shape_and_a_v1_record_is_two_trees() {
        let mut record = job(1, 1000);
        record.shape = crate::Shape::Prefix;
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"shape\":\"prefix\""), "{text}");
        let back: JobRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back.shape, crate::Shape::Prefix);
        let v1 = text.replace(",\"shape\":\"prefix\"", "");
        assert!(!v1.contains("shape"));
        let old: JobRecord = serde_json::from_str(&v1).unwrap();
        assert_eq!(old.shape, crate::Shape::Tree);
    }

    fn body(keys: &[&str]) -> TaskBody {
        TaskBody {
            jobs: keys
                .iter()
                .map(|k| Job::Copy(Entry::file(k.to_string(), 1, 0)))
                .collect(),
        }
    }

    fn engine() -> Arc<dyn KvEngine> {
        Arc::new(MemoryEngine::new())
    }

    #[tokio::test]
    async fn each_task_is_leased_once_and_completed_once() {
        let engine = engine();
        let (a, b) = (Queue::new(engine.clone()), Queue::new(engine));
        a.start_job(&job(7, 60_000)).await.unwrap();
        for id in 0..3 {
            a.enqueue(id, &body(&["x"])).await.unwrap();
        }
        let lease = Duration::from_secs(60);
        let mut held = Vec::new();
        for q in [&a, &b, &a] {
            match q.take(7, lease).await.unwrap() {
                Taken::Task(t) => held.push((t.id, t.attempt)),
                other => panic!("expected a task, got {other:?}"),
            }
        }
        held.sort_unstable();
        assert_eq!(held, [(0, 1), (1, 1), (2, 1)]);
        // Nothing pending, leases live, not listed: wait.
        assert!(matches!(b.take(7, lease).await.unwrap(), Taken::Wait));
        a.mark_listed(7).await.unwrap();
        assert!(matches!(b.take(7, lease).await.unwrap(), Taken::Wait));
        let counts = Snapshot {
            copied: 1,
            copied_bytes: 1,
            ..Snapshot::default()
        };
        for (id, attempt) in held {
            // Only the worker holding a task may complete it, and only once.
            let by_a = a.complete(id, attempt, &counts).await.unwrap();
            let by_b = b.complete(id, attempt, &counts).await.unwrap();
            assert!(by_a != by_b, "task {id}: completed by both or neither");
            assert!(!a.complete(id, attempt, &counts).await.unwrap());
            assert!(!b.complete(id, attempt, &counts).await.unwrap());
        }
        assert!(matches!(a.take(7, lease).await.unwrap(), Taken::Done));
        let (total, tasks) = a.counters().await.unwrap();
        assert_eq!((total.copied, total.copied_bytes, tasks), (3, 3, 3));
    }

    #[tokio::test]
    async fn an_expired_lease_is_taken_over_and_the_old_holder_loses_it() {
        let engine = engine();
        let (dead, live) = (Queue::new(engine.clone()), Queue::new(engine));
        live.start_job(&job(9, 1)).await.unwrap();
        live.enqueue(0, &body(&["a", "b"])).await.unwrap();
        live.mark_listed(9).await.unwrap();
        let short = Duration::from_millis(1);
        let Taken::Task(first) = dead.take(9, short).await.unwrap() else {
            panic!("no task");
        };
        assert_eq!(first.attempt, 1);
        // Wait for the condition: the lease's end has passed.
        while now_ns() <= first_expiry(&live).await {
            tokio::task::yield_now().await;
        }
        let Taken::Task(again) = live.take(9, Duration::from_secs(60)).await.unwrap() else {
            panic!("the expired lease was not taken over");
        };
        assert_eq!((again.id, again.attempt), (first.id, 2));
        assert_eq!(again.body.jobs.len(), 2);
        assert!(!dead.renew(0, 1, now_ns() + 1_000_000_000).await.unwrap());
        assert!(!dead.complete(0, 1, &Snapshot::default()).await.unwrap());
        assert!(live.renew(0, 2, now_ns() + 1_000_000_000).await.unwrap());
        assert!(live.complete(0, 2, &Snapshot::default()).await.unwrap());
        assert!(matches!(live.take(9, short).await.unwrap(), Taken::Done));
    }

    async fn first_expiry(q: &Queue) -> i64 {
        let (_, leases, _, _) = q.look().await.unwrap();
        leases.first().map_or(i64::MAX, |(_, l)| l.expires_ns)
    }

    #[tokio::test]
    async fn a_new_job_replaces_the_old_one_and_its_workers_are_told() {
        let q = Queue::new(engine());
        q.start_job(&job(1, 60_000)).await.unwrap();
        for id in 0..250 {
            q.enqueue(id, &body(&["k"])).await.unwrap();
        }
        q.start_job(&job(2, 60_000)).await.unwrap();
        let err = q.take(1, Duration::from_secs(1)).await.unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
        assert!(matches!(
            q.take(2, Duration::from_secs(1)).await.unwrap(),
            Taken::Wait
        ));
        assert_eq!(q.job().await.unwrap().map(|j| j.id), Some(2));
    }

    #[test]
    fn a_job_record_prints_without_credentials() {
        let mut j = job(1, 1);
        j.dst = "wasb://acct:k/e+y==@box/p".into();
        let shown = format!("{j:?}");
        assert!(!shown.contains("k/e+y=="), "{shown}");
        assert!(shown.contains("wasb://acct:****@box/p"), "{shown}");
    }

    #[tokio::test]
    async fn a_silent_manager_before_the_listing_ends_stops_the_workers() {
        let q = Queue::new(engine());
        q.start_job(&job(3, 60_000)).await.unwrap();
        q.manager_alive_until(now_ns() - 5_000_000_000)
            .await
            .unwrap();
        let err = q.take(3, Duration::from_secs(1)).await.unwrap_err();
        assert!(err.to_string().contains("run it again"), "{err}");
    }
}
