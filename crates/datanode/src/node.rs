//! The data node process: fetch the configuration from the management
//! server, start the block runtime with the configured threads, connect the
//! transport to the other nodes, and run until a block asks to stop.
//!
//! The pieces meet here and nowhere else: the runtime routes signals for
//! other nodes through [`RemoteRouter`] (the transport, or the mgm session
//! for the management server), the transport's receive loop and the mgm
//! session feed the runtime through injectors, and node-level effects
//! (disconnect a failed node, shut down) arrive through [`Control`]. The
//! receive loop runs on a receive thread of the transport's own, or, with
//! `ThreadConfig` `recv={count=0}`, on the main thread ([`ReceivePoller`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use config::ClusterConfig;
use kernel::runtime::{
    Injector, NodeControl, PollWaker, Poller, RemoteSender, Runtime, RuntimeLimits,
};
use kernel::thread_config::ThreadRole;
use mgmd::{MgmClient, SessionReader, SessionWriter};
use signal::{BlockNumber, BlockRef, NodeId, NodeType, Signal};
use transport::{
    InboundSink, PeerConfig, ReceiveWaker, Receiver, Transport, TransportConfig, TransportSender,
};

use crate::wiring::{self, NodeSpec};
use storage::disk::{RealDisk, SlowDisk};

/// Exit status that asks the angel for a restart.
pub const EXIT_RESTART: i32 = 75;
/// Exit status of a node whose thread died: a crash, as far as the angel goes.
pub const EXIT_CRASHED: i32 = 70;
/// Exit status of a node that stopped on a failure a restart would meet
/// again (its files cannot be restored or written): the angel leaves it down
/// and exits non-zero itself.
pub const EXIT_FAILED: i32 = 71;
/// How long to keep trying to reach the management server at start.
pub const MGMD_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a feeder waits for room in a full runtime queue before dropping.
const INJECT_WAIT_MAX: Duration = Duration::from_secs(1);
/// Time between deciding to exit and stopping the threads.
const EXIT_GRACE: Duration = Duration::from_millis(100);
/// The line a data node prints on stdout for its angel, once configured.
pub const ANGEL_CONTROL_PREFIX: &str = "SKARV-ANGEL";

#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// `host:port` of the management server.
    pub connect: String,
    pub node_id: Option<NodeId>,
    /// Start from an empty file system.
    pub initial: bool,
    /// Damaged files found at the restore are moved aside (into
    /// `discarded-<time>/` of the data directory) and the node restarts
    /// empty, when a partner serves their data (`ldm::discard`).
    pub discard_corrupt: bool,
}

/// Why the node process ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeExit {
    /// Stopped on purpose: the angel does not restart it.
    Stop,
    /// Asked to restart (a restart order, or excluded from the cluster).
    Restart,
    /// A thread died: end as a crashed process, for the angel to judge.
    Crashed,
    /// Stopped on a failure a restart would meet again (`Context::shutdown_failed`).
    Failed,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot reach the management server at {connect}: {reason}")]
    Mgmd { connect: String, reason: String },
    #[error("the management server refused node id {requested}: {reason}")]
    NodeId { requested: String, reason: String },
    #[error("configuration from the management server: {0}")]
    Config(String),
    #[error("node {node}: {what}")]
    Start { node: NodeId, what: String },
}

/// Set by SIGTERM/SIGINT: stop like a stop order.
static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    let handler = on_terminate as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

