//! Key operations: `LdmKeyReq` batches run against the fragments (NDB:
//! LQHKEYREQ through DBACC and DBTUP).
//!
//! A request is kept in a record ([`Requests`], bounded by
//! [`LDM_REQUESTS_MAX`] and [`LDM_OPS_MAX`]) from its arrival to its
//! answer. Its operations run in order; one that must wait for a row lock
//! parks the request (its `OpId` names the record and its generation, so a
//! grant finds it again, and a stale grant finds nothing), and the
//! transaction's later requests queue behind it. Runs of committed reads
//! of one fragment go through `Fragment::read_batch`, the fast path.
//!
//! Answers: reads and failed operations are answered here; writes that
//! succeed are answered here only at the last replica, and otherwise go on
//! to the next replica of the chain, copied unchanged. Each request gets one
//! `LdmKeyConf` (more only if its results do not fit one batch).

use kernel::Context;
use proto::error;
use proto::ops::{
    ColumnValues, LockMode, LockWait, OpBatchReader, OpBatchWriter, OpKind, OpSpan, OpView,
    KEY_INFO, NO_INDEX, NO_PARTITION, UNLOCK,
};
use proto::ProtoError;
use schema::{ColumnChanges, RowLayout, TableDef, Value, ValueRef};
use signal::{BlockNumber, BlockRef, NodeBitmask, SignalBody};
use smallvec::SmallVec;
use storage::disk::Disk;
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadBatch, ReadMode, RowBuf, READ_BATCH_KEYS_MAX,
};
use storage::instance::LdmInstance;
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;

use super::alter::AlterState;
use super::batches::{gathers_answers, KeyBatches};
use super::encoded::{put_all_columns, put_column, Gathered, RowSink};
use super::op_id;
use super::{
    tx_record, LdmBlock, LdmBlockConfig, LdmStats, LocalSchema, BUGGIFY_LIMIT_PPM, LDM_OPS_MAX,
    LDM_REQUESTS_MAX, LDM_TRANSACTIONS_MAX, REDO_HIGH_WATER_PERCENT,
};

/// A run of committed reads of one fragment, parsed once.
type ReadRun<'a> = SmallVec<[OpView<'a>; 8]>;

/// The index of a request record.
pub(super) type Slot = u32;

const _: () = assert!(LDM_REQUESTS_MAX <= op_id::REQUEST_SLOTS_MAX);

/// One `LdmKeyReq` between its arrival and its answer.
#[derive(Debug, Default)]
pub(super) struct Request {
    in_use: bool,
    generation: u32,
    tx_id: u64,
    tc: Option<BlockRef>,
    chain: signal::Chain,
    ops: Vec<u8>,
    op_count: u32,
    /// The op of a one-op request, as `on_key_req` parsed it: the first run
    /// takes it up without parsing the batch again.
    only_op: Option<OpSpan>,
    /// `LdmKeyCommitReq`'s GCI: commit in it once every op succeeded
    /// (0: an `LdmKeyReq`, which the TC commits later).
    commit_epoch: u64,
    /// The next operation to run (the one waiting, while `waiting`).
    next: u32,
    waiting: bool,
    results: Gathered,
    /// Positions of the writes that go on to the next replica.
    forward: Vec<u32>,
    /// At the backup of a one-phase commit over two replicas: the primary's
    /// instance, which this one answers (it decides the outcome).
    answer: Option<BlockRef>,
    /// At the primary of one: its ops went on to the backup, which decides.
    decider: Option<Decider>,
}

/// The primary's side of a one-phase commit over two replicas while its
/// backup decides (docs/transactions.md, "One-phase commit"). The request
/// stays first in its transaction's queue, its results (every op answered
/// here too) kept for the TC.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Decider {
    /// The backup committed and waits for redo space: its `LdmCommitConf`
    /// follows, and this replica commits after it (the primary last).
    backup_pending: bool,
    /// Who asked for an abort meanwhile (passed on to the backup behind the
    /// ops): answered once the backup has.
    abort_from: Option<BlockRef>,
}

/// What the backup of a one-phase commit over two replicas said.
#[derive(Debug)]
pub(super) enum Decision<'r> {
    /// It committed; `pending`: it waits for redo space.
    Committed { pending: bool },
    /// Its commit that waited for redo space is done.
    CommitDone,
    /// An op failed there (the result batch names it): nothing committed.
    Failed(&'r [u8]),
    /// It aborted, as asked.
    Aborted,
}

/// The request records of an instance, recycled through a free list.
#[derive(Debug, Default)]
pub(super) struct Requests {
    records: Vec<Request>,
    free: Vec<Slot>,
    used: usize,
    ops_held: usize,
}

impl Requests {
    pub(super) fn new() -> Requests {
        Requests::default()
    }

    pub(super) fn len(&self) -> usize {
        self.used
    }

    fn has_room(&self, ops: usize) -> bool {
        self.used < LDM_REQUESTS_MAX && self.ops_held + ops <= LDM_OPS_MAX
    }

    fn insert(
        &mut self,
        tx_id: u64,
        tc: BlockRef,
        chain: signal::Chain,
        // The batch, its op count and the span of a lone op.
        (ops, op_count, only_op): (Vec<u8>, u32, Option<OpSpan>),
        commit_epoch: u64,
        answer: Option<BlockRef>,
    ) -> Slot {
        assert!(
            self.has_room(op_count as usize),
            "admission checks room first"
        );
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.records.push(Request::default());
                (self.records.len() - 1) as Slot
            }
        };
        let record = &mut self.records[slot as usize];
        assert!(!record.in_use, "request slot {slot} handed out twice");
        record.in_use = true;
        record.generation = op_id::next_generation(record.generation);
        record.tx_id = tx_id;
        record.tc = Some(tc);
        record.chain = chain;
        record.ops = ops;
        record.op_count = op_count;
        debug_assert!(
            only_op.is_none() || op_count == 1,
            "a span of a one-op batch"
        );
        record.only_op = only_op;
        record.commit_epoch = commit_epoch;
        record.next = 0;
        record.waiting = false;
        record.results.clear();
        record.forward.clear();
        record.answer = answer;
        record.decider = None;
        self.used += 1;
        self.ops_held += op_count as usize;
        slot
    }

    pub(super) fn free(&mut self, slot: Slot) {
        let record = &mut self.records[slot as usize];
        assert!(record.in_use, "request slot {slot} freed twice");
        record.in_use = false;
        // Its op batch (unless forwarded) is for this thread to fill again.
        signal::buffers::keep(std::mem::take(&mut record.ops));
        record.chain = signal::Chain::new();
        self.used -= 1;
        self.ops_held -= record.op_count as usize;
        self.free.push(slot);
    }

    /// Panics when the records disagree with the counts kept of them (in
    /// use, free, operations held). O(records).
    pub(super) fn check_invariants(&self, ldm: BlockRef) {
        let mut used = 0usize;
        let mut ops = 0usize;
        for record in self.records.iter().filter(|r| r.in_use) {
            used += 1;
            ops += record.op_count as usize;
            assert!(
                record.tc.is_some() && (record.commit_epoch == 0 || record.chain.len() <= 1),
                "{ldm}: request of transaction {:#x} without a TC, or a one-phase commit with a \
                 chain of more than one backup",
                record.tx_id
            );
            assert!(
                (record.decider.is_none() || record.commit_epoch != 0 && record.chain.len() == 1)
                    && (record.answer.is_none()
                        || record.commit_epoch != 0 && record.chain.is_empty()),
                "{ldm}: request of transaction {:#x} waits for a decider, or decides, and is no \
                 one-phase commit's primary or backup",
                record.tx_id
            );
            assert!(
                record.next <= record.op_count,
                "{ldm}: request of transaction {:#x} is at op {} of {}",
                record.tx_id,
                record.next,
                record.op_count
            );
        }
        assert!(
            used == self.used && used + self.free.len() == self.records.len(),
            "{ldm}: {used} request records in use, {} counted, {} free, of {}",
            self.used,
            self.free.len(),
            self.records.len()
        );
        assert_eq!(
            ops, self.ops_held,
            "{ldm}: ops of the requests in use against the ops held"
        );
        assert!(
            used <= LDM_REQUESTS_MAX && ops <= LDM_OPS_MAX,
            "{ldm}: {used} requests and {ops} ops held, above {LDM_REQUESTS_MAX} and {LDM_OPS_MAX}"
        );
        for &slot in &self.free {
            assert!(
                !self.records[slot as usize].in_use,
                "{ldm}: request slot {slot} is free and in use"
            );
        }
    }

    /// Panics unless `slot` is a request of `tx_id` in use, waiting only
    /// when it is the first of its transaction's queue (`first`).
    pub(super) fn check_queued(&self, ldm: BlockRef, tx_id: u64, slot: Slot, first: bool) {
        let record = &self.records[slot as usize];
        assert!(
            record.in_use && record.tx_id == tx_id,
            "{ldm}: transaction {tx_id:#x} queues request slot {slot}, which is not its request"
        );
        assert!(
            first || (!record.waiting && record.next == 0),
            "{ldm}: request slot {slot} of transaction {tx_id:#x} ran behind an earlier one"
        );
    }

    /// The op id of the record the next [`Requests::insert`] hands out:
    /// an operation that runs before its request has a record (see
    /// `one_phase_at_once`) waits for a lock under it, and the record it
    /// then gets is that one.
    fn next_op_id(&self) -> OpId {
        let (slot, generation) = match self.free.last() {
            Some(&slot) => (slot, self.records[slot as usize].generation),
            None => (self.records.len() as Slot, Request::default().generation),
        };
        op_id::request(op_id::next_generation(generation), slot)
    }

    fn op_id(&self, slot: Slot) -> OpId {
        op_id::request(self.records[slot as usize].generation, slot)
    }

    /// The waiting request a grant for `op` of `tx` resumes, if any.
    fn granted(&self, tx: TxId, op: OpId) -> Option<Slot> {
        let slot = op_id::slot(op);
        let record = self.records.get(slot as usize)?;
        let live = record.in_use && record.waiting && record.tx_id == tx.0;
        (live && self.op_id(slot) == op).then_some(slot)
    }
}

