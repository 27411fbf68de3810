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

use std::sync::Arc;

use proto::scan::SCAN_SUM_DECIMAL_DIGITS_MAX;
use schema::Collation;
use skarv_client::{AggregateFn, Filter, Value};

use super::{
    assigns_user_vars, exactly_tested_read, group_key, group_members, in_group_order,
    kind_collation, named_outside_where, reads_its_table_alone, room_for_group, sorted_by_members,
    AggState, Group, Planned,
};
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::exec::{convert, fetch_each, ScanShape};
use crate::engine::expr::{AggFn, AggSpec, Ctx, Dec, Expr, Val};
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
    /// An aggregate of the distinct values of this column (SQL position):
    /// the scan groups by it too, and each group's value is folded as a
    /// row's would be (the aggregate's state drops the values it has seen,
    /// as they arrive from several partitions and batches).
    Distinct(usize),
}

/// An aggregating scan of a query: its read, the scan's aggregates and
/// how each of the query's aggregates is made of them, and the group
/// columns (SQL positions).
struct AggregatedRead {
    access: Access,
    filter: Option<Filter>,
    cond: Option<Expr>,
    push: Pushdown,
    /// The scan's group columns: first the query's groups' (its GROUP BY
    /// columns; for a SELECT DISTINCT of no GROUP BY or aggregate, every
    /// column named outside the WHERE), then the DISTINCT aggregates'
    /// columns not among them.
    group: Vec<usize>,
    /// How many of `group` make the query's groups.
    grouped: usize,
    /// The collations their values are compared under.
    collations: Vec<Option<Collation>>,
    /// A SELECT DISTINCT's groups: each partial row is a row of its own,
    /// which the query makes distinct as any rows (no merge here: its
    /// values would be keyed twice).
    distinct_rows: bool,
}

/// Rows the read of a SELECT DISTINCT of no GROUP BY or aggregate must be
/// estimated to examine (index statistics, `ANALYZE TABLE`) to be read as
/// its groups: below it the rows are read as before, since grouping them
/// in the data nodes (a hash of each row's values) gains nothing when
/// they are few, often each a value of its own (sysbench's `SELECT
/// DISTINCT c … WHERE id BETWEEN ? AND ?` of 100 rows).
const DISTINCT_GROUPS_ROWS_MIN: u64 = 1_000;

/// The scan's aggregates for a query's (functions of the scanned table's
/// columns, SQL positions), and how each of the query's aggregates is
/// made of them.
pub(super) struct Pushdown {
    aggregates: Vec<(AggregateFn, usize)>,
    folds: Vec<Fold>,
}

/// The [`Pushdown`] of `aggs`, whose arguments `column` maps to columns of
/// `table` (None: not one of its columns), or None when one is not
/// pushed: GROUP_CONCAT, STD and the like, one of an expression, a SUM of
/// a column not [`numeric`], a MIN or MAX of one not [`ordered`], a
/// DISTINCT one of a column not [`groupable`] (any other DISTINCT one is
/// made of the groups of its column's values: [`Pushdown::distinct`]).
pub(super) fn pushdown(
    table: &TableInfo,
    aggs: &[AggSpec],
    column: &dyn Fn(&Expr) -> Option<usize>,
) -> Option<Pushdown> {
    let mut aggregates: Vec<(AggregateFn, usize)> = Vec::new();
    let mut place =
        |func: AggregateFn, c: usize| match aggregates.iter().position(|a| *a == (func, c)) {
            Some(at) => at,
            None => {
                aggregates.push((func, c));
                aggregates.len() - 1
            }
        };
    let mut folds = Vec::with_capacity(aggs.len());
    for a in aggs {
        if a.concat.is_some() {
            return None;
        }
        let column = a.arg.as_ref().and_then(column);
        if a.distinct {
            match column {
                Some(c) if groupable(table, c) => folds.push(Fold::Distinct(c)),
                _ => return None,
            }
            continue;
        }
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
            _ => return None,
        };
        folds.push(fold);
    }
    (aggregates.len() <= proto::scan::SCAN_AGGREGATES_MAX).then_some(Pushdown { aggregates, folds })
}

