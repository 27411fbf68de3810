//! Restarts against real processes (issue 6, "How it is checked"): a
//! sandbox of 2 data nodes × 2 replicas under `skarv bench flex` updates.
//!
//! 1. A rolling restart (`skarv admin restart N` of each data node in turn,
//!    each waiting until the restarted node has caught up and serves) under
//!    load: no transaction fails (temporary errors are retried), and every
//!    row verifies afterwards.
//! 2. SIGKILL rounds: each data node killed in turn and restarted by its
//!    angel, every row read back and verified after each round.
//! 3. Both data nodes killed at once (a system restart): every row is back.
//! 4. One node killed for good (its angel first) and every row read back
//!    from the other, which was itself restarted and caught up by copying.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{sigkill, skarv, text, Sandbox, SKARV};

/// Rows of the table (2 threads × this / 2 transactions).
const ROWS: u64 = 20_000;
/// Longest a restarted node may take to catch up on CI's slow cores.
const CATCH_UP_MAX: Duration = Duration::from_secs(90);

impl Sandbox {
    fn flex_args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec!["bench", "flex", "--connect", &self.connect];
        all.extend_from_slice(&["--table", "rolling", "-a", "25", "-t", "2", "-p", "16"]);
        all.extend_from_slice(&["-o", "10000", "--json"]);
        all.extend_from_slice(args);
        all
    }

    fn flex(&self, args: &[&str]) -> Output {
        skarv(&self.flex_args(args))
    }

    fn spawn_flex(&self, args: &[&str]) -> Child {
        Command::new(SKARV)
            .args(self.flex_args(args))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skarv bench flex")
    }

    /// The pid of data node `id` when `show` says it is started.
    fn pid_if_started(&self, id: u64) -> Option<u64> {
        let output = skarv(&["admin", "--connect", &self.connect, "show", "--json"]);
        let show: Value = serde_json::from_slice(&output.stdout).ok()?;
        let node = show["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["id"] == id)?
            .clone();
        (node["state"] == "started")
            .then(|| node["pid"].as_u64())
            .flatten()
    }

    /// `verify`, retried while the cluster is not yet serving (temporary
    /// refusals right after a restart), for at most `limit`.
    fn verify_within(&self, when: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            let output = self.flex(&["--ops", "read", "--verify"]);
            if output.status.success() || start.elapsed() >= limit {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        self.verify(when);
    }

    /// How many times a node's log says node `id` caught up and serves.
    fn caught_up(&self, id: u64) -> usize {
        let needle = format!("node {id} has caught up: it serves");
        logs(&self.dir)
            .iter()
            .map(|log| log.matches(&needle).count())
            .sum()
    }

    /// Waits until node `id` has caught up once more than `before` times
    /// and the management server says it is started: its log line comes
    /// first, and a restart of its group's other node is refused while
    /// the management server still sees it starting.
    fn wait_caught_up(&self, id: u64, before: usize) {
        let start = Instant::now();
        while self.caught_up(id) <= before || self.pid_if_started(id).is_none() {
            assert!(
                start.elapsed() < CATCH_UP_MAX,
                "node {id} did not catch up within {CATCH_UP_MAX:?}; logs under {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads every row back; all must hold what the updates wrote.
    fn verify(&self, when: &str) {
        let output = self.flex(&["--ops", "read", "--verify"]);
        assert!(output.status.success(), "{when}: {}", text(&output));
        let phase = phases(&output).pop().expect("a read phase");
        assert_eq!(phase["rows_verified"], ROWS, "{when}: {phase}");
        assert_eq!(phase["mismatches"], 0, "{when}: {phase}");
        assert_eq!(phase["failed"], 0, "{when}: {phase}");
    }
}

fn logs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn phases(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}\n{}", text(output)))
        })
        .collect()
}

#[test]
fn rolling_restart_under_load_fails_nothing_and_sigkill_rounds_lose_nothing() {
    let sandbox = Sandbox::start("rolling", 23_000);
    let insert = sandbox.flex(&["--ops", "insert"]);
    assert!(insert.status.success(), "{}", text(&insert));

    // 1. Rolling restart under updates.
    let load = sandbox.spawn_flex(&["--ops", "update", "--duration", "30"]);
    std::thread::sleep(Duration::from_secs(2));
    for id in [2u64, 3] {
        let before = sandbox.caught_up(id);
        let order = skarv(&[
            "admin",
            "--connect",
            &sandbox.connect,
            "restart",
            &id.to_string(),
        ]);
        assert!(order.status.success(), "{}", text(&order));
        sandbox.wait_caught_up(id, before);
    }
    let load = load
        .wait_with_output()
        .expect("flex under the rolling restart");
    assert!(load.status.success(), "{}", text(&load));
    let update = phases(&load).pop().expect("an update phase");
    assert_eq!(update["failed"], 0, "{update}");
    assert!(update["transactions"].as_u64().unwrap() > 0, "{update}");
    // Only retryable refusals: 280 (the node is stopping), 286 (a node
    // failure aborted it), a TC not yet knowing the node states (711), or
    // 266, the temporary lock-wait timeout: seen in two full workspace runs
    // on a loaded 2-core machine, never alone; most likely an update waiting
    // behind a restarting node's copy, which holds each batch of rows under
    // shared locks until the starting node has committed it, longer than
    // TransactionDeadlockDetectionTimeout (1.2 s). Each was retried.
    for (code, _) in update["errors"].as_object().expect("errors by code") {
        assert!(
            ["266", "280", "286", "711"].contains(&code.as_str()),
            "a rolling restart caused error {code}: {update}"
        );
    }
    sandbox.verify("after the rolling restart");

    // 2. SIGKILL rounds: each node killed and restarted by its angel, every
    // row verified after each.
    for id in [2u64, 3] {
        let before = sandbox.caught_up(id);
        sigkill(sandbox.pid(id));
        sandbox.wait_caught_up(id, before);
        sandbox.verify(&format!("after node {id} was killed and caught up"));
    }
    // 3. Both data nodes at once (a system restart): the angels start them
    // again, each from its own disk, and every row is there.
    let pids = (sandbox.pid(2), sandbox.pid(3));
    sigkill(pids.0);
    sigkill(pids.1);
    let start = Instant::now();
    while sandbox.pid_if_started(2).is_none_or(|p| p == pids.0)
        || sandbox.pid_if_started(3).is_none_or(|p| p == pids.1)
    {
        assert!(
            start.elapsed() < CATCH_UP_MAX,
            "the data nodes did not start again after a SIGKILL of both; logs under {}",
            sandbox.dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sandbox.verify_within("after a SIGKILL of both data nodes", CATCH_UP_MAX);

    // 4. Node 2 for good (its angel first): node 3, restarted and caught up
    // by copying, holds every row on its own.
    let pid = sandbox.pid(2);
    sigkill(sandbox.angel_pid(2));
    sigkill(pid);
    sandbox.verify("with node 2 down for good");
}
