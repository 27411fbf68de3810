//! Table and index definitions, their limits, and the hidden tables NDB
//! builds from them (unique indexes and blob parts).
//!
//! The dictionary stores [`TableDef`]s and hands them to every LDM and
//! client; [`TableDef::validate`] is the one place that says what a table
//! may look like, so a definition that passed it can be laid out
//! ([`super::row::RowLayout`]) and keyed ([`super::key::KeyEncoder`])
//! without further checks.

use std::collections::HashSet;

use super::key::{column_max_encoded_bytes, KeyEncoder};
use super::types::{Column, ColumnType, BLOB_PART_BYTES};
use super::value::ValueError;

/// Most columns of a table, hidden ones included (NDB's limit).
pub const COLUMNS_MAX: usize = 512;
/// Largest row: the sum of the largest stored size of every column (BLOB
/// and TEXT counting their inline head), the NULL bitmap and the var part's
/// offsets. NDB's old limit was 8,052; 30,000 is NDB 7.6/8.0's.
pub const ROW_BYTES_MAX: usize = 30_000;
/// Longest encoded key of a primary key or an index, in bytes (NDB allows
/// up to 3,500 bytes of key data in 4-byte words; a little more here because
/// the memcomparable encoding adds chunk markers).
pub const KEY_BYTES_MAX: usize = 4_096;
/// Longest table name, in bytes (NDB's internal names, "db/def/table", fit).
pub const TABLE_NAME_BYTES_MAX: usize = 128;
/// Longest column name, and longest key name a SQL statement gives, in
/// bytes (MySQL's identifier limit).
pub const NAME_BYTES_MAX: usize = 64;
/// Longest native index name, in bytes: a key's name of
/// [`NAME_BYTES_MAX`] and the suffix a SQL node adds to name the key's
/// other native index (the unique hash index `name$unique`, as NDB
/// names it), with room to spare.
pub const INDEX_NAME_BYTES_MAX: usize = NAME_BYTES_MAX + 16;
/// Most indexes of a table (MySQL's MAX_INDEXES).
pub const INDEXES_MAX: usize = 64;
/// Most partitions of a table (NDB 7.x's limit).
pub const PARTITIONS_MAX: u32 = 2_048;
/// Largest [`TableDef::sql_meta`], in bytes: what a SQL node declares of a
/// table of [`COLUMNS_MAX`] columns (ENUM members, comments) with room to
/// spare, and still a small part of a schema signal.
pub const SQL_META_BYTES_MAX: usize = 256 << 10;
/// Name of the hidden primary-key column of a table created without a
/// primary key: BIGINT UNSIGNED, given by the inserting transaction (NDB's
/// `$PK`, filled from the table's auto-increment).
pub const HIDDEN_PRIMARY_KEY_COLUMN: &str = "$PK";
/// Name of the column of a unique index's hidden table that holds the base
/// row's primary key (encoded by [`KeyEncoder::primary_key`]).
pub const UNIQUE_INDEX_BASE_KEY_COLUMN: &str = "$BASE_PK";
/// Name of the part-number column of a blob parts table.
pub const BLOB_PART_NUMBER_COLUMN: &str = "$PART";
/// Name of the data column of a blob parts table.
pub const BLOB_PART_DATA_COLUMN: &str = "$DATA";

/// The two kinds of secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// A hidden table keyed by the index columns (see
    /// [`TableDef::unique_index_table`]).
    Unique,
    /// A per-partition ordered index over memcomparable keys.
    Ordered,
}

/// A secondary index of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    /// Dictionary id; for a unique index also the id of its hidden table.
    pub id: u32,
    /// Positions of the indexed columns in the table, in index order.
    pub columns: Vec<usize>,
    pub kind: IndexKind,
}

