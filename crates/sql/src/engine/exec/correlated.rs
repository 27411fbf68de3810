//! Correlated subqueries run per outer row (MySQL's DEPENDENT SUBQUERY)
//! and `LATERAL` derived tables (DEPENDENT DERIVED).
//!
//! A subquery naming a column of the query around it cannot run once per
//! statement. When the semi-join rewrite (`semi.rs`, the fast path) does
//! not take it, it is planned once with the outer columns bound to sample
//! values (its columns, and its errors, come out at plan time) and
//! lowered to an [`Expr::Sub`](crate::engine::expr::Expr::Sub) node that
//! holds its text and the outer columns it may name. The executor
//! evaluates such nodes after it has read the outer rows (the outer
//! statement's transaction is free then): for a row, the named columns'
//! values are bound (names the subquery does not find resolve to them, as
//! constants: `s.k = t.k` becomes a key read) and the subquery runs
//! through the same path as any other query.
//!
//! Results are kept per statement by the subquery's text and the bound
//! values (MariaDB's subquery cache, and its `Subquery_cache_hit` /
//! `Subquery_cache_miss` counters): a subquery runs once per distinct
//! outer value, at most [`ROW_CACHE_ENTRIES_MAX`] results and
//! [`ROW_CACHE_BYTES_MAX`] bytes kept (past them a result is used once
//! and not kept).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use sqlparser::ast;
use sqlparser::tokenizer::Location;

use super::derived::{check_kept, Materialised};
use crate::engine::expr::{OuterRow, PerRow, ScopeColumn, SubQuery, Val};
use crate::engine::Conn;
use crate::error::SqlResult;

/// Most correlated-subquery results one statement keeps.
pub const ROW_CACHE_ENTRIES_MAX: usize = 4_096;
/// Most bytes (estimated as `check_kept` does) of correlated-subquery
/// results one statement keeps.
pub const ROW_CACHE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// What one correlated subquery did in a statement (`EXPLAIN ANALYZE`).
#[derive(Clone, Copy, Default, Debug)]
pub struct RunStats {
    /// Rows that evaluated it (its cache's hits too).
    pub evaluations: u64,
    /// Times it ran (cache misses).
    pub runs: u64,
    /// Rows its runs gave, in all.
    pub rows: u64,
    /// Time its runs took, in all.
    pub time: std::time::Duration,
}

/// Correlated subqueries' results by text and bound values.
#[derive(Default)]
pub struct RowCache {
    results: HashMap<String, Arc<Materialised>>,
    bytes: usize,
}

/// The cache key: the text and the values, each told apart exactly (a
/// string's bytes, not its collation's folding).
fn key_of(text: &str, values: &[Val]) -> String {
    format!("{text}\u{0}{values:?}")
}

