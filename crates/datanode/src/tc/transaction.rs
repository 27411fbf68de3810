//! Key requests, commit and abort: the transaction record and the TC side
//! of `TcKeyReq` (see `docs/transactions.md`, "Key operations" and
//! "Commit and abort").
//!
//! A request's operations are checked against the TC's schema, given
//! their partition, and grouped by the LDM instance holding the
//! partition's primary replica: one `LdmKeyReq` per (primary node, LDM
//! instance), its ops in request order (ops of a transaction run in order
//! on an instance, so a read after a write in one batch sees the write).
//! A group with a write carries the partition's backups as its `chain`
//! (every partition of a group has the same chain: the placement makes the
//! chain a function of the primary node; fully replicated tables' partitions
//! have chains over every node and form groups of their own). In the LDM batches an op's
//! `op_index` is its position in the request, so that answers map back in
//! O(1); the reply names the client's `op_index` again and lists results
//! in request order.
//!
//! Participants: the (node, LDM instance) pairs that hold something of
//! the transaction — every replica of a write, the primary of a locking
//! read or locking scan. Commit and abort go to exactly those. Committed
//! reads take no lock and leave nothing on the LDM, so they make no
//! participant.
//!
//! Invariant: a transaction ends exactly once, committed or aborted
//! ([`TcBlock::end_transaction`] asserts it is removed from the map once);
//! a commit, once decided, is never turned into an abort.

use config::PartitionHome;
use kernel::{Context, Instant};
use proto::error;
use proto::{
    LockMode, OpBatchReader, OpBatchWriter, OpKind, OpResult, OpView, ResultReader, ResultWriter,
};
use proto::{IGNORE_ERROR, NO_INDEX, NO_PARTITION};
use schema::{distribution_hash, partition_of};
use signal::{tc_flags, BlockNumber, BlockRef, NodeBitmask, NodeId, SignalBody};

use super::commits::{send_chain_req, ChainRest};
use super::unique::{plan_records, Plan};
use smallvec::SmallVec;

/// The ops of a request, parsed once.
type OpViews<'a> = SmallVec<[OpView<'a>; 8]>;
use super::{Scratch, TcBlock, TcTable};
use crate::live_map::LiveMap;

/// Where a transaction is. What only some states know (whether a
/// request's answer passes through whole, where a one-phase commit
/// stands) is part of those states, not flags beside the state that could
/// disagree with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TxState {
    /// No request in progress.
    #[default]
    Idle,
    /// A request's operations are at the LDMs.
    Executing {
        /// The request can be answered with its one result batch as it
        /// came from the LDM: every op was sent, each op's client op_index
        /// is its position, and the results so far came in position order
        /// (see [`TcBlock::request_done`]).
        pass_through: bool,
        one_phase: OnePhase,
    },
    /// Commit decided; waiting for the first GCI.
    WaitingForGci,
    /// `LdmCommitReq` sent; waiting for every `LdmCommitConf`.
    Committing,
    /// `LdmAbortReq` sent; waiting for every `LdmAbortConf`.
    Aborting {
        /// Aborted while its `LdmKeyCommitReq` was out: still counted in
        /// `commits_in_progress`, and its LDM may have committed it (its
        /// `LdmKeyCommitted` then comes before the abort's answer, and
        /// the commit stands).
        one_phase: bool,
    },
}

impl TxState {
    /// A request's first state: executing, nothing passed through yet.
    pub(crate) const EXECUTING: TxState = TxState::Executing {
        pass_through: false,
        one_phase: OnePhase::No,
    };

    /// Whether a request's operations are at the LDMs.
    pub(crate) fn is_executing(self) -> bool {
        matches!(self, TxState::Executing { .. })
    }

    /// Whether the outcome is not decided yet: idle, or executing with no
    /// commit by its LDM (an abort may still end it).
    pub(crate) fn is_open(self) -> bool {
        matches!(
            self,
            TxState::Idle
                | TxState::Executing {
                    one_phase: OnePhase::No | OnePhase::Sent,
                    ..
                }
        )
    }

    /// Whether an `LdmKeyCommitReq` of it is out or committed and not yet
    /// taken into `Committing` (counted in `commits_in_progress`).
    pub(crate) fn one_phase_out(self) -> bool {
        matches!(
            self,
            TxState::Executing {
                one_phase: OnePhase::Sent | OnePhase::Committed { .. },
                ..
            } | TxState::Aborting { one_phase: true }
        )
    }
}

/// Where a one-phase commit (`LdmKeyCommitReq`: the whole transaction to
/// its one LDM instance, which decides the outcome) stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum OnePhase {
    /// The request is no one-phase commit.
    #[default]
    No,
    /// `LdmKeyCommitReq` is out: counted in `commits_in_progress` at the
    /// transaction's epoch meanwhile.
    Sent,
    /// Its LDM committed it (`LdmKeyCommitted`), while the answer is
    /// taken in; `pending`: its commit waits there for redo space
    /// (`LdmCommitConf` follows).
    Committed { pending: bool },
}

/// One operation of the request in progress.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpSlot {
    /// The client's op_index (results name it).
    op_index: u32,
    table_id: u32,
    partition: u32,
    /// Index into the request's groups.
    group: u16,
    ignore_error: bool,
    /// An error the TC found itself (the op was not sent), or 0.
    code: u32,
    answered: bool,
}

/// A (node, LDM instance) holding locks or changes of the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Participant {
    pub(crate) node: NodeId,
    pub(crate) instance: u16,
    /// The commit chain it is in (`Transaction::chains`): the replicas of
    /// the write (or the one lock holder) that first named it.
    pub(crate) chain: u16,
    /// It confirmed the commit or abort in progress, or its node failed
    /// (its live replicas stand for it: docs/transactions.md, "Node failure").
    pub(crate) done: bool,
}

/// The ops of one request that go to one LDM instance.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    /// The node the group's ops go to: the primary of their partitions, or
    /// for `backup_read` this TC's own node.
    primary: NodeId,
    instance: u32,
    /// Where the group's first partition is served, as the live map said
    /// when the group was made (every partition of a group has the same
    /// chain); the group is sent in the same signal's execution, so the
    /// map has not changed since (`send_group` asserts it).
    home: PartitionHome,
    /// The group's first partition.
    partition: u32,
    has_write: bool,
    has_lock: bool,
    /// Some op reads, or is a delete answered with its row (a one-phase
    /// commit over two replicas has none: each op's answer is a success,
    /// which a TC can give when the backup alone is left to say it
    /// committed).
    has_read: bool,
    /// Committed reads of `READ_BACKUP` tables served by a backup on this
    /// TC's node: a group of their own (no chain, no participant), never
    /// mixed with the primary work of other partitions on that node.
    backup_read: bool,
    /// Its partitions are of fully replicated tables: their chain is every
    /// data node (`config::Placement::home_of`), so they never share a
    /// group with other tables' partitions of the same primary.
    fully_replicated: bool,
}

/// What to answer when an abort completes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum AbortReply {
    /// Nothing (no request in progress: a scan's failure aborted it).
    #[default]
    None,
    /// `TcKeyConf { ROLLED_BACK }`: the client asked.
    RolledBack,
    /// `TcKeyRef`.
    Failed {
        code: u32,
        op_index: u32,
        message: String,
    },
}

/// A transaction record (pooled; reset by [`Transaction::reset`]).
#[derive(Default)]
pub(crate) struct Transaction {
    pub(crate) tx_id: u64,
    /// Who to answer: the sender of the last request.
    api: Option<BlockRef>,
    pub(crate) state: TxState,
    /// Flags of the request in progress.
    flags: u32,
    ops: Vec<OpSlot>,
    /// Ops sent and not yet answered.
    pub(crate) outstanding: u32,
    /// The first failed op (position, code) that aborts the transaction.
    failed: Option<(usize, u32)>,
    /// `LdmKeyConf` result batches of the request in progress.
    pub(crate) confs: Vec<Vec<u8>>,
    pub(crate) participants: Vec<Participant>,
    /// Nodes the request in progress sent operations to (primaries and
    /// chains): a failure of one of them aborts the transaction.
    pub(crate) routed: NodeBitmask,
    /// Operation records held (all requests so far).
    op_records: u32,
    gci: u32,
    /// The commit's epoch (`signal::epoch`; `gci` is its hi).
    epoch: u64,
    /// Commit chains so far: each write group's replicas (or a locking
    /// read's primary) form one, numbered from 0.
    chains: u16,
    /// Commit chains, or abort confirmations, still to come.
    pub(crate) confs_waiting: u32,
    pub(crate) abort_reply: AbortReply,
    /// Results to send with the commit's `TcKeyConf`.
    reply: Vec<u8>,
    pub(crate) deadline: Instant,
    /// When its client last sent it a request (`cluster_transactions`).
    pub(crate) last_active: Instant,
    /// Scans of the transaction that are open.
    pub(crate) scans: u32,
    /// The request in progress, when it goes by unique indexes or writes
    /// them (`super::unique`).
    pub(crate) plan: Plan,
}

