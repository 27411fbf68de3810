//! Join plans: the order the tables of a FROM list are read in and how
//! each is read, from the conditions that link them. One [`JoinPlan`] is
//! what the executor (`exec::join`) runs and what `EXPLAIN` prints.
//!
//! The combined row of a join is every table's columns in written order
//! (each table at its `offset`); conditions are lowered over it. A table
//! is read either on its own (its own conditions make an [`Access`], read
//! once per query and matched in memory against every outer row), or by
//! key from the tables read before it ([`Keyed`]: batched key access, one
//! native batch of key reads or one index scan per [`JOIN_BATCH_ROWS`]
//! outer rows).
//!
//! The order is chosen greedily by cost: at each step the table whose
//! reading costs the fewest rows next (a table read once: the rows its own
//! conditions leave; a table read by key: outer rows × rows per key), ties
//! broken by access type (key reads, then ranges, then whole tables; a
//! table read whole that the others could reach by key after them) and
//! then by written order. Rows come from the cluster's statistics
//! (`engine::stats`: the table's row count, and rows per key value from
//! `ANALYZE TABLE`'s cardinality); without them, from fixed guesses
//! ([`TABLE_ROWS_GUESS`], …).

use std::sync::Arc;

use schema::IndexKind;
use skarv_client::{Filter, Value};
use sqlparser::ast;

use super::{access_with, Access};
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::expr::{CmpOp, Ctx, Expr, Kind, ScopeColumn, SubTest};
use crate::engine::stats::Bounds;
use crate::error::{codes, SqlError, SqlResult};

/// Outer rows whose inner rows one native batch fetches (key reads or one
/// ordered-index scan); at most `exec::OPS_PER_EXECUTE_MAX` key reads.
pub const JOIN_BATCH_ROWS: usize = 256;
/// The guessed rows of a table read whole (no statistics yet).
pub const TABLE_ROWS_GUESS: u64 = 1_000;
/// The guessed rows an ordered-index range finds.
pub const RANGE_ROWS_GUESS: u64 = 100;
/// The guessed rows one value of a non-unique index finds.
pub const REF_ROWS_GUESS: u64 = 10;
/// A range with bounds finds the table's rows divided by this (MySQL's
/// guess for a range it cannot ask the engine about).
pub const RANGE_ROWS_DIVISOR: u64 = 3;
/// Most tables one SELECT joins (MySQL's limit is 61).
pub const JOIN_TABLES_MAX: usize = 61;

/// `USE`/`FORCE`/`IGNORE INDEX` of one table (MySQL key names, lower case).
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// `USE`/`FORCE INDEX (…)`: only these keys (an empty list: none).
    only: Option<Vec<String>>,
    /// `IGNORE INDEX (…)`.
    ignore: Vec<String>,
    /// `FORCE INDEX`: a key is used wherever one can be.
    pub force: bool,
}

impl Hints {
    /// The hints written after a table (`alias` for 1176's message).
    pub fn from_ast(
        table: &TableInfo,
        alias: &str,
        directives: &[ast::TableIndexDirective],
    ) -> SqlResult<Hints> {
        let mut hints = Hints::default();
        for d in directives {
            let ast::TableIndexDirective::MySql(h) = d else {
                return Err(SqlError::unsupported(format_args!("the index hint {d}")));
            };
            let mut names = Vec::new();
            for name in &h.index_names {
                let known = table
                    .keys
                    .iter()
                    .any(|k| k.name.eq_ignore_ascii_case(&name.value));
                if !known {
                    return Err(SqlError::new(
                        codes::NO_SUCH_INDEX,
                        format!("Key '{}' doesn't exist in table '{alias}'", name.value),
                    ));
                }
                names.push(name.value.to_ascii_lowercase());
            }
            // Hints FOR ORDER BY / GROUP BY choose how rows are sorted,
            // which Skarv does in the SQL node: they change nothing here.
            if matches!(
                h.for_clause,
                Some(ast::TableIndexHintForClause::OrderBy | ast::TableIndexHintForClause::GroupBy)
            ) {
                continue;
            }
            match h.hint_type {
                ast::TableIndexHintType::Ignore => hints.ignore.extend(names),
                ast::TableIndexHintType::Use | ast::TableIndexHintType::Force => {
                    hints.force |= h.hint_type == ast::TableIndexHintType::Force;
                    hints.only.get_or_insert_with(Vec::new).extend(names);
                }
            }
        }
        Ok(hints)
    }

    /// Whether the hints allow the key named `key` (MySQL's name).
    pub fn allows_key(&self, key: &str) -> bool {
        let key = key.to_ascii_lowercase();
        !self.ignore.contains(&key) && self.only.as_ref().is_none_or(|o| o.contains(&key))
    }

    /// Whether the hints allow the native index `native` of `table`.
    pub fn usable(&self, table: &TableInfo, native: &str) -> bool {
        key_name(table, native).is_none_or(|k| self.allows_key(k))
    }
}

