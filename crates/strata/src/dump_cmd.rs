//! `strata dump` and `strata load`: the volume's metadata as JSON lines (dump v1,
//! docs/FORMAT.md), streamed in both directions, gzip when the file name ends in `.gz`
//! (detected by its magic on load); or with `--binary`, the engine's records in
//! compressed frames (dump v2), several scans and batches at once — the fast format for
//! large volumes. A dump loads into an empty engine of any kind; `load` tells the
//! formats apart by their first bytes. `dump --encrypt` seals the file with an encrypted
//! volume's data key (`strata_object::seal::stream`); `load` opens it with the keys its
//! header names (the volume's KEK or RSA key).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use strata_meta::{BinaryDumpOptions, DumpOptions, DumpStats, Format, Meta, MetaOptions};
use strata_types::MetaUrl;
use strata_vfs::maintenance::Progress;

use crate::key_args::KeyArgs;
use crate::progress::ProgressView;
use crate::wiring;
use strata_object::seal::KeyRing;
use strata_object::seal::stream::{SealedReader, SealedWriter, is_sealed, read_header};

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// Where to write (gzip-compressed when it ends in .gz); standard output when absent
    file: Option<PathBuf>,
    /// Dump only this directory's tree (it becomes the root of the dump)
    #[arg(long)]
    subdir: Option<String>,
    /// Keep the object store's secret key and session token in the dump (omitted by default)
    #[arg(long)]
    keep_secret_key: bool,
    /// Write the binary format (dump v2): the engine's records in compressed, checksummed
    /// frames, read by several scans at once and written in key order; one point in time
    /// while clients write (on Redis: page by page); the whole volume only (no --subdir)
    #[arg(long, conflicts_with = "subdir")]
    binary: bool,
    /// With --binary: read each page as it stands, holding no snapshot of the engine (on
    /// PostgreSQL a held snapshot slows writers that update the same rows meanwhile); the
    /// dump is then consistent page by page only
    #[arg(long, requires = "binary")]
    no_snapshot: bool,
    /// Scans at once for --binary
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Seal the dump with an encrypted volume's data key (a JSON dump is gzipped first);
    /// `strata load` opens it with the volume's key-encryption key or RSA key
    #[arg(long, requires = "file", help_heading = "Encryption")]
    encrypt: bool,
    /// Write a JuiceFS dump (JSON) that `juicefs load` takes: the way back for a volume
    /// imported from JuiceFS whose files all still read JuiceFS's objects (refused, before
    /// writing, when Strata wrote any of their data)
    #[arg(long, conflicts_with_all = ["binary", "subdir", "encrypt"])]
    juicefs: bool,
    #[command(flatten)]
    keys: KeyArgs,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Metadata engine URL of an empty database to load into (with --stat: the dump)
    meta_url: MetaUrl,
    /// The dump to read (JSON lines, gzip or binary, told apart by its first bytes);
    /// standard input when absent
    file: Option<PathBuf>,
    /// The dump must be a binary one (dump v2); binary dumps are recognized without it
    #[arg(long)]
    binary: bool,
    /// Say what a binary dump holds (records by kind, sizes) and check it whole, without
    /// loading it: `strata load FILE --binary --stat`
    #[arg(long)]
    stat: bool,
    /// Batches written at once when loading a binary dump into Redis or etcd (SQLite and
    /// PostgreSQL load through their own bulk path: large transactions, `COPY`)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// First erase what an interrupted load or populate left in the engine (records
    /// without a volume); an engine holding a volume is still refused
    #[arg(long)]
    force: bool,
    /// The key-encryption key of a sealed dump's volume (an RSA one takes its passphrase
    /// from JFS_RSA_PASSPHRASE)
    #[command(flatten)]
    keys: KeyArgs,
}

