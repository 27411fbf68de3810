//! Expressions: Skarv's own tree lowered from the parser's, and their
//! evaluation with MySQL's types, coercions and NULL semantics.
//!
//! Lowering resolves column names to positions in the row the expression
//! is evaluated over ([`Scope`]), numbers `?` placeholders in text order,
//! and pulls aggregate calls out into a list the executor computes
//! ([`AggSpec`]; the expression then reads the aggregate's value).

mod case_table;
pub mod eval;
mod func;
pub mod json;
mod locale;
pub mod value;
pub mod window;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use schema::Collation;
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Location;

pub use eval::{Ctx, Env};
pub(crate) use func::member_number;
pub use func::Func;
pub use func::{aggregate_bits_of, compared_time, stored_time};
pub use value::{Dec, Val};
pub use window::{Frame, FrameBound, WinFn, WinSpec};

use crate::engine::exec::derived::Materialised;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta, ColumnType};

/// Most arguments of an `IN` list lowered (bounds the work of one row).
pub const IN_LIST_ITEMS_MAX: usize = 65_536;
/// Deepest nesting of an expression lowered (bounds the recursion).
pub const EXPR_DEPTH_MAX: usize = 128;

/// Stack that must be left for one more level of lowering, in bytes;
/// with less, it goes on a new segment of [`LOWER_STACK_SEGMENT_BYTES`].
const LOWER_STACK_RED_ZONE_BYTES: usize = 256 << 10;

/// A new stack segment for lowering, in bytes (freed when it returns).
const LOWER_STACK_SEGMENT_BYTES: usize = 2 << 20;

/// What an expression's values are, for coercion and result metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Always NULL.
    Null,
    /// An integer.
    Int {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// A decimal with this many digits after the point.
    Dec {
        /// Digits after the point.
        scale: u8,
    },
    /// A double.
    Double,
    /// A string, under a collation (None: binary).
    Str {
        /// How it compares.
        collation: Option<Collation>,
    },
    /// A date.
    Date,
    /// A date and time.
    DateTime {
        /// Fractional digits shown.
        fsp: u8,
    },
    /// A duration.
    Time {
        /// Fractional digits shown.
        fsp: u8,
    },
}

impl Kind {
    /// Whether values of this kind are numbers.
    pub fn is_numeric(self) -> bool {
        matches!(self, Kind::Int { .. } | Kind::Dec { .. } | Kind::Double)
    }

    /// Whether temporal.
    pub fn is_temporal(self) -> bool {
        matches!(self, Kind::Date | Kind::DateTime { .. } | Kind::Time { .. })
    }
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFn {
    /// `COUNT(*)`.
    CountStar,
    /// `COUNT(x)`.
    Count,
    /// `SUM(x)`.
    Sum,
    /// `AVG(x)`.
    Avg,
    /// `MIN(x)`.
    Min,
    /// `MAX(x)`.
    Max,
    /// `GROUP_CONCAT(…)` ([`AggSpec::concat`] holds its parts).
    GroupConcat,
    /// `STD(x)`, `STDDEV(x)`, `STDDEV_POP(x)`: population standard deviation.
    StdPop,
    /// `STDDEV_SAMP(x)`: sample standard deviation (NULL below two rows).
    StdSamp,
    /// `VARIANCE(x)`, `VAR_POP(x)`: population variance.
    VarPop,
    /// `VAR_SAMP(x)`: sample variance (NULL below two rows).
    VarSamp,
    /// `BIT_AND(x)`: all ones (2^64 - 1) over no rows.
    BitAnd,
    /// `BIT_OR(x)`: 0 over no rows.
    BitOr,
    /// `BIT_XOR(x)`: 0 over no rows.
    BitXor,
}

impl AggFn {
    /// The aggregate an upper-case name calls (`star`: `COUNT(*)`),
    /// GROUP_CONCAT aside.
    pub fn by_name(name: &str, star: bool) -> Option<AggFn> {
        match name {
            "COUNT" if star => Some(AggFn::CountStar),
            "COUNT" => Some(AggFn::Count),
            "SUM" => Some(AggFn::Sum),
            "AVG" => Some(AggFn::Avg),
            "MIN" => Some(AggFn::Min),
            "MAX" => Some(AggFn::Max),
            "STD" | "STDDEV" | "STDDEV_POP" => Some(AggFn::StdPop),
            "STDDEV_SAMP" => Some(AggFn::StdSamp),
            "VARIANCE" | "VAR_POP" => Some(AggFn::VarPop),
            "VAR_SAMP" => Some(AggFn::VarSamp),
            "BIT_AND" => Some(AggFn::BitAnd),
            "BIT_OR" => Some(AggFn::BitOr),
            "BIT_XOR" => Some(AggFn::BitXor),
            _ => None,
        }
    }

    /// The standard deviations and variances: a DOUBLE shown with the
    /// argument's decimals and four more, as MariaDB's.
    pub fn is_deviation(self) -> bool {
        matches!(
            self,
            AggFn::StdPop | AggFn::StdSamp | AggFn::VarPop | AggFn::VarSamp
        )
    }
}

/// `GROUP_CONCAT([DISTINCT] x[, y…] [ORDER BY …] [SEPARATOR 's'])`.
#[derive(Clone, Debug)]
pub struct GroupConcat {
    /// The values concatenated per row (a row with a NULL one is skipped).
    pub args: Vec<Expr>,
    /// ORDER BY: expression and descending.
    pub order: Vec<(Expr, bool)>,
    /// Between values (`,` unless SEPARATOR says).
    pub separator: Vec<u8>,
    /// `@@group_concat_max_len` when planned: the most bytes of a result.
    pub max_len: usize,
    /// Each argument's collation, for DISTINCT (None: bytes; numbers
    /// ignore it).
    pub collations: Vec<Option<Collation>>,
    /// Each ORDER BY expression's collation.
    pub order_collations: Vec<Option<Collation>>,
    /// `JSON_ARRAYAGG` / `JSON_OBJECTAGG`: MariaDB builds them on
    /// GROUP_CONCAT, and so does Skarv (each value as JSON text, NULL as
    /// `null`, the whole in brackets or braces).
    pub json: Option<JsonAgg>,
}

/// Which JSON aggregate a [`GroupConcat`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonAgg {
    /// `JSON_ARRAYAGG(x)`: `[v1,v2]`.
    Array,
    /// `JSON_OBJECTAGG(k, v)`: `{"k1":v1, "k2":v2}`.
    Object,
}

/// One aggregate a query computes per group.
#[derive(Clone, Debug)]
pub struct AggSpec {
    /// Which.
    pub func: AggFn,
    /// Its argument (None for `COUNT(*)`).
    pub arg: Option<Expr>,
    /// `DISTINCT`.
    pub distinct: bool,
    /// The argument's kind.
    pub arg_kind: Kind,
    /// GROUP_CONCAT's arguments, order and separator; for `COUNT(DISTINCT
    /// a, b…)` (func `Count`) its arguments alone: a row counts when none
    /// is NULL and its values together were not seen before.
    pub concat: Option<Box<GroupConcat>>,
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`, `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<=>` (NULL-safe equality)
    NullSafeEq,
}

/// Arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `DIV`
    IntDiv,
    /// `DIV` of an unsigned DECIMAL or DOUBLE (MariaDB's unsigned_flag):
    /// a quotient below 0 is 1690, as an unsigned integer's is.
    UnsignedIntDiv,
    /// `%`, `MOD`
    Mod,
}

/// A lowered expression.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A constant.
    Lit(Val),
    /// The n-th `?` (0-based).
    Param(usize),
    /// A column of the row, by position.
    Col(usize),
    /// The value of the n-th aggregate of the group.
    Agg(usize),
    /// The value of the n-th window function ([`Scope::windows`]) for
    /// this row.
    Win(usize),
    /// `VALUES(col)` of `ON DUPLICATE KEY UPDATE`: the row that was to be
    /// inserted, by position.
    InsertValue(usize),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `NOT`.
    Not(Box<Expr>),
    /// Arithmetic; the text is MySQL's for the 1690 message. The flag:
    /// the right operand is read even beside a NULL left one, as
    /// MariaDB's integer and double arithmetic reads both (`n + (u + 1)`
    /// of a NULL n is 1690 there), where its DECIMAL arithmetic stops at
    /// the NULL.
    Arith(Arith, Box<Expr>, Box<Expr>, bool),
    /// A comparison under a collation (None: binary).
    Cmp(CmpOp, Box<Expr>, Box<Expr>, Option<Collation>),
    /// `AND`.
    And(Box<Expr>, Box<Expr>),
    /// `OR`.
    Or(Box<Expr>, Box<Expr>),
    /// `XOR`.
    Xor(Box<Expr>, Box<Expr>),
    /// `IS [NOT] NULL` (negated).
    IsNull(Box<Expr>, bool),
    /// `IS [NOT] TRUE/FALSE`: the value tested, negated.
    IsBool(Box<Expr>, bool, bool),
    /// `[NOT] IN (list)`: the value, the list, negated, the collation the
    /// two compare in, and where the list came from.
    In(Box<Expr>, Vec<Expr>, bool, Option<Collation>, InList),
    /// `[NOT] BETWEEN low AND high`.
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool, Option<Collation>),
    /// `[NOT] LIKE pattern [ESCAPE c]`.
    Like(Box<Expr>, Box<Expr>, char, bool, Option<Collation>),
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    Case(Option<Box<Expr>>, Vec<(Expr, Expr)>, Option<Box<Expr>>),
    /// `CAST(x AS type)`.
    Cast(Box<Expr>, CastTo),
    /// A scalar function.
    Func(Func, Vec<Expr>),
    /// A correlated subquery, run for each row that evaluates it
    /// (`exec/correlated.rs`).
    Sub(Box<SubQuery>),
}

/// A name's parts as written, unquoted (`db`, `t` of `` `db`.t ``).
pub(crate) fn name_parts(name: &ast::ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| {
            p.as_ident()
                .map_or_else(|| p.to_string(), |i| i.value.clone())
        })
        .collect()
}

/// MySQL's 1242 message: a scalar subquery gave more than one row.
pub const SUBQUERY_ROWS_MESSAGE: &str = "Subquery returns more than 1 row";

/// `value` with a warning given at its first evaluation in the statement
/// and never again (`Func::WarnOnce`): MariaDB's warning of a constant it
/// reads once, at the first row that needs it.
pub fn warn_once(value: Expr, code: u16, message: String) -> Expr {
    warn_once_site(value, code, message, false)
}

/// [`warn_once`] of a constant MariaDB's optimizer reads before any row
/// when it plans a SELECT's or a join's condition (a string literal
/// compared with a DATE or DATETIME column): the planning of such a
/// condition gives its warning then (`plan::fire_eager`), an empty table
/// too; a single-table UPDATE's or DELETE's, at the first row compared.
pub fn warn_once_eager(value: Expr, code: u16, message: String) -> Expr {
    warn_once_site(value, code, message, true)
}

/// IF's condition when it is an AND or an OR (or NOT of one) with its
/// constant arguments read now: MariaDB takes IF's condition for a
/// top-level one, whose AND and OR evaluate their constant arguments
/// when the statement is prepared (`Item_cond`), so their warnings are
/// the planning's (a strict CREATE … SELECT only warns of `IF('a%b' >= 6
/// OR id > 0, …)`, and fails on `IF('a%b' >= 6, …)`, a row's) and never
/// a row's again. Only comparisons and arithmetic of literals are read
/// (nothing a session's time zone or variables decide), not an IN; one
/// that fails is left to fail at a row.
fn top_level_constants(condition: Expr) -> Expr {
    // No IN: MariaDB reads a constant IN per row there, and a strict
    // UPDATE fails on it (DML seed 426), as in a WHERE's fold.
    fn literal_only(e: &Expr) -> bool {
        let mut only = e.is_constant();
        e.each(&mut |x| {
            only &= matches!(
                x,
                Expr::Lit(_)
                    | Expr::Cmp(..)
                    | Expr::Arith(..)
                    | Expr::Neg(_)
                    | Expr::Not(_)
                    | Expr::And(..)
                    | Expr::Or(..)
                    | Expr::Xor(..)
                    | Expr::Between(..)
                    | Expr::IsNull(..)
            )
        });
        only
    }
    // `negated`: under a NOT, where FALSE and NULL differ.
    fn read(e: Expr, negated: bool) -> Expr {
        match e {
            Expr::And(a, b) => Expr::And(Box::new(read(*a, negated)), Box::new(read(*b, negated))),
            Expr::Or(a, b) => Expr::Or(Box::new(read(*a, negated)), Box::new(read(*b, negated))),
            Expr::Not(a) if matches!(*a, Expr::And(..) | Expr::Or(..)) => {
                Expr::Not(Box::new(read(*a, true)))
            }
            // `c < c`, `c > c`, `c <> c`: never true, so FALSE where NULL
            // and FALSE are alike, as MariaDB folds them (`IF(x < x AND y
            // IN ('a', 3), …)` never reads y: CREATE … SELECT seed 13).
            Expr::Cmp(CmpOp::Lt | CmpOp::Gt | CmpOp::Ne, a, b, _)
                if !negated && matches!((&*a, &*b), (Expr::Col(x), Expr::Col(y)) if x == y) =>
            {
                Expr::Lit(Val::Int(0))
            }
            leaf if literal_only(&leaf) => {
                let env = Env::default();
                let mut ctx = Ctx::new(&[], &env);
                let Ok(value) = leaf.eval(&[], &mut ctx) else {
                    return leaf;
                };
                planned_once(Expr::Lit(value), ctx.warnings)
            }
            other => other,
        }
    }
    match condition {
        c @ (Expr::And(..) | Expr::Or(..)) => read(c, false),
        Expr::Not(a) if matches!(*a, Expr::And(..) | Expr::Or(..)) => read(Expr::Not(a), false),
        other => other,
    }
}

/// IF's top-level condition with each `[NOT] IN` or `op ANY|ALL`
/// subquery among its ANDs (run already or per row) made `… IS TRUE`: MariaDB evaluates such a
/// subquery of a top-level condition as FALSE where it is NULL
/// (`abort_on_null`), so the AND stops there and its later conjuncts are
/// not evaluated (nor warn: CREATE … SELECT seed 37, `IF(a NOT IN
/// (SELECT …) AND … AND y < id, …)` of a NULL in the subquery's column
/// never compares y). IF reads NULL as FALSE, so its value is the same.
fn top_level_subqueries(e: Expr) -> Expr {
    match e {
        Expr::And(a, b) => Expr::And(
            Box::new(top_level_subqueries(*a)),
            Box::new(top_level_subqueries(*b)),
        ),
        // One run already (uncorrelated) is its rows as a list.
        e if is_in_subquery(&e) => Expr::IsBool(Box::new(e), true, false),
        // NOT of one too (`NOT (a IN (SELECT …))` is NOT IN).
        Expr::Not(a) if is_in_subquery(&a) => Expr::IsBool(Box::new(Expr::Not(a)), true, false),
        other => other,
    }
}

/// Whether `e` is an IN (or ANY/ALL) subquery, per row or run already.
fn is_in_subquery(e: &Expr) -> bool {
    match e {
        Expr::Sub(s) => matches!(s.test, SubTest::In(..) | SubTest::Quantified(..)),
        Expr::In(_, _, _, _, from) => *from != InList::Written,
        _ => false,
    }
}

impl Scope<'_> {
    /// IF's top-level condition with each IN list of numbers (and NULLs)
    /// against a DATE or DATETIME read as dates now, as MariaDB's IN reads
    /// such a list when it prepares the statement: each item's warning
    /// (1292 of one that is no date) the planning's, given at its first
    /// row, so a strict CREATE … SELECT only warns (`IF(d NOT IN (2,
    /// NULL), …)`: CREATE … SELECT seeds 28 and 30 with --nulls), as the
    /// WHERE's (`plan::temporal_in_numbers`). A list with no date, 0 or
    /// NULL in it is compared per row, as there.
    fn temporal_in_lists(&self, e: Expr) -> Expr {
        match e {
            Expr::And(a, b) => Expr::And(
                Box::new(self.temporal_in_lists(*a)),
                Box::new(self.temporal_in_lists(*b)),
            ),
            Expr::Or(a, b) => Expr::Or(
                Box::new(self.temporal_in_lists(*a)),
                Box::new(self.temporal_in_lists(*b)),
            ),
            // Under XOR too (CREATE … SELECT seed 32 with --nulls: `IF((d
            // IS NULL XOR d NOT IN (2, NULL)) OR …, …)` only warns).
            Expr::Xor(a, b) => Expr::Xor(
                Box::new(self.temporal_in_lists(*a)),
                Box::new(self.temporal_in_lists(*b)),
            ),
            Expr::Not(a) => Expr::Not(Box::new(self.temporal_in_lists(*a))),
            Expr::In(x, list, negated, c, from) => {
                let with_time = match self.kind(&x) {
                    Kind::Date => false,
                    Kind::DateTime { .. } => true,
                    _ => return Expr::In(x, list, negated, c, from),
                };
                let numbers = list.iter().all(|i| {
                    matches!(
                        i,
                        Expr::Lit(
                            Val::Null | Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_)
                        )
                    )
                });
                if !numbers || !matches!(*x, Expr::Col(_)) {
                    return Expr::In(x, list, negated, c, from);
                }
                let env = Env::default();
                let (items, kept) = temporal_list(&list, |v| {
                    let mut ctx = Ctx::new(&[], &env);
                    let (t, date) = eval::temporal_of_number(v, with_time, &mut ctx);
                    (planned_once(Expr::Lit(t), ctx.warnings), date)
                });
                if kept {
                    Expr::In(x, items, negated, c, from)
                } else {
                    Expr::In(x, list, negated, c, from)
                }
            }
            other => other,
        }
    }
}

/// An IN list of numbers and NULLs against a DATE or DATETIME with each
/// number read by `read` (its date, and whether it is one), and whether
/// an item is a date, 0 or NULL: else MariaDB compares the list per row
/// as well (`plan::temporal_in_numbers`, [`Scope::temporal_in_lists`]).
pub fn temporal_list(
    list: &[Expr],
    mut read: impl FnMut(&Val) -> (Expr, bool),
) -> (Vec<Expr>, bool) {
    let mut kept = false;
    let items = list
        .iter()
        .map(|i| match i {
            Expr::Lit(Val::Null) => {
                kept = true;
                i.clone()
            }
            Expr::Lit(v) => {
                let (item, date) = read(v);
                kept |= date;
                item
            }
            other => other.clone(),
        })
        .collect();
    (items, kept)
}

/// `value`, read when the statement was prepared, with the `warnings` of
/// that reading given at its first evaluation as the planning's (a strict
/// write only warns of them: `eval::PLANNED_BIT`).
fn planned_once(mut value: Expr, warnings: Vec<(u16, String)>) -> Expr {
    for (code, message) in warnings {
        value = warn_once_site(value, code | eval::PLANNED_BIT, message, false);
    }
    value
}

fn warn_once_site(value: Expr, code: u16, message: String, eager: bool) -> Expr {
    // One numbering for every site, so that no two share a number.
    static SITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let site = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut args = vec![
        value,
        Expr::Lit(Val::UInt(site)),
        Expr::Lit(Val::UInt(u64::from(code))),
        Expr::Lit(Val::str(message)),
    ];
    if eager {
        args.push(Expr::Lit(Val::Int(1)));
    }
    Expr::Func(Func::WarnOnce, args)
}

/// Where an IN's list came from, which decides how often MariaDB reads
/// the value it tests against the items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InList {
    /// Written (`x IN (1, 'a', c)`): MariaDB reads `x` once per
    /// comparison type (one comparator each), so a conversion's warning
    /// comes once per evaluation, not once per item.
    Written,
    /// A subquery's rows (`x IN (SELECT …)`), compared row by row as
    /// MariaDB's IN-to-EXISTS compares them: a conversion warns at every
    /// row, a NULL row's too (`Func::NullAfterText` marks those).
    SubqueryRows,
    /// No list: an `x op ANY|ALL (SELECT …)` other than IN's forms whose
    /// subquery gave no rows, kept in a select list for its metadata
    /// (MariaDB's: NULL-able of `x` alone). FALSE (ANY) or TRUE (ALL,
    /// negated) whatever `x` is.
    QuantifiedNoRows,
    /// A subquery's rows as `SubqueryRows`, of one SELECT that reads no
    /// table (`x IN (SELECT 77)`), which MariaDB makes a comparison with
    /// its value: a condition's metadata, not an IN subquery's.
    SubqueryValue,
}

/// A correlated subquery: its text, the outer columns it may name, and
/// what the expression makes of its rows.
#[derive(Clone, Debug)]
pub struct SubQuery {
    /// The subquery as parsed.
    pub query: Arc<ast::Query>,
    /// Its text (the per-row cache's key, with the bound values).
    pub text: Arc<str>,
    /// The outer columns it may name and their positions in the row;
    /// their values are bound when it runs.
    pub outer: Vec<(ScopeColumn, usize)>,
    /// Its columns' kinds (from planning it once with the outer columns
    /// bound to sample values).
    pub kinds: Vec<Kind>,
    /// Its first column's decimals (a scalar subquery's value carries
    /// them: [`Scope::decimals`]).
    pub decimals: u8,
    /// What it is tested for.
    pub test: SubTest,
    /// The outer query's aggregates it writes ([`OuterRow::aggs`]): their
    /// text and this query's expression for each (an `Expr::Agg`).
    pub aggs: Vec<(String, Expr)>,
}

/// What an expression makes of a correlated subquery's rows.
#[derive(Clone, Debug)]
pub enum SubTest {
    /// `(SELECT …)`: its one value (NULL for no row, 1242 for several).
    Scalar,
    /// `[NOT] EXISTS`: negated.
    Exists(bool),
    /// `x [NOT] IN` and `(x, y) [NOT] IN`: the left items (with their
    /// collations against the subquery's columns), negated.
    In(Vec<(Expr, Option<Collation>)>, bool),
    /// `x op ANY|ALL`: the left value, its collation, the operator, ALL.
    Quantified(Box<Expr>, Option<Collation>, CmpOp, bool),
}

/// An outer query's row that a correlated subquery (or a `LATERAL`
/// derived table) runs against: names the subquery does not find resolve
/// here, innermost binding first, as constants.
#[derive(Clone, Debug, Default)]
pub struct OuterRow {
    /// The columns bound.
    pub columns: Vec<ScopeColumn>,
    /// Their values.
    pub values: Vec<Val>,
    /// The values of the outer query's aggregates that the subquery
    /// writes (`SUM(t.a)` of the outer `t` only: the outer query
    /// aggregates it, as in MySQL), by their text, for this row's group.
    pub aggs: Vec<(String, Val)>,
    /// While the subquery is planned for its outer query: such
    /// aggregates found, by text, for the outer query to compute (None
    /// where nobody computes them: a `LATERAL` table's, kept inside).
    pub wanted: Option<RefCell<Vec<(String, ast::Expr)>>>,
}

/// Runs a correlated subquery for a row (the executor's, with engine
/// access the evaluator lacks).
pub trait PerRow {
    /// The subquery's rows with `row`'s values bound.
    /// `aggs`: the values of `sub.aggs` for the row's group.
    fn rows(&self, sub: &SubQuery, row: &[Val], aggs: &[Val]) -> SqlResult<Arc<Materialised>>;

    /// The warnings (code, message; a note's code with `NOTE_BIT`) the
    /// runs since the last call left, for the evaluating context.
    fn take_warnings(&self) -> Vec<(u16, String)> {
        Vec::new()
    }
}

/// The target of a `CAST`/`CONVERT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CastTo {
    /// `SIGNED [INTEGER]`.
    Signed,
    /// `UNSIGNED [INTEGER]`.
    Unsigned,
    /// `CHAR`.
    Char,
    /// `BINARY`.
    Binary,
    /// `DECIMAL(p, s)`.
    Decimal(u8, u8),
    /// `DATE`.
    Date,
    /// `DATETIME[(fsp)]`.
    DateTime(u8),
    /// `TIME[(fsp)]`.
    Time(u8),
    /// `DOUBLE`.
    Double,
    /// `DOUBLE(M,D)`: a DOUBLE rounded to D decimals and kept within M
    /// digits as MariaDB's `Item_double_typecast` keeps it, a DOUBLE(M,D)
    /// column's way (D of 31 and more: neither, and not fixed). A value
    /// clipped is a note 1264 naming the item: the select item's name,
    /// set by [`name_cast`], or `(null)` for an inner one, as MariaDB's.
    FixedDouble(FixedCast),
    /// A DOUBLE shown with these decimals, its value as it is: an
    /// uncorrelated scalar subquery's, which stands in as a constant but
    /// keeps its column's decimals (MariaDB's `Item_singlerow_subselect`):
    /// made by the lowering, never written.
    Decimals(u8),
    /// NULL of the kind and column given: a scalar subquery of no row (or
    /// planned, not run) keeps its column's kind and type, as MariaDB's
    /// subquery item does (a CREATE … SELECT's columns, an outer query's
    /// planned kinds come from it): made by the lowering, never written.
    NullOf(Kind, Box<ColumnMeta>),
    /// A DOUBLE of fixed decimals as text (`CHAR`), with those decimals as
    /// MariaDB's string of such a double has them (`CONCAT(d)` of a
    /// DOUBLE(10,2) holding 2.5 is '2.50'): made by the lowering, never
    /// written.
    FixedChar(u8),
    /// A DOUBLE expression's value as text where an integer or decimal it
    /// took (`GREATEST(u, 1e0)` taking a BIGINT UNSIGNED) is that double's
    /// text (`1.8446744073709552e19`), as a UNION's text column holds a
    /// DOUBLE arm's in MariaDB: made by the planner, never written.
    DoubleChar,
    /// A FLOAT column's value as text, of its six significant digits as
    /// MariaDB's `Field_float::val_str` gives them (`CONCAT(f)` of FLT_MAX
    /// is '3.40282e38', not the double's 17 digits): made by the
    /// lowering, never written.
    FloatChar,
    /// An integer's or DECIMAL's text in a UNION's text column of this
    /// many characters, cut past them without a warning as MariaDB's
    /// temporary table column holds it (`1/3 UNION 'a'` is '0.33333', the
    /// column as long as 1/3's 7): made by the planner, never written.
    ClippedChar(u32),
    /// An integer or DECIMAL in a UNION's DECIMAL column of these digits
    /// and scale, held at the column's end past them without a warning,
    /// as MariaDB's temporary table column holds it (`2.5 UNION
    /// BIT_COUNT(-1)` is 9.9): made by the planner, never written.
    ClippedDecimal(u8, u8),
    /// `CHAR(n)` of a CAST: text cut to n characters with a warning 1292,
    /// as MariaDB's `Item_char_typecast`. Wraps the plain `CHAR` cast.
    CharOf(u32),
    /// `BINARY(n)` of a CAST: bytes cut to n with a warning 1292, or
    /// padded with zero bytes to n, as MariaDB's. Wraps the plain
    /// `BINARY` cast.
    BinaryOf(u32),
}

/// `CAST(x AS DOUBLE(M,D))`: see [`CastTo::FixedDouble`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedCast {
    /// M, 1..=65 ((0,0) is MariaDB's (10,0)).
    pub m: u8,
    /// D, 0..=38.
    pub d: u8,
    /// The name a note gives the item (None: `(null)`).
    pub name: Option<Arc<str>>,
    /// `CAST(x AS FLOAT)`: single precision (a FLOAT of six significant
    /// digits shown, its end FLT_MAX), M 12 and D not fixed.
    pub float: bool,
}

/// Names the CAST to DOUBLE(M,D) that a select item (or an INSERT's
/// value) is, as MariaDB names an item's out-of-range note: by the
/// item's name. An inner one stays `(null)`.
pub fn name_cast(e: &mut Expr, name: &str) {
    if let Expr::Cast(_, CastTo::FixedDouble(cast)) = e {
        cast.name = Some(name.into());
    }
}

/// A column an expression can name.
#[derive(Clone, Debug)]
pub struct ScopeColumn {
    /// Its name.
    pub name: Arc<str>,
    /// The table (or alias) it belongs to, for `t.c`.
    pub table: Arc<str>,
    /// Its kind.
    pub kind: Kind,
    /// NULL allowed.
    pub nullable: bool,
    /// Its result metadata.
    pub meta: ColumnMeta,
    /// What `DEFAULT(col)` reads: a table column's default; None for a
    /// column of no table (a derived table's, an expression's).
    pub default: Option<DefaultOf>,
    /// An ENUM's or SET's members (a table column's): in a numeric
    /// context the value is its index or bits ([`Scope::member_number`]).
    pub members: Option<Members>,
}

/// The members of an ENUM or SET column, for its numeric value.
#[derive(Clone, Debug)]
pub struct Members {
    /// A SET (else an ENUM).
    pub set: bool,
    /// The members, joined by NUL (`Func::MemberNumber`'s argument).
    pub joined: Arc<str>,
}

impl Members {
    /// The number of column `c` of these members: its member's index or
    /// its bits.
    pub(crate) fn number_of(&self, c: usize) -> Expr {
        Expr::Func(
            Func::MemberNumber,
            vec![
                Expr::Col(c),
                Expr::Lit(Val::str(&*self.joined)),
                Expr::Lit(Val::Int(i64::from(self.set))),
            ],
        )
    }
}

/// A table column's default, as `DEFAULT(col)` reads it.
#[derive(Clone, Debug)]
pub enum DefaultOf {
    /// A stored default (or NULL, for a nullable column without one).
    Value(Val),
    /// `CURRENT_TIMESTAMP`, with the column's fractional digits.
    Now(u8),
    /// A TIMESTAMP's literal default: UTC microseconds, shown in the
    /// session's zone (which a table's scope does not know: the
    /// statement's evaluation does), with the column's digits.
    Utc { micros: i64, fsp: u8 },
    /// An expression DEFAULT's text (`SqlColumn::default_expr`).
    Expr(Arc<str>),
    /// NOT NULL without a default: 1364.
    Missing,
}

