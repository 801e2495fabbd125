//! `strata format`, `strata status` and `strata config`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::{Format, META_VERSION, Meta, MetaError, MetaOptions};
use strata_types::{MetaUrl, Secret};

use crate::hide_args::revealed;
use crate::{units, wiring};

/// The object store's credentials, as `format` and `objbench` take them.
#[derive(Debug, Args)]
pub struct StoreKeys {
    /// Access key for the object storage
    #[arg(long, env = "ACCESS_KEY")]
    access_key: Option<String>,
    /// Secret key for the object storage (also SECRET_KEY; hidden from `ps` at start)
    #[arg(long, env = "SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    /// Session token of temporary credentials (also SESSION_TOKEN)
    #[arg(long, env = "SESSION_TOKEN", hide_env_values = true)]
    session_token: Option<String>,
}

/// The settings of a new volume in `storage`/`bucket` with `keys`; the rest defaults
/// (block size 4 MiB, no compression, trash 1 day, no limits).
pub fn new_format(name: &str, storage: &str, bucket: String, keys: &StoreKeys) -> Format {
    Format {
        name: name.to_string(),
        uuid: uuid::Uuid::new_v4().to_string(),
        storage: storage.to_string(),
        bucket,
        access_key: keys.access_key.clone(),
        secret_key: revealed(keys.secret_key.clone(), "--secret-key").map(Secret::new),
        session_token: revealed(keys.session_token.clone(), "--session-token").map(Secret::new),
        block_size_kib: 4096,
        compression: "none".into(),
        trash_days: 1,
        capacity: 0,
        inodes: 0,
        created_at: strata_meta::now_ns() / 1_000_000_000,
        meta_version: META_VERSION,
        enable_acl: false,
    }
}

#[derive(Debug, Args)]
pub struct FormatArgs {
    /// Metadata engine URL, e.g. sqlite3://strata.db
    meta_url: MetaUrl,
    /// Volume name: 3-63 characters of a-z, 0-9 and '-'
    name: String,
    /// Object storage: file, s3, wasb (Azure Blob Storage; also azure) or mem
    #[arg(long, default_value = "file")]
    storage: String,
    /// Bucket: a directory for file storage (default ~/.strata/local, created 0700); for
    /// s3 an URL, path style (http://host:port/bucket) or virtual-hosted
    /// (https://BUCKET.s3.REGION.amazonaws.com); for wasb https://CONTAINER.core.windows.net
    /// (the access key is the storage account) or http://HOST:PORT/ACCOUNT/CONTAINER
    /// (Azurite)
    #[arg(long)]
    bucket: Option<String>,
    #[command(flatten)]
    keys: StoreKeys,
    /// Block size: 4M, 1M, 64K, ... (a plain number is KiB; a power of two, 64K-16M)
    #[arg(long, default_value = "4M", value_parser = units::kib)]
    block_size: u64,
    /// Compression: none, lz4 or zstd
    #[arg(long, default_value = "none")]
    compress: String,
    /// Days deleted files stay in .trash (0 disables the trash) [default: 1, or unchanged]
    #[arg(long)]
    trash_days: Option<u32>,
    /// Capacity limit: 10T, 500G, ... (a plain number is GiB; 0 = unlimited) [default: 0,
    /// or unchanged]
    #[arg(long, value_parser = units::gib)]
    capacity: Option<u64>,
    /// Inode limit (0 = unlimited) [default: 0, or unchanged]
    #[arg(long)]
    inodes: Option<u64>,
    /// Keep and enforce POSIX access control lists (setfacl/getfacl, default lists that
    /// new files inherit). Cannot be turned off again; clients older than metadata
    /// version 5 then refuse the volume
    #[arg(long)]
    enable_acl: bool,
    /// Overwrite the settings of an existing volume even if they differ
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Metadata engine URL
    meta_url: MetaUrl,
    /// New trash days (0 disables the trash)
    #[arg(long)]
    trash_days: Option<u32>,
    /// New capacity limit: 10T, 500G, ... (a plain number is GiB; 0 = unlimited)
    #[arg(long, value_parser = units::gib)]
    capacity: Option<u64>,
    /// New inode limit (0 = unlimited)
    #[arg(long)]
    inodes: Option<u64>,
    /// New access key for the object storage
    #[arg(long)]
    access_key: Option<String>,
    /// New secret key for the object storage
    #[arg(long, hide_env_values = true)]
    secret_key: Option<String>,
    /// New session token of temporary credentials
    #[arg(long, hide_env_values = true)]
    session_token: Option<String>,
    /// Turn on POSIX access control lists (cannot be turned off again; clients older
    /// than metadata version 5 then refuse the volume)
    #[arg(long)]
    enable_acl: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Metadata engine URL
    meta_url: MetaUrl,
    /// Show one session in detail: its client, the inodes it keeps alive (open after
    /// their last unlink) and those it holds locks on
    #[arg(long, value_name = "SID")]
    session: Option<u64>,
}

/// The bucket a new volume uses: as given, or the default for file and mem storage; a
/// file bucket's directory is created (0700) and named by its absolute path.
pub fn new_bucket(bucket: Option<&str>, storage: &str) -> Result<String> {
    let bucket = match (bucket, storage) {
        (Some(b), _) => b.to_string(),
        (None, "file") => wiring::home_path("local").to_string_lossy().into_owned(),
        (None, "mem") => "mem".into(),
        (None, other) => bail!("--bucket is required for {other} storage"),
    };
    if storage != "file" {
        return Ok(bucket);
    }
    // Like JuiceFS, format creates the local bucket directory: readable by its owner
    // only, for it holds every file's data.
    wiring::create_private_dir(Path::new(&bucket))
        .with_context(|| format!("cannot create bucket directory {bucket}"))?;
    Ok(std::fs::canonicalize(&bucket)?
        .to_string_lossy()
        .into_owned())
}

