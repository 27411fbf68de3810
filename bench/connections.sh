#!/usr/bin/env bash
# sysbench's oltp_point_select against a MySQL server (a Skarv SQL node, or
# MariaDB) at many connections: 32, 1,024 and 4,096 by default. Prints the
# queries per second of each and its ratio to the first (how well the
# server holds its throughput as connections grow: issue 21's thread pool).
#
#   bench/connections.sh HOST PORT [SECONDS]          (default 10 s per run)
#
# The load comes from `skarv bench sql` (CLIENT=skarv, the default): a few
# threads drive all the connections, each with one query in flight, so
# the client's cost per query stays flat as connections grow. sysbench
# (CLIENT=sysbench) runs a thread per connection; on a small machine its
# own cost per query doubles from 32 to 1,024 threads and the run measures
# the client (see crates/bench/src/sql.rs). sysbench prepares the table
# either way.
#
# Environment: CONNECTIONS (space-separated, default "32 1024 4096"),
# TABLE_SIZE (rows, default 10000), SB_DB (default sbtest), SB_USER (root),
# SB_PASSWORD (empty), CLIENT (skarv or sysbench), SKARV (the skarv binary;
# default target/release/skarv, else skarv on PATH), WARMUP (seconds, 3),
# WORK (where the outputs go; a new directory under /tmp by default). The
# server's max_connections must exceed the largest count (Skarv's default
# is 8,192).
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
host="$1"
port="$2"
seconds="${3:-10}"
connections="${CONNECTIONS:-32 1024 4096}"
table_size="${TABLE_SIZE:-10000}"
db="${SB_DB:-sbtest}"
user="${SB_USER:-root}"
password="${SB_PASSWORD:-}"
client="${CLIENT:-skarv}"
warmup="${WARMUP:-3}"
work="${WORK:-$(mktemp -d /tmp/skarv-connections.XXXXXX)}"
mkdir -p "$work"
# Bounds, in seconds: prepare loads TABLE_SIZE rows; a run is SECONDS plus
# the time its threads take to connect and end.
PREPARE_TIMEOUT_S=600
RUN_GRACE_S=120
# Descriptors sysbench needs besides one per connection.
FILES_BESIDES_CONNECTIONS=256

die() {
    echo "connections.sh: $*" >&2
    exit 1
}
command -v sysbench >/dev/null || die "sysbench is not installed (Debian: apt-get install sysbench)"
case "$client" in
sysbench) ;;
skarv)
    skarv="${SKARV:-}"
    if [ -z "$skarv" ]; then
        here="$(cd "$(dirname "$0")/.." && pwd)"
        if [ -x "$here/target/release/skarv" ]; then
            skarv="$here/target/release/skarv"
        else
            skarv="$(command -v skarv || true)"
        fi
    fi
    [ -n "$skarv" ] && [ -x "$skarv" ] ||
        die "no skarv binary (cargo build --release -p skarv, or SKARV=path)"
    ;;
*) die "CLIENT=$client: skarv or sysbench" ;;
esac
mysql_cli="$(command -v mysql || command -v mariadb || true)"
[ -n "$mysql_cli" ] || die "the mysql client is not installed (Debian: apt-get install mariadb-client)"
most=0
for n in $connections; do [ "$n" -gt "$most" ] && most=$n; done
ulimit -n $((most + FILES_BESIDES_CONNECTIONS)) 2>/dev/null ||
    die "cannot raise the open-files limit to $((most + FILES_BESIDES_CONNECTIONS)) (ulimit -n)"

"$mysql_cli" --host="$host" --port="$port" --user="$user" ${password:+--password="$password"} \
    -e "CREATE DATABASE IF NOT EXISTS $db" >"$work/setup.log" 2>&1 ||
    die "cannot create database $db on $host:$port: $(tail -1 "$work/setup.log")"

common=(--db-driver=mysql --mysql-host="$host" --mysql-port="$port" --mysql-user="$user"
    --mysql-password="$password" --mysql-db="$db" --tables=1 --table-size="$table_size"
    --mysql-ignore-errors=none)

# sb COMMAND LOG TIMEOUT_S [ARGS...]
sb() {
    local command="$1" out="$2" limit="$3" status=0
    shift 3
    timeout "$limit" sysbench oltp_point_select "${common[@]}" "$@" "$command" >"$out" 2>&1 ||
        status=$?
    [ "$status" -eq 124 ] && die "$command: timed out after $limit s (see $out)"
    [ "$status" -ne 0 ] && die "$command: sysbench exit status $status (see $out)"
    if grep -qiE '^FATAL|error [0-9]+' "$out"; then
        grep -iE '^FATAL|error [0-9]+' "$out" | head -3 | sed 's/^/    /' >&2
        die "$command: errors (see $out)"
    fi
}

sb cleanup "$work/cleanup.log" 120 --threads=1
sb prepare "$work/prepare.log" "$PREPARE_TIMEOUT_S" --threads=1
printf '%12s %12s %10s %10s %12s\n' connections qps "p95 ms" ratio "client µs/q"
first=""
for n in $connections; do
    out="$work/run.$n.log"
    if [ "$client" = skarv ]; then
        status=0
        timeout $((warmup + seconds + RUN_GRACE_S)) "$skarv" bench sql --host "$host" --port "$port" \
            --user "$user" --password "$password" --database "$db" --table sbtest1 \
            --table-size "$table_size" --connections "$n" --seconds "$seconds" \
            --warmup "$warmup" --json >"$out" 2>&1 || status=$?
        [ "$status" -eq 0 ] || die "$n connections: skarv bench sql exit status $status: $(tail -1 "$out")"
        read -r qps p95 cpu < <(python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.1f %.2f %.1f" % (r["qps"], r["p95_us"] / 1000, r["client_cpu_us_per_query"]))' "$out")
    else
        sb run "$out" $((seconds + RUN_GRACE_S)) --threads="$n" --time="$seconds" --report-interval=0
        qps=$(grep -E 'queries:' "$out" | head -1 | sed -E 's/.*\(([0-9.]+) per sec.*/\1/')
        p95=$(grep -E '95th percentile:' "$out" | sed -E 's/.*: *([0-9.]+).*/\1/')
        cpu="-"
    fi
    [ -n "$first" ] || first="$qps"
    awk -v n="$n" -v q="$qps" -v p="$p95" -v f="$first" -v c="$cpu" \
        'BEGIN { printf "%12d %12.0f %10s %10.2f %12s\n", n, q, p, q / f, c }'
done
sb cleanup "$work/cleanup.log" 120 --threads=1
echo "outputs in $work"
