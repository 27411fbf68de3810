//! The whole cluster in the deterministic simulator: data nodes with every
//! real block (membership, dictionary, distribution, TC, LDM on a
//! [`SimDisk`]), wired by [`crate::wiring`] as a real node is; the
//! stand-in management server that arbitrates; and an API node whose
//! [`Client`] block runs a workload of short transactions —
//! while faults of every kind hit, chosen from the seed — and the checks
//! that must hold through all of it.
//!
//! **Workload.** Bank transfers between `accounts` rows (read both rows
//! with exclusive locks, then update both and insert a ledger row keyed by
//! the transfer's id into `kv`, and commit: the total of the balances never
//! changes), blind upserts of `kv` rows (one in flight per key, so the
//! order of a key's writes is the order they were sent), and audits (read
//! every account with shared locks in one transaction). Many run in
//! parallel through the TCs of every data node the client is connected to.
//! Each transaction's outcome is recorded: committed (with its GCI),
//! aborted (with its error; a temporary error is retried as a new
//! transaction, as a client would), or unknown (the client lost the TC's
//! node while the commit was asked for). Unknown outcomes are resolved at
//! the end by reading: a transfer committed iff its ledger row exists.
//!
//! **Faults** (one per round, chosen from the seed): crash a data node —
//! its disk crashes with it, unsynced writes lost or torn — and restart it
//! later (node restart with catch-up); crash every data node and restart
//! them (system restart); isolate one node, or split the data nodes into
//! two sides (one maybe cut off from the arbitrator), then heal; latency
//! spikes on random links (reordering across links); connection breaks
//! (data–data and API–data links reset and reconnect); disk write failures
//! (the node must stop, with its error as the reason); a paused node (a GC
//! pause: the others declare it dead by missed heartbeats, and when it goes
//! on it must not carry on as if nothing happened). The network model is
//! the kernel simulator's: TCP within a live connection, no loss or
//! duplication inside one.
//!
//! **Invariants.** All the time (every [`CHECK_INTERVAL`]): no split brain;
//! every transaction gets at most one final answer; every audit sums to
//! the initial total; no transfer finds an account missing. At every quiet
//! point (after each round, no transaction in flight, no node starting):
//! the replicas of every partition hold the same committed rows. At the
//! end: every committed transfer's ledger row and every committed upsert
//! are there (a key reads the value of its last surviving write), the
//! balances equal the model's from the transfers that committed, no aborted
//! transfer left a trace, every up node is started in one view.
//!
//! Across a system restart the check is exact ([`WholeSpec::exact_system_restart`],
//! on by default): the cluster restarts to the highest GCI any node kept
//! (docs/recovery.md, "System restart"), which may be above the last one a
//! TC heard of, so the harness reads that restart GCI R from the master
//! that led the restart, and a commit acknowledged before the outage
//! survives iff its GCI is at most R. Where R or the commit's time is not
//! known, the weaker rule: every commit whose GCI was reported complete
//! (`GcpCompleteRep`, sampled from the TCs) before the cluster went down
//! survives; one above may be lost (resolved like an unknown outcome).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use config::Placement;
use kernel::simulator::{Adversary, NetworkSettings, Simulation};
use kernel::{Block, Context, Instant, Rng};
use mgmd::Arbitrator;
use proto::error::{self, ErrorClass};
use proto::ops::{LockMode, OpBatchWriter, OpHeader, OpKind, IGNORE_ERROR, NO_INDEX, NO_PARTITION};
use proto::results::ResultReader;
use schema::{Column, ColumnType, TableDef, Value};
use signal::{epoch, tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
use storage::disk::{CrashPolicy, SimDisk};

use super::subscriber::{check_stream, CommittedTx, GapCause, RowWrite, StreamChecked, Subscriber};
use super::{
    add_data_node, check_no_split_brain, ManagementLog, RecordingManagement, SIM_API, SIM_MGMD,
};
use crate::distribution::Distribution;
use crate::ldm::LdmBlock;
use crate::membership::{Membership, Phase, HEARTBEAT_MISSES_MAX};
use crate::tc::TcBlock;
use crate::wiring::NodeSpec;

/// Simulated time between two checks of the running invariants.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(10);
/// The client's tick: it starts new transactions and looks for late answers.
pub const CLIENT_TICK: Duration = Duration::from_millis(1);
/// A request without an answer for this long: the client gives up on the
/// TC's node (disconnects), as its heartbeat towards the node would.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(1500);
/// Retries of a transaction refused with a temporary error.
pub const RETRIES_MAX: u32 = 5;
/// Durability waits (`TcWaitGciReq`) the client has out at once.
pub const DURABLE_WAITS_MAX: usize = 8;
/// A durability wait not answered "durable" or "lost" for this long is
/// asked again (of any connected TC): its TC may have failed, refused it
/// for now (not started, too many waiting) or still wait.
pub const DURABLE_REASK: Duration = Duration::from_millis(300);
/// Balance of every account at the start.
pub const INITIAL_BALANCE: i64 = 1_000;
/// Ledger rows live in `kv` from this key on (key = base + transfer id).
pub const LEDGER_BASE: i64 = 1_000_000;
/// Longest wait for the cluster to settle (all up, started, serving) once
/// a round's faults stop: the simulator's liveness bound. The slowest
/// recovery without a bug, with `WholeSpec`'s default timings, is a system
/// restart: detection (0.7 s), a tie's ArbitrationTimeout (0.5 s), the
/// angel's restart (0.5 s), StartPartialTimeout (1 s), then restoring the
/// checkpoint and redo and copying the fragments to restarted nodes, a few
/// seconds of simulated time. 30 s leaves room for such a restart to fail
/// and begin again; a cluster that has not settled by then is stuck (issue
/// 25's seed 1795870277594936: one node refused every rejoin).
pub const SETTLE_MAX: Duration = Duration::from_secs(30);
/// Longest wait for the client's transactions to drain at a quiet point.
pub const DRAIN_MAX: Duration = Duration::from_secs(5);

const CLIENT_TIMER: u32 = 1;

/// The kinds of table the workload uses. A new kind (a fully replicated
/// table) adds a variant and its definition in [`TableKind::definition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableKind {
    /// `accounts (id BIGINT, v BIGINT)`: the bank.
    Accounts,
    /// `kv (id BIGINT, v BIGINT)`: upserts and the transfers' ledger.
    Kv,
}

impl TableKind {
    pub const ALL: [TableKind; 2] = [TableKind::Accounts, TableKind::Kv];

    pub fn name(self) -> &'static str {
        match self {
            TableKind::Accounts => "accounts",
            TableKind::Kv => "kv",
        }
    }

    fn definition(self, partitions: u32) -> TableDef {
        TableDef::new(
            self.name(),
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("v", ColumnType::BigInt { unsigned: false }).nullable(),
            ],
        )
        .primary_key(vec![0])
        .partitions(partitions)
    }
}

/// Shape and timing of a whole-cluster run.
#[derive(Clone, Debug)]
pub struct WholeSpec {
    pub data_nodes: u8,
    /// NoOfReplicas: node groups of this many data nodes, in id order.
    pub replicas: u8,
    pub ldm_instances: u32,
    pub partitions: u32,
    pub accounts: u32,
    pub kv_keys: u32,
    /// Transactions the client keeps in flight.
    pub parallel: usize,
    pub gcp_interval: Duration,
    /// `TimeBetweenEpochs`: zero runs no micro-GCPs.
    pub epoch_interval: Duration,
    pub heartbeat_interval: Duration,
    pub api_heartbeat_interval: Duration,
    pub arbitration_timeout: Duration,
    pub start_partial_timeout: Duration,
    pub deadlock_timeout: Duration,
    pub network: NetworkSettings,
    /// Check a system restart against the exact restart GCI (commits above
    /// it gone, all at or below it there); see the module doc. Off: only
    /// the GCI reported complete before the outage is checked.
    pub exact_system_restart: bool,
    /// Per thread-pair signal order and buggify (`kernel::simulator`);
    /// off by default, so that seeds recorded before keep their runs.
    pub adversary: Adversary,
    /// A change-stream subscriber on the API node (`super::subscriber`)
    /// to `kv` and `accounts`, checked against the committed history at
    /// the end; off by default, so that seeds recorded before keep their
    /// runs.
    pub subscriber: bool,
}

impl Default for WholeSpec {
    fn default() -> Self {
        WholeSpec {
            data_nodes: 2,
            replicas: 2,
            ldm_instances: 2,
            partitions: 8,
            accounts: 12,
            kv_keys: 24,
            parallel: 6,
            gcp_interval: Duration::from_millis(50),
            epoch_interval: Duration::ZERO,
            heartbeat_interval: Duration::from_millis(100),
            api_heartbeat_interval: Duration::from_millis(100),
            arbitration_timeout: Duration::from_millis(500),
            start_partial_timeout: Duration::from_secs(1),
            deadlock_timeout: Duration::from_millis(300),
            network: NetworkSettings::default(),
            exact_system_restart: true,
            adversary: Adversary::default(),
            subscriber: false,
        }
    }
}

impl WholeSpec {
    /// Longest failure detection takes, plus slack.
    pub fn detection_time(&self) -> Duration {
        self.heartbeat_interval * (HEARTBEAT_MISSES_MAX + 2) + Duration::from_millis(100)
    }
}

/// How one transaction of the workload ended, as the client knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In flight.
    Pending,
    Committed {
        /// The commit's epoch (`signal::epoch`; its hi is the GCI).
        epoch: u64,
    },
    Aborted {
        code: u32,
    },
    /// The client lost the TC's node while the commit was asked for.
    Unknown,
}

/// One bank transfer (one attempt: a retry is a new transfer).
#[derive(Clone, Debug)]
pub struct Transfer {
    pub from: u32,
    pub to: u32,
    pub amount: i64,
    pub outcome: Outcome,
    pub retries: u32,
    /// Outages seen before the commit was acknowledged (`None`: not
    /// acknowledged, or settled by a late answer).
    pub after_outages: Option<usize>,
    /// The cluster incarnation the commit reply named.
    pub incarnation: u32,
    /// What `TcWaitGciReq` answered for its commit: `Some(true)` durable,
    /// `Some(false)` lost by a system restart (`None`: not answered yet).
    /// The final check holds the ledger row to it.
    pub durable: Option<bool>,
    /// The balances of `from` and `to` its read found (`None`: not read):
    /// its commit writes them less and plus `amount`.
    pub read: Option<(i64, i64)>,
}

/// Durability waits of acknowledged transfers that share one GCI of one
/// incarnation: the client asks once for all of them.
#[derive(Debug, Default)]
struct DurableWait {
    transfers: Vec<usize>,
    /// The TC asked last, and when.
    asked: Option<(NodeId, Instant)>,
}

/// One blind upsert of a `kv` key (value unique per upsert).
#[derive(Clone, Debug)]
pub struct Upsert {
    pub key: i64,
    pub value: i64,
    pub outcome: Outcome,
    pub retries: u32,
    /// As [`Transfer::after_outages`].
    pub after_outages: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Reading the two accounts (not committing yet).
    TransferRead(usize),
    TransferCommit(usize),
    Upsert(usize),
    Audit,
    /// A request of the harness (reads at the end).
    Probe,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    tc: NodeId,
    sent: Instant,
    work: Work,
    /// What the commit's epoch must be at least, known when it was asked
    /// for (see [`EpochOrder`]).
    floor: EpochFloor,
}

