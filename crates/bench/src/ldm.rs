//! `skarv bench ldm`: the storage of one LDM instance, in-process, on rows of
//! 100 bytes (25 `INT UNSIGNED NOT NULL` columns, the first the primary
//! key), as flexAsynch's default rows are. It measures what one LDM thread
//! does without the network or the transaction coordinator in the way:
//!
//! - inserts, in transactions of [`INSERT_BATCH_ROWS`] rows, each committed
//!   with its redo records built (the records go to a sink that keeps only
//!   their size: the bench measures the LDM's work, not the disk);
//! - committed primary-key lookups of random keys (uniform over all rows),
//!   in batches of [`LdmBenchOptions::batch`] keys through
//!   `Fragment::read_batch` (the path the transaction coordinator's batches
//!   take: `lookup_per_s`), and one at a time through `Fragment::read`
//!   (`lookup_single_per_s`). The keys are drawn before the timed part, in
//!   chunks of about [`LOOKUP_KEYS_CHUNK`] (warm in cache, as a batch that
//!   just arrived in a signal is); the timed part is the reads and a
//!   checksum of a column of every row image they produce, which must
//!   equal the one computed from the keys (`lookup_checksum`);
//! - an ordered scan of every row through an ordered index on the key;
//! - memory: `DataMemory` bytes (row store and hash index) per row, against
//!   the raw 100 bytes of the row; and the page pool's mapped bytes (whole
//!   2 MiB slabs, so the rounding shows). The ordered index is reported
//!   apart.

use std::time::{Duration, Instant};

use schema::{Column, ColumnType, IndexDef, IndexKind, TableDef, Value, ValueRef};
use serde::Serialize;
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadBatch, ReadMode, RedoNeed, RedoSink, RowBuf, ScanBatch,
    ScanCursor, ScanProgress, ScanRange, ScanSpec, READ_BATCH_KEYS_MAX,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::ordered_index::Direction;
use storage::redo::RedoError;
use storage::Gci;

/// Columns of a bench row: 25 four-byte integers, 100 bytes of data.
pub const COLUMNS: usize = 25;
/// The raw size of a bench row, what `bytes_per_row` is compared with.
pub const RAW_ROW_BYTES: u64 = 4 * COLUMNS as u64;
/// Rows per insert transaction.
pub const INSERT_BATCH_ROWS: u64 = 1000;
/// Rows per scan batch.
pub const SCAN_BATCH_ROWS: usize = 1000;
/// Lookups measured at most, of each kind (a random sample of the keys).
pub const LOOKUPS_MAX: u64 = 10_000_000;
/// Keys per batched lookup when none is asked for.
pub const LOOKUP_BATCH_KEYS_DEFAULT: usize = 64;
/// Keys drawn at a time before they are looked up (rounded down to whole
/// batches, at least one).
pub const LOOKUP_KEYS_CHUNK: usize = 4096;
/// The column whose values the lookup checksum adds up (the last: a row
/// image must be there to its end).
const CHECKSUM_COLUMN: usize = COLUMNS - 1;

/// What to run.
#[derive(Clone, Debug)]
pub struct LdmBenchOptions {
    pub rows: u64,
    /// `DataMemory` of the instance; by default twice what the rows need.
    pub data_memory_bytes: Option<u64>,
    pub seed: u64,
    /// Keys per batched lookup, 1 to `READ_BATCH_KEYS_MAX`.
    pub batch: usize,
}

/// The results, as `--json` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct LdmBenchReport {
    pub rows: u64,
    pub raw_row_bytes: u64,
    pub insert_per_s: f64,
    /// Batched committed lookups (`lookup_batch` keys per call).
    pub lookup_per_s: f64,
    /// Committed lookups one at a time.
    pub lookup_single_per_s: f64,
    /// Lookups of each kind.
    pub lookups: u64,
    /// Sum of the last column of every row image the batched lookups
    /// produced, equal to the sum computed from their keys (the bench
    /// fails otherwise; single lookups are checked the same way).
    pub lookup_checksum: u64,
    pub lookup_batch: usize,
    pub scan_rows_per_s: f64,
    /// Row store and hash index bytes per row.
    pub bytes_per_row: f64,
    /// `bytes_per_row / raw_row_bytes` (goal ≤ 1.2).
    pub memory_ratio: f64,
    /// Bytes the page pool has mapped: whole 2 MiB slabs as pages were
    /// first needed (all of them touched, so held), the last one cut at
    /// the budget.
    pub pool_mapped_bytes: u64,
    /// `pool_mapped_bytes / rows`: what the rows cost the machine.
    pub mapped_bytes_per_row: f64,
    pub ordered_index_bytes_per_row: f64,
    pub redo_bytes_per_row: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("bench table: {0}")]
    Schema(String),
    #[error("{0}")]
    Fragment(#[from] FragmentError),
    #[error("bench options: {0}")]
    Options(String),
    #[error("bench check failed: {0}")]
    Check(String),
}

