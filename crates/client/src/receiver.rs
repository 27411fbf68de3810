//! Receiving: who reads the sockets, and how replies reach the session
//! that waits for them (seed 003, DESIGN.md §6).
//!
//! All sockets of a cluster connection sit in one `mio::Poll`, the
//! [`Receiver`], behind a mutex: whoever holds it is the *poll owner* and
//! reads for everybody. A signal to an API node is addressed
//! `BlockRef(api node, API_CLUSTER, instance)`; instance 0 is the cluster
//! manager (registration answers), any other is a session's [`Mailbox`].
//!
//! - While at most `recv_thread_activation_threshold` user threads wait, a
//!   waiting user thread takes the poll itself (receiving in the thread
//!   that needs the reply saves a wakeup). When it has its own reply it
//!   lets go and *hands over*: it wakes another waiting thread, which
//!   becomes the next owner.
//! - Above the threshold (or when futures wait, which have no thread of
//!   their own) the receive thread owns the poll and user threads sleep on
//!   their mailbox until it wakes them.
//! - Waking many sleepers costs the receive thread time it needs for
//!   receiving, so beyond `WAKEUPS_DIRECT_MAX` per round it hands the rest
//!   to the wakeup thread.
//! - With nobody waiting, the receive thread polls every
//!   `HOUSEKEEPING_INTERVAL_MS` without blocking, to keep registration
//!   answers and closed connections from piling up.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use kernel::runtime::spin::{self, SpinPolicy};
use mio::{Events, Interest, Poll, Token};
use signal::frame::FRAME_MAX_BYTES;
use signal::{decode_frame, BlockNumber, NodeId, Signal, SignalBody};

use crate::cluster::Shared;
use crate::link::NewConnection;

pub(crate) const WAKER: Token = Token(usize::MAX - 1);
/// Longest single poll of an owner, so that ownership moves between threads.
pub(crate) const POLL_SLICE_MS: u64 = 10;
/// How often the idle receive thread looks at the sockets.
pub(crate) const HOUSEKEEPING_INTERVAL_MS: u64 = 10;
/// Sleepers the receive thread wakes itself per round; the rest go to the
/// wakeup thread.
const WAKEUPS_DIRECT_MAX: usize = 4;
const EVENTS_MAX: usize = 256;
/// A receive buffer holds two maximal frames, as the data node's does.
const RECEIVE_BUFFER_BYTES: usize = 2 * FRAME_MAX_BYTES;
/// Reads from one connection per round before the others get their turn.
const READS_PER_ROUND_MAX: usize = 16;

/// What reaches a session.
#[derive(Debug)]
pub(crate) enum Event {
    Signal(Signal),
    /// The connection to this data node closed: its requests are lost.
    /// The connection of this generation to the node closed: requests sent
    /// on it are lost (not those sent on a later connection).
    NodeDown(NodeId, u64),
}

/// The inbox of one session and how to wake its thread.
pub(crate) struct Mailbox {
    pub instance: u16,
    inbox: Mutex<Inbox>,
    cond: Condvar,
}

#[derive(Default)]
struct Inbox {
    events: VecDeque<Event>,
    /// Set by a handover: try to take the poll.
    kick: bool,
    /// A future waits for this session.
    waker: Option<Waker>,
    /// Threads sleeping on the condition variable: only with one does a
    /// wake notify (std's `notify_one` is a futex syscall even with
    /// no sleeper, and most wakes find the session awake, as the poll
    /// owner that received its own reply).
    sleepers: u32,
}