/// MySQL's name of the key a native index serves (`PRIMARY` for the
/// primary key's reads and its ordered index).
pub fn key_name<'t>(table: &'t TableInfo, native: &str) -> Option<&'t str> {
    table
        .keys
        .iter()
        .find(|k| {
            k.ordered.as_deref() == Some(native)
                || k.hash.as_deref() == Some(native)
                || (k.primary && native == "PRIMARY")
        })
        .map(|k| k.name.as_str())
}

/// One table of a FROM list.
#[derive(Clone, Debug)]
pub struct JoinTable {
    /// The table.
    pub table: Arc<TableInfo>,
    /// Its name in the query (alias or table name).
    pub alias: String,
    /// Its first column in the combined row.
    pub offset: usize,
    /// NULL-extended when nothing matches: the inner table of a LEFT JOIN
    /// (or the left of a RIGHT JOIN).
    pub outer: bool,
    /// The ON conjuncts of an outer table (combined positions).
    pub on: Vec<Expr>,
    /// Tables that must be read before this one (written order for an
    /// outer table and for `STRAIGHT_JOIN`).
    pub after: Vec<usize>,
    /// Its index hints.
    pub hints: Hints,
    /// The rows of a derived table (kept in the SQL node; `table` is its
    /// shape, with no keys): read whole, never from the data nodes.
    pub rows: Option<Arc<Vec<Vec<crate::engine::expr::Val>>>>,
    /// The table of a subquery rewritten as a semi-join or anti-join
    /// (`IN`/`EXISTS` in WHERE); read after every other table.
    pub semi: Option<SemiKind>,
}

/// How a subquery's table joins the query around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SemiKind {
    /// `EXISTS` / `IN`: an outer row passes once when a row matches
    /// (MySQL's FirstMatch).
    Semi,
    /// `NOT EXISTS` / `NOT IN` of values never NULL: an outer row passes
    /// when no row matches.
    Anti,
}

/// A FROM list of more than one table, with its conditions lowered.
#[derive(Clone, Debug)]
pub struct JoinSpec {
    /// The tables in written order.
    pub tables: Vec<JoinTable>,
    /// ON conjuncts of inner joins (as WHERE's).
    pub inner_on: Vec<Expr>,
    /// `SELECT STRAIGHT_JOIN`: the written order.
    pub straight: bool,
    /// The combined row's columns.
    pub columns: Vec<ScopeColumn>,
}

/// How a key-accessed table is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyedKind {
    /// Primary-key reads.
    Primary,
    /// Unique-index reads.
    Unique,
    /// An ordered-index scan per batch (a prefix of the index).
    Ordered,
}

/// A table read by key values taken from the tables read before it.
#[derive(Clone, Debug)]
pub struct Keyed {
    /// How.
    pub kind: KeyedKind,
    /// The native index (`PRIMARY` for primary-key reads).
    pub index: String,
    /// MySQL's name of the key.
    pub key: String,
    /// The key's columns (positions in the table), in key order.
    pub columns: Vec<usize>,
    /// Per key column, the value over the combined row.
    pub exprs: Vec<Expr>,
}

/// How one step reads its table.
#[derive(Clone, Debug)]
pub enum StepAccess {
    /// Its own conditions only: read once, kept, matched in memory.
    Own(Access),
    /// Batched key access from the earlier tables.
    Keyed(Keyed),
}

/// One table of the join order.
#[derive(Clone, Debug)]
pub struct Step {
    /// The table (index into `JoinSpec::tables`).
    pub table: usize,
    /// How it is read.
    pub access: StepAccess,
    /// The part of its own conditions the data nodes evaluate.
    pub filter: Option<Filter>,
    /// Conditions a combined row must hold to match (an outer table's ON;
    /// an inner table's conditions that are complete at this step).
    pub matching: Vec<Expr>,
    /// Conditions tested after an outer table's NULL extension (WHERE's).
    pub post: Vec<Expr>,
    /// Estimated rows per outer row.
    pub rows: u64,
}

/// The order and access of a join.
#[derive(Clone, Debug)]
pub struct JoinPlan {
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// The combined row's positions the statement reads beyond the
    /// plan's own conditions and keys (its items, WHERE, grouping,
    /// order…): each table's reads ask the data nodes for these columns
    /// and those the plan names, and the others stay NULL. None: every
    /// column (a multi-table UPDATE or DELETE, which writes whole rows).
    pub used: Option<Vec<bool>>,
}

impl JoinPlan {
    /// Estimated rows the plan reads: a table read on its own its rows
    /// once, a table read by key the rows so far times its rows per key;
    /// the first table's rows `first_rows` instead of its estimate when
    /// given (a top N reads only its first few). A step with conditions
    /// beyond what finds its rows (a pushed filter, a matching condition
    /// besides the key) passes one row in [`FILTER_GUESS`] on. What a top
    /// N along the first table's order weighs (`exec::select::top_join`).
    pub fn cost(&self, first_rows: Option<u64>) -> u64 {
        let mut outer: u64 = 1;
        let mut cost: u64 = 0;
        for (at, step) in self.steps.iter().enumerate() {
            let rows = match first_rows {
                Some(r) if at == 0 => r,
                _ => step.rows,
            };
            match step.access {
                StepAccess::Keyed(_) => {
                    cost = cost.saturating_add(outer.saturating_mul(rows));
                    outer = outer.saturating_mul(rows.max(1));
                }
                StepAccess::Own(_) => {
                    cost = cost.saturating_add(rows);
                    outer = if at > 0 && !step.matching.is_empty() {
                        outer.max(rows)
                    } else {
                        outer.saturating_mul(rows.max(1))
                    };
                }
            }
            if step.filters() {
                outer = (outer / FILTER_GUESS).max(1);
            }
        }
        cost
    }
}

