//! Node restart, the LDM's side (docs/recovery.md, "Node restart"; NDB:
//! DBLQH's COPY_FRAGREQ and the starting node's copy).
//!
//! Why: a data node that rejoins a running cluster holds stale data (writes
//! committed while it was down are missing, rows deleted are still there).
//! It serves again only after it holds exactly what the live replica
//! holds, copied while traffic goes on.
//!
//! **The starting node** (`CopyIn`). While the master lists this node as
//! starting (not serving, not receiving), the instance empties every
//! fragment: an empty start plus a full copy is correct whatever the
//! disk held, rows deleted meanwhile included, and it is the same path as
//! an initial node restart. It then receives every write of its fragments
//! as the last backup of the chain; an update or delete of a row it does
//! not have yet is answered as done (the copy brings the row, with that
//! change, later: see the rule below). On `NodeCopyReq` it asks the
//! serving primary's instance for each fragment in turn (`CopyFragReq`,
//! one at a time per instance), and when all are copied runs a local
//! checkpoint that starts after the last copied row: only then is the
//! copy durable on its own disk (a crash before means the next restart
//! copies again from empty). Then it answers the master `NodeCopyConf`.
//!
//! **The source** (`CopyOut`, the serving primary's instance). It scans
//! the fragment and locks each row it copies (shared, for a copy
//! transaction of its own), reads it under the lock, and sends up to
//! [`COPY_BATCH_ROWS`] rows as upserts in one `LdmKeyReq` of that copy
//! transaction to the starting instance; after their `LdmKeyConf` it
//! commits them there (`LdmCommitReq` with GCI [`COPY_GCI`]: the receiver
//! uses a GCI of its own that its redo log accepts) and, after
//! `LdmCommitConf`, releases the batch's locks and goes on. So at most one
//! batch per copy is in flight: flow control.
//!
//! **The race of a copy and a write of the same row**, and why the result
//! is the live replica's. Every write that began after the starting node
//! was made receiving (the master waits until every TC confirms that the
//! older transactions ended) passes the live primary first, then the
//! starting node. Per row:
//! - the copy holds the row's lock from its read on the primary until the
//!   starting node committed the copied image, so a write of the row
//!   either committed on the primary before the copy's read (the copy
//!   carries it; the write's own passage on the starting node came before
//!   the copy's, or found no row and was ignored) or waits for the copy
//!   and then reaches a starting node that has the row;
//! - a row inserted by a transaction in flight is not seen by the scan
//!   (uncommitted) but its insert reaches the starting node in the chain;
//! - a row deleted before the copy's read is not copied, and the delete
//!   found the row on the starting node or nothing.
//!
//! The copy's upsert on the starting node takes the row lock there too,
//! so it waits for a commit of the same row still on its way.

use std::collections::VecDeque;
use std::time::Duration;

use kernel::Context;
use proto::error;
use proto::ops::{LockMode, OpBatchWriter, OpHeader, OpKind, NO_INDEX};
use proto::results::ResultReader;
use signal::{BlockNumber, BlockRef, SignalBody};
use storage::disk::Disk;
use storage::fragment::{
    Outcome, ReadMode, ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec,
};
use storage::locks::{Grant, OpId, TxId};

use super::op_id;
use super::LdmBlock;
use crate::live_map::NodeStates;

/// Rows of one copy batch (one `LdmKeyReq`).
pub const COPY_BATCH_ROWS: usize = 256;
/// Bytes of one copy batch; a batch ends at whichever limit comes first.
pub const COPY_BATCH_BYTES_MAX: usize = 256 * 1024;
/// Copies one source instance runs at once; beyond, `CopyFragReq` is
/// refused with a temporary error and asked again.
pub const COPY_OUT_MAX: usize = 16;
/// Time before a refused or failed fragment copy is asked again.
pub const COPY_RETRY_DELAY: Duration = Duration::from_millis(50);
/// The GCI of a copy commit: the receiving instance picks its own.
pub const COPY_GCI: u32 = 0;
/// Rows read from the fragment per scan call.
const COPY_SCAN_CHUNK_ROWS: usize = 256;
/// Copy transactions: the top 16 bits are this marker and the source
/// node; client transaction ids have an API node id (≤ 255) there.
const COPY_TX_MARKER: u64 = 0xFF00;