/// Reused buffers of the operation paths.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The answers of a request run at once (see `committed_only`).
    results: Gathered,
    pub(super) keys: Vec<Value>,
    row_values: Vec<Value>,
    row: RowBuf,
    batch: ReadBatch,
}

/// A request's operations being run (`run_ops`): whose, and where the
/// results go.
struct OpsRun<'r> {
    tx_id: u64,
    op_id: OpId,
    forwarding: bool,
    /// Every op is answered here too, also those passed on (the primary of
    /// a one-phase commit over two replicas: its results are the TC's).
    answered_here: bool,
    /// Position in the batch of the next operation to run.
    position: u32,
    results: &'r mut Gathered,
    /// Positions of the writes that go on to the next replica.
    forward: &'r mut Vec<u32>,
}

/// Ops ahead of the running one whose hash buckets are loading: a bucket
/// has one op's run (about a microsecond) to arrive before its row is
/// prefetched, and the row another before its op runs, where a miss takes
/// 100-300 ns with its page walk.
const PREFETCH_AHEAD_OPS: usize = 2;

/// The look-ahead of [`LdmBlock::run_ops`] over a request's ops: a second
/// reader of them, `PREFETCH_AHEAD_OPS` ahead of the op running, that
/// starts loading each keyed op's hash bucket and, an op later, its row.
/// The committed reads are left to `Fragment::read_batch`'s own pipeline.
/// Hints only: what it loads changes no answer.
struct Lookahead<I> {
    feed: I,
    /// Index (from the start of the run) of the op `feed` yields next.
    next: usize,
    /// The ops fed and not yet run, at their index modulo the ring's size.
    ring: [Option<Fed>; PREFETCH_AHEAD_OPS + 1],
}

/// An op whose bucket is loading.
#[derive(Clone, Copy)]
struct Fed {
    index: usize,
    /// The op the run was at when this one was fed: its row is prefetched
    /// from a later op on, when the bucket has arrived.
    fed_at: usize,
    fragment: (u32, u32),
    hash: u64,
}

impl<'o, I: Iterator<Item = OpView<'o>>> Lookahead<I> {
    fn new(feed: I) -> Lookahead<I> {
        Lookahead {
            feed,
            next: 0,
            ring: [None; PREFETCH_AHEAD_OPS + 1],
        }
    }

    /// Before op `index` runs: feeds the ops up to `PREFETCH_AHEAD_OPS`
    /// past it (their buckets), then prefetches the next op's row.
    fn prefetch(&mut self, index: usize, instance: &mut LdmInstance, keys: &mut Vec<Value>) {
        let slots = self.ring.len();
        while self.next <= index + PREFETCH_AHEAD_OPS {
            let Some(op) = self.feed.next() else { break };
            let at = self.next;
            self.next += 1;
            self.ring[at % slots] = None;
            if is_committed_read(&op) {
                continue;
            }
            let fragment = (op.header.table_id, op.header.partition);
            let Some((f, pool)) = instance.fragment(fragment.0, fragment.1) else {
                continue;
            };
            keys.clear();
            keys.extend(op.keys().map(|v| v.to_value()));
            self.ring[at % slots] = f.prefetch_key(pool, keys).map(|hash| Fed {
                index: at,
                fed_at: index,
                fragment,
                hash,
            });
        }
        let next = index + 1;
        if let Some(fed) = self.ring[next % slots].filter(|f| f.index == next && f.fed_at < index) {
            if let Some((f, pool)) = instance.fragment(fed.fragment.0, fed.fragment.1) {
                f.prefetch_row(pool, fed.hash);
            }
        }
    }
}

/// How one operation ended at this replica.
enum Step {
    /// Answered (a result is in the request's results).
    Answered,
    /// A write that succeeded and goes on to the next replica.
    Forward,
    /// Parked: waits for a row lock.
    Wait,
}

/// What a fragment operation did.
enum OpEnd {
    /// Succeeded; `answered` when it wrote its row result already.
    Done {
        answered: bool,
    },
    NotFound,
    Waiting,
}

