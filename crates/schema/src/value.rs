//! Values of columns: what the client hands in, what a row gives back, and
//! the check that a value fits its column before anything is written.
//!
//! [`Value`] owns its data (it travels in signals and lives in defaults);
//! [`ValueRef`] borrows it from a row or a `Value`, so that reading a column
//! or encoding a key allocates nothing. Every check here is exact: a value
//! that would need rounding, truncation or a silent conversion is refused
//! with an error that names the column; the SQL layer does MySQL's
//! conversions before values get here.

use std::fmt;

use super::decimal::Decimal;
use super::types::{Column, ColumnType, BLOB_INLINE_BYTES, TIMESTAMP_SECONDS_MAX, YEAR_MAX};

/// Microseconds in a second.
pub const MICROS_PER_SECOND: i64 = 1_000_000;

/// A calendar date (proleptic Gregorian). Field order makes the derived
/// order chronological.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Date {
    pub fn new(year: u16, month: u8, day: u8) -> Date {
        Date { year, month, day }
    }

    /// Whether this is a real day of years 0..=9999 (no zero month or day).
    pub fn is_valid(&self) -> bool {
        self.year <= YEAR_MAX
            && (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
    }

    /// Whether a DATE or DATETIME column may hold it: a real day, the
    /// zero date `0000-00-00`, or a date with a zero month or day
    /// (`2024-00-10`, `2024-02-00`), as MySQL stores them unless its
    /// sql_mode says NO_ZERO_DATE / NO_ZERO_IN_DATE (the SQL node
    /// checks the mode; the row format holds them as any other date).
    pub fn is_storable(&self) -> bool {
        if self.month == 0 || self.day == 0 {
            return self.year <= YEAR_MAX && self.month <= 12 && self.day <= 31;
        }
        self.is_valid()
    }
}

fn days_in_month(year: u16, month: u8) -> u8 {
    let leap = (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// A date and a time of day, to the microsecond, without a time zone.
/// Field order makes the derived order chronological.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub date: Date,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl DateTime {
    pub fn new(date: Date, hour: u8, minute: u8, second: u8, micros: u32) -> DateTime {
        DateTime {
            date,
            hour,
            minute,
            second,
            micros,
        }
    }

    /// Whether the date is one a column may hold ([`Date::is_storable`])
    /// and the time is within a day (no leap seconds, as MySQL).
    pub fn is_valid(&self) -> bool {
        self.date.is_storable()
            && self.hour < 24
            && self.minute < 60
            && self.second < 60
            && i64::from(self.micros) < MICROS_PER_SECOND
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:02}:{:02}:{:02}.{:06}",
            self.date, self.hour, self.minute, self.second, self.micros
        )
    }
}

/// The value of one column.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    /// For every integer column that can hold it.
    Int(i64),
    /// For every integer column that can hold it.
    UInt(u64),
    /// For FLOAT columns.
    Float(f32),
    /// For DOUBLE columns.
    Double(f64),
    Decimal(Decimal),
    /// For CHAR, VARCHAR and TEXT columns.
    String(String),
    /// For BINARY, VARBINARY and BLOB columns.
    Bytes(Vec<u8>),
    Date(Date),
    DateTime(DateTime),
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    Timestamp(i64),
    Bit(u64),
    /// What a row holds of a BLOB or TEXT: its total length and its first
    /// `min(total, BLOB_INLINE_BYTES)` bytes; the rest is in the parts
    /// table. Reading a BLOB/TEXT column gives this; writing one takes
    /// either this or the whole value (`Bytes`/`String`).
    BlobHead {
        total_bytes: u64,
        inline: Vec<u8>,
    },
}

