//! Whole clusters in the deterministic simulator: the real data node blocks,
//! a recording stand-in for the management server (which arbitrates with the
//! real mgmd's [`mgmd::Arbitrator`]), and an API node that registers and
//! heartbeats. Scenarios drive faults (crash, restart, partition, split,
//! lost signals) and end with checks of the invariants; the one against split
//! brain (never two started sides with disjoint views) holds at every moment.
//!
//! This module is the membership-only scenario (`skarv sim --scenario
//! membership`); [`cluster`] is the whole-cluster one (every block, data,
//! disks, a workload, every fault kind), the default of `skarv sim`.
//!
//! Used by the tests and by `skarv sim --seed N`, which replays one run.

pub mod cluster;
pub mod subscriber;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kernel::runtime::BlockPlacement;
use kernel::simulator::{NetworkSettings, Simulation};
use kernel::{Block, Context, Instant, Rng};
use mgmd::{ArbitDecision, Arbitrator};
use signal::{
    BlockNumber, BlockRef, NodeBitmask, NodeId, NodeState, Severity, Signal, SignalBody, VERSION,
};
use storage::disk::SimDisk;

use crate::membership::{Membership, MembershipConfig, Phase, HEARTBEAT_MISSES_MAX};
use crate::wiring::{self, NodeSpec};

/// Adds data node `spec.node` to `sim`. Each incarnation is wired by
/// [`wiring::data_node_blocks`] from `spec` on `disk`, with a start id of
/// its own drawn from `seed` (so the same seed gives the same cluster),
/// and then handed to `adapt`, where a test may replace blocks
/// ([`wiring::replace_block`]).
///
/// # Panics
/// When an incarnation cannot be wired: its schema or sysfile on `disk`
/// does not read.
pub fn add_data_node(
    sim: &mut Simulation,
    seed: u64,
    mut spec: NodeSpec,
    disk: SimDisk,
    mut adapt: impl FnMut(&mut Vec<BlockPlacement>) + 'static,
) {
    let id = spec.node;
    let mut start_ids = Rng::seeded(seed ^ u64::from(id.get()));
    sim.add_node(
        id,
        Box::new(move |node, incarnation| {
            assert_eq!(node, spec.node);
            spec.start_id = start_ids.next_u64() ^ u64::from(incarnation);
            let mut blocks = wiring::data_node_blocks(&spec, disk.clone())
                .unwrap_or_else(|e| panic!("data node {node}: {e}"));
            adapt(&mut blocks);
            wiring::for_simulation(blocks)
        }),
    );
}

/// Simulated time between two checks of the split-brain invariant.
pub const SPLIT_BRAIN_CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// The liveness bound of the membership scenario: once a round's faults
/// stop, every data node must be up, started and in one view within this
/// long. The slowest recovery without a bug, with `ClusterSpec`'s default
/// timings (see [`ClusterSim::recovery_time`]): failure detection (3.1 s),
/// a tied side waiting for the arbitrator (1.5 s) before it shuts down,
/// the angel's restart and the rejoin (1.8 s), and a cluster that lost
/// every node waiting StartPartialTimeout (3 s) — about 9.5 s. Twice that,
/// because one recovery may be cut short and begin again: a restarted
/// node's first request only removes its old incarnation, and a node
/// that restarted early finds the others still removing it. Anything
/// longer is a cluster stuck for good (issue 25's seed 1795870277594936
/// refused every rejoin for 30 s).
pub const LIVENESS_MAX: Duration = Duration::from_secs(20);
/// How often the liveness wait restarts data nodes that are down, as an
/// angel would (the simulator's angel only restarts nodes that asked).
const LIVENESS_RESTART_INTERVAL: Duration = Duration::from_secs(1);

/// The management server's node id in simulated clusters.
pub const SIM_MGMD: NodeId = match NodeId::new(1) {
    Some(id) => id,
    None => unreachable!(),
};
/// The API node's id in simulated clusters.
pub const SIM_API: NodeId = match NodeId::new(200) {
    Some(id) => id,
    None => unreachable!(),
};

