//! Scans: what the client asks for ([`ScanSpec`]) and the batches of rows
//! that come back ([`RowBatchWriter`], [`RowBatchReader`]).
//!
//! A scan is set up once and then fetches batches, so its spec is decoded
//! into owned values (no borrowing to keep alive); the rows are many and
//! are read in place, like op batches. The spec names a full-table scan
//! (`index_id` = [`NO_INDEX`]) or an ordered-index range scan between two
//! optional bounds (each a prefix of the index columns, inclusive or not),
//! or of several such ranges one after another (NDB's multi-range scan:
//! `k IN (…)` as one scan, not one per value),
//! optionally pruned to one partition, with a projection, a pushed-down
//! [`Filter`], a lock mode, a batch size and whether each row comes with its
//! primary key ("key info", needed to update or delete the scanned row).
//!
//! # Scan spec layout
//!
//! ```text
//! "SS"          magic, 2 bytes
//! u8            format version (SCAN_SPEC_FORMAT_VERSION = 4)
//! u32 table_id, u32 table_version, u32 index_id, u32 partition, u32 batch_rows
//! u8            lock: bits 0-3 the mode (0 committed read, 1 shared, 2 exclusive),
//!               bits 4-7 what a locking scan does about a row another transaction
//!               holds (0 wait, 1 no wait: fail, 2 skip locked: pass it by)
//! u8            flags: bit 0 descending, bit 1 key info, bit 2 lower bound present,
//!               bit 3 upper bound present, bit 4 filter present, bit 5 statistics,
//!               bit 6 partition list present, bit 7 more ranges present
//! u8            distinct prefix: 0, or n (an ordered index scan without locks):
//!               of the rows equal in the index's first n columns only the
//!               first is returned
//! u8            more flags: bit 0 counting, bit 1 aggregates present, bit 2
//!               group columns present (other bits 0)
//! lower bound   if present: u8 inclusive (0/1), u16 n, n values (crate::value)
//! upper bound   if present: the same
//! more ranges   if present: u16 n (1..=SCAN_RANGES_MAX - 1), then per range u8 flags
//!               (bit 0 lower, bit 1 upper present; other bits 0) and its bounds
//! u16 n, n × u16  projection column positions (none = every column)
//! filter        if present: its encoding (crate::filter)
//! partitions    if present: u16 n, n × u32 (the partitions to scan, ascending)
//! aggregates    if present: u16 n (1..=SCAN_AGGREGATES_MAX), n × (u8 function:
//!               0 count, 1 sum, 2 min, 3 max; u16 column position)
//! group columns if present: u16 n (1..=SCAN_GROUP_COLUMNS_MAX), n × u16
//! ```
//!
//! A *distinct* scan (`distinct_prefix` n > 0: MariaDB's loose index
//! scan, "Using index for group-by") returns, of each run of rows that
//! pass the filter and hold the same values in the index's first n
//! columns, the first in the scan's order, and steps over the rest of the
//! run by seeking past its prefix rather than reading it: a `SELECT
//! DISTINCT a` or `COUNT(DISTINCT a)` over an index on `a` receives one
//! row per value and partition, not one per row. Values compare as the
//! index orders them: 'a' and 'A' are one value under a case-blind
//! collation. The reader deduplicates across partitions.
//!
//! A *counting* scan (`count`: `SELECT COUNT(*) … WHERE …` whose whole
//! condition the scan's range and filter test) returns, instead of the
//! rows that pass, their number: each batch is one row of
//! [`COUNT_ROW_COLUMNS`] value, a `BigInt` unsigned, the rows that passed
//! since the last batch (0 too), so a partition of a million matching
//! rows answers in a few batches of one row (a batch ends after
//! `SCAN_ROWS_EXAMINED_MAX` rows examined, as any scan's). The reader
//! adds them up. Without locks, key info, statistics, a projection or a
//! distinct prefix.
//!
//! An *aggregating* scan is a counting scan with [`ScanSpec::aggregates`]
//! or [`ScanSpec::group_by`] (NDB's pushed aggregation, as RonDB has it:
//! `SELECT status, COUNT(*), SUM(amount) … GROUP BY status`): each batch
//! holds one row per group of the rows that passed since the last batch
//! (the one row of no group columns, or none for no row when grouped):
//! the rows counted (`BigInt` unsigned), the group columns' values, then
//! per aggregate its value over the group's rows: `Count` the values not
//! NULL (unsigned), `Sum` their exact sum as a `Decimal` of the column's
//! scale, `Min` and `Max` a value of the column's own kind; NULL where no
//! value was. Groups are of equal *values* (the bytes: 'a' and 'A' are
//! two groups under any collation; the reader merges what its collation
//! deems one group). Sum, Min and Max take numeric columns whose sums
//! cannot overflow a batch: integers, and DECIMALs of at most
//! [`SCAN_SUM_DECIMAL_DIGITS_MAX`] digits; Min and Max DATE and DATETIME
//! columns too (by date and time). A batch holds at most `batch_rows`
//! groups (up to [`SCAN_GROUPS_MAX`] for a grouped scan) and group values
//! of at most `SCAN_GROUP_KEY_BYTES_MAX` bytes: a row of one group more
//! ends it.
//!
//! A *statistics* scan (NDB's table statistics: a scan reading the
//! pseudo-columns `ROW_COUNT` and `FRAGMENT_MEMORY` of every fragment)
//! returns one row per partition instead of the table's rows:
//! [`STATS_ROW_COLUMNS`] values, the committed row count, the bytes of
//! memory the fragment holds and the partition, each a `BigInt` unsigned.
//!
//! # Row batch layout
//!
//! ```text
//! "RW"          magic, 2 bytes
//! u8            format version (ROW_BATCH_FORMAT_VERSION = 2)
//! u32           row count, at most ROWS_PER_BATCH_MAX
//! then per row: u16 value count, u16 key count, u32 value bytes, u32 key bytes,
//!               the values, then the key values
//! ```
//!
//! A row batch is at most [`BATCH_BYTES_MAX`] bytes.