/// A borrowed [`Value`]: what reading a row gives without allocating.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Decimal(Decimal),
    Str(&'a str),
    Bytes(&'a [u8]),
    Date(Date),
    DateTime(DateTime),
    Timestamp(i64),
    Bit(u64),
    BlobHead { total_bytes: u64, inline: &'a [u8] },
}

impl Value {
    /// Borrows the value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Int(*v),
            Value::UInt(v) => ValueRef::UInt(*v),
            Value::Float(v) => ValueRef::Float(*v),
            Value::Double(v) => ValueRef::Double(*v),
            Value::Decimal(v) => ValueRef::Decimal(*v),
            Value::String(v) => ValueRef::Str(v),
            Value::Bytes(v) => ValueRef::Bytes(v),
            Value::Date(v) => ValueRef::Date(*v),
            Value::DateTime(v) => ValueRef::DateTime(*v),
            Value::Timestamp(v) => ValueRef::Timestamp(*v),
            Value::Bit(v) => ValueRef::Bit(*v),
            Value::BlobHead {
                total_bytes,
                inline,
            } => ValueRef::BlobHead {
                total_bytes: *total_bytes,
                inline,
            },
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Checks that the value fits the column: its type, range, length,
    /// precision and nullability. Errors name the column.
    pub fn check(&self, column: &Column) -> Result<(), ValueError> {
        self.as_ref().check(column)
    }
}

impl<'a> ValueRef<'a> {
    /// An owned copy. Integers (every key of a key-value table, copied by
    /// the TC and the LDM for each operation) inline, the rest in a call.
    #[inline(always)]
    pub fn to_value(&self) -> Value {
        match *self {
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::UInt(v) => Value::UInt(v),
            _ => self.owned_general(),
        }
    }

    fn owned_general(&self) -> Value {
        match *self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::UInt(v) => Value::UInt(v),
            ValueRef::Float(v) => Value::Float(v),
            ValueRef::Double(v) => Value::Double(v),
            ValueRef::Decimal(v) => Value::Decimal(v),
            ValueRef::Str(v) => Value::String(v.to_string()),
            ValueRef::Bytes(v) => Value::Bytes(v.to_vec()),
            ValueRef::Date(v) => Value::Date(v),
            ValueRef::DateTime(v) => Value::DateTime(v),
            ValueRef::Timestamp(v) => Value::Timestamp(v),
            ValueRef::Bit(v) => Value::Bit(v),
            ValueRef::BlobHead {
                total_bytes,
                inline,
            } => Value::BlobHead {
                total_bytes,
                inline: inline.to_vec(),
            },
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, ValueRef::Null)
    }

    /// The kind of value, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "NULL",
            ValueRef::Int(_) => "signed integer",
            ValueRef::UInt(_) => "unsigned integer",
            ValueRef::Float(_) => "FLOAT",
            ValueRef::Double(_) => "DOUBLE",
            ValueRef::Decimal(_) => "DECIMAL",
            ValueRef::Str(_) => "string",
            ValueRef::Bytes(_) => "byte string",
            ValueRef::Date(_) => "DATE",
            ValueRef::DateTime(_) => "DATETIME",
            ValueRef::Timestamp(_) => "TIMESTAMP",
            ValueRef::Bit(_) => "BIT",
            ValueRef::BlobHead { .. } => "blob head",
        }
    }

    /// [`Value::check`] for a borrowed value.
    #[inline]
    pub fn check(&self, column: &Column) -> Result<(), ValueError> {
        // An integer in its column's range is the common case: decided here,
        // inlined, before the general check.
        let integer = match *self {
            ValueRef::Int(v) => Some(i128::from(v)),
            ValueRef::UInt(v) => Some(i128::from(v)),
            _ => None,
        };
        if let (Some(v), Some((min, max))) = (integer, column.ty.integer_range()) {
            if (min..=max).contains(&v) {
                return Ok(());
            }
        }
        check_value(*self, &column.name, &column.ty, column.nullable)
    }
}

