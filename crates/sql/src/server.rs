//! The listener: accepts MySQL connections and serves them, each with a
//! native session of its own on one of the SQL node's cluster connections
//! (`ndb_cluster_connection_pool`, the least loaded).
//!
//! Two ways to give connections threads (`thread_handling`):
//! - `one-thread-per-connection`: a connection thread blocks in `read`
//!   while its client is idle, so an idle connection costs a parked thread
//!   (its touched stack pages and an 8 KiB read buffer) and no CPU;
//! - `pool-of-threads` ([`crate::thread_pool`]): an idle connection waits
//!   in its thread group's epoll set and costs no thread; a few workers serve one
//!   command at a time of whichever connection sent one.
//!
//! Over `max_connections` a client still gets the handshake, so that it can
//! read ERR 1040 instead of seeing the socket close. A panic while serving
//! a connection closes that connection only.

use std::any::Any;
use std::io;
use std::mem::ManuallyDrop;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use skarv_client::{Cluster, ClusterOptions, Session, SESSIONS_MAX};

use crate::backend::{status, Backend};
use crate::engine::{txn, Conn, Engine};
use crate::error::{codes, SqlError};
use crate::protocol::{self, Begun, ProtocolOptions, Wire};
use crate::thread_pool::{self, Next, PoolOptions, Task, ThreadPool};

/// Most client connections at once unless told (MySQL's default is 151;
/// an SQL node of a cluster is meant to take many more, and idle ones
/// cost no thread in the thread pool).
pub const MAX_CONNECTIONS_DEFAULT: u32 = 8_192;
/// Most client connections one SQL node takes (MySQL's upper bound).
pub const MAX_CONNECTIONS_MAX: u32 = 100_000;
/// Most cluster connections of one SQL node (MySQL's
/// `ndb_cluster_connection_pool` upper bound; each is an API node).
pub const CONNECTION_POOL_MAX: usize = 63;
/// Cluster connections by default are the CPUs up to this many (seed 001:
/// one connection's mutex limited a mysqld, 2 × cores was the advice; seed
/// 004: NDB 7.3 split that mutex, so a few suffice; each costs an API node
/// slot, a receive thread and a socket per data node).
pub const CONNECTION_POOL_CPUS_MAX: usize = 4;
/// Native sessions kept free for the SQL node's own work (catalog,
/// accounts) besides one per client connection.
pub const SESSIONS_RESERVED: usize = 64;
/// Stack of a connection thread, in bytes. Parsing, planning and executing
/// recurse over the statement; the parser at its deepest (it stops at a
/// nesting depth of 50) fits in 96 KiB (measured with the test below), but
/// sqlparser's span of that tree and an unoptimised build's lowering take
/// far more (1 MiB overflowed at `IF` nested 20 deep, aborting the SQL
/// node: `expr::tests::the_deepest_expressions_fit_a_connection_stack`),
/// so a thread gets Linux's default 8 MiB, and lowering grows its own
/// stack besides. Pages never touched cost nothing.
pub const CONNECTION_STACK_BYTES: usize = 8 << 20;
/// Stack of a thread that turns a client away, in bytes.
pub const REFUSAL_STACK_BYTES: usize = 128 << 10;
/// Clients being turned away at once; past it one is closed unanswered.
pub const REFUSALS_MAX: usize = 64;
/// How long a client being turned away has to send its login, in ms.
pub const REFUSAL_TIMEOUT_MS: u64 = 5_000;
/// How long a client of the thread pool has to send its login, in ms
/// (MariaDB's `connect_timeout` default): a worker waits for it.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Pause after a failed `accept` (out of descriptors), in ms, so that the
/// loop does not spin while none can be had.
pub const ACCEPT_RETRY_PAUSE_MS: u64 = 10;

/// The cluster connections by default: the CPUs up to
/// [`CONNECTION_POOL_CPUS_MAX`], and at least as many as
/// `max_connections` sessions need ([`SESSIONS_MAX`] each).
pub fn connection_pool_default(max_connections: u32) -> usize {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let needed = (max_connections as usize + SESSIONS_RESERVED).div_ceil(SESSIONS_MAX);
    cpus.min(CONNECTION_POOL_CPUS_MAX)
        .max(needed)
        .clamp(1, CONNECTION_POOL_MAX)
}

