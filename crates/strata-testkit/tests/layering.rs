//! Fails the build's tests if a workspace crate imports one it must not (ARCHITECTURE.md),
//! or a crate's modules import each other in a circle.
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

/// No crate's modules import each other in a circle: shared types live in a leaf module.
#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    // Asked at run time, as above.
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        )
        .join("../..");
    let crates = root.join("crates");
    let mut found = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        for cycle in strata_testkit::modules::module_cycles(&src).unwrap() {
            found.push(format!("{}: {}", src.display(), cycle.join(" <-> ")));
        }
    }
    assert!(
        checked >= 15,
        "only {checked} crates under {}",
        crates.display()
    );
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}
