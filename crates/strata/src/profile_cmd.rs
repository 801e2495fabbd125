//! `strata profile MOUNTPOINT|ACCESSLOG`: where a mount's time goes, from its access log
//! (like `juicefs profile`). Given a mount, it reads the live `.accesslog` and redraws the
//! totals every interval; given a file (a saved `cat MOUNT/.accesslog > FILE`), it
//! replays it once. Operations are counted by operation, by uid and by pid: count, total
//! and mean latency, the busiest first.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::units;

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// A mount point (live, from its .accesslog) or an access log file (replayed)
    target: PathBuf,
    /// Only these uids (comma-separated)
    #[arg(long, value_delimiter = ',')]
    uid: Vec<u32>,
    /// Only these gids (comma-separated)
    #[arg(long, value_delimiter = ',')]
    gid: Vec<u32>,
    /// Only these pids (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pid: Vec<u32>,
    /// Live mode: time between redraws: 2s, 500ms, ... (a plain number is seconds)
    #[arg(long, default_value = "2s", value_parser = units::parse_duration)]
    interval: Duration,
    /// Live mode: stop after this many redraws (default: until interrupted)
    #[arg(long)]
    count: Option<u64>,
    /// Rows per table
    #[arg(long, default_value_t = 15)]
    top: usize,
}

/// One access log line: `DATE TIME [uid:U,gid:G,pid:P] OP <SECONDS>`.
#[derive(Debug, PartialEq)]
struct Access {
    uid: u32,
    gid: u32,
    pid: u32,
    op: String,
    secs: f64,
}

fn parse_line(line: &str) -> Option<Access> {
    let mut words = line.split_whitespace();
    let (_date, _time, who, op, took) = (
        words.next()?,
        words.next()?,
        words.next()?,
        words.next()?,
        words.next_back()?,
    );
    let who = who.strip_prefix('[')?.strip_suffix(']')?;
    let mut ids = [0u32; 3];
    for (slot, (part, name)) in ids
        .iter_mut()
        .zip(who.split(',').zip(["uid:", "gid:", "pid:"]))
    {
        *slot = part.strip_prefix(name)?.parse().ok()?;
    }
    let secs = took.strip_prefix('<')?.strip_suffix('>')?.parse().ok()?;
    Some(Access {
        uid: ids[0],
        gid: ids[1],
        pid: ids[2],
        op: op.to_string(),
        secs,
    })
}

/// Count and total seconds of one group.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    count: u64,
    secs: f64,
}

/// Totals by operation, uid and pid.
#[derive(Debug, Default)]
struct Profile {
    by_op: HashMap<String, Tally>,
    by_uid: HashMap<String, Tally>,
    by_pid: HashMap<String, Tally>,
    lines: u64,
}

impl Profile {
    fn add(&mut self, a: &Access) {
        for (table, key) in [
            (&mut self.by_op, a.op.clone()),
            (&mut self.by_uid, a.uid.to_string()),
            (&mut self.by_pid, a.pid.to_string()),
        ] {
            let t = table.entry(key).or_default();
            t.count += 1;
            t.secs += a.secs;
        }
        self.lines += 1;
    }