pub(super) const TIMER_COPY_RETRY: u32 = 6;

// Copy lock ids live in the scan op-id space, above every scan slot.
const _: () = assert!(COPY_OUT_MAX <= op_id::COPY_SLOTS_MAX);

/// Whether a GCI in `LdmCommitReq` asks for the receiver's own.
pub(super) fn is_copy_gci(gci: u32) -> bool {
    gci == COPY_GCI
}

/// Where the local checkpoint that makes the copy durable stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DurableLcp {
    /// Copy still running.
    NotYet,
    /// Copy done; a checkpoint must start (one running began earlier).
    Needed,
    /// The checkpoint started as round `n` (by `LdmStats::lcps_started`).
    Running(u64),
    Done,
}

/// The starting node's copy.
#[derive(Debug)]
struct CopyIn {
    /// Masters to answer `NodeCopyConf` (a new master asks again).
    masters: Vec<BlockRef>,
    queue: VecDeque<(u32, u32)>,
    /// The fragment being copied: (copy id, table, partition).
    current: Option<(u32, u32, u32)>,
    /// The node the current fragment is copied from: for a fully
    /// replicated table it may be in another node group.
    source: Option<signal::NodeId>,
    rows: u64,
    lcp: DurableLcp,
}

/// Where a source copy stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutPhase {
    /// Reading and locking rows (or waiting for a row lock).
    Filling,
    /// The batch is at the starting node: answers still to come.
    Sent { answers_left: u32 },
    /// Its commit is at the starting node.
    Committing,
}

/// A copy of one fragment to a starting node.
#[derive(Debug)]
struct CopyOut {
    generation: u32,
    copy_id: u32,
    to: BlockRef,
    table_id: u32,
    partition: u32,
    /// The copy transaction of the batch in progress.
    tx_id: u64,
    cursor: ScanCursor,
    chunk: ScanBatch,
    next_row: usize,
    fragment_done: bool,
    waiting: bool,
    phase: OutPhase,
    ops: Vec<u8>,
    op_count: u32,
    rows: u64,
}

/// The node-restart state of an instance.
#[derive(Debug, Default)]
pub(super) struct NodeRestart {
    /// This node is starting (the last state from the master says so).
    pub(super) starting: bool,
    emptied: bool,
    /// The instance was loaded with the cluster's schema (the dictionary
    /// synced with the master's), not only with what this node's disk
    /// held: a node that starts with an empty or stale dictionary learns
    /// its tables from it, and a copy started before would miss them.
    pub(super) holds_cluster_schema: bool,
    /// A `NodeStateConf` owed once the instance is open, holds the
    /// cluster's schema and is emptied: until then the master does not
    /// make this node receive writes, nor ask it to copy.
    owed_conf: Option<(BlockRef, u32)>,
    copy_in: Option<CopyIn>,
    next_copy_id: u32,
    outs: Vec<Option<CopyOut>>,
    next_tx: u64,
    retry_armed: bool,
}

impl NodeRestart {
    /// The fragments were emptied for a node restart and not every one has
    /// been copied yet: they hold part of the rows at most. Once the last
    /// fragment is copied they are exact (every later write reached them
    /// too), before the copy's checkpoint makes them durable and before the
    /// master's next states say this node serves.
    pub(super) fn holds_partial_copy(&self) -> bool {
        self.emptied
            && self
                .copy_in
                .as_ref()
                .is_none_or(|c| c.lcp == DurableLcp::NotYet)
    }

    /// Copies to other nodes in progress (for tests).
    pub(super) fn copies_out(&self) -> usize {
        self.outs.iter().flatten().count()
    }
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    // ---- the master's states ----

