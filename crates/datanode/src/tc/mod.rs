//! The transaction coordinator block (NDB: DBTC). It runs the transactions
//! that API nodes start on it: it checks and routes their operations to
//! the LDM instances that hold the rows, collects the answers into one
//! reply per request, commits or aborts on every instance the transaction
//! reached, times out lock waits, coordinates scans over partitions, and
//! takes part in the global checkpoint protocol (the GCI of each commit).
//! The protocol is `docs/transactions.md`; this module is its TC side.
//!
//! - [`transaction`]: key requests, commit and abort.
//! - [`scan`]: scans over partitions.
//! - [`unique`]: operations by unique key and the upkeep of unique
//!   indexes (their hidden tables written in the same transaction).
//! - [`failover`]: data node failure: ending this TC's transactions that
//!   touched the failed node, and taking over the transactions of a
//!   failed node's TCs.
//! - [`gcp`]: the TC side of global checkpoints (the two-phase GCI
//!   switch, `GcpCompleteRep`, `TcWaitGciReq`).
//! - this file: the block, its configuration, the schema copy, and the
//!   lock-wait timeout sweep.
//!
//! Bounds: transaction records (`MaxNoOfConcurrentTransactions`), scan
//! records (`MaxNoOfConcurrentScans`) and operation records
//! (`MaxNoOfConcurrentOperations`: the operations a transaction has run
//! count until it ends, since they hold locks and row versions in the
//! LDMs) are all counted; when one is used up the request is refused at
//! once with a temporary error and nothing is allocated. Records are made
//! at start and reused.

mod commits;
mod failover;
mod gcp;
mod invariants;
mod node_restart;
pub(crate) mod pushed;
pub use node_restart::DRAIN_WAIT_MAX;
mod pool;
pub mod scan;
mod shutdown;
pub mod transaction;
pub mod unique;

use std::time::Duration;

use kernel::{Block, Context, Instant};
use schema::{IndexKind, KeyEncoder, TableDef, Value};
use signal::{BlockNumber, BlockRef, DictTableGroup, NodeId, SchemaOp, Signal, SignalBody};

use crate::live_map::LiveMap;
use crate::recently_aborted::RecentlyAborted;
use failover::Takeover;
use pool::Pool;
use scan::Scan;
use transaction::{Group, Transaction};
use unique::{KeyDecoder, UniqueIndex};

/// Most `TcWaitGciReq` waiting at once; beyond it a request is answered
/// at once with the durable GCI (below the one asked: ask again later).
pub const GCI_WAITERS_MAX: usize = 4_096;
/// Longest time between two sweeps over the transactions waiting for LDM
/// answers (the lock-wait timeout is checked by these sweeps, not by a
/// timer per transaction).
pub const TIMEOUT_SWEEP_INTERVAL_MAX: Duration = Duration::from_millis(50);
/// Timer: the lock-wait timeout sweep.
const TIMER_SWEEP: u32 = 1;
/// Timer: copy the transactions in flight for ndbinfo (`publish_in_flight`).
const TIMER_IN_FLIGHT: u32 = 4;

// Maps keyed by ids (transaction, table, scan) looked up for every operation.
use stdx::IdMap;

/// How a TC instance is set up.
#[derive(Clone, Debug)]
pub struct TcConfig {
    pub node: NodeId,
    pub instance: u32,
    pub placement: config::Placement,
    /// TC instances per data node (the same on every node).
    pub tc_instances: u32,
    /// `MaxNoOfConcurrentTransactions`.
    pub transactions_max: u32,
    /// `MaxNoOfConcurrentOperations`.
    pub operations_max: u32,
    /// `MaxNoOfConcurrentScans`.
    pub scans_max: u32,
    /// `TransactionDeadlockDetectionTimeout`.
    pub deadlock_timeout: Duration,
}

