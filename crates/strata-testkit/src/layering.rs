//! The crate layering rules ("arrows point down only") and a checker over the JSON that
//! `cargo metadata --format-version 1 --no-deps` prints.

use serde_json::Value;

/// Workspace crates each crate may depend on (normal and build dependencies).
pub const ALLOWED: &[(&str, &[&str])] = &[
    ("strata-types", &[]),
    ("strata-meta", &["strata-types"]),
    ("strata-meta-redis", &["strata-types", "strata-meta"]),
    ("strata-meta-postgres", &["strata-types", "strata-meta"]),
    ("strata-meta-etcd", &["strata-types", "strata-meta"]),
    ("strata-meta-mysql", &["strata-types", "strata-meta"]),
    ("strata-object", &["strata-types"]),
    ("strata-chunk", &["strata-types", "strata-object"]),
    (
        "strata-vfs",
        &[
            "strata-types",
            "strata-meta",
            "strata-chunk",
            "strata-object",
        ],
    ),
    ("strata-fuse", &["strata-types", "strata-vfs"]),
    ("strata-http", &["strata-types", "strata-vfs"]),
    ("strata-s3", &["strata-types", "strata-vfs", "strata-http"]),
    (
        "strata-webdav",
        &["strata-types", "strata-vfs", "strata-http"],
    ),
    // Opening a volume from a META-URL: the one library naming concrete engines and
    // stores, shared by the binary and the Python SDK.
    (
        "strata-client",
        &[
            "strata-types",
            "strata-meta",
            "strata-meta-redis",
            "strata-meta-postgres",
            "strata-meta-etcd",
            "strata-meta-mysql",
            "strata-object",
            "strata-chunk",
            "strata-vfs",
        ],
    ),
    // `strata sync`: copies between directories, object stores and volumes (a volume
    // through the VFS, opened from its META-URL through strata-client); a queued job's
    // tasks are kept through the `Kv` transactions of strata-meta (the binary opens the
    // engine).
    (
        "strata-sync",
        &[
            "strata-types",
            "strata-meta",
            "strata-object",
            "strata-vfs",
            "strata-client",
        ],
    ),
    // strata-test-features: no code, only when scripts/test.sh builds the wheel.
    (
        "strata-py",
        &[
            "strata-types",
            "strata-vfs",
            "strata-client",
            "strata-test-features",
        ],
    ),
    (
        "strata",
        &[
            "strata-types",
            "strata-meta",
            "strata-meta-redis",
            "strata-meta-postgres",
            "strata-meta-etcd",
            "strata-object",
            "strata-chunk",
            "strata-vfs",
            "strata-fuse",
            "strata-s3",
            "strata-webdav",
            "strata-http",
            "strata-client",
            "strata-sync",
        ],
    ),
    ("strata-testkit", &[]),
    (
        "strata-test-features",
        &["strata-meta", "strata-object", "strata-vfs"],
    ),
];

/// External crates confined to one workspace crate (the only one that may link them).
pub const CONFINED: &[(&str, &str)] = &[
    ("rusqlite", "strata-meta"),
    ("redis", "strata-meta-redis"),
    ("tokio-postgres", "strata-meta-postgres"),
    ("etcd-client", "strata-meta-etcd"),
    ("mysql_async", "strata-meta-mysql"),
    ("object_store", "strata-object"),
    ("fuser", "strata-fuse"),
    // The crash file system of the dev-only test kit (not a front end).
    ("fuser", "strata-testkit"),
    ("s3s", "strata-s3"),
    ("dav-server", "strata-webdav"),
    ("pyo3", "strata-py"),
    ("anyhow", "strata"),
    ("clap", "strata"),
];

/// Every rule broken by the packages in `metadata`, one message each.
pub fn violations(metadata: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let workspace: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    for package in &packages {
        let name = package["name"].as_str().unwrap_or("?");
        let Some(allowed) = ALLOWED.iter().find(|(n, _)| *n == name).map(|(_, a)| *a) else {
            out.push(format!(
                "{name}: not in the layering table (add it to ALLOWED)"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or("?");
            let dev_only = dep["kind"].as_str() == Some("dev");
            if workspace.contains(&dep_name) {
                let ok = allowed.contains(&dep_name)
                    || (dev_only && (dep_name == "strata-testkit" || dep_name == name));
                if !ok {
                    out.push(format!("{name} must not depend on {dep_name}"));
                }
            } else if !dev_only
                && let Some((_, owner)) = CONFINED.iter().find(|(c, _)| *c == dep_name)
                && !CONFINED.contains(&(dep_name, name))
            {
                out.push(format!(
                    "{name} must not link {dep_name} (only {owner} may)"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(name: &str, deps: &[(&str, Option<&str>)]) -> Value {
        let deps: Vec<Value> = deps
            .iter()
            .map(|(d, kind)| serde_json::json!({ "name": d, "kind": kind }))
            .collect();
        serde_json::json!({ "name": name, "dependencies": deps })
    }

    #[test]
    fn upward_and_sideways_imports_are_reported() {
        let meta = serde_json::json!({ "packages": [
            package("strata-types", &[]),
            package("strata-object", &[("strata-types", None)]),
            package("strata-meta", &[("strata-types", None), ("strata-object", None)]),
            package("strata-vfs", &[("strata-meta", None), ("rusqlite", None)]),
            package("strata-chunk", &[("strata-testkit", Some("dev")), ("strata-object", None)]),
            package("strata-testkit", &[("fuser", None)]),
            package("strata-s3", &[("fuser", None)]),
            package("strata-newthing", &[]),
        ]});
        let v = violations(&meta);
        assert_eq!(
            v,
            vec![
                "strata-meta must not depend on strata-object".to_string(),
                "strata-vfs must not link rusqlite (only strata-meta may)".to_string(),
                "strata-s3 must not link fuser (only strata-fuse may)".to_string(),
                "strata-newthing: not in the layering table (add it to ALLOWED)".to_string(),
            ]
        );
    }
}
