//! Evaluation of lowered expressions, and the kind of their values.

use std::cell::Cell;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Instant;

use schema::Collation;

use super::value::{
    self, datetime_of_micros, datetime_of_number, parse_datetime, str_number_prefix, Dec, Val,
    DECIMAL_SCALE_MAX, DIV_PRECISION_INCREMENT_DIGITS,
};
use super::SUBQUERY_ROWS_MESSAGE;
use super::{AggFn, AggSpec, Arith, CastTo, CmpOp, Expr, Kind, PerRow, Scope, SubQuery, SubTest};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{Date, Time};

/// Rows between two reads of the clock for `max_execution_time`.
pub const DEADLINE_CHECK_ROWS: u32 = 256;

/// A statement's time limit and when it runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub at: Instant,
    pub limit: TimeLimit,
}

/// Which variable a statement's deadline comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeLimit {
    /// MySQL's `max_execution_time` (a SELECT's): 3024, and an
    /// interrupted SLEEP returns 1.
    ExecutionTime,
    /// MariaDB's `max_statement_time` (any statement's): 1969, and an
    /// interrupted SLEEP fails the statement.
    StatementTime,
}

impl Deadline {
    /// The error of a statement stopped by it.
    pub fn error(self) -> SqlError {
        match self.limit {
            TimeLimit::ExecutionTime => SqlError::new(
                codes::QUERY_TIMEOUT,
                "Query execution was interrupted, maximum statement execution time exceeded",
            ),
            TimeLimit::StatementTime => SqlError::new(
                codes::STATEMENT_TIMEOUT,
                "Query execution was interrupted (max_statement_time exceeded)",
            ),
        }
    }
}

/// What an evaluation reads besides the row, and the warnings it leaves.
pub struct Ctx<'a> {
    /// Values of the `?` placeholders.
    pub params: &'a [Val],
    /// The aggregates of the current group.
    pub aggs: &'a [Val],
    /// The row's window function values (`Expr::Win`).
    pub windows: &'a [Val],
    /// The row `VALUES(col)` reads.
    pub insert_values: &'a [Val],
    /// Session facts functions read.
    pub env: &'a Env,
    /// Warnings (code, message) left so far.
    pub warnings: Vec<(u16, String)>,
    /// Set by `KILL QUERY`: long loops stop with 1317.
    pub killed: Option<&'a AtomicBool>,
    /// When `max_execution_time` (3024) or `max_statement_time` (1969)
    /// runs out: long loops stop with its error.
    pub deadline: Option<Deadline>,
    /// Calls of [`Ctx::check_killed`] since the clock was last read.
    pub checks: Cell<u32>,
    /// The deadline was seen passed (by a wait such as `SLEEP`): the next
    /// [`Ctx::check_killed`] fails without reading the clock.
    pub expired: Cell<bool>,
    /// Strict sql_mode: a value that does not fit its column is an error
    /// (else it is adjusted, with a warning).
    pub strict: bool,
    /// INSERT IGNORE / UPDATE IGNORE: a NULL for a NOT NULL column is
    /// stored as its type's zero with warning 1048, as MariaDB's.
    pub ignore: bool,
    /// Runs correlated subqueries for a row (None: none may run here).
    pub correlated: Option<&'a dyn PerRow>,
}

/// The session facts functions read (`NOW()`, `DATABASE()`, …).
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// `CONNECTION_ID()`.
    pub connection_id: u32,
    /// `DATABASE()`.
    pub database: Option<String>,
    /// `USER()`.
    pub user: std::sync::Arc<str>,
    /// `LAST_INSERT_ID()`: the session's own, which `LAST_INSERT_ID(expr)`
    /// sets.
    pub last_insert_id: std::sync::Arc<crate::engine::session::LastInsertId>,
    /// `FOUND_ROWS()` and `ROW_COUNT()`: of the statement before this one.
    pub found_rows: u64,
    pub row_count: i64,
    /// When the statement started, microseconds since the epoch (UTC).
    pub now_micros: i64,
    /// The session's time zone, seconds east of UTC (`NOW()` and TIMESTAMP
    /// columns are shown in it).
    pub tz_secs: i64,
    /// `VERSION()`.
    pub version: &'static str,
    /// `ndb_join_pushdown`: joins may be pushed to the data nodes.
    pub join_pushdown: bool,
    /// `sql_mode` has NO_ZERO_DATE: `'0000-00-00'` is not stored quietly.
    pub no_zero_date: bool,
    /// `sql_mode` has NO_ZERO_IN_DATE: a date with a zero month or day
    /// (`'2024-00-10'`) is not stored as it is.
    pub no_zero_in_date: bool,
    /// The SQL node's `GET_LOCK` locks (None where there is no SQL node:
    /// the functions are then NULL).
    pub user_locks: Option<std::sync::Arc<crate::engine::user_locks::UserLocks>>,
    /// The sequences of the statement's `RAND(seed)` calls, by call site.
    pub rand_states: super::func::RandStates,
    /// The user variables the statement assigned (`@n := @n + 1`), the
    /// session's ([`crate::engine::session::SessionState::assigned_vars`]).
    pub user_vars: std::sync::Arc<UserVarWrites>,
    /// The `Func::WarnOnce` sites that warned in the statement.
    pub warned_once: WarnedOnce,
    /// The range bounds whose warning the statement gave
    /// (`plan::range_bound_warnings`): shared by the runs of its
    /// correlated subqueries, which are planned per outer row where
    /// MariaDB plans them once.
    pub range_warned: std::sync::Arc<WarnedOnce>,
    /// The statement has IGNORE: a correlated scalar subquery of more than
    /// one row is NULL with warning 1242
    /// ([`crate::engine::session::SessionState::ignoring`]).
    pub ignoring: bool,
    /// `sql_safe_updates`: an UPDATE or DELETE that reads a table whole
    /// (no key narrows it) without LIMIT is 1175.
    pub safe_updates: bool,
}

/// The sites of a statement's constants whose warning was given (no
/// allocation until one is: see `Func::WarnOnce`).
#[derive(Debug, Default)]
pub struct WarnedOnce(std::sync::Mutex<Vec<u64>>);

impl WarnedOnce {
    /// Whether `site` warns now: true the first time.
    pub fn first(&self, site: u64) -> bool {
        let mut sites = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = !sites.contains(&site);
        if first {
            sites.push(site);
        }
        first
    }

    /// The sites that warned so far: a mark for [`WarnedOnce::forget_since`].
    pub fn mark(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Forgets the sites that warned after `mark`: a plan tried and
    /// dropped, whose warnings were dropped with it, warns again when the
    /// statement plans for real.
    pub fn forget_since(&self, mark: usize) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .truncate(mark);
    }
}

impl Clone for WarnedOnce {
    fn clone(&self) -> Self {
        WarnedOnce(std::sync::Mutex::new(
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        ))
    }
}

/// The user variables a statement assigns, by lowercase name, each with
/// its latest value: its later `@x` reads see them (`Func::UserVar`), and
/// the session keeps them when it ends. Empty (no allocation) for the
/// statements that assign none, nearly all.
#[derive(Debug, Default)]
pub struct UserVarWrites(std::sync::Mutex<Vec<(Arc<str>, Val)>>);

impl UserVarWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<str>, Val)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `@name := value`.
    pub fn set(&self, name: &str, value: Val) {
        let mut writes = self.lock();
        match writes.iter_mut().find(|(n, _)| &**n == name) {
            Some((_, v)) => *v = value,
            None => writes.push((Arc::from(name), value)),
        }
    }

    /// The value the statement last gave `name`, if it gave one.
    pub fn get(&self, name: &str) -> Option<Val> {
        self.lock()
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v.clone())
    }

    /// Whether the statement assigned none.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The assignments, in the order first made; none are left.
    pub fn take(&self) -> Vec<(Arc<str>, Val)> {
        std::mem::take(&mut *self.lock())
    }
}

/// Marks a code in [`Ctx::warnings`] as a note's (MySQL's codes are all
/// below it).
pub const NOTE_BIT: u16 = 0x8000;

/// Marks a code in [`Ctx::warnings`] as a warning of the statement's
/// planning (a constant condition's, which MariaDB's optimizer evaluates
/// before any row), or of a `JSON_TABLE`'s conversions (MariaDB's fill
/// of the table function's table): strict mode does not make it the
/// statement's error.
pub const PLANNED_BIT: u16 = 0x4000;

/// Marks a planning warning (with [`PLANNED_BIT`]) as one of converting
/// a constant when the statement is prepared (a string compared with a
/// BIGINT UNSIGNED column: MariaDB's `fix_fields`), before even a
/// multi-table UPDATE turns strict: no strict mode makes it an error.
pub const PREPARED_BIT: u16 = 0x2000;

/// The bits [`Ctx::warnings`] may carry besides MySQL's code.
pub const FLAG_BITS: u16 = NOTE_BIT | PLANNED_BIT | PREPARED_BIT;