/// A table as the TC needs it: the definition and its distribution-key
/// encoder (to compute an operation's partition).
pub(crate) struct TcTable {
    pub(crate) def: TableDef,
    /// What checking an operation needs of `def`, made once.
    pub(crate) check_plan: proto::CheckPlan,
    pub(crate) distribution: KeyEncoder,
    /// Ids of the hidden tables of its group (for a base table).
    pub(crate) hidden: Vec<u32>,
    /// Its primary key's encoder: a unique index row holds the base row's
    /// key in this form.
    pub(crate) primary: KeyEncoder,
    /// Its unique indexes (a base table), in definition order.
    pub(crate) unique: Vec<UniqueIndex>,
    /// The columns of its unique indexes, ascending, each once: what a
    /// write that moves index entries reads of the old row.
    pub(crate) unique_columns: Vec<usize>,
    /// Reads the primary key back from a unique index row (a base table
    /// with unique indexes).
    pub(crate) key_decoder: Option<KeyDecoder>,
    /// For the hidden table of a unique index: its base table's id.
    pub(crate) unique_of: Option<u32>,
}

/// Counters for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcCounters {
    pub committed: u64,
    pub aborted: u64,
    pub lock_timeouts: u64,
    pub refused_overload: u64,
    pub scans_completed: u64,
    /// Transactions aborted because a data node they touched failed.
    pub node_failure_aborts: u64,
    /// Transactions of failed TCs this TC gave their outcome (takeover).
    pub taken_over: u64,
    /// Committed reads of `READ_BACKUP` tables served by a backup replica on
    /// this TC's node.
    pub backup_reads: u64,
    /// Committed reads of `READ_BACKUP` or fully replicated tables served
    /// on this TC's node (by its primary or backup replica): with a
    /// fully replicated table, every such read of a serving node.
    pub local_reads: u64,
    /// Epochs the master reported complete to this TC (`SubGcpCompleteRep`).
    pub epochs_completed: u64,
    /// `LdmCommitBatchReq`s sent: commit chains of several transactions in
    /// one signal (`commits`).
    pub commit_batches: u64,
    /// Transactions sent whole as `LdmKeyCommitReq`, committed by their
    /// one LDM instance with their ops (one-phase commit).
    pub one_phase: u64,
    /// Transactions of committed reads handed to an LDM instance of this
    /// node, which answered the client itself (`LdmReadReq`); they are not
    /// counted in `committed` or `aborted`, whose outcome the LDM decides.
    pub reads_handed_off: u64,
    /// Transactions of committed-read scans ended by their last scan's
    /// end (`tc_flags::RELEASE`): no commit request came for them. Not
    /// counted in `committed`.
    pub released: u64,
    /// Commits of a client's request: from the arrival of the request
    /// that asked to commit to the commit's answer (`tc_latency`).
    pub commit_latency: crate::dbinfo::LatencyHistogram,
    /// Requests of an open transaction that do not commit (`BEGIN; SELECT
    /// ... FOR UPDATE`, a batch of writes before the COMMIT): from the
    /// request's arrival to its answer (`tc_latency`, request `KEY`).
    pub key_latency: crate::dbinfo::LatencyHistogram,
}

/// Scratch space reused by every request (no allocation once warm).
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) key_values: Vec<Value>,
    pub(crate) key_bytes: Vec<u8>,
    pub(crate) groups: Vec<Group>,
    /// A forwarded request's ops: where each header is, and its partition.
    pub(crate) forward: Vec<(usize, u32)>,
}

impl Scratch {
    /// A byte buffer for a batch the TC builds (`signal::buffers`: received
    /// payloads the TC consumed become its next batches).
    pub(crate) fn buffer(&mut self) -> Vec<u8> {
        signal::buffers::take()
    }

    pub(crate) fn recycle(&mut self, buffer: Vec<u8>) {
        signal::buffers::keep(buffer);
    }
}

