//! Values between storage and SQL: `schema::Value` ↔ [`Val`] per the
//! column's [`SqlType`], with MySQL's strict-mode checks on the way in, and
//! [`Val`] → [`SqlValue`] for result rows per the column's metadata.

use schema::{Collation, Value, ValueRef};

use crate::engine::catalog::{SqlColumn, SqlType};
use crate::engine::expr::value::{
    self, datetime_micros, datetime_of_micros, parse_time, str_number_prefix, Dec,
};
use crate::engine::expr::{Ctx, Kind, Val};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{flags, ColumnMeta, ColumnType, Date, SqlValue, Time};

/// The kind of a column's values.
pub fn column_kind(ty: &SqlType) -> Kind {
    match ty {
        SqlType::TinyInt { unsigned }
        | SqlType::SmallInt { unsigned }
        | SqlType::MediumInt { unsigned }
        | SqlType::Int { unsigned }
        | SqlType::BigInt { unsigned } => Kind::Int {
            unsigned: *unsigned,
        },
        SqlType::Year => Kind::Int { unsigned: true },
        SqlType::Bit { .. } => Kind::Int { unsigned: true },
        SqlType::Float { .. } | SqlType::Double { .. } => Kind::Double,
        SqlType::Decimal { scale, .. } => Kind::Dec { scale: *scale },
        SqlType::Char { collation, .. }
        | SqlType::VarChar { collation, .. }
        | SqlType::Text { collation, .. } => Kind::Str {
            collation: Some(*collation),
        },
        SqlType::Enum(_) | SqlType::Set(_) => Kind::Str {
            collation: Some(Collation::Utf8mb4GeneralCi),
        },
        SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Blob { .. } => {
            Kind::Str { collation: None }
        }
        SqlType::Date => Kind::Date,
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => Kind::DateTime { fsp: *fsp },
        SqlType::Time { fsp } => Kind::Time { fsp: *fsp },
    }
}

/// [`from_native`] of a value the caller owns: a string or bytes move
/// into the SQL value rather than being copied.
pub fn from_native_owned(v: Value, ty: &SqlType, tz_secs: i64) -> Val {
    match v {
        Value::String(s) => Val::Str(s.into_bytes()),
        Value::Bytes(b) => Val::Str(b),
        v => from_native(&v, ty, tz_secs),
    }
}

/// A stored value as SQL sees it; `tz_secs`: the session's time zone
/// (seconds east of UTC), in which a TIMESTAMP (stored as UTC) is shown.
pub fn from_native(v: &Value, ty: &SqlType, tz_secs: i64) -> Val {
    from_native_ref(v.as_ref(), ty, tz_secs)
}

/// [`from_native`] of a borrowed value: what a row still in its reply's
/// bytes gives (`skarv_client::Row::each_value`), converted without a
/// native copy between (a string is copied once, into the SQL value).
pub fn from_native_ref(v: ValueRef<'_>, ty: &SqlType, tz_secs: i64) -> Val {
    match (v, ty) {
        (ValueRef::Null, _) => Val::Null,
        (ValueRef::Int(m), SqlType::Time { .. }) => Val::Time(m),
        (ValueRef::UInt(i) | ValueRef::Bit(i), SqlType::Enum(members)) => {
            match usize::try_from(i).ok().and_then(|i| i.checked_sub(1)) {
                Some(at) => Val::str(members.get(at).cloned().unwrap_or_default()),
                None => Val::str(""),
            }
        }
        (ValueRef::UInt(bits), SqlType::Set(members)) => {
            let names: Vec<&str> = members
                .iter()
                .enumerate()
                .filter(|(i, _)| *i < 64 && bits & (1 << i) != 0)
                .map(|(_, m)| m.as_str())
                .collect();
            Val::str(names.join(","))
        }
        (ValueRef::Int(i), _) => Val::Int(i),
        (ValueRef::UInt(u), _) => Val::UInt(u),
        (ValueRef::Float(f), _) => Val::Double(f64::from(f)),
        (ValueRef::Double(f), _) => Val::Double(f),
        // The column's scale, as MySQL shows a DECIMAL column's values.
        (ValueRef::Decimal(d), SqlType::Decimal { scale, .. }) => match d.to_scaled(*scale) {
            // The common case: the mantissa as it is, no text between.
            Some(m) => Val::Dec(Dec::new(m, *scale)),
            None => Dec::parse(&d.to_string())
                .map_or(Val::Null, |x| Val::Dec(x.rescale(*scale).unwrap_or(x))),
        },
        (ValueRef::Decimal(d), _) => Dec::parse(&d.to_string()).map_or(Val::Null, Val::Dec),
        (ValueRef::Str(s), _) => Val::Str(s.as_bytes().to_vec()),
        (ValueRef::Bytes(b), _) => Val::Str(b.to_vec()),
        (ValueRef::Date(d), _) => Val::Date(Date {
            year: d.year,
            month: d.month,
            day: d.day,
        }),
        (ValueRef::DateTime(dt), _) => Val::DateTime(
            Date {
                year: dt.date.year,
                month: dt.date.month,
                day: dt.date.day,
            },
            Time {
                hour: dt.hour,
                minute: dt.minute,
                second: dt.second,
                micros: dt.micros,
            },
        ),
        // The zero timestamp (see `to_native`).
        (ValueRef::Timestamp(0), _) => Val::DateTime(Date::default(), Time::default()),
        (ValueRef::Timestamp(m), _) => {
            match datetime_of_micros(m.saturating_add(tz_secs * 1_000_000)) {
                Some((d, t)) => Val::DateTime(d, t),
                None => Val::Null,
            }
        }
        (ValueRef::Bit(b), _) => Val::UInt(b),
        (ValueRef::BlobHead { inline, .. }, _) => Val::Str(inline.to_vec()),
    }
}

/// Where a value goes, for the messages of the strict checks.
pub struct Target<'a> {
    /// The column.
    pub column: &'a SqlColumn,
    /// Database and table, for 1366's message.
    pub db: &'a str,
    /// The table.
    pub table: &'a str,
    /// 1-based row of the statement.
    pub row: usize,
    /// The session's time zone, seconds east of UTC: a TIMESTAMP value
    /// is read in it and stored as UTC.
    pub tz_secs: i64,
}

/// Why a value does not go into its column.
enum Misfit {
    OutOfRange,
    /// A string with a number and then more (`'12abc'`): 1265.
    Truncated,
    TooLong,
    Bad(&'static str),
    /// Bytes that are not UTF-8 within what a text column keeps: 1366.
    BadString,
}

impl Target<'_> {
    /// 1265's message for this column and row.
    pub(crate) fn truncated(&self) -> String {
        format!(
            "Data truncated for column '{}' at row {}",
            self.column.name, self.row
        )
    }

    /// 1264's message for this column and row.
    fn out_of_range(&self) -> String {
        format!(
            "Out of range value for column '{}' at row {}",
            self.column.name, self.row
        )
    }

    fn error(&self, misfit: Misfit, v: &Val) -> SqlError {
        let name = &self.column.name;
        match misfit {
            Misfit::OutOfRange => SqlError::new(codes::OUT_OF_RANGE, self.out_of_range()),
            Misfit::Truncated => SqlError::new(codes::WARN_DATA_TRUNCATED, self.truncated()),
            Misfit::TooLong => SqlError::new(
                codes::DATA_TOO_LONG,
                format!("Data too long for column '{name}' at row {}", self.row),
            ),
            Misfit::Bad(what) if what == "date" || what == "datetime" || what == "time" => {
                SqlError::new(
                    codes::TRUNCATED_WRONG_VALUE,
                    format!(
                        "Incorrect {what} value: '{}' for column `{}`.`{}`.`{name}` at row {}",
                        v.to_text(),
                        self.db,
                        self.table,
                        self.row
                    ),
                )
            }
            Misfit::Bad("enum") => SqlError::new(codes::WARN_DATA_TRUNCATED, self.truncated()),
            Misfit::BadString => SqlError::new(
                codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
                format!(
                    "Incorrect string value: '{}' for column `{}`.`{}`.`{name}` at row {}",
                    bad_bytes_shown(v),
                    self.db,
                    self.table,
                    self.row
                ),
            ),
            Misfit::Bad(what) => SqlError::new(
                codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
                format!(
                    "Incorrect {what} value: '{}' for column `{}`.`{}`.`{name}` at row {}",
                    v.to_text(),
                    self.db,
                    self.table,
                    self.row
                ),
            ),
        }
    }
}

fn int_range(ty: &SqlType) -> Option<(i128, i128)> {
    let (bits, unsigned) = match ty {
        SqlType::TinyInt { unsigned } => (8, *unsigned),
        SqlType::SmallInt { unsigned } => (16, *unsigned),
        SqlType::MediumInt { unsigned } => (24, *unsigned),
        SqlType::Int { unsigned } => (32, *unsigned),
        SqlType::BigInt { unsigned } => (64, *unsigned),
        _ => return None,
    };
    Some(if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    })
}

