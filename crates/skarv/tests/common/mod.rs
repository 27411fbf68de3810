//! What the real-process failover tests share: running `skarv`, free ports,
//! a detached sandbox of 2 data nodes × 2 replicas, and SIGKILL.
#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use skarv_client::schema_types::{Column, ColumnType, TableDef};

pub const SKARV: &str = env!("CARGO_BIN_EXE_skarv");

/// A command's status and output, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn skarv(args: &[&str]) -> Output {
    Command::new(SKARV).args(args).output().expect("run skarv")
}

/// A base port in `range_start..range_start + 500` with the next `count`
/// ports free, reserved against the other tests running at once
/// ([`testkit::ports`]).
pub fn free_base_port(range_start: u16, count: u16) -> u16 {
    testkit::ports::free_base_port(range_start, 500, count)
}

/// A detached sandbox of 2 data nodes × 2 replicas (one node group),
/// stopped on drop; its directory (half a GB of redo) is removed unless
/// the test failed, to be looked at.
pub struct Sandbox {
    pub dir: PathBuf,
    pub connect: String,
}

impl Sandbox {
    /// `name` names its directory; its ports are in `port_range..+500`.
    pub fn start(name: &str, port_range: u16) -> Sandbox {
        Sandbox::start_with(name, port_range, 2)
    }

    /// As [`Sandbox::start`], with `data_nodes` data nodes in node groups
    /// of 2 replicas.
    pub fn start_with(name: &str, port_range: u16, data_nodes: u32) -> Sandbox {
        Sandbox::start_configured(name, port_range, data_nodes, &[])
    }

    /// As [`Sandbox::start_with`], passing `more` to `skarv sandbox` (e.g.
    /// `--set TimeBetweenEpochs=20`).
    pub fn start_configured(
        name: &str,
        port_range: u16,
        data_nodes: u32,
        more: &[&str],
    ) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("skarv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let base = free_base_port(port_range, 10).to_string();
        let data_nodes = data_nodes.to_string();
        let dir_text = dir.to_str().expect("a UTF-8 temp dir").to_owned();
        // Most tests drive the data nodes natively: no SQL node unless
        // `more` asks for one.
        let sql_nodes: &[&str] = if more.contains(&"--sql-nodes") {
            &[]
        } else {
            &["--sql-nodes", "0"]
        };
        // Two replicas unless `more` says how many.
        let replicas: &[&str] = if more.contains(&"--replicas") {
            &[]
        } else {
            &["--replicas", "2"]
        };
        let output = skarv(
            &[
                "sandbox",
                "--detach",
                "--dir",
                &dir_text,
                "--data-nodes",
                &data_nodes,
                "--base-port",
                &base,
            ]
            .into_iter()
            .chain(replicas.iter().copied())
            .chain(sql_nodes.iter().copied())
            .chain(more.iter().copied())
            .collect::<Vec<_>>(),
        );
        let sandbox = Sandbox {
            dir,
            connect: format!("127.0.0.1:{base}"),
        };
        assert!(output.status.success(), "{}", text(&output));
        sandbox
    }

    /// Where the sandbox's mgmd serves `/metrics`: base port + 1.
    pub fn metrics_port(&self) -> u16 {
        let base: u16 = self
            .connect
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in the connect string");
        base + 1
    }