pub fn run_format(a: FormatArgs) -> Result<()> {
    let bucket = new_bucket(a.bucket.as_deref(), &a.storage)?;
    let mut format = Format {
        block_size_kib: block_size_kib(a.block_size)?,
        compression: a.compress.clone(),
        trash_days: a.trash_days.unwrap_or(1),
        capacity: a.capacity.unwrap_or(0),
        inodes: a.inodes.unwrap_or(0),
        enable_acl: a.enable_acl,
        ..new_format(&a.name, &a.storage, bucket, &a.keys)
    };
    let rt = wiring::runtime()?;
    rt.block_on(async {
        // The bucket must answer before the volume is recorded.
        let backend = wiring::open_backend(&format)?;
        if matches!(format.storage.as_str(), "s3" | "wasb" | "azure") {
            check_store(&backend).await?;
        }
        let meta = Meta::new(
            wiring::open_engine(&a.meta_url).await?,
            MetaOptions::default(),
        );
        // Reformatting an existing volume changes only the settings given on the command line.
        if let Ok(old) = meta.load().await {
            format.trash_days = a.trash_days.unwrap_or(old.trash_days);
            format.capacity = a.capacity.unwrap_or(old.capacity);
            format.inodes = a.inodes.unwrap_or(old.inodes);
        }
        let stored = match meta.format(&format, a.force).await {
            Ok(f) => f,
            Err(MetaError::FormatMismatch(d)) => {
                bail!(
                    "{} is already formatted with other settings ({d}); use --force to overwrite",
                    a.meta_url
                )
            }
            Err(e) => return Err(anyhow::anyhow!("{e}")),
        };
        println!(
            "volume {} ({}) formatted: storage {} bucket {}",
            stored.name, stored.uuid, stored.storage, stored.bucket
        );
        Ok(())
    })
}

/// `--block-size` in KiB, as the format record keeps it.
fn block_size_kib(bytes: u64) -> Result<u32> {
    if !bytes.is_multiple_of(1024) {
        bail!("--block-size {bytes} bytes: use whole KiB (e.g. 4M, 1M, 64K)");
    }
    u32::try_from(bytes >> 10).context("--block-size is too large")
}

async fn check_store(store: &std::sync::Arc<dyn strata_object::ObjectStore>) -> Result<()> {
    store
        .check()
        .await
        .map_err(|e| anyhow::anyhow!("bucket: {e}"))
}

pub fn run_status(a: StatusArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, format) = wiring::load_meta(&a.meta_url).await?;
        if let Some(sid) = a.session {
            return show_session(&meta, sid).await;
        }
        let shown = wiring::shown_format(&format);
        let sessions = meta.list_sessions().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let out = serde_json::json!({ "setting": shown, "sessions": sessions.iter().map(|s| serde_json::json!({
            "sid": s.sid, "host": s.host, "pid": s.pid, "mount_point": s.mount_point,
            "version": s.version, "expires_at_ns": s.expires_at,
        })).collect::<Vec<_>>() });
        println!("{}", serde_json::to_string_pretty(&out)?);
        Ok(())
    })
}

/// `strata status --session SID`.
async fn show_session(meta: &strata_meta::Meta, sid: u64) -> Result<()> {
    let Some(d) = meta
        .session_detail(sid)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?
    else {
        bail!("no session {sid} (`strata status META-URL` lists them)");
    };
    let s = &d.info;
    let inos = |v: &[strata_types::Ino]| v.iter().map(|i| i.0).collect::<Vec<_>>();
    let out = serde_json::json!({
        "sid": s.sid, "host": s.host, "pid": s.pid, "mount_point": s.mount_point,
        "version": s.version, "started_at_ns": s.started_at, "expires_at_ns": s.expires_at,
        "cache_group": s.cache_group,
        "sustained_inodes": inos(&d.sustained),
        "locked_inodes": inos(&d.locked),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `strata config`: show the settings, or change the mutable ones given as flags.
pub fn run_config(a: ConfigArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, format) = wiring::load_meta(&a.meta_url).await?;
        let mut changed = (*format).clone();
        if let Some(days) = a.trash_days {
            changed.trash_days = days;
        }
        if let Some(bytes) = a.capacity {
            changed.capacity = bytes;
        }
        if let Some(n) = a.inodes {
            changed.inodes = n;
        }
        if a.enable_acl {
            changed = changed.with_acl(true);
        }
        if a.access_key.is_some() {
            changed.access_key = a.access_key.clone();
        }
        if let Some(key) = revealed(a.secret_key.clone(), "--secret-key") {
            changed.secret_key = Some(Secret::new(key));
        }
        if let Some(token) = revealed(a.session_token.clone(), "--session-token") {
            changed.session_token = Some(Secret::new(token));
        }
        let shown = if changed != *format {
            let stored = meta
                .format(&changed, false)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("settings of {} updated", stored.name);
            stored
        } else {
            changed
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&wiring::shown_format(&shown))?
        );
        Ok(())
    })
}
