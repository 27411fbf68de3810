//! Pushed joins (NDB's SPJ; `docs/pushed-joins.md`): the leading steps of
//! a join plan whose later tables are each read by their whole primary key
//! from the columns of one earlier table run as ONE native request
//! (`Transaction::pushed_scan`): the data nodes join, the SQL node pays one
//! round trip per batch of first-table rows instead of one per table.
//!
//! What is pushed (`ndb_join_pushdown` ON, the default, as NDB): the first
//! step is a scan (whole table, or one range of an ordered index); each
//! following step is an `eq_ref` on the primary key whose every key value
//! is a column of one earlier pushed table of the very same native type,
//! with no condition of its own for the data nodes; no table has BLOB/TEXT
//! columns; the statement takes no row locks. The first step that does not
//! qualify ends the pushed part; the rest runs as batched key access.
//! Conditions are tested here as for any join (`combine`), so results are
//! those of the unpushed plan.

use schema::Value;
use skarv_client::{PushedChild, PushedKey, ScanOptions, Transaction};

use super::join::{combine, StepStats};
use super::sql_row;
use crate::engine::catalog::TableInfo;
use crate::engine::expr::{Ctx, Expr, Val};
use crate::engine::plan::join::{table_at, JoinPlan, JoinSpec, KeyedKind, StepAccess};
use crate::engine::plan::Access;
use crate::engine::txn;
use crate::error::SqlResult;

/// Most tables of one pushed join (the root and `proto::QUERY_CHILDREN_MAX`).
pub const PUSHED_TABLES_MAX: usize = 16;

/// The pushed part of a join plan.
#[derive(Clone, Debug)]
pub struct Pushable {
    /// Steps `0..steps` are pushed (at least 2).
    pub steps: usize,
    /// Per pushed step after the first: its parent step and its key's
    /// sources (native column names of the parent), in primary-key order.
    pub children: Vec<(usize, Vec<String>)>,
}

/// The pushed part of `plan`, if any (`lock`: the statement's row locks).
pub fn pushable(spec: &JoinSpec, plan: &JoinPlan, lock: bool, on: bool) -> Option<Pushable> {
    if !on || lock || plan.steps.len() < 2 {
        return None;
    }
    let root = &plan.steps[0];
    // A derived table's rows are the SQL node's own: nothing to push.
    if spec.tables[root.table].rows.is_some() {
        return None;
    }
    let root_table = &spec.tables[root.table].table;
    match &root.access {
        StepAccess::Own(Access::Scan) => {}
        StepAccess::Own(Access::Range { points, .. }) if points.is_empty() => {}
        _ => return None,
    }
    if root_table.native.has_blobs() {
        return None;
    }
    let mut children = Vec::new();
    for (at, step) in plan
        .steps
        .iter()
        .enumerate()
        .skip(1)
        .take(PUSHED_TABLES_MAX - 1)
    {
        match child_of(spec, plan, at, step) {
            Some(child) => children.push(child),
            None => break,
        }
    }
    (!children.is_empty()).then(|| Pushable {
        steps: children.len() + 1,
        children,
    })
}

/// Step `at` as a child of an earlier step, if it can be one.
fn child_of(
    spec: &JoinSpec,
    plan: &JoinPlan,
    at: usize,
    step: &crate::engine::plan::join::Step,
) -> Option<(usize, Vec<String>)> {
    let StepAccess::Keyed(k) = &step.access else {
        return None;
    };
    // A semi-join's or anti-join's table keeps one match per outer row,
    // or none (the SQL node's `combine`); a derived table is no table of
    // the data nodes: neither is a child of a pushed join.
    let joined = &spec.tables[step.table];
    if joined.semi.is_some() || joined.rows.is_some() {
        return None;
    }
    let t = &joined.table;
    if k.kind != KeyedKind::Primary || step.filter.is_some() || t.native.has_blobs() {
        return None;
    }
    let def = t.native.def();
    let mut parent = None;
    let mut names = Vec::with_capacity(def.primary_key.len());
    for &native in &def.primary_key {
        let i = k
            .columns
            .iter()
            .position(|&c| t.columns[c].native == native)?;
        let Expr::Col(c) = k.exprs.get(i)? else {
            return None;
        };
        let from_table = table_at(spec, *c)?;
        let from_step = plan.steps[..at]
            .iter()
            .position(|s| s.table == from_table)?;
        if *parent.get_or_insert(from_step) != from_step {
            return None;
        }
        let ft = &spec.tables[from_table];
        let from_native = ft.table.columns.get(c - ft.offset)?.native;
        let from_col = ft.table.native.def().columns.get(from_native)?;
        if from_col.ty != def.columns[native].ty {
            return None;
        }
        names.push(from_col.name.clone());
    }
    Some((parent?, names))
}

