//! Real processes, a real split: an mgmd and two data nodes in a network
//! namespace of their own, where routing rules cut the data nodes off from
//! each other (not from the mgmd). It is a tie (one node each side), so both
//! ask the arbitrator: one side goes on, the other shuts down and cannot
//! start on its own while the split lasts; when the network heals it joins
//! again. Never are both started apart.
//!
//! Needs root and `ip netns` (the namespace keeps the rules away from every
//! other process on the machine), so it is `#[ignore]`d: a plain `cargo
//! test` reports it ignored, never passed, where it cannot run. `.ci/run`
//! runs it with `--ignored` when it is root and says plainly when it is
//! not; run by hand, it fails if it cannot make its namespace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::wait_for;

const SKARV: &str = env!("CARGO_BIN_EXE_skarv");
/// Ports inside the private namespace: nothing else listens there.
const MGMD_PORT: u16 = 31_000;
const DATA_PORTS: [(u8, u16); 2] = [(2, 31_002), (3, 31_003)];
/// `ip rule` priorities of the cut, ahead of the local table (moved to 100).
const CUT_RULE_PREFS: [u32; 4] = [10, 11, 12, 13];

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A network namespace, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    /// Fails the test, with the reason, when this machine cannot make one
    /// (not root, no `ip`): whoever runs an ignored test asked for it.
    fn create() -> Netns {
        let name = format!("skarv-arbit-{}", std::process::id());
        let made = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap_or_else(|e| panic!("cannot run `ip netns add` (needs iproute2): {e}"));
        assert!(
            made.status.success(),
            "cannot create a network namespace (needs root): {}",
            text(&made)
        );
        let netns = Netns { name };
        // Loopback up, and the local table moved behind the rules of the cut.
        netns.ip(&["link", "set", "lo", "up"]);
        netns.ip(&["rule", "add", "pref", "100", "lookup", "local"]);
        netns.ip(&["rule", "del", "pref", "0"]);
        netns
    }

    fn exec(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name, program]);
        command
    }

    fn ip(&self, args: &[&str]) {
        let output = self.exec("ip").args(args).output().expect("run ip");
        assert!(output.status.success(), "ip {args:?}: {}", text(&output));
    }

    fn skarv(&self, args: &[&str]) -> Output {
        self.exec(SKARV).args(args).output().expect("run skarv")
    }

    fn spawn(&self, args: &[&str], log: &Path) -> Child {
        let file = std::fs::File::create(log).unwrap();
        self.exec(SKARV)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawn skarv")
    }

    /// Cuts TCP between the data nodes: every packet to or from a data
    /// node's server port is refused a route (their sessions with the mgmd
    /// use its port and stay up).
    fn cut_data_nodes(&self) {
        let mut prefs = CUT_RULE_PREFS.iter();
        for (_, port) in DATA_PORTS {
            for direction in ["dport", "sport"] {
                let pref = prefs.next().expect("a priority per rule").to_string();
                let port = port.to_string();
                self.ip(&[
                    "rule", "add", "ipproto", "tcp", direction, &port, "prohibit", "pref", &pref,
                ]);
            }
        }
    }

    fn heal(&self) {
        for pref in CUT_RULE_PREFS {
            self.ip(&["rule", "del", "pref", &pref.to_string()]);
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// The cluster's processes: stopped through the mgmd, then killed.
struct Processes<'a> {
    netns: &'a Netns,
    children: Vec<Child>,
}

impl Drop for Processes<'_> {
    fn drop(&mut self) {
        let connect = format!("127.0.0.1:{MGMD_PORT}");
        let _ = self
            .netns
            .skarv(&["admin", "--connect", &connect, "shutdown"]);
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The test's directory: half a GB of redo logs, removed when the test
/// passes (kept to look at when it fails).
struct ScratchDir(PathBuf);

impl std::ops::Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn scratch_dir() -> ScratchDir {
    let dir = std::env::temp_dir().join(format!("skarv-test-arbit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    ScratchDir(dir)
}

/// Data node id → (state, members) as the mgmd shows them.
fn data_nodes(netns: &Netns) -> Vec<(u64, String, Vec<u64>)> {
    let connect = format!("127.0.0.1:{MGMD_PORT}");
    let output = netns.skarv(&["admin", "--connect", &connect, "show", "--json"]);
    if !output.status.success() {
        return Vec::new();
    }
    let doc: Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    doc["nodes"]
        .as_array()
        .expect("a node list")
        .iter()
        .filter(|n| n["type"] == "data")
        .map(|n| {
            let members = n["members"].as_array().expect("members");
            (
                n["id"].as_u64().expect("an id"),
                n["state"].as_str().expect("a state").to_owned(),
                members
                    .iter()
                    .map(|m| m.as_u64().expect("a node id"))
                    .collect(),
            )
        })
        .collect()
}

fn started(nodes: &[(u64, String, Vec<u64>)]) -> Vec<u64> {
    nodes
        .iter()
        .filter(|(_, state, _)| state == "started")
        .map(|(id, _, _)| *id)
        .collect()
}

/// Everything the mgmd wrote to its data directory (the cluster log).
fn cluster_log(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir.join("mgmd")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            all.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    all
}

#[test]
#[ignore = "needs root and network namespaces: .ci/run runs it with --ignored as root"]
fn a_split_of_two_data_nodes_leaves_one_running_and_heals() {
    let netns = Netns::create();
    let dir = scratch_dir();
    let config = dir.join("config.ini");
    // The data nodes stand for two hosts: the cut's routing rules stop IP
    // only, so their link must not be a local socket (UseShm).
    let mut ini = format!(
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\nHeartbeatIntervalDbDb=100\nUseShm=0\n\
         NoOfFragmentLogFiles=3\nFragmentLogFileSize=4M\n\
         ArbitrationTimeout=2000\nStartPartialTimeout=1000\n\
         [ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={MGMD_PORT}\nDataDir={}/mgmd\n",
        dir.display()
    );
    for (id, port) in DATA_PORTS {
        ini.push_str(&format!(
            "[ndbd]\nNodeId={id}\nHostName=127.0.0.1\nServerPort={port}\nDataDir={}/n{id}\n",
            dir.display()
        ));
    }
    std::fs::write(&config, ini).unwrap();
    let connect = format!("127.0.0.1:{MGMD_PORT}");
    let mut processes = Processes {
        netns: &netns,
        children: Vec::new(),
    };
    processes.children.push(netns.spawn(
        &["mgmd", "--config-file", config.to_str().unwrap()],
        &dir.join("mgmd.log"),
    ));
    for (id, _) in DATA_PORTS {
        let id = id.to_string();
        processes.children.push(netns.spawn(
            &["data", "--connect", &connect, "--node-id", &id],
            &dir.join(format!("node{id}.log")),
        ));
    }
    wait_for("both data nodes started", Duration::from_secs(30), || {
        started(&data_nodes(&netns)) == vec![2, 3]
    });

    netns.cut_data_nodes();
    // Both sides notice within a few heartbeats and ask; one wins, the
    // other is refused and restarts.
    wait_for("one side to win the split", Duration::from_secs(20), || {
        let nodes = data_nodes(&netns);
        started(&nodes).len() == 1 && cluster_log(&dir).contains("arbitration refused")
    });
    let nodes = data_nodes(&netns);
    let winner = started(&nodes)[0];
    let loser = if winner == 2 { 3 } else { 2 };
    let (_, _, members) = nodes.iter().find(|(id, _, _)| *id == winner).unwrap();
    assert_eq!(members, &vec![winner], "{nodes:?}");
    let log = cluster_log(&dir);
    assert!(
        log.contains(&format!("arbitration won by node {winner}")),
        "{log}"
    );
    assert!(
        log.contains(&format!("arbitration refused to node {loser}")),
        "{log}"
    );
    // However long the split lasts, the loser (half of the data nodes) does
    // not start a cluster of its own.
    let hold = Instant::now();
    while hold.elapsed() < Duration::from_secs(5) {
        let nodes = data_nodes(&netns);
        assert!(started(&nodes).len() <= 1, "two sides running: {nodes:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(started(&data_nodes(&netns)), vec![winner]);

    netns.heal();
    wait_for("the loser to rejoin", Duration::from_secs(30), || {
        let nodes = data_nodes(&netns);
        started(&nodes) == vec![2, 3] && nodes.iter().all(|(_, _, members)| members.len() == 2)
    });
}
