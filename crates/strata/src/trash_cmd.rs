//! `strata restore` (trash entries back to their original paths, by deletion time and
//! name) and `strata rmr` (fast recursive delete through the trash).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::{Ctx, RestoreOutcome, TrashEntry, days_from_civil};
use strata_types::Ino;
use strata_vfs::maintenance::Progress;

use crate::progress::ProgressView;
use crate::wiring;

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Metadata engine URL of the volume
    meta_url: String,
    /// Only entries deleted at or after this time (UTC: `2026-11-30`, `2026-11-30 08:15`,
    /// `2026-11-30T08:15:00`, or Unix seconds)
    #[arg(long)]
    start_time: Option<String>,
    /// Only entries deleted before this time (same forms)
    #[arg(long)]
    end_time: Option<String>,
    /// Only entries whose original name contains this text
    #[arg(long = "match", value_name = "KEYWORD")]
    keyword: Option<String>,
    /// Show what would be restored without changing anything
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Args)]
pub struct RmrArgs {
    /// Files or directories on a mounted Strata volume
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Nanoseconds since the epoch of a UTC time given as a date, date and time, or Unix
/// seconds.
pub fn parse_time(text: &str) -> Result<i64> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<i64>() {
        return Ok(secs.saturating_mul(1_000_000_000));
    }
    let bad =
        || anyhow::anyhow!("time {text:?}: expected YYYY-MM-DD[ HH:MM[:SS]] (UTC) or Unix seconds");
    let (date, time) = match t.split_once([' ', 'T']) {
        Some((d, rest)) => (d, rest.trim_end_matches('Z')),
        None => (t, "00:00:00"),
    };
    let ymd: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let (&[y, m, d], &[h, mi, ref rest @ ..]) = (&ymd[..], &hms[..]) else {
        return Err(bad());
    };
    let s = rest.first().copied().unwrap_or(0);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    Ok((days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000_000)
}

pub fn run_restore(a: RestoreArgs) -> Result<()> {
    let start = a
        .start_time
        .as_deref()
        .map(parse_time)
        .transpose()?
        .unwrap_or(0);
    let end = a
        .end_time
        .as_deref()
        .map(parse_time)
        .transpose()?
        .unwrap_or(i64::MAX);
    if start >= end {
        bail!("--start-time must be before --end-time");
    }
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, _) = wiring::load_meta(&a.meta_url).await?;
        let keyword = a.keyword.unwrap_or_default();
        let mut pending: Vec<TrashEntry> = Vec::new();
        meta.trash_entries(start, end, keyword.as_bytes(), |e| pending.push(e))
            .await?;
        // Directories first, so files deleted from a deleted directory find it again.
        pending.sort_by_key(|e| (e.kind != strata_types::FileType::Directory, e.deleted_at));
        let mut restored = 0;
        let mut taken = 0;
        loop {
            let mut homeless = Vec::new();
            let mut progressed = false;
            for e in pending {
                let shown = show(&meta, &e).await;
                if a.dry_run {
                    println!("would restore {shown}");
                    restored += 1;
                    continue;
                }
                match meta.restore_entry(&e).await? {
                    RestoreOutcome::Restored => {
                        println!("restored {shown}");
                        restored += 1;
                        progressed = true;
                    }
                    RestoreOutcome::NameTaken => {
                        println!("not restored (name exists): {shown}");
                        taken += 1;
                    }
                    RestoreOutcome::ParentGone => homeless.push(e),
                }
            }
            if !progressed || homeless.is_empty() {
                for e in &homeless {
                    println!(
                        "not restored (directory {} is gone): {}",
                        e.parent,
                        String::from_utf8_lossy(&e.name)
                    );
                }
                let verb = if a.dry_run {
                    "would restore"
                } else {
                    "restored"
                };
                println!(
                    "{verb} {restored} entries; {taken} names taken, {} without a directory",
                    homeless.len()
                );
                return Ok(());
            }
            pending = homeless;
        }
    })
}

async fn show(meta: &strata_meta::Meta, e: &TrashEntry) -> String {
    let dir = meta
        .path_of(e.parent)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| format!("<inode {}>", e.parent));
    let sep = if dir.ends_with('/') { "" } else { "/" };
    format!(
        "{dir}{sep}{} (deleted {}, {} bytes)",
        String::from_utf8_lossy(&e.name),
        e.hour_name,
        e.length
    )
}

pub fn run_rmr(a: RmrArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    let ctx = Ctx::user(
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    for path in &a.paths {
        let abs = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            bail!("{}: cannot remove the root of a volume", path.display());
        };
        let parent_ino = Ino(std::fs::metadata(parent)
            .with_context(|| format!("{}", parent.display()))?
            .ino());
        std::fs::symlink_metadata(&abs).with_context(|| format!("{}", abs.display()))?;
        let url = wiring::meta_url_of_path(parent)?;
        let name = name.as_bytes().to_vec();
        rt.block_on(async {
            let (meta, _) = wiring::load_meta(&url).await?;
            let progress = Arc::new(Progress::default());
            progress.stage("removing", 0);
            let view = ProgressView::start(progress.clone());
            let removed = meta
                .remove_tree(&ctx, parent_ino, &name, &mut |n| progress.add(n, 0))
                .await;
            drop(view);
            let removed = removed.map_err(|e| anyhow::anyhow!("{}: {e}", abs.display()))?;
            println!("removed {} ({removed} entries)", abs.display());
            Ok::<_, anyhow::Error>(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_utc() {
        assert_eq!(parse_time("1970-01-02").unwrap(), 86_400 * 1_000_000_000);
        assert_eq!(
            parse_time("2026-11-30 08:15").unwrap(),
            parse_time("2026-11-30T08:15:00Z").unwrap()
        );
        assert_eq!(
            parse_time("1796008599").unwrap(),
            1_796_008_599 * 1_000_000_000
        );
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2026-13-01").is_err());
    }
}
