//! Scans of one partition (NDB: SCAN_FRAGREQ through DBLQH, DBTUP and
//! DBTUX): a full scan of the fragment or a range of an ordered index, the
//! pushed-down filter and the projection applied here, in batches of at
//! most the spec's `batch_rows` rows.
//!
//! A locking scan (lock mode shared or exclusive) takes a row lock on each
//! row it returns, by a locking read of the row's key for the transaction;
//! when that must wait, the scan waits for the grant, and then reads the
//! row again under the lock (and checks the filter on what it read). The
//! locks are the transaction's, released by its commit or abort. A scan
//! that must not wait (`LockWait::NoWait`, `FOR UPDATE NOWAIT`) fails at
//! the first row another transaction holds, with `LOCK_BUSY`; one that
//! skips (`LockWait::SkipLocked`) passes such a row by. Neither queues.
//!
//! Bounds: at most [`LDM_SCANS_MAX`] scans per instance, and one batch
//! examines at most [`SCAN_ROWS_EXAMINED_MAX`] rows, so a selective filter
//! cannot keep the thread busy for long (the batch then goes out with
//! fewer rows, not done).

use std::collections::BTreeMap;
use std::ops::Bound as StdBound;

use kernel::Context;
use proto::error;
use proto::ops::{LockMode, LockWait, NO_INDEX, NO_PARTITION};
use proto::scan::Bound;
use schema::Value;
use signal::{BlockRef, SignalBody};
use storage::disk::Disk;
use storage::fragment::{
    FragmentError, Outcome, ReadMode, RowBuf, ScanBatch, ScanCursor, ScanProgress, ScanRange,
    ScanSpec,
};
use storage::locks::{Grant, OpId, TxId};
use storage::ordered_index::Direction;

use super::aggregate::{Groups, NotAdded};
use super::encoded::{put_all_columns, put_column, Gathered, RowSink};
use super::op_id;
use super::requests::fragment_code;
use super::{LdmBlock, LDM_SCANS_MAX};

/// Most rows one scan batch examines (filter included) before it goes out.
pub const SCAN_ROWS_EXAMINED_MAX: usize = 16_384;
/// Rows asked from the fragment per call.
const FRAGMENT_SCAN_CHUNK_ROWS: usize = 256;
/// Rows a distinct scan passes by in a row, for holding the prefix it
/// returned last, before it seeks past that prefix: a few more compare
/// cheaper than a seek (which drops the rest of the chunk read), a long
/// run costs a seek rather than a read of every row.
const DISTINCT_SEEK_AFTER_ROWS: usize = 4;
/// Rows a distinct scan asks from the fragment after a seek: a chunk is
/// copied out whole and a seek drops what is left of it, so a chunk of
/// `FRAGMENT_SCAN_CHUNK_ROWS` per value of a few dozen rows was most of
/// the work (`COUNT(DISTINCT customer_id)` of 50 orders a customer). Each
/// chunk read to its end without a seek doubles the next, up to
/// `FRAGMENT_SCAN_CHUNK_ROWS`: values of a row or two cost what a plain
/// scan costs.
const DISTINCT_CHUNK_ROWS_MIN: usize = 2 * DISTINCT_SEEK_AFTER_ROWS;
const _: () = assert!(LDM_SCANS_MAX <= op_id::SCAN_SLOTS_MAX);

/// A scan's identity: transaction, scan id and partition.
type ScanKey = (u64, u32, u32);