pub fn run_dump(a: DumpArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, format) = wiring::load_meta(&a.meta_url).await?;
        if a.juicefs {
            return dump_juicefs(&meta, &format, &a).await;
        }
        let seal = match a.encrypt {
            true => Some(dump_seal(&meta, &format, &a.keys)?),
            false => None,
        };
        let subdir = match &a.subdir {
            Some(path) => Some(strata_client::resolve_subdir(&meta, Some(path)).await?),
            None => None,
        };
        let opts = DumpOptions {
            subdir,
            subdir_path: a.subdir.clone(),
            keep_secret_key: a.keep_secret_key,
        };
        let binary = a.binary.then(|| BinaryDumpOptions {
            threads: usize::from(a.threads),
            keep_secret_key: a.keep_secret_key,
            one_moment: !a.no_snapshot,
        });
        let Some(path) = &a.file else {
            let mut out = BufWriter::new(std::io::stdout());
            match &binary {
                Some(b) => meta.dump_binary(&mut out, b, &mut |_| {}).await?,
                None => meta.dump(&mut out, &opts, &mut |_| {}).await?,
            };
            return out.flush().context("writing the dump");
        };
        let gzip = path.extension().is_some_and(|e| e == "gz");
        if gzip && binary.is_some() {
            anyhow::bail!(
                "a binary dump is compressed already: name it without .gz (e.g. {})",
                path.with_extension("").display()
            );
        }
        let partial = path.with_extension("partial");
        let file = wiring::open_private_file(&partial, false)
            .with_context(|| format!("{}", partial.display()))?;
        let mut out = match seal {
            // JSON lines compress well: gzip inside the seal (sealed bytes do not compress).
            Some((ring, header)) => {
                let sealed = SealedWriter::new(BufWriter::new(file), &ring, &header)?;
                match binary {
                    Some(_) => DumpFile::Sealed(sealed),
                    None => DumpFile::SealedGzip(GzEncoder::new(sealed, Compression::default())),
                }
            }
            None if gzip => {
                DumpFile::Gzip(GzEncoder::new(BufWriter::new(file), Compression::default()))
            }
            None => DumpFile::Plain(BufWriter::new(file)),
        };
        let progress = Arc::new(Progress::default());
        progress.stage("dumping inodes", 0);
        let view = ProgressView::start(progress.clone());
        let mut tell = |n| progress.done.store(n, std::sync::atomic::Ordering::Relaxed);
        let dumped = match &binary {
            Some(b) => meta.dump_binary(&mut out, b, &mut tell).await,
            None => meta.dump(&mut out, &opts, &mut tell).await,
        };
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

/// `dump --juicefs`: the volume as a JuiceFS dump, to a file (gzip when it ends in .gz)
/// or standard output.
async fn dump_juicefs(meta: &Meta, format: &Format, a: &DumpArgs) -> Result<()> {
    let secret = format.secret_key.as_ref().filter(|_| a.keep_secret_key);
    let Some(path) = &a.file else {
        let mut out = BufWriter::new(std::io::stdout());
        meta.export_juicefs(&mut out, secret, &mut |_| {}).await?;
        return out.flush().context("writing the dump");
    };
    let partial = path.with_extension("partial");
    let file = wiring::open_private_file(&partial, false)
        .with_context(|| format!("{}", partial.display()))?;
    let mut out = match path.extension().is_some_and(|e| e == "gz") {
        true => DumpFile::Gzip(GzEncoder::new(BufWriter::new(file), Compression::default())),
        false => DumpFile::Plain(BufWriter::new(file)),
    };
    let progress = Arc::new(Progress::default());
    progress.stage("dumping inodes", 0);
    let view = ProgressView::start(progress.clone());
    let mut tell = |n| progress.done.store(n, std::sync::atomic::Ordering::Relaxed);
    let exported = meta.export_juicefs(&mut out, secret, &mut tell).await;
    drop(view);
    let exported = match exported {
        Ok(e) => e,
        Err(e) => {
            drop(out);
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
    };
    out.finish()?;
    std::fs::rename(&partial, path)?;
    eprintln!(
        "dumped {} nodes as a JuiceFS dump to {} (`juicefs load META-URL {}` takes it){}",
        exported.nodes,
        path.display(),
        path.display(),
        match exported.acls_left_out {
            0 => String::new(),
            n => format!("; {n} access control lists left out"),
        }
    );
    Ok(())
}

/// The keys and header that seal a dump of an encrypted volume.
fn dump_seal(meta: &Arc<Meta>, format: &Format, keys: &KeyArgs) -> Result<(Arc<KeyRing>, Vec<u8>)> {
    if format.encryption.is_none() {
        anyhow::bail!(
            "--encrypt: volume {} is not encrypted, so it has no data key to seal a dump with",
            format.name
        );
    }
    let Some(keys) = strata_client::volume_keys(meta, format, &keys.options())? else {
        anyhow::bail!("volume {} has no keys", format.name);
    };
    Ok((
        keys.ring(),
        strata_client::keys::sealed_file_header(format)?,
    ))
}

/// A dump file being written: plain, gzip, sealed (binary), or gzip inside a seal (JSON).
enum DumpFile {
    Plain(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
    Sealed(SealedWriter<BufWriter<File>>),
    SealedGzip(GzEncoder<SealedWriter<BufWriter<File>>>),
}

impl Write for DumpFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            DumpFile::Plain(w) => w.write(buf),
            DumpFile::Gzip(w) => w.write(buf),
            DumpFile::Sealed(w) => w.write(buf),
            DumpFile::SealedGzip(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            DumpFile::Plain(w) => w.flush(),
            DumpFile::Gzip(w) => w.flush(),
            DumpFile::Sealed(w) => w.flush(),
            DumpFile::SealedGzip(w) => w.flush(),
        }
    }
}

impl DumpFile {
    /// Write everything out (the gzip trailer, the last sealed record) and make it
    /// durable.
    fn finish(self) -> Result<()> {
        let written = |e| anyhow::Error::new(e).context("writing the dump");
        let buffered = match self {
            DumpFile::Plain(w) => w,
            DumpFile::Gzip(w) => w.finish().map_err(written)?,
            DumpFile::Sealed(w) => w.finish().map_err(written)?,
            DumpFile::SealedGzip(w) => w.finish().and_then(|s| s.finish()).map_err(written)?,
        };
        let file = buffered
            .into_inner()
            .map_err(|e| e.into_error())
            .context("writing the dump")?;
        file.sync_all().context("syncing the dump")
    }
}

