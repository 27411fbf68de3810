//! The cluster connection (an API node): [`Cluster`], its threads and what
//! they share; and [`ClusterPool`], several connections per process.
//!
//! `Cluster::connect` asks the management server for a node id and the
//! configuration, connects to every data node and registers with it
//! (`ApiRegReq`, repeated as the heartbeat every `heartbeat_interval_ms` of
//! the node's `ApiRegConf`). Threads, as in NDB (seed 003):
//!
//! - the **connection thread** (NDB's connect thread and ClusterMgr):
//!   connects and reconnects to data nodes and sends the heartbeats;
//! - the **receive thread**, the **wakeup thread** (see `receiver`);
//! - the **send thread**: finishes writes that a user thread's single
//!   `write` left unfinished (see `link`).
//!
//! A data node is *live* while its connection is up and its last
//! `ApiRegConf` said `started`; transactions go to live nodes only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use config::{ClusterConfig, Placement};
use kernel::runtime::spin::SpinPolicy;
use kernel::thread_config::{SpinMethod, ThreadRole};
use mgmd::MgmClient;
use signal::frame::FrameWriter;
use signal::{BlockNumber, BlockRef, NodeBitmask, NodeId, NodeType, Signal, SignalBody, VERSION};
use transport::stream::LinkKind;

use crate::error::{Error, Result};
use crate::link::{Handshake, Link, NewConnection, Progress};
use crate::receiver::{self, Event, Mailbox, Receiver};
use crate::schema::Table;
use crate::session::Session;

/// Sessions per cluster connection (instance numbers 1..=SESSIONS_MAX;
/// 0 is the cluster manager).
pub const SESSIONS_MAX: usize = 4_096;
/// How often the connection thread looks at links and heartbeats.
const CLUSTER_TICK_MS: u64 = 20;
/// The longest spin of a poll owner waiting for its reply, in µs, unless
/// `ClusterOptions::spin_us` says otherwise: one-client round trips of a
/// 1 × 1 sandbox took 11-12 µs with a 50 µs spin against 33-39 µs without.
pub const CLIENT_SPIN_DEFAULT_US: u32 = 50;
/// Heartbeat interval until a data node has told its own.
const HEARTBEAT_DEFAULT_MS: u64 = 1_000;
/// Heartbeat intervals without a registration answer after which a data
/// node counts as failed, as the data nodes count an API node
/// (`HEARTBEAT_MISSES_MAX` in datanode's membership).
const HEARTBEAT_MISSES_MAX: u32 = 4;
/// Longest connection attempt to a data node: the TCP connect and the
/// node's hello. The attempt never blocks the connection thread (see
/// `Link::start_connect`), so this only bounds how long a hung node's
/// half-open connection is kept before the next try.
const HANDSHAKE_TIMEOUT_MS: u64 = 2_000;
/// The connection thread's tick while a handshake is under way: a hello
/// is usually there within a millisecond, and a connect should not wait
/// a whole `CLUSTER_TICK_MS` for it.
const HANDSHAKE_TICK_MS: u64 = 2;

/// How a cluster connection behaves.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Connecting to the management server and waiting for the data nodes.
    pub connect_timeout: Duration,
    /// How long a request waits for its answer before it fails with 4012
    /// (unknown result).
    pub request_timeout: Duration,
    /// Above this many waiting user threads the receive thread receives;
    /// at or below it a waiting user thread receives itself (NDB's
    /// `ndb_recv_thread_activation_threshold`, default 8).
    pub recv_thread_activation_threshold: usize,
    /// Cluster connections of a [`ClusterPool`](crate::ClusterPool).
    pub pool_size: usize,
    /// Pause between connection attempts to a data node that is down.
    pub reconnect_interval: Duration,
    /// The `[api]` or `[mysqld]` slot of config.ini to take (NDB's
    /// `--ndb-nodeid`); `None`: the lowest free API slot. The management
    /// server refuses a slot that is taken or not an API slot. A pool's
    /// connections each need a slot: this one is the first's.
    pub node_id: Option<NodeId>,
    /// The table definitions cache to use; `None`: one of its own. The
    /// connections of one process share one ([`Cluster::table_cache`]),
    /// so that a table one of them drops or alters is read again by all.
    pub table_cache: Option<TableCache>,
    /// How a user thread that receives for the others (below
    /// `recv_thread_activation_threshold`) waits for its reply: it polls
    /// without blocking for up to `spin_us` first, every time
    /// (`SpinMethod::Static`), or as long as the replies' times show it
    /// pays (the adaptive methods; `kernel::runtime::spin`). On the
    /// virtual machines Skarv is measured on, a thread asleep in the poll
    /// takes 20-30 µs more to see its reply.
    pub spin_method: SpinMethod,
    /// The longest such spin, in microseconds (0: none; at most 500).
    pub spin_us: u32,
}

/// Table definitions by name, as a cluster connection caches them.
#[derive(Clone, Default)]
pub struct TableCache(pub(crate) Arc<Tables>);

/// The cache behind [`TableCache`], shared by the sessions of every
/// connection given it.
#[derive(Default)]
pub(crate) struct Tables {
    by_name: Mutex<HashMap<String, Arc<Table>>>,
    /// Bumped whenever a cached definition is dropped or replaced: while
    /// it is unchanged, every name cached before still maps to the same
    /// definition, which a caller that checked it once may rely on without
    /// the lock ([`crate::Session::tables_generation`]).
    generation: AtomicU64,
}

impl Tables {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Table>>> {
        self.by_name.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<Table>> {
        self.map().get(name).cloned()
    }

