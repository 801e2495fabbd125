//! Automatic metadata backups (`mount --backup-meta`): a binary dump (dump v2) of the
//! volume written into the bucket as `meta/dump-YYYY-MM-DD-HHMMSS.bin`, at most once per
//! interval across all clients (each client looks at the newest backup in the bucket
//! before making one), keeping the newest [`KEEP`] (gzip JSON backups of earlier
//! versions, `.json.gz`, count and are pruned alike). The dump reads the volume page by
//! page — writers are never stopped — and is spooled through an unlinked temporary file
//! and uploaded piece by piece, so neither its size nor the volume's is held in memory.
//! An encrypted volume's backups are sealed files (`strata_object::seal::stream`) whose
//! header carries the volume's wrapped keys: `strata load` opens them with the volume's
//! key-encryption key or RSA key, without the engine they came from.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_meta::{BinaryDumpOptions, Meta};
use strata_object::ObjectStore;
use strata_object::seal::Keys;
use strata_object::seal::stream::SealedWriter;
use tokio::io::AsyncReadExt;

use super::{MaintenanceError, Result};

/// Backups kept in the bucket.
pub const KEEP: usize = 10;
const PREFIX: &str = "meta/";
/// Scans a backup runs at once: a background job leaves the rest to the mount's users.
const BACKUP_SCANS: usize = 2;
/// Bytes per uploaded piece.
const PIECE: usize = 8 << 20;

/// Name of a backup made at `unix_secs`.
pub fn backup_name(unix_secs: i64) -> String {
    let hour = strata_meta::hour_name(unix_secs * 1_000_000_000);
    let rest = unix_secs.rem_euclid(3600);
    format!("{PREFIX}dump-{hour}{:02}{:02}.bin", rest / 60, rest % 60)
}

/// Whether `key` is a backup (this version's binary ones, or earlier gzip JSON ones).
fn is_backup(key: &str) -> bool {
    key.starts_with("meta/dump-") && (key.ends_with(".bin") || key.ends_with(".json.gz"))
}

/// What seals an encrypted volume's backups: its keys and the sealed files' header.
#[derive(Clone, Debug)]
pub struct BackupSeal {
    pub keys: Arc<Keys>,
    pub header: Vec<u8>,
}

/// Make a backup unless one newer than `every` exists; returns its name when made.
/// `store` holds raw objects under the volume's prefix.
pub async fn backup_if_due(
    meta: &Meta,
    store: &Arc<dyn ObjectStore>,
    every: Duration,
    one_moment: bool,
    seal: Option<&BackupSeal>,
) -> Result<Option<String>> {
    let mut backups = Vec::new();
    store
        .scan_all(PREFIX, &mut |info| {
            if is_backup(&info.key) {
                backups.push(info);
            }
            Ok(())
        })
        .await?;
    // Newest first: by time, then by name (the names of one version sort by time).
    backups.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.key.cmp(&a.key)));
    let now = strata_meta::now_ns() / 1_000_000_000;
    let every = i64::try_from(every.as_secs()).unwrap_or(i64::MAX);
    if backups.first().is_some_and(|b| b.modified > now - every) {
        return Ok(None);
    }
    let name = backup_name(now);
    let started = Instant::now();
    let inodes = upload_dump(meta, store.as_ref(), &name, one_moment, seal).await?;
    store.sync().await?;
    tracing::info!(
        "metadata backup {name}: {inodes} inodes in {:.1?}",
        started.elapsed()
    );
    for old in backups.iter().skip(KEEP - 1) {
        if let Err(e) = store.delete(&old.key).await {
            tracing::warn!("removing old backup {}: {e}", old.key);
        }
    }
    Ok(Some(name))
}

