//! `EXPLAIN` of a query: MySQL's traditional table, `FORMAT=JSON`, and
//! `EXPLAIN ANALYZE` (the query run, its steps' actual rows and times as
//! MySQL's tree text). What it prints is the plan the executor runs: the
//! same `single_access` and `plan::join::plan` calls, on the same
//! `Planned` queries.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use sqlparser::ast;

use super::{env, order_by_index, per_row, plan_query, run_one, single_access, Planned, Plans};
use crate::backend::ResultSink;
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::exec::join::{self as join_exec, StepStats};
use crate::engine::exec::pushed;
use crate::engine::expr::{Ctx, Expr};
use crate::engine::plan::join::{self as join_plan, JoinSpec, KeyedKind, StepAccess};
use crate::engine::plan::Access;
use crate::engine::{send_rows, txn, Answered, Conn};
use crate::error::SqlResult;
use crate::value::{charset, ColumnMeta, ColumnType, SqlValue};

/// One row of the traditional table.
#[derive(Default)]
struct Row {
    id: Option<usize>,
    select_type: &'static str,
    table: Option<String>,
    /// The partitions read (`p0,p3`): the pruned ones, else every one.
    partitions: Vec<String>,
    access_type: Option<&'static str>,
    possible_keys: Vec<String>,
    key: Option<String>,
    key_len: Option<usize>,
    key_parts: Vec<String>,
    refs: Vec<String>,
    rows: Option<u64>,
    extra: Vec<String>,
    /// A condition is tested in the SQL node.
    condition: bool,
    /// Part of it is pushed to the data nodes.
    pushed: bool,
    /// The table is read by batched key access.
    bka: bool,
    /// The table is read whole once and kept: how it is matched.
    buffered: Option<&'static str>,
    /// Its part in a pushed join, as NDB's mysqld says it.
    push: Option<String>,
}

/// Which form.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The table.
    Traditional,
    /// `FORMAT=JSON`.
    Json,
    /// `EXPLAIN ANALYZE`.
    Analyze,
}

/// Runs `EXPLAIN` of a query.
pub fn explain(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    format: Format,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let plans = plan_query(conn, q, &[], Some(&[]))?;
    for p in &plans.planned {
        if let Some(table) = &p.table {
            crate::engine::stats::refresh(conn, table);
        }
    }
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(&[], &environment);
    ctx.killed = Some(&info.query_killed);
    if format == Format::Analyze {
        if plans.planned.iter().any(per_row) {
            return Err(crate::error::SqlError::unsupported(
                "EXPLAIN ANALYZE of a query with correlated subqueries or LATERAL",
            ));
        }
        let text = analyze(conn, &plans, &mut ctx)?;
        return send_text(sink, text, more);
    }
    let mut arms = Vec::new();
    // Ids after the SELECTs of the union: the per-row subqueries'.
    let mut next_id = plans.planned.len() + 1;
    for (at, p) in plans.planned.iter().enumerate() {
        let dependent = per_row(p);
        let select_type = match (plans.planned.len(), at) {
            (1, _) if dependent => "PRIMARY",
            (1, _) => "SIMPLE",
            (_, 0) => "PRIMARY",
            _ => "UNION",
        };
        let mut rows = rows_of(p, &mut ctx)?;
        for r in &mut rows {
            r.id = Some(at + 1);
            r.select_type = select_type;
        }
        // FORMAT=JSON nests subqueries in its own way: only the SELECT.
        if dependent && format == Format::Traditional {
            rows.extend(dependent_rows(conn, p, at + 1, &mut next_id, &mut ctx)?);
        }
        arms.push(rows);
    }
    let union = (plans.planned.len() > 1).then(|| {
        let ids: Vec<String> = (1..=plans.planned.len()).map(|i| i.to_string()).collect();
        format!("<union{}>", ids.join(","))
    });
    send_explain(arms, union, plans.union_distinct, format, more, sink)
}

/// A per-row subquery EXPLAIN shows: its query, the outer columns it
/// names, and whether it is a LATERAL derived table.
type Dependent = (
    Arc<ast::Query>,
    Vec<(crate::engine::expr::ScopeColumn, usize)>,
    bool,
);

/// Per-row depth of EXPLAIN's dependent subqueries shown, at most (a
/// deeper one is run, not shown).
const DEPENDENT_DEPTH_MAX: usize = 16;

