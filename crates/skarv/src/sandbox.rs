//! `skarv sandbox`: a whole cluster on this machine with one command.
//!
//! This is the first thing a new user runs, so it must work with no flags:
//! it writes a small `config.ini` into a directory of its own, starts one
//! management server and the data nodes as child processes of this binary,
//! waits until every data node is started, then starts the SQL nodes
//! (`skarv sql`, one by default) and waits until each accepts MySQL
//! connections, and tells the user how to connect.
//! In the foreground it stays until Ctrl-C and then stops the cluster in
//! order (SQL nodes, data nodes, then the mgmd); with `--detach` it leaves the cluster
//! running and records the process ids in `sandbox.json`, which
//! `skarv sandbox --stop` reads to stop it later.
//!
//! The children run in sessions of their own, so a Ctrl-C in the terminal
//! reaches only this process, which then stops them through the mgmd rather
//! than letting them all die at once.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use mgmd::MgmClient;
use serde::{Deserialize, Serialize};
use signal::{NodeState, NodeStatusEntry, NodeType};

/// Prints a line for the user. A closed stdout (a pipe whose reader left)
/// must not end the sandbox before it has stopped its processes, so write
/// errors are ignored where `println!` would panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stdout(), $($arg)*);
    }};
}

/// As `say!`, on stderr: problems, and the logs that explain them.
macro_rules! warn {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stderr(), $($arg)*);
    }};
}

const DIR_DEFAULT: &str = "./skarv-sandbox";
const DATA_NODES_DEFAULT: u32 = 2;
const DATA_NODES_MAX: u32 = 48;
const REPLICAS_DEFAULT: u32 = 2;
const REPLICAS_MAX: u32 = 4;
/// Not NDB's 1186, so a sandbox never collides with a real mgmd.
const BASE_PORT_DEFAULT: u16 = 21860;
/// `[api]` slots left free for native clients (`skarv bench`, tests).
const API_SLOTS: u32 = 4;
/// SQL nodes (`skarv sql`, each in a `[mysqld]` slot of its own).
const SQL_NODES_DEFAULT: u32 = 1;
const SQL_NODES_MAX: u32 = 16;
/// Most cluster connections per SQL node (16 SQL nodes of 8 and 48 data
/// nodes stay under node id 255).
const SQL_CONNECTION_POOL_MAX: u32 = 8;
const MGMD_NODE_ID: u32 = 1;
const FIRST_DATA_NODE_ID: u32 = 2;
/// Everything listens on loopback only: a sandbox is not reachable from other machines.
const HOST: &str = "127.0.0.1";
/// Small, so that the sandbox fits on a laptop next to everything else.
const DATA_MEMORY: &str = "256M";
/// Operation records per TC instance: a SQL statement's rows each hold one
/// until it commits, and one multi-row INSERT of sysbench's `bulk_insert`
/// holds tens of thousands, so 8 at once need more than NDB's 32,768 (NDB
/// 8.0 sizes these records from TransactionMemory instead). A record
/// is counted, not preallocated: a high bound costs nothing idle.
const MAX_NO_OF_CONCURRENT_OPERATIONS: u32 = 1_000_000;
/// Redo log files per part: with NDB's 4 parts of 16 MiB files, 256 MiB of
/// redo per data node, a quarter of NDB's default, so that a sandbox (and
/// every test cluster) starts in about a second: a node writes its whole
/// redo log (zeros, then fsync) at its first start.
const NO_OF_FRAGMENT_LOG_FILES: u32 = 4;

const CONFIG_FILE: &str = "config.ini";
const RECORD_FILE: &str = "sandbox.json";
const MGMD_LOG_FILE: &str = "mgmd.log";

/// How long the whole cluster may take to start before the sandbox gives up.
const START_TIMEOUT_MS: u64 = 60_000;
const START_POLL_MS: u64 = 100;
/// How long the SQL nodes may take, once the data nodes are started, to
/// accept connections: a SQL node that cannot start is told, not awaited.
const SQL_START_TIMEOUT_MS: u64 = 30_000;
/// How long one probe of a SQL node's port may take.
const SQL_PROBE_TIMEOUT_MS: u64 = 500;
/// How often the foreground sandbox asks the mgmd for node states.
const WATCH_POLL_MS: u64 = 500;
/// How often waits look at the stop flag and at the children.
const WAIT_POLL_MS: u64 = 100;
/// How long an ordered shutdown through the mgmd may take before SIGKILL.
const SHUTDOWN_WAIT_MS: u64 = 20_000;
/// How long processes get after SIGTERM (when the mgmd did not answer) before SIGKILL.
const TERM_WAIT_MS: u64 = 10_000;
/// How long the kernel gets to remove SIGKILLed processes.
const KILL_WAIT_MS: u64 = 5_000;
const MGM_CONNECT_TIMEOUT_MS: u64 = 1_000;
/// How long a `show` may take before the watcher gives up on that
/// connection: short, so that a wedged mgmd does not delay a Ctrl-C much.
const MGM_SHOW_TIMEOUT_MS: u64 = 3_000;
const LOG_TAIL_LINES: usize = 20;
const LOG_TAIL_READ_BYTES: u64 = 64 * 1024;

#[derive(clap::Args, Debug)]
pub struct SandboxArgs {
    /// Directory for the configuration, the data, the logs and sandbox.json.
    #[arg(long, default_value = DIR_DEFAULT)]
    pub dir: PathBuf,
    /// Number of data nodes (1 to 48, a multiple of --replicas).
    #[arg(long, default_value_t = DATA_NODES_DEFAULT)]
    pub data_nodes: u32,
    /// Copies of each row (NoOfReplicas, 1 to 4).
    #[arg(long, default_value_t = REPLICAS_DEFAULT)]
    pub replicas: u32,
    /// Number of SQL nodes (`skarv sql`, MySQL's protocol; 0 to 16), each
    /// in a `[mysqld]` slot, numbered after the data nodes.
    #[arg(long, default_value_t = SQL_NODES_DEFAULT)]
    pub sql_nodes: u32,
    /// Cluster connections of each SQL node (its
    /// --ndb-cluster-connection-pool, 1 to 8): each beyond the first gets a
    /// `[mysqld]` slot of its own after the `[api]` slots. By default what
    /// `skarv sql` takes by default.
    #[arg(long)]
    pub sql_connection_pool: Option<u32>,
    /// Port of the mgmd; data node or SQL node N listens on base port + N.
    #[arg(long, default_value_t = BASE_PORT_DEFAULT)]
    pub base_port: u16,
    /// Return once the cluster is started and leave it running
    /// (stop it with `skarv sandbox --stop`).
    #[arg(long)]
    pub detach: bool,
    /// A data node parameter for config.ini's `[ndbd default]`, e.g.
    /// `--set TimeBetweenEpochs=20`; repeat for more. `DataMemory`,
    /// `ThreadConfig` and `NoOfFragmentLogFiles` replace the sandbox's own;
    /// `NoOfReplicas` is --replicas.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// On a small machine (at most 2 CPUs per data node, where each node
    /// runs on one busy thread), bind each data node's thread to a CPU of
    /// its own when there are as many CPUs as data nodes (NDB's ThreadConfig
    /// cpubind): faster for write-heavy loads, slower where the clients
    /// need those CPUs (2 × 2 on 2 CPUs: updates +13 %, reads -15 %). No
    /// effect otherwise.
    #[arg(long)]
    pub bind_cpus: bool,
    /// Stop the sandbox running in --dir.
    #[arg(long, conflicts_with_all = [
        "detach", "data_nodes", "replicas", "sql_nodes", "base_port", "set", "bind_cpus",
        "sql_connection_pool",
    ])]
    pub stop: bool,
}

pub fn run(args: SandboxArgs) -> Result<(), String> {
    if args.stop {
        stop_recorded(&args.dir)
    } else {
        start(&args)
    }
}

// ---------------------------------------------------------------- layout

/// The validated shape of a sandbox cluster: which node ids, which ports.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Layout {
    data_nodes: u32,
    replicas: u32,
    sql_nodes: u32,
    /// Cluster connections per SQL node.
    sql_connection_pool: u32,
    base_port: u16,
    /// `--set`: (name, value) for `[ndbd default]`, in the order given.
    ndbd_params: Vec<(String, String)>,
    /// `--bind-cpus`.
    bind_cpus: bool,
}

impl Layout {
    fn data_node_ids(&self) -> impl Iterator<Item = u32> {
        FIRST_DATA_NODE_ID..FIRST_DATA_NODE_ID + self.data_nodes
    }

    /// The `[mysqld]` slots, right after the data nodes.
    fn sql_node_ids(&self) -> impl Iterator<Item = u32> {
        let first = FIRST_DATA_NODE_ID + self.data_nodes;
        first..first + self.sql_nodes
    }

