//! System restart in the deterministic simulator (docs/recovery.md, "System
//! restart"): 2 node groups × 2 replicas under a stream of writes; every
//! data node crashes at once at a random moment, each disk losing or tearing
//! what was not synced; all start again. Checks: the cluster comes back at
//! one restart GCI R; every key holds exactly the value of its last commit
//! with a GCI ≤ R (or of a write whose answer the crash swallowed), on every
//! replica; no commit above R is seen; every GCI a client was told durable
//! (`TcWaitGciConf`) is ≤ R. And a system restart with a node missing: it
//! goes on when each node group has a node that holds R, and waits, naming
//! the node group, when one does not; and one where both nodes of a group
//! lost their redo: it refuses, naming the node group.

#[path = "common/accounts.rs"]
mod accounts;
mod common;

use std::collections::BTreeSet;

use common::*;

const KEYS: i64 = 120;
/// Transactions the client keeps in flight.
const IN_FLIGHT: usize = 8;
/// Most simulated time a system restart may take until every node serves.
const RESTART_MAX: Duration = Duration::from_secs(30);

/// The client: writes to keys no other of its transactions is writing, so
/// that each key's commits are ordered by their answers.
struct Load {
    rng: Rng,
    next_value: i64,
    /// Per key, its commits in order: (GCI, value).
    history: BTreeMap<i64, Vec<(u32, i64)>>,
    /// Transactions sent and not answered: keys, value.
    in_flight: BTreeMap<u64, (Vec<i64>, i64)>,
    /// Values whose transaction was in flight at the crash (outcome unknown).
    unknown: BTreeMap<i64, Vec<i64>>,
    /// The highest GCI a `TcWaitGciConf` said durable for a commit of it.
    told_durable: u32,
    commits: usize,
}

impl Load {
    fn new(seed: u64) -> Load {
        Load {
            rng: Rng::seeded(seed),
            next_value: 1,
            history: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            unknown: BTreeMap::new(),
            told_durable: 0,
            commits: 0,
        }
    }

    fn busy(&self) -> BTreeSet<i64> {
        self.in_flight
            .values()
            .flat_map(|(k, _)| k.iter().copied())
            .collect()
    }

    /// Sends writes until `IN_FLIGHT` are in flight.
    fn top_up(&mut self, cluster: &mut Cluster) {
        let live = cluster.live_nodes();
        while self.in_flight.len() < IN_FLIGHT && !live.is_empty() {
            let busy = self.busy();
            let keys: BTreeSet<i64> = (0..1 + self.rng.next_u64() % 3)
                .map(|_| (self.rng.next_u64() % KEYS as u64) as i64)
                .filter(|k| !busy.contains(k))
                .collect();
            if keys.is_empty() {
                return;
            }
            let keys: Vec<i64> = keys.into_iter().collect();
            let value = self.next_value;
            self.next_value += 1;
            let tc = live[(self.rng.next_u64() % live.len() as u64) as usize];
            let ops = cluster.batch(OpKind::Write, &keys, value);
            let tx_id = cluster.tx_id();
            cluster.send(
                tc_of(tc),
                SignalBody::TcKeyReq {
                    tx_id,
                    flags: tc_flags::START | tc_flags::COMMIT,
                    ops,
                },
            );
            self.in_flight.insert(tx_id, (keys, value));
        }
    }

    /// Takes the answers that came.
    fn poll(&mut self, cluster: &mut Cluster) {
        let got = std::mem::take(&mut *cluster.got.lock().unwrap());
        for signal in got {
            match signal.body {
                SignalBody::TcKeyConf {
                    tx_id,
                    flags,
                    epoch,
                    incarnation,
                    ..
                } => {
                    let gci = signal::epoch::hi(epoch);
                    let Some((keys, value)) = self.in_flight.remove(&tx_id) else {
                        continue;
                    };
                    assert_eq!(flags, tc_flags::COMMITTED);
                    assert!(gci > 0);
                    for k in keys {
                        self.history.entry(k).or_default().push((gci, value));
                    }
                    self.commits += 1;
                    if self.rng.next_u64().is_multiple_of(3) {
                        let tc = signal.sender;
                        cluster.send(tc, SignalBody::TcWaitGciReq { gci, incarnation });
                    }
                }
                SignalBody::TcKeyRef { tx_id, code, .. }
                    if self.in_flight.remove(&tx_id).is_some() =>
                {
                    assert_eq!(error::class(code), ErrorClass::Temporary, "error {code}");
                }
                SignalBody::TcWaitGciConf {
                    gci, durable_gci, ..
                } if durable_gci >= gci => {
                    self.told_durable = self.told_durable.max(gci);
                }
                _ => {}
            }
        }
    }