/// The rows of what a SELECT runs per row: `LATERAL` derived tables
/// (`<derivedN>` in the SELECT's own rows, then `DEPENDENT DERIVED`) and
/// correlated subqueries (`DEPENDENT SUBQUERY`), each planned as it runs
/// but with sample values for the outer columns (read by key per outer
/// row: `eq_ref` where one row is read by a unique key).
fn dependent_rows(
    conn: &mut Conn<'_>,
    p: &Planned,
    id: usize,
    next_id: &mut usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Row>> {
    let mut subs: Vec<Dependent> = Vec::new();
    for lat in &p.laterals {
        subs.push((Arc::clone(&lat.query), lat.outer.clone(), true));
    }
    let exprs = p
        .items
        .iter()
        .chain(&p.late)
        .chain(&p.group)
        .chain(&p.having)
        .chain(p.order.iter().map(|(e, _)| e))
        .chain(p.laterals.iter().filter_map(|l| l.on.as_ref()));
    subqueries_of(exprs, &mut subs);
    dependent_rows_of(conn, subs, id, next_id, ctx)
}

/// Adds the per-row subqueries of `exprs` to `subs`, each text once.
fn subqueries_of<'e>(exprs: impl IntoIterator<Item = &'e Expr>, subs: &mut Vec<Dependent>) {
    for e in exprs {
        e.each(&mut |x| {
            if let Expr::Sub(s) = x {
                if !subs.iter().any(|(q, ..)| q.to_string() == *s.text) {
                    subs.push((Arc::clone(&s.query), s.outer.clone(), false));
                }
            }
        });
    }
}

/// The rows of the per-row subqueries `subs` of the SELECT (or UPDATE,
/// DELETE) numbered `id`.
fn dependent_rows_of(
    conn: &mut Conn<'_>,
    subs: Vec<Dependent>,
    id: usize,
    next_id: &mut usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Row>> {
    let mut out = Vec::new();
    for (q, outer, derived) in subs {
        let sub_id = *next_id;
        *next_id += 1;
        if derived {
            out.push(Row {
                id: Some(id),
                select_type: "PRIMARY",
                table: Some(format!("<derived{sub_id}>")),
                access_type: Some("ALL"),
                ..Row::default()
            });
        }
        let sample = crate::engine::expr::OuterRow {
            columns: outer.iter().map(|(c, _)| c.clone()).collect(),
            values: outer
                .iter()
                .map(|(c, _)| crate::engine::expr::sample_value(c.kind))
                .collect(),
        };
        let depth = conn.subqueries.outer.len();
        let inner = crate::engine::exec::correlated::with_outer(conn, sample, |conn| {
            let plans = plan_query(conn, &q, &[], Some(&[]))?;
            for sp in &plans.planned {
                if let Some(table) = &sp.table {
                    crate::engine::stats::refresh(conn, table);
                }
            }
            let database = conn.session.database.clone().unwrap_or_default();
            let outer_names: Vec<String> = outer
                .iter()
                .map(|(c, _)| format!("{database}.{}.{}", c.table, c.name))
                .collect();
            let mut rows = Vec::new();
            for sp in &plans.planned {
                let mut these = rows_of(sp, ctx)?;
                for r in &mut these {
                    r.id = Some(sub_id);
                    r.select_type = if derived {
                        "DEPENDENT DERIVED"
                    } else {
                        "DEPENDENT SUBQUERY"
                    };
                    // Read by key per outer row, not once.
                    if r.access_type == Some("const") {
                        r.access_type = Some("eq_ref");
                        // The key's values come from the outer row.
                        if r.refs.len() == outer_names.len() {
                            r.refs.clone_from(&outer_names);
                        } else {
                            r.refs = vec!["func".into(); r.refs.len()];
                        }
                    }
                }
                rows.extend(these);
                if per_row(sp) && depth < DEPENDENT_DEPTH_MAX {
                    rows.extend(dependent_rows(conn, sp, sub_id, next_id, ctx)?);
                }
            }
            Ok(rows)
        })?;
        out.extend(inner);
    }
    Ok(out)
}

/// `EXPLAIN [FORMAT=JSON] UPDATE|DELETE` of one table: the access the
/// executor runs (`exec::write`'s `plan::access` of the conjuncts `cond`;
/// `late` ones, with correlated subqueries, are tested after the read),
/// `select_type` `UPDATE` or `DELETE` as MySQL 8 prints it, then the
/// `DEPENDENT SUBQUERY` rows of the per-row subqueries of `late` and
/// `more_exprs` (SET, ORDER BY). `filesort`: an ORDER BY sorts the rows.
#[allow(clippy::too_many_arguments)]
pub fn explain_write(
    conn: &mut Conn<'_>,
    table: &TableInfo,
    select_type: &'static str,
    cond: Option<&Expr>,
    late: Option<&Expr>,
    more_exprs: &[&Expr],
    filesort: bool,
    format: Format,
    ctx: &mut Ctx<'_>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if format == Format::Analyze {
        return Err(crate::error::SqlError::unsupported(format_args!(
            "EXPLAIN ANALYZE of {select_type}"
        )));
    }
    crate::engine::stats::refresh(conn, table);
    let (access, filter) = crate::engine::plan::access(table, cond, ctx)?;
    let mut row = access_row(table, &access, cond.is_some() || late.is_some());
    if access == Access::Nothing {
        row = Row {
            extra: vec!["Impossible WHERE".into()],
            ..Row::default()
        };
    } else {
        row.pushed = filter.is_some() && scans(&StepAccess::Own(access.clone()));
        row.table = Some(table.name.clone());
        row.partitions = partition_names(&crate::engine::plan::partitions_read(table, cond, ctx)?);
        let conds: Vec<Expr> = cond
            .into_iter()
            .chain(late)
            .flat_map(|c| c.conjuncts())
            .cloned()
            .collect();
        if !conds.is_empty() {
            row.possible_keys = possible_keys(table, &join_plan::Hints::default(), 0, &conds);
        }
        if filesort {
            row.extra.push("Using filesort".into());
        }
    }
    row.id = Some(1);
    row.select_type = select_type;
    let mut rows = vec![row];
    // As a SELECT's: FORMAT=JSON shows only the statement's own row.
    if format == Format::Traditional {
        let mut subs = Vec::new();
        subqueries_of(
            late.into_iter().chain(more_exprs.iter().copied()),
            &mut subs,
        );
        let mut next_id = 2;
        rows.extend(dependent_rows_of(conn, subs, 1, &mut next_id, ctx)?);
    }
    send_explain(vec![rows], None, false, format, more, sink)
}