/// A value as an integer, rounded as MySQL rounds; `exact` refuses any
/// rounding. None: not a number.
/// The number an ENUM or SET stores of `v`: a fraction cut toward zero
/// (MariaDB's `Field_enum::store(double)`), else [`integer_of`].
fn member_number_of(v: &Val, exact: bool) -> Option<i128> {
    let cut = match v {
        Val::Dec(d) => Some(Val::Double(d.to_f64().trunc())),
        Val::Double(f) => Some(Val::Double(f.trunc())),
        _ => None,
    };
    integer_of(cut.as_ref().unwrap_or(v), exact)
}

/// Doubles from here on are past every integer type, whatever side
/// (2^65: well beyond BIGINT UNSIGNED, well within an i128).
const INTEGER_DOUBLE_LIMIT: f64 = 36_893_488_147_419_103_232.0;

fn integer_of(v: &Val, exact: bool) -> Option<i128> {
    match v {
        Val::Int(i) => Some(i128::from(*i)),
        Val::UInt(u) => Some(i128::from(*u)),
        Val::Dec(d) => {
            let r = d.rescale(0)?;
            if exact && d.rescale(d.scale)?.mantissa != r.rescale(d.scale)?.mantissa {
                return None;
            }
            Some(value::saturating_i128(r.mantissa))
        }
        Val::Double(f) => {
            if exact && f.fract() != 0.0 {
                return None;
            }
            // Exactly below 2^64 (a BIGINT UNSIGNED holds
            // 1.8446744073709550e19); past any integer type, the end of
            // its side.
            if f.is_finite() && f.abs() < INTEGER_DOUBLE_LIMIT {
                Some(f.round() as i128)
            } else {
                Some(if *f < 0.0 { i128::MIN } else { i128::MAX })
            }
        }
        Val::Str(b) => {
            let text = std::str::from_utf8(b).ok()?;
            let (prefix, whole) = str_number_prefix(text);
            if !whole {
                return None;
            }
            if let Ok(i) = prefix.parse::<i128>() {
                return Some(i);
            }
            // Past a decimal's digits ('1e400'), as the double it starts
            // with (its limit past a double's range): out of range.
            Dec::parse(prefix)
                .and_then(|d| integer_of(&Val::Dec(d), exact))
                .or_else(|| integer_of(&Val::Double(value::prefix_double(prefix).0), exact))
        }
        other => Some(other.temporal_number().round_i128()),
    }
}

/// Most bytes 1366's message shows of a string that is not UTF-8, from
/// its first bad byte ("..." when there are more), as MariaDB's.
const BAD_STRING_SHOWN_BYTES_MAX: usize = 6;

/// The bytes of `v` from its first that is not UTF-8, as 1366 shows them.
fn bad_bytes_shown(v: &Val) -> String {
    let Val::Str(bytes) = v else {
        return String::new();
    };
    let at = std::str::from_utf8(bytes)
        .err()
        .map_or(0, |e| e.valid_up_to());
    let mut shown = String::new();
    for &b in bytes[at..].iter().take(BAD_STRING_SHOWN_BYTES_MAX) {
        value::push_shown_byte(&mut shown, b);
    }
    if bytes.len() - at > BAD_STRING_SHOWN_BYTES_MAX {
        shown.push_str("...");
    }
    shown
}

/// A value bound for a text column that keeps `kept` characters (bytes,
/// `in_bytes`: a TEXT), as that text: bytes that are not UTF-8 are '?'
/// (MariaDB's `well_formed_copy_nchars`). If one falls within what the
/// column keeps, the value is not text (1366); past it, the copy stopped
/// before it and the value is only too long. Valid text is checked once.
fn checked_text(v: &Val, kept: usize, in_bytes: bool) -> Result<String, Misfit> {
    let Val::Str(bytes) = v else {
        return Ok(v.to_text());
    };
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(text.to_owned());
    }
    let Some((text, at)) = value::utf8_replaced(bytes) else {
        return Ok(v.to_text());
    };
    let before = if in_bytes {
        at
    } else {
        text[..at].chars().count()
    };
    if before < kept {
        return Err(Misfit::BadString);
    }
    Ok(text)
}

/// `v` as text, a byte that is not UTF-8 as '?'.
fn text_replaced(v: &Val) -> String {
    match v {
        Val::Str(bytes) => value::utf8_replaced(bytes).map_or_else(|| v.to_text(), |(t, _)| t),
        other => other.to_text(),
    }
}

/// Why a value that is not a number does not go into a numeric column: a
/// string that starts with one is truncated (1265), anything else is not
/// a number of that kind (1366).
fn not_a_number(v: &Val, kind: &'static str) -> Misfit {
    match v {
        Val::Str(b) if !str_number_prefix(&String::from_utf8_lossy(b)).0.is_empty() => {
            Misfit::Truncated
        }
        _ => Misfit::Bad(kind),
    }
}

