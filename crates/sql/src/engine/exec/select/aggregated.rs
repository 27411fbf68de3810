//! Aggregation where the rows are: a SELECT of one table whose aggregates
//! are counts, or SUM, AVG, MIN and MAX of integer and DECIMAL columns
//! (MIN and MAX of DATE, DATETIME, TIME and YEAR columns too), grouped
//! (or not) by columns, over a WHERE the data nodes test whole, is an
//! *aggregating scan* (`ScanOptions::aggregates`, `proto::scan`):
//! each partition returns, per batch, one row per group of the rows that
//! passed (their count, the group's values, each aggregate's partial
//! value), and the SQL node merges the partials into the groups' values.
//! `SELECT COUNT(*), SUM(amount) FROM orders` receives a few rows, not
//! 50,000 (RonDB's pushed aggregation).

use proto::scan::SCAN_SUM_DECIMAL_DIGITS_MAX;
use skarv_client::{AggregateFn, Filter, Value};

use super::{
    assigns_user_vars, exactly_tested_read, group_key, group_members, in_group_order,
    reads_its_table_alone, sorted_by_members, AggState, Group, Planned, GROUPS_IN_MEMORY_MAX,
};
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::exec::{convert, fetch_each, ScanShape};
use crate::engine::expr::{AggFn, Ctx, Dec, Expr, Val};
use crate::engine::plan::{self, Access};
use crate::error::{codes, SqlError, SqlResult};

/// How one of the query's aggregates is made of an aggregating scan's
/// row.
#[derive(Clone, Copy, Debug)]
enum Fold {
    /// The rows counted: `COUNT(*)`, `COUNT(1)`, COUNT of a NOT NULL
    /// column.
    Rows,
    /// COUNT of a nullable column: the scan's aggregate at this place.
    Count(usize),
    /// SUM or AVG: the sum at `sum`, of `count`'s values (None: of the
    /// rows counted, the column being NOT NULL).
    Sum { sum: usize, count: Option<usize> },
    /// MIN or MAX: the value at this place.
    Best(usize),
}

/// An aggregating scan of a query: its read, the scan's aggregates and
/// group columns (SQL positions), and how each of the query's aggregates
/// is made of them.
struct AggregatedRead {
    access: Access,
    filter: Option<Filter>,
    cond: Option<Expr>,
    aggregates: Vec<(AggregateFn, usize)>,
    group: Vec<usize>,
    folds: Vec<Fold>,
}

/// Whether the data nodes sum, or take the least or greatest of, column
/// `c` as the SQL node would: an integer, or a DECIMAL narrow enough that
/// a batch's sum cannot overflow (`proto::scan::aggregates_numerically`).
fn numeric(table: &TableInfo, c: usize) -> bool {
    let column = &table.columns[c];
    let sql = match column.ty {
        SqlType::TinyInt { .. }
        | SqlType::SmallInt { .. }
        | SqlType::MediumInt { .. }
        | SqlType::Int { .. }
        | SqlType::BigInt { .. } => true,
        SqlType::Decimal { precision, .. } => precision <= SCAN_SUM_DECIMAL_DIGITS_MAX,
        _ => false,
    };
    sql && table
        .native
        .def()
        .columns
        .get(column.native)
        .is_some_and(|n| proto::scan::aggregates_numerically(&n.ty))
}

/// Whether the data nodes take the least or greatest of column `c` as
/// the SQL node orders it: what they sum ([`numeric`]), DATE, DATETIME,
/// TIME and YEAR (stored as integers in their order). Not TIMESTAMP (SQL
/// orders its values in the session's time zone) nor text (collations).
fn ordered(table: &TableInfo, c: usize) -> bool {
    let column = &table.columns[c];
    let sql = matches!(
        column.ty,
        SqlType::Date | SqlType::DateTime { .. } | SqlType::Time { .. } | SqlType::Year
    );
    numeric(table, c)
        || sql
            && table
                .native
                .def()
                .columns
                .get(column.native)
                .is_some_and(|n| proto::scan::aggregates_in_order(&n.ty))
}

