//! The management server over real sockets on 127.0.0.1: node id
//! allocation, node states, stop and restart orders, heartbeats, the
//! cluster log, hostile input, and refusing a bad configuration.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use mgmd::{
    MgmClient, MgmError, MgmServer, ServerOptions, SessionReader, SessionWriter, CONNECTIONS_MAX,
    UNREGISTERED_IDLE_TIMEOUT_MS,
};
use signal::{
    BlockNumber, BlockRef, NodeBitmask, NodeId, NodeState, NodeStatusEntry, NodeType, Severity,
    SignalBody, NO_NODE_GROUP,
};

const TIMEOUT: Duration = Duration::from_secs(5);
/// Long enough that no test's session is failed for silence by accident.
const HEARTBEAT_SLOW_MS: u32 = 5_000;
/// NDB's smallest HeartbeatIntervalDbApi: failure after 4 × 100 ms.
const HEARTBEAT_FAST_MS: u32 = 100;

fn node(id: u8) -> NodeId {
    NodeId::new(id).expect("non-zero")
}

/// A directory of its own per test, removed at the end.
struct TestDir(PathBuf);

impl TestDir {
    fn new(name: &str) -> TestDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let unique = format!(
            "skarv-mgmd-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(unique);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("temp dir");
        TestDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// mgmd 1; data nodes 2 and 3 (one node group); api 7; mysqld 8.
fn config_text(dir: &Path, heartbeat_ms: u32) -> String {
    format!(
        "[ndbd default]\n\
         NoOfReplicas=2\n\
         DataMemory=64M\n\
         HeartbeatIntervalDbApi={heartbeat_ms}\n\
         \n\
         [ndb_mgmd]\n\
         NodeId=1\n\
         HostName=127.0.0.1\n\
         DataDir={dir}\n\
         \n\
         [ndbd]\n\
         NodeId=2\n\
         HostName=127.0.0.1\n\
         DataDir={dir}/2\n\
         \n\
         [ndbd]\n\
         NodeId=3\n\
         HostName=127.0.0.1\n\
         DataDir={dir}/3\n\
         \n\
         [api]\n\
         NodeId=7\n\
         \n\
         [mysqld]\n\
         NodeId=8\n",
        dir = dir.display()
    )
}

struct Cluster {
    dir: TestDir,
    config_path: PathBuf,
    server: MgmServer,
}

impl Cluster {
    fn start(name: &str, heartbeat_ms: u32) -> Cluster {
        let dir = TestDir::new(name);
        let config_path = dir.path().join("config.ini");
        fs::write(&config_path, config_text(dir.path(), heartbeat_ms)).expect("write config");
        let server = MgmServer::start(ServerOptions {
            config_path: config_path.clone(),
            port: Some(0),
            data_dir: Some(dir.path().join("mgmd")),
            node_id: None,
            metrics_port: None,
        })
        .expect("server starts");
        Cluster {
            dir,
            config_path,
            server,
        }
    }

    fn connect_string(&self) -> String {
        self.server.local_addr().to_string()
    }

    fn client(&self) -> MgmClient {
        MgmClient::connect(&self.connect_string(), TIMEOUT).expect("connects")
    }

    /// A data node session holding `id`.
    fn data_node(&self, id: u8, pid: u32) -> (SessionWriter, SessionReader) {
        let mut client = self.client();
        let allocation = client
            .alloc_node_id(Some(node(id)), NodeType::Data, pid)
            .expect("node id granted");
        assert_eq!(allocation.node_id, node(id));
        client.into_session()
    }

    fn entry(&self, id: u8) -> NodeStatusEntry {
        let nodes = self.client().show().expect("show");
        nodes
            .into_iter()
            .find(|n| n.node == node(id))
            .expect("configured node is listed")
    }

    fn wait_for_state(&self, id: u8, state: NodeState) -> NodeStatusEntry {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let entry = self.entry(id);
            if entry.state == state {
                return entry;
            }
            assert!(
                Instant::now() < deadline,
                "node {id} is {:?}, not {state:?}, after {TIMEOUT:?}",
                entry.state
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn cluster_log(&self) -> String {
        fs::read_to_string(self.server.cluster_log_path()).expect("cluster log exists")
    }

    fn wait_for_log_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let log = self.cluster_log();
            if let Some(line) = log.lines().find(|line| line.contains(needle)) {
                return line.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "no line with {needle:?} in the cluster log:\n{log}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn status_report(writer: &mut SessionWriter, state: NodeState, pid: u32) {
    let members: NodeBitmask = [node(2), node(3)].into_iter().collect();
    let report = writer.to_server(SignalBody::MgmNodeStatusRep {
        state,
        pid,
        version: signal::VERSION,
        view_id: 2,
        president: Some(node(2)),
        members,
    });
    writer.send(&report).expect("report sent");
}

fn refusal(result: Result<impl std::fmt::Debug, MgmError>) -> String {
    match result {
        Err(MgmError::Refused { message }) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn node_ids_are_granted_and_refused_with_reasons() {
    let cluster = Cluster::start("alloc", HEARTBEAT_SLOW_MS);
    let mut first = cluster.client();
    let allocation = first
        .alloc_node_id(Some(node(3)), NodeType::Data, 1003)
        .expect("3 is a free data node");
    assert_eq!(allocation.node_id, node(3));
    let written = fs::read_to_string(&cluster.config_path).expect("config");
    assert_eq!(allocation.config_ini, written, "configuration verbatim");
    assert_eq!(
        allocation.config_name,
        cluster.config_path.display().to_string()
    );
    assert_eq!(first.node_id(), Some(node(3)));

    let mut second = cluster.client();
    let allocation = second
        .alloc_node_id(None, NodeType::Data, 1002)
        .expect("2 is the lowest free data node");
    assert_eq!(allocation.node_id, node(2));

    let mut third = cluster.client();
    let message = refusal(third.alloc_node_id(Some(node(3)), NodeType::Data, 1004));
    assert_eq!(message, "node id 3 is already connected (pid 1003)");
    let message = refusal(third.alloc_node_id(Some(node(7)), NodeType::Data, 1004));
    assert_eq!(
        message,
        "node id 7 is not a data node in config.ini (it is an api node)"
    );
    let message = refusal(third.alloc_node_id(None, NodeType::Data, 1004));
    assert!(message.starts_with("no free data node id"), "{message}");
    let message = refusal(third.alloc_node_id(Some(node(2)), NodeType::Api, 1004));
    assert_eq!(
        message,
        "node id 2 is not an api node in config.ini (it is a data node)"
    );

    // API and mysqld slots are handed out the same way.
    let allocation = third
        .alloc_node_id(None, NodeType::Api, 1005)
        .expect("an api slot is free");
    assert_eq!(allocation.node_id, node(7));
    let message = refusal(third.alloc_node_id(None, NodeType::Api, 1005));
    assert_eq!(message, "this connection already holds node id 7");
    assert_eq!(cluster.entry(7).state, NodeState::Started);
    assert_eq!(cluster.entry(3).state, NodeState::Starting);
    // Show tells a [mysqld] slot from an [api] one, and where a
    // connected node connected from.
    assert_eq!(cluster.entry(7).address, "127.0.0.1");
    assert!(!cluster.entry(7).mysqld);
    assert!(cluster.entry(8).mysqld);
    assert_eq!(cluster.entry(8).address, "");
}

#[test]
fn show_lists_every_configured_node() {
    let cluster = Cluster::start("show", HEARTBEAT_SLOW_MS);
    let nodes = cluster.client().show().expect("show");
    let ids: Vec<u8> = nodes.iter().map(|n| n.node.get()).collect();
    assert_eq!(ids, vec![1, 2, 3, 7, 8]);

    let mgmd = &nodes[0];
    assert_eq!(mgmd.node_type, NodeType::Management);
    assert_eq!(mgmd.state, NodeState::Started);
    assert_eq!(mgmd.pid, std::process::id());
    assert_eq!(mgmd.version, signal::VERSION);
    assert_eq!(mgmd.host, "127.0.0.1");

    assert_eq!(nodes[1].node_type, NodeType::Data);
    assert_eq!(nodes[1].node_group, 0);
    assert_eq!(nodes[2].node_group, 0);
    assert_eq!(nodes[1].state, NodeState::NotConnected);
    assert_eq!(nodes[1].pid, 0);

    assert_eq!(nodes[3].node_type, NodeType::Api);
    assert_eq!(nodes[3].host, "", "any host may take the slot");
    assert_eq!(nodes[3].node_group, NO_NODE_GROUP);
    assert_eq!(nodes[4].node_type, NodeType::Api);
    assert_eq!(nodes[4].state, NodeState::NotConnected);
}

#[test]
fn status_report_makes_a_node_started() {
    let cluster = Cluster::start("report", HEARTBEAT_SLOW_MS);
    let (mut writer, _reader) = cluster.data_node(2, 4321);
    let entry = cluster.entry(2);
    assert_eq!(
        (entry.state, entry.pid, entry.start_count),
        (NodeState::Starting, 4321, 1)
    );
    status_report(&mut writer, NodeState::Started, 4321);
    let entry = cluster.wait_for_state(2, NodeState::Started);
    assert_eq!(entry.pid, 4321);
    assert_eq!(entry.version, signal::VERSION);
    assert_eq!(entry.view_id, 2);
    let members: Vec<u8> = entry.members.iter().map(|n| n.get()).collect();
    assert_eq!(members, vec![2, 3]);
    cluster.wait_for_log_line("Node 2: started");
}

#[test]
fn lost_session_is_failed_until_the_node_comes_back() {
    let cluster = Cluster::start("lost", HEARTBEAT_SLOW_MS);
    let (mut writer, reader) = cluster.data_node(2, 500);
    status_report(&mut writer, NodeState::Started, 500);
    cluster.wait_for_state(2, NodeState::Started);
    drop((writer, reader));
    let entry = cluster.wait_for_state(2, NodeState::Failed);
    assert_eq!(entry.pid, 0);
    let line = cluster.wait_for_log_line("Node 2: lost connection (process died?)");
    assert!(line.contains("[MgmtSrvr] ALERT    -- "), "{line}");

    let (_writer, _reader) = cluster.data_node(2, 501);
    let entry = cluster.entry(2);
    assert_eq!(
        (entry.state, entry.pid, entry.start_count),
        (NodeState::Starting, 501, 2)
    );
}

#[test]
fn stop_order_reaches_the_node_and_it_ends_not_connected() {
    let cluster = Cluster::start("stop", HEARTBEAT_SLOW_MS);
    let (mut writer, mut reader) = cluster.data_node(2, 600);
    status_report(&mut writer, NodeState::Started, 600);
    cluster.wait_for_state(2, NodeState::Started);

    let mut admin = cluster.client();
    // Node 3, its node group's other node, is not connected: node 2 is the
    // only started node of the group and is stopped only by force.
    let message = refusal(admin.stop(Some(node(2)), false, false));
    assert!(
        message.starts_with(
            "node 2 is the only started node of node group 0 (node 3 is not connected)"
        ),
        "{message}"
    );
    assert_eq!(
        admin.stop(Some(node(2)), false, true).expect("stop"),
        vec![node(2)]
    );
    let order = reader.recv().expect("stop order arrives");
    assert_eq!(order.body, SignalBody::MgmStopOrd { restart: false });
    assert_eq!(order.receiver.node, node(2));
    assert_eq!(cluster.entry(2).state, NodeState::Stopping);

    writer.close();
    cluster.wait_for_state(2, NodeState::NotConnected);
    cluster.wait_for_log_line("Node 2: stopped");
    assert!(!cluster.cluster_log().contains("Node 2: lost connection"));

    let message = refusal(admin.stop(Some(node(2)), false, false));
    assert!(message.starts_with("node 2 is not connected"), "{message}");
    let message = refusal(admin.stop(Some(node(7)), false, false));
    assert!(
        message.starts_with("node 7 is not a data node"),
        "{message}"
    );
    let message = refusal(admin.stop(Some(node(9)), true, false));
    assert!(
        message.starts_with("node 9 is not a data node"),
        "{message}"
    );
    assert_eq!(
        admin.stop(None, false, false).expect("stop all"),
        Vec::<NodeId>::new()
    );
}

#[test]
fn restart_order_keeps_the_node_restarting_until_it_connects() {
    let cluster = Cluster::start("restart", HEARTBEAT_SLOW_MS);
    let (mut writer2, mut reader2) = cluster.data_node(2, 700);
    let (mut writer3, mut reader3) = cluster.data_node(3, 701);
    status_report(&mut writer2, NodeState::Started, 700);
    status_report(&mut writer3, NodeState::Started, 701);
    cluster.wait_for_state(3, NodeState::Started);

    let ordered = cluster
        .client()
        .stop(None, true, false)
        .expect("restart all");
    assert_eq!(ordered, vec![node(2), node(3)]);
    for reader in [&mut reader2, &mut reader3] {
        let order = reader.recv().expect("restart order arrives");
        assert_eq!(order.body, SignalBody::MgmStopOrd { restart: true });
    }
    // The node's own report while it winds down does not hide the order.
    status_report(&mut writer2, NodeState::Started, 700);
    assert_eq!(cluster.entry(2).state, NodeState::Restarting);

    drop((writer2, reader2));
    drop((writer3, reader3));
    cluster.wait_for_log_line("Node 3: stopped for restart");
    assert_eq!(cluster.entry(2).state, NodeState::Restarting);
    assert_eq!(cluster.entry(3).state, NodeState::Restarting);

    let (_writer, _reader) = cluster.data_node(2, 702);
    let entry = cluster.entry(2);
    assert_eq!((entry.state, entry.start_count), (NodeState::Starting, 2));
}

#[test]
fn silent_data_node_is_declared_failed() {
    let cluster = Cluster::start("heartbeat", HEARTBEAT_FAST_MS);
    let (mut writer, mut reader) = cluster.data_node(2, 800);
    status_report(&mut writer, NodeState::Started, 800);
    // No more reports: after 4 × 100 ms the node is failed and its session closed.
    let entry = cluster.wait_for_state(2, NodeState::Failed);
    assert_eq!(entry.pid, 0);
    assert!(reader.recv().is_err(), "the server closed the session");
    let line = cluster.wait_for_log_line("Node 2: no status report for");
    assert!(line.contains("ALERT"), "{line}");

    // A node that keeps reporting stays.
    let (mut writer, _reader) = cluster.data_node(3, 801);
    for _ in 0..10 {
        status_report(&mut writer, NodeState::Started, 801);
        thread::sleep(Duration::from_millis(HEARTBEAT_FAST_MS.into()));
    }
    assert_eq!(cluster.entry(3).state, NodeState::Started);
}

#[test]
fn cluster_log_has_the_events_in_ndb_format() {
    let cluster = Cluster::start("log", HEARTBEAT_SLOW_MS);
    let (mut writer, _reader) = cluster.data_node(2, 900);
    let event = writer.to_server(SignalBody::MgmEventRep {
        severity: Severity::Warning,
        category: signal::EventCategory::Info,
        level: 7,
        text: "redo log part 0 is 90% full".to_owned(),
    });
    writer.send(&event).expect("event sent");
    let line = cluster.wait_for_log_line("Node 2: redo log part 0 is 90% full");
    // 2026-11-21 15:30:00 [MgmtSrvr] WARNING  -- Node 2: …
    let (time, rest) = line.split_at(19);
    assert!(
        time.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            10 => b == b' ',
            13 | 16 => b == b':',
            _ => b.is_ascii_digit(),
        }),
        "{line}"
    );
    assert_eq!(
        rest,
        " [MgmtSrvr] WARNING  -- Node 2: redo log part 0 is 90% full"
    );
    let log = cluster.cluster_log();
    let first = log.lines().next().expect("a first line");
    assert!(first.contains("INFO     -- Node 1: started"), "{first}");
    assert!(log.contains("Node 2: starting (pid 900"), "{log}");
    let expected = cluster.dir.path().join("mgmd").join("ndb_1_cluster.log");
    assert_eq!(cluster.server.cluster_log_path(), expected);
}

#[test]
fn garbage_and_forged_senders_close_only_their_connection() {
    let cluster = Cluster::start("garbage", HEARTBEAT_SLOW_MS);
    let mut raw = TcpStream::connect(cluster.server.local_addr()).expect("connects");
    raw.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    raw.write_all(b"GET / HTTP/1.1\r\nHost: mgmd\r\n\r\nmore bytes that are no frame")
        .expect("written");
    let mut buffer = [0u8; 64];
    let closed = matches!(raw.read(&mut buffer), Ok(0) | Err(_));
    assert!(closed, "the server closes a connection that sends garbage");

    // A session whose signals claim another sender is closed (and, having
    // had no stop order, is failed).
    let (mut writer, mut reader) = cluster.data_node(2, 1000);
    let mut forged = writer.to_server(SignalBody::MgmEventRep {
        severity: Severity::Info,
        category: signal::EventCategory::Info,
        level: 7,
        text: "I am node 3".to_owned(),
    });
    forged.sender = BlockRef::new(node(3), BlockNumber::PROCESS, 0);
    writer.send(&forged).expect("sent");
    assert!(reader.recv().is_err(), "the forging session is closed");
    cluster.wait_for_state(2, NodeState::Failed);
    assert!(!cluster.cluster_log().contains("I am node 3"));

    // Unregistered connections may not report status.
    let (mut writer, mut reader) = cluster.client().into_session();
    status_report(&mut writer, NodeState::Started, 1);
    assert!(reader.recv().is_err());

    // The server still serves.
    assert_eq!(cluster.client().show().expect("show").len(), 5);
}

#[test]
fn shutdown_stops_the_data_nodes_then_the_server() {
    let cluster = Cluster::start("shutdown", HEARTBEAT_SLOW_MS);
    let (mut writer, mut reader) = cluster.data_node(2, 1100);
    status_report(&mut writer, NodeState::Started, 1100);
    cluster.wait_for_state(2, NodeState::Started);
    // The data node does what data nodes do on a stop order: leave.
    let node_thread = thread::spawn(move || {
        let order = reader.recv().expect("stop order");
        writer.close();
        order.body
    });
    cluster.client().shutdown().expect("shutdown completes");
    assert_eq!(
        node_thread.join().expect("node thread"),
        SignalBody::MgmStopOrd { restart: false }
    );
    cluster.server.wait();
    let log = cluster.cluster_log();
    assert!(log.contains("Node 2: stopped"), "{log}");
    assert!(log.contains("Node 1: management server shut down"), "{log}");
    let refused = MgmClient::connect(&cluster.connect_string(), TIMEOUT);
    assert!(matches!(refused, Err(MgmError::Connect { .. })));
}

/// The process that owns the server (`skarv mgmd` on a signal, the
/// sandbox) stops it with `shutdown`: `wait` returns although a data node's
/// session is still open, returns again at once, and afterwards nothing
/// listens and the session is closed. Each wait is bounded, so a server
/// that never stops fails the test instead of hanging it.
#[test]
fn shutdown_by_the_owner_ends_wait() {
    let cluster = Cluster::start("owner", HEARTBEAT_SLOW_MS);
    let address = cluster.connect_string();
    let (_writer, mut reader) = cluster.data_node(2, 1200);
    let Cluster {
        dir: _dir, server, ..
    } = cluster;
    let server = std::sync::Arc::new(server);
    let waiting = {
        let server = std::sync::Arc::clone(&server);
        bounded(move || server.wait())
    };
    server.shutdown();
    waiting
        .recv_timeout(TIMEOUT)
        .expect("wait returns after the owner's shutdown");
    bounded(move || server.wait())
        .recv_timeout(TIMEOUT)
        .expect("a second wait returns at once");
    let refused = MgmClient::connect(&address, TIMEOUT);
    assert!(
        matches!(refused, Err(MgmError::Connect { .. })),
        "nothing listens after the shutdown: {:?}",
        refused.err()
    );
    let session_end = bounded(move || reader.recv().map(|signal| signal.body))
        .recv_timeout(TIMEOUT)
        .expect("the data node's session ends");
    assert!(
        session_end.is_err(),
        "the session is closed, not answered: {session_end:?}"
    );
}

/// Runs `work` on a thread of its own; its result comes on the channel, so
/// that the caller waits for it with a bound.
fn bounded<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> std::sync::mpsc::Receiver<T> {
    let (done, result) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(work());
    });
    result
}

#[test]
fn unreachable_server_is_named_in_the_error() {
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").port()
    };
    let address = format!("127.0.0.1:{port}");
    let error = MgmClient::connect(&address, TIMEOUT)
        .err()
        .expect("nothing listens there");
    assert_eq!(
        error.to_string(),
        format!("cannot reach the management server at {address}: connection refused")
    );
}

#[test]
fn port_in_use_is_named_in_the_error() {
    let cluster = Cluster::start("port", HEARTBEAT_SLOW_MS);
    let port = cluster.server.local_addr().port();
    let error = MgmServer::start(ServerOptions {
        config_path: cluster.config_path.clone(),
        port: Some(port),
        data_dir: Some(cluster.dir.path().join("other")),
        node_id: None,
        metrics_port: None,
    })
    .err()
    .expect("the port is taken");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("cannot listen on 127.0.0.1:{port}: ")),
        "{message}"
    );
}