/// A SQL value as the stored value of `target`'s column, with MySQL's
/// strict-mode checks (1048, 1264, 1406, 1366, 1292). `exact`: refuse
/// anything that would be rounded or converted loosely (for key lookups
/// and pushed filters, which must mean what the SQL comparison means);
/// the error then only says it does not fit.
pub fn to_native(v: &Val, target: &Target<'_>, exact: bool) -> SqlResult<Value> {
    let col = target.column;
    if v.is_null() {
        if !col.nullable && !exact {
            return Err(SqlError::new(
                codes::BAD_NULL,
                format!("Column '{}' cannot be null", col.name),
            ));
        }
        return Ok(Value::Null);
    }
    let fail = |m: Misfit| Err(target.error(m, v));
    Ok(match &col.ty {
        ty @ (SqlType::TinyInt { unsigned }
        | SqlType::SmallInt { unsigned }
        | SqlType::MediumInt { unsigned }
        | SqlType::Int { unsigned }
        | SqlType::BigInt { unsigned }) => {
            // A double rounds half to even, as MariaDB's `rint` (16.5e0
            // is 16, 17.5e0 18; a decimal or a string's 16.5 is 17).
            let even = match v {
                Val::Double(f) if !exact => Some(Val::Double(f.round_ties_even())),
                _ => None,
            };
            let Some(i) = integer_of(even.as_ref().unwrap_or(v), exact) else {
                return fail(not_a_number(v, "integer"));
            };
            let (lo, hi) = int_range(ty).unwrap_or((i128::MIN, i128::MAX));
            // A negative DECIMAL is out of an UNSIGNED's range though it
            // rounds to 0 (-0.2), as MariaDB's (a double or a string of
            // one is 0).
            let negative_decimal = matches!(v, Val::Dec(d) if d.mantissa < 0i128);
            // A double of 2^63 is BIGINT's end, not past it: MariaDB's
            // `Field_longlong::store(double)` compares with LONGLONG_MAX
            // made a double, which is 2^63.
            let i = match (ty, v) {
                (SqlType::BigInt { unsigned: false }, Val::Double(f))
                    if *f == 2f64.powi(63) && !exact =>
                {
                    hi
                }
                _ => i,
            };
            if i < lo || i > hi || (*unsigned && negative_decimal) {
                return fail(Misfit::OutOfRange);
            }
            if *unsigned {
                Value::UInt(i as u64)
            } else {
                Value::Int(i as i64)
            }
        }
        SqlType::Year => {
            // A double's fraction is cut, as MariaDB's `Field_year` casts
            // it (2001.5e0 is 2001).
            let cut = match v {
                Val::Double(f) if !exact => Some(Val::Double(f.trunc())),
                _ => None,
            };
            let Some(i) = integer_of(cut.as_ref().unwrap_or(v), exact) else {
                return fail(not_a_number(v, "integer"));
            };
            let Some(y) = year_of(i, matches!(v, Val::Str(_))) else {
                return fail(Misfit::OutOfRange);
            };
            Value::UInt(y as u64)
        }
        SqlType::Bit { bits } => {
            let n = match v {
                Val::Str(b) if b.len() <= 8 => {
                    b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
                }
                Val::Str(_) => return fail(Misfit::TooLong),
                // A double's fraction is cut (3.5e0 is 3), as MariaDB's.
                Val::Double(f) if !exact => match integer_of(&Val::Double(f.trunc()), false) {
                    Some(i) if i >= 0 && i <= i128::from(u64::MAX) => i as u64,
                    _ => return fail(Misfit::TooLong),
                },
                other => match integer_of(other, exact) {
                    Some(i) if i >= 0 && i <= i128::from(u64::MAX) => i as u64,
                    // A negative DECIMAL is out of range (0 outside strict
                    // mode): MariaDB reads it as an unsigned integer first.
                    Some(i) if i < 0 && matches!(other, Val::Dec(_)) => {
                        return fail(Misfit::OutOfRange)
                    }
                    // MariaDB's error for a BIT is "too long" (its warning,
                    // outside strict mode, "out of range").
                    _ => return fail(Misfit::TooLong),
                },
            };
            if *bits < 64 && n >> bits != 0 {
                return fail(Misfit::TooLong);
            }
            Value::Bit(n)
        }
        SqlType::Float { digits, unsigned } | SqlType::Double { digits, unsigned } => {
            let f = match v {
                Val::Str(b) => {
                    let text = String::from_utf8_lossy(b);
                    let (prefix, whole) = str_number_prefix(&text);
                    if !whole {
                        return fail(not_a_number(v, "double"));
                    }
                    // Past a double ('1e400'): out of range, as MariaDB's.
                    match value::prefix_double(prefix) {
                        (_, true) => return fail(Misfit::OutOfRange),
                        (f, false) => f,
                    }
                }
                Val::Date(_) | Val::DateTime(..) | Val::Time(_) => v.temporal_number().to_f64(),
                other => other.to_f64().0,
            };
            // UNSIGNED: any negative value is out of range, before any
            // rounding (MariaDB refuses -0.001 in DOUBLE(6,2) UNSIGNED);
            // -0 is stored as 0.
            if *unsigned && f < 0.0 {
                return fail(Misfit::OutOfRange);
            }
            let f = if f == 0.0 { 0.0 } else { f };
            // FLOAT(M,D)/DOUBLE(M,D): rounded to D decimals, then at most
            // M − D integer digits (MariaDB's `Field_real::truncate`); an
            // exact conversion (a key or a pushed filter) refuses a value
            // the rounding would change, as DECIMAL's does.
            let f = match digits {
                Some(digits) => {
                    let rounded = digits.round(f);
                    if rounded.abs() > digits.max() || exact && rounded != f {
                        return fail(Misfit::OutOfRange);
                    }
                    rounded
                }
                None => f,
            };
            if matches!(col.ty, SqlType::Float { .. }) {
                if f.abs() > f64::from(f32::MAX) {
                    return fail(Misfit::OutOfRange);
                }
                Value::Float(f as f32)
            } else {
                Value::Double(f)
            }
        }
        SqlType::Decimal {
            precision,
            scale,
            unsigned,
        } => {
            let d = match v {
                Val::Dec(d) => Some(*d),
                Val::Int(i) => Some(Dec::new(i128::from(*i), 0)),
                Val::UInt(u) => Some(Dec::new(i128::from(*u), 0)),
                // A number past any DECIMAL (1e300) is out of range, not
                // "no number": MariaDB clamps it in non-strict mode.
                Val::Double(f) => match Dec::of_double(*f) {
                    None if f.is_finite() => return fail(Misfit::OutOfRange),
                    d => d,
                },
                Val::Str(b) => {
                    let text = String::from_utf8_lossy(b);
                    let (prefix, whole) = str_number_prefix(&text);
                    if !whole {
                        return fail(not_a_number(v, "decimal"));
                    }
                    match Dec::parse(prefix) {
                        Some(d) => Some(d),
                        // Past a decimal's digits, or a double's range
                        // ('1e400'): out of range, as MariaDB's.
                        None => match prefix.parse::<f64>().ok().map(|f| (f, Dec::of_double(f))) {
                            Some((_, None)) => return fail(Misfit::OutOfRange),
                            parsed => parsed.and_then(|(_, d)| d),
                        },
                    }
                }
                other => Some(other.temporal_number()),
            };
            let Some(d) = d else {
                return fail(not_a_number(v, "decimal"));
            };
            // UNSIGNED: negative is out of range before rounding, as in
            // MariaDB.
            if *unsigned && d.mantissa < 0 {
                return fail(Misfit::OutOfRange);
            }
            let Some(r) = d.rescale(*scale) else {
                return fail(Misfit::OutOfRange);
            };
            if exact && r.cmp_dec(d).is_ne() {
                return fail(Misfit::OutOfRange);
            }
            // M − D digits before the point: none in DECIMAL(M,M), which
            // holds ±0.999… (its whole part, not the value rounded to a
            // whole number, must be 0).
            if r.whole_digits() > u32::from(precision.saturating_sub(*scale)) {
                return fail(Misfit::OutOfRange);
            }
            // From the mantissa when it fits an i128, else from the text.
            let stored = i128::try_from(r.mantissa)
                .ok()
                .and_then(|m| schema::Decimal::from_scaled(m, r.scale))
                .or_else(|| schema::Decimal::parse(&r.to_text()).ok());
            match stored {
                Some(d) => Value::Decimal(d),
                None => return fail(Misfit::OutOfRange),
            }
        }
        SqlType::Char { length: max, .. } | SqlType::VarChar { max, .. } => {
            // A key or pushed filter's value compares as it is.
            let mut text = if exact {
                v.to_text()
            } else {
                match checked_text(v, usize::from(*max), false) {
                    Ok(text) => text,
                    Err(misfit) => return fail(misfit),
                }
            };
            if text.chars().count() > usize::from(*max) {
                // A DOUBLE is written in the column's length, its digits
                // rounded, as MariaDB stores one (`80/3` into a
                // VARCHAR(8) is '26.66667'); too long only if even that
                // does not fit.
                let Val::Double(x) = v else {
                    return fail(Misfit::TooLong);
                };
                match crate::protocol::text::double_within(*x, usize::from(*max)) {
                    (within, false) => text = within,
                    (_, true) => return fail(Misfit::TooLong),
                }
            }
            // A CHAR holds no trailing spaces (MySQL pads it and strips
            // them when read): stored without them, an UPDATE that only
            // adds some changes nothing, as MariaDB counts it.
            if matches!(col.ty, SqlType::Char { .. }) {
                text.truncate(text.trim_end_matches(' ').len());
            }
            Value::String(text)
        }
        SqlType::Text { size, .. } => {
            let text = if exact {
                v.to_text()
            } else {
                match checked_text(v, blob_bytes(*size), true) {
                    Ok(text) => text,
                    Err(misfit) => return fail(misfit),
                }
            };
            if text.len() > blob_bytes(*size) {
                return fail(Misfit::TooLong);
            }
            Value::String(text)
        }
        SqlType::Binary { length: max } | SqlType::VarBinary { max } => {
            let bytes = bytes_of(v);
            if bytes.len() > usize::from(*max) {
                return fail(Misfit::TooLong);
            }
            Value::Bytes(bytes)
        }
        SqlType::Blob { size } => {
            let bytes = bytes_of(v);
            if bytes.len() > blob_bytes(*size) {
                return fail(Misfit::TooLong);
            }
            Value::Bytes(bytes)
        }
        // Text past the date and time (`'2024-01-05x'`) is no date for a
        // column, as MariaDB's (outside strict mode it is stored, 1265).
        SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }
            if !exact && trailing_text(v) =>
        {
            let what = if matches!(col.ty, SqlType::Date) {
                "date"
            } else {
                "datetime"
            };
            return fail(Misfit::Bad(what));
        }
        SqlType::Date => match date_time_of(v) {
            Some((d, t)) if !exact || t == Time::default() => {
                Value::Date(schema::Date::new(d.year, d.month, d.day))
            }
            _ => return fail(Misfit::Bad("date")),
        },
        SqlType::DateTime { fsp } => match date_time_of(v) {
            Some((d, t)) => {
                let t = round_fsp(t, *fsp);
                Value::DateTime(schema::DateTime::new(
                    schema::Date::new(d.year, d.month, d.day),
                    t.hour,
                    t.minute,
                    t.second,
                    t.micros,
                ))
            }
            None => return fail(Misfit::Bad("datetime")),
        },
        // MySQL's TIMESTAMP: 1970-01-01 00:00:01 to 2038-01-19 03:14:07
        // UTC, and the zero timestamp, stored as 0 (the one value of the
        // range's first second it cannot hold otherwise). Outside the
        // range, or a date with a zero part, it is no datetime (1292).
        SqlType::Timestamp { fsp } => match date_time_of(v) {
            Some((d, t)) if d == Date::default() && t == Time::default() => Value::Timestamp(0),
            Some((d, t)) if d.month != 0 && d.day != 0 => {
                let m = datetime_micros(d, round_fsp(t, *fsp)) - target.tz_secs * 1_000_000;
                let seconds = m.div_euclid(schema::value::MICROS_PER_SECOND);
                if !(1..=schema::types::TIMESTAMP_SECONDS_MAX).contains(&seconds) {
                    return fail(Misfit::Bad("datetime"));
                }
                Value::Timestamp(m)
            }
            _ => return fail(Misfit::Bad("datetime")),
        },
        SqlType::Time { fsp } => {
            let m = match (v, datetime_number(v)) {
                (Val::Time(m), _) => Some(*m),
                (Val::DateTime(_, t), _) => {
                    Some(crate::engine::expr::value::time_of_day_micros(*t))
                }
                // Eight digits or more: a date and time's number, its time
                // of day taken, as MariaDB's `Field_time::store` reads it
                // (a zero month or day allowed: `20240100123456`).
                (_, Some(n)) => value::time_of_datetime_number(n)
                    .map(crate::engine::expr::value::time_of_day_micros),
                (Val::Int(i), None) => parse_time(&i.to_string()),
                (other, None) => parse_time(&other.to_text()),
            };
            let Some(m) = m else {
                return fail(Misfit::Bad("time"));
            };
            let unit = 10i64.pow(6 - u32::from((*fsp).min(6)));
            let m = m / unit * unit;
            // MySQL's TIME range: ±838:59:59 (past it, 1292 as MariaDB's).
            if m.unsigned_abs() > TIME_MICROS_MAX {
                return fail(Misfit::Bad("time"));
            }
            Value::Int(m)
        }
        SqlType::Enum(members) => {
            let text = v.to_text();
            let index = match v {
                // 0 is the error value '', no member (1265 as MariaDB's);
                // a number with a fraction is cut toward zero (MariaDB
                // stores a decimal through a double made a `longlong`).
                Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_) => {
                    member_number_of(v, exact)
                        .filter(|i| *i >= 1 && *i <= members.len() as i128)
                        .map(|i| i as u64)
                }
                _ => member_at(members, &text).map(|i| i as u64 + 1),
            };
            match index {
                Some(i) => Value::UInt(i),
                None => return fail(Misfit::Bad("enum")),
            }
        }
        SqlType::Set(members) => {
            // A number is the members' bits.
            if let Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_) = v {
                let all = set_bits(members.len());
                return match member_number_of(v, exact) {
                    Some(i) if i >= 0 && i <= i128::from(all) => Ok(Value::UInt(i as u64)),
                    _ => fail(Misfit::Bad("enum")),
                };
            }
            let text = v.to_text();
            let mut bits = 0u64;
            for part in text.split(',').filter(|p| !p.is_empty()) {
                match member_at(members, part) {
                    Some(i) if i < 64 => bits |= 1 << i,
                    _ => return fail(Misfit::Bad("enum")),
                }
            }
            Value::UInt(bits)
        }
    })
}

