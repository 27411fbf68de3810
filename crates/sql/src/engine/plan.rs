//! Plans: what a statement does in native operations. From a WHERE clause
//! and the table's keys: a key read, a batch of key reads (`pk IN (…)`), a
//! unique-index read, an ordered-index range, or a full scan; and the part
//! of the condition the data nodes can evaluate (`skarv_client::Filter`).
//! The whole condition is still evaluated in the SQL node on the rows that
//! come back, so a plan only has to be a superset of the answer.

use schema::{Collation, IndexKind, Value};
use skarv_client::{CmpOp as NCmp, Filter};

use super::catalog::{SqlType, TableInfo};
use super::exec::convert::{to_native, Target};
use super::expr::{CmpOp, Ctx, Expr, Func, Val};
use crate::error::SqlResult;

pub mod join;

/// Most key reads one `IN` list turns into (past it: a scan).
pub const KEY_READS_MAX: usize = 4_096;
/// Most equal ranges of an ordered index one `IN` list turns into (each a
/// scan of its own; past it: one range or a full scan).
pub const INDEX_POINTS_MAX: usize = 64;

/// How the rows are found.
#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// Primary-key reads, one per key (key values in key order).
    Keys(Vec<Vec<Value>>),
    /// Reads by a unique index.
    Unique {
        /// The index.
        index: String,
        /// Its values, one list per read.
        keys: Vec<Vec<Value>>,
    },
    /// An ordered-index scan between bounds.
    Range {
        /// The index.
        index: String,
        /// Lower bound and whether inclusive.
        lower: Option<(Vec<Value>, bool)>,
        /// Upper bound.
        upper: Option<(Vec<Value>, bool)>,
        /// SQL positions of the index columns, in order (for ORDER BY).
        columns: Vec<usize>,
        /// Values of a prefix of the index columns to scan one after the
        /// other, each as an equal range (`k IN (…)` on the index), each
        /// listed once: rows come in this order, not the index's. Empty: the bounds above,
        /// which always hold every point, so a reader that ignores the
        /// points still finds every row.
        points: Vec<Vec<Value>>,
    },
    /// Every row.
    Scan,
    /// No row can match.
    Nothing,
}

/// What a condition says about one column.
#[derive(Default, Clone)]
struct Facts {
    eq: Option<Value>,
    any_of: Option<Vec<Value>>,
    lower: Option<(Value, bool)>,
    upper: Option<(Value, bool)>,
}

/// The plan for a WHERE clause over `table` (`cond` over its SQL columns).
pub fn access(
    table: &TableInfo,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Access, Option<Filter>)> {
    access_with(table, cond, ctx, &|_| true)
}

/// A WHERE with its constant parts evaluated once, as MariaDB's optimizer
/// evaluates them before it reads a row: a constant conjunct that holds
/// is dropped (one that does not makes the whole a literal FALSE, which
/// [`access`] reads as no rows), and in a conjunct of ORs a constant
/// disjunct that holds makes the conjunct hold, one that does not is
/// dropped (in a WHERE, NULL OR x filters as x does). The other side of a
/// decided OR is never evaluated, and a constant's warnings come once,
/// not per row (in a strict write they stay warnings: MariaDB's
/// `abort_on_warning` holds only for the rows). With `numbers`, a string
/// literal compared with a number column is also read as a number once
/// ([`super::expr::eval::compared_number`]), as MariaDB caches it, with
/// its warning once (MariaDB reads it at the first row that compares, so
/// a strict write counts that warning as a row's: `Func::WarnOnce`), and
/// one compared with a TIME column as a TIME likewise. Borrowed as it is when
/// there is nothing to fold (the common case: nothing is copied).
pub fn fold_constants<'e>(
    table: &TableInfo,
    cond: Option<&'e Expr>,
    numbers: bool,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<std::borrow::Cow<'e, Expr>>> {
    fold_constants_with(table, cond, numbers, numbers, ctx)
}

/// [`fold_constants`] with `numbers` of a single-table UPDATE's or
/// DELETE's WHERE: a comparison's constant side that is no literal is not
/// cached ([`cached_side`]): MariaDB's single-table UPDATE and DELETE run
/// no join optimizer, and evaluate it per row.
pub fn fold_row_constants<'e>(
    table: &TableInfo,
    cond: Option<&'e Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<std::borrow::Cow<'e, Expr>>> {
    fold_constants_with(table, cond, true, false, ctx)
}

fn fold_constants_with<'e>(
    table: &TableInfo,
    cond: Option<&'e Expr>,
    numbers: bool,
    cache: bool,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<std::borrow::Cow<'e, Expr>>> {
    use std::borrow::Cow;
    let Some(cond) = cond else {
        return Ok(None);
    };
    // Every string compared with a BIGINT column (UNSIGNED or not) first: MariaDB
    // converts them when it prepares the statement, before its optimizer
    // drops an OR's side that a TRUE beside it makes moot (`'fig' = u OR
    // 1` warns: DML seed 48 with --nulls).
    if let Cow::Owned(read) = read_bigint_texts(table, cond, ctx) {
        let folded = fold_constants_with(table, Some(&read), numbers, cache, ctx)?;
        return Ok(Some(Cow::Owned(
            folded.map_or(read.clone(), Cow::into_owned),
        )));
    }
    if !has_constant_part(table, numbers, cache, cond) {
        return Ok(Some(Cow::Borrowed(cond)));
    }
    if cache {
        fire_eager(table, cond, ctx);
    }
    let mut kept: Vec<Expr> = Vec::new();
    for c in cond.conjuncts() {
        let mode = FoldMode {
            numbers,
            cache,
            under_xor: false,
            exact: false,
        };
        match fold_disjuncts(table, mode, c, ctx)? {
            Folded::True => {}
            Folded::False | Folded::Null => return Ok(Some(Cow::Owned(Expr::Lit(Val::Int(0))))),
            Folded::Expr(e) => kept.push(e),
        }
    }
    Ok(Expr::and_of(kept).map(Cow::Owned))
}

/// [`fold_constants`] of a SELECT's WHERE (`numbers`). A WHERE that is
/// constant as a whole is evaluated by the rows' rules: its warning is
/// not the planning's, so it fails an INSERT … SELECT in strict mode, as
/// MariaDB's (`WHERE 'apple' = -1` is 1292 there, while a constant
/// conjunct among others only warns).
pub fn fold_select_constants<'e>(
    table: &TableInfo,
    cond: Option<&'e Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<std::borrow::Cow<'e, Expr>>> {
    match cond {
        // Not an AND or OR of constants, which MariaDB's optimizer folds
        // as it folds constant conjuncts, its warnings the planning's
        // (`WHERE 'fig' >= 10 AND 1` only warns: DML seed 467).
        Some(c) if c.is_constant() && !matches!(c, Expr::And(..) | Expr::Or(..)) => {
            let v = c.eval(&[], ctx)?;
            Ok(match ctx.truth(&v) {
                Some(true) => None,
                _ => Some(std::borrow::Cow::Owned(Expr::Lit(Val::Int(0)))),
            })
        }
        Some(c) => {
            // A point select's one conjunct needs no list of them.
            let listed;
            let conjuncts: &[&Expr] = if matches!(c, Expr::And(..)) {
                listed = c.conjuncts();
                &listed
            } else {
                std::slice::from_ref(&c)
            };
            // `col = (SELECT …)` of a subquery that gives NULL: MariaDB
            // evaluates it while it optimizes and finds the WHERE
            // impossible before it reads a row, so no other conjunct is
            // tested (nor warns). It reads a written `col = NULL` per row;
            // lowered, the two are one here (docs/sql.md).
            if conjuncts.iter().any(|x| equated_null(x)) {
                return Ok(Some(std::borrow::Cow::Owned(Expr::Lit(Val::Int(0)))));
            }
            // Reordered as written: folding reads `a = '5'` as `a = 5`,
            // which MariaDB does not move.
            let rewritten = match key_text_read_first(table, conjuncts, ctx) {
                Some(read) => Some(equalities_first(table, &read.conjuncts()).unwrap_or(read)),
                None => equalities_first(table, conjuncts),
            };
            match rewritten {
                None => fold_constants(table, cond, true, ctx),
                Some(rewritten) => Ok(fold_constants(table, Some(&rewritten), true, ctx)?
                    .map(|c| std::borrow::Cow::Owned(c.into_owned()))),
            }
        }
        None => Ok(None),
    }
}

/// A SELECT's WHERE whose first conjunct equates a string, written
/// first, with a one-column numeric primary key (`'x' = id`), with the
/// string read now: MariaDB reads it while it plans the key's read, so
/// its warning is given whether or not a row is read, and is a row's (a
/// strict INSERT … SELECT fails on it, IGNORE warns). Written after the
/// key (`id = 'x'`), or after another conjunct, MariaDB reads it at the
/// first row compared (`fold_constants`). None: not such a WHERE.
fn key_text_read_first(table: &TableInfo, conjuncts: &[&Expr], ctx: &mut Ctx<'_>) -> Option<Expr> {
    let (first, rest) = conjuncts.split_first()?;
    let Expr::Cmp(CmpOp::Eq, a, b, collation) = first else {
        return None;
    };
    let (Some(text), Expr::Col(c)) = (a.text_literal(), &**b) else {
        return None;
    };
    let [key] = table.native.def().primary_key.as_slice() else {
        return None;
    };
    let ty = &table.columns.get(*c)?.ty;
    if table.sql_column(*key) != Some(*c) || !ty.is_number() {
        return None;
    }
    let number = super::expr::eval::compared_number(text, reads_as_integer(ty), ctx);
    let read = Expr::Cmp(
        CmpOp::Eq,
        Box::new(Expr::Lit(number)),
        b.clone(),
        *collation,
    );
    Expr::and_of(std::iter::once(read).chain(rest.iter().map(|e| (*e).clone())))
}

/// A SELECT's WHERE with its conjuncts that equate a column with a
/// constant of its own kind (`a = 5`, `b = 'q'`, `a = (SELECT MAX(x) …)`)
/// moved first, in their order, as MariaDB's equality propagation tests
/// them before the rest: `WHERE b < a AND a = 5` reads no `b` of a row
/// whose `a` is not 5 (nor warns of one). Not `a = '5'` (of another
/// kind), nor in UPDATE and DELETE, which MariaDB tests as written.
/// None: none moves.
fn equalities_first(table: &TableInfo, conjuncts: &[&Expr]) -> Option<Expr> {
    let first = |e: &Expr| propagated_equality(table, e);
    let later = conjuncts.iter().position(|c| !first(c))?;
    if !conjuncts[later..].iter().any(|c| first(c)) {
        return None;
    }
    let (equalities, rest): (Vec<&Expr>, Vec<&Expr>) =
        conjuncts.iter().copied().partition(|c| first(c));
    Expr::and_of(equalities.into_iter().chain(rest).cloned())
}

/// An OR whose arms are ANDs with their equalities of a column and a
/// constant moved first ([`equalities_first`]), as MariaDB's equality
/// propagation orders each AND level: `b = 'x' OR (b >= 4 AND f = 9)`
/// reads no b as a number where f is not 9 (DML seed 326). None: no arm
/// changes.
fn arm_equalities_first(table: &TableInfo, e: &Expr) -> Option<Expr> {
    if !matches!(e, Expr::Or(..)) {
        return None;
    }
    let mut arms = Vec::new();
    or_arms(e, &mut arms);
    let mut changed = false;
    let arms: Vec<Expr> = arms
        .into_iter()
        .map(|arm| {
            let moved = matches!(arm, Expr::And(..))
                .then(|| equalities_first(table, &arm.conjuncts()))
                .flatten();
            changed |= moved.is_some();
            moved.unwrap_or_else(|| arm.clone())
        })
        .collect();
    changed.then(|| {
        arms.into_iter()
            .reduce(|a, b| Expr::Or(Box::new(a), Box::new(b)))
            .unwrap_or(Expr::Lit(Val::Int(0)))
    })
}

/// Whether `e` is `col = constant` of the column's own kind, a number
/// with a number or a string with a string, or a string with a BIGINT
/// column ([`equalities_first`]).
fn propagated_equality(table: &TableInfo, e: &Expr) -> bool {
    let Expr::Cmp(CmpOp::Eq, a, b, _) = e else {
        return false;
    };
    let (col, constant) = match (&**a, &**b) {
        (Expr::Col(c), k) | (k, Expr::Col(c)) if k.is_constant() => (*c, k),
        _ => return false,
    };
    let Some(ty) = table.columns.get(col).map(|c| &c.ty) else {
        return false;
    };
    let string_column = matches!(ty, SqlType::Char { .. } | SqlType::VarChar { .. });
    let kind = match constant {
        Expr::Lit(Val::Null) => return false,
        Expr::Lit(Val::Str(_)) => Some(true),
        Expr::Lit(Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_)) | Expr::Arith(..) => {
            Some(false)
        }
        // (An uncorrelated subquery is its value's literal by now.)
        _ => None,
    };
    match kind {
        // A string equated with a BIGINT column is read as an integer
        // once (MariaDB's `convert_const_to_int`, for a BIGINT only): an
        // equality of numbers; with an INT it is not (`a = '5'` stays).
        Some(true) => string_column || matches!(ty, SqlType::BigInt { .. }),
        Some(false) => ty.is_number(),
        None => false,
    }
}

