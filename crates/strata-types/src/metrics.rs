//! The building blocks of Strata's metrics: a lock-free latency [`Histogram`], a family of
//! them keyed by one label ([`HistogramFamily`]), and [`Exposition`], the writer of the
//! Prometheus text format (version 0.0.4) that `/metrics` and `.stats` serve.
//!
//! Counters and gauges stay where they are counted (atomics in the structs that own them);
//! a process renders them when scraped. No process-global registry: the VFS is a library
//! opened several times in one process (the Python SDK, tests), and each instance reports
//! its own counters.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Upper bounds (seconds) of the latency buckets: 50 µs to 30 s, about ×2.5 per step.
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
];

/// Counts of observed durations per latency bucket, their sum and count.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations that fell in each bucket (not cumulative); the last slot is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Record one duration.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = LATENCY_BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of the observed durations.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed))
    }

    /// Cumulative counts per bucket bound, ending with +Inf.
    fn cumulative(&self) -> Vec<u64> {
        let mut total = 0u64;
        self.buckets
            .iter()
            .map(|b| {
                total = total.saturating_add(b.load(Ordering::Relaxed));
                total
            })
            .collect()
    }
}

/// Histograms of one metric told apart by the value of one label (an operation's name).
/// Label values must come from a fixed set (operation names, never paths or user input):
/// each one is a series kept for the life of the process.
#[derive(Debug, Default)]
pub struct HistogramFamily {
    members: RwLock<BTreeMap<String, Arc<Histogram>>>,
}

impl HistogramFamily {
    /// The histogram for label value `value`, made on first use.
    pub fn get(&self, value: &str) -> Arc<Histogram> {
        if let Ok(members) = self.members.read()
            && let Some(h) = members.get(value)
        {
            return h.clone();
        }
        match self.members.write() {
            Ok(mut members) => members.entry(value.to_string()).or_default().clone(),
            // A panic while inserting poisoned the lock: keep counting, unreported.
            Err(_) => Arc::new(Histogram::default()),
        }
    }

    /// Record one duration for label value `value`.
    pub fn observe(&self, value: &str, d: Duration) {
        self.get(value).observe(d);
    }

    /// Every member with its label value, in label order.
    pub fn members(&self) -> Vec<(String, Arc<Histogram>)> {
        match self.members.read() {
            Ok(members) => members
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// The kind of a metric family, as the text format's `# TYPE` line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A Prometheus text-format document being written. Each family is written whole (its
/// `# HELP` and `# TYPE` lines, then its samples), as parsers require.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Self {
        Exposition::default()
    }

    /// The document.
    pub fn finish(self) -> String {
        self.out
    }

    /// Start a family: its help text and type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of the current family; `labels` as `(name, value)` pairs.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl SampleValue) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels, None);
        self.out.push(' ');
        value.write(&mut self.out);
        self.out.push('\n');
    }

    /// A family of one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl SampleValue) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The samples of one histogram (`_bucket`, `_sum`, `_count`) with `labels`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let cumulative = h.cumulative();
        for (i, n) in cumulative.iter().enumerate() {
            let le = LATENCY_BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            self.out.push_str(name);
            self.out.push_str("_bucket");
            write_labels(&mut self.out, labels, Some(&le));
            let _ = writeln!(self.out, " {n}");
        }
        let labelled = |out: &mut String, suffix: &str| {
            out.push_str(name);
            out.push_str(suffix);
            write_labels(out, labels, None);
        };
        labelled(&mut self.out, "_sum");
        let _ = writeln!(self.out, " {}", h.sum().as_secs_f64());
        labelled(&mut self.out, "_count");
        let _ = writeln!(self.out, " {}", h.count());
    }

    /// A whole histogram family: one histogram per value of `label`.
    pub fn histogram_family(&mut self, name: &str, help: &str, label: &str, f: &HistogramFamily) {
        self.family(name, Kind::Histogram, help);
        for (value, h) in f.members() {
            self.histogram(name, &[(label, &value)], &h);
        }
    }
}

/// A value a sample can carry.
pub trait SampleValue {
    fn write(&self, out: &mut String);
}

impl SampleValue for u64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl SampleValue for f64 {
    fn write(&self, out: &mut String) {
        if self.is_finite() {
            let _ = write!(out, "{self}");
        } else if self.is_nan() {
            out.push_str("NaN");
        } else if *self > 0.0 {
            out.push_str("+Inf");
        } else {
            out.push_str("-Inf");
        }
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)], le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
    for (k, v) in all {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_observation_in_its_bucket_cumulatively() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(40)); // <= 50 µs
        h.observe(Duration::from_millis(3)); // <= 5 ms
        h.observe(Duration::from_secs(60)); // +Inf
        let c = h.cumulative();
        assert_eq!(c[0], 1);
        assert_eq!(c[5], 1, "2.5 ms bucket holds only the 40 µs one");
        assert_eq!(c[6], 2, "5 ms bucket adds the 3 ms one");
        assert_eq!(c[LATENCY_BUCKETS.len() - 1], 2);
        assert_eq!(c[LATENCY_BUCKETS.len()], 3, "+Inf holds every observation");
        assert_eq!(h.count(), 3);
        assert_eq!(h.sum(), Duration::from_micros(60_003_040));
    }

    #[test]
    fn the_exposition_writes_families_whole_and_escapes_labels() {
        let f = HistogramFamily::default();
        f.observe("read", Duration::from_millis(1));
        f.observe("read", Duration::from_millis(2));
        let mut e = Exposition::new();
        e.single("strata_x", Kind::Gauge, "an\nexample", 7u64);
        e.histogram_family("strata_op_seconds", "ops", "op", &f);
        e.family("strata_req", Kind::Counter, "requests");
        e.sample("strata_req", &[("path", "a\"b\\c")], 2u64);
        let text = e.finish();
        assert!(text.contains("# HELP strata_x an\\nexample\n# TYPE strata_x gauge\nstrata_x 7\n"));
        assert!(text.contains("strata_op_seconds_bucket{op=\"read\",le=\"0.001\"} 1\n"));
        assert!(text.contains("strata_op_seconds_bucket{op=\"read\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("strata_op_seconds_count{op=\"read\"} 2\n"));
        assert!(text.contains("strata_op_seconds_sum{op=\"read\"} 0.003\n"));
        assert!(text.contains("strata_req{path=\"a\\\"b\\\\c\"} 2\n"));
    }
}
