//! End-to-end tests of the lifecycle commands on the SQLite engine: gc, fsck, compact
//! (and, below, trash restore, dump/load, clone, quotas, ...). Each runs the `strata`
//! binary against a volume written through a real FUSE mount.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    Volume, eventually, kill_mount_processes, network_meta_url, run, sh, strata, strata_ok,
};

fn blocks_dir(vol: &Volume) -> PathBuf {
    vol.dir.path().join("bucket/e2e-vol/chunks")
}

/// Plant an object with a block name no slice uses, `age` old.
fn plant(vol: &Volume, id: u64, age: &str) -> PathBuf {
    let dir = blocks_dir(vol).join(format!("{}/{}", id / 1_000_000, id / 1000));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{id}_0_5"));
    std::fs::write(&path, b"junk!").unwrap();
    sh(
        vol.dir.path(),
        &format!("touch -d '{age}' {}", path.display()),
    );
    path
}

fn checksums(dir: &Path) -> String {
    sh(
        dir,
        "find . -type f -not -name '.*' -print0 | sort -z | xargs -0 md5sum",
    )
}

#[test]
fn gc_reports_planted_objects_and_deletes_only_when_asked() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir d && for i in $(seq 1 20); do head -c $((i * 70000)) /dev/urandom > d/f$i; done; \
         head -c 9000000 /dev/urandom > big; cp big shared; rm big",
    );
    let before = checksums(&m.path);
    drop(m);
    let old: Vec<PathBuf> = (0..3)
        .map(|i| plant(&vol, 900_000_000 + i, "2 hours ago"))
        .collect();
    let young = plant(&vol, 900_000_100, "1 minute ago");

    let out = strata_ok(&["gc", &vol.meta_url]);
    assert!(out.contains("leaked: 3 objects (15 B)"), "{out}");
    assert!(out.contains("younger than 3600 s not judged"), "{out}");
    assert!(out.contains("run with --delete"), "{out}");
    assert!(
        old.iter().all(|p| p.exists()),
        "nothing deleted without --delete"
    );

    let out = strata_ok(&["gc", &vol.meta_url, "--delete"]);
    assert!(out.contains("deleted 3"), "{out}");
    assert!(old.iter().all(|p| !p.exists()), "planted objects deleted");
    assert!(
        young.exists(),
        "objects inside the safety window are never touched"
    );

    let out = strata_ok(&["gc", &vol.meta_url, "--delete", "--safety-window", "0"]);
    assert!(out.contains("leaked: 1 objects"), "{out}");
    assert!(!young.exists());
    let out = strata_ok(&["gc", &vol.meta_url, "--safety-window", "0"]);
    assert!(out.contains("leaked: 0 objects"), "{out}");

    let m = vol.mount("mnt");
    assert_eq!(checksums(&m.path), before, "gc never deletes data in use");
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    assert!(
        !out.contains("volume counters say"),
        "counters exact after a clean unmount: {out}"
    );
}

#[test]
fn gc_spills_its_sort_to_disk_and_agrees() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(&m.path, "for i in $(seq 1 300); do echo $i > f$i; done");
    drop(m);
    for i in 0..50 {
        plant(&vol, 800_000_000 + i * 7, "3 hours ago");
    }
    let sort_dir = vol.dir.path().join("sort");
    let out = strata_ok(&[
        "gc",
        &vol.meta_url,
        "--sort-memory",
        "0",
        "--external-sort-dir",
        sort_dir.to_str().unwrap(),
    ]);
    assert!(out.contains("objects: 350 "), "{out}");
    assert!(out.contains("leaked: 50 objects"), "{out}");
    let left = std::fs::read_dir(&sort_dir).unwrap().count();
    assert_eq!(left, 0, "spill files are removed");
}

#[test]
fn fsck_names_the_file_whose_block_is_gone() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p data/sub && head -c 3000000 /dev/urandom > data/sub/victim.bin && \
         head -c 100000 /dev/urandom > data/fine.bin && ln data/fine.bin data/hardlink",
    );
    let info = strata_ok(&["info", m.path.join("data/sub/victim.bin").to_str().unwrap()]);
    let object = info
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("e2e-vol/chunks/"))
        .unwrap()
        .to_string();
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");

    std::fs::remove_file(vol.dir.path().join("bucket").join(&object)).unwrap();
    let (ok, out) = strata(&["fsck", &vol.meta_url]);
    assert!(!ok, "a broken volume fails fsck: {out}");
    assert!(
        out.contains("broken file /data/sub/victim.bin") && out.contains("1 blocks missing"),
        "{out}"
    );
    assert!(!out.contains("fine.bin"), "{out}");
}

