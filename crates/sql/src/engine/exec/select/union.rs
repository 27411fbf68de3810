//! A UNION's result columns. Each column's type is aggregated over the
//! SELECTs' as MariaDB aggregates it for a result (`2 UNION 2.5` a
//! DECIMAL(2,1), `1 UNION 'a'` a VARCHAR, a DATE and a DATETIME a
//! DATETIME), and each arm's values are cast to it before the rows meet,
//! so that DISTINCT, ORDER BY and the rows sent see one type. Before, the
//! first SELECT's column stood: `SELECT 2 UNION SELECT 1.5` sent 2 twice,
//! `SELECT NULL UNION SELECT 2.5` NULL twice.

use crate::engine::catalog::collation_charset;
use crate::engine::expr::eval::least_coercible;
use crate::engine::expr::{value, CastTo, Kind};
use crate::value::{charset, flags, ColumnMeta, ColumnType as T};
use schema::Collation;

/// One SELECT's column of a UNION.
pub(super) struct Arm<'a> {
    pub meta: &'a ColumnMeta,
    pub kind: Kind,
    pub nullable: bool,
    /// Its coercibility (`eval::coercibility`).
    pub coercibility: u8,
    /// A number literal's whole digits (its length has no sign when it
    /// is positive; an expression's and a column's always has), or a
    /// date field's (`expr::date_field_digits`).
    pub literal_digits: Option<u32>,
}

/// An integer or DECIMAL arm's whole digits, as MariaDB counts them
/// (its length less a sign, a point and the decimals).
fn whole_digits(a: &Arm<'_>) -> u32 {
    if let Some(digits) = a.literal_digits {
        return digits;
    }
    let signed = a.meta.flags & flags::UNSIGNED == 0;
    let length = a.meta.length.saturating_sub(u32::from(signed));
    match a.kind {
        Kind::Dec { scale } => length
            .saturating_sub(u32::from(scale))
            .saturating_sub(u32::from(scale > 0)),
        _ => length,
    }
}

/// A UNION's column: its metadata (the first SELECT's names), kind,
/// whether it may be NULL, and per SELECT the cast that brings that
/// SELECT's values to it (None: they are already of it).
pub(super) struct Column {
    pub meta: ColumnMeta,
    pub kind: Kind,
    pub nullable: bool,
    pub casts: Vec<Option<CastTo>>,
}

/// Bytes a character of a utf8mb4 string takes at most (the only
/// character set of strings but binary).
const UTF8MB4_BYTES_PER_CHAR: u32 = 4;