/// How names, placeholders and aggregates resolve while lowering.
pub struct Scope<'a> {
    /// The row's columns, by position.
    pub columns: Vec<ScopeColumn>,
    /// `?` placeholders of the statement text, in order.
    pub placeholders: &'a [Location],
    /// Aggregates met, when they are allowed (None: an aggregate is 1111).
    pub aggs: Option<Vec<AggSpec>>,
    /// Window functions met, when they are allowed (None: 4015).
    pub windows: Option<Vec<WinSpec>>,
    /// The SELECT's `WINDOW name AS (…)` definitions.
    pub named_windows: Vec<(String, ast::WindowSpec)>,
    /// `@@name` values.
    pub variable: &'a dyn Fn(&str, bool) -> SqlResult<Val>,
    /// `@name` values.
    pub user_variable: &'a dyn Fn(&str) -> Val,
    /// Columns of the row `VALUES(col)` reads (ON DUPLICATE KEY UPDATE).
    pub insert_values: Option<Vec<ScopeColumn>>,
    /// Select-item aliases an unqualified name means before a column of
    /// that name (HAVING, ORDER BY).
    pub aliases: Vec<(String, Expr)>,
    /// The clause being lowered, for 1054's "in '…'".
    pub clause: &'static str,
    /// The statement assigns user variables (`@n := @n + 1`): `@x` is
    /// read at each evaluation (`Func::UserVar`), not once as a constant.
    pub assigning: bool,
    /// The statement has IGNORE: a scalar subquery of more than one row
    /// is NULL with warning 1242 (at its first evaluation), as in MariaDB.
    pub ignoring: bool,
    /// The WHERE of a single-table UPDATE or DELETE, where MariaDB stores
    /// a TIMESTAMP's `=` constant without its warning
    /// ([`Scope::timestamp_store_warning`]; a SELECT's and a multi-table
    /// statement's warn).
    pub single_table_write: bool,
    /// The session's database (`FUNCTION db.f does not exist` names it).
    pub database: Option<String>,
    /// The user variables the statement's `:=` lowered so far assign, each
    /// with its value's expression (its kind is the variable's in a later
    /// read, as MariaDB types a variable its statement creates).
    assigned: Vec<(String, Expr)>,
    /// Columns an unqualified name does not find: the right-hand copies
    /// of a join's `USING`/`NATURAL` columns (MySQL coalesces them).
    pub hidden: Vec<usize>,
    /// The statement's subqueries, run before lowering (None: none may
    /// be written here).
    pub subqueries: Option<&'a HashMap<String, crate::engine::exec::subquery::Outcome>>,
    /// Correlated subqueries planned for per-row runs, by text: their
    /// columns (None: none may be written here).
    pub correlated: Option<&'a HashMap<String, Arc<Materialised>>>,
    /// Rows of the queries this one runs inside (a correlated subquery's
    /// outer rows), innermost last.
    pub outer: &'a [OuterRow],
    /// The levels of `outer` whose columns names lowered since the last
    /// reset found (a bit per level): which query an aggregate of outer
    /// columns belongs to ([`Scope::outer_aggregate`]).
    outer_levels: Cell<u64>,
    depth: usize,
    /// The `x IN (SELECT …)` conjuncts of the condition being lowered
    /// that MariaDB runs as semi-joins (their addresses): see
    /// [`Scope::lower_condition`].
    semi_join_ins: Vec<usize>,
}

