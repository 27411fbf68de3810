//! Deep pages: `SELECT * FROM orders ORDER BY id LIMIT 10 OFFSET 10000`
//! reads the rows before its page only to count them. Merged along the
//! index with every column, each of them is sent by the data nodes and
//! made a row here; read with only what places them (the index's order
//! columns, the primary key, the WHERE's columns) they cost a fraction of
//! that, and the page's rows are then read whole by their primary keys,
//! one batch (a late row lookup).

use schema::Value;

use super::{
    assigns_user_vars, clone_planned, drop_planned, group_key, merged_partitions, order_by_index,
    plan_mark, projection, reads_its_table_alone, shape, single_access, Planned,
};
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::exec::{columns_used, fetch, merge};
use crate::engine::expr::{Ctx, Val};
use crate::engine::plan::{self, Access};
use crate::error::SqlResult;

/// OFFSET from which a page's place is found with the narrow rows: below
/// it the rows before the page cost too little to gain from it.
const LATE_ROWS_OFFSET_MIN: u64 = 1_000;

/// LIMIT up to which the page's rows are read by key (one batch of key
/// reads); a longer page is read as before.
const LATE_ROWS_LIMIT_MAX: u64 = 1_000;

/// How many times the bytes of the columns that place a row (see
/// [`placing_columns`]) the page's columns must be, estimated from their
/// types, for a late row lookup: `bench/queries-compare.sh` (2 × 2,
/// 50,000 orders) read `SELECT * … ORDER BY id LIMIT 10000, 10` (about
/// 37 bytes a row against the key's 8) in 3.29 ms late against 6.81 ms
/// as before, but `SELECT id, customer_id …` (twice the key) in 3.96 ms
/// against 3.21 ms (a round trip more for little).
const LATE_ROWS_WIDTH_RATIO: usize = 3;

/// Whether `p` asks for a page deep enough, of rows wide enough, for
/// [`late_rows`] to try (it is then answered whole, not streamed: the
/// page is a few rows).
pub(super) fn deep_page(p: &Planned) -> bool {
    let deep = p.join.is_none()
        && !p.order.is_empty()
        && p.offset >= LATE_ROWS_OFFSET_MIN
        && p.limit
            .is_some_and(|l| (1..=LATE_ROWS_LIMIT_MAX).contains(&l));
    let Some(table) = p.table.as_deref().filter(|_| deep) else {
        return false;
    };
    let Some(placing) = placing_columns(table, p, &[]) else {
        return false;
    };
    let def = table.native.def();
    let page = match projection(table, p) {
        None => vec![true; table.columns.len()],
        Some(names) => table
            .columns
            .iter()
            .map(|c| {
                def.columns
                    .get(c.native)
                    .is_some_and(|n| names.contains(&n.name.as_str()))
            })
            .collect(),
    };
    row_bytes(table, &page) >= LATE_ROWS_WIDTH_RATIO * row_bytes(table, &placing)
}

/// The columns (a mark per SQL column) that place a row of `p` in its
/// order: the primary key's, ORDER BY's, the WHERE's and `more` (the
/// merge's order columns); None when one is no column of the table.
fn placing_columns(table: &TableInfo, p: &Planned, more: &[usize]) -> Option<Vec<bool>> {
    let mut placing: Vec<usize> = table.primary_key_columns().collect();
    placing.extend(more);
    for (e, _) in &p.order {
        plan::join::columns(e, &mut placing);
    }
    if let Some(c) = &p.cond {
        plan::join::columns(c, &mut placing);
    }
    let mut used = vec![false; table.columns.len()];
    for c in placing {
        *used.get_mut(c)? = true;
    }
    Some(used)
}

/// A row's bytes estimated from the types of the columns marked in
/// `used`: 8 for a number or time, a CHAR's length, half a VARCHAR's
/// (values seldom fill it), 256 for a TEXT or BLOB.
fn row_bytes(table: &TableInfo, used: &[bool]) -> usize {
    table
        .columns
        .iter()
        .zip(used)
        .filter(|(_, u)| **u)
        .map(|(c, _)| match c.ty {
            SqlType::Char { length, .. } | SqlType::Binary { length } => usize::from(length),
            SqlType::VarChar { max, .. } | SqlType::VarBinary { max } => usize::from(max / 2),
            SqlType::Text { .. } | SqlType::Blob { .. } => 256,
            _ => 8,
        })
        .sum()
}

