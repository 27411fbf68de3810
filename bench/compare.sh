#!/usr/bin/env bash
# bench/compare.sh: Skarv's primary-key reads and updates side by side with Redis, on this
# machine, in one run (issue 24's goals). Server and load generator share the machine, as
# redis-benchmark measures Redis. Each table size of ROWS (default 400,000 and 10 million)
# is measured in turn, Redis holding as many keys as Skarv rows; the -t/-p settings are
# tuned at the first size and reused at the others.
#
#   1. builds target/dist/skarv (Cargo.toml's `dist` profile: release with LTO; cargo does
#      nothing when it is up to date);
#   2. installs Debian's redis-server when it is missing, starts it on loopback with
#      persistence off, stores ROWS keys of 100 bytes (key:000000000000 and on, the names
#      redis-benchmark's -r draws), and runs redis-benchmark GET and SET with 100-byte values
#      (-d 100 -r ROWS -c 50 -P 16; then -P 1 -c 1 for latency);
#   3. starts a sandbox of 1 data node and 1 replica (with NDB's default 1 GiB of redo log,
#      NoOfFragmentLogFiles=16, where a sandbox keeps a quarter, and DataMemory for ROWS:
#      200 bytes a row, at least the sandbox's 256 MiB), inserts ROWS 100-byte rows
#      (25 INT UNSIGNED attributes) with `skarv bench flex`, tries the -t/-p/--executors
#      settings of TUNE_SETTINGS on reads and on updates (a pass over every row each), then
#      measures reads and updates for RUN_SECONDS each, each at its own best setting and
#      twice (the figure is the higher, as for Redis below); the same with BATCH_OPS operations per
#      transaction (flex -b, the same operations in flight); one client doing one operation at
#      a time (-t 1 -p 1) for latency; and a verified read of every row;
#   4. runs redis-benchmark -c 1 -P 1 and -c 50 -P 16 a second time (the ratios use the
#      lower of its two p50s and the higher of its two rates: the machine's speed drifts, and
#      Redis measured in a slow spell must not flatter Skarv);
#   5. does the same as 3 on a sandbox of 2 data nodes and 2 replicas (synchronous
#      replication), each data node's thread bound to a CPU of its own (sandbox
#      --bind-cpus, given to both sandboxes; it binds only where there are several nodes);
#   6. prints one table with both and the ratios the goals are stated in, per size.
#
# Everything listens on 127.0.0.1 only; every step runs under `timeout`; the sandboxes and
# redis-server are stopped on exit, whatever happens. Knobs (environment): ROWS (table sizes,
# "400000 10000000"),
# RUN_SECONDS (10), REDIS_REQUESTS (1000000), LATENCY_SECONDS (5),
# REDIS_LATENCY_REQUESTS (50000), TUNE_SETTINGS (below), BATCH_OPS (16), PORT_BASE (26100: Redis there,
# the sandboxes at +10 and +30), WORK (a new directory under /tmp), SKARV (a prebuilt binary:
# skips the build), BATCH_POLICY (0; 1: every process of the run under Linux's SCHED_BATCH,
# redis-server and redis-benchmark through `chrt -b 0`, the data nodes with
# BatchScheduling=1 and flex with --batch-scheduling, so that neither side gains from the
# policy alone), LINK (tcp: the client reaches Redis and the data nodes over loopback TCP,
# the sandboxes with UseShm=0, as the goals' figures were measured; unix: both over
# Unix-domain sockets, redis-benchmark -s and the data nodes' local links, UseShm=1, their
# default). Raw results (JSON lines, CSV, logs) stay in $WORK; the sandboxes' data is
# removed. Takes about 6 minutes at 400,000 rows and 10 more at 10 million (ROWS=400000 for
# the first alone).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROWS_LIST=${ROWS:-"400000 10000000"}
ROWS=${ROWS_LIST%% *}
RUN_SECONDS=${RUN_SECONDS:-10}
LATENCY_SECONDS=${LATENCY_SECONDS:-5}
REDIS_REQUESTS=${REDIS_REQUESTS:-1000000}
REDIS_LATENCY_REQUESTS=${REDIS_LATENCY_REQUESTS:-50000}
PORT_BASE=${PORT_BASE:-26100}
WORK=${WORK:-$(mktemp -d /tmp/skarv-compare.XXXXXX)}
# Bounds, in seconds: each benchmark step (a pass over every row takes longer at more rows:
# 10 million inserts at 2 replicas take about 100 s), a sandbox start or stop, the build.
LARGEST_ROWS=$(printf '%s\n' $ROWS_LIST | sort -n | tail -1)
STEP_TIMEOUT_S=$((RUN_SECONDS + 120 + LARGEST_ROWS / 20000))
SANDBOX_TIMEOUT_S=120
BUILD_TIMEOUT_S=3600