/// Why a value does not fit its column. Every variant names the column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("column `{column}` is NOT NULL: NULL given")]
    NullNotAllowed { column: String },
    #[error("column `{column}` is {ty}: a {given} value does not go there")]
    WrongType {
        column: String,
        ty: String,
        given: &'static str,
    },
    #[error("column `{column}` is {ty}: {value} is out of its range")]
    OutOfRange {
        column: String,
        ty: String,
        value: String,
    },
    #[error("column `{column}` is {ty}: {given} {unit} given, at most {max} fit")]
    TooLong {
        column: String,
        ty: String,
        given: usize,
        max: usize,
        unit: &'static str,
    },
    #[error("column `{column}` is {ty}: {value} is not a valid date or time")]
    InvalidDateTime {
        column: String,
        ty: String,
        value: String,
    },
    #[error("column `{column}` is {ty}: {value} is not a finite number")]
    NotFinite {
        column: String,
        ty: String,
        value: String,
    },
    #[error("column `{column}` is {ty}: {value} has more fractional digits than the column keeps")]
    TooPrecise {
        column: String,
        ty: String,
        value: String,
    },
    #[error(
        "column `{column}` is {ty}: a blob head of {total_bytes} bytes must hold its first \
         min(total, {BLOB_INLINE_BYTES}) bytes, it holds {inline_bytes}"
    )]
    BadBlobHead {
        column: String,
        ty: String,
        total_bytes: u64,
        inline_bytes: usize,
    },
    #[error("column `{column}` is {ty}: the text is not valid UTF-8")]
    NotUtf8 { column: String, ty: String },
    #[error("table `{table}` has {expected} columns: {given} values given")]
    WrongColumnCount {
        table: String,
        expected: usize,
        given: usize,
    },
    #[error("table `{table}` has {columns} columns: there is no column {column}")]
    NoSuchColumn {
        table: String,
        column: usize,
        columns: usize,
    },
    #[error(
        "table `{table}`: column `{column}` is in the primary key, which an update cannot change"
    )]
    KeyColumn { table: String, column: String },
}

