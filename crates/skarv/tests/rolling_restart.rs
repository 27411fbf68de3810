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

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SKARV: &str = env!("CARGO_BIN_EXE_skarv");
/// Rows of the table (2 threads × this / 2 transactions).
const ROWS: u64 = 20_000;
/// Longest a restarted node may take to catch up on CI's slow cores.
const CATCH_UP_MAX: Duration = Duration::from_secs(90);

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn skarv(args: &[&str]) -> Output {
    Command::new(SKARV).args(args).output().expect("run skarv")
}

/// A base port in 23xxx with the next `count` ports free.
fn free_base_port(count: u16) -> u16 {
    let start = 23_000 + (std::process::id() % 100) as u16 * 10;
    (0..100u16)
        .map(|i| 23_000 + (start - 23_000 + i * 10) % 1_000)
        .find(|base| (0..count).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()))
        .expect("a free port range in 23000..24000")
}

struct Sandbox {
    dir: PathBuf,
    connect: String,
}

impl Sandbox {
    fn start(name: &str) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("skarv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let base = free_base_port(10).to_string();
        let output = skarv(&[
            "sandbox",
            "--detach",
            "--dir",
            dir.to_str().unwrap(),
            "--data-nodes",
            "2",
            "--replicas",
            "2",
            "--base-port",
            &base,
        ]);
        let sandbox = Sandbox {
            dir,
            connect: format!("127.0.0.1:{base}"),
        };
        assert!(output.status.success(), "{}", text(&output));
        sandbox
    }

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

    /// The pid of data node `id` (the node process, not its angel).
    fn pid(&self, id: u64) -> u64 {
        let output = skarv(&["admin", "--connect", &self.connect, "show", "--json"]);
        assert!(output.status.success(), "{}", text(&output));
        let show: Value = serde_json::from_slice(&output.stdout).expect("show --json");
        show["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .and_then(|n| n["pid"].as_u64())
            .unwrap_or_else(|| panic!("no pid for node {id} in {show}"))
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

    /// Waits until node `id` has caught up once more than `before` times.
    fn wait_caught_up(&self, id: u64, before: usize) {
        let start = Instant::now();
        while self.caught_up(id) <= before {
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

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = skarv(&["sandbox", "--stop", "--dir", self.dir.to_str().unwrap()]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
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

fn kill(pid: u64) {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");
}

/// The parent of `pid` (a data node's angel).
fn parent_of(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|p| p.trim().parse().ok())
        .expect("PPid")
}

#[test]
fn rolling_restart_under_load_fails_nothing_and_sigkill_rounds_lose_nothing() {
    let sandbox = Sandbox::start("rolling");
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
    // failure aborted it), or a TC not yet knowing the node states (711).
    for (code, _) in update["errors"].as_object().expect("errors by code") {
        assert!(
            ["280", "286", "711"].contains(&code.as_str()),
            "a rolling restart caused error {code}: {update}"
        );
    }
    sandbox.verify("after the rolling restart");

    // 2. SIGKILL rounds: each node killed and restarted by its angel, every
    // row verified after each.
    for id in [2u64, 3] {
        let before = sandbox.caught_up(id);
        kill(sandbox.pid(id));
        sandbox.wait_caught_up(id, before);
        sandbox.verify(&format!("after node {id} was killed and caught up"));
    }
    // 3. Both data nodes at once (a system restart): the angels start them
    // again, each from its own disk, and every row is there.
    let pids = (sandbox.pid(2), sandbox.pid(3));
    kill(pids.0);
    kill(pids.1);
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
    kill(parent_of(pid));
    kill(pid);
    sandbox.verify("with node 2 down for good");
}