/// Delete the root's entry `name` straight from the SQLite engine, leaving its inode
/// record behind without a name (what a backup taken during writes can hold).
fn drop_root_entry(vol: &Volume, name: &str) {
    let db = vol.meta_url.strip_prefix("sqlite3://").unwrap();
    let script = format!(
        "import sqlite3, struct\n\
         db = sqlite3.connect('{db}')\n\
         key = b'A' + struct.pack('>Q', 1) + b'D' + b'{name}'\n\
         assert db.execute('DELETE FROM kv WHERE k = ?', (key,)).rowcount == 1\n\
         db.commit()\n"
    );
    run(Command::new("python3").arg("-c").arg(script));
}

#[test]
fn fsck_finds_inode_records_without_a_name_and_keeps_them() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p kept/sub && head -c 300000 /dev/urandom > lost.bin && \
         head -c 1000 /dev/urandom > kept/a && ln kept/a kept/sub/b && echo x > kept/sub/c",
    );
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(
        out.contains("volume is clean"),
        "hard links and subdirectories are reached: {out}"
    );

    drop_root_entry(&vol, "lost.bin");
    let (ok, out) = strata(&["fsck", &vol.meta_url]);
    assert!(!ok, "an inode nothing leads to fails fsck: {out}");
    assert!(
        out.contains("a regular file of 300000 bytes with link count 1 has no name"),
        "{out}"
    );
    assert_eq!(out.matches("has no name").count(), 1, "{out}");
    let (ok, out) = strata(&["fsck", &vol.meta_url, "--repair"]);
    assert!(!ok, "repair deletes no inode: {out}");
    assert!(
        out.contains("has no name"),
        "the record is still there: {out}"
    );
}

#[test]
fn a_crash_mid_write_leaves_only_leaked_objects_for_gc() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(&m.path, "head -c 2000000 /dev/urandom > kept.bin");
    let mut writer = Command::new("bash")
        .arg("-c")
        .arg("for i in $(seq 600); do head -c 3000000 /dev/urandom >> growing.bin || exit 0; done")
        .current_dir(&m.path)
        .spawn()
        .unwrap();
    // The kill lands while the file grows.
    let growing = m.path.join("growing.bin");
    assert!(
        eventually(Duration::from_secs(30), || std::fs::metadata(&growing)
            .is_ok_and(|md| md.len() >= 6_000_000)),
        "the writer got going"
    );
    kill_mount_processes(&m.path);
    let _ = writer.wait();
    let _ = Command::new("umount").arg("-l").arg(&m.path).status();

    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "after kill -9: {out}");
    let out = strata_ok(&["gc", &vol.meta_url, "--delete", "--safety-window", "0"]);
    let line = out.lines().find(|l| l.starts_with("leaked: ")).unwrap();
    let leaked = line.split_whitespace().nth(1).unwrap();
    assert!(
        line.ends_with(&format!("deleted {leaked}")),
        "every leak deleted: {out}"
    );
    let out = strata_ok(&["gc", &vol.meta_url, "--safety-window", "0"]);
    assert!(
        out.contains("leaked: 0 objects"),
        "gc removed every leak: {out}"
    );
    // The killed client's unflushed counter changes are gone; --repair recounts them.
    strata_ok(&["fsck", &vol.meta_url, "--repair"]);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    assert!(!out.contains("volume counters say"), "{out}");
}

#[test]
fn compact_merges_slices_without_changing_contents() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "python3 -c \"
import os
fd = os.open('frag.bin', os.O_CREAT | os.O_WRONLY)
for i in range(40):
    os.pwrite(fd, os.urandom(5000), (i * 7919) % 150000)
    os.fsync(fd)
