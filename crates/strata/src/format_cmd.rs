//! `strata format`, `strata status` and `strata config`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::{Format, META_VERSION, Meta, MetaError, MetaOptions};
use strata_types::{MetaUrl, Secret};

use crate::hide_args::revealed;
use crate::key_args::KeyArgs;
use crate::{units, wiring};
use strata_client::keys::{self as volume_keys, NewWrapping};
use strata_object::seal::Cipher;

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
        encryption: None,
        foreign: None,
        stores: Vec::new(),
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
    /// Encrypt data at rest, its data key wrapped by this RSA private key (PEM; a
    /// protected key's passphrase comes from JFS_RSA_PASSPHRASE). Keep the key and its
    /// passphrase safe: without them the data cannot be read
    #[arg(long, value_name = "FILE", help_heading = "Encryption")]
    encrypt_rsa_key: Option<PathBuf>,
    /// Cipher of an encrypted volume: aes256gcm-rsa or chacha20-rsa (the -rsa suffix is
    /// optional; the wrapping follows the key flags)
    #[arg(long, default_value = "aes256gcm-rsa", help_heading = "Encryption")]
    encrypt_algo: String,
    /// Or encrypt with a key-encryption key (32 bytes) from a file, a variable or a
    /// command: --encrypt-key-file, --encrypt-key-env, --encrypt-key-cmd
    #[command(flatten)]
    kek: KeyArgs,
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
    /// Encrypted volumes: wrap the data keys anew with the key given by
    /// --new-encrypt-key-file/-env/-cmd or --new-encrypt-rsa-key (the current one comes
    /// from --encrypt-key-* or JFS_RSA_PASSPHRASE); no data is rewritten
    #[arg(long, help_heading = "Encryption")]
    rotate_kek: bool,
    /// Encrypted volumes: seal new data with a new data key (cipher from
    /// --encrypt-algo); data written before keeps its key
    #[arg(long, help_heading = "Encryption")]
    rotate_data_key: bool,
    /// The new data key's cipher with --rotate-data-key [default: the current key's]
    #[arg(long, help_heading = "Encryption")]
    encrypt_algo: Option<String>,
    /// The new key-encryption key's file, for --rotate-kek
    #[arg(long, value_name = "FILE", help_heading = "Encryption")]
    new_encrypt_key_file: Option<PathBuf>,
    /// The variable holding the new key-encryption key, for --rotate-kek
    #[arg(long, value_name = "VAR", help_heading = "Encryption")]
    new_encrypt_key_env: Option<String>,
    /// The command printing the new key-encryption key, for --rotate-kek
    #[arg(long, value_name = "COMMAND", help_heading = "Encryption")]
    new_encrypt_key_cmd: Option<String>,
    /// The new RSA private key, for --rotate-kek (its passphrase from
    /// STRATA_NEW_RSA_PASSPHRASE, else JFS_RSA_PASSPHRASE)
    #[arg(long, value_name = "FILE", help_heading = "Encryption")]
    new_encrypt_rsa_key: Option<PathBuf>,
    #[command(flatten)]
    kek: KeyArgs,
    #[command(flatten)]
    store: AddStoreArgs,
}

/// Another store for the volume's data (docs/PLACEMENT.md).
#[derive(Debug, Args)]
struct AddStoreArgs {
    /// Add a store called NAME (tier policies name it); its place comes from
    /// --store-storage, --store-bucket and its keys from --store-access-key and
    /// --store-secret-key
    #[arg(long, value_name = "NAME", help_heading = "Stores")]
    add_store: Option<String>,
    /// The added store's kind: file, s3, azure
    #[arg(
        long,
        default_value = "file",
        requires = "add_store",
        help_heading = "Stores"
    )]
    store_storage: String,
    /// The added store's bucket (a directory for `file`, a URL for s3 and azure)
    #[arg(long, requires = "add_store", help_heading = "Stores")]
    store_bucket: Option<String>,
    /// The added store's access key
    #[arg(long, requires = "add_store", help_heading = "Stores")]
    store_access_key: Option<String>,
    /// The added store's secret key (or STRATA_STORE_SECRET_KEY)
    #[arg(
        long,
        env = "STRATA_STORE_SECRET_KEY",
        hide_env_values = true,
        requires = "add_store",
        help_heading = "Stores"
    )]
    store_secret_key: Option<String>,
    /// The storage class of the added store's objects, recorded and shown (e.g. GLACIER_IR)
    #[arg(long, requires = "add_store", help_heading = "Stores")]
    store_class: Option<String>,
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
        let wrapping = new_wrapping(&a)?;
        if let Ok(old) = meta.load().await {
            format.trash_days = a.trash_days.unwrap_or(old.trash_days);
            format.capacity = a.capacity.unwrap_or(old.capacity);
            format.inodes = a.inodes.unwrap_or(old.inodes);
            if wrapping.is_some() {
                bail!(
                    "{} already holds volume {}: encryption is chosen when a volume is \
                     created (`strata config --rotate-kek` changes an encrypted volume's key)",
                    a.meta_url,
                    old.name
                );
            }
        } else if let Some(how) = &wrapping {
            let cipher = Cipher::parse(&a.encrypt_algo).map_err(|e| anyhow::anyhow!("{e}"))?;
            let record = volume_keys::new_encryption(&format.uuid, cipher, how)?;
            format = format.with_encryption(Some(record));
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
        if let Some(e) = &stored.encryption {
            println!(
                "data is encrypted ({}, data key wrapped by {}): back up the {} — without \
                 it nothing in the volume can be read",
                e.keys.first().map_or("?", |k| k.cipher.as_str()),
                if e.wrapping == "rsa" {
                    "the RSA key"
                } else {
                    "the key-encryption key"
                },
                if e.wrapping == "rsa" {
                    "RSA key and its passphrase"
                } else {
                    "key-encryption key"
                },
            );
        }
        Ok(())
    })
}

