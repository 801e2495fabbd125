//! `strata tier set|unset|list|status|move`: where a volume with several stores keeps a
//! directory's data (docs/PLACEMENT.md). Policies are set on directories and inherited;
//! `move` runs the mover (once, or every `--every` until stopped); `status` counts a
//! tree's bytes per store from the placement records.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use indicatif::HumanBytes;
use strata_meta::{Format, Meta, Placement, TierPolicy};
use strata_types::{CHUNK_SIZE, FileType, Ino, MetaUrl};
use strata_vfs::maintenance::Progress;
use strata_vfs::maintenance::mover::{MoveOptions, MoveReport, move_data};

use crate::progress::ProgressView;
use crate::{units, wiring};

#[derive(Debug, Args)]
pub struct TierArgs {
    #[command(subcommand)]
    action: TierAction,
}

#[derive(Debug, Subcommand)]
enum TierAction {
    /// Set where a directory's data lives (inherited by everything below it)
    Set(SetArgs),
    /// Remove a directory's policy (its data stays where it is until another policy moves it)
    Unset(PathArgs),
    /// Show the volume's stores and every policy
    List(UrlArg),
    /// Count a tree's bytes in each store (from the placement records)
    Status(PathArgs),
    /// Move data where the policies say: copy, switch the records, delete the old copies
    /// after --window
    Move(MoveArgs),
}

#[derive(Debug, Args)]
struct UrlArg {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
}

#[derive(Debug, Args)]
struct PathArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// A directory of the volume (path from its root, e.g. /datasets/old)
    path: String,
}

#[derive(Debug, Args)]
struct SetArgs {
    #[command(flatten)]
    dir: PathArgs,
    /// The store the data goes to (`default` is the volume's own; others come from
    /// `config --add-store`)
    #[arg(long)]
    store: String,
    /// Further stores that keep a full copy, comma-separated
    #[arg(long, value_delimiter = ',')]
    copies: Vec<String>,
    /// Move only files unmodified this long (30d, 12h, ...); new data is then written
    /// where the directories above say. Without it new data goes to --store at once.
    #[arg(long, value_parser = units::parse_duration)]
    after: Option<Duration>,
}

#[derive(Debug, Args)]
struct MoveArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// How long moved blocks stay in the stores they left, for readers that looked before
    /// the move (deleted by the first pass after it)
    #[arg(long, default_value = "10m", value_parser = units::parse_duration)]
    window: Duration,
    /// Copy at most this many MiB/s (0 = no limit)
    #[arg(long, default_value_t = 0)]
    bwlimit: u64,
    /// Run again this long after each pass, until stopped (SIGTERM or Ctrl-C)
    #[arg(long, value_parser = units::parse_duration)]
    every: Option<Duration>,
    /// Only count what would move
    #[arg(long)]
    dry_run: bool,
    /// Files moved at once
    #[arg(short = 'p', long, default_value_t = 8)]
    threads: usize,
}

pub fn run_tier(a: TierArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        match a.action {
            TierAction::Set(s) => set(s).await,
            TierAction::Unset(p) => unset(p).await,
            TierAction::List(u) => list(u).await,
            TierAction::Status(p) => status(p).await,
            TierAction::Move(m) => run_mover(m).await,
        }
    })
}

fn store_id(format: &Format, name: &str) -> Result<u8> {
    match format.store_id(name) {
        Some(id) => Ok(id),
        None => {
            let mut names = vec![strata_meta::DEFAULT_STORE.to_string()];
            names.extend(format.stores.iter().map(|s| s.name.clone()));
            bail!(
                "the volume has no store {name:?} (it has: {}); add one with `strata config \
                 META-URL --add-store NAME --storage ... --bucket ...`",
                names.join(", ")
            )
        }
    }
}

