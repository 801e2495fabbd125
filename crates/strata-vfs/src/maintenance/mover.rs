//! `tier move`: put data where the tier policies say (docs/PLACEMENT.md). For each
//! directory with a policy (under a lease, so movers on several hosts share the work a
//! directory each) every file below it that the policy covers is read chunk by chunk;
//! each slice not yet in the policy's stores has its blocks copied there (from whichever
//! store holds them, as stored: no decoding, no client-side re-encryption), then its
//! placement record is switched in one transaction from where it was to where it is,
//! the old stores kept as "leaving" for the safety window. A pass after the window
//! (the same pass when the window is zero) deletes the blocks from the stores left, so a
//! reader that looked the slice up before the switch still finds it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use std::time::{Duration, Instant};

use strata_chunk::{block_key, block_sizes};
use strata_meta::{Meta, Placement, TierPolicy};
use strata_object::ObjectError;
use strata_object::routed::Routed;
use strata_types::{CHUNK_SIZE, FileType, Ino, Nanos};

use super::{Progress, Result};

/// Entries read per directory page.
const PAGE: usize = 1000;
/// How long a mover's lease on a directory lasts without renewal.
const LEASE: Duration = Duration::from_secs(30);
/// How often a directory another mover holds is asked for again.
const BUSY_POLL: Duration = Duration::from_secs(1);

/// What `tier move` does.
#[derive(Clone, Debug)]
pub struct MoveOptions {
    /// The volume's prefix in its stores (its name).
    pub prefix: String,
    /// The volume's block size, bytes.
    pub block_size: u32,
    /// How long moved blocks stay in the stores they left.
    pub window: Duration,
    /// Bytes copied per second at most (0: no limit).
    pub bandwidth: u64,
    /// This mover, in the leases it takes (random per run).
    pub holder: u64,
    /// Only report what would move.
    pub dry_run: bool,
    /// Files moved at once.
    pub threads: usize,
    /// Wait (up to one lease) for directories another mover holds, rather than leave
    /// them to the next run (one-shot runs: the holder may have died).
    pub wait_for_busy: bool,
}

/// What `tier move` found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// Directories with a policy worked on, and passed over (another mover holds them).
    pub policies: u64,
    pub policies_busy: u64,
    /// Files the policies cover, and those skipped as modified too recently (`--after`).
    pub files: u64,
    pub files_too_new: u64,
    /// Slices looked at, already where their policy says, and moved.
    pub slices: u64,
    pub slices_in_place: u64,
    pub slices_moved: u64,
    /// Blocks and bytes copied between stores.
    pub blocks_copied: u64,
    pub bytes_copied: u64,
    /// Slices whose record changed under the move (moved again next run).
    pub slices_raced: u64,
    /// Slices that could not be moved now (logged; tried again next run).
    pub slices_failed: u64,
    /// Blocks deleted from stores their slices left, and slices whose move finished.
    pub blocks_released: u64,
    pub moves_finished: u64,
}

/// A slice: id and stored size.
type SliceRef = (u64, u32);

/// Move the data of every policy on the volume of `meta`, whose stores are `stores`.
pub async fn move_data(
    meta: &Meta,
    stores: &Routed,
    opts: &MoveOptions,
    progress: &Progress,
) -> Result<MoveReport> {
    let mut report = MoveReport::default();
    let policies = meta.tier_policies().await?;
    let with_policy: HashSet<Ino> = policies.iter().map(|(ino, _)| *ino).collect();
    let pacer = Pacer::new(opts.bandwidth);
    progress.stage("moving", 0);
    // Directories another mover holds: with `wait_for_busy`, asked for again until its
    // lease ends (a mover that died lets go within one lease), then counted busy.
    let mut pending: Vec<&(Ino, TierPolicy)> = policies.iter().collect();
    let mut waiting_since: Option<Instant> = None;
    loop {
        let mut busy = Vec::new();
        for entry in pending {
            let shared = (&with_policy, &pacer, progress);
            if !move_policy(meta, stores, opts, entry, shared, &mut report).await? {
                busy.push(entry);
            }
        }
        pending = busy;
        let waited = waiting_since.get_or_insert_with(Instant::now).elapsed();
        if pending.is_empty() || !opts.wait_for_busy || waited > LEASE {
            break;
        }
        progress.stage("waiting for another mover's lease", 0);
        // Polling a lease in the engine, not synchronization with this process.
        tokio::time::sleep(BUSY_POLL).await;
    }
    report.policies_busy = u64::try_from(pending.len()).unwrap_or(u64::MAX);
    Ok(report)
}

