//! Window functions (`f(…) OVER (PARTITION BY … ORDER BY … frame)`):
//! lowered here into a [`WinSpec`] list beside the aggregates; the
//! executor (`exec::window`) computes every row's value once the rows of
//! the query (grouped, and past HAVING) are known, and the expression
//! reads it ([`super::Expr::Win`]).

use schema::Collation;
use sqlparser::ast;

use super::{AggFn, AggSpec, Expr, Kind, Scope};
use crate::error::{SqlError, SqlResult};

/// MariaDB's 4015: a window function outside the select list and ORDER BY.
pub const WINDOW_NOT_ALLOWED: u16 = 4015;
/// MariaDB's 4018: a function that needs the window's order lacks one.
pub const WINDOW_NO_ORDER: u16 = 4018;
/// MariaDB's 4024: NTILE of a bucket count below 1.
pub const NTILE_NOT_POSITIVE: u16 = 4024;
/// MariaDB's 4009: OVER names a window the query does not define.
pub const WRONG_WINDOW_NAME: u16 = 4009;
/// 1235: what MariaDB does not do as a window function either.
pub const NOT_SUPPORTED_YET: u16 = 1235;
/// MariaDB's 4101: PERCENTILE_CONT or MEDIAN of what is no number.
pub const PERCENTILE_NOT_NUMERIC: u16 = 4101;
/// MariaDB's 4103: a percentile that is no constant in [0, 1].
pub const PERCENTILE_OUT_OF_RANGE: u16 = 4103;
/// MariaDB's 4104: a NULL percentile.
pub const PERCENTILE_NOT_A_NUMBER: u16 = 4104;
/// The decimals MariaDB shows PERCENTILE_CONT's DOUBLE with (its
/// DOUBLE(18,10)).
pub const PERCENTILE_CONT_DECIMALS: u8 = 10;
/// PERCENTILE_CONT's display length (MariaDB's DOUBLE(18,10)).
pub const PERCENTILE_CONT_LENGTH: u32 = 18;
/// Largest frame or LAG/LEAD offset taken (bounds nothing but the
/// arithmetic: a frame never reaches past its partition).
pub const WINDOW_OFFSET_MAX: u64 = 1 << 40;

/// A window function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WinFn {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    /// `NTILE(n)`: the bucket count is the first argument.
    Ntile,
    /// `LAG(x [, offset [, default]])`: arguments x, default.
    Lag,
    /// `LEAD(x [, offset [, default]])`.
    Lead,
    FirstValue,
    LastValue,
    /// `NTH_VALUE(x, n)`.
    NthValue,
    /// MariaDB's `PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)` and
    /// `MEDIAN(x)` (p 0.5): the partition's value at p, interpolated, a
    /// DOUBLE.
    PercentileCont,
    /// `PERCENTILE_DISC(p) WITHIN GROUP (ORDER BY x)`: the partition's
    /// first x whose cumulative distribution reaches p.
    PercentileDisc,
    /// An aggregate over the frame ([`WinSpec::agg`]).
    Agg,
}

impl WinFn {
    /// A value of another row of the partition (LAG, LEAD, FIRST_VALUE,
    /// LAST_VALUE, NTH_VALUE, PERCENTILE_DISC): typed, sized and shown as
    /// its argument.
    pub fn is_row_value(self) -> bool {
        matches!(
            self,
            WinFn::Lag
                | WinFn::Lead
                | WinFn::FirstValue
                | WinFn::LastValue
                | WinFn::NthValue
                | WinFn::PercentileDisc
        )
    }
}

/// One end of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(u64),
    CurrentRow,
    Following(u64),
    UnboundedFollowing,
}

/// The rows of the partition a frame-using function sees from each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// ROWS (positions); else RANGE (values of the one ORDER BY key; for
    /// CURRENT ROW and UNBOUNDED, the row's peers).
    pub rows: bool,
    pub start: FrameBound,
    pub end: FrameBound,
}

impl Frame {
    /// SQL's default: up to the current row's last peer with an ORDER BY,
    /// the whole partition without.
    fn default_for(ordered: bool) -> Frame {
        Frame {
            rows: false,
            start: FrameBound::UnboundedPreceding,
            end: if ordered {
                FrameBound::CurrentRow
            } else {
                FrameBound::UnboundedFollowing
            },
        }
    }
}