/// Thread groups of the thread pool by default: one per CPU (MariaDB's
/// `thread_pool_size` default).
pub fn thread_pool_size_default() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// How connections get threads (MariaDB's `thread_handling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadHandling {
    /// A thread per connection, parked while its client is idle.
    OneThreadPerConnection,
    /// The thread pool ([`crate::thread_pool`]).
    PoolOfThreads,
}

impl ThreadHandling {
    /// The variable's value.
    pub fn name(self) -> &'static str {
        match self {
            ThreadHandling::OneThreadPerConnection => "one-thread-per-connection",
            ThreadHandling::PoolOfThreads => "pool-of-threads",
        }
    }

    /// The value named `name`.
    pub fn from_name(name: &str) -> Option<ThreadHandling> {
        [
            ThreadHandling::OneThreadPerConnection,
            ThreadHandling::PoolOfThreads,
        ]
        .into_iter()
        .find(|handling| handling.name().eq_ignore_ascii_case(name))
    }
}

/// How `skarv sql` runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The management server, `host:port`.
    pub connect: String,
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on (MySQL's 3306 by default).
    pub port: u16,
    /// The `[mysqld]`/`[api]` slot to take; None: any free one.
    pub node_id: Option<u16>,
    /// Most client connections at once (MySQL's `max_connections`).
    pub max_connections: u32,
    /// The slow query log's file; None: `<cwd>/<host>-slow.log`.
    pub slow_query_log_file: Option<std::path::PathBuf>,
    /// Cluster connections (`ndb_cluster_connection_pool`), 1 to
    /// [`CONNECTION_POOL_MAX`].
    pub connection_pool: usize,
    /// Node ids of the cluster connections after the first
    /// (`ndb_cluster_connection_pool_nodeids` less `node_id`); the others
    /// take any free slot.
    pub connection_pool_node_ids: Vec<u16>,
    /// How connections get threads.
    pub thread_handling: ThreadHandling,
    /// The thread pool's groups (`thread_pool_size`).
    pub thread_pool_size: usize,
    /// The thread pool's most workers (`thread_pool_max_threads`).
    pub thread_pool_max_threads: usize,
    /// `thread_pool_stall_limit`, in ms.
    pub thread_pool_stall_limit_ms: u64,
    /// `secure_file_priv`: the directory whose files `LOAD DATA INFILE`
    /// may read; None: any file the process can read.
    pub secure_file_priv: Option<std::path::PathBuf>,
}

impl ServerOptions {
    /// The defaults for the management server at `connect`.
    pub fn new(connect: &str) -> ServerOptions {
        ServerOptions {
            connect: connect.to_owned(),
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 3306,
            node_id: None,
            max_connections: MAX_CONNECTIONS_DEFAULT,
            connection_pool: connection_pool_default(MAX_CONNECTIONS_DEFAULT),
            connection_pool_node_ids: Vec::new(),
            thread_handling: ThreadHandling::PoolOfThreads,
            thread_pool_size: thread_pool_size_default(),
            thread_pool_max_threads: thread_pool::THREAD_POOL_MAX_THREADS_DEFAULT,
            thread_pool_stall_limit_ms: thread_pool::THREAD_POOL_STALL_LIMIT_MS_DEFAULT,
            slow_query_log_file: None,
            secure_file_priv: None,
        }
    }
}

/// Connects to the cluster and serves MySQL clients until the process is
/// stopped.
pub fn serve(options: ServerOptions) -> Result<(), SqlError> {
    raise_open_files_limit(options.max_connections);
    let clusters = connect_pool(&options)?;
    let engine = Engine::start(clusters[0].clone())?;
    let slow_log = options
        .slow_query_log_file
        .clone()
        .unwrap_or_else(crate::engine::status::default_slow_log_path);
    engine.set_slow_log_file(slow_log, options.port);
    let listener = TcpListener::bind((options.bind, options.port)).map_err(|error| {
        SqlError::new(
            codes::UNKNOWN,
            format!(
                "cannot listen on {}:{}: {error}",
                options.bind, options.port
            ),
        )
    })?;
    serve_pool(listener, engine, clusters, options)
}