/// One open scan.
#[derive(Debug, Default)]
struct ScanRecord {
    in_use: bool,
    generation: u32,
    key: ScanKey,
    tc: Option<BlockRef>,
    spec: Option<proto::scan::ScanSpec>,
    /// The range scanned now: the `range_at`-th, in visiting order, of
    /// the spec's ranges (a multi-range scan visits each in turn).
    range: Option<ScanSpec>,
    range_at: usize,
    cursor: ScanCursor,
    /// Rows read from the fragment: the first `chunk_rows` are this
    /// scan's (the buffer is reused from scan to scan); those from
    /// `next_row` on are not yet looked at.
    batch: ScanBatch,
    chunk_rows: usize,
    next_row: usize,
    /// What the fragment said of its last chunk of committed rows.
    fragment_done: bool,
    /// A locking scan then visits its transaction's own uncommitted
    /// inserts (`Fragment::scan_own_inserts`): done with them, and the
    /// last one visited.
    own_done: bool,
    own_after: Option<storage::RowId>,
    /// Waits for the lock of row `next_row`.
    waiting: bool,
    rows: Gathered,
    examined: usize,
    /// A distinct scan: its index's key encoder (made at its first
    /// batch), the index prefix of the last row returned as that index
    /// orders it (None before the first), and how many rows in a row
    /// were passed by for holding it since.
    distinct_encoder: Option<schema::KeyEncoder>,
    distinct_last: Option<Vec<u8>>,
    distinct_run: usize,
    /// The rows of its next chunk (`DISTINCT_CHUNK_ROWS_MIN`).
    distinct_chunk: usize,
    /// A counting or aggregating scan: the rows that passed since its
    /// last batch, per group, with their aggregates.
    groups: Groups,
}

/// An open scan as ndbinfo shows it (`Scans::open_scans`).
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenScan {
    pub tx_id: u64,
    pub table_id: u32,
    pub partition: u32,
    pub lock: LockMode,
    /// Waits for a row lock another transaction holds.
    pub waiting: bool,
    pub tc: BlockRef,
}

/// The scans of an instance.
#[derive(Debug, Default)]
pub(super) struct Scans {
    records: Vec<ScanRecord>,
    free: Vec<u32>,
    by_key: BTreeMap<ScanKey, u32>,
    /// Reused: the locked image of a row and its key.
    row: RowBuf,
    keys: Vec<Value>,
    /// Reused: a distinct scan's row's index prefix, encoded.
    prefix: Vec<u8>,
}

impl Scans {
    pub(super) fn new() -> Scans {
        Scans::default()
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Reused buffers for a locked row image and its key (the copy of a
    /// node restart uses them too: one LDM thread, one at a time).
    pub(super) fn scratch(&mut self) -> (&mut RowBuf, &mut Vec<Value>) {
        (&mut self.row, &mut self.keys)
    }

    /// Panics when the scan records disagree with their key map and free
    /// list: each key names a record in use under that key, every record
    /// in use has its key, no free slot is in use. O(scan records).
    pub(super) fn check_invariants(&self, ldm: BlockRef) {
        for (key, &slot) in &self.by_key {
            let record = &self.records[slot as usize];
            assert!(
                record.in_use && record.key == *key,
                "{ldm}: scan {key:?} maps to slot {slot}, which is not that scan"
            );
        }
        let in_use = self.records.iter().filter(|r| r.in_use).count();
        assert!(
            in_use == self.by_key.len() && in_use + self.free.len() == self.records.len(),
            "{ldm}: {in_use} scan records in use, {} scans by key, {} free, of {}",
            self.by_key.len(),
            self.free.len(),
            self.records.len()
        );
        for &slot in &self.free {
            assert!(
                !self.records[slot as usize].in_use,
                "{ldm}: scan slot {slot} is free and in use"
            );
        }
    }

    pub(super) fn has_tx(&self, tx_id: u64) -> bool {
        // With no scan open (every key transaction's end asks) not even a
        // tree walk.
        !self.by_key.is_empty() && self.of_tx(tx_id).next().is_some()
    }

    /// The open scans for `cluster_operations`, in key order (transaction,
    /// scan, partition): O(scans open), at most `LDM_SCANS_MAX`.
    pub(super) fn open_scans(&self) -> impl Iterator<Item = OpenScan> + '_ {
        self.by_key.values().filter_map(|&slot| {
            let record = &self.records[slot as usize];
            let (tx_id, _, partition) = record.key;
            let spec = record.spec.as_ref()?;
            Some(OpenScan {
                tx_id,
                table_id: spec.table_id,
                partition,
                lock: spec.lock,
                waiting: record.waiting,
                tc: record.tc?,
            })
        })
    }

    /// The scans of transaction `tx_id`.
    fn of_tx(&self, tx_id: u64) -> impl Iterator<Item = u32> + '_ {
        self.by_key
            .range((tx_id, 0, 0)..=(tx_id, u32::MAX, u32::MAX))
            .map(|(_, &slot)| slot)
    }