/// The epoch order the client checks (docs/transactions.md, "Global
/// checkpoints"): per row, committed writes in commit order carry
/// non-decreasing epochs — a transfer read the rows it writes, so this is
/// "a commit that read another's row is not in an earlier epoch" (the
/// client has one write per row in flight, so the order of the answers is
/// the commit order); and a commit asked of a TC after that TC was told an
/// epoch complete (`SubGcpCompleteRep`, sampled) is in a later epoch.
/// A system restart may hand out again epochs whose commits it lost: the
/// order starts over after each outage (`era`).
///
/// Not checked: that a commit asked for after another's answer, on
/// another TC, is in an epoch at least that one's. The two-phase switch
/// gives it while one master runs the rounds, but during a view change
/// that leaves two presidents at once (seed 1405, 4×2, a broken link) the
/// old one's TC commits in its GCI while the new master's side has
/// switched to the next.
#[derive(Debug, Default)]
struct EpochOrder {
    era: u32,
    /// The last committed epoch of each row written: (table, key).
    rows: BTreeMap<(TableKind, i64), u64>,
    /// The highest epoch each TC (by node) was told complete.
    complete: BTreeMap<NodeId, u64>,
    /// Commits checked.
    checked: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct EpochFloor {
    era: u32,
    complete: u64,
}

impl EpochOrder {
    fn floor(&self, tc: NodeId) -> EpochFloor {
        EpochFloor {
            era: self.era,
            complete: self.complete.get(&tc).copied().unwrap_or(0),
        }
    }

    /// Checks a commit in `committed` asked for at `floor` that wrote `rows`.
    fn commit(
        &mut self,
        what: &str,
        committed: u64,
        floor: EpochFloor,
        rows: &[(TableKind, i64)],
    ) -> Result<(), String> {
        if floor.era != self.era {
            return Ok(());
        }
        self.checked += 1;
        if committed <= floor.complete {
            return Err(format!(
                "{what}: committed in epoch {committed:#x}, its TC was told {:#x} complete before it was asked for",
                floor.complete
            ));
        }
        for row in rows {
            let last = self.rows.entry(*row).or_insert(0);
            if committed < *last {
                return Err(format!(
                    "{what}: wrote {row:?} in epoch {committed:#x} after a commit of it in {last:#x}"
                ));
            }
            *last = committed;
        }
        Ok(())
    }
}

/// Counts of what the workload did, for reports and for tests that check
/// the faults hit something.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadStats {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub retried: u64,
    pub audits: u64,
    pub gave_up: u64,
    /// Commits whose epoch order the client checked.
    pub epoch_checks: u64,
    /// Transfers `TcWaitGciReq` answered durable, and lost.
    pub durable_confirmed: u64,
    pub durable_lost: u64,
}

/// The client's state, shared between its block and the harness.
pub struct ClientState {
    data_nodes: Vec<NodeId>,
    accounts: u32,
    kv_keys: u32,
    parallel: usize,
    tables: BTreeMap<TableKind, TableDef>,
    connected: BTreeSet<NodeId>,
    /// Start new transactions (off at quiet points and at the end).
    pub running: bool,
    inflight: BTreeMap<u64, InFlight>,
    busy_keys: BTreeSet<i64>,
    pub transfers: Vec<Transfer>,
    pub upserts: Vec<Upsert>,
    retry_transfers: Vec<usize>,
    retry_upserts: Vec<usize>,
    /// Transactions with a final answer (commit, rollback or refusal).
    finals: BTreeSet<u64>,
    /// Final answers of transactions already given up on (unknown).
    late: BTreeMap<u64, Outcome>,
    /// Which work a transaction id did, for late answers.
    tx_work: BTreeMap<u64, Work>,
    probes: BTreeMap<u64, Result<(u32, Vec<u8>), u32>>,
    pub violations: Vec<String>,
    pub stats: WorkloadStats,
    next_tx: u64,
    next_value: i64,
    pub dict_answers: Vec<SignalBody>,
    /// The text of the last refusal, for the report of a bad one.
    last_refusal: String,
    /// Outages the harness saw so far: a commit acknowledged now comes
    /// after them (its GCI is judged against the next outage's restart).
    pub after_outages: usize,
    epochs: EpochOrder,
    /// Durability waits by (GCI, incarnation).
    durable_waits: BTreeMap<(u32, u32), DurableWait>,
    /// The change-stream subscriber ([`WholeSpec::subscriber`]), once the
    /// workload starts.
    pub subscriber: Option<Subscriber>,
}

impl ClientState {
    fn new(spec: &WholeSpec, data_nodes: Vec<NodeId>) -> ClientState {
        ClientState {
            data_nodes,
            accounts: spec.accounts,
            kv_keys: spec.kv_keys,
            parallel: spec.parallel,
            tables: BTreeMap::new(),
            connected: BTreeSet::new(),
            running: false,
            inflight: BTreeMap::new(),
            busy_keys: BTreeSet::new(),
            transfers: Vec::new(),
            upserts: Vec::new(),
            retry_transfers: Vec::new(),
            retry_upserts: Vec::new(),
            finals: BTreeSet::new(),
            late: BTreeMap::new(),
            tx_work: BTreeMap::new(),
            probes: BTreeMap::new(),
            violations: Vec::new(),
            stats: WorkloadStats::default(),
            next_tx: (u64::from(SIM_API.get()) << 48) | 1,
            next_value: 1,
            after_outages: 0,
            dict_answers: Vec::new(),
            last_refusal: String::new(),
            epochs: EpochOrder::default(),
            durable_waits: BTreeMap::new(),
            subscriber: None,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Commits whose epoch order was checked.
    pub fn epochs_checked(&self) -> u64 {
        self.epochs.checked
    }

    fn tx_id(&mut self) -> u64 {
        self.next_tx += 1;
        self.next_tx
    }

    fn total(&self) -> i64 {
        INITIAL_BALANCE * i64::from(self.accounts)
    }

    /// An op batch on table `kind`: `ops` of (kind, key, value, lock).
    fn batch(&self, table: TableKind, ops: &[(OpKind, i64, i64, LockMode)]) -> Vec<u8> {
        let table = &self.tables[&table];
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, &(kind, key, v, lock)) in ops.iter().enumerate() {
            w.begin(&OpHeader {
                op_index: i as u32,
                table_id: table.id,
                table_version: table.version,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind,
                lock,
                // The harness's committed reads find missing rows too.
                flags: if lock == LockMode::Committed {
                    IGNORE_ERROR
                } else {
                    0
                },
            });
            w.key(Value::Int(key).as_ref());
            if kind != OpKind::Read && kind != OpKind::Delete {
                w.value(1, Value::Int(v).as_ref());
            }
            w.end().expect("a small batch fits");
        }
        drop(w);
        out
    }

    /// Ops on two tables in one batch: the transfer's commit.
    fn transfer_commit_batch(&self, t: &Transfer, id: usize, from: i64, to: i64) -> Vec<u8> {
        let accounts = &self.tables[&TableKind::Accounts];
        let kv = &self.tables[&TableKind::Kv];
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        let ops = [
            (accounts, OpKind::Update, i64::from(t.from), from - t.amount),
            (accounts, OpKind::Update, i64::from(t.to), to + t.amount),
            (kv, OpKind::Insert, LEDGER_BASE + id as i64, t.amount),
        ];
        for (i, (table, kind, key, v)) in ops.into_iter().enumerate() {
            w.begin(&OpHeader {
                op_index: i as u32,
                table_id: table.id,
                table_version: table.version,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind,
                lock: LockMode::Exclusive,
                flags: 0,
            });
            w.key(Value::Int(key).as_ref());
            w.value(1, Value::Int(v).as_ref());
            w.end().expect("a small batch fits");
        }
        drop(w);
        out
    }

    fn violation(&mut self, now: Instant, text: String) {
        self.violations
            .push(format!("at {:.3} s: {text}", now.as_nanos() as f64 / 1e9));
    }
}

/// The first temporary per-op error of a result batch. The harness's
/// committed reads ignore errors (`IGNORE_ERROR`, to see missing rows), so
/// a transaction of them commits with an op refused for a while (the LDM
/// request limit, 1217): asked again, as a refused transaction is.
fn temporary_op_error(results: &[u8]) -> Option<u32> {
    let reader = ResultReader::new(results).ok()?;
    let code = reader
        .iter()
        .map(|r| r.code)
        .find(|&code| code != 0 && error::class(code) == ErrorClass::Temporary);
    code
}

/// Reads the values of a result batch: per op, `Some(v)`, or `None` when
/// the row does not exist; `Err` for any other per-op error.
fn read_values(results: &[u8]) -> Result<Vec<Option<i64>>, String> {
    let reader = ResultReader::new(results).map_err(|e| format!("bad result batch: {e}"))?;
    let mut out = Vec::new();
    for r in reader.iter() {
        match r.code {
            0 => match r.values().nth(1).map(|v| v.to_value()) {
                Some(Value::Int(v)) => out.push(Some(v)),
                other => return Err(format!("op {}: value {other:?}", r.op_index)),
            },
            error::NO_SUCH_ROW => out.push(None),
            code => return Err(format!("op {}: error {code}", r.op_index)),
        }
    }
    Ok(out)
}

/// The API node's block: runs the workload on a timer, records every answer.
pub struct Client {
    state: Arc<Mutex<ClientState>>,
}

fn lock(state: &Arc<Mutex<ClientState>>) -> MutexGuard<'_, ClientState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Block for Client {
    fn start(&mut self, ctx: &mut Context<'_>) {
        ctx.set_timer(CLIENT_TICK, CLIENT_TIMER);
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let state = Arc::clone(&self.state);
        let mut s = lock(&state);
        let s = &mut *s;
        if let Some(sub) = &mut s.subscriber {
            match sub.execute(&signal, ctx) {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    let now = ctx.now();
                    s.violation(now, format!("subscriber: {e}"));
                    return;
                }
            }
        }
        match signal.body {
            SignalBody::Timeout { .. } => {
                Self::give_up_slow(s, ctx);
                Self::ask_durable(s, ctx);
                if s.running {
                    Self::start_work(s, ctx);
                }
                if let Some(sub) = &mut s.subscriber {
                    sub.tick(&s.connected, s.after_outages, ctx);
                }
                ctx.set_timer(CLIENT_TICK, CLIENT_TIMER);
            }
            SignalBody::NodeConnected { node } => {
                s.connected.insert(node);
            }
            SignalBody::NodeDisconnected { node } => {
                s.connected.remove(&node);
                if let Some(sub) = &mut s.subscriber {
                    sub.disconnected(node, ctx);
                }
                for wait in s.durable_waits.values_mut() {
                    if wait.asked.is_some_and(|(n, _)| n == node) {
                        wait.asked = None;
                    }
                }
                Self::lost_node(s, node, ctx.now());
            }
            SignalBody::TcKeyConf {
                tx_id,
                flags,
                epoch,
                incarnation,
                results,
            } => Self::answer(s, tx_id, Ok((flags, epoch, results)), incarnation, ctx),
            SignalBody::TcWaitGciConf {
                gci,
                incarnation,
                durable_gci,
            } if durable_gci >= gci => Self::durable_answer(s, gci, incarnation, true),
            SignalBody::TcWaitGciRef {
                gci,
                incarnation,
                code: error::COMMIT_LOST_BY_RESTART,
                ..
            } => Self::durable_answer(s, gci, incarnation, false),
            SignalBody::TcWaitGciRef {
                gci,
                incarnation,
                code: error::DURABILITY_UNKNOWN,
                ..
            } => {
                // Not a claim either way: the wait ends.
                s.durable_waits.remove(&(gci, incarnation));
            }
            SignalBody::TcKeyRef {
                tx_id,
                code,
                message,
                ..
            } => {
                s.last_refusal = message;
                Self::answer(s, tx_id, Err(code), 0, ctx);
            }
            body @ (SignalBody::DictCreateTableConf { .. }
            | SignalBody::DictCreateTableRef { .. }
            | SignalBody::DictGetTableConf { .. }
            | SignalBody::DictGetTableRef { .. }) => s.dict_answers.push(body),
            _ => {}
        }
    }
}