/// One arbitration request the stand-in management server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArbitrationRecord {
    pub at: Instant,
    pub asker: NodeId,
    pub view_id: u32,
    pub members: NodeBitmask,
    pub granted: bool,
}

/// What the stand-in management server heard.
#[derive(Default, Debug)]
pub struct ManagementLog {
    pub events: Vec<(Instant, NodeId, Severity, String)>,
    pub last_state: std::collections::BTreeMap<NodeId, NodeState>,
    pub arbitrations: Vec<ArbitrationRecord>,
}

/// Records status reports and cluster-log events, like the mgmd would, and
/// arbitrates with the mgmd's own [`Arbitrator`] (its state is lost when
/// the stand-in crashes, as a real mgmd's is).
pub(crate) struct RecordingManagement {
    pub(crate) log: Arc<Mutex<ManagementLog>>,
    pub(crate) arbitrator: Arbitrator,
}

impl Block for RecordingManagement {
    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let mut log = self.log.lock().expect("management log lock");
        match signal.body {
            SignalBody::MgmNodeStatusRep {
                state,
                view_id,
                president,
                members,
                ..
            } => {
                log.last_state.insert(signal.sender.node, state);
                self.arbitrator
                    .view_report(signal.sender.node, view_id, president, &members);
            }
            SignalBody::ArbitReq { view_id, members } => {
                let asker = signal.sender.node;
                let decision = self.arbitrator.request(asker, view_id, &members);
                log.arbitrations.push(ArbitrationRecord {
                    at: ctx.now(),
                    asker,
                    view_id,
                    members,
                    granted: decision == ArbitDecision::Granted,
                });
                let body = match decision {
                    ArbitDecision::Granted => SignalBody::ArbitConf { view_id },
                    ArbitDecision::Refused(message) => SignalBody::ArbitRef { view_id, message },
                };
                ctx.send(signal.sender, body);
            }
            SignalBody::MgmEventRep { severity, text, .. } => {
                log.events
                    .push((ctx.now(), signal.sender.node, severity, text));
            }
            _ => {}
        }
    }
}

/// An API node: registers with every data node and repeats it as its heartbeat.
struct SimApi {
    data_nodes: Vec<NodeId>,
    interval: Duration,
    confs: Arc<Mutex<u64>>,
    heard: Arc<Mutex<Vec<ApiHeard>>>,
}

/// An `ApiRegConf` the simulated API node got: when, from whom, and
/// whether it said the data node is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiHeard {
    pub at: Instant,
    pub from: NodeId,
    pub started: bool,
    /// The members of the sender's view.
    pub members: NodeBitmask,
}

const API_TIMER: u32 = 1;

impl Block for SimApi {
    fn start(&mut self, ctx: &mut Context<'_>) {
        ctx.set_timer(self.interval, API_TIMER);
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        match signal.body {
            SignalBody::Timeout { .. } => {
                for node in &self.data_nodes {
                    ctx.send(
                        BlockRef::new(*node, BlockNumber::MEMBERSHIP, 0),
                        SignalBody::ApiRegReq { version: VERSION },
                    );
                }
                ctx.set_timer(self.interval, API_TIMER);
            }
            SignalBody::ApiRegConf {
                started, members, ..
            } => {
                *self.confs.lock().expect("api lock") += 1;
                self.heard.lock().expect("api lock").push(ApiHeard {
                    at: ctx.now(),
                    from: signal.sender.node,
                    started,
                    members,
                });
            }
            _ => {}
        }
    }
}