/// The one path a key request takes (`LdmBlock::classify_key_req`).
#[derive(Clone, Copy, Debug)]
enum KeyReqPath {
    /// Dropped unanswered: a malformed batch (only a bug sends one), a
    /// late request of a transaction aborted here, or one from a TC whose
    /// node failed (its transaction is ended by the takeover).
    Drop,
    /// Every op answered with this error, nothing run: the instance is
    /// not open, its fragments are partial copies, or no record is free.
    Refuse(u32),
    /// Committed reads only, of a transaction with nothing here: run now,
    /// with no request or transaction record.
    CommittedReads,
    /// A one-phase commit of one write of a transaction with nothing here:
    /// run and committed now (`one_phase_at_once`).
    OnePhaseAtOnce(OpSpan),
    /// Kept in a request record behind the transaction's earlier ones.
    Queue {
        op_count: u32,
        only_op: Option<OpSpan>,
    },
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// `LdmKeyReq` (`commit_epoch` 0) or `LdmKeyCommitReq`: classifies the
    /// request, then runs its one path; the op batch is given back in one
    /// place (by the paths that do not keep it), and the lock waiters that
    /// the path's commit released run in one place. `answer`: the primary
    /// this backup answers in a one-phase commit over two replicas.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_key_req(
        &mut self,
        sender: BlockRef,
        tx_id: u64,
        tc: BlockRef,
        (mut chain, answer): (signal::Chain, Option<BlockRef>),
        ops: Vec<u8>,
        commit_epoch: u64,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        self.stats.key_requests += 1;
        debug_assert!(
            commit_epoch == 0 || chain.len() <= 1,
            "a one-phase commit has at most one backup"
        );
        debug_assert!(
            answer.is_none() || (commit_epoch != 0 && chain.is_empty()),
            "the backup of a one-phase commit is its last replica"
        );
        // The views of a short batch are kept as it is read: a batch of
        // committed reads is then parsed once here.
        let mut views: ReadRun<'_> = SmallVec::new();
        let path = match self.classify_key_req(
            sender,
            tx_id,
            tc,
            &mut chain,
            &ops,
            commit_epoch,
            &mut views,
        ) {
            // Buggify: the LDM request limit (1217), as under a burst.
            KeyReqPath::Queue { .. } if ctx.buggify_ppm(BUGGIFY_LIMIT_PPM) => {
                KeyReqPath::Refuse(error::OUT_OF_LDM_OPERATIONS)
            }
            path => path,
        };
        let (unused, ran) = match path {
            KeyReqPath::Drop => {
                drop(views);
                (Some(ops), false)
            }
            KeyReqPath::Refuse(code) => {
                drop(views);
                self.answer_all(tx_id, tc, &ops, code, ctx);
                (Some(ops), false)
            }
            KeyReqPath::CommittedReads => {
                let mut results = std::mem::take(&mut self.scratch.results);
                results.clear();
                self.committed_only(&views, &mut results);
                send_results(tx_id, tc, &results, None, ctx);
                self.scratch.results = results;
                drop(views);
                (Some(ops), false)
            }
            KeyReqPath::OnePhaseAtOnce(span) => {
                drop(views);
                self.one_phase_at_once(tx_id, (tc, answer), ops, span, commit_epoch, ctx);
                (None, true)
            }
            KeyReqPath::Queue { op_count, only_op } => {
                drop(views);
                let batch = (ops, op_count, only_op);
                let ran = self.queue_request(tx_id, (tc, answer), chain, batch, commit_epoch, ctx);
                (None, ran)
            }
        };
        if let Some(ops) = unused {
            ctx.recycle(ops);
        }
        if ran {
            // A commit released locks: their waiters run now. (A request
            // resumed by a grant runs inside `run_grants`.)
            self.run_grants(ctx);
            self.check_alter(ctx);
        }
    }

    /// Decides the path of a key request (see [`KeyReqPath`]), reading
    /// its batch into `views` (those of a short batch); counts its ops and
    /// leaves the failed nodes out of its `chain`. Runs nothing.
    #[allow(clippy::too_many_arguments)]
    fn classify_key_req<'o>(
        &mut self,
        sender: BlockRef,
        tx_id: u64,
        tc: BlockRef,
        chain: &mut signal::Chain,
        ops: &'o [u8],
        commit_epoch: u64,
        views: &mut ReadRun<'o>,
    ) -> KeyReqPath {
        // Built by a TC from operations it checked (`OpBatchReader::framed`).
        let reader = match OpBatchReader::framed_each(ops, |view| {
            if views.len() < views.inline_size() {
                views.push(view);
            }
        }) {
            Ok(reader) => reader,
            Err(e) => {
                // Only a bug sends this: there is no operation to answer.
                tracing::error!(
                    node = %self.config.node,
                    "LDM instance {}: malformed op batch of transaction {tx_id:#x} from {tc}: {e}",
                    self.config.instance
                );
                return KeyReqPath::Drop;
            }
        };
        let op_count = reader.len();
        self.stats.ops += op_count as u64;
        if self.aborted.contains(tx_id) {
            // Overtaken by the transaction's abort: executing it now would
            // take locks nobody releases. Its TC has ended the transaction.
            tracing::debug!(
                node = %self.config.node,
                "LDM instance {}: dropped a late request of aborted transaction {tx_id:#x}",
                self.config.instance
            );
            return KeyReqPath::Drop;
        }
        if self.instance.is_none() {
            return KeyReqPath::Refuse(error::NOT_STARTED);
        }
        if self.is_from_failed_tc(tc, chain) {
            return KeyReqPath::Drop;
        }
        if sender.block == BlockNumber::TRANSACTION_COORDINATOR && self.refuses_partial_copy() {
            return KeyReqPath::Refuse(error::NODE_FAILURE_ABORTED);
        }
        if sender.block == BlockNumber::TRANSACTION_COORDINATOR
            && !self.live.members().contains(self.config.node)
        {
            // This node has not joined the cluster since it started: the
            // TC's view still holds this node's earlier incarnation (a
            // node restarted while the other side of a split waited for
            // the arbitrator, its connection back before the view that
            // removes it). Its writes belong to that incarnation; taken
            // here, they would sit in fragments about to be emptied for
            // the copy (the whole-cluster soak's seed 1796242536713195).
            self.stats.refused_starting += 1;
            return KeyReqPath::Refuse(error::NODE_FAILURE_ABORTED);
        }
        let known = self.txs.contains_key(&tx_id);
        if chain.is_empty()
            && commit_epoch == 0
            && views.len() == op_count
            && views.iter().all(is_committed_read)
            && !known
        {
            // The common read: nothing of the transaction is queued here
            // and committed reads neither wait nor leave anything behind.
            return KeyReqPath::CommittedReads;
        }
        let only_op = match views.as_slice() {
            [view] if op_count == 1 => Some(view.span(ops)),
            _ => None,
        };
        let lone_write = matches!(views.as_slice(), [view] if !is_committed_read(view));
        let room = self.requests.has_room(op_count);
        let tx_room = known || self.txs.len() < LDM_TRANSACTIONS_MAX;
        match only_op {
            Some(span)
                if commit_epoch != 0
                    && chain.is_empty()
                    && lone_write
                    && room
                    && tx_room
                    && !known =>
            {
                KeyReqPath::OnePhaseAtOnce(span)
            }
            _ if room && tx_room => KeyReqPath::Queue {
                op_count: op_count as u32,
                only_op,
            },
            _ => KeyReqPath::Refuse(error::OUT_OF_LDM_OPERATIONS),
        }
    }

    /// Keeps a request in a record behind its transaction's earlier ones,
    /// and runs it when it is the first; whether it ran.
    fn queue_request(
        &mut self,
        tx_id: u64,
        (tc, answer): (BlockRef, Option<BlockRef>),
        chain: signal::Chain,
        batch: (Vec<u8>, u32, Option<OpSpan>),
        commit_epoch: u64,
        ctx: &mut Context<'_>,
    ) -> bool {
        let LdmBlock {
            txs,
            free_txs,
            requests,
            ..
        } = self;
        let record = tx_record(txs, free_txs, tx_id, tc).expect("room checked by classify_key_req");
        let slot = requests.insert(tx_id, tc, chain, batch, commit_epoch, answer);
        record.queue.push_back(slot);
        let first = record.queue.len() == 1;
        if first {
            self.run_requests(slot, ctx);
        }
        first
    }

    /// A one-phase commit of one write (the common update) of a
    /// transaction with nothing here: runs its op at once, with neither a
    /// request record nor a transaction record, and commits. Only what
    /// must outlive this call gets a record, as the general path
    /// (`run_requests`, `finish_one_phase`) would leave it: an op waiting
    /// for a lock parks in a request record (the one its op id names) of
    /// the transaction's record; an op that failed leaves its fragment in
    /// the transaction's record, for the TC's abort. As the backup of a
    /// one-phase commit over two replicas (`primary`) it answers the primary
    /// and, as the decider, aborts a failed op at once.
    fn one_phase_at_once(
        &mut self,
        tx_id: u64,
        (tc, primary): (BlockRef, Option<BlockRef>),
        ops: Vec<u8>,
        span: OpSpan,
        epoch: u64,
        ctx: &mut Context<'_>,
    ) {
        let gci = signal::epoch::hi(epoch);
        let op_id = self.requests.next_op_id();
        let mut results = std::mem::take(&mut self.scratch.results);
        results.clear();
        let passing = (false, false);
        let (step, touched) = self.run_one(tx_id, op_id, &span.view(&ops), passing, &mut results);
        match step {
            Step::Wait => {
                self.stats.ops_waited += 1;
                let LdmBlock {
                    txs,
                    free_txs,
                    requests,
                    ..
                } = self;
                let record = tx_record(txs, free_txs, tx_id, tc).expect("room checked at arrival");
                record.fragments.extend(touched);
                let batch = (ops, 1, Some(span));
                let slot = requests.insert(tx_id, tc, signal::Chain::new(), batch, epoch, primary);
                assert_eq!(
                    requests.op_id(slot),
                    op_id,
                    "the waiting op's request takes the record its op id names"
                );
                record.queue.push_back(slot);
                requests.records[slot as usize].waiting = true;
            }
            Step::Forward => unreachable!("a one-phase commit has no replica to pass ops on to"),
            Step::Answered if results.len() == 1 && results.all_succeeded() => {
                self.stats.one_phase_commits += 1;
                let fragments = touched.into_iter().collect();
                let to = primary.unwrap_or(tc);
                let done = self.commit_tx(to, &[], tx_id, epoch, Some((tc, fragments)), ctx);
                send_results(tx_id, to, &results, Some((gci, !done)), ctx);
                ctx.recycle(ops);
            }
            Step::Answered if primary.is_some() => {
                // The decider: nothing of it commits anywhere.
                if let (Some((t, p)), Some(instance)) = (touched, self.instance.as_mut()) {
                    let _ = instance.abort(t, p, TxId(tx_id), &mut self.grants);
                }
                self.stats.aborts += 1;
                results.keep_first_failure();
                send_results(tx_id, primary.unwrap_or(tc), &results, None, ctx);
                ctx.recycle(ops);
            }
            Step::Answered => {
                if let Some(key) = touched {
                    let record = tx_record(&mut self.txs, &mut self.free_txs, tx_id, tc)
                        .expect("room checked at arrival");
                    record.fragments.push(key);
                }
                let LdmBlock {
                    me,
                    key_batches,
                    stats,
                    ..
                } = self;
                answer(*me, key_batches, stats, tx_id, tc, &results, ctx);
                ctx.recycle(ops);
            }
        }
        self.scratch.results = results;
    }

    /// Runs a batch of committed reads only, answering each in `out`, in
    /// batch order (the TC passes results in op order through unread).
    fn committed_only(&mut self, ops: &[OpView<'_>], out: &mut Gathered) {
        // Each op is parsed once; a run of one fragment's reads is read in
        // one `read_batch`. Runs are short in the common case (one op per
        // transaction), so they stay on the stack.
        let mut run: ReadRun<'_> = SmallVec::new();
        for &op in ops {
            if let Err(code) = self.check_op(&op) {
                self.flush_reads(&mut run, out);
                out.error(op.header.op_index, code);
                continue;
            }
            if run.len() == READ_BATCH_KEYS_MAX
                || run.first().is_some_and(|h| !same_fragment(h, &op))
            {
                self.flush_reads(&mut run, out);
            }
            run.push(op);
        }
        self.flush_reads(&mut run, out);
    }

    fn flush_reads(&mut self, run: &mut ReadRun<'_>, out: &mut Gathered) {
        if !run.is_empty() {
            self.committed_reads(run, out);
            run.clear();
        }
    }

    /// Whether a request straight from a TC is refused (286, counted)
    /// because this node's fragments are partial copies. A TC sends
    /// straight to an instance only as the partition's primary (or a
    /// serving backup's committed read); a starting node reaches that role
    /// only when no serving replica is left (`LiveMap::home_of` falls back
    /// to the view), and an answer from partial copies would miss rows.
    /// Temporary: the next view or the node's restart settles it.
    pub(super) fn refuses_partial_copy(&mut self) -> bool {
        let refused = self.restart.holds_partial_copy();
        if refused {
            self.stats.refused_starting += 1;
        }
        refused
    }

    /// Answers every operation of a batch with `code`.
    fn answer_all(
        &mut self,
        tx_id: u64,
        tc: BlockRef,
        ops: &[u8],
        code: u32,
        ctx: &mut Context<'_>,
    ) {
        let Ok(reader) = OpBatchReader::framed(ops) else {
            return;
        };
        let mut gathered = Gathered::default();
        for op in reader.iter() {
            gathered.error(op.header.op_index, code);
        }
        send_results(tx_id, tc, &gathered, None, ctx);
    }

    /// Runs request `slot` and, as each finishes, the next one of its
    /// transaction, until one waits or none is left.
    fn run_requests(&mut self, slot: Slot, ctx: &mut Context<'_>) {
        let mut next = Some(slot);
        while let Some(slot) = next.take() {
            if !self.run_request(slot) {
                return;
            }
            let record = &self.requests.records[slot as usize];
            let tx_id = record.tx_id;
            if record.commit_epoch != 0 {
                return self.finish_one_phase(slot, ctx);
            }
            self.finish_request(slot, ctx);
            let record = self
                .txs
                .get_mut(&tx_id)
                .expect("a request's transaction has a record");
            let head = record.queue.pop_front();
            assert_eq!(
                head,
                Some(slot),
                "the request that ran is its transaction's first"
            );
            next = record.queue.front().copied();
            if next.is_none() {
                self.release_tx_if_idle(tx_id);
            }
        }
    }

    /// Runs the operations of a request from where it stands; false when
    /// it waits for a lock.
    fn run_request(&mut self, slot: Slot) -> bool {
        let record = &mut self.requests.records[slot as usize];
        assert!(
            record.in_use && !record.waiting,
            "request {slot} runs while free or waiting"
        );
        let ops = std::mem::take(&mut record.ops);
        let mut results = std::mem::take(&mut record.results);
        let mut forward = std::mem::take(&mut record.forward);
        let (tx_id, start, op_count) = (record.tx_id, record.next, record.op_count);
        let only_op = record.only_op;
        let forwarding = !record.chain.is_empty();
        let answered_here = forwarding && record.commit_epoch != 0;
        let op_id = self.requests.op_id(slot);
        let mut run = OpsRun {
            tx_id,
            op_id,
            forwarding,
            answered_here,
            position: start,
            results: &mut results,
            forward: &mut forward,
        };
        // Framed at arrival (`on_key_req`), which counted its ops and kept
        // the span of a lone op: that one is not parsed again, nor walked
        // through the batch's iterator.
        let waiting = match only_op.filter(|_| start == 0) {
            Some(span) => self.run_ops(std::iter::once(span.view(&ops)), None, &mut run),
            None => {
                let reader = OpBatchReader::checked_before(&ops, op_count as usize);
                let ops = reader.iter().skip(start as usize);
                // One op left has nothing to overlap its misses with.
                let ahead = (op_count - start > 1).then(|| Lookahead::new(ops.clone()));
                self.run_ops(ops, ahead, &mut run)
            }
        };
        let position = run.position;
        let record = &mut self.requests.records[slot as usize];
        record.ops = ops;
        record.results = results;
        record.forward = forward;
        record.next = position;
        record.waiting = waiting;
        !waiting
    }

    /// Runs `ops`, the operations of a request from `run.position` on, in
    /// order, until one waits (true) or all are done (false). `ahead`, a
    /// second reader of the same ops, loads the buckets and rows of the
    /// writes to come while the one before them runs.
    fn run_ops<'o, I: Iterator<Item = OpView<'o>>>(
        &mut self,
        ops: I,
        mut ahead: Option<Lookahead<I>>,
        run: &mut OpsRun<'_>,
    ) -> bool {
        let mut iter = ops.peekable();
        let mut index = 0;
        while let Some(op) = iter.next() {
            index += 1;
            if is_committed_read(&op) && self.check_op(&op).is_ok() {
                // The fast path: this and the committed reads of the same
                // fragment right after it, in one batch.
                let mut reads: ReadRun<'_> = SmallVec::new();
                reads.push(op);
                while reads.len() < READ_BATCH_KEYS_MAX {
                    match iter.peek() {
                        Some(next)
                            if same_fragment(&op, next)
                                && is_committed_read(next)
                                && self.check_op(next).is_ok() =>
                        {
                            reads.push(*next);
                            iter.next();
                        }
                        _ => break,
                    }
                }
                self.committed_reads(&reads, run.results);
                run.position += reads.len() as u32;
                index += reads.len() - 1;
                continue;
            }
            if let Some(ahead) = &mut ahead {
                let LdmBlock {
                    instance, scratch, ..
                } = self;
                let instance = instance.as_mut().expect("open");
                ahead.prefetch(index - 1, instance, &mut scratch.keys);
            }
            let passing = (run.forwarding, run.answered_here);
            let (step, touched) = self.run_one(run.tx_id, run.op_id, &op, passing, run.results);
            if let Some(key) = touched {
                self.touch(run.tx_id, key);
            }
            match step {
                Step::Answered => {}
                Step::Forward => run.forward.push(run.position),
                Step::Wait => {
                    self.stats.ops_waited += 1;
                    return true;
                }
            }
            run.position += 1;
        }
        false
    }

    /// Checks an operation against this instance's schema; the fragment it
    /// names, or the error code.
    pub(super) fn check_op(&self, op: &OpView<'_>) -> Result<(u32, u32), u32> {
        checked_table(&self.schema, &self.alter, &self.config, op)
            .map(|_| (op.header.table_id, op.header.partition))
    }

    /// Committed reads of `ops`, all checked and on one fragment, through
    /// `Fragment::read_batch`.
    fn committed_reads(&mut self, ops: &[OpView<'_>], out: &mut Gathered) {
        let LdmBlock {
            schema,
            instance,
            scratch,
            ..
        } = self;
        let instance = instance.as_mut().expect("open");
        let head = ops.first().expect("a run has an op").header;
        let table = &schema.tables[&head.table_id];
        let Some((fragment, pool)) = instance.fragment(head.table_id, head.partition) else {
            for op in ops {
                out.error(op.header.op_index, error::TABLE_NOT_YET_KNOWN);
            }
            return;
        };
        scratch.keys.clear();
        for op in ops {
            scratch.keys.extend(op.keys().map(|v| v.to_value()));
        }
        if let [op] = ops {
            // One key: nothing to overlap, so the batch pipeline's stages
            // would be overhead; the plain lookup gives the same answer.
            match fragment.read(pool, &scratch.keys, ReadMode::Committed, &mut scratch.row) {
                Ok(Outcome::Done) => {
                    let (fixed, var) = (scratch.row.fixed(), scratch.row.var());
                    write_row(out, fragment.layout(), table, op, fixed, var);
                }
                Ok(_) => out.error(op.header.op_index, error::NO_SUCH_ROW),
                Err(e) => out.error(op.header.op_index, fragment_code(table, &e)),
            }
            return;
        }
        if let Err(e) = fragment.read_batch(pool, &scratch.keys, &mut scratch.batch) {
            let code = fragment_code(table, &e);
            for op in ops {
                out.error(op.header.op_index, code);
            }
            return;
        }
        for (i, op) in ops.iter().enumerate() {
            match scratch.batch.row(i) {
                Some((fixed, var)) => write_row(out, fragment.layout(), table, op, fixed, var),
                None => out.error(op.header.op_index, error::NO_SUCH_ROW),
            }
        }
    }

    /// Runs one operation (not a committed read of the fast path) of
    /// transaction `tx_id`. Returns how it ended and the fragment it
    /// touched: one it may have left a lock (or a queued request) in, even
    /// when it waits or fails, which the transaction's end must release
    /// (the caller notes it in the transaction's record). `passing`:
    /// whether a write goes on to a next replica, and whether it is
    /// answered here all the same (`OpsRun::answered_here`).
    fn run_one(
        &mut self,
        tx_id: u64,
        op_id: OpId,
        op: &OpView<'_>,
        (forwarding, answered_here): (bool, bool),
        out: &mut Gathered,
    ) -> (Step, Option<(u32, u32)>) {
        let h = op.header;
        let (table_id, partition) = (h.table_id, h.partition);
        // The checked table stays borrowed for the op: one lookup.
        let LdmBlock {
            schema,
            alter,
            config,
            instance,
            scratch,
            restart,
            redo_full_buggified,
            grants,
            ..
        } = self;
        let table = match checked_table(schema, alter, config, op) {
            Ok(table) => table,
            Err(code) => {
                out.error(h.op_index, code);
                return (Step::Answered, None);
            }
        };
        let instance = instance.as_mut().expect("open");
        let writes = h.kind != OpKind::Read;
        if writes && (redo_over_high_water(instance) || *redo_full_buggified) {
            out.error(h.op_index, error::REDO_OVERLOADED);
            return (Step::Answered, None);
        }
        let touched = (writes || h.lock != LockMode::Committed).then_some((table_id, partition));
        let Some((fragment, pool)) = instance.fragment(table_id, partition) else {
            out.error(h.op_index, error::TABLE_NOT_YET_KNOWN);
            return (Step::Answered, touched);
        };
        let step = match run_op(
            table,
            (fragment, pool),
            scratch,
            grants,
            (TxId(tx_id), op_id),
            op,
            forwarding && !answered_here,
            out,
        ) {
            // A write answered with its row here (`answered_here`) goes on.
            Ok(OpEnd::Done { answered: true }) if writes && forwarding => Step::Forward,
            Ok(OpEnd::Done { answered: true }) => Step::Answered,
            Ok(OpEnd::Done { answered: false }) if writes && forwarding => {
                if answered_here {
                    out.ok(h.op_index);
                }
                Step::Forward
            }
            Ok(OpEnd::Done { answered: false }) => {
                out.ok(h.op_index);
                Step::Answered
            }
            Ok(OpEnd::NotFound) if writes && restart.starting => {
                // A starting node lacks rows the copy has not brought yet:
                // the copy brings this row with this change (ldm::copy).
                if forwarding {
                    if answered_here {
                        out.ok(h.op_index);
                    }
                    Step::Forward
                } else {
                    out.ok(h.op_index);
                    Step::Answered
                }
            }
            Ok(OpEnd::NotFound) => {
                out.error(h.op_index, error::NO_SUCH_ROW);
                Step::Answered
            }
            Ok(OpEnd::Waiting) => Step::Wait,
            Err(e) => {
                tracing::debug!(node = %config.node, "LDM instance {}: {e}", config.instance);
                out.error(h.op_index, fragment_code(table, &e));
                Step::Answered
            }
        };
        (step, touched)
    }

    /// Sends a finished request's results and passes its writes on, then
    /// frees its record. What goes to another node goes through the key
    /// batches (`batches`), which keep its order.
    fn finish_request(&mut self, slot: Slot, ctx: &mut Context<'_>) {
        let LdmBlock {
            me,
            requests,
            key_batches,
            stats,
            ..
        } = self;
        let me = *me;
        let record = &mut requests.records[slot as usize];
        let tc = record.tc.expect("a request in use has its TC");
        answer(
            me,
            key_batches,
            stats,
            record.tx_id,
            tc,
            &record.results,
            ctx,
        );
        if !record.forward.is_empty() {
            let next = record.chain.get(0);
            // The record is freed below.
            let bytes = take_forwarded(record);
            let chain = record.chain.rest();
            if next == me.node {
                let receiver = BlockRef::new(next, BlockNumber::LOCAL_DATA_MANAGER, me.instance);
                let (tx_id, ops) = (record.tx_id, bytes);
                ctx.send(
                    receiver,
                    SignalBody::LdmKeyReq {
                        tx_id,
                        tc,
                        chain,
                        ops,
                    },
                );
            } else {
                let tx = (record.tx_id, tc, 0);
                key_batches.queue_forward(me, next, tx, chain, bytes, stats, ctx);
            }
        }
        requests.free(slot);
    }

    /// Ends a finished `LdmKeyCommitReq`: commits the transaction here when
    /// every op succeeded and answers `LdmKeyCommitted`; otherwise answers
    /// `LdmKeyConf` as for any request and leaves the abort to the TC. The
    /// primary of a one-phase commit over two replicas passes the ops on to
    /// its backup instead (`pass_to_decider`); the backup answers the
    /// primary, and aborts a failed op at once (it decides).
    ///
    /// Invariant: the request is its transaction's only one (the TC sends a
    /// one-phase transaction whole), so the commit leaves nothing queued.
    fn finish_one_phase(&mut self, slot: Slot, ctx: &mut Context<'_>) {
        let record = &mut self.requests.records[slot as usize];
        let (tx_id, epoch, answer) = (record.tx_id, record.commit_epoch, record.answer);
        let commit =
            record.results.len() == record.op_count as usize && record.results.all_succeeded();
        if commit && !record.chain.is_empty() && !record.forward.is_empty() {
            return self.pass_to_decider(slot, ctx);
        }
        if !commit {
            // Nothing of it goes on: the transaction aborts.
            record.forward.clear();
        }
        let queue = &mut self
            .txs
            .get_mut(&tx_id)
            .expect("a request's transaction has a record")
            .queue;
        assert_eq!(
            queue.pop_front(),
            Some(slot),
            "the request that ran is its transaction's first"
        );
        assert!(
            queue.is_empty(),
            "a one-phase transaction sends one request"
        );
        if !commit {
            if let Some(primary) = answer {
                // The decider: the outcome is abort, here and at the primary.
                let record = &mut self.requests.records[slot as usize];
                record.results.keep_first_failure();
                send_results(tx_id, primary, &record.results, None, ctx);
                self.requests.free(slot);
                return self.abort_here(tx_id);
            }
            self.finish_request(slot, ctx);
            return self.release_tx_if_idle(tx_id);
        }
        let tc = self.requests.records[slot as usize]
            .tc
            .expect("a request in use has its TC");
        let to = answer.unwrap_or(tc);
        self.stats.one_phase_commits += 1;
        // Committed (or pending) before the answer leaves: what it says.
        let done = self.commit_here(to, &[], tx_id, epoch, ctx);
        let gci = signal::epoch::hi(epoch);
        let results = &self.requests.records[slot as usize].results;
        send_results(tx_id, to, results, Some((gci, !done)), ctx);
        self.requests.free(slot);
    }

    /// The primary of a one-phase commit over two replicas ran every op
    /// (each answered here as well): the ops go on to the backup, which
    /// decides, through the key batches (an abort passed on later sends the
    /// node's batch first: `abort_while_deciding`), and the request waits
    /// first in its transaction's queue for the backup's word
    /// (`on_decision`).
    fn pass_to_decider(&mut self, slot: Slot, ctx: &mut Context<'_>) {
        let LdmBlock {
            me,
            requests,
            key_batches,
            stats,
            ..
        } = self;
        let me = *me;
        let record = &mut requests.records[slot as usize];
        debug_assert!(record.decider.is_none(), "passed on once");
        record.decider = Some(Decider::default());
        let ops = take_forwarded(record);
        let tc = record.tc.expect("a request in use has its TC");
        let backup = record.chain.get(0);
        debug_assert_ne!(backup, me.node, "the backup is on another node");
        stats.one_phase_passed += 1;
        let tx = (record.tx_id, tc, record.commit_epoch);
        key_batches.queue_forward(me, backup, tx, signal::Chain::new(), ops, stats, ctx);
    }

    /// The request of `tx_id` that waits for its backup's decision
    /// (`pass_to_decider`), if there is one.
    fn deciding(&self, tx_id: u64) -> Option<Slot> {
        let slot = *self.txs.get(&tx_id)?.queue.front()?;
        self.requests.records[slot as usize]
            .decider
            .is_some()
            .then_some(slot)
    }

    /// What the backup of a one-phase commit over two replicas said; false
    /// when no request here waits for it (its transaction ended here: a
    /// takeover decided it, or the backup's node failed first).
    pub(super) fn on_decision(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        decision: Decision<'_>,
        ctx: &mut Context<'_>,
    ) -> bool {
        let Some(slot) = self.deciding(tx_id) else {
            return false;
        };
        let record = &mut self.requests.records[slot as usize];
        let backup = BlockRef::new(
            record.chain.get(0),
            BlockNumber::LOCAL_DATA_MANAGER,
            self.me.instance,
        );
        if from != backup {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: {decision:?} for transaction {tx_id:#x} from {from}, not its backup {backup}: ignored",
                self.config.instance
            );
            return true;
        }
        let tc = record.tc.expect("a request in use has its TC");
        let decider = record.decider.as_mut().expect("deciding");
        let abort_from = decider.abort_from;
        match decision {
            Decision::Committed { pending: true } => decider.backup_pending = true,
            Decision::Committed { pending: false } => self.decided_commit(slot, ctx),
            Decision::CommitDone => {
                // Only a commit that waited for redo space answers so, and
                // it said so first (one link, in order).
                assert!(
                    decider.backup_pending,
                    "{from}: LdmCommitConf of transaction {tx_id:#x}, whose commit it did not say waits"
                );
                self.decided_commit(slot, ctx)
            }
            Decision::Failed(results) => {
                // The backup's failed op is the TC's answer (the abort
                // follows from the TC, and finds nothing here).
                let mut bytes = ctx.buffer();
                bytes.extend_from_slice(results);
                let body = SignalBody::LdmKeyConf {
                    tx_id,
                    results: bytes,
                    ok_in_order: 0,
                };
                ctx.send(tc, body);
                self.end_deciding(slot, tx_id, abort_from, ctx);
            }
            Decision::Aborted => self.end_deciding(slot, tx_id, abort_from, ctx),
        }
        self.run_grants(ctx);
        self.check_alter(ctx);
        true
    }

    /// Takes the deciding request `slot` off its transaction's queue, whose
    /// only one it is (a one-phase transaction sends one request).
    fn pop_deciding(&mut self, slot: Slot, tx_id: u64) {
        let queue = &mut self.txs.get_mut(&tx_id).expect("deciding").queue;
        assert_eq!(
            queue.pop_front(),
            Some(slot),
            "the deciding request is first"
        );
        assert!(
            queue.is_empty(),
            "a one-phase transaction sends one request"
        );
    }

    /// The backup decided abort (or failed an op): nothing commits here.
    fn end_deciding(
        &mut self,
        slot: Slot,
        tx_id: u64,
        abort_from: Option<BlockRef>,
        ctx: &mut Context<'_>,
    ) {
        self.pop_deciding(slot, tx_id);
        self.requests.free(slot);
        self.abort_here(tx_id);
        if let Some(to) = abort_from {
            ctx.send(to, SignalBody::LdmAbortConf { tx_id });
        }
    }

    /// The backup committed (or its node failed, which leaves the outcome
    /// to this replica: it commits): commit here, the primary last, and
    /// answer the TC with the results of the run here; an abort asked for
    /// meanwhile is answered too, the commit standing (a TC drops the
    /// later confirmation, a takeover counts it).
    pub(super) fn decided_commit(&mut self, slot: Slot, ctx: &mut Context<'_>) {
        let record = &self.requests.records[slot as usize];
        let (tx_id, epoch) = (record.tx_id, record.commit_epoch);
        let tc = record.tc.expect("a request in use has its TC");
        let abort_from = record.decider.and_then(|d| d.abort_from);
        self.pop_deciding(slot, tx_id);
        self.stats.one_phase_commits += 1;
        let done = self.commit_here(tc, &[], tx_id, epoch, ctx);
        let gci = signal::epoch::hi(epoch);
        send_results(
            tx_id,
            tc,
            &self.requests.records[slot as usize].results,
            Some((gci, !done)),
            ctx,
        );
        self.requests.free(slot);
        if let Some(to) = abort_from {
            ctx.send(to, SignalBody::LdmAbortConf { tx_id });
        }
    }

    /// An abort of a transaction whose request waits for its backup's
    /// decision: passed on to the backup, behind the ops; true when so.
    pub(super) fn abort_while_deciding(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        ctx: &mut Context<'_>,
    ) -> bool {
        let Some(slot) = self.deciding(tx_id) else {
            return false;
        };
        let me = self.me;
        let record = &mut self.requests.records[slot as usize];
        let decider = record.decider.as_mut().expect("deciding");
        if decider.abort_from.replace(from).is_none() {
            let node = record.chain.get(0);
            // Behind the ops, which may still be in the node's key batch.
            self.key_batches.send_now(me, node, &mut self.stats, ctx);
            let backup = BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, me.instance);
            ctx.send(backup, SignalBody::LdmAbortReq { tx_id });
        }
        true
    }

    /// The requests waiting for a decision from a backup on a node of
    /// `failed`: the outcome is this replica's to give, and it commits
    /// (docs/transactions.md: the backup may have committed, and no client
    /// was answered yet).
    pub(super) fn deciders_failed(&mut self, failed: &NodeBitmask, ctx: &mut Context<'_>) {
        let mut slots: Vec<Slot> = self
            .txs
            .values()
            .filter_map(|t| t.queue.front().copied())
            .filter(|&slot| {
                let r = &self.requests.records[slot as usize];
                r.decider.is_some() && failed.contains(r.chain.get(0))
            })
            .collect();
        // Deterministic order (the map's is not).
        slots.sort_unstable();
        for slot in slots {
            self.decided_commit(slot, ctx);
        }
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    pub(super) fn resume_request(&mut self, grant: Grant, ctx: &mut Context<'_>) {
        let Some(slot) = self.requests.granted(grant.tx, grant.op) else {
            // Its request ended (the transaction aborted): the lock goes
            // with the transaction.
            return;
        };
        self.requests.records[slot as usize].waiting = false;
        self.run_requests(slot, ctx);
    }
}

/// Whether the redo log part is too full for new writes (error 410).
fn redo_over_high_water(instance: &LdmInstance) -> bool {
    instance.redo_used_bytes() * 100 > instance.redo_capacity_bytes() * REDO_HIGH_WATER_PERCENT
}

/// [`LdmBlock::check_op`] over the parts of the block it reads: the table
/// the op names (borrowed from `schema` alone, so that the caller may
/// change the block's other parts while it holds it), or the error code.
fn checked_table<'s>(
    schema: &'s LocalSchema,
    alter: &AlterState,
    config: &LdmBlockConfig,
    op: &OpView<'_>,
) -> Result<&'s TableDef, u32> {
    let h = &op.header;
    let table = schema.tables.get(&h.table_id).ok_or(error::NO_SUCH_TABLE)?;
    if alter.blocks(h.table_id) {
        // An ALTER TABLE waits for the transactions on the table.
        return Err(error::BUSY);
    }
    if h.table_version != table.version {
        return Err(error::WRONG_SCHEMA_VERSION);
    }
    if h.partition == NO_PARTITION
        || h.partition >= table.partitions
        || !config.owns(h.partition, table.fully_replicated)
    {
        tracing::debug!(
            node = %config.node,
            "LDM instance {}: table `{}` partition {} is not held here",
            config.instance,
            table.name,
            h.partition
        );
        return Err(error::BAD_OPERATION);
    }
    if h.index_id != NO_INDEX {
        // The TC turns unique-key operations into primary-key ones.
        return Err(error::BAD_OPERATION);
    }
    // The TC checked the op against this table version (`OpView::check`)
    // and storage checks every value it writes (a bad one is answered
    // with the same code); checking it here again cost a third of an
    // update's time on the data node.
    Ok(table)
}

