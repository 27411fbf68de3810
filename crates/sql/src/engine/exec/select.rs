//! `SELECT`: one table (or none), WHERE through the plan, hash
//! aggregation, DISTINCT, ORDER BY, LIMIT, UNION.

use std::cmp::Ordering;

use std::sync::Arc;
use stdx::{KeyMap, KeyState};

use schema::Collation;
use skarv_client::{LockMode, LockWait};
use sqlparser::ast::{self, SetExpr, SetOperator, SetQuantifier};
use sqlparser::tokenizer::Location;

use self::sets::{Bound, SetNode, SetOp};
use super::{
    convert, env, fetch, fetch_each, keep_warning, keep_warnings, table_scope, with_scope, RowLock,
};
use crate::backend::{OkInfo, ResultSink};
use crate::engine::catalog::TableInfo;
use crate::engine::expr::eval::{compare, Env};
use crate::engine::expr::{
    self, AggFn, AggSpec, CastTo, Ctx, Dec, Expr, Kind, ScopeColumn, Val, WinSpec,
};
use crate::engine::plan::join::{Hints, JoinSpec};
use crate::engine::plan::{self, Access};
use crate::engine::{txn, Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::ColumnMeta;

/// Most groups hash aggregation keeps in memory (past it the query fails
/// with 1105 rather than exhaust the SQL node).
pub const GROUPS_IN_MEMORY_MAX: usize = 1_000_000;

/// Fails a statement whose grouping holds `groups` groups already, the
/// most it may ([`GROUPS_IN_MEMORY_MAX`]).
fn room_for_group(groups: usize) -> SqlResult<()> {
    if groups >= GROUPS_IN_MEMORY_MAX {
        return Err(SqlError::unsupported(format_args!(
            "more than {GROUPS_IN_MEMORY_MAX} groups"
        )));
    }
    Ok(())
}
/// Most rows a query sorts or de-duplicates in memory.
pub const ROWS_IN_MEMORY_MAX: usize = 10_000_000;

mod aggregated;
mod eager;
mod explain;
mod filesort;
mod late;
mod sets;
mod union;
pub(crate) use explain::{
    capture_next, derived_begin, derived_captured, explain_mark, note_again, note_derived,
    note_ran, ExplainNotes, Row as ExplainRow,
};
pub use explain::{explain, explain_write, Format};

/// A planned single-table (or table-less) SELECT.
struct Planned {
    table: Option<Arc<TableInfo>>,
    items: Vec<Expr>,
    metas: Vec<ColumnMeta>,
    /// The items' kinds and whether they may be NULL (a derived table's
    /// columns).
    kinds: Vec<Kind>,
    nullable: Vec<bool>,
    /// The items' coercibility (`eval::coercibility`): a UNION's text
    /// column takes the collation of its least coercible arm.
    coercibility: Vec<u8>,
    cond: Option<Expr>,
    /// The conjuncts of WHERE that run correlated subqueries: tested in
    /// the SQL node after the rows are read (the statement's transaction
    /// free for the subqueries' reads).
    late: Option<Expr>,
    /// `LATERAL` derived tables joined, in order, to each row read.
    laterals: Vec<Lateral>,
    group: Vec<Expr>,
    /// The collation each GROUP BY expression groups under.
    group_collations: Vec<Option<Collation>>,
    /// `GROUP BY … WITH ROLLUP`: after each group of a prefix of the
    /// GROUP BY expressions, a row aggregating it (the expressions after
    /// the prefix NULL), and one of every row last.
    rollup: bool,
    /// Per GROUP BY expression, whether WITH ROLLUP orders its groups
    /// descending (`GROUP BY a DESC WITH ROLLUP`; without ROLLUP the
    /// directions are the query's ORDER BY: `group_order`).
    rollup_desc: Vec<bool>,
    having: Option<Expr>,
    aggs: Vec<AggSpec>,
    /// Window functions of the select items and ORDER BY.
    windows: Vec<WinSpec>,
    order: Vec<(Expr, bool)>,
    /// The collation each ORDER BY expression sorts under.
    order_collations: Vec<Option<Collation>>,
    distinct: bool,
    limit: Option<u64>,
    offset: u64,
    lock: Option<RowLock>,
    /// The rows of a virtual table (`information_schema`) when the FROM
    /// names one; `table` is None then.
    rows: Option<Arc<Vec<Vec<Val>>>>,
    /// The columns the query reads from (a table's or a virtual one's, or
    /// a join's combined row).
    source: Vec<ScopeColumn>,
    /// A FROM list of several tables (`table` is None then).
    join: Option<Arc<JoinSpec>>,
    /// The index hints of the one table.
    hints: Hints,
    /// Columns unqualified names do not find (a join's USING copies).
    hidden: Vec<usize>,
}

/// The result columns of a query without running it (for PREPARE).
pub fn describe(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    placeholders: &[Location],
) -> SqlResult<Vec<ColumnMeta>> {
    if has_into(q) {
        // Its rows go to variables: no result set.
        return Ok(Vec::new());
    }
    // Only planned: what the subqueries "gave" (no rows) must not outlive
    // this.
    conn.subqueries.clear();
    let metas = plan_query(conn, q, placeholders, None).map(|p| p.metas);
    conn.subqueries.clear();
    metas
}

/// The result columns of a query without running it, its subqueries'
/// results kept for the statement (a view's query, inside the
/// statement's own).
pub(crate) fn planned_metas(conn: &mut Conn<'_>, q: &ast::Query) -> SqlResult<Vec<ColumnMeta>> {
    plan_query(conn, q, &[], None).map(|p| p.metas)
}

/// The result columns of a query without running it, for CREATE TABLE …
/// SELECT: with each the display width MariaDB gives its column where it
/// is not the metadata's (a date field's function, `MONTH(d)`, is an
/// INT a sign wider: its field is signed, its length has none).
pub fn describe_for_create(
    conn: &mut Conn<'_>,
    q: &ast::Query,
) -> SqlResult<Vec<(ColumnMeta, Option<u32>)>> {
    conn.subqueries.clear();
    let plans = plan_query(conn, q, &[], None);
    conn.subqueries.clear();
    let plans = plans?;
    let single = match plans.planned.as_slice() {
        [p] => Some(p),
        _ => None,
    };
    Ok(plans
        .metas
        .iter()
        .enumerate()
        .map(|(at, m)| {
            let item = single.and_then(|p| p.items.get(at));
            // NULLIF's field is its first argument's.
            let item = match item {
                Some(Expr::Func(expr::Func::NullIf, args)) => args.first(),
                other => other,
            };
            let width = item
                .and_then(expr::date_field_digits)
                .map(|digits| digits + 1);
            (m.clone(), width)
        })
        .collect())
}

/// Runs a query (or, with `params` None, only plans it) and keeps its
/// rows: a derived table's or a subquery's.
pub(crate) fn materialise(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<super::derived::Materialised> {
    let pending = explain::take_pending(conn);
    let plans = plan_query(conn, q, placeholders, params)?;
    if plans.calc_found_rows {
        // Only the statement's own SELECT counts its rows.
        return Err(calc_found_rows_misplaced());
    }
    explain::capture(conn, pending, &plans)?;
    let (kinds, nullable) = (plans.kinds.clone(), plans.nullable.clone());
    let (defaults, members) = match plans.planned.as_slice() {
        [p] => {
            let column = |e: &Expr| match e {
                Expr::Col(c) => p.source.get(*c),
                _ => None,
            };
            let defaults = p.items.iter().map(|e| {
                let of_column = column(e).and_then(|s| s.default.clone());
                Some(of_column.unwrap_or(expr::DefaultOf::Missing))
            });
            let members = p.items.iter().map(|e| column(e)?.members.clone());
            (defaults.collect(), members.collect())
        }
        _ => (Vec::new(), Vec::new()),
    };
    let metas = plans.metas.clone();
    let mut rows = match params {
        Some(params) => rows_of(conn, plans, params)?,
        None => Vec::new(),
    };
    round_to_kinds(&mut rows, &kinds);
    Ok(super::derived::Materialised {
        metas,
        kinds,
        nullable,
        defaults,
        members,
        rows,
        outer_aggs: Vec::new(),
    })
}

/// A query's plan: its columns, its SELECTs, and what applies to the
/// whole UNION.
struct Plans {
    metas: Vec<ColumnMeta>,
    /// The columns' kinds and whether they may be NULL (a UNION's
    /// aggregated over its SELECTs: `union::column`).
    kinds: Vec<Kind>,
    nullable: Vec<bool>,
    /// Per SELECT of a UNION, per column: the cast that brings its values
    /// to the column's type (empty for one SELECT).
    arm_casts: Vec<Vec<Option<CastTo>>>,
    planned: Vec<Planned>,
    /// How the SELECTs' rows combine (UNION, EXCEPT, INTERSECT).
    sets: SetNode<Bound>,
    /// ORDER BY of a UNION: result columns and descending.
    union_order: Vec<(usize, bool)>,
    union_limit: Option<u64>,
    union_offset: u64,
    /// `SELECT SQL_CALC_FOUND_ROWS` (of the first SELECT, as MySQL reads
    /// it): every row is made, the LIMIT applied after counting them
    /// (`union_limit`, also for one SELECT), and `FOUND_ROWS()` of the next
    /// statement gives the count.
    calc_found_rows: bool,
    /// The statement's `?` placeholders (correlated subqueries run with
    /// them).
    placeholders: Vec<Location>,
}

fn plan_query(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Plans> {
    let Some(with) = &q.with else {
        return plan_query_body(conn, q, placeholders, params);
    };
    // The WITH's CTEs are in scope while the query is planned, which runs
    // its derived tables and subqueries (and so reads the CTEs).
    let mark = conn.ctes.len();
    let plans =
        super::cte::push(conn, with).and_then(|()| plan_query_body(conn, q, placeholders, params));
    conn.ctes.truncate(mark);
    plans
}

/// [`plan_query`] once its `WITH` is in scope.
fn plan_query_body(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Plans> {
    if let Some(ob) = &q.order_by {
        super::subquery::prepare(conn, ob, 0, placeholders, params)?;
    }
    let mut arms = Vec::new();
    let raw_sets = collect_selects(&q.body, &mut arms)?;
    let selects: Vec<&ast::Select> = arms.iter().map(|a| a.select).collect();
    let mut planned = Vec::new();
    for arm in &arms {
        if let Some(ob) = arm.bounded_by.and_then(|b| b.order_by.as_ref()) {
            super::subquery::prepare(conn, ob, 0, placeholders, params)?;
        }
        let mut p = plan_select(conn, arm.select, placeholders, params)?;
        if let Some(bound) = arm.bounded_by {
            bound_select(
                conn,
                &mut p,
                bound,
                arm.select,
                placeholders,
                params,
                arms.len() == 1,
            )?;
        }
        // A join's order comes from the tables' statistics (fetched at
        // most once per `STATS_REFRESH_MS` per table and SQL node).
        if let Some(spec) = &p.join {
            for t in &spec.tables {
                crate::engine::stats::refresh(conn, &t.table);
            }
        }
        planned.push(p);
    }
    let mut metas = planned.first().map(|p| p.metas.clone()).unwrap_or_default();
    for p in &planned {
        if p.metas.len() != metas.len() {
            return Err(SqlError::new(
                codes::WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                "The used SELECT statements have a different number of columns",
            ));
        }
    }
    // A set operation inside another is a derived table to MariaDB: its
    // column names (its first SELECT's) must differ (`--set-ops` seed 39:
    // `… EXCEPT SELECT t1_id, t1_id FROM t2 INTERSECT ALL …`).
    let mut nested = Vec::new();
    nested_set_ops(&q.body, (false, false), &mut 0, &mut nested);
    for at in nested {
        let names = &planned[at].metas;
        for (i, m) in names.iter().enumerate() {
            if names[..i]
                .iter()
                .any(|o| o.name.eq_ignore_ascii_case(&m.name))
            {
                return Err(SqlError::new(
                    codes::DUP_FIELDNAME,
                    format!("Duplicate column name '{}'", m.name),
                ));
            }
        }
    }
    let (mut kinds, mut nullable) = planned
        .first()
        .map(|p| (p.kinds.clone(), p.nullable.clone()))
        .unwrap_or_default();
    // A UNION's columns (a single SELECT's stand as they are, unallocated).
    let mut arm_casts: Vec<Vec<Option<CastTo>>> = Vec::new();
    if planned.len() > 1 {
        arm_casts = vec![Vec::with_capacity(metas.len()); planned.len()];
        for at in 0..metas.len() {
            let arms: Vec<union::Arm<'_>> = planned
                .iter()
                .map(|p| union::Arm {
                    meta: &p.metas[at],
                    kind: p.kinds[at],
                    nullable: p.nullable[at],
                    coercibility: p.coercibility[at],
                    literal_digits: match p.items.get(at) {
                        Some(Expr::Lit(Val::Int(v))) => {
                            Some(v.unsigned_abs().checked_ilog10().map_or(1, |l| l + 1))
                        }
                        Some(Expr::Lit(Val::UInt(v))) => {
                            Some(v.checked_ilog10().map_or(1, |l| l + 1))
                        }
                        Some(Expr::Lit(Val::Dec(d))) => Some(d.int_digits()),
                        Some(e) => expr::date_field_digits(e),
                        None => None,
                    },
                })
                .collect();
            let column = union::column(&arms);
            metas[at] = column.meta;
            kinds[at] = column.kind;
            nullable[at] = column.nullable;
            for (casts, cast) in arm_casts.iter_mut().zip(column.casts) {
                casts.push(cast);
            }
        }
    }
    // ORDER BY / LIMIT of the whole query.
    let single = planned.len() == 1;
    let environment = env(conn);
    let mut ctx = Ctx::new(params.unwrap_or(&[]), &environment);
    let limit = limit_of(conn, q, placeholders, &mut ctx)?;
    let lock = lock_of(q);
    let calc_found = |s: &&ast::Select| {
        s.select_modifiers
            .as_ref()
            .is_some_and(|m| m.sql_calc_found_rows)
    };
    let calc_found_rows = selects.first().is_some_and(calc_found);
    if selects.iter().skip(1).any(calc_found) {
        return Err(calc_found_rows_misplaced());
    }
    if q.order_by.is_some() && planned.iter().any(|p| p.rollup) {
        return Err(SqlError::new(
            codes::WRONG_USAGE,
            "Incorrect usage of CUBE/ROLLUP and ORDER BY",
        ));
    }
    if single {
        let p = &mut planned[0];
        if arms[0].bounded_by.is_some()
            && (q.order_by.is_some() || q.limit_clause.is_some() || !q.locks.is_empty())
        {
            return Err(SqlError::unsupported(
                "ORDER BY, LIMIT or a lock both inside and after a parenthesised SELECT (make it a derived table)",
            ));
        }
        if !calc_found_rows && q.limit_clause.is_some() {
            p.limit = limit.0;
            p.offset = limit.1.unwrap_or(0);
        }
        if lock.is_some() {
            p.lock = lock;
        }
        if let Some(ob) = &q.order_by {
            plan_order(conn, p, ob, selects[0], placeholders)?;
        }
        let (union_limit, union_offset) = if calc_found_rows {
            (limit.0, limit.1.unwrap_or(0))
        } else {
            (None, 0)
        };
        return Ok(Plans {
            metas,
            kinds,
            nullable,
            arm_casts,
            planned,
            sets: SetNode::Select(0),
            union_order: Vec::new(),
            union_limit,
            union_offset,
            calc_found_rows,
            placeholders: placeholders.to_vec(),
        });
    }
    // ORDER BY of a UNION names result columns, by name or position.
    let union_order = match &q.order_by {
        Some(ob) => result_order(ob, &metas)?,
        None => Vec::new(),
    };
    let sets = raw_sets.try_map(&mut |q: &ast::Query| -> SqlResult<Bound> {
        let (limit, offset) = limit_of(conn, q, placeholders, &mut ctx)?;
        Ok(Bound {
            order: match &q.order_by {
                Some(ob) => result_order(ob, &metas)?,
                None => Vec::new(),
            },
            limit,
            offset: offset.unwrap_or(0),
        })
    })?;
    Ok(Plans {
        metas,
        kinds,
        nullable,
        arm_casts,
        planned,
        sets,
        union_order,
        union_limit: limit.0,
        union_offset: limit.1.unwrap_or(0),
        calc_found_rows,
        placeholders: placeholders.to_vec(),
    })
}

/// The first SELECT (numbered as `collect_selects` numbers them) of each
/// set operation MariaDB reads as a derived table: one that is the right
/// operand of another (INTERSECT binds first: `a UNION b INTERSECT c`),
/// or a parenthesised one that is an operand. A chain to the left (`a
/// INTERSECT b INTERSECT c`, `a EXCEPT b UNION c`) is read in place.
/// `(bare, parenthesised)`: whether `body` is such an operand when it is
/// an operation as it stands, and when it is one in parentheses.
fn nested_set_ops(
    body: &SetExpr,
    (bare, parenthesised): (bool, bool),
    next: &mut usize,
    out: &mut Vec<usize>,
) {
    match body {
        SetExpr::Query(q) => match &*q.body {
            op @ SetExpr::SetOperation { .. } => {
                nested_set_ops(op, (parenthesised, parenthesised), next, out)
            }
            other => nested_set_ops(other, (bare, parenthesised), next, out),
        },
        SetExpr::SetOperation { left, right, .. } => {
            if bare {
                out.push(*next);
            }
            nested_set_ops(left, (false, true), next, out);
            nested_set_ops(right, (true, true), next, out);
        }
        // A SELECT (the only other arm `collect_selects` takes).
        _ => *next += 1,
    }
}

/// `SQL_CALC_FOUND_ROWS` anywhere but the statement's first SELECT.
fn calc_found_rows_misplaced() -> SqlError {
    SqlError::new(
        codes::WRONG_USAGE_PLACEMENT,
        "Incorrect usage/placement of 'SQL_CALC_FOUND_ROWS'",
    )
}

impl Plans {
    /// Whether combining the SELECTs' rows needs a table of them (not a
    /// UNION ALL): EXPLAIN's "Using temporary".
    fn union_distinct(&self) -> bool {
        self.sets.uses_temporary()
    }

    /// EXPLAIN's row of the combined result: its `select_type` and its
    /// table (`<union1,2>`, `<except1,2>`, `<intersect1,2>`, and MariaDB's
    /// `<unit1,2,3>` where the operators differ) over the SELECTs' `ids`.
    fn result_row(&self, ids: &[usize]) -> (&'static str, String) {
        let word = self.sets.result_word();
        let select_type = match word {
            "EXCEPT" => "EXCEPT RESULT",
            "INTERSECT" => "INTERSECT RESULT",
            "UNIT" => "UNIT RESULT",
            _ => "UNION RESULT",
        };
        let ids: Vec<String> = ids.iter().map(usize::to_string).collect();
        let table = format!("<{}{}>", word.to_ascii_lowercase(), ids.join(","));
        (select_type, table)
    }
}

/// One SELECT of a query body, and the parenthesised query around it
/// whose ORDER BY … LIMIT (or lock) bounds its rows.
struct ArmOf<'q> {
    select: &'q ast::Select,
    bounded_by: Option<&'q ast::Query>,
}

/// Whether a parenthesised query bounds its rows.
fn bounds(q: &ast::Query) -> bool {
    q.order_by.is_some() || q.limit_clause.is_some() || !q.locks.is_empty()
}

/// The SELECTs of a query body, in order, and the tree of the set
/// operations that combine them.
fn collect_selects<'q>(
    body: &'q SetExpr,
    out: &mut Vec<ArmOf<'q>>,
) -> SqlResult<SetNode<&'q ast::Query>> {
    match body {
        SetExpr::Select(s) => {
            out.push(ArmOf {
                select: s,
                bounded_by: None,
            });
            Ok(SetNode::Select(out.len() - 1))
        }
        SetExpr::Query(q) if q.with.is_some() => Err(SqlError::unsupported(
            "WITH inside a parenthesised part of a query (make it a derived table)",
        )),
        SetExpr::Query(q) if !bounds(q) => collect_selects(&q.body, out),
        SetExpr::Query(q) => match &*q.body {
            SetExpr::Select(s) => {
                out.push(ArmOf {
                    select: s,
                    bounded_by: Some(q),
                });
                Ok(SetNode::Select(out.len() - 1))
            }
            body if q.locks.is_empty() => Ok(SetNode::Bounded {
                inner: Box::new(collect_selects(body, out)?),
                bound: &**q,
            }),
            _ => Err(SqlError::unsupported(
                "a lock (FOR UPDATE, LOCK IN SHARE MODE) after a parenthesised UNION, EXCEPT or INTERSECT",
            )),
        },
        SetExpr::SetOperation {
            op,
            set_quantifier,
            left,
            right,
        } => {
            let op = match op {
                SetOperator::Union => SetOp::Union,
                SetOperator::Except => SetOp::Except,
                SetOperator::Intersect => SetOp::Intersect,
                SetOperator::Minus => {
                    return Err(SqlError::unsupported("MINUS (write EXCEPT)"));
                }
            };
            let all = match set_quantifier {
                SetQuantifier::All => true,
                SetQuantifier::Distinct | SetQuantifier::None => false,
                other => {
                    return Err(SqlError::unsupported(format_args!(
                        "{} {other}",
                        op.word()
                    )));
                }
            };
            let left = collect_selects(left, out)?;
            let right = collect_selects(right, out)?;
            Ok(SetNode::Op {
                op,
                all,
                left: Box::new(left),
                right: Box::new(right),
            })
        }
        other => Err(SqlError::unsupported(format_args!(
            "the query `{}`",
            crate::engine::stdx_truncate(&other.to_string(), 80)
        ))),
    }
}

/// A parenthesised SELECT's own ORDER BY … LIMIT and lock, planned into
/// it. Among several SELECTs an ORDER BY without a LIMIT is dropped, as
/// MariaDB drops it: the combined rows do not keep that order.
fn bound_select(
    conn: &mut Conn<'_>,
    p: &mut Planned,
    q: &ast::Query,
    select: &ast::Select,
    placeholders: &[Location],
    params: Option<&[Val]>,
    alone: bool,
) -> SqlResult<()> {
    let environment = env(conn);
    let mut ctx = Ctx::new(params.unwrap_or(&[]), &environment);
    let (limit, offset) = limit_of(conn, q, placeholders, &mut ctx)?;
    p.limit = limit;
    p.offset = offset.unwrap_or(0);
    if let Some(lock) = lock_of(q) {
        p.lock = Some(lock);
    }
    if let Some(ob) = &q.order_by {
        if alone || limit.is_some() || offset.is_some() {
            plan_order(conn, p, ob, select, placeholders)?;
        }
    }
    Ok(())
}

/// A query's lock (`FOR UPDATE`, `FOR SHARE`/`LOCK IN SHARE MODE`), and
/// what it does about a row another transaction holds (`NOWAIT`, `SKIP
/// LOCKED`).
fn lock_of(q: &ast::Query) -> Option<RowLock> {
    q.locks.first().map(|l| RowLock {
        mode: match l.lock_type {
            ast::LockType::Update => LockMode::Exclusive,
            ast::LockType::Share => LockMode::Shared,
        },
        wait: match l.nonblock {
            None => LockWait::Wait,
            Some(ast::NonBlock::Nowait) => LockWait::NoWait,
            Some(ast::NonBlock::SkipLocked) => LockWait::SkipLocked,
        },
    })
}

/// One SELECT's ORDER BY `ob`, planned into it (its correlated
/// subqueries, its named windows).
fn plan_order(
    conn: &mut Conn<'_>,
    p: &mut Planned,
    ob: &ast::OrderBy,
    select: &ast::Select,
    placeholders: &[Location],
) -> SqlResult<()> {
    super::correlated::plan(conn, ob, 0, &p.source, &p.hidden, placeholders)?;
    let named = named_windows(select);
    p.order = order_exprs(conn, ob, p, &named, placeholders)?;
    Ok(())
}

/// A query's `LIMIT` and `OFFSET`, evaluated.
fn limit_of(
    conn: &Conn<'_>,
    q: &ast::Query,
    placeholders: &[Location],
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Option<u64>, Option<u64>)> {
    Ok(match &q.limit_clause {
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            limit
                .as_ref()
                .map(|l| const_u64(conn, l, placeholders, ctx))
                .transpose()?,
            offset
                .as_ref()
                .map(|o| const_u64(conn, &o.value, placeholders, ctx))
                .transpose()?,
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (
            Some(const_u64(conn, limit, placeholders, ctx)?),
            Some(const_u64(conn, offset, placeholders, ctx)?),
        ),
        None => (None, None),
    })
}

/// ORDER BY of a UNION (EXCEPT, INTERSECT): result columns by name or
/// position, and whether descending.
fn result_order(ob: &ast::OrderBy, metas: &[ColumnMeta]) -> SqlResult<Vec<(usize, bool)>> {
    let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    let mut order = Vec::with_capacity(exprs.len());
    for o in exprs {
        let at = match &o.expr {
            ast::Expr::Identifier(i) => metas
                .iter()
                .position(|m| m.name.eq_ignore_ascii_case(&i.value)),
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => n
                    .parse::<usize>()
                    .ok()
                    .and_then(|p| p.checked_sub(1))
                    .filter(|p| *p < metas.len()),
                _ => None,
            },
            _ => None,
        };
        let Some(at) = at else {
            return Err(SqlError::new(
                codes::BAD_FIELD,
                format!("Unknown column '{}' in 'ORDER BY'", o.expr),
            ));
        };
        let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
        order.push((at, desc));
    }
    Ok(order)
}

fn const_u64(
    conn: &Conn<'_>,
    e: &ast::Expr,
    placeholders: &[Location],
    ctx: &mut Ctx<'_>,
) -> SqlResult<u64> {
    let lowered = with_scope(conn, Vec::new(), placeholders, |s| s.lower(e))?;
    if let Expr::Param(i) = lowered {
        if i >= ctx.params.len() {
            // PREPARE: the value comes with EXECUTE.
            return Ok(u64::MAX);
        }
    }
    let v = lowered.eval(&[], ctx)?;
    match v {
        Val::Int(i) if i >= 0 => Ok(i as u64),
        Val::UInt(u) => Ok(u),
        other => match other.to_text().parse::<u64>() {
            Ok(u) => Ok(u),
            Err(_) => Err(SqlError::new(
                codes::WRONG_ARGUMENTS,
                "Incorrect arguments to LIMIT",
            )),
        },
    }
}