/// The cluster connections: the first as asked (it must succeed), then
/// the others of `connection_pool`; one that gets no slot is left out with
/// a warning (the SQL node serves with fewer).
fn connect_pool(options: &ServerOptions) -> Result<Vec<Cluster>, SqlError> {
    let size = options.connection_pool.clamp(1, CONNECTION_POOL_MAX);
    let first = Cluster::connect_with(&options.connect, cluster_options(options.node_id)?)
        .map_err(|error| txn::native_error(&error))?;
    // One cache of table definitions for all: a table that one connection
    // drops or alters is read again by the others' sessions too.
    let table_cache = first.table_cache();
    let mut clusters = vec![first];
    for index in 1..size {
        let node_id = options.connection_pool_node_ids.get(index - 1).copied();
        let connected = cluster_options(node_id).and_then(|o| {
            let o = ClusterOptions {
                table_cache: Some(table_cache.clone()),
                ..o
            };
            Cluster::connect_with(&options.connect, o).map_err(|e| txn::native_error(&e))
        });
        match connected {
            Ok(cluster) => clusters.push(cluster),
            Err(error) => tracing::warn!(
                connection = index + 1,
                size,
                "a cluster connection of the pool is left out: {}",
                error.message
            ),
        }
    }
    let ids: Vec<String> = clusters
        .iter()
        .map(|c| c.node_id().get().to_string())
        .collect();
    tracing::info!(node_ids = %ids.join(","), "cluster connections");
    Ok(clusters)
}

/// How long a closing connection reads and drops what its client still
/// sends (see [`linger_close`]).
const LINGER_MS: u64 = 1_000;
/// Most bytes a closing connection reads and drops.
const LINGER_BYTES_MAX: u64 = 128 << 20;