/// A positive number of eight whole digits or more, which a TIME column
/// reads as a date and time (`20240101123456` is 12:34:56; a DOUBLE's or
/// a DECIMAL's whole part), as MariaDB's does.
fn datetime_number(v: &Val) -> Option<u64> {
    let n = match v {
        Val::Int(i) => u64::try_from(*i).ok()?,
        Val::UInt(u) => *u,
        // Below 2^64, so the cast keeps the whole part.
        Val::Double(f) if (0.0..1.8e19).contains(f) => *f as u64,
        Val::Dec(d) => u64::try_from(d.mantissa / value::pow10(d.scale)).ok()?,
        _ => return None,
    };
    (TIME_DATETIME_NUMBER_MIN..TIME_DATETIME_NUMBER_END)
        .contains(&n)
        .then_some(n)
}

/// The least number a TIME column reads as a date and time.
const TIME_DATETIME_NUMBER_MIN: u64 = 10_000_000;
/// The number from which a TIME column reads hhh…mmss again (MariaDB's
/// `number_to_time`: past 9999-12-31 23:59:59 as a number).
const TIME_DATETIME_NUMBER_END: u64 = 99_991_231_235_960;

/// An integer read as hours, minutes and seconds (`hhh…mmss`) in
/// microseconds, clamped to ±838:59:59 however many hours it has
/// (`100000000000000000` is 838:59:59); None when its minutes or seconds
/// are 60 or more, as MariaDB's `number_to_time` reads it.
fn integer_time_clamped(v: &Val) -> Option<i64> {
    let (negative, n) = match v {
        Val::Int(i) => (*i < 0, u128::from(i.unsigned_abs())),
        Val::UInt(u) => (false, u128::from(*u)),
        _ => return None,
    };
    let (seconds, minutes, hours) = (n % 100, n / 100 % 100, n / 10_000);
    if seconds >= 60 || minutes >= 60 {
        return None;
    }
    let max = u128::from(TIME_MICROS_MAX / 1_000_000 * 1_000_000);
    let micros = ((hours * 3_600 + minutes * 60 + seconds) * 1_000_000).min(max);
    let micros = i64::try_from(micros).expect("at most 838:59:59 in microseconds");
    Some(if negative { -micros } else { micros })
}

/// The largest TIME, 838:59:59.999999, in microseconds.
const TIME_MICROS_MAX: u64 = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999;

/// The bits of a SET of `members` members.
fn set_bits(members: usize) -> u64 {
    if members >= 64 {
        u64::MAX
    } else {
        (1u64 << members) - 1
    }
}

/// Outside strict mode and under IGNORE, what MariaDB stores for a value
/// of a BIT, ENUM, SET, TIME, YEAR or TIMESTAMP column that does not fit,
/// and its warning: the BIT's ones (1264; 0 for a negative DECIMAL), the
/// ENUM's '' (1265), the SET's members that are (1265), the TIME's limit
/// (1264) or midnight (1265),
/// the YEAR of the leading number (1265) or 0000 (1264, 1366), the zero
/// TIMESTAMP (1264 past the range, 1265 for no datetime). None for the
/// other types, and for errors these do not adjust.
fn adjusted_special(
    v: &Val,
    target: &Target<'_>,
    error: &SqlError,
) -> Option<(Value, u16, String)> {
    let out_of_range = || target.out_of_range();
    let truncated = || target.truncated();
    Some(match &target.column.ty {
        SqlType::Bit { bits } if error.code == codes::DATA_TOO_LONG => {
            let ones = if *bits >= 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            (Value::Bit(ones), codes::OUT_OF_RANGE, out_of_range())
        }
        SqlType::Bit { .. } if error.code == codes::OUT_OF_RANGE => {
            (Value::Bit(0), codes::OUT_OF_RANGE, out_of_range())
        }
        SqlType::Enum(_) if error.code == codes::WARN_DATA_TRUNCATED => {
            (Value::UInt(0), codes::WARN_DATA_TRUNCATED, truncated())
        }
        SqlType::Set(members) if error.code == codes::WARN_DATA_TRUNCATED => {
            let bits = match v {
                Val::Int(_) | Val::UInt(_) => {
                    integer_of(v, false).map_or(0, |i| (i as u64) & set_bits(members.len()))
                }
                // A number with a fraction is cut to its integer (9.5 is
                // 9, -1.00 every member), as MariaDB's SET stores it.
                Val::Dec(d) => {
                    let whole = value::saturating_i128(d.mantissa / value::pow10(d.scale));
                    (whole as i64 as u64) & set_bits(members.len())
                }
                Val::Double(f) => (f.trunc() as i64 as u64) & set_bits(members.len()),
                _ => {
                    let text = v.to_text();
                    text.split(',')
                        .fold(0u64, |bits, part| match member_at(members, part) {
                            Some(i) if i < 64 => bits | 1 << i,
                            _ => bits,
                        })
                }
            };
            (Value::UInt(bits), codes::WARN_DATA_TRUNCATED, truncated())
        }
        SqlType::Time { .. } if error.code == codes::TRUNCATED_WRONG_VALUE => {
            let parsed = match v {
                // A number read as a date and time that is none: midnight.
                _ if datetime_number(v).is_some() => None,
                Val::Int(_) | Val::UInt(_) => integer_time_clamped(v),
                other => parse_time(&other.to_text()),
            };
            match parsed {
                Some(m) => {
                    let max = TIME_MICROS_MAX as i64 / 1_000_000 * 1_000_000;
                    (
                        Value::Int(m.clamp(-max, max)),
                        codes::OUT_OF_RANGE,
                        out_of_range(),
                    )
                }
                None => (Value::Int(0), codes::WARN_DATA_TRUNCATED, truncated()),
            }
        }
        SqlType::Year if error.code == codes::OUT_OF_RANGE => {
            (Value::UInt(0), codes::OUT_OF_RANGE, out_of_range())
        }
        SqlType::Year if error.code == codes::TRUNCATED_WRONG_VALUE_FOR_FIELD => {
            (Value::UInt(0), error.code, error.message.clone())
        }
        SqlType::Year if error.code == codes::WARN_DATA_TRUNCATED => {
            // `'12x'`: the year of its leading number.
            let text = v.to_text();
            let (prefix, _) = str_number_prefix(&text);
            let lead = Val::str(prefix);
            let value = to_native(&lead, target, false).unwrap_or(Value::UInt(0));
            (value, codes::WARN_DATA_TRUNCATED, truncated())
        }
        SqlType::Timestamp { .. } if error.code == codes::TRUNCATED_WRONG_VALUE => {
            let parsed = date_time_of(v);
            let real_day = parsed.is_some_and(|(d, _)| d.month != 0 && d.day != 0);
            match parsed {
                // A datetime with text after it: the datetime, as a
                // DATETIME's, when the range holds it.
                Some((d, t)) if trailing_text(v) => {
                    match to_native(&Val::DateTime(d, t), target, false) {
                        Ok(value) => (value, codes::WARN_DATA_TRUNCATED, truncated()),
                        Err(_) if real_day => {
                            (Value::Timestamp(0), codes::OUT_OF_RANGE, out_of_range())
                        }
                        Err(_) => (Value::Timestamp(0), codes::WARN_DATA_TRUNCATED, truncated()),
                    }
                }
                _ if real_day => (Value::Timestamp(0), codes::OUT_OF_RANGE, out_of_range()),
                _ => (Value::Timestamp(0), codes::WARN_DATA_TRUNCATED, truncated()),
            }
        }
        _ => return None,
    })
}

