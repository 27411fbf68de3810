//! The management server process: a listener, a thread per connection, and
//! a heartbeat monitor around the [`Registry`](crate::registry::Registry).
//!
//! Connections are few (one per node plus the odd `skarv admin`) and their
//! traffic is small, so blocking sockets and a thread each keep this simple;
//! the number of connections is bounded by [`CONNECTIONS_MAX`].

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use signal::frame::FRAME_PAYLOAD_MAX_BYTES;
use signal::{
    BlockNumber, BlockRef, ClusterLogAction, DbinfoRow, EventCategory, EventKind, EventThreshold,
    NodeId, NodeState, Severity, Signal, SignalBody, EVENT_LEVEL_MAX,
};
use stdx::RateLimit;

use crate::arbitrator::{ArbitDecision, Arbitrator};
use crate::cluster_log::{ClusterLog, Event};
use crate::error::MgmError;
use crate::registry::{AllocRequest, ConnectionId, LogLine, Registry, StatusReport};
use crate::wire::{write_signal, FrameReader, ReadError};

/// Open connections at most. When they are all open, a new one closes the
/// oldest connection that holds no node id (a flood of idle sockets must
/// not lock out `skarv admin` or a node of the cluster); it is refused only
/// when every open connection holds a node id.
pub const CONNECTIONS_MAX: usize = 512;
/// A connection that holds no node id and sends nothing for this long is
/// closed: a client asks at once, and an idle socket must not hold a
/// thread and a place for long (it was 60 s: 510 idle sockets locked
/// `skarv admin` out).
pub const UNREGISTERED_IDLE_TIMEOUT_MS: u64 = 3_000;
/// Warnings about closed and refused connections per second: a flood of
/// bad connections must not flood the log.
const CONNECTION_WARNINGS_PER_SECOND_MAX: u32 = 10;
/// A peer that does not take our bytes for this long is given up.
pub const WRITE_TIMEOUT_MS: u64 = 5_000;
/// `DbinfoScanRef::code` of a table no data node has (proto's
/// `NO_SUCH_TABLE`, which the mgmd does not depend on).
const NO_SUCH_TABLE: u32 = 723;
/// On `MgmShutdownReq`, how long to wait for the data nodes to go.
pub const SHUTDOWN_WAIT_MS: u64 = 10_000;
/// The largest configuration file served: half a frame, far above any real
/// `config.ini` (255 nodes take some tens of kilobytes).
pub const CONFIG_INI_MAX_BYTES: usize = FRAME_PAYLOAD_MAX_BYTES / 2;
/// How often silent data nodes are looked for.
pub const HEARTBEAT_CHECK_INTERVAL_MS: u64 = 50;
/// The self-connection that wakes the listener at shutdown.
const WAKE_TIMEOUT_MS: u64 = 1_000;

/// How to start a management server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub config_path: PathBuf,
    /// Overrides `PortNumber` of the `[ndb_mgmd]` section; 0 picks a free port.
    pub port: Option<u16>,
    /// Overrides `DataDir` of the `[ndb_mgmd]` section.
    pub data_dir: Option<PathBuf>,
    /// Which `[ndb_mgmd]` this server is; default the first.
    pub node_id: Option<NodeId>,
    /// Serve Prometheus `/metrics` on this port (0: any free port) of the
    /// mgmd's host; none when absent.
    pub metrics_port: Option<u16>,
}

