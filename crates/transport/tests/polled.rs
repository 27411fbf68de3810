//! A transport without a receive thread: the test thread turns its receive
//! loop (`Receiver::turn`), as a data node's main thread does with
//! `ThreadConfig` `recv={count=0}`. Delivery, notices, disconnects, and a
//! sink that has room for only a few signals at a time.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{config, init_tracing, node, send_sequence, start, Inbox, WAIT_MS};
use signal::{Signal, SignalBody};
use transport::{InboundSink, Receiver, Transport};

/// Takes signals while it holds fewer than `room`; the test empties it.
/// With `refuse_every`, also refuses every so many offers whatever it
/// holds, as a queue whose consumer runs on another thread does.
struct RoomSink {
    got: Arc<Mutex<Vec<Signal>>>,
    room: usize,
    refuse_every: Option<u64>,
    offers: u64,
}

impl InboundSink for RoomSink {
    fn deliver(&mut self, signal: Signal) {
        panic!("the receive loop offers, it never forces: {signal:?}");
    }

    fn offer(&mut self, signal: Signal) -> Result<(), Signal> {
        self.offers += 1;
        if self
            .refuse_every
            .is_some_and(|every| self.offers.is_multiple_of(every))
        {
            return Err(signal);
        }
        let mut got = self.got.lock().expect("not poisoned");
        if got.len() >= self.room {
            return Err(signal);
        }
        got.push(signal);
        Ok(())
    }

    fn flush(&mut self) {}
}

struct Polled {
    transport: Transport,
    receiver: Receiver,
    got: Arc<Mutex<Vec<Signal>>>,
}

impl Polled {
    fn turn(&mut self) {
        self.receiver.turn(Duration::from_millis(5));
    }

    /// Everything delivered since the last call.
    fn take(&self) -> Vec<Signal> {
        std::mem::take(&mut *self.got.lock().expect("not poisoned"))
    }

    fn held(&self) -> usize {
        self.got.lock().expect("not poisoned").len()
    }

    /// Turns, emptying the sink after each turn, until `count` signals came.
    fn turn_until_count(&mut self, count: usize) -> Vec<Signal> {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        let mut all = Vec::new();
        while all.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} signals came",
                all.len()
            );
            self.turn();
            all.extend(self.take());
        }
        all
    }
}

/// Node 1, polled, with a sink of `room`; node 2 connects to it with a
/// receive thread of its own. Returns once node 1 delivered `NodeConnected`.
fn polled_pair(room: usize) -> (Polled, (Transport, Inbox)) {
    polled_pair_with(room, None)
}

fn polled_pair_with(room: usize, refuse_every: Option<u64>) -> (Polled, (Transport, Inbox)) {
    init_tracing();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = RoomSink {
        got: Arc::clone(&got),
        room,
        refuse_every,
        offers: 0,
    };
    let (transport, receiver) =
        Transport::start_polled(config(1, true, &[(2, None)], false), Box::new(sink))
            .expect("transport starts");
    let addr = transport.local_addr().expect("node 1 listens");
    let mut one = Polled {
        transport,
        receiver,
        got,
    };
    // Node 2's connect is accepted only when node 1 turns.
    let two = start(config(2, false, &[(1, Some(addr))], false));
    let first = one.turn_until_count(1);
    assert_eq!(bodies(&first), [connected(2)]);
    two.1.expect_body(connected(1));
    (one, two)
}

fn connected(id: u8) -> SignalBody {
    SignalBody::NodeConnected { node: node(id) }
}

fn disconnected(id: u8) -> SignalBody {
    SignalBody::NodeDisconnected { node: node(id) }
}

fn bodies(signals: &[Signal]) -> Vec<SignalBody> {
    signals.iter().map(|s| s.body.clone()).collect()
}

/// Asserts `signals` are heartbeats `first..first + len` from node 2.
fn assert_sequence(signals: &[Signal], first: u32) {
    for (k, signal) in signals.iter().enumerate() {
        let expected = SignalBody::Heartbeat {
            view_id: first + k as u32,
        };
        assert_eq!(signal.body, expected, "signal {k}");
        assert_eq!(signal.sender.node, node(2));
    }
}