/// A table definition, as the dictionary stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    pub name: String,
    pub id: u32,
    /// Changes with every alter; rows and keys are read with the layout of
    /// their table version.
    pub version: u32,
    pub columns: Vec<Column>,
    /// Positions of the primary-key columns, in key order. Empty before
    /// [`TableDef::build`], which adds the hidden `$PK` column.
    pub primary_key: Vec<usize>,
    /// A prefix of the primary key that picks the partition (`PARTITION BY
    /// KEY`). Empty before [`TableDef::build`], which makes it the whole
    /// primary key.
    pub distribution_key: Vec<usize>,
    pub indexes: Vec<IndexDef>,
    pub partitions: u32,
    /// NDB's `READ_BACKUP=1`: a committed read by key may be served by any
    /// serving replica of its partition, the coordinator's own node first,
    /// not only by the primary. Safe because a commit is acknowledged only
    /// once every replica has it.
    pub read_backup: bool,
    /// NDB's `FULLY_REPLICATED=1`: every node group holds a copy of every
    /// partition (every data node holds the whole table), so a committed
    /// read is served by the coordinator's own node. Implies
    /// [`TableDef::read_backup`]. Writes pass every copy in every group.
    pub fully_replicated: bool,
    /// What a SQL node declares of the table that the storage has no type
    /// for (TIME, ENUM, the declared spelling, AUTO_INCREMENT, comments),
    /// in the SQL node's own format (NDB keeps MySQL's `.frm` the same
    /// way). Opaque here: the data nodes store and ship it, never read it;
    /// an alter may change it. Empty for a table made outside SQL.
    pub sql_meta: Vec<u8>,
    /// The table this one replaces (its id; 0: none): a copying ALTER
    /// TABLE's copy names the old table when it takes the old one's name,
    /// and the change stream follows a subscribed table to it
    /// (docs/events.md, "A copying ALTER"). Kept by later alters; the data
    /// nodes act at the alter that sets it.
    pub replaces: u32,
}

/// Why a table definition is refused. Every variant names the table and,
/// where one is at fault, the column or index and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("table name `{name}` is {bytes} bytes: 1..={TABLE_NAME_BYTES_MAX} allowed")]
    BadTableName { name: String, bytes: usize },
    #[error("table `{table}` has {count} columns: 1..={COLUMNS_MAX} allowed")]
    ColumnCount { table: String, count: usize },
    #[error("table `{table}`: {what} name `{name}` is {bytes} bytes: 1..={bytes_max} allowed")]
    BadName {
        table: String,
        what: &'static str,
        name: String,
        bytes: usize,
        bytes_max: usize,
    },
    #[error("table `{table}`: column `{column}` is defined twice (names are case-insensitive)")]
    DuplicateColumn { table: String, column: String },
    #[error("table `{table}`, column `{column}`: {problem}")]
    BadColumnType {
        table: String,
        column: String,
        problem: String,
    },
    #[error("table `{table}`, column `{column}`: bad default: {source}")]
    BadDefault {
        table: String,
        column: String,
        source: Box<ValueError>,
    },
    #[error("table `{table}`, column `{column}`: a {ty} column cannot have a default")]
    BlobDefault {
        table: String,
        column: String,
        ty: String,
    },
    #[error("table `{table}`: rows of up to {bytes} bytes, at most {ROW_BYTES_MAX} allowed")]
    RowTooLarge { table: String, bytes: usize },
    #[error("table `{table}` has no primary key (TableDef::build adds the hidden one)")]
    NoPrimaryKey { table: String },
    #[error("table `{table}`: {what} names column {column}, the table has {columns}")]
    NoSuchColumn {
        table: String,
        what: String,
        column: usize,
        columns: usize,
    },
    #[error("table `{table}`: {what} names column `{column}` twice")]
    DuplicateKeyColumn {
        table: String,
        what: String,
        column: String,
    },
    #[error("table `{table}`: primary-key column `{column}` must be NOT NULL")]
    NullablePrimaryKey { table: String, column: String },
    #[error("table `{table}`: {what} cannot hold column `{column}` of type {ty}")]
    UnkeyableColumn {
        table: String,
        what: String,
        column: String,
        ty: String,
    },
    #[error(
        "table `{table}`: {what} keys take up to {bytes} bytes, at most {KEY_BYTES_MAX} allowed"
    )]
    KeyTooLong {
        table: String,
        what: String,
        bytes: usize,
    },
    #[error("table `{table}`: the distribution key must be a non-empty prefix of the primary key")]
    DistributionKeyNotPrefix { table: String },
    #[error("table `{table}` has {partitions} partitions: 1..={PARTITIONS_MAX} allowed")]
    PartitionCount { table: String, partitions: u32 },
    #[error("table `{table}` has {count} indexes, at most {INDEXES_MAX} allowed")]
    TooManyIndexes { table: String, count: usize },
    #[error("table `{table}`: index `{index}` is defined twice (names are case-insensitive)")]
    DuplicateIndexName { table: String, index: String },
    #[error("table `{table}`: index id {id} is used twice")]
    DuplicateIndexId { table: String, id: u32 },
    #[error("table `{table}`: index `{index}` has no columns")]
    EmptyIndex { table: String, index: String },
    #[error(
        "table `{table}`: SQL metadata of {bytes} bytes, at most {SQL_META_BYTES_MAX} allowed"
    )]
    SqlMetaTooLarge { table: String, bytes: usize },
}

