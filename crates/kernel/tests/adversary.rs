//! The simulator's adversarial switches: per (sender thread, receiver
//! thread) order inside a node, the lane chosen by the seed, and buggify
//! points that only a simulation with buggify on ever fires.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kernel::simulator::Simulation;
use kernel::{Block, Context, Instant, Rng};
use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

type Log = Arc<Mutex<Vec<(BlockNumber, u64)>>>;

fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

const RECEIVER: BlockNumber = BlockNumber::LOCAL_DATA_MANAGER;

/// At start, sends `first..first + 40` to the receiver of its node.
struct Sender {
    first: u64,
}

impl Block for Sender {
    fn start(&mut self, ctx: &mut Context<'_>) {
        let to = BlockRef::new(ctx.node(), RECEIVER, 0);
        for epoch in self.first..self.first + 40 {
            ctx.send(to, SignalBody::GcpPrepareReq { epoch });
        }
    }

    fn execute(&mut self, _signal: Signal, _ctx: &mut Context<'_>) {}
}

/// Logs (sender block, number) of what it receives.
struct Receiver {
    log: Log,
}

impl Block for Receiver {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        if let SignalBody::GcpPrepareReq { epoch } = signal.body {
            self.log.lock().unwrap().push((signal.sender.block, epoch));
        }
    }
}

/// One node: dictionary (0..40) and distribution (100..140), which share a
/// thread, and a TC (200..240) on a thread of its own, all sending to the
/// LDM. Returns what the LDM received, in order, and the trace hash.
fn run(seed: u64, reorder: bool) -> (Vec<(BlockNumber, u64)>, u64) {
    let mut sim = Simulation::new(seed);
    sim.set_reorder(reorder);
    sim.share_thread(&[
        BlockNumber::MEMBERSHIP,
        BlockNumber::DICTIONARY,
        BlockNumber::DISTRIBUTION,
    ]);
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let factory_log = Arc::clone(&log);
    sim.add_node(
        node(1),
        Box::new(move |id, _| {
            let blocks: Vec<(BlockNumber, Box<dyn Block>)> = vec![
                (BlockNumber::DICTIONARY, Box::new(Sender { first: 0 })),
                (BlockNumber::DISTRIBUTION, Box::new(Sender { first: 100 })),
                (
                    BlockNumber::TRANSACTION_COORDINATOR,
                    Box::new(Sender { first: 200 }),
                ),
                (
                    RECEIVER,
                    Box::new(Receiver {
                        log: Arc::clone(&factory_log),
                    }),
                ),
            ];
            blocks
                .into_iter()
                .map(|(number, block)| (BlockRef::new(id, number, 0), block))
                .collect()
        }),
    );
    sim.run_for(Duration::from_millis(1));
    let seen = log.lock().unwrap().clone();
    (seen, sim.trace_hash())
}

fn numbers_from(seen: &[(BlockNumber, u64)], blocks: &[BlockNumber]) -> Vec<u64> {
    seen.iter()
        .filter(|(b, _)| blocks.contains(b))
        .map(|(_, n)| *n)
        .collect()
}

#[test]
fn without_reordering_a_node_runs_its_signals_in_one_fifo() {
    let (seen, _) = run(7, false);
    let all: Vec<u64> = seen.iter().map(|(_, n)| *n).collect();
    // Blocks start in block number order: distribution (2), dictionary (3), TC (4).
    let expected: Vec<u64> = (100..140).chain(0..40).chain(200..240).collect();
    assert_eq!(all, expected);
}

#[test]
fn lanes_interleave_by_the_seed_and_keep_each_thread_pairs_order() {
    let mut interleaved = 0;
    for seed in 0..20 {
        let (seen, _) = run(seed, true);
        assert_eq!(seen.len(), 120, "seed {seed}: every signal ran once");
        // Dictionary and distribution share `main`: one lane, in the
        // order sent (all of the distribution's first: it started first).
        let main = numbers_from(&seen, &[BlockNumber::DICTIONARY, BlockNumber::DISTRIBUTION]);
        let expected: Vec<u64> = (100..140).chain(0..40).collect();
        assert_eq!(main, expected, "seed {seed}: main→ldm kept its order");
        let tc = numbers_from(&seen, &[BlockNumber::TRANSACTION_COORDINATOR]);
        assert_eq!(tc, (200..240).collect::<Vec<_>>(), "seed {seed}: tc→ldm");
        // TC→LDM overtakes main→LDM somewhere.
        let first_tc = seen.iter().position(|(_, n)| *n >= 200).unwrap();
        if first_tc < 80 {
            interleaved += 1;
        }
    }
    assert!(
        interleaved >= 18,
        "lanes interleave: only {interleaved} of 20 seeds did"
    );
}

#[test]
fn the_same_seed_gives_the_same_interleaving() {
    let a = run(11, true);
    assert_eq!(a, run(11, true));
    let b = run(12, true);
    assert_ne!(a.0, b.0, "another seed, another interleaving");
    assert_ne!(a.1, b.1);
}

/// Counts the firings of two buggify points per signal it gets.
struct Buggified {
    fired: Arc<Mutex<[u32; 2]>>,
}

impl Block for Buggified {
    fn start(&mut self, ctx: &mut Context<'_>) {
        ctx.set_timer(Duration::from_micros(10), 0);
    }

    fn execute(&mut self, _signal: Signal, ctx: &mut Context<'_>) {
        let mut fired = self.fired.lock().unwrap();
        if ctx.buggify() {
            fired[0] += 1;
        }
        if ctx.buggify_ppm(1_000_000) {
            fired[1] += 1;
        }
        ctx.set_timer(Duration::from_micros(10), 0);
    }
}

