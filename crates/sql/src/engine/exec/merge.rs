//! An ordered index read over several partitions with its rows in index
//! order: one scan per partition, their rows merged (NDB's ordered index
//! scan, whose API merges the fragments' sorted streams).
//!
//! Each partition gives its rows in the index's order (`Access::Range`
//! read in order: `plan::index_order`), so the smallest row not yet
//! taken is at the head of one of them: the merge keeps each partition's
//! head, sorted, and takes the smallest, then that partition's next. An
//! `ORDER BY k LIMIT n` then reads about n rows in all, plus one batch
//! per partition, where reading the table and sorting it read every row
//! (`ORDER BY id LIMIT 10000, 10` on 50,000 rows), and reading each
//! partition's first n read n per partition, one partition after the
//! other.
//!
//! A transaction runs one scan at a time, so each partition's scan runs in
//! a transaction of its own: a committed read, which a statement's own
//! transaction would read no differently (only reads without locks, by a
//! transaction with nothing to flush, come here). Each ends its
//! transaction with its last batch (`ScanOptions::ends_transaction`), and
//! scans left before their end are closed together (`close_scans`).

use std::cmp::Ordering;
use std::sync::Arc;

use schema::Collation;
use skarv_client::{Filter, ScanIter, ScanOptions, Session, Transaction};

use super::super::catalog::{SqlType, TableInfo};
use super::super::expr::{Ctx, Expr, Val};
use super::super::plan::Access;
use super::super::txn;
use super::select::order_cmp;
use super::sql_row_of;
use crate::error::SqlResult;

/// Most partitions one merged read scans at once: each is a scan (and a
/// transaction) of its own at a TC, whose scan records are bounded
/// (`MaxNoOfConcurrentScans`, 256 per TC instance by default), where an
/// unmerged read is one scan. A read of more partitions reads them in one
/// scan and sorts instead.
pub(crate) const MERGE_PARTITIONS_MAX: usize = 64;

/// A partition's next row, and the partition's place in the merge.
type Head = (Vec<Val>, usize);

/// Rows each partition's batch holds beyond its share of the LIMIT: a
/// partition holding a little more than its share costs no second round
/// trip.
const MERGE_BATCH_SLACK_ROWS: usize = 8;

/// What a merged read reads: the table, its ordered index range, and how
/// its rows compare.
pub(crate) struct MergedRead<'a> {
    pub table: &'a Arc<TableInfo>,
    /// A range of an ordered index (`Access::Range`, no points).
    pub access: &'a Access,
    pub filter: Option<Filter>,
    pub descending: bool,
    /// The condition rows must pass, tested here unless the filter was
    /// all of it (`plan::pushed_exactly`).
    pub cond: Option<&'a Expr>,
    /// The partitions to read, each once.
    pub partitions: Vec<u32>,
    /// The columns (positions in the row) by which the index orders a
    /// partition's rows, one after the other (`plan::index_order`); each
    /// row read must hold them.
    pub keys: Vec<usize>,
    pub columns: Option<&'a [&'a str]>,
    /// Rows the caller takes at most (OFFSET and LIMIT), if it knows.
    pub stop_after: Option<usize>,
    /// Each partition's distinct scan of the index's first columns
    /// (`ScanOptions::distinct_prefix`); 0: every row.
    pub distinct_prefix: u8,
}

impl<'a> MergedRead<'a> {
    /// A read of `access` (descending or not) merged over `partitions`
    /// by `keys` (`select::merged_partitions`' answer): every row of the
    /// range, every column, until the caller's fields say otherwise.
    pub fn along(
        table: &'a Arc<TableInfo>,
        access: &'a Access,
        descending: bool,
        (partitions, keys): (Vec<u32>, Vec<usize>),
    ) -> MergedRead<'a> {
        MergedRead {
            table,
            access,
            filter: None,
            descending,
            cond: None,
            partitions,
            keys,
            columns: None,
            stop_after: None,
            distinct_prefix: 0,
        }
    }
}

/// A partition's share of the rows to take, with room for partitions that
/// hold more than their share: a quarter more and `MERGE_BATCH_SLACK_ROWS`.
fn with_slack(share: usize) -> usize {
    share + share / 4 + MERGE_BATCH_SLACK_ROWS
}

/// The columns by which `access`'s ordered index orders a partition's
/// rows when read in `order` (`plan::index_order`), if the merge can
/// compare rows by them: not when one is an ENUM or SET, which the index
/// orders by its number and the SQL node's comparison by its text.
pub(crate) fn merge_keys(
    table: &TableInfo,
    order: &[(Expr, bool)],
    access: &Access,
) -> Option<Vec<usize>> {
    let keys = super::super::plan::index_order(table, order, access)?;
    let by_number = |c: &usize| {
        matches!(
            table.columns.get(*c).map(|col| &col.ty),
            Some(SqlType::Enum(_) | SqlType::Set(_))
        )
    };
    (!keys.iter().any(by_number)).then_some(keys)
}

