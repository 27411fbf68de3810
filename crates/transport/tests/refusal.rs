//! Bad input from the network is refused and its connection closed, while
//! the good connection between nodes 1 and 2 keeps working.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use common::*;
use signal::frame::{FRAME_HEADER_BYTES, FRAME_PAYLOAD_MAX_BYTES, WIRE_VERSION};
use signal::{BlockNumber, BlockRef, Signal, SignalBody, VERSION};
use transport::Transport;

/// The peer closed the connection (an orderly close or a reset).
fn assert_closed(stream: &mut TcpStream) {
    let mut buffer = [0u8; 256];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                ) =>
            {
                return
            }
            Err(error) => panic!("connection not closed: {error}"),
        }
    }
}

/// Nodes 1 and 2 still talk both ways, and nothing else reached node 1.
fn assert_good_link_works(one: &Transport, inbox_one: &Inbox, two: &Transport, inbox_two: &Inbox) {
    assert!(one.is_connected(node(2)) && two.is_connected(node(1)));
    send_sequence(two, 2, 1, 0, 200, 20);
    send_sequence(one, 1, 2, 0, 200, 20);
    inbox_one.expect_sequence(2, 0, 200);
    inbox_two.expect_sequence(1, 0, 200);
}

/// Sends `bytes` on a fresh raw connection and expects it refused.
fn refused_before_handshake(bytes: &[u8]) {
    let ((one, inbox_one), (two, inbox_two)) = pair(true, &[RAW_NODE]);
    let addr = one.local_addr().expect("node 1 listens");
    let mut raw = raw_connect(addr);
    raw.write_all(bytes).expect("write to node 1");
    assert_closed(&mut raw);
    wait_until("the refusal is counted", || one.stats().frames_refused == 1);
    assert!(!one.is_connected(node(RAW_NODE)));
    assert_good_link_works(&one, &inbox_one, &two, &inbox_two);
    one.shutdown();
    two.shutdown();
}

#[test]
fn garbage_is_refused() {
    refused_before_handshake(b"GET / HTTP/1.1\r\nHost: skarv\r\n\r\n");
}

#[test]
fn bad_checksum_is_refused() {
    let mut bytes = frame(&[hello(RAW_NODE, 1)]);
    bytes[12] ^= 0xff;
    refused_before_handshake(&bytes);
}

#[test]
fn bad_header_is_refused_before_its_payload() {
    // A header announcing more than a frame may carry; no payload follows,
    // and node 1 must not wait for it.
    let mut bytes = frame(&[hello(RAW_NODE, 1)]);
    bytes[8..12].copy_from_slice(&(FRAME_PAYLOAD_MAX_BYTES as u32 + 1).to_le_bytes());
    refused_before_handshake(&bytes[..FRAME_HEADER_BYTES]);
}

#[test]
fn hello_to_another_node_is_refused() {
    refused_before_handshake(&frame(&[hello(RAW_NODE, 4)]));
}

#[test]
fn hello_from_unconfigured_node_is_refused() {
    refused_before_handshake(&frame(&[hello(9, 1)]));
}

#[test]
fn hello_with_incompatible_version_is_refused() {
    refused_before_handshake(&frame(&[hello_with_version(RAW_NODE, 1, VERSION + 10_000)]));
}

/// A node of the previous wire version (no `LdmKeyConf::ok_in_order`) is
/// refused on its first frame, before its hello is read.
#[test]
fn frame_of_an_older_wire_version_is_refused() {
    let mut bytes = frame(&[hello(RAW_NODE, 1)]);
    bytes[2] = WIRE_VERSION - 1;
    assert_eq!(
        signal::frame::check_header(&bytes).map_err(|e| e.to_string()),
        Err(format!(
            "unsupported wire version {} (this build speaks {WIRE_VERSION})",
            WIRE_VERSION - 1
        ))
    );
    refused_before_handshake(&bytes);
}

#[test]
fn signal_before_hello_is_refused() {
    refused_before_handshake(&frame(&[heartbeat(RAW_NODE, 1, 1)]));
}

/// Completes the handshake as `RAW_NODE`, then sends `bad`: the connection
/// goes up, the bad frame closes it, and nothing of it is delivered.
fn refused_after_handshake(bad: Signal) {
    refused_after_handshake_as(Peer::DataNode, heartbeat(RAW_NODE, 1, 1), bad);
}