/// Whether `e` is `col = NULL`: an uncorrelated subquery that gives
/// NULL is that literal once lowered.
fn equated_null(e: &Expr) -> bool {
    let Expr::Cmp(CmpOp::Eq, a, b, _) = e else {
        return false;
    };
    matches!(
        (&**a, &**b),
        (Expr::Col(_), Expr::Lit(Val::Null)) | (Expr::Lit(Val::Null), Expr::Col(_))
    )
}

/// The order comparison true exactly where `op` is false (for values
/// that are not NULL); None for an equality.
fn inverse(op: CmpOp) -> Option<CmpOp> {
    match op {
        CmpOp::Lt => Some(CmpOp::Ge),
        CmpOp::Le => Some(CmpOp::Gt),
        CmpOp::Gt => Some(CmpOp::Le),
        CmpOp::Ge => Some(CmpOp::Lt),
        CmpOp::Eq | CmpOp::Ne | CmpOp::NullSafeEq => None,
    }
}

/// What a conjunct folds to: its truth, known now (SQL's three values),
/// or what is left to evaluate per row.
enum Folded {
    True,
    False,
    Null,
    Expr(Expr),
}

impl Folded {
    fn of_truth(truth: Option<bool>) -> Folded {
        match truth {
            Some(true) => Folded::True,
            Some(false) => Folded::False,
            None => Folded::Null,
        }
    }
}

/// How [`fold_disjuncts`] folds.
#[derive(Clone, Copy)]
struct FoldMode {
    /// A string compared with a number column is read as a number now.
    numbers: bool,
    /// A comparison's constant side that is no literal is evaluated once
    /// ([`cached_side`]).
    cache: bool,
    /// Under an XOR: a constant's warnings are a row's.
    under_xor: bool,
    /// Under NOT or XOR: the fold keeps the three-valued answer, where a
    /// WHERE's own ANDs and ORs need only know when it is true (`x OR
    /// NULL` is `x` there, but `NOT (i > 5 OR NULL)` is NULL, never true).
    exact: bool,
}

/// Whether a conjunct of `e`, or a disjunct of one, is constant, or (with
/// `table`) compares a number column of it with a string literal.
fn has_constant_part(table: &TableInfo, numbers: bool, cache: bool, e: &Expr) -> bool {
    match e {
        Expr::Or(a, b) => {
            has_constant_part(table, numbers, cache, a)
                || has_constant_part(table, numbers, cache, b)
                || (cache && arm_equalities_first(table, e).is_some())
        }
        Expr::And(a, b) => {
            has_constant_part(table, numbers, cache, a)
                || has_constant_part(table, numbers, cache, b)
        }
        Expr::Not(a) if !a.is_constant() => {
            has_constant_part(table, numbers, cache, a)
                || pushed_negation(a).is_some_and(|p| has_constant_part(table, numbers, cache, &p))
        }
        Expr::Xor(a, b) if !(a.is_constant() && b.is_constant()) => {
            has_constant_part(table, numbers, cache, a)
                || has_constant_part(table, numbers, cache, b)
        }
        other => {
            other.is_constant()
                || never_null_test(table, other).is_some()
                || null_on_key(table, other)
                || number_vs_text(table, other).is_some()
                || (numbers
                    && (time_vs_text(table, other)
                        || number_in_texts(table, other).is_some()
                        || temporal_in_numbers(table, other).is_some()
                        || number_between_texts(table, other).is_some()
                        || (cache && cached_side(other).is_some())))
                || (cache && has_eager(other))
        }
    }
}

/// Whether `e` holds a constant read once that a SELECT's or a join's
/// planning reads ([`fire_eager`]).
fn has_eager(e: &Expr) -> bool {
    let mut found = false;
    e.each(&mut |x| {
        found |= matches!(x, Expr::Func(super::expr::Func::WarnOnce, args) if args.len() == 5);
    });
    found
}

/// Of a comparison of a column expression with a constant that is no
/// literal (`a = CAST('x' AS SIGNED)`, `d < DATE('2024-01-01')`), the
/// constant side: 0 left, 1 right. MariaDB evaluates such a constant
/// once and caches it (`cache_const_expr`), its warnings once. Not one
/// with a placeholder (a prepared point read's `id = ?` stays as it is).
fn cached_side(e: &Expr) -> Option<usize> {
    let Expr::Cmp(_, a, b, _) = e else {
        return None;
    };
    // A column or literal side (the common case) needs no walk.
    let cacheable = |x: &Expr| {
        if matches!(x, Expr::Lit(_) | Expr::Col(_) | Expr::Param(_)) || !x.is_constant() {
            return false;
        }
        let mut param = false;
        x.each(&mut |y| param |= matches!(y, Expr::Param(_)));
        !param
    };
    match (cacheable(a), cacheable(b)) {
        (true, false) if !b.is_constant() => Some(0),
        (false, true) if !a.is_constant() => Some(1),
        _ => None,
    }
}

/// `NOT e` by De Morgan's laws when `e` is an AND or an OR (None else):
/// each part negated, a NOT taken away, an IS NULL made IS NOT NULL and
/// back; equal in three-valued logic.
pub(crate) fn pushed_negation(e: &Expr) -> Option<Expr> {
    fn negated(e: &Expr) -> Expr {
        match e {
            Expr::Not(x) => (**x).clone(),
            Expr::IsNull(x, not) => Expr::IsNull(x.clone(), !not),
            other => pushed_negation(other).unwrap_or_else(|| Expr::Not(Box::new(other.clone()))),
        }
    }
    match e {
        Expr::And(a, b) => Some(Expr::Or(Box::new(negated(a)), Box::new(negated(b)))),
        Expr::Or(a, b) => Some(Expr::And(Box::new(negated(a)), Box::new(negated(b)))),
        _ => None,
    }
}

/// `col IS NULL` of a column that is never NULL: false. MariaDB folds it
/// before the rows, so an OR of it and a key's condition reads the key's
/// range only. Not its IS NOT NULL, which MariaDB tests per row, after
/// the disjuncts before it (`s IN ('x', 3) OR id IS NOT NULL` warns of
/// each s; DML seed 157). Not a DATE or DATETIME: IS NULL finds a NOT
/// NULL one's zero date.
fn never_null_test(table: &TableInfo, e: &Expr) -> Option<bool> {
    let Expr::IsNull(x, false) = e else {
        return None;
    };
    let Expr::Col(c) = **x else {
        return None;
    };
    let column = table.columns.get(c)?;
    let zero_date = matches!(column.ty, SqlType::Date | SqlType::DateTime { .. });
    (!column.nullable && !zero_date).then_some(false)
}

/// A comparison of a number column with a string literal: the column's
/// place, whether the literal is read as a DECIMAL (against an integer
/// or DECIMAL column: MariaDB compares a DECIMAL that is no constant with
/// a constant string as DECIMALs, `dd = '1.50000000000000000001'` false
/// of 1.50; an IN's or BETWEEN's as DOUBLEs), and the literal's bytes.
fn number_vs_text<'e>(table: &TableInfo, e: &'e Expr) -> Option<(usize, bool, &'e [u8])> {
    let Expr::Cmp(_, a, b, _) = e else {
        return None;
    };
    let (col, text) = match (&**a, &**b) {
        (Expr::Col(c), t) | (t, Expr::Col(c)) if t.text_literal().is_some() => {
            (*c, t.text_literal()?)
        }
        _ => return None,
    };
    let ty = &table.columns.get(col)?.ty;
    let decimal = reads_as_integer(ty) || matches!(ty, SqlType::Decimal { .. });
    (ty.is_number() || matches!(ty, SqlType::Bit { .. } | SqlType::Year))
        .then_some((col, decimal, text))
}

/// Whether a string compared with a column of type `ty` is read as for
/// an integer (a DECIMAL), not as a DOUBLE.
fn reads_as_integer(ty: &SqlType) -> bool {
    !matches!(
        ty,
        SqlType::Float { .. } | SqlType::Double { .. } | SqlType::Decimal { .. }
    )
}

/// A string literal of a comparison with a number column, read as that
/// comparison reads it ([`super::expr::eval::compared_number`]); any
/// other expression as it is.
fn text_as_number(e: &Expr, integer: bool, ctx: &mut Ctx<'_>) -> Expr {
    match e.text_literal() {
        Some(t) => Expr::Lit(super::expr::eval::compared_number(t, integer, ctx)),
        None => e.clone(),
    }
}

/// `col IN (…)` of a number column with a list of string literals only:
/// whether they are read as for an integer. (A list that mixes in
/// numbers MariaDB compares item by item, per row.)
fn number_in_texts(table: &TableInfo, e: &Expr) -> Option<bool> {
    let Expr::In(x, list, ..) = e else {
        return None;
    };
    let Expr::Col(col) = **x else {
        return None;
    };
    let ty = &table.columns.get(col)?.ty;
    let texts = list.iter().all(|i| i.text_literal().is_some());
    (texts && ty.is_number()).then(|| reads_as_integer(ty))
}

/// `col IN (…)` of a DATE, DATETIME or TIMESTAMP column with numbers
/// and NULLs only: whether the column has a time.
fn temporal_in_numbers(table: &TableInfo, e: &Expr) -> Option<bool> {
    let Expr::In(x, list, ..) = e else {
        return None;
    };
    let Expr::Col(col) = **x else {
        return None;
    };
    let with_time = match table.columns.get(col)?.ty {
        SqlType::Date => false,
        SqlType::DateTime { .. } | SqlType::Timestamp { .. } => true,
        _ => return None,
    };
    let numbers = list.iter().all(|i| {
        matches!(
            i,
            Expr::Lit(Val::Null | Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_))
        )
    });
    numbers.then_some(with_time)
}

/// `col BETWEEN lo AND hi` of a number column with a string literal
/// bound: whether the bounds are read as for an integer (DECIMAL).
/// MariaDB aggregates the three types pairwise: an integer and a string
/// compare as DECIMAL, that and a second string as DOUBLE.
fn number_between_texts(table: &TableInfo, e: &Expr) -> Option<bool> {
    let Expr::Between(x, lo, hi, ..) = e else {
        return None;
    };
    let Expr::Col(col) = **x else {
        return None;
    };
    let ty = &table.columns.get(col)?.ty;
    let text = |b: &Expr| b.text_literal().is_some();
    ((text(lo) || text(hi)) && ty.is_number())
        .then(|| reads_as_integer(ty) && !(text(lo) && text(hi)))
}

/// Whether `e` compares a TIME column with string literals (`=`, `IN`,
/// `BETWEEN`).
fn time_vs_text(table: &TableInfo, e: &Expr) -> bool {
    time_column_vs_text(e, &|c| {
        matches!(
            table.columns.get(c).map(|c| &c.ty),
            Some(SqlType::Time { .. })
        )
    })
}

/// [`time_vs_text`] with `is_time` telling a TIME column (by position).
fn time_column_vs_text(e: &Expr, is_time: &dyn Fn(usize) -> bool) -> bool {
    let is_time = |c: &Expr| matches!(c, Expr::Col(c) if is_time(*c));
    let text = |e: &Expr| e.text_literal().is_some();
    match e {
        Expr::Cmp(_, a, b, _) => (is_time(a) && text(b)) || (text(a) && is_time(b)),
        Expr::In(a, list, ..) => is_time(a) && list.iter().any(text),
        Expr::Between(a, lo, hi, ..) => is_time(a) && (text(lo) || text(hi)),
        _ => false,
    }
}

/// Whether a condition's ANDs and ORs hold a constant that [`fire_eager`]
/// reads before the rows (`is_time` tells a TIME column by position): an
/// AND or OR whose other side decides it keeps such a side for the fold
/// to read (`d = 'x' AND 0` warns, as MariaDB builds its equalities
/// before it removes what a constant decides).
pub(crate) fn reads_before_rows(e: &Expr, is_time: &dyn Fn(usize) -> bool) -> bool {
    let reads = |x: &Expr| has_eager(x) || time_column_vs_text(x, is_time);
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => {
            reads_before_rows(a, is_time) || reads_before_rows(b, is_time)
        }
        leaf if read_before_rows(leaf) => reads(leaf),
        leaf => {
            let mut found = false;
            leaf.each(&mut |x| {
                found |= matches!(x, Expr::In(_, list, ..) if list.len() > 1) && reads(x)
            });
            found
        }
    }
}

/// `e` ([`time_vs_text`]) with its string literals read as TIMEs, once:
/// their warnings given already when `eager` ([`fire_eager`]), else at
/// the first row compared.
fn time_texts_read(e: &Expr, eager: bool, ctx: &mut Ctx<'_>) -> Expr {
    let mut read = |e: &Expr| match e.text_literal() {
        Some(t) => {
            let before = ctx.warnings.len();
            let time = Expr::Lit(Val::Time(super::expr::compared_time(t, ctx)));
            if eager {
                ctx.warnings.truncate(before);
                time
            } else {
                warned_once(time, ctx, before)
            }
        }
        None => e.clone(),
    };
    match e {
        Expr::Cmp(op, a, b, c) => Expr::Cmp(*op, Box::new(read(a)), Box::new(read(b)), *c),
        Expr::In(a, list, neg, c, from) => {
            Expr::In(a.clone(), list.iter().map(read).collect(), *neg, *c, *from)
        }
        Expr::Between(a, lo, hi, neg, c) => {
            Expr::Between(a.clone(), Box::new(read(lo)), Box::new(read(hi)), *neg, *c)
        }
        other => other.clone(),
    }
}