impl<'a> Ctx<'a> {
    /// A context for a nested evaluation (one group's aggregates; rows
    /// whose correlated subqueries `correlated` runs): the same session
    /// facts and limits, with this one's warnings and clock checks moved
    /// over until [`Ctx::absorb`] takes them back.
    pub fn child<'b>(
        &mut self,
        params: &'b [Val],
        aggs: &'b [Val],
        correlated: Option<&'b dyn PerRow>,
    ) -> Ctx<'b>
    where
        'a: 'b,
    {
        Ctx {
            params,
            aggs,
            windows: &[],
            insert_values: &[],
            env: self.env,
            warnings: std::mem::take(&mut self.warnings),
            killed: self.killed,
            deadline: self.deadline,
            checks: Cell::new(self.checks.get()),
            expired: Cell::new(self.expired.get()),
            strict: self.strict,
            ignore: self.ignore,
            correlated,
        }
    }

    /// Takes back what [`Ctx::child`] lent: the warnings, as the child
    /// left them, and its clock checks.
    pub fn absorb(&mut self, child: Ctx<'_>) {
        self.warnings = child.warnings;
        self.checks.set(child.checks.get());
        self.expired.set(child.expired.get());
    }
    /// A context with these parameters.
    pub fn new(params: &'a [Val], env: &'a Env) -> Ctx<'a> {
        Ctx {
            params,
            aggs: &[],
            windows: &[],
            insert_values: &[],
            env,
            warnings: Vec::new(),
            killed: None,
            deadline: None,
            checks: Cell::new(0),
            expired: Cell::new(false),
            strict: true,
            ignore: false,
            correlated: None,
        }
    }

    /// Whether `KILL QUERY` or the deadline stopped the statement (reads
    /// the clock on every call: for loops that wait, not per row).
    pub fn interrupted(&self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d.at) {
            self.expired.set(true);
        }
        self.expired.get() || self.killed.is_some_and(|k| k.load(AtomicOrdering::Relaxed))
    }

    /// 1317 when `KILL QUERY` asked the statement to stop.
    /// 3024 or 1969 when the statement's `max_execution_time` or
    /// `max_statement_time` ran out (the clock is read once per
    /// [`DEADLINE_CHECK_ROWS`] calls).
    ///
    /// Inlined to a load and two tests where nothing is set or due: it
    /// runs once per row a statement reads (a call and its `Result` cost
    /// 0.8 % of the SQL node's instructions in oltp_read_only).
    #[inline]
    pub fn check_killed(&self) -> SqlResult<()> {
        let killed = self.killed.is_some_and(|k| k.load(AtomicOrdering::Relaxed));
        if killed || self.deadline.is_some() {
            return self.check_killed_or_late();
        }
        Ok(())
    }

    /// [`Ctx::check_killed`] in full: the error, or the deadline's count.
    #[inline(never)]
    fn check_killed_or_late(&self) -> SqlResult<()> {
        if let Some(k) = self.killed {
            if k.load(AtomicOrdering::Relaxed) {
                return Err(SqlError::new(
                    codes::QUERY_INTERRUPTED,
                    "Query execution was interrupted",
                ));
            }
        }
        if let Some(deadline) = self.deadline {
            let n = self.checks.get().wrapping_add(1);
            self.checks.set(n);
            if self.expired.get()
                || (n.is_multiple_of(DEADLINE_CHECK_ROWS) && Instant::now() >= deadline.at)
            {
                return Err(deadline.error());
            }
        }
        Ok(())
    }

    /// Leaves a warning.
    pub fn warn(&mut self, code: u16, message: impl Into<String>) {
        self.warnings.push((code, message.into()));
    }

    /// Leaves a note (level "Note", kept only under `sql_notes`): a
    /// warning whose code carries [`NOTE_BIT`].
    pub fn note(&mut self, code: u16, message: impl Into<String>) {
        self.warnings.push((code | NOTE_BIT, message.into()));
    }

    /// A string read as a double, warning 1292 when it is not wholly one.
    pub fn num_f64(&mut self, v: &Val) -> f64 {
        let (x, partial) = v.to_f64();
        if partial {
            self.warn(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect DOUBLE value: '{}'", shown(v)),
            );
        }
        x
    }

    /// A string read as a decimal (its number prefix), warning 1292 when it
    /// is not wholly one; None when the prefix has more digits than a
    /// decimal holds.
    pub fn str_dec(&mut self, bytes: &[u8]) -> Option<Dec> {
        let text = String::from_utf8_lossy(bytes);
        let (prefix, whole) = str_number_prefix(&text);
        if !whole {
            self.warn(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect DECIMAL value: '{text}'"),
            );
        }
        Dec::parse(prefix).or_else(|| Dec::of_double(prefix.parse().ok()?))
    }

    /// Whether `v` is true as a condition (NULL: None): a string is read as
    /// a double, warning 1292 when it is not wholly one, as MariaDB's
    /// `Item::val_bool` reads it (`'a' AND 1`, `IF('x', …)`, `s IS TRUE`).
    pub fn truth(&mut self, v: &Val) -> Option<bool> {
        match v {
            Val::Str(_) => Some(self.num_f64(v) != 0.0),
            other => other.truth(),
        }
    }

    /// A value read as an integer (rounded), for arguments that count.
    pub fn num_i64(&mut self, v: &Val) -> i64 {
        match v {
            Val::Int(x) => *x,
            Val::UInt(x) => i64::try_from(*x).unwrap_or(i64::MAX),
            Val::Dec(d) => d
                .rescale(0)
                .map_or(0, |d| i64::try_from(d.mantissa).unwrap_or(i64::MAX)),
            Val::Str(b) => {
                let text = String::from_utf8_lossy(b).into_owned();
                let (prefix, whole) = str_number_prefix(&text);
                if !whole {
                    self.warn(
                        codes::TRUNCATED_WRONG_VALUE,
                        format!("Truncated incorrect INTEGER value: '{text}'"),
                    );
                }
                prefix
                    .parse::<i64>()
                    .ok()
                    .or_else(|| prefix.parse::<f64>().ok().map(|f| f.round() as i64))
                    .unwrap_or(0)
            }
            other => {
                let f = self.num_f64(other);
                f.round() as i64
            }
        }
    }
}

/// The kind of an aggregate's values.
pub fn agg_kind(spec: &AggSpec) -> Kind {
    match spec.func {
        AggFn::Count | AggFn::CountStar => Kind::Int { unsigned: false },
        AggFn::BitAnd | AggFn::BitOr | AggFn::BitXor => Kind::Int { unsigned: true },
        AggFn::StdPop | AggFn::StdSamp | AggFn::VarPop | AggFn::VarSamp => Kind::Double,
        AggFn::Min | AggFn::Max | AggFn::GroupConcat => spec.arg_kind,
        AggFn::Sum => match spec.arg_kind {
            Kind::Int { .. } => Kind::Dec { scale: 0 },
            Kind::Dec { scale } => Kind::Dec { scale },
            _ => Kind::Double,
        },
        AggFn::Avg => match spec.arg_kind {
            Kind::Int { .. } => Kind::Dec {
                scale: DIV_PRECISION_INCREMENT_DIGITS,
            },
            Kind::Dec { scale } => Kind::Dec {
                scale: (scale + DIV_PRECISION_INCREMENT_DIGITS).min(DECIMAL_SCALE_MAX),
            },
            _ => Kind::Double,
        },
    }
}

/// The kind of an expression's values.
pub fn kind(e: &Expr, scope: &Scope<'_>) -> Kind {
    match e {
        Expr::Lit(v) => val_kind(v),
        Expr::Param(_) => Kind::Str {
            collation: Some(Collation::Utf8mb4GeneralCi),
        },
        Expr::Col(c) => scope.columns.get(*c).map_or(Kind::Null, |c| c.kind),
        Expr::InsertValue(c) => scope
            .insert_values
            .as_ref()
            .and_then(|v| v.get(*c))
            .map_or(Kind::Null, |c| c.kind),
        Expr::Agg(i) => {
            let Some(spec) = scope.aggs.as_ref().and_then(|a| a.get(*i)) else {
                return Kind::Null;
            };
            agg_kind(spec)
        }
        Expr::Win(i) => scope
            .windows
            .as_ref()
            .and_then(|w| w.get(*i))
            .map_or(Kind::Null, |w| w.kind),
        Expr::Neg(a) => match kind(a, scope) {
            Kind::Int { .. } => Kind::Int { unsigned: false },
            k if k.is_numeric() => k,
            _ => Kind::Double,
        },
        Expr::Arith(op, a, b, _) => arith_kind(*op, kind(a, scope), kind(b, scope)),
        Expr::Not(_)
        | Expr::Cmp(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Xor(..)
        | Expr::IsNull(..)
        | Expr::IsBool(..)
        | Expr::In(..)
        | Expr::Between(..)
        | Expr::Like(..) => Kind::Int { unsigned: false },
        Expr::Case(_, whens, otherwise) => {
            let results = whens
                .iter()
                .map(|(_, r)| r)
                .chain(otherwise.iter().map(|o| &**o));
            alternatives_kind(results, scope)
        }
        Expr::Cast(inner, CastTo::CharOf(_) | CastTo::BinaryOf(_)) => kind(inner, scope),
        Expr::Cast(_, to) => match to {
            CastTo::Signed => Kind::Int { unsigned: false },
            CastTo::Unsigned => Kind::Int { unsigned: true },
            CastTo::Char
            | CastTo::FixedChar(_)
            | CastTo::DoubleChar
            | CastTo::FloatChar
            | CastTo::ClippedChar(_) => Kind::Str {
                collation: Some(Collation::Utf8mb4GeneralCi),
            },
            CastTo::Binary | CastTo::BinaryOf(_) => Kind::Str { collation: None },
            CastTo::CharOf(_) => Kind::Str {
                collation: Some(Collation::Utf8mb4GeneralCi),
            },
            CastTo::Decimal(_, s) | CastTo::ClippedDecimal(_, s) => Kind::Dec { scale: *s },
            CastTo::Date => Kind::Date,
            CastTo::DateTime(fsp) => Kind::DateTime { fsp: *fsp },
            CastTo::Time(fsp) => Kind::Time { fsp: *fsp },
            CastTo::Double | CastTo::FixedDouble(_) | CastTo::Decimals(_) => Kind::Double,
            CastTo::NullOf(k, _) => *k,
        },
        Expr::Func(f, args) => f.kind(args, scope),
        Expr::Sub(s) => match s.test {
            SubTest::Scalar => s.kinds.first().copied().unwrap_or(Kind::Null),
            _ => Kind::Int { unsigned: false },
        },
    }
}

/// MariaDB's coercibility of `e` (`COERCIBILITY()`; where strings meet,
/// the least decides their collation): 0 explicit (COLLATE), 2 implicit
/// (a column, a CAST, a string made from one), 3 a system constant
/// (`DATABASE()`, `USER()`, `VERSION()`), 4 coercible (a literal, a
/// binary literal, `UNHEX`, `CHAR`, `FROM_BASE64`, a string made of
/// those), 5 a number or a date, 6 NULL.
pub fn coercibility(e: &Expr, scope: &Scope<'_>) -> u8 {
    match (kind(e, scope), e) {
        (Kind::Null, _) => COERCIBILITY_NULL,
        (Kind::Str { .. }, _) => text_coercibility(e, scope),
        _ => COERCIBILITY_NUMBER,
    }
}

/// COERCIBILITY of a column, a CAST, a string made from one.
const COERCIBILITY_IMPLICIT: u8 = 2;

/// COERCIBILITY of a number or a date.
const COERCIBILITY_NUMBER: u8 = 5;

/// COERCIBILITY of NULL.
const COERCIBILITY_NULL: u8 = 6;

/// COERCIBILITY of a literal.
const COERCIBILITY_LITERAL: u8 = 4;

/// [`coercibility`] of an expression known to be a string. A function's
/// is its string arguments' least (a literal's where it has none); the
/// arguments' kinds are not computed again, so a nesting costs what its
/// size does (a function of numbers among them counts as a literal).
/// A number or a date the lowering made text among strings
/// (`Func::NumberText`) counts as the number it is (5).
pub fn text_coercibility(e: &Expr, scope: &Scope<'_>) -> u8 {
    use super::Func as F;
    let least = |parts: &mut dyn Iterator<Item = &Expr>| {
        parts
            .map(|p| text_coercibility(p, scope))
            .filter(|x| *x <= COERCIBILITY_LITERAL)
            .min()
            .unwrap_or(COERCIBILITY_LITERAL)
    };
    match e {
        Expr::Lit(Val::Null) => COERCIBILITY_NULL,
        Expr::Lit(Val::Str(_)) | Expr::Param(_) => COERCIBILITY_LITERAL,
        Expr::Func(F::Collate(_), _) => 0,
        Expr::Func(F::Database | F::User | F::Version, _) => 3,
        Expr::Func(F::BinaryLiteral | F::Unhex | F::Char | F::FromBase64, _) => {
            COERCIBILITY_LITERAL
        }
        // A user variable's, a BIT column's bytes: implicit, as a column's.
        Expr::Func(F::UserVar | F::BitBytes, _) => COERCIBILITY_IMPLICIT,
        Expr::Func(F::NumberText, _) => COERCIBILITY_NUMBER,
        Expr::Func(_, args) => least(&mut args.iter()),
        Expr::Case(_, whens, otherwise) => least(
            &mut whens
                .iter()
                .map(|(_, r)| r)
                .chain(otherwise.iter().map(|o| &**o)),
        ),
        Expr::Cast(
            _,
            CastTo::Binary
            | CastTo::Char
            | CastTo::FixedChar(_)
            | CastTo::DoubleChar
            | CastTo::FloatChar
            | CastTo::ClippedChar(_)
            | CastTo::CharOf(_)
            | CastTo::BinaryOf(_),
        ) => COERCIBILITY_IMPLICIT,
        Expr::Col(_) | Expr::InsertValue(_) | Expr::Agg(_) | Expr::Win(_) | Expr::Sub(_) => {
            match kind(e, scope) {
                Kind::Str { .. } => COERCIBILITY_IMPLICIT,
                Kind::Null => COERCIBILITY_NULL,
                _ => COERCIBILITY_NUMBER,
            }
        }
        _ => COERCIBILITY_NUMBER,
    }
}

/// The string kind strings meet in (CONCAT's arguments, CASE's or
/// COALESCE's alternatives), as MariaDB's `DTCollation::aggregate` finds
/// it: the collation of the least [`coercibility`], binary at a tie
/// (`CONCAT(s, 0x41)` is `s`'s text, `CONCAT(0x41, 'a')` bytes). None:
/// no string among them.
pub fn shared_text_kind<'e>(
    exprs: impl Iterator<Item = &'e Expr>,
    scope: &Scope<'_>,
) -> Option<Kind> {
    let strings = exprs.filter_map(|e| match kind(e, scope) {
        Kind::Str { collation } => Some((text_coercibility(e, scope), collation)),
        _ => None,
    });
    least_coercible(strings).map(|collation| Kind::Str { collation })
}

