//! The admin verbs of issue 23 item 5 against a sandbox of 2 data nodes ×
//! 2 replicas: `report memoryusage` (text and `--json`), `all status`,
//! `N status`, `status N`, and their errors: a node id that does not
//! exist, an unknown report, an unknown verb, and a data node that is down
//! (its report line says so while the other node's still comes);
//! `report eventlog` shows the cluster log's events as its lines, filtered
//! by `--level`, and in `--json`, and the kill of node 3 as an ALERT.

mod common;

use std::time::Duration;

use common::{sigkill, skarv, text, wait_for, Sandbox};
use serde_json::Value as Json;

/// How long a killed node may take to show as down.
const NODE_GONE_MAX: Duration = Duration::from_secs(30);

fn admin(sandbox: &Sandbox, args: &[&str]) -> std::process::Output {
    let mut all = vec!["admin", "--connect", &sandbox.connect];
    all.extend_from_slice(args);
    skarv(&all)
}

fn ok(sandbox: &Sandbox, args: &[&str]) -> String {
    let output = admin(sandbox, args);
    assert!(output.status.success(), "{args:?}: {}", text(&output));
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn refused(sandbox: &Sandbox, args: &[&str]) -> String {
    let output = admin(sandbox, args);
    assert!(
        !output.status.success(),
        "{args:?} refused: {}",
        text(&output)
    );
    text(&output)
}

#[test]
fn admin_reports_and_status() {
    let sandbox = Sandbox::start("admin-report", 16_500);

    let report = ok(&sandbox, &["report", "memoryusage"]);
    for node in [2, 3] {
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("Node {node}: Data usage is ")))
            .unwrap_or_else(|| panic!("node {node}'s line in {report}"));
        assert!(line.contains("32K pages of total"), "{line}");
    }
    let document: Json =
        serde_json::from_str(&ok(&sandbox, &["report", "memoryusage", "--json"])).unwrap();
    let entries = document["memoryusage"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{document}");
    for entry in entries {
        assert_eq!(entry["answered"], true, "{entry}");
        let (used, total) = (
            entry["used_pages"].as_u64().unwrap(),
            entry["total_pages"].as_u64().unwrap(),
        );
        assert!(total > 0 && total >= used, "{entry}");
        assert_eq!(entry["percent"].as_u64().unwrap(), used * 100 / total);
        let page = entry["total_bytes"].as_u64().unwrap() / total;
        assert_eq!(
            entry["used_bytes"].as_u64().unwrap(),
            used * page,
            "one page size: {entry}"
        );
    }

    let all = ok(&sandbox, &["all", "status"]);
    assert!(all.contains("Node 2: started"), "{all}");
    assert!(all.contains("Node 3: started"), "{all}");
    assert!(!all.contains("Node 1:"), "only data nodes: {all}");
    let one = ok(&sandbox, &["status", "2"]);
    assert!(
        one.starts_with("Node 2: started") && one.lines().count() == 1,
        "{one}"
    );
    let document: Json = serde_json::from_str(&ok(&sandbox, &["3", "status", "--json"])).unwrap();
    let nodes = document["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 1, "{document}");
    assert_eq!(nodes[0]["id"], 3);
    assert_eq!(nodes[0]["state"], "started");

    let missing = refused(&sandbox, &["9", "status"]);
    assert!(missing.contains("node 9 does not exist"), "{missing}");
    let unknown = refused(&sandbox, &["report", "everything"]);
    assert!(unknown.contains("no report `everything`"), "{unknown}");
    let verb = refused(&sandbox, &["2", "frobnicate"]);
    assert!(
        verb.contains("unknown admin command `2 frobnicate`"),
        "{verb}"
    );

    let events = ok(&sandbox, &["report", "eventlog"]);
    for node in [2, 3] {
        assert!(
            events.lines().any(|l| l.contains("[MgmtSrvr] INFO     -- ")
                && l.contains(&format!("Node {node}: started"))),
            "node {node}'s start in {events}"
        );
    }
    let alerts = ok(&sandbox, &["report", "eventlog", "--level", "alert"]);
    assert!(
        alerts.lines().all(|l| l.contains("[MgmtSrvr] ALERT ")),
        "only alerts: {alerts}"
    );
    let level = refused(&sandbox, &["report", "eventlog", "--level", "loud"]);
    assert!(level.contains("no level `loud`"), "{level}");
    let misplaced = refused(&sandbox, &["report", "memoryusage", "--level", "INFO"]);
    assert!(
        misplaced.contains("--level is for `report eventlog`"),
        "{misplaced}"
    );

    // Its angel too, so it stays down.
    sigkill(sandbox.angel_pid(3));
    sigkill(sandbox.pid(3));
    wait_for("node 3 to show as down", NODE_GONE_MAX, || {
        !ok(&sandbox, &["3", "status"]).contains("started")
    });
    let report = ok(&sandbox, &["report", "memoryusage"]);
    assert!(report.contains("Node 2: Data usage is "), "{report}");
    assert!(
        report.contains("Node 3: no report: the data node is "),
        "{report}"
    );
    // The kill is an alert of the cluster log (with the failover's).
    let alerts = ok(&sandbox, &["report", "eventlog", "--level", "ALERT"]);
    assert!(
        alerts
            .lines()
            .any(|l| l.contains("[MgmtSrvr] ALERT    -- Node 3: lost connection (process died?)")),
        "{alerts}"
    );
    assert!(alerts.lines().all(|l| l.contains(" ALERT ")), "{alerts}");
    let document: Json =
        serde_json::from_str(&ok(&sandbox, &["report", "eventlog", "--json"])).unwrap();
    let events = document["eventlog"].as_array().expect("events");
    let lost = events
        .iter()
        .find(|e| e["text"] == "Node 3: lost connection (process died?)")
        .unwrap_or_else(|| panic!("the kill in {document}"));
    assert_eq!(lost["severity"], "ALERT", "{lost}");
    assert!(lost["unix_seconds"].as_u64().unwrap() > 0, "{lost}");
    assert!(
        events
            .iter()
            .all(|e| e["time"].as_str().is_some_and(|t| t.len() == 19)),
        "{document}"
    );
}
