//! The deterministic simulator: the same blocks that run on threads in a data
//! node run here in one process, one signal at a time, under a scheduler
//! seeded by a single `u64`. Time is simulated (it jumps to the next event),
//! the network is simulated (latency, loss, duplication, partitions,
//! connections that break and come back), and nodes crash and restart on
//! command. Nothing here reads the real clock, real randomness or a socket,
//! so the same seed gives the same run, step for step: the trace of one run
//! equals the trace of another with the same seed, and a failing seed is a
//! complete bug report.
//!
//! Model of the network. Between every pair of up nodes there is a
//! connection, as TCP gives the real transport. A connection is *up* once both
//! ends are up, not partitioned from each other, and the (simulated)
//! reconnect delay has passed; both ends then receive `NodeConnected`. When a
//! node crashes its peers receive `NodeDisconnected` after a short delay (the
//! reset of the TCP connection). A partition does not close connections by
//! itself — signals just stop arriving — until a block asks for a
//! `Disconnect`, as a hung peer would look in reality.
//!
//! What a live connection promises is what TCP promises, and what our
//! protocols (like NDB's) rely on: signals on one connection arrive in the
//! order sent, once each, none lost — *while the connection lives*. A
//! connection may break ([`Simulation::break_link`], a crash, a
//! `Disconnect`): every signal sent on it and not yet delivered is lost, both
//! ends are told, and a *new* connection (a new epoch: nothing of the old
//! one is delivered on it) comes up after the reconnect delay. Signals on
//! different connections are not ordered with each other: latency is random
//! per signal, and [`Simulation::delay_link`] adds spikes to chosen links,
//! so a signal relayed through a third node may overtake a direct one.
//!
//! `drop_ppm` and `duplicate_ppm` break that promise on purpose: they lose
//! or duplicate single signals inside a live connection, which TCP never
//! does. They exist only to check that the heartbeat-based membership
//! protocol tolerates a lost heartbeat as it would a late one (the
//! membership scenario uses them); the whole-cluster scenario never sets
//! them, it breaks links instead.
//!
//! A node may also be *paused* ([`Simulation::pause`]): a GC pause or a hung
//! process. Its blocks stop executing; signals and timers for it wait (as
//! bytes wait in a socket buffer) and run when it resumes, unless the
//! connection they came on broke meanwhile — which its peers do when they
//! declare it dead.
//!
//! Order inside a node. The real runtime (`runtime`) keeps signals in order
//! only per (sender thread, receiver thread) pair: one SPSC queue per pair
//! of execution threads, a local FIFO for a thread's signals to itself, and
//! one queue per receiving thread from each feeder (the transport's
//! receive thread), while a thread drains its queues in a rotating order.
//! By default the simulator is stronger than that: every signal of a node
//! goes through one global FIFO, so interleavings such as
//! distribution→LDM overtaken by TC→LDM never happen. With
//! [`Simulation::set_reorder`] it models exactly the runtime's guarantee,
//! for the *weakest* layout a `ThreadConfig` allows (code that is right
//! only for some layouts is wrong): each block instance is a thread of its
//! own (LDM and TC instances each get one with `ldm`/`tc` threads), except
//! the blocks declared with [`Simulation::share_thread`], which every
//! layout runs on one thread (a data node's membership, dictionary and
//! distribution are all `main`). A signal between two blocks queues on its
//! (sender thread, receiver thread) lane; a signal arriving from another
//! node, and a connection notice, queues on its (sending node, receiver
//! thread) lane (the receive thread handles a connection's bytes in order,
//! then hands them to each execution thread's queue). Each step of a node
//! with queued signals runs the head of one non-empty lane, chosen by the
//! seed; lanes drain at the same simulated instant, interleaved with the
//! other events of that instant. Timers keep their times.
//!
//! Buggify. With [`Simulation::set_buggify`] every block's [`Context`]
//! answers `buggify()` from the run's seed (FoundationDB's `BUGGIFY`):
//! rare branches — a full redo log, a request limit, a failing write — are
//! taken far more often than the machine takes them. Off by default, and
//! never on in the real runtime. A failing run reports both switches
//! ([`Simulation::adversary`]): the same seed with the same switches is the
//! same run.
//!
//! Late signals. A node that goes down loses nothing it already sent: its
//! bytes sit in its peers' sockets and its own send buffer, and a peer's
//! receive thread hands them on after the peer may already have handled
//! the failure (declared by another node, or by a timeout). By default the
//! simulator loses a signal whose connection broke while it was in flight.
//! With [`Simulation::set_late_signals`] such a signal of a node that went
//! down arrives instead, at a time the seed draws up to
//! [`LATE_SIGNAL_DELAY_MAX`] later, in its link's order, while its sender
//! is still down (a new incarnation's connection comes after the old one's
//! bytes).
//!
//! File requests ([`Context::io`]) model a node's `io` threads: each runs
//! after its own latency, drawn from [`IoSettings`] by the seed, so
//! requests complete in an order the seed chooses, and its `FsConf`
//! reaches the block at that moment. A request of a node that goes down
//! before it ran never runs (the crash came before the write or sync).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::time::Duration;

use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

