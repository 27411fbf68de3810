//! The client's count of cluster failures (NDB's cluster failure event:
//! the last data node serving transactions went down) against a real
//! management server and two data node stand-ins on loopback that answer
//! the hello and registrations, with a `started` flag the test sets.
//!
//! The case that once went uncounted: in a whole-cluster crash the node
//! killed first is restarted, and the client connected to it again (the
//! node still starting), before the close of the last node is read. No
//! moment then has no connection, yet the cluster went down.

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mgmd::MgmServer;
use signal::{encode_frame, BlockNumber, BlockRef, NodeBitmask, NodeId, Signal};
use signal::{SignalBody, VERSION};
use skarv_client::{Cluster, ClusterOptions};

mod standin;
use standin::{read_frame, start_mgmd};

/// Longest a condition the test waits for may take; only a failing run
/// waits this long.
const WAIT_MAX: Duration = Duration::from_secs(10);
/// The stand-ins' heartbeat interval for their API nodes, in ms: longer
/// than the test.
const HEARTBEAT_MS: u32 = 600_000;

/// One data node stand-in.
struct StandIn {
    id: NodeId,
    port: u16,
    /// What its registration answers say.
    started: AtomicBool,
    /// Connections accepted, and registrations answered.
    accepted: AtomicU64,
    registrations: AtomicU64,
    /// The current connection, for the test to close.
    current: Mutex<Option<TcpStream>>,
    /// Where the last registration came from.
    client: Mutex<Option<BlockRef>>,
}

