"""Many clients on one volume (used by benches/many-clients.sh).

driver: for each client count N, start N worker processes (each one `strata.Client` of
the volume, or a plain Python process working in a FUSE mount's directory), wait until
all are open, start them at once, and report the aggregate create and stat rates (total
operations over the time from the start signal to the last worker's end), each worker's
RSS, the engine's connections per client, and the engine's load while the clients sit
idle (commands or transactions per client per second: heartbeats, feed beats, background
scans). CPU us/create is the whole machine's busy CPU time (clients, engine server,
kernel) during the create phase per create, and busy % its share of all cores: where
busy % nears 100, the rate is the machine's limit for that CPU cost per create.

worker: opens the client, says "ready", waits for "go", creates FILES empty files in its
own directory then stats each, prints its times as JSON, waits for "close".
"""

import json
import os
import subprocess
import sys
import threading
import time

ENGINE_TOOL_TIMEOUT = 30


def worker(url, root, index, files, options):
    """One client: create then stat `files` files under /c<index>."""
    url = url.replace("{i}", str(index))
    if url.startswith("mount:"):
        base = url[len("mount:") :] + f"{root}/c{index}"
        os.makedirs(base, exist_ok=True)

        def create(path):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))

        stat = os.stat
        close = lambda: None  # noqa: E731
    else:
        import strata

        client = strata.Client(url, **options)
        base = f"{root}/c{index}"
        client.makedirs(base, exist_ok=True)

        def create(path):
            client.open(path, "xb").close()

        stat = client.stat
        close = client.close
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    started = time.time()
    for i in range(files):
        create(f"{base}/f{i}")
    created = time.time()
    for i in range(files):
        stat(f"{base}/f{i}")
    statted = time.time()
    print(json.dumps({"start": started, "created": created, "statted": statted}), flush=True)
    sys.stdin.readline()
    close()


class CpuSampler:
    """The machine's busy CPU time (all processes: clients, engine, kernel), sampled from
    /proc/stat every 50 ms, so the busy time of any interval can be read afterwards."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def _run(self):
        while not self.stop.wait(0.05):
            self.samples.append((time.time(), self._busy()))

    def busy_between(self, t0, t1):
        """CPU-seconds the machine was busy from t0 to t1 (nearest samples)."""
        self.samples.append((time.time(), self._busy()))
        at = lambda t: min(self.samples, key=lambda s: abs(s[0] - t))[1]  # noqa: E731
        return at(t1) - at(t0)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Engine:
    """What the engine says about connections and load (redis-cli / psql)."""

    def __init__(self, kind, url):
        self.kind, self.url = kind, url

    def _run(self, args):
        return subprocess.run(
            args, check=True, capture_output=True, text=True, timeout=ENGINE_TOOL_TIMEOUT
        ).stdout

    def connections(self):
        if self.kind == "redis":
            return self._run(["redis-cli", "-u", self.url, "client", "list"]).count("\n")
        if self.kind == "postgres":
            out = self._run(["psql", self.url, "-Atc", "select count(*) from pg_stat_activity"])
            return int(out.strip())
        return 0

    def settle(self):
        """Seconds until the engine's counters include what was just done."""
        return 11 if self.kind == "postgres" else 0

    def counter(self):
        """A count of work the engine did: Redis commands, PostgreSQL transactions."""
        if self.kind == "redis":
            total = 0
            for line in self._run(["redis-cli", "-u", self.url, "info", "commandstats"]).splitlines():
                if line.startswith("cmdstat_"):
                    total += int(line.split("calls=")[1].split(",")[0])
            return total
        if self.kind == "postgres":
            out = self._run(
                ["psql", self.url, "-Atc", "select sum(xact_commit + xact_rollback) from pg_stat_database"]
            )
            return int(out.strip())
        return 0


def run_count(n, args, engine, options):
    """Start n workers, run them, measure; returns a result row."""
    env = dict(os.environ)
    workers = []
    for i in range(n):
        workers.append(
            subprocess.Popen(
                [sys.executable, __file__, "worker", args["url"], args["root"], str(i), str(args["files"]),
                 json.dumps(options)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            )
        )
    base_conn = args["base_connections"]
    for w in workers:
        line = w.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"a worker failed to open the volume (said {line!r})")
    connections = engine.connections() - base_conn
    cpu = CpuSampler()
    go = time.time()
    for w in workers:
        w.stdin.write("go\n")
        w.stdin.flush()
    results = [json.loads(w.stdout.readline()) for w in workers]
    cpu.stop.set()
    rss = sorted(rss_kib(w.pid) for w in workers)
    idle = args["idle"]
    # PostgreSQL's backends report their transaction counts when idle, up to 10 s late:
    # the workload's must be in before the idle interval starts.
    time.sleep(engine.settle())
    before = engine.counter()
    time.sleep(idle)  # the measured interval itself, not a synchronization
    after = engine.counter()
    for w in workers:
        w.stdin.write("close\n")
        w.stdin.flush()
    for w in workers:
        if w.wait() != 0:
            raise SystemExit("a worker failed")
    files = args["files"] * n
    end_create = max(r["created"] for r in results)
    create_start = min(go, min(r["start"] for r in results))
    stat_start = min(r["created"] for r in results)
    end_stat = max(r["statted"] for r in results)
    create_cpu = cpu.busy_between(create_start, end_create)
    ncpu = os.cpu_count()
    return {
        "clients": n,
        "cpu_us_per_create": create_cpu / files * 1e6,
        "busy_pct_create": 100 * create_cpu / (ncpu * (end_create - create_start)),
        "create_per_s": files / (end_create - create_start),
        "stat_per_s": files / (end_stat - stat_start),
        "rss_median_mib": rss[len(rss) // 2] / 1024,
        "rss_max_mib": rss[-1] / 1024,
        "connections_per_client": connections / n,
        "idle_ops_per_client_s": (after - before) / idle / (args.get("clients_up") or n),
    }


def driver():
    args = json.loads(os.environ["MANY_CLIENTS"])
    options = args.get("options", {})
    engine = Engine(args["engine_kind"], args["engine_url"])
    args["base_connections"] = engine.connections()
    print(
        f"{'clients':>7} {'create/s':>9} {'x one':>6} {'CPU us/create':>13} {'busy %':>6} "
        f"{'stat/s':>9} {'x one':>6} "
        f"{'RSS MiB (med/max)':>17} {'conns/client':>12} {'idle ops/client/s':>17}"
    )
    one = None
    for n in args["counts"]:
        args["root"] = f"/n{n}"
        row = run_count(n, args, engine, options)
        one = one or row
        print(
            f"{n:>7} {row['create_per_s']:>9.0f} {row['create_per_s'] / one['create_per_s']:>6.2f} "
            f"{row['cpu_us_per_create']:>13.0f} {row['busy_pct_create']:>6.0f} "
            f"{row['stat_per_s']:>9.0f} {row['stat_per_s'] / one['stat_per_s']:>6.2f} "
            f"{row['rss_median_mib']:>8.1f}/{row['rss_max_mib']:<8.1f} "
            f"{row['connections_per_client']:>12.2f} {row['idle_ops_per_client_s']:>17.2f}",
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), json.loads(sys.argv[6]))
    else:
        driver()