/// Of strings' coercibility and collation (None: binary), the collation
/// of the least coercibility, binary at a tie and else the first's
/// ([`shared_text_kind`], a UNION's text column). None: no string.
pub fn least_coercible(
    strings: impl Iterator<Item = (u8, Option<Collation>)>,
) -> Option<Option<Collation>> {
    let mut best: Option<(u8, Option<Collation>)> = None;
    for (x, collation) in strings {
        best = Some(match best {
            Some((least, c)) if x == least => (least, c.and(collation)),
            Some((least, c)) if x > least => (least, c),
            _ => (x, collation),
        });
    }
    best.map(|(_, collation)| collation)
}

/// The kind alternatives share ([`merge_kinds`]: IF's, CASE's,
/// COALESCE's), a string's in the collation they meet in
/// ([`least_coercible`]). Each alternative's kind is computed once, so
/// nested alternatives cost what their size does.
pub fn alternatives_kind<'e>(
    alternatives: impl Iterator<Item = &'e Expr>,
    scope: &Scope<'_>,
) -> Kind {
    let parts: Vec<(&Expr, Kind)> = alternatives.map(|e| (e, kind(e, scope))).collect();
    let merged = merge_kinds(parts.iter().map(|(_, k)| *k));
    if !matches!(merged, Kind::Str { .. }) {
        return merged;
    }
    let strings = parts.iter().filter_map(|(e, k)| match k {
        Kind::Str { collation } => Some((text_coercibility(e, scope), *collation)),
        _ => None,
    });
    least_coercible(strings).map_or(merged, |collation| Kind::Str { collation })
}

/// The kind several alternatives' values share (CASE, IF, COALESCE).
pub fn merge_kinds(kinds: impl Iterator<Item = Kind>) -> Kind {
    let mut out = Kind::Null;
    for k in kinds {
        out = match (out, k) {
            (Kind::Null, k) | (k, Kind::Null) => k,
            (a, b) if a == b => a,
            (Kind::Int { unsigned: a }, Kind::Int { unsigned: b }) => {
                Kind::Int { unsigned: a && b }
            }
            (Kind::Int { .. }, Kind::Dec { scale }) | (Kind::Dec { scale }, Kind::Int { .. }) => {
                Kind::Dec { scale }
            }
            (Kind::Dec { scale: a }, Kind::Dec { scale: b }) => Kind::Dec { scale: a.max(b) },
            // Datetimes (times) of different digits: the most of them, as
            // MariaDB's IF, GREATEST or COALESCE of DATETIME(3) and DATETIME.
            (Kind::DateTime { fsp: a }, Kind::DateTime { fsp: b }) => {
                Kind::DateTime { fsp: a.max(b) }
            }
            (Kind::Time { fsp: a }, Kind::Time { fsp: b }) => Kind::Time { fsp: a.max(b) },
            (a, b) if a.is_numeric() && b.is_numeric() => Kind::Double,
            (Kind::Str { collation: a }, Kind::Str { collation: b }) => Kind::Str {
                collation: a.and(b),
            },
            _ => Kind::Str {
                collation: Some(Collation::Utf8mb4GeneralCi),
            },
        };
    }
    out
}

/// The kind of a constant.
pub fn val_kind(v: &Val) -> Kind {
    match v {
        Val::Null => Kind::Null,
        Val::Int(_) => Kind::Int { unsigned: false },
        Val::UInt(_) => Kind::Int { unsigned: true },
        Val::Dec(d) => Kind::Dec { scale: d.scale },
        Val::Double(_) => Kind::Double,
        Val::Str(_) => Kind::Str {
            collation: Some(Collation::Utf8mb4GeneralCi),
        },
        Val::Date(_) => Kind::Date,
        Val::DateTime(_, t) => Kind::DateTime {
            fsp: if t.micros == 0 { 0 } else { 6 },
        },
        Val::Time(m) => Kind::Time {
            fsp: if m % 1_000_000 == 0 { 0 } else { 6 },
        },
    }
}

fn arith_kind(op: Arith, a: Kind, b: Kind) -> Kind {
    // A date or time among them makes the integer signed (`arith`).
    let temporal = a.is_temporal() || b.is_temporal();
    let num = |k: Kind| match k {
        Kind::Str { .. } | Kind::Null => Kind::Double,
        Kind::Date | Kind::DateTime { .. } | Kind::Time { .. } => Kind::Int { unsigned: false },
        k => k,
    };
    let (a, b) = (num(a), num(b));
    match op {
        Arith::IntDiv => Kind::Int {
            unsigned: matches!(a, Kind::Int { unsigned: true })
                || matches!(b, Kind::Int { unsigned: true }),
        },
        Arith::UnsignedIntDiv => Kind::Int { unsigned: true },
        _ => match (a, b) {
            (Kind::Double, _) | (_, Kind::Double) => Kind::Double,
            // A remainder has the dividend's sign (MariaDB's MOD is
            // unsigned when its first argument is).
            (Kind::Int { unsigned: ua }, Kind::Int { .. }) if op == Arith::Mod => Kind::Int {
                unsigned: !temporal && ua,
            },
            (Kind::Int { unsigned: ua }, Kind::Int { unsigned: ub }) if op != Arith::Div => {
                Kind::Int {
                    unsigned: !temporal && (ua || ub),
                }
            }
            _ => {
                let sa = dec_scale(a);
                let sb = dec_scale(b);
                let scale = match op {
                    Arith::Add | Arith::Sub | Arith::Mod => sa.max(sb),
                    Arith::Mul => (sa + sb).min(DECIMAL_SCALE_MAX),
                    _ => (sa + DIV_PRECISION_INCREMENT_DIGITS).min(DECIMAL_SCALE_MAX),
                };
                Kind::Dec { scale }
            }
        },
    }
}

fn dec_scale(k: Kind) -> u8 {
    match k {
        Kind::Dec { scale } => scale,
        _ => 0,
    }
}

/// Whether the value is a date, a datetime or a time.
fn is_temporal(v: &Val) -> bool {
    matches!(v, Val::Date(_) | Val::DateTime(..) | Val::Time(_))
}

/// A date, datetime or time as its number: an integer when it has no
/// fraction, else a DECIMAL; any other value as it is.
fn temporal_integer(v: Val) -> Val {
    if !is_temporal(&v) {
        return v;
    }
    let d = v.temporal_number();
    match i64::try_from(d.mantissa) {
        Ok(i) if d.scale == 0 => Val::Int(i),
        _ => Val::Dec(d),
    }
}

/// A value as an exact decimal (None for what is a double).
fn as_dec(v: &Val) -> Option<Dec> {
    match v {
        Val::Int(x) => Some(Dec::new(i128::from(*x), 0)),
        Val::UInt(x) => Some(Dec::new(i128::from(*x), 0)),
        Val::Dec(d) => Some(*d),
        Val::Date(_) | Val::DateTime(..) | Val::Time(_) => Some(v.temporal_number()),
        _ => None,
    }
}

fn out_of_range(ty: &str, text: String) -> SqlError {
    SqlError::new(1690, format!("{ty} value is out of range in '{text}'"))
}