fn plan_select(
    conn: &mut Conn<'_>,
    s: &ast::Select,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Planned> {
    // Subqueries of this SELECT's expressions run first, once.
    super::subquery::prepare(conn, s, 0, placeholders, params)?;
    let mut virtual_source: Option<(Vec<ScopeColumn>, Vec<Vec<Val>>)> = None;
    let mut join_from = None;
    let mut hints = Hints::default();
    // LATERAL derived tables (and LEFT JOINs whose ON runs a correlated
    // subquery, rewritten as such) run per row of the tables before them:
    // the FROM is planned without them, tables written after them first.
    let rewritten = outer_join_laterals(conn, s)?;
    let written = rewritten.as_ref().unwrap_or(s);
    let Peeled {
        laterals: lateral_asts,
        trimmed,
        order: pieces,
    } = peel_laterals(written)?;
    let from_of = trimmed.as_ref().unwrap_or(written);
    let (mut table, alias) = match from_of.from.as_slice() {
        [] => (None, String::new()),
        [twj] if twj.joins.is_empty() => match &twj.relation {
            ast::TableFactor::Table { name, alias, .. } if virtual_table(conn, name).is_some() => {
                let (db, table_name) = virtual_table(conn, name).unwrap_or_default();
                let d = super::derived::of_virtual(conn, &db, &table_name, alias.as_ref())?;
                virtual_source = Some((d.columns, Arc::unwrap_or_clone(d.rows)));
                (None, d.alias)
            }
            ast::TableFactor::Table {
                name,
                alias,
                index_directives,
                ..
            } => match super::source_of(conn, name)? {
                super::Source::Table(t) => {
                    let a = alias
                        .as_ref()
                        .map_or_else(|| t.name.clone(), |a| a.name.value.clone());
                    hints = Hints::from_ast(&t, &a, index_directives)?;
                    (Some(t), a)
                }
                super::Source::View(v) => {
                    let d = super::derived::of_view(conn, &v, alias.as_ref(), params)?;
                    virtual_source = Some((d.columns, Arc::unwrap_or_clone(d.rows)));
                    (None, d.alias)
                }
                super::Source::Cte(at) => {
                    let d = super::cte::read(conn, at, alias.as_ref(), placeholders, params)?;
                    virtual_source = Some((d.columns, Arc::unwrap_or_clone(d.rows)));
                    (None, d.alias)
                }
            },
            ast::TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                let d = super::derived::derived(
                    conn,
                    subquery,
                    alias.as_ref(),
                    *lateral,
                    placeholders,
                    params,
                )?;
                virtual_source = Some((d.columns, Arc::unwrap_or_clone(d.rows)));
                (None, d.alias)
            }
            other => {
                return Err(SqlError::unsupported(format_args!("FROM {other}")));
            }
        },
        _ => {
            join_from = Some(super::from::join_from(conn, from_of, placeholders, params)?);
            (None, String::new())
        }
    };
    if s.into.is_some() {
        // A plain SELECT's INTO is taken before planning (`run_into`).
        return Err(SqlError::unsupported(
            "SELECT … INTO here (a subquery, or a UNION's SELECT but its last)",
        ));
    }
    let mut late_on = Vec::new();
    let mut star_groups = Vec::new();
    let (mut star, mut hidden, mut join) = match join_from {
        Some(j) => {
            late_on = j.late;
            star_groups = j.star_groups;
            (Some(j.star), j.hidden, Some(Arc::new(j.spec)))
        }
        None => (None, Vec::new(), None),
    };
    let (mut columns, virtual_rows) = match (virtual_source, &join) {
        (_, Some(j)) => (j.columns.clone(), None),
        (Some((columns, rows)), None) => (columns, Some(Arc::new(rows))),
        (None, None) => (
            table
                .as_ref()
                .map_or_else(Vec::new, |t| table_scope(t, &alias)),
            None,
        ),
    };
    // Correlated IN/EXISTS of WHERE as semi-joins and anti-joins.
    // Borrowed unless the rewrite changes it: no copy of the WHERE tree
    // per execution.
    let mut selection = std::borrow::Cow::Borrowed(&from_of.selection);
    let outer = match (&join, &table) {
        _ if virtual_rows.is_some()
            || !lateral_asts.is_empty()
            || !super::semi::worth_trying(from_of.selection.as_ref()) =>
        {
            None
        }
        (Some(j), _) => Some(super::semi::Outer {
            spec: (**j).clone(),
            star: star
                .clone()
                .unwrap_or_else(|| (0..j.columns.len()).collect()),
            hidden: hidden.clone(),
        }),
        (None, Some(t)) => Some(super::semi::Outer::single(t, &alias, &hints)),
        (None, None) => None,
    };
    if let Some(mut outer) = outer {
        if let Some(rest) = super::semi::rewrite(
            conn,
            from_of.selection.as_ref(),
            &mut outer,
            placeholders,
            params,
        )? {
            selection = std::borrow::Cow::Owned(rest);
            star = Some(outer.star);
            hidden = outer.hidden;
            columns = outer.spec.columns.clone();
            join = Some(Arc::new(outer.spec));
            table = None;
        }
    }
    let base_width = columns.len();
    let mut laterals = Vec::with_capacity(lateral_asts.len());
    // Each LATERAL table's columns' positions.
    let mut lateral_columns = Vec::with_capacity(lateral_asts.len());
    for l in &lateral_asts {
        let lat = plan_lateral(conn, l, &columns, &hidden, placeholders)?;
        lateral_columns.push(columns.len()..columns.len() + lat.1.len());
        columns.extend(lat.1);
        laterals.push(lat.0);
        // The ON's correlated subqueries run per row too.
        if let Some(on) = &l.on {
            super::correlated::plan(conn, on, 0, &columns, &hidden, placeholders)?;
        }
    }
    if !laterals.is_empty() {
        // `*` in the order written: each group of the joined tables' own
        // columns (its part of their `*`), each LATERAL table's.
        let base = star.take().unwrap_or_else(|| (0..base_width).collect());
        if star_groups.is_empty() {
            star_groups.push(base.len());
        }
        let mut group_at = Vec::with_capacity(star_groups.len());
        let mut at = 0;
        for n in &star_groups {
            group_at.push(at..at + n);
            at += n;
        }
        let mut all = Vec::with_capacity(columns.len());
        for piece in &pieces {
            match piece {
                Piece::Base(g) => {
                    if let Some(r) = group_at.get(*g) {
                        all.extend(base.get(r.clone()).unwrap_or_default());
                    }
                }
                Piece::Lateral(i) => all.extend(lateral_columns[*i].clone()),
            }
        }
        star = Some(all);
    }
    // Correlated subqueries the rewrite left: planned for per-row runs.
    for node in [
        &s.projection as &dyn VisitDyn,
        &*selection,
        &s.group_by,
        &s.having,
    ] {
        node.plan_correlated(conn, &columns, &hidden, placeholders)?;
    }
    let source = columns.clone();
    let sql_text = super::statement_text(conn);
    let written = written_names(s, &sql_text);
    let database = conn.session.database.clone().unwrap_or_default();
    with_scope(conn, columns, placeholders, |scope| {
        scope.aggs = Some(Vec::new());
        scope.windows = Some(Vec::new());
        scope.named_windows = named_windows(s);
        scope.clause = "SELECT";
        scope.hidden = hidden.clone();
        let mut items = Vec::new();
        let mut metas = Vec::new();
        let mut kinds = Vec::new();
        let mut nullable = Vec::new();
        let mut coercibility = Vec::new();
        let mut aliases: Vec<Option<(String, ast::Expr)>> = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    if scope.columns.is_empty() {
                        return Err(SqlError::new(codes::NO_TABLES_USED, "No tables used"));
                    }
                    let positions: Vec<usize> = match item {
                        ast::SelectItem::QualifiedWildcard(
                            ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                            _,
                        ) => {
                            let t = name
                                .0
                                .last()
                                .and_then(|p| p.as_ident())
                                .map_or_else(|| name.to_string(), |i| i.value.clone());
                            let found: Vec<usize> = (0..scope.columns.len())
                                .filter(|at| scope.columns[*at].table.eq_ignore_ascii_case(&t))
                                .collect();
                            if found.is_empty() {
                                return Err(SqlError::new(
                                    codes::BAD_TABLE,
                                    format!("Unknown table '{database}.{t}'"),
                                ));
                            }
                            found
                        }
                        _ => star
                            .clone()
                            .unwrap_or_else(|| (0..scope.columns.len()).collect()),
                    };
                    for at in positions {
                        items.push(Expr::Col(at));
                        coercibility.push(expr::eval::coercibility(&Expr::Col(at), scope));
                        kinds.push(scope.columns[at].kind);
                        nullable.push(scope.columns[at].nullable);
                        metas.push(scope.columns[at].meta.clone());
                        aliases.push(None);
                    }
                }
                ast::SelectItem::UnnamedExpr(e) => {
                    let mut lowered = scope.lower(e)?;
                    let name = expr::name_const_name(e)
                        .or_else(|| {
                            written
                                .as_ref()
                                .and_then(|w| w.get(items.len()).cloned().flatten())
                        })
                        .unwrap_or_else(|| expr::item_name(e, &sql_text));
                    expr::name_cast(&mut lowered, &name);
                    metas.push(scope.meta(&lowered, &name));
                    kinds.push(scope.kind(&lowered));
                    nullable.push(scope.nullable(&lowered));
                    coercibility.push(expr::eval::coercibility(&lowered, scope));
                    items.push(lowered);
                    aliases.push(Some((name, e.clone())));
                }
                ast::SelectItem::ExprWithAlias { expr: e, alias } => {
                    let mut lowered = scope.lower(e)?;
                    expr::name_cast(&mut lowered, &alias.value);
                    metas.push(scope.meta(&lowered, &alias.value));
                    kinds.push(scope.kind(&lowered));
                    nullable.push(scope.nullable(&lowered));
                    coercibility.push(expr::eval::coercibility(&lowered, scope));
                    items.push(lowered);
                    aliases.push(Some((alias.value.clone(), e.clone())));
                }
                other => return Err(SqlError::unsupported(format_args!("{other}"))),
            }
        }
        let saved = scope.aggs.take();
        let windows = scope.windows.take().unwrap_or_default();
        scope.clause = "WHERE";
        // One table's WHERE folds a column compared with itself before the
        // rows, as MariaDB's `remove_eq_conds` (`s IN ('x', 3) OR id <=>
        // id` tests no s); a join's only `<=>`: an outer join's NOT NULL
        // column may be NULL there.
        let joined = join.is_some();
        let cond = selection
            .as_ref()
            .as_ref()
            .map(|w| {
                let lowered = scope.lower_condition(w)?;
                Ok::<_, SqlError>(super::write::fold_same_column(scope, lowered, joined))
            })
            .transpose()?;
        let (cond, late) = split_late(cond, base_width);
        let late = Expr::and_of(late_on.drain(..).chain(late));
        scope.clause = "ON";
        for (lat, l) in laterals.iter_mut().zip(&lateral_asts) {
            lat.on =
                l.on.as_ref()
                    .map(|on| scope.lower_condition(on))
                    .transpose()?;
        }
        scope.clause = "GROUP BY";
        let mut group = Vec::new();
        let mut group_collations = Vec::new();
        let mut rollup = false;
        let mut rollup_desc = Vec::new();
        if let ast::GroupByExpr::Expressions(exprs, modifiers) = &s.group_by {
            // CUBE / GROUPING SETS: their extra rows are not made, so they
            // are refused rather than left out.
            match modifiers.as_slice() {
                [] => {}
                [ast::GroupByWithModifier::Rollup] => rollup = true,
                [m, ..] => return Err(SqlError::unsupported(format_args!("GROUP BY … {m}"))),
            }
            for g in exprs {
                let (g, desc) = crate::engine::group_order::rollup_desc(g);
                rollup_desc.push(desc);
                let g = resolve_alias(scope, g, &items, &aliases, false, Some("GROUP BY"))?;
                group_collations.push(kind_collation(scope.kind(&g)));
                group.push(g);
            }
        } else {
            return Err(SqlError::unsupported("GROUP BY ALL"));
        }
        scope.aggs = saved;
        scope.clause = "HAVING";
        scope.aliases = named_items(&items, &aliases);
        let having = match &s.having {
            Some(h) => Some(resolve_alias(scope, h, &items, &aliases, true, None)?),
            None => None,
        };
        let aggs = scope.aggs.clone().unwrap_or_default();
        Ok(Planned {
            windows,
            table: table.clone(),
            items,
            metas,
            kinds,
            nullable,
            coercibility,
            cond,
            late,
            laterals: laterals.clone(),
            group,
            group_collations,
            rollup,
            rollup_desc,
            having,
            aggs,
            order: Vec::new(),
            order_collations: Vec::new(),
            distinct: matches!(s.distinct, Some(ast::Distinct::Distinct)),
            limit: None,
            offset: 0,
            lock: None,
            rows: virtual_rows.clone(),
            source: source.clone(),
            join: join.clone(),
            hints: hints.clone(),
            hidden: hidden.clone(),
        })
    })
}

/// Parts of a SELECT whose correlated subqueries are planned.
trait VisitDyn {
    fn plan_correlated(
        &self,
        conn: &mut Conn<'_>,
        columns: &[ScopeColumn],
        hidden: &[usize],
        placeholders: &[Location],
    ) -> SqlResult<()>;
}

impl<T: ast::Visit> VisitDyn for T {
    fn plan_correlated(
        &self,
        conn: &mut Conn<'_>,
        columns: &[ScopeColumn],
        hidden: &[usize],
        placeholders: &[Location],
    ) -> SqlResult<()> {
        super::correlated::plan(conn, self, 0, columns, hidden, placeholders)
    }
}

/// A `LATERAL` derived table: its query, the columns before it that it
/// may name, its width, its ON condition (over the row with its columns)
/// and whether a LEFT JOIN keeps a row it gives nothing for.
#[derive(Clone, Debug)]
struct Lateral {
    rows: LateralRows,
    width: usize,
    on: Option<Expr>,
    left: bool,
}

/// Where a [`Lateral`]'s rows come from.
#[derive(Clone, Debug)]
enum LateralRows {
    /// A derived table's query, run per row through the correlated
    /// subqueries' runner, with the columns before it that it names.
    Query {
        query: Arc<ast::Query>,
        text: Arc<str>,
        outer: Vec<(ScopeColumn, usize)>,
    },
    /// A `JSON_TABLE`, evaluated per row.
    Json(Arc<super::json_table::JsonTable>),
}

/// A `LATERAL` derived table (or a `JSON_TABLE`) as written.
struct LateralAst {
    source: LateralSource,
    alias: Option<ast::TableAlias>,
    on: Option<ast::Expr>,
    left: bool,
}

/// What a [`LateralAst`] reads.
enum LateralSource {
    Query(ast::Query),
    /// The `JSON_TABLE` factor, and the names of the tables written
    /// before it (the only ones it may name).
    Json {
        factor: ast::TableFactor,
        visible: Vec<String>,
    },
}

/// A piece of the FROM list, in the order written: a group of tables
/// of the FROM planned as a join (by its index among the trimmed FROM's
/// comma-separated groups), or a `LATERAL` derived table (by its index).
#[derive(Clone, Copy)]
enum Piece {
    Base(usize),
    Lateral(usize),
}

/// What [`peel_laterals`] makes of a SELECT's FROM.
#[derive(Default)]
struct Peeled {
    /// The `LATERAL` derived tables, in order.
    laterals: Vec<LateralAst>,
    /// The SELECT without them (None when there are none): the tables
    /// written after a LATERAL one moved to the end of its FROM, the ON
    /// of an inner join moved with its table added to its WHERE.
    trimmed: Option<ast::Select>,
    /// The pieces as written (their columns' order for `*`).
    order: Vec<Piece>,
}

/// The `LATERAL` derived tables of `s`'s FROM, run per row of the
/// tables before them, and `s` without them. A table written after one
/// (`FROM t, LATERAL (…) d, u`) joins the tables before the LATERAL ones
/// instead: it cannot depend on them (a LATERAL table sees only tables
/// before it), so the rows are the same, `*` keeps the written order and
/// an inner join's ON, which may name the LATERAL table, is tested with
/// the WHERE. An outer join of a table after a LATERAL one in its group
/// (whose ON sees that group) is 1105.
fn peel_laterals(s: &ast::Select) -> SqlResult<Peeled> {
    /// A factor run per row: its source (without the names before it)
    /// and alias.
    fn lateral(f: &ast::TableFactor) -> Option<(LateralSource, &Option<ast::TableAlias>)> {
        match f {
            ast::TableFactor::Derived {
                lateral: true,
                subquery,
                alias,
                ..
            } => Some((LateralSource::Query((**subquery).clone()), alias)),
            ast::TableFactor::JsonTable { alias, .. } => Some((
                LateralSource::Json {
                    factor: f.clone(),
                    visible: Vec::new(),
                },
                alias,
            )),
            _ => None,
        }
    }
    /// With the names of the tables written before it, for a JSON_TABLE.
    fn seeing(source: LateralSource, names: &[String]) -> LateralSource {
        match source {
            LateralSource::Json { factor, .. } => LateralSource::Json {
                factor,
                visible: names.to_vec(),
            },
            query => query,
        }
    }
    // The names of the tables written so far.
    let mut names: Vec<String> = Vec::new();
    let has_lateral = |t: &ast::TableWithJoins| {
        lateral(&t.relation).is_some() || t.joins.iter().any(|j| lateral(&j.relation).is_some())
    };
    if !s.from.iter().any(has_lateral) {
        return Ok(Peeled::default());
    }
    use ast::JoinOperator as J;
    /// Where a group of base tables goes: before the LATERAL tables (the
    /// groups written before the first), or moved after them.
    enum At {
        Before(usize),
        Moved(usize),
    }
    let mut before: Vec<ast::TableWithJoins> = Vec::new();
    let mut moved: Vec<ast::TableWithJoins> = Vec::new();
    let mut order: Vec<Result<At, usize>> = Vec::new();
    let mut laterals = Vec::new();
    let mut on_where: Vec<ast::Expr> = Vec::new();
    let mut place = |group: ast::TableWithJoins, seen: bool, order: &mut Vec<Result<At, usize>>| {
        if seen {
            moved.push(group);
            order.push(Ok(At::Moved(moved.len() - 1)));
        } else {
            before.push(group);
            order.push(Ok(At::Before(before.len() - 1)));
        }
    };
    let mut seen = false;
    for twj in &s.from {
        if !has_lateral(twj) {
            factor_names(&twj.relation, &mut names);
            for j in &twj.joins {
                factor_names(&j.relation, &mut names);
            }
            place(twj.clone(), seen, &mut order);
            continue;
        }
        let written_before = names.len();
        factor_names(&twj.relation, &mut names);
        // The group's tables before its first LATERAL one.
        let mut current = None;
        match lateral(&twj.relation) {
            Some((source, alias)) => {
                laterals.push(LateralAst {
                    source: seeing(source, &names[..written_before]),
                    alias: alias.clone(),
                    on: None,
                    left: false,
                });
                order.push(Err(laterals.len() - 1));
                seen = true;
            }
            None => {
                current = Some(ast::TableWithJoins {
                    relation: twj.relation.clone(),
                    joins: Vec::new(),
                })
            }
        }
        for j in &twj.joins {
            let written_before = names.len();
            factor_names(&j.relation, &mut names);
            if let Some((source, alias)) = lateral(&j.relation) {
                let (on, left) = match &j.join_operator {
                    J::Join(c) | J::Inner(c) | J::CrossJoin(c) | J::Left(c) | J::LeftOuter(c) => {
                        let left = matches!(j.join_operator, J::Left(_) | J::LeftOuter(_));
                        match c {
                            ast::JoinConstraint::On(e) => (Some(e.clone()), left),
                            ast::JoinConstraint::None if !left => (None, false),
                            _ => {
                                return Err(SqlError::unsupported(
                                    "this join of a LATERAL derived table",
                                ))
                            }
                        }
                    }
                    _ => {
                        return Err(SqlError::unsupported(
                            "this join of a LATERAL derived table",
                        ))
                    }
                };
                if let Some(group) = current.take() {
                    place(group, seen, &mut order);
                }
                laterals.push(LateralAst {
                    source: seeing(source, &names[..written_before]),
                    alias: alias.clone(),
                    on,
                    left,
                });
                order.push(Err(laterals.len() - 1));
                seen = true;
                continue;
            }
            if let Some(group) = current.as_mut() {
                group.joins.push(j.clone());
                continue;
            }
            // A table joined after a LATERAL one of its group: an inner
            // join moves, its ON tested with the WHERE.
            let on = match &j.join_operator {
                J::Join(c) | J::Inner(c) | J::CrossJoin(c) => match c {
                    ast::JoinConstraint::On(e) => Some(e.clone()),
                    ast::JoinConstraint::None => None,
                    _ => {
                        return Err(SqlError::unsupported(
                            "USING or NATURAL after a LATERAL derived table",
                        ))
                    }
                },
                _ => {
                    return Err(SqlError::unsupported(
                        "an outer join after a LATERAL derived table",
                    ))
                }
            };
            on_where.extend(on);
            let group = ast::TableWithJoins {
                relation: j.relation.clone(),
                joins: Vec::new(),
            };
            place(group, true, &mut order);
        }
        if let Some(group) = current {
            place(group, seen, &mut order);
        }
    }
    let before_count = before.len();
    let order = order
        .into_iter()
        .map(|p| match p {
            Ok(At::Before(i)) => Piece::Base(i),
            Ok(At::Moved(i)) => Piece::Base(before_count + i),
            Err(i) => Piece::Lateral(i),
        })
        .collect();
    let mut trimmed = s.clone();
    trimmed.from = before;
    trimmed.from.extend(moved);
    for on in on_where {
        trimmed.selection = Some(match trimmed.selection.take() {
            Some(w) => ast::Expr::BinaryOp {
                left: Box::new(nested(w)),
                op: ast::BinaryOperator::And,
                right: Box::new(nested(on)),
            },
            None => on,
        });
    }
    Ok(Peeled {
        laterals,
        trimmed: Some(trimmed),
        order,
    })
}

/// The names a FROM factor gives its tables (their aliases, else their
/// names), pushed onto `out`; for a nested join, each of its tables'.
fn factor_names(f: &ast::TableFactor, out: &mut Vec<String>) {
    let alias = |a: &Option<ast::TableAlias>| a.as_ref().map(|a| a.name.value.clone());
    match f {
        ast::TableFactor::Table { name, alias: a, .. } => out.push(alias(a).unwrap_or_else(|| {
            name.0
                .last()
                .and_then(|p| p.as_ident())
                .map_or_else(|| name.to_string(), |i| i.value.clone())
        })),
        ast::TableFactor::NestedJoin {
            table_with_joins,
            alias: a,
        } => match alias(a) {
            Some(a) => out.push(a),
            None => {
                factor_names(&table_with_joins.relation, out);
                for j in &table_with_joins.joins {
                    factor_names(&j.relation, out);
                }
            }
        },
        ast::TableFactor::Derived { alias: a, .. }
        | ast::TableFactor::JsonTable { alias: a, .. } => out.extend(alias(a)),
        _ => {}
    }
}

/// `e` in parentheses (so that an OR inside stays whole under an AND).
fn nested(e: ast::Expr) -> ast::Expr {
    ast::Expr::Nested(Box::new(e))
}

/// The AND-conjuncts of `e` as written.
fn ast_conjuncts(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            ast_conjuncts(left, out);
            ast_conjuncts(right, out);
        }
        ast::Expr::Nested(inner)
            if matches!(
                **inner,
                ast::Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                }
            ) =>
        {
            ast_conjuncts(inner, out);
        }
        other => out.push(other.clone()),
    }
}

/// `s` with each `LEFT JOIN x ON …` whose ON runs a correlated subquery
/// written as the `LATERAL` derived table it equals: `LEFT JOIN LATERAL
/// (SELECT * FROM x WHERE <the ON's other conjuncts>) AS x ON <the
/// conjuncts with the subqueries, or naming a column without its
/// table>`. Per row of the tables before it, x's rows that the plain
/// conjuncts pass (a key read where they give x's key) are tested
/// against the rest, and the row is NULL-extended when none passes:
/// MySQL's outer join. None when there is no such join.
fn outer_join_laterals(conn: &Conn<'_>, s: &ast::Select) -> SqlResult<Option<ast::Select>> {
    use ast::JoinOperator as J;
    let correlated = |e: &ast::Expr| {
        super::subquery::find(e, 0).iter().any(|q| {
            matches!(
                conn.subqueries.results.get(&q.to_string()),
                Some(Err(err)) if err.code == codes::BAD_FIELD
            )
        })
    };
    let takes = |j: &ast::Join| match &j.join_operator {
        J::Left(ast::JoinConstraint::On(e)) | J::LeftOuter(ast::JoinConstraint::On(e)) => {
            !matches!(j.relation, ast::TableFactor::Derived { lateral: true, .. }) && correlated(e)
        }
        _ => false,
    };
    if !s.from.iter().any(|t| t.joins.iter().any(takes)) {
        return Ok(None);
    }
    let mut out = s.clone();
    for twj in &mut out.from {
        for j in &mut twj.joins {
            if !takes(j) {
                continue;
            }
            let (J::Left(ast::JoinConstraint::On(on)) | J::LeftOuter(ast::JoinConstraint::On(on))) =
                &j.join_operator
            else {
                continue;
            };
            let alias = match &j.relation {
                ast::TableFactor::Table { alias: Some(a), .. }
                | ast::TableFactor::Derived { alias: Some(a), .. } => a.name.clone(),
                ast::TableFactor::Table {
                    name, alias: None, ..
                } => match name.0.last().and_then(|p| p.as_ident()) {
                    Some(i) => i.clone(),
                    None => continue,
                },
                _ => continue,
            };
            let mut parts = Vec::new();
            ast_conjuncts(on, &mut parts);
            // A conjunct naming a column without its table stays in the
            // ON too: inside the derived query the name would find x's
            // column first, where the ON finds it ambiguous (1052).
            let (subs, plain): (Vec<ast::Expr>, Vec<ast::Expr>) = parts
                .into_iter()
                .partition(|p| correlated(p) || names_unqualified(p));
            let and = |items: Vec<ast::Expr>| {
                items
                    .into_iter()
                    .map(nested)
                    .reduce(|a, b| ast::Expr::BinaryOp {
                        left: Box::new(a),
                        op: ast::BinaryOperator::And,
                        right: Box::new(b),
                    })
            };
            let mut query = lateral_template()?;
            if let ast::SetExpr::Select(inner) = query.body.as_mut() {
                inner.from[0].relation = j.relation.clone();
                inner.selection = and(plain);
            }
            let on = and(subs).unwrap_or(ast::Expr::Value(ast::Value::Boolean(true).into()));
            j.relation = ast::TableFactor::Derived {
                lateral: true,
                subquery: Box::new(query),
                alias: Some(ast::TableAlias {
                    explicit: true,
                    name: alias,
                    columns: Vec::new(),
                    at: None,
                }),
                sample: None,
            };
            j.join_operator = J::Left(ast::JoinConstraint::On(on));
        }
    }
    Ok(Some(out))
}

