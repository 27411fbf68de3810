#!/usr/bin/env bash
# bench/instructions.sh: instructions per operation of the data node and of the client
# (flex), counted by valgrind's callgrind. Rates on a shared 2-core machine move by tens of
# percent from run to run; instruction counts move by a few, so an optimisation's effect
# shows here when compare.sh cannot rank two builds.
#
#   bench/instructions.sh [OPS]              # OPS: flex phases, default "read,update"
#   REPLICAS=2 bench/instructions.sh [OPS]   # 2 data nodes, 2 replicas: a figure per node
#   BATCH=16 bench/instructions.sh update    # 16 operations per transaction (flex -b)
#   SUBSCRIBE=1 bench/instructions.sh update # a change-stream subscriber during each pass
#                                            # (flex --subscribe): the capture's cost (issue 22)
#
# Starts a sandbox of 1 data node and 1 replica (port PORT_BASE, default 26400) whose
# processes run under callgrind with instrumentation off, inserts ROWS rows (default 20000)
# with flex, then for each phase: a warm-up pass, and one pass of ROWS one-operation
# transactions (-t 1 -p 256) with the data node's instrumentation on; its instruction count
# divided by the operations is the data node's figure. REPLICAS=2 starts 2 data nodes and 2
# replicas instead (one node group: each node is primary of half the partitions and backup
# of the rest) with both nodes under callgrind, and prints each node's instructions per
# operation of the whole run and their sum; a node's detail stays in its dump,
# `callgrind_annotate --inclusive=yes WORK/callgrind.PID.N`. The client's figure is the
# difference of two client runs under callgrind (CLIENT_LONG and CLIENT_SHORT
# transactions, defaults 12000 and 2000), so its start-up cancels out. Under valgrind the
# data node runs 20 to 50 times slower, so batches are larger than at full speed: compare
# builds with each other, not with the rates of compare.sh. Loopback only; every step under
# `timeout`; the sandbox is stopped and removed on exit. Needs valgrind (installed with apt
# when missing) and a build of the `dist` profile (SKARV: a prebuilt binary).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OPS=${1:-read,update}
ROWS=${ROWS:-20000}
CLIENT_LONG=${CLIENT_LONG:-12000}
CLIENT_SHORT=${CLIENT_SHORT:-2000}
PORT_BASE=${PORT_BASE:-26400}
REPLICAS=${REPLICAS:-1}
BATCH=${BATCH:-1}
WORK=${WORK:-$(mktemp -d /tmp/skarv-instructions.XXXXXX)}
STEP_TIMEOUT_S=600
CONNECT="127.0.0.1:$PORT_BASE"
mkdir -p "$WORK"

say() { printf '%s\n' "$*" >&2; }
die() { say "instructions.sh: $*"; exit 1; }

if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
    say "installing valgrind (apt-get)"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq valgrind jq >/dev/null
fi
command -v jq >/dev/null || die "jq is missing"
if [[ -z ${SKARV:-} ]]; then
    (cd "$ROOT" && timeout 3600 cargo build --profile dist -q -p skarv)
    SKARV=$ROOT/target/dist/skarv
fi
[[ -x $SKARV ]] || die "$SKARV is not an executable"
case $REPLICAS in
1) SANDBOX_ARGS=(--data-nodes 1 --replicas 1) ;;
# Under valgrind a node answers heartbeats late; the default interval (5 s, 4 missed) is
# close enough that a busy node could be declared failed mid-run.
2) SANDBOX_ARGS=(--data-nodes 2 --replicas 2 --set HeartbeatIntervalDbDb=30000) ;;
*) die "REPLICAS must be 1 or 2, not $REPLICAS" ;;
esac