/// The transaction coordinator block; see the module doc.
pub struct TcBlock {
    pub(crate) config: TcConfig,
    pub(crate) me: BlockRef,
    pub(crate) tables: IdMap<u32, TcTable>,
    /// Where partitions are served: the placement less the failed nodes.
    pub(crate) map: LiveMap,
    /// Transactions aborted by a node failure while no request of theirs
    /// was here: their next request is told so (a temporary error).
    pub(crate) node_failure_aborted: RecentlyAborted,
    /// The takeover of failed TCs' transactions in progress (instance 0
    /// of the distribution master's node only).
    pub(crate) takeover: Option<Takeover>,
    schema_version: u32,
    pub(crate) transactions: Pool<Transaction>,
    pub(crate) by_tx_id: IdMap<u64, u32>,
    /// Operation records held by live transactions.
    pub(crate) operations_used: u32,
    pub(crate) scans: Pool<Scan>,
    /// A graceful stop in progress (`shutdown`).
    shutdown: shutdown::Shutdown,
    /// TC-wide scan id (as the LDMs see it) → scan slot.
    pub(crate) scan_by_ldm_id: IdMap<u32, u32>,
    /// (transaction, the client's scan id) → scan slot.
    pub(crate) scan_by_api: IdMap<(u64, u32), u32>,
    pub(crate) next_ldm_scan_id: u32,
    /// A pushed join's key reads in flight (their id) → scan slot.
    pub(crate) pushed_by_read: IdMap<u64, u32>,
    pub(crate) next_pushed_read: u64,
    pub(crate) scratch: Scratch,
    /// Commit chains gathered to be sent together (`commits`).
    pub(crate) commits: commits::CommitBatches,
    /// The GCI new commits use; 0 before the first `GcpPrepareReq`.
    pub(crate) gci: u32,
    /// The epoch new commits use (`signal::epoch`; its hi is `gci`).
    pub(crate) epoch: u64,
    /// The epoch before `epoch` (0: none): with it, the only epochs whose
    /// completion an old master may not have reported here (it reports
    /// an epoch complete before it prepares the switch after the next).
    pub(crate) previous_epoch: u64,
    /// The last epoch the master reported complete (`SubGcpCompleteRep`).
    complete_epoch: u64,
    /// Commits in progress per epoch.
    pub(crate) commits_in_progress: gcp::EpochCommits,
    /// A `GcpCommitReq` not yet answered: (epoch, master).
    commit_pending: Option<(u64, BlockRef)>,
    /// A `GcpPrepareReq { epoch }` came and its `GcpCommitReq` not yet:
    /// commits wait (see `gcp`).
    pub(crate) gci_held: Option<u64>,
    durable_gci: u32,
    /// `TcWaitGciReq`s waiting: (client, GCI, the incarnation it named).
    gci_waiters: Vec<(BlockRef, u32, u32)>,
    /// The cluster incarnation commits here belong to (`GcpCommitReq`;
    /// `distribution::incarnation`): named in every commit reply, and
    /// what a `TcWaitGciReq` of another incarnation is judged against.
    pub(crate) incarnation: crate::distribution::incarnation::Incarnation,
    /// Its node's subscription block, told the incarnation once
    /// (`SubIncarnationRep`): the change stream names it to subscribers.
    subscription: Option<BlockRef>,
    /// Transactions whose commit waits for the first GCI or for the end
    /// of a held switch.
    pub(crate) waiting_for_gci: Vec<u32>,
    sweep_armed: bool,
    pub(crate) counters: TcCounters,
    /// Where `counters` are published for ndbinfo.
    figures: Option<crate::dbinfo::FigureSlot>,
    /// When the transactions in flight are next copied for ndbinfo
    /// (`publish_in_flight`), and whether the last copy held any.
    in_flight_pace: crate::dbinfo::InFlightPace,
    /// Node restart: the answer to a node state waits for older transactions.
    pub(crate) drain: node_restart::Drain,
}

impl TcBlock {
    pub fn new(config: TcConfig) -> TcBlock {
        assert!(
            config.transactions_max > 0,
            "MaxNoOfConcurrentTransactions is above 0"
        );
        assert!(
            config.operations_max > 0,
            "MaxNoOfConcurrentOperations is above 0"
        );
        assert!(config.scans_max > 0, "MaxNoOfConcurrentScans is above 0");
        assert!(
            config.instance < config.tc_instances,
            "TC instance {} of {}",
            config.instance,
            config.tc_instances
        );
        let me = BlockRef::new(
            config.node,
            BlockNumber::TRANSACTION_COORDINATOR,
            config.instance as u16,
        );
        TcBlock {
            me,
            tables: IdMap::default(),
            map: LiveMap::new(config.placement.clone()),
            node_failure_aborted: RecentlyAborted::default(),
            takeover: None,
            schema_version: 0,
            transactions: Pool::new(config.transactions_max),
            by_tx_id: IdMap::with_capacity_and_hasher(
                config.transactions_max as usize,
                Default::default(),
            ),
            operations_used: 0,
            scans: Pool::new(config.scans_max),
            shutdown: shutdown::Shutdown::default(),
            scan_by_ldm_id: IdMap::with_capacity_and_hasher(
                config.scans_max as usize,
                Default::default(),
            ),
            scan_by_api: IdMap::with_capacity_and_hasher(
                config.scans_max as usize,
                Default::default(),
            ),
            next_ldm_scan_id: 1,
            pushed_by_read: IdMap::default(),
            next_pushed_read: 0,
            scratch: Scratch::default(),
            commits: commits::CommitBatches::default(),
            gci: 0,
            epoch: 0,
            previous_epoch: 0,
            complete_epoch: 0,
            commits_in_progress: gcp::EpochCommits::default(),
            commit_pending: None,
            gci_held: None,
            durable_gci: 0,
            gci_waiters: Vec::new(),
            incarnation: Default::default(),
            subscription: None,
            waiting_for_gci: Vec::with_capacity(config.transactions_max as usize),
            sweep_armed: false,
            counters: TcCounters::default(),
            figures: None,
            in_flight_pace: crate::dbinfo::InFlightPace::default(),
            drain: node_restart::Drain::default(),
            config,
        }
    }

