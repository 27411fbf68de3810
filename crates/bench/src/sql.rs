//! `skarv bench sql`: sysbench's `oltp_point_select` query over many MySQL
//! connections that a few threads drive.
//!
//! Why not sysbench itself: sysbench runs a thread (and a Lua state) per
//! connection. On a small machine, at 1,024 or 4,096 connections its own
//! scheduling costs more per query than the server does (measured on the 2
//! CPUs of issue 21's runs: 28 µs of sysbench CPU per query at 32 threads,
//! 57 µs at 1,024), so what such a run shows is the client, not whether the
//! server's thread pool holds its throughput. Here each thread owns many
//! nonblocking connections on one `epoll` set; every connection keeps one
//! query in flight (a closed loop, as sysbench's threads do), so the server
//! sees the same load as from that many sysbench threads. The report gives
//! the client's own CPU per query, so a reader can tell that it is small.
//!
//! The query is a prepared `SELECT c FROM <table> WHERE id = ?` (sysbench's
//! point select) with `id` drawn uniformly from 1..=`table_size`; the table
//! is one sysbench `prepare` made. A reply must hold exactly one row: any
//! other answer (an error, no row) fails the run, so a misconfigured table
//! cannot produce a fast, empty figure.
//!
//! The protocol is the classic one (no TLS, no compression, no
//! `CLIENT_DEPRECATE_EOF`), with `mysql_native_password` or no password,
//! which MariaDB, MySQL 5.7 and Skarv's SQL node all speak.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::Serialize;
use sha1::{Digest, Sha1};

/// Most connections one run may open (seed 004's largest count).
pub const CONNECTIONS_MAX: usize = 8_192;
/// Most driving threads.
pub const THREADS_MAX: usize = 256;
/// How long a handshake or a prepare may take before the run fails.
const SETUP_TIMEOUT_MS: u64 = 30_000;
/// How long the event loop waits in one `epoll_wait` (the deadline check).
const POLL_WAIT_MS: u64 = 50;
/// How long a run may see no reply at all before it fails (a server that
/// stopped answering must not hang the bench).
const STALL_TIMEOUT_MS: u64 = 30_000;
/// Events taken per `epoll_wait`.
const EVENTS_PER_WAIT_MAX: usize = 1_024;
/// Bytes read per `read` call.
const READ_CHUNK_BYTES: usize = 16 * 1_024;
/// The largest packet the client accepts (a point select's row is small;
/// anything larger is a protocol error, not a reply).
const PACKET_BYTES_MAX: usize = 1 << 20;

/// Capability flags the client sends (MySQL's `CLIENT_*`).
const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_CONNECT_WITH_DB: u32 = 8;
const CLIENT_PROTOCOL_41: u32 = 512;
const CLIENT_TRANSACTIONS: u32 = 8_192;
const CLIENT_SECURE_CONNECTION: u32 = 32_768;
const CLIENT_PLUGIN_AUTH: u32 = 1 << 19;
/// utf8mb4_general_ci.
const CHARSET_UTF8MB4: u8 = 45;
const COM_QUIT: u8 = 0x01;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
/// MYSQL_TYPE_LONGLONG, the type the key is bound as.
const TYPE_LONGLONG: u8 = 0x08;
const NATIVE_PASSWORD: &str = "mysql_native_password";