/// Keeps only the size of the redo records a commit makes.
#[derive(Default)]
struct CountingSink {
    bytes: u64,
}

impl RedoSink for CountingSink {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, _gci: Gci, record: &[u8]) -> Result<(), RedoError> {
        self.bytes += record.len() as u64;
        Ok(())
    }
}

/// The bench table: `c0` … `c24`, key `c0`, ordered index `by_c0`.
pub fn bench_table() -> Result<TableDef, BenchError> {
    let columns = (0..COLUMNS)
        .map(|i| Column::new(format!("c{i}"), ColumnType::Int { unsigned: true }))
        .collect();
    TableDef::new("bench", 1, columns)
        .primary_key(vec![0])
        .index(IndexDef {
            name: "by_c0".to_owned(),
            id: 1,
            columns: vec![0],
            kind: IndexKind::Ordered,
        })
        .build()
        .map_err(|e| BenchError::Schema(e.to_string()))
}

/// Spreads keys over the u32 space so that key order is not insert order.
fn key_of(i: u64) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B1)
}

fn fill_row(values: &mut [Value], i: u64) {
    let key = key_of(i);
    values[0] = Value::UInt(u64::from(key));
    for (c, value) in values.iter_mut().enumerate().skip(1) {
        *value = Value::UInt(u64::from(key ^ c as u32));
    }
}