    pub fn address(node: NodeId, instance: u32) -> BlockRef {
        BlockRef::new(node, BlockNumber::TRANSACTION_COORDINATOR, instance as u16)
    }

    /// Transactions alive now.
    pub fn transactions_in_use(&self) -> usize {
        self.transactions.in_use()
    }

    /// Scans open now.
    pub fn scans_in_use(&self) -> usize {
        self.scans.in_use()
    }

    /// Operation records held now.
    pub fn operations_in_use(&self) -> u32 {
        self.operations_used
    }

    /// The GCI new commits use (0 before the first global checkpoint).
    pub fn current_gci(&self) -> u32 {
        self.gci
    }

    /// The highest GCI known to be durable cluster-wide.
    pub fn durable_gci(&self) -> u32 {
        self.durable_gci
    }

    /// The cluster incarnation this TC commits in (id 0: none yet).
    pub fn incarnation(&self) -> crate::distribution::incarnation::Incarnation {
        self.incarnation
    }

    pub fn counters(&self) -> TcCounters {
        self.counters
    }

    /// Publishes this instance's counters for ndbinfo there.
    pub fn with_figures(mut self, slot: crate::dbinfo::FigureSlot) -> TcBlock {
        self.figures = Some(slot);
        self
    }

    /// Tells `subscription` (its node's subscription block) the cluster
    /// incarnation once this TC learns it.
    pub fn with_subscription(mut self, subscription: BlockRef) -> TcBlock {
        self.subscription = Some(subscription);
        self
    }

    /// Stores the counters and the commit latencies ndbinfo shows
    /// (relaxed stores into this instance's own cache lines: no lock, no
    /// signal).
    fn publish_figures(&self) {
        use crate::dbinfo::tc;
        let Some(figures) = &self.figures else {
            return;
        };
        let slot = figures.slot();
        slot.set(tc::COMMITS, self.counters.committed);
        slot.set(tc::ABORTS, self.counters.aborted);
        slot.set(tc::SCANS, self.counters.scans_completed);
        slot.set(tc::LOCK_TIMEOUTS, self.counters.lock_timeouts);
        figures
            .commit_latency()
            .publish(&self.counters.commit_latency);
        figures.key_latency().publish(&self.counters.key_latency);
    }

    /// Copies the transactions in flight (at most
    /// `signal::dbinfo::IN_FLIGHT_ROWS_MAX`) for `cluster_transactions`,
    /// at most every `IN_FLIGHT_PUBLISH_INTERVAL`: after a signal, never
    /// per operation; a change within the interval is copied from a timer
    /// at its end. Nothing while there is nothing to show and nothing
    /// shown.
    fn publish_in_flight(&mut self, ctx: &mut Context<'_>) {
        let Some(slot) = &self.figures else {
            return;
        };
        let busy = self.transactions.in_use() > 0;
        if !self.in_flight_pace.due(busy, TIMER_IN_FLIGHT, ctx) {
            return;
        }
        let transactions = &self.transactions;
        let published = slot.transactions().try_publish(|rows| {
            let shown = transactions
                .used_slots()
                .take(signal::dbinfo::IN_FLIGHT_ROWS_MAX);
            rows.extend(shown.map(|tx| transactions.get(tx).figure()));
        });
        self.in_flight_pace
            .done(published, busy, TIMER_IN_FLIGHT, ctx);
    }

