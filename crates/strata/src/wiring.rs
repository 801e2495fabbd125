//! From user input to running parts: META-URL → metadata engine, format record → object
//! store, a tokio runtime for commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use strata_chunk::ChunkStore;
use strata_chunk::cache::NoCache;
use strata_chunk::reader::ChunkOptions;
use strata_meta::kv::KvEngine;
use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::{Format, Meta, MetaError, MetaOptions};
use strata_meta_etcd::{EtcdEngine, EtcdUrl};
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_meta_redis::{RedisEngine, RedisUrl};
use strata_object::ObjectStore;
use strata_object::backend::{Backend, S3Config};
use strata_object::compress::Codec;
use strata_object::prefix::Prefixed;
use strata_object::stack::{StackOptions, build};
use strata_types::{MetaUrl, Secret};
use strata_vfs::{Vfs, VfsOptions};

/// How long opening a network engine may take before the command gives up.
const ENGINE_OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Open the metadata engine named by a META-URL (a password may come from `META_PASSWORD`
/// instead of the URL). Network engines are connected and checked here, in bounded time.
/// Messages show the URL with its password hidden.
pub async fn open_engine(url: &MetaUrl) -> Result<Arc<dyn KvEngine>> {
    let Some((scheme, rest)) = url.expose().split_once("://") else {
        bail!("malformed META-URL {url}: expected e.g. sqlite3://strata.db");
    };
    let full = match std::env::var("META_PASSWORD") {
        Ok(p) if !p.is_empty() => url.with_password(&p),
        _ => url.clone(),
    };
    let opened: Result<Arc<dyn KvEngine>, strata_meta::kv::KvError> = match scheme {
        "sqlite" | "sqlite3" => {
            let path = rest.split('?').next().unwrap_or(rest);
            if path.is_empty() {
                bail!("malformed META-URL {url}: no database path");
            }
            SqliteEngine::open(Path::new(path)).map(|e| Arc::new(e) as Arc<dyn KvEngine>)
        }
        "redis" | "rediss" => {
            let parsed = RedisUrl::parse(full.expose()).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(RedisEngine::connect(&parsed)).await
        }
        "postgres" | "postgresql" => {
            let parsed = PostgresUrl::parse(full.expose()).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(PostgresEngine::connect(&parsed)).await
        }
        "etcd" => {
            let parsed = EtcdUrl::parse(full.expose()).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(EtcdEngine::connect(&parsed)).await
        }
        other => bail!(
            "unknown metadata engine {other:?} in META-URL (supported: sqlite3://PATH, \
             redis://HOST:PORT/DB, postgres://USER@HOST:PORT/DB, etcd://HOST:PORT,.../PREFIX)"
        ),
    };
    opened.map_err(|e| anyhow::anyhow!("cannot open metadata engine {url}: {e}"))
}

async fn timed_open<E: KvEngine + 'static>(
    connecting: impl Future<Output = Result<E, strata_meta::kv::KvError>>,
) -> Result<Arc<dyn KvEngine>, strata_meta::kv::KvError> {
    strata_meta::kv::within(ENGINE_OPEN_TIMEOUT, "the engine", connecting)
        .await
        .map(|e| Arc::new(e) as Arc<dyn KvEngine>)
}

/// The format record as shown to people (`status`, `config`, `.config`): secrets removed.
pub fn shown_format(format: &Format) -> Format {
    let removed = |s: &Option<Secret>| s.as_ref().map(|_| Secret::new("removed"));
    Format {
        secret_key: removed(&format.secret_key),
        session_token: removed(&format.session_token),
        ..format.clone()
    }
}

/// A client of the volume at `url`, its format loaded.
pub async fn load_meta(url: &MetaUrl) -> Result<(Arc<Meta>, Arc<Format>)> {
    load_meta_with(url, MetaOptions::default()).await
}