/// Closes a client's socket gently: the write side first, then what the
/// client still sends is read and dropped until it closes too (or
/// [`LINGER_MS`], or [`LINGER_BYTES_MAX`]). Closing a socket with unread
/// data sends a reset, which can reach the client before the error sent
/// just before it — the 1153 for a packet over `max_allowed_packet`,
/// whose rest is still on its way.
fn linger_close(stream: &TcpStream) {
    if stream.shutdown(std::net::Shutdown::Write).is_err() {
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_millis(LINGER_MS);
    let mut drained: u64 = 0;
    let mut buffer = [0u8; 64 << 10];
    while drained < LINGER_BYTES_MAX {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match io::Read::read(&mut &*stream, &mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n as u64,
        }
    }
}

/// File descriptors the process needs besides its clients' sockets (the
/// cluster's links, logs, the listener).
const FILES_BESIDES_CLIENTS: u64 = 256;

/// Raises the soft limit of open files towards the hard one, so that
/// `max_connections` clients fit (as mysqld raises `open_files_limit`): a
/// common soft limit of 1,024 would otherwise refuse the thousandth
/// connection. Logs when the hard limit is too low.
fn raise_open_files_limit(max_connections: u32) {
    // Two per client: its socket and the second handle `KILL` shuts.
    let wanted = 2 * u64::from(max_connections) + FILES_BESIDES_CLIENTS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur >= wanted {
        return;
    }
    let raised = wanted.min(limit.rlim_max);
    let new = libc::rlimit {
        rlim_cur: raised,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 || raised < wanted {
        tracing::warn!(
            soft = limit.rlim_cur,
            hard = limit.rlim_max,
            max_connections,
            "the open-files limit holds fewer than max_connections clients; raise it (ulimit -n)"
        );
    }
}

/// A cluster connection's options: the `[mysqld]` or `[api]` slot asked
/// for, 1..=255 (a node id of the configuration).
fn cluster_options(node_id: Option<u16>) -> Result<ClusterOptions, SqlError> {
    let node_id = match node_id {
        None => None,
        Some(n) => Some(
            u8::try_from(n)
                .ok()
                .and_then(signal::NodeId::new)
                .ok_or_else(|| {
                    SqlError::new(
                        crate::error::codes::UNKNOWN,
                        format!("--node-id {n}: node ids are 1..=255"),
                    )
                })?,
        ),
    };
    Ok(ClusterOptions {
        node_id,
        ..ClusterOptions::default()
    })
}

/// The SQL node's cluster connections, each with the number of client
/// sessions it carries.
struct ClusterPool {
    clusters: Vec<Cluster>,
    load: Vec<AtomicUsize>,
}

impl ClusterPool {
    fn new(clusters: Vec<Cluster>) -> Arc<ClusterPool> {
        let load = clusters.iter().map(|_| AtomicUsize::new(0)).collect();
        Arc::new(ClusterPool { clusters, load })
    }

    /// A session on connection `group % connections` for a client of the
    /// thread pool's `group`, while that one has room; else on the least
    /// loaded connection (sessions live long, so round-robin would leave
    /// the connections uneven as clients come and go).
    ///
    /// A group's worker sends the key reads of the connections it serves
    /// together, one write per cluster connection (sql.md, "Batches
    /// across connections"): with a group's sessions spread over every
    /// connection, each batch went out as that many requests and came
    /// back as that many replies, each a wake-up of the data node and of
    /// the SQL node. On 2 CPUs (2 groups, 3 connections for 8,192
    /// sessions; 1 × 1 sandbox, builds alternating) sysbench point
    /// selects at 8 threads went from 31,502/30,268 to 34,870/35,122 qps
    /// and the data node's CPU per query from 12.3 to 9.7-10.8 µs; at 32
    /// threads 48,185/42,349 to 48,296/45,636.
    fn session(
        self: &Arc<ClusterPool>,
        group: Option<usize>,
    ) -> skarv_client::Result<(Session, Lease)> {
        let at = connection_for(
            self.clusters.len(),
            |at| self.load[at].load(Ordering::Relaxed),
            group,
        );
        self.load[at].fetch_add(1, Ordering::Relaxed);
        let lease = Lease(Arc::clone(self), at);
        let session = self.clusters[at].session()?;
        Ok((session, lease))
    }
}

/// Which of `count` cluster connections, carrying `load(at)` sessions
/// each, a new session goes on ([`ClusterPool::session`]).
fn connection_for(count: usize, load: impl Fn(usize) -> usize, group: Option<usize>) -> usize {
    match group.map(|g| g % count.max(1)) {
        Some(at) if load(at) < SESSIONS_MAX - SESSIONS_RESERVED => at,
        _ => (0..count).min_by_key(|&at| load(at)).unwrap_or(0),
    }
}

/// One session's count on its cluster connection.
struct Lease(Arc<ClusterPool>, usize);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.load[self.1].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A directory as MySQL shows one in a variable: with its final `/`.
fn dir_text(dir: &std::path::Path) -> String {
    let mut text = dir.display().to_string();
    if !text.ends_with('/') {
        text.push('/');
    }
    text
}

/// Shows the server's settings in the read-only variables.
fn publish_settings(engine: &Engine, pool: &ClusterPool, options: &ServerOptions) {
    let ids: Vec<String> = pool
        .clusters
        .iter()
        .map(|c| c.node_id().get().to_string())
        .collect();
    let settings = [
        ("max_connections", options.max_connections.to_string()),
        ("port", options.port.to_string()),
        ("tmpdir", std::env::temp_dir().display().to_string()),
        (
            "datadir",
            std::env::current_dir().map_or(String::new(), |d| dir_text(&d)),
        ),
        (
            "basedir",
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(dir_text))
                .unwrap_or_default(),
        ),
        (
            "ndb_cluster_connection_pool",
            pool.clusters.len().to_string(),
        ),
        ("ndb_cluster_connection_pool_nodeids", ids.join(",")),
        ("thread_handling", options.thread_handling.name().to_owned()),
        ("thread_pool_size", options.thread_pool_size.to_string()),
        (
            "thread_pool_max_threads",
            options.thread_pool_max_threads.to_string(),
        ),
        (
            "thread_pool_stall_limit",
            options.thread_pool_stall_limit_ms.to_string(),
        ),
        (
            "secure_file_priv",
            options
                .secure_file_priv
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
        ),
    ];
    let mut globals = engine.globals.lock().unwrap_or_else(|p| p.into_inner());
    for (name, value) in settings {
        globals.set(name, value);
    }
}

/// Serves MySQL clients accepted on `listener` with `engine` (its one
/// cluster connection), until the listener fails.
pub fn serve_on(
    listener: TcpListener,
    engine: Arc<Engine>,
    options: ServerOptions,
) -> Result<(), SqlError> {
    let clusters = vec![engine.cluster.clone()];
    serve_pool(listener, engine, clusters, options)
}

/// [`serve_on`] over the cluster connections `clusters`.
fn serve_pool(
    listener: TcpListener,
    engine: Arc<Engine>,
    clusters: Vec<Cluster>,
    options: ServerOptions,
) -> Result<(), SqlError> {
    let pool = ClusterPool::new(clusters);
    publish_settings(&engine, &pool, &options);
    let protocol = ProtocolOptions::default();
    let stopped = |error: io::Error| {
        SqlError::new(
            codes::UNKNOWN,
            format!("the SQL node stopped listening: {error}"),
        )
    };
    engine.start_idle_reaper().map_err(stopped)?;
    if options.thread_handling == ThreadHandling::PoolOfThreads {
        let threads = ThreadPool::start(PoolOptions {
            groups: options.thread_pool_size,
            max_threads: options.thread_pool_max_threads,
            stall_limit: Duration::from_millis(
                options
                    .thread_pool_stall_limit_ms
                    .max(thread_pool::THREAD_POOL_STALL_LIMIT_MS_MIN),
            ),
            stack_bytes: CONNECTION_STACK_BYTES,
        })
        .map_err(stopped)?;
        let start = move |stream: TcpStream, peer: SocketAddr, slot, refuser: &Refuser| {
            let group = threads.next_group();
            match PooledClient::open(&engine, &pool, group, stream, peer, slot) {
                Ok(client) => threads.submit_to(group, client),
                Err(Some((stream, error))) => refuser.refuse(stream, peer, &error),
                Err(None) => {}
            }
        };
        return accept_loop(listener, options.max_connections, protocol, start).map_err(stopped);
    }
    let handler = move |stream: &TcpStream, peer: SocketAddr, protocol: &ProtocolOptions| {
        let (session, _lease) = match pool.session(None) {
            Ok(session) => session,
            Err(error) => {
                let error = txn::native_error(&error);
                if let Err(e) = protocol::refuse_connection(stream, &error, protocol) {
                    tracing::debug!(%peer, "refusing a connection: {e}");
                }
                return;
            }
        };
        let mut conn = engine.open(&session, peer.ip());
        give_kill_handle(&conn, stream, peer);
        if let Err(error) = protocol::serve_connection(stream, &mut conn, peer.ip(), protocol) {
            tracing::debug!(%peer, "connection ended: {error}");
        }
    };
    serve_with(listener, options.max_connections, protocol, handler).map_err(stopped)
}

/// Gives `KILL` a second handle of the client's socket, which it shuts so
/// that a connection waiting for its client's next command ends at once.
fn give_kill_handle(conn: &Conn<'_>, stream: &TcpStream, peer: SocketAddr) {
    match stream.try_clone() {
        Ok(handle) => *conn.info.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle),
        Err(e) => {
            tracing::debug!(%peer, "no second socket handle, KILL waits for a command: {e}")
        }
    }
}