impl<'a> Scope<'a> {
    /// A scope over `columns`.
    pub fn new(
        columns: Vec<ScopeColumn>,
        placeholders: &'a [Location],
        variable: &'a dyn Fn(&str, bool) -> SqlResult<Val>,
        user_variable: &'a dyn Fn(&str) -> Val,
    ) -> Scope<'a> {
        Scope {
            columns,
            placeholders,
            aggs: None,
            windows: None,
            named_windows: Vec::new(),
            variable,
            user_variable,
            insert_values: None,
            aliases: Vec::new(),
            clause: "field list",
            assigning: false,
            ignoring: false,
            single_table_write: false,
            database: None,
            assigned: Vec::new(),
            hidden: Vec::new(),
            subqueries: None,
            correlated: None,
            outer: &[],
            outer_levels: Cell::new(0),
            depth: 0,
            semi_join_ins: Vec::new(),
        }
    }

    /// `DEFAULT(col)`: the default of a column of a table in scope, as an
    /// INSERT would fill it.
    fn default_of(&mut self, args: &[&ast::Expr]) -> SqlResult<Expr> {
        let (table, name) = match args {
            [ast::Expr::Identifier(i)] => (None, i.value.as_str()),
            [ast::Expr::CompoundIdentifier(parts)] if !parts.is_empty() => (
                parts.len().checked_sub(2).map(|t| parts[t].value.as_str()),
                parts[parts.len() - 1].value.as_str(),
            ),
            _ => return Err(SqlError::syntax("DEFAULT() takes a column")),
        };
        let at = self.resolve(table, name)?;
        match self.columns[at].default.clone() {
            Some(DefaultOf::Value(v)) => Ok(Expr::Lit(v)),
            Some(DefaultOf::Now(fsp)) => {
                let digits = ast::Expr::value(ast::Value::Number(fsp.to_string(), false));
                self.lower(&ast_call("NOW", [&digits]))
            }
            Some(DefaultOf::Expr(text)) => self.lower(&crate::engine::ddl::parse_default(&text)?),
            Some(DefaultOf::Utc { micros, fsp }) => Ok(utc_default(micros, fsp)),
            Some(DefaultOf::Missing) => Err(SqlError::new(
                codes::NO_DEFAULT_FOR_FIELD,
                format!("Field '{name}' doesn't have a default value"),
            )),
            None => Err(SqlError::unsupported(format_args!(
                "DEFAULT({name}) of a column that is no table's"
            ))),
        }
    }

    /// The position of a column named `name` (optionally of `table`):
    /// 1054 when none, 1052 when ambiguous.
    pub fn resolve(&self, table: Option<&str>, name: &str) -> SqlResult<usize> {
        let mut found = None;
        for (at, c) in self.columns.iter().enumerate() {
            let table_ok = table.is_none_or(|t| c.table.eq_ignore_ascii_case(t));
            if table.is_none() && self.hidden.contains(&at) {
                continue;
            }
            if table_ok && c.name.eq_ignore_ascii_case(name) {
                if found.is_some() {
                    return Err(SqlError::new(
                        codes::NON_UNIQ,
                        format!("Column '{name}' in {} is ambiguous", self.clause),
                    ));
                }
                found = Some(at);
            }
        }
        found.ok_or_else(|| {
            let full = match table {
                Some(t) => format!("{t}.{name}"),
                None => name.to_owned(),
            };
            SqlError::new(
                codes::BAD_FIELD,
                format!("Unknown column '{full}' in '{}'", self.clause),
            )
        })
    }

    /// Lowers an expression.
    pub fn lower(&mut self, e: &ast::Expr) -> SqlResult<Expr> {
        self.depth += 1;
        if self.depth > EXPR_DEPTH_MAX {
            self.depth -= 1;
            return Err(SqlError::unsupported(format_args!(
                "expressions nested deeper than {EXPR_DEPTH_MAX}"
            )));
        }
        // A level's frames are large (tens of KiB unoptimised): where less
        // than one level's worth of the thread's stack is left, the rest
        // of the expression lowers on a new segment.
        let lowered = stacker::maybe_grow(
            LOWER_STACK_RED_ZONE_BYTES,
            LOWER_STACK_SEGMENT_BYTES,
            || self.lower_inner(e),
        );
        self.depth -= 1;
        lowered
    }

    /// `CAST(expr AS data_type)` without the length of a `CHAR(n)` or
    /// `BINARY(n)` ([`sized_cast`] adds it).
    fn lower_cast(&mut self, expr: &ast::Expr, data_type: &ast::DataType) -> SqlResult<Expr> {
        Ok(match cast_to(data_type, expr)? {
            CastTo::Char => {
                let e = self.lower(expr)?;
                match self.fixed_decimals(&e) {
                    Some(d) => Expr::Cast(Box::new(e), CastTo::FixedChar(d)),
                    // A BIT column's bytes are checked too.
                    None => {
                        let text = self.fixed_text(e);
                        Expr::Cast(Box::new(self.utf8_checked(text)), CastTo::Char)
                    }
                }
            }
            to => {
                let e = self.lower(expr)?;
                let e = match to {
                    CastTo::Signed
                    | CastTo::Unsigned
                    | CastTo::Decimal(..)
                    | CastTo::Double
                    | CastTo::FixedDouble(_) => as_number_literal(expr, e),
                    // A BIT column's bytes, a YEAR's four digits, a
                    // DOUBLE(M,D)'s fixed decimals: as in CHAR.
                    CastTo::Binary => self.fixed_text(e),
                    _ => e,
                };
                Expr::Cast(Box::new(self.member_number_for(e, &to)), to)
            }
        })
    }

    fn boxed(&mut self, e: &ast::Expr) -> SqlResult<Box<Expr>> {
        Ok(Box::new(self.lower(e)?))
    }

    /// The collation two operands compare under: of two strings, the
    /// one's of less coercibility (a column's over a literal's, binary or
    /// not: `s = 0x41` compares as `s`); at a tie binary, else a column's;
    /// two strings otherwise compare as the connection's
    /// utf8mb4_general_ci.
    pub fn collation_of(&self, a: &Expr, b: &Expr) -> Option<Collation> {
        let ka = self.kind(a);
        let kb = self.kind(b);
        if let (Kind::Str { collation: ca }, Kind::Str { collation: cb }) = (ka, kb) {
            match eval::text_coercibility(a, self).cmp(&eval::text_coercibility(b, self)) {
                std::cmp::Ordering::Less => return ca,
                std::cmp::Ordering::Greater => return cb,
                std::cmp::Ordering::Equal => {}
            }
        }
        match (ka, kb) {
            (Kind::Str { collation: None }, _) | (_, Kind::Str { collation: None }) => None,
            (Kind::Str { collation: Some(c) }, _) if matches!(a, Expr::Col(_)) => Some(c),
            (_, Kind::Str { collation: Some(c) }) if matches!(b, Expr::Col(_)) => Some(c),
            (Kind::Str { collation: Some(c) }, _) | (_, Kind::Str { collation: Some(c) }) => {
                Some(c)
            }
            _ => Some(Collation::Utf8mb4GeneralCi),
        }
    }

    fn lower_inner(&mut self, e: &ast::Expr) -> SqlResult<Expr> {
        use ast::Expr as E;
        Ok(match e {
            E::Identifier(ident) => self.identifier(None, ident)?,
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] if !t.value.starts_with("@@") => self.column(Some(&t.value), &c.value)?,
                [_db, t, c] => self.column(Some(&t.value), &c.value)?,
                [scope, name] => {
                    let global = scope.value.eq_ignore_ascii_case("@@global");
                    Expr::Lit((self.variable)(&name.value.to_ascii_lowercase(), global)?)
                }
                _ => return Err(SqlError::unsupported(format_args!("the name `{e}`"))),
            },
            E::Nested(inner) => self.lower(inner)?,
            E::Value(v) => self.value(v)?,
            E::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                        s.clone()
                    }
                    other => other.to_string(),
                };
                // A TIME or TIMESTAMP literal shows its own fraction digits,
                // as MariaDB's (`TIMESTAMP '2024-01-01 10:00:00'` none).
                let fsp = text
                    .rsplit_once('.')
                    .filter(|(whole, _)| whole.contains(':'))
                    .map_or(0, |(_, frac)| frac.trim_end().len().min(6) as u8);
                let (to, what) = match ts.data_type {
                    ast::DataType::Date => (CastTo::Date, "DATE"),
                    ast::DataType::Time(..) => (CastTo::Time(fsp), "TIME"),
                    _ => (CastTo::DateTime(fsp), "DATETIME"),
                };
                // A literal that is not a valid value of its type (one the
                // CAST would make NULL, or clip, with a warning; a DATE with
                // a time, a DATETIME without one) is 1525, as MariaDB's; a
                // DATE with a zero month or day is one.
                let env = Env::default();
                let mut ctx = Ctx::new(&[], &env);
                let value = eval::cast(Val::str(text.as_str()), &to, &mut ctx)?;
                let failed = value.is_null()
                    || ctx
                        .warnings
                        .iter()
                        .any(|(code, _)| code & eval::NOTE_BIT == 0);
                let malformed = match to {
                    CastTo::Date => text.contains(':'),
                    CastTo::DateTime(_) => {
                        !text.contains(':') && text.trim().contains(|c: char| !c.is_ascii_digit())
                    }
                    _ => false,
                };
                if let (true, false, CastTo::Date) = (failed, malformed, &to) {
                    if let Some((date, None)) = value::parse_datetime_fuzzy(&text) {
                        return Ok(Expr::Lit(Val::Date(date)));
                    }
                }
                if failed || malformed {
                    return Err(SqlError::new(
                        codes::WRONG_VALUE,
                        format!("Incorrect {what} value: '{text}'"),
                    ));
                }
                Expr::Cast(Box::new(Expr::Lit(Val::str(text))), to)
            }
            E::UnaryOp { op, expr } => match op {
                ast::UnaryOperator::Minus if is_number_literal(expr) => {
                    Expr::Neg(Box::new(bit_literal_number(self.lower(expr)?)))
                }
                ast::UnaryOperator::Minus => match self.lower(expr)? {
                    Expr::Lit(Val::Int(v)) => Expr::Lit(Val::Int(-v)),
                    Expr::Lit(Val::UInt(v)) if v == 1u64 << 63 => Expr::Lit(Val::Int(i64::MIN)),
                    Expr::Lit(Val::Dec(d)) => Expr::Lit(Val::Dec(Dec::new(-d.mantissa, d.scale))),
                    Expr::Lit(Val::Double(v)) => Expr::Lit(Val::Double(-v)),
                    other => Expr::Neg(Box::new(self.number_read(other))),
                },
                ast::UnaryOperator::Plus => self.lower(expr)?,
                ast::UnaryOperator::BitwiseNot => {
                    let mut x = self.lower(expr)?;
                    if is_number_literal(expr) {
                        x = bit_literal_number(x);
                    }
                    Expr::Func(Func::BitNot, vec![self.member_number(x)])
                }
                ast::UnaryOperator::Not | ast::UnaryOperator::BangNot => {
                    Expr::Not(Box::new(self.operand_condition(expr)?))
                }
                other => return Err(SqlError::unsupported(format_args!("the operator {other}"))),
            },
            E::BinaryOp { left, op, right } => self.binary(left, op, right)?,
            E::IsNull(x) => Expr::IsNull(self.boxed(x)?, false),
            E::IsNotNull(x) => Expr::IsNull(self.boxed(x)?, true),
            E::IsTrue(x) => Expr::IsBool(Box::new(self.operand_condition(x)?), true, false),
            E::IsNotTrue(x) => Expr::IsBool(Box::new(self.operand_condition(x)?), true, true),
            E::IsFalse(x) => Expr::IsBool(Box::new(self.operand_condition(x)?), false, false),
            E::IsNotFalse(x) => Expr::IsBool(Box::new(self.operand_condition(x)?), false, true),
            E::IsUnknown(x) => Expr::IsNull(self.boxed(x)?, false),
            E::IsNotUnknown(x) => Expr::IsNull(self.boxed(x)?, true),
            E::IsNotDistinctFrom(a, b) => {
                let (a, b) = (self.lower(a)?, self.lower(b)?);
                let c = self.collation_of(&a, &b);
                Expr::Cmp(CmpOp::NullSafeEq, Box::new(a), Box::new(b), c)
            }
            E::IsDistinctFrom(a, b) => {
                let (a, b) = (self.lower(a)?, self.lower(b)?);
                let c = self.collation_of(&a, &b);
                Expr::Not(Box::new(Expr::Cmp(
                    CmpOp::NullSafeEq,
                    Box::new(a),
                    Box::new(b),
                    c,
                )))
            }
            E::In {
                expr,
                target: ast::InTarget::List(list),
                negated,
                ..
            } => {
                if list.len() > IN_LIST_ITEMS_MAX {
                    return Err(SqlError::unsupported(format_args!(
                        "IN lists of more than {IN_LIST_ITEMS_MAX} items"
                    )));
                }
                if let Some(row) = row_items(expr) {
                    return self.row_in(row, list, *negated);
                }
                let mut x = self.lower(expr)?;
                let mut items = list
                    .iter()
                    .map(|i| self.lower(i))
                    .collect::<SqlResult<Vec<_>>>()?;
                // A bit-value or 0x literal against numbers is its number;
                // against numbers and strings, each item is compared in its
                // own type, its number or its bytes, as MariaDB's IN compares
                // a list of mixed types (`0x61 IN ('a', 3)` holds).
                let numbers = items.iter().filter(|i| self.is_numeric(i)).count();
                if is_number_literal(expr) && numbers > 0 && numbers < items.len() {
                    let number = bit_literal_number(x.clone());
                    return Ok(self.in_item_by_item(&x, &number, items, *negated));
                }
                if is_number_literal(expr) && numbers > 0 {
                    x = bit_literal_number(x);
                }
                if self.is_numeric(&x) {
                    for (item, written) in items.iter_mut().zip(list) {
                        if is_number_literal(written) {
                            *item =
                                bit_literal_number(std::mem::replace(item, Expr::Lit(Val::Null)));
                        }
                    }
                }
                let numeric = self.is_numeric(&x);
                let mut items: Vec<Expr> = items
                    .into_iter()
                    .map(|i| match self.year_constant(&x, i) {
                        // A number against an ENUM or SET: its number.
                        i if numeric && self.is_member(&i) => self.member_number(i),
                        i => i,
                    })
                    .collect();
                if !items.is_empty() && items.iter().all(|i| self.is_numeric(i)) {
                    x = self.member_number(x);
                } else if items.iter().any(|i| self.is_numeric(i)) && self.is_member(&x) {
                    // An ENUM or SET against numbers and strings: each item
                    // compared in its own type, as MariaDB's IN compares
                    // them (`s IN ('x', 3)`).
                    let number = self.member_number(x.clone());
                    return Ok(self.in_item_by_item(&x, &number, items, *negated));
                }
                let c = items.first().and_then(|i| self.collation_of(&x, i));
                // An IN of one value is MariaDB's `=`: quotients compared at
                // their scale.
                if let [item] = items.as_mut_slice() {
                    let one = std::mem::replace(item, Expr::Lit(Val::Null));
                    let (a, b) = self.compared_at_scale(Box::new(x), Box::new(one));
                    x = *a;
                    *item = *b;
                }
                let parts: Vec<&Expr> = std::iter::once(&x).chain(&items).collect();
                if parts.iter().all(|p| self.is_text(p)) {
                    self.binary_literals_as_text(&parts, c)?;
                }
                Expr::In(Box::new(x), items, *negated, c, InList::Written)
            }
            E::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let mut x = self.lower(expr)?;
                let (mut lo, mut hi) = (self.lower(low)?, self.lower(high)?);
                // A bit-value or 0x literal among numbers is its number.
                if self.is_numeric(&lo) && self.is_numeric(&hi) {
                    x = as_number_literal(expr, x);
                }
                if self.is_numeric(&x) {
                    lo = as_number_literal(low, lo);
                    hi = as_number_literal(high, hi);
                }
                let (lo, hi) = (self.year_constant(&x, lo), self.year_constant(&x, hi));
                if self.is_numeric(&lo) && self.is_numeric(&hi) {
                    x = self.member_number(x);
                }
                let c = self.collation_of(&x, &lo);
                Expr::Between(Box::new(x), Box::new(lo), Box::new(hi), *negated, c)
            }
            E::Like {
                negated,
                expr,
                pattern,
                escape_char,
                any: false,
            } => {
                let x = self.lower(expr)?;
                let p = self.lower(pattern)?;
                let escape = match escape_char.as_deref() {
                    None => '\\',
                    Some(esc) => match self.lower(esc)? {
                        Expr::Lit(v) => v.to_text().chars().next().unwrap_or('\\'),
                        _ => {
                            return Err(SqlError::new(
                                codes::WRONG_ARGUMENTS,
                                "Incorrect arguments to ESCAPE",
                            ))
                        }
                    },
                };
                let c = self.collation_of(&x, &p);
                self.binary_literals_as_text(&[&x, &p], c)?;
                Expr::Like(Box::new(x), Box::new(p), escape, *negated, c)
            }
            // `x REGEXP p`: REGEXP_LIKE under the collation of the two
            // (case-insensitive unless binary or _bin, as MariaDB's).
            E::RLike {
                negated,
                expr,
                pattern,
                ..
            } => {
                let x = self.lower(expr)?;
                let p = self.lower(pattern)?;
                let ci = self.collation_of(&x, &p) == Some(Collation::Utf8mb4GeneralCi);
                let flags = Expr::Lit(Val::str(if ci { "i" } else { "c" }));
                let like = Expr::Func(func::Func::RegexpLike, vec![x, p, flags]);
                if *negated {
                    Expr::Not(Box::new(like))
                } else {
                    like
                }
            }
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let operand = operand.as_deref().map(|o| self.boxed(o)).transpose()?;
                let mut whens = Vec::with_capacity(conditions.len());
                for w in conditions {
                    let condition = match &operand {
                        // Compared as `=` compares: a bit-value or 0x
                        // literal beside a number is its number.
                        Some(o) if self.is_numeric(o) => {
                            as_number_literal(&w.condition, self.lower(&w.condition)?)
                        }
                        Some(_) => self.lower(&w.condition)?,
                        None => self.operand_condition(&w.condition)?,
                    };
                    whens.push((condition, self.lower(&w.result)?));
                }
                let mut otherwise = else_result.as_deref().map(|o| self.boxed(o)).transpose()?;
                let mut results: Vec<&mut Expr> = whens.iter_mut().map(|(_, r)| r).collect();
                results.extend(otherwise.as_deref_mut());
                self.align_alternatives(results);
                Expr::Case(operand, whens, otherwise)
            }
            E::Cast {
                expr, data_type, ..
            } => {
                let cast = self.lower_cast(expr, data_type)?;
                sized_cast(cast, data_type)?
            }
            E::Convert {
                expr,
                data_type: Some(data_type),
                ..
            } => {
                let to = cast_to(data_type, expr)?;
                let e = self.lower(expr)?;
                let e = match to {
                    CastTo::Char => self.utf8_checked(e),
                    CastTo::Binary => self.fixed_text(e),
                    _ => e,
                };
                let cast = Expr::Cast(Box::new(self.member_number_for(e, &to)), to);
                sized_cast(cast, data_type)?
            }
            // CONVERT(x USING cs): text of that character set (binary:
            // a binary string).
            E::Convert {
                expr,
                data_type: None,
                charset,
                ..
            } => {
                let e = self.lower(expr)?;
                match charset {
                    Some(cs) if cs.to_string().eq_ignore_ascii_case("binary") => {
                        Expr::Cast(Box::new(self.fixed_text(e)), CastTo::Binary)
                    }
                    // Into UTF-8 a byte that is none is '?' (1300); other
                    // character sets take any byte.
                    Some(cs) if cs.to_string().to_ascii_lowercase().starts_with("utf8") => {
                        let binary = matches!(self.kind(&e), Kind::Str { collation: None });
                        // MariaDB's utf8 is utf8mb3.
                        let name = if cs.to_string().eq_ignore_ascii_case("utf8mb4") {
                            "utf8mb4"
                        } else {
                            "utf8mb3"
                        };
                        let e = self.utf8_checked_as(e, name);
                        if binary {
                            Expr::Func(Func::Collate(Collation::Utf8mb4GeneralCi), vec![e])
                        } else {
                            e
                        }
                    }
                    // latin1's characters of bytes, in the UTF-8 Skarv holds.
                    Some(cs)
                        if cs.to_string().eq_ignore_ascii_case("latin1")
                            && matches!(self.kind(&e), Kind::Str { collation: None }) =>
                    {
                        Expr::Func(Func::Latin1Text, vec![e])
                    }
                    Some(_) if matches!(self.kind(&e), Kind::Str { collation: None }) => {
                        Expr::Func(Func::Collate(Collation::Utf8mb4GeneralCi), vec![e])
                    }
                    _ => e,
                }
            }
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let string = self.lower(expr)?;
                let mut args = vec![self.fixed_text(string)];
                if let Some(f) = substring_from {
                    args.push(self.lower(f)?);
                }
                if let Some(f) = substring_for {
                    args.push(self.lower(f)?);
                }
                self.binary_read_as_bytes(Expr::Func(Func::Substring, args))
            }
            // `POSITION(substr IN str)`: LOCATE(substr, str).
            E::Position { expr, r#in } => {
                let args = vec![self.lower(expr)?, self.lower(r#in)?];
                self.binary_read_as_bytes(Expr::Func(Func::Locate, args))
            }
            E::Trim {
                trim_where,
                trim_what,
                expr,
                ..
            } => {
                let func = match trim_where {
                    Some(ast::TrimWhereField::Leading) => Func::TrimLeading,
                    Some(ast::TrimWhereField::Trailing) => Func::TrimTrailing,
                    _ => Func::TrimBoth,
                };
                let mut args = vec![self.lower(expr)?];
                if let Some(w) = trim_what {
                    args.push(self.lower(w)?);
                }
                self.binary_read_as_bytes(Expr::Func(func, args))
            }
            E::Ceil { expr, .. } => {
                let x = self.lower(expr)?;
                self.unsigned_rounding(Expr::Func(Func::Ceil, vec![self.number_read(x)]))
            }
            E::Floor { expr, .. } => {
                let x = self.lower(expr)?;
                self.unsigned_rounding(Expr::Func(Func::Floor, vec![self.number_read(x)]))
            }
            E::Function(written) => {
                let mut e = self.function(written)?;
                // Each argument as written, where it is a plain one.
                let written: Vec<Option<&ast::Expr>> = match &written.args {
                    ast::FunctionArguments::List(list) => list
                        .args
                        .iter()
                        .map(|a| match a {
                            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                // The numeric functions and GREATEST/LEAST keep their
                // arguments in the order written.
                let number = |at: usize, a: Expr| match written.get(at).copied().flatten() {
                    Some(w) => as_number_literal(w, a),
                    None => a,
                };
                if let Expr::Func(f, args) = &mut e {
                    // The arguments a numeric function reads as numbers: an
                    // ENUM's index, a SET's bits (MariaDB's `val_int`).
                    let numbers = match f {
                        Func::Abs
                        | Func::Ceil
                        | Func::Floor
                        | Func::Sqrt
                        | Func::Sign
                        | Func::Exp
                        | Func::Ln
                        | Func::Log2
                        | Func::Log10
                        | Func::Sin
                        | Func::Cos
                        | Func::Tan
                        | Func::Asin
                        | Func::Acos
                        | Func::Atan
                        | Func::Cot
                        | Func::Radians
                        | Func::Degrees
                        | Func::BitCount => 1,
                        Func::Round | Func::Truncate => 1,
                        Func::Mod | Func::Power | Func::Log => 2,
                        _ => 0,
                    };
                    // GREATEST and LEAST with a number compare numbers, as
                    // MariaDB's: an ENUM or SET among them is its index or
                    // bits, and of strings (ENUM and SET too) and numbers
                    // they are DOUBLEs (LEAST('x', 2) is 0, GREATEST(1, s)
                    // 3 of a DOUBLE).
                    if matches!(f, Func::Greatest(_) | Func::Least(_))
                        && args.iter().any(|a| self.is_numeric(a))
                    {
                        let members = args.iter().any(|a| self.is_member(a));
                        for (at, a) in args.iter_mut().enumerate() {
                            let x = number(at, std::mem::replace(a, Expr::Lit(Val::Null)));
                            *a = self.number_read(x);
                        }
                        let kinds: Vec<Kind> = args.iter().map(|a| self.kind(a)).collect();
                        let string = members || kinds.iter().any(|k| matches!(k, Kind::Str { .. }));
                        if string && !kinds.iter().any(|k| k.is_temporal()) {
                            for (a, kind) in args.iter_mut().zip(kinds) {
                                let inner = std::mem::replace(a, Expr::Lit(Val::Null));
                                // A number keeps its decimals (GREATEST(id +
                                // 0.5, e) shows 2.0); a string has none fixed.
                                let d = match kind {
                                    Kind::Str { .. } => NOT_FIXED_DECIMALS,
                                    _ => self.decimals(&inner),
                                };
                                let double = Expr::Cast(Box::new(inner), CastTo::Double);
                                *a = if d < NOT_FIXED_DECIMALS {
                                    Expr::Cast(Box::new(double), CastTo::Decimals(d))
                                } else {
                                    double
                                };
                            }
                        }
                    } else {
                        let bits = *f == Func::BitCount;
                        for (at, a) in args.iter_mut().take(numbers).enumerate() {
                            let x = number(at, std::mem::replace(a, Expr::Lit(Val::Null)));
                            let x = self.number_read(x);
                            *a = if bits { self.double_alternatives(x) } else { x };
                        }
                    }
                    // NULLIF compares as `=` does: an ENUM or SET beside a
                    // number by its index or bits (NULLIF(e, 2) is NULL for
                    // e's second member), while its value stays the first
                    // argument's own (a third argument is its compared form).
                    let mut literal_compared = None;
                    if let (Func::NullIf, [a, b]) = (&f, args.as_mut_slice()) {
                        // A bit-value or 0x literal beside a number is its
                        // number, as in `=` (NULLIF(bits, b'101')).
                        // (The first compares as its number; its value
                        // stays what it is: the third argument.)
                        if self.is_numeric(a) {
                            *b = number(1, std::mem::replace(b, Expr::Lit(Val::Null)));
                        } else if self.is_numeric(b)
                            && written
                                .first()
                                .copied()
                                .flatten()
                                .is_some_and(is_number_literal)
                        {
                            literal_compared = Some(number(0, a.clone()));
                        }
                        if self.is_member(b) && self.is_numeric(a) {
                            *b = self.member_number(std::mem::replace(b, Expr::Lit(Val::Null)));
                        } else if self.is_member(a) && self.is_numeric(b) {
                            let compared = self.member_number(a.clone());
                            args.push(compared);
                        }
                    }
                    args.extend(literal_compared);
                    // NULLIF compares quotients at their scale, as `=`.
                    if let (Func::NullIf, [a, b]) = (&f, args.as_slice()) {
                        let compared_a = self.rounded_vs(a, b);
                        let (ra, rb) =
                            self.compared_at_scale(Box::new(a.clone()), Box::new(b.clone()));
                        if compared_a {
                            args.push(*ra);
                        }
                        args[1] = *rb;
                    }
                    if let (Func::If, Some(condition)) = (&f, args.first_mut()) {
                        // A truth value: a bit-value or 0x literal's number.
                        let c = number(0, std::mem::replace(condition, Expr::Lit(Val::Null)));
                        *condition = self.number_read(c);
                    }
                    let alternatives: Vec<&mut Expr> = match f {
                        Func::Coalesce | Func::IfNull | Func::Greatest(_) | Func::Least(_) => {
                            args.iter_mut().collect()
                        }
                        Func::If => args.iter_mut().skip(1).collect(),
                        _ => Vec::new(),
                    };
                    self.align_alternatives(alternatives);
                }
                // Where strings meet in a text collation, a binary literal
                // must be text.
                if let Expr::Func(
                    f @ (Func::Concat
                    | Func::ConcatWs
                    | Func::If
                    | Func::IfNull
                    | Func::Coalesce
                    | Func::Elt
                    | Func::Greatest(_)
                    | Func::Least(_)),
                    args,
                ) = &e
                {
                    if let Kind::Str { collation } = self.kind(&e) {
                        let skip = usize::from(matches!(f, Func::If | Func::Elt));
                        let parts: Vec<&Expr> = args.iter().skip(skip).collect();
                        self.binary_literals_as_text(&parts, collation)?;
                    }
                }
                let mut e = self.binary_read_as_bytes(e);
                // Strings compare in the collation they meet in: the one
                // their kind has.
                if let Expr::Func(Func::Greatest(_) | Func::Least(_), _) = &e {
                    if let Kind::Str { collation } = self.kind(&e) {
                        if let Expr::Func(Func::Greatest(c) | Func::Least(c), _) = &mut e {
                            *c = collation;
                        }
                    }
                }
                e
            }
            E::Collate { expr, collation } => {
                let inner = self.lower(expr)?;
                let name = collation.to_string().to_ascii_lowercase();
                let to = if name.ends_with("_bin") {
                    Collation::Utf8mb4Bin
                } else {
                    Collation::Utf8mb4GeneralCi
                };
                Expr::Func(Func::Collate(to), vec![inner])
            }
            E::Extract { field, expr, .. } => {
                let func = match field {
                    ast::DateTimeField::Year => Func::Year,
                    ast::DateTimeField::Month => Func::Month,
                    ast::DateTimeField::Day => Func::Day,
                    ast::DateTimeField::Hour => Func::Hour,
                    ast::DateTimeField::Minute => Func::Minute,
                    ast::DateTimeField::Second => Func::Second,
                    ast::DateTimeField::Microsecond => Func::Microsecond,
                    ast::DateTimeField::Quarter => Func::Quarter,
                    ast::DateTimeField::Week(None) => Func::Week,
                    // A compound unit (`dialect::extract_compound`): its
                    // fields side by side, `YEAR_MONTH` of 2020-01-02 is
                    // 202001, `DAY_MINUTE` of 10:11 on the 2nd 21011.
                    ast::DateTimeField::Custom(unit) => {
                        let parts: &[&str] = match unit.value.as_str() {
                            "YEAR_MONTH" => &["YEAR", "MONTH"],
                            "DAY_HOUR" => &["DAY", "HOUR"],
                            "DAY_MINUTE" => &["DAY", "HOUR", "MINUTE"],
                            "DAY_SECOND" => &["DAY", "HOUR", "MINUTE", "SECOND"],
                            "DAY_MICROSECOND" => {
                                &["DAY", "HOUR", "MINUTE", "SECOND", "MICROSECOND"]
                            }
                            "HOUR_MINUTE" => &["HOUR", "MINUTE"],
                            "HOUR_SECOND" => &["HOUR", "MINUTE", "SECOND"],
                            "HOUR_MICROSECOND" => &["HOUR", "MINUTE", "SECOND", "MICROSECOND"],
                            "MINUTE_SECOND" => &["MINUTE", "SECOND"],
                            "MINUTE_MICROSECOND" => &["MINUTE", "SECOND", "MICROSECOND"],
                            "SECOND_MICROSECOND" => &["SECOND", "MICROSECOND"],
                            other => {
                                return Err(SqlError::unsupported(format_args!("EXTRACT({other})")))
                            }
                        };
                        let number = |n: &str| {
                            ast::Expr::Value(ast::Value::Number(n.to_owned(), false).into())
                        };
                        let mut whole: Option<ast::Expr> = None;
                        for part in parts {
                            let field = ast_call(part, [&**expr]);
                            let shift = if *part == "MICROSECOND" {
                                "1000000"
                            } else {
                                "100"
                            };
                            whole = Some(match whole {
                                None => field,
                                Some(before) => ast::Expr::BinaryOp {
                                    left: Box::new(ast::Expr::BinaryOp {
                                        left: Box::new(ast::Expr::Nested(Box::new(before))),
                                        op: ast::BinaryOperator::Multiply,
                                        right: Box::new(number(shift)),
                                    }),
                                    op: ast::BinaryOperator::Plus,
                                    right: Box::new(field),
                                },
                            });
                        }
                        return match whole {
                            Some(e) => self.lower(&e),
                            None => Err(SqlError::unsupported("EXTRACT of no unit")),
                        };
                    }
                    other => return Err(SqlError::unsupported(format_args!("EXTRACT({other})"))),
                };
                Expr::Func(func, vec![self.lower(expr)?])
            }
            // A character set introducer (`_binary'…'`, `_utf8mb4'…'`): Go's
            // driver writes `[]byte` arguments as `_binary'…'` when it
            // interpolates. Text is utf8mb4 whatever the introducer names.
            E::Prefixed { prefix, value } if prefix.value.starts_with('_') => {
                let inner = self.lower(value)?;
                if prefix.value.eq_ignore_ascii_case("_binary") {
                    Expr::Func(Func::BinaryLiteral, vec![inner])
                } else {
                    inner
                }
            }
            E::Tuple(items) if items.len() == 1 => self.lower(&items[0])?,
            E::Tuple(_) => return Err(operand_columns(1)),
            E::Subquery(q) if self.per_row(q).is_some() => self.sub(q, SubTest::Scalar)?,
            E::Exists { subquery, negated } if self.per_row(subquery).is_some() => {
                self.sub(subquery, SubTest::Exists(*negated))?
            }
            E::In {
                expr,
                target: ast::InTarget::Subquery(q),
                negated,
                ..
            } if self.per_row(q).is_some() => {
                let left = match row_items(expr) {
                    Some(items) => items.iter().collect(),
                    None => vec![&**expr],
                };
                let mut lowered = Vec::with_capacity(left.len());
                for l in left {
                    lowered.push(self.lower(l)?);
                }
                self.sub(
                    q,
                    SubTest::In(lowered.into_iter().map(|x| (x, None)).collect(), *negated),
                )?
            }
            E::Subquery(q) => {
                let m = self.subquery(q)?;
                if m.metas.len() != 1 {
                    return Err(operand_columns(1));
                }
                match m.rows.as_slice() {
                    [] => match (m.kinds.first(), m.metas.first()) {
                        (Some(&k), Some(meta)) if k != Kind::Null => Expr::Cast(
                            Box::new(Expr::Lit(Val::Null)),
                            CastTo::NullOf(k, Box::new(subquery_meta(meta))),
                        ),
                        _ => Expr::Lit(Val::Null),
                    },
                    // A DOUBLE keeps its column's fixed decimals (2.50 of a
                    // DOUBLE(M,2)), as MariaDB's subquery item does.
                    [row] => match (row.first(), m.metas[0].decimals) {
                        (Some(v @ Val::Double(_)), d) if d < NOT_FIXED_DECIMALS => {
                            Expr::Cast(Box::new(Expr::Lit(v.clone())), CastTo::Decimals(d))
                        }
                        (v, _) => Expr::Lit(v.cloned().unwrap_or(Val::Null)),
                    },
                    _ if self.ignoring => warn_once(
                        Expr::Lit(Val::Null),
                        codes::SUBQUERY_NO_1_ROW,
                        SUBQUERY_ROWS_MESSAGE.into(),
                    ),
                    _ => {
                        return Err(SqlError::new(
                            codes::SUBQUERY_NO_1_ROW,
                            SUBQUERY_ROWS_MESSAGE,
                        ))
                    }
                }
            }
            E::Exists { subquery, negated } => {
                let m = self.subquery(subquery)?;
                Expr::Lit(Val::Int(i64::from(m.rows.is_empty() == *negated)))
            }
            E::In {
                expr,
                target: ast::InTarget::Subquery(q),
                negated,
                ..
            } => {
                let semi_join = self
                    .semi_join_ins
                    .contains(&(e as *const ast::Expr as usize));
                let m = self.subquery(q)?;
                let value = !query_reads_table(q);
                self.in_rows(expr, &m, *negated, semi_join || value, value)?
            }
            E::AnyOp {
                left,
                compare_op,
                right,
                ..
            } => self.quantified(left, compare_op, right, false)?,
            E::AllOp {
                left,
                compare_op,
                right,
            } => self.quantified(left, compare_op, right, true)?,
            E::In { .. } => return Err(SqlError::unsupported("this IN")),
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the expression `{}`",
                    super::stdx_truncate(&other.to_string(), 80)
                )))
            }
        })
    }

    fn identifier(&mut self, table: Option<&str>, ident: &ast::Ident) -> SqlResult<Expr> {
        let name = &ident.value;
        if ident.quote_style.is_none() {
            if let Some(var) = name.strip_prefix("@@") {
                let (global, var) = match var.split_once('.') {
                    Some((s, v)) => (s.eq_ignore_ascii_case("global"), v),
                    None => (false, var),
                };
                return Ok(Expr::Lit((self.variable)(
                    &var.to_ascii_lowercase(),
                    global,
                )?));
            }
            if let Some(var) = name.strip_prefix('@') {
                let var = var.to_ascii_lowercase();
                let value = (self.user_variable)(&var);
                if !self.assigning {
                    return Ok(Expr::Lit(value));
                }
                // A variable that is not set, and that no `:=` lowered
                // before this read sets, reads as a constant NULL, as
                // MariaDB fixes such a read (`@s := CONCAT(IFNULL(@s, ''),
                // x)` of a new @s is x on every row).
                let mut args = vec![Expr::Lit(Val::str(var.as_str())), Expr::Lit(value)];
                if matches!(args[1], Expr::Lit(Val::Null)) {
                    match self.assigned.iter().find(|(n, _)| *n == var) {
                        Some((_, typed)) => args.push(typed.clone()),
                        None => return Ok(Expr::Lit(Val::Null)),
                    }
                }
                return Ok(Expr::Func(Func::UserVar, args));
            }
            if name.eq_ignore_ascii_case("CURRENT_TIMESTAMP")
                || name.eq_ignore_ascii_case("LOCALTIME")
                || name.eq_ignore_ascii_case("LOCALTIMESTAMP")
            {
                return Ok(Expr::Func(Func::Now, Vec::new()));
            }
            if name.eq_ignore_ascii_case("CURRENT_DATE") {
                return Ok(Expr::Func(Func::CurDate, Vec::new()));
            }
            if name.eq_ignore_ascii_case("CURRENT_TIME") {
                return Ok(Expr::Func(Func::CurTime, Vec::new()));
            }
            if name.eq_ignore_ascii_case("CURRENT_USER") {
                return Ok(Expr::Func(Func::User, Vec::new()));
            }
            if name.eq_ignore_ascii_case("CURRENT_ROLE") {
                return Ok(func::no_role());
            }
        }
        if ident.quote_style == Some('"') {
            // MySQL's default sql_mode reads "x" as a string.
            return Ok(Expr::Lit(Val::str(name.clone())));
        }
        // An unqualified name is the select item's alias before a column's
        // (MySQL's HAVING and ORDER BY, the only clauses with aliases).
        if table.is_none() {
            if let Some((_, aliased)) = self
                .aliases
                .iter()
                .find(|(a, _)| a.eq_ignore_ascii_case(name))
            {
                return Ok(aliased.clone());
            }
        }
        self.column(table, name)
    }

    /// A column of the row, or else of an outer query's row (a constant
    /// while this query runs for that row).
    fn column(&self, table: Option<&str>, name: &str) -> SqlResult<Expr> {
        let e = match self.resolve(table, name) {
            Ok(at) => return Ok(Expr::Col(at)),
            Err(e) if e.code == codes::BAD_FIELD => e,
            Err(e) => return Err(e),
        };
        for (at, level) in self.outer.iter().enumerate().rev() {
            let mut found = level.columns.iter().zip(&level.values).filter(|(c, _)| {
                table.is_none_or(|t| c.table.eq_ignore_ascii_case(t))
                    && c.name.eq_ignore_ascii_case(name)
            });
            let Some((c, v)) = found.next() else {
                continue;
            };
            if found.next().is_some() {
                return Err(SqlError::new(
                    codes::NON_UNIQ,
                    format!("Column '{name}' in {} is ambiguous", self.clause),
                ));
            }
            let bit = u32::try_from(at).map_or(0, |at| 1u64.checked_shl(at).unwrap_or(0));
            self.outer_levels.set(self.outer_levels.get() | bit);
            return Ok(outer_value(c, v));
        }
        Err(e)
    }

    fn value(&mut self, v: &ast::ValueWithSpan) -> SqlResult<Expr> {
        use ast::Value as V;
        let binary =
            |bytes: Vec<u8>| Expr::Func(Func::BinaryLiteral, vec![Expr::Lit(Val::Str(bytes))]);
        Ok(Expr::Lit(match &v.value {
            V::Number(text, _) => number_literal(text)?,
            V::SingleQuotedString(s)
            | V::DoubleQuotedString(s)
            | V::TripleSingleQuotedString(s)
            | V::TripleDoubleQuotedString(s)
            | V::EscapedStringLiteral(s)
            | V::NationalStringLiteral(s)
            | V::UnicodeStringLiteral(s) => Val::str(s.clone()),
            // MySQL's b'0101' is a bit-value literal: its bits, as bytes.
            V::SingleQuotedByteStringLiteral(s) | V::DoubleQuotedByteStringLiteral(s)
                if s.bytes().all(|b| b == b'0' || b == b'1') =>
            {
                return Ok(binary(bit_bytes(s)));
            }
            V::SingleQuotedByteStringLiteral(s) | V::DoubleQuotedByteStringLiteral(s) => {
                Val::Str(s.clone().into_bytes())
            }
            V::HexStringLiteral(h) => return Ok(binary(hex_bytes(h)?)),
            V::Boolean(b) => Val::Int(i64::from(*b)),
            V::Null => Val::Null,
            V::Placeholder(p) if p == "?" => {
                let at = self
                    .placeholders
                    .iter()
                    .position(|l| *l == v.span.start)
                    .ok_or_else(|| {
                        SqlError::syntax("a `?` placeholder outside a prepared statement")
                    })?;
                return Ok(Expr::Param(at));
            }
            other => return Err(SqlError::unsupported(format_args!("the literal {other}"))),
        }))
    }

    /// `@name := value`, evaluated where it stands (per row in a select
    /// list); the statement's later reads of `@name` see it.
    fn assign_user_var(&mut self, left: &ast::Expr, right: &ast::Expr) -> SqlResult<Expr> {
        let name = match left {
            ast::Expr::Identifier(i) if i.quote_style.is_none() => i.value.strip_prefix('@'),
            _ => None,
        };
        let Some(name) = name.filter(|n| !n.is_empty() && !n.starts_with('@')) else {
            return Err(SqlError::syntax(format_args!(
                "the target of := must be a user variable (@name), not {left}"
            )));
        };
        let value = self.lower(right)?;
        let name = name.to_ascii_lowercase();
        if !self.assigned.iter().any(|(n, _)| *n == name) {
            self.assigned.push((name.clone(), value.clone()));
        }
        Ok(Expr::Func(
            Func::SetUserVar,
            vec![Expr::Lit(Val::str(name)), value],
        ))
    }

    fn binary(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<Expr> {
        use ast::BinaryOperator as B;
        if row_items(left).is_some() || row_items(right).is_some() {
            let op = match op {
                B::Eq => CmpOp::Eq,
                B::NotEq => CmpOp::Ne,
                B::Lt => CmpOp::Lt,
                B::LtEq => CmpOp::Le,
                B::Gt => CmpOp::Gt,
                B::GtEq => CmpOp::Ge,
                B::Spaceship => CmpOp::NullSafeEq,
                _ => return Err(operand_columns(1)),
            };
            return self.row_compare(op, left, right);
        }
        if *op == B::Assignment {
            return self.assign_user_var(left, right);
        }
        // `d + INTERVAL n unit`, `INTERVAL n unit + d`, `d - INTERVAL n
        // unit`: MySQL's date arithmetic, which is DATE_ADD/DATE_SUB.
        match (left, op, right) {
            (d, B::Plus, iv @ ast::Expr::Interval(_))
            | (iv @ ast::Expr::Interval(_), B::Plus, d) => {
                return self.lower(&ast_call("DATE_ADD", [d, iv]));
            }
            (d, B::Minus, iv @ ast::Expr::Interval(_)) => {
                return self.lower(&ast_call("DATE_SUB", [d, iv]));
            }
            // MySQL's `col->path` is JSON_EXTRACT and `col->>path` its
            // JSON_UNQUOTE, by definition (MariaDB has neither).
            (doc, B::Arrow, path) => return self.lower(&ast_call("JSON_EXTRACT", [doc, path])),
            (doc, B::LongArrow, path) => {
                let extract = ast_call("JSON_EXTRACT", [doc, path]);
                return self.lower(&ast_call("JSON_UNQUOTE", [&extract]));
            }
            _ => {}
        }
        let (mut l, mut r) = (self.lower(left)?, self.lower(right)?);
        // A bit-value literal compared with a number is its number, as
        // MariaDB's (`a = b'101'` is `a = 5`; a hex literal stays a string).
        if matches!(
            op,
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship
        ) {
            if is_number_literal(right) && self.is_numeric(&l) {
                r = bit_literal_number(r);
            } else if is_number_literal(left) && self.is_numeric(&r) {
                l = bit_literal_number(l);
            }
        }
        if matches!(
            op,
            B::Plus | B::Minus | B::Multiply | B::Divide | B::MyIntegerDivide | B::Modulo
        ) {
            (l, r) = (self.temporal_number(l), self.temporal_number(r));
        }
        if matches!(op, B::And | B::Or | B::Xor) {
            (l, r) = (self.condition(left, l), self.condition(right, r));
        }
        if matches!(
            op,
            B::Plus
                | B::Minus
                | B::Multiply
                | B::Divide
                | B::MyIntegerDivide
                | B::Modulo
                | B::BitwiseOr
                | B::BitwiseAnd
                | B::BitwiseXor
                | B::PGBitwiseXor
                | B::PGBitwiseShiftLeft
                | B::PGBitwiseShiftRight
        ) {
            // A bit-value or 0x literal is its number (`0x41 + 1` is 66,
            // `flags & 0x04` tests a bit), an ENUM or SET its index or bits;
            // an ELT the number of what it takes where MariaDB reads a
            // double (bit operations and DIV read its text as a DECIMAL).
            let (l0, r0) = (as_number_literal(left, l), as_number_literal(right, r));
            (l, r) = if matches!(op, B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo) {
                (self.number_read(l0), self.number_read(r0))
            } else {
                (self.member_number(l0), self.member_number(r0))
            };
        }
        if matches!(op, B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo)
            && matches!(self.kind(&r), Kind::Str { .. })
        {
            // Double arithmetic, which MariaDB does after it has read both
            // operands: the text is read (and warned of) beside a NULL
            // left operand too (`Expr::Arith`'s evaluation).
            r = Expr::Cast(Box::new(r), CastTo::Double);
        }
        if matches!(
            op,
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship
        ) {
            if self.is_numeric(&r) {
                l = self.member_number(l);
            }
            if self.is_numeric(&l) {
                r = self.member_number(r);
            }
            // A subquery that reads a table is no constant to MariaDB
            // here, though its value is known by now: compared as it is.
            if !reads_table(right) {
                let stored = self.timestamp_store_warning(op, &l, &r);
                r = self.year_constant(&l, r);
                r = self.listed_text_number(&l, r);
                r = self.text_as_decimal(&l, r);
                if let Some(message) = stored {
                    r = warn_once_eager(r, crate::error::codes::TRUNCATED_WRONG_VALUE, message);
                }
            }
            if !reads_table(left) {
                let stored = self.timestamp_store_warning(op, &r, &l);
                l = self.year_constant(&r, l);
                l = self.listed_text_number(&r, l);
                l = self.text_as_decimal(&r, l);
                if let Some(message) = stored {
                    l = warn_once_eager(l, crate::error::codes::TRUNCATED_WRONG_VALUE, message);
                }
            }
            r = self.null_after_text(&l, r);
            l = self.text_read_first(l, &r);
            let (cast_l, cast_r) = (
                self.char_cast_vs_integer(&l, &r),
                self.char_cast_vs_integer(&r, &l),
            );
            if cast_l {
                l = Expr::Cast(Box::new(l), CastTo::Decimal(65, 0));
            }
            if cast_r {
                r = Expr::Cast(Box::new(r), CastTo::Decimal(65, 0));
            }
        }
        if matches!(
            op,
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship
        ) && self.is_text(&l)
            && self.is_text(&r)
        {
            self.binary_literals_as_text(&[&l, &r], self.collation_of(&l, &r))?;
        }
        let (bl, br) = (Box::new(l), Box::new(r));
        let cmp = |s: &Scope<'_>, op: CmpOp, bl: Box<Expr>, br: Box<Expr>| {
            let c = s.collation_of(&bl, &br);
            let (bl, br) = s.compared_at_scale(bl, br);
            Expr::Cmp(op, bl, br, c)
        };
        Ok(match op {
            B::Plus => self.arith(Arith::Add, bl, br),
            B::Minus => self.arith(Arith::Sub, bl, br),
            B::Multiply => self.arith(Arith::Mul, bl, br),
            B::Divide => self.arith(Arith::Div, bl, br),
            B::MyIntegerDivide | B::DuckIntegerDivide => {
                let op = if self.unsigned_number(&bl) || self.unsigned_number(&br) {
                    Arith::UnsignedIntDiv
                } else {
                    Arith::IntDiv
                };
                self.arith(op, bl, br)
            }
            B::Modulo => self.arith(Arith::Mod, bl, br),
            B::Eq => cmp(self, CmpOp::Eq, bl, br),
            B::NotEq => cmp(self, CmpOp::Ne, bl, br),
            B::Lt => cmp(self, CmpOp::Lt, bl, br),
            B::LtEq => cmp(self, CmpOp::Le, bl, br),
            B::Gt => cmp(self, CmpOp::Gt, bl, br),
            B::GtEq => cmp(self, CmpOp::Ge, bl, br),
            B::Spaceship => cmp(self, CmpOp::NullSafeEq, bl, br),
            B::And => Expr::And(bl, br),
            B::Or => Expr::Or(bl, br),
            B::Xor => Expr::Xor(bl, br),
            // `||` is OR in MySQL's default sql_mode (not PIPES_AS_CONCAT).
            B::StringConcat => Expr::Or(bl, br),
            B::BitwiseOr => Expr::Func(Func::BitOr, vec![*bl, *br]),
            B::BitwiseAnd => Expr::Func(Func::BitAnd, vec![*bl, *br]),
            B::BitwiseXor | B::PGBitwiseXor => Expr::Func(Func::BitXor, vec![*bl, *br]),
            B::PGBitwiseShiftLeft => Expr::Func(Func::ShiftLeft, vec![*bl, *br]),
            B::PGBitwiseShiftRight => Expr::Func(Func::ShiftRight, vec![*bl, *br]),
            other => return Err(SqlError::unsupported(format_args!("the operator {other}"))),
        })
    }

    /// `(a, b) op (x, y)`, in terms of the items' comparisons, which gives
    /// MySQL's answers with NULLs too: `=` holds when every pair is equal,
    /// `<>` when one differs, `<` and the others compare in order (the
    /// first pair that differs decides).
    fn row_compare(&mut self, op: CmpOp, left: &ast::Expr, right: &ast::Expr) -> SqlResult<Expr> {
        let width = row_items(left).map_or(1, <[ast::Expr]>::len);
        let (Some(l), Some(r)) = (row_items(left), row_items(right)) else {
            return Err(operand_columns(width));
        };
        if l.len() != r.len() {
            return Err(operand_columns(l.len()));
        }
        let mut pairs = Vec::with_capacity(l.len());
        for (a, b) in l.iter().zip(r) {
            if row_items(a).is_some() || row_items(b).is_some() {
                return Err(SqlError::unsupported("nested row constructors"));
            }
            let (a, b) = (self.lower(a)?, self.lower(b)?);
            let c = self.collation_of(&a, &b);
            pairs.push((a, b, c));
        }
        let cmp = |op, (a, b, c): &(Expr, Expr, Option<Collation>)| {
            Expr::Cmp(op, Box::new(a.clone()), Box::new(b.clone()), *c)
        };
        let all = |op| {
            pairs
                .iter()
                .map(|p| cmp(op, p))
                .reduce(|x, y| Expr::And(Box::new(x), Box::new(y)))
        };
        let out = match op {
            CmpOp::Eq | CmpOp::NullSafeEq => all(op),
            CmpOp::Ne => all(CmpOp::Eq).map(|e| Expr::Not(Box::new(e))),
            // a < b: a1 < b1 OR (a1 = b1 AND (a2 < b2 OR …)); the last
            // pair decides with the operator itself (`<=` admits equal).
            CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                let strict = match op {
                    CmpOp::Le => CmpOp::Lt,
                    CmpOp::Ge => CmpOp::Gt,
                    other => other,
                };
                let mut rest: Option<Expr> = None;
                for (n, p) in pairs.iter().enumerate().rev() {
                    let last = n + 1 == pairs.len();
                    rest = Some(match rest {
                        None if last => cmp(op, p),
                        None => cmp(strict, p),
                        Some(r) => Expr::Or(
                            Box::new(cmp(strict, p)),
                            Box::new(Expr::And(Box::new(cmp(CmpOp::Eq, p)), Box::new(r))),
                        ),
                    });
                }
                rest
            }
        };
        out.ok_or_else(|| operand_columns(1))
    }

    /// `(a, b) [NOT] IN ((x, y), …)`: the rows' equalities, ORed (MySQL's
    /// answer with NULLs too).
    fn row_in(&mut self, row: &[ast::Expr], list: &[ast::Expr], negated: bool) -> SqlResult<Expr> {
        let left = ast::Expr::Tuple(row.to_vec());
        let mut any: Option<Expr> = None;
        for item in list {
            let eq = self.row_compare(CmpOp::Eq, &left, item)?;
            any = Some(match any {
                None => eq,
                Some(a) => Expr::Or(Box::new(a), Box::new(eq)),
            });
        }
        let any = any.ok_or_else(|| operand_columns(row.len()))?;
        Ok(if negated {
            Expr::Not(Box::new(any))
        } else {
            any
        })
    }

    /// What the statement's run of subquery `q` gave.
    fn subquery(&self, q: &ast::Query) -> SqlResult<Arc<Materialised>> {
        let found = self.subqueries.and_then(|r| r.get(&q.to_string()));
        match found {
            Some(Ok(m)) => Ok(Arc::clone(m)),
            Some(Err(e)) => Err(self.correlated_or(e)),
            None => Err(SqlError::unsupported(format_args!(
                "a subquery in the {} clause here",
                self.clause
            ))),
        }
    }

    /// The columns of a correlated subquery planned to run per row (None:
    /// it is not one, or not here).
    fn per_row(&self, q: &ast::Query) -> Option<Arc<Materialised>> {
        let text = q.to_string();
        match self.subqueries?.get(&text)? {
            Err(e) if crate::engine::exec::subquery::may_be_correlated(e) => {}
            _ => return None,
        }
        self.correlated?.get(&text).cloned()
    }

    /// A correlated subquery as an expression run per row: its column
    /// count checked against what the test wants (1241), the outer columns
    /// it may name found.
    fn sub(&mut self, q: &ast::Query, mut test: SubTest) -> SqlResult<Expr> {
        let Some(m) = self.per_row(q) else {
            return Err(SqlError::unsupported("correlated subqueries here"));
        };
        let width = m.kinds.len();
        match &mut test {
            SubTest::Scalar | SubTest::Quantified(..) if width != 1 => {
                return Err(operand_columns(1))
            }
            SubTest::In(left, _) if left.len() != width => return Err(operand_columns(left.len())),
            _ => {}
        }
        // Collations as the uncorrelated form gets them: the subquery's
        // values are constants there.
        let sample = |k: Kind| match k {
            Kind::Str { .. } => Expr::Lit(Val::str(String::new())),
            _ => Expr::Lit(Val::Int(0)),
        };
        match &mut test {
            SubTest::In(left, _) => {
                for ((x, c), k) in left.iter_mut().zip(&m.kinds) {
                    if matches!(k, Kind::Int { .. } | Kind::Dec { .. } | Kind::Double) {
                        *x = self.member_number(std::mem::replace(x, Expr::Lit(Val::Null)));
                    }
                    *c = self.collation_of(x, &sample(*k));
                }
            }
            SubTest::Quantified(x, c, ..) => {
                let k = m.kinds.first().copied().unwrap_or(Kind::Null);
                *c = self.collation_of(x, &sample(k));
            }
            _ => {}
        }
        // Aggregates of this query's columns it writes: this query's.
        let mut aggs = Vec::with_capacity(m.outer_aggs.len());
        for (text, call) in &m.outer_aggs {
            aggs.push((text.clone(), self.lower(call)?));
        }
        Ok(Expr::Sub(Box::new(SubQuery {
            query: Arc::new(q.clone()),
            text: q.to_string().into(),
            outer: outer_columns(q, &self.columns, &self.hidden),
            kinds: m.kinds.clone(),
            decimals: m.metas.first().map_or(NOT_FIXED_DECIMALS, |c| c.decimals),
            test,
            aggs,
        })))
    }

    /// A subquery's 1054 for a column this (outer) scope has: the
    /// subquery is correlated.
    fn correlated_or(&self, e: &SqlError) -> SqlError {
        let named = e.message.split('\'').nth(1).unwrap_or_default();
        let (table, column) = match named.rsplit_once('.') {
            Some((t, c)) => (Some(t), c),
            None => (None, named),
        };
        if e.code == codes::BAD_FIELD && self.resolve(table, column).is_ok() {
            return SqlError::unsupported(format_args!(
                "correlated subqueries here (the subquery names the outer column '{named}')"
            ));
        }
        e.clone()
    }

    /// `x [NOT] IN (subquery)` and `(x, y) [NOT] IN (subquery)` over the
    /// subquery's rows: MySQL's NULL answers (no match and a NULL in the
    /// rows: NULL; NOT IN likewise), FALSE (NOT IN: TRUE) for no rows.
    /// `expr IN (rows m)`. `by_number`: an ENUM or SET compares with
    /// numbers by its index or bits (a subquery of constants, or a
    /// semi-join: [`Scope::lower_condition`]), else by its text (read as a
    /// number, with MariaDB's 1292), as MariaDB's materialised IN does.
    fn in_rows(
        &mut self,
        expr: &ast::Expr,
        m: &Materialised,
        negated: bool,
        by_number: bool,
        value: bool,
    ) -> SqlResult<Expr> {
        let from = if value {
            InList::SubqueryValue
        } else {
            InList::SubqueryRows
        };
        let width = row_items(expr).map_or(1, <[ast::Expr]>::len);
        if m.metas.len() != width {
            return Err(operand_columns(width));
        }
        if m.rows.is_empty() {
            // In a select list an IN over no rows keeps its operand, whose
            // NULL-ability its metadata takes, as MariaDB's (a CREATE …
            // SELECT's column is NULL-able of a NULL-able `x`: seed 48);
            // FALSE (NOT IN: TRUE) all the same.
            if let (true, None) = (self.clause == "SELECT", row_items(expr)) {
                let x = self.lower(expr)?;
                return Ok(Expr::In(Box::new(x), Vec::new(), negated, None, from));
            }
            return Ok(Expr::Lit(Val::Int(i64::from(negated))));
        }
        let Some(items) = row_items(expr) else {
            let mut x = self.lower(expr)?;
            if by_number
                && matches!(
                    m.kinds.first(),
                    Some(Kind::Int { .. } | Kind::Dec { .. } | Kind::Double)
                )
            {
                x = self.member_number(x);
            }
            let mut list: Vec<Expr> = m
                .rows
                .iter()
                .map(|r| Expr::Lit(r.first().cloned().unwrap_or(Val::Null)))
                .collect();
            let coll = self.collation_of(&x, &list[0]);
            // A text column against a NULL row of numbers is still read as
            // a number (its warning), as MariaDB's comparator reads the
            // left operand first.
            let integer = match m.kinds.first() {
                Some(Kind::Int { .. }) => Some(true),
                Some(Kind::Dec { .. } | Kind::Double) => Some(false),
                _ => None,
            };
            if let (Some(integer), Expr::Col(_), Kind::Str { .. }) = (integer, &x, self.kind(&x)) {
                for item in list
                    .iter_mut()
                    .filter(|i| matches!(i, Expr::Lit(Val::Null)))
                {
                    *item = Expr::Func(
                        Func::NullAfterText(integer),
                        vec![Expr::Lit(Val::Null), x.clone()],
                    );
                }
            }
            return Ok(Expr::In(Box::new(x), list, negated, coll, from));
        };
        let xs = items
            .iter()
            .map(|i| self.lower(i))
            .collect::<SqlResult<Vec<_>>>()?;
        let rows: Vec<Expr> = m
            .rows
            .iter()
            .map(|r| {
                let eqs = xs
                    .iter()
                    .zip(r)
                    .map(|(x, v)| {
                        let lit = Expr::Lit(v.clone());
                        let c = self.collation_of(x, &lit);
                        Expr::Cmp(CmpOp::Eq, Box::new(x.clone()), Box::new(lit), c)
                    })
                    .collect();
                balanced(eqs, true)
            })
            .collect();
        let any = balanced(rows, false);
        Ok(if negated {
            Expr::Not(Box::new(any))
        } else {
            any
        })
    }

    /// `x op ANY|SOME (subquery)` (any row holds; FALSE for none) and `x op
    /// ALL (subquery)` (every row holds; TRUE for none), NULLs as in the
    /// OR / AND of the comparisons.
    fn quantified(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        all: bool,
    ) -> SqlResult<Expr> {
        use ast::BinaryOperator as B;
        let ast::Expr::Subquery(q) = right else {
            return Err(SqlError::unsupported("ANY/ALL of something not a subquery"));
        };
        let op = match op {
            B::Eq => CmpOp::Eq,
            B::NotEq => CmpOp::Ne,
            B::Lt => CmpOp::Lt,
            B::LtEq => CmpOp::Le,
            B::Gt => CmpOp::Gt,
            B::GtEq => CmpOp::Ge,
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the operator {other} with ANY/ALL"
                )))
            }
        };
        if row_items(left).is_some() {
            return Err(operand_columns(1));
        }
        if self.per_row(q).is_some() {
            let x = self.lower(left)?;
            return self.sub(q, SubTest::Quantified(Box::new(x), None, op, all));
        }
        let m = self.subquery(q)?;
        if m.metas.len() != 1 {
            return Err(operand_columns(1));
        }
        // MariaDB makes `= ANY` an IN and `<> ALL` a NOT IN (their
        // answers, and the IN's metadata: LONG of 21, NULL-able).
        if matches!((op, all), (CmpOp::Eq, false) | (CmpOp::Ne, true)) {
            let value = !query_reads_table(q);
            return self.in_rows(left, &m, all, value, value);
        }
        if m.rows.is_empty() {
            if self.clause == "SELECT" {
                let x = self.lower(left)?;
                let from = InList::QuantifiedNoRows;
                return Ok(Expr::In(Box::new(x), Vec::new(), all, None, from));
            }
            return Ok(Expr::Lit(Val::Int(i64::from(all))));
        }
        let x = self.lower(left)?;
        let cmps = m
            .rows
            .iter()
            .map(|r| {
                let lit = Expr::Lit(r.first().cloned().unwrap_or(Val::Null));
                let c = self.collation_of(&x, &lit);
                Expr::Cmp(op, Box::new(x.clone()), Box::new(lit), c)
            })
            .collect();
        Ok(balanced(cmps, all))
    }

    /// 1305 for a function no one defines, named as written and, when
    /// unqualified, in the session's database, as MariaDB names it
    /// (`FUNCTION test.nosuchfn does not exist`).
    fn unknown_function(&self, name: &ast::ObjectName) -> SqlError {
        let parts = name_parts(name);
        let named = match (parts.as_slice(), &self.database) {
            ([one], Some(db)) => format!("{db}.{one}"),
            _ => parts.join("."),
        };
        SqlError::new(
            codes::SP_DOES_NOT_EXIST,
            format!("FUNCTION {named} does not exist"),
        )
    }

    fn function(&mut self, f: &ast::Function) -> SqlResult<Expr> {
        let name = f.name.to_string().to_ascii_uppercase();
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subqueries")),
            ast::FunctionArguments::List(list) => {
                let distinct = matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let mut args = Vec::new();
                let mut star = false;
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
                        | ast::FunctionArg::Named {
                            arg: ast::FunctionArgExpr::Expr(e),
                            ..
                        } => args.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => {
                            return Err(SqlError::unsupported(format_args!(
                                "the argument {other} of {name}"
                            )))
                        }
                    }
                }
                (args, distinct, star)
            }
        };
        if f.over.is_some() {
            return self.window(f, &name, &args, distinct, star);
        }
        // MariaDB's percentiles are window functions only (its grammar
        // has no other place for them).
        if matches!(
            name.as_str(),
            "MEDIAN" | "PERCENTILE_CONT" | "PERCENTILE_DISC"
        ) {
            return Err(SqlError::syntax(format_args!("{name} without OVER")));
        }
        // MySQL 8's ANY_VALUE(x) is x, exempt from ONLY_FULL_GROUP_BY
        // (which Skarv does not enforce): a grouped query's x is then any
        // row's of the group, as a bare column's is.
        // NAME_CONST(name, value): the value, named (`item_name`); both
        // literals, as MariaDB asks (1210 otherwise).
        if name == "NAME_CONST" && !distinct && !star {
            return match args.as_slice() {
                [n, v] if is_literal(n) && is_literal(v) => self.lower(v),
                [_, _] => Err(SqlError::new(
                    codes::WRONG_ARGUMENTS,
                    "Incorrect arguments to NAME_CONST",
                )),
                _ => Err(SqlError::new(
                    1582,
                    "Incorrect parameter count in the call to native function 'NAME_CONST'",
                )),
            };
        }
        if name == "ANY_VALUE" && !distinct && !star {
            return match args.as_slice() {
                [x] => self.lower(x),
                _ => Err(SqlError::new(
                    1582,
                    "Incorrect parameter count in the call to native function 'ANY_VALUE'",
                )),
            };
        }
        let agg = AggFn::by_name(&name, star);
        if let Some(func) = agg {
            let counting = matches!(
                func,
                AggFn::Count | AggFn::CountStar | AggFn::Sum | AggFn::Avg | AggFn::Min | AggFn::Max
            );
            if distinct && !counting {
                // MySQL's and MariaDB's grammar has no DISTINCT here.
                return Err(SqlError::syntax(format_args!("DISTINCT in {name}()")));
            }
            if let Some(outer) = self.outer_aggregate(f, func, &args, distinct)? {
                return Ok(outer);
            }
            return self.aggregate(func, &args, distinct, &name);
        }
        if name == "GROUP_CONCAT" || name == "JSON_ARRAYAGG" || name == "JSON_OBJECTAGG" {
            let clauses = match &f.args {
                ast::FunctionArguments::List(list) => list.clauses.as_slice(),
                _ => &[],
            };
            let json = match name.as_str() {
                "JSON_ARRAYAGG" => Some((JsonAgg::Array, 1)),
                "JSON_OBJECTAGG" => Some((JsonAgg::Object, 2)),
                _ => None,
            };
            if let Some((_, arity)) = json {
                if args.len() != arity {
                    return Err(SqlError::new(
                        codes::WRONG_PARAMCOUNT_TO_NATIVE_FCT,
                        format!(
                            "Incorrect parameter count in the call to native function '{name}'"
                        ),
                    ));
                }
            }
            // Its values and its ORDER BY name the outer query only: that
            // query's aggregate.
            let mut named = args.clone();
            for clause in clauses {
                if let ast::FunctionArgumentClause::OrderBy(order) = clause {
                    named.extend(order.iter().map(|o| &o.expr));
                }
            }
            if let Some(outer) = self.outer_aggregate(f, AggFn::GroupConcat, &named, distinct)? {
                return Ok(outer);
            }
            return self.group_concat(&args, distinct, clauses, json.map(|(j, _)| j));
        }
        if name == "DEFAULT" {
            return self.default_of(&args);
        }
        if name == "VALUES" || name == "VALUE" {
            if let [ast::Expr::Identifier(ident)] = args.as_slice() {
                if let Some(cols) = &self.insert_values {
                    let at = cols
                        .iter()
                        .position(|c| c.name.eq_ignore_ascii_case(&ident.value))
                        .ok_or_else(|| {
                            SqlError::new(
                                codes::BAD_FIELD,
                                format!("Unknown column '{}' in 'field list'", ident.value),
                            )
                        })?;
                    return Ok(Expr::InsertValue(at));
                }
                return Ok(Expr::Lit(Val::Null));
            }
        }
        let mut lowered = Vec::with_capacity(args.len());
        let unit_first = matches!(name.as_str(), "TIMESTAMPDIFF" | "TIMESTAMPADD");
        for (i, a) in args.iter().enumerate() {
            // TIMESTAMPDIFF(unit, a, b), TIMESTAMPADD(unit, n, d): the unit
            // is a word, not a column.
            if let (true, 0, ast::Expr::Identifier(unit)) = (unit_first, i, a) {
                lowered.push(Expr::Lit(Val::str(unit.value.to_ascii_uppercase())));
                continue;
            }
            // DATE_ADD(d, INTERVAL n unit): the interval becomes two
            // arguments, the amount and the unit.
            if let ast::Expr::Interval(iv) = a {
                if i == 1 {
                    lowered.push(self.lower(&iv.value)?);
                    lowered.push(Expr::Lit(Val::str(interval_unit(iv))));
                    continue;
                }
            }
            lowered.push(self.lower(a)?);
        }
        match (name.as_str(), lowered.as_slice()) {
            ("CHARSET" | "COLLATION" | "COERCIBILITY", [arg]) => {
                return Ok(Expr::Lit(self.collation_fact(&name, arg)?));
            }
            // A binary string's first byte is its character.
            ("ORD", [arg]) if matches!(self.kind(arg), Kind::Str { collation: None }) => {
                return Ok(Expr::Func(Func::Ascii, lowered));
            }
            // What WEIGHT_STRING weighs: its argument's collation.
            ("WEIGHT_STRING", [arg, ..]) if lowered.len() <= 3 => {
                let of = match self.kind(arg) {
                    Kind::Str { collation: Some(c) } => func::WeightOf::Text(c),
                    Kind::Str { collation: None }
                    | Kind::Date
                    | Kind::DateTime { .. }
                    | Kind::Time { .. } => func::WeightOf::Bytes,
                    _ => func::WeightOf::Nothing,
                };
                return Ok(Expr::Func(Func::WeightString(of), lowered));
            }
            // Two strings compare in the collation they meet in (a binary
            // string's bytes: STRCMP('É', X'7A') is 1).
            ("STRCMP", [a, b]) => {
                return Ok(Expr::Func(Func::Strcmp(self.collation_of(a, b)), lowered));
            }
            // A binary string's characters are its bytes.
            ("CHAR_LENGTH" | "CHARACTER_LENGTH", [arg])
                if matches!(self.kind(arg), Kind::Str { collation: None }) =>
            {
                return Ok(Expr::Func(Func::Length, lowered));
            }
            // A binary string has no case: UPPER and LOWER leave it.
            ("UPPER" | "UCASE" | "LOWER" | "LCASE", [arg])
                if matches!(
                    self.kind(&self.bit_column_bytes(arg.clone())),
                    Kind::Str { collation: None }
                ) =>
            {
                return Ok(self.fixed_text(lowered.remove(0)));
            }
            ("UUID_SHORT", []) => {
                let server_id = (self.variable)("server_id", true)?;
                return Ok(Expr::Func(Func::UuidShort, vec![Expr::Lit(server_id)]));
            }
            // A DOUBLE of fixed decimals made a string keeps them: every
            // argument of CONCAT, the string of the others.
            ("CONCAT" | "CONCAT_WS", _) => {
                lowered = lowered.into_iter().map(|a| self.fixed_text(a)).collect();
            }
            (
                "LENGTH" | "OCTET_LENGTH" | "CHAR_LENGTH" | "CHARACTER_LENGTH" | "UPPER" | "UCASE"
                | "LOWER" | "LCASE" | "REVERSE" | "LEFT" | "RIGHT" | "SUBSTRING" | "SUBSTR" | "MID"
                | "LPAD" | "RPAD" | "REPEAT" | "REPLACE",
                [_, ..],
            ) => {
                let first = lowered.remove(0);
                lowered.insert(0, self.fixed_text(first));
            }
            _ => {}
        }
        if name == "IF" {
            if let Some(condition) = lowered.first_mut() {
                let read = top_level_constants(std::mem::replace(condition, Expr::Lit(Val::Null)));
                *condition = top_level_subqueries(self.temporal_in_lists(read));
            }
        }
        let call = func::lower_call(&name, lowered).map_err(|e| match e.code {
            codes::SP_DOES_NOT_EXIST => self.unknown_function(&f.name),
            _ => e,
        })?;
        Ok(self.unsigned_rounding(call))
    }

    /// A string `e` checked as UTF-8 text (`Func::Utf8Checked`), for CAST
    /// AS CHAR and CONVERT USING utf8mb4: a binary one's bytes, or a hex
    /// literal's (typed as text here), may be none; anything else as it
    /// is.
    fn utf8_checked(&self, e: Expr) -> Expr {
        self.utf8_checked_as(e, "utf8mb4")
    }

    /// [`Scope::utf8_checked`] into the UTF-8 character set `charset`
    /// (utf8mb3 or utf8mb4: its warning names it).
    fn utf8_checked_as(&self, e: Expr, charset: &str) -> Expr {
        if matches!(self.kind(&e), Kind::Str { .. }) {
            Expr::Func(Func::Utf8Checked, vec![e, Expr::Lit(Val::str(charset))])
        } else {
            e
        }
    }

    /// `e` made a string by FixedChar when it is a DOUBLE of fixed
    /// decimals; else `e` as it is.
    fn fixed_text(&self, e: Expr) -> Expr {
        let e = self.year_column_text(self.bit_column_bytes(e));
        match self.fixed_decimals(&e) {
            Some(d) => Expr::Cast(Box::new(e), CastTo::FixedChar(d)),
            None if self.is_float_column(&e) => Expr::Cast(Box::new(e), CastTo::FloatChar),
            None => self.at_scale(e),
        }
    }

    /// Whether `e` is a FLOAT column (its text has six significant
    /// digits: [`CastTo::FloatChar`]).
    fn is_float_column(&self, e: &Expr) -> bool {
        match e {
            Expr::Col(c) => self
                .columns
                .get(*c)
                .is_some_and(|col| col.meta.ty == ColumnType::Float),
            Expr::Cast(_, CastTo::FixedDouble(cast)) => cast.float,
            _ => false,
        }
    }

    /// A BIT column in a string context: its bytes (`Func::BitBytes`), as
    /// MariaDB reads it there; any other expression as it is.
    fn bit_column_bytes(&self, e: Expr) -> Expr {
        let c = match e {
            Expr::Col(c) => c,
            // An outer query's BIT, bound in a correlated subquery.
            Expr::Func(Func::OuterBit, args) => return Expr::Func(Func::BitBytes, args),
            _ => return e,
        };
        match self.columns.get(c).map(|col| &col.meta) {
            Some(meta) if meta.ty == ColumnType::Bit => {
                let bytes = meta.length.div_ceil(8).clamp(1, 8);
                Expr::Func(
                    Func::BitBytes,
                    vec![Expr::Col(c), Expr::Lit(Val::UInt(u64::from(bytes)))],
                )
            }
            _ => e,
        }
    }

    /// A YEAR column in a string context: its four digits, as MariaDB
    /// shows it there (the zero year is `'0000'`, not `'0'`); any other
    /// expression as it is.
    fn year_column_text(&self, e: Expr) -> Expr {
        match &e {
            Expr::Col(c)
                if self
                    .columns
                    .get(*c)
                    .is_some_and(|col| col.meta.ty == ColumnType::Year) =>
            {
                Expr::Func(
                    Func::Lpad,
                    vec![e, Expr::Lit(Val::Int(4)), Expr::Lit(Val::str("0"))],
                )
            }
            _ => e,
        }
    }

    /// A decimal computed (a quotient's digits past its scale, see
    /// `eval::division_digits`) rounded to the scale it is shown with, for
    /// where MariaDB shows or keeps it: CONCAT(1/3) is 0.3333, and
    /// GROUP_CONCAT's values likewise. Any other expression as it is.
    fn at_scale(&self, e: Expr) -> Expr {
        match (self.kind(&e), &e) {
            (_, Expr::Col(_) | Expr::Lit(_)) => e,
            (Kind::Dec { scale }, _) => Expr::Cast(
                Box::new(e),
                CastTo::Decimal(value::DECIMAL_DIGITS_MAX as u8, scale),
            ),
            // A DOUBLE of alternatives keeps the value it took as it was
            // (COALESCE(u, 2 + s) takes a BIGINT UNSIGNED): its text is
            // the double's, `1.8446744073709552e19`, as MariaDB's.
            (Kind::Double, _) => self.alternatives_as_double(e),
            _ => e,
        }
    }

    /// The operands of a comparison (`=`, `<>`, `<`, `<=`, `>`, `>=`,
    /// `<=>`) that compares decimals, each quotient among them rounded to
    /// the scale it is shown with, as MariaDB's comparator compares
    /// decimals: `1/7 = 0.1429` and `1/7*14 = 2` hold there, though 1/7
    /// keeps nine digits in arithmetic (`1/7*10000` is 1428.5714). BETWEEN,
    /// CASE and an IN list of several values compare the digits as they
    /// are (MariaDB's other comparators), and a comparison as doubles
    /// (`1/7 = 0.1429e0`, `1/7 = '0.1429'`) too.
    fn compared_at_scale(&self, a: Box<Expr>, b: Box<Expr>) -> (Box<Expr>, Box<Expr>) {
        let (round_a, round_b) = (self.rounded_vs(&a, &b), self.rounded_vs(&b, &a));
        let round = |e: Box<Expr>, round: bool| match round {
            true => Box::new(self.at_scale(*e)),
            false => e,
        };
        (round(a, round_a), round(b, round_b))
    }

    /// Whether [`Scope::compared_at_scale`] rounds `e` compared with
    /// `other`: a decimal holding a quotient, compared with an exact
    /// number.
    fn rounded_vs(&self, e: &Expr, other: &Expr) -> bool {
        let exact = |e: &Expr| matches!(self.kind(e), Kind::Int { .. } | Kind::Dec { .. });
        let mut quotient = false;
        e.each(&mut |x| quotient |= matches!(x, Expr::Arith(Arith::Div, ..)));
        quotient && matches!(self.kind(e), Kind::Dec { .. }) && exact(other)
    }

    /// Lowers the condition of a WHERE or an ON: see [`Scope::condition`].
    ///
    /// The `x IN (SELECT y FROM …)` that are its conjuncts once NOT is
    /// pushed down (De Morgan's laws, as MariaDB's parser applies them:
    /// `NOT (a NOT IN (…) OR b)` is `a IN (…) AND NOT b`), whose subquery
    /// has no GROUP BY, HAVING nor aggregate, are semi-joins to MariaDB,
    /// whose equality reads an ENUM or SET `x` as its number. Elsewhere (an
    /// IN under OR, IS TRUE, CASE, or of such a subquery) MariaDB's
    /// materialised IN reads it as its text.
    pub fn lower_condition(&mut self, e: &ast::Expr) -> SqlResult<Expr> {
        // A condition inside another (an ON inside a WHERE's subquery
        // scope) keeps the outer one's semi-joins.
        let outer = self.semi_join_ins.len();
        semi_join_ins(e, false, &mut self.semi_join_ins);
        let lowered = self.lower(e);
        self.semi_join_ins.truncate(outer);
        Ok(self.condition(e, lowered?))
    }

    /// Lowers the WHERE of a single-table UPDATE or DELETE: as
    /// [`Scope::lower_condition`] but with no semi-join, as in MariaDB
    /// 10.11, which makes them only for SELECT and multi-table statements
    /// (an ENUM `e IN (SELECT int …)` compares its text there).
    pub fn lower_write_condition(&mut self, e: &ast::Expr) -> SqlResult<Expr> {
        self.operand_condition(e)
    }

    /// Lowers the operand of NOT, IS TRUE or a CASE's WHEN as a truth
    /// value: see [`Scope::condition`]. It makes no semi-join of its own
    /// (one that NOT pushed down is already marked).
    fn operand_condition(&mut self, e: &ast::Expr) -> SqlResult<Expr> {
        let lowered = self.lower(e)?;
        Ok(self.condition(e, lowered))
    }

    /// `e` (written `written`) as a truth value: a bit-value or 0x
    /// literal's number, an ENUM's index or a SET's bits (MariaDB's
    /// `WHERE e` is true for any member but the empty one), else itself.
    fn condition(&self, written: &ast::Expr, e: Expr) -> Expr {
        self.number_read(as_number_literal(written, e))
    }

    /// An expression MariaDB reads as a number (`val_real`, `val_int`):
    /// an operand of arithmetic, a numeric function's argument, an
    /// aggregate's, a condition. [`Scope::member_number`], and an ELT
    /// reads the argument it takes as a number (`ELT(2, b, d) + 1` of a
    /// DATE d is 20251014, not 2026 and a warning). A comparison and a
    /// CAST read ELT as text (MariaDB compares it as a string, casts its
    /// `val_str`), so they take `member_number` only.
    fn number_read(&self, e: Expr) -> Expr {
        match e {
            Expr::Func(Func::Elt, mut args) => {
                let taken = args.split_off(1);
                args.extend(taken.into_iter().map(|a| self.number_read(a)));
                Expr::Func(Func::EltNumber, args)
            }
            other => self.member_number(other),
        }
    }

    /// An ORDER BY key (a query's, a window's, GROUP_CONCAT's): an ENUM
    /// or SET column sorts by its member's index or its bits, as MariaDB
    /// sorts it (`ORDER BY e` follows the ENUM's list, not its text); any
    /// other expression as it is (`ORDER BY CONCAT(e)` sorts the text).
    pub(crate) fn order_key(&self, e: Expr) -> Expr {
        match e {
            Expr::Col(_) => self.member_number(e),
            other => other,
        }
    }

    /// An ENUM or SET column in a numeric context: its member's index or
    /// its bits, as MariaDB reads it there (`e + 1`, `s = 3`, `e IN (1,
    /// 2)`); any other expression as it is.
    fn member_number(&self, e: Expr) -> Expr {
        if self.is_text_min_max(&e) {
            // MariaDB's LEAST and GREATEST of strings read as a number
            // compare their arguments' numbers as DOUBLEs (`val_real`):
            // an ENUM's index, a SET's bits, a string's number (`LEAST('10',
            // '9') + 0` is 9, `LEAST(e, s) + 0` the smaller member number,
            // a DOUBLE).
            let Expr::Func(f, args) = e else {
                unreachable!("checked to be LEAST or GREATEST")
            };
            let args = args
                .into_iter()
                .map(|a| Expr::Cast(Box::new(self.member_number(a)), CastTo::Double))
                .collect();
            return Expr::Func(f, args);
        }
        let c = match e {
            Expr::Col(c) => c,
            Expr::Func(Func::OuterMember, args) => return Expr::Func(Func::MemberNumber, args),
            _ => return e,
        };
        match self.columns.get(c).and_then(|col| col.members.as_ref()) {
            Some(m) => m.number_of(c),
            None => e,
        }
    }

    /// A string literal compared with a number column in a select list,
    /// read once as that comparison reads it (`eval::compared_number`),
    /// one warning for the statement, as MariaDB caches it: against a
    /// BIGINT it converts it when it prepares the statement, so the
    /// warning is the planning's and a strict CREATE … SELECT only warns
    /// (`IF('cherry' = f, …)`: CREATE … SELECT seed 42); against another
    /// number column it reads it at the first row compared, a row's
    /// warning (seed 46: `CASE WHEN n < '2001-01-01' …` fails). Given at
    /// the first row, none without rows, where MariaDB's BIGINT one comes.
    /// Not a YEAR's, which MariaDB converts quietly. A WHERE's are read by
    /// its fold (`plan::fold_constants`).
    fn listed_text_number(&self, column: &Expr, other: Expr) -> Expr {
        // Not a hex or bit literal: a number there.
        let (true, Expr::Col(c), Expr::Lit(Val::Str(text))) =
            (self.clause == "SELECT", column, &other)
        else {
            return other;
        };
        let (integer, prepared) = match self.columns.get(*c) {
            Some(col) if col.members.is_some() || col.meta.ty == ColumnType::Year => return other,
            // Read as a DECIMAL against a DECIMAL too (`plan::number_vs_text`).
            Some(col) => match col.kind {
                Kind::Int { .. } => (true, col.meta.ty == ColumnType::LongLong),
                Kind::Dec { .. } => (true, false),
                Kind::Double => (false, false),
                _ => return other,
            },
            None => return other,
        };
        let env = Env::default();
        let mut ctx = Ctx::new(&[], &env);
        let number = Expr::Lit(eval::compared_number(text, integer, &mut ctx));
        if prepared {
            return planned_once(number, ctx.warnings);
        }
        ctx.warnings
            .into_iter()
            .fold(number, |read, (code, message)| {
                warn_once(read, code, message)
            })
    }

    /// A string literal compared with a DECIMAL expression that is no
    /// constant, as `Func::TextAsNumber` reading it as a DECIMAL: MariaDB
    /// compares the two as DECIMALs, not DOUBLEs (`dd * 1 =
    /// '1.50000000000000000001'` is false of 1.50; a constant DECIMAL's
    /// comparison, `1.5 = '…'`, is a DOUBLE's). A column's in a WHERE or
    /// ON is read by the fold (`plan::number_vs_text`), in a select list
    /// by [`Scope::listed_text_number`].
    fn text_as_decimal(&self, decimal: &Expr, other: Expr) -> Expr {
        let folded = matches!(decimal, Expr::Col(_)) && matches!(self.clause, "WHERE" | "ON");
        // A constant string: a literal, or an expression of literals (not
        // a placeholder's, which a prepared point read keys on).
        let mut placeholder = false;
        other.each(&mut |x| placeholder |= matches!(x, Expr::Param(_)));
        let text = matches!(other, Expr::Lit(Val::Str(_)))
            || (!matches!(other, Expr::Lit(_))
                && !placeholder
                && other.is_constant()
                && matches!(self.kind(&other), Kind::Str { .. }));
        if folded
            || !text
            || decimal.is_constant()
            || !matches!(self.kind(decimal), Kind::Dec { .. })
        {
            return other;
        }
        Expr::Func(Func::TextAsNumber(true), vec![other])
    }

    /// A constant compared with a YEAR column, read as the YEAR it would
    /// be stored as when it is one of two digits (`yr = 24` is `yr =
    /// 2024`, `'0'` 2000), as MariaDB converts such a constant to the
    /// column's type; any other expression as it is.
    fn year_constant(&self, column: &Expr, other: Expr) -> Expr {
        let other = self.temporal_text(column, other);
        let Expr::Col(c) = column else {
            return other;
        };
        if self
            .columns
            .get(*c)
            .is_none_or(|col| col.meta.ty != ColumnType::Year)
        {
            return other;
        }
        let two_digits = match &other {
            Expr::Lit(Val::Int(i)) if (1..=99).contains(i) => *i,
            Expr::Lit(Val::Str(b)) => match std::str::from_utf8(b).ok().map(str::trim) {
                Some(t)
                    if !t.is_empty() && t.len() <= 2 && t.bytes().all(|d| d.is_ascii_digit()) =>
                {
                    t.parse().unwrap_or(0)
                }
                _ => return other,
            },
            _ => return other,
        };
        // As the column would store it (a two-digit 0 is 2000: only text
        // gets here with 0).
        match crate::engine::exec::convert::year_of(i128::from(two_digits), true) {
            Some(year) => Expr::Lit(Val::Int(year as i64)),
            None => other,
        }
    }

    /// MariaDB's 1292 "Incorrect datetime value" of a string literal a
    /// condition's `=` compares with a TIMESTAMP column, when the text is
    /// no date a TIMESTAMP can hold (`'2024-02-30'`, `'x'`): its optimizer
    /// stores the constant in the column's type as it builds its
    /// equalities, before any row (an empty table warns too), and keeps
    /// comparing the text as before. Not of `<`, IN or a select list's `=`,
    /// nor in a single-table UPDATE's or DELETE's WHERE (whose optimizer
    /// stores it while no warning is counted).
    fn timestamp_store_warning(
        &self,
        op: &ast::BinaryOperator,
        column: &Expr,
        other: &Expr,
    ) -> Option<String> {
        if *op != ast::BinaryOperator::Eq
            || !matches!(self.clause, "WHERE" | "ON")
            || self.single_table_write
        {
            return None;
        }
        let (Expr::Col(c), Expr::Lit(Val::Str(text))) = (column, other) else {
            return None;
        };
        if self.columns.get(*c)?.meta.ty != ColumnType::Timestamp {
            return None;
        }
        let text = String::from_utf8_lossy(text);
        let zero = text
            .trim()
            .bytes()
            .all(|b| matches!(b, b'0' | b'-' | b':' | b' ' | b'.'));
        match value::parse_datetime(&text) {
            Some(_) => None,
            None if zero => None,
            None => Some(format!("Incorrect datetime value: '{text}'")),
        }
    }

    /// A string literal compared with a DATE or DATETIME read as one once,
    /// as MariaDB's comparator caches it: text that is no date is the zero
    /// date, with MariaDB's 1292 once, at the first row compared (it was
    /// read, and warned of, at every row).
    fn temporal_text(&self, column: &Expr, other: Expr) -> Expr {
        let Expr::Lit(Val::Str(text)) = &other else {
            return other;
        };
        if column.is_constant() || !matches!(self.kind(column), Kind::Date | Kind::DateTime { .. })
        {
            return other;
        }
        let text = String::from_utf8_lossy(text);
        match eval::temporal_of_text(&text) {
            Some(t) => Expr::Lit(t),
            None => warn_once_eager(
                Expr::Lit(Val::Date(Default::default())),
                crate::error::codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect datetime value: '{text}'"),
            ),
        }
    }

    /// `e` made a double when it is an IF, IFNULL, COALESCE or CASE whose
    /// kind is DOUBLE: the alternative taken keeps its value's form (a
    /// DECIMAL's exact digits), which a reading of its bits must not see
    /// (`BIT_COUNT(CASE … THEN f + y ELSE f / -7 END)` of a BIGINT
    /// UNSIGNED f near 2^64 counts the double's bits in MariaDB: SELECT
    /// fuzz seed 379).
    fn double_alternatives(&self, e: Expr) -> Expr {
        let alternatives = matches!(
            &e,
            Expr::Case(..) | Expr::Func(Func::If | Func::IfNull | Func::Coalesce, _)
        );
        if alternatives && self.kind(&e) == Kind::Double {
            Expr::Cast(Box::new(e), CastTo::Double)
        } else {
            e
        }
    }

    /// [`Scope::member_number`] of a CAST's operand, when the CAST makes a
    /// number (`CAST(e AS SIGNED)` is the ENUM's index).
    fn member_number_for(&self, e: Expr, to: &CastTo) -> Expr {
        // An IF or CASE of a double and an integer is a double, though the
        // integer taken keeps its value's form: made one here, so that a
        // negative one is 0 UNSIGNED (note 1916) as MariaDB's, not wrapped.
        let double_of_alternatives = matches!(
            &e,
            Expr::Case(..) | Expr::Func(Func::If | Func::IfNull | Func::Coalesce, _)
        ) && self.kind(&e) == Kind::Double;
        match to {
            CastTo::Signed | CastTo::Unsigned if double_of_alternatives => {
                Expr::Cast(Box::new(e), CastTo::Double)
            }
            // CAST AS SIGNED reads a string LEAST by its text.
            CastTo::Signed | CastTo::Unsigned if self.is_text_min_max(&e) => e,
            CastTo::Signed
            | CastTo::Unsigned
            | CastTo::Decimal(..)
            | CastTo::Double
            | CastTo::FixedDouble(_) => self.member_number(e),
            _ => e,
        }
    }

    /// Whether `e` is `CAST(x AS CHAR)` compared with an integer `other`:
    /// MariaDB compares the two as integers, the text rounded half away
    /// from zero as a DECIMAL rounds it (`CAST(2.5 AS CHAR) = 3`,
    /// `CAST(0.1e0 * 11 AS CHAR) = 1`; SELECT seed 217), where text of
    /// any other kind is compared as a DECIMAL (`'1.1' = 1` is false).
    fn char_cast_vs_integer(&self, e: &Expr, other: &Expr) -> bool {
        matches!(e, Expr::Cast(_, CastTo::Char)) && matches!(self.kind(other), Kind::Int { .. })
    }

    /// `l`, a comparison's left operand, as `Func::TextAsNumber` when it
    /// is text that is no column nor constant (those have their own
    /// readings: `null_after_text`, `plan::fold_constants`) and `r` a
    /// number: MariaDB reads the text as a number before it evaluates
    /// `r`, so its warning comes before `r`'s (or `r`'s NULL).
    fn text_read_first(&self, l: Expr, r: &Expr) -> Expr {
        // A text column before a number expression of its table (not a
        // column: `null_after_text`) is read first too, before the
        // expression's own warning or error (`b < MOD(f / 0, 0)` fails
        // on b's 1292, not the division's 1365: CREATE … SELECT seed 43).
        if matches!(l, Expr::Col(_))
            && !matches!(r, Expr::Col(_) | Expr::Func(Func::NullAfterText(_), _))
        {
            if let Some(integer) = self.text_column_vs_number(&l, r) {
                return Expr::Func(Func::TextAsNumber(integer), vec![l]);
            }
        }
        if matches!(l, Expr::Col(_)) || l.is_constant() || self.is_member(&l) {
            return l;
        }
        if !matches!(self.kind(&l), Kind::Str { .. }) || self.char_cast_vs_integer(&l, r) {
            return l;
        }
        let integer = match self.kind(r) {
            Kind::Int { .. } => true,
            Kind::Dec { .. } | Kind::Double => false,
            _ => return l,
        };
        Expr::Func(Func::TextAsNumber(integer), vec![l])
    }

    /// `r`, a comparison's right operand, as `Func::NullAfterText` when it
    /// is a NULL-able number column after `l`, a text column of the same
    /// table (not a join's key: that stays two columns); a number
    /// expression has `l` read first instead ([`Scope::text_read_first`]).
    fn null_after_text(&self, l: &Expr, r: Expr) -> Expr {
        match self.text_column_vs_number(l, &r) {
            Some(integer) if matches!(r, Expr::Col(_)) && self.nullable(&r) => {
                Expr::Func(Func::NullAfterText(integer), vec![r, l.clone()])
            }
            _ => r,
        }
    }

    /// Whether `l` is a text column and `r` a number that is no constant
    /// nor an ENUM's or SET's, all of whose columns are of `l`'s table:
    /// then whether `l`'s text is read as a DECIMAL (else a DOUBLE).
    fn text_column_vs_number(&self, l: &Expr, r: &Expr) -> Option<bool> {
        let Expr::Col(text) = l else {
            return None;
        };
        let integer = match self.kind(r) {
            Kind::Int { .. } => true,
            Kind::Dec { .. } | Kind::Double => false,
            _ => return None,
        };
        // Every column it reads is of the text column's table.
        let table = self.columns.get(*text).map(|c| &c.table);
        let mut same_table = !r.is_constant();
        r.each(&mut |e| {
            if let Expr::Col(c) = e {
                same_table &= self.columns.get(*c).map(|c| &c.table) == table;
            }
        });
        let text_column = matches!(self.kind(l), Kind::Str { .. }) && !self.is_member(l);
        (text_column && same_table && !self.is_member(r)).then_some(integer)
    }

    /// 1300 for a binary literal among `parts` that is not UTF-8 where
    /// strings meet in a text collation (`s = 0xFF`, `CONCAT(s, 0xFF)`):
    /// MariaDB converts it to the text's character set and fails (its
    /// 1267 or 1270, illegal mix of collations, follows). Nothing where
    /// they meet as bytes.
    fn binary_literals_as_text(
        &self,
        parts: &[&Expr],
        collation: Option<Collation>,
    ) -> SqlResult<()> {
        if collation.is_none() {
            return Ok(());
        }
        for part in parts {
            let Expr::Func(Func::BinaryLiteral, _) = part else {
                continue;
            };
            if let Some(bytes) = part.text_literal() {
                if let Err(e) = std::str::from_utf8(bytes) {
                    return Err(SqlError::invalid_utf8mb4(bytes, e.valid_up_to()));
                }
            }
        }
        Ok(())
    }

    /// `x IN (items)` as one equality per item, each in its item's type:
    /// `number` (x as a number) against a number, `x` against the rest.
    fn in_item_by_item(&self, x: &Expr, number: &Expr, items: Vec<Expr>, negated: bool) -> Expr {
        let eqs = items
            .into_iter()
            .map(|i| {
                let x = if self.is_numeric(&i) { number } else { x }.clone();
                let c = self.collation_of(&x, &i);
                Expr::Cmp(CmpOp::Eq, Box::new(x), Box::new(i), c)
            })
            .collect();
        let any = balanced(eqs, false);
        if negated {
            Expr::Not(Box::new(any))
        } else {
            any
        }
    }

    /// A function that counts or cuts characters (`Func::reads_characters`)
    /// given a binary string: that argument marked `Func::Bytes`, so that
    /// its bytes are the characters, UTF-8 or not, as MariaDB reads a
    /// binary string. Any other expression as it is.
    fn binary_read_as_bytes(&self, mut e: Expr) -> Expr {
        if let Expr::Func(f, args) = &mut e {
            let binary = || {
                args.iter()
                    .position(|a| matches!(self.kind(a), Kind::Str { collation: None }))
            };
            if let (true, Some(at)) = (f.reads_characters(), binary()) {
                let inner = std::mem::replace(&mut args[at], Expr::Lit(Val::Null));
                args[at] = Expr::Func(Func::Bytes, vec![inner]);
            }
        }
        e
    }

    /// Whether `e`'s values are strings.
    fn is_text(&self, e: &Expr) -> bool {
        matches!(self.kind(e), Kind::Str { .. })
    }

    /// Whether `e` is LEAST or GREATEST of a string's kind.
    fn is_text_min_max(&self, e: &Expr) -> bool {
        matches!(e, Expr::Func(Func::Least(_) | Func::Greatest(_), _))
            && matches!(self.kind(e), Kind::Str { .. })
    }

    /// `e` as a column stores it: [`Scope::alternatives_as_double`], as
    /// MariaDB's `save_in_field` reads `val_real` (`IF(c, d, u)` of a
    /// BIGINT UNSIGNED u at its end is 2^64, out of a BIGINT UNSIGNED
    /// column's range: DML seed 158).
    pub fn stored(&self, e: Expr) -> Expr {
        self.alternatives_as_double(e)
    }

    /// IF, CASE, COALESCE, IFNULL, GREATEST or LEAST typed DOUBLE made its
    /// double: the alternative taken keeps its own form (an integer), but
    /// MariaDB reads the whole as a double where it is stored, computed
    /// with or shown as text. Anything else as it is.
    fn alternatives_as_double(&self, e: Expr) -> Expr {
        let alternatives = matches!(
            &e,
            Expr::Case(..)
                | Expr::Func(
                    Func::If | Func::IfNull | Func::Coalesce | Func::Greatest(_) | Func::Least(_),
                    _
                )
        );
        if alternatives && self.kind(&e) == Kind::Double {
            Expr::Cast(Box::new(e), CastTo::Double)
        } else {
            e
        }
    }

    /// `a op b`, reading `b` beside a NULL `a` unless the operation is
    /// MariaDB's DECIMAL arithmetic (a DECIMAL operand without a DOUBLE,
    /// `/` of anything but a DOUBLE, DIV of anything but two integers).
    fn arith(&self, op: Arith, a: Box<Expr>, b: Box<Expr>) -> Expr {
        // A DOUBLE of alternatives that took an integer is that double
        // here too: `COALESCE(i, d) - u` of an integer i is double
        // arithmetic, not unsigned (1690 below 0), as MariaDB's.
        let as_double = |e: Box<Expr>| Box::new(self.alternatives_as_double(*e));
        let (a, b) = (as_double(a), as_double(b));
        let (ka, kb) = (self.kind(&a), self.kind(&b));
        let double = |k: Kind| matches!(k, Kind::Double | Kind::Str { .. } | Kind::Null);
        let integer = |k: Kind| {
            matches!(
                k,
                Kind::Int { .. } | Kind::Date | Kind::DateTime { fsp: 0 } | Kind::Time { fsp: 0 }
            )
        };
        let eager = match op {
            Arith::Div => double(ka) || double(kb),
            Arith::IntDiv | Arith::UnsignedIntDiv => integer(ka) && integer(kb),
            _ => double(ka) || double(kb) || (integer(ka) && integer(kb)),
        };
        Expr::Arith(op, a, b, eager)
    }

    /// Whether `e` is an unsigned number by MariaDB's `unsigned_flag`: an
    /// UNSIGNED or BIT column, ABS, FLOOR, CEIL, ROUND or TRUNCATE of one,
    /// IFNULL or COALESCE of such only, a sum, difference or product of
    /// two such DECIMALs, an unsigned integer.
    fn unsigned_number(&self, e: &Expr) -> bool {
        match e {
            Expr::Col(c) => self
                .columns
                .get(*c)
                .is_some_and(|col| col.meta.flags & flags::UNSIGNED != 0),
            Expr::Arith(Arith::Add | Arith::Sub | Arith::Mul, a, b, _)
                if matches!(self.kind(e), Kind::Dec { .. }) =>
            {
                self.unsigned_number(a) && self.unsigned_number(b)
            }
            Expr::Func(
                Func::Abs | Func::Floor | Func::Ceil | Func::Round | Func::Truncate,
                args,
            ) if !args.is_empty() => self.unsigned_number(&args[0]),
            Expr::Func(Func::IfNull | Func::Coalesce, args) => {
                args.iter().all(|a| self.unsigned_number(a))
            }
            _ => matches!(self.kind(e), Kind::Int { unsigned: true }),
        }
    }

    /// CEIL or FLOOR of an unsigned DECIMAL, an integer, made an
    /// unsigned one, as MariaDB's `unsigned_flag` has it: `-1 * CEIL(ud)`
    /// is 1690 (the value is never below 0). Any other expression as it
    /// is.
    fn unsigned_rounding(&self, e: Expr) -> Expr {
        match &e {
            Expr::Func(Func::Ceil | Func::Floor, args)
                if self.kind(&e) == (Kind::Int { unsigned: true })
                    && matches!(args.first().map(|a| self.kind(a)), Some(Kind::Dec { .. })) =>
            {
                Expr::Cast(Box::new(e), CastTo::Unsigned)
            }
            _ => e,
        }
    }

    /// Whether `e` is an ENUM or SET column (an outer query's too).
    fn is_member(&self, e: &Expr) -> bool {
        match e {
            Expr::Col(c) => self
                .columns
                .get(*c)
                .is_some_and(|col| col.members.is_some()),
            Expr::Func(Func::OuterMember, _) => true,
            _ => false,
        }
    }

    /// Whether `e` is of a numeric kind (an integer, decimal or double).
    fn is_numeric(&self, e: &Expr) -> bool {
        matches!(
            self.kind(e),
            Kind::Int { .. } | Kind::Dec { .. } | Kind::Double
        )
    }

    /// `e` as the number arithmetic reads, when it is a DATETIME or TIME
    /// with fractional digits: a DECIMAL of them (MariaDB's `a + 0` of a
    /// DATETIME(3) is 20200101100000.500, not a rounded integer).
    fn temporal_number(&self, e: Expr) -> Expr {
        let (whole, fsp) = match self.kind(&e) {
            Kind::DateTime { fsp } => (DATETIME_NUMBER_DIGITS, fsp),
            Kind::Time { fsp } => (TIME_NUMBER_DIGITS, fsp),
            _ => return e,
        };
        if fsp == 0 {
            return e;
        }
        Expr::Cast(Box::new(e), CastTo::Decimal(whole + fsp, fsp))
    }

    /// The fixed decimals of a DOUBLE expression ([`Scope::decimals`]),
    /// or the fractional digits of a DATETIME or TIME one, which MariaDB's
    /// string of it has (`Item::val_str`: `CONCAT(NOW(3))` has 3, not the
    /// 6 of the value); None for any other expression.
    fn fixed_decimals(&self, e: &Expr) -> Option<u8> {
        match self.kind(e) {
            Kind::DateTime { fsp } | Kind::Time { fsp } => Some(fsp),
            Kind::Double => Some(self.decimals(e)).filter(|d| *d < NOT_FIXED_DECIMALS),
            _ => None,
        }
    }

    /// `CHARSET(x)`, `COLLATION(x)` or `COERCIBILITY(x)`, known from the
    /// kind of `x` and what it is: a literal is in the connection's
    /// character set (coercibility 4), a column or other expression in
    /// its collation (2), `COLLATE` explicit (0), the session's facts
    /// system constants (3), a number or a date binary (5), NULL
    /// ignorable (6).
    fn collation_fact(&self, name: &str, arg: &Expr) -> SqlResult<Val> {
        let (charset, collation) = match (self.kind(arg), arg) {
            (Kind::Str { .. }, Expr::Func(Func::Database | Func::User | Func::Version, _)) => {
                ("utf8mb3".to_owned(), "utf8mb3_general_ci".to_owned())
            }
            (Kind::Str { collation: Some(c) }, Expr::Func(Func::Collate(_), _)) => {
                ("utf8mb4".to_owned(), c.name().to_owned())
            }
            (Kind::Str { collation: Some(_) }, e) if e.is_constant() => {
                let var = |name: &str| (self.variable)(name, false).map(|v| v.to_text());
                (
                    var("character_set_connection")?,
                    var("collation_connection")?,
                )
            }
            (Kind::Str { collation: Some(c) }, _) => ("utf8mb4".to_owned(), c.name().to_owned()),
            _ => ("binary".to_owned(), "binary".to_owned()),
        };
        Ok(match name {
            "CHARSET" => Val::str(charset),
            "COLLATION" => Val::str(collation),
            _ => Val::Int(i64::from(eval::coercibility(arg, self))),
        })
    }

    /// An aggregate in a subquery whose arguments name columns of one
    /// outer query only (`SUM(t.a)` with `t` outside): MySQL aggregates it
    /// in that query, over its group, and the subquery reads the value as
    /// a constant. Bound when the subquery runs for a row; while it is
    /// planned, recorded for the outer query (a sample value stands in).
    /// None: an aggregate of this query (or one kept inside, where nobody
    /// outside computes it).
    fn outer_aggregate(
        &mut self,
        call: &ast::Function,
        func: AggFn,
        args: &[&ast::Expr],
        distinct: bool,
    ) -> SqlResult<Option<Expr>> {
        if self.outer.is_empty() || args.is_empty() {
            return Ok(None);
        }
        let before = self.outer_levels.replace(0);
        let saved = self.aggs.take();
        let lowered: SqlResult<Vec<Expr>> = args.iter().map(|a| self.lower(a)).collect();
        self.aggs = saved;
        let levels = self.outer_levels.replace(before);
        self.outer_levels.set(before | levels);
        let lowered = lowered?;
        let mut inner = false;
        for e in &lowered {
            e.each(&mut |x| inner |= matches!(x, Expr::Col(_) | Expr::Sub(_)));
        }
        if inner || levels == 0 {
            return Ok(None);
        }
        // Columns of several outer queries: the innermost of them
        // aggregates it (the others' are constants there).
        let level = (u64::BITS - 1 - levels.leading_zeros()) as usize;
        let Some(row) = self.outer.get(level) else {
            return Ok(None);
        };
        let text = call.to_string();
        if let Some((_, v)) = row.aggs.iter().find(|(t, _)| *t == text) {
            return Ok(Some(Expr::Lit(v.clone())));
        }
        let Some(wanted) = &row.wanted else {
            return Ok(None);
        };
        let mut wanted = wanted.borrow_mut();
        if !wanted.iter().any(|(t, _)| *t == text) {
            wanted.push((text, ast::Expr::Function(call.clone())));
        }
        let arg_kind = match (func, lowered.as_slice()) {
            (AggFn::GroupConcat, _) => Kind::Str {
                collation: Some(Collation::Utf8mb4GeneralCi),
            },
            (_, [a]) => self.kind(a),
            _ => Kind::Int { unsigned: false },
        };
        let spec = AggSpec {
            func,
            arg: None,
            distinct,
            arg_kind,
            concat: None,
        };
        Ok(Some(Expr::Lit(sample_value(eval::agg_kind(&spec)))))
    }

    fn aggregate(
        &mut self,
        func: AggFn,
        args: &[&ast::Expr],
        distinct: bool,
        name: &str,
    ) -> SqlResult<Expr> {
        if self.aggs.is_none() {
            return Err(SqlError::new(
                codes::INVALID_GROUP_FUNC_USE,
                "Invalid use of group function",
            ));
        }
        let arg = match (func, args) {
            (AggFn::CountStar, []) => None,
            (_, [a]) => {
                // An aggregate's argument is evaluated per row: no nested
                // aggregates.
                let saved = self.aggs.take();
                let lowered = self.lower(a);
                self.aggs = saved;
                // The aggregates of numbers read an ENUM's index, a SET's
                // bits (MIN, MAX and COUNT their text).
                let numeric = !matches!(
                    func,
                    AggFn::Min | AggFn::Max | AggFn::Count | AggFn::CountStar | AggFn::GroupConcat
                );
                Some(if numeric {
                    self.number_read(lowered?)
                } else {
                    lowered?
                })
            }
            (AggFn::Count, [_, _, ..]) if distinct => return self.count_distinct_of(args),
            // MySQL's grammar has no such call: a syntax error.
            _ => {
                return Err(SqlError::syntax(format_args!(
                    "{name}() takes one argument{}",
                    if func == AggFn::Count {
                        " (several only after DISTINCT)"
                    } else {
                        ""
                    }
                )))
            }
        };
        let arg_kind = arg
            .as_ref()
            .map_or(Kind::Int { unsigned: false }, |a| self.kind(a));
        self.push_agg(AggSpec {
            func,
            arg,
            distinct,
            arg_kind,
            concat: None,
        })
    }

    /// Adds an aggregate to the query's: 1111 where none may be.
    fn push_agg(&mut self, spec: AggSpec) -> SqlResult<Expr> {
        let aggs = self.aggs.as_mut().ok_or_else(|| {
            SqlError::new(
                codes::INVALID_GROUP_FUNC_USE,
                "Invalid use of group function",
            )
        })?;
        aggs.push(spec);
        Ok(Expr::Agg(aggs.len() - 1))
    }

    /// Lowers `COUNT(DISTINCT a, b…)`: the rows whose values are none NULL
    /// and not all equal to an earlier row's, each compared in its own
    /// collation (MariaDB's; `COUNT(a, b)` without DISTINCT is refused).
    fn count_distinct_of(&mut self, args: &[&ast::Expr]) -> SqlResult<Expr> {
        let mut concat = GroupConcat {
            args: Vec::with_capacity(args.len()),
            order: Vec::new(),
            separator: Vec::new(),
            max_len: 0,
            collations: Vec::with_capacity(args.len()),
            order_collations: Vec::new(),
            json: None,
        };
        // Its arguments are evaluated per row: no nested aggregates.
        let saved = self.aggs.take();
        let lowered: SqlResult<Vec<Expr>> = args.iter().map(|a| self.lower(a)).collect();
        self.aggs = saved;
        for e in lowered? {
            concat.collations.push(match self.kind(&e) {
                Kind::Str { collation } => collation,
                _ => Some(Collation::Utf8mb4GeneralCi),
            });
            concat.args.push(e);
        }
        self.push_agg(AggSpec {
            func: AggFn::Count,
            arg: None,
            distinct: true,
            arg_kind: Kind::Int { unsigned: false },
            concat: Some(Box::new(concat)),
        })
    }

    /// Lowers `GROUP_CONCAT`: its values, ORDER BY and SEPARATOR.
    fn group_concat(
        &mut self,
        args: &[&ast::Expr],
        distinct: bool,
        clauses: &[ast::FunctionArgumentClause],
        json: Option<JsonAgg>,
    ) -> SqlResult<Expr> {
        if self.aggs.is_none() {
            return Err(SqlError::new(
                codes::INVALID_GROUP_FUNC_USE,
                "Invalid use of group function",
            ));
        }
        if args.is_empty() {
            return Err(SqlError::new(
                codes::PARSE,
                "Incorrect parameter count in the call to GROUP_CONCAT",
            ));
        }
        // Its arguments are evaluated per row: no nested aggregates.
        let saved = self.aggs.take();
        let lowered = self.group_concat_parts(args, clauses);
        self.aggs = saved;
        let mut concat = lowered?;
        if json.is_none() {
            // GROUP_CONCAT's values are text: a DOUBLE of fixed decimals
            // keeps them, as in CONCAT (TRUNCATE(y, 1) of a string is 0.0).
            concat.args = std::mem::take(&mut concat.args)
                .into_iter()
                .map(|a| self.fixed_text(a))
                .collect();
        }
        if let Some(j) = json {
            concat.json = Some(j);
            concat.separator = match j {
                JsonAgg::Array => b",".to_vec(),
                JsonAgg::Object => b", ".to_vec(),
            };
            if distinct && concat.order.is_empty() && j == JsonAgg::Array {
                // MariaDB's DISTINCT keeps the values in a sorted tree:
                // they come out in order.
                concat.order.push((concat.args[0].clone(), false));
                concat.order_collations.push(concat.collations[0]);
            }
        }
        // Its text's collation: its arguments' as CONCAT's (a `_bin`
        // column's stays), bytes when one is binary.
        let binary = concat
            .args
            .iter()
            .any(|a| matches!(self.kind(a), Kind::Str { collation: None }));
        let collation = match eval::shared_text_kind(concat.args.iter(), self) {
            Some(Kind::Str { collation: Some(c) }) if json.is_none() => c,
            _ => Collation::Utf8mb4GeneralCi,
        };
        concat.max_len = match (self.variable)("group_concat_max_len", false)? {
            Val::Int(n) => usize::try_from(n).unwrap_or(0),
            Val::UInt(n) => usize::try_from(n).unwrap_or(usize::MAX),
            other => other
                .to_text()
                .parse()
                .unwrap_or(GROUP_CONCAT_MAX_LEN_DEFAULT_BYTES),
        };
        self.push_agg(AggSpec {
            func: AggFn::GroupConcat,
            arg: None,
            distinct,
            arg_kind: Kind::Str {
                collation: (!binary).then_some(collation),
            },
            concat: Some(Box::new(concat)),
        })
    }

    fn group_concat_parts(
        &mut self,
        args: &[&ast::Expr],
        clauses: &[ast::FunctionArgumentClause],
    ) -> SqlResult<GroupConcat> {
        let mut concat = GroupConcat {
            args: Vec::with_capacity(args.len()),
            order: Vec::new(),
            separator: b",".to_vec(),
            max_len: 0,
            collations: Vec::with_capacity(args.len()),
            order_collations: Vec::new(),
            json: None,
        };
        for a in args {
            let e = self.lower(a)?;
            let e = self.at_scale(e);
            concat.collations.push(match self.kind(&e) {
                Kind::Str { collation } => collation,
                _ => Some(Collation::Utf8mb4GeneralCi),
            });
            concat.args.push(e);
        }
        for clause in clauses {
            match clause {
                ast::FunctionArgumentClause::OrderBy(exprs) => {
                    for o in exprs {
                        let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
                        // `ORDER BY 2`: the second argument, as MySQL reads it.
                        let position = match position_literal(&o.expr) {
                            Some((true, _)) => {
                                return Err(SqlError::new(
                                    codes::BAD_FIELD,
                                    format!("Unknown column '{}' in 'ORDER BY'", o.expr),
                                ));
                            }
                            Some((false, n)) => n.parse::<usize>().ok(),
                            None => None,
                        };
                        let e = match position {
                            Some(p) => match p.checked_sub(1).and_then(|i| concat.args.get(i)) {
                                Some(arg) => arg.clone(),
                                None => {
                                    return Err(SqlError::new(
                                        codes::BAD_FIELD,
                                        format!("Unknown column '{p}' in 'ORDER BY'"),
                                    ))
                                }
                            },
                            None => self.lower(&o.expr)?,
                        };
                        let e = self.order_key(e);
                        concat.order_collations.push(match self.kind(&e) {
                            Kind::Str { collation } => collation,
                            _ => Some(Collation::Utf8mb4GeneralCi),
                        });
                        concat.order.push((e, desc));
                    }
                }
                ast::FunctionArgumentClause::Separator(v) => {
                    concat.separator = match &v.value {
                        ast::Value::SingleQuotedString(t) | ast::Value::DoubleQuotedString(t) => {
                            t.as_bytes().to_vec()
                        }
                        other => {
                            return Err(SqlError::syntax(format_args!("SEPARATOR {other}")));
                        }
                    };
                }
                other => {
                    return Err(SqlError::unsupported(format_args!(
                        "{other} in GROUP_CONCAT"
                    )));
                }
            }
        }
        Ok(concat)
    }

    /// Alternatives of one value (COALESCE, IFNULL, IF, CASE, GREATEST,
    /// LEAST) of different numeric kinds: each is read as the kind they
    /// make together, as MariaDB types the result, so that the value taken
    /// computes as that kind: integers with a decimal are decimals of the
    /// largest scale (a decimal of a smaller one too: `GREATEST(d2, i)` of
    /// an integer shows `.00`), and signed with unsigned integers a
    /// DECIMAL (no integer type holds both ranges). Without it the
    /// value kept its own kind: `COALESCE(unsigned_col, 0) - 10` was an
    /// unsigned subtraction (1690 below 0), `COALESCE(decimal, id) - u` one
    /// too when the decimal was NULL, and 2^64 - 1 went to a signed BIGINT
    /// column (an internal error in the binary protocol).
    fn align_alternatives(&self, alternatives: Vec<&mut Expr>) {
        let kinds: Vec<Kind> = alternatives.iter().map(|e| self.kind(e)).collect();
        let numeric: Vec<Kind> = kinds.iter().copied().filter(|k| k.is_numeric()).collect();
        if numeric.len() != kinds.iter().filter(|k| **k != Kind::Null).count() {
            // Strings or temporal values among them. A date or time with
            // a string or a number is a string, MariaDB's type for them
            // together: the one taken is its text, so that a number made
            // of it reads the text (`IF(c, 'x', d) + 1` of 2024-03-01 is
            // 2025, not 20240302).
            let string = kinds.iter().any(|k| matches!(k, Kind::Str { .. }));
            let temporal: Vec<Kind> = kinds.iter().copied().filter(|k| k.is_temporal()).collect();
            let mixed = temporal
                .windows(2)
                .any(|w| std::mem::discriminant(&w[0]) != std::mem::discriminant(&w[1]));
            if !string && numeric.is_empty() && mixed {
                // Dates with datetimes or times: DATETIMEs, as MariaDB's
                // (IFNULL(d, NOW()) of a date is its midnight).
                let fsp = temporal
                    .iter()
                    .map(|k| match k {
                        Kind::DateTime { fsp } | Kind::Time { fsp } => *fsp,
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0);
                for (e, kind) in alternatives.into_iter().zip(kinds) {
                    if matches!(kind, Kind::Date | Kind::Time { .. }) {
                        let inner = std::mem::replace(e, Expr::Lit(Val::Null));
                        *e = Expr::Cast(Box::new(inner), CastTo::DateTime(fsp));
                    }
                }
                return;
            }
            if string || !numeric.is_empty() {
                for (e, kind) in alternatives.into_iter().zip(kinds) {
                    // A BIT among strings is its bytes, a YEAR its four
                    // digits.
                    if string {
                        let inner = std::mem::replace(e, Expr::Lit(Val::Null));
                        *e = self.year_column_text(self.bit_column_bytes(inner));
                        // A number among strings is its text, as MariaDB's
                        // VARCHAR of them gives it (HEX(COALESCE(n, e)) of
                        // 5 is 35, not 5). A BIT is no longer one: its
                        // bytes stay binary, as MariaDB's result is.
                        if self.kind(e).is_numeric() && !self.is_member(e) {
                            let inner = std::mem::replace(e, Expr::Lit(Val::Null));
                            let text = Expr::Cast(Box::new(self.fixed_text(inner)), CastTo::Char);
                            *e = Expr::Func(Func::NumberText, vec![text]);
                        }
                    }
                    if kind.is_temporal() {
                        let inner = std::mem::replace(e, Expr::Lit(Val::Null));
                        // Its text (a time's with its kind's digits).
                        let text = match self.fixed_decimals(&inner) {
                            Some(d) => Expr::Cast(Box::new(inner), CastTo::FixedChar(d)),
                            None => Expr::Cast(Box::new(inner), CastTo::Char),
                        };
                        *e = Expr::Func(Func::NumberText, vec![text]);
                    }
                }
            }
            return;
        }
        let signed = numeric.contains(&Kind::Int { unsigned: false });
        let unsigned = numeric.contains(&Kind::Int { unsigned: true });
        let double = numeric.contains(&Kind::Double);
        let decimal = numeric.iter().any(|k| matches!(k, Kind::Dec { .. }));
        // With a double they stay as they are: a double's shown decimals
        // (DOUBLE(10,2)) are read from the alternatives themselves.
        if double || !(decimal || (signed && unsigned)) {
            return;
        }
        // An integer taken is a decimal of its own digits, and a decimal
        // keeps its scale: the value is shown at the scale they share
        // (`IFNULL(i, d)` 2 as 2.00, by the result column and by
        // `at_scale` in a string function) but stored or sent to a UNION's
        // text column as it is (`IF(0, 1.5, 3)` is '3' there), as
        // MariaDB's `val_decimal` of the alternative taken.
        let to = CastTo::Decimal(value::DECIMAL_DIGITS_MAX as u8, 0);
        for (e, kind) in alternatives.into_iter().zip(kinds) {
            if matches!(kind, Kind::Int { .. }) {
                let inner = std::mem::replace(e, Expr::Lit(Val::Null));
                *e = Expr::Cast(Box::new(inner), to.clone());
            }
        }
    }

    /// The kind of an expression's values.
    pub fn kind(&self, e: &Expr) -> Kind {
        eval::kind(e, self)
    }

    /// A DECIMAL's display length less its decimals, as MariaDB counts
    /// it (digits, a sign, a point when it has decimals, less the
    /// decimals): of a literal or a column (from its metadata), and of a
    /// negation of one; None where it is not known here.
    pub fn decimal_whole_length(&self, e: &Expr) -> Option<u32> {
        let (whole, scale) = self.decimal_digits(e)?;
        Some(whole + u32::from(scale > 0) + 1)
    }

    /// A DECIMAL's digits before and after the point as MariaDB types
    /// it: of a literal, a column, a negation, `+ - *` (a sum's whole
    /// part one digit more than its widest operand's, a product's both
    /// operands' digits), a CAST, SUM (22 more whole digits), AVG, MIN and
    /// MAX; an integer literal's or column's digits; None where it is not
    /// known here.
    /// [`Scope::decimal_digits`] of an arithmetic operand, where a date,
    /// a datetime or a time is the number it reads as: `YYYYMMDD`'s 8
    /// digits, `YYYYMMDDhhmmss`'s 14, `hhhmmss`'s 7 (`i + d` of an INT is
    /// a BIGINT of 12, as MariaDB's).
    fn operand_digits(&self, e: &Expr) -> Option<(u32, u32)> {
        let digits = |d: u8| Some((u32::from(d), 0));
        match self.kind(e) {
            Kind::Date => digits(DATE_NUMBER_DIGITS),
            Kind::DateTime { fsp: 0 } => digits(DATETIME_NUMBER_DIGITS),
            Kind::Time { fsp: 0 } => digits(TIME_NUMBER_DIGITS),
            _ => self.decimal_digits(e),
        }
    }

    fn decimal_digits(&self, e: &Expr) -> Option<(u32, u32)> {
        match e {
            Expr::Lit(Val::Dec(d)) => Some((d.int_digits(), u32::from(d.scale))),
            Expr::Lit(Val::Int(v)) => {
                Some((v.unsigned_abs().checked_ilog10().map_or(1, |l| l + 1), 0))
            }
            Expr::Lit(Val::UInt(v)) => Some((v.checked_ilog10().map_or(1, |l| l + 1), 0)),
            Expr::Col(c) => {
                let c = self.columns.get(*c)?;
                let (length, decimals) = (c.meta.length, u32::from(c.meta.decimals));
                let sign = u32::from(c.meta.flags & flags::UNSIGNED == 0);
                match c.kind {
                    // Digits, a sign and a point when it has decimals.
                    Kind::Dec { .. } => Some((
                        length.saturating_sub(decimals + u32::from(decimals > 0) + sign),
                        decimals,
                    )),
                    Kind::Int { .. } => Some((length.saturating_sub(sign).max(1), 0)),
                    _ => None,
                }
            }
            Expr::Neg(a) => self.decimal_digits(a),
            // A value of another row (FIRST_VALUE, LAG, PERCENTILE_DISC…):
            // its argument's.
            Expr::Win(i) => match self.windows.as_ref().and_then(|w| w.get(*i)) {
                Some(w) if w.func.is_row_value() => self.decimal_digits(w.args.first()?),
                _ => None,
            },
            // An integer's: its length less a sign, as MariaDB's generic
            // precision of an integer result (`ABS(11)` is 2 long and signed,
            // so of 1 digit: `ABS(11) % 2` is 2 long, `11 % 2` 3).
            Expr::Func(Func::Abs, _) if matches!(self.kind(e), Kind::Int { .. }) => {
                let m = self.meta(e, "");
                let sign = u32::from(m.flags & flags::UNSIGNED == 0);
                Some((m.length.saturating_sub(sign).max(1), 0))
            }
            Expr::Func(Func::Abs, args) => self.decimal_digits(args.first()?),
            Expr::Func(Func::Mod, args) => {
                let ((wa, sa), (wb, sb)) = (
                    self.decimal_digits(args.first()?)?,
                    self.decimal_digits(args.get(1)?)?,
                );
                Some((wa.max(wb), sa.max(sb)))
            }
            // An integer alternative among decimals (`align_alternatives`),
            // a DECIMAL held at its scale (`at_scale`), keep their own
            // digits.
            Expr::Cast(a, CastTo::Decimal(p, s))
                if u32::from(*p) == value::DECIMAL_DIGITS_MAX
                    && match self.kind(a) {
                        Kind::Int { .. } => *s == 0,
                        Kind::Dec { scale } => scale == *s,
                        _ => false,
                    } =>
            {
                self.decimal_digits(a)
            }
            Expr::Arith(op, a, b, _) => {
                let ((wa, sa), (wb, sb)) = (self.operand_digits(a)?, self.operand_digits(b)?);
                Some(match op {
                    Arith::Mul => (wa + wb, sa + sb),
                    Arith::Add | Arith::Sub => (wa.max(wb) + 1, sa.max(sb)),
                    // The dividend's whole digits and the divisor's
                    // decimals (`div_precision_increment` more decimals:
                    // the kind's scale has them).
                    Arith::Div => (wa + sb, self.scale_of(e).unwrap_or(sa)),
                    // As long as the dividend, a sign in it (`i DIV 2` of
                    // an INT is 10 long: 9 digits).
                    Arith::IntDiv => (wa.saturating_sub(1).max(1), 0),
                    Arith::UnsignedIntDiv => (wa, 0),
                    Arith::Mod => (wa.max(wb), sa.max(sb)),
                })
            }
            Expr::Cast(_, CastTo::Decimal(p, s)) => {
                Some((u32::from(*p).saturating_sub(u32::from(*s)), u32::from(*s)))
            }
            // A date, datetime or time as a signed integer: the digits of
            // the number it reads as, its fraction's too (MariaDB's
            // precision, though the fraction is cut: `MOD(CAST(d AS
            // SIGNED), 2)` of a DATE is an INT(9)).
            Expr::Cast(a, CastTo::Signed)
                if matches!(
                    self.kind(a),
                    Kind::Date | Kind::DateTime { .. } | Kind::Time { .. }
                ) =>
            {
                let whole = match self.kind(a) {
                    Kind::Date => DATE_NUMBER_DIGITS,
                    Kind::DateTime { fsp } => DATETIME_NUMBER_DIGITS + fsp,
                    Kind::Time { fsp } => TIME_NUMBER_DIGITS + fsp,
                    _ => return None,
                };
                Some((u32::from(whole), 0))
            }
            // Text read as an integer: as many digits as it has characters
            // (at least one, at most a BIGINT's), no sign among them, as
            // MariaDB counts (its display width is at least 2, a digit and
            // a sign, but `COALESCE(CAST(LEFT(s, 1) AS SIGNED))` is an
            // INT(2): CREATE … SELECT seed 83).
            Expr::Cast(a, CastTo::Signed) if matches!(self.kind(a), Kind::Str { .. }) => {
                let m = self.meta(a, "");
                let chars = if m.charset == charset::BINARY {
                    m.length
                } else {
                    m.length / 4
                };
                Some((chars.clamp(1, INT64_DIGITS_MAX), 0))
            }
            // ROUND may carry a digit into the whole part; TRUNCATE not.
            Expr::Func(f @ (Func::Round | Func::Truncate), args)
                if matches!(self.kind(e), Kind::Dec { .. }) =>
            {
                let (whole, arg_scale) = self.decimal_digits(args.first()?)?;
                let Kind::Dec { scale } = self.kind(e) else {
                    return None;
                };
                // Rounding away decimals may carry into the whole part.
                let carry = *f == Func::Round && u32::from(scale) < arg_scale;
                Some((whole + u32::from(carry), u32::from(scale)))
            }
            // A choice among values: the widest whole part and scale.
            Expr::Func(
                Func::Coalesce | Func::IfNull | Func::Greatest(_) | Func::Least(_),
                args,
            ) => self.widest_digits(args.iter()),
            Expr::Func(Func::If, args) => self.widest_digits(args.iter().skip(1)),
            Expr::Func(Func::NullIf, args) => self.decimal_digits(args.first()?),
            Expr::Case(_, arms, otherwise) => {
                self.widest_digits(arms.iter().map(|(_, v)| v).chain(otherwise.as_deref()))
            }
            Expr::Agg(_) => {
                let spec = self.agg_of(e)?;
                let (whole, scale) = self.decimal_digits(spec.arg.as_ref()?)?;
                match spec.func {
                    AggFn::Sum => Some((whole + SUM_WHOLE_DIGITS_MORE, scale)),
                    AggFn::Avg => Some((whole, self.scale_of(e).unwrap_or(scale))),
                    AggFn::Min | AggFn::Max => Some((whole, scale)),
                    _ => None,
                }
            }
            // Any other integer: its length, less a sign where it has one
            // (a date field's has none: `date_field_digits`).
            _ if matches!(self.kind(e), Kind::Int { .. }) => {
                if let Some(digits) = date_field_digits(e) {
                    return Some((digits, 0));
                }
                let m = self.meta(e, "");
                let sign = u32::from(m.flags & flags::UNSIGNED == 0);
                Some((m.length.saturating_sub(sign).max(1), 0))
            }
            _ => None,
        }
    }

    /// A DECIMAL expression's scale (its kind's).
    fn scale_of(&self, e: &Expr) -> Option<u32> {
        match self.kind(e) {
            Kind::Dec { scale } => Some(u32::from(scale)),
            _ => None,
        }
    }

    /// The widest whole part and scale of the values (a NULL literal
    /// takes no room); None when one is not known.
    fn widest_digits<'e>(&self, values: impl Iterator<Item = &'e Expr>) -> Option<(u32, u32)> {
        let mut widest = None;
        for v in values.filter(|v| !matches!(v, Expr::Lit(Val::Null))) {
            let (w, s) = self.decimal_digits(v)?;
            let (mw, ms) = widest.unwrap_or((0, 0));
            widest = Some((w.max(mw), s.max(ms)));
        }
        widest
    }

    /// MariaDB's column type and length of a computed integer (its
    /// `max_length`): a sum's or product's from its operands' digits and
    /// a sign, a negation one character more than its operand, DIV the
    /// dividend's whole digits, MIN and MAX and a choice among values
    /// (COALESCE, IF, CASE, GREATEST, NULLIF) the widest of them, a CAST
    /// to an integer its argument's length. None where it is not known
    /// here (MySQL's 21 then).
    fn int_meta(&self, e: &Expr, unsigned: bool) -> Option<(ColumnType, u32)> {
        let sign = u32::from(!unsigned);
        let sized = |length: u32| Some((long_or_longlong(length), length));
        let widest = |values: &mut dyn Iterator<Item = &Expr>| {
            let mut out: Option<(ColumnType, u32)> = None;
            for v in values.filter(|v| !matches!(v, Expr::Lit(Val::Null))) {
                if !matches!(self.kind(v), Kind::Int { .. }) {
                    return None;
                }
                let m = self.meta(v, "");
                let length = self.decimal_digits(v)?.0 + sign;
                let rank = |t: ColumnType| match t {
                    ColumnType::Tiny => 1,
                    ColumnType::Short => 2,
                    ColumnType::Int24 => 3,
                    ColumnType::Long => 4,
                    _ => 5,
                };
                out = Some(match out {
                    None => (m.ty, length),
                    Some((t, l)) if t == m.ty => (t, l.max(length)),
                    // BIT or YEAR with another type: an integer wide
                    // enough (MariaDB's merge rules), shown as a number.
                    Some((t, l))
                        if [t, m.ty]
                            .iter()
                            .any(|t| matches!(t, ColumnType::Bit | ColumnType::Year)) =>
                    {
                        let l = l.max(length);
                        (long_or_longlong(l), l)
                    }
                    Some((t, l)) => (if rank(m.ty) > rank(t) { m.ty } else { t }, l.max(length)),
                });
            }
            out
        };
        match e {
            Expr::Col(_) | Expr::Lit(_) => None,
            Expr::Neg(a) => sized(self.meta(a, "").length + 1),
            // CEIL/FLOOR of an integer is that integer.
            Expr::Func(Func::Ceil | Func::Floor, args)
                if args
                    .first()
                    .is_some_and(|a| matches!(self.kind(a), Kind::Int { .. })) =>
            {
                let m = self.meta(args.first()?, "");
                Some((m.ty, m.length))
            }
            // A date field's a sign longer (`ABS(YEAR(d))` 5), as MariaDB's,
            // also through what takes its attributes whole (`NULLIF(YEAR(d),
            // 1)`, `IF(c, NULL, YEAR(d))`: CTAS seed 102).
            Expr::Func(Func::Abs, args) => {
                let a = args.first()?;
                let field = date_field_digits(attributes_from(a)).is_some();
                sized(self.meta(a, "").length + u32::from(field))
            }
            Expr::Func(Func::Mod, _) => sized(self.decimal_digits(e)?.0 + sign),
            // ROUND of an integer to a place left of the point may carry
            // a digit; else it is its argument.
            Expr::Func(f @ (Func::Round | Func::Truncate), args) => {
                let m = self.meta(args.first()?, "");
                match args.get(1) {
                    Some(Expr::Lit(Val::Int(..0))) | Some(Expr::Param(_)) if *f == Func::Round => {
                        sized(m.length + 1)
                    }
                    _ => Some((m.ty, m.length)),
                }
            }
            Expr::Arith(Arith::IntDiv | Arith::UnsignedIntDiv, a, _, _) => {
                // An INT up to 9 digits, signed or not.
                let length = self.decimal_digits(a)?.0.min(INT64_DIGITS_MAX);
                Some((long_or_longlong(length), length))
            }
            Expr::Arith(Arith::Add | Arith::Sub | Arith::Mul | Arith::Mod, ..) => {
                sized(self.decimal_digits(e)?.0 + sign)
            }
            // Its argument's characters, at most a BIGINT's 21, at least a
            // digit and a sign (`CAST(SUBSTRING(y, 1, 1) AS SIGNED)` is
            // INT(2), as MariaDB's: CREATE … SELECT seed 48).
            Expr::Cast(a, CastTo::Signed) => {
                let m = self.meta(a, "");
                let chars = match self.kind(a) {
                    Kind::Str { .. } if m.charset != charset::BINARY => m.length / 4,
                    _ => m.length,
                };
                sized(chars.clamp(2, INT64_DIGITS_MAX))
            }
            Expr::Agg(_) => {
                let spec = self.agg_of(e)?;
                let arg = spec.arg.as_ref()?;
                match spec.func {
                    // A column's own type; a computed integer's value a
                    // LONGLONG (MariaDB's field for it), a date field's a
                    // sign longer.
                    AggFn::Min | AggFn::Max if matches!(arg, Expr::Col(_)) => {
                        let m = self.meta(arg, "");
                        Some((m.ty, m.length))
                    }
                    AggFn::Min | AggFn::Max => {
                        let m = self.meta(arg, "");
                        let sign = u32::from(date_field_digits(arg).is_some());
                        Some((ColumnType::LongLong, m.length + sign))
                    }
                    _ => None,
                }
            }
            Expr::Func(
                Func::Coalesce | Func::IfNull | Func::Greatest(_) | Func::Least(_),
                args,
            ) => widest(&mut args.iter()),
            // With a NULL alternative, the other's own (MariaDB's IF takes
            // its attributes whole); NULLIF its first argument's.
            Expr::Func(Func::If, args) => match (args.get(1), args.get(2)) {
                (Some(Expr::Lit(Val::Null)), Some(other))
                | (Some(other), Some(Expr::Lit(Val::Null))) => {
                    let m = self.meta(other, "");
                    Some((m.ty, m.length))
                }
                _ => widest(&mut args.iter().skip(1)),
            },
            Expr::Func(Func::NullIf, args) => {
                let m = self.meta(args.first()?, "");
                Some((m.ty, m.length))
            }
            // An unsigned integer's length (a bit operation's 21 kept), a
            // literal's, at most 20; any other number's or text's 20 (a
            // negative wraps to 20 digits: '-1' is 18446744073709551615),
            // one character's 1.
            Expr::Cast(a, CastTo::Unsigned) => {
                let m = self.meta(a, "");
                let length = match self.kind(a) {
                    Kind::Str { .. }
                        if m.length <= 1 || (m.length == 4 && m.charset != charset::BINARY) =>
                    {
                        1
                    }
                    Kind::Int { unsigned: true } => m.length.min(INT64_DIGITS_MAX),
                    _ if matches!(&**a, Expr::Lit(Val::Int(0..))) => {
                        m.length.min(UNSIGNED_DIGITS_MAX)
                    }
                    _ if date_field_digits(a).is_some() => m.length.min(UNSIGNED_DIGITS_MAX),
                    _ => UNSIGNED_DIGITS_MAX,
                };
                // The CAST's own rule: an INT up to 10 digits (`CAST(u % 3
                // AS UNSIGNED)` an INT where `u % 3` is a BIGINT).
                let ty = if length < INT_DISPLAY_DIGITS_MAX {
                    ColumnType::Long
                } else {
                    ColumnType::LongLong
                };
                Some((ty, length))
            }
            Expr::Case(_, arms, otherwise) => {
                widest(&mut arms.iter().map(|(_, v)| v).chain(otherwise.as_deref()))
            }
            _ => None,
        }
    }

    /// Whether an expression can be NULL.
    pub fn nullable(&self, e: &Expr) -> bool {
        match e {
            Expr::Lit(v) => v.is_null(),
            Expr::Col(c) => self.columns.get(*c).is_none_or(|c| c.nullable),
            Expr::Agg(i) => self
                .aggs
                .as_ref()
                .and_then(|a| a.get(*i))
                .is_none_or(|a| !matches!(a.func, AggFn::Count | AggFn::CountStar)),
            Expr::Win(i) => self
                .windows
                .as_ref()
                .and_then(|w| w.get(*i))
                .is_none_or(|w| {
                    !matches!(
                        w.func,
                        WinFn::RowNumber | WinFn::Rank | WinFn::DenseRank | WinFn::Ntile
                    ) && !w
                        .agg
                        .as_ref()
                        .is_some_and(|a| matches!(a.func, AggFn::Count | AggFn::CountStar))
                }),
            Expr::Neg(a) | Expr::Not(a) => self.nullable(a),
            Expr::Arith(op, a, b, _) => {
                matches!(
                    op,
                    Arith::Div | Arith::IntDiv | Arith::UnsignedIntDiv | Arith::Mod
                ) || self.nullable(a)
                    || self.nullable(b)
            }
            Expr::Cmp(CmpOp::NullSafeEq, ..) | Expr::IsNull(..) | Expr::IsBool(..) => false,
            Expr::Cmp(_, a, b, _) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Xor(a, b) => {
                self.nullable(a) || self.nullable(b)
            }
            Expr::Func(f, args) => f.nullable(args.iter().map(|a| self.nullable(a))),
            Expr::Sub(s) => match &s.test {
                SubTest::Exists(_) => false,
                // MariaDB's metadata: an ANY/ALL that is no IN or NOT IN
                // is NULL-able of its operand only.
                SubTest::Quantified(x, _, op, all)
                    if !matches!((op, all), (CmpOp::Eq, false) | (CmpOp::Ne, true)) =>
                {
                    self.nullable(x)
                }
                _ => true,
            },
            // NULL only of a NULL operand (a list's NULL included).
            Expr::Like(a, b, ..) => self.nullable(a) || self.nullable(b),
            // An IN subquery is NULL-able in MariaDB's metadata whatever
            // its operand and rows.
            Expr::In(.., InList::SubqueryRows) => true,
            Expr::In(a, list, ..) => self.nullable(a) || list.iter().any(|e| self.nullable(e)),
            Expr::Between(a, b, c, ..) => self.nullable(a) || self.nullable(b) || self.nullable(c),
            // Without ELSE, NULL where no WHEN holds. MariaDB's metadata
            // says NULL-able of any NULL-able argument, the operand and
            // the WHENs too (`CASE WHEN i > 1 THEN 2 ELSE id END`).
            Expr::Case(operand, whens, otherwise) => {
                otherwise.as_ref().is_none_or(|o| self.nullable(o))
                    || operand.as_ref().is_some_and(|o| self.nullable(o))
                    || whens
                        .iter()
                        .any(|(when, then)| self.nullable(when) || self.nullable(then))
            }
            // A number of a value never NULL (text that is none is 0).
            Expr::Cast(
                a,
                CastTo::Signed | CastTo::Unsigned | CastTo::Decimal(..) | CastTo::Double,
            ) => self.nullable(a),
            _ => true,
        }
    }

    /// The result metadata MySQL gives a select item: a column keeps its
    /// own; an expression gets its kind's.
    pub fn meta(&self, e: &Expr, name: &str) -> ColumnMeta {
        if let Expr::Cast(_, CastTo::NullOf(_, meta)) = e {
            let mut meta = (**meta).clone();
            meta.name = name.into();
            return meta;
        }
        if let Expr::Col(c) = e {
            if let Some(col) = self.columns.get(*c) {
                let mut meta = col.meta.clone();
                if *meta.name != *name {
                    meta.name = name.into();
                }
                return meta;
            }
        }
        let kind = self.kind(e);
        let mut meta = kind_meta(kind, e, self);
        let window = match e {
            Expr::Win(i) => self.windows.as_ref().and_then(|w| w.get(*i)),
            _ => None,
        };
        if kind == Kind::Double {
            meta.decimals = self.decimals(e);
            meta.length = self.double_length(e, meta.decimals);
            if let Expr::Cast(_, CastTo::FixedDouble(cast)) = e {
                // MariaDB's length of a CAST to DOUBLE(M,D): M.
                meta.length = u32::from(cast.m);
                if cast.float {
                    meta.ty = ColumnType::Float;
                }
            }
        }
        if window.is_some_and(|w| matches!(w.func, WinFn::PercentRank | WinFn::CumeDist)) {
            // MariaDB's: a DOUBLE of 17 shown with ten decimals.
            meta.decimals = 10;
            meta.length = WINDOW_FRACTION_LENGTH;
        }
        if let Some(concat) = self.concat_of(e) {
            // MariaDB's: VARCHAR up to 512 bytes of group_concat_max_len,
            // TEXT (BLOB) past it.
            let bytes_per_char = if meta.charset == charset::BINARY {
                1
            } else {
                4
            };
            let length =
                u32::try_from(concat.max_len.saturating_mul(bytes_per_char)).unwrap_or(u32::MAX);
            meta.length = length;
            meta.decimals = 0;
            if concat.max_len > GROUP_CONCAT_VARCHAR_MAX_BYTES {
                meta.ty = ColumnType::Blob;
                meta.flags |= flags::BLOB;
            }
        }
        meta.name = name.into();
        if !self.nullable(e) {
            meta.flags |= flags::NOT_NULL;
        }
        meta
    }
}

