//! `strata warmup PATH...`: fill the cache with the blocks of files or trees on a mounted
//! volume before they are read (JuiceFS's flags: `-f LIST`, `-p THREADS`,
//! `--background`, `--evict`, `--check`), plus `--range OFFSET:LEN` to warm only some
//! bytes of each file. The mount does the work through `.control`; in a cache group each
//! block is warmed at its owner, so one warmup through any member fills the group.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::HumanBytes;
use strata_vfs::control_wire::{ControlOp, ControlResult};
use strata_vfs::control_wire::{WarmAction, WarmReport, WarmSpec};

use crate::{control, units};

#[derive(Debug, Args)]
pub struct WarmupArgs {
    /// Files or directories on a mounted Strata volume
    paths: Vec<PathBuf>,
    /// A file listing more paths, one per line
    #[arg(short = 'f', long = "file", value_name = "LIST")]
    file: Option<PathBuf>,
    /// Blocks handled at once
    #[arg(short = 'p', long, default_value_t = 50)]
    threads: usize,
    /// Return at once and let the mount warm in the background
    #[arg(short = 'b', long)]
    background: bool,
    /// Drop the blocks from the cache (the owner's in a cache group) instead
    #[arg(long, conflicts_with = "check")]
    evict: bool,
    /// Report how much of each path is cached instead of warming it
    #[arg(long)]
    check: bool,
    /// Only bytes LEN from OFFSET of each file (sizes like 64M; LEN empty or 0 = to the
    /// end); may be given several times
    #[arg(long, value_name = "OFFSET:LEN", value_parser = parse_range)]
    range: Vec<(u64, u64)>,
    /// low: fetch a block only while no read of the mount is fetching data (warmup
    /// yields to reads); normal: compete with them
    #[arg(long, value_name = "low|normal", default_value = "normal", value_parser = ["low", "normal"])]
    priority: String,
}

/// `OFFSET:LEN` with sizes in bytes unless a unit is given (4K, 64M, 1G).
fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let (off, len) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected OFFSET:LEN, such as 0:64M or 1G:"))?;
    let size = |s: &str| {
        if s.trim().is_empty() {
            Ok(0)
        } else {
            units::parse_size(s, 1)
        }
    };
    Ok((size(off)?, size(len)?))
}

pub fn run_warmup(a: WarmupArgs) -> Result<()> {
    let mut paths = a.paths.clone();
    if let Some(list) = &a.file {
        let text = std::fs::read_to_string(list).with_context(|| format!("{}", list.display()))?;
        paths.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(PathBuf::from),
        );
    }
    if paths.is_empty() {
        bail!("nothing to warm: give paths, or -f LIST");
    }
    let action = if a.evict {
        WarmAction::Evict
    } else if a.check {
        WarmAction::Check
    } else {
        WarmAction::Warm
    };
    let mut failed = 0;
    for path in &paths {
        let path = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
        let mount = control::mount_of(&path)?;
        let spec = WarmSpec {
            action,
            ranges: a.range.clone(),
            threads: a.threads.max(1),
            background: a.background,
            low_priority: a.priority == "low",
        };
        let op = ControlOp::Warmup {
            ino: std::fs::metadata(&path)?.ino(),
            spec,
        };
        match control::request(&mount, op).with_context(|| format!("{}", path.display()))? {
            ControlResult::Warmed(report) => {
                println!("{}", summary(&path.display().to_string(), action, &report));
                failed += report.failed;
            }
            _ => bail!("the mount answered with something other than a warmup"),
        }
    }
    if failed > 0 {
        bail!("{failed} blocks failed (the mount's log says why)");
    }
    Ok(())
}

fn summary(path: &str, action: WarmAction, r: &WarmReport) -> String {
    let mut line = match (action, r.background) {
        (_, true) => format!(
            "{path}: {} files, {} blocks ({}) handed to the mount in the background",
            r.files,
            r.blocks,
            HumanBytes(r.bytes)
        ),
        (WarmAction::Warm, false) => format!(
            "{path}: warmed {} files, {} blocks ({})",
            r.files,
            r.blocks,
            HumanBytes(r.bytes)
        ),
        (WarmAction::Evict, false) => format!(
            "{path}: evicted {} blocks ({}) of {} files",
            r.blocks,
            HumanBytes(r.bytes),
            r.files
        ),
        (WarmAction::Check, false) => {
            // Display only: the ratio of two exact integers, in hundredths of a percent.
            let hundredths = r
                .cached_bytes
                .saturating_mul(10_000)
                .checked_div(r.bytes)
                .unwrap_or(10_000);
            let percent = f64::from(u32::try_from(hundredths).unwrap_or(10_000)) / 100.0;
            format!(
                "{path}: {} of {} cached ({percent:.2}%), {} files, {} blocks",
                HumanBytes(r.cached_bytes),
                HumanBytes(r.bytes),
                r.files,
                r.blocks
            )
        }
    };
    if r.skipped_files > 0 {
        line.push_str(&format!(
            "; skipped {} files you may not read",
            r.skipped_files
        ));
    }
    if r.failed > 0 {
        line.push_str(&format!("; {} blocks failed", r.failed));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_units() {
        assert_eq!(parse_range("0:64M"), Ok((0, 64 << 20)));
        assert_eq!(parse_range("1G:"), Ok((1 << 30, 0)));
        assert_eq!(parse_range("4096:4096"), Ok((4096, 4096)));
        assert!(parse_range("12").is_err());
        assert!(parse_range("x:1").is_err());
    }

    #[test]
    fn check_reports_a_percentage() {
        let r = WarmReport {
            files: 2,
            blocks: 4,
            bytes: 4 << 20,
            cached_bytes: 1 << 20,
            ..WarmReport::default()
        };
        assert!(summary("/m/d", WarmAction::Check, &r).contains("(25.00%)"));
    }
}