/// Marks the warnings `ctx` got since `before` as the planning's
/// (`eval::PLANNED_BIT`).
fn planned_since(ctx: &mut Ctx<'_>, before: usize) {
    for (code, _) in ctx.warnings.iter_mut().skip(before) {
        *code |= super::expr::eval::PLANNED_BIT;
    }
}

/// Marks the warnings `ctx` got since `before` as those of converting a
/// constant when the statement is prepared (`eval::PREPARED_BIT`).
fn prepared_since(ctx: &mut Ctx<'_>, before: usize) {
    for (code, _) in ctx.warnings.iter_mut().skip(before) {
        *code |= super::expr::eval::PLANNED_BIT | super::expr::eval::PREPARED_BIT;
    }
}

/// An UPDATE's SET value with each string literal compared with a BIGINT
/// column read as its number now, its warning the planning's:
/// MariaDB converts such a constant when it prepares the statement, so a
/// strict UPDATE only warns (`SET e = IF('x_y' < u, …)`; DML seed 172),
/// as in a WHERE ([`fold_constants`]). Borrowed when there is none.
pub fn read_bigint_texts<'e>(
    table: &TableInfo,
    e: &'e Expr,
    ctx: &mut Ctx<'_>,
) -> std::borrow::Cow<'e, Expr> {
    let mut found = false;
    e.each(&mut |x| found |= bigint_text(table, x).is_some());
    if !found {
        return std::borrow::Cow::Borrowed(e);
    }
    fn read(table: &TableInfo, e: &Expr, ctx: &mut Ctx<'_>) -> Expr {
        match bigint_text(table, e) {
            Some((_, integer, text)) => {
                let before = ctx.warnings.len();
                let number = Expr::Lit(super::expr::eval::compared_number(text, integer, ctx));
                prepared_since(ctx, before);
                text_replaced(e, number)
            }
            None => e.map_children(&mut |x| read(table, x, ctx)),
        }
    }
    std::borrow::Cow::Owned(read(table, e, ctx))
}

/// [`number_vs_text`] of a BIGINT column, UNSIGNED or not.
fn bigint_text<'e>(table: &TableInfo, e: &'e Expr) -> Option<(usize, bool, &'e [u8])> {
    number_vs_text(table, e).filter(|(col, ..)| is_bigint(table, *col))
}

/// Whether column `col` of `table` is a BIGINT, UNSIGNED or not: a string
/// compared with one is read when MariaDB prepares the statement (its
/// `convert_const_to_int`, which takes BIGINT columns), not at the first
/// row compared as against any other number column (`i = '6x'` of a
/// BIGINT i only warns in a strict UPDATE, of an INT fails).
fn is_bigint(table: &TableInfo, col: usize) -> bool {
    matches!(
        table.columns.get(col).map(|c| &c.ty),
        Some(SqlType::BigInt { .. })
    )
}

/// A comparison of a column with a string literal ([`number_vs_text`])
/// with the literal replaced by `number`, the column's side kept.
fn text_replaced(e: &Expr, number: Expr) -> Expr {
    let Expr::Cmp(op, a, b, c) = e else {
        unreachable!("number_vs_text matches only a comparison");
    };
    let (a, b) = match (&**a, &**b) {
        (Expr::Col(_), _) => (a.clone(), Box::new(number)),
        _ => (Box::new(number), b.clone()),
    };
    Expr::Cmp(*op, a, b, *c)
}

/// Gives now the warnings of `e`'s constants read once that MariaDB's
/// optimizer reads before any row (`expr::warn_once_eager`), as a SELECT
/// or a join plans its condition: from an empty table too, and before a
/// strict multi-table UPDATE reads a row (DML seeds 294, 296, 311).
/// Only those [`read_before_rows`] says the optimizer reaches, and those
/// of a TIME column's (read again, quietly, by [`time_texts_read`]), once
/// per condition: before a constant conjunct folds the WHERE to false,
/// which MariaDB finds after it has built its equalities (`tm = 'x' AND
/// 0` warns).
fn fire_eager(table: &TableInfo, e: &Expr, ctx: &mut Ctx<'_>) {
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => {
            fire_eager(table, a, ctx);
            fire_eager(table, b, ctx);
        }
        leaf if read_before_rows(leaf) => {
            fire_eager_in(leaf, ctx);
            if time_vs_text(table, leaf) {
                read_time_texts(leaf, ctx);
            }
        }
        leaf => leaf.each(&mut |x| {
            if matches!(x, Expr::In(_, list, ..) if list.len() > 1) {
                fire_eager_in(x, ctx);
                if time_vs_text(table, x) {
                    read_time_texts(x, ctx);
                }
            }
        }),
    }
}

/// Whether MariaDB reads the constants of `leaf`, a part of a condition's
/// ANDs and ORs, before any row: an equality's, as it builds its
/// multiple equalities (`build_equal_items`), and an IN list's of two or
/// more items, as it prepares the IN, wherever it is (an IN of one is an
/// equality, NOT IN of one an inequality). Any other comparison (`d >
/// 'x'`, `NOT d = 'x'`, BETWEEN, an IF's) reads them at the first row
/// compared, so an empty table gives no warning (DML seed 51 with NULLs:
/// a strict multi-table UPDATE on `tm > 'x'` reading no row succeeds).
fn read_before_rows(leaf: &Expr) -> bool {
    match leaf {
        Expr::Cmp(op, ..) => *op == CmpOp::Eq,
        Expr::In(_, list, negated, ..) => list.len() > 1 || !negated,
        _ => false,
    }
}

/// The warnings of `e`'s string literals read as TIMEs ([`time_vs_text`]).
fn read_time_texts(e: &Expr, ctx: &mut Ctx<'_>) {
    e.each(&mut |x| {
        if let Some(text) = x.text_literal() {
            super::expr::compared_time(text, ctx);
        }
    });
}

/// [`fire_eager`] of one part of a condition, wherever in it.
fn fire_eager_in(e: &Expr, ctx: &mut Ctx<'_>) {
    e.each(&mut |x| {
        if let Expr::Func(super::expr::Func::WarnOnce, args) = x {
            if let [_, Expr::Lit(Val::UInt(site)), Expr::Lit(Val::UInt(code)), Expr::Lit(message), _] =
                args.as_slice()
            {
                if ctx.env.warned_once.first(*site) {
                    ctx.warnings.push((*code as u16, message.to_text()));
                }
            }
        }
    });
}

/// `value`, read from a literal, with the warnings `ctx` got since
/// `before` moved into it: they wait for its first evaluation
/// (`Func::WarnOnce`), as MariaDB gives them at the first row compared.
fn warned_once(mut value: Expr, ctx: &mut Ctx<'_>, before: usize) -> Expr {
    for (code, message) in ctx.warnings.split_off(before.min(ctx.warnings.len())) {
        value = super::expr::warn_once(value, code, message);
    }
    value
}

