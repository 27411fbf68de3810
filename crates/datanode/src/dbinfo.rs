//! The figures a data node shows in ndbinfo (docs/operations.md,
//! "ndbinfo"), and the rows its membership block answers `DbinfoScanReq`
//! with.
//!
//! Each TC and LDM instance publishes its counters into a slot of its own
//! ([`BlockFigures`]: atomics on cache lines no other writer touches) with
//! relaxed stores on its own thread; the membership block, on the main
//! thread, reads them when a scan request comes. No lock and no signal
//! stands between a hot path and a reader: a reader sees each figure as
//! some moment's value (figures of one row are not taken at one instant,
//! as in NDB).
//!
//! What is in flight (`cluster_transactions`, `cluster_operations`) is a
//! list, not a figure: each TC and LDM instance copies its transactions or
//! its open scans and operations, at most
//! [`signal::dbinfo::IN_FLIGHT_ROWS_MAX`], into a
//! [`PublishedRows`] of its own at most every [`IN_FLIGHT_PUBLISH_INTERVAL`]
//! while they change (from a timer, never per operation), taking the
//! slot's lock with `try_lock`: a data thread never waits for a reader,
//! and a copy skipped because a reader held the lock is made at the next
//! tick.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kernel::runtime::{os_thread_figures, CpuWindow, ThreadFigure, ThreadFigures};
use kernel::Instant;
use transport::{LinkFigure, LinkFigures};

use signal::dbinfo::{self, TableDef};
use signal::{BlockRef, DbinfoRow, NodeId};

/// The longest a TC or LDM instance keeps a change to what it has in flight
/// from `cluster_transactions` and `cluster_operations`: its copy is
/// renewed from a timer this long after the first change since the last.
pub const IN_FLIGHT_PUBLISH_INTERVAL: Duration = Duration::from_millis(100);

/// When a TC or LDM instance next copies what it holds in flight for
/// ndbinfo: after a signal, at most every [`IN_FLIGHT_PUBLISH_INTERVAL`],
/// a change within the interval copied from a timer at its end, nothing
/// while there is nothing to show and nothing shown.
#[derive(Debug, Default)]
pub(crate) struct InFlightPace {
    next: Instant,
    published: bool,
    timer_armed: bool,
}

impl InFlightPace {
    /// Whether to copy now; `busy`: something is in flight. Arms the
    /// block's `timer_id` for a copy due later.
    pub(crate) fn due(&mut self, busy: bool, timer_id: u32, ctx: &mut kernel::Context<'_>) -> bool {
        let now = ctx.now();
        if !busy && !self.published {
            return false;
        }
        if now < self.next {
            if !self.timer_armed {
                self.timer_armed = true;
                ctx.set_timer(self.next.saturating_since(now), timer_id);
            }
            return false;
        }
        true
    }

    /// After a copy that was due: `copied` false when a reader held the
    /// list (tried again after the interval); `busy` as copied.
    pub(crate) fn done(
        &mut self,
        copied: bool,
        busy: bool,
        timer_id: u32,
        ctx: &mut kernel::Context<'_>,
    ) {
        self.next = ctx.now() + IN_FLIGHT_PUBLISH_INTERVAL;
        if copied {
            self.published = busy;
        } else if !self.timer_armed {
            self.timer_armed = true;
            ctx.set_timer(IN_FLIGHT_PUBLISH_INTERVAL, timer_id);
        }
    }

    /// The block's timer fired.
    pub(crate) fn on_timer(&mut self) {
        self.timer_armed = false;
    }
}

/// Rows a block instance publishes now and then (see the module doc): the
/// owning instance writes, without ever waiting; the main thread reads.
#[derive(Debug)]
pub struct PublishedRows<T> {
    rows: Mutex<Vec<T>>,
    /// The most rows a copy may hold.
    rows_max: usize,
}

impl<T: Clone> PublishedRows<T> {
    pub fn new(rows_max: usize) -> PublishedRows<T> {
        assert!(rows_max > 0, "a list shows at least a row");
        PublishedRows {
            rows: Mutex::new(Vec::new()),
            rows_max,
        }
    }

