//! Helpers shared by the transport's integration tests: a sink that
//! forwards to a channel, node configurations on 127.0.0.1, and bounded
//! waits (every wait fails the test after `WAIT_MS` instead of hanging).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use signal::frame::FRAME_HEADER_BYTES;
use signal::{
    decode_frame, encode_frame, BlockNumber, BlockRef, NodeId, Signal, SignalBody, VERSION,
};
use transport::{InboundSink, PeerConfig, Transport, TransportConfig};

/// Longest wait for anything; generous for a loaded 2-core machine.
pub const WAIT_MS: u64 = 20_000;

pub fn node(id: u8) -> NodeId {
    NodeId::new(id).expect("test node ids are nonzero")
}

pub fn membership(id: u8) -> BlockRef {
    BlockRef::new(node(id), BlockNumber::MEMBERSHIP, 0)
}

pub fn heartbeat(from: u8, to: u8, view_id: u32) -> Signal {
    Signal {
        receiver: membership(to),
        sender: membership(from),
        body: SignalBody::Heartbeat { view_id },
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

struct ChannelSink(Sender<Signal>);

impl InboundSink for ChannelSink {
    fn deliver(&mut self, signal: Signal) {
        // The test may have finished with its inbox; nothing to do then.
        let _ = self.0.send(signal);
    }

    fn flush(&mut self) {}
}

/// What one transport delivered, in order.
pub struct Inbox(Receiver<Signal>);

impl Inbox {
    pub fn next(&self) -> Signal {
        match self.0.recv_timeout(Duration::from_millis(WAIT_MS)) {
            Ok(signal) => signal,
            Err(RecvTimeoutError::Timeout) => panic!("nothing delivered within {WAIT_MS} ms"),
            Err(RecvTimeoutError::Disconnected) => panic!("the transport is gone"),
        }
    }

    /// The next signal, if one arrives within `ms`.
    pub fn next_within(&self, ms: u64) -> Option<Signal> {
        self.0.recv_timeout(Duration::from_millis(ms)).ok()
    }

    pub fn expect_body(&self, body: SignalBody) -> Signal {
        let signal = self.next();
        assert_eq!(signal.body, body, "unexpected signal {signal:?}");
        signal
    }

    /// Receives `count` heartbeats from `from`, asserting they come in
    /// sequence from `first`; other signals are not expected.
    pub fn expect_sequence(&self, from: u8, first: u32, count: u32) {
        for expected in first..first + count {
            let signal = self.next();
            assert_eq!(signal.sender, membership(from), "{signal:?}");
            match signal.body {
                SignalBody::Heartbeat { view_id } => assert_eq!(view_id, expected),
                other => panic!("expected heartbeat {expected}, got {other:?}"),
            }
        }
    }
}

pub fn config(
    me: u8,
    listen: bool,
    peers: &[(u8, Option<SocketAddr>)],
    send_thread: bool,
) -> TransportConfig {
    let mut config = TransportConfig::new(node(me), membership(me));
    if listen {
        config.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    }
    config.peers = peers
        .iter()
        .map(|&(id, connect_to)| PeerConfig {
            node: node(id),
            connect_to,
            api: false,
        })
        .collect();
    config.reconnect_interval_ms = 20;
    config.send_thread = send_thread;
    config
}

pub fn start(config: TransportConfig) -> (Transport, Inbox) {
    let (sender, receiver) = mpsc::channel();
    let transport =
        Transport::start(config, Box::new(ChannelSink(sender))).expect("transport starts");
    (transport, Inbox(receiver))
}

/// Node 1 listens (and accepts nodes 2 and `extra_peers`), node 2 connects
/// to it; returns once both saw `NodeConnected`.
pub fn pair(send_thread: bool, extra_peers: &[u8]) -> ((Transport, Inbox), (Transport, Inbox)) {
    pair_with(send_thread, extra_peers, &[], 20)
}

/// `pair`, with node 2 retrying its connect every `reconnect_ms`, and
/// `api_peers` connecting to node 1 as API nodes.
pub fn pair_with(
    send_thread: bool,
    extra_peers: &[u8],
    api_peers: &[u8],
    reconnect_ms: u64,
) -> ((Transport, Inbox), (Transport, Inbox)) {
    pair_full(send_thread, extra_peers, api_peers, reconnect_ms, true)
}

/// `pair`, with both nodes' `local_sockets` as `local` (false: the link
/// runs on TCP although both are on this host).
pub fn pair_over(send_thread: bool, local: bool) -> ((Transport, Inbox), (Transport, Inbox)) {
    pair_full(send_thread, &[], &[], 20, local)
}

fn pair_full(
    send_thread: bool,
    extra_peers: &[u8],
    api_peers: &[u8],
    reconnect_ms: u64,
    local: bool,
) -> ((Transport, Inbox), (Transport, Inbox)) {
    init_tracing();
    let mut peers = vec![(2, None)];
    peers.extend(extra_peers.iter().chain(api_peers).map(|&id| (id, None)));
    let mut config_one = config(1, true, &peers, send_thread);
    for peer in &mut config_one.peers {
        peer.api = api_peers.iter().any(|&id| node(id) == peer.node);
    }
    config_one.local_sockets = local;
    let one = start(config_one);
    let addr = one.0.local_addr().expect("node 1 listens");
    let mut config_two = config(2, false, &[(1, Some(addr))], send_thread);
    config_two.reconnect_interval_ms = reconnect_ms;
    config_two.local_sockets = local;
    let two = start(config_two);
    one.1
        .expect_body(SignalBody::NodeConnected { node: node(2) });
    two.1
        .expect_body(SignalBody::NodeConnected { node: node(1) });
    assert!(one.0.is_connected(node(2)));
    assert!(two.0.is_connected(node(1)));
    (one, two)
}

/// Sends heartbeats `first..first + count` from `from` to `to`, flushing every `batch`.
pub fn send_sequence(transport: &Transport, from: u8, to: u8, first: u32, count: u32, batch: u32) {
    let mut sender = transport.sender();
    for view_id in first..first + count {
        sender.send(&heartbeat(from, to, view_id));
        if (view_id - first + 1).is_multiple_of(batch) {
            sender.flush();
        }
    }
    sender.flush();
}

pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A node id that connects to node 1 through a raw socket (a peer whose
/// bytes a test writes itself).
pub const RAW_NODE: u8 = 3;

pub fn process(id: u8) -> BlockRef {
    BlockRef::new(node(id), BlockNumber::PROCESS, 0)
}

pub fn hello_with_version(from: u8, to: u8, version: u32) -> Signal {
    Signal {
        receiver: process(to),
        sender: process(from),
        body: SignalBody::TransportHello {
            from: node(from),
            to: node(to),
            version,
        },
    }
}

pub fn hello(from: u8, to: u8) -> Signal {
    hello_with_version(from, to, VERSION)
}

pub fn frame(signals: &[Signal]) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_frame(signals, &mut bytes).expect("test frames fit");
    bytes
}

pub fn raw_connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect to node 1");
    stream
        .set_read_timeout(Some(Duration::from_millis(WAIT_MS)))
        .expect("read timeout");
    stream
}

/// Reads one whole frame and returns its signals.
pub fn read_frame(stream: &mut TcpStream) -> Vec<Signal> {
    let mut bytes = vec![0u8; FRAME_HEADER_BYTES];
    stream.read_exact(&mut bytes).expect("a frame header");
    let payload = signal::frame::check_header(&bytes).expect("a valid header");
    bytes.resize(FRAME_HEADER_BYTES + payload, 0);
    stream
        .read_exact(&mut bytes[FRAME_HEADER_BYTES..])
        .expect("the frame payload");
    let (frame, used) = decode_frame(&bytes).expect("valid").expect("whole");
    assert_eq!(used, bytes.len());
    frame
        .signals()
        .collect::<Result<_, _>>()
        .expect("valid signals")
}

/// Connects as `RAW_NODE` and completes the handshake.
pub fn raw_handshake(addr: SocketAddr) -> TcpStream {
    let mut stream = raw_connect(addr);
    stream
        .write_all(&frame(&[hello(RAW_NODE, 1)]))
        .expect("send hello");
    let reply = read_frame(&mut stream);
    assert_eq!(reply, vec![hello(1, RAW_NODE)]);
    stream
}