    /// Tables known (base and hidden).
    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    fn is_local_dictionary(&self, from: BlockRef) -> bool {
        let ok = from.node == self.config.node && from.block == BlockNumber::DICTIONARY;
        if !ok {
            tracing::warn!(tc = %self.me, "schema signal from {from}, not the local dictionary: ignored");
        }
        ok
    }

    fn on_schema_load(
        &mut self,
        from: BlockRef,
        tables: Vec<DictTableGroup>,
        version: u32,
        ctx: &mut Context<'_>,
    ) {
        if !self.is_local_dictionary(from) {
            return;
        }
        let mut loaded = IdMap::with_capacity_and_hasher(tables.len() * 2, Default::default());
        let mut result = Ok(());
        for group in &tables {
            if let Err(message) = decode_group(group, &mut loaded) {
                result = Err(message);
                break;
            }
        }
        let (code, message) = match result {
            Ok(()) => {
                self.tables = loaded;
                self.schema_version = version;
                (0, String::new())
            }
            Err(message) => {
                tracing::error!(tc = %self.me, "schema load {version}: {message}");
                (proto::error::BAD_DEFINITION, message)
            }
        };
        ctx.send(
            from,
            SignalBody::SchemaLoadConf {
                schema_version: version,
                code,
                message,
            },
        );
    }

    fn on_schema_change(
        &mut self,
        from: BlockRef,
        op: SchemaOp,
        table_id: u32,
        version: u32,
        group: DictTableGroup,
        ctx: &mut Context<'_>,
    ) {
        if !self.is_local_dictionary(from) {
            return;
        }
        if let Some(old) = self.tables.remove(&table_id) {
            for hidden in &old.hidden {
                self.tables.remove(hidden);
            }
        }
        let (code, message) = match op {
            SchemaOp::DropTable => (0, String::new()),
            SchemaOp::CreateTable | SchemaOp::AlterTable => {
                match decode_group(&group, &mut self.tables) {
                    Ok(()) => (0, String::new()),
                    Err(message) => {
                        tracing::error!(tc = %self.me, "schema change of table {table_id}: {message}");
                        (proto::error::BAD_DEFINITION, message)
                    }
                }
            }
        };
        self.schema_version = self.schema_version.max(version);
        ctx.send(
            from,
            SignalBody::SchemaChangeConf {
                table_id,
                schema_version: version,
                code,
                message,
            },
        );
    }

    /// Makes sure a sweep will look at the transactions waiting for LDMs.
    pub(crate) fn arm_sweep(&mut self, ctx: &mut Context<'_>) {
        if !self.sweep_armed {
            self.sweep_armed = true;
            // Buggify: a sweep soon, to race the answers in flight.
            let after = match ctx.buggify() {
                true => Duration::from_micros(ctx.random() % 1_000),
                false => self.sweep_interval(),
            };
            ctx.set_timer(after, TIMER_SWEEP);
        }
    }

    fn sweep_interval(&self) -> Duration {
        (self.config.deadlock_timeout / 4)
            .clamp(Duration::from_millis(1), TIMEOUT_SWEEP_INTERVAL_MAX)
    }

    /// Aborts, with the lock-wait timeout error, every transaction that has
    /// waited for LDM answers longer than the deadlock timeout.
    fn on_sweep(&mut self, ctx: &mut Context<'_>) {
        self.sweep_armed = false;
        let now = ctx.now();
        let mut waiting = false;
        let mut expired: Vec<u32> = Vec::new();
        for slot in self.transactions.used_slots() {
            let tx = self.transactions.get(slot);
            if let Some(deadline) = tx.waiting_deadline() {
                waiting = true;
                // Buggify: a one-phase commit times out while its LDM's
                // answer is on the way (as after a long stall of that LDM).
                if now >= deadline || (tx.is_one_phase() && ctx.buggify()) {
                    expired.push(slot);
                }
            }
        }
        for slot in self.scans.used_slots() {
            let scan = self.scans.get(slot);
            if let Some(deadline) = scan.waiting_deadline() {
                waiting = true;
                if now >= deadline {
                    if let Some(&tx) = self.by_tx_id.get(&scan.tx_id) {
                        if !expired.contains(&tx) {
                            expired.push(tx);
                        }
                    }
                }
            }
        }
        for slot in expired {
            self.lock_timeout(slot, ctx);
        }
        if waiting {
            self.arm_sweep(ctx);
        }
    }

