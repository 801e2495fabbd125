//! From user input to running parts for commands: the volume as an admin sees it
//! (metadata, raw and full object stacks), secrets hidden for display, a tokio runtime,
//! private files. Opening engines and stores lives in `strata-client`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI8, Ordering};

use anyhow::{Context, Result};
use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::NoCache;
use strata_client::KeyOptions;
use strata_meta::{Format, Meta};
use strata_object::ObjectStore;
use strata_object::compress::Codec;
use strata_object::prefix::Prefixed;
use strata_object::stack::{StackOptions, build};
use strata_types::{MetaUrl, Secret};
use strata_vfs::{Vfs, VfsOptions};

pub use strata_client::{home_path, load_meta, open_backend, open_engine};

/// The format record as shown to people (`status`, `config`, `.config`): secrets removed
/// (the RSA key is protected by its passphrase, but is not for display either).
pub fn shown_format(format: &Format) -> Format {
    let removed = |s: &Option<Secret>| s.as_ref().map(|_| Secret::new("removed"));
    let encryption = format.encryption.clone().map(|e| strata_meta::Encryption {
        rsa_private_key: e.rsa_private_key.as_ref().map(|_| Secret::new("removed")),
        ..e
    });
    let stores = format
        .stores
        .iter()
        .map(|s| strata_meta::StoreSpec {
            secret_key: removed(&s.secret_key),
            ..s.clone()
        })
        .collect();
    Format {
        secret_key: removed(&format.secret_key),
        session_token: removed(&format.session_token),
        encryption,
        stores,
        ..format.clone()
    }
}

/// A volume opened for an admin command: metadata client, format, and the bucket as raw
/// objects under the volume's prefix (for listing and deleting blocks); [`Self::data`] is
/// the full stack (compression, checksums or sealing, retries: for reading and writing
/// data), which an encrypted volume opens only with its keys.
#[derive(Debug)]
pub struct AdminVolume {
    pub meta: Arc<Meta>,
    pub format: Arc<Format>,
    pub raw: Arc<dyn ObjectStore>,
    backend: Arc<dyn ObjectStore>,
    /// The volume's stores one by one and where its slices are, when it has several.
    pub stores: Option<strata_client::RoutedStores>,
}

/// Open the volume at `url` and check that its bucket answers.
pub async fn open_admin_volume(url: &MetaUrl) -> Result<AdminVolume> {
    let (meta, format) = load_meta(url).await?;
    let backend = open_backend(&format)?;
    strata_client::check_backend(&format, &backend).await?;
    let (backend, stores) = strata_client::route_stores(&meta, &format, backend)?;
    let raw: Arc<dyn ObjectStore> = Arc::new(Prefixed::new(backend.clone(), &format.name));
    Ok(AdminVolume {
        meta,
        format,
        raw,
        backend,
        stores,
    })
}

impl AdminVolume {
    /// The volume's data as files see it (an encrypted volume's keys unwrapped as `keys`
    /// says), each failed request tried `retries` more times.
    pub fn data(&self, keys: &KeyOptions, retries: u32) -> Result<Arc<dyn ObjectStore>> {
        let stack = StackOptions {
            prefix: self.format.name.clone(),
            compression: Codec::parse(&self.format.compression)
                .map_err(|e| anyhow::anyhow!("{e}"))?,
            keys: strata_client::volume_keys(&self.meta, &self.format, keys)?,
            seal_unit: strata_client::seal_unit(&self.format)?,
            foreign: strata_client::foreign_blocks(&self.format, Some(keys))?,
            retry: strata_object::retry::RetryPolicy {
                retries,
                ..strata_object::retry::RetryPolicy::default()
            },
            ..StackOptions::default()
        };
        Ok(build(self.backend.clone(), &stack).0)
    }

    /// A file-system client of this volume without a mount (no cache, no session), for
    /// commands that read or rewrite file data (compact, gc --compact).
    pub fn vfs(&self, keys: &KeyOptions) -> Result<Arc<Vfs>> {
        let chunk_opts = ChunkOptions {
            block_size: self.format.block_size_kib << 10,
            ..ChunkOptions::default()
        };
        let retries = strata_object::retry::RetryPolicy::default().retries;
        let data = self.data(keys, retries)?;
        let chunks = ChunkStore::new(data, Arc::new(NoCache::default()), chunk_opts);
        let vfs = Arc::new(Vfs::new(self.meta.clone(), chunks, VfsOptions::default()));
        if let Some((placements, stores)) = &self.stores {
            vfs.set_placements(placements.clone(), stores.clone());
        }
        Ok(vfs)
    }
}

/// Log to stderr at `default_filter` (`RUST_LOG` overrides it).
pub fn init_logging(default_filter: &str) {
    use std::io::IsTerminal;
    let filter = match VERBOSITY.load(Ordering::Relaxed) {
        v if v > 0 => VERBOSE_FILTER,
        v if v < 0 => "error",
        _ => default_filter,
    };
    // A second call (a command that sets up its own default) keeps the first.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| filter.into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// What `-v` logs: Strata's own debug lines, everyone else's from info up.
const VERBOSE_FILTER: &str = "info,strata=debug,strata_client=debug,strata_vfs=debug,\
    strata_meta=debug,strata_chunk=debug,strata_object=debug,strata_fuse=debug,\
    strata_s3=debug,strata_webdav=debug,strata_http=debug,strata_meta_redis=debug,\
    strata_meta_postgres=debug,strata_meta_etcd=debug,strata_meta_mysql=debug";

/// -1 for `-q`, 1 for `-v`, 0 for neither.
static VERBOSITY: AtomicI8 = AtomicI8::new(0);

/// Record the global `-v`/`-q` flags (before logging starts).
pub fn set_verbosity(verbose: bool, quiet: bool) {
    let v = match (verbose, quiet) {
        (true, _) => 1,
        (false, true) => -1,
        _ => 0,
    };
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// Whether `-q` asked for errors only (no progress bars, no notices).
pub fn quiet() -> bool {
    VERBOSITY.load(Ordering::Relaxed) < 0
}

/// A multi-threaded runtime for a command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("strata")
        .build()
        .context("cannot start the async runtime")
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

    #[test]
    fn shown_formats_hold_no_secrets() {
        // The record as `strata format` stores it for an S3 bucket with a session token.
        let stored = serde_json::json!({
            "name": "v", "uuid": "u", "storage": "s3", "bucket": "http://h/b",
            "access_key": "ak", "secret_key": "sk", "session_token": "token",
            "block_size_kib": 4096, "compression": "none", "trash_days": 0, "capacity": 0,
            "inodes": 0, "created_at": 0, "meta_version": 2,
        });
        let format: Format = serde_json::from_value(stored).unwrap();
        assert!(format.secret_key.is_some() && format.session_token.is_some());
        let shown = serde_json::to_string(&shown_format(&format)).unwrap();
        assert!(
            !shown.contains("\"sk\"") && !shown.contains("\"token\""),
            "{shown}"
        );
    }
}