    fn write(&self, out: &mut impl Write, top: usize) -> std::io::Result<()> {
        writeln!(out, "{} operations", self.lines)?;
        for (title, table) in [
            ("operation", &self.by_op),
            ("uid", &self.by_uid),
            ("pid", &self.by_pid),
        ] {
            let mut rows: Vec<_> = table.iter().collect();
            rows.sort_by(|a, b| b.1.secs.total_cmp(&a.1.secs).then(a.0.cmp(b.0)));
            writeln!(
                out,
                "{title:<16} {:>10} {:>12} {:>10}",
                "count", "total(s)", "mean(ms)"
            )?;
            for (key, t) in rows.into_iter().take(top) {
                let mean_ms = t.secs * 1000.0 / t.count.max(1) as f64;
                writeln!(
                    out,
                    "{key:<16} {:>10} {:>12.3} {mean_ms:>10.3}",
                    t.count, t.secs
                )?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

impl ProfileArgs {
    fn wanted(&self, a: &Access) -> bool {
        let ok = |list: &[u32], v: u32| list.is_empty() || list.contains(&v);
        ok(&self.uid, a.uid) && ok(&self.gid, a.gid) && ok(&self.pid, a.pid)
    }
}

pub fn run_profile(a: ProfileArgs) -> Result<()> {
    let meta = std::fs::metadata(&a.target).with_context(|| format!("{}", a.target.display()))?;
    if meta.is_dir() { live(&a) } else { replay(&a) }
}

fn replay(a: &ProfileArgs) -> Result<()> {
    let file = std::fs::File::open(&a.target)
        .with_context(|| format!("cannot open {}", a.target.display()))?;
    let mut profile = Profile::default();
    let mut unreadable = 0u64;
    for line in BufReader::new(file).lines() {
        let line = line.with_context(|| format!("reading {}", a.target.display()))?;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(&line) {
            Some(access) if a.wanted(&access) => profile.add(&access),
            Some(_) => {}
            None => unreadable += 1,
        }
    }
    if profile.lines == 0 && unreadable > 0 {
        bail!(
            "{} is not a Strata access log ({unreadable} lines, none readable)",
            a.target.display()
        );
    }
    let mut out = std::io::stdout().lock();
    profile.write(&mut out, a.top)?;
    if unreadable > 0 {
        writeln!(out, "{unreadable} lines skipped (not access log lines)")?;
    }
    Ok(())
}

fn live(a: &ProfileArgs) -> Result<()> {
    let log = a.target.join(".accesslog");
    let file = std::fs::File::open(&log).with_context(|| {
        format!(
            "{} is not a Strata mount (no readable .accesslog)",
            a.target.display()
        )
    })?;
    // `.accesslog` answers within a second even when idle (a "#" line), so the loop
    // below redraws on time.
    let mut reader = BufReader::new(file);
    let mut profile = Profile::default();
    let mut out = std::io::stdout().lock();
    let mut drawn = 0u64;
    let mut last = Instant::now();
    let mut line = String::new();
    while a.count.is_none_or(|n| drawn < n) {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("{} was unmounted", a.target.display());
        }
        if let Some(access) = parse_line(&line)
            && a.wanted(&access)
        {
            profile.add(&access);
        }
        if last.elapsed() >= a.interval {
            last = Instant::now();
            drawn += 1;
            profile.write(&mut out, a.top)?;
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_log_line_is_parsed_and_anything_else_is_not() {
        let a =
            parse_line("2026.12.02 06:30:25.123456 [uid:1000,gid:100,pid:4242] write <0.000250>");
        assert_eq!(
            a,
            Some(Access {
                uid: 1000,
                gid: 100,
                pid: 4242,
                op: "write".into(),
                secs: 0.00025
            })
        );
        assert_eq!(parse_line("#"), None);
        assert_eq!(parse_line("2026.12.02 06:30:25 [uid:x] write <1>"), None);
        assert_eq!(parse_line("a b [uid:1,gid:2,pid:3] read 0.1"), None);
    }

    #[test]
    fn totals_are_kept_by_operation_uid_and_pid_busiest_first() {
        let mut p = Profile::default();
        for (uid, pid, op, secs) in [
            (0, 7, "read", 0.5),
            (0, 7, "read", 0.25),
            (1, 8, "lookup", 2.0),
        ] {
            p.add(&Access {
                uid,
                gid: 0,
                pid,
                op: op.into(),
                secs,
            });
        }
        let mut out = Vec::new();
        p.write(&mut out, 10).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lookup = text.find("lookup").unwrap();
        let read = text.find("read ").unwrap();
        assert!(lookup < read, "busiest first:\n{text}");
        assert!(
            text.contains("read                      2        0.750    375.000"),
            "{text}"
        );
        assert!(text.contains("3 operations"));
    }
}