/// Sends EXPLAIN's rows (one list per SELECT of a union) as the table or
/// the JSON document.
fn send_explain(
    arms: Vec<Vec<Row>>,
    union: Option<String>,
    union_distinct: bool,
    format: Format,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if format == Format::Json {
        let text = json(&arms, union.as_deref(), union_distinct);
        return send_text(sink, text, more);
    }
    let mut out: Vec<Row> = arms.into_iter().flatten().collect();
    if let Some(name) = union {
        out.push(Row {
            select_type: "UNION RESULT",
            table: Some(name),
            access_type: Some("ALL"),
            extra: if union_distinct {
                vec!["Using temporary".into()]
            } else {
                Vec::new()
            },
            ..Row::default()
        });
    }
    let columns: Vec<ColumnMeta> = [
        "id",
        "select_type",
        "table",
        "partitions",
        "type",
        "possible_keys",
        "key",
        "key_len",
        "ref",
        "rows",
        "filtered",
        "Extra",
    ]
    .iter()
    .map(|n| match *n {
        "id" | "rows" => ColumnMeta::expr(*n, ColumnType::LongLong, charset::BINARY, 21),
        "filtered" => {
            let mut m = ColumnMeta::expr(*n, ColumnType::NewDecimal, charset::BINARY, 7);
            m.decimals = 2;
            m
        }
        _ => text_meta(n),
    })
    .collect();
    let text = |s: Option<String>| s.map_or(SqlValue::Null, |s| SqlValue::Bytes(s.into_bytes()));
    let list = |v: &[String]| (!v.is_empty()).then(|| v.join(","));
    let rows = out
        .into_iter()
        .map(|r| {
            let extra = extra_of(&r);
            vec![
                r.id.map_or(SqlValue::Null, |i| SqlValue::Int(i as i64)),
                SqlValue::Bytes(r.select_type.as_bytes().to_vec()),
                text(r.table),
                text(list(&r.partitions)),
                text(r.access_type.map(str::to_owned)),
                text(list(&r.possible_keys)),
                text(r.key),
                text(r.key_len.map(|l| l.to_string())),
                text(list(&r.refs)),
                r.rows.map_or(SqlValue::Null, |n| SqlValue::Int(n as i64)),
                if r.access_type.is_some() {
                    SqlValue::Decimal("100.00".to_owned())
                } else {
                    SqlValue::Null
                },
                text((!extra.is_empty()).then(|| extra.join("; "))),
            ]
        })
        .collect();
    send_rows(sink, &columns, rows, more)?;
    Ok(Answered::Done)
}

fn text_meta(name: &str) -> ColumnMeta {
    ColumnMeta::expr(
        name,
        ColumnType::VarString,
        charset::UTF8MB4_GENERAL_CI,
        1024,
    )
}

/// The Extra column of a row.
fn extra_of(r: &Row) -> Vec<String> {
    let mut extra: Vec<String> = r.push.iter().cloned().collect();
    if r.condition {
        extra.push("Using where".to_owned());
    }
    if r.pushed {
        extra.push("Using pushed condition".to_owned());
    }
    if r.bka {
        extra.push("Using join buffer (Batched Key Access)".to_owned());
    }
    if let Some(how) = r.buffered {
        extra.push(format!("Using join buffer ({how})"));
    }
    extra.extend(r.extra.iter().cloned());
    extra
}