impl TableDef {
    /// A table of these columns with no keys, no indexes, one partition and
    /// version 0; add the rest with the builder methods, then
    /// [`TableDef::build`].
    pub fn new(name: impl Into<String>, id: u32, columns: Vec<Column>) -> TableDef {
        TableDef {
            name: name.into(),
            id,
            version: 0,
            columns,
            primary_key: Vec::new(),
            distribution_key: Vec::new(),
            indexes: Vec::new(),
            partitions: 1,
            read_backup: false,
            fully_replicated: false,
            sql_meta: Vec::new(),
            replaces: 0,
        }
    }

    /// Sets the SQL node's metadata (see the `sql_meta` field).
    pub fn sql_meta(mut self, meta: Vec<u8>) -> TableDef {
        self.sql_meta = meta;
        self
    }

    pub fn primary_key(mut self, columns: Vec<usize>) -> TableDef {
        self.primary_key = columns;
        self
    }

    pub fn distribution_key(mut self, columns: Vec<usize>) -> TableDef {
        self.distribution_key = columns;
        self
    }

    pub fn index(mut self, index: IndexDef) -> TableDef {
        self.indexes.push(index);
        self
    }

    pub fn partitions(mut self, partitions: u32) -> TableDef {
        self.partitions = partitions;
        self
    }

    /// Sets `READ_BACKUP` (see the `read_backup` field).
    pub fn read_backup(mut self, on: bool) -> TableDef {
        self.read_backup = on;
        self
    }

    /// Sets `FULLY_REPLICATED` (see the `fully_replicated` field); on, it
    /// sets `READ_BACKUP` too, which such a table always is.
    pub fn fully_replicated(mut self, on: bool) -> TableDef {
        self.fully_replicated = on;
        self.read_backup |= on;
        self
    }

    /// Completes the definition as NDB does — a table without a primary key
    /// gets the hidden BIGINT UNSIGNED `$PK` as its last column and key; a
    /// table without a distribution key is distributed by its whole primary
    /// key — and validates it.
    pub fn build(mut self) -> Result<TableDef, SchemaError> {
        // A table needs a column of its own; the hidden key does not count.
        if self.columns.is_empty() {
            return Err(SchemaError::ColumnCount {
                table: self.name,
                count: 0,
            });
        }
        if self.primary_key.is_empty() {
            self.columns.push(Column::new(
                HIDDEN_PRIMARY_KEY_COLUMN,
                ColumnType::BigInt { unsigned: true },
            ));
            self.primary_key = vec![self.columns.len() - 1];
        }
        if self.distribution_key.is_empty() {
            self.distribution_key = self.primary_key.clone();
        }
        self.validate()?;
        Ok(self)
    }

    /// The table as it was at an older `version` that had only its first
    /// `columns` columns: ALTER TABLE only appends columns (and adds or
    /// drops indexes), so an older version's rows have the layout of this
    /// prefix. Indexes over a column past the prefix are left out. Storage
    /// uses it to read rows and redo records written before an alter; it
    /// is not a definition the dictionary ever held, so it is not
    /// validated. `columns` must cover the primary key.
    pub fn with_first_columns(&self, columns: usize, version: u32) -> TableDef {
        assert!(
            columns >= 1 && columns <= self.columns.len(),
            "table `{}`: a prefix of {columns} of its {} columns",
            self.name,
            self.columns.len()
        );
        assert!(
            self.primary_key.iter().all(|&c| c < columns),
            "table `{}`: a prefix of {columns} columns lacks a primary-key column",
            self.name
        );
        TableDef {
            name: self.name.clone(),
            id: self.id,
            version,
            columns: self.columns[..columns].to_vec(),
            primary_key: self.primary_key.clone(),
            distribution_key: self.distribution_key.clone(),
            indexes: self
                .indexes
                .iter()
                .filter(|i| i.columns.iter().all(|&c| c < columns))
                .cloned()
                .collect(),
            partitions: self.partitions,
            read_backup: self.read_backup,
            fully_replicated: self.fully_replicated,
            sql_meta: self.sql_meta.clone(),
            replaces: self.replaces,
        }
    }

