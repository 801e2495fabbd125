//! Versioned S3 writes across gateway crashes: two writers PUT (and now and then DELETE)
//! versions of one key while the gateway is killed with SIGKILL, three times; after a
//! restart every acknowledged version is listed and reads back its bytes, every listed
//! version reads, exactly one entry is latest, and the mount shows the current version
//! (tests/s3/killed.py checks it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;

use common::*;

const KEY: &str = "gateway-key";
const SECRET: &str = "gateway-secret-123";
/// Versions acknowledged between two kills, at least.
const ACKS_PER_ROUND: usize = 30;

fn gateway(vol: &Volume, name: &str) -> Daemon {
    multi_bucket_gateway(vol, name, KEY, SECRET)
}

fn acknowledged(acks: &Path) -> usize {
    std::fs::read_to_string(acks)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// `killed.py MODE crash ACKS` against `gw`, with the mount at `root`.
fn killed_py(mode: &str, gw: &Daemon, acks: &Path, root: &Path) -> Command {
    let python = std::env::var("STRATA_TEST_BOTO3_PY")
        .unwrap_or_else(|_| panic!("STRATA_TEST_BOTO3_PY is not set: run scripts/test.sh"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/killed.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args([mode, "crash"])
        .arg(acks)
        .env("S3_ENDPOINT", &gw.url)
        .env("S3_ACCESS_KEY", KEY)
        .env("S3_SECRET_KEY", SECRET)
        .env("FUSE_ROOT", root);
    cmd
}

#[test]
fn versioned_writes_survive_killed_gateways() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let acks = vol.dir.path().join("acks");
    let mut gw = gateway(&vol, "gw0");
    run(aws_cli(&gw.url, KEY, SECRET).args(["s3api", "create-bucket", "--bucket", "crash"]));
    run(aws_cli(&gw.url, KEY, SECRET).args([
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        "crash",
        "--versioning-configuration",
        "Status=Enabled",
    ]));
    for round in 1..=3 {
        let before = acknowledged(&acks);
        let mut writer = killed_py("write", &gw, &acks, &m.path).spawn().unwrap();
        let wrote = eventually(Duration::from_secs(120), || {
            acknowledged(&acks) >= before + ACKS_PER_ROUND
        });
        assert!(
            wrote,
            "round {round}: the writers stalled: {}",
            gw.log_text()
        );
        gw.child.kill().unwrap(); // SIGKILL, in the middle of the writers' requests
        gw.child.wait().unwrap();
        let status = writer.wait().unwrap();
        assert!(status.success(), "round {round}: the writer failed");
        gw = gateway(&vol, &format!("gw{round}"));
    }
    let out = killed_py("verify", &gw, &acks, &m.path).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}\ngateway log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log_text()
    );
    assert!(report.contains("acknowledged"), "{report}");
    println!("{report}");
    gw.stop();
}
