//! End-to-end: a volume written by the real JuiceFS 1.4 (a source-like tree, a big file,
//! a sparse file, hard links, a symlink, a FIFO, extended attributes with binary bytes,
//! a file of many overwritten slices, a quota, a trashed file) on SQLite and on Redis,
//! with and without compression, taken over by `strata import juicefs`: refused while a
//! JuiceFS client is mounted; then every entry, attribute, link and byte equal through a
//! Strata mount to what a read-only JuiceFS mount shows; no object copied or changed;
//! new writes and deletes work; `fsck --verify` and `gc` are clean; a second import of
//! the same bucket is refused. The Redis volume has `--hash-prefix` names. An encrypted JuiceFS volume (legacy-PEM RSA key,
//! ChaCha20, zstd) is taken over with its key: a wrong passphrase refused up front.
//! Checksums recorded by `fsck --verify --record-checksums` are checked by later reads.
//! The way back: `dump --juicefs` of a volume changed only in metadata loads into JuiceFS
//! and shows the same tree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;

const WALK: &str = include_str!("juicefs/walk.py");

fn juicefs() -> String {
    std::env::var("STRATA_TEST_JUICEFS").unwrap_or_else(|_| {
        panic!("STRATA_TEST_JUICEFS is not set: run the tests through scripts/test.sh")
    })
}

fn jfs(args: &[&str]) -> String {
    jfs_env(args, &[])
}

fn jfs_env(args: &[&str], envs: &[(&str, &str)]) -> String {
    let out = run(Command::new(juicefs())
        .args(args)
        .envs(envs.iter().copied()));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How a JuiceFS volume is made: its compression, its encryption (a PEM key file and
/// `--encrypt-algo`), and the environment every command gets (the key's passphrase).
#[derive(Clone, Copy)]
struct Setup<'a> {
    compression: &'a str,
    key: Option<(&'a Path, &'a str)>,
    envs: &'a [(&'a str, &'a str)],
    /// `--hash-prefix`: objects under JuiceFS's hashed names.
    hash_prefix: bool,
}

impl Setup<'_> {
    fn plain(compression: &str) -> Setup<'_> {
        Setup {
            compression,
            key: None,
            envs: &[],
            hash_prefix: false,
        }
    }

    fn strata_ok(&self, args: &[&str]) -> String {
        let (ok, out) = strata_env(args, self.envs);
        assert!(ok, "strata {args:?} failed: {out}");
        out
    }
}

