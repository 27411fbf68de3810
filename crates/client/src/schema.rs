//! [`Table`]: a table's definition as the client holds it, and lookups by
//! name. Sessions fetch definitions from the dictionary
//! (`DictGetTableReq`) and cache them per cluster connection; an operation
//! that fails because the table changed (241) or is gone (723) drops the
//! cached copy, so the next `Session::table` fetches it again.
//!
//! A table with BLOB/TEXT columns comes with the hidden parts table of
//! each (`TableDef::blob_parts_table`, in the dictionary's table group
//! after the base table): the client writes and reads the parts itself
//! (`crate::blob`), so it holds their definitions beside the base table's.

use std::sync::Arc;

use schema::{
    distribution_hash, partition_of, Column, IndexDef, IndexKind, KeyEncoder, TableDef, Value,
};

use crate::error::{Error, Result};

/// A table definition (see the module doc). Shared as `Arc<Table>`.
#[derive(Debug)]
pub struct Table {
    def: TableDef,
    /// One per BLOB/TEXT column, in column order.
    blobs: Vec<BlobColumn>,
    /// The distribution key's encoder, built once: building it allocates,
    /// and every hinted transaction needs it.
    distribution: KeyEncoder,
    /// Every column position, in table order: the columns of a row read
    /// without a projection, shared by all such rows.
    all_columns: Arc<[usize]>,
    /// What checking an operation needs of `def`, made once.
    check_plan: proto::CheckPlan,
    /// `ColumnType::integer_code` of each primary-key column, in key order
    /// (0: not an integer column): what `transaction::IntegerFit` checks
    /// a key against.
    key_codes: Box<[u8]>,
}

/// A BLOB/TEXT column and the hidden table holding its parts.
#[derive(Debug)]
pub(crate) struct BlobColumn {
    /// The column's position in the base table.
    pub column: usize,
    /// The parts table: the base primary key, `$PART`, `$DATA`.
    pub parts: Arc<Table>,
}

impl BlobColumn {
    /// Position of `$DATA` in the parts table (its last column).
    pub fn data_column(&self) -> usize {
        self.parts.def.columns.len() - 1
    }
}

impl Table {
    /// A table without BLOB/TEXT columns, or one whose parts tables are
    /// not known (its long values cannot be written or read).
    pub(crate) fn new(def: TableDef) -> Table {
        Table::with_blobs(def, Vec::new())
    }

    /// A table of no cluster: the shape of rows an API node keeps itself
    /// (the SQL node's derived tables), never sent to the data nodes.
    pub fn detached(def: TableDef) -> Table {
        Table::new(def)
    }

    fn with_blobs(def: TableDef, blobs: Vec<BlobColumn>) -> Table {
        Table {
            distribution: KeyEncoder::distribution_key(&def),
            all_columns: (0..def.columns.len()).collect(),
            check_plan: proto::CheckPlan::new(&def),
            key_codes: def
                .primary_key
                .iter()
                .map(|&c| def.columns[c].ty.integer_code())
                .collect(),
            def,
            blobs,
        }
    }

