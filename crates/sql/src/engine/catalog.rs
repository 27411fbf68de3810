//! The catalog: databases and tables as SQL sees them, kept in the cluster.
//!
//! A table `t` of database `d` is the cluster table `d/def/t` (NDB's
//! naming), so every SQL node of the cluster sees it at once. What MySQL
//! declares and the storage has no type for (TIME, YEAR, ENUM, SET, the
//! TEXT/BLOB sizes, AUTO_INCREMENT) is the SQL node's: it travels with the
//! table definition ([`SqlType`] per column), and values are converted at
//! the edge (`exec`).
//!
//! (Partly a stub: the interface the executors use is fixed here; the
//! catalog work of issue 20 fills in the bodies.)

use std::sync::Arc;

use schema::{Collation, ColumnType as NativeType};
use skarv_client::{Session, Table};

use super::{Conn, Engine};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta};

/// The size class of a TEXT or BLOB column (MySQL's four).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlobSize {
    /// TINYTEXT/TINYBLOB: 255 bytes.
    Tiny,
    /// TEXT/BLOB: 65,535 bytes.
    Normal,
    /// MEDIUMTEXT/MEDIUMBLOB: 16 MiB − 1.
    Medium,
    /// LONGTEXT/LONGBLOB: 4 GiB − 1 (bounded by `BLOB_BYTES_MAX`).
    Long,
}

/// A column's type as MySQL declares it. Each maps onto one storage type
/// ([`SqlType::native`]); the ones the storage lacks are kept as numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum SqlType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    MediumInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Char {
        length: u16,
        collation: Collation,
    },
    VarChar {
        max: u16,
        collation: Collation,
    },
    Binary {
        length: u16,
    },
    VarBinary {
        max: u16,
    },
    Text {
        size: BlobSize,
        collation: Collation,
    },
    Blob {
        size: BlobSize,
    },
    Date,
    /// Stored as BIGINT: signed microseconds.
    Time {
        fsp: u8,
    },
    DateTime {
        fsp: u8,
    },
    Timestamp {
        fsp: u8,
    },
    /// Stored as SMALLINT UNSIGNED: the year, 0 for 0000.
    Year,
    Bit {
        bits: u8,
    },
    /// Stored as SMALLINT UNSIGNED: the 1-based index, 0 for ''.
    Enum(Vec<String>),
    /// Stored as BIGINT UNSIGNED: a bit per member.
    Set(Vec<String>),
}

/// One visible column of a table (the hidden `$PK` is not one).
#[derive(Clone, Debug)]
pub struct SqlColumn {
    /// Its name.
    pub name: String,
    /// Its position in the native table (`Table::columns`).
    pub native: usize,
    /// Its declared type.
    pub ty: SqlType,
    /// NULL allowed.
    pub nullable: bool,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
    /// Its result-set metadata (schema, table and names filled in).
    pub meta: ColumnMeta,
}

/// A table as the SQL node sees it.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// Its database.
    pub db: String,
    /// Its name within the database.
    pub name: String,
    /// The native table (`db/def/name`).
    pub native: Arc<Table>,
    /// The visible columns, in declared order.
    pub columns: Vec<SqlColumn>,
    /// The table has no declared primary key: the hidden `$PK` (BIGINT
    /// UNSIGNED) is its key, filled from the table's auto-increment.
    pub hidden_key: bool,
}

impl TableInfo {
    /// A column by name (case-insensitive, as MySQL's).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }
}

/// The cluster table that holds `db`.`table`.
pub fn cluster_name(db: &str, table: &str) -> String {
    format!("{db}/def/{table}")
}

/// Caches the SQL node shares between connections.
#[derive(Default)]
pub struct Shared {}

/// Makes sure the SQL node's system tables exist.
pub fn bootstrap(_engine: &Arc<Engine>, _session: &Session) -> SqlResult<()> {
    Ok(())
}

