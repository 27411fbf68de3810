//! The API node's side of one connection to a data node: connecting with
//! the hello handshake, and sending.
//!
//! Why not `crates/transport`: its receive thread always owns every socket
//! and delivers to a sink, while seed 003's model needs a user thread that
//! waits for a reply to read the sockets itself when few threads wait (the
//! *poll owner*, `receiver`), and only the receive thread above
//! `recv_thread_activation_threshold`. An API node also only connects out
//! and has one peer kind. So this small transporter reuses the signal
//! crate's frame code (`FrameWriter`, `decode_frame`) over non-blocking
//! sockets and keeps the transport's wire contract: the API node connects
//! and sends `TransportHello` first, the data node answers with its own.
//!
//! Sending: a user thread writes its frame itself, in one `write`, as NDB's
//! user threads do. A thread that finds another writing does not sleep on
//! the socket's lock: it leaves its frame in the link's queue and the
//! writer sends it with its own, or right after (combining: one `write`
//! for several threads' frames, and one wakeup of the data node's receive
//! thread instead of several). The writer drains the queue before its own
//! frame and again before it lets go, so a thread's frames go in the
//! order it sent them and none stays behind. Whatever the socket does not
//! take at once waits in the link's pending buffer (the two together
//! bounded by `SEND_BUFFER_MAX_BYTES`) and the send thread finishes it
//! when the socket has room: it only works when user threads outpace the
//! network.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use signal::{
    decode_frame, encode_frame, BlockNumber, BlockRef, NodeId, Signal, SignalBody, VERSION,
};

use transport::stream::{LinkKind, Stream};

use crate::error::{Error, Result};

/// Bytes queued towards one data node before sends are refused (temporary
/// error 1218): the same bound as the data nodes' transport.
pub const SEND_BUFFER_MAX_BYTES: usize = 16 << 20;
/// Bytes a data node may send before its hello frame is complete (a
/// hello frame takes some tens).
const HELLO_BYTES_MAX: usize = 4_096;

/// A connection on its way up: connecting, then waiting for the data
/// node's hello. Owned by the connection thread, which drives it with
/// [`Link::advance`] on each tick and never blocks on it.
pub(crate) struct Handshake {
    stream: Stream,
    deadline: Instant,
    timeout: Duration,
    hello_sent: bool,
    /// The data node's bytes so far.
    received: Vec<u8>,
}

/// Where a handshake stands after [`Link::advance`].
pub(crate) enum Progress {
    Pending(Handshake),
    Up(NewConnection, Stream),
}

/// The write side of an up connection.
struct Writer {
    stream: Stream,
    /// Bytes the socket has not taken yet, in order.
    pending: Vec<u8>,
    generation: u64,
}

/// One data node as the API node sees it.
pub(crate) struct Link {
    pub node: NodeId,
    pub host: String,
    pub port: u16,
    /// TC instances of the node (its `tc` threads, 1 when it has none).
    pub tc_instances: u32,
    /// The connection is up (hello exchanged).
    pub connected: AtomicBool,
    /// The last connection runs on the node's local socket, not TCP.
    local: AtomicBool,
    /// The node answered `ApiRegConf` with `started` on this connection.
    pub started: AtomicBool,
    /// A write on this connection failed: the peer is gone (a killed
    /// node's socket answers writes with a reset). Until the receiver
    /// reads the close, new transactions must not be sent here, or a
    /// client retrying at once spends every attempt on the dead node.
    broken: AtomicBool,
    /// +1 with every new connection; a close names the one it closes.
    pub generation: AtomicU64,
    /// Some pending bytes wait for the send thread.
    pub has_pending: AtomicBool,
    /// Heartbeat interval the node asked for (`ApiRegConf`), in ms; 0 = not yet known.
    pub heartbeat_interval_ms: AtomicU64,
    /// Registration answers (`ApiRegConf`/`ApiRegRef`) received, ever: the
    /// connection thread declares a node that stops answering dead.
    pub answers: AtomicU64,
    /// Connection attempts that failed, ever: `Cluster::connect` stops
    /// waiting for a node that is down.
    pub attempts_failed: AtomicU64,
    writer: Mutex<Option<Writer>>,
    /// Frames of threads that found the writer busy, for its holder to
    /// send (see the module doc).
    queue: Mutex<Vec<u8>>,
    /// The queue has bytes (set under its lock; read after the writer's
    /// lock is let go, so that bytes queued in between are not stranded).
    queued: AtomicBool,
}

