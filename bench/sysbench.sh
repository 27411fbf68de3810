#!/usr/bin/env bash
# sysbench against a MySQL server (a Skarv SQL node, or MariaDB to check this
# script): each of the tests below runs `prepare`, `run` and `cleanup`, and
# the script fails on the first error of any kind (sysbench's exit status, an
# error it would otherwise ignore and retry, a step past its time limit).
#
#   bench/sysbench.sh HOST PORT [THREADS [SECONDS]]      (default 8 threads, 10 s)
#
# Environment: TABLE_SIZE (rows per table, default 10000), TABLES (default
# 1), SB_IGNORE_ERRORS (MySQL error codes sysbench retries, counted in the
# "retried" column, e.g. 1213,1205 as sysbench does by default; default
# none: every error fails, as issue 20 asks), SB_DB (the database, created
# if missing; default sbtest), SB_USER
# (root), SB_PASSWORD (empty), SB_ENGINE (the CREATE TABLE engine, default
# innodb; every engine name is stored in the cluster by Skarv), TESTS (a
# space-separated subset), WORK (where the outputs go; a new directory
# under /tmp by default). Prints a line per test with its throughput, p95
# latency and wall time of each step, then where the outputs are.
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,18p' "$0" >&2
    exit 2
fi
host="$1"
port="$2"
threads="${3:-8}"
seconds="${4:-10}"
table_size="${TABLE_SIZE:-10000}"
tables="${TABLES:-1}"
db="${SB_DB:-sbtest}"
user="${SB_USER:-root}"
password="${SB_PASSWORD:-}"
engine="${SB_ENGINE:-innodb}"
ignore_errors="${SB_IGNORE_ERRORS:-none}"
tests="${TESTS:-oltp_point_select oltp_read_only oltp_read_write oltp_update_index \
oltp_update_non_index oltp_insert oltp_delete select_random_points select_random_ranges bulk_insert}"
work="${WORK:-$(mktemp -d /tmp/skarv-sysbench.XXXXXX)}"
mkdir -p "$work"
# Bounds, in seconds: prepare loads TABLE_SIZE rows per table; run is
# SECONDS plus the time its threads take to connect and end.
PREPARE_TIMEOUT_S=600
RUN_GRACE_S=60
CLEANUP_TIMEOUT_S=120

die() {
    echo "sysbench.sh: $*" >&2
    exit 1
}
command -v sysbench >/dev/null || die "sysbench is not installed (Debian: apt-get install sysbench)"
mysql_cli="$(command -v mysql || command -v mariadb || true)"
[ -n "$mysql_cli" ] || die "the mysql client is not installed (Debian: apt-get install mariadb-client)"

"$mysql_cli" --host="$host" --port="$port" --user="$user" ${password:+--password="$password"} \
    -e "CREATE DATABASE IF NOT EXISTS $db" >"$work/setup.log" 2>&1 ||
    die "cannot create database $db on $host:$port: $(tail -1 "$work/setup.log")"

common=(--db-driver=mysql --mysql-host="$host" --mysql-port="$port" --mysql-user="$user"
    --mysql-password="$password" --mysql-db="$db" --mysql-storage-engine="$engine"
    --tables="$tables" --table-size="$table_size" --threads="$threads"
    # By default every error fails the run: sysbench otherwise retries
    # deadlocks and lock wait timeouts (1213, 1205), as "ignored errors".
    --mysql-ignore-errors="$ignore_errors")

# step TEST COMMAND TIMEOUT_S [ARGS...]: runs one sysbench step; its wall time
# in milliseconds goes to $step_ms.
step() {
    local test="$1" command="$2" limit="$3"
    shift 3
    local out="$work/$test.$command.log" started status=0
    started=$(date +%s%N)
    # sysbench's select_random_* tests read one table only.
    local only_one=()
    case "$test" in select_random_*) only_one=(--tables=1) ;; esac
    timeout "$limit" sysbench "$test" "${common[@]}" "${only_one[@]}" "$@" "$command" >"$out" 2>&1 ||
        status=$?
    step_ms=$((($(date +%s%N) - started) / 1000000))
    if [ "$status" -eq 124 ]; then
        die "$test $command: timed out after $limit s (see $out)"
    elif [ "$status" -ne 0 ]; then
        tail -5 "$out" | sed 's/^/    /' >&2
        die "$test $command: sysbench exit status $status (see $out)"
    fi
    if grep -qiE '^FATAL|error [0-9]+' "$out"; then
        grep -iE '^FATAL|error [0-9]+' "$out" | head -3 | sed 's/^/    /' >&2
        die "$test $command: errors (see $out)"
    fi
}

# number PATTERN FILE: the first number after PATTERN on its line.
number() {
    grep -E "$1" "$2" | head -1 | sed -E "s/.*$1[^0-9]*([0-9.]+).*/\\1/"
}

printf '%-22s %10s %10s %9s %7s %7s %7s %7s\n' test tps qps "p95 ms" retried prep_s run_s clean_s
for test in $tests; do
    # A leftover of an interrupted earlier run would fail prepare.
    step "$test" cleanup "$CLEANUP_TIMEOUT_S"
    step "$test" prepare "$PREPARE_TIMEOUT_S"
    prepare_ms=$step_ms
    step "$test" run $((seconds + RUN_GRACE_S)) --time="$seconds" --report-interval=0
    run_ms=$step_ms
    out="$work/$test.run.log"
    retried=$(number 'ignored errors:' "$out")
    if [ "$ignore_errors" = none ] && [ "${retried:-0}" != 0 ]; then
        die "$test run: $retried errors (see $out)"
    fi
    tps=$(grep -E 'transactions:' "$out" | sed -E 's/.*\(([0-9.]+) per sec.*/\1/')
    qps=$(grep -E 'queries:' "$out" | head -1 | sed -E 's/.*\(([0-9.]+) per sec.*/\1/')
    p95=$(grep -E '95th percentile:' "$out" | sed -E 's/.*: *([0-9.]+).*/\1/')
    step "$test" cleanup "$CLEANUP_TIMEOUT_S"
    cleanup_ms=$step_ms
    awk -v t="$test" -v tps="${tps:-?}" -v qps="${qps:-?}" -v p95="${p95:-?}" \
        -v e="${retried:-?}" -v p="$prepare_ms" -v r="$run_ms" -v c="$cleanup_ms" \
        'BEGIN { printf "%-22s %10s %10s %9s %7s %7.1f %7.1f %7.1f\n", t, tps, qps, p95, e,
                 p / 1000, r / 1000, c / 1000 }'
done
if [ "$ignore_errors" = none ]; then
    echo "all $(echo "$tests" | wc -w) tests passed with 0 errors; outputs in $work"
else
    echo "all $(echo "$tests" | wc -w) tests passed (errors $ignore_errors retried); outputs in $work"
fi