    pub(super) fn on_node_states(
        &mut self,
        master: BlockRef,
        states: NodeStates,
        ctx: &mut Context<'_>,
    ) {
        let state_id = states.version.1;
        if self.live.on_states(states).is_some() {
            let me = self.config.node;
            // The master waits only for its last state: an answer owed to
            // an older one is never sent.
            self.restart.owed_conf = None;
            self.restart.starting = !states.serving.contains(me);
            if self.restart.starting && !states.receiving.contains(me) && !self.restart.emptied {
                if self.instance.is_none() || !self.restart.holds_cluster_schema {
                    self.restart.owed_conf = Some((master, state_id));
                    return;
                }
                self.empty_fragments(ctx);
            }
        }
        ctx.send(master, SignalBody::NodeStateConf { state_id });
    }

    /// After the open, and after each load of the cluster's schema: an
    /// owed state answer waits for both, then for the fragments to be
    /// emptied.
    pub(super) fn after_open_restart(&mut self, ctx: &mut Context<'_>) {
        if self.instance.is_none() || !self.restart.holds_cluster_schema {
            return;
        }
        if let Some((master, state_id)) = self.restart.owed_conf.take() {
            if self.restart.starting && !self.restart.emptied {
                self.empty_fragments(ctx);
            }
            ctx.send(master, SignalBody::NodeStateConf { state_id });
        }
    }

