//! The LDM block (NDB: DBLQH with DBACC, DBTUP and DBTUX): one instance per
//! `ldm` thread, each running one `storage::instance::LdmInstance` — the
//! partitions of this node whose `Placement::home(p).ldm_instance` is the
//! instance, their row locks, the instance's redo log part and its local
//! checkpoints. See `docs/transactions.md`.
//!
//! Why a block around the storage instance: the storage crate knows rows,
//! locks and files but nothing of signals, transactions spread over
//! replicas, or time. This block turns `LdmKeyReq`, `LdmScanReq`, commits,
//! aborts and global checkpoints into storage calls, parks what must wait
//! for a row lock and resumes it when the lock is granted, passes writes
//! along the replica chain, and drives the redo writes and local
//! checkpoints from timers.
//!
//! - Schema: the local dictionary's `SchemaLoadReq` opens the instance
//!   (restore from the local checkpoints and the redo log) on the first
//!   load; later loads and `SchemaChangeReq` add, drop and alter
//!   fragments. An alter waits until no transaction is on its table here
//!   ([`alter`]). A restore that fails shuts the node down: it never
//!   serves wrong data.
//! - Key operations ([`requests`]): in order per transaction; a request
//!   that waits for a lock holds back the transaction's later requests.
//! - Key batches ([`batches`]): the requests passed on to another node
//!   and the answers to a TC on another node, gathered over a round of
//!   the thread into one signal per destination.
//! - Scans ([`scans`]): one partition each, in batches, filtered and
//!   projected here; locking scans lock each row they return.
//! - Backup scans ([`backup`]): a backup's committed-read scans of the
//!   fragments this node is the primary of, written to this node's own
//!   backup files.
//! - Commit and abort: on every fragment the transaction touched here. A
//!   commit that finds the redo log full is retried from a timer until it
//!   succeeds: a commit decision is never undone.
//! - Redo is written in batches ([`REDO_WRITE_DELAY`] after the first
//!   buffered commit), made durable by `GcpSaveReq`: the marker and the
//!   records are written here, the fsync runs on an `io` thread
//!   (`Context::io`) while key operations and commits of later GCIs go on
//!   here, and `GcpSaveConf` is sent only when its `FsConf` says the sync
//!   succeeded (a GCI is reported durable only after its redo is synced).
//!   One flush is in flight at a time; `GcpSaveReq`s arriving meanwhile
//!   wait for the next. A failed fsync stops the node (the redo log part
//!   refuses work until a restart).
//! - No fsync on this block's thread: every signal it executes runs under
//!   `storage::disk::forbid_sync`, so a sync here panics; the restore at
//!   start-up (nothing serves yet) and the schema changes that remove a
//!   fragment's checkpoint files say so with `allow_sync`.
//! - Local checkpoints write their pages here, a step at a time; finishing
//!   an LCP (the data file's fsync, its control file, pruning) and the redo
//!   trim's control file run on an `io` thread (`storage::instance::LcpSync`),
//!   one at a time, and count only from their `FsConf` on.
//! - Local checkpoints start when the redo log part is half full, or every
//!   `lcp_interval` when anything changed, and run a step at a time from a
//!   short timer so that transactions interleave.
//!
//! - Node failure ([`failover`]): the view (from the local distribution
//!   block) marks nodes down; requests from their TCs are dropped, writes
//!   are no longer passed to them, and a takeover TC learns the state of
//!   their TCs' transactions here (`LdmTakeOverReq`). Commits are
//!   remembered until their GCI is saved, for that.
//!
//! Failures that crash the node: corrupt files at restore (stop as failed,
//! or with `--discard-corrupt` and a serving partner, move them aside and
//! restart empty: [`discard`]), a failed redo flush or a redo I/O error at
//! commit (restart). Everything else fails one operation with a
//! `proto::error` code.

mod aggregate;
mod alter;
mod backup;
pub(crate) mod batches;
mod capture;
mod client_reads;
mod copy;
mod discard;
mod encoded;
mod failover;
mod invariants;
mod op_id;
mod requests;
mod restart;
mod scans;

pub use alter::{ALTER_CHECK_INTERVAL, ALTER_WAIT_MAX, SCHEMA_DEFERRED_MAX};
pub use copy::{COPY_BATCH_BYTES_MAX, COPY_BATCH_ROWS, COPY_OUT_MAX, COPY_RETRY_DELAY};
pub use discard::{DiscardCorrupt, DISCARD_DECISION_WAIT};

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kernel::{Block, Context, Instant};
use schema::TableDef;
use signal::{
    sub_change, BlockNumber, BlockRef, DictTableGroup, NodeId, SchemaOp, Signal, SignalBody,
};
use storage::disk::Disk;
use storage::instance::{LcpProgress, LdmConfig, LdmInstance, LCP_PAGES_PER_STEP_MAX};
use storage::locks::{Grant, TxId};

use crate::recently_aborted::RecentlyAborted;
use requests::Requests;
use scans::Scans;

/// Requests (of key operations) an instance holds at once: those waiting
/// for a row lock and those queued behind them. Beyond it a request is
/// refused with a temporary error.
pub const LDM_REQUESTS_MAX: usize = 4_096;
/// Operations held in waiting and queued requests, all together (NDB's
/// operation records of an LDM instance).
pub const LDM_OPS_MAX: usize = 65_536;
/// Transactions with locks or changes on an instance at once.
pub const LDM_TRANSACTIONS_MAX: usize = 32_768;
/// Scans open on an instance at once.
pub const LDM_SCANS_MAX: usize = 256;
/// Fragments one transaction may touch on one instance.
pub const TX_FRAGMENTS_MAX: usize = 4_096;
/// How long buffered redo records wait before they are written: commits
/// arriving meanwhile share one write.
pub const REDO_WRITE_DELAY: Duration = Duration::from_millis(1);
/// Above this share of the redo log part in use, new writes are refused
/// (error 410) so that commits of running transactions always find room.
pub const REDO_HIGH_WATER_PERCENT: u64 = 80;
/// Buggify rates (`Context::buggify_ppm`, simulation only) of the LDM's
/// rare branches, per chance where a point is active in a run: the redo
/// log refusing writes (410) for one signal's execution; the request
/// limit refusing a request (1217); a copy source ending a fragment's copy
/// midway with a temporary error; a local checkpoint's file write failing.
pub(crate) const BUGGIFY_REDO_FULL_PPM: u32 = 20_000;
pub(crate) const BUGGIFY_LIMIT_PPM: u32 = 20_000;
pub(crate) const BUGGIFY_COPY_FAIL_PPM: u32 = 100_000;
pub(crate) const BUGGIFY_LCP_WRITE_PPM: u32 = 50_000;
/// Pause after a failed local checkpoint (a full disk) before another may
/// start; doubled per failure in a row up to [`LCP_RETRY_DELAY_MAX`], so a
/// disk that stays full costs a try now and then, not one per check.
pub const LCP_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest pause between tries of a failing local checkpoint.
pub const LCP_RETRY_DELAY_MAX: Duration = Duration::from_secs(30);
/// At this share of the redo log part in use a local checkpoint starts.
pub const LCP_REDO_TRIGGER_PERCENT: u64 = 50;
/// Time between two steps of a running local checkpoint.
pub const LCP_STEP_DELAY: Duration = Duration::from_millis(2);
/// Time between steps while the checkpoint waits for a global checkpoint.
pub const LCP_AWAIT_GCI_DELAY: Duration = Duration::from_millis(50);
/// How many times `lcp_pages_per_step` a step writes while the redo log
/// part is at or above [`LCP_REDO_TRIGGER_PERCENT`]: writes keep filling
/// the log while the checkpoint runs, and only its end frees any.
pub const LCP_PRESSURE_SPEEDUP: usize = 4;
/// How often an instance checks whether a local checkpoint is due.
pub const LCP_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// How often an instance with changes starts a local checkpoint when the
/// configuration does not say (the redo fill level starts them sooner).
pub const LCP_INTERVAL_DEFAULT: Duration = Duration::from_secs(60);
/// Time between attempts of a commit refused for lack of redo space.
pub const COMMIT_RETRY_DELAY: Duration = Duration::from_millis(5);

const TIMER_REDO_WRITE: u32 = 1;
const TIMER_LCP_STEP: u32 = 2;
const TIMER_LCP_CHECK: u32 = 3;
const TIMER_COMMIT_RETRY: u32 = 4;
/// Timer: copy the operations held for ndbinfo (`publish_in_flight`).
const TIMER_IN_FLIGHT: u32 = 8;
const TIMER_CAPTURE_FLUSH: u32 = 9;

/// `GcpSaveReq`s held while a redo flush is in flight (each master asks
/// for one GCI at a time; a new master may ask again).
pub const GCP_SAVES_WAITING_MAX: usize = 64;

/// The redo flush whose sync runs on an `io` thread.
#[derive(Debug)]
struct RedoFlush {
    /// The `Context::io` request number, echoed by its `FsConf`.
    request: u64,
    gci: u32,
    /// Who gets `GcpSaveConf { gci }` once the sync succeeded: masters
    /// that asked for this GCI or a lower one.
    waiters: Vec<(BlockRef, u32)>,
}

/// What an LDM block needs to know. The data node fills it from its
/// configuration (see `node.rs`).
#[derive(Clone, Debug)]
pub struct LdmBlockConfig {
    pub node: NodeId,
    pub instance: u32,
    pub placement: config::Placement,
    /// Directory, DataMemory share, redo sizes, LCP pages per step.
    pub ldm: LdmConfig,
    /// How often an instance with changes starts a local checkpoint.
    pub lcp_interval: Duration,
}

impl LdmBlockConfig {
    /// [`LdmBlock::owns`], from the configuration alone.
    fn owns(&self, partition: u32, fully_replicated: bool) -> bool {
        let home = self.placement.home(partition);
        home.ldm_instance == self.instance && (fully_replicated || home.is_replica(self.node))
    }
}

