//! The simulator's network and node faults: a paused node, a link that
//! breaks and reconnects, latency spikes that reorder signals across links
//! (never within one).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kernel::simulator::Simulation;
use kernel::{Block, Context};
use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

type Log = Arc<Mutex<Vec<String>>>;

fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

fn probe(n: NodeId) -> BlockRef {
    BlockRef::new(n, BlockNumber::MEMBERSHIP, 0)
}

/// Logs what it receives as "<node> <what> <n>"; relays a numbered signal
/// to `relay_to` when it has one, and ticks a timer every millisecond.
struct Probe {
    log: Log,
    relay_to: Option<NodeId>,
    tick: bool,
}

impl Block for Probe {
    fn start(&mut self, ctx: &mut Context<'_>) {
        if self.tick {
            ctx.set_timer(Duration::from_millis(1), 1);
        }
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let me = ctx.node().get();
        let line = match signal.body {
            SignalBody::GcpPrepareReq { epoch: gci } => {
                if let Some(to) = self.relay_to {
                    ctx.send(probe(to), SignalBody::GcpPrepareReq { epoch: gci });
                }
                format!("{me} got {gci} from {}", signal.sender.node.get())
            }
            SignalBody::Timeout { .. } => {
                ctx.set_timer(Duration::from_millis(1), 1);
                format!("{me} tick")
            }
            SignalBody::NodeConnected { node } => format!("{me} connected {}", node.get()),
            SignalBody::NodeDisconnected { node } => format!("{me} disconnected {}", node.get()),
            other => format!("{me} other {}", other.name()),
        };
        self.log.lock().unwrap().push(line);
    }
}

/// Nodes 1..=n, each one probe; node `relay` relays to node 3.
fn cluster(seed: u64, n: u8, relay: Option<u8>, tick: bool) -> (Simulation, Log) {
    let mut sim = Simulation::new(seed);
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    for i in 1..=n {
        let log = Arc::clone(&log);
        let relay_to = (relay == Some(i)).then(|| node(3));
        sim.add_node(
            node(i),
            Box::new(move |id, _| {
                let block: Box<dyn Block> = Box::new(Probe {
                    log: Arc::clone(&log),
                    relay_to,
                    tick,
                });
                vec![(probe(id), block)]
            }),
        );
    }
    sim.run_for(Duration::from_millis(200));
    log.lock().unwrap().clear();
    (sim, log)
}

/// Sends numbered signals from `from`'s probe to `to`'s, over the network.
fn send(sim: &mut Simulation, from: u8, to: u8, numbers: std::ops::Range<u32>) {
    for gci in numbers {
        sim.send_as(Signal {
            receiver: probe(node(to)),
            sender: probe(node(from)),
            body: SignalBody::GcpPrepareReq {
                epoch: u64::from(gci),
            },
        });
    }
}