use schema::{IndexKind, TableDef, Value, ValueRef};

use crate::filter::Filter;
use crate::ops::{
    check_partition, check_table, column_at, find_index, validated, LockMode, LockWait,
    BATCH_BYTES_MAX, NO_INDEX,
};
use crate::value::{
    check_value, get_row, get_value, put_value, Check, EncodedValues, OpenRow, Reader, RowParts,
};
use crate::ProtoError;
use crate::NO_PARTITION;

/// The two bytes a scan spec starts with.
pub const SCAN_SPEC_MAGIC: [u8; 2] = *b"SS";
pub const SCAN_SPEC_FORMAT_VERSION: u8 = 4;
/// The two bytes a row batch starts with.
pub const ROW_BATCH_MAGIC: [u8; 2] = *b"RW";
pub const ROW_BATCH_FORMAT_VERSION: u8 = 2;
/// Most rows one LDM returns per batch of a scan (NDB's largest scan batch
/// size).
pub const SCAN_BATCH_ROWS_MAX: u32 = 992;
/// Most rows in one row batch (the TC may merge several LDMs' batches).
pub const ROWS_PER_BATCH_MAX: usize = 8_192;

const FLAG_DESCENDING: u8 = 1;
const FLAG_KEY_INFO: u8 = 2;
const FLAG_LOWER: u8 = 4;
const FLAG_UPPER: u8 = 8;
const FLAG_FILTER: u8 = 16;
const FLAG_STATS: u8 = 32;
const FLAG_PARTITIONS: u8 = 64;
const FLAG_MORE_RANGES: u8 = 128;
const MORE_FLAG_COUNT: u8 = 1;
const MORE_FLAG_AGGREGATES: u8 = 2;
const MORE_FLAG_GROUP_BY: u8 = 4;
const RANGE_FLAG_LOWER: u8 = 1;
const RANGE_FLAG_UPPER: u8 = 2;
/// Most ranges one scan covers (the first and the more).
pub const SCAN_RANGES_MAX: usize = 1_024;
/// Values in each row of a counting scan: the rows that passed.
pub const COUNT_ROW_COLUMNS: usize = 1;
/// Values in each row of a statistics scan: rows, memory bytes, partition.
pub const STATS_ROW_COLUMNS: usize = 3;
/// Most partitions one scan's partition list names.
pub const SCAN_PARTITIONS_MAX: usize = 1_024;
/// Most groups one batch of an aggregating scan with group columns holds:
/// its `batch_rows`, which only such a scan may set above
/// [`SCAN_BATCH_ROWS_MAX`] (a batch of a few thousand groups is a few
/// hundred KiB; a cap of 992 had a scan of 1,000 groups send each group
/// three times a partition).
pub const SCAN_GROUPS_MAX: u32 = 8_192;
/// Most aggregates one aggregating scan computes.
pub const SCAN_AGGREGATES_MAX: usize = 64;
/// Most bytes of group values one batch of an aggregating scan holds
/// (what bounds the data node's memory for a scan's groups).
pub const SCAN_GROUP_KEY_BYTES_MAX: usize = 512 * 1024;
/// Most columns an aggregating scan groups by.
pub const SCAN_GROUP_COLUMNS_MAX: usize = 16;
/// Digits of the widest DECIMAL column an aggregating scan sums, takes
/// the least or the greatest of: a batch examines at most 16,384 rows,
/// and 16,384 × 10^30 is far inside the i128 the data node sums in.
pub const SCAN_SUM_DECIMAL_DIGITS_MAX: u8 = 30;

