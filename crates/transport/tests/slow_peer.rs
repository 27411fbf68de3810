//! A peer that stops reading is disconnected once the bytes queued for it
//! pass `send_buffer_max_bytes`, instead of growing our memory.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;
use signal::frame::{FRAME_HEADER_BYTES, FRAME_MAX_BYTES};
use signal::{encode_frame, BlockNumber, BlockRef, Severity, Signal, SignalBody, VERSION};

const SLOW_NODE: u8 = 3;
/// Enough to fill the socket buffers of loopback and our send buffer many times over.
const SEND_MAX_BYTES: usize = 512 << 20;

fn slow_peer_is_disconnected(send_thread: bool) {
    init_tracing();
    let mut config = config(1, true, &[(SLOW_NODE, None)], send_thread);
    config.send_buffer_max_bytes = FRAME_MAX_BYTES;
    let (one, inbox_one) = start(config);
    let addr = one.local_addr().expect("node 1 listens");

    // Handshake by hand, then never read again.
    let process = |id| BlockRef::new(node(id), BlockNumber::PROCESS, 0);
    let hello = Signal {
        receiver: process(1),
        sender: process(SLOW_NODE),
        body: SignalBody::TransportHello {
            from: node(SLOW_NODE),
            to: node(1),
            version: VERSION,
        },
    };
    let mut bytes = Vec::new();
    encode_frame(&[hello], &mut bytes).expect("fits");
    let mut raw = TcpStream::connect(addr).expect("connect");
    raw.write_all(&bytes).expect("hello");
    let mut reply = [0u8; FRAME_HEADER_BYTES];
    raw.read_exact(&mut reply).expect("hello reply");
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(SLOW_NODE),
    });

    let big = Signal {
        receiver: membership(SLOW_NODE),
        sender: membership(1),
        body: SignalBody::MgmEventRep {
            severity: Severity::Info,
            category: signal::EventCategory::Info,
            level: 7,
            text: "x".repeat(64 << 10),
        },
    };
    let mut sender = one.sender();
    let mut sent_bytes = 0;
    while one.is_connected(node(SLOW_NODE)) && sent_bytes < SEND_MAX_BYTES {
        sender.send(&big);
        sender.flush();
        sent_bytes += 64 << 10;
    }
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(SLOW_NODE),
    });
    assert!(!one.is_connected(node(SLOW_NODE)));
    assert!(one.stats().signals_dropped > 0);
    drop(sender);
    drop(raw);
    one.shutdown();
}

#[test]
fn slow_peer_is_disconnected_with_send_thread() {
    slow_peer_is_disconnected(true);
}

#[test]
fn slow_peer_is_disconnected_with_flushing_senders() {
    slow_peer_is_disconnected(false);
}
