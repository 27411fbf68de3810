//! How `skarv bench flex` runs a phase: each thread keeps `-p`
//! transactions in flight through an [`Engine`] — its own session
//! ([`Direct`]), or queues to executor threads ([`Queued`], seed 004) —
//! retries temporary failures, checks what it reads, and measures.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use skarv_client::routing::primary_of;
use skarv_client::{
    codes, Cluster, Error, ExecMode, Op, OpResult, Outcome, Session, Transaction, Value,
    IN_FLIGHT_MAX,
};

use super::histogram::Histogram;
use super::service::ServiceLog;
use super::stream;
use super::workload;
use super::{
    FlexError, FlexOptions, Generations, Phase, Workload, EXECUTOR_QUEUE_MAX, RETRIES_MAX,
};

/// How long one wait for completions lasts before the thread looks again.
const POLL_WAIT_MS: u64 = 100;
/// A thread that has transactions in flight and hears nothing for this
/// long gives them up (the client fails a request after its own
/// `request_timeout`, 30 s by default, so this is a last resort).
const STALL_LIMIT_MS: u64 = 60_000;
/// Problems (failures, mismatches) described per thread; the rest are counted.
const PROBLEMS_PER_THREAD_MAX: usize = 10;
/// The pause before a retry doubles from 1 ms with each attempt after the
/// first (which goes at once), up to this: a node failure answers the
/// requests routed to or through the failed node at once, and retries
/// without a pause would spend every attempt before the client and the
/// survivors have noticed it. Ten attempts span about half a second.
const RETRY_PAUSE_MAX_MS: u64 = 256;

/// The pause before attempt `attempts + 1` (after `attempts` failed).
fn retry_pause(attempts: u32) -> Duration {
    assert!(attempts >= 1, "a retry follows a failed attempt");
    match attempts {
        1 => Duration::ZERO,
        n => Duration::from_millis((1u64 << (n - 2).min(16)).min(RETRY_PAUSE_MAX_MS)),
    }
}

/// One transaction to run: `ops` consecutive keys from `first_key`.
#[derive(Clone, Copy, Debug)]
struct TxSpec {
    slot: u32,
    phase: Phase,
    first_key: u64,
    ops: u32,
    /// The generation inserts and updates write.
    generation: u64,
    /// Reads ignore their own errors, so that each missing row is seen.
    verify: bool,
}

/// A transaction's end, sent by its callback.
struct Completion {
    slot: u32,
    result: Result<Outcome, Error>,
    done_at: Instant,
}

/// Transactions' ends: (slot, result) as a session hands them over
/// (`Session::take_completed`, which swaps its list into an empty one:
/// no outcome is copied), and beside them when each came.
#[derive(Default)]
struct Completions {
    ends: Vec<(u64, Result<Outcome, Error>)>,
    at: Vec<Instant>,
}

impl Completions {
    fn push(&mut self, completion: Completion) {
        self.ends
            .push((u64::from(completion.slot), completion.result));
        self.at.push(completion.done_at);
    }

    fn append(&mut self, other: &mut Completions) {
        self.ends.append(&mut other.ends);
        self.at.append(&mut other.at);
    }

    fn len(&self) -> usize {
        debug_assert_eq!(self.ends.len(), self.at.len());
        self.ends.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn clear(&mut self) {
        self.ends.clear();
        self.at.clear();
    }
}

/// Defines `spec`'s operations on a new transaction started on the node
/// of its first key. `row` is the caller's list for the written columns,
/// kept between transactions for its room.
fn build_tx<'s>(
    session: &'s Session,
    workload: &Workload,
    spec: &TxSpec,
    row: &mut Vec<(usize, Value)>,
) -> Result<Transaction<'s>, Error> {
    let table = &workload.table;
    let shape = &workload.shape;
    let tx = session.begin_with_hint(table, &[Value::UInt(spec.first_key)])?;
    for key in spec.first_key..spec.first_key + u64::from(spec.ops) {
        let key_value = [Value::UInt(key)];
        match spec.phase {
            Phase::Read => {
                let op = Op::read(table, &key_value);
                tx.define(if spec.verify { op.ignore_error() } else { op })?;
            }
            Phase::Delete => {
                tx.delete(table, &key_value)?;
            }
            Phase::Insert | Phase::Update => {
                // Attribute a is column a (the table is made so, and its
                // definition is checked when the run opens it): columns by
                // position, as flexAsynch gives NDB attribute ids. The list
                // keeps its columns from one transaction of the phase to the
                // next: only the values are written again.
                let first = usize::from(spec.phase == Phase::Update);
                if row.len() != shape.attributes - first || row.first().map(|w| w.0) != Some(first)
                {
                    row.clear();
                    row.extend((first..shape.attributes).map(|a| (a, Value::Null)));
                }
                for (a, value) in row.iter_mut() {
                    *value = match *a {
                        0 => Value::UInt(key),
                        a => workload::value(shape, key, a, spec.generation),
                    };
                }
                if spec.phase == Phase::Insert {
                    tx.define(Op::insert_at(table, row))?;
                } else {
                    tx.define(Op::update_at(table, &key_value, row))?;
                }
            }
        }
    }
    Ok(tx)
}

