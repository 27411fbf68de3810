//! Scans: [`Transaction::scan`] returns an iterator of rows that fetches
//! batches from the TC as it goes (`TcScanReq`, then `TcScanNextReq` for
//! each further batch; the last `TcScanConf` says `done`). A locking scan
//! returns each row with its primary key, so the same transaction can
//! update or delete it (the lock is already held: takeover). Dropping the
//! iterator early closes the scan on the TC.
//!
//! A scan that returns BLOB/TEXT columns hands out whole values: a row
//! whose value is longer than its inline head gets its parts read by key
//! in the same transaction before the row is returned (`crate::blob`).
//! So that head and parts are of one version, a committed-read scan of
//! such columns is taken with a shared lock (as NDB does); the row locks
//! are held until the transaction ends.

use std::collections::VecDeque;
use std::sync::Arc;

use proto::scan::SCAN_BATCH_ROWS_MAX;
use proto::{Bound, Filter, RowBatchReader, ScanSpec, NO_INDEX, NO_PARTITION};
use schema::{IndexKind, Value};
use signal::{tc_flags, Signal, SignalBody};

use crate::blob::{self, ReadJob};
use crate::error::{Error, Result};
use crate::schema::Table;
use crate::session::tc_ref;
use crate::stats;
use crate::transaction::{LockMode, LockWait, RawRow, ReplyBytes, Row, Transaction};

/// Rows per batch from each partition unless told otherwise.
pub const SCAN_BATCH_ROWS_DEFAULT: u32 = 256;

/// What to scan and how. `Default` is a committed-read full-table scan of
/// every column.
#[derive(Clone, Debug, Default)]
pub struct ScanOptions<'a> {
    /// An ordered index to scan in key order; None: the whole table.
    pub index: Option<&'a str>,
    /// Lower bound: values of a prefix of the index columns, and whether it is inclusive.
    pub lower: Option<(Vec<Value>, bool)>,
    /// Upper bound, as `lower`.
    pub upper: Option<(Vec<Value>, bool)>,
    /// More ranges (lower, upper) of the index, scanned after the first in
    /// this order (reversed when descending), in the same request: a
    /// multi-range scan (`k IN (…)`), one round trip for all of them. A
    /// row in two ranges comes twice.
    pub more_ranges: Vec<(Option<ScanBound>, Option<ScanBound>)>,
    /// Index order descending (index scans only).
    pub descending: bool,
    /// A pushed-down filter (column positions: `Table::column`).
    pub filter: Option<Filter>,
    /// Columns to return; None: all.
    pub projection: Option<Vec<&'a str>>,
    /// Lock each returned row (Shared/Exclusive) or not (Committed, the
    /// default; a scan returning BLOB/TEXT columns takes Shared instead).
    pub lock: Option<LockMode>,
    /// What a locking scan does about a row another transaction holds:
    /// waits (the default), fails (`NoWait`: `codes::LOCK_BUSY`, the scan
    /// ends, the transaction goes on) or passes it by (`SkipLocked`).
    /// No effect on a committed read.
    pub lock_wait: LockWait,
    /// Rows per batch from each partition; 0: `SCAN_BATCH_ROWS_DEFAULT`.
    pub batch_rows: u32,
    /// Values of the distribution key: scan only the partition holding them.
    pub partition_key: Option<Vec<Value>>,
    /// Several values of the distribution key (`IN` on it): scan only the
    /// partitions holding them (with `partition_key`, its partition too).
    /// Empty: no such limit.
    pub partition_keys: Vec<Vec<Value>>,
    /// One partition by its number (`0..partitions`): scan it alone (an
    /// ordered index's rows then come in index order, which lets a
    /// `… ORDER BY k LIMIT n` read the first n of each partition only).
    /// Takes the place of `partition_key` and `partition_keys`.
    pub partition: Option<u32>,
    /// The scan is all the transaction does: when it starts the
    /// transaction and reads without locks, the TC ends the transaction
    /// with the scan's last batch (`tc_flags::RELEASE`), and a commit
    /// afterwards costs no round trip (an autocommit `SELECT` over a
    /// range: one round trip, not two). Until the scan ends, the
    /// transaction may send nothing else (an execute or another scan is
    /// a usage error); after it, anything (it starts afresh at the TC).
    pub ends_transaction: bool,
    /// One of the scans of a read the caller counts once
    /// ([`crate::Session::count_scan`]): a read merged over partitions, each
    /// scanned alone, is one range scan in `Ndb_api_range_scan_count` and
    /// pruned only if its condition left out partitions, not one pruned
    /// scan per partition.
    pub uncounted: bool,
    /// BLOB/TEXT columns come back as their heads (`Value::BlobHead`: the
    /// length and the inline bytes) and no parts are read, so a committed
    /// read stays lock-free. For a caller that reads the parts tables
    /// itself (`Table::blob_parts_table`), as a backup does.
    pub blob_heads: bool,
    /// A distinct scan (a loose index scan, `proto::scan`): of the rows
    /// that hold the same values in the index's first `distinct_prefix`
    /// columns (as the index orders them), each partition returns only
    /// the first, and steps over the rest. 0: every row. Index scans
    /// without locks only.
    pub distinct_prefix: u8,
    /// A counting scan (`proto::scan`): rows of one value each, the number
    /// of rows that passed the range and filter since the last (their sum
    /// is the count), not the rows. Without locks or a projection.
    pub count: bool,
    /// An aggregating scan (with `count`, `proto::scan`): these
    /// aggregates of the rows that passed (function, column name), per
    /// group of `group_by`'s values; each row the rows counted, the group
    /// values, then the aggregates' values, of the rows that passed since
    /// the partition's last batch (the caller merges them).
    pub aggregates: Vec<(proto::scan::AggregateFn, &'a str)>,
    /// An aggregating scan's group columns (names). Its `batch_rows` is
    /// then the most groups a partition's batch holds, up to
    /// `proto::scan::SCAN_GROUPS_MAX`.
    pub group_by: Vec<&'a str>,
}

