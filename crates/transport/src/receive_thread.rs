//! The receive loop: owns every connection, from connect or accept through
//! the hello to close, and turns checked bytes into delivered signals. It
//! runs in turns, on the transport's receive thread or on a thread of the
//! owner's (`Receiver`).
//!
//! One `mio::Poll` (edge-triggered) carries the listener, every socket's
//! read side and a waker for commands. Each connection has a receive buffer
//! of two maximal frames, allocated once; all whole frames in it are
//! decoded after each read, and a bad header closes the connection as soon
//! as its 16 bytes are in. A frame is checked whole, every signal of it,
//! before any of its signals is delivered.
//!
//! Handshake: the connecting side sends its `TransportHello` first; the
//! accepting side checks it, answers with its own and is up; the connecting
//! side is up once that answer checks out. Only the receive thread marks a
//! peer up or down and delivers `NodeConnected`/`NodeDisconnected`, so the
//! notices for one peer always alternate.
//!
//! Back-pressure: a sink may refuse a signal (`InboundSink::offer`). The
//! refused signal, the rest of its frame and everything later from that
//! peer (notices included) wait in the peer's backlog, in order; the peer's
//! connection is not read (its unread bytes stay in its buffer and in the
//! socket, so TCP pushes back on the sender) until a later turn has handed
//! the whole backlog over. Nothing is dropped or reordered, and the other
//! peers go on.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use signal::frame::FRAME_MAX_BYTES;
use signal::{
    decode_frame, encode_frame, BlockNumber, BlockRef, NodeId, Signal, SignalBody, VERSION,
};

use stdx::RateLimit;

use crate::shared::{add, CloseReason, Command, Refusal, Shared};
use crate::stream::{LinkKind, PeerAddr, Stream};
use crate::writer::Writer;
use crate::{InboundSink, TransportConfig};

pub(crate) const WAKER: Token = Token(0);
const LISTENER: Token = Token(1);
const LOCAL_LISTENER: Token = Token(2);
const CONNECTION_TOKEN_BASE: usize = 3;

/// Time an outgoing connection has to connect and complete the hello.
const HANDSHAKE_TIMEOUT_MS: u64 = 5_000;
/// Time an accepted connection has to send its hello: a node sends it as
/// soon as it is connected, and an idle socket (a port flood) must not
/// hold a place for long.
const ACCEPTED_HELLO_TIMEOUT_MS: u64 = 1_000;
/// Accepted connections that have not sent their hello yet; a new one
/// beyond that closes the oldest, so that a flood of idle sockets never
/// keeps a node of the cluster out (it sends its hello at once, and is
/// never the oldest for long).
const HANDSHAKE_PENDING_MAX: usize = 64;
/// Warnings about refused connections and frames, per reason and second:
/// a flood of bad input must not flood the log.
const REFUSAL_WARNINGS_PER_SECOND_MAX: u32 = 10;
/// Reads from one connection per round before the others get their turn.
const READS_PER_ROUND_MAX: usize = 16;
/// The receive thread's sleep bound when idle; deadlines and wake-ups shorten it.
pub(crate) const IDLE_POLL_MS: u64 = 1_000;
/// Longest wait while a backlog is left: the sink's consumer may be another
/// thread, which does not tell us when it made room.
const BACKLOG_RETRY_MS: u64 = 1;
const EVENTS_MAX: usize = 1_024;
const RECEIVE_BUFFER_BYTES: usize = 2 * FRAME_MAX_BYTES;

enum Phase {
    /// Outgoing connect in progress to the peer in `slot`.
    Connecting {
        slot: usize,
    },
    /// Waiting for the peer's hello; `expected` is the peer we connected to,
    /// None on an accepted connection.
    AwaitHello {
        expected: Option<usize>,
    },
    Up {
        slot: usize,
        generation: u64,
    },
}

struct Connection {
    stream: Stream,
    addr: PeerAddr,
    phase: Phase,
    /// Until the connection must be up.
    deadline: Instant,
    buffer: Box<[u8]>,
    /// `buffer[start..end]` is received and not yet decoded.
    start: usize,
    end: usize,
    /// Decoding stopped at a backlog: `buffer[start..end]` may hold whole
    /// frames, to decode before reading more.
    stalled: bool,
    /// The poll said the peer closed (or the socket failed): read to the
    /// end, past any short read (see `read`).
    closing: bool,
}

