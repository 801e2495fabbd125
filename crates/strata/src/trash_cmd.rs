//! `strata restore` (trash entries back to their original paths, by deletion time and
//! name) and `strata rmr` (fast recursive delete through the trash).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::{RestoreOutcome, TrashEntry, days_from_civil};
use strata_types::MetaUrl;
use strata_vfs::control_wire::{ControlOp, ControlResult};

use crate::{control, wiring};

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
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
    /// Files or directories on a mounted Strata volume (removed through the trash when
    /// the volume keeps one; you may remove only what `rm -r` would let you)
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Removal transactions at once, each taking up to 64 files of one directory (1–255;
    /// JuiceFS's flag)
    #[arg(short = 'p', long, default_value_t = 50,
          value_parser = clap::value_parser!(u8).range(1..))]
    threads: u8,
    /// Delete for good instead of moving into the trash (root only; JuiceFS's flag)
    #[arg(long)]
    skip_trash: bool,
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

/// Remove each path and everything below it, through the mount that serves it: the
/// removal runs as the caller, with `rm -r`'s permission checks, in the mount's view.
pub fn run_rmr(a: RmrArgs) -> Result<()> {
    for path in &a.paths {
        let abs = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            bail!("{}: cannot remove the root of a volume", path.display());
        };
        std::fs::symlink_metadata(&abs).with_context(|| format!("{}", abs.display()))?;
        let mount = control::mount_of(parent)?;
        let parent_meta =
            std::fs::metadata(parent).with_context(|| format!("{}", parent.display()))?;
        if std::fs::canonicalize(&abs).is_ok_and(|c| c == mount.root) {
            bail!("{}: cannot remove the root of a mount", path.display());
        }
        let op = ControlOp::Rmr {
            parent: parent_meta.ino(),
            name: name.as_bytes().to_vec(),
            threads: usize::from(a.threads),
            skip_trash: a.skip_trash,
        };
        match control::request(&mount, op).with_context(|| format!("{}", abs.display()))? {
            ControlResult::Removed { entries } => {
                println!("removed {} ({entries} entries)", abs.display());
            }
            _ => bail!("the mount answered with something other than a removal"),
        }
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