    /// Replaces the rows with what `fill` pushes (at most the list's
    /// `rows_max`; the vector's room is reused).
    /// `false`, with nothing changed, when a reader holds the rows now:
    /// publish again later.
    pub fn try_publish(&self, fill: impl FnOnce(&mut Vec<T>)) -> bool {
        let mut rows = match self.rows.try_lock() {
            Ok(rows) => rows,
            Err(std::sync::TryLockError::WouldBlock) => return false,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        rows.clear();
        fill(&mut rows);
        assert!(
            rows.len() <= self.rows_max,
            "published {} rows, above the list's {}",
            rows.len(),
            self.rows_max
        );
        true
    }

    /// A copy of the rows last published.
    pub fn snapshot(&self) -> Vec<T> {
        match self.rows.lock() {
            Ok(rows) => rows.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// A transaction of a TC instance (`cluster_transactions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransactionFigure {
    pub tx_id: u64,
    /// NDB's words where they fit (`CS_STARTED`, ...): see
    /// docs/operations.md.
    pub state: &'static str,
    /// Operations it has run (records held until it ends).
    pub operations: u32,
    /// Operations sent to the LDMs and not answered yet.
    pub outstanding: u32,
    /// When its client last asked something of it.
    pub last_active: Instant,
    /// Who to answer (the sender of its last request).
    pub client: Option<BlockRef>,
}

/// An operation held on an LDM instance (`cluster_operations`): a row
/// that a transaction changed, locked or waits to lock in one fragment,
/// or a scan open on one fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperationFigure {
    pub tx_id: u64,
    /// NDB's words: `INSERT`, `UPDATE`, `DELETE`, `READ-SH`, `READ-EX`,
    /// `SCAN`, `SCAN-SH`, `SCAN-EX` ([`operation`]).
    pub kind: &'static str,
    /// `PREPARED` (NDB's word: done here, waiting for commit or abort),
    /// `SCAN_STATE_USED` (a scan open) or `WAIT_LOCK` (waiting for a row
    /// lock).
    pub state: &'static str,
    pub table_id: u32,
    pub fragment: u32,
    /// The TC that runs the transaction.
    pub tc: BlockRef,
}

/// A fragment of an LDM instance (`table_fragments`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentFigure {
    pub table_id: u32,
    /// The table's name in the dictionary (`db/def/t` for a SQL table).
    pub table_name: String,
    pub fragment: u32,
    /// This node holds the partition's primary replica (as the live map
    /// says, failures taken into account).
    pub primary: bool,
    pub memory: storage::fragment::FragmentMemory,
}

/// A data node's restart as the distribution master saw it
/// (`restart_info`): each step's start on the runtime's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartFigure {
    pub node: NodeId,
    /// It joined the view (after being out of it, or at the cluster's
    /// start): it is in the heartbeat protocol, nothing is routed to it.
    pub joined: Instant,
    /// It receives every write of its partitions (its fragments emptied
    /// first): the copy from the live nodes runs. None for a node that
    /// served at once (a first start or a system restart's restored node).
    pub receiving: Option<Instant>,
    /// It serves: the restart is complete.
    pub serving: Option<Instant>,
    /// It left the view before or after completing.
    pub failed: Option<Instant>,
}

impl RestartFigure {
    /// The row: the step it is in, and each step's length (a step in
    /// progress counts up to `now`; after a failure, to the failure).
    fn row(&self, now: Instant) -> DbinfoRow {
        let end = self.failed.unwrap_or(now);
        let since = |from: Instant, to: Option<Instant>| to.unwrap_or(end).saturating_since(from);
        let zero = Duration::ZERO;
        // Joined to receiving (or to serving, for a node that served at once).
        let include = match (self.receiving, self.serving) {
            (Some(r), _) => r.saturating_since(self.joined),
            (None, serving) => since(self.joined, serving),
        };
        let synchronize = self.receiving.map_or(zero, |r| since(r, self.serving));
        let total = since(self.joined, self.serving);
        let (status, status_int) = if self.failed.is_some() {
            dbinfo::RESTART_NODE_FAILED
        } else if self.serving.is_some() {
            dbinfo::RESTART_COMPLETED
        } else if self.receiving.is_some() {
            dbinfo::RESTART_SYNCHRONIZING
        } else {
            dbinfo::RESTART_INCLUDED
        };
        let ms = |d: Duration| d.as_millis() as u64;
        DbinfoRow {
            ints: vec![
                u64::from(self.node.get()),
                status_int,
                include.as_secs(),
                synchronize.as_secs(),
                total.as_secs(),
                ms(include),
                ms(synchronize),
                ms(total),
            ],
            texts: vec![status.to_owned()],
        }
    }
}

/// How often an LDM instance copies its fragments' figures for
/// `table_fragments` (from its checkpoint check, `LCP_CHECK_INTERVAL`).
pub const FRAGMENTS_PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// `cluster_transactions.state` of each TC state (NDB's words where NDB
/// has the state).
pub mod transaction_state {
    /// Open, no request of its client in progress (NDB: CS_STARTED).
    pub const STARTED: &str = "CS_STARTED";
    /// A request's operations are at the LDMs (Skarv's: NDB's TC has no
    /// one state for it).
    pub const EXECUTING: &str = "CS_EXECUTING";
    /// Commit decided, waiting for a GCI (NDB: CS_START_COMMITTING).
    pub const START_COMMITTING: &str = "CS_START_COMMITTING";
    /// Commit sent to the LDMs, waiting for their answers.
    pub const COMMITTING: &str = "CS_COMMITTING";
    /// Abort sent to the LDMs, waiting for their answers.
    pub const ABORTING: &str = "CS_ABORTING";
}