/// What an aggregating scan computes of a column (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AggregateFn {
    /// The values not NULL.
    Count = 0,
    /// The exact sum of the values not NULL.
    Sum = 1,
    Min = 2,
    Max = 3,
}

impl AggregateFn {
    pub fn from_u8(b: u8) -> Option<AggregateFn> {
        Some(match b {
            0 => AggregateFn::Count,
            1 => AggregateFn::Sum,
            2 => AggregateFn::Min,
            3 => AggregateFn::Max,
            _ => return None,
        })
    }
}

/// One aggregate of an aggregating scan: a function of a column (its
/// position in the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanAggregate {
    pub func: AggregateFn,
    pub column: u16,
}

/// Whether an aggregating scan can sum, or take the least or greatest of,
/// a column of type `ty`: an integer, or a DECIMAL of at most
/// [`SCAN_SUM_DECIMAL_DIGITS_MAX`] digits.
pub fn aggregates_numerically(ty: &schema::ColumnType) -> bool {
    match *ty {
        schema::ColumnType::Decimal { precision, .. } => precision <= SCAN_SUM_DECIMAL_DIGITS_MAX,
        ref other => other.integer_code() != 0,
    }
}

/// Whether an aggregating scan can take the least or greatest of a column
/// of type `ty`: what it sums ([`aggregates_numerically`]), DATE and
/// DATETIME.
pub fn aggregates_in_order(ty: &schema::ColumnType) -> bool {
    aggregates_numerically(ty)
        || matches!(
            ty,
            schema::ColumnType::Date | schema::ColumnType::DateTime { .. }
        )
}

const ROW_BATCH_HEADER_BYTES: usize = 2 + 1 + 4;
const ROW_COUNT_OFFSET: usize = 3;

/// One end of an index range: values of a prefix of the index columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    pub values: Vec<Value>,
    pub inclusive: bool,
}

/// One more range of a multi-range scan (see [`ScanSpec::more_ranges`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
}

/// What to scan and how (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct ScanSpec {
    pub table_id: u32,
    pub table_version: u32,
    /// An ordered index's id, or [`NO_INDEX`] for a full-table scan.
    pub index_id: u32,
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
    /// Ranges scanned after `lower..upper`, in this order (in reverse
    /// order when descending), each as its own range of the index: a row
    /// in two ranges comes twice.
    pub more_ranges: Vec<Range>,
    pub descending: bool,
    pub lock: LockMode,
    /// What a locking scan does about a row another transaction holds
    /// (`Wait` for a committed read).
    pub lock_wait: LockWait,
    /// One partition (pruned), or `NO_PARTITION` for all.
    pub partition: u32,
    /// Rows per batch from each LDM, 1..=[`SCAN_BATCH_ROWS_MAX`].
    pub batch_rows: u32,
    /// Columns to return; empty = every column.
    pub projection: Vec<u16>,
    pub filter: Option<Filter>,
    /// Return each row's primary key after its values.
    pub key_info: bool,
    /// A statistics scan: one row per partition with its row count and
    /// memory (see the module doc), not the table's rows.
    pub stats: bool,
    /// The partitions to scan (pruned to several: `IN` on the
    /// distribution key), ascending; empty: `partition` says.
    pub partitions: Vec<u32>,
    /// A distinct scan (see the module doc): of the rows equal in the
    /// index's first `distinct_prefix` columns only the first; 0: every
    /// row.
    pub distinct_prefix: u8,
    /// A counting scan (see the module doc): each batch one row, the
    /// number of rows that passed, not the rows.
    pub count: bool,
    /// An aggregating scan (a counting one, see the module doc): these
    /// aggregates of the rows that passed, per group.
    pub aggregates: Vec<ScanAggregate>,
    /// An aggregating scan's group columns (positions in the table).
    pub group_by: Vec<u16>,
}

