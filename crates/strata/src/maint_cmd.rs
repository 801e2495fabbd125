//! `strata gc` and `strata fsck`: whole-volume maintenance (see
//! `strata_vfs::maintenance`). Both print a summary; fsck exits non-zero when the volume
//! is not clean, gc when a deletion failed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;
use indicatif::HumanBytes;
use strata_types::MetaUrl;
use strata_vfs::maintenance::fsck::{FsckOptions, check_volume};
use strata_vfs::maintenance::gc::{GcOptions, collect_garbage};
use strata_vfs::maintenance::placement_check::check_placements;
use strata_vfs::maintenance::{Progress, SortSpace};

use crate::progress::ProgressView;
use crate::wiring;

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Metadata engine URL of the volume (e.g. sqlite3:///var/lib/strata.db)
    meta_url: MetaUrl,
    /// Delete leaked objects, purge expired trash hours and finish pending deletions (default: only report)
    #[arg(long)]
    delete: bool,
    /// Also compact every chunk made of more than one slice
    #[arg(long)]
    compact: bool,
    /// With --compact, on a volume imported from JuiceFS: also rewrite every chunk that
    /// still reads JuiceFS's objects as native blocks (checksummed, or sealed on an
    /// encrypted volume); the JuiceFS objects are then deleted like any replaced data
    #[arg(long, requires = "compact")]
    native: bool,
    /// Concurrent deletions and compactions
    #[arg(short = 'p', long, default_value_t = 10)]
    threads: usize,
    /// Objects modified within this many seconds are never treated as leaked (their
    /// writer may not have committed yet)
    #[arg(long, default_value_t = 3600)]
    safety_window: u64,
    /// Directory for the external sort's spill files (default: the system temp dir)
    #[arg(long)]
    external_sort_dir: Option<PathBuf>,
    /// Memory of each external sort's in-memory run, MiB; up to three sorts are alive at
    /// once (listing, references, results), so the command's peak RSS is about 20 MB plus
    /// 2–3 times this, whatever the number of objects (measured: 4 → 31 MB, 32 → 88 MB at
    /// a million objects)
    #[arg(long, default_value_t = 32)]
    sort_memory: usize,
    #[command(flatten)]
    keys: crate::key_args::KeyArgs,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// Fix what can be fixed safely: directory usage records and link counts
    #[arg(long)]
    repair: bool,
    /// Directory for the external sort's spill files (default: the system temp dir)
    #[arg(long)]
    external_sort_dir: Option<PathBuf>,
    /// Memory of each external sort's in-memory run, MiB; up to three sorts are alive at
    /// once (inodes reached by names, block references, listing), so the command's peak
    /// RSS is about 20 MB plus 2–3 times this, whatever the size of the volume
    #[arg(long, default_value_t = 32)]
    sort_memory: usize,
    /// Also read every block whole and verify it (checksums; an encrypted volume's
    /// blocks authenticated): slow, reads the whole volume
    #[arg(long)]
    verify: bool,
    /// Blocks read at once with --verify
    #[arg(short = 'p', long, default_value_t = 10)]
    threads: usize,
    /// With --verify, on a volume imported from JuiceFS (whose blocks carry no checksums):
    /// record the checksums of every JuiceFS block read beside it, and once all are
    /// recorded, have every later read check them
    #[arg(long, requires = "verify")]
    record_checksums: bool,
    #[command(flatten)]
    keys: crate::key_args::KeyArgs,
}

fn sort_space(dir: Option<PathBuf>, mib: usize) -> SortSpace {
    SortSpace {
        dir: dir.unwrap_or_else(std::env::temp_dir),
        budget: mib << 20,
    }
}

pub fn run_gc(a: GcArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let volume = wiring::open_admin_volume(&a.meta_url).await?;
        let opts = GcOptions {
            delete: a.delete,
            safety_window: Duration::from_secs(a.safety_window),
            sort: sort_space(a.external_sort_dir.clone(), a.sort_memory),
            threads: a.threads.max(1),
            block_size: volume.format.block_size_kib << 10,
        };
        let progress = Arc::new(Progress::default());
        let started = Instant::now();
        if a.compact {
            let view = ProgressView::start(progress.clone());
            let foreign_below = match (a.native, &volume.format.foreign) {
                (true, Some(foreign)) => Some(foreign.slices_below),
                (true, None) => bail!("--native: the volume holds no imported blocks"),
                (false, _) => None,
            };
            let compacted = crate::compact_cmd::compact_volume(
                &volume,
                &a.keys.options(),
                a.threads,
                foreign_below,
                &progress,
            )
            .await?;
            drop(view);
            println!("compacted {compacted} chunks");
        }
        let view = ProgressView::start(progress.clone());
        let report = collect_garbage(&volume.meta, &volume.raw, &opts, &progress).await;
        drop(view);
        let r = report?;
        println!(
            "objects: {} ({}), {} younger than {} s not judged, {} foreign",
            r.objects,
            HumanBytes(r.object_bytes),
            r.young_objects,
            a.safety_window,
            r.foreign_objects
        );
        println!(
            "leaked: {} objects ({}){}",
            r.leaked,
            HumanBytes(r.leaked_bytes),
            if a.delete {
                format!(", deleted {}", r.deleted)
            } else if r.leaked > 0 {
                " — run with --delete to remove them".to_string()
            } else {
                String::new()
            }
        );
        if a.delete {
            println!(
                "expired trash entries purged: {}; pending deletions finished: {} files, {} slices",
                r.trash_purged, r.files_freed, r.slices_freed
            );
        }
        println!(
            "block references: {}, metadata scans: {}, {:.1} s",
            r.referenced_blocks,
            r.passes,
            started.elapsed().as_secs_f64()
        );
        if r.delete_failures > 0 {
            bail!("{} deletions failed (see the log)", r.delete_failures);
        }
        Ok(())
    })
}