/// The column of a UNION whose SELECTs have these `arms` (at least one).
pub(super) fn column(arms: &[Arm<'_>]) -> Column {
    assert!(!arms.is_empty(), "a UNION column has a SELECT");
    let nullable = arms.iter().any(|a| a.nullable || a.kind == Kind::Null);
    // A NULL literal's arm takes the others' type.
    let typed: Vec<&Arm<'_>> = arms.iter().filter(|a| a.kind != Kind::Null).collect();
    let mut meta = arms[0].meta.clone();
    let kind = match typed.as_slice() {
        [] => Kind::Null,
        // Numbers' lengths are their digits and a sign (`1 UNION 2` is 2
        // long), as the rules below give them.
        [one, rest @ ..]
            if rest.iter().all(|a| same_type(a, one))
                && !matches!(one.kind, Kind::Int { .. } | Kind::Dec { .. }) =>
        {
            // The common case: one type (a table's column in every arm).
            retype(&mut meta, one.meta);
            meta.length = typed.iter().map(|a| a.meta.length).max().unwrap_or(0);
            one.kind
        }
        _ if typed.iter().all(|a| matches!(a.kind, Kind::Int { .. })) => integer(&mut meta, &typed),
        _ if typed.iter().all(|a| a.kind.is_numeric()) => {
            if typed.iter().any(|a| a.kind == Kind::Double) {
                real(&mut meta, &typed)
            } else {
                decimal(&mut meta, &typed)
            }
        }
        _ if typed.iter().all(|a| a.kind.is_temporal()) => temporal(&mut meta, &typed),
        _ => string(&mut meta, &typed),
    };
    if nullable {
        meta.flags &= !flags::NOT_NULL;
    } else {
        meta.flags |= flags::NOT_NULL;
    }
    // JSON only where every SELECT's column is.
    meta.json = typed.iter().all(|a| a.meta.json) && !typed.is_empty();
    // A text column's characters (a number's text is cut to them).
    let chars = if meta.charset == charset::BINARY {
        meta.length
    } else {
        meta.length / UTF8MB4_BYTES_PER_CHAR
    };
    // A DECIMAL column's digits (an arm's number is held to them).
    let precision = meta
        .length
        .saturating_sub(u32::from(meta.decimals > 0))
        .saturating_sub(u32::from(meta.flags & flags::UNSIGNED == 0));
    let precision = precision.clamp(1, value::DECIMAL_DIGITS_MAX) as u8;
    let casts = arms
        .iter()
        .map(|a| cast(a, kind, chars, precision))
        .collect();
    Column {
        meta,
        kind,
        nullable,
        casts,
    }
}

/// Whether two arms' columns are of one type.
fn same_type(a: &Arm<'_>, b: &Arm<'_>) -> bool {
    a.kind == b.kind
        && a.meta.ty == b.meta.ty
        && a.meta.decimals == b.meta.decimals
        && a.meta.charset == b.meta.charset
        && (a.meta.flags & flags::UNSIGNED) == (b.meta.flags & flags::UNSIGNED)
}

/// `meta` (the first SELECT's, for its names) given `of`'s type.
fn retype(meta: &mut ColumnMeta, of: &ColumnMeta) {
    meta.ty = of.ty;
    meta.charset = of.charset;
    meta.decimals = of.decimals;
    meta.flags = of.flags;
}

fn all_unsigned(typed: &[&Arm<'_>]) -> bool {
    typed.iter().all(|a| a.meta.flags & flags::UNSIGNED != 0)
}

/// A number column's flags: MariaDB's UNION result has no BINARY flag on
/// it, where a computed number's has.
fn numeric_flags(unsigned: bool) -> u16 {
    flags::NUM | if unsigned { flags::UNSIGNED } else { 0 }
}

/// Integers: the widest type, signed unless every arm is unsigned. A
/// BIGINT UNSIGNED among signed ones makes a DECIMAL(20, 0), as MariaDB
/// has it (no integer type holds both ranges).
fn integer(meta: &mut ColumnMeta, typed: &[&Arm<'_>]) -> Kind {
    let rank = |t: T| match t {
        T::Tiny => 1,
        T::Short => 2,
        T::Int24 => 3,
        T::Long => 4,
        _ => 5,
    };
    let unsigned = all_unsigned(typed);
    meta.charset = charset::BINARY;
    meta.flags = numeric_flags(unsigned);
    meta.decimals = 0;
    let big_unsigned = typed
        .iter()
        .any(|a| a.meta.flags & flags::UNSIGNED != 0 && a.meta.ty == T::LongLong);
    if !unsigned && big_unsigned {
        meta.ty = T::NewDecimal;
        // 20 digits and a sign.
        meta.length = 21;
        return Kind::Dec { scale: 0 };
    }
    let widest = typed.iter().map(|a| a.meta.ty).max_by_key(|t| rank(*t));
    meta.ty = widest.unwrap_or(T::LongLong);
    // The most digits and a sign.
    let digits = typed
        .iter()
        .map(|a| whole_digits(a))
        .max()
        .unwrap_or(20)
        .max(1);
    meta.length = digits + u32::from(!unsigned);
    if !unsigned && typed.iter().any(|a| a.meta.flags & flags::UNSIGNED != 0) {
        // An unsigned one's range needs the next wider signed type: a
        // BIGINT is wide enough for every one but BIGINT's.
        meta.ty = T::LongLong;
        meta.length = 20;
    }
    Kind::Int { unsigned }
}

/// Numbers, one a FLOAT or DOUBLE: a DOUBLE (FLOAT when every arm is one)
/// with the most decimals of its arms (an integer's 0, a DECIMAL's scale,
/// a DOUBLE(M,D) expression's D; 31, not fixed, when one is).
fn real(meta: &mut ColumnMeta, typed: &[&Arm<'_>]) -> Kind {
    meta.ty = if typed.iter().all(|a| a.meta.ty == T::Float) {
        T::Float
    } else {
        T::Double
    };
    meta.charset = charset::BINARY;
    meta.flags = numeric_flags(all_unsigned(typed));
    meta.decimals = typed
        .iter()
        .map(|a| a.meta.decimals.min(31))
        .max()
        .unwrap_or(31);
    meta.length = typed.iter().map(|a| a.meta.length).max().unwrap_or(22);
    Kind::Double
}

/// Integers and DECIMALs: a DECIMAL with the most digits before the point
/// and the most after of its arms.
fn decimal(meta: &mut ColumnMeta, typed: &[&Arm<'_>]) -> Kind {
    let unsigned = all_unsigned(typed);
    let scale = typed
        .iter()
        .filter_map(|a| match a.kind {
            Kind::Dec { scale } => Some(scale),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let int = typed
        .iter()
        .map(|a| whole_digits(a))
        .max()
        .unwrap_or(1)
        .max(1);
    let precision = (int + u32::from(scale)).min(value::DECIMAL_DIGITS_MAX);
    meta.ty = T::NewDecimal;
    meta.charset = charset::BINARY;
    meta.flags = numeric_flags(unsigned);
    meta.decimals = scale;
    meta.length = precision + u32::from(scale > 0) + u32::from(!unsigned);
    Kind::Dec { scale }
}

/// Dates and times: a DATE of DATEs, a TIME of TIMEs, else a DATETIME
/// with the most fractional digits of its arms.
fn temporal(meta: &mut ColumnMeta, typed: &[&Arm<'_>]) -> Kind {
    let fsp = typed
        .iter()
        .map(|a| match a.kind {
            Kind::DateTime { fsp } | Kind::Time { fsp } => fsp,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    meta.charset = charset::BINARY;
    meta.flags = flags::BINARY;
    meta.decimals = fsp;
    let frac = u32::from(fsp) + u32::from(fsp > 0);
    if typed.iter().all(|a| a.kind == Kind::Date) {
        meta.ty = T::Date;
        meta.length = 10;
        Kind::Date
    } else if typed.iter().all(|a| matches!(a.kind, Kind::Time { .. })) {
        meta.ty = T::Time;
        meta.length = 10 + frac;
        Kind::Time { fsp }
    } else {
        meta.ty = T::DateTime;
        meta.length = 19 + frac;
        Kind::DateTime { fsp }
    }
}

/// Anything else (a string among them, or numbers with dates): a VARCHAR
/// (a BLOB when one arm is) as long as the longest arm's text, in the
/// collation of the least coercible string arm, binary at a tie (a hex
/// literal's arm gives way to a column's text, as in MariaDB).
fn string(meta: &mut ColumnMeta, typed: &[&Arm<'_>]) -> Kind {
    let strings = typed.iter().filter_map(|a| match a.kind {
        Kind::Str { collation } => Some((a.coercibility, collation)),
        _ => None,
    });
    let collation = least_coercible(strings).unwrap_or(Some(Collation::Utf8mb4GeneralCi));
    let chars = typed
        .iter()
        .map(|a| match a.kind {
            Kind::Str { .. } if a.meta.charset != charset::BINARY => {
                a.meta.length / UTF8MB4_BYTES_PER_CHAR
            }
            _ => a.meta.length,
        })
        .max()
        .unwrap_or(0);
    let blob = typed
        .iter()
        .map(|a| a.meta.ty)
        .filter(|t| matches!(t, T::TinyBlob | T::Blob | T::MediumBlob | T::LongBlob))
        .max_by_key(|t| match t {
            T::TinyBlob => 1,
            T::Blob => 2,
            T::MediumBlob => 3,
            _ => 4,
        });
    meta.ty = blob.unwrap_or(T::VarString);
    meta.decimals = 0;
    match collation {
        None => {
            meta.charset = charset::BINARY;
            meta.flags = flags::BINARY;
            meta.length = chars;
        }
        Some(c) => {
            meta.charset = collation_charset(c);
            meta.flags = 0;
            meta.length = chars.saturating_mul(UTF8MB4_BYTES_PER_CHAR);
        }
    }
    if blob.is_some() {
        meta.flags |= flags::BLOB;
    }
    Kind::Str { collation }
}

/// The cast that brings an arm's values to a column of kind `to`.
fn cast(arm: &Arm<'_>, to: Kind, chars: u32, precision: u8) -> Option<CastTo> {
    if arm.kind == to || arm.kind == Kind::Null {
        return None;
    }
    match to {
        Kind::Int { unsigned: false } => Some(CastTo::Signed),
        Kind::Dec { scale } => match arm.kind {
            Kind::Dec { scale: s } if s == scale => None,
            _ => Some(CastTo::ClippedDecimal(precision, scale)),
        },
        Kind::Double => Some(CastTo::Double),
        Kind::DateTime { fsp } => match arm.kind {
            // A DATETIME's fraction is shown with the column's decimals.
            Kind::DateTime { .. } => None,
            _ => Some(CastTo::DateTime(fsp)),
        },
        // Text to text of another collation compares under the column's.
        Kind::Str { .. } => match arm.kind {
            Kind::Str { .. } => None,
            Kind::Double => Some(CastTo::DoubleChar),
            Kind::Int { .. } | Kind::Dec { .. } => Some(CastTo::ClippedChar(chars)),
            _ => Some(CastTo::Char),
        },
        Kind::Int { unsigned: true } | Kind::Null | Kind::Date | Kind::Time { .. } => None,
    }
}