/// Move one policy's directory under a lease; false if another mover holds it.
async fn move_policy(
    meta: &Meta,
    stores: &Routed,
    opts: &MoveOptions,
    (dir, policy): &(Ino, TierPolicy),
    (with_policy, pacer, progress): (&HashSet<Ino>, &Pacer, &Progress),
    report: &mut MoveReport,
) -> Result<bool> {
    let until = strata_meta::now_ns() + nanos(LEASE);
    if !meta.take_mover_lease(*dir, opts.holder, until).await? {
        return Ok(false);
    }
    report.policies += 1;
    let mover = DirMover {
        meta,
        stores,
        opts,
        policy,
        target: policy.placement(),
        progress,
    };
    // The lease is renewed on a timer while the walk runs (a lease lost anyway only
    // costs work twice: every switch is a compare-and-swap).
    let renew = async {
        loop {
            tokio::time::sleep(LEASE / 3).await;
            let until = strata_meta::now_ns() + nanos(LEASE);
            if let Err(e) = meta.take_mover_lease(*dir, opts.holder, until).await {
                tracing::warn!("renewing the mover's lease: {e}");
            }
        }
    };
    let moved = tokio::select! {
        moved = mover.run(*dir, with_policy, report, pacer) => moved,
        never = renew => never,
    };
    meta.release_mover_lease(*dir, opts.holder).await?;
    moved.map(|()| true)
}

fn nanos(d: Duration) -> Nanos {
    Nanos::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}

/// Holds copies to a rate (shared by the concurrent copies of one run).
struct Pacer {
    bandwidth: u64,
    started: Instant,
    bytes: AtomicU64,
}

impl Pacer {
    fn new(bandwidth: u64) -> Pacer {
        Pacer {
            bandwidth,
            started: Instant::now(),
            bytes: AtomicU64::new(0),
        }
    }

    async fn account(&self, bytes: u64) {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.bandwidth == 0 {
            return;
        }
        let nanos = u128::from(total) * 1_000_000_000 / u128::from(self.bandwidth);
        let due = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            // Rate limiting, not synchronization: the copy waits its turn.
            tokio::time::sleep(wait).await;
        }
    }
}

impl MoveReport {
    /// Add what another part of the run did.
    fn merge(&mut self, o: &MoveReport) {
        self.policies += o.policies;
        self.policies_busy += o.policies_busy;
        self.files += o.files;
        self.files_too_new += o.files_too_new;
        self.slices += o.slices;
        self.slices_in_place += o.slices_in_place;
        self.slices_moved += o.slices_moved;
        self.blocks_copied += o.blocks_copied;
        self.bytes_copied += o.bytes_copied;
        self.slices_raced += o.slices_raced;
        self.slices_failed += o.slices_failed;
        self.blocks_released += o.blocks_released;
        self.moves_finished += o.moves_finished;
    }
}

struct DirMover<'a> {
    meta: &'a Meta,
    stores: &'a Routed,
    opts: &'a MoveOptions,
    policy: &'a TierPolicy,
    target: Placement,
    progress: &'a Progress,
}