/// Counters, for tests and observability.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LdmStats {
    pub key_requests: u64,
    pub ops: u64,
    pub ops_waited: u64,
    pub commits: u64,
    pub commit_retries: u64,
    pub aborts: u64,
    pub scans: u64,
    pub redo_writes: u64,
    pub gcp_saves: u64,
    pub lcps_started: u64,
    pub lcps_completed: u64,
    /// `GcpHurryReq`s sent: a checkpoint waited for a GCI while the redo
    /// log part was at or above [`LCP_REDO_TRIGGER_PERCENT`].
    pub gcp_hurries: u64,
    /// Key requests a TC sent here while this node was starting (no
    /// serving replica was left to route to), refused with 286.
    pub refused_starting: u64,
    /// `LdmKeyCommitReq`s committed here with their ops (one-phase; with
    /// two replicas, at both).
    pub one_phase_commits: u64,
    /// `LdmKeyCommitReq`s this primary passed on to its backup to decide.
    pub one_phase_passed: u64,
    /// Local checkpoint rounds that failed (a full disk, an I/O error).
    pub lcps_failed: u64,
    /// `LdmKeyBatchReq`s sent: requests of several transactions passed on
    /// to the next replica in one signal (`batches`).
    pub key_batches: u64,
    /// `LdmKeyConfBatch`s sent: answers of several transactions to one TC
    /// in one signal (`batches`).
    pub key_conf_batches: u64,
    /// `LdmReadReq`s: transactions of committed reads a TC of this node
    /// handed over whole, answered here to the client (`client_reads`).
    pub reads_answered: u64,
    /// Rounds of gathered `LdmReadReq`s run (`reads_answered` / this: the
    /// transactions whose reads went through one pipeline on average).
    pub client_read_rounds: u64,
}

/// The tables the dictionary told this instance about.
#[derive(Debug, Default)]
struct LocalSchema {
    version: u32,
    tables: BTreeMap<u32, TableDef>,
    /// Base table id → ids of the group's tables (base first).
    groups: BTreeMap<u32, Vec<u32>>,
}

/// A transaction with locks, changes or waiting requests on this instance.
#[derive(Debug, Default)]
struct TxRecord {
    /// The TC that runs it (from its first request here): a takeover asks
    /// for the transactions of a failed node's TCs.
    tc: Option<BlockRef>,
    /// Fragments it locked or changed here: what commit and abort visit.
    fragments: TxFragments,
    /// Its requests in arrival order; the first one runs, the others wait
    /// for it (operations of one transaction run in order).
    queue: std::collections::VecDeque<requests::Slot>,
}

/// The record of `tx_id` in `txs`, made (from `free`, the recycled ones)
/// if it has none; `None` when it has none and `txs` is full. Over the
/// fields, not the block: the caller goes on with the block's others.
fn tx_record<'t>(
    txs: &'t mut stdx::IdMap<u64, TxRecord>,
    free: &mut Vec<TxRecord>,
    tx_id: u64,
    tc: BlockRef,
) -> Option<&'t mut TxRecord> {
    let full = txs.len() >= LDM_TRANSACTIONS_MAX;
    match txs.entry(tx_id) {
        Entry::Occupied(entry) => Some(entry.into_mut()),
        Entry::Vacant(_) if full => None,
        Entry::Vacant(entry) => {
            let mut record = free.pop().unwrap_or_default();
            record.tc = Some(tc);
            record.fragments.clear();
            record.queue.clear();
            Some(entry.insert(record))
        }
    }
}

/// A commit done on this instance: passed on to the next instance of its
/// chain, or answered at the chain's end.
fn commit_done(done: PendingCommit, ctx: &mut Context<'_>) {
    pass_commit_on(done.tx_id, done.epoch, done.reply_to, done.next, ctx);
}

/// Passes the commit of `tx_id` on to `next[0]` with the rest of its
/// chain, or answers `reply_to` at the chain's end.
fn pass_commit_on(
    tx_id: u64,
    epoch: u64,
    reply_to: BlockRef,
    mut next: signal::RefChain,
    ctx: &mut Context<'_>,
) {
    if next.is_empty() {
        let gci = signal::epoch::hi(epoch);
        return ctx.send(reply_to, SignalBody::LdmCommitConf { tx_id, gci });
    }
    let to = next.remove(0);
    ctx.send(
        to,
        SignalBody::LdmCommitChainReq {
            tx_id,
            epoch,
            tc: reply_to,
            next,
        },
    );
}

/// A commit refused for lack of redo space, retried until it succeeds.
#[derive(Debug)]
struct PendingCommit {
    tx_id: u64,
    /// The commit's epoch (`signal::epoch`): its hi is the GCI logged.
    epoch: u64,
    /// Who gets `LdmCommitConf` once the chain ends here.
    reply_to: BlockRef,
    /// The rest of a commit chain, to pass the commit on to once it is done
    /// here (empty: answer `reply_to`).
    next: signal::RefChain,
    /// Fragments not yet committed.
    fragments: TxFragments,
}

/// (table, partition) pairs a transaction touched on one instance. Inline
/// for the usual few, so that a commit, which takes them from the
/// transaction's record, allocates nothing.
type TxFragments = smallvec::SmallVec<[(u32, u32); 4]>;

/// The LDM block of one instance. See the module documentation.
pub struct LdmBlock<D> {
    config: LdmBlockConfig,
    disk: D,
    me: BlockRef,
    instance: Option<LdmInstance>,
    schema: LocalSchema,
    txs: stdx::IdMap<u64, TxRecord>,
    free_txs: Vec<TxRecord>,
    requests: Requests,
    scans: Scans,
    scratch: requests::Scratch,
    /// Handed-over read transactions gathered for the round (`client_reads`).
    client_reads: client_reads::ClientReads,
    pending_commits: Vec<PendingCommit>,
    grants: Vec<Grant>,
    redo_write_armed: bool,
    /// Buggify: this signal's execution sees the redo log part over its
    /// high water (every write refused with 410). Always false in the
    /// real runtime.
    redo_full_buggified: bool,
    /// The redo flush in flight, if any (at most one).
    redo_flush: Option<RedoFlush>,
    /// `GcpSaveReq`s that came while a flush was in flight: (master, GCI).
    gcp_saves_waiting: Vec<(BlockRef, u32)>,
    /// The next `Context::io` request number.
    next_io_request: u64,
    /// The LCP sync in flight: its request number and the sync, which the
    /// io thread runs and hands back.
    lcp_sync: Option<(
        u64,
        std::sync::Arc<std::sync::Mutex<storage::instance::LcpSync>>,
    )>,
    lcp_step_armed: bool,
    /// The GCI the running checkpoint last asked the master to hurry:
    /// asked once per GCI, not on every step that finds it waiting.
    hurried_gci: Option<u32>,
    commit_retry_armed: bool,
    /// Anything committed since the last local checkpoint started.
    changed_since_lcp: bool,
    last_lcp_start: Instant,
    /// The node is going down: refuse all work.
    /// Distribution masters that asked for the highest GCI this instance
    /// flushed before it was open: answered once it is (an answer before
    /// the restore would let a GCI at or below one already on disk be
    /// handed out again).
    /// Transactions aborted here: a request of one of them arriving
    /// late is dropped (see `aborted`).
    aborted: RecentlyAborted,
    gcp_start_waiters: Vec<BlockRef>,
    /// A `RestartGciReq` that came before the instance was open.
    restart_gci_waiter: Option<(BlockRef, u32)>,
    /// The placement less the nodes that failed (`failover`).
    live: crate::live_map::LiveMap,
    /// Commits whose GCI is not yet saved, for a takeover (`failover`).
    recent_commits: failover::RecentCommits,
    failed: bool,
    stats: LdmStats,
    /// Where `stats` and the DataMemory figures are published for ndbinfo.
    figures: Option<crate::dbinfo::FigureSlot>,
    /// When the operations held here are next copied for ndbinfo
    /// (`publish_in_flight`), whether the last copy held any, and the
    /// copy's scratch.
    in_flight_pace: crate::dbinfo::InFlightPace,
    /// When the fragments' figures are next copied (`publish_fragments`).
    fragments_next_publish: Instant,
    held: Vec<storage::fragment::HeldOperation>,
    /// The 80 % / 90 % alarms of this instance's DataMemory and redo log.
    memory_alarm: crate::alarm::Alarm,
    redo_alarm: crate::alarm::Alarm,
    /// Requests passed on and answers gathered for other nodes (`batches`).
    key_batches: batches::KeyBatches,
    /// An ALTER TABLE waiting for its table's transactions to end, and the
    /// schema signals behind it.
    alter: alter::AlterState,
    /// Node restart: this node's copy, and copies from here to others.
    restart: copy::NodeRestart,
    /// Checks run (`invariants`): every so many walk every row.
    checks: std::cell::Cell<u32>,
    /// `--discard-corrupt`: where to ask for this node's files to be
    /// moved aside ([`discard`]).
    discard: Option<DiscardCorrupt>,
    /// A restore that found damage, waiting for the node states to decide.
    damaged: Option<discard::DamagedRestore>,
    /// Local checkpoints that failed in a row, and when the next may start.
    lcp_failures: u32,
    lcp_retry_at: Instant,
    /// The management server, whose cluster log hears this block's alarms.
    mgmd: Option<NodeId>,
    /// The change stream: tables captured for the subscription block.
    capture: capture::Capture,
    /// A backup's fragment scans writing this node's share (`backup`).
    backups: backup::BackupScans,
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    pub fn new(config: LdmBlockConfig, disk: D) -> LdmBlock<D> {
        assert_eq!(
            config.ldm.instance, config.instance,
            "node {}: LDM block {} with the storage config of instance {}",
            config.node, config.instance, config.ldm.instance
        );
        assert!(
            config.instance < config.placement.ldm_instances(),
            "node {}: LDM instance {} of {}",
            config.node,
            config.instance,
            config.placement.ldm_instances()
        );
        let instance = u16::try_from(config.instance).expect("LDM instance fits a block instance");
        LdmBlock {
            me: BlockRef::new(config.node, BlockNumber::LOCAL_DATA_MANAGER, instance),
            live: crate::live_map::LiveMap::new(config.placement.clone()),
            config,
            disk,
            redo_full_buggified: false,
            instance: None,
            schema: LocalSchema::default(),
            txs: stdx::IdMap::default(),
            free_txs: Vec::new(),
            requests: Requests::new(),
            scans: Scans::new(),
            scratch: requests::Scratch::default(),
            client_reads: client_reads::ClientReads::default(),
            pending_commits: Vec::new(),
            grants: Vec::new(),
            redo_write_armed: false,
            redo_flush: None,
            gcp_saves_waiting: Vec::new(),
            next_io_request: 1,
            lcp_sync: None,
            lcp_step_armed: false,
            hurried_gci: None,
            commit_retry_armed: false,
            changed_since_lcp: false,
            last_lcp_start: Instant::ZERO,
            gcp_start_waiters: Vec::new(),
            restart_gci_waiter: None,
            aborted: RecentlyAborted::default(),
            recent_commits: failover::RecentCommits::default(),
            failed: false,
            stats: LdmStats::default(),
            figures: None,
            in_flight_pace: crate::dbinfo::InFlightPace::default(),
            fragments_next_publish: Instant::ZERO,
            held: Vec::new(),
            memory_alarm: crate::alarm::Alarm::default(),
            redo_alarm: crate::alarm::Alarm::default(),
            key_batches: batches::KeyBatches::default(),
            alter: alter::AlterState::default(),
            restart: copy::NodeRestart::default(),
            checks: std::cell::Cell::new(0),
            discard: None,
            damaged: None,
            lcp_failures: 0,
            lcp_retry_at: Instant::ZERO,
            mgmd: None,
            capture: capture::Capture::default(),
            backups: backup::BackupScans::default(),
        }
    }