/// Runs the pushed steps, handing `each` the combined rows after step
/// `p.steps - 1` as the data nodes send them; `each` answers whether to
/// go on (false ends the scan).
pub(crate) fn run_each(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    plan: &JoinPlan,
    p: &Pushable,
    ctx: &mut Ctx<'_>,
    stats: &mut [StepStats],
    each: &mut dyn FnMut(Vec<Val>, &mut Ctx<'_>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let started = std::time::Instant::now();
    let root = &plan.steps[0];
    let root_table = &spec.tables[root.table].table;
    let mut options = ScanOptions {
        filter: root.filter.clone(),
        ..ScanOptions::default()
    };
    if let StepAccess::Own(Access::Range {
        index,
        lower,
        upper,
        ..
    }) = &root.access
    {
        options.index = Some(index.as_str());
        options.lower = lower.clone();
        options.upper = upper.clone();
    }
    let children: Vec<PushedChild> = p
        .children
        .iter()
        .enumerate()
        .map(|(k, (parent, names))| PushedChild {
            parent: *parent,
            table: std::sync::Arc::clone(&spec.tables[plan.steps[k + 1].table].table.native),
            key: names.iter().cloned().map(PushedKey::Column).collect(),
            outer: spec.tables[plan.steps[k + 1].table].outer,
        })
        .collect();
    // A scan does not carry the transaction's deferred writes: they go
    // first, so that the join sees them.
    txn::flush(tx).map_err(|e| txn::native_error_in(&e, &root_table.name))?;
    let joined = tx
        .pushed_scan(&root_table.native, options, &children)
        .map_err(|e| txn::native_error_in(&e, &root_table.name))?;
    let tables: Vec<&TableInfo> = plan.steps[..p.steps]
        .iter()
        .map(|s| spec.tables[s.table].table.as_ref())
        .collect();
    let width = spec.columns.len();
    'rows: for row in joined {
        let row = row.map_err(|e| txn::native_error_in(&e, &root_table.name))?;
        ctx.check_killed()?;
        let mut rows = vec![vec![Val::Null; width]];
        for (k, step) in plan.steps[..p.steps].iter().enumerate() {
            let found: Vec<Vec<Val>> = row
                .get(k)
                .and_then(|v| v.as_ref())
                .map(|values| to_sql(tables[k], values, ctx))
                .into_iter()
                .collect();
            stats[k].read += found.len() as u64;
            let mut next = Vec::new();
            for outer in &rows {
                combine(spec, step, outer, found.iter(), ctx, &mut next)?;
            }
            stats[k].rows += next.len() as u64;
            rows = next;
            if rows.is_empty() {
                break;
            }
        }
        for r in rows {
            if !each(r, ctx)? {
                break 'rows;
            }
        }
    }
    stats[0].batches += 1;
    stats[0].time += started.elapsed();
    Ok(())
}

/// A table's SQL row from every native column's value.
fn to_sql(table: &TableInfo, values: &[Value], ctx: &Ctx<'_>) -> Vec<Val> {
    let positions: Vec<usize> = (0..values.len()).collect();
    sql_row(table, values, &positions, ctx.env.tz_secs)
}