/// The rows of one SELECT of the query.
fn rows_of(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<Vec<Row>> {
    let grouped = !p.group.is_empty() || p.distinct;
    let mut sort_extra = Vec::new();
    if grouped {
        sort_extra.push("Using temporary".to_owned());
    }
    if let Some(spec) = &p.join {
        let plan = join_plan::plan(spec, p.cond.as_ref(), ctx)?;
        if !p.order.is_empty() {
            sort_extra.push("Using filesort".into());
        }
        let mut rows = Vec::new();
        for (at, step) in plan.steps.iter().enumerate() {
            let t = &spec.tables[step.table];
            let mut conds: Vec<Expr> = step.matching.clone();
            conds.extend(step.post.iter().cloned());
            let mut row = match &step.access {
                StepAccess::Own(access) => {
                    let own = own_conds(spec, step.table, &conds);
                    let mut row = access_row(&t.table, access, !own.is_empty());
                    row.buffered = (at > 0).then(|| match join_exec::hash_pair(spec, step) {
                        Some(_) => "hash join",
                        None => "Block Nested Loop",
                    });
                    // Conditions on the earlier tables, tested per pair.
                    row.condition |= conds.len() > own.len();
                    row
                }
                StepAccess::Keyed(k) => {
                    let mut row = Row {
                        access_type: Some(match k.kind {
                            KeyedKind::Primary | KeyedKind::Unique => "eq_ref",
                            KeyedKind::Ordered => "ref",
                        }),
                        key: Some(k.key.clone()),
                        key_len: Some(k.columns.iter().map(|c| column_len(&t.table, *c)).sum()),
                        key_parts: k
                            .columns
                            .iter()
                            .map(|c| t.table.columns[*c].name.clone())
                            .collect(),
                        refs: k
                            .exprs
                            .iter()
                            .map(|e| match e {
                                Expr::Col(c) => column_ref(spec, *c),
                                _ => "func".to_owned(),
                            })
                            .collect(),
                        rows: Some(step.rows),
                        bka: true,
                        ..Row::default()
                    };
                    row.condition = conds.len() > k.columns.len();
                    row
                }
            };
            // Key reads take no filter: only a scan's is pushed.
            row.pushed = step.filter.is_some() && scans(&step.access);
            row.table = Some(t.alias.clone());
            // A subquery run as a semi-join / anti-join (MySQL 8's words).
            match t.semi {
                Some(join_plan::SemiKind::Semi) => {
                    let back = at
                        .checked_sub(1)
                        .map(|b| spec.tables[plan.steps[b].table].alias.clone());
                    row.extra
                        .push(format!("FirstMatch({})", back.unwrap_or_default()));
                }
                Some(join_plan::SemiKind::Anti) => row.extra.push("Not exists".into()),
                None => {}
            }
            row.partitions = match &step.access {
                StepAccess::Own(_) => {
                    let local = |c: usize| c - t.offset;
                    let own: Vec<Expr> = own_conds(spec, step.table, &conds)
                        .into_iter()
                        .map(|e| join_plan::map_columns(e, &local))
                        .collect();
                    let own = join_plan::and_all(&own);
                    partition_names(&crate::engine::plan::partitions_read(
                        &t.table,
                        own.as_ref(),
                        ctx,
                    )?)
                }
                // Read by key per outer row: any partition.
                StepAccess::Keyed(_) => {
                    partition_names(&crate::engine::plan::partitions_read(&t.table, None, ctx)?)
                }
            };
            row.possible_keys = possible_keys(&t.table, &t.hints, t.offset, &conds);
            if at == 0 {
                row.extra.extend(sort_extra.iter().cloned());
            }
            rows.push(row);
        }
        let lock = p.lock.is_some();
        if let Some(pj) = pushed::pushable(spec, &plan, lock, ctx.env.join_pushdown) {
            rows[0].push = Some(format!("Parent of {} pushed join@1", pj.steps));
            for (k, (parent, _)) in pj.children.iter().enumerate() {
                let parent = &spec.tables[plan.steps[*parent].table].alias;
                rows[k + 1].bka = false;
                rows[k + 1].push = Some(format!("Child of '{parent}' in pushed join@1"));
            }
        }
        // Late conjuncts (correlated subqueries) are tested on the rows
        // the join made.
        if let Some(last) = rows.last_mut() {
            last.condition |= p.late.is_some();
        }
        return Ok(rows);
    }
    let Some(table) = &p.table else {
        let mut row = Row::default();
        if let Some(virtual_rows) = &p.rows {
            row.table = p.source.first().map(|c| c.table.to_string());
            row.access_type = Some("ALL");
            row.rows = Some(virtual_rows.len() as u64);
            row.condition = p.cond.is_some() || p.late.is_some();
        } else {
            row.extra.push("No tables used".into());
        }
        return Ok(vec![row]);
    };
    let (access, filter) = single_access(table, p, ctx)?;
    let (_, sorted) = order_by_index(table, p, &access);
    let mut row = access_row(table, &access, p.cond.is_some() || p.late.is_some());
    row.pushed = filter.is_some() && scans(&StepAccess::Own(access.clone()));
    row.partitions = partition_names(&crate::engine::plan::partitions_read(
        table,
        p.cond.as_ref(),
        ctx,
    )?);
    row.table = Some(
        p.source
            .first()
            .map_or_else(|| table.name.clone(), |c| c.table.to_string()),
    );
    if let Some(cond) = &p.cond {
        row.possible_keys = possible_keys(
            table,
            &p.hints,
            0,
            &cond.conjuncts().into_iter().cloned().collect::<Vec<_>>(),
        );
    }
    if access == Access::Nothing {
        return Ok(vec![Row {
            extra: vec!["Impossible WHERE".into()],
            ..Row::default()
        }]);
    }
    row.extra.extend(sort_extra);
    if !sorted && !p.order.is_empty() {
        row.extra.push("Using filesort".into());
    }
    Ok(vec![row])
}

/// Partition numbers as MySQL names the partitions of `PARTITION BY KEY`.
fn partition_names(partitions: &[u32]) -> Vec<String> {
    partitions.iter().map(|p| format!("p{p}")).collect()
}

/// Whether an access scans (and so takes a pushed filter).
fn scans(access: &StepAccess) -> bool {
    matches!(
        access,
        StepAccess::Own(Access::Range { .. } | Access::Scan)
            | StepAccess::Keyed(join_plan::Keyed {
                kind: KeyedKind::Ordered,
                ..
            })
    )
}

/// The conditions of a step that read only its table.
fn own_conds<'c>(spec: &JoinSpec, table: usize, conds: &'c [Expr]) -> Vec<&'c Expr> {
    conds
        .iter()
        .filter(|c| {
            let mut cols = Vec::new();
            join_plan::columns(c, &mut cols);
            !cols.is_empty()
                && cols
                    .iter()
                    .all(|p| join_plan::table_at(spec, *p) == Some(table))
        })
        .collect()
}