impl Transaction {
    /// What `cluster_transactions` shows of it.
    pub(crate) fn figure(&self) -> crate::dbinfo::TransactionFigure {
        use crate::dbinfo::transaction_state as state;
        crate::dbinfo::TransactionFigure {
            tx_id: self.tx_id,
            state: match self.state {
                TxState::Idle => state::STARTED,
                TxState::Executing { .. } => state::EXECUTING,
                TxState::WaitingForGci => state::START_COMMITTING,
                TxState::Committing => state::COMMITTING,
                TxState::Aborting { .. } => state::ABORTING,
            },
            operations: self.op_records,
            outstanding: self.outstanding,
            last_active: self.last_active,
            client: self.api,
        }
    }

    fn reset(&mut self, tx_id: u64, api: BlockRef) {
        debug_assert!(self.confs.is_empty() && self.participants.is_empty());
        self.tx_id = tx_id;
        self.api = Some(api);
        self.state = TxState::Idle;
        self.flags = 0;
        self.ops.clear();
        self.outstanding = 0;
        self.failed = None;
        self.confs.clear();
        self.participants.clear();
        self.routed = NodeBitmask::new();
        self.op_records = 0;
        self.gci = 0;
        self.epoch = 0;
        self.chains = 0;
        self.confs_waiting = 0;
        self.abort_reply = AbortReply::None;
        self.reply.clear();
        self.deadline = Instant::ZERO;
        self.last_active = Instant::ZERO;
        self.scans = 0;
        self.plan.finish();
    }

    /// Its one LDM instance decides its outcome (`LdmKeyCommitReq` out).
    pub(crate) fn is_one_phase(&self) -> bool {
        matches!(
            self.state,
            TxState::Executing {
                one_phase: OnePhase::Sent | OnePhase::Committed { .. },
                ..
            }
        )
    }

    /// Operation records it holds (all its requests so far).
    pub(crate) fn op_records(&self) -> u32 {
        self.op_records
    }

    /// The epoch its commit is counted in (`commit_counted`).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether its commit is counted in progress in `epoch` (the TC's
    /// `commits_in_progress`): from the commit point to the last answer.
    pub(crate) fn commit_counted(&self) -> bool {
        self.state == TxState::Committing || self.state.one_phase_out()
    }

    /// Panics when its state disagrees with its counts: the answers and
    /// confirmations it waits for, its participants and chains.
    pub(crate) fn check_state(&self, tc: BlockRef) {
        let tx_id = self.tx_id;
        let not_done = |p: &&Participant| !p.done;
        assert!(
            usize::from(self.chains) <= self.participants.len()
                && self.participants.iter().all(|p| p.chain < self.chains),
            "{tc}: transaction {tx_id:#x} has {} chains over {} participants",
            self.chains,
            self.participants.len()
        );
        match self.state {
            TxState::Idle => assert!(
                self.outstanding == 0
                    && self.confs_waiting == 0
                    && self.confs.is_empty()
                    && !self.plan.active,
                "{tc}: idle transaction {tx_id:#x} waits for {} ops, {} confirmations, {} batches",
                self.outstanding,
                self.confs_waiting,
                self.confs.len()
            ),
            TxState::Executing { one_phase, .. } => {
                assert!(
                    !matches!(one_phase, OnePhase::Committed { .. }),
                    "{tc}: transaction {tx_id:#x} left committed by its LDM between signals"
                );
                assert!(
                    self.outstanding > 0,
                    "{tc}: transaction {tx_id:#x} executes with no op outstanding"
                );
                if !self.plan.active {
                    let unanswered = self.ops.iter().filter(|op| !op.answered).count();
                    assert_eq!(
                        self.outstanding as usize, unanswered,
                        "{tc}: transaction {tx_id:#x}: ops outstanding against ops not answered"
                    );
                }
            }
            TxState::WaitingForGci => assert!(
                self.confs_waiting == 0 && self.outstanding == 0 && !self.participants.is_empty(),
                "{tc}: transaction {tx_id:#x} waits for a GCI with {} confirmations due",
                self.confs_waiting
            ),
            TxState::Committing => {
                let open = (0..self.chains)
                    .filter(|&c| !tx_chain_done(&self.participants, c))
                    .count();
                assert!(
                    self.confs_waiting > 0 && self.confs_waiting as usize == open,
                    "{tc}: transaction {tx_id:#x} commits waiting for {} chains, {open} not done",
                    self.confs_waiting
                );
            }
            TxState::Aborting { .. } => {
                let open = self.participants.iter().filter(not_done).count();
                assert!(
                    self.confs_waiting > 0 && self.confs_waiting as usize == open,
                    "{tc}: transaction {tx_id:#x} aborts waiting for {} confirmations, {open} participants not done",
                    self.confs_waiting
                );
            }
        }
    }

    /// When the transaction times out, if it waits for LDM answers.
    pub(crate) fn waiting_deadline(&self) -> Option<Instant> {
        self.state.is_executing().then_some(self.deadline)
    }

    /// Counts (node, LDM instance) as a participant, unless it is one
    /// already (in an earlier chain). Participants added with one `chain`
    /// (`None` at first) form one commit chain, numbered when its first
    /// participant is new: so there are never more chains than
    /// participants.
    pub(crate) fn add_participant(&mut self, node: NodeId, instance: u32, chain: &mut Option<u16>) {
        let instance = instance as u16;
        if !self
            .participants
            .iter()
            .any(|p| p.node == node && p.instance == instance)
        {
            let chain = *chain.get_or_insert_with(|| {
                self.chains += 1;
                self.chains - 1
            });
            self.participants.push(Participant {
                node,
                instance,
                chain,
                done: false,
            });
        }
    }
}

/// Why an op cannot be sent: (code, message).
pub(crate) type OpError = (u32, String);

/// The one path a request takes ([`TcBlock::classify_request`]).
#[derive(Debug)]
enum RequestPath {
    /// Refused before anything was sent: the transaction aborts with
    /// (code, op_index, message).
    Fail((u32, u32, String)),
    /// It goes by unique indexes or writes them: planned (`super::unique`).
    Plan,
    /// No operation: answered at once.
    Empty,
    /// The whole transaction, committed reads of one LDM instance of this
    /// node: handed over (`LdmReadReq`).
    HandOff,
    /// To one LDM instance, ops in request order: the client's batch goes
    /// on as it came, as a one-phase commit in `commit_gci` when not 0.
    Forward { commit_gci: u32 },
    /// Split into one new batch per LDM instance.
    Split,
}

/// Checks one op by primary key against the schema and computes its
/// partition; also whether its table is `READ_BACKUP` and whether it is
/// fully replicated.
pub(crate) fn route(
    tables: &stdx::IdMap<u32, TcTable>,
    scratch: &mut Scratch,
    op: &OpView<'_>,
) -> Result<(u32, bool, bool), OpError> {
    let h = &op.header;
    let Some(table) = tables.get(&h.table_id) else {
        return Err((
            error::NO_SUCH_TABLE,
            format!("no table with id {} on this node", h.table_id),
        ));
    };
    op.check_with(&table.def, &table.check_plan)
        .map_err(|e| (e.code(), e.to_string()))?;
    debug_assert_eq!(h.index_id, NO_INDEX, "ops by unique key are planned");
    if h.kind != OpKind::Read {
        if let Some(base) = table.unique_of {
            return Err((
                error::BAD_OPERATION,
                format!(
                    "table `{}` is a unique index of table id {base}: it is written through its base table only",
                    table.def.name
                ),
            ));
        }
    }
    // The distribution key is a prefix of the primary key, whose values
    // the op carries in key order.
    let d = table.distribution.column_count();
    scratch.key_bytes.clear();
    let encoded = match op.keys().next() {
        // The common key of one column: its value on the stack.
        Some(first) if d == 1 => table
            .distribution
            .encode(&[first.to_value()], &mut scratch.key_bytes),
        _ => {
            scratch.key_values.clear();
            scratch
                .key_values
                .extend(op.keys().take(d).map(|v| v.to_value()));
            table
                .distribution
                .encode(&scratch.key_values, &mut scratch.key_bytes)
        }
    };
    encoded.map_err(|e| (error::BAD_VALUE, format!("table `{}`: {e}", table.def.name)))?;
    let partition = partition_of(distribution_hash(&scratch.key_bytes), table.def.partitions);
    if h.partition != NO_PARTITION && h.partition != partition {
        return Err((
            error::BAD_OPERATION,
            format!(
                "table `{}`: the operation names partition {}, its key is in partition {partition}",
                table.def.name, h.partition
            ),
        ));
    }
    Ok((partition, table.def.read_backup, table.def.fully_replicated))
}

impl TcBlock {
    fn refuse(&self, to: BlockRef, tx_id: u64, code: u32, message: String, ctx: &mut Context<'_>) {
        ctx.send(
            to,
            SignalBody::TcKeyRef {
                tx_id,
                code,
                op_index: u32::MAX,
                message,
            },
        );
    }