/// [`to_native_in_mode`] for a write, with MySQL's note 1265 of a value
/// rounded to a DECIMAL's scale (not of one the conversion warned of:
/// clipped, or no number).
pub fn store(v: &Val, target: &Target<'_>, ctx: &mut Ctx<'_>) -> SqlResult<Value> {
    let warned = ctx.warnings.len();
    let stored = to_native_in_mode(v, target, ctx)?;
    if ctx.warnings.len() == warned && rounded(v, &target.column.ty) {
        ctx.note(codes::WARN_DATA_TRUNCATED, target.truncated());
    }
    Ok(stored)
}

/// MySQL's year of a number given to a YEAR: 1-69 are 2001-2069, 70-99
/// 1970-1999, 1901-2155 themselves, 0 the zero year (2000 for the text
/// `'0'`: `zero_text`); None for any other.
pub(crate) fn year_of(i: i128, zero_text: bool) -> Option<i128> {
    match i {
        0 if zero_text => Some(2000),
        0 => Some(0),
        1..=69 => Some(2000 + i),
        70..=99 => Some(1900 + i),
        1901..=2155 => Some(i),
        _ => None,
    }
}

/// The place of the SET or ENUM member that `part` names (general_ci).
fn member_at(members: &[String], part: &str) -> Option<usize> {
    members
        .iter()
        .position(|m| Collation::Utf8mb4GeneralCi.compare(m, part).is_eq())
}

/// Whether storing `v` in a DECIMAL column of `ty` drops nonzero digits
/// past its scale (MySQL's note 1265 of an INSERT or an ALTER's copy).
pub fn rounded(v: &Val, ty: &SqlType) -> bool {
    let SqlType::Decimal { scale, .. } = ty else {
        return false;
    };
    let exact = match v {
        Val::Dec(d) => Some(*d),
        Val::Str(b) => {
            let text = String::from_utf8_lossy(b);
            Dec::parse(&text).or_else(|| Dec::of_double(text.trim().parse().ok()?))
        }
        Val::Double(f) => Dec::of_double(*f),
        _ => None,
    };
    exact.is_some_and(|d| {
        d.scale > *scale
            && d.rescale(*scale)
                .and_then(|r| r.rescale(d.scale))
                .is_some_and(|back| back != d)
    })
}

/// The value MySQL stores for a type when it has none (IGNORE's NULL for
/// a NOT NULL column, a NOT NULL column without a default outside strict
/// mode): a number's or a string's zero, the zero date, midnight. None
/// for the others (TIMESTAMP, ENUM, SET, JSON).
pub(crate) fn implicit_zero(ty: &SqlType) -> Option<Val> {
    Some(match ty {
        ty if ty.is_number() => Val::Int(0),
        SqlType::Bit { .. } | SqlType::Year => Val::Int(0),
        SqlType::Date => Val::Date(Date::default()),
        SqlType::DateTime { .. } => Val::DateTime(Date::default(), Time::default()),
        SqlType::Time { .. } => Val::Time(0),
        SqlType::Char { .. }
        | SqlType::VarChar { .. }
        | SqlType::Binary { .. }
        | SqlType::VarBinary { .. }
        | SqlType::Text { .. }
        | SqlType::Blob { .. } => Val::str(""),
        _ => return None,
    })
}