    /// Runs the load for `duration` of simulated time.
    fn run(&mut self, cluster: &mut Cluster, duration: Duration) {
        let until = cluster.sim.now() + duration;
        while cluster.sim.now() < until {
            self.top_up(cluster);
            cluster.sim.run_for(Duration::from_millis(1));
            self.poll(cluster);
        }
    }

    /// Every data node crashes at once; the disks lose or tear what was not
    /// synced. What was in flight has an unknown outcome.
    fn crash_all(&mut self, cluster: &mut Cluster) {
        for n in cluster.data_nodes.clone() {
            cluster.sim.crash(n);
        }
        for disk in cluster.disks.values() {
            disk.crash();
        }
        for (_, (keys, value)) in std::mem::take(&mut self.in_flight) {
            for k in keys {
                self.unknown.entry(k).or_default().push(value);
            }
        }
        cluster.got.lock().unwrap().clear();
    }

    /// After a restart to `restart_gci`: the model is cut there, and a key
    /// whose lost write could have committed at or below it may hold that
    /// value instead.
    fn check(&mut self, seed: u64, restart_gci: u32, values: &[Option<i64>], from: &str) {
        assert!(
            self.told_durable <= restart_gci,
            "seed {seed}: GCI {} was told durable, the restart is to {restart_gci}",
            self.told_durable
        );
        for k in 0..KEYS {
            let history = self.history.get(&k).map_or(&[][..], Vec::as_slice);
            let expected = history
                .iter()
                .rev()
                .find(|(g, _)| *g <= restart_gci)
                .map(|&(_, v)| v);
            let above = history.iter().any(|(g, _)| *g > restart_gci);
            let got = values[k as usize];
            let lost = self.unknown.get(&k).map_or(&[][..], Vec::as_slice);
            let ok = got == expected || (!above && got.is_some_and(|v| lost.contains(&v)));
            assert!(
                ok,
                "seed {seed}: key {k} reads {got:?} from {from}, expected {expected:?} at restart GCI \
                 {restart_gci} (history {history:?}, lost {lost:?})"
            );
        }
    }

    /// The model after the restart: commits above the restart GCI are gone;
    /// a lost write found is committed, the others are not.
    fn adopt(&mut self, restart_gci: u32, values: &[Option<i64>]) {
        for (k, history) in self.history.iter_mut() {
            history.retain(|(g, _)| *g <= restart_gci);
            if let Some(got) = values[*k as usize] {
                if history.last().map(|&(_, v)| v) != Some(got) {
                    history.push((restart_gci, got));
                }
            }
        }
        for k in 0..KEYS {
            if let (Some(v), None) = (values[k as usize], self.history.get(&k)) {
                self.history.insert(k, vec![(restart_gci, v)]);
            }
        }
        self.unknown.clear();
    }
}

/// The GCIs the LDM instances of the live nodes made durable.
fn durable_gcis(cluster: &Cluster) -> BTreeSet<u32> {
    let mut gcis = BTreeSet::new();
    for n in cluster.live_nodes() {
        for i in 0..LDM_INSTANCES {
            let ldm = cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .unwrap();
            gcis.insert(ldm.storage().and_then(|s| s.durable_gci()).unwrap_or(0));
        }
    }
    gcis
}

/// Whether every listed node serves, as every live distribution block sees it.
fn all_serve(cluster: &Cluster, nodes: &[NodeId]) -> bool {
    let live = cluster.live_nodes();
    !live.is_empty()
        && live.iter().all(|&m| {
            cluster
                .sim
                .block::<Distribution>(Distribution::address(m))
                .and_then(Distribution::node_states)
                .is_some_and(|s| nodes.iter().all(|&n| s.serving.contains(n)))
        })
}

fn wait_serving(cluster: &mut Cluster, nodes: &[NodeId], seed: u64) {
    let until = cluster.sim.now() + RESTART_MAX;
    while !all_serve(cluster, nodes) {
        assert!(
            cluster.sim.now() < until,
            "seed {seed}: nodes {nodes:?} do not all serve after the restart"
        );
        cluster.sim.run_for(Duration::from_millis(10));
    }
}

/// The restart GCI the master's system restart chose.
fn restart_gci(cluster: &Cluster) -> Option<u32> {
    cluster.live_nodes().iter().find_map(|&n| {
        cluster
            .sim
            .block::<Distribution>(Distribution::address(n))
            .and_then(Distribution::restart_gci)
    })
}

