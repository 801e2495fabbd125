//! End-to-end tests of `strata gateway` with real S3 clients: boto3 (current and < 1.36,
//! through tests/s3/suite.py, versioning.py, objectlock.py and access.py), the AWS CLI,
//! rclone and s3cmd; files seen through a FUSE mount of the same volume; two gateway
//! processes on one volume; and a Strata volume whose object store is another volume's
//! gateway. The clients come from the README's
//! test command (`scripts/test.sh`); a missing one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::io::Write;
use std::path::Path;
use std::process::Command;

mod common;

use common::*;

const KEY: &str = "gateway-key";
const SECRET: &str = "gateway-secret-123";

/// Start a `strata gateway` of `vol` with the test's root key pair.
fn gateway(vol: &Volume, name: &str, extra: &[&str]) -> Daemon {
    let mut args = vec!["gateway", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    args.extend_from_slice(extra);
    let envs = [
        ("STRATA_ACCESS_KEY", KEY),
        ("STRATA_SECRET_KEY", SECRET),
        ("RUST_LOG", "info,s3s::ops=off"),
    ];
    Daemon::start(vol, name, &args, &envs)
}

/// A tool from the environment the test command prepares.
fn tool(var: &str) -> String {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: run the tests through scripts/test.sh"))
}

fn aws(gw: &Daemon, args: &[&str]) -> String {
    aws_with(gw, &[], args)
}

fn aws_with(gw: &Daemon, options: &[&str], args: &[&str]) -> String {
    let out = run(aws_cli(&gw.url, KEY, SECRET).args(options).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run the boto3 script `tests/s3/NAME` under `python_var`'s Python against `gws` (the
/// first as S3_ENDPOINT, the second as S3_ENDPOINT2) and the mount `m`.
fn run_suite(python_var: &str, name: &str, gws: &[&Daemon], m: &Mount) {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/s3")
        .join(name);
    let mut cmd = Command::new(tool(python_var));
    cmd.arg(&suite)
        .env("S3_ENDPOINT", &gws[0].url)
        .env("S3_ACCESS_KEY", KEY)
        .env("S3_SECRET_KEY", SECRET)
        .env("FUSE_ROOT", &m.path);
    if let Some(second) = gws.get(1) {
        cmd.env("S3_ENDPOINT2", &second.url);
    }
    let out = cmd.output().unwrap();
    let logs: Vec<String> = gws.iter().map(|gw| gw.log_text()).collect();
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}\ngateway logs:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        logs.join("\n")
    );
}

/// The main boto3 suite (tests/s3/suite.py), on two gateway processes of one volume:
/// what one writes, the other reads, lists and completes.
fn boto3_suite(python_var: &str) {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw1 = gateway(&vol, "gw1", &["--multi-buckets"]);
    let gw2 = gateway(&vol, "gw2", &["--multi-buckets"]);
    run_suite(python_var, "suite.py", &[&gw1, &gw2], &m);
    gw1.stop();
    gw2.stop();
}

#[test]
fn boto3_current_passes_the_suite() {
    boto3_suite("STRATA_TEST_BOTO3_PY");
}

#[test]
fn boto3_before_1_36_passes_the_suite() {
    boto3_suite("STRATA_TEST_BOTO3_OLD_PY");
}

/// A boto3 suite that takes two gateway processes of one volume and a mount of it:
/// versioned buckets (tests/s3/versioning.py: current versions checked through the
/// mount) and object lock (tests/s3/objectlock.py: the mount refuses every change to a
/// locked object).
fn two_gateway_suite(python_var: &str, script: &str) {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw1 = gateway(&vol, "gw1", &["--multi-buckets"]);
    let gw2 = gateway(&vol, "gw2", &["--multi-buckets"]);
    run_suite(python_var, script, &[&gw1, &gw2], &m);
    gw1.stop();
    gw2.stop();
}

#[test]
fn boto3_current_passes_the_versioning_suite() {
    two_gateway_suite("STRATA_TEST_BOTO3_PY", "versioning.py");
}

#[test]
fn boto3_before_1_36_passes_the_versioning_suite() {
    two_gateway_suite("STRATA_TEST_BOTO3_OLD_PY", "versioning.py");
}

#[test]
fn boto3_current_passes_the_object_lock_suite() {
    two_gateway_suite("STRATA_TEST_BOTO3_PY", "objectlock.py");
}

#[test]
fn boto3_before_1_36_passes_the_object_lock_suite() {
    two_gateway_suite("STRATA_TEST_BOTO3_OLD_PY", "objectlock.py");
}

/// rclone turns versioning on, keeps an overwritten file's old version, lists it with
/// `--s3-versions` and reads it back by its versioned name.
#[test]
fn rclone_keeps_and_reads_old_versions() {
    let vol = Volume::new();
    let gw = gateway(&vol, "gw", &["--multi-buckets"]);
    let dir = vol.dir.path();
    let conf = rclone_conf(&gw, dir);
    let rclone = |args: &[&str]| -> String {
        let out = run(Command::new("rclone")
            .env_remove("AWS_CA_BUNDLE")
            .arg("--config")
            .arg(&conf)
            .args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    rclone(&["mkdir", "gw:backups"]);
    rclone(&["backend", "versioning", "gw:backups", "Enabled"]);
    let status = rclone(&["backend", "versioning", "gw:backups"]);
    assert_eq!(status.trim(), "Enabled");
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("db.dump"), b"monday's dump").unwrap();
    rclone(&["copy", src.to_str().unwrap(), "gw:backups"]);
    std::fs::write(src.join("db.dump"), b"tuesday's dump, longer").unwrap();
    rclone(&["copy", src.to_str().unwrap(), "gw:backups"]);
    let listed = rclone(&["lsf", "--s3-versions", "gw:backups"]);
    let names: Vec<&str> = listed.lines().collect();
    assert_eq!(names.len(), 2, "{listed}");
    let old = names
        .iter()
        .find(|n| **n != "db.dump")
        .unwrap_or_else(|| panic!("no old version in {listed}"));
    assert!(
        old.starts_with("db-v") && old.ends_with(".dump"),
        "{listed}"
    );
    let got = rclone(&["cat", "--s3-versions", &format!("gw:backups/{old}")]);
    assert_eq!(got, "monday's dump");
    assert_eq!(
        rclone(&["cat", "gw:backups/db.dump"]),
        "tuesday's dump, longer"
    );
    gw.stop();
}

/// An rclone config in `dir` naming `gw` as the remote `gw:`.
fn rclone_conf(gw: &Daemon, dir: &Path) -> std::path::PathBuf {
    rclone_s3_conf(dir, &gw.url, (KEY, SECRET))
}

/// The AWS CLI's `s3` and `s3api`, with files checked through the mount both ways, and
/// UTF-8 metadata kept exactly (sent raw by curl, returned RFC 2047-encoded as S3 does).
#[test]
fn aws_cli_and_the_mount_see_the_same_files() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw = gateway(&vol, "gw", &[]);
    let local = vol.dir.path().join("local");
    std::fs::create_dir_all(local.join("sub")).unwrap();
    let big: Vec<u8> = (0..20_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(local.join("big.bin"), &big).unwrap();
    std::fs::write(local.join("sub/small.txt"), b"small").unwrap();
    let bucket = "s3://e2e-vol";
    aws(
        &gw,
        &[
            "s3",
            "sync",
            "--only-show-errors",
            local.to_str().unwrap(),
            &format!("{bucket}/data"),
        ],
    );
    assert_eq!(std::fs::read(m.path.join("data/big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(m.path.join("data/sub/small.txt")).unwrap(),
        b"small"
    );
    std::fs::write(m.path.join("data/from-fuse.txt"), b"written by posix").unwrap();
    let listing = aws(&gw, &["s3", "ls", "--recursive", bucket]);
    for key in ["data/big.bin", "data/sub/small.txt", "data/from-fuse.txt"] {
        assert!(listing.contains(key), "{listing}");
    }
    let back = vol.dir.path().join("back");
    aws(
        &gw,
        &[
            "s3",
            "cp",
            "--only-show-errors",
            "--recursive",
            &format!("{bucket}/data"),
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(back.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(back.join("from-fuse.txt")).unwrap(),
        b"written by posix"
    );
    let head = aws(
        &gw,
        &[
            "s3api",
            "head-object",
            "--bucket",
            "e2e-vol",
            "--key",
            "data/big.bin",
        ],
    );
    assert!(head.contains("\"ETag\": \"\\\""), "{head}");
    assert!(head.contains("-"), "a 20 MB upload is multipart: {head}");
    // s3api: checksums (CRC32C here: boto3 needs an extra package for it) and delete-objects.
    let f = vol.dir.path().join("ck");
    std::fs::write(&f, b"checksummed").unwrap();
    let put = aws(
        &gw,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "e2e-vol",
            "--key",
            "ck",
            "--body",
            f.to_str().unwrap(),
            "--checksum-algorithm",
            "CRC32C",
        ],
    );
    assert!(put.contains("ChecksumCRC32C"), "{put}");
    let del = aws(
        &gw,
        &[
            "s3api",
            "delete-objects",
            "--bucket",
            "e2e-vol",
            "--delete",
            r#"{"Objects":[{"Key":"ck"},{"Key":"data/sub/"}]}"#,
        ],
    );
    assert!(del.contains("\"ck\""), "{del}");
    aws(
        &gw,
        &[
            "s3",
            "rm",
            "--only-show-errors",
            "--recursive",
            &format!("{bucket}/data"),
        ],
    );
    assert!(
        !m.path.join("data").exists(),
        "emptied directories go with their last object"
    );
    // UTF-8 metadata, raw on the wire.
    let url = format!("{}/e2e-vol/utf8", gw.url);
    let sig = [
        "--user",
        &format!("{KEY}:{SECRET}"),
        "--aws-sigv4",
        "aws:amz:us-east-1:s3",
        "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
    ];
    let one = vol.dir.path().join("one");
    std::fs::write(&one, b"1").unwrap();
    run(Command::new("curl")
        .arg("-sf")
        .arg("-T")
        .arg(&one)
        .args(sig)
        .args(["-H", "x-amz-meta-name: Grüße ✓ 日本", &url]));
    let head = run(Command::new("curl").args(["-sfI"]).args(sig).arg(&url));
    let text = String::from_utf8_lossy(&head.stdout);
    // "Grüße ✓ 日本" as RFC 2047 base64.
    assert!(
        text.contains("x-amz-meta-name: =?UTF-8?B?R3LDvMOfZSDinJMg5pel5pys?="),
        "{text}"
    );
    gw.stop();
}

/// rclone and s3cmd (Debian packages) against the gateway.
#[test]
fn rclone_and_s3cmd_round_trip() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw = gateway(&vol, "gw", &["--multi-buckets"]);
    let dir = vol.dir.path();
    let conf = rclone_conf(&gw, dir);
    let src = dir.join("tree");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    for i in 0..50 {
        std::fs::write(
            src.join(format!("a/b/f{i}")),
            format!("file {i}").repeat(i + 1),
        )
        .unwrap();
    }
    std::fs::write(src.join("a-b"), vec![7u8; 9 << 20]).unwrap();
    let rclone = |args: &[&str]| {
        // A CA bundle from the environment is for HTTPS; rclone refuses it on plain HTTP.
        run(Command::new("rclone")
            .env_remove("AWS_CA_BUNDLE")
            .arg("--config")
            .arg(&conf)
            .args(args));
    };
    rclone(&["mkdir", "gw:rclone-bucket"]);
    rclone(&["copy", src.to_str().unwrap(), "gw:rclone-bucket/tree"]);
    // `check` compares sizes and MD5s (ETags) of every file.
    rclone(&["check", src.to_str().unwrap(), "gw:rclone-bucket/tree"]);
    assert_eq!(
        std::fs::read(m.path.join("rclone-bucket/tree/a/b/f3")).unwrap(),
        b"file 3".repeat(4)
    );
    let s3cfg = dir.join("s3cfg");
    let host = gw.url.trim_start_matches("http://");
    std::fs::write(
        &s3cfg,
        format!("[default]\naccess_key = {KEY}\nsecret_key = {SECRET}\nhost_base = {host}\nhost_bucket = {host}\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n"),
    )
    .unwrap();
    let s3cmd = |args: &[&str]| -> String {
        let out = run(Command::new("s3cmd").arg("-c").arg(&s3cfg).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    s3cmd(&["mb", "s3://s3cmd-bucket"]);
    s3cmd(&[
        "put",
        "--recursive",
        src.join("a").to_str().unwrap(),
        "s3://s3cmd-bucket/",
    ]);
    let listed = s3cmd(&["ls", "--recursive", "s3://s3cmd-bucket/"]);
    assert_eq!(listed.lines().count(), 50, "{listed}");
    let got = dir.join("got");
    s3cmd(&["get", "s3://s3cmd-bucket/a/b/f7", got.to_str().unwrap()]);
    assert_eq!(std::fs::read(&got).unwrap(), b"file 7".repeat(8));
    s3cmd(&["del", "--recursive", "--force", "s3://s3cmd-bucket/"]);
    s3cmd(&["rb", "s3://s3cmd-bucket"]);
    assert!(!m.path.join("s3cmd-bucket").exists());
    gw.stop();
}

/// Two gateway processes on one volume: an upload begun on one is completed on the other.
#[test]
fn two_gateways_share_multipart_uploads() {
    let vol = Volume::new();
    let one = gateway(&vol, "gw1", &[]);
    let two = gateway(&vol, "gw2", &[]);
    let created = aws(
        &one,
        &[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            "e2e-vol",
            "--key",
            "shared/obj",
            "--query",
            "UploadId",
            "--output",
            "text",
        ],
    );
    let id = created.trim();
    let part = vol.dir.path().join("part");
    std::fs::write(&part, vec![3u8; 6 << 20]).unwrap();
    let last = vol.dir.path().join("last");
    std::fs::write(&last, b"last part").unwrap();
    let e1 = aws(
        &one,
        &[
            "s3api",
            "upload-part",
            "--bucket",
            "e2e-vol",
            "--key",
            "shared/obj",
            "--upload-id",
            id,
            "--part-number",
            "1",
            "--body",
            part.to_str().unwrap(),
            "--query",
            "ETag",
            "--output",
            "text",
        ],
    );
    let e2 = aws(
        &two,
        &[
            "s3api",
            "upload-part",
            "--bucket",
            "e2e-vol",
            "--key",
            "shared/obj",
            "--upload-id",
            id,
            "--part-number",
            "2",
            "--body",
            last.to_str().unwrap(),
            "--query",
            "ETag",
            "--output",
            "text",
        ],
    );
    let parts = aws(
        &two,
        &[
            "s3api",
            "list-parts",
            "--bucket",
            "e2e-vol",
            "--key",
            "shared/obj",
            "--upload-id",
            id,
            "--query",
            "length(Parts)",
        ],
    );
    assert_eq!(parts.trim(), "2");
    let layout = format!(
        r#"{{"Parts":[{{"PartNumber":1,"ETag":{}}},{{"PartNumber":2,"ETag":{}}}]}}"#,
        serde_json::to_string(e1.trim()).unwrap(),
        serde_json::to_string(e2.trim()).unwrap()
    );
    let done = aws(
        &two,
        &[
            "s3api",
            "complete-multipart-upload",
            "--bucket",
            "e2e-vol",
            "--key",
            "shared/obj",
            "--upload-id",
            id,
            "--multipart-upload",
            &layout,
        ],
    );
    assert!(done.contains("-2"), "{done}");
    let back = vol.dir.path().join("back");
    aws(
        &one,
        &[
            "s3",
            "cp",
            "--only-show-errors",
            "s3://e2e-vol/shared/obj",
            back.to_str().unwrap(),
        ],
    );
    let mut want = vec![3u8; 6 << 20];
    want.extend_from_slice(b"last part");
    assert_eq!(std::fs::read(&back).unwrap(), want);
    one.stop();
    two.stop();
}

/// A volume whose object store is another volume's gateway: Strata's own S3 client
/// against Strata's S3 server.
#[test]
fn a_volume_can_live_on_a_gateway() {
    let lower = Volume::new();
    let gw = gateway(&lower, "gw", &["--multi-buckets"]);
    aws(&gw, &["s3", "mb", "s3://upper-store"]);
    let dir = tempfile::tempdir().unwrap();
    let meta_url = format!("sqlite3://{}", dir.path().join("upper.db").display());
    run(Command::new(STRATA)
        .args(["format", &meta_url, "upper", "--storage", "s3", "--bucket"])
        .arg(format!("{}/upper-store", gw.url))
        .args(["--access-key", KEY, "--block-size", "1M"])
        .env("SECRET_KEY", SECRET));
    let upper = Volume::existing(&meta_url);
    let m = upper.mount("upper");
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let mut f = std::fs::File::create(m.path.join("file")).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.unmount();
    let again = upper.mount("again");
    assert_eq!(std::fs::read(again.path.join("file")).unwrap(), data);
    let objects = aws(&gw, &["s3", "ls", "--recursive", "s3://upper-store"]);
    assert!(
        objects.lines().count() >= 5,
        "blocks of the upper volume: {objects}"
    );
    drop(again);
    gw.stop();
}

/// `--cert-file/--key-file`: HTTPS with a certificate the client trusts; plain HTTP to it
/// fails.
#[test]
fn https_with_a_certificate() {
    let vol = Volume::new();
    let dir = vol.dir.path();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    let gw = gateway(
        &vol,
        "gw",
        &[
            "--cert-file",
            cert.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
        ],
    );
    assert!(gw.url.starts_with("https://"), "{}", gw.url);
    let file = dir.join("f");
    std::fs::write(&file, b"over tls").unwrap();
    let ca = ["--ca-bundle", cert.to_str().unwrap()];
    aws_with(
        &gw,
        &ca,
        &[
            "s3",
            "cp",
            "--only-show-errors",
            file.to_str().unwrap(),
            "s3://e2e-vol/f",
        ],
    );
    let listed = aws_with(&gw, &ca, &["s3", "ls", "s3://e2e-vol/"]);
    assert!(listed.contains(" f"), "{listed}");
    let plain = gw.url.replacen("https://", "http://", 1);
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &plain])
        .output()
        .unwrap();
    assert_ne!(
        String::from_utf8_lossy(&out.stdout),
        "200",
        "plain HTTP must not be served"
    );
    gw.stop();
}

/// Users added once (while two gateways run) are accepted by both; bucket owners,
/// policies, ACLs, the public access block, CORS and POST object through boto3
/// (tests/s3/access.py); a removed user is refused at once.
#[test]
fn users_owners_policies_acls_and_cors_on_two_gateways() {
    let vol = Volume::new();
    let gw1 = gateway(&vol, "gw1", &["--multi-buckets"]);
    let gw2 = gateway(&vol, "gw2", &["--multi-buckets"]);
    let (alice, bob) = ("alice-secret-0001", "bob-secret-0002");
    for (name, secret) in [("alice", alice), ("bob", bob)] {
        let out = gateway_user(
            &vol,
            &["add", name, "--secret-stdin"],
            &format!("{secret}\n"),
        );
        assert!(out.status.success(), "{out:?}");
    }
    let again = gateway_user(
        &vol,
        &["add", "alice", "--secret-stdin"],
        "another-secret\n",
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let bad = gateway_user(&vol, &["add", "../x"], "");
    assert!(!bad.status.success());
    // A generated secret is printed once, and works.
    let carol = gateway_user(&vol, &["add", "carol"], "");
    let text = String::from_utf8_lossy(&carol.stdout).into_owned();
    let secret = text
        .lines()
        .find_map(|l| l.strip_prefix("secret key: "))
        .unwrap_or_else(|| panic!("no secret in {text}"))
        .to_string();
    assert_eq!(secret.len(), 40, "{text}");
    let listed = gateway_user(&vol, &["list"], "");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for name in ["alice", "bob", "carol"] {
        assert!(listed.contains(name), "{listed}");
    }
    assert!(
        !listed.contains(alice) && !listed.contains(&secret),
        "{listed}"
    );
    let carol_lists = |gw: &Daemon| {
        Command::new(tool("STRATA_TEST_AWS"))
            .args([
                "--endpoint-url",
                &gw.url,
                "--region",
                "us-east-1",
                "s3",
                "ls",
            ])
            .env("AWS_ACCESS_KEY_ID", "carol")
            .env("AWS_SECRET_ACCESS_KEY", &secret)
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .output()
            .unwrap()
    };
    let ls = carol_lists(&gw2);
    assert!(ls.status.success(), "{ls:?}");

    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/access.py");
    for python in ["STRATA_TEST_BOTO3_PY", "STRATA_TEST_BOTO3_OLD_PY"] {
        let out = Command::new(tool(python))
            .arg(&suite)
            .env("S3_ENDPOINT", &gw1.url)
            .env("S3_ENDPOINT2", &gw2.url)
            .env("S3_ACCESS_KEY", KEY)
            .env("S3_SECRET_KEY", SECRET)
            .env("ALICE_SECRET", alice)
            .env("BOB_SECRET", bob)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "access suite failed under {python}:\n{}\n{}\ngateway log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            gw1.log_text()
        );
    }

    // Removed once, refused by both gateways from the next request on.
    let removed = gateway_user(&vol, &["remove", "carol"], "");
    assert!(removed.status.success(), "{removed:?}");
    for gw in [&gw1, &gw2] {
        let ls = carol_lists(gw);
        assert!(!ls.status.success());
        assert!(
            String::from_utf8_lossy(&ls.stderr).contains("InvalidAccessKeyId"),
            "{ls:?}"
        );
    }
    gw1.stop();
    gw2.stop();
}

/// `strata objbench` measures a gateway (s3) and a local directory (file): every phase
/// prints a row, and it leaves no objects behind.
#[test]
fn objbench_measures_a_gateway_and_a_directory() {
    let vol = Volume::new();
    let gw = gateway(&vol, "gw", &["--multi-buckets"]);
    aws(&gw, &["s3", "mb", "s3://bench"]);
    let local = vol.dir.path().join("local-bucket");
    std::fs::create_dir_all(&local).unwrap();
    let url = format!("{}/bench", gw.url);
    let runs: [(&str, &str); 2] = [(&url, "s3"), (local.to_str().unwrap(), "file")];
    for (bucket, storage) in runs {
        let out = run(Command::new(STRATA)
            .args(["objbench", bucket, "--storage", storage])
            .args(["--big-object-size", "8M", "--block-size", "1M"])
            .args([
                "--small-objects",
                "50",
                "--small-object-size",
                "4K",
                "-p",
                "4",
            ])
            .env("ACCESS_KEY", KEY)
            .env("SECRET_KEY", SECRET));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (item, count) in [
            ("put big (block)", "8"),
            ("get big (block)", "8"),
            ("put small", "50"),
            ("get small", "50"),
            ("head small", "50"),
            ("delete small", "50"),
        ] {
            let row = text
                .lines()
                .find(|l| l.starts_with(item))
                .unwrap_or_else(|| panic!("no {item} row in {text}"));
            assert_eq!(
                row[item.len()..].split_whitespace().next(),
                Some(count),
                "{row}"
            );
        }
        assert!(text.contains("list (1000/page)"), "{text}");
    }
    assert_eq!(aws(&gw, &["s3", "ls", "--recursive", "s3://bench"]), "");
    gw.stop();
}

/// `--root-squash` (the gateway runs as root here) and the default umask 022: uploads are
/// owned by the squashed user, files 644 and directories 755, as a plain mount shows.
#[test]
fn a_squashed_gateway_uploads_as_the_squashed_user() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw = gateway(&vol, "gw", &["--root-squash", "1234:1235"]);
    let local = vol.dir.path().join("obj.txt");
    std::fs::write(&local, b"object").unwrap();
    aws(
        &gw,
        &[
            "s3",
            "cp",
            "--only-show-errors",
            local.to_str().unwrap(),
            "s3://e2e-vol/dir/obj.txt",
        ],
    );
    let out = sh(&m.path, "stat -c '%n %u:%g %a' dir dir/obj.txt");
    assert_eq!(out, "dir 1234:1235 755\ndir/obj.txt 1234:1235 644\n");
}
