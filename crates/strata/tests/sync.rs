//! `strata sync` end to end through the binary: local directories, an S3 server (s3s-fs,
//! and SeaweedFS started by scripts/test.sh) and a Strata volume opened without a mount;
//! every filter and update flag; an interrupted run resumed without copying anything
//! twice; bad input gives one clear line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{STRATA, Volume, count, sh, test_server, tree};
use strata_object::ObjectStore;
use strata_object::conformance::{S3TestBackend, S3sFs, TEST_BUCKET, TEST_SECRET_KEY, TestBackend};

/// Run `strata sync ARGS`; its output.
fn sync(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(STRATA)
        .arg("sync")
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// Run `strata sync ARGS`, which must succeed; its summary line.
fn sync_ok(args: &[&str], envs: &[(&str, &str)]) -> String {
    let out = sync(args, envs);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sync {args:?} failed:\n{stderr}");
    stderr.lines().last().unwrap_or_default().to_string()
}

/// A small source tree: nested files, an empty directory, a symlink, a big file.
fn make_tree(dir: &Path) {
    sh(
        dir,
        "mkdir -p a/b empty logs build/obj && echo one > a/1.txt && echo two > a/b/2.txt \
         && echo three > top.c && printf x > logs/x.log && head -c 20000000 /dev/urandom > big.bin \
         && echo obj > build/obj/o.o && ln -s a/1.txt link && chmod 640 top.c",
    );
}

#[test]
fn local_directories_with_every_filter_and_update_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    let (s, d) = (src.to_str().unwrap(), dst.to_str().unwrap());

    // --dry changes nothing and says what it would do.
    let out = sync(&["--dry", s, d], &[]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("copy a/b/2.txt") && said.contains("copy big.bin"),
        "{said}"
    );
    assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 0);

    // A first run copies everything (the symlink as what it points to), a second nothing.
    let first = sync_ok(&[s, d], &[]);
    assert_eq!(count(&first, "copied"), 7, "{first}");
    assert_eq!(tree(&src), tree(&dst));
    assert!(
        !dst.join("empty").exists(),
        "no --dirs: empty directories are not made"
    );
    let again = sync_ok(&[s, d], &[]);
    assert_eq!(count(&again, "copied"), 0, "{again}");
    assert_eq!(count(&again, "skipped"), 7, "{again}");

    // Times are kept, so --update sees equal files as equal; a changed file is copied.
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().mtime();
    assert_eq!(mtime(&src.join("a/1.txt")), mtime(&dst.join("a/1.txt")));
    std::fs::write(src.join("a/1.txt"), "one, longer").unwrap();
    let changed = sync_ok(&["--update", s, d], &[]);
    assert_eq!(
        count(&changed, "copied"),
        2,
        "the file and the symlink to it: {changed}"
    );
    // Same size, newer in the destination: --update leaves it, --force-update copies.
    std::fs::write(dst.join("a/b/2.txt"), "TWO\n").unwrap();
    assert_eq!(count(&sync_ok(&["-u", s, d], &[]), "copied"), 0);
    assert_eq!(
        count(&sync_ok(&[s, d], &[]), "copied"),
        0,
        "same size: skipped by default"
    );
    let checked = sync_ok(&["--check-all", s, d], &[]);
    assert_eq!(
        (count(&checked, "checked"), count(&checked, "copied")),
        (7, 1),
        "{checked}"
    );
    assert_eq!(
        std::fs::read_to_string(dst.join("a/b/2.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(count(&sync_ok(&["-f", s, d], &[]), "copied"), 7);

    // --existing copies no new file, --ignore-existing touches no old one.
    std::fs::write(src.join("new.txt"), "new").unwrap();
    std::fs::write(src.join("top.c"), "changed size").unwrap();
    let existing = sync_ok(&["--existing", s, d], &[]);
    assert_eq!(count(&existing, "copied"), 1, "{existing}");
    assert!(!dst.join("new.txt").exists());
    std::fs::write(src.join("top.c"), "changed again, longer").unwrap();
    let ignoring = sync_ok(&["--ignore-existing", s, d], &[]);
    assert_eq!(count(&ignoring, "copied"), 1, "{ignoring}");
    assert_eq!(
        std::fs::read_to_string(dst.join("top.c")).unwrap(),
        "changed size"
    );

    // --delete-dst removes what the source lacks, but never what a filter leaves out.
    std::fs::write(dst.join("stray"), "x").unwrap();
    std::fs::write(dst.join("keep.log"), "x").unwrap();
    let deleted = sync_ok(&["--delete-dst", "--exclude", "*.log", s, d], &[]);
    assert_eq!(count(&deleted, "from source and"), 1, "{deleted}");
    assert!(!dst.join("stray").exists() && dst.join("keep.log").exists());
}

#[test]
fn filters_sizes_dirs_perms_and_links() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    let s = src.to_str().unwrap();
    let run_into = |name: &str, flags: &[&str]| {
        let dst = tmp.path().join(name);
        let mut args: Vec<&str> = flags.to_vec();
        let d = dst.to_str().unwrap().to_string();
        args.push(s);
        args.push(&d);
        sync_ok(&args, &[]);
        sh(
            &dst,
            "find . -mindepth 1 -printf '%P\\n' | LC_ALL=C sort | tr '\\n' ' '",
        )
    };
    // Layered rules, like rsync: directories first, then C files, nothing else.
    assert_eq!(
        run_into(
            "c",
            &["--include", "*/", "--include", "*.c", "--exclude", "*"]
        ),
        "top.c "
    );
    // Excluding a directory excludes what is in it.
    let no_build = run_into("nobuild", &["--exclude", "build/", "--exclude", "big.bin"]);
    assert!(
        !no_build.contains("build") && no_build.contains("a/b/2.txt"),
        "{no_build}"
    );
    // Full-path matching: ** crosses directories.
    assert_eq!(
        run_into(
            "txt",
            &["--match-full-path", "--include", "**.txt", "--exclude", "*"]
        ),
        "a a/1.txt a/b a/b/2.txt "
    );
    // Sizes.
    assert_eq!(run_into("big", &["--min-size", "1M"]), "big.bin ");
    let small = run_into("small", &["--max-size", "2"]);
    assert_eq!(small, "logs logs/x.log ", "{small}");
    assert_eq!(run_into("young", &["--min-age", "1h"]), "");
    // --dirs makes empty directories; --perms keeps modes; --links keeps symlinks.
    let all = run_into("all", &["--dirs", "--perms", "--links"]);
    assert!(all.contains("empty "), "{all}");
    let dst = tmp.path().join("all");
    assert_eq!(
        std::fs::metadata(dst.join("top.c"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert_eq!(
        std::fs::read_link(dst.join("link")).unwrap(),
        Path::new("a/1.txt")
    );
    // --files-from.
    let list = tmp.path().join("list");
    std::fs::write(&list, "a/b/\ntop.c\n").unwrap();
    assert_eq!(
        run_into("listed", &["--files-from", list.to_str().unwrap()]),
        "a a/b a/b/2.txt top.c "
    );
}

/// local → s3s-fs → Strata volume → SeaweedFS → local: the same tree at the end, and
/// --delete-src / --check-new on the way.
#[test]
fn round_trip_through_s3_servers_and_a_volume() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    std::fs::remove_file(src.join("link")).unwrap();
    let s3 = S3sFs::start();
    let bucket = format!("{}/in", s3s_address(&s3));
    let vol = Volume::new();
    let env = [("VOL", vol.meta_url.as_str())];
    let weed = test_server("STRATA_TEST_SEAWEEDFS");
    let weed = format!(
        "minio://strata:{TEST_SECRET_KEY}@{}/{TEST_BUCKET}/{}",
        weed.trim_start_matches("http://"),
        common::unique_prefix("sync")
    );
    let back = tmp.path().join("back");

    let to_s3 = sync_ok(&["--check-new", src.to_str().unwrap(), &bucket], &[]);
    assert_eq!(
        (count(&to_s3, "copied"), count(&to_s3, "checked")),
        (6, 6),
        "{to_s3}"
    );
    let big = s3.store().head("in/big.bin").await_blocking().unwrap();
    assert_eq!(
        big.size, 20_000_000,
        "one object, sent as a multipart upload"
    );
    sync_ok(&[&bucket, "strata://VOL/data/"], &env);
    sync_ok(&["strata://VOL/data", &weed], &env);
    let from_weed = sync_ok(&["--delete-src", &weed, back.to_str().unwrap()], &[]);
    assert_eq!(count(&from_weed, "deleted"), 6, "{from_weed}");
    assert_eq!(tree(&src), tree(&back));
    let emptied = sync_ok(&[&weed, back.to_str().unwrap()], &[]);
    assert!(emptied.starts_with("found 0 in source"), "{emptied}");
    // The volume's copy is whole: fsck finds every block.
    let fsck = Command::new(STRATA)
        .args(["fsck", &vol.meta_url])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    // And a second run into the volume copies nothing.
    let again = sync_ok(&[&bucket, "strata://VOL/data/"], &env);
    assert_eq!(count(&again, "copied"), 0, "{again}");
}

/// The address of `s3`'s test bucket, credentials included.
fn s3s_address(s3: &S3sFs) -> String {
    let host = s3
        .config()
        .endpoint
        .trim_start_matches("http://")
        .to_string();
    format!("minio://strata:{TEST_SECRET_KEY}@{host}/{TEST_BUCKET}")
}

/// Blocking on a future in a plain test.
trait AwaitBlocking: std::future::Future + Sized {
    fn await_blocking(self) -> Self::Output {
        tokio::runtime::Runtime::new().unwrap().block_on(self)
    }
}
impl<F: std::future::Future> AwaitBlocking for F {}

/// A run killed with SIGKILL halfway, then run again, puts every object exactly once in
/// all: an object appears only whole, and what is whole is not copied again.
#[test]
fn a_killed_run_resumes_without_copying_anything_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "head -c 4096 /dev/urandom > f; for d in $(seq 1 20); do mkdir d$d; for f in $(seq 1 100); do cp f d$d/f$f; done; done; rm f",
    );
    let s3 = S3sFs::start();
    let bucket = format!("{}/k", s3s_address(&s3));
    // One runtime for every listing: the store's connections belong to it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let objects = || {
        let store = s3.store();
        rt.block_on(async move {
            let mut n = 0;
            let mut after: Option<String> = None;
            loop {
                let page = store.list("k/", after.as_deref(), 1000).await.unwrap();
                n += page.len();
                if page.len() < 1000 {
                    return n;
                }
                after = page.last().map(|o| o.key.clone());
            }
        })
    };
    let mut child = Command::new(STRATA)
        .args(["sync", "-p", "2", "--bwlimit", "4"])
        .arg(&src)
        .arg(&bucket)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while objects() < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first run is stuck"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the first run ended early"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval of a wait for the condition
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // A request whose body had arrived may still land: wait for the count to settle.
    let mut done = objects();
    loop {
        std::thread::sleep(Duration::from_millis(200)); // poll interval: until the count stops changing
        let now = objects();
        if now == done {
            break;
        }
        done = now;
    }
    assert!(done < 2000, "the first run was killed too late to tell");
    let resumed = sync_ok(&[src.to_str().unwrap(), &bucket], &[]);
    assert_eq!(count(&resumed, "copied"), 2000 - done as u64, "{resumed}");
    assert_eq!(count(&resumed, "skipped"), done as u64, "{resumed}");
    assert_eq!(objects(), 2000);
}