/// [`load_meta`] with non-default metadata client options.
pub async fn load_meta_with(url: &MetaUrl, opts: MetaOptions) -> Result<(Arc<Meta>, Arc<Format>)> {
    let meta = Meta::new(open_engine(url).await?, opts);
    let format = match meta.load().await {
        Ok(f) => f,
        Err(MetaError::NotFormatted) => {
            bail!("{url}: no volume here; create one with `strata format {url} NAME`")
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read volume at {url}")),
    };
    Ok((Arc::new(meta), format))
}

/// The backend a volume's data lives in.
pub fn open_backend(format: &Format) -> Result<Arc<dyn ObjectStore>> {
    match format.storage.as_str() {
        "file" => {
            let dir = PathBuf::from(&format.bucket);
            Ok(Arc::new(
                Backend::local(&dir).map_err(|e| anyhow::anyhow!("bucket: {e}"))?,
            ))
        }
        "mem" => Ok(Arc::new(Backend::memory())),
        "s3" => {
            let cfg = s3_config(format)?;
            Ok(Arc::new(
                Backend::s3(&cfg).map_err(|e| anyhow::anyhow!("bucket: {e}"))?,
            ))
        }
        other => bail!("unknown storage {other:?} (supported: file, s3, mem)"),
    }
}

/// An S3 bucket URL: path style (`http://host:port/bucket`) or virtual-hosted
/// (`https://BUCKET.s3.REGION.amazonaws.com`, `https://BUCKET.host`: no path).
fn s3_config(format: &Format) -> Result<S3Config> {
    let url = &format.bucket;
    let bad = || {
        anyhow::anyhow!(
            "s3 bucket {url:?}: expected http(s)://host[:port]/bucket or https://bucket.host"
        )
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    let env_region = std::env::var("AWS_REGION").unwrap_or_default();
    let (endpoint, bucket, region, path_style) = if !path.is_empty() {
        (
            format!("{scheme}://{host}"),
            path.to_string(),
            env_region,
            true,
        )
    } else {
        let (bucket, domain) = host.split_once('.').ok_or_else(bad)?;
        let region = aws_region(domain).unwrap_or(env_region);
        (
            url.trim_end_matches('/').to_string(),
            bucket.to_string(),
            region,
            false,
        )
    };
    if bucket.is_empty() || host.is_empty() {
        return Err(bad());
    }
    let session_token = format
        .session_token
        .clone()
        .or_else(|| std::env::var("AWS_SESSION_TOKEN").ok().map(Secret::new));
    Ok(S3Config {
        endpoint,
        region,
        bucket,
        access_key: format.access_key.clone().unwrap_or_default(),
        secret_key: format.secret_key.clone().unwrap_or_default(),
        session_token,
        path_style,
    })
}

/// The region in an AWS S3 host name: `s3.REGION.amazonaws.com`, `s3-REGION.amazonaws.com`.
fn aws_region(domain: &str) -> Option<String> {
    let rest = domain.strip_suffix(".amazonaws.com")?;
    let region = rest
        .strip_prefix("s3.")
        .or_else(|| rest.strip_prefix("s3-"))?;
    let region = region.strip_prefix("dualstack.").unwrap_or(region);
    (!region.is_empty() && !region.contains('.')).then(|| region.to_string())
}

/// A volume opened for an admin command: metadata client, format, and the bucket as raw
/// objects under the volume's prefix (for listing and deleting blocks) and as the full
/// stack (compression, checksums, retries: for reading and writing data).
#[derive(Debug)]
pub struct AdminVolume {
    pub meta: Arc<Meta>,
    pub format: Arc<Format>,
    pub raw: Arc<dyn ObjectStore>,
    pub data: Arc<dyn ObjectStore>,
}

/// Open the volume at `url` and check that its bucket answers.
pub async fn open_admin_volume(url: &MetaUrl) -> Result<AdminVolume> {
    let (meta, format) = load_meta(url).await?;
    let backend = open_backend(&format)?;
    let raw: Arc<dyn ObjectStore> = Arc::new(Prefixed::new(backend.clone(), &format.name));
    backend
        .check()
        .await
        .map_err(|e| anyhow::anyhow!("bucket {}: {e}", format.bucket))?;
    let stack = StackOptions {
        prefix: format.name.clone(),
        compression: Codec::parse(&format.compression).map_err(|e| anyhow::anyhow!("{e}"))?,
        ..StackOptions::default()
    };
    let (data, _) = build(backend, &stack);
    Ok(AdminVolume {
        meta,
        format,
        raw,
        data,
    })
}

impl AdminVolume {
    /// A file-system client of this volume without a mount (no cache, no session), for
    /// commands that read or rewrite file data (compact, gc --compact).
    pub fn vfs(&self) -> Arc<Vfs> {
        let chunk_opts = ChunkOptions {
            block_size: self.format.block_size_kib << 10,
            ..ChunkOptions::default()
        };
        let chunks = ChunkStore::new(self.data.clone(), Arc::new(NoCache::default()), chunk_opts);
        Arc::new(Vfs::new(self.meta.clone(), chunks, VfsOptions::default()))
    }
}

/// A multi-threaded runtime for a command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("strata")
        .build()
        .context("cannot start the async runtime")
}

/// `~/.strata/...`
pub fn home_path(rest: &str) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".strata").join(rest)
}