/// What to run.
#[derive(Clone, Debug)]
pub struct SqlOptions {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
    /// The sysbench table (`sbtest1`), with ids 1..=`table_size`.
    pub table: String,
    pub table_size: u64,
    /// Connections, spread evenly over the threads.
    pub connections: usize,
    pub threads: usize,
    /// Queries run before the measured interval starts (not counted).
    pub warmup: Duration,
    /// The measured interval.
    pub duration: Duration,
    /// Seed of the key sequence (each connection gets its own stream).
    pub seed: u64,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct SqlReport {
    pub connections: usize,
    pub threads: usize,
    /// Seconds the connections took to open, authenticate and prepare.
    pub connect_s: f64,
    /// Queries answered inside the measured interval.
    pub queries: u64,
    pub seconds: f64,
    pub qps: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The bench's own CPU (user + system) per measured query.
    pub client_cpu_us_per_query: f64,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SqlBenchError {
    #[error("{0}")]
    Options(String),
    #[error("{addr}: connection {conn}: {message}")]
    Connection {
        addr: String,
        conn: usize,
        message: String,
    },
    #[error("starting a bench thread: {0}")]
    Thread(io::Error),
}

/// Runs the bench; see the module comment.
pub fn run(options: &SqlOptions) -> Result<SqlReport, SqlBenchError> {
    check(options)?;
    raise_open_files_limit(options.connections);
    let addr = format!("{}:{}", options.host, options.port);
    let started = Instant::now();
    // Every thread opens its share, then all start together, so the
    // measured interval never sees connections still logging in.
    let per_thread = split(options.connections, options.threads);
    let mut first = 0;
    let ranges: Vec<_> = per_thread
        .iter()
        .map(|&count| {
            first += count;
            first - count..first
        })
        .collect();
    let opened = on_threads("bench-sql-open", ranges, |range| {
        range.map(|id| Conn::open(&addr, id, options)).collect()
    });
    let mut groups = Vec::with_capacity(opened.len());
    for group in opened {
        groups.push(group?);
    }
    let connect_s = started.elapsed().as_secs_f64();

    let cpu_before = process_cpu_us();
    let start = Instant::now();
    let measure_from = start + options.warmup;
    let end = measure_from + options.duration;
    let results = on_threads("bench-sql", groups, |conns| {
        drive(&addr, conns, options, measure_from, end)
    });
    let cpu_us = process_cpu_us().saturating_sub(cpu_before);
    let mut total = Tally::default();
    for tally in results {
        total.merge(&tally?);
    }
    let seconds = options.duration.as_secs_f64();
    let queries = total.histogram.count();
    // The warm-up's CPU is counted too: the figure errs high, never low.
    let measured_share = seconds / (seconds + options.warmup.as_secs_f64());
    let measured_cpu_us = cpu_us as f64 * measured_share;
    Ok(SqlReport {
        connections: options.connections,
        threads: options.threads,
        connect_s,
        queries,
        seconds,
        qps: queries as f64 / seconds,
        p50_us: total.histogram.quantile(0.50),
        p95_us: total.histogram.quantile(0.95),
        p99_us: total.histogram.quantile(0.99),
        max_us: total.histogram.max,
        client_cpu_us_per_query: if queries == 0 {
            0.0
        } else {
            measured_cpu_us / queries as f64
        },
    })
}

/// Runs `work` on each of `inputs` in a thread of its own and gathers the
/// results in order (a thread that could not start, or panicked, is an
/// error of its own).
fn on_threads<I: Send, R: Send>(
    name: &str,
    inputs: Vec<I>,
    work: impl Fn(I) -> Result<R, SqlBenchError> + Sync,
) -> Vec<Result<R, SqlBenchError>> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = inputs
            .into_iter()
            .map(|input| {
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(scope, move || work(input))
                    .map_err(SqlBenchError::Thread)
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.and_then(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(SqlBenchError::Options(format!("a {name} thread panicked")))
                    })
                })
            })
            .collect()
    })
}

/// The report as a table row, with its header.
pub fn render(report: &SqlReport) -> String {
    format!(
        "{:>11} {:>7} {:>10} {:>9} {:>9} {:>9} {:>12} {:>9}\n{:>11} {:>7} {:>10.0} {:>9} {:>9} {:>9} {:>12.1} {:>9.2}\n",
        "connections",
        "threads",
        "qps",
        "p50 µs",
        "p95 µs",
        "p99 µs",
        "client µs/q",
        "connect s",
        report.connections,
        report.threads,
        report.qps,
        report.p50_us,
        report.p95_us,
        report.p99_us,
        report.client_cpu_us_per_query,
        report.connect_s,
    )
}

