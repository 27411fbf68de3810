//! Correlated subqueries of WHERE rewritten as joins (seed 001's advice
//! "rewrite sub-selects as joins", done for the user): a conjunct
//! `x IN (SELECT y FROM s WHERE …)` or `EXISTS (SELECT … FROM s WHERE …)`
//! whose subquery names outer columns becomes a semi-join with `s`, and
//! `NOT EXISTS` (or `NOT IN` of values that are never NULL, where NULL
//! answers cannot differ) an anti-join. The subquery's table joins after
//! every table of the outer query, so the join executor reads it with
//! batched key access (one native batch per `JOIN_BATCH_ROWS` outer rows)
//! where its conditions give a key, and keeps one match per outer row
//! (`JoinTable::semi`).
//!
//! Only a subquery of one real table without GROUP BY, HAVING,
//! aggregates or LIMIT is rewritten; others stay (and, correlated, are
//! refused with 1105).

use std::sync::Arc;

use sqlparser::ast;
use sqlparser::tokenizer::Location;

use super::{table_scope, with_scope};
use crate::engine::catalog::TableInfo;
use crate::engine::expr::{split_and, CmpOp, Expr, ScopeColumn, Val};
use crate::engine::plan::join::{Hints, JoinSpec, JoinTable, SemiKind, JOIN_TABLES_MAX};
use crate::engine::Conn;
use crate::error::{codes, SqlResult};

/// Aggregate functions: a subquery with one always has a row.
const AGGREGATES: &[&str] = &[
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "GROUP_CONCAT",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
];

/// The outer query's FROM as a join, before the rewrite.
pub(super) struct Outer {
    /// Its tables and conditions.
    pub spec: JoinSpec,
    /// What `*` expands to.
    pub star: Vec<usize>,
    /// Columns unqualified names skip.
    pub hidden: Vec<usize>,
}

impl Outer {
    /// One table as a join of one.
    pub fn single(table: &Arc<TableInfo>, alias: &str, hints: &Hints) -> Outer {
        let columns = table_scope(table, alias);
        Outer {
            star: (0..columns.len()).collect(),
            spec: JoinSpec {
                tables: vec![JoinTable {
                    table: Arc::clone(table),
                    alias: alias.to_owned(),
                    offset: 0,
                    outer: false,
                    on: Vec::new(),
                    after: Vec::new(),
                    hints: hints.clone(),
                    rows: None,
                    semi: None,
                }],
                inner_on: Vec::new(),
                straight: false,
                columns,
            },
            hidden: Vec::new(),
        }
    }
}

/// A conjunct of WHERE that is a subquery the rewrite takes.
struct Candidate<'q> {
    /// `IN`'s left side (None for EXISTS).
    left: Option<&'q ast::Expr>,
    /// The subquery's one SELECT.
    select: &'q ast::Select,
    /// NOT.
    negated: bool,
}

/// Rewrites WHERE's correlated `IN`/`EXISTS` conjuncts of `selection` as
/// semi-/anti-joins on `outer`; the rest of WHERE (None: nothing
/// rewritten).
pub(super) fn rewrite(
    conn: &mut Conn<'_>,
    selection: Option<&ast::Expr>,
    outer: &mut Outer,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Option<Option<ast::Expr>>> {
    let Some(selection) = selection else {
        return Ok(None);
    };
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    let mut rest = Vec::new();
    let mut taken = Vec::new();
    for c in conjuncts {
        match candidate(conn, c) {
            Some(cand) => taken.push(cand),
            None => rest.push(c.clone()),
        }
    }
    if taken.is_empty() {
        return Ok(None);
    }
    let outer_tables = outer.spec.tables.len();
    if outer_tables + taken.len() > JOIN_TABLES_MAX {
        return Ok(None);
    }
    for cand in &taken {
        let ast::TableFactor::Table { name, alias, .. } = &cand.select.from[0].relation else {
            return Ok(None);
        };
        if super::select::is_virtual(conn, name) {
            return Ok(None);
        }
        let super::Source::Table(table) = super::source_of(conn, name)? else {
            return Ok(None);
        };
        let alias = alias
            .as_ref()
            .map_or_else(|| table.name.clone(), |a| a.name.value.clone());
        if outer.spec.tables[..outer_tables]
            .iter()
            .any(|t| t.alias.eq_ignore_ascii_case(&alias))
        {
            // `t.c` would be ambiguous in one scope: not rewritten.
            return Ok(None);
        }
        // Subqueries inside the subquery's WHERE run first.
        if let Some(w) = &cand.select.selection {
            super::subquery::prepare(conn, w, 0, placeholders, params)?;
        }
        let offset = outer.spec.columns.len();
        let inner = table_scope(&table, &alias);
        let inner_len = inner.len();
        // Unqualified names inside the subquery find its own table's
        // columns before the outer ones.
        let shadowed: Vec<usize> = outer
            .spec
            .columns
            .iter()
            .enumerate()
            .filter(|(at, c)| {
                *at < offset && inner.iter().any(|i| i.name.eq_ignore_ascii_case(&c.name))
            })
            .map(|(at, _)| at)
            .chain(outer.hidden.iter().copied())
            .collect();
        let mut combined = outer.spec.columns.clone();
        combined.extend(inner);
        // The outer side of IN sees the outer columns only.
        let outer_view: Vec<ScopeColumn> = combined
            .iter()
            .enumerate()
            .map(|(at, c)| if at >= offset { blank(c) } else { c.clone() })
            .collect();
        let left = match cand.left {
            Some(l) => Some(with_scope(conn, outer_view, placeholders, |scope| {
                scope.clause = "IN";
                scope.hidden = outer.hidden.clone();
                let x = scope.lower(l)?;
                Ok((x.clone(), scope.nullable(&x)))
            })?),
            None => None,
        };
        let item = match (&cand.left, cand.select.projection.as_slice()) {
            (None, _) => None,
            (
                Some(_),
                [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }],
            ) => Some(e),
            (Some(_), _) => return Ok(None),
        };
        let (conds, item_nullable, eq) =
            with_scope(conn, combined.clone(), placeholders, |scope| {
                scope.clause = "WHERE";
                scope.hidden = shadowed.clone();
                let conds = match &cand.select.selection {
                    Some(w) => vec![scope.lower_condition(w)?],
                    None => Vec::new(),
                };
                let (nullable, eq) = match (item, &left) {
                    (Some(e), Some((x, _))) => {
                        scope.clause = "SELECT";
                        let y = scope.lower(e)?;
                        let c = scope.collation_of(x, &y);
                        let n = scope.nullable(&y);
                        (
                            n,
                            Some(Expr::Cmp(CmpOp::Eq, Box::new(x.clone()), Box::new(y), c)),
                        )
                    }
                    _ => (false, None),
                };
                Ok((conds, nullable, eq))
            })?;
        let kind = match (cand.negated, &left) {
            (false, _) => SemiKind::Semi,
            (true, None) => SemiKind::Anti,
            // NOT IN is an anti-join only where no NULL can answer.
            (true, Some((_, x_nullable))) if !x_nullable && !item_nullable => SemiKind::Anti,
            (true, Some(_)) => return Ok(None),
        };
        outer.spec.inner_on.extend(conds);
        outer.spec.inner_on.extend(eq);
        // The rest of the query (and the next subquery) does not see
        // this subquery's columns.
        outer.spec.columns = combined;
        for at in offset..offset + inner_len {
            outer.spec.columns[at] = blank(&outer.spec.columns[at]);
        }
        outer.spec.tables.push(JoinTable {
            table,
            alias,
            offset,
            outer: false,
            on: Vec::new(),
            after: (0..outer_tables).collect(),
            hints: Hints::default(),
            rows: None,
            semi: Some(kind),
        });
    }
    Ok(Some(rest.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
        left: Box::new(a),
        op: ast::BinaryOperator::And,
        right: Box::new(b),
    })))
}