    pub(crate) fn insert(&self, name: &str, table: Arc<Table>) {
        if self.map().insert(name.to_owned(), table).is_some() {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub(crate) fn remove(&self, name: &str) {
        // Bumped after the map changed: a reader that read the number
        // before the bump and then the map saw either the old definition
        // (and its next read sees the new number) or none (and keeps no
        // number).
        if self.map().remove(name).is_some() {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Drops every definition of table `id` (under any name).
    pub(crate) fn remove_id(&self, id: u32) {
        let mut map = self.map();
        let before = map.len();
        map.retain(|_, t| t.def().id != id);
        if map.len() != before {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TableCache")
    }
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            recv_thread_activation_threshold: 8,
            spin_method: SpinMethod::CostBased,
            spin_us: CLIENT_SPIN_DEFAULT_US,
            pool_size: 1,
            reconnect_interval: Duration::from_millis(100),
            node_id: None,
            table_cache: None,
        }
    }
}

/// Counters of one cluster connection, since it connected. Each has a
/// cache line of its own: user threads count sends and the receive thread
/// counts receives, per transaction and per signal, and counters sharing a
/// line made every count a cache miss on the other side (a profile put
/// one `fetch_add` at 4 % of a client's CPU).
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub tc_key_reqs_sent: Counter,
    pub scan_reqs_sent: Counter,
    pub signals_sent: Counter,
    pub write_calls: Counter,
    pub bytes_received: Counter,
    pub signals_received: Counter,
    pub receive_rounds: Counter,
    pub receive_thread_rounds: Counter,
    pub wakeups_offloaded: Counter,
    pub spin_replies: Counter,
    pub send_thread_turns: Counter,
    pub cluster_failures: Counter,
}

type Counter = crossbeam_utils::CachePadded<AtomicU64>;

/// A snapshot of a cluster connection's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// `TcKeyReq` signals sent: one per executed batch of key operations.
    pub tc_key_reqs_sent: u64,
    /// `TcScanReq` and `TcScanNextReq` signals sent.
    pub scan_reqs_sent: u64,
    /// Every signal sent (heartbeats included).
    pub signals_sent: u64,
    /// `write` calls on sockets, by user threads and the send thread.
    pub write_calls: u64,
    /// Bytes read from data nodes.
    pub bytes_received: u64,
    /// Signals received from data nodes.
    pub signals_received: u64,
    /// Poll rounds, by anyone.
    pub receive_rounds: u64,
    /// Poll rounds of the receive thread (the rest were user threads).
    pub receive_thread_rounds: u64,
    /// Wakeups the receive thread left to the wakeup thread.
    pub wakeups_offloaded: u64,
    /// Replies a user thread that owned the poll read while it spun
    /// (`ClusterOptions::spin_method`), before it would have blocked.
    pub spin_replies: u64,
    /// Times the send thread woke (for bytes a socket did not take, or
    /// its timer): few while the sockets take what user threads write.
    pub send_thread_turns: u64,
    /// Cluster failures seen (NDB's cluster failure event): the last
    /// connected data node went down. A system restart may follow, which
    /// may lose commits not yet durable: `Session::wait_durable` answers
    /// for each commit whether it survived.
    pub cluster_failures: u64,
}

/// What the threads and sessions of one cluster connection share.
pub(crate) struct Shared {
    pub me: NodeId,
    pub options: ClusterOptions,
    pub config: ClusterConfig,
    pub placement: Placement,
    pub links: Vec<Link>,
    /// By node id (a lookup per hinted transaction: an index, not a hash).
    link_of_node: Vec<Option<usize>>,
    sessions: Mutex<Sessions>,
    receiver: Mutex<Receiver>,
    poll_waker: mio::Waker,
    new_connections: Mutex<Vec<NewConnection>>,
    /// User threads waiting for a reply.
    pub waiters: AtomicUsize,
    /// Futures waiting for a reply (they have no thread that could poll).
    pub async_waiters: AtomicUsize,
    waiting: Mutex<Vec<Arc<Mailbox>>>,
    receive_sleep: (Mutex<()>, Condvar),
    wakeups: (Mutex<Vec<Arc<Mailbox>>>, Condvar),
    send_waker: mio::Waker,
    send_registry: mio::Registry,
    send_handles: Mutex<Vec<Option<SendHandle>>>,
    /// Node states changed (connect waits on it).
    state: (Mutex<u64>, Condvar),
    shutdown: AtomicBool,
    pub counters: Counters,
    tx_counter: AtomicU64,
    round_robin: AtomicUsize,
    /// The newest membership view id a data node told (`ApiRegConf`).
    newest_view: AtomicU64,
    pub(crate) tables: Arc<Tables>,
}

struct Sessions {
    slots: Vec<Option<Arc<Mailbox>>>,
    free: Vec<u16>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    pub fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub fn link_index(&self, node: NodeId) -> Option<usize> {
        self.link_of_node
            .get(usize::from(node.get()))
            .copied()
            .flatten()
    }

    pub fn lock_new_connections(&self) -> MutexGuard<'_, Vec<NewConnection>> {
        lock(&self.new_connections)
    }

    /// Waits for the poll: its owner lets go within a poll slice.
    pub fn lock_receiver(&self) -> MutexGuard<'_, Receiver> {
        lock(&self.receiver)
    }

    pub fn try_lock_receiver(&self) -> Option<MutexGuard<'_, Receiver>> {
        match self.receiver.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Makes the poll owner's current poll return.
    pub fn wake_poll(&self) {
        if let Err(error) = self.poll_waker.wake() {
            tracing::warn!("cannot wake the client poll: {error}");
        }
    }

    pub fn mailbox(&self, instance: u16) -> Option<Arc<Mailbox>> {
        lock(&self.sessions)
            .slots
            .get(usize::from(instance))
            .and_then(Clone::clone)
    }