fn per_second(count: u64, started: Instant) -> f64 {
    count as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

/// The next random row number below `rows` (xorshift: cheap enough not to
/// be what is measured).
fn next_row(random: &mut u64, rows: u64) -> u64 {
    *random ^= *random << 13;
    *random ^= *random >> 7;
    *random ^= *random << 17;
    *random % rows
}

/// Runs the bench; the figures depend on the machine, the checks do not.
pub fn run(options: &LdmBenchOptions) -> Result<LdmBenchReport, BenchError> {
    assert!(options.rows > 0, "the bench needs at least one row");
    if !(1..=READ_BATCH_KEYS_MAX).contains(&options.batch) {
        return Err(BenchError::Options(format!(
            "a lookup batch has 1 to {READ_BATCH_KEYS_MAX} keys, not {}",
            options.batch
        )));
    }
    let table = bench_table()?;
    let budget = options
        .data_memory_bytes
        .unwrap_or_else(|| (options.rows * 2 * 120).max(64 << 20));
    let mut pool = PagePool::with_budget_bytes(budget);
    let mut fragment = Fragment::new(&table, 0);
    let mut sink = CountingSink::default();
    let mut grants: Vec<Grant> = Vec::new();
    let mut values = vec![Value::UInt(0); COLUMNS];

    let started = Instant::now();
    let mut tx = 0u64;
    let mut i = 0u64;
    while i < options.rows {
        tx += 1;
        let end = (i + INSERT_BATCH_ROWS).min(options.rows);
        for (op, row) in (i..end).enumerate() {
            fill_row(&mut values, row);
            let outcome = fragment.insert(&mut pool, TxId(tx), OpId(op as u32), &values)?;
            if outcome != Outcome::Done {
                return Err(BenchError::Check(format!(
                    "insert of row {row}: {outcome:?}"
                )));
            }
        }
        fragment.commit(&mut pool, TxId(tx), 1, &mut sink, &mut grants)?;
        i = end;
    }
    let insert_per_s = per_second(options.rows, started);

    let lookups = options.rows.min(LOOKUPS_MAX);
    let (lookup_per_s, lookup_checksum) = lookup_batched(&fragment, &pool, options, lookups)?;
    let lookup_single_per_s = lookup_single(&mut fragment, &pool, options, lookups)?;

    let spec = ScanSpec {
        range: ScanRange::Ordered {
            index_id: 1,
            lower: std::ops::Bound::Unbounded,
            upper: std::ops::Bound::Unbounded,
            direction: Direction::Ascending,
        },
        columns: (0..COLUMNS).collect(),
    };
    let mut cursor = ScanCursor::new();
    let mut batch = ScanBatch::new();
    let mut scanned = 0u64;
    let started = Instant::now();
    loop {
        let progress = fragment.scan(&pool, &spec, &mut cursor, SCAN_BATCH_ROWS, &mut batch)?;
        scanned += batch.len() as u64;
        if progress == ScanProgress::Done {
            break;
        }
    }
    let scan_rows_per_s = per_second(scanned, started);
    if scanned != options.rows {
        return Err(BenchError::Check(format!(
            "the ordered scan saw {scanned} rows of {}",
            options.rows
        )));
    }

    let rows = options.rows;
    let data_bytes = fragment.data_memory_bytes();
    let ordered_bytes = fragment.memory_bytes().saturating_sub(data_bytes);
    let bytes_per_row = data_bytes as f64 / rows as f64;
    let pool_mapped_bytes = pool.mapped_bytes();
    Ok(LdmBenchReport {
        rows,
        raw_row_bytes: RAW_ROW_BYTES,
        insert_per_s,
        lookup_per_s,
        lookup_single_per_s,
        lookups,
        lookup_checksum,
        lookup_batch: options.batch,
        scan_rows_per_s,
        bytes_per_row,
        memory_ratio: bytes_per_row / RAW_ROW_BYTES as f64,
        pool_mapped_bytes,
        mapped_bytes_per_row: pool_mapped_bytes as f64 / rows as f64,
        ordered_index_bytes_per_row: ordered_bytes as f64 / rows as f64,
        redo_bytes_per_row: sink.bytes as f64 / rows as f64,
    })
}

/// What [`CHECKSUM_COLUMN`] holds in the row of `key` (see `fill_row`).
fn checksum_value(key: u32) -> u64 {
    u64::from(key ^ CHECKSUM_COLUMN as u32)
}

/// The checksum column of a row image, or an error naming the key.
fn checksum_of(value: Option<ValueRef<'_>>, key: &Value) -> Result<u64, BenchError> {
    match value {
        Some(ValueRef::UInt(v)) => Ok(v),
        other => Err(BenchError::Check(format!(
            "lookup of key {key:?}: column {CHECKSUM_COLUMN} is {other:?}"
        ))),
    }
}

/// Draws the next `keys.len()` random existing keys (uniform over the
/// rows); returns what their rows' checksum column adds up to.
fn draw_keys(keys: &mut [Value], random: &mut u64, rows: u64) -> u64 {
    let mut expected = 0u64;
    for key in keys {
        let k = key_of(next_row(random, rows));
        *key = Value::UInt(u64::from(k));
        expected = expected.wrapping_add(checksum_value(k));
    }
    expected
}

/// `lookups` committed reads of random keys, `options.batch` per
/// `read_batch`: lookups per second and the checksum of the row images.
fn lookup_batched(
    fragment: &Fragment,
    pool: &PagePool,
    options: &LdmBenchOptions,
    lookups: u64,
) -> Result<(f64, u64), BenchError> {
    let mut out = ReadBatch::new();
    let chunk = (LOOKUP_KEYS_CHUNK / options.batch).max(1) * options.batch;
    let mut keys = vec![Value::UInt(0); chunk];
    let mut random = options.seed | 1;
    let layout = fragment.layout();
    let (mut expected, mut checksum) = (0u64, 0u64);
    let mut timed = Duration::ZERO;
    let mut done = 0u64;
    while done < lookups {
        let keys = &mut keys[..(lookups - done).min(chunk as u64) as usize];
        expected = expected.wrapping_add(draw_keys(keys, &mut random, options.rows));
        let started = Instant::now();
        for batch in keys.chunks(options.batch) {
            fragment.read_batch(pool, batch, &mut out)?;
            for (i, key) in batch.iter().enumerate() {
                let value = out.value(layout, i, CHECKSUM_COLUMN);
                checksum = checksum.wrapping_add(checksum_of(value, key)?);
            }
        }
        timed += started.elapsed();
        done += keys.len() as u64;
    }
    if checksum != expected {
        return Err(BenchError::Check(format!(
            "batched lookups: row images sum to {checksum}, the keys' rows to {expected}"
        )));
    }
    Ok((lookups as f64 / timed.as_secs_f64().max(1e-9), checksum))
}

/// `lookups` committed reads of random keys one by one (another sample
/// than the batched run's, so that it finds no lines that run left in
/// cache), their row images checked by checksum; lookups per second.
fn lookup_single(
    fragment: &mut Fragment,
    pool: &PagePool,
    options: &LdmBenchOptions,
    lookups: u64,
) -> Result<f64, BenchError> {
    let mut out = RowBuf::new();
    let mut keys = vec![Value::UInt(0); LOOKUP_KEYS_CHUNK];
    let mut random = options.seed.wrapping_add(0x5EED) | 1;
    let (mut expected, mut checksum) = (0u64, 0u64);
    let mut timed = Duration::ZERO;
    let mut done = 0u64;
    while done < lookups {
        let keys = &mut keys[..(lookups - done).min(LOOKUP_KEYS_CHUNK as u64) as usize];
        expected = expected.wrapping_add(draw_keys(keys, &mut random, options.rows));
        let started = Instant::now();
        for key in keys.chunks(1) {
            let outcome = fragment.read(pool, key, ReadMode::Committed, &mut out)?;
            let value =
                (outcome == Outcome::Done).then(|| out.value(fragment.layout(), CHECKSUM_COLUMN));
            checksum = checksum.wrapping_add(checksum_of(value, &key[0])?);
        }
        timed += started.elapsed();
        done += keys.len() as u64;
    }
    if checksum != expected {
        return Err(BenchError::Check(format!(
            "single lookups: row images sum to {checksum}, the keys' rows to {expected}"
        )));
    }
    Ok(lookups as f64 / timed.as_secs_f64().max(1e-9))
}

/// The human-readable form of a report.
pub fn render(report: &LdmBenchReport) -> String {
    format!(
        "skarv bench ldm: {rows} rows of {raw} bytes, one LDM instance in-process\n\
         insert          {insert:>14.0} rows/s  (transactions of {batch}, redo records built)\n\
         pk lookup       {lookup:>14.0} /s      ({lookups} random committed reads, batches of {lookup_batch})\n\
         pk lookup 1-by-1{single:>14.0} /s      ({lookups} random committed reads, one at a time)\n\
         lookup checksum {checksum:>14}         (last column of every batched row image, as the keys say)\n\
         ordered scan    {scan:>14.0} rows/s\n\
         memory          {bpr:>14.1} bytes/row = {ratio:.2} x raw (row store + hash index; goal <= 1.20)\n\
         pool mapped     {mbpr:>14.1} bytes/row ({mapped} bytes in 2 MiB slabs)\n\
         ordered index   {obpr:>14.1} bytes/row\n\
         redo            {rbpr:>14.1} bytes/row\n",
        rows = report.rows,
        raw = report.raw_row_bytes,
        insert = report.insert_per_s,
        batch = INSERT_BATCH_ROWS,
        lookup = report.lookup_per_s,
        lookups = report.lookups,
        lookup_batch = report.lookup_batch,
        single = report.lookup_single_per_s,
        checksum = report.lookup_checksum,
        mbpr = report.mapped_bytes_per_row,
        mapped = report.pool_mapped_bytes,
        scan = report.scan_rows_per_s,
        bpr = report.bytes_per_row,
        ratio = report.memory_ratio,
        obpr = report.ordered_index_bytes_per_row,
        rbpr = report.redo_bytes_per_row,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_checks_every_row_and_reports_memory() {
        let report = run(&LdmBenchOptions {
            rows: 20_000,
            data_memory_bytes: None,
            seed: 7,
            batch: 64,
        })
        .unwrap();
        assert_eq!(report.rows, 20_000);
        assert_eq!(report.lookups, 20_000);
        assert_ne!(report.lookup_checksum, 0, "{report:?}");
        // Memory is deterministic: the rows and their index, plus partly
        // filled last pages at this small size.
        assert!(
            report.bytes_per_row > 100.0 && report.bytes_per_row < 140.0,
            "{report:?}"
        );
        assert!(report.redo_bytes_per_row > 100.0, "{report:?}");
        let json = serde_json::to_value(&report).unwrap();
        assert!(
            report.mapped_bytes_per_row >= report.bytes_per_row,
            "the pool maps at least what the rows use: {report:?}"
        );
        for field in [
            "insert_per_s",
            "lookup_per_s",
            "lookup_single_per_s",
            "scan_rows_per_s",
            "bytes_per_row",
            "mapped_bytes_per_row",
        ] {
            assert!(json[field].as_f64().unwrap() > 0.0, "{field} in {json}");
        }
    }

    #[test]
    fn a_batch_outside_the_limits_is_refused() {
        for batch in [0, READ_BATCH_KEYS_MAX + 1] {
            let error = run(&LdmBenchOptions {
                rows: 10,
                data_memory_bytes: None,
                seed: 7,
                batch,
            })
            .unwrap_err();
            assert!(error.to_string().contains("lookup batch"), "{error}");
        }
    }

    #[test]
    fn too_little_data_memory_is_a_clear_error() {
        let error = run(&LdmBenchOptions {
            rows: 20_000,
            data_memory_bytes: Some(1 << 20),
            seed: 7,
            batch: 64,
        })
        .unwrap_err();
        assert!(
            error.to_string().contains("DataMemory exhausted"),
            "{error}"
        );
    }
}