/// A client connection as the thread pool holds it: boxed, because the
/// pool moves a task by value between its queues, its epoll map and a
/// batch at every statement, and a [`Client`] is kilobytes (a point
/// select copied it about a dozen times: 12 % of the SQL node's
/// instructions, measured with bench/sql-instructions.sh).
struct PooledClient(Box<Client>);

const _: () = assert!(std::mem::size_of::<PooledClient>() == std::mem::size_of::<usize>());

/// A client connection's wire, its SQL side and the native session that
/// side borrows, owned together.
struct Client {
    wire: Wire<TcpStream>,
    /// Logged in (the login is served by the first run).
    logged_in: bool,
    /// How `Task::begin` left the command it took, for `Task::finish`.
    begun: io::Result<Begun>,
    /// Borrows `*session` (hence `'static`): dropped first, by hand.
    conn: ManuallyDrop<Conn<'static>>,
    /// Boxed by [`PooledClient::open`]; freed after `conn` by `drop`.
    session: NonNull<Session>,
    protocol: Arc<ProtocolOptions>,
    peer: SocketAddr,
    _lease: Lease,
    /// Holds the `max_connections` place until the socket is closed.
    _slot: ConnectionSlot,
}

// SAFETY: a `Session` is `Send` (checked below) but not `Sync` (its state
// is a `RefCell`), so `Conn`, which holds `&Session`, is not `Send`. Here
// every reference to the session lives inside this one value: the session
// is boxed and owned by it, and `conn` (its only borrower, handing the
// reference only to what it owns itself, like its open transaction) is
// dropped before the box is freed. Moving the whole value to another
// thread moves the session with every reference to it, so no two threads
// ever use the session at once. Nothing else of a `Conn` is tied to a
// thread (no `Rc`, no thread-locals; the native client wakes sessions
// through mutexes and condition variables, not thread handles).
unsafe impl Send for Client {}