#[test]
fn turns_deliver_in_order_and_notices_alternate() {
    const SIGNALS: u32 = 5_000;
    let (mut one, two) = polled_pair(usize::MAX);
    send_sequence(&two.0, 2, 1, 0, SIGNALS, 100);
    let got = one.turn_until_count(SIGNALS as usize);
    assert_sequence(&got, 0);
    // A disconnect asked for from another thread wakes the loop (its
    // command), and node 2 connects again.
    let waker = one.receiver.waker();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            one.transport.disconnect(node(2));
            waker.wake();
        });
    });
    let notices = one.turn_until_count(2);
    assert_eq!(bodies(&notices), [disconnected(2), connected(2)]);
    two.1.expect_body(disconnected(1));
    two.1.expect_body(connected(1));
    send_sequence(&two.0, 2, 1, 0, 10, 10);
    assert_sequence(&one.turn_until_count(10), 0);
    // Node 2 goes away: one notice, and nothing after it.
    two.0.shutdown();
    let last = one.turn_until_count(1);
    assert_eq!(bodies(&last), [disconnected(2)]);
    for _ in 0..5 {
        one.turn();
    }
    assert_eq!(one.held(), 0);
    assert_eq!(one.transport.stats().frames_refused, 0);
}

#[test]
fn a_full_sink_stops_reading_the_connection_and_later_turns_resume_in_order() {
    const ROOM: usize = 7;
    const SIGNALS: u32 = 3_000;
    let (mut one, two) = polled_pair(ROOM);
    // Frames of 50 signals: a frame is refused part way through.
    send_sequence(&two.0, 2, 1, 0, 1_000, 50);
    // Fill the sink and leave it full.
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while one.held() < ROOM {
        assert!(Instant::now() < deadline, "nothing arrived");
        one.turn();
    }
    let read_while_full = one.transport.stats().bytes_received;
    // More arrives at the socket, and must stay there.
    send_sequence(&two.0, 2, 1, 1_000, SIGNALS - 1_000, 50);
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(2));
        one.turn();
        assert_eq!(one.held(), ROOM, "a full sink took more");
    }
    assert_eq!(
        one.transport.stats().bytes_received,
        read_while_full,
        "the connection was read while its signals waited"
    );
    // Now empty it after every turn: each turn hands over exactly ROOM
    // signals until the rest is smaller, in order, none lost.
    let mut all = one.take();
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while all.len() < SIGNALS as usize {
        assert!(Instant::now() < deadline, "only {} signals came", all.len());
        one.turn();
        let got = one.take();
        assert!(
            got.len() <= ROOM,
            "{} signals in a sink of {ROOM}",
            got.len()
        );
        all.extend(got);
    }
    assert_eq!(all.len(), SIGNALS as usize);
    assert_sequence(&all, 0);
    let stats = one.transport.stats();
    assert_eq!(stats.signals_received, u64::from(SIGNALS));
    assert_eq!(stats.frames_refused, 0);
}

#[test]
fn notices_wait_behind_the_signals_a_full_sink_refused() {
    const SIGNALS: u32 = 20;
    let (mut one, two) = polled_pair(1);
    // One frame of 20 signals.
    send_sequence(&two.0, 2, 1, 0, SIGNALS, SIGNALS);
    let first = one.turn_until_count(1);
    assert_sequence(&first, 0);
    // 19 signals wait; the connection closes meanwhile, and node 2
    // connects again at once: both notices come after the 19.
    one.transport.disconnect(node(2));
    let rest = one.turn_until_count(SIGNALS as usize + 1);
    assert_sequence(&rest[..SIGNALS as usize - 1], 1);
    assert_eq!(
        bodies(&rest[SIGNALS as usize - 1..]),
        [disconnected(2), connected(2)]
    );
    two.1.expect_body(disconnected(1));
    two.1.expect_body(connected(1));
}

#[test]
fn a_sink_whose_room_comes_and_goes_still_gets_everything_in_order() {
    const SIGNALS: u32 = 2_000;
    // Every third offer is refused although there is room: the next offer,
    // which would fit, must still wait behind the refused signal.
    let (mut one, two) = polled_pair_with(usize::MAX, Some(3));
    send_sequence(&two.0, 2, 1, 0, SIGNALS, 40);
    let got = one.turn_until_count(SIGNALS as usize);
    assert_sequence(&got, 0);
}