/// A running management server. Dropping it shuts it down.
pub struct MgmServer {
    shared: Arc<Shared>,
    node_id: NodeId,
    data_dir: PathBuf,
    cluster_log_path: PathBuf,
    /// The listener and the heartbeat monitor, joined by `wait`.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// One data node's answer to an ndbinfo scan: its rows, or why not.
type ScanAnswer = (NodeId, Result<Vec<DbinfoRow>, String>);

/// The ndbinfo scans a scrape waits for: per request id, where the
/// connection threads hand each data node's answer.
#[derive(Default)]
struct Scans {
    next_id: u32,
    waiting: HashMap<u32, mpsc::Sender<ScanAnswer>>,
}

struct Shared {
    own: BlockRef,
    local_addr: SocketAddr,
    config_ini: String,
    config_name: String,
    registry: Mutex<Registry>,
    /// Notified on every change of the registry and at shutdown.
    registry_changed: Condvar,
    cluster_log: Mutex<ClusterLog>,
    /// Who holds the vote after a split of the data nodes.
    arbitrator: Mutex<Arbitrator>,
    connections: Mutex<Connections>,
    shutdown_requested: AtomicBool,
    stopped: Mutex<bool>,
    stopped_changed: Condvar,
    /// Data nodes that said they will not take part in a start (damaged
    /// files; their `CmNotJoiningRep`), with why, until they are given a
    /// node id again: told to every data node that reports itself
    /// starting (`MgmNotJoiningRep`), so that a node started later does
    /// not wait `StartPartialTimeout` for them.
    not_joining: Mutex<BTreeMap<NodeId, String>>,
    /// Where `/metrics` is served, if it is.
    metrics_addr: Option<SocketAddr>,
    scans: Mutex<Scans>,
}

struct Connections {
    next_id: ConnectionId,
    open: HashMap<ConnectionId, Arc<Connection>>,
    threads: Vec<JoinHandle<()>>,
    /// True after a refusal, so a flood of refusals logs one line.
    refusing: bool,
    /// Warnings about connections closed for a newer one or with an error.
    warnings: RateLimit,
}

impl Default for Connections {
    fn default() -> Connections {
        Connections {
            next_id: 0,
            open: HashMap::new(),
            threads: Vec::new(),
            refusing: false,
            warnings: RateLimit::new(CONNECTION_WARNINGS_PER_SECOND_MAX, Duration::from_secs(1)),
        }
    }
}

/// One accepted connection; its thread reads, any thread may write.
struct Connection {
    id: ConnectionId,
    peer: SocketAddr,
    stream: TcpStream,
    /// Whole frames only: replies and stop orders come from different threads.
    write_lock: Mutex<()>,
    /// It holds a node id: never closed to make room.
    registered: AtomicBool,
    /// Closed to make room for a newer connection; its thread is ending.
    evicted: AtomicBool,
}

impl Connection {
    fn send(&self, signal: &Signal) -> Result<(), String> {
        let _guard = lock(&self.write_lock);
        write_signal(&mut &self.stream, signal)
            .map_err(|e| format!("cannot send {} to {}: {e}", signal.body.name(), self.peer))
    }