use crate::block::{Block, Context, IoRequest, Output};
use crate::random::Rng;
use crate::time::Instant;

/// Upper bound on events processed by one `run_*` call, so a livelock in a
/// protocol ends a test instead of hanging it.
pub const SIMULATION_STEPS_MAX: u64 = 50_000_000;

/// Network behaviour; all probabilities are per signal, in parts per million.
#[derive(Clone, Debug)]
pub struct NetworkSettings {
    pub latency_min: Duration,
    pub latency_max: Duration,
    /// Signals on one connection arrive in the order sent (TCP). When false,
    /// random latency may reorder them.
    pub fifo: bool,
    pub drop_ppm: u32,
    pub duplicate_ppm: u32,
    /// Time from a crash to the peers seeing the connection close.
    pub disconnect_notice: Duration,
    /// Time from both ends being able to talk to the connection being up.
    pub reconnect_delay: Duration,
}

impl Default for NetworkSettings {
    fn default() -> Self {
        NetworkSettings {
            latency_min: Duration::from_micros(50),
            latency_max: Duration::from_micros(500),
            fifo: true,
            drop_ppm: 0,
            duplicate_ppm: 0,
            disconnect_notice: Duration::from_millis(1),
            reconnect_delay: Duration::from_millis(100),
        }
    }
}

/// How long file requests take (see the module documentation).
#[derive(Clone, Debug)]
pub struct IoSettings {
    pub latency_min: Duration,
    pub latency_max: Duration,
}

impl Default for IoSettings {
    fn default() -> Self {
        IoSettings {
            latency_min: Duration::from_micros(20),
            latency_max: Duration::from_millis(2),
        }
    }
}

/// Builds the blocks of one node incarnation: called at first start and at
/// every restart, with the incarnation number (0 first).
pub type NodeFactory = Box<dyn FnMut(NodeId, u32) -> Vec<(BlockRef, Box<dyn Block>)>>;

/// The latest a late signal (see the module doc) arrives after it would
/// have: past a node failure's handling, which takes a few milliseconds
/// of simulated time.
pub const LATE_SIGNAL_DELAY_MAX: Duration = Duration::from_millis(500);

/// Delay before an angel restarts a node that shut itself down with `restart`.
pub const ANGEL_RESTART_DELAY: Duration = Duration::from_millis(500);

#[derive(Debug)]
enum Event {
    Deliver {
        signal: Signal,
        /// Incarnation of the receiving node when the signal was sent; a
        /// signal for an earlier incarnation is lost with it.
        incarnation: u32,
        /// Epoch of the connection it was sent on; a signal of a connection
        /// that broke is lost with it. `None`: no connection (local, injected).
        epoch: Option<u64>,
    },
    /// A signal of a node that went down while it was in flight, arriving
    /// late (see the module doc); lost if its sender is up again.
    Late {
        signal: Signal,
        incarnation: u32,
    },
    Timer {
        block: BlockRef,
        timer_id: u32,
        incarnation: u32,
    },
    /// Bring a connection up if both ends can talk now.
    TryConnect {
        a: NodeId,
        b: NodeId,
    },
    /// Tell `at` that its connection to `peer` closed.
    DisconnectNotice {
        at: NodeId,
        peer: NodeId,
        incarnation: u32,
    },
    Restart {
        node: NodeId,
    },
    /// Run the head of one of the node's lanes (reordering on).
    RunLane {
        node: NodeId,
        incarnation: u32,
    },
    /// Run the file request kept under this number in `io_requests`.
    Io {
        node: NodeId,
        request: u64,
        incarnation: u32,
    },
}

/// A thread of the order model (reordering on): the end of a lane.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Thread {
    /// The thread that every layout runs these blocks on
    /// ([`Simulation::share_thread`]), by group.
    Shared(u16),
    /// A block instance on a thread of its own.
    Block(BlockNumber, u16),
    /// Signals and notices from another node (its connection).
    Peer(NodeId),
}

/// The switches that make a run more adversarial than the default; part of
/// what a seed needs to replay.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Adversary {
    /// Per (sender thread, receiver thread) order, the lane chosen by the seed.
    pub reorder: bool,
    /// `Context::buggify` points active.
    pub buggify: bool,
    /// A node that goes down loses no signal in flight: each arrives late
    /// (see the module doc).
    pub late_signals: bool,
}

impl std::fmt::Display for Adversary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = |b: bool| if b { "on" } else { "off" };
        write!(
            f,
            "reorder {}, buggify {}, late signals {}",
            on(self.reorder),
            on(self.buggify),
            on(self.late_signals)
        )
    }
}

struct SimNode {
    up: bool,
    incarnation: u32,
    blocks: BTreeMap<(BlockNumber, u16), Box<dyn Block>>,
    rng: Rng,
    /// Executes nothing until resumed; its events wait in `held`.
    paused: bool,
    held: Vec<Event>,
    /// The block that hears of connections opening and closing.
    notice_block: BlockNumber,
    /// Why the node last went down, for tests and traces.
    down_reason: Option<String>,
    shutdowns: u32,
    /// Shutdowns as failed (`Context::shutdown_failed`): a process would
    /// have exited non-zero and its angel left it down.
    failed_stops: u32,
    /// Signals waiting to execute, by (sender thread, receiver thread)
    /// lane (reordering on).
    lanes: BTreeMap<(Thread, Thread), VecDeque<Signal>>,
    /// A `RunLane` event for this incarnation is queued.
    lane_run_queued: bool,
}