impl StandIn {
    fn start(id: u8) -> Arc<StandIn> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let node = Arc::new(StandIn {
            id: NodeId::new(id).expect("node id"),
            port: listener.local_addr().expect("addr").port(),
            started: AtomicBool::new(true),
            accepted: AtomicU64::new(0),
            registrations: AtomicU64::new(0),
            current: Mutex::new(None),
            client: Mutex::new(None),
        });
        let serving = Arc::clone(&node);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                *serving.current.lock().expect("not poisoned") =
                    Some(stream.try_clone().expect("clone"));
                serving.accepted.fetch_add(1, Ordering::SeqCst);
                let node = Arc::clone(&serving);
                std::thread::spawn(move || node.serve(stream));
            }
        });
        node
    }

    /// Closes the current connection, as a killed process's kernel does.
    fn crash(&self) {
        let current = self.current.lock().expect("not poisoned").take();
        current
            .expect("a connection")
            .shutdown(Shutdown::Both)
            .expect("shutdown");
    }

    /// Sends the client a registration answer and closes the connection
    /// at once, as a data node killed right after it told its clients of a
    /// new view does: the bytes and the close reach the client together.
    fn crash_after_sending(&self) {
        let client = self
            .client
            .lock()
            .expect("not poisoned")
            .expect("registered");
        let mut current = self.current.lock().expect("not poisoned").take();
        let stream = current.as_mut().expect("a connection");
        let mut out = Vec::new();
        let answer = Signal {
            receiver: client,
            sender: BlockRef::new(self.id, BlockNumber::PROCESS, 0),
            body: self.registration(),
        };
        encode_frame(&[answer], &mut out).expect("encodes");
        stream.write_all(&out).expect("write");
        stream.shutdown(Shutdown::Both).expect("shutdown");
    }

    fn registration(&self) -> SignalBody {
        SignalBody::ApiRegConf {
            version: VERSION,
            started: self.started.load(Ordering::SeqCst),
            view_id: 0,
            members: NodeBitmask::new(),
            heartbeat_interval_ms: HEARTBEAT_MS,
        }
    }

    fn serve(&self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        let mut out = Vec::new();
        while let Some(signals) = read_frame(&mut stream, &mut buffer) {
            for signal in signals {
                let body = match signal.body {
                    SignalBody::TransportHello { from, .. } => SignalBody::TransportHello {
                        from: self.id,
                        to: from,
                        version: VERSION,
                    },
                    SignalBody::ApiRegReq { .. } => {
                        *self.client.lock().expect("not poisoned") = Some(signal.sender);
                        self.registration()
                    }
                    _ => continue,
                };
                let registration = matches!(body, SignalBody::ApiRegConf { .. });
                let reply = Signal {
                    receiver: signal.sender,
                    sender: BlockRef::new(self.id, BlockNumber::PROCESS, 0),
                    body,
                };
                out.clear();
                encode_frame(&[reply], &mut out).expect("encodes");
                if stream.write_all(&out).is_err() {
                    return;
                }
                if registration {
                    self.registrations.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }
}

/// Waits until `done` holds; panics with `what` after `WAIT_MAX`.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT_MAX, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Setup {
    _server: MgmServer,
    connect: String,
    dir: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn setup(nodes: &[Arc<StandIn>]) -> Setup {
    // Tests run at once in one process: each its own directory.
    let dir = std::env::temp_dir().join(format!(
        "skarv-client-failure-{}-{}",
        std::process::id(),
        nodes[0].port
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut config = format!(
        "[ndbd default]\nNoOfReplicas={}\nDataMemory=64M\n\n[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nDataDir={}\n\n",
        nodes.len(),
        dir.display()
    );
    for node in nodes {
        config += &format!(
            "[ndbd]\nNodeId={}\nHostName=127.0.0.1\nServerPort={}\nDataDir={}/{}\n\n",
            node.id,
            node.port,
            dir.display(),
            node.id
        );
    }
    config += "[api]\nNodeId=10\n";
    let server = start_mgmd(&dir, &config);
    Setup {
        connect: server.local_addr().to_string(),
        _server: server,
        dir,
    }
}

#[test]
fn a_whole_cluster_crash_counts_once_though_a_restarted_node_reconnected_first() {
    let (a, b) = (StandIn::start(2), StandIn::start(3));
    let setup = setup(&[Arc::clone(&a), Arc::clone(&b)]);
    let options = ClusterOptions {
        connect_timeout: WAIT_MAX,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&setup.connect, options).expect("connects");
    assert_eq!(cluster.wait_until_ready(WAIT_MAX), 2, "both nodes live");

    // Node A crashes, and is back (starting) before B crashes: a node
    // failure, B still serves.
    a.started.store(false, Ordering::SeqCst);
    a.crash();
    wait_for("the client registers with restarted node A", || {
        a.accepted.load(Ordering::SeqCst) == 2 && a.registrations.load(Ordering::SeqCst) >= 2
    });
    assert_eq!(
        cluster.live_nodes(),
        vec![b.id],
        "A is connected, not started"
    );
    assert_eq!(
        cluster.stats().cluster_failures,
        0,
        "one node of two went down: no cluster failure"
    );

    // The last started node crashes: the cluster failed, though A's
    // connection stayed up.
    b.started.store(false, Ordering::SeqCst);
    b.crash();
    wait_for("the client counts the cluster failure", || {
        cluster.stats().cluster_failures >= 1
    });
    wait_for("the client registers with restarted node B", || {
        b.accepted.load(Ordering::SeqCst) == 2 && b.registrations.load(Ordering::SeqCst) >= 2
    });
    assert_eq!(cluster.stats().cluster_failures, 1, "counted once");
    assert!(cluster.live_nodes().is_empty());
}

/// A close that reaches the client together with the node's last bytes is
/// seen at once. The receive loop skipped the read after a short one (the
/// socket is empty; later bytes raise a new edge), but a close that came
/// with the bytes raises no edge of its own: the client kept the dead node
/// connected, and its transactions waiting, until the heartbeat gave up.
#[test]
fn a_close_right_behind_the_last_bytes_is_seen() {
    let node = StandIn::start(2);
    let setup = setup(&[Arc::clone(&node)]);
    let options = ClusterOptions {
        connect_timeout: WAIT_MAX,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&setup.connect, options).expect("connects");
    assert_eq!(cluster.wait_until_ready(WAIT_MAX), 1, "the node is live");
    wait_for("the node answered a registration", || {
        node.client.lock().expect("not poisoned").is_some()
    });
    // Several times: each close must be seen, whenever the client's
    // receiving finds the bytes and the close.
    for round in 1..=5u64 {
        node.crash_after_sending();
        wait_for("the client sees the close and connects again", || {
            node.accepted.load(Ordering::SeqCst) == round + 1
                && node.registrations.load(Ordering::SeqCst) > round
        });
        assert_eq!(
            cluster.wait_until_ready(WAIT_MAX),
            1,
            "round {round}: live again"
        );
    }
    assert_eq!(
        cluster.stats().cluster_failures,
        5,
        "each close of the only node counts"
    );
}
