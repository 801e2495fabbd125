//! `strata sync SRC DST`: flags (those of `juicefs sync`), addresses turned into
//! endpoints, a live progress line and the summary. The work is `strata-sync`'s.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_client::{Client, ClientOptions};
use strata_object::ObjectStore;
use strata_object::backend::{AzureConfig, Backend, S3Config};
use strata_object::limit::{Limited, Limits};
use strata_object::metered::{Metered, ObjectStats};
use strata_object::retry::{RetryPolicy, Retrying};
use strata_sync::fs::FsEndpoint;
use strata_sync::objects::ObjectEndpoint;
use strata_sync::volume::VolumeEndpoint;
use strata_sync::{Endpoint, Filter, Options, Ranged, Selection, SyncStats};
use strata_types::{MetaUrl, Secret, redact_url};
use strata_vfs::VfsOptions;

use crate::progress::ProgressView;
use crate::units;

#[derive(Debug, Args)]
#[command(after_help = "ADDRESSES (SRC and DST):
  /path, ./path, file:///path      a local directory
  s3://[AK:SK[:TOKEN]@]BUCKET[.ENDPOINT][/PREFIX]
                                   an S3 bucket (AWS when ENDPOINT is left out; credentials
                                   also from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
  minio://[AK:SK@]HOST:PORT/BUCKET[/PREFIX]
                                   an S3-compatible server over http, path-style
  wasb://[ACCOUNT:KEY@]CONTAINER[.ENDPOINT][/PREFIX]
                                   an Azure Blob Storage container (ENDPOINT default
                                   core.windows.net; HOST:PORT is Azurite over http);
                                   also azure://
  strata://NAME/PATH               a Strata volume, opened without a mount; the environment
                                   variable NAME holds its META-URL (as juicefs's jfs://)

An address ending in '/' is a directory: SRC's tree is copied into DST's. Without the
'/', SRC may also name one file (DST is then the file to write, or a directory to put
it in) or, when nothing has that name, a key prefix: `strata sync ./te ./ab` copies
test/a to abst/a and text to abxt. Rules are tried in the order given, the first match
decides (see docs/SYNC.md).

MANY HOSTS:
  strata sync --queue META-URL SRC DST      list, queue the work as tasks in META-URL's
                                            engine (redis://, postgres://, etcd://,
                                            sqlite3://), and work on them too
  strata sync --worker --queue META-URL     on any number of hosts: take tasks until the
                                            job is done (SRC and DST come from the job)")]
pub struct SyncArgs {
    /// Where to copy from
    #[arg(required_unless_present = "worker")]
    pub src: Option<String>,
    /// Where to copy to
    #[arg(required_unless_present = "worker")]
    pub dst: Option<String>,
    /// Copy keys matching PATTERN even if a later --exclude matches (order matters)
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Leave out keys matching PATTERN (order matters)
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Match rules against whole keys once, instead of level by level like rsync
    #[arg(long)]
    pub match_full_path: bool,
    /// Only files at least this big: 1K, 10M, 1G (a plain number is bytes)
    #[arg(long, value_parser = bytes)]
    pub min_size: Option<u64>,
    /// Only files at most this big
    #[arg(long, value_parser = bytes)]
    pub max_size: Option<u64>,
    /// Only files modified at least this long ago: 30s, 10m, 2h, 7d
    #[arg(long, value_parser = units::parse_duration)]
    pub min_age: Option<Duration>,
    /// Only files modified at most this long ago
    #[arg(long, value_parser = units::parse_duration)]
    pub max_age: Option<Duration>,
    /// Only files modified at or after TIME: "2006-01-02 15:04:05" (local time), or with
    /// an offset ("... +08:00", "...Z")
    #[arg(long, value_name = "TIME", value_parser = crate::sync_time::parse_time)]
    pub start_time: Option<i64>,
    /// Only files modified at or before TIME
    #[arg(long, value_name = "TIME", value_parser = crate::sync_time::parse_time)]
    pub end_time: Option<i64>,
    /// The first key to sync (keys before it are neither copied nor deleted)
    #[arg(short, long, value_name = "KEY")]
    pub start: Option<String>,
    /// The last key to sync
    #[arg(short, long, value_name = "KEY")]
    pub end: Option<String>,
    /// Look at no more than N source keys, in key order (-1: all)
    #[arg(long, value_name = "N", default_value_t = -1, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(-1..))]
    pub limit: i64,
    /// Copy a file the destination has when the source's is newer (skip it when older)
    #[arg(short, long)]
    pub update: bool,
    /// Copy every file, whatever the destination has
    #[arg(short, long)]
    pub force_update: bool,
    /// Only update files the destination has; copy no new ones
    #[arg(long)]
    pub existing: bool,
    /// Leave alone every file the destination has
    #[arg(long)]
    pub ignore_existing: bool,
    /// Make directories, empty ones too (where the destination has directories)
    #[arg(long)]
    pub dirs: bool,
    /// Keep mode, owner and group
    #[arg(long)]
    pub perms: bool,
    /// Copy symlinks as symlinks (without it, what they point to is copied)
    #[arg(short, long)]
    pub links: bool,
    /// Delete each source file once the destination has it
    #[arg(long)]
    pub delete_src: bool,
    /// Delete destination files the source does not have
    #[arg(long)]
    pub delete_dst: bool,
    /// Read back every new copy and compare it with its source
    #[arg(long)]
    pub check_new: bool,
    /// Compare the contents of files whose sizes agree, and copy those that differ
    #[arg(long)]
    pub check_all: bool,
    /// Look at each copied file's source again after the copy: one that changed
    /// meanwhile (size or modification time) fails, to be copied again by the next run
    #[arg(long)]
    pub check_change: bool,
    /// Print what would be done (one line per key on stdout), do nothing
    #[arg(long)]
    pub dry: bool,
    /// Files copied at once
    #[arg(short = 'p', long, default_value_t = 10)]
    pub threads: usize,
    /// Directories read at once while listing a local directory or a volume, ahead of
    /// the walk (object stores list one page after another; JuiceFS's default is 1)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub list_threads: u64,
    /// Bandwidth limit in Mbps (0: none)
    #[arg(long, default_value_t = 0)]
    pub bwlimit: u64,
    /// Only the keys listed in FILE, one per line (a line ending in / stands for a directory)
    #[arg(long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,
    /// Stop at the first key that fails (by default the run goes on and fails at the end)
    #[arg(long)]
    pub fail_fast: bool,
    /// Stop once more than N keys failed (-1: never)
    #[arg(long, value_name = "N", default_value_t = -1, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(-1..))]
    pub max_failure: i64,
    /// Reach s3:// endpoints over http (minio:// addresses always use http)
    #[arg(long)]
    pub no_https: bool,
    /// Share the run with workers on other hosts through tasks kept in this metadata engine
    /// (the job's addresses, credentials included, are stored there)
    #[arg(long, value_name = "META-URL")]
    pub queue: Option<String>,
    /// Work on the job in --queue (started by `strata sync --queue META-URL SRC DST`)
    /// until it is done
    #[arg(long, requires = "queue")]
    pub worker: bool,
    /// With --queue: how long a worker that stops answering keeps its tasks before
    /// others take them over
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration, default_value = "30s")]
    pub lease: Duration,
}

fn bytes(text: &str) -> Result<u64, String> {
    units::parse_size(text, 1)
}

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
        Some(path) => Some(read_key_list(path)?),
        None => None,
    };
    let opts = options(&a);
    refuse_dst_inside_src(src_addr, dst_addr)?;
    let mut clients = Vec::new();
    let how = OpenHow::of(&a);
    let pair = crate::sync_shape::open_pair(src_addr, dst_addr, how, None, &mut clients).await;
    let pair = match pair {
        Ok(pair) => pair,
        Err(e) => {
            close_all(clients).await;
            return Err(e);
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

/// Close the volumes a run opened.
pub(crate) async fn close_all(clients: Vec<(String, Client)>) {
    for (_, client) in clients {
        if let Err(e) = client.close().await {
            tracing::error!("closing the volume: {e}");
        }
    }
}

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

fn read_key_list(path: &PathBuf) -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--files-from {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.trim().trim_start_matches('/'))
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// The endpoint an address names; volumes opened are kept in `clients` to be closed.
/// A local DST inside a local SRC would be copied into itself.
fn refuse_dst_inside_src(src: &str, dst: &str) -> Result<()> {
    let local = |addr: &str| {
        let path = addr.strip_prefix("file://").unwrap_or(addr);
        (!path.contains("://")).then(|| PathBuf::from(path))
    };
    let (Some(src), Some(dst)) = (local(src), local(dst)) else {
        return Ok(());
    };
    let Ok(src) = src.canonicalize() else {
        return Ok(());
    };
    let dst = std::path::absolute(&dst).unwrap_or(dst);
    let dst = resolve_existing_part(&dst);
    if dst != src && dst.starts_with(&src) {
        bail!(
            "DST {} is inside SRC {}: the copy would copy itself",
            dst.display(),
            src.display()
        );
    }
    Ok(())
}

/// `path` with its longest existing ancestor resolved (symlinks, `..`).
fn resolve_existing_part(path: &std::path::Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// How endpoints are opened: symlinks kept (`--links`), and requests sized for `threads`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenHow {
    pub links: bool,
    pub threads: usize,
    /// Directories read at once while listing (`--list-threads`).
    pub list_threads: usize,
    /// `s3://` endpoints over http (`--no-https`).
    pub no_https: bool,
}

impl OpenHow {
    fn of(a: &SyncArgs) -> OpenHow {
        OpenHow {
            links: a.links,
            threads: a.threads.max(1),
            list_threads: usize::try_from(a.list_threads).unwrap_or(1),
            no_https: a.no_https,
        }
    }
}

pub(crate) async fn open(
    addr: &str,
    a: OpenHow,
    is_dst: bool,
    clients: &mut Vec<(String, Client)>,
) -> Result<Arc<dyn Endpoint>> {
    let side = if is_dst { "DST" } else { "SRC" };
    let shown = redact_url(addr);
    if let Some(rest) = addr.strip_prefix("strata://") {
        let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
        if let Some((_, client)) = clients.iter().find(|(n, _)| n == name) {
            let ep = VolumeEndpoint::open(client.vfs.clone(), name, path, a.links, is_dst)
                .await
                .map(|ep| ep.with_list_threads(a.list_threads));
            return Ok(Arc::new(ep.with_context(|| format!("{side} {addr}"))?));
        }
        let url = std::env::var(name).with_context(|| {
            format!("{side} {addr}: set the environment variable {name} to the volume's META-URL")
        })?;
        let url = MetaUrl::new(url);
        let opts = ClientOptions {
            cache_size: 0,
            no_bgjob: true,
            ..ClientOptions::default()
        };
        let client = Client::open(&url, &opts, VfsOptions::default(), "sync")
            .await
            .with_context(|| format!("{side} {addr}"))?;
        let ep = VolumeEndpoint::open(client.vfs.clone(), name, path, a.links, is_dst)
            .await
            .map(|ep| ep.with_list_threads(a.list_threads));
        clients.push((name.to_string(), client));
        return Ok(Arc::new(ep.with_context(|| format!("{side} {addr}"))?));
    }
    if addr.starts_with("s3://") || addr.starts_with("minio://") {
        let (cfg, prefix) =
            s3_address(addr, a.no_https).with_context(|| format!("{side} {shown}"))?;
        let store = object_store(&cfg, a)
            .await
            .with_context(|| format!("{side} {shown}"))?;
        return Ok(Arc::new(ObjectEndpoint::new(store, &prefix)));
    }
    if addr.starts_with("wasb://") || addr.starts_with("azure://") {
        let (cfg, prefix) = azure_address(addr).with_context(|| format!("{side} {shown}"))?;
        let backend = Backend::azure(&cfg).with_context(|| format!("{side} {shown}"))?;
        let store = wrapped(backend, a)
            .await
            .with_context(|| format!("{side} {shown}"))?;
        return Ok(Arc::new(ObjectEndpoint::new(store, &prefix)));
    }
    if let Some((scheme, _)) = addr.split_once("://")
        && scheme != "file"
    {
        bail!("{side} {shown}: unknown address kind {scheme}:// (file, s3, minio, wasb or strata)");
    }
    let path = PathBuf::from(addr.strip_prefix("file://").unwrap_or(addr));
    Ok(Arc::new(
        FsEndpoint::open(&path, a.links, is_dst)
            .with_context(|| format!("{side} {addr}"))?
            .with_list_threads(a.list_threads),
    ))
}

/// An S3 store with retries and request limits, counted (not shown: the summary counts
/// files, not requests), once it answered (without retries: a wrong address or key is
/// reported at once).
async fn object_store(cfg: &S3Config, a: OpenHow) -> Result<Arc<dyn ObjectStore>> {
    wrapped(Backend::s3(cfg)?, a).await
}

/// `backend` with retries and request limits, counted, once it answered.
async fn wrapped(backend: Backend, a: OpenHow) -> Result<Arc<dyn ObjectStore>> {
    backend.check().await?;
    let limits = Limits {
        max_uploads: a.threads.max(1) * 4,
        max_downloads: a.threads.max(1) * 4,
        ..Limits::default()
    };
    let metered = Metered::new(
        Limited::new(backend, limits),
        Arc::new(ObjectStats::default()),
    );
    Ok(Arc::new(Retrying::new(metered, RetryPolicy::default())))
}

/// `s3://[AK:SK[:TOKEN]@]BUCKET[.ENDPOINT][/PREFIX]` or
/// `minio://[AK:SK@]HOST:PORT/BUCKET[/PREFIX]`, as a store and a key prefix.
fn s3_address(addr: &str, no_https: bool) -> Result<(S3Config, String)> {
    let scheme = addr.split_once("://").map_or("s3", |(s, _)| s);
    let (userinfo, rest) = split_userinfo(addr);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() {
        bail!("no bucket");
    }
    let mut cfg = S3Config::default();
    if let Some(u) = userinfo {
        let (access_key, secret) = u.split_once(':').unwrap_or((u, ""));
        let secret = crate::hide_args::revealed_address_secret(secret);
        let (secret_key, token) = match secret.split_once(':') {
            Some((key, token)) => (key, Some(token)),
            None => (secret.as_str(), None),
        };
        cfg.access_key = unescape(access_key);
        cfg.secret_key = Secret::new(unescape(secret_key));
        cfg.session_token = token.map(|t| Secret::new(unescape(t)));
    }
    let prefix = if scheme == "minio" {
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            bail!("expected minio://HOST:PORT/BUCKET[/PREFIX]");
        }
        cfg.endpoint = format!("http://{host}");
        cfg.bucket = bucket.to_string();
        cfg.path_style = true;
        prefix.to_string()
    } else {
        match host.split_once('.') {
            Some((bucket, endpoint)) => {
                cfg.bucket = bucket.to_string();
                let scheme = if no_https { "http" } else { "https" };
                cfg.endpoint = format!("{scheme}://{host}");
                cfg.region = aws_region(endpoint).unwrap_or_default();
            }
            None => cfg.bucket = host.to_string(),
        }
        path.to_string()
    };
    Ok((cfg, prefix))
}

/// An address's `AK:SK@` (by the rule that hides it: a key may hold `/`) and what follows
/// it, without the scheme.
fn split_userinfo(addr: &str) -> (Option<&str>, &str) {
    match strata_types::userinfo_bounds(addr) {
        Some((start, at)) => (Some(&addr[start..at]), &addr[at + 1..]),
        None => (None, addr.split_once("://").map_or(addr, |(_, r)| r)),
    }
}

/// `wasb://[ACCOUNT:KEY@]CONTAINER[.ENDPOINT][/PREFIX]` as a container and a key prefix:
/// ENDPOINT defaults to `core.windows.net`; one with a port (`127.0.0.1:10000`) is an
/// Azurite server over http, the account in its path.
fn azure_address(addr: &str) -> Result<(AzureConfig, String)> {
    let (userinfo, rest) = split_userinfo(addr);
    let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let (account, key) = match userinfo {
        Some(u) => {
            let (account, key) = u.split_once(':').unwrap_or((u, ""));
            let key = crate::hide_args::revealed_address_secret(key);
            (unescape(account), Secret::new(unescape(&key)))
        }
        None => (
            std::env::var("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_default(),
            Secret::new(std::env::var("AZURE_STORAGE_ACCOUNT_KEY").unwrap_or_default()),
        ),
    };
    let (container, endpoint) = host.split_once('.').unwrap_or((host, "core.windows.net"));
    if container.is_empty() {
        bail!("no container");
    }
    let url = if endpoint.contains(':') {
        format!("http://{endpoint}/{account}/{container}")
    } else {
        format!("https://{container}.{endpoint}")
    };
    Ok((
        strata_client::azure_config(&url, &account, key)?,
        prefix.to_string(),
    ))
}

/// The region in `s3.REGION.amazonaws.com` / `s3-REGION.amazonaws.com`.
fn aws_region(endpoint: &str) -> Option<String> {
    let inner = endpoint.strip_suffix(".amazonaws.com")?;
    let region = inner
        .strip_prefix("s3.")
        .or_else(|| inner.strip_prefix("s3-"))?;
    (!region.is_empty()).then(|| region.to_string())
}

/// `%2F` and friends, as JuiceFS addresses write special characters in keys.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_addresses_read_like_juicefs_ones() {
        let (c, p) = s3_address("minio://ak:s%2Fk@127.0.0.1:9000/bkt/a/b", false).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.bucket.as_str(), p.as_str()),
            ("http://127.0.0.1:9000", "bkt", "a/b")
        );
        assert_eq!(
            (c.access_key.as_str(), c.secret_key.expose()),
            ("ak", "s/k")
        );
        assert!(c.path_style);
        let (c, p) = s3_address("s3://bkt.s3.us-east-2.amazonaws.com/x", false).unwrap();
        assert_eq!(
            (c.bucket.as_str(), c.region.as_str(), p.as_str()),
            ("bkt", "us-east-2", "x")
        );
        assert!(!c.path_style);
        let (c, p) = s3_address("s3://bkt", false).unwrap();
        assert_eq!(
            (c.bucket.as_str(), c.endpoint.as_str(), p.as_str()),
            ("bkt", "", "")
        );
        assert!(s3_address("minio://host:1/", false).is_err());
        let (c, _) = s3_address("s3://bkt.s3.us-east-2.amazonaws.com/x", false).unwrap();
        assert_eq!(c.endpoint, "https://bkt.s3.us-east-2.amazonaws.com");
        let (c, _) = s3_address("s3://bkt.127.0.0.1:9000/x", true).unwrap();
        assert_eq!(c.endpoint, "http://bkt.127.0.0.1:9000");
    }

    #[test]
    fn azure_addresses_name_azure_or_azurite() {
        let (c, p) = azure_address("wasb://acct:a2V5@box/in/here").unwrap();
        assert_eq!(
            (
                c.account.as_str(),
                c.container.as_str(),
                c.endpoint.as_str()
            ),
            ("acct", "box", "https://acct.blob.core.windows.net")
        );
        assert_eq!((c.key.expose(), p.as_str()), ("a2V5", "in/here"));
        let (c, _) = azure_address("wasb://acct:a/b+c==@box/x").unwrap();
        assert_eq!(
            c.key.expose(),
            "a/b+c==",
            "a key holding / needs no escaping"
        );
        let (c, p) = azure_address("azure://dev:k@box.127.0.0.1:10000").unwrap();
        assert_eq!(
            (c.container.as_str(), c.endpoint.as_str(), p.as_str()),
            ("box", "http://127.0.0.1:10000/dev", "")
        );
        assert!(azure_address("wasb://a:k@/x").is_err());
    }
}
