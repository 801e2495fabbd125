#!/usr/bin/env bash
# Start the metadata engines the tests use, on loopback, under $WORK (sourced by
# scripts/test.sh, which stops them on exit through the SERVERS array):
#   Redis 127.0.0.1:16379 (append-only file, fsync every write)
#   PostgreSQL 127.0.0.1:15432 (user strata, password strata-pg, database strata_test)
#   PgBouncer 127.0.0.1:16432 in front of it, pool_mode = transaction
#   etcd, three members: clients 127.0.0.1:12379, :22379, :32379
#   MariaDB 127.0.0.1:13306 (user strata, password strata-my, database strata_test)
# and export STRATA_TEST_REDIS, STRATA_TEST_POSTGRES, STRATA_TEST_PGBOUNCER (the same
# database through PgBouncer, `?pooler=transaction`), STRATA_TEST_ETCD and
# STRATA_TEST_MYSQL for the tests. All start at once; the script returns when each
# answers. Where the caller defines
# `started PID`, each server's pid goes through it (scripts/test.sh records them in a file).

wait_for() { # description, its log, attempts (0.25 s apart), command...
  local what=$1 log=$2 tries=$3; shift 3
  for _ in $(seq 1 "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  echo "$what did not start; the end of $log:" >&2; tail -20 "$log" >&2; return 1
}

server_started() { if declare -F started >/dev/null; then started "$1"; else SERVERS+=("$1"); fi; }

PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"

echo "== starting Redis on 127.0.0.1:16379"
mkdir -p "$WORK/redis"
redis-server --port 16379 --bind 127.0.0.1 --dir "$WORK/redis" --appendonly yes \
  --appendfsync always --save "" --daemonize no >"$WORK/redis.log" 2>&1 &
server_started $!

echo "== starting a 3-member etcd cluster on 127.0.0.1:12379,22379,32379"
ETCD_CLUSTER="e1=http://127.0.0.1:12380,e2=http://127.0.0.1:22380,e3=http://127.0.0.1:32380"
for n in 1 2 3; do
  etcd --name "e$n" --data-dir "$WORK/etcd$n" \
    --listen-client-urls "http://127.0.0.1:${n}2379" --advertise-client-urls "http://127.0.0.1:${n}2379" \
    --listen-peer-urls "http://127.0.0.1:${n}2380" --initial-advertise-peer-urls "http://127.0.0.1:${n}2380" \
    --initial-cluster "$ETCD_CLUSTER" --initial-cluster-state new --initial-cluster-token strata-test \
    --max-txn-ops 10000 --max-request-bytes 10485760 --quota-backend-bytes 8589934592 \
    >"$WORK/etcd$n.log" 2>&1 &
  server_started $!
done

echo "== starting PostgreSQL on 127.0.0.1:15432"
mkdir -p "$WORK/pg"
echo strata-pg > "$WORK/pg/pw"
PG_USER=root
if [ "$(id -u)" -eq 0 ]; then
  # PostgreSQL refuses to run as root: its own user needs a way into the work directory.
  PG_USER=postgres; chmod 755 "$WORK"; chown -R postgres "$WORK/pg"
fi
as_pg() { if [ "$PG_USER" = postgres ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg "$PG_BIN/initdb" -D "$WORK/pg/data" -A md5 --pwfile="$WORK/pg/pw" -U strata >/dev/null
as_pg "$PG_BIN/postgres" -D "$WORK/pg/data" -p 15432 -k "$WORK/pg" \
  -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on >"$WORK/pg.log" 2>&1 &
server_started $!

echo "== starting MariaDB on 127.0.0.1:13306"
mkdir -p "$WORK/mariadb"
MY_USER=()
if [ "$(id -u)" -eq 0 ]; then
  # mariadbd refuses to run as root unless told; it switches to its own user instead.
  MY_USER=(--user=mysql); chmod 755 "$WORK"; chown -R mysql "$WORK/mariadb"
fi
mariadb-install-db --no-defaults --datadir="$WORK/mariadb/data" "${MY_USER[@]}" \
  --auth-root-authentication-method=normal --skip-test-db >"$WORK/mariadb-install.log" 2>&1
"$(command -v mariadbd || echo /usr/sbin/mariadbd)" --no-defaults --datadir="$WORK/mariadb/data" \
  --port=13306 --bind-address=127.0.0.1 --socket="$WORK/mariadb/sock" "${MY_USER[@]}" \
  --max-connections=1000 --max-allowed-packet=64M --skip-log-bin \
  --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=1 >"$WORK/mariadb.log" 2>&1 &
server_started $!
my_root() { mariadb --no-defaults -h 127.0.0.1 -P 13306 -u root "$@"; }

wait_for Redis "$WORK/redis.log" 80 redis-cli -p 16379 ping
export STRATA_TEST_REDIS=redis://127.0.0.1:16379/0
wait_for PostgreSQL "$WORK/pg.log" 120 env PGPASSWORD=strata-pg psql -h 127.0.0.1 -p 15432 -U strata -d postgres -c 'select 1'
PGPASSWORD=strata-pg psql -q -h 127.0.0.1 -p 15432 -U strata -d postgres -c 'create database strata_test'
# The postmaster itself (the pid above is runuser's): stopping it is what stops PostgreSQL.
server_started "$(head -1 "$WORK/pg/data/postmaster.pid")"
export STRATA_TEST_POSTGRES="postgres://strata:strata-pg@127.0.0.1:15432/strata_test"

echo "== starting PgBouncer on 127.0.0.1:16432 (transaction pooling)"
mkdir -p "$WORK/pgbouncer"
echo '"strata" "strata-pg"' > "$WORK/pgbouncer/users.txt"
chmod 600 "$WORK/pgbouncer/users.txt"
cat > "$WORK/pgbouncer/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=15432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 16432
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $WORK/pgbouncer/users.txt
pool_mode = transaction
max_client_conn = 4000
default_pool_size = 40
logfile = $WORK/pgbouncer/pgbouncer.log
pidfile = $WORK/pgbouncer/pgbouncer.pid
INI
if [ "$PG_USER" = postgres ]; then chown -R postgres "$WORK/pgbouncer"; fi
PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
as_pg "$PGBOUNCER" -d "$WORK/pgbouncer/pgbouncer.ini" >"$WORK/pgbouncer.out" 2>&1
wait_for PgBouncer "$WORK/pgbouncer/pgbouncer.log" 80 env PGPASSWORD=strata-pg psql -h 127.0.0.1 -p 16432 -U strata -d strata_test -c 'select 1'
server_started "$(cat "$WORK/pgbouncer/pgbouncer.pid")"
export STRATA_TEST_PGBOUNCER="postgres://strata:strata-pg@127.0.0.1:16432/strata_test?pooler=transaction"
export STRATA_TEST_ETCD="127.0.0.1:12379,127.0.0.1:22379,127.0.0.1:32379"
wait_for etcd "$WORK/etcd1.log" 120 env ETCDCTL_API=3 etcdctl --endpoints="$STRATA_TEST_ETCD" endpoint health
wait_for MariaDB "$WORK/mariadb.log" 120 my_root -e 'select 1'
my_root -e "CREATE DATABASE strata_test; CREATE USER strata@'%' IDENTIFIED BY 'strata-my'; \
  GRANT ALL ON strata_test.* TO strata@'%'"
export STRATA_TEST_MYSQL="mysql://strata:strata-my@(127.0.0.1:13306)/strata_test"
