//! PostgreSQL with automatic failover: two nodes managed by Patroni (on the etcd cluster
//! `STRATA_TEST_ETCD` names; `scripts/test.sh` starts it), synchronous replication, and
//! two clients: one on the multi-host URL `postgres://…@NODE1,NODE2/db?
//! target_session_attrs=read-write`, one through PgBouncer in transaction mode
//! (`?pooler=transaction`), which Patroni's role-change callback points at the new
//! primary. Four writers (two per client) create keys while the primary is switched over,
//! then while the new primary is killed (Patroni and PostgreSQL, `kill -9`): every create
//! that was acknowledged must be there afterwards, none reported failed may have been
//! applied, the writers must carry on, and the longest pause each event caused is
//! reported.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use strata_meta::kv::{CommitRequest, KvEngine, KvError, ReadCheck, Write};
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_testkit::servers::{Server as Proc, free_ports};

/// PostgreSQL refuses to run as root: as root, Patroni runs as the `postgres` user.
fn postgres_user() -> Option<(u32, u32)> {
    if !Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
    {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("a postgres user (Debian's postgresql package makes one)");
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

fn which(program: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!path.is_empty()).then_some(path)
}

fn pg_bin() -> String {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .map(|e| e.unwrap().path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop().unwrap().display().to_string()
}

struct Node {
    name: String,
    pg_port: u16,
    api_port: u16,
    data: PathBuf,
    patroni: Option<Proc>,
}

/// PgBouncer's configuration, its one database on the server at `port`. In front of a
/// cluster that fails over, a failed server login must not lock clients out for long
/// (`server_login_retry` is 15 s by default), nor a dead server hold a connect attempt.
fn pgbouncer_ini(dir: &Path, listen: u16, port: u16) -> String {
    format!(
        "[databases]\n* = host=127.0.0.1 port={port}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
         listen_port = {listen}\nunix_socket_dir =\nauth_type = plain\n\
         auth_file = {dir}/users.txt\npool_mode = transaction\nmax_client_conn = 200\n\
         default_pool_size = 20\nserver_login_retry = 1\nserver_connect_timeout = 3\nlogfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n",
        dir = dir.display()
    )
}

/// The callback Patroni runs when a node starts or changes role: a node that becomes
/// the primary points PgBouncer at itself and makes it reload.
fn role_change_script(dir: &Path, node: &Node, listen: u16) -> PathBuf {
    let script = dir.join(format!("on-role-change-{}.sh", node.name));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$2\" in master|primary) ;; *) exit 0 ;; esac\n\
             cat > {dir}/pgbouncer.ini <<'INI'\n{ini}INI\n\
             [ -f {dir}/pgbouncer.pid ] && kill -HUP \"$(cat {dir}/pgbouncer.pid)\"\nexit 0\n",
            dir = dir.display(),
            ini = pgbouncer_ini(dir, listen, node.pg_port)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

fn config(dir: &Path, scope: &str, node: &Node, etcd: &str, callback: &Path) -> String {
    format!(
        "scope: {scope}\nnamespace: /strata-test/\nname: {name}\n\
         restapi:\n  listen: 127.0.0.1:{api}\n  connect_address: 127.0.0.1:{api}\n\
         etcd3:\n  hosts: {etcd}\n\
         bootstrap:\n  dcs:\n    ttl: 10\n    loop_wait: 1\n    retry_timeout: 4\n\
         \x20   maximum_lag_on_failover: 1048576\n    synchronous_mode: true\n\
         \x20   postgresql:\n      use_pg_rewind: true\n      parameters:\n\
         \x20       max_connections: 200\n        wal_keep_size: 128MB\n\
         \x20 initdb:\n    - encoding: UTF8\n\
         \x20 pg_hba:\n    - host replication replicator 127.0.0.1/32 md5\n\
         \x20   - host all all 127.0.0.1/32 md5\n\
         postgresql:\n  listen: 127.0.0.1:{pg}\n  connect_address: 127.0.0.1:{pg}\n\
         \x20 data_dir: {data}\n  bin_dir: {bin}\n  pgpass: {dir}/pgpass-{name}\n\
         \x20 authentication:\n    replication:\n      username: replicator\n\
         \x20     password: rep-pass\n    superuser:\n      username: postgres\n\
         \x20     password: su-pass\n    rewind:\n      username: postgres\n\
         \x20     password: su-pass\n\
         \x20 parameters:\n    unix_socket_directories: {dir}\n\
         \x20 callbacks:\n    on_start: {callback}\n    on_role_change: {callback}\n",
        name = node.name,
        api = node.api_port,
        pg = node.pg_port,
        data = node.data.display(),
        bin = pg_bin(),
        dir = dir.display(),
        callback = callback.display(),
    )
}

/// Run `program` with `args`, as the `postgres` user when running as root (the files
/// under `dir` become that user's), its output in `dir/{log}`.
fn spawn_as_postgres(dir: &Path, program: &str, args: &[&Path], log: &str) -> Proc {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("HOME", dir)
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log));
    if let Some((uid, gid)) = postgres_user() {
        use std::os::unix::process::CommandExt;
        for entry in std::fs::read_dir(dir).unwrap() {
            std::os::unix::fs::chown(entry.unwrap().path(), Some(uid), Some(gid)).unwrap();
        }
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
        cmd.uid(uid).gid(gid);
    }
    Proc(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("{program} (scripts/test.sh installs it): {e}")),
    )
}