/// Dump the whole volume into an unlinked temporary file, then upload it as `name` piece
/// by piece; the inodes dumped.
async fn upload_dump(
    meta: &Meta,
    store: &dyn ObjectStore,
    name: &str,
    one_moment: bool,
    seal: Option<&BackupSeal>,
) -> Result<u64> {
    let file = tempfile::tempfile()?;
    let out = std::io::BufWriter::new(file);
    let opts = BinaryDumpOptions {
        threads: BACKUP_SCANS,
        keep_secret_key: false,
        one_moment,
    };
    let (stats, out) = match seal {
        Some(seal) => {
            let mut sealed = SealedWriter::new(out, &seal.keys.ring(), &seal.header)?;
            let stats = meta.dump_binary(&mut sealed, &opts, &mut |_| {}).await?;
            (stats, sealed.finish()?)
        }
        None => {
            let mut out = out;
            let stats = meta.dump_binary(&mut out, &opts, &mut |_| {}).await?;
            (stats, out)
        }
    };
    let file = out
        .into_inner()
        .map_err(|e| MaintenanceError::Io(e.into_error()))?;
    let mut spool = tokio::fs::File::from_std(file);
    tokio::io::AsyncSeekExt::rewind(&mut spool).await?;
    let mut upload = store.upload(name).await?;
    let sent: Result<()> = async {
        loop {
            let mut piece = Vec::with_capacity(PIECE);
            let read = (&mut spool)
                .take(u64::try_from(PIECE).unwrap_or(u64::MAX))
                .read_to_end(&mut piece)
                .await?;
            if read == 0 {
                return Ok(());
            }
            upload.write(Bytes::from(piece)).await?;
        }
    }
    .await;
    match sent {
        Ok(()) => upload.finish().await?,
        Err(e) => {
            if let Err(abort) = upload.abort().await {
                tracing::warn!("abandoning the upload of {name}: {abort}");
            }
            return Err(e);
        }
    }
    Ok(stats.nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_object::backend::Backend;

    /// A backup is a binary dump that reads back whole; an earlier version's gzip JSON
    /// backups count toward the newest ten and are pruned like this version's.
    #[tokio::test]
    async fn backups_are_binary_dumps_and_old_ones_are_pruned() {
        let vfs = crate::testing::memory_vfs().await;
        let store: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
        for i in 0..KEEP {
            let old = format!("meta/dump-2020-01-01-0000{i:02}.json.gz");
            store.put(&old, Bytes::from_static(b"old")).await.unwrap();
        }
        store
            .put("meta/unrelated", Bytes::from_static(b"x"))
            .await
            .unwrap();
        let made = backup_if_due(vfs.meta(), &store, Duration::ZERO, true, None)
            .await
            .unwrap()
            .expect("a backup is due");
        assert!(made.ends_with(".bin"), "{made}");
        let bytes = store.get(&made, None).await.unwrap();
        let summary = strata_meta::binary_dump_summary(&bytes[..]).unwrap();
        assert_eq!(summary.volume, "conformance");
        assert!(summary.records["inodes"] >= 1, "{summary:?}");
        let mut left = Vec::new();
        store
            .scan_all("meta/", &mut |info| {
                left.push(info.key);
                Ok(())
            })
            .await
            .unwrap();
        left.sort();
        assert_eq!(left.len(), KEEP + 1, "{left:?}");
        assert!(left.contains(&made) && left.contains(&"meta/unrelated".to_string()));
        assert!(!left.contains(&"meta/dump-2020-01-01-000000.json.gz".to_string()));
        // Within the interval, no second backup.
        let again = backup_if_due(vfs.meta(), &store, Duration::from_secs(3600), false, None)
            .await
            .unwrap();
        assert_eq!(again, None);
    }

    /// An encrypted volume's backup is a sealed file: no name of the volume in the clear,
    /// and the binary dump inside once opened with the keys.
    #[tokio::test]
    async fn an_encrypted_volumes_backups_are_sealed() {
        use std::io::Read;
        use strata_object::seal::stream::{SealedReader, is_sealed, read_header};
        use strata_object::seal::{Cipher, DataKey, KeyRing};
        let vfs = crate::testing::memory_vfs().await;
        let store: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
        let ring = || KeyRing::new(1, vec![DataKey::new(1, Cipher::Aes256Gcm, [3; 32])]).unwrap();
        let seal = BackupSeal {
            keys: Arc::new(Keys::new(ring(), None)),
            header: b"{}".to_vec(),
        };
        let made = backup_if_due(vfs.meta(), &store, Duration::ZERO, true, Some(&seal))
            .await
            .unwrap()
            .expect("a backup is due");
        let bytes = store.get(&made, None).await.unwrap();
        assert!(is_sealed(&bytes));
        assert!(!bytes.windows(11).any(|w| w == b"conformance"));
        let mut r = &bytes[..];
        assert_eq!(read_header(&mut r).unwrap(), b"{}");
        let mut dump = Vec::new();
        SealedReader::new(r, ring())
            .unwrap()
            .read_to_end(&mut dump)
            .unwrap();
        let summary = strata_meta::binary_dump_summary(&dump[..]).unwrap();
        assert_eq!(summary.volume, "conformance");
    }

    #[test]
    fn backup_names_sort_by_time() {
        assert_eq!(backup_name(0), "meta/dump-1970-01-01-000000.bin");
        assert_eq!(backup_name(3600 + 61), "meta/dump-1970-01-01-010101.bin");
        assert!(backup_name(1_796_008_599) < backup_name(1_796_008_600));
        assert!(is_backup(&backup_name(5)));
        assert!(is_backup("meta/dump-2026-01-01-000000.json.gz"));
        assert!(!is_backup("meta/other.bin"));
    }
}