/// Checks one value against a column's name, type and nullability: the
/// single implementation behind [`Value::check`], row encoding and key
/// encoding. Allocates only to build an error.
pub(crate) fn check_value(
    value: ValueRef<'_>,
    column: &str,
    ty: &ColumnType,
    nullable: bool,
) -> Result<(), ValueError> {
    use ColumnType as T;
    let wrong_type = || ValueError::WrongType {
        column: column.to_string(),
        ty: ty.to_string(),
        given: value.kind(),
    };
    let out_of_range = |shown: String| ValueError::OutOfRange {
        column: column.to_string(),
        ty: ty.to_string(),
        value: shown,
    };
    let invalid_time = |shown: String| ValueError::InvalidDateTime {
        column: column.to_string(),
        ty: ty.to_string(),
        value: shown,
    };
    let too_precise = |shown: String| ValueError::TooPrecise {
        column: column.to_string(),
        ty: ty.to_string(),
        value: shown,
    };
    let too_long = |given: usize, max: usize, unit: &'static str| ValueError::TooLong {
        column: column.to_string(),
        ty: ty.to_string(),
        given,
        max,
        unit,
    };
    let not_finite = |shown: String| ValueError::NotFinite {
        column: column.to_string(),
        ty: ty.to_string(),
        value: shown,
    };

    if value.is_null() {
        return if nullable {
            Ok(())
        } else {
            Err(ValueError::NullNotAllowed {
                column: column.to_string(),
            })
        };
    }
    match (*ty, value) {
        (
            T::TinyInt { .. }
            | T::SmallInt { .. }
            | T::MediumInt { .. }
            | T::Int { .. }
            | T::BigInt { .. },
            _,
        ) => {
            let (min, max) = ty.integer_range().expect("an integer type has a range");
            let v = match value {
                ValueRef::Int(v) => i128::from(v),
                ValueRef::UInt(v) => i128::from(v),
                _ => return Err(wrong_type()),
            };
            if v < min || v > max {
                return Err(out_of_range(v.to_string()));
            }
        }
        (T::Float, ValueRef::Float(v)) => {
            if !v.is_finite() {
                return Err(not_finite(v.to_string()));
            }
        }
        (T::Double, ValueRef::Double(v)) => {
            if !v.is_finite() {
                return Err(not_finite(v.to_string()));
            }
        }
        (T::Decimal { precision, scale }, ValueRef::Decimal(v)) => {
            if v.int_digits() > usize::from(precision - scale) {
                return Err(out_of_range(v.to_string()));
            }
            if v.frac_digits() > usize::from(scale) {
                return Err(too_precise(v.to_string()));
            }
        }
        (T::Char { len, .. }, ValueRef::Str(s)) => {
            // CHAR does not keep trailing spaces, so they do not count.
            let chars = s.trim_end_matches(' ').chars().count();
            if chars > usize::from(len) {
                return Err(too_long(chars, usize::from(len), "characters"));
            }
        }
        (T::VarChar { max, .. }, ValueRef::Str(s)) => {
            // Bytes bound characters from above: count only when it matters.
            if s.len() > usize::from(max) {
                let chars = s.chars().count();
                if chars > usize::from(max) {
                    return Err(too_long(chars, usize::from(max), "characters"));
                }
            }
        }
        (T::Binary { len }, ValueRef::Bytes(b)) => {
            if b.len() > usize::from(len) {
                return Err(too_long(b.len(), usize::from(len), "bytes"));
            }
        }
        (T::VarBinary { max }, ValueRef::Bytes(b)) => {
            if b.len() > usize::from(max) {
                return Err(too_long(b.len(), usize::from(max), "bytes"));
            }
        }
        (T::Blob, ValueRef::Bytes(_)) | (T::Text { .. }, ValueRef::Str(_)) => {}
        (
            T::Blob | T::Text { .. },
            ValueRef::BlobHead {
                total_bytes,
                inline,
            },
        ) => {
            let expected = total_bytes.min(BLOB_INLINE_BYTES as u64);
            if inline.len() as u64 != expected {
                return Err(ValueError::BadBlobHead {
                    column: column.to_string(),
                    ty: ty.to_string(),
                    total_bytes,
                    inline_bytes: inline.len(),
                });
            }
            // A complete text is checked whole; a head may end inside a character.
            let complete = inline.len() as u64 == total_bytes;
            if matches!(ty, T::Text { .. }) && complete && std::str::from_utf8(inline).is_err() {
                return Err(ValueError::NotUtf8 {
                    column: column.to_string(),
                    ty: ty.to_string(),
                });
            }
        }
        (T::Date, ValueRef::Date(d)) => {
            if !d.is_storable() {
                return Err(invalid_time(d.to_string()));
            }
        }
        (T::DateTime { fsp }, ValueRef::DateTime(t)) => {
            if !t.is_valid() {
                return Err(invalid_time(t.to_string()));
            }
            if !micros_fit_fsp(i64::from(t.micros), fsp) {
                return Err(too_precise(t.to_string()));
            }
        }
        (T::Timestamp { fsp }, ValueRef::Timestamp(micros)) => {
            if micros < 0 || micros / MICROS_PER_SECOND > TIMESTAMP_SECONDS_MAX {
                return Err(out_of_range(format!("{micros} µs since the epoch")));
            }
            if !micros_fit_fsp(micros % MICROS_PER_SECOND, fsp) {
                return Err(too_precise(format!("{micros} µs since the epoch")));
            }
        }
        (T::Bit { bits }, ValueRef::Bit(v)) => {
            if bits < 64 && v >> bits != 0 {
                return Err(out_of_range(format!("{v:#x}")));
            }
        }
        _ => return Err(wrong_type()),
    }
    Ok(())
}