    /// Hands captured row changes and epoch-complete marks to the node's
    /// subscription block at `to` (docs/events.md).
    pub fn with_subscription(mut self, to: BlockRef) -> LdmBlock<D> {
        self.capture.to = Some(to);
        self
    }

    /// `SubCaptureReq`: capture `tables` from now on; answers with the
    /// highest epoch committed here before.
    fn on_capture_req(&mut self, sender: BlockRef, mut tables: Vec<u32>, ctx: &mut Context<'_>) {
        tables.sort_unstable();
        tables.dedup();
        // What was captured before goes first, as it did unbatched.
        self.capture.flush(ctx);
        let followed = self
            .capture
            .set_tables(tables)
            .into_iter()
            .flat_map(|(old, new)| [old, new])
            .collect();
        self.apply_capture();
        let max_epoch = self.capture.max_epoch;
        ctx.send(
            sender,
            SignalBody::SubCaptureConf {
                max_epoch,
                followed,
            },
        );
    }

    /// Passes a view or node state on to the node's subscription block
    /// (from instance 0 only: one copy is enough), which follows the live
    /// map to decide who sends which bucket (docs/events.md).
    fn pass_to_subscription(&mut self, body: impl FnOnce() -> SignalBody, ctx: &mut Context<'_>) {
        if let (Some(to), 0) = (self.capture.to, self.config.instance) {
            // Behind the changes captured before it, as unbatched.
            self.capture.flush(ctx);
            ctx.send(to, body());
        }
    }

    /// Marks the fragments as the captured tables ask (after a capture
    /// request, the open, and schema changes, which add or rebuild
    /// fragments).
    fn apply_capture(&mut self) {
        if let Some(instance) = self.instance.as_mut() {
            // Also after the last backup log closed: its tables stop.
            self.capture.apply(instance, &self.backups.logged_tables());
        }
    }

    /// Reports alarms (local checkpoints failing) to the cluster log of
    /// the management server `mgmd`, besides this node's log.
    pub fn with_cluster_log(mut self, mgmd: Option<NodeId>) -> LdmBlock<D> {
        self.mgmd = mgmd;
        self
    }

    /// Publishes this instance's counters and memory for ndbinfo there.
    pub fn with_figures(mut self, slot: crate::dbinfo::FigureSlot) -> LdmBlock<D> {
        self.figures = Some(slot);
        self
    }

    /// Stores the figures ndbinfo shows (relaxed stores into this
    /// instance's own cache line: no lock, no signal).
    fn publish_figures(&self) {
        use crate::dbinfo::ldm;
        let Some(slot) = &self.figures else {
            return;
        };
        let slot = slot.slot();
        if let Some(instance) = &self.instance {
            let page = storage::memory::PAGE_BYTES as u64;
            slot.set(ldm::USED_PAGES, instance.data_memory_used_bytes() / page);
            slot.set(ldm::TOTAL_PAGES, instance.data_memory_budget_bytes() / page);
            slot.set(ldm::REDO_USED_BYTES, instance.redo_used_bytes());
            slot.set(ldm::REDO_TOTAL_BYTES, instance.redo_capacity_bytes());
            let (buffered, high_water, unsynced) = instance.redo_buffer_figures();
            slot.set(ldm::REDO_BUFFERED_BYTES, buffered);
            slot.set(ldm::REDO_BUFFER_HIGH_WATER, high_water);
            slot.set(ldm::REDO_UNSYNCED_BYTES, unsynced);
        }
        slot.set(ldm::OPERATIONS, self.stats.ops);
        slot.set(ldm::KEY_REQUESTS, self.stats.key_requests);
        slot.set(ldm::COMMITS, self.stats.commits);
        slot.set(ldm::ABORTS, self.stats.aborts);
        slot.set(ldm::SCANS, self.stats.scans);
    }

    /// Copies every fragment's rows and memory (at most
    /// `signal::dbinfo::TABLE_FRAGMENTS_ROWS_MAX`, in table id order) for
    /// `table_fragments`, every `FRAGMENTS_PUBLISH_INTERVAL`, from the
    /// checkpoint check: a walk over the fragments, not over their rows.
    fn publish_fragments(&mut self, now: Instant) {
        let (Some(slot), Some(instance)) = (&self.figures, &self.instance) else {
            return;
        };
        if now < self.fragments_next_publish {
            return;
        }
        let (live, node) = (&self.live, self.config.node);
        let published = slot.fragments().try_publish(|rows| {
            let mut ids: Vec<(u32, u32)> = instance.fragment_ids().collect();
            ids.sort_unstable();
            ids.truncate(signal::dbinfo::TABLE_FRAGMENTS_ROWS_MAX);
            for (table_id, fragment) in ids {
                let Some(frag) = instance.fragment_ref(table_id, fragment) else {
                    continue;
                };
                let fully_replicated = frag.definition().fully_replicated;
                rows.push(crate::dbinfo::FragmentFigure {
                    table_id,
                    table_name: frag.table_name().to_owned(),
                    fragment,
                    primary: live.home_of(fragment, fully_replicated).primary() == node,
                    memory: frag.memory(),
                });
            }
        });
        if published {
            self.fragments_next_publish = now + crate::dbinfo::FRAGMENTS_PUBLISH_INTERVAL;
        }
    }

    /// Copies the scans open and the operations held here (at most
    /// `signal::dbinfo::IN_FLIGHT_ROWS_MAX`) for `cluster_operations`, at
    /// most every `IN_FLIGHT_PUBLISH_INTERVAL`: after a signal, never per
    /// operation; a change within the interval is copied from a timer at
    /// its end. Nothing while there is nothing to show and nothing shown.
    fn publish_in_flight(&mut self, ctx: &mut Context<'_>) {
        let (Some(slot), Some(instance)) = (&self.figures, &self.instance) else {
            return;
        };
        // A committed-read scan holds no transaction record here.
        let busy = !self.txs.is_empty() || !self.scans.is_empty();
        if !self.in_flight_pace.due(busy, TIMER_IN_FLIGHT, ctx) {
            return;
        }
        let (txs, scans, held) = (&self.txs, &self.scans, &mut self.held);
        let published = slot.operations().try_publish(|rows| {
            use crate::dbinfo::{operation, OperationFigure};
            use storage::fragment::HeldOperation as Held;
            use storage::locks::LockMode;
            let rows_max = signal::dbinfo::IN_FLIGHT_ROWS_MAX;
            // Scans first: at most `LDM_SCANS_MAX` of them, each a long
            // piece of work a user looks for, whereas the rows a locking
            // scan locked (one row each) could fill the list and hide it.
            rows.extend(
                scans
                    .open_scans()
                    .take(rows_max)
                    .map(|scan| OperationFigure {
                        tx_id: scan.tx_id,
                        kind: match scan.lock {
                            proto::ops::LockMode::Committed => operation::SCAN,
                            proto::ops::LockMode::Shared => operation::SCAN_SHARED,
                            proto::ops::LockMode::Exclusive => operation::SCAN_EXCLUSIVE,
                        },
                        state: if scan.waiting {
                            operation::WAIT_LOCK
                        } else {
                            operation::SCAN_STATE_USED
                        },
                        table_id: scan.table_id,
                        fragment: scan.partition,
                        tc: scan.tc,
                    }),
            );
            for (&tx_id, record) in txs {
                let Some(tc) = record.tc else { continue };
                for &(table_id, fragment) in &record.fragments {
                    if rows.len() == rows_max {
                        return;
                    }
                    let Some(frag) = instance.fragment_ref(table_id, fragment) else {
                        continue;
                    };
                    held.clear();
                    frag.held_operations(TxId(tx_id), rows_max - rows.len(), held);
                    rows.extend(held.iter().map(|&op| OperationFigure {
                        tx_id,
                        kind: match op {
                            Held::Insert => operation::INSERT,
                            Held::Update => operation::UPDATE,
                            Held::Delete => operation::DELETE,
                            Held::ReadShared | Held::WaitLock(LockMode::Shared) => {
                                operation::READ_SHARED
                            }
                            Held::ReadExclusive | Held::WaitLock(LockMode::Exclusive) => {
                                operation::READ_EXCLUSIVE
                            }
                        },
                        state: match op {
                            Held::WaitLock(_) => operation::WAIT_LOCK,
                            _ => operation::PREPARED,
                        },
                        table_id,
                        fragment,
                        tc,
                    }));
                }
            }
        });
        self.in_flight_pace
            .done(published, busy, TIMER_IN_FLIGHT, ctx);
    }

    /// The 80 % / 90 % alarms of DataMemory and the redo log (module
    /// `alarm`), checked with the checkpoint check, every
    /// `LCP_CHECK_INTERVAL`: changes go to the cluster log.
    fn check_alarms(&mut self, ctx: &mut Context<'_>) {
        let Some(instance) = &self.instance else {
            return;
        };
        let page = storage::memory::PAGE_BYTES as u64;
        let (used_pages, total_pages) = (
            instance.data_memory_used_bytes() / page,
            instance.data_memory_budget_bytes() / page,
        );
        let (redo_used, redo_total) = (instance.redo_used_bytes(), instance.redo_capacity_bytes());
        let i = self.config.instance;
        let memory = self.memory_alarm.update(
            format_args!("LDM instance {i}: DataMemory (pages)"),
            used_pages,
            total_pages,
        );
        let redo = self.redo_alarm.update(
            format_args!("LDM instance {i}: redo log (bytes)"),
            redo_used,
            redo_total,
        );
        for (severity, text) in memory.into_iter().chain(redo) {
            self.cluster_log(signal::EventKind::UsageAlarm, severity, text, ctx);
        }
    }