/// Shape of a simulated cluster.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub data_nodes: u8,
    /// NoOfReplicas: node groups of this many data nodes, in id order.
    /// `None`: one group of every data node (only node counts decide).
    pub replicas: Option<u8>,
    /// NDB's ArbitrationTimeout.
    pub arbitration_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub api_heartbeat_interval: Duration,
    pub start_partial_timeout: Duration,
    pub with_api: bool,
    pub network: NetworkSettings,
    /// Whether a started node serves at once (there is no distribution
    /// block here to say so); false: only once its membership block gets
    /// `NodeServingRep`, which a test then sends.
    pub serving_from_start: bool,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            data_nodes: 3,
            replicas: None,
            arbitration_timeout: Duration::from_millis(1500),
            heartbeat_interval: Duration::from_millis(500),
            api_heartbeat_interval: Duration::from_millis(300),
            start_partial_timeout: Duration::from_secs(3),
            with_api: true,
            network: NetworkSettings::default(),
            serving_from_start: true,
        }
    }
}

/// A simulated cluster: `sim` plus the ids and recordings of its parts.
pub struct ClusterSim {
    pub sim: Simulation,
    pub spec: ClusterSpec,
    pub data_nodes: Vec<NodeId>,
    pub management: Arc<Mutex<ManagementLog>>,
    pub api_confs: Arc<Mutex<u64>>,
    /// Every `ApiRegConf` the API node got, in order.
    pub api_heard: Arc<Mutex<Vec<ApiHeard>>>,
}

impl ClusterSim {
    /// Data nodes get ids 2, 3, …; the mgmd is node 1, the API node 200.
    pub fn new(seed: u64, spec: ClusterSpec) -> ClusterSim {
        assert!((1..=32).contains(&spec.data_nodes));
        let mut sim = Simulation::new(seed);
        sim.network = spec.network.clone();
        let data_nodes: Vec<NodeId> = (0..spec.data_nodes)
            .map(|i| NodeId::new(2 + i).expect("nonzero"))
            .collect();
        let management = Arc::new(Mutex::new(ManagementLog::default()));
        let api_confs = Arc::new(Mutex::new(0u64));
        let api_heard = Arc::new(Mutex::new(Vec::new()));
        let node_groups: Vec<Vec<NodeId>> = match spec.replicas {
            Some(replicas) => {
                assert!(
                    replicas > 0 && spec.data_nodes.is_multiple_of(replicas),
                    "{} data nodes do not make groups of {replicas}",
                    spec.data_nodes
                );
                data_nodes
                    .chunks(usize::from(replicas))
                    .map(<[NodeId]>::to_vec)
                    .collect()
            }
            None => vec![data_nodes.clone()],
        };

        let log = Arc::clone(&management);
        sim.add_node(
            SIM_MGMD,
            Box::new(move |node, _| {
                let block: Box<dyn Block> = Box::new(RecordingManagement {
                    log: Arc::clone(&log),
                    arbitrator: Arbitrator::new(),
                });
                vec![(BlockRef::new(node, BlockNumber::MANAGEMENT, 0), block)]
            }),
        );
        for &node in &data_nodes {
            let all = data_nodes.clone();
            let groups = node_groups.clone();
            let spec_for_node = spec.clone();
            // start_id from the simulation's own randomness keeps runs reproducible.
            let mut ids = Rng::seeded(seed ^ u64::from(node.get()));
            sim.add_node(
                node,
                Box::new(move |node, incarnation| {
                    let config = MembershipConfig {
                        node,
                        data_nodes: all.clone(),
                        mgmd: Some(SIM_MGMD),
                        heartbeat_interval: spec_for_node.heartbeat_interval,
                        api_heartbeat_interval: spec_for_node.api_heartbeat_interval,
                        start_partial_timeout: spec_for_node.start_partial_timeout,
                        start_id: ids.next_u64() ^ u64::from(incarnation),
                        pid: 1000 + u32::from(node.get()),
                    };
                    let membership = Membership::new(config)
                        .with_node_groups(groups.clone())
                        .with_arbitration_timeout(spec_for_node.arbitration_timeout);
                    let membership = if spec_for_node.serving_from_start {
                        membership.serving_from_start()
                    } else {
                        membership
                    };
                    let block: Box<dyn Block> = Box::new(membership);
                    vec![(BlockRef::new(node, BlockNumber::MEMBERSHIP, 0), block)]
                }),
            );
        }
        if spec.with_api {
            let all = data_nodes.clone();
            let confs = Arc::clone(&api_confs);
            let heard = Arc::clone(&api_heard);
            let interval = spec.api_heartbeat_interval;
            sim.add_node(
                SIM_API,
                Box::new(move |node, _| {
                    let block: Box<dyn Block> = Box::new(SimApi {
                        data_nodes: all.clone(),
                        interval,
                        confs: Arc::clone(&confs),
                        heard: Arc::clone(&heard),
                    });
                    vec![(BlockRef::new(node, BlockNumber::API_CLUSTER, 0), block)]
                }),
            );
        }
        ClusterSim {
            sim,
            spec,
            data_nodes,
            management,
            api_confs,
            api_heard,
        }
    }

