//! End-to-end tests of `strata webdav` with real clients: the `litmus` suite (all five
//! groups), rclone (copy, sync, check) and curl; files seen through a FUSE mount of the
//! same volume; two servers on one volume sharing locks, and a lock of a killed server
//! lapsing on time; bad input. The clients come from the README's test command
//! (`scripts/test.sh`); a missing one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::*;

const USER: &str = "dav-user";
const PASSWORD: &str = "dav-password-1";

/// Start a `strata webdav` of `vol` with the test's credentials.
fn webdav(vol: &Volume, name: &str, extra: &[&str]) -> Daemon {
    let mut args = vec!["webdav", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    args.extend_from_slice(extra);
    let envs = [("WEBDAV_USER", USER), ("WEBDAV_PASSWORD", PASSWORD)];
    Daemon::start(vol, name, &args, &envs)
}

/// curl with the server's credentials.
fn dav(args: &[&str]) -> (u16, String) {
    let creds = format!("{USER}:{PASSWORD}");
    let mut all = vec!["-u", &creds];
    all.extend_from_slice(args);
    curl(&all)
}

#[test]
fn litmus_passes_all_five_groups() {
    let vol = Volume::new();
    let server = webdav(&vol, "dav", &[]);
    let out = Command::new("litmus")
        .arg(&server.url)
        .args([USER, PASSWORD])
        .env("TESTS", "basic copymove props locks http")
        .current_dir(vol.dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for group in ["basic", "copymove", "props", "locks", "http"] {
        assert!(
            text.contains(&format!("summary for `{group}'")),
            "group {group} did not run:\n{text}"
        );
    }
    assert!(
        out.status.success() && !text.contains("FAIL"),
        "litmus failed:\n{text}\n{}",
        server.log_text()
    );
    server.stop();
}

/// The lock token in a LOCK answer.
fn lock_token(body: &str) -> String {
    let at = body
        .find("<D:href>")
        .unwrap_or_else(|| panic!("no token: {body}"));
    let rest = &body[at + "<D:href>".len()..];
    rest[..rest.find('<').unwrap()].trim().to_string()
}

const LOCK_BODY: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>"#;

/// An exclusive LOCK of `url` as `creds` (`user:password`), with extra headers; the
/// status and the answer.
fn lock(creds: &str, url: &str, headers: &[&str]) -> (u16, String) {
    let mut args = vec![
        "-u",
        creds,
        "-X",
        "LOCK",
        "-H",
        "Content-Type: application/xml",
    ];
    for h in headers {
        args.extend(["-H", h]);
    }
    args.extend(["--data", LOCK_BODY, url]);
    curl(&args)
}

/// [`lock`] with the server's own credentials.
fn dav_lock(url: &str, headers: &[&str]) -> (u16, String) {
    lock(&format!("{USER}:{PASSWORD}"), url, headers)
}

#[test]
fn two_servers_share_locks_and_a_dead_servers_lock_lapses() {
    let vol = Volume::new();
    let a = webdav(&vol, "a", &[]);
    let b = webdav(&vol, "b", &[]);
    let doc_a = format!("{}doc.txt", a.url);
    let doc_b = format!("{}doc.txt", b.url);
    assert_eq!(dav(&["-T", "-", &doc_a]).0, 201);
    // Taken before asking: the server starts the lock's clock while it answers.
    let locked_at = Instant::now();
    let (code, body) = dav_lock(&doc_a, &["Timeout: Second-4"]);
    assert_eq!(code, 200, "{body}");
    let token = lock_token(&body);
    // The other server honours the lock...
    let (code, _) = dav(&["-X", "PUT", "--data", "from b", &doc_b]);
    assert_eq!(code, 423);
    let (code, _) = dav(&["-X", "DELETE", &doc_b]);
    assert_eq!(code, 423);
    let (code, body) = dav(&["-X", "PROPFIND", "-H", "Depth: 0", &doc_b]);
    assert!(code == 207 && body.contains(&token), "{body}");
    // ... and accepts its token.
    let if_header = format!("If: (<{token}>)");
    let (code, _) = dav(&[
        "-X",
        "PUT",
        "-H",
        &if_header,
        "--data",
        "with token",
        &doc_b,
    ]);
    assert_eq!(code, 204);
    // A second exclusive lock through the other server is refused.
    let (code, _) = dav_lock(&doc_b, &[]);
    assert_eq!(code, 423);
    // The granting server dies; its lock still holds until the timeout, then lapses.
    drop(a);
    let (code, _) = dav(&["-X", "PUT", "--data", "too early", &doc_b]);
    assert!(code == 423 || locked_at.elapsed() >= Duration::from_secs(4));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _) = dav(&["-X", "PUT", "--data", "after", &doc_b]);
        if code == 204 {
            break;
        }
        assert_eq!(code, 423);
        assert!(Instant::now() < deadline, "the lock never lapsed");
        std::thread::sleep(Duration::from_millis(100)); // poll interval of a wait for the condition
    }
    assert!(
        locked_at.elapsed() >= Duration::from_secs(4),
        "lapsed after {:?}",
        locked_at.elapsed()
    );
    assert_eq!(dav(&[&doc_b]), (200, "after".to_string()));
    b.stop();
    // The killed server left nothing behind.
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    let out = strata_ok(&["gc", &vol.meta_url, "--safety-window", "0"]);
    assert!(out.contains("leaked: 0 objects"), "{out}");
}

