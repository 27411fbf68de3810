//! The whole cluster in the deterministic simulator
//! (`datanode::simulation::cluster`): every block, a transfer / upsert /
//! audit workload, faults of every kind, and the invariants (no split
//! brain, one outcome per transaction, constant bank total, equal replicas
//! at quiet points, every committed write there at the end). A fixed set of
//! seeds per fault kind over 2×2, 4×2 and 3×3 clusters; the seeds that
//! found bugs, kept; the same seed giving the same run.
//!
//! Not passing today, kept as ignored tests that name the bug: every run in
//! which the whole cluster goes down and comes back — a system restart,
//! one replica losing a node, a 4×2 split along node groups, a 4×2 broken
//! link whose view changes cascade until both sides lack a group. Nodes
//! that come back after the cluster restarted without them start as for a
//! node restart and copy from no one (the cluster-wide system restart is
//! being built on another branch). Splits and link breaks run here on the
//! shapes where they cannot take the whole cluster down.

use datanode::simulation::cluster::{
    whole_scenario, FaultKind, ScenarioOptions, WholeReport, WorkloadStats,
};

/// Shapes the passing set covers: (data nodes, replicas).
const SHAPES: [(u8, u8); 3] = [(2, 2), (4, 2), (3, 3)];

fn run(seed: u64, kinds: &[FaultKind], shape: (u8, u8), rounds: u32) -> WholeReport {
    let options = ScenarioOptions {
        rounds,
        kinds: kinds.to_vec(),
        shape: Some(shape),
        ..ScenarioOptions::default()
    };
    let (report, _) = whole_scenario(seed, &options);
    if let Err(e) = &report.result {
        let (nodes, replicas) = shape;
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        panic!(
            "seed {seed} ({nodes}x{replicas}, faults {:?}): {e}\nreplay: skarv sim --seed {seed} --rounds {rounds} \
             --nodes {nodes} --replicas {replicas} --faults {}",
            report.faults,
            names.join(",")
        );
    }
    report
}

/// `per_shape` seeds of one fault kind on each shape, one round each;
/// returns the summed workload counts.
fn kind_seeds(kind: FaultKind, first: u64, per_shape: u64, shapes: &[(u8, u8)]) -> WorkloadStats {
    let mut total = WorkloadStats::default();
    for (i, &shape) in shapes.iter().enumerate() {
        for seed in first + 1000 * i as u64..first + 1000 * i as u64 + per_shape {
            let r = run(seed, &[kind], shape, 1);
            assert_eq!(r.kinds, vec![kind]);
            assert!(
                r.replica_checks >= 1,
                "seed {seed}: no quiet point was checked"
            );
            // Audits lock every account and deadlock with transfers now and
            // then (the lock-wait timeout ends it): a seed may see none
            // complete, so audits count over the kind, commits per seed.
            assert!(
                r.stats.committed > 0,
                "seed {seed}: the workload did not run: {:?}",
                r.stats
            );
            total.committed += r.stats.committed;
            total.aborted += r.stats.aborted;
            total.unknown += r.stats.unknown;
            total.retried += r.stats.retried;
            total.audits += r.stats.audits;
            total.gave_up += r.stats.gave_up;
            total.epoch_checks += r.stats.epoch_checks;
        }
    }
    assert!(total.audits > 0, "{kind:?}: no audit completed: {total:?}");
    assert!(
        total.epoch_checks >= total.committed,
        "{kind:?}: every answered commit's epoch order checked: {total:?}"
    );
    total
}

const SEEDS_PER_SHAPE: u64 = 6;

#[test]
fn node_crashes_and_restarts() {
    let stats = kind_seeds(FaultKind::NodeCrash, 1, SEEDS_PER_SHAPE, &SHAPES);
    // Crashes hit transactions in flight: some were refused and retried.
    assert!(stats.aborted > 0 && stats.retried > 0, "{stats:?}");
}