    fn close(&self) {
        // Wakes the connection's thread out of its read; an error means the
        // socket is already gone, which is what we want.
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .expect("a management server thread panicked holding a lock")
}

impl MgmServer {
    /// Loads the configuration, binds the port, opens the cluster log and
    /// starts serving.
    pub fn start(options: ServerOptions) -> Result<MgmServer, MgmError> {
        let path = &options.config_path;
        let config_ini = read_config(path)?;
        let config_name = path.display().to_string();
        let config = config::parse(&config_ini, &config_name)
            .map_err(|error| MgmError::Config(error.to_string()))?;
        let mgmd = match options.node_id {
            Some(id) => config
                .management_nodes
                .iter()
                .find(|m| m.node_id == id)
                .ok_or(MgmError::NotManagementNode {
                    node: id,
                    path: path.clone(),
                })?,
            None => config
                .management_nodes
                .first()
                .ok_or(MgmError::NoManagementNode { path: path.clone() })?,
        };
        let node_id = mgmd.node_id;
        let port = options.port.unwrap_or(mgmd.port);
        let listener = bind(&mgmd.host_name, port)?;
        let local_addr = listener.local_addr().map_err(|source| MgmError::Bind {
            address: host_port(&mgmd.host_name, port),
            source,
        })?;
        let metrics_listener = match options.metrics_port {
            Some(port) => Some(bind(&mgmd.host_name, port)?),
            None => None,
        };
        let metrics_addr = match &metrics_listener {
            Some(listener) => Some(listener.local_addr().map_err(|source| MgmError::Bind {
                address: host_port(&mgmd.host_name, options.metrics_port.unwrap_or(0)),
                source,
            })?),
            None => None,
        };
        let data_dir = options.data_dir.unwrap_or_else(|| mgmd.data_dir.clone());
        fs::create_dir_all(&data_dir).map_err(|source| MgmError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let cluster_log_path = ClusterLog::path_in(&data_dir, node_id);
        let mut cluster_log =
            ClusterLog::open(cluster_log_path.clone()).map_err(|source| MgmError::ClusterLog {
                path: cluster_log_path.clone(),
                source,
            })?;
        let file_name = path
            .file_name()
            .map_or(config_name.clone(), |n| n.to_string_lossy().into_owned());
        let pid = std::process::id();
        let registry = Registry::from_config(node_id, pid, &file_name, &config);
        let started = format!(
            "Node {node_id}: started (management server, pid {pid}, version {}, \
             listening on {local_addr}, configuration {config_name})",
            signal::version_string(signal::VERSION)
        );
        cluster_log
            .write(Event {
                node: node_id,
                severity: Severity::Info,
                category: EventKind::MgmdStarted.category(),
                level: EventKind::MgmdStarted.level(),
                text: &started,
            })
            .map_err(|source| MgmError::ClusterLog {
                path: cluster_log_path.clone(),
                source,
            })?;

        let shared = Arc::new(Shared {
            own: BlockRef::new(node_id, BlockNumber::MANAGEMENT, 0),
            local_addr,
            config_ini,
            config_name,
            registry: Mutex::new(registry),
            registry_changed: Condvar::new(),
            cluster_log: Mutex::new(cluster_log),
            arbitrator: Mutex::new(Arbitrator::new()),
            connections: Mutex::new(Connections::default()),
            shutdown_requested: AtomicBool::new(false),
            stopped: Mutex::new(false),
            stopped_changed: Condvar::new(),
            not_joining: Mutex::new(BTreeMap::new()),
            metrics_addr,
            scans: Mutex::new(Scans::default()),
        });
        let listener_thread = spawn("listener", "mgmd-listener", {
            let shared = Arc::clone(&shared);
            move || shared.accept_loop(listener)
        })?;
        let monitor = spawn("heartbeat monitor", "mgmd-heartbeat", {
            let shared = Arc::clone(&shared);
            move || shared.monitor_heartbeats()
        });
        let monitor = match monitor {
            Ok(monitor) => monitor,
            Err(error) => {
                shared.request_shutdown();
                if listener_thread.join().is_err() {
                    tracing::error!("the management server's listener thread panicked");
                }
                return Err(error);
            }
        };
        let mut threads = vec![listener_thread, monitor];
        if let Some(listener) = metrics_listener {
            let served = spawn("metrics server", "mgmd-metrics", {
                let shared = Arc::clone(&shared);
                move || shared.metrics_loop(listener)
            });
            match served {
                Ok(thread) => threads.push(thread),
                Err(error) => {
                    shared.request_shutdown();
                    for thread in threads {
                        let _ = thread.join();
                    }
                    return Err(error);
                }
            }
        }
        let server = MgmServer {
            shared,
            node_id,
            data_dir,
            cluster_log_path,
            threads: Mutex::new(threads),
        };
        Ok(server)
    }

    /// The address the server listens on (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Where `/metrics` is served (with the real port when 0 was asked).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.shared.metrics_addr
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn cluster_log_path(&self) -> &Path {
        &self.cluster_log_path
    }

    /// Asks the server to stop; returns at once. `wait` tells when it is done.
    pub fn shutdown(&self) {
        self.shared.request_shutdown();
    }

    /// Blocks until a shutdown was requested (by `shutdown` or by a client's
    /// `MgmShutdownReq`) and every thread of the server has finished.
    pub fn wait(&self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a management server thread panicked");
            }
        }
        let mut stopped = lock(&self.shared.stopped);
        while !*stopped {
            stopped = self
                .shared
                .stopped_changed
                .wait(stopped)
                .expect("a management server thread panicked holding a lock");
        }
    }
}

impl Drop for MgmServer {
    fn drop(&mut self) {
        self.shutdown();
        self.wait();
    }
}

fn spawn(
    thread: &'static str,
    name: &str,
    body: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, MgmError> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map_err(|source| MgmError::Spawn { thread, source })
}

/// Reads the configuration file, which must fit one frame with room to
/// spare: nodes receive it whole in `MgmAllocNodeIdConf`.
fn read_config(path: &Path) -> Result<String, MgmError> {
    let read_error = |source| MgmError::ReadConfig {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::open(path).map_err(read_error)?;
    let mut text = String::new();
    file.take(CONFIG_INI_MAX_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    if text.len() > CONFIG_INI_MAX_BYTES {
        return Err(MgmError::ConfigTooLarge {
            path: path.to_owned(),
            max_bytes: CONFIG_INI_MAX_BYTES,
        });
    }
    Ok(text)
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn bind(host: &str, port: u16) -> Result<TcpListener, MgmError> {
    TcpListener::bind((host, port)).map_err(|source| MgmError::Bind {
        address: host_port(host, port),
        source,
    })
}

impl Shared {
    fn shutting_down(&self) -> bool {
        self.shutdown_requested.load(Ordering::SeqCst)
    }

    fn request_shutdown(&self) {
        if self.shutdown_requested.swap(true, Ordering::SeqCst) {
            return;
        }
        {
            // Under the lock, so a waiter cannot miss the notification
            // between checking the flag and waiting.
            let _registry = lock(&self.registry);
            self.registry_changed.notify_all();
        }
        // The listeners block in accept(): a connection of our own wakes each.
        for mut wake in std::iter::once(self.local_addr).chain(self.metrics_addr) {
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            if let Err(error) =
                TcpStream::connect_timeout(&wake, Duration::from_millis(WAKE_TIMEOUT_MS))
            {
                tracing::error!("cannot wake the listener at {wake} for shutdown: {error}");
            }
        }
    }

    /// Serves `/metrics`, one scrape at a time (a scraper asks every few
    /// seconds; a second one waits in the listen backlog).
    fn metrics_loop(&self, listener: TcpListener) {
        for incoming in listener.incoming() {
            if self.shutting_down() {
                break;
            }
            match incoming {
                Ok(mut stream) => {
                    let answered = crate::metrics::answer(&mut stream, || {
                        crate::metrics::render(&self.gather_metrics())
                    });
                    if let Err(error) = answered {
                        tracing::debug!("a metrics request ended early: {error}");
                    }
                }
                Err(error) => {
                    tracing::warn!("accept on the metrics port failed: {error}");
                    thread::sleep(Duration::from_millis(HEARTBEAT_CHECK_INTERVAL_MS));
                }
            }
        }
    }

    /// Every metrics table from every data node that answers in time.
    fn gather_metrics(&self) -> crate::metrics::Gathered {
        let timeout = Duration::from_millis(crate::metrics::SCAN_TIMEOUT_MS);
        let mut gathered = crate::metrics::Gathered {
            data_nodes: lock(&self.registry)
                .data_node_sessions()
                .into_iter()
                .map(|(node, _)| node)
                .collect(),
            ..Default::default()
        };
        // A node that let one table's scan time out is not asked for the
        // others: a hung node costs a scrape one timeout, not one per table
        // (which would pass Prometheus's default 10 s scrape timeout).
        let mut silent = std::collections::BTreeSet::new();
        for def in crate::metrics::TABLES {
            let asked: Vec<NodeId> = gathered
                .data_nodes
                .iter()
                .copied()
                .filter(|n| !silent.contains(n))
                .collect();
            let answers = self.dbinfo_scan(def.name, timeout, &silent);
            silent.extend(
                asked
                    .into_iter()
                    .filter(|n| !answers.iter().any(|(answered, _)| answered == n)),
            );
            let answers = answers
                .into_iter()
                .filter_map(|(node, rows)| match rows {
                    Ok(rows) => Some((node, rows)),
                    Err(message) => {
                        tracing::warn!("node {node}: ndbinfo scan of {}: {message}", def.name);
                        None
                    }
                })
                .collect();
            gathered.tables.insert(def.name, answers);
        }
        gathered
    }

    /// Asks every data node that holds a session for its rows of ndbinfo
    /// table `table` (the `DbinfoScanReq` an API node sends, here over the
    /// session), and waits up to `timeout` for the answers. A node that
    /// does not answer in time is left out, as are the nodes in `skip`.
    pub(crate) fn dbinfo_scan(
        &self,
        table: &str,
        timeout: Duration,
        skip: &std::collections::BTreeSet<NodeId>,
    ) -> Vec<ScanAnswer> {
        let sessions = lock(&self.registry).data_node_sessions();
        let (answer_tx, answers) = mpsc::channel();
        let request_id = {
            let mut scans = lock(&self.scans);
            scans.next_id = scans.next_id.wrapping_add(1);
            let id = scans.next_id;
            scans.waiting.insert(id, answer_tx);
            id
        };
        let mut asked = 0;
        for (node, connection) in sessions {
            if skip.contains(&node) {
                continue;
            }
            let Some(connection) = connection.and_then(|id| self.connection(id)) else {
                continue;
            };
            let request = Signal {
                receiver: BlockRef::new(node, BlockNumber::MEMBERSHIP, 0),
                sender: self.own,
                body: SignalBody::DbinfoScanReq {
                    request_id,
                    table: table.to_owned(),
                },
            };
            match connection.send(&request) {
                Ok(()) => asked += 1,
                Err(error) => tracing::debug!("node {node}: {error}"),
            }
        }
        let deadline = Instant::now() + timeout;
        let mut got = Vec::with_capacity(asked);
        while got.len() < asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok(answer) => got.push(answer),
                Err(_) => break,
            }
        }
        lock(&self.scans).waiting.remove(&request_id);
        got
    }

    /// A data node's answer to a `dbinfo_scan`; one that comes after its
    /// scan gave up is dropped.
    fn scan_answered(&self, node: NodeId, request_id: u32, rows: Result<Vec<DbinfoRow>, String>) {
        if let Some(waiter) = lock(&self.scans).waiting.get(&request_id) {
            // The scan may have just given up: then nobody wants it.
            let _ = waiter.send((node, rows));
        }
    }

    /// Runs `change` on the registry, then writes what it logged and wakes
    /// those who wait for a change.
    fn with_registry<R>(&self, change: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = lock(&self.registry);
        let result = change(&mut registry);
        let lines = registry.take_log();
        self.registry_changed.notify_all();
        drop(registry);
        self.log_lines(&lines);
        result
    }

    /// An event of the mgmd itself (about its own node).
    fn log(&self, kind: EventKind, severity: Severity, text: &str) {
        self.log_event(Event {
            node: self.own.node,
            severity,
            category: kind.category(),
            level: kind.level(),
            text,
        });
    }

    fn log_event(&self, event: Event<'_>) {
        if let Err(error) = lock(&self.cluster_log).write(event) {
            tracing::error!(
                "cannot write the cluster log: {error}; line: {}",
                event.text
            );
        }
    }

    /// `skarv admin clusterlog`: changes the filter as asked, and answers
    /// with the filter then (every configured node's thresholds).
    fn cluster_log_request(
        &self,
        action: ClusterLogAction,
        severities: &[Severity],
        nodes: &[NodeId],
        category: EventCategory,
        threshold: u8,
    ) -> SignalBody {
        let configured: Vec<NodeId> = lock(&self.registry).show().iter().map(|n| n.node).collect();
        if action == ClusterLogAction::Threshold {
            if threshold > EVENT_LEVEL_MAX {
                return SignalBody::MgmClusterLogRef {
                    message: format!(
                        "threshold {threshold} for {}: thresholds are 0 to {EVENT_LEVEL_MAX}",
                        category.as_str()
                    ),
                };
            }
            if let Some(unknown) = nodes.iter().find(|n| !configured.contains(n)) {
                let ids: Vec<String> = configured.iter().map(NodeId::to_string).collect();
                return SignalBody::MgmClusterLogRef {
                    message: format!(
                        "node {unknown} does not exist: the cluster's nodes are {}",
                        ids.join(", ")
                    ),
                };
            }
        }
        let mut log = lock(&self.cluster_log);
        let filter = log.filter_mut();
        match action {
            ClusterLogAction::Info => {}
            ClusterLogAction::On => filter.switch(severities, true),
            ClusterLogAction::Off => filter.switch(severities, false),
            ClusterLogAction::Toggle => filter.toggle(severities),
            ClusterLogAction::Threshold => {
                // No node named: every configured node (`all`).
                let targets = if nodes.is_empty() {
                    &configured[..]
                } else {
                    nodes
                };
                for &node in targets {
                    filter.set_threshold(node, category, threshold);
                }
            }
        }
        let filter = log.filter();
        let thresholds = configured
            .iter()
            .flat_map(|&node| {
                EventCategory::ALL
                    .iter()
                    .map(move |&category| EventThreshold {
                        node,
                        category,
                        threshold: filter.threshold(node, category),
                    })
            })
            .collect();
        SignalBody::MgmClusterLogConf {
            enabled: filter.enabled(),
            severities: filter.severities(),
            thresholds,
        }
    }

    fn log_lines(&self, lines: &[LogLine]) {
        for line in lines {
            self.log_event(line.event());
        }
    }

    fn accept_loop(self: Arc<Shared>, listener: TcpListener) {
        for incoming in listener.incoming() {
            if self.shutting_down() {
                break;
            }
            match incoming {
                Ok(stream) => self.admit(stream),
                Err(error) => {
                    tracing::warn!("accept on {} failed: {error}", self.local_addr);
                    // Out of file descriptors and the like: let it ease.
                    thread::sleep(Duration::from_millis(HEARTBEAT_CHECK_INTERVAL_MS));
                }
            }
        }
        drop(listener);
        self.close_all();
        self.log(
            EventKind::StopOrdered,
            Severity::Info,
            &format!("Node {}: management server shut down", self.own.node),
        );
        *lock(&self.stopped) = true;
        self.stopped_changed.notify_all();
    }

    fn admit(self: &Arc<Shared>, stream: TcpStream) {
        let peer = match stream.peer_addr() {
            Ok(peer) => peer,
            Err(error) => {
                tracing::debug!("accepted connection vanished: {error}");
                return;
            }
        };
        let mut connections = lock(&self.connections);
        let (finished, running): (Vec<_>, Vec<_>) = std::mem::take(&mut connections.threads)
            .into_iter()
            .partition(|t| t.is_finished());
        connections.threads = running;
        for thread in finished {
            if thread.join().is_err() {
                tracing::error!("a management connection thread panicked");
            }
        }
        if connections.open.len() >= CONNECTIONS_MAX
            && !Self::evict_oldest_unregistered(&mut connections)
        {
            let first = !connections.refusing;
            connections.refusing = true;
            drop(connections);
            if first {
                self.log(
                    EventKind::ConnectionsRefused,
                    Severity::Warning,
                    &format!(
                        "Node {}: refusing connections from {peer} and others: \
                         {CONNECTIONS_MAX} connections are open",
                        self.own.node
                    ),
                );
            }
            return;
        }
        connections.refusing = false;
        if let Err(error) = configure(&stream) {
            tracing::warn!("cannot set up the connection from {peer}: {error}");
            return;
        }
        let id = connections.next_id;
        connections.next_id += 1;
        let connection = Arc::new(Connection {
            id,
            peer,
            stream,
            write_lock: Mutex::new(()),
            registered: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
        });
        let spawned = thread::Builder::new()
            .name(format!("mgmd-conn-{id}"))
            .spawn({
                let shared = Arc::clone(self);
                let connection = Arc::clone(&connection);
                move || shared.serve(connection)
            });
        match spawned {
            Ok(thread) => {
                connections.open.insert(id, connection);
                connections.threads.push(thread);
            }
            Err(error) => tracing::warn!("cannot start a thread for {peer}: {error}"),
        }
    }

    /// Closes the oldest open connection that holds no node id, to make
    /// room for a new one. Returns false when there is none.
    fn evict_oldest_unregistered(connections: &mut Connections) -> bool {
        let oldest = connections
            .open
            .values()
            .filter(|c| !c.registered.load(Ordering::Acquire) && !c.evicted.load(Ordering::Acquire))
            .min_by_key(|c| c.id)
            .cloned();
        let Some(oldest) = oldest else {
            return false;
        };
        // Its thread removes it from `open` when it sees the close; until
        // then the count may exceed the limit by the connections closing.
        oldest.evicted.store(true, Ordering::Release);
        oldest.close();
        if let Some(suppressed) = connections.warnings.admit(Instant::now()) {
            tracing::warn!(
                suppressed,
                "{CONNECTIONS_MAX} connections are open: closing the oldest without a node id, from {}",
                oldest.peer
            );
        }
        true
    }

    fn close_all(&self) {
        let (open, threads) = {
            let mut connections = lock(&self.connections);
            (
                std::mem::take(&mut connections.open),
                std::mem::take(&mut connections.threads),
            )
        };
        for connection in open.values() {
            connection.close();
        }
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a management connection thread panicked");
            }
        }
    }

