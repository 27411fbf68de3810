//! `EXPLAIN` of a query: MySQL's traditional table, `FORMAT=JSON`, and
//! `EXPLAIN ANALYZE` (the query run, its steps' actual rows and times as
//! MySQL's tree text). What it prints is the plan the executor runs: the
//! same `single_access` and `plan::join::plan` calls, on the same
//! `Planned` queries.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use sqlparser::ast;

use super::{
    env, order_by_index, per_row, per_row_queries, plan_query, run_one, single_access, LateralRows,
    Planned, Plans,
};
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
#[derive(Clone, Default)]
pub(crate) struct Row {
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
    /// FORMAT=JSON: the per-row subqueries of the conditions tested at
    /// this table (each rendered at no indent).
    attached: Vec<String>,
    /// FORMAT=JSON: a LATERAL table's `materialized_from_subquery`.
    materialised: Option<String>,
    /// The table's rows are kept ones (a derived table, view or CTE).
    kept: bool,
    /// A recursive CTE's block reading the CTE itself.
    recursive: bool,
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
    /// `FORMAT=TREE` (MySQL 8's; Django's `explain()` asks for it): the
    /// tree `EXPLAIN ANALYZE` prints, with the planner's estimated rows
    /// instead of what a run did.
    Tree,
}

/// Runs `EXPLAIN` of a query.
pub fn explain(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    format: Format,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    // The traditional table lists derived tables' queries: noted as
    // they run while the query is planned.
    if format == Format::Traditional {
        conn.subqueries.explain = Some(ExplainNotes::default());
    }
    let plans = plan_query(conn, q, &[], Some(&[]));
    let notes = conn.subqueries.explain.take();
    let plans = plans?;
    for p in &plans.planned {
        if let Some(table) = &p.table {
            crate::engine::stats::refresh(conn, table);
        }
    }
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(&[], &environment);
    ctx.killed = Some(&info.query_killed);
    let notes = notes.map(|n| n.notes).unwrap_or_default();
    let top = direct_children(&notes, 0..notes.len());
    let mut used = vec![false; notes.len()];
    let mut derived_ids = std::collections::HashMap::new();
    if format == Format::Analyze {
        let text = if plans.planned.iter().any(per_row) {
            analyze_per_row(conn, &plans, &mut ctx)?
        } else {
            analyze(conn, &plans, &mut ctx)?
        };
        return send_text(sink, text, more);
    }
    if format == Format::Tree {
        let text = tree(&plans, &mut ctx)?;
        return send_text(sink, text, more);
    }
    let mut arms = Vec::new();
    let mut blocks = Vec::new();
    // Ids after the SELECTs of the union: the per-row subqueries'.
    let mut next_id = plans.planned.len() + 1;
    let linkage = plans.sets.linkage();
    for (at, p) in plans.planned.iter().enumerate() {
        // A JSON_TABLE runs per row, but as a table of the SELECT's own.
        let dependent = per_row_queries(p);
        let select_type = match (plans.planned.len(), at) {
            (1, _) if dependent => "PRIMARY",
            (1, _) => "SIMPLE",
            (_, 0) => "PRIMARY",
            _ => linkage.get(at - 1).map_or("UNION", |op| op.word()),
        };
        let mut rows = rows_of(p, &mut ctx)?;
        let derived = expand_derived(
            &notes,
            &top,
            &mut rows,
            &mut next_id,
            &mut derived_ids,
            &mut used,
        );
        let select_type = if select_type == "SIMPLE" && !derived.is_empty() {
            "PRIMARY"
        } else {
            select_type
        };
        for r in &mut rows {
            r.id = Some(at + 1);
            r.select_type = select_type;
        }
        rows.extend(derived);
        if dependent && format == Format::Traditional {
            rows.extend(dependent_rows(conn, p, at + 1, &mut next_id, &mut ctx)?);
        }
        if format == Format::Json {
            // FORMAT=JSON nests the subqueries in the SELECT's block.
            blocks.push(block_json_of(
                conn,
                p,
                rows,
                at + 1,
                &mut next_id,
                &mut ctx,
            )?);
            continue;
        }
        arms.push(rows);
    }
    let ids: Vec<usize> = (1..=plans.planned.len()).collect();
    let union = (plans.planned.len() > 1).then(|| plans.result_row(&ids));
    if format == Format::Json {
        let name = union.as_ref().map(|(_, name)| name.as_str());
        return send_text(sink, json(&blocks, name, plans.union_distinct()), more);
    }
    send_explain(arms, union, plans.union_distinct(), format, more, sink)
}

/// Where a per-row subquery is used: MySQL's place for it in EXPLAIN
/// ANALYZE's words and FORMAT=JSON's nesting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clause {
    /// A `LATERAL` derived table.
    Lateral,
    /// The select list.
    Projection,
    /// WHERE or an ON.
    Condition,
    GroupBy,
    Having,
    OrderBy,
}

/// A per-row subquery EXPLAIN shows: its query, the outer columns it
/// names, and where it is used.
struct Dependent {
    query: Arc<ast::Query>,
    outer: Vec<(crate::engine::expr::ScopeColumn, usize)>,
    clause: Clause,
}

/// Per-row depth of EXPLAIN's dependent subqueries shown, at most (a
/// deeper one is run, not shown).
const DEPENDENT_DEPTH_MAX: usize = 16;