#[test]
fn a_node_isolated_then_healed() {
    kind_seeds(FaultKind::Isolate, 101, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn splits_with_and_without_the_arbitrator() {
    kind_seeds(FaultKind::Split, 201, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn latency_spikes_reorder_across_links() {
    kind_seeds(FaultKind::LatencySpikes, 301, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn connections_break_and_reconnect() {
    kind_seeds(FaultKind::LinkBreaks, 401, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn every_node_crashes_and_the_cluster_restarts() {
    kind_seeds(FaultKind::SystemRestart, 801, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn disk_writes_fail_and_the_node_stops() {
    kind_seeds(FaultKind::DiskWriteFailure, 501, SEEDS_PER_SHAPE, &SHAPES);
}

#[test]
fn paused_nodes_are_declared_dead_and_do_not_go_on() {
    let stats = kind_seeds(FaultKind::Pause, 601, SEEDS_PER_SHAPE, &SHAPES);
    // Long pauses outlast the client's patience somewhere.
    assert!(stats.aborted > 0, "{stats:?}");
}

/// Every kind, mixed, three rounds a seed.
#[test]
fn mixed_faults() {
    let kinds: Vec<FaultKind> = FaultKind::ALL.into_iter().collect();
    let mut unknown = 0;
    for seed in 701..713u64 {
        unknown += run(seed, &kinds, SHAPES[seed as usize % SHAPES.len()], 3)
            .stats
            .unknown;
    }
    // Some commits lost their TC: unknown outcomes, resolved by reading.
    assert!(unknown > 0, "no outcome was unknown");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let options = ScenarioOptions {
        rounds: 2,
        ..ScenarioOptions::default()
    };
    let (a, _) = whole_scenario(3, &options);
    let (b, _) = whole_scenario(3, &options);
    let (c, _) = whole_scenario(4, &options);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!((a.steps, &a.faults, a.stats), (b.steps, &b.faults, b.stats));
    assert_ne!(a.trace_hash, c.trace_hash);
}

// ---- seeds that found bugs ----

/// A broken link between two of three members let the lone president win a
/// tie at the arbitrator while the other two went on (membership: judge
/// against the views since the last confirmed one).
#[test]
fn seed_22_split_brain_after_a_broken_link() {
    let kinds: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| *k != FaultKind::SystemRestart)
        .collect();
    let r = run(22, &kinds, (3, 3), 2);
    assert!(
        r.faults.iter().any(|f| f.contains("break links")),
        "{:?}",
        r.faults
    );
}

/// A request on a transaction a node failure was still aborting was
/// refused with 9001 (a bad request) instead of the temporary 286.
#[test]
fn seed_29_a_request_during_a_node_failure_abort_is_temporary() {
    let kinds: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| *k != FaultKind::SystemRestart)
        .collect();
    run(29, &kinds, (3, 3), 2);
}

// ---- seeds of the system restart family (fixed by the cluster-wide
// system restart; docs/recovery.md "System restart") ----

/// After every data node crashed, a node that joined the restarted cluster
/// late was made to copy its fragments like a node restart, though the
/// cluster came up without its node group ("a starting node is never a
/// partition's primary" asserted).
#[test]
fn seed_9_system_restart_with_a_late_node_group() {
    run(9, &[FaultKind::SystemRestart], (4, 2), 1);
}

/// With one replica, losing a node loses its node group and the cluster
/// stops; it restarted without the node, which then started as for a node
/// restart (an assertion, or a starting node made primary).
#[test]
fn seed_40_one_replica_node_crash() {
    run(40, &[FaultKind::NodeCrash], (2, 1), 1);
}

/// A 4×2 split along node groups stops both sides (each lacks a group);
/// the cluster restarted without one group at first.
#[test]
fn seed_1413_split_along_node_groups() {
    run(1413, &[FaultKind::Split], (4, 2), 1);
}

/// One broken link between nodes of two groups (4×2): each end accuses the
/// other, the view changes cascade until both sides lack a group and every
/// node stops (a known weakness: docs/architecture.md, "The simulator");
/// the system restart then brings everything back.
#[test]
fn seed_1408_link_break_cascades_into_a_cluster_stop() {
    run(1408, &[FaultKind::LinkBreaks], (4, 2), 1);
}

/// A node restarting after a lost arbitration asked for a partial start
/// while the running president admitted it; the grant came after the
/// president's view and the node started alone, the president counting it
/// as a member (membership: a starting node that sees a running cluster's
/// view never forms its own).
#[test]
fn seed_1412_a_node_admitted_meanwhile_never_starts_alone() {
    run(1412, &[FaultKind::Split], (2, 2), 1);
}

// ---- not passing today ----

/// BUG (found by `skarv sim --soak`, 4×2, a paused node): around a view
/// change after node 3 shut down, node 5's distribution block acts as
/// master and sends `GcpSaveReq { 84 }` to node 4's LDM while node 2 still
/// runs GCPs as master and its TC still commits in GCI 84; node 4's LDM
/// then gets a commit in a GCI it already flushed and asserts. Two masters
/// with overlapping members: the master takeover of the GCP protocol must
/// not save a GCI before every TC of its members confirmed the next one.
/// Not a linear-commit bug: a parallel `LdmCommitReq` would meet the same.
#[test]
#[ignore = "two distribution masters at once after a view change: a GCI saved while another master's TC commits in it"]
fn seed_1795314160926724_two_masters_save_a_gci_still_in_use() {
    let options = ScenarioOptions {
        rounds: 3,
        ..ScenarioOptions::default()
    };
    let (report, _) = whole_scenario(1_795_314_160_926_724, &options);
    assert!(report.result.is_ok(), "{:?}", report.result);
}
