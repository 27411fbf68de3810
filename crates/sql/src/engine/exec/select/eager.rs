//! Aggregation below a join (eager aggregation): `SELECT c.country,
//! COUNT(*), SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id
//! = c.id GROUP BY c.country`, whose aggregates read one table (the
//! orders) and whose join finds each of its rows at most one row of the
//! other by that one's primary key, aggregates the orders per
//! `customer_id` where they are (an aggregating scan: one row per
//! customer, partition and batch, not one per order), then reads the
//! customers and folds each customer's partial aggregates into the group
//! its row makes. Each order joins one customer (the key is unique) or
//! none (no such customer, or one the WHERE drops), so the groups'
//! counts, sums, least and greatest values are those of the joined rows.

use super::aggregated::{finished, pushdown, Pushdown, ScanGroups};
use super::{
    assigns_user_vars, drop_planned, exactly_tested_read_of, group_key, group_members,
    in_group_order, plan_mark, room_for_group, sorted_by_members, AggState, ExactRead, Group,
    Planned,
};
use crate::engine::exec::{fetch_each, ScanShape};
use crate::engine::expr::{CmpOp, Ctx, Expr, InList, Val};
use crate::engine::plan::join::{
    columns, estimate_rows, map_columns, rows_per_key, table_at, JoinTable,
};
use crate::engine::plan::{self, Access};
use crate::error::SqlResult;

/// How many times fewer than the aggregated table's rows the rows a join
/// reads of it must be for the join to be cheaper than aggregating them
/// all where they are: `bench/queries-compare.sh` (2 × 2 on 2 vCPUs,
/// 50,000 orders) joined 19 customers' 950 orders in 1.1 ms against 5.2
/// ms aggregated, and a tenth of the customers' 5,000 in 4.0 ms against
/// 5.0 ms; all 50,000 in 51 ms against 8.3 ms.
const EAGER_JOINED_ROWS_RATIO: u64 = 5;

/// Rows of the other table up to which, when its condition is that
/// selective (the statistics' estimate), it is read first and the
/// aggregated table aggregated for its keys only (IN lists of them along
/// the join column's index, `plan::INDEX_POINTS_MAX` points each).
const EAGER_OTHER_FIRST_ROWS_MAX: u64 = plan::INDEX_POINTS_MAX as u64;

/// Aggregating scans of the keys read first, one after another, up to
/// which they are read so (more keys than the estimate said); past it the
/// aggregated table is read whole.
const EAGER_OTHER_FIRST_SCANS_MAX: usize = 4;

/// Keys up to which the other table is read by its primary key, the keys
/// the aggregated rows hold, rather than by its own condition (when they
/// are under a quarter of its rows).
const EAGER_KEY_READS_MAX: usize = 1_024;

