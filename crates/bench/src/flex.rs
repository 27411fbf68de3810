//! `skarv bench flex`: NDB's flexAsynch on the native API. Threads keep
//! `-p` transactions each in flight on a cluster through the asynchronous
//! API (prepare, send, poll) and run phases — insert, read, update, delete
//! — over their own keys, measuring per phase operations/s,
//! transactions/s and the latency of each transaction from prepare to
//! completion (retries included), and counting errors by code.
//!
//! Keys: thread `i` owns keys `i·o·b .. (i+1)·o·b`; its transaction `j`
//! touches the `b` keys from `i·o·b + j·b`. So a phase touches
//! `threads × o × b` rows (flexAsynch multiplies by `-p` as well; here `-p`
//! changes only the concurrency). With `--duration`, read and update
//! phases run that long, cycling over the same keys; insert and delete
//! phases always make one pass (a key is inserted or deleted once).
//!
//! The table (`-a` attributes, the first the primary key, INT UNSIGNED —
//! BIGINT UNSIGNED when the keys do not fit — and the others INT UNSIGNED
//! with `-s 1`, else BINARY(4·s)) is created when missing and kept unless
//! `--drop`, so phases can run in separate invocations (use the same `-t`,
//! `-o`, `-b`). Values and the `--verify` rule: see [`workload`].
//!
//! A temporary error retries the whole transaction, up to [`RETRIES_MAX`]
//! times (after pauses that double, see `driver`); each failed attempt is counted under its code. So does an
//! unknown result (4010, the TC's node failed during the commit): a read or
//! an update is the same when repeated, and an insert whose retry finds its
//! row (630), or a delete whose retry finds it gone (626), counts as done.
//! A transaction still failing after that, a permanent error, or (with
//! `--verify`) a wrong value or a missing row makes the run fail
//! ([`FlexReport::failure`]).
//!
//! Each phase also reports its longest gap in service — the longest time in
//! which no transaction succeeded — and its successes per second
//! (module `service`), which is what `bench/failover.sh` reads around a SIGKILL
//! of a data node.
//!
//! `--executors N` is seed 004's architecture: the threads become definer
//! threads, which compute each transaction's data node (the primary
//! replica of its first key) and queue it, on a bounded queue, to one of
//! `N` executor threads of that node; an executor takes everything waiting
//! in its queue, prepares it on its own session and sends it in one go.

mod driver;
mod histogram;
mod service;
mod stream;
pub mod workload;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use skarv_client::{
    codes, Cluster, ClusterStats, Error, ExecMode, Op, Session, Table, Value, IN_FLIGHT_MAX,
};

use driver::{run_phase, ThreadPlan, ThreadResult};
pub use histogram::Histogram;
pub use service::{
    GAPS_PER_THREAD_MAX, GAPS_REPORTED_MAX, GAP_RESOLUTION_START_US, SECONDS_COUNTED_MAX,
};
pub use stream::StreamReport;
use workload::{Shape, GENERATION_SPREAD_MAX, MARKER_KEY};

/// Attempts after the first for a transaction that fails with a temporary error.
pub const RETRIES_MAX: u32 = 10;
/// Threads (definer threads with `--executors`).
pub const THREADS_MAX: usize = 256;
/// Operations per transaction (`-b`).
pub const OPS_PER_TRANSACTION_MAX: usize = 1_000;
/// Most rows a pass may touch (`-t` × `-o` × `-b`): 2^40 rows of the
/// smallest kind (`-a 2`) are 12 TiB of DataMemory, more than a data node
/// may have (16T) once replicated; a larger count is a typo that would
/// run for days (or overflow), not a benchmark.
pub const ROWS_MAX: u64 = 1 << 40;
/// Attributes of the table, the key included (`-a`).
pub const ATTRIBUTES_MAX: usize = 512;
/// 32-bit words per attribute (`-s`): 8 KiB.
pub const ATTRIBUTE_WORDS_MAX: usize = 2_048;
/// Executor threads per data node (`--executors`).
pub const EXECUTORS_PER_NODE_MAX: usize = 16;
/// Transactions waiting in one executor's queue; a definer blocks beyond.
pub const EXECUTOR_QUEUE_MAX: usize = 4_096;
/// Problems described in a report.
const PROBLEMS_MAX: usize = 20;