/// This machine's memory (`MemTotal` of /proc/meminfo); `None` where that
/// cannot be read (the check it serves is then skipped, not failed).
fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Runs one data node process to its end.
pub fn run(options: &NodeOptions) -> Result<NodeExit, NodeError> {
    install_signal_handlers();
    let pid = std::process::id();
    let mut client = connect_to_mgmd(&options.connect)?;
    let allocation = allocate_node_id(&mut client, options, pid)?;
    let node = allocation.node_id;
    let config = config::parse(&allocation.config_ini, &allocation.config_name)
        .map_err(|e| NodeError::Config(e.to_string()))?;
    let me = config
        .data_node(node)
        .ok_or_else(|| {
            NodeError::Config(format!(
                "node {node} is not a data node in {}",
                allocation.config_name
            ))
        })?
        .clone();
    // The angel needs these to decide about restarts; it reads them from stdout.
    println!(
        "{ANGEL_CONTROL_PREFIX} node_id={node} stop_on_error={}",
        u8::from(me.params.stop_on_error)
    );
    if let Some(machine) = machine_memory_bytes() {
        config::check_fits_machine(node, &me.params, machine).map_err(NodeError::Config)?;
    }
    prepare_data_dir(node, &me.data_dir, options.initial)?;
    tracing::info!(
        "node {node}: configured from {} ({} data nodes, {} threads)",
        allocation.config_name,
        config.data_nodes.len(),
        me.params.threads.threads.len()
    );

    let mgmd_node = config.mgmd().node_id;
    let spec = NodeSpec::from_config(&me, &config, kernel::Rng::from_entropy().next_u64(), pid)
        .map_err(NodeError::Config)?;
    let discard = options
        .discard_corrupt
        .then(crate::ldm::DiscardCorrupt::default);
    let figures = crate::dbinfo::NodeFigures::new(
        spec.tc_addresses().len() as u32,
        spec.ldm_addresses().len() as u32,
    );
    let blocks = wiring::data_node_blocks_with(
        &spec,
        node_disk(node)?,
        discard.clone(),
        Some(Arc::clone(&figures)),
    )
    .map_err(|what| NodeError::Start { node, what })?;
    let mut runtime = Runtime::new(node, &me.params.threads, blocks, RuntimeLimits::default())
        .map_err(|e| NodeError::Start {
            node,
            what: e.to_string(),
        })?;
    figures.set_threads(runtime.thread_figures());
    let transport_injector = runtime.injector();
    let session_injector = runtime.injector();

    let (transport, receiver) = start_transport(&config, node, transport_injector)?;
    figures.set_links(transport.link_figures());
    if let Some(receiver) = receiver {
        let thread = runtime
            .attach_poller(Box::new(ReceivePoller { receiver }))
            .map_err(|e| NodeError::Start {
                node,
                what: e.to_string(),
            })?;
        tracing::info!("node {node}: no receive thread; thread {thread} receives");
    }
    let transport = Arc::new(transport);
    let (session_writer, session_reader) = client.into_session();
    let session_writer = Arc::new(Mutex::new(session_writer));

    let (exit_tx, exit_rx) = mpsc::channel::<NodeExit>();
    let control = Arc::new(Control {
        node,
        mgmd: mgmd_node,
        transport: Arc::clone(&transport),
        session: Arc::clone(&session_writer),
        exit: Mutex::new(exit_tx.clone()),
    });
    let mut make_sender = |_thread: usize| -> Box<dyn RemoteSender> {
        Box::new(RemoteRouter {
            network: transport.sender(),
            mgmd: mgmd_node,
            session: Arc::clone(&session_writer),
        })
    };
    let running = runtime
        .start(&mut make_sender, control)
        .map_err(|e| NodeError::Start {
            node,
            what: e.to_string(),
        })?;
    let home = SessionHome {
        node,
        connect: options.connect.clone(),
        pid,
        writer: Arc::clone(&session_writer),
    };
    spawn_session_reader(home, session_reader, session_injector);

    let exit = loop {
        match exit_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(exit) => break exit,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if TERMINATE.load(Ordering::SeqCst) {
                    tracing::info!("node {node}: terminated by signal; stopping");
                    break NodeExit::Stop;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break NodeExit::Restart,
        }
    };
    drop(exit_tx);
    // Let the last signals (a leaving node's FailRep, status reports) reach
    // the wire before the threads stop.
    std::thread::sleep(EXIT_GRACE);
    running.stop();
    match Arc::try_unwrap(transport) {
        Ok(transport) => transport.shutdown(),
        Err(_) => tracing::warn!(
            "node {node}: transport still shared at exit; leaving it to the process exit"
        ),
    }
    let reasons = discard.map(|d| d.requested()).unwrap_or_default();
    if !reasons.is_empty() {
        // Every thread has stopped: no file of the node is in use.
        discard_files(node, &me.data_dir, &reasons)?;
        return Ok(NodeExit::Restart);
    }
    Ok(exit)
}

