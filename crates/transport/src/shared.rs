//! What the transport's threads and its senders share: each peer's link
//! state and write half, the counters, and the mailbox through which anyone
//! asks the receive thread (the only owner of connections) to close one.

use std::io;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use signal::{DecodeError, NodeId};

use crate::send_thread::SenderLink;
use crate::writer::Writer;
use crate::TransportStats;

/// A peer's link as senders see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    /// Counts the connections to this peer that came up; 0 = never.
    pub generation: u64,
    pub up: bool,
}

pub(crate) struct PeerShared {
    pub node: NodeId,
    /// `generation << 1 | up`. Only the receive thread sets `up`; anyone may
    /// clear it (disconnect, write failure) so that senders stop at once.
    state: AtomicU64,
    /// The write half of the up connection, if any. In send-thread mode the
    /// send thread writes through it; otherwise flushing senders do, and the
    /// receive thread finishes writes that found the socket full.
    pub writer: Mutex<Option<Writer>>,
    /// This link's own counters (ndbinfo's `transporters`), across its
    /// connections.
    pub counters: Arc<LinkCounters>,
    /// The last connection that came up runs on a local socket (`stream`).
    pub local: AtomicBool,
}

/// Bytes and frames over one peer's link, since the transport started
/// (hellos included). Added with the same relaxed adds as [`Counters`].
#[derive(Debug, Default)]
pub(crate) struct LinkCounters {
    pub bytes_sent: AtomicU64,
    pub frames_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    pub frames_received: AtomicU64,
}

impl PeerShared {
    pub fn new(node: NodeId) -> PeerShared {
        PeerShared {
            node,
            state: AtomicU64::new(0),
            writer: Mutex::new(None),
            counters: Arc::default(),
            local: AtomicBool::new(false),
        }
    }

    pub fn link(&self) -> Link {
        let state = self.state.load(Ordering::Acquire);
        Link {
            generation: state >> 1,
            up: state & 1 == 1,
        }
    }

    /// Receive thread only: the connection of `generation` is up.
    pub fn set_up(&self, generation: u64) {
        assert!(generation > self.link().generation);
        self.state.store(generation << 1 | 1, Ordering::Release);
    }

    /// Receive thread only: the connection of `generation` is closed.
    pub fn set_down(&self, generation: u64) {
        assert_eq!(self.link().generation, generation);
        self.state.store(generation << 1, Ordering::Release);
    }

    /// Clears `up` if `generation` is still the current connection; true if
    /// this call cleared it.
    fn clear_up(&self, generation: u64) -> bool {
        let up = generation << 1 | 1;
        self.state
            .compare_exchange(up, generation << 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub fn lock_writer(&self) -> MutexGuard<'_, Option<Writer>> {
        // A panic while holding the lock cannot leave the writer torn in a
        // way that matters: at worst a chunk is half written, and the peer's
        // checksum check refuses it and reconnects.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a connection was (or is to be) closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CloseReason {
    #[error("disconnect requested")]
    Requested,
    #[error("send buffer full ({bytes} bytes): peer too slow, disconnecting")]
    SendBufferFull { bytes: usize },
    #[error("write failed: {0}")]
    WriteFailed(io::Error),
    #[error("read failed: {0}")]
    ReadFailed(io::Error),
    #[error("connect failed: {0}")]
    ConnectFailed(io::Error),
    #[error("setting up the socket failed: {0}")]
    Setup(io::Error),
    #[error("closed by the peer")]
    PeerClosed,
    #[error("refused: {0}")]
    Refused(Refusal),
    #[error("no hello within {timeout_ms} ms")]
    HandshakeTimeout { timeout_ms: u64 },
    #[error(
        "closed for a newer connection: {pending_max} connections already waited for their hello"
    )]
    HandshakeEvicted { pending_max: usize },
    #[error("replaced by a new connection from the same node (it restarted)")]
    Replaced,
}

/// Why received bytes were refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("bad frame: {0}")]
    Decode(#[from] DecodeError),
    #[error("the hello frame carries {count} signals instead of one")]
    HelloSignalCount { count: usize },
    #[error("expected TransportHello, got {name}")]
    HelloExpected { name: &'static str },
    #[error("hello addressed to node {to}, but this is node {me}")]
    HelloWrongTo { to: NodeId, me: NodeId },
    #[error("hello from node {from}, which is not a configured peer")]
    HelloUnknownNode { from: NodeId },
    #[error("hello from node {from}, which this node connects to itself")]
    HelloFromConnectedPeer { from: NodeId },
    #[error("hello from node {from}, but this connection was opened to node {expected}")]
    HelloWrongNode { from: NodeId, expected: NodeId },
    #[error("hello claims node {from} but its signal header says node {sender}")]
    HelloSenderMismatch { from: NodeId, sender: NodeId },
    #[error(
        "incompatible version {theirs} (this node runs {ours})",
        theirs = signal::version_string(*.version),
        ours = signal::version_string(signal::VERSION)
    )]
    HelloVersion { version: u32 },
    #[error("signal {name} claims sender node {sender} on the connection from node {peer}")]
    ForgedSender {
        name: &'static str,
        sender: NodeId,
        peer: NodeId,
    },
    #[error("signal {name} is addressed to node {receiver}, but this is node {me}")]
    WrongReceiver {
        name: &'static str,
        receiver: NodeId,
        me: NodeId,
    },
    #[error("signal {name} may only be created inside a node")]
    LocalOnly { name: &'static str },
    #[error(
        "signal {name} from API node {peer}, which may only send requests to a TC, a \
         dictionary or a subscription block, and ndbinfo scans"
    )]
    NotAnApiRequest { name: &'static str, peer: NodeId },
    #[error("TransportHello after the handshake")]
    HelloAfterHandshake,
    #[error("signal {name} from API node {peer} before its registration (ApiRegReq)")]
    NotRegistered { name: &'static str, peer: NodeId },
}

/// A request to the receive thread: close the connection of `generation`.
pub(crate) struct Command {
    pub slot: usize,
    pub generation: u64,
    pub reason: CloseReason,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub frames_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub signals_sent: AtomicU64,
    pub write_syscalls: AtomicU64,
    pub frames_received: AtomicU64,
    pub bytes_received: AtomicU64,
    pub signals_received: AtomicU64,
    pub signals_dropped: AtomicU64,
    pub frames_refused: AtomicU64,
}

/// Statistics only: no ordering with anything else is needed.
pub(crate) fn add(counter: &AtomicU64, value: u64) {
    counter.fetch_add(value, Ordering::Relaxed);
}

impl Counters {
    pub fn snapshot(&self) -> TransportStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        TransportStats {
            frames_sent: get(&self.frames_sent),
            bytes_sent: get(&self.bytes_sent),
            signals_sent: get(&self.signals_sent),
            write_syscalls: get(&self.write_syscalls),
            frames_received: get(&self.frames_received),
            bytes_received: get(&self.bytes_received),
            signals_received: get(&self.signals_received),
            signals_dropped: get(&self.signals_dropped),
            frames_refused: get(&self.frames_refused),
        }
    }
}