/// Sends a request's results (if any) to its TC: gathered with others for a
/// TC of another node (`batches`), else alone.
fn answer(
    me: BlockRef,
    key_batches: &mut KeyBatches,
    stats: &mut LdmStats,
    tx_id: u64,
    tc: BlockRef,
    results: &Gathered,
    ctx: &mut Context<'_>,
) {
    if results.is_empty() {
        return;
    }
    if gathers_answers(me, tc) {
        key_batches.queue_answer(me, tx_id, tc, results, stats, ctx);
    } else {
        send_results(tx_id, tc, results, None, ctx);
    }
}

/// The ops of `record` that go on to the next replica: when every op goes
/// on (the common write), the batch as it came, neither copied nor
/// allocated again (the record keeps none).
fn take_forwarded(record: &mut Request) -> Vec<u8> {
    if record.forward.len() == record.op_count as usize {
        std::mem::take(&mut record.ops)
    } else {
        forwarded_ops(&record.ops, record.op_count, &record.forward)
    }
}

/// The ops of a batch at `forward` (ascending positions), as a batch of their own.
fn forwarded_ops(ops: &[u8], op_count: u32, forward: &[u32]) -> Vec<u8> {
    let reader = OpBatchReader::checked_before(ops, op_count as usize);
    let mut bytes = Vec::with_capacity(ops.len());
    let mut writer = OpBatchWriter::new(&mut bytes);
    let mut wanted = forward.iter().copied().peekable();
    for (position, op) in reader.iter().enumerate() {
        if wanted.peek() == Some(&(position as u32)) {
            wanted.next();
            if let Err(e) = writer.copy(&op.header, &op) {
                panic!("an op copied into a batch no larger than its own does not fit: {e}");
            }
        }
    }
    drop(writer);
    bytes
}