    /// A new session's mailbox, with its instance number.
    pub fn register_session(&self) -> Result<Arc<Mailbox>> {
        let mut sessions = lock(&self.sessions);
        let instance = match sessions.free.pop() {
            Some(instance) => instance,
            None if sessions.slots.len() <= SESSIONS_MAX => {
                sessions.slots.push(None);
                (sessions.slots.len() - 1) as u16
            }
            None => {
                return Err(Error::new(
                    proto::error::OUT_OF_TRANSACTIONS,
                    format!(
                        "API node {}: all {SESSIONS_MAX} sessions are in use",
                        self.me
                    ),
                ))
            }
        };
        assert!(instance > 0, "instance 0 is the cluster manager");
        let mailbox = Arc::new(Mailbox::new(instance));
        sessions.slots[usize::from(instance)] = Some(Arc::clone(&mailbox));
        Ok(mailbox)
    }

    pub fn unregister_session(&self, instance: u16) {
        let mut sessions = lock(&self.sessions);
        if sessions.slots[usize::from(instance)].take().is_some() {
            sessions.free.push(instance);
        }
    }

    pub fn receive_thread_active(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > self.options.recv_thread_activation_threshold
            || self.async_waiters.load(Ordering::Acquire) > 0
    }

    pub fn activate_receive_thread(&self) {
        let _guard = lock(&self.receive_sleep.0);
        self.receive_sleep.1.notify_one();
    }

    pub fn receive_thread_sleep(&self, timeout: Duration) {
        let guard = lock(&self.receive_sleep.0);
        if !self.receive_thread_active() && !self.is_shut_down() {
            let _ = self.receive_sleep.1.wait_timeout(guard, timeout);
        }
    }

    pub fn add_waiting(&self, mailbox: &Arc<Mailbox>) {
        lock(&self.waiting).push(Arc::clone(mailbox));
    }

    pub fn remove_waiting(&self, mailbox: &Arc<Mailbox>) {
        let mut waiting = lock(&self.waiting);
        if let Some(at) = waiting.iter().position(|m| Arc::ptr_eq(m, mailbox)) {
            waiting.swap_remove(at);
        }
    }

    /// The poll owner `me` got its reply and lets go: another waiting
    /// thread becomes the next owner.
    pub fn hand_over(&self, me: &Arc<Mailbox>) {
        let next = lock(&self.waiting)
            .iter()
            .find(|m| !Arc::ptr_eq(m, me) && !m.has_events())
            .cloned();
        if let Some(next) = next {
            next.kick_to_poll();
        }
    }

    /// The receive thread lets go: a waiting user thread takes over.
    pub fn hand_over_any(&self) {
        let next = lock(&self.waiting).first().cloned();
        if let Some(next) = next {
            next.kick_to_poll();
        }
    }

    pub fn hand_to_wakeup_thread(&self, mailboxes: &mut Vec<Arc<Mailbox>>) {
        let mut queue = lock(&self.wakeups.0);
        queue.append(mailboxes);
        self.wakeups.1.notify_one();
    }

    pub fn take_wakeups(&self, out: &mut Vec<Arc<Mailbox>>, timeout: Duration) {
        let mut queue = lock(&self.wakeups.0);
        if queue.is_empty() && !self.is_shut_down() {
            queue = self
                .wakeups
                .1
                .wait_timeout(queue, timeout)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        out.append(&mut queue);
    }

    /// A signal for the cluster manager (instance 0): registration answers.
    pub fn on_cluster_signal(&self, link: usize, signal: Signal) {
        let link = &self.links[link];
        if matches!(
            signal.body,
            SignalBody::ApiRegConf { .. } | SignalBody::ApiRegRef { .. }
        ) {
            link.answers.fetch_add(1, Ordering::AcqRel);
        }
        match signal.body {
            SignalBody::ApiRegConf {
                started,
                heartbeat_interval_ms,
                view_id,
                members,
                ..
            } => {
                self.on_view(view_id, &members);
                link.heartbeat_interval_ms
                    .store(u64::from(heartbeat_interval_ms), Ordering::Release);
                let was = link.started.swap(started, Ordering::AcqRel);
                if was != started {
                    tracing::info!(node = %link.node, started, "data node registration");
                    self.state_changed();
                }
            }
            SignalBody::ApiRegRef { reason } => {
                tracing::warn!(node = %link.node, "data node refused the registration: {reason:?}");
                link.started.store(false, Ordering::Release);
                self.state_changed();
            }
            other => {
                tracing::debug!(node = %link.node, "cluster manager: unexpected {}", other.name())
            }
        }
    }

    /// A data node told its view of the cluster. A newer view than any seen
    /// before settles which data nodes are members: a connection to one it
    /// left out is abandoned, as the data nodes did (a hung node never
    /// closes its connections, and would hold the transactions sent to it
    /// until this node's own heartbeat check gives up on it).
    fn on_view(&self, view_id: u32, members: &NodeBitmask) {
        if members.is_empty() {
            return; // Not started: no view yet.
        }
        let view_id = u64::from(view_id);
        if self.newest_view.fetch_max(view_id, Ordering::AcqRel) >= view_id {
            return;
        }
        for link in self.links.iter().filter(|l| !members.contains(l.node)) {
            let generation = link.generation.load(Ordering::Acquire);
            if link.started.load(Ordering::Acquire) && link.abandon(generation) {
                tracing::warn!(
                    node = %link.node,
                    view_id,
                    "data node left out of the cluster's view: dropping its connection"
                );
            }
        }
    }

    /// Connection `generation` to `node` closed: every session hears it.
    /// `was_started`: the node served transactions until the close.
    ///
    /// A cluster failure is the close of the last *started* node, not of
    /// the last connected one: in a whole-cluster crash the first node to
    /// be killed can be restarted and connected again (not started) before
    /// the close of the last one is read, and no moment would then have no
    /// connection although the cluster went down.
    pub fn on_node_down(&self, node: NodeId, generation: u64, was_started: bool) {
        if was_started
            && !self
                .links
                .iter()
                .any(|l| l.connected.load(Ordering::Acquire) && l.started.load(Ordering::Acquire))
        {
            self.counters
                .cluster_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                node = %self.me,
                "cluster failure: data node {node} was the last one started; \
                 commits not yet durable may be lost by a system restart"
            );
        }
        let mailboxes: Vec<Arc<Mailbox>> = lock(&self.sessions)
            .slots
            .iter()
            .flatten()
            .cloned()
            .collect();
        for mailbox in mailboxes {
            mailbox.push_event(Event::NodeDown(node, generation));
            mailbox.wake();
        }
        self.state_changed();
    }