/// `cluster_operations.operation_type` and `state` (NDB's words).
pub mod operation {
    pub const INSERT: &str = "INSERT";
    pub const UPDATE: &str = "UPDATE";
    pub const DELETE: &str = "DELETE";
    pub const READ_SHARED: &str = "READ-SH";
    pub const READ_EXCLUSIVE: &str = "READ-EX";
    /// Done on this replica, waiting for commit or abort.
    pub const PREPARED: &str = "PREPARED";
    /// Waiting for a row lock another transaction holds (a key operation,
    /// or a locking scan at a row).
    pub const WAIT_LOCK: &str = "WAIT_LOCK";
    /// A scan open on the LDM: a committed read, or taking shared or
    /// exclusive row locks.
    pub const SCAN: &str = "SCAN";
    pub const SCAN_SHARED: &str = "SCAN-SH";
    pub const SCAN_EXCLUSIVE: &str = "SCAN-EX";
    /// A scan open, not waiting for a lock: running a batch or waiting for
    /// its client to ask for the next (NDB's DBLQH state of a scan's
    /// operation record through its life).
    pub const SCAN_STATE_USED: &str = "SCAN_STATE_USED";
}

/// Figures one block instance publishes.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct BlockFigures {
    values: [AtomicU64; FIGURES_PER_BLOCK_MAX],
}

/// Figures a block instance keeps at most (a slot's size).
pub const FIGURES_PER_BLOCK_MAX: usize = 12;

impl BlockFigures {
    /// Sets figure `id` (only the owning instance writes its slot).
    #[inline]
    pub fn set(&self, id: usize, value: u64) {
        self.values[id].store(value, Ordering::Relaxed);
    }

    /// Adds one to figure `id`: a load and a store, not a locked add, as
    /// the owning instance is the only writer.
    #[inline]
    pub fn bump(&self, id: usize) {
        let cell = &self.values[id];
        cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub fn get(&self, id: usize) -> u64 {
        self.values[id].load(Ordering::Relaxed)
    }
}

/// A histogram of latencies in log2 buckets (`dbinfo::latency_bucket`),
/// kept by one block instance on its own thread: recording one is an
/// index computation and three adds, no lock, no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    pub buckets: [u64; dbinfo::LATENCY_BUCKETS],
    /// Every latency recorded, in microseconds, added up.
    pub sum_us: u64,
    /// Latencies recorded.
    pub count: u64,
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.buckets[dbinfo::latency_bucket(us)] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
        debug_assert_eq!(self.buckets.iter().sum::<u64>(), self.count);
    }
}

/// A histogram as a block instance publishes it (its buckets, sum and
/// count, relaxed stores on cache lines of its own).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct HistogramFigures {
    buckets: [AtomicU64; dbinfo::LATENCY_BUCKETS],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl HistogramFigures {
    /// Stores `histogram` if it changed since the last time (only the
    /// owning instance writes).
    pub fn publish(&self, histogram: &LatencyHistogram) {
        if self.count.load(Ordering::Relaxed) == histogram.count {
            return;
        }
        for (cell, value) in self.buckets.iter().zip(histogram.buckets) {
            cell.store(value, Ordering::Relaxed);
        }
        self.sum_us.store(histogram.sum_us, Ordering::Relaxed);
        self.count.store(histogram.count, Ordering::Relaxed);
    }

    /// What was last published (its figures each of some moment).
    pub fn get(&self) -> LatencyHistogram {
        let mut histogram = LatencyHistogram {
            sum_us: self.sum_us.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
            ..LatencyHistogram::default()
        };
        for (value, cell) in histogram.buckets.iter_mut().zip(&self.buckets) {
            *value = cell.load(Ordering::Relaxed);
        }
        histogram
    }
}

/// An LDM instance's figures (`BlockFigures` ids). The counters are those
/// of `LdmStats`, published after each signal.
pub mod ldm {
    /// DataMemory pages in use (`memoryusage.used_pages`).
    pub const USED_PAGES: usize = 0;
    /// The instance's share of DataMemory, in pages.
    pub const TOTAL_PAGES: usize = 1;
    pub const OPERATIONS: usize = 2;
    pub const KEY_REQUESTS: usize = 3;
    pub const COMMITS: usize = 4;
    pub const ABORTS: usize = 5;
    pub const SCANS: usize = 6;
    /// The instance's redo log ring: bytes in use and its size
    /// (`logspaces`).
    pub const REDO_USED_BYTES: usize = 7;
    pub const REDO_TOTAL_BYTES: usize = 8;
    /// The redo memory buffer (`logbuffers`): bytes in it, the most it
    /// held, bytes written and not yet synced.
    pub const REDO_BUFFERED_BYTES: usize = 9;
    pub const REDO_BUFFER_HIGH_WATER: usize = 10;
    pub const REDO_UNSYNCED_BYTES: usize = 11;
}