    /// Logs `text` here and, with a management server, in its cluster log.
    fn cluster_log(
        &self,
        kind: signal::EventKind,
        severity: signal::Severity,
        text: String,
        ctx: &mut Context<'_>,
    ) {
        crate::cluster_log::report(ctx, self.config.node, self.mgmd, kind, severity, text);
    }

    /// Runs with `skarv data --discard-corrupt`: a restore that finds the
    /// files damaged asks through `discard` to move them aside when a
    /// partner serves their data ([`discard`]).
    pub fn with_discard_corrupt(mut self, discard: DiscardCorrupt) -> LdmBlock<D> {
        self.discard = Some(discard);
        self
    }
}

impl<D> LdmBlock<D> {
    /// The block's address.
    pub fn address(&self) -> BlockRef {
        self.me
    }

    /// Whether the instance is open (its fragments restored).
    pub fn is_open(&self) -> bool {
        self.instance.is_some()
    }

    /// The storage instance, for checks in tests.
    pub fn storage(&self) -> Option<&LdmInstance> {
        self.instance.as_ref()
    }

    pub fn stats(&self) -> &LdmStats {
        &self.stats
    }

    /// Transactions with anything on this instance.
    pub fn transactions(&self) -> usize {
        self.txs.len()
    }

    /// Requests waiting for a lock or queued behind one.
    pub fn requests_held(&self) -> usize {
        self.requests.len()
    }

    pub fn scans_open(&self) -> usize {
        self.scans.len()
    }

    /// Fragment copies from here to starting nodes in progress.
    pub fn copies_out(&self) -> usize {
        self.restart.copies_out()
    }

    /// Whether this node is starting (not serving) as the master last said.
    pub fn is_starting(&self) -> bool {
        self.restart.starting
    }

    /// Commits waiting for redo space.
    pub fn commits_pending(&self) -> usize {
        self.pending_commits.len()
    }

    /// Whether an ALTER TABLE waits for the transactions on its table to
    /// end (operations on the table are refused meanwhile).
    pub fn alter_pending(&self) -> bool {
        self.alter.is_pending()
    }

    fn instance_no(&self) -> u32 {
        self.config.instance
    }

    /// Whether partition `p` of a table lives on this instance of this node
    /// (every node holds each partition of a fully replicated table).
    fn owns(&self, partition: u32, fully_replicated: bool) -> bool {
        self.config.owns(partition, fully_replicated)
    }

    /// Gives up on everything: the node is going down. Without `restart`
    /// the node stops as failed (a restart would meet the same files):
    /// its process ends non-zero and its angel leaves it down.
    fn fail(&mut self, ctx: &mut Context<'_>, restart: bool, reason: String) {
        tracing::error!(node = %self.config.node, instance = self.config.instance, "{reason}");
        if !self.failed {
            self.failed = true;
            if restart {
                ctx.shutdown(true, reason);
            } else {
                ctx.shutdown_failed(reason);
            }
        }
    }

    /// Notes that `tx_id` locked or changed fragment `key` here.
    fn touch(&mut self, tx_id: u64, key: (u32, u32)) {
        let record = self
            .txs
            .get_mut(&tx_id)
            .expect("a transaction with a request has a record");
        if !record.fragments.contains(&key) {
            assert!(
                record.fragments.len() < TX_FRAGMENTS_MAX,
                "transaction {tx_id:#x} touched more than {TX_FRAGMENTS_MAX} fragments"
            );
            record.fragments.push(key);
        }
    }

    /// Forgets a transaction with nothing left here.
    fn release_tx_if_idle(&mut self, tx_id: u64) {
        let idle = self
            .txs
            .get(&tx_id)
            .is_some_and(|t| t.fragments.is_empty() && t.queue.is_empty());
        if idle && !self.scans.has_tx(tx_id) {
            let record = self.txs.remove(&tx_id).expect("checked");
            self.free_txs.push(record);
        }
    }
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    // ---- schema ----

    fn on_schema_load(
        &mut self,
        sender: BlockRef,
        tables: Vec<DictTableGroup>,
        schema_version: u32,
        cluster_schema: bool,
        ctx: &mut Context<'_>,
    ) {
        let mut schema = LocalSchema {
            version: schema_version,
            ..LocalSchema::default()
        };
        for group in tables {
            if let Err(message) = install_group(&mut schema, group) {
                let message = format!(
                    "LDM instance {}: schema load: {message}",
                    self.instance_no()
                );
                tracing::error!(node = %self.config.node, "{message}");
                ctx.send(
                    sender,
                    SignalBody::SchemaLoadConf {
                        schema_version,
                        code: proto::error::BAD_DEFINITION,
                        message,
                    },
                );
                return;
            }
        }
        // The copies that replaced tables (copying ALTERs applied before
        // this node started, or while it was away) are followed as if
        // their alter had been applied here (docs/events.md).
        for table in schema.tables.values() {
            if table.replaces != 0 {
                self.capture.remember(table.replaces, table.id);
            }
        }
        let wanted = self.fragments_of(&schema);
        if self.instance.is_none() {
            self.open(sender, schema, wanted, cluster_schema, ctx);
            return;
        }
        self.schema = schema;
        let result = self.reconcile_fragments(&wanted);
        let (code, message) = match result {
            Ok(()) => (0, String::new()),
            Err(message) => {
                tracing::error!(node = %self.config.node, "{message}");
                (proto::error::UNSUPPORTED_ALTER, message)
            }
        };
        let loaded = code == 0;
        ctx.send(
            sender,
            SignalBody::SchemaLoadConf {
                schema_version,
                code,
                message,
            },
        );
        if loaded && cluster_schema {
            self.restart.holds_cluster_schema = true;
            self.after_open_restart(ctx);
        }
    }

    /// Every fragment this instance holds under `schema`.
    fn fragments_of(&self, schema: &LocalSchema) -> BTreeSet<(u32, u32)> {
        let mut wanted = BTreeSet::new();
        for table in schema.tables.values() {
            for p in 0..table.partitions {
                if self.owns(p, table.fully_replicated) {
                    wanted.insert((table.id, p));
                }
            }
        }
        wanted
    }

    fn open(
        &mut self,
        sender: BlockRef,
        schema: LocalSchema,
        wanted: BTreeSet<(u32, u32)>,
        cluster_schema: bool,
        ctx: &mut Context<'_>,
    ) {
        let fragments: Vec<(TableDef, u32)> = wanted
            .iter()
            .map(|&(t, p)| (schema.tables[&t].clone(), p))
            .collect();
        let schema_version = schema.version;
        self.schema = schema;
        let opened = {
            let _restore = storage::disk::allow_sync("restore at start-up: nothing is served yet");
            LdmInstance::open(self.disk.clone(), self.config.ldm.clone(), &fragments, None)
        };
        match opened {
            Ok((mut instance, report)) => {
                // LCPs wait for the node's sysfile to keep their GCIs.
                instance.set_kept_gci(0);
                let rows: u64 = report.fragments.iter().map(|f| f.rows).sum();
                tracing::info!(
                    node = %self.config.node,
                    "{report}; {rows} rows; recovered GCI {:?}",
                    report.recovered_gci
                );
                self.instance = Some(instance);
                self.restart.holds_cluster_schema |= cluster_schema;
                self.apply_capture();
                for master in std::mem::take(&mut self.gcp_start_waiters) {
                    self.answer_gcp_start(master, ctx);
                }
                self.after_open_restart(ctx);
                self.after_open_restart_gci(ctx);
                ctx.send(
                    sender,
                    SignalBody::SchemaLoadConf {
                        schema_version,
                        code: 0,
                        message: String::new(),
                    },
                );
            }
            Err(error) => self.on_restore_failed(sender, schema_version, &error, ctx),
        }
    }

    /// Adds and drops fragments so that the instance holds `wanted`.
    fn reconcile_fragments(&mut self, wanted: &BTreeSet<(u32, u32)>) -> Result<(), String> {
        // A new or dropped fragment's old checkpoint files are removed, and
        // the removal synced, here (a schema change, not a transaction).
        let _files = storage::disk::allow_sync(
            "removing a fragment's checkpoint files: not yet on the io threads",
        );
        let instance = self.instance.as_mut().expect("open");
        let have: BTreeSet<(u32, u32)> = instance.fragment_ids().collect();
        for &(t, p) in have.difference(wanted) {
            instance.drop_fragment(t, p).map_err(|e| e.to_string())?;
            tracing::info!(node = %self.config.node, "LDM instance {}: dropped table {t} fragment {p}", self.config.instance);
        }
        for &(t, p) in wanted.difference(&have) {
            instance
                .add_fragment(&self.schema.tables[&t], p)
                .map_err(|e| e.to_string())?;
        }
        for &key in wanted.difference(&have) {
            self.copy_added_fragment(key);
        }
        let instance = self.instance.as_mut().expect("open");
        for &(t, p) in wanted.intersection(&have) {
            let table = &self.schema.tables[&t];
            let from = instance.fragment_ref(t, p).expect("listed").table_version();
            if from == table.version {
                continue;
            }
            let outcome = instance.alter_fragment(table, p).map_err(|e| {
                format!(
                    "LDM instance {}: ALTER TABLE of table `{}` fragment {p} from version {from} to {}: {e}",
                    self.config.instance, table.name, table.version
                )
            })?;
            tracing::info!(
                node = %self.config.node,
                "LDM instance {}: table `{}` fragment {p} altered from version {from} to {}: {} rows{}, \
                 {} ordered indexes built, {} dropped",
                self.config.instance,
                table.name,
                table.version,
                outcome.rows,
                if outcome.rows_rewritten { " rewritten" } else { "" },
                outcome.indexes_built,
                outcome.indexes_dropped
            );
        }
        Ok(())
    }