/// The type of a text result of this many bytes, as MariaDB's
/// `string_type_handler` picks it: a VARCHAR up to 65,534 bytes, then the
/// BLOB types by their sizes.
fn text_type(bytes: u32) -> ColumnType {
    match bytes {
        TEXT_LONG_BYTES.. => ColumnType::LongBlob,
        TEXT_MEDIUM_BYTES.. => ColumnType::MediumBlob,
        VARCHAR_BYTES_MAX.. => ColumnType::Blob,
        _ => ColumnType::VarString,
    }
}

/// MariaDB's DOUBLE lengths: a column's (and a literal's, a CAST's, here),
/// a computed one's of no fixed decimals (`DBL_DIG + 8`), of fixed ones
/// this and its decimals (`DBL_DIG + 2`), PI()'s `3.141593`.
const DOUBLE_COLUMN_LENGTH: u32 = 22;
const DOUBLE_NOT_FIXED_LENGTH: u32 = 23;
const DOUBLE_FIXED_LENGTH: u32 = 17;
const PI_LENGTH: u32 = 8;

/// The characters of a text result whose length is not known here
/// (MySQL's 255 for such an expression).
pub(crate) const TEXT_CHARS_UNKNOWN: u32 = 255;
/// Bytes of a utf8mb4 character at most: a text result's length in bytes
/// is its characters times this.
pub(crate) const UTF8MB4_BYTES_PER_CHAR: u32 = 4;

