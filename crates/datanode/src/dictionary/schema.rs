//! The dictionary's schema in memory: every table, grouped with its hidden
//! tables, found by id and by name.
//!
//! A *group* is a base table and the hidden tables derived from it (one per
//! unique index, one per BLOB/TEXT column). Every schema transaction
//! replaces or removes exactly one group, every schema file holds one
//! group, and the master ships groups to joining nodes, so that a base
//! table and its hidden tables can never be seen out of step.

use std::collections::BTreeMap;

use schema::{SchemaCodecError, TableDef};
use signal::DictTableGroup;

/// The first id the dictionary hands out; lower ids are kept for system
/// tables (NDB keeps its own, e.g. SYSTAB_0, in the lowest ids).
pub const FIRST_OBJECT_ID: u32 = 16;
/// Most tables a cluster holds, hidden tables included (the upper bound of
/// NDB's MaxNoOfTables).
pub const TABLES_MAX: usize = 20_320;

/// A base table and its hidden tables, with the bytes every node stores.
#[derive(Clone, Debug, PartialEq)]
pub struct TableGroup {
    /// The base table first, then its hidden tables.
    tables: Vec<TableDef>,
    /// Each table's encoding, in the same order: what is persisted and
    /// shipped, so that every node holds the same bytes.
    encoded: Vec<Vec<u8>>,
}

/// Why encoded tables are not a group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("a table group holds no table")]
    Empty,
    #[error("table {index} of the group: {source}")]
    Decode {
        index: usize,
        source: SchemaCodecError,
    },
}

impl TableGroup {
    /// A group of these definitions, encoded here (on the master).
    pub fn from_tables(tables: Vec<TableDef>) -> TableGroup {
        assert!(!tables.is_empty(), "a table group needs its base table");
        let encoded = tables.iter().map(TableDef::to_bytes).collect();
        TableGroup { tables, encoded }
    }

    /// A group from encoded definitions (from a signal or a file); the
    /// definitions are decoded, not validated.
    pub fn decode(encoded: Vec<Vec<u8>>) -> Result<TableGroup, GroupError> {
        if encoded.is_empty() {
            return Err(GroupError::Empty);
        }
        let mut tables = Vec::with_capacity(encoded.len());
        for (index, bytes) in encoded.iter().enumerate() {
            tables.push(
                TableDef::decode(bytes).map_err(|source| GroupError::Decode { index, source })?,
            );
        }
        Ok(TableGroup { tables, encoded })
    }

    pub fn base(&self) -> &TableDef {
        &self.tables[0]
    }

    pub fn tables(&self) -> &[TableDef] {
        &self.tables
    }

    pub fn encoded(&self) -> &[Vec<u8>] {
        &self.encoded
    }

    /// Bytes of all encodings, for sizing signals.
    pub fn encoded_bytes(&self) -> usize {
        self.encoded.iter().map(Vec::len).sum()
    }

    pub fn to_wire(&self) -> DictTableGroup {
        DictTableGroup {
            tables: self.encoded.clone(),
        }
    }
}

/// Where a table is: the id of its group's base table and its position in
/// the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    base: u32,
    position: usize,
}

/// Every table of the cluster, as this node holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// Grows by one with every committed schema transaction.
    version: u32,
    /// The next id the master hands out; ids are never reused.
    next_object_id: u32,
    groups: BTreeMap<u32, TableGroup>,
    by_id: BTreeMap<u32, Place>,
    by_name: BTreeMap<String, Place>,
}

impl Default for Schema {
    fn default() -> Self {
        Schema::new()
    }
}