/// A row for a table read by its own conditions.
fn access_row(table: &TableInfo, access: &Access, has_cond: bool) -> Row {
    let key_of = |native: &str| {
        join_plan::key_name(table, native)
            .unwrap_or(native)
            .to_owned()
    };
    let pk_len = || {
        table
            .native
            .def()
            .primary_key
            .iter()
            .filter_map(|n| table.columns.iter().position(|c| c.native == *n))
            .map(|c| column_len(table, c))
            .sum()
    };
    let mut row = Row::default();
    match access {
        Access::Keys(keys) => {
            let one = keys.len() == 1;
            row.access_type = Some(if one { "const" } else { "range" });
            row.key = Some("PRIMARY".into());
            row.key_len = Some(pk_len());
            if one {
                row.refs = vec!["const".into(); table.native.def().primary_key.len()];
            }
            row.rows = Some(keys.len() as u64);
            row.condition = !one && has_cond;
        }
        Access::Unique { index, keys } => {
            let one = keys.len() == 1;
            row.access_type = Some(if one { "const" } else { "range" });
            row.key = Some(key_of(index));
            let columns = index_columns(table, index);
            row.key_len = Some(columns.iter().map(|c| column_len(table, *c)).sum());
            if one {
                row.refs = vec!["const".into(); columns.len()];
            }
            row.rows = Some(keys.len() as u64);
            row.condition = !one && has_cond;
        }
        Access::Range {
            index,
            lower,
            upper,
            columns,
            points,
        } => {
            row.key = Some(key_of(index));
            let used = lower
                .as_ref()
                .map_or(0, |(v, _)| v.len())
                .max(upper.as_ref().map_or(0, |(v, _)| v.len()))
                .max(points.first().map_or(0, Vec::len));
            let used = if used == 0 { columns.len() } else { used };
            row.key_len = Some(
                columns
                    .iter()
                    .take(used)
                    .map(|c| column_len(table, *c))
                    .sum(),
            );
            if !points.is_empty() {
                // MySQL shows an IN list on an index as a range.
                row.access_type = Some("range");
            } else if lower.is_none() && upper.is_none() {
                row.access_type = Some("index");
            } else if lower.as_ref().map(|(v, _)| v) == upper.as_ref().map(|(v, _)| v)
                && lower.as_ref().is_some_and(|(_, inc)| *inc)
            {
                row.access_type = Some("ref");
                row.refs = vec!["const".into(); used];
            } else {
                row.access_type = Some("range");
            }
            row.rows = Some(join_plan::estimate_rows(table, access));
            row.condition = has_cond;
        }
        Access::Scan => {
            row.access_type = Some("ALL");
            row.rows = Some(join_plan::estimate_rows(table, access));
            row.condition = has_cond;
        }
        Access::Nothing => {}
    }
    row
}