/// Scan batch for each of `partitions` partitions when `stop_after` rows
/// are taken at most: a little more than each partition's share, or
/// the default batch when the whole range is read.
fn batch_rows(stop_after: Option<usize>, partitions: usize) -> u32 {
    match stop_after {
        None => skarv_client::SCAN_BATCH_ROWS_DEFAULT,
        Some(n) => {
            let rows = with_slack(n.div_ceil(partitions.max(1))).min(n.max(1));
            u32::try_from(rows)
                .unwrap_or(u32::MAX)
                .clamp(1, proto::scan::SCAN_BATCH_ROWS_MAX)
        }
    }
}

/// Reads `read`'s range of every partition named, handing `each` its rows
/// in the index's order (descending when asked) until `each` answers
/// false or the rows run out.
pub(crate) fn merged_each<'c>(
    session: &Session,
    read: MergedRead<'_>,
    ctx: &mut Ctx<'c>,
    mut each: impl FnMut(Vec<Val>, &mut Ctx<'c>) -> SqlResult<bool>,
) -> SqlResult<()> {
    merged_each_of(session, vec![read], ctx, |_, row, ctx| each(row, ctx))
}

/// [`merged_each`] of several reads, every partition's first batch of
/// each asked for before any is waited for (one round trip for all: the
/// MIN and the MAX of one statement), then merged one read after the
/// other; `each` is told which read a row is of.
pub(crate) fn merged_each_of<'c>(
    session: &Session,
    reads: Vec<MergedRead<'_>>,
    ctx: &mut Ctx<'c>,
    mut each: impl FnMut(usize, Vec<Val>, &mut Ctx<'c>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let mut opened = Vec::with_capacity(reads.len());
    for read in &reads {
        opened.push(open(session, read, ctx)?);
    }
    let error = |table: &TableInfo| {
        let name = table.name.clone();
        move |e: skarv_client::Error| txn::native_error_in(&e, &name)
    };
    let txs: Vec<Vec<Transaction<'_>>> = reads
        .iter()
        .map(|read| {
            read.partitions
                .iter()
                .map(|_| session.begin().map_err(error(read.table)))
                .collect::<SqlResult<Vec<_>>>()
        })
        .collect::<SqlResult<_>>()?;
    // Every partition's first batch of every read is asked for before
    // any is waited for.
    let mut scans: Vec<Vec<ScanIter<'_, '_>>> = Vec::with_capacity(reads.len());
    for ((read, open), txs) in reads.iter().zip(&opened).zip(&txs) {
        let mut these = Vec::with_capacity(read.partitions.len());
        for (tx, part) in txs.iter().zip(&read.partitions) {
            let options = ScanOptions {
                partition: Some(*part),
                ..open.options.clone()
            };
            these.push(
                tx.scan(&read.table.native, options)
                    .map_err(error(read.table))?,
            );
        }
        scans.push(these);
    }
    let mut result = Ok(());
    for (at, ((read, open), these)) in reads.iter().zip(&opened).zip(&mut scans).enumerate() {
        if result.is_ok() {
            let cmp = |a: &Head, b: &Head| open.compare(a, b);
            result = merge(
                these,
                read.table,
                open.recheck,
                open.shape,
                &cmp,
                ctx,
                &mut |row, ctx| each(at, row, ctx),
            );
        }
    }
    for these in scans {
        skarv_client::close_scans(these);
    }
    drop(txs);
    result
}

/// What [`merged_each_of`] made of a read before its scans open.
struct Opened<'r> {
    options: ScanOptions<'r>,
    recheck: Option<&'r Expr>,
    keys: Vec<usize>,
    collations: Vec<Option<Collation>>,
    descending: bool,
    shape: Shape,
}

impl Opened<'_> {
    /// Two rows in the order the merge gives them; equal keys (a table
    /// without a primary key of its own) by partition, as reading the
    /// partitions one after the other and sorting stably would.
    fn compare(&self, a: &Head, b: &Head) -> Ordering {
        for (c, coll) in self.keys.iter().zip(&self.collations) {
            let o = order_cmp(&a.0[*c], &b.0[*c], *coll);
            if o != Ordering::Equal {
                return if self.descending { o.reverse() } else { o };
            }
        }
        a.1.cmp(&b.1)
    }
}

