#!/usr/bin/env bash
# bench/sql-instructions.sh: instructions per SQL statement of the Skarv SQL node and of its
# data node, and of MariaDB's server for the same sysbench test, counted by valgrind's
# callgrind (issue 21: "profile the SQL node, instructions per statement"). Rates on a shared
# 2-core machine move by tens of percent from run to run; instruction counts by a few, so
# this ranks two builds, and shows how far each server's work per statement is from the
# other's, when bench/sysbench-compare.sh cannot.
#
#   bench/sql-instructions.sh [TEST ...]        # default "oltp_point_select oltp_read_only"
#   SYSTEMS=skarv bench/sql-instructions.sh    # Skarv only (default "skarv mariadb")
#
# Each system runs under callgrind with instrumentation off: a 1 × 1 Skarv sandbox with one
# SQL node (both processes traced), and mariadbd (InnoDB, a fresh data directory; needs
# mariadb-server). sysbench prepares TABLES tables (default 1) of TABLE_SIZE rows (default
# 10000); per test, a warm-up of WARMUP events (default 200), then EVENTS events (default
# 1000) on THREADS threads (default 4) with the servers' instrumentation on. A figure is a
# process's instructions of that run divided by the statements sysbench counted (its
# "queries"), and per event (transaction) for the multi-statement tests. Only user-space
# instructions count: the kernel's work (Skarv's extra hop between its SQL and data node, an
# fsync) is not in the figures. A process's detail stays in its dump,
# `callgrind_annotate --inclusive=yes WORK/callgrind.PID.N`. Loopback only; every step under
# `timeout`; the servers are stopped and removed on exit. SKARV: the binary (default
# target/release/skarv, built when missing). PORT_BASE (default 26500): the sandbox's base
# port; MariaDB listens on PORT_BASE + 90.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTS=${*:-oltp_point_select oltp_read_only}
SYSTEMS=${SYSTEMS:-skarv mariadb}
TABLES=${TABLES:-1}
TABLE_SIZE=${TABLE_SIZE:-10000}
WARMUP=${WARMUP:-200}
EVENTS=${EVENTS:-1000}
THREADS=${THREADS:-4}
PORT_BASE=${PORT_BASE:-26500}
WORK=${WORK:-$(mktemp -d /tmp/skarv-sql-instructions.XXXXXX)}
STEP_TIMEOUT_S=900
mkdir -p "$WORK"

say() { printf '%s\n' "$*" >&2; }
die() { say "sql-instructions.sh: $*"; exit 1; }

command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
    die "valgrind is not installed (Debian: apt-get install valgrind)"
command -v sysbench >/dev/null || die "sysbench is not installed (Debian: apt-get install sysbench)"
MYSQL=$(command -v mysql || command -v mariadb || true)
[[ -n $MYSQL ]] || die "the mysql client is not installed (Debian: apt-get install mariadb-client)"
if [[ -z ${SKARV:-} ]]; then
    SKARV=$ROOT/target/release/skarv
    [[ -x $SKARV ]] || (cd "$ROOT" && timeout 3600 cargo build --release -q -p skarv)
fi
[[ -x $SKARV ]] || die "$SKARV is not an executable"