/// One row in this many passes a condition whose selectivity the
/// statistics do not give (a filter on a column without an index, a
/// condition between tables besides the join key): MySQL's guess for an
/// equality (`COND_FILTER_EQUALITY`, 0.1).
pub const FILTER_GUESS: u64 = 10;

impl Step {
    /// Whether rows are dropped here by more than what finds them: a
    /// pushed filter, conditions besides a key read's equalities, WHERE
    /// after an outer join's NULL extension.
    pub fn filters(&self) -> bool {
        match &self.access {
            StepAccess::Keyed(k) => {
                self.filter.is_some() || self.matching.len() + self.post.len() > k.columns.len()
            }
            // Matched in memory on the link to the earlier tables.
            StepAccess::Own(_) => self.filter.is_some() || !self.post.is_empty(),
        }
    }
}

/// The tables (bit set by written index) an expression reads.
fn tables_of(spec: &JoinSpec, e: &Expr) -> u64 {
    let mut cols = Vec::new();
    columns(e, &mut cols);
    cols.iter()
        .filter_map(|c| table_at(spec, *c))
        .fold(0, |m, t| m | (1 << t))
}

/// The table a combined position belongs to.
pub fn table_at(spec: &JoinSpec, col: usize) -> Option<usize> {
    spec.tables
        .iter()
        .position(|t| col >= t.offset && col < t.offset + t.table.columns.len())
}

/// The columns an expression reads.
pub fn columns(e: &Expr, out: &mut Vec<usize>) {
    match e {
        Expr::Col(c) => out.push(*c),
        Expr::Lit(_) | Expr::Param(_) | Expr::Agg(_) | Expr::Win(_) | Expr::InsertValue(_) => {}
        Expr::Neg(a) | Expr::Not(a) | Expr::IsNull(a, _) | Expr::IsBool(a, ..) => columns(a, out),
        Expr::Cast(a, _) => columns(a, out),
        Expr::Arith(_, a, b, _)
        | Expr::Cmp(_, a, b, _)
        | Expr::And(a, b)
        | Expr::Or(a, b)
        | Expr::Xor(a, b)
        | Expr::Like(a, b, ..) => {
            columns(a, out);
            columns(b, out);
        }
        Expr::In(a, l, ..) => {
            columns(a, out);
            l.iter().for_each(|x| columns(x, out));
        }
        Expr::Between(a, b, c, ..) => {
            columns(a, out);
            columns(b, out);
            columns(c, out);
        }
        Expr::Case(o, w, el) => {
            if let Some(o) = o {
                columns(o, out);
            }
            for (a, b) in w {
                columns(a, out);
                columns(b, out);
            }
            if let Some(el) = el {
                columns(el, out);
            }
        }
        Expr::Func(_, args) => args.iter().for_each(|x| columns(x, out)),
        Expr::Sub(s) => {
            out.extend(s.outer.iter().map(|(_, at)| *at));
            e.each(&mut |x| {
                if let Expr::Col(c) = x {
                    out.push(*c);
                }
            });
        }
    }
}

/// The expression with every column position moved by `f`.
pub fn map_columns(e: &Expr, f: &dyn Fn(usize) -> usize) -> Expr {
    match e {
        Expr::Col(c) => Expr::Col(f(*c)),
        Expr::Sub(s) => {
            let mut s = (**s).clone();
            for (_, at) in &mut s.outer {
                *at = f(*at);
            }
            s.test = match s.test {
                SubTest::In(left, n) => SubTest::In(
                    left.iter().map(|(x, c)| (map_columns(x, f), *c)).collect(),
                    n,
                ),
                SubTest::Quantified(x, c, op, all) => {
                    SubTest::Quantified(Box::new(map_columns(&x, f)), c, op, all)
                }
                other => other,
            };
            Expr::Sub(Box::new(s))
        }
        _ => e.map_children(&mut |x| map_columns(x, f)),
    }
}

/// The AND of conjuncts (None for none).
pub fn and_all(conds: &[Expr]) -> Option<Expr> {
    Expr::and_of(conds.iter().cloned())
}

/// Rows one value of the first `prefix` columns of the native ordered
/// index `index` finds: rows / cardinality (`ANALYZE TABLE`), else the
/// guess, at most the table's rows.
pub fn rows_per_key(table: &TableInfo, index: &str, prefix: usize) -> u64 {
    table
        .stats
        .rows_per_key(index, prefix)
        .unwrap_or_else(|| REF_ROWS_GUESS.min(table.stats.rows().unwrap_or(REF_ROWS_GUESS)))
        .max(1)
}