/// What the receive thread knows of one peer.
struct PeerLink {
    node: NodeId,
    /// An API node (`PeerConfig::api`).
    api: bool,
    connect_to: Option<SocketAddr>,
    /// The connection that is up, or our outgoing one being set up.
    connection: Option<usize>,
    /// Generation of the last connection that came up.
    generation: u64,
    next_connect: Instant,
    /// An API node's connection sent its `ApiRegReq`: until then it may
    /// send nothing else (transactions from an API node the data node
    /// does not know of would never be cleaned up when it fails).
    registered: bool,
    /// Signals from this peer the sink refused, and everything after them, in order.
    backlog: VecDeque<Signal>,
}

pub(crate) struct ReceiveLoop {
    pub(crate) shared: Arc<Shared>,
    poll: Poll,
    events: Events,
    /// `events` came from a `wait` and are not handled yet.
    events_ready: bool,
    listener: Option<TcpListener>,
    /// The listener's local name (`stream`), for nodes on this host, and
    /// the TCP address it mirrors.
    local_listener: Option<(UnixListener, SocketAddr)>,
    /// Connects to loopback addresses try the peer's local name first.
    local_sockets: bool,
    connections: Vec<Option<Connection>>,
    free: Vec<usize>,
    peers: Vec<PeerLink>,
    sink: Box<dyn InboundSink>,
    /// The signals of one frame, held until all of them pass the checks.
    staging: Vec<Signal>,
    commands: Vec<Command>,
    /// Connections that still had bytes to read when their round ended.
    again: Vec<usize>,
    /// Connections in `Connecting` or `AwaitHello`.
    handshaking: usize,
    /// Accepted connections in `AwaitHello`.
    incoming_pending: usize,
    /// Signals in all peers' backlogs.
    backlogged: usize,
    delivered: bool,
    /// Set when accepting failed with connections possibly left in the backlog.
    accept_retry_at: Option<Instant>,
    notify: BlockRef,
    reconnect_interval: Duration,
    /// true without a send thread: flushing senders may leave bytes for us to write.
    writes_here: bool,
    /// Warnings about connections that never sent their hello.
    handshake_log: RateLimit,
    /// Warnings about refused frames and connections.
    refusal_log: RateLimit,
}

impl ReceiveLoop {
    /// The counters of the peer `connection` is with, once known (an
    /// accepted connection's peer is known from its hello on).
    fn link_of(&self, connection: &Connection) -> Option<&crate::shared::LinkCounters> {
        let slot = match connection.phase {
            Phase::Connecting { slot }
            | Phase::AwaitHello {
                expected: Some(slot),
            }
            | Phase::Up { slot, .. } => slot,
            Phase::AwaitHello { expected: None } => return None,
        };
        Some(&self.shared.peers[slot].counters)
    }

    pub fn new(
        shared: Arc<Shared>,
        poll: Poll,
        mut listener: Option<TcpListener>,
        mut local_listener: Option<UnixListener>,
        config: &TransportConfig,
        sink: Box<dyn InboundSink>,
    ) -> io::Result<ReceiveLoop> {
        if let Some(listener) = listener.as_mut() {
            poll.registry()
                .register(listener, LISTENER, Interest::READABLE)?;
        }
        let local_listener = match (local_listener.as_mut(), listener.as_ref()) {
            (Some(local), Some(tcp)) => {
                poll.registry()
                    .register(local, LOCAL_LISTENER, Interest::READABLE)?;
                local_listener.zip(Some(tcp.local_addr()?))
            }
            _ => None,
        };
        let now = Instant::now();
        let peers = config
            .peers
            .iter()
            .map(|peer| PeerLink {
                node: peer.node,
                api: peer.api,
                connect_to: peer.connect_to,
                connection: None,
                generation: 0,
                next_connect: now,
                registered: false,
                backlog: VecDeque::new(),
            })
            .collect();
        Ok(ReceiveLoop {
            writes_here: shared.send.is_none(),
            shared,
            poll,
            events: Events::with_capacity(EVENTS_MAX),
            events_ready: false,
            listener,
            local_listener,
            local_sockets: config.local_sockets,
            connections: Vec::new(),
            free: Vec::new(),
            peers,
            sink,
            staging: Vec::new(),
            commands: Vec::new(),
            again: Vec::new(),
            handshaking: 0,
            incoming_pending: 0,
            backlogged: 0,
            delivered: false,
            accept_retry_at: None,
            notify: config.notify,
            reconnect_interval: Duration::from_millis(config.reconnect_interval_ms),
            handshake_log: RateLimit::new(REFUSAL_WARNINGS_PER_SECOND_MAX, Duration::from_secs(1)),
            refusal_log: RateLimit::new(REFUSAL_WARNINGS_PER_SECOND_MAX, Duration::from_secs(1)),
        })
    }