os.close(fd)\"",
    );
    let before = sh(&m.path, "md5sum frag.bin");
    let file = m.path.join("frag.bin");
    let info = strata_ok(&["info", file.to_str().unwrap()]);
    assert!(info.contains("chunk 0: 40 slices"), "{info}");
    let out = strata_ok(&["compact", file.to_str().unwrap()]);
    assert!(out.contains("compacted 1 chunks"), "{out}");
    let info = strata_ok(&["info", file.to_str().unwrap()]);
    assert!(info.contains("chunk 0: 1 slices"), "{info}");
    sh(&m.path, "sleep 1.5");
    assert_eq!(sh(&m.path, "md5sum frag.bin"), before);
    // gc --compact does the same for every fragmented chunk of the volume.
    sh(
        &m.path,
        "python3 -c \"
import os
fd = os.open('frag2.bin', os.O_CREAT | os.O_WRONLY)
for i in range(12):
    os.pwrite(fd, os.urandom(3000), i * 1000)
    os.fsync(fd)
os.close(fd)\"",
    );
    let before2 = sh(&m.path, "md5sum frag2.bin");
    drop(m);
    let out = strata_ok(&["gc", &vol.meta_url, "--compact"]);
    assert!(out.contains("compacted 1 chunks"), "{out}");
    let again = vol.mount("mnt2");
    assert_eq!(sh(&again.path, "md5sum frag.bin"), before);
    assert_eq!(sh(&again.path, "md5sum frag2.bin"), before2);
    let info = strata_ok(&["info", again.path.join("frag2.bin").to_str().unwrap()]);
    assert!(info.contains("chunk 0: 1 slices"), "{info}");
}

/// A volume whose deleted files go to the trash for a day.
fn volume_with_trash() -> Volume {
    let vol = Volume::new();
    strata_ok(&["config", &vol.meta_url, "--trash-days", "1"]);
    vol
}

#[test]
fn deleted_files_come_back_from_the_trash() {
    let vol = volume_with_trash();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p proj/src && for i in 1 2 3; do head -c $((i * 300000)) /dev/urandom > proj/src/f$i.py; done; \
         echo weights > model.ckpt; echo keep > other.txt",
    );
    let before = checksums(&m.path);
    sh(
        &m.path,
        "rm -r proj && rm model.ckpt && sleep 1.2 && rm other.txt && echo new > other.txt",
    );
    assert!(
        sh(&m.path, "ls .trash/*/ | wc -l")
            .trim()
            .parse::<u32>()
            .unwrap()
            >= 5
    );

    let out = strata_ok(&["restore", &vol.meta_url, "--match", "ckpt", "--dry-run"]);
    assert!(out.contains("would restore /model.ckpt"), "{out}");
    let out = strata_ok(&["restore", &vol.meta_url, "--match", "ckpt"]);
    assert!(out.contains("restored 1 entries"), "{out}");
    sh(&m.path, "sleep 1.1");
    assert_eq!(sh(&m.path, "cat model.ckpt"), "weights\n");

    let out = strata_ok(&["restore", &vol.meta_url, "--end-time", "2000-01-01"]);
    assert!(
        out.contains("restored 0 entries"),
        "time window respected: {out}"
    );

    let out = strata_ok(&["restore", &vol.meta_url]);
    assert!(out.contains("restored 5 entries"), "{out}");
    assert!(
        out.contains("not restored (name exists): /other.txt"),
        "{out}"
    );
    assert!(out.contains("1 names taken"), "{out}");
    sh(&m.path, "sleep 1.1");
    assert_eq!(
        sh(&m.path, "cat other.txt"),
        "new\n",
        "existing names are not overwritten"
    );
    sh(&m.path, "echo keep > other.txt");
    assert_eq!(checksums(&m.path), before, "exact content back");
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
}

#[test]
fn rmr_removes_a_tree_through_the_trash() {
    let vol = volume_with_trash();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p t/a/b t/c && for i in $(seq 1 40); do echo $i > t/a/b/f$i; echo $i > t/c/g$i; done; \
         echo x > t/top",
    );
    let before = checksums(&m.path);
    let out = strata_ok(&["rmr", m.path.join("t").to_str().unwrap()]);
    assert!(out.contains("(85 entries)"), "{out}");
    sh(&m.path, "sleep 1.1");
    assert_eq!(sh(&m.path, "ls"), "");
    let (ok, out) = strata(&["rmr", m.path.join("t").to_str().unwrap()]);
    assert!(!ok && out.contains("No such file"), "{out}");
    let out = strata_ok(&["restore", &vol.meta_url]);
    assert!(out.contains("restored 85 entries"), "{out}");
    sh(&m.path, "sleep 1.1");
    assert_eq!(checksums(&m.path), before);
}