/// One window function of a query.
#[derive(Clone, Debug)]
pub struct WinSpec {
    pub func: WinFn,
    /// Its name as written, upper case (for errors).
    pub name: String,
    /// Per-row arguments: NTILE's count; LAG/LEAD's value and default;
    /// FIRST/LAST/NTH_VALUE's value (NTH_VALUE's n in `offset`).
    pub args: Vec<Expr>,
    /// LAG/LEAD's offset (negative: the other way), NTH_VALUE's n.
    pub offset: i64,
    /// PERCENTILE_CONT's and PERCENTILE_DISC's p.
    pub fraction: f64,
    /// The aggregate of [`WinFn::Agg`] (its argument evaluated per row).
    pub agg: Option<AggSpec>,
    pub partition: Vec<Expr>,
    pub order: Vec<(Expr, bool)>,
    /// The collation each PARTITION BY and ORDER BY key compares under
    /// (None: bytes), as GROUP BY and ORDER BY compare them.
    pub partition_collations: Vec<Option<Collation>>,
    pub order_collations: Vec<Option<Collation>>,
    pub frame: Frame,
    pub kind: Kind,
}

impl Scope<'_> {
    /// Lowers `f(args) OVER …`.
    pub(super) fn window(
        &mut self,
        f: &ast::Function,
        name: &str,
        args: &[&ast::Expr],
        distinct: bool,
        star: bool,
    ) -> SqlResult<Expr> {
        if self.windows.is_none() {
            return Err(SqlError::new(
                WINDOW_NOT_ALLOWED,
                "Window function is allowed only in SELECT list and ORDER BY clause",
            ));
        }
        let Some(over) = &f.over else {
            return Err(SqlError::unsupported("a window function without OVER"));
        };
        let spec = self.window_spec(over)?;
        let agg_fn = AggFn::by_name(name, star);
        if matches!(name, "PERCENTILE_CONT" | "PERCENTILE_DISC" | "MEDIAN") {
            return self.percentile(f, name, args, spec);
        }
        if !f.within_group.is_empty() {
            return Err(SqlError::syntax(format_args!("WITHIN GROUP of {name}")));
        }
        let func = match name {
            _ if agg_fn.is_some() => WinFn::Agg,
            "ROW_NUMBER" => WinFn::RowNumber,
            "RANK" => WinFn::Rank,
            "DENSE_RANK" => WinFn::DenseRank,
            "PERCENT_RANK" => WinFn::PercentRank,
            "CUME_DIST" => WinFn::CumeDist,
            "NTILE" => WinFn::Ntile,
            "LAG" => WinFn::Lag,
            "LEAD" => WinFn::Lead,
            "FIRST_VALUE" => WinFn::FirstValue,
            "LAST_VALUE" => WinFn::LastValue,
            "NTH_VALUE" => WinFn::NthValue,
            "GROUP_CONCAT" => return Err(not_yet("GROUP_CONCAT() aggregate as window function")),
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "{other}() as a window function"
                )))
            }
        };
        if distinct {
            return Err(not_yet(&format!(
                "{name}(DISTINCT) aggregate as window function"
            )));
        }
        let needs_order = matches!(
            func,
            WinFn::Rank
                | WinFn::DenseRank
                | WinFn::PercentRank
                | WinFn::CumeDist
                | WinFn::Lag
                | WinFn::Lead
        );
        if needs_order && spec.order.is_empty() {
            return Err(SqlError::new(
                WINDOW_NO_ORDER,
                format!(
                    "No order list in window specification for '{}'",
                    name.to_ascii_lowercase()
                ),
            ));
        }
        let arity = match func {
            WinFn::RowNumber
            | WinFn::Rank
            | WinFn::DenseRank
            | WinFn::PercentRank
            | WinFn::CumeDist => 0..=0,
            WinFn::Ntile | WinFn::FirstValue | WinFn::LastValue => 1..=1,
            WinFn::Lag | WinFn::Lead => 1..=3,
            WinFn::NthValue => 2..=2,
            WinFn::PercentileCont | WinFn::PercentileDisc => {
                unreachable!("percentiles are lowered by Scope::percentile")
            }
            WinFn::Agg if star => 0..=0,
            WinFn::Agg => 1..=1,
        };
        if !arity.contains(&args.len()) {
            return Err(SqlError::new(
                1582,
                format!("Incorrect parameter count in the call to native function '{name}'"),
            ));
        }
        // Arguments are evaluated per row of the query: aggregates may be
        // in them (`RANK() OVER (ORDER BY SUM(x))`), window functions not.
        let windows = self.windows.take();
        let lowered: SqlResult<Vec<Expr>> = args.iter().map(|a| self.lower(a)).collect();
        self.windows = windows;
        let mut lowered = lowered?;
        let mut offset = 1;
        match func {
            WinFn::Lag | WinFn::Lead if lowered.len() >= 2 => {
                offset = constant_int(&lowered[1], name)?;
                lowered.remove(1);
            }
            WinFn::NthValue => {
                // n below 1 finds no row: NULL, as MariaDB answers.
                offset = constant_int(&lowered[1], name)?;
                lowered.truncate(1);
            }
            // An aggregate's argument as MariaDB's window functions read
            // it, from the temporary table they run over: a quotient
            // rounded to its scale (`SUM(x / 3) OVER (…)` of 97 and 97 is
            // 64.6666, the sum of two 32.3333). A constant is not in that
            // table: `SUM(97 / 3) OVER ()` of two rows is 64.6667.
            WinFn::Agg if lowered.first().is_some_and(|a| !a.is_constant()) => {
                let arg = lowered.remove(0);
                lowered.insert(0, self.at_scale(arg));
            }
            _ => {}
        }
        let agg = agg_fn.map(|func| {
            let arg = lowered.first().cloned();
            let arg_kind = arg
                .as_ref()
                .map_or(Kind::Int { unsigned: false }, |a| self.kind(a));
            AggSpec {
                func,
                arg,
                distinct: false,
                arg_kind,
                concat: None,
            }
        });
        let kind = match func {
            WinFn::RowNumber | WinFn::Rank | WinFn::DenseRank | WinFn::Ntile => {
                Kind::Int { unsigned: false }
            }
            WinFn::PercentRank | WinFn::CumeDist => Kind::Double,
            WinFn::Lag | WinFn::Lead => match lowered.get(1) {
                Some(default) => super::eval::merge_kinds(
                    [self.kind(&lowered[0]), self.kind(default)].into_iter(),
                ),
                None => self.kind(&lowered[0]),
            },
            WinFn::FirstValue | WinFn::LastValue | WinFn::NthValue => self.kind(&lowered[0]),
            WinFn::PercentileCont | WinFn::PercentileDisc => {
                unreachable!("percentiles are lowered by Scope::percentile")
            }
            WinFn::Agg => super::eval::agg_kind(agg.as_ref().expect("an aggregate")),
        };
        self.push_window(func, name, lowered, offset, 0.0, agg, spec, kind)
    }

    /// MariaDB's `PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x [DESC]) OVER
    /// (PARTITION BY …)`, `PERCENTILE_DISC(…)` and `MEDIAN(x) OVER (…)`:
    /// the partition ordered by x (NULLs left out), p a constant in
    /// [0, 1]; the OVER clause has no ORDER BY or frame (1064, as in
    /// MariaDB's grammar).
    fn percentile(
        &mut self,
        f: &ast::Function,
        name: &str,
        args: &[&ast::Expr],
        mut spec: Lowered,
    ) -> SqlResult<Expr> {
        let func_name = if name == "PERCENTILE_DISC" {
            "percentile_disc"
        } else {
            "percentile_cont"
        };
        // The frame of an OVER without ORDER BY or frame: the partition.
        if !spec.order.is_empty() || spec.frame != Frame::default_for(false) {
            return Err(SqlError::syntax(format_args!(
                "ORDER BY or a frame in the OVER of {name}"
            )));
        }
        let windows = self.windows.take();
        let lowered = (|| -> SqlResult<(Expr, Expr, bool)> {
            if name == "MEDIAN" {
                let [x] = args else {
                    return Err(SqlError::new(
                        1582,
                        "Incorrect parameter count in the call to native function 'MEDIAN'",
                    ));
                };
                if !f.within_group.is_empty() {
                    return Err(SqlError::syntax("WITHIN GROUP of MEDIAN"));
                }
                return Ok((Expr::Lit(super::Val::Double(0.5)), self.lower(x)?, false));
            }
            let ([p], [o]) = (args, f.within_group.as_slice()) else {
                return Err(SqlError::syntax(format_args!(
                    "{name} takes one argument and WITHIN GROUP (ORDER BY one expression)"
                )));
            };
            let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
            Ok((self.lower(p)?, self.lower(&o.expr)?, desc))
        })();
        self.windows = windows;
        let (p, x, desc) = lowered?;
        let out_of_range = || {
            SqlError::new(
                PERCENTILE_OUT_OF_RANGE,
                format!("Argument to the {func_name} function does not belong to the range [0,1]"),
            )
        };
        if !p.is_constant() {
            return Err(out_of_range());
        }
        // A constant of no column: its value needs nothing of a session.
        let env = super::eval::Env::default();
        let mut ctx = super::eval::Ctx::new(&[], &env);
        let fraction = match p.eval(&[], &mut ctx)? {
            super::Val::Null => {
                return Err(SqlError::new(
                    PERCENTILE_NOT_A_NUMBER,
                    format!(
                        "{func_name} function only accepts arguments that can be converted to numerical types"
                    ),
                ))
            }
            v => ctx.num_f64(&v),
        };
        if !(0.0..=1.0).contains(&fraction) {
            return Err(out_of_range());
        }
        let x_kind = self.kind(&x);
        let func = if name == "PERCENTILE_DISC" {
            WinFn::PercentileDisc
        } else {
            if !matches!(
                x_kind,
                Kind::Int { .. } | Kind::Dec { .. } | Kind::Double | Kind::Null
            ) {
                return Err(SqlError::new(
                    PERCENTILE_NOT_NUMERIC,
                    format!("Numeric datatype is required for {func_name} function"),
                ));
            }
            WinFn::PercentileCont
        };
        let kind = match func {
            WinFn::PercentileCont => Kind::Double,
            _ => x_kind,
        };
        // The partition in x's order: the executor reads x from the
        // window's ORDER BY; x is its argument too, which types and sizes
        // PERCENTILE_DISC as a value of a row.
        spec.order = vec![(x.clone(), desc)];
        self.push_window(func, name, vec![x], 0, fraction, None, spec, kind)
    }

    /// Records a lowered window function; the expression reads its value.
    #[allow(clippy::too_many_arguments)]
    fn push_window(
        &mut self,
        func: WinFn,
        name: &str,
        lowered: Vec<Expr>,
        offset: i64,
        fraction: f64,
        agg: Option<AggSpec>,
        spec: Lowered,
        kind: Kind,
    ) -> SqlResult<Expr> {
        let key_collation = |s: &Scope<'_>, e: &Expr| match s.kind(e) {
            Kind::Str { collation } => collation,
            _ => Some(Collation::Utf8mb4GeneralCi),
        };
        let partition_collations = spec
            .partition
            .iter()
            .map(|e| key_collation(self, e))
            .collect();
        let order_collations = spec
            .order
            .iter()
            .map(|(e, _)| key_collation(self, e))
            .collect();
        let windows = self.windows.as_mut().expect("checked above");
        windows.push(WinSpec {
            func,
            name: name.to_owned(),
            args: lowered,
            offset,
            fraction,
            agg,
            partition: spec.partition,
            order: spec.order,
            partition_collations,
            order_collations,
            frame: spec.frame,
            kind,
        });
        Ok(Expr::Win(windows.len() - 1))
    }

    /// PARTITION BY, ORDER BY and the frame of an OVER clause, a named
    /// window (`WINDOW w AS (…)`) filled in.
    fn window_spec(&mut self, over: &ast::WindowType) -> SqlResult<Lowered> {
        let spec = match over {
            ast::WindowType::WindowSpec(spec) => spec.clone(),
            ast::WindowType::NamedWindow(name) => ast::WindowSpec {
                window_name: Some(name.clone()),
                partition_by: Vec::new(),
                order_by: Vec::new(),
                window_frame: None,
            },
        };
        let spec = self.with_named_window(spec, 0)?;
        let windows = self.windows.take();
        let lowered = (|| {
            let mut partition = Vec::new();
            for e in &spec.partition_by {
                partition.push(self.lower(e)?);
            }
            let mut order = Vec::new();
            for o in &spec.order_by {
                let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
                let e = self.lower(&o.expr)?;
                order.push((self.order_key(e), desc));
            }
            Ok::<_, SqlError>((partition, order))
        })();
        self.windows = windows;
        let (partition, order) = lowered?;
        let frame = match &spec.window_frame {
            None => Frame::default_for(!order.is_empty()),
            Some(f) => {
                let rows = match f.units {
                    ast::WindowFrameUnits::Rows => true,
                    ast::WindowFrameUnits::Range => false,
                    ast::WindowFrameUnits::Groups => {
                        return Err(SqlError::unsupported("GROUPS frames"))
                    }
                };
                let start = bound(&f.start_bound)?;
                let end = match &f.end_bound {
                    Some(b) => bound(b)?,
                    None => FrameBound::CurrentRow,
                };
                let by_offset = |b: FrameBound| {
                    matches!(b, FrameBound::Preceding(_) | FrameBound::Following(_))
                };
                if !rows && (by_offset(start) || by_offset(end)) && order.len() != 1 {
                    return Err(SqlError::new(
                        4019,
                        "RANGE-type frame requires ORDER BY clause with single sort key",
                    ));
                }
                if matches!(start, FrameBound::UnboundedFollowing)
                    || matches!(end, FrameBound::UnboundedPreceding)
                {
                    return Err(SqlError::new(
                        4014,
                        "Unacceptable combination of window frame bound specifications",
                    ));
                }
                Frame { rows, start, end }
            }
        };
        Ok(Lowered {
            partition,
            order,
            frame,
        })
    }

    /// `spec` with the window it names (its base) merged in: the base's
    /// PARTITION BY, and its ORDER BY and frame where `spec` has none.
    fn with_named_window(&self, spec: ast::WindowSpec, depth: usize) -> SqlResult<ast::WindowSpec> {
        let Some(name) = &spec.window_name else {
            return Ok(spec);
        };
        if !spec.partition_by.is_empty() {
            return Err(SqlError::new(
                4011,
                format!(
                    "Window specification referencing another one '{name}' cannot contain partition list"
                ),
            ));
        }
        if depth > self.named_windows.len() {
            // Windows naming each other in a circle.
            return Err(SqlError::new(
                WRONG_WINDOW_NAME,
                format!("Window specification with name '{name}' is not defined"),
            ));
        }
        let Some((_, base)) = self
            .named_windows
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&name.value))
        else {
            return Err(SqlError::new(
                WRONG_WINDOW_NAME,
                format!("Window specification with name '{name}' is not defined"),
            ));
        };
        let base = self.with_named_window(base.clone(), depth + 1)?;
        if !spec.order_by.is_empty() && !base.order_by.is_empty() {
            return Err(SqlError::new(
                4012,
                format!("Referenced window specification '{name}' already contains order list"),
            ));
        }
        Ok(ast::WindowSpec {
            window_name: None,
            partition_by: base.partition_by,
            order_by: if spec.order_by.is_empty() {
                base.order_by
            } else {
                spec.order_by
            },
            window_frame: spec.window_frame.or(base.window_frame),
        })
    }
}