/// Whether `ANALYZE TABLE` gave `index` of `table` a cardinality.
pub fn has_cardinality(table: &TableInfo, index: &str) -> bool {
    table.stats.cardinality(index, 1).is_some()
}

/// Estimated rows an access of `table` by its own conditions reads:
/// statistics where known, else the guesses.
pub fn estimate_rows(table: &TableInfo, access: &Access) -> u64 {
    let rows = table.stats.rows();
    match access {
        Access::Nothing => 0,
        Access::Keys(k) | Access::Unique { keys: k, .. } => k.len() as u64,
        Access::Range {
            index,
            lower,
            upper,
            points,
            ..
        } => {
            if let Some(first) = points.first() {
                points.len() as u64 * rows_per_key(table, index, first.len())
            } else if lower.is_none() && upper.is_none() {
                rows.unwrap_or(TABLE_ROWS_GUESS)
            } else if lower.as_ref().map(|(v, _)| v) == upper.as_ref().map(|(v, _)| v)
                && lower.as_ref().is_some_and(|(_, inc)| *inc)
            {
                let prefix = lower.as_ref().map_or(0, |(v, _)| v.len());
                rows_per_key(table, index, prefix)
            } else if let Some(found) = range_rows(table, index, lower, upper) {
                found
            } else {
                rows.map_or(RANGE_ROWS_GUESS, |r| (r / RANGE_ROWS_DIVISOR).max(1))
            }
        }
        Access::Scan => rows.unwrap_or(TABLE_ROWS_GUESS),
    }
}

/// Rows a range on an index's first column finds, from the column's
/// bounds (`ANALYZE TABLE`) and the table's rows, as if its values were
/// spread evenly between them; None when a bound is not one value with a
/// position (`Bounds::position`) or the bounds or rows are not known.
fn range_rows(
    table: &TableInfo,
    index: &str,
    lower: &Option<(Vec<Value>, bool)>,
    upper: &Option<(Vec<Value>, bool)>,
) -> Option<u64> {
    let rows = table.stats.rows()?;
    let bounds = table.stats.bounds(index)?;
    // Each bound's position and the step between neighbouring values (1:
    // an exclusive bound moves by one; 0: a continuous kind).
    let one = |bound: &Option<(Vec<Value>, bool)>| -> Option<Option<(f64, f64, bool)>> {
        match bound {
            None => Some(None),
            Some((values, inclusive)) => match values.as_slice() {
                [v] => {
                    let (at, step) = Bounds::position(v)?;
                    Some(Some((at, step, *inclusive)))
                }
                _ => None,
            },
        }
    };
    let (lower, upper) = (one(lower)?, one(upper)?);
    let step = lower.or(upper).map_or(0.0, |(_, step, _)| step);
    let exclusive = |inclusive: bool| if inclusive { 0.0 } else { step };
    let from = lower
        .map_or(bounds.least, |(at, _, inclusive)| at + exclusive(inclusive))
        .max(bounds.least);
    let to = upper
        .map_or(bounds.greatest, |(at, _, inclusive)| {
            at - exclusive(inclusive)
        })
        .min(bounds.greatest);
    let span = bounds.greatest - bounds.least + step;
    let fraction = if span > 0.0 {
        ((to - from + step) / span).clamp(0.0, 1.0)
    } else if from <= to {
        // Every row holds the one value, and the range takes it.
        1.0
    } else {
        0.0
    };
    let found = (rows as f64 * fraction).ceil() as u64;
    Some(found.clamp(1, rows.max(1)))
}

/// A condition with its tables.
struct Cond {
    expr: Expr,
    tables: u64,
    used: bool,
}

/// What reading one candidate table next would be.
struct Choice {
    class: u8,
    rows: u64,
    access: StepAccess,
    filter: Option<Filter>,
}