/// The groups of a two-table inner join aggregated below the join (see the
/// module doc), each its row (the other table's columns NULL) and its
/// aggregates' values, in GROUP BY order unless an ORDER BY names another;
/// None (joined and grouped as before) for any other query: aggregates of
/// both tables, of an expression or not pushed (`aggregated::pushdown`),
/// columns of the aggregated table named outside them, a join condition
/// other than one integer column equal to the other table's one-column
/// primary key, a condition of both tables besides it, a condition of the
/// aggregated table the data nodes do not test whole, an outer or semi
/// join, a derived table, ROLLUP, a window, a lock, or writes to flush.
pub(super) fn joined_groups(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Group>>> {
    let (Some(spec), Some(read)) = (&p.join, eager_read(tx.pending_ops(), p, ctx)?) else {
        return Ok(None);
    };
    let EagerRead {
        fact,
        dim,
        fact_key,
        dim_key,
        push,
        access,
        filter,
        cond,
        dim_access,
        dim_filter,
        dim_cond,
        dim_columns,
        other_first,
    } = read;
    let (f, d) = (&spec.tables[fact], &spec.tables[dim]);
    // The other table first when its condition picks few rows: the
    // aggregated one then for their keys only.
    let (dim_rows, for_keys) = match &other_first {
        Some(fact_cond) => {
            let mut rows = Vec::new();
            fetch_each(
                tx,
                &d.table,
                &dim_access,
                dim_filter.clone(),
                None,
                false,
                dim_cond.as_ref(),
                ctx,
                None,
                dim_columns.as_deref(),
                ScanShape::default(),
                |row, _, _| {
                    rows.push(row);
                    Ok(true)
                },
            )?;
            let reads = for_keys_reads(f, fact_key, dim_key, fact_cond.as_ref(), &rows, ctx)?;
            (Some(rows), reads)
        }
        None => (None, None),
    };
    let reads = for_keys.unwrap_or_else(|| vec![(access, filter, cond)]);
    // The fact rows aggregated per join key (each key in one read).
    let mut partials = Vec::new();
    for (access, filter, cond) in reads {
        partials.extend(
            ScanGroups {
                table: &f.table,
                access: &access,
                filter,
                cond: cond.as_ref(),
                group: &[fact_key],
                grouped: 1,
                unmerged: false,
                push: &push,
                aggs: &p.aggs,
                collations: &[None],
            }
            .run(tx, ctx, None)?,
        );
    }
    let mut by_key: stdx::KeyMap<Vec<u8>, usize> = stdx::KeyMap::default();
    for (at, (values, _)) in partials.iter().enumerate() {
        by_key.insert(group_key(values, &[None]), at);
    }
    // Few keys of a larger table (the aggregated rows' condition picked
    // a few customers): its rows by those keys, its own condition tested
    // on each, rather than all of its rows.
    let keyed = !matches!(dim_access, Access::Nothing)
        && dim_rows.is_none()
        && partials.len() <= EAGER_KEY_READS_MAX
        && d.table
            .stats
            .rows()
            .is_some_and(|rows| (partials.len() as u64).saturating_mul(4) < rows);
    let (dim_access, dim_filter) = if keyed {
        let tz = ctx.env.tz_secs;
        let keys = partials
            .iter()
            .filter_map(|(values, _)| values.first())
            .filter_map(|v| plan::exact(&d.table, dim_key, v, tz))
            .map(|native| vec![native])
            .collect();
        (Access::Keys(keys), None)
    } else {
        (dim_access, dim_filter)
    };
    // The dim rows that join some, each folded into its group.
    let width = p.source.len();
    let members = group_members(p);
    let fresh: Vec<AggState> = p.aggs.iter().map(AggState::fresh).collect();
    let mut index: stdx::KeyMap<Vec<u8>, usize> = stdx::KeyMap::default();
    let mut groups: Vec<(Vec<Val>, Vec<AggState>)> = Vec::new();
    let mut group_values: Vec<Vec<Val>> = Vec::new();
    let mut fold = |row: Vec<Val>, ctx: &mut Ctx<'_>| {
        let Some(joined) = row
            .get(dim_key)
            .and_then(|v| by_key.get(&group_key(std::slice::from_ref(v), &[None])))
        else {
            return Ok(true);
        };
        let mut combined = vec![Val::Null; width];
        for (slot, v) in combined[d.offset..].iter_mut().zip(row) {
            *slot = v;
        }
        let mut values = Vec::with_capacity(p.group.len());
        for g in &p.group {
            values.push(g.eval(&combined, ctx)?);
        }
        let gkey = group_key(&values, &p.group_collations);
        let at = match index.get(&gkey) {
            Some(at) => *at,
            None => {
                room_for_group(groups.len())?;
                groups.push((combined, fresh.clone()));
                group_values.push(sorted_by_members(values, &members));
                index.insert(gkey, groups.len() - 1);
                groups.len() - 1
            }
        };
        let states = &mut groups[at].1;
        for ((spec, st), part) in p.aggs.iter().zip(states).zip(&partials[*joined].1) {
            st.merge(spec, part, ctx)?;
        }
        SqlResult::Ok(true)
    };
    match dim_rows {
        // Read first: folded in the order read.
        Some(rows) => {
            for row in rows {
                fold(row, ctx)?;
            }
        }
        None if !partials.is_empty() => {
            fetch_each(
                tx,
                &d.table,
                &dim_access,
                dim_filter,
                None,
                false,
                dim_cond.as_ref(),
                ctx,
                None,
                dim_columns.as_deref(),
                ScanShape::default(),
                |row, _, ctx| fold(row, ctx),
            )?;
        }
        None => {}
    }
    if !p.group.is_empty() && p.order.is_empty() {
        groups = in_group_order(p, groups, &group_values);
    }
    if groups.is_empty() && p.group.is_empty() {
        groups.push((vec![Val::Null; width], fresh));
    }
    finished(p, groups, ctx).map(Some)
}

/// The plan of [`joined_groups`]: which of the join's tables is
/// aggregated (`fact`) and which joins it by its primary key (`dim`),
/// their join columns (each table's positions), the aggregates pushed,
/// the fact table's read and the dim table's (its columns named).
pub(super) struct EagerRead<'p> {
    fact: usize,
    dim: usize,
    fact_key: usize,
    dim_key: usize,
    push: Pushdown,
    access: Access,
    filter: Option<skarv_client::Filter>,
    cond: Option<Expr>,
    dim_access: Access,
    dim_filter: Option<skarv_client::Filter>,
    dim_cond: Option<Expr>,
    dim_columns: Option<Vec<&'p str>>,
    /// The other table read first (its condition picks few rows), the
    /// aggregated one then for their keys: its own condition, if any.
    other_first: Option<Option<Expr>>,
}