pub(super) fn is_committed_read(op: &OpView<'_>) -> bool {
    op.header.kind == OpKind::Read && op.header.lock == LockMode::Committed
}

fn same_fragment(a: &OpView<'_>, b: &OpView<'_>) -> bool {
    (
        a.header.table_id,
        a.header.table_version,
        a.header.partition,
    ) == (
        b.header.table_id,
        b.header.table_version,
        b.header.partition,
    )
}

/// Sends gathered results to the TC, in as few batches as they fit: as
/// `LdmKeyCommitted` when `committed` names the GCI of a one-phase commit
/// done here (and whether it still waits for redo space), every part so.
fn send_results(
    tx_id: u64,
    tc: BlockRef,
    results: &Gathered,
    committed: Option<(u32, bool)>,
    ctx: &mut Context<'_>,
) {
    let mut next = 0;
    while next < results.len() {
        let first = next;
        let mut bytes = ctx.buffer();
        bytes.reserve(64 + results.len() * 9 + results.value_bytes());
        results.write_results(&mut next, &mut bytes);
        let ok_in_order = results.ok_in_order(first..next);
        let body = match committed {
            None => SignalBody::LdmKeyConf {
                tx_id,
                results: bytes,
                ok_in_order,
            },
            Some((gci, pending)) => SignalBody::LdmKeyCommitted {
                tx_id,
                gci,
                pending: u32::from(pending),
                results: bytes,
                ok_in_order,
            },
        };
        ctx.send(tc, body);
    }
}