    /// Whether the data nodes and the SQL nodes run under batch
    /// scheduling (`BatchScheduling`, the SQL node's
    /// `--batch-scheduling`): as `--set BatchScheduling=` says, else
    /// when the sandbox runs SQL nodes. Its gain comes from both sides of
    /// a hand-over sharing the host's CPUs with the clients (sysbench on 2
    /// CPUs: +15 to +27 %); without SQL nodes (native API clients, flex)
    /// it cost 3-12 %. The value's forms are config.ini's booleans; a bad
    /// one is refused when the file is parsed.
    fn batch_scheduling(&self) -> bool {
        match self
            .ndbd_params
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("BatchScheduling"))
        {
            Some((_, value)) => matches!(
                value.to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "y" | "on"
            ),
            None => self.sql_nodes > 0,
        }
    }

    fn api_node_ids(&self) -> impl Iterator<Item = u32> {
        let first = FIRST_DATA_NODE_ID + self.data_nodes + self.sql_nodes;
        first..first + API_SLOTS
    }

    /// The `[mysqld]` slots of the cluster connections of the SQL node
    /// `position` (0-based) beyond its first, after the `[api]` slots.
    fn sql_pool_node_ids(&self, position: u32) -> impl Iterator<Item = u32> {
        let extra = self.sql_connection_pool - 1;
        let first = FIRST_DATA_NODE_ID + self.data_nodes + self.sql_nodes + API_SLOTS;
        let first = first + position * extra;
        first..first + extra
    }

    fn mgmd_port(&self) -> u16 {
        self.base_port
    }

    /// Where the mgmd serves Prometheus metrics: base port + its node id,
    /// as every other node's port is base port + its node id.
    fn metrics_port(&self) -> u16 {
        let port = u32::from(self.base_port) + MGMD_NODE_ID;
        u16::try_from(port).expect("validate() keeps every port within u16")
    }

    /// Data node or SQL node `node_id` listens on base port + `node_id`.
    fn node_port(&self, node_id: u32) -> u16 {
        assert!(self
            .data_node_ids()
            .chain(self.sql_node_ids())
            .any(|id| id == node_id));
        let port = u32::from(self.base_port) + node_id;
        u16::try_from(port).expect("validate() keeps every port within u16")
    }

    fn data_node_port(&self, node_id: u32) -> u16 {
        assert!(self.data_node_ids().any(|id| id == node_id));
        self.node_port(node_id)
    }

    /// Where MySQL clients reach SQL node `node_id`.
    fn sql_node_port(&self, node_id: u32) -> u16 {
        assert!(self.sql_node_ids().any(|id| id == node_id));
        self.node_port(node_id)
    }

    fn sql_ports(&self) -> Vec<u16> {
        self.sql_node_ids()
            .map(|id| self.sql_node_port(id))
            .collect()
    }

    /// Every port the sandbox listens on, the mgmd's first.
    fn ports(&self) -> Vec<u16> {
        let mut ports = vec![self.mgmd_port(), self.metrics_port()];
        ports.extend(self.data_node_ids().map(|id| self.data_node_port(id)));
        ports.extend(self.sql_ports());
        ports
    }

    fn connect_string(&self) -> String {
        format!("{HOST}:{}", self.mgmd_port())
    }

    fn node_groups(&self) -> u32 {
        self.data_nodes / self.replicas
    }
}

fn validate(args: &SandboxArgs) -> Result<Layout, String> {
    if !(1..=REPLICAS_MAX).contains(&args.replicas) {
        return Err(format!(
            "--replicas {} is not allowed: use 1 to {REPLICAS_MAX}",
            args.replicas
        ));
    }
    if !(1..=DATA_NODES_MAX).contains(&args.data_nodes) {
        return Err(format!(
            "--data-nodes {} is not allowed: use 1 to {DATA_NODES_MAX}",
            args.data_nodes
        ));
    }
    if args.sql_nodes > SQL_NODES_MAX {
        return Err(format!(
            "--sql-nodes {} is not allowed: use 0 to {SQL_NODES_MAX}",
            args.sql_nodes
        ));
    }
    if !args.data_nodes.is_multiple_of(args.replicas) {
        return Err(format!(
            "--data-nodes {} is not a multiple of --replicas {}: every node group needs {} data nodes",
            args.data_nodes, args.replicas, args.replicas
        ));
    }
    let last_node_id = FIRST_DATA_NODE_ID + args.data_nodes + args.sql_nodes - 1;
    let port_max = u32::from(u16::MAX) - last_node_id;
    if args.base_port == 0 || u32::from(args.base_port) > port_max {
        return Err(format!(
            "--base-port {} is not allowed: with {} data nodes and {} use 1 to {port_max} \
             (data node or SQL node N listens on base port + N)",
            args.base_port,
            args.data_nodes,
            count(args.sql_nodes, "SQL node")
        ));
    }
    let sql_connection_pool = args.sql_connection_pool.unwrap_or_else(|| {
        let default = sql::connection_pool_default(sql::MAX_CONNECTIONS_DEFAULT);
        u32::try_from(default)
            .unwrap_or(1)
            .min(SQL_CONNECTION_POOL_MAX)
    });
    if !(1..=SQL_CONNECTION_POOL_MAX).contains(&sql_connection_pool) {
        return Err(format!(
            "--sql-connection-pool {sql_connection_pool} is not allowed: use 1 to \
             {SQL_CONNECTION_POOL_MAX}"
        ));
    }
    let ndbd_params = args
        .set
        .iter()
        .map(|set| parse_set(set))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Layout {
        data_nodes: args.data_nodes,
        replicas: args.replicas,
        sql_nodes: args.sql_nodes,
        sql_connection_pool,
        base_port: args.base_port,
        ndbd_params,
        bind_cpus: args.bind_cpus,
    })
}

