//! The TCP transporter: how signals leave one node and enter another.
//!
//! Every pair of nodes shares exactly one TCP connection (DESIGN.md §2,
//! "Transporters"), or one Unix-domain socket when both are on the same
//! host ([`stream`], `TransportConfig::local_sockets`). One side connects (its peer has a `connect_to`
//! address), the other accepts. Both sides open with a `TransportHello`
//! frame; only after it checks out is the connection *up*, and the node's
//! membership block hears `NodeConnected`. When an up connection breaks or
//! is closed, it hears `NodeDisconnected`; the connecting side keeps trying
//! again every `reconnect_interval_ms`.
//!
//! Threads:
//! - the **receive loop** (one `mio::Poll`) owns the listener, the read
//!   side of every socket and all outgoing connects; it decodes frames,
//!   checks every signal and hands it to the [`InboundSink`]. It runs in
//!   turns: [`Transport::start`] gives it a thread of its own (`skarv-recv`)
//!   that turns it forever; [`Transport::start_polled`] hands it to the
//!   caller as a [`Receiver`] whose thread calls [`Receiver::turn`] between
//!   its other work (NDB's single-threaded `ndbd` receives, executes and
//!   sends on one thread);
//! - each user thread owns a [`TransportSender`] that encodes signals into
//!   its own per-peer frame buffers, so many signals share one frame and
//!   one write;
//! - optionally a **send thread** that gathers the buffers of all senders
//!   and writes each peer's pending buffers with one `writev`. Without it,
//!   [`TransportSender::flush`] writes itself.
//!
//! The contract is weak on purpose: signals to a peer that is not up are
//! dropped (and counted), so are signals queued for a connection that broke;
//! the protocols above tolerate loss, and membership notices the failure.
//! Input from the network is never trusted: a decode or check failure
//! closes the connection, and the peer reconnects.

mod encode;
mod receive_thread;
mod send_thread;
mod sender;
mod shared;
pub mod stream;
mod writer;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use signal::{BlockRef, NodeId, Signal};

pub use sender::TransportSender;

use receive_thread::ReceiveLoop;
use send_thread::SendThread;
use shared::{PeerShared, SendShared, Shared};

/// How often a connecting side retries while its peer is unreachable.
pub const RECONNECT_INTERVAL_DEFAULT_MS: u64 = 100;
/// Bytes queued towards one peer before it is declared too slow.
pub const SEND_BUFFER_DEFAULT_MAX_BYTES: usize = 16 << 20;

/// Where received signals go: the data node's runtime injector, or an API
/// node's receiver. Called only on the thread that runs the receive loop.
pub trait InboundSink: Send {
    fn deliver(&mut self, signal: Signal);
    /// Delivers `signal` if there is room now; `Err` gives it back when
    /// there is not. The receive loop then keeps it, and every later signal
    /// from the same peer, in order, stops reading that peer's connection,
    /// and offers them again on later turns. A sink whose consumer runs on
    /// the receiving thread itself must refuse rather than wait: waiting
    /// could never end. By default it delivers and never refuses.
    fn offer(&mut self, signal: Signal) -> Result<(), Signal> {
        self.deliver(signal);
        Ok(())
    }
    /// End of one receive round: wake whoever got signals.
    fn flush(&mut self);
}

/// One node this node talks to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    pub node: NodeId,
    /// Some: we connect to this address. None: the peer connects to us.
    pub connect_to: Option<SocketAddr>,
    /// An API node: only its requests are taken from it
    /// (`SignalBody::is_api_request`); any other signal closes its connection.
    pub api: bool,
}

#[derive(Clone, Debug)]
pub struct TransportConfig {
    pub me: NodeId,
    /// Where peers connect to us; None for a node that only connects out.
    pub listen: Option<SocketAddr>,
    pub peers: Vec<PeerConfig>,
    /// Where `NodeConnected`/`NodeDisconnected` notices go (e.g. the membership block).
    pub notify: BlockRef,
    pub reconnect_interval_ms: u64,
    /// Per peer; must hold at least one whole frame.
    pub send_buffer_max_bytes: usize,
    /// true: a send thread writes; false: [`TransportSender::flush`] writes itself.
    pub send_thread: bool,
    pub recv_cpubind: Option<usize>,
    pub send_cpubind: Option<usize>,
    /// Links to nodes on this host run on a Unix-domain socket ([`stream`]):
    /// the listener also listens on its local name, and connects to a
    /// loopback address try the peer's. The data node's `UseShm`.
    pub local_sockets: bool,
}