REDIS_PORT=$((PORT_BASE))
SANDBOX1_PORT=$((PORT_BASE + 10))
SANDBOX2_PORT=$((PORT_BASE + 30))
TABLE=compare
# Settings tried on reads and on updates, -t:-p[:--executors]: each -t must divide ROWS
# (thread i owns rows i·o..(i+1)·o). Tuning writes about 7 × ROWS updates of redo before the
# measured runs; the 1-node sandbox's redo log takes it because its checkpoints hurry the GCP
# they wait for (docs/architecture.md, the LDM block).
TUNE_SETTINGS=${TUNE_SETTINGS:-"1:128 1:256 2:64 2:256 2:512 4:128 2:256:1"}
# Operations per transaction of the batched runs (flex -b); ROWS / -t must be a multiple.
BATCH_OPS=${BATCH_OPS:-16}

# BATCH_POLICY=1: the prefix that runs Redis's processes under SCHED_BATCH, and what the
# sandboxes and flex are given for the same.
POLICY=() SANDBOX_POLICY=() FLEX_POLICY=()
if [[ ${BATCH_POLICY:-0} == 1 ]]; then
    POLICY=(chrt -b 0)
    SANDBOX_POLICY=(--set BatchScheduling=1)
    FLEX_POLICY=(--batch-scheduling)
fi

# LINK: the same kind of socket on both sides. Redis gains more from a Unix socket (5-20 %
# in one run: it wakes per request) than Skarv's batching, spinning data node and client do
# (within the noise but for a 2-replica update one at a time, 8-10 %: docs/architecture.md).
LINK=${LINK:-tcp}
case $LINK in
unix) REDIS_LISTEN=(--unixsocket "$WORK/redis.sock" --unixsocketperm 700)
    REDIS_CLIENT=(-s "$WORK/redis.sock") SANDBOX_LINK=(--set UseShm=1) ;;
tcp) REDIS_LISTEN=() REDIS_CLIENT=(-h 127.0.0.1 -p "$REDIS_PORT") SANDBOX_LINK=(--set UseShm=0) ;;
*) printf 'compare.sh: LINK=%s: allowed: unix, tcp\n' "$LINK" >&2; exit 1 ;;
esac

mkdir -p "$WORK"
say() { printf '%s\n' "$*" >&2; }
die() { say "compare.sh: $*"; exit 1; }
for ROWS in $ROWS_LIST; do
    [[ $ROWS =~ ^[1-9][0-9]*$ ]] || die "ROWS: '$ROWS' is not a number of rows"
    for setting in "2:0" $TUNE_SETTINGS; do  # 2: the insert's -t
        (( ROWS % ${setting%%:*} == 0 )) || die "ROWS=$ROWS is not a multiple of -t ${setting%%:*} (TUNE_SETTINGS)"
        (( ROWS / ${setting%%:*} % BATCH_OPS == 0 )) ||
            die "ROWS=$ROWS / -t ${setting%%:*} is not a multiple of BATCH_OPS=$BATCH_OPS"
    done
done