/// Why a run could not start or finish (what it measured is in [`FlexReport`]).
#[derive(Debug, thiserror::Error)]
pub enum FlexError {
    #[error("{0}")]
    Options(String),
    #[error("cluster at {connect}: {source}")]
    Connect { connect: String, source: Error },
    #[error("table `{table}`: {message}")]
    Table { table: String, message: String },
    #[error("starting a bench thread: {0}")]
    Thread(std::io::Error),
}

/// A phase of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Insert,
    Read,
    Update,
    Delete,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Read => "read",
            Phase::Update => "update",
            Phase::Delete => "delete",
        }
    }

    /// Whether `--duration` makes the phase cycle over its keys.
    fn repeatable(self) -> bool {
        matches!(self, Phase::Read | Phase::Update)
    }
}

impl std::str::FromStr for Phase {
    type Err = String;

    fn from_str(text: &str) -> Result<Phase, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "insert" => Ok(Phase::Insert),
            "read" => Ok(Phase::Read),
            "update" => Ok(Phase::Update),
            "delete" => Ok(Phase::Delete),
            other => Err(format!(
                "\"{other}\" is not a phase (insert, read, update, delete)"
            )),
        }
    }
}

/// What to run (the command line's flags).
#[derive(Clone, Debug)]
pub struct FlexOptions {
    /// The management server, `host:port`.
    pub connect: String,
    /// `-t`: threads (definer threads with executors).
    pub threads: usize,
    /// `-p`: transactions in flight per thread.
    pub parallel: usize,
    /// `-o`: transactions per thread in a pass.
    pub transactions: u64,
    /// Read and update phases run this long instead of one pass.
    pub duration: Option<Duration>,
    /// `-a`: attributes, the key included.
    pub attributes: usize,
    /// `-s`: 32-bit words per non-key attribute.
    pub attribute_words: usize,
    /// `-b`: operations per transaction.
    pub ops_per_transaction: usize,
    pub phases: Vec<Phase>,
    pub verify: bool,
    /// Drop the table (and its marker) at the end.
    pub drop: bool,
    /// Executor threads per data node; 0: every thread sends its own.
    pub executors: usize,
    pub table: String,
    /// One change-stream subscriber on the table during each phase; its
    /// rate and the commit-to-delivery lag go in the phase's report.
    pub subscribe: bool,
}

impl FlexOptions {
    /// flexAsynch's defaults, on table `flex`.
    pub fn new(connect: impl Into<String>) -> FlexOptions {
        FlexOptions {
            connect: connect.into(),
            threads: 1,
            parallel: 32,
            transactions: 500,
            duration: None,
            attributes: 25,
            attribute_words: 1,
            ops_per_transaction: 1,
            phases: vec![Phase::Insert, Phase::Read, Phase::Update, Phase::Delete],
            verify: false,
            drop: false,
            executors: 0,
            table: "flex".to_owned(),
            subscribe: false,
        }
    }

    /// Rows a pass touches.
    pub fn rows(&self) -> u64 {
        self.threads as u64 * self.transactions * self.ops_per_transaction as u64
    }

