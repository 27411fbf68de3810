#!/usr/bin/env bash
# bench/memory.sh: the data node's resident memory per row (issue 5's memory goal: at most
# 1.2 × the raw row size per row for 10 million 100-byte rows).
#
#   bench/memory.sh
#
# Starts a sandbox of 1 data node and 1 replica (port PORT_BASE, default 26500, DataMemory
# DATA_MEMORY, default 2G), reads the data node's VmRSS, inserts ROWS rows (default
# 10000000) of ATTRIBUTES 4-byte INT UNSIGNED columns (default 25: 100 bytes, the first the
# primary key) with `skarv bench flex`, reads VmRSS again, and prints the growth per row and
# its ratio to the raw row size. The data memory pool's pages are touched as rows fill them,
# so the growth counts the rows' pages, the hash index and whatever else grows with rows.
# Loopback only; every step under `timeout`; the sandbox is stopped and removed on exit.
# Needs a build of the `dist` profile (SKARV: a prebuilt binary) and jq.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROWS=${ROWS:-10000000}
ATTRIBUTES=${ATTRIBUTES:-25}
DATA_MEMORY=${DATA_MEMORY:-2G}
PORT_BASE=${PORT_BASE:-26500}
THREADS=${THREADS:-4}
WORK=${WORK:-$(mktemp -d /tmp/skarv-memory.XXXXXX)}
STEP_TIMEOUT_S=1800
CONNECT="127.0.0.1:$PORT_BASE"
mkdir -p "$WORK"

say() { printf '%s\n' "$*" >&2; }
die() { say "memory.sh: $*"; exit 1; }

command -v jq >/dev/null || die "jq is missing"
((ROWS % THREADS == 0)) || die "ROWS=$ROWS is not a multiple of THREADS=$THREADS"
if [[ -z ${SKARV:-} ]]; then
    (cd "$ROOT" && timeout 3600 cargo build --profile dist -q -p skarv)
    SKARV=$ROOT/target/dist/skarv
fi
[[ -x $SKARV ]] || die "$SKARV is not an executable"

SANDBOX=$WORK/sandbox
cleanup() {
    local status=$?
    timeout 120 "$SKARV" sandbox --stop --dir "$SANDBOX" >/dev/null 2>&1 || true
    rm -rf "$SANDBOX"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "sandbox on $CONNECT, DataMemory=$DATA_MEMORY (results in $WORK)"
timeout 120 "$SKARV" sandbox --dir "$SANDBOX" --data-nodes 1 --replicas 1 --base-port "$PORT_BASE" --sql-nodes 0 \
    --set "DataMemory=$DATA_MEMORY" --detach >"$WORK/sandbox.log" 2>&1 ||
    die "the sandbox did not start (see $WORK/sandbox.log)"
angel=$(jq -r '.data_node_angel_pids[0]' "$SANDBOX/sandbox.json")
data_pid=$(pgrep -P "$angel" | head -1)
[[ -n $data_pid ]] || die "no data node process under angel $angel"
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$data_pid/status"; }

before=$(rss_kib)
say "inserting $ROWS rows of $ATTRIBUTES × INT UNSIGNED with $THREADS threads"
timeout "$STEP_TIMEOUT_S" "$SKARV" bench flex --connect "$CONNECT" -t "$THREADS" -p 64 \
    -o $((ROWS / THREADS)) -a "$ATTRIBUTES" --ops insert --json >"$WORK/insert.json" ||
    die "the insert failed (see $WORK/insert.json)"
after=$(rss_kib)
rows=$(jq .ops "$WORK/insert.json")
((rows == ROWS)) || die "flex inserted $rows rows, not $ROWS"
raw=$((ATTRIBUTES * 4))
awk -v b="$before" -v a="$after" -v n="$rows" -v raw="$raw" -v rate="$(jq .ops_per_s "$WORK/insert.json")" 'BEGIN {
    per = (a - b) * 1024 / n
    printf "rows                 %d (%d bytes raw each)\n", n, raw
    printf "inserts/s            %.0f\n", rate
    printf "data node VmRSS      %.1f MiB -> %.1f MiB\n", b / 1024, a / 1024
    printf "growth per row       %.1f bytes\n", per
    printf "ratio to raw size    %.2f (goal <= 1.2)\n", per / raw
}'