/// A read's scan options, recheck and order; counts its scan.
fn open<'r>(session: &Session, read: &MergedRead<'r>, ctx: &mut Ctx<'_>) -> SqlResult<Opened<'r>> {
    let table: &'r Arc<TableInfo> = read.table;
    let access: &'r Access = read.access;
    let Access::Range {
        index,
        lower,
        upper,
        points,
        ..
    } = access
    else {
        unreachable!("a merged read reads a range of an ordered index");
    };
    debug_assert!(points.is_empty(), "a merged read's range is one range");
    let recheck = super::recheck_of(table, access, read.filter.as_ref(), read.cond, ctx)?;
    let collations: Vec<Option<Collation>> = read
        .keys
        .iter()
        .map(|c| table.columns[*c].ty.collation())
        .collect();
    // The rows compared must hold every column the index orders by,
    // even those the statement does not name (an index of (a, b) read
    // for ORDER BY a: rows equal in a come by b).
    let mut projection = read.columns.map(<[&str]>::to_vec);
    if let Some(names) = &mut projection {
        let def = table.native.def();
        for c in &read.keys {
            let name = table
                .columns
                .get(*c)
                .and_then(|col| def.columns.get(col.native));
            if let Some(name) = name.map(|n| n.name.as_str()) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    let batch = batch_rows(read.stop_after, read.partitions.len());
    let options = ScanOptions {
        index: Some(index.as_str()),
        lower: lower.clone(),
        upper: upper.clone(),
        descending: read.descending,
        filter: read.filter.clone(),
        projection,
        batch_rows: batch,
        ends_transaction: true,
        uncounted: true,
        distinct_prefix: read.distinct_prefix,
        ..ScanOptions::default()
    };
    // One range scan, as NDB counts an ordered scan of every fragment;
    // pruned when the condition named fewer partitions than the table's.
    session.count_scan(read.partitions.len() < table.native.def().partitions as usize);
    Ok(Opened {
        options,
        recheck,
        keys: read.keys.clone(),
        collations,
        descending: read.descending,
        shape: Shape {
            batch: batch as usize,
            stop_after: read.stop_after,
        },
    })
}

/// How a merge's scans read: rows per batch, and rows taken at most.
#[derive(Clone, Copy)]
struct Shape {
    batch: usize,
    stop_after: Option<usize>,
}

impl Shape {
    /// Rows a partition should hold so that its next batch need not be
    /// asked for yet, once `taken` rows were taken from `live` partitions
    /// that still have rows: half a batch, or a little more than its share
    /// of the rows still to take when that is less (asked for earlier, a
    /// batch would come that the LIMIT never takes).
    fn enough(self, taken: usize, live: usize) -> usize {
        let half = self.batch / 2;
        match self.stop_after {
            None => half,
            Some(n) => half.min(with_slack(n.saturating_sub(taken).div_ceil(live.max(1)))),
        }
    }
}

/// The merge of [`merged_each`] over its open scans.
fn merge<'c>(
    scans: &mut [ScanIter<'_, '_>],
    table: &TableInfo,
    recheck: Option<&Expr>,
    shape: Shape,
    cmp: &dyn Fn(&Head, &Head) -> Ordering,
    ctx: &mut Ctx<'c>,
    each: &mut dyn FnMut(Vec<Val>, &mut Ctx<'c>) -> SqlResult<bool>,
) -> SqlResult<()> {
    // Each partition's head, the smallest last.
    let mut heads: Vec<Head> = Vec::with_capacity(scans.len());
    let insert = |heads: &mut Vec<Head>, head: Head| {
        let at = heads.partition_point(|h| cmp(h, &head) == Ordering::Greater);
        heads.insert(at, head);
    };
    let all = scans.len();
    for (at, scan) in scans.iter_mut().enumerate() {
        let enough = shape.enough(0, all);
        if let Some(row) = next_row(scan, table, recheck, enough, ctx)? {
            insert(&mut heads, (row, at));
        }
    }
    let mut taken = 0usize;
    while let Some((row, at)) = heads.pop() {
        // Relied on: each partition's rows come in the index's order, so
        // its next row is never before the one taken.
        #[cfg(debug_assertions)]
        let previous = (row.clone(), at);
        if !each(row, ctx)? {
            break;
        }
        taken += 1;
        let enough = shape.enough(taken, heads.len() + 1);
        if let Some(following) = next_row(&mut scans[at], table, recheck, enough, ctx)? {
            let following = (following, at);
            #[cfg(debug_assertions)]
            debug_assert!(
                cmp(&previous, &following).is_le(),
                "partition {at} of {} out of its index's order",
                table.name
            );
            insert(&mut heads, following);
        }
    }
    Ok(())
}

/// A partition's next row that passes the condition; the partition's
/// next batch is asked for once it holds fewer than `enough` rows.
fn next_row(
    scan: &mut ScanIter<'_, '_>,
    table: &TableInfo,
    recheck: Option<&Expr>,
    enough: usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Val>>> {
    let error = |e: skarv_client::Error| txn::native_error_in(&e, &table.name);
    while let Some(r) = scan.next() {
        let r = r.map_err(error)?;
        ctx.check_killed()?;
        // The next batch travels while the rest of this one is merged.
        if scan.buffered() < enough {
            scan.prefetch().map_err(error)?;
        }
        let row = sql_row_of(table, &r, ctx.env.tz_secs);
        if let Some(c) = recheck {
            if !c.test(&row, ctx)? {
                continue;
            }
        }
        return Ok(Some(row));
    }
    Ok(None)
}