    pub fn membership(&self, node: NodeId) -> Option<&Membership> {
        self.sim
            .block::<Membership>(BlockRef::new(node, BlockNumber::MEMBERSHIP, 0))
    }

    /// Data nodes that are up and started.
    pub fn started(&self) -> Vec<NodeId> {
        self.data_nodes
            .iter()
            .copied()
            .filter(|n| {
                self.membership(*n)
                    .is_some_and(|m| m.phase() == Phase::Started)
            })
            .collect()
    }

    /// Longest time failure detection may take with these settings, plus slack.
    pub fn detection_time(&self) -> Duration {
        self.spec.heartbeat_interval * (HEARTBEAT_MISSES_MAX + 2) + Duration::from_millis(100)
    }

    /// Time for a restarted node to be back: angel delay, reconnect, join.
    pub fn rejoin_time(&self) -> Duration {
        kernel::simulator::ANGEL_RESTART_DELAY
            + self.spec.network.reconnect_delay * 3
            + Duration::from_millis(1000)
    }

    /// The slowest recovery after a fault stops, without a bug: detection,
    /// a tie's wait for the arbitrator, the angel's restart and rejoin, and
    /// a partial start (see [`LIVENESS_MAX`]).
    pub fn recovery_time(&self) -> Duration {
        self.detection_time()
            + self.spec.arbitration_timeout
            + self.rejoin_time()
            + self.spec.start_partial_timeout
    }

    /// Whether every data node is up and started, all in one view that
    /// lists every data node.
    pub fn live(&self) -> bool {
        let all = self.data_nodes.len();
        self.started().len() == all
            && self.data_nodes.iter().all(|n| {
                self.membership(*n)
                    .and_then(Membership::view)
                    .is_some_and(|v| v.members.len() == all)
            })
            && self.check_agreement().is_ok()
    }

    /// The liveness invariant: within [`LIVENESS_MAX`] of `faults_stopped`
    /// every data node is up, started and in one view. It passes at once
    /// when that holds now: call it once the failures had time to be
    /// noticed (`detection_time`), not the instant the faults stop.
    /// Nodes that are down are restarted each second, as their angels
    /// would. The split-brain check runs meanwhile.
    pub fn await_liveness(&mut self, faults_stopped: Instant) -> Result<(), String> {
        assert!(
            self.recovery_time() * 2 <= LIVENESS_MAX,
            "LIVENESS_MAX {LIVENESS_MAX:?} is below twice this cluster's recovery time {:?}",
            self.recovery_time()
        );
        assert!(faults_stopped <= self.sim.now(), "faults stop in the past");
        let until = faults_stopped + LIVENESS_MAX;
        let mut next_restart = self.sim.now();
        while !self.live() {
            if self.sim.now() >= until {
                return Err(format!(
                    "seed {}: liveness: the cluster is not serving {} ms after the faults stopped (LIVENESS_MAX): {}",
                    self.sim.seed(),
                    LIVENESS_MAX.as_millis(),
                    self.describe()
                ));
            }
            if self.sim.now() >= next_restart {
                for node in self.data_nodes.clone() {
                    if !self.sim.is_up(node) {
                        self.sim.restart(node);
                    }
                }
                next_restart = self.sim.now() + LIVENESS_RESTART_INTERVAL;
            }
            self.run_checked(Duration::from_millis(50))?;
        }
        Ok(())
    }

