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

use schema::Collation;
use skarv_client::{Session, Table};

use super::{Conn, Engine};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::ColumnMeta;

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
/// one: 1046 when neither, 1049 for an unknown database, 1146 for an
/// unknown table.
pub fn table(conn: &Conn<'_>, db: Option<&str>, name: &str) -> SqlResult<Arc<TableInfo>> {
    let Some(db) = db.or(conn.session.database.as_deref()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    Err(SqlError::new(
        codes::TABLE_NOT_FOUND,
        format!("Table '{db}.{name}' doesn't exist"),
    ))
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