impl ScanSpec {
    /// Appends the encoding. Panics on more than 65,535 bound values or
    /// projected columns, which [`ScanSpec::check`] refuses.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&SCAN_SPEC_MAGIC);
        out.push(SCAN_SPEC_FORMAT_VERSION);
        for field in [
            self.table_id,
            self.table_version,
            self.index_id,
            self.partition,
            self.batch_rows,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        let flags = flag(self.descending, FLAG_DESCENDING)
            | flag(self.key_info, FLAG_KEY_INFO)
            | flag(self.lower.is_some(), FLAG_LOWER)
            | flag(self.upper.is_some(), FLAG_UPPER)
            | flag(self.filter.is_some(), FLAG_FILTER)
            | flag(self.stats, FLAG_STATS)
            | flag(!self.partitions.is_empty(), FLAG_PARTITIONS)
            | flag(!self.more_ranges.is_empty(), FLAG_MORE_RANGES);
        out.extend_from_slice(&[
            self.lock as u8 | (self.lock_wait as u8) << 4,
            flags,
            self.distinct_prefix,
            flag(self.count, MORE_FLAG_COUNT)
                | flag(!self.aggregates.is_empty(), MORE_FLAG_AGGREGATES)
                | flag(!self.group_by.is_empty(), MORE_FLAG_GROUP_BY),
        ]);
        for bound in [&self.lower, &self.upper].into_iter().flatten() {
            put_bound(out, bound);
        }
        if !self.more_ranges.is_empty() {
            let n = u16::try_from(self.more_ranges.len()).expect("at most 65,535 ranges");
            out.extend_from_slice(&n.to_le_bytes());
            for range in &self.more_ranges {
                out.push(
                    flag(range.lower.is_some(), RANGE_FLAG_LOWER)
                        | flag(range.upper.is_some(), RANGE_FLAG_UPPER),
                );
                for bound in [&range.lower, &range.upper].into_iter().flatten() {
                    put_bound(out, bound);
                }
            }
        }
        let n = u16::try_from(self.projection.len()).expect("at most 65,535 projected columns");
        out.extend_from_slice(&n.to_le_bytes());
        for c in &self.projection {
            out.extend_from_slice(&c.to_le_bytes());
        }
        if let Some(filter) = &self.filter {
            filter.encode(out);
        }
        if !self.partitions.is_empty() {
            let n = u16::try_from(self.partitions.len()).expect("at most 65,535 partitions");
            out.extend_from_slice(&n.to_le_bytes());
            for p in &self.partitions {
                out.extend_from_slice(&p.to_le_bytes());
            }
        }
        if !self.aggregates.is_empty() {
            let n = u16::try_from(self.aggregates.len()).expect("at most 65,535 aggregates");
            out.extend_from_slice(&n.to_le_bytes());
            for a in &self.aggregates {
                out.push(a.func as u8);
                out.extend_from_slice(&a.column.to_le_bytes());
            }
        }
        if !self.group_by.is_empty() {
            let n = u16::try_from(self.group_by.len()).expect("at most 65,535 group columns");
            out.extend_from_slice(&n.to_le_bytes());
            for c in &self.group_by {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
    }

    /// The encoded spec.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes a whole buffer as a scan spec.
    pub fn decode(bytes: &[u8]) -> Result<ScanSpec, ProtoError> {
        let mut r = Reader::new(bytes, "scan spec");
        r.limit("scan spec bytes", bytes.len(), BATCH_BYTES_MAX)?;
        r.header(SCAN_SPEC_MAGIC, SCAN_SPEC_FORMAT_VERSION)?;
        let table_id = r.u32()?;
        let table_version = r.u32()?;
        let index_id = r.u32()?;
        let partition = r.u32()?;
        let batch_rows = r.u32()?;
        let at = r.position();
        let byte = r.u8()?;
        let lock = LockMode::from_u8(byte & 0xf)
            .ok_or_else(|| r.bad_field(at, "lock mode", u64::from(byte)))?;
        let lock_wait = LockWait::from_u8(byte >> 4)
            .filter(|&w| w == LockWait::Wait || lock != LockMode::Committed)
            .ok_or_else(|| r.bad_field(at, "lock wait", u64::from(byte)))?;
        // Every bit of the flags byte has its meaning: the distinct
        // prefix (format 2) came as a byte of its own after it.
        let flags = r.u8()?;
        let distinct_prefix = r.u8()?;
        // Format 3: a second byte of flags.
        let at = r.position();
        let more_flags = r.u8()?;
        if more_flags & !(MORE_FLAG_COUNT | MORE_FLAG_AGGREGATES | MORE_FLAG_GROUP_BY) != 0 {
            return Err(r.bad_field(at, "scan spec more flags", u64::from(more_flags)));
        }
        let lower = if flags & FLAG_LOWER != 0 {
            Some(get_bound(&mut r)?)
        } else {
            None
        };
        let upper = if flags & FLAG_UPPER != 0 {
            Some(get_bound(&mut r)?)
        } else {
            None
        };
        let mut more_ranges = Vec::new();
        if flags & FLAG_MORE_RANGES != 0 {
            let at = r.position();
            let n = usize::from(r.u16()?);
            if n == 0 || n >= SCAN_RANGES_MAX {
                return Err(r.bad_field(at, "more scan ranges", n as u64));
            }
            more_ranges.reserve(n);
            for _ in 0..n {
                let at = r.position();
                let range_flags = r.u8()?;
                if range_flags & !(RANGE_FLAG_LOWER | RANGE_FLAG_UPPER) != 0 {
                    return Err(r.bad_field(at, "scan range flags", u64::from(range_flags)));
                }
                let lower = if range_flags & RANGE_FLAG_LOWER != 0 {
                    Some(get_bound(&mut r)?)
                } else {
                    None
                };
                let upper = if range_flags & RANGE_FLAG_UPPER != 0 {
                    Some(get_bound(&mut r)?)
                } else {
                    None
                };
                more_ranges.push(Range { lower, upper });
            }
        }
        let n = usize::from(r.u16()?);
        let projection = r
            .bytes(2 * n)?
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let filter = if flags & FLAG_FILTER != 0 {
            Some(Filter::get(&mut r)?)
        } else {
            None
        };
        let partitions = if flags & FLAG_PARTITIONS != 0 {
            let n = usize::from(r.u16()?);
            r.bytes(4 * n)?
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        } else {
            Vec::new()
        };
        let mut aggregates = Vec::new();
        if more_flags & MORE_FLAG_AGGREGATES != 0 {
            let at = r.position();
            let n = usize::from(r.u16()?);
            if n == 0 || n > SCAN_AGGREGATES_MAX {
                return Err(r.bad_field(at, "scan aggregates", n as u64));
            }
            aggregates.reserve(n);
            for _ in 0..n {
                let at = r.position();
                let b = r.u8()?;
                let func = AggregateFn::from_u8(b)
                    .ok_or_else(|| r.bad_field(at, "scan aggregate function", u64::from(b)))?;
                let column = r.u16()?;
                aggregates.push(ScanAggregate { func, column });
            }
        }
        let mut group_by = Vec::new();
        if more_flags & MORE_FLAG_GROUP_BY != 0 {
            let at = r.position();
            let n = usize::from(r.u16()?);
            if n == 0 || n > SCAN_GROUP_COLUMNS_MAX {
                return Err(r.bad_field(at, "scan group columns", n as u64));
            }
            group_by = r
                .bytes(2 * n)?
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
        }
        r.finish()?;
        Ok(ScanSpec {
            table_id,
            table_version,
            index_id,
            lower,
            upper,
            more_ranges,
            descending: flags & FLAG_DESCENDING != 0,
            lock,
            lock_wait,
            partition,
            batch_rows,
            projection,
            filter,
            key_info: flags & FLAG_KEY_INFO != 0,
            stats: flags & FLAG_STATS != 0,
            partitions,
            distinct_prefix,
            count: more_flags & MORE_FLAG_COUNT != 0,
            aggregates,
            group_by,
        })
    }

    /// Checks the scan against its table: table id and version, the
    /// partition, the index (an ordered index of the table; bounds only
    /// with one, each a prefix of its columns with fitting values), the
    /// batch size, the projection and the filter. Errors name the table
    /// and column.
    pub fn check(&self, table: &TableDef) -> Result<(), ProtoError> {
        let bad = |problem: String| ProtoError::BadOperation {
            table: table.name.clone(),
            problem,
        };
        check_table(table, self.table_id, self.table_version)?;
        check_partition(table, self.partition)?;
        if self.partitions.len() > SCAN_PARTITIONS_MAX {
            return Err(bad(format!(
                "a scan of {} listed partitions: at most {SCAN_PARTITIONS_MAX}",
                self.partitions.len()
            )));
        }
        for &p in &self.partitions {
            // NO_PARTITION is no partition: a list names real ones.
            check_partition(
                table,
                if p == NO_PARTITION {
                    table.partitions
                } else {
                    p
                },
            )?;
        }
        if self.stats && (self.index_id != NO_INDEX || self.filter.is_some()) {
            return Err(bad(
                "a statistics scan reads whole fragments: no index and no filter".into(),
            ));
        }
        let batch_max = match self.count && !self.group_by.is_empty() {
            true => SCAN_GROUPS_MAX,
            false => SCAN_BATCH_ROWS_MAX,
        };
        if self.batch_rows == 0 || self.batch_rows > batch_max {
            return Err(bad(format!(
                "a scan batch of {} rows: 1..={batch_max} allowed",
                self.batch_rows
            )));
        }
        if self.more_ranges.len() >= SCAN_RANGES_MAX {
            return Err(bad(format!(
                "a scan of {} ranges: at most {SCAN_RANGES_MAX}",
                self.more_ranges.len() + 1
            )));
        }
        if self.distinct_prefix > 0
            && (self.index_id == NO_INDEX || self.lock != LockMode::Committed)
        {
            return Err(bad(
                "a distinct scan reads an ordered index without locks".into()
            ));
        }
        if self.count
            && (self.lock != LockMode::Committed
                || self.key_info
                || self.stats
                || !self.projection.is_empty()
                || self.distinct_prefix > 0)
        {
            return Err(bad(
                "a counting scan reads without locks, key info, statistics, a projection \
                 or a distinct prefix"
                    .into(),
            ));
        }
        if (!self.aggregates.is_empty() || !self.group_by.is_empty()) && !self.count {
            return Err(bad(
                "aggregates and group columns belong to a counting scan".into(),
            ));
        }
        if self.aggregates.len() > SCAN_AGGREGATES_MAX
            || self.group_by.len() > SCAN_GROUP_COLUMNS_MAX
        {
            return Err(bad(format!(
                "an aggregating scan of {} aggregates and {} group columns: at most \
                 {SCAN_AGGREGATES_MAX} and {SCAN_GROUP_COLUMNS_MAX}",
                self.aggregates.len(),
                self.group_by.len()
            )));
        }
        for a in &self.aggregates {
            let column = column_at(table, "an aggregate", a.column)?;
            let fits = match a.func {
                AggregateFn::Count => true,
                AggregateFn::Sum => aggregates_numerically(&column.ty),
                AggregateFn::Min | AggregateFn::Max => aggregates_in_order(&column.ty),
            };
            if !fits {
                return Err(bad(format!(
                    "a scan's {:?} of column `{}` of type {:?}: only integers and DECIMALs \
                     of at most {SCAN_SUM_DECIMAL_DIGITS_MAX} digits (Min and Max: DATE and \
                     DATETIME too)",
                    a.func, column.name, column.ty
                )));
            }
        }
        for &c in &self.group_by {
            let column = column_at(table, "the group columns", c)?;
            if column.ty.is_blob() {
                return Err(bad(format!(
                    "a scan grouped by BLOB/TEXT column `{}`",
                    column.name
                )));
            }
        }
        if self.index_id == NO_INDEX {
            if self.lower.is_some()
                || self.upper.is_some()
                || self.descending
                || !self.more_ranges.is_empty()
            {
                return Err(bad(
                    "a full-table scan has no bounds and no order: name an ordered index".into(),
                ));
            }
        } else {
            let index = find_index(table, self.index_id, IndexKind::Ordered)?;
            if usize::from(self.distinct_prefix) > index.columns.len() {
                return Err(bad(format!(
                    "a distinct scan of the first {} columns of index `{}` of {} columns",
                    self.distinct_prefix,
                    index.name,
                    index.columns.len()
                )));
            }
            let more = self.more_ranges.iter().flat_map(|r| [&r.lower, &r.upper]);
            for bound in [&self.lower, &self.upper].into_iter().chain(more).flatten() {
                if bound.values.len() > index.columns.len() {
                    return Err(bad(format!(
                        "a bound of {} values on index `{}` of {} columns",
                        bound.values.len(),
                        index.name,
                        index.columns.len()
                    )));
                }
                for (&c, v) in index.columns.iter().zip(&bound.values) {
                    check_value(&table.name, &table.columns[c], v.as_ref())?;
                }
            }
        }
        for &c in &self.projection {
            column_at(table, "the projection", c)?;
        }
        if let Some(filter) = &self.filter {
            filter.check(table)?;
        }
        Ok(())
    }
}

fn put_bound(out: &mut Vec<u8>, bound: &Bound) {
    out.push(u8::from(bound.inclusive));
    let n = u16::try_from(bound.values.len()).expect("at most 65,535 bound values");
    out.extend_from_slice(&n.to_le_bytes());
    for v in &bound.values {
        put_value(out, v.as_ref());
    }
}

fn get_bound(r: &mut Reader<'_>) -> Result<Bound, ProtoError> {
    let at = r.position();
    let inclusive = match r.u8()? {
        0 => false,
        1 => true,
        other => return Err(r.bad_field(at, "bound inclusive", u64::from(other))),
    };
    let n = usize::from(r.u16()?);
    // Every value takes at least its tag byte.
    let mut values = Vec::with_capacity(n.min(r.remaining()));
    for _ in 0..n {
        values.push(get_value(r)?.to_value());
    }
    Ok(Bound { values, inclusive })
}

/// Appends a batch of scanned rows to a buffer. The buffer holds a valid
/// batch after every [`RowBatchWriter::end_row`]; a row begun and not ended
/// is removed when the writer is dropped. A row's values come before its
/// key values; misuse panics.
pub struct RowBatchWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    rows: usize,
    open: Option<OpenRow>,
}

impl<'a> RowBatchWriter<'a> {
    /// Starts a batch at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>) -> RowBatchWriter<'a> {
        let start = out.len();
        out.extend_from_slice(&ROW_BATCH_MAGIC);
        out.push(ROW_BATCH_FORMAT_VERSION);
        out.extend_from_slice(&0u32.to_le_bytes());
        RowBatchWriter {
            out,
            start,
            rows: 0,
            open: None,
        }
    }

