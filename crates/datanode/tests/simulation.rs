//! Membership in the deterministic simulator: start, crash, hang, restart,
//! stop orders and API heartbeats, each ending in the agreement check; and
//! the same seed giving the same run.

use std::time::Duration;

use datanode::membership::Phase;
use datanode::simulation::{random_scenario, ClusterSim, ClusterSpec, SIM_API};
use signal::NodeId;

fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

fn started_cluster(seed: u64, data_nodes: u8) -> ClusterSim {
    let mut cluster = ClusterSim::new(
        seed,
        ClusterSpec {
            data_nodes,
            ..ClusterSpec::default()
        },
    );
    cluster.sim.run_for(Duration::from_secs(2));
    cluster.check_agreement().unwrap();
    assert_eq!(cluster.started().len(), data_nodes as usize);
    cluster
}

#[test]
fn all_nodes_start_with_the_lowest_id_as_president() {
    let cluster = started_cluster(1, 4);
    let view = cluster.membership(node(2)).unwrap().view().unwrap().clone();
    assert_eq!(view.president, node(2));
    assert_eq!(view.members.len(), 4);
    let log = cluster.management.lock().unwrap();
    for n in 2..=5 {
        assert_eq!(
            log.last_state.get(&node(n)),
            Some(&signal::NodeState::Started)
        );
    }
}

#[test]
fn a_crashed_node_is_detected_by_every_other_node() {
    for victim in [2u8, 4] {
        let mut cluster = started_cluster(7, 4);
        cluster.sim.crash(node(victim));
        // The connection closes: no need to wait for heartbeats.
        cluster.sim.run_for(Duration::from_millis(50));
        cluster.check_agreement().unwrap();
        for survivor in cluster.started() {
            let view = cluster.membership(survivor).unwrap().view().unwrap();
            assert!(
                !view.contains(node(victim)),
                "node {survivor} still lists {victim}"
            );
        }
        let log = cluster.management.lock().unwrap();
        assert!(
            log.events
                .iter()
                .any(|(_, _, _, text)| text.contains(&format!("node {victim} declared failed"))),
            "cluster log: {:?}",
            log.events
        );
    }
}

#[test]
fn a_hung_node_is_detected_by_missed_heartbeats_and_rejoins_after() {
    let mut cluster = started_cluster(11, 3);
    cluster.sim.isolate(node(3));
    // Not yet: fewer heartbeats missed than the limit.
    cluster.sim.run_for(cluster.spec.heartbeat_interval * 2);
    assert!(cluster
        .membership(node(2))
        .unwrap()
        .view()
        .unwrap()
        .contains(node(3)));
    cluster.sim.run_for(cluster.detection_time());
    let view = cluster.membership(node(2)).unwrap().view().unwrap().clone();
    assert_eq!(view.members, vec![node(2), node(4)]);
    assert_eq!(cluster.membership(node(4)).unwrap().view().unwrap(), &view);
    // The hung node wakes up: it learns it was excluded, restarts, rejoins.
    cluster.sim.heal();
    cluster.sim.run_for(cluster.rejoin_time() * 2);
    cluster.check_agreement().unwrap();
    assert_eq!(cluster.started().len(), 3);
    assert!(cluster.sim.summary(node(3)).unwrap().shutdowns >= 1);
}

#[test]
fn the_president_fails_and_the_oldest_survivor_takes_over() {
    let mut cluster = started_cluster(3, 3);
    let before = cluster.membership(node(2)).unwrap().view().unwrap().clone();
    assert_eq!(before.president, node(2));
    let successor = before.members[1];
    cluster.sim.crash(node(2));
    cluster.sim.run_for(Duration::from_millis(50));
    cluster.check_agreement().unwrap();
    assert_eq!(
        cluster
            .membership(successor)
            .unwrap()
            .view()
            .unwrap()
            .president,
        successor
    );
    cluster.sim.restart(node(2));
    cluster.sim.run_for(cluster.rejoin_time());
    cluster.check_agreement().unwrap();
    let view = cluster.membership(node(2)).unwrap().view().unwrap().clone();
    assert_eq!(
        view.members[..2],
        before.members[1..],
        "survivors keep their order"
    );
    assert_eq!(view.members[2], node(2), "the restarted node joins last");
}