fn fold_disjuncts(
    table: &TableInfo,
    mode: FoldMode,
    e: &Expr,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Folded> {
    let FoldMode {
        numbers,
        cache,
        under_xor,
        exact,
    } = mode;
    if cache {
        if let Some(reordered) = arm_equalities_first(table, e) {
            return fold_disjuncts(table, mode, &reordered, ctx);
        }
    }
    // Under XOR a constant is a row's, read once at the first row:
    // MariaDB's optimizer folds the constants of a WHERE's ANDs and ORs
    // only, and an XOR's parts are evaluated per row (CREATE … SELECT
    // seed 10: `y REGEXP … XOR ((6 = 5 XOR 'grape ' < 2) AND …)` fails
    // strict there).
    if under_xor && e.is_constant() {
        let before = ctx.warnings.len();
        let value = e.eval(&[], ctx)?;
        return Ok(Folded::Expr(warned_once(Expr::Lit(value), ctx, before)));
    }
    if e.is_constant() {
        let before = ctx.warnings.len();
        let truth = {
            let v = e.eval(&[], ctx)?;
            ctx.truth(&v)
        };
        // A planning warning, one strict mode does not make an INSERT …
        // SELECT's error: MariaDB's of a constant comparison; of a
        // constant IN list it fails the statement.
        let mut has_in = false;
        e.each(&mut |x| has_in |= matches!(x, Expr::In(..)));
        if !has_in {
            planned_since(ctx, before);
        }
        return Ok(Folded::of_truth(truth));
    }
    if let Some(truth) = never_null_test(table, e) {
        return Ok(Folded::of_truth(Some(truth)));
    }
    // A key's column against NULL: NULL, found before any row where only
    // truth counts (CREATE … SELECT seed 9 with --nulls: `t1_id > NULL OR
    // NOT (NULL = 1)` made MariaDB read no row, so `y IN (1, NULL, 3)`
    // never warned there).
    if !exact && null_on_key(table, e) {
        return Ok(Folded::Null);
    }
    // A string compared with a number column is read as a number once, as
    // MariaDB caches it (its warning once, not per row).
    // Against a BIGINT MariaDB converts it before the rows, its
    // warning never a row's (a strict write only warns): read in the
    // first fold, before the rows' warnings begin.
    let found = number_vs_text(table, e).filter(|(col, ..)| numbers || is_bigint(table, *col));
    if let Some((col, integer, text)) = found {
        let before = ctx.warnings.len();
        let number = Expr::Lit(super::expr::eval::compared_number(text, integer, ctx));
        let number = if is_bigint(table, col) {
            prepared_since(ctx, before);
            number
        } else {
            warned_once(number, ctx, before)
        };
        return Ok(Folded::Expr(text_replaced(e, number)));
    }
    // An IN list of strings against a number column is read once, as
    // MariaDB's IN reads such a list when it is set up: its warnings are
    // the planning's, never a row's (a strict INSERT … SELECT or
    // single-table write only warns; a strict multi-table UPDATE, which
    // MariaDB makes strict before it sets the list up, fails).
    if let (true, Some(integer), Expr::In(x, list, negated, c, from)) =
        (numbers, number_in_texts(table, e), e)
    {
        let before = ctx.warnings.len();
        let items = list
            .iter()
            .map(|i| text_as_number(i, integer, ctx))
            .collect();
        planned_since(ctx, before);
        return Ok(Folded::Expr(Expr::In(
            x.clone(),
            items,
            *negated,
            *c,
            *from,
        )));
    }
    // An IN list of numbers (and NULLs) against a DATE or DATETIME column
    // is read as dates once, as MariaDB's IN reads it when it prepares
    // the statement: its warnings never a row's (a strict INSERT …
    // SELECT only warns), given with no row read too. When no item is a
    // date, 0 or NULL MariaDB compares the list per row as well (`d IN
    // (1, 3)` fails a strict INSERT … SELECT there, as here).
    if let (true, Some(with_time), Expr::In(x, list, negated, c, from)) =
        (numbers, temporal_in_numbers(table, e), e)
    {
        let before = ctx.warnings.len();
        let (items, kept) = super::expr::temporal_list(list, |v| {
            let (t, date) = super::expr::eval::temporal_of_number(v, with_time, ctx);
            (Expr::Lit(t), date)
        });
        // The planning's, as a list of strings against a number column.
        planned_since(ctx, before);
        if kept {
            return Ok(Folded::Expr(Expr::In(
                x.clone(),
                items,
                *negated,
                *c,
                *from,
            )));
        }
    }
    // A BETWEEN's string bounds likewise, each with its warning at the
    // first row compared (a key's range reads them silently: `silent`).
    if let (true, Some(integer), Expr::Between(x, lo, hi, negated, c)) =
        (numbers, number_between_texts(table, e), e)
    {
        let mut read = |b: &Expr| {
            let before = ctx.warnings.len();
            let number = text_as_number(b, integer, ctx);
            warned_once(number, ctx, before)
        };
        let (lo, hi) = (read(lo), read(hi));
        return Ok(Folded::Expr(Expr::Between(
            x.clone(),
            Box::new(lo),
            Box::new(hi),
            *negated,
            *c,
        )));
    }
    // A comparison's constant side that is no literal is evaluated once,
    // its warnings at the first row compared (`Func::WarnOnce`); one that
    // fails is left to fail at a row, as MariaDB's (no row, no error).
    if let (true, Some(side), Expr::Cmp(op, a, b, c)) = (cache, cached_side(e), e) {
        let constant = if side == 0 { a } else { b };
        let before = ctx.warnings.len();
        match constant.eval(&[], ctx) {
            Ok(v) => {
                // Text that came quietly, against a number column: read as
                // that literal would be (once, as a number), not as text
                // per row (`CONCAT('5', 'x') >= id` warns once, as
                // MariaDB's: CREATE … SELECT seed 47).
                // Not an outer row's BIT or ENUM made text, read per row
                // as MariaDB reads an outer reference.
                let mut outer = false;
                constant.each(&mut |x| {
                    outer |= matches!(
                        x,
                        Expr::Func(Func::OuterBit | Func::BitBytes | Func::OuterMember, _)
                    );
                });
                if matches!(v, Val::Str(_)) && ctx.warnings.len() == before && !outer {
                    let literal = Expr::Lit(v.clone());
                    let read = match side {
                        0 => Expr::Cmp(*op, Box::new(literal), b.clone(), *c),
                        _ => Expr::Cmp(*op, a.clone(), Box::new(literal), *c),
                    };
                    if number_vs_text(table, &read).is_some() {
                        return fold_disjuncts(table, mode, &read, ctx);
                    }
                }
                let cached = Box::new(warned_once(Expr::Lit(v), ctx, before));
                let (a, b) = if side == 0 {
                    (cached, b.clone())
                } else {
                    (a.clone(), cached)
                };
                return Ok(Folded::Expr(Expr::Cmp(*op, a, b, *c)));
            }
            Err(_) => ctx.warnings.truncate(before),
        }
    }
    // So are those compared with a TIME column, as TIMEs (their warnings
    // the planning's where MariaDB's optimizer reads them: `fire_eager`).
    if numbers && time_vs_text(table, e) {
        // Not under NOT or XOR (`exact`): their parts are no AND's or
        // OR's, which MariaDB's optimizer reads before the rows; an IN
        // list of two or more anywhere, as MariaDB prepares it.
        let in_list = matches!(e, Expr::In(_, list, ..) if list.len() > 1);
        let eager = cache && (in_list || (!exact && read_before_rows(e)));
        return Ok(Folded::Expr(time_texts_read(e, eager, ctx)));
    }
    // Under XOR too, each side as it folds (one that is not true is kept
    // as it was: false and NULL differ there).
    if let Expr::Xor(a, b) = e {
        let mut side = |x: &Expr| -> SqlResult<Expr> {
            // A constant side is read once, at the first row: MariaDB
            // folds no XOR (it is no AND or OR) before the rows, so its
            // warning is a row's, and a strict UPDATE fails on it (DML
            // seed 133: `EXISTS (…) XOR 'Banana' < 9`).
            if x.is_constant() {
                let before = ctx.warnings.len();
                let value = x.eval(&[], ctx)?;
                return Ok(warned_once(Expr::Lit(value), ctx, before));
            }
            let mode = FoldMode {
                under_xor: true,
                exact: true,
                ..mode
            };
            Ok(match fold_disjuncts(table, mode, x, ctx)? {
                Folded::True => Expr::Lit(Val::Int(1)),
                Folded::False => Expr::Lit(Val::Int(0)),
                Folded::Null => Expr::Lit(Val::Null),
                Folded::Expr(x) => x,
            })
        };
        let (a, b) = (side(a)?, side(b)?);
        return Ok(Folded::Expr(Expr::Xor(Box::new(a), Box::new(b))));
    }
    // Under NOT too (`NOT ('date' = f)` reads 'date' before the rows).
    if let Expr::Not(inner) = e {
        // NOT of an AND or OR by De Morgan's laws first, as MariaDB's parser
        // pushes it down (`negate_expression`): `NOT (b < -3 OR id IS NOT
        // NULL)` is `NOT b < -3 AND id IS NULL`, false before the rows of
        // a NOT NULL id; `NOT (b IS NULL AND id IS NULL)` is `b IS NOT
        // NULL OR id IS NOT NULL`, tested per row (CREATE … SELECT seed 41).
        if let Some(pushed) = pushed_negation(inner) {
            return fold_disjuncts(table, mode, &pushed, ctx);
        }
        // `NOT (c IS NULL)` of a NOT NULL column is `c IS NOT NULL`,
        // which MariaDB tests per row (above).
        if never_null_test(table, inner).is_some() {
            return Ok(Folded::Expr(e.clone()));
        }
        let mode = FoldMode {
            exact: true,
            ..mode
        };
        return Ok(match fold_disjuncts(table, mode, inner, ctx)? {
            Folded::True => Folded::False,
            Folded::False => Folded::True,
            Folded::Null => Folded::Null,
            // NOT of an order comparison is the opposite one (NULL either
            // way), which a key's range can use, as MariaDB's range
            // optimizer does: `NOT ('Banana' < id)` reads `id <= 0` only,
            // and no row there warns of 'Banana' (DML seed 144).
            Folded::Expr(Expr::Cmp(op, a, b, c)) => Folded::Expr(match inverse(op) {
                Some(opposite) => Expr::Cmp(opposite, a, b, c),
                None => Expr::Not(Box::new(Expr::Cmp(op, a, b, c))),
            }),
            Folded::Expr(inner) => Folded::Expr(Expr::Not(Box::new(inner))),
        });
    }
    // An AND inside an OR, conjunct by conjunct as a WHERE's are
    // (`b = 'x' OR (f = '9x' AND …)` reads '9x' once, as MariaDB's).
    if let Expr::And(..) = e {
        let mut kept = Vec::new();
        let mut null = false;
        for c in e.conjuncts() {
            match fold_disjuncts(table, mode, c, ctx)? {
                Folded::True => {}
                // Under XOR the AND is a row's: the conjuncts before the
                // false one are evaluated first, their warnings with them
                // (`id < '2024-02-29' AND id IS NULL` of a NOT NULL id
                // warns per row: CREATE … SELECT seed 41).
                Folded::False if under_xor && !kept.is_empty() => {
                    kept.push(Expr::Lit(Val::Int(0)));
                    return Ok(Expr::and_of(kept).map_or(Folded::False, Folded::Expr));
                }
                Folded::False => return Ok(Folded::False),
                // Not true: all a WHERE's own AND needs to know.
                Folded::Null if !exact => return Ok(Folded::Null),
                Folded::Null => null = true,
                Folded::Expr(x) => kept.push(x),
            }
        }
        if null {
            if kept.is_empty() {
                return Ok(Folded::Null);
            }
            // FALSE where another conjunct is, else NULL: per row.
            kept.push(Expr::Lit(Val::Null));
        }
        return Ok(Expr::and_of(kept).map_or(Folded::True, Folded::Expr));
    }
    let Expr::Or(a, b) = e else {
        return Ok(Folded::Expr(e.clone()));
    };
    // `x OR NULL` is TRUE where x is, else NULL: kept whole where the
    // answer must be exact, x alone where only TRUE counts.
    let or_null = |x: Expr| match exact {
        true => Folded::Expr(Expr::Or(Box::new(x), Box::new(Expr::Lit(Val::Null)))),
        false => Folded::Expr(x),
    };
    Ok(match fold_disjuncts(table, mode, a, ctx)? {
        Folded::True => Folded::True,
        Folded::False => fold_disjuncts(table, mode, b, ctx)?,
        Folded::Null => match fold_disjuncts(table, mode, b, ctx)? {
            Folded::True => Folded::True,
            Folded::False | Folded::Null => Folded::Null,
            Folded::Expr(b) => or_null(b),
        },
        Folded::Expr(a) => match fold_disjuncts(table, mode, b, ctx)? {
            Folded::True => Folded::True,
            Folded::False => Folded::Expr(a),
            Folded::Null => or_null(a),
            Folded::Expr(b) => Folded::Expr(Expr::Or(Box::new(a), Box::new(b))),
        },
    })
}

/// [`access`] using only the native indexes `usable` allows (`PRIMARY`
/// for primary-key reads): index hints.
pub fn access_with(
    table: &TableInfo,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
    usable: &dyn Fn(&str) -> bool,
) -> SqlResult<(Access, Option<Filter>)> {
    let Some(cond) = cond else {
        return Ok((Access::Scan, None));
    };
    let ranged = range_bound_warnings(table, cond, usable);
    let (access, filter) = access_of_conjuncts(table, cond, ctx, usable)?;
    // A read of one key value is MariaDB's const table, which its range
    // optimizer never looks at; nor at an impossible WHERE.
    let one_key = match &access {
        Access::Keys(keys) | Access::Unique { keys, .. } => keys.len() == 1,
        Access::Nothing => true,
        _ => false,
    };
    if !one_key {
        // Once a statement, as MariaDB's optimizer plans a condition once:
        // not again for each plan a join weighs, nor for each outer row of
        // a correlated subquery (planned again each time, its sites new:
        // the bound is known by its table, conjunct and text).
        let mut decided: Vec<(u64, bool)> = Vec::new();
        for (conjunct, code, message) in ranged {
            let key = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (&table.db, &table.name, conjunct, &message).hash(&mut h);
                h.finish()
            };
            let now = match decided.iter().find(|(k, _)| *k == key) {
                Some((_, now)) => *now,
                None => {
                    let now = ctx.env.range_warned.first(key);
                    decided.push((key, now));
                    now
                }
            };
            if now {
                ctx.warnings.push((code, message));
            }
        }
    }
    Ok((access, filter))
}

/// The warnings MariaDB's range optimizer gives as it stores a string
/// bound of a range (`<`, `<=`, `>`, `>=`, `<>`, BETWEEN) on an integer
/// key column in the key's field: 1292 "Truncated incorrect DECIMAL
/// value" for text that is not wholly a number, before any row is read
/// (so with no row in the range too), once per bound it checks (`<>` is
/// two ranges; a `<=`, BETWEEN's upper bound too, is not checked), in
/// the ANDs and ORs it walks ([`RangeWalk`]). Not the
/// planning's: a strict INSERT … SELECT or multi-table UPDATE fails on
/// one (a single-table UPDATE or DELETE only warns: `fetch_targets`).
/// The rows compared later warn again, as theirs do.
fn range_bound_warnings(
    table: &TableInfo,
    cond: &Expr,
    usable: &dyn Fn(&str) -> bool,
) -> Vec<(usize, u16, String)> {
    let def = table.native.def();
    let key = |e: &Expr| {
        let Expr::Col(col) = e else { return None };
        let column = table.columns.get(*col)?;
        let keyed =
            (!table.hidden_key && usable("PRIMARY") && def.primary_key.contains(&column.native))
                || def
                    .indexes
                    .iter()
                    .any(|i| usable(&i.name) && i.columns.contains(&column.native));
        keyed.then(|| column.ty.is_integer())
    };
    let mut walk = RangeWalk {
        key: &key,
        found: Vec::new(),
        at: 0,
    };
    walk.tree(cond);
    walk.found
}

/// The walk of [`range_bound_warnings`] over a WHERE, in MariaDB's order
/// (`get_mm_tree`): every conjunct of an AND, an OR's arms until one
/// gives no range (the rest are not looked at).
struct RangeWalk<'k> {
    /// Whether a column is a usable key's: Some(it holds integers).
    key: &'k dyn Fn(&Expr) -> Option<bool>,
    /// The warnings, each with its predicate's place in the walk.
    found: Vec<(usize, u16, String)>,
    /// The predicates met so far.
    at: usize,
}

impl RangeWalk<'_> {
    /// Whether `e` gives a range (MariaDB's SEL_TREE), its bounds' warnings
    /// noted.
    fn tree(&mut self, e: &Expr) -> bool {
        let constant = |o: &Expr| silent(o).is_constant();
        match e {
            Expr::And(a, b) => {
                let left = self.tree(a);
                self.tree(b) || left
            }
            Expr::Or(a, b) => self.tree(a) && self.tree(b),
            // NOT of a comparison is the opposite one (`NOT (k < 'x')` is
            // `k >= 'x'`), as MariaDB's optimizer reads it.
            Expr::Not(inner) => match &**inner {
                Expr::Cmp(op, a, b, _) => match negate(*op) {
                    Some(op) => self.compared(op, a, b),
                    None => false,
                },
                _ => false,
            },
            Expr::Cmp(op, a, b, _) => self.compared(*op, a, b),
            // Its lower bound, a `>=`, is checked.
            Expr::Between(x, lo, hi, negated, _) => {
                let Some(integer) = (self.key)(x) else {
                    return false;
                };
                if !(constant(lo) && constant(hi)) {
                    return false;
                }
                self.at += 1;
                if integer && !negated {
                    let at = self.at;
                    self.found
                        .extend(range_bound_warning(lo).map(|(code, message)| (at, code, message)));
                }
                true
            }
            Expr::In(x, list, ..) => (self.key)(x).is_some() && list.iter().all(constant),
            Expr::IsNull(x, _) => (self.key)(x).is_some(),
            Expr::Like(x, pattern, ..) => (self.key)(x).is_some() && constant(pattern),
            _ => false,
        }
    }

    /// A comparison `op` of `a` and `b`: a range where one is a key's
    /// column and the other a constant. MariaDB checks the stored bound
    /// of `>`, `>=` and `<` (both halves of `<>`), not of `<=` nor `=`.
    fn compared(&mut self, op: CmpOp, a: &Expr, b: &Expr) -> bool {
        let constant = |o: &Expr| silent(o).is_constant();
        let (op, integer, bound) = match ((self.key)(a), (self.key)(b)) {
            (Some(integer), None) if constant(b) => (op, integer, b),
            (None, Some(integer)) if constant(a) => (flip(op), integer, a),
            _ => return false,
        };
        self.at += 1;
        let times = match op {
            CmpOp::Gt | CmpOp::Ge | CmpOp::Lt => 1,
            CmpOp::Ne => 2,
            CmpOp::Le | CmpOp::Eq | CmpOp::NullSafeEq => 0,
        };
        if let Some((code, message)) = range_bound_warning(bound).filter(|_| integer) {
            let at = self.at;
            self.found
                .extend(std::iter::repeat_n((at, code, message), times));
        }
        true
    }
}

/// The comparison NOT of `op` is (`<=>` has none: never NULL, its NOT
/// is no comparison of the two).
fn negate(op: CmpOp) -> Option<CmpOp> {
    Some(match op {
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::NullSafeEq => return None,
    })
}

