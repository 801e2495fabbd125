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
use strata_vfs::{Vfs, VfsOptions};

/// How long opening a network engine may take before the command gives up.
const ENGINE_OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Open the metadata engine named by a META-URL (a password may come from `META_PASSWORD`
/// instead of the URL). Network engines are connected and checked here, in bounded time.
pub async fn open_engine(url: &str) -> Result<Arc<dyn KvEngine>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("malformed META-URL {url:?}: expected e.g. sqlite3://strata.db");
    };
    let password = std::env::var("META_PASSWORD").ok();
    let full = match &password {
        Some(p) if !p.is_empty() => with_password(url, p),
        _ => url.to_string(),
    };
    let shown = redact_url(url);
    let opened: Result<Arc<dyn KvEngine>, strata_meta::kv::KvError> = match scheme {
        "sqlite" | "sqlite3" => {
            let path = rest.split('?').next().unwrap_or(rest);
            if path.is_empty() {
                bail!("malformed META-URL {url:?}: no database path");
            }
            SqliteEngine::open(Path::new(path)).map(|e| Arc::new(e) as Arc<dyn KvEngine>)
        }
        "redis" | "rediss" => {
            let parsed = RedisUrl::parse(&full).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(RedisEngine::connect(&parsed)).await
        }
        "postgres" | "postgresql" => {
            let parsed = PostgresUrl::parse(&full).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(PostgresEngine::connect(&parsed)).await
        }
        "etcd" => {
            let parsed = EtcdUrl::parse(&full).map_err(|e| anyhow::anyhow!("{e}"))?;
            timed_open(EtcdEngine::connect(&parsed)).await
        }
        other => bail!(
            "unknown metadata engine {other:?} in META-URL (supported: sqlite3://PATH, \
             redis://HOST:PORT/DB, postgres://USER@HOST:PORT/DB, etcd://HOST:PORT,.../PREFIX)"
        ),
    };
    opened.map_err(|e| anyhow::anyhow!("cannot open metadata engine {shown}: {e}"))
}

async fn timed_open<E: KvEngine + 'static>(
    connecting: impl Future<Output = Result<E, strata_meta::kv::KvError>>,
) -> Result<Arc<dyn KvEngine>, strata_meta::kv::KvError> {
    strata_meta::kv::within(ENGINE_OPEN_TIMEOUT, "the engine", connecting)
        .await
        .map(|e| Arc::new(e) as Arc<dyn KvEngine>)
}

/// The `user:password@` part of a URL's authority, and where it sits.
fn userinfo(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')? + start;
    Some((start, at))
}

/// `url` with `password` as its password (kept if the URL already has one).
pub fn with_password(url: &str, password: &str) -> String {
    match userinfo(url) {
        Some((start, at)) if url[start..at].contains(':') => url.to_string(),
        Some((_, at)) => format!("{}:{password}{}", &url[..at], &url[at..]),
        None => match url.find("://") {
            Some(i) => format!("{}:{password}@{}", &url[..i + 3], &url[i + 3..]),
            None => url.to_string(),
        },
    }
}

/// `url` with its password replaced by `****` (for messages and `.config`).
pub fn redact_url(url: &str) -> String {
    match userinfo(url) {
        Some((start, at)) => match url[start..at].find(':') {
            Some(colon) => format!("{}:****{}", &url[..start + colon], &url[at..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// A client of the volume at `url`, its format loaded.
pub async fn load_meta(url: &str) -> Result<(Arc<Meta>, Arc<Format>)> {
    load_meta_with(url, MetaOptions::default()).await
}

/// [`load_meta`] with non-default metadata client options.
pub async fn load_meta_with(url: &str, opts: MetaOptions) -> Result<(Arc<Meta>, Arc<Format>)> {
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

/// `--bucket http://host:port/bucket` (path style) or `https://bucket.host` for S3.
fn s3_config(format: &Format) -> Result<S3Config> {
    let url = &format.bucket;
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("s3 bucket {url:?}: expected http(s)://host[:port]/bucket");
    };
    let (host, bucket) = match rest.split_once('/') {
        Some((host, bucket)) if !bucket.is_empty() => (host, bucket.trim_end_matches('/')),
        _ => bail!("s3 bucket {url:?}: expected http(s)://host[:port]/bucket"),
    };
    Ok(S3Config {
        endpoint: format!("{scheme}://{host}"),
        region: std::env::var("AWS_REGION").unwrap_or_default(),
        bucket: bucket.to_string(),
        access_key: format.access_key.clone().unwrap_or_default(),
        secret_key: format.secret_key.clone().unwrap_or_default(),
        path_style: true,
    })
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
pub async fn open_admin_volume(url: &str) -> Result<AdminVolume> {
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

/// The META-URL of the mount holding `path`, from its root's `.config` (whose hidden
/// password comes from `META_PASSWORD` instead).
pub fn meta_url_of_path(path: &Path) -> Result<String> {
    for dir in path.ancestors() {
        let Ok(text) = std::fs::read_to_string(dir.join(".config")) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(url) = json["meta_url"].as_str() {
            return Ok(url.replace(":****@", "@"));
        }
    }
    bail!("{} is not on a mounted Strata volume", path.display())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_added_and_hidden() {
        assert_eq!(
            with_password("redis://h:6379/1", "pw"),
            "redis://:pw@h:6379/1"
        );
        assert_eq!(
            with_password("postgres://u@h:5432/db", "pw"),
            "postgres://u:pw@h:5432/db"
        );
        assert_eq!(
            with_password("postgres://u:old@h/db", "pw"),
            "postgres://u:old@h/db",
            "a password in the URL wins"
        );
        assert_eq!(redact_url("redis://:pw@h:6379/1"), "redis://:****@h:6379/1");
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:****@h/db?x=a@b"
        );
        assert_eq!(
            redact_url("sqlite3:///var/lib/a.db"),
            "sqlite3:///var/lib/a.db"
        );
        assert_eq!(
            redact_url("etcd://h1:2379,h2:2379/p"),
            "etcd://h1:2379,h2:2379/p"
        );
    }
}
