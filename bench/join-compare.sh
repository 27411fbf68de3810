#!/usr/bin/env bash
# A large join's result through the SQL node, Skarv against MariaDB in one
# run on this machine: ROWS rows of `t (id, pad CHAR(200))` and of
# `m (id, tid)` (each m row names one t row), then
# `SELECT STRAIGHT_JOIN m.id, t.pad FROM m JOIN t ON t.id = m.tid` read
# whole by the `mysql` client (to /dev/null), RUNS times; on Skarv with
# the join pushed to the data nodes (`ndb_join_pushdown=ON`, the
# default) and not. Per system: the best time, rows/s, and how much the
# server process's peak resident memory (VmHWM) grew over the first run
# of each (a join kept whole in the SQL node grows it by the result's
# size; one sent as it is joined does not). A peak only grows: the
# second mode shows what it needed beyond the first's. Skarv's ratios
# are to MariaDB's rows/s.
#
#   bench/join-compare.sh
#
# Environment: SYSTEMS (default "mariadb skarv-2x2"; also skarv-1x1),
# ROWS (default 200000), RUNS (default 3), SKARV (the binary; default
# target/release/skarv, built if missing), BASE_PORT (default 47700),
# WORK (outputs; a new directory under /tmp by default).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
systems="${SYSTEMS:-mariadb skarv-2x2}"
rows="${ROWS:-200000}"
runs="${RUNS:-3}"
skarv="${SKARV:-$root/target/release/skarv}"
base="${BASE_PORT:-47700}"
work="${WORK:-$(mktemp -d /tmp/skarv-join-compare.XXXXXX)}"
mkdir -p "$work"
name=join-compare.sh
# shellcheck source=bench/systems.sh
. "$here/systems.sh"

# Rows inserted per statement.
INSERT_ROWS=1000

sql() {
    mysql --host=127.0.0.1 --port="$port" --user=root "$@"
}

# server_pid SYSTEM: the process that answers SQL.
server_pid() {
    case "$1" in
    mariadb) echo "${pids[0]}" ;;
    skarv-*)
        python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sql_node_pids"][0])' \
            "$work/$1/sandbox.json"
        ;;
    esac
}

peak_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

best() { printf '%s\n' "$@" | sort -g | head -1; }

query="SELECT STRAIGHT_JOIN m.id, t.pad FROM m JOIN t ON t.id = m.tid"
results="$work/results.tsv"
: >"$results"
for system in $systems; do
    start_system "$system"
    sql -e "DROP DATABASE IF EXISTS jbench; CREATE DATABASE jbench; \
        CREATE TABLE jbench.t (id INT NOT NULL PRIMARY KEY, pad CHAR(200) NOT NULL); \
        CREATE TABLE jbench.m (id INT NOT NULL PRIMARY KEY, tid INT NOT NULL)"
    python3 - "$rows" "$INSERT_ROWS" <<'EOF' | sql jbench
import sys
rows, step = int(sys.argv[1]), int(sys.argv[2])
for first in range(0, rows, step):
    ids = range(first, min(first + step, rows))
    print("INSERT INTO t VALUES " + ",".join(f"({i},REPEAT('x',200))" for i in ids) + ";")
    print("INSERT INTO m VALUES " + ",".join(f"({i},{rows - 1 - i})" for i in ids) + ";")
EOF
    pid=$(server_pid "$system")
    case "$system" in
    mariadb) modes="-" ;;
    *) modes="ON OFF" ;;
    esac
    for mode in $modes; do
        set_mode=""
        [ "$mode" = - ] || set_mode="SET ndb_join_pushdown = $mode;"
        times=()
        before=$(peak_kib "$pid")
        grown=""
        for run in $(seq "$runs"); do
            start=$(date +%s.%N)
            got=$(sql -N jbench -e "$set_mode $query" | wc -l)
            end=$(date +%s.%N)
            [ "$got" = "$rows" ] || die "$system ($mode) joined $got rows of $rows"
            times+=("$(echo "$end - $start" | bc)")
            [ -n "$grown" ] || grown=$(($(peak_kib "$pid") - before))
        done
        label=$system
        [ "$mode" = - ] || label="$system/pushdown-$mode"
        echo "$label: ${times[*]} s, peak +$grown KiB"
        printf '%s\t%s\t%s\n' "$label" "$(best "${times[@]}")" "$grown" >>"$results"
    done
    stop_all
done

echo
echo "$rows joined rows of about 210 bytes, best of $runs; ratios are rows/s against MariaDB's"
python3 - "$results" "$rows" <<'EOF'
import sys
rows = int(sys.argv[2])
data = [(s, float(t), int(g)) for s, t, g in (x.split() for x in open(sys.argv[1]) if x.strip())]
base = next((t for s, t, _ in data if s == "mariadb"), None)
print(f"{'system':24} {'seconds':>8} {'rows/s':>10} {'peak growth':>12} {'×':>6}")
for s, t, g in data:
    ratio = f"{base / t:>6.2f}" if base and s != "mariadb" else ""
    print(f"{s:24} {t:>8.3f} {rows / t:>10.0f} {g / 1024:>9.1f} MB {ratio}")
EOF
echo "outputs in $work"
