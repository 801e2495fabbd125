//! End-to-end checks that path tools act through the mount that serves the path, and that
//! secrets stay secret: `strata rmr` under `--subdir` removes what the mount shows, a
//! planted `.config` redirects nothing, a user removes only what `rm -r` would let them,
//! read-only mounts refuse, a password-protected engine needs no password from the tool;
//! the engine's password appears in no file another user can read, not in the log, not
//! in `ps`, and files holding data or secrets are created 0600/0700.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::*;

fn strata(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(STRATA)
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn path_tools_act_on_the_tree_the_mount_shows() {
    let vol = Volume::new();
    // No kernel caching on the second view of the tree: it shows what the volume holds.
    let full = vol.mount_with(
        "full",
        &[
            "--entry-cache",
            "0",
            "--attr-cache",
            "0",
            "--dir-entry-cache",
            "0",
        ],
    );
    sh(
        &full.path,
        "mkdir -p a/x/deep && echo keep > x && echo gone > a/x/deep/f && echo y > a/y",
    );
    let sub = vol.mount_with("sub", &["--subdir", "/a"]);
    ok(&strata(&["rmr"], &[&sub.path.join("x")]));
    assert!(full.path.join("x").exists(), "the volume root's x stays");
    assert!(!full.path.join("a/x").exists(), "the mount's x went");
    assert!(
        !sub.path.join("x").exists(),
        "and the kernel forgot it at once"
    );
    // info, summary, clone and compact through the subdir mount see its tree.
    let info = ok(&strata(&["info"], &[&sub.path.join("y")]));
    assert!(info.contains("length: 2"), "{info}");
    ok(&strata(
        &["clone"],
        &[&sub.path.join("y"), &sub.path.join("y2")],
    ));
    assert_eq!(std::fs::read(full.path.join("a/y2")).unwrap(), b"y\n");
    let summary = ok(&strata(&["summary"], &[&sub.path]));
    assert!(summary.contains(sub.path.to_str().unwrap()), "{summary}");
    ok(&strata(&["compact"], &[&sub.path]));
    // A planted .config names another engine: nothing follows it, in or out of a mount.
    let planted = vol.dir.path().join("planted");
    std::fs::create_dir_all(planted.join("y")).unwrap();
    std::fs::write(
        planted.join(".config"),
        format!("{{\"meta_url\": \"{}\"}}", vol.meta_url),
    )
    .unwrap();
    let err = failed(&strata(&["rmr"], &[&planted.join("y")]));
    assert!(err.contains("not on a mounted Strata volume"), "{err}");
    assert!(planted.join("y").exists());
    std::fs::write(
        full.path.join("a/.config"),
        b"{\"meta_url\": \"redis://evil:1/0\"}",
    )
    .unwrap();
    ok(&strata(&["info"], &[&full.path.join("a/y")]));
}

#[test]
fn path_tools_run_as_the_caller_and_respect_read_only_mounts() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p roots/inner mine && echo r > roots/inner/f && chmod 755 roots roots/inner \
         && echo m > mine/f && chown -R 65534:65534 mine && chmod 777 .",
    );
    let as_nobody = |args: &[&str], path: &Path| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", STRATA])
            .args(args)
            .arg(path)
            .output()
            .unwrap()
    };
    let err = failed(&as_nobody(&["rmr"], &m.path.join("roots")));
    assert!(err.contains("EACCES") || err.contains("ermission"), "{err}");
    assert!(
        m.path.join("roots/inner/f").exists(),
        "nothing of root's went"
    );
    ok(&as_nobody(&["rmr"], &m.path.join("mine")));
    assert!(!m.path.join("mine").exists());
    let ro = vol.mount_with("ro", &["--read-only"]);
    let err = failed(&strata(&["rmr"], &[&ro.path.join("roots")]));
    assert!(err.contains("EROFS"), "{err}");
    assert!(m.path.join("roots").exists());
}

/// Every file a user other than the mount's owner can read, the log, the mount's command
/// line and `.config` are free of the engine's password; files holding data or secrets
/// are the owner's alone; path tools work without the password.
#[test]
fn the_engine_password_appears_nowhere_others_can_read() {
    let server = std::env::var("STRATA_TEST_POSTGRES")
        .expect("STRATA_TEST_POSTGRES (scripts/test.sh starts PostgreSQL with a password)");
    let password = "strata-pg";
    assert!(server.contains(&format!(":{password}@")), "{server}");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!("{server}?sslmode=disable&prefix=pw{nanos}");
    let vol = Volume::on_engine(&url);
    // Others may walk the volume's directory: only each file's own mode protects it.
    std::fs::set_permissions(vol.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = vol.mount("mnt");
    sh(&m.path, "mkdir d && echo data > d/f && cat d/f > /dev/null");
    // The mount's own command line.
    let pid = mount_pid(&m.path);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(password),
        "password in ps: {}",
        String::from_utf8_lossy(&cmdline)
    );
    // Path tools need no password and print none.
    let info = ok(&Command::new(STRATA)
        .arg("info")
        .arg(m.path.join("d/f"))
        .env_remove("META_PASSWORD")
        .output()
        .unwrap());
    assert!(
        info.contains("length: 5") && !info.contains(password),
        "{info}"
    );
    // Nothing another user can read holds it: the volume's directory, the mount, the log.
    let found = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "grep"])
        .args(["-r", "-l", "-s", password])
        .arg(vol.dir.path())
        .arg(m.path.join(".config"))
        .arg(format!("/proc/{pid}/cmdline"))
        .output()
        .unwrap();
    assert!(
        found.stdout.is_empty(),
        "readable by others: {}",
        String::from_utf8_lossy(&found.stdout)
    );
    let log = std::fs::read_to_string(&m.log).unwrap();
    assert!(!log.contains(password), "password in the log:\n{log}");
    assert_eq!(mode_of(&m.log), 0o600, "log");
    assert_eq!(
        mode_of(&vol.dir.path().join("bucket")),
        0o700,
        "bucket directory"
    );
    let config = std::fs::read_to_string(m.path.join(".config")).unwrap();
    assert!(
        config.contains("\"meta_url\": \"postgres://strata"),
        "{config}"
    );
    // A failing command with a password in its URL does not print it.
    let wrong = Command::new(STRATA)
        .args(["status", &url.replace(password, "wrong-secret-pw")])
        .output()
        .unwrap();
    let err = failed(&wrong);
    assert!(!err.contains("wrong-secret-pw"), "{err}");
}

#[test]
fn embedded_volumes_keep_their_database_and_dumps_private() {
    let vol = Volume::new();
    let db = vol.meta_url.trim_start_matches("sqlite3://").to_string();
    assert_eq!(mode_of(Path::new(&db)), 0o600, "sqlite database");
    let dump = vol.dir.path().join("meta.json");
    ok(&strata(&["dump", &vol.meta_url], &[&dump]));
    assert_eq!(mode_of(&dump), 0o600, "dump");
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The pid of the mount process serving `mountpoint` (its command line names it).
fn mount_pid(mountpoint: &Path) -> u32 {
    let want = mountpoint.to_str().unwrap();
    for entry in std::fs::read_dir("/proc").unwrap() {
        let entry = entry.unwrap();
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.contains(&b"mount".as_slice()) && args.contains(&want.as_bytes()) {
            return pid;
        }
    }
    panic!("no mount process for {want}")
}
