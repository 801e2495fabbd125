//! `strata import juicefs`: take over a JuiceFS volume in place. Its metadata (a
//! `juicefs dump`, read from a file or from `juicefs dump` run on its metadata URL) is
//! converted and loaded into an empty engine; its objects stay where they are and are
//! read as foreign blocks (`strata_object::adopted`). Refused while JuiceFS clients are
//! mounted (`juicefs status` shows sessions), and for a bucket imported before (the
//! marker object `strata-import.json` under the volume's prefix).

use std::fs::File;
use std::io::{BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Args, Subcommand};
use strata_client::keys;
use strata_meta::juicefs::{Imported, JuiceSetting};
use strata_meta::{DumpLine, Format, Meta, MetaOptions, QuotaTarget};
use strata_object::ObjectStore;
use strata_object::seal::Cipher;
use strata_types::{Ino, MetaUrl, Secret};
use strata_vfs::maintenance::Progress;

use crate::dump_cmd::gunzip_if_gzip;
use crate::progress::ProgressView;
use crate::wiring;

/// Name of the marker object an import leaves under the volume's prefix.
const MARKER: &str = "strata-import.json";
/// Dump lines handed from the reading thread to the loader at once.
const BATCH: usize = 4096;

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    from: ImportFrom,
}

#[derive(Debug, Subcommand)]
enum ImportFrom {
    /// Take over a JuiceFS volume in place: its metadata converted into an empty Strata
    /// engine, its objects left where they are (no data copied)
    Juicefs(JuicefsArgs),
}

#[derive(Debug, Args)]
struct JuicefsArgs {
    /// What `juicefs dump` wrote (JSON, gzip or not), or the JuiceFS volume's metadata
    /// URL (then `juicefs status` checks that no client is mounted and `juicefs dump`
    /// reads the metadata)
    source: String,
    /// Metadata engine URL of an empty database for the Strata volume
    meta_url: MetaUrl,
    /// With a dump file: the JuiceFS volume's metadata URL, for `juicefs status` to check
    /// that no JuiceFS client is mounted
    #[arg(long, value_name = "URL")]
    juicefs_meta: Option<String>,
    /// With a dump file and no --juicefs-meta: import without checking for mounted
    /// JuiceFS clients (stop every one first: a JuiceFS client writing to the bucket
    /// afterwards changes what this volume reads)
    #[arg(long, conflicts_with = "juicefs_meta")]
    no_session_check: bool,
    /// The `juicefs` program to run
    #[arg(long, default_value = "juicefs", value_name = "PATH")]
    juicefs: String,
    /// An encrypted JuiceFS volume: its RSA private key (PEM) from this file instead of
    /// the one in its settings (the same key, re-encrypted, say). Its passphrase comes from
    /// JFS_RSA_PASSPHRASE, as for JuiceFS; the imported volume keeps the key as its own
    #[arg(long, value_name = "PEM-FILE")]
    encrypt_rsa_key: Option<std::path::PathBuf>,
}

pub fn run_import(a: ImportArgs) -> Result<()> {
    match a.from {
        ImportFrom::Juicefs(a) => import_juicefs(a),
    }
}

fn import_juicefs(a: JuicefsArgs) -> Result<()> {
    let from_url = a.source.contains("://");
    let check = match (&a.juicefs_meta, from_url) {
        (Some(url), _) => Some(url.clone()),
        (None, true) => Some(a.source.clone()),
        (None, false) if a.no_session_check => None,
        (None, false) => bail!(
            "a dump cannot show whether JuiceFS clients are still mounted: give the JuiceFS \
             metadata URL (--juicefs-meta URL; `juicefs status` is run), or --no-session-check \
             once every JuiceFS client is stopped"
        ),
    };
    if let Some(url) = &check {
        refuse_mounted(&a.juicefs, url)?;
    }
    let (input, child) = open_source(&a)?;
    let rsa_key = match &a.encrypt_rsa_key {
        Some(path) => Some(Secret::new(
            std::fs::read_to_string(path).with_context(|| path.display().to_string())?,
        )),
        None => None,
    };
    let started = Instant::now();
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<DumpLine>>(8);
    let reader = std::thread::spawn(move || convert_into(input, rsa_key, sender));
    let rt = wiring::runtime()?;
    let loaded = rt.block_on(load(&a.meta_url, receiver));
    let converted = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the dump reader panicked"))?;
    if let Some(mut child) = child {
        let status = child.wait().context("waiting for juicefs dump")?;
        if !status.success() {
            let shown = MetaUrl::new(a.source.as_str());
            bail!("`{} dump {shown}` failed ({status})", a.juicefs);
        }
    }
    // The reader's error explains a load that stopped early, so it comes first.
    let imported = converted?;
    let (meta, format) = loaded?;
    rt.block_on(set_quotas(&meta, &imported))?;
    report(
        &a.meta_url,
        &format,
        &imported,
        started.elapsed().as_secs_f64(),
    );
    Ok(())
}