/// The warning of storing a string bound in an integer key's field
/// ([`range_bound_warnings`]), if it is one that is not wholly a number.
/// Its text is gone by now (read as its number, its warning kept for the
/// first row: `Func::WarnOnce`); that warning names it, as DOUBLE where
/// the rows compare doubles (a BETWEEN of two strings), but the key's
/// field reads a DECIMAL.
fn range_bound_warning(e: &Expr) -> Option<(u16, String)> {
    use super::expr::eval::{FLAG_BITS, PLANNED_BIT, PREPARED_BIT};
    let Expr::Func(super::expr::Func::WarnOnce, args) = e else {
        return None;
    };
    let (Some(Expr::Lit(Val::UInt(code))), Some(Expr::Lit(Val::Str(message)))) =
        (args.get(2), args.get(3))
    else {
        return None;
    };
    let code = u16::try_from(*code).ok()?;
    let message = String::from_utf8_lossy(message);
    let text = [
        "Truncated incorrect DECIMAL value: ",
        "Truncated incorrect DOUBLE value: ",
    ]
    .iter()
    .find_map(|p| message.strip_prefix(p));
    match text {
        Some(text) if code & !FLAG_BITS == crate::error::codes::TRUNCATED_WRONG_VALUE => Some((
            code & !(PLANNED_BIT | PREPARED_BIT),
            format!("Truncated incorrect DECIMAL value: {text}"),
        )),
        // Another warning of the same value (one each).
        _ => range_bound_warning(args.first()?),
    }
}

/// [`access_with`] of a WHERE.
fn access_of_conjuncts(
    table: &TableInfo,
    cond: &Expr,
    ctx: &mut Ctx<'_>,
    usable: &dyn Fn(&str) -> bool,
) -> SqlResult<(Access, Option<Filter>)> {
    let mut facts = vec![Facts::default(); table.columns.len()];
    let mut rows = Vec::new();
    let mut filters = Vec::new();
    // In a strict write, a conjunct after one that may warn is not pushed:
    // MariaDB evaluates a row's conjuncts in order, so the warning (an
    // error there) comes for every row the key reads, even one a later
    // conjunct rejects. The SQL node evaluates the whole WHERE anyway.
    let mut after_warning = false;
    for c in cond.conjuncts() {
        if let Some(v) = c.is_constant().then(|| c.eval(&[], ctx)).transpose()? {
            if ctx.truth(&v) != Some(true) {
                return Ok((Access::Nothing, None));
            }
            continue;
        }
        // A constant read for a key warns as MariaDB's range optimizer
        // reads it (and the rows read it again); one compared with a
        // column no key has is read by the rows only (a single-table
        // UPDATE's or DELETE's `x = CAST('1zz' AS SIGNED)`, not cached:
        // `fold_row_constants`).
        let before = ctx.warnings.len();
        learn(table, c, &mut facts, ctx)?;
        if let Some(r) = learn_rows(table, c, ctx)? {
            rows.push(r);
        }
        if !on_key(table, c) {
            ctx.warnings.truncate(before);
        }
        // The range optimizer's warning is the planning's: it does not
        // fail a strict write (`WHERE id = 1/0` changes nothing and
        // warns); a row the key reads tests the condition again.
        for (code, _) in &mut ctx.warnings[before..] {
            *code |= crate::engine::expr::eval::PLANNED_BIT;
        }
        // Nor one whose constant warns as it is read: every row is then
        // compared in the SQL node, each with the warning, as MariaDB
        // compares them.
        let before = ctx.warnings.len();
        let pushed = if after_warning {
            None
        } else {
            let pushed = filter(table, c, ctx)?;
            let warned = ctx.warnings.len() > before;
            ctx.warnings.truncate(before);
            pushed.filter(|_| !warned)
        };
        match pushed {
            Some(f) => filters.push(f),
            None => after_warning |= ctx.strict && !quiet_conjunct(table, c),
        }
    }
    let filter = match filters.len() {
        0 => None,
        1 => filters.pop(),
        _ => Some(Filter::And(filters)),
    };
    let def = table.native.def();
    let sql_of = |native: usize| table.sql_column(native);
    // The primary key: equality on each column, or IN on one of them.
    if !table.hidden_key && usable("PRIMARY") {
        if let Some(mut keys) = key_lists(&def.primary_key, &facts, &rows, &sql_of) {
            in_key_order(&schema::KeyEncoder::primary_key(def), &mut keys);
            return Ok((Access::Keys(keys), filter));
        }
    }
    for index in &def.indexes {
        if index.kind == IndexKind::Unique && usable(&index.name) {
            if let Some(mut keys) = key_lists(&index.columns, &facts, &rows, &sql_of) {
                in_key_order(&schema::KeyEncoder::index(def, index), &mut keys);
                return Ok((
                    Access::Unique {
                        index: index.name.clone(),
                        keys,
                    },
                    filter,
                ));
            }
        }
    }
    // The ordered index with the longest equal prefix, then a range; of
    // two whose cardinality `ANALYZE TABLE` gave, the one that finds
    // fewer rows.
    let mut best: Option<(usize, Option<u64>, Access)> = None;
    for index in def.indexes.iter().filter(|i| i.kind == IndexKind::Ordered) {
        if !usable(&index.name) {
            continue;
        }
        let Some(columns) = index
            .columns
            .iter()
            .map(|n| sql_of(*n))
            .collect::<Option<Vec<usize>>>()
        else {
            continue;
        };
        let mut prefix = Vec::new();
        for c in &columns {
            match &facts[*c].eq {
                Some(v) => prefix.push(v.clone()),
                None => break,
            }
        }
        let mut lower = None;
        let mut upper = None;
        let mut score = prefix.len() * 2;
        let mut points = Vec::new();
        if let Some(next) = columns.get(prefix.len()) {
            let f = &facts[*next];
            if let Some(list) = f.any_of.as_ref().filter(|l| l.len() <= INDEX_POINTS_MAX) {
                points = list
                    .iter()
                    .map(|v| {
                        let mut p = prefix.clone();
                        p.push(v.clone());
                        p
                    })
                    .collect();
                // An equal column and a half: better than a range on it.
                score += 3;
            }
            if let Some((v, inc)) = &f.lower {
                let mut b = prefix.clone();
                b.push(v.clone());
                lower = Some((b, *inc));
                score += 1;
            }
            if let Some((v, inc)) = &f.upper {
                let mut b = prefix.clone();
                b.push(v.clone());
                upper = Some((b, *inc));
                score += 1;
                // A column compared is not NULL: the index's NULLs, which
                // come first, are out of the range (MariaDB's `(NULL, v)`),
                // so no row of them is read and compared.
                let nullable = table.columns.get(*next).is_some_and(|c| c.nullable);
                if nullable && lower.is_none() && points.is_empty() {
                    let mut b = prefix.clone();
                    b.push(Value::Null);
                    lower = Some((b, false));
                }
            }
        }
        if score == 0 {
            continue;
        }
        if !prefix.is_empty() {
            lower.get_or_insert((prefix.clone(), true));
            upper.get_or_insert((prefix.clone(), true));
        }
        let access = Access::Range {
            index: index.name.clone(),
            lower,
            upper,
            columns,
            points,
        };
        let estimate =
            join::has_cardinality(table, &index.name).then(|| join::estimate_rows(table, &access));
        let better = match &best {
            None => true,
            Some((s, e, _)) => match (estimate, e) {
                (Some(mine), Some(theirs)) => {
                    (mine, std::cmp::Reverse(score)) < (*theirs, std::cmp::Reverse(*s))
                }
                _ => score > *s,
            },
        };
        if better {
            best = Some((score, estimate, access));
        }
    }
    Ok((best.map_or(Access::Scan, |(_, _, a)| a), filter))
}

/// A WHERE clause that names one row by its primary key and nothing
/// else: `k1 = ?1 AND k2 = ?2 …`, each key column once, compared for
/// equality with a placeholder or a literal. Found once for a prepared
/// statement's kept plan; at each execute [`KeyShape::access`] binds the
/// values, skipping what [`access_with`] works out again for any condition
/// (the facts of every column, OR arms, a pushed filter: nine tenths of
/// a point select's planning).
#[derive(Debug)]
pub struct KeyShape {
    /// (SQL column, its value) in the primary key's order.
    parts: Vec<(usize, Expr)>,
}

impl KeyShape {
    /// The shape of `cond` over `table`, when it is one; `primary_usable`:
    /// the index hints allow the primary key.
    pub fn of(table: &TableInfo, cond: Option<&Expr>, primary_usable: bool) -> Option<KeyShape> {
        let cond = cond?;
        if table.hidden_key || !primary_usable {
            return None;
        }
        let mut found: Vec<(usize, &Expr)> = Vec::new();
        for c in cond.conjuncts() {
            let Expr::Cmp(CmpOp::Eq, a, b, _) = c else {
                return None;
            };
            let (col, value) = match (&**a, &**b) {
                (Expr::Col(col), v) | (v, Expr::Col(col)) => (*col, v),
                _ => return None,
            };
            if !matches!(value, Expr::Param(_) | Expr::Lit(_))
                || found.iter().any(|(c, _)| *c == col)
            {
                return None;
            }
            found.push((col, value));
        }
        let def = table.native.def();
        if def.primary_key.is_empty() || def.primary_key.len() != found.len() {
            return None;
        }
        let mut parts = Vec::with_capacity(found.len());
        for native in &def.primary_key {
            let sql = table.sql_column(*native)?;
            let (_, value) = found.iter().find(|(c, _)| *c == sql)?;
            parts.push((sql, (*value).clone()));
        }
        Some(KeyShape { parts })
    }

    /// The key read for these values: what [`access_with`] answers for the
    /// condition (its filter aside), or None when a value does not convert
    /// exactly to its column (NULL, `'abc'` for an integer): the general
    /// planner then decides (a scan, or no row).
    pub fn access(&self, table: &TableInfo, ctx: &mut Ctx<'_>) -> SqlResult<Option<Access>> {
        let mut key = Vec::with_capacity(self.parts.len());
        for (col, value) in &self.parts {
            let v = silent(value).eval(&[], ctx)?;
            match exact(table, *col, &v, ctx.env.tz_secs) {
                Some(v) => key.push(v),
                // A key column equal to NULL: no row (`learn`).
                None if v.is_null() => return Ok(Some(Access::Keys(Vec::new()))),
                None => return Ok(None),
            }
        }
        Ok(Some(Access::Keys(vec![key])))
    }
}

/// Most distribution-key values (the product of the `IN` lists on its
/// columns) a scan is pruned by; past it the scan reads every partition.
pub const PRUNE_KEYS_MAX: usize = 1_024;