REDIS_PID=
SANDBOXES=()
POLICY_CREATED=
cleanup() {
    local status=$?
    for dir in "${SANDBOXES[@]}"; do
        [[ -n ${SKARV:-} ]] || break
        [[ -d $dir ]] || continue
        if timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --stop --dir "$dir" >/dev/null 2>&1; then
            rm -rf "$dir"
        fi
    done
    if [[ -n $REDIS_PID ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    if [[ -n $POLICY_CREATED ]]; then rm -f /usr/sbin/policy-rc.d; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- tools ----

install_packages() {
    say "installing $* (apt-get)"
    # Debian starts an installed service at once; a policy-rc.d that says no keeps the
    # default redis-server (port 6379, persistence on) from starting behind our back.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        POLICY_CREATED=1
    fi
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "$@" >/dev/null
}

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
    install_packages $(printf '%s\n' "${missing[@]}" | sort -u)
fi

if [[ -z ${SKARV:-} ]]; then
    say "building target/dist/skarv"
    (cd "$ROOT" && timeout "$BUILD_TIMEOUT_S" cargo build --profile dist -q -p skarv)
    SKARV=$ROOT/target/dist/skarv
fi
[[ -x $SKARV ]] || die "$SKARV is not an executable"

# ---- Redis ----

start_redis() {
    say "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$REDIS_PORT"
    "${POLICY[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --protected-mode yes --daemonize no --logfile "$WORK/redis.log" "${REDIS_LISTEN[@]}" &
    REDIS_PID=$!
    for _ in $(seq 100); do
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null || die "redis-server did not start: $WORK/redis.log"
}
# Stores ROWS keys of 100 bytes under the names redis-benchmark -r ROWS draws (key:%012d),
# so that its GETs find values and Redis holds as many keys as Skarv holds rows.
fill_redis() {
    say "redis: storing $ROWS keys of 100 bytes"
    awk -v n="$ROWS" 'BEGIN {
        v = sprintf("%100s", ""); gsub(/ /, "x", v)
        for (i = 0; i < n; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$100\r\n%s\r\n", i, v
    }' | timeout "$STEP_TIMEOUT_S" redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --pipe >"$WORK/redis-fill-$ROWS.txt" ||
        die "filling Redis failed: $WORK/redis-fill-$ROWS.txt"
    local keys
    keys=$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" dbsize)
    ((keys == ROWS)) || die "Redis holds $keys keys, not $ROWS"
}
stop_redis() {
    kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=
}

# redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
redis_bench() { # name, extra args...
    local name=$1
    shift
    timeout "$STEP_TIMEOUT_S" "${POLICY[@]}" redis-benchmark "${REDIS_CLIENT[@]}" -t get,set -d 100 -r "$ROWS" \
        --csv "$@" >"$OUT/redis-$name.csv"
}
csv_field() { # file, test, field number
    grep "^\"$2\"" "$1" | tr -d '"' | cut -d, -f"$3"
}
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
row() { printf '%-34s %14s %16s %16s\n' "$@"; }
num() { printf '%.0f' "$1"; }
dec() { printf '%.1f' "$1"; }
# The pipelined runs go twice, before and after the 1-node measurements, and the ratios use
# the higher of the two: this machine's speed drifts (Redis's own figure moved 2.4x between
# runs), and a Redis run in a slow spell must not flatter Skarv.
redis_pipelined() { # round
    say "redis-benchmark GET, SET: -n $REDIS_REQUESTS -c 50 -P 16 (round $1 of 2)"
    redis_bench "pipelined-$1" -n "$REDIS_REQUESTS" -c 50 -P 16
}
# One client, one request at a time: its round trip is two wakeups of an idle process, and
# on this virtual machine their cost swings with the host's load, Redis's own p50 from 15 to
# 95 µs between runs of the same hour. So the latency goes twice, like the pipelined runs:
# before the 1-node measurements and right after them, and the goal uses the lower p50 (the
# one that flatters Skarv less).
redis_latency() { # round
    say "redis-benchmark GET, SET: -n $REDIS_LATENCY_REQUESTS -c 1 -P 1 (round $1 of 2)"
    redis_bench "latency-$1" -n "$REDIS_LATENCY_REQUESTS" -c 1 -P 1
}
p50_us() { # file, test: redis-benchmark's p50 in ms -> µs
    awk -v ms="$(csv_field "$1" "$2" 5)" 'BEGIN { printf "%.1f", ms * 1000 }'
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b ? a : b) }'; }

# ---- Skarv ----

start_sandbox() { # dir, data nodes, replicas, port
    rm -rf "$1"
    SANDBOXES+=("$1")
    # NDB's default redo log (4 parts x 16 files x 16 MiB per node), not the sandbox's
    # quarter of it: an update run writes hundreds of MB of redo, and a smaller log runs
    # local checkpoints four times as often. --bind-cpus: on this 2-CPU machine the 2 x 2
    # sandbox's data nodes keep a CPU each (no effect on 1 node; README, "Sandbox options":
    # updates faster, reads slower).
    # DataMemory: 200 bytes a row (a row takes about 116 with its hash index entry), at
    # least the sandbox's default.
    local data_mb=$((ROWS * 200 / 1048576 > 256 ? ROWS * 200 / 1048576 : 256))
    timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --detach --dir "$1" --data-nodes "$2" --replicas "$3" \
        --base-port "$4" --set NoOfFragmentLogFiles=16 --set "DataMemory=${data_mb}M" --bind-cpus \
        --sql-nodes 0 "${SANDBOX_POLICY[@]}" "${SANDBOX_LINK[@]}" >"$OUT/sandbox-$2x$3.txt"
}
stop_sandbox() { # dir (its data, hundreds of MB of redo and checkpoints, goes too)
    timeout "$SANDBOX_TIMEOUT_S" "$SKARV" sandbox --stop --dir "$1" >/dev/null
    rm -rf "$1"
}
# flex NAME CONNECT ARGS...: one JSON line per phase into $OUT/flex-NAME.json.
flex() {
    local name=$1 connect=$2
    shift 2
    timeout "$STEP_TIMEOUT_S" "$SKARV" bench flex --connect "$connect" --table "$TABLE" -a 25 -s 1 --json \
        "${FLEX_POLICY[@]}" "$@" \
        >"$OUT/flex-$name.json" 2>"$OUT/flex-$name.err" ||
        die "skarv bench flex $* failed: $(tail -3 "$OUT/flex-$name.err")$(cluster_alerts)"
}
# The sandboxes' last ALERT lines of their cluster logs: why a step stalled when the data
# nodes could not go on (a full disk stopped every checkpoint, and with it every update,
# while flex only timed out).
cluster_alerts() {
    local lines
    lines=$(cat "$WORK"/sandbox-*/mgmd/ndb_1_cluster.log 2>/dev/null | grep ' ALERT ' | tail -3 || true)
    [[ -z $lines ]] || printf '\nthe cluster log'"'"'s last alerts:\n%s' "$lines"
}
field() { # name, phase index (0-based), jq path
    jq -r -s ".[$2]$3" "$OUT/flex-$1.json"
}
# Rows per thread for -t $1 (checked above to divide ROWS).
per_thread() { echo $((ROWS / $1)); }

# Measures one sandbox; sets R_<label>_* variables.
measure() { # label, data nodes, replicas, port
    local label=$1 dir=$WORK/sandbox-$1 connect=127.0.0.1:$4
    say "sandbox: $2 data node(s), $3 replica(s) on 127.0.0.1:$4"
    start_sandbox "$dir" "$2" "$3" "$4"
    say "  insert $ROWS rows (-t 2 -p 128)"
    flex "$label-insert" "$connect" -t 2 -p 128 -o "$(per_thread 2)" --ops insert
    # Each setting is tried on reads and on updates: the two are measured at their own best.
    # A tuning pass updates every row, so the rows are at one generation again after it
    # (flex keeps the generations rows may hold to a few; --duration phases widen them).
    # Tuned at the first size only (TUNED_*): at 10 million rows a pass of each setting
    # would take most of an hour.
    local -A best_t=() best_p=() best_e=() best=([read]=0 [update]=0)
    local t p e rate op i tuning=$TUNE_SETTINGS
    if [[ -n ${TUNED_T[$label-read]:-} ]]; then
        tuning=
        for op in read update; do
            best_t[$op]=${TUNED_T[$label-$op]} best_p[$op]=${TUNED_P[$label-$op]}
            best_e[$op]=${TUNED_E[$label-$op]}
        done
        say "  settings tuned at $FIRST_ROWS rows"
    fi
    for setting in $tuning; do
        IFS=: read -r t p e <<<"$setting"
        e=${e:-0}
        flex "$label-tune-$t-$p-$e" "$connect" -t "$t" -p "$p" --executors "$e" -o "$(per_thread "$t")" \
            --ops read,update
        i=0
        for op in read update; do
            rate=$(field "$label-tune-$t-$p-$e" "$i" .ops_per_s)
            i=$((i + 1))
            say "  ${op}s with -t $t -p $p --executors $e: $(printf '%.0f' "$rate")/s"
            if awk -v a="$rate" -v b="${best[$op]}" 'BEGIN { exit !(a > b) }'; then
                best[$op]=$rate best_t[$op]=$t best_p[$op]=$p best_e[$op]=$e
            fi
        done
    done
    for op in read update; do
        t=${best_t[$op]} p=${best_p[$op]} e=${best_e[$op]}
        TUNED_T[$label-$op]=$t TUNED_P[$label-$op]=$p TUNED_E[$label-$op]=$e
        # Twice, as Redis is measured twice, the figure the higher: a slow spell of the
        # machine must not decide either side's figure.
        for round in 1 2; do
            say "  ${op}s at their best, -t $t -p $p --executors $e: ${RUN_SECONDS} s (round $round of 2)"
            flex "$label-best-$op-$round" "$connect" -t "$t" -p "$p" --executors "$e" -o "$(per_thread "$t")" \
                --ops "$op" --duration "$RUN_SECONDS"
        done
        # The same operations in flight, BATCH_OPS to a transaction (flex -b): what a client
        # that groups its keys gets. Shown beside the goals' figures (one op per transaction).
        local batch_p=$((p / BATCH_OPS > 0 ? p / BATCH_OPS : 1))
        say "  ${op}s, $BATCH_OPS per transaction (-b $BATCH_OPS -p $batch_p): ${RUN_SECONDS} s"
        flex "$label-batched-$op" "$connect" -t "$t" -p "$batch_p" -b "$BATCH_OPS" --executors "$e" \
            -o "$(($(per_thread "$t") / BATCH_OPS))" --ops "$op" --duration "$RUN_SECONDS"
    done
    say "  one client, one operation at a time (-t 1 -p 1): ${LATENCY_SECONDS} s each"
    flex "$label-latency" "$connect" -t 1 -p 1 -o "$ROWS" --ops read,update --duration "$LATENCY_SECONDS"
    say "  verified read of every row"
    flex "$label-verify" "$connect" -t 2 -p 128 -o "$(per_thread 2)" --ops read --verify
    [[ $(field "$label-verify" 0 .mismatches) == 0 ]] || die "rows did not verify: $OUT/flex-$label-verify.err"
    stop_sandbox "$dir"
    local setting
    for op in read update; do
        setting="-t ${best_t[$op]} -p ${best_p[$op]}"
        ((best_e[$op] == 0)) || setting+=" -e ${best_e[$op]}"
        eval "R_${label}_SETTING_${op^^}='$setting'"
    done
    for op in read update; do
        local first second
        first=$(field "$label-best-$op-1" 0 .ops_per_s) second=$(field "$label-best-$op-2" 0 .ops_per_s)
        eval "R_${label}_${op^^}=$(max "$first" "$second")"
        eval "R_${label}_${op^^}S='$(num "$first"), $(num "$second")'"
    done
    eval "R_${label}_READ_P50=$(field "$label-latency" 0 .latency_us.p50)"
    eval "R_${label}_UPDATE_P50=$(field "$label-latency" 1 .latency_us.p50)"
    eval "R_${label}_INSERT=$(field "$label-insert" 0 .ops_per_s)"
    eval "R_${label}_BREAD=$(field "$label-batched-read" 0 .ops_per_s)"
    eval "R_${label}_BUPDATE=$(field "$label-batched-update" 0 .ops_per_s)"
}

# A goal's line: its ratio to three places (two would show 0.4966 as 0.50) and
# whether it is met, judged on the exact ratio.
goal() { # label, numerator, denominator, ">=" or "<=", bound
    local met
    met=$(awk -v a="$2" -v b="$3" -v op="$4" -v bound="$5" 'BEGIN {
        if (b <= 0) { print "n/a"; exit }
        r = a / b
        print ((op == ">=" ? r >= bound : r <= bound) ? "met" : "NOT met")
    }')
    printf '%-52s %8s   %-7s %s\n' "$1" "$(ratio3 "$2" "$3")" "$4 $5" "$met"
}
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

# One table size: Redis (first round, latency), 1 node, Redis (second round), 2 nodes,
# then its table and goals (printed, and kept in $WORK/table-ROWS.txt).
run_size() {
    OUT=$WORK/rows-$ROWS
    mkdir -p "$OUT"
    say "---- $ROWS rows ----"
    start_redis
    fill_redis
    redis_pipelined 1
    redis_latency 1
    measure one 1 1 "$SANDBOX1_PORT"
    redis_latency 2
    redis_pipelined 2
    stop_redis
    local round
    for round in 1 2; do
        REDIS_GET_P50S[$round]=$(p50_us "$OUT/redis-latency-$round.csv" GET)
        REDIS_SET_P50S[$round]=$(p50_us "$OUT/redis-latency-$round.csv" SET)
    done
    REDIS_GET_P50=$(min "${REDIS_GET_P50S[1]}" "${REDIS_GET_P50S[2]}")
    REDIS_SET_P50=$(min "${REDIS_SET_P50S[1]}" "${REDIS_SET_P50S[2]}")
    measure two 2 2 "$SANDBOX2_PORT"
    REDIS_GETS="$(num "$(csv_field "$OUT/redis-pipelined-1.csv" GET 2)"), $(num "$(csv_field "$OUT/redis-pipelined-2.csv" GET 2)")"
    REDIS_SETS="$(num "$(csv_field "$OUT/redis-pipelined-1.csv" SET 2)"), $(num "$(csv_field "$OUT/redis-pipelined-2.csv" SET 2)")"
    REDIS_GET=$(max "$(csv_field "$OUT/redis-pipelined-1.csv" GET 2)" "$(csv_field "$OUT/redis-pipelined-2.csv" GET 2)")
    REDIS_SET=$(max "$(csv_field "$OUT/redis-pipelined-1.csv" SET 2)" "$(csv_field "$OUT/redis-pipelined-2.csv" SET 2)")
    table | tee "$WORK/table-$ROWS.txt"
}

table() {
    echo
    echo "Skarv vs Redis on $(nproc) cores ($(uname -m)), $(date -u '+%Y-%m-%d %H:%M UTC'); raw results in $OUT"
    echo "Skarv: 100-byte rows (25 × INT UNSIGNED), $ROWS rows; Redis: $ROWS keys of 100 bytes, -r $ROWS"
    [[ ${BATCH_POLICY:-0} == 1 ]] && echo "every process under SCHED_BATCH (BATCH_POLICY=1)"
    echo
    row "" "Redis" "Skarv 1 node" "Skarv 2 nodes"
    row "" "" "1 replica" "2 replicas"
    row "read settings (-e: --executors)" "-c 50 -P 16" "$R_one_SETTING_READ" "$R_two_SETTING_READ"
    row "update settings" "-c 50 -P 16" "$R_one_SETTING_UPDATE" "$R_two_SETTING_UPDATE"
    row "reads/s (GET)" "$(num "$REDIS_GET")" "$(num "$R_one_READ")" "$(num "$R_two_READ")"
    row "updates/s (SET)" "$(num "$REDIS_SET")" "$(num "$R_one_UPDATE")" "$(num "$R_two_UPDATE")"
    row "inserts/s" "" "$(num "$R_one_INSERT")" "$(num "$R_two_INSERT")"
    row "reads/s, $BATCH_OPS per transaction" "" "$(num "$R_one_BREAD")" "$(num "$R_two_BREAD")"
    row "updates/s, $BATCH_OPS per transaction" "" "$(num "$R_one_BUPDATE")" "$(num "$R_two_BUPDATE")"
    row "reads/s, each of 2 runs" "$REDIS_GETS" "$R_one_READS" "$R_two_READS"
    row "updates/s, each of 2 runs" "$REDIS_SETS" "$R_one_UPDATES" "$R_two_UPDATES"
    row "p50 read µs, 1 client 1 op (GET)" "$REDIS_GET_P50" "$(dec "$R_one_READ_P50")" "$(dec "$R_two_READ_P50")"
    row "p50 update µs, 1 client 1 op (SET)" "$REDIS_SET_P50" "$(dec "$R_one_UPDATE_P50")" "$(dec "$R_two_UPDATE_P50")"
    row "p50 GET µs, each of 2 runs" "${REDIS_GET_P50S[1]}, ${REDIS_GET_P50S[2]}" "" ""
    row "p50 SET µs, each of 2 runs" "${REDIS_SET_P50S[1]}, ${REDIS_SET_P50S[2]}" "" ""
    echo
    printf '%-52s %8s   %-7s %s\n' "ratio ($ROWS rows)" "value" "goal" ""
    goal "reads / GET -P 16 (1 replica)" "$R_one_READ" "$REDIS_GET" ">=" 2.5
    goal "updates / SET -P 16 (1 replica)" "$R_one_UPDATE" "$REDIS_SET" ">=" 1.2
    goal "updates, -b $BATCH_OPS / SET -P 16 (1 replica)" "$R_one_BUPDATE" "$REDIS_SET" ">=" 2.0
    goal "p50 read latency / GET -P 1 -c 1 (1 replica)" "$R_one_READ_P50" "$REDIS_GET_P50" "<=" 1.0
    goal "updates, 2 replicas / 1 replica" "$R_two_UPDATE" "$R_one_UPDATE" ">=" 0.65
    goal "p50 update, 2 replicas / 1 replica" "$R_two_UPDATE_P50" "$R_one_UPDATE_P50" "<=" 1.5
    printf '%-52s %8s\n' "reads, -b $BATCH_OPS / GET -P 16 (1 replica, no goal)" "$(ratio3 "$R_one_BREAD" "$REDIS_GET")"
    printf '%-52s %8s\n' "updates, -b $BATCH_OPS / -b 1 (1 replica, no goal)" "$(ratio3 "$R_one_BUPDATE" "$R_one_UPDATE")"
    printf '%-52s %8s\n' "updates, -b $BATCH_OPS / -b 1 (2 replicas, no goal)" "$(ratio3 "$R_two_BUPDATE" "$R_two_UPDATE")"
}

declare -A TUNED_T=() TUNED_P=() TUNED_E=()
declare -a REDIS_GET_P50S=() REDIS_SET_P50S=()
FIRST_ROWS=${ROWS_LIST%% *}
for ROWS in $ROWS_LIST; do
    run_size
done
if [[ $ROWS_LIST == *" "* ]]; then
    echo
    echo "All sizes:"
    for ROWS in $ROWS_LIST; do cat "$WORK/table-$ROWS.txt"; done
fi