/// Whether `e` names a column without its table.
fn names_unqualified(e: &ast::Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if matches!(x, ast::Expr::Identifier(_)) {
            found = true;
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

/// `SELECT * FROM x`, whose FROM [`outer_join_laterals`] replaces.
fn lateral_template() -> SqlResult<ast::Query> {
    let parsed = sqlparser::parser::Parser::parse_sql(
        &crate::engine::dialect::SkarvDialect,
        "SELECT * FROM x",
    )
    .map_err(SqlError::syntax)?;
    match parsed.into_iter().next() {
        Some(ast::Statement::Query(q)) => Ok(*q),
        _ => Err(SqlError::new(
            codes::UNKNOWN,
            "the LATERAL template did not parse",
        )),
    }
}

/// Plans a `LATERAL` derived table over the `columns` before it: its
/// shape, and its columns for the query's scope.
fn plan_lateral(
    conn: &mut Conn<'_>,
    l: &LateralAst,
    columns: &[ScopeColumn],
    hidden: &[usize],
    placeholders: &[Location],
) -> SqlResult<(Lateral, Vec<ScopeColumn>)> {
    let query = match &l.source {
        LateralSource::Json { factor, visible } => {
            let (table, cols) =
                super::json_table::plan(conn, factor, columns, visible, placeholders)?;
            let lat = Lateral {
                width: cols.len(),
                rows: LateralRows::Json(Arc::new(table)),
                on: None,
                left: l.left,
            };
            return Ok((lat, cols));
        }
        LateralSource::Query(query) => query,
    };
    let Some(alias) = &l.alias else {
        return Err(SqlError::new(
            codes::DERIVED_MUST_HAVE_ALIAS,
            "Every derived table must have its own alias",
        ));
    };
    let outer = expr::outer_columns(query, columns, hidden);
    let m = super::correlated::plan_with(conn, query, &outer, placeholders, false)?;
    let name = alias.name.value.clone();
    let names = super::derived::column_names(alias, &m)?;
    let cols = super::derived::shape_columns(&name, &names, &m)?;
    let lat = Lateral {
        rows: LateralRows::Query {
            query: Arc::new(query.clone()),
            text: query.to_string().into(),
            outer,
        },
        width: cols.len(),
        on: None,
        left: l.left,
    };
    Ok((lat, cols))
}

/// Each row joined to the rows its `LATERAL` derived tables give for it
/// (run per row, through the statement's per-row cache).
fn expand_laterals(
    p: &Planned,
    mut found: Vec<(Vec<Val>, Vec<schema::Value>)>,
    runner: &super::correlated::Runner<'_, '_>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<(Vec<Val>, Vec<schema::Value>)>> {
    for lat in &p.laterals {
        let mut out = Vec::with_capacity(found.len());
        // A JSON_TABLE's rows so far, for its warnings' row numbers.
        let mut stored = 0;
        for (row, key) in found {
            ctx.check_killed()?;
            let json_rows;
            let query_rows;
            let rows: &[Vec<Val>] = match &lat.rows {
                LateralRows::Query { query, text, outer } => {
                    query_rows = runner.query_rows(query, text, outer, &row, Vec::new())?;
                    ctx.warnings
                        .extend(crate::engine::expr::PerRow::take_warnings(runner));
                    &query_rows.rows
                }
                LateralRows::Json(table) => {
                    json_rows = table.rows(&row, &mut stored, ctx)?;
                    &json_rows
                }
            };
            let mut matched = false;
            for r in rows {
                let mut combined = Vec::with_capacity(row.len() + lat.width);
                combined.extend(row.iter().cloned());
                combined.extend(r.iter().cloned());
                let pass = match &lat.on {
                    Some(on) => on.test(&combined, ctx)?,
                    None => true,
                };
                if pass {
                    matched = true;
                    out.push((combined, key.clone()));
                }
            }
            if !matched && lat.left {
                let mut combined = row;
                combined.extend(std::iter::repeat_n(Val::Null, lat.width));
                out.push((combined, key));
            }
            if out.len() > ROWS_IN_MEMORY_MAX {
                return Err(SqlError::unsupported(format_args!(
                    "queries of more than {ROWS_IN_MEMORY_MAX} rows"
                )));
            }
        }
        found = out;
    }
    Ok(found)
}

/// WHERE split into what is tested as rows are read and the conjuncts
/// that run correlated subqueries or read `LATERAL` columns (positions
/// from `base_width` on), tested after.
fn split_late(cond: Option<Expr>, base_width: usize) -> (Option<Expr>, Option<Expr>) {
    let Some(cond) = cond else {
        return (None, None);
    };
    let late_one = |c: &Expr| {
        let mut cols = Vec::new();
        plan::join::columns(c, &mut cols);
        c.has_sub() || cols.iter().any(|at| *at >= base_width)
    };
    if !late_one(&cond) {
        return (Some(cond), None);
    }
    let (late, early): (Vec<&Expr>, Vec<&Expr>) =
        cond.conjuncts().into_iter().partition(|c| late_one(c));
    let and = |items: Vec<&Expr>| Expr::and_of(items.into_iter().cloned());
    (and(early), and(late))
}

/// Whether a planned SELECT runs correlated subqueries (per row, after
/// its rows are read).
fn per_row(p: &Planned) -> bool {
    !p.laterals.is_empty() || per_row_exprs(p)
}

/// [`per_row`] but for its JSON_TABLEs (which EXPLAIN shows as tables of
/// the SELECT's own, not as dependent queries).
fn per_row_queries(p: &Planned) -> bool {
    p.laterals
        .iter()
        .any(|l| matches!(l.rows, LateralRows::Query { .. }))
        || per_row_exprs(p)
}

/// Whether a planned SELECT's expressions run correlated subqueries.
fn per_row_exprs(p: &Planned) -> bool {
    p.late.is_some()
        || p.items
            .iter()
            .chain(&p.group)
            .chain(&p.having)
            .chain(p.order.iter().map(|(e, _)| e))
            .chain(p.aggs.iter().filter_map(|a| a.arg.as_ref()))
            .chain(p.windows.iter().flat_map(super::window::exprs))
            .chain(
                // GROUP_CONCAT's arguments and ORDER BY (`arg` is none of
                // them): missed, they were evaluated without the rows'
                // subqueries run and refused.
                p.aggs
                    .iter()
                    .filter_map(|a| a.concat.as_deref())
                    .flat_map(|gc| gc.args.iter().chain(gc.order.iter().map(|(e, _)| e))),
            )
            .any(Expr::has_sub)
}

/// Whether a FROM name names an `information_schema` table.
pub(super) fn is_virtual(conn: &Conn<'_>, name: &ast::ObjectName) -> bool {
    virtual_table(conn, name).is_some()
}

/// The virtual database (`information_schema`, `ndbinfo`) and table a
/// FROM names (qualified, or in the current database), if it names one.
pub(crate) fn virtual_table(conn: &Conn<'_>, name: &ast::ObjectName) -> Option<(String, String)> {
    let parts = crate::engine::expr::name_parts(name);
    match parts.as_slice() {
        [db, t] if crate::engine::catalog::is_virtual_db(db) => Some((db.clone(), t.clone())),
        [t] => conn
            .session
            .database
            .as_deref()
            .filter(|db| crate::engine::catalog::is_virtual_db(db))
            .map(|db| (db.to_owned(), t.clone())),
        _ => None,
    }
}

/// The kind of a virtual table's column, from its type.
pub(super) fn meta_kind(meta: &ColumnMeta) -> Kind {
    use crate::value::ColumnType as T;
    match meta.ty {
        T::Tiny | T::Short | T::Long | T::Int24 | T::LongLong | T::Year => Kind::Int {
            unsigned: meta.flags & crate::value::flags::UNSIGNED != 0,
        },
        T::NewDecimal | T::Decimal => Kind::Dec {
            scale: meta.decimals,
        },
        T::Float | T::Double => Kind::Double,
        T::Date => Kind::Date,
        T::DateTime | T::Timestamp => Kind::DateTime { fsp: 0 },
        T::Time => Kind::Time { fsp: 0 },
        _ => Kind::Str {
            collation: Some(Collation::Utf8mb4GeneralCi),
        },
    }
}

/// The names of a SELECT's unaliased expression items as written (the
/// parsed statement's spans do not always cover an item, and the
/// session's splitter parses without locations): the items of the
/// statement text's first SELECT list, found by tokens. None when not
/// needed or the counts differ; per item, None for `*` and aliased ones.
fn written_names(s: &ast::Select, sql: &str) -> Option<Vec<Option<String>>> {
    let needs = s.projection.iter().any(|i| {
        matches!(i, ast::SelectItem::UnnamedExpr(e)
            if !matches!(e, ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)))
    });
    if !needs {
        return None;
    }
    // From this SELECT on: `sql` is the whole text of a multi-statement
    // (whose first SELECT named the items of every later one).
    let texts = expr::select_item_texts(expr::text_from(sql, s.select_token.0.span.start)?)?;
    if texts.len() != s.projection.len() {
        return None;
    }
    Some(
        s.projection
            .iter()
            .zip(texts)
            .map(|(item, text)| match item {
                // A lone string literal or NULL is named by its value.
                ast::SelectItem::UnnamedExpr(e @ ast::Expr::Value(v))
                    if matches!(
                        v.value,
                        ast::Value::SingleQuotedString(_)
                            | ast::Value::DoubleQuotedString(_)
                            | ast::Value::Null
                    ) =>
                {
                    Some(expr::item_name(e, ""))
                }
                // A column is named by its name, not its qualified text.
                ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(i))
                    if !i.value.starts_with('@') =>
                {
                    None
                }
                ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(parts))
                    if parts.first().is_some_and(|p| !p.value.starts_with('@')) =>
                {
                    None
                }
                ast::SelectItem::UnnamedExpr(_) => Some(text),
                _ => None,
            })
            .collect(),
    )
}

/// Gives every select item of `q` (its subqueries' and derived tables'
/// too) that is named by its text an alias of that name, read from `sql`,
/// the text `q` was parsed from. A view's query is kept as `q`'s text
/// (`Query::to_string()`, which spaces and quotes as it likes): its items
/// keep the names they were written with, as MariaDB stores them
/// (`a+1 AS \`a+1\``).
pub(crate) fn alias_written_names(q: &mut ast::Query, sql: &str) {
    struct Names<'s>(&'s str);
    impl ast::VisitorMut for Names<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> std::ops::ControlFlow<()> {
            alias_set(&mut q.body, self.0);
            std::ops::ControlFlow::Continue(())
        }
    }
    fn alias_set(set: &mut ast::SetExpr, sql: &str) {
        match set {
            ast::SetExpr::Select(s) => {
                let Some(names) = written_names(s, sql) else {
                    return;
                };
                for (item, name) in s.projection.iter_mut().zip(names) {
                    if let (ast::SelectItem::UnnamedExpr(e), Some(name)) = (&*item, name) {
                        *item = ast::SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias: ast::Ident::with_quote('`', name),
                        };
                    }
                }
            }
            ast::SetExpr::SetOperation { left, right, .. } => {
                alias_set(left, sql);
                alias_set(right, sql);
            }
            // A query in parentheses is visited as a query of its own.
            _ => {}
        }
    }
    let _ = ast::VisitMut::visit(q, &mut Names(sql));
}

/// The select items by alias (or written name), for the names HAVING and
/// ORDER BY may use.
fn named_items(items: &[Expr], aliases: &[Option<(String, ast::Expr)>]) -> Vec<(String, Expr)> {
    items
        .iter()
        .zip(aliases)
        .filter_map(|(e, a)| a.as_ref().map(|(name, _)| (name.clone(), e.clone())))
        .collect()
}

/// An expression of GROUP BY, HAVING or ORDER BY: a select item's alias
/// names that item, and in GROUP BY and ORDER BY (`positions`: the
/// clause's name) so does its position; a position out of range, 0 or
/// negative included, is 1054 naming the clause (MariaDB's words). In
/// HAVING a number is itself (`HAVING 0` is false). A name that is both
/// an alias and a column is the alias in HAVING and ORDER BY
/// (`alias_first`), the column in GROUP BY, as in MySQL (Connector/J's
/// `… AS TABLE_TYPE … HAVING TABLE_TYPE IN …`).
fn resolve_alias(
    scope: &mut expr::Scope<'_>,
    e: &ast::Expr,
    items: &[Expr],
    aliases: &[Option<(String, ast::Expr)>],
    alias_first: bool,
    positions: Option<&'static str>,
) -> SqlResult<Expr> {
    if let ast::Expr::Identifier(ident) = e {
        let is_column = !alias_first && scope.resolve(None, &ident.value).is_ok();
        if !is_column {
            for (at, a) in aliases.iter().enumerate() {
                if let Some((name, _)) = a {
                    if name.eq_ignore_ascii_case(&ident.value) {
                        return Ok(items[at].clone());
                    }
                }
            }
        }
    }
    if let (Some(clause), Some((negative, n))) = (positions, expr::position_literal(e)) {
        let unknown = || {
            let sign = if negative { "-" } else { "" };
            SqlError::new(
                codes::BAD_FIELD,
                format!("Unknown column '{sign}{n}' in '{clause}'"),
            )
        };
        if negative {
            return Err(unknown());
        }
        if let Ok(pos) = n.parse::<usize>() {
            return items.get(pos.wrapping_sub(1)).cloned().ok_or_else(unknown);
        }
    }
    // Scope.aggs was lent to items; a HAVING/ORDER BY aggregate adds to it.
    scope.lower(e)
}

/// A SELECT's `WINDOW name AS (…)` definitions (one naming another is
/// that one's specification by name).
fn named_windows(s: &ast::Select) -> Vec<(String, ast::WindowSpec)> {
    s.named_window
        .iter()
        .map(|w| match &w.1 {
            ast::NamedWindowExpr::WindowSpec(spec) => (w.0.value.clone(), spec.clone()),
            ast::NamedWindowExpr::NamedWindow(base) => (
                w.0.value.clone(),
                ast::WindowSpec {
                    window_name: Some(base.clone()),
                    partition_by: Vec::new(),
                    order_by: Vec::new(),
                    window_frame: None,
                },
            ),
        })
        .collect()
}

fn order_exprs(
    conn: &mut Conn<'_>,
    ob: &ast::OrderBy,
    p: &mut Planned,
    named_windows: &[(String, ast::WindowSpec)],
    placeholders: &[Location],
) -> SqlResult<Vec<(Expr, bool)>> {
    let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    // The columns the query reads (the table's under its alias, or a
    // virtual table's).
    let columns = p.source.clone();
    let aliases: Vec<Option<(String, ast::Expr)>> = p
        .metas
        .iter()
        .map(|m| {
            Some((
                m.name.to_string(),
                ast::Expr::Identifier(ast::Ident::new(&*m.name)),
            ))
        })
        .collect();
    let items = p.items.clone();
    let mut aggs = std::mem::take(&mut p.aggs);
    let mut windows = std::mem::take(&mut p.windows);
    let hidden = p.hidden.clone();
    let named_windows = named_windows.to_vec();
    let out = with_scope(conn, columns, placeholders, |scope| {
        scope.aggs = Some(std::mem::take(&mut aggs));
        scope.windows = Some(std::mem::take(&mut windows));
        scope.named_windows = named_windows;
        scope.clause = "ORDER BY";
        scope.hidden = hidden;
        scope.aliases = named_items(&items, &aliases);
        let mut out = Vec::new();
        let mut collations = Vec::new();
        for o in exprs {
            let e = resolve_alias(scope, &o.expr, &items, &aliases, true, Some("ORDER BY"))?;
            let e = scope.order_key(e);
            collations.push(kind_collation(scope.kind(&e)));
            out.push((e, matches!(o.options.sort, Some(ast::OrderBySort::Desc))));
        }
        aggs = scope.aggs.take().unwrap_or_default();
        windows = scope.windows.take().unwrap_or_default();
        Ok((out, collations))
    });
    p.aggs = aggs;
    p.windows = windows;
    let (out, collations) = out?;
    p.order_collations = collations;
    Ok(out)
}

/// Runs a query.
pub fn run(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    params: &[Val],
    placeholders: &[Location],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let plans = plan_query(conn, q, placeholders, Some(params))?;
    answer(conn, plans, params, more, sink)
}

/// Runs a `DO`'s expressions as MariaDB's `mysql_do` does: each in turn,
/// and the statement is OK whatever they raise. The first error met while
/// they are evaluated (a subquery of two rows, a BIGINT out of range) is
/// kept as the statement's "Error" note, later ones are dropped, and the
/// expressions after it still run (their warnings kept). An error found
/// while the statement is planned (an unknown table, column or function,
/// a subquery of two columns) fails it, as nothing ran yet. A subquery of
/// more than one row is NULL with its 1242 by then (the statement runs as
/// one with IGNORE: `session::ignores_errors`); that 1242 is an error.
pub(crate) fn run_do(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<()> {
    let plans = plan_query(conn, q, placeholders, Some(params))?;
    let [p] = plans.planned.as_slice() else {
        unreachable!("a DO is one SELECT of expressions (`session::parse`)");
    };
    if !p.aggs.is_empty() {
        return Err(SqlError::new(
            codes::INVALID_GROUP_FUNC_USE,
            "Invalid use of group function",
        ));
    }
    if p.table.is_some() || p.join.is_some() || p.rows.is_some() || !p.windows.is_empty() {
        rows_of_planned(conn, &plans, params)?;
        return Ok(());
    }
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(params, &environment);
    ctx.killed = Some(&info.query_killed);
    ctx.deadline = super::super::session::execution_deadline(conn);
    let mut failed = false;
    let mut note_error = |conn: &mut Conn<'_>, error: &SqlError| {
        if !std::mem::replace(&mut failed, true) {
            conn.session.note_error(error);
        }
    };
    for item in &p.items {
        let outcome = item.eval(&[], &mut ctx);
        for (code, message) in ctx.warnings.drain(..) {
            if code & !crate::engine::expr::eval::FLAG_BITS == codes::SUBQUERY_NO_1_ROW {
                note_error(conn, &SqlError::new(codes::SUBQUERY_NO_1_ROW, message));
            } else {
                keep_warning(conn, code, message);
            }
        }
        match outcome {
            Err(e) if matches!(e.code, codes::QUERY_INTERRUPTED | codes::QUERY_TIMEOUT) => {
                return Err(e)
            }
            Err(e) => note_error(conn, &e),
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Stores a row's values ([`first_error_in_key_order`]): in the
/// statement's transaction (to look for a duplicate key), the row's place
/// among those read, its values.
pub(crate) type StoreRow<'a> =
    dyn FnMut(&skarv_client::Transaction<'_>, usize, Vec<Val>, &mut Ctx<'_>) -> SqlResult<()> + 'a;

/// What a strict INSERT … SELECT from one table fails on first when its
/// rows are run as MariaDB runs them: read in primary key order (its
/// clustered index), each tested by WHERE, its values made and then
/// stored (`store`, given the row's place among those read) before the
/// next row is read, so that a warning of the fifth row's WHERE comes
/// after a value of the second that does not fit. Skarv's own run tests
/// every row, then makes every row's values, then stores them; the
/// statement fails either way, and this finds the error MariaDB names.
/// Run only once the statement has failed (it reads the rows again).
/// None: no error found, or the query is not of that shape (a join,
/// grouping, DISTINCT, ORDER BY, correlated subqueries, a UNION, a user
/// variable assigned, which a second run would assign again), and the
/// caller keeps its own error.
pub(crate) fn first_error_in_key_order(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    params: &[Val],
    placeholders: &[Location],
    store: &mut StoreRow<'_>,
) -> SqlResult<Option<SqlError>> {
    if q.order_by.is_some() || q.with.is_some() || !matches!(q.body.as_ref(), SetExpr::Select(_)) {
        return Ok(None);
    }
    let plans = plan_query(conn, q, placeholders, Some(params))?;
    let [p] = plans.planned.as_slice() else {
        return Ok(None);
    };
    let simple = p.join.is_none()
        && p.late.is_none()
        && p.laterals.is_empty()
        && p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && p.having.is_none()
        && p.order.is_empty()
        && !p.distinct
        && p.rows.is_none()
        && !plans.calc_found_rows
        && !per_row(p)
        && !assigns_user_vars(p);
    let (true, Some(table)) = (simple, &p.table) else {
        return Ok(None);
    };
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), &mut ctx)?;
    if let Some(error) = super::write::strict_error(&mut ctx) {
        return Ok(Some(error));
    }
    let (access, _) = single_access(table, p, cond.as_deref(), &mut ctx)?;
    ctx.warnings.clear();
    let tx = txn::take(conn)?;
    let found = fetch(
        &tx, table, &access, None, None, false, None, &mut ctx, None, None, None,
    )
    .map(|mut rows| {
        in_primary_key_order(table, &mut rows);
        first_error_of_rows(&tx, p, cond.as_deref(), rows, &mut ctx, store)
    });
    txn::finish(conn, tx, found)
}

/// [`first_error_in_key_order`] of the rows read, in key order.
fn first_error_of_rows(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    cond: Option<&Expr>,
    rows: Vec<(Vec<Val>, Vec<schema::Value>)>,
    ctx: &mut Ctx<'_>,
    store: &mut StoreRow<'_>,
) -> Option<SqlError> {
    let offset = usize::try_from(p.offset).unwrap_or(usize::MAX);
    let limit = p
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut passed = 0usize;
    let mut made = 0usize;
    // `store` is told the row's number as MariaDB's warnings count it:
    // the rows read so far, those WHERE rejected too.
    for (read, (row, _)) in rows.into_iter().enumerate() {
        if made >= limit {
            break;
        }
        match super::write::replayed_test(cond, &row, ctx) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => return Some(error),
        }
        passed += 1;
        if passed <= offset {
            continue;
        }
        let mut values = Vec::with_capacity(p.items.len());
        for item in &p.items {
            match item.eval(&row, ctx) {
                Ok(v) => values.push(v),
                // A warning of an item before it came first: strict mode
                // made that one the error.
                Err(error) => return Some(super::write::strict_error(ctx).unwrap_or(error)),
            }
        }
        if let Some(error) = super::write::strict_error(ctx) {
            return Some(error);
        }
        if let Err(error) = store(tx, read, values, ctx) {
            return Some(error);
        }
        made += 1;
    }
    None
}

/// Whether `q` is `SELECT … INTO …` (the INTO on its last SELECT, as
/// for a UNION's): its rows go to variables, not to the client
/// ([`run_into`]).
pub(crate) fn has_into(q: &ast::Query) -> bool {
    last_select(&q.body).is_some_and(|s| s.into.is_some())
}

/// The last SELECT of a query's body: itself, a UNION's rightmost, or a
/// parenthesised query's (`(SELECT …) INTO @v`).
fn last_select(body: &ast::SetExpr) -> Option<&ast::Select> {
    match body {
        ast::SetExpr::Select(s) => Some(s),
        ast::SetExpr::SetOperation { right, .. } => last_select(right),
        ast::SetExpr::Query(q) => last_select(&q.body),
        _ => None,
    }
}

/// [`last_select`], to change.
pub(crate) fn last_select_mut(body: &mut ast::SetExpr) -> Option<&mut ast::Select> {
    match body {
        ast::SetExpr::Select(s) => Some(s),
        ast::SetExpr::SetOperation { right, .. } => last_select_mut(right),
        ast::SetExpr::Query(q) => last_select_mut(&mut q.body),
        _ => None,
    }
}

/// `SELECT … INTO @a, @b`: the one row the query finds, its values set
/// to the user variables in order, as MariaDB does: no row leaves them as
/// they were, with warning 1329; more than one is error 1172; as many
/// variables as columns or 1222. Affected rows: the rows found. Of a
/// UNION, its rows. `INTO OUTFILE`/`DUMPFILE` (a file on the server) and
/// a table are not taken.
pub(crate) fn run_into(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    let into = last_select(&q.body)
        .and_then(|s| s.into.as_ref())
        .expect("has_into checked the INTO");
    if crate::engine::session::is_trailing_into(q, into) {
        super::outfile::warn_trailing_into(conn);
    }
    let mut names = Vec::with_capacity(into.targets.len());
    for target in &into.targets {
        let name = match target {
            ast::Expr::Identifier(ident) => ident.value.strip_prefix('@'),
            _ => None,
        };
        match name {
            Some(name) if !name.is_empty() && !name.starts_with('@') => {
                names.push(name.to_ascii_lowercase());
            }
            _ => {
                return Err(SqlError::unsupported(format_args!(
                    "SELECT … INTO {target} (only user variables, @name)"
                )))
            }
        }
    }
    let mut plain = q.clone();
    if let Some(s) = last_select_mut(&mut plain.body) {
        s.into = None;
    }
    let found = materialise(conn, &plain, placeholders, Some(params))?;
    if found.metas.len() != names.len() {
        return Err(SqlError::new(
            codes::WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
            "The used SELECT statements have a different number of columns",
        ));
    }
    let mut rows = found.rows.into_iter();
    let Some(row) = rows.next() else {
        conn.session.warn(
            codes::SP_FETCH_NO_DATA,
            "No data - zero rows fetched, selected, or processed".to_owned(),
        );
        return Ok(Answered::Ok(OkInfo::default()));
    };
    if rows.next().is_some() {
        return Err(SqlError::new(
            codes::TOO_MANY_ROWS,
            "Result consisted of more than one row",
        ));
    }
    for ((name, value), meta) in names.into_iter().zip(&row).zip(&found.metas) {
        let value = super::convert::to_sql(value, meta);
        conn.session.user_vars.insert(name, value);
    }
    Ok(Answered::Ok(OkInfo {
        affected_rows: 1,
        ..OkInfo::default()
    }))
}

/// Runs a planned query and sends its rows.
fn answer(
    conn: &mut Conn<'_>,
    mut plans: Plans,
    params: &[Val],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    lock_own_writes(conn, &mut plans.planned);
    answer_planned(conn, &plans, params, more, sink)
}

/// [`answer`] of plans whose reads already lock as [`lock_own_writes`]
/// has them lock.
fn answer_planned(
    conn: &mut Conn<'_>,
    plans: &Plans,
    params: &[Val],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if streams(plans) && !limit_zero(plans) {
        return stream(conn, plans, params, more, sink);
    }
    let rows = rows_of_planned(conn, plans, params)?;
    let end = OkInfo {
        warnings: conn.session.warning_count(),
        more_results: more,
        ..OkInfo::default()
    };
    send(sink, &plans.metas, rows, &end)
}

/// Whether a single SELECT's LIMIT is 0 (and no SQL_CALC_FOUND_ROWS
/// counts its rows): it has no rows, and nothing is read or evaluated, as
/// MariaDB's "Impossible LIMIT" (whose rows would not raise an error
/// either). MariaDB runs a UNION's SELECTs whatever its LIMIT: so does this.
fn limit_zero(plans: &Plans) -> bool {
    !plans.calc_found_rows && matches!(plans.planned.as_slice(), [p] if p.limit == Some(0))
}

/// Whether a query's rows can be sent as they are read ([`stream`]): one
/// SELECT of one table or a join whose rows need nothing of each other (no
/// grouping, aggregate, window, DISTINCT, HAVING, UNION,
/// SQL_CALC_FOUND_ROWS, LATERAL or correlated subquery). An ORDER BY is
/// sorted as the rows come: a top N with a LIMIT, else in the sort
/// buffer and runs on disk past it (`filesort`).
fn streams(plans: &Plans) -> bool {
    let [p] = plans.planned.as_slice() else {
        return false;
    };
    !plans.calc_found_rows
        && plans.union_order.is_empty()
        && plans.union_limit.is_none()
        && plans.union_offset == 0
        && (p.table.is_some() || p.join.is_some())
        && p.rows.is_none()
        && p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && !p.distinct
        && !p.rollup
        && p.having.is_none()
        && p.items.len() == plans.metas.len()
        && !per_row(p)
        && !assigns_user_vars(p)
        // Its rows are claimed once all candidates are known.
        && !claims_in_order(p)
        // A deep page is placed first, then read (`late`).
        && !late::deep_page(p)
}