fn check(o: &SqlOptions) -> Result<(), SqlBenchError> {
    let bad = |m: String| Err(SqlBenchError::Options(m));
    if o.connections == 0 || o.connections > CONNECTIONS_MAX {
        return bad(format!(
            "--connections {}: between 1 and {CONNECTIONS_MAX}",
            o.connections
        ));
    }
    if o.threads == 0 || o.threads > THREADS_MAX || o.threads > o.connections {
        return bad(format!(
            "--threads {}: between 1 and {THREADS_MAX}, and at most --connections ({})",
            o.threads, o.connections
        ));
    }
    if o.table_size == 0 {
        return bad("--table-size 0: the table must have rows".into());
    }
    if o.duration.is_zero() {
        return bad("--seconds: must be positive".into());
    }
    let simple =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !simple(&o.table) || !simple(&o.database) {
        return bad(format!(
            "--table {} / --database {}: letters, digits and _ only",
            o.table, o.database
        ));
    }
    Ok(())
}

/// `total` split into `parts` near-equal counts.
fn split(total: usize, parts: usize) -> Vec<usize> {
    (0..parts)
        .map(|i| total / parts + usize::from(i < total % parts))
        .collect()
}

/// One connection: its socket, its prepared statement and the reply it is
/// reading.
struct Conn {
    id: usize,
    stream: TcpStream,
    rng: u64,
    /// Bytes read and not yet parsed.
    input: Vec<u8>,
    reply: Reply,
    sent_at: Instant,
    /// The execute packet, rebuilt in place for each key.
    execute: [u8; EXECUTE_PACKET_BYTES],
}

/// Header (4) + command (1) + statement id (4) + flags (1) + iterations
/// (4) + NULL bitmap (1) + new-params flag (1) + type (2) + value (8).
const EXECUTE_PACKET_BYTES: usize = 26;

/// Where the reading of a binary result set stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reply {
    /// Waiting for the column count (or an error).
    Start,
    /// Column definitions and their EOF still to come.
    Columns(u64),
    /// Rows, until the closing EOF.
    Rows(u64),
}

impl Conn {
    fn open(addr: &str, id: usize, o: &SqlOptions) -> Result<Conn, SqlBenchError> {
        let fail = |message: String| SqlBenchError::Connection {
            addr: addr.to_string(),
            conn: id,
            message,
        };
        let target = addr
            .to_socket_addrs()
            .map_err(|e| fail(format!("resolving: {e}")))?
            .next()
            .ok_or_else(|| fail("resolves to no address".into()))?;
        let timeout = Duration::from_millis(SETUP_TIMEOUT_MS);
        let stream = TcpStream::connect_timeout(&target, timeout)
            .map_err(|e| fail(format!("connecting: {e}")))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| fail(e.to_string()))?;
        let mut setup = Setup { stream, seq: 0 };
        setup
            .login(o)
            .map_err(|m| fail(format!("logging in: {m}")))?;
        let sql = format!("SELECT c FROM {} WHERE id = ?", o.table);
        let statement = setup
            .prepare(&sql)
            .map_err(|m| fail(format!("preparing {sql}: {m}")))?;
        let stream = setup.stream;
        stream
            .set_nonblocking(true)
            .map_err(|e| fail(e.to_string()))?;
        let mut execute = [0u8; EXECUTE_PACKET_BYTES];
        let payload = (EXECUTE_PACKET_BYTES - 4) as u32;
        execute[..3].copy_from_slice(&payload.to_le_bytes()[..3]);
        execute[3] = 0;
        execute[4] = COM_STMT_EXECUTE;
        execute[5..9].copy_from_slice(&statement.to_le_bytes());
        execute[9] = 0; // CURSOR_TYPE_NO_CURSOR
        execute[10..14].copy_from_slice(&1u32.to_le_bytes());
        execute[14] = 0; // no NULLs
        execute[15] = 1; // types follow
        execute[16] = TYPE_LONGLONG;
        execute[17] = 0; // signed
        Ok(Conn {
            id,
            stream,
            rng: splitmix(o.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            input: Vec::with_capacity(READ_CHUNK_BYTES),
            reply: Reply::Start,
            sent_at: Instant::now(),
            execute,
        })
    }