    /// Creates a transaction record, or refuses with a temporary error.
    pub(crate) fn begin_transaction(&mut self, api: BlockRef, tx_id: u64) -> Result<u32, OpError> {
        if !self.knows_node_states() {
            // Routing needs the master's word on which nodes serve.
            return Err((
                error::NOT_STARTED,
                format!("{}: the data node states are not known yet", self.me),
            ));
        }
        if let Some(refusal) = self.refuse_while_stopping() {
            return Err(refusal);
        }
        // One hash lookup: the entry is filled only once a record is found.
        let std::collections::hash_map::Entry::Vacant(entry) = self.by_tx_id.entry(tx_id) else {
            return Err((
                error::BAD_OPERATION,
                format!("transaction {tx_id:#x} is already started on {}", self.me),
            ));
        };
        let Some(slot) = self.transactions.allocate() else {
            self.counters.refused_overload += 1;
            return Err((
                error::OUT_OF_TRANSACTIONS,
                format!(
                    "{}: all {} transaction records are in use (MaxNoOfConcurrentTransactions)",
                    self.me, self.config.transactions_max
                ),
            ));
        };
        entry.insert(slot);
        self.transactions.get_mut(slot).reset(tx_id, api);
        Ok(slot)
    }

    pub(crate) fn on_key_req(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        flags: u32,
        ops: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let slot = if flags & tc_flags::START != 0 {
            match self.begin_transaction(from, tx_id) {
                Ok(slot) => slot,
                Err((code, message)) => return self.refuse(from, tx_id, code, message, ctx),
            }
        } else {
            match self.by_tx_id.get(&tx_id) {
                Some(&slot) => slot,
                None => {
                    if self.node_failure_aborted.contains(tx_id) {
                        let message = format!(
                            "transaction {tx_id:#x} was aborted on {} by a data node failure",
                            self.me
                        );
                        return self.refuse(from, tx_id, error::NODE_FAILURE_ABORTED, message, ctx);
                    }
                    let message = format!(
                        "transaction {tx_id:#x} is not known to {} (never started or ended)",
                        self.me
                    );
                    return self.refuse(from, tx_id, error::BAD_OPERATION, message, ctx);
                }
            }
        };
        let tx = self.transactions.get_mut(slot);
        if matches!(tx.state, TxState::Aborting { .. }) && self.node_failure_aborted.contains(tx_id)
        {
            // A node failure aborts it and the abort is still under way: the
            // client's next request learns so (temporary), as it would after.
            let message = format!(
                "transaction {tx_id:#x} is being aborted on {} by a data node failure",
                self.me
            );
            return self.refuse(from, tx_id, error::NODE_FAILURE_ABORTED, message, ctx);
        }
        let tx = self.transactions.get_mut(slot);
        if tx.state != TxState::Idle {
            let message = format!(
                "transaction {tx_id:#x} has a request in progress on {}: one at a time",
                self.me
            );
            return self.refuse(from, tx_id, error::BAD_OPERATION, message, ctx);
        }
        tx.api = Some(from);
        tx.flags = flags;
        tx.last_active = ctx.now();
        if flags & tc_flags::ROLLBACK != 0 {
            self.scratch.recycle(ops);
            return self.abort(slot, AbortReply::RolledBack, ctx);
        }
        self.execute_request(slot, ops, ctx);
    }

    /// Checks, routes and sends the operations of a request; a request
    /// that goes by unique indexes or writes them is planned instead
    /// (`super::unique`). Classifies the request first
    /// ([`TcBlock::classify_request`]), then runs its one path: the
    /// request's buffer is given back in one place, by the paths that do
    /// not send it on.
    fn execute_request(&mut self, slot: u32, request: Vec<u8>, ctx: &mut Context<'_>) {
        // Parsed once here, then planned, routed and copied from the views.
        let mut views: OpViews<'_> = SmallVec::new();
        let path = self.classify_request(slot, &request, &mut views);
        // The split path copies the ops out of the views into new batches;
        // the others are done with the views.
        let split_sent = match path {
            RequestPath::Split => {
                self.transactions.get_mut(slot).state = TxState::EXECUTING;
                self.send_request(slot, &views, ctx)
            }
            _ => 0,
        };
        drop(views);
        let request = match path {
            RequestPath::Plan | RequestPath::HandOff | RequestPath::Forward { .. } => request,
            RequestPath::Fail(..) | RequestPath::Empty | RequestPath::Split => {
                self.scratch.recycle(request);
                Vec::new()
            }
        };
        match path {
            RequestPath::Fail((code, op_index, message)) => {
                self.fail(slot, code, op_index, message, ctx)
            }
            RequestPath::Plan => self.start_plan(slot, request, ctx),
            RequestPath::Empty => self.request_done(slot, ctx),
            RequestPath::HandOff => self.hand_off_reads(slot, request, ctx),
            RequestPath::Forward { commit_gci } => {
                let sent = self.forward_request(slot, request, commit_gci, ctx);
                self.await_answers(slot, sent, ctx);
            }
            RequestPath::Split => self.await_answers(slot, split_sent, ctx),
        }
    }