impl Client {
    /// Requests unanswered for [`REQUEST_TIMEOUT`]: give up on their node.
    fn give_up_slow(s: &mut ClientState, ctx: &mut Context<'_>) {
        let now = ctx.now();
        let slow: BTreeSet<NodeId> = s
            .inflight
            .values()
            .filter(|f| now.saturating_since(f.sent) >= REQUEST_TIMEOUT)
            .map(|f| f.tc)
            .collect();
        for node in slow {
            s.stats.gave_up += 1;
            ctx.disconnect(node);
            s.connected.remove(&node);
            Self::lost_node(s, node, now);
        }
    }

    /// The connection to `node` is gone: what was in flight there has no
    /// answer coming. A commit asked for is unknown; a transaction that
    /// never asked for its commit is rolled back by the cluster.
    fn lost_node(s: &mut ClientState, node: NodeId, now: Instant) {
        let lost: Vec<(u64, InFlight)> = s
            .inflight
            .iter()
            .filter(|(_, f)| f.tc == node)
            .map(|(t, f)| (*t, *f))
            .collect();
        for (tx_id, f) in lost {
            s.inflight.remove(&tx_id);
            match f.work {
                Work::TransferRead(i) => {
                    s.transfers[i].outcome = Outcome::Aborted {
                        code: error::REQUEST_TIMEOUT,
                    };
                    s.stats.aborted += 1;
                    Self::release_transfer(s, i);
                }
                Work::TransferCommit(i) => {
                    s.transfers[i].outcome = Outcome::Unknown;
                    s.stats.unknown += 1;
                    Self::release_transfer(s, i);
                }
                Work::Upsert(i) => {
                    s.upserts[i].outcome = Outcome::Unknown;
                    s.stats.unknown += 1;
                    let key = s.upserts[i].key;
                    s.busy_keys.remove(&key);
                }
                Work::Audit => {}
                Work::Probe => {
                    s.probes.insert(tx_id, Err(error::REQUEST_TIMEOUT));
                }
            }
        }
        let _ = now;
    }

    fn release_transfer(s: &mut ClientState, i: usize) {
        let (from, to) = (s.transfers[i].from, s.transfers[i].to);
        s.busy_keys.remove(&-(i64::from(from) + 1));
        s.busy_keys.remove(&-(i64::from(to) + 1));
    }

    fn pick_tc(s: &ClientState, ctx: &mut Context<'_>) -> Option<NodeId> {
        let live: Vec<NodeId> = s
            .data_nodes
            .iter()
            .copied()
            .filter(|n| s.connected.contains(n))
            .collect();
        if live.is_empty() {
            return None;
        }
        Some(live[(ctx.random() % live.len() as u64) as usize])
    }

    fn send(
        s: &mut ClientState,
        ctx: &mut Context<'_>,
        tc: NodeId,
        flags: u32,
        ops: Vec<u8>,
        work: Work,
    ) -> u64 {
        let tx_id = s.tx_id();
        Self::send_as(s, ctx, tc, tx_id, flags, ops, work);
        tx_id
    }

    fn send_as(
        s: &mut ClientState,
        ctx: &mut Context<'_>,
        tc: NodeId,
        tx_id: u64,
        flags: u32,
        ops: Vec<u8>,
        work: Work,
    ) {
        let floor = s.epochs.floor(tc);
        s.inflight.insert(
            tx_id,
            InFlight {
                tc,
                sent: ctx.now(),
                work,
                floor,
            },
        );
        s.tx_work.insert(tx_id, work);
        ctx.send(
            BlockRef::new(tc, BlockNumber::TRANSACTION_COORDINATOR, 0),
            SignalBody::TcKeyReq { tx_id, flags, ops },
        );
    }

    fn start_work(s: &mut ClientState, ctx: &mut Context<'_>) {
        if s.tables.len() < TableKind::ALL.len() {
            return;
        }
        while s.inflight.len() < s.parallel {
            let Some(tc) = Self::pick_tc(s, ctx) else {
                return;
            };
            let roll = ctx.random() % 100;
            let started = if let Some(i) = s.retry_transfers.pop() {
                Self::start_transfer(s, ctx, tc, Some(i))
            } else if let Some(i) = s.retry_upserts.pop() {
                Self::start_upsert(s, ctx, tc, Some(i))
            } else if roll < 45 {
                Self::start_transfer(s, ctx, tc, None)
            } else if roll < 92 {
                Self::start_upsert(s, ctx, tc, None)
            } else {
                let ops: Vec<(OpKind, i64, i64, LockMode)> = (0..s.accounts)
                    .map(|a| (OpKind::Read, i64::from(a), 0, LockMode::Shared))
                    .collect();
                let ops = s.batch(TableKind::Accounts, &ops);
                Self::send(
                    s,
                    ctx,
                    tc,
                    tc_flags::START | tc_flags::COMMIT,
                    ops,
                    Work::Audit,
                );
                true
            };
            if !started {
                return;
            }
        }
    }

    /// A new transfer, or a retry of transfer `again` (as a new transfer).
    fn start_transfer(
        s: &mut ClientState,
        ctx: &mut Context<'_>,
        tc: NodeId,
        again: Option<usize>,
    ) -> bool {
        let (from, to, amount, retries) = match again {
            Some(i) => {
                let t = &s.transfers[i];
                (t.from, t.to, t.amount, t.retries + 1)
            }
            None => {
                let from = (ctx.random() % u64::from(s.accounts)) as u32;
                let to =
                    (from + 1 + (ctx.random() % u64::from(s.accounts - 1)) as u32) % s.accounts;
                (from, to, 1 + (ctx.random() % 50) as i64, 0)
            }
        };
        let (kf, kt) = (-(i64::from(from) + 1), -(i64::from(to) + 1));
        if s.busy_keys.contains(&kf) || s.busy_keys.contains(&kt) {
            if let Some(i) = again {
                s.retry_transfers.push(i);
            }
            return false;
        }
        s.busy_keys.insert(kf);
        s.busy_keys.insert(kt);
        let id = s.transfers.len();
        s.transfers.push(Transfer {
            from,
            to,
            amount,
            outcome: Outcome::Pending,
            retries,
            after_outages: None,
            incarnation: 0,
            durable: None,
            read: None,
        });
        let ops = s.batch(
            TableKind::Accounts,
            &[
                (OpKind::Read, i64::from(from), 0, LockMode::Exclusive),
                (OpKind::Read, i64::from(to), 0, LockMode::Exclusive),
            ],
        );
        Self::send(s, ctx, tc, tc_flags::START, ops, Work::TransferRead(id));
        true
    }

    fn start_upsert(
        s: &mut ClientState,
        ctx: &mut Context<'_>,
        tc: NodeId,
        again: Option<usize>,
    ) -> bool {
        let (key, retries) = match again {
            Some(i) => (s.upserts[i].key, s.upserts[i].retries + 1),
            None => ((ctx.random() % u64::from(s.kv_keys)) as i64, 0),
        };
        if s.busy_keys.contains(&key) {
            if let Some(i) = again {
                s.retry_upserts.push(i);
            }
            return false;
        }
        s.busy_keys.insert(key);
        let value = s.next_value;
        s.next_value += 1;
        let id = s.upserts.len();
        s.upserts.push(Upsert {
            key,
            value,
            outcome: Outcome::Pending,
            retries,
            after_outages: None,
        });
        let ops = s.batch(
            TableKind::Kv,
            &[(OpKind::Write, key, value, LockMode::Exclusive)],
        );
        Self::send(
            s,
            ctx,
            tc,
            tc_flags::START | tc_flags::COMMIT,
            ops,
            Work::Upsert(id),
        );
        true
    }

    /// Asks the TCs whether acknowledged transfers are durable: each wait
    /// not out (or out too long) goes to a connected TC, at most
    /// `DURABLE_WAITS_MAX` out at once. The waits outlive outages: one of
    /// an incarnation a system restart ended is asked of the next one.
    fn ask_durable(s: &mut ClientState, ctx: &mut Context<'_>) {
        let now = ctx.now();
        let out = s
            .durable_waits
            .values()
            .filter(|w| w.asked.is_some_and(|(n, _)| s.connected.contains(&n)))
            .count();
        let due: Vec<(u32, u32)> = s
            .durable_waits
            .iter()
            .filter(|(_, w)| {
                w.asked.is_none_or(|(n, at)| {
                    !s.connected.contains(&n) || now.saturating_since(at) >= DURABLE_REASK
                })
            })
            .map(|(key, _)| *key)
            .take(DURABLE_WAITS_MAX.saturating_sub(out))
            .collect();
        for (gci, incarnation) in due {
            let Some(tc) = Self::pick_tc(s, ctx) else {
                return;
            };
            ctx.send(tc_of(tc), SignalBody::TcWaitGciReq { gci, incarnation });
            if let Some(wait) = s.durable_waits.get_mut(&(gci, incarnation)) {
                wait.asked = Some((tc, now));
            }
        }
    }

    /// A TC answered the transfers of `gci` of `incarnation` durable or lost.
    fn durable_answer(s: &mut ClientState, gci: u32, incarnation: u32, durable: bool) {
        let Some(wait) = s.durable_waits.remove(&(gci, incarnation)) else {
            return;
        };
        for i in wait.transfers {
            s.transfers[i].durable = Some(durable);
            if durable {
                s.stats.durable_confirmed += 1;
            } else {
                s.stats.durable_lost += 1;
            }
        }
    }