impl TransportConfig {
    /// A configuration with the defaults: no listener, no peers, a send thread.
    pub fn new(me: NodeId, notify: BlockRef) -> TransportConfig {
        TransportConfig {
            me,
            listen: None,
            peers: Vec::new(),
            notify,
            reconnect_interval_ms: RECONNECT_INTERVAL_DEFAULT_MS,
            send_buffer_max_bytes: SEND_BUFFER_DEFAULT_MAX_BYTES,
            send_thread: true,
            recv_cpubind: None,
            send_cpubind: None,
            local_sockets: true,
        }
    }
}

/// Counters since the transport started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Frames, bytes and signals completely written to sockets (hellos included).
    pub frames_sent: u64,
    pub bytes_sent: u64,
    pub signals_sent: u64,
    /// `write`/`writev` calls, including those that found the socket full.
    pub write_syscalls: u64,
    /// Checked frames and delivered signals (hellos count as frames only).
    pub frames_received: u64,
    pub bytes_received: u64,
    pub signals_received: u64,
    /// Signals not sent: peer not up, connection broke, buffer overflow, unknown receiver node.
    pub signals_dropped: u64,
    /// Frames (or byte streams) that failed decoding or a check; each closed its connection.
    pub frames_refused: u64,
}

/// One peer's link as ndbinfo's `transporters` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFigure {
    pub peer: NodeId,
    pub up: bool,
    /// Connections to this peer that came up since the transport started.
    pub connect_count: u64,
    /// Completely written to the socket, hellos included.
    pub bytes_sent: u64,
    pub frames_sent: u64,
    /// Read from the socket, and checked frames (hellos included).
    pub bytes_received: u64,
    pub frames_received: u64,
    /// The socket of the last connection that came up (TCP before any).
    pub kind: stream::LinkKind,
}

/// A reader of every link's figures ([`Transport::link_figures`]).
#[derive(Clone)]
pub struct LinkFigures {
    shared: Arc<Shared>,
}

impl LinkFigures {
    /// Each configured peer's link, in configuration order.
    pub fn snapshot(&self) -> Vec<LinkFigure> {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared
            .peers
            .iter()
            .map(|peer| {
                let link = peer.link();
                let c = &peer.counters;
                LinkFigure {
                    peer: peer.node,
                    up: link.up,
                    connect_count: link.generation,
                    bytes_sent: c.bytes_sent.load(Relaxed),
                    frames_sent: c.frames_sent.load(Relaxed),
                    bytes_received: c.bytes_received.load(Relaxed),
                    frames_received: c.frames_received.load(Relaxed),
                    kind: if peer.local.load(std::sync::atomic::Ordering::Acquire) {
                        stream::LinkKind::Local
                    } else {
                        stream::LinkKind::Tcp
                    },
                }
            })
            .collect()
    }
}

impl std::fmt::Debug for LinkFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkFigures")
            .field("peers", &self.shared.peers.len())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("node {node} is listed as a peer of itself")]
    PeerIsSelf { node: NodeId },
    #[error("node {node} is listed twice as a peer")]
    DuplicatePeer { node: NodeId },
    #[error(
        "send_buffer_max_bytes {bytes} is smaller than one frame ({min} bytes)",
        min = signal::frame::FRAME_MAX_BYTES
    )]
    SendBufferTooSmall { bytes: usize },
    #[error("reconnect_interval_ms must be at least 1")]
    ReconnectIntervalZero,
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

/// A running transporter; see the module documentation.
pub struct Transport {
    shared: Arc<Shared>,
    local_addr: Option<SocketAddr>,
    receive_thread: Option<JoinHandle<()>>,
    send_thread: Option<JoinHandle<()>>,
}

impl Transport {
    /// Binds `listen` now (the error names the address) and starts the
    /// threads: the receive thread and, if configured, the send thread.
    pub fn start(
        config: TransportConfig,
        sink: Box<dyn InboundSink>,
    ) -> Result<Transport, TransportError> {
        let cpubind = config.recv_cpubind;
        let (mut transport, receive) = Transport::start_parts(config, sink)?;
        let receiver = Receiver { receive };
        transport.receive_thread = Some(
            std::thread::Builder::new()
                .name("skarv-recv".into())
                .spawn(move || receiver.run(cpubind))
                .map_err(|source| TransportError::Io {
                    what: "starting the receive thread",
                    source,
                })?,
        );
        Ok(transport)
    }

