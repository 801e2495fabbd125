//! What `strata sync` prints: the live progress line and the summary.

use std::time::Instant;

use anyhow::{Result, bail};
use strata_sync::SyncStats;

/// Print the summary (after `what`); fail when some key failed.
pub(crate) fn finish(stats: &SyncStats, started: Instant, what: &str) -> Result<()> {
    let done = stats.snapshot();
    if !crate::wiring::quiet() {
        let secs = started.elapsed().as_secs_f64();
        eprintln!("{what}{} in {secs:.1}s", done.summary());
    }
    if done.failed > 0 {
        bail!("{} keys failed (their errors are above)", done.failed);
    }
    Ok(())
}

/// The live progress line: counts of both sides and the copy rate.
pub(crate) fn progress_line(stats: &SyncStats, started: Instant) -> String {
    let s = stats.snapshot();
    let millis = u64::try_from(started.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let rate = indicatif::HumanBytes(s.copied_bytes.saturating_mul(1000) / millis);
    format!(
        "listed {}/{}  copied {} ({}, {rate}/s)  skipped {}  deleted {}  failed {}",
        s.listed_src,
        s.listed_dst,
        s.copied,
        indicatif::HumanBytes(s.copied_bytes),
        s.skipped,
        s.deleted_src + s.deleted_dst,
        s.failed
    )
}