fn start_patroni(dir: &Path, scope: &str, node: &mut Node, etcd: &str, bouncer: u16) {
    let conf = dir.join(format!("{}.yml", node.name));
    let callback = role_change_script(dir, node, bouncer);
    std::fs::write(&conf, config(dir, scope, node, etcd, &callback)).unwrap();
    let log = format!("{}.log", node.name);
    node.patroni = Some(spawn_as_postgres(dir, "patroni", &[&conf], &log));
}

/// `GET path` of a node's REST API: the body, or `None` when it does not answer.
fn api_get(port: u16, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

fn api_post(port: u16, path: &str, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// The running leader and whether a standby is streaming in sync, asked of any node.
fn cluster(nodes: &[Node]) -> Option<(String, bool)> {
    nodes.iter().find_map(|n| {
        let body = api_get(n.api_port, "/cluster")?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let members = json["members"].as_array()?;
        let leader = members.iter().find(|m| {
            m["role"].as_str() == Some("leader") && m["state"].as_str() == Some("running")
        })?;
        let synced = members
            .iter()
            .any(|m| m["role"].as_str() == Some("sync_standby"));
        Some((leader["name"].as_str()?.to_string(), synced))
    })
}

fn wait_until<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(200)); // poll interval of a wait for a condition
    }
}

fn create(key: &[u8]) -> CommitRequest {
    CommitRequest {
        seq: 0,
        reads: vec![ReadCheck::Point {
            key: key.to_vec(),
            value: None,
        }],
        writes: vec![(key.to_vec(), Write::Put(b"x".to_vec()))],
    }
}

/// A writer's acknowledged keys, each with when it was acknowledged.
type Acknowledged = Vec<(Vec<u8>, Instant)>;

/// Writers creating keys until stopped; each returns its acknowledged keys and when.
struct Load {
    acked: Arc<AtomicUsize>,
    /// Creates that failed with an error that leaves the outcome unknown (EIO).
    failed: Arc<AtomicUsize>,
    /// Creates reported as failed that had been applied.
    misreported: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<Acknowledged>>,
}

/// Two writers on each of `engines`.
fn start_load(engines: &[Arc<dyn KvEngine>]) -> Load {
    let acked = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let misreported = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = (0..4)
        .map(|w| {
            let (engine, acked, failed, misreported, stop) = (
                engines[w % engines.len()].clone(),
                acked.clone(),
                failed.clone(),
                misreported.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let key = format!("w{w}-{i}").into_bytes();
                    match engine.commit(create(&key)).await {
                        Ok(()) => {
                            done.push((key, Instant::now()));
                            acked.fetch_add(1, Ordering::SeqCst);
                            i += 1;
                        }
                        // No primary reachable yet: the same create again.
                        Err(KvError::Unavailable(_)) => {
                            tokio::time::sleep(Duration::from_millis(50)).await; // retry pause while the failover runs
                        }
                        // A serialization failure (inserts near each other in the index):
                        // the same create again, unless an attempt reported as failed
                        // had in fact been applied, which must never happen.
                        Err(KvError::Conflict) => {
                            let mut snap = engine.snapshot().await.unwrap();
                            if snap.get(&key).await.unwrap().is_some() {
                                misreported.fetch_add(1, Ordering::SeqCst);
                                i += 1;
                            }
                        }
                        Err(e) => {
                            if failed.fetch_add(1, Ordering::SeqCst) < 5 {
                                eprintln!("writer {w}: create {i}: {e}");
                            }
                            i += 1;
                        }
                    }
                }
                done
            })
        })
        .collect();
    Load {
        acked,
        failed,
        misreported,
        stop,
        writers,
    }
}

