//! `strata debug MOUNTPOINT`: everything a bug report about a mount needs, in one
//! archive (like `juicefs debug`): the mount's `.config` and two readings of `.stats` a
//! few seconds apart, the end of its log, a thread dump (gdb's backtraces when gdb is
//! installed, else each thread's state and kernel wait channel), the process's status,
//! limits and command line, its environment with every secret-looking value removed, the
//! kernel's view of the mount, and the host (kernel, OS, CPUs, memory). The archive is a
//! `.tar.gz` created 0600; secrets never enter it (`.config` holds none; passwords in
//! URLs and secret-named variables are replaced by `****`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_types::redact_url;

use crate::units;

#[derive(Debug, Args)]
pub struct DebugArgs {
    /// The mount point to collect from
    mountpoint: PathBuf,
    /// Directory to write the archive to
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// Lines of the mount's log to include
    #[arg(long, default_value_t = 5000)]
    log_lines: usize,
    /// Time between the two readings of `.stats`: 5s, 1s, ... (a plain number is seconds)
    #[arg(long, default_value = "5s", value_parser = units::parse_duration)]
    stats_interval: Duration,
    /// Do not attach gdb for the thread dump (the /proc listing is kept)
    #[arg(long)]
    no_gdb: bool,
}

/// Words in a variable's name that mark its value secret.
const SECRET_WORDS: [&str; 7] = [
    "PASS",
    "SECRET",
    "TOKEN",
    "KEY",
    "CREDENTIAL",
    "HIDDEN",
    "AUTH",
];

pub fn run_debug(a: DebugArgs) -> Result<()> {
    let config_text = std::fs::read_to_string(a.mountpoint.join(".config")).with_context(|| {
        format!(
            "{} is not a Strata mount (no readable .config)",
            a.mountpoint.display()
        )
    })?;
    let config: serde_json::Value =
        serde_json::from_str(&config_text).context("the mount's .config is not JSON")?;
    let pid = config["pid"]
        .as_u64()
        .context("the mount's .config has no pid (a mount older than this command?)")?;
    let stamp = utc_stamp();
    let name = format!("strata-debug-{stamp}");
    let staging = tempfile::Builder::new()
        .prefix("strata-debug")
        .tempdir()
        .context("cannot make a temporary directory")?;
    let dir = staging.path().join(&name);
    crate::wiring::create_private_dir(&dir)?;
    let put = |file: &str, text: &str| -> Result<()> {
        let mut f = crate::wiring::open_private_file(&dir.join(file), false)?;
        f.write_all(text.as_bytes())
            .with_context(|| format!("writing {file}"))
    };
    put("config.json", &config_text)?;
    put("stats-1.txt", &read_stats(&a.mountpoint))?;
    put("host.txt", &host_info())?;
    put("mount.txt", &mount_info(&a.mountpoint))?;
    put("process.txt", &process_info(pid))?;
    put("environment.txt", &environment(pid))?;
    put("threads.txt", &threads(pid, a.no_gdb))?;
    put("log.txt", &log_tail(&config, a.log_lines))?;
    eprintln!(
        "waiting {:?} for a second reading of .stats",
        a.stats_interval
    );
    std::thread::sleep(a.stats_interval);
    put("stats-2.txt", &read_stats(&a.mountpoint))?;
    let archive = a.out_dir.join(format!("{name}.tar.gz"));
    pack(staging.path(), &name, &archive)?;
    println!("{}", archive.display());
    Ok(())
}

/// UTC time as `YYYYMMDD-HHMMSS` for the archive's name.
fn utc_stamp() -> String {
    let ns = strata_meta::now_ns();
    let hour = strata_meta::hour_name(ns); // YYYY-MM-DD-HH
    let secs = (ns / 1_000_000_000).rem_euclid(3600);
    let date: String = hour.chars().filter(char::is_ascii_digit).collect();
    format!(
        "{}-{}{:02}{:02}",
        &date[..8.min(date.len())],
        &date[8.min(date.len())..],
        secs / 60,
        secs % 60
    )
}

fn read_stats(mountpoint: &Path) -> String {
    std::fs::read_to_string(mountpoint.join(".stats"))
        .unwrap_or_else(|e| format!("cannot read .stats: {e}\n"))
}

/// Output of a command, or why it could not run.
fn command_output(program: &str, args: &[&str]) -> String {
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            text
        }
        Err(e) => format!("{program}: {e}\n"),
    }
}

fn section(title: &str, body: &str) -> String {
    format!("== {title}\n{body}\n")
}

fn host_info() -> String {
    let file = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| format!("{p}: {e}\n"));
    [
        section("strata version", env!("CARGO_PKG_VERSION")),
        section("uname -a", &command_output("uname", &["-a"])),
        section("/etc/os-release", &file("/etc/os-release")),
        section("/proc/meminfo", &file("/proc/meminfo")),
        section("nproc", &command_output("nproc", &[])),
        section("/proc/loadavg", &file("/proc/loadavg")),
        section(
            "fuse module",
            &command_output("fusermount3", &["--version"]),
        ),
    ]
    .concat()
}