#[test]
fn bad_config_refuses_to_start_with_file_and_line() {
    let dir = TestDir::new("bad-config");
    let config_path = dir.path().join("config.ini");
    let text = "[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n[ndbd]\nNodeId=two\n";
    fs::write(&config_path, text).expect("write config");
    let error = MgmServer::start(ServerOptions {
        config_path: config_path.clone(),
        port: Some(0),
        data_dir: Some(dir.path().to_owned()),
        node_id: None,
        metrics_port: None,
    })
    .err()
    .expect("a bad configuration is refused");
    let message = error.to_string();
    let expected = format!("{}:5", config_path.display());
    assert!(message.contains(&expected), "{message}");

    let missing = dir.path().join("missing.ini");
    let error = MgmServer::start(ServerOptions {
        config_path: missing.clone(),
        port: Some(0),
        data_dir: None,
        node_id: None,
        metrics_port: None,
    })
    .err()
    .expect("a missing file is refused");
    assert!(error.to_string().contains(&missing.display().to_string()));
}

#[test]
fn wrong_management_node_id_is_refused() {
    let dir = TestDir::new("wrong-id");
    let config_path = dir.path().join("config.ini");
    fs::write(&config_path, config_text(dir.path(), HEARTBEAT_SLOW_MS)).expect("write config");
    let error = MgmServer::start(ServerOptions {
        config_path: config_path.clone(),
        port: Some(0),
        data_dir: None,
        node_id: Some(node(2)),
        metrics_port: None,
    })
    .err()
    .expect("node 2 is a data node");
    assert_eq!(
        error.to_string(),
        format!(
            "node id 2 is not a management node in {}",
            config_path.display()
        )
    );
}