    fn state_changed(&self) {
        *lock(&self.state.0) += 1;
        self.state.1.notify_all();
    }

    /// Waits until every data node is live, or `timeout`; returns how many are.
    fn wait_for_nodes(&self, timeout: Duration) -> usize {
        self.wait_until(timeout, |live| live == self.links.len())
    }

    /// Waits until some data node is live and every other one is live or
    /// down (its connection attempt failed), or `timeout`; returns how many
    /// are live. A connecting client uses the nodes that are up, and does
    /// not wait its whole timeout for one that is down.
    fn wait_for_reachable_nodes(&self, timeout: Duration) -> usize {
        self.wait_until(timeout, |live| {
            live > 0 && self.links.iter().all(|l| l.is_live() || l.seems_down())
        })
    }

    /// Waits until `done(live count)` or `timeout`; returns the live count.
    fn wait_until(&self, timeout: Duration, done: impl Fn(usize) -> bool) -> usize {
        let deadline = Instant::now() + timeout;
        let mut guard = lock(&self.state.0);
        loop {
            let live = self.links.iter().filter(|l| l.is_live()).count();
            let now = Instant::now();
            if done(live) || now >= deadline {
                return live;
            }
            guard = self
                .state
                .1
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Sends encoded frames to a data node.
    pub fn send_bytes(&self, link: usize, bytes: &[u8], signals: usize) -> Result<()> {
        let pending = self.links[link].send(bytes, &self.counters)?;
        self.counters
            .signals_sent
            .fetch_add(signals as u64, Ordering::Relaxed);
        if pending {
            if let Err(error) = self.send_waker.wake() {
                tracing::warn!("cannot wake the send thread: {error}");
            }
        }
        Ok(())
    }

    /// Encodes and sends signals to one data node (a control path).
    pub fn send_signals(
        &self,
        link: usize,
        signals: &[Signal],
        buffer: &mut Vec<u8>,
    ) -> Result<()> {
        buffer.clear();
        encode_frames(signals, buffer)?;
        self.send_bytes(link, buffer, signals.len())
    }

    /// A new transaction id: this node's id over a counter from a random start.
    pub fn next_tx_id(&self) -> u64 {
        crate::routing::tx_id(self.me, self.tx_counter.fetch_add(1, Ordering::Relaxed))
    }

    /// The next live data node, round-robin; None when none is live.
    pub fn any_live_node(&self) -> Option<usize> {
        let count = self.links.len();
        let start = self.round_robin.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|k| (start + k) % count)
            .find(|&i| self.links[i].is_live())
    }

    /// The cluster manager's own address.
    fn own_ref(&self) -> BlockRef {
        BlockRef::new(self.me, BlockNumber::API_CLUSTER, 0)
    }
}

/// Encodes signals into as many frames as they need.
pub(crate) fn encode_frames<'a>(
    signals: impl IntoIterator<Item = &'a Signal>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let too_large =
        |e: signal::EncodeError| Error::new(proto::error::REQUEST_TOO_LARGE, e.to_string());
    let mut signals = signals.into_iter().peekable();
    while signals.peek().is_some() {
        let mut writer = FrameWriter::new(out);
        while let Some(signal) = signals.peek() {
            match writer.push(signal) {
                Ok(()) => {
                    signals.next();
                }
                Err(signal::EncodeError::FrameFull { .. }) if writer.signal_count() > 0 => break,
                Err(e) => return Err(too_large(e)),
            }
        }
        writer.finish();
    }
    Ok(())
}

/// A cluster connection: an API node of the cluster (see the module doc).
/// Cheap to clone; the connection closes when the last clone and the last
/// session are gone.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) inner: Arc<ClusterInner>,
}

pub(crate) struct ClusterInner {
    pub shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The management server session: the node id is ours while it is open.
    _mgm: Mutex<MgmClient>,
}

impl Drop for ClusterInner {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.shutdown.store(true, Ordering::Release);
        shared.activate_receive_thread();
        shared.wake_poll();
        let _ = shared.send_waker.wake();
        shared.wakeups.1.notify_all();
        for handle in lock(&self.threads).drain(..) {
            let _ = handle.join();
        }
        for link in &shared.links {
            link.close(link.generation.load(Ordering::Acquire));
        }
    }
}

impl Cluster {
    /// Connects to the cluster whose management server is at
    /// `connect_string` (`host:port`), with default options.
    pub fn connect(connect_string: &str) -> Result<Cluster> {
        Cluster::connect_with(connect_string, ClusterOptions::default())
    }