/// Whether WHERE has a conjunct the rewrite might take (a cheap look at
/// the parsed text, so that a query without one builds nothing).
pub(super) fn worth_trying(selection: Option<&ast::Expr>) -> bool {
    // Asked of every SELECT with a WHERE: walks the conjuncts without
    // collecting them.
    fn any_conjunct(e: &ast::Expr) -> bool {
        match e {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::And,
                right,
            } => any_conjunct(left) || any_conjunct(right),
            ast::Expr::Nested(inner) => any_conjunct(inner),
            ast::Expr::Exists { .. }
            | ast::Expr::In {
                target: ast::InTarget::Subquery(_),
                ..
            } => true,
            _ => false,
        }
    }
    selection.is_some_and(any_conjunct)
}

/// A column no name finds.
fn blank(c: &ScopeColumn) -> ScopeColumn {
    ScopeColumn {
        name: Arc::default(),
        table: Arc::default(),
        ..c.clone()
    }
}

/// The conjunct as a subquery the rewrite takes: correlated (it failed
/// alone with 1054), of one real table, without grouping or LIMIT.
fn candidate<'q>(conn: &Conn<'_>, e: &'q ast::Expr) -> Option<Candidate<'q>> {
    let (left, q, negated) = match e {
        ast::Expr::Exists { subquery, negated } => (None, subquery, *negated),
        ast::Expr::In {
            expr,
            target: ast::InTarget::Subquery(q),
            negated,
            ..
        } => (Some(&**expr), q, *negated),
        _ => return None,
    };
    let correlated = matches!(
        conn.subqueries.results.get(&q.to_string()),
        Some(Err(err)) if err.code == codes::BAD_FIELD
    );
    if !correlated || q.with.is_some() || q.limit_clause.is_some() || !q.locks.is_empty() {
        return None;
    }
    let ast::SetExpr::Select(select) = &*q.body else {
        return None;
    };
    let simple = select.from.len() == 1
        && select.from[0].joins.is_empty()
        && matches!(
            &select.from[0].relation,
            ast::TableFactor::Table { args: None, .. }
        )
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && select.having.is_none()
        && select.into.is_none()
        && !select.projection.iter().any(has_aggregate)
        // A subquery inside that is correlated itself runs per row.
        && super::subquery::find(select, 0).iter().all(|inner| {
            matches!(conn.subqueries.results.get(&inner.to_string()), Some(Ok(_)))
        });
    if let (true, Some(ast::Expr::Tuple(_))) = (simple, left) {
        return None;
    }
    simple.then_some(Candidate {
        left,
        select,
        negated,
    })
}

/// Whether a select item calls an aggregate function.
fn has_aggregate(item: &ast::SelectItem) -> bool {
    use std::ops::ControlFlow;
    let mut found = false;
    let _ = ast::visit_expressions(item, |e| {
        if let ast::Expr::Function(f) = e {
            let name = f.name.to_string().to_ascii_uppercase();
            if AGGREGATES.contains(&name.as_str()) {
                found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}