    fn connection(&self, id: ConnectionId) -> Option<Arc<Connection>> {
        lock(&self.connections).open.get(&id).cloned()
    }

    fn monitor_heartbeats(&self) {
        let interval = Duration::from_millis(HEARTBEAT_CHECK_INTERVAL_MS);
        loop {
            let registry = lock(&self.registry);
            if self.shutting_down() {
                return;
            }
            let (registry, _) = self
                .registry_changed
                .wait_timeout(registry, interval)
                .expect("a management server thread panicked holding a lock");
            drop(registry);
            if self.shutting_down() {
                return;
            }
            let expired = self.with_registry(|r| r.expire_silent(Instant::now()));
            for id in expired {
                if let Some(connection) = self.connection(id) {
                    connection.close();
                }
            }
        }
    }

    /// The life of one connection, on its own thread.
    fn serve(&self, connection: Arc<Connection>) {
        let mut reader = FrameReader::new();
        let mut session: Option<NodeId> = None;
        let reason = loop {
            let signal = match reader.next_signal(&mut &connection.stream) {
                Ok(signal) => signal,
                Err(ReadError::Closed) => break None,
                Err(error) if error.is_timeout() => {
                    break Some(format!(
                        "idle for {UNREGISTERED_IDLE_TIMEOUT_MS} ms without a node id"
                    ))
                }
                Err(ReadError::Io(error)) if self.shutting_down() || session.is_some() => {
                    tracing::debug!("connection from {} ended: {error}", connection.peer);
                    break None;
                }
                Err(error) => break Some(error.to_string()),
            };
            if let Err(reason) = self.handle(&connection, &mut session, signal) {
                break Some(reason);
            }
        };
        if let Some(reason) = reason.filter(|_| !connection.evicted.load(Ordering::Acquire)) {
            let admitted = lock(&self.connections).warnings.admit(Instant::now());
            if let Some(suppressed) = admitted {
                tracing::warn!(
                    suppressed,
                    "closing the connection from {}: {reason}",
                    connection.peer
                );
            }
        }
        connection.close();
        if let Some(node) = session {
            if !self.shutting_down() {
                self.with_registry(|r| r.session_closed(node, connection.id));
            }
        }
        lock(&self.connections).open.remove(&connection.id);
    }

