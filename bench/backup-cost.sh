#!/usr/bin/env bash
# bench/backup-cost.sh: what an online backup costs primary-key updates, and how long it
# takes (issue 23: "bounded impact on foreground throughput"), in one run on this machine.
#
#   bench/backup-cost.sh
#
# A sandbox of DATA_NODES (2) data nodes (no SQL node), ROWS rows (200,000) inserted by `skarv bench
# flex` (25 columns), then: an unpaced backup of the idle cluster (`--rate-rows 0`); flex
# updates for RUN_SECONDS (8) alone; the same with a backup at the default rate started a
# second in. Prints the seconds each backup took, its last line (rows, log records,
# bytes), and updates/s of both arms with their ratio. Then the backup taken under load is
# restored (--restore-meta) into a fresh 1 data node x 1 replica sandbox and every row is
# read back with `flex --ops read --verify`, which fails on a row missing or torn (its
# attributes of more than one update generation: not one commit's state). SKARV
# (target/release/skarv) is the binary; BASE_PORT (28400) the source sandbox's, the target
# takes BASE_PORT + 100.
set -euo pipefail
SKARV=${SKARV:-$(pwd)/target/release/skarv}
DATA_NODES=${DATA_NODES:-2}
ROWS=${ROWS:-200000}
RUN_SECONDS=${RUN_SECONDS:-8}
BASE_PORT=${BASE_PORT:-28400}
work=$(mktemp -d /tmp/skarv-backup-cost.XXXXXX)
stop() { (cd /tmp && "$SKARV" sandbox --stop --dir "$1" >/dev/null 2>&1) || true; }
trap 'stop "$work/sb"; stop "$work/target"' EXIT
(cd /tmp && "$SKARV" sandbox --dir "$work/sb" --data-nodes "$DATA_NODES" --sql-nodes 0 \
    --base-port "$BASE_PORT" \
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
target_port=$((BASE_PORT + 100))
(cd /tmp && "$SKARV" sandbox --dir "$work/target" --data-nodes 1 --replicas 1 --sql-nodes 0 \
    --base-port "$target_port" --detach >"$work/target.log" 2>&1)
latest=$(ls -d "$work"/backups/BACKUP-* | sort -t- -k2 -n | tail -1)
echo "restore into 1 x 1: $(seconds "$SKARV" restore --connect "127.0.0.1:$target_port" \
    --backup "$latest" --restore-meta)"
"$SKARV" bench flex --connect "127.0.0.1:$target_port" -t 2 -p 64 -o $((ROWS / 2)) \
    --ops read --verify | awk '/^read/ {print "verified read of the restored rows: " $0}'
rm -rf "$work/backups"