/// A table's size as its fragments know it ([`Transaction::table_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Committed rows, summed over the primary replica of every partition.
    pub rows: u64,
    /// Bytes of memory the primary replicas hold (rows, hash and ordered
    /// indexes).
    pub memory_bytes: u64,
    /// Partitions that answered.
    pub partitions: u32,
}

/// One end of an index range: values of a prefix of the index columns,
/// and whether it is inclusive.
pub type ScanBound = (Vec<Value>, bool);

/// The ranges of [`ScanOptions`] as a scan spec carries them: the first
/// range's bounds and the more ranges.
pub(crate) fn spec_ranges(
    lower: Option<ScanBound>,
    upper: Option<ScanBound>,
    more: Vec<(Option<ScanBound>, Option<ScanBound>)>,
) -> (Option<Bound>, Option<Bound>, Vec<proto::scan::Range>) {
    let bound = |b: Option<ScanBound>| b.map(|(values, inclusive)| Bound { values, inclusive });
    let more = more
        .into_iter()
        .map(|(lower, upper)| proto::scan::Range {
            lower: bound(lower),
            upper: bound(upper),
        })
        .collect();
    (bound(lower), bound(upper), more)
}

/// The rows of a scan (see the module doc).
pub struct ScanIter<'t, 's> {
    tx: &'t Transaction<'s>,
    table: Arc<Table>,
    columns: Arc<[usize]>,
    tx_id: u64,
    link: usize,
    scan_id: u32,
    rows: VecDeque<Row>,
    /// Batches received that were not done and not yet answered with a
    /// `TcScanNextReq` (the TC wants one per such batch).
    owed: u32,
    /// The TC said it has no more rows.
    done: bool,
    /// The scan failed; it is closed.
    failed: bool,
    /// Pruned to a partition with a replica on the TC's node: its rows
    /// count as local reads (`trans_local_read_row`).
    local: bool,
    /// BLOB/TEXT columns returned: position in the table, in the row.
    blob_reads: Vec<(usize, usize)>,
    blob_lock: LockMode,
    /// The lock was taken for the blobs only: the rows' keys are not the user's.
    strip_keys: bool,
    /// A pushed join: the values of each joined row (`crate::pushed`).
    pushed_width: Option<usize>,
    /// A statistics scan: its rows are no table's, so they count in no
    /// read-row or batch counter.
    stats_scan: bool,
    /// It may end its transaction at the TC (`tc_flags::RELEASE`): its end
    /// tells the transaction whether it did.
    release: bool,
    /// Its close went out already ([`close_scans`]): the drop only waits
    /// for the answer.
    close_sent: bool,
}

