#!/usr/bin/env bash
# bench/partition.sh: issue 6's partition check with real processes and a real network cut
# (crates/skarv/tests/partition.rs, docs/membership.md "Checked with real processes"). Each data
# node runs in a network namespace of its own, on its own address, joined to a bridge by a veth
# pair; one data node is cut off by `tc qdisc ... blackhole` on both ends of its veth (packets
# dropped silently: a hang, not a close). Two layouts, one after the other (about 40 s each):
# 2 node groups × 2 replicas (the cut-off node lacks a node group: it stops by the rule) and
# 1 × 2 (a split in half: the arbitrator picks the side that goes on).
#
# It needs root (CAP_NET_ADMIN), `ip` with netns support and `tc` with the blackhole qdisc. When
# the machine does not allow it the script says "NOT RUN" and why, and exits 77 (the usual
# "skipped" status): nothing was checked. The test is #[ignore]d in `cargo test` for the same
# reason: it must not report a pass where it could not run.
#
# The test removes its namespaces, veth pairs and bridge on every exit path (a Drop guard);
# this script also removes any left by an earlier run that was killed (names carry the test
# process's pid: only those of processes that no longer exist are removed).
#
# Exit status: the test's (0: both layouts passed), 77 when it cannot run here.
# Knobs (environment): TIMEOUT_S (300, the whole cargo run, build included).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TIMEOUT_S=${TIMEOUT_S:-300}
PROBE=skarv-probe-$$

say() { printf '%s\n' "$*" >&2; }
not_run() {
    say "partition.sh: NOT RUN: $*"
    say "partition.sh: nothing was checked (the partition test needs root and network namespaces)"
    exit 77
}
cleanup() {
    ip netns del "$PROBE" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Namespaces and links of partition tests whose process is gone.
remove_stale() {
    local name pid
    for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^skarv-part-' || true); do
        pid=${name#skarv-part-}
        pid=${pid%%-*}
        if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
            say "partition.sh: removing namespace $name left by process $pid"
            ip netns del "$name" || true
        fi
    done
    for name in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^skp[bh][0-9]' || true); do
        pid=${name:5}
        pid=${pid%%n*}
        if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
            say "partition.sh: removing link $name left by process $pid"
            ip link del "$name" || true
        fi
    done
}

[[ $(id -u) == 0 ]] || not_run "not root (uid $(id -u))"
command -v ip >/dev/null || not_run "no ip command (iproute2)"
command -v tc >/dev/null || not_run "no tc command (iproute2)"
ip netns add "$PROBE" 2>/dev/null || not_run "ip netns add fails (no CAP_NET_ADMIN or no netns support)"
ip -n "$PROBE" link add skarv-pa type veth peer name skarv-pb 2>/dev/null || not_run "cannot make a veth pair"
tc -n "$PROBE" qdisc add dev skarv-pa root blackhole 2>/dev/null || not_run "tc has no blackhole qdisc"
ip link add "skpbp$$" type bridge 2>/dev/null || not_run "cannot make a bridge"
ip link del "skpbp$$"
ip netns del "$PROBE"
remove_stale

cd "$ROOT"
timeout "$TIMEOUT_S" cargo test -p skarv --test partition -- --ignored --test-threads=1 --nocapture
