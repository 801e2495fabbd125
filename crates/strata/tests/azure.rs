//! Azure Blob Storage end to end, on Azurite (started by scripts/test.sh): a volume whose
//! data lives in an Azure container (`--storage wasb`), written and read back through
//! `strata sync` into and out of it, checked by fsck; `strata sync` between a local tree
//! and a container (`wasb://`), with a wrong key and a missing container reported in one
//! line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::process::{Command, Output};

use common::{STRATA, count, sh, test_server, tree, unique_prefix};
use strata_object::conformance::{AZURITE_ACCOUNT, AZURITE_KEY, TEST_BUCKET};

fn strata(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(STRATA)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

fn ok(args: &[&str], envs: &[(&str, &str)]) -> String {
    let out = strata(args, envs);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "strata {args:?} failed:\n{said}");
    said.lines().last().unwrap_or_default().to_string()
}

#[test]
fn a_volume_on_azurite_and_sync_through_a_container() {
    let azurite = test_server("STRATA_TEST_AZURITE");
    let host = azurite.trim_start_matches("http://").trim_end_matches('/');
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "mkdir -p a/b && echo one > a/1 && echo two > a/b/2 && head -c 9000000 /dev/urandom > big",
    );

    // A volume whose blocks live in the container.
    let name = unique_prefix("az");
    let meta = format!("sqlite3://{}", tmp.path().join("meta.db").display());
    let bucket = format!("{azurite}/{AZURITE_ACCOUNT}/{TEST_BUCKET}");
    ok(
        &[
            "format",
            &meta,
            &name,
            "--storage",
            "wasb",
            "--bucket",
            &bucket,
            "--access-key",
            AZURITE_ACCOUNT,
            "--secret-key",
            AZURITE_KEY,
        ],
        &[],
    );
    let env = [("VOL", meta.as_str())];
    let copied = ok(&["sync", src.to_str().unwrap(), "strata://VOL/data"], &env);
    assert_eq!(count(&copied, "copied"), 3, "{copied}");
    let fsck = strata(&["fsck", &meta], &[]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );

    // Volume → container → local, by wasb:// addresses.
    let container = format!(
        "wasb://{AZURITE_ACCOUNT}:{AZURITE_KEY}@{TEST_BUCKET}.{host}/{}",
        unique_prefix("sync")
    );
    let up = ok(
        &["sync", "--check-new", "strata://VOL/data", &container],
        &env,
    );
    assert_eq!(
        (count(&up, "copied"), count(&up, "checked")),
        (3, 3),
        "{up}"
    );
    let back = tmp.path().join("back");
    ok(&["sync", &container, back.to_str().unwrap()], &[]);
    assert_eq!(tree(&src), tree(&back));
    let again = ok(&["sync", "strata://VOL/data", &container], &env);
    assert_eq!(count(&again, "copied"), 0, "{again}");

    // Bad credentials and a missing container: one clear line each.
    let wrong = format!(
        "wasb://{AZURITE_ACCOUNT}:{}@{TEST_BUCKET}.{host}/x",
        "A".repeat(86) + "=="
    );
    let missing = format!("wasb://{AZURITE_ACCOUNT}:{AZURITE_KEY}@no-such-box.{host}/x");
    for (addr, expected) in [(&wrong, "authentication"), (&missing, "not found")] {
        let out = strata(&["sync", src.to_str().unwrap(), addr], &[]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{addr}");
        assert!(said.contains(expected), "{addr}: {said}");
        assert!(!said.contains(AZURITE_KEY), "the key shows: {said}");
    }
}