/// [`to_native`] under the session's sql_mode: outside strict mode a
/// value that does not fit (1264, 1406, 1366, 1265) is adjusted as MySQL
/// does (clamped to the range, cut to the length, a bad number as 0) and
/// the error becomes a warning.
pub fn to_native_in_mode(v: &Val, target: &Target<'_>, ctx: &mut Ctx<'_>) -> SqlResult<Value> {
    let error = match to_native(v, target, false) {
        Ok(value) => {
            // A time of day dropped from a DATE, or a date from a TIME's
            // number: note 1265, as MariaDB's. Not a number below 1 (0.5
            // is the zero date, silently, as MariaDB's).
            let dropped = match target.column.ty {
                SqlType::Date => {
                    !matches!(v, Val::Date(_))
                        && !below_one(v)
                        && date_time_of(v).is_some_and(|(_, t)| t != Time::default())
                }
                SqlType::Time { .. } => datetime_number(v).is_some(),
                _ => false,
            };
            if dropped {
                ctx.note(codes::WARN_DATA_TRUNCATED, target.truncated());
            }
            return zero_date_in_mode(value, v, target, ctx);
        }
        Err(error) => error,
    };
    // Text after a time (`'10:11:12xyz'`): outside strict mode and under
    // IGNORE the time, with 1265 (and 1264 past ±838:59:59, clipped), as
    // MariaDB's.
    if let (SqlType::Time { fsp }, Val::Str(bytes), false) = (&target.column.ty, v, ctx.strict) {
        let text = String::from_utf8_lossy(bytes);
        if let Some((m, true)) = crate::engine::expr::stored_time(&text) {
            ctx.warn(codes::WARN_DATA_TRUNCATED, target.truncated());
            let max = TIME_MICROS_MAX as i64 / 1_000_000 * 1_000_000;
            if m.abs() > max {
                ctx.warn(codes::OUT_OF_RANGE, target.out_of_range());
                return Ok(Value::Int(m.clamp(-max, max)));
            }
            let unit = 10i64.pow(6 - u32::from((*fsp).min(6)));
            return Ok(Value::Int(m / unit * unit));
        }
    }
    // No date (`'garbage'`, `'2023-02-29'`): outside strict mode and under
    // IGNORE the zero date, with 1265, as MariaDB's.
    if !ctx.strict {
        if let Some((value, code, message)) = adjusted_special(v, target, &error) {
            ctx.warn(code, message);
            return Ok(value);
        }
    }
    if error.code == codes::TRUNCATED_WRONG_VALUE
        && !ctx.strict
        && matches!(target.column.ty, SqlType::Date | SqlType::DateTime { .. })
    {
        let datetime = !matches!(target.column.ty, SqlType::Date);
        // A date with text after it: the date.
        let zero = match (trailing_text(v), date_time_of(v)) {
            (true, Some((d, t))) => {
                let t = if datetime { t } else { Time::default() };
                to_native(&Val::DateTime(d, t), target, false)
                    .unwrap_or_else(|_| zero_date(datetime))
            }
            _ => zero_date(datetime),
        };
        ctx.warn(codes::WARN_DATA_TRUNCATED, target.truncated());
        return Ok(zero);
    }
    if error.code == codes::BAD_NULL && ctx.ignore {
        // IGNORE: the type's zero ('0000-00-00' for a date).
        let Some(zero) = implicit_zero(&target.column.ty) else {
            return Err(error);
        };
        let value = to_native(&zero, target, false)?;
        ctx.warn(error.code, error.message);
        return Ok(value);
    }
    if error.code == codes::DATA_TOO_LONG {
        // Only spaces past the length: cut, with note 1265 whatever the
        // sql_mode into a VARCHAR, silently into a CHAR (which strips
        // trailing spaces anyway), as MariaDB's (a PAD SPACE string
        // compares the same).
        let ty = &target.column.ty;
        if let SqlType::Char { length: max, .. } | SqlType::VarChar { max, .. } = ty {
            let text = v.to_text();
            let kept = text
                .char_indices()
                .nth(usize::from(*max))
                .map_or(text.len(), |(at, _)| at);
            if text[kept..].bytes().all(|b| b == b' ') {
                let value = to_native(&Val::str(&text[..kept]), target, false)?;
                if matches!(ty, SqlType::VarChar { .. }) {
                    ctx.note(codes::WARN_DATA_TRUNCATED, target.truncated());
                }
                return Ok(value);
            }
        }
    }
    let adjustable = matches!(
        error.code,
        codes::OUT_OF_RANGE
            | codes::DATA_TOO_LONG
            | codes::TRUNCATED_WRONG_VALUE_FOR_FIELD
            | codes::WARN_DATA_TRUNCATED
    );
    if ctx.strict || !adjustable {
        return Err(error);
    }
    let mut clipped = false;
    // Text after a DECIMAL's or a DOUBLE's number past the type: 1265 for
    // the text, then 1264 for the clipping, as MariaDB gives both.
    let mut clipped_too = false;
    let adjusted = match &target.column.ty {
        ty @ (SqlType::TinyInt { .. }
        | SqlType::SmallInt { .. }
        | SqlType::MediumInt { .. }
        | SqlType::Int { .. }
        | SqlType::BigInt { .. }) => {
            let (lo, hi) = int_range(ty).unwrap_or((0, 0));
            // A string's number prefix exactly (as a double,
            // 18446744073709551615 would not reach BIGINT UNSIGNED's
            // end), past a decimal's digits as a double.
            let i = integer_of(v, false).unwrap_or_else(|| {
                let text = v.to_text();
                let (prefix, _) = str_number_prefix(&text);
                match Dec::parse(prefix) {
                    Some(d) => d.round_i128(),
                    None => prefix
                        .parse::<f64>()
                        .map_or(0, |f| f.round().clamp(-1e20, 1e20) as i128),
                }
            });
            // A number past the type before the text: 1264, as MariaDB
            // names the clipping first.
            clipped = !(lo..=hi).contains(&i);
            Val::Dec(Dec::new(i.clamp(lo, hi), 0))
        }
        SqlType::Char { length: max, .. } | SqlType::VarChar { max, .. } => Val::str(
            text_replaced(v)
                .chars()
                .take(usize::from(*max))
                .collect::<String>(),
        ),
        // Bytes that are not UTF-8: '?' for them, cut to the length.
        SqlType::Text { size, .. } if error.code == codes::TRUNCATED_WRONG_VALUE_FOR_FIELD => {
            let mut text = text_replaced(v);
            let mut end = text.len().min(blob_bytes(*size));
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            Val::str(text)
        }
        SqlType::Binary { length: max } | SqlType::VarBinary { max } => {
            let mut b = bytes_of(v);
            b.truncate(usize::from(*max));
            Val::Str(b)
        }
        SqlType::Decimal {
            precision,
            scale,
            unsigned,
        } => {
            let text = v.to_text();
            let (prefix, _) = str_number_prefix(&text);
            let f = v.to_f64().0;
            let max = value::pow10(*precision) - 1i128;
            let mantissa = match Dec::parse(prefix)
                .or_else(|| Dec::parse(&format!("{:.*}", usize::from(*scale), f)))
                .and_then(|d| d.rescale(*scale))
            {
                Some(d) => d.mantissa,
                // Past any DECIMAL (1e300): the limit on its side.
                None if f > 0.0 => max,
                None if f < 0.0 => -max,
                None => value::Mantissa::ZERO,
            };
            let min = if *unsigned {
                value::Mantissa::ZERO
            } else {
                -max
            };
            clipped_too = mantissa.clamp(min, max) != mantissa;
            Val::Dec(Dec::new(mantissa.clamp(min, max), *scale))
        }
        // MariaDB stores the nearest limit: ±(M − D nines . D nines), or
        // FLOAT's largest (0 the least when UNSIGNED); a string, the
        // number it starts with (none: 0).
        SqlType::Float { digits, unsigned } | SqlType::Double { digits, unsigned } => {
            let float_max = f64::from(f32::MAX);
            let max = match (digits, &target.column.ty) {
                (Some(d), SqlType::Float { .. }) => d.max().min(float_max),
                (Some(d), _) => d.max(),
                (None, SqlType::Float { .. }) => float_max,
                (None, _) => f64::MAX,
            };
            let f = match v {
                Val::Str(b) => {
                    let text = String::from_utf8_lossy(b);
                    str_number_prefix(&text).0.parse::<f64>().unwrap_or(0.0)
                }
                Val::Date(_) | Val::DateTime(..) | Val::Time(_) => v.temporal_number().to_f64(),
                other => other.to_f64().0,
            };
            let min = if *unsigned { 0.0 } else { -max };
            clipped_too = !f.is_nan() && f.clamp(min, max) != f;
            Val::Double(if f.is_nan() { 0.0 } else { f.clamp(min, max) })
        }
        _ => return Err(error),
    };
    let value = to_native(&adjusted, target, false)?;
    let code = match error.code {
        codes::DATA_TOO_LONG => codes::WARN_DATA_TRUNCATED,
        codes::WARN_DATA_TRUNCATED if clipped => codes::OUT_OF_RANGE,
        code => code,
    };
    let message = match code {
        codes::WARN_DATA_TRUNCATED => target.truncated(),
        codes::OUT_OF_RANGE if clipped => target.out_of_range(),
        _ => error.message,
    };
    ctx.warn(code, message);
    if clipped_too && code == codes::WARN_DATA_TRUNCATED {
        ctx.warn(codes::OUT_OF_RANGE, target.out_of_range());
    }
    Ok(value)
}

fn blob_bytes(size: crate::engine::catalog::BlobSize) -> usize {
    use crate::engine::catalog::BlobSize;
    match size {
        BlobSize::Tiny => 255,
        BlobSize::Normal => 65_535,
        BlobSize::Medium => 16_777_215,
        BlobSize::Long => skarv_client::BLOB_BYTES_MAX,
    }
}

fn bytes_of(v: &Val) -> Vec<u8> {
    match v {
        Val::Str(b) => b.clone(),
        other => other.to_text().into_bytes(),
    }
}

fn round_fsp(t: Time, fsp: u8) -> Time {
    let unit = 10u32.pow(6 - u32::from(fsp.min(6)));
    Time {
        micros: t.micros / unit * unit,
        ..t
    }
}

/// A value as a DATE's or DATETIME's date and time: a zero date and a
/// zero month or day are kept (MySQL stores them unless the sql_mode says
/// otherwise: [`zero_date_in_mode`]); a number is read as MariaDB reads
/// one for a date (`200` is `2000-02-00`).
fn date_time_of(v: &Val) -> Option<(Date, Time)> {
    match v {
        Val::Date(d) => Some((*d, Time::default())),
        Val::DateTime(d, t) => Some((*d, *t)),
        Val::Int(_) | Val::UInt(_) => {
            let n = match v {
                Val::Int(i) => u64::try_from(*i).ok()?,
                Val::UInt(u) => *u,
                _ => return None,
            };
            let (d, t) = value::datetime_of_number_fuzzy(n)?;
            Some((d, t.unwrap_or_default()))
        }
        // A number with a fraction (`dtm - 200` of a DATETIME(0) is a
        // DECIMAL): its whole part read as above, its fraction the
        // microseconds (rounded to the column's digits later).
        Val::Dec(_) | Val::Double(_) => {
            let (whole, micros) = match v {
                Val::Dec(d) => {
                    let p = value::pow10(d.scale);
                    let whole =
                        u64::try_from(value::saturating_i128(d.mantissa.div_euclid(p))).ok()?;
                    let frac = Dec::new(d.mantissa.rem_euclid(p), d.scale);
                    let micros = frac
                        .rescale(6)
                        .map_or(0, |m| value::saturating_i128(m.mantissa));
                    (whole, micros)
                }
                Val::Double(f) if *f >= 0.0 && f.is_finite() => {
                    let whole = f.trunc();
                    (whole as u64, ((f - whole) * 1e6).round() as i128)
                }
                _ => return None,
            };
            let (d, t) = value::datetime_of_number_fuzzy(whole)?;
            let mut t = t.unwrap_or_default();
            t.micros = u32::try_from(micros.clamp(0, 999_999)).ok()?;
            Some((d, t))
        }
        Val::Str(b) => {
            let (d, t) = value::parse_datetime_fuzzy(std::str::from_utf8(b).ok()?)?;
            Some((d, t.unwrap_or_default()))
        }
        _ => None,
    }
}

/// Whether `v` is a number with a fraction and no whole part (0.5): a
/// zero date, which MariaDB stores without a note.
fn below_one(v: &Val) -> bool {
    match v {
        Val::Dec(d) => d.mantissa.abs() < value::pow10(d.scale),
        Val::Double(f) => f.abs() < 1.0,
        _ => false,
    }
}

/// Whether a string given for a date has more than its date and time:
/// something other than a digit ends it (spaces aside).
fn trailing_text(v: &Val) -> bool {
    match v {
        Val::Str(b) => b
            .iter()
            .rposition(|c| *c != b' ')
            .is_some_and(|at| !b[at].is_ascii_digit()),
        _ => false,
    }
}