    fn check(&self) -> Result<(), FlexError> {
        let bad = |what: String| Err(FlexError::Options(what));
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(format!("-t {}: 1 to {THREADS_MAX} threads", self.threads));
        }
        if !(1..=IN_FLIGHT_MAX).contains(&self.parallel) {
            return bad(format!(
                "-p {}: 1 to {IN_FLIGHT_MAX} transactions in flight per thread (a session's limit)",
                self.parallel
            ));
        }
        if self.transactions == 0 {
            return bad("-o 0: at least one transaction per thread".to_owned());
        }
        let rows = (self.threads as u64)
            .checked_mul(self.transactions)
            .and_then(|r| r.checked_mul(self.ops_per_transaction as u64));
        if rows.is_none_or(|rows| rows > ROWS_MAX) {
            return bad(format!(
                "-t {} × -o {} × -b {}: a pass touches more than {ROWS_MAX} rows; allowed: at \
                 most {ROWS_MAX} (give --duration to run longer over fewer rows)",
                self.threads, self.transactions, self.ops_per_transaction
            ));
        }
        if !(1..=OPS_PER_TRANSACTION_MAX).contains(&self.ops_per_transaction) {
            return bad(format!(
                "-b {}: 1 to {OPS_PER_TRANSACTION_MAX} operations per transaction",
                self.ops_per_transaction
            ));
        }
        if !(2..=ATTRIBUTES_MAX).contains(&self.attributes) {
            return bad(format!(
                "-a {}: 2 to {ATTRIBUTES_MAX} attributes (the key and at least one more)",
                self.attributes
            ));
        }
        if !(1..=ATTRIBUTE_WORDS_MAX).contains(&self.attribute_words) {
            return bad(format!(
                "-s {}: 1 to {ATTRIBUTE_WORDS_MAX} 32-bit words per attribute",
                self.attribute_words
            ));
        }
        if self.executors > EXECUTORS_PER_NODE_MAX {
            return bad(format!(
                "--executors {}: at most {EXECUTORS_PER_NODE_MAX} per data node",
                self.executors
            ));
        }
        if self.phases.is_empty() {
            return bad("--ops: at least one phase".to_owned());
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return bad("--duration 0: give a positive number of seconds".to_owned());
        }
        if self.table.is_empty() {
            return bad("--table: a name".to_owned());
        }
        let keys = (self.threads as u128)
            * u128::from(self.transactions)
            * self.ops_per_transaction as u128;
        if keys > u128::from(u64::MAX) {
            return bad(format!("-t × -o × -b = {keys} keys: more than 2^64"));
        }
        Ok(())
    }
}

/// The parameters of a run, repeated in every phase's report.
#[derive(Clone, Debug, Serialize)]
pub struct FlexParams {
    pub threads: usize,
    pub parallel: usize,
    pub transactions_per_thread: u64,
    pub duration_s: Option<f64>,
    pub attributes: usize,
    pub attribute_words: usize,
    pub ops_per_transaction: usize,
    /// Executor threads per data node (0: none).
    pub executors: usize,
    pub verify: bool,
    pub table: String,
    /// Rows a pass touches.
    pub rows: u64,
    pub data_nodes: usize,
    pub replicas: u32,
}

/// Latency of committed transactions, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// The figures of `histogram` (nanoseconds) in microseconds.
    fn of(histogram: &Histogram) -> Latency {
        let us = |ns: u64| ns as f64 / 1_000.0;
        Latency {
            p50: us(histogram.quantile(0.50)),
            p95: us(histogram.quantile(0.95)),
            p99: us(histogram.quantile(0.99)),
            max: us(histogram.max()),
            mean: histogram.mean() / 1_000.0,
        }
    }
}