    fn answer(
        s: &mut ClientState,
        tx_id: u64,
        answer: Result<(u32, u64, Vec<u8>), u32>,
        incarnation: u32,
        ctx: &mut Context<'_>,
    ) {
        let now = ctx.now();
        let is_final = match &answer {
            Ok((flags, _, _)) => *flags & (tc_flags::COMMITTED | tc_flags::ROLLED_BACK) != 0,
            Err(_) => true,
        };
        if is_final && !s.finals.insert(tx_id) {
            s.violation(
                now,
                format!("transaction {tx_id:#x}: a second final answer {answer:?}"),
            );
            return;
        }
        let Some(f) = s.inflight.remove(&tx_id) else {
            // A late answer to a transaction given up on: it settles the
            // unknown outcome (checked against the data at the end).
            if is_final {
                let outcome = match answer {
                    Ok((flags, epoch, _)) if flags & tc_flags::COMMITTED != 0 => {
                        Outcome::Committed { epoch }
                    }
                    Ok(_) => Outcome::Aborted { code: 0 },
                    Err(code) => Outcome::Aborted { code },
                };
                s.late.insert(tx_id, outcome);
            }
            return;
        };
        match (f.work, answer) {
            (Work::Probe, Ok((flags, _, results))) => {
                s.probes.insert(tx_id, Ok((flags, results)));
            }
            (Work::Probe, Err(code)) => {
                s.probes.insert(tx_id, Err(code));
            }
            (Work::Audit, Ok((flags, epoch, results))) => {
                s.stats.audits += 1;
                if flags & tc_flags::COMMITTED == 0 {
                    s.violation(now, format!("audit {tx_id:#x}: answered flags {flags}"));
                    return;
                }
                let what = format!("audit {tx_id:#x} on node {}", f.tc);
                if let Err(e) = s.epochs.commit(&what, epoch, f.floor, &[]) {
                    s.violation(now, e);
                }
                if let Some(code) = temporary_op_error(&results) {
                    return Self::refused(s, now, tx_id, code, None);
                }
                match read_values(&results) {
                    Ok(values) => {
                        let missing = values.iter().filter(|v| v.is_none()).count();
                        let sum: i64 = values.iter().flatten().sum();
                        if missing > 0 || sum != s.total() {
                            let total = s.total();
                            s.violation(
                                now,
                                format!("audit {tx_id:#x}: {missing} accounts missing, total {sum} (want {total})"),
                            );
                        }
                    }
                    Err(e) => s.violation(now, format!("audit {tx_id:#x}: {e}")),
                }
            }
            (Work::Audit, Err(code)) => Self::refused(s, now, tx_id, code, None),
            (Work::TransferRead(i), Ok((_, _, results))) => match read_values(&results) {
                Ok(values) if values.len() == 2 && values.iter().all(Option::is_some) => {
                    let (from, to) = (values[0].unwrap_or(0), values[1].unwrap_or(0));
                    s.transfers[i].read = Some((from, to));
                    let ops = s.transfer_commit_batch(&s.transfers[i], i, from, to);
                    Self::send_as(
                        s,
                        ctx,
                        f.tc,
                        tx_id,
                        tc_flags::COMMIT,
                        ops,
                        Work::TransferCommit(i),
                    );
                }
                other => {
                    let t = s.transfers[i].clone();
                    s.violation(
                        now,
                        format!("transfer {i} {t:?}: the accounts read as {other:?}"),
                    );
                    s.transfers[i].outcome = Outcome::Aborted { code: 0 };
                    Self::release_transfer(s, i);
                    // Leave the transaction to the TC's timeout.
                }
            },
            (Work::TransferCommit(i), Ok((flags, epoch, _))) => {
                if flags & tc_flags::COMMITTED != 0 {
                    s.transfers[i].outcome = Outcome::Committed { epoch };
                    s.transfers[i].after_outages = Some(s.after_outages);
                    s.transfers[i].incarnation = incarnation;
                    s.stats.committed += 1;
                    s.durable_waits
                        .entry((epoch::hi(epoch), incarnation))
                        .or_default()
                        .transfers
                        .push(i);
                    let t = &s.transfers[i];
                    let rows = [
                        (TableKind::Accounts, i64::from(t.from)),
                        (TableKind::Accounts, i64::from(t.to)),
                        (TableKind::Kv, LEDGER_BASE + i as i64),
                    ];
                    let what = format!("transfer {i} {t:?} on node {}", f.tc);
                    if let Err(e) = s.epochs.commit(&what, epoch, f.floor, &rows) {
                        s.violation(now, e);
                    }
                } else {
                    s.violation(now, format!("transfer {i}: commit answered flags {flags}"));
                }
                Self::release_transfer(s, i);
            }
            (Work::TransferRead(i) | Work::TransferCommit(i), Err(code)) => {
                s.transfers[i].outcome = Outcome::Aborted { code };
                Self::release_transfer(s, i);
                Self::refused(s, now, tx_id, code, Some((true, i)));
            }
            (Work::Upsert(i), Ok((flags, epoch, _))) => {
                if flags & tc_flags::COMMITTED != 0 {
                    s.upserts[i].outcome = Outcome::Committed { epoch };
                    s.upserts[i].after_outages = Some(s.after_outages);
                    s.stats.committed += 1;
                    let u = &s.upserts[i];
                    let rows = [(TableKind::Kv, u.key)];
                    let what = format!("upsert {i} {u:?} on node {}", f.tc);
                    if let Err(e) = s.epochs.commit(&what, epoch, f.floor, &rows) {
                        s.violation(now, e);
                    }
                } else {
                    s.violation(now, format!("upsert {i}: answered flags {flags}"));
                }
                let key = s.upserts[i].key;
                s.busy_keys.remove(&key);
            }
            (Work::Upsert(i), Err(code)) => {
                s.upserts[i].outcome = Outcome::Aborted { code };
                let key = s.upserts[i].key;
                s.busy_keys.remove(&key);
                Self::refused(s, now, tx_id, code, Some((false, i)));
            }
        }
    }

    /// A refusal: a temporary error is retried (a transfer or upsert as a
    /// new one); anything else is a violation — the workload's requests
    /// are all valid.
    fn refused(
        s: &mut ClientState,
        now: Instant,
        tx_id: u64,
        code: u32,
        retry: Option<(bool, usize)>,
    ) {
        s.stats.aborted += 1;
        if error::class(code) != ErrorClass::Temporary {
            let text = format!(
                "transaction {tx_id:#x} ({:?}): refused with {code}, not a temporary error: {}",
                s.tx_work.get(&tx_id),
                s.last_refusal
            );
            s.violation(now, text);
            return;
        }
        match retry {
            Some((true, i)) if s.transfers[i].retries < RETRIES_MAX => {
                s.stats.retried += 1;
                s.retry_transfers.push(i);
            }
            Some((false, i)) if s.upserts[i].retries < RETRIES_MAX => {
                s.stats.retried += 1;
                s.retry_upserts.push(i);
            }
            _ => {}
        }
    }
}

/// A moment the cluster was down (no data node started): a system restart
/// follows. `complete_gci`: the highest GCI reported complete before it.
#[derive(Clone, Copy, Debug)]
pub struct Outage {
    pub at: Instant,
    pub complete_gci: u32,
    /// The GCI the system restart after it restored (read from the master's
    /// distribution block; `None` until a node that went down since led
    /// one).
    pub restart_gci: Option<u32>,
}

/// A simulated whole cluster.
pub struct WholeCluster {
    pub sim: Simulation,
    pub spec: WholeSpec,
    pub data_nodes: Vec<NodeId>,
    pub groups: Vec<Vec<NodeId>>,
    pub disks: BTreeMap<NodeId, SimDisk>,
    pub management: Arc<Mutex<ManagementLog>>,
    pub client: Arc<Mutex<ClientState>>,
    /// The highest GCI any TC was told complete so far.
    pub complete_gci: u32,
    pub outages: Vec<Outage>,
    /// Data nodes seen down since the last outage: only a new incarnation's
    /// distribution block tells that outage's restart GCI.
    down_since_outage: BTreeSet<NodeId>,
    was_up: bool,
    pub faults: Vec<String>,
    /// Replica comparisons done (quiet points).
    pub replica_checks: u32,
    /// Acknowledged commits the final check found gone, as it must: above
    /// the restart GCI of the next system restart.
    pub lost_by_restart: u32,
    /// The fewest data nodes started at once since the workload began.
    pub least_started: Option<usize>,
    /// Commits acknowledged before the first fault.
    pub committed_before_faults: Option<u64>,
    /// A link between the API node and a data node was broken (the
    /// subscriber may lose every node of a group: a gap).
    pub api_links_broken: bool,
    /// What the stream check compared ([`WholeSpec::subscriber`]).
    pub stream: Option<StreamChecked>,
}

/// The address of the client block.
pub fn client_address() -> BlockRef {
    BlockRef::new(SIM_API, BlockNumber::API_CLUSTER, 0)
}

fn tc_of(n: NodeId) -> BlockRef {
    BlockRef::new(n, BlockNumber::TRANSACTION_COORDINATOR, 0)
}

fn ldm_of(n: NodeId, i: u32) -> BlockRef {
    BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, i as u16)
}

/// Adds `data_nodes` to `sim`, each wired as [`node_spec`] says on its disk
/// in `disks`, with start ids drawn from `seed` (so the same seed gives the
/// same cluster).
pub fn add_data_nodes(
    sim: &mut Simulation,
    seed: u64,
    spec: &WholeSpec,
    placement: &Placement,
    disks: &BTreeMap<NodeId, SimDisk>,
    mgmd: Option<NodeId>,
) {
    for (&id, disk) in disks {
        let node = node_spec(spec, id, placement, mgmd);
        add_data_node(sim, seed, node, disk.clone(), |_| {});
    }
}

/// Data node `id` of a cluster of `spec` on `placement`, arbitrating
/// through `mgmd` when given: the simulator's node with the spec's timings.
pub fn node_spec(
    spec: &WholeSpec,
    id: NodeId,
    placement: &Placement,
    mgmd: Option<NodeId>,
) -> NodeSpec {
    NodeSpec {
        mgmd,
        heartbeat_interval: spec.heartbeat_interval,
        api_heartbeat_interval: spec.api_heartbeat_interval,
        start_partial_timeout: spec.start_partial_timeout,
        arbitration_timeout: spec.arbitration_timeout,
        gcp_interval: spec.gcp_interval,
        epoch_interval: spec.epoch_interval,
        deadlock_timeout: spec.deadlock_timeout,
        ..NodeSpec::simulated(id, placement.clone())
    }
}

impl WholeCluster {
    /// Data nodes 2, 3, …; the mgmd is node 1, the client's API node 200.
    /// Starts the cluster and creates the tables; no rows yet.
    pub fn new(seed: u64, spec: WholeSpec) -> Result<WholeCluster, String> {
        assert!(spec.replicas > 0 && spec.data_nodes.is_multiple_of(spec.replicas));
        let mut sim = Simulation::new(seed);
        sim.network = spec.network.clone();
        sim.set_reorder(spec.adversary.reorder);
        sim.set_buggify(spec.adversary.buggify);
        sim.set_late_signals(spec.adversary.late_signals);
        // Every ThreadConfig runs these on `main` (node.rs); each TC and
        // LDM instance may have a thread of its own.
        sim.share_thread(&[
            BlockNumber::MEMBERSHIP,
            BlockNumber::DICTIONARY,
            BlockNumber::DISTRIBUTION,
        ]);
        let data_nodes: Vec<NodeId> = (0..spec.data_nodes)
            .map(|i| NodeId::new(2 + i).expect("nonzero"))
            .collect();
        let groups: Vec<Vec<NodeId>> = data_nodes
            .chunks(usize::from(spec.replicas))
            .map(<[NodeId]>::to_vec)
            .collect();
        let placement = Placement::new(groups.clone(), spec.ldm_instances);
        let management = Arc::new(Mutex::new(ManagementLog::default()));
        let log = Arc::clone(&management);
        sim.add_node(
            SIM_MGMD,
            Box::new(move |node, _| {
                let block: Box<dyn Block> = Box::new(RecordingManagement {
                    log: Arc::clone(&log),
                    arbitrator: Arbitrator::new(),
                });
                vec![(BlockRef::new(node, BlockNumber::MANAGEMENT, 0), block)]
            }),
        );
        let mut disks = BTreeMap::new();
        let mut policy_rng = Rng::seeded(seed ^ 0xd15c);
        for &id in &data_nodes {
            let disk = SimDisk::new(seed ^ (u64::from(id.get()) << 32));
            let keep = policy_rng.below(70) as u8;
            let tear = policy_rng.below(u64::from(100 - keep) + 1) as u8;
            disk.set_crash_policy(CrashPolicy {
                keep_percent: keep,
                tear_percent: tear,
            });
            disks.insert(id, disk);
        }
        add_data_nodes(&mut sim, seed, &spec, &placement, &disks, Some(SIM_MGMD));
        let client = Arc::new(Mutex::new(ClientState::new(&spec, data_nodes.clone())));
        let shared = Arc::clone(&client);
        sim.add_node(
            SIM_API,
            Box::new(move |_, _| {
                let block: Box<dyn Block> = Box::new(Client {
                    state: Arc::clone(&shared),
                });
                vec![(client_address(), block)]
            }),
        );
        sim.set_notice_block(SIM_API, BlockNumber::API_CLUSTER);
        let mut cluster = WholeCluster {
            sim,
            spec,
            data_nodes,
            groups,
            disks,
            management,
            client,
            complete_gci: 0,
            outages: Vec::new(),
            down_since_outage: BTreeSet::new(),
            was_up: false,
            faults: Vec::new(),
            replica_checks: 0,
            lost_by_restart: 0,
            least_started: None,
            committed_before_faults: None,
            api_links_broken: false,
            stream: None,
        };
        cluster.run_checked(Duration::from_secs(2))?;
        cluster.create_tables()?;
        Ok(cluster)
    }