impl Pushdown {
    /// The columns (SQL positions) of the DISTINCT aggregates, each once,
    /// which the scan must group by too.
    pub(super) fn distinct(&self) -> Vec<usize> {
        let mut columns = Vec::new();
        for f in &self.folds {
            if let Fold::Distinct(c) = f {
                if !columns.contains(c) {
                    columns.push(*c);
                }
            }
        }
        columns
    }
}

/// Whether the data nodes group rows by column `c`: any but BLOB and TEXT
/// (their values are not in the row).
fn groupable(table: &TableInfo, c: usize) -> bool {
    table
        .columns
        .get(c)
        .and_then(|col| table.native.def().columns.get(col.native))
        .is_some_and(|n| !n.ty.is_blob())
}

/// Whether the data nodes sum, or take the least or greatest of, column
/// `c` as the SQL node would: an integer, or a DECIMAL narrow enough that
/// a batch's sum cannot overflow (`proto::scan::aggregates_numerically`).
fn numeric(table: &TableInfo, c: usize) -> bool {
    let column = &table.columns[c];
    let sql = match column.ty {
        SqlType::Decimal { precision, .. } => precision <= SCAN_SUM_DECIMAL_DIGITS_MAX,
        _ => plan::integer_column(table, c),
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
/// lock, ROLLUP, a window, a GROUP_CONCAT aggregate, one of an
/// expression or of another type, GROUP BY of anything but columns (or,
/// with the DISTINCT aggregates' columns, of a unique key's: a group per
/// row gains nothing), a column named outside the aggregates that is not
/// grouped by, a WHERE the SQL node would test, or a transaction with
/// writes to flush. `SELECT DISTINCT a, b FROM t` is one too: its rows
/// are those of `GROUP BY a, b`, made distinct as any.
fn aggregated_read(
    tx_pending: usize,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<AggregatedRead>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    let distinct_rows = p.distinct && p.group.is_empty() && p.aggs.is_empty();
    let simple = reads_its_table_alone(p)
        && !p.rollup
        && (!p.aggs.is_empty() || !p.group.is_empty() || distinct_rows)
        && tx_pending == 0
        && !assigns_user_vars(p);
    if !simple {
        return Ok(None);
    }
    let mut group = Vec::with_capacity(p.group.len());
    if distinct_rows {
        for e in named_outside_where(p) {
            plan::join::columns(e, &mut group);
        }
        group.sort_unstable();
        group.dedup();
        if group.is_empty() || !group.iter().all(|c| groupable(table, *c)) {
            return Ok(None);
        }
    } else {
        for g in &p.group {
            match g {
                Expr::Col(c) if groupable(table, *c) => group.push(*c),
                _ => return Ok(None),
            }
        }
    }
    let grouped = group.len();
    let collations = match distinct_rows {
        true => group
            .iter()
            .map(|c| kind_collation(convert::column_kind(&table.columns[*c].ty)))
            .collect(),
        false => p.group_collations.clone(),
    };
    // The groups' rows show their group values only.
    let mut bare = Vec::new();
    let order = p.order.iter().map(|(e, _)| e);
    for e in p.items.iter().chain(order).chain(&p.having) {
        plan::join::columns(e, &mut bare);
    }
    if bare.iter().any(|c| !group.contains(c)) {
        return Ok(None);
    }
    let Some(push) = pushdown(table, &p.aggs, &|e| match e {
        Expr::Col(c) if *c < table.columns.len() => Some(*c),
        _ => None,
    }) else {
        return Ok(None);
    };
    for c in push.distinct() {
        if !group.contains(&c) {
            group.push(c);
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
    if group.len() > proto::scan::SCAN_GROUP_COLUMNS_MAX {
        return Ok(None);
    }
    let worth_it = |access: &Access| {
        !distinct_rows || plan::join::estimate_rows(table, access) >= DISTINCT_GROUPS_ROWS_MIN
    };
    let Some((access, filter, cond)) = exactly_tested_read(p, table, ctx, &worth_it)? else {
        return Ok(None);
    };
    Ok(Some(AggregatedRead {
        access,
        filter,
        cond,
        push,
        group,
        grouped,
        collations,
        distinct_rows,
    }))
}

/// Whether `p` is read by an aggregating scan ([`aggregated`]), as
/// EXPLAIN says ("Using pushed aggregation").
pub(super) fn aggregates_pushed(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<bool> {
    let warned = super::plan_mark(ctx);
    let read = aggregated_read(0, p, ctx)?;
    super::drop_planned(ctx, warned);
    Ok(read.is_some())
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
    let scan = ScanGroups {
        table,
        access: &read.access,
        filter: read.filter.clone(),
        cond: read.cond.as_ref(),
        group: &read.group,
        grouped: read.grouped,
        unmerged: read.distinct_rows,
        push: &read.push,
        aggs: &p.aggs,
        collations: &read.collations,
    };
    let scanned = scan.run(tx, ctx, commit)?;
    let width = p.source.len();
    let members = group_members(p);
    let mut groups = Vec::with_capacity(scanned.len());
    let mut group_values = Vec::with_capacity(scanned.len());
    for (values, states) in scanned {
        let mut shown = vec![Val::Null; width];
        for (v, c) in values.iter().zip(&read.group) {
            if let Some(slot) = shown.get_mut(*c) {
                *slot = v.clone();
            }
        }
        groups.push((shown, states));
        group_values.push(sorted_by_members(values, &members));
    }
    // MariaDB returns the groups in GROUP BY order when no ORDER BY names
    // another.
    if !p.group.is_empty() && p.order.is_empty() {
        groups = in_group_order(p, groups, &group_values);
    }
    // Aggregates of no group are a row even of no rows; distinct rows
    // are not.
    if groups.is_empty() && p.group.is_empty() && !p.aggs.is_empty() {
        groups.push((
            vec![Val::Null; width],
            p.aggs.iter().map(AggState::fresh).collect(),
        ));
    }
    finished(p, groups, ctx).map(Some)
}

/// Each group's aggregates' values from their states.
pub(super) fn finished(
    p: &Planned,
    groups: Vec<(Vec<Val>, Vec<AggState>)>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Group>> {
    let mut out = Vec::with_capacity(groups.len());
    for (row, states) in groups {
        let mut values = Vec::with_capacity(states.len());
        for (spec, st) in p.aggs.iter().zip(states) {
            values.push(st.finish(spec, ctx)?);
        }
        out.push((row, values));
    }
    Ok(out)
}

/// An aggregating scan of `table` for the aggregates `aggs`, grouped by
/// its columns `group` (SQL positions), whose first `grouped` make the
/// query's groups (their values compared under `collations`) and the
/// rest are those of DISTINCT aggregates.
pub(super) struct ScanGroups<'a> {
    pub table: &'a Arc<TableInfo>,
    pub access: &'a Access,
    pub filter: Option<Filter>,
    pub cond: Option<&'a Expr>,
    pub group: &'a [usize],
    pub grouped: usize,
    /// Each partial row a group of its own (see
    /// `AggregatedRead::distinct_rows`).
    pub unmerged: bool,
    pub push: &'a Pushdown,
    pub aggs: &'a [AggSpec],
    pub collations: &'a [Option<Collation>],
}

impl ScanGroups<'_> {
    /// Runs the scan: per group, its group values and the aggregates'
    /// states, merged from the partitions' and batches' rows, in order of
    /// first arrival.
    pub(super) fn run(
        self,
        tx: &skarv_client::Transaction<'_>,
        ctx: &mut Ctx<'_>,
        commit: Option<&mut bool>,
    ) -> SqlResult<Vec<(Vec<Val>, Vec<AggState>)>> {
        let ScanGroups {
            table,
            access,
            filter,
            cond,
            group,
            grouped,
            unmerged,
            push,
            aggs,
            collations,
        } = self;
        debug_assert!(grouped <= group.len());
        // Where each DISTINCT aggregate's values are among the groups'.
        let distinct_at = |c: usize| {
            group
                .iter()
                .position(|g| *g == c)
                .expect("a DISTINCT aggregate's column is grouped by")
        };
        let def = table.native.def();
        let name = |c: usize| def.columns[table.columns[c].native].name.as_str();
        let aggregates: Vec<(AggregateFn, &str)> = push
            .aggregates
            .iter()
            .map(|(f, c)| (*f, name(*c)))
            .collect();
        let group_by: Vec<&str> = group.iter().map(|c| name(*c)).collect();
        let fresh: Vec<AggState> = aggs.iter().map(AggState::fresh).collect();
        let mut index: stdx::KeyMap<Vec<u8>, usize> = stdx::KeyMap::default();
        let mut groups: Vec<(Vec<Val>, Vec<AggState>)> = Vec::new();
        let tz = ctx.env.tz_secs;
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
            access,
            filter,
            None,
            false,
            cond,
            ctx,
            commit,
            None,
            ScanShape {
                count: true,
                aggregates: &aggregates,
                group_by: &group_by,
                // As many groups a batch as it may hold: few batches a
                // partition, each group in one of them where they fit.
                batch_rows: match group.is_empty() {
                    true => proto::scan::SCAN_BATCH_ROWS_MAX,
                    false => proto::scan::SCAN_GROUPS_MAX,
                },
                ..ScanShape::default()
            },
            |row, rest, ctx| {
                let rows = match row.first() {
                    Some(Val::Int(n)) => *n,
                    other => return Err(malformed(format!("a count of {other:?}"))),
                };
                if rest.len() != group.len() + push.aggregates.len() {
                    return Err(malformed(format!("a row of {} values", rest.len() + 1)));
                }
                let (keys, partials) = rest.split_at(group.len());
                let values: Vec<Val> = keys
                    .iter()
                    .zip(group)
                    .map(|(v, c)| convert::from_native(v, &table.columns[*c].ty, tz))
                    .collect();
                let at = if grouped == 0 {
                    if groups.is_empty() {
                        groups.push((Vec::new(), fresh.clone()));
                    }
                    0
                } else if unmerged {
                    room_for_group(groups.len())?;
                    groups.push((values[..grouped].to_vec(), fresh.clone()));
                    groups.len() - 1
                } else {
                    let key = group_key(&values[..grouped], collations);
                    match index.get(&key) {
                        Some(at) => *at,
                        None => {
                            room_for_group(groups.len())?;
                            groups.push((values[..grouped].to_vec(), fresh.clone()));
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
                for ((spec, fold), st) in aggs.iter().zip(&push.folds).zip(states.iter_mut()) {
                    match *fold {
                        Fold::Rows => st.fold_partial(spec, rows, Val::Null, ctx)?,
                        Fold::Count(i) => st.fold_partial(spec, counted(i)?, Val::Null, ctx)?,
                        Fold::Sum { sum, count } => {
                            let values = match count {
                                Some(i) => counted(i)?,
                                None => rows,
                            };
                            let column = push.aggregates[sum].1;
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
                            let column = push.aggregates[i].1;
                            let v =
                                convert::from_native(&partials[i], &table.columns[column].ty, tz);
                            st.fold_partial(spec, 0, v, ctx)?;
                        }
                        Fold::Distinct(c) => st.fold(spec, values[distinct_at(c)].clone(), ctx)?,
                    }
                }
                Ok(true)
            },
        )?;
        Ok(groups)
    }
}