impl DirMover<'_> {
    /// Walk `dir`'s subtree (not into directories with a policy of their own) and move
    /// what its files hold.
    async fn run(
        &self,
        dir: Ino,
        with_policy: &HashSet<Ino>,
        report: &mut MoveReport,
        pacer: &Pacer,
    ) -> Result<()> {
        let mut dirs = vec![dir];
        let too_new_after =
            strata_meta::now_ns() - nanos(Duration::from_secs(self.policy.after_secs));
        while let Some(d) = dirs.pop() {
            let mut after: Option<Vec<u8>> = None;
            let mut files: Vec<(Ino, u64)> = Vec::new();
            loop {
                let page = self.meta.readdir(d, after.as_deref(), PAGE, true).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.name.clone());
                for entry in page {
                    let Some(attr) = entry.attr else { continue };
                    match attr.kind {
                        FileType::Directory if !with_policy.contains(&entry.ino) => {
                            dirs.push(entry.ino)
                        }
                        FileType::Regular => {
                            report.files += 1;
                            if self.policy.after_secs > 0 && attr.mtime > too_new_after {
                                report.files_too_new += 1;
                                continue;
                            }
                            files.push((entry.ino, attr.length));
                        }
                        _ => {}
                    }
                }
                let moved: Vec<Result<MoveReport>> = futures::stream::iter(files.drain(..))
                    .map(|(ino, length)| async move {
                        let mut part = MoveReport::default();
                        self.move_file(ino, length, &mut part, pacer).await?;
                        Ok(part)
                    })
                    .buffer_unordered(self.opts.threads.max(1))
                    .collect()
                    .await;
                for part in moved {
                    report.merge(&part?);
                }
            }
        }
        Ok(())
    }

    async fn move_file(
        &self,
        ino: Ino,
        length: u64,
        report: &mut MoveReport,
        pacer: &Pacer,
    ) -> Result<()> {
        let chunks = u32::try_from(length.div_ceil(CHUNK_SIZE)).unwrap_or(u32::MAX);
        let mut seen: HashSet<u64> = HashSet::new();
        for index in 0..chunks {
            let slices: Vec<SliceRef> = self
                .meta
                .read_chunk(ino, index)
                .await?
                .into_iter()
                .filter(|s| s.id != 0 && seen.insert(s.id))
                .map(|s| (s.id, s.size))
                .collect();
            let ids: Vec<u64> = slices.iter().map(|(id, _)| *id).collect();
            let records = self.meta.placements(&ids).await?;
            for (slice, record) in slices.into_iter().zip(records) {
                // One slice that cannot move now (a block still staged by a writeback
                // client, a store down) is counted and left for the next run.
                if let Err(e) = self.move_slice(slice, record, report, pacer).await {
                    tracing::warn!("slice {} of inode {}: not moved: {e}", slice.0, ino.0);
                    report.slices_failed += 1;
                }
            }
        }
        self.progress.add(1, 0);
        Ok(())
    }

    async fn move_slice(
        &self,
        (id, size): SliceRef,
        record: Option<Placement>,
        report: &mut MoveReport,
        pacer: &Pacer,
    ) -> Result<()> {
        report.slices += 1;
        let mut now = record.clone().unwrap_or_else(|| Placement::only(0));
        let same = |a: &[u8], b: &[u8]| a.len() == b.len() && a.iter().all(|s| b.contains(s));
        if same(&now.stores, &self.target.stores) {
            report.slices_in_place += 1;
        } else if self.opts.dry_run {
            report.slices_moved += 1;
            return Ok(());
        } else {
            match self
                .switch(id, size, record.as_ref(), &now, pacer, report)
                .await?
            {
                Some(moved) => {
                    report.slices_moved += 1;
                    now = moved;
                }
                None => {
                    report.slices_raced += 1;
                    return Ok(());
                }
            }
        }
        if !self.opts.dry_run && !now.leaving.is_empty() && now.leave_after <= strata_meta::now_ns()
        {
            self.release(id, size, &now, report).await?;
        }
        Ok(())
    }

    /// Copy slice `id`'s blocks to the target stores and switch its record from `record`
    /// (`now` as read) to them; the new record, or `None` if the record changed meanwhile.
    async fn switch(
        &self,
        id: u64,
        size: u32,
        record: Option<&Placement>,
        now: &Placement,
        pacer: &Pacer,
        report: &mut MoveReport,
    ) -> Result<Option<Placement>> {
        for (index, len) in block_sizes(size, self.opts.block_size) {
            let key = format!("{}/{}", self.opts.prefix, block_key(id, index, len));
            let copied = self.copy_block(&key, &now.stores).await?;
            report.blocks_copied += copied;
            let bytes = copied * u64::from(len);
            report.bytes_copied += bytes;
            self.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
            pacer.account(bytes).await;
        }
        // The copies must survive a crash before the record points at them (and before
        // the old ones may go): a local store's puts are durable only once synced.
        for &t in &self.target.stores {
            if let Some(m) = self.stores.member(t) {
                m.store.sync().await?;
            }
        }
        let mut leaving: Vec<u8> = Vec::new();
        for &s in now.stores.iter().chain(&now.leaving) {
            if !self.target.stores.contains(&s) && !leaving.contains(&s) {
                leaving.push(s);
            }
        }
        let moved = Placement {
            stores: self.target.stores.clone(),
            leave_after: match leaving.is_empty() {
                true => 0,
                false => strata_meta::now_ns() + nanos(self.opts.window),
            },
            leaving,
        };
        let swapped = self
            .meta
            .swap_placement(id, Some(record), Some(&moved))
            .await?;
        Ok(swapped.then_some(moved))
    }

    /// Delete slice `id`'s blocks from the stores it left (the window has passed) and
    /// record the move as finished.
    async fn release(
        &self,
        id: u64,
        size: u32,
        p: &Placement,
        report: &mut MoveReport,
    ) -> Result<()> {
        let done = Placement {
            stores: p.stores.clone(),
            ..Placement::default()
        };
        // The record says the move is over first: a reader that looks now is sent only
        // to the stores that keep the blocks.
        if !self
            .meta
            .swap_placement(id, Some(Some(p)), Some(&done))
            .await?
        {
            return Ok(());
        }
        for (index, len) in block_sizes(size, self.opts.block_size) {
            let key = format!("{}/{}", self.opts.prefix, block_key(id, index, len));
            for &s in &p.leaving {
                if let Some(m) = self.stores.member(s) {
                    m.store.delete(&key).await?;
                    report.blocks_released += 1;
                }
            }
        }
        report.moves_finished += 1;
        Ok(())
    }

    /// Copy block `key` into every target store lacking it, from one that has it (those
    /// of `now` first); how many stores it was copied to.
    async fn copy_block(&self, key: &str, now: &[u8]) -> Result<u64> {
        let mut lacking = Vec::new();
        for &t in &self.target.stores {
            let Some(m) = self.stores.member(t) else {
                continue;
            };
            match m.store.head(key).await {
                Ok(_) => {}
                Err(ObjectError::NotFound(_)) => lacking.push(m),
                Err(e) => return Err(e.into()),
            }
        }
        if lacking.is_empty() {
            return Ok(0);
        }
        let data = self.read_block(key, now).await?;
        for m in &lacking {
            m.store.put(key, data.clone()).await?;
        }
        Ok(u64::try_from(lacking.len()).unwrap_or(u64::MAX))
    }

    /// The stored bytes of block `key`: from the stores of `now` first, then any.
    async fn read_block(&self, key: &str, now: &[u8]) -> Result<bytes::Bytes> {
        let order = now
            .iter()
            .filter_map(|&s| self.stores.member(s))
            .chain(self.stores.members());
        let mut failure = None;
        for m in order {
            match m.store.get(key, None).await {
                Ok(data) => return Ok(data),
                Err(ObjectError::NotFound(_)) => {}
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        Err(failure
            .unwrap_or_else(|| ObjectError::NotFound(key.to_string()))
            .into())
    }
}
