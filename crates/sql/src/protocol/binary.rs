//! The binary protocol of prepared statements: result rows encoded by
//! each column's type, and `COM_STMT_EXECUTE` parameters decoded into
//! [`SqlValue`]s.
//!
//! A binary row is 0x00, a NULL bitmap of ⌈(columns + 2) / 8⌉ bytes (bit
//! `i + 2` set: column `i` is NULL) and the values that are not NULL:
//!
//! | type | bytes |
//! | --- | --- |
//! | TINY | 1 |
//! | SHORT, YEAR | 2 |
//! | LONG, INT24 | 4 |
//! | LONGLONG | 8 |
//! | FLOAT / DOUBLE | 4 / 8, IEEE little endian |
//! | DATE, DATETIME, TIMESTAMP | length 0, 4, 7 or 11; year u16, month, day, h, m, s, micros u32 |
//! | TIME | length 0, 8 or 12; negative, days u32, h, m, s, micros u32 |
//! | the rest (strings, DECIMAL, BLOB, BIT, JSON, …) | `string<lenenc>` |

use crate::error::{codes, SqlError};
use crate::value::{flags, ColumnMeta, ColumnType, Date, SqlValue, Time};

use super::packet::{put_lenenc_bytes, Cursor, Malformed};
use super::text;

/// The NULL bitmap of a result row starts at this bit.
pub const ROW_NULL_BITMAP_OFFSET: usize = 2;
/// A parameter type's flag byte: the integer is unsigned.
pub const PARAM_UNSIGNED: u8 = 0x80;

/// Appends the binary row of `values` (one per column of `columns`).
/// A value that its column's type cannot carry is the engine's mistake:
/// it is refused, not sent wrong.
pub fn encode_row(
    columns: &[ColumnMeta],
    values: &[SqlValue],
    out: &mut Vec<u8>,
) -> Result<(), SqlError> {
    if columns.len() != values.len() {
        return Err(internal(format_args!(
            "a row of {} values for {} columns",
            values.len(),
            columns.len()
        )));
    }
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(
        bitmap_at + (columns.len() + ROW_NULL_BITMAP_OFFSET).div_ceil(8),
        0,
    );
    for (index, (column, value)) in columns.iter().zip(values).enumerate() {
        if *value == SqlValue::Null {
            let bit = index + ROW_NULL_BITMAP_OFFSET;
            out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        encode_value(column, value, out).map_err(|()| {
            internal(format_args!(
                "column `{}` of type {:?} cannot carry {value:?}",
                column.name, column.ty
            ))
        })?;
    }
    Ok(())
}

fn internal(what: std::fmt::Arguments<'_>) -> SqlError {
    SqlError::new(
        codes::UNKNOWN,
        format!("internal error of the SQL node: {what}"),
    )
}

fn encode_value(column: &ColumnMeta, value: &SqlValue, out: &mut Vec<u8>) -> Result<(), ()> {
    use ColumnType as T;
    let unsigned = column.flags & flags::UNSIGNED != 0;
    match column.ty {
        T::Tiny => int(value, 1, unsigned, out),
        T::Short | T::Year => int(value, 2, unsigned, out),
        T::Long | T::Int24 => int(value, 4, unsigned, out),
        T::LongLong => int(value, 8, unsigned, out),
        T::Float => {
            let v = match *value {
                SqlValue::Float(v) => v,
                SqlValue::Double(v) => v as f32,
                _ => return Err(()),
            };
            out.extend_from_slice(&v.to_le_bytes());
            Ok(())
        }
        T::Double => {
            let v = match *value {
                SqlValue::Double(v) => v,
                SqlValue::Float(v) => f64::from(v),
                SqlValue::Int(v) => v as f64,
                SqlValue::UInt(v) => v as f64,
                _ => return Err(()),
            };
            out.extend_from_slice(&v.to_le_bytes());
            Ok(())
        }
        T::Date | T::DateTime | T::Timestamp => {
            let (date, time) = match *value {
                SqlValue::Date(date) => (date, Time::default()),
                SqlValue::DateTime(date, time) => (date, time),
                _ => return Err(()),
            };
            let date_only = column.ty == T::Date;
            datetime(date, if date_only { Time::default() } else { time }, out);
            Ok(())
        }
        T::Time => match *value {
            SqlValue::Time {
                negative,
                days,
                time,
            } => {
                duration(negative, days, time, out);
                Ok(())
            }
            _ => Err(()),
        },
        T::Null => Err(()),
        // Strings, DECIMAL, BLOB, BIT, ENUM, SET, JSON, GEOMETRY: the
        // bytes the text protocol would send.
        _ => {
            if let SqlValue::Bytes(bytes) = value {
                put_lenenc_bytes(out, bytes);
            } else {
                let mut scratch = Vec::new();
                text::render(value, column, &mut scratch);
                put_lenenc_bytes(out, &scratch);
            }
            Ok(())
        }
    }
}

/// An integer of `bytes` bytes, refused when it does not fit (the column
/// says whether it is unsigned).
fn int(value: &SqlValue, bytes: usize, unsigned: bool, out: &mut Vec<u8>) -> Result<(), ()> {
    let v = match *value {
        SqlValue::Int(v) => i128::from(v),
        SqlValue::UInt(v) => i128::from(v),
        _ => return Err(()),
    };
    let bits = 8 * bytes as u32;
    let (min, max) = if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    if v < min || v > max {
        return Err(());
    }
    out.extend_from_slice(&v.to_le_bytes()[..bytes]);
    Ok(())
}

/// DATE/DATETIME/TIMESTAMP in their shortest form.
fn datetime(date: Date, time: Time, out: &mut Vec<u8>) {
    let length: u8 = if time.micros != 0 {
        11
    } else if time != Time::default() {
        7
    } else if date != Date::default() {
        4
    } else {
        0
    };
    out.push(length);
    if length >= 4 {
        out.extend_from_slice(&date.year.to_le_bytes());
        out.extend_from_slice(&[date.month, date.day]);
    }
    if length >= 7 {
        out.extend_from_slice(&[time.hour, time.minute, time.second]);
    }
    if length == 11 {
        out.extend_from_slice(&time.micros.to_le_bytes());
    }
}

/// TIME in its shortest form.
fn duration(negative: bool, days: u32, time: Time, out: &mut Vec<u8>) {
    let length: u8 = if time.micros != 0 {
        12
    } else if days != 0 || time != Time::default() {
        8
    } else {
        0
    };
    out.push(length);
    if length >= 8 {
        out.push(u8::from(negative));
        out.extend_from_slice(&days.to_le_bytes());
        out.extend_from_slice(&[time.hour, time.minute, time.second]);
    }
    if length == 12 {
        out.extend_from_slice(&time.micros.to_le_bytes());
    }
}

/// The type of a parameter as `COM_STMT_EXECUTE` binds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamType {
    /// Its type code.
    pub ty: ColumnType,
    /// The integer is unsigned.
    pub unsigned: bool,
}