/// Moves the node's file system (`ndb_<node>_fs`) into a new
/// `discarded-<unix seconds>/` of `data_dir`, with a `REASON` file, and
/// logs what moved. Nothing is deleted: an operator may still look at the
/// files or remove them.
fn discard_files(
    node: NodeId,
    data_dir: &std::path::Path,
    reasons: &[String],
) -> Result<(), NodeError> {
    let fail = |what: String| NodeError::Start { node, what };
    let fs_dir = data_dir.join(format!("ndb_{node}_fs"));
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = data_dir.join(format!("discarded-{seconds}"));
    std::fs::create_dir_all(&aside).map_err(|e| {
        fail(format!(
            "--discard-corrupt: cannot create {}: {e}",
            aside.display()
        ))
    })?;
    let (files, bytes) = count_files(&fs_dir);
    let to = aside.join(format!("ndb_{node}_fs"));
    std::fs::rename(&fs_dir, &to).map_err(|e| {
        fail(format!(
            "--discard-corrupt: cannot move {} to {}: {e}",
            fs_dir.display(),
            to.display()
        ))
    })?;
    let reason_file = aside.join("REASON");
    if let Err(e) = std::fs::write(&reason_file, reasons.join("\n") + "\n") {
        tracing::warn!("node {node}: cannot write {}: {e}", reason_file.display());
    }
    tracing::warn!(
        "node {node}: --discard-corrupt: moved {} ({files} files, {bytes} bytes) to {}; \
         restarting empty to copy from its node group. Why: {}",
        fs_dir.display(),
        to.display(),
        reasons.join(" / ")
    );
    Ok(())
}

/// Files under `dir` and their bytes, for the log (0 where unreadable).
fn count_files(dir: &std::path::Path) -> (u64, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    let mut total = (0, 0);
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            let (files, bytes) = count_files(&entry.path());
            total = (total.0 + files, total.1 + bytes);
        } else {
            total = (total.0 + 1, total.1 + meta.len());
        }
    }
    total
}

fn connect_to_mgmd(connect: &str) -> Result<MgmClient, NodeError> {
    let deadline = std::time::Instant::now() + MGMD_CONNECT_TIMEOUT;
    loop {
        match MgmClient::connect(connect, Duration::from_secs(5)) {
            Ok(client) => return Ok(client),
            Err(error) if std::time::Instant::now() < deadline => {
                tracing::warn!("{error}; retrying");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(error) => {
                return Err(NodeError::Mgmd {
                    connect: connect.to_owned(),
                    reason: error.to_string(),
                })
            }
        }
    }
}

/// Asks for the node id. A restarted node may find its old session not yet
/// closed at the mgmd, so "in use" is retried for a while.
fn allocate_node_id(
    client: &mut MgmClient,
    options: &NodeOptions,
    pid: u32,
) -> Result<mgmd::Allocation, NodeError> {
    let requested = options
        .node_id
        .map_or_else(|| "any".to_owned(), |n| n.to_string());
    let mut attempts = 0;
    loop {
        match client.alloc_node_id(options.node_id, NodeType::Data, pid) {
            Ok(allocation) => return Ok(allocation),
            Err(error) => {
                attempts += 1;
                let text = error.to_string();
                if attempts < 20 && text.contains("already connected") {
                    std::thread::sleep(Duration::from_millis(250));
                    continue;
                }
                return Err(NodeError::NodeId {
                    requested,
                    reason: text,
                });
            }
        }
    }
}

fn prepare_data_dir(
    node: NodeId,
    data_dir: &std::path::Path,
    initial: bool,
) -> Result<(), NodeError> {
    let fs_dir: PathBuf = data_dir.join(format!("ndb_{node}_fs"));
    let fail = |what: String| NodeError::Start { node, what };
    if initial && fs_dir.exists() {
        std::fs::remove_dir_all(&fs_dir).map_err(|e| {
            fail(format!(
                "cannot clear {} for --initial: {e}",
                fs_dir.display()
            ))
        })?;
    }
    std::fs::create_dir_all(&fs_dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", fs_dir.display())))?;
    let pid_file = data_dir.join(format!("ndb_{node}.pid"));
    std::fs::write(&pid_file, format!("{}\n", std::process::id()))
        .map_err(|e| fail(format!("cannot write {}: {e}", pid_file.display())))?;
    Ok(())
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))
}

