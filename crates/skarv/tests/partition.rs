//! Real processes, a real network partition (issue 6, "How it is checked":
//! Partition). Every data node runs in a network namespace of its own with
//! its own address (`HostName=` in config.ini), joined by a veth pair to a
//! bridge in the test's namespace, where the mgmd (the arbitrator) and the
//! test's writer run. Under that writer, one data node is cut off: a
//! `blackhole` qdisc on both ends of its veth drops every packet silently,
//! so its connections hang rather than close and only missed heartbeats can
//! tell. Checked:
//! - the cut-off node shuts itself down (its log says why) and its process
//!   exits; the others go on: the writer commits again within
//!   [`PROGRESS_AFTER_CUT_MAX_MS`] (the gap is printed);
//! - no two live halves: a second writer inside the cut-off node's
//!   namespace, which reaches only that node once the cut is made, sees no
//!   commit after the survivors made their view without it;
//! - after the link heals the angel's restart brings the node back: it
//!   rejoins and catches up; then its partner is SIGKILLed and every row
//!   either writer saw committed reads back from the rejoined node.
//!
//! Two layouts: 2 node groups × 2 replicas, where the cut-off node is the
//! only one of its side and lacks a whole node group (it stops by the rule,
//! no arbitration), and 1 × 2, a split exactly in half, where the arbitrator
//! decides: the survivor's side reaches the mgmd and wins the vote, the
//! cut-off side gets no answer and stops. The president (node 2) is cut off
//! in both, so the survivors must also elect a new one.
//!
//! Needs root (CAP_NET_ADMIN) and `ip`/`tc`: `#[ignore]`d so that a plain
//! `cargo test` never reports it passed when it could not run;
//! `bench/partition.sh` runs it where it can and says plainly when not.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use skarv_client::{codes, Cluster, ExecMode, Op, Session, Table, Value};

use common::{id_value_table, sigkill, text, SKARV};

/// The mgmd's port on the bridge address; every node has an address of its
/// own, so fixed ports do not collide with anything else on the machine.
const MGMD_PORT: u16 = 1186;
const DATA_PORT: u16 = 2202;
/// API node slots: the test's own connection, the writer beside the mgmd,
/// the writer beside the cut-off node.
const API_NODES: [u8; 3] = [50, 51, 52];
/// The data node cut off: node 2, the first president.
const CUT_NODE: u8 = 2;
const TABLE: &str = "partition_rows";
/// Keys of the writer inside the cut-off node's namespace start here.
const CUT_SIDE_KEY_BASE: u64 = 1 << 40;

const START_MAX_MS: u64 = 60_000;
/// Commits of the main writer before the cut, so the cut lands in a steady load.
const COMMITS_BEFORE_CUT: usize = 100;
/// Commits of the cut-off side's writer before the cut.
const CUT_SIDE_COMMITS_BEFORE_CUT: usize = 20;
/// Heartbeat (100 ms) × 4 detects the cut; arbitration waits at most 2 s;
/// a generous bound for two slow shared cores.
const PROGRESS_AFTER_CUT_MAX_MS: u64 = 15_000;
/// The survivors' view without the cut-off node, and its process's exit.
const TAKEOVER_MAX_MS: u64 = 15_000;
const EXIT_MAX_MS: u64 = 15_000;
/// The healed node rejoins: a restart of its angel, an mgmd connect, node restart.
const REJOIN_MAX_MS: u64 = 45_000;
/// Reads after the partner's SIGKILL retry temporary errors this long.
const READ_RETRY_MAX_MS: u64 = 15_000;
const WRITE_AFTER_RECOVERY_MS: u64 = 1_000;
const RETRY_PAUSE_MS: u64 = 5;
const POLL_MS: u64 = 50;

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("ip {args:?}: {}", text(&output)))
    }
}

fn run_in(netns: &str, program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(["netns", "exec", netns, program])
        .args(args)
        .output()
        .map_err(|e| format!("ip netns exec {netns} {program} {args:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{netns}: {program} {args:?}: {}", text(&output)))
    }
}