/// A TC instance's figures (`BlockFigures` ids): its `TcCounters`,
/// published after each signal.
pub mod tc {
    /// Transactions committed.
    pub const COMMITS: usize = 0;
    /// Transactions that ended without a commit.
    pub const ABORTS: usize = 1;
    /// Scans completed.
    pub const SCANS: usize = 2;
    /// Transactions aborted for a lock wait past
    /// `TransactionDeadlockDetectionTimeout`.
    pub const LOCK_TIMEOUTS: usize = 3;
}

/// `counters` rows: (block id, counter id in the block's slot, NDB's
/// counter id, name). Counter ids are NDB's where NDB has the counter
/// (COMMITS 3, ABORTS 7, OPERATIONS 10), Skarv's from 20 on.
const COUNTERS: &[(Block, usize, u64, &str)] = &[
    (Block::Tc, tc::COMMITS, 3, "COMMITS"),
    (Block::Tc, tc::ABORTS, 7, "ABORTS"),
    (Block::Tc, tc::SCANS, 20, "SCANS"),
    (Block::Tc, tc::LOCK_TIMEOUTS, 25, "LOCK_TIMEOUTS"),
    (Block::Ldm, ldm::OPERATIONS, 10, "OPERATIONS"),
    (Block::Ldm, ldm::KEY_REQUESTS, 21, "KEY_REQUESTS"),
    (Block::Ldm, ldm::COMMITS, 22, "LOCAL_COMMITS"),
    (Block::Ldm, ldm::ABORTS, 23, "LOCAL_ABORTS"),
    (Block::Ldm, ldm::SCANS, 24, "FRAGMENT_SCANS"),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Tc,
    Ldm,
}

/// Every published figure of one data node.
#[derive(Debug)]
pub struct NodeFigures {
    tcs: Vec<BlockFigures>,
    ldms: Vec<BlockFigures>,
    /// Each TC instance's commit latencies (`tc_latency`).
    commit_latency: Vec<HistogramFigures>,
    /// Each TC instance's latencies of requests that do not commit.
    key_latency: Vec<HistogramFigures>,
    /// What each TC instance has in flight (`cluster_transactions`).
    transactions: Vec<PublishedRows<TransactionFigure>>,
    /// What each LDM instance holds (`cluster_operations`).
    operations: Vec<PublishedRows<OperationFigure>>,
    /// Each LDM instance's fragments (`table_fragments`).
    fragments: Vec<PublishedRows<FragmentFigure>>,
    /// The runtime's and the transport's figures, set once the node built
    /// them (after its blocks); until then `threadstat` and `transporters`
    /// have no rows.
    threads: OnceLock<ThreadFigures>,
    links: OnceLock<LinkFigures>,
    /// The restarts the distribution block saw as master (`restart_info`).
    restarts: PublishedRows<RestartFigure>,
}

impl NodeFigures {
    pub fn new(tc_instances: u32, ldm_instances: u32) -> Arc<NodeFigures> {
        let slots = |n: u32| (0..n).map(|_| BlockFigures::default()).collect();
        fn lists<T: Clone>(n: u32, rows_max: usize) -> Vec<PublishedRows<T>> {
            (0..n).map(|_| PublishedRows::new(rows_max)).collect()
        }
        let in_flight = dbinfo::IN_FLIGHT_ROWS_MAX;
        Arc::new(NodeFigures {
            tcs: slots(tc_instances),
            ldms: slots(ldm_instances),
            commit_latency: (0..tc_instances)
                .map(|_| HistogramFigures::default())
                .collect(),
            key_latency: (0..tc_instances)
                .map(|_| HistogramFigures::default())
                .collect(),
            transactions: lists(tc_instances, in_flight),
            operations: lists(ldm_instances, in_flight),
            fragments: lists(ldm_instances, dbinfo::TABLE_FRAGMENTS_ROWS_MAX),
            threads: OnceLock::new(),
            links: OnceLock::new(),
            restarts: PublishedRows::new(dbinfo::RESTART_INFO_ROWS_MAX),
        })
    }