    /// Connects with `options`: gets a node id and the configuration from
    /// the management server, connects and registers with every data node,
    /// and waits (up to `connect_timeout`) until each is live or down
    /// (its connection attempt failed). Fails when none is live.
    pub fn connect_with(connect_string: &str, options: ClusterOptions) -> Result<Cluster> {
        assert!(options.recv_thread_activation_threshold < usize::MAX);
        let mgm_error = |e: mgmd::MgmError| {
            Error::new(
                proto::error::CLUSTER_FAILURE,
                format!("management server {connect_string}: {e}"),
            )
        };
        let mut mgm =
            MgmClient::connect(connect_string, options.connect_timeout).map_err(mgm_error)?;
        let allocation = mgm
            .alloc_node_id(options.node_id, NodeType::Api, std::process::id())
            .map_err(mgm_error)?;
        let config =
            config::parse(&allocation.config_ini, &allocation.config_name).map_err(|e| {
                Error::new(
                    proto::error::CLUSTER_FAILURE,
                    format!("the cluster's configuration: {e}"),
                )
            })?;
        let (shared, send_poll) = build_shared(allocation.node_id, options, config)?;
        let shared = Arc::new(shared);
        let io = |what: &str, e: std::io::Error| {
            Error::new(proto::error::CLUSTER_FAILURE, format!("{what}: {e}"))
        };
        let mut threads = Vec::new();
        let spawn = |name: &str, run: fn(Arc<Shared>), shared: &Arc<Shared>| {
            let shared = Arc::clone(shared);
            std::thread::Builder::new()
                .name(format!("skarv-api{}-{name}", shared.me))
                .spawn(move || run(shared))
                .map_err(|e| io("starting a client thread", e))
        };
        threads.push(spawn("recv", receiver::receive_thread, &shared)?);
        threads.push(spawn("wakeup", receiver::wakeup_thread, &shared)?);
        let send_shared = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name(format!("skarv-api{}-send", shared.me))
                .spawn(move || send_thread(send_shared, send_poll))
                .map_err(|e| io("starting the send thread", e))?,
        );
        threads.push(spawn("connect", connection_thread, &shared)?);
        let cluster = Cluster {
            inner: Arc::new(ClusterInner {
                shared: Arc::clone(&shared),
                threads: Mutex::new(threads),
                _mgm: Mutex::new(mgm),
            }),
        };
        let live = shared.wait_for_reachable_nodes(shared.options.connect_timeout);
        if live == 0 {
            return Err(Error::new(
                proto::error::CLUSTER_FAILURE,
                format!(
                    "API node {}: none of the {} data nodes of {connect_string} is started and reachable",
                    shared.me,
                    shared.links.len()
                ),
            ));
        }
        tracing::info!(node = %shared.me, live, "connected to the cluster");
        Ok(cluster)
    }

    /// A new session for the calling thread.
    pub fn session(&self) -> Result<Session> {
        Session::new(self.clone())
    }

    /// Its cache of table definitions, to share with another connection
    /// of this process ([`ClusterOptions::table_cache`]).
    pub fn table_cache(&self) -> TableCache {
        TableCache(Arc::clone(&self.inner.shared.tables))
    }

    /// This connection's node id (its API slot).
    pub fn node_id(&self) -> NodeId {
        self.inner.shared.me
    }

    /// The cluster's configuration, as the management server gave it.
    pub fn config(&self) -> &ClusterConfig {
        &self.inner.shared.config
    }

    /// Where partitions live.
    pub fn placement(&self) -> &Placement {
        &self.inner.shared.placement
    }

    /// Data nodes that are connected and started now.
    pub fn live_nodes(&self) -> Vec<NodeId> {
        self.inner
            .shared
            .links
            .iter()
            .filter(|l| l.is_live())
            .map(|l| l.node)
            .collect()
    }

    /// The socket each connected data node's link runs on: a local
    /// (Unix-domain) one to a node on this host that listens on one
    /// (`UseShm`), else TCP.
    pub fn link_kinds(&self) -> Vec<(NodeId, LinkKind)> {
        let links = &self.inner.shared.links;
        let up = links.iter().filter(|l| l.connected.load(Ordering::Acquire));
        up.map(|l| (l.node, l.kind())).collect()
    }

    /// Waits until every data node is live or `timeout` passes; returns
    /// the live count.
    pub fn wait_until_ready(&self, timeout: Duration) -> usize {
        self.inner.shared.wait_for_nodes(timeout)
    }

    /// The connection's counters.
    pub fn stats(&self) -> ClusterStats {
        let c = &self.inner.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClusterStats {
            tc_key_reqs_sent: get(&c.tc_key_reqs_sent),
            scan_reqs_sent: get(&c.scan_reqs_sent),
            signals_sent: get(&c.signals_sent),
            write_calls: get(&c.write_calls),
            bytes_received: get(&c.bytes_received),
            signals_received: get(&c.signals_received),
            receive_rounds: get(&c.receive_rounds),
            receive_thread_rounds: get(&c.receive_thread_rounds),
            wakeups_offloaded: get(&c.wakeups_offloaded),
            spin_replies: get(&c.spin_replies),
            send_thread_turns: get(&c.send_thread_turns),
            cluster_failures: get(&c.cluster_failures),
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &ClusterOptions {
        &self.inner.shared.options
    }
}

const SEND_WAKER: mio::Token = mio::Token(usize::MAX - 1);

fn build_shared(
    me: NodeId,
    options: ClusterOptions,
    config: ClusterConfig,
) -> Result<(Shared, mio::Poll)> {
    let io = |what: &str, e: std::io::Error| {
        Error::new(proto::error::CLUSTER_FAILURE, format!("{what}: {e}"))
    };
    if config.data_nodes.is_empty() {
        return Err(Error::new(
            proto::error::CLUSTER_FAILURE,
            "the configuration has no data nodes",
        ));
    }
    let placement = Placement::of(&config);
    let links: Vec<Link> = config
        .data_nodes
        .iter()
        .map(|d| {
            let tc_instances = d.params.threads.count(ThreadRole::Tc).max(1);
            Link::new(d.node_id, d.host_name.clone(), d.server_port, tc_instances)
        })
        .collect();
    let mut link_of_node = vec![None; usize::from(u8::MAX) + 1];
    for (i, link) in links.iter().enumerate() {
        link_of_node[usize::from(link.node.get())] = Some(i);
    }
    let poll = mio::Poll::new().map_err(|e| io("creating the receive poll", e))?;
    let poll_waker =
        mio::Waker::new(poll.registry(), receiver::WAKER).map_err(|e| io("creating a waker", e))?;
    let send_poll = mio::Poll::new().map_err(|e| io("creating the send poll", e))?;
    let send_waker =
        mio::Waker::new(send_poll.registry(), SEND_WAKER).map_err(|e| io("creating a waker", e))?;
    let send_registry = send_poll
        .registry()
        .try_clone()
        .map_err(|e| io("sharing the send poll", e))?;
    let count = links.len();
    let tables = options.table_cache.clone().unwrap_or_default().0;
    let spin = SpinPolicy::new(options.spin_method, options.spin_us);
    let shared = Shared {
        me,
        options,
        config,
        placement,
        links,
        link_of_node,
        sessions: Mutex::new(Sessions {
            slots: vec![None],
            free: Vec::new(),
        }),
        receiver: Mutex::new(Receiver::new(poll, count, spin)),
        poll_waker,
        new_connections: Mutex::new(Vec::new()),
        waiters: AtomicUsize::new(0),
        async_waiters: AtomicUsize::new(0),
        waiting: Mutex::new(Vec::new()),
        receive_sleep: (Mutex::new(()), Condvar::new()),
        wakeups: (Mutex::new(Vec::new()), Condvar::new()),
        send_waker,
        send_registry,
        send_handles: Mutex::new((0..count).map(|_| None).collect()),
        state: (Mutex::new(0), Condvar::new()),
        shutdown: AtomicBool::new(false),
        counters: Counters::default(),
        tx_counter: AtomicU64::new(random_u64()),
        round_robin: AtomicUsize::new(random_u64() as usize),
        newest_view: AtomicU64::new(0),
        tables,
    };
    Ok((shared, send_poll))
}

/// A random number from the standard library's per-process random keys.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    hasher.finish()
}