pub fn run_load(a: LoadArgs) -> Result<()> {
    if a.stat {
        return stat_binary(&a);
    }
    let meta_url = &a.meta_url;
    let raw: Box<dyn Read + Send> = match &a.file {
        Some(path) => Box::new(File::open(path).with_context(|| format!("{}", path.display()))?),
        None => Box::new(std::io::stdin()),
    };
    let (mut input, binary) = open_dump(raw, &a.keys)?;
    if a.binary && !binary {
        anyhow::bail!("--binary: the input is not a binary dump (it does not start with STRDUMP2)");
    }
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let meta = Meta::new(wiring::open_engine(meta_url).await?, MetaOptions::default());
        if a.force {
            let erased = meta.erase_leftovers().await?;
            if erased > 0 {
                eprintln!("erased {erased} records an interrupted load left");
            }
        }
        let progress = Arc::new(Progress::default());
        progress.stage(
            if binary {
                "loading inodes"
            } else {
                "loading lines"
            },
            0,
        );
        let view = ProgressView::start(progress.clone());
        let mut tell = |n| progress.done.store(n, std::sync::atomic::Ordering::Relaxed);
        let loaded = if binary {
            meta.load_binary(&mut input, usize::from(a.threads), &mut tell)
                .await
        } else {
            meta.load_dump(&mut input, &mut tell).await
        };
        drop(view);
        let stats = loaded.map_err(|e| anyhow::anyhow!("load into {meta_url}: {e}"))?;
        report_loaded(&meta, meta_url, &stats).await
    })
}

/// A dump's records to read, and whether it is a binary one: a sealed dump opened with
/// the keys its header names, then gzip or not, told apart by the first bytes.
fn open_dump(raw: Box<dyn Read + Send>, keys: &KeyArgs) -> Result<(Box<dyn BufRead + Send>, bool)> {
    let mut peek = BufReader::with_capacity(1 << 20, raw);
    let head = peek.fill_buf().context("reading the dump")?;
    let mut peek: Box<dyn BufRead + Send> = if is_sealed(head) {
        let header = read_header(&mut peek).context("reading the sealed dump")?;
        let ring = strata_client::keys::sealed_file_keys(&header, &keys.options())?;
        Box::new(BufReader::with_capacity(
            1 << 20,
            SealedReader::new(peek, ring)?,
        ))
    } else {
        Box::new(peek)
    };
    let binary = strata_meta::is_binary(peek.fill_buf().context("reading the dump")?);
    Ok((gunzip_if_gzip(peek)?, binary))
}

/// `input`, decompressed when it is gzip (told by its first bytes).
pub(crate) fn gunzip_if_gzip(
    mut input: Box<dyn BufRead + Send>,
) -> Result<Box<dyn BufRead + Send>> {
    let gzip = input
        .fill_buf()
        .context("reading the dump")?
        .starts_with(&[0x1f, 0x8b]);
    Ok(match gzip {
        true => Box::new(BufReader::new(MultiGzDecoder::new(input))),
        false => input,
    })
}

async fn report_loaded(meta: &Meta, meta_url: &MetaUrl, stats: &DumpStats) -> Result<()> {
    let format = meta.load().await?;
    eprintln!(
        "loaded volume {} ({} inodes, {} entries, {} shared slices)",
        format.name, stats.nodes, stats.entries, stats.slice_refs
    );
    if format.secret_key.is_none() && format.access_key.is_some() {
        eprintln!(
            "the dump holds no secret key: set it with `strata config {meta_url} --secret-key ...`"
        );
    }
    Ok(())
}

/// `load FILE --binary --stat`: what a binary dump holds, checked whole.
fn stat_binary(a: &LoadArgs) -> Result<()> {
    // `load FILE --stat`: the first argument is the dump, not an engine.
    let path = a
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(a.meta_url.expose()));
    let file = File::open(&path).with_context(|| format!("{}", path.display()))?;
    let (input, _) = open_dump(Box::new(file), &a.keys)?;
    let summary =
        strata_meta::binary_dump_summary(input).with_context(|| format!("{}", path.display()))?;
    println!("volume:           {}", summary.volume);
    println!("metadata version: {}", summary.meta_version);
    println!(
        "frames:           {} ({} bytes, {} before compression)",
        summary.frames, summary.stored_bytes, summary.raw_bytes
    );
    for (kind, count) in &summary.records {
        println!("{:<18}{count}", format!("{kind}:"));
    }
    println!("records in all:   {}", summary.end.pairs);
    if summary.out_of_order == 0 {
        println!("out of key order: 0");
    } else {
        println!(
            "out of key order: {} (an older dump's interleaved scans: loads slower into SQLite)",
            summary.out_of_order
        );
    }
    Ok(())
}