    pub fn row_count(&self) -> usize {
        self.rows
    }

    pub fn batch_bytes(&self) -> usize {
        self.out.len() - self.start
    }

    /// Starts a row.
    pub fn row(&mut self) {
        assert!(
            self.open.is_none(),
            "RowBatchWriter: end_row() the open row first"
        );
        let start = self.out.len();
        self.open = Some(OpenRow::begin(self.out, start));
    }

    /// A whole row whose values and key values are already encoded (see
    /// `ResultWriter::encoded_row`): copied, not re-encoded.
    pub fn encoded_row(
        &mut self,
        values: EncodedValues<'_>,
        keys: EncodedValues<'_>,
    ) -> Result<(), ProtoError> {
        self.row();
        self.open
            .as_mut()
            .expect("row() opened it")
            .encoded(self.out, values, keys);
        self.end_row()
    }

    /// The next projected value of the row.
    pub fn value(&mut self, v: ValueRef<'_>) {
        self.open
            .as_mut()
            .expect("RowBatchWriter::value outside row()/end_row()")
            .value(self.out, v);
    }

    /// The next primary-key value of the row (key info).
    pub fn key(&mut self, v: ValueRef<'_>) {
        self.open
            .as_mut()
            .expect("RowBatchWriter::key outside row()/end_row()")
            .key(self.out, v);
    }

