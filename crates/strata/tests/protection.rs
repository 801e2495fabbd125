//! End-to-end tests of immutable files and S3 object lock through every front end: a
//! file made immutable with `chattr +i` on a FUSE mount, or locked through the S3
//! gateway, cannot be removed, replaced, truncated or written through the mount (as
//! root), WebDAV, `strata rmr` or `strata gc --delete`; `chattr +a` takes appends only;
//! and rclone backs up into a bucket with a default retention whose versions outlive
//! its deletes. (The SDK's side is in crates/strata-py/tests/test_protection.py, the
//! trash's expiry in the metadata conformance suite, run on every engine.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::fs::OpenOptions;
use std::io::Write;
use std::process::Command;

mod common;

use common::*;

const KEY: &str = "gateway-key";
const SECRET: &str = "gateway-secret-123";
const DAV_USER: &str = "dav-user";
const DAV_PASSWORD: &str = "dav-password-1";

fn gateway(vol: &Volume) -> Daemon {
    multi_bucket_gateway(vol, "gw", KEY, SECRET)
}

fn webdav(vol: &Volume) -> Daemon {
    let args = ["webdav", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    let envs = [("WEBDAV_USER", DAV_USER), ("WEBDAV_PASSWORD", DAV_PASSWORD)];
    Daemon::start(vol, "dav", &args, &envs)
}

/// The status of a WebDAV request with the server's credentials.
fn dav(args: &[&str]) -> u16 {
    let creds = format!("{DAV_USER}:{DAV_PASSWORD}");
    let mut all = vec!["-u", creds.as_str()];
    all.extend_from_slice(args);
    curl(&all).0
}

fn eperm<T: std::fmt::Debug>(what: &str, r: std::io::Result<T>) {
    match r {
        Err(e) => assert_eq!(e.raw_os_error(), Some(1), "{what}: {e}"),
        Ok(v) => panic!("{what} succeeded: {v:?}"),
    }
}

/// Every way the mount, WebDAV, `rmr` and `gc` could change or remove `dir/name` is
/// refused, and its content stays `content`.
fn assert_untouchable(
    vol: &Volume,
    m: &Mount,
    dav_url: &str,
    (dir, name): (&str, &str),
    content: &[u8],
) {
    let d = m.path.join(dir);
    let path = d.join(name);
    eperm("rm", std::fs::remove_file(&path));
    eperm("mv away", std::fs::rename(&path, d.join("moved")));
    std::fs::write(d.join("other"), b"other").unwrap();
    eperm("mv over", std::fs::rename(d.join("other"), &path));
    std::fs::remove_file(d.join("other")).unwrap();
    eperm(
        "truncate",
        OpenOptions::new().write(true).truncate(true).open(&path),
    );
    eperm("write", OpenOptions::new().write(true).open(&path));
    eperm("append", OpenOptions::new().append(true).open(&path));
    eperm("ln", std::fs::hard_link(&path, d.join("alias")));
    let url = format!("{dav_url}{dir}/{name}");
    assert_eq!(dav(&["-X", "DELETE", &url]), 403, "WebDAV DELETE");
    assert_eq!(
        dav(&["-X", "PUT", "--data-binary", "new", &url]),
        403,
        "WebDAV PUT"
    );
    let to = format!("Destination: {dav_url}{dir}/renamed");
    assert_eq!(dav(&["-X", "MOVE", "-H", &to, &url]), 403, "WebDAV MOVE");
    let (ok, out) = strata(&["rmr", d.to_str().unwrap()]);
    assert!(!ok, "rmr of a tree holding {name} succeeded: {out}");
    assert!(
        out.contains("Operation not permitted") || out.contains("EPERM"),
        "{out}"
    );
    strata_ok(&["gc", &vol.meta_url, "--delete", "--safety-window", "0"]);
    assert_eq!(std::fs::read(&path).unwrap(), content);
}

#[test]
fn chattr_flags_bind_the_mount_webdav_rmr_and_gc() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let dav_server = webdav(&vol);
    let dav_url = format!("{}/", dav_server.url.trim_end_matches('/'));
    let dir = m.path.join("d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("frozen"), b"kept as is").unwrap();
    sh(&dir, "chattr +i frozen");
    assert!(
        sh(&dir, "lsattr frozen").starts_with("----i"),
        "lsattr shows the flag"
    );
    assert_untouchable(&vol, &m, &dav_url, ("d", "frozen"), b"kept as is");
    // Only root changes the flag; root may clear it, then the file goes as any other.
    let as_nobody = Command::new("su")
        .args(["nobody", "-s", "/bin/sh", "-c"])
        .arg(format!("chattr -i {}", dir.join("frozen").display()))
        .output()
        .unwrap();
    assert!(!as_nobody.status.success());
    sh(&dir, "chattr -i frozen && rm frozen");

    // Append-only: appends go in, nothing else.
    std::fs::write(dir.join("log"), b"one\n").unwrap();
    sh(&dir, "chattr +a log");
    OpenOptions::new()
        .append(true)
        .open(dir.join("log"))
        .unwrap()
        .write_all(b"two\n")
        .unwrap();
    eperm(
        "overwrite",
        OpenOptions::new().write(true).open(dir.join("log")),
    );
    eperm("rm", std::fs::remove_file(dir.join("log")));
    assert_eq!(std::fs::read(dir.join("log")).unwrap(), b"one\ntwo\n");
    // Other flags are not kept: chattr says so.
    let noatime = Command::new("chattr")
        .arg("+A")
        .arg(dir.join("log"))
        .output()
        .unwrap();
    assert!(!noatime.status.success());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "nothing but the log is left"
    );
}

