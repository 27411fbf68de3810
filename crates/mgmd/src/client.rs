//! The client side of the mgm protocol, for `skarv admin`, the sandbox and
//! data nodes.
//!
//! A client starts unregistered and can ask for the cluster's state, stop
//! nodes or shut the cluster down. After [`MgmClient::alloc_node_id`] the
//! connection is that node's *session*: [`MgmClient::into_session`] splits
//! it into a writer (status reports, events) and a reader (stop orders).

use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signal::{
    BlockNumber, BlockRef, ClusterLogAction, DbinfoRow, EventCategory, EventThreshold, NodeId,
    NodeStatusEntry, NodeType, Severity, Signal, SignalBody,
};

use crate::error::MgmError;
use crate::server::SHUTDOWN_WAIT_MS;
use crate::wire::{write_signal, FrameReader, ReadError, WriteError};

/// How long a request waits for its answer unless told otherwise.
pub const REQUEST_TIMEOUT_DEFAULT_MS: u64 = 5_000;
/// The management server's port when a connect string names none.
pub const PORT_DEFAULT: u16 = 1186;
/// Signals that arrive unasked (stop orders) and are kept for the session;
/// more means the server misbehaves.
const UNSOLICITED_SIGNALS_MAX: usize = 64;

/// Until the server answers, its node id is unknown; it ignores addresses
/// on connections that hold no node id.
const PLACEHOLDER_NODE: NodeId = match NodeId::new(1) {
    Some(node) => node,
    None => panic!("1 is a node id"),
};

/// A node id granted by the management server, with the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub node_id: NodeId,
    /// The configuration file's text, verbatim.
    pub config_ini: String,
    /// Where it came from, for messages (a path on the management server).
    pub config_name: String,
}

/// A `CLUSTERLOG` request ([`MgmClient::cluster_log`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterLogRequest {
    pub action: ClusterLogAction,
    /// For `On`, `Off`, `Toggle`: the severities, or none for the whole log.
    pub severities: Vec<Severity>,
    /// For `Threshold`: the nodes, their category and its new threshold.
    pub nodes: Vec<NodeId>,
    pub category: EventCategory,
    pub threshold: u8,
}

impl ClusterLogRequest {
    /// `CLUSTERLOG ON|OFF|TOGGLE|INFO [severity ...]`.
    pub fn severities(action: ClusterLogAction, severities: Vec<Severity>) -> ClusterLogRequest {
        ClusterLogRequest {
            action,
            severities,
            nodes: Vec::new(),
            category: EventCategory::Info,
            threshold: 0,
        }
    }
}

/// What the cluster log writes: whether it is on, the severities on, and
/// each configured node's threshold per category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterLogFilter {
    pub enabled: bool,
    pub severities: Vec<Severity>,
    pub thresholds: Vec<EventThreshold>,
}

/// A connection to a management server.
pub struct MgmClient {
    address: String,
    stream: TcpStream,
    reader: FrameReader,
    /// Signals that came while waiting for an answer, for the session reader.
    unsolicited: VecDeque<Signal>,
    own: BlockRef,
    server: BlockRef,
    node_id: Option<NodeId>,
    request_timeout: Duration,
}