/// The rows of `p`, a page deep in the order an ordered index gives over
/// several partitions, by a late row lookup (see the module doc); None
/// (read as before) for any other query: a join, grouping, DISTINCT, a
/// window, a lock, writes to flush, an OFFSET under
/// `LATE_ROWS_OFFSET_MIN`, a LIMIT over `LATE_ROWS_LIMIT_MAX`, no merged
/// read along an index, a hidden primary key, or items that name no more
/// columns than place the rows. Read again as before too when a row of
/// the page went between the two reads (each row is read committed, as
/// in every read without locks: one changed since shows its new values).
pub(super) fn late_rows(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Vec<Val>>>> {
    let (Some(table), Some(limit)) = (&p.table, p.limit) else {
        return Ok(None);
    };
    let plain = deep_page(p)
        && reads_its_table_alone(p)
        && p.group.is_empty()
        && p.aggs.is_empty()
        && !p.distinct
        && !p.rollup
        && p.having.is_none()
        && !p.order.is_empty()
        && !table.hidden_key
        && tx.pending_ops() == 0
        && !assigns_user_vars(p);
    if !plain {
        return Ok(None);
    }
    let warned = plan_mark(ctx);
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let (access, filter) = single_access(table, p, cond.as_deref(), ctx)?;
    let (descending, sorted) = order_by_index(table, p, &access, cond.as_deref(), ctx)?;
    let merged = match sorted {
        true => None,
        false => merged_partitions(table, p, &access, cond.as_deref(), ctx)?,
    };
    let Some(merged) = merged else {
        drop_planned(ctx, warned);
        return Ok(None);
    };
    // What places a row: the index's order columns, the primary key, and
    // the WHERE's columns (tested here when the data nodes do not).
    let key: Vec<usize> = table.primary_key_columns().collect();
    let Some(used) = placing_columns(table, p, &merged.1).filter(|_| !key.is_empty()) else {
        drop_planned(ctx, warned);
        return Ok(None);
    };
    let narrow = columns_used(table, &used);
    let whole = projection(table, p);
    // The page's place: the primary keys of its rows, in order.
    let offset = usize::try_from(p.offset).unwrap_or(usize::MAX);
    let stop_after = offset.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut page_keys: Vec<Vec<Val>> = Vec::new();
    let mut seen = 0usize;
    let read = merge::MergedRead {
        filter,
        cond: cond.as_deref(),
        columns: narrow.as_deref(),
        stop_after: Some(stop_after),
        ..merge::MergedRead::along(table, &access, descending, merged)
    };
    merge::merged_each(tx.session(), read, ctx, |row, _| {
        if seen >= offset {
            page_keys.push(key.iter().map(|c| row[*c].clone()).collect());
        }
        seen += 1;
        Ok(seen < stop_after)
    })?;
    let page = Planned {
        order: Vec::new(),
        offset: 0,
        ..clone_planned(p)
    };
    if page_keys.is_empty() {
        return shape(&page, Vec::new(), ctx).map(Some);
    }
    // The page's rows by key, in its order.
    let tz = ctx.env.tz_secs;
    let bytewise = vec![None; key.len()];
    let mut natives: Vec<Vec<Value>> = Vec::with_capacity(page_keys.len());
    let mut place: stdx::KeyMap<Vec<u8>, usize> = stdx::KeyMap::default();
    for (at, values) in page_keys.iter().enumerate() {
        let mut native = Vec::with_capacity(key.len());
        for (c, v) in key.iter().zip(values) {
            match plan::exact(table, *c, v, tz) {
                Some(n) => native.push(n),
                None => {
                    drop_planned(ctx, warned);
                    return Ok(None);
                }
            }
        }
        natives.push(native);
        place.insert(group_key(values, &bytewise), at);
    }
    // The WHERE was tested as the rows were placed (each row read
    // committed: one changed since shows its new values).
    let found = fetch(
        tx,
        table,
        &Access::Keys(natives),
        None,
        None,
        false,
        None,
        ctx,
        None,
        None,
        whole.as_deref(),
    )?;
    let mut rows: Vec<Option<(Vec<Val>, Vec<Value>)>> =
        (0..page_keys.len()).map(|_| None).collect();
    for (row, native_key) in found {
        let values: Vec<Val> = key.iter().map(|c| row[*c].clone()).collect();
        match place.get(&group_key(&values, &bytewise)) {
            Some(&at) if rows[at].is_none() => rows[at] = Some((row, native_key)),
            _ => {
                drop_planned(ctx, warned);
                return Ok(None);
            }
        }
    }
    // A row gone since its place was found: the page is read as before
    // (its warnings given again then).
    if rows.iter().any(Option::is_none) {
        drop_planned(ctx, warned);
        return Ok(None);
    }
    shape(&page, rows.into_iter().flatten().collect(), ctx).map(Some)
}
