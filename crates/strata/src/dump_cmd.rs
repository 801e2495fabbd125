//! `strata dump` and `strata load`: the volume's metadata as JSON lines (dump v1,
//! docs/FORMAT.md), streamed in both directions, gzip when the file name ends in `.gz`
//! (detected by its magic on load). A dump loads into an empty engine of any kind.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use strata_meta::{DumpOptions, Meta, MetaOptions};
use strata_types::MetaUrl;
use strata_vfs::maintenance::Progress;

use crate::progress::ProgressView;
use crate::wiring;

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// Where to write (gzip-compressed when it ends in .gz); standard output when absent
    file: Option<PathBuf>,
    /// Dump only this directory's tree (it becomes the root of the dump)
    #[arg(long)]
    subdir: Option<String>,
    /// Keep the object store's secret key in the dump (omitted by default)
    #[arg(long)]
    keep_secret_key: bool,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Metadata engine URL of an empty database to load into
    meta_url: MetaUrl,
    /// The dump to read (plain or gzip); standard input when absent
    file: Option<PathBuf>,
}

pub fn run_dump(a: DumpArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, _) = wiring::load_meta(&a.meta_url).await?;
        let subdir = match &a.subdir {
            Some(path) => Some(strata_client::resolve_subdir(&meta, Some(path)).await?),
            None => None,
        };
        let opts = DumpOptions {
            subdir,
            subdir_path: a.subdir.clone(),
            keep_secret_key: a.keep_secret_key,
        };
        let Some(path) = &a.file else {
            let mut out = BufWriter::new(std::io::stdout());
            meta.dump(&mut out, &opts, &mut |_| {}).await?;
            return out.flush().context("writing the dump");
        };
        let partial = path.with_extension("partial");
        let file = wiring::open_private_file(&partial, false)
            .with_context(|| format!("{}", partial.display()))?;
        let gzip = path.extension().is_some_and(|e| e == "gz");
        let mut out = if gzip {
            DumpFile::Gzip(GzEncoder::new(BufWriter::new(file), Compression::default()))
        } else {
            DumpFile::Plain(BufWriter::new(file))
        };
        let progress = Arc::new(Progress::default());
        progress.stage("dumping inodes", 0);
        let view = ProgressView::start(progress.clone());
        let dumped = meta
            .dump(&mut out, &opts, &mut |n| {
                progress.done.store(n, std::sync::atomic::Ordering::Relaxed)
            })
            .await;
        drop(view);
        let stats = dumped?;
        out.finish()?;
        std::fs::rename(&partial, path)?;
        eprintln!(
            "dumped {} inodes, {} entries, {} shared slices to {}",
            stats.nodes,
            stats.entries,
            stats.slice_refs,
            path.display()
        );
        Ok(())
    })
}

/// A dump file being written, plain or gzip.
enum DumpFile {
    Plain(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
}

impl Write for DumpFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            DumpFile::Plain(w) => w.write(buf),
            DumpFile::Gzip(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            DumpFile::Plain(w) => w.flush(),
            DumpFile::Gzip(w) => w.flush(),
        }
    }
}

impl DumpFile {
    /// Write everything out (the gzip trailer too) and make it durable.
    fn finish(self) -> Result<()> {
        let buffered = match self {
            DumpFile::Plain(w) => w,
            DumpFile::Gzip(w) => w.finish().context("writing the dump")?,
        };
        let file = buffered
            .into_inner()
            .map_err(|e| e.into_error())
            .context("writing the dump")?;
        file.sync_all().context("syncing the dump")
    }
}

pub fn run_load(a: LoadArgs) -> Result<()> {
    let raw: Box<dyn Read + Send> = match &a.file {
        Some(path) => Box::new(File::open(path).with_context(|| format!("{}", path.display()))?),
        None => Box::new(std::io::stdin()),
    };
    let mut peek = BufReader::new(raw);
    let gzip = peek
        .fill_buf()
        .context("reading the dump")?
        .starts_with(&[0x1f, 0x8b]);
    let mut input: Box<dyn BufRead + Send> = if gzip {
        Box::new(BufReader::new(MultiGzDecoder::new(peek)))
    } else {
        Box::new(peek)
    };
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let meta = Meta::new(
            wiring::open_engine(&a.meta_url).await?,
            MetaOptions::default(),
        );
        let progress = Arc::new(Progress::default());
        progress.stage("loading lines", 0);
        let view = ProgressView::start(progress.clone());
        let loaded = meta
            .load_dump(&mut input, &mut |n| {
                progress.done.store(n, std::sync::atomic::Ordering::Relaxed)
            })
            .await;
        drop(view);
        let stats = loaded.map_err(|e| anyhow::anyhow!("load into {}: {e}", a.meta_url))?;
        let format = meta.load().await?;
        eprintln!(
            "loaded volume {} ({} inodes, {} entries, {} shared slices)",
            format.name, stats.nodes, stats.entries, stats.slice_refs
        );
        if format.secret_key.is_none() && format.access_key.is_some() {
            eprintln!(
                "the dump holds no secret key: set it with `strata config {} --secret-key ...`",
                a.meta_url
            );
        }
        Ok(())
    })
}