/// Whether a number of microseconds (below a second) has no digits beyond
/// `fsp` fractional-second digits.
pub(crate) fn micros_fit_fsp(micros: i64, fsp: u8) -> bool {
    debug_assert!(fsp <= 6);
    micros % 10i64.pow(6 - u32::from(fsp)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Collation::Utf8mb4Bin;

    fn col(ty: ColumnType) -> Column {
        Column::new("c", ty)
    }

    #[test]
    fn integers_are_range_checked() {
        let tiny = col(ColumnType::TinyInt { unsigned: false });
        assert!(Value::Int(127).check(&tiny).is_ok());
        assert!(Value::Int(-128).check(&tiny).is_ok());
        let err = Value::Int(300).check(&tiny).unwrap_err();
        assert!(
            matches!(&err, ValueError::OutOfRange { column, value, .. } if column == "c" && value == "300")
        );
        assert_eq!(
            err.to_string(),
            "column `c` is TINYINT: 300 is out of its range"
        );
        let utiny = col(ColumnType::TinyInt { unsigned: true });
        assert!(Value::UInt(255).check(&utiny).is_ok());
        assert!(Value::Int(255).check(&utiny).is_ok());
        assert!(Value::Int(-1).check(&utiny).is_err());
        let medium = col(ColumnType::MediumInt { unsigned: false });
        assert!(Value::Int(8_388_607).check(&medium).is_ok());
        assert!(Value::Int(8_388_608).check(&medium).is_err());
        let big = col(ColumnType::BigInt { unsigned: false });
        assert!(Value::UInt(u64::MAX).check(&big).is_err());
        assert!(Value::UInt(i64::MAX as u64).check(&big).is_ok());
        let ubig = col(ColumnType::BigInt { unsigned: true });
        assert!(Value::UInt(u64::MAX).check(&ubig).is_ok());
        assert!(matches!(
            Value::String("1".into()).check(&ubig),
            Err(ValueError::WrongType {
                given: "string",
                ..
            })
        ));
    }

    #[test]
    fn null_needs_a_nullable_column() {
        let c = col(ColumnType::Int { unsigned: false });
        assert_eq!(
            Value::Null.check(&c),
            Err(ValueError::NullNotAllowed { column: "c".into() })
        );
        assert!(Value::Null.check(&c.nullable()).is_ok());
    }

    #[test]
    fn strings_count_characters() {
        let c = col(ColumnType::VarChar {
            max: 10,
            collation: Utf8mb4Bin,
        });
        assert!(Value::String("éééééééééé".into()).check(&c).is_ok());
        let err = Value::String("ééééééééééé".into()).check(&c).unwrap_err();
        assert!(matches!(
            err,
            ValueError::TooLong {
                given: 11,
                max: 10,
                unit: "characters",
                ..
            }
        ));
        let c = col(ColumnType::Char {
            len: 2,
            collation: Utf8mb4Bin,
        });
        assert!(Value::String("ab    ".into()).check(&c).is_ok());
        assert!(Value::String("abc".into()).check(&c).is_err());
        assert!(Value::Bytes(b"ab".to_vec()).check(&c).is_err());
        let c = col(ColumnType::VarBinary { max: 3 });
        assert!(Value::Bytes(vec![0; 3]).check(&c).is_ok());
        assert!(matches!(
            Value::Bytes(vec![0; 4]).check(&c),
            Err(ValueError::TooLong {
                given: 4,
                max: 3,
                unit: "bytes",
                ..
            })
        ));
        let c = col(ColumnType::Binary { len: 3 });
        assert!(Value::Bytes(vec![0; 4]).check(&c).is_err());
    }

    #[test]
    fn floats_must_be_finite() {
        let c = col(ColumnType::Double);
        assert!(Value::Double(f64::NAN).check(&c).is_err());
        assert!(matches!(
            Value::Double(f64::INFINITY).check(&c),
            Err(ValueError::NotFinite { .. })
        ));
        assert!(Value::Double(-0.0).check(&c).is_ok());
        assert!(Value::Float(1.0).check(&c).is_err());
        assert!(Value::Float(f32::NAN)
            .check(&col(ColumnType::Float))
            .is_err());
    }

    #[test]
    fn decimals_must_fit() {
        let c = col(ColumnType::Decimal {
            precision: 5,
            scale: 2,
        });
        let d = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        assert!(d("999.99").check(&c).is_ok());
        assert!(d("-999.99").check(&c).is_ok());
        assert!(d("1.50000").check(&c).is_ok());
        assert!(matches!(
            d("1000").check(&c),
            Err(ValueError::OutOfRange { .. })
        ));
        assert!(matches!(
            d("1.234").check(&c),
            Err(ValueError::TooPrecise { .. })
        ));
    }

    #[test]
    fn dates_and_times_are_checked() {
        let c = col(ColumnType::Date);
        assert!(Value::Date(Date::new(2024, 2, 29)).check(&c).is_ok());
        assert!(Value::Date(Date::new(2000, 2, 29)).check(&c).is_ok());
        for bad in [
            Date::new(2023, 2, 29),
            Date::new(1900, 2, 29),
            Date::new(2023, 4, 31),
            Date::new(2023, 13, 1),
            Date::new(2023, 0, 32),
            Date::new(2023, 13, 0),
            Date::new(10_000, 1, 1),
            Date::new(10_000, 0, 0),
        ] {
            let err = Value::Date(bad).check(&c).unwrap_err();
            assert!(matches!(err, ValueError::InvalidDateTime { .. }), "{bad}");
        }
        // MySQL's zero date and dates with a zero month or day are stored
        // (the SQL node applies NO_ZERO_DATE / NO_ZERO_IN_DATE).
        for fuzzy in [
            Date::new(0, 0, 0),
            Date::new(2023, 0, 1),
            Date::new(2023, 1, 0),
            Date::new(2023, 0, 31),
        ] {
            assert!(Value::Date(fuzzy).check(&c).is_ok(), "{fuzzy}");
        }
        let c = col(ColumnType::DateTime { fsp: 3 });
        let t = |micros| Value::DateTime(DateTime::new(Date::new(2024, 1, 1), 23, 59, 59, micros));
        assert!(t(123_000).check(&c).is_ok());
        assert!(matches!(
            t(123_400).check(&c),
            Err(ValueError::TooPrecise { .. })
        ));
        assert!(
            Value::DateTime(DateTime::new(Date::new(2024, 1, 1), 24, 0, 0, 0))
                .check(&c)
                .is_err()
        );
        let c = col(ColumnType::Timestamp { fsp: 0 });
        assert!(Value::Timestamp(0).check(&c).is_ok());
        assert!(Value::Timestamp(TIMESTAMP_SECONDS_MAX * MICROS_PER_SECOND)
            .check(&c)
            .is_ok());
        assert!(
            Value::Timestamp((TIMESTAMP_SECONDS_MAX + 1) * MICROS_PER_SECOND)
                .check(&c)
                .is_err()
        );
        assert!(Value::Timestamp(-1).check(&c).is_err());
        assert!(Value::Timestamp(1).check(&c).is_err());
    }

    #[test]
    fn bits_and_blobs() {
        let c = col(ColumnType::Bit { bits: 3 });
        assert!(Value::Bit(7).check(&c).is_ok());
        assert!(Value::Bit(8).check(&c).is_err());
        assert!(Value::Bit(u64::MAX)
            .check(&col(ColumnType::Bit { bits: 64 }))
            .is_ok());
        let c = col(ColumnType::Blob);
        assert!(Value::Bytes(vec![1; 100_000]).check(&c).is_ok());
        let head = |total, inline: usize| Value::BlobHead {
            total_bytes: total,
            inline: vec![b'x'; inline],
        };
        assert!(head(10, 10).check(&c).is_ok());
        assert!(head(1000, 256).check(&c).is_ok());
        assert!(matches!(
            head(1000, 10).check(&c),
            Err(ValueError::BadBlobHead { .. })
        ));
        let text = col(ColumnType::Text {
            collation: Utf8mb4Bin,
        });
        assert!(Value::String("x".into()).check(&text).is_ok());
        let bad_utf8 = Value::BlobHead {
            total_bytes: 1,
            inline: vec![0xFF],
        };
        assert!(matches!(
            bad_utf8.check(&text),
            Err(ValueError::NotUtf8 { .. })
        ));
    }
}