/// Bytes from which a text result is a LONGTEXT, a MEDIUMTEXT, a TEXT.
const TEXT_LONG_BYTES: u32 = 16_777_216;
const TEXT_MEDIUM_BYTES: u32 = 65_536;
const VARCHAR_BYTES_MAX: u32 = 65_535;

impl Scope<'_> {
    /// The length MariaDB gives a DOUBLE result of these decimals: a
    /// computed one's `float_length` (23 not fixed, else 17 and its
    /// decimals), an IF's, COALESCE's or CASE's its longest alternative's,
    /// a literal's or a CAST's a column's 22, PI()'s 8.
    fn double_length(&self, e: &Expr, decimals: u8) -> u32 {
        let computed = if decimals >= NOT_FIXED_DECIMALS {
            DOUBLE_NOT_FIXED_LENGTH
        } else {
            DOUBLE_FIXED_LENGTH + u32::from(decimals)
        };
        let longest = |es: &mut dyn Iterator<Item = &Expr>| {
            es.map(|a| self.display_chars(a))
                .max()
                .unwrap_or(DOUBLE_COLUMN_LENGTH)
        };
        match e {
            // A DOUBLE the lowering gave decimals to, or read as a DOUBLE
            // (`alternatives_as_double`), is its own length.
            Expr::Cast(inner, CastTo::Decimals(_) | CastTo::Double)
                if self.kind(inner) == Kind::Double =>
            {
                self.double_length(inner, decimals)
            }
            Expr::Lit(_) | Expr::Param(_) | Expr::Cast(..) | Expr::Sub(_) | Expr::Col(_) => {
                DOUBLE_COLUMN_LENGTH
            }
            Expr::Func(Func::Pi, _) => PI_LENGTH,
            Expr::Func(Func::If, args) => longest(&mut args.iter().skip(1)),
            Expr::Func(Func::IfNull | Func::Coalesce, args) => longest(&mut args.iter()),
            Expr::Func(Func::NullIf, args) => longest(&mut args.iter().take(1)),
            Expr::Case(_, whens, otherwise) => {
                longest(&mut whens.iter().map(|(_, t)| t).chain(otherwise.as_deref()))
            }
            // A value of another row: its argument's.
            Expr::Win(i) => match self.windows.as_ref().and_then(|w| w.get(*i)) {
                Some(w) if w.func.is_row_value() => {
                    w.args.first().map_or(computed, |a| self.display_chars(a))
                }
                Some(w) if w.func == WinFn::PercentileCont => window::PERCENTILE_CONT_LENGTH,
                _ => computed,
            },
            _ => computed,
        }
    }

    /// Whether a DECIMAL expression keeps an UNSIGNED DECIMAL's sign as
    /// MariaDB's does: such a column, ROUND, TRUNCATE and ABS of one, MIN
    /// and MAX of one, and a choice among such values (COALESCE, IFNULL,
    /// IF, CASE, GREATEST, LEAST; a NULL alternative aside).
    fn unsigned_decimal(&self, e: &Expr) -> bool {
        let all = |es: &mut dyn Iterator<Item = &Expr>| {
            let mut any = false;
            for x in es.filter(|x| !matches!(x, Expr::Lit(Val::Null))) {
                if !self.unsigned_decimal(x) {
                    return false;
                }
                any = true;
            }
            any
        };
        match e {
            Expr::Col(c) => self.columns.get(*c).is_some_and(|c| {
                matches!(c.kind, Kind::Dec { .. }) && c.meta.flags & flags::UNSIGNED != 0
            }),
            Expr::Func(Func::Round | Func::Truncate | Func::Abs, args) => {
                args.first().is_some_and(|a| self.unsigned_decimal(a))
            }
            Expr::Func(
                Func::Coalesce | Func::IfNull | Func::Greatest(_) | Func::Least(_),
                args,
            ) => all(&mut args.iter()),
            Expr::Func(Func::If, args) => all(&mut args.iter().skip(1)),
            Expr::Case(_, whens, otherwise) => {
                all(&mut whens.iter().map(|(_, t)| t).chain(otherwise.as_deref()))
            }
            Expr::Agg(_) => self.agg_of(e).is_some_and(|spec| {
                matches!(spec.func, AggFn::Min | AggFn::Max)
                    && spec.arg.as_ref().is_some_and(|a| self.unsigned_decimal(a))
            }),
            // Held at its own scale (`at_scale`).
            Expr::Cast(a, CastTo::Decimal(p, _)) if u32::from(*p) == value::DECIMAL_DIGITS_MAX => {
                self.unsigned_decimal(a)
            }
            _ => false,
        }
    }

    /// The characters of `e` shown as text: a text's
    /// ([`Scope::text_chars`]), a number's or a date's display length,
    /// NULL's none.
    pub(crate) fn display_chars(&self, e: &Expr) -> u32 {
        match self.kind(e) {
            Kind::Str { .. } => self.text_chars(e),
            Kind::Null => 0,
            _ => self.meta(e, "").length,
        }
    }

    /// MariaDB's `max_length` of `e` shown as text: a text's characters
    /// at four bytes each (utf8mb4), a binary string's bytes, a number's
    /// or a date's characters.
    pub(crate) fn display_bytes(&self, e: &Expr) -> u32 {
        let chars = self.display_chars(e);
        match self.kind(e) {
            Kind::Str { collation: Some(_) } => chars.saturating_mul(UTF8MB4_BYTES_PER_CHAR),
            _ => chars,
        }
    }

    /// The most characters a text expression's values have, as MariaDB
    /// sizes its column (at most [`func::TEXT_CHARS_MAX`]).
    pub(crate) fn text_chars(&self, e: &Expr) -> u32 {
        // MIN or MAX of text: as long as its argument.
        let min_max = |spec: Option<&AggSpec>| match spec {
            Some(AggSpec {
                func: AggFn::Min | AggFn::Max,
                arg: Some(arg),
                ..
            }) => self.display_chars(arg),
            _ => TEXT_CHARS_UNKNOWN,
        };
        // DATE_ADD of a number or text: a DATETIME's text.
        if let (Some(decimals), Kind::Str { .. }) = (date_add_text(e, self), self.kind(e)) {
            return date_add_text_chars(decimals);
        }
        let chars = match e {
            Expr::Lit(Val::Null) => 0,
            Expr::Lit(v) => v.to_text().chars().count() as u32,
            Expr::Col(c) => self.columns.get(*c).map_or(TEXT_CHARS_UNKNOWN, |c| {
                c.meta.length
                    / if c.meta.charset == charset::BINARY {
                        1
                    } else {
                        UTF8MB4_BYTES_PER_CHAR
                    }
            }),
            Expr::Cast(inner, to) => match to {
                CastTo::CharOf(n) | CastTo::BinaryOf(n) | CastTo::ClippedChar(n) => *n,
                CastTo::Binary => self.display_bytes(inner),
                _ => self.display_chars(inner),
            },
            Expr::Func(f, args) => f.result_chars(args, self),
            Expr::Case(_, whens, otherwise) => whens
                .iter()
                .map(|(_, then)| then)
                .chain(otherwise.as_deref())
                .map(|r| self.display_chars(r))
                .max()
                .unwrap_or(0),
            Expr::Agg(_) => min_max(self.agg_of(e)),
            Expr::Win(i) => match self.windows.as_ref().and_then(|w| w.get(*i)) {
                Some(w) if w.func.is_row_value() => w
                    .args
                    .first()
                    .map_or(TEXT_CHARS_UNKNOWN, |a| self.display_chars(a)),
                Some(w) => min_max(w.agg.as_ref()),
                None => TEXT_CHARS_UNKNOWN,
            },
            _ => TEXT_CHARS_UNKNOWN,
        };
        chars.min(func::TEXT_CHARS_MAX)
    }
}