/// Refuse while `juicefs status URL` lists sessions (mounted clients, gateways, ...).
fn refuse_mounted(juicefs: &str, url: &str) -> Result<()> {
    // Messages show the URL with its password hidden.
    let shown = MetaUrl::new(url);
    let out = Command::new(juicefs)
        .args(["status", url])
        .stderr(Stdio::null())
        .output()
        .with_context(|| {
            format!("running `{juicefs} status` (install JuiceFS or --juicefs PATH)")
        })?;
    if !out.status.success() {
        bail!("`{juicefs} status {shown}` failed ({})", out.status);
    }
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("reading what `{juicefs} status` printed"))?;
    let sessions = status["Sessions"].as_array().map_or(0, Vec::len);
    if sessions > 0 {
        bail!(
            "{sessions} JuiceFS client(s) still use this volume (`{juicefs} status {shown}`): \
             unmount them (and stop gateways and WebDAV servers) before importing"
        );
    }
    Ok(())
}

/// The dump to read: a file (gzip or not), or what `juicefs dump URL` writes.
fn open_source(a: &JuicefsArgs) -> Result<(Box<dyn Read + Send>, Option<Child>)> {
    if a.source.contains("://") {
        let mut child = Command::new(&a.juicefs)
            .args(["dump", &a.source])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("running `{} dump`", a.juicefs))?;
        let out = child
            .stdout
            .take()
            .context("reading what `juicefs dump` writes")?;
        return Ok((Box::new(out), Some(child)));
    }
    let file = File::open(&a.source).with_context(|| a.source.clone())?;
    let input = gunzip_if_gzip(Box::new(BufReader::with_capacity(1 << 20, file)))?;
    Ok((Box::new(input), None))
}

/// Convert on this (reader) thread, sending the lines on in batches.
fn convert_into(
    input: Box<dyn Read + Send>,
    rsa_key: Option<Secret>,
    sender: std::sync::mpsc::SyncSender<Vec<DumpLine>>,
) -> Result<Imported> {
    let mut batch = Vec::with_capacity(BATCH);
    let hung_up = || strata_meta::MetaError::Invalid("the load stopped".into());
    // The settings' own error is told as it is, not as a place in the dump.
    let mut unsettled: Option<anyhow::Error> = None;
    let mut complete = |s: &JuiceSetting, f: Format| {
        complete_format(s, f, rsa_key.as_ref()).map_err(|e| {
            unsettled = Some(e);
            strata_meta::MetaError::Invalid("the settings".into())
        })
    };
    let converted = strata_meta::juicefs::convert(input, &mut complete, &mut |line| {
        batch.push(line);
        if batch.len() >= BATCH {
            sender
                .send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                .map_err(|_| hung_up())?;
        }
        Ok(())
    });
    if let Some(e) = unsettled {
        return Err(e);
    }
    let imported = converted?;
    if !batch.is_empty() {
        sender.send(batch).map_err(|_| hung_up())?;
    }
    Ok(imported)
}

/// The format record with what the dump keeps sealed opened: JuiceFS's encrypted
/// secrets, and for an encrypted volume the encryption record holding its RSA key
/// (`rsa_key` if given, else the dump's), which opens the foreign blocks and wraps the
/// data key native blocks are sealed with.
fn complete_format(s: &JuiceSetting, mut f: Format, rsa_key: Option<&Secret>) -> Result<Format> {
    let open = |what: &str, v: &Secret| -> Result<Option<Secret>> {
        if v.is_empty() || v.expose() == "removed" {
            return Ok(None);
        }
        if !s.key_encrypted {
            return Ok(Some(v.clone()));
        }
        Ok(Some(
            keys::open_juicefs_secret(&s.uuid, v).with_context(|| what.to_string())?,
        ))
    };
    if s.key_encrypted {
        f.secret_key = open("SecretKey", &s.secret_key)?;
        f.session_token = open("SessionToken", &s.session_token)?;
    }
    if s.encrypt_key.is_empty() {
        return Ok(f);
    }
    let pem = match rsa_key {
        Some(pem) => pem.clone(),
        None => open("EncryptKey", &s.encrypt_key)?.context(
            "the dump holds no RSA key of the encrypted volume: give it with --encrypt-rsa-key",
        )?,
    };
    let cipher = Cipher::parse(strata_meta::juicefs::cipher_name(&s.encrypt_algo))
        .map_err(|e| anyhow::anyhow!(e))?;
    let how = keys::NewWrapping::Rsa {
        pem,
        passphrase: None,
    };
    let record = keys::new_encryption(&f.uuid, cipher, &how)?;
    Ok(f.with_encryption(Some(record)))
}