    /// A line per data node: up, and its membership's state
    /// ([`Membership::describe`]).
    pub fn describe(&self) -> String {
        describe_memberships(&self.sim, &self.data_nodes)
    }

    /// The invariant after the cluster has settled: every up data node is
    /// started, and all of them hold the same view, which lists exactly them
    /// with the oldest as president.
    pub fn check_agreement(&self) -> Result<(), String> {
        let seed = self.sim.seed();
        let up: Vec<NodeId> = self
            .data_nodes
            .iter()
            .copied()
            .filter(|n| self.sim.is_up(*n))
            .collect();
        if up.is_empty() {
            return Ok(());
        }
        let mut reference = None;
        for node in &up {
            let membership = self
                .membership(*node)
                .ok_or(format!("seed {seed}: node {node} has no membership"))?;
            if membership.phase() != Phase::Started {
                return Err(format!(
                    "seed {seed}: node {node} is up but {:?}",
                    membership.phase()
                ));
            }
            let view = membership.view().expect("started").clone();
            match &reference {
                None => reference = Some((*node, view)),
                Some((first, expected)) => {
                    if *expected != view {
                        return Err(format!(
                            "seed {seed}: node {first} has view {expected:?} but node {node} has {view:?}"
                        ));
                    }
                }
            }
        }
        let (_, view) = reference.expect("at least one node");
        let mut members = view.members.clone();
        members.sort();
        if members != up {
            return Err(format!(
                "seed {seed}: view {view:?} but the up data nodes are {up:?}"
            ));
        }
        if view.members.first() != Some(&view.president) {
            return Err(format!(
                "seed {seed}: president {} is not the oldest member in {view:?}",
                view.president
            ));
        }
        Ok(())
    }

    /// The split-brain invariant: no two started data nodes hold views that
    /// share no member (two sides of a split both going on). A side waiting
    /// for the arbitrator still holds the view from before the split.
    pub fn check_no_split_brain(&self) -> Result<(), String> {
        check_no_split_brain(&self.sim, &self.data_nodes)
    }

    /// Runs for `duration`, checking the split-brain invariant every
    /// [`SPLIT_BRAIN_CHECK_INTERVAL`]; stops at the first violation.
    pub fn run_checked(&mut self, duration: Duration) -> Result<(), String> {
        let until = self.sim.now() + duration;
        while self.sim.now() < until {
            let next = self.sim.now() + SPLIT_BRAIN_CHECK_INTERVAL;
            self.sim.run_until(if next < until { next } else { until });
            self.check_no_split_brain()?;
        }
        Ok(())
    }

    /// Cuts the network between every node of `a` and every node of `b`
    /// (the mgmd and the API node keep reaching both).
    pub fn split(&mut self, a: &[NodeId], b: &[NodeId]) {
        for x in a {
            for y in b {
                self.sim.partition(*x, *y);
            }
        }
    }

    /// Delivers a stop (or restart) order from the mgmd to `node`.
    pub fn order_stop(&mut self, node: NodeId, restart: bool) {
        self.sim.inject(Signal {
            receiver: BlockRef::new(node, BlockNumber::MEMBERSHIP, 0),
            sender: BlockRef::new(SIM_MGMD, BlockNumber::MANAGEMENT, 0),
            body: SignalBody::MgmStopOrd { restart },
        });
    }
}