impl EagerRead<'_> {
    /// The join's table (its place in the join) aggregated below it.
    pub(super) fn aggregated_table(&self) -> usize {
        self.fact
    }

    /// Its read: the access, whether a filter is pushed, whether it has a
    /// condition.
    pub(super) fn aggregated_access(&self) -> (&Access, bool, bool) {
        (&self.access, self.filter.is_some(), self.cond.is_some())
    }
}

/// The plan of [`joined_groups`], or None when the query is not one
/// (`tx_pending`: the transaction's writes not yet sent).
pub(super) fn eager_read<'p>(
    tx_pending: usize,
    p: &'p Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<EagerRead<'p>>> {
    let Some(spec) = &p.join else {
        return Ok(None);
    };
    let simple = p.table.is_none()
        && p.rows.is_none()
        && p.late.is_none()
        && p.laterals.is_empty()
        && p.windows.is_empty()
        && p.lock.is_none()
        && !p.rollup
        && !p.aggs.is_empty()
        && tx_pending == 0
        && !assigns_user_vars(p)
        && spec.tables.len() == 2
        && spec
            .tables
            .iter()
            .all(|t| !t.outer && t.on.is_empty() && t.rows.is_none() && t.semi.is_none());
    if !simple {
        return Ok(None);
    }
    let table_of = |c: usize| table_at(spec, c);
    // The aggregated table: the one the aggregates read; the other's
    // columns are all the rest names.
    let mut read = Vec::new();
    for a in &p.aggs {
        if let Some(arg) = &a.arg {
            columns(arg, &mut read);
        }
    }
    let mut named = Vec::new();
    let order = p.order.iter().map(|(e, _)| e);
    for e in p.items.iter().chain(&p.group).chain(&p.having).chain(order) {
        columns(e, &mut named);
    }
    let fact = match (read.first(), named.first()) {
        (Some(c), _) => table_of(*c),
        (None, Some(c)) => table_of(*c).map(|d| 1 - d),
        (None, None) => None,
    };
    let Some(fact) = fact else {
        return Ok(None);
    };
    let dim = 1 - fact;
    if read.iter().any(|c| table_of(*c) != Some(fact))
        || named.iter().any(|c| table_of(*c) != Some(dim))
    {
        return Ok(None);
    }
    let (f, d) = (&spec.tables[fact], &spec.tables[dim]);
    // The conditions: the join's key equality, and each of the others
    // of one table.
    let mut key: Option<(usize, usize)> = None;
    let mut fact_conds = Vec::new();
    let mut dim_conds = Vec::new();
    let conds = p
        .cond
        .iter()
        .chain(&spec.inner_on)
        .flat_map(Expr::conjuncts);
    for c in conds {
        let mut cols = Vec::new();
        columns(c, &mut cols);
        let of_fact = cols.iter().any(|c| table_of(*c) == Some(fact));
        let of_dim = cols.iter().any(|c| table_of(*c) == Some(dim));
        if cols.iter().any(|c| table_of(*c).is_none()) {
            return Ok(None);
        }
        match (of_fact, of_dim) {
            (true, false) => fact_conds.push(map_columns(c, &|x| x - f.offset)),
            (false, _) => dim_conds.push(map_columns(c, &|x| x.saturating_sub(d.offset))),
            (true, true) => {
                let Expr::Cmp(CmpOp::Eq, a, b, _) = c else {
                    return Ok(None);
                };
                let (Expr::Col(a), Expr::Col(b)) = (&**a, &**b) else {
                    return Ok(None);
                };
                let (x, y) = if table_of(*a) == Some(dim) {
                    (*a, *b)
                } else {
                    (*b, *a)
                };
                if key.is_some() {
                    return Ok(None);
                }
                key = Some((x - d.offset, y - f.offset));
            }
        }
    }
    let Some((dim_key, fact_key)) = key else {
        return Ok(None);
    };
    // Each fact row joins at most one dim row: the dim's one-column
    // primary key (a declared one), integers on both sides.
    let primary: Vec<usize> = d.table.primary_key_columns().collect();
    if d.table.hidden_key
        || primary != [dim_key]
        || !plan::integer_column(&d.table, dim_key)
        || !plan::integer_column(&f.table, fact_key)
    {
        return Ok(None);
    }
    let in_fact = |e: &Expr| match e {
        Expr::Col(c) if table_of(*c) == Some(fact) => Some(*c - f.offset),
        _ => None,
    };
    // A DISTINCT aggregate's values seen per join key cannot be merged
    // into another key's group (its state drops values, not partials).
    let Some(push) = pushdown(&f.table, &p.aggs, &in_fact).filter(|p| p.distinct().is_empty())
    else {
        return Ok(None);
    };
    // Both reads planned before either runs: one that turns out not to
    // fit leaves the query to the join as before.
    let dim_cond = Expr::and_of(dim_conds);
    if dim_cond.as_ref().is_some_and(plan::warns_when_read) {
        return Ok(None);
    }
    let warned = plan_mark(ctx);
    let fact_cond = Expr::and_of(fact_conds);
    let Some((access, filter, cond)) =
        exactly_tested_read_of(&f.table, fact_cond.as_ref(), &f.hints, ctx, &|_| true)?
    else {
        return Ok(None);
    };
    let dim_cond = plan::fold_select_constants(&d.table, dim_cond.as_ref(), ctx)?
        .map(std::borrow::Cow::into_owned);
    let usable = |native: &str| d.hints.usable(&d.table, native);
    let (dim_access, dim_filter) = plan::access_with(&d.table, dim_cond.as_ref(), ctx, &usable)?;
    if ctx.warnings.len() > warned.0 {
        drop_planned(ctx, warned);
        return Ok(None);
    }
    // A selective condition of the other table (`WHERE c.id < 20`): the
    // join reads its few rows' keys' rows along an index of the join
    // column, fewer than the aggregating scan examines of all the
    // aggregated rows by more than a data node's row costs less than a
    // row sent to the SQL node. Joined as before then.
    let fact_native = f.table.columns[fact_key].native;
    let along = f.table.keys.iter().find_map(|k| {
        (k.columns.first() == Some(&fact_native))
            .then_some(k.ordered.as_deref())
            .flatten()
    });
    // Unless that condition picks so few that the other table is read
    // first and the aggregated one for their keys only, along the index.
    let mut other_first = None;
    if let (Some(index), Some(fact_rows)) = (along, f.table.stats.rows()) {
        let dim_rows = estimate_rows(&d.table, &dim_access);
        let joined = dim_rows
            .saturating_mul(rows_per_key(&f.table, index, 1))
            .saturating_mul(EAGER_JOINED_ROWS_RATIO);
        if joined < fact_rows {
            if dim_rows > EAGER_OTHER_FIRST_ROWS_MAX {
                drop_planned(ctx, warned);
                return Ok(None);
            }
            other_first = Some(fact_cond.clone());
        }
    }
    // The dim columns the query names (a TEXT one not named is not read:
    // its read would lock).
    let mut used = vec![false; d.table.columns.len()];
    let mut dim_named = vec![dim_key];
    dim_named.extend(named.iter().map(|c| c - d.offset));
    if let Some(c) = &dim_cond {
        columns(c, &mut dim_named);
    }
    for c in dim_named {
        match used.get_mut(c) {
            Some(u) => *u = true,
            None => {
                drop_planned(ctx, warned);
                return Ok(None);
            }
        }
    }
    let dim_columns = crate::engine::exec::columns_used(&d.table, &used);
    Ok(Some(EagerRead {
        fact,
        dim,
        fact_key,
        dim_key,
        push,
        access,
        filter,
        cond,
        dim_access,
        dim_filter,
        dim_cond,
        dim_columns,
        other_first,
    }))
}