const _: () = {
    const fn send<T: Send>() {}
    send::<Session>();
    send::<Wire<TcpStream>>();
    send::<Lease>();
};

impl PooledClient {
    /// A client connection with its session and SQL side, or the stream
    /// back with why there is none.
    fn open(
        engine: &Arc<Engine>,
        pool: &Arc<ClusterPool>,
        group: usize,
        stream: TcpStream,
        peer: SocketAddr,
        slot: ConnectionSlot,
    ) -> Result<PooledClient, Option<(TcpStream, SqlError)>> {
        let (session, lease) = match pool.session(Some(group)) {
            Ok(session) => session,
            Err(error) => return Err(Some((stream, txn::native_error(&error)))),
        };
        let protocol = Arc::clone(&slot.0);
        let wire = match Wire::new(stream, peer.ip(), &protocol) {
            Ok(wire) => wire,
            Err(error) => {
                tracing::warn!(%peer, "no nonce for a handshake, connection closed: {error}");
                return Err(None);
            }
        };
        let session = NonNull::from(Box::leak(Box::new(session)));
        // SAFETY: the box lives until `drop` frees it, after `conn`.
        let conn = engine.open(unsafe { session.as_ref() }, peer.ip());
        give_kill_handle(&conn, wire.stream(), peer);
        Ok(PooledClient(Box::new(Client {
            wire,
            logged_in: false,
            begun: Ok(Begun::NotTaken),
            conn: ManuallyDrop::new(conn),
            session,
            protocol,
            peer,
            _lease: lease,
            _slot: slot,
        })))
    }
}
impl Task for PooledClient {
    fn fd(&self) -> RawFd {
        self.0.wire.stream().as_raw_fd()
    }

    fn run(&mut self) -> Next {
        let client = &mut *self.0;
        let result = if client.logged_in {
            client.wire.command(&mut *client.conn, &client.protocol)
        } else {
            client.login()
        };
        client.next(result)
    }

    fn in_transaction(&self) -> bool {
        self.0.conn.status_flags() & status::IN_TRANS != 0
    }

    fn drained(&self) -> bool {
        self.0.wire.drained()
    }

    fn begin(&mut self) -> bool {
        let client = &mut *self.0;
        if !client.logged_in {
            return false;
        }
        client.begun = match client
            .wire
            .begin_command(&mut *client.conn, &client.protocol)
        {
            Ok(Begun::NotTaken) => return false,
            Ok(begun) => Ok(begun),
            Err(error) => Err(error),
        };
        true
    }

    fn send(batch: &[PooledClient]) {
        // SAFETY: each session is owned by its task (see `Send` above);
        // the batch's tasks are this thread's while it serves them.
        let sessions: Vec<&Session> = batch
            .iter()
            .filter(|task| matches!(task.0.begun, Ok(Begun::Deferred)))
            .map(|task| unsafe { task.0.session.as_ref() })
            .collect();
        if let Some(first) = batch.first().filter(|_| !sessions.is_empty()) {
            let status = &first.0.conn.engine.status;
            status.pool_batches.fetch_add(1, Ordering::Relaxed);
            status
                .pool_batched_reads
                .fetch_add(sessions.len() as u64, Ordering::Relaxed);
        }
        // A request that could not be sent completes with its error when
        // its statement finishes.
        let _ = skarv_client::send_all(&sessions);
    }

    fn finish(&mut self) -> Next {
        let client = &mut *self.0;
        let begun = std::mem::replace(&mut client.begun, Ok(Begun::NotTaken));
        let result = begun.and_then(|begun| {
            client
                .wire
                .finish_command(&mut *client.conn, &client.protocol, begun)
        });
        client.next(result)
    }
}