    fn open(
        &mut self,
        key: ScanKey,
        tc: BlockRef,
        spec: proto::scan::ScanSpec,
        range: ScanSpec,
    ) -> u32 {
        assert!(
            self.by_key.len() < LDM_SCANS_MAX,
            "admission checks room first"
        );
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.records.push(ScanRecord::default());
                (self.records.len() - 1) as u32
            }
        };
        let record = &mut self.records[slot as usize];
        assert!(!record.in_use, "scan slot {slot} handed out twice");
        record.in_use = true;
        record.generation = op_id::next_generation(record.generation);
        record.key = key;
        record.tc = Some(tc);
        record.spec = Some(spec);
        record.range = Some(range);
        record.range_at = 0;
        record.cursor.reset();
        record.chunk_rows = 0;
        record.next_row = 0;
        record.examined = 0;
        record.fragment_done = false;
        record.own_done = false;
        record.own_after = None;
        record.waiting = false;
        record.rows.clear();
        record.distinct_encoder = None;
        record.distinct_last = None;
        record.distinct_run = 0;
        record.distinct_chunk = DISTINCT_CHUNK_ROWS_MIN;
        record.groups.clear();
        self.by_key.insert(key, slot);
        slot
    }

    fn close(&mut self, slot: u32) {
        let record = &mut self.records[slot as usize];
        assert!(record.in_use, "scan slot {slot} closed twice");
        record.in_use = false;
        record.spec = None;
        record.range = None;
        let removed = self.by_key.remove(&record.key);
        assert_eq!(removed, Some(slot));
        self.free.push(slot);
    }

    /// Closes every scan of a transaction that ended.
    pub(super) fn close_tx(&mut self, tx_id: u64) {
        if self.by_key.is_empty() {
            return;
        }
        let slots: Vec<u32> = self.of_tx(tx_id).collect();
        for slot in slots {
            self.close(slot);
        }
    }

    /// Closes every scan of one of `tables` (sorted); returns what the
    /// scans were, with their TCs, to answer them.
    pub(super) fn close_tables(&mut self, tables: &[u32]) -> Vec<(ScanKey, BlockRef)> {
        let slots: Vec<u32> = self
            .by_key
            .values()
            .copied()
            .filter(|&slot| {
                let spec = self.records[slot as usize].spec.as_ref();
                spec.is_some_and(|s| tables.binary_search(&s.table_id).is_ok())
            })
            .collect();
        let mut closed = Vec::with_capacity(slots.len());
        for slot in slots {
            let record = &self.records[slot as usize];
            closed.push((record.key, record.tc.expect("an open scan has its TC")));
            self.close(slot);
        }
        closed
    }

    /// Closes every scan whose TC is on one of `nodes` (failed: nobody
    /// will ask for its next batch); how many.
    pub(super) fn close_tcs_on(&mut self, nodes: &signal::NodeBitmask) -> usize {
        let slots: Vec<u32> = self
            .by_key
            .values()
            .copied()
            .filter(|&slot| {
                self.records[slot as usize]
                    .tc
                    .is_some_and(|tc| nodes.contains(tc.node))
            })
            .collect();
        for &slot in &slots {
            self.close(slot);
        }
        slots.len()
    }

    fn op_id(&self, slot: u32) -> OpId {
        op_id::scan(self.records[slot as usize].generation, slot)
    }
}

