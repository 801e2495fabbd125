//! From user input to running parts: META-URL → metadata engine, format record → object
//! store, a tokio runtime for commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use strata_meta::kv::KvEngine;
use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::{Format, Meta, MetaError, MetaOptions};
use strata_object::ObjectStore;
use strata_object::backend::{Backend, S3Config};

/// Open the metadata engine named by a META-URL.
pub fn open_engine(url: &str) -> Result<Arc<dyn KvEngine>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("malformed META-URL {url:?}: expected e.g. sqlite3://strata.db");
    };
    match scheme {
        "sqlite" | "sqlite3" => {
            let path = rest.split('?').next().unwrap_or(rest);
            if path.is_empty() {
                bail!("malformed META-URL {url:?}: no database path");
            }
            let engine = SqliteEngine::open(Path::new(path))
                .map_err(|e| anyhow::anyhow!("cannot open metadata engine {url}: {e}"))?;
            Ok(Arc::new(engine))
        }
        "redis" | "rediss" | "postgres" | "postgresql" | "etcd" => {
            bail!("metadata engine {scheme} is not available in this build yet (use sqlite3://)")
        }
        other => bail!("unknown metadata engine {other:?} in META-URL (supported: sqlite3://PATH)"),
    }
}

/// A client of the volume at `url`, its format loaded.
pub async fn load_meta(url: &str) -> Result<(Arc<Meta>, Arc<Format>)> {
    let meta = Meta::new(open_engine(url)?, MetaOptions::default());
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
