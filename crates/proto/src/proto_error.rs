//! [`ProtoError`]: why bytes are not a valid op batch, result batch, scan or
//! filter, and why a well-formed operation does not fit its table.
//!
//! Decode errors say which structure was being read and at which byte, so a
//! malformed frame can be traced; check errors name the table and the
//! column, because they become the client's permanent error message.
//! [`ProtoError::code`] maps each to the error code (see [`crate::error`])
//! that the data node sends back.

use schema::ValueError;

use crate::error;

/// Why a buffer cannot be read, or an operation does not fit its table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("{what}: byte {offset}: truncated, {needed} bytes needed, {available} left")]
    Truncated {
        what: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("{what}: bad magic {found:02x?} (expected {expected:02x?})")]
    BadMagic {
        what: &'static str,
        found: [u8; 2],
        expected: [u8; 2],
    },
    #[error("{what}: format version {version} is not known (this build reads {known})")]
    UnsupportedVersion {
        what: &'static str,
        version: u8,
        known: u8,
    },
    #[error("{what}: byte {offset}: {field} has unknown value {value}")]
    BadField {
        what: &'static str,
        offset: usize,
        field: &'static str,
        value: u64,
    },
    #[error("{what}: byte {offset}: text is not valid UTF-8")]
    BadUtf8 { what: &'static str, offset: usize },
    #[error("{what}: byte {offset}: not a decimal number")]
    BadDecimal { what: &'static str, offset: usize },
    #[error("{what}: {field} is {value}, at most {max} allowed")]
    OverLimit {
        what: &'static str,
        field: &'static str,
        value: u64,
        max: u64,
    },
    #[error("{what}: byte {offset}: {field} says {declared} bytes, its contents take {actual}")]
    BadLength {
        what: &'static str,
        offset: usize,
        field: &'static str,
        declared: usize,
        actual: usize,
    },
    #[error("{what}: {bytes} bytes after its end")]
    TrailingBytes { what: &'static str, bytes: usize },
    #[error("table `{table}`: {source}")]
    Value {
        table: String,
        #[source]
        source: ValueError,
    },
    #[error("table `{table}`: {role} names column {column}, the table has {columns}")]
    NoSuchColumn {
        table: String,
        role: &'static str,
        column: u16,
        columns: usize,
    },
    #[error("table `{table}`: {key} has {expected} columns, {given} key values given")]
    KeyCount {
        table: String,
        key: String,
        expected: usize,
        given: usize,
    },
    #[error(
        "table `{table}`: column `{column}` is in the primary key, an update cannot change it"
    )]
    PrimaryKeyUpdate { table: String, column: String },
    #[error("table `{table}`: column `{column}` is given twice")]
    DuplicateColumn { table: String, column: String },
    #[error("table `{table}`: an {kind} must give every column: `{column}` is missing")]
    MissingColumn {
        table: String,
        kind: &'static str,
        column: String,
    },
    #[error("table `{table}` has id {table_id}, the operation is for table id {given}")]
    WrongTable {
        table: String,
        table_id: u32,
        given: u32,
    },
    #[error(
        "table `{table}` is at version {version}, the operation was built for version {given}"
    )]
    WrongVersion {
        table: String,
        version: u32,
        given: u32,
    },
    #[error("table `{table}` has no {kind} index with id {index_id}")]
    NoSuchIndex {
        table: String,
        kind: &'static str,
        index_id: u32,
    },
    #[error("table `{table}` has {partitions} partitions: there is no partition {partition}")]
    NoSuchPartition {
        table: String,
        partition: u32,
        partitions: u32,
    },
    #[error("table `{table}`: {problem}")]
    BadOperation { table: String, problem: String },
    #[error("table `{table}`: column `{left}` ({left_ty}) cannot be compared with column `{right}` ({right_ty})")]
    Incomparable {
        table: String,
        left: String,
        left_ty: String,
        right: String,
        right_ty: String,
    },
    #[error("table `{table}`: column `{column}` is {ty}: {operation} does not apply to it")]
    NotFilterable {
        table: String,
        column: String,
        ty: String,
        operation: &'static str,
    },
}

impl ProtoError {
    /// The error code a data node answers with (see [`crate::error`]):
    /// decode errors are a malformed request; check errors map to NDB's
    /// application errors where NDB has one.
    pub fn code(&self) -> u32 {
        use schema::ValueError as V;
        match self {
            ProtoError::Truncated { .. }
            | ProtoError::BadMagic { .. }
            | ProtoError::UnsupportedVersion { .. }
            | ProtoError::BadField { .. }
            | ProtoError::BadUtf8 { .. }
            | ProtoError::BadDecimal { .. }
            | ProtoError::BadLength { .. }
            | ProtoError::TrailingBytes { .. } => error::MALFORMED_REQUEST,
            ProtoError::OverLimit { .. } => error::REQUEST_TOO_LARGE,
            ProtoError::Value { source, .. } => match source {
                V::NullNotAllowed { .. } => error::NULL_NOT_ALLOWED,
                V::TooLong { .. } => error::VALUE_TOO_LONG,
                V::NoSuchColumn { .. } => error::NO_SUCH_COLUMN,
                V::WrongColumnCount { .. } => error::KEY_MISSING,
                _ => error::BAD_VALUE,
            },
            ProtoError::NoSuchColumn { .. } => error::NO_SUCH_COLUMN,
            ProtoError::KeyCount { .. } => error::KEY_MISSING,
            ProtoError::PrimaryKeyUpdate { .. } => error::PRIMARY_KEY_UPDATE,
            ProtoError::DuplicateColumn { .. }
            | ProtoError::MissingColumn { .. }
            | ProtoError::BadOperation { .. } => error::BAD_OPERATION,
            ProtoError::WrongTable { .. } => error::NO_SUCH_TABLE,
            ProtoError::WrongVersion { .. } => error::WRONG_SCHEMA_VERSION,
            ProtoError::NoSuchIndex { .. } => error::NO_SUCH_INDEX,
            ProtoError::NoSuchPartition { .. } => error::BAD_OPERATION,
            ProtoError::Incomparable { .. } | ProtoError::NotFilterable { .. } => error::BAD_FILTER,
        }
    }
}