/// Create `dir` (and missing parents) readable by its owner only (0700): it will hold
/// user data or secrets. An existing directory is left as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Open `path` for appending, creating it readable by its owner only (0600): logs and
/// dumps may hold names and data users consider private.
pub fn open_private_file(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).mode(0o600);
    if append {
        options.append(true);
    } else {
        options.write(true).truncate(true);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3_format(bucket: &str) -> Format {
        Format {
            name: "v".into(),
            uuid: "u".into(),
            storage: "s3".into(),
            bucket: bucket.into(),
            access_key: Some("ak".into()),
            secret_key: Some(Secret::new("sk")),
            session_token: Some(Secret::new("token")),
            block_size_kib: 4096,
            compression: "none".into(),
            trash_days: 0,
            capacity: 0,
            inodes: 0,
            created_at: 0,
            meta_version: 2,
        }
    }

    #[test]
    fn s3_buckets_in_path_and_virtual_hosted_style() {
        let path = s3_config(&s3_format("http://127.0.0.1:9000/data")).unwrap();
        assert_eq!(
            (
                path.endpoint.as_str(),
                path.bucket.as_str(),
                path.path_style
            ),
            ("http://127.0.0.1:9000", "data", true)
        );
        assert_eq!(path.session_token, Some(Secret::new("token")));
        let aws = s3_config(&s3_format("https://my-data.s3.eu-west-2.amazonaws.com")).unwrap();
        assert_eq!(
            (
                aws.endpoint.as_str(),
                aws.bucket.as_str(),
                aws.region.as_str(),
                aws.path_style
            ),
            (
                "https://my-data.s3.eu-west-2.amazonaws.com",
                "my-data",
                "eu-west-2",
                false
            )
        );
        let dashed = s3_config(&s3_format("https://b.s3-us-west-1.amazonaws.com/")).unwrap();
        assert_eq!(
            (dashed.bucket.as_str(), dashed.region.as_str()),
            ("b", "us-west-1")
        );
        let other = s3_config(&s3_format("https://photos.minio.example.com")).unwrap();
        assert_eq!(other.bucket, "photos");
        assert!(!other.path_style);
        assert!(s3_config(&s3_format("https://nodots")).is_err());
        assert!(s3_config(&s3_format("no-scheme/bucket")).is_err());
    }

    #[test]
    fn shown_formats_hold_no_secrets() {
        let shown = serde_json::to_string(&shown_format(&s3_format("http://h/b"))).unwrap();
        assert!(
            !shown.contains("\"sk\"") && !shown.contains("\"token\""),
            "{shown}"
        );
    }
}