/// What the walker sees under `root`.
fn walk(root: &Path) -> BTreeMap<String, serde_json::Value> {
    let out = run(Command::new("python3").args(["-c", WALK]).arg(root));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A walk's key for `name` (paths are hex of their bytes).
fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Every object in `bucket` with its size and bytes' length-prefixed hash.
fn objects(bucket: &Path) -> BTreeMap<String, (u64, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![bucket.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let key = path.strip_prefix(bucket).unwrap().display().to_string();
            out.insert(key, (u64::try_from(bytes.len()).unwrap(), crc32(&bytes)));
        }
    }
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// What the JuiceFS mount at `m` gets written: the tree the import must carry over.
const CONTENT: &str = r#"
set -e
cd "$1"
mkdir -p src/lib/deep src/empty
for i in $(seq 1 40); do printf 'module %d\n%s\n' $i "$(head -c 400 /dev/urandom | base64 -w0)" > src/lib/m$i.py; done
head -c 9000000 /dev/urandom > big.bin
truncate -s 150M sparse.bin
printf 'middle' | dd of=sparse.bin bs=1 seek=70000000 conv=notrunc status=none
ln src/lib/m1.py hard-a; ln src/lib/m1.py src/lib/deep/hard-b
ln -s src/lib/m2.py link
ln -s "$(printf 'odd\376%%name')" odd-link
setfattr -n user.tag -v blue src/lib/m3.py
setfattr -n user.bin -v 0x00ff2541 src/lib/m4.py
mkfifo pipe
chmod 4750 src/lib/m5.py; chown 1234:5678 src/lib/m6.py
touch "$(printf 'bad\377byte')" 'per%cent'
python3 -c '
import os
fd = os.open("over.bin", os.O_CREAT | os.O_RDWR, 0o640)
os.write(fd, os.urandom(1 << 20))
for i in range(120):
    os.pwrite(fd, os.urandom(700), (i * 7919) % (1 << 20))
    os.fsync(fd)
os.close(fd)'
rm src/lib/m40.py
"#;

/// A JuiceFS volume at `meta_url` (bucket `dir/bucket`) written through a JuiceFS mount.
fn juicefs_volume(dir: &Path, meta_url: &str, setup: Setup) {
    let bucket = format!("{}/", dir.join("bucket").display());
    let mut format = vec![
        "format".to_string(),
        meta_url.into(),
        "jvol".into(),
        "--storage".into(),
        "file".into(),
        "--bucket".into(),
        bucket,
        "--compress".into(),
        setup.compression.into(),
    ];
    if let Some((key, algo)) = setup.key {
        format.extend([
            "--encrypt-rsa-key".into(),
            key.display().to_string(),
            "--encrypt-algo".into(),
            algo.into(),
        ]);
    }
    if setup.hash_prefix {
        format.push("--hash-prefix".into());
    }
    let format: Vec<&str> = format.iter().map(String::as_str).collect();
    jfs_env(&format, setup.envs);
    let m = dir.join("jfs");
    std::fs::create_dir_all(&m).unwrap();
    let m_arg = m.to_str().unwrap();
    jfs_env(
        &[
            "mount",
            meta_url,
            m_arg,
            "-d",
            "--enable-xattr",
            "--no-usage-report",
        ],
        setup.envs,
    );
    run(Command::new("bash")
        .args(["-c", CONTENT, "content"])
        .arg(&m));
    jfs(&[
        "quota",
        "set",
        meta_url,
        "--path",
        "/src",
        "--capacity",
        "1",
        "--inodes",
        "500",
    ]);
    jfs(&["umount", m_arg]);
}

/// What a read-only JuiceFS mount of `url` at `m` shows.
fn read_only_walk(
    url: &str,
    m: &Path,
    envs: &[(&str, &str)],
) -> BTreeMap<String, serde_json::Value> {
    let m_arg = m.to_str().unwrap();
    jfs_env(
        &[
            "mount",
            url,
            m_arg,
            "-d",
            "--read-only",
            "--enable-xattr",
            "--no-usage-report",
        ],
        envs,
    );
    let seen = walk(m);
    jfs(&["umount", m_arg]);
    seen
}

/// `strata import juicefs FROM TO` (running the test's `juicefs`) with `envs`.
fn import(from: &str, to: &str, envs: &[(&str, &str)]) -> (bool, String) {
    strata_env(
        &["import", "juicefs", from, to, "--juicefs", &juicefs()],
        envs,
    )
}

fn import_and_compare(dir: &Path, jfs_url: &str, setup: Setup) {
    juicefs_volume(dir, jfs_url, setup);
    let bucket = dir.join("bucket");
    let strata_url = format!("sqlite3://{}", dir.join("strata.db").display());
    // Refused while a JuiceFS client is mounted: one line, nothing written. (A
    // read-only JuiceFS mount registers no session, and writes nothing either.)
    let jm = dir.join("jfs");
    let jm_arg = jm.to_str().unwrap();
    jfs_env(
        &[
            "mount",
            jfs_url,
            jm_arg,
            "-d",
            "--enable-xattr",
            "--no-usage-report",
        ],
        setup.envs,
    );
    let (ok, out) = import(jfs_url, &strata_url, setup.envs);
    assert!(
        !ok && out.contains("still use this volume") && out.lines().count() == 1,
        "{out}"
    );
    jfs(&["umount", jm_arg]);
    let expected = read_only_walk(jfs_url, &jm, setup.envs);

    let before = objects(&bucket);
    if setup.key.is_some() {
        // A wrong passphrase: refused in one line before anything is written (the same
        // engine then takes the import).
        let (ok, out) = import(jfs_url, &strata_url, &[("JFS_RSA_PASSPHRASE", "guess")]);
        assert!(
            !ok && out.contains("wrong passphrase") && out.lines().count() == 1,
            "{out}"
        );
        assert_eq!(objects(&bucket), before);
    }
    let (ok, out) = import(jfs_url, &strata_url, setup.envs);
    assert!(ok && out.contains("nothing copied"), "{out}");
    let after = objects(&bucket);
    let marker = "jvol/strata-import.json";
    assert!(after.contains_key(marker));
    let mut unchanged = after.clone();
    unchanged.remove(marker);
    assert_eq!(unchanged, before, "no object copied or changed");

    // What JuiceFS had queued for deletion (slices its compaction replaced, kept for its
    // trash days) is referenced by nothing: gc finds it, deletes it, and every file
    // still reads the same.
    let gc = setup.strata_ok(&["gc", &strata_url, "--safety-window", "0", "--delete"]);
    assert!(count(&gc, "leaked:") > 0, "{gc}");
    record_checksums(&bucket, &strata_url, setup);
    let vol = Volume::existing(&strata_url);
    let m = vol.mount_with_env("strata", &[], setup.envs);
    assert_eq!(
        walk(&m.path),
        expected,
        "what Strata shows is what JuiceFS showed"
    );
    let quota = strata_ok(&["quota", "get", &strata_url, "--path", "/src"]);
    assert!(quota.contains("500"), "{quota}");
    // Compaction rewrites foreign slices as native ones; a clone shares foreign slices
    // (so deleting the original keeps their objects).
    let over = m.path.join("over.bin");
    let big = std::fs::read(m.path.join("big.bin")).unwrap();
    strata_ok(&["compact", over.to_str().unwrap()]);
    let copy = m.path.join("big-copy.bin");
    strata_ok(&[
        "clone",
        m.path.join("big.bin").to_str().unwrap(),
        copy.to_str().unwrap(),
    ]);
    let mut seen_now = walk(&m.path);
    assert!(seen_now.remove(&hex("big-copy.bin")).is_some());
    assert_eq!(seen_now, expected, "compaction changed no byte");
    // New writes and deletes on the imported volume.
    let fresh: Vec<u8> = (0..3_000_000u32)
        .map(|i| u8::try_from(i * 7 % 251).unwrap())
        .collect();
    std::fs::write(m.path.join("fresh.bin"), &fresh).unwrap();
    std::fs::remove_file(m.path.join("big.bin")).unwrap();
    std::fs::write(m.path.join("src/lib/m2.py"), b"rewritten\n").unwrap();
    assert_eq!(std::fs::read(m.path.join("fresh.bin")).unwrap(), fresh);
    assert_eq!(std::fs::read(m.path.join("link")).unwrap(), b"rewritten\n");
    assert_eq!(std::fs::read(&copy).unwrap(), big);
    drop(m);
    if setup.key.is_some() {
        // Foreign and native blocks alike are read with the volume's RSA key only.
        let (ok, out) = strata(&["fsck", &strata_url, "--verify"]);
        assert!(!ok && out.contains("JFS_RSA_PASSPHRASE"), "{out}");
    }
    let fsck = setup.strata_ok(&["fsck", &strata_url, "--verify"]);
    assert!(fsck.contains("volume is clean"), "{fsck}");
    let gc = setup.strata_ok(&["gc", &strata_url, "--safety-window", "0"]);
    assert!(gc.contains("leaked: 0 objects"), "{gc}");
    // The same bucket again: refused.
    let again = format!("sqlite3://{}", dir.join("again.db").display());
    let (ok, out) = import(jfs_url, &again, setup.envs);
    assert!(!ok && out.contains("imported into Strata before"), "{out}");
    rewrite_natively_then_destroy(&bucket, &strata_url, &before, setup);
}

/// `fsck --verify --record-checksums` puts a checksums object beside every JuiceFS block;
/// from then on reads check them: a flipped byte in a raw block (same length), which
/// nothing could find before, makes its file unreadable until the byte is put back.
fn record_checksums(bucket: &Path, strata_url: &str, setup: Setup) {
    let out = setup.strata_ok(&["fsck", strata_url, "--verify", "--record-checksums"]);
    assert!(out.contains("now check their recorded checksums"), "{out}");
    let sums = objects(bucket)
        .into_keys()
        .filter(|k| k.ends_with(".sums"))
        .count();
    assert!(sums > 10, "{sums} checksums objects");
    if setup.compression != "none" || setup.key.is_some() {
        return; // damage there is found by decoding or authentication anyway
    }
    let (victim, _) = objects(bucket)
        .into_iter()
        .filter(|(k, (size, _))| {
            k.starts_with("jvol/chunks/") && !k.ends_with(".sums") && *size > 1000
        })
        .max_by_key(|(_, (size, _))| *size)
        .unwrap();
    let path = bucket.join(&victim);
    let original = std::fs::read(&path).unwrap();
    let mut damaged = original.clone();
    damaged[500] ^= 0x40;
    std::fs::write(&path, &damaged).unwrap();
    let (ok, out) = strata_env(&["fsck", strata_url, "--verify"], setup.envs);
    assert!(!ok && out.contains("1 unreadable"), "{out}");
    std::fs::write(&path, &original).unwrap();
    setup.strata_ok(&["fsck", strata_url, "--verify"]);
}

/// `gc --compact --native` leaves no JuiceFS block in the bucket and changes no byte;
/// `destroy` then deletes every object, the adopted ones included.
fn rewrite_natively_then_destroy(
    bucket: &Path,
    strata_url: &str,
    juicefs_objects: &BTreeMap<String, (u64, u32)>,
    setup: Setup,
) {
    let vol = Volume::existing(strata_url);
    let m = vol.mount_with_env("before-native", &[], setup.envs);
    let expected = walk(&m.path);
    drop(m);
    setup.strata_ok(&["config", strata_url, "--trash-days", "0"]);
    setup.strata_ok(&[
        "gc",
        strata_url,
        "--compact",
        "--native",
        "--delete",
        "--safety-window",
        "0",
    ]);
    let left: Vec<_> = objects(bucket)
        .into_keys()
        .filter(|k| k.starts_with("jvol/chunks/") && juicefs_objects.contains_key(k))
        .collect();
    if setup.hash_prefix {
        // `chunks/{two hex digits}/0/...` (Strata's first directory here is `0`).
        let hashed = juicefs_objects
            .keys()
            .filter(|k| k.split('/').nth(2).is_some_and(|d| d.len() == 2));
        assert!(hashed.count() > 10, "the volume had hashed names");
    }
    assert!(left.is_empty(), "JuiceFS blocks left: {left:?}");
    let sums: Vec<_> = objects(bucket)
        .into_keys()
        .filter(|k| k.ends_with(".sums"))
        .collect();
    assert!(
        sums.is_empty(),
        "checksums objects outlived their blocks: {sums:?}"
    );
    let m = vol.mount_with_env("after-native", &[], setup.envs);
    assert_eq!(walk(&m.path), expected, "rewriting changed no byte");
    drop(m);
    let fsck = setup.strata_ok(&["fsck", strata_url, "--verify"]);
    assert!(fsck.contains("volume is clean"), "{fsck}");
    let status: serde_json::Value =
        serde_json::from_str(&setup.strata_ok(&["status", strata_url])).unwrap();
    let uuid = status["setting"]["uuid"].as_str().unwrap();
    setup.strata_ok(&["destroy", strata_url, uuid, "--yes"]);
    assert!(objects(bucket).is_empty(), "destroy left objects");
}

#[test]
fn a_juicefs_volume_on_sqlite_with_lz4_is_taken_over_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite3://{}", dir.path().join("jfs.db").display());
    import_and_compare(dir.path(), &url, Setup::plain("lz4"));
}