/// Why a parameter could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// The packet ends inside it (ERR 1835).
    Malformed,
    /// A type code MySQL does not define, or a date or time out of range
    /// (ERR 1210).
    Bad,
}

impl From<Malformed> for ParamError {
    fn from(_: Malformed) -> ParamError {
        ParamError::Malformed
    }
}

/// Reads a parameter type (type code and flag byte).
pub fn param_type(cursor: &mut Cursor<'_>) -> Result<ParamType, ParamError> {
    let code = cursor.u8()?;
    let flag = cursor.u8()?;
    let ty = ColumnType::from_code(code).ok_or(ParamError::Bad)?;
    Ok(ParamType {
        ty,
        unsigned: flag & PARAM_UNSIGNED != 0,
    })
}

/// Reads one parameter value of type `ty`.
pub fn param_value(cursor: &mut Cursor<'_>, ty: ParamType) -> Result<SqlValue, ParamError> {
    use ColumnType as T;
    let signed = !ty.unsigned;
    Ok(match ty.ty {
        T::Null => SqlValue::Null,
        T::Tiny => {
            let v = cursor.u8()?;
            if signed {
                SqlValue::Int(i64::from(v as i8))
            } else {
                SqlValue::UInt(u64::from(v))
            }
        }
        T::Short | T::Year => {
            let v = cursor.u16()?;
            if signed {
                SqlValue::Int(i64::from(v as i16))
            } else {
                SqlValue::UInt(u64::from(v))
            }
        }
        T::Long | T::Int24 => {
            let v = cursor.u32()?;
            if signed {
                SqlValue::Int(i64::from(v as i32))
            } else {
                SqlValue::UInt(u64::from(v))
            }
        }
        T::LongLong => {
            let v = cursor.u64()?;
            if signed {
                SqlValue::Int(v as i64)
            } else {
                SqlValue::UInt(v)
            }
        }
        T::Float => SqlValue::Float(f32::from_le_bytes(cursor.array()?)),
        T::Double => SqlValue::Double(f64::from_le_bytes(cursor.array()?)),
        T::Date | T::DateTime | T::Timestamp => {
            let (date, time) = read_datetime(cursor)?;
            if ty.ty == T::Date {
                SqlValue::Date(date)
            } else {
                SqlValue::DateTime(date, time)
            }
        }
        T::Time => read_duration(cursor)?,
        T::Decimal | T::NewDecimal => {
            let text = cursor.lenenc_bytes()?;
            let text = std::str::from_utf8(text).map_err(|_| ParamError::Bad)?;
            SqlValue::Decimal(text.to_owned())
        }
        T::VarChar
        | T::Bit
        | T::Json
        | T::Enum
        | T::Set
        | T::TinyBlob
        | T::MediumBlob
        | T::LongBlob
        | T::Blob
        | T::VarString
        | T::String
        | T::Geometry => SqlValue::Bytes(cursor.lenenc_bytes()?.to_vec()),
    })
}