    /// Ends the row. If it breaks a limit the row is removed and the error
    /// says which: send the batch and put the row in the next one.
    pub fn end_row(&mut self) -> Result<(), ProtoError> {
        let row = self
            .open
            .take()
            .expect("RowBatchWriter::end_row without row()");
        let limits = [
            ("rows per batch", self.rows + 1, ROWS_PER_BATCH_MAX),
            ("batch bytes", self.batch_bytes(), BATCH_BYTES_MAX),
        ];
        let over = limits
            .into_iter()
            .find(|&(_, value, max)| value > max)
            .or_else(|| {
                row.over_limit(self.out)
                    .map(|(field, count)| (field, count, usize::from(u16::MAX)))
            });
        if let Some((field, value, max)) = over {
            self.out.truncate(row.start);
            return Err(ProtoError::OverLimit {
                what: "row batch",
                field,
                value: value as u64,
                max: max as u64,
            });
        }
        row.finish(self.out);
        self.rows += 1;
        let at = self.start + ROW_COUNT_OFFSET;
        self.out[at..at + 4].copy_from_slice(&(self.rows as u32).to_le_bytes());
        Ok(())
    }
}

impl Drop for RowBatchWriter<'_> {
    fn drop(&mut self) {
        if let Some(row) = self.open.take() {
            self.out.truncate(row.start);
        }
    }
}

