//! What the protocol and the engine exchange: SQL values and the metadata of
//! a result column, in MySQL's own terms (type codes, flags, character set
//! numbers), so that the protocol can encode them without knowing SQL.
//!
//! The engine promises that every value of a result column has the form its
//! [`ColumnMeta::ty`] asks for (see [`SqlValue`]): the protocol encodes a
//! binary-protocol row by the column's type and may refuse a mismatch.

use std::sync::Arc;

/// A value of a result row or a statement parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A signed integer (TINY…LONGLONG, YEAR; BIT as its number).
    Int(i64),
    /// An unsigned integer (the UNSIGNED types).
    UInt(u64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// DECIMAL, in its exact spelling with the column's scale (`"-12.50"`).
    Decimal(String),
    /// Character and binary strings, BLOB/TEXT, ENUM/SET as text: bytes,
    /// UTF-8 for character columns.
    Bytes(Vec<u8>),
    /// DATE.
    Date(Date),
    /// DATETIME and TIMESTAMP (TIMESTAMP in the session's time zone).
    DateTime(Date, Time),
    /// TIME: a signed duration.
    Time {
        /// A negative duration.
        negative: bool,
        /// Whole days (the binary protocol keeps them apart from hours).
        days: u32,
        /// The rest, below 24 hours.
        time: Time,
    },
}

/// A calendar date (0000-00-00 allowed, as MySQL's zero date).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Date {
    /// 0..=9999.
    pub year: u16,
    /// 0..=12.
    pub month: u8,
    /// 0..=31.
    pub day: u8,
}

/// A time of day with microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time {
    /// 0..=23 (TIME's hours past 23 are in its `days`).
    pub hour: u8,
    /// 0..=59.
    pub minute: u8,
    /// 0..=59.
    pub second: u8,
    /// 0..=999,999.
    pub micros: u32,
}

/// MySQL's column type codes (`enum_field_types`), as sent in column
/// definitions and binary-protocol parameter types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum ColumnType {
    Decimal = 0x00,
    Tiny = 0x01,
    Short = 0x02,
    Long = 0x03,
    Float = 0x04,
    Double = 0x05,
    Null = 0x06,
    Timestamp = 0x07,
    LongLong = 0x08,
    Int24 = 0x09,
    Date = 0x0a,
    Time = 0x0b,
    DateTime = 0x0c,
    Year = 0x0d,
    VarChar = 0x0f,
    Bit = 0x10,
    Json = 0xf5,
    NewDecimal = 0xf6,
    Enum = 0xf7,
    Set = 0xf8,
    TinyBlob = 0xf9,
    MediumBlob = 0xfa,
    LongBlob = 0xfb,
    Blob = 0xfc,
    VarString = 0xfd,
    String = 0xfe,
    Geometry = 0xff,
}

impl ColumnType {
    /// The type of a code, None for a code MySQL does not define.
    pub fn from_code(code: u8) -> Option<ColumnType> {
        use ColumnType::*;
        Some(match code {
            0x00 => Decimal,
            0x01 => Tiny,
            0x02 => Short,
            0x03 => Long,
            0x04 => Float,
            0x05 => Double,
            0x06 => Null,
            0x07 => Timestamp,
            0x08 => LongLong,
            0x09 => Int24,
            0x0a => Date,
            0x0b => Time,
            0x0c => DateTime,
            0x0d => Year,
            0x0f => VarChar,
            0x10 => Bit,
            0xf5 => Json,
            0xf6 => NewDecimal,
            0xf7 => Enum,
            0xf8 => Set,
            0xf9 => TinyBlob,
            0xfa => MediumBlob,
            0xfb => LongBlob,
            0xfc => Blob,
            0xfd => VarString,
            0xfe => String,
            0xff => Geometry,
            _ => return None,
        })
    }
}

/// Column definition flags (MySQL's `*_FLAG`).
/// A column's `decimals` that says "not fixed" (MySQL's `NOT_FIXED_DEC`):
/// a DOUBLE shown with all its digits. The protocol prints by it and the
/// expressions carry it.
pub const NOT_FIXED_DECIMALS: u8 = 31;

pub mod flags {
    #![allow(missing_docs)]
    pub const NOT_NULL: u16 = 1;
    pub const PRI_KEY: u16 = 2;
    pub const UNIQUE_KEY: u16 = 4;
    pub const MULTIPLE_KEY: u16 = 8;
    pub const BLOB: u16 = 16;
    pub const UNSIGNED: u16 = 32;
    pub const ZEROFILL: u16 = 64;
    pub const BINARY: u16 = 128;
    pub const ENUM: u16 = 256;
    pub const AUTO_INCREMENT: u16 = 512;
    pub const TIMESTAMP: u16 = 1024;
    pub const SET: u16 = 2048;
    pub const NO_DEFAULT_VALUE: u16 = 4096;
    pub const ON_UPDATE_NOW: u16 = 8192;
    pub const NUM: u16 = 32768;
}

/// Character set numbers of column definitions (MySQL's collation ids).
pub mod charset {
    /// `binary`: numbers, dates and binary strings.
    pub const BINARY: u16 = 63;
    /// `utf8mb4_general_ci`.
    pub const UTF8MB4_GENERAL_CI: u16 = 45;
    /// `utf8mb4_bin`.
    pub const UTF8MB4_BIN: u16 = 46;
    /// `latin1_swedish_ci`.
    pub const LATIN1_SWEDISH_CI: u16 = 8;
}

/// The metadata of one result column (or prepared-statement parameter), as
/// MySQL's column definition packet carries it. The names are shared
/// (`Arc<str>`): a table's metadata is copied into every query's plan, and
/// a copy then costs no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Database of the column's table ("" for an expression).
    pub schema: Arc<str>,
    /// Table name or alias as the query wrote it ("" for an expression).
    pub table: Arc<str>,
    /// The table's own name.
    pub org_table: Arc<str>,
    /// Column name or alias as the query wrote it.
    pub name: Arc<str>,
    /// The column's own name.
    pub org_name: Arc<str>,
    /// Character set number ([`charset`]).
    pub charset: u16,
    /// Display length in bytes of the charset (MySQL's `column_length`).
    pub length: u32,
    /// Type code.
    pub ty: ColumnType,
    /// [`flags`].
    pub flags: u16,
    /// Digits after the point (DECIMAL, fractional seconds); 0x1f for
    /// floating point without a declared scale, as MySQL sends.
    pub decimals: u8,
    /// A JSON column's (LONGTEXT with MariaDB's `json_valid` check): sent
    /// to clients with MySQL 8's type code JSON (245), by which drivers
    /// (Node's mysql2, Connector/J) know to parse the text; everywhere
    /// else the column is the LONGTEXT `ty` says.
    pub json: bool,
}

impl ColumnMeta {
    /// A column of an expression (no table) of the given type.
    pub fn expr(
        name: impl Into<Arc<str>>,
        ty: ColumnType,
        charset: u16,
        length: u32,
    ) -> ColumnMeta {
        let name = name.into();
        ColumnMeta {
            schema: Arc::default(),
            table: Arc::default(),
            org_table: Arc::default(),
            org_name: Arc::default(),
            name,
            charset,
            length,
            ty,
            flags: 0,
            decimals: 0,
            json: false,
        }
    }
}