    pub fn client(&self) -> MutexGuard<'_, ClientState> {
        lock(&self.client)
    }

    fn membership(&self, n: NodeId) -> Option<&Membership> {
        self.sim
            .block::<Membership>(BlockRef::new(n, BlockNumber::MEMBERSHIP, 0))
    }

    /// Data nodes that are up and started.
    pub fn started(&self) -> Vec<NodeId> {
        self.data_nodes
            .iter()
            .copied()
            .filter(|n| {
                !self.sim.is_paused(*n)
                    && self
                        .membership(*n)
                        .is_some_and(|m| m.phase() == Phase::Started)
            })
            .collect()
    }

    fn create_tables(&mut self) -> Result<(), String> {
        let dict = BlockRef::new(self.data_nodes[0], BlockNumber::DICTIONARY, 0);
        for (i, kind) in TableKind::ALL.into_iter().enumerate() {
            let table = kind.definition(self.spec.partitions);
            self.sim.send_as(Signal {
                receiver: dict,
                sender: client_address(),
                body: SignalBody::DictCreateTableReq {
                    request_id: 1 + i as u32,
                    table: table.to_bytes(),
                },
            });
            self.run_checked(Duration::from_millis(300))?;
            self.sim.send_as(Signal {
                receiver: dict,
                sender: client_address(),
                body: SignalBody::DictGetTableReq {
                    request_id: 100 + i as u32,
                    table_id: 0,
                    name: kind.name().into(),
                },
            });
            self.run_checked(Duration::from_millis(20))?;
            let answers = std::mem::take(&mut self.client().dict_answers);
            let table = answers
                .into_iter()
                .find_map(|b| match b {
                    SignalBody::DictGetTableConf { group, .. } => {
                        group.tables.first().and_then(|t| TableDef::decode(t).ok())
                    }
                    _ => None,
                })
                .ok_or(format!("table {} was not created", kind.name()))?;
            self.client().tables.insert(kind, table);
        }
        Ok(())
    }

    /// Runs for `duration`, checking the running invariants every
    /// [`CHECK_INTERVAL`]; stops at the first violation.
    pub fn run_checked(&mut self, duration: Duration) -> Result<(), String> {
        let until = self.sim.now() + duration;
        while self.sim.now() < until {
            let next = self.sim.now() + CHECK_INTERVAL;
            self.sim.run_until(if next < until { next } else { until });
            self.check_running()?;
        }
        Ok(())
    }

    fn check_running(&mut self) -> Result<(), String> {
        check_no_split_brain(&self.sim, &self.data_nodes)?;
        let mut complete_epochs = Vec::new();
        for &n in &self.data_nodes {
            if let Some(tc) = self.sim.block::<TcBlock>(tc_of(n)) {
                self.complete_gci = self.complete_gci.max(tc.durable_gci());
                complete_epochs.push((n, tc.complete_epoch()));
            }
        }
        let started = self.started().len();
        if let Some(least) = &mut self.least_started {
            *least = (*least).min(started);
        }
        let up = started > 0;
        if self.was_up && !up {
            self.outages.push(Outage {
                at: self.sim.now(),
                complete_gci: self.complete_gci,
                restart_gci: None,
            });
            self.down_since_outage.clear();
            self.client().after_outages = self.outages.len();
            let mut client = self.client();
            let era = client.epochs.era + 1;
            client.epochs = EpochOrder {
                era,
                checked: client.epochs.checked,
                ..EpochOrder::default()
            };
        }
        if up {
            // A restarted node's TC starts again from 0; the epochs it gets
            // are above those reported before (a GCI is never handed out
            // twice but across a system restart), so the highest stays.
            let mut client = self.client();
            for (n, complete) in complete_epochs {
                let seen = client.epochs.complete.entry(n).or_insert(0);
                *seen = (*seen).max(complete);
            }
        }
        self.was_up = up;
        self.note_restart_gci()?;
        let client = self.client();
        if let Some(v) = client.violations.first() {
            return Err(format!("seed {}: {v}", self.sim.seed()));
        }
        Ok(())
    }

    /// One request of the harness through the client, to its answer.
    fn request(&mut self, flags: u32, ops: Vec<u8>) -> Result<Result<(u32, Vec<u8>), u32>, String> {
        let tc = {
            let client = self.client();
            let started = self.started();
            started
                .iter()
                .copied()
                .find(|n| client.connected.contains(n))
                .ok_or("no started data node the client is connected to")?
        };
        let tx_id = {
            let mut client = self.client();
            let tx_id = client.tx_id();
            let floor = client.epochs.floor(tc);
            client.inflight.insert(
                tx_id,
                InFlight {
                    tc,
                    sent: self.sim.now(),
                    work: Work::Probe,
                    floor,
                },
            );
            tx_id
        };
        self.sim.send_as(Signal {
            receiver: tc_of(tc),
            sender: client_address(),
            body: SignalBody::TcKeyReq { tx_id, flags, ops },
        });
        let until = self.sim.now() + REQUEST_TIMEOUT * 2;
        while self.sim.now() < until {
            self.run_checked(Duration::from_millis(1))?;
            if let Some(answer) = self.client().probes.remove(&tx_id) {
                return Ok(answer);
            }
        }
        Err(format!("probe {tx_id:#x} on node {tc}: no answer"))
    }

    /// Committed reads of `keys` of table `kind`, retrying temporary errors.
    pub fn read(&mut self, kind: TableKind, keys: &[i64]) -> Result<Vec<Option<i64>>, String> {
        let mut last = String::new();
        for _ in 0..20 {
            let ops: Vec<(OpKind, i64, i64, LockMode)> = keys
                .iter()
                .map(|&k| (OpKind::Read, k, 0, LockMode::Committed))
                .collect();
            let ops = self.client().batch(kind, &ops);
            match self.request(tc_flags::START | tc_flags::COMMIT, ops)? {
                Ok((_, results)) if temporary_op_error(&results).is_some() => {
                    let code = temporary_op_error(&results).unwrap_or_default();
                    last = format!("op error {code}");
                    self.run_checked(Duration::from_millis(50))?;
                }
                Ok((_, results)) => return read_values(&results),
                Err(code) if error::class(code) == ErrorClass::Temporary => {
                    last = format!("error {code}");
                    self.run_checked(Duration::from_millis(50))?;
                }
                Err(code) => return Err(format!("reads of {} answered {code}", kind.name())),
            }
        }
        Err(format!(
            "reads of {} refused 20 times, last {last}",
            kind.name()
        ))
    }

    /// Inserts the accounts with their initial balance and waits until they
    /// are durable cluster-wide; then the client starts its workload.
    pub fn start_workload(&mut self) -> Result<(), String> {
        let accounts = self.spec.accounts;
        for _ in 0..20 {
            let ops: Vec<(OpKind, i64, i64, LockMode)> = (0..accounts)
                .map(|a| {
                    (
                        OpKind::Write,
                        i64::from(a),
                        INITIAL_BALANCE,
                        LockMode::Exclusive,
                    )
                })
                .collect();
            let ops = self.client().batch(TableKind::Accounts, &ops);
            if let Ok((flags, _)) = self.request(tc_flags::START | tc_flags::COMMIT, ops)? {
                if flags & tc_flags::COMMITTED != 0 {
                    let target = self.complete_gci + 2;
                    let until = self.sim.now() + Duration::from_secs(5);
                    while self.complete_gci < target && self.sim.now() < until {
                        self.run_checked(CHECK_INTERVAL)?;
                    }
                    if self.spec.subscriber {
                        self.start_subscriber()?;
                    }
                    self.client().running = true;
                    return Ok(());
                }
            }
            self.run_checked(Duration::from_millis(100))?;
        }
        Err(format!(
            "seed {}: the accounts could not be inserted",
            self.sim.seed()
        ))
    }

    /// Subscribes the API node to the workload's tables and waits until
    /// every data node answered (from an epoch after the accounts'
    /// insert: the history the stream is checked against starts there).
    fn start_subscriber(&mut self) -> Result<(), String> {
        // Acknowledging 0 to 3 epochs behind what it handed out: a
        // take-over's resend then holds epochs the API has.
        let lag = Rng::seeded(self.sim.seed() ^ 0x5ab5_c41b).below(4) as usize;
        {
            let mut client = self.client();
            let subscriber = Subscriber::new(&client.tables, self.groups.clone(), lag);
            client.subscriber = Some(subscriber);
        }
        let until = self.sim.now() + Duration::from_secs(5);
        while !self.subscriber_started() {
            if self.sim.now() >= until {
                return Err(format!(
                    "seed {}: the subscription did not start",
                    self.sim.seed()
                ));
            }
            self.run_checked(CHECK_INTERVAL)?;
        }
        Ok(())
    }

    fn subscriber_started(&self) -> bool {
        self.client()
            .subscriber
            .as_ref()
            .is_some_and(Subscriber::started)
    }

    /// The committed history the stream must hold, and the transactions
    /// whose outcome is unknown (each row write: table, key, `v` after).
    fn history(&self) -> (Vec<CommittedTx>, Vec<Vec<RowWrite>>) {
        let client = self.client();
        let mut committed = Vec::new();
        let mut unknown = Vec::new();
        let transfer_writes = |i: usize, t: &Transfer| -> Vec<RowWrite> {
            let Some((from, to)) = t.read else {
                return Vec::new();
            };
            vec![
                (TableKind::Accounts, i64::from(t.from), from - t.amount),
                (TableKind::Accounts, i64::from(t.to), to + t.amount),
                (TableKind::Kv, LEDGER_BASE + i as i64, t.amount),
            ]
        };
        // A row has one write in flight at a time, so its writes in the
        // order they were started are its commit order.
        for (i, t) in client.transfers.iter().enumerate() {
            match (t.outcome, t.after_outages) {
                (Outcome::Committed { epoch }, Some(era)) => committed.push(CommittedTx {
                    era,
                    epoch,
                    writes: transfer_writes(i, t),
                }),
                // A late answer settled it, with no era: as unknown.
                (Outcome::Committed { .. } | Outcome::Unknown, _) => {
                    unknown.push(transfer_writes(i, t));
                }
                _ => {}
            }
        }
        for u in &client.upserts {
            let writes = vec![(TableKind::Kv, u.key, u.value)];
            match (u.outcome, u.after_outages) {
                (Outcome::Committed { epoch }, Some(era)) => {
                    committed.push(CommittedTx { era, epoch, writes });
                }
                (Outcome::Committed { .. } | Outcome::Unknown, _) => unknown.push(writes),
                _ => {}
            }
        }
        (committed, unknown)
    }

    /// The stream check (quiet, settled): waits until the subscription
    /// handed out every epoch the current era committed in, then compares
    /// its record with the history ([`check_stream`]) and judges its gaps:
    /// docs/events.md produces one only when no node of a bucket's node
    /// group is left to send it — one replica and its node gone, the
    /// whole cluster down, or the API's connection to every node of the
    /// group closed — so any other is a bug.
    fn check_subscriber(&mut self) -> Result<(), String> {
        let seed = self.sim.seed();
        let (committed, unknown) = self.history();
        let era = self.outages.len();
        let target = committed
            .iter()
            .filter(|t| t.era == era)
            .map(|t| t.epoch)
            .max()
            .unwrap_or(0);
        let caught_up = |c: &WholeCluster| {
            c.client()
                .subscriber
                .as_ref()
                .is_some_and(|s| s.caught_up(era, target))
        };
        let until = self.sim.now() + DRAIN_MAX;
        while !caught_up(self) && self.sim.now() < until {
            self.run_checked(CHECK_INTERVAL)?;
        }
        let stalled = !caught_up(self);
        let client = self.client();
        let subscriber = client.subscriber.as_ref().ok_or("no subscriber")?;
        if stalled {
            let last = subscriber.segments.last();
            return Err(format!(
                "seed {seed}: the stream stalls: the last subscription {:?} handed out up to {:#x}, commits went to {target:#x}",
                last.map(|s| (s.sub_id, s.start, &s.gap)),
                last.map_or(0, |s| s.last())
            ));
        }
        let checked = check_stream(&subscriber.segments, &committed, &unknown)
            .map_err(|e| format!("seed {seed}: stream: {e}"))?;
        for segment in &subscriber.segments {
            if let Some(mark) = &segment.restart {
                // What the restart kept: every epoch of the GCI an
                // outage's system restart restored (where the harness saw
                // it; else at least the GCI reported complete before).
                let gci = (mark.restored >> 32) as u32;
                let restored = self.outages.iter().any(|o| match o.restart_gci {
                    Some(r) => r == gci,
                    None => gci >= o.complete_gci,
                });
                if !restored || mark.restored as u32 != u32::MAX {
                    return Err(format!(
                        "seed {seed}: subscription {} went on through a restart that kept up to \
                         {:#x}, outages {:?}",
                        segment.sub_id, mark.restored, self.outages
                    ));
                }
            }
            let Some((from, to, cause)) = &segment.gap else {
                continue;
            };
            let explained = match cause {
                GapCause::GroupGone { .. } => {
                    self.spec.replicas == 1 || !self.outages.is_empty() || self.api_links_broken
                }
                GapCause::Node { .. } => false,
                // Every node of a group restarted since the subscription
                // began and the cluster restarted more than once before it
                // could go on, or this API was away longer than the nodes
                // keep a subscription.
                GapCause::Lost { .. } => {
                    self.spec.replicas == 1 || !self.outages.is_empty() || self.api_links_broken
                }
            };
            if !explained {
                return Err(format!(
                    "seed {seed}: subscription {} ended with a gap {from:#x}..{to:#x} ({cause:?}) that \
                     docs/events.md does not produce: {} replicas, outages {:?}, API links broken {}; \
                     the subscriber then: {}",
                    segment.sub_id,
                    self.spec.replicas,
                    self.outages,
                    self.api_links_broken,
                    segment.ended_as
                ));
            }
        }
        drop(client);
        self.stream = Some(checked);
        Ok(())
    }

    /// Whether every data node is up, started and serving, none starting.
    fn settled(&self) -> bool {
        let started = self.started();
        if started.len() != self.data_nodes.len() {
            return false;
        }
        let all_serving = started.iter().all(|&n| {
            self.sim
                .block::<Distribution>(Distribution::address(n))
                .and_then(|d| d.node_states())
                .is_some_and(|s| self.data_nodes.iter().all(|m| s.serving.contains(*m)))
        });
        all_serving
            && started.iter().all(|&n| {
                (0..self.spec.ldm_instances).all(|i| {
                    self.sim
                        .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                        .is_some_and(|l| l.is_open() && !l.is_starting())
                })
            })
    }

    /// Restarts nodes that are down (as their angels would) and waits until
    /// every data node serves again.
    pub fn settle(&mut self) -> Result<(), String> {
        let until = self.sim.now() + SETTLE_MAX;
        let mut next_restart = self.sim.now();
        while !self.settled() {
            if self.sim.now() >= until {
                return Err(format!(
                    "seed {}: the cluster does not settle: {}",
                    self.sim.seed(),
                    self.describe()
                ));
            }
            if self.sim.now() >= next_restart {
                for node in self.data_nodes.clone() {
                    if !self.sim.is_up(node) {
                        self.sim.restart(node);
                    }
                }
                next_restart = self.sim.now() + Duration::from_secs(1);
            }
            self.run_checked(Duration::from_millis(50))?;
        }
        Ok(())
    }

    /// A quiet point: stop starting work, let what is in flight end, compare
    /// the replicas, go on.
    pub fn quiet_check(&mut self) -> Result<(), String> {
        self.client().running = false;
        let until = self.sim.now() + DRAIN_MAX;
        while self.client().in_flight() > 0 && self.sim.now() < until {
            self.run_checked(Duration::from_millis(5))?;
        }
        if self.client().in_flight() > 0 {
            return Err(format!(
                "seed {}: transactions do not end: {}",
                self.sim.seed(),
                self.describe()
            ));
        }
        // Commits and aborts reach every replica after the answer.
        let until = self.sim.now() + DRAIN_MAX;
        while !self.ldms_idle() && self.sim.now() < until {
            self.run_checked(Duration::from_millis(5))?;
        }
        if !self.ldms_idle() {
            return Err(format!(
                "seed {}: LDM transactions are left: {}",
                self.sim.seed(),
                self.describe()
            ));
        }
        self.check_replicas()?;
        self.client().running = true;
        Ok(())
    }

    fn ldms_idle(&self) -> bool {
        self.started().iter().all(|&n| {
            (0..self.spec.ldm_instances).all(|i| {
                self.sim
                    .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                    .is_some_and(|l| l.transactions() == 0)
            })
        })
    }

    /// The replicas of every partition hold the same committed rows (call
    /// when settled and quiet).
    pub fn check_replicas(&mut self) -> Result<(), String> {
        let seed = self.sim.seed();
        type Images = BTreeMap<(u32, u32), Vec<Vec<u8>>>;
        let images = |n: NodeId| -> Images {
            let mut out = BTreeMap::new();
            for i in 0..self.spec.ldm_instances {
                let Some(storage) = self
                    .sim
                    .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                    .and_then(|l| l.storage())
                else {
                    continue;
                };
                for (t, f) in storage.fragment_ids() {
                    if let Some(rows) = storage.committed_row_images(t, f) {
                        out.insert((t, f), rows);
                    }
                }
            }
            out
        };
        for group in &self.groups {
            let up: Vec<NodeId> = group
                .iter()
                .copied()
                .filter(|n| self.sim.is_up(*n))
                .collect();
            let Some(&first) = up.first() else {
                continue;
            };
            let reference = images(first);
            for &other in &up[1..] {
                let theirs = images(other);
                for (key, rows) in &reference {
                    let other_rows = theirs.get(key);
                    if other_rows != Some(rows) {
                        return Err(format!(
                            "seed {seed}: table {} fragment {}: node {first} holds {} rows, node {other} {:?}",
                            key.0,
                            key.1,
                            rows.len(),
                            other_rows.map(Vec::len)
                        ));
                    }
                }
                if theirs.len() != reference.len() {
                    return Err(format!(
                        "seed {seed}: node {first} has {} fragments, node {other} {}",
                        reference.len(),
                        theirs.len()
                    ));
                }
            }
        }
        self.replica_checks += 1;
        Ok(())
    }

    /// A line per data node: up, phase, serving, LDM and TC load.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for &n in &self.data_nodes {
            let phase = self.membership(n).map(|m| m.phase());
            let states = self
                .sim
                .block::<Distribution>(Distribution::address(n))
                .and_then(|d| d.node_states());
            let _ = write!(
                out,
                "\n  node {n}: up {} paused {} phase {phase:?} states {states:?}",
                self.sim.is_up(n),
                self.sim.is_paused(n)
            );
            if let Some(tc) = self.sim.block::<TcBlock>(tc_of(n)) {
                let _ = write!(out, " tc txs {}", tc.transactions_in_use());
            }
            if let Some(membership) = self.membership(n) {
                let _ = write!(out, "\n    membership: {}", membership.describe());
            }
            for i in 0..self.spec.ldm_instances {
                if let Some(l) = self.sim.block::<LdmBlock<SimDisk>>(ldm_of(n, i)) {
                    let _ = write!(
                        out,
                        " ldm{i} open {} starting {} txs {}",
                        l.is_open(),
                        l.is_starting(),
                        l.transactions()
                    );
                }
            }
        }
        let client = self.client();
        let _ = write!(
            out,
            "\n  client: in flight {} connected {:?}",
            client.in_flight(),
            client.connected
        );
        out
    }

    /// Fills in the restart GCI of the last outage once a system restart
    /// after it restored one.
    fn note_restart_gci(&mut self) -> Result<(), String> {
        let Some(last) = self.outages.last() else {
            return Ok(());
        };
        if last.restart_gci.is_some() {
            return Ok(());
        }
        for &n in &self.data_nodes {
            if !self.sim.is_up(n) {
                self.down_since_outage.insert(n);
                continue;
            }
            if !self.down_since_outage.contains(&n) {
                continue;
            }
            let address = Distribution::address(n);
            if let Some(r) = self
                .sim
                .block::<Distribution>(address)
                .and_then(Distribution::restart_gci)
            {
                let last = self.outages.last_mut().expect("checked");
                if r < last.complete_gci {
                    return Err(format!(
                        "seed {}: node {n} restarted the cluster to GCI {r}, below GCI {} reported complete \
                         before the outage",
                        self.sim.seed(),
                        last.complete_gci
                    ));
                }
                last.restart_gci = Some(r);
                return Ok(());
            }
        }
        Ok(())
    }

    /// What a system restart did to a commit acknowledged with `gci` after
    /// `after_outages` outages (`None`: unknown when). Judged by the first outage
    /// after the commit: a later restart restores at least as much (its
    /// restart GCI is the highest any node kept). With the exact check, a
    /// commit at or below that outage's restart GCI survives and one above
    /// is gone; without it (or with the restart GCI unknown), one at or
    /// below the GCI reported complete before the outage survives and one
    /// above may or may not.
    fn fate(&self, gci: u32, after_outages: Option<usize>) -> Fate {
        let next = match after_outages {
            Some(e) => self.outages.get(e),
            // The most cautious: any outage may have come after it.
            None => self.outages.iter().min_by_key(|o| o.complete_gci),
        };
        let Some(outage) = next else {
            return Fate::Survives;
        };
        match outage.restart_gci {
            Some(r) if self.spec.exact_system_restart && after_outages.is_some() => {
                if gci <= r {
                    Fate::Survives
                } else {
                    Fate::Gone
                }
            }
            _ if gci <= outage.complete_gci => Fate::Survives,
            _ => Fate::Maybe,
        }
    }

    /// The final checks: every committed write is there, aborted ones left
    /// no trace, the balances are the model's, the replicas agree.
    pub fn check_final(&mut self) -> Result<(), String> {
        let seed = self.sim.seed();
        self.client().running = false;
        self.settle()?;
        self.quiet_check()?;
        self.client().running = false;
        let (transfers, upserts, late, tx_work, accounts, kv_keys) = {
            let c = self.client();
            (
                c.transfers.clone(),
                c.upserts.clone(),
                c.late.clone(),
                c.tx_work.clone(),
                c.accounts,
                c.kv_keys,
            )
        };
        // Late final answers settle unknown outcomes.
        let mut transfers = transfers;
        let mut upserts = upserts;
        for (tx_id, outcome) in &late {
            match tx_work.get(tx_id) {
                Some(Work::TransferCommit(i) | Work::TransferRead(i))
                    if transfers[*i].outcome == Outcome::Unknown =>
                {
                    transfers[*i].outcome = *outcome;
                }
                Some(Work::Upsert(i)) if upserts[*i].outcome == Outcome::Unknown => {
                    upserts[*i].outcome = *outcome
                }
                _ => {}
            }
        }
        let ledger_keys: Vec<i64> = (0..transfers.len() as i64)
            .map(|i| LEDGER_BASE + i)
            .collect();
        let mut ledger = Vec::new();
        for chunk in ledger_keys.chunks(200) {
            ledger.extend(self.read(TableKind::Kv, chunk)?);
        }
        let mut balances: Vec<i64> = vec![INITIAL_BALANCE; accounts as usize];
        for (i, t) in transfers.iter().enumerate() {
            let present = ledger[i].is_some();
            // The durability invariant: what `TcWaitGciReq` answered
            // durable is here after every restart, and what it answered
            // lost is not.
            match t.durable {
                Some(true) if !present => {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?} was answered durable (TcWaitGciConf), its ledger row is gone \
                         after the restarts (outages {:?})",
                        self.outages
                    ));
                }
                Some(false) if present => {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?} was answered lost by a system restart (TcWaitGciRef), \
                         its ledger row is there (outages {:?})",
                        self.outages
                    ));
                }
                _ => {}
            }
            match t.outcome {
                Outcome::Committed { epoch }
                    if !present
                        && self.fate(epoch::hi(epoch), t.after_outages) == Fate::Survives =>
                {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?} committed, its ledger row is gone (outages {:?})",
                        self.outages
                    ));
                }
                Outcome::Committed { epoch }
                    if present && self.fate(epoch::hi(epoch), t.after_outages) == Fate::Gone =>
                {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?} above the restart GCI survived (outages {:?})",
                        self.outages
                    ));
                }
                Outcome::Committed { epoch }
                    if self.fate(epoch::hi(epoch), t.after_outages) == Fate::Gone =>
                {
                    self.lost_by_restart += 1;
                }
                Outcome::Aborted { .. } if present => {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?} was refused, but its ledger row is there"
                    ));
                }
                Outcome::Pending => {
                    return Err(format!("seed {seed}: transfer {i} {t:?} never ended"))
                }
                _ => {}
            }
            if present {
                if ledger[i] != Some(t.amount) {
                    return Err(format!(
                        "seed {seed}: transfer {i} {t:?}: ledger reads {:?}",
                        ledger[i]
                    ));
                }
                balances[t.from as usize] -= t.amount;
                balances[t.to as usize] += t.amount;
            }
        }
        let keys: Vec<i64> = (0..i64::from(accounts)).collect();
        let got = self.read(TableKind::Accounts, &keys)?;
        for (a, (got, want)) in got.iter().zip(&balances).enumerate() {
            if *got != Some(*want) {
                return Err(format!(
                    "seed {seed}: account {a} reads {got:?}, the committed transfers make {want}"
                ));
            }
        }
        // Each key: the value of its last surviving write, among those that
        // may have survived after the last one sure to.
        let keys: Vec<i64> = (0..i64::from(kv_keys)).collect();
        let got = self.read(TableKind::Kv, &keys)?;
        for (&key, got) in keys.iter().zip(&got) {
            let mut possible: BTreeSet<Option<i64>> = BTreeSet::from([None]);
            for u in upserts.iter().filter(|u| u.key == key) {
                match u.outcome {
                    Outcome::Committed { epoch } => {
                        match self.fate(epoch::hi(epoch), u.after_outages) {
                            Fate::Survives => possible = BTreeSet::from([Some(u.value)]),
                            Fate::Maybe => {
                                possible.insert(Some(u.value));
                            }
                            Fate::Gone => self.lost_by_restart += 1,
                        }
                    }
                    Outcome::Unknown => {
                        possible.insert(Some(u.value));
                    }
                    Outcome::Aborted { .. } | Outcome::Pending => {}
                }
            }
            if !possible.contains(got) {
                return Err(format!(
                    "seed {seed}: kv key {key} reads {got:?}, may be one of {possible:?}"
                ));
            }
        }
        if self.spec.subscriber {
            self.check_subscriber()?;
        }
        self.check_agreement()
    }

    /// Every up data node is started and all hold one view of exactly them.
    pub fn check_agreement(&self) -> Result<(), String> {
        let seed = self.sim.seed();
        let mut reference: Option<(NodeId, Vec<NodeId>)> = None;
        for &n in &self.data_nodes {
            if !self.sim.is_up(n) {
                continue;
            }
            let m = self
                .membership(n)
                .ok_or(format!("seed {seed}: node {n} has no membership"))?;
            let view = m.view().filter(|_| m.phase() == Phase::Started);
            let Some(view) = view else {
                return Err(format!("seed {seed}: node {n} is up but {:?}", m.phase()));
            };
            let mut members = view.members.clone();
            members.sort();
            match &reference {
                None => reference = Some((n, members)),
                Some((first, theirs)) if *theirs != members => {
                    return Err(format!(
                        "seed {seed}: node {first} has view {theirs:?}, node {n} {members:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// What a system restart did to a commit (`WholeCluster::fate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Survives,
    Gone,
    Maybe,
}

/// The fault kinds of a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    NodeCrash,
    SystemRestart,
    Isolate,
    Split,
    LatencySpikes,
    LinkBreaks,
    DiskWriteFailure,
    Pause,
}

impl FaultKind {
    pub const ALL: [FaultKind; 8] = [
        FaultKind::NodeCrash,
        FaultKind::SystemRestart,
        FaultKind::Isolate,
        FaultKind::Split,
        FaultKind::LatencySpikes,
        FaultKind::LinkBreaks,
        FaultKind::DiskWriteFailure,
        FaultKind::Pause,
    ];
}

/// What a whole-cluster run did and whether its checks held.
#[derive(Debug)]
pub struct WholeReport {
    pub seed: u64,
    pub data_nodes: u8,
    pub replicas: u8,
    pub steps: u64,
    pub sim_time: Duration,
    pub trace_hash: u64,
    pub faults: Vec<String>,
    pub kinds: Vec<FaultKind>,
    pub stats: WorkloadStats,
    pub replica_checks: u32,
    /// The cluster outages, with the GCI each system restart restored.
    pub outages: Vec<Outage>,
    /// See [`WholeCluster::lost_by_restart`].
    pub lost_by_restart: u32,
    /// The fewest data nodes started at once from the workload's start to
    /// the end (0: the cluster was down).
    pub least_started: usize,
    /// Commits acknowledged after the first fault began.
    pub committed_after_faults: u64,
    /// The switches the run had on: part of what replays it.
    pub adversary: Adversary,
    /// How often each buggify point fired, by "file:line".
    pub buggify_fired: BTreeMap<String, u64>,
    /// Signals a down node had in flight that arrived late (the
    /// adversary's `late_signals`), by name.
    pub late_signals: BTreeMap<&'static str, u64>,
    /// What the stream check compared (with the subscriber, once the
    /// final check reached it).
    pub stream: Option<StreamChecked>,
    pub result: Result<(), String>,
}

/// The shape of the cluster for `seed`: 2×2, 4×2, or (less often) 1, 3 or
/// 4 nodes with 1–3 replicas; and its `TimeBetweenEpochs`: 0, 10, 20 or
/// 50 ms.
pub fn spec_for_seed(seed: u64) -> WholeSpec {
    let mut choose = Rng::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xc1u64);
    let (data_nodes, replicas) = match choose.below(8) {
        0..=2 => (2, 2),
        3..=4 => (4, 2),
        5 => (3, 3),
        6 => (2, 1),
        _ => (4, 1),
    };
    // Micro-GCPs in most runs, some without (TimeBetweenEpochs = 0).
    let epoch_interval_ms = [0, 10, 20, 50][choose.below(4) as usize];
    WholeSpec {
        data_nodes,
        replicas,
        epoch_interval: Duration::from_millis(epoch_interval_ms),
        ..WholeSpec::default()
    }
}

/// What a whole-cluster run does besides its seed.
#[derive(Clone, Debug)]
pub struct ScenarioOptions {
    pub rounds: u32,
    /// Stop starting rounds after this many simulation steps.
    pub steps_max: u64,
    /// The fault kinds a round picks from (from the seed).
    pub kinds: Vec<FaultKind>,
    /// (data nodes, replicas); `None`: chosen from the seed.
    pub shape: Option<(u8, u8)>,
    pub trace: bool,
    /// Per thread-pair order and buggify; off by default (the seeds kept as
    /// tests were found without), on in `skarv sim`.
    pub adversary: Adversary,
    /// [`WholeSpec::subscriber`]: off by default (the seeds kept as tests
    /// were found without).
    pub subscriber: bool,
}

impl Default for ScenarioOptions {
    fn default() -> Self {
        ScenarioOptions {
            rounds: 3,
            steps_max: 5_000_000,
            kinds: FaultKind::ALL.to_vec(),
            shape: None,
            trace: false,
            adversary: Adversary::default(),
            subscriber: false,
        }
    }
}

impl FaultKind {
    /// The name `skarv sim --faults` takes.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::NodeCrash => "node-crash",
            FaultKind::SystemRestart => "system-restart",
            FaultKind::Isolate => "isolate",
            FaultKind::Split => "split",
            FaultKind::LatencySpikes => "latency",
            FaultKind::LinkBreaks => "link-break",
            FaultKind::DiskWriteFailure => "disk-full",
            FaultKind::Pause => "pause",
        }
    }

    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One whole-cluster run for `seed`: start, workload, rounds of faults
/// from `options.kinds`, checks. Returns the report and, with
/// `options.trace`, every step.
pub fn whole_scenario(seed: u64, options: &ScenarioOptions) -> (WholeReport, Vec<String>) {
    let (rounds, steps_max, trace) = (options.rounds, options.steps_max, options.trace);
    let mut spec = spec_for_seed(seed);
    if let Some((data_nodes, replicas)) = options.shape {
        spec.data_nodes = data_nodes;
        spec.replicas = replicas;
    }
    spec.adversary = options.adversary;
    spec.subscriber = options.subscriber;
    let (data_nodes, replicas) = (spec.data_nodes, spec.replicas);
    let mut kinds = Vec::new();
    let (result, cluster) = match WholeCluster::new(seed, spec) {
        Err(e) => (Err(e), None),
        Ok(mut cluster) => {
            if trace {
                cluster.sim.enable_trace();
            }
            // A block's assertion is a failed check like any other: report
            // it with the seed instead of ending the soak.
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_rounds(
                    &mut cluster,
                    seed,
                    rounds,
                    steps_max,
                    &options.kinds,
                    &mut kinds,
                )
            }));
            let result = run.unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                Err(format!("seed {seed}: a block panicked: {message}"))
            });
            (result, Some(cluster))
        }
    };
    let (steps, sim_time, trace_hash, faults, stats, replica_checks, lines) = match &cluster {
        Some(c) => (
            c.sim.steps(),
            Duration::from_nanos(c.sim.now().as_nanos()),
            c.sim.trace_hash(),
            c.faults.clone(),
            {
                let client = c.client();
                WorkloadStats {
                    epoch_checks: client.epochs_checked(),
                    ..client.stats
                }
            },
            c.replica_checks,
            c.sim.trace().to_vec(),
        ),
        None => (
            0,
            Duration::ZERO,
            0,
            Vec::new(),
            WorkloadStats::default(),
            0,
            Vec::new(),
        ),
    };
    let (outages, lost_by_restart) = cluster
        .as_ref()
        .map_or((Vec::new(), 0), |c| (c.outages.clone(), c.lost_by_restart));
    let least_started = cluster.as_ref().and_then(|c| c.least_started).unwrap_or(0);
    let buggify_fired = cluster
        .as_ref()
        .map(|c| c.sim.buggify_fired().clone())
        .unwrap_or_default();
    let late_signals = cluster
        .as_ref()
        .map(|c| c.sim.late_delivered().clone())
        .unwrap_or_default();
    let committed_after_faults = cluster
        .as_ref()
        .and_then(|c| c.committed_before_faults)
        .map_or(0, |before| stats.committed - before);
    let report = WholeReport {
        seed,
        data_nodes,
        replicas,
        steps,
        sim_time,
        trace_hash,
        faults,
        kinds,
        stats,
        replica_checks,
        outages,
        lost_by_restart,
        least_started,
        committed_after_faults,
        adversary: options.adversary,
        buggify_fired,
        late_signals,
        stream: cluster.as_ref().and_then(|c| c.stream),
        // The switches replay the seed as much as the seed does.
        result: result.map_err(|e| format!("{e} [{}]", options.adversary)),
    };
    (report, lines)
}

