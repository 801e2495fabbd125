//! Fails the build's tests if a workspace crate imports one it must not (ARCHITECTURE.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::process::Command;

#[test]
fn workspace_obeys_layering_rules() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Asked at run time: a test binary reused from a build in another checkout (shared
    // target directory) must still look at this one.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    );
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("run {cargo:?} metadata in {}: {e}", dir.display()));
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for expected in ["strata-types", "strata-meta", "strata-testkit"] {
        assert!(
            names.contains(&expected),
            "workspace lists {expected}: {names:?}"
        );
    }
    let violations = strata_testkit::layering::violations(&metadata);
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}