/// What one phase did (one `--json` object).
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    pub params: FlexParams,
    /// Transactions committed.
    pub transactions: u64,
    /// Operations that succeeded in committed transactions.
    pub ops: u64,
    pub elapsed_s: f64,
    pub ops_per_s: f64,
    pub transactions_per_s: f64,
    pub latency_us: Latency,
    /// Attempts repeated after a temporary error.
    pub retries: u64,
    /// Transactions that failed for good (permanent error, or retries spent).
    pub failed: u64,
    /// Failed attempts and failed operations, by error code.
    pub errors: BTreeMap<u32, u64>,
    /// Rows checked by `--verify`.
    pub rows_verified: u64,
    /// Wrong values, missing rows and reads that failed for good (`--verify`).
    pub mismatches: u64,
    /// `TcKeyReq` signals the client sent (one per transaction here).
    pub requests_sent: u64,
    /// `write` calls on the client's sockets.
    pub write_calls: u64,
    /// Signals the client received.
    pub signals_received: u64,
    /// CPU time (user and system) of this whole process during the phase
    /// (every thread, the client's own threads included), per operation
    /// that succeeded; None where `/proc/self/stat` cannot be read. Its
    /// resolution is the kernel's clock tick (10 ms).
    pub client_cpu_us_per_op: Option<f64>,
    /// Every thread went over all its rows at least once (a `--duration`
    /// phase may not have).
    pub full_pass: bool,
    /// The longest time in which no transaction succeeded (committed with
    /// every operation done), in milliseconds: from the phase's start or a
    /// success to the next success or the phase's end (see
    /// `flex::service`).
    pub gap_max_ms: f64,
    /// When that gap began, in seconds from the phase's start.
    pub gap_at_s: f64,
    /// Gaps shorter than this (milliseconds) may have been missed.
    pub gap_resolution_ms: f64,
    /// The longest gaps, longest first (at most [`GAPS_REPORTED_MAX`]).
    pub gaps: Vec<GapReport>,
    /// When the phase started, in seconds since the Unix epoch, so a
    /// script can place what it did (a kill) on the phase's time line.
    pub started_unix_s: f64,
    /// Transactions that succeeded in each second of the phase.
    pub per_second: Vec<u64>,
    /// `--subscribe`: what the subscriber took, and the lag.
    pub stream: Option<StreamReport>,
}