SANDBOX=$WORK/sandbox
cleanup() {
    local status=$?
    timeout 120 "$SKARV" sandbox --stop --dir "$SANDBOX" >/dev/null 2>&1 || true
    pkill -f "callgrind-out-file=$WORK/" 2>/dev/null || true
    rm -rf "$SANDBOX"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

flex() { timeout "$STEP_TIMEOUT_S" "$SKARV" bench flex --connect "$CONNECT" "$@"; }
SUBSCRIBER=()
[[ ${SUBSCRIBE:-0} == 1 ]] && SUBSCRIBER=(--subscribe)

say "sandbox under callgrind on $CONNECT (results in $WORK)"
timeout "$STEP_TIMEOUT_S" valgrind --tool=callgrind --trace-children=yes --instr-atstart=no \
    --callgrind-out-file="$WORK/callgrind.%p" \
    "$SKARV" sandbox --dir "$SANDBOX" "${SANDBOX_ARGS[@]}" --base-port "$PORT_BASE" --sql-nodes 0 \
    --detach >"$WORK/sandbox.log" 2>&1 || die "the sandbox did not start (see $WORK/sandbox.log)"
# The data node is slow under valgrind: the first insert waits until it serves.
for attempt in $(seq 1 60); do
    flex -t 1 -p 256 -o "$ROWS" --ops insert --json >"$WORK/insert.json" 2>"$WORK/insert.err" && break
    ((attempt < 60)) || die "the insert failed (see $WORK/insert.err)"
    sleep 3
done
# The data nodes' pids, in node id order.
mapfile -t DATA_PIDS < <(for pid in $(pgrep -f "callgrind-out-file=$WORK/.* data --no-angel"); do
    printf '%s %s\n' "$(tr '\0' ' ' </proc/"$pid"/cmdline | grep -o -- '--node-id [0-9]*' | cut -d' ' -f2)" "$pid"
done | sort -n | cut -d' ' -f2)
((${#DATA_PIDS[@]} == REPLICAS)) || die "${#DATA_PIDS[@]} data nodes under callgrind, not $REPLICAS"

total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

if ((REPLICAS == 1)); then
    printf '%-8s %22s %22s\n' phase "data node instr/op" "client instr/op"
else
    printf '%-8s %18s %18s %18s %18s\n' phase "node 1 instr/op" "node 2 instr/op" "nodes instr/op" \
        "client instr/op"
fi
for op in ${OPS//,/ }; do
    flex -t 1 -p 256 -b "$BATCH" -o $((CLIENT_SHORT / BATCH)) --ops "$op" "${SUBSCRIBER[@]}" --json >/dev/null
    for pid in "${DATA_PIDS[@]}"; do
        callgrind_control -z "$pid" >/dev/null 2>&1
        callgrind_control -i on "$pid" >/dev/null 2>&1
    done
    flex -t 1 -p 256 -b "$BATCH" -o $((ROWS / BATCH)) --ops "$op" "${SUBSCRIBER[@]}" --json >"$WORK/$op.json"
    for pid in "${DATA_PIDS[@]}"; do
        callgrind_control -i off "$pid" >/dev/null 2>&1
        callgrind_control -d "$op" "$pid" >/dev/null 2>&1
    done
    sleep 1
    ops=$(jq .ops "$WORK/$op.json")
    per_node=()
    for pid in "${DATA_PIDS[@]}"; do
        dump=$(ls -t "$WORK"/callgrind."$pid"* | head -1)
        per_node+=($(($(total "$dump") / ops)))
    done
    client_run() {
        timeout "$STEP_TIMEOUT_S" valgrind --tool=callgrind --callgrind-out-file="$WORK/client.$op.$1" \
            "$SKARV" bench flex --connect "$CONNECT" -t 1 -p 256 -b "$BATCH" -o $(($1 / BATCH)) \
            --ops "$op" --json >/dev/null 2>&1
        total "$WORK/client.$op.$1"
    }
    client=$((($(client_run "$CLIENT_LONG") - $(client_run "$CLIENT_SHORT")) / (CLIENT_LONG - CLIENT_SHORT)))
    if ((REPLICAS == 1)); then
        printf '%-8s %22d %22d\n' "$op" "${per_node[0]}" "$client"
    else
        printf '%-8s %18d %18d %18d %18d\n' "$op" "${per_node[0]}" "${per_node[1]}" \
            $((per_node[0] + per_node[1])) "$client"
    fi
done