impl MgmClient {
    /// Connects to `connect_string` (`host:port`; `host` alone means port 1186).
    pub fn connect(connect_string: &str, timeout: Duration) -> Result<MgmClient, MgmError> {
        let address = if connect_string.contains(':') {
            connect_string.to_owned()
        } else {
            format!("{connect_string}:{PORT_DEFAULT}")
        };
        let refuse = |reason: String| MgmError::Connect {
            address: address.clone(),
            reason,
        };
        let candidates = address
            .to_socket_addrs()
            .map_err(|e| refuse(format!("cannot resolve the address: {e}")))?;
        let mut last_error = None;
        let mut connected = None;
        for candidate in candidates {
            match TcpStream::connect_timeout(&candidate, timeout) {
                Ok(stream) => {
                    connected = Some(stream);
                    break;
                }
                Err(error) => last_error = Some(error),
            }
        }
        let Some(stream) = connected else {
            return Err(refuse(last_error.map_or_else(
                || "the name resolves to no address".to_owned(),
                |e| connect_reason(&e, timeout),
            )));
        };
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_write_timeout(Some(timeout.max(Duration::from_secs(1)))))
            .map_err(|e| refuse(e.to_string()))?;
        let placeholder = BlockRef::new(PLACEHOLDER_NODE, BlockNumber::PROCESS, 0);
        Ok(MgmClient {
            address,
            stream,
            reader: FrameReader::new(),
            unsolicited: VecDeque::new(),
            own: placeholder,
            server: BlockRef::new(PLACEHOLDER_NODE, BlockNumber::MANAGEMENT, 0),
            node_id: None,
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_DEFAULT_MS),
        })
    }

    /// `host:port` of the management server.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The node id this connection holds, after `alloc_node_id`.
    pub fn node_id(&self) -> Option<NodeId> {
        self.node_id
    }

    pub fn set_request_timeout(&mut self, timeout: Duration) {
        assert!(!timeout.is_zero());
        self.request_timeout = timeout;
    }

    /// Every configured node and its state, in node id order.
    pub fn show(&mut self) -> Result<Vec<NodeStatusEntry>, MgmError> {
        match self.request(SignalBody::MgmShowReq {}, "show", |b| {
            matches!(b, SignalBody::MgmShowConf { .. })
        })? {
            SignalBody::MgmShowConf { nodes } => Ok(nodes),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The rows of ndbinfo table `table` from every data node that answers
    /// the mgmd in time (`skarv admin report`), ordered by node; each row's
    /// first column is its node. Empty when no data node answered.
    pub fn dbinfo(&mut self, table: &str) -> Result<Vec<DbinfoRow>, MgmError> {
        let request = SignalBody::DbinfoScanReq {
            request_id: 1,
            table: table.to_owned(),
        };
        match self.request(request, "ndbinfo scan", |b| {
            matches!(
                b,
                SignalBody::DbinfoScanConf { .. } | SignalBody::DbinfoScanRef { .. }
            )
        })? {
            SignalBody::DbinfoScanConf { rows, .. } => Ok(rows),
            SignalBody::DbinfoScanRef { message, .. } => Err(MgmError::Refused { message }),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Stops (or restarts) data node `node`, or all when `None`; returns the
    /// nodes that were ordered. Without `force`, the mgmd refuses to stop
    /// the only started node of a node group.
    pub fn stop(
        &mut self,
        node: Option<NodeId>,
        restart: bool,
        force: bool,
    ) -> Result<Vec<NodeId>, MgmError> {
        let request = SignalBody::MgmStopReq {
            node,
            restart,
            force,
        };
        let what = if restart { "restart" } else { "stop" };
        match self.request(request, what, is_stop_answer)? {
            SignalBody::MgmStopConf { nodes } => Ok(nodes),
            SignalBody::MgmStopRef { message } => Err(MgmError::Refused { message }),
            other => Err(self.unexpected(&other)),
        }
    }

    /// NDB's `CLUSTERLOG` verbs: changes what the cluster log writes as
    /// `request` says, and returns the filter then.
    pub fn cluster_log(
        &mut self,
        request: ClusterLogRequest,
    ) -> Result<ClusterLogFilter, MgmError> {
        let body = SignalBody::MgmClusterLogReq {
            action: request.action,
            severities: request.severities,
            nodes: request.nodes,
            category: request.category,
            threshold: request.threshold,
        };
        match self.request(body, "clusterlog", |b| {
            matches!(
                b,
                SignalBody::MgmClusterLogConf { .. } | SignalBody::MgmClusterLogRef { .. }
            )
        })? {
            SignalBody::MgmClusterLogConf {
                enabled,
                severities,
                thresholds,
            } => Ok(ClusterLogFilter {
                enabled,
                severities,
                thresholds,
            }),
            SignalBody::MgmClusterLogRef { message } => Err(MgmError::Refused { message }),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Stops every data node and then the management server; returns when
    /// the server has closed the connection.
    pub fn shutdown(&mut self) -> Result<(), MgmError> {
        match self.request(SignalBody::MgmShutdownReq {}, "shutdown", is_stop_answer)? {
            SignalBody::MgmStopConf { .. } => {}
            SignalBody::MgmStopRef { message } => return Err(MgmError::Refused { message }),
            other => return Err(self.unexpected(&other)),
        }
        let timeout = Duration::from_millis(SHUTDOWN_WAIT_MS) + self.request_timeout;
        match self.receive_until(Instant::now() + timeout, "shutdown", timeout, |_| false) {
            Err(MgmError::Closed { .. }) => Ok(()),
            // A reset is as good a sign of the server's end as a close.
            Err(MgmError::Io { source, .. })
                if matches!(
                    source.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
            Ok(other) => Err(self.unexpected(&other)),
        }
    }

    /// Asks for a node id (`requested`, or the lowest free one of `node_type`).
    /// On success this connection is the node's session.
    pub fn alloc_node_id(
        &mut self,
        requested: Option<NodeId>,
        node_type: NodeType,
        pid: u32,
    ) -> Result<Allocation, MgmError> {
        let request = SignalBody::MgmAllocNodeIdReq {
            requested,
            node_type,
            version: signal::VERSION,
            pid,
            hostname: hostname(),
        };
        match self.request(request, "node id allocation", |b| {
            matches!(
                b,
                SignalBody::MgmAllocNodeIdConf { .. } | SignalBody::MgmAllocNodeIdRef { .. }
            )
        })? {
            SignalBody::MgmAllocNodeIdConf {
                node_id,
                config_ini,
                config_name,
            } => {
                if requested.is_some_and(|r| r != node_id) {
                    return Err(MgmError::Protocol {
                        address: self.address.clone(),
                        message: format!("asked for node id {requested:?}, granted {node_id}"),
                    });
                }
                self.node_id = Some(node_id);
                self.own = BlockRef::new(node_id, BlockNumber::PROCESS, 0);
                Ok(Allocation {
                    node_id,
                    config_ini,
                    config_name,
                })
            }
            SignalBody::MgmAllocNodeIdRef { message } => Err(MgmError::Refused { message }),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Splits the connection: the writer may move to another thread.
    pub fn into_session(self) -> (SessionWriter, SessionReader) {
        let stream = Arc::new(SessionStream {
            address: self.address,
            stream: self.stream,
            write_lock: Mutex::new(()),
        });
        // A reader blocks for as long as it takes; `recv` also survives a
        // timeout left over from a request, so a failure here is harmless.
        let _ = stream.stream.set_read_timeout(None);
        let writer = SessionWriter {
            stream: Arc::clone(&stream),
            own: self.own,
            server: self.server,
        };
        let reader = SessionReader {
            stream,
            reader: self.reader,
            unsolicited: self.unsolicited,
        };
        (writer, reader)
    }

    /// Sends `body` and waits for the answer that `is_answer` accepts.
    fn request(
        &mut self,
        body: SignalBody,
        what: &'static str,
        is_answer: fn(&SignalBody) -> bool,
    ) -> Result<SignalBody, MgmError> {
        let timeout = self.request_timeout;
        let signal = Signal {
            receiver: self.server,
            sender: self.own,
            body,
        };
        write_signal(&mut &self.stream, &signal).map_err(|e| write_error(&self.address, e))?;
        self.receive_until(Instant::now() + timeout, what, timeout, is_answer)
    }

    fn receive_until(
        &mut self,
        deadline: Instant,
        what: &'static str,
        timeout: Duration,
        is_answer: impl Fn(&SignalBody) -> bool,
    ) -> Result<SignalBody, MgmError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timed_out = || MgmError::Timeout {
                address: self.address.clone(),
                request: what,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            };
            if left.is_zero() {
                return Err(self.give_up(timed_out()));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|source| MgmError::Io {
                    address: self.address.clone(),
                    source,
                })?;
            let signal = match self.reader.next_signal(&mut &self.stream) {
                Ok(signal) => signal,
                Err(error) if error.is_timeout() => return Err(self.give_up(timed_out())),
                Err(error) => return Err(read_error(&self.address, error)),
            };
            if is_answer(&signal.body) {
                self.server = signal.sender;
                return Ok(signal.body);
            }
            if self.unsolicited.len() == UNSOLICITED_SIGNALS_MAX {
                return Err(self.unexpected(&signal.body));
            }
            self.unsolicited.push_back(signal);
        }
    }

    /// After a timeout the late answer would be taken for the next one:
    /// close the connection so nothing more is read from it.
    fn give_up(&mut self, error: MgmError) -> MgmError {
        let _ = self.stream.shutdown(Shutdown::Both);
        error
    }

    fn unexpected(&self, body: &SignalBody) -> MgmError {
        MgmError::Protocol {
            address: self.address.clone(),
            message: format!("unexpected {}", body.name()),
        }
    }
}

fn is_stop_answer(body: &SignalBody) -> bool {
    matches!(
        body,
        SignalBody::MgmStopConf { .. } | SignalBody::MgmStopRef { .. }
    )
}

fn connect_reason(error: &io::Error, timeout: Duration) -> String {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        _ => error.to_string(),
    }
}

fn read_error(address: &str, error: ReadError) -> MgmError {
    let address = address.to_owned();
    match error {
        ReadError::Closed => MgmError::Closed { address },
        ReadError::Io(source) => MgmError::Io { address, source },
        ReadError::Decode(source) => MgmError::Decode { address, source },
        ReadError::LocalOnly(name) => MgmError::Protocol {
            address,
            message: format!("signal {name} may not come from the network"),
        },
    }
}

fn write_error(address: &str, error: WriteError) -> MgmError {
    match error {
        WriteError::Encode(error) => MgmError::Encode(error),
        WriteError::Io(source) => MgmError::Io {
            address: address.to_owned(),
            source,
        },
    }
}

/// This machine's name, for the management server's log; empty if unknown.
fn hostname() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the pointer and length describe `buffer`, which outlives the call.
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if rc != 0 {
        return String::new();
    }
    let len = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..len]).into_owned()
}

struct SessionStream {
    address: String,
    stream: TcpStream,
    /// Whole frames only, whichever clone of the writer sends.
    write_lock: Mutex<()>,
}

/// The sending half of a node's session. Clones share the connection.
#[derive(Clone)]
pub struct SessionWriter {
    stream: Arc<SessionStream>,
    own: BlockRef,
    server: BlockRef,
}

impl SessionWriter {
    /// Sends one signal as it is (its sender must be this session's node).
    pub fn send(&mut self, signal: &Signal) -> Result<(), MgmError> {
        let _guard = self
            .stream
            .write_lock
            .lock()
            .expect("a session writer panicked while sending");
        write_signal(&mut &self.stream.stream, signal)
            .map_err(|e| write_error(&self.stream.address, e))
    }

    /// `body` addressed from this node to the management server.
    pub fn to_server(&self, body: SignalBody) -> Signal {
        Signal {
            receiver: self.server,
            sender: self.own,
            body,
        }
    }

    /// The node id of the session (the placeholder if none was allocated).
    pub fn node_id(&self) -> NodeId {
        self.own.node
    }

    /// Closes the connection: the server sees the session end, and a reader
    /// blocked in `recv` returns an error.
    pub fn close(&self) {
        let _ = self.stream.stream.shutdown(Shutdown::Both);
    }
}

/// The receiving half of a node's session.
pub struct SessionReader {
    stream: Arc<SessionStream>,
    reader: FrameReader,
    unsolicited: VecDeque<Signal>,
}

impl SessionReader {
    /// The next signal from the server; blocks. `Err` when the connection ends.
    pub fn recv(&mut self) -> Result<Signal, MgmError> {
        if let Some(signal) = self.unsolicited.pop_front() {
            return Ok(signal);
        }
        loop {
            match self.reader.next_signal(&mut &self.stream.stream) {
                Ok(signal) => return Ok(signal),
                Err(error) if error.is_timeout() => continue,
                Err(error) => return Err(read_error(&self.stream.address, error)),
            }
        }
    }
}