fn run_rounds(
    cluster: &mut WholeCluster,
    seed: u64,
    rounds: u32,
    steps_max: u64,
    allowed: &[FaultKind],
    kinds: &mut Vec<FaultKind>,
) -> Result<(), String> {
    assert!(!allowed.is_empty(), "no fault kind to choose from");
    let mut choose = Rng::seeded(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xfa017);
    cluster.start_workload()?;
    cluster.least_started = Some(cluster.started().len());
    cluster.run_checked(Duration::from_millis(200))?;
    for round in 0..rounds {
        if cluster.sim.steps() >= steps_max {
            break;
        }
        let kind = allowed[choose.below(allowed.len() as u64) as usize];
        kinds.push(kind);
        let at = Duration::from_millis(choose.below(300));
        cluster.run_checked(at)?;
        if cluster.committed_before_faults.is_none() {
            let committed = cluster.client().stats.committed;
            cluster.committed_before_faults = Some(committed);
        }
        let description = fault(cluster, &mut choose, kind)?;
        cluster.faults.push(format!("round {round}: {description}"));
        cluster
            .settle()
            .map_err(|e| format!("after {description}: {e}"))?;
        cluster.run_checked(Duration::from_millis(100))?;
        cluster
            .quiet_check()
            .map_err(|e| format!("after {description}: {e}"))?;
        if cluster.spec.subscriber {
            // A quiet point: the stream so far is checked too, with no
            // transaction started meanwhile (its changes would come
            // before its answer).
            cluster.client().running = false;
            cluster
                .check_subscriber()
                .map_err(|e| format!("after {description}: {e}"))?;
            cluster.client().running = true;
        }
        cluster.run_checked(Duration::from_millis(100))?;
    }
    cluster.check_final()
}