/// The bytes of a row batch of `rows` rows whose values and key values
/// take `row_bytes` in all (the header and each row's frame added), at
/// most [`BATCH_BYTES_MAX`]: what a writer's buffer is sized to at once.
pub fn row_batch_bytes(rows: usize, row_bytes: usize) -> usize {
    let frames = rows.saturating_mul(crate::value::ROW_FRAME_BYTES);
    (ROW_BATCH_HEADER_BYTES + frames)
        .saturating_add(row_bytes)
        .min(BATCH_BYTES_MAX)
}

/// A batch of scanned rows, validated whole (`new`: its rows' `values`
/// and `keys` then read without failing) or by frame (`framed`: read them
/// with `try_values` and `try_keys`).
#[derive(Clone, Copy, Debug)]
pub struct RowBatchReader<'a> {
    rows: &'a [u8],
    count: usize,
}

impl<'a> RowBatchReader<'a> {
    /// Validates the whole batch; afterwards nothing read from it can fail.
    pub fn new(bytes: &'a [u8]) -> Result<RowBatchReader<'a>, ProtoError> {
        RowBatchReader::read(bytes, Check::Values)
    }

    /// Checks the batch's frame only (header, counts, and each row's byte
    /// lengths against the bytes present), not its values: for a reader
    /// that decodes every value once anyway, with [`RowParts::try_values`]
    /// and [`RowParts::try_keys`], which check them as they decode. `new`
    /// and then decoding checked every string's UTF-8 twice (4 % of the SQL
    /// node's instructions under sysbench oltp_read_write).
    pub fn framed(bytes: &'a [u8]) -> Result<RowBatchReader<'a>, ProtoError> {
        RowBatchReader::read(bytes, Check::Frame)
    }

    fn read(bytes: &'a [u8], check: Check) -> Result<RowBatchReader<'a>, ProtoError> {
        let mut r = Reader::new(bytes, "row batch");
        r.limit("batch bytes", bytes.len(), BATCH_BYTES_MAX)?;
        r.header(ROW_BATCH_MAGIC, ROW_BATCH_FORMAT_VERSION)?;
        let count = r.u32()? as usize;
        r.limit("row count", count, ROWS_PER_BATCH_MAX)?;
        for _ in 0..count {
            get_row(&mut r, check)?;
        }
        r.finish()?;
        Ok(RowBatchReader {
            rows: &bytes[ROW_BATCH_HEADER_BYTES..],
            count,
        })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> RowIter<'a> {
        RowIter {
            r: Reader::new(self.rows, "row batch"),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for &RowBatchReader<'a> {
    type Item = RowView<'a>;
    type IntoIter = RowIter<'a>;
    fn into_iter(self) -> RowIter<'a> {
        self.iter()
    }
}

/// The rows of a validated batch.
pub struct RowIter<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for RowIter<'a> {
    type Item = RowView<'a>;

    fn next(&mut self) -> Option<RowView<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        validated(get_row(&mut self.r, Check::Frame))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// One scanned row, borrowing the batch.
pub type RowView<'a> = RowParts<'a>;
