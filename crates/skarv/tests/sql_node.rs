//! The SQL node's place in the cluster: API slots taken by node id, the
//! sandbox's SQL node started (or its failure told) and stopped, and
//! `skarv admin show` listing `[mysqld]` slots as ndb_mgm does.

mod common;

use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value as Json;
use skarv_client::{Cluster, ClusterOptions};

use common::{free_base_port, skarv, text, Sandbox};

fn node_id(id: u8) -> Option<signal::NodeId> {
    signal::NodeId::new(id)
}

/// `node`'s entry in a `show --json` document.
fn entry(show: &Json, node: u64) -> Json {
    show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == node)
        .unwrap_or_else(|| panic!("no node {node} in {show}"))
        .clone()
}

#[test]
fn a_client_takes_the_api_slot_it_names_and_no_other() {
    // Data nodes 2 and 3, API slots 4 to 7 (no SQL node).
    let sandbox = Sandbox::start("sql-node-ids", 30_000);
    let options = |id: u8| ClusterOptions {
        node_id: node_id(id),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&sandbox.connect, options(6)).expect("slot 6 is free");
    assert_eq!(cluster.node_id().get(), 6);
    let show = sandbox.show();
    let six = entry(&show, 6);
    assert_eq!(six["state"], "started", "{show}");
    assert_eq!(six["address"], "127.0.0.1", "{show}");
    assert_eq!(six["mysqld"], false, "{show}");
    assert_eq!(entry(&show, 5)["address"], Json::Null, "{show}");

    let taken = Cluster::connect_with(&sandbox.connect, options(6))
        .err()
        .expect("slot 6 is taken");
    assert!(
        taken.to_string().contains("node id 6 is already connected"),
        "{taken}"
    );
    let data = Cluster::connect_with(&sandbox.connect, options(2))
        .err()
        .expect("node 2 is a data node");
    assert!(
        data.to_string()
            .contains("node id 2 is not an api node in config.ini (it is a data node)"),
        "{data}"
    );
    let unconfigured = Cluster::connect_with(&sandbox.connect, options(200))
        .err()
        .expect("node 200 is not configured");
    assert!(
        unconfigured.to_string().contains("it is not configured"),
        "{unconfigured}"
    );
    drop(cluster);
}

/// Stops the sandbox in `dir` when the test ends, passed or not.
struct StopOnDrop(PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let dir = self.0.to_str().unwrap_or_default().to_owned();
        let _ = skarv(&["sandbox", "--stop", "--dir", &dir]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Holds before and after the SQL node's protocol works: either the
/// sandbox starts its SQL node, lists it and stops it, or it fails at once
/// naming the SQL node and its log, leaving nothing running.
#[test]
fn the_sandbox_starts_its_sql_node_or_says_why() {
    let dir = std::env::temp_dir().join(format!("skarv-sql-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _stop = StopOnDrop(dir.clone());
    let base = free_base_port(29_500, 10);
    let dir_text = dir.to_str().expect("a UTF-8 temp dir").to_owned();
    let base_text = base.to_string();
    // One data node (node 2); the SQL node is node 3, on base + 3.
    let started = skarv(&[
        "sandbox",
        "--detach",
        "--dir",
        &dir_text,
        "--data-nodes",
        "1",
        "--replicas",
        "1",
        "--base-port",
        &base_text,
    ]);
    let connect = format!("127.0.0.1:{base}");
    let sql_port = base + 3;
    if !started.status.success() {
        let stderr = String::from_utf8_lossy(&started.stderr);
        assert!(
            stderr.contains("SQL node 3 exited")
                && stderr.contains("sql3.log")
                && stderr.contains("--sql-nodes 0"),
            "{}",
            text(&started)
        );
        let show = skarv(&["admin", "--connect", &connect, "show"]);
        assert!(
            !show.status.success(),
            "a failed sandbox stops everything: {}",
            text(&show)
        );
        return;
    }
    let stdout = String::from_utf8_lossy(&started.stdout);
    assert!(
        stdout.contains(&format!("mysql -h 127.0.0.1 -P {sql_port} -u root")),
        "{}",
        text(&started)
    );
    TcpStream::connect_timeout(&([127, 0, 0, 1], sql_port).into(), Duration::from_secs(5))
        .expect("the SQL node accepts connections");
    let record: Json =
        serde_json::from_slice(&std::fs::read(dir.join("sandbox.json")).expect("sandbox.json"))
            .expect("sandbox.json is JSON");
    assert_eq!(
        record["sql_ports"],
        serde_json::json!([sql_port]),
        "{record}"
    );
    let sql_pid = record["sql_node_pids"][0].as_u64().expect("a SQL node pid");

    let show = skarv(&["admin", "--connect", &connect, "show"]);
    let listing = String::from_utf8_lossy(&show.stdout);
    // The SQL node's cluster connections: a [mysqld] slot each (the
    // sandbox gives it at most 8).
    let pool = sql::connection_pool_default(sql::MAX_CONNECTIONS_DEFAULT).min(8);
    assert!(
        listing.contains(&format!("[mysqld(API)]  {pool} node(s), {pool} connected"))
            && listing.contains("id=3  @127.0.0.1"),
        "{}",
        text(&show)
    );
    let json = skarv(&["admin", "--connect", &connect, "show", "--json"]);
    let document: Json = serde_json::from_slice(&json.stdout).expect("JSON");
    let sql = entry(&document, 3);
    assert_eq!(sql["mysqld"], true, "{document}");
    assert_eq!(sql["state"], "started", "{document}");
    assert_eq!(sql["pid"], sql_pid, "{document}");

    let stopped = skarv(&["sandbox", "--stop", "--dir", &dir_text]);
    assert!(stopped.status.success(), "{}", text(&stopped));
    assert!(!running(sql_pid), "--stop stops the SQL node too");
}

/// Whether `pid` runs: neither gone nor a zombie (a detached sandbox's
/// processes are reaped by whoever adopted them, perhaps never).
fn running(pid: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}