/// One operation on its fragment (see `run_one`).
#[allow(clippy::too_many_arguments)]
fn run_op(
    table: &TableDef,
    (fragment, pool): (&mut Fragment, &mut PagePool),
    scratch: &mut Scratch,
    grants: &mut Vec<Grant>,
    (tx, op_id): (TxId, OpId),
    op: &OpView<'_>,
    forwarding: bool,
    out: &mut Gathered,
) -> Result<OpEnd, FragmentError> {
    let h = op.header;
    scratch.keys.clear();
    scratch.keys.extend(op.keys().map(|v| v.to_value()));
    let outcome = match h.kind {
        OpKind::Read if h.flags & UNLOCK != 0 => {
            // The waiters it lets in run after the request
            // (`on_key_req`'s `run_grants`).
            fragment.unlock(pool, tx, &scratch.keys, grants)?;
            Outcome::Done
        }
        OpKind::Read => {
            let mode = match h.lock {
                LockMode::Committed => ReadMode::Committed,
                LockMode::Shared => ReadMode::Shared { tx, op: op_id },
                LockMode::Exclusive => ReadMode::Exclusive { tx, op: op_id },
            };
            let outcome = match LockWait::of_op_flags(h.flags) {
                LockWait::Wait => fragment.read(pool, &scratch.keys, mode, &mut scratch.row)?,
                LockWait::NoWait => {
                    fragment.read_no_wait(pool, &scratch.keys, mode, &mut scratch.row)?
                }
                // A row another transaction holds is not there for it.
                LockWait::SkipLocked => {
                    match fragment.read_no_wait(pool, &scratch.keys, mode, &mut scratch.row) {
                        Err(FragmentError::LockBusy { .. }) => Outcome::NotFound,
                        other => other?,
                    }
                }
            };
            if outcome == Outcome::Done {
                write_row(
                    out,
                    fragment.layout(),
                    table,
                    op,
                    scratch.row.fixed(),
                    scratch.row.var(),
                );
                return Ok(OpEnd::Done { answered: true });
            }
            outcome
        }
        OpKind::Insert | OpKind::Write => {
            scratch.row_values.clear();
            scratch.row_values.resize(table.columns.len(), Value::Null);
            for (&c, v) in table.primary_key.iter().zip(op.keys()) {
                scratch.row_values[c] = v.to_value();
            }
            for (c, v) in op.values() {
                scratch.row_values[usize::from(c)] = v.to_value();
            }
            if h.kind == OpKind::Insert {
                fragment.insert(pool, tx, op_id, &scratch.row_values)?
            } else {
                fragment.write(pool, tx, op_id, &scratch.row_values)?
            }
        }
        OpKind::Update => {
            fragment.update_refs(pool, tx, op_id, &scratch.keys, OpChanges(op.values()))?
        }
        OpKind::Delete => {
            let answered = op.projection_count() > 0 && !forwarding;
            if answered {
                // The replica that answers returns the row as deleted.
                let mode = ReadMode::Exclusive { tx, op: op_id };
                match fragment.read(pool, &scratch.keys, mode, &mut scratch.row)? {
                    Outcome::Done => {}
                    Outcome::NotFound => return Ok(OpEnd::NotFound),
                    Outcome::Waiting => return Ok(OpEnd::Waiting),
                }
            }
            let outcome = fragment.delete(pool, tx, op_id, &scratch.keys)?;
            if answered && outcome == Outcome::Done {
                write_row(
                    out,
                    fragment.layout(),
                    table,
                    op,
                    scratch.row.fixed(),
                    scratch.row.var(),
                );
                return Ok(OpEnd::Done { answered: true });
            }
            outcome
        }
    };
    Ok(match outcome {
        Outcome::Done => OpEnd::Done { answered: false },
        Outcome::NotFound => OpEnd::NotFound,
        Outcome::Waiting => OpEnd::Waiting,
    })
}