/// What node 1 is configured to take `RAW_NODE` for.
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    DataNode,
    Api,
}

fn pair_with_raw(peer: Peer) -> ((Transport, Inbox), (Transport, Inbox)) {
    match peer {
        Peer::DataNode => pair_with(true, &[RAW_NODE], &[], 20),
        Peer::Api => pair_with(true, &[], &[RAW_NODE], 20),
    }
}

/// `refused_after_handshake` from a `peer`, whose frame starts with `good`
/// (a signal it may send: the frame is refused whole).
fn refused_after_handshake_as(peer: Peer, good: Signal, bad: Signal) {
    let ((one, inbox_one), (two, inbox_two)) = pair_with_raw(peer);
    let addr = one.local_addr().expect("node 1 listens");
    let mut raw = raw_handshake(addr);
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&[good, bad]))
        .expect("write to node 1");
    assert_closed(&mut raw);
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(RAW_NODE),
    });
    assert_eq!(one.stats().frames_refused, 1);
    assert_eq!(one.stats().signals_received, 0);
    assert_good_link_works(&one, &inbox_one, &two, &inbox_two);
    one.shutdown();
    two.shutdown();
}

#[test]
fn forged_sender_is_refused() {
    refused_after_handshake(heartbeat(2, 1, 2));
}

#[test]
fn signal_for_another_node_is_refused() {
    refused_after_handshake(heartbeat(RAW_NODE, 2, 2));
}

#[test]
fn local_only_signal_is_refused() {
    refused_after_handshake(Signal {
        receiver: membership(1),
        sender: membership(RAW_NODE),
        body: SignalBody::NodeDisconnected { node: node(2) },
    });
}

#[test]
fn second_hello_is_refused() {
    refused_after_handshake(hello(RAW_NODE, 1));
}

fn tc(id: u8) -> BlockRef {
    BlockRef::new(node(id), BlockNumber::TRANSACTION_COORDINATOR, 0)
}

fn api_request(body: SignalBody) -> Signal {
    Signal {
        receiver: tc(1),
        sender: BlockRef::new(node(RAW_NODE), BlockNumber::API_CLUSTER, 0),
        body,
    }
}

fn key_req() -> Signal {
    api_request(SignalBody::TcKeyReq {
        tx_id: 7,
        flags: 3,
        ops: vec![1, 2, 3],
    })
}

/// An API node's requests go through; a signal between data node blocks
/// from it closes its connection, though a data node may send the same.
#[test]
fn api_node_sends_requests_only() {
    let ldm_key_req = |sender: BlockRef| Signal {
        receiver: tc(1),
        sender,
        body: SignalBody::LdmKeyReq {
            tx_id: 7,
            tc: tc(1),
            chain: [node(1)].into_iter().collect(),
            ops: vec![1, 2, 3],
        },
    };
    let requests = [
        api_request(SignalBody::ApiRegReq { version: VERSION }),
        key_req(),
        api_request(SignalBody::TcScanNextReq {
            tx_id: 7,
            scan_id: 1,
            close: true,
        }),
        api_request(SignalBody::TcWaitGciReq {
            gci: 3,
            incarnation: 0,
        }),
        api_request(SignalBody::DictGetTableReq {
            request_id: 1,
            table_id: 0,
            name: "t".to_string(),
        }),
    ];
    assert!(requests.iter().all(|r| r.body.is_api_request()));
    let ((one, inbox_one), (two, _inbox_two)) = pair_with_raw(Peer::Api);
    let mut raw = raw_handshake(one.local_addr().expect("node 1 listens"));
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&requests)).expect("write to node 1");
    for request in requests {
        assert_eq!(inbox_one.next(), request);
    }
    drop(raw);
    one.shutdown();
    two.shutdown();

    let from_raw = BlockRef::new(node(RAW_NODE), BlockNumber::LOCAL_DATA_MANAGER, 0);
    let registration = api_request(SignalBody::ApiRegReq { version: VERSION });
    refused_after_handshake_as(Peer::Api, registration.clone(), ldm_key_req(from_raw));
    refused_after_handshake_as(Peer::Api, registration, heartbeat(RAW_NODE, 1, 1));

    let ((one, inbox_one), (two, _inbox_two)) = pair_with_raw(Peer::DataNode);
    let mut raw = raw_handshake(one.local_addr().expect("node 1 listens"));
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&[ldm_key_req(from_raw)]))
        .expect("write to node 1");
    assert_eq!(inbox_one.next(), ldm_key_req(from_raw));
    drop(raw);
    one.shutdown();
    two.shutdown();
}