    /// Sends the next point select.
    fn send(&mut self, table_size: u64) -> Result<(), String> {
        self.rng = splitmix(self.rng);
        let key = 1 + self.rng % table_size;
        self.execute[18..26].copy_from_slice(&key.to_le_bytes());
        self.reply = Reply::Start;
        self.sent_at = Instant::now();
        let mut sent = 0;
        while sent < self.execute.len() {
            match self.stream.write(&self.execute[sent..]) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => sent += n,
                // One 26-byte request on a socket with nothing else in
                // flight: the send buffer is never full for long.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("sending: {e}")),
            }
        }
        Ok(())
    }

    /// Reads what the socket has; returns how many replies completed (0
    /// or 1: one query is in flight) and the socket's end.
    fn receive(&mut self, chunk: &mut [u8]) -> Result<(bool, bool), String> {
        let mut closed = false;
        loop {
            match self.stream.read(chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading: {e}")),
            }
        }
        let mut at = 0;
        let mut done = false;
        while self.input.len() - at >= 4 {
            let len = usize::from(self.input[at])
                | usize::from(self.input[at + 1]) << 8
                | usize::from(self.input[at + 2]) << 16;
            if len > PACKET_BYTES_MAX {
                return Err(format!(
                    "a packet of {len} bytes (at most {PACKET_BYTES_MAX})"
                ));
            }
            if self.input.len() - at < 4 + len {
                break;
            }
            let packet = &self.input[at + 4..at + 4 + len];
            at += 4 + len;
            if done {
                return Err("bytes after the reply, with no query in flight".into());
            }
            done = step(&mut self.reply, packet)?;
        }
        self.input.drain(..at);
        if closed && !done {
            return Err("the server closed the connection".into());
        }
        Ok((done, closed))
    }
}

/// Takes one packet of the reply; true when the reply is complete.
fn step(reply: &mut Reply, packet: &[u8]) -> Result<bool, String> {
    let first = packet.first().copied();
    if first == Some(0xFF) {
        return Err(format!("the server answered {}", error_text(packet)));
    }
    match *reply {
        Reply::Start => {
            let (columns, _) = lenenc(packet).ok_or("a malformed column count")?;
            if columns == 0 {
                return Err("an OK instead of a result set".into());
            }
            *reply = Reply::Columns(columns + 1);
            Ok(false)
        }
        Reply::Columns(left) => {
            *reply = if left == 1 {
                Reply::Rows(0)
            } else {
                Reply::Columns(left - 1)
            };
            Ok(false)
        }
        Reply::Rows(rows) => {
            if first == Some(0xFE) && packet.len() < 9 {
                if rows != 1 {
                    return Err(format!(
                        "{rows} rows for one id (is the table loaded with ids 1..=table size?)"
                    ));
                }
                return Ok(true);
            }
            *reply = Reply::Rows(rows + 1);
            Ok(false)
        }
    }
}

/// Blocking set-up of one connection: handshake, login, prepare.
struct Setup {
    stream: TcpStream,
    seq: u8,
}

impl Setup {
    fn read_packet(&mut self) -> Result<Vec<u8>, String> {
        let mut header = [0u8; 4];
        self.stream
            .read_exact(&mut header)
            .map_err(|e| format!("reading: {e}"))?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        if len > PACKET_BYTES_MAX {
            return Err(format!(
                "a packet of {len} bytes (at most {PACKET_BYTES_MAX})"
            ));
        }
        self.seq = header[3].wrapping_add(1);
        let mut payload = vec![0u8; len];
        self.stream
            .read_exact(&mut payload)
            .map_err(|e| format!("reading: {e}"))?;
        Ok(payload)
    }

    fn write_packet(&mut self, payload: &[u8]) -> Result<(), String> {
        let len = payload.len() as u32;
        let mut packet = Vec::with_capacity(4 + payload.len());
        packet.extend_from_slice(&len.to_le_bytes()[..3]);
        packet.push(self.seq);
        packet.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self.stream
            .write_all(&packet)
            .map_err(|e| format!("writing: {e}"))
    }