    /// Admits the request of `slot` (its operation records) and decides
    /// its path: parses it into `views`, plans or routes its ops into
    /// `self.scratch.groups` and the transaction's op slots, and for a
    /// request that goes on as it came, notes where each op's header is
    /// (`self.scratch.forward`). Sends nothing.
    fn classify_request<'r>(
        &mut self,
        slot: u32,
        request: &'r [u8],
        views: &mut OpViews<'r>,
    ) -> RequestPath {
        if !request.is_empty() {
            // The integer values are checked against their table's plan in
            // the same pass (`route` then need not walk them again).
            let tables = &self.tables;
            let plan_of = |table_id| tables.get(&table_id).map(|t: &TcTable| &t.check_plan);
            if let Err(e) =
                OpBatchReader::new_each_planned(request, plan_of, |view| views.push(view))
            {
                return RequestPath::Fail((e.code(), u32::MAX, e.to_string()));
            }
        }
        let planned = plan_records(&self.tables, views);
        let n = planned.unwrap_or(views.len() as u32);
        if self.operations_used + n > self.config.operations_max {
            self.counters.refused_overload += 1;
            let message = format!(
                "{}: {} of {} operation records in use, {n} more asked (MaxNoOfConcurrentOperations)",
                self.me, self.operations_used, self.config.operations_max
            );
            return RequestPath::Fail((error::OUT_OF_TC_OPERATIONS, u32::MAX, message));
        }
        self.operations_used += n;
        let tx = self.transactions.get_mut(slot);
        tx.op_records += n;
        tx.ops.clear();
        tx.failed = None;
        tx.routed = NodeBitmask::new();
        debug_assert!(tx.confs.is_empty());
        self.scratch.groups.clear();
        if planned.is_some() {
            return RequestPath::Plan;
        }
        if views.is_empty() {
            return RequestPath::Empty;
        }
        if let Some(failed) = self.route_request(slot, views) {
            return RequestPath::Fail(failed);
        }
        if !self.forwardable(slot) {
            return RequestPath::Split;
        }
        // One LDM instance, ops in request order: the client's batch goes
        // on as it came, each op's partition written in (no copy of the
        // ops into a new batch).
        let forward = &mut self.scratch.forward;
        forward.clear();
        let ops = &self.transactions.get(slot).ops;
        forward.extend(
            views
                .iter()
                .zip(ops)
                .map(|(view, op)| (view.header_offset(request), op.partition)),
        );
        let group = &self.scratch.groups[0];
        if self.answered_by_ldm(slot, group) {
            return RequestPath::HandOff;
        }
        RequestPath::Forward {
            commit_gci: self.one_phase_gci(slot, group),
        }
    }

    /// Pass 1 of a plain request: checks each op, gives it its partition
    /// and its group (`self.scratch.groups`); the first error of an op
    /// without `IGNORE_ERROR`, as (code, op_index, message).
    fn route_request(&mut self, slot: u32, views: &[OpView<'_>]) -> Option<(u32, u32, String)> {
        for op in views {
            let h = op.header;
            let mut op_slot = OpSlot {
                op_index: h.op_index,
                table_id: h.table_id,
                partition: 0,
                group: 0,
                ignore_error: op.has_flag(IGNORE_ERROR),
                code: 0,
                answered: false,
            };
            match route(&self.tables, &mut self.scratch, op) {
                Ok((partition, read_backup, full)) => {
                    op_slot.partition = partition;
                    op_slot.group =
                        if read_backup && h.kind == OpKind::Read && h.lock == LockMode::Committed {
                            self.group_nearest(partition, full)
                        } else {
                            self.group_of(partition, full, h.kind, h.lock)
                        };
                    if h.kind == OpKind::Delete && op.projection_count() > 0 {
                        // A delete answered with its row reads it.
                        self.scratch.groups[usize::from(op_slot.group)].has_read = true;
                    }
                }
                Err((code, message)) => {
                    if !op_slot.ignore_error {
                        return Some((code, h.op_index, message));
                    }
                    op_slot.code = code;
                    op_slot.answered = true;
                }
            }
            self.transactions.get_mut(slot).ops.push(op_slot);
        }
        None
    }

    /// Sends the client's batch on to its one LDM instance, each op's
    /// partition written in (`self.scratch.forward`), as `LdmKeyReq` or,
    /// with a `commit_gci`, as a one-phase commit; how many ops were sent.
    fn forward_request(
        &mut self,
        slot: u32,
        mut request: Vec<u8>,
        commit_gci: u32,
        ctx: &mut Context<'_>,
    ) -> u32 {
        for &(header_at, partition) in &self.scratch.forward {
            proto::set_partition(&mut request, header_at, partition);
        }
        let group = self.scratch.groups[0].clone();
        let tx = self.transactions.get_mut(slot);
        // One group, every op sent, each numbered by its position: what
        // `forwardable` asks, and what a reply passed on whole needs.
        tx.state = TxState::Executing {
            pass_through: true,
            one_phase: OnePhase::No,
        };
        let tx_id = tx.tx_id;
        self.send_group(slot, tx_id, &group, request, commit_gci, ctx);
        self.scratch.forward.len() as u32
    }

    /// `sent` ops of the request of `slot` went to the LDMs: wait for
    /// their answers (the lock-wait sweep watches the wait), or, with none
    /// sent, answer now.
    fn await_answers(&mut self, slot: u32, sent: u32, ctx: &mut Context<'_>) {
        let deadline = self.deadline_from(ctx.now());
        let tx = self.transactions.get_mut(slot);
        debug_assert!(tx.state.is_executing(), "sent ops execute");
        tx.outstanding = sent;
        if sent == 0 {
            return self.request_done(slot, ctx);
        }
        tx.deadline = deadline;
        self.arm_sweep(ctx);
    }

    /// Whether the routed request can go to its one LDM instance as it
    /// came: one group, every op routed (none refused) and numbered by its
    /// position.
    fn forwardable(&self, slot: u32) -> bool {
        self.scratch.groups.len() == 1
            && self
                .transactions
                .get(slot)
                .ops
                .iter()
                .enumerate()
                .all(|(pos, op)| op.code == 0 && op.group == 0 && op.op_index as usize == pos)
    }

    /// Whether the request of `slot`, routed to the one `group`, is a
    /// transaction the group's LDM instance answers itself (`LdmReadReq`,
    /// docs/transactions.md): the whole transaction (START and COMMIT),
    /// committed reads only (nothing to lock, commit or abort anywhere), on
    /// an instance of this node (whose failure is this TC's: the client
    /// learns it from the lost connection, as it would of this TC's).
    fn answered_by_ldm(&self, slot: u32, group: &Group) -> bool {
        let whole = tc_flags::START | tc_flags::COMMIT;
        self.transactions.get(slot).flags & whole == whole
            && !group.has_write
            && !group.has_lock
            && group.primary == self.config.node
    }

    /// Sends the request of `slot` to its LDM instance as `LdmReadReq` and
    /// frees the record: the LDM answers the client, and nothing of the
    /// transaction is left here to time out, abort or take over.
    fn hand_off_reads(&mut self, slot: u32, mut ops: Vec<u8>, ctx: &mut Context<'_>) {
        for &(header_at, partition) in &self.scratch.forward {
            proto::set_partition(&mut ops, header_at, partition);
        }
        let group = &self.scratch.groups[0];
        let tx = self.transactions.get(slot);
        let tx_id = tx.tx_id;
        debug_assert!(tx.participants.is_empty() && tx.confs.is_empty() && tx.scans == 0);
        let api = tx.api.expect("a transaction has a client");
        let ldm = BlockRef::new(
            group.primary,
            BlockNumber::LOCAL_DATA_MANAGER,
            group.instance as u16,
        );
        ctx.send(
            ldm,
            SignalBody::LdmReadReq {
                tx_id,
                api,
                epoch: self.epoch,
                ops,
            },
        );
        self.counters.reads_handed_off += 1;
        self.unregister(slot);
        self.transactions.release(slot);
    }

    /// Gives back the operation records of `slot` and forgets its
    /// transaction id (the record itself is released by the caller).
    /// Ends transaction `tx_id` without an answer when it holds nothing:
    /// no operation record, participant (lock), open scan or request in
    /// progress (`tc_flags::RELEASE`: its last committed-read scan ended,
    /// and the client learns so from that scan's last `TcScanConf`).
    /// Whether it ended.
    pub(crate) fn release_if_idle(&mut self, tx_id: u64) -> bool {
        let Some(&slot) = self.by_tx_id.get(&tx_id) else {
            return false;
        };
        let tx = self.transactions.get(slot);
        let idle = matches!(tx.state, TxState::Idle)
            && tx.op_records == 0
            && tx.participants.is_empty()
            && tx.scans == 0
            && tx.outstanding == 0
            && tx.confs.is_empty()
            && !tx.plan.active;
        if !idle {
            return false;
        }
        self.unregister(slot);
        self.transactions.release(slot);
        self.counters.released += 1;
        true
    }

    fn unregister(&mut self, slot: u32) {
        let tx = self.transactions.get(slot);
        let (tx_id, records) = (tx.tx_id, tx.op_records);
        assert!(self.operations_used >= records, "operation records counted");
        self.operations_used -= records;
        let removed = self.by_tx_id.remove(&tx_id);
        assert_eq!(
            removed,
            Some(slot),
            "transaction {tx_id:#x} ends exactly once"
        );
    }

    /// Sends the routed ops of a plain request, one `LdmKeyReq` per group;
    /// how many ops were sent.
    fn send_request(&mut self, slot: u32, views: &[OpView<'_>], ctx: &mut Context<'_>) -> u32 {
        // Pass 2: one LdmKeyReq per group, ops in request order.
        let tx_id = self.transactions.get(slot).tx_id;
        let mut sent = 0u32;
        for g in 0..self.scratch.groups.len() {
            let group = self.scratch.groups[g].clone();
            let mut batch = self.scratch.buffer();
            {
                let mut writer = OpBatchWriter::new(&mut batch);
                let tx = self.transactions.get(slot);
                for (pos, op) in views.iter().enumerate() {
                    let s = &tx.ops[pos];
                    if s.code != 0 || usize::from(s.group) != g {
                        continue;
                    }
                    let mut header = op.header;
                    header.op_index = pos as u32;
                    header.partition = s.partition;
                    if let Err(e) = writer.copy(&header, op) {
                        // The request's batch fit the limits, so a part of it does.
                        unreachable_limit(&e);
                    }
                    sent += 1;
                }
            }
            self.send_group(slot, tx_id, &group, batch, 0, ctx);
        }
        sent
    }

    /// The GCI `slot` commits in with its ops (one-phase commit,
    /// docs/transactions.md), or 0: when its request is the whole
    /// transaction (START and COMMIT), goes whole to `group`, whose
    /// partitions have one replica configured (no chain, and no other
    /// replica a node failure could leave them on) or two, of which the
    /// backup decides (writes only: the backup's answer is every op's;
    /// `LdmKeyCommitReq`), has no op whose failure is ignored (the LDM
    /// commits only when every op succeeded), and a GCI is handed out now
    /// (none held by a GCP switch).
    fn one_phase_gci(&self, slot: u32, group: &Group) -> u32 {
        let tx = self.transactions.get(slot);
        let whole = tc_flags::START | tc_flags::COMMIT;
        let replicas = self.map.placement().replicas_per_group();
        let chain_fits = match replicas {
            1 => true,
            2 => group.has_write && !group.has_read && group.home.backups().count() <= 1,
            _ => false,
        };
        let one_phase = chain_fits
            && !group.fully_replicated
            && tx.flags & whole == whole
            && (group.has_write || group.has_lock)
            && self.gci != 0
            && self.gci_held.is_none()
            && !tx.ops.iter().any(|op| op.ignore_error);
        if one_phase {
            self.gci
        } else {
            0
        }
    }

    /// Sends one group's batch to its LDM instance, with the partition's
    /// backups as the chain when it writes, and counts the participants.
    pub(crate) fn send_group(
        &mut self,
        slot: u32,
        tx_id: u64,
        group: &Group,
        batch: Vec<u8>,
        commit_gci: u32,
        ctx: &mut Context<'_>,
    ) {
        let home = &group.home;
        debug_assert!(
            self.map.home_of(group.partition, group.fully_replicated) == *home,
            "a group is sent before the live map changes"
        );
        debug_assert!(
            home.primary() == group.primary
                || (group.backup_read && home.is_replica(group.primary)),
            "grouped by the live map"
        );
        let chain: signal::Chain = if group.has_write {
            home.backups().collect()
        } else {
            signal::Chain::new()
        };
        let tx = self.transactions.get_mut(slot);
        tx.routed.insert(group.primary);
        let mut commit_chain = None;
        if group.has_write {
            for node in home.replicas() {
                tx.routed.insert(node);
                tx.add_participant(node, group.instance, &mut commit_chain);
            }
        } else if group.has_lock {
            tx.add_participant(group.primary, group.instance, &mut commit_chain);
        }
        let ldm = BlockRef::new(
            group.primary,
            BlockNumber::LOCAL_DATA_MANAGER,
            group.instance as u16,
        );
        if commit_gci == 0 {
            let tc = self.me;
            return ctx.send(
                ldm,
                SignalBody::LdmKeyReq {
                    tx_id,
                    tc,
                    chain,
                    ops: batch,
                },
            );
        }
        // The commit point is now: the GCI is handed out here, as
        // `start_commit` does, and the commit counts as in progress in its
        // epoch until the LDM answers (a GCP switch waits for it).
        debug_assert!(
            chain.len() <= 1,
            "a one-phase commit has at most one backup"
        );
        let TxState::Executing {
            one_phase: one_phase @ OnePhase::No,
            ..
        } = &mut tx.state
        else {
            panic!(
                "transaction {tx_id:#x}: a one-phase commit from state {:?}",
                tx.state
            );
        };
        *one_phase = OnePhase::Sent;
        assert!(
            tx.participants.len() == 1 + chain.len(),
            "transaction {tx_id:#x}: a one-phase commit is the whole transaction"
        );
        assert_eq!(commit_gci, self.gci, "one-phase commits in the current GCI");
        tx.gci = commit_gci;
        tx.epoch = self.epoch;
        self.commits_in_progress.add(self.epoch);
        self.counters.one_phase += 1;
        ctx.send(
            ldm,
            SignalBody::LdmKeyCommitReq {
                tx_id,
                tc: self.me,
                epoch: self.epoch,
                chain,
                answer: self.me,
                ops: batch,
            },
        );
    }

    /// A one-phase commit that will not happen (its LDM committed nothing,
    /// or the transaction aborted) is no longer in progress in its epoch.
    fn uncount_one_phase(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        match &mut tx.state {
            TxState::Executing { one_phase, .. } => {
                assert_eq!(*one_phase, OnePhase::Sent, "a one-phase commit out");
                *one_phase = OnePhase::No;
            }
            TxState::Aborting { one_phase } => {
                assert!(*one_phase, "a one-phase commit out");
                *one_phase = false;
            }
            state => panic!(
                "transaction {:#x}: a one-phase commit uncounted in state {state:?}",
                tx.tx_id
            ),
        }
        let epoch = tx.epoch;
        self.commits_in_progress.remove(epoch);
        self.check_commit(ctx);
    }

    /// The group of an op on `partition`, made if new.
    pub(crate) fn group_of(
        &mut self,
        partition: u32,
        full: bool,
        kind: OpKind,
        lock: LockMode,
    ) -> u16 {
        group_in(
            &self.map,
            &mut self.scratch.groups,
            partition,
            full,
            kind,
            lock,
        )
    }

    /// The group of a committed read of a `READ_BACKUP` table: this TC's own
    /// node when it holds a serving replica of `partition` (no network hop),
    /// else the primary. A serving replica has every committed write: a
    /// commit is answered only once every replica has it. A serving node
    /// holds every partition of a fully replicated table (`full`).
    fn group_nearest(&mut self, partition: u32, full: bool) -> u16 {
        let me = self.config.node;
        let home = self.map.home_of(partition, full);
        if home.primary() == me || !home.is_replica(me) || !self.map.is_serving(me) {
            if home.primary() == me {
                self.counters.local_reads += 1;
            }
            return group_at(
                home,
                &mut self.scratch.groups,
                partition,
                full,
                OpKind::Read,
                LockMode::Committed,
            );
        }
        let instance = home.ldm_instance;
        let groups = &mut self.scratch.groups;
        let g = match groups
            .iter()
            .position(|g| g.backup_read && g.primary == me && g.instance == instance)
        {
            Some(g) => g,
            None => {
                groups.push(Group {
                    primary: me,
                    instance,
                    home,
                    partition,
                    has_write: false,
                    has_lock: false,
                    has_read: true,
                    backup_read: true,
                    fully_replicated: full,
                });
                groups.len() - 1
            }
        };
        self.counters.backup_reads += 1;
        self.counters.local_reads += 1;
        u16::try_from(g).expect("groups ≤ 2 × data nodes × LDM instances")
    }

    /// Takes each answer of an `LdmKeyConfBatch` as its `LdmKeyConf`, in order.
    pub(crate) fn on_ldm_key_conf_batch(
        &mut self,
        from: BlockRef,
        count: u32,
        entries: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let answers = match signal::key_batch::key_confs(&entries, count) {
            Ok(answers) => answers,
            Err(e) => {
                // Only a bug sends this; its transactions end by their timeout.
                tracing::error!(tc = %self.me, "malformed LdmKeyConfBatch from {from}: {e}");
                return self.scratch.recycle(entries);
            }
        };
        for answer in answers {
            // A buffer the client's answer gave back (`Context::buffer`).
            let mut results = ctx.buffer();
            results.extend_from_slice(answer.results);
            self.on_ldm_key_conf(from, answer.tx_id, results, answer.ok_in_order, None, ctx);
        }
        self.scratch.recycle(entries);
    }

    pub(crate) fn on_ldm_key_conf(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        results: Vec<u8>,
        ok_in_order: u32,
        committed: Option<(u32, bool)>,
        ctx: &mut Context<'_>,
    ) {
        if tx_id & super::pushed::PUSHED_TX_BIT != 0 && committed.is_none() {
            return self.on_pushed_conf(from, tx_id, results, ctx);
        }
        let Some(&slot) = self.by_tx_id.get(&tx_id) else {
            // The transaction ended (aborted) while this was on its way, or
            // its primary's node failed after it committed and sent this
            // (a stopping node's last signals arrive after its failure was
            // handled): the backup said it committed (`LdmOutcomeReq`), so
            // it ended committed.
            assert!(
                committed.is_none() || self.map.down().contains(from.node),
                "{from} committed transaction {tx_id:#x}, which {} has ended",
                self.me
            );
            return self.scratch.recycle(results);
        };
        let tx = self.transactions.get_mut(slot);
        if let Some((gci, pending)) = committed {
            assert!(
                tx.gci == gci
                    && matches!(
                        tx.state,
                        TxState::Executing {
                            one_phase: OnePhase::Sent,
                            ..
                        } | TxState::Aborting { one_phase: true }
                    ),
                "{from} committed transaction {tx_id:#x} in GCI {gci}, not a one-phase commit of {} in it",
                self.me
            );
            if matches!(tx.state, TxState::Aborting { .. }) {
                // It timed out, or its client failed, while the LDM ran it,
                // and the LDM committed before the abort reached it (the
                // abort comes after this, in order): the commit stands.
                tx.abort_reply = AbortReply::None;
            }
            // Its one request went on as it came (`forward_request`), and
            // this is its one answer.
            tx.state = TxState::Executing {
                pass_through: true,
                one_phase: OnePhase::Committed { pending },
            };
        } else if matches!(
            tx.state,
            TxState::Executing {
                one_phase: OnePhase::Sent,
                ..
            }
        ) {
            // The LDM committed nothing (an op failed): the usual abort follows.
            self.uncount_one_phase(slot, ctx);
        }
        if !self.transactions.get(slot).state.is_executing() {
            return self.scratch.recycle(results);
        }
        if self.transactions.get(slot).plan.active {
            return self.plan_conf(slot, from, results, ctx);
        }
        let tx = self.transactions.get_mut(slot);
        let pass_through = matches!(
            tx.state,
            TxState::Executing {
                pass_through: true,
                ..
            }
        );
        if ok_in_order != 0 && ok_in_order == tx.outstanding && pass_through && tx.confs.is_empty()
        {
            // The common request: one batch answers every op, in order, none
            // failed (the LDM says so). `request_done` passes it on whole,
            // unread, to the client, which checks every value it reads.
            debug_assert!(
                agrees_with_batch(&results, ok_in_order),
                "LdmKeyConf from {from}: ok_in_order {ok_in_order} does not describe its batch"
            );
            debug_assert_eq!(
                tx.ops.len(),
                ok_in_order as usize,
                "pass-through sent every op"
            );
            if let TxState::Executing {
                one_phase: OnePhase::Committed { pending: false },
                ..
            } = tx.state
            {
                return self.one_phase_done(slot, results, ctx);
            }
            for op in &mut tx.ops {
                debug_assert!(
                    !op.answered && op.code == 0,
                    "no op answered before the first batch"
                );
                op.answered = true;
            }
            tx.outstanding = 0;
            // What `request_done` does with the one batch of a request
            // passed through, without keeping it first.
            return self.answer_request(slot, results, ctx);
        }
        // Made by an LDM of this cluster and passed on to the client, which
        // checks every value as it reads it: the frames are enough here.
        let reader = match ResultReader::framed(&results) {
            Ok(reader) => reader,
            Err(e) => {
                tracing::error!(tc = %self.me, "LdmKeyConf from {from} for transaction {tx_id:#x}: {e}");
                let message = format!("a data node answered with a malformed result batch: {e}");
                return self.fail(slot, error::MALFORMED_REQUEST, u32::MAX, message, ctx);
            }
        };
        let tx = self.transactions.get_mut(slot);
        let mut counted = 0;
        // Results in position order, after those of earlier batches.
        let mut in_order = tx.confs.is_empty();
        for result in reader.iter() {
            let pos = result.op_index as usize;
            in_order &= pos == counted as usize;
            let Some(op) = tx.ops.get_mut(pos) else {
                tracing::error!(tc = %self.me, "{from} answered op {pos} of transaction {tx_id:#x}, which has no such op");
                continue;
            };
            if op.answered {
                tracing::error!(tc = %self.me, "{from} answered op {pos} of transaction {tx_id:#x} twice");
                continue;
            }
            op.answered = true;
            counted += 1;
            if result.code != 0 && !op.ignore_error && tx.failed.is_none() {
                tx.failed = Some((pos, result.code));
            }
        }
        assert!(counted <= tx.outstanding, "every op is answered once");
        tx.outstanding -= counted;
        if let TxState::Executing { pass_through, .. } = &mut tx.state {
            *pass_through &= in_order && counted as usize == reader.len();
        }
        tx.confs.push(results);
        if let Some((pos, code)) = tx.failed {
            let op = tx.ops[pos];
            let table = self.tables.get(&op.table_id).map(|t| t.def.name.as_str());
            let message = error::failed_op_message(table, op.table_id, op.op_index, code);
            return self.fail(slot, code, op.op_index, message, ctx);
        }
        if tx.outstanding == 0 {
            self.request_done(slot, ctx);
        }
    }

    /// The one-phase commit of `slot` is done (its LDM committed and needs
    /// no redo space, `LdmKeyCommitted { pending: 0 }`) and `results`, the
    /// LDM's batch, answers every op of its one request in order: what
    /// `request_done`, `start_commit` and `commit_confirmed` would do for
    /// it, straight (the common update). Its request was the whole
    /// transaction, so it has no plan, scan or other batch, and its
    /// participants are the LDM that answered and, with two replicas, its
    /// backup, which committed first.
    fn one_phase_done(&mut self, slot: u32, results: Vec<u8>, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        debug_assert!(
            tx.state
                == TxState::Executing {
                    pass_through: true,
                    one_phase: OnePhase::Committed { pending: false },
                }
                && tx.flags & tc_flags::COMMIT != 0
                && !tx.plan.active
                && tx.scans == 0
                && tx.confs.is_empty()
                && tx.participants.len() <= 2,
            "a one-phase commit is one request, the whole transaction"
        );
        tx.outstanding = 0;
        tx.state = TxState::Committing;
        tx.reply = results;
        let epoch = tx.epoch;
        self.commit_done(slot, epoch, ctx);
    }

    /// Every op of the request is answered, none failed: reply, or commit.
    ///
    /// The common request (one LDM batch, results in request order, the
    /// client's op_index its position) is answered with the LDM's result
    /// batch itself: it is already what the client must get, so it is
    /// neither parsed again nor re-encoded.
    pub(crate) fn request_done(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        let pass_through = matches!(
            tx.state,
            TxState::Executing {
                pass_through: true,
                ..
            }
        );
        let whole = pass_through && !tx.plan.active && tx.confs.len() == 1;
        let mut out = if whole {
            let conf = tx.confs.pop().expect("one batch");
            debug_assert!(
                ResultReader::framed(&conf).is_ok_and(|r| r.len() == tx.ops.len()
                    && r.iter()
                        .enumerate()
                        .all(|(pos, res)| res.op_index as usize == pos)),
                "a passed-through batch answers every op in order"
            );
            conf
        } else {
            self.scratch.buffer()
        };
        let written = if whole {
            Ok(())
        } else if self.transactions.get(slot).plan.active {
            self.write_plan_results(slot, &mut out)
        } else {
            self.write_results(slot, &mut out)
        };
        self.transactions.get_mut(slot).plan.end(&mut self.scratch);
        if let Err(e) = written {
            return self.fail(
                slot,
                e.code(),
                u32::MAX,
                error::reply_too_large_message(&e),
                ctx,
            );
        }
        let tx = self.transactions.get_mut(slot);
        for conf in tx.confs.drain(..) {
            self.scratch.recycle(conf);
        }
        self.answer_request(slot, out, ctx);
    }

    /// The request of `slot` is done and `out` is its reply's results:
    /// commit (the reply waits for the outcome), or answer now.
    fn answer_request(&mut self, slot: u32, out: Vec<u8>, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        debug_assert!(
            tx.confs.is_empty() && !tx.plan.active,
            "a request's batches are used up before it is answered"
        );
        if tx.flags & tc_flags::COMMIT != 0 {
            tx.reply = out;
            return self.start_commit(slot, ctx);
        }
        tx.state = TxState::Idle;
        let (api, tx_id) = (tx.api.expect("a transaction has a client"), tx.tx_id);
        // `last_active` is the request's arrival (set when it came).
        let latency = ctx.now().saturating_since(tx.last_active);
        self.counters.key_latency.record(latency);
        ctx.send(
            api,
            SignalBody::TcKeyConf {
                tx_id,
                flags: 0,
                epoch: 0,
                incarnation: 0,
                results: out,
            },
        );
    }

    /// The reply's results, in request order, naming the client's op_index.
    fn write_results(&self, slot: u32, out: &mut Vec<u8>) -> Result<(), proto::ProtoError> {
        let tx = self.transactions.get(slot);
        // Not the common case (see `request_done`): a small allocation.
        let mut by_pos: Vec<Option<OpResult<'_>>> = vec![None; tx.ops.len()];
        for conf in &tx.confs {
            let reader = ResultReader::framed(conf).expect("framed when it came");
            for result in reader.iter() {
                if let Some(entry) = by_pos.get_mut(result.op_index as usize) {
                    *entry = Some(result);
                }
            }
        }
        let mut writer = ResultWriter::new(out);
        for (op, result) in tx.ops.iter().zip(&by_pos) {
            if op.code != 0 {
                writer.error(op.op_index, op.code)?;
                continue;
            }
            let result = result.expect("every op sent was answered");
            if result.has_row {
                writer.row(op.op_index);
                for v in result.values() {
                    writer.value(v);
                }
                for k in result.keys() {
                    writer.key(k);
                }
                writer.end_row()?;
            } else if result.code == 0 {
                writer.ok(op.op_index)?;
            } else {
                writer.error(op.op_index, result.code)?;
            }
        }
        Ok(())
    }

    /// Commits with the current GCI, or waits for the first one or for a
    /// GCI switch in progress (`tc::gcp`).
    pub(crate) fn start_commit(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let (gci, epoch) = (self.gci, self.epoch);
        let tx = self.transactions.get_mut(slot);
        if let TxState::Executing {
            one_phase: OnePhase::Committed { pending },
            ..
        } = tx.state
        {
            // One-phase: committed with its ops, in the GCI and epoch
            // counted when it was sent; done, or done once `LdmCommitConf`
            // comes (pending).
            tx.state = TxState::Committing;
            tx.confs_waiting = 1;
            if !pending {
                for p in &mut tx.participants {
                    p.done = true;
                }
                self.commit_confirmed(slot, ctx);
            }
            return;
        }
        if tx.participants.is_empty() {
            // Committed reads only: nothing to commit anywhere.
            tx.gci = gci;
            tx.epoch = epoch;
            return self.end_transaction(slot, true, ctx);
        }
        if gci == 0 || self.gci_held.is_some() {
            tx.state = TxState::WaitingForGci;
            self.waiting_for_gci.push(slot);
            return;
        }
        tx.state = TxState::Committing;
        tx.gci = gci;
        let tx_id = tx.tx_id;
        let down = self.map.down();
        let tx = self.transactions.get_mut(slot);
        tx.confs_waiting = 0;
        for chain in 0..tx.chains {
            // Gathered with the other commits of this round (`commits`).
            let tx = self.transactions.get_mut(slot);
            if let Some((first, next)) = chain_of(tx, chain, &down) {
                tx.confs_waiting += 1;
                self.queue_commit(tx_id, epoch, first, &next, ctx);
            }
        }
        let tx = self.transactions.get_mut(slot);
        // A participant always has a live replica beside a failed one (its
        // node group has a live node), and a write has every replica.
        assert!(
            tx.confs_waiting > 0,
            "transaction {tx_id:#x} commits with no live participant"
        );
        tx.epoch = epoch;
        self.commits_in_progress.add(epoch);
    }

    pub(crate) fn on_commit_conf(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        gci: u32,
        ctx: &mut Context<'_>,
    ) {
        let Some(&slot) = self.by_tx_id.get(&tx_id) else {
            return self.takeover_conf(from, tx_id, ctx);
        };
        let tx = self.transactions.get_mut(slot);
        if tx.state == (TxState::Aborting { one_phase: true }) && tx.participants.len() == 2 {
            return self.committed_by_backup(slot, from, gci, ctx);
        }
        if tx.state != TxState::Committing || tx.gci != gci {
            tracing::warn!(tc = %self.me, "LdmCommitConf for transaction {tx_id:#x} GCI {gci} not committing: ignored");
            return;
        }
        let chain = tx
            .participants
            .iter()
            .find(|p| p.node == from.node && p.instance == from.instance)
            .map(|p| p.chain);
        let Some(chain) = chain else {
            tracing::warn!(
                tc = %self.me,
                "LdmCommitConf for transaction {tx_id:#x} from {from}, not a participant: ignored"
            );
            return;
        };
        if tx_chain_done(&tx.participants, chain) {
            // The first of two runs of a restarted chain answered already.
            return;
        }
        for p in tx.participants.iter_mut().filter(|p| p.chain == chain) {
            p.done = true;
        }
        self.commit_confirmed(slot, ctx);
    }

    /// The backup of a one-phase commit over two replicas, asked after its
    /// primary's node failed (`LdmOutcomeReq`), committed it: the commit
    /// stands. Its ops were writes returning no row (`one_phase_gci`), so
    /// each one's answer is a success.
    fn committed_by_backup(&mut self, slot: u32, from: BlockRef, gci: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        let backup = tx.participants[1];
        assert!(
            from.node == backup.node
                && from.instance == backup.instance
                && !backup.done
                && tx.gci == gci,
            "{from} committed transaction {:#x} in GCI {gci}, not its backup {backup:?} in GCI {}",
            tx.tx_id,
            tx.gci
        );
        tracing::info!(
            tc = %self.me,
            "transaction {:#x}: its primary failed; its backup {from} committed it",
            tx.tx_id
        );
        let mut reply = std::mem::take(&mut tx.reply);
        reply.clear();
        let mut writer = proto::results::ResultWriter::new(&mut reply);
        for op in &tx.ops {
            writer.ok(op.op_index).expect("a success per op fits");
        }
        drop(writer);
        tx.reply = reply;
        tx.abort_reply = AbortReply::None;
        tx.outstanding = 0;
        tx.state = TxState::Committing;
        let epoch = tx.epoch;
        self.commit_done(slot, epoch, ctx);
    }

    /// A node failure while `slot` commits: every chain not yet answered
    /// that had a participant on a failed node runs again over its live
    /// participants (those that committed already pass it on); a chain with
    /// none left counts as answered (its replicas elsewhere stand for it).
    pub(crate) fn commit_after_failure(&mut self, slot: u32, ctx: &mut Context<'_>) {
        // The gathered chains leave first, as they would have: the chains
        // run again below are then the later ones, as without batches.
        self.flush_commits(ctx);
        let down = self.map.down();
        let me = self.me;
        let tx = self.transactions.get_mut(slot);
        debug_assert_eq!(tx.state, TxState::Committing);
        let mut ended = 0;
        for chain in 0..tx.chains {
            let hit = tx
                .participants
                .iter()
                .any(|p| p.chain == chain && !p.done && down.contains(p.node));
            if hit && !send_chain(tx, chain, &down, me, ctx) {
                ended += 1;
            }
        }
        for _ in 0..ended {
            self.commit_confirmed(slot, ctx);
        }
    }

    /// One participant more confirmed the commit in progress (or failed).
    pub(crate) fn commit_confirmed(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        let epoch = tx.epoch;
        assert!(tx.confs_waiting > 0, "commit confirmations counted");
        tx.confs_waiting -= 1;
        if tx.confs_waiting == 0 {
            self.commit_done(slot, epoch, ctx);
        }
    }

    /// Every participant of `slot` confirmed its commit in `epoch`: the
    /// commit is no longer in progress there, and the client is answered.
    fn commit_done(&mut self, slot: u32, epoch: u64, ctx: &mut Context<'_>) {
        self.commits_in_progress.remove(epoch);
        // The master reports an epoch complete only once no commit of
        // it is in progress on any TC (`tc::gcp`).
        assert!(
            epoch > self.complete_epoch,
            "a commit answered in epoch {epoch:#x}, already reported complete ({:#x})",
            self.complete_epoch
        );
        self.end_transaction(slot, true, ctx);
        self.check_commit(ctx);
    }

    /// Aborts because of a failed op, a bad request or overload, answering
    /// the request with `TcKeyRef`.
    pub(crate) fn fail(
        &mut self,
        slot: u32,
        code: u32,
        op_index: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        self.abort(
            slot,
            AbortReply::Failed {
                code,
                op_index,
                message,
            },
            ctx,
        );
    }

    /// A lock wait (of a key request or a scan) timed out.
    pub(crate) fn lock_timeout(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get(slot);
        if !tx.state.is_open() {
            // Decided: committing, aborting, or committed by its LDM (the
            // rest of whose answer is on its way).
            return;
        }
        self.counters.lock_timeouts += 1;
        let executing = tx.state.is_executing();
        let message = format!(
            "transaction {:#x} waited longer than TransactionDeadlockDetectionTimeout ({} ms) for a lock, \
             probably a deadlock: aborted",
            tx.tx_id,
            self.config.deadlock_timeout.as_millis()
        );
        self.close_scans_of(slot, error::LOCK_TIMEOUT, &message, ctx);
        let reply = if executing {
            AbortReply::Failed {
                code: error::LOCK_TIMEOUT,
                op_index: u32::MAX,
                message,
            }
        } else {
            AbortReply::None
        };
        self.abort(slot, reply, ctx);
    }

    /// An LDM's ALTER TABLE waits for this transaction's locks
    /// (`TcAbortTxReq`): an open one is aborted, its client told at its
    /// next execute (or now, if executing) with the temporary 4012-like
    /// "aborted, retry"; one that is committing or gone is left alone.
    pub(crate) fn on_abort_tx_req(&mut self, tx_id: u64, why: &str, ctx: &mut Context<'_>) {
        let Some(&slot) = self.by_tx_id.get(&tx_id) else {
            return;
        };
        if !matches!(
            self.transactions.get(slot).state,
            TxState::Idle | TxState::Executing { .. }
        ) {
            return;
        }
        tracing::warn!(tc = %self.me, "transaction {tx_id:#x}: {why}; aborting it");
        self.cluster_change_abort(slot, why, ctx);
    }

    /// API node `node` failed: its transactions can never be finished by
    /// it, so those not yet committing are aborted (their locks released);
    /// a commit already decided completes. Nothing is answered to the
    /// dead node that matters.
    pub(crate) fn on_api_failed(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        let mut slots: Vec<u32> = self
            .by_tx_id
            .values()
            .copied()
            .filter(|&slot| {
                let tx = self.transactions.get(slot);
                tx.api.is_some_and(|api| api.node == node) && tx.state.is_open()
            })
            .collect();
        // Deterministic order (the map's is not).
        slots.sort_unstable();
        if !slots.is_empty() {
            tracing::info!(
                tc = %self.me,
                "API node {node} failed: aborting its {} transactions",
                slots.len()
            );
        }
        for slot in slots {
            self.close_scans_of(
                slot,
                error::NODE_FAILURE_ABORTED,
                "the API node failed",
                ctx,
            );
            self.abort(slot, AbortReply::None, ctx);
        }
    }

    /// Sends `LdmAbortReq` to every participant; answers when all confirm.
    pub(crate) fn abort(&mut self, slot: u32, reply: AbortReply, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        let one_phase = match tx.state {
            TxState::Idle => false,
            // Still counted in its epoch until it ends (`end_transaction`).
            TxState::Executing { one_phase, .. } => one_phase != OnePhase::No,
            state => panic!("transaction {:#x} aborted in state {state:?}", tx.tx_id),
        };
        tx.state = TxState::Aborting { one_phase };
        tx.abort_reply = reply;
        let tx_id = tx.tx_id;
        let down = self.map.down();
        let tx = self.transactions.get_mut(slot);
        tx.confs_waiting = if one_phase && tx.participants.len() == 2 {
            abort_decided_by_backup(tx, &down, ctx)
        } else {
            send_to_live(tx, &down, SignalBody::LdmAbortReq { tx_id }, ctx)
        };
        let none_waiting = tx.confs_waiting == 0;
        // Its scans end with the abort's reason (a rollback asked for: the
        // scan is simply gone).
        let code = match &tx.abort_reply {
            AbortReply::Failed { code, .. } => *code,
            AbortReply::None | AbortReply::RolledBack => error::UNKNOWN_SCAN,
        };
        self.close_scans_of(slot, code, "the scan's transaction was aborted", ctx);
        if none_waiting {
            self.end_transaction(slot, false, ctx);
        }
    }

    pub(crate) fn on_abort_conf(&mut self, from: BlockRef, tx_id: u64, ctx: &mut Context<'_>) {
        let Some(&slot) = self.by_tx_id.get(&tx_id) else {
            return self.takeover_conf(from, tx_id, ctx);
        };
        let tx = self.transactions.get_mut(slot);
        if !matches!(tx.state, TxState::Aborting { .. }) {
            tracing::warn!(tc = %self.me, "LdmAbortConf for transaction {tx_id:#x} not aborting: ignored");
            return;
        }
        if !confirm(tx, from) {
            tracing::warn!(
                tc = %self.me,
                "LdmAbortConf for transaction {tx_id:#x} from {from}, not a participant waited for: ignored"
            );
            return;
        }
        self.abort_confirmed(slot, ctx);
    }

    /// One participant more confirmed the abort in progress (or failed).
    pub(crate) fn abort_confirmed(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let tx = self.transactions.get_mut(slot);
        assert!(tx.confs_waiting > 0, "abort confirmations counted");
        tx.confs_waiting -= 1;
        if tx.confs_waiting == 0 {
            self.end_transaction(slot, false, ctx);
        }
    }

    /// The transaction's one outcome: answer the client and free the record.
    pub(crate) fn end_transaction(&mut self, slot: u32, committed: bool, ctx: &mut Context<'_>) {
        let incarnation = self.incarnation.id;
        let tx = self.transactions.get_mut(slot);
        let tx_id = tx.tx_id;
        let api = tx.api.expect("a transaction has a client");
        // A commit its client asked for (not one a takeover decided): when
        // the request that asked came.
        let commit_asked_at = (tx.flags & tc_flags::COMMIT != 0 && tx.last_active != Instant::ZERO)
            .then_some(tx.last_active);
        let reply = if committed {
            Some(SignalBody::TcKeyConf {
                tx_id,
                flags: tc_flags::COMMITTED,
                epoch: tx.epoch,
                incarnation,
                results: std::mem::take(&mut tx.reply),
            })
        } else {
            match std::mem::take(&mut tx.abort_reply) {
                AbortReply::None => None,
                AbortReply::RolledBack => Some(SignalBody::TcKeyConf {
                    tx_id,
                    flags: tc_flags::ROLLED_BACK,
                    epoch: 0,
                    incarnation: 0,
                    results: Vec::new(),
                }),
                AbortReply::Failed {
                    code,
                    op_index,
                    message,
                } => Some(SignalBody::TcKeyRef {
                    tx_id,
                    code,
                    op_index,
                    message,
                }),
            }
        };
        let uncount = tx.state.one_phase_out();
        tx.participants.clear();
        tx.plan.end(&mut self.scratch);
        for conf in tx.confs.drain(..) {
            self.scratch.recycle(conf);
        }
        if self.transactions.get(slot).scans > 0 {
            self.close_scans_of(
                slot,
                error::UNKNOWN_SCAN,
                "the scan's transaction ended",
                ctx,
            );
        }
        self.unregister(slot);
        if uncount {
            // Aborted with its one-phase commit never done.
            debug_assert!(!committed);
            self.uncount_one_phase(slot, ctx);
        }
        self.transactions.release(slot);
        if committed {
            self.counters.committed += 1;
            if let Some(asked) = commit_asked_at {
                let latency = ctx.now().saturating_since(asked);
                self.counters.commit_latency.record(latency);
            }
        } else {
            self.counters.aborted += 1;
        }
        if let Some(reply) = reply {
            ctx.send(api, reply);
        }
    }
}

/// Sends `body` (a commit or abort) to every participant whose node is
/// not down, marking the others done; how many will answer.
fn send_to_live(
    tx: &mut Transaction,
    down: &NodeBitmask,
    body: SignalBody,
    ctx: &mut Context<'_>,
) -> u32 {
    let mut waiting = 0;
    for p in &mut tx.participants {
        p.done = down.contains(p.node);
        if !p.done {
            waiting += 1;
            ctx.send(
                BlockRef::new(p.node, BlockNumber::LOCAL_DATA_MANAGER, p.instance),
                body.clone(),
            );
        }
    }
    waiting
}

/// The abort of a one-phase commit over two replicas, which its backup
/// decides (docs/transactions.md, "One-phase commit"): to the primary,
/// which passes it on behind the ops it sent the backup and answers for
/// both; with the primary's node failed, to the backup as `LdmOutcomeReq`
/// (it committed, or aborts). How many confirmations to wait for.
pub(crate) fn abort_decided_by_backup(
    tx: &mut Transaction,
    down: &NodeBitmask,
    ctx: &mut Context<'_>,
) -> u32 {
    let tx_id = tx.tx_id;
    let (asked, body) = if !down.contains(tx.participants[0].node) {
        (0, SignalBody::LdmAbortReq { tx_id })
    } else if !down.contains(tx.participants[1].node) {
        (1, SignalBody::LdmOutcomeReq { tx_id })
    } else {
        (usize::MAX, SignalBody::LdmAbortReq { tx_id })
    };
    // Only the one asked confirms.
    for (i, p) in tx.participants.iter_mut().enumerate() {
        p.done = i != asked;
    }
    let Some(p) = tx.participants.get(asked) else {
        return 0;
    };
    ctx.send(
        BlockRef::new(p.node, BlockNumber::LOCAL_DATA_MANAGER, p.instance),
        body,
    );
    1
}

/// Sends commit chain `chain` of `tx`, its live participants from the
/// last one named to the first (a write's backups, then its primary:
/// NDB's order), as one `LdmCommitChainReq` passed along them; marks the
/// failed ones done. False when it has no live participant that is not
/// done (nothing sent).
fn send_chain(
    tx: &mut Transaction,
    chain: u16,
    down: &NodeBitmask,
    tc: BlockRef,
    ctx: &mut Context<'_>,
) -> bool {
    let Some((first, next)) = chain_of(tx, chain, down) else {
        return false;
    };
    send_chain_req(first, tx.tx_id, tx.epoch, tc, &next, ctx);
    true
}

/// Commit chain `chain` of `tx`: its first live participant not done, from
/// the last one named (NDB's order), and the others after it; marks the
/// failed ones done. `None` when no live participant is left to commit.
/// Inlined: every commit of a write with replicas runs it.
#[inline]
fn chain_of(tx: &mut Transaction, chain: u16, down: &NodeBitmask) -> Option<(BlockRef, ChainRest)> {
    let mut first = None;
    let mut next = ChainRest::new();
    for p in tx
        .participants
        .iter_mut()
        .rev()
        .filter(|p| p.chain == chain && !p.done)
    {
        if down.contains(p.node) {
            p.done = true;
            continue;
        }
        let ldm = BlockRef::new(p.node, BlockNumber::LOCAL_DATA_MANAGER, p.instance);
        if first.is_none() {
            first = Some(ldm);
        } else {
            next.push(ldm);
        }
    }
    Some((first?, next))
}

/// Whether every participant of `chain` is done (its commit answered).
fn tx_chain_done(participants: &[Participant], chain: u16) -> bool {
    participants
        .iter()
        .filter(|p| p.chain == chain)
        .all(|p| p.done)
}

/// Marks the participant `from` done; false if it is none waited for.
fn confirm(tx: &mut Transaction, from: BlockRef) -> bool {
    match tx
        .participants
        .iter_mut()
        .find(|p| p.node == from.node && p.instance == from.instance && !p.done)
    {
        Some(p) => {
            p.done = true;
            true
        }
        None => false,
    }
}

/// Whether `results` is what `LdmKeyConf::ok_in_order` = `claim` says: that
/// many results, each a success, answering ops 0, 1, … in order.
pub(crate) fn agrees_with_batch(results: &[u8], claim: u32) -> bool {
    ResultReader::framed(results).is_ok_and(|reader| {
        reader.len() == claim as usize
            && reader
                .iter()
                .enumerate()
                .all(|(pos, r)| r.code == 0 && r.op_index as usize == pos)
    })
}

/// An op copied from a batch that fit every limit broke one: a bug.
fn unreachable_limit(e: &proto::ProtoError) -> ! {
    panic!("a part of a valid op batch broke a batch limit: {e}");
}

/// The group of an op on `partition` among `groups`, made if new.
pub(crate) fn group_in(
    map: &LiveMap,
    groups: &mut Vec<Group>,
    partition: u32,
    full: bool,
    kind: OpKind,
    lock: LockMode,
) -> u16 {
    group_at(
        map.home_of(partition, full),
        groups,
        partition,
        full,
        kind,
        lock,
    )
}

/// [`group_in`] with the partition's `home` known.
#[inline]
fn group_at(
    home: PartitionHome,
    groups: &mut Vec<Group>,
    partition: u32,
    full: bool,
    kind: OpKind,
    lock: LockMode,
) -> u16 {
    let (primary, instance) = (home.primary(), home.ldm_instance);
    let write = kind != OpKind::Read;
    let locks = write || lock != LockMode::Committed;
    let g = match groups.iter().position(|g| {
        g.primary == primary
            && g.instance == instance
            && !g.backup_read
            && g.fully_replicated == full
    }) {
        Some(g) => g,
        None => {
            groups.push(Group {
                primary,
                instance,
                home,
                partition,
                has_write: false,
                has_lock: false,
                has_read: false,
                backup_read: false,
                fully_replicated: full,
            });
            groups.len() - 1
        }
    };
    groups[g].has_write |= write;
    groups[g].has_lock |= locks;
    groups[g].has_read |= !write;
    u16::try_from(g).expect("groups ≤ data nodes × LDM instances")
}