/// The sql_mode's word on a zero date, or a date with a zero month or day,
/// stored in a DATE or DATETIME column, as MariaDB's: by default both are
/// stored; NO_ZERO_DATE makes `0000-00-00` an error in strict mode (else
/// stored with 1264), NO_ZERO_IN_DATE makes `2024-00-10` an error in
/// strict mode (else the zero date, with 1265).
fn zero_date_in_mode(
    value: Value,
    v: &Val,
    target: &Target<'_>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Value> {
    let date = match &value {
        Value::Date(d) => *d,
        Value::DateTime(t) => t.date,
        Value::Timestamp(0) => schema::Date::new(0, 0, 0),
        _ => return Ok(value),
    };
    let what = if matches!(value, Value::Date(_)) {
        "date"
    } else {
        "datetime"
    };
    if date == schema::Date::new(0, 0, 0) {
        if ctx.env.no_zero_date {
            if ctx.strict {
                return Err(target.error(Misfit::Bad(what), v));
            }
            ctx.warn(codes::OUT_OF_RANGE, target.out_of_range());
        }
    } else if (date.month == 0 || date.day == 0) && ctx.env.no_zero_in_date {
        if ctx.strict {
            return Err(target.error(Misfit::Bad(what), v));
        }
        ctx.warn(codes::WARN_DATA_TRUNCATED, target.truncated());
        return Ok(zero_date(matches!(value, Value::DateTime(_))));
    }
    Ok(value)
}

/// The zero DATE, or the zero DATETIME.
fn zero_date(datetime: bool) -> Value {
    let zero = schema::Date::new(0, 0, 0);
    if datetime {
        Value::DateTime(schema::DateTime::new(zero, 0, 0, 0, 0))
    } else {
        Value::Date(zero)
    }
}

/// A value as a result column of `meta` carries it (the form its type
/// asks for; see `crate::value`).
pub fn to_sql(v: &Val, meta: &ColumnMeta) -> SqlValue {
    use ColumnType as T;
    if v.is_null() {
        return SqlValue::Null;
    }
    match meta.ty {
        T::Null => SqlValue::Null,
        T::Tiny | T::Short | T::Long | T::Int24 | T::LongLong | T::Year | T::Bit => {
            let unsigned = meta.flags & flags::UNSIGNED != 0;
            let i: i128 = match v {
                Val::Int(i) => i128::from(*i),
                Val::UInt(u) => i128::from(*u),
                Val::Dec(d) => d.round_i128(),
                Val::Double(f) => f.round() as i128,
                other => integer_of(other, false).unwrap_or(0),
            };
            if unsigned || i > i128::from(i64::MAX) {
                SqlValue::UInt(i.clamp(0, i128::from(u64::MAX)) as u64)
            } else {
                SqlValue::Int(i.max(i128::from(i64::MIN)) as i64)
            }
        }
        // `+ 0.0` makes a negative zero zero, as MariaDB sends it.
        T::Float => SqlValue::Float(v.to_f64().0 as f32 + 0.0),
        T::Double => SqlValue::Double(v.to_f64().0 + 0.0),
        T::Decimal | T::NewDecimal => {
            let d = match v {
                Val::Dec(d) => *d,
                Val::Int(i) => Dec::new(i128::from(*i), 0),
                Val::UInt(u) => Dec::new(i128::from(*u), 0),
                other => Dec::parse(&format!(
                    "{:.*}",
                    usize::from(meta.decimals),
                    other.to_f64().0
                ))
                .unwrap_or(Dec::new(0, 0)),
            };
            let d = d.rescale(meta.decimals.min(30)).unwrap_or(d);
            SqlValue::Decimal(d.to_text())
        }
        T::Date => match date_time_of(v) {
            Some((d, _)) => SqlValue::Date(d),
            None => SqlValue::Null,
        },
        T::DateTime | T::Timestamp => match date_time_of(v) {
            Some((d, t)) => SqlValue::DateTime(d, t),
            None => SqlValue::Null,
        },
        T::Time => {
            let m = match v {
                Val::Time(m) => *m,
                other => parse_time(&other.to_text()).unwrap_or(0),
            };
            let abs = m.unsigned_abs();
            let secs = abs / 1_000_000;
            SqlValue::Time {
                negative: m < 0,
                days: (secs / 86_400) as u32,
                time: Time {
                    hour: (secs / 3600 % 24) as u8,
                    minute: (secs / 60 % 60) as u8,
                    second: (secs % 60) as u8,
                    micros: (abs % 1_000_000) as u32,
                },
            }
        }
        _ => SqlValue::Bytes(match v {
            Val::Str(b) => {
                debug_assert!(sent_as_bytes(meta.ty), "{:?} is sent as bytes", meta.ty);
                b.clone()
            }
            // A date and time in a string result (DATE_ADD of a string):
            // its fraction only when it has one, as MySQL prints it.
            Val::DateTime(d, t) => {
                let digits = if t.micros == 0 { 0 } else { meta.decimals };
                crate::engine::expr::value::datetime_text(*d, *t, digits).into_bytes()
            }
            other => other.to_text().into_bytes(),
        }),
    }
}

/// [`to_sql`] of a value the caller is done with: a string sent as bytes
/// is moved, not copied (a copy and a free per string of every row sent).
pub fn to_sql_owned(v: Val, meta: &ColumnMeta) -> SqlValue {
    match v {
        Val::Str(b) if sent_as_bytes(meta.ty) => SqlValue::Bytes(b),
        other => to_sql(&other, meta),
    }
}

/// Whether [`to_sql`] sends a value of a column of type `ty` as a string's
/// bytes (its last arm, which asserts it agrees).
fn sent_as_bytes(ty: ColumnType) -> bool {
    use ColumnType as T;
    !matches!(
        ty,
        T::Null
            | T::Tiny
            | T::Short
            | T::Long
            | T::Int24
            | T::LongLong
            | T::Year
            | T::Bit
            | T::Float
            | T::Double
            | T::Decimal
            | T::NewDecimal
            | T::Date
            | T::DateTime
            | T::Timestamp
            | T::Time
    )
}

