//! `strata sync SRC DST`: the flags ([`crate::sync_args`]) read into options, filters and
//! a selection, both sides opened (`strata_sync::pair`), the run with its progress line
//! and summary ([`crate::sync_report`]), or the job handed to the queue
//! ([`crate::sync_queue`]). The work is `strata-sync`'s.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use strata_sync::open::{OpenHow, close_all};
use strata_sync::{Endpoint, Filter, Options, Ranged, Selection, SyncStats};
use strata_types::redact_url;

use crate::progress::ProgressView;
use crate::sync_args::SyncArgs;
use crate::sync_report::{finish, progress_line};

/// The include/exclude rules in command-line order (clap keeps each flag's values apart).
fn rules_in_order(a: &SyncArgs) -> Vec<(bool, String)> {
    let mut rules = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (include, value) = match arg.split_once('=') {
            Some(("--include", v)) => (true, Some(v.to_string())),
            Some(("--exclude", v)) => (false, Some(v.to_string())),
            _ if arg == "--include" => (true, args.next()),
            _ if arg == "--exclude" => (false, args.next()),
            _ => continue,
        };
        if let Some(v) = value {
            rules.push((include, v));
        }
    }
    if rules.len() != a.include.len() + a.exclude.len() {
        // Not from this process's own arguments (tests, wrappers): includes first.
        rules = a.include.iter().map(|p| (true, p.clone())).collect();
        rules.extend(a.exclude.iter().map(|p| (false, p.clone())));
    }
    rules
}

pub fn run_sync(a: SyncArgs) -> Result<()> {
    let rt = crate::wiring::runtime()?;
    rt.block_on(sync(a))
}

async fn sync(a: SyncArgs) -> Result<()> {
    if a.worker {
        return crate::sync_queue::work(&a).await;
    }
    let (Some(src_addr), Some(dst_addr)) = (&a.src, &a.dst) else {
        bail!("SRC and DST are needed (or --worker --queue META-URL)");
    };
    if a.queue.is_some() && (a.dry || a.fail_fast || a.max_failure >= 0) {
        bail!("--queue runs without --dry, --fail-fast and --max-failure: leave them out");
    }
    let filter = Filter::new(&rules_in_order(&a), a.match_full_path)?;
    let files_from = match &a.files_from {
        Some(path) => Some(strata_sync::pair::read_key_list(path)?),
        None => None,
    };
    let opts = options(&a);
    strata_sync::pair::refuse_dst_inside_src(src_addr, dst_addr)?;
    let mut clients = Vec::new();
    let how = OpenHow::from(&a);
    let pair = strata_sync::pair::open_pair(src_addr, dst_addr, how, None, &mut clients).await;
    let pair = match pair {
        Ok(pair) => pair,
        Err(e) => {
            close_all(clients).await;
            return Err(e.into());
        }
    };
    if pair.shape == strata_sync::Shape::Prefix && (a.delete_src || a.delete_dst) {
        close_all(clients).await;
        bail!(
            "SRC {} is a key prefix (nothing has that name): --delete-src and --delete-dst \
             are refused with a prefix; name a directory",
            redact_url(src_addr)
        );
    }
    let (src, dst) = ranged(pair.src, pair.dst, &a);
    let stats = Arc::new(SyncStats::default());
    let started = Instant::now();
    let sel = Selection { filter, files_from };
    let outcome = match &a.queue {
        Some(queue) => {
            let side = crate::sync_queue::Sides {
                src,
                dst,
                src_addr,
                dst_addr,
                shape: pair.shape,
            };
            crate::sync_queue::manage(&a, queue, side, opts, sel, stats.clone(), started).await
        }
        None => {
            let counted = stats.clone();
            let view = ProgressView::start_line(move || progress_line(&counted, started));
            let r = strata_sync::sync(src, dst, opts, sel, stats.clone()).await;
            drop(view);
            r.map_err(anyhow::Error::from)
        }
    };
    close_all(clients).await;
    outcome?;
    finish(&stats, started, "")
}

/// Both sides cut to `--start`..`--end`, when either is given.
fn ranged(
    src: Arc<dyn Endpoint>,
    dst: Arc<dyn Endpoint>,
    a: &SyncArgs,
) -> (Arc<dyn Endpoint>, Arc<dyn Endpoint>) {
    if a.start.is_none() && a.end.is_none() {
        return (src, dst);
    }
    let (start, end) = (a.start.clone(), a.end.clone());
    (
        Arc::new(Ranged::new(src, start.clone(), end.clone())),
        Arc::new(Ranged::new(dst, start, end)),
    )
}

fn options(a: &SyncArgs) -> Options {
    Options {
        threads: a.threads.max(1),
        update: a.update,
        force_update: a.force_update,
        existing: a.existing,
        ignore_existing: a.ignore_existing,
        dirs: a.dirs,
        perms: a.perms,
        links: a.links,
        delete_src: a.delete_src,
        delete_dst: a.delete_dst,
        check_new: a.check_new,
        check_all: a.check_all,
        check_change: a.check_change,
        dry: a.dry,
        min_size: a.min_size,
        max_size: a.max_size,
        min_age: a.min_age,
        max_age: a.max_age,
        min_mtime: a.start_time,
        max_mtime: a.end_time,
        bwlimit_mbps: a.bwlimit,
        fail_fast: a.fail_fast,
        max_failures: u64::try_from(a.max_failure).ok(),
        limit: u64::try_from(a.limit).ok(),
    }
}