#[test]
fn an_object_lock_binds_the_mount_webdav_rmr_and_gc() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let gw = gateway(&vol);
    let dav_server = webdav(&vol);
    let dav_url = format!("{}/", dav_server.url.trim_end_matches('/'));
    let s3api = |args: &[&str]| {
        let out = run(aws_cli(&gw.url, KEY, SECRET).arg("s3api").args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    s3api(&[
        "create-bucket",
        "--bucket",
        "vault",
        "--object-lock-enabled-for-bucket",
    ]);
    let body = vol.dir.path().join("body");
    std::fs::write(&body, b"signed contract").unwrap();
    let until = "2099-01-01T00:00:00Z";
    s3api(&[
        "put-object",
        "--bucket",
        "vault",
        "--key",
        "docs/contract",
        "--body",
        body.to_str().unwrap(),
        "--object-lock-mode",
        "COMPLIANCE",
        "--object-lock-retain-until-date",
        until,
    ]);
    let head = s3api(&["head-object", "--bucket", "vault", "--key", "docs/contract"]);
    assert!(
        head.contains("COMPLIANCE") && head.contains("2099-01-01"),
        "{head}"
    );
    let path = m.path.join("vault/docs/contract");
    assert!(eventually(std::time::Duration::from_secs(10), || path.exists()));
    assert_untouchable(
        &vol,
        &m,
        &dav_url,
        ("vault/docs", "contract"),
        b"signed contract",
    );
    // Clearing the chattr flags does not lift a lock.
    let cleared = Command::new("chattr")
        .arg("-i")
        .arg(&path)
        .output()
        .unwrap();
    assert!(cleared.status.success());
    eperm("rm after chattr -i", std::fs::remove_file(&path));
    gw.stop();
}

/// rclone backs up into a bucket whose default retention locks every version it
/// writes: its deletes leave delete markers, the locked versions stay listed and
/// readable, and removing them for good is refused.
#[test]
fn rclone_backups_outlive_their_deletes_in_a_locked_bucket() {
    let vol = Volume::new();
    let gw = gateway(&vol);
    let dir = vol.dir.path();
    let s3api = |args: &[&str]| {
        run(aws_cli(&gw.url, KEY, SECRET).arg("s3api").args(args));
    };
    s3api(&[
        "create-bucket",
        "--bucket",
        "backups",
        "--object-lock-enabled-for-bucket",
    ]);
    let rule = r#"{"ObjectLockEnabled":"Enabled","Rule":{"DefaultRetention":{"Mode":"COMPLIANCE","Days":1}}}"#;
    s3api(&[
        "put-object-lock-configuration",
        "--bucket",
        "backups",
        "--object-lock-configuration",
        rule,
    ]);
    let conf = rclone_s3_conf(dir, &gw.url, (KEY, SECRET));
    let rclone = |args: &[&str]| {
        Command::new("rclone")
            .env_remove("AWS_CA_BUNDLE")
            .arg("--config")
            .arg(&conf)
            .args(args)
            .output()
            .unwrap()
    };
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("db.dump"), b"monday").unwrap();
    let copied = rclone(&["copy", src.to_str().unwrap(), "gw:backups"]);
    assert!(copied.status.success(), "{copied:?}");
    // An attacker with the keys deletes the backup: a delete marker hides it...
    assert!(rclone(&["delete", "gw:backups"]).status.success());
    assert!(rclone(&["lsf", "gw:backups"]).stdout.is_empty());
    let listed = rclone(&["lsf", "--s3-versions", "gw:backups"]);
    let names = String::from_utf8_lossy(&listed.stdout).into_owned();
    let old = names
        .lines()
        .find(|n| n.starts_with("db-v") && n.ends_with(".dump"))
        .unwrap_or_else(|| panic!("no locked version listed: {names}"));
    let got = rclone(&["cat", "--s3-versions", &format!("gw:backups/{old}")]);
    assert_eq!(got.stdout, b"monday");
    // ...and erasing the hidden versions is refused for the locked one (the marker
    // goes, which brings the backup back).
    let erased = rclone(&["backend", "cleanup-hidden", "gw:backups"]);
    let said = String::from_utf8_lossy(&erased.stderr);
    assert!(
        !erased.status.success() && said.contains("AccessDenied"),
        "{said}"
    );
    let restored = dir.join("restored");
    let back = rclone(&["copyto", "gw:backups/db.dump", restored.to_str().unwrap()]);
    assert!(back.status.success(), "{back:?}");
    assert_eq!(std::fs::read(&restored).unwrap(), b"monday");
    gw.stop();
}