impl Mailbox {
    pub fn new(instance: u16) -> Mailbox {
        Mailbox {
            instance,
            inbox: Mutex::new(Inbox::default()),
            cond: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an event; the caller wakes the session afterwards.
    pub fn push_event(&self, event: Event) {
        self.lock().events.push_back(event);
    }

    /// Wakes the session's thread (or future).
    pub fn wake(&self) {
        let waker = {
            let mut inbox = self.lock();
            if inbox.sleepers > 0 {
                self.cond.notify_one();
            }
            inbox.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Asks the session's thread to try to become the poll owner.
    pub fn kick_to_poll(&self) {
        let mut inbox = self.lock();
        inbox.kick = true;
        if inbox.sleepers > 0 {
            self.cond.notify_one();
        }
    }

    /// Moves every event out into `out`.
    pub fn drain(&self, out: &mut Vec<Event>) {
        let mut inbox = self.lock();
        out.extend(inbox.events.drain(..));
    }

    pub fn has_events(&self) -> bool {
        !self.lock().events.is_empty()
    }

    /// Sleeps until an event, a kick or `timeout`; clears the kick.
    fn sleep(&self, timeout: Duration) {
        let mut inbox = self.lock();
        if inbox.events.is_empty() && !inbox.kick {
            // Set and cleared under the lock that `wake` and
            // `kick_to_poll` take, so no notification is lost.
            inbox.sleepers += 1;
            let (mut inbox, _) = self
                .cond
                .wait_timeout(inbox, timeout)
                .unwrap_or_else(|p| p.into_inner());
            inbox.sleepers -= 1;
            inbox.kick = false;
        } else {
            inbox.kick = false;
        }
    }

    /// A future waits: wake `waker` on the next event.
    pub fn set_waker(&self, waker: &Waker) -> bool {
        let mut inbox = self.lock();
        if !inbox.events.is_empty() {
            return false;
        }
        inbox.waker = Some(waker.clone());
        true
    }
}

/// One up connection in the poll.
struct Connection {
    link: usize,
    generation: u64,
    stream: transport::stream::Stream,
    buffer: Box<[u8]>,
    start: usize,
    end: usize,
    /// The poll said the peer closed (or the socket failed): read to the
    /// end, past any short read (see [`Receiver::read`]).
    closing: bool,
}

/// The poll and every connection's read side; the holder of the mutex
/// around it is the poll owner.
pub(crate) struct Receiver {
    poll: Poll,
    events: Events,
    connections: Vec<Option<Connection>>,
    /// Sessions that got events this round.
    to_wake: Vec<Arc<Mailbox>>,
    /// Signals decoded from one frame, checked before any is delivered.
    staging: Vec<Signal>,
    /// Connections that had more to read when their round ended.
    again: Vec<usize>,
    /// How long a user thread that owns the poll polls without blocking
    /// before it blocks in the poll (`ClusterOptions::spin_method`): a
    /// reply that comes meanwhile is read at once, without the wake-up of
    /// a thread asleep in `epoll_wait`.
    spin: SpinPolicy,
}

/// Who polls: decides whether wakeups may go to the wakeup thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Owner {
    User,
    /// The receive thread, active above the threshold.
    ReceiveThread,
    /// The receive thread's look at the sockets while nobody waits.
    Housekeeping,
}

impl Receiver {
    pub fn new(poll: Poll, links: usize, spin: SpinPolicy) -> Receiver {
        Receiver {
            spin,
            poll,
            events: Events::with_capacity(EVENTS_MAX),
            connections: (0..links).map(|_| None).collect(),
            to_wake: Vec::new(),
            staging: Vec::new(),
            again: Vec::new(),
        }
    }

    /// One round: adopt new connections, poll up to `timeout`, read and
    /// dispatch, wake the sessions that got events.
    pub fn round(&mut self, shared: &Shared, timeout: Duration, owner: Owner) {
        self.adopt(shared);
        let timeout = if self.again.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        if let Err(error) = self.poll.poll(&mut self.events, Some(timeout)) {
            if error.kind() != io::ErrorKind::Interrupted {
                tracing::warn!("client receive poll failed: {error}");
            }
            return;
        }
        let mut ready: [usize; EVENTS_MAX] = [usize::MAX; EVENTS_MAX];
        let mut count = 0;
        for index in self.again.drain(..) {
            ready[count] = index;
            count += 1;
        }
        for event in self.events.iter() {
            let index = event.token().0;
            if event.token() == WAKER {
                continue;
            }
            if event.is_read_closed() || event.is_error() {
                if let Some(Some(c)) = self.connections.get_mut(index) {
                    c.closing = true;
                }
            }
            if count < EVENTS_MAX && !ready[..count].contains(&index) {
                ready[count] = index;
                count += 1;
            }
        }
        for &index in &ready[..count] {
            self.read_connection(shared, index);
        }
        shared
            .counters
            .receive_rounds
            .fetch_add(1, Ordering::Relaxed);
        if owner == Owner::ReceiveThread {
            shared
                .counters
                .receive_thread_rounds
                .fetch_add(1, Ordering::Relaxed);
        }
        self.wake_all(shared, owner);
    }

    fn adopt(&mut self, shared: &Shared) {
        let new: Vec<NewConnection> = std::mem::take(&mut *shared.lock_new_connections());
        for mut connection in new {
            let index = connection.link;
            if let Some(old) = self.connections[index].take() {
                self.drop_connection(shared, old);
            }
            let token = Token(index);
            if let Err(error) =
                self.poll
                    .registry()
                    .register(&mut connection.read, token, Interest::READABLE)
            {
                tracing::warn!(node = %shared.links[index].node, "cannot watch the connection: {error}");
                shared.links[index].close(connection.generation);
                continue;
            }
            self.connections[index] = Some(Connection {
                link: index,
                generation: connection.generation,
                stream: connection.read,
                buffer: vec![0u8; RECEIVE_BUFFER_BYTES].into_boxed_slice(),
                start: 0,
                end: 0,
                closing: false,
            });
            // Bytes may have come before the registration: read now.
            self.read_connection(shared, index);
        }
    }

    fn read_connection(&mut self, shared: &Shared, index: usize) {
        let Some(mut connection) = self.connections.get_mut(index).and_then(Option::take) else {
            return;
        };
        match self.read(shared, &mut connection) {
            Ok(()) => self.connections[index] = Some(connection),
            Err(reason) => {
                tracing::info!(node = %shared.links[index].node, "connection closed: {reason}");
                self.drop_connection(shared, connection);
            }
        }
    }

    /// Reads until the socket is empty (edge-triggered), dispatching whole
    /// frames; a connection with more to read goes on the `again` list.
    fn read(&mut self, shared: &Shared, c: &mut Connection) -> Result<(), String> {
        for _ in 0..READS_PER_ROUND_MAX {
            if c.end == c.buffer.len() {
                c.buffer.copy_within(c.start..c.end, 0);
                c.end -= c.start;
                c.start = 0;
            }
            let space = c.buffer.len() - c.end;
            match c.stream.read(&mut c.buffer[c.end..]) {
                Ok(0) => return Err("closed by the data node".into()),
                Ok(n) => {
                    c.end += n;
                    shared
                        .counters
                        .bytes_received
                        .fetch_add(n as u64, Ordering::Relaxed);
                    self.decode(shared, c)?;
                    // A short read emptied the socket of bytes: later bytes
                    // raise a new edge (epoll(7) on stream sockets), so the
                    // read that would only say WouldBlock is saved. Not so
                    // the peer's close: one that came with the bytes, before
                    // the poll returned, raised no edge of its own, and only
                    // the next read (0) shows it. Without that read a data
                    // node killed right after it sent something (a view
                    // change, a reply) stayed connected here until the
                    // heartbeat gave up on it.
                    if n < space && !c.closing {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        // More may be there: the edge will not fire again, so come back.
        self.again.push(c.link);
        Ok(())
    }

    fn decode(&mut self, shared: &Shared, c: &mut Connection) -> Result<(), String> {
        let peer = shared.links[c.link].node;
        loop {
            let decoded =
                decode_frame(&c.buffer[c.start..c.end]).map_err(|e| format!("bad frame: {e}"))?;
            let Some((frame, used)) = decoded else { break };
            self.staging.clear();
            for signal in frame.signals() {
                let signal = signal.map_err(|e| format!("bad frame: {e}"))?;
                check_signal(&signal, peer, shared.me)?;
                self.staging.push(signal);
            }
            c.start += used;
            let mut staging = std::mem::take(&mut self.staging);
            for signal in staging.drain(..) {
                self.dispatch(shared, c.link, signal);
            }
            self.staging = staging;
        }
        if c.start == c.end {
            c.start = 0;
            c.end = 0;
        }
        Ok(())
    }

    fn dispatch(&mut self, shared: &Shared, link: usize, signal: Signal) {
        shared
            .counters
            .signals_received
            .fetch_add(1, Ordering::Relaxed);
        let instance = signal.receiver.instance;
        if instance == 0 {
            shared.on_cluster_signal(link, signal);
            return;
        }
        let Some(mailbox) = shared.mailbox(instance) else {
            // The session ended: its late replies are dropped.
            return;
        };
        mailbox.push_event(Event::Signal(signal));
        if !self.to_wake.iter().any(|m| Arc::ptr_eq(m, &mailbox)) {
            self.to_wake.push(mailbox);
        }
    }

    fn drop_connection(&mut self, shared: &Shared, mut connection: Connection) {
        let _ = self.poll.registry().deregister(&mut connection.stream);
        let link = &shared.links[connection.link];
        let was_started = link.started.load(Ordering::Acquire);
        if link.close(connection.generation) {
            shared.on_node_down(link.node, connection.generation, was_started);
        }
    }

    fn wake_all(&mut self, shared: &Shared, owner: Owner) {
        if self.to_wake.is_empty() {
            return;
        }
        let direct = match owner {
            Owner::User | Owner::Housekeeping => self.to_wake.len(),
            Owner::ReceiveThread => WAKEUPS_DIRECT_MAX.min(self.to_wake.len()),
        };
        for mailbox in self.to_wake.drain(..direct) {
            mailbox.wake();
        }
        if !self.to_wake.is_empty() {
            shared
                .counters
                .wakeups_offloaded
                .fetch_add(self.to_wake.len() as u64, Ordering::Relaxed);
            shared.hand_to_wakeup_thread(&mut self.to_wake);
        }
    }
}

/// A signal from a data node must come from that node, be addressed to
/// this API node's cluster block, and not be one only a runtime may make.
fn check_signal(signal: &Signal, peer: NodeId, me: NodeId) -> Result<(), String> {
    if signal.sender.node != peer {
        return Err(format!(
            "signal {} claims sender node {}",
            signal.body.name(),
            signal.sender.node
        ));
    }
    if signal.receiver.node != me || signal.receiver.block != BlockNumber::API_CLUSTER {
        return Err(format!(
            "signal {} addressed to {}",
            signal.body.name(),
            signal.receiver
        ));
    }
    if signal.body.is_local_only() || matches!(signal.body, SignalBody::TransportHello { .. }) {
        return Err(format!(
            "signal {} may not come from the network",
            signal.body.name()
        ));
    }
    Ok(())
}

/// Waits until `mailbox` has events or `timeout` passed, receiving for
/// everybody while this thread is the poll owner (see the module doc).
pub(crate) fn wait(shared: &Shared, mailbox: &Arc<Mailbox>, timeout: Duration) {
    let waited = std::time::Instant::now();
    let deadline = waited + timeout;
    let waiters = shared.waiters.fetch_add(1, Ordering::AcqRel) + 1;
    shared.add_waiting(mailbox);
    if waiters > shared.options.recv_thread_activation_threshold {
        shared.activate_receive_thread();
    }
    loop {
        if mailbox.has_events() {
            break;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            break;
        }
        let left = deadline - now;
        let active = shared.receive_thread_active();
        if !active {
            if let Some(mut receiver) = shared.try_lock_receiver() {
                let spin = receiver.spin.limit().min(left);
                let mut contended = false;
                if !spin.is_zero() {
                    // Replies that come within the spin are read without a
                    // wake-up; the poll is yielded between looks, so that a
                    // runnable thread of this CPU is not kept from it.
                    let spun = std::time::Instant::now();
                    loop {
                        receiver.round(shared, Duration::ZERO, Owner::User);
                        if mailbox.has_events() {
                            shared.counters.spin_replies.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        if spun.elapsed() >= spin {
                            break;
                        }
                        contended |= spin::yield_contended();
                    }
                }
                let blocked = !mailbox.has_events();
                if blocked {
                    let slice = left.min(Duration::from_millis(POLL_SLICE_MS));
                    receiver.round(shared, slice, Owner::User);
                }
                if mailbox.has_events() {
                    // How long the reply took: what the spin is chosen by
                    // (a blocking poll's wake-up is not the reply's).
                    // A contended spin that caught the reply paid: its
                    // yields went to the work it waited for (a data node
                    // on this CPU). One that missed it cost others.
                    receiver
                        .spin
                        .record(waited.elapsed(), blocked, contended && blocked);
                    drop(receiver);
                    shared.hand_over(mailbox);
                    break;
                }
                continue;
            }
        }
        mailbox.sleep(left.min(Duration::from_millis(POLL_SLICE_MS)));
    }
    shared.remove_waiting(mailbox);
    shared.waiters.fetch_sub(1, Ordering::AcqRel);
}

/// Polls once without blocking if nobody else is the poll owner (for
/// futures and `Session::poll` with a zero timeout).
pub(crate) fn poll_now(shared: &Shared) {
    if let Some(mut receiver) = shared.try_lock_receiver() {
        receiver.round(shared, Duration::ZERO, Owner::User);
    }
}

/// The receive thread: owns the poll while more than the threshold of
/// user threads (or any future) wait; polls without blocking when idle.
pub(crate) fn receive_thread(shared: Arc<Shared>) {
    let housekeeping = Duration::from_millis(HOUSEKEEPING_INTERVAL_MS);
    while !shared.is_shut_down() {
        if shared.receive_thread_active() {
            // A user thread that took the poll below the threshold keeps
            // it until its reply comes (one poll slice at most): wait for
            // the lock. Trying it and then not sleeping, because the
            // thread is active, spun a core (a thread per connection at
            // 32 connections: 40 % of the SQL node's time, 4× its
            // instructions per statement).
            let mut receiver = shared.lock_receiver();
            if shared.is_shut_down() {
                break;
            }
            receiver.round(
                &shared,
                Duration::from_millis(POLL_SLICE_MS),
                Owner::ReceiveThread,
            );
            drop(receiver);
            if !shared.receive_thread_active() {
                // Back below the threshold: a user thread takes over.
                shared.hand_over_any();
            }
            continue;
        } else if shared.waiters.load(Ordering::Acquire) == 0 {
            if let Some(mut receiver) = shared.try_lock_receiver() {
                receiver.round(&shared, Duration::ZERO, Owner::Housekeeping);
            }
        }
        shared.receive_thread_sleep(housekeeping);
    }
}

/// The wakeup thread: wakes the sessions the receive thread handed over.
pub(crate) fn wakeup_thread(shared: Arc<Shared>) {
    let mut batch = Vec::new();
    while !shared.is_shut_down() {
        shared.take_wakeups(
            &mut batch,
            Duration::from_millis(HOUSEKEEPING_INTERVAL_MS * 10),
        );
        for mailbox in batch.drain(..) {
            mailbox.wake();
        }
    }
}