#[test]
fn rclone_and_the_mount_see_the_same_files() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let server = webdav(&vol, "dav", &[]);
    let dir = vol.dir.path();
    let obscured = run(Command::new("rclone").args(["obscure", PASSWORD]));
    let obscured = String::from_utf8_lossy(&obscured.stdout).trim().to_string();
    let conf = dir.join("rclone.conf");
    std::fs::write(
        &conf,
        format!(
            "[dav]\ntype = webdav\nurl = {}\nvendor = other\nuser = {USER}\npass = {obscured}\n",
            server.url
        ),
    )
    .unwrap();
    let src = dir.join("tree");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    for i in 0..40 {
        std::fs::write(
            src.join(format!("a/b/f{i}")),
            format!("file {i}").repeat(i + 1),
        )
        .unwrap();
    }
    std::fs::write(src.join("big"), vec![7u8; 9 << 20]).unwrap();
    let rclone = |args: &[&str]| {
        run(Command::new("rclone").arg("--config").arg(&conf).args(args));
    };
    rclone(&["copy", src.to_str().unwrap(), "dav:tree"]);
    rclone(&["check", src.to_str().unwrap(), "dav:tree"]);
    // Written through WebDAV, read through the mount.
    assert_eq!(
        std::fs::read(m.path.join("tree/a/b/f3")).unwrap(),
        b"file 3".repeat(4)
    );
    assert_eq!(
        std::fs::read(m.path.join("tree/big")).unwrap().len(),
        9 << 20
    );
    // sync removes what the source no longer has.
    std::fs::remove_file(src.join("a/b/f0")).unwrap();
    std::fs::write(src.join("a/new"), b"new file").unwrap();
    rclone(&["sync", src.to_str().unwrap(), "dav:tree"]);
    rclone(&["check", src.to_str().unwrap(), "dav:tree"]);
    assert!(!m.path.join("tree/a/b/f0").exists());
    // Written through the mount, read through WebDAV.
    std::fs::write(m.path.join("tree/from-fuse"), b"written by the mount").unwrap();
    let (code, body) = dav(&[&format!("{}tree/from-fuse", server.url)]);
    assert_eq!((code, body.as_str()), (200, "written by the mount"));
    // Dead properties are xattrs the mount sees.
    let (code, _) = dav(&[
        "-X",
        "PROPPATCH",
        "--data",
        r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:color>blue</Z:color></D:prop></D:set></D:propertyupdate>"#,
        &format!("{}tree/from-fuse", server.url),
    ]);
    assert_eq!(code, 207);
    let xattr = sh(
        &m.path,
        "getfattr --only-values -n 'user.dav:{urn:test}color' tree/from-fuse",
    );
    assert!(xattr.contains(">blue<"), "{xattr}");
    // A PUT over the file keeps its permission bits and dead properties.
    sh(&m.path, "chmod 0640 tree/from-fuse");
    let put = dav(&[
        "-X",
        "PUT",
        "--data",
        "replaced",
        &format!("{}tree/from-fuse", server.url),
    ]);
    assert_eq!(put.0, 204);
    // The mount may show the old file until its kernel entry cache (1 s) lapses.
    let script = "cat tree/from-fuse; echo; stat -c %a tree/from-fuse; getfattr --only-values -n 'user.dav:{urn:test}color' tree/from-fuse";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while !seen.starts_with("replaced") && Instant::now() < deadline {
        let out = Command::new("bash")
            .args(["-c", script])
            .current_dir(&m.path)
            .output()
            .unwrap();
        seen = String::from_utf8_lossy(&out.stdout).into_owned();
        std::thread::sleep(Duration::from_millis(50)); // poll interval of a wait for the condition
    }
    assert!(
        seen.starts_with("replaced\n640\n") && seen.contains(">blue<"),
        "{seen}"
    );
    server.stop();
}