#[test]
fn a_fast_restart_replaces_the_old_incarnation() {
    let mut cluster = started_cluster(5, 3);
    // Down and up again before anyone saw the connection close.
    cluster.sim.crash(node(4));
    cluster.sim.restart(node(4));
    cluster.sim.run_for(cluster.rejoin_time());
    cluster.check_agreement().unwrap();
    assert_eq!(cluster.started().len(), 3);
}

#[test]
fn stop_and_restart_orders() {
    let mut cluster = started_cluster(9, 3);
    cluster.order_stop(node(3), false);
    cluster.sim.run_for(Duration::from_millis(200));
    assert!(!cluster.sim.is_up(node(3)));
    cluster.check_agreement().unwrap();
    // A stopped node stays down: no angel restart.
    cluster.sim.run_for(Duration::from_secs(3));
    assert!(!cluster.sim.is_up(node(3)));

    cluster.order_stop(node(2), true);
    cluster.sim.run_for(Duration::from_millis(100));
    assert_eq!(
        cluster.membership(node(4)).unwrap().view().unwrap().members,
        vec![node(4)]
    );
    cluster.sim.run_for(cluster.rejoin_time());
    cluster.check_agreement().unwrap();
    assert_eq!(cluster.started(), vec![node(2), node(4)]);
    assert_eq!(cluster.membership(node(2)).unwrap().phase(), Phase::Started);
}

#[test]
fn api_nodes_register_and_are_dropped_when_their_heartbeats_stop() {
    let mut cluster = started_cluster(13, 2);
    cluster.sim.run_for(Duration::from_secs(1));
    assert!(*cluster.api_confs.lock().unwrap() > 0);
    assert_eq!(
        cluster.membership(node(2)).unwrap().api_nodes(),
        vec![SIM_API]
    );
    cluster.sim.isolate(SIM_API);
    cluster.sim.run_for(cluster.spec.api_heartbeat_interval * 6);
    for n in [2, 3] {
        assert!(cluster.membership(node(n)).unwrap().api_nodes().is_empty());
    }
    let log = cluster.management.lock().unwrap();
    assert!(log
        .events
        .iter()
        .any(|(_, _, _, text)| text.contains("missed its heartbeats")));
}

#[test]
fn a_partial_start_waits_for_start_partial_timeout_and_needs_half_the_nodes() {
    let mut cluster = ClusterSim::new(17, ClusterSpec::default());
    cluster.sim.crash(node(4));
    cluster.sim.run_for(cluster.spec.start_partial_timeout / 2);
    assert_eq!(
        cluster.membership(node(2)).unwrap().phase(),
        Phase::Starting
    );
    cluster.sim.run_for(cluster.spec.start_partial_timeout);
    assert_eq!(cluster.started(), vec![node(2), node(3)]);
    cluster.sim.restart(node(4));
    cluster.sim.run_for(cluster.rejoin_time());
    cluster.check_agreement().unwrap();

    // One node of three never forms a cluster of its own.
    let mut cluster = ClusterSim::new(18, ClusterSpec::default());
    cluster.sim.crash(node(3));
    cluster.sim.crash(node(4));
    cluster.sim.run_for(cluster.spec.start_partial_timeout * 3);
    assert_eq!(
        cluster.membership(node(2)).unwrap().phase(),
        Phase::Starting
    );
    cluster.sim.restart(node(3));
    cluster.sim.run_for(cluster.spec.start_partial_timeout * 2);
    assert_eq!(cluster.started(), vec![node(2), node(3)]);
}

#[test]
fn the_same_seed_gives_the_same_run_step_for_step() {
    let (a, trace_a) = random_scenario(42, 4, u64::MAX, true);
    let (b, trace_b) = random_scenario(42, 4, u64::MAX, true);
    let (c, _) = random_scenario(43, 4, u64::MAX, true);
    assert!(a.result.is_ok(), "{a:?}");
    assert!(trace_a.len() > 1000);
    assert_eq!(trace_a, trace_b);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_ne!(a.trace_hash, c.trace_hash);
}

/// A fixed set of seeds with every fault kind; a failing seed replays with
/// `skarv sim --seed N`.
#[test]
fn random_faults_over_many_seeds() {
    let mut failures = Vec::new();
    for seed in 0..60 {
        let (report, _) = random_scenario(seed, 6, 5_000_000, false);
        if let Err(e) = report.result {
            failures.push(format!("seed {seed}: {e}\n  faults: {:?}", report.faults));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