/// An update op's changes as storage takes them: its leading integers
/// through proto's tight loop, the rest through the iterator.
#[derive(Clone)]
struct OpChanges<'a>(ColumnValues<'a>);

impl<'a> Iterator for OpChanges<'a> {
    type Item = (usize, ValueRef<'a>);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, ValueRef<'a>)> {
        self.0.next().map(|(c, v)| (usize::from(c), v))
    }
}

impl<'a> ColumnChanges<'a> for OpChanges<'a> {
    #[inline(always)]
    fn integer_prefix(&mut self, mut apply: impl FnMut(usize, Result<i64, u64>) -> bool) {
        self.0.integer_prefix(|c, v| apply(usize::from(c), v));
    }
}

/// A read's result row: the projected columns (all when none are), then
/// the primary key with key info.
pub(super) fn write_row(
    out: &mut Gathered,
    layout: &RowLayout,
    table: &TableDef,
    op: &OpView<'_>,
    fixed: &[u8],
    var: &[u8],
) {
    out.begin_row();
    write_row_values(out, layout, table, op, (fixed, var));
    out.end_row(op.header.op_index);
}

/// The values (and key values) of a read's result row into an open row of
/// `out` (see [`write_row`]).
pub(super) fn write_row_values(
    out: &mut impl RowSink,
    layout: &RowLayout,
    table: &TableDef,
    op: &OpView<'_>,
    (fixed, var): (&[u8], &[u8]),
) {
    if op.projection_count() == 0 {
        let columns = table.columns.len();
        out.values(columns, |bytes| {
            put_all_columns(bytes, layout, fixed, var, columns)
        });
    } else {
        out.values(op.projection_count(), |bytes| {
            for c in op.projection() {
                put_column(bytes, layout, fixed, var, usize::from(c));
            }
        });
    }
    if op.has_flag(KEY_INFO) {
        for &c in &table.primary_key {
            out.key(layout.decode_column(fixed, var, c));
        }
    }
}

