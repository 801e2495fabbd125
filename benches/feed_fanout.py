"""What following the change feed costs a client: one writer creates N files while K
idle SDK clients (separate processes) follow the feed; prints each follower's CPU time
per announcement it received (every commit is delivered to every follower).

Usage: python benches/feed_fanout.py META-URL K N   (PY with the strata SDK; Redis,
PostgreSQL or etcd volume that exists)"""
import os
import subprocess
import sys
import time

import strata

url, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
py = sys.executable
idle = [subprocess.Popen([py, "-c", f"""
import strata, sys
c = strata.Client({url!r}, cache_size=0)
c.stat('/')
print('ready', flush=True)
sys.stdin.readline()
c.close()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(k)]
for p in idle: assert p.stdout.readline().strip() == "ready"
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c = strata.Client(url, cache_size=0)
c.makedirs("/w", exist_ok=True)
before = [cpu(p.pid) for p in idle]
me0 = time.process_time(); t = time.time()
for i in range(n):
    c.open(f"/w/f{i}-{t}", "xb").close()
el = time.time() - t; me = time.process_time() - me0
after = [cpu(p.pid) for p in idle]
per = (sum(after) - sum(before)) / max(k, 1)
print(f"writer {n/el:.0f} creates/s, writer CPU {me/n*1e6:.0f} us/create; each follower {per:.2f} s CPU = {per/n*1e6:.1f} us per announcement")
for p in idle: p.stdin.write("x\n"); p.stdin.flush()
for p in idle: p.wait()
c.close()