    fn login(&mut self, o: &SqlOptions) -> Result<(), String> {
        let hello = self.read_packet()?;
        if hello.first() == Some(&0xFF) {
            return Err(format!("the server refused: {}", error_text(&hello)));
        }
        let (seed, plugin) = parse_handshake(&hello).ok_or("a malformed handshake")?;
        let caps = CLIENT_LONG_PASSWORD
            | CLIENT_CONNECT_WITH_DB
            | CLIENT_PROTOCOL_41
            | CLIENT_TRANSACTIONS
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH;
        let auth = if plugin == NATIVE_PASSWORD || o.password.is_empty() {
            native_password(o.password.as_bytes(), &seed)
        } else {
            return Err(format!(
                "the server asks for {plugin}; only {NATIVE_PASSWORD}"
            ));
        };
        let mut answer = Vec::with_capacity(64 + o.user.len() + o.database.len());
        answer.extend_from_slice(&caps.to_le_bytes());
        answer.extend_from_slice(&(PACKET_BYTES_MAX as u32).to_le_bytes());
        answer.push(CHARSET_UTF8MB4);
        answer.extend_from_slice(&[0u8; 23]);
        answer.extend_from_slice(o.user.as_bytes());
        answer.push(0);
        answer.push(auth.len() as u8);
        answer.extend_from_slice(&auth);
        answer.extend_from_slice(o.database.as_bytes());
        answer.push(0);
        answer.extend_from_slice(NATIVE_PASSWORD.as_bytes());
        answer.push(0);
        self.write_packet(&answer)?;
        loop {
            let reply = self.read_packet()?;
            match reply.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(error_text(&reply)),
                // AuthSwitchRequest: plugin name, then a new seed.
                Some(0xFE) => {
                    let rest = &reply[1..];
                    let nul = rest
                        .iter()
                        .position(|&b| b == 0)
                        .ok_or("a malformed auth switch")?;
                    let plugin = String::from_utf8_lossy(&rest[..nul]).into_owned();
                    if plugin != NATIVE_PASSWORD {
                        return Err(format!(
                            "the server switches to {plugin}; only {NATIVE_PASSWORD}"
                        ));
                    }
                    let seed: Vec<u8> = rest[nul + 1..]
                        .iter()
                        .copied()
                        .take_while(|&b| b != 0)
                        .collect();
                    let auth = native_password(o.password.as_bytes(), &seed);
                    self.write_packet(&auth)?;
                }
                _ => return Err("an unexpected packet while logging in".into()),
            }
        }
    }

    fn prepare(&mut self, sql: &str) -> Result<u32, String> {
        self.seq = 0;
        let mut payload = Vec::with_capacity(1 + sql.len());
        payload.push(COM_STMT_PREPARE);
        payload.extend_from_slice(sql.as_bytes());
        self.write_packet(&payload)?;
        let ok = self.read_packet()?;
        if ok.first() == Some(&0xFF) {
            return Err(error_text(&ok));
        }
        if ok.len() < 12 || ok[0] != 0 {
            return Err("a malformed prepare reply".into());
        }
        let statement = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
        let columns = u16::from_le_bytes([ok[5], ok[6]]);
        let params = u16::from_le_bytes([ok[7], ok[8]]);
        if params != 1 {
            return Err(format!("{params} parameters, not 1"));
        }
        // Each list of definitions ends with an EOF packet.
        for count in [params, columns] {
            if count > 0 {
                for _ in 0..=count {
                    self.read_packet()?;
                }
            }
        }
        Ok(statement)
    }
}

/// The auth-plugin seed and plugin name of a protocol-10 handshake.
fn parse_handshake(p: &[u8]) -> Option<(Vec<u8>, String)> {
    if *p.first()? != 10 {
        return None;
    }
    let version_end = 1 + p[1..].iter().position(|&b| b == 0)?;
    let mut at = version_end + 1 + 4; // version NUL, connection id
    let mut seed = p.get(at..at + 8)?.to_vec();
    at += 8 + 1 + 2 + 1 + 2 + 2; // seed, filler, caps, charset, status, caps
    let seed_len = usize::from(*p.get(at)?);
    at += 1 + 10;
    let rest = seed_len.saturating_sub(8).max(13);
    let part2 = p.get(at..at + rest)?;
    seed.extend(part2.iter().copied().take_while(|&b| b != 0));
    at += rest;
    let plugin = p
        .get(at..)
        .map(|r| {
            String::from_utf8_lossy(&r[..r.iter().position(|&b| b == 0).unwrap_or(r.len())])
                .into_owned()
        })
        .unwrap_or_default();
    Some((seed, plugin))
}