/// SQL positions of a native index's columns.
fn index_columns(table: &TableInfo, index: &str) -> Vec<usize> {
    table
        .native
        .def()
        .indexes
        .iter()
        .find(|i| i.name == index)
        .map(|i| {
            i.columns
                .iter()
                .filter_map(|n| table.columns.iter().position(|c| c.native == *n))
                .collect()
        })
        .unwrap_or_default()
}

/// `db.alias.column` of a combined position, as MySQL's `ref` shows it.
fn column_ref(spec: &JoinSpec, col: usize) -> String {
    match join_plan::table_at(spec, col) {
        // A derived table or view (no database): `alias.column`.
        Some(t) if spec.tables[t].table.db.is_empty() => {
            let t = &spec.tables[t];
            format!("{}.{}", t.alias, t.table.columns[col - t.offset].name)
        }
        Some(t) => {
            let t = &spec.tables[t];
            format!(
                "{}.{}.{}",
                t.table.db,
                t.alias,
                t.table.columns[col - t.offset].name
            )
        }
        None => "func".into(),
    }
}

/// The keys (allowed by the hints) whose first column a condition reads.
fn possible_keys(
    table: &TableInfo,
    hints: &join_plan::Hints,
    offset: usize,
    conds: &[Expr],
) -> Vec<String> {
    let mut read = Vec::new();
    for c in conds {
        join_plan::columns(c, &mut read);
    }
    table
        .keys
        .iter()
        .filter(|k| hints.allows_key(&k.name))
        .filter(|k| {
            k.columns.first().is_some_and(|n| {
                table
                    .columns
                    .iter()
                    .position(|c| c.native == *n)
                    .is_some_and(|p| read.contains(&(p + offset)))
            })
        })
        .map(|k| k.name.clone())
        .collect()
}

/// MySQL's key length of a column: its stored bytes, +2 for a variable
/// length, +1 when nullable (utf8mb4: 4 bytes a character).
fn column_len(table: &TableInfo, col: usize) -> usize {
    let Some(c) = table.columns.get(col) else {
        return 0;
    };
    let frac = |fsp: u8| usize::from(fsp).div_ceil(2);
    let base = match &c.ty {
        SqlType::TinyInt { .. } | SqlType::Year => 1,
        SqlType::SmallInt { .. } => 2,
        SqlType::MediumInt { .. } | SqlType::Date => 3,
        SqlType::Int { .. } | SqlType::Float => 4,
        SqlType::BigInt { .. } | SqlType::Double => 8,
        SqlType::Decimal { precision, scale } => {
            let digits = |d: u8| {
                let d = usize::from(d);
                const LEFTOVER: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
                d / 9 * 4 + LEFTOVER[d % 9]
            };
            digits(precision.saturating_sub(*scale)) + digits(*scale)
        }
        SqlType::Char { length, .. } => usize::from(*length) * 4,
        SqlType::VarChar { max, .. } => usize::from(*max) * 4 + 2,
        SqlType::Binary { length } => usize::from(*length),
        SqlType::VarBinary { max } => usize::from(*max) + 2,
        SqlType::Time { fsp } => 3 + frac(*fsp),
        SqlType::DateTime { fsp } => 5 + frac(*fsp),
        SqlType::Timestamp { fsp } => 4 + frac(*fsp),
        SqlType::Bit { bits } => usize::from(*bits).div_ceil(8),
        SqlType::Enum(_) => 2,
        SqlType::Set(_) => 8,
        _ => 0,
    };
    base + usize::from(c.nullable)
}