#[test]
fn rmr_skip_trash_deletes_for_good() {
    let vol = volume_with_trash();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p s/sub && for i in $(seq 1 150); do echo $i > s/f$i; done; echo y > s/sub/g",
    );
    let (ok, out) = strata(&["rmr", "-p", "0", m.path.join("s").to_str().unwrap()]);
    assert!(
        !ok && out.contains("0 is not in 1..=255"),
        "0 removals at once is refused: {out}"
    );
    let out = strata_ok(&[
        "rmr",
        "--skip-trash",
        "-p",
        "4",
        m.path.join("s").to_str().unwrap(),
    ]);
    assert!(out.contains("(153 entries)"), "{out}");
    assert_eq!(sh(&m.path, "ls -A | grep -v '^.trash$' || true"), "");
    let out = strata_ok(&["restore", &vol.meta_url]);
    assert!(
        out.contains("restored 0 entries"),
        "nothing went to the trash: {out}"
    );
}

#[test]
fn dump_and_load_move_a_volume_to_redis() {
    let vol = volume_with_trash();
    strata_ok(&[
        "config",
        &vol.meta_url,
        "--access-key",
        "ak",
        "--secret-key",
        "hunter2",
    ]);
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p a/b && head -c 5000000 /dev/urandom > a/b/big && echo hi > a/small && \
         ln a/small a/b/hard && ln -s b/big a/sym && setfattr -n user.k -v v1 a/small && \
         cp a/b/big shared-copy && echo bye > gone && rm gone",
    );
    let before = checksums(&m.path);
    let xattr = sh(&m.path, "getfattr --only-values -n user.k a/small");
    drop(m);

    let dump = vol.dir.path().join("meta.json.gz");
    let out = strata_ok(&["dump", &vol.meta_url, dump.to_str().unwrap()]);
    assert!(out.contains("dumped"), "{out}");
    let text = sh(vol.dir.path(), "zcat meta.json.gz");
    assert!(
        !text.contains("hunter2"),
        "secret keys are left out by default"
    );
    assert!(text.lines().count() > 10);
    strata_ok(&[
        "dump",
        &vol.meta_url,
        "--keep-secret-key",
        vol.dir.path().join("with-secret.json").to_str().unwrap(),
    ]);
    assert!(sh(vol.dir.path(), "cat with-secret.json").contains("hunter2"));

    let redis = network_meta_url("redis", "l");
    let out = strata_ok(&["load", &redis, dump.to_str().unwrap()]);
    assert!(out.contains("loaded volume e2e-vol"), "{out}");
    let (ok, out) = strata(&["load", &redis, dump.to_str().unwrap()]);
    assert!(!ok && out.contains("not empty"), "{out}");
    let (ok, out) = strata(&["load", &redis, dump.to_str().unwrap(), "--force"]);
    assert!(
        !ok && out.contains("holds a volume"),
        "--force never erases a volume: {out}"
    );

    strata_ok(&["config", &redis, "--secret-key", "hunter2"]);
    let on_redis = Volume::existing(&redis);
    let m = on_redis.mount("mnt");
    assert_eq!(checksums(&m.path), before, "every file's checksum matches");
    assert_eq!(
        sh(&m.path, "getfattr --only-values -n user.k a/small"),
        xattr
    );
    assert_eq!(
        sh(&m.path, "readlink a/sym; stat -c %h a/small"),
        "b/big\n2\n"
    );
    assert!(
        sh(&m.path, "ls .trash/*/").contains("gone"),
        "the trash came along"
    );
    m.unmount();

    let out = strata_ok(&["fsck", &redis]);
    assert!(out.contains("volume is clean"), "{out}");
    plant(&vol, 700_000_000, "2 hours ago");
    let out = strata_ok(&["gc", &redis]);
    assert!(out.contains("leaked: 1 objects"), "gc on Redis: {out}");
}