fn mount_info(mountpoint: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let path = mountpoint
        .canonicalize()
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    let line: String = mounts
        .lines()
        .filter(|l| l.split(' ').nth(4) == path.to_str())
        .map(|l| format!("{l}\n"))
        .collect();
    let df = command_output("df", &["-h", &path.to_string_lossy()]);
    let dfi = command_output("df", &["-i", &path.to_string_lossy()]);
    [
        section("mountinfo", &line),
        section("df -h", &df),
        section("df -i", &dfi),
    ]
    .concat()
}

fn process_info(pid: u64) -> String {
    let file = |name: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{name}"))
            .unwrap_or_else(|e| format!("/proc/{pid}/{name}: {e}\n"))
    };
    let cmdline: Vec<String> = file("cmdline")
        .split('\0')
        .filter(|a| !a.is_empty())
        .map(redact_url)
        .collect();
    [
        section("command line", &redact_flag_values(&cmdline).join(" ")),
        section("status", &file("status")),
        section("limits", &file("limits")),
        section("io", &file("io")),
    ]
    .concat()
}

/// Replace the value after any flag whose name looks secret.
fn redact_flag_values(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if hide_next {
            out.push("****".to_string());
            hide_next = false;
            continue;
        }
        let upper = arg.to_ascii_uppercase();
        let secret_flag = arg.starts_with("--") && SECRET_WORDS.iter().any(|w| upper.contains(w));
        match arg.split_once('=') {
            Some((flag, _)) if secret_flag => out.push(format!("{flag}=****")),
            _ => {
                hide_next = secret_flag;
                out.push(arg.clone());
            }
        }
    }
    out
}

/// The mount's environment, secret-looking values replaced and URLs redacted.
fn environment(pid: u64) -> String {
    let raw = match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(raw) => raw,
        Err(e) => return format!("/proc/{pid}/environ: {e}\n"),
    };
    let mut lines: Vec<String> = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|v| !v.is_empty())
        .map(|var| match var.split_once('=') {
            Some((name, _)) if is_secret_name(name) => format!("{name}=****"),
            Some((name, value)) => format!("{name}={}", redact_url(value)),
            None => var.to_string(),
        })
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// Each thread's name, state and kernel wait channel; then gdb's backtraces.
fn threads(pid: u64, no_gdb: bool) -> String {
    let mut out = String::from("tid\tname\tstate\twchan\n");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let mut tids: Vec<String> = tasks
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    tids.sort_by_key(|t| t.parse::<u64>().unwrap_or(u64::MAX));
    for tid in &tids {
        let read = |f: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/{f}"))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let stat = read("stat");
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        out.push_str(&format!(
            "{tid}\t{}\t{state}\t{}\n",
            read("comm"),
            read("wchan")
        ));
    }
    if no_gdb {
        return out;
    }
    let pid_text = pid.to_string();
    let gdb = command_output(
        "timeout",
        &[
            "60",
            "gdb",
            "-p",
            &pid_text,
            "-batch",
            "-nx",
            "-ex",
            "thread apply all bt",
        ],
    );
    out + "\n== gdb: thread apply all bt\n" + &gdb
}

/// The last `lines` lines of the mount's log, URLs redacted.
fn log_tail(config: &serde_json::Value, lines: usize) -> String {
    let Some(path) = config["log"].as_str() else {
        return "the mount runs in the foreground: its log went to its stderr\n".into();
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            all[start..].iter().map(|l| redact_url(l) + "\n").collect()
        }
        Err(e) => format!("{path}: {e}\n"),
    }
}

/// `tar czf ARCHIVE -C PARENT NAME`, the archive created 0600 first.
fn pack(parent: &Path, name: &str, archive: &Path) -> Result<()> {
    let file = crate::wiring::open_private_file(archive, false)
        .with_context(|| format!("cannot create {}", archive.display()))?;
    let status = Command::new("tar")
        .arg("czf")
        .arg("-")
        .arg("-C")
        .arg(parent)
        .arg(name)
        .stdout(file)
        .status()
        .context("cannot run tar")?;
    if !status.success() {
        bail!("tar failed ({status}) writing {}", archive.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_flags_and_variables_are_hidden() {
        let args: Vec<String> = [
            "strata",
            "mount",
            "redis://:pw@host/1",
            "--secret-key",
            "abc",
            "--session-token=tok",
            "--cache-size",
            "10G",
        ]
        .iter()
        .map(|s| redact_url(s))
        .collect();
        let shown = redact_flag_values(&args).join(" ");
        assert_eq!(
            shown,
            "strata mount redis://:****@host/1 --secret-key **** --session-token=**** --cache-size 10G"
        );
        assert!(is_secret_name("META_PASSWORD"));
        assert!(is_secret_name("AWS_SECRET_ACCESS_KEY"));
        assert!(is_secret_name("STRATA_HIDDEN_SECRET_KEY"));
        assert!(!is_secret_name("HOME"));
    }
}
