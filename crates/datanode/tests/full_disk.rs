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