fn read_datetime(cursor: &mut Cursor<'_>) -> Result<(Date, Time), ParamError> {
    let length = cursor.u8()?;
    let mut date = Date::default();
    let mut time = Time::default();
    if !matches!(length, 0 | 4 | 7 | 11) {
        return Err(ParamError::Bad);
    }
    if length >= 4 {
        date.year = cursor.u16()?;
        date.month = cursor.u8()?;
        date.day = cursor.u8()?;
    }
    if length >= 7 {
        time.hour = cursor.u8()?;
        time.minute = cursor.u8()?;
        time.second = cursor.u8()?;
    }
    if length == 11 {
        time.micros = cursor.u32()?;
    }
    let date_ok = date.year <= 9999 && date.month <= 12 && date.day <= 31;
    if !date_ok || !clock_ok(&time) {
        return Err(ParamError::Bad);
    }
    Ok((date, time))
}

fn read_duration(cursor: &mut Cursor<'_>) -> Result<SqlValue, ParamError> {
    let length = cursor.u8()?;
    let mut negative = false;
    let mut days = 0;
    let mut time = Time::default();
    if !matches!(length, 0 | 8 | 12) {
        return Err(ParamError::Bad);
    }
    if length >= 8 {
        negative = match cursor.u8()? {
            0 => false,
            1 => true,
            _ => return Err(ParamError::Bad),
        };
        days = cursor.u32()?;
        time.hour = cursor.u8()?;
        time.minute = cursor.u8()?;
        time.second = cursor.u8()?;
    }
    if length == 12 {
        time.micros = cursor.u32()?;
    }
    if !clock_ok(&time) {
        return Err(ParamError::Bad);
    }
    Ok(SqlValue::Time {
        negative,
        days,
        time,
    })
}