    /// Waits for input up to `timeout` (shortened by the loop's own
    /// deadlines) unless input is already waiting; handles nothing.
    pub fn wait(&mut self, timeout: Duration) {
        if self.events_ready {
            return;
        }
        let timeout = if timeout.is_zero() {
            timeout
        } else {
            timeout.min(self.poll_timeout(Instant::now()))
        };
        self.poll(timeout);
    }

    /// One turn of the loop; see `Receiver::turn`.
    pub fn turn(&mut self, timeout: Duration) {
        self.wait(timeout);
        self.events_ready = false;
        if self.backlogged > 0 {
            self.offer_backlogs();
        }
        let mut events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        for event in events.iter() {
            match event.token() {
                WAKER => {}
                LISTENER | LOCAL_LISTENER => self.accept_all(),
                Token(token) => {
                    let index = token - CONNECTION_TOKEN_BASE;
                    let closed = event.is_read_closed() || event.is_error();
                    if closed {
                        if let Some(Some(connection)) = self.connections.get_mut(index) {
                            connection.closing = true;
                        }
                    }
                    self.on_event(index, event.is_readable() || closed, event.is_writable())
                }
            }
        }
        events.clear();
        self.events = events;
        self.run_commands();
        for index in std::mem::take(&mut self.again) {
            self.on_event(index, true, false);
        }
        self.maintain(Instant::now());
        if self.delivered {
            self.delivered = false;
            self.sink.flush();
        }
    }

    fn poll(&mut self, timeout: Duration) {
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => self.events_ready = true,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                tracing::error!(%error, "transport receive poll failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn poll_timeout(&self, now: Instant) -> Duration {
        if !self.again.is_empty()
            || self
                .shared
                .commands_pending
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return Duration::ZERO;
        }
        let mut wake_at = now + Duration::from_millis(IDLE_POLL_MS);
        if self.backlogged > 0 {
            wake_at = wake_at.min(now + Duration::from_millis(BACKLOG_RETRY_MS));
        }
        if let Some(at) = self.accept_retry_at {
            wake_at = wake_at.min(at);
        }
        for peer in &self.peers {
            if peer.connect_to.is_some() && peer.connection.is_none() {
                wake_at = wake_at.min(peer.next_connect);
            }
        }
        if self.handshaking > 0 {
            for connection in self.connections.iter().flatten() {
                if !matches!(connection.phase, Phase::Up { .. }) {
                    wake_at = wake_at.min(connection.deadline);
                }
            }
        }
        wake_at.saturating_duration_since(now)
    }

    // ---- delivery ----

    /// Hands `signal` from the peer in `slot` to the sink, behind the peer's
    /// backlog; what the sink refuses starts (or joins) the backlog.
    fn deliver(&mut self, slot: usize, signal: Signal) {
        // Also on a refusal: the sink's flush wakes whoever must make room.
        self.delivered = true;
        let backlog = &mut self.peers[slot].backlog;
        let signal = if backlog.is_empty() {
            match self.sink.offer(signal) {
                Ok(()) => return,
                Err(refused) => refused,
            }
        } else {
            signal
        };
        backlog.push_back(signal);
        self.backlogged += 1;
    }

    /// Offers every backlog again, oldest signal first; a peer whose backlog
    /// empties has its connection read again this turn.
    fn offer_backlogs(&mut self) {
        for slot in 0..self.peers.len() {
            let peer = &mut self.peers[slot];
            if peer.backlog.is_empty() {
                continue;
            }
            self.delivered = true;
            while let Some(signal) = peer.backlog.pop_front() {
                if let Err(refused) = self.sink.offer(signal) {
                    peer.backlog.push_front(refused);
                    break;
                }
                self.backlogged -= 1;
            }
            if peer.backlog.is_empty() {
                // Its socket's readiness edge may have passed while it waited.
                if let Some(index) = peer.connection {
                    self.again.push(index);
                }
            }
        }
        assert_eq!(
            self.backlogged,
            self.peers.iter().map(|p| p.backlog.len()).sum::<usize>()
        );
    }

    /// Whether signals from this connection must wait behind a backlog.
    fn held_back(&self, connection: &Connection) -> bool {
        match connection.phase {
            Phase::Up { slot, .. } => !self.peers[slot].backlog.is_empty(),
            _ => false,
        }
    }

    // ---- connection setup ----

    fn accept_all(&mut self) {
        while let Some((stream, addr)) = self.accept_one() {
            if self.incoming_pending >= HANDSHAKE_PENDING_MAX {
                self.close_oldest_incoming();
            }
            if let Err(error) = stream.set_nodelay() {
                tracing::warn!(%addr, %error, "refusing a connection: cannot set TCP_NODELAY");
                continue;
            }
            let phase = Phase::AwaitHello { expected: None };
            if self.insert(stream, addr, phase).is_some() {
                self.incoming_pending += 1;
            }
        }
    }