/// One `--set NAME=VALUE`. What the value means is checked when the
/// written config.ini is parsed (`config_ini`).
fn parse_set(set: &str) -> Result<(String, String), String> {
    let Some((name, value)) = set.split_once('=') else {
        return Err(format!(
            "--set {set}: expected NAME=VALUE, e.g. --set TimeBetweenEpochs=20"
        ));
    };
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "--set {set}: {name:?} is not a parameter name (letters and digits)"
        ));
    }
    if name.eq_ignore_ascii_case("NoOfReplicas") {
        return Err(format!(
            "--set {set}: the sandbox's layout comes from --data-nodes and --replicas; use --replicas"
        ));
    }
    // config.ini has no quoting (see `config_path_text`).
    if value.is_empty() || value.contains(['#', ';', '\n', '\r']) {
        return Err(format!(
            "--set {set}: the value must be non-empty without '#', ';' or a line break"
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

// ---------------------------------------------------------------- config.ini

fn mgmd_data_dir(dir: &Path) -> PathBuf {
    dir.join("mgmd")
}

fn data_node_dir(dir: &Path, node_id: u32) -> PathBuf {
    dir.join(format!("node{node_id}"))
}

fn data_node_log(dir: &Path, node_id: u32) -> PathBuf {
    dir.join(format!("node{node_id}.log"))
}

fn sql_node_log(dir: &Path, node_id: u32) -> PathBuf {
    dir.join(format!("sql{node_id}.log"))
}

/// `dir` as text that config.ini can hold.
fn config_path_text(dir: &Path) -> Result<&str, String> {
    let dir_text = dir.to_str().ok_or_else(|| {
        format!(
            "the sandbox directory {} is not valid UTF-8; config.ini cannot name it",
            dir.display()
        )
    })?;
    // config.ini has no quoting: a comment character or a line break in a
    // path would silently change its meaning.
    if dir_text.contains(['#', ';', '\n', '\r']) {
        return Err(format!(
            "the sandbox directory {dir_text} contains '#', ';' or a line break, which config.ini \
             cannot hold: choose another --dir"
        ));
    }
    Ok(dir_text)
}

/// CPUs per data node at or below which a sandbox's data nodes run their
/// LDM instance and their receive loop on the main thread
/// (`ThreadConfig=ldm={count=0},recv={count=0}`): with the clients on the
/// same CPUs, one more busy thread per node costs a thread hop (a wake-up
/// and a context switch) on every operation or batch and buys no parallelism.
const FOLD_LDM_CPUS_PER_NODE_MAX: usize = 2;
/// The folded layout's threads (`FOLD_LDM_CPUS_PER_NODE_MAX`). With
/// `--bind-cpus`, where several such nodes share a machine of as many CPUs
/// or more, each node's main thread is bound to a CPU of its own
/// (`cpubind`): the scheduler otherwise moves the busy threads from CPU to
/// CPU, their caches' contents left behind. Measured, 2 nodes × 2 replicas
/// on 2 CPUs, three alternating runs each: updates (`-t 2 -p 512`)
/// 214k/266k/262k → 291k/297k/297k per second, but reads (`-t 4 -p 128`,
/// where the clients need most of the CPU) 915k/960k → 802k/815k; one node
/// bound gained nothing (updates 615k/628k → 609k/580k). So it is a choice,
/// not the default.
const FOLDED_THREADS: &str = "ldm={count=0},recv={count=0}";

/// The CPUs this process may run on, by number (CPU 0 alone when unknown).
fn machine_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is a plain bit array, all zeroes the empty set;
        // sched_getaffinity writes at most its size, and CPU_ISSET reads
        // a bit below CPU_SETSIZE.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    let count = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..count).collect()
}

/// `config.ini` for `layout` on a machine with `cpus` CPUs, with data
/// directories under `dir` (absolute, so that the file means the same
/// whatever directory a process runs in).
fn config_ini(layout: &Layout, dir: &Path, cpu_list: &[usize]) -> Result<String, String> {
    let cpus = cpu_list.len();
    let dir_text = config_path_text(dir)?;
    let mut text = String::new();
    text.push_str(&format!(
        "# A Skarv sandbox cluster, written by `skarv sandbox`: every process runs on this\n\
         # machine and listens on {HOST} only. It is rewritten on every start; to change it,\n\
         # copy it and start `skarv mgmd --config-file <copy>` and `skarv data` yourself.\n\n"
    ));
    text.push_str(&format!(
        "[ndbd default]\n\
         # Copies of each row: data nodes form node groups of this many nodes.\n\
         NoOfReplicas={}\n",
        layout.replicas
    ));
    // A `--set` of a parameter the sandbox sets itself replaces the default.
    let given = |name: &str| {
        layout
            .ndbd_params
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    if !given("DataMemory") {
        text.push_str(&format!(
            "# Memory for rows and indexes on each data node (small: this is a sandbox).\n\
             DataMemory={DATA_MEMORY}\n"
        ));
    }
    if !given("MaxNoOfConcurrentOperations") {
        text.push_str(&format!(
            "# Operation records per TC (NDB: 32768): a statement's rows each hold one until it\n\
             # commits, and a multi-row INSERT may have tens of thousands.\n\
             MaxNoOfConcurrentOperations={MAX_NO_OF_CONCURRENT_OPERATIONS}\n"
        ));
    }
    if !given("NoOfFragmentLogFiles") {
        text.push_str(&format!(
            "# Redo log files per part (NDB: 16): a small redo log, quick to create.\n\
             NoOfFragmentLogFiles={NO_OF_FRAGMENT_LOG_FILES}\n"
        ));
    }
    if !given("BatchScheduling") && layout.batch_scheduling() {
        text.push_str(
            "# SQL nodes, data nodes and clients share this machine's CPUs: a thread woken by\n\
             # another process does not preempt the one running (Linux SCHED_BATCH; the SQL\n\
             # nodes too). Not NDB's; off in a config.ini that does not say.\n\
             BatchScheduling=1\n",
        );
    }
    for (name, value) in &layout.ndbd_params {
        text.push_str(&format!(
            "# Set with `skarv sandbox --set`.\n{name}={value}\n"
        ));
    }
    let folded = cpus / layout.data_nodes.max(1) as usize <= FOLD_LDM_CPUS_PER_NODE_MAX
        && !given("ThreadConfig");
    // `--bind-cpus`, several folded nodes, a CPU each: each node's one busy
    // thread is bound to its own CPU (the clients float).
    let bound =
        layout.bind_cpus && folded && layout.data_nodes > 1 && layout.data_nodes as usize <= cpus;
    if folded && !bound {
        text.push_str(&format!(
            "# {cpus} CPU(s) for {} data node(s) and their clients: each node runs its LDM on\n\
             # its main thread, beside the TC, rather than handing every operation to another thread,\n\
             # and its main thread receives from the network itself (no receive thread).\n\
             ThreadConfig={FOLDED_THREADS}\n",
            layout.data_nodes
        ));
    }
    text.push('\n');
    text.push_str(&format!(
        "[ndb_mgmd]\n\
         # The management server: configuration, node ids, cluster log, `skarv admin`.\n\
         NodeId={MGMD_NODE_ID}\n\
         HostName={HOST}\n\
         # The connect string is {HOST}:{port}.\n\
         PortNumber={port}\n\
         DataDir={}\n\n",
        mgmd_data_dir(Path::new(dir_text)).display(),
        port = layout.mgmd_port(),
    ));
    for (position, node_id) in layout.data_node_ids().enumerate() {
        let node_group = position as u32 / layout.replicas;
        text.push_str(&format!(
            "[ndbd]\n\
             # Data node {node_id}, in node group {node_group}; other nodes reach it on ServerPort.\n\
             NodeId={node_id}\n\
             HostName={HOST}\n\
             ServerPort={}\n\
             DataDir={}\n",
            layout.data_node_port(node_id),
            data_node_dir(Path::new(dir_text), node_id).display(),
        ));
        if bound {
            let cpu = cpu_list[position];
            text.push_str(&format!(
                "# {cpus} CPU(s) for {} data nodes and their clients: its LDM and receiving on its\n\
                 # main thread (as on any small machine), which keeps to CPU {cpu}, a CPU of its own.\n\
                 ThreadConfig=main={{cpubind={cpu}}},{FOLDED_THREADS}\n",
                layout.data_nodes
            ));
        }
        text.push('\n');
    }
    for node_id in layout.sql_node_ids() {
        text.push_str(&format!(
            "[mysqld]\n\
             # SQL node {node_id} (`skarv sql`): MySQL clients connect to {HOST}:{}.\n\
             NodeId={node_id}\n\
             HostName={HOST}\n\n",
            layout.sql_node_port(node_id)
        ));
    }
    for node_id in layout.api_node_ids() {
        text.push_str(&format!(
            "[api]\n\
             # A slot for an API node: `skarv bench`, `skarv sql` or a program using skarv-client.\n\
             NodeId={node_id}\n\n"
        ));
    }
    for (position, sql_node) in layout.sql_node_ids().enumerate() {
        let position = u32::try_from(position).unwrap_or(u32::MAX);
        for node_id in layout.sql_pool_node_ids(position) {
            text.push_str(&format!(
                "[mysqld]\n\
                 # Another cluster connection of SQL node {sql_node} (--ndb-cluster-connection-pool).\n\
                 NodeId={node_id}\n\
                 HostName={HOST}\n\n"
            ));
        }
    }
    if !layout.ndbd_params.is_empty() {
        // An unknown name or a value out of range is refused here, before
        // any process starts, with the parser's message.
        config::parse(&text, CONFIG_FILE).map_err(|error| format!("--set: {error}"))?;
    }
    Ok(text)
}

/// Refuses to reuse data written by a sandbox of another shape: the data
/// nodes would restart into node groups that no longer match their files.
fn check_existing_layout(dir: &Path, dir_shown: &str, layout: &Layout) -> Result<(), String> {
    let path = dir.join(CONFIG_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(());
    };
    // A file we cannot read as a configuration is simply rewritten.
    let Ok(old) = config::parse(&text, &path.display().to_string()) else {
        return Ok(());
    };
    let old_ids: Vec<u32> = old
        .data_nodes
        .iter()
        .map(|node| u32::from(node.node_id.get()))
        .collect();
    let new_ids: Vec<u32> = layout.data_node_ids().collect();
    let old_replicas = old
        .data_nodes
        .first()
        .map_or(layout.replicas, |node| node.params.no_of_replicas);
    if old_ids == new_ids && old_replicas == layout.replicas {
        return Ok(());
    }
    let has_data = old
        .data_nodes
        .iter()
        .any(|node| fs::read_dir(&node.data_dir).is_ok_and(|mut entries| entries.next().is_some()));
    if !has_data {
        return Ok(());
    }
    Err(format!(
        "{dir_shown} holds the data of a sandbox with {} data nodes and {old_replicas} replicas, \
         which does not fit --data-nodes {} --replicas {}: pass the same --data-nodes and \
         --replicas, use another --dir, or delete {dir_shown} to start afresh",
        old_ids.len(),
        layout.data_nodes,
        layout.replicas
    ))
}

/// Binds each port once, so that a busy port is named before any process starts.
fn check_ports_free(layout: &Layout) -> Result<(), String> {
    for port in layout.ports() {
        if let Err(error) = TcpListener::bind((HOST, port)) {
            let first = layout.data_node_port(FIRST_DATA_NODE_ID);
            let last = layout.data_node_port(FIRST_DATA_NODE_ID + layout.data_nodes - 1);
            let sql = match layout.sql_ports()[..] {
                [] => String::new(),
                [one] => format!(", {one} for the SQL node"),
                [first, .., last] => format!(", {first} to {last} for the SQL nodes"),
            };
            return Err(format!(
                "port {port} on {HOST} is not free ({error}); the sandbox needs port {} for the \
                 mgmd, {} for its metrics, {first} to {last} for the data nodes{sql}: choose \
                 others with --base-port",
                layout.mgmd_port(),
                layout.metrics_port()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- sandbox.json

/// What `--detach` leaves behind for `--stop`, and what keeps a second
/// sandbox out of a directory whose sandbox still runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct SandboxRecord {
    connect: String,
    mgmd_pid: u32,
    data_node_angel_pids: Vec<u32>,
    base_port: u16,
    /// SQL nodes in node id order (after the data nodes). Absent from
    /// the records of sandboxes older than SQL nodes.
    #[serde(default)]
    sql_node_pids: Vec<u32>,
    /// Where MySQL clients connect, one port per SQL node.
    #[serde(default)]
    sql_ports: Vec<u16>,
}

/// `Ok(None)` when there is no record.
fn read_record(dir: &Path) -> Result<Option<SandboxRecord>, String> {
    let path = dir.join(RECORD_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| format!("{} is not a sandbox record: {error}", path.display()))
}

fn write_record(dir: &Path, record: &SandboxRecord) -> Result<(), String> {
    let path = dir.join(RECORD_FILE);
    let temporary = dir.join(format!("{RECORD_FILE}.tmp"));
    let text = serde_json::to_string_pretty(record)
        .map_err(|error| format!("cannot encode the sandbox record: {error}"))?;
    // Written aside and renamed, so that a reader never sees half a record.
    fs::write(&temporary, text + "\n")
        .and_then(|()| fs::rename(&temporary, &path))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

fn remove_record(dir: &Path) {
    let path = dir.join(RECORD_FILE);
    if let Err(error) = fs::remove_file(&path) {
        if error.kind() != io::ErrorKind::NotFound {
            warn!("skarv sandbox: cannot remove {}: {error}", path.display());
        }
    }
}

/// A record whose processes still live means a running sandbox; one whose
/// processes are all gone (or that cannot be read) is stale and replaced.
fn refuse_if_running(dir: &Path, dir_shown: &str) -> Result<(), String> {
    let record = match read_record(dir) {
        Ok(Some(record)) => record,
        Ok(None) => return Ok(()),
        Err(error) => {
            warn!("skarv sandbox: replacing an unreadable record: {error}");
            return Ok(());
        }
    };
    if !Processes::from_record(&record).any_alive() {
        return Ok(());
    }
    Err(format!(
        "a sandbox is already running in {dir_shown} (mgmd pid {}); stop it with \
         `skarv sandbox --stop --dir {dir_shown}`",
        record.mgmd_pid
    ))
}

// ---------------------------------------------------------------- processes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Mgmd,
    DataNode(u32),
    SqlNode(u32),
}

impl Role {
    /// The `skarv` subcommand that runs this role: also how a live process
    /// is told apart from an unrelated one that reused its pid.
    fn subcommand(self) -> &'static str {
        match self {
            Role::Mgmd => "mgmd",
            Role::DataNode(_) => "data",
            Role::SqlNode(_) => "sql",
        }
    }

    fn describe(self) -> String {
        match self {
            Role::Mgmd => format!("the management server (node {MGMD_NODE_ID})"),
            Role::DataNode(node_id) => format!("data node {node_id}"),
            Role::SqlNode(node_id) => format!("SQL node {node_id}"),
        }
    }

    fn log_path(self, dir: &Path) -> PathBuf {
        match self {
            Role::Mgmd => dir.join(MGMD_LOG_FILE),
            Role::DataNode(node_id) => data_node_log(dir, node_id),
            Role::SqlNode(node_id) => sql_node_log(dir, node_id),
        }
    }
}

/// One process of the sandbox: a child of this process, or one named by a
/// record (then it is not ours to wait for, only to signal).
struct Process {
    role: Role,
    pid: u32,
    child: Option<Child>,
}

impl Process {
    fn spawn(exe: &Path, role: Role, arguments: &[String], dir: &Path) -> Result<Process, String> {
        let log_path = role.log_path(dir);
        let log = open_log(&log_path, exe, arguments)?;
        let log_for_stderr = log
            .try_clone()
            .map_err(|error| format!("cannot share {}: {error}", log_path.display()))?;
        let mut command = Command::new(exe);
        command
            .args(arguments)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_for_stderr);
        // SAFETY: the closure runs in the child between fork and exec and only
        // calls setsid, which is async-signal-safe, and reads errno.
        unsafe {
            command.pre_exec(|| {
                // A session of its own: the terminal's Ctrl-C and hangup reach
                // only the sandbox, which stops its children in order.
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|error| {
            format!(
                "cannot start {} ({} {}): {error}",
                role.describe(),
                exe.display(),
                arguments.join(" ")
            )
        })?;
        let pid = child.id();
        assert!(pid > 0);
        Ok(Process {
            role,
            pid,
            child: Some(child),
        })
    }

    /// A process named by a record: not a child of ours.
    fn recorded(role: Role, pid: u32) -> Process {
        Process {
            role,
            pid,
            child: None,
        }
    }

    fn is_alive(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(_))) => false,
            Some(Ok(None)) => true,
            Some(Err(_)) | None => pid_alive(self.pid, self.role.subcommand()),
        }
    }

    /// How the process ended, if it is a child of ours that has ended.
    fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
    }

    /// Signals the process and its process group (which holds the data node
    /// an angel started), after making sure the pid is still ours.
    fn signal(&mut self, signal: libc::c_int) {
        if !self.is_alive() {
            return;
        }
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return;
        };
        assert!(pid > 0);
        // SAFETY: kill has no memory effects; a negative pid names the process
        // group, which setsid made equal to the pid.
        unsafe {
            libc::kill(-pid, signal);
            libc::kill(pid, signal);
        }
    }
}

/// Opens a log in append mode (logs outlive restarts, as the data does)
/// and marks where this start begins.
fn open_log(path: &Path, exe: &Path, arguments: &[String]) -> Result<File, String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("cannot open the log {}: {error}", path.display()))?;
    writeln!(
        file,
        "==== skarv sandbox starts: {} {}",
        exe.display(),
        arguments.join(" ")
    )
    .map_err(|error| format!("cannot write the log {}: {error}", path.display()))?;
    Ok(file)
}