/// A line per data node of `sim`: up, and its membership's state
/// ([`Membership::describe`]).
pub fn describe_memberships(sim: &Simulation, data_nodes: &[NodeId]) -> String {
    let mut out = String::new();
    for &n in data_nodes {
        let state = sim
            .block::<Membership>(BlockRef::new(n, BlockNumber::MEMBERSHIP, 0))
            .map_or("no membership block".to_owned(), Membership::describe);
        out.push_str(&format!(
            "\n  node {n}: up {} paused {}: {state}",
            sim.is_up(n),
            sim.is_paused(n)
        ));
    }
    out
}

/// The split-brain invariant over the membership blocks of `data_nodes`.
pub fn check_no_split_brain(sim: &Simulation, data_nodes: &[NodeId]) -> Result<(), String> {
    let views: Vec<(NodeId, &signal::MembershipView)> = data_nodes
        .iter()
        .filter_map(|n| {
            let membership =
                sim.block::<Membership>(BlockRef::new(*n, BlockNumber::MEMBERSHIP, 0))?;
            if membership.phase() != Phase::Started {
                return None;
            }
            Some((*n, membership.view()?))
        })
        .collect();
    for (i, (a, view_a)) in views.iter().enumerate() {
        for (b, view_b) in &views[i + 1..] {
            if !view_a.members.iter().any(|m| view_b.contains(*m)) {
                return Err(format!(
                    "seed {}: split brain at {:?}: node {a} runs view {view_a:?} and node {b} runs {view_b:?}",
                    sim.seed(),
                    sim.now()
                ));
            }
        }
    }
    Ok(())
}

/// What a random scenario did and whether its checks held.
#[derive(Debug)]
pub struct ScenarioReport {
    pub seed: u64,
    pub steps: u64,
    pub sim_time: Duration,
    pub trace_hash: u64,
    pub faults: Vec<String>,
    pub result: Result<(), String>,
}

/// A random scenario for `seed`: start a cluster of 2–5 data nodes (four
/// of them in one or two node groups), then `rounds` rounds of a random
/// fault (crash, crash and restart, partition and heal, stop order, restart
/// order, lost signals, a split into two sides, maybe with one side cut off
/// from the arbitrator), each followed by the liveness check (every data
/// node started in one view within [`LIVENESS_MAX`] of the fault's end)
/// and the agreement check; the split-brain check runs all the time. Stops early after
/// `steps_max` steps.
pub fn random_scenario(
    seed: u64,
    rounds: u32,
    steps_max: u64,
    trace: bool,
) -> (ScenarioReport, Vec<String>) {
    let mut choose = Rng::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed);
    let data_nodes = 2 + choose.below(4) as u8;
    let replicas = (data_nodes == 4 && choose.chance(1, 2)).then_some(2);
    let spec = ClusterSpec {
        data_nodes,
        replicas,
        ..ClusterSpec::default()
    };
    let mut cluster = ClusterSim::new(seed, spec);
    if trace {
        cluster.sim.enable_trace();
    }
    let mut faults = Vec::new();
    let mut result = cluster.run_checked(Duration::from_secs(2));
    if let Err(e) = cluster.check_agreement() {
        result = Err(format!("after start: {e}"));
    }
    for round in 0..rounds {
        if result.is_err() || cluster.sim.steps() >= steps_max {
            break;
        }
        match random_round(&mut cluster, &mut choose, round) {
            Ok(description) => faults.push(description),
            Err((description, e)) => {
                faults.push(description);
                result = Err(e);
                break;
            }
        }
        if let Err(e) = cluster.check_agreement() {
            result = Err(format!("after {}: {e}", faults.last().expect("pushed")));
        }
    }
    let report = ScenarioReport {
        seed,
        steps: cluster.sim.steps(),
        sim_time: Duration::from_nanos(cluster.sim.now().as_nanos()),
        trace_hash: cluster.sim.trace_hash(),
        faults,
        result,
    };
    let lines = cluster.sim.trace().to_vec();
    (report, lines)
}