    /// When a wait for LDM answers that starts at `now` times out.
    pub(crate) fn deadline_from(&self, now: Instant) -> Instant {
        now + self.config.deadlock_timeout
    }
}

/// Decodes a table group into `tables`: the base table first, then its
/// hidden tables (one per unique index, id = the index's, and blob parts).
fn decode_group(group: &DictTableGroup, tables: &mut IdMap<u32, TcTable>) -> Result<(), String> {
    let mut base: Option<u32> = None;
    for bytes in &group.tables {
        let def = TableDef::decode(bytes)
            .map_err(|e| format!("a table definition does not decode: {e}"))?;
        let id = def.id;
        let distribution = KeyEncoder::distribution_key(&def);
        let primary = KeyEncoder::primary_key(&def);
        tables.insert(
            id,
            TcTable {
                check_plan: proto::CheckPlan::new(&def),
                def,
                distribution,
                hidden: Vec::new(),
                primary,
                unique: Vec::new(),
                unique_columns: Vec::new(),
                key_decoder: None,
                unique_of: None,
            },
        );
        match base {
            None => base = Some(id),
            Some(base) => tables
                .get_mut(&base)
                .expect("inserted above")
                .hidden
                .push(id),
        }
    }
    let Some(base) = base else {
        return Ok(());
    };
    let table = &tables[&base];
    let mut unique: Vec<UniqueIndex> = table
        .def
        .indexes
        .iter()
        .filter(|i| i.kind == IndexKind::Unique)
        .map(|i| UniqueIndex {
            id: i.id,
            name: i.name.clone(),
            columns: i.columns.clone(),
            at: Vec::new(),
        })
        .collect();
    if unique.is_empty() {
        return Ok(());
    }
    let mut columns: Vec<usize> = unique
        .iter()
        .flat_map(|u| u.columns.iter().copied())
        .collect();
    columns.sort_unstable();
    columns.dedup();
    for index in &mut unique {
        index.at = index
            .columns
            .iter()
            .map(|c| columns.binary_search(c).expect("collected above"))
            .collect();
        let hidden_ok = table.hidden.contains(&index.id)
            && tables[&index.id].def.primary_key.len() == index.columns.len();
        if !hidden_ok {
            return Err(format!(
                "table `{}`: the group has no hidden table for unique index `{}` (id {})",
                table.def.name, index.name, index.id
            ));
        }
    }
    let decoder = KeyDecoder::primary_key(&table.def);
    for index in &unique {
        tables.get_mut(&index.id).expect("checked above").unique_of = Some(base);
    }
    let table = tables.get_mut(&base).expect("inserted above");
    table.unique = unique;
    table.unique_columns = columns;
    table.key_decoder = Some(decoder);
    Ok(())
}

