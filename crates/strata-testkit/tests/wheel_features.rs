//! The SDK's wheel, built alone after the tests (scripts/test.sh), asks every dependency
//! it shares with the workspace's test build for the same features, so it reuses the test
//! build's artifacts instead of compiling the tree again (crates/strata-test-features).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each package `cargo tree` resolves for `args`, with every feature set it is built with
/// (a package built for the host and for the target may have two).
fn resolved_features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Asked at run time: a test binary reused from another checkout must look at this one.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    );
    let out = Command::new(&cargo)
        .args(["tree", "--offline", "--prefix", "none", "-f", "{p}|{f}"])
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("run {cargo:?} tree: {e}"));
    assert!(
        out.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // "name vX.Y.Z (path)" for our crates: the name and version identify it.
        let package: String = package.split(' ').take(2).collect::<Vec<_>>().join(" ");
        found
            .entry(package)
            .or_default()
            .insert(features.trim().to_string());
    }
    found
}

#[test]
fn the_wheel_asks_shared_dependencies_for_the_test_builds_features() {
    let workspace = resolved_features(&["--workspace", "-e", "normal,build,dev"]);
    let wheel = resolved_features(&[
        "-p",
        "strata-py",
        "--features",
        "test-build-features",
        "-e",
        "normal,build",
    ]);
    assert!(
        workspace.keys().any(|k| k.starts_with("tokio v")),
        "cargo tree listed no tokio: {:?}",
        workspace.keys().take(5).collect::<Vec<_>>()
    );
    let mut drifted = Vec::new();
    for (package, sets) in &wheel {
        if package.starts_with("strata-py ") {
            continue; // the wheel itself, with the feature that asks for all this
        }
        let Some(built) = workspace.get(package) else {
            continue; // only the wheel uses it (pyo3, ...): compiled for it anyway
        };
        for features in sets.difference(built) {
            drifted.push(format!(
                "{package}: the wheel asks for [{features}], the test build has {built:?}"
            ));
        }
    }
    assert!(
        drifted.is_empty(),
        "add the test build's features to crates/strata-test-features/Cargo.toml \
         (target side under [dependencies], build-time side under [build-dependencies]):\n{}",
        drifted.join("\n")
    );
}
