#!/usr/bin/env bash
# bench/backup-cost.sh: what an online backup costs primary-key updates, and how long it
# takes (issue 23: "bounded impact on foreground throughput"), in one run on this machine.
#
#   bench/backup-cost.sh
#
# A sandbox of DATA_NODES (2) data nodes, ROWS rows (200,000) inserted by `skarv bench
# flex` (25 columns), then: an unpaced backup of the idle cluster (`--rate-rows 0`); flex
# updates for RUN_SECONDS (8) alone; the same with a backup at the default rate started a
# second in. Prints the seconds each backup took, its last line (rows, log records,
# bytes), and updates/s of both arms with their ratio. SKARV (target/release/skarv) is the
# binary; BASE_PORT (28400) the sandbox's.
set -euo pipefail
SKARV=${SKARV:-$(pwd)/target/release/skarv}
DATA_NODES=${DATA_NODES:-2}
ROWS=${ROWS:-200000}
RUN_SECONDS=${RUN_SECONDS:-8}
BASE_PORT=${BASE_PORT:-28400}
work=$(mktemp -d /tmp/skarv-backup-cost.XXXXXX)
trap '(cd /tmp && "$SKARV" sandbox --stop --dir "$work/sb" >/dev/null 2>&1) || true' EXIT
(cd /tmp && "$SKARV" sandbox --dir "$work/sb" --data-nodes "$DATA_NODES" --base-port "$BASE_PORT" \
    --detach >"$work/sandbox.log" 2>&1)
connect=127.0.0.1:$BASE_PORT
"$SKARV" bench flex --connect "$connect" -t 2 -p 64 -o $((ROWS / 2)) --ops insert >/dev/null
seconds() { local s e; s=$(date +%s.%N); "$@" >"$work/out" 2>&1 || true; e=$(date +%s.%N);
    echo "$(echo "$e - $s" | bc) s: $(tail -1 "$work/out")"; }
echo "idle backup, --rate-rows 0: $(seconds "$SKARV" admin --connect "$connect" backup --wait \
    --dir "$work/backups" --rate-rows 0)"
updates() { "$SKARV" bench flex --connect "$connect" -t 2 -p 64 -o $((ROWS / 2)) --ops update \
    --duration "$RUN_SECONDS" | awk '/^update/ {print $2}'; }
alone=$(updates)
( sleep 1; echo "backup under load, default rate: $(seconds "$SKARV" admin --connect "$connect" \
    backup --wait --dir "$work/backups")" ) &
with=$(updates)
wait
echo "updates/s alone $alone, with a backup $with, ratio $(echo "scale=3; $with / $alone" | bc)"
rm -rf "$work/backups"