/// One gap in service of a phase.
#[derive(Clone, Debug, Serialize)]
pub struct GapReport {
    /// When it began, in seconds from the phase's start.
    pub at_s: f64,
    pub ms: f64,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct FlexReport {
    pub phases: Vec<PhaseReport>,
    /// The first failures and mismatches, described.
    pub problems: Vec<String>,
    /// Problems not described.
    pub problems_more: u64,
}

impl FlexReport {
    /// Why the run failed, if it did: any transaction failed for good or
    /// any mismatch.
    pub fn failure(&self) -> Option<String> {
        let failed: u64 = self.phases.iter().map(|p| p.failed).sum();
        let mismatches: u64 = self.phases.iter().map(|p| p.mismatches).sum();
        if failed == 0 && mismatches == 0 {
            return None;
        }
        let mut text = format!(
            "{failed} transactions failed and {mismatches} rows did not verify (phases: {})",
            self.phases
                .iter()
                .filter(|p| p.failed + p.mismatches > 0)
                .map(|p| p.phase.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(first) = self.problems.first() {
            let _ = write!(text, "; first: {first}");
        }
        Some(text)
    }
}

/// The table and its shape, shared by the threads.
struct Workload {
    table: Arc<Table>,
    shape: Shape,
}

/// Generations rows may hold (see [`workload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Generations {
    low: u64,
    high: u64,
}

/// Merges the threads' results into a phase report.
fn report_phase(
    phase: Phase,
    params: &FlexParams,
    results: Vec<ThreadResult>,
    stats: (ClusterStats, ClusterStats),
    cpu: Option<Duration>,
    problems: &mut Vec<String>,
    problems_more: &mut u64,
) -> PhaseReport {
    let mut histogram = Histogram::new();
    let mut report = PhaseReport {
        phase,
        params: params.clone(),
        transactions: 0,
        ops: 0,
        elapsed_s: 0.0,
        ops_per_s: 0.0,
        transactions_per_s: 0.0,
        latency_us: Latency::default(),
        retries: 0,
        failed: 0,
        errors: BTreeMap::new(),
        rows_verified: 0,
        mismatches: 0,
        requests_sent: stats.1.tc_key_reqs_sent - stats.0.tc_key_reqs_sent,
        write_calls: stats.1.write_calls - stats.0.write_calls,
        signals_received: stats.1.signals_received - stats.0.signals_received,
        client_cpu_us_per_op: None,
        full_pass: results.iter().all(|r| r.full_pass),
        gap_max_ms: 0.0,
        gap_at_s: 0.0,
        gap_resolution_ms: 0.0,
        gaps: Vec::new(),
        started_unix_s: 0.0,
        per_second: Vec::new(),
        stream: None,
    };
    let started = results.iter().map(|r| r.started).min();
    let ended = results.iter().map(|r| r.ended).max();
    if let (Some(started), Some(ended)) = (started, ended) {
        let logs: Vec<_> = results.iter().map(|r| &r.service).collect();
        let service = service::merge(&logs, started, ended);
        report.gap_max_ms = service.gap_max.as_secs_f64() * 1e3;
        report.gap_at_s = service.gap_at.as_secs_f64();
        report.gap_resolution_ms = service.resolution.as_secs_f64() * 1e3;
        report.per_second = service.per_second;
        report.gaps = service
            .gaps
            .iter()
            .map(|&(at, length)| GapReport {
                at_s: at.as_secs_f64(),
                ms: length.as_secs_f64() * 1e3,
            })
            .collect();
        // The wall clock now, less the time since the phase started.
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        report.started_unix_s = unix.saturating_sub(started.elapsed()).as_secs_f64();
    }
    for result in results {
        histogram.merge(&result.histogram);
        report.transactions += result.transactions;
        report.ops += result.ops;
        report.retries += result.retries;
        report.failed += result.failed;
        for (code, count) in result.errors {
            *report.errors.entry(code).or_default() += count;
        }
        report.rows_verified += result.rows_verified;
        report.mismatches += result.mismatches;
        for problem in result.problems {
            if problems.len() < PROBLEMS_MAX {
                problems.push(problem);
            } else {
                *problems_more += 1;
            }
        }
        *problems_more += result.problems_more;
    }
    assert!(
        report.ops <= report.transactions * params.ops_per_transaction as u64,
        "{} ops in {} transactions of {}",
        report.ops,
        report.transactions,
        params.ops_per_transaction
    );
    if let (Some(started), Some(ended)) = (started, ended) {
        let elapsed = ended.duration_since(started).as_secs_f64().max(1e-9);
        report.elapsed_s = elapsed;
        report.ops_per_s = report.ops as f64 / elapsed;
        report.transactions_per_s = report.transactions as f64 / elapsed;
    }
    if report.ops > 0 {
        report.client_cpu_us_per_op = cpu.map(|cpu| cpu.as_secs_f64() * 1e6 / report.ops as f64);
    }
    report.latency_us = Latency::of(&histogram);
    report
}

/// Opens the bench table, creating it (and resetting its marker) when
/// missing; returns it with the generations its rows may hold.
fn open_table(
    session: &Session,
    options: &FlexOptions,
) -> Result<(Arc<Table>, Shape, Generations), FlexError> {
    let name = &options.table;
    let table_error = |message: String| FlexError::Table {
        table: name.clone(),
        message,
    };
    let keys = options.rows();
    let shape = Shape {
        attributes: options.attributes,
        words: options.attribute_words,
        big_key: keys > u64::from(u32::MAX) + 1,
    };
    let (table, created) = match session.table(name) {
        Ok(table) => {
            shape.check(&table, keys).map_err(table_error)?;
            (table, false)
        }
        Err(error) if error.code == codes::NO_SUCH_TABLE => {
            match session.create_table(&shape.table_def(name)) {
                Ok(_) => {}
                // Another run created it meanwhile: use it if it fits.
                Err(error) if error.code == codes::ALREADY_EXISTS => {}
                Err(error) => return Err(table_error(error.to_string())),
            }
            let table = session
                .table(name)
                .map_err(|e| table_error(e.to_string()))?;
            shape.check(&table, keys).map_err(table_error)?;
            (table, true)
        }
        Err(error) => return Err(table_error(error.to_string())),
    };
    let shape = Shape {
        big_key: !matches!(
            table.columns()[0].ty,
            skarv_client::schema_types::ColumnType::Int { .. }
        ),
        ..shape
    };
    let generations = open_marker(session, name, created)?;
    Ok((table, shape, generations))
}

/// The marker table's definition: one row, key 0, `low` and `high`.
fn marker_def(name: &str) -> skarv_client::schema_types::TableDef {
    use skarv_client::schema_types::{Column, ColumnType, TableDef};
    TableDef::new(
        name,
        0,
        vec![
            Column::new("id", ColumnType::Int { unsigned: true }),
            Column::new("low", ColumnType::BigInt { unsigned: true }),
            Column::new("high", ColumnType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0])
    .partitions(0)
}

/// Reads the marker of `table`, creating it at generation 0 when missing
/// or when the table was just created.
fn open_marker(session: &Session, table: &str, reset: bool) -> Result<Generations, FlexError> {
    let name = workload::marker_table_name(table);
    let marker_error = |message: String| FlexError::Table {
        table: name.clone(),
        message,
    };
    let marker = match session.table(&name) {
        Ok(marker) => marker,
        Err(error) if error.code == codes::NO_SUCH_TABLE => {
            match session.create_table(&marker_def(&name)) {
                Ok(_) => {}
                Err(error) if error.code == codes::ALREADY_EXISTS => {}
                Err(error) => return Err(marker_error(error.to_string())),
            }
            session
                .table(&name)
                .map_err(|e| marker_error(e.to_string()))?
        }
        Err(error) => return Err(marker_error(error.to_string())),
    };
    let fresh = Generations { low: 0, high: 0 };
    if reset {
        write_marker(session, &marker, fresh).map_err(|e| marker_error(e.to_string()))?;
        return Ok(fresh);
    }
    let row = with_retries(|| {
        let tx = session.begin()?;
        let read = tx.define(Op::read(&marker, &[Value::UInt(MARKER_KEY)]).ignore_error())?;
        let mut outcome = tx.execute(ExecMode::Commit)?;
        Ok(outcome.take_row(read))
    })
    .map_err(|e| marker_error(e.to_string()))?;
    let Some(row) = row else {
        write_marker(session, &marker, fresh).map_err(|e| marker_error(e.to_string()))?;
        return Ok(fresh);
    };
    let get = |column: &str| row.get(column).and_then(workload::as_u64);
    match (get("low"), get("high")) {
        (Some(low), Some(high)) if low <= high => Ok(Generations { low, high }),
        other => Err(marker_error(format!("a bad marker row {other:?}"))),
    }
}

fn write_marker(
    session: &Session,
    marker: &Arc<Table>,
    generations: Generations,
) -> Result<(), Error> {
    with_retries(|| {
        let tx = session.begin()?;
        tx.write(
            marker,
            &[
                ("id", Value::UInt(MARKER_KEY)),
                ("low", Value::UInt(generations.low)),
                ("high", Value::UInt(generations.high)),
            ],
        )?;
        tx.execute(ExecMode::Commit).map(|_| ())
    })
}

/// Runs a synchronous transaction again after temporary errors, and after
/// unknown results (4010): its callers read or overwrite the marker, the
/// same when repeated.
fn with_retries<T>(mut attempt: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut tries = 0;
    loop {
        match attempt() {
            Err(error)
                if (error.is_temporary() || error.is_unknown_result()) && tries < RETRIES_MAX =>
            {
                tries += 1
            }
            other => return other,
        }
    }
}

/// Runs the benchmark; `on_phase` sees each phase's report as it ends.
/// An error means the run could not go on; failures and mismatches of
/// transactions are in the report ([`FlexReport::failure`]).
pub fn run(
    options: &FlexOptions,
    on_phase: &mut dyn FnMut(&PhaseReport),
) -> Result<FlexReport, FlexError> {
    options.check()?;
    let connect_error = |source: Error| FlexError::Connect {
        connect: options.connect.clone(),
        source,
    };
    let cluster = Cluster::connect(&options.connect).map_err(connect_error)?;
    let session = cluster.session().map_err(connect_error)?;
    let (table, shape, mut generations) = open_table(&session, options)?;
    let marker = session
        .table(&workload::marker_table_name(&options.table))
        .map_err(connect_error)?;
    let workload = Workload { table, shape };
    let params = FlexParams {
        threads: options.threads,
        parallel: options.parallel,
        transactions_per_thread: options.transactions,
        duration_s: options.duration.map(|d| d.as_secs_f64()),
        attributes: options.attributes,
        attribute_words: options.attribute_words,
        ops_per_transaction: options.ops_per_transaction,
        executors: options.executors,
        verify: options.verify,
        table: options.table.clone(),
        rows: options.rows(),
        data_nodes: cluster.config().data_nodes.len(),
        replicas: cluster.placement().replicas_per_group(),
    };
    let mut report = FlexReport {
        phases: Vec::new(),
        problems: Vec::new(),
        problems_more: 0,
    };
    for &phase in &options.phases {
        let marker_error = |error: Error| FlexError::Table {
            table: marker.name().to_owned(),
            message: error.to_string(),
        };
        let mut generation = generations.high;
        if phase == Phase::Update {
            if generations.high - generations.low + 1 >= GENERATION_SPREAD_MAX {
                return Err(FlexError::Table {
                    table: options.table.clone(),
                    message: format!(
                        "update phases cut short left rows in generations {}..={}: \
                         drop the table (--drop) and insert again",
                        generations.low, generations.high
                    ),
                });
            }
            generation = generations.high + 1;
            generations.high = generation;
            write_marker(&session, &marker, generations).map_err(marker_error)?;
        }
        let plan = ThreadPlan {
            phase,
            first_key: 0,
            parallel: options.parallel,
            transactions: options.transactions,
            ops: options.ops_per_transaction as u32,
            duration: options.duration,
            verify: options.verify,
            generation,
            generations,
            sample_epochs: options.subscribe,
        };
        let watch = if options.subscribe {
            Some(stream::watch(&cluster, &options.table).map_err(connect_error)?)
        } else {
            None
        };
        let before = cluster.stats();
        let cpu_before = process_cpu_time();
        let mut results = run_phase(&cluster, &workload, options, plan)?;
        let samples: Vec<(u64, std::time::Instant)> = results
            .iter_mut()
            .flat_map(|r| std::mem::take(&mut r.commit_epochs))
            .collect();
        let cpu = process_cpu_time()
            .zip(cpu_before)
            .map(|(after, before)| after.saturating_sub(before));
        let after = cluster.stats();
        let mut phase_report = report_phase(
            phase,
            &params,
            results,
            (before, after),
            cpu,
            &mut report.problems,
            &mut report.problems_more,
        );
        if let Some(watch) = watch {
            phase_report.stream = Some(watch.finish(&samples).map_err(connect_error)?);
        }
        // Only an update of every row, all committed, leaves one generation.
        if phase == Phase::Update && phase_report.failed == 0 && phase_report.full_pass {
            generations.low = generations.high;
            write_marker(&session, &marker, generations).map_err(marker_error)?;
        }
        on_phase(&phase_report);
        report.phases.push(phase_report);
    }
    if options.drop {
        for name in [options.table.clone(), marker.name().to_owned()] {
            session.drop_table(&name).map_err(|e| FlexError::Table {
                table: name.clone(),
                message: format!("dropping it: {e}"),
            })?;
        }
    }
    Ok(report)
}

/// Clock ticks per second of `/proc`'s CPU times (Linux's `USER_HZ`, 100
/// on every architecture it supports for user space).
const CLOCK_TICKS_PER_S: u64 = 100;

/// CPU time (user and system) this process used so far, every thread
/// included, those that ended too; None where `/proc/self/stat` is missing.
fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name, in parentheses, the fields from the 3rd on;
    // utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    let ticks = user + system;
    Some(Duration::from_millis(ticks * 1_000 / CLOCK_TICKS_PER_S))
}

/// The parameters, as the text output's first line.
pub fn render_params(params: &FlexParams) -> String {
    let attribute = if params.attribute_words == 1 {
        "INT UNSIGNED".to_owned()
    } else {
        format!("BINARY({})", 4 * params.attribute_words)
    };
    let mut text = format!(
        "flex: table `{}`: {} attributes ({attribute}, {} bytes a row); {} data nodes, {} replicas; \
         -t {} -p {} -o {} -b {}",
        params.table,
        params.attributes,
        4 * (1 + (params.attributes - 1) * params.attribute_words),
        params.data_nodes,
        params.replicas,
        params.threads,
        params.parallel,
        params.transactions_per_thread,
        params.ops_per_transaction,
    );
    if let Some(seconds) = params.duration_s {
        let _ = write!(text, " --duration {seconds}");
    }
    if params.executors > 0 {
        let _ = write!(text, " --executors {}", params.executors);
    }
    if params.verify {
        text.push_str(" --verify");
    }
    let _ = writeln!(text, " ({} rows)", params.rows);
    text
}

/// One phase as text.
pub fn render_phase(report: &PhaseReport) -> String {
    let l = &report.latency_us;
    let cpu = match report.client_cpu_us_per_op {
        Some(us) => format!(", client CPU {us:.1} µs/op"),
        None => String::new(),
    };
    let mut text = format!(
        "{:<6} {:>10.0} ops/s {:>10.0} transactions/s  latency µs p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}  \
         ({} ops in {:.3} s, {} retries, {} failed{cpu})\n",
        report.phase.name(),
        report.ops_per_s,
        report.transactions_per_s,
        l.p50,
        l.p95,
        l.p99,
        l.max,
        report.ops,
        report.elapsed_s,
        report.retries,
        report.failed,
    );
    if let Some(s) = &report.stream {
        let l = &s.lag_us;
        let _ = writeln!(
            text,
            "       subscriber: {} changes ({:.0}/s) in {} epochs; lag µs (commit to delivery) \
             p50 {:.1} p95 {:.1} p99 {:.1} max {:.1} of {} sampled commits ({} before its \
             first epoch, {} undelivered){}",
            s.changes,
            s.changes_per_s,
            s.epochs,
            l.p50,
            l.p95,
            l.p99,
            l.max,
            s.sampled,
            s.before_start,
            s.undelivered,
            if s.ended {
                format!("; ENDED after {} gap(s)", s.gaps)
            } else {
                String::new()
            }
        );
    }
    if !report.errors.is_empty() {
        text.push_str("       errors:");
        for (code, count) in &report.errors {
            let _ = write!(text, " {code} ({}) ×{count};", codes::message(*code));
        }
        text.push('\n');
    }
    if report.params.duration_s.is_some() {
        let _ = writeln!(
            text,
            "       longest gap in service: {:.0} ms at {:.1} s",
            report.gap_max_ms, report.gap_at_s
        );
    }
    if report.params.verify && report.phase == Phase::Read {
        let _ = writeln!(
            text,
            "       verified {} rows, {} mismatches",
            report.rows_verified, report.mismatches
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_with_their_flag_named() {
        let good = FlexOptions::new("127.0.0.1:1");
        assert!(good.check().is_ok());
        assert_eq!(good.rows(), 500);
        type Change = fn(&mut FlexOptions);
        let cases: [(&str, Change); 8] = [
            ("-t 0", |o| o.threads = 0),
            ("-p 1025", |o| o.parallel = IN_FLIGHT_MAX + 1),
            ("-o 0", |o| o.transactions = 0),
            // It overflowed nothing but ran for ever, printing nothing.
            ("-t 1 × -o 18446744073709551615", |o| {
                o.transactions = u64::MAX
            }),
            ("-t 4 × -o 4611686018427387904 × -b 4", |o| {
                o.threads = 4;
                o.transactions = 1 << 62;
                o.ops_per_transaction = 4;
            }),
            ("-a 1", |o| o.attributes = 1),
            ("-b 0", |o| o.ops_per_transaction = 0),
            ("--ops", |o| o.phases.clear()),
        ];
        for (flag, change) in cases {
            let mut options = good.clone();
            change(&mut options);
            let error = options.check().expect_err(flag).to_string();
            assert!(error.starts_with(flag), "{flag}: {error}");
        }
        assert_eq!("Update".parse::<Phase>(), Ok(Phase::Update));
        assert!("scan".parse::<Phase>().is_err());
    }
}