    /// Where `threadstat` reads the execution threads (set once).
    /// Where the distribution master publishes the restarts it saw.
    pub fn restarts(&self) -> &PublishedRows<RestartFigure> {
        &self.restarts
    }

    pub fn set_threads(&self, threads: ThreadFigures) {
        let set = self.threads.set(threads);
        assert!(set.is_ok(), "the thread figures are set once");
    }

    /// Where `transporters` reads the links (set once).
    pub fn set_links(&self, links: LinkFigures) {
        let set = self.links.set(links);
        assert!(set.is_ok(), "the link figures are set once");
    }

    /// Every execution thread's figures now (none before they are wired).
    pub fn threads(&self) -> Vec<ThreadFigure> {
        self.threads.get().map(|t| t.snapshot()).unwrap_or_default()
    }

    /// Every execution thread's last one-second CPU window (none before
    /// the threads are wired; `None` for a thread not yet through one).
    pub fn cpu_windows(&self) -> Vec<Option<CpuWindow>> {
        self.threads
            .get()
            .map(|t| t.cpu_windows())
            .unwrap_or_default()
    }

    /// Every link's figures now (none before they are wired).
    pub fn links(&self) -> Vec<LinkFigure> {
        self.links.get().map(|l| l.snapshot()).unwrap_or_default()
    }

    pub fn tc(&self, instance: u32) -> &BlockFigures {
        &self.tcs[instance as usize]
    }

    pub fn ldm(&self, instance: u32) -> &BlockFigures {
        &self.ldms[instance as usize]
    }
}

/// A block's handle on its own slot.
#[derive(Clone, Debug)]
pub struct FigureSlot {
    figures: Arc<NodeFigures>,
    tc: bool,
    instance: u32,
}

impl FigureSlot {
    pub fn tc(figures: &Arc<NodeFigures>, instance: u32) -> FigureSlot {
        assert!(
            (instance as usize) < figures.tcs.len(),
            "a TC slot per instance"
        );
        FigureSlot {
            figures: figures.clone(),
            tc: true,
            instance,
        }
    }

    pub fn ldm(figures: &Arc<NodeFigures>, instance: u32) -> FigureSlot {
        assert!(
            (instance as usize) < figures.ldms.len(),
            "an LDM slot per instance"
        );
        FigureSlot {
            figures: figures.clone(),
            tc: false,
            instance,
        }
    }

    /// Where a TC instance publishes its commit latencies.
    pub fn commit_latency(&self) -> &HistogramFigures {
        assert!(self.tc, "commit latencies are a TC's");
        &self.figures.commit_latency[self.instance as usize]
    }

    /// Where a TC instance publishes the latencies of its requests that
    /// do not commit.
    pub fn key_latency(&self) -> &HistogramFigures {
        assert!(self.tc, "key request latencies are a TC's");
        &self.figures.key_latency[self.instance as usize]
    }

    /// Where a TC instance publishes its transactions.
    pub fn transactions(&self) -> &PublishedRows<TransactionFigure> {
        assert!(self.tc, "transactions are a TC's");
        &self.figures.transactions[self.instance as usize]
    }

    /// Where an LDM instance publishes its operations.
    pub fn operations(&self) -> &PublishedRows<OperationFigure> {
        assert!(!self.tc, "operations are an LDM's");
        &self.figures.operations[self.instance as usize]
    }

    /// Where an LDM instance publishes its fragments.
    pub fn fragments(&self) -> &PublishedRows<FragmentFigure> {
        assert!(!self.tc, "fragments are an LDM's");
        &self.figures.fragments[self.instance as usize]
    }

    #[inline]
    pub fn slot(&self) -> &BlockFigures {
        if self.tc {
            self.figures.tc(self.instance)
        } else {
            self.figures.ldm(self.instance)
        }
    }
}

/// What the membership block knows of its node for the `nodes` table.
pub struct NodeStatus {
    pub node: NodeId,
    /// Seconds since the node process started.
    pub uptime_s: u64,
    /// NDB's words: "STARTING", "STARTED", "STOPPING".
    pub status: &'static str,
    /// 0 once started; 1 while joining the membership; 2 while a member
    /// that does not serve yet (its data being copied in).
    pub start_phase: u64,
    /// Now, on the runtime's clock (what `TransactionFigure::last_active`
    /// is on).
    pub now: Instant,
}

