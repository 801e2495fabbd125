//! The `/metrics` endpoints of every long-running process — a FUSE mount, an S3 gateway,
//! a WebDAV server and a cache node of one volume — scraped over HTTP after real traffic
//! and parsed by the Prometheus project's own text-format parser (Python
//! `prometheus_client`, from the test command's virtualenv): the documents parse, every
//! metric docs/METRICS.md lists exists where it says, the traffic shows in them, and the
//! Grafana dashboard queries only documented metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

const KEY: &str = "metrics-key";
const SECRET: &str = "metrics-secret-123";

/// One sample: its name, labels and value.
type Sample = (String, BTreeMap<String, String>, f64);
/// One family: its type and samples.
type Family = (String, Vec<Sample>);
/// The parsed families of one document, by name.
type Families = BTreeMap<String, Family>;

/// Parse a metrics document with `prometheus_client`'s text-format parser.
fn parse(text: &str) -> Families {
    let python = std::env::var("STRATA_TEST_PROM_PY")
        .expect("STRATA_TEST_PROM_PY is not set: run the tests through scripts/test.sh");
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = [f.type, [[s.name, s.labels, s.value] for s in f.samples]]
print(json.dumps(out))
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser rejected the document: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    json.into_iter()
        .map(|(name, v)| {
            let kind = v[0].as_str().unwrap().to_string();
            let samples = v[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let labels = s[1]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect();
                    (
                        s[0].as_str().unwrap().to_string(),
                        labels,
                        s[2].as_f64().unwrap(),
                    )
                })
                .collect();
            (name, (kind, samples))
        })
        .collect()
}

/// The family a documented name is in (the parser drops a counter's `_total`).
fn family<'f>(f: &'f Families, name: &str) -> Option<&'f Family> {
    f.get(name).or_else(|| f.get(name.strip_suffix("_total")?))
}