impl Expr {
    /// Evaluates over `row`.
    pub fn eval(&self, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        Ok(match self {
            Expr::Lit(v) => v.clone(),
            Expr::Param(i) => ctx.params.get(*i).cloned().ok_or_else(|| {
                SqlError::new(
                    codes::WRONG_ARGUMENTS,
                    "Incorrect arguments to mysqld_stmt_execute",
                )
            })?,
            Expr::Col(c) => row.get(*c).cloned().unwrap_or(Val::Null),
            Expr::Agg(i) => ctx.aggs.get(*i).cloned().unwrap_or(Val::Null),
            Expr::Win(i) => ctx.windows.get(*i).cloned().unwrap_or(Val::Null),
            Expr::InsertValue(i) => ctx.insert_values.get(*i).cloned().unwrap_or(Val::Null),
            Expr::Neg(a) => match a.eval(row, ctx)? {
                Val::Null => Val::Null,
                Val::Int(x) => Val::Int(
                    x.checked_neg()
                        .ok_or_else(|| out_of_range("BIGINT", format!("-({x})")))?,
                ),
                Val::UInt(x) => {
                    let neg = -i128::from(x);
                    Val::Int(
                        i64::try_from(neg)
                            .map_err(|_| out_of_range("BIGINT", format!("-({x})")))?,
                    )
                }
                Val::Dec(d) => Val::Dec(Dec::new(-d.mantissa, d.scale)),
                Val::Double(x) => Val::Double(-x),
                other => Val::Double(-ctx.num_f64(&other)),
            },
            Expr::Not(a) => match cond_truth(a, a.eval(row, ctx)?, ctx) {
                None => Val::Null,
                Some(t) => Val::Int(i64::from(!t)),
            },
            Expr::Arith(op, a, b, eager) => {
                let x = a.eval(row, ctx)?;
                // A NULL left operand is the answer. MariaDB's DECIMAL
                // arithmetic does not evaluate the right one (its 1690, say,
                // does not happen: `d + (u + 1)`); its integer and double
                // arithmetic does, and its error or warning (text read as
                // a double) comes all the same.
                if x.is_null() {
                    if *eager {
                        b.eval(row, ctx)?;
                    }
                    return Ok(Val::Null);
                }
                let y = b.eval(row, ctx)?;
                arith(*op, x, y, ctx)?
            }
            Expr::Cmp(op, a, b, coll) => {
                let x = a.eval(row, ctx)?;
                // Likewise for a comparison (MariaDB's Arg_comparator).
                if x.is_null() && *op != CmpOp::NullSafeEq {
                    return Ok(Val::Null);
                }
                let y = b.eval(row, ctx)?;
                if *op == CmpOp::NullSafeEq {
                    return Ok(Val::Int(i64::from(match (x.is_null(), y.is_null()) {
                        (true, true) => true,
                        (false, false) => compare(&x, &y, *coll, ctx) == Ordering::Equal,
                        _ => false,
                    })));
                }
                if x.is_null() || y.is_null() {
                    return Ok(Val::Null);
                }
                let o = compare(&x, &y, *coll, ctx);
                Val::Int(i64::from(match op {
                    CmpOp::Eq | CmpOp::NullSafeEq => o == Ordering::Equal,
                    CmpOp::Ne => o != Ordering::Equal,
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                }))
            }
            Expr::And(a, b) => {
                let x = cond_truth(a, a.eval(row, ctx)?, ctx);
                if x == Some(false) {
                    return Ok(Val::Int(0));
                }
                let y = cond_truth(b, b.eval(row, ctx)?, ctx);
                match (x, y) {
                    (_, Some(false)) => Val::Int(0),
                    (Some(true), Some(true)) => Val::Int(1),
                    _ => Val::Null,
                }
            }
            Expr::Or(a, b) => {
                let x = cond_truth(a, a.eval(row, ctx)?, ctx);
                if x == Some(true) {
                    return Ok(Val::Int(1));
                }
                let y = cond_truth(b, b.eval(row, ctx)?, ctx);
                match (x, y) {
                    (_, Some(true)) => Val::Int(1),
                    (Some(false), Some(false)) => Val::Int(0),
                    _ => Val::Null,
                }
            }
            // A NULL left side is the answer without the right one, as
            // MariaDB's Item_func_xor stops at its first NULL.
            Expr::Xor(a, b) => match a.truth_of(row, ctx)? {
                None => Val::Null,
                Some(x) => match b.truth_of(row, ctx)? {
                    Some(y) => Val::Int(i64::from(x != y)),
                    None => Val::Null,
                },
            },
            Expr::IsNull(a, negated) => {
                Val::Int(i64::from(a.eval(row, ctx)?.is_null() != *negated))
            }
            Expr::IsBool(a, want, negated) => {
                let is = a.truth_of(row, ctx)? == Some(*want);
                Val::Int(i64::from(is != *negated))
            }
            Expr::In(a, list, negated, coll, from) => {
                // A subquery's that gave no rows: FALSE even of NULL.
                if list.is_empty() && *from != super::InList::Written {
                    return Ok(Val::Int(i64::from(*negated)));
                }
                let x = a.eval(row, ctx)?;
                if x.is_null() {
                    return Ok(Val::Null);
                }
                let mut saw_null = false;
                let mut found = false;
                // The warnings of the comparisons (not of the items).
                let mut compared: Vec<(u16, String)> = Vec::new();
                for item in list {
                    let y = item.eval(row, ctx)?;
                    if y.is_null() {
                        saw_null = true;
                        continue;
                    }
                    let before = ctx.warnings.len();
                    let equal = compare(&x, &y, *coll, ctx) == Ordering::Equal;
                    if *from == super::InList::Written && ctx.warnings.len() > before {
                        // One comparator per type reads `x` once: the same
                        // conversion warns once.
                        let mut at = before;
                        while at < ctx.warnings.len() {
                            if compared.contains(&ctx.warnings[at]) {
                                ctx.warnings.remove(at);
                            } else {
                                compared.push(ctx.warnings[at].clone());
                                at += 1;
                            }
                        }
                    }
                    if equal {
                        found = true;
                        break;
                    }
                }
                if found {
                    Val::Int(i64::from(!*negated))
                } else if saw_null {
                    Val::Null
                } else {
                    Val::Int(i64::from(*negated))
                }
            }
            Expr::Between(a, lo, hi, negated, coll) => {
                let x = a.eval(row, ctx)?;
                let l = lo.eval(row, ctx)?;
                let h = hi.eval(row, ctx)?;
                if x.is_null() {
                    return Ok(Val::Null);
                }
                // `x >= low AND x <= high` in three-valued logic, the three
                // compared under one type: strings as strings, numbers
                // exactly, a mix of strings and integers as decimals and
                // other mixes of strings and numbers as doubles (MariaDB's
                // aggregation for comparison).
                let is_str = |v: &Val| matches!(v, Val::Str(_));
                let is_num = |v: &Val| {
                    matches!(v, Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_))
                };
                let all = [&x, &l, &h];
                let mixed = all.iter().any(|v| is_str(v)) && all.iter().any(|v| is_num(v));
                let integers = mixed
                    && !all
                        .iter()
                        .any(|v| matches!(v, Val::Dec(_) | Val::Double(_)));
                let mut side = |bound: &Val, want: Ordering| -> Option<bool> {
                    if bound.is_null() {
                        return None;
                    }
                    let o = if integers {
                        let (a, b) = (decimal_operand(&x, ctx), decimal_operand(bound, ctx));
                        a.cmp_dec(b)
                    } else if mixed {
                        let (a, b) = (ctx.num_f64(&x), ctx.num_f64(bound));
                        a.partial_cmp(&b).unwrap_or(Ordering::Equal)
                    } else {
                        compare(&x, bound, *coll, ctx)
                    };
                    Some(o != want)
                };
                let above = side(&l, Ordering::Less);
                let below = side(&h, Ordering::Greater);
                let inside = match (above, below) {
                    (Some(false), _) | (_, Some(false)) => false,
                    (Some(true), Some(true)) => true,
                    _ => return Ok(Val::Null),
                };
                Val::Int(i64::from(inside != *negated))
            }
            Expr::Like(a, p, escape, negated, coll) => {
                let x = a.eval(row, ctx)?;
                let pat = p.eval(row, ctx)?;
                if x.is_null() || pat.is_null() {
                    return Ok(Val::Null);
                }
                let ci = *coll == Some(Collation::Utf8mb4GeneralCi);
                let m = like(&x.to_text(), &pat.to_text(), *escape, ci);
                Val::Int(i64::from(m != *negated))
            }
            Expr::Case(operand, whens, otherwise) => {
                let base = match operand {
                    Some(o) => Some(o.eval(row, ctx)?),
                    None => None,
                };
                for (cond, result) in whens {
                    let c = cond.eval(row, ctx)?;
                    let hit = match &base {
                        Some(b) => {
                            !b.is_null()
                                && !c.is_null()
                                && compare(b, &c, Some(Collation::Utf8mb4GeneralCi), ctx)
                                    == Ordering::Equal
                        }
                        None => ctx.truth(&c) == Some(true),
                    };
                    if hit {
                        return result.eval(row, ctx);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(row, ctx)?,
                    None => Val::Null,
                }
            }
            Expr::Cast(a, to) => {
                let v = a.eval(row, ctx)?;
                cast(v, to, ctx)?
            }
            Expr::Func(f, args) => f.eval(args, row, ctx)?,
            Expr::Sub(sub) => {
                let Some(runner) = ctx.correlated else {
                    return Err(SqlError::unsupported("correlated subqueries here"));
                };
                let mut aggs = Vec::with_capacity(sub.aggs.len());
                for (_, a) in &sub.aggs {
                    aggs.push(a.eval(row, ctx)?);
                }
                let m = runner.rows(sub, row, &aggs)?;
                ctx.warnings.extend(runner.take_warnings());
                sub_value(sub, &m.rows, row, ctx)?
            }
        })
    }