/// Blocks a `--writeback` client staged are not in the object store until it uploads
/// them: name those clients, so "missing" blocks are not taken for lost ones.
async fn note_writeback_clients(meta: &strata_meta::Meta) {
    let Ok(sessions) = meta.list_sessions().await else {
        return;
    };
    for s in sessions.iter().filter(|s| s.writeback) {
        println!(
            "note: session {} ({} on {}, pid {}) writes back: blocks it has not uploaded yet \
             show as missing; run fsck again after `strata umount --flush` there",
            s.sid, s.mount_point, s.host, s.pid
        );
    }
}

pub fn run_fsck(a: FsckArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let volume = wiring::open_admin_volume(&a.meta_url).await?;
        let opts = FsckOptions {
            repair: a.repair,
            sort: sort_space(a.external_sort_dir.clone(), a.sort_memory),
            block_size: volume.format.block_size_kib << 10,
            exact_sizes: volume.format.compression == "none",
            sealed: match volume.format.encryption {
                Some(_) => Some(strata_client::seal_unit(&volume.format)?),
                None => None,
            },
            foreign: strata_client::foreign_blocks(&volume.format, None)?,
            verify: match a.verify {
                // A block that fails twice is reported, not retried for a minute.
                true => Some((volume.data(&a.keys.options(), 1)?, a.threads)),
                false => None,
            },
            record_checksums: a.record_checksums,
        };
        if a.record_checksums && volume.format.foreign.is_none() {
            bail!("--record-checksums: the volume holds no imported blocks (its own have checksums)");
        }
        let progress = Arc::new(Progress::default());
        let view = ProgressView::start(progress.clone());
        let report = check_volume(&volume.meta, &volume.raw, &opts, &progress).await;
        let placed = match (&report, &volume.stores) {
            (Ok(_), Some((_, stores))) => Some(
                check_placements(
                    &volume.meta,
                    stores,
                    &volume.format.name,
                    opts.block_size,
                    &progress,
                )
                .await?,
            ),
            _ => None,
        };
        drop(view);
        let r = report?;
        for p in &r.namespace.problems {
            let path = if p.nameless {
                None
            } else {
                volume.meta.path_of(p.ino).await.ok().flatten()
            };
            let fixed = if p.repaired { " (repaired)" } else { "" };
            println!(
                "inode {} {}: {}{fixed}",
                p.ino,
                path.as_deref().unwrap_or("(no path)"),
                p.what
            );
        }
        for f in &r.broken_files {
            println!(
                "broken file {} (inode {}): {} blocks missing, {} of the wrong size, {} \
                 unreadable, e.g. {}",
                f.path.as_deref().unwrap_or("(deleted, still open)"),
                f.ino,
                f.missing_blocks,
                f.wrong_size_blocks,
                f.unreadable_blocks,
                f.example
            );
        }
        let ns = &r.namespace;
        if ns.volume_recorded != ns.volume_counted {
            let ((rb, ri), (cb, ci)) = (ns.volume_recorded, ns.volume_counted);
            let what = if ns.volume_repaired {
                "set to the count"
            } else {
                "normal after a client crash or while clients write; --repair sets them"
            };
            println!(
                "volume counters say {rb} bytes / {ri} inodes, the volume holds {cb} / {ci} ({what})"
            );
        }
        println!(
            "checked {} directories, {} files, {} block references against {} objects",
            r.namespace.directories, r.namespace.files, r.blocks_checked, r.objects_listed
        );
        if a.verify {
            println!("read and verified {} blocks", r.blocks_verified);
        }
        if a.record_checksums {
            record_checksums_done(&volume.meta, &volume.format, &r).await?;
        }
        if let Some(p) = &placed {
            println!(
                "placements: {} slices placed, {} (block, store) pairs checked: {} missing, \
                 {} stray copies, {} records of unreferenced slices",
                p.slices, p.blocks_checked, p.missing, p.stray, p.orphan_records
            );
            for e in &p.examples {
                println!("block missing from store {e}");
            }
        }
        let placed_clean = placed.as_ref().is_none_or(|p| p.is_clean());
        if r.is_clean() && placed_clean {
            println!("volume is clean");
            Ok(())
        } else {
            if !r.broken_files.is_empty() {
                note_writeback_clients(&volume.meta).await;
            }
            bail!(
                "{} broken files, {} namespace problems ({} repaired), {} blocks missing \
                 from their stores",
                r.broken_files.len(),
                r.namespace.problems.len(),
                r.namespace.problems.iter().filter(|p| p.repaired).count(),
                placed.as_ref().map_or(0, |p| p.missing)
            )
        }
    })
}

/// After `fsck --verify --record-checksums`: with every foreign block's checksums recorded
/// and nothing broken, the volume says so, and reads check them from then on.
async fn record_checksums_done(
    meta: &strata_meta::Meta,
    format: &strata_meta::Format,
    r: &strata_vfs::maintenance::fsck::FsckReport,
) -> Result<()> {
    println!(
        "recorded the checksums of {} imported blocks ({} failed)",
        r.checksums_recorded, r.checksums_failed
    );
    if r.checksums_failed > 0 || !r.broken_files.is_empty() {
        println!("reads of imported blocks stay unchecked: run it again once the volume is clean");
        return Ok(());
    }
    let mut updated = format.clone();
    if let Some(foreign) = updated.foreign.as_mut() {
        foreign.checksums = true;
    }
    meta.format(&updated, false).await?;
    println!("reads of imported blocks now check their recorded checksums");
    Ok(())
}