impl Client {
    /// What to do after a command, from how it went.
    fn next(&self, result: io::Result<bool>) -> Next {
        match result {
            Ok(true) if self.wire.has_buffered_input() => Next::Ready,
            Ok(true) => Next::Wait,
            Ok(false) => Next::Done,
            Err(error) => {
                tracing::debug!(peer = %self.peer, "connection ended: {error}");
                Next::Done
            }
        }
    }

    /// The handshake, on a worker: the client has [`CONNECT_TIMEOUT_MS`]
    /// for each packet of its login.
    fn login(&mut self) -> io::Result<bool> {
        let stream = self.wire.stream();
        stream.set_read_timeout(Some(Duration::from_millis(CONNECT_TIMEOUT_MS)))?;
        let logged_in = self.wire.login(&mut *self.conn, &self.protocol)?;
        self.wire.stream().set_read_timeout(None)?;
        self.logged_in = logged_in;
        Ok(logged_in)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.conn.disconnect();
        // SAFETY: dropped once, here; nothing uses it after.
        unsafe { ManuallyDrop::drop(&mut self.conn) };
        // SAFETY: boxed by `open` and borrowed only by `conn`, gone now.
        drop(unsafe { Box::from_raw(self.session.as_ptr()) });
        linger_close(self.wire.stream());
    }
}

/// The accept loop under [`serve_on`], for any backend: `handler` serves
/// one connection on its own thread (named `sql-conn-<n>`, `n` counting
/// accepted connections) and is called at most `max_connections` times at
/// once; past that a client gets ERR 1040. When the handler returns the
/// socket is closed gently ([`linger_close`]). Returns only when the
/// listener fails.
pub fn serve_with<F>(
    listener: TcpListener,
    max_connections: u32,
    protocol: ProtocolOptions,
    handler: F,
) -> io::Result<()>
where
    F: Fn(&TcpStream, SocketAddr, &ProtocolOptions) + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    let mut accepted: u64 = 0;
    let start = move |stream: TcpStream, peer: SocketAddr, slot: ConnectionSlot, _: &Refuser| {
        accepted += 1;
        let handler = Arc::clone(&handler);
        let spawned = thread::Builder::new()
            .name(format!("sql-conn-{accepted}"))
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                let protocol = Arc::clone(&slot.0);
                let outcome = catch_unwind(AssertUnwindSafe(|| handler(&stream, peer, &protocol)));
                if let Err(panic) = outcome {
                    tracing::error!(%peer, "connection thread panicked: {}", panic_text(&panic));
                }
                linger_close(&stream);
                drop(slot);
            });
        if let Err(error) = spawned {
            // The closure (stream and slot) was dropped with the error.
            tracing::error!(%peer, "cannot start a connection thread: {error}");
        }
    };
    accept_loop(listener, max_connections, protocol, start)
}

/// Accepts clients and hands each, with its place of `max_connections`,
/// to `start`; past `max_connections` a client gets ERR 1040. Returns only
/// when the listener fails.
fn accept_loop<F>(
    listener: TcpListener,
    max_connections: u32,
    protocol: ProtocolOptions,
    mut start: F,
) -> io::Result<()>
where
    F: FnMut(TcpStream, SocketAddr, ConnectionSlot, &Refuser),
{
    let address = listener.local_addr()?;
    let (ip, port) = (address.ip(), address.port());
    tracing::info!(%address, "SQL node listening (mysql -h {ip} -P {port} -u root)");
    let protocol = Arc::new(protocol);
    let refuser = Refuser {
        protocol: Arc::clone(&protocol),
        refusals: Arc::new(AtomicUsize::new(0)),
    };
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(error) if is_transient(&error) => {
                tracing::warn!(%address, "accept failed, retrying: {error}");
                thread::sleep(Duration::from_millis(ACCEPT_RETRY_PAUSE_MS));
                continue;
            }
            Err(error) => return Err(error),
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "TCP_NODELAY: {error}");
        }
        let connections = &protocol.stats.connections;
        if connections.fetch_add(1, Ordering::AcqRel) >= max_connections as usize {
            connections.fetch_sub(1, Ordering::AcqRel);
            let error = SqlError::new(codes::CON_COUNT, "Too many connections");
            refuser.refuse(stream, peer, &error);
            continue;
        }
        start(
            stream,
            peer,
            ConnectionSlot(Arc::clone(&protocol)),
            &refuser,
        );
    }
}