/// Reads every key through a live TC, retrying temporary errors.
fn read_all(cluster: &mut Cluster, seed: u64) -> Vec<Option<i64>> {
    let keys: Vec<i64> = (0..KEYS).collect();
    for _ in 0..50 {
        let ops = cluster.batch(OpKind::Read, &keys, 0);
        let (outcome, results) = cluster.run_one(tc_flags::START | tc_flags::COMMIT, ops);
        match outcome {
            Ok(flags) => {
                assert_eq!(flags, tc_flags::COMMITTED);
                let reader = ResultReader::new(&results).expect("a valid result batch");
                return reader
                    .iter()
                    .map(|r| match r.code {
                        0 => match r.values().nth(1).map(|v| v.to_value()) {
                            Some(Value::Int(v)) => Some(v),
                            other => panic!("seed {seed}: value {other:?}"),
                        },
                        error::NO_SUCH_ROW => None,
                        other => panic!("seed {seed}: read answered {other}"),
                    })
                    .collect();
            }
            Err(code) => {
                assert_eq!(
                    error::class(code),
                    ErrorClass::Temporary,
                    "seed {seed}: read error {code}"
                );
                cluster.sim.run_for(Duration::from_millis(50));
            }
        }
    }
    panic!("seed {seed}: reads refused 50 times");
}

/// Crashes `nodes` one after the other (never a tie) and reads every key
/// from the replicas left.
fn read_from_the_others(cluster: &mut Cluster, nodes: &[NodeId], seed: u64) -> Vec<Option<i64>> {
    for &n in nodes {
        cluster.sim.crash(n);
        cluster.sim.run_for(Duration::from_secs(2));
    }
    read_all(cluster, seed)
}

fn crash_everything_and_restart(seed: u64) -> usize {
    let mut cluster = Cluster::start(seed, 4, 2);
    let mut load = Load::new(seed);
    let nodes = cluster.data_nodes.clone();
    for cycle in 0..2 {
        let run = Duration::from_millis(150 + load.rng.next_u64() % 900);
        load.run(&mut cluster, run);
        if cycle == 1 {
            // The moment that matters most: some LDM flushed a GCI that
            // another has not (so the cluster did not complete it).
            let until = cluster.sim.now() + Duration::from_secs(2);
            while durable_gcis(&cluster).len() < 2 {
                assert!(
                    cluster.sim.now() < until,
                    "seed {seed}: the LDMs never differ"
                );
                load.top_up(&mut cluster);
                cluster.sim.step();
                load.poll(&mut cluster);
            }
        }
        let before = load.commits;
        load.crash_all(&mut cluster);
        for &n in &nodes {
            cluster.sim.restart(n);
        }
        wait_serving(&mut cluster, &nodes, seed);
        let gci = restart_gci(&cluster).unwrap_or_else(|| panic!("seed {seed}: no system restart"));
        let values = read_all(&mut cluster, seed);
        load.check(seed, gci, &values, "the primaries");
        load.adopt(gci, &values);
        assert!(
            before > 20,
            "seed {seed} cycle {cycle}: {before} commits before the crash"
        );
        // Every node kept the restart GCI's successors (the GCPs go on).
        load.run(&mut cluster, Duration::from_millis(200));
        for &n in &nodes {
            let kept = cluster
                .sim
                .block::<Distribution>(Distribution::address(n))
                .unwrap()
                .kept();
            assert!(
                kept.gci > gci,
                "seed {seed}: node {n} keeps GCI {} after {gci}",
                kept.gci
            );
        }
    }
    // The other replica of every partition: one node of each group crashes.
    load.run(&mut cluster, Duration::from_millis(200));
    while !load.in_flight.is_empty() {
        cluster.sim.run_for(Duration::from_millis(1));
        load.poll(&mut cluster);
    }
    let victims = if seed.is_multiple_of(2) {
        [nodes[0], nodes[2]]
    } else {
        [nodes[1], nodes[3]]
    };
    let values = read_from_the_others(&mut cluster, &victims, seed);
    load.check(seed, u32::MAX, &values, "the other replicas");
    load.commits
}

#[test]
fn every_node_crashes_at_once_and_the_cluster_comes_back_at_one_complete_gci() {
    let mut commits = 0;
    for seed in 1..=4 {
        commits += crash_everything_and_restart(seed);
    }
    assert!(commits > 400, "commits: {commits}");
}