/// A parameter as bound by `COM_STMT_EXECUTE`.
pub fn from_sql(v: &SqlValue) -> Val {
    match v {
        SqlValue::Null => Val::Null,
        SqlValue::Int(i) => Val::Int(*i),
        SqlValue::UInt(u) => Val::UInt(*u),
        SqlValue::Float(f) => Val::Double(f64::from(*f)),
        SqlValue::Double(f) => Val::Double(*f),
        SqlValue::Decimal(s) => Dec::parse(s).map_or_else(|| Val::str(s.clone()), Val::Dec),
        SqlValue::Bytes(b) => Val::Str(b.clone()),
        SqlValue::Date(d) => Val::Date(*d),
        SqlValue::DateTime(d, t) => Val::DateTime(*d, *t),
        SqlValue::Time {
            negative,
            days,
            time,
        } => {
            let m = ((i64::from(*days) * 24 + i64::from(time.hour)) * 3600
                + i64::from(time.minute) * 60
                + i64::from(time.second))
                * 1_000_000
                + i64::from(time.micros);
            Val::Time(if *negative { -m } else { m })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::catalog::column_meta;

    fn column(ty: SqlType, nullable: bool) -> SqlColumn {
        SqlColumn {
            name: "c".into(),
            native: 0,
            meta: column_meta(&ty, nullable),
            ty,
            nullable,
            auto_increment: false,
            default: None,
            default_now: false,
            default_expr: false,
            on_update_now: false,
            zerofill: false,
            width: None,
            comment: String::new(),
        }
    }

    fn store(ty: SqlType, v: Val) -> SqlResult<Value> {
        let col = column(ty, true);
        let target = Target {
            column: &col,
            db: "db",
            table: "t",
            row: 1,
            tz_secs: 0,
        };
        to_native(&v, &target, false)
    }

    fn code(r: SqlResult<Value>) -> u16 {
        r.expect_err("refused").code
    }

    #[test]
    fn integers_are_range_checked_and_rounded() {
        let tiny = SqlType::TinyInt { unsigned: false };
        assert_eq!(store(tiny.clone(), Val::Int(127)), Ok(Value::Int(127)));
        assert_eq!(code(store(tiny.clone(), Val::Int(128))), 1264);
        assert_eq!(store(tiny.clone(), Val::str("12")), Ok(Value::Int(12)));
        assert_eq!(code(store(tiny.clone(), Val::str("12x"))), 1265);
        assert_eq!(code(store(tiny.clone(), Val::str("x"))), 1366);
        let d = Dec::parse("2.5").expect("decimal");
        assert_eq!(store(tiny, Val::Dec(d)), Ok(Value::Int(3)));
        let u = SqlType::Int { unsigned: true };
        assert_eq!(code(store(u, Val::Int(-1))), 1264);
        // A double's half goes to even (MariaDB's `rint`), a YEAR's and a
        // BIT's fraction is cut.
        let int = SqlType::Int { unsigned: false };
        for (f, want) in [(16.5, 16), (17.5, 18), (-2.5, -2), (2.6, 3), (-0.5, 0)] {
            assert_eq!(
                store(int.clone(), Val::Double(f)),
                Ok(Value::Int(want)),
                "{f}"
            );
        }
        assert_eq!(
            store(SqlType::Year, Val::Double(2001.5)),
            Ok(Value::UInt(2001))
        );
        assert_eq!(
            store(SqlType::Bit { bits: 8 }, Val::Double(3.5)),
            Ok(Value::Bit(3))
        );
    }

    #[test]
    fn strings_decimals_and_dates_are_checked() {
        let vc = SqlType::VarChar {
            max: 3,
            collation: Collation::Utf8mb4GeneralCi,
        };
        assert_eq!(
            store(vc.clone(), Val::str("héé")),
            Ok(Value::String("héé".into()))
        );
        assert_eq!(code(store(vc, Val::str("abcd"))), 1406);
        let dec = SqlType::Decimal {
            precision: 4,
            scale: 2,
            unsigned: false,
        };
        let stored = store(dec.clone(), Val::str("12.345")).expect("rounds");
        assert_eq!(from_native(&stored, &dec, 0), Val::Dec(Dec::new(1235, 2)));
        assert_eq!(code(store(dec.clone(), Val::Int(100))), 1264);
        // A double: its shortest digits rounded once, as MariaDB's.
        let stored = store(dec.clone(), Val::Double(2.675)).expect("rounds");
        assert_eq!(from_native(&stored, &dec, 0), Val::Dec(Dec::new(268, 2)));
        let stored = store(dec.clone(), Val::Double(1.2349999)).expect("rounds");
        assert_eq!(from_native(&stored, &dec, 0), Val::Dec(Dec::new(123, 2)));
        // DECIMAL(3,3): no whole digits, ±0.999 at most.
        let fraction = SqlType::Decimal {
            precision: 3,
            scale: 3,
            unsigned: false,
        };
        let stored = store(fraction.clone(), Val::str("-0.9994")).expect("fits once rounded");
        assert_eq!(
            from_native(&stored, &fraction, 0),
            Val::Dec(Dec::new(-999, 3))
        );
        assert_eq!(code(store(fraction.clone(), Val::str("0.9995"))), 1264);
        assert_eq!(code(store(fraction, Val::Int(1))), 1264);
        assert_eq!(code(store(SqlType::Date, Val::str("2024-02-30"))), 1292);
        let dt = SqlType::Timestamp { fsp: 0 };
        let stored = store(dt.clone(), Val::str("1970-01-02 00:00:01")).expect("timestamp");
        assert_eq!(stored, Value::Timestamp(86_401_000_000));
        assert_eq!(
            from_native(&stored, &dt, 0).to_text(),
            "1970-01-02 00:00:01"
        );
        let col = column(SqlType::Int { unsigned: false }, false);
        let target = Target {
            column: &col,
            db: "db",
            table: "t",
            row: 1,
            tz_secs: 0,
        };
        assert_eq!(
            to_native(&Val::Null, &target, false)
                .expect_err("null")
                .code,
            1048
        );
    }

    #[test]
    fn types_the_storage_lacks_round_trip() {
        let time = SqlType::Time { fsp: 0 };
        let stored = store(time.clone(), Val::str("-01:02:03")).expect("time");
        assert_eq!(stored, Value::Int(-3_723_000_000));
        assert_eq!(from_native(&stored, &time, 0).to_text(), "-01:02:03");
        assert_eq!(store(SqlType::Year, Val::Int(24)), Ok(Value::UInt(2024)));
        assert_eq!(code(store(SqlType::Year, Val::Int(1800))), 1264);
        let e = SqlType::Enum(vec!["a".into(), "b".into()]);
        assert_eq!(store(e.clone(), Val::str("B")), Ok(Value::UInt(2)));
        assert_eq!(from_native(&Value::UInt(2), &e, 0), Val::str("b"));
        assert_eq!(code(store(e, Val::str("z"))), 1265);
        let s = SqlType::Set(vec!["x".into(), "y".into(), "z".into()]);
        assert_eq!(store(s.clone(), Val::str("z,x")), Ok(Value::UInt(0b101)));
        assert_eq!(from_native(&Value::UInt(0b101), &s, 0), Val::str("x,z"));
        assert_eq!(
            store(SqlType::Bit { bits: 4 }, Val::Int(9)),
            Ok(Value::Bit(9))
        );
        assert_eq!(code(store(SqlType::Bit { bits: 4 }, Val::Int(16))), 1406);
        // A negative DECIMAL is out of range, a negative integer too long.
        let minus_three = Val::Dec(Dec::new(-300, 2));
        assert_eq!(code(store(SqlType::Bit { bits: 8 }, minus_three)), 1264);
        assert_eq!(code(store(SqlType::Bit { bits: 8 }, Val::Int(-3))), 1406);
    }

    #[test]
    fn exact_conversion_refuses_what_would_round() {
        let col = column(SqlType::Int { unsigned: false }, false);
        let target = Target {
            column: &col,
            db: "db",
            table: "t",
            row: 1,
            tz_secs: 0,
        };
        let half = Val::Dec(Dec::new(15, 1));
        assert!(to_native(&half, &target, true).is_err());
        let whole = Val::Dec(Dec::new(20, 1));
        assert_eq!(to_native(&whole, &target, true), Ok(Value::Int(2)));
    }

    #[test]
    fn result_values_take_their_column_form() {
        let m = column_meta(
            &SqlType::Decimal {
                precision: 5,
                scale: 2,
                unsigned: false,
            },
            true,
        );
        assert_eq!(to_sql(&Val::Int(3), &m), SqlValue::Decimal("3.00".into()));
        let m = column_meta(&SqlType::BigInt { unsigned: true }, true);
        assert_eq!(to_sql(&Val::Int(3), &m), SqlValue::UInt(3));
        let m = column_meta(&SqlType::Time { fsp: 0 }, true);
        assert_eq!(
            to_sql(&Val::Time(-(25 * 3600) * 1_000_000), &m),
            SqlValue::Time {
                negative: true,
                days: 1,
                time: Time {
                    hour: 1,
                    ..Time::default()
                }
            }
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn types() -> Vec<SqlType> {
            vec![
                SqlType::TinyInt { unsigned: false },
                SqlType::SmallInt { unsigned: true },
                SqlType::MediumInt { unsigned: false },
                SqlType::Int { unsigned: true },
                SqlType::BigInt { unsigned: false },
                SqlType::BigInt { unsigned: true },
                SqlType::Float {
                    digits: None,
                    unsigned: false,
                },
                SqlType::Double {
                    digits: None,
                    unsigned: true,
                },
                SqlType::Decimal {
                    precision: 10,
                    scale: 3,
                    unsigned: false,
                },
                SqlType::Decimal {
                    precision: 65,
                    scale: 30,
                    unsigned: true,
                },
                SqlType::VarChar {
                    max: 5,
                    collation: Collation::Utf8mb4Bin,
                },
                SqlType::VarBinary { max: 5 },
                SqlType::Date,
                SqlType::DateTime { fsp: 3 },
                SqlType::Timestamp { fsp: 0 },
                SqlType::Time { fsp: 2 },
                SqlType::Year,
                SqlType::Bit { bits: 7 },
                SqlType::Enum(vec!["a".into(), "b".into()]),
                SqlType::Set(vec!["a".into(), "b".into()]),
            ]
        }

        fn val() -> impl Strategy<Value = Val> {
            prop_oneof![
                Just(Val::Null),
                any::<i64>().prop_map(Val::Int),
                any::<u64>().prop_map(Val::UInt),
                (any::<i64>(), 0u8..31).prop_map(|(m, s)| Val::Dec(Dec::new(i128::from(m), s))),
                any::<f64>().prop_map(Val::Double),
                "[a-b0-9 ,:.-]{0,20}".prop_map(Val::str),
                any::<i64>().prop_map(Val::Time),
                (0u16..10_000, 0u8..13, 0u8..32)
                    .prop_map(|(year, month, day)| { Val::Date(Date { year, month, day }) }),
            ]
        }

        proptest! {
            /// Storing never panics, and what is stored reads back as a
            /// value that stores the same.
            #[test]
            fn stored_values_round_trip(v in val(), at in 0usize..20) {
                let ty = types()[at].clone();
                if let Ok(stored) = store(ty.clone(), v) {
                    let back = from_native(&stored, &ty, 0);
                    prop_assert_eq!(store(ty, back), Ok(stored));
                }
            }
        }
    }
}