    fn on_schema_change(
        &mut self,
        sender: BlockRef,
        op: SchemaOp,
        table_id: u32,
        schema_version: u32,
        group: DictTableGroup,
        ctx: &mut Context<'_>,
    ) {
        if op == SchemaOp::AlterTable && self.instance.is_some() {
            self.start_alter(sender, table_id, schema_version, group, ctx);
            return;
        }
        self.finish_schema_change(sender, op, table_id, schema_version, group, ctx);
    }

    /// Installs a committed schema change (an alter: once its table is
    /// quiet here) and answers it.
    fn finish_schema_change(
        &mut self,
        sender: BlockRef,
        op: SchemaOp,
        table_id: u32,
        schema_version: u32,
        group: DictTableGroup,
        ctx: &mut Context<'_>,
    ) {
        // A captured table's drop: filed before the tables go (its version).
        let dropped = (op == SchemaOp::DropTable)
            .then(|| self.schema.tables.get(&table_id).map(|t| t.version))
            .flatten();
        // What each table of the group replaced before (its parts tables
        // follow a copy's BLOB/TEXT columns).
        let replaced_before: Vec<(u32, u32)> = self
            .schema
            .groups
            .get(&table_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.schema.tables.get(id).map(|t| (*id, t.replaces)))
            .collect();
        let result = self.apply_schema_change(op, table_id, group);
        self.schema.version = schema_version;
        if result.is_ok() {
            // An alter carries the new definition (a subscriber behind
            // may find the dictionary past it: altered again, dropped).
            let entry = match op {
                SchemaOp::AlterTable => self.schema.tables.get(&table_id).map(|t| {
                    let mut def = Vec::new();
                    t.encode(&mut def);
                    (sub_change::ALTER, t.version, def)
                }),
                SchemaOp::DropTable => dropped.map(|v| (sub_change::DROP, v, Vec::new())),
                SchemaOp::CreateTable => None,
            };
            if let Some((kind, version, def)) = entry {
                self.capture
                    .schema_entry(kind, table_id, version, &def, ctx);
                let what = if kind == sub_change::DROP {
                    "drop"
                } else {
                    "alter"
                };
                self.backups.table_changed(table_id, what, version);
            }
            if op == SchemaOp::DropTable {
                for &(id, _) in &replaced_before {
                    self.capture.forget(id);
                }
            }
            if op == SchemaOp::AlterTable {
                let group: Vec<u32> = self
                    .schema
                    .groups
                    .get(&table_id)
                    .cloned()
                    .unwrap_or_default();
                for id in group {
                    let before = replaced_before
                        .iter()
                        .find(|&&(t, _)| t == id)
                        .map_or(0, |&(_, r)| r);
                    self.follow_copy(id, before, ctx);
                }
            }
        }
        let (code, message) = match result {
            Ok(()) => (0, String::new()),
            Err((code, message)) => {
                tracing::error!(node = %self.config.node, "{message}");
                (code, message)
            }
        };
        ctx.send(
            sender,
            SignalBody::SchemaChangeConf {
                table_id,
                schema_version,
                code,
                message,
            },
        );
    }