/// What a SELECT runs per row, each text once, in the order EXPLAIN
/// numbers them: `LATERAL` derived tables, then the subqueries of the
/// select list, WHERE, GROUP BY, HAVING, ORDER BY and the LATERAL tables'
/// ON.
fn dependents_of(p: &Planned) -> Vec<Dependent> {
    let mut subs: Vec<Dependent> = p
        .laterals
        .iter()
        .filter_map(|lat| match &lat.rows {
            LateralRows::Query { query, outer, .. } => Some(Dependent {
                query: Arc::clone(query),
                outer: outer.clone(),
                clause: Clause::Lateral,
            }),
            // A table of its own row in the SELECT's rows.
            LateralRows::Json(_) => None,
        })
        .collect();
    subqueries_of(&p.items, Clause::Projection, &mut subs);
    subqueries_of(&p.late, Clause::Condition, &mut subs);
    subqueries_of(&p.group, Clause::GroupBy, &mut subs);
    subqueries_of(&p.having, Clause::Having, &mut subs);
    subqueries_of(p.order.iter().map(|(e, _)| e), Clause::OrderBy, &mut subs);
    subqueries_of(
        p.laterals.iter().filter_map(|l| l.on.as_ref()),
        Clause::Condition,
        &mut subs,
    );
    subs
}

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
    dependent_rows_of(conn, dependents_of(p), id, next_id, ctx)
}

/// Adds the per-row subqueries of `exprs` to `subs`, each text once.
fn subqueries_of<'e>(
    exprs: impl IntoIterator<Item = &'e Expr>,
    clause: Clause,
    subs: &mut Vec<Dependent>,
) {
    for e in exprs {
        e.each(&mut |x| {
            if let Expr::Sub(s) = x {
                if !subs.iter().any(|d| d.query.to_string() == *s.text) {
                    subs.push(Dependent {
                        query: Arc::clone(&s.query),
                        outer: s.outer.clone(),
                        clause,
                    });
                }
            }
        });
    }
}

