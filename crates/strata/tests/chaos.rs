//! The fault harness, short version, on every engine: three clients of one volume run a
//! random workload for a few seconds while their networks to the metadata engine and
//! their object stores break under them (`chaos_kit`); the history of what they did and
//! saw must be linearizable, and afterwards `strata fsck` must find the volume clean and
//! `strata gc` nothing leaked. Fixed seeds, so a failure names the seed to replay
//! (`STRATA_CHAOS_SEED`); `STRATA_CHAOS_SECS` makes it longer (`benches/chaos.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod chaos_kit;
mod common;

use std::path::Path;

use common::{network_meta_url, strata_ok};

fn format_volume(url: &str, dir: &Path) {
    let bucket = dir.join("bucket");
    strata_ok(&[
        "format",
        url,
        "chaos",
        "--bucket",
        bucket.to_str().unwrap(),
        "--block-size",
        "64K",
        "--trash-days",
        "0",
    ]);
}

fn run_engine(engine: &'static str, seed: u64) {
    // The clients' own log lines, when asked for (RUST_LOG=strata=debug, say).
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let dir = tempfile::tempdir().unwrap();
    let url = match engine {
        "sqlite" => format!("sqlite3://{}", dir.path().join("meta.db").display()),
        other => network_meta_url(other, "chaos"),
    };
    format_volume(&url, dir.path());
    let plan = chaos_kit::Plan::short(engine, seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(chaos_kit::run(&plan, &url, dir.path()));
    drop(runtime);
    let started = std::time::Instant::now();
    let fsck = strata_ok(&["fsck", &url]);
    assert!(fsck.contains("volume is clean"), "{engine}: {fsck}");
    let gc = strata_ok(&["gc", &url, "--safety-window", "0"]);
    assert!(gc.contains("leaked: 0 objects"), "{engine}: {gc}");
    eprintln!(
        "{engine}: fsck and gc took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    eprintln!("{engine} (seed {}): {report:?}", plan.seed);
}

#[test]
fn histories_under_faults_are_linearizable_on_sqlite() {
    run_engine("sqlite", 1);
}

#[test]
fn histories_under_faults_are_linearizable_on_redis() {
    run_engine("redis", 2);
}

#[test]
fn histories_under_faults_are_linearizable_on_postgres() {
    run_engine("postgres", 3);
}

#[test]
fn histories_under_faults_are_linearizable_on_mysql() {
    run_engine("mysql", 5);
}

#[test]
fn histories_under_faults_are_linearizable_on_etcd() {
    run_engine("etcd", 4);
}