fn lines(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn a_paused_node_runs_nothing_until_it_resumes_then_everything_in_order() {
    let (mut sim, log) = cluster(1, 2, None, true);
    sim.pause(node(2));
    assert!(sim.is_paused(node(2)));
    send(&mut sim, 1, 2, 0..5);
    sim.run_for(Duration::from_millis(20));
    let seen = lines(&log);
    assert!(
        seen.iter().all(|l| l.starts_with("1 ")),
        "node 2 executed while paused: {seen:?}"
    );
    assert!(seen.iter().filter(|l| *l == "1 tick").count() >= 19);
    sim.resume(node(2));
    sim.run_for(Duration::from_micros(1));
    let seen: Vec<String> = lines(&log)
        .into_iter()
        .filter(|l| l.starts_with("2 got"))
        .collect();
    let expected: Vec<String> = (0..5).map(|i| format!("2 got {i} from 1")).collect();
    assert_eq!(seen, expected, "what waited runs at resume, in order");
}

#[test]
fn a_paused_node_loses_what_came_on_a_connection_its_peer_broke() {
    let (mut sim, log) = cluster(2, 2, None, false);
    sim.pause(node(2));
    send(&mut sim, 1, 2, 0..3);
    sim.run_for(Duration::from_millis(5));
    // The peer gives up on the hung node (missed heartbeats) and disconnects.
    sim.break_link(node(1), node(2));
    sim.run_for(Duration::from_millis(5));
    sim.resume(node(2));
    sim.run_for(Duration::from_millis(50));
    let seen = lines(&log);
    assert!(
        !seen.iter().any(|l| l.starts_with("2 got")),
        "signals of a broken connection are lost: {seen:?}"
    );
    assert!(seen.contains(&"2 disconnected 1".to_owned()), "{seen:?}");
    assert!(seen.contains(&"1 disconnected 2".to_owned()), "{seen:?}");
    sim.run_for(Duration::from_millis(200));
    let seen = lines(&log);
    assert!(seen.contains(&"2 connected 1".to_owned()), "{seen:?}");
    assert!(sim.connected(node(1), node(2)));
}

#[test]
fn a_broken_link_loses_what_is_in_flight_and_reconnects() {
    let (mut sim, log) = cluster(3, 2, None, false);
    // Longer than the reconnect delay: without epochs they would arrive on
    // the new connection.
    sim.delay_link(node(1), node(2), Duration::from_millis(250));
    send(&mut sim, 1, 2, 0..4);
    sim.run_for(Duration::from_millis(2));
    sim.break_link(node(1), node(2));
    assert!(!sim.connected(node(1), node(2)));
    sim.clear_delays();
    // Sent while the link is down: nowhere to go.
    send(&mut sim, 1, 2, 10..12);
    sim.run_for(Duration::from_millis(400));
    assert!(sim.connected(node(1), node(2)));
    let seen = lines(&log);
    assert!(
        !seen.iter().any(|l| l.starts_with("2 got")),
        "nothing of the broken connection arrives, not even on the new one: {seen:?}"
    );
    assert!(seen.contains(&"1 disconnected 2".to_owned()), "{seen:?}");
    assert!(seen.contains(&"2 connected 1".to_owned()), "{seen:?}");
    send(&mut sim, 1, 2, 20..22);
    sim.run_for(Duration::from_millis(5));
    let got: Vec<String> = lines(&log)
        .into_iter()
        .filter(|l| l.starts_with("2 got"))
        .collect();
    assert_eq!(got, vec!["2 got 20 from 1", "2 got 21 from 1"]);
}

#[test]
fn a_latency_spike_reorders_across_links_but_never_within_one() {
    // 1 sends 0..50 to 3 directly (a spike on that link) and to 2, which
    // relays to 3: the relayed copies overtake the direct ones, and each
    // link still delivers in order.
    let (mut sim, log) = cluster(4, 3, Some(2), false);
    sim.delay_link(node(1), node(3), Duration::from_millis(5));
    send(&mut sim, 1, 3, 0..50);
    send(&mut sim, 1, 2, 100..150);
    sim.run_for(Duration::from_millis(20));
    let at_3: Vec<(u8, u32)> = lines(&log)
        .into_iter()
        .filter_map(|l| {
            let rest = l.strip_prefix("3 got ")?;
            let (n, from) = rest.split_once(" from ")?;
            Some((from.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    assert_eq!(at_3.len(), 100);
    let first_direct = at_3.iter().position(|(from, _)| *from == 1).unwrap();
    assert_eq!(
        first_direct, 50,
        "every relayed signal overtook the delayed direct ones"
    );
    for from in [1u8, 2] {
        let numbers: Vec<u32> = at_3
            .iter()
            .filter(|(f, _)| *f == from)
            .map(|(_, n)| *n)
            .collect();
        let mut sorted = numbers.clone();
        sorted.sort_unstable();
        assert_eq!(numbers, sorted, "link {from}->3 kept its order");
    }
}

/// With late signals on, a crashed node's signals in flight arrive after
/// its peers heard of the close, in their link's order, and are lost if
/// it is up again first; with them off, they are lost.
#[test]
fn a_crashed_nodes_signals_in_flight_arrive_late_in_order_or_not_at_all() {
    let got = |log: &Log| -> Vec<String> {
        lines(log)
            .into_iter()
            .filter(|l| l.starts_with("2 got") || l == "2 disconnected 1")
            .collect()
    };
    for seed in 0..6 {
        let (mut sim, log) = cluster(seed, 2, None, false);
        sim.set_late_signals(true);
        sim.delay_link(node(1), node(2), Duration::from_millis(5));
        send(&mut sim, 1, 2, 0..6);
        sim.run_for(Duration::from_millis(1));
        sim.crash(node(1));
        sim.run_for(kernel::simulator::LATE_SIGNAL_DELAY_MAX + Duration::from_millis(10));
        let mut expected = vec!["2 disconnected 1".to_owned()];
        expected.extend((0..6).map(|i| format!("2 got {i} from 1")));
        assert_eq!(got(&log), expected, "seed {seed}");
        assert_eq!(sim.late_delivered().get("GcpPrepareReq"), Some(&6));
    }
    // Up again before they come: lost (the new connection comes after the
    // old one's bytes), and so they are with late signals off.
    for late in [true, false] {
        let (mut sim, log) = cluster(9, 2, None, false);
        sim.set_late_signals(late);
        sim.delay_link(node(1), node(2), Duration::from_millis(5));
        send(&mut sim, 1, 2, 0..6);
        sim.run_for(Duration::from_millis(1));
        sim.crash(node(1));
        // Past when they were due: with late signals on they now wait.
        sim.run_for(Duration::from_millis(6));
        sim.restart(node(1));
        sim.run_for(kernel::simulator::LATE_SIGNAL_DELAY_MAX + Duration::from_millis(10));
        assert_eq!(got(&log), vec!["2 disconnected 1"], "late signals {late}");
        assert!(sim.late_delivered().is_empty());
    }
}