impl<'s> Transaction<'s> {
    /// Starts a scan in this transaction (see [`ScanOptions`]).
    pub fn scan(&self, table: &Arc<Table>, options: ScanOptions<'_>) -> Result<ScanIter<'_, 's>> {
        self.scan_with(table, options, false)
    }

    /// The table's committed row count and memory, summed over the primary
    /// replica of each partition: a statistics scan (NDB's
    /// `ndb_get_table_statistics`, a scan of the pseudo-columns `ROW_COUNT`
    /// and `FRAGMENT_MEMORY`), one round trip per [`SCAN_BATCH_ROWS_DEFAULT`]
    /// partitions' answers at most and no row read. Counts rows committed
    /// when each fragment answered (not one snapshot of the table).
    pub fn table_stats(&self, table: &Arc<Table>) -> Result<TableStats> {
        let mut stats = TableStats::default();
        for row in self.scan_with(table, ScanOptions::default(), true)? {
            let row = row?;
            let value = |at: usize| match row.values().get(at) {
                Some(Value::UInt(v)) => Ok(*v),
                other => Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("statistics of `{}`: value {at} is {other:?}", table.name()),
                )),
            };
            stats.rows += value(0)?;
            stats.memory_bytes += value(1)?;
            stats.partitions += 1;
        }
        Ok(stats)
    }

    fn scan_with(
        &self,
        table: &Arc<Table>,
        options: ScanOptions<'_>,
        stats_scan: bool,
    ) -> Result<ScanIter<'_, 's>> {
        let def = table.def();
        let index_id = match options.index {
            Some(name) => table.require_index(name, IndexKind::Ordered)?.id,
            None => NO_INDEX,
        };
        let projection: Vec<usize> = match &options.projection {
            Some(names) => names
                .iter()
                .map(|n| table.require_column(n))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        let aggregates: Vec<proto::scan::ScanAggregate> = options
            .aggregates
            .iter()
            .map(|(func, name)| {
                Ok(proto::scan::ScanAggregate {
                    func: *func,
                    column: table.require_column(name)? as u16,
                })
            })
            .collect::<Result<_>>()?;
        let group_by: Vec<u16> = options
            .group_by
            .iter()
            .map(|n| Ok(table.require_column(n)? as u16))
            .collect::<Result<_>>()?;
        let mut scratch = Vec::new();
        let mut partition = match &options.partition_key {
            Some(key) => table.partition_of_key(key, &mut scratch)?,
            None => NO_PARTITION,
        };
        let mut partitions = Vec::new();
        if !options.partition_keys.is_empty() {
            for key in &options.partition_keys {
                partitions.push(table.partition_of_key(key, &mut scratch)?);
            }
            if partition != NO_PARTITION {
                partitions.push(partition);
            }
            partitions.sort_unstable();
            partitions.dedup();
            // One partition is an ordinary pruned scan; every one is no
            // pruning at all.
            if let [only] = partitions[..] {
                partition = only;
                partitions.clear();
            } else {
                partition = NO_PARTITION;
                if partitions.len() as u32 >= def.partitions {
                    partitions.clear();
                }
            }
        }
        if let Some(only) = options.partition {
            if only >= def.partitions {
                return Err(Error::usage(format!(
                    "a scan of partition {only} of table `{}`, which has {} partitions",
                    def.name, def.partitions
                )));
            }
            partition = only;
            partitions.clear();
        }
        let asked_lock = options.lock.unwrap_or(LockMode::Committed);
        let blob_reads: Vec<(usize, usize)> =
            if table.has_blobs() && !stats_scan && !options.blob_heads && !options.count {
                let returned: Vec<usize> = if projection.is_empty() {
                    (0..table.columns().len()).collect()
                } else {
                    projection.clone()
                };
                returned
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| table.blob(**c).is_some())
                    .map(|(at, c)| (*c, at))
                    .collect()
            } else {
                Vec::new()
            };
        // Head and parts of one version: a committed read of blobs locks.
        let lock = match asked_lock {
            LockMode::Committed if !blob_reads.is_empty() => LockMode::Shared,
            other => other,
        };
        // A grouped aggregating scan's batch is of groups, up to
        // SCAN_GROUPS_MAX.
        let batch_max = match options.count && !options.group_by.is_empty() {
            true => proto::scan::SCAN_GROUPS_MAX,
            false => SCAN_BATCH_ROWS_MAX,
        };
        let batch_rows = match options.batch_rows {
            0 => SCAN_BATCH_ROWS_DEFAULT,
            n => n.min(batch_max),
        };
        let (lower, upper, more_ranges) =
            spec_ranges(options.lower, options.upper, options.more_ranges);
        let spec = ScanSpec {
            table_id: table.id(),
            table_version: table.version(),
            index_id,
            lower,
            upper,
            more_ranges,
            descending: options.descending,
            lock,
            // Blobs' own shared lock waits: the caller asked for no lock.
            lock_wait: if asked_lock == LockMode::Committed {
                LockWait::Wait
            } else {
                options.lock_wait
            },
            partition,
            batch_rows,
            projection: projection.iter().map(|c| *c as u16).collect(),
            filter: options.filter,
            key_info: lock != LockMode::Committed,
            stats: stats_scan,
            partitions,
            distinct_prefix: options.distinct_prefix,
            count: options.count,
            aggregates,
            group_by,
        };
        spec.check(def)?;
        if lock != LockMode::Committed {
            self.note_locking_scan();
        }
        let columns: Arc<[usize]> = if stats_scan {
            (0..proto::scan::STATS_ROW_COLUMNS).collect()
        } else if options.count {
            (0..proto::scan::COUNT_ROW_COLUMNS + spec.group_by.len() + spec.aggregates.len())
                .collect()
        } else if projection.is_empty() {
            (0..table.columns().len()).collect()
        } else {
            projection.into()
        };
        // Blobs lock (above) and read parts in the same transaction: no
        // release then.
        let (tx_id, link, scan_id, starts, release) =
            self.scan_start(options.ends_transaction && lock == LockMode::Committed)?;
        let session = self.session;
        let counts = &session.counts;
        let counted = !stats_scan && !options.uncounted;
        if counted {
            stats::bump(if index_id == NO_INDEX {
                &counts.table_scan
            } else {
                &counts.range_scan
            });
        }
        if counted && !spec.partitions.is_empty() {
            stats::bump(&counts.pruned_scan);
        }
        let local = partition != NO_PARTITION && {
            if counted {
                stats::bump(&counts.pruned_scan);
            }
            let shared = session.shared();
            let tc = shared.links[link].node;
            shared.placement.home(partition).replicas().any(|n| n == tc)
        };
        let signal = Signal {
            receiver: tc_ref(session.shared(), link, tx_id),
            sender: session.own_ref(),
            body: SignalBody::TcScanReq {
                tx_id,
                scan_id,
                flags: if starts { tc_flags::START } else { 0 }
                    | if release { tc_flags::RELEASE } else { 0 },
                spec: spec.to_bytes(),
            },
        };
        if let Err(error) = session.send_scan_signal(link, tx_id, scan_id, signal) {
            if release {
                self.scan_end(scan_id, false);
            }
            return Err(error);
        }
        Ok(ScanIter {
            tx: self,
            table: Arc::clone(table),
            columns,
            tx_id,
            link,
            scan_id,
            rows: VecDeque::new(),
            owed: 0,
            done: false,
            failed: false,
            local,
            blob_reads,
            blob_lock: lock,
            strip_keys: lock != asked_lock,
            pushed_width: None,
            stats_scan,
            release,
            close_sent: false,
        })
    }
}

