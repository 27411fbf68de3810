//! The admin verbs of issue 23 item 5 against a sandbox of 2 data nodes ×
//! 2 replicas: `report memoryusage` (text and `--json`), `all status`,
//! `N status`, `status N`, and their errors: a node id that does not
//! exist, an unknown report, an unknown verb, and a data node that is down
//! (its report line says so while the other node's still comes);
//! `report eventlog` shows the cluster log's events as its lines, filtered
//! by `--level`, and in `--json`, and the kill of node 3 as an ALERT;
//! `clusterlog` (NDB's `CLUSTERLOG`) shows, changes and applies the
//! cluster log's filter (see `cluster_log_filters`).

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

/// NDB's `CLUSTERLOG` verbs: the filter shown, changed, refused when
/// malformed, and obeyed: with node 3's STARTUP threshold at 0, its
/// restart writes its stop (SHUTDOWN) but neither the mgmd's nor node 3's
/// own start lines; at 2, the start (level 1) but not the join (level 3).
fn cluster_log_filters(sandbox: &Sandbox) {
    let info = ok(sandbox, &["clusterlog", "info"]);
    assert_eq!(
        info,
        "Cluster logging is enabled.\nSeverities enabled: INFO WARNING ALERT\n\
         Thresholds: the defaults (7; NODERESTART and CONNECTION 8, ERROR and BACKUP 15)\n"
    );
    for (args, says) in [
        (&["clusterlog", "loud"][..], "no clusterlog action `loud`"),
        (&["clusterlog", "off", "LOUD"][..], "no severity `LOUD`"),
        (&["clusterlog", "filter"][..], "needs a severity"),
        (
            &["2", "clusterlog", "STARTUP"][..],
            "is not CATEGORY=THRESHOLD",
        ),
        (
            &["2", "clusterlog", "BOOT=3"][..],
            "no event category `BOOT`: there are STARTUP",
        ),
        (
            &["2", "clusterlog", "STARTUP=16"][..],
            "thresholds are 0 to 15",
        ),
        (
            &["9", "clusterlog", "STARTUP=1"][..],
            "node 9 does not exist",
        ),
    ] {
        let refusal = refused(sandbox, args);
        assert!(refusal.contains(says), "{args:?}: {refusal}");
    }

    let off = ok(sandbox, &["clusterlog", "off", "warning"]);
    assert!(off.contains("Severities enabled: INFO ALERT\n"), "{off}");
    let set = ok(sandbox, &["3", "clusterlog", "STARTUP=0", "CHECKPOINT=3"]);
    assert!(
        set.contains("Node 3: STARTUP=0") && set.contains("Node 3: CHECKPOINT=3"),
        "{set}"
    );
    let document: Json =
        serde_json::from_str(&ok(sandbox, &["clusterlog", "info", "--json"])).unwrap();
    let threshold = |node: u64, category: &str| {
        document["thresholds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["node"] == node && t["category"] == category)
            .unwrap_or_else(|| panic!("{node} {category} in {document}"))["threshold"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        (
            threshold(3, "STARTUP"),
            threshold(2, "STARTUP"),
            threshold(1, "ERROR")
        ),
        (0, 7, 15),
        "{document}"
    );
    assert_eq!(document["severities"], serde_json::json!(["INFO", "ALERT"]));

    ok(sandbox, &["restart", "3"]);
    wait_for("node 3 to restart", NODE_GONE_MAX, || {
        ok(sandbox, &["report", "eventlog"]).contains("Node 3: stopped for restart")
    });
    wait_for("node 3 to start again", NODE_GONE_MAX, || {
        sandbox.state(3) == "started"
    });
    let events = ok(sandbox, &["report", "eventlog"]);
    let after: Vec<&str> = events
        .lines()
        .skip_while(|l| !l.contains("Node 3: stopped for restart"))
        .collect();
    assert!(
        !after
            .iter()
            .any(|l| l.contains("Node 3: started") || l.contains("Node 3: joined")),
        "node 3's start lines filtered out: {events}"
    );

    ok(sandbox, &["clusterlog", "on", "WARNING"]);
    ok(sandbox, &["3", "clusterlog", "STARTUP=7", "CHECKPOINT=7"]);
    assert_eq!(
        ok(sandbox, &["clusterlog", "info"]),
        info,
        "back to the defaults"
    );
    let toggled = ok(sandbox, &["clusterlog", "toggle"]);
    assert!(
        toggled.starts_with("Cluster logging is disabled."),
        "{toggled}"
    );
    ok(sandbox, &["clusterlog", "on"]);
    // Levels are each event kind's, not its severity's: at STARTUP=2 the
    // node's start (level 1) is written and its join (level 3, also
    // INFO) is not.
    ok(sandbox, &["3", "clusterlog", "STARTUP=2"]);
    ok(sandbox, &["restart", "3"]);
    let second_restart = |events: &str| -> Vec<String> {
        events
            .lines()
            .skip_while(|l| !l.contains("Node 3: stopped for restart"))
            .skip(1)
            .skip_while(|l| !l.contains("Node 3: stopped for restart"))
            .map(str::to_owned)
            .collect()
    };
    wait_for("node 3's start written again", NODE_GONE_MAX, || {
        let events = ok(sandbox, &["report", "eventlog"]);
        second_restart(&events)
            .iter()
            .any(|l| l.contains("Node 3: started"))
    });
    let events = ok(sandbox, &["report", "eventlog"]);
    assert!(
        !second_restart(&events)
            .iter()
            .any(|l| l.contains("Node 3: joined")),
        "node 3's join (level 3) filtered out at STARTUP=2: {events}"
    );
    ok(sandbox, &["3", "clusterlog", "STARTUP=7"]);
    assert_eq!(ok(sandbox, &["clusterlog", "info"]), info);
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

    cluster_log_filters(&sandbox);

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