/// What happened to a node, for checks at the end of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSummary {
    pub node: NodeId,
    pub up: bool,
    pub incarnation: u32,
    pub down_reason: Option<String>,
    pub shutdowns: u32,
    /// Of `shutdowns`, those as failed (`Context::shutdown_failed`).
    pub failed_stops: u32,
}

/// One simulated cluster.
pub struct Simulation {
    seed: u64,
    now: Instant,
    rng: Rng,
    sequence: u64,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    events: BTreeMap<u64, Event>,
    nodes: BTreeMap<NodeId, SimNode>,
    factories: BTreeMap<NodeId, NodeFactory>,
    /// Connections that are up, as (smaller id, larger id), with their epoch.
    connections: BTreeMap<(NodeId, NodeId), u64>,
    next_epoch: u64,
    /// Extra latency per directed link (spikes).
    link_delay: BTreeMap<(NodeId, NodeId), Duration>,
    /// Extra latency of the signals a block sends inside its own node (a
    /// busy thread), by (node, sending block).
    local_delay: BTreeMap<(NodeId, BlockNumber), Duration>,
    /// Pairs that cannot reach each other.
    partitions: BTreeSet<(NodeId, NodeId)>,
    /// Last delivery time per directed link, to keep links FIFO.
    link_clock: BTreeMap<(NodeId, NodeId), Instant>,
    /// Last late delivery per directed link, to keep late signals in order.
    late_clock: BTreeMap<(NodeId, NodeId), Instant>,
    /// Signals delivered late so far, by name.
    late_delivered: BTreeMap<&'static str, u64>,
    pub network: NetworkSettings,
    pub io: IoSettings,
    /// File requests not yet run, by the sequence number of their event.
    io_requests: BTreeMap<u64, IoRequest>,
    outbox: Vec<Output>,
    trace: Vec<String>,
    trace_enabled: bool,
    trace_hash: u64,
    steps: u64,
    adversary: Adversary,
    /// Blocks every layout runs on one thread, with their group.
    shared_threads: BTreeMap<BlockNumber, u16>,
    /// Salt of the buggify points when buggify is on.
    buggify_salt: Option<u64>,
    /// How often each buggify point fired, by "file:line".
    buggify_fired: BTreeMap<String, u64>,
}

