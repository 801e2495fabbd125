//! End-to-end tests of encryption at rest on real mounts: a volume whose data key is
//! wrapped by a key-encryption key, written through a mount with writeback and through
//! the S3 gateway, read back cold, whole and at random, through a disk cache — and
//! neither the bucket, nor the staging log, nor the cache holds a planted plaintext;
//! `fsck --verify` authenticates every block and names a tampered one, whose read is EIO
//! with a log line naming the object. A volume wrapped by a passphrase-protected RSA key
//! (as `openssl genrsa -aes256` writes it); a wrong or missing key is one line at mount;
//! the data key rotated under a running mount, then the RSA key replaced by a KEK, with
//! every file still readable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

const PLANTED: &[u8] = b"E2E-PLANTED-PLAINTEXT-4d1c9e";

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// How many files under `dir` there are; panics if one holds the planted bytes.
fn files_without_plaintext(dir: &Path) -> usize {
    let files = files_under(dir);
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        assert!(
            !bytes.windows(PLANTED.len()).any(|w| w == PLANTED),
            "{} holds the planted plaintext",
            f.display()
        );
    }
    files.len()
}

/// A 64-hex-digit key in a 0600 file.
fn key_file(dir: &Path, name: &str, byte: u8) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let hex: String = (0..32).map(|i| format!("{:02x}", byte ^ i)).collect();
    std::fs::write(&path, hex).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// `strata mount URL PATH -d ARGS...` with `envs`; the mount point and its log.
fn mount(vol: &Volume, name: &str, args: &[&str], envs: &[(&str, &str)]) -> Mount {
    let path = vol.dir.path().join(name);
    std::fs::create_dir_all(&path).unwrap();
    let log = vol.dir.path().join(format!("{name}.log"));
    run(Command::new(STRATA)
        .args(["mount", &vol.meta_url])
        .arg(&path)
        .args(["-d", "--log"])
        .arg(&log)
        .args(args)
        .envs(envs.iter().copied()));
    Mount { path, log }
}