    /// Acts on one signal. `Err` closes the connection, with the reason.
    fn handle(
        &self,
        connection: &Connection,
        session: &mut Option<NodeId>,
        signal: Signal,
    ) -> Result<(), String> {
        if let Some(node) = *session {
            if signal.sender.node != node {
                return Err(format!(
                    "{} in the session of node {node} claims to come from node {}",
                    signal.body.name(),
                    signal.sender.node
                ));
            }
            if !lock(&self.registry).holds(node, connection.id) {
                return Err(format!("the session of node {node} was ended"));
            }
        }
        let reply_to = signal.sender;
        let reply = |body: SignalBody| {
            connection.send(&Signal {
                receiver: reply_to,
                sender: self.own,
                body,
            })
        };
        match signal.body {
            SignalBody::MgmAllocNodeIdReq {
                requested,
                node_type,
                version,
                pid,
                hostname,
            } => {
                if let Some(node) = *session {
                    return reply(SignalBody::MgmAllocNodeIdRef {
                        message: format!("this connection already holds node id {node}"),
                    });
                }
                let request = AllocRequest {
                    requested,
                    node_type,
                    version,
                    pid,
                    hostname,
                    address: connection.peer.ip().to_string(),
                };
                self.alloc(connection, session, &request, reply)
            }
            SignalBody::MgmNodeStatusRep {
                state,
                pid,
                version,
                view_id,
                president,
                members,
            } => {
                let node = session.ok_or("a status report on a connection without a node id")?;
                let report = StatusReport {
                    state,
                    pid,
                    version,
                    view_id,
                    members,
                };
                self.with_registry(|r| {
                    r.status_report(node, connection.id, &report, Instant::now())
                })?;
                lock(&self.arbitrator).view_report(node, view_id, president, &members);
                if state == NodeState::Starting {
                    let absent: Vec<(NodeId, String)> = lock(&self.not_joining)
                        .iter()
                        .filter(|(n, _)| **n != node)
                        .map(|(n, r)| (*n, r.clone()))
                        .collect();
                    for (absent, reason) in absent {
                        reply(SignalBody::MgmNotJoiningRep {
                            node: absent,
                            reason,
                        })?;
                    }
                }
                Ok(())
            }
            SignalBody::CmNotJoiningRep { reason } => {
                let node =
                    session.ok_or("a not-joining notice on a connection without a node id")?;
                if !lock(&self.registry).is_data_node(node) {
                    return Err(format!("node {node} is not a data node"));
                }
                lock(&self.not_joining).insert(node, reason);
                Ok(())
            }
            SignalBody::ArbitReq { view_id, members } => {
                let node =
                    session.ok_or("an arbitration request on a connection without a node id")?;
                if !lock(&self.registry).is_data_node(node) {
                    return Err(format!(
                        "node {node} asked for arbitration but is not a data node"
                    ));
                }
                let decision = lock(&self.arbitrator).request(node, view_id, &members);
                match decision {
                    ArbitDecision::Granted => {
                        self.log(
                            EventKind::ArbitrationResult,
                            Severity::Alert,
                            &format!(
                                "Node {}: arbitration won by node {node}: its side {members:?} \
                                 (split from view {view_id}) goes on",
                                self.own.node
                            ),
                        );
                        reply(SignalBody::ArbitConf { view_id })
                    }
                    ArbitDecision::Refused(message) => {
                        self.log(
                            EventKind::ArbitrationResult,
                            Severity::Alert,
                            &format!(
                                "Node {}: arbitration refused to node {node} (side {members:?}, \
                                 view {view_id}): {message}",
                                self.own.node
                            ),
                        );
                        reply(SignalBody::ArbitRef { view_id, message })
                    }
                }
            }
            SignalBody::MgmEventRep {
                severity,
                category,
                level,
                text,
            } => {
                let node = session.ok_or("an event report on a connection without a node id")?;
                if level > EVENT_LEVEL_MAX {
                    return Err(format!(
                        "an event report of level {level}: levels are 0 to {EVENT_LEVEL_MAX}"
                    ));
                }
                self.log_event(Event {
                    node,
                    severity,
                    category,
                    level,
                    text: &format!("Node {node}: {text}"),
                });
                Ok(())
            }
            SignalBody::MgmClusterLogReq {
                action,
                severities,
                nodes,
                category,
                threshold,
            } => reply(self.cluster_log_request(action, &severities, &nodes, category, threshold)),
            SignalBody::MgmShowReq {} => {
                let nodes = lock(&self.registry).show();
                reply(SignalBody::MgmShowConf { nodes })
            }
            SignalBody::MgmStopReq {
                node,
                restart,
                force,
            } => {
                let body = match self.order_stop(node, restart, force) {
                    Ok(nodes) => SignalBody::MgmStopConf { nodes },
                    Err(message) => SignalBody::MgmStopRef { message },
                };
                reply(body)
            }
            SignalBody::MgmShutdownReq {} => {
                self.log(
                    EventKind::StopOrdered,
                    Severity::Info,
                    &format!(
                        "Node {}: shutdown requested from {}",
                        self.own.node, connection.peer
                    ),
                );
                let nodes = self.order_stop(None, false, true)?;
                reply(SignalBody::MgmStopConf { nodes })?;
                self.wait_for_data_nodes(Duration::from_millis(SHUTDOWN_WAIT_MS));
                self.request_shutdown();
                Ok(())
            }
            // `skarv admin report`: the mgmd gathers the rows of every data
            // node as a scrape does, and answers with them all, ordered by
            // node (each row's first column is its node); none answering
            // is a refusal.
            SignalBody::DbinfoScanReq { request_id, table } => {
                // `skarv admin report eventlog`: the mgmd's own recent events.
                if table == crate::cluster_log::EVENTLOG {
                    let rows = lock(&self.cluster_log).recent();
                    return reply(SignalBody::DbinfoScanConf { request_id, rows });
                }
                if signal::dbinfo::table(&table).is_none() {
                    return reply(SignalBody::DbinfoScanRef {
                        request_id,
                        code: NO_SUCH_TABLE,
                        message: format!("no ndbinfo table `{table}`"),
                    });
                }
                let timeout = Duration::from_millis(crate::metrics::SCAN_TIMEOUT_MS);
                let mut answers = self.dbinfo_scan(&table, timeout, &Default::default());
                answers.sort_by_key(|(node, _)| *node);
                let mut rows = Vec::new();
                let mut errors = Vec::new();
                for (node, answer) in answers {
                    match answer {
                        Ok(mut r) => rows.append(&mut r),
                        Err(message) => errors.push(format!("node {node}: {message}")),
                    }
                }
                if rows.is_empty() && !errors.is_empty() {
                    return reply(SignalBody::DbinfoScanRef {
                        request_id,
                        code: NO_SUCH_TABLE,
                        message: errors.join("; "),
                    });
                }
                if table == signal::dbinfo::CLUSTER_OPERATIONS.name {
                    // The LDMs do not know their transactions' clients;
                    // the TCs do: joined here as the SQL node's reader
                    // joins them (a row whose transaction no TC showed
                    // keeps 0).
                    let transactions: Vec<signal::DbinfoRow> = self
                        .dbinfo_scan(
                            signal::dbinfo::CLUSTER_TRANSACTIONS.name,
                            timeout,
                            &Default::default(),
                        )
                        .into_iter()
                        .filter_map(|(_, answer)| answer.ok())
                        .flatten()
                        .collect();
                    signal::dbinfo::join_client_block_refs(&mut rows, &transactions);
                }
                reply(SignalBody::DbinfoScanConf { request_id, rows })
            }
            SignalBody::DbinfoScanConf { request_id, rows } => {
                let node = session.ok_or("an ndbinfo answer on a connection without a node id")?;
                self.scan_answered(node, request_id, Ok(rows));
                Ok(())
            }
            SignalBody::DbinfoScanRef {
                request_id,
                code,
                message,
            } => {
                let node = session.ok_or("an ndbinfo answer on a connection without a node id")?;
                self.scan_answered(node, request_id, Err(format!("error {code}: {message}")));
                Ok(())
            }
            other => Err(format!("{} is not a management request", other.name())),
        }
    }