/// Whether the query assigns user variables (`@n := @n + 1`): its rows
/// are then read whole and put in primary key order before they are
/// evaluated, the order InnoDB hands them over in, so that the
/// assignments run in MariaDB's order (its row-numbering idiom; the data
/// nodes return a scan's rows in hash order).
fn assigns_user_vars(p: &Planned) -> bool {
    let mut found = false;
    let mut look =
        |e: &Expr| found |= matches!(e, Expr::Func(crate::engine::expr::Func::SetUserVar, _));
    let order = p.order.iter().map(|(e, _)| e);
    for e in p.items.iter().chain(&p.cond).chain(&p.late).chain(order) {
        e.each(&mut look);
    }
    found
}

/// Rows of `table` (all its columns) in primary key order, by their
/// values (a read without a lock has no keys); a table without one keeps
/// its order.
pub(crate) fn in_primary_key_order(
    table: &TableInfo,
    rows: &mut [(Vec<Val>, Vec<skarv_client::Value>)],
) {
    if table.hidden_key {
        return;
    }
    let key: Vec<usize> = table.primary_key_columns().collect();
    let env = Env::default();
    let mut ctx = Ctx::new(&[], &env);
    rows.sort_by(|a, b| {
        key.iter()
            .map(|at| {
                compare(
                    &a.0[*at],
                    &b.0[*at],
                    Some(Collation::Utf8mb4GeneralCi),
                    &mut ctx,
                )
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
}

/// The most rows (LIMIT and OFFSET together) an ORDER BY … LIMIT keeps
/// while it reads ([`stream`]); one asking more is sorted as one without
/// a LIMIT (`filesort`).
pub const TOP_ROWS_MAX: usize = 100_000;
/// A top-N buffer is sorted and cut back to its N rows once it holds
/// twice N, or this many.
const TOP_BUFFER_ROWS_MIN: usize = 1_024;

/// Answers a query that [`streams`]: each row is shaped and sent as the
/// scan hands it over (a join's as `join::run_each` makes it), so the SQL
/// node holds a batch of rows, not the result (a whole-table `SELECT *`,
/// mysqldump's, was held whole, up to `ROWS_IN_MEMORY_MAX` rows), and
/// LIMIT stops the scan. MariaDB sends such a result as it reads it too;
/// an error after the columns went ends the result set
/// (`ResultSink::error`), as its does. An ORDER BY
/// with a LIMIT of N rows (its offset included) keeps the first N by the
/// order among the rows read so far, sorting whenever it holds twice that
/// (MariaDB's filesort with a priority queue): the SQL node holds 2N rows,
/// not the table, and the result is the full sort's (the sort is stable
/// and rows are kept in the order they came). Any other ORDER BY is sorted
/// in `sort_buffer_size` and runs on disk past it (`filesort`). Rows an
/// ordered index gives in the order asked for (one partition) are sent
/// as they come.
fn stream(
    conn: &mut Conn<'_>,
    plans: &Plans,
    params: &[Val],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let p = &plans.planned[0];
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(params, &environment);
    ctx.killed = Some(&info.query_killed);
    ctx.deadline = super::super::session::execution_deadline(conn);
    // Items that are distinct plain columns (`SELECT *`, `SELECT a, b`)
    // take their values out of the row instead of copying them.
    let mut moved = vec![false; p.source.len().max(1)];
    let moves = p.items.iter().all(|e| match e {
        Expr::Col(c) if !moved.get(*c).copied().unwrap_or(true) => {
            moved[*c] = true;
            true
        }
        _ => false,
    });
    let offset = usize::try_from(p.offset).unwrap_or(usize::MAX);
    let limit = p
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let key_items = order_key_items(p, &p.items);
    let keys_needed = key_items.iter().any(Option::is_none);
    let sort_buffer_bytes = if p.order.is_empty() {
        0
    } else {
        super::super::session::sort_buffer_bytes(conn)
    };
    let tx = txn::take(conn)?;
    let autocommit_read = p.lock.is_none() && !txn::in_transaction(conn);
    let mut committed = false;
    let result = (|| {
        let cond = match (&p.join, &p.table) {
            (None, Some(table)) => plan::fold_select_constants(table, p.cond.as_ref(), &mut ctx)?,
            _ => None,
        };
        // A join's plan, or the one table's access.
        let read = match (&p.join, &p.table) {
            (Some(spec), _) => {
                let (plan, top) = join_plans(p, spec, &mut ctx)?;
                Read::Join(spec, plan, top)
            }
            (None, Some(table)) => {
                let (access, filter) = single_access(table, p, cond.as_deref(), &mut ctx)?;
                let (descending, sorted) =
                    order_by_index(table, p, &access, cond.as_deref(), &mut ctx)?;
                // Each partition's scan runs in a transaction of its own,
                // which would not see this one's writes: only with none
                // to flush.
                let merged = if sorted || tx.pending_ops() > 0 {
                    None
                } else {
                    merged_partitions(table, p, &access, cond.as_deref(), &mut ctx)?
                };
                Read::Table {
                    table,
                    access,
                    filter,
                    descending,
                    sorted,
                    merged,
                }
            }
            (None, None) => unreachable!("a streamed query reads a table or a join"),
        };
        let sorted = matches!(
            read,
            Read::Table { sorted: true, .. }
                | Read::Table {
                    merged: Some(_),
                    ..
                }
        );
        sink.columns(&plans.metas).map_err(sending_error)?;
        if limit == 0 {
            return Ok(());
        }
        let stop_after = offset.saturating_add(limit);
        // ORDER BY whose rows come unordered: with a LIMIT, the rows kept;
        // else all of them, in the sort buffer and on disk past it.
        let unordered = !p.order.is_empty() && !sorted;
        let top = (unordered && stop_after <= TOP_ROWS_MAX).then_some(stop_after);
        let mut filesort = (unordered && top.is_none()).then(|| {
            filesort::FileSort::new(p, &key_items, sort_buffer_bytes, &std::env::temp_dir())
        });
        // A top N join along its first table's order that gives up
        // forgets the rows it kept (`join::run_top`).
        let buffer: std::cell::RefCell<Vec<Shaped>> = std::cell::RefCell::new(Vec::new());
        let mut seen = 0usize;
        let mut out = Vec::with_capacity(plans.metas.len());
        let mut each = |mut row: Vec<Val>, ctx: &mut Ctx<'_>| -> SqlResult<bool> {
            if top.is_some() || filesort.is_some() {
                let mut keys = Vec::new();
                if keys_needed {
                    keys.reserve_exact(p.order.len());
                    for ((e, _), item) in p.order.iter().zip(&key_items) {
                        keys.push(match item {
                            Some(_) => Val::Null,
                            None => e.eval(&row, ctx)?,
                        });
                    }
                }
                let mut values = Vec::with_capacity(p.items.len());
                for item in &p.items {
                    values.push(item.eval(&row, ctx)?);
                }
                if let Some(sort) = filesort.as_mut() {
                    sort.push((values, keys))?;
                    return Ok(true);
                }
                let keep = top.expect("a top N or a file sort");
                let mut buffer = buffer.borrow_mut();
                buffer.push((values, keys));
                if buffer.len() >= keep.saturating_mul(2).max(TOP_BUFFER_ROWS_MIN) {
                    sort_rows(p, &key_items, &mut buffer);
                    buffer.truncate(keep);
                }
                return Ok(true);
            }
            seen += 1;
            if seen <= offset {
                return Ok(true);
            }
            let mut values = Vec::with_capacity(p.items.len());
            for item in &p.items {
                values.push(match item {
                    Expr::Col(c) if moves => row
                        .get_mut(*c)
                        .map_or(Val::Null, |v| std::mem::replace(v, Val::Null)),
                    _ => item.eval(&row, ctx)?,
                });
            }
            send_row(sink, &plans.metas, values, &mut out)?;
            Ok(seen < stop_after)
        };
        match read {
            Read::Join(spec, plan, top_join) => {
                let warned = ctx.warnings.len();
                let finished = match &top_join {
                    Some(t) => super::join::run_top(&tx, spec, t, &mut ctx, None, &mut each)?,
                    None => false,
                };
                if !finished {
                    if top_join.is_some() {
                        buffer.borrow_mut().clear();
                        ctx.warnings.truncate(warned);
                    }
                    super::join::run_each(&tx, spec, &plan, p.lock, &mut ctx, None, &mut each)?;
                }
            }
            Read::Table {
                table,
                access,
                filter,
                descending,
                merged,
                ..
            } => {
                let columns = projection(table, p);
                if let Some(merged) = merged {
                    // Each partition's rows in index order, merged: the
                    // first N of the table's order read, about N rows.
                    let read = super::merge::MergedRead {
                        filter,
                        cond: cond.as_deref(),
                        columns: columns.as_deref(),
                        stop_after: p.limit.is_some().then_some(stop_after),
                        ..super::merge::MergedRead::along(table, &access, descending, merged)
                    };
                    super::merge::merged_each(tx.session(), read, &mut ctx, |row, ctx| {
                        each(row, ctx)
                    })?;
                } else {
                    // A locking read that stops at its LIMIT locks no more
                    // rows per partition than it needs (`fetch`'s rule).
                    let batch_rows = match p.limit {
                        Some(_) if p.lock.is_some() && !unordered => {
                            super::locking_batch_rows(stop_after)
                        }
                        _ => 0,
                    };
                    fetch_each(
                        &tx,
                        table,
                        &access,
                        filter,
                        p.lock,
                        descending,
                        cond.as_deref(),
                        &mut ctx,
                        autocommit_read.then_some(&mut committed),
                        columns.as_deref(),
                        super::ScanShape {
                            batch_rows,
                            ..super::ScanShape::default()
                        },
                        |row, _key, ctx| each(row, ctx),
                    )?;
                }
            }
        }
        if top.is_some() {
            let mut buffer = buffer.take();
            sort_rows(p, &key_items, &mut buffer);
            for (values, _) in buffer.into_iter().skip(offset).take(limit) {
                send_row(sink, &plans.metas, values, &mut out)?;
            }
        }
        if let Some(sort) = filesort {
            let mut at = 0usize;
            let passes = sort.finish(|values| {
                at += 1;
                // A long merge stops for KILL QUERY and max_execution_time
                // as the scan did.
                ctx.check_killed()?;
                if at > offset {
                    send_row(sink, &plans.metas, values, &mut out)?;
                }
                Ok(at < stop_after)
            })?;
            info.status.sort_merge_passes.add(passes);
        }
        Ok(())
    })();
    let result = if committed {
        result
    } else {
        txn::finish(conn, tx, result)
    };
    // Warnings met before an error stay the statement's, listed before
    // it, as MariaDB's diagnostics area keeps them (`SELECT '3x' + 1,
    // 18446744073709551615 + 1`: 1292, then 1690).
    keep_warnings(conn, &mut ctx);
    result?;
    let end = OkInfo {
        warnings: conn.session.warning_count(),
        more_results: more,
        ..OkInfo::default()
    };
    sink.end_rows(&end).map_err(sending_error)?;
    Ok(Answered::Done)
}

/// What a streamed query reads: a join by its plan, or one table by its
/// access (its scan direction, and whether rows come in ORDER BY's order).
enum Read<'p> {
    /// A join: its plan, and the plan of a top N along its first
    /// table's order when that reads less (`top_join`).
    Join(
        &'p Arc<JoinSpec>,
        plan::join::JoinPlan,
        Option<super::join::TopJoin>,
    ),
    Table {
        table: &'p Arc<TableInfo>,
        access: Access,
        filter: Option<skarv_client::Filter>,
        descending: bool,
        sorted: bool,
        /// Read partition by partition, the rows merged in index order
        /// (`merged_partitions`): the partitions, and the columns the
        /// index orders by.
        merged: Option<(Vec<u32>, Vec<usize>)>,
    },
}

/// Reads of a transaction that wrote see its writes through a lock.
fn lock_own_writes(conn: &Conn<'_>, planned: &mut [Planned]) {
    if conn.tx.wrote && txn::in_transaction(conn) {
        for p in planned {
            p.lock.get_or_insert(RowLock::SHARED);
        }
    }
}

/// A query reading one row by key, its read defined in its transaction
/// and the request built but not sent: a thread-pool worker sends the
/// requests of the connections it serves together (one write and one
/// round trip for all) and then answers each.
pub(crate) struct Deferred<'s> {
    plans: Arc<Plans>,
    table: Arc<TableInfo>,
    tx: skarv_client::Transaction<'s>,
    read: skarv_client::OpHandle,
    later: skarv_client::Later,
    /// The read commits (an autocommit read): no `txn::finish` after it.
    commits: bool,
    params: Vec<Val>,
    /// The statement's environment, made when it began: its `NOW()`.
    environment: Env,
}

/// Plans a query; when it is a single-table read of one row by key
/// (primary or unique), defines that read in the statement's transaction
/// and starts its execute without sending it (Some): an autocommit read
/// commits with it, as [`run`] would. Anything else runs to `sink` as
/// [`run`] runs it (None).
///
/// With `kept` (a prepared statement's slot), a plan kept there that still
/// holds is used instead of planning again, and a plan that may be kept
/// is left there. Without `may_defer`, the query is always answered to
/// `sink` (a prepared query of another shape, which runs by its kept
/// plan here).
pub(crate) fn begin_deferred<'s>(
    conn: &mut Conn<'s>,
    q: &ast::Query,
    params: Vec<Val>,
    placeholders: &[Location],
    sink: &mut dyn ResultSink,
    kept: Option<&mut Option<KeptPlan>>,
    may_defer: bool,
) -> SqlResult<Option<Deferred<'s>>> {
    // A transaction that wrote reads under a lock: never deferred, and
    // the plan changes for it (`lock_own_writes`).
    let kept = kept.filter(|_| !(conn.tx.wrote && txn::in_transaction(conn)));
    let hit = match kept.as_deref() {
        Some(Some(k)) if k.holds(conn) => Some((Arc::clone(&k.plans), k.key.clone())),
        Some(Some(_)) => {
            crate::engine::status::count_command(conn, crate::engine::status::COM_STMT_REPREPARE);
            None
        }
        _ => None,
    };
    let (plans, key) = match hit {
        Some(hit) => hit,
        None => {
            let mut plans = plan_query(conn, q, placeholders, Some(&params))?;
            lock_own_writes(conn, &mut plans.planned);
            let plans = Arc::new(plans);
            let mut key = None;
            if let Some(slot) = kept {
                *slot = KeptPlan::of(conn, q, &plans);
                key = slot.as_ref().and_then(|k| k.key.clone());
            }
            (plans, key)
        }
    };
    let read = match plans.planned.as_slice() {
        [p] if may_defer && !plans.calc_found_rows => {
            deferred_read(conn, p, &params, key.as_deref())?
        }
        _ => None,
    };
    let Some((table, tx, read, later, commits, environment)) = read else {
        // Answered the usual way, by the plan as it is: its reads lock as
        // `lock_own_writes` has them (a fresh plan got its locks above; a
        // kept one is used only where that adds none).
        answer_planned(conn, &plans, &params, false, sink)?;
        return Ok(None);
    };
    Ok(Some(Deferred {
        plans,
        table,
        tx,
        read,
        later,
        commits,
        params,
        environment,
    }))
}

/// A prepared query's plan kept between its executes: a read of one base
/// table, without subqueries, views, CTEs or a LIMIT from a placeholder,
/// whose planning (a third of a point select's instructions in the SQL
/// node) then happens once. It holds while the table's definition, the
/// current database and the session's variables are what it was made
/// under; the values of `?` are bound at each execute, and the key read
/// is worked out from them then (`single_access`).
pub(crate) struct KeptPlan {
    plans: Arc<Plans>,
    /// Its WHERE clause when that names one row by primary key.
    key: Option<Arc<plan::KeyShape>>,
    /// The native table name and the definition it had.
    cluster: String,
    native: Arc<skarv_client::Table>,
    database: Option<String>,
    settings: u64,
    /// The table cache's generation when `native` was last found current
    /// in it ([`skarv_client::Session::tables_generation`]; `u64::MAX`:
    /// never): while it is the same, the cache was not asked again.
    checked: std::cell::Cell<u64>,
}

impl KeptPlan {
    /// The plan to keep, if `q` planned as `plans` may be kept.
    fn of(conn: &Conn<'_>, q: &ast::Query, plans: &Arc<Plans>) -> Option<KeptPlan> {
        let [p] = plans.planned.as_slice() else {
            return None;
        };
        if plans.calc_found_rows {
            return None;
        }
        let table = p.table.as_ref()?;
        let literal = |e: &ast::Expr| matches!(e, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)));
        let plain_limit = match &q.limit_clause {
            None => true,
            Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
                limit.as_ref().is_none_or(literal)
                    && offset.as_ref().is_none_or(|o| literal(&o.value))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                literal(offset) && literal(limit)
            }
        };
        let simple = q.with.is_none()
            && plain_limit
            && p.join.is_none()
            && p.rows.is_none()
            && p.lock.is_none()
            && !per_row(p)
            && !p.cond.as_ref().is_some_and(Expr::has_sub)
            && conn.subqueries.results.is_empty()
            && conn.subqueries.correlated.is_empty();
        simple.then(|| KeptPlan {
            plans: Arc::clone(plans),
            key: plan::KeyShape::of(table, p.cond.as_ref(), p.hints.usable(table, "PRIMARY"))
                .map(Arc::new),
            cluster: table.native.name().to_owned(),
            native: Arc::clone(&table.native),
            database: conn.session.database.clone(),
            settings: conn.session.vars.changes(),
            checked: std::cell::Cell::new(u64::MAX),
        })
    }

    /// Whether the plan still holds for `conn`. The table's definition is
    /// looked up in the shared cache (a lock every SQL worker takes) only
    /// after the cache changed.
    fn holds(&self, conn: &Conn<'_>) -> bool {
        if self.settings != conn.session.vars.changes() || self.database != conn.session.database {
            return false;
        }
        // Read before the lookup: a change after it shows as a new number.
        let generation = conn.native.tables_generation();
        if generation == self.checked.get() {
            return true;
        }
        let current = conn
            .native
            .table(&self.cluster)
            .is_ok_and(|now| Arc::ptr_eq(&now, &self.native));
        if current {
            self.checked.set(generation);
        }
        current
    }
}

/// What `deferred_read` started: the table, the transaction, the read,
/// its execute, whether it commits, and the statement's environment.
type Started<'s> = (
    Arc<TableInfo>,
    skarv_client::Transaction<'s>,
    skarv_client::OpHandle,
    skarv_client::Later,
    bool,
    Env,
);

/// The read of a planned SELECT that reads one row by key (what
/// [`run_one`] would read), its execute started; None for any other plan.
/// `key`: the shape of `p`'s condition when a kept plan found it names one
/// row by primary key.
fn deferred_read<'s>(
    conn: &mut Conn<'s>,
    p: &Planned,
    params: &[Val],
    key: Option<&plan::KeyShape>,
) -> SqlResult<Option<Started<'s>>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    // Only a read without a lock (read committed: it never waits for one)
    // is deferred. One that may wait (`FOR UPDATE`, or any read of a
    // transaction that wrote) could wait for a lock of another connection
    // of the same batch, whose answer the worker writes only after this
    // one's: a deadlock the lock timeout would end, where connections on
    // threads of their own only wait.
    if p.join.is_some() || p.rows.is_some() || p.limit == Some(0) || p.lock.is_some() || per_row(p)
    {
        return Ok(None);
    }
    // Nor one that would carry a transaction's deferred writes (they lock).
    if conn.tx.tx.as_ref().is_some_and(|tx| tx.pending_ops() > 0) {
        return Ok(None);
    }
    let in_transaction = txn::in_transaction(conn);
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    let known = match key {
        Some(key) => key.access(table, &mut ctx)?,
        None => None,
    };
    let access = match known {
        Some(access) => access,
        None => single_access(table, p, p.cond.as_ref(), &mut ctx)?.0,
    };
    let (key, index) = match &access {
        Access::Keys(keys) if keys.len() == 1 => (&keys[0], None),
        Access::Unique { keys, index } if keys.len() == 1 => (&keys[0], Some(index.as_str())),
        _ => return Ok(None),
    };
    // Warnings of the plan (a key value converted) are the statement's.
    keep_warnings(conn, &mut ctx);
    let columns = projection(table, p);
    let tx = txn::take(conn)?;
    let op = super::key_read(&table.native, key, None, index, columns.as_deref());
    let commits = !in_transaction;
    let mode = if commits {
        skarv_client::ExecMode::Commit
    } else {
        skarv_client::ExecMode::NoCommit
    };
    let native = |e: skarv_client::Error| txn::native_error_in(&e, &table.name);
    let started = tx
        .define(op)
        .and_then(|read| Ok((read, tx.execute_later(mode)?)))
        .map_err(native);
    match started {
        Ok((read, later)) => Ok(Some((
            Arc::clone(table),
            tx,
            read,
            later,
            commits,
            environment,
        ))),
        Err(error) => txn::finish(conn, tx, Err(error)),
    }
}

/// Waits for a deferred read (sent by the worker with others) and answers
/// its query to `sink` as [`run`] would have.
pub(crate) fn finish_deferred<'s>(
    conn: &mut Conn<'s>,
    deferred: Deferred<'s>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let Deferred {
        plans,
        table,
        tx,
        read,
        later,
        commits,
        params,
        environment,
    } = deferred;
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(&params, &environment);
    ctx.killed = Some(&info.query_killed);
    let p = &plans.planned[0];
    let outcome = tx
        .finish_later(later)
        .map_err(|e| txn::native_error_in(&e, &table.name));
    let committed = commits && outcome.is_ok();
    let rows = (|| {
        let outcome = outcome?;
        let mut found = Vec::new();
        if let Some(r) = super::found_row(&table, outcome.result(read))? {
            ctx.check_killed()?;
            let row = super::sql_row_of(&table, r, ctx.env.tz_secs);
            let pass = match &p.cond {
                Some(c) => c.test(&row, &mut ctx)?,
                None => true,
            };
            if pass {
                let key = super::primary_key_of_row(&table, r);
                found.push((row, key));
            }
        }
        shape(p, found, &mut ctx)
    })();
    // As in `rows_of`: a read that committed is over; otherwise the
    // transaction stays open (or ends on an error) as after any statement.
    let rows = if committed {
        rows
    } else {
        txn::finish(conn, tx, rows)
    };
    keep_warnings(conn, &mut ctx);
    let rows = rows?;
    let end = OkInfo {
        warnings: conn.session.warning_count(),
        more_results: more,
        ..OkInfo::default()
    };
    send(sink, &plans.metas, rows, &end)
}

/// The rows of a planned query.
fn rows_of(conn: &mut Conn<'_>, mut plans: Plans, params: &[Val]) -> SqlResult<Vec<Vec<Val>>> {
    lock_own_writes(conn, &mut plans.planned);
    rows_of_planned(conn, &plans, params)
}

/// The rows of a planned query whose reads already lock as
/// [`lock_own_writes`] has them lock (a kept plan: no lock to add).
fn rows_of_planned(conn: &mut Conn<'_>, plans: &Plans, params: &[Val]) -> SqlResult<Vec<Vec<Val>>> {
    let Plans {
        metas: _,
        kinds,
        nullable: _,
        arm_casts,
        planned,
        sets,
        union_order,
        union_limit,
        union_offset,
        calc_found_rows,
        placeholders,
    } = plans;
    if limit_zero(plans) {
        return Ok(Vec::new());
    }
    let (union_limit, union_offset, calc_found_rows) =
        (*union_limit, *union_offset, *calc_found_rows);
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = Ctx::new(params, &environment);
    ctx.killed = Some(&info.query_killed);
    ctx.deadline = super::super::session::execution_deadline(conn);
    let needs_tx = planned
        .iter()
        .any(|p| p.table.is_some() || p.join.is_some());
    // Each SELECT's rows, combined once all are read.
    let mut arms: Vec<Vec<Vec<Val>>> = Vec::with_capacity(planned.len());
    // Warnings met before an error stay the statement's, as MariaDB's
    // diagnostics area keeps them.
    let gathered = (|| -> SqlResult<()> {
        if planned.iter().any(per_row) {
            let alone = planned.len() == 1;
            for (arm, p) in planned.iter().enumerate() {
                let mut arm_rows = run_per_row(conn, p, &mut ctx, alone, placeholders, None)?;
                conform(&mut arm_rows, arm_casts.get(arm), &mut ctx)?;
                arms.push(arm_rows);
            }
        } else if needs_tx {
            let tx = txn::take(conn)?;
            // Rows are claimed only where the transaction wrote nothing
            // yet: its own writes are not among a committed read's
            // candidates.
            let claims = planned.len() == 1 && !tx.may_hold_locks();
            let autocommit_read =
                planned.len() == 1 && planned[0].lock.is_none() && !txn::in_transaction(conn);
            let mut committed = false;
            let result = (|| {
                let mut all = Vec::with_capacity(planned.len());
                for (arm, p) in planned.iter().enumerate() {
                    let commit = autocommit_read.then_some(&mut committed);
                    let mut arm_rows = if claims && claims_in_order(p) {
                        run_claimed(&tx, p, &mut ctx)?
                    } else {
                        run_one(&tx, p, &mut ctx, commit)?
                    };
                    conform(&mut arm_rows, arm_casts.get(arm), &mut ctx)?;
                    all.push(arm_rows);
                }
                Ok(all)
            })();
            arms = if committed {
                result?
            } else {
                txn::finish(conn, tx, result)?
            };
        } else {
            for (arm, p) in planned.iter().enumerate() {
                let mut arm_rows = run_one_without_table(p, &mut ctx)?;
                conform(&mut arm_rows, arm_casts.get(arm), &mut ctx)?;
                arms.push(arm_rows);
            }
        }
        Ok(())
    })();
    if let Err(e) = gathered {
        keep_warnings(conn, &mut ctx);
        return Err(e);
    }
    // A UNION's columns compare under their own (aggregated) collations,
    // its DOUBLE columns as doubles.
    let union_columns = sets::Columns::of(kinds);
    let mut rows = if arms.len() == 1 {
        arms.pop().unwrap_or_default()
    } else {
        sets::combine(sets, &mut arms, &union_columns, false)
    };
    sets::sort(&mut rows, union_order, &union_columns.collations);
    if calc_found_rows {
        conn.session.calc_found_rows = Some(rows.len() as u64);
    }
    let rows = sets::limit(rows, union_limit, union_offset);
    keep_warnings(conn, &mut ctx);
    Ok(rows)
}

/// Rounds the decimals of kept rows (a derived table's, a subquery's) to
/// their columns' scales: a quotient's extra digits
/// (`eval::division_digits`) live within one expression, as MariaDB keeps
/// them, not in a row it stores (its temporary table's DECIMAL(p, s)).
fn round_to_kinds(rows: &mut [Vec<Val>], kinds: &[Kind]) {
    let scales: Vec<Option<u8>> = kinds
        .iter()
        .map(|k| match k {
            Kind::Dec { scale } => Some(*scale),
            _ => None,
        })
        .collect();
    if scales.iter().all(Option::is_none) {
        return;
    }
    for row in rows {
        for (v, scale) in row.iter_mut().zip(&scales) {
            if let (Val::Dec(d), Some(scale)) = (&*v, scale) {
                if d.scale > *scale {
                    *v = Val::Dec(d.rescale(*scale).unwrap_or(*d));
                }
            }
        }
    }
}