/// The values of the table's distribution key that `cond` allows, when it
/// fixes each of its columns by equality with a constant or an `IN` list
/// of constants (`PARTITION BY KEY(user_id)` and `WHERE user_id = 1 AND
/// …`, or `user_id IN (1, 5, 9)`): a scan then needs only the partitions
/// holding them (partition pruning, NDB's `Ndb_pruned_scan_count`). None
/// for a table whose distribution key is the hidden `$PK`, when a column
/// is not fixed, or past [`PRUNE_KEYS_MAX`] values.
pub fn partition_keys(
    table: &TableInfo,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Vec<Value>>>> {
    let Some(cond) = cond else {
        return Ok(None);
    };
    let def = table.native.def();
    let dist: &[usize] = if def.distribution_key.is_empty() {
        &def.primary_key
    } else {
        &def.distribution_key
    };
    let sql_of = |native: usize| table.sql_column(native);
    // Every column of the key must be a SQL column (not the hidden key).
    let Some(columns) = dist
        .iter()
        .map(|n| sql_of(*n))
        .collect::<Option<Vec<usize>>>()
    else {
        return Ok(None);
    };
    if columns.is_empty() {
        return Ok(None);
    }
    let mut facts = vec![Facts::default(); table.columns.len()];
    // Only which partitions to read: what reading a constant warns of is
    // the rows' (a single-table UPDATE's or DELETE's constant is read per
    // row compared, as MariaDB's).
    let before = ctx.warnings.len();
    let mut named = Vec::new();
    for c in cond.conjuncts() {
        // Only a conjunct naming a column of the key tells of it: the
        // others' constants (an IN list on another index, converted for
        // each value) were 8 % of select_random_points' SQL node work.
        named.clear();
        join::columns(c, &mut named);
        if !named.iter().any(|n| columns.contains(n)) {
            continue;
        }
        if !c.is_constant() {
            let learnt = learn(table, c, &mut facts, ctx);
            ctx.warnings.truncate(before);
            learnt?;
        }
    }
    let mut keys: Vec<Vec<Value>> = vec![Vec::new()];
    for c in &columns {
        let f = &facts[*c];
        let values: Vec<Value> = match (&f.eq, &f.any_of) {
            (Some(v), _) => vec![v.clone()],
            (None, Some(list)) => list.clone(),
            (None, None) => return Ok(None),
        };
        if keys.len().saturating_mul(values.len()) > PRUNE_KEYS_MAX {
            return Ok(None);
        }
        keys = keys
            .into_iter()
            .flat_map(|k| {
                values.iter().map(move |v| {
                    let mut k = k.clone();
                    k.push(v.clone());
                    k
                })
            })
            .collect();
    }
    Ok(Some(keys))
}

/// The partitions a scan of `table` under `cond` reads, ascending (every
/// one when it is not pruned). An `IN` list with no value left (all NULL)
/// reads none.
pub fn partitions_read(
    table: &TableInfo,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<u32>> {
    let all = || (0..table.native.def().partitions).collect();
    let Some(keys) = partition_keys(table, cond, ctx)? else {
        return Ok(all());
    };
    let mut scratch = Vec::new();
    let mut out = Vec::with_capacity(keys.len());
    for key in &keys {
        match table.native.partition_of_key(key, &mut scratch) {
            Ok(p) => out.push(p),
            Err(_) => return Ok(all()),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Keys of an IN list in the key's order (by their encoded bytes), as
/// MariaDB's range access reads them: rows by key come in that order
/// whatever the list's, and the rows a locking read claims in it
/// (`exec::claim::claim_keys`) are the ones it sends. A key that does not
/// encode (a value out of the column's range) goes last.
fn in_key_order(encoder: &schema::KeyEncoder, keys: &mut [Vec<Value>]) {
    if keys.len() < 2 {
        return;
    }
    keys.sort_by_cached_key(|key| {
        let mut bytes = Vec::new();
        let bad = encoder.encode(key, &mut bytes).is_err();
        (bad, bytes)
    });
}

/// The primary key's columns (SQL positions) an ordered index of
/// `columns` does not hold: the data nodes order rows equal in the
/// index's columns by them (`KeyEncoder::ordered_index`), as InnoDB's
/// secondary indexes do, so ORDER BY may go on with them. None of a
/// table whose primary key is hidden.
fn primary_key_after(table: &TableInfo, columns: &[usize]) -> Vec<usize> {
    if table.hidden_key {
        return Vec::new();
    }
    table
        .primary_key_columns()
        .filter(|c| !columns.contains(c))
        .collect()
}

/// Whether `access` reads an ordered index of `table` in `order` within
/// each partition (a single table's rows not grouped, a join's first
/// table): ORDER BY names the index's columns from the first the range
/// does not fix, and may go on with the primary key's.
pub fn follows_index(table: &TableInfo, order: &[(Expr, bool)], access: &Access) -> bool {
    let Some(rest) = index_order(table, order, access) else {
        return false;
    };
    let is_col = |e: &Expr, c: usize| matches!(e, Expr::Col(x) if *x == c);
    order.iter().all(|(_, d)| *d == order[0].1)
        && order.len() <= rest.len()
        && order.iter().zip(&rest).all(|((e, _), c)| is_col(e, *c))
}

/// The columns (positions in the table) by whose values, one after the
/// other, `access`'s ordered index orders the rows of a partition it
/// reads, from the first that `order` may begin with: the index's
/// columns from the first the range does not fix (or the fixed one
/// ORDER BY names first), then the primary key's (the index's last
/// tiebreak). None when `access` reads no range of an ordered index in
/// its order, or `order` is empty.
pub fn index_order(
    table: &TableInfo,
    order: &[(Expr, bool)],
    access: &Access,
) -> Option<Vec<usize>> {
    let Access::Range {
        columns,
        points,
        lower,
        upper,
        ..
    } = access
    else {
        return None;
    };
    if order.is_empty() || !points.is_empty() {
        return None;
    }
    // Leading index columns the range fixes to one value (`WHERE u = 3`
    // on an index of (u, t)) order nothing: ORDER BY t follows the index.
    // A bound's last value fixes nothing when the bound is exclusive
    // (`(u, t) > (3, 10)` and `u <= 3`: u is 3; `u > 3`: it is not).
    let fixed = match (lower, upper) {
        (Some((low, low_in)), Some((high, high_in))) => {
            let cap = |bound: &[Value], inclusive: bool| bound.len() - usize::from(!inclusive);
            low.iter()
                .zip(high)
                .take_while(|(a, b)| a == b)
                .count()
                .min(cap(low, *low_in))
                .min(cap(high, *high_in))
        }
        _ => 0,
    };
    let is_col = |e: &Expr, c: usize| matches!(e, Expr::Col(x) if *x == c);
    let start = (0..fixed)
        .find(|&at| is_col(&order[0].0, columns[at]))
        .unwrap_or(fixed);
    let mut rest = columns[start.min(columns.len())..].to_vec();
    rest.extend(primary_key_after(table, columns));
    Some(rest)
}

/// An unbounded scan of the ordered index whose leading columns are the
/// ORDER BY columns (all one direction; past the index's own, the primary
/// key's: [`follows_index`]), if there is one.
pub fn ordered_index_for(table: &TableInfo, order: &[(Expr, bool)]) -> Option<Access> {
    let desc = order.first()?.1;
    let wanted: Vec<usize> = order
        .iter()
        .map(|(e, d)| match e {
            Expr::Col(c) if *d == desc => Some(*c),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let sql_of = |native: usize| table.sql_column(native);
    table
        .native
        .def()
        .indexes
        .iter()
        .filter(|i| i.kind == IndexKind::Ordered)
        .find_map(|index| {
            let columns: Vec<usize> = index
                .columns
                .iter()
                .map(|n| sql_of(*n))
                .collect::<Option<_>>()?;
            let mut ordered = columns.clone();
            ordered.extend(primary_key_after(table, &columns));
            (ordered.len() >= wanted.len() && ordered[..wanted.len()] == wanted[..]).then(|| {
                Access::Range {
                    index: index.name.clone(),
                    lower: None,
                    upper: None,
                    columns,
                    points: Vec::new(),
                }
            })
        })
}

/// An ordered index whose first columns are `wanted` (SQL positions,
/// sorted, no repeats) in any order, that `usable` allows: its read
/// from end to end, and how many columns that is (a distinct scan's
/// prefix, `select::distinct_candidates`). The fewest columns first: a
/// shorter index steps over as much with less to compare.
pub fn distinct_index_for(
    table: &TableInfo,
    wanted: &[usize],
    usable: &dyn Fn(&str) -> bool,
) -> Option<(Access, u8)> {
    let prefix = u8::try_from(wanted.len()).ok().filter(|n| *n > 0)?;
    let sql_of = |native: usize| table.sql_column(native);
    let mut fits: Vec<(usize, Access)> = table
        .native
        .def()
        .indexes
        .iter()
        .filter(|i| i.kind == IndexKind::Ordered && usable(&i.name))
        .filter_map(|index| {
            let columns: Vec<usize> = index
                .columns
                .iter()
                .map(|n| sql_of(*n))
                .collect::<Option<_>>()?;
            let mut leading = columns.get(..wanted.len())?.to_vec();
            leading.sort_unstable();
            (leading == wanted).then(|| {
                let access = Access::Range {
                    index: index.name.clone(),
                    lower: None,
                    upper: None,
                    columns,
                    points: Vec::new(),
                };
                (index.columns.len(), access)
            })
        })
        .collect();
    fits.sort_by_key(|(width, _)| *width);
    fits.into_iter().next().map(|(_, a)| (a, prefix))
}

/// Whether `e` compares a key's column with NULL (`=`, `<`, …, IN of
/// NULLs only, BETWEEN with a NULL bound): true of no row, which MariaDB's
/// range optimizer finds before any row ("Impossible WHERE"), so no
/// other conjunct is evaluated. Not `<=>`, nor NOT IN or NOT BETWEEN.
fn null_on_key(table: &TableInfo, e: &Expr) -> bool {
    let null = |x: &Expr| matches!(x, Expr::Lit(Val::Null));
    let compares = match e {
        Expr::Cmp(op, a, b, _) => *op != CmpOp::NullSafeEq && (null(a) || null(b)),
        Expr::In(_, list, false, ..) => !list.is_empty() && list.iter().all(null),
        Expr::Between(_, lo, hi, false, _) => null(lo) || null(hi),
        _ => false,
    };
    compares && on_key(table, e)
}

/// Whether `c` compares a column of a key (the primary key or an index)
/// with something: a range optimizer would read its constant.
fn on_key(table: &TableInfo, c: &Expr) -> bool {
    let def = table.native.def();
    let keyed = |e: &Expr| {
        matches!(e, Expr::Col(col) if table.columns.get(*col).is_some_and(|column| {
            def.primary_key.contains(&column.native)
                || def.indexes.iter().any(|i| i.columns.contains(&column.native))
        }))
    };
    match c {
        Expr::Cmp(_, a, b, _) => keyed(a) || keyed(b),
        Expr::Between(x, ..) | Expr::In(x, ..) => keyed(x),
        // An OR whose every arm compares a key's column is a range too.
        Expr::Or(a, b) => on_key(table, a) && on_key(table, b),
        _ => false,
    }
}

/// Rows of values a condition allows for some columns: `(a, b) IN ((1,
/// 2), (3, 4))` or `a = 1 OR a = 2`, an OR whose every arm fixes the same
/// columns by equality (SQL positions, and one list of values per arm).
struct KeyRows {
    columns: Vec<usize>,
    rows: Vec<Vec<Value>>,
}

/// Key value lists for `columns` (native positions) when every one is
/// fixed by equality, or all but one are and that one by `IN`, or all but
/// some are and those by one of `rows` (one batch of key reads for
/// `(a, b) IN (…)`).
fn key_lists(
    columns: &[usize],
    facts: &[Facts],
    rows: &[KeyRows],
    sql_of: &dyn Fn(usize) -> Option<usize>,
) -> Option<Vec<Vec<Value>>> {
    if columns.is_empty() {
        return None;
    }
    key_lists_by_facts(columns, facts, sql_of).or_else(|| {
        let sql: Vec<usize> = columns.iter().map(|n| sql_of(*n)).collect::<Option<_>>()?;
        rows.iter().find_map(|r| {
            // Columns of the rows outside the key only narrow what the
            // condition (tested on every row read) keeps.
            let fixed = sql
                .iter()
                .all(|c| r.columns.contains(c) || facts[*c].eq.is_some());
            if !fixed || r.rows.len() > KEY_READS_MAX {
                return None;
            }
            let mut keys: Vec<Vec<Value>> = Vec::with_capacity(r.rows.len());
            for values in &r.rows {
                let key: Option<Vec<Value>> = sql
                    .iter()
                    .map(|c| match r.columns.iter().position(|x| x == c) {
                        Some(at) => values.get(at).cloned(),
                        None => facts[*c].eq.clone(),
                    })
                    .collect();
                let key = key?;
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            Some(keys)
        })
    })
}

fn key_lists_by_facts(
    columns: &[usize],
    facts: &[Facts],
    sql_of: &dyn Fn(usize) -> Option<usize>,
) -> Option<Vec<Vec<Value>>> {
    let mut keys: Vec<Vec<Value>> = vec![Vec::new()];
    for n in columns {
        let f = &facts[sql_of(*n)?];
        if let Some(v) = &f.eq {
            keys.iter_mut().for_each(|k| k.push(v.clone()));
        } else if let (Some(list), 1) = (&f.any_of, keys.len()) {
            let base = keys.pop()?;
            for v in list {
                let mut k = base.clone();
                k.push(v.clone());
                keys.push(k);
            }
        } else {
            return None;
        }
    }
    (keys.len() <= KEY_READS_MAX).then_some(keys)
}

/// `col op constant` (either way round) with the constant exactly in the
/// column's stored form.
fn column_vs_const(
    table: &TableInfo,
    a: &Expr,
    b: &Expr,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<(usize, Value, bool)>> {
    column_vs(table, a, b, false, ctx)
}

/// [`column_vs_const`] for a key's bounds (`keys`): a constant whose
/// reading warns at the first row compared counts, read without its
/// warning. Not for a pushed filter: the rows it would drop must still be
/// compared here, the first of them with the warning.
fn column_vs(
    table: &TableInfo,
    a: &Expr,
    b: &Expr,
    keys: bool,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<(usize, Value, bool)>> {
    let constant = |o: &Expr| if keys { silent(o) } else { o }.is_constant();
    let (col, other, flipped) = match (a, b) {
        (Expr::Col(c), o) if constant(o) => (*c, o, false),
        (o, Expr::Col(c)) if constant(o) => (*c, o, true),
        _ => return Ok(None),
    };
    let v = silent(other).eval(&[], ctx)?;
    Ok(exact(table, col, &v, ctx.env.tz_secs).map(|v| (col, v, flipped)))
}

/// Whether one side of a column's comparison is a constant that is NULL
/// (read without its own warnings: [`column_vs`] read it with them). The
/// warning its first row would give (`Func::WarnOnce`: `id = 1/0`) is
/// given now where `fire` (a key's column), the range optimizer's, which
/// reads it before any row: a strict INSERT … SELECT only warns, as
/// MariaDB's, and no row reads it.
fn null_constant(a: &Expr, b: &Expr, fire: bool, ctx: &mut Ctx<'_>) -> SqlResult<bool> {
    let written = match (a, b) {
        (Expr::Col(_), o) | (o, Expr::Col(_)) if silent(o).is_constant() => o,
        _ => return Ok(false),
    };
    let other = silent(written);
    let before = ctx.warnings.len();
    let v = other.eval(&[], ctx)?;
    ctx.warnings.truncate(before);
    if fire && v.is_null() && !std::ptr::eq(other, written) {
        written.eval(&[], ctx)?;
    }
    Ok(v.is_null())
}

/// A constant compared with a column, without the warning its reading
/// waits to give at the first row compared (`Func::WarnOnce`): the value
/// a key's bounds take, as MariaDB's range optimizer stores a constant in
/// the key's field without warnings; the rows the key finds are compared
/// again in the SQL node, and warn then (a pushed filter never takes it:
/// [`column_vs`]).
/// Whether a condition cannot warn: it compares operands of one class
/// (numbers with numbers, strings with strings: columns, literals,
/// placeholders), or tests one for NULL; `kind` gives an operand's kind.
pub(crate) fn quiet(e: &Expr, kind: &dyn Fn(&Expr) -> super::expr::Kind) -> bool {
    let class = |e: &Expr| match kind(e) {
        k if k.is_numeric() => Some(true),
        super::expr::Kind::Str { .. } => Some(false),
        _ => None,
    };
    let operand = |e: &Expr| matches!(e, Expr::Col(_) | Expr::Lit(_) | Expr::Param(_));
    let alike =
        |a: &Expr, b: &Expr| operand(a) && operand(b) && class(a).is_some() && class(a) == class(b);
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => quiet(a, kind) && quiet(b, kind),
        Expr::IsNull(a, _) => operand(a),
        Expr::Cmp(_, a, b, _) => alike(a, b),
        Expr::In(a, list, ..) => list.iter().all(|x| alike(a, x)),
        Expr::Between(a, lo, hi, ..) => alike(a, lo) && alike(a, hi),
        _ => false,
    }
}

/// [`quiet`] of a conjunct of `table`'s WHERE, the kinds from its column
/// types and literals.
fn quiet_conjunct(table: &TableInfo, c: &Expr) -> bool {
    quiet(c, &|e| match e {
        Expr::Col(i) => table.columns.get(*i).map_or(super::expr::Kind::Null, |c| {
            super::exec::convert::column_kind(&c.ty)
        }),
        Expr::Lit(v) => super::expr::eval::val_kind(v),
        _ => super::expr::Kind::Null,
    })
}

fn silent(e: &Expr) -> &Expr {
    match e {
        Expr::Func(super::expr::Func::WarnOnce, args) => silent(&args[0]),
        other => other,
    }
}

/// A constant in a column's stored form, when it converts exactly (and is
/// not NULL: a comparison with NULL matches nothing, left to the SQL side).
/// `tz_secs`: the session's time zone, from which a TIMESTAMP constant is
/// converted to the UTC the column stores.
pub(crate) fn exact(table: &TableInfo, col: usize, v: &Val, tz_secs: i64) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    let column = table.columns.get(col)?;
    // ENUM and SET compare as strings in SQL, as numbers when stored.
    if matches!(column.ty, SqlType::Enum(_) | SqlType::Set(_)) {
        return None;
    }
    // A BIT is stored from a string's bytes, but compared with one as a
    // number (`bt > 'a'` is `bt > 0`, with 1292).
    if matches!(column.ty, SqlType::Bit { .. }) && matches!(v, Val::Str(_)) {
        return None;
    }
    // A YEAR stores a number below 100 as a year of two digits (8 is
    // 2008), but compares the value the SQL side left (a subquery's 8 is
    // 8: `Scope::year_constant` made a written two-digit year 2008
    // already): only a value it stores as itself is exact.
    if column.ty == SqlType::Year {
        let as_number = match v {
            Val::Int(i) => i128::from(*i),
            Val::UInt(u) => i128::from(*u),
            _ => return None,
        };
        if as_number != 0 && !(1901..=2155).contains(&as_number) {
            return None;
        }
    }
    let text = matches!(
        column.ty,
        SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::Text { .. }
    );
    if text && !matches!(v, Val::Str(_)) {
        return None;
    }
    // A FLOAT is compared as the double it widens to: a constant no FLOAT
    // holds (0.1, -1e-50) is not one in the column's form (0.1 as a FLOAT
    // is 0.100000001…, which is > 0.1 in SQL).
    if let (SqlType::Float { .. }, Val::Dec(_) | Val::Double(_) | Val::Str(_)) = (&column.ty, v) {
        let env = super::expr::Env::default();
        let mut ctx = super::expr::Ctx::new(&[], &env);
        let x = ctx.num_f64(v);
        if !ctx.warnings.is_empty() || f64::from(x as f32) != x {
            return None;
        }
    }
    // Text compares by its collation in both; other strings only when the
    // value is a string too (MySQL compares '1e0' = 1 numerically).
    let target = Target {
        column,
        db: &table.db,
        table: &table.name,
        row: 1,
        tz_secs,
    };
    // A date no column holds (`'2024-02-30'`, which MariaDB compares
    // as the day between 02-29 and 03-01, without a warning) is no key
    // value nor a pushed filter's: the data node refuses it (and a
    // TIMESTAMP's would count it as March 1). The SQL node compares it.
    let storable = |d: &crate::value::Date| schema::Date::new(d.year, d.month, d.day).is_storable();
    let day = match v {
        Val::Date(d) | Val::DateTime(d, _) => Some(*d),
        Val::Str(b)
            if matches!(
                column.ty,
                SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }
            ) =>
        {
            super::expr::value::parse_datetime(&String::from_utf8_lossy(b)).map(|(d, _)| d)
        }
        _ => None,
    };
    if day.is_some_and(|d| !storable(&d)) {
        return None;
    }
    // The data nodes compare the stored form: SQL compares a DECIMAL with
    // a double or text as doubles (100.000000000000001 = 1e2 holds), a
    // BIGINT with a double past 2^53 as doubles too; neither is a stored
    // comparison.
    match (&column.ty, v) {
        (SqlType::Decimal { .. }, Val::Double(_) | Val::Str(_)) => return None,
        (SqlType::BigInt { .. }, Val::Double(f)) if f.abs() >= DOUBLE_EXACT_INTEGER_MAX => {
            return None
        }
        _ => {}
    }
    let native = match to_native(v, &target, true).ok()? {
        Value::Date(d) if !d.is_storable() => return None,
        Value::DateTime(dt) if !dt.is_valid() => return None,
        native => native,
    };
    // A constant the column holds only rounded (1.005 of a DECIMAL(10,2),
    // 00:00:00.0005 of a DATETIME(3), a time of day of a DATE) is not its
    // stored form: `d < 1.005` would drop the 1.00 rows a bound or filter
    // of 1.01 keeps, `dt3 < '… 00:00:00.0005'` keep the .000 rows one of
    // .000 drops. Only a value equal to the constant as SQL compares
    // them is its stand-in.
    if matches!(
        column.ty,
        SqlType::Decimal { .. }
            | SqlType::Date
            | SqlType::DateTime { .. }
            | SqlType::Timestamp { .. }
    ) {
        let back = super::exec::convert::from_native(&native, &column.ty, tz_secs);
        let env = super::expr::Env::default();
        let mut ctx = super::expr::Ctx::new(&[], &env);
        let equal =
            super::expr::eval::compare(&back, v, None, &mut ctx) == std::cmp::Ordering::Equal;
        if !equal || !ctx.warnings.is_empty() {
            return None;
        }
    }
    Some(native)
}

/// Whether a comparison under `coll` of column `col` with a constant may
/// bound a key or be a pushed filter: the data nodes order and compare a
/// CHAR or VARCHAR under the column's own collation, so only a comparison
/// under that one may (`b = 'ABC' COLLATE utf8mb4_general_ci` of a binary
/// b, bound or filtered under b's, dropped the 'abc' SQL finds). Columns
/// of no collation compare as their type.
fn in_column_collation(table: &TableInfo, col: usize, coll: Option<Collation>) -> bool {
    match table.columns.get(col).and_then(|c| c.ty.collation()) {
        None => true,
        Some(own) => coll == Some(own),
    }
}

/// The largest integer below which every integer is a double (2^53): a
/// BIGINT compared with a double past it compares inexactly in SQL.
const DOUBLE_EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_992.0;

fn learn(table: &TableInfo, c: &Expr, facts: &mut [Facts], ctx: &mut Ctx<'_>) -> SqlResult<()> {
    match c {
        Expr::Cmp(op, a, b, coll) => {
            let Some((col, v, flipped)) = column_vs(table, a, b, true, ctx)? else {
                // `id = 1 / 0`: a column equal to (or compared with) NULL
                // holds for no row, as `id IN (NULL)`: MariaDB's range
                // optimizer reads no row, so none is compared (nor warns).
                if *op != CmpOp::NullSafeEq && null_constant(a, b, on_key(table, c), ctx)? {
                    let col = match (a.as_ref(), b.as_ref()) {
                        (Expr::Col(c), _) | (_, Expr::Col(c)) => *c,
                        _ => return Ok(()),
                    };
                    facts[col].any_of = Some(Vec::new());
                }
                return Ok(());
            };
            if !in_column_collation(table, col, *coll) {
                return Ok(());
            }
            let op = if flipped { flip(*op) } else { *op };
            let f = &mut facts[col];
            match op {
                CmpOp::Eq | CmpOp::NullSafeEq => f.eq = Some(v),
                CmpOp::Gt => f.lower = Some((v, false)),
                CmpOp::Ge => f.lower = Some((v, true)),
                CmpOp::Lt => f.upper = Some((v, false)),
                CmpOp::Le => f.upper = Some((v, true)),
                CmpOp::Ne => {}
            }
        }
        Expr::In(x, list, false, coll, _) => {
            let Expr::Col(col) = **x else { return Ok(()) };
            if !in_column_collation(table, col, *coll) {
                return Ok(());
            }
            if !list.iter().all(|x| silent(x).is_constant()) {
                return Ok(());
            }
            let mut values = Vec::with_capacity(list.len());
            for item in list {
                let v = silent(item).eval(&[], ctx)?;
                match exact(table, col, &v, ctx.env.tz_secs) {
                    Some(v) => {
                        if !values.contains(&v) {
                            values.push(v);
                        }
                    }
                    None if v.is_null() => {}
                    None => return Ok(()),
                }
            }
            facts[col].any_of = Some(values);
        }
        Expr::Between(x, lo, hi, false, coll) => {
            let Expr::Col(col) = **x else { return Ok(()) };
            let constants = silent(lo).is_constant() && silent(hi).is_constant();
            if !(in_column_collation(table, col, *coll) && constants) {
                return Ok(());
            }
            let (l, h) = (silent(lo).eval(&[], ctx)?, silent(hi).eval(&[], ctx)?);
            if let (Some(l), Some(h)) = (
                exact(table, col, &l, ctx.env.tz_secs),
                exact(table, col, &h, ctx.env.tz_secs),
            ) {
                facts[col].lower = Some((l, true));
                facts[col].upper = Some((h, true));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The [`KeyRows`] an OR of equality conjunctions allows, if `c` is one.
fn learn_rows(table: &TableInfo, c: &Expr, ctx: &mut Ctx<'_>) -> SqlResult<Option<KeyRows>> {
    let mut arms = Vec::new();
    or_arms(c, &mut arms);
    if arms.len() < 2 || arms.len() > KEY_READS_MAX {
        return Ok(None);
    }
    let mut out = KeyRows {
        columns: Vec::new(),
        rows: Vec::with_capacity(arms.len()),
    };
    for (n, arm) in arms.iter().enumerate() {
        let mut fixed: Vec<(usize, Value)> = Vec::new();
        for part in arm.conjuncts() {
            let Expr::Cmp(CmpOp::Eq, a, b, coll) = part else {
                return Ok(None);
            };
            let Some((col, v, _)) = column_vs(table, a, b, true, ctx)? else {
                return Ok(None);
            };
            if !in_column_collation(table, col, *coll) {
                return Ok(None);
            }
            if fixed.iter().any(|(c, _)| *c == col) {
                return Ok(None);
            }
            fixed.push((col, v));
        }
        fixed.sort_by_key(|(c, _)| *c);
        let columns: Vec<usize> = fixed.iter().map(|(c, _)| *c).collect();
        if n == 0 {
            out.columns = columns;
        } else if columns != out.columns {
            return Ok(None);
        }
        out.rows.push(fixed.into_iter().map(|(_, v)| v).collect());
    }
    Ok(Some(out))
}

/// A condition tested per row after the rows are read (the conjuncts that
/// run correlated subqueries) without each OR that one of its constant
/// disjuncts makes hold: MariaDB's optimizer folds such an OR before it
/// reads a row (`b IN ('x', 3) OR 5 < (SELECT MAX(x) FROM t2) OR EXISTS
/// (…)` compares no b, nor warns of one). A constant's warnings are given
/// then, once; an OR none decides is kept as written (its constants still
/// read per row). Borrowed when nothing folds; None when all do.
pub fn fold_true_disjuncts<'e>(
    cond: Option<&'e Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<std::borrow::Cow<'e, Expr>>> {
    let Some(cond) = cond else {
        return Ok(None);
    };
    let mut kept: Vec<&Expr> = Vec::new();
    let mut folded = false;
    for c in cond.conjuncts() {
        let mut arms = Vec::new();
        or_arms(c, &mut arms);
        let before = ctx.warnings.len();
        let mut holds = false;
        if arms.len() > 1 {
            for arm in arms.iter().filter(|a| a.is_constant()) {
                let v = arm.eval(&[], ctx)?;
                if ctx.truth(&v) == Some(true) {
                    holds = true;
                    break;
                }
            }
        }
        if holds {
            folded = true;
        } else {
            ctx.warnings.truncate(before);
            kept.push(c);
        }
    }
    // Copied only when an OR folded away.
    Ok(if folded {
        Expr::and_of(kept.into_iter().cloned()).map(std::borrow::Cow::Owned)
    } else {
        Some(std::borrow::Cow::Borrowed(cond))
    })
}

/// The arms of a chain of ORs.
fn or_arms<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Or(a, b) => {
            or_arms(a, out);
            or_arms(b, out);
        }
        other => out.push(other),
    }
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

/// Whether a constant in `e` warns as it is read (`Func::WarnOnce`: at
/// the first row compared, as MariaDB's).
pub(crate) fn warns_when_read(e: &Expr) -> bool {
    let mut warns = false;
    e.each(&mut |x| warns |= matches!(x, Expr::Func(super::expr::Func::WarnOnce, _)));
    warns
}

/// Whether column `col` of `table` is an integer (TINYINT to BIGINT,
/// either sign; not BIT, YEAR, ENUM or SET, stored as integers too).
pub(crate) fn integer_column(table: &TableInfo, col: usize) -> bool {
    matches!(
        table.columns.get(col).map(|c| &c.ty),
        Some(
            SqlType::TinyInt { .. }
                | SqlType::SmallInt { .. }
                | SqlType::MediumInt { .. }
                | SqlType::Int { .. }
                | SqlType::BigInt { .. }
        )
    )
}

/// Whether the data nodes compare column `col` with the constant `other`
/// as the SQL node does: an integer column with a constant that converts
/// to it exactly ([`column_vs_const`]); a DECIMAL column with an exact
/// number, and a DATE or DATETIME column with a date, a datetime or text,
/// whose stored form (the value the data nodes compare with) is equal to
/// it as SQL compares them (`d >= '2024-06-01'` of a DATETIME, which is
/// 2024-06-01 00:00:00; not `d < 1.005` of a DECIMAL(10,2), which would
/// be stored as 1.01, nor `d = '2024-06-01 10:00'` of a DATE). The data
/// nodes order DECIMALs and dates by value as SQL does, so a value equal
/// to the constant compares with every row as the constant does. A
/// DOUBLE constant (compared as a double in SQL), a TIMESTAMP (a session
/// time zone), TIME and floats are left to the SQL node. A CHAR or
/// VARCHAR column compared with text under its own collation (`coll`, the
/// comparison's) is exact when the constant is stored as itself: both
/// sides compare strings by the same `schema::Collation` (PAD SPACE);
/// not one longer than the column, a CHAR's trailing spaces, nor another
/// collation (`s = 'A' COLLATE utf8mb4_bin` of a case-blind s).
fn compares_exactly(
    table: &TableInfo,
    col_expr: &Expr,
    other: &Expr,
    coll: Option<Collation>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<bool> {
    let Some((col, native, _)) = column_vs_const(table, col_expr, other, ctx)? else {
        return Ok(false);
    };
    let Some(column) = table.columns.get(col) else {
        return Ok(false);
    };
    if integer_column(table, col) {
        return Ok(true);
    }
    let text = matches!(column.ty, SqlType::Char { .. } | SqlType::VarChar { .. });
    let by_value = match column.ty {
        SqlType::Decimal { .. } => false,
        SqlType::Date | SqlType::DateTime { .. } => true,
        _ if text => false,
        _ => return Ok(false),
    };
    let constant = match col_expr {
        Expr::Col(_) => other,
        _ => col_expr,
    };
    let before = ctx.warnings.len();
    let v = silent(constant).eval(&[], ctx)?;
    ctx.warnings.truncate(before);
    if text {
        let stored_as_itself = match (&v, &native) {
            (Val::Str(text), Value::String(stored)) => text.as_slice() == stored.as_bytes(),
            _ => false,
        };
        return Ok(stored_as_itself && coll.is_some() && coll == column.ty.collation());
    }
    // `exact` made sure the stored form equals the constant as SQL
    // compares them; SQL compares a DECIMAL with an exact number and a
    // date with a date or text as stored values compare.
    Ok(match &v {
        Val::Int(_) | Val::UInt(_) | Val::Dec(_) => !by_value,
        Val::Str(_) | Val::Date(_) | Val::DateTime(..) => by_value,
        _ => false,
    })
}

/// Whether the data nodes' filter of `cond` ([`access`]'s) says of every
/// row what `cond` says: each conjunct (but the constant ones, which
/// [`access`] decides) a comparison or BETWEEN of a column with constants
/// it compares exactly with ([`compares_exactly`]: integers, DECIMALs,
/// DATEs and DATETIMEs), or an IN list of an integer column with integers.
/// Those compare the same there and here, NULL included (unknown fails
/// both); text (collations, PAD SPACE), floats, TIMESTAMP, TIME and LIKE
/// are left to the SQL node's own test, which then runs on every row as
/// before.
pub(crate) fn pushed_exactly(table: &TableInfo, cond: &Expr, ctx: &mut Ctx<'_>) -> SqlResult<bool> {
    let integer = |col: usize| integer_column(table, col);
    for c in cond.conjuncts() {
        if c.is_constant() {
            continue;
        }
        // A constant whose reading warns at the first row compared: the
        // rows the data nodes pass are compared here, and warn then.
        if warns_when_read(c) {
            return Ok(false);
        }
        let exact = match c {
            Expr::Cmp(op, a, b, coll) if *op != CmpOp::NullSafeEq => {
                compares_exactly(table, a, b, *coll, ctx)?
            }
            Expr::Between(x, lo, hi, false, coll) => match **x {
                Expr::Col(_) => {
                    compares_exactly(table, x, lo, *coll, ctx)?
                        && compares_exactly(table, x, hi, *coll, ctx)?
                }
                _ => false,
            },
            // An integer column IN integers: each an equality the data
            // nodes test as it is meant (`filter` pushes the ORed list).
            Expr::In(x, list, false, coll, _) if list.len() <= KEY_READS_MAX => match **x {
                Expr::Col(col) if integer(col) => {
                    let mut all = true;
                    for item in list {
                        all &= matches!(item, Expr::Lit(Val::Int(_) | Val::UInt(_)))
                            && column_vs_const(table, x, item, ctx)?.is_some();
                    }
                    all
                }
                // Text IN text under the column's collation: each an
                // equality compared exactly as above.
                Expr::Col(_) => {
                    let mut all = true;
                    for item in list {
                        all &= matches!(item, Expr::Lit(Val::Str(_)))
                            && compares_exactly(table, x, item, *coll, ctx)?;
                    }
                    all
                }
                _ => false,
            },
            _ => false,
        };
        if !exact {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The part of a condition the data nodes can evaluate, when all of it is.
fn filter(table: &TableInfo, c: &Expr, ctx: &mut Ctx<'_>) -> SqlResult<Option<Filter>> {
    let native = |col: usize| table.columns.get(col).map(|c| c.native as u16);
    Ok(match c {
        Expr::Cmp(op, a, b, coll) if *op != CmpOp::NullSafeEq => {
            let Some((col, value, flipped)) = column_vs_const(table, a, b, ctx)? else {
                return Ok(None);
            };
            if !in_column_collation(table, col, *coll) {
                return Ok(None);
            }
            // The data nodes compare no BLOB or TEXT kept in parts: the
            // SQL node tests it.
            let def = table.native.def();
            let stored = table
                .columns
                .get(col)
                .and_then(|c| def.columns.get(c.native));
            if stored.is_none_or(|c| c.ty.is_blob()) {
                return Ok(None);
            }
            let op = match if flipped { flip(*op) } else { *op } {
                CmpOp::Eq | CmpOp::NullSafeEq => NCmp::Eq,
                CmpOp::Ne => NCmp::Ne,
                CmpOp::Lt => NCmp::Lt,
                CmpOp::Le => NCmp::Le,
                CmpOp::Gt => NCmp::Gt,
                CmpOp::Ge => NCmp::Ge,
            };
            native(col).map(|column| Filter::Cmp { column, op, value })
        }
        Expr::IsNull(x, negated) => match **x {
            Expr::Col(col) => native(col).map(|c| {
                if *negated {
                    Filter::IsNotNull(c)
                } else {
                    Filter::IsNull(c)
                }
            }),
            _ => None,
        },
        Expr::Like(x, p, '\\', false, coll) => {
            let (Expr::Col(col), Some(pat)) = (&**x, p.text_literal()) else {
                return Ok(None);
            };
            if !in_column_collation(table, *col, *coll) {
                return Ok(None);
            }
            // What the data nodes test LIKE on: a CHAR or VARCHAR as stored
            // (not a TEXT kept as a blob, which they refuse).
            let def = table.native.def();
            let is_text = table.columns.get(*col).is_some_and(|c| {
                matches!(
                    c.ty,
                    SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::Text { .. }
                ) && def.columns.get(c.native).is_some_and(|n| {
                    matches!(
                        n.ty,
                        schema::ColumnType::Char { .. } | schema::ColumnType::VarChar { .. }
                    )
                })
            });
            let Ok(pat) = std::str::from_utf8(pat) else {
                return Ok(None);
            };
            let Some(prefix) = pat.strip_suffix('%') else {
                return Ok(None);
            };
            if !is_text || prefix.contains(['%', '_', '\\']) {
                return Ok(None);
            }
            native(*col).map(|column| Filter::LikePrefix {
                column,
                prefix: prefix.to_owned(),
            })
        }
        Expr::Between(x, lo, hi, false, coll) => {
            let ge = Expr::Cmp(CmpOp::Ge, x.clone(), lo.clone(), *coll);
            let le = Expr::Cmp(CmpOp::Le, x.clone(), hi.clone(), *coll);
            match (filter(table, &ge, ctx)?, filter(table, &le, ctx)?) {
                (Some(a), Some(b)) => Some(Filter::And(vec![a, b])),
                _ => None,
            }
        }
        Expr::In(x, list, false, coll, _) if list.len() <= KEY_READS_MAX => {
            let mut any = Vec::with_capacity(list.len());
            for item in list {
                let eq = Expr::Cmp(CmpOp::Eq, x.clone(), Box::new(item.clone()), *coll);
                match filter(table, &eq, ctx)? {
                    Some(f) => any.push(f),
                    None => return Ok(None),
                }
            }
            Some(Filter::Or(any))
        }
        Expr::And(a, b) | Expr::Or(a, b) => {
            match (filter(table, a, ctx)?, filter(table, b, ctx)?) {
                (Some(x), Some(y)) if matches!(c, Expr::And(..)) => Some(Filter::And(vec![x, y])),
                (Some(x), Some(y)) => Some(Filter::Or(vec![x, y])),
                _ => None,
            }
        }
        Expr::Not(a) => filter(table, a, ctx)?.map(|f| Filter::Not(Box::new(f))),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use schema::{Column, ColumnType, TableDef};

    use super::*;
    use crate::engine::catalog::table_info;
    use crate::engine::expr::eval::Env;

    /// `t (a INT, b INT, c INT, PRIMARY KEY (b, a))`: the key's order is
    /// not the columns'.
    fn table() -> TableInfo {
        let int = || ColumnType::Int { unsigned: false };
        let mut def = TableDef::new(
            "t",
            7,
            vec![
                Column::new("a", int()),
                Column::new("b", int()),
                Column::new("c", int()),
            ],
        );
        def.primary_key = vec![1, 0];
        table_info("d", "t", Arc::new(skarv_client::Table::detached(def)))
    }

    fn eq(a: Expr, b: Expr) -> Expr {
        Expr::Cmp(CmpOp::Eq, Box::new(a), Box::new(b), None)
    }

    fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }

    /// A key shape's read is what the general planner reads, for every
    /// value; conditions of other shapes have none.
    #[test]
    fn a_key_shape_reads_what_the_planner_reads() {
        let t = table();
        let (a, b, c) = (|| Expr::Col(0), || Expr::Col(1), || Expr::Col(2));
        let p = Expr::Param;
        let lit = |n| Expr::Lit(Val::Int(n));
        let shaped = [
            and(eq(a(), p(0)), eq(b(), p(1))),
            and(eq(lit(5), b()), eq(p(0), a())),
            and(eq(b(), p(1)), eq(a(), p(0))),
        ];
        let values = [
            vec![Val::Int(1), Val::Int(2)],
            vec![Val::Str(b"12".to_vec()), Val::Int(-3)],
            vec![Val::Str(b"abc".to_vec()), Val::Int(1)],
            vec![Val::Null, Val::Int(1)],
            vec![Val::Double(1.5), Val::Int(1)],
            vec![Val::Int(i64::MAX), Val::Int(1)],
        ];
        let env = Env::default();
        let mut seen_keys = 0;
        for cond in &shaped {
            let shape = KeyShape::of(&t, Some(cond), true).expect("a key shape");
            for params in &values {
                let mut ctx = Ctx::new(params, &env);
                let fast = shape.access(&t, &mut ctx).unwrap();
                let mut ctx = Ctx::new(params, &env);
                let (general, _) = access(&t, Some(cond), &mut ctx).unwrap();
                if let Some(fast) = fast {
                    assert_eq!(fast, general, "{cond:?} with {params:?}");
                    seen_keys += 1;
                } else {
                    assert!(
                        !matches!(general, Access::Keys(_)),
                        "{cond:?} with {params:?}"
                    );
                }
            }
        }
        assert!(seen_keys >= 6, "most values convert exactly: {seen_keys}");
        let other = [
            eq(a(), p(0)),
            and(and(eq(a(), p(0)), eq(b(), p(1))), eq(c(), lit(1))),
            and(eq(a(), p(0)), eq(a(), p(1))),
            Expr::Or(Box::new(eq(a(), p(0))), Box::new(eq(b(), p(1)))),
            and(
                Expr::Cmp(CmpOp::Ge, Box::new(a()), Box::new(p(0)), None),
                eq(b(), p(1)),
            ),
            and(eq(a(), c()), eq(b(), p(1))),
        ];
        for cond in &other {
            assert!(KeyShape::of(&t, Some(cond), true).is_none(), "{cond:?}");
        }
        // Index hints that rule out the primary key.
        assert!(KeyShape::of(&t, Some(&shaped[0]), false).is_none());
    }
}