#[test]
fn a_juicefs_volume_on_redis_with_hashed_names_is_taken_over_in_place() {
    let dir = tempfile::tempdir().unwrap();
    // JuiceFS wants a database of its own: the test server's last one, emptied first.
    let server = test_server("STRATA_TEST_REDIS");
    let base = server
        .rsplit_once('/')
        .map_or(server.as_str(), |(b, _)| b)
        .to_string();
    let url = format!("{base}/15");
    let flushed = Command::new("redis-cli")
        .args(["-u", &url, "flushdb"])
        .output()
        .unwrap();
    assert!(flushed.status.success());
    let setup = Setup {
        hash_prefix: true,
        ..Setup::plain("none")
    };
    import_and_compare(dir.path(), &url, setup);
}

#[test]
fn an_encrypted_juicefs_volume_is_taken_over_with_its_rsa_key() {
    let dir = tempfile::tempdir().unwrap();
    // The key as `openssl genrsa -aes256` wrote it before OpenSSL 3 (legacy encrypted
    // PEM), which JuiceFS's docs told users to make.
    let key = dir.path().join("key.pem");
    run(Command::new("openssl")
        .args([
            "genrsa",
            "-traditional",
            "-aes256",
            "-passout",
            "pass:jfs-pass",
        ])
        .arg("-out")
        .arg(&key)
        .arg("2048"));
    let url = format!("sqlite3://{}", dir.path().join("jfs.db").display());
    let setup = Setup {
        compression: "zstd",
        key: Some((&key, "chacha20-rsa")),
        envs: &[("JFS_RSA_PASSPHRASE", "jfs-pass")],
        hash_prefix: false,
    };
    import_and_compare(dir.path(), &url, setup);
}