#[test]
fn bad_input_gives_one_clear_line_and_one_bad_file_fails_only_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "echo a > a && echo b > b && ln -s missing dangling && echo c > $'bad\\xffname'",
    );
    let s = src.to_str().unwrap();
    let d = tmp.path().join("dst");
    let d = d.to_str().unwrap();
    let line = |out: Output| {
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.lines().last().unwrap_or_default().to_string()
    };
    // A dangling symlink fails, the rest is copied, the exit status says so.
    let out = sync(&[s, d], &[]);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(text.contains("dangling"), "{text}");
    assert!(text.contains("the name is not UTF-8"), "{text}");
    assert_eq!(line(out), "strata: 2 keys failed (their errors are above)");
    assert!(Path::new(d).join("a").exists() && Path::new(d).join("b").exists());
    for (args, want) in [
        (vec!["gs://b", d], "unknown address kind gs://"),
        (
            vec!["strata://NOPE_VAR/x", d],
            "set the environment variable NOPE_VAR",
        ),
        (vec![s, "minio://a:b@127.0.0.1:1/bucket"], "DST minio://"),
        (vec!["/does/not/exist", d], "SRC /does/not/exist"),
        (vec!["--include", "a[", s, d], "bad pattern"),
        (vec![s, &format!("{s}/inside")], "inside"),
    ] {
        let got = line(sync(&args, &[]));
        assert!(
            got.starts_with("strata: ") && got.contains(want),
            "{args:?}: {got}"
        );
    }
    assert!(!Path::new(s).join("inside").exists());
    // The credentials of an address never show in messages.
    let got = line(sync(&[s, "minio://a:SECRETKEY@127.0.0.1:1/bucket"], &[]));
    assert!(!got.contains("SECRETKEY"), "{got}");
}