/// How `format` is asked to wrap a new volume's data key, if it is to be encrypted.
fn new_wrapping(a: &FormatArgs) -> Result<Option<NewWrapping>> {
    wrapping_from(
        a.encrypt_rsa_key.as_deref(),
        a.kek.source(),
        "JFS_RSA_PASSPHRASE",
    )
}

/// An RSA key file or a KEK source (not both) as a wrapping; the RSA key's passphrase from
/// the variable `pass_var`.
fn wrapping_from(
    rsa: Option<&Path>,
    kek: Option<strata_client::KekSource>,
    pass_var: &str,
) -> Result<Option<NewWrapping>> {
    match (rsa, kek) {
        (Some(_), Some(_)) => {
            bail!("give an RSA key or a key-encryption key, not both")
        }
        (Some(path), None) => {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("RSA key {}", path.display()))?;
            let passphrase = std::env::var(pass_var).ok().map(Secret::new);
            Ok(Some(NewWrapping::Rsa {
                pem: Secret::new(pem),
                passphrase,
            }))
        }
        (None, Some(source)) => Ok(Some(NewWrapping::Kek(source))),
        (None, None) => Ok(None),
    }
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

/// The encryption record after `--rotate-kek` and/or `--rotate-data-key`.
fn rotated_keys(a: &ConfigArgs, format: &Format) -> Result<strata_meta::Encryption> {
    let Some(record) = &format.encryption else {
        bail!(
            "volume {} is not encrypted: it has no keys to rotate",
            format.name
        );
    };
    let wrapper = volume_keys::open_wrapper(record, &a.kek.options())?;
    let mut record = record.clone();
    if a.rotate_data_key {
        let current = record.keys.iter().find(|k| k.id == record.current_key);
        let name = a
            .encrypt_algo
            .clone()
            .or_else(|| current.map(|k| k.cipher.clone()))
            .unwrap_or_else(|| "aes256gcm".into());
        let cipher = Cipher::parse(&name).map_err(|e| anyhow::anyhow!("{e}"))?;
        record = volume_keys::add_data_key(&record, &format.uuid, &wrapper, cipher)?;
        println!(
            "new data is sealed with data key {} ({})",
            record.current_key,
            cipher.name()
        );
    }
    if a.rotate_kek {
        let new_kek = KeyArgs {
            encrypt_key_file: a.new_encrypt_key_file.clone(),
            encrypt_key_env: a.new_encrypt_key_env.clone(),
            encrypt_key_cmd: a.new_encrypt_key_cmd.clone(),
        };
        let pass_var = if std::env::var_os("STRATA_NEW_RSA_PASSPHRASE").is_some() {
            "STRATA_NEW_RSA_PASSPHRASE"
        } else {
            "JFS_RSA_PASSPHRASE"
        };
        let Some(how) =
            wrapping_from(a.new_encrypt_rsa_key.as_deref(), new_kek.source(), pass_var)?
        else {
            bail!(
                "--rotate-kek needs the new key: --new-encrypt-key-file, \
                 --new-encrypt-key-env, --new-encrypt-key-cmd or --new-encrypt-rsa-key"
            );
        };
        record = volume_keys::rewrap(&record, &format.uuid, &wrapper, &how)?;
        println!("data keys wrapped with the new {} key", record.wrapping);
    }
    Ok(record)
}

/// `strata config`: show the settings, or change the mutable ones given as flags.
/// `changed` with the store `--add-store` names, once its bucket answers.
async fn with_added_store(changed: Format, name: &str, a: &AddStoreArgs) -> Result<Format> {
    let Some(bucket) = a.store_bucket.clone() else {
        anyhow::bail!("--add-store {name} needs --store-bucket (where the store is)");
    };
    let spec = strata_meta::StoreSpec {
        id: 0,
        name: name.to_string(),
        storage: a.store_storage.clone(),
        bucket,
        access_key: a.store_access_key.clone(),
        secret_key: a.store_secret_key.clone().map(Secret::new),
        storage_class: a.store_class.clone(),
    };
    let probe = Format {
        storage: spec.storage.clone(),
        bucket: spec.bucket.clone(),
        access_key: spec.access_key.clone(),
        secret_key: spec.secret_key.clone(),
        session_token: None,
        foreign: None,
        ..changed.clone()
    };
    if spec.storage == "file" {
        wiring::create_private_dir(std::path::Path::new(&spec.bucket))
            .with_context(|| format!("cannot create store directory {}", spec.bucket))?;
    }
    let backend = wiring::open_backend(&probe)?;
    strata_client::check_backend(&probe, &backend)
        .await
        .with_context(|| format!("store {name} does not answer"))?;
    changed.with_store(spec).map_err(|e| anyhow::anyhow!("{e}"))
}

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
        if a.rotate_kek || a.rotate_data_key {
            changed.encryption = Some(rotated_keys(&a, &changed)?);
        }
        if let Some(name) = &a.store.add_store {
            changed = with_added_store(changed, name, &a.store).await?;
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