impl Load {
    async fn until(&self, n: usize, what: &str) {
        let started = Instant::now();
        while self.acked.load(Ordering::SeqCst) < n {
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "{what}: {n} creates acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn more(&self, n: usize, what: &str) {
        self.until(self.acked.load(Ordering::SeqCst) + n, what)
            .await;
    }
}

/// The longest pause between acknowledgements in `from..to`.
fn longest_pause(times: &[Instant], from: Instant, to: Instant) -> Duration {
    times
        .windows(2)
        .filter(|w| w[1] > from && w[0] < to)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

fn kill_node(node: &mut Node) {
    let pid = std::fs::read_to_string(node.data.join("postmaster.pid")).unwrap();
    let pid = pid.lines().next().unwrap().trim().to_string();
    drop(node.patroni.take()); // SIGKILL to Patroni
    let _ = Command::new("kill").args(["-9", &pid]).status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_follow_a_switchover_and_a_killed_primary_losing_nothing() {
    let etcd = std::env::var("STRATA_TEST_ETCD")
        .expect("STRATA_TEST_ETCD must name the test etcd cluster (scripts/test.sh starts it)");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let scope = format!("s{}", uuid::Uuid::new_v4().simple());
    // Taken together: a port handed out twice (PgBouncer's and a node's) once put the
    // writers on a standby.
    let ports = free_ports(5);
    let bouncer = ports[4];
    let mut nodes: Vec<Node> = (1..=2)
        .map(|i| Node {
            name: format!("node{i}"),
            pg_port: ports[2 * i - 2],
            api_port: ports[2 * i - 1],
            data: dir.path().join(format!("data{i}")),
            patroni: None,
        })
        .collect();
    start_patroni(dir.path(), &scope, &mut nodes[0], &etcd, bouncer);
    wait_until("node1 leads", Duration::from_secs(90), || {
        cluster(&nodes).filter(|(l, _)| l == "node1")
    });
    start_patroni(dir.path(), &scope, &mut nodes[1], &etcd, bouncer);
    wait_until("node2 in sync", Duration::from_secs(90), || {
        cluster(&nodes).filter(|(_, synced)| *synced)
    });
    std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"su-pass\"\n").unwrap();
    let ini = dir.path().join("pgbouncer.ini");
    std::fs::write(&ini, pgbouncer_ini(dir.path(), bouncer, nodes[0].pg_port)).unwrap();
    let pgbouncer = which("pgbouncer").unwrap_or_else(|| "/usr/sbin/pgbouncer".into());
    let mut pgbouncer = spawn_as_postgres(dir.path(), &pgbouncer, &[&ini], "pgbouncer.out");
    wait_until("PgBouncer up", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", bouncer)).ok()
    });
    assert!(
        pgbouncer.0.try_wait().unwrap().is_none(),
        "PgBouncer exited (another process on its port?): see pgbouncer.log"
    );

    let url = PostgresUrl::parse(&format!(
        "postgres://postgres:su-pass@127.0.0.1:{},127.0.0.1:{}/postgres?\
         target_session_attrs=read-write&prefix=failover",
        nodes[0].pg_port, nodes[1].pg_port
    ))
    .unwrap();
    let direct: Arc<dyn KvEngine> = Arc::new(PostgresEngine::connect(&url).await.unwrap());
    let pooled_url = PostgresUrl::parse(&format!(
        "postgres://postgres:su-pass@127.0.0.1:{bouncer}/postgres?pooler=transaction&prefix=failover"
    ))
    .unwrap();
    let pooled: Arc<dyn KvEngine> = Arc::new(PostgresEngine::connect(&pooled_url).await.unwrap());
    let engine = direct.clone();
    let load = start_load(&[direct, pooled]);
    load.until(300, "before the switchover").await;

    // A planned switchover: Patroni demotes node1 and promotes its synchronous standby.
    let switched_at = Instant::now();
    let reply = api_post(nodes[0].api_port, "/switchover", r#"{"leader":"node1"}"#);
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");
    wait_until("node2 leads", Duration::from_secs(60), || {
        cluster(&nodes).filter(|(l, _)| l == "node2")
    });
    load.more(200, "after the switchover").await;
    // node1 follows node2 again before node2 is killed, so it can take over.
    wait_until("node1 back in sync", Duration::from_secs(90), || {
        cluster(&nodes).filter(|(l, synced)| l == "node2" && *synced)
    });
    load.more(100, "with node1 in sync").await;

    // A crash: node2's Patroni and PostgreSQL are killed; node1 takes over once the
    // leader key expires (ttl 10 s).
    let killed_at = Instant::now();
    kill_node(&mut nodes[1]);
    wait_until("node1 leads again", Duration::from_secs(90), || {
        cluster(&nodes[..1]).filter(|(l, _)| l == "node1")
    });
    load.more(200, "after the kill").await;
    load.stop.store(true, Ordering::SeqCst);
    let mut done = Vec::new();
    for w in load.writers {
        done.extend(w.await.unwrap());
    }

    let mut times: Vec<Instant> = done.iter().map(|(_, at)| *at).collect();
    times.sort();
    let switchover_pause = longest_pause(&times, switched_at, killed_at);
    let kill_pause = longest_pause(&times, killed_at, Instant::now());
    let keys: Vec<Vec<u8>> = done.into_iter().map(|(k, _)| k).collect();
    let mut snap = engine.snapshot().await.unwrap();
    let lost = snap
        .get_many(&keys)
        .await
        .unwrap()
        .iter()
        .filter(|v| v.is_none())
        .count();
    let failed = load.failed.load(Ordering::SeqCst);
    let misreported = load.misreported.load(Ordering::SeqCst);
    eprintln!(
        "acknowledged {}, lost {lost}, outcome unknown {failed}, misreported {misreported}; \
         longest pause: switchover {switchover_pause:?}, killed primary {kill_pause:?}",
        keys.len()
    );
    assert_eq!(lost, 0, "acknowledged creates lost across the failovers");
    assert_eq!(misreported, 0, "creates reported failed that were applied");
    assert!(failed < 40, "only creates in flight may fail: {failed}");
    assert!(kill_pause < Duration::from_secs(60), "{kill_pause:?}");
}