/// `mysql_native_password`: SHA1(pw) XOR SHA1(seed ++ SHA1(SHA1(pw))).
fn native_password(password: &[u8], seed: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(seed);
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// A length-encoded integer at the start of `p`, and its width.
fn lenenc(p: &[u8]) -> Option<(u64, usize)> {
    let first = *p.first()?;
    let read = |n: usize| -> Option<u64> {
        let bytes = p.get(1..1 + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, &b| acc << 8 | u64::from(b)),
        )
    };
    match first {
        0..=0xFA => Some((u64::from(first), 1)),
        0xFC => Some((read(2)?, 3)),
        0xFD => Some((read(3)?, 4)),
        0xFE => Some((read(8)?, 9)),
        _ => None,
    }
}

/// An ERR packet as `code (SQLSTATE): message`.
fn error_text(p: &[u8]) -> String {
    if p.len() < 3 {
        return "a malformed error".into();
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, message) = if p.get(3) == Some(&b'#') && p.len() >= 9 {
        (String::from_utf8_lossy(&p[4..9]).into_owned(), &p[9..])
    } else {
        (String::new(), &p[3..])
    };
    format!(
        "error {code} ({state}): {}",
        String::from_utf8_lossy(message)
    )
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One thread's figures.
#[derive(Default)]
struct Tally {
    histogram: Histogram,
}

impl Tally {
    fn merge(&mut self, other: &Tally) {
        self.histogram.merge(&other.histogram);
    }
}

/// Sub-buckets per power of two: latencies are kept to within 1/16 (6 %).
const HISTOGRAM_SUB_BITS: u32 = 4;
const HISTOGRAM_BUCKETS: usize = 64 << HISTOGRAM_SUB_BITS;

/// A log-linear histogram of microseconds, allocated once per thread.
struct Histogram {
    counts: Vec<u64>,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; HISTOGRAM_BUCKETS],
            max: 0,
        }
    }
}

impl Histogram {
    fn bucket(us: u64) -> usize {
        let sub = 1u64 << HISTOGRAM_SUB_BITS;
        if us < sub {
            return us as usize;
        }
        let top = 63 - us.leading_zeros(); // >= HISTOGRAM_SUB_BITS
        let shift = top - HISTOGRAM_SUB_BITS;
        let mantissa = (us >> shift) - sub; // 0..sub
        ((u64::from(shift) + 1) * sub + mantissa) as usize
    }

    /// The largest value of a bucket (a quantile errs high, never low).
    fn upper(bucket: usize) -> u64 {
        let sub = 1u64 << HISTOGRAM_SUB_BITS;
        let b = bucket as u64;
        if b < sub {
            return b;
        }
        let shift = b / sub - 1;
        let mantissa = b % sub + sub;
        ((mantissa + 1) << shift) - 1
    }

    fn record(&mut self, us: u64) {
        self.counts[Self::bucket(us).min(HISTOGRAM_BUCKETS - 1)] += 1;
        self.max = self.max.max(us);
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.max = self.max.max(other.max);
    }

    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let want = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Self::upper(bucket).min(self.max);
            }
        }
        self.max
    }
}