#[test]
fn a_binary_dump_moves_a_volume_to_postgres() {
    let vol = volume_with_trash();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p a/b && head -c 3000000 /dev/urandom > a/b/big && echo hi > a/small && \
         ln a/small a/b/hard && ln -s b/big a/sym && setfattr -n user.k -v v1 a/small && \
         for i in $(seq 200); do echo $i > a/f$i; done && echo bye > gone && rm gone",
    );
    let before = checksums(&m.path);
    drop(m);
    let dump = vol.dir.path().join("meta.bin");
    let out = strata_ok(&[
        "dump",
        &vol.meta_url,
        "--binary",
        "--threads",
        "3",
        dump.to_str().unwrap(),
    ]);
    assert!(out.contains(" inodes, "), "{out}");
    let stat = strata_ok(&["load", dump.to_str().unwrap(), "--binary", "--stat"]);
    assert!(stat.contains("volume:           e2e-vol"), "{stat}");
    assert!(stat.contains("entries:"), "{stat}");
    assert!(
        stat.contains("out of key order: 0\n"),
        "three scans, key order: {stat}"
    );
    let (ok, out) = strata(&["dump", &vol.meta_url, "--binary", "x.bin.gz"]);
    assert!(!ok && out.contains("compressed already"), "{out}");
    let json = vol.dir.path().join("meta.json");
    strata_ok(&["dump", &vol.meta_url, json.to_str().unwrap()]);
    let pg = network_meta_url("postgres", "bin");
    let (ok, out) = strata(&["load", &pg, json.to_str().unwrap(), "--binary"]);
    assert!(!ok && out.contains("not a binary dump"), "{out}");

    let out = strata_ok(&["load", &pg, dump.to_str().unwrap(), "--threads", "4"]);
    assert!(out.contains("loaded volume e2e-vol"), "{out}");
    let on_pg = Volume::existing(&pg);
    let m = on_pg.mount("mnt");
    assert_eq!(checksums(&m.path), before, "every file's checksum matches");
    assert_eq!(
        sh(&m.path, "getfattr --only-values -n user.k a/small"),
        "v1"
    );
    assert!(sh(&m.path, "ls .trash/*/").contains("gone"));
    m.unmount();
    let out = strata_ok(&["fsck", &pg]);
    assert!(out.contains("volume is clean"), "{out}");
}

#[test]
fn a_subdir_dump_loads_as_its_own_volume() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p proj/x other && echo 1 > proj/x/f && echo 2 > other/g",
    );
    let expected = checksums(&m.path.join("proj"));
    drop(m);
    let dump = vol.dir.path().join("proj.json");
    strata_ok(&[
        "dump",
        &vol.meta_url,
        "--subdir",
        "/proj",
        dump.to_str().unwrap(),
    ]);
    let target = format!("sqlite3://{}", vol.dir.path().join("proj.db").display());
    let out = strata_ok(&["load", &target, dump.to_str().unwrap()]);
    assert!(out.contains("loaded"), "{out}");
    let loaded = Volume::existing(&target);
    let m = loaded.mount("mnt");
    assert_eq!(checksums(&m.path), expected);
    assert_eq!(sh(&m.path, "ls"), "x\n");
    m.unmount();
    let out = strata_ok(&["fsck", &target]);
    assert!(out.contains("volume is clean"), "{out}");
}

#[test]
fn a_clone_of_a_thousand_files_is_independent() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p src/d1 src/d2 && for i in $(seq 1 500); do echo file-$i > src/d1/f$i; echo other-$i > src/d2/g$i; done; \
         head -c 3000000 /dev/urandom > src/big && ln -s d1/f1 src/link && setfattr -n user.a -v 1 src/big",
    );
    let before = checksums(&m.path.join("src"));
    let bytes_before = sh(vol.dir.path(), "du -sb bucket | cut -f1");
    let out = strata_ok(&[
        "clone",
        m.path.join("src").to_str().unwrap(),
        m.path.join("copy").to_str().unwrap(),
    ]);
    assert!(out.contains("(1005 inodes, no data copied)"), "{out}");
    let bytes_after = sh(vol.dir.path(), "du -sb bucket | cut -f1");
    assert_eq!(bytes_before, bytes_after, "no object was written");
    sh(&m.path, "sleep 1.1");
    assert_eq!(checksums(&m.path.join("copy")), before);
    assert_eq!(
        sh(
            &m.path,
            "readlink copy/link; getfattr --only-values -n user.a copy/big"
        ),
        "d1/f1\n1"
    );

    // Later writes to either side never change the other.
    sh(
        &m.path,
        "echo changed > copy/d1/f7 && dd if=/dev/zero of=copy/big bs=4096 count=10 conv=notrunc status=none && \
         echo changed > src/d2/g9 && truncate -s 100 src/big && rm -r src/d1",
    );
    let copy_now = sh(
        &m.path,
        "cat copy/d1/f7 copy/d2/g9; md5sum < copy/big; wc -c < copy/big; ls copy/d1 | wc -l",
    );
    assert!(copy_now.starts_with("changed\nother-9\n"), "{copy_now}");
    assert!(copy_now.ends_with("3000000\n500\n"), "{copy_now}");
    drop(m);
    strata_ok(&["gc", &vol.meta_url, "--delete", "--safety-window", "0"]);
    let m = vol.mount("mnt");
    let after_gc = sh(
        &m.path,
        "cat copy/d1/f7 copy/d2/g9; md5sum < copy/big; wc -c < copy/big; ls copy/d1 | wc -l",
    );
    assert_eq!(
        after_gc, copy_now,
        "gc keeps every shared slice the clone uses"
    );
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
}