/// Runs `f` on the plans of `d`'s query, planned as it runs but with
/// sample values for the outer columns.
fn with_sample<R>(
    conn: &mut Conn<'_>,
    d: &Dependent,
    f: impl FnOnce(&mut Conn<'_>, Plans) -> SqlResult<R>,
) -> SqlResult<R> {
    let sample = crate::engine::expr::OuterRow {
        columns: d.outer.iter().map(|(c, _)| c.clone()).collect(),
        values: d
            .outer
            .iter()
            .map(|(c, _)| crate::engine::expr::sample_value(c.kind))
            .collect(),
        aggs: Vec::new(),
        wanted: Some(std::cell::RefCell::default()),
    };
    crate::engine::exec::correlated::with_outer(conn, sample, |conn| {
        let plans = plan_query(conn, &d.query, &[], Some(&[]))?;
        for sp in &plans.planned {
            if let Some(table) = &sp.table {
                crate::engine::stats::refresh(conn, table);
            }
        }
        f(conn, plans)
    })
}

/// The rows of a per-row subquery's own plan, numbered `sub_id` (a key
/// read per outer row is `eq_ref` with the outer columns as `ref`).
fn sample_rows(
    conn: &Conn<'_>,
    d: &Dependent,
    sp: &Planned,
    sub_id: usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Row>> {
    let database = conn.session.database.clone().unwrap_or_default();
    let outer_names: Vec<String> = d
        .outer
        .iter()
        .map(|(c, _)| format!("{database}.{}.{}", c.table, c.name))
        .collect();
    let mut these = rows_of(sp, ctx)?;
    for r in &mut these {
        r.id = Some(sub_id);
        r.select_type = if d.clause == Clause::Lateral {
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
    Ok(these)
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
    for d in subs {
        let sub_id = *next_id;
        *next_id += 1;
        if d.clause == Clause::Lateral {
            out.push(Row {
                id: Some(id),
                select_type: "PRIMARY",
                table: Some(format!("<derived{sub_id}>")),
                access_type: Some("ALL"),
                ..Row::default()
            });
        }
        let depth = conn.subqueries.outer.len();
        let inner = with_sample(conn, &d, |conn, plans| {
            let mut rows = Vec::new();
            for sp in &plans.planned {
                rows.extend(sample_rows(conn, &d, sp, sub_id, ctx)?);
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

/// `{"dependent": true, …, "query_block": block}`: a per-row subquery
/// as FORMAT=JSON nests it (`block` rendered at no indent).
fn dependent_json(block: &str) -> String {
    format!(
        "{{\n  \"dependent\": true,\n  \"cacheable\": false,\n  \"query_block\": {}\n}}",
        reindent(block, "  ")
    )
}

/// `s` (rendered at no indent) for a place indented by `indent`.
fn reindent(s: &str, indent: &str) -> String {
    s.replace('\n', &format!("\n{indent}"))
}

/// The FORMAT=JSON `query_block` (at no indent) of a SELECT numbered
/// `id` whose EXPLAIN rows are `rows`, with its per-row subqueries nested
/// where MySQL nests them: a LATERAL table's query under its
/// `<derivedN>` table (`materialized_from_subquery`), a condition's in
/// `attached_subqueries` of the table it is tested at (the last: late
/// conjuncts are tested on the joined rows), the select list's, GROUP
/// BY's, HAVING's and ORDER BY's in the block's
/// `select_list_subqueries`, `group_by_subqueries`, `having_subqueries`,
/// `order_by_subqueries`.
fn block_json_of(
    conn: &mut Conn<'_>,
    p: &Planned,
    mut rows: Vec<Row>,
    id: usize,
    next_id: &mut usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<String> {
    let depth = conn.subqueries.outer.len();
    let mut lists: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut attached = Vec::new();
    if depth < DEPENDENT_DEPTH_MAX {
        for d in dependents_of(p) {
            let sub_id = *next_id;
            *next_id += 1;
            let block = with_sample(conn, &d, |conn, plans| {
                query_json_of(conn, &d, plans, sub_id, next_id, ctx)
            })?;
            let list = match d.clause {
                Clause::Lateral => {
                    let materialised = format!(
                        "{{\n  \"using_temporary_table\": true,\n  \"dependent\": true,\n  \
                         \"cacheable\": false,\n  \"query_block\": {}\n}}",
                        reindent(&block, "  ")
                    );
                    rows.push(Row {
                        table: Some(format!("<derived{sub_id}>")),
                        access_type: Some("ALL"),
                        materialised: Some(materialised),
                        ..Row::default()
                    });
                    continue;
                }
                Clause::Condition => {
                    attached.push(dependent_json(&block));
                    continue;
                }
                Clause::Projection => "select_list_subqueries",
                Clause::GroupBy => "group_by_subqueries",
                Clause::Having => "having_subqueries",
                Clause::OrderBy => "order_by_subqueries",
            };
            match lists.iter_mut().find(|(name, _)| *name == list) {
                Some((_, items)) => items.push(dependent_json(&block)),
                None => lists.push((list, vec![dependent_json(&block)])),
            }
        }
    }
    match rows.last_mut() {
        Some(last) => last.attached = attached,
        None if !attached.is_empty() => lists.push(("attached_subqueries", attached)),
        None => {}
    }
    Ok(block_json_with(id, &rows, "", &lists))
}

/// The FORMAT=JSON `query_block` (at no indent) of a per-row subquery's
/// `plans` (planned with sample values), numbered `sub_id`.
fn query_json_of(
    conn: &mut Conn<'_>,
    d: &Dependent,
    plans: Plans,
    sub_id: usize,
    next_id: &mut usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<String> {
    let mut blocks = Vec::new();
    for sp in &plans.planned {
        let rows = sample_rows(conn, d, sp, sub_id, ctx)?;
        blocks.push(block_json_of(conn, sp, rows, sub_id, next_id, ctx)?);
    }
    if blocks.len() == 1 {
        return Ok(blocks.remove(0));
    }
    let ids = vec![sub_id; blocks.len()];
    Ok(union_json(
        &blocks,
        &plans.result_row(&ids).1,
        plans.union_distinct(),
    ))
}

/// `{"union_result": …}`: a UNION's `query_block` (at no indent) over its
/// SELECTs' blocks (each at no indent).
fn union_json(blocks: &[String], name: &str, distinct: bool) -> String {
    let specs: Vec<String> = blocks
        .iter()
        .map(|b| {
            format!(
                "      {{\n        \"dependent\": false,\n        \
                 \"cacheable\": true,\n        \"query_block\": {}\n      }}",
                reindent(b, "        ")
            )
        })
        .collect();
    format!(
        "{{\n  \"union_result\": {{\n    \
         \"using_temporary_table\": {distinct},\n    \"table_name\": {},\n    \
         \"access_type\": \"ALL\",\n    \"query_specifications\": [\n{}\n    ]\n  \
         }}\n}}",
        js(name),
        specs.join(",\n")
    )
}

/// `EXPLAIN ANALYZE` of a query that runs per-row subqueries: the query
/// run as it runs (its rows read, then the subqueries per row), the
/// read's tree, then a node per subquery (`Select #N (subquery in
/// condition; dependent)`, `Materialize` for a LATERAL table) with how
/// many times it ran (`loops`: its cache's hits are not runs), the rows a
/// run gave and a run's time on average, over its plan as EXPLAIN plans
/// it (with sample values; these lines carry no times of their own).
fn analyze_per_row(conn: &mut Conn<'_>, plans: &Plans, ctx: &mut Ctx<'_>) -> SqlResult<String> {
    conn.subqueries.analyze = Some(std::collections::HashMap::new());
    let result = (|| {
        let mut text = String::new();
        let alone = plans.planned.len() == 1;
        let mut next_id = plans.planned.len() + 1;
        for p in &plans.planned {
            let started = Instant::now();
            let mut stats = Vec::new();
            let out =
                super::run_per_row(conn, p, ctx, alone, &plans.placeholders, Some(&mut stats))?;
            match &p.join {
                Some(spec) => {
                    let plan = join_plan::plan(spec, p.cond.as_ref(), ctx)?;
                    text.push_str(&join_tree(spec, &plan, &stats, out.len(), started));
                }
                None => {
                    let ms = started.elapsed().as_secs_f64() * 1e3;
                    let what = single_text(p, ctx)?;
                    let _ = writeln!(
                        text,
                        "-> {what}  (actual time=0.000..{ms:.3} rows={} loops=1)",
                        out.len()
                    );
                }
            }
            for d in dependents_of(p) {
                subquery_tree(conn, &d, &mut next_id, ctx, 0, &mut text)?;
            }
        }
        Ok(text)
    })();
    conn.subqueries.analyze = None;
    result
}

/// How a single-table (or table-less) SELECT reads, in MySQL's tree words.
fn single_text(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<String> {
    let name = p
        .source
        .first()
        .map_or_else(String::new, |c| c.table.to_string());
    Ok(match &p.table {
        Some(table) => {
            let (access, _) = single_access(table, p, p.cond.as_ref(), ctx)?;
            step_text(table, &name, &StepAccess::Own(access), None)
        }
        None => "Rows fetched before execution".to_owned(),
    })
}

/// A count per loop as MySQL prints it: whole, or with two decimals.
fn per_loop(total: u64, loops: u64) -> String {
    if loops == 0 || total.is_multiple_of(loops) {
        (total / loops.max(1)).to_string()
    } else {
        let v = total as f64 / loops as f64;
        let s = format!("{v:.2}");
        s.trim_end_matches('0').to_owned()
    }
}

/// EXPLAIN ANALYZE's node of a per-row subquery `d` (numbered next),
/// what it did (counted while the query ran), and its plan's lines,
/// `depth` levels in.
fn subquery_tree(
    conn: &mut Conn<'_>,
    d: &Dependent,
    next_id: &mut usize,
    ctx: &mut Ctx<'_>,
    depth: usize,
    text: &mut String,
) -> SqlResult<()> {
    let id = *next_id;
    *next_id += 1;
    let stats = conn
        .subqueries
        .analyze
        .as_ref()
        .and_then(|m| m.get(&d.query.to_string()))
        .copied()
        .unwrap_or_default();
    let pad = "    ".repeat(depth);
    let place = match d.clause {
        Clause::Lateral => None,
        Clause::Projection => Some("projection"),
        Clause::Condition | Clause::Having => Some("condition"),
        Clause::GroupBy => Some("GROUP BY"),
        Clause::OrderBy => Some("ORDER BY"),
    };
    let _ = match place {
        Some(place) => write!(
            text,
            "{pad}-> Select #{id} (subquery in {place}; dependent)"
        ),
        None => write!(
            text,
            "{pad}-> Materialize <derived{id}> (invalidate on row from outer tables)"
        ),
    };
    if stats.runs == 0 {
        text.push_str("  (never executed)\n");
    } else {
        let ms = stats.time.as_secs_f64() * 1e3 / stats.runs as f64;
        let _ = writeln!(
            text,
            "  (actual time=0.000..{ms:.3} rows={} loops={})",
            per_loop(stats.rows, stats.runs),
            stats.runs
        );
    }
    let inner = "    ".repeat(depth + 1);
    with_sample(conn, d, |conn, plans| {
        for sp in &plans.planned {
            match &sp.join {
                Some(spec) => {
                    let plan = join_plan::plan(spec, sp.cond.as_ref(), ctx)?;
                    for step in &plan.steps {
                        let t = &spec.tables[step.table];
                        let what = step_text(&t.table, &t.alias, &step.access, Some(spec));
                        let _ = writeln!(text, "{inner}-> {what}");
                    }
                }
                None => {
                    let what = single_text(sp, ctx)?;
                    let _ = writeln!(text, "{inner}-> {what}");
                }
            }
            if depth + 1 < DEPENDENT_DEPTH_MAX {
                for nested in dependents_of(sp) {
                    subquery_tree(conn, &nested, next_id, ctx, depth + 1, text)?;
                }
            }
        }
        Ok(())
    })
}

/// `EXPLAIN [FORMAT=JSON] UPDATE|DELETE` of one table: the access the
/// executor runs (`exec::write`'s `plan::access` of the conjuncts `cond`;
/// `late` ones, with correlated subqueries, are tested after the read),
/// `select_type` `UPDATE` or `DELETE` as MySQL 8 prints it, then the
/// `DEPENDENT SUBQUERY` rows of the per-row subqueries of `late`,
/// `order_exprs` and `set_exprs` (FORMAT=JSON: nested in its block).
/// `filesort`: an ORDER BY sorts the rows.
#[allow(clippy::too_many_arguments)]
pub fn explain_write(
    conn: &mut Conn<'_>,
    table: &TableInfo,
    select_type: &'static str,
    cond: Option<&Expr>,
    late: Option<&Expr>,
    order_exprs: &[&Expr],
    set_exprs: &[&Expr],
    filesort: bool,
    format: Format,
    ctx: &mut Ctx<'_>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if matches!(format, Format::Analyze | Format::Tree) {
        let what = if format == Format::Tree {
            "EXPLAIN FORMAT=TREE"
        } else {
            "EXPLAIN ANALYZE"
        };
        return Err(crate::error::SqlError::unsupported(format_args!(
            "{what} of {select_type}"
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
    let mut subs = Vec::new();
    subqueries_of(late, Clause::Condition, &mut subs);
    subqueries_of(order_exprs.iter().copied(), Clause::OrderBy, &mut subs);
    subqueries_of(set_exprs.iter().copied(), Clause::Projection, &mut subs);
    let mut next_id = 2;
    if format == Format::Json && !subs.is_empty() {
        // Nested as MySQL nests them: the WHERE's at the table, SET's in
        // `update_value_subqueries`, ORDER BY's in `order_by_subqueries`.
        let mut lists: Vec<(&'static str, Vec<String>)> = Vec::new();
        for d in subs {
            let sub_id = next_id;
            next_id += 1;
            let block = with_sample(conn, &d, |conn, plans| {
                query_json_of(conn, &d, plans, sub_id, &mut next_id, ctx)
            })?;
            let list = match d.clause {
                Clause::Condition => {
                    row.attached.push(dependent_json(&block));
                    continue;
                }
                Clause::OrderBy => "order_by_subqueries",
                _ => "update_value_subqueries",
            };
            match lists.iter_mut().find(|(name, _)| *name == list) {
                Some((_, items)) => items.push(dependent_json(&block)),
                None => lists.push((list, vec![dependent_json(&block)])),
            }
        }
        let block = block_json_with(1, &[row], "", &lists);
        return send_text(sink, json(&[block], None, false), more);
    }
    let mut rows = vec![row];
    if format == Format::Traditional {
        rows.extend(dependent_rows_of(conn, subs, 1, &mut next_id, ctx)?);
    }
    send_explain(vec![rows], None, false, format, more, sink)
}

/// Sends EXPLAIN's rows (one list per SELECT of a union) as the table or
/// the JSON document.
fn send_explain(
    arms: Vec<Vec<Row>>,
    union: Option<(&'static str, String)>,
    union_distinct: bool,
    format: Format,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if format == Format::Json {
        let blocks: Vec<String> = arms
            .iter()
            .enumerate()
            .map(|(at, rows)| block_json(at + 1, rows, ""))
            .collect();
        let name = union.as_ref().map(|(_, name)| name.as_str());
        let text = json(&blocks, name, union_distinct);
        return send_text(sink, text, more);
    }
    let mut out: Vec<Row> = arms.into_iter().flatten().collect();
    if let Some((select_type, name)) = union {
        out.push(Row {
            select_type,
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
    let mut extra: Vec<String> = Vec::new();
    if r.recursive {
        extra.push("Recursive".to_owned());
    }
    extra.extend(r.push.iter().cloned());
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
    let mut rows = own_rows_of(p, ctx)?;
    let functions: Vec<&str> = p
        .laterals
        .iter()
        .filter_map(|l| match &l.rows {
            LateralRows::Json(t) => Some(t.alias()),
            LateralRows::Query { .. } => None,
        })
        .collect();
    if functions.is_empty() {
        return Ok(rows);
    }
    // A FROM of JSON_TABLEs alone reads no table but them.
    if functions.len() == p.laterals.len() && matches!(rows.as_slice(), [r] if r.table.is_none()) {
        rows.clear();
    }
    for alias in functions {
        rows.push(Row {
            table: Some(alias.to_owned()),
            access_type: Some("ALL"),
            extra: vec![TABLE_FUNCTION.to_owned()],
            ..Row::default()
        });
    }
    Ok(rows)
}

/// EXPLAIN's Extra of a table read by an aggregating scan: the data nodes
/// send each group's partial aggregates, not its rows.
const PUSHED_AGGREGATION: &str = "Using pushed aggregation";

/// EXPLAIN's Extra of a JSON_TABLE, as MariaDB's.
const TABLE_FUNCTION: &str = "Table function: json_table";

/// The rows of the tables a SELECT reads (its JSON_TABLEs' aside).
fn own_rows_of(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<Vec<Row>> {
    let grouped = !p.group.is_empty() || p.distinct;
    let mut sort_extra = Vec::new();
    if grouped {
        sort_extra.push("Using temporary".to_owned());
    }
    if let Some(spec) = &p.join {
        let mut plan = join_plan::plan(spec, p.cond.as_ref(), ctx)?;
        // A top N along the first table's order reads that table's first
        // rows in each partition (`top_join`): no sort of the join.
        let top = super::top_join(p, spec, &plan, ctx)?;
        if let Some(t) = &top {
            plan = t.plan.clone();
        } else if !p.order.is_empty() {
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
            row.kept = t.rows.is_some();
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
            if row.kept {
                // Kept rows have no partitions (MySQL: NULL).
                row.partitions.clear();
            }
            if at == 0 {
                row.extra.extend(sort_extra.iter().cloned());
                if let Some(t) = &top {
                    row.rows = Some(t.rows);
                }
            }
            rows.push(row);
        }
        let lock = p.lock.is_some();
        let pushes = top
            .is_none()
            .then(|| pushed::pushable(spec, &plan, lock, ctx.env.join_pushdown));
        if let Some(pj) = pushes.flatten() {
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
        // Aggregates of one table computed below the join (`eager`): that
        // table's row says so.
        // Its row shows that read (an aggregating scan, not the join's
        // access).
        let warned = super::plan_mark(ctx);
        let eager = super::eager::eager_read(0, p, ctx)?;
        super::drop_planned(ctx, warned);
        if let Some(e) = eager {
            let t = &spec.tables[e.aggregated_table()];
            let (access, pushed, tested) = e.aggregated_access();
            if let Some(row) = rows
                .iter_mut()
                .find(|r| r.table.as_deref() == Some(t.alias.as_str()))
            {
                let mut read = access_row(&t.table, access, tested);
                read.pushed = pushed && scans(&StepAccess::Own(access.clone()));
                read.table = row.table.take();
                read.partitions = std::mem::take(&mut row.partitions);
                read.possible_keys = std::mem::take(&mut row.possible_keys);
                read.extra = std::mem::take(&mut row.extra);
                read.extra.insert(0, PUSHED_AGGREGATION.into());
                *row = read;
            }
        }
        return Ok(rows);
    }
    let Some(table) = &p.table else {
        let mut row = Row::default();
        if let Some(virtual_rows) = &p.rows {
            row.table = p.source.first().map(|c| c.table.to_string());
            row.kept = true;
            row.access_type = Some("ALL");
            row.rows = Some(virtual_rows.len() as u64);
            row.condition = p.cond.is_some() || p.late.is_some();
        } else {
            row.extra.push("No tables used".into());
        }
        return Ok(vec![row]);
    };
    // MIN and MAX read along indexes (`min_max_candidates`), and COUNT(*)
    // of the partitions' row counts (`count_star_only`): MariaDB's words
    // for what it answers before the join.
    if super::count_star_only(p) || super::min_max_reads(p, ctx)?.is_some() {
        return Ok(vec![Row {
            extra: vec!["Select tables optimized away".into()],
            ..Row::default()
        }]);
    }
    // One row of each value along an index (`distinct_candidates`):
    // MariaDB's loose index scan.
    let warned = super::plan_mark(ctx);
    let distinct = super::distinct_read(0, p, ctx)?;
    super::drop_planned(ctx, warned);
    let (access, filter) = match &distinct {
        Some((access, filter, ..)) => {
            sort_extra.retain(|e| e != "Using temporary");
            sort_extra.insert(0, "Using index for group-by".into());
            (access.clone(), filter.clone())
        }
        None => single_access(table, p, p.cond.as_ref(), ctx)?,
    };
    // Aggregated where the rows are (`aggregated`), unless a read that
    // `run_one` tries first takes the query.
    let pushed_aggregation = distinct.is_none() && {
        let warned = super::plan_mark(ctx);
        let in_order = super::groups_in_order_read(0, p, ctx)?.is_some();
        super::drop_planned(ctx, warned);
        !in_order && super::aggregated::aggregates_pushed(p, ctx)?
    };
    if pushed_aggregation {
        sort_extra.insert(0, PUSHED_AGGREGATION.into());
    }
    let (_, sorted) = order_by_index(table, p, &access, p.cond.as_ref(), ctx)?;
    let mut row = access_row(table, &access, p.cond.is_some() || p.late.is_some());
    if let (Some((_, _, _, prefix)), Access::Range { index, columns, .. }) = (&distinct, &access) {
        // MariaDB's loose index scan is a range read of the prefix's
        // columns; its rows the values (ANALYZE TABLE's count) when known.
        let prefix = usize::from(*prefix);
        row.access_type = Some("range");
        row.key_len = Some(
            columns
                .iter()
                .take(prefix)
                .map(|c| column_len(table, *c))
                .sum(),
        );
        if let Some(values) = table.stats.cardinality(index, prefix) {
            row.rows = Some(values.max(1));
        }
    }
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
    // Rows asked for in an ordered index's order that several partitions
    // hold are read partition by partition and merged (`merged_partitions`):
    // no sort, and a LIMIT stops the read after its rows.
    let merged = !sorted
        && !p.order.is_empty()
        && super::merged_partitions(table, p, &access, p.cond.as_ref(), ctx)?.is_some();
    if merged {
        if let Some(limit) = p.limit {
            let stop_after = limit.saturating_add(p.offset);
            row.rows = row.rows.map(|r| r.min(stop_after));
        }
    } else if !sorted && !p.order.is_empty() {
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
            .primary_key_columns()
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
                .filter_map(|n| table.sql_column(*n))
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
                    .sql_column(*n)
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
        SqlType::Int { .. } | SqlType::Float { .. } => 4,
        SqlType::BigInt { .. } | SqlType::Double { .. } => 8,
        SqlType::Decimal {
            precision, scale, ..
        } => {
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
            TABLE_FUNCTION => fields.push("\"table_function\": \"json_table\"".to_owned()),
            PUSHED_AGGREGATION => fields.push("\"pushed_aggregation\": true".to_owned()),
            other => fields.push(format!("\"message\": {}", js(other))),
        }
    }
    let inner = format!("{indent}  ");
    if let Some(m) = &r.materialised {
        fields.push(format!(
            "\"materialized_from_subquery\": {}",
            reindent(m, &inner)
        ));
    }
    if !r.attached.is_empty() {
        let i2 = format!("{inner}  ");
        let items: Vec<String> = r
            .attached
            .iter()
            .map(|it| format!("{i2}{}", reindent(it, &i2)))
            .collect();
        fields.push(format!(
            "\"attached_subqueries\": [\n{}\n{inner}]",
            items.join(",\n")
        ));
    }
    format!(
        "{{\n{inner}{}\n{indent}}}",
        fields.join(&format!(",\n{inner}"))
    )
}

/// One `query_block`: a single table directly, a join as `nested_loop`.
fn block_json(id: usize, rows: &[Row], indent: &str) -> String {
    block_json_with(id, rows, indent, &[])
}

/// [`block_json`] with arrays of subqueries (`select_list_subqueries`
/// …, each item rendered at no indent) after the tables.
fn block_json_with(
    id: usize,
    rows: &[Row],
    indent: &str,
    lists: &[(&'static str, Vec<String>)],
) -> String {
    let i1 = format!("{indent}  ");
    let i2 = format!("{indent}    ");
    let mut body = match rows {
        [] => String::new(),
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
    for (name, items) in lists {
        let items: Vec<String> = items
            .iter()
            .map(|it| format!("{i2}{}", reindent(it, &i2)))
            .collect();
        if !body.is_empty() {
            body.push_str(&format!(",\n{i1}"));
        }
        body.push_str(&format!("\"{name}\": [\n{}\n{i1}]", items.join(",\n")));
    }
    format!("{{\n{i1}\"select_id\": {id},\n{i1}{body}\n{indent}}}")
}

/// MySQL's `EXPLAIN FORMAT=JSON` document over the SELECTs' blocks
/// (each rendered at no indent).
fn json(blocks: &[String], union: Option<&str>, distinct: bool) -> String {
    let body = match union {
        None => blocks.first().cloned().unwrap_or_else(|| "{\n}".to_owned()),
        Some(name) => union_json(blocks, name, distinct),
    };
    format!("{{\n  \"query_block\": {}\n}}", reindent(&body, "  "))
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
                let mut stats = Vec::new();
                let (rows, plan) = super::join_found(&tx, p, spec, ctx, Some(&mut stats))?;
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
                        let (access, _) = single_access(table, p, p.cond.as_ref(), ctx)?;
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

/// A join's tree as `EXPLAIN ANALYZE` prints it: what each step and each
/// nested loop did.
fn join_tree(
    spec: &JoinSpec,
    plan: &join_plan::JoinPlan,
    stats: &[StepStats],
    rows: usize,
    started: Instant,
) -> String {
    let n = plan.steps.len();
    tree_lines(
        spec,
        plan,
        |depth| {
            let st = stats.get(n - 1 - depth).cloned().unwrap_or_default();
            let (ms, out) = if depth == 0 {
                (started.elapsed().as_secs_f64() * 1e3, rows as u64)
            } else {
                (st.time.as_secs_f64() * 1e3, st.rows)
            };
            format!("(actual time=0.000..{ms:.3} rows={out} loops=1)")
        },
        |at| {
            let st = stats.get(at).cloned().unwrap_or_default();
            format!(
                "(actual time=0.000..{:.3} rows={} loops={})",
                st.time.as_secs_f64() * 1e3,
                st.read,
                st.batches.max(1)
            )
        },
    )
}

/// A join's tree as `EXPLAIN FORMAT=TREE` prints it: the rows the planner
/// expects of each step (per row of the steps before it) and of each
/// nested loop (their product).
fn join_tree_estimated(spec: &JoinSpec, plan: &join_plan::JoinPlan) -> String {
    let n = plan.steps.len();
    // Rows out of the nested loop that joins step `at`: the product of the
    // steps' estimates up to it.
    let through = |at: usize| {
        plan.steps[..=at]
            .iter()
            .fold(1u64, |acc, s| acc.saturating_mul(s.rows.max(1)))
    };
    tree_lines(
        spec,
        plan,
        |depth| format!("(rows={})", through(n - 1 - depth)),
        |at| format!("(rows={})", plan.steps[at].rows),
    )
}

/// A join's tree: left-deep nested loops, the last step innermost-last;
/// `nested(depth)` and `step(at)` give each line's figures.
fn tree_lines(
    spec: &JoinSpec,
    plan: &join_plan::JoinPlan,
    nested: impl Fn(usize) -> String,
    step: impl Fn(usize) -> String,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    let n = plan.steps.len();
    // Lines of the nested-loop nodes from the outside in.
    for depth in 0..n.saturating_sub(1) {
        let joined = &plan.steps[n - 1 - depth];
        let kind = if spec.tables[joined.table].outer {
            "left"
        } else {
            "inner"
        };
        lines.push(format!(
            "{}-> Nested loop {kind} join  {}",
            "    ".repeat(depth),
            nested(depth)
        ));
    }
    // The steps: the first at the deepest level, each later one beside
    // the nested loop it joins.
    let mut steps: Vec<String> = Vec::new();
    for (at, s) in plan.steps.iter().enumerate() {
        let t = &spec.tables[s.table];
        let depth = if at == 0 { n - 1 } else { n - at };
        steps.push(format!(
            "{}-> {}  {}",
            "    ".repeat(depth),
            step_text(&t.table, &t.alias, &s.access, Some(spec)),
            step(at)
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

/// `EXPLAIN FORMAT=TREE`: each SELECT's tree with estimated rows, the
/// query not run.
fn tree(plans: &Plans, ctx: &mut Ctx<'_>) -> SqlResult<String> {
    let mut text = String::new();
    for p in &plans.planned {
        match (&p.join, &p.table) {
            (Some(spec), _) => {
                let plan = join_plan::plan(spec, p.cond.as_ref(), ctx)?;
                text.push_str(&join_tree_estimated(spec, &plan));
            }
            (None, Some(table)) => {
                let (access, _) = single_access(table, p, p.cond.as_ref(), ctx)?;
                let rows = match &access {
                    Access::Keys(k) => k.len() as u64,
                    Access::Unique { keys, .. } => keys.len() as u64,
                    Access::Nothing => 0,
                    other => join_plan::estimate_rows(table, other),
                };
                let what = single_text(p, ctx)?;
                let _ = writeln!(text, "-> {what}  (rows={rows})");
            }
            (None, None) => text.push_str("-> Rows fetched before execution  (rows=1)\n"),
        }
    }
    Ok(text)
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

/// The derived tables, views and CTEs an `EXPLAIN`'s query ran while it
/// was planned, each with its query's rows (`conn.subqueries.explain`),
/// so that EXPLAIN shows them as MySQL does: `<derivedN>` for the table
/// and a `DERIVED` row (then `UNION` rows) per SELECT of its query.
#[derive(Default)]
pub(crate) struct ExplainNotes {
    /// The next `materialise` is a derived table's query: it captures
    /// its rows.
    pending: bool,
    /// What the last capturing `materialise` planned: each SELECT's rows
    /// and whether the UNION is DISTINCT.
    captured: Option<(Vec<Vec<Row>>, bool)>,
    notes: Vec<Note>,
}

/// A derived table (view, CTE) read while the query was planned.
struct Note {
    /// The name the query reads it by.
    alias: String,
    what: Noted,
    /// The notes made while its query was planned (its own derived
    /// tables, at any depth).
    children: std::ops::Range<usize>,
}

enum Noted {
    /// Its query ran: its SELECTs' rows; `recursive_from`: where a
    /// recursive CTE's recursive blocks start; `key`: a CTE's identity.
    Ran {
        arms: Vec<Vec<Row>>,
        distinct: bool,
        recursive_from: Option<usize>,
        key: Option<usize>,
    },
    /// A CTE read again (its rows kept), or by its own recursive block.
    Again { key: usize },
}

/// Starts noting a derived table's query (None: no EXPLAIN runs): the
/// mark for [`note_derived`].
pub(crate) fn derived_begin(conn: &mut Conn<'_>) -> Option<usize> {
    let notes = conn.subqueries.explain.as_mut()?;
    notes.pending = true;
    Some(notes.notes.len())
}

/// Called by `materialise` once planned: the rows of `plans` when a
/// derived table's query is being noted.
pub(super) fn capture(conn: &mut Conn<'_>, pending: bool, plans: &Plans) -> SqlResult<()> {
    if !pending {
        return Ok(());
    }
    let environment = env(conn);
    let mut ctx = Ctx::new(&[], &environment);
    let mut arms = Vec::with_capacity(plans.planned.len());
    for p in &plans.planned {
        arms.push(rows_of(p, &mut ctx)?);
    }
    if let Some(notes) = conn.subqueries.explain.as_mut() {
        notes.captured = Some((arms, plans.union_distinct()));
    }
    Ok(())
}

/// The rows the last noted query captured (a recursive CTE's blocks are
/// captured one by one).
pub(crate) fn derived_captured(conn: &mut Conn<'_>) -> Option<(Vec<Vec<Row>>, bool)> {
    conn.subqueries.explain.as_mut()?.captured.take()
}

/// Notes the derived table `alias` whose query ran since `mark`, with
/// what it captured.
pub(crate) fn note_derived(conn: &mut Conn<'_>, mark: Option<usize>, alias: &str) {
    let Some((arms, distinct)) = derived_captured(conn) else {
        return;
    };
    note_ran(conn, mark, alias, arms, distinct, None, None);
}

/// Where the notes stand (None: no EXPLAIN runs), for [`note_ran`].
pub(crate) fn explain_mark(conn: &Conn<'_>) -> Option<usize> {
    conn.subqueries.explain.as_ref().map(|n| n.notes.len())
}

/// The next `materialise` captures its rows (a recursive CTE's block).
pub(crate) fn capture_next(conn: &mut Conn<'_>) {
    if let Some(notes) = conn.subqueries.explain.as_mut() {
        notes.pending = true;
    }
}

/// Whether this `materialise` captures its rows (and no later one).
pub(super) fn take_pending(conn: &mut Conn<'_>) -> bool {
    conn.subqueries
        .explain
        .as_mut()
        .is_some_and(|n| std::mem::take(&mut n.pending))
}

/// Notes a derived table (a CTE: `key`) whose query's SELECTs gave `arms`.
pub(crate) fn note_ran(
    conn: &mut Conn<'_>,
    mark: Option<usize>,
    alias: &str,
    arms: Vec<Vec<Row>>,
    distinct: bool,
    recursive_from: Option<usize>,
    key: Option<usize>,
) {
    let (Some(mark), Some(notes)) = (mark, conn.subqueries.explain.as_mut()) else {
        return;
    };
    notes.pending = false;
    let end = notes.notes.len();
    notes.notes.push(Note {
        alias: alias.to_owned(),
        what: Noted::Ran {
            arms,
            distinct,
            recursive_from,
            key,
        },
        children: mark..end,
    });
}

/// Notes a CTE (`key`) read again as `alias`.
pub(crate) fn note_again(conn: &mut Conn<'_>, alias: &str, key: usize) {
    if let Some(notes) = conn.subqueries.explain.as_mut() {
        let at = notes.notes.len();
        notes.notes.push(Note {
            alias: alias.to_owned(),
            what: Noted::Again { key },
            children: at..at,
        });
    }
}

/// Names the derived tables of `rows` (those read from kept rows)
/// `<derivedN>` after the notes among `candidates` they match (by name,
/// in order), and gives the rows of their queries: `DERIVED` for the
/// first SELECT, `UNION` for the others (a recursive CTE's recursive
/// blocks, whose reads of the CTE itself say `Recursive`), `UNION
/// RESULT` for a UNION DISTINCT that is not recursive.
fn expand_derived(
    notes: &[Note],
    candidates: &[usize],
    rows: &mut [Row],
    next_id: &mut usize,
    ids: &mut std::collections::HashMap<usize, usize>,
    used: &mut [bool],
) -> Vec<Row> {
    let mut out = Vec::new();
    for r in rows.iter_mut().filter(|r| r.kept) {
        let Some(name) = r.table.clone() else {
            continue;
        };
        let Some(&c) = candidates
            .iter()
            .find(|c| !used[**c] && notes[**c].alias.eq_ignore_ascii_case(&name))
        else {
            continue;
        };
        used[c] = true;
        let key = match &notes[c].what {
            Noted::Again { key } => Some(*key),
            Noted::Ran { key, .. } => *key,
        };
        let known = key.and_then(|k| ids.get(&k).copied());
        let id = known.unwrap_or_else(|| {
            let id = *next_id;
            *next_id += 1;
            id
        });
        if let Some(k) = key {
            ids.insert(k, id);
        }
        r.table = Some(format!("<derived{id}>"));
        let Noted::Ran {
            arms,
            distinct,
            recursive_from,
            ..
        } = &notes[c].what
        else {
            continue;
        };
        if known.is_some() {
            // Its rows are shown where it was first read.
            continue;
        }
        let children = direct_children(notes, notes[c].children.clone());
        let mut arm_ids = Vec::with_capacity(arms.len());
        for (at, arm) in arms.iter().enumerate() {
            let arm_id = if at == 0 {
                id
            } else {
                let i = *next_id;
                *next_id += 1;
                i
            };
            arm_ids.push(arm_id.to_string());
            let recursive = recursive_from.is_some_and(|from| at >= from);
            let mut these = arm.clone();
            for row in &mut these {
                row.id = Some(arm_id);
                row.select_type = if at == 0 { "DERIVED" } else { "UNION" };
                // The recursive block's read of the CTE itself.
                if recursive && row.kept && row.table.as_deref() == Some(notes[c].alias.as_str()) {
                    row.kept = false;
                    row.recursive = true;
                }
            }
            let inner = expand_derived(notes, &children, &mut these, next_id, ids, used);
            out.extend(these);
            out.extend(inner);
        }
        // UNION ALL needs no temporary table: no UNION RESULT row (as
        // MySQL 8 and MariaDB print it), nor for a recursive CTE.
        if arms.len() > 1 && recursive_from.is_none() && *distinct {
            out.push(Row {
                select_type: "UNION RESULT",
                table: Some(format!("<union{}>", arm_ids.join(","))),
                access_type: Some("ALL"),
                extra: vec!["Using temporary".into()],
                ..Row::default()
            });
        }
    }
    out
}

/// The notes in `range` that no other note in it holds.
fn direct_children(notes: &[Note], range: std::ops::Range<usize>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = range.end;
    // Post-order: a note's children come right before it.
    while at > range.start {
        at -= 1;
        out.push(at);
        at = at.min(notes[at].children.start.max(range.start));
    }
    out.reverse();
    out
}