/// The aggregating scan of `p`, or None when it is not one: a join, a
/// lock, ROLLUP, a window, a DISTINCT or GROUP_CONCAT aggregate, one of an
/// expression or of another type, GROUP BY of anything but columns (or
/// of a unique key's: a group per row gains nothing), a column named
/// outside the aggregates that is not grouped by, a WHERE the SQL node
/// would test, or a transaction with writes to flush.
fn aggregated_read(
    tx_pending: usize,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<AggregatedRead>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    let simple = reads_its_table_alone(p)
        && !p.rollup
        && (!p.aggs.is_empty() || !p.group.is_empty())
        && tx_pending == 0
        && !assigns_user_vars(p);
    if !simple {
        return Ok(None);
    }
    let def = table.native.def();
    let mut group = Vec::with_capacity(p.group.len());
    for g in &p.group {
        match g {
            Expr::Col(c)
                if table
                    .columns
                    .get(*c)
                    .and_then(|col| def.columns.get(col.native))
                    .is_some_and(|n| !n.ty.is_blob()) =>
            {
                group.push(*c);
            }
            _ => return Ok(None),
        }
    }
    let grouped_natives: Vec<usize> = group.iter().map(|c| table.columns[*c].native).collect();
    if !group.is_empty()
        && table
            .keys
            .iter()
            .any(|k| k.unique && k.columns.iter().all(|c| grouped_natives.contains(c)))
    {
        return Ok(None);
    }
    // The groups' rows show their group values only.
    let mut bare = Vec::new();
    let order = p.order.iter().map(|(e, _)| e);
    for e in p.items.iter().chain(order).chain(&p.having) {
        plan::join::columns(e, &mut bare);
    }
    if bare.iter().any(|c| !group.contains(c)) {
        return Ok(None);
    }
    let mut aggregates: Vec<(AggregateFn, usize)> = Vec::new();
    let mut place =
        |func: AggregateFn, c: usize| match aggregates.iter().position(|a| *a == (func, c)) {
            Some(at) => at,
            None => {
                aggregates.push((func, c));
                aggregates.len() - 1
            }
        };
    let mut folds = Vec::with_capacity(p.aggs.len());
    for a in &p.aggs {
        if a.distinct || a.concat.is_some() {
            return Ok(None);
        }
        let column = match &a.arg {
            Some(Expr::Col(c)) if *c < table.columns.len() => Some(*c),
            _ => None,
        };
        let nullable = column.is_some_and(|c| table.columns[c].nullable);
        let fold = match (a.func, &a.arg, column) {
            (AggFn::CountStar, _, _) => Fold::Rows,
            (AggFn::Count, Some(Expr::Lit(v)), _) if !v.is_null() => Fold::Rows,
            (AggFn::Count, _, Some(_)) if !nullable => Fold::Rows,
            (AggFn::Count, _, Some(c)) => Fold::Count(place(AggregateFn::Count, c)),
            (AggFn::Sum | AggFn::Avg, _, Some(c)) if numeric(table, c) => Fold::Sum {
                sum: place(AggregateFn::Sum, c),
                count: nullable.then(|| place(AggregateFn::Count, c)),
            },
            (AggFn::Min, _, Some(c)) if ordered(table, c) => Fold::Best(place(AggregateFn::Min, c)),
            (AggFn::Max, _, Some(c)) if ordered(table, c) => Fold::Best(place(AggregateFn::Max, c)),
            _ => return Ok(None),
        };
        folds.push(fold);
    }
    if aggregates.len() > proto::scan::SCAN_AGGREGATES_MAX
        || group.len() > proto::scan::SCAN_GROUP_COLUMNS_MAX
    {
        return Ok(None);
    }
    let Some((access, filter, cond)) = exactly_tested_read(p, table, ctx)? else {
        return Ok(None);
    };
    Ok(Some(AggregatedRead {
        access,
        filter,
        cond,
        aggregates,
        group,
        folds,
    }))
}