#[test]
fn bad_input_is_refused_and_nothing_leaves_the_served_tree() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    std::fs::create_dir(m.path.join("shared")).unwrap();
    std::fs::write(m.path.join("secret"), b"outside").unwrap();
    std::fs::write(m.path.join("shared/inside"), b"inside").unwrap();
    let server = webdav(&vol, "dav", &["--subdir", "/shared"]);
    let url = &server.url;
    // Credentials are required and checked.
    assert_eq!(curl(&[&format!("{url}inside")]).0, 401);
    assert_eq!(
        curl(&["-u", "dav-user:wrong", &format!("{url}inside")]).0,
        401
    );
    assert_eq!(dav(&[&format!("{url}inside")]), (200, "inside".into()));
    // Nothing above the served directory, however spelled.
    for path in [
        "../secret",
        "%2e%2e/secret",
        "..%2fsecret",
        "a/../../secret",
    ] {
        let (code, body) = dav(&["--path-as-is", &format!("{url}{path}")]);
        assert_ne!(body, "outside", "{path}");
        assert!(code >= 400, "{path}: {code}");
    }
    assert_eq!(dav(&[&format!("{url}/inside")]).1, "inside");
    // The server's own directory is not reachable.
    assert_eq!(dav(&[&format!("{url}.strata-webdav/")]).0, 404);
    assert_eq!(
        dav(&["-X", "MKCOL", &format!("{url}.strata-webdav")]).0,
        409
    );
    // Malformed XML and an over-long name.
    let (code, _) = dav(&[
        "-X",
        "PROPFIND",
        "--data",
        "<propfind xmlns=\"DAV:\"><prop>",
        url,
    ]);
    assert_eq!(code, 400);
    let long = "n".repeat(300);
    let (code, _) = dav(&["-T", "-", &format!("{url}{long}")]);
    assert!(code >= 400 && code != 500, "{code}");
    // A request body beyond the limit is refused, not buffered.
    let huge = vol.dir.path().join("huge.xml");
    std::fs::write(&huge, "x".repeat(1 << 20)).unwrap();
    let body = format!("@{}", huge.display());
    let (code, _) = dav(&["-X", "PROPPATCH", "--data-binary", &body, url]);
    assert_eq!(code, 413);
    // A directory listing for browsers.
    let (code, body) = dav(&[url.as_str()]);
    assert!(code == 200 && body.contains("inside"), "{body}");
    assert!(!body.contains(".strata"), "{body}");
    server.stop();
    // A read-only server refuses changes.
    let ro = webdav(&vol, "ro", &["--read-only"]);
    let (code, _) = dav(&["-X", "PUT", "--data", "x", &format!("{}new", ro.url)]);
    assert_eq!(code, 403);
    assert_eq!(dav(&[&format!("{}secret", ro.url)]).1, "outside");
    ro.stop();
}

#[test]
fn the_server_refuses_to_start_without_credentials_or_anonymous() {
    let vol = Volume::new();
    let out = Command::new(STRATA)
        .args(["webdav", &vol.meta_url, "127.0.0.1:0"])
        .env_remove("WEBDAV_USER")
        .env_remove("WEBDAV_PASSWORD")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("WEBDAV_USER"), "{err}");
}