/// 1,000 executions of both points; how often each fired.
fn buggify_run(seed: u64, on: bool) -> [u32; 2] {
    let mut sim = Simulation::new(seed);
    sim.set_buggify(on);
    assert_eq!(sim.adversary().buggify, on);
    let fired = Arc::new(Mutex::new([0; 2]));
    let counts = Arc::clone(&fired);
    sim.add_node(
        node(1),
        Box::new(move |id, _| {
            let block: Box<dyn Block> = Box::new(Buggified {
                fired: Arc::clone(&counts),
            });
            vec![(BlockRef::new(id, BlockNumber::MEMBERSHIP, 0), block)]
        }),
    );
    sim.run_for(Duration::from_micros(10_005));
    let counts = *fired.lock().unwrap();
    counts
}

#[test]
fn buggify_points_fire_only_when_the_run_turns_them_on() {
    for seed in 0..10 {
        assert_eq!(buggify_run(seed, false), [0, 0], "seed {seed}: off");
    }
    // On: each point is active in some runs and not in others, fixed per
    // run; an active point fires at its rate.
    let mut active = [0; 2];
    for seed in 0..40 {
        let fired = buggify_run(seed, true);
        assert_eq!(fired, buggify_run(seed, true), "seed {seed}: replays");
        if fired[0] > 0 {
            active[0] += 1;
            assert!((150..350).contains(&fired[0]), "25 %: {fired:?}");
        }
        if fired[1] > 0 {
            active[1] += 1;
            assert_eq!(fired[1], 1_000, "always, when active");
        }
    }
    for (point, runs) in active.iter().enumerate() {
        assert!(
            (8..=32).contains(runs),
            "point {point} active in {runs} of 40 runs, about half expected"
        );
    }
}

#[test]
fn a_context_of_the_real_runtime_never_buggifies() {
    let mut outbox = Vec::new();
    let mut rng = Rng::seeded(1);
    let me = BlockRef::new(node(1), BlockNumber::MEMBERSHIP, 0);
    let mut ctx = Context::new(Instant::ZERO, me, &mut outbox, &mut rng);
    assert!((0..1_000).all(|_| !ctx.buggify() && !ctx.buggify_ppm(1_000_000)));
}

/// Sends `0..40` to the receiver of node 2 once the connection is up.
struct RemoteSender;

impl Block for RemoteSender {
    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        if let SignalBody::NodeConnected { node: peer } = signal.body {
            let to = BlockRef::new(peer, RECEIVER, 0);
            for epoch in 0..40 {
                ctx.send(to, SignalBody::GcpPrepareReq { epoch });
            }
        }
    }
}

/// Forwards what it gets from another node to the receiver of its own
/// node, numbered from 1000, so that the receiver sees a local lane
/// (membership→LDM) race the network's (node 1→LDM).
struct Relay;

impl Block for Relay {
    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        if let SignalBody::NodeConnected { .. } = signal.body {
            let to = BlockRef::new(ctx.node(), RECEIVER, 0);
            for epoch in 1000..1040 {
                ctx.send(to, SignalBody::GcpPrepareReq { epoch });
            }
        }
    }
}

#[test]
fn signals_from_another_node_keep_their_order_and_race_local_lanes() {
    let mut interleaved = 0;
    // Which lane ran at each step: chosen by the seed, not by arrival.
    let mut patterns = std::collections::BTreeSet::new();
    for seed in 0..10 {
        let mut sim = Simulation::new(seed);
        sim.set_reorder(true);
        // Both connection notices at one instant, so both bursts race.
        sim.network.latency_min = Duration::ZERO;
        sim.network.latency_max = Duration::ZERO;
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        sim.add_node(
            node(1),
            Box::new(|id, _| {
                let block: Box<dyn Block> = Box::new(RemoteSender);
                vec![(BlockRef::new(id, BlockNumber::MEMBERSHIP, 0), block)]
            }),
        );
        let factory_log = Arc::clone(&log);
        sim.add_node(
            node(2),
            Box::new(move |id, _| {
                let relay: Box<dyn Block> = Box::new(Relay);
                let receiver: Box<dyn Block> = Box::new(Receiver {
                    log: Arc::clone(&factory_log),
                });
                vec![
                    (BlockRef::new(id, BlockNumber::MEMBERSHIP, 0), relay),
                    (BlockRef::new(id, RECEIVER, 0), receiver),
                ]
            }),
        );
        sim.run_for(Duration::from_millis(200));
        let seen: Vec<u64> = log.lock().unwrap().iter().map(|(_, n)| *n).collect();
        assert_eq!(seen.len(), 80, "seed {seed}");
        let remote: Vec<u64> = seen.iter().copied().filter(|n| *n < 1000).collect();
        assert_eq!(
            remote,
            (0..40).collect::<Vec<_>>(),
            "seed {seed}: 1→2 in order"
        );
        let local: Vec<u64> = seen.iter().copied().filter(|n| *n >= 1000).collect();
        assert_eq!(local, (1000..1040).collect::<Vec<_>>(), "seed {seed}");
        let first_local = seen.iter().position(|n| *n >= 1000).unwrap();
        let last_remote = seen.iter().rposition(|n| *n < 1000).unwrap();
        let first_remote = seen.iter().position(|n| *n < 1000).unwrap();
        let last_local = seen.iter().rposition(|n| *n >= 1000).unwrap();
        if first_local < last_remote && first_remote < last_local {
            interleaved += 1;
        }
        patterns.insert(seen.iter().map(|n| *n < 1000).collect::<Vec<bool>>());
    }
    assert!(
        interleaved >= 5,
        "only {interleaved} of 10 seeds interleaved"
    );
    assert!(
        patterns.len() >= 8,
        "{} patterns in 10 seeds",
        patterns.len()
    );
}