/// A constant conjunct evaluated once, as MariaDB's optimizer evaluates
/// it (its warning the planning's; one not true leaves the join no row),
/// and a conjunct of one table (`tables`, a bit set) folded as that
/// table's WHERE is folded (`plan::fold_constants`, numbers too): a string
/// compared with a number column is read as a number once, its warning
/// once, not per row, as MariaDB's optimizer does for a join as for one
/// table. Not a derived table's, nor an IS NULL of a table an outer join
/// NULL-extends (`c IS NULL` of a NOT NULL column folds to false, which
/// it is not there). None when it folds to true. An outer table's ON
/// conjuncts of its own or constant are folded so too (MariaDB reads
/// `LEFT JOIN b ON b.id = a.id AND b.y = 'zz'`'s 'zz' once).
fn fold_one_table(
    spec: &JoinSpec,
    tables: u64,
    e: &Expr,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Expr>> {
    if tables == 0 && e.is_constant() {
        let Some(first) = spec.tables.first() else {
            return Ok(Some(e.clone()));
        };
        let folded = crate::engine::plan::fold_constants(&first.table, Some(e), true, ctx)?;
        return Ok(folded.map(std::borrow::Cow::into_owned));
    }
    let read = read_bigint_texts(spec, e, ctx);
    let e = read.as_ref();
    let single = tables.count_ones() == 1;
    let t = &spec.tables[if single {
        tables.trailing_zeros() as usize
    } else {
        0
    }];
    let mut null_test = false;
    if t.outer {
        e.each(&mut |x| null_test |= matches!(x, Expr::IsNull(..)));
    }
    if !single && !e.has_sub() {
        return fold_constant_parts(spec, e, ctx);
    }
    if null_test || t.rows.is_some() || t.semi.is_some() || e.has_sub() {
        return Ok(Some(e.clone()));
    }
    let offset = t.offset;
    fold_moved(&t.table, e, &|c| c - offset, &|c| c + offset, ctx)
}

/// `e` with each string literal compared with a BIGINT column of
/// any table read now (`plan::read_bigint_texts`), as MariaDB converts
/// it when it prepares the statement, wherever the conjunct goes: beside
/// an outer table's IS NULL or a subquery too (CREATE … SELECT seed 39:
/// `(c > 100 XOR 'date' = t1.f) OR t2.id IS NULL` of a LEFT JOIN only
/// warns). Borrowed when there is none.
pub(crate) fn read_bigint_texts<'e>(
    spec: &JoinSpec,
    e: &'e Expr,
    ctx: &mut Ctx<'_>,
) -> std::borrow::Cow<'e, Expr> {
    // Most conditions have none: no copy then.
    let unsigned = |x: &Expr| {
        matches!(x, Expr::Col(c) if spec.tables.iter().any(|t| {
            *c >= t.offset && matches!(
                t.table.columns.get(*c - t.offset).map(|col| &col.ty),
                Some(crate::engine::catalog::SqlType::BigInt { .. })
            )
        }))
    };
    let mut found = false;
    e.each(&mut |x| {
        if let Expr::Cmp(_, a, b, _) = x {
            found |= (unsigned(a) && b.text_literal().is_some())
                || (unsigned(b) && a.text_literal().is_some());
        }
    });
    let mut read = std::borrow::Cow::Borrowed(e);
    if !found {
        return read;
    }
    for t in &spec.tables {
        let (offset, end) = (t.offset, t.offset + t.table.columns.len());
        let moved = map_columns(&read, &|c| match c >= offset && c < end {
            true => c - offset,
            false => c + UNSEEN_COLUMN_OFFSET,
        });
        if let std::borrow::Cow::Owned(x) =
            crate::engine::plan::read_bigint_texts(&t.table, &moved, ctx)
        {
            read = std::borrow::Cow::Owned(map_columns(&x, &|c| match c >= UNSEEN_COLUMN_OFFSET {
                true => c - UNSEEN_COLUMN_OFFSET,
                false => c + offset,
            }));
        }
    }
    read
}

