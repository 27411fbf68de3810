//! A closed or broken connection is noticed on both sides
//! (`NodeDisconnected`), comes back (`NodeConnected`), and carries traffic again.

mod common;

use common::*;
use signal::SignalBody;

fn disconnected(id: u8) -> SignalBody {
    SignalBody::NodeDisconnected { node: node(id) }
}

fn connected(id: u8) -> SignalBody {
    SignalBody::NodeConnected { node: node(id) }
}

fn disconnect_and_reconnect(send_thread: bool) {
    // Node 2 waits long enough before reconnecting that the drop check below
    // runs while the link is surely down.
    let ((one, inbox_one), (two, inbox_two)) = pair_with(send_thread, &[], &[], 300);
    send_sequence(&one, 1, 2, 0, 1_000, 10);
    inbox_two.expect_sequence(1, 0, 1_000);

    one.disconnect(node(2));
    // From the call on, signals to the node are dropped.
    assert!(!one.is_connected(node(2)));
    let dropped_before = one.stats().signals_dropped;
    send_sequence(&one, 1, 2, 5_000, 3, 10);
    assert_eq!(one.stats().signals_dropped, dropped_before + 3);

    inbox_one.expect_body(disconnected(2));
    inbox_two.expect_body(disconnected(1));
    inbox_two.expect_body(connected(1));
    inbox_one.expect_body(connected(2));
    wait_until("both sides are up again", || {
        one.is_connected(node(2)) && two.is_connected(node(1))
    });

    send_sequence(&one, 1, 2, 1_000, 1_000, 10);
    send_sequence(&two, 2, 1, 0, 1_000, 10);
    inbox_two.expect_sequence(1, 1_000, 1_000);
    inbox_one.expect_sequence(2, 0, 1_000);
    one.shutdown();
    two.shutdown();
}

#[test]
fn disconnect_then_reconnect_with_send_thread() {
    disconnect_and_reconnect(true);
}

#[test]
fn disconnect_then_reconnect_with_flushing_senders() {
    disconnect_and_reconnect(false);
}

#[test]
fn connecting_side_may_disconnect_too() {
    let ((one, inbox_one), (two, inbox_two)) = pair(true, &[]);
    two.disconnect(node(1));
    inbox_two.expect_body(disconnected(1));
    inbox_one.expect_body(disconnected(2));
    inbox_two.expect_body(connected(1));
    inbox_one.expect_body(connected(2));
    send_sequence(&two, 2, 1, 0, 100, 10);
    inbox_one.expect_sequence(2, 0, 100);
    one.shutdown();
    two.shutdown();
}

#[test]
fn listener_restarts_on_the_same_port() {
    let ((one, _inbox_one), (two, inbox_two)) = pair(true, &[]);
    let addr = one.local_addr().expect("node 1 listens");
    one.shutdown();
    inbox_two.expect_body(disconnected(1));
    assert!(!two.is_connected(node(1)));

    // Node 1 comes back on the same address; node 2 keeps trying until it is there.
    let mut config = config(1, true, &[(2, None)], true);
    config.listen = Some(addr);
    let (one, inbox_one) = start(config);
    inbox_one.expect_body(connected(2));
    inbox_two.expect_body(connected(1));

    send_sequence(&two, 2, 1, 0, 500, 50);
    send_sequence(&one, 1, 2, 0, 500, 50);
    inbox_one.expect_sequence(2, 0, 500);
    inbox_two.expect_sequence(1, 0, 500);
    one.shutdown();
    two.shutdown();
}

#[test]
fn connecting_side_keeps_trying_until_the_listener_exists() {
    init_tracing();
    // Reserve a free port, then release it so nothing listens there yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let (two, inbox_two) = start(config(2, false, &[(1, Some(addr))], true));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!two.is_connected(node(1)));

    let mut config = config(1, true, &[(2, None)], true);
    config.listen = Some(addr);
    let (one, inbox_one) = start(config);
    inbox_one.expect_body(connected(2));
    inbox_two.expect_body(connected(1));
    one.shutdown();
    two.shutdown();
}