    /// `skarv admin show --json`.
    pub fn show(&self) -> Json {
        let output = skarv(&["admin", "--connect", &self.connect, "show", "--json"]);
        assert!(output.status.success(), "{}", text(&output));
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)))
    }

    /// The pid of data node `id` (the node process, not its angel).
    pub fn pid(&self, id: u64) -> u64 {
        let show = self.show();
        node_entry(&show, id)
            .and_then(|n| n["pid"].as_u64())
            .unwrap_or_else(|| panic!("no pid for node {id} in {show}"))
    }

    /// The pid of data node `id` once `show` says it is started.
    pub fn started_pid(&self, id: u64) -> Option<u64> {
        let show = self.show();
        let node = node_entry(&show, id)?;
        (node["state"] == "started")
            .then(|| node["pid"].as_u64())
            .flatten()
    }

    /// The state `skarv admin show` gives node `id` ("" when not listed).
    pub fn state(&self, id: u64) -> String {
        let show = self.show();
        node_entry(&show, id)
            .and_then(|n| n["state"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// Where MySQL clients reach the sandbox's first SQL node (started
    /// with `--sql-nodes 1` in `more`).
    pub fn sql_port(&self) -> u16 {
        self.sql_port_of(0)
    }

    /// Where MySQL clients reach the sandbox's SQL node number `at`
    /// (from 0).
    pub fn sql_port_of(&self, at: usize) -> u16 {
        let record = std::fs::read(self.dir.join("sandbox.json")).expect("sandbox.json");
        let record: Json = serde_json::from_slice(&record).expect("sandbox.json is JSON");
        record["sql_ports"][at]
            .as_u64()
            .and_then(|port| u16::try_from(port).ok())
            .unwrap_or_else(|| panic!("no SQL node in {record}"))
    }

    /// The pid of the sandbox's first SQL node.
    pub fn sql_pid(&self) -> u64 {
        let record = std::fs::read(self.dir.join("sandbox.json")).expect("sandbox.json");
        let record: Json = serde_json::from_slice(&record).expect("sandbox.json is JSON");
        record["sql_node_pids"][0]
            .as_u64()
            .unwrap_or_else(|| panic!("no SQL node pid in {record}"))
    }

    /// The angel of data node `node` (sandbox.json lists them from node 2).
    pub fn angel_pid(&self, node: u64) -> u64 {
        let record = std::fs::read(self.dir.join("sandbox.json")).expect("sandbox.json");
        let record: Json = serde_json::from_slice(&record).expect("sandbox.json is JSON");
        record["data_node_angel_pids"][(node - 2) as usize]
            .as_u64()
            .unwrap_or_else(|| panic!("no angel of node {node} in {record}"))
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let dir = self.dir.to_str().unwrap_or_default().to_owned();
        let _ = skarv(&["sandbox", "--stop", "--dir", &dir]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        // A failed test keeps its logs and configuration for the reader,
        // not the data nodes' file systems (redo logs and checkpoints:
        // hundreds of MB a sandbox, which once filled CI's disk).
        remove_node_files(&self.dir, 0);
        eprintln!("sandbox kept for its logs: {dir}");
    }
}

/// Removes the `ndb_<node>_fs` directories under `dir`.
fn remove_node_files(dir: &Path, depth: usize) {
    // The sandbox's own layout is two levels deep at most.
    const DEPTH_MAX: usize = 3;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("ndb_") && name.ends_with("_fs") {
            let _ = std::fs::remove_dir_all(&path);
        } else if depth < DEPTH_MAX {
            remove_node_files(&path, depth + 1);
        }
    }
}

/// Sends SIGCONT on drop: the test never leaves a stopped process behind.
pub struct Stopped(i32);

impl Stopped {
    /// Sends SIGSTOP to `pid`.
    pub fn stop(pid: u64) -> Stopped {
        let pid = i32::try_from(pid).expect("a pid");
        assert!(pid > 0, "pid {pid}");
        // SAFETY: kill has no memory effects.
        let result = unsafe { libc::kill(pid, libc::SIGSTOP) };
        assert_eq!(
            result,
            0,
            "kill -STOP {pid}: {}",
            std::io::Error::last_os_error()
        );
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

pub fn sigkill(pid: u64) {
    let pid = i32::try_from(pid).expect("a pid");
    assert!(pid > 0, "pid {pid}");
    // SAFETY: kill has no memory effects.
    let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(
        killed,
        0,
        "kill -9 {pid}: {}",
        std::io::Error::last_os_error()
    );
}

/// The table most of these tests write: `id` and `v`, both BIGINT
/// UNSIGNED, keyed by `id`.
/// A xorshift generator from `seed` (not 0): `random(n)` is below `n`.
/// Deterministic, so a test's workload is the same in every run.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    assert_ne!(seed, 0, "xorshift needs a seed other than 0");
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

pub fn id_value_table(name: &str) -> TableDef {
    TableDef::new(
        name,
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: true }),
            Column::new("v", ColumnType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0])
}

/// Node `id`'s entry in a `show --json` document.
fn node_entry(show: &Json, id: u64) -> Option<&Json> {
    show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == id)
}

/// Polls `check` every 50 ms until it holds; fails naming `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `KILL id` through `conn`, then waits until `SHOW PROCESSLIST` no longer
/// lists the connection (a killed idle connection must end at once).
pub fn kill_and_wait_gone(conn: &mut mysql::Conn, id: u32) {
    use mysql::prelude::Queryable;
    conn.query_drop(format!("KILL {id}")).expect("kill");
    wait_for(
        "the killed connection to leave",
        Duration::from_secs(5),
        || {
            let ids: Vec<u64> = conn
                .query_map("SHOW PROCESSLIST", |row: mysql::Row| {
                    row.get::<u64, _>(0).expect("an id")
                })
                .expect("processlist");
            !ids.contains(&u64::from(id))
        },
    );
}

/// Waits until `SHOW STATUS` says `Threads_connected` is `n` (closed
/// connections leave their SQL node's count).
pub fn wait_threads_connected(conn: &mut mysql::Conn, n: u32) {
    use mysql::prelude::Queryable;
    wait_for(
        "the idle connections to close",
        Duration::from_secs(30),
        || {
            let rows: Vec<(String, String)> = conn
                .query("SHOW STATUS LIKE 'Threads_connected'")
                .expect("status");
            rows[0].1 == n.to_string()
        },
    );
}

/// Every file below `dir`, recursively (none when it cannot be read).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// A `mysql` connection as root (no password) to a SQL node on 127.0.0.1.
pub fn connect(port: u16) -> mysql::Conn {
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false);
    mysql::Conn::new(opts).expect("root logs in")
}