/// `e` folded as `table`'s WHERE is (`plan::fold_constants`, numbers
/// too) with its columns moved by `into` for the fold and by `back`
/// after it. None when it folds to true.
fn fold_moved(
    table: &TableInfo,
    e: &Expr,
    into: &dyn Fn(usize) -> usize,
    back: &dyn Fn(usize) -> usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Expr>> {
    let moved = map_columns(e, into);
    Ok(
        match crate::engine::plan::fold_constants(table, Some(&moved), true, ctx)? {
            Some(std::borrow::Cow::Borrowed(_)) => Some(e.clone()),
            Some(std::borrow::Cow::Owned(folded)) => Some(map_columns(&folded, back)),
            None => None,
        },
    )
}

/// Where [`fold_constant_parts`] moves a conjunct's columns: past any
/// table's, so the fold sees none of them.
const UNSEEN_COLUMN_OFFSET: usize = 1 << 20;

/// A conjunct of several tables with its constant parts folded, as
/// MariaDB's optimizer folds the constants of a WHERE's ANDs and ORs
/// whichever tables they sit beside (`t2.y IN (…, 3) OR NOT ('a' = 'b'
/// AND t1.b >= t1.a)` is true before any row, and no row's `t2.y` is read
/// as a number: CREATE … SELECT seed 10). The columns are moved out of
/// the fold's sight ([`UNSEEN_COLUMN_OFFSET`]): no table's column is
/// converted or tested by it. None when it folds to true.
fn fold_constant_parts(spec: &JoinSpec, e: &Expr, ctx: &mut Ctx<'_>) -> SqlResult<Option<Expr>> {
    let Some(first) = spec.tables.first() else {
        return Ok(Some(e.clone()));
    };
    fold_moved(
        &first.table,
        e,
        &|c| c + UNSEEN_COLUMN_OFFSET,
        &|c| c - UNSEEN_COLUMN_OFFSET,
        ctx,
    )
}

/// Plans a join: order and access of every table. `cond` is WHERE over the
/// combined row. Evaluates constants (and placeholders) with `ctx`.
pub fn plan(spec: &JoinSpec, cond: Option<&Expr>, ctx: &mut Ctx<'_>) -> SqlResult<JoinPlan> {
    let planned = plan_from(spec, cond, ctx, None)?;
    Ok(planned.expect("a join planned freely always has a plan"))
}

/// Plans a join whose first table is `first`, read along an ordered
/// index in `order` (ORDER BY over that table's own columns, one
/// direction): what a top N read in that order runs (`exec::join::
/// run_top`); the later tables are chosen as [`plan`] chooses them. None
/// when `first` cannot go first (an outer join's inner table, one that
/// must follow another), or its own conditions choose a range of another
/// index or key reads (a few rows: nothing to gain), or no usable
/// ordered index starts with ORDER BY's columns.
pub fn plan_in_order(
    spec: &JoinSpec,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
    first: usize,
    order: &[(Expr, bool)],
) -> SqlResult<Option<JoinPlan>> {
    let t = &spec.tables[first];
    if t.outer || t.semi.is_some() || t.rows.is_some() || !t.after.is_empty() {
        return Ok(None);
    }
    if spec.straight && first != 0 {
        return Ok(None);
    }
    plan_from(spec, cond, ctx, Some((first, order)))
}

/// [`plan`], or [`plan_in_order`] when `first` names the first table.
fn plan_from(
    spec: &JoinSpec,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
    first: Option<(usize, &[(Expr, bool)])>,
) -> SqlResult<Option<JoinPlan>> {
    let n = spec.tables.len();
    if n > JOIN_TABLES_MAX {
        return Err(SqlError::new(
            1116,
            format!("Too many tables; MySQL can only use {JOIN_TABLES_MAX} tables in a join"),
        ));
    }
    let mut conds: Vec<Cond> = Vec::new();
    let mut written = cond.map(Expr::conjuncts).unwrap_or_default();
    // A WHERE constant as a whole is evaluated by the rows' rules, its
    // warning a row's (a strict INSERT … SELECT fails on it, as MariaDB's
    // and as one table's WHERE does: `plan::fold_select_constants`).
    // Not an AND or OR of constants (folded as conjuncts are, as MariaDB's
    // optimizer does), nor what is left of a WHERE whose subquery became
    // a semi-join, whose other conjunct it was (`EXISTS (…) AND '' < 1`
    // only warns: DML seed 464).
    let never = Expr::Lit(crate::engine::expr::Val::Int(0));
    let semi = spec.tables.iter().any(|t| t.semi.is_some());
    let whole = |c: &&Expr| c.is_constant() && !semi && !matches!(c, Expr::And(..) | Expr::Or(..));
    if let Some(c) = cond.filter(whole) {
        let v = c.eval(&[], ctx)?;
        written = if ctx.truth(&v) == Some(true) {
            Vec::new()
        } else {
            vec![&never]
        };
    }
    // A constant conjunct that does not hold (`0 = (SELECT MAX(x) …)` of
    // 7): MariaDB's "Impossible WHERE", no row read nor condition tested.
    let mut impossible = false;
    for e in written
        .into_iter()
        .chain(spec.inner_on.iter().flat_map(Expr::conjuncts))
    {
        let tables = tables_of(spec, e);
        if let Some(expr) = fold_one_table(spec, tables, e, ctx)? {
            impossible |=
                tables == 0 && matches!(&expr, Expr::Lit(v) if ctx.truth(v) != Some(true));
            conds.push(Cond {
                tables,
                expr,
                used: false,
            });
        }
    }
    // Each outer table's ON conjuncts, folded.
    let mut ons: Vec<Vec<Expr>> = Vec::with_capacity(n);
    for t in &spec.tables {
        let mut on = Vec::new();
        for e in t.on.iter().flat_map(Expr::conjuncts) {
            if let Some(folded) = fold_one_table(spec, tables_of(spec, e), e, ctx)? {
                on.push(folded);
            }
        }
        ons.push(on);
    }
    let mut placed: u64 = 0;
    let mut steps = Vec::with_capacity(n);
    // Estimated rows of the join of the tables placed so far.
    let mut outer: u64 = 1;
    while steps.len() < n {
        let mut best: Option<(usize, Choice, u64)> = None;
        if let (Some((i, order)), true) = (first, steps.is_empty()) {
            let t = &spec.tables[i];
            let choice = choose(spec, i, placed, &conds, &ons[i], ctx)?;
            let usable = |native: &str| t.hints.usable(&t.table, native);
            let access = match choice.access {
                StepAccess::Own(Access::Scan) => match super::ordered_index_for(&t.table, order) {
                    Some(a @ Access::Range { .. }) if matches!(&a, Access::Range { index, .. } if usable(index)) => {
                        a
                    }
                    _ => return Ok(None),
                },
                StepAccess::Own(a @ Access::Range { .. })
                    if super::follows_index(&t.table, order, &a) =>
                {
                    a
                }
                _ => return Ok(None),
            };
            let rows = estimate_rows(&t.table, &access);
            best = Some((
                i,
                Choice {
                    class: 3,
                    rows,
                    access: StepAccess::Own(access),
                    filter: choice.filter,
                },
                rows,
            ));
        }
        for (i, (t, on)) in spec.tables.iter().zip(&ons).enumerate() {
            if best.is_some() && first.is_some() && steps.is_empty() {
                break;
            }
            if placed & (1 << i) != 0 || t.after.iter().any(|a| placed & (1 << a) == 0) {
                continue;
            }
            let mut choice = choose(spec, i, placed, &conds, on, ctx)?;
            // A table read whole that the others could reach by key goes
            // after them: scan the one that cannot be reached.
            if choice.class >= 3 && !spec.straight {
                let others = ((1u64 << n) - 1) & !(1 << i);
                if let StepAccess::Keyed(_) = choose(spec, i, others, &conds, &ons[i], ctx)?.access
                {
                    choice.class += 2;
                }
            }
            let cost = match choice.access {
                StepAccess::Keyed(_) => outer.saturating_mul(choice.rows),
                StepAccess::Own(_) => choice.rows,
            };
            let better = match &best {
                None => true,
                Some(_) if spec.straight => false,
                Some((_, b, c)) => (cost, choice.class, choice.rows) < (*c, b.class, b.rows),
            };
            if better {
                best = Some((i, choice, cost));
            }
        }
        let Some((i, choice, _)) = best else {
            return Err(SqlError::unsupported("this join's order"));
        };
        let linked = conds
            .iter()
            .any(|c| !c.used && c.tables & (1 << i) != 0 && c.tables & placed != 0);
        outer = match (&choice.access, linked) {
            (StepAccess::Keyed(_), _) | (StepAccess::Own(_), false) => {
                outer.saturating_mul(choice.rows.max(1))
            }
            // Matched in memory on a condition: about one match per row
            // of the larger side.
            (StepAccess::Own(_), true) => outer.max(choice.rows),
        };
        let now = placed | (1 << i);
        let ready: Vec<Expr> = conds
            .iter_mut()
            .filter(|c| !c.used && c.tables & !now == 0)
            .map(|c| {
                c.used = true;
                c.expr.clone()
            })
            .collect();
        let t = &spec.tables[i];
        let (matching, post) = if t.outer {
            (ons[i].clone(), ready)
        } else {
            (ready, Vec::new())
        };
        steps.push(Step {
            table: i,
            access: choice.access,
            filter: choice.filter,
            matching,
            post,
            rows: choice.rows,
        });
        placed = now;
    }
    if let (true, Some(first)) = (impossible, steps.first_mut()) {
        first.access = StepAccess::Own(Access::Nothing);
        first.filter = None;
    }
    Ok(Some(JoinPlan { steps, used: None }))
}

/// How table `i` would be read after the tables in `placed` (`on`: its
/// ON conjuncts, folded, when an outer join NULL-extends it).
fn choose(
    spec: &JoinSpec,
    i: usize,
    placed: u64,
    conds: &[Cond],
    on: &[Expr],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Choice> {
    let t = &spec.tables[i];
    let me = 1u64 << i;
    // Conditions that may pick this table's rows: an outer table's ON
    // only (WHERE applies after the NULL extension); an inner table's
    // WHERE and ON.
    let usable: Vec<(Expr, u64)> = if t.outer {
        on.iter().map(|e| (e.clone(), tables_of(spec, e))).collect()
    } else {
        conds
            .iter()
            .filter(|c| !c.used)
            .map(|c| (c.expr.clone(), c.tables))
            .collect()
    };
    let width = t.table.columns.len();
    let local = |c: usize| c - t.offset;
    let own: Vec<Expr> = usable
        .iter()
        .filter(|(e, m)| *m == me || (*m == 0 && t.outer && e.is_constant()))
        .map(|(e, _)| map_columns(e, &local))
        .collect();
    if let Some(kept) = &t.rows {
        // A derived table's rows are at hand (their count known): matched
        // in memory.
        return Ok(Choice {
            class: 4,
            rows: kept.len() as u64,
            access: StepAccess::Own(Access::Scan),
            filter: None,
        });
    }
    let table = &t.table;
    let allowed = |native: &str| t.hints.usable(table, native);
    let (access, filter) = access_with(table, and_all(&own).as_ref(), ctx, &allowed)?;
    let rows = estimate_rows(table, &access);
    let class = match &access {
        Access::Nothing | Access::Keys(_) | Access::Unique { .. } => 0,
        Access::Range { .. } => 3,
        Access::Scan => 4,
    };
    if class == 0 {
        return Ok(Choice {
            class,
            rows,
            access: StepAccess::Own(access),
            filter,
        });
    }
    // Equalities `this.col = earlier.col` of kinds a key read compares
    // as SQL does.
    let mut by_column: Vec<Option<Expr>> = vec![None; width];
    for (e, m) in &usable {
        let Expr::Cmp(CmpOp::Eq, a, b, coll) = e else {
            continue;
        };
        if m & me == 0 || m & !(placed | me) != 0 {
            continue;
        }
        let (Expr::Col(x), Expr::Col(y)) = (&**a, &**b) else {
            continue;
        };
        let (mine, other) = match (table_at(spec, *x), table_at(spec, *y)) {
            (Some(p), Some(q)) if p == i && q != i => (*x, *y),
            (Some(p), Some(q)) if q == i && p != i => (*y, *x),
            _ => continue,
        };
        if key_comparable(table, local(mine), &spec.columns[other].kind, *coll)
            && by_column[local(mine)].is_none()
        {
            by_column[local(mine)] = Some(Expr::Col(other));
        }
    }
    let def = table.native.def();
    let sql_of = |native: usize| table.sql_column(native);
    let full = |cols: &[usize]| -> Option<(Vec<usize>, Vec<Expr>)> {
        let positions: Vec<usize> = cols.iter().map(|n| sql_of(*n)).collect::<Option<_>>()?;
        let exprs: Vec<Expr> = positions
            .iter()
            .map(|p| by_column[*p].clone())
            .collect::<Option<_>>()?;
        (!cols.is_empty()).then_some((positions, exprs))
    };
    let mut keyed: Option<(u8, u64, Keyed)> = None;
    if !table.hidden_key && allowed("PRIMARY") {
        if let Some((columns, exprs)) = full(&def.primary_key) {
            keyed = Some((
                1,
                1,
                Keyed {
                    kind: KeyedKind::Primary,
                    index: "PRIMARY".into(),
                    key: "PRIMARY".into(),
                    columns,
                    exprs,
                },
            ));
        }
    }
    for index in &def.indexes {
        if keyed.is_some() {
            break;
        }
        if index.kind == IndexKind::Unique && allowed(&index.name) {
            if let Some((columns, exprs)) = full(&index.columns) {
                keyed = Some((
                    1,
                    1,
                    Keyed {
                        kind: KeyedKind::Unique,
                        index: index.name.clone(),
                        key: key_name(table, &index.name)
                            .unwrap_or(&index.name)
                            .to_owned(),
                        columns,
                        exprs,
                    },
                ));
            }
        }
    }
    if keyed.is_none() {
        let mut best: Option<Keyed> = None;
        for index in def.indexes.iter().filter(|i| i.kind == IndexKind::Ordered) {
            if !allowed(&index.name) {
                continue;
            }
            let mut columns = Vec::new();
            let mut exprs = Vec::new();
            for n in &index.columns {
                match sql_of(*n).and_then(|p| by_column[p].clone().map(|e| (p, e))) {
                    Some((p, e)) => {
                        columns.push(p);
                        exprs.push(e);
                    }
                    None => break,
                }
            }
            if !columns.is_empty()
                && best
                    .as_ref()
                    .is_none_or(|b| columns.len() > b.columns.len())
            {
                best = Some(Keyed {
                    kind: KeyedKind::Ordered,
                    index: index.name.clone(),
                    key: key_name(table, &index.name)
                        .unwrap_or(&index.name)
                        .to_owned(),
                    columns,
                    exprs,
                });
            }
        }
        keyed = best.map(|k| {
            let per_key = rows_per_key(table, &k.index, k.columns.len());
            (2, per_key, k)
        });
    }
    Ok(match keyed {
        Some((class, rows, k)) => Choice {
            class,
            rows,
            access: StepAccess::Keyed(k),
            // Key reads take no filter; an ordered scan's is built per
            // batch around this one.
            filter,
        },
        None => Choice {
            class,
            rows,
            access: StepAccess::Own(access),
            filter,
        },
    })
}

/// Whether `table`'s column `col` found by key with a value of kind
/// `other` finds what `col = value` (under `coll`) holds for: the same
/// kind of value (and collation), so the value's stored form decides.
fn key_comparable(
    table: &TableInfo,
    col: usize,
    other: &Kind,
    coll: Option<schema::Collation>,
) -> bool {
    let Some(c) = table.columns.get(col) else {
        return false;
    };
    let text_collation = match &c.ty {
        SqlType::Char { collation, .. }
        | SqlType::VarChar { collation, .. }
        | SqlType::Text { collation, .. } => Some(*collation),
        _ => None,
    };
    match (&c.ty, other) {
        (SqlType::Enum(_) | SqlType::Set(_), _) => false,
        (
            SqlType::TinyInt { .. }
            | SqlType::SmallInt { .. }
            | SqlType::MediumInt { .. }
            | SqlType::Int { .. }
            | SqlType::BigInt { .. },
            Kind::Int { .. },
        ) => true,
        (SqlType::Decimal { .. }, Kind::Dec { .. } | Kind::Int { .. }) => true,
        (SqlType::Date, Kind::Date) => true,
        (SqlType::DateTime { .. } | SqlType::Timestamp { .. }, Kind::DateTime { .. }) => true,
        (SqlType::Time { .. }, Kind::Time { .. }) => true,
        (_, Kind::Str { collation }) => {
            text_collation.is_some() && *collation == text_collation && coll == text_collation
        }
        _ => false,
    }
}