/// How far a batch got.
enum BatchEnd {
    /// The batch is full or examined enough: send it, more may follow.
    Full,
    /// No more rows: send it with `done`.
    Done,
    /// Waits for a row lock.
    Wait,
    /// The scan cannot go on (a lock could not be queued): refuse it.
    Failed { code: u32, message: String },
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    pub(super) fn on_scan_req(
        &mut self,
        tc: BlockRef,
        tx_id: u64,
        scan_id: u32,
        spec: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let spec = match proto::scan::ScanSpec::decode(&spec) {
            Ok(spec) => spec,
            Err(e) => {
                let message = format!("LDM instance {}: {e}", self.config.instance);
                let body = SignalBody::LdmScanRef {
                    tx_id,
                    scan_id,
                    partition: NO_PARTITION,
                    code: e.code(),
                    message,
                };
                ctx.send(tc, body);
                return;
            }
        };
        let partition = spec.partition;
        let refuse = |ctx: &mut Context<'_>, code: u32, message: String| {
            ctx.send(
                tc,
                SignalBody::LdmScanRef {
                    tx_id,
                    scan_id,
                    partition,
                    code,
                    message,
                },
            );
        };
        if self.instance.is_none() {
            let message = format!(
                "node {} is starting: LDM instance {} is not open",
                self.config.node, self.config.instance
            );
            return refuse(ctx, error::NOT_STARTED, message);
        }
        let Some(table) = self.schema.tables.get(&spec.table_id) else {
            return refuse(
                ctx,
                error::NO_SUCH_TABLE,
                format!("no table with id {}", spec.table_id),
            );
        };
        if self.altering(spec.table_id) {
            let message = format!(
                "table `{}` is being altered on LDM instance {} of node {}; retry",
                table.name, self.config.instance, self.config.node
            );
            return refuse(ctx, error::BUSY, message);
        }
        if let Err(e) = spec.check(table) {
            return refuse(ctx, e.code(), e.to_string());
        }
        if partition == NO_PARTITION || !self.owns(partition, table.fully_replicated) {
            let message = format!(
                "table `{}` partition {partition} is not held by LDM instance {} of node {}",
                table.name, self.config.instance, self.config.node
            );
            return refuse(ctx, error::BAD_OPERATION, message);
        }
        if spec.stats {
            return self.stats_scan(tc, tx_id, scan_id, partition, spec.table_id, ctx);
        }
        let key = (tx_id, scan_id, partition);
        if self.scans.by_key.contains_key(&key) {
            return refuse(
                ctx,
                error::BAD_OPERATION,
                format!("scan {scan_id} of partition {partition} is open already"),
            );
        }
        if self.scans.len() >= LDM_SCANS_MAX {
            let message = format!(
                "LDM instance {} has {LDM_SCANS_MAX} scans open",
                self.config.instance
            );
            return refuse(ctx, error::TOO_MANY_SCANS, message);
        }
        if spec.lock != LockMode::Committed
            && super::tx_record(&mut self.txs, &mut self.free_txs, tx_id, tc).is_none()
        {
            let message = format!(
                "LDM instance {}: too many transactions",
                self.config.instance
            );
            return refuse(ctx, error::OUT_OF_LDM_OPERATIONS, message);
        }
        if spec.lock != LockMode::Committed {
            // The locks it takes are released by the transaction's end.
            self.touch(tx_id, (spec.table_id, partition));
        }
        let range = storage_spec(&spec, 0);
        self.stats.scans += 1;
        let slot = self.scans.open(key, tc, spec, range);
        self.run_scan(slot, ctx);
    }

    /// A statistics scan of one partition (NDB's pseudo-columns
    /// `ROW_COUNT` and `FRAGMENT_MEMORY`): one row of the fragment's
    /// committed rows, its memory and the partition, at once and done. No
    /// scan record: nothing is held between requests.
    fn stats_scan(
        &mut self,
        tc: BlockRef,
        tx_id: u64,
        scan_id: u32,
        partition: u32,
        table_id: u32,
        ctx: &mut Context<'_>,
    ) {
        let (rows, memory) = self
            .instance
            .as_ref()
            .and_then(|i| i.fragment_ref(table_id, partition))
            .map_or((0, 0), |f| (f.row_count(), f.memory_bytes()));
        let mut out = Vec::new();
        let mut batch = proto::scan::RowBatchWriter::new(&mut out);
        batch.row();
        for v in [rows, memory, u64::from(partition)] {
            batch.value(schema::ValueRef::UInt(v));
        }
        let sent = batch.end_row();
        drop(batch);
        if let Err(e) = sent {
            let body = SignalBody::LdmScanRef {
                tx_id,
                scan_id,
                partition,
                code: e.code(),
                message: e.to_string(),
            };
            return ctx.send(tc, body);
        }
        ctx.send(
            tc,
            SignalBody::LdmScanConf {
                tx_id,
                scan_id,
                partition,
                rows: out,
                done: true,
            },
        );
    }

    pub(super) fn on_scan_next(
        &mut self,
        tc: BlockRef,
        tx_id: u64,
        scan_id: u32,
        partition: u32,
        close: bool,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let Some(&slot) = self.scans.by_key.get(&(tx_id, scan_id, partition)) else {
            if !close {
                let message = format!(
                    "LDM instance {}: no scan {scan_id} of partition {partition} is open",
                    self.config.instance
                );
                ctx.send(
                    tc,
                    SignalBody::LdmScanRef {
                        tx_id,
                        scan_id,
                        partition,
                        code: error::UNKNOWN_SCAN,
                        message,
                    },
                );
            }
            return;
        };
        if close {
            self.scans.close(slot);
            self.release_tx_if_idle(tx_id);
            ctx.send(
                tc,
                SignalBody::LdmScanConf {
                    tx_id,
                    scan_id,
                    partition,
                    rows: empty_rows(),
                    done: true,
                },
            );
            return;
        }
        if self.scans.records[slot as usize].waiting {
            // The batch in progress answers when its lock comes.
            return;
        }
        self.run_scan(slot, ctx);
    }

    pub(super) fn resume_scan(&mut self, grant: Grant, ctx: &mut Context<'_>) {
        let slot = op_id::slot(grant.op);
        let live = self
            .scans
            .records
            .get(slot as usize)
            .is_some_and(|r| r.in_use && r.waiting && r.key.0 == grant.tx.0);
        if !live || self.scans.op_id(slot) != grant.op {
            return;
        }
        self.scans.records[slot as usize].waiting = false;
        self.run_scan(slot, ctx);
    }

    /// Fills the scan's batch from where it stands and sends it, unless it
    /// waits for a lock.
    fn run_scan(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let end = self.fill_batch(slot);
        let record = &mut self.scans.records[slot as usize];
        let (tx_id, scan_id, partition) = record.key;
        let tc = record.tc.expect("an open scan has its TC");
        let done = match end {
            BatchEnd::Wait => return,
            BatchEnd::Failed { code, message } => {
                let body = SignalBody::LdmScanRef {
                    tx_id,
                    scan_id,
                    partition,
                    code,
                    message,
                };
                ctx.send(tc, body);
                self.scans.close(slot);
                self.release_tx_if_idle(tx_id);
                return;
            }
            BatchEnd::Full => false,
            BatchEnd::Done => true,
        };
        if let (Some(spec), Some(table)) = (
            record.spec.as_ref().filter(|s| s.count),
            self.schema
                .tables
                .get(&record.spec.as_ref().map_or(0, |s| s.table_id)),
        ) {
            // A counting or aggregating scan's batch: a row per group of
            // the rows that passed (the one of no group columns always).
            debug_assert!(record.rows.is_empty(), "a counting scan gathers no rows");
            record
                .groups
                .write(table, &spec.aggregates, &spec.group_by, &mut record.rows);
        }
        let mut next = 0;
        loop {
            // Sized at once: a row's frame is 12 bytes, and a guess of 4
            // had every batch of 100 rows grow (a copy of it) at its end.
            let mut rows = Vec::with_capacity(proto::scan::row_batch_bytes(
                record.rows.len() - next,
                record.rows.value_bytes(),
            ));
            let sized = rows.capacity();
            record.rows.write_rows(&mut next, &mut rows);
            debug_assert_eq!(rows.capacity(), sized, "a scan batch outgrew its size");
            let last = next == record.rows.len();
            ctx.send(
                tc,
                SignalBody::LdmScanConf {
                    tx_id,
                    scan_id,
                    partition,
                    rows,
                    done: done && last,
                },
            );
            if last {
                break;
            }
        }
        record.rows.clear();
        record.examined = 0;
        if done {
            self.scans.close(slot);
            self.release_tx_if_idle(tx_id);
        }
    }

    /// Adds matching rows to the scan's batch until it is full, the scan
    /// is done, it examined enough rows, or it must wait for a lock.
    fn fill_batch(&mut self, slot: u32) -> BatchEnd {
        let op_id = self.scans.op_id(slot);
        let LdmBlock {
            schema,
            instance,
            scans,
            ..
        } = self;
        let Scans {
            records,
            row,
            keys,
            prefix,
            ..
        } = scans;
        let record = &mut records[slot as usize];
        let spec = record.spec.as_ref().expect("an open scan has its spec");
        let (tx_id, _, partition) = record.key;
        let Some(table) = schema.tables.get(&spec.table_id) else {
            // Dropped while the scan ran.
            return BatchEnd::Done;
        };
        let instance = instance.as_mut().expect("open");
        let Some((fragment, pool)) = instance.fragment(spec.table_id, partition) else {
            return BatchEnd::Done;
        };
        let locking = match spec.lock {
            LockMode::Committed => None,
            LockMode::Shared => Some(ReadMode::Shared {
                tx: TxId(tx_id),
                op: op_id,
            }),
            LockMode::Exclusive => Some(ReadMode::Exclusive {
                tx: TxId(tx_id),
                op: op_id,
            }),
        };
        let batch_rows = spec.batch_rows as usize;
        // A distinct scan's prefix: the index's first columns (checked
        // against the table when the scan opened; no locks), compared as
        // the index orders them ('a' and 'A' alike under a case-blind
        // collation).
        let distinct: &[usize] = match spec.distinct_prefix {
            0 => &[],
            n => match table.indexes.iter().find(|i| i.id == spec.index_id) {
                Some(index) => {
                    if record.distinct_encoder.is_none() {
                        record.distinct_encoder =
                            Some(schema::KeyEncoder::ordered_index(table, index));
                    }
                    &index.columns[..usize::from(n).min(index.columns.len())]
                }
                None => &[],
            },
        };
        debug_assert!(
            distinct.is_empty() || locking.is_none(),
            "a distinct scan reads without locks"
        );
        loop {
            while record.next_row < record.chunk_rows {
                if record.rows.len() >= batch_rows || record.examined >= SCAN_ROWS_EXAMINED_MAX {
                    return BatchEnd::Full;
                }
                let layout = fragment.layout();
                let (fixed, var) = record.batch.image(record.next_row);
                if let (false, Some(encoder)) = (distinct.is_empty(), &record.distinct_encoder) {
                    prefix.clear();
                    encoder.encode_prefix_from_row(layout, fixed, var, distinct.len(), prefix);
                    if record.distinct_last.as_deref() == Some(prefix.as_slice()) {
                        // Its prefix came: passed by, filter or not.
                        record.next_row += 1;
                        record.examined += 1;
                        record.distinct_run += 1;
                        if record.distinct_run >= DISTINCT_SEEK_AFTER_ROWS {
                            // A long run: seek past its prefix, the rest
                            // of this chunk dropped.
                            let past: Vec<Value> = distinct
                                .iter()
                                .map(|&c| layout.decode_column(fixed, var, c).to_value())
                                .collect();
                            let range = record.range.as_mut().expect("an open scan has its range");
                            seek_past(range, past);
                            record.cursor.reset();
                            record.fragment_done = false;
                            record.chunk_rows = record.next_row;
                            record.distinct_run = 0;
                            record.distinct_chunk = DISTINCT_CHUNK_ROWS_MIN;
                        }
                        continue;
                    }
                }
                let passes = |fixed: &[u8], var: &[u8]| {
                    spec.filter.as_ref().is_none_or(|f| {
                        f.eval(table, |c| layout.decode_column(fixed, var, usize::from(c)))
                    })
                };
                // The committed image decides, except for a row this
                // transaction changed: a locking read gives its own image,
                // which the filter checks below.
                let own = locking.is_some()
                    && fragment.changed_by(record.batch.row_id(record.next_row), TxId(tx_id));
                if !own && !passes(fixed, var) {
                    record.next_row += 1;
                    record.examined += 1;
                    continue;
                }
                let (fixed, var) = match locking {
                    None => (fixed, var),
                    Some(mode) => {
                        keys.clear();
                        keys.extend(
                            table
                                .primary_key
                                .iter()
                                .map(|&c| layout.decode_column(fixed, var, c).to_value()),
                        );
                        let read = match spec.lock_wait {
                            LockWait::Wait => fragment.read(pool, keys, mode, row),
                            LockWait::NoWait | LockWait::SkipLocked => {
                                fragment.read_no_wait(pool, keys, mode, row)
                            }
                        };
                        match read {
                            Ok(Outcome::Done) => {}
                            Ok(Outcome::Waiting) => {
                                record.waiting = true;
                                return BatchEnd::Wait;
                            }
                            Err(FragmentError::LockBusy { .. })
                                if spec.lock_wait == LockWait::SkipLocked =>
                            {
                                // Another transaction holds it: passed by.
                                record.next_row += 1;
                                record.examined += 1;
                                continue;
                            }
                            Ok(Outcome::NotFound) => {
                                // Deleted since the chunk was read.
                                record.next_row += 1;
                                continue;
                            }
                            Err(e) => {
                                // Too many lock waiters, or a held row and
                                // NOWAIT: the scan stops rather than skip a
                                // row it should lock.
                                let code = fragment_code(table, &e);
                                let message = format!("scan of table `{}`: {e}", table.name);
                                return BatchEnd::Failed { code, message };
                            }
                        }
                        let layout = fragment.layout();
                        let (fixed, var) = (row.fixed(), row.var());
                        if !spec.filter.as_ref().is_none_or(|f| {
                            f.eval(table, |c| layout.decode_column(fixed, var, usize::from(c)))
                        }) {
                            record.next_row += 1;
                            continue;
                        }
                        (fixed, var)
                    }
                };
                if spec.count {
                    // Counted and aggregated, not returned (committed
                    // reads only).
                    let added = record.groups.add(
                        table,
                        &spec.aggregates,
                        &spec.group_by,
                        fragment.layout(),
                        fixed,
                        var,
                        batch_rows,
                    );
                    match added {
                        Ok(()) => {}
                        // A group more than the batch holds: it goes
                        // first, and the row is looked at again after.
                        Err(NotAdded::Full) => return BatchEnd::Full,
                        Err(NotAdded::Overflow { column }) => {
                            let message = format!(
                                "scan of table `{}`: the sum of column `{}` overflows",
                                table.name, table.columns[column].name
                            );
                            return BatchEnd::Failed {
                                code: error::BAD_VALUE,
                                message,
                            };
                        }
                    }
                    record.next_row += 1;
                    record.examined += 1;
                    continue;
                }
                let layout = fragment.layout();
                record.rows.begin_row();
                if spec.projection.is_empty() {
                    let columns = table.columns.len();
                    record.rows.values(columns, |out| {
                        put_all_columns(out, layout, fixed, var, columns)
                    });
                } else {
                    record.rows.values(spec.projection.len(), |out| {
                        for &c in &spec.projection {
                            put_column(out, layout, fixed, var, usize::from(c));
                        }
                    });
                }
                if spec.key_info {
                    for &c in &table.primary_key {
                        record.rows.key(layout.decode_column(fixed, var, c));
                    }
                }
                record.rows.end_row(0);
                if !distinct.is_empty() {
                    // The prefix of the row returned (the filter passed
                    // it): its run is passed by from here.
                    let last = record.distinct_last.get_or_insert_with(Vec::new);
                    last.clear();
                    last.extend_from_slice(prefix);
                    record.distinct_run = 0;
                }
                record.next_row += 1;
                record.examined += 1;
            }
            if record.fragment_done && (locking.is_none() || record.own_done) {
                if record.range_at + 1 >= ranges(spec) {
                    return BatchEnd::Done;
                }
                // A multi-range scan: the next range, its committed rows
                // and then (locking) its transaction's own inserts.
                record.range_at += 1;
                record.range = Some(storage_spec(spec, record.range_at));
                record.cursor.reset();
                record.fragment_done = false;
                record.own_done = false;
                record.own_after = None;
                continue;
            }
            if record.examined >= SCAN_ROWS_EXAMINED_MAX {
                return BatchEnd::Full;
            }
            let range = record.range.as_ref().expect("an open scan has its range");
            let chunk_rows = match distinct.is_empty() {
                true => FRAGMENT_SCAN_CHUNK_ROWS,
                false => {
                    let rows = record.distinct_chunk;
                    record.distinct_chunk = (rows * 2).min(FRAGMENT_SCAN_CHUNK_ROWS);
                    rows
                }
            };
            // After the committed rows, a locking scan visits what its
            // transaction inserted (or moved into the range), which the
            // committed rows lack: a transaction sees what it wrote (a
            // committed read has no transaction of its own to see).
            let fetched = if record.fragment_done {
                fragment
                    .scan_own_inserts(
                        pool,
                        TxId(tx_id),
                        range,
                        &mut record.own_after,
                        chunk_rows,
                        &mut record.batch,
                    )
                    .map(|progress| record.own_done = progress == ScanProgress::Done)
            } else {
                fragment
                    .scan(
                        pool,
                        range,
                        &mut record.cursor,
                        chunk_rows,
                        &mut record.batch,
                    )
                    .map(|progress| record.fragment_done = progress == ScanProgress::Done)
            };
            match fetched {
                Ok(()) => {
                    record.chunk_rows = record.batch.len();
                    record.next_row = 0;
                }
                Err(e) => {
                    // Checked against the table at the start: only a
                    // fragment of another definition gets here.
                    tracing::warn!("scan of table `{}` partition {partition}: {e}", table.name);
                    return BatchEnd::Done;
                }
            }
        }
    }
}