/// An address without a trailing `/` names a directory, one file, or (when nothing has
/// that name) a key prefix whose last name DST's replaces, as `juicefs sync` reads it; on
/// local directories, an S3 server and a volume.
#[test]
fn single_files_and_key_prefixes_are_copied_as_juicefs_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "mkdir -p test text-dir keep && echo a > test/a && echo b > text-dir/b \
         && echo c > text && echo one > file && echo two > file2 && echo k > keep/k",
    );
    let (s, t) = (src.to_str().unwrap(), tmp.path().to_str().unwrap());
    let dst = tmp.path().join("dst");
    let listing = |dir: &Path| sh(dir, "find . -type f | LC_ALL=C sort | tr '\\n' ' '");
    // A prefix: every name starting with `te`, renamed to start with `ab`.
    let out = sync(&[&format!("{s}/te"), &format!("{t}/dst/ab")], &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("key prefix"));
    assert_eq!(listing(&dst), "./abst/a ./abxt ./abxt-dir/b ");
    // One file, under a new name; beside it `file2` is not taken.
    sync_ok(&[&format!("{s}/file"), &format!("{t}/dst/one")], &[]);
    assert_eq!(std::fs::read_to_string(dst.join("one")).unwrap(), "one\n");
    assert!(!dst.join("one2").exists());
    // One file into a directory, named with `/` or already there.
    sync_ok(&[&format!("{s}/file"), &format!("{t}/dst/into/")], &[]);
    sync_ok(&[&format!("{s}/file2"), &format!("{t}/dst/into")], &[]);
    assert_eq!(listing(&dst.join("into")), "./file ./file2 ");
    // Run again: nothing copied.
    let again = sync_ok(&[&format!("{s}/file"), &format!("{t}/dst/one")], &[]);
    assert_eq!(count(&again, "copied"), 0, "{again}");
    // A directory without `/` is the directory, not a prefix (`keep` only).
    sync_ok(&[&format!("{s}/keep"), &format!("{t}/dst/kept")], &[]);
    assert_eq!(listing(&dst.join("kept")), "./k ");
    let refused = |args: &[&str], want: &str| {
        let out = sync(args, &[]);
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} succeeded");
        let last = said.lines().last().unwrap_or_default();
        assert!(last.contains(want), "{args:?}: {said}");
    };
    let te = format!("{s}/te");
    refused(
        &[&te, &format!("{t}/dst/ab/")],
        "leave out its trailing '/'",
    );
    refused(
        &["--delete-dst", &te, &format!("{t}/dst/ab")],
        "refused with a prefix",
    );
    refused(
        &[&format!("{s}/nothing"), &format!("{t}/dst/n")],
        "no such file or directory",
    );

    // The same through an S3 server and a volume.
    let s3 = S3sFs::start();
    let bucket = s3s_address(&s3);
    sync_ok(&[&format!("{s}/"), &format!("{bucket}/in/")], &[]);
    sync_ok(&[&format!("{s}/file"), &format!("{bucket}/one.txt")], &[]);
    let one = s3.store().get("one.txt", None).await_blocking().unwrap();
    assert_eq!(&one[..], b"one\n");
    let back = tmp.path().join("back");
    sync_ok(&[&format!("{bucket}/in/te"), &format!("{t}/back/ab")], &[]);
    sync_ok(
        &[&format!("{bucket}/one.txt"), &format!("{t}/back/one")],
        &[],
    );
    sync_ok(
        &[&format!("{bucket}/in/keep"), &format!("{t}/back/kept")],
        &[],
    );
    assert_eq!(
        listing(&back),
        "./abst/a ./abxt ./abxt-dir/b ./kept/k ./one "
    );
    // A bucket prefix holding nothing is an empty directory, as before.
    let none = sync_ok(&[&format!("{bucket}/empty"), &format!("{t}/back/e")], &[]);
    assert!(none.starts_with("found 0 in source"), "{none}");
    let vol = Volume::new();
    let env = [("VOL", vol.meta_url.as_str())];
    sync_ok(&[&format!("{s}/file"), "strata://VOL/d/one"], &env);
    sync_ok(&[&format!("{s}/te"), "strata://VOL/d/ab"], &env);
    sync_ok(&["strata://VOL/d/a", &format!("{t}/fromvol/a")], &env);
    sync_ok(&["strata://VOL/d/one", &format!("{t}/fromvol/one")], &env);
    assert_eq!(
        listing(&tmp.path().join("fromvol")),
        "./abst/a ./abxt ./abxt-dir/b ./one "
    );
}