/// With late signals on, how long a node crash may wait for its victim to
/// have a signal to another data node in flight.
const CRASH_IN_FLIGHT_WAIT: Duration = Duration::from_millis(100);

/// With late signals on, a node crash first waits for one of these, drawn
/// by the seed, to be in flight from its victim to another data node: the
/// steps of the commit, abort, takeover and checkpoint protocols. Waiting
/// for any signal crashed nodes mostly with the most frequent one (a key
/// request) in flight; a primary's `LdmKeyCommitted` arriving after its
/// backup's outcome (3af97f7) was then never hit by random seeds.
/// (A test checks each names a signal: a renamed one would otherwise
/// silently never match.)
const CRASH_SIGNAL_KINDS: [&str; 17] = [
    "LdmKeyReq",
    "LdmKeyBatchReq",
    "LdmKeyConf",
    "LdmKeyConfBatch",
    "LdmKeyCommitReq",
    "LdmKeyCommitted",
    "LdmCommitReq",
    "LdmCommitConf",
    "LdmCommitBatchReq",
    "LdmCommitBatchConf",
    "LdmCommitChainReq",
    "LdmAbortReq",
    "LdmAbortConf",
    "LdmOutcomeReq",
    "GcpPrepareConf",
    "GcpSaveConf",
    "GcpCommitConf",
];