/// A mount that must fail: its one-line error.
fn mount_error(vol: &Volume, args: &[&str], envs: &[(&str, &str)]) -> String {
    let path = vol.dir.path().join("refused");
    std::fs::create_dir_all(&path).unwrap();
    let out = Command::new(STRATA)
        .args(["mount", &vol.meta_url])
        .arg(&path)
        .args(["-d", "--cache-size", "0"])
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the mount should have been refused");
    assert!(!is_mounted(&path));
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// `PLANTED` repeated to `len` bytes, with a counter so blocks differ.
fn planted_data(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut n = 0u64;
    while out.len() < len {
        out.extend_from_slice(PLANTED);
        out.extend_from_slice(format!("{n:012}\n").as_bytes());
        n += 1;
    }
    out.truncate(len);
    out
}

fn write_synced(path: &Path, data: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

fn read_at(path: &Path, at: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, at)?;
    Ok(buf)
}

/// A `strata gateway` of the volume at `meta_url` with the key `env` (a KEK file or an
/// RSA passphrase), and `len` planted bytes put through it as `via-s3`; returns the
/// gateway and the bytes.
fn gateway_put(vol: &Volume, meta_url: &str, env: (&str, &str), len: usize) -> (Daemon, Vec<u8>) {
    let gw = Daemon::start(
        vol,
        "gw",
        &["gateway", meta_url, "127.0.0.1:0", "--cache-size", "0"],
        &[
            ("STRATA_ACCESS_KEY", "enc-key"),
            ("STRATA_SECRET_KEY", "enc-secret-123"),
            env,
        ],
    );
    let data = planted_data(len);
    let body = vol.dir.path().join("body");
    std::fs::write(&body, &data).unwrap();
    s3api(&gw, &["put-object", "--body", body.to_str().unwrap()]);
    (gw, data)
}

/// `aws s3api CMD --bucket e2e-vol --key via-s3 ARGS...` against `gw`.
fn s3api(gw: &Daemon, args: &[&str]) {
    run(aws_cli(&gw.url, "enc-key", "enc-secret-123")
        .args(["s3api", args[0], "--bucket", "e2e-vol", "--key", "via-s3"])
        .args(&args[1..]));
}

#[test]
fn a_kek_volume_keeps_no_plaintext_in_bucket_staging_or_cache() {
    let keys = tempfile::tempdir().unwrap();
    let kek = key_file(keys.path(), "kek", 0x11);
    let kek_arg = kek.to_str().unwrap();
    let vol = Volume::new_with(&["--encrypt-key-file", kek_arg, "--block-size", "1M"]);
    let bucket = vol.dir.path().join("bucket");
    let data = planted_data(5 << 20);

    // Written with writeback held back: the blocks sit sealed in the staging log.
    let staging_cache = vol.dir.path().join("wb-cache");
    let writer = mount(
        &vol,
        "writer",
        &[
            "--writeback",
            "--upload-delay",
            "1h",
            "--cache-dir",
            staging_cache.to_str().unwrap(),
        ],
        &[],
    );
    write_synced(&writer.path.join("f"), &data);
    assert!(files_without_plaintext(&staging_cache) > 0, "blocks staged");
    assert_eq!(std::fs::read(writer.path.join("f")).unwrap(), data);
    files_without_plaintext(&bucket);
    let flushed = Command::new(STRATA)
        .args(["umount", "--flush"])
        .arg(&writer.path)
        .output()
        .unwrap();
    assert!(flushed.status.success(), "{flushed:?}");
    assert!(files_without_plaintext(&bucket.join("e2e-vol").join("chunks")) >= 5);

    // Read cold through a disk cache on another device: whole, then at random.
    let cache = tempfile::tempdir_in("/dev/shm").unwrap();
    let reader = mount(
        &vol,
        "reader",
        &["--cache-dir", cache.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(std::fs::read(reader.path.join("f")).unwrap(), data);
    for at in [17u64, 1_048_570, 3_333_333, (5 << 20) - 4096] {
        let got = read_at(&reader.path.join("f"), at, 4096).unwrap();
        let from = usize::try_from(at).unwrap();
        assert_eq!(got, data[from..from + 4096]);
    }
    assert!(
        eventually(Duration::from_secs(10), || files_without_plaintext(
            cache.path()
        ) >= 5),
        "blocks cached"
    );

    // The S3 gateway seals what it is given too.
    let (gw, put) = gateway_put(
        &vol,
        &vol.meta_url,
        ("STRATA_ENCRYPT_KEY_FILE", kek_arg),
        300_000,
    );
    let back = vol.dir.path().join("back");
    s3api(&gw, &["get-object", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), put);
    assert!(eventually(Duration::from_secs(10), || reader
        .path
        .join("via-s3")
        .exists()));
    gw.stop();
    files_without_plaintext(&bucket);
    drop(reader);

    // fsck --verify opens every block; one flipped byte is named and is EIO to a read.
    let verified = strata_ok(&["fsck", &vol.meta_url, "--verify"]);
    assert!(verified.contains("volume is clean"), "{verified}");
    let first_block = files_under(&bucket.join("e2e-vol").join("chunks"))
        .into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_0_1048576"))
        })
        .expect("the file's first block");
    let mut stored = std::fs::read(&first_block).unwrap();
    stored[1000] ^= 0x20;
    std::fs::write(&first_block, stored).unwrap();
    let (clean, report) = strata(&["fsck", &vol.meta_url, "--verify"]);
    assert!(!clean && report.contains("1 unreadable"), "{report}");
    let cold = mount(
        &vol,
        "cold",
        &["--cache-size", "0", "--io-retries", "1"],
        &[],
    );
    let err = std::fs::read(cold.path.join("f")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let name = first_block
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(cold.log().contains(&name), "the log names the object");
}

#[test]
fn wrong_or_missing_keys_are_one_line_at_mount() {
    let keys = tempfile::tempdir().unwrap();
    let kek = key_file(keys.path(), "kek", 0x22);
    let vol = Volume::new_with(&["--encrypt-key-file", kek.to_str().unwrap()]);
    let wrong = key_file(keys.path(), "wrong", 0x23);
    let e = mount_error(&vol, &["--encrypt-key-file", wrong.to_str().unwrap()], &[]);
    assert!(e.contains("wrong key") && e.lines().count() == 1, "{e}");
    let e = mount_error(&vol, &["--encrypt-key-env", "NO_SUCH_KEK_VARIABLE"], &[]);
    assert!(e.contains("NO_SUCH_KEK_VARIABLE is not set"), "{e}");
    std::fs::remove_file(&kek).unwrap();
    let e = mount_error(&vol, &[], &[]);
    assert!(
        e.contains("key-encryption key file") && e.lines().count() == 1,
        "{e}"
    );
    // Encryption is chosen when a volume is created.
    let plain = Volume::new();
    let (ok, out) = strata(&[
        "format",
        &plain.meta_url,
        "e2e-vol",
        "--encrypt-key-file",
        wrong.to_str().unwrap(),
    ]);
    assert!(
        !ok && out.contains("encryption is chosen when a volume is created"),
        "{out}"
    );
}

#[test]
fn an_rsa_volume_survives_both_rotations_under_a_running_mount() {
    let keys = tempfile::tempdir().unwrap();
    let pem = keys.path().join("key.pem");
    run(Command::new("openssl")
        .args(["genrsa", "-aes256", "-passout", "pass:rsa-pass", "-out"])
        .arg(&pem)
        .arg("2048"));
    let pass = [("JFS_RSA_PASSPHRASE", "rsa-pass")];
    let dir = tempfile::tempdir().unwrap();
    let meta_url = format!("sqlite3://{}", dir.path().join("meta.db").display());
    run(Command::new(STRATA)
        .args([
            "format",
            &meta_url,
            "e2e-vol",
            "--trash-days",
            "0",
            "--bucket",
        ])
        .arg(dir.path().join("bucket"))
        .arg("--encrypt-rsa-key")
        .arg(&pem)
        .args(["--encrypt-algo", "chacha20-rsa"])
        .envs(pass));
    let vol = Volume {
        dir,
        meta_url: meta_url.clone(),
    };
    let e = mount_error(&vol, &[], &[("JFS_RSA_PASSPHRASE", "guess")]);
    assert!(e.contains("wrong passphrase"), "{e}");
    let e = mount_error(&vol, &[], &[]);
    assert!(e.contains("JFS_RSA_PASSPHRASE"), "{e}");

    let first = mount(&vol, "first", &["--cache-size", "0"], &pass);
    let one = planted_data(2_500_000);
    write_synced(&first.path.join("one"), &one);
    // The gateway opens the RSA-wrapped volume with the same passphrase.
    let (gw, put) = gateway_put(&vol, &meta_url, ("JFS_RSA_PASSPHRASE", "rsa-pass"), 70_000);
    gw.stop();
    assert!(eventually(Duration::from_secs(10), || {
        std::fs::read(first.path.join("via-s3")).is_ok_and(|b| b == put)
    }));
    // A new data key while `first` runs: a client started after it seals with key 2,
    // and `first` fetches the key when it meets a block sealed with it.
    let rotated = Command::new(STRATA)
        .args(["config", &meta_url, "--rotate-data-key"])
        .envs(pass)
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{rotated:?}");
    let second = mount(&vol, "second", &["--cache-size", "0"], &pass);
    let two = planted_data(1_200_000);
    write_synced(&second.path.join("two"), &two);
    assert_eq!(std::fs::read(first.path.join("two")).unwrap(), two);
    assert_eq!(std::fs::read(second.path.join("one")).unwrap(), one);
    drop(first);
    drop(second);

    // The RSA key replaced by a key-encryption key: no data rewritten, all still read.
    let kek = key_file(keys.path(), "kek", 0x33);
    let rewrapped = Command::new(STRATA)
        .args([
            "config",
            &meta_url,
            "--rotate-kek",
            "--new-encrypt-key-file",
        ])
        .arg(&kek)
        .envs(pass)
        .output()
        .unwrap();
    assert!(rewrapped.status.success(), "{rewrapped:?}");
    let status = strata_ok(&["status", &meta_url]);
    assert!(
        status.contains("\"wrapping\": \"kek\"") && !status.contains("BEGIN"),
        "{status}"
    );
    let third = mount(&vol, "third", &["--cache-size", "0"], &[]);
    assert_eq!(std::fs::read(third.path.join("one")).unwrap(), one);
    assert_eq!(std::fs::read(third.path.join("two")).unwrap(), two);
    drop(third);
    files_without_plaintext(&vol.dir.path().join("bucket"));
    let verified = strata_ok(&["fsck", &meta_url, "--verify"]);
    assert!(
        verified.contains("read and verified 3 blocks"),
        "{verified}"
    );
}

/// The first bytes of every sealed file (dumps, backups).
const SEALED_MAGIC: &[u8] = b"STRATA-SEALED-DUMP-1\n";

#[test]
fn backups_and_encrypted_dumps_are_sealed_and_load_with_the_key() {
    let keys = tempfile::tempdir().unwrap();
    let kek = key_file(keys.path(), "kek", 0x44);
    let kek_arg = kek.to_str().unwrap();
    let vol = Volume::new_with(&["--encrypt-key-file", kek_arg]);
    let m = mount(
        &vol,
        "m",
        &["--cache-size", "0", "--backup-meta", "1s"],
        &[],
    );
    let secret_name = "E2E-PLANTED-NAME-OF-A-FILE";
    std::fs::write(m.path.join(secret_name), b"x").unwrap();
    // A backup is made within a second or so: sealed, no name in the clear.
    let meta_dir = vol.dir.path().join("bucket").join("e2e-vol").join("meta");
    assert!(eventually(Duration::from_secs(20), || !files_under(
        &meta_dir
    )
    .is_empty()));
    let backup = files_under(&meta_dir).remove(0);
    let bytes = std::fs::read(&backup).unwrap();
    assert!(bytes.starts_with(SEALED_MAGIC), "{}", backup.display());
    drop(m);

    // dump --encrypt, JSON and binary: sealed; load them with the key, into new engines.
    let json = vol.dir.path().join("dump.json");
    let bin = vol.dir.path().join("dump.bin");
    strata_ok(&["dump", &vol.meta_url, json.to_str().unwrap(), "--encrypt"]);
    strata_ok(&[
        "dump",
        &vol.meta_url,
        bin.to_str().unwrap(),
        "--binary",
        "--encrypt",
    ]);
    for (n, file) in [json, bin, backup].iter().enumerate() {
        let bytes = std::fs::read(file).unwrap();
        assert!(bytes.starts_with(SEALED_MAGIC));
        assert!(
            !bytes
                .windows(secret_name.len())
                .any(|w| w == secret_name.as_bytes())
        );
        let target = format!(
            "sqlite3://{}",
            vol.dir.path().join(format!("loaded{n}.db")).display()
        );
        let (ok, out) = strata(&[
            "load",
            &target,
            file.to_str().unwrap(),
            "--encrypt-key-file",
            "/nonexistent",
        ]);
        assert!(!ok && out.contains("/nonexistent"), "{out}");
        strata_ok(&[
            "load",
            &target,
            file.to_str().unwrap(),
            "--encrypt-key-file",
            kek_arg,
        ]);
        let loaded = Volume::existing(&target);
        let lm = mount(&loaded, "lm", &["--cache-size", "0"], &[]);
        assert_eq!(std::fs::read(lm.path.join(secret_name)).unwrap(), b"x");
    }
    let (ok, out) = strata(&[
        "dump",
        &Volume::new().meta_url,
        "/tmp/never.json",
        "--encrypt",
    ]);
    assert!(!ok && out.contains("not encrypted"), "{out}");
}

/// Stored bytes of a sealed 1 MiB block in units of `unit` bytes (FORMAT.md, object v3).
fn sealed_block_size(unit: u64) -> u64 {
    52 + (1 << 20) + 36 * (1 << 20) / unit
}

/// A new volume seals objects in 16 KiB units (meta v7); a volume whose record names no
/// unit (encrypted before session 40, made here by loading a dump without the field)
/// keeps 32 KiB units, and both read back whole and at random, cold.
#[test]
fn new_volumes_seal_in_16_kib_units_and_older_ones_keep_32() {
    let keys = tempfile::tempdir().unwrap();
    let kek = key_file(keys.path(), "kek", 0x44);
    let kek_arg = kek.to_str().unwrap();
    let vol = Volume::new_with(&["--encrypt-key-file", kek_arg, "--block-size", "1M"]);
    let config = strata_ok(&["config", &vol.meta_url]);
    assert!(config.contains("\"object_unit_kib\": 16"), "{config}");
    assert!(config.contains("\"meta_version\": 7"), "{config}");
    // The same (empty) volume in a bucket of its own, its record without the unit: what
    // an older build formatted.
    let dump = vol.dir.path().join("dump.json");
    strata_ok(&["dump", &vol.meta_url, dump.to_str().unwrap()]);
    let text = std::fs::read_to_string(&dump).unwrap();
    let (new_bucket, old_bucket) = (vol.dir.path().join("bucket"), vol.dir.path().join("old"));
    std::fs::create_dir(&old_bucket).unwrap();
    let older = text.replacen(",\"object_unit_kib\":16", "", 1).replacen(
        &format!("\"{}\"", new_bucket.display()),
        &format!("\"{}\"", old_bucket.display()),
        1,
    );
    assert!(text.contains("object_unit_kib") && !older.contains("object_unit_kib"));
    assert!(older.contains(&format!("\"{}\"", old_bucket.display())));
    std::fs::write(&dump, older).unwrap();
    let old_url = format!("sqlite3://{}", vol.dir.path().join("old.db").display());
    strata_ok(&["load", &old_url, dump.to_str().unwrap()]);
    let old = Volume::existing(&old_url);
    let config = strata_ok(&["config", &old_url]);
    assert!(!config.contains("object_unit_kib"), "{config}");
    assert!(config.contains("\"meta_version\": 6"), "{config}");

    let data = planted_data(3 << 20);
    for (v, bucket, name, unit) in [
        (&vol, &new_bucket, "new", 16 << 10),
        (&old, &old_bucket, "old", 32 << 10),
    ] {
        let m = mount(v, name, &["--cache-size", "0"], &[]);
        write_synced(&m.path.join(name), &data);
        drop(m);
        let cold = mount(v, &format!("{name}-cold"), &["--cache-size", "0"], &[]);
        let file = cold.path.join(name);
        assert_eq!(std::fs::read(&file).unwrap(), data);
        for at in [5u64, 16_380, 40_000, 1_048_000, (3 << 20) - 4096] {
            let from = usize::try_from(at).unwrap();
            assert_eq!(read_at(&file, at, 4096).unwrap(), data[from..from + 4096]);
        }
        let sizes: Vec<u64> = files_under(&bucket.join("e2e-vol").join("chunks"))
            .iter()
            .filter(|p| p.to_string_lossy().ends_with("_1048576"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect();
        assert!(
            sizes.contains(&sealed_block_size(unit)),
            "{name}: {sizes:?}"
        );
    }
    let verified = strata_ok(&["fsck", &old_url, "--verify"]);
    assert!(verified.contains("volume is clean"), "{verified}");
}
