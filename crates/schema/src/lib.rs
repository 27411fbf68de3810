//! The schema: how data is described and how it becomes bytes.
//!
//! The dictionary keeps table definitions, the LDM stores rows and keys,
//! and clients encode keys and pick partitions; all of them must agree to
//! the byte. This crate is that agreement, in one place. It is a crate of
//! its own, under `storage`, `proto` and `skarv-client`, so that an API node
//! links the schema without the page pool, redo log and checkpoints:
//!
//! - [`types`]: column types and collations, and [`Column`].
//! - [`table`]: [`TableDef`] and [`IndexDef`], every limit a table must keep
//!   ([`TableDef::validate`]), and the hidden tables NDB derives from a table
//!   (a unique index is a table keyed by the index columns; a BLOB's parts
//!   live in a table keyed by the row's key and a part number).
//! - [`value`]: [`Value`] and its borrowed form [`ValueRef`], and the exact
//!   check of a value against its column.
//! - [`decimal`]: exact DECIMAL numbers and MySQL's binary DECIMAL format.
//! - [`row`]: the row format ([`RowLayout`]): a fixed part and a var part,
//!   documented byte by byte there.
//! - [`key`]: memcomparable keys ([`KeyEncoder`]): byte order is SQL order
//!   under each column's collation, documented byte by byte there.
//! - [`distribution`]: the distribution hash and the partition of a key,
//!   shared with clients and pinned by `docs/distribution-hash.md`.
//!
//! The row and key bytes are part of the checkpoint and redo formats and
//! the key bytes and the hash are part of the client protocol: changing any
//! of them is a format change.

mod codec;
pub mod decimal;
pub mod distribution;
mod general_ci;
pub mod key;
pub mod row;
pub mod table;
pub mod types;
pub mod value;

#[cfg(test)]
mod tests;

pub use codec::*;
pub use decimal::{Decimal, DecimalParseError};
pub use distribution::{distribution_hash, partition_of, DISTRIBUTION_HASH_SEED};
pub use key::{KeyEncoder, STRING_KEY_CHUNK_BYTES};
pub use row::{
    blob_part_count, blob_parts, ColumnChanges, IntegerCell, IntegerRead, PaddedRow,
    RowFormatError, RowLayout, INTEGER_READ_ROW_BYTES_MAX,
};
pub use table::{
    IndexDef, IndexKind, SchemaError, TableDef, BLOB_PART_DATA_COLUMN, BLOB_PART_NUMBER_COLUMN,
    COLUMNS_MAX, HIDDEN_PRIMARY_KEY_COLUMN, INDEXES_MAX, INDEX_NAME_BYTES_MAX, KEY_BYTES_MAX,
    NAME_BYTES_MAX, PARTITIONS_MAX, ROW_BYTES_MAX, SQL_META_BYTES_MAX, TABLE_NAME_BYTES_MAX,
    UNIQUE_INDEX_BASE_KEY_COLUMN,
};
pub use types::{
    integer_code_fits, Collation, Column, ColumnType, Storage, BLOB_INLINE_BYTES, BLOB_PART_BYTES,
    INTEGER_CODE_UNSIGNED,
};
pub use value::{Date, DateTime, Value, ValueError, ValueRef};