    /// The value's truth ([`Ctx::truth`]).
    fn truth_of(&self, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Option<bool>> {
        let v = self.eval(row, ctx)?;
        Ok(ctx.truth(&v))
    }

    /// Evaluates as a condition: true only when the value is true. A
    /// conjunct that is not true ends it, NULL as FALSE (MariaDB's
    /// `abort_on_null` for a WHERE's or ON's AND): the conjuncts after it
    /// are not evaluated, nor their warnings given. So is an AND under the
    /// condition's ORs (MariaDB's `Item_cond` hands `top_level_item` down
    /// to its arguments, AND and OR alike; not through NOT, XOR or a
    /// function): `a > 9 OR b = 0 AND s = 1` of a NULL b never compares
    /// s (DML seed 255), which no OR's answer can need (an AND that is
    /// NULL there makes it true no more than FALSE does).
    pub fn test(&self, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<bool> {
        match self {
            Expr::And(a, b) => Ok(a.test(row, ctx)? && b.test(row, ctx)?),
            Expr::Or(a, b) => Ok(a.test(row, ctx)? || b.test(row, ctx)?),
            _ => Ok(cond_truth(self, self.eval(row, ctx)?, ctx) == Some(true)),
        }
    }
}

/// Whether `v`, the value of `e`, is true as a condition of WHERE, ON,
/// AND, OR or NOT: a string column's text is read as a DECIMAL, as
/// MariaDB takes such a column there for `col <> 0` (its warning names
/// DECIMAL); any other value as [`Ctx::truth`] reads it.
fn cond_truth(e: &Expr, v: Val, ctx: &mut Ctx<'_>) -> Option<bool> {
    match (e, &v) {
        (Expr::Col(_), Val::Str(bytes)) => Some(match text_decimal(bytes, ctx) {
            Ok(d) => d.mantissa != 0,
            Err(x) => x != 0.0,
        }),
        _ => ctx.truth(&v),
    }
}

/// What a correlated subquery's rows make of its test, with MySQL's
/// NULLs (as the uncorrelated form's constants give them).
fn sub_value(sub: &SubQuery, rows: &[Vec<Val>], row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Val> {
    let first = |r: &Vec<Val>| r.first().cloned().unwrap_or(Val::Null);
    Ok(match &sub.test {
        SubTest::Scalar => match rows {
            [] => Val::Null,
            [r] => first(r),
            _ if ctx.env.ignoring => {
                ctx.warn(codes::SUBQUERY_NO_1_ROW, SUBQUERY_ROWS_MESSAGE);
                Val::Null
            }
            _ => {
                return Err(SqlError::new(
                    codes::SUBQUERY_NO_1_ROW,
                    SUBQUERY_ROWS_MESSAGE,
                ))
            }
        },
        SubTest::Exists(negated) => Val::Int(i64::from(rows.is_empty() == *negated)),
        SubTest::In(_, negated) | SubTest::Quantified(.., negated) if rows.is_empty() => {
            Val::Int(i64::from(*negated))
        }
        SubTest::In(left, negated) => {
            let mut xs = Vec::with_capacity(left.len());
            for (x, _) in left {
                xs.push(x.eval(row, ctx)?);
            }
            // OR over the rows of the AND over the items' equalities.
            let mut any = Some(false);
            for r in rows {
                let mut all = Some(true);
                for ((x, (_, coll)), y) in xs.iter().zip(left).zip(r) {
                    let eq = if x.is_null() || y.is_null() {
                        None
                    } else {
                        Some(compare(x, y, *coll, ctx) == Ordering::Equal)
                    };
                    all = and3(all, eq);
                }
                any = or3(any, all);
                if any == Some(true) {
                    break;
                }
            }
            truth_val(any.map(|b| b != *negated))
        }
        SubTest::Quantified(x, coll, op, all) => {
            let x = x.eval(row, ctx)?;
            let mut out = Some(*all);
            for r in rows {
                let c = Expr::Cmp(
                    *op,
                    Box::new(Expr::Lit(x.clone())),
                    Box::new(Expr::Lit(first(r))),
                    *coll,
                )
                .eval(&[], ctx)?
                .truth();
                out = if *all { and3(out, c) } else { or3(out, c) };
                if out == Some(!*all) {
                    break;
                }
            }
            truth_val(out)
        }
    })
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn truth_val(b: Option<bool>) -> Val {
    b.map_or(Val::Null, |b| Val::Int(i64::from(b)))
}

/// Arithmetic with MySQL's result types.
pub fn arith(op: Arith, x: Val, y: Val, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
    if x.is_null() || y.is_null() {
        // A string operand makes it double arithmetic, which MariaDB does
        // after it has read both operands: text that is no number warns
        // (1292) beside a NULL too, and fails a strict write.
        for v in [&x, &y] {
            if matches!(v, Val::Str(_)) {
                ctx.num_f64(v);
            }
        }
        return Ok(Val::Null);
    }
    // A date, datetime or time (of no fraction: one with a fraction is
    // lowered as a DECIMAL) is a signed integer, MariaDB's INT_RESULT of
    // it, and beside an unsigned one the result is signed: `f - d` of 1
    // and 2000-06-15 is -20000614, past BIGINT's range 1690.
    let temporal = is_temporal(&x) || is_temporal(&y);
    let (x, y) = if temporal {
        (temporal_integer(x), temporal_integer(y))
    } else {
        (x, y)
    };
    let sym = match op {
        Arith::Add => "+",
        Arith::Sub => "-",
        Arith::Mul => "*",
        Arith::Div => "/",
        Arith::IntDiv | Arith::UnsignedIntDiv => "DIV",
        Arith::Mod => "%",
    };
    let text = || format!("{} {sym} {}", x.to_text(), y.to_text());
    let is_double = |v: &Val| matches!(v, Val::Double(_) | Val::Str(_));
    if matches!(op, Arith::IntDiv | Arith::UnsignedIntDiv) {
        let unsigned = op == Arith::UnsignedIntDiv;
        // A double (or a string's number) divides as the decimal of its
        // digits, as MariaDB's DIV does: (2^64 - 1 + 0e0) DIV 3 is
        // 6148914691236517333, where the double quotient's was ...6864.
        // Text is read as a DECIMAL (its warning names DECIMAL).
        let mut exact = |v: &Val| match v {
            Val::Str(b) => match ctx.str_dec(b) {
                Some(d) => Val::Dec(d),
                None => Val::Double(v.to_f64().0),
            },
            Val::Double(_) => {
                let f = ctx.num_f64(v);
                Dec::of_double(f).map_or(Val::Double(f), Val::Dec)
            }
            other => other.clone(),
        };
        let (dx, dy) = (exact(&x), exact(&y));
        let r = arith(Arith::Div, dx, dy, ctx)?;
        return Ok(match r {
            Val::Null => Val::Null,
            Val::Double(f) => {
                let t = f.trunc();
                if unsigned && t < 0.0 {
                    return Err(out_of_range("BIGINT UNSIGNED", text()));
                }
                if t.abs() >= 9.223_372_036_854_776e18 {
                    return Err(out_of_range("BIGINT", text()));
                }
                Val::Int(t as i64)
            }
            Val::Dec(d) => {
                let q = d.mantissa / 10i128.pow(u32::from(d.scale));
                if unsigned || matches!(x, Val::UInt(_)) || matches!(y, Val::UInt(_)) {
                    Val::UInt(
                        u64::try_from(q).map_err(|_| out_of_range("BIGINT UNSIGNED", text()))?,
                    )
                } else {
                    Val::Int(i64::try_from(q).map_err(|_| out_of_range("BIGINT", text()))?)
                }
            }
            other => other,
        });
    }
    if is_double(&x) || is_double(&y) {
        let a = ctx.num_f64(&x);
        let b = ctx.num_f64(&y);
        let r = match op {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div | Arith::Mod if b == 0.0 => {
                ctx.warn(codes::DIVISION_BY_ZERO, "Division by 0");
                return Ok(Val::Null);
            }
            Arith::Div => a / b,
            _ => a % b,
        };
        if !r.is_finite() {
            return Err(out_of_range("DOUBLE", text()));
        }
        return Ok(Val::Double(r));
    }
    let unsigned = !temporal
        && match op {
            // The remainder's sign is the dividend's: -5 % CAST(3 AS
            // UNSIGNED) is -2, not out of range.
            Arith::Mod => matches!(x, Val::UInt(_)),
            _ => matches!(x, Val::UInt(_)) || matches!(y, Val::UInt(_)),
        };
    let ints = matches!(x, Val::Int(_) | Val::UInt(_)) && matches!(y, Val::Int(_) | Val::UInt(_));
    let (Some(a), Some(b)) = (as_dec(&x), as_dec(&y)) else {
        return Ok(Val::Null);
    };
    if ints && op != Arith::Div {
        let (a, b) = (a.mantissa, b.mantissa);
        let r = match op {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a
                .checked_mul(b)
                .ok_or_else(|| out_of_range("BIGINT", text()))?,
            _ => {
                if b == 0 {
                    ctx.warn(codes::DIVISION_BY_ZERO, "Division by 0");
                    return Ok(Val::Null);
                }
                a % b
            }
        };
        return if unsigned {
            u64::try_from(r)
                .map(Val::UInt)
                .map_err(|_| out_of_range("BIGINT UNSIGNED", text()))
        } else {
            i64::try_from(r)
                .map(Val::Int)
                .map_err(|_| out_of_range("BIGINT", text()))
        };
    }
    let overflow = || out_of_range("DECIMAL", text());
    let scale = a.scale.max(b.scale);
    let r = match op {
        Arith::Add | Arith::Sub | Arith::Mod => {
            let a2 = a.rescale(scale).ok_or_else(overflow)?;
            let b2 = b.rescale(scale).ok_or_else(overflow)?;
            let m = match op {
                Arith::Add => a2.mantissa.checked_add(b2.mantissa),
                Arith::Sub => a2.mantissa.checked_sub(b2.mantissa),
                _ => {
                    if b2.mantissa == 0 {
                        ctx.warn(codes::DIVISION_BY_ZERO, "Division by 0");
                        return Ok(Val::Null);
                    }
                    Some(a2.mantissa % b2.mantissa)
                }
            };
            Dec::new(m.ok_or_else(overflow)?, scale)
        }
        Arith::Mul => {
            let m = a.mantissa.checked_mul(b.mantissa).ok_or_else(overflow)?;
            let d = Dec::new(m, a.scale + b.scale);
            if d.scale > DECIMAL_SCALE_MAX {
                d.rescale(DECIMAL_SCALE_MAX).ok_or_else(overflow)?
            } else {
                d
            }
        }
        _ => {
            if b.mantissa == 0 {
                ctx.warn(codes::DIVISION_BY_ZERO, "Division by 0");
                return Ok(Val::Null);
            }
            // The quotient keeps MariaDB's digits (`decimal_div`: whole
            // words of nine, truncated), more than the scale it is shown
            // with (`div_precision_increment` more than a's, its kind):
            // ROUND(1/3, 6) is 0.333333 and SUM(x / 7) adds 0.142857142s,
            // not 0.1429s; sending, storing and string contexts round it.
            let shown = (a.scale + DIV_PRECISION_INCREMENT_DIGITS).min(DECIMAL_SCALE_MAX);
            if a.mantissa == 0 {
                // MariaDB's zero quotient has no digits (`decimal_make_zero`):
                // shown at its scale, 0.0000; made a UNION's string, 0.
                return Ok(Val::Dec(Dec::new(0, 0)));
            }
            let scale = division_digits(a.scale, b.scale).max(shown);
            let shift = u32::from(scale) + u32::from(b.scale) - u32::from(a.scale);
            let num = value::Mantissa::from(10i128)
                .checked_pow(shift)
                .and_then(|p| a.mantissa.checked_mul(p));
            match num {
                Some(num) => Dec::new(num / b.mantissa, scale),
                None => {
                    // Too many digits for them: at the shown scale, rounded.
                    let shift = u32::from(shown) + u32::from(b.scale) + 1 - u32::from(a.scale);
                    let num = a
                        .mantissa
                        .checked_mul(
                            value::Mantissa::from(10i128)
                                .checked_pow(shift)
                                .ok_or_else(overflow)?,
                        )
                        .ok_or_else(overflow)?;
                    let q = num / b.mantissa;
                    Dec::new((q + q.signum() * 5i128) / 10i128, shown)
                }
            }
        }
    };
    // MySQL's DECIMAL holds 65 digits: a result past them is out of range.
    if !r.fits() {
        return Err(overflow());
    }
    Ok(Val::Dec(r))
}

/// Digits after the point a decimal quotient holds, as MariaDB's
/// `do_div_mod` makes them: each operand's fraction in whole words of
/// nine digits, plus what `div_precision_increment` asks beyond the words'
/// padding, in whole words again (1/3: 9 digits, 1.123456789012/3: 18);
/// at most [`DECIMAL_SCALE_MAX`].
pub fn division_digits(a_scale: u8, b_scale: u8) -> u8 {
    let words =
        |digits: u32| digits.div_ceil(value::DECIMAL_WORD_DIGITS) * value::DECIMAL_WORD_DIGITS;
    let (a, b) = (u32::from(a_scale), u32::from(b_scale));
    let (fa, fb) = (words(a), words(b));
    let padding = (fa - a) + (fb - b);
    let incr = u32::from(DIV_PRECISION_INCREMENT_DIGITS).saturating_sub(padding);
    words(fa + fb + incr).min(u32::from(DECIMAL_SCALE_MAX)) as u8
}

/// Compares two non-NULL values as MySQL does: strings as strings under
/// the collation, a temporal value with a string as temporal values,
/// numbers exactly where they can be, doubles otherwise.
pub fn compare(x: &Val, y: &Val, coll: Option<Collation>, ctx: &mut Ctx<'_>) -> Ordering {
    match (x, y) {
        (Val::Str(a), Val::Str(b)) => compare_str(a, b, coll),
        (Val::Int(a), Val::Int(b)) => a.cmp(b),
        (Val::UInt(a), Val::UInt(b)) => a.cmp(b),
        (Val::Int(a), Val::UInt(b)) => i128::from(*a).cmp(&i128::from(*b)),
        (Val::UInt(a), Val::Int(b)) => i128::from(*a).cmp(&i128::from(*b)),
        (Val::Date(_) | Val::DateTime(..), Val::Str(s)) => {
            match temporal_of_text(&String::from_utf8_lossy(s)) {
                Some(t) => packed_temporal(x).cmp(&packed_temporal(&t)),
                // Text that is no date reads as the zero datetime, with
                // MariaDB's warning (`d > 'x'` holds).
                None => {
                    ctx.warn(
                        codes::TRUNCATED_WRONG_VALUE,
                        format!("Truncated incorrect datetime value: '{}'", y.to_text()),
                    );
                    packed_temporal(x).cmp(&0)
                }
            }
        }
        (Val::Str(_), Val::Date(_) | Val::DateTime(..)) => compare(y, x, coll, ctx).reverse(),
        (
            Val::Date(_) | Val::DateTime(..),
            Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_),
        ) => packed_temporal(x).cmp(&packed_number(y, matches!(x, Val::DateTime(..)), ctx)),
        (
            Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_),
            Val::Date(_) | Val::DateTime(..),
        ) => compare(y, x, coll, ctx).reverse(),
        (Val::Date(_) | Val::DateTime(..), Val::Date(_) | Val::DateTime(..)) => {
            packed_temporal(x).cmp(&packed_temporal(y))
        }
        (Val::Time(a), Val::Time(b)) => a.cmp(b),
        (Val::Time(a), Val::Str(s)) => a.cmp(&super::func::compared_time(s, ctx)),
        (Val::Str(_), Val::Time(_)) => compare(y, x, coll, ctx).reverse(),
        (Val::Str(s), Val::Int(_) | Val::UInt(_)) => compare_text_decimal(s, y, ctx),
        (Val::Int(_) | Val::UInt(_), Val::Str(s)) => compare_text_decimal(s, x, ctx).reverse(),
        (Val::Double(_), _) | (_, Val::Double(_)) | (Val::Str(_), _) | (_, Val::Str(_)) => {
            compare_f64(x, y, ctx)
        }
        _ => match (as_dec(x), as_dec(y)) {
            (Some(a), Some(b)) => a.cmp_dec(b),
            _ => compare_f64(x, y, ctx),
        },
    }
}

/// A string against an integer, compared as DECIMAL as MariaDB compares
/// them (`'1.00000000000000000001' = 1` is false; as doubles it was
/// true), with MariaDB's 1292 for text that is not wholly a number. A
/// number past a decimal's digits (`'1e400'`) compares as a double.
fn compare_text_decimal(text: &[u8], int: &Val, ctx: &mut Ctx<'_>) -> Ordering {
    match (text_decimal(text, ctx), as_dec(int)) {
        (Ok(a), Some(b)) => a.cmp_dec(b),
        (Ok(a), None) => a
            .to_f64()
            .partial_cmp(&int.to_f64().0)
            .unwrap_or(Ordering::Equal),
        (Err(a), _) => a.partial_cmp(&int.to_f64().0).unwrap_or(Ordering::Equal),
    }
}

/// A constant string compared with a number column, read once as the
/// comparison reads it per row ([`compare`]): a DECIMAL against an
/// integer column (a double past a decimal's digits), a double against
/// the others; 1292 once when it is not wholly a number.
pub fn compared_number(text: &[u8], integer_column: bool, ctx: &mut Ctx<'_>) -> Val {
    if integer_column {
        match text_decimal(text, ctx) {
            Ok(d) => Val::Dec(d),
            Err(f) => Val::Double(f),
        }
    } else {
        Val::Double(ctx.num_f64(&Val::Str(text.to_vec())))
    }
}

/// A value as a warning's message shows it: a string's control characters
/// and bytes that are no UTF-8 as `\xNN`, as MariaDB's ErrConvString.
pub fn shown(v: &Val) -> String {
    match v {
        Val::Str(bytes) => shown_bytes(bytes),
        other => other.to_text(),
    }
}

/// [`shown`] of a string's bytes.
fn shown_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                for b in c.to_string().bytes() {
                    out.push_str(&format!("\\x{b:02X}"));
                }
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// A string read as a DECIMAL for a comparison (1292 when it is not
/// wholly a number), or, past a decimal's digits or with an exponent,
/// as the double it starts with (Err). Nothing is allocated unless it
/// warns.
fn text_decimal(bytes: &[u8], ctx: &mut Ctx<'_>) -> Result<Dec, f64> {
    let text = String::from_utf8_lossy(bytes);
    let (prefix, whole) = str_number_prefix(&text);
    if !whole {
        ctx.warn(
            codes::TRUNCATED_WRONG_VALUE,
            format!(
                "Truncated incorrect DECIMAL value: '{}'",
                shown_bytes(bytes)
            ),
        );
    }
    let parsed = if prefix.contains(['e', 'E']) {
        None
    } else if prefix.is_empty() {
        Some(Dec::new(0, 0))
    } else {
        Dec::parse(prefix)
    };
    parsed.ok_or_else(|| {
        let f = value::prefix_double(prefix).0;
        // Past MariaDB's own decimal ('1e400' > 1): its overflow, 1916
        // and 1292, though the comparison's answer is the double's.
        if f.abs() >= DECIMAL_OVERFLOW_AT && whole {
            decimal_overflow(ctx, Some(&shown_bytes(bytes)));
        }
        f
    })
}

/// An operand of a comparison of strings and integers, as a DECIMAL (a
/// string past a decimal's range: the nearest of ±10^65 - 1's ends).
fn decimal_operand(v: &Val, ctx: &mut Ctx<'_>) -> Dec {
    match v {
        Val::Str(b) => text_decimal(b, ctx).unwrap_or_else(|f| {
            let max = value::pow10(value::DECIMAL_DIGITS_MAX as u8) - 1i128;
            Dec::new(if f < 0.0 { -max } else { max }, 0)
        }),
        other => as_dec(other).unwrap_or(Dec::new(0, 0)),
    }
}

fn compare_f64(x: &Val, y: &Val, ctx: &mut Ctx<'_>) -> Ordering {
    let a = ctx.num_f64(x);
    let b = ctx.num_f64(y);
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Compares strings under a collation (None: bytes).
pub fn compare_str(a: &[u8], b: &[u8], coll: Option<Collation>) -> Ordering {
    match coll {
        None => a.cmp(b),
        // Not decoded first: the lossy decoding of both strings per
        // comparison was an eighth of the SQL node's CPU on sysbench's
        // ORDER BY c, where strings differ within a few bytes.
        Some(c) => c.compare_bytes(a, b),
    }
}

/// A date or datetime as the number `YYYYMMDDhhmmss` and its
/// microseconds, in one key whose order is time's (a zero month or day
/// sorts before the first).
fn packed_temporal(v: &Val) -> i128 {
    let (d, t) = match v {
        Val::Date(d) => (*d, Time::default()),
        Val::DateTime(d, t) => (*d, *t),
        _ => return 0,
    };
    let ymd = i128::from(d.year) * 10_000 + i128::from(d.month) * 100 + i128::from(d.day);
    let hms = i128::from(t.hour) * 10_000 + i128::from(t.minute) * 100 + i128::from(t.second);
    (ymd * 1_000_000 + hms) * 1_000_000 + i128::from(t.micros)
}

/// A number compared with a date or datetime, as MariaDB compares them:
/// read as a datetime ([`datetime_of_number`]'s layouts: `[YY]YYMMDD`,
/// `[YY]YYMMDDhhmmss`, a two-digit year 2000-2069 below 70), not as the
/// date's number (`TIMESTAMP '2023-01-01 10:00' > 20240101` is false; it
/// was true, 20230101100000 against 20240101). Its fraction is
/// microseconds of a datetime's time, none of a date's. One that is no
/// datetime (negative, 1 to 100, past 14 digits, a part out of its range)
/// is the zero date and 1292, as MariaDB's; a zero month or day is kept.
fn packed_number(v: &Val, with_time: bool, ctx: &mut Ctx<'_>) -> i128 {
    let (whole, micros) = match v {
        Val::Int(i) => (i128::from(*i), 0),
        Val::UInt(u) => (i128::from(*u), 0),
        Val::Dec(d) => {
            let p = value::pow10(d.scale);
            let whole = value::saturating_i128(d.mantissa.div_euclid(p));
            let frac = d.mantissa.rem_euclid(p);
            let micros = Dec::new(frac, d.scale)
                .rescale(6)
                .map_or(0, |m| value::saturating_i128(m.mantissa).min(999_999));
            (whole, micros)
        }
        Val::Double(f) => {
            let whole = f.floor();
            let micros = ((f - whole) * 1e6).round().min(999_999.0) as i128;
            (whole as i128, micros)
        }
        _ => (0, 0),
    };
    let year_of = |yy: i128| if yy < 70 { 2000 + yy } else { 1900 + yy };
    let packed = match whole {
        0 => Some(0),
        101..=999_999 => Some((year_of(whole / 10_000) * 10_000 + whole % 10_000) * 1_000_000),
        1_000_000..=99_999_999 => Some(whole * 1_000_000),
        100_000_000..=999_999_999_999 => {
            Some(year_of(whole / 10_000_000_000) * 10_000_000_000 + whole % 10_000_000_000)
        }
        1_000_000_000_000..=99_999_999_999_999 => Some(whole),
        _ => None,
    };
    // Its parts within their ranges (a zero month or day is a fuzzy date
    // MariaDB compares; day 48 is no date: 648 is the zero date).
    let packed = packed.filter(|p| {
        let part = |at: u32| p / 10i128.pow(at) % 100;
        *p == 0
            || (part(8) <= 12 && part(6) <= 31 && part(4) <= 23 && part(2) <= 59 && part(0) <= 59)
    });
    match packed {
        Some(p) => {
            // A date's fraction is dropped (MariaDB's note 1292), a
            // datetime's is its microseconds.
            let micros = if with_time { micros } else { 0 };
            if !with_time && micros_of(v) {
                ctx.note(
                    codes::TRUNCATED_WRONG_VALUE,
                    format!("Truncated incorrect date value: '{}'", v.to_text()),
                );
            }
            p * 1_000_000 + micros
        }
        None => {
            ctx.warn(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect datetime value: '{}'", v.to_text()),
            );
            0
        }
    }
}

/// A number read once as a DATE's or DATETIME's value (`with_time`), as
/// MariaDB's IN reads its list of numbers against such a column when it
/// prepares the statement: the value [`packed_number`] makes of it, so it
/// compares as the number would, the zero date with 1292 for one that
/// is no date; and whether it was one (0 is).
pub fn temporal_of_number(v: &Val, with_time: bool, ctx: &mut Ctx<'_>) -> (Val, bool) {
    let before = ctx.warnings.len();
    let packed = packed_number(v, with_time, ctx);
    let date = ctx.warnings.len() == before || packed != 0;
    let part = |p: i128, unit: i128| u32::try_from((p / unit) % 100).unwrap_or(0);
    let micros = u32::try_from(packed % 1_000_000).unwrap_or(0);
    let hms = packed / 1_000_000 % 1_000_000;
    let ymd = packed / 1_000_000_000_000;
    let day = Date {
        year: u16::try_from(ymd / 10_000).unwrap_or(0),
        month: part(ymd, 100) as u8,
        day: part(ymd, 1) as u8,
    };
    let time = Time {
        hour: part(hms, 10_000) as u8,
        minute: part(hms, 100) as u8,
        second: part(hms, 1) as u8,
        micros,
    };
    (Val::DateTime(day, time), date)
}

/// Whether a number has a fraction.
fn micros_of(v: &Val) -> bool {
    match v {
        Val::Dec(d) => d.mantissa % value::pow10(d.scale) != 0,
        Val::Double(f) => f.fract() != 0.0,
        _ => false,
    }
}

/// A date or datetime read from text for a comparison: a zero month or
/// day is kept (`d < '2024-00-05'`), as MariaDB compares them.
pub fn temporal_of_text(text: &str) -> Option<Val> {
    let (d, t) = super::value::parse_datetime_compared(text)?;
    Some(match t {
        Some(t) => Val::DateTime(d, t),
        None => Val::Date(d),
    })
}

/// Whether `text` matches the LIKE `pattern`.
pub fn like(text: &str, pattern: &str, escape: char, ci: bool) -> bool {
    // Characters match by their general_ci weights, one weight per
    // character (so `_` is one character); the pattern's `%`, `_` and
    // escape are found before weighing (a letter escape stays itself).
    let weigh = |c: char| {
        if ci {
            Collation::Utf8mb4GeneralCi.weight(c)
        } else {
            c
        }
    };
    let t: Vec<char> = text.chars().map(weigh).collect();
    let p: Vec<char> = pattern.chars().collect();
    // Tokens: Some(c) literal, None for `_`, and `%` as a separate flag.
    #[derive(Clone, Copy, PartialEq)]
    enum Tok {
        Lit(char),
        One,
        Any,
    }
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        if c == escape && i + 1 < p.len() {
            toks.push(Tok::Lit(weigh(p[i + 1])));
            i += 2;
            continue;
        }
        toks.push(match c {
            '%' => Tok::Any,
            '_' => Tok::One,
            c => Tok::Lit(weigh(c)),
        });
        i += 1;
    }
    // Iterative matching with backtracking to the last `%`.
    let (mut ti, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match toks.get(pi) {
            Some(Tok::Any) => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(Tok::One) => {
                ti += 1;
                pi += 1;
            }
            Some(Tok::Lit(c)) if *c == t[ti] => {
                ti += 1;
                pi += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    toks[pi..].iter().all(|t| *t == Tok::Any)
}

/// What follows the integer `text` starts with (after blanks and a sign),
/// None when it starts with none.
fn integer_text_rest(text: &str) -> Option<&str> {
    let unsigned = text.trim_start_matches([' ', '\t', '\n', '\r']);
    let unsigned = unsigned.strip_prefix(['-', '+']).unwrap_or(unsigned);
    let rest = unsigned.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < unsigned.len()).then_some(rest)
}

/// A string read as an integer, as MariaDB's my_strtoll10 reads it: a
/// fraction or an exponent is cut (a warning), trailing spaces too (a
/// note); past `hi` or below BIGINT, the nearest of them and 1292. The
/// value and whether it was clamped.
pub fn string_integer(b: &[u8], hi: i128, ctx: &mut Ctx<'_>) -> (i128, bool) {
    let text = String::from_utf8_lossy(b).into_owned();
    let (prefix, _) = str_number_prefix(&text);
    let whole = match integer_text_rest(&text) {
        Some("") => true,
        Some(rest) if rest.trim_matches(' ').is_empty() => {
            ctx.note(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect INTEGER value: '{text}'"),
            );
            true
        }
        _ => {
            ctx.warn(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect INTEGER value: '{text}'"),
            );
            false
        }
    };
    let int_part = prefix.split(['.', 'e', 'E']).next().unwrap_or("");
    let lo = i128::from(i64::MIN);
    let digits = int_part.trim_start_matches(['-', '+']);
    let (i, past_i128) = match int_part.parse::<i128>() {
        Ok(i) => (i, false),
        Err(_) if digits.is_empty() => (0, false),
        Err(_) if int_part.starts_with('-') => (lo, true),
        Err(_) => (hi, true),
    };
    let clamped = past_i128 || !(lo..=hi).contains(&i);
    if whole && clamped {
        ctx.warn(
            codes::TRUNCATED_WRONG_VALUE,
            format!("Truncated incorrect INTEGER value: '{text}'"),
        );
    }
    (i.clamp(lo, hi), clamped)
}

/// MariaDB's 1916 of a value `shown` clamped to the type `ty` ("INT",
/// "UNSIGNED BIGINT", …).
pub fn overflow_message(shown: &str, ty: &str) -> String {
    format!("Got overflow when converting '{shown}' to {ty}. Value truncated")
}

/// Where a string's number overflows MariaDB's own decimal (nine words
/// of nine digits: 10^81), before any type's range is applied.
const DECIMAL_OVERFLOW_AT: f64 = 1e81;

/// MariaDB's warnings of a number past its own decimal: 1916, and 1292
/// naming the string (`text`) it was read from.
fn decimal_overflow(ctx: &mut Ctx<'_>, text: Option<&str>) {
    ctx.warn(codes::DATA_OVERFLOW, overflow_message("", "DECIMAL"));
    if let Some(text) = text {
        ctx.warn(
            codes::TRUNCATED_WRONG_VALUE,
            format!("Truncated incorrect DECIMAL value: '{text}'"),
        );
    }
}

/// `CAST(v AS to)`.
pub fn cast(v: Val, to: &CastTo, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
    if v.is_null() {
        return Ok(Val::Null);
    }
    Ok(match to {
        CastTo::Signed | CastTo::Unsigned => {
            // A string past BIGINT is clamped with its own warning.
            let mut clamped = false;
            let i: i128 = match &v {
                Val::Int(x) => i128::from(*x),
                Val::UInt(x) => i128::from(*x),
                Val::Dec(d) => {
                    // A decimal past the type's range is its nearest end
                    // and a warning, as MariaDB's (an integer wraps).
                    let i = d.round_i128();
                    let (lo, hi) = if *to == CastTo::Unsigned {
                        (0, i128::from(u64::MAX))
                    } else {
                        (i128::from(i64::MIN), i128::from(i64::MAX))
                    };
                    if !(lo..=hi).contains(&i) {
                        let ty = if *to == CastTo::Unsigned {
                            "UNSIGNED INT"
                        } else {
                            "INT"
                        };
                        ctx.warn(codes::DATA_OVERFLOW, overflow_message(&d.to_text(), ty));
                    }
                    i.clamp(lo, hi)
                }
                Val::Double(f) => {
                    // Rounded half to even (2.5 is 2), as MariaDB's rint.
                    // Past the type: its nearest end and note 1916, as
                    // MariaDB's (a negative double is 0 UNSIGNED, not
                    // wrapped as an integer is).
                    let f = f.round_ties_even();
                    let (lo, hi, ty) = if *to == CastTo::Unsigned {
                        (0.0, u64::MAX as f64, "UNSIGNED BIGINT")
                    } else {
                        (i64::MIN as f64, i64::MAX as f64, "SIGNED BIGINT")
                    };
                    if f < lo || f >= hi {
                        ctx.note(codes::DATA_OVERFLOW, overflow_message(&v.to_text(), ty));
                    }
                    if *to == CastTo::Unsigned {
                        i128::from(f as u64)
                    } else {
                        i128::from(f as i64)
                    }
                }
                Val::Str(b) => {
                    // Past BIGINT UNSIGNED: its end, then wrapped to the
                    // type below as an integer is (`'99…9' AS SIGNED` is
                    // -1), as MariaDB's.
                    let (i, past) = string_integer(b, i128::from(u64::MAX), ctx);
                    clamped = past;
                    i
                }
                other => other.temporal_number().round_i128(),
            };
            // An integer (or a string's) wrapped into the other half of
            // the type: a note, as MariaDB's Item_func_unsigned and
            // Item_func_signed give (a string past BIGINT wraps quietly).
            let wrapped = match (to, &v) {
                (CastTo::Unsigned, Val::Int(_) | Val::Str(_)) if i < 0 && !clamped => {
                    Some("unsigned converted negative")
                }
                // Of a string only: MariaDB wraps an unsigned integer
                // (`CAST(u AS SIGNED)`) quietly.
                (CastTo::Signed, Val::Str(_)) if i > i128::from(i64::MAX) && !clamped => {
                    Some("signed converted positive out-of-range")
                }
                _ => None,
            };
            if let Some(what) = wrapped {
                ctx.note(
                    codes::UNKNOWN,
                    format!(
                        "Cast to {what} integer to it's {} complement",
                        if i < 0 { "positive" } else { "negative" }
                    ),
                );
            }
            if *to == CastTo::Unsigned {
                Val::UInt(if i < 0 {
                    (i as i64) as u64
                } else {
                    i.min(u64::MAX as i128) as u64
                })
            } else {
                Val::Int(if i > i128::from(i64::MAX) {
                    (i as u64) as i64
                } else {
                    i.max(i128::from(i64::MIN)) as i64
                })
            }
        }
        CastTo::Char => Val::str(v.to_text()),
        // MariaDB warns of the cut with `abort_on_warning` off: no strict
        // mode makes it an error (the flag bits say so).
        &CastTo::CharOf(chars) => {
            let Val::Str(bytes) = v else { return Ok(v) };
            let cut = String::from_utf8_lossy(&bytes)
                .char_indices()
                .nth(chars as usize)
                .map(|(at, _)| at);
            match cut {
                Some(at) => {
                    ctx.warn(
                        codes::TRUNCATED_WRONG_VALUE | PLANNED_BIT | PREPARED_BIT,
                        format!(
                            "Truncated incorrect CHAR({chars}) value: '{}'",
                            shown(&Val::Str(bytes.clone()))
                        ),
                    );
                    Val::Str(bytes[..at].to_vec())
                }
                None => Val::Str(bytes),
            }
        }
        &CastTo::BinaryOf(length) => {
            let Val::Str(mut bytes) = v else { return Ok(v) };
            let length = length as usize;
            if bytes.len() > length {
                ctx.warn(
                    codes::TRUNCATED_WRONG_VALUE | PLANNED_BIT | PREPARED_BIT,
                    format!(
                        "Truncated incorrect BINARY({length}) value: '{}'",
                        shown(&Val::Str(bytes.clone()))
                    ),
                );
                bytes.truncate(length);
            } else {
                bytes.resize(length, 0);
            }
            Val::Str(bytes)
        }
        CastTo::ClippedChar(chars) => {
            let mut text = v.to_text();
            // A number's text is ASCII: characters are bytes.
            text.truncate(usize::try_from(*chars).unwrap_or(usize::MAX));
            Val::str(text)
        }
        CastTo::FloatChar => match v {
            Val::Double(f) => {
                let mut text = Vec::new();
                crate::protocol::float_text(f as f32, &mut text);
                Val::Str(text)
            }
            other => Val::str(other.to_text()),
        },
        CastTo::DoubleChar => match v {
            Val::Int(_) | Val::UInt(_) | Val::Dec(_) => {
                Val::str(Val::Double(v.to_f64().0).to_text())
            }
            other => Val::str(other.to_text()),
        },
        CastTo::FixedChar(decimals) => match v {
            Val::Double(f) if f.is_finite() => {
                let mut text = Vec::new();
                crate::protocol::fixed_decimals_text(f, *decimals, &mut text);
                Val::Str(text)
            }
            // A number of a DOUBLE expression (GREATEST(5, TRUNCATE(x, 1))
            // taking its integer) is that double: `5.0`, as MariaDB's.
            Val::Int(_) | Val::UInt(_) | Val::Dec(_) => {
                let mut text = Vec::new();
                crate::protocol::fixed_decimals_text(v.to_f64().0, *decimals, &mut text);
                Val::Str(text)
            }
            // A temporal value with its kind's fractional digits.
            Val::DateTime(d, t) => Val::str(super::value::datetime_text(d, t, *decimals)),
            Val::Time(m) => Val::str(super::value::time_text(m, *decimals)),
            other => Val::str(other.to_text()),
        },
        // A string's bytes as they are: through text, bytes that are not
        // UTF-8 would become U+FFFD.
        CastTo::Binary => match v {
            Val::Str(bytes) => Val::Str(bytes),
            other => Val::Str(other.to_text().into_bytes()),
        },
        CastTo::Double => Val::Double(ctx.num_f64(&v)),
        CastTo::FixedDouble(fixed) => {
            let f = ctx.num_f64(&v);
            fixed_double(f, fixed, ctx)
        }
        CastTo::Decimals(_) | CastTo::NullOf(..) => v,
        &CastTo::ClippedDecimal(p, s) => {
            // Its numbers fit a decimal of 65 digits at s: no warning.
            let wide = CastTo::Decimal(value::DECIMAL_DIGITS_MAX as u8, s);
            match cast(v, &wide, ctx)? {
                Val::Dec(d) => {
                    let max = value::pow10(p) - 1i128;
                    Val::Dec(Dec::new(d.mantissa.clamp(-max, max), s))
                }
                other => other,
            }
        }
        &CastTo::Decimal(p, s) => {
            // p is at most 65 (cast_to refuses more).
            let max = value::pow10(p) - 1i128;
            let out_of_range = |negative: bool, ctx: &mut Ctx<'_>| {
                ctx.warn(
                    codes::OUT_OF_RANGE,
                    "Out of range value for column 'CAST' at row 1".to_owned(),
                );
                Val::Dec(Dec::new(if negative { -max } else { max }, s))
            };
            let d = match &v {
                Val::Double(f) => Dec::of_double(*f),
                Val::Str(b) => ctx.str_dec(b),
                other => as_dec(other),
            };
            // No number at all ('x', ''): 0, its 1292 given.
            let d = d.or_else(|| (v.to_f64().0.abs() < 1.0).then(|| Dec::new(0, 0)));
            let Some(d) = d else {
                // Past a decimal's digits ('1e80', a double of 1e300): the
                // type's end. From 10^81 on MariaDB's own decimal
                // overflows first (1916, and 1292 of a string) and holds
                // 65 nines, which only a type of 65 whole digits keeps
                // without 1264.
                let f = v.to_f64().0;
                if f.abs() >= DECIMAL_OVERFLOW_AT {
                    let text = matches!(v, Val::Str(_)).then(|| shown(&v));
                    decimal_overflow(ctx, text.as_deref());
                    if u32::from(p - s) >= value::DECIMAL_DIGITS_MAX {
                        return Ok(Val::Dec(Dec::new(if f < 0.0 { -max } else { max }, s)));
                    }
                }
                return Ok(out_of_range(f < 0.0, ctx));
            };
            // A value whose digits at scale s pass any decimal's is out of
            // range too, not 0.
            let Some(r) = d.rescale(s) else {
                return Ok(out_of_range(d.mantissa < 0i128, ctx));
            };
            if r.mantissa.unsigned_abs() > max.unsigned_abs() {
                out_of_range(r.mantissa < 0i128, ctx)
            } else {
                Val::Dec(r)
            }
        }
        CastTo::Date => match to_datetime(&v, ctx) {
            Some((d, _)) => Val::Date(d),
            None => Val::Null,
        },
        CastTo::DateTime(fsp) => match to_datetime(&v, ctx) {
            Some((d, mut t)) => {
                let unit = 10u32.pow(6 - u32::from((*fsp).min(6)));
                t.micros = t.micros / unit * unit;
                Val::DateTime(d, t)
            }
            None => Val::Null,
        },
        CastTo::Time(_) => super::func::time_of(&v, ctx),
    })
}

/// `CAST(f AS DOUBLE(M,D))` as MariaDB's `truncate_double` makes it: below
/// 31 decimals the fraction rounded to D half to even (2.25 is 2.2 at
/// D = 1) and the value clipped to M − D integer digits; from 31 on only
/// the double's range. A clipped value is a note 1264 (a CAST writes to
/// no column, so strict mode makes no error of it), "at row 1" as
/// MariaDB's always is; NaN is NULL with it.
fn fixed_double(f: f64, fixed: &super::FixedCast, ctx: &mut Ctx<'_>) -> Val {
    let note = |ctx: &mut Ctx<'_>| {
        let name = fixed.name.as_deref().unwrap_or("(null)");
        ctx.note(
            codes::OUT_OF_RANGE,
            format!("Out of range value for column '{name}' at row 1"),
        );
    };
    if f.is_nan() {
        note(ctx);
        return Val::Null;
    }
    if fixed.float {
        let max = f64::from(f32::MAX);
        if f.abs() > max {
            note(ctx);
            return Val::Double(max.copysign(f));
        }
        return Val::Double(f64::from(f as f32));
    }
    let (rounded, max) = if fixed.d < super::NOT_FIXED_DECIMALS {
        let digits = crate::engine::catalog::FixedDigits {
            m: fixed.m,
            d: fixed.d,
        };
        (digits.round(f), digits.max())
    } else {
        (f, f64::MAX)
    };
    if rounded.abs() > max {
        note(ctx);
        return Val::Double(max.copysign(rounded));
    }
    Val::Double(rounded)
}

/// A value as a date and time a calendar computation can use: as
/// [`to_datetime`], but a date with a zero month or day (the zero date
/// `0000-00-00`, or `2024-02-00`) warns 1292 and is None, as MariaDB's
/// DATEDIFF, TO_DAYS, DAYOFWEEK, LAST_DAY, WEEK and their kin have it
/// (YEAR, MONTH, DAY, QUARTER and DATE_FORMAT read its parts as they are).
/// A DATE or DATETIME value (a column's) is NULL without the warning,
/// as MariaDB's.
pub fn calendar_datetime(v: &Val, ctx: &mut Ctx<'_>) -> Option<(Date, Time)> {
    let (d, t) = to_datetime(v, ctx)?;
    if d.month == 0 || d.day == 0 {
        if matches!(v, Val::Date(_) | Val::DateTime(..)) {
            return None;
        }
        ctx.warn(
            codes::TRUNCATED_WRONG_VALUE,
            format!("Incorrect datetime value: '{}'", v.to_text()),
        );
        return None;
    }
    Some((d, t))
}

/// A value as a date and time (a date at midnight); warns 1292 and gives
/// None when it is not one.
pub fn to_datetime(v: &Val, ctx: &mut Ctx<'_>) -> Option<(Date, Time)> {
    read_datetime(v, false, ctx)
}

/// [`to_datetime`], but text or a number with a zero month or day
/// (`'2024-00-10'`, `20240200`) is that fuzzy date, as MariaDB reads one
/// for the functions that read a date's parts (YEAR, MONTH, DAY, DATE,
/// DATE_FORMAT, QUARTER, MONTHNAME, LAST_DAY); a calendar computation
/// refuses it ([`calendar_datetime`]).
pub fn fuzzy_datetime(v: &Val, ctx: &mut Ctx<'_>) -> Option<(Date, Time)> {
    read_datetime(v, true, ctx)
}

fn read_datetime(v: &Val, fuzzy: bool, ctx: &mut Ctx<'_>) -> Option<(Date, Time)> {
    match v {
        Val::Date(d) => Some((*d, Time::default())),
        Val::DateTime(d, t) => Some((*d, *t)),
        Val::Time(m) => {
            let local = ctx.env.now_micros + ctx.env.tz_secs * 1_000_000;
            let today = local.div_euclid(86_400_000_000) * 86_400_000_000;
            datetime_of_micros(today + m)
        }
        Val::Null => None,
        other => {
            let number = match other {
                Val::Int(n) => u64::try_from(*n).ok(),
                Val::UInt(n) => Some(*n),
                // Its whole part (MySQL reads the fraction as microseconds
                // of a datetime; a date has none).
                Val::Dec(d) if d.mantissa >= 0 => {
                    let p = 10i128.pow(u32::from(d.scale));
                    if d.mantissa % p != 0 {
                        ctx.note(
                            codes::TRUNCATED_WRONG_VALUE,
                            format!("Truncated incorrect date value: '{}'", other.to_text()),
                        );
                    }
                    u64::try_from(d.mantissa / p).ok()
                }
                _ => None,
            };
            let mut text = None;
            let parsed = match number {
                // A number is read as one (`YEAR(0)`, `YEAR(240229)`), not
                // as the text of its digits.
                Some(n) if fuzzy => value::datetime_of_number_fuzzy(n),
                Some(n) => datetime_of_number(n),
                None if fuzzy => value::parse_datetime_fuzzy(text.insert(other.to_text())),
                None => parse_datetime(text.insert(other.to_text())),
            };
            match parsed {
                Some((d, t)) => Some((d, t.unwrap_or_default())),
                None => {
                    let text = text.unwrap_or_else(|| other.to_text());
                    ctx.warn(
                        codes::TRUNCATED_WRONG_VALUE,
                        format!("Incorrect datetime value: '{text}'"),
                    );
                    None
                }
            }
        }
    }
}