#[test]
fn a_dump_file_needs_a_session_check_or_the_word_that_none_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite3://{}", dir.path().join("jfs.db").display());
    juicefs_volume(dir.path(), &url, Setup::plain("zstd"));
    let dump = dir.path().join("jfs.json");
    jfs(&["dump", &url, dump.to_str().unwrap()]);
    let strata_url = format!("sqlite3://{}", dir.path().join("strata.db").display());
    let dump_arg = dump.to_str().unwrap();
    let (ok, out) = strata(&["import", "juicefs", dump_arg, &strata_url]);
    assert!(!ok && out.contains("--no-session-check"), "{out}");
    strata_ok(&[
        "import",
        "juicefs",
        dump_arg,
        &strata_url,
        "--no-session-check",
    ]);
    let vol = Volume::existing(&strata_url);
    let m = vol.mount("strata");
    let expected = read_only_walk(&url, &dir.path().join("jfs"), &[]);
    assert_eq!(walk(&m.path), expected);
    the_way_back(dir.path(), &strata_url, &m);
}

/// Changes that keep every byte in JuiceFS's objects (names, links, modes, xattrs,
/// deletes, truncation) go back with `dump --juicefs` and `juicefs load`: a JuiceFS mount
/// then shows what Strata showed. Once Strata writes data, the way back is refused.
fn the_way_back(dir: &Path, strata_url: &str, m: &Mount) {
    let p = |rel: &str| m.path.join(rel);
    std::fs::rename(p("src/lib/m7.py"), p("moved.py")).unwrap();
    std::fs::hard_link(p("moved.py"), p("src/another-name.py")).unwrap();
    std::fs::remove_file(p("src/lib/m8.py")).unwrap();
    std::fs::remove_file(p("pipe")).unwrap();
    run(Command::new("chmod").arg("600").arg(p("src/lib/m9.py")));
    run(Command::new("setfattr")
        .args(["-n", "user.note", "-v", "café 100%"])
        .arg(p("src/lib/m10.py")));
    run(Command::new("truncate")
        .args(["-s", "5M"])
        .arg(p("big.bin")));
    let expected = walk(&m.path);
    m.unmount();
    let back = dir.join("back.json");
    strata_ok(&["dump", strata_url, back.to_str().unwrap(), "--juicefs"]);
    let back_url = format!("sqlite3://{}", dir.join("back.db").display());
    jfs(&["load", &back_url, back.to_str().unwrap()]);
    let seen = read_only_walk(&back_url, &dir.join("jfs"), &[]);
    assert_eq!(seen, expected, "JuiceFS shows what Strata showed");
    // New data is Strata's own blocks: no way back, said before anything is written.
    let vol = Volume::existing(strata_url);
    let m = vol.mount("strata-again");
    std::fs::write(m.path.join("new.txt"), b"written by Strata\n").unwrap();
    m.unmount();
    let refused = dir.join("refused.json");
    let (ok, out) = strata(&["dump", strata_url, refused.to_str().unwrap(), "--juicefs"]);
    assert!(!ok && out.contains("JuiceFS cannot read"), "{out}");
    assert!(!refused.exists());
}
