#!/usr/bin/env bash
# The systems the comparison benchmarks start side by side (sourced by
# sysbench-compare.sh and load-data-compare.sh): a private, durable
# MariaDB and Skarv sandboxes, each stopped at exit. The sourcing script
# sets: name (for messages), work (a scratch directory), base (ports),
# skarv (the binary) and systems (to build Skarv only when one is asked).

die() {
    echo "$name: $*" >&2
    exit 1
}

pids=()
sandboxes=()
cleanup() {
    for dir in "${sandboxes[@]}"; do
        "$skarv" sandbox --dir "$dir" --stop >/dev/null 2>&1 || true
    done
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

# Built only when a Skarv system runs: MariaDB alone needs no build.
if [[ " $systems " == *" skarv"* ]] && [ ! -x "$skarv" ]; then
    (cd "$root" && cargo build --release -p skarv) >"$work/build.log" 2>&1 ||
        die "cargo build --release -p skarv failed (see $work/build.log)"
fi

# start_mariadb: a private, durable MariaDB; sets $port. (Not in a
# subshell: the pid must reach the cleanup.)
start_mariadb() {
    local data="$work/mariadb"
    port=$((base + 306))
    command -v mariadbd >/dev/null || die "mariadbd is not installed (apt-get install mariadb-server)"
    mariadb-install-db --user="$(id -un)" --datadir="$data" >"$work/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed (see $work/mariadb-install.log)"
    # Buffer pool: the data and its indexes, with room (4 × 100,000 rows
    # take about 100 MB in InnoDB).
    mariadbd --user="$(id -un)" --datadir="$data" --socket="$work/mariadb.sock" \
        --port="$port" --bind-address=127.0.0.1 --skip-grant-tables \
        --innodb-buffer-pool-size=1G --innodb-flush-log-at-trx-commit=1 \
        --log-bin="$data/binlog" --sync-binlog=1 --server-id=1 \
        --max-connections=10000 --max-prepared-stmt-count=1000000 \
        >"$work/mariadb.log" 2>&1 &
    pids+=($!)
    local tries=0
    until mysqladmin --host=127.0.0.1 --port="$port" --user=root ping >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ "$tries" -lt 300 ] || die "MariaDB did not start (see $work/mariadb.log)"
        sleep 0.1
    done
}

# start_skarv NAME DATA_NODES REPLICAS OFFSET: a sandbox; sets $port to its
# SQL node's.
start_skarv() {
    local dir="$work/$1"
    sandboxes+=("$dir")
    local sets=()
    for setting in ${SKARV_SET:-}; do
        sets+=(--set "$setting")
    done
    "$skarv" sandbox --dir "$dir" --data-nodes "$2" --replicas "$3" --sql-nodes 1 \
        --base-port $((base + $4)) "${sets[@]}" --detach >"$work/$1.start.log" 2>&1 ||
        die "the $1 sandbox did not start (see $work/$1.start.log)"
    port=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sql_ports"][0])' \
        "$dir/sandbox.json")
}

stop_all() {
    cleanup
    pids=()
    sandboxes=()
}


# start_system NAME: one of mariadb, skarv-1x1, skarv-2x2; sets $port.
start_system() {
    case "$1" in
    mariadb) start_mariadb ;;
    skarv-1x1) start_skarv skarv-1x1 1 1 100 ;;
    skarv-2x2) start_skarv skarv-2x2 2 2 200 ;;
    *) die "unknown system $1 (mariadb, skarv-1x1, skarv-2x2)" ;;
    esac
}
