"""A dead client's unlinked-but-open files: how long until another client has cleaned them.

Usage: python benches/dead_session.py META-URL N STRATA-BINARY   (PY with the strata SDK)

A client process (heartbeat 1 s) opens N new files, unlinks them all, and kills itself
with SIGKILL; a second client (heartbeat 1 s) then cleans the dead session once it
expires, 5 s after its last heartbeat. Prints the time from the kill until `strata
status` lists no session but the cleaner's: subtract the 5 s (and up to 1 s of the
cleaner's heartbeat) for the cleaning itself. The volume must exist and be empty."""
import json, os, signal, subprocess, sys, time
import strata
url, n, strata_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4 and sys.argv[4] == "hold":
    c = strata.Client(url, cache_size=0, heartbeat="1s", no_bgjob=True)
    c.makedirs("/s", exist_ok=True)
    t = time.time()
    files = [c.open(f"/s/f{i}", "xb", buffering=0) for i in range(n)]
    t1 = time.time()
    for i in range(n):
        c.remove(f"/s/f{i}")
    t2 = time.time()
    print(f"held {n}: created+opened {n/(t1-t):.0f}/s, unlinked {n/(t2-t1):.0f}/s", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
holder = subprocess.run([sys.executable, __file__, url, str(n), strata_bin, "hold"], capture_output=True, text=True)
print(holder.stdout.strip(), holder.stderr.strip()[-300:])
killed = time.time()
cleaner = strata.Client(url, cache_size=0, heartbeat="1s")
def sessions():
    out = subprocess.run([strata_bin, "status", url], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["sessions"]
while len(sessions()) > 1:
    time.sleep(0.2)
gone = time.time() - killed
print(f"dead session with {n} sustained files gone {gone:.1f} s after the kill (expiry 5 s + up to 1 s heartbeat)")
cleaner.close()