/// Connections that never ask anything are closed soon, and when they
/// fill every place a new one takes the place of the oldest: `skarv admin`
/// and the cluster's nodes always get in.
#[test]
fn a_flood_of_idle_connections_never_locks_out_admin_or_nodes() {
    /// How soon an idle connection must be closed (NDB-like 60 s was too late).
    const IDLE_CLOSED_WITHIN: Duration = Duration::from_secs(10);
    assert!(Duration::from_millis(UNREGISTERED_IDLE_TIMEOUT_MS) < IDLE_CLOSED_WITHIN);
    let cluster = Cluster::start("flood", HEARTBEAT_SLOW_MS);
    let addr = cluster.server.local_addr();
    let connect = || {
        let stream = TcpStream::connect(addr).expect("connects");
        stream
            .set_read_timeout(Some(IDLE_CLOSED_WITHIN))
            .expect("timeout");
        stream
    };
    // One idle connection is closed by the server after its idle timeout.
    let mut idle = connect();
    let opened = Instant::now();
    let mut buffer = [0u8; 16];
    assert!(
        matches!(idle.read(&mut buffer), Ok(0)),
        "an idle connection without a node id stays open past {IDLE_CLOSED_WITHIN:?}"
    );
    assert!(opened.elapsed() >= Duration::from_millis(UNREGISTERED_IDLE_TIMEOUT_MS / 2));

    // A data node holds a node id, then a flood fills every place.
    let (_writer, _reader) = cluster.data_node(2, 1000);
    let flood: Vec<TcpStream> = (0..CONNECTIONS_MAX).map(|_| connect()).collect();
    let started = Instant::now();
    assert_eq!(cluster.client().show().expect("show").len(), 5);
    let (_writer, _reader) = cluster.data_node(3, 1001);
    assert!(
        started.elapsed() < Duration::from_millis(UNREGISTERED_IDLE_TIMEOUT_MS),
        "got in only after {:?}, when the flood timed out",
        started.elapsed()
    );
    assert_eq!(cluster.entry(2).state, NodeState::Starting);
    drop(flood);
}