/// The rows of `table` this node has now; `Err` names an unknown table.
pub fn rows(
    table: &str,
    figures: &NodeFigures,
    status: &NodeStatus,
) -> Result<Vec<DbinfoRow>, String> {
    let def = dbinfo::table(table).ok_or_else(|| {
        let names: Vec<&str> = dbinfo::TABLES.iter().map(|t| t.name).collect();
        format!(
            "no ndbinfo table `{table}` (there are: {})",
            names.join(", ")
        )
    })?;
    let node = u64::from(status.node.get());
    let rows = match def.name {
        n if n == dbinfo::MEMORYUSAGE.name => {
            let sum = |id| figures.ldms.iter().map(|s| s.get(id)).sum::<u64>();
            let (used_pages, total_pages) = (sum(ldm::USED_PAGES), sum(ldm::TOTAL_PAGES));
            let page = storage::memory::PAGE_BYTES as u64;
            vec![DbinfoRow {
                ints: vec![
                    node,
                    used_pages * page,
                    used_pages,
                    total_pages * page,
                    total_pages,
                ],
                texts: vec![dbinfo::DATA_MEMORY.to_owned()],
            }]
        }
        n if n == dbinfo::COUNTERS.name => {
            let mut rows = Vec::new();
            for &(block, id, counter_id, name) in COUNTERS {
                let (block_name, slots) = match block {
                    Block::Tc => ("DBTC", &figures.tcs),
                    Block::Ldm => ("DBLQH", &figures.ldms),
                };
                for (instance, slot) in (0u64..).zip(slots) {
                    rows.push(DbinfoRow {
                        ints: vec![node, instance, counter_id, slot.get(id)],
                        texts: vec![block_name.to_owned(), name.to_owned()],
                    });
                }
            }
            rows
        }
        n if n == dbinfo::THREADBLOCKS.name => {
            let mut rows = Vec::new();
            for (thr_no, thread) in (0u64..).zip(figures.threads()) {
                for block in thread.blocks {
                    // A number without a name would be a block the wire
                    // format does not know: shown by number, never hidden.
                    let name = block
                        .block
                        .ndb_name()
                        .map_or_else(|| format!("BLOCK{}", block.block.0), str::to_owned);
                    rows.push(DbinfoRow {
                        ints: vec![node, thr_no, u64::from(block.instance)],
                        texts: vec![name],
                    });
                }
            }
            rows
        }
        n if n == dbinfo::THREADSTAT.name => {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            (0u64..)
                .zip(figures.threads())
                .map(|(thr_no, t)| {
                    let os = os_thread_figures(t.os_tid).unwrap_or_default();
                    DbinfoRow {
                        ints: vec![
                            node,
                            thr_no,
                            t.loops,
                            t.signals,
                            t.sleeps,
                            t.wakes,
                            t.queue_depth,
                            t.os_tid,
                            now_ms,
                            os.utime_us,
                            os.stime_us,
                            os.nvcsw,
                            os.nivcsw,
                            t.sleep_ns / 1_000,
                            t.spin_ns / 1_000,
                            t.buffer_full_ns / 1_000,
                            t.spin_limit_us,
                        ],
                        texts: vec![t.name, t.role.to_string()],
                    }
                })
                .collect()
        }
        n if n == dbinfo::CPUSTAT.name => (0u64..)
            .zip(figures.cpu_windows())
            .filter_map(|(thr_no, window)| {
                let w = window?;
                let os_user = w.percent(w.os_user_us);
                let os_system = w.percent(w.os_system_us);
                Some(DbinfoRow {
                    ints: vec![
                        node,
                        thr_no,
                        os_user,
                        os_system,
                        100u64.saturating_sub(os_user + os_system),
                        w.percent(w.exec_us()),
                        w.percent(w.sleep_us),
                        w.percent(w.spin_us),
                        w.percent(w.buffer_full_us),
                        w.elapsed_us,
                    ],
                    texts: vec![],
                })
            })
            .collect(),
        n if n == dbinfo::TRANSPORTERS.name => figures
            .links()
            .into_iter()
            .map(|l| DbinfoRow {
                ints: vec![
                    node,
                    u64::from(l.peer.get()),
                    l.connect_count,
                    l.bytes_sent,
                    l.bytes_received,
                    l.frames_sent,
                    l.frames_received,
                ],
                texts: vec![
                    if l.up {
                        dbinfo::CONNECTED
                    } else {
                        dbinfo::DISCONNECTED
                    }
                    .to_owned(),
                    l.kind.ndbinfo_name().to_owned(),
                ],
            })
            .collect(),
        n if n == dbinfo::LOGSPACES.name => (0u64..)
            .zip(&figures.ldms)
            .map(|(instance, slot)| DbinfoRow {
                ints: vec![
                    node,
                    0,
                    instance,
                    slot.get(ldm::REDO_TOTAL_BYTES),
                    slot.get(ldm::REDO_USED_BYTES),
                ],
                texts: vec![dbinfo::REDO.to_owned()],
            })
            .collect(),
        n if n == dbinfo::LOGBUFFERS.name => (0u64..)
            .zip(&figures.ldms)
            .map(|(instance, slot)| DbinfoRow {
                ints: vec![
                    node,
                    0,
                    instance,
                    storage::redo::REDO_BUFFER_BYTES as u64,
                    slot.get(ldm::REDO_BUFFERED_BYTES),
                    slot.get(ldm::REDO_BUFFER_HIGH_WATER),
                    slot.get(ldm::REDO_UNSYNCED_BYTES),
                ],
                texts: vec![dbinfo::REDO.to_owned()],
            })
            .collect(),
        n if n == dbinfo::CLUSTER_TRANSACTIONS.name => transaction_rows(figures, status),
        n if n == dbinfo::CLUSTER_OPERATIONS.name => operation_rows(figures, node),
        n if n == dbinfo::TABLE_FRAGMENTS.name => fragment_rows(figures, node),
        n if n == dbinfo::TC_LATENCY.name => latency_rows(figures, node),
        n if n == dbinfo::RESTART_INFO.name => figures
            .restarts
            .snapshot()
            .iter()
            .map(|r| r.row(status.now))
            .collect(),
        n if n == dbinfo::NODES.name => vec![DbinfoRow {
            ints: vec![node, status.uptime_s, status.start_phase],
            texts: vec![status.status.to_owned()],
        }],
        other => unreachable!("table `{other}` of dbinfo::TABLES has no rows here"),
    };
    debug_assert!(
        rows.iter().all(|r| fits(def, r)),
        "rows laid out by {}",
        def.name
    );
    Ok(rows)
}

