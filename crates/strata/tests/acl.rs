//! End-to-end: POSIX access control lists on a real mount, driven by `setfacl`,
//! `getfacl`, `cp -a`, `tar --acls`, `rsync -A` and unprivileged users, compared with what the same
//! script does on local disk — with the kernel checking lists (`FUSE_POSIX_ACL`) and
//! with Strata checking them alone (`--non-default-permission`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use common::{Daemon, Volume, aws_cli, curl, eventually, gateway_user, sh, strata, strata_ok};

/// What a team sharing a directory does: named users, a default list that new files
/// inherit (the umask then ignored), chmod moving the mask, copies that keep lists.
const SCRIPT: &str = r#"
    bob() { setpriv --reuid=1001 --regid=1001 --clear-groups "$@"; }
    carol() { setpriv --reuid=1002 --regid=1002 --clear-groups "$@"; }
    eng() { setpriv --reuid=1003 --regid=1003 --groups=300 "$@"; }
    try() { if "$@" 2>/dev/null; then echo "ok: $*"; else echo "denied: $*"; fi; }
    mkdir team && chmod 770 team
    try bob touch team/early
    setfacl -m u:1001:rwx,g:300:r-x team
    getfacl team
    try bob touch team/by-bob
    try carol ls team
    try eng ls team
    try eng touch team/by-eng
    chmod 750 team
    getfacl team
    try bob touch team/after-chmod
    setfacl -d -m u:1001:rwx,g:300:r--,o::- team
    getfacl -d team
    touch team/f && mkdir team/sub && mknod team/fifo p
    stat -c '%n %a' team/f team/sub team/fifo
    getfacl team/f team/sub
    try bob sh -c 'echo hello > team/f'
    try eng cat team/f
    try eng sh -c 'echo x >> team/f'
    bob mkdir team/sub/deep && getfacl team/sub/deep
    setfacl -m m::r team/f && getfacl team/f
    try bob sh -c 'echo x >> team/f'
    setfacl -b team/f && stat -c '%n %a' team/f && getfacl team/f
    setfacl -m u:1001:rw team/f && setfacl -x u:1001 team/f && getfacl team/f
    chmod 2770 team/sub && chgrp 300 team/sub && setfacl -m u:1002:rwx team/sub
    stat -c '%n %a' team/sub
    ln -s f team/link && (setfacl -P -m u:1002:r team/link 2>&1 | sed 's/.*: //') || true
    cp -a team team-copy && getfacl $(find team-copy | sort)
    tar --acls -cf team.tar team && mkdir untarred && tar --acls -xf team.tar -C untarred
    getfacl $(find untarred | sort)
    mkdir rsynced && rsync -aA team rsynced/ && getfacl $(find rsynced | sort)
    getfattr -d -m - team | grep -c posix_acl
"#;

/// The script's output on local disk under `umask`.
fn expected(umask: &str) -> String {
    let local = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        local.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = sh(local.path(), &format!("umask {umask}\n{SCRIPT}"));
    assert!(
        out.contains("ok: bob touch team/by-bob"),
        "local disk: {out}"
    );
    out
}

/// With the kernel checking lists the mount matches local disk under the usual umask.
/// With Strata checking alone, the kernel has applied the umask before Strata sees a
/// create (docs/SEMANTICS.md), so that run uses umask 000, where the two agree.
#[test]
fn setfacl_and_getfacl_on_a_mount_behave_like_local_disk() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let runs = [
        ("kernel", &[][..], "022"),
        ("strata", &["--non-default-permission"][..], "000"),
    ];
    for (name, flags, umask) in runs {
        let m = vol.mount_with(name, flags);
        let dir = m.path.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let script = format!("umask {umask}\n{SCRIPT}");
        assert_eq!(
            sh(&dir, &script),
            expected(umask),
            "checked by {name}: {}",
            m.log()
        );
    }
}

#[test]
fn lists_are_refused_until_enabled_and_then_stay_on() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    let out = sh(
        &m.path,
        "touch f && (setfacl -m u:1001:r f 2>&1 || true) && getfacl -c f",
    );
    assert!(out.contains("Operation not supported"), "{out}");
    assert!(
        out.contains("user::rw-"),
        "getfacl still shows the mode: {out}"
    );
    drop(m);
    let shown = strata_ok(&["config", &vol.meta_url, "--enable-acl"]);
    assert!(shown.contains("\"enable_acl\": true"), "{shown}");
    let m = vol.mount("again");
    let out = sh(&m.path, "setfacl -m u:1001:r f && getfacl -c f");
    assert!(out.contains("user:1001:r--"), "{out}");
    drop(m);
    // Formatting again without the flag keeps lists on (they cannot be turned off).
    let (ok, out) = strata(&["config", &vol.meta_url, "--trash-days", "2"]);
    assert!(ok && out.contains("\"enable_acl\": true"), "{out}");
}