#[test]
fn list_threads_read_directories_ahead_and_change_nothing_in_the_result() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, back) = (tmp.path().join("src"), tmp.path().join("back"));
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "for d in $(seq 10 49); do mkdir -p c$d/s c$d/t/u && echo $d > c$d/s/f \
         && echo $d > c$d/t/u/g && echo $d > c$d/top; done && mkdir -p empty/e",
    );
    let vol = Volume::new();
    let env = [("VOL", vol.meta_url.as_str())];
    let (s, b) = (src.to_str().unwrap(), back.to_str().unwrap());

    let into = sync_ok(
        &["--list-threads", "8", "--dirs", s, "strata://VOL/x/"],
        &env,
    );
    assert_eq!(count(&into, "copied"), 120, "{into}");
    let out = sync_ok(
        &["--list-threads", "8", "--dirs", "strata://VOL/x", b],
        &env,
    );
    assert_eq!(count(&out, "copied"), 120, "{out}");
    assert_eq!(tree(&src), tree(&back));
    // Both sides listed with read-ahead agree on every key: nothing to do again.
    let again = sync_ok(
        &["--list-threads", "16", "--delete-dst", s, "strata://VOL/x/"],
        &env,
    );
    assert!(
        again.starts_with("found 282 in source, 282 in destination; copied 0"),
        "{again}"
    );
    assert_eq!(count(&again, "from source and"), 0, "{again}");

    let zero = sync(&["--list-threads", "0", s, b], &[]);
    let said = String::from_utf8_lossy(&zero.stderr);
    assert!(
        !zero.status.success() && said.contains("--list-threads"),
        "{said}"
    );
}