    /// The next connection either listener has, TCP's first; None when
    /// neither has one now. Both are edge-triggered, so both are drained.
    fn accept_one(&mut self) -> Option<(Stream, PeerAddr)> {
        loop {
            let accepted = if let Some(listener) = self.listener.as_ref() {
                match listener.accept() {
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => None,
                    result => Some(result.map(|(s, addr)| (Stream::Tcp(s), PeerAddr::Tcp(addr)))),
                }
            } else {
                None
            };
            let accepted = accepted.or_else(|| {
                let (listener, via) = self.local_listener.as_ref()?;
                let via = *via;
                match listener.accept() {
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => None,
                    result => Some(result.map(|(s, _)| (Stream::Local(s), PeerAddr::Local(via)))),
                }
            })?;
            match accepted {
                Ok(accepted) => return Some(accepted),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    // E.g. out of file descriptors. The listeners are
                    // edge-triggered, so retry on our own a little later.
                    tracing::warn!(%error, "accepting a connection failed");
                    self.accept_retry_at = Some(Instant::now() + self.reconnect_interval);
                    return None;
                }
            }
        }
    }

    /// Closes the accepted connection that has waited longest for its hello.
    fn close_oldest_incoming(&mut self) {
        let oldest = self
            .connections
            .iter()
            .enumerate()
            .filter_map(|(index, c)| match c {
                Some(c) if matches!(c.phase, Phase::AwaitHello { expected: None }) => {
                    Some((c.deadline, index))
                }
                _ => None,
            })
            .min();
        let (_, index) = oldest.expect("incoming_pending counts accepted connections");
        let pending_max = HANDSHAKE_PENDING_MAX;
        self.close_index(index, CloseReason::HandshakeEvicted { pending_max });
    }

    fn connect(&mut self, slot: usize, now: Instant) {
        let peer = &mut self.peers[slot];
        let Some(addr) = peer.connect_to else {
            return;
        };
        assert!(peer.connection.is_none());
        peer.next_connect = now + self.reconnect_interval;
        match Stream::connect(addr, self.local_sockets) {
            Ok(stream) => {
                let addr = match stream.kind() {
                    LinkKind::Tcp => PeerAddr::Tcp(addr),
                    LinkKind::Local => PeerAddr::Local(addr),
                };
                let index = self.insert(stream, addr, Phase::Connecting { slot });
                self.peers[slot].connection = index;
            }
            Err(error) => {
                tracing::debug!(node = %peer.node, %addr, %error, "connect failed");
            }
        }
    }

    /// Registers a new connection; None if it could not be registered (logged).
    fn insert(&mut self, mut stream: Stream, addr: PeerAddr, phase: Phase) -> Option<usize> {
        let index = self.free.pop().unwrap_or(self.connections.len());
        let token = Token(CONNECTION_TOKEN_BASE + index);
        // Connecting needs writability to learn the outcome; flush mode needs
        // it to finish writes the senders left.
        let interest = if self.writes_here || matches!(phase, Phase::Connecting { .. }) {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        if let Err(error) = self.poll.registry().register(&mut stream, token, interest) {
            tracing::warn!(%addr, %error, "cannot register a connection");
            if index < self.connections.len() {
                self.free.push(index);
            }
            return None;
        }
        let timeout_ms = match phase {
            Phase::AwaitHello { expected: None } => ACCEPTED_HELLO_TIMEOUT_MS,
            _ => HANDSHAKE_TIMEOUT_MS,
        };
        let connection = Connection {
            stream,
            addr,
            phase,
            deadline: Instant::now() + Duration::from_millis(timeout_ms),
            buffer: vec![0u8; RECEIVE_BUFFER_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            stalled: false,
            closing: false,
        };
        if index == self.connections.len() {
            self.connections.push(Some(connection));
        } else {
            assert!(self.connections[index].is_none());
            self.connections[index] = Some(connection);
        }
        self.handshaking += 1;
        Some(index)
    }

    /// The outgoing connect reported: connected (send our hello) or failed.
    fn on_connect_event(
        &mut self,
        index: usize,
        connection: &mut Connection,
    ) -> Result<(), CloseReason> {
        let Phase::Connecting { slot } = connection.phase else {
            unreachable!("only called while connecting");
        };
        if !connection
            .stream
            .is_connected()
            .map_err(CloseReason::ConnectFailed)?
        {
            return Ok(());
        }
        connection
            .stream
            .set_nodelay()
            .map_err(CloseReason::Setup)?;
        if !self.writes_here {
            let token = Token(CONNECTION_TOKEN_BASE + index);
            self.poll
                .registry()
                .reregister(&mut connection.stream, token, Interest::READABLE)
                .map_err(CloseReason::Setup)?;
        }
        connection.phase = Phase::AwaitHello {
            expected: Some(slot),
        };
        self.send_hello(connection, self.peers[slot].node)
    }

    fn send_hello(&self, connection: &mut Connection, to: NodeId) -> Result<(), CloseReason> {
        let me = self.shared.me;
        let hello = Signal {
            receiver: BlockRef::new(to, BlockNumber::PROCESS, 0),
            sender: BlockRef::new(me, BlockNumber::PROCESS, 0),
            body: SignalBody::TransportHello {
                from: me,
                to,
                version: VERSION,
            },
        };
        let mut bytes = Vec::with_capacity(64);
        if let Err(error) = encode_frame(std::slice::from_ref(&hello), &mut bytes) {
            unreachable!("a hello always fits a frame: {error}");
        }
        let counters = &self.shared.counters;
        add(&counters.write_syscalls, 1);
        // A new socket's send buffer is empty: the hello goes out whole or the socket is broken.
        match connection.stream.write(&bytes) {
            Ok(written) if written == bytes.len() => {
                add(&counters.bytes_sent, written as u64);
                add(&counters.frames_sent, 1);
                add(&counters.signals_sent, 1);
                if let Some(slot) = self.shared.slot(to) {
                    let link = &self.shared.peers[slot].counters;
                    add(&link.bytes_sent, written as u64);
                    add(&link.frames_sent, 1);
                }
                Ok(())
            }
            Ok(written) => Err(CloseReason::WriteFailed(io::Error::other(format!(
                "hello cut short after {written} of {} bytes",
                bytes.len()
            )))),
            Err(error) => Err(CloseReason::WriteFailed(error)),
        }
    }

    // ---- events ----

    fn on_event(&mut self, index: usize, readable: bool, writable: bool) {
        let Some(mut connection) = self.connections.get_mut(index).and_then(Option::take) else {
            return;
        };
        let mut result = Ok(());
        match connection.phase {
            Phase::Connecting { .. } => result = self.on_connect_event(index, &mut connection),
            Phase::AwaitHello { .. } | Phase::Up { .. } => {
                if writable && self.writes_here {
                    result = self.write_pending(&connection);
                }
                if result.is_ok() && readable {
                    result = self.read(index, &mut connection);
                }
            }
        }
        match result {
            Ok(()) => self.connections[index] = Some(connection),
            Err(reason) => self.close(index, connection, reason),
        }
    }

    /// Flush mode: the socket has room again for what senders left pending.
    fn write_pending(&self, connection: &Connection) -> Result<(), CloseReason> {
        let Phase::Up { slot, generation } = connection.phase else {
            return Ok(());
        };
        let mut guard = self.shared.peers[slot].lock_writer();
        match guard.as_mut() {
            Some(writer) if writer.accepts(generation) => {
                writer.set_writable();
                let mut done = Vec::new();
                writer.write_pending(&self.shared.counters, &mut done)
            }
            _ => Ok(()),
        }
    }

    fn read(&mut self, index: usize, connection: &mut Connection) -> Result<(), CloseReason> {
        // Stalled behind a backlog: `offer_backlogs` brings it back here once
        // the backlog is gone; until then `decode` stops again at once.
        if connection.stalled {
            connection.stalled = false;
            self.decode(index, connection)?;
            if connection.stalled {
                return Ok(());
            }
        }
        for _ in 0..READS_PER_ROUND_MAX {
            assert!(connection.end < connection.buffer.len());
            let space = connection.buffer.len() - connection.end;
            match connection
                .stream
                .read(&mut connection.buffer[connection.end..])
            {
                Ok(0) => return Err(CloseReason::PeerClosed),
                Ok(read) => {
                    connection.end += read;
                    add(&self.shared.counters.bytes_received, read as u64);
                    if let Some(link) = self.link_of(connection) {
                        add(&link.bytes_received, read as u64);
                    }
                    self.decode(index, connection)?;
                    // A short read emptied the socket of bytes: bytes that
                    // come later raise a new edge (epoll(7) on stream
                    // sockets), so the read that would only say WouldBlock
                    // is saved. Not so the peer's close: one that came with
                    // the bytes, before the poll returned, raised no edge of
                    // its own, and only the next read (0) shows it.
                    if connection.stalled || (read < space && !connection.closing) {
                        return Ok(());
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(CloseReason::ReadFailed(error)),
            }
        }
        // Edge-triggered: nobody will tell us again that bytes are waiting.
        self.again.push(index);
        Ok(())
    }

    /// Decodes and handles every whole frame in the buffer, or stops
    /// (`stalled`) when the peer's signals must wait behind its backlog.
    fn decode(&mut self, index: usize, connection: &mut Connection) -> Result<(), CloseReason> {
        loop {
            if self.held_back(connection) {
                connection.stalled = true;
                break;
            }
            let available = &connection.buffer[connection.start..connection.end];
            let used = match decode_frame(available) {
                Ok(None) => break,
                Ok(Some((frame, used))) => {
                    self.staging.clear();
                    for signal in frame.signals() {
                        match signal {
                            Ok(signal) => self.staging.push(signal),
                            Err(error) => return Err(self.refuse(error.into())),
                        }
                    }
                    used
                }
                Err(error) => return Err(self.refuse(error.into())),
            };
            connection.start += used;
            add(&self.shared.counters.frames_received, 1);
            if let Some(link) = self.link_of(connection) {
                add(&link.frames_received, 1);
            }
            self.handle_frame(index, connection)?;
        }
        if connection.start == connection.end {
            connection.start = 0;
            connection.end = 0;
        } else if !connection.stalled && connection.buffer.len() - connection.end < FRAME_MAX_BYTES
        {
            // What is left is less than a frame, so after moving it to the
            // front a whole frame always fits behind it.
            connection
                .buffer
                .copy_within(connection.start..connection.end, 0);
            connection.end -= connection.start;
            connection.start = 0;
        }
        Ok(())
    }

    fn refuse(&self, refusal: Refusal) -> CloseReason {
        add(&self.shared.counters.frames_refused, 1);
        CloseReason::Refused(refusal)
    }

    /// The frame's signals are in `staging`.
    fn handle_frame(
        &mut self,
        index: usize,
        connection: &mut Connection,
    ) -> Result<(), CloseReason> {
        match connection.phase {
            Phase::Connecting { .. } => {
                unreachable!("no bytes are read before the connect completes")
            }
            Phase::AwaitHello { expected } => {
                let slot = self
                    .check_hello(expected)
                    .map_err(|refusal| self.refuse(refusal))?;
                if expected.is_none() {
                    if let Some(old) = self.peers[slot].connection {
                        self.close_index(old, CloseReason::Replaced);
                    }
                    self.send_hello(connection, self.peers[slot].node)?;
                }
                self.go_up(index, connection, slot)
            }
            Phase::Up { slot, .. } => {
                let peer = &self.peers[slot];
                let (peer, api) = (peer.node, peer.api);
                let mut registered = self.peers[slot].registered;
                for signal in &self.staging {
                    if let Err(refusal) = check_signal(signal, peer, api, self.shared.me) {
                        return Err(self.refuse(refusal));
                    }
                    if api && !registered {
                        if !matches!(signal.body, SignalBody::ApiRegReq { .. }) {
                            let name = signal.body.name();
                            return Err(self.refuse(Refusal::NotRegistered { name, peer }));
                        }
                        registered = true;
                    }
                }
                self.peers[slot].registered = registered;
                add(
                    &self.shared.counters.signals_received,
                    self.staging.len() as u64,
                );
                // Taken out and put back: keeps its allocation for the next frame.
                let mut staging = std::mem::take(&mut self.staging);
                for signal in staging.drain(..) {
                    self.deliver(slot, signal);
                }
                self.staging = staging;
                Ok(())
            }
        }
    }

    /// Checks the hello in `staging`; returns the peer's slot.
    fn check_hello(&self, expected: Option<usize>) -> Result<usize, Refusal> {
        let [signal] = self.staging.as_slice() else {
            return Err(Refusal::HelloSignalCount {
                count: self.staging.len(),
            });
        };
        let SignalBody::TransportHello { from, to, version } = signal.body else {
            return Err(Refusal::HelloExpected {
                name: signal.body.name(),
            });
        };
        let me = self.shared.me;
        if to != me || signal.receiver.node != me {
            return Err(Refusal::HelloWrongTo { to, me });
        }
        if signal.sender.node != from {
            return Err(Refusal::HelloSenderMismatch {
                from,
                sender: signal.sender.node,
            });
        }
        if version / 10_000 != VERSION / 10_000 {
            return Err(Refusal::HelloVersion { version });
        }
        let slot = self
            .shared
            .slot(from)
            .ok_or(Refusal::HelloUnknownNode { from })?;
        match expected {
            Some(expected) if expected != slot => Err(Refusal::HelloWrongNode {
                from,
                expected: self.peers[expected].node,
            }),
            None if self.peers[slot].connect_to.is_some() => {
                Err(Refusal::HelloFromConnectedPeer { from })
            }
            _ => Ok(slot),
        }
    }

    fn go_up(
        &mut self,
        index: usize,
        connection: &mut Connection,
        slot: usize,
    ) -> Result<(), CloseReason> {
        let Phase::AwaitHello { expected } = connection.phase else {
            unreachable!("only a connection awaiting its hello goes up");
        };
        // The writer needs its own handle on the socket: the send thread
        // registers it with its own poll, and it must outlive our borrow.
        let mut write_half = connection.stream.try_clone().map_err(CloseReason::Setup)?;
        let peer = &mut self.peers[slot];
        let generation = peer.generation + 1;
        if let Some(send) = &self.shared.send {
            send.registry
                .register(&mut write_half, Token(slot), Interest::WRITABLE)
                .map_err(CloseReason::Setup)?;
        }
        peer.generation = generation;
        peer.connection = Some(index);
        peer.registered = false;
        let shared_peer = &self.shared.peers[slot];
        *shared_peer.lock_writer() = Some(Writer::new(
            write_half,
            slot,
            generation,
            Arc::clone(&shared_peer.counters),
        ));
        let local = connection.stream.kind() == LinkKind::Local;
        shared_peer
            .local
            .store(local, std::sync::atomic::Ordering::Release);
        shared_peer.set_up(generation);
        connection.phase = Phase::Up { slot, generation };
        self.handshaking -= 1;
        if expected.is_none() {
            self.incoming_pending -= 1;
        }
        let node = peer.node;
        let link = connection.stream.kind().name();
        tracing::info!(%node, addr = %connection.addr, link, "connection up");
        self.notify(slot, SignalBody::NodeConnected { node });
        Ok(())
    }

    /// A notice about the peer in `slot`: in order with that peer's signals.
    fn notify(&mut self, slot: usize, body: SignalBody) {
        let signal = Signal {
            receiver: self.notify,
            sender: BlockRef::new(self.shared.me, BlockNumber::PROCESS, 0),
            body,
        };
        self.deliver(slot, signal);
    }

    // ---- closing ----

    fn run_commands(&mut self) {
        self.shared.take_commands(&mut self.commands);
        for command in std::mem::take(&mut self.commands) {
            let Some(index) = self.peers[command.slot].connection else {
                continue;
            };
            let current = matches!(
                self.connections[index].as_ref().map(|c| &c.phase),
                Some(Phase::Up { generation, .. }) if *generation == command.generation
            );
            if current {
                self.close_index(index, command.reason);
            }
        }
    }

    /// Retries a failed accept, closes connections whose hello is overdue, and connects to peers that are due.
    fn maintain(&mut self, now: Instant) {
        if self.accept_retry_at.is_some_and(|at| at <= now) {
            self.accept_retry_at = None;
            self.accept_all();
        }
        if self.handshaking > 0 {
            for index in 0..self.connections.len() {
                let overdue = matches!(
                    &self.connections[index],
                    Some(c) if !matches!(c.phase, Phase::Up { .. }) && c.deadline <= now
                );
                if overdue {
                    let timeout_ms = match &self.connections[index] {
                        Some(c) if matches!(c.phase, Phase::AwaitHello { expected: None }) => {
                            ACCEPTED_HELLO_TIMEOUT_MS
                        }
                        _ => HANDSHAKE_TIMEOUT_MS,
                    };
                    self.close_index(index, CloseReason::HandshakeTimeout { timeout_ms });
                }
            }
        }
        for slot in 0..self.peers.len() {
            let peer = &self.peers[slot];
            if peer.connect_to.is_some() && peer.connection.is_none() && peer.next_connect <= now {
                self.connect(slot, now);
            }
        }
    }

    fn close_index(&mut self, index: usize, reason: CloseReason) {
        if let Some(connection) = self.connections[index].take() {
            self.close(index, connection, reason);
        }
    }

    fn close(&mut self, index: usize, mut connection: Connection, reason: CloseReason) {
        let addr = connection.addr;
        // The writer holds a second descriptor of this socket: shut the
        // socket itself down so the peer sees the close now.
        let _ = connection.stream.shutdown(Shutdown::Both);
        if let Err(error) = self.poll.registry().deregister(&mut connection.stream) {
            tracing::debug!(%addr, %error, "deregistering a closed connection failed");
        }
        drop(connection.stream);
        self.free.push(index);
        match connection.phase {
            Phase::Up { slot, generation } => {
                self.detach_writer(slot, generation);
                let peer = &mut self.peers[slot];
                assert_eq!(peer.connection, Some(index));
                peer.connection = None;
                peer.next_connect = Instant::now() + self.reconnect_interval;
                let node = peer.node;
                if matches!(reason, CloseReason::Refused(_)) {
                    if let Some(suppressed) = self.refusal_log.admit(Instant::now()) {
                        tracing::warn!(%node, %addr, %reason, suppressed, "connection closed");
                    }
                } else {
                    log_close(node, addr, &reason);
                }
                self.notify(slot, SignalBody::NodeDisconnected { node });
            }
            Phase::Connecting { slot }
            | Phase::AwaitHello {
                expected: Some(slot),
            } => {
                self.handshaking -= 1;
                let peer = &mut self.peers[slot];
                assert_eq!(peer.connection, Some(index));
                peer.connection = None;
                if matches!(reason, CloseReason::Refused(_)) {
                    tracing::warn!(node = %peer.node, %addr, %reason, "connection refused");
                } else {
                    // Expected while the peer is down; retried every reconnect interval.
                    tracing::debug!(node = %peer.node, %addr, %reason, "connection attempt failed");
                }
            }
            Phase::AwaitHello { expected: None } => {
                self.handshaking -= 1;
                self.incoming_pending -= 1;
                match reason {
                    CloseReason::Refused(_) => {
                        if let Some(suppressed) = self.refusal_log.admit(Instant::now()) {
                            tracing::warn!(%addr, %reason, suppressed, "incoming connection refused")
                        }
                    }
                    CloseReason::HandshakeTimeout { .. } | CloseReason::HandshakeEvicted { .. } => {
                        if let Some(suppressed) = self.handshake_log.admit(Instant::now()) {
                            tracing::warn!(%addr, %reason, suppressed, "incoming connection closed")
                        }
                    }
                    _ => {
                        tracing::debug!(%addr, %reason, "incoming connection closed before its hello")
                    }
                }
            }
        }
    }

    fn detach_writer(&self, slot: usize, generation: u64) {
        let peer = &self.shared.peers[slot];
        peer.set_down(generation);
        let writer = peer.lock_writer().take();
        let Some(mut writer) = writer else {
            return;
        };
        assert_eq!(writer.generation(), generation);
        writer.discard(&self.shared.counters);
        if let Some(send) = &self.shared.send {
            if let Err(error) = send.registry.deregister(writer.stream_mut()) {
                tracing::debug!(node = %peer.node, %error, "deregistering a write half failed");
            }
        }
    }

    /// Shutdown: close everything without notices (the owner is stopping).
    pub(crate) fn close_all(&mut self) {
        for index in 0..self.connections.len() {
            let Some(connection) = self.connections[index].take() else {
                continue;
            };
            let _ = connection.stream.shutdown(Shutdown::Both);
            if let Phase::Up { slot, generation } = connection.phase {
                self.detach_writer(slot, generation);
            }
        }
    }
}

fn log_close(node: NodeId, addr: PeerAddr, reason: &CloseReason) {
    match reason {
        CloseReason::SendBufferFull { bytes } => tracing::warn!(
            %node,
            "send buffer to node {node} full ({bytes} bytes): peer too slow, disconnecting"
        ),
        CloseReason::PeerClosed | CloseReason::Requested | CloseReason::Replaced => {
            tracing::info!(%node, %addr, %reason, "connection closed")
        }
        _ => tracing::warn!(%node, %addr, %reason, "connection closed"),
    }
}

/// The checks every signal from an up connection passes before delivery.
fn check_signal(signal: &Signal, peer: NodeId, api: bool, me: NodeId) -> Result<(), Refusal> {
    // The name is for a refusal only: looked up then, not for every signal.
    let name = || signal.body.name();
    if signal.sender.node != peer {
        return Err(Refusal::ForgedSender {
            name: name(),
            sender: signal.sender.node,
            peer,
        });
    }
    if signal.receiver.node != me {
        return Err(Refusal::WrongReceiver {
            name: name(),
            receiver: signal.receiver.node,
            me,
        });
    }
    if matches!(signal.body, SignalBody::TransportHello { .. }) {
        return Err(Refusal::HelloAfterHandshake);
    }
    if signal.body.is_local_only() {
        return Err(Refusal::LocalOnly { name: name() });
    }
    if api && !signal.body.is_api_request() {
        return Err(Refusal::NotAnApiRequest { name: name(), peer });
    }
    Ok(())
}