/// Errors after which `accept` can be tried again.
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::OutOfMemory
    ) || error.raw_os_error().is_some_and(is_out_of_descriptors)
}

/// EMFILE, ENFILE, ENOBUFS, ENOMEM: resources that come back.
fn is_out_of_descriptors(errno: i32) -> bool {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    const ENOBUFS: i32 = 105;
    const ENOMEM: i32 = 12;
    matches!(errno, EMFILE | ENFILE | ENOBUFS | ENOMEM)
}

/// Holds a place of `max_connections` until the connection thread ends,
/// however it ends.
struct ConnectionSlot(Arc<ProtocolOptions>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.stats.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Turns clients away, each on a short-lived thread of its own.
struct Refuser {
    protocol: Arc<ProtocolOptions>,
    /// Clients being turned away now.
    refusals: Arc<AtomicUsize>,
}

impl Refuser {
    /// Answers the client's login with `error` (1040 past
    /// `max_connections`) and closes the connection.
    fn refuse(&self, stream: TcpStream, peer: SocketAddr, error: &SqlError) {
        let refusals = &self.refusals;
        if refusals.fetch_add(1, Ordering::AcqRel) >= REFUSALS_MAX {
            refusals.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(%peer, "refusing too many clients: closed unanswered");
            return;
        }
        let protocol = Arc::clone(&self.protocol);
        let refusals_done = Arc::clone(refusals);
        let error = error.clone();
        let spawned = thread::Builder::new()
            .name("sql-refuse".to_owned())
            .stack_size(REFUSAL_STACK_BYTES)
            .spawn(move || {
                let timeout = Some(Duration::from_millis(REFUSAL_TIMEOUT_MS));
                let timeouts = stream
                    .set_read_timeout(timeout)
                    .and(stream.set_write_timeout(timeout));
                if timeouts.is_ok() {
                    if let Err(e) = protocol::refuse_connection(&stream, &error, &protocol) {
                        tracing::debug!(%peer, "refusing a connection: {e}");
                    }
                    linger_close(&stream);
                }
                refusals_done.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(spawn_error) = spawned {
            refusals.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(%peer, "refused, closed unanswered: {spawn_error}");
        }
    }
}

fn panic_text(panic: &Box<dyn Any + Send>) -> &str {
    if let Some(text) = panic.downcast_ref::<&str>() {
        text
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text
    } else {
        "(no message)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread group's clients share one cluster connection while it has
    /// room, so that the group's batches go out in one request; clients
    /// of no group, and a group's past that room, go on the least loaded.
    #[test]
    fn a_groups_sessions_share_a_cluster_connection_while_it_has_room() {
        let loads = [10, 0, 3];
        let load = |at: usize| loads[at];
        assert_eq!(connection_for(3, load, Some(0)), 0);
        assert_eq!(connection_for(3, load, Some(2)), 2);
        assert_eq!(connection_for(3, load, Some(4)), 1, "groups wrap around");
        assert_eq!(connection_for(3, load, None), 1, "the least loaded");
        let full = [SESSIONS_MAX - SESSIONS_RESERVED, 7, 3];
        let load = |at: usize| full[at];
        assert_eq!(connection_for(3, load, Some(0)), 2, "the group's is full");
        assert_eq!(connection_for(1, |_| 5, Some(3)), 0);
    }

    /// The deepest statement `sqlparser` accepts (nesting 50) parses on a
    /// connection thread's stack, and a deeper one is refused with an
    /// error rather than overflowing it.
    #[test]
    fn a_connection_stack_holds_the_deepest_statement_the_parser_takes() {
        let nested = |depth: usize| {
            format!(
                "SELECT {}1{} FROM t",
                "(1 + ".repeat(depth),
                ")".repeat(depth)
            )
        };
        let outcome = thread::Builder::new()
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                let deepest_accepted = (1..200)
                    .take_while(|&depth| crate::engine::parse(&nested(depth)).is_ok())
                    .last();
                let refused = crate::engine::parse(&nested(10_000)).is_err();
                (deepest_accepted, refused)
            })
            .unwrap()
            .join()
            .expect("the parser fits the connection stack");
        assert!(outcome.0.is_some_and(|depth| depth >= 20), "{outcome:?}");
        assert!(outcome.1);
    }
}
