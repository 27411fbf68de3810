//! Two transports exchange many signals both ways: all arrive, in order
//! per sender, gathered into far fewer frames and writes than signals;
//! over the local socket two nodes on one host use, and over TCP.

mod common;

use common::*;
use transport::stream::LinkKind;
use transport::Transport;

const SIGNALS: u32 = 100_000;
/// Signals per flush, as a block would send in one execution round.
const BATCH: u32 = 64;

fn exchange(send_thread: bool, kind: LinkKind) {
    let ((one, inbox_one), (two, inbox_two)) = pair_over(send_thread, kind == LinkKind::Local);
    for transport in [&one, &two] {
        let links = transport.link_figures().snapshot();
        assert_eq!(links[0].kind, kind, "{links:?}");
    }
    std::thread::scope(|scope| {
        scope.spawn(|| send_sequence(&one, 1, 2, 0, SIGNALS, BATCH));
        scope.spawn(|| send_sequence(&two, 2, 1, 0, SIGNALS, BATCH));
        scope.spawn(move || inbox_two.expect_sequence(1, 0, SIGNALS));
        inbox_one.expect_sequence(2, 0, SIGNALS);
    });
    check_batching(&one);
    check_batching(&two);
    one.shutdown();
    two.shutdown();
}

fn check_batching(transport: &Transport) {
    let stats = transport.stats();
    let signals = u64::from(SIGNALS);
    assert_eq!(stats.signals_received, signals, "{stats:?}");
    // One hello each way besides the data.
    assert_eq!(stats.signals_sent, signals + 1, "{stats:?}");
    assert_eq!(stats.signals_dropped, 0, "{stats:?}");
    assert_eq!(stats.frames_refused, 0, "{stats:?}");
    assert!(
        stats.frames_sent * 10 < signals,
        "frames not batched: {stats:?}"
    );
    assert!(
        stats.write_syscalls * 10 < signals,
        "writes not batched: {stats:?}"
    );
    assert!(stats.frames_received * 10 < signals, "{stats:?}");
    assert!(
        stats.bytes_sent > 0 && stats.bytes_received > 0,
        "{stats:?}"
    );
}

#[test]
fn exchange_with_send_thread() {
    exchange(true, LinkKind::Local);
}

#[test]
fn exchange_with_flushing_senders() {
    exchange(false, LinkKind::Local);
}

#[test]
fn exchange_over_tcp_with_send_thread() {
    exchange(true, LinkKind::Tcp);
}

#[test]
fn exchange_over_tcp_with_flushing_senders() {
    exchange(false, LinkKind::Tcp);
}

#[test]
fn many_senders_keep_their_own_order() {
    const SENDERS: u32 = 4;
    const PER_SENDER: u32 = 20_000;
    let ((one, _inbox_one), (two, inbox_two)) = pair(true, &[]);
    std::thread::scope(|scope| {
        for part in 0..SENDERS {
            let one = &one;
            scope.spawn(move || send_sequence(one, 1, 2, part * PER_SENDER, PER_SENDER, 100));
        }
    });
    // Each sender's signals arrive in its order; senders interleave freely.
    let mut next: Vec<u32> = (0..SENDERS).map(|part| part * PER_SENDER).collect();
    for _ in 0..SENDERS * PER_SENDER {
        let signal = inbox_two.next();
        let signal::SignalBody::Heartbeat { view_id } = signal.body else {
            panic!("unexpected {signal:?}");
        };
        let part = (view_id / PER_SENDER) as usize;
        assert_eq!(view_id, next[part], "sender {part} out of order");
        next[part] += 1;
    }
    one.shutdown();
    two.shutdown();
}

#[test]
fn signals_to_unknown_or_disconnected_nodes_are_dropped() {
    let ((one, _inbox_one), (two, _inbox_two)) = pair(true, &[]);
    let mut sender = one.sender();
    sender.send(&heartbeat(1, 7, 1)); // node 7 is no peer
    sender.send(&heartbeat(1, 1, 2)); // to itself
    sender.flush();
    assert_eq!(one.stats().signals_dropped, 2);
    drop(sender);
    one.shutdown();
    two.shutdown();
}