#[test]
fn summary_adds_up_subtrees() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p a/x b && head -c 10000 /dev/zero > a/x/f && head -c 5000 /dev/zero > a/g && touch b/e",
    );
    let out = strata_ok(&["summary", m.path.to_str().unwrap(), "--depth", "1"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("SIZE"), "{out}");
    // root: a (4 KiB) + a/x (4 KiB) + f (12 KiB) + g (8 KiB) + b (4 KiB) + e (0)
    assert!(
        lines[1].contains("32.00 KiB") && lines[1].contains(" 3 ") && lines[1].contains(" 3  "),
        "{out}"
    );
    let a_line = lines.iter().find(|l| l.ends_with("/a")).unwrap();
    assert!(a_line.contains("24.00 KiB"), "{out}");
}

#[test]
fn destroy_removes_every_object_and_key() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "head -c 3000000 /dev/urandom > f && mkdir d && echo x > d/y",
    );
    let uuid = strata_ok(&["status", &vol.meta_url])
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("\"uuid\": \"")
                .map(|u| u.trim_end_matches(['"', ',']).to_string())
        })
        .unwrap_or_default();
    assert!(!uuid.is_empty());
    let (ok, out) = strata(&["destroy", &vol.meta_url, &uuid, "--yes"]);
    assert!(
        !ok && out.contains("connected"),
        "live clients stop destroy: {out}"
    );
    drop(m);
    // The mount process closes its session just after the unmount.
    for _ in 0..100 {
        if strata_ok(&["status", &vol.meta_url]).contains("\"sessions\": []") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100)); // poll interval of a wait for the condition
    }
    let (ok, out) = strata(&["destroy", &vol.meta_url, "0000", "--yes"]);
    assert!(!ok && out.contains("does not match"), "{out}");
    let out = strata_ok(&["destroy", &vol.meta_url, &uuid, "--yes"]);
    assert!(out.contains("destroyed volume e2e-vol"), "{out}");
    let left = sh(vol.dir.path(), "find bucket -type f | wc -l");
    assert_eq!(left.trim(), "0", "no objects left");
    let (ok, out) = strata(&["status", &vol.meta_url]);
    assert!(!ok && out.contains("no volume here"), "{out}");
}