/// The connection thread: (re)connects to data nodes and sends the
/// registration heartbeats.
fn connection_thread(shared: Arc<Shared>) {
    let count = shared.links.len();
    let mut next_attempt = vec![Instant::now(); count];
    // When each link's last heartbeat went: the next is due one interval
    // later, the interval read afresh, so a node's first answer (which
    // names it) shortens the wait for the second at once.
    let mut last_heartbeat: Vec<Option<Instant>> = vec![None; count];
    // Per link: the connection and answer count last seen, and since when.
    let mut heard: Vec<(u64, u64, Instant)> = vec![(0, 0, Instant::now()); count];
    let mut handshakes: Vec<Option<Handshake>> = (0..count).map(|_| None).collect();
    let mut buffer = Vec::with_capacity(256);
    while !shared.is_shut_down() {
        let now = Instant::now();
        for index in 0..count {
            let link = &shared.links[index];
            if !link.connected.load(Ordering::Acquire) {
                if handshakes[index].is_none() && now >= next_attempt[index] {
                    next_attempt[index] = now + shared.options.reconnect_interval;
                    handshakes[index] = start_handshake(&shared, index);
                }
                if let Some(handshake) = handshakes[index].take() {
                    handshakes[index] = advance_handshake(&shared, index, handshake);
                    if link.connected.load(Ordering::Acquire) {
                        last_heartbeat[index] = None;
                    }
                }
                continue;
            }
            let interval = match link.heartbeat_interval_ms.load(Ordering::Acquire) {
                0 => HEARTBEAT_DEFAULT_MS,
                ms => ms,
            };
            let seen = (
                link.generation.load(Ordering::Acquire),
                link.answers.load(Ordering::Acquire),
            );
            if (heard[index].0, heard[index].1) != seen {
                heard[index] = (seen.0, seen.1, now);
            } else if now.duration_since(heard[index].2)
                > Duration::from_millis(interval) * HEARTBEAT_MISSES_MAX
            {
                // A connection that hangs never closes by itself.
                if link.abandon(seen.0) {
                    tracing::warn!(
                        node = %link.node,
                        "data node silent for {HEARTBEAT_MISSES_MAX} heartbeats of {interval} ms: \
                         dropping its connection"
                    );
                }
                heard[index].2 = now;
            }
            if last_heartbeat[index].is_none_or(|at| now >= at + Duration::from_millis(interval)) {
                last_heartbeat[index] = Some(now);
                let reg = Signal {
                    receiver: BlockRef::new(link.node, BlockNumber::MEMBERSHIP, 0),
                    sender: shared.own_ref(),
                    body: SignalBody::ApiRegReq { version: VERSION },
                };
                if let Err(error) = shared.send_signals(index, &[reg], &mut buffer) {
                    tracing::debug!(node = %link.node, "heartbeat not sent: {error}");
                }
            }
        }
        let tick_ms = if handshakes.iter().any(Option::is_some) {
            HANDSHAKE_TICK_MS
        } else {
            CLUSTER_TICK_MS
        };
        std::thread::park_timeout(Duration::from_millis(tick_ms));
    }
}

/// Starts connecting to link `index`; None when even that failed.
fn start_handshake(shared: &Shared, index: usize) -> Option<Handshake> {
    let link = &shared.links[index];
    let timeout = shared
        .options
        .connect_timeout
        .min(Duration::from_millis(HANDSHAKE_TIMEOUT_MS));
    match link.start_connect(timeout) {
        Ok(handshake) => Some(handshake),
        Err(error) => {
            connect_failed(shared, index, &error);
            None
        }
    }
}

fn connect_failed(shared: &Shared, index: usize, error: &std::io::Error) {
    let link = &shared.links[index];
    tracing::debug!(node = %link.node, "cannot connect to data node {}:{}: {error}", link.host, link.port);
    link.attempts_failed.fetch_add(1, Ordering::AcqRel);
    shared.state_changed();
}

