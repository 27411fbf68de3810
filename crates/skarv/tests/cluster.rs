//! Real processes on loopback: a sandbox of two data nodes, one killed with
//! SIGKILL; the survivor reports it failed, the angel restarts it, and it is
//! `started` again. Also what a new user sees for a bad config.ini.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::walk;

const SKARV: &str = env!("CARGO_BIN_EXE_skarv");

fn skarv(args: &[&str]) -> Output {
    Command::new(SKARV).args(args).output().expect("run skarv")
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skarv-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Where this file's tests take their ports: `salt` picks a range of 500
/// each, so the tests of one run (which share a process id) stay apart;
/// all below Linux's ephemeral ports (see `common::free_base_port`).
const CLUSTER_PORTS: u16 = 21_000;
/// Ports of one test's range.
const CLUSTER_PORTS_PER_TEST: u16 = 500;

/// A base port with the next `count` ports free, in the range of `salt`.
fn free_base_port(count: u16, salt: u16) -> u16 {
    common::free_base_port(CLUSTER_PORTS + salt * CLUSTER_PORTS_PER_TEST, count)
}

fn show(connect: &str) -> Value {
    let output = skarv(&["admin", "--connect", connect, "show", "--json"]);
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)))
}

fn node(show: &Value, id: u64) -> Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("node {id} missing in {show}"))
        .clone()
}

fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Sandbox {
    dir: PathBuf,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = skarv(&["sandbox", "--stop", "--dir", self.dir.to_str().unwrap()]);
        // Half a GB of redo log each: kept only to look at a failure.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn cluster_log(dir: &Path) -> String {
    let mut all = String::new();
    for entry in walk(dir) {
        if entry.to_string_lossy().ends_with("_cluster.log") {
            all.push_str(&std::fs::read_to_string(&entry).unwrap_or_default());
        }
    }
    all
}

#[test]
fn a_killed_data_node_is_reported_failed_and_restarted_by_its_angel() {
    let dir = scratch_dir("sandbox");
    let base = free_base_port(8, 0);
    let base_text = base.to_string();
    let output = skarv(&[
        "sandbox",
        "--detach",
        "--dir",
        dir.to_str().unwrap(),
        "--base-port",
        &base_text,
        // About data nodes: sql_node.rs covers the SQL node.
        "--sql-nodes",
        "0",
    ]);
    let _sandbox = Sandbox { dir: dir.clone() };
    assert!(output.status.success(), "{}", text(&output));
    let connect = format!("127.0.0.1:{base}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&connect),
        "{}",
        text(&output)
    );

    let first = show(&connect);
    let nodes = first["nodes"].as_array().unwrap();
    assert_eq!(
        nodes.iter().filter(|n| n["type"] == "mgmd").count(),
        1,
        "{first}"
    );
    let data: Vec<&Value> = nodes.iter().filter(|n| n["type"] == "data").collect();
    assert_eq!(data.len(), 2, "{first}");
    for n in &data {
        assert_eq!(n["state"], "started", "{first}");
        assert!(n["pid"].as_u64().unwrap() > 0);
    }
    let victim = data[1]["id"].as_u64().unwrap();
    let survivor = data[0]["id"].as_u64().unwrap();
    let old_pid = data[1]["pid"].as_u64().unwrap();
    // The pid is the node process's own, not its angel's: it must be a child of another skarv.
    let status = std::fs::read_to_string(format!("/proc/{old_pid}/status")).unwrap();
    let parent: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let parent_cmd = std::fs::read_to_string(format!("/proc/{parent}/cmdline")).unwrap();
    assert!(
        parent_cmd.contains("data"),
        "the node's parent is its angel: {parent_cmd:?}"
    );
    assert!(!std::fs::read_to_string(format!("/proc/{old_pid}/cmdline"))
        .unwrap()
        .is_empty());

    // SAFETY: kill(2) on a pid this test just read from the cluster.
    assert_eq!(unsafe { libc::kill(old_pid as i32, libc::SIGKILL) }, 0);

    // The mgmd sees it fail; the survivor declares it failed.
    let mut states = Vec::new();
    wait_for(
        "the killed node to be reported",
        Duration::from_secs(10),
        || {
            let state = node(&show(&connect), victim)["state"]
                .as_str()
                .unwrap()
                .to_owned();
            if states.last() != Some(&state) {
                states.push(state.clone());
            }
            state != "started"
        },
    );
    wait_for(
        "the survivor to declare the node failed",
        Duration::from_secs(10),
        || cluster_log(&dir).contains(&format!("Node {survivor}: node {victim} declared failed")),
    );
    // The angel starts it again, as a new process, and it rejoins.
    wait_for(
        "the node to be started again",
        Duration::from_secs(60),
        || {
            let n = node(&show(&connect), victim);
            let state = n["state"].as_str().unwrap().to_owned();
            if states.last() != Some(&state) {
                states.push(state.clone());
            }
            state == "started" && n["pid"].as_u64().unwrap() != old_pid
        },
    );
    assert!(
        states.iter().any(|s| s == "failed"),
        "the node was never shown as failed: {states:?}"
    );
    let after = show(&connect);
    assert!(
        node(&after, victim)["start_count"].as_u64().unwrap() >= 2,
        "{after}"
    );
    assert_eq!(node(&after, survivor)["state"], "started");
    let log = cluster_log(&dir);
    assert!(log.contains("ALERT"), "{log}");

    let output = skarv(&["sandbox", "--stop", "--dir", dir.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output));
    let output = skarv(&["admin", "--connect", &connect, "show"]);
    assert!(
        !output.status.success(),
        "the mgmd is gone after --stop: {}",
        text(&output)
    );
}