SANDBOX=$WORK/sandbox
MARIADB_DIR=$WORK/mariadb
MARIADB_PORT=$((PORT_BASE + 90))
cleanup() {
    local status=$?
    timeout 120 "$SKARV" sandbox --stop --dir "$SANDBOX" >/dev/null 2>&1 || true
    if [[ -f $MARIADB_DIR/pid ]]; then
        kill "$(cat "$MARIADB_DIR/pid")" 2>/dev/null || true
    fi
    pkill -f "callgrind-out-file=$WORK/" 2>/dev/null || true
    rm -rf "$SANDBOX" "$MARIADB_DIR"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

# sysbench TEST PORT EVENTS: one run of EVENTS events; prints its "queries" count.
sb() {
    local out
    out=$(timeout "$STEP_TIMEOUT_S" sysbench "$1" --db-driver=mysql --mysql-host=127.0.0.1 \
        --mysql-port="$2" --mysql-user=root --mysql-db=sbtest --tables="$TABLES" \
        --table-size="$TABLE_SIZE" --threads="$THREADS" --events="$3" --time=0 run 2>&1) ||
        die "sysbench $1 on port $2 failed: $(tail -3 <<<"$out")"
    awk '/queries:/ && !/performed/ {print $2; exit}' <<<"$out"
}

prepare() {
    timeout "$STEP_TIMEOUT_S" "$MYSQL" --host=127.0.0.1 --port="$1" --user=root \
        -e "CREATE DATABASE IF NOT EXISTS sbtest" || die "cannot create sbtest on port $1"
    timeout "$STEP_TIMEOUT_S" sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 \
        --mysql-port="$1" --mysql-user=root --mysql-db=sbtest --tables="$TABLES" \
        --table-size="$TABLE_SIZE" prepare >"$WORK/prepare.$1.log" 2>&1 ||
        die "sysbench prepare on port $1 failed (see $WORK/prepare.$1.log)"
}

# measure NAME PORT PIDS...: per test, prints NAME's instructions per statement and event.
measure() {
    local name=$1 port=$2 test queries pid dump n
    shift 2
    for test in $TESTS; do
        sb "$test" "$port" "$WARMUP" >/dev/null
        for pid in "$@"; do
            callgrind_control -z "$pid" >/dev/null 2>&1
            callgrind_control -i on "$pid" >/dev/null 2>&1
        done
        queries=$(sb "$test" "$port" "$EVENTS")
        local figures=() sum=0
        for pid in "$@"; do
            callgrind_control -i off "$pid" >/dev/null 2>&1
            callgrind_control -d "$test" "$pid" >/dev/null 2>&1
        done
        for pid in "$@"; do
            # The dump is written by the process itself: wait for it.
            for _ in $(seq 1 100); do
                dump=$(ls -t "$WORK"/callgrind."$pid".* 2>/dev/null | head -1 || true)
                [[ -n $dump ]] && grep -q "^desc: Trigger: .*$test" "$dump" 2>/dev/null && break
                sleep 0.2
            done
            n=$(total "$dump")
            figures+=("$((n / queries))")
            sum=$((sum + n))
        done
        printf '%-10s %-22s %10d %14d %14s %14d\n' "$name" "$test" "$queries" "$((sum / queries))" \
            "$(IFS=+; echo "${figures[*]}")" "$((sum / EVENTS))"
    done
}

printf '%-10s %-22s %10s %14s %14s %14s\n' system test statements "instr/stmt" "per process" \
    "instr/event"
for system in $SYSTEMS; do
    case $system in
    skarv)
        say "Skarv 1 × 1 sandbox and a SQL node under callgrind (results in $WORK)"
        timeout "$STEP_TIMEOUT_S" valgrind --tool=callgrind --trace-children=yes \
            --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" \
            "$SKARV" sandbox --dir "$SANDBOX" --data-nodes 1 --replicas 1 \
            --base-port "$PORT_BASE" --detach >"$WORK/sandbox.log" 2>&1 ||
            die "the sandbox did not start (see $WORK/sandbox.log)"
        # The SQL node listens on base port + its node id (3).
        sql_port=$((PORT_BASE + 3))
        prepare "$sql_port"
        sql_pid=$(pgrep -f "callgrind-out-file=$WORK/.* sql --connect" | head -1)
        data_pid=$(pgrep -f "callgrind-out-file=$WORK/.* data --no-angel" | head -1)
        [[ -n $sql_pid && -n $data_pid ]] || die "no SQL node or data node under callgrind"
        # Per process: SQL node + data node.
        measure skarv "$sql_port" "$sql_pid" "$data_pid"
        timeout 120 "$SKARV" sandbox --stop --dir "$SANDBOX" >/dev/null 2>&1 || true
        ;;
    mariadb)
        command -v mariadbd >/dev/null || command -v mysqld >/dev/null ||
            die "mariadbd is not installed (Debian: apt-get install mariadb-server)"
        mkdir -p "$MARIADB_DIR/data"
        timeout "$STEP_TIMEOUT_S" mariadb-install-db --no-defaults --user="$(id -un)" \
            --datadir="$MARIADB_DIR/data" --auth-root-authentication-method=normal \
            >"$WORK/mariadb-install.log" 2>&1 || die "mariadb-install-db failed (see $WORK/mariadb-install.log)"
        say "MariaDB under callgrind on port $MARIADB_PORT"
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" \
            "$(command -v mariadbd || command -v mysqld)" --no-defaults --user="$(id -un)" \
            --datadir="$MARIADB_DIR/data" --port="$MARIADB_PORT" --bind-address=127.0.0.1 \
            --socket="$MARIADB_DIR/sock" --pid-file="$MARIADB_DIR/mariadbd.pid" \
            --innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=1 \
            --innodb-buffer-pool-size-max=512M --innodb-use-native-aio=0 \
            --log-bin="$MARIADB_DIR/binlog" --sync-binlog=1 --server-id=1 --skip-name-resolve \
            --max-connections=1000 >"$WORK/mariadb.log" 2>&1 &
        echo $! >"$MARIADB_DIR/pid"
        for attempt in $(seq 1 300); do
            "$MYSQL" --host=127.0.0.1 --port="$MARIADB_PORT" --user=root -e "SELECT 1" >/dev/null 2>&1 &&
                break
            ((attempt < 300)) || die "MariaDB did not start (see $WORK/mariadb.log)"
            sleep 1
        done
        "$MYSQL" --host=127.0.0.1 --port="$MARIADB_PORT" --user=root \
            -e "SET GLOBAL sql_mode='STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO'"
        prepare "$MARIADB_PORT"
        measure mariadb "$MARIADB_PORT" "$(cat "$MARIADB_DIR/pid")"
        kill "$(cat "$MARIADB_DIR/pid")" 2>/dev/null || true
        ;;
    *) die "unknown system $system (skarv or mariadb)" ;;
    esac
done
