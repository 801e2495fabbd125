//! Upgrading and restarting a mount without unmounting (docs/SEMANTICS.md "Hand-over and
//! restart of a mount"): applications keep running across 20 hand-overs between two
//! builds, and across 5 `kill -9`s of the serving process, which its supervisor restarts.
//! Running meanwhile: a writer appending and fsyncing checksummed records, a reader
//! re-reading them through a file it keeps open, a POSIX lock holder, a directory listing
//! read through one handle from before the first hand-over to after the last, a probe
//! timing `stat` (the pause applications see), and fio random reads (buffered and
//! O_DIRECT).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;

const RECORD: usize = 64;

/// A record: sequence number, payload, and the payload's FNV-1a checksum.
fn record(seq: u64) -> Vec<u8> {
    let payload = format!(
        "seq {seq:010} payload {:016x}",
        seq.wrapping_mul(0x9e37_79b9)
    );
    let line = format!("{payload} {:016x}", fnv(payload.as_bytes()));
    let mut bytes = format!("{line:<width$}", width = RECORD - 1).into_bytes();
    bytes.push(b'\n');
    bytes
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The sequence number of a record, if it is intact.
fn check_record(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let seq: u64 = text.get(4..14)?.parse().ok()?;
    (bytes == record(seq).as_slice()).then_some(seq)
}

/// Errors each worker saw, and what it did.
#[derive(Default)]
struct Tally {
    errors: Mutex<Vec<String>>,
    /// Records whose fsync returned success.
    acked: AtomicU64,
    /// Writes or fsyncs that failed (each may leave one damaged record).
    write_failures: AtomicU64,
    reads: AtomicU64,
    /// Longest `stat` probe by start time (ms since the test began), for the pauses.
    probes: Mutex<Vec<(Duration, Duration)>>,
}

impl Tally {
    fn error(&self, what: String) {
        self.errors.lock().push(what);
    }
}

struct Workload {
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    threads: Vec<JoinHandle<()>>,
    fio: Child,
    lock_holder: std::fs::File,
    /// Not a `nix::dir::Iter`: dropping one rewinds the directory.
    dir: nix::dir::OwningIter,
    dir_seen: Vec<String>,
    began: Instant,
    records: PathBuf,
}

const DIR_ENTRIES: usize = 3000;

impl Workload {
    fn start(mnt: &Path, fio_secs: u64) -> Workload {
        let began = Instant::now();
        let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
        // The listing read through one handle across the hand-overs.
        let listed = mnt.join("listed");
        std::fs::create_dir(&listed).unwrap();
        for i in 0..DIR_ENTRIES {
            std::fs::write(listed.join(format!("{i:05}-{}", "n".repeat(80))), b"").unwrap();
        }
        let mut dir = nix::dir::Dir::open(
            &listed,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap()
        .into_iter();
        let dir_seen: Vec<String> = dir
            .by_ref()
            .take(DIR_ENTRIES / 3)
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // The lock, held by this process on a file it keeps open.
        let lock_holder = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(mnt.join("locked"))
            .unwrap();
        hold_write_lock(&lock_holder);
        // fio's file, laid out before it starts.
        sh(
            mnt,
            "head -c 64M /dev/urandom > fio.dat && head -c 64M /dev/urandom > fio-direct.dat",
        );
        let fio = Command::new("fio")
            .current_dir(mnt)
            .args([
                "--name=buffered",
                "--filename=fio.dat",
                "--rw=randread",
                "--bs=4k",
                "--size=64M",
                "--ioengine=psync",
                "--time_based",
                &format!("--runtime={fio_secs}"),
                "--continue_on_error=all",
                "--name=direct",
                "--filename=fio-direct.dat",
                "--rw=randread",
                "--bs=128k",
                "--size=64M",
                "--direct=1",
                "--ioengine=psync",
                "--time_based",
                &format!("--runtime={fio_secs}"),
                "--continue_on_error=all",
                "--output-format=json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fio");
        let records = mnt.join("records");
        let mut threads = vec![
            writer(&records, stop.clone(), tally.clone()),
            reader(&records, stop.clone(), tally.clone()),
            probe(mnt, stop.clone(), tally.clone(), began),
        ];
        threads.shrink_to_fit();
        Workload {
            stop,
            tally,
            threads,
            fio,
            lock_holder,
            dir,
            dir_seen,
            began,
            records,
        }
    }

    /// Stop the workers; returns fio's (read errors, reads done).
    fn finish(mut self) -> Finished {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        let fio = self.fio.wait_with_output().unwrap();
        // fio prints errors it continued past before its report.
        let text = String::from_utf8_lossy(&fio.stdout);
        let json = text.find("\n{").map_or(&text[..], |at| &text[at + 1..]);
        let report: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| {
            panic!(
                "fio output ({e}): {} {}",
                String::from_utf8_lossy(&fio.stdout),
                String::from_utf8_lossy(&fio.stderr)
            )
        });
        let complaints: Vec<&str> = text.lines().filter(|l| l.contains("error")).collect();
        if !complaints.is_empty() {
            eprintln!(
                "fio: {} errors, first: {:?}",
                complaints.len(),
                &complaints[..complaints.len().min(5)]
            );
        }
        let (mut fio_errors, mut fio_reads) = (0, 0);
        for job in report["jobs"].as_array().unwrap() {
            // `error` is the first errno, `total_err` the count.
            let count = job["total_err"].as_u64().unwrap_or(0);
            let first = job["error"].as_u64().unwrap_or(0);
            fio_errors += if first != 0 { count.max(1) } else { count };
            fio_reads += job["read"]["total_ios"].as_u64().unwrap();
        }
        // The listing goes on through the same handle.
        let rest: Vec<String> = self
            .dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut names: Vec<String> = self.dir_seen.into_iter().chain(rest).collect();
        names.retain(|n| n != "." && n != "..");
        let listed = names.len();
        names.sort();
        names.dedup();
        Finished {
            tally: self.tally,
            fio_errors,
            fio_reads,
            listed,
            distinct_listed: names.len(),
            lock_holder: self.lock_holder,
            began: self.began,
            records: self.records,
        }
    }
}

impl Finished {
    /// fio read on, the listing through one handle saw every entry once, and the lock
    /// is still held.
    fn check_reads_listing_and_lock(&self, mnt: &Path) {
        assert!(self.fio_reads > 1000, "fio read {}", self.fio_reads);
        assert_eq!(
            (self.listed, self.distinct_listed),
            (DIR_ENTRIES, DIR_ENTRIES),
            "the listing through one handle"
        );
        assert!(!lock_is_free(&mnt.join("locked")), "the lock is still held");
    }
}

struct Finished {
    tally: Arc<Tally>,
    fio_errors: u64,
    fio_reads: u64,
    listed: usize,
    distinct_listed: usize,
    lock_holder: std::fs::File,
    began: Instant,
    records: PathBuf,
}

/// Append and fsync records until stopped.
fn writer(path: &Path, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> JoinHandle<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    std::thread::spawn(move || {
        let mut seq = 0;
        while !stop.load(Ordering::Acquire) {
            let done = file.write_all(&record(seq)).and_then(|()| file.sync_all());
            match done {
                Ok(()) => {
                    tally.acked.store(seq + 1, Ordering::Release);
                }
                Err(e) => {
                    tally.write_failures.fetch_add(1, Ordering::AcqRel);
                    tally.error(format!("writer, record {seq}: {e}"));
                }
            }
            seq += 1;
        }
    })
}

/// Re-read the records file from the start through one open file, checking every record.
fn reader(path: &Path, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> JoinHandle<()> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        while !path.exists() {
            std::thread::sleep(Duration::from_millis(5)); // waits for the writer's create
        }
        let mut file = std::fs::File::open(&path).unwrap();
        let mut buf = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let acked = tally.acked.load(Ordering::Acquire);
            let failed = tally.write_failures.load(Ordering::Acquire);
            buf.clear();
            let read = file
                .seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut buf));
            if let Err(e) = read {
                tally.error(format!("reader: {e}"));
                continue;
            }
            let complete = buf.len() / RECORD;
            let intact = buf
                .chunks_exact(RECORD)
                .filter(|r| check_record(r).is_some())
                .count();
            // A record whose write or fsync failed may be missing or damaged.
            let tolerated = usize::try_from(failed).unwrap();
            if intact + tolerated < complete.min(usize::try_from(acked).unwrap()) {
                tally.error(format!("reader: {intact} intact of {complete} records"));
            }
            tally.reads.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// `stat` the mount's root in a loop, timing each.
fn probe(mnt: &Path, stop: Arc<AtomicBool>, tally: Arc<Tally>, began: Instant) -> JoinHandle<()> {
    let target = mnt.join("locked");
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            let at = began.elapsed();
            // A new open each time: the kernel's caches cannot answer it.
            let opened = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOATIME)
                .open(&target)
                .and_then(|f| f.metadata());
            if let Err(e) = opened {
                tally.error(format!("probe: {e}"));
            }
            tally.probes.lock().push((at, began.elapsed() - at));
            std::thread::sleep(Duration::from_millis(2)); // probe interval, not a wait
        }
    })
}