impl Schema {
    /// No tables, version 0.
    pub fn new() -> Schema {
        Schema {
            version: 0,
            next_object_id: FIRST_OBJECT_ID,
            groups: BTreeMap::new(),
            by_id: BTreeMap::new(),
            by_name: BTreeMap::new(),
        }
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn next_object_id(&self) -> u32 {
        self.next_object_id
    }

    /// Sets the counters a committed transaction (or the master's schema)
    /// brings.
    pub fn set_counters(&mut self, version: u32, next_object_id: u32) {
        self.version = version;
        self.next_object_id = next_object_id;
    }

    /// Whether `group` can replace the group of its base table: no id or
    /// name of its tables is used by another group or twice in it, and the
    /// table count stays within [`TABLES_MAX`]. Groups from a signal or a
    /// file are checked with this before [`Schema::install`].
    pub fn check_install(&self, group: &TableGroup) -> Result<(), String> {
        let base = group.base().id;
        let replaced = self.groups.get(&base).map_or(0, |g| g.tables().len());
        let count = self.by_id.len() - replaced + group.tables().len();
        if count > TABLES_MAX {
            return Err(format!(
                "{count} tables, at most {TABLES_MAX} allowed (hidden tables count)"
            ));
        }
        for (k, table) in group.tables().iter().enumerate() {
            let twice = group.tables()[..k]
                .iter()
                .any(|t| t.id == table.id || t.name == table.name);
            let id_taken = self.by_id.get(&table.id).is_some_and(|p| p.base != base);
            let name_taken = self
                .by_name
                .get(&table.name)
                .is_some_and(|p| p.base != base);
            if twice || id_taken || name_taken {
                return Err(format!(
                    "table `{}` (id {}) of group {base} collides with another table",
                    table.name, table.id
                ));
            }
        }
        Ok(())
    }

    /// Installs `group` under its base table's id, replacing what was there.
    pub fn install(&mut self, group: TableGroup) {
        let base = group.base().id;
        self.remove(base);
        for (position, table) in group.tables().iter().enumerate() {
            let place = Place { base, position };
            let before = self.by_id.insert(table.id, place);
            assert!(
                before.is_none(),
                "table id {} of group {base} is already used by group {:?}",
                table.id,
                before
            );
            let before = self.by_name.insert(table.name.clone(), place);
            assert!(
                before.is_none(),
                "table name `{}` of group {base} is already used",
                table.name
            );
        }
        self.groups.insert(base, group);
    }

    /// Removes the group whose base table is `base`.
    pub fn remove(&mut self, base: u32) -> Option<TableGroup> {
        let group = self.groups.remove(&base)?;
        for table in group.tables() {
            let place = self.by_id.remove(&table.id);
            debug_assert_eq!(place.map(|p| p.base), Some(base));
            self.by_name.remove(&table.name);
        }
        Some(group)
    }

    /// Every table, hidden ones included, by base table id.
    pub fn tables(&self) -> impl Iterator<Item = &TableDef> {
        self.groups.values().flat_map(|g| g.tables().iter())
    }

    pub fn table_count(&self) -> usize {
        self.by_id.len()
    }

    pub fn groups(&self) -> impl Iterator<Item = &TableGroup> {
        self.groups.values()
    }

    pub fn group(&self, base: u32) -> Option<&TableGroup> {
        self.groups.get(&base)
    }

    fn at(&self, place: Place) -> &TableDef {
        &self.groups[&place.base].tables()[place.position]
    }

    pub fn table(&self, id: u32) -> Option<&TableDef> {
        self.by_id.get(&id).map(|p| self.at(*p))
    }

    pub fn table_by_name(&self, name: &str) -> Option<&TableDef> {
        self.by_name.get(name).map(|p| self.at(*p))
    }

    /// The encoding of table `id` as this node stores it.
    pub fn encoded(&self, id: u32) -> Option<&[u8]> {
        let place = self.by_id.get(&id)?;
        Some(&self.groups[&place.base].encoded()[place.position])
    }

    /// The base table of the group holding table `id`, when `id` is a
    /// hidden table.
    pub fn hidden_owner(&self, id: u32) -> Option<&TableDef> {
        let place = self.by_id.get(&id)?;
        (place.position > 0).then(|| self.groups[&place.base].base())
    }
}