/// A temporary directory with empty `src` and `dst` in it.
fn src_and_dst() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&dst).unwrap();
    (tmp, src, dst)
}

/// The names of the files below `dir`, sorted, `/`-separated.
fn files_below(dir: &Path) -> Vec<String> {
    let listed = sh(
        dir,
        "find . -type f -o -type l | sed 's|^./||' | LC_ALL=C sort",
    );
    listed.lines().map(str::to_string).collect()
}

/// `--start`/`--end`, `--limit`, `--start-time`/`--end-time` and `--max-failure`, as
/// `juicefs sync` takes them.
#[test]
fn key_ranges_limits_times_and_failure_counts_bound_a_run() {
    let (tmp, src, dst) = src_and_dst();
    sh(
        &src,
        "mkdir b && for f in a b/c b/d c d e; do echo $f > $f; done \
         && touch -d '2020-06-01 00:00:00 UTC' a && touch -d '2021-06-01 00:00:00 UTC' b/c \
         && touch -d '2022-06-01 00:00:00 UTC' b/d",
    );
    sh(&dst, "echo old > a0 && echo old > zz");
    let (s, d) = (src.to_str().unwrap(), dst.to_str().unwrap());

    // Keys from b/ to c, both included; --delete-dst touches nothing outside them.
    let ranged = sync_ok(&["--start", "b/", "--end", "c", "--delete-dst", s, d], &[]);
    assert_eq!(count(&ranged, "copied"), 3, "{ranged}");
    assert_eq!(files_below(&dst), ["a0", "b/c", "b/d", "c", "zz"]);
    // -s a -e a0 takes `a` and deletes the destination's `a0`.
    sync_ok(&["-s", "a", "-e", "a0", "--delete-dst", s, d], &[]);
    assert_eq!(files_below(&dst), ["a", "b/c", "b/d", "c", "zz"]);

    // --limit: the first N source keys (b/ is one); 0 looks at nothing.
    let fresh = tmp.path().join("limited");
    let f = fresh.to_str().unwrap();
    let none = sync_ok(&["--limit", "0", s, f], &[]);
    assert_eq!(count(&none, "copied"), 0, "{none}");
    sync_ok(&["--limit", "3", s, f], &[]);
    assert_eq!(files_below(&fresh), ["a", "b/c"]);

    // Modification times, in local time (TZ; read as UTC, 07:00 would leave b/c out) or
    // with an offset.
    let timed = tmp.path().join("timed");
    let t = timed.to_str().unwrap();
    let window = [
        "--start-time",
        "2021-06-01 07:00:00",
        "--end-time",
        "2022-01-01T00:00:00Z",
    ];
    sync_ok(&[&window[..], &[s, t]].concat(), &[("TZ", "Asia/Shanghai")]);
    assert_eq!(files_below(&timed), ["b/c"]);

    // --max-failure 1 stops after the second failure; later keys are not copied.
    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    sh(
        &bad,
        "for i in 1 2 3 4 5; do ln -s missing l$i; done && echo ok > z",
    );
    let out_dir = tmp.path().join("bad-out");
    let o = out_dir.to_str().unwrap();
    let out = sync(
        &["-p", "1", "--max-failure", "1", bad.to_str().unwrap(), o],
        &[],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    let failed = count(said.lines().last().unwrap_or_default(), "strata:");
    assert!((2..=3).contains(&failed), "{said}");
    assert!(!out_dir.join("z").exists(), "{said}");
    let refused = sync(&["--limit", "-2", s, o], &[]);
    assert!(!refused.status.success());
}

/// `--check-change`: a source file written to while it is copied fails, and only it.
#[test]
fn a_source_that_changes_during_its_copy_fails_with_check_change() {
    let (_tmp, src, dst) = src_and_dst();
    sh(
        &src,
        "head -c 17000000 /dev/urandom > live && echo calm > still",
    );
    // 100 Mbps: the first 8 MiB part goes at once, the next two wait 0.67 s each.
    let args = ["--check-change", "--bwlimit", "100", "-p", "1"];
    let child = Command::new(STRATA)
        .arg("sync")
        .args(args)
        .args([src.to_str().unwrap(), dst.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The copy of `live` has begun once its temporary file exists.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sh(&dst, "ls -A").contains(".strata-sync.") {
        assert!(Instant::now() < deadline, "the copy never started");
        std::thread::yield_now();
    }
    sh(&src, "echo more >> live");
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("live: the source changed while it was copied"),
        "{said}"
    );
    assert!(said.contains("failed 1 in"), "{said}");
    assert!(dst.join("still").exists());
    // Unchanged, the same flags copy it.
    let again = sync_ok(
        &[
            "--check-change",
            src.to_str().unwrap(),
            dst.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(count(&again, "copied"), 1, "{again}");
}
