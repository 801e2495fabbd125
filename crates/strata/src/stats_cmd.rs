//! `strata stats MOUNTPOINT`: a live view of a mount, like `juicefs stats` — one row per
//! interval with the process's CPU, memory and buffer, FUSE operations, throughput and
//! latency, metadata transactions, block cache hits and object store traffic (and the
//! cache group's, for members). It reads the mount's `.stats` (docs/METRICS.md) each
//! interval and shows the differences, so it needs nothing but read access to the mount.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::units;

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The mount point to watch
    mountpoint: PathBuf,
    /// Sections to show, in order: u = usage (CPU, memory, buffer), f = FUSE, m = metadata,
    /// c = block cache, o = object store, g = cache group
    #[arg(long, default_value = "ufmco")]
    schema: String,
    /// Time between rows: 1s, 500ms, ... (a plain number is seconds)
    #[arg(long, default_value = "1s", value_parser = units::parse_duration)]
    interval: Duration,
    /// Stop after this many rows (default: until interrupted)
    #[arg(long)]
    count: Option<u64>,
}

/// The samples of one reading of `.stats`: `name` → (labels text, value) pairs.
#[derive(Debug, Default)]
struct Reading {
    samples: HashMap<String, Vec<(String, f64)>>,
}

impl Reading {
    fn parse(text: &str) -> Reading {
        let mut samples: HashMap<String, Vec<(String, f64)>> = HashMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            samples
                .entry(name.to_string())
                .or_default()
                .push((labels.to_string(), value));
        }
        Reading { samples }
    }

    /// Sum of the samples of `name` whose labels contain every one of `labels`
    /// (`op="get"`, ...).
    fn sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.samples.get(name).map_or(0.0, |all| {
            all.iter()
                .filter(|(l, _)| labels.iter().all(|want| l.contains(want)))
                .map(|(_, v)| v)
                .sum()
        })
    }

    fn has(&self, name: &str) -> bool {
        self.samples.contains_key(name)
    }
}

/// One column: its header and how it is computed from two readings `secs` apart.
struct Column {
    header: &'static str,
    value: fn(&Reading, &Reading, f64) -> String,
}

/// A section: its title and columns.
struct Section {
    title: &'static str,
    columns: Vec<Column>,
}

pub fn run_stats(a: StatsArgs) -> Result<()> {
    let stats_file = a.mountpoint.join(".stats");
    let mut last = read(&stats_file, &a.mountpoint)?;
    let sections = sections(&a.schema, &last)?;
    let interval = a.interval.max(Duration::from_millis(100));
    let mut out = std::io::stdout().lock();
    let mut rows = 0u64;
    let mut taken = Instant::now();
    while a.count.is_none_or(|n| rows < n) {
        if rows.is_multiple_of(20) {
            write_header(&mut out, &sections)?;
        }
        std::thread::sleep(interval.saturating_sub(taken.elapsed()));
        let now = read(&stats_file, &a.mountpoint)?;
        let secs = taken.elapsed().as_secs_f64().max(1e-3);
        taken = Instant::now();
        let cells: Vec<String> = sections
            .iter()
            .map(|s| {
                s.columns
                    .iter()
                    .map(|c| format!("{:>7}", (c.value)(&last, &now, secs)))
                    .collect::<Vec<_>>()
                    .join("")
            })
            .collect();
        writeln!(out, "{}", cells.join(" |"))?;
        out.flush()?;
        last = now;
        rows += 1;
    }
    Ok(())
}

fn read(stats_file: &Path, mountpoint: &Path) -> Result<Reading> {
    let text = std::fs::read_to_string(stats_file).with_context(|| {
        format!(
            "{} is not a Strata mount (no readable .stats)",
            mountpoint.display()
        )
    })?;
    Ok(Reading::parse(&text))
}