    /// Whether the primary key is the hidden `$PK` column.
    pub fn has_hidden_primary_key(&self) -> bool {
        matches!(self.primary_key.as_slice(), [c] if self.columns[*c].name == HIDDEN_PRIMARY_KEY_COLUMN)
    }

    /// Largest row of the table in bytes, as [`ROW_BYTES_MAX`] counts it.
    pub fn max_row_bytes(&self) -> usize {
        let nullable = self.columns.iter().filter(|c| c.nullable).count();
        let var_columns = self.columns.iter().filter(|c| c.ty.is_var()).count();
        nullable.div_ceil(8)
            + var_columns * 2
            + self
                .columns
                .iter()
                .map(|c| c.ty.max_stored_bytes())
                .sum::<usize>()
    }

    /// Checks the definition against every limit: names, column count and
    /// types, defaults, row size, the primary key, the distribution key,
    /// partitions and indexes.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let table = || self.name.clone();
        if self.name.is_empty() || self.name.len() > TABLE_NAME_BYTES_MAX {
            return Err(SchemaError::BadTableName {
                name: self.name.clone(),
                bytes: self.name.len(),
            });
        }
        if self.columns.is_empty() || self.columns.len() > COLUMNS_MAX {
            return Err(SchemaError::ColumnCount {
                table: table(),
                count: self.columns.len(),
            });
        }
        let mut names = HashSet::with_capacity(self.columns.len());
        for column in &self.columns {
            self.check_name("column", &column.name, NAME_BYTES_MAX)?;
            if !names.insert(column.name.to_lowercase()) {
                return Err(SchemaError::DuplicateColumn {
                    table: table(),
                    column: column.name.clone(),
                });
            }
            column
                .ty
                .check_parameters()
                .map_err(|problem| SchemaError::BadColumnType {
                    table: table(),
                    column: column.name.clone(),
                    problem,
                })?;
            if let Some(default) = &column.default {
                if column.ty.is_blob() && !default.is_null() {
                    return Err(SchemaError::BlobDefault {
                        table: table(),
                        column: column.name.clone(),
                        ty: column.ty.to_string(),
                    });
                }
                default
                    .check(column)
                    .map_err(|source| SchemaError::BadDefault {
                        table: table(),
                        column: column.name.clone(),
                        source: Box::new(source),
                    })?;
            }
        }
        let row_bytes = self.max_row_bytes();
        if row_bytes > ROW_BYTES_MAX {
            return Err(SchemaError::RowTooLarge {
                table: table(),
                bytes: row_bytes,
            });
        }
        if self.sql_meta.len() > SQL_META_BYTES_MAX {
            return Err(SchemaError::SqlMetaTooLarge {
                table: table(),
                bytes: self.sql_meta.len(),
            });
        }
        self.validate_primary_key()?;
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return Err(SchemaError::PartitionCount {
                table: table(),
                partitions: self.partitions,
            });
        }
        self.validate_indexes()
    }

    fn validate_primary_key(&self) -> Result<(), SchemaError> {
        if self.primary_key.is_empty() {
            return Err(SchemaError::NoPrimaryKey {
                table: self.name.clone(),
            });
        }
        self.check_key("primary key", &self.primary_key)?;
        for &c in &self.primary_key {
            if self.columns[c].nullable {
                return Err(SchemaError::NullablePrimaryKey {
                    table: self.name.clone(),
                    column: self.columns[c].name.clone(),
                });
            }
        }
        let dist = &self.distribution_key;
        if dist.is_empty()
            || dist.len() > self.primary_key.len()
            || !self.primary_key.starts_with(dist)
        {
            return Err(SchemaError::DistributionKeyNotPrefix {
                table: self.name.clone(),
            });
        }
        Ok(())
    }

    fn validate_indexes(&self) -> Result<(), SchemaError> {
        if self.indexes.len() > INDEXES_MAX {
            return Err(SchemaError::TooManyIndexes {
                table: self.name.clone(),
                count: self.indexes.len(),
            });
        }
        let mut names = HashSet::with_capacity(self.indexes.len());
        let mut ids = HashSet::with_capacity(self.indexes.len());
        for index in &self.indexes {
            self.check_name("index", &index.name, INDEX_NAME_BYTES_MAX)?;
            if !names.insert(index.name.to_lowercase()) {
                return Err(SchemaError::DuplicateIndexName {
                    table: self.name.clone(),
                    index: index.name.clone(),
                });
            }
            if !ids.insert(index.id) {
                return Err(SchemaError::DuplicateIndexId {
                    table: self.name.clone(),
                    id: index.id,
                });
            }
            if index.columns.is_empty() {
                return Err(SchemaError::EmptyIndex {
                    table: self.name.clone(),
                    index: index.name.clone(),
                });
            }
            self.check_key(&format!("index `{}`", index.name), &index.columns)?;
        }
        Ok(())
    }

    /// Checks the columns of a key: they exist, appear once, can be keyed,
    /// and their keys fit [`KEY_BYTES_MAX`].
    fn check_key(&self, what: &str, columns: &[usize]) -> Result<(), SchemaError> {
        let mut bytes = 0;
        for (k, &c) in columns.iter().enumerate() {
            let column = self
                .columns
                .get(c)
                .ok_or_else(|| SchemaError::NoSuchColumn {
                    table: self.name.clone(),
                    what: what.to_string(),
                    column: c,
                    columns: self.columns.len(),
                })?;
            if columns[..k].contains(&c) {
                return Err(SchemaError::DuplicateKeyColumn {
                    table: self.name.clone(),
                    what: what.to_string(),
                    column: column.name.clone(),
                });
            }
            if column.ty.is_blob() {
                return Err(SchemaError::UnkeyableColumn {
                    table: self.name.clone(),
                    what: what.to_string(),
                    column: column.name.clone(),
                    ty: column.ty.to_string(),
                });
            }
            bytes += column_max_encoded_bytes(&column.ty, column.nullable);
        }
        if bytes > KEY_BYTES_MAX {
            return Err(SchemaError::KeyTooLong {
                table: self.name.clone(),
                what: what.to_string(),
                bytes,
            });
        }
        Ok(())
    }

    fn check_name(
        &self,
        what: &'static str,
        name: &str,
        bytes_max: usize,
    ) -> Result<(), SchemaError> {
        if name.is_empty() || name.len() > bytes_max {
            return Err(SchemaError::BadName {
                table: self.name.clone(),
                what,
                name: name.to_string(),
                bytes: name.len(),
                bytes_max,
            });
        }
        Ok(())
    }

    /// The hidden table behind unique index `index` (NDB's way): its
    /// primary key is the index columns (NOT NULL there: a base row with a
    /// NULL in an index column has no entry, so NULLs never collide), and
    /// its one other column, `$BASE_PK`, holds the base row's primary key as
    /// [`KeyEncoder::primary_key`] encodes it. Its id is the index's id; it
    /// is distributed by all its key columns over the base table's
    /// partition count. The table must be valid.
    pub fn unique_index_table(&self, index: usize) -> TableDef {
        let def = &self.indexes[index];
        assert_eq!(
            def.kind,
            IndexKind::Unique,
            "index `{}` is not unique",
            def.name
        );
        let mut columns: Vec<Column> = def
            .columns
            .iter()
            .map(|&c| Column {
                nullable: false,
                default: None,
                ..self.columns[c].clone()
            })
            .collect();
        let base_key_bytes = KeyEncoder::primary_key(self).max_encoded_bytes();
        columns.push(Column::new(
            UNIQUE_INDEX_BASE_KEY_COLUMN,
            ColumnType::VarBinary {
                max: u16::try_from(base_key_bytes).expect("keys are below KEY_BYTES_MAX"),
            },
        ));
        let key: Vec<usize> = (0..def.columns.len()).collect();
        TableDef {
            name: format!("$unique/{}/{}", self.id, def.name),
            id: def.id,
            version: self.version,
            columns,
            primary_key: key.clone(),
            distribution_key: key,
            indexes: Vec::new(),
            partitions: self.partitions,
            read_backup: self.read_backup,
            fully_replicated: self.fully_replicated,
            sql_meta: Vec::new(),
            replaces: 0,
        }
    }

    /// The hidden table holding the parts of BLOB/TEXT column `column`
    /// beyond its inline head: the base table's primary-key columns, then
    /// `$PART` (INT UNSIGNED, the part number from 0) completing the primary
    /// key, then `$DATA` (VARBINARY of [`BLOB_PART_BYTES`]). It is
    /// distributed by the base table's distribution key, so a row's parts
    /// live in the row's partition. `id` is the dictionary's id for it. The
    /// table must be valid.
    pub fn blob_parts_table(&self, column: usize, id: u32) -> TableDef {
        let blob = &self.columns[column];
        assert!(
            blob.ty.is_blob(),
            "column `{}` is {}, not a blob",
            blob.name,
            blob.ty
        );
        let mut columns: Vec<Column> = self
            .primary_key
            .iter()
            .map(|&c| Column {
                default: None,
                ..self.columns[c].clone()
            })
            .collect();
        let key_columns = columns.len();
        columns.push(Column::new(
            BLOB_PART_NUMBER_COLUMN,
            ColumnType::Int { unsigned: true },
        ));
        columns.push(Column::new(
            BLOB_PART_DATA_COLUMN,
            ColumnType::VarBinary {
                max: BLOB_PART_BYTES as u16,
            },
        ));
        TableDef {
            name: format!("$blob/{}/{}", self.id, column),
            id,
            version: self.version,
            columns,
            primary_key: (0..=key_columns).collect(),
            // The base distribution key is a prefix of the base primary key,
            // which is copied first: the same positions.
            distribution_key: (0..self.distribution_key.len()).collect(),
            indexes: Vec::new(),
            partitions: self.partitions,
            read_backup: self.read_backup,
            fully_replicated: self.fully_replicated,
            sql_meta: Vec::new(),
            replaces: 0,
        }
    }
}

