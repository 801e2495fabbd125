//! Helpers of the end-to-end tests: volumes in temporary directories, background mounts
//! through the `strata` binary, shell steps. Mounts are unmounted on drop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)] // test code

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A formatted volume in a temporary directory.
pub struct Volume {
    pub dir: tempfile::TempDir,
    pub meta_url: String,
}

/// A mount of a volume; unmounted on drop.
pub struct Mount {
    pub path: PathBuf,
    pub log: PathBuf,
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Run strata; returns (success, stdout + stderr).
pub fn strata(args: &[&str]) -> (bool, String) {
    strata_env(args, &[])
}

/// Run strata with environment variables `envs`; returns (success, stdout + stderr).
pub fn strata_env(args: &[&str], envs: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(STRATA)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Run strata, which must succeed; returns stdout + stderr.
pub fn strata_ok(args: &[&str]) -> String {
    let (ok, out) = strata(args);
    assert!(ok, "strata {args:?} failed: {out}");
    out
}

/// Poll `check` until it returns true or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250)); // poll interval of a wait for the condition
    }
    false
}

/// One curl request; returns the status code and the body.
#[allow(dead_code)] // not every test binary uses every helper
pub fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A `strata gateway --multi-buckets` of `vol` named `name` (its log file), taking the
/// root key pair `key`/`secret`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn multi_bucket_gateway(vol: &Volume, name: &str, key: &str, secret: &str) -> Daemon {
    let args = [
        "gateway",
        &vol.meta_url,
        "127.0.0.1:0",
        "--cache-size",
        "0",
        "--multi-buckets",
    ];
    let envs = [("STRATA_ACCESS_KEY", key), ("STRATA_SECRET_KEY", secret)];
    Daemon::start(vol, name, &args, &envs)
}

/// The AWS CLI (from the test command's virtualenv) against `endpoint` with a key pair,
/// reading no configuration of the machine's.
#[allow(dead_code)] // not every test binary uses every helper
pub fn aws_cli(endpoint: &str, access_key: &str, secret: &str) -> Command {
    let aws = std::env::var("STRATA_TEST_AWS").unwrap_or_else(|_| {
        panic!("STRATA_TEST_AWS is not set: run the tests through scripts/test.sh")
    });
    let mut cmd = Command::new(aws);
    cmd.args(["--endpoint-url", endpoint, "--region", "us-east-1"])
        .env("AWS_ACCESS_KEY_ID", access_key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
    cmd
}

/// An rclone config in `dir` naming the S3 endpoint `url` (with a key pair) as the
/// remote `gw:`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn rclone_s3_conf(dir: &Path, url: &str, (key, secret): (&str, &str)) -> PathBuf {
    let conf = dir.join("rclone.conf");
    let text = format!(
        "[gw]\ntype = s3\nprovider = Other\naccess_key_id = {key}\nsecret_access_key = {secret}\nendpoint = {url}\nregion = us-east-1\n"
    );
    std::fs::write(&conf, text).unwrap();
    conf
}

/// Run a shell script in `dir`; returns stdout.
pub fn sh(dir: &Path, script: &str) -> String {
    let out = run(Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(script)
        .current_dir(dir));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Volume {
    /// A volume on the embedded SQLite engine.
    pub fn new() -> Volume {
        let dir = tempfile::tempdir().unwrap();
        let meta_url = format!("sqlite3://{}", dir.path().join("meta.db").display());
        Volume::format_in(dir, meta_url)
    }

    /// A volume on the embedded SQLite engine, formatted with `extra` flags too.
    pub fn new_with(extra: &[&str]) -> Volume {
        let dir = tempfile::tempdir().unwrap();
        let meta_url = format!("sqlite3://{}", dir.path().join("meta.db").display());
        Volume::format_with(dir, meta_url, extra)
    }

    /// A volume on the engine at `meta_url` (a fresh prefix of a shared server).
    pub fn on_engine(meta_url: &str) -> Volume {
        Volume::format_in(tempfile::tempdir().unwrap(), meta_url.to_string())
    }

    /// A handle on a volume made some other way (e.g. `strata load`): mounts get their
    /// own temporary directory, nothing is formatted.
    pub fn existing(meta_url: &str) -> Volume {
        Volume {
            dir: tempfile::tempdir().unwrap(),
            meta_url: meta_url.to_string(),
        }
    }

    fn format_in(dir: tempfile::TempDir, meta_url: String) -> Volume {
        Volume::format_with(dir, meta_url, &[])
    }

    fn format_with(dir: tempfile::TempDir, meta_url: String, extra: &[&str]) -> Volume {
        assert!(
            Path::new("/dev/fuse").exists(),
            "end-to-end tests need /dev/fuse"
        );
        assert!(
            nix_is_root(),
            "end-to-end tests need root (CI runs as root)"
        );
        let bucket = dir.path().join("bucket");
        run(Command::new(STRATA)
            .args([
                "format",
                &meta_url,
                "e2e-vol",
                "--trash-days",
                "0",
                "--bucket",
            ])
            .arg(&bucket)
            .args(extra));
        Volume { dir, meta_url }
    }

    pub fn mount(&self, name: &str) -> Mount {
        self.mount_with(name, &[])
    }

    pub fn mount_with(&self, name: &str, extra: &[&str]) -> Mount {
        self.mount_with_env(name, extra, &[])
    }

    /// A mount given `extra` arguments and environment variables `envs`.
    pub fn mount_with_env(&self, name: &str, extra: &[&str], envs: &[(&str, &str)]) -> Mount {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        let log = self.dir.path().join(format!("{name}.log"));
        let cache = self.dir.path().join(format!("{name}-cache"));
        run(Command::new(STRATA)
            .args(["mount", &self.meta_url])
            .arg(&path)
            .args(["-d", "--log"])
            .arg(&log)
            .arg("--cache-dir")
            .arg(&cache)
            .args(extra)
            .envs(envs.iter().copied()));
        Mount { path, log }
    }
}

pub fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
}