#[test]
fn a_system_restart_without_a_node_goes_on_only_if_every_node_group_holds_the_gci() {
    let seed = 11;
    let mut cluster = Cluster::start(seed, 4, 2);
    let mut load = Load::new(seed);
    let nodes = cluster.data_nodes.clone();
    let (n2, n3, n4, n5) = (nodes[0], nodes[1], nodes[2], nodes[3]);
    load.run(&mut cluster, Duration::from_millis(400));
    // Node 5 crashes and restarts; while it copies (starting, not serving)
    // the whole cluster crashes.
    cluster.sim.crash(n5);
    load.run(&mut cluster, Duration::from_secs(2));
    cluster.sim.restart(n5);
    let until = cluster.sim.now() + Duration::from_secs(5);
    let copying = loop {
        load.run(&mut cluster, Duration::from_millis(1));
        let kept = cluster
            .sim
            .block::<Distribution>(Distribution::address(n5))
            .map(Distribution::kept);
        if kept.is_some_and(|k| k.gci > 0 && !k.serving.contains(n5)) {
            break true;
        }
        if cluster.sim.now() > until {
            break false;
        }
    };
    assert!(copying, "node {n5} kept a GCI while not serving");
    load.crash_all(&mut cluster);
    // Without node 4, node group 1 has only node 5, which was not serving.
    for n in [n2, n3, n5] {
        cluster.sim.restart(n);
    }
    cluster.sim.run_for(Duration::from_secs(10));
    let refusal = cluster
        .live_nodes()
        .iter()
        .find_map(|&n| {
            cluster
                .sim
                .block::<Distribution>(Distribution::address(n))
                .and_then(|d| d.restart_refusal().map(str::to_string))
        })
        .expect("the master refuses to start without node group 1");
    assert!(
        refusal.contains("node group 1 (nodes 4, 5) has no node present that holds GCI"),
        "{refusal}"
    );
    assert_eq!(restart_gci(&cluster), None);
    // Node 4 comes: it restores, node 5 copies.
    cluster.sim.restart(n4);
    wait_serving(&mut cluster, &nodes, seed);
    let gci = restart_gci(&cluster).expect("restarted");
    let values = read_all(&mut cluster, seed);
    load.check(seed, gci, &values, "the primaries");
    load.adopt(gci, &values);
    // A node missing, but every node group holds the GCI: it goes on.
    load.run(&mut cluster, Duration::from_millis(500));
    load.crash_all(&mut cluster);
    for n in [n2, n3, n4] {
        cluster.sim.restart(n);
    }
    wait_serving(&mut cluster, &[n2, n3, n4], seed);
    let gci = restart_gci(&cluster).expect("restarted without node 5");
    let values = read_all(&mut cluster, seed);
    load.check(seed, gci, &values, "nodes 2, 3, 4");
    load.adopt(gci, &values);
    // Node 5 joins the running cluster and copies.
    cluster.sim.restart(n5);
    wait_serving(&mut cluster, &nodes, seed);
    let values = read_from_the_others(&mut cluster, &[n4], seed);
    load.check(seed, gci, &values, "node 5 (copied)");
}

#[test]
fn a_node_group_whose_nodes_lost_the_restart_gci_refuses_to_start() {
    let seed = 21;
    let mut cluster = Cluster::start(seed, 4, 2);
    let mut load = Load::new(seed);
    load.run(&mut cluster, Duration::from_millis(600));
    load.crash_all(&mut cluster);
    // Both nodes of group 1 lose their redo logs' contents (the first file
    // cut to its header): neither holds the restart GCI any more.
    for n in [cluster.data_nodes[2], cluster.data_nodes[3]] {
        let disk = &cluster.disks[&n];
        for i in 0..LDM_INSTANCES {
            let redo = LdmConfig::new(i, format!("/data/ndb_{n}_fs/ldm{i}")).redo_config();
            disk.truncate(&redo.file_path(0), 4096).unwrap();
        }
    }
    for n in cluster.data_nodes.clone() {
        cluster.sim.restart(n);
    }
    cluster.sim.run_for(Duration::from_secs(15));
    assert_eq!(
        restart_gci(&cluster),
        None,
        "seed {seed}: the cluster must not start"
    );
    let refusal = [cluster.data_nodes[0], cluster.data_nodes[1]]
        .iter()
        .find_map(|&n| {
            cluster
                .sim
                .block::<Distribution>(Distribution::address(n))
                .and_then(|d| d.restart_refusal().map(str::to_string))
        })
        .expect("the master says why it does not start");
    assert!(
        refusal.contains("no node of node group 1 (nodes 4, 5) could restore it"),
        "{refusal}"
    );
}