/// Users kept in the volume (`strata gateway user add`, shared with the S3 gateway) log
/// in with their access and secret keys, each in its own directory and read-only if
/// added so; the server runs without WEBDAV_USER.
#[test]
fn volume_users_log_in_with_their_directory_and_read_only_flag() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    std::fs::create_dir_all(m.path.join("teams/a")).unwrap();
    std::fs::write(m.path.join("teams/a/plan"), b"team a").unwrap();
    std::fs::write(m.path.join("top"), b"top level").unwrap();
    let add = |args: &[&str], secret: &str| {
        let out = gateway_user(&vol, args, &format!("{secret}\n"));
        assert!(out.status.success(), "{out:?}");
    };
    add(
        &[
            "add",
            "alice",
            "--secret-stdin",
            "--webdav-subdir",
            "/teams/a",
            "--webdav-read-only",
        ],
        "alice-secret-1",
    );
    add(&["add", "bob", "--secret-stdin"], "bob-secret-22");
    let listed = gateway_user(&vol, &["list"], "");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("/teams/a (read-only)"), "{listed}");
    let server = Daemon::start(
        &vol,
        "dav",
        &["webdav", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"],
        &[],
    );
    let url = &server.url;
    // alice sees her directory as the root, and changes nothing.
    let (code, body) = curl(&["-u", "alice:alice-secret-1", &format!("{url}plan")]);
    assert_eq!((code, body.as_str()), (200, "team a"));
    assert_eq!(
        curl(&["-u", "alice:alice-secret-1", &format!("{url}top")]).0,
        404
    );
    let put = curl(&[
        "-u",
        "alice:alice-secret-1",
        "-X",
        "PUT",
        "--data",
        "x",
        &format!("{url}new"),
    ]);
    assert_eq!(put.0, 403);
    assert_eq!(
        curl(&["-u", "alice:bob-secret-22", &format!("{url}plan")]).0,
        401
    );
    // bob sees the whole volume and may write.
    let (code, _) = curl(&[
        "-u",
        "bob:bob-secret-22",
        "-X",
        "PUT",
        "--data",
        "from bob",
        &format!("{url}teams/a/bob"),
    ]);
    assert_eq!(code, 201);
    assert_eq!(
        std::fs::read(m.path.join("teams/a/bob")).unwrap(),
        b"from bob"
    );
    // A lock bob takes in alice's directory is the one alice's view shows.
    let (code, body) = lock("bob:bob-secret-22", &format!("{url}teams/a/plan"), &[]);
    assert_eq!(code, 200, "{body}");
    let token = lock_token(&body);
    let (code, body) = curl(&[
        "-u",
        "alice:alice-secret-1",
        "-X",
        "PROPFIND",
        "-H",
        "Depth: 0",
        &format!("{url}plan"),
    ]);
    assert!(code == 207 && body.contains(&token), "{body}");
    assert!(body.contains("<D:href>/plan</D:href>"), "{body}");
    // A removed user is refused at once.
    let out = gateway_user(&vol, &["remove", "bob"], "");
    assert!(out.status.success());
    assert_eq!(
        curl(&["-u", "bob:bob-secret-22", &format!("{url}top")]).0,
        401
    );
    server.stop();
}

#[test]
fn listings_can_be_disallowed() {
    let vol = Volume::new();
    let server = webdav(&vol, "dav", &["--disallowList"]);
    let url = &server.url;
    assert_eq!(dav(&["-T", "-", &format!("{url}file")]).0, 201);
    assert_eq!(dav(&["-X", "PROPFIND", "-H", "Depth: 1", url]).0, 403);
    assert_eq!(dav(&["-X", "PROPFIND", "-H", "Depth: 0", url]).0, 207);
    assert!(dav(&[url.as_str()]).0 >= 400);
    assert_eq!(dav(&[&format!("{url}file")]).0, 200);
    server.stop();
}