impl<'t, 's> ScanIter<'t, 's> {
    /// The rows of a pushed join started by `Transaction::pushed_scan`:
    /// `width` values each.
    pub(crate) fn pushed(
        tx: &'t Transaction<'s>,
        root: &Arc<Table>,
        tx_id: u64,
        link: usize,
        scan_id: u32,
        width: usize,
    ) -> ScanIter<'t, 's> {
        ScanIter {
            tx,
            table: Arc::clone(root),
            // A joined row is not a row of `root`: its values by position.
            columns: (0..width).collect(),
            tx_id,
            link,
            scan_id,
            rows: VecDeque::new(),
            owed: 0,
            done: false,
            failed: false,
            local: false,
            blob_reads: Vec::new(),
            blob_lock: LockMode::Committed,
            strip_keys: false,
            pushed_width: Some(width),
            stats_scan: false,
            release: false,
            close_sent: false,
        }
    }

    /// Rows received and not yet taken.
    pub fn buffered(&self) -> usize {
        self.rows.len()
    }

    /// Asks for the next batch now, while rows of the last are still to
    /// be taken, so that it travels while they are used (the iterator
    /// asks only once they are gone). Nothing when a batch is asked for
    /// or here already, or the scan is over.
    pub fn prefetch(&mut self) -> Result<()> {
        if self.done || self.failed {
            return Ok(());
        }
        while self.owed > 0 {
            if let Err(error) = self.send_next(false) {
                self.failed = true;
                return Err(error);
            }
            self.owed -= 1;
        }
        Ok(())
    }