/// `group_concat_max_len` past which GROUP_CONCAT's result is TEXT (MariaDB).
const GROUP_CONCAT_VARCHAR_MAX_BYTES: usize = 512;
/// `group_concat_max_len` should the variable not read as a number.
const GROUP_CONCAT_MAX_LEN_DEFAULT_BYTES: usize = 1_048_576;

use crate::value::NOT_FIXED_DECIMALS;
/// Digits of a DATE as a number (YYYYMMDD).
pub(crate) const DATE_NUMBER_DIGITS: u8 = 8;
/// Digits before the point of a DATETIME as a number (YYYYMMDDhhmmss).
pub(crate) const DATETIME_NUMBER_DIGITS: u8 = 14;
/// Digits before the point of a TIME as a number (hhhmmss, up to 838:59:59).
pub(crate) const TIME_NUMBER_DIGITS: u8 = 7;
/// Characters of a DATETIME as text without a fraction.
const DATETIME_TEXT_CHARS: u32 = 19;

impl Scope<'_> {
    /// The decimals MariaDB shows a DOUBLE-valued expression with (its
    /// `Item::decimals`; [`NOT_FIXED_DECIMALS`]: every digit), carried on
    /// from the operands as MariaDB carries them: a DOUBLE(M,D) column's
    /// D, an integer's 0, a DECIMAL's scale, `CAST(x AS DOUBLE(M,D))` D, a
    /// scalar subquery its column's; `+ - * %`, `-x`, ABS, MIN,
    /// MAX, SUM and the functions that pass an operand on (IFNULL,
    /// COALESCE, IF, NULLIF, CASE, GREATEST, LEAST) the most of their
    /// operands'; `/`, AVG and the deviations four more
    /// (`div_precision_increment`); ROUND/TRUNCATE(x, n) n; PI() six.
    /// Any other DOUBLE (a function's, a string's, `1e0`) is not fixed.
    pub fn decimals(&self, e: &Expr) -> u8 {
        let fixed = |d: u8| {
            if d >= NOT_FIXED_DECIMALS {
                NOT_FIXED_DECIMALS
            } else {
                d
            }
        };
        let plus_increment = |d: u8| fixed(d.saturating_add(value::DIV_PRECISION_INCREMENT_DIGITS));
        let most = |es: &[Expr]| es.iter().map(|e| self.decimals(e)).max().unwrap_or(0);
        let of_agg = |spec: &AggSpec| {
            let arg = spec.arg.as_ref().map_or(0, |a| self.decimals(a));
            match spec.func {
                AggFn::Min | AggFn::Max | AggFn::Sum => arg,
                AggFn::Avg => plus_increment(arg),
                f if f.is_deviation() => plus_increment(arg),
                _ => NOT_FIXED_DECIMALS,
            }
        };
        let by_kind = match self.kind(e) {
            Kind::Null | Kind::Int { .. } | Kind::Date => 0,
            Kind::Dec { scale } => fixed(scale),
            Kind::DateTime { fsp } | Kind::Time { fsp } => fsp,
            Kind::Double | Kind::Str { .. } => NOT_FIXED_DECIMALS,
        };
        match e {
            Expr::Col(c) => match self.columns.get(*c) {
                Some(c) if c.kind == Kind::Double => fixed(c.meta.decimals),
                _ => by_kind,
            },
            Expr::Agg(_) => self.agg_of(e).map_or(by_kind, of_agg),
            Expr::Win(i) => {
                let window = self.windows.as_ref().and_then(|w| w.get(*i));
                match window {
                    Some(w) if w.agg.is_some() => w.agg.as_ref().map_or(by_kind, of_agg),
                    Some(w) if w.func == WinFn::PercentileCont => window::PERCENTILE_CONT_DECIMALS,
                    // A value of another row keeps its expression's
                    // decimals (`LAG(x / 3 + '1')` shows 4), as MariaDB
                    // types it by its argument.
                    Some(w)
                        if w.func.is_row_value()
                            && w.args.first().is_some_and(|a| self.kind(a) == Kind::Double) =>
                    {
                        self.decimals(&w.args[0])
                    }
                    _ => by_kind,
                }
            }
            Expr::Neg(a) => self.decimals(a),
            Expr::Cast(_, CastTo::FixedDouble(cast)) => fixed(cast.d),
            Expr::Cast(_, CastTo::Decimals(d)) => fixed(*d),
            // Text of no fraction digits to MariaDB (decimals 0), so that a
            // sum with a quotient shows the quotient's four: `x / 7 +
            // DATE_FORMAT(d, '%Y')` is 2023.4286, not 2023.42857143.
            Expr::Cast(_, CastTo::Char | CastTo::FixedChar(_) | CastTo::CharOf(_)) => 0,
            // Text read as a double for arithmetic keeps the text's.
            Expr::Cast(inner, CastTo::Double) if matches!(self.kind(inner), Kind::Str { .. }) => {
                self.decimals(inner)
            }
            Expr::Sub(sub)
                if matches!(sub.test, SubTest::Scalar) && sub.kinds == [Kind::Double] =>
            {
                fixed(sub.decimals)
            }
            Expr::Arith(Arith::Add | Arith::Sub | Arith::Mul | Arith::Mod, a, b, _) => {
                fixed(self.decimals(a).max(self.decimals(b)))
            }
            Expr::Arith(Arith::Div, a, b, _) => {
                plus_increment(self.decimals(a).max(self.decimals(b)))
            }
            Expr::Case(_, whens, otherwise) => {
                let thens = whens.iter().map(|(_, then)| self.decimals(then));
                let otherwise = otherwise.as_ref().map(|o| self.decimals(o));
                thens.chain(otherwise).max().unwrap_or(0)
            }
            Expr::Func(f, args) => match f {
                Func::Abs
                | Func::Mod
                | Func::IfNull
                | Func::Coalesce
                | Func::Greatest(_)
                | Func::Least(_) => fixed(most(args)),
                Func::If => fixed(most(args.get(1..).unwrap_or_default())),
                Func::NullIf => args.first().map_or(by_kind, |a| self.decimals(a)),
                Func::Round | Func::Truncate => match args.get(1) {
                    None => 0,
                    Some(Expr::Lit(v)) => match v.to_f64().0 {
                        n if n <= 0.0 => 0,
                        n => fixed((n as u8).min(value::DECIMAL_SCALE_MAX)),
                    },
                    Some(_) => NOT_FIXED_DECIMALS,
                },
                // A whole double: shown with no exponent, as ROUND's
                // (FLOOR(1e19) is 10000000000000000000, not 1e19).
                Func::Ceil | Func::Floor => 0,
                // MySQL's PI() shows six decimals (its value is the double's).
                Func::Pi => 6,
                // Text of no fraction digits, as CAST AS CHAR above.
                Func::DateFormat
                | Func::TimeFormat
                | Func::DayName
                | Func::MonthName
                | Func::Hex => 0,
                Func::FromUnixtime if args.len() == 2 => 0,
                _ => by_kind,
            },
            _ => by_kind,
        }
    }

    /// The GROUP_CONCAT an expression reads, if it is one.
    fn concat_of(&self, e: &Expr) -> Option<&GroupConcat> {
        self.agg_of(e)
            .filter(|a| a.func == AggFn::GroupConcat)?
            .concat
            .as_deref()
    }

    fn agg_of(&self, e: &Expr) -> Option<&AggSpec> {
        let Expr::Agg(i) = e else {
            return None;
        };
        self.aggs.as_ref()?.get(*i)
    }
}