/// Whether `pid` is a live (not zombie) process running the `skarv`
/// subcommand `subcommand`. Where /proc is missing, existence alone counts.
fn pid_alive(pid: u32, subcommand: &str) -> bool {
    let Ok(raw_pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if raw_pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 checks existence and permission and delivers nothing.
    let exists = unsafe { libc::kill(raw_pid, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = fs::read_to_string(proc_dir.join("stat")) else {
        return true;
    };
    // The state follows the parenthesised command name, which may itself hold ')'.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    if state == Some("Z") || state == Some("X") {
        return false;
    }
    match fs::read(proc_dir.join("cmdline")) {
        Ok(cmdline) => cmdline
            .split(|byte| *byte == 0)
            .skip(1)
            .any(|argument| argument == subcommand.as_bytes()),
        Err(_) => true,
    }
}

// ---------------------------------------------------------------- stop flag

/// SIGINT, SIGTERM and SIGHUP received; the second one kills at once.
static STOP_SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    STOP_SIGNALS.fetch_add(1, Ordering::SeqCst);
}

fn stop_signals() -> u32 {
    STOP_SIGNALS.load(Ordering::SeqCst)
}

fn install_stop_handlers() -> Result<(), String> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an all-zero sigaction is a valid value to fill in; the
        // handler only touches an atomic, which is async-signal-safe.
        let result = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            // Restart interrupted calls: the flag is polled, not delivered by EINTR.
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if result != 0 {
            return Err(format!(
                "cannot install the handler for signal {signal}: {}",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- the process group

/// The processes of one sandbox and the mgmd that can stop them in order.
struct Processes {
    /// The mgmd's connect string.
    connect: String,
    /// SQL nodes, then data nodes, each in node id order, then the mgmd:
    /// the order of stopping by signal.
    list: Vec<Process>,
}

impl Processes {
    fn from_record(record: &SandboxRecord) -> Processes {
        let mut list: Vec<Process> = Vec::new();
        let first_sql = FIRST_DATA_NODE_ID
            + u32::try_from(record.data_node_angel_pids.len()).unwrap_or(u32::MAX);
        for (position, pid) in record.sql_node_pids.iter().enumerate() {
            let node_id = first_sql.saturating_add(u32::try_from(position).unwrap_or(u32::MAX));
            list.push(Process::recorded(Role::SqlNode(node_id), *pid));
        }
        for (position, pid) in record.data_node_angel_pids.iter().enumerate() {
            let node_id = FIRST_DATA_NODE_ID + u32::try_from(position).unwrap_or(u32::MAX);
            list.push(Process::recorded(Role::DataNode(node_id), *pid));
        }
        list.push(Process::recorded(Role::Mgmd, record.mgmd_pid));
        Processes {
            connect: record.connect.clone(),
            list,
        }
    }

    fn record(&self, layout: &Layout) -> SandboxRecord {
        let mut record = SandboxRecord {
            connect: self.connect.clone(),
            mgmd_pid: 0,
            data_node_angel_pids: Vec::new(),
            base_port: layout.base_port,
            sql_node_pids: Vec::new(),
            sql_ports: Vec::new(),
        };
        for process in &self.list {
            match process.role {
                Role::Mgmd => record.mgmd_pid = process.pid,
                Role::DataNode(_) => record.data_node_angel_pids.push(process.pid),
                Role::SqlNode(node_id) => {
                    record.sql_node_pids.push(process.pid);
                    record.sql_ports.push(layout.sql_node_port(node_id));
                }
            }
        }
        assert!(record.mgmd_pid != 0, "the mgmd is started first");
        record
    }

    /// Adds a data node ahead of the mgmd, keeping the stopping order.
    fn push_data_node(&mut self, process: Process) {
        assert!(matches!(process.role, Role::DataNode(_)));
        let mgmd = self.mgmd_index();
        self.list.insert(mgmd, process);
    }

    /// Adds a SQL node after the others, ahead of the data nodes: SQL
    /// nodes are clients of the cluster and stop first.
    fn push_sql_node(&mut self, process: Process) {
        assert!(matches!(process.role, Role::SqlNode(_)));
        let after = self
            .list
            .iter()
            .take_while(|p| matches!(p.role, Role::SqlNode(_)))
            .count();
        self.list.insert(after, process);
    }

    fn mgmd_index(&self) -> usize {
        assert!(!self.list.is_empty());
        let index = self.list.len() - 1;
        assert_eq!(self.list[index].role, Role::Mgmd);
        index
    }

    /// Index of the first process that has exited, if any.
    fn first_exited(&mut self) -> Option<usize> {
        self.list.iter_mut().position(|process| !process.is_alive())
    }

    fn any_alive(&mut self) -> bool {
        self.list.iter_mut().any(Process::is_alive)
    }

    /// A connection for polling `show`, or none while the mgmd does not answer.
    fn connect_mgmd(&self) -> Option<MgmClient> {
        let mut client =
            MgmClient::connect(&self.connect, Duration::from_millis(MGM_CONNECT_TIMEOUT_MS))
                .ok()?;
        client.set_request_timeout(Duration::from_millis(MGM_SHOW_TIMEOUT_MS));
        Some(client)
    }

    /// Waits until every process has exited; false on timeout or on a
    /// second stop signal (the user asks to kill at once).
    fn wait_for_exit(&mut self, timeout_ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            if !self.any_alive() {
                return true;
            }
            if Instant::now() >= deadline || stop_signals() >= 2 {
                return false;
            }
            thread::sleep(Duration::from_millis(WAIT_POLL_MS));
        }
    }

    /// Stops every process: through the mgmd in order (data nodes, then
    /// itself) if it answers, else by SIGTERM; whatever is left after the
    /// grace time is killed. False if something outlived even SIGKILL.
    fn stop_all(&mut self) -> bool {
        if !self.any_alive() {
            return true;
        }
        self.stop_sql_nodes();
        let grace_ms = match self.request_shutdown() {
            Ok(()) => SHUTDOWN_WAIT_MS,
            Err(error) => {
                warn!(
                    "skarv sandbox: the management server did not take the shutdown ({error}); \
                     sending SIGTERM"
                );
                for process in &mut self.list {
                    process.signal(libc::SIGTERM);
                }
                TERM_WAIT_MS
            }
        };
        if self.wait_for_exit(grace_ms) {
            return true;
        }
        for process in &mut self.list {
            if process.is_alive() {
                warn!(
                    "skarv sandbox: {} (pid {}) did not stop within {} s: killing it",
                    process.role.describe(),
                    process.pid,
                    grace_ms / 1000
                );
                process.signal(libc::SIGKILL);
            }
        }
        let gone = self.wait_for_exit(KILL_WAIT_MS);
        if !gone {
            warn!("skarv sandbox: some processes outlived SIGKILL; see `ps`");
        }
        gone
    }

    /// Stops the SQL nodes (clients of the cluster, which the mgmd does not
    /// stop) by SIGTERM, then SIGKILL after the grace time.
    fn stop_sql_nodes(&mut self) {
        let is_sql = |process: &Process| matches!(process.role, Role::SqlNode(_));
        let mut sql: Vec<&mut Process> = self.list.iter_mut().filter(|p| is_sql(p)).collect();
        for process in &mut sql {
            process.signal(libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_millis(TERM_WAIT_MS);
        while sql.iter_mut().any(|process| process.is_alive()) {
            if Instant::now() >= deadline || stop_signals() >= 2 {
                for process in &mut sql {
                    if process.is_alive() {
                        warn!(
                            "skarv sandbox: {} (pid {}) did not stop: killing it",
                            process.role.describe(),
                            process.pid
                        );
                        process.signal(libc::SIGKILL);
                    }
                }
                return;
            }
            thread::sleep(Duration::from_millis(WAIT_POLL_MS));
        }
    }

    fn request_shutdown(&mut self) -> Result<(), String> {
        let mgmd = self.mgmd_index();
        if !self.list[mgmd].is_alive() {
            return Err("it is not running".to_owned());
        }
        let mut client =
            MgmClient::connect(&self.connect, Duration::from_millis(MGM_CONNECT_TIMEOUT_MS))
                .map_err(|error| error.to_string())?;
        client.shutdown().map_err(|error| error.to_string())
    }
}

// ---------------------------------------------------------------- the sandbox

/// The sandbox this command starts: its directory, shape and processes.
struct Sandbox {
    /// Absolute.
    dir: PathBuf,
    /// As the user wrote it, for messages.
    dir_shown: String,
    layout: Layout,
    processes: Processes,
}

/// The node table as the mgmd last reported it, if it ever did.
type LastSeen = Option<Vec<NodeStatusEntry>>;

/// Why the cluster did not come up.
enum StartFailure {
    Interrupted,
    /// The process at this index of `Processes::list` exited.
    Exited(usize),
    TimedOut,
    /// These SQL nodes did not accept connections in time.
    SqlTimedOut(Vec<u32>),
}

fn start(args: &SandboxArgs) -> Result<(), String> {
    let layout = validate(args)?;
    let dir_shown = args.dir.display().to_string();
    config_path_text(&args.dir)?;
    fs::create_dir_all(&args.dir)
        .map_err(|error| format!("cannot create the sandbox directory {dir_shown}: {error}"))?;
    let dir = fs::canonicalize(&args.dir)
        .map_err(|error| format!("cannot resolve the sandbox directory {dir_shown}: {error}"))?;
    refuse_if_running(&dir, &dir_shown)?;
    check_existing_layout(&dir, &dir_shown, &layout)?;
    check_ports_free(&layout)?;
    prepare_dir(&dir, &layout)?;
    install_stop_handlers()?;
    let exe = std::env::current_exe()
        .map_err(|error| format!("cannot find the skarv binary to start nodes with: {error}"))?;

    let mut sandbox = Sandbox {
        dir,
        dir_shown,
        processes: Processes {
            connect: layout.connect_string(),
            list: Vec::new(),
        },
        layout,
    };
    let nodes = match sandbox.start_processes(&exe) {
        Ok(nodes) => nodes,
        Err(message) => {
            sandbox.stop();
            return Err(message);
        }
    };
    sandbox.print_banner(&nodes, args.detach);
    if args.detach {
        // The children live on in their own sessions; sandbox.json names them.
        return Ok(());
    }
    let outcome = sandbox.watch(&nodes);
    say!("stopping the sandbox in {}", sandbox.dir_shown);
    sandbox.stop();
    outcome
}

fn prepare_dir(dir: &Path, layout: &Layout) -> Result<(), String> {
    let config_path = dir.join(CONFIG_FILE);
    fs::write(&config_path, config_ini(layout, dir, &machine_cpus())?)
        .map_err(|error| format!("cannot write {}: {error}", config_path.display()))?;
    let mut data_dirs = vec![mgmd_data_dir(dir)];
    data_dirs.extend(layout.data_node_ids().map(|id| data_node_dir(dir, id)));
    for data_dir in data_dirs {
        fs::create_dir_all(&data_dir)
            .map_err(|error| format!("cannot create {}: {error}", data_dir.display()))?;
    }
    Ok(())
}

impl Sandbox {
    /// Starts the mgmd, then (once it answers) the data nodes, waits until
    /// every data node is started, then starts the SQL nodes and waits
    /// until each accepts connections. On failure says why, with the logs
    /// that explain it; the caller stops what was started.
    fn start_processes(&mut self, exe: &Path) -> Result<Vec<NodeStatusEntry>, String> {
        let deadline = Instant::now() + Duration::from_millis(START_TIMEOUT_MS);
        let config_path = self.dir.join(CONFIG_FILE).display().to_string();
        let mgmd_arguments = vec![
            "mgmd".to_owned(),
            "--config-file".to_owned(),
            config_path,
            "--metrics-port".to_owned(),
            self.layout.metrics_port().to_string(),
        ];
        let mgmd = Process::spawn(exe, Role::Mgmd, &mgmd_arguments, &self.dir)?;
        self.processes.list.push(mgmd);
        self.write_record()?;

        let client = match self.wait_for_mgmd(deadline) {
            Ok(client) => client,
            Err(failure) => return Err(self.explain_start_failure(failure, None)),
        };
        let node_ids: Vec<u32> = self.layout.data_node_ids().collect();
        for node_id in node_ids {
            let arguments = vec![
                "data".to_owned(),
                "--connect".to_owned(),
                self.processes.connect.clone(),
                "--node-id".to_owned(),
                node_id.to_string(),
            ];
            let process = Process::spawn(exe, Role::DataNode(node_id), &arguments, &self.dir)?;
            self.processes.push_data_node(process);
        }
        self.write_record()?;
        let nodes = match self.wait_for_data_nodes(client, deadline) {
            Ok(nodes) => nodes,
            Err((failure, nodes)) => {
                return Err(self.explain_start_failure(failure, nodes.as_deref()))
            }
        };
        if self.layout.sql_nodes == 0 {
            return Ok(nodes);
        }
        let sql_node_ids: Vec<u32> = self.layout.sql_node_ids().collect();
        for (position, &node_id) in sql_node_ids.iter().enumerate() {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            let pool: Vec<String> = std::iter::once(node_id)
                .chain(self.layout.sql_pool_node_ids(position))
                .map(|id| id.to_string())
                .collect();
            let mut arguments = vec![
                "sql".to_owned(),
                "--connect".to_owned(),
                self.processes.connect.clone(),
                "--node-id".to_owned(),
                node_id.to_string(),
                "--ndb-cluster-connection-pool-nodeids".to_owned(),
                pool.join(","),
                "--bind".to_owned(),
                HOST.to_owned(),
                "--port".to_owned(),
                self.layout.sql_node_port(node_id).to_string(),
                // The slow query log beside the SQL node's log.
                "--slow-query-log-file".to_owned(),
                self.dir
                    .join(format!("sql{node_id}-slow.log"))
                    .display()
                    .to_string(),
            ];
            if self.layout.batch_scheduling() {
                arguments.extend(["--batch-scheduling".to_owned(), "true".to_owned()]);
            }
            let process = Process::spawn(exe, Role::SqlNode(node_id), &arguments, &self.dir)?;
            self.processes.push_sql_node(process);
        }
        self.write_record()?;
        let sql_deadline = Instant::now() + Duration::from_millis(SQL_START_TIMEOUT_MS);
        if let Err(failure) = self.wait_for_sql_nodes(&sql_node_ids, sql_deadline) {
            return Err(self.explain_start_failure(failure, Some(&nodes)));
        }
        // The table again, now with the SQL nodes connected.
        Ok(self
            .processes
            .connect_mgmd()
            .and_then(|mut client| client.show().ok())
            .unwrap_or(nodes))
    }

    /// Waits until every SQL node accepts a TCP connection on its port.
    fn wait_for_sql_nodes(
        &mut self,
        node_ids: &[u32],
        deadline: Instant,
    ) -> Result<(), StartFailure> {
        let mut waiting: Vec<u32> = node_ids.to_vec();
        loop {
            if stop_signals() > 0 {
                return Err(StartFailure::Interrupted);
            }
            if let Some(index) = self.processes.first_exited() {
                return Err(StartFailure::Exited(index));
            }
            waiting.retain(|&node_id| {
                let address =
                    SocketAddr::from(([127, 0, 0, 1], self.layout.sql_node_port(node_id)));
                TcpStream::connect_timeout(&address, Duration::from_millis(SQL_PROBE_TIMEOUT_MS))
                    .is_err()
            });
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(StartFailure::SqlTimedOut(waiting));
            }
            thread::sleep(Duration::from_millis(START_POLL_MS));
        }
    }

    fn write_record(&self) -> Result<(), String> {
        write_record(&self.dir, &self.processes.record(&self.layout))
    }

    /// Stops every process and forgets the sandbox, unless something lives on.
    fn stop(&mut self) {
        if self.processes.stop_all() {
            remove_record(&self.dir);
        }
    }

    fn wait_for_mgmd(&mut self, deadline: Instant) -> Result<MgmClient, StartFailure> {
        loop {
            if stop_signals() > 0 {
                return Err(StartFailure::Interrupted);
            }
            if let Some(index) = self.processes.first_exited() {
                return Err(StartFailure::Exited(index));
            }
            if let Some(client) = self.processes.connect_mgmd() {
                return Ok(client);
            }
            if Instant::now() >= deadline {
                return Err(StartFailure::TimedOut);
            }
            thread::sleep(Duration::from_millis(START_POLL_MS));
        }
    }

    /// Polls `show()` until every data node is started; on failure returns
    /// the last table seen too, if any.
    fn wait_for_data_nodes(
        &mut self,
        client: MgmClient,
        deadline: Instant,
    ) -> Result<Vec<NodeStatusEntry>, (StartFailure, LastSeen)> {
        let mut last: LastSeen = None;
        let mut client = Some(client);
        loop {
            if stop_signals() > 0 {
                return Err((StartFailure::Interrupted, last));
            }
            if let Some(index) = self.processes.first_exited() {
                return Err((StartFailure::Exited(index), last));
            }
            if client.is_none() {
                client = self.processes.connect_mgmd();
            }
            if let Some(current) = client.as_mut() {
                match current.show() {
                    Ok(nodes) if self.all_data_nodes_started(&nodes) => return Ok(nodes),
                    Ok(nodes) => last = Some(nodes),
                    // The mgmd may be busy with a node; ask again on a new connection.
                    Err(_) => client = None,
                }
            }
            if Instant::now() >= deadline {
                return Err((StartFailure::TimedOut, last));
            }
            thread::sleep(Duration::from_millis(START_POLL_MS));
        }
    }

    fn all_data_nodes_started(&self, nodes: &[NodeStatusEntry]) -> bool {
        let data_nodes: Vec<&NodeStatusEntry> = nodes
            .iter()
            .filter(|node| node.node_type == NodeType::Data)
            .collect();
        data_nodes.len() == self.layout.data_nodes as usize
            && data_nodes
                .iter()
                .all(|node| node.state == NodeState::Started)
    }

    /// Prints what the user needs to see why the start failed and returns
    /// the error message.
    fn explain_start_failure(
        &mut self,
        failure: StartFailure,
        nodes: Option<&[NodeStatusEntry]>,
    ) -> String {
        if let Some(nodes) = nodes {
            warn!("{}", crate::admin::render_table(nodes).trim_end());
        }
        match failure {
            StartFailure::Interrupted => {
                "interrupted before the cluster had started; stopping it".to_owned()
            }
            StartFailure::Exited(index) => {
                let process = &mut self.processes.list[index];
                let how = describe_exit(process.exit_status());
                let log_path = process.role.log_path(&self.dir);
                print_log_tail(&log_path);
                let hint = if matches!(process.role, Role::SqlNode(_)) {
                    " (--sql-nodes 0 starts the cluster without SQL nodes)"
                } else {
                    ""
                };
                format!(
                    "{} {how} while the cluster was starting; see {}{hint}",
                    process.role.describe(),
                    log_path.display()
                )
            }
            StartFailure::SqlTimedOut(node_ids) => {
                let mut names = Vec::new();
                for node_id in node_ids {
                    print_log_tail(&sql_node_log(&self.dir, node_id));
                    names.push(format!(
                        "SQL node {node_id} on port {}",
                        self.layout.sql_node_port(node_id)
                    ));
                }
                format!(
                    "the data nodes started, but {} did not accept connections within {} s; \
                     logs are in {} (--sql-nodes 0 starts the cluster without SQL nodes)",
                    names.join(", "),
                    SQL_START_TIMEOUT_MS / 1000,
                    self.dir_shown
                )
            }
            StartFailure::TimedOut => {
                let late = self.roles_not_started(nodes);
                for role in &late {
                    print_log_tail(&role.log_path(&self.dir));
                }
                let names: Vec<String> = late.iter().map(|role| role.describe()).collect();
                let which = if names.is_empty() {
                    String::new()
                } else {
                    format!(" ({} not started)", names.join(", "))
                };
                format!(
                    "the cluster did not start within {} s{which}; logs are in {}",
                    START_TIMEOUT_MS / 1000,
                    self.dir_shown
                )
            }
        }
    }

    /// The processes to blame for a slow start: the mgmd if it never
    /// answered, else the data nodes it does not report as started.
    fn roles_not_started(&self, nodes: Option<&[NodeStatusEntry]>) -> Vec<Role> {
        let Some(nodes) = nodes else {
            return vec![Role::Mgmd];
        };
        self.layout
            .data_node_ids()
            .filter(|&node_id| {
                !nodes.iter().any(|node| {
                    u32::from(node.node.get()) == node_id && node.state == NodeState::Started
                })
            })
            .map(Role::DataNode)
            .collect()
    }

    fn print_banner(&self, nodes: &[NodeStatusEntry], detach: bool) {
        let connect = &self.processes.connect;
        let dir = &self.dir_shown;
        say!(
            "Skarv sandbox started: 1 management server, {} ({}, {}), {}.",
            count(self.layout.data_nodes, "data node"),
            count(self.layout.replicas, "replica"),
            count(self.layout.node_groups(), "node group"),
            count(self.layout.sql_nodes, "SQL node"),
        );
        for port in self.layout.sql_ports() {
            say!("  SQL prompt:      mysql -h {HOST} -P {port} -u root");
        }
        say!("  connect string:  {connect}");
        say!(
            "  metrics:         http://{HOST}:{}/metrics",
            self.layout.metrics_port()
        );
        say!("  see the cluster: skarv admin --connect {connect} show");
        let logs = if self.layout.sql_nodes == 0 {
            "node<N>.log"
        } else {
            "node<N>.log, sql<N>.log"
        };
        say!("  files:           {dir} (config.ini, mgmd.log, {logs}, data)");
        if detach {
            say!("  stop it with:    skarv sandbox --stop --dir {dir}");
        } else {
            say!("  stop it with:    Ctrl-C");
        }
        say!();
        say!("{}", crate::admin::render_table(nodes).trim_end());
        let sql = crate::admin::render_sql_nodes(nodes);
        if !sql.is_empty() {
            say!();
            say!("{}", sql.trim_end());
        }
    }

    /// Runs until a stop signal, printing node state changes. Returns an
    /// error if the mgmd died under the sandbox.
    fn watch(&mut self, nodes: &[NodeStatusEntry]) -> Result<(), String> {
        let mut states: BTreeMap<u8, NodeState> = nodes
            .iter()
            .map(|node| (node.node.get(), node.state))
            .collect();
        let mut client = self.processes.connect_mgmd();
        let mut reported_exits: Vec<usize> = Vec::new();
        let mut contact_lost_reported = false;
        loop {
            if sleep_unless_stopped(WATCH_POLL_MS) {
                return Ok(());
            }
            if let Some(outcome) = self.report_exits(&mut reported_exits) {
                return outcome;
            }
            if client.is_none() {
                client = self.processes.connect_mgmd();
            }
            let Some(current) = client.as_mut() else {
                continue;
            };
            match current.show() {
                Ok(nodes) => {
                    contact_lost_reported = false;
                    for line in state_changes(&mut states, &nodes) {
                        say!("{line}");
                    }
                }
                Err(error) => {
                    if !contact_lost_reported {
                        say!("lost contact with the management server ({error}); retrying");
                        contact_lost_reported = true;
                    }
                    client = None;
                }
            }
        }
    }

    /// Tells of children that exited, once each. The sandbox ends when the
    /// mgmd has gone: cleanly (someone shut the cluster down) or not.
    fn report_exits(&mut self, reported: &mut Vec<usize>) -> Option<Result<(), String>> {
        let mgmd = self.processes.mgmd_index();
        for index in 0..self.processes.list.len() {
            let process = &mut self.processes.list[index];
            if reported.contains(&index) || process.is_alive() {
                continue;
            }
            reported.push(index);
            let status = process.exit_status();
            let log_path = process.role.log_path(&self.dir);
            say!(
                "{} {}; see {}",
                process.role.describe(),
                describe_exit(status),
                log_path.display()
            );
            if index == mgmd {
                return Some(match status {
                    Some(status) if status.success() => Ok(()),
                    _ => Err(format!(
                        "the management server stopped unexpectedly; see {}",
                        log_path.display()
                    )),
                });
            }
        }
        None
    }
}

/// "1 data node", "2 data nodes".
fn count(n: u32, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    status.map_or("exited".to_owned(), |status| format!("exited ({status})"))
}

/// Sleeps `duration_ms` in short steps; true if a stop signal came.
fn sleep_unless_stopped(duration_ms: u64) -> bool {
    let deadline = Instant::now() + Duration::from_millis(duration_ms);
    while Instant::now() < deadline {
        if stop_signals() > 0 {
            return true;
        }
        thread::sleep(Duration::from_millis(WAIT_POLL_MS.min(duration_ms)));
    }
    stop_signals() > 0
}

/// One line per node whose state differs from `states`, which is updated.
fn state_changes(states: &mut BTreeMap<u8, NodeState>, nodes: &[NodeStatusEntry]) -> Vec<String> {
    let mut lines = Vec::new();
    for node in nodes {
        let id = node.node.get();
        match states.insert(id, node.state) {
            Some(previous) if previous != node.state => lines.push(format!(
                "node {id}: {} -> {}",
                previous.as_str(),
                node.state.as_str()
            )),
            Some(_) => {}
            None => lines.push(format!("node {id}: {}", node.state.as_str())),
        }
    }
    lines
}

/// The last lines of a log, read from its end so a large log costs little.
fn log_tail(path: &Path, lines_max: usize) -> io::Result<Vec<String>> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(LOG_TAIL_READ_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(LOG_TAIL_READ_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    // A read that began mid-file began mid-line: drop that partial line.
    if start > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(lines_max);
    Ok(lines[skip..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect())
}

fn print_log_tail(path: &Path) {
    match log_tail(path, LOG_TAIL_LINES) {
        Ok(lines) => {
            warn!("---- last lines of {} ----", path.display());
            for line in lines {
                warn!("  {line}");
            }
        }
        Err(error) => warn!("---- cannot read {}: {error}", path.display()),
    }
}

// ---------------------------------------------------------------- --stop

fn stop_recorded(dir: &Path) -> Result<(), String> {
    let dir_shown = dir.display().to_string();
    let record = read_record(dir)?.ok_or_else(|| format!("no sandbox in {dir_shown}"))?;
    let mut processes = Processes::from_record(&record);
    if !processes.stop_all() {
        return Err(format!(
            "some processes of the sandbox in {dir_shown} did not stop; {RECORD_FILE} is kept"
        ));
    }
    remove_record(dir);
    say!("sandbox in {dir_shown} stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxArgs,
    }

    fn parse(arguments: &[&str]) -> Result<SandboxArgs, clap::Error> {
        let mut all = vec!["sandbox"];
        all.extend_from_slice(arguments);
        Cli::try_parse_from(all).map(|cli| cli.sandbox)
    }

    fn layout(data_nodes: u32, replicas: u32, base_port: u16) -> Result<Layout, String> {
        let mut args = parse(&[]).expect("no flags parse");
        args.data_nodes = data_nodes;
        args.replicas = replicas;
        args.base_port = base_port;
        validate(&args)
    }

    /// CPUs 0 to `count` - 1.
    fn cpus(count: usize) -> Vec<usize> {
        (0..count).collect()
    }

    fn temporary_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("skarv-sandbox-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temporary directory");
        dir
    }

    #[test]
    fn defaults_need_no_flags() {
        let args = parse(&[]).expect("no flags parse");
        assert_eq!(args.dir, PathBuf::from("./skarv-sandbox"));
        assert!(!args.stop && !args.detach);
        let layout = validate(&args).expect("defaults are valid");
        assert_eq!(
            layout,
            Layout {
                data_nodes: 2,
                replicas: 2,
                sql_nodes: 1,
                sql_connection_pool: layout.sql_connection_pool,
                base_port: 21860,
                ndbd_params: Vec::new(),
                bind_cpus: false,
            }
        );
        // The SQL node is node 4, after the data nodes 2 and 3.
        assert_eq!(layout.ports(), vec![21860, 21861, 21862, 21863, 21864]);
        assert_eq!(layout.sql_ports(), vec![21864]);
        assert_eq!(layout.connect_string(), "127.0.0.1:21860");
    }

    #[test]
    fn stop_takes_only_dir() {
        let args = parse(&["--stop", "--dir", "/tmp/x"]).expect("--stop --dir parses");
        assert!(args.stop);
        assert_eq!(args.dir, PathBuf::from("/tmp/x"));
        for flag in [
            &["--stop", "--detach"][..],
            &["--stop", "--data-nodes", "4"],
            &["--stop", "--replicas", "1"],
            &["--stop", "--base-port", "3000"],
            &["--stop", "--bind-cpus"],
            &["--stop", "--sql-nodes", "0"],
        ] {
            assert!(parse(flag).is_err(), "{flag:?} must be refused");
        }
    }

    #[test]
    fn validation_names_the_flag_and_the_range() {
        let error = layout(0, 1, 21860).unwrap_err();
        assert!(
            error.contains("--data-nodes 0") && error.contains("1 to 48"),
            "{error}"
        );
        let error = layout(49, 1, 21860).unwrap_err();
        assert!(error.contains("--data-nodes 49"), "{error}");
        let error = layout(3, 2, 21860).unwrap_err();
        assert!(error.contains("multiple of --replicas 2"), "{error}");
        let error = layout(4, 0, 21860).unwrap_err();
        assert!(
            error.contains("--replicas 0") && error.contains("1 to 4"),
            "{error}"
        );
        let error = layout(5, 5, 21860).unwrap_err();
        assert!(error.contains("--replicas 5"), "{error}");
        let error = layout(2, 2, 0).unwrap_err();
        assert!(error.contains("--base-port 0"), "{error}");
        // SQL node 50 (after data node 49) would listen on 65485 + 50 =
        // 65535: the highest base allowed.
        assert!(layout(48, 4, 65485).is_ok());
        let error = layout(48, 4, 65486).unwrap_err();
        assert!(
            error.contains("--base-port 65486") && error.contains("1 to 65485"),
            "{error}"
        );
        assert!(layout(1, 1, 21860).is_ok());
        assert!(layout(48, 3, 21860).is_ok());
    }

    #[test]
    fn sql_nodes_are_counted_and_fit_the_ports() {
        let args = parse(&["--sql-nodes", "17"]).expect("parses");
        let error = validate(&args).unwrap_err();
        assert!(
            error.contains("--sql-nodes 17") && error.contains("0 to 16"),
            "{error}"
        );
        let args = parse(&["--sql-nodes", "0"]).expect("parses");
        let layout = validate(&args).expect("no SQL node is valid");
        assert_eq!(layout.ports(), vec![21860, 21861, 21862, 21863]);
        assert_eq!(layout.sql_node_ids().count(), 0);
        // 48 data nodes and 16 SQL nodes: the last SQL node is node 65,
        // which listens on base + 65.
        let args =
            parse(&["--data-nodes", "48", "--replicas", "4", "--sql-nodes", "16"]).expect("parses");
        let mut args = args;
        args.base_port = 65535 - 65;
        let layout = validate(&args).expect("the highest base allowed");
        assert_eq!(layout.sql_ports().last(), Some(&65535));
        args.base_port += 1;
        let error = validate(&args).unwrap_err();
        assert!(
            error.contains("16 SQL nodes") && error.contains("SQL node N listens"),
            "{error}"
        );
    }

    #[test]
    fn config_ini_parses_to_the_layout() {
        let dir = Path::new("/var/tmp/sandbox dir");
        let layout = layout(4, 2, 30000).expect("valid");
        let text = config_ini(&layout, dir, &cpus(16)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("generated config.ini parses");

        assert_eq!(cluster.management_nodes.len(), 1);
        let mgmd = &cluster.management_nodes[0];
        assert_eq!(mgmd.node_id.get(), 1);
        assert_eq!(mgmd.host_name, "127.0.0.1");
        assert_eq!(mgmd.port, 30000);
        assert_eq!(mgmd.data_dir, dir.join("mgmd"));

        let ids: Vec<u8> = cluster.data_nodes.iter().map(|n| n.node_id.get()).collect();
        assert_eq!(ids, vec![2, 3, 4, 5]);
        let ports: Vec<u16> = cluster.data_nodes.iter().map(|n| n.server_port).collect();
        assert_eq!(ports, vec![30002, 30003, 30004, 30005]);
        let groups: Vec<u32> = cluster.data_nodes.iter().map(|n| n.node_group).collect();
        assert_eq!(groups, vec![0, 0, 1, 1]);
        for node in &cluster.data_nodes {
            assert_eq!(node.host_name, "127.0.0.1");
            assert_eq!(
                node.data_dir,
                dir.join(format!("node{}", node.node_id.get()))
            );
            assert_eq!(node.params.no_of_replicas, 2);
            assert_eq!(node.params.data_memory_bytes, 256 * 1024 * 1024);
            // A quarter of NDB's redo log: 4 parts of 4 files of 16 MiB.
            assert_eq!(node.params.no_of_fragment_log_parts, 4);
            assert_eq!(node.params.no_of_fragment_log_files, 4);
            assert_eq!(node.params.fragment_log_file_size_bytes, 16 << 20);
        }

        // One [mysqld] slot for the SQL node, then 4 [api] slots, then
        // the [mysqld] slots of the SQL node's other cluster connections.
        let api: Vec<(u8, bool)> = cluster
            .api_nodes
            .iter()
            .map(|n| (n.node_id.get(), n.mysqld))
            .collect();
        let mut expected = vec![(6, true), (7, false), (8, false), (9, false), (10, false)];
        expected.extend((1..layout.sql_connection_pool).map(|k| (10 + k as u8, true)));
        assert_eq!(api, expected);
        assert_eq!(cluster.api_nodes[0].host_name.as_deref(), Some("127.0.0.1"));
        assert!(
            text.contains("MySQL clients connect to 127.0.0.1:30006"),
            "{text}"
        );
        // Every line that sets a value is explained by a comment.
        assert!(text.lines().filter(|line| line.starts_with('#')).count() >= 5);
        // 16 CPUs for 4 nodes: each node keeps its own LDM thread.
        assert!(cluster
            .data_nodes
            .iter()
            .all(|n| n.params.thread_config.is_none()));
    }

    #[test]
    fn few_cpus_per_node_fold_the_ldm_into_the_main_thread() {
        use kernel::thread_config::ThreadRole;
        let dir = Path::new("/s");
        for (nodes, cpus, folded) in [
            (1, 2, true),
            (2, 2, true),
            (2, 4, true),
            (1, 4, false),
            (2, 16, false),
        ] {
            let layout = layout(nodes, 1, 30000).expect("valid");
            let text = config_ini(&layout, dir, &self::cpus(cpus)).expect("config.ini");
            let cluster = config::parse(&text, "config.ini").expect("parses");
            for node in &cluster.data_nodes {
                let threads = &node.params.threads;
                assert_eq!(
                    threads.count(ThreadRole::Ldm) == 0,
                    folded,
                    "{nodes} nodes, {cpus} CPUs"
                );
                let main = threads.threads.iter().position(|t| t.name == "main");
                assert_eq!(threads.thread_for(ThreadRole::Ldm, 0) == main, folded);
                assert_eq!(threads.count(ThreadRole::Recv) == 0, folded);
                assert_eq!(threads.thread_for(ThreadRole::Recv, 0) == main, folded);
            }
        }
    }

    #[test]
    fn bind_cpus_binds_each_folded_node_to_a_cpu_of_its_own() {
        let dir = Path::new("/s");
        // (nodes, the process's CPUs, each node's main thread's CPU)
        for (nodes, cpu_list, bound) in [
            (2, vec![0, 1], vec![Some(0), Some(1)]),
            (2, vec![4, 6], vec![Some(4), Some(6)]),
            (2, vec![0, 1, 2, 3], vec![Some(0), Some(1)]),
            (1, vec![0, 1], vec![None]),
            (4, vec![0, 1], vec![None; 4]),
            (2, cpus(16), vec![None; 2]),
        ] {
            let mut layout = layout(nodes, 1, 30000).expect("valid");
            let unbound = config_ini(&layout, dir, &cpu_list).expect("config.ini");
            assert!(
                !unbound.contains("cpubind"),
                "bound without --bind-cpus:\n{unbound}"
            );
            layout.bind_cpus = true;
            let text = config_ini(&layout, dir, &cpu_list).expect("config.ini");
            let cluster = config::parse(&text, "config.ini").expect("parses");
            let mains: Vec<Option<usize>> = cluster
                .data_nodes
                .iter()
                .map(|node| {
                    let threads = &node.params.threads.threads;
                    threads
                        .iter()
                        .find(|t| t.name == "main")
                        .expect("main")
                        .cpubind
                })
                .collect();
            assert_eq!(mains, bound, "{nodes} nodes on CPUs {cpu_list:?}:\n{text}");
        }
        // A ThreadConfig given replaces the sandbox's, bound or not.
        let args =
            parse(&["--bind-cpus", "--set", "ThreadConfig=main,ldm={count=1}"]).expect("parses");
        let layout = validate(&args).expect("valid");
        let text = config_ini(&layout, dir, &cpus(2)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("one ThreadConfig per node");
        for node in &cluster.data_nodes {
            assert_eq!(
                node.params.thread_config.as_deref(),
                Some("main,ldm={count=1}")
            );
        }
    }

    /// Each SQL node's other cluster connections get `[mysqld]` slots of
    /// their own after the `[api]` slots, and out-of-range pools are
    /// refused.
    #[test]
    fn each_sql_node_gets_a_slot_per_cluster_connection() {
        let args = parse(&["--sql-nodes", "2", "--sql-connection-pool", "3"]).expect("parses");
        let layout = validate(&args).expect("valid");
        // Data nodes 2, 3; SQL nodes 4, 5; [api] 6 to 9; pools 10-11, 12-13.
        assert_eq!(
            layout.sql_pool_node_ids(0).collect::<Vec<_>>(),
            vec![10, 11]
        );
        assert_eq!(
            layout.sql_pool_node_ids(1).collect::<Vec<_>>(),
            vec![12, 13]
        );
        let text = config_ini(&layout, Path::new("/s"), &cpus(16)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("parses");
        let mysqld: Vec<u8> = cluster
            .api_nodes
            .iter()
            .filter(|n| n.mysqld)
            .map(|n| n.node_id.get())
            .collect();
        assert_eq!(mysqld, vec![4, 5, 10, 11, 12, 13]);
        for bad in ["0", "9"] {
            let args = parse(&["--sql-connection-pool", bad]).expect("parses");
            assert!(validate(&args).is_err(), "--sql-connection-pool {bad}");
        }
    }

    #[test]
    fn config_ini_for_the_largest_sandbox() {
        let layout = layout(48, 4, 21860).expect("valid");
        let text = config_ini(&layout, Path::new("/s"), &cpus(16)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("parses");
        assert_eq!(cluster.data_nodes.len(), 48);
        assert_eq!(cluster.data_nodes[47].node_id.get(), 49);
        assert_eq!(cluster.data_nodes[47].server_port, 21860 + 49);
        assert_eq!(cluster.data_nodes[47].node_group, 11);
        assert_eq!(cluster.data_nodes[3].node_group, 0);
        assert_eq!(cluster.data_nodes[4].node_group, 1);
        let api: Vec<u8> = cluster.api_nodes.iter().map(|n| n.node_id.get()).collect();
        let pool = layout.sql_connection_pool as u8;
        assert_eq!(api, (50..=54 + pool - 1).collect::<Vec<u8>>());
    }

    #[test]
    fn config_ini_refuses_paths_it_cannot_hold() {
        let layout = layout(2, 2, 21860).expect("valid");
        let error = config_ini(&layout, Path::new("/tmp/a#b"), &cpus(16)).unwrap_err();
        assert!(error.contains("/tmp/a#b"), "{error}");
        assert!(config_ini(&layout, Path::new("/tmp/a\nb"), &cpus(16)).is_err());
    }

    /// Batch scheduling reaches the data nodes through config.ini and the
    /// SQL nodes through their flag: on with SQL nodes unless `--set`
    /// says otherwise.
    #[test]
    fn batch_scheduling_is_one_switch_for_data_and_sql_nodes() {
        for (sets, on) in [
            // On by default with SQL nodes (one), off without.
            (&[][..], true),
            (&["--sql-nodes", "0"][..], false),
            (
                &["--sql-nodes", "0", "--set", "BatchScheduling=1"][..],
                true,
            ),
            (&["--set", "batchscheduling=ON"][..], true),
            (&["--set", "BatchScheduling=no"][..], false),
        ] {
            let layout = validate(&parse(sets).expect("parses")).expect("valid");
            assert_eq!(layout.batch_scheduling(), on, "{sets:?}");
            let text = config_ini(&layout, Path::new("/s"), &cpus(16)).expect("config.ini");
            let cluster = config::parse(&text, "config.ini").expect("parses");
            for node in &cluster.data_nodes {
                assert!(
                    node.params.threads.threads.iter().all(|t| t.batch == on),
                    "{sets:?}"
                );
            }
        }
    }

    #[test]
    fn set_adds_data_node_parameters_and_refuses_bad_ones() {
        let args = parse(&[
            "--set",
            "TimeBetweenEpochs=20",
            "--set",
            "TimeBetweenGlobalCheckpoints = 500",
        ])
        .expect("--set parses");
        let layout = validate(&args).expect("valid");
        let text = config_ini(&layout, Path::new("/s"), &cpus(16)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("parses");
        for node in &cluster.data_nodes {
            assert_eq!(node.params.time_between_epochs_ms, 20);
            assert_eq!(node.params.time_between_global_checkpoints_ms, 500);
        }
        for (bad, says) in [
            ("TimeBetweenEpochs", "NAME=VALUE"),
            ("Time Between=1", "parameter name"),
            ("TimeBetweenEpochs=1;2", "without '#'"),
        ] {
            let args = parse(&["--set", bad]).expect("any text parses");
            let error = validate(&args).unwrap_err();
            assert!(error.contains(says), "--set {bad}: {error}");
        }
        for bad in ["TimeBetweenEpochs=40000", "NoSuchParameter=1"] {
            let args = parse(&["--set", bad]).expect("any text parses");
            let layout = validate(&args).expect("checked when config.ini is parsed");
            let error = config_ini(&layout, Path::new("/s"), &cpus(16)).unwrap_err();
            assert!(error.starts_with("--set: "), "--set {bad}: {error}");
        }
    }

    #[test]
    fn set_replaces_the_sandboxs_own_defaults() {
        use kernel::thread_config::ThreadRole;
        let args = parse(&[
            "--set",
            "datamemory=3G",
            "--set",
            "ThreadConfig=main,ldm={count=1}",
            "--set",
            "NoOfFragmentLogFiles=16",
        ])
        .expect("parses");
        let layout = validate(&args).expect("valid");
        // 2 CPUs: without the --set, the sandbox would fold the LDM into main.
        let text = config_ini(&layout, Path::new("/s"), &cpus(2)).expect("config.ini");
        let cluster = config::parse(&text, "config.ini").expect("one value per parameter");
        for node in &cluster.data_nodes {
            assert_eq!(node.params.data_memory_bytes, 3 << 30);
            assert_eq!(node.params.no_of_fragment_log_files, 16);
            assert_eq!(
                node.params.thread_config.as_deref(),
                Some("main,ldm={count=1}")
            );
            // The given ThreadConfig wins: its default recv thread stays.
            assert_eq!(node.params.threads.count(ThreadRole::Recv), 1);
        }
        let args = parse(&["--set", "NoOfReplicas=2"]).expect("any text parses");
        let error = validate(&args).unwrap_err();
        assert!(error.contains("--replicas"), "{error}");
    }

    #[test]
    fn a_busy_port_is_named() {
        let listener = TcpListener::bind((HOST, 0)).expect("bind port 0");
        let port = listener.local_addr().expect("local address").port();
        let Ok(layout) = layout(1, 1, port) else {
            return; // the kernel handed out a port too high for a base port
        };
        let error = check_ports_free(&layout).unwrap_err();
        assert!(error.contains(&format!("port {port} ")), "{error}");
        assert!(error.contains("--base-port"), "{error}");
    }

    #[test]
    fn record_round_trips_and_missing_or_corrupt_is_told() {
        let dir = temporary_dir("record");
        assert_eq!(read_record(&dir), Ok(None));
        let record = SandboxRecord {
            connect: "127.0.0.1:21860".to_owned(),
            mgmd_pid: 12,
            data_node_angel_pids: vec![13, 14],
            base_port: 21860,
            sql_node_pids: vec![15],
            sql_ports: vec![21864],
        };
        write_record(&dir, &record).expect("write");
        assert_eq!(read_record(&dir), Ok(Some(record.clone())));
        // SQL nodes stop first, then the data nodes, then the mgmd.
        let roles: Vec<(Role, u32)> = Processes::from_record(&record)
            .list
            .iter()
            .map(|p| (p.role, p.pid))
            .collect();
        assert_eq!(
            roles,
            vec![
                (Role::SqlNode(4), 15),
                (Role::DataNode(2), 13),
                (Role::DataNode(3), 14),
                (Role::Mgmd, 12)
            ]
        );
        // A record of a sandbox from before SQL nodes still reads.
        fs::write(
            dir.join(RECORD_FILE),
            r#"{"connect":"c","mgmd_pid":1,"data_node_angel_pids":[2],"base_port":3}"#,
        )
        .expect("write");
        let old = read_record(&dir).expect("reads").expect("a record");
        assert!(old.sql_node_pids.is_empty() && old.sql_ports.is_empty());
        fs::write(dir.join(RECORD_FILE), "{not json").expect("write");
        let error = read_record(&dir).unwrap_err();
        assert!(error.contains("sandbox.json"), "{error}");
        remove_record(&dir);
        let error = stop_recorded(&dir).unwrap_err();
        assert_eq!(error, format!("no sandbox in {}", dir.display()));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_live_record_refuses_and_a_stale_one_is_replaced() {
        let dir = temporary_dir("live");
        // `sh -c CMD mgmd`: a live process with "mgmd" among its arguments,
        // as a sandbox mgmd has. Two commands, so that the shell cannot
        // replace itself with `sleep` (dash does for a lone command).
        let mut live = Command::new("sh")
            .args(["-c", "sleep 30; :", "mgmd"])
            .spawn()
            .expect("spawn sh");
        // Between fork and exec the child still shows this test's command
        // line: wait until it is the shell's.
        let started = std::time::Instant::now();
        while !pid_alive(live.id(), "mgmd") {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sh never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let record = SandboxRecord {
            connect: "127.0.0.1:21860".to_owned(),
            mgmd_pid: live.id(),
            data_node_angel_pids: vec![],
            base_port: 21860,
            sql_node_pids: vec![],
            sql_ports: vec![],
        };
        write_record(&dir, &record).expect("write");
        let error = refuse_if_running(&dir, "D").unwrap_err();
        assert!(
            error.contains(&format!("already running in D (mgmd pid {})", live.id()))
                && error.contains("skarv sandbox --stop --dir D"),
            "{error}"
        );
        live.kill().expect("kill");
        live.wait().expect("reap");
        assert_eq!(refuse_if_running(&dir, "D"), Ok(()));

        // A live process that is not a sandbox process (pid reused) is not one.
        assert!(!pid_alive(std::process::id(), "no-such-subcommand"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = temporary_dir("tail");
        let path = dir.join("node2.log");
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, text).expect("write");
        let tail = log_tail(&path, 3).expect("tail");
        assert_eq!(tail, vec!["line 97", "line 98", "line 99"]);
        let long: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, long).expect("write");
        let tail = log_tail(&path, 2).expect("tail");
        assert_eq!(tail, vec!["line 19998", "line 19999"]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn state_changes_are_told() {
        let mut states = BTreeMap::new();
        states.insert(3, NodeState::Started);
        let entry = |id: u8, state: NodeState| NodeStatusEntry {
            node: signal::NodeId::new(id).expect("non-zero"),
            node_type: NodeType::Data,
            host: HOST.to_owned(),
            node_group: 0,
            state,
            pid: 0,
            version: 0,
            start_count: 1,
            view_id: 1,
            members: signal::NodeBitmask::new(),
            mysqld: false,
            address: String::new(),
        };
        let nodes = [entry(3, NodeState::Failed), entry(4, NodeState::Started)];
        assert_eq!(
            state_changes(&mut states, &nodes),
            vec!["node 3: started -> failed", "node 4: started"]
        );
        assert_eq!(states.get(&3), Some(&NodeState::Failed));
        assert!(state_changes(&mut states, &nodes).is_empty());
    }
}