    /// The session the scan runs in.
    pub(crate) fn session(&self) -> &'s crate::Session {
        self.tx.session
    }
}

impl crate::Session {
    /// Counts a read made of scans started with `ScanOptions::uncounted`
    /// as one scan: a range scan (`Ndb_api_range_scan_count`), pruned when
    /// its condition left out some of the table's partitions.
    pub fn count_scan(&self, pruned: bool) {
        stats::bump(&self.counts.range_scan);
        if pruned {
            stats::bump(&self.counts.pruned_scan);
        }
    }

    /// [`Transaction::table_stats`] in a transaction of its own.
    pub fn table_stats(&self, table: &Arc<Table>) -> Result<TableStats> {
        let tx = self.begin()?;
        let stats = tx.table_stats(table)?;
        // Nothing to keep: only reads, no locks.
        let _ = tx.execute(crate::ExecMode::Rollback);
        Ok(stats)
    }
}

impl ScanIter<'_, '_> {
    /// Waits for the next batch and decodes its rows.
    fn fetch(&mut self) -> Result<()> {
        let session = self.tx.session;
        let (rows, done) = match session.wait_scan(self.tx_id, self.scan_id) {
            Ok(batch) => {
                if batch.done {
                    self.release_ended(batch.released);
                }
                (batch.rows, batch.done)
            }
            Err(error) => {
                self.release_ended(false);
                self.failed = true;
                session.close_scan_inbox(self.tx_id, self.scan_id);
                if matches!(
                    error.code,
                    proto::error::WRONG_SCHEMA_VERSION | proto::error::NO_SUCH_TABLE
                ) {
                    // The table changed or went: fetch it again next time.
                    session.forget_table(self.table.name());
                }
                return Err(error);
            }
        };
        self.done = done;
        if !done {
            self.owed += 1;
        }
        if !self.stats_scan {
            stats::bump(&session.counts.scan_batch);
        }
        let first_new = self.rows.len();
        if !rows.is_empty() {
            // Each row keeps its values encoded, as ranges of the batch's
            // buffer, which the rows share; each value is checked here,
            // once, and decoded when the caller reads it (into its own
            // values: `Row::each_value`). Decoded here, every row cost
            // a vector and each string value a copy that the SQL node
            // converted and dropped.
            let bytes = Arc::new(rows);
            let reader = RowBatchReader::framed(&bytes)?;
            // Room for the batch at once: grown row by row, the queue
            // reallocated and copied its rows 6 times for a batch of 100
            // (2 % of the SQL node's instructions in oltp_read_only).
            self.rows.reserve(reader.len());
            let width = self.pushed_width.unwrap_or(self.columns.len());
            for row in reader.iter() {
                row.check()?;
                if row.value_count() != width {
                    return Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!(
                            "scan of `{}`: a row of {} values, {width} expected",
                            self.table.name(),
                            row.value_count(),
                        ),
                    ));
                }
                let raw = RawRow::new(
                    &bytes,
                    ReplyBytes::Shared(Arc::clone(&bytes)),
                    row.encoded_values(),
                    row.encoded_keys(),
                );
                self.rows.push_back(Row::encoded(
                    Arc::clone(&self.table),
                    Arc::clone(&self.columns),
                    raw,
                ));
            }
        }
        let read = if self.stats_scan {
            0
        } else {
            (self.rows.len() - first_new) as u64
        };
        stats::add(&session.counts.read_row, read);
        if self.local {
            stats::add(&session.counts.trans_local_read_row, read);
        }
        if done {
            session.close_scan_inbox(self.tx_id, self.scan_id);
        }
        if !self.blob_reads.is_empty() {
            if let Err(error) = self.whole_blobs(first_new) {
                session.close_scan_inbox(self.tx_id, self.scan_id);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Puts whole BLOB/TEXT values in the rows from `first` on, reading
    /// the parts of long ones (one round trip per `RESULT_BYTES_BUDGET`
    /// of parts, for the whole batch of rows).
    fn whole_blobs(&mut self, first: usize) -> Result<()> {
        let mut jobs: Vec<ReadJob> = Vec::new();
        for (i, row) in self.rows.iter_mut().enumerate().skip(first) {
            let key = if self.strip_keys {
                row.take_key()
            } else {
                row.key().to_vec()
            };
            if key.len() != self.table.primary_key().len() {
                return Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!(
                        "scan of `{}`: a locking scan's row came without its primary key",
                        self.table.name()
                    ),
                ));
            }
            blob::plan_row_reads(
                &self.table,
                &self.blob_reads,
                row.values_mut(),
                &key,
                self.blob_lock,
                i,
                &mut jobs,
            )?;
        }
        if jobs.is_empty() {
            return Ok(());
        }
        for (i, at, value) in self.tx.read_parts(jobs)? {
            self.rows[i].values_mut()[at] = value;
        }
        Ok(())
    }

    /// A scan that could end its transaction (`release`) is over: the
    /// transaction learns whether the TC ended it. Once only.
    fn release_ended(&mut self, released: bool) {
        if std::mem::take(&mut self.release) {
            self.tx.scan_end(self.scan_id, released);
        }
    }

    fn send_next(&mut self, close: bool) -> Result<()> {
        let session = self.tx.session;
        let signal = Signal {
            receiver: tc_ref(session.shared(), self.link, self.tx_id),
            sender: session.own_ref(),
            body: SignalBody::TcScanNextReq {
                tx_id: self.tx_id,
                scan_id: self.scan_id,
                close,
            },
        };
        session.send_scan_signal(self.link, self.tx_id, self.scan_id, signal)
    }
}