async fn directory(meta: &Meta, path: &str) -> Result<Ino> {
    let ino = strata_client::resolve_subdir(meta, Some(path)).await?;
    let attr = meta
        .getattr(ino)
        .await
        .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    if attr.kind != FileType::Directory {
        bail!("{path}: not a directory (policies are set on directories)");
    }
    Ok(ino)
}

async fn set(s: SetArgs) -> Result<()> {
    let (meta, format) = wiring::load_meta(&s.dir.meta_url).await?;
    if format.stores.is_empty() {
        bail!(
            "the volume has one store: add another with `strata config META-URL --add-store \
             NAME --storage ... --bucket ...` first"
        );
    }
    let store = store_id(&format, &s.store)?;
    let copies = s
        .copies
        .iter()
        .map(|c| store_id(&format, c))
        .collect::<Result<Vec<_>>>()?;
    let dir = directory(&meta, &s.dir.path).await?;
    let policy = TierPolicy {
        store,
        copies,
        after_secs: s.after.map_or(0, |d| d.as_secs()),
    };
    meta.set_tier_policy(dir, Some(&policy))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{}: {}", s.dir.path, describe(&format, &policy));
    Ok(())
}

fn describe(format: &Format, p: &TierPolicy) -> String {
    let mut text = format!("store {}", format.store_name(p.store));
    if !p.copies.is_empty() {
        let names: Vec<String> = p.copies.iter().map(|c| format.store_name(*c)).collect();
        text.push_str(&format!(", copies in {}", names.join(", ")));
    }
    if p.after_secs > 0 {
        text.push_str(&format!(", files unmodified for {}s", p.after_secs));
    }
    text
}

async fn unset(p: PathArgs) -> Result<()> {
    let (meta, _) = wiring::load_meta(&p.meta_url).await?;
    let dir = directory(&meta, &p.path).await?;
    meta.set_tier_policy(dir, None)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{}: policy removed", p.path);
    Ok(())
}

async fn list(u: UrlArg) -> Result<()> {
    let (meta, format) = wiring::load_meta(&u.meta_url).await?;
    println!("stores:");
    println!("  0 default  {} {}", format.storage, format.bucket);
    for s in &format.stores {
        let class = s.storage_class.as_deref().unwrap_or("-");
        println!(
            "  {} {}  {} {} (class {class})",
            s.id, s.name, s.storage, s.bucket
        );
    }
    let policies = meta
        .tier_policies()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("policies:");
    for (ino, p) in policies {
        let path = match meta.path_of(ino).await {
            Ok(Some(path)) => path,
            _ => format!("inode {}", ino.0),
        };
        println!("  {path}: {}", describe(&format, &p));
    }
    Ok(())
}

/// Bytes and slices of a tree per store, as its placement records say.
#[derive(Default)]
struct Tally {
    files: u64,
    by_store: BTreeMap<u8, (u64, u64)>,
    leaving: BTreeMap<u8, (u64, u64)>,
}