    /// A copying ALTER's copy `table_id` that has just taken the name of
    /// the table it replaces (the alter set `TableDef::replaces`; it was
    /// `replaced_before`), or one of the copy's BLOB/TEXT parts tables
    /// (the base first): captured from now on if the replaced table is,
    /// with a `REPLACE` entry first (docs/events.md, "A copying ALTER").
    fn follow_copy(&mut self, table_id: u32, replaced_before: u32, ctx: &mut Context<'_>) {
        let Some(table) = self.schema.tables.get(&table_id) else {
            return;
        };
        let replaced = table.replaces;
        if replaced == 0 && replaced_before != 0 {
            // A swap undone (a RENAME TABLE whose later pair failed): the
            // table replaces nothing now. Subscriptions that follow it
            // keep it, as they keep a parked table; a later one to the
            // table it replaced no longer gets it.
            self.capture.unfollow(replaced_before, table_id);
            return;
        }
        if replaced == 0 || replaced == replaced_before {
            return;
        }
        if !self.capture.follow(replaced, table_id) {
            return;
        }
        let mut def = Vec::new();
        table.encode(&mut def);
        let version = table.version;
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: table `{}` (id {table_id}) replaces captured table {replaced}: \
             captured from version {version}",
            self.config.instance,
            table.name
        );
        self.apply_capture();
        self.capture
            .replace_entry(replaced, table_id, version, &def, ctx);
    }

    fn apply_schema_change(
        &mut self,
        op: SchemaOp,
        table_id: u32,
        group: DictTableGroup,
    ) -> Result<(), (u32, String)> {
        let instance = self.config.instance;
        match op {
            SchemaOp::CreateTable | SchemaOp::AlterTable => {
                // An alter comes here once no transaction is on its table
                // (`alter`): the fragments whose version changed are
                // altered by the reconcile below.
                install_group(&mut self.schema, group).map_err(|m| {
                    (
                        proto::error::BAD_DEFINITION,
                        format!("LDM instance {instance}: {op:?} of table {table_id}: {m}"),
                    )
                })?;
            }
            SchemaOp::DropTable => {
                if let Some(ids) = self.schema.groups.remove(&table_id) {
                    for id in ids {
                        self.schema.tables.remove(&id);
                    }
                }
            }
        }
        if self.instance.is_none() {
            // Opened with the whole schema at the first load.
            return Ok(());
        }
        let wanted = self.fragments_of(&self.schema);
        let reconciled = self
            .reconcile_fragments(&wanted)
            .map_err(|m| (proto::error::UNSUPPORTED_ALTER, m));
        // New and rebuilt fragments are captured as their table is.
        self.apply_capture();
        reconciled
    }

    // ---- commit and abort ----

    /// Commits `tx_id` here, then passes the commit on along `next` or,
    /// at the end of the chain, answers `reply_to`. A transaction unknown
    /// here committed already (a chain restarted after a node failure, or
    /// a repeated request) and is passed on at once: commits are idempotent.
    fn on_commit(
        &mut self,
        reply_to: BlockRef,
        next: signal::RefChain,
        tx_id: u64,
        epoch: u64,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let epoch = self.commit_epoch(epoch);
        if self.commit_here(reply_to, &next, tx_id, epoch, ctx) {
            pass_commit_on(tx_id, epoch, reply_to, next, ctx);
        }
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    /// `on_commit` for each of `tx_ids`, whose chains go on along the same
    /// `next`: those committed now go on in one signal, those that wait
    /// for redo space go on alone once committed (`retry_commits`).
    fn on_commit_batch(
        &mut self,
        tc: BlockRef,
        mut next: signal::RefChain,
        mut tx_ids: Vec<u64>,
        epoch: u64,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let epoch = self.commit_epoch(epoch);
        tx_ids.retain(|&tx_id| self.commit_here(tc, &next, tx_id, epoch, ctx));
        if !tx_ids.is_empty() {
            if next.is_empty() {
                let gci = signal::epoch::hi(epoch);
                ctx.send(tc, SignalBody::LdmCommitBatchConf { gci, tx_ids });
            } else {
                let to = next.remove(0);
                ctx.send(
                    to,
                    SignalBody::LdmCommitBatchReq {
                        epoch,
                        tc,
                        next,
                        tx_ids,
                    },
                );
            }
        }
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    /// The epoch a commit in `epoch` is logged in here (its hi is the GCI).
    fn commit_epoch(&self, epoch: u64) -> u64 {
        if copy::is_copy_gci(signal::epoch::hi(epoch)) && self.instance.is_some() {
            // A node restart's copied rows: a GCI this redo log accepts.
            signal::epoch::make(self.copy_gci(), 0)
        } else {
            epoch
        }
    }

    /// Commits `tx_id` here; true when it is done and goes on along `next`,
    /// false when it waits (for redo space, or as a commit already pending
    /// here, which now answers along this newer chain).
    fn commit_here(
        &mut self,
        reply_to: BlockRef,
        next: &[BlockRef],
        tx_id: u64,
        epoch: u64,
        ctx: &mut Context<'_>,
    ) -> bool {
        self.commit_tx(reply_to, next, tx_id, epoch, None, ctx)
    }

    /// [`Self::commit_here`]; `lone`, for a transaction that has no record
    /// here (a one-phase commit run at its arrival, `one_phase_at_once`):
    /// its TC and the fragments its operation touched.
    fn commit_tx(
        &mut self,
        reply_to: BlockRef,
        next: &[BlockRef],
        tx_id: u64,
        epoch: u64,
        lone: Option<(BlockRef, TxFragments)>,
        ctx: &mut Context<'_>,
    ) -> bool {
        if self.failed {
            // The node is going down (a commit before this one failed).
            return false;
        }
        if let Some(pending) = self.pending_commits.iter_mut().find(|p| p.tx_id == tx_id) {
            // A repeated request: the pending commit answers it, along the
            // newer chain (a TC restarts a chain without its failed nodes).
            pending.reply_to = reply_to;
            pending.next = signal::RefChain::from_slice(next);
            return false;
        }
        let (tc, fragments) = match lone {
            Some((tc, fragments)) => {
                debug_assert!(
                    !self.txs.contains_key(&tx_id),
                    "a lone commit has no record"
                );
                self.scans.close_tx(tx_id);
                (Some(tc), fragments)
            }
            None => {
                let (tc, dropped, fragments) = self.end_tx_records(tx_id);
                if dropped > 0 {
                    tracing::warn!(
                        node = %self.config.node,
                        "LDM instance {}: commit of transaction {tx_id:#x} with {dropped} requests \
                         still here; they are dropped",
                        self.config.instance,
                    );
                }
                (tc, fragments)
            }
        };
        // Before anything of it can be captured: see `capture::Capture`.
        self.capture.max_epoch = self.capture.max_epoch.max(epoch);
        if let Some(tc) = tc {
            self.recent_commits.remember(tx_id, tc.node, epoch);
        }
        // The chain is kept only by a commit that waits: it allocates.
        let mut pending = PendingCommit {
            tx_id,
            epoch,
            reply_to,
            next: signal::RefChain::new(),
            fragments,
        };
        if self.try_commit(&mut pending, ctx) {
            return true;
        }
        if !self.failed {
            pending.next = signal::RefChain::from_slice(next);
            self.pending_commits.push(pending);
            self.arm_commit_retry(ctx);
        }
        false
    }

    /// Commits what is left of `pending`; true when all of it is done.
    fn try_commit(&mut self, pending: &mut PendingCommit, ctx: &mut Context<'_>) -> bool {
        let Some(instance) = self.instance.as_mut() else {
            assert!(
                pending.fragments.is_empty(),
                "fragments touched before the instance opened"
            );
            return true;
        };
        while let Some(&(t, p)) = pending.fragments.last() {
            let gci = signal::epoch::hi(pending.epoch);
            match instance.commit(t, p, TxId(pending.tx_id), gci, &mut self.grants) {
                Ok(()) => {
                    pending.fragments.pop();
                    self.changed_since_lcp = true;
                    if self.backups.logging() {
                        // The backup's log takes every change, the change
                        // stream its subscribed tables'.
                        let taken = self.capture.take_for_log(instance);
                        let node = self.config.node;
                        self.backups
                            .log_changes(pending.epoch, taken, &self.live, node);
                        if self.capture.hand_over_taken(pending.epoch, ctx) {
                            ctx.set_timer(capture::CAPTURE_FLUSH_DELAY, TIMER_CAPTURE_FLUSH);
                        }
                    } else if self.capture.on()
                        && self.capture.hand_over(instance, pending.epoch, ctx)
                    {
                        ctx.set_timer(capture::CAPTURE_FLUSH_DELAY, TIMER_CAPTURE_FLUSH);
                    }
                }
                Err(storage::instance::LdmError::NoSuchFragment { .. }) => {
                    // Dropped with its table: nothing left to commit.
                    pending.fragments.pop();
                }
                Err(error) if error.is_temporary() => {
                    self.stats.commit_retries += 1;
                    if !instance.lcp_running() {
                        self.start_lcp("redo log part full at commit", ctx);
                    }
                    return false;
                }
                Err(error) => {
                    let reason = format!(
                        "LDM instance {}: commit of transaction {:#x} in GCI {} failed: {error}; restarting the node",
                        self.config.instance, pending.tx_id, gci
                    );
                    self.fail(ctx, true, reason);
                    return false;
                }
            }
        }
        self.stats.commits += 1;
        self.arm_redo_write(ctx);
        true
    }

    fn retry_commits(&mut self, ctx: &mut Context<'_>) {
        let mut pending = std::mem::take(&mut self.pending_commits);
        let mut i = 0;
        while i < pending.len() && !self.failed {
            if self.try_commit(&mut pending[i], ctx) {
                commit_done(pending.remove(i), ctx);
            } else {
                i += 1;
            }
        }
        self.pending_commits = pending;
        if !self.pending_commits.is_empty() {
            self.arm_commit_retry(ctx);
        }
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    fn on_abort(&mut self, sender: BlockRef, tx_id: u64, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        if self.pending_commits.iter().any(|p| p.tx_id == tx_id) {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: abort of transaction {tx_id:#x}, whose commit is in progress: the commit stands",
                self.config.instance
            );
            return;
        }
        if self.abort_while_deciding(sender, tx_id, ctx) {
            // Answered once the backup, which decides, has.
            return;
        }
        self.abort_here(tx_id);
        ctx.send(sender, SignalBody::LdmAbortConf { tx_id });
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    /// Drops what `tx_id` holds here (its requests, locks and changes),
    /// remembering it aborted; the caller runs the lock waiters.
    pub(super) fn abort_here(&mut self, tx_id: u64) {
        self.aborted.remember(tx_id);
        let (_, _, fragments) = self.end_tx_records(tx_id);
        if let Some(instance) = self.instance.as_mut() {
            for &(t, p) in &fragments {
                // A fragment dropped meanwhile has nothing of it left.
                let _ = instance.abort(t, p, TxId(tx_id), &mut self.grants);
            }
        }
        self.stats.aborts += 1;
    }

    /// Ends the records of a transaction that commits or aborts here, with
    /// one lookup of its record: drops its queued requests (no answers: its
    /// TC decided its outcome), closes its scans and recycles its record.
    /// Returns its TC, how many requests were dropped and the fragments it
    /// touched, which the caller commits or aborts.
    fn end_tx_records(&mut self, tx_id: u64) -> (Option<BlockRef>, usize, TxFragments) {
        self.scans.close_tx(tx_id);
        let Entry::Occupied(mut entry) = self.txs.entry(tx_id) else {
            return (None, 0, TxFragments::new());
        };
        let record = entry.get_mut();
        let dropped = record.queue.len();
        // Drained, not taken: the record (recycled) keeps its capacity.
        while let Some(slot) = record.queue.pop_front() {
            self.requests.free(slot);
        }
        let fragments = std::mem::take(&mut record.fragments);
        let tc = record.tc;
        // Idle now: no request, no scan, its fragments with the caller.
        self.free_txs.push(entry.remove());
        (tc, dropped, fragments)
    }

    // ---- global checkpoints ----

    fn on_gcp_save(&mut self, sender: BlockRef, gci: u32, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        assert!(
            self.pending_commits.iter().all(|p| signal::epoch::hi(p.epoch) > gci),
            "LDM instance {}: GcpSaveReq for GCI {gci} while a commit of GCI ≤ {gci} is still pending here",
            self.config.instance
        );
        if self.redo_flush.is_some() {
            // Flushed after the one in flight completes (its marker is
            // written already; a later GCI needs a marker of its own).
            if self.gcp_saves_waiting.len() >= GCP_SAVES_WAITING_MAX {
                self.gcp_saves_waiting.remove(0);
            }
            self.gcp_saves_waiting.push((sender, gci));
            return;
        }
        self.begin_redo_flush(vec![(sender, gci)], ctx);
    }

    /// Begins the flush of the highest GCI `waiters` asked for and hands
    /// its fsync to an `io` thread; answers at once when nothing needs a
    /// sync (no instance, or the GCI is durable already).
    fn begin_redo_flush(&mut self, waiters: Vec<(BlockRef, u32)>, ctx: &mut Context<'_>) {
        assert!(self.redo_flush.is_none(), "one redo flush at a time");
        let Some(gci) = waiters.iter().map(|&(_, gci)| gci).max() else {
            return;
        };
        let Some(instance) = self.instance.as_mut() else {
            self.redo_flush_done(gci, waiters, ctx);
            return;
        };
        let begun = instance
            .write_redo()
            .and_then(|()| instance.begin_flush_gci(gci));
        match begun {
            Err(error) => {
                let reason = format!(
                    "LDM instance {}: cannot make GCI {gci} durable: {error}; restarting the node",
                    self.config.instance
                );
                self.fail(ctx, true, reason);
            }
            Ok(None) => self.redo_flush_done(gci, waiters, ctx),
            Ok(Some(sync)) => {
                let request = self.next_io_request;
                self.next_io_request += 1;
                self.redo_flush = Some(RedoFlush {
                    request,
                    gci,
                    waiters,
                });
                ctx.io(request, Box::new(move || sync.run()));
            }
        }
    }

    /// `FsConf` of a file request: the redo flush's sync or the LCP's.
    fn on_fs_conf(&mut self, request: u64, error: String, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        if self.lcp_sync.as_ref().is_some_and(|(r, _)| *r == request) {
            // Its failures, if any, are in the sync's outcomes.
            self.on_lcp_sync_done(ctx);
            return;
        }
        if self.on_backup_sync_done(request, &error, ctx) {
            return;
        }
        let Some(flush) = self.redo_flush.take_if(|f| f.request == request) else {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: FsConf of unknown file request {request}",
                self.config.instance
            );
            return;
        };
        let instance = self
            .instance
            .as_mut()
            .expect("a flush in flight belongs to the open instance");
        let outcome = if error.is_empty() { Ok(()) } else { Err(error) };
        match instance.complete_flush_gci(outcome) {
            Err(error) => {
                let reason = format!(
                    "LDM instance {}: cannot make GCI {} durable: {error}; restarting the node",
                    self.config.instance, flush.gci
                );
                self.fail(ctx, true, reason);
            }
            Ok(durable) => {
                assert_eq!(durable, flush.gci, "the flush made its own GCI durable");
                self.redo_flush_done(flush.gci, flush.waiters, ctx);
                let waiting = std::mem::take(&mut self.gcp_saves_waiting);
                if !waiting.is_empty() {
                    self.begin_redo_flush(waiting, ctx);
                }
            }
        }
    }

    /// GCI `gci` is durable here: answers the masters that asked for it
    /// (or a lower one, which it covers).
    fn redo_flush_done(&mut self, gci: u32, waiters: Vec<(BlockRef, u32)>, ctx: &mut Context<'_>) {
        // The durability promise: a GCI is reported only once the redo
        // log part holds it durable (no instance: nothing to hold).
        assert!(
            self.instance
                .as_ref()
                .is_none_or(|i| i.durable_gci().is_some_and(|d| d >= gci)),
            "LDM instance {}: GCI {gci} reported saved before its redo is synced",
            self.config.instance
        );
        self.stats.gcp_saves += 1;
        self.recent_commits.saved(gci);
        for (master, asked) in waiters {
            assert!(asked <= gci);
            ctx.send(master, SignalBody::GcpSaveConf { gci: asked });
        }
        // An LCP waiting for this GCI can complete now.
        if self.instance.as_ref().is_some_and(LdmInstance::lcp_running) {
            self.arm_lcp_step(ctx, LCP_STEP_DELAY);
        }
    }

    /// Tells a distribution master the highest GCI this instance's redo
    /// log part made durable (0: none), so that it hands out only higher ones.
    fn answer_gcp_start(&self, master: BlockRef, ctx: &mut Context<'_>) {
        let gci = self
            .instance
            .as_ref()
            .and_then(LdmInstance::highest_gci_seen)
            .unwrap_or(0);
        ctx.send(
            master,
            SignalBody::GcpStartConf {
                gci,
                incarnation: 0,
                previous_incarnation: 0,
                restart_gci: 0,
                epoch: 0,
                previous_epoch: 0,
            },
        );
    }

    // ---- timers ----

    fn arm_redo_write(&mut self, ctx: &mut Context<'_>) {
        if !self.redo_write_armed {
            self.redo_write_armed = true;
            ctx.set_timer(REDO_WRITE_DELAY, TIMER_REDO_WRITE);
        }
    }

    fn arm_commit_retry(&mut self, ctx: &mut Context<'_>) {
        if !self.commit_retry_armed {
            self.commit_retry_armed = true;
            ctx.set_timer(COMMIT_RETRY_DELAY, TIMER_COMMIT_RETRY);
        }
    }

    /// A local checkpoint round failed and was abandoned (the next one
    /// writes full checkpoints). Not a reason to stop: reads and commits go
    /// on until the redo log part fills, and then writes are refused with
    /// 410 until a checkpoint completes. The next round waits a pause that
    /// grows while they keep failing; the first failure of a streak raises
    /// an alarm in the cluster log.
    fn on_lcp_failed(&mut self, error: &storage::instance::LdmError, ctx: &mut Context<'_>) {
        self.stats.lcps_failed += 1;
        self.lcp_failures += 1;
        // What changed before it is in no checkpoint yet: try again.
        self.changed_since_lcp = true;
        let delay = LCP_RETRY_DELAY
            .saturating_mul(1 << (self.lcp_failures - 1).min(16))
            .min(LCP_RETRY_DELAY_MAX);
        self.lcp_retry_at = Instant(ctx.now().0 + delay.as_nanos() as u64);
        if self.lcp_failures == 1 {
            let text = format!(
                "node {} LDM instance {}: local checkpoint failed: {error}; retrying (every {} s at \
                 most); writes are refused (410) once the redo log fills, reads go on",
                self.config.node,
                self.config.instance,
                LCP_RETRY_DELAY_MAX.as_secs()
            );
            self.cluster_log(
                signal::EventKind::CheckpointStopped,
                signal::Severity::Alert,
                text,
                ctx,
            );
        } else {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: local checkpoint failed again ({} in a row): {error}",
                self.config.instance,
                self.lcp_failures
            );
        }
    }

    fn arm_lcp_step(&mut self, ctx: &mut Context<'_>, after: Duration) {
        if !self.lcp_step_armed {
            self.lcp_step_armed = true;
            ctx.set_timer(after, TIMER_LCP_STEP);
        }
    }

    fn on_timeout(&mut self, timer_id: u32, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        match timer_id {
            TIMER_REDO_WRITE => {
                self.redo_write_armed = false;
                self.write_redo(ctx);
            }
            TIMER_COMMIT_RETRY => {
                self.commit_retry_armed = false;
                self.retry_commits(ctx);
            }
            TIMER_LCP_STEP => {
                self.lcp_step_armed = false;
                self.lcp_step(ctx);
            }
            TIMER_LCP_CHECK => {
                ctx.set_timer(LCP_CHECK_INTERVAL, TIMER_LCP_CHECK);
                self.check_lcp_due(ctx);
                self.check_alarms(ctx);
                self.publish_fragments(ctx.now());
            }
            discard::TIMER_DISCARD_DECISION => self.decide_discard(true, ctx),
            alter::TIMER_ALTER_CHECK => self.on_alter_timer(ctx),
            copy::TIMER_COPY_RETRY => self.on_copy_retry_timer(ctx),
            // The copy is made after the signal, as after every one.
            TIMER_IN_FLIGHT => self.in_flight_pace.on_timer(),
            TIMER_CAPTURE_FLUSH => {
                self.capture.flush_armed = false;
                self.capture.flush(ctx);
            }
            other => tracing::warn!(node = %self.config.node, "LDM: unknown timer {other}"),
        }
    }

    fn write_redo(&mut self, ctx: &mut Context<'_>) {
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        match instance.write_redo() {
            Ok(()) => self.stats.redo_writes += 1,
            Err(error) => {
                // Nothing changed; the next write (or the GCP's flush) tries again.
                tracing::warn!(
                    node = %self.config.node,
                    "LDM instance {}: redo write failed: {error}; retrying",
                    self.config.instance
                );
                self.arm_redo_write(ctx);
            }
        }
    }

    // ---- local checkpoints ----

    fn check_lcp_due(&mut self, ctx: &mut Context<'_>) {
        self.check_copy_lcp(ctx);
        let Some(instance) = self.instance.as_ref() else {
            return;
        };
        if instance.lcp_running() {
            return;
        }
        if redo_under_pressure(instance) {
            self.start_lcp("redo log part half full", ctx);
        } else if self.changed_since_lcp
            && ctx.now().0 >= self.last_lcp_start.0 + self.config.lcp_interval.as_nanos() as u64
        {
            self.start_lcp("interval passed", ctx);
        }
    }

    fn start_lcp(&mut self, why: &str, ctx: &mut Context<'_>) {
        if ctx.now() < self.lcp_retry_at {
            // The last one failed: wait out its pause (see LCP_RETRY_DELAY).
            return;
        }
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        if let Err(error) = instance.start_lcp() {
            tracing::error!(
                node = %self.config.node,
                "LDM instance {}: cannot start a local checkpoint: {error}",
                self.config.instance
            );
            return;
        }
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: local checkpoint started ({why}); redo {} of {} bytes in use",
            self.config.instance,
            instance.redo_used_bytes(),
            instance.redo_capacity_bytes()
        );
        self.stats.lcps_started += 1;
        self.changed_since_lcp = false;
        self.last_lcp_start = ctx.now();
        self.arm_lcp_step(ctx, LCP_STEP_DELAY);
    }

    fn lcp_step(&mut self, ctx: &mut Context<'_>) {
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        let pressure = redo_under_pressure(instance);
        let pages = if pressure {
            (self.config.ldm.lcp_pages_per_step * LCP_PRESSURE_SPEEDUP).min(LCP_PAGES_PER_STEP_MAX)
        } else {
            self.config.ldm.lcp_pages_per_step
        };
        if ctx.buggify_ppm(BUGGIFY_LCP_WRITE_PPM) {
            // Buggify: the next checkpoint file write fails (simulated
            // disks only; a real disk ignores it).
            self.disk.fail_next_write_to("-lcp");
        }
        let progress = match instance.lcp_step_begin(pages) {
            Ok((progress, Some(sync))) => {
                // Finishing LCPs (fsyncs, control files) or the redo trim:
                // on an io thread; the step goes on at its FsConf.
                let request = self.next_io_request;
                self.next_io_request += 1;
                let slot = std::sync::Arc::new(std::sync::Mutex::new(sync));
                let job_slot = std::sync::Arc::clone(&slot);
                ctx.io(
                    request,
                    Box::new(move || {
                        let mut sync = job_slot
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        sync.run()
                    }),
                );
                assert!(self.lcp_sync.is_none(), "one LCP sync in flight");
                self.lcp_sync = Some((request, slot));
                Ok(progress)
            }
            Ok((progress, None)) => Ok(progress),
            Err(error) => Err(error),
        };
        self.on_lcp_progress(progress, pressure, ctx);
    }

    /// `FsConf` of the LCP sync in flight: its outcome goes to the
    /// instance (LCPs complete, the trim takes effect), and the round
    /// steps on.
    fn on_lcp_sync_done(&mut self, ctx: &mut Context<'_>) {
        let (_, slot) = self.lcp_sync.take().expect("an LCP sync was in flight");
        let sync = std::sync::Arc::try_unwrap(slot)
            .expect("the io thread let go of the LCP sync before its FsConf")
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        let pressure = redo_under_pressure(instance);
        let progress = instance.lcp_step_complete(sync);
        self.on_lcp_progress(progress, pressure, ctx);
    }

    fn on_lcp_progress(
        &mut self,
        progress: Result<LcpProgress, storage::instance::LdmError>,
        pressure: bool,
        ctx: &mut Context<'_>,
    ) {
        match progress {
            Ok(LcpProgress::Idle) => {}
            // Stepped on by the sync's FsConf.
            Ok(LcpProgress::Syncing { .. }) => {}
            Ok(LcpProgress::Writing { .. }) => self.arm_lcp_step(ctx, LCP_STEP_DELAY),
            Ok(LcpProgress::AwaitingGci { gci, .. }) => {
                // Waiting out TimeBetweenGlobalCheckpoints (2 s by default)
                // while writes fill the log would end in error 410 at high
                // write rates: ask for the GCP now.
                if pressure && self.hurried_gci != Some(gci) {
                    self.hurried_gci = Some(gci);
                    self.stats.gcp_hurries += 1;
                    let distribution = crate::distribution::Distribution::address(self.config.node);
                    ctx.send(distribution, SignalBody::GcpHurryReq { gci });
                }
                self.arm_lcp_step(ctx, LCP_AWAIT_GCI_DELAY)
            }
            Ok(LcpProgress::Completed {
                lcp_id,
                fragments,
                redo_freed_bytes,
            }) => {
                self.stats.lcps_completed += 1;
                tracing::info!(
                    node = %self.config.node,
                    "LDM instance {}: local checkpoint {lcp_id} complete: {fragments} fragments, \
                     {redo_freed_bytes} redo bytes freed",
                    self.config.instance
                );
                if self.lcp_failures > 0 {
                    let text = format!(
                        "node {} LDM instance {}: local checkpoint {lcp_id} complete after {} \
                         failed: checkpoints and redo trims resume",
                        self.config.node, self.config.instance, self.lcp_failures
                    );
                    self.cluster_log(
                        signal::EventKind::CheckpointResumed,
                        signal::Severity::Info,
                        text,
                        ctx,
                    );
                    self.lcp_failures = 0;
                }
                if !self.pending_commits.is_empty() {
                    self.arm_commit_retry(ctx);
                }
                self.copy_lcp_completed(ctx);
            }
            Err(error) => self.on_lcp_failed(&error, ctx),
        }
    }

    /// Resumes the requests and scans whose locks were granted.
    fn run_grants(&mut self, ctx: &mut Context<'_>) {
        while !self.grants.is_empty() {
            let grants = std::mem::take(&mut self.grants);
            for grant in &grants {
                self.resume(*grant, ctx);
            }
            let mut grants = grants;
            grants.clear();
            if self.grants.is_empty() {
                self.grants = grants;
            }
        }
    }

    fn resume(&mut self, grant: Grant, ctx: &mut Context<'_>) {
        if op_id::is_copy(grant.op) {
            self.resume_copy(grant, ctx);
        } else if op_id::is_scan_space(grant.op) {
            self.resume_scan(grant, ctx);
        } else {
            self.resume_request(grant, ctx);
        }
    }
}