    /// Drops every row of every fragment here: the copy brings them all.
    fn empty_fragments(&mut self, ctx: &mut Context<'_>) {
        assert!(
            self.txs.is_empty(),
            "node {} LDM instance {}: transactions on a starting node before it receives writes",
            self.config.node,
            self.config.instance
        );
        let instance = self.instance.as_mut().expect("open");
        let fragments: Vec<(u32, u32)> = instance.fragment_ids().collect();
        let mut rows = 0;
        let mut failure = None;
        // Emptying a fragment removes its checkpoint files (and syncs the
        // removal) here; the node does not serve yet.
        let _files = storage::disk::allow_sync("emptying fragments for a node restart");
        for &(t, p) in &fragments {
            rows += instance.fragment_ref(t, p).map_or(0, |f| f.row_count());
            let Some(table) = self.schema.tables.get(&t) else {
                continue;
            };
            let result = instance
                .drop_fragment(t, p)
                .and_then(|()| instance.add_fragment(table, p));
            if let Err(error) = result {
                failure = Some(format!(
                    "LDM instance {}: cannot empty table `{}` fragment {p} for the node restart: {error}",
                    self.config.instance, table.name
                ));
                break;
            }
        }
        if let Some(reason) = failure {
            self.fail(ctx, false, reason);
            return;
        }
        self.restart.emptied = true;
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: node restart: {} fragments emptied ({rows} stale rows dropped); \
             they are copied from the live replicas",
            self.config.instance,
            fragments.len()
        );
    }

    // ---- the starting node ----

    pub(super) fn on_node_copy_req(&mut self, master: BlockRef, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        if let Some(copy) = self.restart.copy_in.as_mut() {
            if !copy.masters.contains(&master) {
                copy.masters.push(master);
            }
            if copy.lcp == DurableLcp::Done {
                ctx.send(master, SignalBody::NodeCopyConf {});
            }
            return;
        }
        assert!(
            self.restart.starting && self.restart.emptied,
            "node {} LDM instance {}: asked to copy while serving or not emptied",
            self.config.node,
            self.config.instance
        );
        // The fragment list below is this instance's share of every table
        // of the cluster only once it holds the cluster's schema: the
        // emptying that let the master ask waited for it.
        assert!(
            self.restart.holds_cluster_schema,
            "node {} LDM instance {}: asked to copy before it holds the cluster's schema",
            self.config.node, self.config.instance
        );
        let instance = self.instance.as_ref().expect("an emptied instance is open");
        for (table_id, p) in self.fragments_of(&self.schema) {
            assert!(
                instance.fragment_ref(table_id, p).is_some(),
                "node {} LDM instance {}: table {table_id} fragment {p} missing at the copy",
                self.config.node,
                self.config.instance,
            );
        }
        let queue: VecDeque<(u32, u32)> = self
            .instance
            .as_ref()
            .expect("an emptied instance is open")
            .fragment_ids()
            .collect();
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: node restart: copying {} fragments",
            self.config.instance,
            queue.len()
        );
        self.restart.copy_in = Some(CopyIn {
            masters: vec![master],
            queue,
            current: None,
            source: None,
            rows: 0,
            lcp: DurableLcp::NotYet,
        });
        self.copy_next_fragment(ctx);
    }

    /// A fragment added while the copy runs (a table created meanwhile)
    /// is copied too.
    pub(super) fn copy_added_fragment(&mut self, key: (u32, u32)) {
        if let Some(copy) = self.restart.copy_in.as_mut() {
            if copy.lcp == DurableLcp::NotYet && !copy.queue.contains(&key) {
                copy.queue.push_back(key);
            }
        }
    }

    fn copy_next_fragment(&mut self, ctx: &mut Context<'_>) {
        let Some(copy) = self.restart.copy_in.as_mut() else {
            return;
        };
        if copy.current.is_some() {
            return;
        }
        let Some((table_id, partition)) = copy.queue.pop_front() else {
            tracing::info!(
                node = %self.config.node,
                "LDM instance {}: node restart: {} rows copied; a local checkpoint makes them durable",
                self.config.instance,
                copy.rows
            );
            copy.lcp = DurableLcp::Needed;
            self.check_copy_lcp(ctx);
            return;
        };
        // A fully replicated table's fragment of another group's partition
        // is copied from that partition's primary, whichever group it is in.
        let fully_replicated = self
            .schema
            .tables
            .get(&table_id)
            .is_some_and(|t| t.fully_replicated);
        let home = self.live.home_of(partition, fully_replicated);
        let source = home.primary();
        if source == self.config.node {
            // No serving replica is left to copy from: the node that was
            // serving failed and this starting node is all that remains of
            // the group (it may even have won a vote alone, the failure
            // notice not yet here). It cannot serve what it lacks: restart
            // and copy again, as when a copy source fails mid-copy.
            let reason = format!(
                "LDM instance {}: node restart: no serving replica of table {table_id} partition {partition} \
                 is left to copy from; restarting to copy again",
                self.config.instance
            );
            return self.fail(ctx, true, reason);
        }
        self.restart.next_copy_id += 1;
        let copy_id = self.restart.next_copy_id;
        copy.current = Some((copy_id, table_id, partition));
        copy.source = Some(source);
        ctx.send(
            BlockRef::new(source, BlockNumber::LOCAL_DATA_MANAGER, self.me.instance),
            SignalBody::CopyFragReq {
                copy_id,
                table_id,
                partition,
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_copy_frag_conf(
        &mut self,
        copy_id: u32,
        table_id: u32,
        partition: u32,
        rows: u64,
        code: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        let Some(copy) = self.restart.copy_in.as_mut() else {
            return;
        };
        if copy.current != Some((copy_id, table_id, partition)) {
            return;
        }
        copy.current = None;
        copy.source = None;
        if code == 0 {
            copy.rows += rows;
            tracing::debug!(
                node = %self.config.node,
                "LDM instance {}: table {table_id} fragment {partition}: {rows} rows copied",
                self.config.instance
            );
            self.copy_next_fragment(ctx);
            return;
        }
        if error::class(code) == error::ErrorClass::Temporary {
            // Asked again: the upserts already done are harmless.
            copy.queue.push_front((table_id, partition));
            if !self.restart.retry_armed {
                self.restart.retry_armed = true;
                ctx.set_timer(COPY_RETRY_DELAY, TIMER_COPY_RETRY);
            }
            return;
        }
        let reason = format!(
            "LDM instance {}: node restart: copy of table {table_id} fragment {partition} failed: \
             {code} {message}; this node cannot catch up",
            self.config.instance
        );
        self.fail(ctx, false, reason);
    }

    pub(super) fn on_copy_retry_timer(&mut self, ctx: &mut Context<'_>) {
        self.restart.retry_armed = false;
        self.copy_next_fragment(ctx);
    }

    /// Starts the local checkpoint the copy waits for, or notes that it
    /// completed; answers the masters then.
    pub(super) fn check_copy_lcp(&mut self, ctx: &mut Context<'_>) {
        let Some(lcp) = self.restart.copy_in.as_ref().map(|c| c.lcp) else {
            return;
        };
        let running = self.instance.as_ref().is_some_and(|i| i.lcp_running());
        match lcp {
            DurableLcp::Needed if !running => {
                self.start_lcp("node restart: make the copy durable", ctx);
                let started = self.stats.lcps_started;
                if let Some(copy) = self.restart.copy_in.as_mut() {
                    copy.lcp = DurableLcp::Running(started);
                }
            }
            DurableLcp::Running(_) if !running => {
                // Abandoned on an error: the next check starts another.
                self.restart.copy_in.as_mut().expect("checked").lcp = DurableLcp::Needed;
            }
            _ => {}
        }
    }

    /// A local checkpoint round completed.
    pub(super) fn copy_lcp_completed(&mut self, ctx: &mut Context<'_>) {
        let started = self.stats.lcps_started;
        let Some(copy) = self.restart.copy_in.as_mut() else {
            return;
        };
        match copy.lcp {
            DurableLcp::Running(n) if n == started => {
                copy.lcp = DurableLcp::Done;
                tracing::info!(
                    node = %self.config.node,
                    "LDM instance {}: node restart: the copy is durable",
                    self.config.instance
                );
                for &master in &copy.masters {
                    ctx.send(master, SignalBody::NodeCopyConf {});
                }
            }
            DurableLcp::Needed => self.check_copy_lcp(ctx),
            _ => {}
        }
    }

    /// The GCI a copy commit uses here: above every GCI this redo log
    /// part flushed or is flushing (a sync on an io thread), and not below
    /// one already committed.
    pub(super) fn copy_gci(&self) -> u32 {
        let instance = self
            .instance
            .as_ref()
            .expect("a copy commits on an open instance");
        let flushed = instance.flushed_gci().unwrap_or(0);
        (flushed + 1).max(instance.committed_gci().unwrap_or(0))
    }

    // ---- the source ----

    pub(super) fn on_copy_frag_req(
        &mut self,
        to: BlockRef,
        copy_id: u32,
        table_id: u32,
        partition: u32,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let refuse = |code: u32, message: String, ctx: &mut Context<'_>| {
            ctx.send(
                to,
                SignalBody::CopyFragConf {
                    copy_id,
                    table_id,
                    partition,
                    rows: 0,
                    code,
                    message,
                },
            );
        };
        let serving = self.live.is_serving(self.config.node);
        let open = self
            .instance
            .as_ref()
            .is_some_and(|i| i.fragment_ref(table_id, partition).is_some());
        if !serving || !open {
            let message = format!(
                "node {} LDM instance {}: table {table_id} fragment {partition} is not served here",
                self.config.node, self.config.instance
            );
            return refuse(error::NOT_STARTED, message, ctx);
        }
        let free = match self.restart.outs.iter().position(Option::is_none) {
            Some(free) => free,
            None if self.restart.outs.len() < COPY_OUT_MAX => {
                self.restart.outs.push(None);
                self.restart.outs.len() - 1
            }
            None => {
                let message = format!(
                    "node {} LDM instance {}: {COPY_OUT_MAX} fragment copies run already",
                    self.config.node, self.config.instance
                );
                return refuse(error::BUSY, message, ctx);
            }
        };
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: copying table {table_id} fragment {partition} to {to}",
            self.config.instance
        );
        self.restart.outs[free] = Some(CopyOut {
            generation: 0,
            copy_id,
            to,
            table_id,
            partition,
            tx_id: 0,
            cursor: ScanCursor::new(),
            chunk: ScanBatch::new(),
            next_row: 0,
            fragment_done: false,
            waiting: false,
            phase: OutPhase::Filling,
            ops: Vec::new(),
            op_count: 0,
            rows: 0,
        });
        self.start_copy_batch(free as u32);
        self.run_copy(free as u32, ctx);
    }

    fn start_copy_batch(&mut self, slot: u32) {
        self.restart.next_tx += 1;
        let tx_id = (COPY_TX_MARKER | u64::from(self.config.node.get())) << 48
            | (u64::from(self.config.instance) << 40)
            | (self.restart.next_tx & ((1 << 40) - 1));
        let out = self.restart.outs[slot as usize].as_mut().expect("in use");
        out.tx_id = tx_id;
        out.generation = op_id::next_generation(out.generation);
        out.phase = OutPhase::Filling;
        out.ops.clear();
        out.op_count = 0;
    }

    fn copy_op_id(&self, slot: u32) -> OpId {
        let out = self.restart.outs[slot as usize].as_ref().expect("in use");
        op_id::copy(out.generation, slot)
    }

    pub(super) fn resume_copy(&mut self, grant: Grant, ctx: &mut Context<'_>) {
        let slot = op_id::slot(grant.op);
        let live = self
            .restart
            .outs
            .get(slot as usize)
            .and_then(Option::as_ref)
            .is_some_and(|o| o.waiting && o.tx_id == grant.tx.0);
        if !live || self.copy_op_id(slot) != grant.op {
            return;
        }
        self.restart.outs[slot as usize]
            .as_mut()
            .expect("live")
            .waiting = false;
        self.run_copy(slot, ctx);
    }

    /// Fills the batch and sends it, or ends the copy when the fragment
    /// is done; stops while waiting for a row lock.
    fn run_copy(&mut self, slot: u32, ctx: &mut Context<'_>) {
        match self.fill_copy_batch(slot) {
            Ok(false) => {}
            Ok(true) => {
                let out = self.restart.outs[slot as usize].as_mut().expect("in use");
                if out.op_count == 0 {
                    self.end_copy(slot, 0, String::new(), ctx);
                    return;
                }
                if ctx.buggify_ppm(super::BUGGIFY_COPY_FAIL_PPM) {
                    // Buggify: the source fails mid-fragment (temporarily);
                    // the starting node asks for the fragment again.
                    let message = "buggify: copy source failed mid-fragment".to_owned();
                    self.end_copy(slot, error::OUT_OF_LDM_OPERATIONS, message, ctx);
                    return;
                }
                out.phase = OutPhase::Sent {
                    answers_left: out.op_count,
                };
                out.rows += u64::from(out.op_count);
                let ops = std::mem::take(&mut out.ops);
                ctx.send(
                    out.to,
                    SignalBody::LdmKeyReq {
                        tx_id: out.tx_id,
                        tc: self.me,
                        chain: signal::Chain::new(),
                        ops,
                    },
                );
            }
            Err((code, message)) => self.end_copy(slot, code, message, ctx),
        }
    }

    /// Ok(true): the batch is ready (full, or the fragment is done);
    /// Ok(false): waits for a row lock.
    fn fill_copy_batch(&mut self, slot: u32) -> Result<bool, (u32, String)> {
        let op_id = self.copy_op_id(slot);
        let LdmBlock {
            schema,
            instance,
            restart,
            scans,
            ..
        } = self;
        let out = restart.outs[slot as usize].as_mut().expect("in use");
        let Some(table) = schema.tables.get(&out.table_id) else {
            // Dropped meanwhile: nothing left to copy.
            return Ok(true);
        };
        let instance = instance.as_mut().expect("open");
        let Some((fragment, pool)) = instance.fragment(out.table_id, out.partition) else {
            return Ok(true);
        };
        let (row, keys) = scans.scratch();
        // A batch is written in one call: a lock wait that comes after
        // some rows sends those first (the waiting lock request goes with
        // the batch's transaction when its locks are released).
        assert_eq!(out.op_count, 0, "a copy batch is written in one go");
        out.ops.clear();
        let mut writer = OpBatchWriter::new(&mut out.ops);
        let mut count = 0usize;
        loop {
            while out.next_row < out.chunk.len() {
                if count >= COPY_BATCH_ROWS || writer.batch_bytes() >= COPY_BATCH_BYTES_MAX {
                    drop(writer);
                    out.op_count = count as u32;
                    return Ok(true);
                }
                let layout = fragment.layout();
                let (fixed, var) = out.chunk.image(out.next_row);
                keys.clear();
                keys.extend(
                    table
                        .primary_key
                        .iter()
                        .map(|&c| layout.decode_column(fixed, var, c).to_value()),
                );
                let mode = ReadMode::Shared {
                    tx: TxId(out.tx_id),
                    op: op_id,
                };
                match fragment.read(pool, keys, mode, row) {
                    Ok(Outcome::Done) => {}
                    Ok(Outcome::Waiting) => {
                        drop(writer);
                        out.op_count = count as u32;
                        if count > 0 {
                            return Ok(true);
                        }
                        out.waiting = true;
                        return Ok(false);
                    }
                    Ok(Outcome::NotFound) => {
                        // Deleted before the copy could lock it.
                        out.next_row += 1;
                        continue;
                    }
                    Err(e) => {
                        let code = super::requests::fragment_code(table, &e);
                        return Err((code, format!("copy of table `{}`: {e}", table.name)));
                    }
                }
                let layout = fragment.layout();
                writer.begin(&OpHeader {
                    op_index: count as u32,
                    table_id: table.id,
                    table_version: table.version,
                    index_id: NO_INDEX,
                    partition: out.partition,
                    kind: OpKind::Write,
                    lock: LockMode::Exclusive,
                    flags: 0,
                });
                for &c in &table.primary_key {
                    writer.key(layout.decode_column(row.fixed(), row.var(), c));
                }
                for c in 0..table.columns.len() {
                    if !table.primary_key.contains(&c) {
                        let column = u16::try_from(c).expect("columns fit u16");
                        writer.value(column, layout.decode_column(row.fixed(), row.var(), c));
                    }
                }
                if let Err(e) = writer.end() {
                    return Err((
                        error::BAD_OPERATION,
                        format!(
                            "copy of table `{}`: a row does not fit a batch: {e}",
                            table.name
                        ),
                    ));
                }
                count += 1;
                out.next_row += 1;
            }
            if out.fragment_done {
                drop(writer);
                out.op_count = count as u32;
                return Ok(true);
            }
            let spec = ScanSpec {
                range: ScanRange::Full,
                columns: Vec::new(),
            };
            match fragment.scan(
                pool,
                &spec,
                &mut out.cursor,
                COPY_SCAN_CHUNK_ROWS,
                &mut out.chunk,
            ) {
                Ok(progress) => {
                    out.fragment_done = progress == ScanProgress::Done;
                    out.next_row = 0;
                }
                Err(e) => {
                    return Err((
                        error::BAD_OPERATION,
                        format!("copy of table `{}`: {e}", table.name),
                    ));
                }
            }
        }
    }

    /// The copy of `tx_id`'s batch: its answers from the starting node.
    /// False when `tx_id` is not a copy of this instance.
    pub(super) fn on_copy_key_conf(
        &mut self,
        tx_id: u64,
        results: &[u8],
        ctx: &mut Context<'_>,
    ) -> bool {
        let Some(slot) = self.copy_slot_of(tx_id) else {
            return false;
        };
        let reader = match ResultReader::new(results) {
            Ok(reader) => reader,
            Err(e) => {
                self.abort_copy_batch(slot, ctx);
                self.end_copy(
                    slot,
                    error::BAD_OPERATION,
                    format!("bad copy answer: {e}"),
                    ctx,
                );
                return true;
            }
        };
        let failed = reader.iter().find(|r| r.code != 0).map(|r| r.code);
        let out = self.restart.outs[slot as usize].as_mut().expect("in use");
        let OutPhase::Sent { answers_left } = out.phase else {
            return true;
        };
        if let Some(code) = failed {
            let message = format!(
                "the starting node refused a copied row of table {} fragment {}",
                out.table_id, out.partition
            );
            self.abort_copy_batch(slot, ctx);
            self.end_copy(slot, code, message, ctx);
            return true;
        }
        let left = answers_left.saturating_sub(reader.len() as u32);
        if left > 0 {
            out.phase = OutPhase::Sent { answers_left: left };
            return true;
        }
        out.phase = OutPhase::Committing;
        ctx.send(
            out.to,
            SignalBody::LdmCommitReq {
                tx_id,
                epoch: signal::epoch::make(COPY_GCI, 0),
            },
        );
        true
    }

    /// The batch is committed on the starting node: release its locks here
    /// and go on.
    pub(super) fn on_copy_commit_conf(&mut self, tx_id: u64, ctx: &mut Context<'_>) -> bool {
        let Some(slot) = self.copy_slot_of(tx_id) else {
            return false;
        };
        if self.restart.outs[slot as usize]
            .as_ref()
            .expect("in use")
            .phase
            != OutPhase::Committing
        {
            return true;
        }
        self.release_copy_locks(slot);
        self.start_copy_batch(slot);
        self.run_copy(slot, ctx);
        self.run_grants(ctx);
        true
    }

    pub(super) fn copy_slot_of(&self, tx_id: u64) -> Option<u32> {
        self.restart
            .outs
            .iter()
            .position(|o| o.as_ref().is_some_and(|o| o.tx_id == tx_id))
            .map(|s| s as u32)
    }

    fn release_copy_locks(&mut self, slot: u32) {
        let out = self.restart.outs[slot as usize].as_ref().expect("in use");
        let (t, p, tx) = (out.table_id, out.partition, TxId(out.tx_id));
        if let Some(instance) = self.instance.as_mut() {
            // A fragment dropped meanwhile took its locks with it.
            let _ = instance.abort(t, p, tx, &mut self.grants);
        }
    }

    fn abort_copy_batch(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let out = self.restart.outs[slot as usize].as_ref().expect("in use");
        ctx.send(out.to, SignalBody::LdmAbortReq { tx_id: out.tx_id });
    }

    fn end_copy(&mut self, slot: u32, code: u32, message: String, ctx: &mut Context<'_>) {
        self.release_copy_locks(slot);
        let out = self.restart.outs[slot as usize].take().expect("in use");
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: copy of table {} fragment {} to {} ended: {} rows, code {code}",
            self.config.instance,
            out.table_id,
            out.partition,
            out.to,
            out.rows
        );
        ctx.send(
            out.to,
            SignalBody::CopyFragConf {
                copy_id: out.copy_id,
                table_id: out.table_id,
                partition: out.partition,
                rows: out.rows,
                code,
                message,
            },
        );
        self.run_grants(ctx);
    }

    /// Copies to a node that failed end; a copy from a node that failed
    /// cannot go on: this node restarts and copies again.
    pub(super) fn copies_on_failure(
        &mut self,
        failed: &signal::NodeBitmask,
        ctx: &mut Context<'_>,
    ) {
        for slot in 0..self.restart.outs.len() as u32 {
            let to_failed = self.restart.outs[slot as usize]
                .as_ref()
                .is_some_and(|o| failed.contains(o.to.node));
            if to_failed {
                self.release_copy_locks(slot);
                self.restart.outs[slot as usize] = None;
            }
        }
        self.run_grants(ctx);
        let copying = self
            .restart
            .copy_in
            .as_ref()
            .is_some_and(|c| c.lcp == DurableLcp::NotYet);
        let my_group = self.config.placement.group_of(self.config.node);
        let current_source = self.restart.copy_in.as_ref().and_then(|c| c.source);
        let source_failed = failed.iter().any(|n| {
            (my_group.is_some() && self.config.placement.group_of(n) == my_group)
                || current_source == Some(n)
        });
        if copying && self.restart.starting && source_failed {
            let reason = format!(
                "LDM instance {}: node restart: nodes {failed:?} failed while this node copied its data; \
                 restarting to copy again",
                self.config.instance
            );
            self.fail(ctx, true, reason);
        }
    }
}