impl Block for TcBlock {
    fn check_invariants(&self) {
        self.check_tc_invariants();
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let from = signal.sender;
        match signal.body {
            SignalBody::TcKeyReq { tx_id, flags, ops } => {
                self.on_key_req(from, tx_id, flags, ops, ctx)
            }
            SignalBody::LdmKeyConf {
                tx_id,
                results,
                ok_in_order,
            } => self.on_ldm_key_conf(from, tx_id, results, ok_in_order, None, ctx),
            SignalBody::LdmKeyConfBatch { count, entries } => {
                self.on_ldm_key_conf_batch(from, count, entries, ctx)
            }
            SignalBody::LdmKeyCommitted {
                tx_id,
                gci,
                pending,
                results,
                ok_in_order,
            } => {
                let committed = Some((gci, pending != 0));
                self.on_ldm_key_conf(from, tx_id, results, ok_in_order, committed, ctx)
            }
            SignalBody::LdmCommitConf { tx_id, gci } => self.on_commit_conf(from, tx_id, gci, ctx),
            SignalBody::LdmCommitBatchConf { gci, tx_ids } => {
                for tx_id in tx_ids {
                    self.on_commit_conf(from, tx_id, gci, ctx);
                }
            }
            SignalBody::Continue {
                what: commits::CONTINUE_COMMITS,
            } if from == self.me => self.flush_commits(ctx),
            SignalBody::LdmAbortConf { tx_id } => self.on_abort_conf(from, tx_id, ctx),
            SignalBody::TcAbortTxReq { tx_id, message } => {
                self.on_abort_tx_req(tx_id, &message, ctx)
            }
            SignalBody::TcScanReq {
                tx_id,
                scan_id,
                flags,
                spec,
            } => self.on_scan_req(from, tx_id, scan_id, flags, spec, ctx),
            SignalBody::TcScanNextReq {
                tx_id,
                scan_id,
                close,
            } => self.on_scan_next(from, tx_id, scan_id, close, ctx),
            SignalBody::LdmScanConf {
                scan_id,
                partition,
                rows,
                done,
                ..
            } => self.on_ldm_scan_conf(scan_id, partition, rows, done, ctx),
            SignalBody::LdmScanRef {
                scan_id,
                partition,
                code,
                message,
                ..
            } => self.on_ldm_scan_ref(scan_id, partition, code, message, ctx),
            SignalBody::TcWaitGciReq { gci, incarnation } => {
                self.on_wait_gci(from, gci, incarnation, ctx)
            }
            SignalBody::GcpPrepareReq { epoch } => self.on_gcp_prepare(from, epoch, ctx),
            SignalBody::GcpCommitReq {
                epoch,
                incarnation,
                previous_incarnation,
                restart_gci,
            } => {
                let told = crate::distribution::incarnation::Incarnation {
                    id: incarnation,
                    previous: previous_incarnation,
                    restart_gci,
                };
                if self.incarnation.id == 0 {
                    if let Some(subscription) = self.subscription {
                        ctx.send(
                            subscription,
                            SignalBody::SubIncarnationRep {
                                incarnation,
                                previous_incarnation,
                                restart_gci,
                            },
                        );
                    }
                }
                self.on_incarnation(told);
                self.on_gcp_commit(from, epoch, ctx)
            }
            SignalBody::SubGcpCompleteRep { epoch } => self.on_epoch_complete(epoch),
            SignalBody::GcpCompleteRep { gci } => self.on_gcp_complete(gci, ctx),
            SignalBody::GcpStartReq {} => ctx.send(
                from,
                SignalBody::GcpStartConf {
                    gci: self.gci,
                    incarnation: self.incarnation.id,
                    previous_incarnation: self.incarnation.previous,
                    restart_gci: self.incarnation.restart_gci,
                    epoch: self.epoch,
                    previous_epoch: self.previous_epoch,
                },
            ),
            SignalBody::SchemaLoadReq {
                tables,
                schema_version,
                ..
            } => self.on_schema_load(from, tables, schema_version, ctx),
            SignalBody::SchemaChangeReq {
                op,
                table_id,
                schema_version,
                group,
            } => self.on_schema_change(from, op, table_id, schema_version, group, ctx),
            SignalBody::ApiFailRep { node } if from.node == self.config.node => {
                self.on_api_failed(node, ctx)
            }
            SignalBody::MembershipViewRep { view } if from.node == self.config.node => {
                self.on_view(&view, ctx)
            }
            SignalBody::TcTakeOverReq {
                takeover_id,
                failed,
            } if from.node == self.config.node => {
                self.on_takeover_req(from, takeover_id, failed, ctx)
            }
            SignalBody::LdmTakeOverConf {
                takeover_id,
                tx_ids,
                epochs,
                last,
            } => self.on_ldm_takeover_conf(from, takeover_id, &tx_ids, &epochs, last, ctx),
            SignalBody::Timeout {
                timer_id: TIMER_SWEEP,
            } => self.on_sweep(ctx),
            // The copy is made below, as after every signal.
            SignalBody::Timeout {
                timer_id: TIMER_IN_FLIGHT,
            } => self.in_flight_pace.on_timer(),
            SignalBody::Timeout {
                timer_id: node_restart::TIMER_DRAIN,
            } => self.on_drain_timer(ctx),
            SignalBody::Timeout {
                timer_id: shutdown::TIMER_SHUTDOWN,
            } => self.on_shutdown_timer(ctx),
            SignalBody::TcShutdownReq {} if from.node == self.config.node => {
                self.on_shutdown_req(from, ctx)
            }
            body @ SignalBody::NodeStateReq { .. } => {
                let states = crate::live_map::NodeStates::of(&body).expect("matched");
                self.on_node_states(from, states, ctx)
            }
            other => {
                tracing::debug!(tc = %self.me, "TC ignores {} from {from}", other.name());
            }
        }
        self.publish_figures();
        self.publish_in_flight(ctx);
    }
}