/// Take a POSIX write lock on the whole of `file` (held while it stays open).
fn hold_write_lock(file: &std::fs::File) {
    let whole = libc::flock {
        l_type: libc::F_WRLCK as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_SETLK(&whole)).unwrap();
}

/// Whether some other process can take a write lock on `path` (it cannot while held).
fn lock_is_free(path: &Path) -> bool {
    let script = format!(
        "import fcntl,sys\nf=open({:?},'r+')\ntry:\n  fcntl.lockf(f,fcntl.LOCK_EX|fcntl.LOCK_NB)\nexcept OSError:\n  sys.exit(1)\n",
        path.display().to_string()
    );
    Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap()
        .success()
}

/// A copy of the binary with another build mark: the second build of the same version.
fn second_build(dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(STRATA).unwrap();
    let mark = b"strata-build:0000000000000000";
    let other = b"strata-build:1111111111111111";
    let mut found = 0;
    let mut at = 0;
    while let Some(pos) = bytes[at..].windows(mark.len()).position(|w| w == mark) {
        bytes[at + pos..at + pos + mark.len()].copy_from_slice(other);
        at += pos + mark.len();
        found += 1;
    }
    assert!(found >= 1, "the build mark is in the binary");
    let path = dir.join("strata-second-build");
    std::fs::write(&path, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The records file holds every acknowledged record, intact, in order.
fn records_intact(path: &Path, acked: u64, lost_at_most: usize) {
    let bytes = std::fs::read(path).unwrap();
    let mut seqs = Vec::new();
    let mut damaged = 0;
    for r in bytes.chunks_exact(RECORD) {
        match check_record(r) {
            Some(seq) => seqs.push(seq),
            None => damaged += 1,
        }
    }
    assert!(damaged <= lost_at_most, "{damaged} damaged records");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "records in order");
    let last = seqs.last().copied().unwrap_or(0);
    assert!(
        last + 1 >= acked,
        "acknowledged {acked}, last on disk {last}"
    );
    let missing = usize::try_from(last + 1).unwrap() - seqs.len();
    assert!(missing <= lost_at_most, "{missing} records missing");
}

/// The longest probe that overlapped each window.
fn pauses(probes: &[(Duration, Duration)], windows: &[(Duration, Duration)]) -> Vec<Duration> {
    windows
        .iter()
        .map(|&(from, to)| {
            probes
                .iter()
                .filter(|(at, took)| *at <= to && *at + *took >= from)
                .map(|(_, took)| *took)
                .max()
                .unwrap_or_default()
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

#[test]
fn twenty_hand_overs_between_two_builds_go_unnoticed() {
    let vol = Volume::new();
    let m = vol.mount("m");
    let second = second_build(vol.dir.path());
    let work = Workload::start(&m.path, 30);
    let mut windows = Vec::new();
    let mut pids = vec![serving_pid(&m.path)];
    for i in 0..20 {
        std::thread::sleep(Duration::from_millis(300)); // let the workload run between hand-overs
        let binary = if i % 2 == 0 {
            second.to_str().unwrap()
        } else {
            STRATA
        };
        let from = work.began.elapsed();
        let out = run(Command::new(binary)
            .args(["mount", &vol.meta_url])
            .arg(&m.path)
            .args(["-d", "--log"])
            .arg(&m.log)
            .arg("--cache-dir")
            .arg(vol.dir.path().join("m-cache")));
        assert!(out.status.success());
        windows.push((from, work.began.elapsed()));
        let pid = serving_pid(&m.path);
        assert!(!pids.contains(&pid), "hand-over {i}: a new process serves");
        pids.push(pid);
    }
    let done = work.finish();
    let log = m.log();
    for build in ["0000000000000000", "1111111111111111"] {
        let took = log
            .lines()
            .filter(|l| l.contains("took over volume") && l.contains(build))
            .count();
        assert_eq!(took, 10, "hand-overs to build {build}:\n{log}");
    }
    let errors = done.tally.errors.lock().clone();
    assert!(errors.is_empty(), "errors seen: {errors:?}");
    assert_eq!(done.fio_errors, 0, "fio saw errors");
    done.check_reads_listing_and_lock(&m.path);
    let acked = done.tally.acked.load(Ordering::Acquire);
    assert!(acked > 100, "{acked} records");
    records_intact(&done.records, acked, 0);
    let mut paused = pauses(&done.tally.probes.lock(), &windows);
    paused.sort();
    eprintln!(
        "hand-over pause seen by a stat probe: p50 {:?}, p99 {:?}, max {:?}; {acked} records \
         fsynced, {} re-reads, {} fio reads ({:?} of workload)",
        percentile(&paused, 50),
        percentile(&paused, 99),
        paused[paused.len() - 1],
        done.tally.reads.load(Ordering::Relaxed),
        done.fio_reads,
        done.began.elapsed()
    );
    assert!(
        percentile(&paused, 99) < Duration::from_secs(1),
        "pauses {paused:?}"
    );
    drop(done.lock_holder);
    assert!(lock_is_free(&m.path.join("locked")), "released at close");
    m.unmount();
    let (ok, out) = strata(&["fsck", &vol.meta_url]);
    assert!(ok, "fsck: {out}");
}

#[test]
fn a_killed_mount_process_comes_back_by_itself() {
    let vol = Volume::new();
    let m = vol.mount("m");
    let work = Workload::start(&m.path, 25);
    for kill in 0..5 {
        std::thread::sleep(Duration::from_millis(500)); // let the workload run between kills
        let pid = serving_pid(&m.path);
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        let back = eventually(Duration::from_secs(20), || {
            std::fs::read_to_string(m.path.join(".config"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|c| c["pid"].as_u64())
                .is_some_and(|p| p != u64::from(pid))
        });
        assert!(back, "kill {kill}: the mount came back:\n{}", m.log());
    }
    let done = work.finish();
    // Only requests in flight at a kill may fail: at most one per worker per kill.
    let errors = done.tally.errors.lock().clone();
    assert!(errors.len() <= 3 * 5, "errors seen: {errors:?}");
    assert!(done.fio_errors <= 2 * 5, "fio errors: {}", done.fio_errors);
    done.check_reads_listing_and_lock(&m.path);
    let writer_errors = errors.iter().filter(|e| e.starts_with("writer")).count();
    let acked = done.tally.acked.load(Ordering::Acquire);
    records_intact(&done.records, acked, writer_errors);
    eprintln!(
        "5 kills: {} errors ({errors:?}), {} fio errors of {} reads, {acked} records fsynced",
        errors.len(),
        done.fio_errors,
        done.fio_reads
    );
    drop(done.lock_holder);
    m.unmount();
    let log = m.log();
    assert_eq!(
        log.matches("starting it again on the same connection")
            .count(),
        5,
        "{log}"
    );
    let (ok, out) = strata(&["fsck", &vol.meta_url]);
    assert!(ok, "fsck: {out}");
}

/// Keep `curl` requests going at `url` until stopped; each must get an HTTP answer.
fn request_loop(
    url: String,
    stop: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<String>>>,
) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut done = 0;
        while !stop.load(Ordering::Acquire) {
            let out = Command::new("curl")
                .args([
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "-u",
                    "admin:change-me-now",
                ])
                .arg(&url)
                .output()
                .unwrap();
            let code = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() || code == "000" {
                failures
                    .lock()
                    .push(format!("curl {url}: {} {code}", out.status));
            }
            done += 1;
        }
        done
    })
}

/// A server that another replaced exits by itself, cleanly, within 30 s.
fn exits_cleanly(daemon: &mut Daemon) {
    let started = Instant::now();
    loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            assert!(status.success(), "{status}: {}", daemon.log_text());
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still running: {}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval of a wait for exit
    }
}

#[test]
fn new_webdav_and_gateway_servers_take_the_socket_over_without_dropping_a_request() {
    let vol = Volume::new();
    let port = strata_testkit::servers::free_port();
    let address = format!("127.0.0.1:{port}");
    let envs = [
        ("WEBDAV_USER", "admin"),
        ("WEBDAV_PASSWORD", "change-me-now"),
    ];
    let args = ["webdav", &vol.meta_url, &address];
    let mut server = Daemon::start(&vol, "dav-0", &args, &envs);
    let big = vol.dir.path().join("big");
    sh(vol.dir.path(), "head -c 48M /dev/urandom > big");
    let url = format!("http://{address}/big");
    let put = run(Command::new("curl")
        .args(["-s", "-f", "-u", "admin:change-me-now", "-T"])
        .arg(&big)
        .arg(&url));
    assert!(put.status.success());
    let (stop, failures) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let loops: Vec<_> = (0..3)
        .map(|_| request_loop(format!("http://{address}/"), stop.clone(), failures.clone()))
        .collect();
    for round in 1..=3 {
        // A download in flight across the hand-over (16 MiB/s: 3 s).
        let download = vol.dir.path().join(format!("down-{round}"));
        let slow = Command::new("curl")
            .args([
                "-s",
                "-f",
                "--limit-rate",
                "16M",
                "-u",
                "admin:change-me-now",
                "-o",
            ])
            .arg(&download)
            .arg(&url)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500)); // the download is under way
        let mut next = Daemon::start(&vol, &format!("dav-{round}"), &args, &envs);
        exits_cleanly(&mut server);
        assert!(server.log_text().contains("finishing requests in flight"));
        let finished = slow.wait_with_output().unwrap();
        assert!(
            finished.status.success(),
            "round {round}: the download failed"
        );
        assert_eq!(
            std::fs::read(&download).unwrap(),
            std::fs::read(&big).unwrap()
        );
        std::mem::swap(&mut server, &mut next);
    }
    // The gateway, through the same code: its answers (403 to unsigned requests) go on.
    let s3_port = strata_testkit::servers::free_port();
    let s3_address = format!("127.0.0.1:{s3_port}");
    let s3_envs = [
        ("STRATA_ACCESS_KEY", "admin"),
        ("STRATA_SECRET_KEY", "change-me-now"),
    ];
    let s3_args = ["gateway", &vol.meta_url, &s3_address];
    let mut gateway = Daemon::start(&vol, "s3-0", &s3_args, &s3_envs);
    let s3_loop = request_loop(
        format!("http://{s3_address}/"),
        stop.clone(),
        failures.clone(),
    );
    std::thread::sleep(Duration::from_millis(300)); // requests under way
    let _next_gateway = Daemon::start(&vol, "s3-1", &s3_args, &s3_envs);
    exits_cleanly(&mut gateway);
    std::thread::sleep(Duration::from_millis(300)); // requests to the new gateway
    stop.store(true, Ordering::Release);
    let mut requests: u64 = loops.into_iter().map(|l| l.join().unwrap()).sum();
    requests += s3_loop.join().unwrap();
    let failures = failures.lock().clone();
    assert!(failures.is_empty(), "of {requests}: {failures:?}");
    assert!(requests > 50, "{requests} requests");
    server.stop();
}

#[test]
fn a_refused_hand_over_leaves_the_old_process_serving() {
    let vol = Volume::new();
    let m = vol.mount("m");
    let held = std::fs::File::create(m.path.join("held")).unwrap();
    hold_write_lock(&held);
    let before = serving_pid(&m.path);
    // A --writeback mount is not handed over: the new process says why and exits.
    let out = Command::new(STRATA)
        .args(["mount", &vol.meta_url])
        .arg(&m.path)
        .args(["-d", "--writeback", "--log"])
        .arg(&m.log)
        .arg("--cache-dir")
        .arg(vol.dir.path().join("m-cache"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("--writeback"), "{said}");
    assert_eq!(serving_pid(&m.path), before, "the old process serves on");
    assert!(
        !lock_is_free(&m.path.join("held")),
        "its lock is still held"
    );
    std::fs::write(m.path.join("after"), b"still served").unwrap();
    assert_eq!(
        std::fs::read(m.path.join("after")).unwrap(),
        b"still served"
    );
    drop(held);
    assert!(lock_is_free(&m.path.join("held")));
}