/// The `proto::error` code of a fragment error.
pub(super) fn fragment_code(table: &TableDef, e: &FragmentError) -> u32 {
    match e {
        FragmentError::TableFull { .. } | FragmentError::PartitionFull { .. } => {
            error::DATA_MEMORY_FULL
        }
        FragmentError::DuplicateKey { .. } => error::DUPLICATE_KEY,
        FragmentError::WrongValue(source) => ProtoError::Value {
            table: table.name.clone(),
            source: source.clone(),
        }
        .code(),
        FragmentError::PrimaryKeyUpdate { .. } => error::PRIMARY_KEY_UPDATE,
        FragmentError::LockWaitersFull { .. } | FragmentError::AlreadyWaiting { .. } => {
            error::OUT_OF_LDM_OPERATIONS
        }
        FragmentError::LockBusy { .. } => error::LOCK_BUSY,
        FragmentError::NoSuchIndex { .. } => error::NO_SUCH_INDEX,
        FragmentError::NoSuchColumn { .. } => error::NO_SUCH_COLUMN,
        FragmentError::RedoFull { .. } => error::REDO_OVERLOADED,
        FragmentError::AlterBusy { .. } => error::BUSY,
        FragmentError::BadAlter { .. } => error::UNSUPPORTED_ALTER,
        FragmentError::Redo { .. }
        | FragmentError::BadRedoRecord { .. }
        | FragmentError::BadRow { .. }
        | FragmentError::BadRestore { .. } => error::BAD_OPERATION,
    }
}