fn write_header(out: &mut impl Write, sections: &[Section]) -> Result<()> {
    let titles: Vec<String> = sections
        .iter()
        .map(|s| {
            let width = 7 * s.columns.len();
            format!("{:-^width$}", s.title)
        })
        .collect();
    writeln!(out, "{}", titles.join("-+"))?;
    let headers: Vec<String> = sections
        .iter()
        .map(|s| {
            s.columns
                .iter()
                .map(|c| format!("{:>7}", c.header))
                .collect::<String>()
        })
        .collect();
    writeln!(out, "{}", headers.join(" |"))?;
    Ok(())
}

fn sections(schema: &str, first: &Reading) -> Result<Vec<Section>> {
    let mut out = Vec::new();
    for letter in schema.chars() {
        out.push(match letter {
            'u' => usage(),
            'f' => fuse(),
            'm' => meta(),
            'c' => cache(),
            'o' => object(),
            'g' if first.has("strata_group_members") => group(),
            'g' => bail!("this mount is not in a cache group: drop 'g' from --schema"),
            other => bail!("--schema: unknown section '{other}' (use letters of ufmcog)"),
        });
    }
    if out.is_empty() {
        bail!("--schema is empty: use letters of ufmcog");
    }
    Ok(out)
}

/// Change of `name` (summed over `labels`) per second.
fn rate(a: &Reading, b: &Reading, secs: f64, name: &str, labels: &[&str]) -> f64 {
    ((b.sum(name, labels) - a.sum(name, labels)) / secs).max(0.0)
}

/// Mean latency between two readings of a histogram, in a readable unit.
fn mean_latency(a: &Reading, b: &Reading, name: &str) -> String {
    let count = b.sum(&format!("{name}_count"), &[]) - a.sum(&format!("{name}_count"), &[]);
    let sum = b.sum(&format!("{name}_sum"), &[]) - a.sum(&format!("{name}_sum"), &[]);
    if count <= 0.0 {
        return "-".into();
    }
    let ms = sum / count * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{ms:.0}ms")
    }
}