/// The metadata of an expression column of a kind.
/// For DATE_ADD/DATE_SUB (ADDDATE, SUBDATE, TIMESTAMPADD) whose result is
/// text (its first argument is no DATE or DATETIME), the decimals MariaDB
/// gives it: the fraction digits of a string literal (at most 6), of a
/// column its type's (an integer's none, a DECIMAL's scale up to 6, any
/// other's 6), 6 for a MICROSECOND unit, 0 for the rest. None for any
/// other expression.
fn date_add_text(e: &Expr, scope: &Scope<'_>) -> Option<u8> {
    let Expr::Func(Func::DateAdd | Func::DateSub, args) = e else {
        return None;
    };
    let micro = Func::interval_is_micro(args);
    let of_arg = match args.first() {
        Some(Expr::Lit(v @ Val::Str(_))) => {
            let text = v.to_text();
            text.split_once('.').map_or(0, |(_, fraction)| {
                fraction
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .count()
                    .min(6) as u8
            })
        }
        Some(c @ Expr::Col(_)) => match scope.kind(c) {
            Kind::Int { .. } => 0,
            Kind::Dec { scale } => scale.min(6),
            _ => 6,
        },
        _ => 0,
    };
    Some(if micro { 6 } else { of_arg })
}

/// Whether `e` chooses among its arguments' values (COALESCE, IFNULL,
/// GREATEST, LEAST, IF, NULLIF, CASE).
fn is_choice(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Case(..)
            | Expr::Func(
                Func::Coalesce
                    | Func::IfNull
                    | Func::Greatest(_)
                    | Func::Least(_)
                    | Func::If
                    | Func::NullIf,
                _
            )
    )
}

/// The characters of DATE_ADD's text of `decimals` fraction digits.
fn date_add_text_chars(decimals: u8) -> u32 {
    DATETIME_TEXT_CHARS
        + if decimals > 0 {
            u32::from(decimals) + 1
        } else {
            0
        }
}

/// Whole digits MariaDB's SUM of a DECIMAL adds to its argument's
/// (`DECIMAL_LONGLONG_DIGITS`).
const SUM_WHOLE_DIGITS_MORE: u32 = 22;

/// MariaDB's longest display of an INT (`MY_INT32_NUM_DECIMAL_DIGITS`):
/// an integer result shorter than this is an INT, else a BIGINT.
const INT_DISPLAY_DIGITS_MAX: u32 = 11;

/// A BIGINT UNSIGNED's most digits (CAST AS UNSIGNED's longest result).
const UNSIGNED_DIGITS_MAX: u32 = 20;

/// MariaDB's most digits of a DIV's result (`MY_INT64_NUM_DECIMAL_DIGITS`).
const INT64_DIGITS_MAX: u32 = 21;

/// The length MariaDB gives PERCENT_RANK and CUME_DIST (a fraction of
/// ten decimals).
const WINDOW_FRACTION_LENGTH: u32 = 17;

/// MariaDB's `type_handler_long_or_longlong`: an integer of this many
/// characters is an INT up to 9, else a BIGINT, signed or not (`ABS(u)`
/// and `u % 2` of an INT UNSIGNED are BIGINTs of 10).
fn long_or_longlong(length: u32) -> ColumnType {
    if length < INT_DISPLAY_DIGITS_MAX - 1 {
        ColumnType::Long
    } else {
        ColumnType::LongLong
    }
}

/// The whole digits MariaDB counts for a date field's function (`MONTH`,
/// `TO_DAYS`, …) where a UNION's DECIMAL column takes it: its whole
/// length, no sign (`TO_DAYS(d)` 6), where another integer's length has
/// one. None for any other expression.
pub(crate) fn date_field_digits(e: &Expr) -> Option<u32> {
    match e {
        Expr::Func(
            Func::Year
            | Func::Month
            | Func::Day
            | Func::Hour
            | Func::Minute
            | Func::Second
            | Func::Microsecond
            | Func::Quarter
            | Func::Week
            | Func::WeekOfYear
            | Func::DayOfYear
            | Func::ToDays,
            _,
        ) => int_result_meta(e).map(|(_, length)| length),
        _ => None,
    }
}

/// The expression whose attributes `e` takes whole: NULLIF's first
/// argument's, an IF's with a NULL alternative the other's (as `meta`
/// gives them), through any number of those; else `e`.
fn attributes_from(e: &Expr) -> &Expr {
    match e {
        Expr::Func(Func::NullIf, args) => args.first().map_or(e, attributes_from),
        Expr::Func(Func::If, args) => match (args.get(1), args.get(2)) {
            (Some(Expr::Lit(Val::Null)), Some(other))
            | (Some(other), Some(Expr::Lit(Val::Null))) => attributes_from(other),
            _ => e,
        },
        _ => e,
    }
}

/// The column type and length MariaDB gives an integer function's or a
/// condition's result (its `max_length`: `MONTH(d)` is an INT of 2,
/// `LENGTH(s)` of 10, `a = b` of 1); None: another expression.
fn int_result_meta(e: &Expr) -> Option<(ColumnType, u32)> {
    use ColumnType::{Long, LongLong};
    Some(match e {
        // MariaDB's IN subquery (and `= ANY`) is a LONG of 21, its NOT IN
        // (and `<> ALL`) one of 1, as any other condition.
        Expr::In(_, _, false, _, InList::SubqueryRows) => (Long, 21),
        Expr::Sub(sub) => match &sub.test {
            SubTest::In(_, false) | SubTest::Quantified(_, _, CmpOp::Eq, false) => (Long, 21),
            SubTest::In(..) | SubTest::Quantified(..) | SubTest::Exists(_) => (Long, 1),
            SubTest::Scalar => return None,
        },
        Expr::Cmp(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Xor(..)
        | Expr::Not(..)
        | Expr::IsNull(..)
        | Expr::IsBool(..)
        | Expr::In(..)
        | Expr::Between(..)
        | Expr::Like(..) => (Long, 1),
        Expr::Func(f, _) => match f {
            Func::DayOfWeek
            | Func::Weekday
            | Func::Quarter
            | Func::IsNull
            | Func::RegexpLike
            | Func::Sleep
            | Func::GetLock
            | Func::ReleaseLock
            | Func::IsFreeLock => (Long, 1),
            Func::BitCount
            | Func::Month
            | Func::Day
            | Func::Hour
            | Func::Minute
            | Func::Second
            | Func::Week
            | Func::WeekOfYear
            | Func::Sign
            | Func::Strcmp(_) => (Long, 2),
            Func::Ascii | Func::DayOfYear | Func::Field | Func::FindInSet => (Long, 3),
            Func::Year => (Long, 4),
            Func::Microsecond
            | Func::YearWeek
            | Func::ToDays
            | Func::PeriodAdd
            | Func::PeriodDiff => (Long, 6),
            Func::Ord => (Long, 7),
            Func::DateDiff => (Long, 8),
            Func::Length | Func::CharLength | Func::Crc32 | Func::ConnectionId => (Long, 10),
            Func::Locate | Func::Instr | Func::RegexpInstr => (Long, 11),
            Func::BitLength => (LongLong, 11),
            Func::ToSeconds => (LongLong, 12),
            Func::TimeToSec | Func::UnixTimestamp => (LongLong, 17),
            _ => return None,
        },
        _ => return None,
    })
}

fn kind_meta(kind: Kind, e: &Expr, scope: &Scope<'_>) -> ColumnMeta {
    let length_of_lit = |e: &Expr| match e {
        Expr::Lit(v) => Some(v.to_text().chars().count() as u32),
        _ => None,
    };
    // FLOOR/CEIL of a DECIMAL whose length is known: MariaDB's length,
    // the argument's less its decimals, and an INT below 11 digits.
    // (Of an unsigned one, made unsigned: `Scope::unsigned_rounding`.)
    // A user's CAST(FLOOR(c) AS UNSIGNED) of a signed c is a CAST's.
    let rounded = match e {
        Expr::Cast(inner, CastTo::Unsigned)
            if matches!(&**inner, Expr::Func(Func::Ceil | Func::Floor, args)
                if args.first().is_some_and(|a| scope.unsigned_decimal(a))) =>
        {
            inner
        }
        other => other,
    };
    let int_val_length = match rounded {
        Expr::Func(f @ (Func::Ceil | Func::Floor), args)
            if args
                .first()
                .is_some_and(|a| matches!(scope.kind(a), Kind::Dec { .. })) =>
        {
            // Of an UNSIGNED DECIMAL: no sign, and FLOOR no carry.
            let length = scope.decimal_whole_length(&args[0]);
            if scope.unsigned_decimal(&args[0]) {
                length.map(|l| l.saturating_sub(1 + u32::from(*f == Func::Floor)).max(1))
            } else {
                length
            }
        }
        _ => None,
    };
    match kind {
        Kind::Int { unsigned } if int_val_length.is_some() => {
            let length = int_val_length.unwrap_or(21);
            let ty = if length < INT_DISPLAY_DIGITS_MAX {
                ColumnType::Long
            } else {
                ColumnType::LongLong
            };
            let mut m = ColumnMeta::expr("", ty, charset::BINARY, length);
            m.flags = flags::BINARY | flags::NUM | if unsigned { flags::UNSIGNED } else { 0 };
            m
        }
        Kind::Null => {
            let mut m = ColumnMeta::expr("", ColumnType::Null, charset::BINARY, 0);
            m.flags = flags::BINARY;
            m
        }
        Kind::Int { unsigned } => {
            // A literal's own digits (an INT up to 9 of them); a
            // function's, a condition's or a computation's type and
            // length as MariaDB gives them; MySQL's 21 for another
            // computed BIGINT.
            let (ty, length) = match (int_result_meta(e), length_of_lit(e)) {
                (Some(known), _) => known,
                (None, Some(chars)) => {
                    // One past BIGINT's range is a BIGINT UNSIGNED.
                    let ty = match e {
                        Expr::Lit(Val::UInt(_)) => ColumnType::LongLong,
                        _ => long_or_longlong(chars),
                    };
                    (ty, chars)
                }
                (None, None) => match scope.int_meta(e, unsigned) {
                    // A choice among BIT values (`COALESCE(b, b)`, `NULLIF(b,
                    // 0)`) is its number: MariaDB keeps the type BIT there
                    // and sends the value as digits (DML seed 445).
                    Some((ColumnType::Bit, length)) if is_choice(e) => {
                        (ColumnType::LongLong, length)
                    }
                    Some(known) => known,
                    None => (ColumnType::LongLong, 21),
                },
            };
            let mut m = ColumnMeta::expr("", ty, charset::BINARY, length);
            m.flags = flags::BINARY | flags::NUM | if unsigned { flags::UNSIGNED } else { 0 };
            m
        }
        Kind::Dec { scale } => {
            let length = match e {
                Expr::Lit(Val::Dec(d)) => {
                    d.int_digits() + u32::from(d.scale) + u32::from(d.scale > 0) + 1
                }
                // A negation is one character longer than its operand
                // (its digits the same).
                Expr::Neg(a) if int_val_length.is_none() => scope.meta(a, "").length + 1,
                // Its digits as MariaDB counts them, at most 65, a point
                // and a sign.
                _ => int_val_length.unwrap_or_else(|| {
                    let whole = scope.decimal_digits(e).map_or(65, |(w, _)| w);
                    (whole + u32::from(scale)).min(65) + u32::from(scale > 0) + 1
                }),
            };
            let mut m = ColumnMeta::expr("", ColumnType::NewDecimal, charset::BINARY, length);
            m.flags = flags::BINARY | flags::NUM;
            m.decimals = scale;
            if int_val_length.is_none() && scope.unsigned_decimal(e) {
                // No sign, as MariaDB's UNSIGNED DECIMAL.
                m.flags |= flags::UNSIGNED;
                m.length = m.length.saturating_sub(1);
            }
            m
        }
        Kind::Double => {
            let mut m = ColumnMeta::expr("", ColumnType::Double, charset::BINARY, 22);
            m.flags = flags::BINARY | flags::NUM;
            // Not fixed here; `Scope::meta` sets what MariaDB carries on.
            m.decimals = NOT_FIXED_DECIMALS;
            m
        }
        Kind::Str { collation: Some(c) } if date_add_text(e, scope).is_some() => {
            // MariaDB's DATE_ADD/DATE_SUB of a string or a number: a
            // fixed-width STRING of a DATETIME's 19 characters and its
            // decimals (`date_add_text`).
            let decimals = date_add_text(e, scope).unwrap_or(0);
            let chars = date_add_text_chars(decimals);
            let cs = crate::engine::catalog::collation_charset(c);
            let mut m = ColumnMeta::expr("", ColumnType::String, cs, chars * 4);
            m.decimals = decimals;
            m
        }
        Kind::Str { collation } => {
            let chars = scope.text_chars(e);
            match collation {
                None => {
                    let ty = text_type(chars);
                    let mut m = ColumnMeta::expr("", ty, charset::BINARY, chars);
                    m.flags = flags::BINARY;
                    m
                }
                Some(c) => {
                    let cs = crate::engine::catalog::collation_charset(c);
                    let bytes = chars.saturating_mul(UTF8MB4_BYTES_PER_CHAR);
                    let mut m = ColumnMeta::expr("", text_type(bytes), cs, bytes);
                    // MySQL's "not fixed" scale of a string expression
                    // (31), but 0 for text of no fraction digits
                    // (`DATE_FORMAT`, `HEX`, `CAST AS CHAR`: `decimals`).
                    m.decimals = scope.decimals(e).min(31);
                    m
                }
            }
        }
        Kind::Date => {
            let mut m = ColumnMeta::expr("", ColumnType::Date, charset::BINARY, 10);
            m.flags = flags::BINARY;
            m
        }
        Kind::DateTime { fsp } => {
            let length = 19 + u32::from(fsp) + u32::from(fsp > 0);
            let mut m = ColumnMeta::expr("", ColumnType::DateTime, charset::BINARY, length);
            m.flags = flags::BINARY;
            m.decimals = fsp;
            m
        }
        Kind::Time { fsp } => {
            let length = 10 + u32::from(fsp) + u32::from(fsp > 0);
            let mut m = ColumnMeta::expr("", ColumnType::Time, charset::BINARY, length);
            m.flags = flags::BINARY;
            m.decimals = fsp;
            m
        }
    }
}

/// A numeric literal: an integer (unsigned past `i64::MAX`), a decimal,
/// or a double when written with an exponent.
pub fn number_literal(text: &str) -> SqlResult<Val> {
    if let Ok(v) = text.parse::<i64>() {
        return Ok(Val::Int(v));
    }
    if let Ok(v) = text.parse::<u64>() {
        return Ok(Val::UInt(v));
    }
    if !text.contains(['e', 'E']) {
        if let Some(d) = Dec::parse(text) {
            return Ok(Val::Dec(d));
        }
    }
    text.parse::<f64>()
        .map(Val::Double)
        .map_err(|_| SqlError::syntax(format_args!("near '{text}'")))
}

/// Whether `e` is a bit-value literal (`b'101'`).
fn is_bit_literal(e: &ast::Expr) -> bool {
    matches!(
        e,
        ast::Expr::Value(v) if matches!(
            &v.value,
            ast::Value::SingleQuotedByteStringLiteral(s) | ast::Value::DoubleQuotedByteStringLiteral(s)
                if s.bytes().all(|b| b == b'0' || b == b'1')
        )
    )
}

/// A literal MariaDB reads as a number in a numeric context: a bit-value
/// literal (`b'101'`), or a hexadecimal one written `0x41` (a hybrid: a
/// string elsewhere). `X'41'` stays a string; `sqlparser` reads both
/// hexadecimal forms as the same value, so its span tells them apart
/// (`0x` and the digits, against `X'`, the digits and `'`).
fn is_number_literal(e: &ast::Expr) -> bool {
    if is_bit_literal(e) {
        return true;
    }
    let ast::Expr::Value(v) = e else {
        return false;
    };
    let ast::Value::HexStringLiteral(digits) = &v.value else {
        return false;
    };
    let (start, end) = (v.span.start, v.span.end);
    start.line == end.line
        && start.line > 0
        && end.column.checked_sub(start.column) == Some(digits.len() as u64 + 2)
}

/// `value`, lowered from `written`, as its number when `written` is a
/// literal MariaDB reads as one in a numeric context
/// ([`is_number_literal`]): what a numeric column stores of it.
pub(crate) fn as_number_literal(written: &ast::Expr, value: Expr) -> Expr {
    if is_number_literal(written) {
        bit_literal_number(value)
    } else {
        value
    }
}

/// A lowered bit-value literal as its number (its bytes, big-endian).
pub(super) fn bit_literal_number(e: Expr) -> Expr {
    match e {
        Expr::Func(Func::BinaryLiteral, mut args) if args.len() == 1 => {
            bit_literal_number(args.swap_remove(0))
        }
        Expr::Lit(Val::Str(bytes)) if bytes.len() <= 8 => Expr::Lit(Val::UInt(
            bytes.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)),
        )),
        other => other,
    }
}

/// The bytes of a bit-value literal (`b'101'` is one byte, 0x05).
fn bit_bytes(bits: &str) -> Vec<u8> {
    let padded = format!("{}{bits}", "0".repeat((8 - bits.len() % 8) % 8));
    padded
        .as_bytes()
        .chunks(8)
        .map(|c| c.iter().fold(0u8, |acc, b| (acc << 1) | (b - b'0')))
        .collect()
}

fn hex_bytes(h: &str) -> SqlResult<Vec<u8>> {
    let h = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_owned()
    };
    (0..h.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&h[i..i + 2], 16)
                .map_err(|_| SqlError::syntax(format_args!("near 'X'{h}''")))
        })
        .collect()
}

/// The target of `CAST(arg AS dt)`.
fn cast_to(dt: &ast::DataType, arg: &ast::Expr) -> SqlResult<CastTo> {
    use ast::DataType as D;
    let fsp = |p: &Option<u64>| p.map_or(0, |p| p.min(6) as u8);
    Ok(match dt {
        D::Signed | D::SignedInteger | D::Int(_) | D::Integer(_) | D::BigInt(_) => CastTo::Signed,
        D::Unsigned | D::UnsignedInteger => CastTo::Unsigned,
        D::Char(_) | D::Varchar(_) | D::Text | D::Nvarchar(_) => CastTo::Char,
        D::Binary(_) | D::Varbinary(_) => CastTo::Binary,
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (p, s) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, (*s).max(0) as u64),
            };
            if p > 65 || s > 30 || s > p {
                return Err(SqlError::new(
                    codes::TOO_BIG_FIELDLENGTH,
                    format!("Too big precision {p} specified. Maximum is 65"),
                ));
            }
            CastTo::Decimal(p as u8, s as u8)
        }
        D::Date => CastTo::Date,
        D::Datetime(p) => CastTo::DateTime(fsp(p)),
        D::Timestamp(p, _) => CastTo::DateTime(fsp(p)),
        D::Time(p, _) => CastTo::Time(fsp(p)),
        // DOUBLE(M) is no type in MariaDB's grammar (as in CREATE TABLE),
        // nor FLOAT(M) or FLOAT(M,D) in a CAST.
        D::Double(ast::ExactNumberInfo::Precision(_))
        | D::Float(ast::ExactNumberInfo::Precision(_))
        | D::Float(ast::ExactNumberInfo::PrecisionAndScale(..)) => {
            return Err(SqlError::syntax(
                "CAST to DOUBLE takes (M,D) or nothing, to FLOAT nothing",
            ))
        }
        D::Double(ast::ExactNumberInfo::PrecisionAndScale(m, d)) => fixed_cast(*m, *d, arg)?,
        D::Float(ast::ExactNumberInfo::None) => CastTo::FixedDouble(FixedCast {
            m: FLOAT_CAST_LENGTH,
            d: NOT_FIXED_DECIMALS,
            name: None,
            float: true,
        }),
        D::Double(_) | D::DoublePrecision | D::Real => CastTo::Double,
        other => return Err(SqlError::unsupported(format_args!("CAST to {other}"))),
    })
}