/// The aggregated table's reads for the keys of the other table's `rows`
/// (read first; `dim_key` their join column): its own condition
/// `fact_cond` and its join column `fact_key` IN some of those keys, each
/// key in one read, which the data nodes test whole (points along the
/// join column's index). None to make for no key; None at all (its whole
/// read as planned) for more keys than `EAGER_OTHER_FIRST_SCANS_MAX`
/// reads of an index's points, or a read not tested whole.
fn for_keys_reads(
    f: &JoinTable,
    fact_key: usize,
    dim_key: usize,
    fact_cond: Option<&Expr>,
    rows: &[Vec<Val>],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<ExactRead>>> {
    let mut seen: stdx::KeyMap<Vec<u8>, ()> = stdx::KeyMap::default();
    let mut keys = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(v) = row.get(dim_key).filter(|v| !v.is_null()) else {
            continue;
        };
        if seen
            .insert(group_key(std::slice::from_ref(v), &[None]), ())
            .is_none()
        {
            keys.push(Expr::Lit(v.clone()));
        }
    }
    // Each read as many keys as an index reads as points: a filter of
    // more equalities per row would cost more than the whole read.
    if keys.len() > plan::INDEX_POINTS_MAX * EAGER_OTHER_FIRST_SCANS_MAX {
        return Ok(None);
    }
    let mut reads = Vec::new();
    for chunk in keys.chunks(plan::INDEX_POINTS_MAX) {
        let among = Expr::In(
            Box::new(Expr::Col(fact_key)),
            chunk.to_vec(),
            false,
            None,
            InList::Written,
        );
        let cond = Expr::and_of(fact_cond.cloned().into_iter().chain([among]));
        match exactly_tested_read_of(&f.table, cond.as_ref(), &f.hints, ctx, &|_| true)? {
            Some(read) => reads.push(read),
            None => return Ok(None),
        }
    }
    Ok(Some(reads))
}