fn pair(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Simulation {
    pub fn new(seed: u64) -> Simulation {
        Simulation {
            seed,
            now: Instant::ZERO,
            rng: Rng::seeded(seed),
            sequence: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            nodes: BTreeMap::new(),
            factories: BTreeMap::new(),
            connections: BTreeMap::new(),
            next_epoch: 1,
            link_delay: BTreeMap::new(),
            local_delay: BTreeMap::new(),
            partitions: BTreeSet::new(),
            link_clock: BTreeMap::new(),
            late_clock: BTreeMap::new(),
            late_delivered: BTreeMap::new(),
            network: NetworkSettings::default(),
            io: IoSettings::default(),
            io_requests: BTreeMap::new(),
            outbox: Vec::new(),
            trace: Vec::new(),
            trace_enabled: false,
            trace_hash: 0xcbf2_9ce4_8422_2325,
            steps: 0,
            adversary: Adversary::default(),
            shared_threads: BTreeMap::new(),
            buggify_salt: None,
            buggify_fired: BTreeMap::new(),
        }
    }

    /// How often each buggify point fired so far, by "file:line".
    pub fn buggify_fired(&self) -> &BTreeMap<String, u64> {
        &self.buggify_fired
    }

    /// Delivers signals inside a node per (sender thread, receiver thread)
    /// lane, the lane to run next chosen by the seed (see the module doc),
    /// instead of in one FIFO. Set before the run starts.
    pub fn set_reorder(&mut self, on: bool) {
        self.adversary.reorder = on;
    }

    /// Delivers a down node's signals in flight late instead of losing
    /// them (see the module doc). Set before the run starts.
    pub fn set_late_signals(&mut self, on: bool) {
        self.adversary.late_signals = on;
    }

    /// Signals delivered late so far ([`Simulation::set_late_signals`]),
    /// by name.
    pub fn late_delivered(&self) -> &BTreeMap<&'static str, u64> {
        &self.late_delivered
    }

    /// Turns the blocks' buggify points on (see the module doc). Set before
    /// the run starts.
    pub fn set_buggify(&mut self, on: bool) {
        self.adversary.buggify = on;
        // Its own generator, so that the salt does not depend on how much
        // of the run's randomness was drawn before.
        self.buggify_salt = on.then(|| Rng::seeded(self.seed ^ 0xb066_1f1e).next_u64());
    }

    /// Which of the adversarial switches this run has on.
    pub fn adversary(&self) -> Adversary {
        self.adversary
    }

    /// Declares that every thread layout runs `blocks` on one thread (so
    /// signals among them keep their order, and signals from them to
    /// another thread share one lane). Without it each block instance is a
    /// thread of its own. Matters only with reordering on.
    pub fn share_thread(&mut self, blocks: &[BlockNumber]) {
        let group = self.shared_threads.values().max().map_or(0, |g| g + 1);
        for &block in blocks {
            self.shared_threads.insert(block, group);
        }
    }

    fn thread_of(&self, block: BlockRef) -> Thread {
        match self.shared_threads.get(&block.block) {
            Some(&group) => Thread::Shared(group),
            None => Thread::Block(block.block, block.instance),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Keep every step as a line (for replay output and determinism tests).
    pub fn enable_trace(&mut self) {
        self.trace_enabled = true;
    }

    pub fn trace(&self) -> &[String] {
        &self.trace
    }

    /// A digest of every step so far: equal for equal runs.
    pub fn trace_hash(&self) -> u64 {
        self.trace_hash
    }

    /// Adds a node and starts it now.
    pub fn add_node(&mut self, node: NodeId, factory: NodeFactory) {
        assert!(!self.nodes.contains_key(&node), "{node:?} added twice");
        self.factories.insert(node, factory);
        let rng = Rng::seeded(self.rng.next_u64());
        self.nodes.insert(
            node,
            SimNode {
                up: false,
                incarnation: 0,
                blocks: BTreeMap::new(),
                rng,
                paused: false,
                held: Vec::new(),
                notice_block: BlockNumber::MEMBERSHIP,
                down_reason: None,
                shutdowns: 0,
                failed_stops: 0,
                lanes: BTreeMap::new(),
                lane_run_queued: false,
            },
        );
        self.boot(node);
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes.get(&node).is_some_and(|n| n.up)
    }

    pub fn is_paused(&self, node: NodeId) -> bool {
        self.nodes.get(&node).is_some_and(|n| n.up && n.paused)
    }

    /// Connection notices of `node` go to its block `block` (an API node's
    /// client block; data nodes: membership, the default).
    pub fn set_notice_block(&mut self, node: NodeId, block: BlockNumber) {
        if let Some(n) = self.nodes.get_mut(&node) {
            n.notice_block = block;
        }
    }

    /// Stops `node` executing (a GC pause, a hung process) until
    /// [`Simulation::resume`]: its signals and timers wait.
    pub fn pause(&mut self, node: NodeId) {
        if let Some(n) = self.nodes.get_mut(&node) {
            if n.up && !n.paused {
                n.paused = true;
                self.record(format!("pause {node:?}"));
            }
        }
    }

    /// Lets a paused node go on: what waited for it runs now, in order
    /// (signals of connections that broke meanwhile are dropped at delivery).
    pub fn resume(&mut self, node: NodeId) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if !n.paused {
            return;
        }
        n.paused = false;
        let held = std::mem::take(&mut n.held);
        self.record(format!("resume {node:?} ({} waiting)", held.len()));
        let now = self.now;
        for event in held {
            self.push(now, event);
        }
    }

    /// Adds `extra` latency to every signal from `from` to `to` until
    /// [`Simulation::clear_delays`] (order within the link is kept).
    pub fn delay_link(&mut self, from: NodeId, to: NodeId, extra: Duration) {
        self.link_delay.insert((from, to), extra);
        self.record(format!("delay {from:?}->{to:?} {} us", extra.as_micros()));
    }

    /// Adds `extra` latency to every signal that `block` on `node` sends
    /// to a block of its own node (a slow thread: another thread's signal
    /// to the same receiver overtakes it) until
    /// [`Simulation::clear_delays`]. The block's own signals keep their
    /// order. Without reordering only: with it, the lanes decide.
    pub fn delay_local(&mut self, node: NodeId, block: BlockNumber, extra: Duration) {
        self.local_delay.insert((node, block), extra);
        self.record(format!(
            "delay local {node:?} {block:?} {} us",
            extra.as_micros()
        ));
    }

    pub fn clear_delays(&mut self) {
        self.link_delay.clear();
        self.local_delay.clear();
        self.record("clear delays".to_owned());
    }

    /// Breaks the connection between `a` and `b` (a TCP reset): what is in
    /// flight on it is lost, both ends are told, and it reconnects after
    /// the reconnect delay.
    pub fn break_link(&mut self, a: NodeId, b: NodeId) {
        if self.connections.contains_key(&pair(a, b)) {
            self.record(format!("break {a:?} {b:?}"));
            self.break_connection(a, b);
        }
    }

    /// Whether `a` and `b` have a live connection.
    pub fn connected(&self, a: NodeId, b: NodeId) -> bool {
        self.connections.contains_key(&pair(a, b))
    }

    pub fn summary(&self, node: NodeId) -> Option<NodeSummary> {
        self.nodes.get(&node).map(|n| NodeSummary {
            node,
            up: n.up,
            incarnation: n.incarnation,
            down_reason: n.down_reason.clone(),
            shutdowns: n.shutdowns,
            failed_stops: n.failed_stops,
        })
    }

    /// Looks at a block's state (for invariant checks). `None` if the node is
    /// down or has no such block.
    pub fn block<T: Block>(&self, address: BlockRef) -> Option<&T> {
        let node = self.nodes.get(&address.node)?;
        if !node.up {
            return None;
        }
        let block = node.blocks.get(&(address.block, address.instance))?;
        let any: &dyn std::any::Any = block.as_ref().as_any();
        any.downcast_ref::<T>()
    }

    fn boot(&mut self, node: NodeId) {
        let incarnation = {
            let sim_node = self.nodes.get_mut(&node).expect("known node");
            assert!(!sim_node.up, "{node:?} booted while up");
            sim_node.up = true;
            sim_node.incarnation
        };
        let factory = self.factories.get_mut(&node).expect("factory");
        let blocks = factory(node, incarnation);
        let sim_node = self.nodes.get_mut(&node).expect("known node");
        for (address, block) in blocks {
            assert_eq!(address.node, node, "block placed on the wrong node");
            sim_node
                .blocks
                .insert((address.block, address.instance), block);
        }
        self.record(format!("boot {node:?} incarnation {incarnation}"));
        let addresses: Vec<BlockRef> = self.nodes[&node]
            .blocks
            .keys()
            .map(|(block, instance)| BlockRef::new(node, *block, *instance))
            .collect();
        for address in addresses {
            self.run_block(address, None);
        }
        let peers: Vec<NodeId> = self.nodes.keys().copied().filter(|p| *p != node).collect();
        for peer in peers {
            self.schedule_connect(node, peer);
        }
    }

    /// Kills a node at once: its state is lost, its peers see the connection close.
    pub fn crash(&mut self, node: NodeId) {
        self.take_down(node, "crashed by the simulation".to_owned());
    }

    /// Starts a node that is down (a new incarnation with fresh blocks).
    pub fn restart(&mut self, node: NodeId) {
        if self.is_up(node) {
            return;
        }
        self.boot(node);
    }

    fn take_down(&mut self, node: NodeId, reason: String) {
        let Some(sim_node) = self.nodes.get_mut(&node) else {
            return;
        };
        if !sim_node.up {
            return;
        }
        sim_node.up = false;
        sim_node.paused = false;
        sim_node.held.clear();
        sim_node.lanes.clear();
        sim_node.lane_run_queued = false;
        sim_node.incarnation += 1;
        sim_node.blocks.clear();
        sim_node.down_reason = Some(reason.clone());
        // Its file requests not yet run never run: the crash came first.
        self.io_requests.retain(|_, r| r.block.node != node);
        self.record(format!("down {node:?}: {reason}"));
        let peers: Vec<NodeId> = self
            .connections
            .keys()
            .filter_map(|&(a, b)| {
                if a == node {
                    Some(b)
                } else if b == node {
                    Some(a)
                } else {
                    None
                }
            })
            .collect();
        for peer in peers {
            self.break_connection(node, peer);
        }
    }

    /// Cuts the network between `a` and `b` both ways (connections stay
    /// nominally up until someone disconnects).
    pub fn partition(&mut self, a: NodeId, b: NodeId) {
        self.partitions.insert(pair(a, b));
        self.record(format!("partition {a:?} {b:?}"));
    }

    /// Cuts `node` off from every other node.
    pub fn isolate(&mut self, node: NodeId) {
        let others: Vec<NodeId> = self.nodes.keys().copied().filter(|p| *p != node).collect();
        for other in others {
            self.partition(node, other);
        }
    }

    pub fn heal(&mut self) {
        self.partitions.clear();
        self.record("heal".to_owned());
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for (i, &a) in ids.iter().enumerate() {
            for &b in &ids[i + 1..] {
                self.schedule_connect(a, b);
            }
        }
    }

    fn can_talk(&self, a: NodeId, b: NodeId) -> bool {
        self.is_up(a) && self.is_up(b) && !self.partitions.contains(&pair(a, b))
    }

    fn schedule_connect(&mut self, a: NodeId, b: NodeId) {
        let at = self.now + self.network.reconnect_delay;
        self.push(at, Event::TryConnect { a, b });
    }

    fn break_connection(&mut self, a: NodeId, b: NodeId) {
        if self.connections.remove(&pair(a, b)).is_none() {
            return;
        }
        let at = self.now + self.network.disconnect_notice;
        for (end, peer) in [(a, b), (b, a)] {
            if let Some(n) = self.nodes.get(&end) {
                if n.up {
                    let incarnation = n.incarnation;
                    self.push(
                        at,
                        Event::DisconnectNotice {
                            at: end,
                            peer,
                            incarnation,
                        },
                    );
                }
            }
        }
        // Both ends keep trying, as the real transport does.
        self.schedule_connect(a, b);
    }

    fn push(&mut self, at: Instant, event: Event) {
        let sequence = self.sequence;
        self.sequence += 1;
        self.events.insert(sequence, event);
        self.queue.push(Reverse((at, sequence)));
    }

    fn record(&mut self, line: String) {
        // FNV-1a over the line and the time: cheap and stable.
        let mut hash = self.trace_hash;
        for byte in self.now.0.to_le_bytes().iter().chain(line.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        self.trace_hash = hash;
        if self.trace_enabled {
            self.trace
                .push(format!("{:>12.6} {line}", self.now.0 as f64 / 1e9));
        }
    }

    /// Processes the next event. Returns false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((at, sequence))) = self.queue.pop() else {
            return false;
        };
        let event = self.events.remove(&sequence).expect("queued event exists");
        debug_assert!(at >= self.now, "time never goes back");
        self.now = at;
        self.steps += 1;
        let waits_for = match &event {
            Event::Deliver { signal, .. } | Event::Late { signal, .. } => {
                Some(signal.receiver.node)
            }
            Event::Timer { block, .. } => Some(block.node),
            Event::DisconnectNotice { at, .. } => Some(*at),
            Event::TryConnect { a, b } => Some(if self.is_paused(*a) { *a } else { *b }),
            Event::RunLane { node, .. } => Some(*node),
            Event::Restart { .. } => None,
            Event::Io { node, .. } => Some(*node),
        };
        if let Some(node) = waits_for.filter(|n| self.is_paused(*n)) {
            self.nodes
                .get_mut(&node)
                .expect("a paused node exists")
                .held
                .push(event);
            return true;
        }
        match event {
            Event::Deliver {
                signal,
                incarnation,
                epoch,
            } => self.deliver(signal, incarnation, epoch),
            Event::Late {
                signal,
                incarnation,
            } => {
                let sender = signal.sender.node;
                if !self.is_up(sender) && self.incarnation_is(signal.receiver.node, incarnation) {
                    *self.late_delivered.entry(signal.body.name()).or_default() += 1;
                    self.record(format!(
                        "late {} {sender:?}->{:?}",
                        signal.body.name(),
                        signal.receiver.node
                    ));
                    self.deliver(signal, incarnation, None);
                }
            }
            Event::Timer {
                block,
                timer_id,
                incarnation,
            } => {
                if self.incarnation_is(block.node, incarnation) {
                    let signal = Signal {
                        receiver: block,
                        sender: block,
                        body: SignalBody::Timeout { timer_id },
                    };
                    self.run_block(block, Some(signal));
                }
            }
            Event::TryConnect { a, b } => {
                if self.can_talk(a, b) && !self.connections.contains_key(&pair(a, b)) {
                    let epoch = self.next_epoch;
                    self.next_epoch += 1;
                    self.connections.insert(pair(a, b), epoch);
                    self.record(format!("connect {a:?} {b:?}"));
                    for (end, peer) in [(a, b), (b, a)] {
                        self.notify(end, SignalBody::NodeConnected { node: peer });
                    }
                }
            }
            Event::DisconnectNotice {
                at,
                peer,
                incarnation,
            } => {
                if self.incarnation_is(at, incarnation) {
                    self.notify(at, SignalBody::NodeDisconnected { node: peer });
                }
            }
            Event::Restart { node } => self.restart(node),
            Event::RunLane { node, incarnation } => self.run_lane(node, incarnation),
            Event::Io {
                node,
                request,
                incarnation,
            } => {
                let request = self.io_requests.remove(&request);
                if let Some(request) = request.filter(|_| self.incarnation_is(node, incarnation)) {
                    self.record(format!("io {} #{}", request.block, request.request));
                    let conf = request.run();
                    self.push(
                        self.now,
                        Event::Deliver {
                            signal: conf,
                            incarnation,
                            epoch: None,
                        },
                    );
                }
            }
        }
        true
    }

    /// Queues `signal` on its lane of the receiving node and makes sure a
    /// `RunLane` follows (reordering on).
    fn enqueue(&mut self, from: Thread, signal: Signal) {
        let node = signal.receiver.node;
        let to = self.thread_of(signal.receiver);
        let now = self.now;
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        n.lanes.entry((from, to)).or_default().push_back(signal);
        if !n.lane_run_queued {
            n.lane_run_queued = true;
            let incarnation = n.incarnation;
            self.push(now, Event::RunLane { node, incarnation });
        }
    }

    /// Runs the head of one non-empty lane of `node`, the lane chosen by
    /// the seed.
    fn run_lane(&mut self, node: NodeId, incarnation: u32) {
        if !self.incarnation_is(node, incarnation) {
            return;
        }
        let n = self.nodes.get(&node).expect("an up node exists");
        let count = n.lanes.len() as u64;
        if count == 0 {
            self.nodes.get_mut(&node).expect("exists").lane_run_queued = false;
            return;
        }
        let pick = self.rng.below(count) as usize;
        let n = self.nodes.get_mut(&node).expect("exists");
        let lane = *n.lanes.keys().nth(pick).expect("picked below the count");
        let queue = n.lanes.get_mut(&lane).expect("exists");
        let signal = queue.pop_front().expect("lanes kept are not empty");
        if queue.is_empty() {
            n.lanes.remove(&lane);
        }
        // The next turn, after the other events of this instant.
        let more = !n.lanes.is_empty();
        n.lane_run_queued = more;
        if more {
            let now = self.now;
            self.push(now, Event::RunLane { node, incarnation });
        }
        self.run_block(signal.receiver, Some(signal));
    }

    fn incarnation_is(&self, node: NodeId, incarnation: u32) -> bool {
        self.nodes
            .get(&node)
            .is_some_and(|n| n.up && n.incarnation == incarnation)
    }

    /// Connection notices go to the node's notice block (membership on a
    /// data node), as the transport sends them.
    fn notify(&mut self, node: NodeId, body: SignalBody) {
        let block = self
            .nodes
            .get(&node)
            .map_or(BlockNumber::MEMBERSHIP, |n| n.notice_block);
        let receiver = BlockRef::new(node, block, 0);
        let signal = Signal {
            receiver,
            sender: BlockRef::new(node, BlockNumber::PROCESS, 0),
            body,
        };
        if self.adversary.reorder {
            // Behind what the connection delivered before it (the
            // transport's receive thread reports the close after its bytes).
            let peer = match signal.body {
                SignalBody::NodeConnected { node: peer }
                | SignalBody::NodeDisconnected { node: peer } => peer,
                _ => node,
            };
            return self.enqueue(Thread::Peer(peer), signal);
        }
        self.run_block(receiver, Some(signal));
    }

    fn deliver(&mut self, signal: Signal, incarnation: u32, epoch: Option<u64>) {
        let receiver = signal.receiver;
        if !self.incarnation_is(receiver.node, incarnation) {
            return;
        }
        if let Some(epoch) = epoch {
            let sender = signal.sender.node;
            if self.connections.get(&pair(sender, receiver.node)) != Some(&epoch) {
                // The connection it came on broke while it was in flight:
                // late when its sender went down and late signals are on.
                if self.adversary.late_signals && !self.is_up(sender) {
                    let span = LATE_SIGNAL_DELAY_MAX.as_nanos() as u64;
                    let mut at = self.now + Duration::from_nanos(self.rng.below(span + 1));
                    let last = self
                        .late_clock
                        .entry((sender, receiver.node))
                        .or_insert(Instant::ZERO);
                    at = at.max(*last);
                    *last = at;
                    self.push(
                        at,
                        Event::Late {
                            signal,
                            incarnation,
                        },
                    );
                    return;
                }
                self.record(format!(
                    "lost {} {sender:?}->{:?}: its connection broke",
                    signal.body.name(),
                    receiver.node
                ));
                return;
            }
            if self.adversary.reorder {
                let from = Thread::Peer(signal.sender.node);
                return self.enqueue(from, signal);
            }
        }
        self.run_block(receiver, Some(signal));
    }

    /// Runs `start` (no signal) or `execute` of one block, then carries out its outputs.
    fn run_block(&mut self, address: BlockRef, signal: Option<Signal>) {
        let exists = self
            .nodes
            .get(&address.node)
            .is_some_and(|n| n.blocks.contains_key(&(address.block, address.instance)));
        if !exists {
            if let Some(signal) = &signal {
                self.record(format!(
                    "drop {} -> {address}: no such block",
                    signal.body.name()
                ));
            }
            return;
        }
        match &signal {
            Some(signal) => self.record(format!(
                "exec {address} {} <- {}",
                signal.body.name(),
                signal.sender
            )),
            None => self.record(format!("start {address}")),
        }
        let now = self.now;
        let mut outbox = std::mem::take(&mut self.outbox);
        outbox.clear();
        let mut fired = Vec::new();
        {
            let node = self.nodes.get_mut(&address.node).expect("checked above");
            let block = node
                .blocks
                .get_mut(&(address.block, address.instance))
                .expect("checked above");
            let mut ctx = Context::new(now, address, &mut outbox, &mut node.rng)
                .with_buggify(self.buggify_salt);
            match signal {
                None => block.start(&mut ctx),
                Some(signal) => block.execute(signal, &mut ctx),
            }
            // Every step ends with the block's own check (debug builds):
            // a broken invariant is caught at the signal that broke it.
            if cfg!(debug_assertions) {
                block.check_invariants();
            }
            fired.extend_from_slice(ctx.buggify_fired());
        }
        for site in fired {
            let site = format!("{}:{}", site.file(), site.line());
            self.record(format!("buggify {address} at {site}"));
            *self.buggify_fired.entry(site).or_default() += 1;
        }
        for output in outbox.drain(..) {
            self.carry_out(address.node, output);
        }
        self.outbox = outbox;
    }

    fn carry_out(&mut self, from: NodeId, output: Output) {
        match output {
            Output::Send(signal) => self.send(signal),
            Output::Timer {
                block,
                at,
                timer_id,
            } => {
                let incarnation = self.nodes[&from].incarnation;
                self.push(
                    at,
                    Event::Timer {
                        block,
                        timer_id,
                        incarnation,
                    },
                );
            }
            Output::Disconnect(peer) => {
                self.record(format!("disconnect {from:?} {peer:?}"));
                self.break_connection(from, peer);
            }
            Output::Shutdown {
                restart,
                failed,
                reason,
            } => {
                if let Some(n) = self.nodes.get_mut(&from) {
                    n.shutdowns += 1;
                    n.failed_stops += u32::from(failed);
                }
                self.take_down(from, format!("shutdown: {reason}"));
                if restart {
                    let at = self.now + ANGEL_RESTART_DELAY;
                    self.push(at, Event::Restart { node: from });
                }
            }
            Output::Io(request) => {
                assert_eq!(request.block.node, from, "a file request of another node");
                let span = self
                    .io
                    .latency_max
                    .saturating_sub(self.io.latency_min)
                    .as_nanos() as u64;
                let jitter = if span == 0 {
                    0
                } else {
                    self.rng.below(span + 1)
                };
                let at = self.now + self.io.latency_min + Duration::from_nanos(jitter);
                let incarnation = self.nodes[&from].incarnation;
                let key = self.sequence;
                self.io_requests.insert(key, request);
                self.push(
                    at,
                    Event::Io {
                        node: from,
                        request: key,
                        incarnation,
                    },
                );
            }
        }
    }

    fn send(&mut self, signal: Signal) {
        let from = signal.sender.node;
        let to = signal.receiver.node;
        let Some(receiver) = self.nodes.get(&to) else {
            return;
        };
        let incarnation = receiver.incarnation;
        if from == to && self.adversary.reorder && receiver.up {
            let from = self.thread_of(signal.sender);
            return self.enqueue(from, signal);
        }
        if from == to {
            let extra = self
                .local_delay
                .get(&(from, signal.sender.block))
                .copied()
                .unwrap_or_default();
            let at = self.now + extra;
            self.push(
                at,
                Event::Deliver {
                    signal,
                    incarnation,
                    epoch: None,
                },
            );
            return;
        }
        let Some(&epoch) = self.connections.get(&pair(from, to)) else {
            return;
        };
        if self.partitions.contains(&pair(from, to)) {
            return;
        }
        if self.network.drop_ppm > 0 && self.rng.chance(u64::from(self.network.drop_ppm), 1_000_000)
        {
            self.record(format!("lose {} {from:?}->{to:?}", signal.body.name()));
            return;
        }
        let copies = if self.network.duplicate_ppm > 0
            && self
                .rng
                .chance(u64::from(self.network.duplicate_ppm), 1_000_000)
        {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let span = self
                .network
                .latency_max
                .saturating_sub(self.network.latency_min)
                .as_nanos() as u64;
            let jitter = if span == 0 {
                0
            } else {
                self.rng.below(span + 1)
            };
            let extra = self
                .link_delay
                .get(&(from, to))
                .copied()
                .unwrap_or_default();
            let mut at = self.now + self.network.latency_min + Duration::from_nanos(jitter) + extra;
            if self.network.fifo {
                let last = self.link_clock.entry((from, to)).or_insert(Instant::ZERO);
                if at < *last {
                    at = *last;
                }
                *last = at;
            }
            self.push(
                at,
                Event::Deliver {
                    signal: signal.clone(),
                    incarnation,
                    epoch: Some(epoch),
                },
            );
        }
    }

    /// Sends `signal` over the simulated network as if its sender block had
    /// (a test or a scenario driving a node from outside its blocks).
    pub fn send_as(&mut self, signal: Signal) {
        if self.is_up(signal.sender.node) {
            self.send(signal);
        }
    }

    /// Delivers `signal` to its receiver now, as if it came from outside the
    /// simulated network (an operator's command, a test's probe).
    pub fn inject(&mut self, signal: Signal) {
        let Some(receiver) = self.nodes.get(&signal.receiver.node) else {
            return;
        };
        if !receiver.up {
            return;
        }
        if receiver.paused {
            let (incarnation, now) = (receiver.incarnation, self.now);
            self.push(
                now,
                Event::Deliver {
                    signal,
                    incarnation,
                    epoch: None,
                },
            );
            return;
        }
        self.record(format!(
            "inject {} -> {}",
            signal.body.name(),
            signal.receiver
        ));
        let address = signal.receiver;
        self.run_block(address, Some(signal));
    }

    /// Runs until simulated time reaches `until` or nothing is left.
    /// Runs until a signal from `from` to another node that `wanted` takes
    /// is in flight, or `until`; whether one is. A fault that takes `from`
    /// down then has something to lose (or, with late signals, to deliver
    /// late).
    pub fn run_until_in_flight(
        &mut self,
        from: NodeId,
        until: Instant,
        wanted: impl Fn(&Signal) -> bool,
    ) -> bool {
        let in_flight = |sim: &Simulation| {
            sim.events.values().any(|e| {
                matches!(e, Event::Deliver { signal, epoch: Some(_), .. }
                    if signal.sender.node == from && wanted(signal))
            })
        };
        let start = self.steps;
        while !in_flight(self) {
            match self.queue.peek() {
                Some(Reverse((at, _))) if *at <= until => {}
                _ => return false,
            }
            self.step();
            assert!(
                self.steps - start < SIMULATION_STEPS_MAX,
                "seed {}: more than {SIMULATION_STEPS_MAX} steps before {until:?}: livelock?",
                self.seed
            );
        }
        true
    }

    pub fn run_until(&mut self, until: Instant) {
        let start = self.steps;
        while let Some(Reverse((at, _))) = self.queue.peek() {
            if *at > until {
                break;
            }
            self.step();
            assert!(
                self.steps - start < SIMULATION_STEPS_MAX,
                "seed {}: more than {SIMULATION_STEPS_MAX} steps before {until:?}: livelock?",
                self.seed
            );
        }
        if self.now < until {
            self.now = until;
        }
    }

    pub fn run_for(&mut self, duration: Duration) {
        let until = self.now + duration;
        self.run_until(until);
    }
}