pub fn is_mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(path.to_str().unwrap_or("")))
}

/// The process serving the mount at `mnt`, from its `.config`.
pub fn serving_pid(mnt: &Path) -> u32 {
    let text = std::fs::read_to_string(mnt.join(".config")).unwrap();
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    u32::try_from(config["pid"].as_u64().unwrap()).unwrap()
}

/// `kill -9` a background mount as a crash of its host would end it: its supervisor first
/// (so that nothing starts the serving process again), then the serving process.
pub fn kill_mount_processes(mnt: &Path) {
    let pid = serving_pid(mnt);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The parent's pid is the second field after the command name in parentheses.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let parent: u32 = after_name.split(' ').nth(1).unwrap().parse().unwrap();
    let cmdline = std::fs::read(format!("/proc/{parent}/cmdline")).unwrap_or_default();
    let supervised = String::from_utf8_lossy(&cmdline).contains("mount");
    for victim in [supervised.then_some(parent), Some(pid)]
        .into_iter()
        .flatten()
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(victim).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let gone = |p: u32| {
        !Path::new(&format!("/proc/{p}")).exists()
            || std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| s.contains(") Z "))
    };
    assert!(
        eventually(Duration::from_secs(10), || gone(pid)),
        "process {pid} killed"
    );
}

impl Mount {
    pub fn unmount(&self) {
        if is_mounted(&self.path) {
            let _ = Command::new(STRATA).arg("umount").arg(&self.path).output();
            let started = Instant::now();
            while is_mounted(&self.path) && started.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50)); // poll interval of a wait for the condition
            }
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
        if is_mounted(&self.path) {
            let _ = Command::new(STRATA)
                .args(["umount", "--force"])
                .arg(&self.path)
                .output();
        }
    }
}

/// A `strata` server process (`gateway`, `webdav`) a test started; killed on drop.
pub struct Daemon {
    pub child: Child,
    /// The URL it listens on, as it logged it.
    pub url: String,
    pub log: PathBuf,
}

impl Daemon {
    /// Start `strata ARGS...` with `envs`, logging to `NAME.log` in the volume's
    /// directory; returns once it logs the URL it listens on.
    pub fn start(vol: &Volume, name: &str, args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        Daemon::start_until(vol, name, args, envs, "listening on http")
    }

    /// [`Daemon::start`], returning once its log holds `ready` (its URL is taken from
    /// its log if it logged one).
    pub fn start_until(
        vol: &Volume,
        name: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        ready: &str,
    ) -> Daemon {
        let log = vol.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(STRATA)
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        let mut daemon = Daemon {
            child,
            url: String::new(),
            log,
        };
        let started = Instant::now();
        loop {
            let text = daemon.log_text();
            if text.contains(ready) {
                if let Some(at) = text.find("listening on http") {
                    let rest = &text[at + "listening on ".len()..];
                    daemon.url = rest.split_whitespace().next().unwrap().to_string();
                }
                return daemon;
            }
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("strata {args:?} exited ({status}): {text}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "strata {args:?} did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(20)); // poll interval of a wait for the condition
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stop with SIGTERM and wait; the process must exit cleanly.
    pub fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit {status}: {}", self.log_text());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `strata gateway user ARGS...` on `vol`, feeding `stdin`; its output.
pub fn gateway_user(vol: &Volume, args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(STRATA)
        .args(["gateway", "user", args[0], &vol.meta_url])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The address of a server `scripts/test.sh` started (`STRATA_TEST_REDIS`, ...).
pub fn test_server(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} must be set (scripts/test.sh starts it)"))
}

/// A key prefix no other test uses (`tag` tells the tests apart in a shared server).
pub fn unique_prefix(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}{}x{nanos}", std::process::id())
}

/// The META-URL of a fresh volume on the network engine `engine` (`redis`, `postgres`,
/// `mysql`, `etcd`) of the servers `scripts/test.sh` started.
pub fn network_meta_url(engine: &str, tag: &str) -> String {
    match engine {
        "redis" => format!(
            "{}?prefix={}",
            test_server("STRATA_TEST_REDIS"),
            unique_prefix(tag)
        ),
        "postgres" => format!(
            "{}?prefix={}",
            test_server("STRATA_TEST_POSTGRES"),
            unique_prefix(tag)
        ),
        "mysql" => format!(
            "{}?prefix={}",
            test_server("STRATA_TEST_MYSQL"),
            unique_prefix(tag)
        ),
        "etcd" => format!(
            "etcd://{}/{}",
            test_server("STRATA_TEST_ETCD"),
            unique_prefix(tag)
        ),
        other => panic!("no test server for engine {other}"),
    }
}

/// The number after `word` in a summary line.
pub fn count(summary: &str, word: &str) -> u64 {
    summary
        .split(word)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no {word:?} in {summary:?}"))
}

/// Every file below `dir` with its md5, as one sorted text.
pub fn tree(dir: &Path) -> String {
    sh(
        dir,
        "find . \\( -type f -o -type l \\) -printf '%P\\n' | LC_ALL=C sort | while read -r f; do echo \"$f $(md5sum < \"$f\")\"; done",
    )
}

/// The metrics URL a process logged.
pub fn metrics_url(log: &str) -> String {
    let at = log.find("metrics at ").expect("no metrics line in the log");
    log[at + "metrics at ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}