/// `cluster_transactions`: every TC instance's published transactions.
fn transaction_rows(figures: &NodeFigures, status: &NodeStatus) -> Vec<DbinfoRow> {
    let node = u64::from(status.node.get());
    let mut rows = Vec::new();
    for (instance, list) in (0u64..).zip(&figures.transactions) {
        for tx in list.snapshot() {
            let inactive_s = status.now.saturating_since(tx.last_active).as_secs();
            rows.push(DbinfoRow {
                ints: vec![
                    node,
                    instance,
                    tx.tx_id,
                    u64::from(tx.operations),
                    u64::from(tx.outstanding),
                    inactive_s,
                    // The node that sent its last request; a transaction
                    // without one yet by the node its id names.
                    u64::from(
                        tx.client
                            .map_or(signal::ids::tx_node(tx.tx_id), |c| c.node.get()),
                    ),
                    tx.client.map_or(0, |c| u64::from(c.ndb_number())),
                ],
                texts: vec![tx.state.to_owned()],
            });
        }
    }
    rows
}

/// `cluster_operations`: every LDM instance's published operations.
fn operation_rows(figures: &NodeFigures, node: u64) -> Vec<DbinfoRow> {
    let mut rows = Vec::new();
    for (instance, list) in (0u64..).zip(&figures.operations) {
        for op in list.snapshot() {
            rows.push(DbinfoRow {
                ints: vec![
                    node,
                    instance,
                    op.tx_id,
                    u64::from(op.table_id),
                    u64::from(op.fragment),
                    u64::from(signal::ids::tx_node(op.tx_id)),
                    0,
                    u64::from(op.tc.node.get()),
                    u64::from(op.tc.block.0),
                    u64::from(op.tc.instance),
                ],
                texts: vec![op.kind.to_owned(), op.state.to_owned()],
            });
        }
    }
    rows
}

/// `tc_latency`: every TC instance's latencies of commits and of requests
/// that do not commit, a row per request kind and bucket.
fn latency_rows(figures: &NodeFigures, node: u64) -> Vec<DbinfoRow> {
    let mut rows = Vec::new();
    for (request, per_instance) in [
        (dbinfo::COMMIT, &figures.commit_latency),
        (dbinfo::KEY, &figures.key_latency),
    ] {
        for (instance, published) in (0u64..).zip(per_instance) {
            let histogram = published.get();
            for (bucket, count) in histogram.buckets.into_iter().enumerate() {
                rows.push(DbinfoRow {
                    ints: vec![
                        node,
                        instance,
                        bucket as u64,
                        dbinfo::latency_le_us(bucket),
                        count,
                        histogram.sum_us,
                        histogram.count,
                    ],
                    texts: vec![request.to_owned()],
                });
            }
        }
    }
    rows
}

/// `table_fragments`: every LDM instance's published fragments.
fn fragment_rows(figures: &NodeFigures, node: u64) -> Vec<DbinfoRow> {
    let mut rows = Vec::new();
    for (instance, list) in (0u64..).zip(&figures.fragments) {
        for f in list.snapshot() {
            let m = f.memory;
            rows.push(DbinfoRow {
                ints: vec![
                    node,
                    instance,
                    u64::from(f.table_id),
                    u64::from(f.fragment),
                    m.rows,
                    m.fixed_row_bytes,
                    m.fixed_bytes,
                    m.var_bytes,
                    m.hash_index_bytes,
                    m.data_memory_bytes,
                ],
                texts: vec![
                    f.table_name,
                    if f.primary {
                        dbinfo::PRIMARY
                    } else {
                        dbinfo::BACKUP
                    }
                    .to_owned(),
                ],
            });
        }
    }
    rows
}