/// A new connection, for the receiver to adopt.
pub(crate) struct NewConnection {
    pub link: usize,
    pub generation: u64,
    pub read: Stream,
}

impl Link {
    pub fn new(node: NodeId, host: String, port: u16, tc_instances: u32) -> Link {
        assert!(tc_instances > 0);
        Link {
            node,
            host,
            port,
            tc_instances,
            connected: AtomicBool::new(false),
            local: AtomicBool::new(false),
            started: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            has_pending: AtomicBool::new(false),
            heartbeat_interval_ms: AtomicU64::new(0),
            answers: AtomicU64::new(0),
            attempts_failed: AtomicU64::new(0),
            writer: Mutex::new(None),
            queue: Mutex::new(Vec::new()),
            queued: AtomicBool::new(false),
        }
    }

    /// The kind of socket of the connection that is up (or was last).
    pub fn kind(&self) -> LinkKind {
        if self.local.load(Ordering::Acquire) {
            LinkKind::Local
        } else {
            LinkKind::Tcp
        }
    }

    /// Up and registered with a started data node: transactions may go there.
    pub fn is_live(&self) -> bool {
        self.connected.load(Ordering::Acquire)
            && self.started.load(Ordering::Acquire)
            && !self.broken.load(Ordering::Acquire)
    }

    /// Not connected, and the last connection attempt failed: the node
    /// is down (or hung), as far as a connecting client can tell.
    pub fn seems_down(&self) -> bool {
        !self.connected.load(Ordering::Acquire) && self.attempts_failed.load(Ordering::Acquire) > 0
    }

    fn lock_writer(&self) -> MutexGuard<'_, Option<Writer>> {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The writer's lock if nobody holds it.
    fn try_lock_writer(&self) -> Option<MutexGuard<'_, Option<Writer>>> {
        match self.writer.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn lock_queue(&self) -> MutexGuard<'_, Vec<u8>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The queued frames, leaving the queue empty.
    fn take_queue(&self) -> Vec<u8> {
        // Nothing queued (the common, uncontended case): no lock. Bytes
        // queued just after this look are the release path's to send.
        if !self.queued.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let mut queue = self.lock_queue();
        self.queued.store(false, Ordering::SeqCst);
        std::mem::take(&mut *queue)
    }

    /// Drops what is queued (the connection it was for is gone: the
    /// requests in it fail with the node's close, as those in flight).
    fn clear_queue(&self) {
        drop(self.take_queue());
    }

    /// Starts a connection: a non-blocking connect, to be driven by
    /// [`Link::advance`] until it is up or fails. Nothing here waits on the
    /// peer: the connection thread also sends every other node's heartbeat,
    /// and a hung node (SIGSTOP accepts connections in the kernel but never
    /// answers) must not hold it up.
    pub fn start_connect(&self, timeout: Duration) -> io::Result<Handshake> {
        assert!(!timeout.is_zero());
        let addr = resolve(&self.host, self.port)?;
        // A data node on this host is reached over its local socket.
        let stream = Stream::connect(addr, true)?;
        Ok(Handshake {
            stream,
            deadline: Instant::now() + timeout,
            timeout,
            hello_sent: false,
            received: Vec::with_capacity(256),
        })
    }