/// Drives a handshake without waiting; returns it while it is under way.
fn advance_handshake(shared: &Shared, index: usize, handshake: Handshake) -> Option<Handshake> {
    let link = &shared.links[index];
    match link.advance(handshake, shared.me) {
        Ok(Progress::Pending(handshake)) => Some(handshake),
        Ok(Progress::Up(mut connection, send_handle)) => {
            connection.link = index;
            // The send thread watches it once bytes are pending.
            let new = SendHandle {
                stream: send_handle,
                watched: false,
            };
            if let Some(mut old) = lock(&shared.send_handles)[index].replace(new) {
                if old.watched {
                    // Other handles on the old socket may still be open:
                    // closing this one would not take it out of the poll.
                    let _ = shared.send_registry.deregister(&mut old.stream);
                }
            }
            shared.lock_new_connections().push(connection);
            shared.wake_poll();
            let kind = link.kind().name();
            tracing::info!(node = %link.node, link = kind, "connected to data node");
            shared.state_changed();
            None
        }
        Err(error) => {
            connect_failed(shared, index, &error);
            None
        }
    }
}

/// The send thread: writes what user threads' writes left pending, when
/// the sockets have room.
fn send_thread(shared: Arc<Shared>, mut poll: mio::Poll) {
    let mut events = mio::Events::with_capacity(64);
    while !shared.is_shut_down() {
        let any_pending = shared
            .links
            .iter()
            .any(|l| l.has_pending.load(Ordering::Acquire));
        let timeout = Duration::from_millis(if any_pending { 1 } else { CLUSTER_TICK_MS * 5 });
        if let Err(error) = poll.poll(&mut events, Some(timeout)) {
            if error.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!("client send poll failed: {error}");
            }
        }
        shared
            .counters
            .send_thread_turns
            .fetch_add(1, Ordering::Relaxed);
        for link in &shared.links {
            if link.has_pending.load(Ordering::Acquire) {
                link.flush_pending(&shared.counters);
            }
        }
        watch_pending(&shared);
    }
}

/// The send thread's handle on a connection's socket.
struct SendHandle {
    stream: transport::stream::Stream,
    /// Registered with the send thread's poll for room to write.
    watched: bool,
}