/// A table, by the database the statement named or the session's current
/// one: 1046 when neither, 1146 for an unknown table.
pub fn table(conn: &Conn<'_>, db: Option<&str>, name: &str) -> SqlResult<Arc<TableInfo>> {
    let Some(db) = db.or(conn.session.database.as_deref()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    let native = match conn.native.table(&cluster_name(db, name)) {
        Ok(native) => native,
        Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => {
            return Err(SqlError::new(
                codes::TABLE_NOT_FOUND,
                format!("Table '{db}.{name}' doesn't exist"),
            ))
        }
        Err(e) => return Err(super::txn::native_error(&e)),
    };
    Ok(Arc::new(table_info(db, name, native)))
}

/// The SQL view of a native table, each column's type taken from its
/// storage type (what a table made outside SQL has).
pub fn table_info(db: &str, name: &str, native: Arc<Table>) -> TableInfo {
    let def = native.def();
    let mut columns = Vec::with_capacity(def.columns.len());
    let mut hidden_key = false;
    for (at, column) in def.columns.iter().enumerate() {
        if column.name == schema::HIDDEN_PRIMARY_KEY_COLUMN {
            hidden_key = true;
            continue;
        }
        let ty = SqlType::of_native(column.ty);
        let mut meta = column_meta(&ty, column.nullable);
        if def.primary_key.contains(&at) {
            meta.flags |= flags::PRI_KEY | flags::NOT_NULL;
        }
        meta.schema = db.to_owned();
        meta.table = name.to_owned();
        meta.org_table = name.to_owned();
        meta.name = column.name.clone();
        meta.org_name = column.name.clone();
        columns.push(SqlColumn {
            name: column.name.clone(),
            native: at,
            ty,
            nullable: column.nullable,
            auto_increment: false,
            meta,
        });
    }
    TableInfo {
        db: db.to_owned(),
        name: name.to_owned(),
        native,
        columns,
        hidden_key,
    }
}

impl SqlType {
    /// The SQL type of a storage type, for columns without SQL metadata.
    pub fn of_native(ty: NativeType) -> SqlType {
        match ty {
            NativeType::TinyInt { unsigned } => SqlType::TinyInt { unsigned },
            NativeType::SmallInt { unsigned } => SqlType::SmallInt { unsigned },
            NativeType::MediumInt { unsigned } => SqlType::MediumInt { unsigned },
            NativeType::Int { unsigned } => SqlType::Int { unsigned },
            NativeType::BigInt { unsigned } => SqlType::BigInt { unsigned },
            NativeType::Float => SqlType::Float,
            NativeType::Double => SqlType::Double,
            NativeType::Decimal { precision, scale } => SqlType::Decimal { precision, scale },
            NativeType::Char { len, collation } => SqlType::Char {
                length: len,
                collation,
            },
            NativeType::VarChar { max, collation } => SqlType::VarChar { max, collation },
            NativeType::Binary { len } => SqlType::Binary { length: len },
            NativeType::VarBinary { max } => SqlType::VarBinary { max },
            NativeType::Date => SqlType::Date,
            NativeType::DateTime { fsp } => SqlType::DateTime { fsp },
            NativeType::Timestamp { fsp } => SqlType::Timestamp { fsp },
            NativeType::Bit { bits } => SqlType::Bit { bits },
            NativeType::Blob => SqlType::Blob {
                size: BlobSize::Long,
            },
            NativeType::Text { collation } => SqlType::Text {
                size: BlobSize::Long,
                collation,
            },
        }
    }
}

fn collation_charset(collation: Collation) -> u16 {
    match collation {
        Collation::Utf8mb4Bin => charset::UTF8MB4_BIN,
        Collation::Utf8mb4GeneralCi => charset::UTF8MB4_GENERAL_CI,
    }
}

/// The result-set metadata MySQL gives a column of this type (names left
/// empty for the caller).
pub fn column_meta(ty: &SqlType, nullable: bool) -> ColumnMeta {
    use crate::value::ColumnType as T;
    let int = |t: T, length: u32, unsigned: bool| {
        let flags = flags::NUM | if unsigned { flags::UNSIGNED } else { 0 };
        (t, charset::BINARY, length, flags, 0u8)
    };
    let blob_length = |size: BlobSize| match size {
        BlobSize::Tiny => 255,
        BlobSize::Normal => 65_535,
        BlobSize::Medium => 16_777_215,
        BlobSize::Long => u32::MAX,
    };
    // MySQL's display lengths count bytes of the character set: 4 per
    // utf8mb4 character.
    let chars = |n: u16| u32::from(n) * 4;
    let (ty, charset, length, mut flags, decimals) = match ty {
        SqlType::TinyInt { unsigned } => int(T::Tiny, 4 - u32::from(*unsigned), *unsigned),
        SqlType::SmallInt { unsigned } => int(T::Short, 6 - u32::from(*unsigned), *unsigned),
        SqlType::MediumInt { unsigned } => int(T::Int24, 9 - u32::from(*unsigned), *unsigned),
        SqlType::Int { unsigned } => int(T::Long, 11 - u32::from(*unsigned), *unsigned),
        SqlType::BigInt { unsigned } => int(T::LongLong, 20, *unsigned),
        SqlType::Float => (T::Float, charset::BINARY, 12, flags::NUM, 31),
        SqlType::Double => (T::Double, charset::BINARY, 22, flags::NUM, 31),
        SqlType::Decimal { precision, scale } => {
            let length = u32::from(*precision) + u32::from(*scale > 0) + 1;
            (T::NewDecimal, charset::BINARY, length, flags::NUM, *scale)
        }
        SqlType::Char { length, collation } => (
            T::String,
            collation_charset(*collation),
            chars(*length),
            0,
            0,
        ),
        SqlType::VarChar { max, collation } => (
            T::VarString,
            collation_charset(*collation),
            chars(*max),
            0,
            0,
        ),
        SqlType::Binary { length } => (
            T::String,
            charset::BINARY,
            u32::from(*length),
            flags::BINARY,
            0,
        ),
        SqlType::VarBinary { max } => (
            T::VarString,
            charset::BINARY,
            u32::from(*max),
            flags::BINARY,
            0,
        ),
        SqlType::Text { size, collation } => (
            T::Blob,
            collation_charset(*collation),
            blob_length(*size),
            flags::BLOB,
            0,
        ),
        SqlType::Blob { size } => (
            T::Blob,
            charset::BINARY,
            blob_length(*size),
            flags::BLOB | flags::BINARY,
            0,
        ),
        SqlType::Date => (T::Date, charset::BINARY, 10, flags::BINARY, 0),
        SqlType::Time { fsp } => {
            let length = 10 + u32::from(*fsp) + u32::from(*fsp > 0);
            (T::Time, charset::BINARY, length, flags::BINARY, *fsp)
        }
        SqlType::DateTime { fsp } => {
            let length = 19 + u32::from(*fsp) + u32::from(*fsp > 0);
            (T::DateTime, charset::BINARY, length, flags::BINARY, *fsp)
        }
        SqlType::Timestamp { fsp } => {
            let length = 19 + u32::from(*fsp) + u32::from(*fsp > 0);
            let flags = flags::BINARY | flags::TIMESTAMP;
            (T::Timestamp, charset::BINARY, length, flags, *fsp)
        }
        SqlType::Year => (T::Year, charset::BINARY, 4, flags::UNSIGNED | flags::NUM, 0),
        SqlType::Bit { bits } => (
            T::Bit,
            charset::BINARY,
            u32::from(*bits),
            flags::UNSIGNED,
            0,
        ),
        SqlType::Enum(members) => {
            let longest = members.iter().map(|m| m.chars().count()).max().unwrap_or(0);
            let length = u32::try_from(longest).unwrap_or(u32::MAX).saturating_mul(4);
            (
                T::String,
                charset::UTF8MB4_GENERAL_CI,
                length,
                flags::ENUM,
                0,
            )
        }
        SqlType::Set(members) => {
            let total: usize = members.iter().map(|m| m.chars().count() + 1).sum();
            let length = u32::try_from(total).unwrap_or(u32::MAX).saturating_mul(4);
            (
                T::String,
                charset::UTF8MB4_GENERAL_CI,
                length,
                flags::SET,
                0,
            )
        }
    };
    if !nullable {
        flags |= flags::NOT_NULL;
    }
    ColumnMeta {
        schema: String::new(),
        table: String::new(),
        org_table: String::new(),
        name: String::new(),
        org_name: String::new(),
        charset,
        length,
        ty,
        flags,
        decimals,
    }
}

/// The next `count` values of a table's auto-increment (for its
/// AUTO_INCREMENT column or hidden key): the first of them. Values are
/// unique cluster-wide; a SQL node reserves them in ranges, so values from
/// two SQL nodes interleave (as NDB's do).
pub fn next_auto_increment(_conn: &Conn<'_>, table: &TableInfo, _count: u64) -> SqlResult<u64> {
    Err(SqlError::unsupported(format_args!(
        "AUTO_INCREMENT of `{}`.`{}`",
        table.db, table.name
    )))
}

/// Whether a database exists.
pub fn database_exists(_conn: &Conn<'_>, _name: &str) -> SqlResult<bool> {
    Ok(true)
}