#[test]
fn a_bad_config_is_refused_with_the_parameter_and_line() {
    let dir = scratch_dir("badconfig");
    let config = dir.join("config.ini");
    std::fs::write(
        &config,
        "[ndbd default]\nDataMemory=64M\nNoOfReplicas=banana\n\n[ndb_mgmd]\nHostName=127.0.0.1\n\n[ndbd]\nHostName=127.0.0.1\n",
    )
    .unwrap();
    let output = skarv(&[
        "mgmd",
        "--config-file",
        config.to_str().unwrap(),
        "--port",
        "0",
    ]);
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("NoOfReplicas"), "{stderr}");
    assert!(stderr.contains(":3:"), "the message names line 3: {stderr}");
}

/// Processes started by a test, stopped through the mgmd and then killed.
struct Processes {
    connect: String,
    children: Vec<std::process::Child>,
    /// Their scratch directory, removed after them unless the test failed.
    dir: PathBuf,
}

impl Drop for Processes {
    fn drop(&mut self) {
        let _ = skarv(&["admin", "--connect", &self.connect, "shutdown"]);
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn spawn_skarv(args: &[&str], log: &Path) -> std::process::Child {
    let file = std::fs::File::create(log).unwrap();
    Command::new(SKARV)
        .args(args)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn skarv")
}

/// A cluster of an mgmd and data nodes 2 and 3 (one node group of two
/// replicas, so either node alone holds all data), each a process of this test.
fn start_cluster(name: &str, salt: u16, defaults: &str) -> (PathBuf, String, Processes) {
    let dir = scratch_dir(name);
    let base = free_base_port(8, salt);
    let config = dir.join("config.ini");
    std::fs::write(
        &config,
        format!(
            "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\n{defaults}\
             NoOfFragmentLogFiles=3\nFragmentLogFileSize=4M\n\
             [ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={base}\nDataDir={dir}/mgmd\n\
             [ndbd]\nNodeId=2\nHostName=127.0.0.1\nServerPort={p2}\nDataDir={dir}/n2\n\
             [ndbd]\nNodeId=3\nHostName=127.0.0.1\nServerPort={p3}\nDataDir={dir}/n3\n",
            dir = dir.display(),
            p2 = base + 2,
            p3 = base + 3,
        ),
    )
    .unwrap();
    let connect = format!("127.0.0.1:{base}");
    let mut processes = Processes {
        connect: connect.clone(),
        children: Vec::new(),
        dir: dir.clone(),
    };
    processes.children.push(spawn_skarv(
        &["mgmd", "--config-file", config.to_str().unwrap()],
        &dir.join("mgmd.log"),
    ));
    for id in ["2", "3"] {
        processes.children.push(spawn_skarv(
            &["data", "--connect", &connect, "--node-id", id],
            &dir.join(format!("node{id}.log")),
        ));
    }
    wait_for_started(&connect, Duration::from_secs(30));
    (dir, connect, processes)
}

fn wait_for_started(connect: &str, limit: Duration) {
    wait_for("both data nodes started", limit, || {
        let output = skarv(&["admin", "--connect", connect, "show", "--json"]);
        output.status.success() && {
            let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
            [2, 3]
                .iter()
                .all(|id| node(&doc, *id)["state"] == "started")
        }
    });
}

#[test]
fn with_stop_on_error_a_killed_data_node_stays_down() {
    let (dir, connect, mut processes) = start_cluster("stoponerror", 1, "StopOnError=1\n");
    let pid = node(&show(&connect), 3)["pid"].as_u64().unwrap();
    // SAFETY: kill(2) on a pid this test just read from the cluster.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    wait_for("node 3 reported failed", Duration::from_secs(10), || {
        node(&show(&connect), 3)["state"] == "failed"
    });
    // Its angel gives up: node 3's angel process ends, with a message.
    let angel = &mut processes.children[2];
    wait_for("the angel to exit", Duration::from_secs(10), || {
        angel.try_wait().unwrap().is_some()
    });
    assert!(!angel.try_wait().unwrap().unwrap().success());
    let log = std::fs::read_to_string(dir.join("node3.log")).unwrap();
    assert!(log.contains("StopOnError=1"), "{log}");
    // Only its angel could start node 3 again, and the angel has exited:
    // no waiting is needed to know it stays down. What the mgmd shows must
    // agree, and no process has taken node 3's id since.
    let after = show(&connect);
    assert_eq!(node(&after, 3)["state"], "failed", "{after}");
    assert!(
        node(&after, 3)["pid"].as_u64().is_none_or(|p| p == pid),
        "node 3 came back as another process: {after}"
    );
    assert_eq!(node(&after, 2)["state"], "started", "{after}");
}

#[test]
fn data_nodes_register_again_with_a_restarted_mgmd() {
    let (dir, connect, mut processes) = start_cluster("mgmdrestart", 2, "");
    let pids: Vec<u64> = [2, 3]
        .iter()
        .map(|id| node(&show(&connect), *id)["pid"].as_u64().unwrap())
        .collect();
    let mgmd = &mut processes.children[0];
    mgmd.kill().unwrap();
    mgmd.wait().unwrap();
    let config = dir.join("config.ini");
    processes.children[0] = spawn_skarv(
        &["mgmd", "--config-file", config.to_str().unwrap()],
        &dir.join("mgmd-again.log"),
    );
    wait_for_started(&connect, Duration::from_secs(30));
    let after = show(&connect);
    // The same processes: they ran on without the mgmd and came back to it.
    for (id, pid) in [2, 3].iter().zip(pids) {
        assert_eq!(node(&after, *id)["pid"].as_u64().unwrap(), pid, "{after}");
    }
}