/// Two servers of one volume hand out each lock once: 8 clients racing for one file
/// through both servers get exactly one lock between them; 8 clients locking 8 files at
/// once all get theirs (the lock table's compare-and-swap retries), and both servers
/// show every lock.
fn locks_race_on(meta_url: &str) {
    let vol = Volume::on_engine(meta_url);
    let a = webdav(&vol, "a", &[]);
    let b = webdav(&vol, "b", &[]);
    let urls = [a.url.clone(), b.url.clone()];
    for i in 0..8 {
        assert_eq!(dav(&["-T", "-", &format!("{}f{i}", urls[0])]).0, 201);
    }
    assert_eq!(dav(&["-T", "-", &format!("{}contended", urls[0])]).0, 201);
    let lock_all = |paths: Vec<String>| -> Vec<u16> {
        let threads: Vec<_> = paths
            .into_iter()
            .map(|url| std::thread::spawn(move || dav_lock(&url, &[]).0))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    };
    let contended = lock_all(
        (0..8)
            .map(|i| format!("{}contended", urls[i % 2]))
            .collect(),
    );
    assert_eq!(
        contended.iter().filter(|c| **c == 200).count(),
        1,
        "{contended:?}"
    );
    assert_eq!(
        contended.iter().filter(|c| **c == 423).count(),
        7,
        "{contended:?}"
    );
    let distinct = lock_all((0..8).map(|i| format!("{}f{i}", urls[i % 2])).collect());
    assert_eq!(distinct, vec![200; 8], "{}\n{}", a.log_text(), b.log_text());
    for url in &urls {
        for i in 0..8 {
            let (code, body) = dav(&["-X", "PROPFIND", "-H", "Depth: 0", &format!("{url}f{i}")]);
            assert!(
                code == 207 && body.contains("<D:locktoken>"),
                "{url}f{i}: {body}"
            );
        }
    }
    a.stop();
    b.stop();
}

#[test]
fn locks_race_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    locks_race_on(&format!(
        "sqlite3://{}",
        dir.path().join("shared.db").display()
    ));
}

#[test]
fn locks_race_on_redis() {
    locks_race_on(&network_meta_url("redis", "w"));
}

#[test]
fn locks_race_on_postgres() {
    locks_race_on(&network_meta_url("postgres", "w"));
}

#[test]
fn locks_race_on_etcd() {
    locks_race_on(&network_meta_url("etcd", "w"));
}

/// `--gzip`: a client that accepts gzip gets whole files compressed, ranges as they are.
#[test]
fn gzip_compresses_whole_files_for_clients_that_accept_it() {
    let vol = Volume::new();
    let server = webdav(&vol, "dav", &["--gzip"]);
    let text = "a line of text that compresses well\n".repeat(5_000);
    let file = vol.dir.path().join("text");
    std::fs::write(&file, &text).unwrap();
    let url = format!("{}text", server.url);
    assert_eq!(dav(&["-T", file.to_str().unwrap(), &url]).0, 201);
    // curl --compressed asks for gzip and decodes it; the size on the wire is smaller.
    let out = Command::new("curl")
        .args(["-s", "--compressed", "-u", &format!("{USER}:{PASSWORD}")])
        .args(["-w", "\n%{size_download} %header{content-encoding}", &url])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, stats) = out.rsplit_once('\n').unwrap();
    assert_eq!(body, text);
    let (wire, encoding) = stats.split_once(' ').unwrap();
    assert_eq!(encoding, "gzip");
    assert!(wire.parse::<usize>().unwrap() < text.len() / 10, "{stats}");
    // A range is the file's own bytes.
    let (code, part) = dav(&["-H", "Accept-Encoding: gzip", "-r", "0-9", &url]);
    assert_eq!((code, part.as_str()), (206, &text[..10]));
    // Without Accept-Encoding the file comes as it is.
    assert_eq!(dav(&[&url]).1, text);
    server.stop();
}

/// `--all-squash` and `--umask`: what a client uploads is owned by the squashed user and
/// created without the masked bits, as a plain mount of the volume shows.
#[test]
fn squash_and_umask_decide_owner_and_mode_of_uploads() {
    let vol = Volume::new();
    let m = vol.mount("fuse");
    let server = webdav(
        &vol,
        "dav",
        &["--all-squash", "1500:1600", "--umask", "077"],
    );
    let local = vol.dir.path().join("upload.txt");
    std::fs::write(&local, b"uploaded").unwrap();
    let url = &server.url;
    let (code, _) = dav(&["-T", local.to_str().unwrap(), &format!("{url}/up.txt")]);
    assert_eq!(code, 201);
    let (code, _) = dav(&["-X", "MKCOL", &format!("{url}/made")]);
    assert_eq!(code, 201);
    let out = sh(&m.path, "stat -c '%n %u:%g %a' up.txt made");
    assert_eq!(out, "up.txt 1500:1600 600\nmade 1500:1600 700\n");
}
