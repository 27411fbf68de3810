//! The listener: accepts MySQL connections and serves each on a thread of
//! its own with a native session.
//!
//! A connection thread blocks in `read` while its client is idle, so an
//! idle connection costs a parked thread (its touched stack pages and an
//! 8 KiB read buffer) and no CPU. Over `max_connections` a client still
//! gets the handshake, so that it can read ERR 1040 instead of seeing the
//! socket close. A panic in a connection thread closes that connection
//! only.

use std::any::Any;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use skarv_client::{Cluster, ClusterOptions};

use crate::engine::{txn, Engine};
use crate::error::{codes, SqlError};
use crate::protocol::{self, ProtocolOptions};

/// Most client connections at once unless told (MySQL's default is 151;
/// an SQL node of a cluster is meant to take many more).
pub const MAX_CONNECTIONS_DEFAULT: u32 = 2_000;
/// Stack of a connection thread, in bytes. Parsing, planning and executing
/// recurse over the statement; the parser at its deepest (it stops at a
/// nesting depth of 50) fits in 96 KiB (measured with the test below), and
/// the rest leaves room for the planner and executors over the same tree.
/// Pages never touched cost nothing.
pub const CONNECTION_STACK_BYTES: usize = 1 << 20;
/// Stack of a thread that turns a client away, in bytes.
pub const REFUSAL_STACK_BYTES: usize = 128 << 10;
/// Clients being turned away at once; past it one is closed unanswered.
pub const REFUSALS_MAX: usize = 64;
/// How long a client being turned away has to send its login, in ms.
pub const REFUSAL_TIMEOUT_MS: u64 = 5_000;
/// Pause after a failed `accept` (out of descriptors), in ms, so that the
/// loop does not spin while none can be had.
pub const ACCEPT_RETRY_PAUSE_MS: u64 = 10;

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
}

/// Connects to the cluster and serves MySQL clients until the process is
/// stopped.
pub fn serve(options: ServerOptions) -> Result<(), SqlError> {
    raise_open_files_limit(options.max_connections);
    let cluster = Cluster::connect_with(&options.connect, cluster_options(&options)?)
        .map_err(|error| txn::native_error(&error))?;
    let engine = Engine::start(cluster)?;
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
    serve_on(listener, engine, options)
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

/// The cluster connection's options for `options`: the `[mysqld]` or
/// `[api]` slot asked for, 1..=255 (a node id of the configuration).
fn cluster_options(options: &ServerOptions) -> Result<ClusterOptions, SqlError> {
    let node_id = match options.node_id {
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

/// Serves MySQL clients accepted on `listener` with `engine`, until the
/// listener fails. Each connection gets its own thread and native session.
pub fn serve_on(
    listener: TcpListener,
    engine: Arc<Engine>,
    options: ServerOptions,
) -> Result<(), SqlError> {
    let protocol = ProtocolOptions::default();
    let handler = move |stream: &TcpStream, peer: SocketAddr, protocol: &ProtocolOptions| {
        let session = match engine.cluster.session() {
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
        match stream.try_clone() {
            Ok(handle) => {
                *conn.info.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle)
            }
            Err(e) => {
                tracing::debug!(%peer, "no second socket handle, KILL waits for a command: {e}")
            }
        }
        if let Err(error) = protocol::serve_connection(stream, &mut conn, peer.ip(), protocol) {
            tracing::debug!(%peer, "connection ended: {error}");
        }
    };
    serve_with(listener, options.max_connections, protocol, handler).map_err(|error| {
        SqlError::new(
            codes::UNKNOWN,
            format!("the SQL node stopped listening: {error}"),
        )
    })
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
    let address = listener.local_addr()?;
    let (ip, port) = (address.ip(), address.port());
    tracing::info!(%address, "SQL node listening (mysql -h {ip} -P {port} -u root)");
    let protocol = Arc::new(protocol);
    let handler = Arc::new(handler);
    let refusals = Arc::new(AtomicUsize::new(0));
    let mut accepted: u64 = 0;
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
        accepted += 1;
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "TCP_NODELAY: {error}");
        }
        let connections = &protocol.stats.connections;
        if connections.fetch_add(1, Ordering::AcqRel) >= max_connections as usize {
            connections.fetch_sub(1, Ordering::AcqRel);
            refuse(stream, peer, &protocol, &refusals);
            continue;
        }
        let guard = ConnectionSlot(Arc::clone(&protocol));
        let handler = Arc::clone(&handler);
        let spawned = thread::Builder::new()
            .name(format!("sql-conn-{accepted}"))
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                let protocol = Arc::clone(&guard.0);
                let outcome = catch_unwind(AssertUnwindSafe(|| handler(&stream, peer, &protocol)));
                if let Err(panic) = outcome {
                    tracing::error!(%peer, "connection thread panicked: {}", panic_text(&panic));
                }
                linger_close(&stream);
                drop(guard);
            });
        if let Err(error) = spawned {
            // The closure (stream and slot) was dropped with the error.
            tracing::error!(%peer, "cannot start a connection thread: {error}");
        }
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

/// Turns a client away with 1040 on a short-lived thread of its own.
fn refuse(
    stream: TcpStream,
    peer: SocketAddr,
    protocol: &Arc<ProtocolOptions>,
    refusals: &Arc<AtomicUsize>,
) {
    if refusals.fetch_add(1, Ordering::AcqRel) >= REFUSALS_MAX {
        refusals.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(%peer, "too many connections: closed unanswered");
        return;
    }
    let protocol = Arc::clone(protocol);
    let refusals_done = Arc::clone(refusals);
    let spawned = thread::Builder::new()
        .name("sql-refuse".to_owned())
        .stack_size(REFUSAL_STACK_BYTES)
        .spawn(move || {
            let timeout = Some(Duration::from_millis(REFUSAL_TIMEOUT_MS));
            let timeouts = stream
                .set_read_timeout(timeout)
                .and(stream.set_write_timeout(timeout));
            if timeouts.is_ok() {
                let error = SqlError::new(codes::CON_COUNT, "Too many connections");
                if let Err(e) = protocol::refuse_connection(&stream, &error, &protocol) {
                    tracing::debug!(%peer, "refusing a connection: {e}");
                }
                linger_close(&stream);
            }
            refusals_done.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(error) = spawned {
        refusals.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(%peer, "too many connections, closed unanswered: {error}");
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
