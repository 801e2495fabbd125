//! Automatic metadata backups (`mount --backup-meta`): a gzip dump (dump v1) of the volume
//! written into the bucket as `meta/dump-YYYY-MM-DD-HHMMSS.json.gz`, at most once per
//! interval across all clients (each client looks at the newest backup in the bucket
//! before making one), keeping the newest [`KEEP`]. Volumes of more than
//! [`MAX_INODES`] inodes are not backed up automatically (a dump walks every inode);
//! run `strata dump` for them.

use std::io::{Read, Seek, Write};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use strata_meta::{DumpOptions, Meta};
use strata_object::ObjectStore;

use super::{MaintenanceError, Result};

/// Backups kept in the bucket.
pub const KEEP: usize = 10;
/// Above this many inodes, automatic backups are skipped.
pub const MAX_INODES: u64 = 1_000_000;
const PREFIX: &str = "meta/";

/// Name of a backup made at `unix_secs`.
pub fn backup_name(unix_secs: i64) -> String {
    let hour = strata_meta::hour_name(unix_secs * 1_000_000_000);
    let rest = unix_secs.rem_euclid(3600);
    format!(
        "{PREFIX}dump-{hour}{:02}{:02}.json.gz",
        rest / 60,
        rest % 60
    )
}

/// Make a backup unless one newer than `every` exists; returns its name when made.
/// `store` holds raw objects under the volume's prefix.
pub async fn backup_if_due(
    meta: &Meta,
    store: &Arc<dyn ObjectStore>,
    every: Duration,
) -> Result<Option<String>> {
    let mut backups = Vec::new();
    store
        .scan_all(PREFIX, &mut |info| {
            if info.key.starts_with("meta/dump-") && info.key.ends_with(".json.gz") {
                backups.push(info);
            }
            Ok(())
        })
        .await?;
    backups.sort_by(|a, b| b.key.cmp(&a.key));
    let now = strata_meta::now_ns() / 1_000_000_000;
    let every = i64::try_from(every.as_secs()).unwrap_or(i64::MAX);
    if backups.first().is_some_and(|b| b.modified > now - every) {
        return Ok(None);
    }
    let inodes = meta.statfs().await?.used_inodes;
    if inodes > MAX_INODES {
        tracing::info!("{inodes} inodes: automatic metadata backup skipped (use `strata dump`)");
        return Ok(None);
    }
    let name = backup_name(now);
    store.put(&name, dump_gzip(meta).await?).await?;
    store.sync().await?;
    for old in backups.iter().skip(KEEP - 1) {
        if let Err(e) = store.delete(&old.key).await {
            tracing::warn!("removing old backup {}: {e}", old.key);
        }
    }
    Ok(Some(name))
}

/// The whole volume as a gzip dump, spooled through a temporary file.
async fn dump_gzip(meta: &Meta) -> Result<Bytes> {
    let file = tempfile::tempfile()?;
    let mut out = GzEncoder::new(std::io::BufWriter::new(file), Compression::default());
    meta.dump(&mut out, &DumpOptions::default(), &mut |_| {})
        .await?;
    out.flush()?;
    let mut file = out
        .finish()?
        .into_inner()
        .map_err(|e| MaintenanceError::Io(e.into_error()))?;
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_sort_by_time() {
        assert_eq!(backup_name(0), "meta/dump-1970-01-01-000000.json.gz");
        assert_eq!(
            backup_name(3600 + 61),
            "meta/dump-1970-01-01-010101.json.gz"
        );
        assert!(backup_name(1_796_008_599) < backup_name(1_796_008_600));
    }
}