/// How a thread's transactions reach the cluster.
trait Engine {
    /// Starts `spec`; its completion comes from a later `wait`.
    fn submit(&mut self, spec: TxSpec) -> Result<(), Error>;
    /// Sends what `submit` prepared.
    fn flush(&mut self) -> Result<(), Error>;
    /// Waits for completions, at most `timeout`, appending them to `out`.
    fn wait(&mut self, out: &mut Completions, timeout: Duration);
}

/// Every thread prepares, sends and polls on its own session. A
/// transaction is tagged with its slot (no callback, no channel): the
/// client keeps its outcome until `wait` takes it.
struct Direct<'w> {
    session: Session,
    workload: &'w Workload,
    /// The written columns of the transaction being defined.
    row: Vec<(usize, Value)>,
}

impl Engine for Direct<'_> {
    fn submit(&mut self, spec: TxSpec) -> Result<(), Error> {
        let tx = build_tx(&self.session, self.workload, &spec, &mut self.row)?;
        self.session
            .prepare_tagged(tx, ExecMode::Commit, u64::from(spec.slot))
    }

    fn flush(&mut self) -> Result<(), Error> {
        self.session.send().map(|_| ())
    }

    fn wait(&mut self, out: &mut Completions, timeout: Duration) {
        self.session.poll(1, timeout);
        self.session.take_completed(&mut out.ends);
        out.at.resize(out.ends.len(), Instant::now());
    }
}

/// A definer's request to an executor.
struct Request {
    spec: TxSpec,
    reply: Sender<Completion>,
}

/// Definer threads queue to executor threads (seed 004).
struct Queued<'w> {
    workload: &'w Workload,
    cluster: &'w Cluster,
    /// Executor `n · per_node + i` is executor `i` of data node `n` (in
    /// configuration order).
    queues: Vec<SyncSender<Request>>,
    per_node: usize,
    /// Data node index of each node id.
    node_index: [u8; 256],
    scratch: Vec<u8>,
    sender: Sender<Completion>,
    receiver: Receiver<Completion>,
}

impl Engine for Queued<'_> {
    fn submit(&mut self, spec: TxSpec) -> Result<(), Error> {
        let partition = self
            .workload
            .table
            .partition_of_key(&[Value::UInt(spec.first_key)], &mut self.scratch)?;
        let node = primary_of(self.cluster.placement(), partition);
        let index = usize::from(self.node_index[usize::from(node.get())]);
        let queue = &self.queues[index * self.per_node + spec.slot as usize % self.per_node];
        let request = Request {
            spec,
            reply: self.sender.clone(),
        };
        queue.send(request).map_err(|_| {
            Error::new(
                codes::CLUSTER_FAILURE,
                format!("the executor thread of data node {node} has stopped"),
            )
        })
    }

    fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn wait(&mut self, out: &mut Completions, timeout: Duration) {
        match self.receiver.recv_timeout(timeout) {
            Ok(completion) => out.push(completion),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
        for completion in self.receiver.try_iter() {
            out.push(completion);
        }
    }
}