/// Watches the sockets of links with bytes pending for room to write, and
/// only those. A socket watched all the time woke the send thread for
/// nothing each time the data node read from it (writability is
/// edge-triggered, and a local socket reports room at every read): about
/// 5,000 wake-ups a second per connection under `oltp_point_select`,
/// 15-20 % of the SQL node's system time on 2 CPUs.
/// A link's bytes become pending only in a user thread's write, which
/// then wakes this thread; registering reports a socket that already has
/// room at once, so no edge is missed between the flush and the watch.
fn watch_pending(shared: &Shared) {
    let mut handles = lock(&shared.send_handles);
    for (index, (link, handle)) in shared.links.iter().zip(handles.iter_mut()).enumerate() {
        let Some(handle) = handle else {
            continue;
        };
        let pending = link.has_pending.load(Ordering::Acquire);
        if pending == handle.watched {
            continue;
        }
        let registry = &shared.send_registry;
        let result = if pending {
            registry.register(
                &mut handle.stream,
                mio::Token(index),
                mio::Interest::WRITABLE,
            )
        } else {
            registry.deregister(&mut handle.stream)
        };
        match result {
            Ok(()) => handle.watched = pending,
            // Not watched: the send thread still retries every
            // millisecond while bytes are pending.
            Err(error) => {
                tracing::warn!(node = %link.node, "cannot watch the connection for sending: {error}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use signal::{decode_frame, encode_frame};

    use super::*;

    const API_NODE: u8 = 60;

    fn node(id: u8) -> NodeId {
        NodeId::new(id).expect("a node id")
    }

    /// A cluster of data nodes 1 and 2 at `ports`, as the API node sees it.
    fn shared_for(ports: [u16; 2]) -> Arc<Shared> {
        let ini = format!(
            "[ndbd default]\nNoOfReplicas=1\n[ndb_mgmd]\nNodeId=50\n\
             [ndbd]\nNodeId=1\nHostName=127.0.0.1\nServerPort={}\n\
             [ndbd]\nNodeId=2\nHostName=127.0.0.1\nServerPort={}\n\
             [api]\nNodeId={API_NODE}\n",
            ports[0], ports[1]
        );
        let config = config::parse(&ini, "test.ini").expect("a valid configuration");
        let (shared, _send_poll) = build_shared(node(API_NODE), ClusterOptions::default(), config)
            .expect("the cluster's shared state");
        Arc::new(shared)
    }

    fn frame(signal: Signal) -> Vec<u8> {
        let mut bytes = Vec::new();
        encode_frame(std::slice::from_ref(&signal), &mut bytes).expect("encode");
        bytes
    }

    /// A data node that answers the hello and each `ApiRegReq` (with a
    /// started `ApiRegConf`), and reports when each `ApiRegReq` came,
    /// until `stop` closes.
    fn healthy_data_node(
        listener: TcpListener,
        me: NodeId,
        heartbeats: mpsc::Sender<Instant>,
        stop: mpsc::Receiver<()>,
    ) {
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_millis(20)))
            .expect("read timeout");
        let api = node(API_NODE);
        let mut greeted = false;
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4_096];
        while stop.try_recv() == Err(mpsc::TryRecvError::Empty) {
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(_) => continue,
            }
            while let Some((frame_ref, used)) = decode_frame(&buffer).expect("a valid frame") {
                let bodies: Vec<SignalBody> = frame_ref
                    .signals()
                    .map(|s| s.expect("a valid signal").body)
                    .collect();
                buffer.drain(..used);
                for body in bodies {
                    let reply = match body {
                        SignalBody::TransportHello { .. } if !greeted => {
                            greeted = true;
                            SignalBody::TransportHello {
                                from: me,
                                to: api,
                                version: VERSION,
                            }
                        }
                        SignalBody::ApiRegReq { .. } => {
                            let _ = heartbeats.send(Instant::now());
                            SignalBody::ApiRegConf {
                                version: VERSION,
                                started: true,
                                view_id: 1,
                                members: NodeBitmask::new(),
                                heartbeat_interval_ms: 1_000,
                            }
                        }
                        other => panic!("unexpected {}", other.name()),
                    };
                    let block = match reply {
                        SignalBody::TransportHello { .. } => BlockNumber::PROCESS,
                        _ => BlockNumber::API_CLUSTER,
                    };
                    let receiver = BlockRef::new(api, block, 0);
                    let signal = Signal {
                        receiver,
                        sender: BlockRef::new(me, BlockNumber::MEMBERSHIP, 0),
                        body: reply,
                    };
                    stream.write_all(&frame(signal)).expect("answer");
                }
            }
        }
    }

    /// Starts the threads of `shared` that the tests need.
    fn start(shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
        let runs: [fn(Arc<Shared>); 2] = [connection_thread, receiver::receive_thread];
        runs.into_iter()
            .map(|run| {
                let shared = Arc::clone(shared);
                std::thread::spawn(move || run(shared))
            })
            .collect()
    }

    fn stop(shared: &Arc<Shared>, threads: Vec<JoinHandle<()>>) {
        shared.shutdown.store(true, Ordering::Release);
        shared.activate_receive_thread();
        shared.wake_poll();
        for thread in threads {
            thread.join().expect("a client thread");
        }
    }

    #[test]
    fn a_hung_data_node_never_delays_the_heartbeats_to_the_others() {
        // Node 1 hangs: the kernel completes connections (the listener's
        // backlog) but nobody ever answers, as under SIGSTOP.
        let hung = TcpListener::bind("127.0.0.1:0").expect("bind");
        let healthy = TcpListener::bind("127.0.0.1:0").expect("bind");
        let ports = [&hung, &healthy].map(|l| l.local_addr().expect("address").port());
        let (heartbeats_tx, heartbeats) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel();
        let peer =
            std::thread::spawn(move || healthy_data_node(healthy, node(2), heartbeats_tx, stop_rx));
        let shared = shared_for(ports);
        let started = Instant::now();
        let threads = start(&shared);
        // Heartbeats go every 1 000 ms; the data node drops an API node
        // after 4 missed ones. Watch several hung handshakes go by.
        let window = Duration::from_millis(HANDSHAKE_TIMEOUT_MS * 2 + 500);
        let mut last = started;
        let mut gap_max = Duration::ZERO;
        let mut count = 0;
        while started.elapsed() < window {
            let Ok(at) = heartbeats.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            gap_max = gap_max.max(at - last);
            last = at;
            count += 1;
        }
        gap_max = gap_max.max(started.elapsed() - (last - started));
        let _ = stop_tx.send(());
        stop(&shared, threads);
        peer.join().expect("the data node thread");
        assert!(count >= 3, "{count} heartbeats in {window:?}");
        assert!(
            gap_max < Duration::from_millis(1_500),
            "the healthy node went {gap_max:?} without a heartbeat"
        );
    }

    #[test]
    fn a_newer_view_without_a_node_drops_its_connection() {
        let listeners = [(); 2].map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"));
        let ports = [&listeners[0], &listeners[1]].map(|l| l.local_addr().expect("address").port());
        let mut peers = Vec::new();
        let mut stops = Vec::new();
        for (listener, id) in listeners.into_iter().zip([1, 2]) {
            let (heartbeats_tx, _heartbeats) = mpsc::channel();
            let (stop_tx, stop_rx) = mpsc::channel();
            stops.push(stop_tx);
            peers.push(std::thread::spawn(move || {
                healthy_data_node(listener, node(id), heartbeats_tx, stop_rx)
            }));
        }
        let shared = shared_for(ports);
        let threads = start(&shared);
        assert_eq!(shared.wait_for_nodes(Duration::from_secs(10)), 2);
        let view = |view_id: u32, members: &[u8]| Signal {
            receiver: BlockRef::new(node(API_NODE), BlockNumber::API_CLUSTER, 0),
            sender: BlockRef::new(node(2), BlockNumber::MEMBERSHIP, 0),
            body: SignalBody::ApiRegConf {
                version: VERSION,
                started: true,
                view_id,
                members: members.iter().map(|&id| node(id)).collect(),
                heartbeat_interval_ms: 1_000,
            },
        };
        // Node 2 tells of view 5, which left node 1 (hung) out.
        shared.on_cluster_signal(1, view(5, &[2]));
        let dropped = !shared.links[0].is_live();
        // A view older than one seen changes nothing.
        shared.on_cluster_signal(0, view(4, &[1]));
        let kept = shared.links[1].is_live();
        for stop in stops {
            let _ = stop.send(());
        }
        stop(&shared, threads);
        for peer in peers {
            peer.join().expect("a data node thread");
        }
        assert!(dropped, "node 1 is still live after a view without it");
        assert!(kept, "an older view dropped node 2");
    }

    #[test]
    fn connecting_uses_the_nodes_that_are_up_without_waiting_for_one_that_is_down() {
        // Node 1 is down: nothing listens on its port.
        let down_port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address")
            .port();
        let up = TcpListener::bind("127.0.0.1:0").expect("bind");
        let up_port = up.local_addr().expect("address").port();
        let (heartbeats_tx, _heartbeats) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel();
        let peer =
            std::thread::spawn(move || healthy_data_node(up, node(2), heartbeats_tx, stop_rx));
        let shared = shared_for([down_port, up_port]);
        let threads = start(&shared);
        let started = Instant::now();
        let timeout = Duration::from_secs(10);
        let live = shared.wait_for_reachable_nodes(timeout);
        let waited = started.elapsed();
        let _ = stop_tx.send(());
        stop(&shared, threads);
        peer.join().expect("the data node thread");
        assert_eq!(live, 1, "node 2 is live");
        assert!(
            waited < Duration::from_secs(3),
            "waited {waited:?} of {timeout:?} for a node that is down"
        );
    }
}