/// Runs `f` with `row` bound as the innermost outer row. What the
/// statement's subqueries gave is set aside meanwhile: a subquery inside
/// may name the outer row, so its result holds for this row only.
pub(crate) fn with_outer<R>(
    conn: &mut Conn<'_>,
    row: OuterRow,
    f: impl FnOnce(&mut Conn<'_>) -> SqlResult<R>,
) -> SqlResult<R> {
    with_outer_row(conn, row, f).0
}

/// [`with_outer`], giving the row back (what planning recorded in it).
fn with_outer_row<R>(
    conn: &mut Conn<'_>,
    row: OuterRow,
    f: impl FnOnce(&mut Conn<'_>) -> SqlResult<R>,
) -> (SqlResult<R>, OuterRow) {
    let results = std::mem::take(&mut conn.subqueries.results);
    let correlated = std::mem::take(&mut conn.subqueries.correlated);
    let per_row = std::mem::take(&mut conn.subqueries.per_row);
    conn.subqueries.outer.push(row);
    let out = f(conn);
    let row = conn.subqueries.outer.pop().unwrap_or_default();
    conn.subqueries.per_row = per_row;
    conn.subqueries.correlated = correlated;
    conn.subqueries.results = results;
    (out, row)
}

/// Plans (runs nothing) the subqueries of `node` at depth `base` that
/// lowering will find correlated: those whose standalone plan failed
/// with 1054. Each is planned with the outer `columns` it names bound to
/// sample values; its columns are kept for lowering. A 1054 that remains
/// is the statement's (a column neither query has).
pub(crate) fn plan(
    conn: &mut Conn<'_>,
    node: &impl ast::Visit,
    base: usize,
    columns: &[ScopeColumn],
    hidden: &[usize],
    placeholders: &[Location],
) -> SqlResult<()> {
    // Most statements have no subquery that failed alone: no walk.
    let any_failed = conn
        .subqueries
        .results
        .values()
        .any(|o| matches!(o, Err(e) if super::subquery::may_be_correlated(e)));
    if !any_failed {
        return Ok(());
    }
    for q in super::subquery::find(node, base) {
        let text = q.to_string();
        let failed = matches!(
            conn.subqueries.results.get(&text),
            Some(Err(e)) if super::subquery::may_be_correlated(e)
        );
        if !failed || conn.subqueries.correlated.contains_key(&text) {
            continue;
        }
        let outer = crate::engine::expr::outer_columns(&q, columns, hidden);
        if outer.is_empty() {
            continue;
        }
        let m = plan_with(conn, &q, &outer, placeholders, true)?;
        conn.subqueries.correlated.insert(text, Arc::new(m));
    }
    Ok(())
}

/// Plans `q` with the `outer` columns bound to sample values. With
/// `outer_aggs`, the aggregates of the outer query's columns it writes
/// are the outer query's ([`Materialised::outer_aggs`]); without, they
/// stay `q`'s (a `LATERAL` table's).
pub(crate) fn plan_with(
    conn: &mut Conn<'_>,
    q: &ast::Query,
    outer: &[(ScopeColumn, usize)],
    placeholders: &[Location],
    outer_aggs: bool,
) -> SqlResult<Materialised> {
    let row = OuterRow {
        columns: outer.iter().map(|(c, _)| c.clone()).collect(),
        values: outer
            .iter()
            .map(|(c, _)| crate::engine::expr::sample_value(c.kind))
            .collect(),
        aggs: Vec::new(),
        wanted: outer_aggs.then(RefCell::default),
    };
    let (m, row) = with_outer_row(conn, row, |conn| {
        super::select::materialise(conn, q, placeholders, None)
    });
    let mut m = m?;
    m.outer_aggs = row.wanted.map(RefCell::into_inner).unwrap_or_default();
    Ok(m)
}

/// Runs correlated subqueries for the executor's rows.
pub(crate) struct Runner<'c, 's> {
    conn: RefCell<&'c mut Conn<'s>>,
    placeholders: &'c [Location],
    params: &'c [Val],
    /// The warnings of the runs since the evaluating context last took
    /// them ([`PerRow::take_warnings`]).
    warnings: RefCell<Vec<(u16, String)>>,
}

impl<'c, 's> Runner<'c, 's> {
    /// A runner over the connection (its statement's transaction not
    /// held by the caller).
    pub fn new(conn: &'c mut Conn<'s>, placeholders: &'c [Location], params: &'c [Val]) -> Self {
        Runner {
            conn: RefCell::new(conn),
            placeholders,
            params,
            warnings: RefCell::new(Vec::new()),
        }
    }

    /// `q`'s rows with the `outer` columns bound to `row`'s values,
    /// from the statement's cache when these values ran before.
    /// `aggs`: the outer query's aggregates `q` writes, by text, with
    /// their values for the row's group.
    pub fn query_rows(
        &self,
        q: &ast::Query,
        text: &str,
        outer: &[(ScopeColumn, usize)],
        row: &[Val],
        aggs: Vec<(String, Val)>,
    ) -> SqlResult<Arc<Materialised>> {
        let mut values: Vec<Val> = outer
            .iter()
            .map(|(_, at)| row.get(*at).cloned().unwrap_or(Val::Null))
            .collect();
        let key = if aggs.is_empty() {
            key_of(text, &values)
        } else {
            values.extend(aggs.iter().map(|(_, v)| v.clone()));
            let key = key_of(text, &values);
            values.truncate(outer.len());
            key
        };
        let mut conn = self.conn.borrow_mut();
        if let Some(stats) = conn.subqueries.analyze.as_mut() {
            stats.entry(text.to_owned()).or_default().evaluations += 1;
        }
        let cache = &mut conn.subqueries.per_row;
        if let Some(m) = cache.results.get(&key) {
            let m = Arc::clone(m);
            conn.info.status.subquery_cache_hit.bump();
            return Ok(m);
        }
        conn.info.status.subquery_cache_miss.bump();
        let bound = OuterRow {
            columns: outer.iter().map(|(c, _)| c.clone()).collect(),
            values,
            aggs,
            wanted: None,
        };
        let started = std::time::Instant::now();
        let mark = conn.session.diagnostics_mark();
        let m = with_outer(&mut conn, bound, |conn| {
            super::select::materialise(conn, q, self.placeholders, Some(self.params))
        })?;
        // The run's warnings go to the evaluating context, in their place
        // among the outer statement's (a strict UPDATE fails on the first,
        // as MariaDB's, and the list keeps the order they came in).
        if conn.session.diagnostics_mark() != mark {
            use crate::engine::expr::eval::{NOTE_BIT, PLANNED_BIT};
            let notes = conn.session.notes().get(mark.1..).unwrap_or_default();
            let mut taken = self.warnings.borrow_mut();
            for n in notes {
                let code = match (n.level, n.planned) {
                    ("Note", _) => n.code | NOTE_BIT,
                    (_, true) => n.code | PLANNED_BIT,
                    _ => n.code,
                };
                taken.push((code, n.message.clone()));
            }
            conn.session.rewind_diagnostics(mark);
        }
        if let Some(stats) = conn.subqueries.analyze.as_mut() {
            let s = stats.entry(text.to_owned()).or_default();
            s.runs += 1;
            s.rows += m.rows.len() as u64;
            s.time += started.elapsed();
        }
        check_kept(&m.rows, "subquery")?;
        let m = Arc::new(m);
        let cache = &mut conn.subqueries.per_row;
        let bytes = super::derived::kept_bytes(&m.rows);
        if cache.results.len() < ROW_CACHE_ENTRIES_MAX
            && cache.bytes.saturating_add(bytes) <= ROW_CACHE_BYTES_MAX
        {
            cache.bytes += bytes;
            cache.results.insert(key, Arc::clone(&m));
        }
        Ok(m)
    }
}

impl PerRow for Runner<'_, '_> {
    fn rows(&self, sub: &SubQuery, row: &[Val], aggs: &[Val]) -> SqlResult<Arc<Materialised>> {
        let aggs = sub
            .aggs
            .iter()
            .zip(aggs)
            .map(|((text, _), v)| (text.clone(), v.clone()))
            .collect();
        self.query_rows(&sub.query, &sub.text, &sub.outer, row, aggs)
    }

    fn take_warnings(&self) -> Vec<(u16, String)> {
        std::mem::take(&mut *self.warnings.borrow_mut())
    }
}