async fn status(p: PathArgs) -> Result<()> {
    let (meta, format) = wiring::load_meta(&p.meta_url).await?;
    let root = directory(&meta, &p.path).await?;
    let tally = count_tree(&meta, root).await?;
    println!("{}: {} files", p.path, tally.files);
    let mut ids: Vec<u8> = vec![0];
    ids.extend(format.stores.iter().map(|s| s.id));
    for id in ids {
        let (slices, bytes) = tally.by_store.get(&id).copied().unwrap_or_default();
        let (ls, lb) = tally.leaving.get(&id).copied().unwrap_or_default();
        println!(
            "  {:<12} {slices} slices {bytes} bytes ({}){}",
            format.store_name(id),
            HumanBytes(bytes),
            if ls > 0 {
                format!("; leaving: {ls} slices {lb} bytes")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

async fn count_tree(meta: &Meta, root: Ino) -> Result<Tally> {
    let mut tally = Tally::default();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = meta
                .readdir(d, after.as_deref(), 1000, true)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let Some(last) = page.last() else { break };
            after = Some(last.name.clone());
            for e in page {
                match e.attr.map(|a| (a.kind, a.length)) {
                    Some((FileType::Directory, _)) => dirs.push(e.ino),
                    Some((FileType::Regular, len)) => {
                        tally.files += 1;
                        count_file(meta, e.ino, len, &mut tally).await?;
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(tally)
}

async fn count_file(meta: &Meta, ino: Ino, len: u64, tally: &mut Tally) -> Result<()> {
    let chunks = u32::try_from(len.div_ceil(CHUNK_SIZE)).unwrap_or(u32::MAX);
    for index in 0..chunks {
        let slices = meta
            .read_chunk(ino, index)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let ids: Vec<u64> = slices.iter().map(|s| s.id).collect();
        let records = meta
            .placements(&ids)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (s, record) in slices.iter().zip(records) {
            if s.id == 0 {
                continue;
            }
            let p = record.unwrap_or_else(|| Placement::only(0));
            for st in &p.stores {
                let t = tally.by_store.entry(*st).or_default();
                t.0 += 1;
                t.1 += u64::from(s.len);
            }
            for st in &p.leaving {
                let t = tally.leaving.entry(*st).or_default();
                t.0 += 1;
                t.1 += u64::from(s.len);
            }
        }
    }
    Ok(())
}

async fn run_mover(m: MoveArgs) -> Result<()> {
    let volume = wiring::open_admin_volume(&m.meta_url).await?;
    let Some((_, stores)) = volume.stores.clone() else {
        bail!("the volume has one store: there is nowhere to move data to");
    };
    let opts = MoveOptions {
        prefix: volume.format.name.clone(),
        block_size: volume.format.block_size_kib << 10,
        window: m.window,
        bandwidth: m.bwlimit.saturating_mul(1 << 20),
        // A random id per run: RandomState is seeded from the OS per process.
        holder: std::hash::BuildHasher::hash_one(
            &std::hash::RandomState::new(),
            strata_meta::now_ns(),
        ),
        dry_run: m.dry_run,
        threads: m.threads,
        wait_for_busy: m.every.is_none(),
    };
    loop {
        let progress = Arc::new(Progress::default());
        let view = ProgressView::start(progress.clone());
        let started = std::time::Instant::now();
        let report = move_data(&volume.meta, &stores, &opts, &progress).await;
        drop(view);
        let report = report.context("moving data")?;
        let printed = print_report(&report, started.elapsed(), m.dry_run);
        let Some(every) = m.every else {
            return printed;
        };
        if let Err(e) = printed {
            tracing::warn!("{e}");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = crate::http_front::wait_for_signal() => return Ok(()),
        }
    }
}

fn print_report(r: &MoveReport, took: Duration, dry_run: bool) -> Result<()> {
    let millis = u64::try_from(took.as_millis()).unwrap_or(u64::MAX).max(1);
    let per_second = r.bytes_copied.saturating_mul(1000) / millis;
    let verb = if dry_run { "would move" } else { "moved" };
    println!(
        "{} policies ({} busy elsewhere), {} files ({} too new), {} slices: {} in place, \
         {verb} {}, {} raced, {} failed",
        r.policies,
        r.policies_busy,
        r.files,
        r.files_too_new,
        r.slices,
        r.slices_in_place,
        r.slices_moved,
        r.slices_raced,
        r.slices_failed
    );
    println!(
        "copied {} blocks, {} bytes ({}) in {:.2}s ({}/s); released {} blocks, {} moves finished",
        r.blocks_copied,
        r.bytes_copied,
        HumanBytes(r.bytes_copied),
        took.as_secs_f64(),
        HumanBytes(per_second),
        r.blocks_released,
        r.moves_finished
    );
    if r.policies_busy > 0 {
        println!(
            "{} policy directories are being moved by another mover: left to it",
            r.policies_busy
        );
    }
    if r.slices_failed > 0 {
        bail!(
            "{} slices could not be moved now (see the log); run again",
            r.slices_failed
        );
    }
    Ok(())
}