    /// A table and the parts tables of its BLOB/TEXT columns, found by
    /// name among `hidden` (the rest of the dictionary's group). Every
    /// BLOB/TEXT column must have one.
    pub(crate) fn with_hidden(def: TableDef, hidden: Vec<TableDef>) -> Result<Table> {
        let mut blobs = Vec::new();
        for (c, column) in def.columns.iter().enumerate() {
            if !column.ty.is_blob() {
                continue;
            }
            let name = def.blob_parts_table(c, 0).name;
            let Some(parts) = hidden.iter().find(|h| h.name == name) else {
                return Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!(
                        "table `{}`: the dictionary sent no parts table `{name}` for {} column `{}`",
                        def.name, column.ty, column.name
                    ),
                ));
            };
            let mut expected = def.blob_parts_table(c, parts.id);
            // What it replaces is the dictionary's to say: the parts table
            // of a copy's column (docs/events.md, "A copying ALTER").
            expected.replaces = parts.replaces;
            if *parts != expected {
                return Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!(
                        "table `{}`: parts table `{name}` of column `{}` is not the one its definition makes",
                        def.name, column.name
                    ),
                ));
            }
            blobs.push(BlobColumn {
                column: c,
                parts: Arc::new(Table::new(parts.clone())),
            });
        }
        Ok(Table::with_blobs(def, blobs))
    }

    /// The partition of the row with `key` (the primary key's values in
    /// key order; the distribution key's are enough). `scratch` holds the
    /// encoded key, so that a caller's repeated lookups do not allocate.
    pub fn partition_of_key(&self, key: &[Value], scratch: &mut Vec<u8>) -> Result<u32> {
        let needed = self.distribution.column_count();
        if key.len() < needed {
            return Err(Error::new(
                proto::error::KEY_MISSING,
                format!(
                    "table `{}`: the distribution key has {needed} columns, {} values given",
                    self.def.name,
                    key.len()
                ),
            ));
        }
        scratch.clear();
        self.distribution
            .encode(&key[..needed], scratch)
            .map_err(|e| {
                Error::from(proto::ProtoError::Value {
                    table: self.def.name.clone(),
                    source: e,
                })
            })?;
        Ok(partition_of(
            distribution_hash(scratch),
            self.def.partitions,
        ))
    }

    /// Every column position in table order (the columns of a row read
    /// without a projection).
    pub(crate) fn all_columns(&self) -> &Arc<[usize]> {
        &self.all_columns
    }

    /// Whether the table has BLOB/TEXT columns (their values longer than
    /// the inline head are kept in parts tables).
    pub fn has_blobs(&self) -> bool {
        !self.blobs.is_empty()
    }

    /// The hidden table holding the parts of BLOB/TEXT column `column`
    /// (base primary key, `$PART`, `$DATA`); None for another column.
    /// It can be read and scanned like any table; writing it directly
    /// breaks the values whose parts it holds.
    pub fn blob_parts_table(&self, column: &str) -> Option<&Arc<Table>> {
        let c = self.column(column)?;
        self.blob(c).map(|b| &b.parts)
    }

    /// The BLOB/TEXT column at position `c`.
    pub(crate) fn blob(&self, c: usize) -> Option<&BlobColumn> {
        self.blobs.iter().find(|b| b.column == c)
    }

    /// The parts table whose id is `id`, if it is one of this table's.
    pub(crate) fn parts_table_by_id(&self, id: u32) -> Option<&Arc<Table>> {
        self.blobs.iter().map(|b| &b.parts).find(|p| p.id() == id)
    }

    /// The dictionary's definition.
    pub fn def(&self) -> &TableDef {
        &self.def
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The dictionary's id of the table.
    pub fn id(&self) -> u32 {
        self.def.id
    }

    /// The table version operations are built for.
    pub fn version(&self) -> u32 {
        self.def.version
    }

    /// The columns, in table order (positions are indexes into this).
    pub fn columns(&self) -> &[Column] {
        &self.def.columns
    }

    /// Position of a column (names are case-insensitive, as in the dictionary).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Positions of the primary-key columns, in key order.
    pub fn primary_key(&self) -> &[usize] {
        &self.def.primary_key
    }

    /// An index by name (case-insensitive).
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.def
            .indexes
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// A column's position, or error 4004 naming the table and column.
    pub(crate) fn require_column(&self, name: &str) -> Result<usize> {
        self.require_column_near(name, 0)
    }

    /// See the field `key_codes`.
    pub(crate) fn key_codes(&self) -> &[u8] {
        &self.key_codes
    }

    /// `ColumnType::integer_code` of each column, 0 for a primary-key
    /// column (the check plan's): what `IntegerFit` checks written values against.
    pub(crate) fn value_codes(&self) -> &[u8] {
        self.check_plan.codes()
    }

    pub(crate) fn check_plan(&self) -> &proto::CheckPlan {
        &self.check_plan
    }

    /// Like `require_column`, looking at position `hint` first: callers
    /// that name columns in table order find each at once instead of
    /// comparing names along the whole table.
    pub(crate) fn require_column_near(&self, name: &str, hint: usize) -> Result<usize> {
        if let Some(column) = self.def.columns.get(hint) {
            // Byte equality first: callers mostly spell names as the table
            // does, and it is a memcmp where the case-blind compare is not.
            if column.name == name || column.name.eq_ignore_ascii_case(name) {
                return Ok(hint);
            }
        }
        self.column(name).ok_or_else(|| {
            Error::new(
                proto::error::NO_SUCH_COLUMN,
                format!("table `{}` has no column `{name}`", self.def.name),
            )
        })
    }

    /// An index of `kind`, or error 4243 naming the table and index.
    pub(crate) fn require_index(&self, name: &str, kind: IndexKind) -> Result<&IndexDef> {
        match self.index(name) {
            Some(index) if index.kind == kind => Ok(index),
            Some(_) => Err(Error::new(
                proto::error::NO_SUCH_INDEX,
                format!("table `{}`: index `{name}` is not {kind:?}", self.def.name),
            )),
            None => Err(Error::new(
                proto::error::NO_SUCH_INDEX,
                format!("table `{}` has no index `{name}`", self.def.name),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use schema::ColumnType;

    use super::*;

    #[test]
    fn lookups_by_name_name_the_table() {
        let def = TableDef::new(
            "kv",
            20,
            vec![
                Column::new("k", ColumnType::BigInt { unsigned: false }),
                Column::new("V", ColumnType::Int { unsigned: false }),
            ],
        )
        .primary_key(vec![0])
        .index(IndexDef {
            name: "by_v".into(),
            id: 21,
            columns: vec![1],
            kind: IndexKind::Ordered,
        })
        .build()
        .expect("valid");
        let table = Table::new(def);
        assert_eq!(table.column("v"), Some(1));
        assert_eq!(table.primary_key(), &[0]);
        let missing = table.require_column("nope").expect_err("no such column");
        assert_eq!(missing.code, proto::error::NO_SUCH_COLUMN);
        assert!(missing.message.contains("`kv`") && missing.message.contains("`nope`"));
        assert!(table.require_index("BY_V", IndexKind::Ordered).is_ok());
        let wrong = table
            .require_index("by_v", IndexKind::Unique)
            .expect_err("ordered, not unique");
        assert_eq!(wrong.code, proto::error::NO_SUCH_INDEX);
        // A hint is only where the lookup starts.
        assert_eq!(table.require_column_near("V", 1).expect("at the hint"), 1);
        assert_eq!(table.require_column_near("K", 1).expect("elsewhere"), 0);
        assert_eq!(table.require_column_near("v", 7).expect("past the end"), 1);
        let missing = table
            .require_column_near("nope", 0)
            .expect_err("no such column");
        assert_eq!(missing.code, proto::error::NO_SUCH_COLUMN);
        assert_eq!(&**table.all_columns(), &[0, 1]);
    }

    #[test]
    fn the_cached_encoder_gives_the_partition_routing_gives() {
        let def = TableDef::new(
            "orders",
            30,
            vec![
                Column::new("user", ColumnType::Int { unsigned: true }),
                Column::new("item", ColumnType::BigInt { unsigned: false }),
            ],
        )
        .primary_key(vec![0, 1])
        .distribution_key(vec![0])
        .partitions(16)
        .build()
        .expect("valid");
        let table = Table::new(def.clone());
        let mut scratch = Vec::new();
        let mut partitions = std::collections::BTreeSet::new();
        for user in 0..100u64 {
            let key = [Value::UInt(user), Value::Int(-1)];
            let cached = table.partition_of_key(&key, &mut scratch).expect("fits");
            let fresh =
                crate::routing::partition_of_key(&def, &key, &mut Vec::new()).expect("fits");
            assert_eq!(cached, fresh, "user {user}");
            partitions.insert(cached);
        }
        assert!(partitions.len() > 8, "keys spread: {partitions:?}");
        let short = table
            .partition_of_key(&[], &mut scratch)
            .expect_err("no key");
        assert_eq!(short.code, proto::error::KEY_MISSING);
        assert!(short.message.contains("`orders`"), "{}", short.message);
        let wrong = table
            .partition_of_key(&[Value::String("x".into())], &mut scratch)
            .expect_err("a string for an INT");
        assert!(wrong.message.contains("orders"), "{}", wrong.message);
    }
}