/// One thread's event loop over its connections until `end`.
fn drive(
    addr: &str,
    conns: Vec<Conn>,
    o: &SqlOptions,
    measure_from: Instant,
    end: Instant,
) -> Result<Tally, SqlBenchError> {
    let fail = |conn: usize, message: String| SqlBenchError::Connection {
        addr: addr.to_string(),
        conn,
        message,
    };
    let poll_err = |e: io::Error| SqlBenchError::Options(format!("epoll: {e}"));
    let mut poll = Poll::new().map_err(poll_err)?;
    let mut conns = conns;
    for (i, conn) in conns.iter_mut().enumerate() {
        // The socket stays the std one (already nonblocking); epoll only
        // needs its descriptor, so no second descriptor is made.
        poll.registry()
            .register(
                &mut SourceFd(&conn.stream.as_raw_fd()),
                Token(i),
                Interest::READABLE,
            )
            .map_err(poll_err)?;
        conn.send(o.table_size).map_err(|m| fail(conn.id, m))?;
    }
    let mut events = Events::with_capacity(EVENTS_PER_WAIT_MAX);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut tally = Tally::default();
    let mut last_reply = Instant::now();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let wait = (end - now).min(Duration::from_millis(POLL_WAIT_MS));
        match poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(poll_err(e)),
        }
        let now = Instant::now();
        for event in events.iter() {
            let conn = &mut conns[event.token().0];
            let (done, closed) = conn.receive(&mut chunk).map_err(|m| fail(conn.id, m))?;
            if done {
                last_reply = now;
                if conn.sent_at >= measure_from && now <= end {
                    tally
                        .histogram
                        .record((now - conn.sent_at).as_micros() as u64);
                }
                if closed {
                    return Err(fail(conn.id, "the server closed the connection".into()));
                }
                conn.send(o.table_size).map_err(|m| fail(conn.id, m))?;
            }
        }
        if now.duration_since(last_reply) > Duration::from_millis(STALL_TIMEOUT_MS) {
            return Err(SqlBenchError::Options(format!(
                "{addr}: no reply on any of this thread's connections for {STALL_TIMEOUT_MS} ms"
            )));
        }
    }
    // COM_QUIT, best effort: the run's figures are already taken.
    for conn in &mut conns {
        let quit = [1u8, 0, 0, 0, COM_QUIT];
        let _ = conn.stream.write(&quit);
    }
    Ok(tally)
}

/// This process's user + system CPU, in microseconds.
fn process_cpu_us() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given,
    // which points at a zeroed value of that type.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: getrusage succeeded, so the value is initialised (it was
    // zeroed before in any case).
    let usage = unsafe { usage.assume_init() };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// Lifts the soft open-files limit to the hard one when the connections
/// need more than it allows (a bench of 8,192 connections needs 8,192
/// descriptors); failing to, the first refused connect names the error.
fn raise_open_files_limit(connections: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
            && (limit.rlim_cur as usize) < connections + 64
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_hold_their_values_within_a_sixteenth() {
        for us in [0u64, 1, 15, 16, 17, 31, 32, 100, 1_000, 65_535, 1 << 40] {
            let b = Histogram::bucket(us);
            let upper = Histogram::upper(b);
            assert!(upper >= us, "{us}: bucket {b} ends at {upper}");
            assert!(
                upper - us <= us / 16 + 1,
                "{us}: bucket {b} ends at {upper}"
            );
            if b > 0 {
                assert!(
                    Histogram::upper(b - 1) < us,
                    "{us}: bucket {b} starts too late"
                );
            }
        }
        let mut h = Histogram::default();
        for us in 1..=100 {
            h.record(us);
        }
        assert_eq!(h.count(), 100);
        // 50 shares its bucket with 51: a quantile is its bucket's top.
        assert_eq!(h.quantile(0.5), 51);
        assert!(
            (95..=99).contains(&h.quantile(0.95)),
            "{}",
            h.quantile(0.95)
        );
        assert_eq!(h.quantile(1.0), 100);
    }

    #[test]
    fn native_password_matches_the_protocol_s_definition() {
        // Computed with Python's hashlib, outside this code:
        // s1 = sha1(b"secret"); m = sha1(b"a" * 20 + sha1(s1)); s1 XOR m.
        let got = native_password(b"secret", &[b'a'; 20]);
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "512ae2a4d1572c011140a7362190e07e79eb03d2");
        assert!(native_password(b"", &[b'a'; 20]).is_empty());
    }

    #[test]
    fn splits_connections_evenly() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(4_096, 4), vec![1_024; 4]);
    }
}