/// An executor thread: takes every request waiting in its queue, prepares
/// them on its session, sends them in one go, polls; until the definers
/// are gone and nothing is in flight.
fn executor(cluster: &Cluster, workload: &Workload, queue: Receiver<Request>) -> Result<(), Error> {
    let session = cluster.session()?;
    let mut row = Vec::with_capacity(workload.shape.attributes);
    let mut start = |request: Request| {
        let reply = request.reply.clone();
        let slot = request.spec.slot;
        let fail = |result: Error| {
            let _ = request.reply.send(Completion {
                slot,
                result: Err(result),
                done_at: Instant::now(),
            });
        };
        match build_tx(&session, workload, &request.spec, &mut row) {
            Ok(tx) => {
                let prepared = session.prepare(tx, ExecMode::Commit, move |result| {
                    let _ = reply.send(Completion {
                        slot,
                        result,
                        done_at: Instant::now(),
                    });
                });
                if let Err(error) = prepared {
                    fail(error);
                }
            }
            Err(error) => fail(error),
        }
    };
    let mut open = true;
    loop {
        if session.in_flight() == 0 {
            if !open {
                return Ok(());
            }
            match queue.recv_timeout(Duration::from_millis(POLL_WAIT_MS)) {
                Ok(request) => start(request),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        while open && session.in_flight() < IN_FLIGHT_MAX {
            match queue.try_recv() {
                Ok(request) => start(request),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        session.send()?;
        if session.in_flight() > 0 {
            session.poll(1, Duration::from_millis(POLL_WAIT_MS));
        }
    }
}

/// What one thread is to do in a phase.
#[derive(Clone, Copy, Debug)]
pub(super) struct ThreadPlan {
    pub(super) phase: Phase,
    pub(super) first_key: u64,
    pub(super) parallel: usize,
    pub(super) transactions: u64,
    pub(super) ops: u32,
    pub(super) duration: Option<Duration>,
    pub(super) verify: bool,
    pub(super) generation: u64,
    pub(super) generations: Generations,
    /// `--subscribe`: note the epoch of one commit in
    /// `stream::LAG_SAMPLE_EVERY` (`ThreadResult::commit_epochs`).
    pub(super) sample_epochs: bool,
}

/// What one thread measured in a phase.
pub(super) struct ThreadResult {
    pub(super) histogram: Histogram,
    pub(super) transactions: u64,
    pub(super) ops: u64,
    pub(super) retries: u64,
    pub(super) failed: u64,
    pub(super) errors: BTreeMap<u32, u64>,
    pub(super) rows_verified: u64,
    pub(super) mismatches: u64,
    pub(super) problems: Vec<String>,
    pub(super) problems_more: u64,
    /// Every transaction of a pass was issued (a `--duration` phase may
    /// stop before the thread's last keys).
    pub(super) full_pass: bool,
    pub(super) started: Instant,
    pub(super) ended: Instant,
    /// When transactions succeeded (the gap in service).
    pub(super) service: ServiceLog,
    /// Sampled commits: their epoch and when their answer came
    /// (`ThreadPlan::sample_epochs`).
    pub(super) commit_epochs: Vec<(u64, Instant)>,
}

impl ThreadResult {
    fn problem(&mut self, text: impl FnOnce() -> String) {
        if self.problems.len() < PROBLEMS_PER_THREAD_MAX {
            self.problems.push(text());
        } else {
            self.problems_more += 1;
        }
    }
}

/// A transaction slot of a thread: which transaction, since when, tries.
#[derive(Clone, Copy)]
struct Slot {
    first_key: u64,
    attempts: u32,
    started: Instant,
    /// An earlier attempt ended with an unknown result (4010: its TC's
    /// node failed during the commit), so it may have committed.
    maybe_committed: bool,
}

/// Runs one thread's share of a phase on `engine`.
/// Waits at `gate` (held for writing until every thread is ready) so the
/// threads start together.
fn drive(
    engine: &mut dyn Engine,
    plan: &ThreadPlan,
    workload: &Workload,
    gate: &RwLock<()>,
) -> ThreadResult {
    assert!(plan.parallel >= 1 && plan.parallel <= IN_FLIGHT_MAX);
    let mut slots = vec![
        Slot {
            first_key: 0,
            attempts: 0,
            started: Instant::now(),
            maybe_committed: false,
        };
        plan.parallel
    ];
    let mut free: Vec<u32> = (0..plan.parallel as u32).rev().collect();
    // Slots to try again, each not before its instant.
    let mut retry: VecDeque<(u32, Instant)> = VecDeque::with_capacity(plan.parallel);
    let mut completions = Completions {
        ends: Vec::with_capacity(plan.parallel),
        at: Vec::with_capacity(plan.parallel),
    };
    let mut local = Completions::default();
    drop(gate.read().unwrap_or_else(|p| p.into_inner()));
    let started = Instant::now();
    let deadline = plan
        .duration
        .filter(|_| plan.phase.repeatable())
        .map(|d| started + d);
    let mut result = ThreadResult {
        histogram: Histogram::new(),
        transactions: 0,
        ops: 0,
        retries: 0,
        failed: 0,
        errors: BTreeMap::new(),
        rows_verified: 0,
        mismatches: 0,
        problems: Vec::new(),
        problems_more: 0,
        started,
        ended: started,
        full_pass: false,
        service: ServiceLog::new(
            started,
            plan.duration.map_or(1, |d| d.as_secs() as usize + 2),
        ),
        commit_epochs: Vec::new(),
    };
    let mut next_tx = 0u64;
    let mut in_flight = 0usize;
    let mut heard_at = started;
    loop {
        let now = Instant::now();
        loop {
            let due = retry.iter().position(|&(_, at)| at <= now);
            let slot = match due.and_then(|i| retry.remove(i)) {
                Some((slot, _)) => slot,
                None => {
                    let more = match deadline {
                        Some(deadline) => now < deadline,
                        None => next_tx < plan.transactions,
                    };
                    match free.pop() {
                        Some(slot) if more => slot,
                        Some(slot) => {
                            free.push(slot);
                            break;
                        }
                        None => break,
                    }
                }
            };
            let s = &mut slots[slot as usize];
            if s.attempts == 0 {
                s.first_key = plan.first_key + (next_tx % plan.transactions) * u64::from(plan.ops);
                s.started = now;
                next_tx += 1;
            }
            let spec = TxSpec {
                slot,
                phase: plan.phase,
                first_key: s.first_key,
                ops: plan.ops,
                generation: plan.generation,
                verify: plan.verify,
            };
            in_flight += 1;
            if let Err(error) = engine.submit(spec) {
                local.push(Completion {
                    slot,
                    result: Err(error),
                    done_at: now,
                });
            }
        }
        if let Err(error) = engine.flush() {
            result.failed += in_flight as u64;
            result.problem(|| format!("{}: sending failed: {error}", plan.phase.name()));
            break;
        }
        let next_retry = retry.iter().map(|&(_, at)| at).min();
        if in_flight == 0 {
            match next_retry {
                None => break,
                Some(at) => {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    continue;
                }
            }
        }
        completions.append(&mut local);
        if completions.is_empty() {
            let mut timeout = Duration::from_millis(POLL_WAIT_MS);
            if let Some(at) = next_retry {
                timeout = timeout.min(at.saturating_duration_since(Instant::now()));
            }
            engine.wait(&mut completions, timeout);
        }
        if completions.is_empty() {
            if heard_at.elapsed() > Duration::from_millis(STALL_LIMIT_MS) {
                result.failed += in_flight as u64;
                result.problem(|| {
                    format!(
                        "{}: {in_flight} transactions had no answer in {} s",
                        plan.phase.name(),
                        STALL_LIMIT_MS / 1000
                    )
                });
                break;
            }
            continue;
        }
        heard_at = Instant::now();
        assert!(
            completions.len() <= in_flight,
            "a completion for a slot not in flight"
        );
        // By reference, then cleared: an outcome is some hundred bytes,
        // each move of it a copy.
        for ((tag, end), &completion_at) in completions.ends.iter().zip(&completions.at) {
            in_flight -= 1;
            let slot = u32::try_from(*tag).expect("tags are slot numbers");
            let again = complete(
                &mut result,
                &mut slots[slot as usize],
                plan,
                workload,
                (end, completion_at),
            );
            if again {
                let attempts = slots[slot as usize].attempts;
                retry.push_back((slot, completion_at + retry_pause(attempts)));
            } else {
                slots[slot as usize].attempts = 0;
                slots[slot as usize].maybe_committed = false;
                free.push(slot);
            }
        }
        completions.clear();
        // Every slot is free, waiting for a retry, or in flight.
        assert_eq!(free.len() + retry.len() + in_flight, plan.parallel);
    }
    result.ended = Instant::now();
    result.full_pass = next_tx >= plan.transactions;
    result.service.finish();
    result
}

/// Files one completion; true when the transaction must be tried again.
fn complete(
    result: &mut ThreadResult,
    slot: &mut Slot,
    plan: &ThreadPlan,
    workload: &Workload,
    (end, done_at): (&Result<Outcome, Error>, Instant),
) -> bool {
    let phase = plan.phase.name();
    let first = slot.first_key;
    let outcome = match end {
        Ok(outcome) => outcome,
        Err(error) if slot.maybe_committed && settled_by_earlier_commit(plan.phase, error.code) => {
            // The attempt that ended with 4010 committed after all.
            *result.errors.entry(error.code).or_default() += 1;
            committed(result, slot, plan, done_at, u64::from(plan.ops));
            result.service.success(done_at);
            return false;
        }
        Err(error) => {
            *result.errors.entry(error.code).or_default() += 1;
            // A read or an update is the same when repeated (an update
            // writes the phase's generation), an insert or a delete is
            // settled by its retry's 630 or 626: so a transaction whose
            // outcome is unknown is tried again, like a temporary failure.
            let retryable = error.is_temporary() || error.is_unknown_result();
            if retryable && slot.attempts < RETRIES_MAX {
                slot.maybe_committed |= error.is_unknown_result();
                slot.attempts += 1;
                result.retries += 1;
                return true;
            }
            result.failed += 1;
            if plan.verify && plan.phase == Phase::Read {
                result.mismatches += u64::from(plan.ops);
            }
            let attempts = slot.attempts;
            result.problem(|| {
                let keys = match plan.ops {
                    1 => format!("key {first}"),
                    ops => format!("keys {first}..={}", first + u64::from(ops) - 1),
                };
                format!("{phase} of {keys}: {error} (after {attempts} retries)")
            });
            return false;
        }
    };
    let temporary = outcome.results().iter().find_map(|r| match r {
        OpResult::Failed(error) if error.is_temporary() => Some(error.code),
        _ => None,
    });
    if let Some(code) = temporary {
        if slot.attempts < RETRIES_MAX {
            *result.errors.entry(code).or_default() += 1;
            slot.attempts += 1;
            result.retries += 1;
            return true;
        }
    }
    let shape = &workload.shape;
    let Generations { low, high } = plan.generations;
    let verifying = plan.verify && plan.phase == Phase::Read;
    let mut op_failed = false;
    for (i, op) in outcome.results().iter().enumerate() {
        let key = first + i as u64;
        match op {
            OpResult::Row(row) => {
                result.ops += 1;
                if verifying {
                    result.rows_verified += 1;
                    if let Err(why) = workload::verify_row(shape, key, row.values(), low, high) {
                        result.mismatches += 1;
                        result.problem(|| why);
                    }
                }
            }
            OpResult::Done if verifying => {
                result.mismatches += 1;
                result.problem(|| format!("read of key {key}: no row came back"));
            }
            OpResult::Done => result.ops += 1,
            OpResult::Failed(error)
                if slot.maybe_committed && settled_by_earlier_commit(plan.phase, error.code) =>
            {
                *result.errors.entry(error.code).or_default() += 1;
                result.ops += 1;
            }
            OpResult::Failed(error) => {
                *result.errors.entry(error.code).or_default() += 1;
                if verifying {
                    result.mismatches += 1;
                } else {
                    op_failed = true;
                }
                if error.code == codes::NO_SUCH_ROW {
                    result.problem(|| format!("{phase} of key {key}: the row is missing"));
                } else {
                    result.problem(|| format!("{phase} of key {key}: {error}"));
                }
            }
        }
    }
    committed(result, slot, plan, done_at, 0);
    if plan.sample_epochs
        && result.transactions.is_multiple_of(stream::LAG_SAMPLE_EVERY)
        && result.commit_epochs.len() < stream::LAG_SAMPLES_PER_THREAD_MAX
    {
        if let Some(epoch) = outcome.epoch.filter(|_| outcome.committed) {
            result.commit_epochs.push((epoch.get(), done_at));
        }
    }
    if op_failed {
        result.failed += 1;
    } else {
        result.service.success(done_at);
    }
    false
}

/// Files a committed transaction: its latency, and `ops` operations
/// (those its results did not count).
fn committed(
    result: &mut ThreadResult,
    slot: &Slot,
    plan: &ThreadPlan,
    done_at: Instant,
    ops: u64,
) {
    assert!(ops <= u64::from(plan.ops), "{ops} ops of {}", plan.ops);
    let latency = done_at.saturating_duration_since(slot.started);
    result
        .histogram
        .record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    result.transactions += 1;
    result.ops += ops;
}

/// Whether `code`, answering the retry of a transaction that may have
/// committed (4010), says that it did: an insert finds its row, a delete
/// finds it gone.
fn settled_by_earlier_commit(phase: Phase, code: u32) -> bool {
    matches!(
        (phase, code),
        (Phase::Insert, codes::DUPLICATE_KEY) | (Phase::Delete, codes::NO_SUCH_ROW)
    )
}

/// Runs one phase over every thread; returns the merged results.
pub(super) fn run_phase(
    cluster: &Cluster,
    workload: &Workload,
    options: &FlexOptions,
    plan: ThreadPlan,
) -> Result<Vec<ThreadResult>, FlexError> {
    // Held until every thread is spawned and has its session: then they start together.
    // (Taken inside the scope, so that an early return opens it before the scope joins.)
    let gate = RwLock::new(());
    let per_thread_keys = options.transactions * options.ops_per_transaction as u64;
    let data_nodes: Vec<u8> = cluster
        .config()
        .data_nodes
        .iter()
        .map(|d| d.node_id.get())
        .collect();
    std::thread::scope(|scope| {
        let closed = gate.write().unwrap_or_else(|p| p.into_inner());
        let mut queues = Vec::new();
        let mut executors = Vec::new();
        if options.executors > 0 {
            for (n, node) in data_nodes.iter().enumerate() {
                for i in 0..options.executors {
                    let (sender, receiver) = mpsc::sync_channel(EXECUTOR_QUEUE_MAX);
                    queues.push(sender);
                    let handle = std::thread::Builder::new()
                        .name(format!("flex-exec-{node}-{i}"))
                        .spawn_scoped(scope, move || executor(cluster, workload, receiver))
                        .map_err(FlexError::Thread)?;
                    executors.push((n, handle));
                }
            }
        }
        let mut node_index = [0u8; 256];
        for (n, node) in data_nodes.iter().enumerate() {
            node_index[usize::from(*node)] = n as u8;
        }
        let mut threads = Vec::new();
        for t in 0..options.threads {
            let plan = ThreadPlan {
                first_key: t as u64 * per_thread_keys,
                ..plan
            };
            let gate = &gate;
            let queues = queues.clone();
            let handle = std::thread::Builder::new()
                .name(format!("flex-{t}"))
                .spawn_scoped(scope, move || -> Result<ThreadResult, Error> {
                    if queues.is_empty() {
                        let session = cluster.session()?;
                        let mut engine = Direct {
                            session,
                            workload,
                            row: Vec::with_capacity(workload.shape.attributes),
                        };
                        Ok(drive(&mut engine, &plan, workload, gate))
                    } else {
                        let (sender, receiver) = mpsc::channel();
                        let mut engine = Queued {
                            workload,
                            cluster,
                            queues,
                            per_node: options.executors,
                            node_index,
                            scratch: Vec::new(),
                            sender,
                            receiver,
                        };
                        Ok(drive(&mut engine, &plan, workload, gate))
                    }
                })
                .map_err(FlexError::Thread)?;
            threads.push(handle);
        }
        // The definers hold the only queue senders now: the executors end
        // when the definers do.
        drop(queues);
        drop(closed);
        let mut results = Vec::new();
        let mut first_error = None;
        for handle in threads {
            match handle.join() {
                Ok(Ok(result)) => results.push(result),
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (n, handle) in executors {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    first_error.get_or_insert(Error::new(
                        error.code,
                        format!("executor of data node {}: {}", data_nodes[n], error.message),
                    ));
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match first_error {
            Some(error) => Err(FlexError::Connect {
                connect: options.connect.clone(),
                source: error,
            }),
            None => Ok(results),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_pause_longer_each_time_within_a_bound() {
        assert_eq!(retry_pause(1), Duration::ZERO);
        assert_eq!(retry_pause(2), Duration::from_millis(1));
        assert_eq!(retry_pause(3), Duration::from_millis(2));
        let pauses: Vec<Duration> = (1..=RETRIES_MAX).map(retry_pause).collect();
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]), "{pauses:?}");
        let total: Duration = pauses.iter().sum();
        // Long enough for a node failure to be noticed, short enough to
        // keep the gap it measures.
        assert!(total >= Duration::from_millis(300), "{total:?}");
        assert!(total <= Duration::from_secs(1), "{total:?}");
        assert_eq!(retry_pause(60), Duration::from_millis(RETRY_PAUSE_MAX_MS));
    }
}