/// One data node's namespace and veth pair (`host` on the bridge, `inner` in `netns`).
struct Port {
    node: u8,
    netns: String,
    host: String,
    inner: String,
}

/// The bridge, and a namespace per data node; all removed on drop, also
/// when the test fails half-way through making them.
struct Net {
    bridge: String,
    /// The /24 of this test: `{prefix}.1` is the bridge (mgmd, writer),
    /// `{prefix}.{10 + node}` a data node.
    prefix: String,
    ports: Vec<Port>,
}

impl Net {
    /// `layout` (one digit) keeps two tests of one process apart.
    fn create(layout: u8, nodes: &[u8]) -> Result<Net, String> {
        let pid = std::process::id();
        // 198.18.0.0/15 is for benchmark networks (RFC 2544): nothing real uses it.
        let prefix = format!("198.{}.{}", 18 + layout % 2, pid % 250);
        let mut net = Net {
            bridge: format!("skpb{layout}{pid}"),
            prefix,
            ports: Vec::new(),
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", net.prefix),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for &node in nodes {
            let port = Port {
                node,
                netns: format!("skarv-part-{pid}-{layout}-n{node}"),
                host: format!("skph{layout}{pid}n{node}"),
                inner: format!("skpi{layout}{pid}n{node}"),
            };
            ip(&["netns", "add", &port.netns])?;
            net.ports.push(port);
            let port = net.ports.last().expect("just pushed");
            ip(&[
                "link",
                "add",
                &port.host,
                "type",
                "veth",
                "peer",
                "name",
                &port.inner,
                "netns",
                &port.netns,
            ])?;
            ip(&["link", "set", &port.host, "master", &net.bridge, "up"])?;
            let address = format!("{}/24", net.address(node));
            run_in(
                &port.netns,
                "ip",
                &["addr", "add", &address, "dev", &port.inner],
            )?;
            run_in(&port.netns, "ip", &["link", "set", &port.inner, "up"])?;
            run_in(&port.netns, "ip", &["link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn bridge_address(&self) -> String {
        format!("{}.1", self.prefix)
    }

    fn address(&self, node: u8) -> String {
        format!("{}.{}", self.prefix, 10 + u32::from(node))
    }

    fn port(&self, node: u8) -> &Port {
        self.ports
            .iter()
            .find(|p| p.node == node)
            .unwrap_or_else(|| panic!("no namespace for node {node}"))
    }

    /// Drops every packet to and from `node`, silently (no RST, no ICMP):
    /// its connections hang, as when a cable is pulled.
    fn cut(&self, node: u8) {
        let port = self.port(node);
        for result in [
            ip_tc(
                None,
                &["qdisc", "add", "dev", &port.host, "root", "blackhole"],
            ),
            ip_tc(
                Some(&port.netns),
                &["qdisc", "add", "dev", &port.inner, "root", "blackhole"],
            ),
        ] {
            result.unwrap_or_else(|e| panic!("cutting node {node} off: {e}"));
        }
    }

    fn heal(&self, node: u8) {
        let port = self.port(node);
        for result in [
            ip_tc(None, &["qdisc", "del", "dev", &port.host, "root"]),
            ip_tc(
                Some(&port.netns),
                &["qdisc", "del", "dev", &port.inner, "root"],
            ),
        ] {
            result.unwrap_or_else(|e| panic!("healing node {node}'s link: {e}"));
        }
    }
}

fn ip_tc(netns: Option<&str>, args: &[&str]) -> Result<(), String> {
    match netns {
        Some(netns) => run_in(netns, "tc", args),
        None => {
            let output = Command::new("tc")
                .args(args)
                .output()
                .map_err(|e| format!("tc {args:?}: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                Err(format!("tc {args:?}: {}", text(&output)))
            }
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and with it the pair.
        for port in &self.ports {
            let _ = ip(&["netns", "del", &port.netns]);
            let _ = ip(&["link", "del", &port.host]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// The mgmd and the data nodes' angels. On drop: a cluster shutdown through
/// the mgmd, SIGTERM to the angels (they stop their nodes), then SIGKILL
/// to whatever is left, node processes included (their pids were seen in
/// `show`).
struct Processes {
    connect: String,
    children: Vec<Child>,
    node_pids: Vec<u64>,
}

impl Drop for Processes {
    fn drop(&mut self) {
        let _ = Command::new(SKARV)
            .args(["admin", "--connect", &self.connect, "shutdown"])
            .output();
        for child in &self.children {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in &mut self.children {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(POLL_MS));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        for &pid in &self.node_pids {
            if alive(pid) {
                sigkill(pid);
            }
        }
    }
}

fn alive(pid: u64) -> bool {
    // A zombie has exited: its parent has not reaped it yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn scratch_dir(layout: u8) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skarv-partition-{}-{layout}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Everything the mgmd wrote to its data directory (the cluster log).
fn cluster_log(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir.join("mgmd"))
        .expect("the mgmd's directory")
        .flatten()
    {
        if entry.path().is_file() {
            all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    all
}

fn config_ini(net: &Net, dir: &Path, nodes: &[u8]) -> String {
    let mut ini = format!(
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\nThreadConfig=ldm={{count=0}}\n\
         HeartbeatIntervalDbDb=100\nHeartbeatIntervalDbApi=100\nArbitrationTimeout=2000\n\
         NoOfFragmentLogFiles=3\nFragmentLogFileSize=4M\n\
         [ndb_mgmd]\nNodeId=1\nHostName={}\nPortNumber={MGMD_PORT}\nDataDir={}/mgmd\n",
        net.bridge_address(),
        dir.display()
    );
    for &node in nodes {
        ini.push_str(&format!(
            "[ndbd]\nNodeId={node}\nHostName={}\nServerPort={DATA_PORT}\nDataDir={}/n{node}\n",
            net.address(node),
            dir.display()
        ));
    }
    for api in API_NODES {
        ini.push_str(&format!("[api]\nNodeId={api}\n"));
    }
    ini
}

fn start(net: &Net, dir: &Path, nodes: &[u8]) -> Processes {
    let config = dir.join("config.ini");
    std::fs::write(&config, config_ini(net, dir, nodes)).expect("write config.ini");
    let connect = format!("{}:{MGMD_PORT}", net.bridge_address());
    let mut processes = Processes {
        connect: connect.clone(),
        children: Vec::new(),
        node_pids: Vec::new(),
    };
    let log = |name: &str| File::create(dir.join(name)).expect("a log file");
    let mgmd_log = log("mgmd.log");
    processes.children.push(
        Command::new(SKARV)
            .args([
                "mgmd",
                "--config-file",
                config.to_str().expect("UTF-8 path"),
            ])
            .stdin(Stdio::null())
            .stdout(mgmd_log.try_clone().expect("log"))
            .stderr(mgmd_log)
            .spawn()
            .expect("spawn the mgmd"),
    );
    for &node in nodes {
        let node_log = log(&format!("node{node}.log"));
        processes.children.push(
            Command::new("ip")
                .args(["netns", "exec", &net.port(node).netns, SKARV, "data"])
                .args(["--connect", &connect, "--node-id", &node.to_string()])
                .stdin(Stdio::null())
                .stdout(node_log.try_clone().expect("log"))
                .stderr(node_log)
                .spawn()
                .expect("spawn a data node"),
        );
    }
    processes
}

/// A data node as `skarv admin show --json` has it.
#[derive(Debug)]
struct Shown {
    id: u8,
    state: String,
    members: Vec<u8>,
    pid: Option<u64>,
}

fn show(connect: &str) -> Vec<Shown> {
    let Ok(output) = Command::new(SKARV)
        .args(["admin", "--connect", connect, "show", "--json"])
        .output()
    else {
        return Vec::new();
    };
    if !output.status.success() {
        return Vec::new();
    }
    let doc: Json =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    doc["nodes"]
        .as_array()
        .expect("a node list")
        .iter()
        .filter(|n| n["type"] == "data")
        .map(|n| Shown {
            id: n["id"]
                .as_u64()
                .and_then(|id| u8::try_from(id).ok())
                .expect("a node id"),
            state: n["state"].as_str().expect("a state").to_owned(),
            members: n["members"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter_map(|id| id.as_u64().and_then(|id| u8::try_from(id).ok()))
                        .collect()
                })
                .unwrap_or_default(),
            pid: n["pid"].as_u64(),
        })
        .collect()
}

fn all_started(shown: &[Shown], nodes: &[u8]) -> bool {
    nodes.iter().all(|id| {
        shown
            .iter()
            .any(|n| n.id == *id && n.state == "started" && n.members.len() == nodes.len())
    })
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
    start.elapsed()
}

/// The value a writer stores under `key`.
fn value_of(key: u64) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 8
}

/// What a writer saw.
#[derive(Default)]
struct Log {
    /// Rows it saw committed, with when the answer came.
    committed: Vec<(u64, Instant)>,
    /// Failed attempts by error code.
    errors: BTreeMap<u32, usize>,
    /// Errors a writer may not see: neither temporary nor an unknown
    /// result, nor a duplicate key that settles an unknown result.
    wrong: Vec<String>,
    /// Transactions it began, committed or not.
    attempts: u64,
    /// Rows whose outcome it does not know (an unknown-result error and no
    /// settling retry): each may or may not be there.
    unsettled: Vec<u64>,
}

/// Inserts rows `base`, `base + 1`, … one at a time until `stop`. A failed
/// row is retried; a duplicate key after an unknown result means an earlier
/// attempt committed. A row left after `attempts_max` failures is recorded
/// as unsettled and the writer moves on, so one that is cut off keeps
/// probing whether its node still commits.
fn writer(session: &Session, base: u64, attempts_max: u32, stop: &AtomicBool, log: &Mutex<Log>) {
    let table = session.table(TABLE).expect("the table");
    let mut key = base;
    while !stop.load(Ordering::Acquire) {
        let mut maybe_committed = false;
        let mut committed = false;
        for _ in 0..attempts_max {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let row = [("id", Value::UInt(key)), ("v", Value::UInt(value_of(key)))];
            lock(log).attempts += 1;
            let result = session
                .begin_with_hint(&table, &[Value::UInt(key)])
                .and_then(|tx| {
                    tx.insert(&table, &row)?;
                    tx.execute(ExecMode::Commit)
                });
            match result {
                Ok(_) => {
                    committed = true;
                    break;
                }
                Err(error) => {
                    let mut log = lock(log);
                    *log.errors.entry(error.code).or_default() += 1;
                    if maybe_committed && error.code == codes::DUPLICATE_KEY {
                        committed = true;
                        break;
                    }
                    if !error.is_temporary() && !error.is_unknown_result() {
                        log.wrong.push(format!("row {key}: {error}"));
                    }
                    drop(log);
                    maybe_committed |= error.is_unknown_result();
                    std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
                }
            }
        }
        let mut log = lock(log);
        if committed {
            log.committed.push((key, Instant::now()));
        } else {
            // Not committed, or unknown: either way a reader must not
            // demand it, and must accept only its value.
            log.unsettled.push(key);
        }
        drop(log);
        key += 1;
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

/// A writer on its own thread and its own cluster connection, made in
/// network namespace `netns` when given (every socket of the connection is
/// made by that thread or threads it starts, so all live there).
struct Writer {
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    fn start(connect: &str, netns: Option<&str>, base: u64, attempts_max: u32) -> Writer {
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (connect, netns) = (connect.to_owned(), netns.map(str::to_owned));
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                if let Some(netns) = netns {
                    enter_netns(&netns);
                }
                let cluster = Cluster::connect(&connect).expect("a writer connects");
                let session = cluster.session().expect("a writer's session");
                writer(&session, base, attempts_max, &stop, &log);
            })
        };
        Writer {
            log,
            stop,
            thread: Some(thread),
        }
    }

    /// Commits so far; a writer that ended early (it panicked) fails the test.
    fn commits(&self) -> usize {
        let ended = self.thread.as_ref().is_none_or(JoinHandle::is_finished);
        assert!(
            !ended || self.stop.load(Ordering::Acquire),
            "a writer ended early (see its panic above)"
        );
        lock(&self.log).committed.len()
    }

    /// Stops the writer; a writer still blocked after `limit` fails the test.
    fn finish(mut self, limit: Duration) -> Log {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().expect("not finished yet");
        wait_until("writer to stop", limit, || thread.is_finished());
        thread.join().expect("the writer thread");
        std::mem::take(&mut *lock(&self.log))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Moves the calling thread into network namespace `netns`.
fn enter_netns(netns: &str) {
    let file = File::open(format!("/run/netns/{netns}"))
        .unwrap_or_else(|e| panic!("open namespace {netns}: {e}"));
    // SAFETY: setns on a valid descriptor changes only this thread's namespace.
    let done = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        done,
        0,
        "setns {netns}: {}",
        std::io::Error::last_os_error()
    );
}

/// Row `key`'s value, None when missing; retries temporary errors for a while.
fn read_value(session: &Session, table: &Arc<Table>, key: u64) -> Option<u64> {
    let start = Instant::now();
    loop {
        let result = session
            .begin_with_hint(table, &[Value::UInt(key)])
            .and_then(|tx| {
                let read = tx.define(Op::read(table, &[Value::UInt(key)]).ignore_error())?;
                let mut outcome = tx.execute(ExecMode::Commit)?;
                Ok(outcome.take_row(read))
            });
        match result {
            Ok(row) => {
                return row.map(|row| match row.get("v") {
                    Some(Value::UInt(v)) => *v,
                    other => panic!("row {key}: v is {other:?}"),
                })
            }
            Err(error) if error.is_temporary() || error.is_unknown_result() => {
                assert!(
                    start.elapsed() < Duration::from_millis(READ_RETRY_MAX_MS),
                    "reading row {key}: still failing after {READ_RETRY_MAX_MS} ms: {error}"
                );
                std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
            }
            Err(error) => panic!("reading row {key}: {error}"),
        }
    }
}

/// Every committed row of `logs` holds its value, each unsettled one its
/// value or nothing, and a scan finds no other rows.
fn verify_rows(session: &Session, logs: &[&Log]) -> usize {
    let table = session.table(TABLE).expect("the table");
    let mut present = 0;
    for log in logs {
        for &(key, _) in &log.committed {
            assert_eq!(
                read_value(session, &table, key),
                Some(value_of(key)),
                "committed row {key}"
            );
            present += 1;
        }
        for &key in &log.unsettled {
            let found = read_value(session, &table, key);
            assert!(
                found.is_none() || found == Some(value_of(key)),
                "row {key} (outcome unknown): {found:?}"
            );
            present += usize::from(found.is_some());
        }
    }
    let tx = session.begin().expect("begin");
    let mut scanned = 0;
    for row in tx.scan(&table, Default::default()).expect("scan the table") {
        row.expect("a scanned row");
        scanned += 1;
    }
    assert_eq!(
        scanned, present,
        "rows in the table: only the writers' rows"
    );
    present
}

#[test]
#[ignore = "needs root and network namespaces: run bench/partition.sh"]
fn a_data_node_cut_off_from_two_node_groups_shuts_down_and_rejoins() {
    partition(
        0,
        &[2, 3, 4, 5],
        "a node group has no node left on this side",
        false,
    );
}

#[test]
#[ignore = "needs root and network namespaces: run bench/partition.sh"]
fn a_split_in_half_is_won_by_the_side_the_arbitrator_picks() {
    partition(1, &[2, 3], "no answer from the arbitrator", true);
}

/// Cuts [`CUT_NODE`] off a cluster of `nodes` (2 replicas); its log must
/// give `reason` for its shutdown; `arbitrated`: the survivors' side had to
/// win the arbitrator's vote (else no side asks).
fn partition(layout: u8, nodes: &[u8], reason: &str, arbitrated: bool) {
    let net = Net::create(layout, nodes).unwrap_or_else(|e| {
        panic!("not run: this machine cannot make the network (needs root and ip netns): {e}")
    });
    let dir = scratch_dir(layout);
    let mut processes = start(&net, &dir, nodes);
    let connect = processes.connect.clone();
    wait_until("cluster start", Duration::from_millis(START_MAX_MS), || {
        all_started(&show(&connect), nodes)
    });

    let cluster = Cluster::connect(&connect).expect("connect");
    let session = cluster.session().expect("session");
    let def = id_value_table(TABLE);
    session.create_table(&def).expect("create the table");

    // The main writer retries a row until it commits; the cut-off side's
    // writer gives a row up after a few attempts, to keep asking its node.
    let main = Writer::start(&connect, None, 0, 100_000);
    let cut_side = Writer::start(
        &connect,
        Some(&net.port(CUT_NODE).netns),
        CUT_SIDE_KEY_BASE,
        3,
    );
    wait_until(
        "commits before the cut",
        Duration::from_millis(START_MAX_MS),
        || {
            main.commits() >= COMMITS_BEFORE_CUT
                && cut_side.commits() >= CUT_SIDE_COMMITS_BEFORE_CUT
        },
    );
    let shown = show(&connect);
    processes
        .node_pids
        .extend(shown.iter().filter_map(|n| n.pid));
    let cut_pid = shown
        .iter()
        .find(|n| n.id == CUT_NODE)
        .and_then(|n| n.pid)
        .unwrap_or_else(|| panic!("node {CUT_NODE}'s pid: {shown:?}"));
    let president = shown.iter().find_map(|n| n.members.first().copied());
    assert_eq!(
        president,
        Some(CUT_NODE),
        "the node cut off is the president: {shown:?}"
    );

    net.cut(CUT_NODE);
    let cut_at = Instant::now();
    let survivors: Vec<u8> = nodes.iter().copied().filter(|n| *n != CUT_NODE).collect();
    let takeover = wait_until(
        "view without the cut-off node",
        Duration::from_millis(TAKEOVER_MAX_MS),
        || all_started(&show(&connect), &survivors),
    );
    let took_over_at = cut_at + takeover;
    let probes_at_takeover = lock(&cut_side.log).attempts;
    let exited = wait_until(
        "exit of the cut-off node's process",
        Duration::from_millis(EXIT_MAX_MS),
        || !alive(cut_pid),
    );
    // How often the cut-off side asked its node while both sides lived.
    let probes = lock(&cut_side.log).attempts - probes_at_takeover;
    wait_until(
        "main writer's commit after the takeover",
        Duration::from_millis(PROGRESS_AFTER_CUT_MAX_MS),
        || {
            lock(&main.log)
                .committed
                .last()
                .is_some_and(|(_, at)| *at > took_over_at)
        },
    );
    std::thread::sleep(Duration::from_millis(WRITE_AFTER_RECOVERY_MS));
    let node_log =
        std::fs::read_to_string(dir.join(format!("node{CUT_NODE}.log"))).unwrap_or_default();
    assert!(
        node_log.contains(reason),
        "node {CUT_NODE}'s log gives the reason {reason:?} for its shutdown:\n{node_log}"
    );
    let cluster_log = cluster_log(&dir);
    let won = format!("arbitration won by node {}", CUT_NODE + 1);
    if arbitrated {
        assert!(
            cluster_log.contains(&won),
            "the survivors asked the arbitrator and won:\n{cluster_log}"
        );
    } else {
        assert!(
            !cluster_log.contains("arbitration"),
            "nobody needed the arbitrator:\n{cluster_log}"
        );
    }
    let (gap, recovered, cut_side_after) = {
        let main_log = lock(&main.log);
        // The survivors served this writer all along: it never found no
        // data node started (711) or connected (4009).
        for code in [codes::NOT_STARTED, codes::CLUSTER_FAILURE] {
            assert!(
                !main_log.errors.contains_key(&code),
                "the main writer lost the survivors: errors by code {:?}",
                main_log.errors
            );
        }
        let first_after = main_log
            .committed
            .iter()
            .find(|(_, at)| *at > cut_at)
            .map(|(_, at)| at.duration_since(cut_at));
        let gap = main_log
            .committed
            .windows(2)
            .filter(|w| w[1].1 > cut_at)
            .map(|w| w[1].1.duration_since(w[0].1))
            .max()
            .unwrap_or_default();
        let cut_side_log = lock(&cut_side.log);
        let late: Vec<u64> = cut_side_log
            .committed
            .iter()
            .filter(|(_, at)| *at > took_over_at)
            .map(|(key, _)| *key)
            .collect();
        // No two live halves: once the survivors run without it, the cut-off
        // node commits nothing.
        assert!(
            late.is_empty(),
            "the cut-off node committed rows {late:?} after the survivors took over"
        );
        let after_cut = cut_side_log
            .committed
            .iter()
            .filter(|(_, at)| *at > cut_at)
            .count();
        (gap, first_after, after_cut)
    };

    net.heal(CUT_NODE);
    let healed_at = Instant::now();
    let rejoined = wait_until(
        "the cut-off node's rejoin",
        Duration::from_millis(REJOIN_MAX_MS),
        || all_started(&show(&connect), nodes),
    );
    // It serves again: its writer commits through it (and the others).
    let cut_side_before = cut_side.commits();
    wait_until(
        "the rejoined side's writer commits",
        Duration::from_millis(PROGRESS_AFTER_CUT_MAX_MS),
        || cut_side.commits() > cut_side_before + 10,
    );
    let main_log = main.finish(Duration::from_millis(PROGRESS_AFTER_CUT_MAX_MS));
    let cut_side_log = cut_side.finish(Duration::from_millis(PROGRESS_AFTER_CUT_MAX_MS));
    for log in [&main_log, &cut_side_log] {
        assert!(
            log.wrong.is_empty(),
            "errors a writer may not see: {:?}",
            log.wrong
        );
    }
    let rows = verify_rows(&session, &[&main_log, &cut_side_log]);

    // The rejoined node holds everything: with its node group partner
    // gone it alone serves its group's rows.
    let shown = show(&connect);
    processes
        .node_pids
        .extend(shown.iter().filter_map(|n| n.pid));
    let partner = CUT_NODE + 1;
    let partner_pid = shown
        .iter()
        .find(|n| n.id == partner)
        .and_then(|n| n.pid)
        .unwrap_or_else(|| panic!("node {partner}'s pid: {shown:?}"));
    let angel = processes.children[usize::from(partner - 1)].id();
    sigkill(u64::from(angel));
    sigkill(partner_pid);
    let alone: Vec<u8> = nodes.iter().copied().filter(|n| *n != partner).collect();
    wait_until(
        "view without the partner",
        Duration::from_millis(TAKEOVER_MAX_MS),
        || all_started(&show(&connect), &alone),
    );
    let rows_again = verify_rows(&session, &[&main_log, &cut_side_log]);
    assert_eq!(rows_again, rows, "the rejoined node has every row");

    eprintln!(
        "layout {nodes:?}: node {CUT_NODE} cut off; survivors' view without it {takeover:?} after the cut, \
         its process gone {exited:?} after; main writer: first commit {recovered:?} after the cut, longest gap \
         spanning the cut {gap:?}, {} commits, errors by code {:?}; cut-off side's writer: {} commits after \
         the cut, none after the takeover ({probes} attempts from the takeover to the node's exit), errors by \
         code {:?}; healed: rejoined {rejoined:?} later (healed {:?} ago); {rows} rows verified, again from the \
         rejoined node alone",
        main_log.committed.len(),
        main_log.errors,
        cut_side_after,
        cut_side_log.errors,
        healed_at.elapsed(),
    );
    drop(processes);
    let _ = std::fs::remove_dir_all(&dir);
}