    fn alloc(
        &self,
        connection: &Connection,
        session: &mut Option<NodeId>,
        request: &AllocRequest,
        reply: impl Fn(SignalBody) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.shutting_down() {
            return reply(SignalBody::MgmAllocNodeIdRef {
                message: "the management server is shutting down".to_owned(),
            });
        }
        let granted = self.with_registry(|r| r.alloc(request, connection.id, Instant::now()));
        let node_id = match granted {
            Ok(node_id) => node_id,
            Err(message) => return reply(SignalBody::MgmAllocNodeIdRef { message }),
        };
        *session = Some(node_id);
        // A new start of the node: whatever it said of the last one is
        // old, and the process that may have held the vote is gone.
        lock(&self.not_joining).remove(&node_id);
        if lock(&self.registry).is_data_node(node_id) {
            lock(&self.arbitrator).node_restarted(node_id);
        }
        connection.registered.store(true, Ordering::Release);
        // Sessions live as long as the node; silence is judged by the
        // heartbeat monitor, not by a read timeout.
        connection
            .stream
            .set_read_timeout(None)
            .map_err(|e| format!("cannot clear the read timeout: {e}"))?;
        reply(SignalBody::MgmAllocNodeIdConf {
            node_id,
            config_ini: self.config_ini.clone(),
            config_name: self.config_name.clone(),
        })
    }