impl Iterator for ScanIter<'_, '_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            if let Some(row) = self.rows.pop_front() {
                return Some(Ok(row));
            }
            if self.done || self.failed {
                return None;
            }
            // Batches already here come first; ask for more only when none is.
            if !self.tx.session.scan_has_batch(self.tx_id, self.scan_id) {
                while self.owed > 0 {
                    if let Err(error) = self.send_next(false) {
                        self.failed = true;
                        return Some(Err(error));
                    }
                    self.owed -= 1;
                }
            }
            if let Err(error) = self.fetch() {
                self.failed = true;
                return Some(Err(error));
            }
        }
    }
}

/// Closes scans left before their end, all their closes sent before any
/// answer is waited for: one round trip for all of them, where dropping
/// them one by one waits for each (a scan that may end its transaction
/// waits for its close's answer).
pub fn close_scans<'t, 's: 't>(scans: impl IntoIterator<Item = ScanIter<'t, 's>>) {
    let mut scans: Vec<ScanIter<'t, 's>> = scans.into_iter().collect();
    for scan in &mut scans {
        if !scan.done && !scan.failed {
            // Best effort, as a drop's: a close that cannot go is sent
            // again by the drop, which then answers for it.
            scan.close_sent = scan.send_next(true).is_ok();
        }
    }
    drop(scans);
}

impl Drop for ScanIter<'_, '_> {
    fn drop(&mut self) {
        if !self.done && !self.failed {
            // Best effort: the TC closes the scan; its last answer is dropped.
            let closed = if self.close_sent {
                Ok(())
            } else {
                self.send_next(true)
            };
            if self.release {
                // The close's answer (or the scan's end, if that came
                // first) says whether the TC ended the transaction, which
                // the transaction must know.
                let mut released = false;
                if closed.is_ok() {
                    while let Ok(batch) = self.tx.session.wait_scan(self.tx_id, self.scan_id) {
                        if batch.done {
                            released = batch.released;
                            break;
                        }
                    }
                }
                self.release_ended(released);
            }
            self.tx.session.close_scan_inbox(self.tx_id, self.scan_id);
        }
    }
}