#[test]
fn good_raw_peer_is_delivered() {
    let ((one, inbox_one), (two, _inbox_two)) = pair(true, &[RAW_NODE]);
    let addr = one.local_addr().expect("node 1 listens");
    let mut raw = raw_handshake(addr);
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&[
        heartbeat(RAW_NODE, 1, 0),
        heartbeat(RAW_NODE, 1, 1),
    ]))
    .expect("write to node 1");
    inbox_one.expect_sequence(RAW_NODE, 0, 2);
    // And node 1 sends to it.
    let mut sender = one.sender();
    sender.send(&heartbeat(1, RAW_NODE, 42));
    sender.flush();
    assert_eq!(read_frame(&mut raw), vec![heartbeat(1, RAW_NODE, 42)]);
    drop(sender);
    one.shutdown();
    two.shutdown();
}

#[test]
fn restarted_peer_replaces_its_old_connection() {
    let ((one, inbox_one), (two, _inbox_two)) = pair(true, &[RAW_NODE]);
    let addr = one.local_addr().expect("node 1 listens");
    let mut first = raw_handshake(addr);
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    let mut second = raw_handshake(addr);
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(RAW_NODE),
    });
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    assert_closed(&mut first);
    second
        .write_all(&frame(&[heartbeat(RAW_NODE, 1, 7)]))
        .expect("write to node 1");
    inbox_one.expect_sequence(RAW_NODE, 7, 1);
    one.shutdown();
    two.shutdown();
}

/// An API node's first signal is its registration: a transaction from an
/// API node the data node does not know of would outlive the API node.
#[test]
fn api_node_requests_before_its_registration_are_refused() {
    let ((one, inbox_one), (two, inbox_two)) = pair_with_raw(Peer::Api);
    let mut raw = raw_handshake(one.local_addr().expect("node 1 listens"));
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&[key_req()]))
        .expect("write to node 1");
    assert_closed(&mut raw);
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(RAW_NODE),
    });
    assert_eq!(one.stats().frames_refused, 1);
    assert_eq!(one.stats().signals_received, 0);
    // A new connection registers again before its requests.
    let mut raw = raw_handshake(one.local_addr().expect("node 1 listens"));
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    let registration = api_request(SignalBody::ApiRegReq { version: VERSION });
    raw.write_all(&frame(std::slice::from_ref(&registration)))
        .expect("write to node 1");
    raw.write_all(&frame(&[key_req()]))
        .expect("write to node 1");
    assert_eq!(inbox_one.next(), registration);
    assert_eq!(inbox_one.next(), key_req());
    drop(raw);
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(RAW_NODE),
    });
    assert_good_link_works(&one, &inbox_one, &two, &inbox_two);
    one.shutdown();
    two.shutdown();
}

/// Idle sockets that never send a hello (a port flood) do not keep a node
/// out: the newest connection takes the place of the oldest idle one.
#[test]
fn a_flood_of_idle_connections_never_keeps_a_node_out() {
    /// Above the transport's limit of connections waiting for a hello (64).
    const IDLE_CONNECTIONS: usize = 200;
    let ((one, inbox_one), (two, inbox_two)) = pair(true, &[RAW_NODE]);
    let addr = one.local_addr().expect("node 1 listens");
    let idle: Vec<TcpStream> = (0..IDLE_CONNECTIONS).map(|_| raw_connect(addr)).collect();
    let mut raw = raw_handshake(addr);
    inbox_one.expect_body(SignalBody::NodeConnected {
        node: node(RAW_NODE),
    });
    raw.write_all(&frame(&[heartbeat(RAW_NODE, 1, 0)]))
        .expect("write to node 1");
    inbox_one.expect_sequence(RAW_NODE, 0, 1);
    drop(idle);
    drop(raw);
    inbox_one.expect_body(SignalBody::NodeDisconnected {
        node: node(RAW_NODE),
    });
    assert_good_link_works(&one, &inbox_one, &two, &inbox_two);
    one.shutdown();
    two.shutdown();
}
