//! A peer's close is noticed even when it comes with the peer's last bytes.
//!
//! The receive thread skips the read after a short one (the socket is
//! empty of bytes, and later bytes raise a new edge of the edge-triggered
//! poll), but a close that arrived with the bytes raised no edge of its
//! own: only another read shows it. A node killed right after it sent
//! something stayed connected until the heartbeat gave up on it. Here a
//! raw peer sends a frame and its close in one TCP segment (`TCP_CORK`),
//! so both are there when the poll reports the connection.

mod common;

use std::io::Write;
use std::net::Shutdown;

use common::*;
use signal::SignalBody;

#[test]
fn a_close_that_comes_with_the_last_bytes_is_noticed() {
    let ((one, inbox_one), (two, _inbox_two)) = pair(true, &[RAW_NODE]);
    let addr = one.local_addr().expect("node 1 listens");
    for round in 0..5 {
        let mut raw = raw_handshake(addr);
        inbox_one.expect_body(SignalBody::NodeConnected {
            node: node(RAW_NODE),
        });
        rustix::net::sockopt::set_tcp_cork(&raw, true).expect("TCP_CORK");
        raw.write_all(&frame(&[heartbeat(RAW_NODE, 1, round)]))
            .expect("write to node 1");
        // The close goes out with the corked frame.
        raw.shutdown(Shutdown::Write).expect("shutdown");
        inbox_one.expect_sequence(RAW_NODE, round, 1);
        inbox_one.expect_body(SignalBody::NodeDisconnected {
            node: node(RAW_NODE),
        });
        assert!(!one.is_connected(node(RAW_NODE)), "round {round}");
    }
    one.shutdown();
    two.shutdown();
}