/// The groups of `p` (each its row, holding its group values, and its
/// aggregates' values), in GROUP BY order unless an ORDER BY names
/// another, from an aggregating scan ([`aggregated_read`]); None (read as
/// before) when the query is not one. `commit` as `fetch_each` takes it.
pub(super) fn aggregated(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
    commit: Option<&mut bool>,
) -> SqlResult<Option<Vec<Group>>> {
    let (Some(table), Some(read)) = (&p.table, aggregated_read(tx.pending_ops(), p, ctx)?) else {
        return Ok(None);
    };
    let def = table.native.def();
    let name = |c: usize| def.columns[table.columns[c].native].name.as_str();
    let aggregates: Vec<(AggregateFn, &str)> = read
        .aggregates
        .iter()
        .map(|(f, c)| (*f, name(*c)))
        .collect();
    let group_by: Vec<&str> = read.group.iter().map(|c| name(*c)).collect();
    let fresh: Vec<AggState> = p.aggs.iter().map(AggState::fresh).collect();
    let members = group_members(p);
    let mut index: stdx::KeyMap<Vec<u8>, usize> = stdx::KeyMap::default();
    let mut groups: Vec<(Vec<Val>, Vec<AggState>)> = Vec::new();
    let mut group_values: Vec<Vec<Val>> = Vec::new();
    let tz = ctx.env.tz_secs;
    let width = p.source.len();
    let malformed = |what: String| {
        SqlError::new(
            codes::UNKNOWN,
            format!(
                "an aggregating scan of table `{}` returned {what}",
                table.name
            ),
        )
    };
    fetch_each(
        tx,
        table,
        &read.access,
        read.filter.clone(),
        None,
        false,
        read.cond.as_ref(),
        ctx,
        commit,
        None,
        ScanShape {
            count: true,
            aggregates: &aggregates,
            group_by: &group_by,
            // As many groups a batch as a batch may hold rows.
            batch_rows: proto::scan::SCAN_BATCH_ROWS_MAX,
            ..ScanShape::default()
        },
        |row, rest, ctx| {
            let rows = match row.first() {
                Some(Val::Int(n)) => *n,
                other => return Err(malformed(format!("a count of {other:?}"))),
            };
            if rest.len() != read.group.len() + read.aggregates.len() {
                return Err(malformed(format!("a row of {} values", rest.len() + 1)));
            }
            let (keys, partials) = rest.split_at(read.group.len());
            let at = if read.group.is_empty() {
                if groups.is_empty() {
                    groups.push((vec![Val::Null; width], fresh.clone()));
                }
                0
            } else {
                let values: Vec<Val> = keys
                    .iter()
                    .zip(&read.group)
                    .map(|(v, c)| convert::from_native(v, &table.columns[*c].ty, tz))
                    .collect();
                let key = group_key(&values, &p.group_collations);
                match index.get(&key) {
                    Some(at) => *at,
                    None => {
                        if groups.len() >= GROUPS_IN_MEMORY_MAX {
                            return Err(SqlError::unsupported(format_args!(
                                "more than {GROUPS_IN_MEMORY_MAX} groups"
                            )));
                        }
                        let mut shown = vec![Val::Null; width];
                        for (v, c) in values.iter().zip(&read.group) {
                            if let Some(slot) = shown.get_mut(*c) {
                                *slot = v.clone();
                            }
                        }
                        groups.push((shown, fresh.clone()));
                        group_values.push(sorted_by_members(values, &members));
                        index.insert(key, groups.len() - 1);
                        groups.len() - 1
                    }
                }
            };
            let counted = |i: usize| match &partials[i] {
                Value::UInt(n) => Ok(i64::try_from(*n).unwrap_or(i64::MAX)),
                other => Err(malformed(format!("a partial count of {other:?}"))),
            };
            let states = &mut groups[at].1;
            for ((spec, fold), st) in p.aggs.iter().zip(&read.folds).zip(states.iter_mut()) {
                match *fold {
                    Fold::Rows => st.fold_partial(spec, rows, Val::Null, ctx)?,
                    Fold::Count(i) => st.fold_partial(spec, counted(i)?, Val::Null, ctx)?,
                    Fold::Sum { sum, count } => {
                        let values = match count {
                            Some(i) => counted(i)?,
                            None => rows,
                        };
                        let column = read.aggregates[sum].1;
                        let scale = match table.columns[column].ty {
                            SqlType::Decimal { scale, .. } => scale,
                            _ => 0,
                        };
                        let v = match &partials[sum] {
                            Value::Null => Val::Null,
                            Value::Decimal(d) => match d.to_scaled(scale) {
                                Some(m) => Val::Dec(Dec::new(m, scale)),
                                None => return Err(malformed(format!("a sum of {d:?}"))),
                            },
                            other => return Err(malformed(format!("a sum of {other:?}"))),
                        };
                        st.fold_partial(spec, values, v, ctx)?;
                    }
                    Fold::Best(i) => {
                        let column = read.aggregates[i].1;
                        let v = convert::from_native(&partials[i], &table.columns[column].ty, tz);
                        st.fold_partial(spec, 0, v, ctx)?;
                    }
                }
            }
            Ok(true)
        },
    )?;
    // MariaDB returns the groups in GROUP BY order when no ORDER BY names
    // another.
    if !p.group.is_empty() && p.order.is_empty() {
        groups = in_group_order(p, groups, &group_values);
    }
    if groups.is_empty() && p.group.is_empty() {
        groups.push((vec![Val::Null; width], fresh));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (row, states) in groups {
        let mut values = Vec::with_capacity(states.len());
        for (spec, st) in p.aggs.iter().zip(states) {
            values.push(st.finish(spec, ctx)?);
        }
        out.push((row, values));
    }
    Ok(Some(out))
}