/// Narrows an ordered range to the keys past prefix `past` in its
/// direction: a distinct scan's seek over the rest of a prefix's run.
fn seek_past(range: &mut ScanSpec, past: Vec<Value>) {
    let ScanRange::Ordered {
        lower,
        upper,
        direction,
        ..
    } = &mut range.range
    else {
        unreachable!("a distinct scan reads an ordered index")
    };
    // Keys whose first columns are past `past`: beyond the original bound
    // too, since the scan reached `past` from it.
    match direction {
        Direction::Ascending => *lower = StdBound::Excluded(past),
        Direction::Descending => *upper = StdBound::Excluded(past),
    }
}

/// The ranges a scan spec visits (1 for a full scan).
fn ranges(spec: &proto::scan::ScanSpec) -> usize {
    1 + spec.more_ranges.len()
}

/// The storage scan of the `at`-th range, in visiting order, of a proto
/// scan spec (checked against its table): the spec's ranges in their
/// order, or reversed when descending.
fn storage_spec(spec: &proto::scan::ScanSpec, at: usize) -> ScanSpec {
    let count = ranges(spec);
    debug_assert!(at < count, "range {at} of a scan of {count}");
    let listed = if spec.descending { count - 1 - at } else { at };
    let (lower, upper) = match listed.checked_sub(1) {
        None => (&spec.lower, &spec.upper),
        Some(more) => (&spec.more_ranges[more].lower, &spec.more_ranges[more].upper),
    };
    let bound = |b: &Option<Bound>| match b {
        None => StdBound::Unbounded,
        Some(b) if b.inclusive => StdBound::Included(b.values.clone()),
        Some(b) => StdBound::Excluded(b.values.clone()),
    };
    let range = if spec.index_id == NO_INDEX {
        ScanRange::Full
    } else {
        ScanRange::Ordered {
            index_id: spec.index_id,
            lower: bound(lower),
            upper: bound(upper),
            direction: if spec.descending {
                Direction::Descending
            } else {
                Direction::Ascending
            },
        }
    };
    ScanSpec {
        range,
        columns: spec.projection.iter().map(|&c| usize::from(c)).collect(),
    }
}

fn empty_rows() -> Vec<u8> {
    let mut out = Vec::new();
    proto::scan::RowBatchWriter::new(&mut out);
    out
}