/// One connection per pair of nodes: the node with the higher id connects
/// to the lower; API nodes always connect to data nodes. Without recv
/// threads in the layout, the receive loop comes back for the runtime to run.
fn start_transport(
    config: &ClusterConfig,
    node: NodeId,
    injector: Injector,
) -> Result<(Transport, Option<Receiver>), NodeError> {
    let fail = |what: String| NodeError::Start { node, what };
    let me = config.data_node(node).expect("checked by the caller");
    let listen = resolve(&me.host_name, me.server_port).map_err(fail)?;
    let mut transport_config =
        TransportConfig::new(node, BlockRef::new(node, BlockNumber::MEMBERSHIP, 0));
    transport_config.listen = Some(listen);
    transport_config.local_sockets = me.params.use_shm;
    for peer in &config.data_nodes {
        if peer.node_id == node {
            continue;
        }
        let connect_to = if peer.node_id < node {
            Some(resolve(&peer.host_name, peer.server_port).map_err(fail)?)
        } else {
            None
        };
        transport_config.peers.push(PeerConfig {
            node: peer.node_id,
            connect_to,
            api: false,
        });
    }
    for api in &config.api_nodes {
        transport_config.peers.push(PeerConfig {
            node: api.node_id,
            connect_to: None,
            api: true,
        });
    }
    let layout = &me.params.threads;
    transport_config.send_thread = layout.count(ThreadRole::Send) > 0;
    let thread_cpu = |role: ThreadRole| {
        layout
            .threads
            .iter()
            .find(|t| t.role == role)
            .and_then(|t| t.cpubind)
    };
    transport_config.recv_cpubind = thread_cpu(ThreadRole::Recv);
    transport_config.send_cpubind = thread_cpu(ThreadRole::Send);
    let fail_transport = |e| fail(format!("transport: {e}"));
    if layout.count(ThreadRole::Recv) == 0 {
        let sink = InjectorSink {
            injector,
            wait: false,
        };
        let (transport, receiver) =
            Transport::start_polled(transport_config, Box::new(sink)).map_err(fail_transport)?;
        Ok((transport, Some(receiver)))
    } else {
        let sink = InjectorSink {
            injector,
            wait: true,
        };
        let transport =
            Transport::start(transport_config, Box::new(sink)).map_err(fail_transport)?;
        Ok((transport, None))
    }
}

/// Feeds received signals into the runtime. On a receive thread (`wait`),
/// a full queue makes it wait (so TCP pushes back on the sender) rather
/// than drop. On an execution thread the queue may be its own, which it
/// cannot drain while it waits: there a full queue refuses the signal, and
/// the receive loop keeps it and stops reading its connection until a later
/// turn finds room.
struct InjectorSink {
    injector: Injector,
    wait: bool,
}