/// The value of sample `sample` whose labels include `labels`, if any.
fn value(f: &Families, family_name: &str, sample: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let (_, samples) = family(f, family_name)?;
    samples
        .iter()
        .find(|(n, l, _)| {
            // The parser names a counter's samples with `_total`.
            (n == sample || n.strip_suffix("_total") == Some(sample))
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| *v)
}

/// Names listed in docs/METRICS.md's table under the heading starting with `section`.
fn documented(section: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/METRICS.md"),
    )
    .unwrap();
    let start = doc.find(&format!("## {section}")).unwrap();
    let body = &doc[start + 3..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .map(str::to_string)
        .collect()
}

/// GET `url` with curl; its body.
fn http_get(url: &str) -> String {
    let out = run(Command::new("curl").args(["-sS", "-f", url]));
    String::from_utf8(out.stdout).unwrap()
}

/// Assert that every name in `names` is served in `f` (`what` names the process).
fn assert_serves(f: &Families, what: &str, names: &[String]) {
    for name in names {
        assert!(
            family(f, name).is_some(),
            "{what}: {name} is documented but not served"
        );
    }
}

/// The value of the sample named as its family with `labels` (-1 if there is none).
fn sample(f: &Families, name: &str, labels: &[(&str, &str)]) -> f64 {
    value(f, name, name, labels).unwrap_or(-1.0)
}

/// The `_count` of histogram `name` for the member labelled `label=value`.
fn histogram_count(f: &Families, name: &str, label: &str, value_of: &str) -> f64 {
    value(f, name, &format!("{name}_count"), &[(label, value_of)]).unwrap_or(0.0)
}

#[test]
fn every_long_running_process_serves_documented_metrics_that_parse() {
    let vol = Volume::new();
    let every_client = documented("Every client");
    let group_only = documented("Cache group members");
    assert!(
        every_client.len() > 25 && group_only.len() > 10,
        "{every_client:?} {group_only:?}"
    );

    // A mount, with traffic through it.
    let mnt = vol.mount_with("m", &["--metrics", "127.0.0.1:0"]);
    sh(
        &mnt.path,
        "head -c 3000000 /dev/urandom > f && cat f > /dev/null && ls -l > /dev/null && mkdir d",
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(mnt.path.join(".config")).unwrap()).unwrap();
    let mount_url = config["metrics"].as_str().unwrap().to_string();
    assert_eq!(mount_url, metrics_url(&mnt.log()));
    let m = parse(&http_get(&mount_url));
    assert_serves(&m, "mount", &every_client);
    let fuse = "strata_fuse_op_duration_seconds";
    assert!(histogram_count(&m, fuse, "op", "write") >= 1.0);
    assert!(histogram_count(&m, fuse, "op", "mkdir") >= 1.0);
    let put_ok = [("op", "put"), ("result", "ok")];
    assert!(sample(&m, "strata_object_requests", &put_ok) >= 1.0);
    let committed = [("result", "committed")];
    assert!(sample(&m, "strata_meta_transactions", &committed) >= 1.0);
    assert!(sample(&m, "strata_object_bytes_up", &[]) >= 3_000_000.0);
    assert!(sample(&m, "process_resident_memory_bytes", &[]) > 1e6);
    assert_eq!(m[fuse].0, "histogram");
    // `.stats` is the same document.
    let stats = parse(&std::fs::read_to_string(mnt.path.join(".stats")).unwrap());
    assert!(histogram_count(&stats, fuse, "op", "mkdir") >= 1.0);
    // Only /metrics is served.
    let base = mount_url.trim_end_matches("/metrics");
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{base}/other"),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");

    // An address given explicitly and taken is an error, said in one line.
    let addr = base.trim_start_matches("http://");
    let out = Command::new(STRATA)
        .args([
            "webdav",
            &vol.meta_url,
            "127.0.0.1:0",
            "--anonymous",
            "--metrics",
            addr,
        ])
        .env_remove("WEBDAV_USER")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("cannot listen for metrics on {addr}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An S3 gateway, with a signed PUT and GET.
    let gw = Daemon::start_until(
        &vol,
        "gw",
        &[
            "gateway",
            &vol.meta_url,
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ],
        &[("STRATA_ACCESS_KEY", KEY), ("STRATA_SECRET_KEY", SECRET)],
        "listening on http",
    );
    let object = format!("{}/e2e-vol/put-by-s3", gw.url);
    let user = format!("{KEY}:{SECRET}");
    run(Command::new("curl")
        .args([
            "-sS",
            "-f",
            "--aws-sigv4",
            "aws:amz:us-east-1:s3",
            "--user",
            &user,
            "-H",
            "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "-T",
        ])
        .arg(mnt.path.join("f"))
        .arg(&object));
    run(Command::new("curl").args([
        "-sS",
        "-f",
        "-o",
        "/dev/null",
        "--aws-sigv4",
        "aws:amz:us-east-1:s3",
        "--user",
        &user,
        "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        &object,
    ]));
    let g = parse(&http_get(&metrics_url(&gw.log_text())));
    assert_serves(&g, "gateway", &every_client);
    for op in ["PutObject", "GetObject"] {
        let n = histogram_count(&g, "strata_s3_request_duration_seconds", "op", op);
        assert!(n >= 1.0, "gateway: no {op} counted");
    }

    // A WebDAV server, with a PUT and a PROPFIND.
    let dav = Daemon::start_until(
        &vol,
        "dav",
        &[
            "webdav",
            &vol.meta_url,
            "127.0.0.1:0",
            "--anonymous",
            "--metrics",
            "127.0.0.1:0",
        ],
        &[],
        "listening on http",
    );
    run(Command::new("curl")
        .args(["-sS", "-f", "-T"])
        .arg(mnt.path.join("f"))
        .arg(format!("{}put-by-dav", dav.url)));
    run(Command::new("curl").args([
        "-sS",
        "-f",
        "-o",
        "/dev/null",
        "-X",
        "PROPFIND",
        "-H",
        "Depth: 1",
        &dav.url,
    ]));
    let d = parse(&http_get(&metrics_url(&dav.log_text())));
    assert_serves(&d, "webdav", &every_client);
    for method in ["PUT", "PROPFIND"] {
        let n = histogram_count(
            &d,
            "strata_webdav_request_duration_seconds",
            "method",
            method,
        );
        assert!(n >= 1.0, "webdav: no {method} counted");
    }

    // A cache node: every client metric and the group's.
    let cache = vol.dir.path().join("node-cache");
    let node = Daemon::start_until(
        &vol,
        "node",
        &[
            "cache-node",
            &vol.meta_url,
            "--cache-group",
            "g",
            "--group-listen",
            "127.0.0.1:0",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--cache-size",
            "1G",
            "--metrics",
            "127.0.0.1:0",
        ],
        &[],
        "metrics at",
    );
    let n = parse(&http_get(&metrics_url(&node.log_text())));
    for name in every_client.iter().chain(&group_only) {
        assert!(
            family(&n, name).is_some(),
            "cache node: {name} is documented but not served"
        );
    }
    assert_eq!(sample(&n, "strata_group_members", &[]), 1.0);
    node.stop();
    dav.stop();
    gw.stop();

    // The dashboard queries documented metrics only.
    let documented: BTreeSet<String> = every_client
        .into_iter()
        .chain(group_only)
        .chain(documented("Writeback clients"))
        .collect();
    let dashboard = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-dashboard.json"),
    )
    .unwrap();
    let json: Value = serde_json::from_str(&dashboard).unwrap();
    let mut queried = 0;
    for panel in json["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if !(word.starts_with("strata_") || word.starts_with("process_")) {
                    continue;
                }
                let base = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s).filter(|b| documented.contains(*b)))
                    .unwrap_or(word);
                assert!(
                    documented.contains(base),
                    "the dashboard queries {word}, which docs/METRICS.md does not list"
                );
                queried += 1;
            }
        }
    }
    assert!(queried > 15, "{queried}");
}
