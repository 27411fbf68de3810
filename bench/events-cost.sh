#!/usr/bin/env bash
# bench/events-cost.sh: what one change-stream subscriber costs primary-key updates (issue
# 22's cost goal: updates/s with a subscriber on the table at least 0.85 of those without,
# on 1 data node x 1 replica and on 2 x 2), with the subscriber's own rate and the lag from
# a commit to its delivery, in one run on this machine.
#
#   bench/events-cost.sh
#
# For each sandbox shape of SHAPES ("1x1 2x2"; --sql-nodes 0 and --bind-cpus, as
# bench/compare.sh starts its sandboxes): ROWS rows (200,000) inserted by `skarv bench
# flex`, then, for each -p of PARALLEL ("8 64", transactions in flight per thread, THREADS
# 2 threads), update phases of RUN_SECONDS (10) without and with `flex --subscribe` (one
# subscriber on the table, in flex's process, taking every change, minimal images), the
# two alternating for ROUNDS (2) rounds; each arm's figure is its best round. The table
# gives updates/s of both arms, their ratio, the subscriber's changes/s, the lag p50/p99 in
# microseconds (flex samples commits and times their epoch's arrival; an epoch is sent once
# complete cluster-wide, so the lag holds at least part of the epoch interval,
# TimeBetweenEpochs, 100 ms by default), and the gaps of all subscribed rounds: a
# subscriber slower than the updates is cut off with a gap (MaxBufferedEpochBytes, as
# designed: the cluster is not slowed down for it), and its ratio then measures a
# subscriber that stopped, not one that keeps up.
#
# Knobs (environment): SHAPES, ROWS, RUN_SECONDS, ROUNDS, THREADS, PARALLEL, PORT_BASE
# (27100), SKARV (a prebuilt binary; default target/release/skarv, built when missing),
# WORK (outputs; a new directory under /tmp). Needs jq. Everything listens on 127.0.0.1;
# the sandboxes are stopped on exit, whatever happens.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHAPES=${SHAPES:-"1x1 2x2"}
ROWS=${ROWS:-200000}
RUN_SECONDS=${RUN_SECONDS:-10}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
PARALLEL=${PARALLEL:-"8 64"}
PORT_BASE=${PORT_BASE:-27100}
WORK=${WORK:-$(mktemp -d /tmp/skarv-events-cost.XXXXXX)}
SKARV=${SKARV:-$ROOT/target/release/skarv}
TABLE=events_cost
# Bounds, in seconds: a flex step (an insert pass of ROWS at 2 replicas included), a
# sandbox start or stop, the build.
STEP_TIMEOUT_S=$((RUN_SECONDS + 120 + ROWS / 20000))
SANDBOX_TIMEOUT_S=120
BUILD_TIMEOUT_S=3600

say() { printf '%s\n' "$*" >&2; }
die() {
    say "events-cost: $*"
    exit 1
}
command -v jq >/dev/null || die "needs jq (apt-get install jq)"
((ROWS % THREADS == 0)) || die "ROWS ($ROWS) must divide among THREADS ($THREADS)"
if [[ ! -x $SKARV ]]; then
    say "building $SKARV"
    (cd "$ROOT" && timeout "$BUILD_TIMEOUT_S" cargo build --release -p skarv) >&2
fi
mkdir -p "$WORK"

SANDBOXES=()
cleanup() {
    for dir in "${SANDBOXES[@]}"; do
        timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --stop --dir "$dir" >/dev/null 2>&1 || true
        rm -rf "$dir"
    done
}
trap cleanup EXIT

# flex NAME CONNECT ARGS...: one JSON line per phase into $WORK/flex-NAME.json.
flex() {
    local name=$1 connect=$2
    shift 2
    timeout "$STEP_TIMEOUT_S" "$SKARV" bench flex --connect "$connect" --table "$TABLE" \
        -a 25 -s 1 --json "$@" >"$WORK/flex-$name.json" 2>"$WORK/flex-$name.err" ||
        die "skarv bench flex $* failed: $(tail -3 "$WORK/flex-$name.err")"
}
field() { # name, jq path (of the run's one phase)
    jq -r "$2" "$WORK/flex-$1.json"
}
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }

ROWS_OUT=()
port=$PORT_BASE
for shape in $SHAPES; do
    nodes=${shape%x*}
    replicas=${shape#*x}
    dir=$WORK/sandbox-$shape
    connect=127.0.0.1:$port
    say "sandbox: $nodes data node(s), $replicas replica(s) on $connect"
    SANDBOXES+=("$dir")
    data_mb=$((ROWS * 200 / 1048576 > 256 ? ROWS * 200 / 1048576 : 256))
    timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --detach --dir "$dir" --data-nodes "$nodes" \
        --replicas "$replicas" --base-port "$port" --set "DataMemory=${data_mb}M" --bind-cpus \
        --sql-nodes 0 >"$WORK/sandbox-$shape.txt" || die "sandbox $shape did not start"
    say "  insert $ROWS rows"
    flex "$shape-insert" "$connect" -t "$THREADS" -p 64 -o $((ROWS / THREADS)) --ops insert
    for p in $PARALLEL; do
        plain=0 subscribed=0 changes=0 p50=0 p99=0 gaps=0
        for round in $(seq 1 "$ROUNDS"); do
            for arm in plain subscribed; do
                extra=()
                [[ $arm == subscribed ]] && extra=(--subscribe)
                say "  updates at -p $p, $arm, round $round of $ROUNDS: $RUN_SECONDS s"
                name=$shape-p$p-$arm-$round
                flex "$name" "$connect" -t "$THREADS" -p "$p" -o $((ROWS / THREADS)) \
                    --ops update --duration "$RUN_SECONDS" "${extra[@]}"
                rate=$(field "$name" .ops_per_s)
                if [[ $arm == plain ]]; then
                    plain=$(max "$plain" "$rate")
                    continue
                fi
                gaps=$((gaps + $(field "$name" .stream.gaps)))
                if awk -v r="$rate" -v b="$subscribed" 'BEGIN { exit !(r > b) }'; then
                    subscribed=$rate
                    changes=$(field "$name" .stream.changes_per_s)
                    p50=$(field "$name" .stream.lag_us.p50)
                    p99=$(field "$name" .stream.lag_us.p99)
                fi
            done
        done
        ROWS_OUT+=("$(awk -v s="$shape" -v p="$p" -v a="$plain" -v b="$subscribed" \
            -v c="$changes" -v l="$p50" -v m="$p99" -v g="$gaps" 'BEGIN {
            printf "%-6s %4d %12.0f %15.0f %6.2f %12.0f %11.0f %11.0f %5d",
                s, p, a, b, b / a, c, l, m, g }')")
    done
    timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --stop --dir "$dir" >/dev/null
    rm -rf "$dir"
    port=$((port + 20))
done

echo
echo "updates, -t $THREADS, $ROWS rows, best of $ROUNDS x $RUN_SECONDS s; goal: ratio >= 0.85"
echo "(gaps: subscribers cut off, all rounds; a ratio with gaps is not the goal's)"
printf '%-6s %4s %12s %15s %6s %12s %11s %11s %5s\n' shape -p "updates/s" \
    "with subscriber" ratio "changes/s" "lag p50 µs" "lag p99 µs" gaps
printf '%s\n' "${ROWS_OUT[@]}"
echo "outputs in $WORK"