    /// Orders the stop and sends the orders; answers the nodes ordered.
    fn order_stop(
        &self,
        target: Option<NodeId>,
        restart: bool,
        force: bool,
    ) -> Result<Vec<NodeId>, String> {
        let ordered = self.with_registry(|r| r.order_stop(target, restart, force))?;
        let mut nodes = Vec::with_capacity(ordered.len());
        for (node, id) in ordered {
            let Some(session) = self.connection(id) else {
                continue;
            };
            let order = Signal {
                receiver: BlockRef::new(node, BlockNumber::PROCESS, 0),
                sender: self.own,
                body: SignalBody::MgmStopOrd { restart },
            };
            match session.send(&order) {
                Ok(()) => nodes.push(node),
                Err(error) => {
                    tracing::warn!("node {node}: {error}");
                    session.close();
                }
            }
        }
        Ok(nodes)
    }

    fn wait_for_data_nodes(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut registry = lock(&self.registry);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let connected = registry.data_sessions();
            if connected.is_empty() || self.shutting_down() {
                return;
            }
            if left.is_zero() {
                drop(registry);
                let list: Vec<String> = connected.iter().map(NodeId::to_string).collect();
                self.log(
                    EventKind::StopForced,
                    Severity::Warning,
                    &format!(
                        "Node {}: shutting down while data nodes {} are still connected",
                        self.own.node,
                        list.join(", ")
                    ),
                );
                return;
            }
            registry = self
                .registry_changed
                .wait_timeout(registry, left)
                .expect("a management server thread panicked holding a lock")
                .0;
        }
    }
}

fn configure(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(Duration::from_millis(WRITE_TIMEOUT_MS)))?;
    stream.set_read_timeout(Some(Duration::from_millis(UNREGISTERED_IDLE_TIMEOUT_MS)))
}
