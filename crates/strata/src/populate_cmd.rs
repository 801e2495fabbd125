//! `strata bench populate META-URL NAME --files N`: a new volume holding N generated files
//! in a chosen shape, written at the engine's speed as a load is (strata-meta's
//! `Population` feeding `Meta::load_lines`), for measuring metadata at scale. The files
//! have lengths but no data (they read as zeros) and no object is written.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use strata_meta::{Meta, MetaOptions, PopulateShape, PopulateSpec, Population};

use strata_types::MetaUrl;
use strata_vfs::maintenance::Progress;

use crate::format_cmd::{StoreKeys, new_bucket, new_format};
use crate::progress::ProgressView;
use crate::wiring;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Shape {
    /// Every file in one directory (/flat)
    Flat,
    /// Directories of --per-dir files, --per-dir directories to a directory (/wide)
    Wide,
    /// Directories of --per-dir files, each --depth directories below /deep
    Deep,
}

#[derive(Debug, Args)]
pub struct PopulateArgs {
    /// Metadata engine URL of an empty database, e.g. sqlite3://big.db
    meta_url: MetaUrl,
    /// Name of the new volume: 3-63 characters of a-z, 0-9 and '-'
    name: String,
    /// Files to make: 1000000, 10M, 1G (K, M, G are powers of 1000 here)
    #[arg(long, value_parser = count)]
    files: u64,
    /// How the files are laid out
    #[arg(long, value_enum, default_value_t = Shape::Wide)]
    shape: Shape,
    /// Files per directory (and directories per directory for --shape wide)
    #[arg(long, default_value_t = 1000)]
    per_dir: u64,
    /// Directory levels below /deep for --shape deep
    #[arg(long, default_value_t = 16)]
    depth: u32,
    /// File length: one size (0, 4K, 1M) or a range MIN-MAX, log-uniform (1K-64M)
    #[arg(long, default_value = "0")]
    file_size: String,
    /// Seed of the lengths: the same seed makes the same volume
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Object storage: file, s3, wasb or mem (nothing is written to it)
    #[arg(long, default_value = "file")]
    storage: String,
    /// Bucket, as for `strata format`
    #[arg(long)]
    bucket: Option<String>,
    #[command(flatten)]
    keys: StoreKeys,
}

/// A count with an optional K, M or G (powers of 1000).
fn count(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, scale) = match text.char_indices().last() {
        Some((at, 'K' | 'k')) => (&text[..at], 1_000),
        Some((at, 'M' | 'm')) => (&text[..at], 1_000_000),
        Some((at, 'G' | 'g')) => (&text[..at], 1_000_000_000),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("expected a count like 1000000 or 10M, not {text:?}"))
}

/// `SIZE` or `MIN-MAX` as byte bounds.
fn size_bounds(text: &str) -> Result<(u64, u64)> {
    let bytes = |t: &str| {
        crate::units::parse_size(t, 1).map_err(|e| anyhow::anyhow!("--file-size {text:?}: {e}"))
    };
    match text.split_once('-') {
        Some((min, max)) => {
            let (min, max) = (bytes(min)?, bytes(max)?);
            if min > max {
                bail!("--file-size {text:?}: the smallest size is above the largest");
            }
            Ok((min, max))
        }
        None => bytes(text).map(|size| (size, size)),
    }
}

pub fn run_populate(a: PopulateArgs) -> Result<()> {
    let (size_min, size_max) = size_bounds(&a.file_size)?;
    let shape = match a.shape {
        Shape::Flat => PopulateShape::Flat,
        Shape::Wide => PopulateShape::Wide,
        Shape::Deep => PopulateShape::Deep { depth: a.depth },
    };
    let spec = PopulateSpec {
        files: a.files,
        shape,
        per_dir: a.per_dir,
        size_min,
        size_max,
        seed: a.seed,
    };
    let layout = spec.layout()?;
    let bucket = new_bucket(a.bucket.as_deref(), &a.storage)?;
    let format = new_format(&a.name, &a.storage, bucket, &a.keys);
    format.validate()?;
    let top = spec.shape.top_name();
    let lines = Population::new(spec, &format, strata_meta::now_ns())?;
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let meta = Meta::new(
            wiring::open_engine(&a.meta_url).await?,
            MetaOptions::default(),
        );
        // Two lines per file and directory, the header, root, trash and end.
        let total = a
            .files
            .saturating_add(layout.dirs)
            .saturating_mul(2)
            .saturating_add(4);
        let progress = Arc::new(Progress::default());
        progress.stage("writing records", total);
        let view = ProgressView::start(progress.clone());
        let started = Instant::now();
        let loaded = meta
            .load_lines(lines, &mut |n| {
                progress.done.store(n, std::sync::atomic::Ordering::Relaxed)
            })
            .await;
        drop(view);
        let stats = loaded.with_context(|| format!("populate {}", a.meta_url))?;
        let took = started.elapsed();
        let millis = u64::try_from(took.as_millis()).unwrap_or(u64::MAX).max(1);
        println!(
            "volume {}: {} files in {} directories ({} levels below /{}), {} inodes in \
             {:.1} s ({} inodes/s)",
            a.name,
            a.files,
            layout.dirs,
            layout.levels,
            top,
            stats.nodes,
            took.as_secs_f64(),
            stats.nodes.saturating_mul(1000) / millis,
        );
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sizes_parse() {
        assert_eq!(count("10M"), Ok(10_000_000));
        assert_eq!(count("2500"), Ok(2500));
        assert_eq!(count("1g"), Ok(1_000_000_000));
        assert!(count("x").is_err() && count("99999999999G").is_err());
        assert_eq!(size_bounds("4K").unwrap(), (4096, 4096));
        assert_eq!(size_bounds("1K-64M").unwrap(), (1024, 64 << 20));
        assert!(size_bounds("2M-1M").is_err());
    }
}