/// The send thread's side of the shared state.
pub(crate) struct SendShared {
    waker: mio::Waker,
    /// Write halves are registered here (by the receive thread) for writability.
    pub registry: mio::Registry,
    /// Set by the send thread just before it sleeps; senders that see it wake it.
    sleeping: AtomicBool,
    /// Senders created since the send thread last looked.
    pub new_links: Mutex<Vec<SenderLink>>,
    pub new_links_pending: AtomicBool,
}

impl SendShared {
    pub fn new(waker: mio::Waker, registry: mio::Registry) -> SendShared {
        SendShared {
            waker,
            registry,
            sleeping: AtomicBool::new(false),
            new_links: Mutex::new(Vec::new()),
            new_links_pending: AtomicBool::new(false),
        }
    }

    /// Senders call this after queueing chunks: wakes the send thread only if it sleeps.
    pub fn wake_if_sleeping(&self) {
        // Pairs with the fence in `prepare_sleep`: either the send thread
        // sees our chunks, or we see it sleeping.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.wake_now();
        }
    }

    pub fn wake_now(&self) {
        if let Err(error) = self.waker.wake() {
            tracing::error!(%error, "cannot wake the transport send thread");
        }
    }

    /// The send thread announces it is about to sleep; it must look at its
    /// queues once more afterwards.
    pub fn prepare_sleep(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    pub fn add_link(&self, link: SenderLink) {
        self.new_links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(link);
        self.new_links_pending.store(true, Ordering::Release);
        self.wake_now();
    }
}

pub(crate) struct Shared {
    pub me: NodeId,
    pub peers: Vec<PeerShared>,
    /// Node id → index into `peers`.
    slot_of: Box<[Option<u8>; 256]>,
    pub counters: Counters,
    pub send_buffer_max_bytes: usize,
    pub stopping: AtomicBool,
    receive_waker: mio::Waker,
    commands: Mutex<Vec<Command>>,
    pub commands_pending: AtomicBool,
    /// Present in send-thread mode.
    pub send: Option<SendShared>,
}

impl Shared {
    pub fn new(
        me: NodeId,
        peers: Vec<PeerShared>,
        send_buffer_max_bytes: usize,
        receive_waker: mio::Waker,
        send: Option<SendShared>,
    ) -> Shared {
        // Node ids are 1..=255, so at most 254 peers besides `me`: a slot fits a u8.
        assert!(peers.len() < 256);
        let mut slot_of = Box::new([None; 256]);
        for (slot, peer) in peers.iter().enumerate() {
            assert!(slot_of[peer.node.get() as usize].is_none());
            slot_of[peer.node.get() as usize] = Some(slot as u8);
        }
        Shared {
            me,
            peers,
            slot_of,
            counters: Counters::default(),
            send_buffer_max_bytes,
            stopping: AtomicBool::new(false),
            receive_waker,
            commands: Mutex::new(Vec::new()),
            commands_pending: AtomicBool::new(false),
            send,
        }
    }

    pub fn slot(&self, node: NodeId) -> Option<usize> {
        self.slot_of[node.get() as usize].map(usize::from)
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Marks the connection of `generation` to the peer in `slot` down at
    /// once (senders drop from now on) and asks the receive thread to close
    /// it. Does nothing if a newer connection already replaced it.
    pub fn request_close(&self, slot: usize, generation: u64, reason: CloseReason) {
        let peer = &self.peers[slot];
        let cleared = peer.clear_up(generation);
        if !cleared && peer.link().generation != generation {
            return;
        }
        self.commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Command {
                slot,
                generation,
                reason,
            });
        self.commands_pending.store(true, Ordering::Release);
        self.wake_receive_thread();
    }

    pub fn take_commands(&self, into: &mut Vec<Command>) {
        if self.commands_pending.swap(false, Ordering::AcqRel) {
            into.append(&mut self.commands.lock().unwrap_or_else(PoisonError::into_inner));
        }
    }

    pub fn wake_receive_thread(&self) {
        if let Err(error) = self.receive_waker.wake() {
            tracing::error!(%error, "cannot wake the transport receive thread");
        }
    }

    pub fn count_dropped(&self, signals: u64) {
        add(&self.counters.signals_dropped, signals);
    }
}