    /// As [`Transport::start`], but without a receive thread: the caller's
    /// thread runs the receive loop by calling [`Receiver::turn`]. Nothing is
    /// received, no connection is made or accepted, between turns.
    pub fn start_polled(
        config: TransportConfig,
        sink: Box<dyn InboundSink>,
    ) -> Result<(Transport, Receiver), TransportError> {
        let (transport, receive) = Transport::start_parts(config, sink)?;
        Ok((transport, Receiver { receive }))
    }

    /// Everything but the receive thread: the listener, the shared state,
    /// the send thread if configured, and the receive loop.
    fn start_parts(
        config: TransportConfig,
        sink: Box<dyn InboundSink>,
    ) -> Result<(Transport, ReceiveLoop), TransportError> {
        validate(&config)?;
        let io = |what: &'static str| move |source| TransportError::Io { what, source };
        let receive_poll = mio::Poll::new().map_err(io("creating the receive poll"))?;
        let receive_waker = mio::Waker::new(receive_poll.registry(), receive_thread::WAKER)
            .map_err(io("creating the receive waker"))?;
        let listener = match config.listen {
            Some(addr) => Some(
                mio::net::TcpListener::bind(addr)
                    .map_err(|source| TransportError::Bind { addr, source })?,
            ),
            None => None,
        };
        let local_addr = match &listener {
            Some(listener) => Some(
                listener
                    .local_addr()
                    .map_err(io("reading the listener's address"))?,
            ),
            None => None,
        };
        // A node that cannot take its local name still serves over TCP;
        // only the process holding `local_addr` can hold the name, so
        // failing here means something is wrong with the host, not the node.
        let local_listener = match local_addr {
            Some(addr) if config.local_sockets => match stream::local_address(addr)
                .and_then(|name| mio::net::UnixListener::bind_addr(&name))
            {
                Ok(listener) => Some(listener),
                Err(error) => {
                    tracing::warn!(%addr, %error, "no local socket: nodes on this host connect over TCP");
                    None
                }
            },
            _ => None,
        };
        let (send_shared, send_poll) = if config.send_thread {
            let poll = mio::Poll::new().map_err(io("creating the send poll"))?;
            let waker = mio::Waker::new(poll.registry(), send_thread::WAKER)
                .map_err(io("creating the send waker"))?;
            let registry = poll
                .registry()
                .try_clone()
                .map_err(io("sharing the send poll"))?;
            (Some(SendShared::new(waker, registry)), Some(poll))
        } else {
            (None, None)
        };
        let peers = config
            .peers
            .iter()
            .map(|peer| PeerShared::new(peer.node))
            .collect();
        let shared = Arc::new(Shared::new(
            config.me,
            peers,
            config.send_buffer_max_bytes,
            receive_waker,
            send_shared,
        ));

        let mut transport = Transport {
            shared: shared.clone(),
            local_addr,
            receive_thread: None,
            send_thread: None,
        };
        if let Some(poll) = send_poll {
            let thread = SendThread::new(shared.clone(), poll);
            let cpubind = config.send_cpubind;
            transport.send_thread = Some(
                std::thread::Builder::new()
                    .name("skarv-send".into())
                    .spawn(move || thread.run(cpubind))
                    .map_err(io("starting the send thread"))?,
            );
        }
        let receive = ReceiveLoop::new(
            shared,
            receive_poll,
            listener,
            local_listener,
            &config,
            sink,
        )
        .map_err(io("registering the listener"))?;
        Ok((transport, receive))
    }

    /// The address the listener is bound to (the real port when `listen` asked for port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// A sender for one thread: encodes into its own per-peer frame buffers;
    /// `flush` hands whole frames to the network.
    pub fn sender(&self) -> TransportSender {
        TransportSender::new(self.shared.clone())
    }

    /// Close the connection to `node` now (it was declared failed);
    /// reconnecting is allowed again afterwards. Signals to it are dropped
    /// from this call on; `NodeDisconnected` follows from the receive thread.
    pub fn disconnect(&self, node: NodeId) {
        let Some(slot) = self.shared.slot(node) else {
            return;
        };
        let link = self.shared.peers[slot].link();
        if link.up {
            self.shared
                .request_close(slot, link.generation, shared::CloseReason::Requested);
        }
    }

    pub fn is_connected(&self, node: NodeId) -> bool {
        match self.shared.slot(node) {
            Some(slot) => self.shared.peers[slot].link().up,
            None => false,
        }
    }

    pub fn stats(&self) -> TransportStats {
        self.shared.counters.snapshot()
    }