fn clock_ok(time: &Time) -> bool {
    time.hour <= 23 && time.minute <= 59 && time.second <= 59 && time.micros <= 999_999
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::value::charset;

    fn column(ty: ColumnType, unsigned: bool) -> ColumnMeta {
        let mut column = ColumnMeta::expr("c", ty, charset::BINARY, 20);
        if unsigned {
            column.flags |= flags::UNSIGNED;
        }
        column
    }

    #[test]
    fn a_row_has_its_null_bitmap_offset_by_two() {
        let columns = vec![column(ColumnType::Long, false); 7];
        let mut values = vec![SqlValue::Int(1); 7];
        values[0] = SqlValue::Null;
        values[6] = SqlValue::Null;
        let mut out = Vec::new();
        encode_row(&columns, &values, &mut out).unwrap();
        // Bits 2 and 8: bitmap bytes 0b100, 0b1.
        assert_eq!(&out[..3], &[0, 0b100, 0b1]);
        assert_eq!(out.len(), 3 + 5 * 4);
    }

    #[test]
    fn integers_are_refused_when_they_do_not_fit_their_column() {
        let mut out = Vec::new();
        let tiny = [column(ColumnType::Tiny, false)];
        assert!(encode_row(&tiny, &[SqlValue::Int(-128)], &mut out).is_ok());
        assert!(encode_row(&tiny, &[SqlValue::Int(128)], &mut out).is_err());
        let utiny = [column(ColumnType::Tiny, true)];
        assert!(encode_row(&utiny, &[SqlValue::UInt(255)], &mut out).is_ok());
        assert!(encode_row(&utiny, &[SqlValue::Int(-1)], &mut out).is_err());
        let ulong = [column(ColumnType::LongLong, true)];
        assert!(encode_row(&ulong, &[SqlValue::UInt(u64::MAX)], &mut out).is_ok());
        let long = [column(ColumnType::LongLong, false)];
        assert!(encode_row(&long, &[SqlValue::UInt(u64::MAX)], &mut out).is_err());
        assert!(encode_row(&long, &[SqlValue::Bytes(b"1".to_vec())], &mut out).is_err());
        assert!(encode_row(&long, &[], &mut out).is_err());
    }

    #[test]
    fn temporal_values_take_their_shortest_form_and_decode_back() {
        let date = Date {
            year: 2024,
            month: 12,
            day: 31,
        };
        let noon = Time {
            hour: 12,
            ..Time::default()
        };
        let precise = Time { micros: 5, ..noon };
        let cases = [
            (
                ColumnType::DateTime,
                SqlValue::DateTime(Date::default(), Time::default()),
                1,
            ),
            (
                ColumnType::DateTime,
                SqlValue::DateTime(date, Time::default()),
                5,
            ),
            (ColumnType::DateTime, SqlValue::DateTime(date, noon), 8),
            (ColumnType::Timestamp, SqlValue::DateTime(date, precise), 12),
            (ColumnType::Date, SqlValue::Date(date), 5),
            (
                ColumnType::Time,
                SqlValue::Time {
                    negative: true,
                    days: 3,
                    time: precise,
                },
                13,
            ),
            (
                ColumnType::Time,
                SqlValue::Time {
                    negative: false,
                    days: 0,
                    time: Time::default(),
                },
                1,
            ),
        ];
        for (ty, value, len) in cases {
            let mut out = Vec::new();
            encode_value(&column(ty, false), &value, &mut out).unwrap();
            assert_eq!(out.len(), len, "{value:?}");
            let param = ParamType {
                ty,
                unsigned: false,
            };
            let decoded = param_value(&mut Cursor::new(&out), param).unwrap();
            assert_eq!(decoded, value);
        }
    }

    fn any_value() -> impl Strategy<Value = SqlValue> {
        let date = (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(year, month, day)| Date {
            year,
            month,
            day,
        });
        let time = (any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>()).prop_map(
            |(hour, minute, second, micros)| Time {
                hour,
                minute,
                second,
                micros,
            },
        );
        prop_oneof![
            Just(SqlValue::Null),
            any::<i64>().prop_map(SqlValue::Int),
            any::<u64>().prop_map(SqlValue::UInt),
            any::<f32>().prop_map(SqlValue::Float),
            any::<f64>().prop_map(SqlValue::Double),
            "[-0-9.]{0,12}".prop_map(SqlValue::Decimal),
            prop::collection::vec(any::<u8>(), 0..16).prop_map(SqlValue::Bytes),
            date.clone().prop_map(SqlValue::Date),
            (date, time.clone()).prop_map(|(d, t)| SqlValue::DateTime(d, t)),
            (any::<bool>(), any::<u32>(), time).prop_map(|(negative, days, time)| {
                SqlValue::Time {
                    negative,
                    days,
                    time,
                }
            }),
        ]
    }

    proptest! {
        /// Any value in any column: a row, or a refusal; never a panic.
        /// Parameters decode from any bytes the same way.
        #[test]
        fn any_value_in_any_column_encodes_or_is_refused(
            code in any::<u8>(),
            unsigned in any::<bool>(),
            decimals in any::<u8>(),
            length in any::<u32>(),
            value in any_value(),
            bytes in prop::collection::vec(any::<u8>(), 0..24),
        ) {
            let Some(ty) = ColumnType::from_code(code) else {
                return Ok(());
            };
            let mut column = column(ty, unsigned);
            column.decimals = decimals;
            column.length = length;
            let mut out = Vec::new();
            let _ = encode_row(std::slice::from_ref(&column), std::slice::from_ref(&value), &mut out);
            let mut text = Vec::new();
            text::render(&value, &column, &mut text);
            let _ = param_value(&mut Cursor::new(&bytes), ParamType { ty, unsigned });
        }
    }

    #[test]
    fn parameters_decode_by_type_and_sign() {
        let p = |ty, unsigned| ParamType { ty, unsigned };
        let mut c = Cursor::new(&[0xff]);
        assert_eq!(
            param_value(&mut c, p(ColumnType::Tiny, false)),
            Ok(SqlValue::Int(-1))
        );
        let mut c = Cursor::new(&[0xff]);
        assert_eq!(
            param_value(&mut c, p(ColumnType::Tiny, true)),
            Ok(SqlValue::UInt(255))
        );
        let bytes = (-3i64).to_le_bytes();
        let mut c = Cursor::new(&bytes);
        assert_eq!(
            param_value(&mut c, p(ColumnType::LongLong, false)),
            Ok(SqlValue::Int(-3))
        );
        let mut c = Cursor::new(&[2, b'h', b'i']);
        let text = param_value(&mut c, p(ColumnType::VarString, false));
        assert_eq!(text, Ok(SqlValue::Bytes(b"hi".to_vec())));
        let mut c = Cursor::new(&[5, b'h', b'i']);
        let cut = param_value(&mut c, p(ColumnType::VarString, false));
        assert_eq!(cut, Err(ParamError::Malformed));
        let mut c = Cursor::new(&[3, 1, 2, 3]);
        assert_eq!(
            param_value(&mut c, p(ColumnType::Date, false)),
            Err(ParamError::Bad)
        );
        let mut c = Cursor::new(&[0x42, 0]);
        assert_eq!(param_type(&mut c), Err(ParamError::Bad));
    }
}
