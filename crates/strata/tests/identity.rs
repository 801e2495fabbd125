//! End-to-end: identity mapping on mounts (`--root-squash`, `--all-squash`, `--uid-map`,
//! `--gid-map`, `--umask`), each checked against what a plain mount of the same volume
//! stores, with unprivileged callers made by `setpriv`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{Volume, sh};

/// Owner and mode of `paths` under `dir`, one line each.
fn owners(dir: &std::path::Path, paths: &str) -> String {
    sh(dir, &format!("stat -c '%n %u:%g %a' {paths}"))
}

#[test]
fn squashed_and_mapped_callers_act_as_the_volume_users_they_are_mapped_to() {
    let vol = Volume::new();
    let plain = vol.mount("plain");
    sh(
        &plain.path,
        "mkdir open && chmod 777 open && echo secret > open/root-only && chmod 600 open/root-only",
    );

    // Root squashed: creates as 1234, and is refused root's own 0600 file.
    let squash = vol.mount_with("root-squash", &["--root-squash", "1234:1234"]);
    let out = sh(
        &squash.path,
        "touch open/by-root; (cat open/root-only 2>&1 || true) | sed 's/.*: //'; \
         setpriv --reuid=1001 --regid=1001 --clear-groups touch open/by-1001",
    );
    assert!(out.contains("Permission denied"), "{out}");
    assert_eq!(
        owners(&plain.path, "open/by-root open/by-1001"),
        "open/by-root 1234:1234 644\nopen/by-1001 1001:1001 644\n",
        "root is squashed, others are not"
    );
    drop(squash);

    // Everyone squashed, root included.
    let all = vol.mount_with("all-squash", &["--all-squash", "1500:1600"]);
    sh(
        &all.path,
        "setpriv --reuid=1001 --regid=1001 --clear-groups touch open/all-1001; touch open/all-root",
    );
    assert_eq!(
        owners(&plain.path, "open/all-1001 open/all-root"),
        "open/all-1001 1500:1600 644\nopen/all-root 1500:1600 644\n"
    );
    drop(all);

    // A host that numbers user 2001 as 1001: it creates and chowns as 2001 in the volume,
    // and sees 2001's files as its own.
    let mapped = vol.mount_with(
        "mapped",
        &["--uid-map", "1001:2001", "--gid-map", "1001:2001"],
    );
    let out = sh(
        &mapped.path,
        "setpriv --reuid=1001 --regid=1001 --clear-groups touch open/mapped; \
         touch open/chowned && chown 1001:1001 open/chowned; \
         stat -c '%n %u:%g' open/mapped open/chowned open/by-1001",
    );
    assert_eq!(
        out, "open/mapped 1001:1001\nopen/chowned 1001:1001\nopen/by-1001 1001:1001\n",
        "shown in the host's numbering (1001 of the volume is not mapped back)"
    );
    assert_eq!(
        owners(&plain.path, "open/mapped open/chowned"),
        "open/mapped 2001:2001 644\nopen/chowned 2001:2001 644\n"
    );
    let denied = sh(
        &mapped.path,
        "(setpriv --reuid=1001 --regid=1001 --clear-groups sh -c 'echo x >> open/by-1001' 2>&1 \
         || true) | sed 's/.*: //'",
    );
    assert!(
        denied.contains("Permission denied"),
        "host 1001 is volume 2001, not the volume's 1001: {denied}"
    );
    drop(mapped);

    // A umask for the mount on top of the caller's.
    let masked = vol.mount_with("umask", &["--umask", "077"]);
    sh(
        &masked.path,
        "umask 002; touch open/masked; mkdir open/masked-dir",
    );
    assert_eq!(
        owners(&plain.path, "open/masked open/masked-dir"),
        "open/masked 0:0 600\nopen/masked-dir 0:0 700\n"
    );
}

#[test]
fn bad_identity_options_are_refused_with_the_option_named() {
    let vol = Volume::new();
    for (flag, value) in [
        ("--root-squash", "65534"),
        ("--all-squash", "x:y"),
        ("--uid-map", "1:2,1:3"),
        ("--umask", "999"),
    ] {
        let dir = vol.dir.path().join("never");
        std::fs::create_dir_all(&dir).unwrap();
        let (ok, out) =
            common::strata(&["mount", &vol.meta_url, dir.to_str().unwrap(), flag, value]);
        assert!(!ok, "{flag} {value}: {out}");
        assert!(out.contains(flag), "{flag} {value}: {out}");
    }
}

/// Named entries of access control lists follow the uid and gid maps like owners do: a
/// host that numbers the volume's user 2001 as 1001 names 1001 in `setfacl`, the volume
/// keeps 2001, and that host's 1001 is the one the entry lets in.
#[test]
fn named_entries_of_lists_follow_the_maps() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let plain = vol.mount("plain");
    sh(
        &plain.path,
        "mkdir open && chmod 777 open && echo data > open/f && chmod 600 open/f",
    );
    let mapped = vol.mount_with(
        "mapped",
        &["--uid-map", "1001:2001", "--gid-map", "1001:2001"],
    );
    let entries = |dir: &std::path::Path| {
        sh(
            dir,
            "getfacl -n --omit-header open/f | grep -E '^(user|group):[0-9]' || true",
        )
    };
    // Another mount's kernel keeps the list it last saw until its entry expires (1 s).
    let shows = |dir: &std::path::Path, want: &str| {
        let mut seen = String::new();
        let ok = common::eventually(std::time::Duration::from_secs(10), || {
            seen = entries(dir);
            seen == want
        });
        assert!(ok, "{}: {seen:?}, not {want:?}", dir.display());
    };
    sh(&mapped.path, "setfacl -m u:1001:r,g:1001:r open/f");
    assert_eq!(entries(&mapped.path), "user:1001:r--\ngroup:1001:r--\n");
    // Kept in the volume's numbering.
    shows(&plain.path, "user:2001:r--\ngroup:2001:r--\n");
    let read_as_1001 = |dir: &std::path::Path| {
        sh(
            dir,
            "(setpriv --reuid=1001 --regid=1001 --clear-groups cat open/f 2>&1 || true) \
             | sed 's/.*: //'",
        )
    };
    assert_eq!(
        read_as_1001(&mapped.path),
        "data\n",
        "host 1001 is volume 2001"
    );
    assert!(
        read_as_1001(&plain.path).contains("Permission denied"),
        "the volume's own 1001 is not named"
    );
    // Set through the plain mount in the volume's numbering, shown mapped back.
    sh(&plain.path, "setfacl -m u:2001:rw open/f");
    shows(&mapped.path, "user:1001:rw-\ngroup:1001:r--\n");
}