impl InboundSink for InjectorSink {
    fn deliver(&mut self, signal: Signal) {
        inject(&mut self.injector, signal);
    }

    fn offer(&mut self, signal: Signal) -> Result<(), Signal> {
        if self.wait {
            inject(&mut self.injector, signal);
            return Ok(());
        }
        self.injector.push(signal)
    }

    fn flush(&mut self) {
        self.injector.flush();
    }
}

/// The transport's receive loop as the main thread's poller (no receive
/// thread): a turn per round, and the main thread sleeps in its poll.
struct ReceivePoller {
    receiver: Receiver,
}

impl Poller for ReceivePoller {
    fn turn(&mut self) {
        self.receiver.turn(Duration::ZERO);
    }

    fn wait(&mut self, timeout: Duration) {
        self.receiver.wait(timeout);
    }

    fn waker(&self) -> Arc<dyn PollWaker> {
        Arc::new(WakeReceiver(self.receiver.waker()))
    }
}

struct WakeReceiver(ReceiveWaker);

impl PollWaker for WakeReceiver {
    fn wake(&self) {
        self.0.wake();
    }
}

fn inject(injector: &mut Injector, mut signal: Signal) {
    // The clock is read only once the queue is full: the common push reads none.
    let mut deadline = None;
    loop {
        match injector.push(signal) {
            Ok(()) => return,
            Err(back) => {
                let now = std::time::Instant::now();
                if now >= *deadline.get_or_insert(now + INJECT_WAIT_MAX) {
                    tracing::warn!(
                        "runtime queue for {} full for {} ms: dropped {}",
                        back.receiver,
                        INJECT_WAIT_MAX.as_millis(),
                        back.body.name()
                    );
                    return;
                }
                signal = back;
                injector.flush();
                std::thread::yield_now();
            }
        }
    }
}

/// Where the session thread reconnects to when the mgmd goes away.
struct SessionHome {
    node: NodeId,
    connect: String,
    pid: u32,
    /// Shared with every `RemoteRouter`: replaced on reconnect.
    writer: Arc<Mutex<SessionWriter>>,
}

/// How often a node without its mgmd session tries to get one back.
const MGMD_RECONNECT_INTERVAL: Duration = Duration::from_secs(1);

/// Reads orders from the mgmd (stop, restart) and hands them to membership.
/// When the session breaks (the mgmd restarted), the node runs on and keeps
/// trying to register again under its own node id; status reports then
/// flow over the new session.
fn spawn_session_reader(home: SessionHome, mut reader: SessionReader, mut injector: Injector) {
    let node = home.node;
    let spawned = std::thread::Builder::new()
        .name("mgm-session".to_owned())
        .spawn(move || loop {
            match reader.recv() {
                Ok(mut signal) => {
                    // Orders from the mgmd are for membership, whatever block they name.
                    signal.receiver = BlockRef::new(node, BlockNumber::MEMBERSHIP, 0);
                    inject(&mut injector, signal);
                    injector.flush();
                }
                Err(error) => {
                    tracing::warn!(
                        "node {node}: lost the management server session ({error}); \
                         running on and reconnecting"
                    );
                    match reconnect_session(&home) {
                        Some(new_reader) => reader = new_reader,
                        None => return,
                    }
                }
            }
        });
    if let Err(error) = spawned {
        tracing::error!("node {node}: cannot start the mgm session thread: {error}");
    }
}

/// Registers with the mgmd again; `None` when the node is terminating.
fn reconnect_session(home: &SessionHome) -> Option<SessionReader> {
    loop {
        std::thread::sleep(MGMD_RECONNECT_INTERVAL);
        if TERMINATE.load(Ordering::SeqCst) {
            return None;
        }
        let attempt =
            MgmClient::connect(&home.connect, Duration::from_secs(2)).and_then(|mut client| {
                client.alloc_node_id(Some(home.node), NodeType::Data, home.pid)?;
                Ok(client)
            });
        match attempt {
            Ok(client) => {
                let (writer, reader) = client.into_session();
                *home.writer.lock().expect("mgm session lock") = writer;
                tracing::info!(
                    "node {}: registered again with the management server",
                    home.node
                );
                return Some(reader);
            }
            Err(error) => tracing::debug!("node {}: mgmd not back yet: {error}", home.node),
        }
    }
}