/// Casts one SELECT's rows of a UNION to the UNION's column types
/// (`casts` None or all None: they are of them already).
fn conform(
    rows: &mut [Vec<Val>],
    casts: Option<&Vec<Option<CastTo>>>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<()> {
    let Some(casts) = casts.filter(|c| c.iter().any(Option::is_some)) else {
        return Ok(());
    };
    for row in rows {
        for (v, cast) in row.iter_mut().zip(casts) {
            if let Some(to) = cast {
                let taken = std::mem::replace(v, Val::Null);
                *v = expr::eval::cast(taken, to, ctx)?;
            }
        }
    }
    Ok(())
}

fn send(
    sink: &mut dyn ResultSink,
    metas: &[ColumnMeta],
    rows: Vec<Vec<Val>>,
    end: &OkInfo,
) -> SqlResult<Answered> {
    sink.columns(metas).map_err(sending_error)?;
    let mut out = Vec::with_capacity(metas.len());
    for row in rows {
        send_row(sink, metas, row, &mut out)?;
    }
    sink.end_rows(end).map_err(sending_error)?;
    Ok(Answered::Done)
}

/// Sends one row of values, each converted to its column's protocol
/// value in `out` (reused from row to row).
fn send_row(
    sink: &mut dyn ResultSink,
    metas: &[ColumnMeta],
    row: Vec<Val>,
    out: &mut Vec<crate::value::SqlValue>,
) -> SqlResult<()> {
    if let Some(values) = sink.values() {
        values.push(row);
        return Ok(());
    }
    out.clear();
    out.extend(
        row.into_iter()
            .zip(metas)
            .map(|(v, m)| convert::to_sql_owned(v, m)),
    );
    sink.row(out).map_err(sending_error)
}

fn sending_error(e: std::io::Error) -> SqlError {
    SqlError::new(codes::UNKNOWN, format!("sending rows: {e}"))
}

fn run_one_without_table(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<Vec<Vec<Val>>> {
    let found = found_without_table(p, ctx)?;
    shape(p, found, ctx)
}

/// The rows of a SELECT without a table of the cluster (a virtual table,
/// or none) that pass its WHERE (but for the late conjuncts).
fn found_without_table(
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<(Vec<Val>, Vec<schema::Value>)>> {
    if let Some(rows) = &p.rows {
        // A virtual table: every row, filtered here.
        let mut found = Vec::new();
        for row in rows.iter() {
            ctx.check_killed()?;
            let pass = match &p.cond {
                Some(c) => c.test(row, ctx)?,
                None => true,
            };
            if pass {
                found.push((row.clone(), Vec::new()));
            }
        }
        return Ok(found);
    }
    let pass = match &p.cond {
        Some(c) => c.test(&[], ctx)?,
        None => true,
    };
    Ok(if pass {
        vec![(Vec::new(), Vec::new())]
    } else {
        Vec::new()
    })
}

/// A planned SELECT that runs correlated subqueries: its rows read (in
/// the statement's transaction, then let go), then the late conjuncts,
/// the items and the rest evaluated with the subqueries run per row.
fn run_per_row(
    conn: &mut Conn<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
    alone: bool,
    placeholders: &[Location],
    stats: Option<&mut Vec<super::join::StepStats>>,
) -> SqlResult<Vec<Vec<Val>>> {
    let (found, sorted) = if p.table.is_some() || p.join.is_some() {
        let tx = txn::take(conn)?;
        let autocommit_read = alone && p.lock.is_none() && !txn::in_transaction(conn);
        let mut committed = false;
        let commit = autocommit_read.then_some(&mut committed);
        let result = found_of(&tx, p, ctx, commit, stats);
        if committed {
            result?
        } else {
            txn::finish(conn, tx, result)?
        }
    } else {
        (found_without_table(p, ctx)?, false)
    };
    let params = ctx.params;
    let runner = super::correlated::Runner::new(conn, placeholders, params);
    let mut c = ctx.child(params, &[], Some(&runner));
    let result = (|| {
        // An OR a constant makes hold is folded as the WHERE's other
        // conjuncts are (a table's `plan::fold_constants`, a join's
        // `plan::join::plan`), before the rows.
        let late = match &p.table {
            Some(table) => plan::fold_constants(table, p.late.as_ref(), false, &mut c)?,
            None => plan::fold_true_disjuncts(p.late.as_ref(), &mut c)?,
        };
        let found = expand_laterals(p, found, &runner, &mut c)?;
        let mut kept = Vec::new();
        for (row, key) in found {
            c.check_killed()?;
            let pass = match &late {
                Some(late) => late.test(&row, &mut c)?,
                None => true,
            };
            if pass {
                kept.push((row, key));
            }
        }
        shape_found(p, kept, sorted, &mut c)
    })();
    ctx.absorb(c);
    result
}

/// The native names of the columns a single-table SELECT reads (those
/// its items, condition, grouping, aggregates and order name, and the
/// primary key), or None when it reads them all.
fn projection<'t>(table: &'t TableInfo, p: &Planned) -> Option<Vec<&'t str>> {
    if !p.laterals.is_empty() {
        // What the LATERAL tables name of the row: read it all.
        return None;
    }
    super::columns_named(table, named_exprs(p))
}

/// A join's plan, and the plan of a top N along its first table's order
/// when that reads less (`top_join`); both read the columns the
/// statement names (`JoinPlan::used`).
fn join_plans(
    p: &Planned,
    spec: &JoinSpec,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(plan::join::JoinPlan, Option<super::join::TopJoin>)> {
    let mut plan = plan::join::plan(spec, p.cond.as_ref(), ctx)?;
    let mut top = top_join(p, spec, &plan, ctx)?;
    // What the LATERAL tables name of the row: read it all.
    let used = p.laterals.is_empty().then(|| {
        let mut used = vec![false; spec.columns.len()];
        let mut named = Vec::new();
        for e in named_exprs(p) {
            plan::join::columns(e, &mut named);
        }
        for at in named {
            match used.get_mut(at) {
                Some(u) => *u = true,
                // A position outside the combined row: read every column.
                None => return None,
            }
        }
        Some(used)
    });
    let used = used.flatten();
    if let Some(t) = &mut top {
        t.plan.used.clone_from(&used);
    }
    plan.used = used;
    Ok((plan, top))
}

/// The expressions of a SELECT that read its FROM's columns: its items,
/// conditions, grouping, HAVING, order, aggregates' and window
/// functions' arguments.
fn named_exprs(p: &Planned) -> impl Iterator<Item = &Expr> {
    named_outside_where(p).chain(&p.cond).chain(&p.late)
}

/// [`named_exprs`] but the conditions: what a SELECT makes of the rows
/// that pass them.
fn named_outside_where(p: &Planned) -> impl Iterator<Item = &Expr> {
    p.items
        .iter()
        .chain(&p.group)
        .chain(&p.having)
        .chain(p.order.iter().map(|(e, _)| e))
        .chain(p.aggs.iter().filter_map(|a| a.arg.as_ref()))
        .chain(p.windows.iter().flat_map(super::window::exprs))
        .chain(
            p.aggs
                .iter()
                .filter_map(|a| a.concat.as_deref())
                .flat_map(|gc| gc.args.iter().chain(gc.order.iter().map(|(e, _)| e))),
        )
}

fn run_one(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
    commit: Option<&mut bool>,
) -> SqlResult<Vec<Vec<Val>>> {
    if let Some(found) = min_max_candidates(tx, p, ctx)? {
        return shape(p, found, ctx);
    }
    if count_star_only(p) && tx.pending_ops() == 0 {
        if let Some(table) = &p.table {
            // The partitions' committed row counts: one statistics scan,
            // no row read (NDB answers `SELECT COUNT(*) FROM t` so).
            let stats = tx
                .table_stats(&table.native)
                .map_err(|e| txn::native_error_in(&e, &table.name))?;
            let rows = i64::try_from(stats.rows).unwrap_or(i64::MAX);
            let counts = vec![Val::Int(rows); p.aggs.len()];
            let group = (vec![Val::Null; p.source.len()], counts);
            return shape_groups(p, vec![group], None, ctx);
        }
    }
    let mut commit = commit;
    if let Some(groups) = groups_in_order(tx, p, ctx)? {
        return shape_groups(p, groups, None, ctx);
    }
    if let Some(found) = distinct_candidates(tx, p, ctx)? {
        return shape(p, found, ctx);
    }
    if let Some(groups) = aggregated::aggregated(tx, p, ctx, commit.as_deref_mut())? {
        return shape_groups(p, groups, None, ctx);
    }
    if let Some(groups) = eager::joined_groups(tx, p, ctx)? {
        return shape_groups(p, groups, None, ctx);
    }
    if let Some(rows) = late::late_rows(tx, p, ctx)? {
        return Ok(rows);
    }
    let (found, sorted) = found_of(tx, p, ctx, commit, None)?;
    shape_found(p, found, sorted, ctx)
}

/// A group: its first row, and its aggregates' values.
type Group = (Vec<Val>, Vec<Val>);

/// Most groups [`groups_in_order`] makes (OFFSET plus LIMIT); past it the
/// rows are grouped as any.
const GROUPS_IN_ORDER_MAX: u64 = 10_000;

/// Rows of the first batch [`groups_in_order`] reads per group it wants
/// when the index statistics do not say how many a group holds.
const GROUP_ROWS_GUESS: u64 = 16;

/// `SELECT … FROM t [WHERE …] GROUP BY a, b [ORDER BY a, b] LIMIT n`
/// whose GROUP BY columns lead an ordered index (past columns the WHERE
/// fixes): the index's rows, merged over the partitions, come group by
/// group, so each group is finished when the next begins and the read
/// stops after the first n (plus OFFSET) groups, where grouping reads
/// every row first (MariaDB reads such a GROUP BY along the index and
/// stops at the LIMIT too). The groups with their aggregates' values, in
/// GROUP BY's order; None (grouped as before) without a LIMIT, with
/// HAVING, ROLLUP, a window, DISTINCT, a lock or an ORDER BY other than
/// the GROUP BY's columns, or no such index.
fn groups_in_order(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Group>>> {
    let (Some(table), Some(read)) = (&p.table, groups_in_order_read(tx.pending_ops(), p, ctx)?)
    else {
        return Ok(None);
    };
    let InOrderRead {
        access,
        filter,
        cond,
        distinct_prefix,
        merged,
        descending,
        grouped,
        stop_after,
    } = read;
    let Access::Range { index, .. } = &access else {
        unreachable!("groups in order read an ordered index")
    };
    // The first batches hold about the rows of the groups wanted, as the
    // index statistics count a group's rows (`ANALYZE TABLE`).
    let per_group = match distinct_prefix {
        0 => table
            .stats
            .rows_per_key(index, p.group.len())
            .unwrap_or(GROUP_ROWS_GUESS)
            .max(1),
        _ => GROUP_ROWS_GUESS,
    };
    let rows_hint = usize::try_from(stop_after.saturating_mul(per_group)).unwrap_or(usize::MAX);
    let columns = projection(table, p);
    let fresh: Vec<AggState> = p.aggs.iter().map(AggState::fresh).collect();
    let stored = groups_through_table(p);
    let collations = &p.group_collations;
    let same_group = |a: &[Val], b: &[Val]| {
        grouped.iter().enumerate().all(|(i, c)| {
            let coll = collations.get(i).copied().unwrap_or(GENERAL_CI);
            order_cmp(&a[*c], &b[*c], coll).is_eq()
        })
    };
    let wanted = usize::try_from(stop_after).unwrap_or(usize::MAX);
    let mut groups: Vec<Group> = Vec::new();
    let mut current: Option<(Vec<Val>, Vec<AggState>)> = None;
    let finish = |(row, states): (Vec<Val>, Vec<AggState>), ctx: &mut Ctx<'_>| {
        let mut values = Vec::with_capacity(states.len());
        for (spec, st) in p.aggs.iter().zip(states) {
            values.push(st.finish(spec, ctx)?);
        }
        SqlResult::Ok((row, values))
    };
    let read = super::merge::MergedRead {
        filter,
        cond: cond.as_ref(),
        columns: columns.as_deref(),
        stop_after: Some(rows_hint),
        distinct_prefix,
        ..super::merge::MergedRead::along(table, &access, descending, merged)
    };
    super::merge::merged_each(tx.session(), read, ctx, |row, ctx| {
        if let Some((first, _)) = &current {
            if !same_group(first, &row) {
                let done = current.take().expect("a group");
                groups.push(finish(done, ctx)?);
                if groups.len() >= wanted {
                    return Ok(false);
                }
            }
        }
        let (_, states) = current.get_or_insert_with(|| (row.clone(), fresh.clone()));
        add_to_group(p, states, &row, stored, ctx)?;
        Ok(true)
    })?;
    if let Some(done) = current.take() {
        groups.push(finish(done, ctx)?);
    }
    Ok(Some(groups))
}

/// The read of [`groups_in_order`]: the access along the index, its
/// pushed filter, the WHERE, the distinct prefix, the partitions merged
/// (`merge_plan`), the direction, the GROUP BY columns and the groups
/// wanted (OFFSET plus LIMIT).
struct InOrderRead {
    access: Access,
    filter: Option<skarv_client::Filter>,
    cond: Option<Expr>,
    distinct_prefix: u8,
    merged: (Vec<u32>, Vec<usize>),
    descending: bool,
    grouped: Vec<usize>,
    stop_after: u64,
}

/// The read of [`groups_in_order`], or None when the query is not one
/// (`tx_pending`: the transaction's writes not yet sent).
fn groups_in_order_read(
    tx_pending: usize,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<InOrderRead>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    let Some(limit) = p.limit else {
        return Ok(None);
    };
    let stop_after = limit.saturating_add(p.offset);
    let simple = reads_its_table_alone(p)
        && !p.group.is_empty()
        && p.having.is_none()
        && !p.rollup
        && !p.distinct
        && stop_after <= GROUPS_IN_ORDER_MAX
        && tx_pending == 0;
    if !simple {
        return Ok(None);
    }
    // GROUP BY's columns in one direction: ORDER BY's if it names them
    // (all of them, in that order), else ascending, as MariaDB returns
    // groups.
    let descending = p.order.first().is_some_and(|(_, d)| *d);
    let mut grouped = Vec::with_capacity(p.group.len());
    for g in &p.group {
        let Expr::Col(c) = g else {
            return Ok(None);
        };
        grouped.push(*c);
    }
    let order: Vec<(Expr, bool)> = grouped
        .iter()
        .map(|c| (Expr::Col(*c), descending))
        .collect();
    let same = |(a, d): &(Expr, bool), (b, e): &(Expr, bool)| {
        d == e && matches!((a, b), (Expr::Col(x), Expr::Col(y)) if x == y)
    };
    let ordered_as_grouped =
        p.order.len() == order.len() && p.order.iter().zip(&order).all(|(a, b)| same(a, b));
    if !p.order.is_empty() && !ordered_as_grouped {
        return Ok(None);
    }
    let warned = ctx.warnings.len();
    // Groups that need each value once (`distinct_read`) come one row a
    // value from each partition, when that index gives GROUP BY's order.
    let distinct = distinct_read(tx_pending, p, ctx)?;
    ctx.warnings.truncate(warned);
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let usable = |native: &str| p.hints.usable(table, native);
    let (access, filter, distinct_prefix) = match distinct {
        Some((access, filter, _, prefix)) if plan::follows_index(table, &order, &access) => {
            (access, filter, prefix)
        }
        _ => {
            let (access, filter) = plan::access_with(table, cond.as_deref(), ctx, &usable)?;
            (along_order(table, &order, access, &usable), filter, 0)
        }
    };
    let merged = if plan::follows_index(table, &order, &access) {
        merge_plan(table, &order, &access, cond.as_deref(), ctx)?
    } else {
        None
    };
    let (Some(merged), Access::Range { .. }) = (merged, &access) else {
        // Planned again by `found_of`, its warnings with it.
        ctx.warnings.truncate(warned);
        return Ok(None);
    };
    Ok(Some(InOrderRead {
        access,
        filter,
        cond: cond.map(std::borrow::Cow::into_owned),
        distinct_prefix,
        merged,
        descending,
        grouped,
        stop_after,
    }))
}

/// Whether `p` is `SELECT COUNT(*) [, COUNT(*) …] FROM t` of one table
/// without WHERE, grouping, lock or any column outside its aggregates
/// (expressions of the counts, HAVING, ORDER BY and LIMIT allowed): the
/// table's row count answers it, as the partitions keep it
/// (`Transaction::table_stats`), with no row read.
fn count_star_only(p: &Planned) -> bool {
    let plain = p.table.is_some()
        && p.join.is_none()
        && p.rows.is_none()
        && p.cond.is_none()
        && p.late.is_none()
        && p.laterals.is_empty()
        && p.group.is_empty()
        && !p.rollup
        && p.windows.is_empty()
        && p.lock.is_none()
        && !p.aggs.is_empty()
        && p.aggs
            .iter()
            .all(|a| a.func == AggFn::CountStar && !a.distinct);
    plain && !names_bare_column(p)
}

/// Whether a select item, ORDER BY or HAVING of `p` names a column outside
/// an aggregate (what a value of a group's rows alone cannot answer).
fn names_bare_column(p: &Planned) -> bool {
    let mut bare = Vec::new();
    let order = p.order.iter().map(|(e, _)| e);
    for e in p.items.iter().chain(order).chain(&p.having) {
        plan::join::columns(e, &mut bare);
    }
    !bare.is_empty()
}

/// Rows per partition and aggregate up to which a MIN/MAX reads the table
/// rather than each partition's first row ([`min_max_candidates`]).
const MIN_MAX_SCAN_ROWS_PER_PARTITION: u64 = 8;

/// One aggregate's read of [`min_max_candidates`]: the access along its
/// column's index, its pushed filter, the WHERE with the column not NULL,
/// whether descending (MAX), and the column.
type MinMaxRead = (Access, Option<skarv_client::Filter>, Expr, bool, usize);

/// The reads of [`min_max_candidates`] (what `EXPLAIN` shows as "Select
/// tables optimized away"), or None when the query is not one.
fn min_max_reads(p: &Planned, ctx: &mut Ctx<'_>) -> SqlResult<Option<Vec<MinMaxRead>>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    let simple = reads_its_table_alone(p) && p.group.is_empty() && !p.aggs.is_empty() && !p.rollup;
    if !simple {
        return Ok(None);
    }
    let mut wanted = Vec::with_capacity(p.aggs.len());
    for a in &p.aggs {
        match (a.func, &a.arg) {
            (AggFn::Min | AggFn::Max, Some(Expr::Col(c))) if a.concat.is_none() => {
                wanted.push((*c, a.func == AggFn::Max));
            }
            _ => return Ok(None),
        }
    }
    if names_bare_column(p) {
        return Ok(None);
    }
    let partitions = table.native.def().partitions;
    let small = table.stats.rows().is_some_and(|rows| {
        rows <= u64::from(partitions) * MIN_MAX_SCAN_ROWS_PER_PARTITION * wanted.len() as u64
    });
    if small {
        return Ok(None);
    }
    let warned = plan_mark(ctx);
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let usable = |native: &str| p.hints.usable(table, native);
    // Each aggregate's read: its column not NULL, along an index.
    let mut reads = Vec::with_capacity(wanted.len());
    for &(column, max) in &wanted {
        let not_null = Expr::IsNull(Box::new(Expr::Col(column)), true);
        let both = match cond.as_deref() {
            Some(c) => Expr::And(Box::new(c.clone()), Box::new(not_null)),
            None => not_null,
        };
        let order = [(Expr::Col(column), max)];
        let (access, filter) = plan::access_with(table, Some(&both), ctx, &usable)?;
        let access = along_order(table, &order, access, &usable);
        if !plan::follows_index(table, &order, &access) {
            // Planned again by `found_of`, its warnings with it.
            drop_planned(ctx, warned);
            return Ok(None);
        }
        reads.push((access, filter, both, max, column));
    }
    Ok(Some(reads))
}

/// `SELECT MIN(a), MAX(b) … FROM t [WHERE …]` without GROUP BY, each
/// aggregate a MIN or MAX of a column an ordered index gives in order
/// (past leading columns the WHERE fixes: `WHERE u = 7` and an index of
/// (u, a)): the rows that hold the answer are each partition's first row
/// along that index (descending for MAX) that passes the WHERE and is
/// not NULL in the column, one row per partition and aggregate, as
/// MariaDB's `opt_sum_query` reads an index's first or last entry
/// ("Select tables optimized away"). Those candidates, aggregated as any
/// rows are, give the answer: every one passes the WHERE, and each
/// aggregate's own best is among them. None (the rows read as before)
/// for any other aggregate, a select item (or ORDER BY, HAVING) naming a
/// column outside one, a lock, or a table the SQL node last counted at no
/// more than 8 rows per partition and aggregate (one scan of it is as
/// cheap).
fn min_max_candidates(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Found>> {
    let (Some(table), Some(reads)) = (&p.table, min_max_reads(p, ctx)?) else {
        return Ok(None);
    };
    let partitions = table.native.def().partitions;
    let columns = projection(table, p);
    let mut found = Vec::new();
    // Every partition's first row of every aggregate at once, when
    // nothing of this transaction's must be seen (its reads run apart
    // from it): each merge's first is the answer, and the MIN and the MAX
    // of a statement cost one round trip, not two.
    let few = partitions as usize <= super::merge::MERGE_PARTITIONS_MAX;
    let mut merged_reads = Vec::with_capacity(reads.len());
    let mut apart = Vec::new();
    for read in &reads {
        let (access, filter, both, max, column) = read;
        let keys = super::merge::merge_keys(table, &[(Expr::Col(*column), *max)], access);
        match (keys, tx.pending_ops(), few) {
            (Some(keys), 0, true) => {
                let merged = ((0..partitions).collect(), keys);
                merged_reads.push(super::merge::MergedRead {
                    filter: filter.clone(),
                    cond: Some(both),
                    columns: columns.as_deref(),
                    stop_after: Some(1),
                    ..super::merge::MergedRead::along(table, access, *max, merged)
                });
            }
            _ => apart.push(read),
        }
    }
    if !merged_reads.is_empty() {
        let mut taken = vec![false; merged_reads.len()];
        super::merge::merged_each_of(tx.session(), merged_reads, ctx, |at, row, _| {
            if !std::mem::replace(&mut taken[at], true) {
                found.push((row, Vec::new()));
            }
            Ok(false)
        })?;
    }
    for (access, filter, both, max, _) in apart {
        for part in 0..partitions {
            fetch_each(
                tx,
                table,
                access,
                filter.clone(),
                None,
                *max,
                Some(both),
                ctx,
                None,
                columns.as_deref(),
                super::ScanShape {
                    batch_rows: 1,
                    partition: Some(part),
                    ..super::ScanShape::default()
                },
                |row, key, _| {
                    found.push((row, key));
                    Ok(false)
                },
            )?;
        }
    }
    Ok(Some(found))
}

/// Whether `p` reads one table of the cluster by itself, as the reads that
/// stand in for its rows (MIN/MAX, distinct, counting, groups in order)
/// need: no join, rows of its own, late or LATERAL part, window or lock.
fn reads_its_table_alone(p: &Planned) -> bool {
    p.join.is_none()
        && p.rows.is_none()
        && p.late.is_none()
        && p.laterals.is_empty()
        && p.windows.is_empty()
        && p.lock.is_none()
}

/// What planning has warned so far, the statement's warnings and its
/// once-only range warnings (`Env::range_warned`): [`drop_planned`] takes
/// back a tried plan's.
pub(super) fn plan_mark(ctx: &Ctx<'_>) -> (usize, usize) {
    (ctx.warnings.len(), ctx.env.range_warned.mark())
}

/// Drops the warnings of a plan tried and not taken since `mark`, so that
/// the plan the statement runs gives them again (a range bound's warning
/// is given once a statement).
pub(super) fn drop_planned(ctx: &mut Ctx<'_>, mark: (usize, usize)) {
    ctx.warnings.truncate(mark.0);
    ctx.env.range_warned.forget_since(mark.1);
}

/// A read of a WHERE the data nodes test whole ([`exactly_tested_read`]):
/// its access, the pushed filter and the WHERE.
type ExactRead = (Access, Option<skarv_client::Filter>, Option<Expr>);

/// The read of a WHERE (none too) the data nodes test whole, each row
/// once: its access (a scan, or ranges of an index that do not overlap),
/// pushed filter and the WHERE; None when the SQL node would test some
/// of it itself, or its constants warn. What a counting or aggregating
/// scan needs, whose rows the SQL node never sees.
/// `wanted`: whether a read of that access is worth it (asked before the
/// condition is checked whole, which costs more).
fn exactly_tested_read(
    p: &Planned,
    table: &Arc<TableInfo>,
    ctx: &mut Ctx<'_>,
    wanted: &dyn Fn(&Access) -> bool,
) -> SqlResult<Option<ExactRead>> {
    exactly_tested_read_of(table, p.cond.as_ref(), &p.hints, ctx, wanted)
}

/// [`exactly_tested_read`] of a condition `cond` of `table` (its
/// positions) under index hints `hints`.
fn exactly_tested_read_of(
    table: &Arc<TableInfo>,
    cond: Option<&Expr>,
    hints: &Hints,
    ctx: &mut Ctx<'_>,
    wanted: &dyn Fn(&Access) -> bool,
) -> SqlResult<Option<ExactRead>> {
    // A constant whose reading warns (`k >= '1999-06-01'` of an INT k):
    // its warnings come as the rows are read (MariaDB's, at the first
    // row compared or from its range optimizer): read as before.
    if cond.is_some_and(plan::warns_when_read) {
        return Ok(None);
    }
    let warned = plan_mark(ctx);
    let cond = plan::fold_select_constants(table, cond, ctx)?;
    let usable = |native: &str| hints.usable(table, native);
    let (access, filter) = plan::access_with(table, cond.as_deref(), ctx, &usable)?;
    let cond = cond.map(std::borrow::Cow::into_owned);
    if ctx.warnings.len() > warned.0 || !wanted(&access) {
        drop_planned(ctx, warned);
        return Ok(None);
    }
    let counts = match &access {
        Access::Scan => true,
        // Points (an IN list) are ranges of their own: counted apart, so
        // they must not overlap, as values a collation deems equal ('a'
        // and 'A') would (the planner lists a value once).
        Access::Range {
            points, columns, ..
        } => {
            debug_assert!(
                points
                    .iter()
                    .enumerate()
                    .all(|(i, p)| !points[..i].contains(p)),
                "the planner lists each point once"
            );
            let width = points.first().map_or(0, Vec::len);
            points.is_empty()
                || !columns
                    .iter()
                    .take(width)
                    .any(|c| table.columns[*c].ty.collation().is_some())
        }
        // Keys, or nothing: read as planned.
        _ => false,
    };
    // Rows the data nodes only count are not looked at here: they must
    // test the whole condition.
    if !counts || super::recheck_of(table, &access, filter.as_ref(), cond.as_ref(), ctx)?.is_some()
    {
        drop_planned(ctx, warned);
        return Ok(None);
    }
    Ok(Some((access, filter, cond)))
}

/// Rows a value of the distinct columns holds on average (the index
/// statistics, `ANALYZE TABLE`) below which [`distinct_candidates`]
/// reads every row as before: a value of a row or so gains nothing from
/// being stepped over.
const DISTINCT_SCAN_ROWS_PER_KEY_MIN: u64 = 2;

/// The read of [`distinct_candidates`]: its access along the index, the
/// pushed filter, the WHERE and the distinct prefix.
type DistinctRead = (Access, Option<skarv_client::Filter>, Option<Expr>, u8);

/// The read of [`distinct_candidates`] (what `EXPLAIN` shows as "Using
/// index for group-by"), or None when the query is not one.
fn distinct_read(
    tx_pending: usize,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<DistinctRead>> {
    let Some(table) = &p.table else {
        return Ok(None);
    };
    let simple = reads_its_table_alone(p) && tx_pending == 0 && !assigns_user_vars(p);
    // Every aggregate ignores repeated values.
    let ignore_repeats = p.aggs.iter().all(|a| {
        a.distinct
            || matches!(
                a.func,
                AggFn::Min | AggFn::Max | AggFn::BitAnd | AggFn::BitOr
            )
    });
    let collapses = p.distinct || !p.group.is_empty() || !p.aggs.is_empty();
    if !simple || !ignore_repeats || !collapses {
        return Ok(None);
    }
    let mut named = Vec::new();
    for e in named_outside_where(p) {
        plan::join::columns(e, &mut named);
    }
    named.sort_unstable();
    named.dedup();
    // Columns that hold a key (the primary key, a UNIQUE one): every row
    // is a value of its own, nothing to step over.
    let holds_key = table.keys.iter().any(|k| {
        k.unique
            && k.columns
                .iter()
                .all(|n| table.sql_column(*n).is_some_and(|c| named.contains(&c)))
    });
    if holds_key {
        return Ok(None);
    }
    let usable = |native: &str| p.hints.usable(table, native);
    let Some((along, prefix)) = plan::distinct_index_for(table, &named, &usable) else {
        return Ok(None);
    };
    let Access::Range {
        index: along_index, ..
    } = &along
    else {
        return Ok(None);
    };
    let few_per_value = table
        .stats
        .rows_per_key(along_index, usize::from(prefix))
        .is_some_and(|rows| rows < DISTINCT_SCAN_ROWS_PER_KEY_MIN);
    if few_per_value {
        return Ok(None);
    }
    let warned = plan_mark(ctx);
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let (access, filter) = plan::access_with(table, cond.as_deref(), ctx, &usable)?;
    let (access, filter) = match access {
        Access::Scan => (along, filter),
        Access::Range { ref index, .. } if index == along_index => (access, filter),
        // A range of another index (`WHERE a > 3 … GROUP BY a` where `ka`
        // and `kab` both lead with a): the same bounds along this one, when
        // the condition bounds its columns too.
        Access::Range { .. } => {
            drop_planned(ctx, warned);
            let only_along = |native: &str| native == along_index.as_str() && usable(native);
            let bounded = |a: &Access| {
                matches!(a, Access::Range { lower, upper, points, .. }
                    if lower.is_some() || upper.is_some() || !points.is_empty())
            };
            match plan::access_with(table, cond.as_deref(), ctx, &only_along)? {
                (a, filter) if bounded(&a) => (a, filter),
                _ => {
                    drop_planned(ctx, warned);
                    return Ok(None);
                }
            }
        }
        // Read by key, or nothing: as planned.
        _ => {
            drop_planned(ctx, warned);
            return Ok(None);
        }
    };
    // The rows stepped over are not looked at here: the data nodes must
    // test the whole condition.
    let cond = cond.map(std::borrow::Cow::into_owned);
    if super::recheck_of(table, &access, filter.as_ref(), cond.as_ref(), ctx)?.is_some() {
        drop_planned(ctx, warned);
        return Ok(None);
    }
    Ok(Some((access, filter, cond, prefix)))
}

/// `SELECT DISTINCT a …`, `… GROUP BY a`, `COUNT(DISTINCT a)` and the
/// like of one table, whose answer needs each value of some columns once
/// only, where those columns lead an ordered index: each partition's
/// distinct scan along it (a loose index scan, MariaDB's "Using index
/// for group-by") returns the first row of each value and steps over the
/// rest in the data node, where every row was read and deduplicated
/// here. Those candidates, grouped and aggregated as any rows are, give
/// the answer: every aggregate ignores repeated values (MIN, MAX,
/// BIT_AND, BIT_OR, a DISTINCT one) and nothing outside the WHERE names
/// another column. None (read as before) when the WHERE is not tested
/// whole by the data nodes (the rows stepped over are not looked at
/// here), it reads by key or another index, the statistics say a value
/// holds under two rows, or for a lock, a join, a window or a
/// transaction's pending writes.
fn distinct_candidates(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Found>> {
    let (Some(table), Some((access, filter, cond, prefix))) =
        (&p.table, distinct_read(tx.pending_ops(), p, ctx)?)
    else {
        return Ok(None);
    };
    let columns = projection(table, p);
    let mut found = Vec::new();
    // The partitions merged in the index's order where values a
    // collation deems equal ('x' and 'X') are among the columns: then
    // the first row of each value is the index's first, the one
    // MariaDB's index read shows. Other values have one form (and one
    // scan of all partitions costs less than a merge).
    let Access::Range {
        columns: along,
        points,
        ..
    } = &access
    else {
        unreachable!("a distinct read reads an ordered index")
    };
    let order: Vec<(Expr, bool)> = along[..usize::from(prefix)]
        .iter()
        .map(|c| (Expr::Col(*c), false))
        .collect();
    let forms = order.iter().any(|(e, _)| {
        let Expr::Col(c) = e else { return false };
        table.columns[*c].ty.collation().is_some()
    });
    let merged = match forms && points.is_empty() && plan::follows_index(table, &order, &access) {
        true => merge_plan(table, &order, &access, cond.as_ref(), ctx)?,
        false => None,
    };
    if let Some(merged) = merged {
        let read = super::merge::MergedRead {
            filter,
            cond: cond.as_ref(),
            columns: columns.as_deref(),
            distinct_prefix: prefix,
            ..super::merge::MergedRead::along(table, &access, false, merged)
        };
        super::merge::merged_each(tx.session(), read, ctx, |row, _| {
            found.push((row, Vec::new()));
            Ok(true)
        })?;
        return Ok(Some(found));
    }
    fetch_each(
        tx,
        table,
        &access,
        filter,
        None,
        false,
        cond.as_ref(),
        ctx,
        None,
        columns.as_deref(),
        super::ScanShape {
            distinct_prefix: prefix,
            ..super::ScanShape::default()
        },
        |row, key, _| {
            found.push((row, key));
            Ok(true)
        },
    )?;
    Ok(Some(found))
}

/// Whether `p` is a locking single-table SELECT with a LIMIT whose rows
/// can be claimed in its order ([`run_claimed`]).
fn claims_in_order(p: &Planned) -> bool {
    p.lock.is_some()
        && p.limit.is_some()
        && p.join.is_none()
        && p.table.is_some()
        && p.rows.is_none()
        && p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && !p.distinct
        && p.having.is_none()
        && p.late.is_none()
        && p.laterals.is_empty()
}

/// A locking SELECT with a LIMIT (`… ORDER BY id LIMIT 1 FOR UPDATE
/// [SKIP LOCKED]`, the job queue's): a locking scan would lock every row
/// the condition passes, in every partition at once and in no order — a
/// deadlock between two workers, and all the queue locked for one. So
/// its candidates are read without locks and the first LIMIT of them (in
/// ORDER BY's order, ties by primary key) locked by key (`claim`), as
/// InnoDB locks in index order and stops at the LIMIT. A read by key, or
/// a LIMIT past `CLAIM_ROWS_MAX`, locks as any locking read.
fn run_claimed(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Vec<Val>>> {
    let table = p.table.as_ref().expect("a single-table SELECT");
    let lock = p.lock.expect("a locking SELECT");
    let warned = ctx.warnings.len();
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let (access, filter) = single_access(table, p, cond.as_deref(), ctx)?;
    let want = p
        .limit
        .and_then(|l| usize::try_from(l.saturating_add(p.offset)).ok())
        .filter(|n| *n <= super::claim::CLAIM_ROWS_MAX);
    let named = cond
        .as_deref()
        .into_iter()
        .chain(p.order.iter().map(|(e, _)| e));
    let columns = super::columns_named(table, named);
    let claimable =
        super::claim::can_claim(table, columns.as_deref()) && super::claim::steady(cond.as_deref());
    let (Some(want), Access::Range { .. } | Access::Scan, true) = (want, &access, claimable) else {
        // Planned again by `run_one`, its warnings with it.
        ctx.warnings.truncate(warned);
        return run_one(tx, p, ctx, None);
    };
    let read = projection(table, p);
    let c = super::claim::Claim {
        table,
        lock,
        cond: cond.as_deref(),
        may_unlock: super::claim::may_unlock(tx, table),
        columns: read.as_deref(),
        tested: true,
    };
    let from = super::claim::Candidates {
        table,
        access: &access,
        filter: &filter,
        cond: cond.as_deref(),
        columns: columns.as_deref(),
    };
    let claimed = if p.order.is_empty() {
        super::claim::claim_unordered(tx, &c, want, ctx, &from)?
    } else {
        // Each partition's first candidates when an ordered index gives
        // the order (`claim_in_order`).
        let along = match plan::partition_keys(table, cond.as_deref(), ctx)? {
            None if in_index_order(p, &access) => {
                Some((table.native.def().partitions, p.order[0].1))
            }
            _ => None,
        };
        let mut in_order = |mut found: Found, ctx: &mut Ctx<'_>| {
            // Ties in primary-key order (the sort below is stable).
            let def = table.native.def();
            found.sort_by_cached_key(|(_, key)| super::write::key_bytes(def, key));
            // Each candidate tagged with its place, the one item sorted.
            let width = table.columns.len();
            let mut keys = Vec::with_capacity(found.len());
            let tagged: Found = found
                .into_iter()
                .enumerate()
                .map(|(at, (mut row, key))| {
                    debug_assert_eq!(row.len(), width, "rows of one table");
                    row.push(Val::Int(at as i64));
                    keys.push(key);
                    (row, Vec::new())
                })
                .collect();
            let tagging = Planned {
                items: vec![Expr::Col(width)],
                limit: None,
                offset: 0,
                ..clone_planned(p)
            };
            // The order's warnings are the claimed rows' (below), not
            // every candidate's.
            let warned = ctx.warnings.len();
            let ordered = shape_found(&tagging, tagged, false, ctx)?;
            ctx.warnings.truncate(warned);
            Ok(ordered
                .into_iter()
                .map(|row| match row.first() {
                    Some(Val::Int(at)) => std::mem::take(&mut keys[*at as usize]),
                    other => unreachable!("the tag column, not {other:?}"),
                })
                .collect())
        };
        super::claim::claim_in_order(tx, &c, want, ctx, &from, along, &mut in_order)?
    };
    shape_found(p, claimed, false, ctx)
}

/// Rows read: each row's values and its primary key.
type Found = Vec<(Vec<Val>, Vec<schema::Value>)>;

/// `shape`, without the sort when the rows came in ORDER BY's order.
fn shape_found(
    p: &Planned,
    found: Vec<(Vec<Val>, Vec<schema::Value>)>,
    sorted: bool,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Vec<Val>>> {
    // Rows in index order need no sort.
    if sorted && !p.order.is_empty() {
        let unsorted = Planned {
            order: Vec::new(),
            ..clone_planned(p)
        };
        return shape(&unsorted, found, ctx);
    }
    shape(p, found, ctx)
}

/// The combined rows of a join that pass its WHERE (but for the late
/// conjuncts), and the plan that read them: a top N along the first
/// table's order where `top_join` finds one (the rows before the N's
/// last, which `shape` sorts and cuts), else the whole join, which a
/// LIMIT without ORDER BY, grouping or DISTINCT stops.
fn join_found(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    spec: &JoinSpec,
    ctx: &mut Ctx<'_>,
    mut stats: Option<&mut Vec<super::join::StepStats>>,
) -> SqlResult<(Vec<Vec<Val>>, plan::join::JoinPlan)> {
    let (plan, top) = join_plans(p, spec, ctx)?;
    if let Some(top) = top {
        let warned = ctx.warnings.len();
        let mut rows = Vec::new();
        let finished =
            super::join::run_top(tx, spec, &top, ctx, stats.as_deref_mut(), &mut |row, _| {
                if rows.len() >= super::FETCH_ROWS_MAX {
                    return Err(SqlError::unsupported(format_args!(
                        "joins of more than {} rows in the SQL node",
                        super::FETCH_ROWS_MAX
                    )));
                }
                rows.push(row);
                Ok(true)
            })?;
        if finished {
            return Ok((rows, top.plan));
        }
        ctx.warnings.truncate(warned);
    }
    let plain = p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && !p.distinct
        && p.order.is_empty()
        && p.late.is_none();
    let stop_after = p
        .limit
        .filter(|_| plain && p.having.is_none())
        .map(|l| usize::try_from(l.saturating_add(p.offset)).unwrap_or(usize::MAX));
    let rows = super::join::run(tx, spec, &plan, p.lock, ctx, stats, stop_after)?;
    Ok((rows, plan))
}

/// The rows of a SELECT's FROM that pass its WHERE (but for the late
/// conjuncts), and whether they come in ORDER BY's order.
fn found_of(
    tx: &skarv_client::Transaction<'_>,
    p: &Planned,
    ctx: &mut Ctx<'_>,
    commit: Option<&mut bool>,
    stats: Option<&mut Vec<super::join::StepStats>>,
) -> SqlResult<(Found, bool)> {
    if let Some(spec) = &p.join {
        let (rows, _) = join_found(tx, p, spec, ctx, stats)?;
        return Ok((rows.into_iter().map(|r| (r, Vec::new())).collect(), false));
    }
    let Some(table) = &p.table else {
        return Ok((found_without_table(p, ctx)?, false));
    };
    let cond = plan::fold_select_constants(table, p.cond.as_ref(), ctx)?;
    let (access, filter) = single_access(table, p, cond.as_deref(), ctx)?;
    let plain = p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && !p.distinct
        && p.late.is_none();
    // An ordered index gives the order ORDER BY asks for only within one
    // partition: the TC passes each partition's batches on as they come.
    // Rows of a table of one partition come sorted; those of several are
    // merged (`merge`) when read without locks, else sorted here.
    // A locking scan (a transaction that wrote reads with locks) sees its
    // own inserts after the index's range (they are in no ordered index
    // before commit): sort those too.
    let (descending, sorted) = order_by_index(table, p, &access, cond.as_deref(), ctx)?;
    let assigns = assigns_user_vars(p);
    let merged = if sorted || assigns || tx.pending_ops() > 0 {
        None
    } else {
        merged_partitions(table, p, &access, cond.as_deref(), ctx)?
    };
    let stop_after = match p.limit {
        Some(l) if plain && (sorted || merged.is_some()) => {
            Some(usize::try_from(l.saturating_add(p.offset)).unwrap_or(usize::MAX))
        }
        _ => None,
    };
    if stop_after == Some(0) {
        return Ok((Vec::new(), sorted || merged.is_some()));
    }
    let columns = if assigns { None } else { projection(table, p) };
    if let Some(merged) = merged {
        let mut found = Vec::new();
        let read = super::merge::MergedRead {
            filter,
            cond: cond.as_deref(),
            columns: columns.as_deref(),
            stop_after,
            ..super::merge::MergedRead::along(table, &access, descending, merged)
        };
        super::merge::merged_each(tx.session(), read, ctx, |row, _| {
            if found.len() >= super::FETCH_ROWS_MAX {
                return Err(SqlError::unsupported(format_args!(
                    "statements that keep more than {} rows in the SQL node",
                    super::FETCH_ROWS_MAX
                )));
            }
            found.push((row, Vec::new()));
            Ok(stop_after.is_none_or(|n| found.len() < n))
        })?;
        return Ok((found, true));
    }
    let mut found = fetch(
        tx,
        table,
        &access,
        filter,
        p.lock,
        descending,
        cond.as_deref(),
        ctx,
        stop_after,
        commit,
        columns.as_deref(),
    )?;
    if assigns && !sorted {
        in_primary_key_order(table, &mut found);
    }
    Ok((found, sorted))
}

/// A whole-table scan read instead along an ordered index that gives
/// `order` and the hints allow (rows then come in that order, and a
/// LIMIT can stop the read); any other access as it is.
fn along_order(
    table: &TableInfo,
    order: &[(Expr, bool)],
    access: Access,
    usable: &dyn Fn(&str) -> bool,
) -> Access {
    match access {
        Access::Scan => plan::ordered_index_for(table, order)
            .filter(|a| matches!(a, Access::Range { index, .. } if usable(index)))
            .unwrap_or(Access::Scan),
        other => other,
    }
}

/// How a single-table SELECT reads its table: the WHERE clause's plan
/// under the index hints, or (a whole-table scan ordered by an ordered
/// index's leading columns) that index: rows come sorted and LIMIT stops
/// early. What `run_one` runs and `EXPLAIN` shows.
fn single_access(
    table: &Arc<TableInfo>,
    p: &Planned,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Access, Option<skarv_client::Filter>)> {
    let usable = |native: &str| p.hints.usable(table, native);
    let (access, filter) = plan::access_with(table, cond, ctx, &usable)?;
    let plain = p.group.is_empty() && p.aggs.is_empty() && p.windows.is_empty() && !p.distinct;
    let access = if plain {
        along_order(table, &p.order, access, &usable)
    } else {
        access
    };
    if let Some(better) = cheaper_in_order(table, p, &access, cond, ctx)? {
        return Ok(better);
    }
    Ok((access, filter))
}

/// ORDER BY … LIMIT n whose WHERE chose a range of another index that
/// finds many rows (`WHERE state = 'open' ORDER BY id DESC LIMIT 20`,
/// most rows open): the ORDER BY's own index read in order, stopping at n
/// rows that pass in each partition, reads fewer when the statistics
/// (`ANALYZE TABLE`'s cardinality, the table's rows) say the range's rows
/// are more than twice what that reads (MariaDB's
/// `test_if_cheaper_ordering`). None: keep the range.
fn cheaper_in_order(
    table: &Arc<TableInfo>,
    p: &Planned,
    access: &Access,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<(Access, Option<skarv_client::Filter>)>> {
    let plain = p.group.is_empty() && p.aggs.is_empty() && p.windows.is_empty() && !p.distinct;
    let (Access::Range { index, .. }, Some(limit)) = (access, p.limit) else {
        return Ok(None);
    };
    if !plain || p.lock.is_some() || in_index_order(p, access) {
        return Ok(None);
    }
    let Some(Access::Range { index: ordered, .. }) = plan::ordered_index_for(table, &p.order)
    else {
        return Ok(None);
    };
    let (Some(rows), true) = (
        table.stats.rows(),
        plan::join::has_cardinality(table, index),
    ) else {
        return Ok(None);
    };
    if ordered == *index || !p.hints.usable(table, &ordered) {
        return Ok(None);
    }
    let matching = plan::join::estimate_rows(table, access).max(1);
    let want = limit.saturating_add(p.offset);
    // Rows read along the order until `want` pass: the partitions' rows
    // are merged (`merged_partitions`), so about `want` pass in all.
    let along = want
        .saturating_mul(rows)
        .checked_div(matching)
        .unwrap_or(u64::MAX);
    if along.saturating_mul(2) >= matching {
        return Ok(None);
    }
    // The WHERE planned again with only that index (its warnings were
    // the first plan's already).
    let warned = ctx.warnings.len();
    let planned = plan::access_with(table, cond, ctx, &|native: &str| native == ordered);
    ctx.warnings.truncate(warned);
    let (again, filter) = planned?;
    let again = match again {
        Access::Scan => plan::ordered_index_for(table, &p.order).unwrap_or(Access::Scan),
        other => other,
    };
    Ok(in_index_order(p, &again).then_some((again, filter)))
}

/// Whether an access gives ORDER BY's order: (scan descending, rows come
/// sorted).
fn order_by_index(
    table: &TableInfo,
    p: &Planned,
    access: &Access,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(bool, bool)> {
    if !in_index_order(p, access) {
        return Ok((false, p.order.is_empty()));
    }
    let descending = p.order[0].1;
    // Rows come in index order from one partition: a table of one, or a
    // WHERE that fixes the distribution key (`PARTITION BY KEY(u)`,
    // `WHERE u = 1 ORDER BY t LIMIT 10`: seed 001's pruned scan).
    let one_partition = p.lock.is_none()
        && (table.native.def().partitions == 1
            || plan::partition_keys(table, cond, ctx)?.is_some_and(|keys| keys.len() == 1));
    Ok((descending, one_partition))
}

/// Whether `access` reads an ordered index in the order ORDER BY asks for
/// within each partition (a prefix of its columns, one direction): the
/// first n rows of every partition then hold the first n of all.
fn in_index_order(p: &Planned, access: &Access) -> bool {
    let plain = p.group.is_empty() && p.aggs.is_empty() && p.windows.is_empty() && !p.distinct;
    plain
        && p.table
            .as_deref()
            .is_some_and(|table| plan::follows_index(table, &p.order, access))
}

/// The partitions to read one by one, their rows merged in index order
/// (`merge::merged_each`), and the columns the index orders them by, for
/// rows asked for in an ordered index's order (`in_index_order`) that
/// several partitions hold: the table has several and the condition fixes
/// none or several of them. Only a read without locks (each partition's
/// scan runs in a transaction of its own).
fn merged_partitions(
    table: &TableInfo,
    p: &Planned,
    access: &Access,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<(Vec<u32>, Vec<usize>)>> {
    let def = table.native.def();
    if def.partitions < 2 || p.lock.is_some() || !in_index_order(p, access) {
        return Ok(None);
    }
    merge_plan(table, &p.order, access, cond, ctx)
}

/// The partitions a merged read of `access` in `order` scans (those the
/// condition's distribution-key values name, or all) and the columns the
/// index orders by; None when it reads no ordered index in that order,
/// the condition leaves no partition, or the partitions are more than a
/// merge reads.
fn merge_plan(
    table: &TableInfo,
    order: &[(Expr, bool)],
    access: &Access,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<(Vec<u32>, Vec<usize>)>> {
    let def = table.native.def();
    let Some(keys) = super::merge::merge_keys(table, order, access) else {
        return Ok(None);
    };
    let partitions = match plan::partition_keys(table, cond, ctx)? {
        None => (0..def.partitions).collect(),
        // No row can pass (an IN list of NULLs): the plain read finds none.
        Some(values) if values.is_empty() => return Ok(None),
        Some(values) => {
            let mut scratch = Vec::new();
            let mut partitions = Vec::with_capacity(values.len());
            for key in &values {
                partitions.push(
                    table
                        .native
                        .partition_of_key(key, &mut scratch)
                        .map_err(|e| txn::native_error_in(&e, &table.name))?,
                );
            }
            partitions.sort_unstable();
            partitions.dedup();
            partitions
        }
    };
    if partitions.len() > super::merge::MERGE_PARTITIONS_MAX {
        return Ok(None);
    }
    Ok(Some((partitions, keys)))
}

/// How many times fewer rows a top N join along its first table's order
/// must be estimated to read than the plan without the order ([`top_join`]).
const TOP_JOIN_GAIN_MIN: u64 = 2;
/// A top N join gives way to the plan without the order once it expects
/// to read more than that plan's estimate, or than this many times its
/// own (a small plan's estimate is no budget).
const TOP_JOIN_SLACK: u64 = 4;

/// A join's ORDER BY … LIMIT read along its first table's order
/// ([`super::join::TopJoin`]) when the order names the columns of one
/// table that can go first, an ordered index of it gives that order, and
/// that plan is estimated to read less than half what `normal` (the plan
/// chosen without the order) reads: "the latest 20 orders with their
/// customers" reads about 20 orders per partition and their 20
/// customers, not every order (MariaDB reads its first table in index
/// order when it can, and stops at the LIMIT). Without a lock, a LIMIT
/// and OFFSET of at most `TOP_ROWS_MAX`, rows not grouped.
fn top_join(
    p: &Planned,
    spec: &JoinSpec,
    normal: &plan::join::JoinPlan,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<super::join::TopJoin>> {
    let plain = p.group.is_empty()
        && p.aggs.is_empty()
        && p.windows.is_empty()
        && !p.distinct
        && p.having.is_none()
        && p.late.is_none();
    let Some(limit) = p.limit else {
        return Ok(None);
    };
    let stop_after = usize::try_from(limit.saturating_add(p.offset)).unwrap_or(usize::MAX);
    if !plain || p.lock.is_some() || p.order.is_empty() || stop_after > TOP_ROWS_MAX {
        return Ok(None);
    }
    // ORDER BY columns of one table, one direction.
    let descending = p.order[0].1;
    let mut first = None;
    let mut local = Vec::with_capacity(p.order.len());
    for (e, d) in &p.order {
        let Expr::Col(c) = e else {
            return Ok(None);
        };
        let at = plan::join::table_at(spec, *c);
        if at.is_none() || *d != descending || first.is_some_and(|f| Some(f) != at) {
            return Ok(None);
        }
        first = at;
        local.push((Expr::Col(*c - spec.tables[at.unwrap_or(0)].offset), *d));
    }
    let Some(first) = first else {
        return Ok(None);
    };
    // The planning's warnings were the first plan's already.
    let warned = ctx.warnings.len();
    let ordered = plan::join::plan_in_order(spec, p.cond.as_ref(), ctx, first, &local);
    ctx.warnings.truncate(warned);
    let Some(ordered) = ordered? else {
        return Ok(None);
    };
    // The first table's rows read (its partitions' rows merged in
    // order): N for each later step's conditions that pass one row in
    // FILTER_GUESS, times that again for its own filter, at least the
    // first round's, at most the table.
    let filtered = |s: &plan::join::Step| u32::from(s.filters());
    let later: u32 = ordered.steps[1..].iter().map(filtered).sum();
    let own = filtered(&ordered.steps[0]);
    let wanted = (stop_after as u64)
        .saturating_mul(plan::join::FILTER_GUESS.saturating_pow(later + own))
        .max(stop_after.max(super::join::TOP_JOIN_ROWS_MIN) as u64);
    let first_rows = ordered.steps[0].rows.min(wanted);
    let normal_cost = normal.cost(None);
    let ordered_cost = ordered.cost(Some(first_rows));
    if ordered_cost.saturating_mul(TOP_JOIN_GAIN_MIN) >= normal_cost {
        return Ok(None);
    }
    let keys = local
        .iter()
        .enumerate()
        .map(|(i, (e, _))| match e {
            Expr::Col(c) => (*c, p.order_collations.get(i).copied().unwrap_or(GENERAL_CI)),
            _ => unreachable!("ORDER BY's columns"),
        })
        .collect();
    Ok(Some(super::join::TopJoin {
        plan: ordered,
        keys,
        descending,
        stop_after,
        rows: first_rows,
        budget: normal_cost.max(ordered_cost.saturating_mul(TOP_JOIN_SLACK)),
    }))
}

fn clone_planned(p: &Planned) -> Planned {
    Planned {
        table: p.table.clone(),
        items: p.items.clone(),
        metas: p.metas.clone(),
        kinds: p.kinds.clone(),
        nullable: p.nullable.clone(),
        coercibility: p.coercibility.clone(),
        cond: p.cond.clone(),
        late: p.late.clone(),
        laterals: p.laterals.clone(),
        group: p.group.clone(),
        group_collations: p.group_collations.clone(),
        rollup: p.rollup,
        rollup_desc: p.rollup_desc.clone(),
        having: p.having.clone(),
        aggs: p.aggs.clone(),
        windows: p.windows.clone(),
        order: p.order.clone(),
        order_collations: p.order_collations.clone(),
        distinct: p.distinct,
        limit: p.limit,
        offset: p.offset,
        lock: p.lock,
        rows: p.rows.clone(),
        source: p.source.clone(),
        join: p.join.clone(),
        hints: p.hints.clone(),
        hidden: p.hidden.clone(),
    }
}

/// Grouping, HAVING, the select items, DISTINCT, ORDER BY and LIMIT over
/// the rows that passed WHERE.
fn shape(
    p: &Planned,
    found: Vec<(Vec<Val>, Vec<schema::Value>)>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Vec<Val>>> {
    // (source row, aggregate values) per output candidate.
    // WITH ROLLUP over expressions: each row gets their values as columns
    // of its own, which the items and HAVING read instead (see
    // RollupExprs).
    let rolled = p.rollup.then(|| {
        let width = found.first().map_or(p.source.len(), |(r, _)| r.len());
        RollupExprs::of(p, width)
    });
    let groups: Vec<(Vec<Val>, Vec<Val>)> = if p.group.is_empty() && p.aggs.is_empty() {
        found.into_iter().map(|(r, _)| (r, Vec::new())).collect()
    } else {
        aggregate(p, found, rolled.as_ref(), ctx)?
    };
    shape_groups(p, groups, rolled.as_ref(), ctx)
}

/// [`shape`] past the grouping: HAVING, window functions, the select
/// items, DISTINCT, ORDER BY and LIMIT over the groups (each a row and its
/// aggregates' values; a row each when nothing groups).
fn shape_groups(
    p: &Planned,
    groups: Vec<(Vec<Val>, Vec<Val>)>,
    rolled: Option<&RollupExprs>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Vec<Val>>> {
    let (items, having) = match rolled {
        Some(r) => (&r.items, &r.having),
        None => (&p.items, &p.having),
    };
    // Window functions see the rows past HAVING, all of them: HAVING
    // first, then every window's values, then the items.
    let groups: Vec<(Vec<Val>, Vec<Val>)> = match having {
        Some(h) if !p.windows.is_empty() => {
            let mut kept = Vec::with_capacity(groups.len());
            for (row, aggs) in groups {
                ctx.check_killed()?;
                let correlated = ctx.correlated;
                let mut c = ctx.child(ctx.params, &aggs, correlated);
                let pass = h.test(&row, &mut c);
                ctx.absorb(c);
                if pass? {
                    kept.push((row, aggs));
                }
            }
            kept
        }
        _ => groups,
    };
    let (groups, windows) = if p.windows.is_empty() {
        (groups, Vec::new())
    } else {
        let rows: Vec<(&[Val], &[Val])> = groups
            .iter()
            .map(|(r, a)| (r.as_slice(), a.as_slice()))
            .collect();
        let computed = super::window::compute(&p.windows, &rows, ctx)?;
        match computed.sorted {
            // Without an ORDER BY the rows come in the windows' order.
            Some(sorted) if p.order.is_empty() => {
                let mut groups: Vec<Option<_>> = groups.into_iter().map(Some).collect();
                let mut values: Vec<Option<_>> = computed.values.into_iter().map(Some).collect();
                sorted
                    .iter()
                    .map(|&at| (groups[at].take(), values[at].take()))
                    .map(|(g, v)| (g.expect("each row once"), v.expect("each row once")))
                    .unzip()
            }
            _ => (groups, computed.values),
        }
    };
    // An ORDER BY column that is also a select item sorts by the item's
    // value rather than a second copy of it (a string copied and freed per
    // row under sysbench's `SELECT c … ORDER BY c`): its key is a NULL
    // placeholder, and `sort_key` reads the item. Keys are all items: none.
    let key_items = order_key_items(p, items);
    let keys_needed = key_items.iter().any(Option::is_none);
    // Select items that run a subquery and that ORDER BY does not sort by
    // are made after the sort, for the rows the LIMIT keeps only, as
    // MariaDB runs them for the rows it sends (a list page's `(SELECT
    // COUNT(*) … WHERE o.customer_id = c.id)` of 20 customers, not of all
    // of them). Each row carries its group's place as an extra value
    // until then.
    let deferred: Vec<bool> = items
        .iter()
        .enumerate()
        .map(|(i, e)| {
            p.limit.is_some()
                && !p.distinct
                && p.windows.is_empty()
                && e.has_sub()
                && !key_items.contains(&Some(i))
        })
        .collect();
    let defer = deferred.contains(&true);
    let mut out: Vec<Shaped> = Vec::new();
    for (at, (row, aggs)) in groups.iter().enumerate() {
        ctx.check_killed()?;
        let correlated = ctx.correlated;
        let mut c = ctx.child(ctx.params, aggs, correlated);
        if let Some(w) = windows.get(at) {
            c.windows = w;
        }
        // The child holds the statement's warnings: taken back on an
        // error too, so that those met before it stay listed.
        let shaped = (|| -> SqlResult<Option<Shaped>> {
            let pass = match having {
                Some(h) if p.windows.is_empty() => h.test(row, &mut c)?,
                _ => true,
            };
            if !pass {
                return Ok(None);
            }
            let mut values = Vec::with_capacity(items.len() + usize::from(defer));
            for (item, later) in items.iter().zip(&deferred) {
                values.push(match later {
                    true => Val::Null,
                    false => item.eval(row, &mut c)?,
                });
            }
            if defer {
                values.push(Val::Int(at as i64));
            }
            let mut keys = Vec::new();
            if keys_needed {
                keys.reserve_exact(p.order.len());
                for ((e, _), item) in p.order.iter().zip(&key_items) {
                    keys.push(match item {
                        Some(_) => Val::Null,
                        None => e.eval(row, &mut c)?,
                    });
                }
            }
            Ok(Some((values, keys)))
        })();
        ctx.absorb(c);
        if let Some(shaped) = shaped? {
            out.push(shaped);
            if out.len() > ROWS_IN_MEMORY_MAX {
                return Err(SqlError::unsupported(format_args!(
                    "queries of more than {ROWS_IN_MEMORY_MAX} rows"
                )));
            }
        }
    }
    if p.distinct {
        // Every row's key in one buffer, the set holding slices of it: no
        // allocation per row (a key grown from empty was five).
        let columns = sets::Columns::of(&p.kinds);
        let mut keys = PackedKeys::with_rows(out.len());
        for (v, _) in &out {
            columns.key_into(v, &mut keys.bytes);
            keys.end_row();
        }
        let mut seen = stdx::KeySet::with_capacity_and_hasher(out.len(), KeyState::default());
        let first: Vec<bool> = (0..out.len()).map(|at| seen.insert(keys.key(at))).collect();
        let mut at = 0;
        out.retain(|_| {
            at += 1;
            first[at - 1]
        });
    }
    if !p.order.is_empty() {
        sort_rows(p, &key_items, &mut out);
    }
    let offset = usize::try_from(p.offset).unwrap_or(usize::MAX);
    let limit = p
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let kept = out.into_iter().skip(offset).take(limit).map(|(v, _)| v);
    if !defer {
        return Ok(kept.collect());
    }
    let mut rows = Vec::new();
    for mut values in kept {
        let at = match values.pop() {
            Some(Val::Int(at)) => at as usize,
            other => unreachable!("a row's group, not {other:?}"),
        };
        let (row, aggs) = &groups[at];
        let correlated = ctx.correlated;
        let mut c = ctx.child(ctx.params, aggs, correlated);
        let made = (|| -> SqlResult<()> {
            for ((item, later), value) in items.iter().zip(&deferred).zip(&mut values) {
                if *later {
                    *value = item.eval(row, &mut c)?;
                }
            }
            Ok(())
        })();
        ctx.absorb(c);
        made?;
        rows.push(values);
    }
    Ok(rows)
}

/// For each ORDER BY key, the select item it is (a column that is also an
/// item), whose value `sort_key` reads, or None: its own value is made.
fn order_key_items(p: &Planned, items: &[Expr]) -> Vec<Option<usize>> {
    p.order
        .iter()
        .map(|(e, _)| match e {
            Expr::Col(x) => items
                .iter()
                .position(|i| matches!(i, Expr::Col(y) if y == x)),
            _ => None,
        })
        .collect()
}

/// A row being shaped: its values (the select items) and its ORDER BY
/// keys (see `key_items` in [`shape`]).
type Shaped = (Vec<Val>, Vec<Val>);

/// ORDER BY key `i` of `row`: the value of select item `item` when the key
/// is that item, else its own.
fn sort_key(row: &Shaped, item: Option<usize>, i: usize) -> &Val {
    match item {
        Some(item) => &row.0[item],
        None => &row.1[i],
    }
}

/// Sorts rows by their ORDER BY keys (stable: ties keep their order). By
/// byte strings made once per row when [`byte_keys`] can make them, else
/// by comparing values.
fn sort_rows(p: &Planned, key_items: &[Option<usize>], out: &mut Vec<Shaped>) {
    let desc: Vec<bool> = p.order.iter().map(|(_, d)| *d).collect();
    if let Some(keys) = byte_keys(p, key_items, &desc, out) {
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.sort_by(|&a, &b| keys.key(a).cmp(keys.key(b)));
        let mut unsorted = std::mem::take(out);
        out.extend(order.iter().map(|&at| std::mem::take(&mut unsorted[at])));
        return;
    }
    out.sort_by(|a, b| compare_shaped(p, key_items, &desc, a, b));
}

/// Two rows by their ORDER BY keys, value by value ([`order_cmp`] under
/// each key's collation, `desc` reversed): the order [`byte_keys`]
/// encodes too, so a merge of runs sorted either way by this is the
/// in-memory sort's.
fn compare_shaped(
    p: &Planned,
    key_items: &[Option<usize>],
    desc: &[bool],
    a: &Shaped,
    b: &Shaped,
) -> Ordering {
    for (i, item) in key_items.iter().enumerate() {
        let (x, y) = (sort_key(a, *item, i), sort_key(b, *item, i));
        let coll = p.order_collations.get(i).copied().unwrap_or(GENERAL_CI);
        let o = order_cmp(x, y, coll);
        let o = if desc[i] { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Rows' keys end to end in one buffer: no allocation per row.
struct PackedKeys {
    bytes: Vec<u8>,
    /// Where each row's key ends in `bytes`.
    ends: Vec<usize>,
}

impl PackedKeys {
    fn with_rows(rows: usize) -> PackedKeys {
        PackedKeys {
            bytes: Vec::new(),
            ends: Vec::with_capacity(rows),
        }
    }

    /// Ends the next row's key: the bytes written since the last end.
    fn end_row(&mut self) {
        self.ends.push(self.bytes.len());
    }

    /// Row `at`'s key.
    fn key(&self, at: usize) -> &[u8] {
        let start = at.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.bytes[start..self.ends[at]]
    }
}

/// Each row's ORDER BY keys as one byte string whose byte order is the
/// keys' order ([`order_cmp`], DESC reversed), in [`PackedKeys`]: a
/// comparison is then a `memcmp`, and a
/// string's collation weights are worked out once per row, not at each
/// of the sort's comparisons (which were most of a 100-row `ORDER BY c`
/// of sysbench). None when a key's values are not all NULL or one kind
/// it encodes: integers (all signed or all unsigned) or strings of a
/// collation whose weights are no control character (a weight under a
/// space sorts before the end of a shorter string under PAD SPACE, which
/// bytes cannot say).
fn byte_keys(
    p: &Planned,
    key_items: &[Option<usize>],
    desc: &[bool],
    out: &[Shaped],
) -> Option<PackedKeys> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        Nothing,
        Int,
        UInt,
        Str,
    }
    let mut seen = vec![Seen::Nothing; key_items.len()];
    let mut keys = PackedKeys::with_rows(out.len());
    for row in out {
        for (i, item) in key_items.iter().enumerate() {
            let start = keys.bytes.len();
            let kind = match sort_key(row, *item, i) {
                Val::Null => {
                    keys.bytes.push(0);
                    None
                }
                Val::Int(v) => {
                    keys.bytes.push(1);
                    keys.bytes
                        .extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes());
                    Some(Seen::Int)
                }
                Val::UInt(v) => {
                    keys.bytes.push(1);
                    keys.bytes.extend_from_slice(&v.to_be_bytes());
                    Some(Seen::UInt)
                }
                Val::Str(s) => {
                    let coll = p.order_collations.get(i).copied().unwrap_or(GENERAL_CI)?;
                    keys.bytes.push(1);
                    let weights = keys.bytes.len();
                    coll.sort_key_into(s, &mut keys.bytes);
                    if below_space(&keys.bytes[weights..]) {
                        return None;
                    }
                    // Ends the weights: below every weight byte, so a
                    // string sorts before its extensions.
                    keys.bytes.push(0);
                    Some(Seen::Str)
                }
                _ => return None,
            };
            if let Some(kind) = kind {
                match seen[i] {
                    Seen::Nothing => seen[i] = kind,
                    k if k == kind => {}
                    _ => return None,
                }
            }
            if desc[i] {
                for b in &mut keys.bytes[start..] {
                    *b = !*b;
                }
            }
        }
        keys.end_row();
    }
    Some(keys)
}

/// Whether a byte of `s` is under a space: eight bytes at a time (a byte
/// loop was 5 instructions a byte of every key), by the word trick that
/// finds a byte under n: a byte under n borrows when n is subtracted from
/// it and had no top bit, and a borrow into a byte implies one under n.
fn below_space(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    let mut words = s.chunks_exact(8);
    let mut found = 0u64;
    for word in &mut words {
        let x = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
        found |= x.wrapping_sub(ONES * u64::from(b' ')) & !x;
    }
    found & (ONES * 0x80) != 0 || words.remainder().iter().any(|&b| b < b' ')
}

/// The collation of an expression whose kind is not a string (which
/// compares by value, whatever the collation).
const GENERAL_CI: Option<Collation> = Some(Collation::Utf8mb4GeneralCi);

/// The collation values of kind `k` sort and group under: a string's own
/// (None: a binary string, by bytes).
pub(super) fn kind_collation(k: Kind) -> Option<Collation> {
    match k {
        Kind::Str { collation } => collation,
        _ => GENERAL_CI,
    }
}

/// The collation of each of `m`'s columns, for [`group_key`].
pub(super) fn collations_of(m: &super::derived::Materialised) -> Vec<Option<Collation>> {
    m.kinds.iter().map(|k| kind_collation(*k)).collect()
}

/// Sort order: NULL first, then values as MySQL compares them, strings
/// under `coll`.
pub(super) fn order_cmp(x: &Val, y: &Val, coll: Option<Collation>) -> Ordering {
    match (x, y) {
        (Val::Null, Val::Null) => Ordering::Equal,
        (Val::Null, _) => Ordering::Less,
        (_, Val::Null) => Ordering::Greater,
        // The usual keys, without the context the general comparison
        // builds (an allocation per comparison: sorting was an eighth of
        // the SQL node's instructions under sysbench oltp_read_only).
        (Val::Str(a), Val::Str(b)) => expr::eval::compare_str(a, b, coll),
        (Val::Int(a), Val::Int(b)) => a.cmp(b),
        (Val::UInt(a), Val::UInt(b)) => a.cmp(b),
        _ => {
            let env = expr::eval::Env::default();
            let mut ctx = Ctx::new(&[], &env);
            compare(x, y, coll, &mut ctx)
        }
    }
}

/// A hashable key for grouping and DISTINCT: strings by their collation's
/// sort key (`collations[i]` for `values[i]`; bytes for a binary string),
/// numbers by value.
pub(super) fn group_key(values: &[Val], collations: &[Option<Collation>]) -> Vec<u8> {
    let mut key = Vec::new();
    group_key_into(values, collations, &mut key);
    key
}

/// [`group_key`] appended to `key`.
fn group_key_into(values: &[Val], collations: &[Option<Collation>], key: &mut Vec<u8>) {
    for (i, v) in values.iter().enumerate() {
        match v {
            Val::Null => key.push(0),
            Val::Str(b) => match collations.get(i).copied().unwrap_or(GENERAL_CI) {
                Some(c) => {
                    key.push(1);
                    c.sort_key_into(b, key);
                }
                // Length first: the bytes may hold the separator.
                None => {
                    key.push(4);
                    key.extend((b.len() as u64).to_le_bytes());
                    key.extend_from_slice(b);
                }
            },
            // Every number by its value, as a normalised decimal (see
            // `number_key_into`); integers straight to that form.
            Val::Int(i) => integer_key_into(i128::from(*i), key),
            Val::UInt(u) => integer_key_into(i128::from(*u), key),
            Val::Dec(_) | Val::Double(_) => {
                // A DOUBLE 18 (a UNION's column of GREATEST(int, double)
                // rows) is the integer 18, -0 is 0, as MariaDB compares
                // them.
                let d = match v {
                    Val::Dec(d) => *d,
                    Val::Double(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => {
                        Dec::new(*f as i64, 0)
                    }
                    Val::Double(f) => match Dec::of_double(*f) {
                        Some(d) => d,
                        None => {
                            // NaN or an infinity: by its text.
                            key.push(3);
                            key.extend(v.to_text().as_bytes());
                            key.push(0xff);
                            continue;
                        }
                    },
                    _ => Dec::new(0, 0),
                };
                number_key_into(d, key);
            }
            other => {
                key.push(3);
                key.extend(other.to_text().as_bytes());
            }
        }
        key.push(0xff);
    }
}

/// A number's part of a group key: its decimal value normalised
/// (trailing fractional zeros dropped, so 1.50 and 1.5 are one key) as its
/// scale and mantissa in bytes: 16 when the mantissa fits an i128, else
/// 32. Equal values give equal bytes, different ones different bytes (a
/// key is hashed and compared, never ordered).
fn number_key_into(d: Dec, key: &mut Vec<u8>) {
    let mut d = d;
    while d.scale > 0 && d.mantissa % 10 == 0 {
        d = Dec::new(d.mantissa / 10, d.scale - 1);
    }
    match i128::try_from(d.mantissa) {
        Ok(m) if d.scale == 0 => integer_key_into(m, key),
        Ok(m) => {
            key.extend([2, d.scale, 0]);
            key.extend(m.to_le_bytes());
        }
        Err(_) => {
            key.extend([2, d.scale, 1]);
            key.extend(d.mantissa.to_le_bytes());
        }
    }
}

/// [`number_key_into`] of an integer (scale 0), without a decimal made.
fn integer_key_into(m: i128, key: &mut Vec<u8>) {
    key.extend([2, 0, 0]);
    key.extend(m.to_le_bytes());
}

/// One aggregate's running state.
#[derive(Clone)]
pub(super) struct AggState {
    count: i64,
    sum: Val,
    best: Val,
    /// Standard deviations and variances: the running mean and sum of
    /// squared distances from it (Welford's update: no cancellation of
    /// two large sums).
    mean: f64,
    squares: f64,
    /// BIT_AND, BIT_OR, BIT_XOR.
    bits: u64,
    seen: Option<KeyMap<Vec<u8>, ()>>,
    /// GROUP_CONCAT: each value kept and its ORDER BY keys.
    concat: Vec<(Vec<Val>, Vec<u8>)>,
    /// GROUP_CONCAT: the bytes kept (without ORDER BY, values past
    /// `group_concat_max_len` are not kept: they would be cut).
    concat_bytes: usize,
    /// GROUP_CONCAT: a value was left out, past the limit.
    concat_full: bool,
}

impl AggState {
    /// The state of an aggregate before any row.
    pub(super) fn fresh(spec: &AggSpec) -> AggState {
        AggState {
            count: 0,
            sum: Val::Null,
            best: Val::Null,
            mean: 0.0,
            squares: 0.0,
            bits: if spec.func == AggFn::BitAnd {
                u64::MAX
            } else {
                0
            },
            seen: spec.distinct.then(KeyMap::default),
            concat: Vec::new(),
            concat_bytes: 0,
            concat_full: false,
        }
    }

    /// The aggregate's value over the rows folded in.
    pub(super) fn finish(self, spec: &AggSpec, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        let st = self;
        Ok(match spec.func {
            AggFn::GroupConcat => match &spec.concat {
                Some(gc) => concat_finish(gc, st, ctx),
                None => Val::Null,
            },
            AggFn::Count | AggFn::CountStar => Val::Int(st.count),
            AggFn::BitAnd | AggFn::BitOr | AggFn::BitXor => Val::UInt(st.bits),
            AggFn::StdPop | AggFn::StdSamp | AggFn::VarPop | AggFn::VarSamp => {
                deviation(spec.func, &st)
            }
            AggFn::Sum => st.sum,
            AggFn::Min | AggFn::Max => st.best,
            AggFn::Avg => {
                if st.count == 0 {
                    Val::Null
                } else {
                    match expr::eval::arith(expr::Arith::Div, st.sum, Val::Int(st.count), ctx)? {
                        Val::Dec(d) => {
                            let scale = match spec.arg_kind {
                                Kind::Dec { scale } => scale + 4,
                                _ => 4,
                            };
                            Val::Dec(d.rescale(scale).unwrap_or(d))
                        }
                        other => other,
                    }
                }
            }
        })
    }
}

/// Adds a row to a GROUP_CONCAT's state: skipped when a value is NULL
/// (or, with DISTINCT, seen before).
fn concat_add(
    gc: &expr::GroupConcat,
    st: &mut AggState,
    row: &[Val],
    ctx: &mut Ctx<'_>,
) -> SqlResult<()> {
    let mut values = Vec::with_capacity(gc.args.len());
    for (at, a) in gc.args.iter().enumerate() {
        let v = a.eval(row, ctx)?;
        // A JSON aggregate keeps a NULL value as `null` (not its name).
        let kept = gc.json.is_some() && !(gc.json == Some(expr::JsonAgg::Object) && at == 0);
        if v.is_null() && !kept {
            return Ok(());
        }
        values.push(v);
    }
    if let Some(seen) = &mut st.seen {
        if seen
            .insert(group_key(&values, &gc.collations), ())
            .is_some()
        {
            return Ok(());
        }
    }
    if gc.order.is_empty() && st.concat_bytes > gc.max_len {
        // Already past the limit: this value can only be cut. The first
        // such is kept empty: the cut and its warning come there.
        if !st.concat_full {
            st.concat_full = true;
            st.concat.push((Vec::new(), Vec::new()));
        }
        return Ok(());
    }
    let mut keys = Vec::with_capacity(gc.order.len());
    for (e, _) in &gc.order {
        keys.push(e.eval(row, ctx)?);
    }
    let mut text = Vec::new();
    match gc.json {
        Some(expr::JsonAgg::Array) => {
            text.extend_from_slice(expr::json::sql_value_text(&gc.args[0], &values[0]).as_bytes());
        }
        Some(expr::JsonAgg::Object) => {
            text.extend_from_slice(expr::json::quoted(&values[0].to_text()).as_bytes());
            text.push(b':');
            text.extend_from_slice(expr::json::sql_value_text(&gc.args[1], &values[1]).as_bytes());
        }
        None => {
            for v in values {
                match v {
                    Val::Str(b) => text.extend_from_slice(&b),
                    other => text.extend_from_slice(other.to_text().as_bytes()),
                }
            }
        }
    }
    st.concat_bytes += text.len() + gc.separator.len();
    st.concat.push((keys, text));
    Ok(())
}

/// Adds a row to `COUNT(DISTINCT a, b…)`: counted when none of its values
/// is NULL and they were not seen together before.
fn count_distinct_add(
    gc: &expr::GroupConcat,
    st: &mut AggState,
    row: &[Val],
    ctx: &mut Ctx<'_>,
) -> SqlResult<()> {
    let mut values = Vec::with_capacity(gc.args.len());
    for a in &gc.args {
        let v = a.eval(row, ctx)?;
        if v.is_null() {
            return Ok(());
        }
        values.push(v);
    }
    let seen = st.seen.get_or_insert_with(KeyMap::default);
    if seen
        .insert(group_key(&values, &gc.collations), ())
        .is_none()
    {
        st.count += 1;
    }
    Ok(())
}

/// A GROUP_CONCAT's result: its values in order, joined, cut at
/// `group_concat_max_len` bytes (on a character boundary) with MySQL's
/// warning 1260; NULL when no row gave a value.
fn concat_finish(gc: &expr::GroupConcat, mut st: AggState, ctx: &mut Ctx<'_>) -> Val {
    if st.concat.is_empty() {
        return Val::Null;
    }
    if !gc.order.is_empty() {
        st.concat.sort_by(|a, b| {
            let order = gc.order.iter().zip(&gc.order_collations);
            for ((x, y), ((_, desc), coll)) in a.0.iter().zip(&b.0).zip(order) {
                let o = order_cmp(x, y, *coll);
                let o = if *desc { o.reverse() } else { o };
                if o.is_ne() {
                    return o;
                }
            }
            Ordering::Equal
        });
    }
    let mut out: Vec<u8> = Vec::new();
    let (open, close) = match gc.json {
        Some(expr::JsonAgg::Array) => (&b"["[..], &b"]"[..]),
        Some(expr::JsonAgg::Object) => (&b"{"[..], &b"}"[..]),
        None => (&b""[..], &b""[..]),
    };
    out.extend_from_slice(open);
    let cut_at = gc.max_len.saturating_add(open.len());
    for (at, (_, text)) in st.concat.iter().enumerate() {
        if at > 0 {
            out.extend_from_slice(&gc.separator);
        }
        out.extend_from_slice(text);
        if out.len() > cut_at {
            let mut cut = cut_at;
            // A UTF-8 character is not split (MySQL cuts whole ones).
            while cut > 0 && out.get(cut).is_some_and(|b| b & 0xc0 == 0x80) {
                cut -= 1;
            }
            out.truncate(cut);
            // MariaDB's number: the value's place in the result.
            ctx.warn(1260, format!("Row {} was cut by GROUP_CONCAT()", at + 1));
            break;
        }
    }
    out.extend_from_slice(close);
    Val::Str(out)
}

fn aggregate(
    p: &Planned,
    found: Vec<(Vec<Val>, Vec<schema::Value>)>,
    rolled: Option<&RollupExprs>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<(Vec<Val>, Vec<Val>)>> {
    let fresh: Vec<AggState> = p.aggs.iter().map(AggState::fresh).collect();
    let stored = groups_through_table(p);
    // MariaDB returns the groups in GROUP BY order when no ORDER BY names
    // another (`ORDER BY NULL` names none), so a LIMIT takes the first
    // groups; WITH ROLLUP orders its rows itself.
    let sorted = !p.group.is_empty() && p.order.is_empty() && rolled.is_none() && !p.rollup;
    let mut group_values: Vec<Vec<Val>> = Vec::new();
    let members = group_members(p);
    let mut index: KeyMap<Vec<u8>, usize> = KeyMap::default();
    let mut groups: Vec<(Vec<Val>, Vec<AggState>)> = Vec::new();
    let mut rollup = rolled.map(|r| Rollup::new(p, r));
    for (mut row, _) in found {
        ctx.check_killed()?;
        if let Some(r) = rolled {
            for e in &r.appended {
                let v = e.eval(&row, ctx)?;
                row.push(v);
            }
        }
        if let Some(r) = &mut rollup {
            r.add(p, &row, ctx)?;
        }
        // Without GROUP BY every row is of the one group (its first row
        // stands for it): no key to build, hash and compare per row.
        if p.group.is_empty() {
            if groups.is_empty() {
                groups.push((row.clone(), fresh.clone()));
            }
            add_to_group(p, &mut groups[0].1, &row, stored, ctx)?;
            continue;
        }
        let mut key_values = Vec::with_capacity(p.group.len());
        for g in &p.group {
            key_values.push(g.eval(&row, ctx)?);
        }
        let key = group_key(&key_values, &p.group_collations);
        let at = match index.get(&key) {
            Some(at) => *at,
            None => {
                room_for_group(groups.len())?;
                groups.push((row.clone(), fresh.clone()));
                if sorted {
                    group_values.push(sorted_by_members(key_values, &members));
                }
                index.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        add_to_group(p, &mut groups[at].1, &row, stored, ctx)?;
    }
    if sorted {
        groups = in_group_order(p, groups, &group_values);
    }
    if groups.is_empty() && p.group.is_empty() {
        let width = p.source.len();
        groups.push((vec![Val::Null; width], fresh));
    }
    if let Some(r) = rollup {
        groups = r.rows(p, groups);
    }
    aggregated::finished(p, groups, ctx)
}

/// `groups` in GROUP BY order, as MariaDB returns them when no ORDER BY
/// names another: `values[i]` group i's GROUP BY values
/// ([`sorted_by_members`]'s).
fn in_group_order<T>(p: &Planned, groups: Vec<T>, values: &[Vec<Val>]) -> Vec<T> {
    debug_assert_eq!(groups.len(), values.len());
    let mut at: Vec<usize> = (0..groups.len()).collect();
    at.sort_by(|x, y| {
        let (x, y) = (&values[*x], &values[*y]);
        x.iter()
            .zip(y)
            .zip(&p.group_collations)
            .map(|((a, b), c)| order_cmp(a, b, *c))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let mut taken: Vec<Option<T>> = groups.into_iter().map(Some).collect();
    at.into_iter().filter_map(|i| taken[i].take()).collect()
}

/// The members of each GROUP BY expression that is an ENUM or SET
/// column: its groups sort by its number, as its ORDER BY does
/// (`expr::Scope::order_key`).
fn group_members(p: &Planned) -> Vec<Option<&expr::Members>> {
    let members = |g: &Expr| match g {
        Expr::Col(c) => p.source.get(*c)?.members.as_ref(),
        _ => None,
    };
    p.group.iter().map(members).collect()
}

/// A group's values as it sorts: those of [`group_members`]' columns
/// their numbers.
fn sorted_by_members(mut values: Vec<Val>, members: &[Option<&expr::Members>]) -> Vec<Val> {
    for (v, m) in values.iter_mut().zip(members) {
        if let Some(m) = m {
            *v = expr::member_number(v, &m.joined, m.set);
        }
    }
    values
}

/// `GROUP BY … WITH ROLLUP` over expressions, as MariaDB rolls them up:
/// a GROUP BY expression that is not a column is evaluated into a column
/// of its own past the row's (`appended`, at `width` on); an item that is
/// that expression, and HAVING wherever it has it outside aggregates (an
/// alias there is the item), read that column instead, so a rolled-up row
/// shows NULL for it as for a column. An item that only contains it
/// (`YEAR(d) + 1`) is evaluated on the row as MariaDB evaluates it, and so
/// is a column the expression reads.
struct RollupExprs {
    /// Per GROUP BY expression, the row position holding its value.
    positions: Vec<usize>,
    /// The expressions whose values each row gets, in order.
    appended: Vec<Expr>,
    /// The select items reading those columns.
    items: Vec<Expr>,
    /// HAVING reading them.
    having: Option<Expr>,
}

impl RollupExprs {
    fn of(p: &Planned, width: usize) -> RollupExprs {
        // Expressions compare by their Debug form: `Expr` has no
        // equality (doubles, subqueries), and the GROUP BY and the items
        // are lowered from the same text the same way.
        let mut subs: Vec<(String, usize)> = Vec::new();
        let mut appended = Vec::new();
        let mut positions = Vec::with_capacity(p.group.len());
        for g in &p.group {
            if let Expr::Col(c) = g {
                positions.push(*c);
                continue;
            }
            let text = format!("{g:?}");
            let at = match subs.iter().find(|(t, _)| *t == text) {
                Some((_, at)) => *at,
                None => {
                    let at = width + appended.len();
                    appended.push(g.clone());
                    subs.push((text, at));
                    at
                }
            };
            positions.push(at);
        }
        let substitute = |e: &Expr| substitute_group_exprs(e, &subs);
        let whole = |e: &Expr| {
            let text = format!("{e:?}");
            match subs.iter().find(|(t, _)| *t == text) {
                Some((_, at)) if !matches!(e, Expr::Col(_)) => Expr::Col(*at),
                _ => e.clone(),
            }
        };
        RollupExprs {
            positions,
            items: p.items.iter().map(whole).collect(),
            having: p.having.as_ref().map(substitute),
            appended,
        }
    }
}

/// `e` with every subexpression that is one of `subs` (by Debug form)
/// the column `subs` gives it; aggregates' and subqueries' insides are
/// left alone (an aggregate reads the rows, not the group's values).
fn substitute_group_exprs(e: &Expr, subs: &[(String, usize)]) -> Expr {
    if subs.is_empty() {
        return e.clone();
    }
    if !matches!(e, Expr::Lit(_) | Expr::Param(_) | Expr::Col(_)) {
        let text = format!("{e:?}");
        if let Some((_, at)) = subs.iter().find(|(t, _)| *t == text) {
            return Expr::Col(*at);
        }
    }
    e.map_children(&mut |x| substitute_group_exprs(x, subs))
}

/// The groups of `GROUP BY … WITH ROLLUP` for the prefixes of the GROUP
/// BY expressions shorter than all of them, filled as the rows are read (a
/// prefix's aggregates come from the rows, not from its groups' results:
/// AVG and COUNT(DISTINCT) do not merge).
struct Rollup {
    /// Row positions of the GROUP BY expressions' values
    /// ([`RollupExprs::positions`]).
    columns: Vec<usize>,
    /// Per prefix length 0..n: the groups by key, and each group's
    /// (key values, row shown with the columns past the prefix NULL,
    /// states).
    levels: Vec<RollupLevel>,
}

/// The groups of one GROUP BY prefix: by key, and in order of appearance.
type RollupLevel = (KeyMap<Vec<u8>, usize>, Vec<RollupGroup>);

/// One group of a GROUP BY prefix: its key values, the row it shows and
/// its aggregate states.
type RollupGroup = (Vec<Val>, Vec<Val>, Vec<AggState>);

impl Rollup {
    fn new(p: &Planned, rolled: &RollupExprs) -> Rollup {
        Rollup {
            columns: rolled.positions.clone(),
            levels: (0..p.group.len())
                .map(|_| (KeyMap::default(), Vec::new()))
                .collect(),
        }
    }

    fn key(&self, row: &[Val], len: usize) -> Vec<Val> {
        self.columns[..len]
            .iter()
            .map(|c| row.get(*c).cloned().unwrap_or(Val::Null))
            .collect()
    }

    /// Folds `row` into the group of each prefix it belongs to.
    fn add(&mut self, p: &Planned, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<()> {
        for len in 0..self.levels.len() {
            let key = self.key(row, len);
            let bytes = group_key(&key, &p.group_collations);
            let (index, groups) = &mut self.levels[len];
            let at = match index.get(&bytes) {
                Some(at) => *at,
                None => {
                    let mut shown = row.to_vec();
                    for c in &self.columns[len..] {
                        if let Some(v) = shown.get_mut(*c) {
                            *v = Val::Null;
                        }
                    }
                    groups.push((key, shown, p.aggs.iter().map(AggState::fresh).collect()));
                    index.insert(bytes, groups.len() - 1);
                    groups.len() - 1
                }
            };
            add_to_group(p, &mut groups[at].2, row, false, ctx)?;
        }
        Ok(())
    }

    /// Every group, the detail ones (`groups`) and the prefixes', in GROUP
    /// BY order with each prefix's row after its last group, as MariaDB
    /// orders them; (row shown, states) each.
    fn rows(
        self,
        p: &Planned,
        groups: Vec<(Vec<Val>, Vec<AggState>)>,
    ) -> Vec<(Vec<Val>, Vec<AggState>)> {
        let n = self.columns.len();
        // (prefix length, group).
        let mut rows: Vec<(usize, RollupGroup)> = Vec::new();
        // The keys as they sort.
        let members = group_members(p);
        for (row, states) in groups {
            let key = sorted_by_members(self.key(&row, n), &members);
            rows.push((n, (key, row, states)));
        }
        for (len, (_, level)) in self.levels.into_iter().enumerate() {
            rows.extend(
                level.into_iter().map(|(key, row, states)| {
                    (len, (sorted_by_members(key, &members), row, states))
                }),
            );
        }
        rows.sort_by(|a, b| {
            for i in 0..n {
                let o = match (i < a.0, i < b.0) {
                    (true, true) => {
                        let o = order_cmp(&a.1 .0[i], &b.1 .0[i], p.group_collations[i]);
                        if p.rollup_desc.get(i).copied().unwrap_or(false) {
                            o.reverse()
                        } else {
                            o
                        }
                    }
                    // A group before the row that rolls it up.
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => Ordering::Equal,
                };
                if o.is_ne() {
                    return o;
                }
            }
            Ordering::Equal
        });
        // A rolled-up row shows the row of the last group it rolls up (its
        // other columns are that group's, as in MariaDB), the GROUP BY
        // values past its prefix NULL.
        let mut last: Option<Vec<Val>> = None;
        rows.into_iter()
            .map(|(len, (_, row, states))| {
                if len == n {
                    last = Some(row.clone());
                    return (row, states);
                }
                let mut shown = last.clone().unwrap_or(row);
                for c in &self.columns[len..] {
                    if let Some(v) = shown.get_mut(*c) {
                        *v = Val::Null;
                    }
                }
                (shown, states)
            })
            .collect()
    }
}

/// Whether MariaDB groups this SELECT's rows through a temporary table,
/// whose columns hold each row's SUM and AVG arguments at their types: a
/// quotient's extra digits (`eval::division_digits`) are then rounded to
/// its scale before they are added (`SUM(x / 3)` of 1 and 2 is 1.0000
/// when grouped in a key's order, 0.9999 through the table).
///
/// MariaDB groups the rows of the first table it reads in a key's order
/// when the GROUP BY's columns are, in order, a prefix of one of its
/// ordered keys (the primary key too, its clustered index) that the
/// index hints allow; else by sorting that table's rows, not through
/// the temporary table, when a DISTINCT aggregate, GROUP_CONCAT or WITH
/// ROLLUP asks for a sort. Of one table, a condition on the first column
/// of another key has that key read the rows (through the table then),
/// unless a LIMIT without ORDER BY has it read by the GROUP BY's key to
/// stop early. Of a join, the GROUP BY's table is taken to be read first
/// unless it cannot be (it is NULL-extended or must follow another); one
/// that groups by another table's columns, or several tables', groups
/// through the table.
fn groups_through_table(p: &Planned) -> bool {
    use schema::IndexKind;
    let sums_decimals = p.aggs.iter().any(|a| {
        matches!(a.func, AggFn::Sum | AggFn::Avg) && matches!(a.arg_kind, Kind::Dec { .. })
    });
    if p.group.is_empty() || !sums_decimals {
        return false;
    }
    let sorted = p.rollup || p.aggs.iter().any(|a| a.distinct || a.concat.is_some());
    // MariaDB drops a GROUP BY column that WHERE (or HAVING, its part on
    // the GROUP BY's columns pushed into WHERE) sets equal to a constant;
    // with none left the rows make one group, not through the table.
    let fixed: Vec<usize> = p
        .cond
        .iter()
        .chain(&p.having)
        .flat_map(Expr::conjuncts)
        .filter_map(|c| match c {
            Expr::Cmp(expr::CmpOp::Eq | expr::CmpOp::NullSafeEq, a, b, _) => match (&**a, &**b) {
                (Expr::Col(x), o) | (o, Expr::Col(x)) if o.is_constant() => Some(*x),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let grouped: Option<Vec<usize>> = p
        .group
        .iter()
        .filter(|g| !matches!(g, Expr::Col(c) if fixed.contains(c)))
        .map(|g| match g {
            Expr::Col(c) => Some(*c),
            _ => None,
        })
        .collect();
    if grouped.as_ref().is_some_and(Vec::is_empty) {
        return false;
    }
    // The table read first, its hints, the GROUP BY's columns in it (None:
    // not only columns), and the condition that may pick its key.
    let (table, hints, grouped, cond) = match (&p.table, &p.join) {
        (Some(t), _) => (t, &p.hints, grouped, p.cond.as_ref()),
        (None, Some(spec)) => {
            let Some(grouped) = grouped else {
                return true;
            };
            let of = |c: usize| {
                spec.tables
                    .iter()
                    .position(|t| t.offset <= c && c < t.offset + t.table.columns.len())
            };
            let Some(at) = grouped.first().and_then(|c| of(*c)) else {
                return true;
            };
            let t = &spec.tables[at];
            let first = !t.outer && t.after.is_empty() && t.rows.is_none() && t.semi.is_none();
            if !first || grouped.iter().any(|c| of(*c) != Some(at)) {
                return true;
            }
            // A table no key reaches is joined through a buffer (MariaDB's
            // BNL), which loses the first table's order.
            let conds: Vec<&Expr> = p
                .cond
                .iter()
                .chain(&spec.inner_on)
                .flat_map(Expr::conjuncts)
                .collect();
            let buffered = spec.tables.iter().enumerate().any(|(j, o)| {
                let on: Vec<&Expr> = o.on.iter().flat_map(Expr::conjuncts).collect();
                j != at
                    && o.rows.is_none()
                    && o.semi.is_none()
                    && !reached_by_key(spec, j, &conds, &on)
            });
            if buffered {
                return true;
            }
            let own = grouped.iter().map(|c| c - t.offset).collect();
            (&t.table, &t.hints, Some(own), None)
        }
        (None, None) => return false,
    };
    if sorted {
        return false;
    }
    let Some(grouped) = grouped else {
        return true;
    };
    let def = table.native.def();
    // Each ordered key's columns (SQL positions), the primary key first.
    let keys: Vec<Vec<usize>> = std::iter::once(&def.primary_key)
        .chain(
            def.indexes
                .iter()
                .filter(|i| i.kind == IndexKind::Ordered && hints.usable(table, &i.name))
                .map(|i| &i.columns),
        )
        .filter_map(|columns| columns.iter().map(|n| table.sql_column(*n)).collect())
        .collect();
    let Some(by) = keys
        .iter()
        .find(|k| k.len() >= grouped.len() && k[..grouped.len()] == grouped[..])
    else {
        return true;
    };
    if p.limit.is_some() && p.order.is_empty() {
        return false;
    }
    // A conjunct that bounds another key's first column by constants.
    let others: Vec<usize> = keys
        .iter()
        .filter_map(|k| k.first().copied())
        .filter(|c| *c != by[0])
        .collect();
    let bounds = |c: &Expr| match c {
        Expr::Cmp(op, a, b, _) if !matches!(op, expr::CmpOp::Ne) => match (&**a, &**b) {
            (Expr::Col(x), o) | (o, Expr::Col(x)) => others.contains(x) && o.is_constant(),
            _ => false,
        },
        Expr::In(x, list, false, ..) => {
            matches!(&**x, Expr::Col(x) if others.contains(x)) && list.iter().all(Expr::is_constant)
        }
        Expr::Between(x, lo, hi, false, _) => {
            matches!(&**x, Expr::Col(x) if others.contains(x))
                && lo.is_constant()
                && hi.is_constant()
        }
        Expr::IsNull(x, false) => matches!(&**x, Expr::Col(x) if others.contains(x)),
        _ => false,
    };
    cond.is_some_and(|c| c.conjuncts().into_iter().any(bounds))
}

/// Whether an equality of another table's column with the first column of
/// one of table `j`'s keys (that its hints allow) lets the join read `j`
/// by key: MariaDB's ref and eq_ref access.
fn reached_by_key(spec: &JoinSpec, j: usize, conds: &[&Expr], on: &[&Expr]) -> bool {
    let t = &spec.tables[j];
    let mine = |c: usize| t.offset <= c && c < t.offset + t.table.columns.len();
    let def = t.table.native.def();
    let firsts: Vec<usize> = std::iter::once(&def.primary_key)
        .chain(
            def.indexes
                .iter()
                .filter(|i| t.hints.usable(&t.table, &i.name))
                .map(|i| &i.columns),
        )
        .filter_map(|k| k.first().and_then(|n| t.table.sql_column(*n)))
        .map(|c| c + t.offset)
        .collect();
    conds.iter().chain(on).any(|e| match e {
        Expr::Cmp(expr::CmpOp::Eq | expr::CmpOp::NullSafeEq, a, b, _) => match (&**a, &**b) {
            (Expr::Col(x), Expr::Col(y)) => {
                (firsts.contains(x) && !mine(*y)) || (firsts.contains(y) && !mine(*x))
            }
            _ => false,
        },
        _ => false,
    })
}

/// Adds `row` to the aggregate states of its group; with `stored`, a SUM's
/// or AVG's DECIMAL argument at its type's scale ([`groups_through_table`]).
fn add_to_group(
    p: &Planned,
    states: &mut [AggState],
    row: &[Val],
    stored: bool,
    ctx: &mut Ctx<'_>,
) -> SqlResult<()> {
    for (spec, st) in p.aggs.iter().zip(states.iter_mut()) {
        if let Some(gc) = &spec.concat {
            if spec.func == AggFn::Count {
                count_distinct_add(gc, st, row, ctx)?;
            } else {
                concat_add(gc, st, row, ctx)?;
            }
            continue;
        }
        let mut v = match &spec.arg {
            Some(a) => a.eval(row, ctx)?,
            None => Val::Int(1),
        };
        if let (true, AggFn::Sum | AggFn::Avg, Kind::Dec { scale }, Val::Dec(d)) =
            (stored, spec.func, spec.arg_kind, &v)
        {
            if d.scale > scale {
                v = Val::Dec(d.rescale(scale).unwrap_or(*d));
            }
        }
        st.fold(spec, v, ctx)?;
    }
    Ok(())
}

impl AggState {
    /// Adds one row's argument value (`COUNT(*)`: any non-NULL value).
    pub(super) fn fold(&mut self, spec: &AggSpec, v: Val, ctx: &mut Ctx<'_>) -> SqlResult<()> {
        let st = self;
        if v.is_null() {
            return Ok(());
        }
        if let Some(seen) = &mut st.seen {
            if seen
                .insert(
                    group_key(std::slice::from_ref(&v), &[kind_collation(spec.arg_kind)]),
                    (),
                )
                .is_some()
            {
                return Ok(());
            }
        }
        st.count += 1;
        match spec.func {
            AggFn::Sum | AggFn::Avg => st.add_sum(spec, v, ctx)?,
            AggFn::Min | AggFn::Max => st.keep_best(spec, v),
            AggFn::StdPop | AggFn::StdSamp | AggFn::VarPop | AggFn::VarSamp => {
                let x = ctx.num_f64(&v);
                let delta = x - st.mean;
                st.mean += delta / st.count as f64;
                st.squares += delta * (x - st.mean);
            }
            AggFn::BitAnd | AggFn::BitOr | AggFn::BitXor => {
                let bits = expr::aggregate_bits_of(&v, ctx);
                match spec.func {
                    AggFn::BitAnd => st.bits &= bits,
                    AggFn::BitOr => st.bits |= bits,
                    _ => st.bits ^= bits,
                }
            }
            AggFn::Count | AggFn::CountStar | AggFn::GroupConcat => {}
        }
        Ok(())
    }

    /// Adds a value not NULL to a SUM's or AVG's sum.
    fn add_sum(&mut self, spec: &AggSpec, v: Val, ctx: &mut Ctx<'_>) -> SqlResult<()> {
        let st = self;
        st.sum = if st.sum.is_null() {
            match (&v, spec.arg_kind) {
                (_, Kind::Double) | (Val::Str(_) | Val::Double(_), _) => {
                    Val::Double(ctx.num_f64(&v))
                }
                (Val::Int(i), _) => Val::Dec(Dec::new(i128::from(*i), 0)),
                (Val::UInt(u), _) => Val::Dec(Dec::new(i128::from(*u), 0)),
                _ => v.clone(),
            }
        } else {
            // Decimals of one scale (a DECIMAL column's values):
            // their mantissas added, as `arith` would.
            let same = match (&st.sum, &v) {
                (Val::Dec(a), Val::Dec(b)) if a.scale == b.scale => a
                    .mantissa
                    .checked_add(b.mantissa)
                    .and_then(|m| Dec::checked(m, a.scale)),
                _ => None,
            };
            match same {
                Some(d) => Val::Dec(d),
                None => expr::eval::arith(
                    expr::Arith::Add,
                    std::mem::replace(&mut st.sum, Val::Null),
                    v.clone(),
                    ctx,
                )?,
            }
        };
        Ok(())
    }

    /// Keeps a value not NULL if it is a MIN's least or a MAX's greatest.
    fn keep_best(&mut self, spec: &AggSpec, v: Val) {
        let st = self;
        let better = st.best.is_null() || {
            let o = order_cmp(&v, &st.best, kind_collation(spec.arg_kind));
            if spec.func == AggFn::Min {
                o.is_lt()
            } else {
                o.is_gt()
            }
        };
        if better {
            st.best = v;
        }
    }

    /// Folds in another state of the same aggregate over other rows (a
    /// group of them aggregated apart: `eager`).
    pub(super) fn merge(
        &mut self,
        spec: &AggSpec,
        other: &AggState,
        ctx: &mut Ctx<'_>,
    ) -> SqlResult<()> {
        let value = match spec.func {
            AggFn::Sum | AggFn::Avg => other.sum.clone(),
            AggFn::Min | AggFn::Max => other.best.clone(),
            _ => Val::Null,
        };
        self.fold_partial(spec, other.count, value, ctx)
    }

    /// Folds in what the data nodes aggregated of some rows (an
    /// aggregating scan's partial): `values` of them not NULL, `v` their
    /// sum, least or greatest value (NULL when none).
    pub(super) fn fold_partial(
        &mut self,
        spec: &AggSpec,
        values: i64,
        v: Val,
        ctx: &mut Ctx<'_>,
    ) -> SqlResult<()> {
        self.count = self.count.saturating_add(values);
        if v.is_null() {
            return Ok(());
        }
        match spec.func {
            AggFn::Sum | AggFn::Avg => self.add_sum(spec, v, ctx),
            AggFn::Min | AggFn::Max => {
                self.keep_best(spec, v);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// A standard deviation or variance from its state; NULL without rows
/// (and, for the sample ones, with one).
fn deviation(func: AggFn, st: &AggState) -> Val {
    let n = st.count as f64;
    let variance = match func {
        AggFn::StdPop | AggFn::VarPop if st.count > 0 => st.squares / n,
        AggFn::StdSamp | AggFn::VarSamp if st.count > 1 => st.squares / (n - 1.0),
        _ => return Val::Null,
    };
    // Rounding can leave a hair below zero for equal values.
    let variance = variance.max(0.0);
    if matches!(func, AggFn::StdPop | AggFn::StdSamp) {
        Val::Double(variance.sqrt())
    } else {
        Val::Double(variance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::Mantissa;

    /// The word trick finds a byte under a space exactly where a byte loop
    /// does: every byte value, at every position of strings around a word.
    #[test]
    fn below_space_is_any_byte_under_a_space() {
        for len in 1..20 {
            let mut s = vec![b'~'; len];
            for at in 0..len {
                for b in 0..=255u8 {
                    s[at] = b;
                    assert_eq!(below_space(&s), b < b' ', "byte {b} at {at} of {len}");
                }
                s[at] = 0xff;
            }
            assert!(!below_space(&s));
        }
    }

    /// Numbers are one group key by value, whatever their type or scale,
    /// and different values never share one, past an i128 too.
    #[test]
    fn number_group_keys_by_value() {
        let key = |v: Val| group_key(&[v], &[None]);
        let dec = |m: i128, scale: u8| Val::Dec(Dec::new(m, scale));
        assert_eq!(key(Val::Int(18)), key(Val::UInt(18)));
        assert_eq!(key(Val::Int(18)), key(Val::Double(18.0)));
        assert_eq!(key(Val::Int(18)), key(dec(1800, 2)));
        assert_eq!(key(dec(150, 2)), key(dec(15, 1)));
        assert_eq!(key(Val::Double(-0.0)), key(Val::Int(0)));
        assert_eq!(key(dec(0, 5)), key(Val::Int(0)));
        assert_ne!(key(dec(15, 1)), key(dec(15, 2)));
        assert_ne!(key(Val::Int(-1)), key(Val::UInt(u64::MAX)));
        assert_ne!(key(Val::Int(1)), key(Val::Str(b"1".to_vec())));
        let big = Mantissa::from(i128::MAX) * Mantissa::from(10);
        let huge = Val::Dec(Dec {
            mantissa: big,
            scale: 0,
        });
        let tenth = Val::Dec(Dec {
            mantissa: big * Mantissa::from(10),
            scale: 1,
        });
        assert_eq!(key(huge.clone()), key(tenth));
        assert_ne!(key(huge), key(Val::Int(i64::MAX)));
        // Two values of a row stay apart: (1, 23) is not (12, 3).
        assert_ne!(
            group_key(&[Val::Int(1), Val::Int(23)], &[None, None]),
            group_key(&[Val::Int(12), Val::Int(3)], &[None, None])
        );
    }

    fn state(values: &[&str]) -> AggState {
        AggState {
            count: 0,
            sum: Val::Null,
            best: Val::Null,
            mean: 0.0,
            squares: 0.0,
            bits: 0,
            seen: None,
            concat: values
                .iter()
                .map(|v| (Vec::new(), v.as_bytes().to_vec()))
                .collect(),
            concat_bytes: 0,
            concat_full: false,
        }
    }

    fn concat(max_len: usize) -> expr::GroupConcat {
        expr::GroupConcat {
            args: Vec::new(),
            order: Vec::new(),
            separator: b",".to_vec(),
            max_len,
            collations: Vec::new(),
            order_collations: Vec::new(),
            json: None,
        }
    }

    #[test]
    fn group_concat_cuts_whole_characters_and_warns_with_the_values_place() {
        let env = expr::eval::Env::default();
        let mut ctx = Ctx::new(&[], &env);
        let v = concat_finish(&concat(10), state(&["ab", "cd"]), &mut ctx);
        assert_eq!(v, Val::Str(b"ab,cd".to_vec()));
        assert!(ctx.warnings.is_empty());
        // "ab,é": é is two bytes, the limit falls between them.
        let v = concat_finish(&concat(4), state(&["ab", "é"]), &mut ctx);
        assert_eq!(v, Val::Str(b"ab,".to_vec()));
        assert_eq!(ctx.warnings.len(), 1);
        assert_eq!(ctx.warnings[0].0, 1260);
        assert_eq!(ctx.warnings[0].1, "Row 2 was cut by GROUP_CONCAT()");
        assert_eq!(concat_finish(&concat(4), state(&[]), &mut ctx), Val::Null);
    }
}