    /// Drives `handshake` as far as it goes without waiting: the connect,
    /// our hello, the node's hello. When both hellos are through, installs
    /// the write side and returns the read side for the receiver and the
    /// send thread's handle on the socket.
    pub fn advance(&self, mut handshake: Handshake, me: NodeId) -> io::Result<Progress> {
        if Instant::now() >= handshake.deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no {} within {} ms",
                    if handshake.hello_sent {
                        "hello from the data node"
                    } else {
                        "connection"
                    },
                    handshake.timeout.as_millis()
                ),
            ));
        }
        if !handshake.hello_sent {
            if !handshake.stream.is_connected()? {
                return Ok(Progress::Pending(handshake));
            }
            handshake.stream.set_nodelay()?;
            self.send_hello(&mut handshake.stream, me)?;
            handshake.hello_sent = true;
        }
        let mut chunk = [0u8; 256];
        loop {
            match handshake.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the data node closed the connection during the hello (is this API node id configured?)",
                    ))
                }
                Ok(n) => handshake.received.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Progress::Pending(handshake))
                }
                Err(e) => return Err(e),
            }
            // Checked after each read: what follows the hello (a close, if
            // the node died at once) belongs to the connection, not to it.
            if self.check_hello(&handshake.received, me)? {
                break;
            }
            if handshake.received.len() > HELLO_BYTES_MAX {
                return Err(io::Error::other(format!(
                    "more than {HELLO_BYTES_MAX} bytes before the hello ended"
                )));
            }
        }
        let (connection, send_handle) = self.install(handshake.stream)?;
        Ok(Progress::Up(connection, send_handle))
    }

    fn send_hello(&self, stream: &mut Stream, me: NodeId) -> io::Result<()> {
        let hello = Signal {
            receiver: BlockRef::new(self.node, BlockNumber::PROCESS, 0),
            sender: BlockRef::new(me, BlockNumber::PROCESS, 0),
            body: SignalBody::TransportHello {
                from: me,
                to: self.node,
                version: VERSION,
            },
        };
        let mut bytes = Vec::with_capacity(64);
        encode_frame(std::slice::from_ref(&hello), &mut bytes)
            .map_err(|e| io::Error::other(format!("encoding the hello: {e}")))?;
        // A new socket's send buffer is empty: the hello goes out whole or
        // the socket is broken.
        let written = stream.write(&bytes)?;
        if written != bytes.len() {
            return Err(io::Error::other(format!(
                "hello cut short after {written} of {} bytes",
                bytes.len()
            )));
        }
        Ok(())
    }

    /// Checks the bytes received so far: false while the hello frame is
    /// incomplete, true for exactly one frame with one `TransportHello`
    /// from the node we connected to, addressed to us; an error otherwise.
    fn check_hello(&self, buffer: &[u8], me: NodeId) -> io::Result<bool> {
        let frame =
            decode_frame(buffer).map_err(|e| io::Error::other(format!("bad hello: {e}")))?;
        let Some((frame, used)) = frame else {
            return Ok(false);
        };
        let signals: Vec<_> = frame.signals().collect();
        let hello = match signals.as_slice() {
            [Ok(signal)] => signal.clone(),
            _ => {
                return Err(io::Error::other(
                    "the data node's first frame is not one hello",
                ))
            }
        };
        let SignalBody::TransportHello { from, to, version } = hello.body else {
            return Err(io::Error::other(format!(
                "expected a hello, got {}",
                hello.body.name()
            )));
        };
        if from != self.node || to != me || version / 10_000 != VERSION / 10_000 {
            return Err(io::Error::other(format!(
                "hello from node {from} to {to} version {version}: expected node {} to {me}",
                self.node
            )));
        }
        if used != buffer.len() {
            // The node sends nothing after its hello until we register.
            return Err(io::Error::other("bytes after the hello"));
        }
        Ok(true)
    }

    /// The hellos are through: installs the write side of `stream`.
    fn install(&self, stream: Stream) -> io::Result<(NewConnection, Stream)> {
        // Three handles on the socket, all non-blocking (as it was made):
        // the writer's, the receiver's and the send thread's poll's.
        let read = stream.try_clone()?;
        let send_handle = stream.try_clone()?;
        self.local
            .store(stream.kind() == LinkKind::Local, Ordering::Release);
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        *self.lock_writer() = Some(Writer {
            stream,
            pending: Vec::new(),
            generation,
        });
        self.clear_queue();
        self.has_pending.store(false, Ordering::Release);
        self.started.store(false, Ordering::Release);
        self.broken.store(false, Ordering::Release);
        self.connected.store(true, Ordering::Release);
        Ok((
            NewConnection {
                link: usize::MAX,
                generation,
                read,
            },
            send_handle,
        ))
    }

    /// Sends one or more encoded frames (`bytes`), in one write when the
    /// socket takes them, or leaves them to the thread writing now (see the
    /// module doc). Returns whether the send thread must finish.
    pub fn send(&self, bytes: &[u8], stats: &crate::cluster::Counters) -> Result<bool> {
        let (guard, own) = match self.try_lock_writer() {
            Some(guard) => (guard, bytes),
            None => {
                self.enqueue(bytes)?;
                // The holder may have let go before it saw them. The fence
                // pairs with the one in `drain_after_release`: either this
                // look finds the lock free or the holder finds the flag set
                // (the mutex's own orderings are acquire/release only).
                fence(Ordering::SeqCst);
                match self.try_lock_writer() {
                    Some(guard) => (guard, &[][..]),
                    None => return Ok(false),
                }
            }
        };
        let finish = self.write_locked(guard, own, stats);
        let more = self.drain_after_release(stats);
        Ok(finish? || more)
    }

    /// Queues `bytes` for the thread holding the writer.
    fn enqueue(&self, bytes: &[u8]) -> Result<()> {
        let mut queue = self.lock_queue();
        if queue.len() + bytes.len() > SEND_BUFFER_MAX_BYTES {
            return Err(Error::with_context(
                proto::error::SEND_BUFFERS_OVERLOADED,
                format!("{} bytes queued for node {}", queue.len(), self.node),
            ));
        }
        queue.extend_from_slice(bytes);
        self.queued.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Under the writer's lock: the queued frames, then `own`, then what was
    /// queued meanwhile, until the queue is empty. Lets go of the lock.
    /// Returns whether the send thread must finish.
    fn write_locked(
        &self,
        mut guard: MutexGuard<'_, Option<Writer>>,
        own: &[u8],
        stats: &crate::cluster::Counters,
    ) -> Result<bool> {
        let Some(writer) = guard.as_mut() else {
            drop(guard);
            self.clear_queue();
            return Err(self.not_connected());
        };
        let mut finish = false;
        let mut batch = self.take_queue();
        if batch.is_empty() {
            finish |= self.write_or_keep(writer, own, stats)?;
        } else {
            batch.extend_from_slice(own);
            finish |= self.write_or_keep(writer, &batch, stats)?;
        }
        loop {
            batch = self.take_queue();
            if batch.is_empty() {
                return Ok(finish);
            }
            finish |= self.write_or_keep(writer, &batch, stats)?;
        }
    }

    /// After the writer's lock is let go: frames queued after the holder's
    /// last look get written by whoever can take the lock now (if nobody
    /// can, its holder will look again when it lets go). Returns whether
    /// the send thread must finish.
    fn drain_after_release(&self, stats: &crate::cluster::Counters) -> bool {
        let mut finish = false;
        // Pairs with the fence in `send` (see there).
        fence(Ordering::SeqCst);
        while self.queued.load(Ordering::SeqCst) {
            let Some(guard) = self.try_lock_writer() else {
                break;
            };
            // An error is the connection's: the receiver sees it close.
            finish |= self.write_locked(guard, &[], stats).unwrap_or(false);
        }
        finish
    }

    /// Writes `bytes` (after any pending ones, which go first); what the
    /// socket does not take waits in the pending buffer. Returns whether
    /// the send thread must finish.
    fn write_or_keep(
        &self,
        writer: &mut Writer,
        bytes: &[u8],
        stats: &crate::cluster::Counters,
    ) -> Result<bool> {
        if bytes.is_empty() {
            return Ok(!writer.pending.is_empty());
        }
        if writer.pending.len() + bytes.len() > SEND_BUFFER_MAX_BYTES {
            return Err(Error::with_context(
                proto::error::SEND_BUFFERS_OVERLOADED,
                format!("{} bytes wait for node {}", writer.pending.len(), self.node),
            ));
        }
        if !writer.pending.is_empty() {
            writer.pending.extend_from_slice(bytes);
            return Ok(true);
        }
        let mut written = 0;
        while written < bytes.len() {
            stats.write_calls.fetch_add(1, Ordering::Relaxed);
            match writer.stream.write(&bytes[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(node = %self.node, "write failed: {e}");
                    // The receiver sees the broken connection and closes it;
                    // until then no new transaction goes here.
                    self.broken.store(true, Ordering::Release);
                    return Err(self.not_connected());
                }
            }
        }
        if written < bytes.len() {
            writer.pending.extend_from_slice(&bytes[written..]);
            self.has_pending.store(true, Ordering::Release);
            return Ok(true);
        }
        Ok(false)
    }

    /// The send thread's turn: writes what is pending. Returns whether
    /// bytes are still pending.
    pub fn flush_pending(&self, stats: &crate::cluster::Counters) -> bool {
        let mut guard = self.lock_writer();
        let Some(writer) = guard.as_mut() else {
            self.has_pending.store(false, Ordering::Release);
            return false;
        };
        let mut written = 0;
        while written < writer.pending.len() {
            stats.write_calls.fetch_add(1, Ordering::Relaxed);
            match writer.stream.write(&writer.pending[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.broken.store(true, Ordering::Release);
                    break;
                }
            }
        }
        writer.pending.drain(..written);
        let left = !writer.pending.is_empty();
        self.has_pending.store(left, Ordering::Release);
        // Frames queued while this thread wrote go now (after the pending
        // ones, or into the pending buffer behind them).
        let finish = self.write_locked(guard, &[], stats).unwrap_or(false);
        let more = self.drain_after_release(stats);
        let left = left || finish || more;
        if left {
            self.has_pending.store(true, Ordering::Release);
        }
        left
    }

    /// Closes the connection of `generation` (if it is still the current
    /// one). Returns whether it was.
    pub fn close(&self, generation: u64) -> bool {
        let mut guard = self.lock_writer();
        match guard.as_ref() {
            Some(writer) if writer.generation == generation => {
                let _ = writer.stream.shutdown(std::net::Shutdown::Both);
                *guard = None;
                self.connected.store(false, Ordering::Release);
                self.started.store(false, Ordering::Release);
                self.has_pending.store(false, Ordering::Release);
                drop(guard);
                self.clear_queue();
                true
            }
            _ => false,
        }
    }

    /// Gives up on the connection of `generation`, whose node went silent
    /// (a hung process, a cut network: nothing closes the socket). New
    /// transactions stop going there at once; the shutdown makes the
    /// receiver read the close and fail the requests in flight, as for a
    /// node that crashed. Returns whether it was the current connection.
    pub fn abandon(&self, generation: u64) -> bool {
        let guard = self.lock_writer();
        match guard.as_ref() {
            Some(writer) if writer.generation == generation => {
                self.broken.store(true, Ordering::Release);
                let _ = writer.stream.shutdown(std::net::Shutdown::Both);
                true
            }
            _ => false,
        }
    }

    pub fn not_connected(&self) -> Error {
        Error::with_context(
            proto::error::NODE_FAILURE_ABORTED,
            format!("data node {} is not connected", self.node),
        )
    }
}

fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("{host}:{port} resolves to no address")))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn node(id: u8) -> NodeId {
        NodeId::new(id).expect("a node id")
    }

    /// Drives a handshake until it ends (the tests' peers answer at once).
    fn connect(link: &Link, me: NodeId, timeout: Duration) -> io::Result<(NewConnection, Stream)> {
        let mut handshake = link.start_connect(timeout)?;
        loop {
            match link.advance(handshake, me)? {
                Progress::Up(connection, send) => return Ok((connection, send)),
                Progress::Pending(pending) => {
                    handshake = pending;
                    std::thread::yield_now();
                }
            }
        }
    }

    /// The data node's side of a connection: accepts the client, reads its
    /// hello and answers with its own.
    fn accept_and_greet(
        listener: &TcpListener,
        me: NodeId,
        data_node: NodeId,
    ) -> std::net::TcpStream {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut chunk = [0u8; 256];
        let _ = stream.read(&mut chunk).expect("the client's hello");
        let hello = Signal {
            receiver: BlockRef::new(me, BlockNumber::PROCESS, 0),
            sender: BlockRef::new(data_node, BlockNumber::PROCESS, 0),
            body: SignalBody::TransportHello {
                from: data_node,
                to: me,
                version: VERSION,
            },
        };
        let mut bytes = Vec::new();
        encode_frame(std::slice::from_ref(&hello), &mut bytes).expect("encode");
        stream.write_all(&bytes).expect("send the hello");
        stream
    }

    /// Threads sending at once through one link (combining): every frame
    /// arrives whole, once, and each thread's in the order it sent them.
    #[test]
    fn concurrent_senders_lose_nothing_and_keep_their_order() {
        const THREADS: u8 = 8;
        const SENDS: u32 = 3_000;
        const RECORD_BYTES: usize = 5;
        const LATE: &[u8] = b"late";
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
        let port = listener.local_addr().expect("address").port();
        let (me, data_node) = (node(9), node(2));
        let total = usize::from(THREADS) * SENDS as usize * RECORD_BYTES;
        let peer = std::thread::spawn(move || {
            let mut stream = accept_and_greet(&listener, me, data_node);
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("a read timeout");
            let mut all = vec![0u8; LATE.len() + total];
            stream.read_exact(&mut all).map(|()| all)
        });
        let link = Link::new(data_node, "127.0.0.1".to_owned(), port, 1);
        let _connection =
            connect(&link, me, Duration::from_secs(5)).expect("connect and exchange hellos");
        let counters = crate::cluster::Counters::default();
        // A frame queued while another thread holds the writer, after that
        // thread's last look at the queue: its release writes it.
        let held = link.lock_writer();
        let queued = std::thread::scope(|s| s.spawn(|| link.send(LATE, &counters)).join());
        assert!(
            matches!(queued, Ok(Ok(false))),
            "queued, nothing for the send thread"
        );
        assert!(link.queued.load(Ordering::SeqCst));
        drop(held);
        link.drain_after_release(&counters);
        assert!(!link.queued.load(Ordering::SeqCst), "written on release");
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            // The send thread's part: what a socket did not take at once.
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if link.has_pending.load(Ordering::Acquire) {
                        link.flush_pending(&counters);
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                // As the real send thread: only what is pending.
                while link.has_pending.load(Ordering::Acquire) {
                    link.flush_pending(&counters);
                }
            });
            let senders: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (link, counters) = (&link, &counters);
                    scope.spawn(move || {
                        for n in 0..SENDS {
                            let mut record = [t; RECORD_BYTES];
                            record[1..].copy_from_slice(&n.to_le_bytes());
                            link.send(&record, counters).expect("send");
                        }
                    })
                })
                .collect();
            for s in senders {
                s.join().expect("a sender");
            }
            done.store(true, Ordering::Release);
        });
        let all = peer.join().expect("the peer").expect("every byte arrives");
        assert_eq!(&all[..LATE.len()], LATE);
        let mut next = [0u32; THREADS as usize];
        for record in all[LATE.len()..].chunks(RECORD_BYTES) {
            let t = usize::from(record[0]);
            let n = u32::from_le_bytes(record[1..].try_into().expect("4 bytes"));
            assert!(t < usize::from(THREADS), "a whole record: {record:?}");
            assert_eq!(n, next[t], "thread {t}'s frames in order");
            next[t] += 1;
        }
        assert!(next.iter().all(|n| *n == SENDS));
        assert!(!link.queued.load(Ordering::SeqCst), "nothing left queued");
    }

    #[test]
    fn a_failed_write_takes_the_link_out_of_service_until_it_reconnects() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
        let port = listener.local_addr().expect("address").port();
        let (me, data_node) = (node(9), node(2));
        // The data node: answers the hello, then goes away at once (as a
        // killed process does).
        let peer = std::thread::spawn(move || {
            accept_and_greet(&listener, me, data_node);
        });
        let link = Link::new(data_node, "127.0.0.1".to_owned(), port, 1);
        let _connection =
            connect(&link, me, Duration::from_secs(5)).expect("connect and exchange hellos");
        peer.join().expect("the peer thread");
        link.started.store(true, Ordering::Release);
        assert!(link.is_live(), "connected and started");
        // The first write after the peer's close may still be taken; a
        // later one fails (the peer's reset).
        let counters = crate::cluster::Counters::default();
        let failed = (0..100).find_map(|_| {
            let sent = link.send(b"x", &counters);
            std::thread::sleep(Duration::from_millis(10));
            sent.err()
        });
        let error = failed.expect("a write to a closed peer fails");
        assert_eq!(error.code, proto::error::NODE_FAILURE_ABORTED);
        assert!(
            link.connected.load(Ordering::Acquire),
            "the receiver has not closed it yet"
        );
        assert!(!link.is_live(), "no new transaction goes to a broken link");
    }

    #[test]
    fn an_abandoned_link_leaves_service_and_its_reader_sees_the_close() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
        let port = listener.local_addr().expect("address").port();
        let (me, data_node) = (node(9), node(2));
        // The data node: answers the hello, then keeps the socket open and
        // says nothing more (a hung node; a cut network looks the same).
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let _stream = accept_and_greet(&listener, me, data_node);
            let _ = done_rx.recv();
        });
        let link = Link::new(data_node, "127.0.0.1".to_owned(), port, 1);
        let (mut connection, _send) =
            connect(&link, me, Duration::from_secs(5)).expect("connect and exchange hellos");
        link.started.store(true, Ordering::Release);
        assert!(link.is_live(), "connected and started");
        let generation = connection.generation;
        assert!(
            !link.abandon(generation + 1),
            "another connection's generation"
        );
        assert!(link.is_live(), "a stale abandon changes nothing");
        assert!(link.abandon(generation));
        assert!(
            !link.is_live(),
            "no new transaction goes to an abandoned link"
        );
        // The receiver learns it as a close, and fails what was in flight.
        let mut chunk = [0u8; 16];
        let read = (0..100).find_map(|_| match connection.read.read(&mut chunk) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
                None
            }
            other => Some(other.map_err(|e| e.to_string())),
        });
        assert_eq!(read, Some(Ok(0)), "the reader sees end of stream");
        let _ = done_tx.send(());
        peer.join().expect("the peer thread");
    }
}