/// One round of `random_scenario`: a fault and the time to settle after it.
/// `Err` carries the round's description and the split-brain violation.
fn random_round(
    cluster: &mut ClusterSim,
    choose: &mut Rng,
    round: u32,
) -> Result<String, (String, String)> {
    let nodes = cluster.data_nodes.clone();
    let victim = nodes[choose.below(nodes.len() as u64) as usize];
    let at = Duration::from_millis(choose.below(1000));
    let early = cluster.run_checked(at);
    let fault = choose.below(7);
    let mut checked = early;
    let mut run = |cluster: &mut ClusterSim, duration: Duration| {
        if checked.is_ok() {
            checked = cluster.run_checked(duration);
        }
    };
    let description = match fault {
        0 => {
            cluster.sim.crash(victim);
            let settle = cluster.detection_time();
            run(cluster, settle);
            cluster.sim.restart(victim);
            format!(
                "round {round}: crash node {victim}, restart it after {} ms",
                settle.as_millis()
            )
        }
        1 => {
            cluster.sim.crash(victim);
            run(cluster, Duration::from_millis(choose.below(50)));
            cluster.sim.restart(victim);
            format!("round {round}: crash node {victim} and restart it at once")
        }
        2 => {
            cluster.sim.isolate(victim);
            let settle = cluster.detection_time();
            run(cluster, settle);
            cluster.sim.heal();
            format!(
                "round {round}: isolate node {victim} (hung), heal after {} ms",
                settle.as_millis()
            )
        }
        3 => {
            cluster.order_stop(victim, true);
            format!("round {round}: restart order to node {victim}")
        }
        4 => {
            cluster.sim.network.drop_ppm = 20_000;
            run(cluster, Duration::from_millis(800));
            cluster.sim.network.drop_ppm = 0;
            format!("round {round}: lose 2% of signals for 800 ms")
        }
        5 => {
            // Two sides, each with at least one node; maybe one side cannot
            // reach the arbitrator either.
            let (mut a, mut b): (Vec<NodeId>, Vec<NodeId>) =
                nodes.iter().copied().partition(|_| choose.chance(1, 2));
            if a.is_empty() {
                a.push(b.pop().expect("two nodes at least"));
            } else if b.is_empty() {
                b.push(a.pop().expect("two nodes at least"));
            }
            cluster.split(&a, &b);
            let cut_off = choose.chance(1, 3);
            if cut_off {
                cluster.split(&a, &[SIM_MGMD]);
            }
            let settle = cluster.detection_time() + cluster.spec.arbitration_timeout * 2;
            run(cluster, settle);
            cluster.sim.heal();
            let a: Vec<u8> = a.iter().map(|n| n.get()).collect();
            let b: Vec<u8> = b.iter().map(|n| n.get()).collect();
            let mgmd = if cut_off {
                format!(", {a:?} cut off from the arbitrator")
            } else {
                String::new()
            };
            format!(
                "round {round}: split {a:?} | {b:?}{mgmd}, heal after {} ms",
                settle.as_millis()
            )
        }
        _ => {
            let other = nodes[choose.below(nodes.len() as u64) as usize];
            cluster.sim.crash(victim);
            cluster.sim.crash(other);
            run(cluster, Duration::from_millis(choose.below(300)));
            cluster.sim.restart(victim);
            cluster.sim.restart(other);
            format!("round {round}: crash nodes {victim} and {other}, restart both")
        }
    };
    // The faults have stopped: give everyone time to rejoin (excluded
    // nodes restart through their angels, a cluster that vanished waits
    // for StartPartialTimeout), and the cluster must serve again within
    // the liveness bound of the faults' end.
    let stopped = cluster.sim.now();
    let settle =
        cluster.detection_time() + cluster.rejoin_time() + cluster.spec.start_partial_timeout;
    run(cluster, settle);
    if checked.is_ok() {
        checked = cluster.await_liveness(stopped);
    }
    match checked {
        Ok(()) => Ok(description),
        Err(e) => Err((description.clone(), format!("during {description}: {e}"))),
    }
}