/// Carries out one fault and runs through it; returns its description.
fn fault(cluster: &mut WholeCluster, choose: &mut Rng, kind: FaultKind) -> Result<String, String> {
    let nodes = cluster.data_nodes.clone();
    let victim = nodes[choose.below(nodes.len() as u64) as usize];
    let detection = cluster.spec.detection_time();
    Ok(match kind {
        FaultKind::NodeCrash => {
            let mut with = String::new();
            if cluster.spec.adversary.late_signals {
                // Crash it with a signal to another data node in flight,
                // which then arrives late: one of a kind the seed draws,
                // else any (each waited for up to CRASH_IN_FLIGHT_WAIT).
                let to_another =
                    |s: &Signal| s.receiver.node != victim && nodes.contains(&s.receiver.node);
                let kind =
                    CRASH_SIGNAL_KINDS[choose.below(CRASH_SIGNAL_KINDS.len() as u64) as usize];
                let until = cluster.sim.now() + CRASH_IN_FLIGHT_WAIT;
                if cluster
                    .sim
                    .run_until_in_flight(victim, until, |s| to_another(s) && s.body.name() == kind)
                {
                    with = format!(" with {kind} in flight");
                } else {
                    let until = cluster.sim.now() + CRASH_IN_FLIGHT_WAIT;
                    cluster.sim.run_until_in_flight(victim, until, to_another);
                }
                cluster.check_running()?;
            }
            let report = cluster.disks[&victim].crash();
            cluster.sim.crash(victim);
            let down = Duration::from_millis(choose.below(1500));
            cluster.run_checked(down)?;
            cluster.sim.restart(victim);
            format!(
                "crash node {victim}{with} (disk: {} kept, {} torn, {} lost), restart after {} ms",
                report.kept,
                report.torn,
                report.lost,
                down.as_millis()
            )
        }
        FaultKind::SystemRestart => {
            for &n in &nodes {
                cluster.disks[&n].crash();
                cluster.sim.crash(n);
            }
            let down = Duration::from_millis(choose.below(500));
            cluster.run_checked(down)?;
            for &n in &nodes {
                cluster.sim.restart(n);
            }
            format!(
                "crash every data node, restart after {} ms (system restart)",
                down.as_millis()
            )
        }
        FaultKind::Isolate => {
            cluster.sim.isolate(victim);
            let for_ = detection + Duration::from_millis(choose.below(1000));
            cluster.run_checked(for_)?;
            cluster.sim.heal();
            format!("isolate node {victim} for {} ms, heal", for_.as_millis())
        }
        FaultKind::Split => {
            let (mut a, mut b): (Vec<NodeId>, Vec<NodeId>) =
                nodes.iter().copied().partition(|_| choose.chance(1, 2));
            if a.is_empty() {
                a.push(b.pop().expect("two nodes at least"));
            } else if b.is_empty() {
                b.push(a.pop().expect("two nodes at least"));
            }
            if b.is_empty() {
                // One data node: a split of it from the arbitrator.
                cluster.sim.partition(a[0], SIM_MGMD);
            }
            for x in &a {
                for y in &b {
                    cluster.sim.partition(*x, *y);
                }
            }
            let cut_off = choose.chance(1, 3);
            if cut_off {
                for x in &a {
                    cluster.sim.partition(*x, SIM_MGMD);
                }
            }
            let for_ = detection + cluster.spec.arbitration_timeout * 2;
            cluster.run_checked(for_)?;
            cluster.sim.heal();
            format!(
                "split {a:?} | {b:?}{}, heal after {} ms",
                if cut_off {
                    " (the first side cut off from the arbitrator)"
                } else {
                    ""
                },
                for_.as_millis()
            )
        }
        FaultKind::LatencySpikes => {
            let mut links = Vec::new();
            let mut all = nodes.clone();
            all.push(SIM_API);
            for _ in 0..1 + choose.below(4) {
                let from = all[choose.below(all.len() as u64) as usize];
                let to = all[choose.below(all.len() as u64) as usize];
                if from != to {
                    let extra = Duration::from_micros(500 + choose.below(30_000));
                    cluster.sim.delay_link(from, to, extra);
                    links.push(format!("{from}->{to} +{} us", extra.as_micros()));
                }
            }
            let for_ = Duration::from_millis(200 + choose.below(800));
            cluster.run_checked(for_)?;
            cluster.sim.clear_delays();
            format!("latency spikes {links:?} for {} ms", for_.as_millis())
        }
        FaultKind::LinkBreaks => {
            let mut broken = Vec::new();
            let mut all = nodes.clone();
            all.push(SIM_API);
            for _ in 0..1 + choose.below(3) {
                let a = all[choose.below(all.len() as u64) as usize];
                let b = all[choose.below(all.len() as u64) as usize];
                if a != b && cluster.sim.connected(a, b) {
                    cluster.api_links_broken |= a == SIM_API || b == SIM_API;
                    cluster.sim.break_link(a, b);
                    broken.push(format!("{a}-{b}"));
                }
                cluster.run_checked(Duration::from_millis(choose.below(50)))?;
            }
            format!("break links {broken:?}")
        }
        FaultKind::DiskWriteFailure => {
            let budget = choose.below(256 << 10);
            cluster.disks[&victim].fail_writes_after(budget);
            let until = cluster.sim.now() + Duration::from_secs(5);
            let before = cluster
                .sim
                .summary(victim)
                .map(|s| s.shutdowns)
                .unwrap_or(0);
            while cluster.sim.now() < until
                && cluster
                    .sim
                    .summary(victim)
                    .is_some_and(|s| s.shutdowns == before)
            {
                cluster.run_checked(CHECK_INTERVAL)?;
            }
            let summary = cluster.sim.summary(victim).expect("a data node");
            cluster.disks[&victim].clear_faults();
            if summary.shutdowns == before {
                format!("disk of node {victim} fails after {budget} bytes: not reached in 5 s")
            } else {
                let reason = summary.down_reason.unwrap_or_default();
                if !reason.starts_with("shutdown:") || reason.len() < 20 {
                    return Err(format!(
                        "seed {}: node {victim} stopped on a disk failure without a clear reason: {reason:?}",
                        cluster.sim.seed()
                    ));
                }
                format!("disk of node {victim} fails after {budget} bytes: it stopped ({reason})")
            }
        }
        FaultKind::Pause => {
            let incarnation = cluster
                .sim
                .summary(victim)
                .map(|s| s.incarnation)
                .unwrap_or(0);
            cluster.sim.pause(victim);
            let long = choose.chance(2, 3);
            let for_ = if long {
                detection * 2 + Duration::from_millis(choose.below(1000))
            } else {
                Duration::from_millis(
                    choose.below(cluster.spec.heartbeat_interval.as_millis() as u64),
                )
            };
            cluster.run_checked(for_)?;
            let others: Vec<NodeId> = cluster.started();
            let excluded = !others.is_empty()
                && others.iter().all(|&o| {
                    cluster
                        .membership(o)
                        .and_then(|m| m.view())
                        .is_some_and(|v| !v.contains(victim))
                });
            cluster.sim.resume(victim);
            cluster.run_checked(detection)?;
            if excluded {
                // Declared dead: it must not go on in its old view.
                let now = cluster
                    .sim
                    .summary(victim)
                    .map(|s| s.incarnation)
                    .unwrap_or(0);
                let in_old_view = now == incarnation
                    && cluster
                        .membership(victim)
                        .is_some_and(|m| m.phase() == Phase::Started)
                    && cluster.started().iter().any(|&o| {
                        o != victim
                            && cluster
                                .membership(o)
                                .and_then(|m| m.view())
                                .is_some_and(|v| !v.contains(victim))
                    });
                if in_old_view {
                    return Err(format!(
                        "seed {}: node {victim}, paused and declared dead, goes on as if nothing happened",
                        cluster.sim.seed()
                    ));
                }
            }
            format!(
                "pause node {victim} for {} ms{}",
                for_.as_millis(),
                if excluded { " (declared dead)" } else { "" }
            )
        }
    })
}

#[cfg(test)]
mod crash_signal_tests {
    use super::CRASH_SIGNAL_KINDS;
    use signal::SignalBody;

    /// A crash waits for these by name: one that names no signal (a
    /// rename) would never match, and the crash would quietly wait for any.
    #[test]
    fn every_crash_signal_kind_names_a_signal() {
        for kind in CRASH_SIGNAL_KINDS {
            assert!(SignalBody::NAMES.contains(&kind), "{kind} is no signal");
        }
    }
}