/// Sends signals for other nodes: to the mgmd over the mgm session, to
/// everyone else over the transport.
struct RemoteRouter {
    network: TransportSender,
    mgmd: NodeId,
    session: Arc<Mutex<SessionWriter>>,
}

impl RemoteSender for RemoteRouter {
    fn send(&mut self, signal: &Signal) {
        if signal.receiver.node == self.mgmd {
            // Rare (status reports, cluster-log events): a lock is fine here.
            let mut session = self.session.lock().expect("mgm session lock");
            if let Err(error) = session.send(signal) {
                tracing::debug!("cannot send {} to the mgmd: {error}", signal.body.name());
            }
        } else {
            self.network.send(signal);
        }
    }

    fn flush(&mut self) {
        self.network.flush();
    }
}

struct Control {
    node: NodeId,
    mgmd: NodeId,
    transport: Arc<Transport>,
    session: Arc<Mutex<SessionWriter>>,
    exit: Mutex<mpsc::Sender<NodeExit>>,
}

impl NodeControl for Control {
    fn disconnect(&self, node: NodeId) {
        self.transport.disconnect(node);
    }

    fn shutdown(&self, restart: bool, reason: &str) {
        tracing::warn!(
            "shutting down ({}): {reason}",
            if restart { "restart" } else { "stop" }
        );
        let exit = if restart {
            NodeExit::Restart
        } else {
            NodeExit::Stop
        };
        let _ = self.exit.lock().expect("exit lock").send(exit);
    }

    fn shutdown_failed(&self, reason: &str) {
        tracing::error!("stopping as failed: {reason}");
        let _ = self.exit.lock().expect("exit lock").send(NodeExit::Failed);
    }

    fn thread_failed(&self, thread: &str, role: ThreadRole, reason: &str) {
        tracing::error!(
            "thread {thread} (role {role}) failed: {reason}; ending the node as crashed"
        );
        let _ = self.exit.lock().expect("exit lock").send(NodeExit::Crashed);
    }

    fn watchdog_report(&self, thread: &str, role: ThreadRole, stuck_for: Duration) {
        let text = format!(
            "watchdog: thread {thread} (role {role}) has made no progress for {} ms",
            stuck_for.as_millis()
        );
        tracing::error!("{text}");
        let event = Signal {
            receiver: BlockRef::new(self.mgmd, BlockNumber::MANAGEMENT, 0),
            sender: BlockRef::new(self.node, BlockNumber::PROCESS, 0),
            body: signal::SignalBody::MgmEventRep {
                severity: signal::Severity::Alert,
                category: signal::EventKind::Stall.category(),
                level: signal::EventKind::Stall.level(),
                text,
            },
        };
        if let Ok(mut session) = self.session.lock() {
            let _ = session.send(&event);
        }
    }
}

/// The node's disk: the real one, with syncs made slower by the hidden
/// `SKARV_SLOW_SYNC_MS` (`storage::disk::SLOW_SYNC_ENV`), for measurements
/// of a slow disk only.
fn node_disk(node: NodeId) -> Result<SlowDisk<RealDisk>, NodeError> {
    let disk = SlowDisk::from_env(RealDisk).map_err(|what| NodeError::Start { node, what })?;
    if !disk.sync_delay().is_zero() {
        tracing::warn!(
            "node {node}: every sync takes {:?} more ({}): a measurement of a slow disk",
            disk.sync_delay(),
            storage::disk::SLOW_SYNC_ENV
        );
    }
    Ok(disk)
}