/// `cast` with the length a `CHAR(n)` or `BINARY(n)` target gives it
/// (`CastTo::CharOf`, `CastTo::BinaryOf`); as it is for other targets.
fn sized_cast(cast: Expr, dt: &ast::DataType) -> SqlResult<Expr> {
    use ast::DataType as D;
    let (length, binary) = match dt {
        D::Char(Some(l)) | D::Varchar(Some(l)) | D::Nvarchar(Some(l)) => (l, false),
        D::Binary(Some(n)) => return Ok(sized(cast, *n, true)),
        D::Varbinary(Some(ast::BinaryLength::IntegerLength { length })) => {
            return Ok(sized(cast, *length, true))
        }
        _ => return Ok(cast),
    };
    match length {
        ast::CharacterLength::IntegerLength { length, .. } => Ok(sized(cast, *length, binary)),
        ast::CharacterLength::Max => Ok(cast),
    }
}

/// MariaDB's most characters of a CAST to CHAR(n) (`MAX_FIELD_BLOBLENGTH`
/// is more; its parser takes up to 4294967295 and the value is cut
/// there).
const CAST_LENGTH_MAX: u64 = u32::MAX as u64;

fn sized(cast: Expr, length: u64, binary: bool) -> Expr {
    let n = length.min(CAST_LENGTH_MAX) as u32;
    Expr::Cast(
        Box::new(cast),
        if binary {
            CastTo::BinaryOf(n)
        } else {
            CastTo::CharOf(n)
        },
    )
}

/// The length MariaDB gives `CAST(x AS FLOAT)`'s column (a FLOAT's 12).
const FLOAT_CAST_LENGTH: u8 = 12;

/// Most digits of `CAST(x AS DOUBLE(M,D))` (MariaDB's DECIMAL_MAX_PRECISION).
const FIXED_CAST_DIGITS_MAX: u64 = 65;
/// Most decimals of `CAST(x AS DOUBLE(M,D))` (MariaDB's DECIMAL_MAX_SCALE).
const FIXED_CAST_DECIMALS_MAX: i64 = 38;

/// `DOUBLE(m,d)` in a CAST, checked as MariaDB's `get_length_and_scale`
/// checks it: M past 65 is 1426, D past 38 1425, then D past M 1427;
/// (0,0) is (10,0).
fn fixed_cast(m: u64, d: i64, arg: &ast::Expr) -> SqlResult<CastTo> {
    let error = |code: u16, message: String| SqlError {
        code,
        state: "42000",
        message,
    };
    if m > FIXED_CAST_DIGITS_MAX {
        return Err(error(
            1426,
            format!("Too big precision specified for '{arg}'. Maximum is {FIXED_CAST_DIGITS_MAX}"),
        ));
    }
    if d > FIXED_CAST_DECIMALS_MAX {
        return Err(error(
            1425,
            format!("Too big scale specified for '{arg}'. Maximum is {FIXED_CAST_DECIMALS_MAX}"),
        ));
    }
    let (m, d) = if (m, d) == (0, 0) { (10, 0) } else { (m, d) };
    if d < 0 || d as u64 > m {
        return Err(error(
            1427,
            "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '')".into(),
        ));
    }
    Ok(CastTo::FixedDouble(FixedCast {
        m: m as u8,
        d: d as u8,
        name: None,
        float: false,
    }))
}

/// Whether an expression is a literal as NAME_CONST takes one: a value,
/// a signed number, a typed literal (`DATE '…'`).
fn is_literal(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Value(_) | ast::Expr::TypedString { .. } => true,
        ast::Expr::UnaryOp { op, expr } => {
            matches!(op, ast::UnaryOperator::Minus | ast::UnaryOperator::Plus)
                && matches!(&**expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)))
        }
        _ => false,
    }
}

/// The name `NAME_CONST(name, value)` gives its column.
pub fn name_const_name(e: &ast::Expr) -> Option<String> {
    let ast::Expr::Function(f) = e else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case("NAME_CONST") {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(n)), _] = list.args.as_slice() else {
        return None;
    };
    if !is_literal(n) {
        return None;
    }
    Some(match n {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    })
}

/// The name MySQL gives an unaliased select item: its text as written
/// (NAME_CONST's: its name).
pub fn item_name(e: &ast::Expr, sql: &str) -> String {
    if let Some(name) = name_const_name(e) {
        return name;
    }
    if let ast::Expr::Identifier(i) = e {
        return i.value.clone();
    }
    if let ast::Expr::CompoundIdentifier(parts) = e {
        if let Some(last) = parts.last() {
            if !parts[0].value.starts_with("@@") {
                return last.value.clone();
            }
        }
    }
    if let ast::Expr::Value(v) = e {
        match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                return s.clone()
            }
            ast::Value::Null => return "NULL".into(),
            _ => {}
        }
    }
    if let ast::Expr::Cast { expr, .. } = e {
        if let Some(text) = cast_text(sql, expr.span()) {
            return text;
        }
    }
    let span = e.span();
    let is_call = matches!(e, ast::Expr::Function(_));
    if let Some(text) = span_text(sql, span, is_call) {
        return text;
    }
    e.to_string()
}

/// The end of a slice of `sql` extended past the parentheses it leaves
/// open (a span may stop before a call's closing parenthesis, or cover
/// only its name).
fn balanced_end(sql: &str, start: usize, end: usize, is_call: bool) -> usize {
    let bytes = sql.as_bytes();
    let mut depth: i64 = 0;
    let mut i = start;
    let mut quote: Option<u8> = None;
    let step = |b: u8, depth: &mut i64, quote: &mut Option<u8>| match *quote {
        Some(q) if b == q => *quote = None,
        Some(_) => {}
        None => match b {
            b'\'' | b'"' | b'`' => *quote = Some(b),
            b'(' => *depth += 1,
            b')' => *depth -= 1,
            _ => {}
        },
    };
    while i < end {
        step(bytes[i], &mut depth, &mut quote);
        i += 1;
    }
    if depth == 0 {
        if !is_call {
            return end;
        }
        let mut j = end;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if bytes.get(j) != Some(&b'(') {
            return end;
        }
        i = j;
    }
    while i < bytes.len() {
        step(bytes[i], &mut depth, &mut quote);
        i += 1;
        if depth <= 0 && quote.is_none() {
            break;
        }
    }
    i.max(end)
}

/// The text of a `CAST(… AS …)` whose operand spans `operand` (the
/// parser's span of a CAST is its operand's, without the parentheses
/// around it): back over `(` to the word CAST, on to the parenthesis that
/// closes it.
fn cast_text(sql: &str, operand: sqlparser::tokenizer::Span) -> Option<String> {
    let start = location_offset(sql, operand.start)?;
    let end = location_offset(sql, operand.end)?;
    let mut head = sql.get(..start)?.trim_end().strip_suffix('(')?.trim_end();
    loop {
        let word = head.len().checked_sub("CAST".len());
        if let Some(word) = word.filter(|w| {
            head.get(*w..)
                .is_some_and(|t| t.eq_ignore_ascii_case("CAST"))
        }) {
            let before = head.get(..word)?.chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                return None;
            }
            return sql
                .get(word..balanced_end(sql, word, end, false))
                .map(str::to_owned);
        }
        head = head.strip_suffix('(')?.trim_end();
    }
}

/// The source text a span covers (None when the span is empty or out of
/// the text).
pub fn span_text(sql: &str, span: sqlparser::tokenizer::Span, is_call: bool) -> Option<String> {
    let start = location_offset(sql, span.start)?;
    let end = location_offset(sql, span.end)?;
    if end <= start || end > sql.len() {
        return None;
    }
    let end = balanced_end(sql, start, end, is_call);
    sql.get(start..end).map(str::to_owned)
}

/// The text of each item of the first SELECT list of `sql`, as written
/// (MySQL names an unaliased item by it), found by tokens: the items are
/// what lies between SELECT and FROM (or the end) at parenthesis depth 0,
/// split at commas. None when the text does not tokenize or has no
/// SELECT.
/// MySQL's words between SELECT and its first item, which are not part
/// of that item's name.
const SELECT_MODIFIERS: &[&str] = &[
    "HIGH_PRIORITY",
    "STRAIGHT_JOIN",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_NO_CACHE",
    "SQL_CACHE",
    "SQL_CALC_FOUND_ROWS",
];

/// Whether a word, at a query's own level, ends its select list: a
/// clause after it (FROM, WHERE, GROUP BY, HAVING, WINDOW, ORDER BY,
/// LIMIT, INTO, a locking clause) or a set operation.
pub(crate) fn ends_select_list(w: &sqlparser::tokenizer::Word) -> bool {
    use sqlparser::keywords::Keyword as K;
    w.quote_style.is_none()
        && matches!(
            w.keyword,
            K::FROM
                | K::WHERE
                | K::GROUP
                | K::HAVING
                | K::WINDOW
                | K::ORDER
                | K::LIMIT
                | K::INTO
                | K::FOR
                | K::LOCK
                | K::UNION
                | K::EXCEPT
                | K::INTERSECT
        )
}

pub fn select_item_texts(sql: &str) -> Option<Vec<String>> {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = sqlparser::dialect::MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .ok()?;
    let start = tokens
        .iter()
        .position(|t| matches!(&t.token, Token::Word(w) if w.keyword == K::SELECT))?;
    let mut items: Vec<String> = Vec::new();
    let mut first: Option<usize> = None;
    let mut last_end: Option<usize> = None;
    let mut depth = 0i32;
    // `WITHIN GROUP (ORDER BY …)` of a percentile: its GROUP ends nothing.
    let mut after_within = false;
    let flush = |items: &mut Vec<String>, first: &mut Option<usize>, last: &mut Option<usize>| {
        if let (Some(a), Some(b)) = (first.take(), last.take()) {
            items.push(sql.get(a..b).unwrap_or_default().to_owned());
        }
    };
    for t in &tokens[start + 1..] {
        let within = std::mem::replace(
            &mut after_within,
            matches!(&t.token, Token::Word(w) if w.keyword == K::WITHIN),
        );
        match &t.token {
            Token::Whitespace(_) => {
                after_within = within;
                continue;
            }
            Token::Word(w) if within && w.keyword == K::GROUP => {}
            Token::Word(w)
                if depth == 0
                    && items.is_empty()
                    && first.is_none()
                    && (matches!(w.keyword, K::DISTINCT | K::ALL | K::DISTINCTROW)
                        || SELECT_MODIFIERS
                            .iter()
                            .any(|m| w.value.eq_ignore_ascii_case(m))) =>
            {
                continue
            }
            Token::Word(w) if depth == 0 && ends_select_list(w) => break,
            Token::SemiColon if depth == 0 => break,
            Token::Comma if depth == 0 => {
                flush(&mut items, &mut first, &mut last_end);
                continue;
            }
            Token::LParen => depth += 1,
            // The end of a parenthesised query (a derived table's, a CTE's).
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if first.is_none() {
            first = Some(location_offset(sql, t.span.start)?);
        }
        last_end = Some(location_offset(sql, t.span.end)?);
    }
    flush(&mut items, &mut first, &mut last_end);
    Some(items)
}

/// The byte offset of a location (1-based line and column) in `sql`.
/// `sql` from `at` on (the text of one statement of a multi-statement
/// and those after it); None when `at` is not in `sql`.
pub fn text_from(sql: &str, at: Location) -> Option<&str> {
    sql.get(location_offset(sql, at)?..)
}

fn location_offset(sql: &str, l: Location) -> Option<usize> {
    if l.line == 0 || l.column == 0 {
        return None;
    }
    let mut at = 0usize;
    for (n, line) in sql.split_inclusive('\n').enumerate() {
        if n as u64 + 1 == l.line {
            let col = usize::try_from(l.column).ok()? - 1;
            let byte = line.char_indices().nth(col).map_or(line.len(), |(b, _)| b);
            return Some(at + byte);
        }
        at += line.len();
    }
    // The end of the last line.
    (l.line == sql.split_inclusive('\n').count() as u64 + 1 && l.column == 1).then_some(at)
}

/// Positions of the `?` placeholders of a statement text, in order.
pub fn placeholders(sql: &str) -> SqlResult<Vec<Location>> {
    let dialect = sqlparser::dialect::MySqlDialect {};
    let tokens = sqlparser::tokenizer::Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(SqlError::syntax)?;
    Ok(tokens
        .into_iter()
        .filter(|t| matches!(&t.token, sqlparser::tokenizer::Token::Placeholder(p) if p == "?"))
        .map(|t| t.span.start)
        .collect())
}

impl Expr {
    /// `self` rebuilt with `f` applied to each direct subexpression. A
    /// column, literal, parameter, aggregate, window, inserted value and
    /// subquery are leaves here (cloned): their insides are not the
    /// row's expressions, and a caller that maps them does so itself.
    pub fn map_children(&self, f: &mut dyn FnMut(&Expr) -> Expr) -> Expr {
        let mut b = |x: &Expr| Box::new(f(x));
        match self {
            Expr::Lit(_)
            | Expr::Param(_)
            | Expr::Col(_)
            | Expr::Agg(_)
            | Expr::Win(_)
            | Expr::InsertValue(_)
            | Expr::Sub(_) => self.clone(),
            Expr::Neg(a) => Expr::Neg(b(a)),
            Expr::Not(a) => Expr::Not(b(a)),
            Expr::IsNull(a, n) => Expr::IsNull(b(a), *n),
            Expr::IsBool(a, x, y) => Expr::IsBool(b(a), *x, *y),
            Expr::Cast(a, t) => Expr::Cast(b(a), t.clone()),
            Expr::Arith(o, x, y, e) => Expr::Arith(*o, b(x), b(y), *e),
            Expr::Cmp(o, x, y, c) => Expr::Cmp(*o, b(x), b(y), *c),
            Expr::And(x, y) => Expr::And(b(x), b(y)),
            Expr::Or(x, y) => Expr::Or(b(x), b(y)),
            Expr::Xor(x, y) => Expr::Xor(b(x), b(y)),
            Expr::In(x, l, n, c, from) => {
                Expr::In(b(x), l.iter().map(|i| *b(i)).collect(), *n, *c, *from)
            }
            Expr::Between(x, l, h, n, c) => Expr::Between(b(x), b(l), b(h), *n, *c),
            Expr::Like(x, p, esc, n, c) => Expr::Like(b(x), b(p), *esc, *n, *c),
            Expr::Case(o, w, el) => Expr::Case(
                o.as_ref().map(|o| b(o)),
                w.iter().map(|(x, y)| (*b(x), *b(y))).collect(),
                el.as_ref().map(|x| b(x)),
            ),
            Expr::Func(func, args) => Expr::Func(*func, args.iter().map(|a| *b(a)).collect()),
        }
    }
}

impl Expr {
    /// The bytes of a string literal, a binary one (`X'41'`) included:
    /// both compare with a number column as strings do.
    pub fn text_literal(&self) -> Option<&[u8]> {
        match self {
            Expr::Lit(Val::Str(bytes)) => Some(bytes),
            Expr::Func(Func::BinaryLiteral, args) => match args.as_slice() {
                [Expr::Lit(Val::Str(bytes))] => Some(bytes),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the expression reads no column (constant within a statement).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Lit(_) | Expr::Param(_) => true,
            Expr::Col(_) | Expr::Agg(_) | Expr::Win(_) | Expr::InsertValue(_) => false,
            Expr::Neg(a) | Expr::Not(a) | Expr::IsNull(a, _) | Expr::IsBool(a, ..) => {
                a.is_constant()
            }
            Expr::Cast(a, _) => a.is_constant(),
            Expr::Arith(_, a, b, _)
            | Expr::Cmp(_, a, b, _)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Xor(a, b) => a.is_constant() && b.is_constant(),
            Expr::In(a, l, ..) => a.is_constant() && l.iter().all(Expr::is_constant),
            Expr::Between(a, b, c, ..) => a.is_constant() && b.is_constant() && c.is_constant(),
            Expr::Like(a, b, ..) => a.is_constant() && b.is_constant(),
            Expr::Case(o, w, e) => {
                o.as_ref().is_none_or(|o| o.is_constant())
                    && w.iter().all(|(a, b)| a.is_constant() && b.is_constant())
                    && e.as_ref().is_none_or(|e| e.is_constant())
            }
            Expr::Func(f, args) => f.is_deterministic() && args.iter().all(Expr::is_constant),
            Expr::Sub(_) => false,
        }
    }

    /// Whether the expression reads an aggregate.
    pub fn has_agg(&self) -> bool {
        match self {
            Expr::Agg(_) => true,
            Expr::Lit(_) | Expr::Param(_) | Expr::Col(_) | Expr::Win(_) | Expr::InsertValue(_) => {
                false
            }
            Expr::Neg(a) | Expr::Not(a) | Expr::IsNull(a, _) | Expr::IsBool(a, ..) => a.has_agg(),
            Expr::Cast(a, _) => a.has_agg(),
            Expr::Arith(_, a, b, _)
            | Expr::Cmp(_, a, b, _)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Xor(a, b) => a.has_agg() || b.has_agg(),
            Expr::In(a, l, ..) => a.has_agg() || l.iter().any(Expr::has_agg),
            Expr::Between(a, b, c, ..) => a.has_agg() || b.has_agg() || c.has_agg(),
            Expr::Like(a, b, ..) => a.has_agg() || b.has_agg(),
            Expr::Case(o, w, e) => {
                o.as_ref().is_some_and(|o| o.has_agg())
                    || w.iter().any(|(a, b)| a.has_agg() || b.has_agg())
                    || e.as_ref().is_some_and(|e| e.has_agg())
            }
            Expr::Func(_, args) => args.iter().any(Expr::has_agg),
            Expr::Sub(s) => match &s.test {
                SubTest::Scalar | SubTest::Exists(_) => false,
                SubTest::In(left, _) => left.iter().any(|(x, _)| x.has_agg()),
                SubTest::Quantified(x, ..) => x.has_agg(),
            },
        }
    }

    /// The AND chain of `parts`, in order ([`Expr::conjuncts`]' inverse);
    /// None for none.
    pub fn and_of(parts: impl IntoIterator<Item = Expr>) -> Option<Expr> {
        parts
            .into_iter()
            .reduce(|a, b| Expr::And(Box::new(a), Box::new(b)))
    }

    /// The conjuncts of an AND chain.
    pub fn conjuncts(&self) -> Vec<&Expr> {
        match self {
            Expr::And(a, b) => {
                let mut out = a.conjuncts();
                out.extend(b.conjuncts());
                out
            }
            other => vec![other],
        }
    }
}

/// The columns of `columns` (with their positions) that names in `q`
/// may mean: every column a name written in it matches, inner queries'
/// names included (a name the subquery's own tables have too is bound
/// needlessly, which costs only cache hits).
pub fn outer_columns(
    q: &ast::Query,
    columns: &[ScopeColumn],
    hidden: &[usize],
) -> Vec<(ScopeColumn, usize)> {
    struct Names(Vec<(Option<String>, String)>);
    impl ast::Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> std::ops::ControlFlow<()> {
            match e {
                ast::Expr::Identifier(i) => self.0.push((None, i.value.clone())),
                ast::Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    let n = parts.len();
                    self.0
                        .push((Some(parts[n - 2].value.clone()), parts[n - 1].value.clone()));
                }
                _ => {}
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut names = Names(Vec::new());
    let _ = ast::Visit::visit(q, &mut names);
    let mut out: Vec<(ScopeColumn, usize)> = Vec::new();
    for (at, c) in columns.iter().enumerate() {
        let named = names.0.iter().any(|(t, n)| {
            c.name.eq_ignore_ascii_case(n)
                && match t {
                    Some(t) => c.table.eq_ignore_ascii_case(t),
                    None => !hidden.contains(&at),
                }
        });
        if named {
            out.push((c.clone(), at));
        }
    }
    out
}

/// A scalar subquery's column as an expression's: its type, NULL-able, of
/// no table.
fn subquery_meta(column: &ColumnMeta) -> ColumnMeta {
    let mut meta = column.clone();
    meta.schema = "".into();
    meta.table = "".into();
    meta.org_table = "".into();
    meta.org_name = "".into();
    meta.flags &= !(flags::NOT_NULL
        | flags::PRI_KEY
        | flags::UNIQUE_KEY
        | flags::MULTIPLE_KEY
        | flags::AUTO_INCREMENT);
    meta
}

/// An outer row's value as the constant a subquery reads: a string keeps
/// its column's collation.
fn outer_value(c: &ScopeColumn, v: &Val) -> Expr {
    let lit = Expr::Lit(v.clone());
    let value = match (c.kind, v) {
        (Kind::Str { collation: None }, Val::Str(_)) => Expr::Cast(Box::new(lit), CastTo::Binary),
        (
            Kind::Str {
                collation: Some(to),
            },
            Val::Str(_),
        ) if to != Collation::Utf8mb4GeneralCi => Expr::Func(Func::Collate(to), vec![lit]),
        _ => lit,
    };
    if c.meta.ty == ColumnType::Bit {
        // A BIT is its bytes in a string context, here too.
        let bytes = c.meta.length.div_ceil(8).clamp(1, 8);
        return Expr::Func(
            Func::OuterBit,
            vec![value, Expr::Lit(Val::UInt(u64::from(bytes)))],
        );
    }
    match &c.members {
        // An ENUM or SET is its number in a numeric context, here too.
        Some(m) => Expr::Func(
            Func::OuterMember,
            vec![
                value,
                Expr::Lit(Val::str(&*m.joined)),
                Expr::Lit(Val::Int(i64::from(m.set))),
            ],
        ),
        None => value,
    }
}

/// A value of a kind for planning a correlated subquery before any outer
/// row is at hand (temporal kinds: NULL).
pub fn sample_value(kind: Kind) -> Val {
    match kind {
        Kind::Int { unsigned: false } => Val::Int(0),
        Kind::Int { unsigned: true } => Val::UInt(0),
        Kind::Dec { scale } => Val::Dec(Dec::new(0, scale)),
        Kind::Double => Val::Double(0.0),
        Kind::Str { .. } => Val::str(String::new()),
        Kind::Null | Kind::Date | Kind::DateTime { .. } | Kind::Time { .. } => Val::Null,
    }
}

impl Expr {
    /// Whether a correlated subquery is evaluated anywhere in it.
    pub fn has_sub(&self) -> bool {
        let mut found = false;
        self.each(&mut |e| found |= matches!(e, Expr::Sub(_)));
        found
    }

    /// Calls `f` on this expression and every expression inside it.
    pub fn each(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Lit(_)
            | Expr::Param(_)
            | Expr::Col(_)
            | Expr::Agg(_)
            | Expr::Win(_)
            | Expr::InsertValue(_) => {}
            Expr::Neg(a) | Expr::Not(a) | Expr::IsNull(a, _) | Expr::IsBool(a, ..) => a.each(f),
            Expr::Cast(a, _) => a.each(f),
            Expr::Arith(_, a, b, _)
            | Expr::Cmp(_, a, b, _)
            | Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Xor(a, b)
            | Expr::Like(a, b, ..) => {
                a.each(f);
                b.each(f);
            }
            Expr::In(a, l, ..) => {
                a.each(f);
                l.iter().for_each(|x| x.each(f));
            }
            Expr::Between(a, b, c, ..) => {
                a.each(f);
                b.each(f);
                c.each(f);
            }
            Expr::Case(o, w, el) => {
                if let Some(o) = o {
                    o.each(f);
                }
                for (a, b) in w {
                    a.each(f);
                    b.each(f);
                }
                if let Some(el) = el {
                    el.each(f);
                }
            }
            Expr::Func(_, args) => args.iter().for_each(|x| x.each(f)),
            Expr::Sub(s) => {
                s.aggs.iter().for_each(|(_, x)| x.each(f));
                match &s.test {
                    SubTest::Scalar | SubTest::Exists(_) => {}
                    SubTest::In(left, _) => left.iter().for_each(|(x, _)| x.each(f)),
                    SubTest::Quantified(x, ..) => x.each(f),
                }
            }
        }
    }
}

/// The items of a row constructor `(a, b, …)` of more than one value.
/// The AND (or OR) of `items` as a balanced tree, so that evaluating
/// thousands of them does not recurse thousands deep. `items` is not
/// empty.
fn balanced(mut items: Vec<Expr>, and: bool) -> Expr {
    if items.len() <= 1 {
        return items.pop().unwrap_or(Expr::Lit(Val::Int(i64::from(and))));
    }
    let right = items.split_off(items.len() / 2);
    let (l, r) = (
        Box::new(balanced(items, and)),
        Box::new(balanced(right, and)),
    );
    if and {
        Expr::And(l, r)
    } else {
        Expr::Or(l, r)
    }
}

fn row_items(e: &ast::Expr) -> Option<&[ast::Expr]> {
    match e {
        ast::Expr::Tuple(items) if items.len() > 1 => Some(items),
        _ => None,
    }
}

/// MySQL's 1241: a row where one value was wanted, or rows of different
/// widths.
fn operand_columns(width: usize) -> SqlError {
    SqlError::new(
        codes::OPERAND_COLUMNS,
        format!("Operand should contain {width} column(s)"),
    )
}

/// A TIMESTAMP default kept in UTC as the session sees it: FROM_UNIXTIME
/// of its seconds, with the column's digits (evaluated in the statement's
/// zone).
pub fn utc_default(micros: i64, fsp: u8) -> Expr {
    let fsp = fsp.min(6);
    let unit = 10i64.pow(6 - u32::from(fsp));
    let seconds = if fsp == 0 {
        Val::Int(micros.div_euclid(value::MICROS_PER_SECOND))
    } else {
        Val::Dec(Dec::new(i128::from(micros.div_euclid(unit)), fsp))
    };
    Expr::Func(Func::FromUnixtime, vec![Expr::Lit(seconds)])
}

/// An INTERVAL's unit as MySQL names it: `DAY`, or a compound one
/// (`HOUR_MINUTE`) from the standard's `HOUR TO MINUTE` the statement's
/// words were mended to (`session::mend_words`; `SECOND_MICROSECOND` is
/// `MICROSECOND TO SECOND` there).
pub fn interval_unit(iv: &ast::Interval) -> String {
    let lead = iv
        .leading_field
        .as_ref()
        .map_or_else(|| "DAY".to_owned(), |f| f.to_string().to_ascii_uppercase());
    match &iv.last_field {
        Some(ast::DateTimeField::Second) if lead == "MICROSECOND" => {
            "SECOND_MICROSECOND".to_owned()
        }
        Some(last) => format!("{lead}_{}", last.to_string().to_ascii_uppercase()),
        None => lead,
    }
}

/// The call `name(args…)` as the parser would have made it.
pub(crate) fn ast_call<'e>(name: &str, args: impl IntoIterator<Item = &'e ast::Expr>) -> ast::Expr {
    use ast::{FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments};
    ast::Expr::Function(ast::Function {
        name: ast::ObjectName(vec![ast::ObjectNamePart::Identifier(name.into())]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a.clone())))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

/// An integer literal, `-n` too: (negative, its digits). In ORDER BY and
/// GROUP BY (a GROUP_CONCAT's ORDER BY too) it names a position; a
/// negative one never names one (MariaDB's 1054).
pub fn position_literal(e: &ast::Expr) -> Option<(bool, &str)> {
    let (negative, e) = match e {
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => (true, expr.as_ref()),
        e => (false, e),
    };
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()) => {
                Some((negative, n))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The AND-conjuncts of `e` as written (parentheses looked through).
pub(crate) fn split_and<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        ast::Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

/// Whether `e` is a scalar subquery that reads a table (`(SELECT MAX(x)
/// FROM t)`, not `(SELECT 5)`): MariaDB's optimizer does not take it for
/// a constant where it converts constants to a column's type.
fn reads_table(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Subquery(q) => query_reads_table(q),
        ast::Expr::Nested(inner) => reads_table(inner),
        _ => false,
    }
}

/// Whether the query reads a table (a SELECT with a FROM, or a union).
fn query_reads_table(q: &ast::Query) -> bool {
    match q.body.as_ref() {
        ast::SetExpr::Select(s) => !s.from.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests;

/// Adds to `out` the addresses of the `x IN (SELECT …)` that are
/// conjuncts of `e` (of `NOT e` when `negated`) once NOT is pushed down by
/// De Morgan's laws, as MariaDB's parser does (`negate_expression`:
/// `NOT (a OR b)` is `NOT a AND NOT b`, `NOT NOT a` is `a`, `NOT (x NOT IN
/// (…))` is `x IN (…)`), whose subquery MariaDB makes a semi-join (one
/// table read, no GROUP BY, HAVING nor aggregate).
fn semi_join_ins(e: &ast::Expr, negated: bool, out: &mut Vec<usize>) {
    use ast::BinaryOperator::{And, Or};
    match e {
        ast::Expr::Nested(x) => semi_join_ins(x, negated, out),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Not | ast::UnaryOperator::BangNot,
            expr,
        } => semi_join_ins(expr, !negated, out),
        ast::Expr::BinaryOp { left, op, right }
            if (*op == And && !negated) || (*op == Or && negated) =>
        {
            semi_join_ins(left, negated, out);
            semi_join_ins(right, negated, out);
        }
        ast::Expr::In {
            target: ast::InTarget::Subquery(q),
            negated: not_in,
            ..
        } if *not_in == negated
            && matches!(q.body.as_ref(), ast::SetExpr::Select(s)
                if !s.from.is_empty()
                    && s.having.is_none()
                    && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
                    && !crate::engine::exec::cte::has_aggregate(s)) =>
        {
            out.push(e as *const ast::Expr as usize);
        }
        _ => {}
    }
}