    /// Where anyone reads each link's figures (ndbinfo's `transporters`),
    /// for as long as it likes: it keeps the counters, not the transport.
    pub fn link_figures(&self) -> LinkFigures {
        LinkFigures {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Stops the threads and closes every socket. No `NodeDisconnected`
    /// notices are delivered for connections closed by the shutdown. A
    /// polled transport's sockets close when its [`Receiver`] is dropped.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.wake_receive_thread();
        if let Some(send) = &self.shared.send {
            send.wake_now();
        }
        for handle in [self.receive_thread.take(), self.send_thread.take()]
            .into_iter()
            .flatten()
        {
            if handle.join().is_err() {
                tracing::error!("a transport thread panicked");
            }
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        if self.receive_thread.is_some() || self.send_thread.is_some() {
            self.stop();
        }
    }
}

/// The receive loop of a transport started with [`Transport::start_polled`],
/// for the thread that runs it. Dropping it closes every connection without
/// notices, as stopping a receive thread does.
pub struct Receiver {
    receive: ReceiveLoop,
}

impl Receiver {
    /// One turn: waits up to `timeout` for input (not at all when it is zero,
    /// or when input from an earlier [`Receiver::wait`] is still to be
    /// handled), then accepts, connects, reads, checks and delivers what
    /// arrived, offers signals the sink refused earlier again, carries out
    /// disconnect requests, and flushes the sink.
    pub fn turn(&mut self, timeout: Duration) {
        self.receive.turn(timeout);
    }

    /// Waits up to `timeout` until there is input or a [`ReceiveWaker`] was
    /// woken, and handles nothing: the next [`Receiver::turn`] does. For an
    /// owner that must do something between waking and receiving.
    pub fn wait(&mut self, timeout: Duration) {
        self.receive.wait(timeout);
    }

    /// A handle that ends a `wait` or a waiting `turn` early, from any thread.
    pub fn waker(&self) -> ReceiveWaker {
        ReceiveWaker {
            shared: Arc::clone(&self.receive.shared),
        }
    }

    /// The receive thread's life: turns until the transport stops.
    fn run(mut self, cpubind: Option<usize>) {
        if let Some(cpu) = cpubind {
            bind_to_cpu("receive", cpu);
        }
        while !self.receive.shared.is_stopping() {
            self.receive
                .turn(Duration::from_millis(receive_thread::IDLE_POLL_MS));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.receive.close_all();
    }
}

/// Wakes the receive loop: see [`Receiver::waker`].
#[derive(Clone)]
pub struct ReceiveWaker {
    shared: Arc<Shared>,
}

impl ReceiveWaker {
    pub fn wake(&self) {
        self.shared.wake_receive_thread();
    }
}

fn validate(config: &TransportConfig) -> Result<(), TransportError> {
    let mut seen = signal::NodeBitmask::new();
    for peer in &config.peers {
        if peer.node == config.me {
            return Err(TransportError::PeerIsSelf { node: peer.node });
        }
        if seen.contains(peer.node) {
            return Err(TransportError::DuplicatePeer { node: peer.node });
        }
        seen.insert(peer.node);
    }
    if config.send_buffer_max_bytes < signal::frame::FRAME_MAX_BYTES {
        return Err(TransportError::SendBufferTooSmall {
            bytes: config.send_buffer_max_bytes,
        });
    }
    if config.reconnect_interval_ms == 0 {
        return Err(TransportError::ReconnectIntervalZero);
    }
    Ok(())
}

/// Pins the calling thread to `cpu`; a failure is logged, not fatal.
fn bind_to_cpu(thread: &str, cpu: usize) {
    use rustix::thread::{sched_setaffinity, CpuSet};
    if cpu >= CpuSet::MAX_CPU {
        tracing::warn!(
            cpu,
            "cannot bind the transport {thread} thread: CPU number too large"
        );
        return;
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    if let Err(error) = sched_setaffinity(None, &set) {
        tracing::warn!(cpu, %error, "cannot bind the transport {thread} thread to its CPU");
    }
}

// A sender moves to the thread that will use it; the transport is shared by all of them.
const _: () = {
    const fn assert_send<T: Send>() {}
    const fn assert_sync<T: Sync>() {}
    assert_send::<TransportSender>();
    assert_send::<Receiver>();
    assert_send::<ReceiveWaker>();
    assert_sync::<ReceiveWaker>();
    assert_send::<Transport>();
    assert_sync::<Transport>();
};