/// A number with K/M/G suffixes, as `juicefs stats` shows them.
fn human(v: f64) -> String {
    let units = [("G", 1e9), ("M", 1e6), ("K", 1e3)];
    for (suffix, size) in units {
        if v >= size {
            return format!("{:.1}{suffix}", v / size);
        }
    }
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Bytes with binary suffixes.
fn bytes(v: f64) -> String {
    let units = [("G", 1073741824.0), ("M", 1048576.0), ("K", 1024.0)];
    for (suffix, size) in units {
        if v >= size {
            return format!("{:.1}{suffix}", v / size);
        }
    }
    format!("{v:.0}")
}

fn usage() -> Section {
    Section {
        title: "usage",
        columns: vec![
            Column {
                header: "cpu",
                value: |a, b, s| {
                    format!(
                        "{:.1}%",
                        rate(a, b, s, "process_cpu_seconds_total", &[]) * 100.0
                    )
                },
            },
            Column {
                header: "mem",
                value: |_, b, _| bytes(b.sum("process_resident_memory_bytes", &[])),
            },
            Column {
                header: "buf",
                value: |_, b, _| bytes(b.sum("strata_buffer_bytes_in_use", &[])),
            },
        ],
    }
}

fn fuse() -> Section {
    const H: &str = "strata_fuse_op_duration_seconds";
    Section {
        title: "fuse",
        columns: vec![
            Column {
                header: "ops",
                value: |a, b, s| human(rate(a, b, s, "strata_fuse_op_duration_seconds_count", &[])),
            },
            Column {
                header: "lat",
                value: |a, b, _| mean_latency(a, b, H),
            },
            Column {
                header: "read",
                value: |a, b, s| bytes(rate(a, b, s, "strata_fuse_read_bytes", &[])),
            },
            Column {
                header: "write",
                value: |a, b, s| bytes(rate(a, b, s, "strata_fuse_written_bytes", &[])),
            },
        ],
    }
}

fn meta() -> Section {
    Section {
        title: "meta",
        columns: vec![
            Column {
                header: "txns",
                value: |a, b, s| {
                    human(rate(
                        a,
                        b,
                        s,
                        "strata_meta_transaction_duration_seconds_count",
                        &[],
                    ))
                },
            },
            Column {
                header: "lat",
                value: |a, b, _| mean_latency(a, b, "strata_meta_transaction_duration_seconds"),
            },
            Column {
                header: "retry",
                value: |a, b, s| human(rate(a, b, s, "strata_meta_transaction_restarts", &[])),
            },
        ],
    }
}

fn cache() -> Section {
    Section {
        title: "blockcache",
        columns: vec![
            Column {
                header: "hit",
                value: |a, b, s| human(rate(a, b, s, "strata_cache_hits", &[])),
            },
            Column {
                header: "miss",
                value: |a, b, s| human(rate(a, b, s, "strata_cache_misses", &[])),
            },
            Column {
                header: "size",
                value: |_, b, _| bytes(b.sum("strata_cache_bytes", &[])),
            },
        ],
    }
}

fn object() -> Section {
    Section {
        title: "object",
        columns: vec![
            Column {
                header: "get",
                value: |a, b, s| human(rate(a, b, s, "strata_object_requests", &["op=\"get\""])),
            },
            Column {
                header: "get_b",
                value: |a, b, s| bytes(rate(a, b, s, "strata_object_bytes_down", &[])),
            },
            Column {
                header: "put",
                value: |a, b, s| human(rate(a, b, s, "strata_object_requests", &["op=\"put\""])),
            },
            Column {
                header: "put_b",
                value: |a, b, s| bytes(rate(a, b, s, "strata_object_bytes_up", &[])),
            },
            Column {
                header: "err",
                value: |a, b, s| {
                    human(rate(
                        a,
                        b,
                        s,
                        "strata_object_requests",
                        &["result=\"error\""],
                    ))
                },
            },
        ],
    }
}

fn group() -> Section {
    Section {
        title: "group",
        columns: vec![
            Column {
                header: "peer",
                value: |a, b, s| human(rate(a, b, s, "strata_group_peer_hits", &[])),
            },
            Column {
                header: "peer_b",
                value: |a, b, s| bytes(rate(a, b, s, "strata_group_peer_bytes", &[])),
            },
            Column {
                header: "served",
                value: |a, b, s| human(rate(a, b, s, "strata_group_served", &[])),
            },
            Column {
                header: "fallbk",
                value: |a, b, s| human(rate(a, b, s, "strata_group_peer_fallbacks", &[])),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_the_difference_of_two_readings() {
        let a = Reading::parse(
            "# TYPE x counter\nstrata_object_requests{op=\"get\",result=\"ok\"} 10\n\
             strata_object_requests{op=\"put\",result=\"ok\"} 4\n\
             strata_fuse_op_duration_seconds_count{op=\"read\"} 100\n\
             strata_fuse_op_duration_seconds_sum{op=\"read\"} 1\n",
        );
        let b = Reading::parse(
            "strata_object_requests{op=\"get\",result=\"ok\"} 30\n\
             strata_object_requests{op=\"put\",result=\"ok\"} 4\n\
             strata_fuse_op_duration_seconds_count{op=\"read\"} 300\n\
             strata_fuse_op_duration_seconds_sum{op=\"read\"} 1.5\n",
        );
        assert_eq!(
            rate(&a, &b, 2.0, "strata_object_requests", &["op=\"get\""]),
            10.0
        );
        assert_eq!(rate(&a, &b, 2.0, "strata_object_requests", &[]), 10.0);
        assert_eq!(
            mean_latency(&a, &b, "strata_fuse_op_duration_seconds"),
            "2.50ms"
        );
        assert_eq!(mean_latency(&b, &b, "strata_fuse_op_duration_seconds"), "-");
        assert_eq!(human(12_345.0), "12.3K");
        assert_eq!(bytes(3.0 * 1048576.0), "3.0M");
    }

    #[test]
    fn an_unknown_section_is_refused() {
        let r = Reading::default();
        assert!(sections("ufx", &r).is_err());
        assert!(sections("g", &r).is_err(), "no group in this reading");
        assert_eq!(sections("ufmco", &r).map(|s| s.len()).unwrap_or(0), 5);
    }
}