/// A JSON string literal.
fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One `table` object of MySQL's JSON form.
fn table_json(r: &Row, indent: &str) -> String {
    let mut fields: Vec<String> = Vec::new();
    if let Some(t) = &r.table {
        fields.push(format!("\"table_name\": {}", js(t)));
    }
    let array = |v: &[String]| {
        let items: Vec<String> = v.iter().map(|s| js(s)).collect();
        format!("[{}]", items.join(", "))
    };
    if !r.partitions.is_empty() {
        fields.push(format!("\"partitions\": {}", array(&r.partitions)));
    }
    if let Some(a) = r.access_type {
        fields.push(format!("\"access_type\": {}", js(a)));
    }
    if !r.possible_keys.is_empty() {
        fields.push(format!("\"possible_keys\": {}", array(&r.possible_keys)));
    }
    if let Some(k) = &r.key {
        fields.push(format!("\"key\": {}", js(k)));
    }
    if !r.key_parts.is_empty() {
        fields.push(format!("\"used_key_parts\": {}", array(&r.key_parts)));
    }
    if let Some(l) = r.key_len {
        fields.push(format!("\"key_length\": {}", js(&l.to_string())));
    }
    if !r.refs.is_empty() {
        fields.push(format!("\"ref\": {}", array(&r.refs)));
    }
    if let Some(n) = r.rows {
        fields.push(format!("\"rows_examined_per_scan\": {n}"));
        fields.push("\"filtered\": \"100.00\"".to_owned());
    }
    if r.bka {
        fields.push("\"using_join_buffer\": \"Batched Key Access\"".to_owned());
    }
    if let Some(how) = r.buffered {
        fields.push(format!("\"using_join_buffer\": {}", js(how)));
    }
    if r.pushed {
        fields.push("\"pushed_condition\": true".to_owned());
    }
    if r.condition {
        fields.push("\"attached_condition\": true".to_owned());
    }
    for e in &r.extra {
        match e.as_str() {
            "Using filesort" => fields.push("\"using_filesort\": true".to_owned()),
            "Using temporary" => fields.push("\"using_temporary_table\": true".to_owned()),
            other => fields.push(format!("\"message\": {}", js(other))),
        }
    }
    let inner = format!("{indent}  ");
    format!(
        "{{\n{inner}{}\n{indent}}}",
        fields.join(&format!(",\n{inner}"))
    )
}

/// One `query_block`: a single table directly, a join as `nested_loop`.
fn block_json(id: usize, rows: &[Row], indent: &str) -> String {
    let i1 = format!("{indent}  ");
    let i2 = format!("{indent}    ");
    let body = match rows {
        [one] => format!("\"table\": {}", table_json(one, &i1)),
        many => {
            let i3 = format!("{indent}      ");
            let items: Vec<String> = many
                .iter()
                .map(|r| format!("{i2}{{\n{i3}\"table\": {}\n{i2}}}", table_json(r, &i3)))
                .collect();
            format!("\"nested_loop\": [\n{}\n{i1}]", items.join(",\n"))
        }
    };
    format!("{{\n{i1}\"select_id\": {id},\n{i1}{body}\n{indent}}}")
}

/// MySQL's `EXPLAIN FORMAT=JSON` document.
fn json(arms: &[Vec<Row>], union: Option<&str>, distinct: bool) -> String {
    match union {
        None => format!(
            "{{\n  \"query_block\": {}\n}}",
            block_json(1, arms.first().map_or(&[][..], Vec::as_slice), "  ")
        ),
        Some(name) => {
            let specs: Vec<String> = arms
                .iter()
                .enumerate()
                .map(|(at, rows)| {
                    format!(
                        "        {{\n          \"dependent\": false,\n          \
                         \"cacheable\": true,\n          \"query_block\": {}\n        }}",
                        block_json(at + 1, rows, "          ")
                    )
                })
                .collect();
            format!(
                "{{\n  \"query_block\": {{\n    \"union_result\": {{\n      \
                 \"using_temporary_table\": {distinct},\n      \"table_name\": {},\n      \
                 \"access_type\": \"ALL\",\n      \"query_specifications\": [\n{}\n      ]\n    \
                 }}\n  }}\n}}",
                js(name),
                specs.join(",\n")
            )
        }
    }
}

/// Runs the query and describes what each step did, as MySQL's
/// `EXPLAIN ANALYZE` tree (times in milliseconds).
fn analyze(conn: &mut Conn<'_>, plans: &Plans, ctx: &mut Ctx<'_>) -> SqlResult<String> {
    let tx = txn::take(conn)?;
    let result = (|| {
        let mut text = String::new();
        for p in &plans.planned {
            let started = Instant::now();
            if let Some(spec) = &p.join {
                let plan = join_plan::plan(spec, p.cond.as_ref(), ctx)?;
                let mut stats = Vec::new();
                let rows = join_exec::run(&tx, spec, &plan, p.lock, ctx, Some(&mut stats), None)?;
                let found = rows.into_iter().map(|r| (r, Vec::new())).collect();
                let out = super::shape(p, found, ctx)?;
                text.push_str(&join_tree(spec, &plan, &stats, out.len(), started));
            } else {
                let out = run_one(&tx, p, ctx, None)?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                let name = p
                    .source
                    .first()
                    .map_or_else(String::new, |c| c.table.to_string());
                let what = match &p.table {
                    Some(table) => {
                        let (access, _) = single_access(table, p, ctx)?;
                        step_text(table, &name, &StepAccess::Own(access), None)
                    }
                    None => "Rows fetched before execution".to_owned(),
                };
                let _ = writeln!(
                    text,
                    "-> {what}  (actual time=0.000..{ms:.3} rows={} loops=1)",
                    out.len()
                );
            }
        }
        Ok(text)
    })();
    txn::finish(conn, tx, result)
}

