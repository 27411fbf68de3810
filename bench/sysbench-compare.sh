#!/usr/bin/env bash
# Skarv's SQL node against MariaDB under sysbench, side by side in one run on
# this machine (issue 21's benchmark): MariaDB (InnoDB, durable: binlog on,
# sync_binlog=1, innodb_flush_log_at_trx_commit=1, a buffer pool that holds
# the data) and Skarv sandboxes (1 data node × 1 replica; 2 data nodes × 2
# replicas), one SQL node each. Every system runs the same tests at the same
# thread counts through bench/sysbench.sh; the table at the end gives tps, qps
# and p95 latency per system and Skarv's ratios to MariaDB.
#
#   bench/sysbench-compare.sh
#
# Environment: SYSTEMS (default "mariadb skarv-1x1 skarv-2x2"), THREADS
# (default "8 32"), RUN_SECONDS (per run, default 30), TABLES (default 4),
# TABLE_SIZE (default 100000), TESTS (default the six of issue 21),
# SKARV (the binary; default target/release/skarv, built if missing),
# BASE_PORT (default 47000: MariaDB on BASE_PORT+306, sandboxes from
# BASE_PORT+100), WORK (outputs; a new directory under /tmp by default),
# SKARV_SET (data node parameters for every sandbox, space-separated
# NAME=VALUE, each passed as `skarv sandbox --set`: e.g.
# "BatchScheduling=1", which also turns on the SQL node's).
# Errors 1205 and 1213 are retried as sysbench does by default, and counted.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
systems="${SYSTEMS:-mariadb skarv-1x1 skarv-2x2}"
threads_list="${THREADS:-8 32}"
seconds="${RUN_SECONDS:-30}"
export TABLES="${TABLES:-4}"
export TABLE_SIZE="${TABLE_SIZE:-100000}"
export TESTS="${TESTS:-oltp_point_select oltp_read_only oltp_read_write oltp_update_index \
oltp_insert select_random_points}"
export SB_IGNORE_ERRORS="${SB_IGNORE_ERRORS:-1205,1213}"
skarv="${SKARV:-$root/target/release/skarv}"
base="${BASE_PORT:-47000}"
work="${WORK:-$(mktemp -d /tmp/skarv-sysbench-compare.XXXXXX)}"
mkdir -p "$work"

name=sysbench-compare.sh
# shellcheck source=bench/systems.sh
. "$here/systems.sh"

results="$work/results.tsv"
: >"$results"
for system in $systems; do
    start_system "$system"
    for threads in $threads_list; do
        echo "== $system, $threads threads"
        WORK="$work/$system-$threads" "$here/sysbench.sh" 127.0.0.1 "$port" "$threads" \
            "$seconds" | tee "$work/$system-$threads.txt"
        # Lines of sysbench.sh's table: test tps qps p95 retried …
        awk -v s="$system" -v t="$threads" \
            'NR > 1 && $1 ~ /^(oltp|select|bulk)/ { print s "\t" t "\t" $1 "\t" $2 "\t" $3 "\t" $4 }' \
            "$work/$system-$threads.txt" >>"$results"
    done
    stop_all
done

echo
echo "sysbench: $TABLES tables × $TABLE_SIZE rows, $seconds s per run; ratios are Skarv / MariaDB"
python3 - "$results" "$systems" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
systems = sys.argv[2].split()
data = {(s, int(t), test): (float(tps), float(qps), float(p95)) for s, t, test, tps, qps, p95 in rows}
tests = []
for _, _, test, *_ in rows:
    if test not in tests:
        tests.append(test)
threads = sorted({int(t) for _, t, *_ in rows})
head = f"{'test':22} {'thr':>4}"
for s in systems:
    head += f" | {s + ' tps':>16} {'qps':>9} {'p95 ms':>7}"
for s in systems:
    if s != "mariadb" and "mariadb" in systems:
        head += f" | {s + ' qps ×':>15} {'p95 ×':>6}"
print(head)
for test in tests:
    for t in threads:
        line = f"{test:22} {t:>4}"
        for s in systems:
            v = data.get((s, t, test))
            line += " | " + (f"{v[0]:>16.1f} {v[1]:>9.1f} {v[2]:>7.2f}" if v else f"{'-':>34}")
        base = data.get(("mariadb", t, test))
        for s in systems:
            if s == "mariadb" or "mariadb" not in systems:
                continue
            v = data.get((s, t, test))
            if v and base and base[1] > 0 and base[2] > 0:
                line += f" | {v[1] / base[1]:>15.2f} {v[2] / base[2]:>6.2f}"
            else:
                line += f" | {'-':>22}"
        print(line)
EOF
echo "outputs in $work"