#[test]
fn dump_and_load_keep_lists() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir d && setfacl -m u:1001:rwx d && setfacl -d -m g:300:r-x d && touch d/f",
    );
    let before = sh(&m.path, "getfacl -R d");
    drop(m);
    let dump = vol.dir.path().join("dump.json");
    strata_ok(&["dump", &vol.meta_url, dump.to_str().unwrap()]);
    let target = tempfile::tempdir().unwrap();
    let url = format!("sqlite3://{}", target.path().join("meta.db").display());
    strata_ok(&["load", &url, dump.to_str().unwrap()]);
    let loaded = Volume::existing(&url);
    let m = loaded.mount("loaded");
    assert_eq!(sh(&m.path, "getfacl -R d"), before);
}

/// One scenario through every front end: a named user (1001) reads a file its entry
/// allows and not one whose mask takes the entry's read away, a user with no entry
/// (1003) reads neither, and what 1001 writes is its own — on the mount (`setpriv`), the
/// S3 gateway and WebDAV (volume users kept with `--uid/--gid`, so the servers act as
/// them).
#[test]
fn named_users_and_masks_decide_alike_on_the_mount_s3_and_webdav() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir shared && chmod 750 shared && echo open > shared/open.txt \
         && echo masked > shared/masked.txt && chmod 640 shared/*.txt \
         && setfacl -m u:1001:rwx shared && setfacl -m u:1001:r shared/open.txt \
         && setfacl -m u:1001:r,m::- shared/masked.txt",
    );
    let fuse = sh(
        &m.path,
        r#"try() { if "$@" >/dev/null 2>&1; then echo "ok: $*"; else echo "denied: $*"; fi; }
           as() { u=$1; shift; setpriv --reuid=$u --regid=$u --clear-groups "$@"; }
           try as 1001 cat shared/open.txt
           try as 1001 cat shared/masked.txt
           try as 1003 cat shared/open.txt
           try as 1001 sh -c 'echo fuse > shared/by-fuse'
           try as 1003 ls shared"#,
    );
    assert_eq!(
        fuse,
        "ok: as 1001 cat shared/open.txt\n\
         denied: as 1001 cat shared/masked.txt\n\
         denied: as 1003 cat shared/open.txt\n\
         ok: as 1001 sh -c echo fuse > shared/by-fuse\n\
         denied: as 1003 ls shared\n"
    );
    for (user, id) in [("user-1001", "1001"), ("user-1003", "1003")] {
        let args = ["add", user, "--secret-stdin", "--uid", id, "--gid", id];
        let out = gateway_user(&vol, &args, &format!("{user}-secret\n"));
        assert!(out.status.success(), "{out:?}");
    }
    let listed = gateway_user(&vol, &["list"], "");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("1001:1001"),
        "{listed:?}"
    );
    through_s3(&vol);
    through_webdav(&vol);
    let owners = sh(
        &m.path,
        "stat -c '%n %u' shared/by-fuse shared/by-s3 shared/by-dav",
    );
    assert_eq!(
        owners,
        "shared/by-fuse 1001\nshared/by-s3 1001\nshared/by-dav 1001\n"
    );
}

/// The S3 half: the bucket policy lets both users get, put and list; the file system's
/// permissions then decide as each user's ids.
fn through_s3(vol: &Volume) {
    let (root_key, root_secret) = ("gateway-key", "gateway-secret-123");
    let args = ["gateway", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    let envs = [
        ("STRATA_ACCESS_KEY", root_key),
        ("STRATA_SECRET_KEY", root_secret),
    ];
    let gw = Daemon::start(vol, "gw", &args, &envs);
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
        "Principal":{"AWS":["user-1001","user-1003"]},
        "Action":["s3:GetObject","s3:PutObject","s3:ListBucket"],
        "Resource":["arn:aws:s3:::e2e-vol","arn:aws:s3:::e2e-vol/*"]}]}"#;
    let set = aws_cli(&gw.url, root_key, root_secret)
        .args(["s3api", "put-bucket-policy", "--bucket", "e2e-vol"])
        .args(["--policy", policy])
        .output()
        .unwrap();
    assert!(set.status.success(), "{set:?}");
    let as_user = |user: &str, args: &[&str]| -> (bool, String) {
        let out = aws_cli(&gw.url, user, &format!("{user}-secret"))
            .args(["s3api"])
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let out = vol.dir.path().join("got");
    let get = |user: &str, key: &str| {
        let args = ["get-object", "--bucket", "e2e-vol", "--key", key];
        as_user(user, &[&args[..], &[out.to_str().unwrap()]].concat())
    };
    assert!(get("user-1001", "shared/open.txt").0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "open\n");
    for (user, key) in [
        ("user-1001", "shared/masked.txt"),
        ("user-1003", "shared/open.txt"),
    ] {
        let (ok, text) = get(user, key);
        assert!(!ok && text.contains("AccessDenied"), "{user} {key}: {text}");
    }
    let body = vol.dir.path().join("body");
    std::fs::write(&body, "s3").unwrap();
    let put = [
        "put-object",
        "--bucket",
        "e2e-vol",
        "--key",
        "shared/by-s3",
        "--body",
        body.to_str().unwrap(),
    ];
    let (ok, text) = as_user("user-1001", &put);
    assert!(ok, "{text}");
    let list = [
        "list-objects-v2",
        "--bucket",
        "e2e-vol",
        "--prefix",
        "shared/",
    ];
    let (ok, text) = as_user("user-1001", &list);
    assert!(ok && text.contains("shared/masked.txt"), "{text}");
    let (ok, text) = as_user("user-1003", &list);
    assert!(!ok && text.contains("AccessDenied"), "{text}");
    gw.stop();
}

/// The WebDAV half: the same users log in with their keys.
fn through_webdav(vol: &Volume) {
    let args = ["webdav", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    let dav = Daemon::start(vol, "dav", &args, &[]);
    let url = |path: &str| format!("{}{path}", dav.url);
    let login = |user: &str| format!("{user}:{user}-secret");
    let (u1001, u1003) = (login("user-1001"), login("user-1003"));
    let (code, body) = curl(&["-u", &u1001, &url("shared/open.txt")]);
    assert_eq!((code, body.as_str()), (200, "open\n"));
    assert_eq!(curl(&["-u", &u1001, &url("shared/masked.txt")]).0, 403);
    assert_eq!(curl(&["-u", &u1003, &url("shared/open.txt")]).0, 403);
    let put = curl(&[
        "-u",
        &u1001,
        "-X",
        "PUT",
        "--data-binary",
        "dav",
        &url("shared/by-dav"),
    ]);
    assert_eq!(put.0, 201, "{put:?}");
    // A listing shows the directory itself, and its entries only to who may read it.
    let propfind = |login: &str| {
        let args = ["-X", "PROPFIND", "-H", "Depth: 1", "-u", login];
        curl(&[&args[..], &[url("shared/").as_str()]].concat())
    };
    let (code, body) = propfind(&u1001);
    assert!(code == 207 && body.contains("open.txt"), "{code} {body}");
    let (code, body) = propfind(&u1003);
    assert!(code == 207 && !body.contains("open.txt"), "{code} {body}");
    dav.stop();
}

/// `strata sync --perms` keeps lists: local disk → a volume (opened without a mount) →
/// local disk, `getfacl` alike at each step; a later run brings a directory's changed list
/// in line; without `--perms` copies get none.
#[test]
fn sync_with_perms_keeps_lists_both_ways() {
    let vol = Volume::new_with(&["--enable-acl"]);
    let tmp = tempfile::tempdir().unwrap();
    sh(
        tmp.path(),
        "mkdir -p src/team/sub && echo x > src/team/f && echo y > src/plain \
         && setfacl -m u:1001:rwx,g:300:r-x src/team && setfacl -d -m u:1001:rwx src/team \
         && setfacl -m u:1002:r src/team/f",
    );
    let sync = |args: &[&str]| {
        let out = std::process::Command::new(common::STRATA)
            .arg("sync")
            .args(args)
            .env("VOL", &vol.meta_url)
            .output()
            .unwrap();
        assert!(out.status.success(), "sync {args:?}: {out:?}");
    };
    let lists = |dir: &std::path::Path| sh(dir, "getfacl -p team team/f team/sub plain");
    let src = tmp.path().join("src");
    let expected = lists(&src);
    assert!(expected.contains("user:1002:r--"), "{expected}");
    let s = src.to_str().unwrap();
    sync(&["--dirs", "--perms", s, "strata://VOL/copy"]);
    let m = vol.mount("mnt");
    assert_eq!(lists(&m.path.join("copy")), expected);
    let back = tmp.path().join("back");
    sync(&[
        "--dirs",
        "--perms",
        "strata://VOL/copy",
        back.to_str().unwrap(),
    ]);
    assert_eq!(lists(&back), expected);
    // A directory's list changed at the source is brought in line by the next run (the
    // mount sees another client's change once its cached attributes expire).
    sh(&src, "setfacl -m u:1003:r-x team && setfacl -k team");
    sync(&["--dirs", "--perms", s, "strata://VOL/copy"]);
    let (want, copy) = (lists(&src), m.path.join("copy"));
    let converged = eventually(Duration::from_secs(10), || lists(&copy) == want);
    assert!(converged, "{} != {want}", lists(&copy));
    // Without --perms nothing of the lists is copied.
    sync(&["--dirs", s, "strata://VOL/bare"]);
    let bare = sh(&m.path.join("bare"), "getfacl -cp team team/f");
    assert!(!bare.contains("user:100"), "{bare}");
}