/// A window specification lowered.
struct Lowered {
    partition: Vec<Expr>,
    order: Vec<(Expr, bool)>,
    frame: Frame,
}

fn not_yet(what: &str) -> SqlError {
    SqlError::new(
        NOT_SUPPORTED_YET,
        format!("This version of Skarv doesn't yet support '{what}'"),
    )
}

/// A frame bound.
fn bound(b: &ast::WindowFrameBound) -> SqlResult<FrameBound> {
    let offset = |e: &Option<Box<ast::Expr>>| -> SqlResult<Option<u64>> {
        let Some(e) = e else {
            return Ok(None);
        };
        let n = match &**e {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => n.parse::<u64>().ok(),
                _ => None,
            },
            _ => None,
        };
        match n {
            Some(n) if n <= WINDOW_OFFSET_MAX => Ok(Some(n)),
            _ => Err(SqlError::unsupported(format_args!(
                "the frame bound {e}: only a non-negative integer"
            ))),
        }
    };
    Ok(match b {
        ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
        ast::WindowFrameBound::Preceding(e) => match offset(e)? {
            None => FrameBound::UnboundedPreceding,
            Some(n) => FrameBound::Preceding(n),
        },
        ast::WindowFrameBound::Following(e) => match offset(e)? {
            None => FrameBound::UnboundedFollowing,
            Some(n) => FrameBound::Following(n),
        },
    })
}

/// A LAG/LEAD offset or NTH_VALUE's n: an integer constant.
fn constant_int(e: &Expr, name: &str) -> SqlResult<i64> {
    match e {
        Expr::Lit(super::Val::Int(i)) => Ok(*i),
        Expr::Lit(super::Val::UInt(u)) => i64::try_from(*u)
            .ok()
            .filter(|u| u.unsigned_abs() <= WINDOW_OFFSET_MAX)
            .ok_or_else(|| SqlError::unsupported(format_args!("{name}'s offset {u}"))),
        _ => Err(SqlError::unsupported(format_args!(
            "{name}'s offset other than an integer constant"
        ))),
    }
}