/// How a step reads its table, in MySQL's tree words.
fn step_text(
    table: &TableInfo,
    alias: &str,
    access: &StepAccess,
    spec: Option<&JoinSpec>,
) -> String {
    match access {
        StepAccess::Own(a) => match a {
            Access::Scan => format!("Table scan on {alias}"),
            Access::Nothing => "Zero rows (Impossible WHERE)".to_owned(),
            Access::Keys(k) => format!("Rows fetched by primary key on {alias} ({} keys)", k.len()),
            Access::Unique { index, keys } => format!(
                "Rows fetched by unique key on {alias} using {} ({} keys)",
                join_plan::key_name(table, index).unwrap_or(index),
                keys.len()
            ),
            Access::Range {
                index,
                lower,
                upper,
                ..
            } => {
                let key = join_plan::key_name(table, index).unwrap_or(index);
                if lower.is_none() && upper.is_none() {
                    format!("Index scan on {alias} using {key}")
                } else {
                    format!("Index range scan on {alias} using {key}")
                }
            }
        },
        StepAccess::Keyed(k) => {
            let refs: Vec<String> = k
                .columns
                .iter()
                .zip(&k.exprs)
                .map(|(c, e)| {
                    let r = match (e, spec) {
                        (Expr::Col(p), Some(spec)) => column_ref(spec, *p),
                        _ => "func".into(),
                    };
                    format!("{}={r}", table.columns[*c].name)
                })
                .collect();
            let what = match k.kind {
                KeyedKind::Primary | KeyedKind::Unique => "Single-row index lookup",
                KeyedKind::Ordered => "Index lookup",
            };
            format!(
                "{what} on {alias} using {} ({}), batched key access",
                k.key,
                refs.join(", ")
            )
        }
    }
}

/// A join's tree: left-deep nested loops, the last step innermost-last.
fn join_tree(
    spec: &JoinSpec,
    plan: &join_plan::JoinPlan,
    stats: &[StepStats],
    rows: usize,
    started: Instant,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    let n = plan.steps.len();
    // Lines of the nested-loop nodes from the outside in.
    for depth in 0..n.saturating_sub(1) {
        let step = &plan.steps[n - 1 - depth];
        let kind = if spec.tables[step.table].outer {
            "left"
        } else {
            "inner"
        };
        let st = stats.get(n - 1 - depth).cloned().unwrap_or_default();
        let (ms, out) = if depth == 0 {
            (started.elapsed().as_secs_f64() * 1e3, rows as u64)
        } else {
            (st.time.as_secs_f64() * 1e3, st.rows)
        };
        lines.push(format!(
            "{}-> Nested loop {kind} join  (actual time=0.000..{ms:.3} rows={out} loops=1)",
            "    ".repeat(depth)
        ));
    }
    // The steps: the first at the deepest level, each later one beside
    // the nested loop it joins.
    let mut steps: Vec<String> = Vec::new();
    for (at, step) in plan.steps.iter().enumerate() {
        let t = &spec.tables[step.table];
        let st = stats.get(at).cloned().unwrap_or_default();
        let depth = if at == 0 { n - 1 } else { n - at };
        steps.push(format!(
            "{}-> {}  (actual time=0.000..{:.3} rows={} loops={})",
            "    ".repeat(depth),
            step_text(&t.table, &t.alias, &step.access, Some(spec)),
            st.time.as_secs_f64() * 1e3,
            st.read,
            st.batches.max(1)
        ));
    }
    // Order: outer node, then (recursively) its left input, then its right
    // step: nested line i is followed by the lines of depth i+1, and the
    // step that node joins comes after its whole left input.
    let mut out = String::new();
    let mut tail: Vec<String> = Vec::new();
    for (depth, line) in lines.iter().enumerate() {
        out.push_str(line);
        out.push('\n');
        tail.push(steps[n - 1 - depth].clone());
    }
    out.push_str(&steps[0]);
    out.push('\n');
    for line in tail.iter().rev() {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One text cell named `EXPLAIN` (the JSON and ANALYZE forms).
fn send_text(sink: &mut dyn ResultSink, text: String, more: bool) -> SqlResult<Answered> {
    send_rows(
        sink,
        &[text_meta("EXPLAIN")],
        vec![vec![SqlValue::Bytes(text.into_bytes())]],
        more,
    )?;
    Ok(Answered::Done)
}