#[test]
fn writes_beyond_a_quota_get_edquot() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "mkdir -p limited/sub free && head -c 1000000 /dev/urandom > limited/sub/old",
    );
    let out = strata_ok(&[
        "quota",
        "set",
        &vol.meta_url,
        "--path",
        "/limited",
        "--capacity",
        "4M",
        "--inodes",
        "10",
    ]);
    assert!(
        out.contains("path /limited: used 984.00 KiB of 4.00 MiB, 2 of 10 inodes"),
        "{out}"
    );
    sh(&m.path, "sleep 2.5"); // the mount re-reads quotas every 2 s
    let out = sh(
        &m.path,
        "head -c 2000000 /dev/urandom > limited/a && echo ok-a; \
         head -c 3000000 /dev/urandom 2>/dev/null >limited/sub/b && echo ok-b || echo failed-b; \
         head -c 3000000 /dev/urandom > free/c && echo ok-c",
    );
    assert!(out.contains("ok-a") && out.contains("ok-c"), "{out}");
    assert!(out.contains("failed-b"), "{out}");
    let err = sh(
        &m.path,
        "head -c 3000000 /dev/urandom 2>&1 >limited/d || true",
    );
    assert!(
        err.contains("Disk quota exceeded"),
        "EDQUOT reaches the program: {err}"
    );
    let out = sh(
        &m.path,
        "for i in $(seq 1 12); do touch limited/n$i 2>&1 || break; done; ls limited | wc -l",
    );
    assert!(out.contains("Disk quota exceeded"), "{out}");
    let out = strata_ok(&["quota", "get", &vol.meta_url, "--path", "/limited"]);
    assert!(out.contains("of 10 inodes"), "{out}");
    let (ok, out) = strata(&["quota", "check", &vol.meta_url]);
    assert!(ok, "counters agree with a recount: {out}");
    let out = strata_ok(&["quota", "list", &vol.meta_url]);
    assert!(out.contains("path /limited"), "{out}");
    strata_ok(&["quota", "delete", &vol.meta_url, "--path", "/limited"]);
    sh(
        &m.path,
        "sleep 2.5; head -c 3000000 /dev/urandom > limited/after-delete",
    );
}

#[test]
fn the_mount_backs_metadata_up_into_the_bucket() {
    let vol = Volume::new();
    let m = vol.mount_with("mnt", &["--backup-meta", "1s"]);
    sh(
        &m.path,
        "mkdir d && echo one > d/a && head -c 200000 /dev/urandom > d/b",
    );
    let expected = checksums(&m.path);
    let written = std::time::SystemTime::now();
    let backups = vol.dir.path().join("bucket/e2e-vol/meta");
    // A backup begun after the writes (every second: one finished 1.5 s after them).
    let after_writes = |e: &std::fs::DirEntry| {
        e.metadata()
            .and_then(|md| md.modified())
            .is_ok_and(|t| t > written + Duration::from_millis(1500))
    };
    let appeared = eventually(Duration::from_secs(20), || {
        std::fs::read_dir(&backups).is_ok_and(|d| d.flatten().any(|e| after_writes(&e)))
    });
    assert!(appeared, "a backup made after the writes");
    drop(m);
    let mut found: Vec<PathBuf> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    found.sort();
    let newest = found.last().expect("a backup in the bucket").clone();
    assert!(newest.to_str().unwrap().ends_with(".bin"), "{newest:?}");
    let target = format!("sqlite3://{}", vol.dir.path().join("restored.db").display());
    strata_ok(&["load", &target, newest.to_str().unwrap()]);
    let restored = Volume::existing(&target);
    let m = restored.mount("mnt");
    assert_eq!(checksums(&m.path), expected, "a backup restores the volume");
}

/// `strata bench populate` makes a volume that fsck finds clean and a mount lists in the
/// shape asked for, files reading as zeros of their lengths; it refuses an engine that
/// already holds something.
#[test]
fn populate_makes_a_clean_volume_in_the_shape_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite3://{}", dir.path().join("pop.db").display());
    let bucket = dir.path().join("bucket");
    let bucket = bucket.to_str().unwrap();
    let args = [
        "bench",
        "populate",
        &url,
        "pop-vol",
        "--files",
        "3000",
        "--per-dir",
        "100",
        "--file-size",
        "1K-1M",
        "--bucket",
        bucket,
    ];
    let out = strata_ok(&args);
    assert!(
        out.contains("3000 files in 31 directories (1 levels below /wide)"),
        "{out}"
    );
    let fsck = strata_ok(&["fsck", &url]);
    assert!(
        fsck.contains("3000 files") && fsck.contains("volume is clean"),
        "{fsck}"
    );
    let vol = Volume::existing(&url);
    let m = vol.mount("m");
    assert_eq!(
        sh(&m.path, "ls wide | wc -l; find wide -type f | wc -l"),
        "30\n3000\n"
    );
    let first = m.path.join("wide/d00/f0000");
    let length = std::fs::metadata(&first).unwrap().len();
    assert!((1024..=1 << 20).contains(&length), "{length}");
    let data = std::fs::read(&first).unwrap();
    assert!(u64::try_from(data.len()) == Ok(length) && data.iter().all(|b| *b == 0));
    drop(m);
    let (ok, again) = strata(&args);
    assert!(!ok && again.contains("not empty"), "{again}");
}
