#!/usr/bin/env bash
# What applications' queries cost, Skarv against MariaDB in one run on
# this machine: a customers/orders data set (CUSTOMERS customers, ORDERS
# orders, the same rows on each system) and the queries of
# bench/queries.sql (lookups by key, pagination with LIMIT and OFFSET,
# MIN/MAX, COUNT, GROUP BY, joins with ORDER BY … LIMIT, reports), each
# the best of RUNS runs over one connection. Prints each query's time per
# system and Skarv's ratio to MariaDB's time (under 1: faster), and
# whether the answers agree (rows sorted unless the query orders them).
#
#   bench/queries-compare.sh
#
# Environment: SYSTEMS (default "mariadb skarv-2x2"; also skarv-1x1),
# CUSTOMERS (default 1000), ORDERS (default 50000), RUNS (default 5),
# QUERIES (default bench/queries.sql), SKARV (the binary; default
# target/release/skarv, built if missing), BASE_PORT (default 47900),
# WORK (outputs; a new directory under /tmp by default).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
systems="${SYSTEMS:-mariadb skarv-2x2}"
customers="${CUSTOMERS:-1000}"
orders="${ORDERS:-50000}"
runs="${RUNS:-5}"
queries="${QUERIES:-$here/queries.sql}"
skarv="${SKARV:-$root/target/release/skarv}"
base="${BASE_PORT:-47900}"
work="${WORK:-$(mktemp -d /tmp/skarv-queries-compare.XXXXXX)}"
mkdir -p "$work"
name=queries-compare.sh
# shellcheck source=bench/systems.sh
. "$here/systems.sh"

python3 -c "import pymysql" 2>/dev/null || die "PyMySQL is not installed (pip install pymysql)"
for system in $systems; do
    start_system "$system"
    echo "$system: loading $customers customers and $orders orders"
    python3 "$here/queries-compare.py" load "$port" "$customers" "$orders" ||
        die "loading $system failed"
    python3 "$here/queries-compare.py" time "$port" "$runs" "$queries" "$work/$system.json" ||
        die "timing $system failed"
    stop_all
done

echo
echo "best of $runs runs, ms; ratios are Skarv's time to MariaDB's (under 1: faster)"
python3 - "$work" $systems <<'PY'
import json, sys
work, systems = sys.argv[1], sys.argv[2:]
data = {s: json.load(open(f"{work}/{s}.json")) for s in systems}
base = data.get("mariadb")
head = "".join(f"{s:>12}" for s in systems)
ratios = "".join(f"{'× ' + s:>14}" for s in systems if s != "mariadb") if base else ""
print(f"{head}{ratios}  same  query")
for i, first in enumerate(data[systems[0]]):
    times = "".join(f"{data[s][i]['seconds'] * 1e3:>12.2f}" for s in systems)
    line = times
    same = ""
    if base:
        for s in systems:
            if s != "mariadb":
                line += f"{data[s][i]['seconds'] / base[i]['seconds']:>14.2f}"
        same = "yes" if all(data[s][i]["answer"] == base[i]["answer"] for s in systems) else "NO"
    print(f"{line}  {same:>4}  {first['query']}")
PY
echo "outputs in $work"
