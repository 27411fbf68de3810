#!/usr/bin/env bash
# Bulk load and export, Skarv's SQL node against MariaDB in one run on this
# machine: `LOAD DATA LOCAL INFILE` of a sysbench-shaped file (id, k, c,
# pad; a secondary index on k) through the `mysql` client, then `SELECT …
# INTO OUTFILE` of the table, on each system in turn. Each is run RUNS
# times (the table made afresh before each load); the best time counts.
# The table at the end gives rows/s per system and Skarv's ratios to
# MariaDB.
#
#   bench/load-data-compare.sh
#
# Environment: SYSTEMS (default "mariadb skarv-1x1"; also skarv-2x2), ROWS
# (default 500000), RUNS (default 3), SKARV (the binary; default
# target/release/skarv, built if missing), BASE_PORT (default 47500),
# WORK (outputs; a new directory under /tmp by default).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
systems="${SYSTEMS:-mariadb skarv-1x1}"
rows="${ROWS:-500000}"
runs="${RUNS:-3}"
skarv="${SKARV:-$root/target/release/skarv}"
base="${BASE_PORT:-47500}"
work="${WORK:-$(mktemp -d /tmp/skarv-load-compare.XXXXXX)}"
mkdir -p "$work"
name=load-data-compare.sh
# shellcheck source=bench/systems.sh
. "$here/systems.sh"

file="$work/rows.tsv"
python3 - "$file" "$rows" <<'EOF'
import random, sys
rng = random.Random(1)
with open(sys.argv[1], "w") as out:
    for i in range(1, int(sys.argv[2]) + 1):
        c = "-".join(f"{rng.randrange(10**11):011d}" for _ in range(10))
        pad = "-".join(f"{rng.randrange(10**11):011d}" for _ in range(5))
        out.write(f"{i}\t{rng.randrange(1, 1 + int(sys.argv[2]))}\t{c}\t{pad}\n")
EOF

sql() {
    mysql --host=127.0.0.1 --port="$port" --user=root --local-infile=1 "$@"
}

# best SECONDS…: the smallest.
best() { printf '%s\n' "$@" | sort -g | head -1; }

results="$work/results.tsv"
: >"$results"
for system in $systems; do
    start_system "$system"
    loads=()
    exports=()
    for run in $(seq "$runs"); do
        sql -e "DROP DATABASE IF EXISTS ldbench; CREATE DATABASE ldbench; \
            CREATE TABLE ldbench.t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, \
            c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
        start=$(date +%s.%N)
        sql -e "LOAD DATA LOCAL INFILE '$file' INTO TABLE ldbench.t"
        end=$(date +%s.%N)
        loads+=("$(echo "$end - $start" | bc)")
        count=$(sql -N -e "SELECT COUNT(*) FROM ldbench.t")
        [ "$count" = "$rows" ] || die "$system loaded $count rows of $rows"
        out="$work/$system-export-$run.tsv"
        rm -f "$out"
        start=$(date +%s.%N)
        sql -e "SELECT * FROM ldbench.t INTO OUTFILE '$out'"
        end=$(date +%s.%N)
        exports+=("$(echo "$end - $start" | bc)")
        rm -f "$out"
    done
    echo "$system: load ${loads[*]} s, export ${exports[*]} s"
    printf '%s\t%s\t%s\n' "$system" "$(best "${loads[@]}")" "$(best "${exports[@]}")" >>"$results"
    stop_all
done

echo
echo "$rows rows ($(du -h "$file" | cut -f1)), best of $runs; ratios are Skarv / MariaDB (rows/s)"
python3 - "$results" "$rows" <<'EOF'
import sys
rows = int(sys.argv[2])
data = {s: (float(l), float(e)) for s, l, e in (x.split() for x in open(sys.argv[1]) if x.strip())}
base = data.get("mariadb")
print(f"{'system':12} {'load rows/s':>12} {'export rows/s':>14} {'load ×':>7} {'export ×':>9}")
for s, (load, export) in data.items():
    line = f"{s:12} {rows / load:>12.0f} {rows / export:>14.0f}"
    if base and s != "mariadb":
        line += f" {base[0] / load:>7.2f} {base[1] / export:>9.2f}"
    print(line)
EOF
echo "outputs in $work"
