//! A data node whose disk is full from its first start (issue 25, item 6):
//! it cannot create its redo log, and stops *as failed* — its process
//! exits non-zero and its angel leaves it down — rather than as a stop on
//! purpose (exit 0, which it was) or in a restart loop.

mod common;

use common::*;

/// Long enough for a start, the first schema load and several restarts.
const RUN_TIME: Duration = Duration::from_secs(10);

#[test]
fn a_first_start_on_a_full_disk_stops_the_node_as_failed() {
    let placement = Placement::new(vec![vec![node(2)]], 1);
    let cluster = Cluster::wire(25, placement, |_| {}, |_| {});
    let mut sim = cluster.sim;
    cluster.disks[&node(2)].fail_writes_after(0);
    sim.run_for(RUN_TIME);
    let summary = sim.summary(node(2)).expect("node 2");
    let reason = summary.down_reason.clone().unwrap_or_default();
    assert!(!summary.up, "the node stopped: {summary:?}");
    assert_eq!(
        (summary.shutdowns, summary.failed_stops),
        (1, 1),
        "one stop, as failed, and no start again: {summary:?}"
    );
    assert!(reason.contains("no space left"), "{reason}");
}

/// Simulated time a started 2-node group gets before its disk fails.
const START_TIME: Duration = Duration::from_secs(5);

/// Issue 25, item 6: one node whose disk fills under a running cluster
/// must not stall durability for everyone. Node 2's disk is full from
/// `START_TIME` on (writes into its preallocated redo log still land):
/// its sysfile write never finishes, the
/// GCP master waits `gcp_stop_timeout` (2 s in the simulated spec), then
/// excludes node 2 — its partner, node 1, serves the node group — and
/// global checkpoints complete again on node 1.
#[test]
fn a_node_whose_disk_fails_is_excluded_and_gcps_go_on_without_it() {
    let placement = Placement::new(vec![vec![node(1), node(2)]], 1);
    let cluster = Cluster::wire(26, placement, |_| {}, |_| {});
    let mut sim = cluster.sim;
    sim.run_for(START_TIME);
    let durable = |sim: &Simulation| {
        sim.block::<Distribution>(Distribution::address(node(1)))
            .map(|d| d.durable_gci())
            .expect("node 1 runs")
    };
    let before = durable(&sim);
    assert!(before > 0, "GCIs completed before the disk failed");
    assert!(sim.summary(node(2)).expect("node 2").up, "node 2 started");
    cluster.disks[&node(2)].fill();
    // Past the timeout, the exclusion and a few GCP intervals.
    sim.run_for(Duration::from_secs(5));
    let after = durable(&sim);
    let summary = sim.summary(node(2)).expect("node 2");
    assert!(
        summary.shutdowns >= 1,
        "node 2 was excluded and stopped: {summary:?}"
    );
    assert!(
        after > before + 10,
        "GCIs complete on node 1 without node 2: {before} then {after}"
    );
    assert!(sim.summary(node(1)).expect("node 1").up, "node 1 serves");
}

/// The other half of the rule: a node that is the only one of its group
/// is never excluded (its rows would be lost to the cluster); durability
/// waits for its disk, and writes go on meanwhile.
#[test]
fn the_last_node_of_a_group_is_not_excluded_when_its_disk_fills() {
    let placement = Placement::new(vec![vec![node(1)]], 1);
    let cluster = Cluster::wire(27, placement, |_| {}, |_| {});
    let mut sim = cluster.sim;
    sim.run_for(START_TIME);
    let durable = |sim: &Simulation| {
        sim.block::<Distribution>(Distribution::address(node(1)))
            .map(|d| d.durable_gci())
            .expect("node 1 runs")
    };
    let before = durable(&sim);
    cluster.disks[&node(1)].fill();
    sim.run_for(Duration::from_secs(5));
    let summary = sim.summary(node(1)).expect("node 1");
    assert!(
        summary.up && summary.shutdowns == 0,
        "node 1 kept: {summary:?}"
    );
    assert!(
        durable(&sim) <= before + 1,
        "no GCI completes without its sysfile: {before} then {}",
        durable(&sim)
    );
    cluster.disks[&node(1)].allow_writes();
    sim.run_for(Duration::from_secs(5));
    assert!(
        durable(&sim) > before + 10,
        "GCIs complete again once there is room"
    );
}