/// Whether `row` has as many values of each kind as `def` has columns.
pub fn fits(def: &TableDef, row: &DbinfoRow) -> bool {
    row.ints.len() == def.count(dbinfo::ColumnKind::Int)
        && row.texts.len() == def.count(dbinfo::ColumnKind::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_row_shows_its_step_and_each_steps_length() {
        let ms = |m: u64| Instant(m * 1_000_000);
        let node = NodeId::new(3).unwrap();
        let mut restart = RestartFigure {
            node,
            joined: ms(1_000),
            receiving: None,
            serving: None,
            failed: None,
        };
        // (status, include, synchronize, total), in ms.
        let shown = |r: &RestartFigure, now: u64| {
            let row = r.row(ms(now));
            assert_eq!(row.ints[0], 3);
            assert_eq!(
                row.ints[2..5],
                [row.ints[5] / 1000, row.ints[6] / 1000, row.ints[7] / 1000],
                "seconds are the milliseconds cut"
            );
            (
                row.texts[0].clone(),
                row.ints[1],
                row.ints[5],
                row.ints[6],
                row.ints[7],
            )
        };
        let included = dbinfo::RESTART_INCLUDED.0.to_owned();
        let synchronizing = dbinfo::RESTART_SYNCHRONIZING.0.to_owned();
        let completed = dbinfo::RESTART_COMPLETED.0.to_owned();
        // A step in progress counts up to now.
        assert_eq!(shown(&restart, 1_300), (included, 3, 300, 0, 300));
        restart.receiving = Some(ms(1_500));
        assert_eq!(shown(&restart, 2_000), (synchronizing, 13, 500, 500, 1_000));
        restart.serving = Some(ms(4_000));
        assert_eq!(
            shown(&restart, 9_000),
            (completed.clone(), 16, 500, 2_500, 3_000)
        );
        // A node that served at once: all of it is the include step.
        let at_once = RestartFigure {
            receiving: None,
            serving: Some(ms(1_200)),
            ..restart
        };
        assert_eq!(shown(&at_once, 9_000), (completed, 16, 200, 0, 200));
        // A failure stops the clock where it was.
        let failed = RestartFigure {
            serving: None,
            failed: Some(ms(2_500)),
            ..restart
        };
        let failed_status = dbinfo::RESTART_NODE_FAILED.0.to_owned();
        assert_eq!(
            shown(&failed, 9_000),
            (failed_status, 17, 500, 1_000, 1_500)
        );
    }

    #[test]
    fn a_publisher_never_waits_for_a_reader() {
        let list: PublishedRows<u32> = PublishedRows::new(3);
        assert!(list.try_publish(|rows| rows.extend([1, 2])));
        assert_eq!(list.snapshot(), [1, 2]);
        {
            let _reading = list.rows.lock().unwrap();
            assert!(!list.try_publish(|rows| rows.push(9)), "held: skipped");
        }
        assert_eq!(list.snapshot(), [1, 2], "a skipped copy changes nothing");
        assert!(list.try_publish(|rows| rows.push(3)));
        assert_eq!(list.snapshot(), [3], "each copy replaces the last");
    }

    #[test]
    #[should_panic(expected = "above the list's 3")]
    fn a_list_holds_its_bound_at_most() {
        let list: PublishedRows<u32> = PublishedRows::new(3);
        list.try_publish(|rows| rows.extend([1, 2, 3, 4]));
    }

    #[test]
    fn latencies_land_in_log2_buckets_and_publish_whole() {
        let mut histogram = LatencyHistogram::default();
        for us in [1, 3, 4, 1_000, 10_000_000] {
            histogram.record(Duration::from_micros(us));
        }
        let mut expected = [0u64; dbinfo::LATENCY_BUCKETS];
        expected[0] = 1; // 1 us
        expected[2] = 2; // 3 and 4 us: at most 4
        expected[10] = 1; // 1,000 us: at most 1,024
        expected[dbinfo::LATENCY_BUCKETS - 1] = 1; // 10 s: no bound
        assert_eq!(histogram.buckets, expected);
        assert_eq!((histogram.count, histogram.sum_us), (5, 10_001_008));
        let published = HistogramFigures::default();
        published.publish(&histogram);
        assert_eq!(published.get(), histogram);
    }
}