const _: () = assert!(BLOB_PART_BYTES <= u16::MAX as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Collation;
    use crate::value::Value;

    fn int(name: &str) -> Column {
        Column::new(name, ColumnType::Int { unsigned: false })
    }

    fn varchar(name: &str, max: u16) -> Column {
        Column::new(
            name,
            ColumnType::VarChar {
                max,
                collation: Collation::Utf8mb4GeneralCi,
            },
        )
    }

    fn base() -> TableDef {
        TableDef::new(
            "t",
            10,
            vec![int("a"), int("b"), varchar("c", 20).nullable()],
        )
        .primary_key(vec![0, 1])
    }

    #[test]
    fn build_adds_hidden_key_and_distribution() {
        let t = TableDef::new("t", 1, vec![int("a")]).build().unwrap();
        assert_eq!(t.columns.len(), 2);
        assert_eq!(t.columns[1].name, HIDDEN_PRIMARY_KEY_COLUMN);
        assert_eq!(t.columns[1].ty, ColumnType::BigInt { unsigned: true });
        assert_eq!(t.primary_key, vec![1]);
        assert_eq!(t.distribution_key, vec![1]);
        assert!(t.has_hidden_primary_key());
        let t = base().build().unwrap();
        assert_eq!(t.distribution_key, vec![0, 1]);
        assert!(!t.has_hidden_primary_key());
        assert!(base().distribution_key(vec![0]).build().is_ok());
    }

    #[test]
    fn every_limit_is_checked() {
        let err = |t: TableDef| t.build().unwrap_err();
        assert!(matches!(
            err(TableDef::new("", 1, vec![int("a")])),
            SchemaError::BadTableName { bytes: 0, .. }
        ));
        assert!(matches!(
            err(TableDef::new("x".repeat(129), 1, vec![int("a")])),
            SchemaError::BadTableName { bytes: 129, .. }
        ));
        assert!(matches!(
            err(TableDef::new("t", 1, vec![])),
            SchemaError::ColumnCount { count: 0, .. }
        ));
        let many: Vec<Column> = (0..COLUMNS_MAX + 1)
            .map(|i| int(&format!("c{i}")))
            .collect();
        assert!(matches!(
            err(TableDef::new("t", 1, many.clone()).primary_key(vec![0])),
            SchemaError::ColumnCount { count: 513, .. }
        ));
        // 512 columns with a key of their own fit; without one, the hidden
        // key is the 513th.
        assert!(TableDef::new("t", 1, many[..512].to_vec())
            .primary_key(vec![0])
            .build()
            .is_ok());
        assert!(matches!(
            err(TableDef::new("t", 1, many[..512].to_vec())),
            SchemaError::ColumnCount { count: 513, .. }
        ));
        assert!(matches!(
            err(TableDef::new("t", 1, vec![int(&"n".repeat(65))])),
            SchemaError::BadName {
                what: "column",
                bytes: 65,
                ..
            }
        ));
        let e = err(TableDef::new("t", 1, vec![int("a"), int("A")]));
        assert_eq!(
            e.to_string(),
            "table `t`: column `A` is defined twice (names are case-insensitive)"
        );
        let e = err(TableDef::new(
            "t",
            1,
            vec![Column::new(
                "d",
                ColumnType::Decimal {
                    precision: 70,
                    scale: 0,
                },
            )],
        ));
        assert!(matches!(e, SchemaError::BadColumnType { ref column, .. } if column == "d"));
        assert!(e.to_string().contains("65"), "{e}");
        let e = err(TableDef::new(
            "t",
            1,
            vec![int("a").with_default(Value::String("x".into()))],
        ));
        assert!(matches!(e, SchemaError::BadDefault { .. }));
        let e = err(TableDef::new(
            "t",
            1,
            vec![int("a").with_default(Value::Null)],
        ));
        assert!(matches!(
            e,
            SchemaError::BadDefault { ref source, .. }
                if matches!(**source, ValueError::NullNotAllowed { .. })
        ));
        assert!(
            TableDef::new("t", 1, vec![int("a").nullable().with_default(Value::Null)])
                .build()
                .is_ok()
        );
        let e = err(TableDef::new(
            "t",
            1,
            vec![Column::new("b", ColumnType::Blob).with_default(Value::Bytes(vec![1]))],
        ));
        assert!(matches!(e, SchemaError::BlobDefault { .. }));
        // Row size: 7,500 chars × 4 bytes + 2 offset bytes + 8 hidden key bytes.
        let e = err(TableDef::new("t", 1, vec![varchar("v", 7_500)]));
        assert_eq!(
            e,
            SchemaError::RowTooLarge {
                table: "t".into(),
                bytes: 30_010
            }
        );
        assert!(TableDef::new("t", 1, vec![varchar("v", 7_497)])
            .build()
            .is_ok());
    }

    #[test]
    fn keys_are_checked() {
        let err = |t: TableDef| t.build().unwrap_err();
        assert!(matches!(
            err(base().primary_key(vec![0, 5])),
            SchemaError::NoSuchColumn { column: 5, .. }
        ));
        assert!(matches!(
            err(base().primary_key(vec![0, 0])),
            SchemaError::DuplicateKeyColumn { .. }
        ));
        assert!(matches!(
            err(base().primary_key(vec![2])),
            SchemaError::NullablePrimaryKey { ref column, .. } if column == "c"
        ));
        let blob = TableDef::new("t", 1, vec![int("a"), Column::new("b", ColumnType::Blob)]);
        assert!(matches!(
            err(blob.clone().primary_key(vec![1])),
            SchemaError::UnkeyableColumn { ref column, .. } if column == "b"
        ));
        let long = TableDef::new("t", 1, vec![varchar("v", 1_000)]).primary_key(vec![0]);
        assert!(matches!(
            err(long),
            SchemaError::KeyTooLong { bytes: 4_500, .. }
        ));
        assert!(matches!(
            err(base().distribution_key(vec![1])),
            SchemaError::DistributionKeyNotPrefix { .. }
        ));
        assert!(matches!(
            err(base().distribution_key(vec![0, 1, 2])),
            SchemaError::DistributionKeyNotPrefix { .. }
        ));
        assert!(matches!(
            err(base().partitions(0)),
            SchemaError::PartitionCount { partitions: 0, .. }
        ));
        assert!(matches!(
            err(base().partitions(PARTITIONS_MAX + 1)),
            SchemaError::PartitionCount { .. }
        ));
        let index = |name: &str, id, columns: Vec<usize>| IndexDef {
            name: name.into(),
            id,
            columns,
            kind: IndexKind::Ordered,
        };
        assert!(matches!(
            err(base().index(index("i", 1, vec![3]))),
            SchemaError::NoSuchColumn { ref what, .. } if what == "index `i`"
        ));
        assert!(matches!(
            err(base().index(index("i", 1, vec![]))),
            SchemaError::EmptyIndex { .. }
        ));
        assert!(matches!(
            err(base()
                .index(index("i", 1, vec![0]))
                .index(index("I", 2, vec![1]))),
            SchemaError::DuplicateIndexName { .. }
        ));
        assert!(matches!(
            err(base()
                .index(index("i", 1, vec![0]))
                .index(index("j", 1, vec![1]))),
            SchemaError::DuplicateIndexId { id: 1, .. }
        ));
        assert!(matches!(
            err(base().index(index("", 1, vec![0]))),
            SchemaError::BadName { what: "index", .. }
        ));
        // An index name may be longer than a column's: a key's name and the
        // suffix naming its unique hash index (Django's 58-byte key names).
        let long = format!("{}$unique", "k".repeat(NAME_BYTES_MAX));
        assert!(base().index(index(&long, 1, vec![0])).build().is_ok());
        let e = err(base().index(index(&"k".repeat(INDEX_NAME_BYTES_MAX + 1), 1, vec![0])));
        assert!(
            matches!(
                e,
                SchemaError::BadName {
                    what: "index",
                    bytes: 81,
                    bytes_max: INDEX_NAME_BYTES_MAX,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            err(blob.primary_key(vec![0]).index(index("i", 1, vec![1]))),
            SchemaError::UnkeyableColumn { .. }
        ));
        let mut many = base();
        for i in 0..=INDEXES_MAX {
            many = many.index(index(&format!("i{i}"), i as u32, vec![0]));
        }
        assert!(matches!(
            err(many),
            SchemaError::TooManyIndexes { count: 65, .. }
        ));
        // A nullable column may be in an index.
        assert!(base().index(index("i", 1, vec![2, 0])).build().is_ok());
    }

    #[test]
    fn hidden_tables() {
        let t = TableDef::new(
            "t",
            10,
            vec![
                int("a"),
                int("b"),
                varchar("c", 20).nullable(),
                Column::new(
                    "d",
                    ColumnType::Text {
                        collation: Collation::Utf8mb4Bin,
                    },
                )
                .nullable(),
            ],
        )
        .primary_key(vec![0, 1])
        .distribution_key(vec![0])
        .partitions(8)
        .index(IndexDef {
            name: "u".into(),
            id: 77,
            columns: vec![2],
            kind: IndexKind::Unique,
        })
        .build()
        .unwrap();
        let u = t.unique_index_table(0);
        u.validate().unwrap();
        assert_eq!(u.id, 77);
        assert_eq!(u.columns.len(), 2);
        assert_eq!(u.columns[0].name, "c");
        assert!(!u.columns[0].nullable);
        assert_eq!(u.primary_key, vec![0]);
        assert_eq!(u.partitions, 8);
        // The base key is two NOT NULL INTs: 8 bytes.
        assert_eq!(u.columns[1].ty, ColumnType::VarBinary { max: 8 });
        let p = t.blob_parts_table(3, 99);
        p.validate().unwrap();
        assert_eq!(p.id, 99);
        let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "$PART", "$DATA"]);
        assert_eq!(p.primary_key, vec![0, 1, 2]);
        assert_eq!(p.distribution_key, vec![0]);
        // A hidden primary key is copied too.
        let h = TableDef::new("h", 2, vec![Column::new("x", ColumnType::Blob)])
            .build()
            .unwrap();
        let p = h.blob_parts_table(0, 3);
        p.validate().unwrap();
        assert_eq!(p.columns[0].name, HIDDEN_PRIMARY_KEY_COLUMN);
        // The widest key still leaves room for a part.
        let w = TableDef::new(
            "w",
            4,
            vec![varchar("k", 900), Column::new("x", ColumnType::Blob)],
        )
        .primary_key(vec![0])
        .build()
        .unwrap();
        w.blob_parts_table(1, 5).validate().unwrap();
    }
}