/// For an encrypted volume: the key must open JuiceFS's `juicefs_uuid` object, which
/// holds the volume's UUID — checked before anything is written.
async fn check_key(format: &Format, raw: &dyn ObjectStore) -> Result<()> {
    let Some(foreign) = format.foreign.as_ref().filter(|f| f.encryption.is_some()) else {
        return Ok(());
    };
    let blocks = strata_client::foreign_blocks(format, Some(&keys::KeyOptions::default()))?;
    let Some(cipher) = blocks.and_then(|b| b.cipher) else {
        bail!("the imported blocks are encrypted and no key opens them");
    };
    let name = format!("{}/juicefs_uuid", format.name);
    let stored = raw
        .get(&name, None)
        .await
        .with_context(|| format!("reading {name} to check the RSA key"))?;
    let opened = cipher.open(&stored).map_err(|e| {
        anyhow::anyhow!("the RSA key does not open the volume's objects ({name}: {e})")
    })?;
    if opened != foreign.uuid.as_bytes() {
        bail!("{name} holds another volume's UUID: the bucket is not this JuiceFS volume's");
    }
    Ok(())
}

/// Load the converted lines into the empty engine at `meta_url`, once the bucket shows
/// no earlier import.
async fn load(
    meta_url: &MetaUrl,
    receiver: std::sync::mpsc::Receiver<Vec<DumpLine>>,
) -> Result<(Meta, Format)> {
    // The reader thread fills the channel; waiting for it blocks this worker, which the
    // runtime is told, so its other tasks (the loader's commits) move elsewhere meanwhile.
    let mut lines =
        std::iter::from_fn(move || tokio::task::block_in_place(|| receiver.recv().ok())).flatten();
    let Some(first) = lines.next() else {
        bail!("the dump ended before its settings");
    };
    let DumpLine::Header { format, .. } = &first else {
        bail!("the dump did not start with its settings");
    };
    let format: Format = serde_json::from_value(format.clone()).context("the settings")?;
    let raw = strata_client::open_backend(&format)?;
    let marker = format!("{}/{MARKER}", format.name);
    match raw.head(&marker).await {
        Ok(_) => bail!(
            "the bucket {} was imported into Strata before ({marker} is there): a volume's \
             objects must belong to one volume",
            format.bucket
        ),
        Err(strata_object::ObjectError::NotFound(_)) => {}
        Err(e) => {
            return Err(e).context(format!("checking {} for an earlier import", format.bucket));
        }
    }
    check_key(&format, raw.as_ref()).await?;
    let meta = Meta::new(wiring::open_engine(meta_url).await?, MetaOptions::default());
    let progress = Arc::new(Progress::default());
    progress.stage("importing lines", 0);
    let view = ProgressView::start(progress.clone());
    let mut tell = |n| progress.done.store(n, Ordering::Relaxed);
    let all = std::iter::once(first).chain(lines).map(Ok);
    let loaded = meta.load_lines(all, &mut tell).await;
    drop(view);
    loaded.map_err(|e| anyhow::anyhow!("import into {meta_url}: {e}"))?;
    let format = meta.load().await?.as_ref().clone();
    let record = serde_json::json!({
        "strata_volume": format.uuid,
        "juicefs_volume": format.foreign.as_ref().map(|f| f.uuid.clone()),
        "imported_at": strata_meta::now_ns() / 1_000_000_000,
    });
    raw.put(&marker, Bytes::from(record.to_string()))
        .await
        .context("leaving the import marker in the bucket")?;
    Ok((meta, format))
}

/// What the lines cannot carry: directory quotas (their usage counted anew).
async fn set_quotas(meta: &Meta, imported: &Imported) -> Result<()> {
    for &(ino, space, inodes) in &imported.quotas {
        let target = QuotaTarget::Dir(Ino(ino));
        meta.set_quota(target, Some(space), Some(inodes))
            .await
            .with_context(|| format!("the quota of inode {ino}"))?;
    }
    Ok(())
}

fn report(meta_url: &MetaUrl, format: &Format, imported: &Imported, seconds: f64) {
    let items = imported.files + imported.directories;
    let rate = f64::from(u32::try_from(items).unwrap_or(u32::MAX)) / seconds.max(1e-6);
    eprintln!(
        "imported JuiceFS volume {} into {meta_url}: {} files, {} directories, {} quotas in \
         {seconds:.1} s ({rate:.0} inodes/s); its objects stay where they are (nothing copied)",
        format.name,
        imported.files,
        imported.directories,
        imported.quotas.len()
    );
    if format.secret_key.is_none() && format.access_key.is_some() {
        eprintln!(
            "the dump holds no secret key: set it with `strata config {meta_url} --secret-key ...`"
        );
    }
    eprintln!(
        "retire the JuiceFS volume now: mount it no more with JuiceFS (a JuiceFS client \
         writing to the bucket would change or delete objects this volume reads), and \
         remove its metadata once Strata serves you well — never `juicefs destroy` or \
         `juicefs gc --delete`, which delete the shared objects"
    );
}