/// Whether the redo log part is filled to [`LCP_REDO_TRIGGER_PERCENT`] or
/// beyond: a checkpoint is due, runs faster, and hurries the GCP it waits for.
fn redo_under_pressure(instance: &LdmInstance) -> bool {
    let capacity = instance.redo_capacity_bytes().max(1);
    instance.redo_used_bytes() * 100 >= capacity * LCP_REDO_TRIGGER_PERCENT
}

/// Adds a group from the dictionary to `schema`.
fn install_group(schema: &mut LocalSchema, group: DictTableGroup) -> Result<(), String> {
    let mut ids = Vec::with_capacity(group.tables.len());
    let mut defs = Vec::with_capacity(group.tables.len());
    for bytes in &group.tables {
        let table = TableDef::decode(bytes).map_err(|e| e.to_string())?;
        table.validate().map_err(|e| e.to_string())?;
        ids.push(table.id);
        defs.push(table);
    }
    let Some(&base) = ids.first() else {
        return Err("a table group without tables".into());
    };
    if let Some(old) = schema.groups.remove(&base) {
        for id in old {
            schema.tables.remove(&id);
        }
    }
    for table in defs {
        schema.tables.insert(table.id, table);
    }
    schema.groups.insert(base, ids);
    Ok(())
}

impl<D: Disk + Clone + Send + 'static> Block for LdmBlock<D> {
    fn check_invariants(&self) {
        self.check_ldm_invariants();
    }

    fn start(&mut self, ctx: &mut Context<'_>) {
        let _no_sync = storage::disk::forbid_sync();
        assert_eq!(
            ctx.me(),
            self.me,
            "LDM block placed at {} but configured as {}",
            ctx.me(),
            self.me
        );
        self.last_lcp_start = ctx.now();
        ctx.set_timer(LCP_CHECK_INTERVAL, TIMER_LCP_CHECK);
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        // This thread runs transactions: it never waits for a disk (file
        // syncs go to the io threads; see the module documentation).
        let _no_sync = storage::disk::forbid_sync();
        self.redo_full_buggified = ctx.buggify_ppm(BUGGIFY_REDO_FULL_PPM);
        let sender = signal.sender;
        let local_dictionary =
            sender.node == self.config.node && sender.block == BlockNumber::DICTIONARY;
        match signal.body {
            SignalBody::Timeout { timer_id } => self.on_timeout(timer_id, ctx),
            SignalBody::SchemaLoadReq {
                tables,
                schema_version,
                cluster_schema,
            } if local_dictionary => {
                if self.failed {
                } else if self.alter.is_pending() {
                    let deferred = alter::DeferredSchema::Load {
                        sender,
                        tables,
                        schema_version,
                        cluster_schema,
                    };
                    self.defer_schema(deferred, ctx);
                } else {
                    self.on_schema_load(sender, tables, schema_version, cluster_schema, ctx);
                }
            }
            SignalBody::SchemaChangeReq {
                op,
                table_id,
                schema_version,
                group,
            } if local_dictionary => {
                if self.failed {
                } else if self.alter.is_pending() {
                    let deferred = alter::DeferredSchema::Change {
                        sender,
                        op,
                        table_id,
                        schema_version,
                        group,
                    };
                    self.defer_schema(deferred, ctx);
                } else {
                    self.on_schema_change(sender, op, table_id, schema_version, group, ctx);
                }
            }
            SignalBody::LdmKeyReq {
                tx_id,
                tc,
                chain,
                ops,
            } => self.on_key_req(sender, tx_id, tc, (chain, None), ops, 0, ctx),
            SignalBody::LdmReadReq {
                tx_id,
                api,
                epoch,
                ops,
            } => self.on_read_req(sender, tx_id, api, epoch, ops, ctx),
            SignalBody::LdmKeyBatchReq { count, entries } => {
                self.on_key_batch_req(sender, count, entries, ctx)
            }
            SignalBody::Continue {
                what: batches::CONTINUE_KEY_BATCHES,
            } if sender == self.me => self.flush_key_batches(ctx),
            SignalBody::Continue {
                what: client_reads::CONTINUE_CLIENT_READS,
            } if sender == self.me => self.on_client_reads_due(ctx),
            SignalBody::LdmKeyCommitReq {
                tx_id,
                tc,
                epoch,
                chain,
                answer,
                ops,
            } => {
                assert!(
                    signal::epoch::hi(epoch) != 0,
                    "{sender} asked for a one-phase commit in GCI 0"
                );
                let answer = (answer != tc).then_some(answer);
                self.on_key_req(sender, tx_id, tc, (chain, answer), ops, epoch, ctx)
            }
            SignalBody::LdmCommitReq { tx_id, epoch } => {
                self.on_commit(sender, signal::RefChain::new(), tx_id, epoch, ctx)
            }
            SignalBody::LdmCommitChainReq {
                tx_id,
                epoch,
                tc,
                next,
            } => self.on_commit(tc, next, tx_id, epoch, ctx),
            SignalBody::LdmCommitBatchReq {
                epoch,
                tc,
                next,
                tx_ids,
            } => self.on_commit_batch(tc, next, tx_ids, epoch, ctx),
            SignalBody::LdmAbortReq { tx_id } => self.on_abort(sender, tx_id, ctx),
            SignalBody::LdmOutcomeReq { tx_id } => self.on_outcome_req(sender, tx_id, ctx),
            SignalBody::LdmScanReq {
                tx_id,
                scan_id,
                spec,
            } => self.on_scan_req(sender, tx_id, scan_id, spec, ctx),
            SignalBody::LdmScanNextReq {
                tx_id,
                scan_id,
                partition,
                close,
            } => self.on_scan_next(sender, tx_id, scan_id, partition, close, ctx),
            SignalBody::GcpSaveReq { gci } => self.on_gcp_save(sender, gci, ctx),
            SignalBody::BackupFragReq {
                request_id,
                backup_id,
                table_id,
                table_version,
                partition,
                rows_max,
                flags,
                path,
            } => {
                let req = backup::FragRequest {
                    request_id,
                    backup_id,
                    table_id,
                    table_version,
                    partition,
                    rows_max,
                    flags,
                };
                self.on_backup_frag_req(sender, req, path, ctx)
            }
            SignalBody::FsConf { request, error }
                if sender.node == self.config.node && sender.block == BlockNumber::FILE_SYSTEM =>
            {
                self.on_fs_conf(request, error, ctx)
            }
            SignalBody::GcpCompleteRep { gci } if sender.node == self.config.node => {
                self.on_gci_kept(gci, ctx)
            }
            SignalBody::RestartGciReq { gci } => self.on_restart_gci(sender, gci, ctx),
            SignalBody::MembershipViewRep { view } if sender.node == self.config.node => {
                self.pass_to_subscription(
                    || SignalBody::MembershipViewRep { view: view.clone() },
                    ctx,
                );
                self.on_view(&view, ctx);
                self.backups.check_live(&self.live);
            }
            body @ SignalBody::NodeStateReq { .. } => {
                self.pass_to_subscription(|| body.clone(), ctx);
                let states = crate::live_map::NodeStates::of(&body).expect("matched");
                self.on_node_states(sender, states, ctx);
                self.backups.check_live(&self.live);
                // A damaged restore waits for these to decide.
                self.decide_discard(false, ctx);
            }
            SignalBody::NodeCopyReq {} => self.on_node_copy_req(sender, ctx),
            SignalBody::CopyFragReq {
                copy_id,
                table_id,
                partition,
            } => self.on_copy_frag_req(sender, copy_id, table_id, partition, ctx),
            SignalBody::CopyFragConf {
                copy_id,
                table_id,
                partition,
                rows,
                code,
                message,
            } => self.on_copy_frag_conf(copy_id, table_id, partition, rows, code, message, ctx),
            SignalBody::LdmKeyConf { tx_id, results, .. }
                if self.on_copy_key_conf(tx_id, &results, ctx) => {}
            SignalBody::LdmCommitConf { tx_id, .. } if self.on_copy_commit_conf(tx_id, ctx) => {}
            // A backup's decision on a one-phase commit over two replicas.
            SignalBody::LdmKeyCommitted {
                tx_id,
                pending,
                results,
                ..
            } if sender.block == BlockNumber::LOCAL_DATA_MANAGER => {
                let decision = requests::Decision::Committed {
                    pending: pending != 0,
                };
                self.on_decision(sender, tx_id, decision, ctx);
                ctx.recycle(results);
            }
            SignalBody::LdmKeyConf { tx_id, results, .. }
                if sender.block == BlockNumber::LOCAL_DATA_MANAGER =>
            {
                let decision = requests::Decision::Failed(&results);
                self.on_decision(sender, tx_id, decision, ctx);
                ctx.recycle(results);
            }
            SignalBody::LdmCommitConf { tx_id, .. }
                if sender.block == BlockNumber::LOCAL_DATA_MANAGER =>
            {
                self.on_decision(sender, tx_id, requests::Decision::CommitDone, ctx);
            }
            SignalBody::LdmAbortConf { tx_id }
                if sender.block == BlockNumber::LOCAL_DATA_MANAGER =>
            {
                self.on_decision(sender, tx_id, requests::Decision::Aborted, ctx);
            }
            SignalBody::LdmTakeOverReq {
                takeover_id,
                failed,
            } => self.on_takeover_req(sender, takeover_id, failed, ctx),
            SignalBody::SubCaptureReq { tables } => self.on_capture_req(sender, tables, ctx),
            SignalBody::SubGcpCompleteRep { epoch } => {
                // Behind every change of the epoch captured here.
                self.capture.flush(ctx);
                if let Some(to) = self.capture.to {
                    ctx.send(to, SignalBody::SubGcpCompleteRep { epoch });
                }
                self.on_backup_epoch_complete(epoch, ctx);
            }
            SignalBody::BackupLogReq {
                request_id,
                backup_id,
                flags,
                stop_epoch,
                tables,
                path,
            } => self.on_backup_log_req(
                sender, request_id, backup_id, flags, stop_epoch, tables, path, ctx,
            ),
            SignalBody::GcpStartReq {} => {
                if self.instance.is_some() {
                    self.answer_gcp_start(sender, ctx);
                } else if !self.gcp_start_waiters.contains(&sender) {
                    // One entry per master: bounded by the node ids.
                    self.gcp_start_waiters.push(sender);
                }
            }
            other => {
                tracing::warn!(
                    node = %self.config.node,
                    "LDM instance {}: unexpected signal {} from {sender}",
                    self.config.instance,
                    other.name()
                );
            }
        }
        self.publish_figures();
        self.publish_in_flight(ctx);
    }
}
