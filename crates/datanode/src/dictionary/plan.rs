//! The master's checks: what a create, alter or drop request becomes, or
//! why it is refused, against the schema as it stands.
//!
//! This is the one place that decides ids, versions and the hidden tables,
//! so every participant stores exactly what the master planned. Requests
//! are planned when their transaction starts (not when they arrive), so
//! that two creates of one name queued together see each other: the first
//! wins, the second is refused as a duplicate.

use schema::{IndexDef, SchemaError, TableDef};
use signal::SchemaOp;

use super::schema::{Schema, TableGroup, TABLES_MAX};
use proto::error::{
    ALREADY_EXISTS, BAD_DEFINITION, NO_SUCH_TABLE, TOO_MANY_TABLES, UNSUPPORTED_ALTER,
    WRONG_SCHEMA_VERSION,
};

/// Prefix of the names of hidden tables; user tables may not use it.
pub const HIDDEN_NAME_PREFIX: char = '$';

/// A planned schema transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub op: SchemaOp,
    /// The base table changed.
    pub table_id: u32,
    /// The group after the change; `None` for a drop.
    pub group: Option<TableGroup>,
    /// The dictionary's next free id after the change.
    pub next_object_id: u32,
    /// The base table's version after the change (0 for a drop).
    pub table_version: u32,
}

/// Why a request is refused: an NDB-style code and a message naming the
/// table and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: u32,
    pub message: String,
}

fn refuse(code: u32, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

fn bad_definition(error: SchemaError) -> Refusal {
    refuse(BAD_DEFINITION, error.to_string())
}

/// Hands out ids from the schema's counter; ids are never reused.
struct Ids {
    next: u32,
}

impl Ids {
    fn take(&mut self) -> Result<u32, Refusal> {
        let id = self.next;
        self.next = id.checked_add(1).ok_or_else(|| {
            refuse(
                TOO_MANY_TABLES,
                "the dictionary has handed out every object id",
            )
        })?;
        Ok(id)
    }
}

fn decode(bytes: &[u8]) -> Result<TableDef, Refusal> {
    TableDef::decode(bytes).map_err(|e| refuse(BAD_DEFINITION, e.to_string()))
}

/// Plans `CREATE TABLE`: the definition (id 0) gets its id, its indexes'
/// ids, version 1, the hidden primary key if it has none, and its hidden
/// tables. A partition count of 0 means "the default":
/// `default_partitions` (`Placement::default_partitions`).
///
/// `data_nodes`: the cluster's data nodes (0 when not known, as in tests
/// of the dictionary alone); a fully replicated table is refused when a
/// copy per data node does not fit a partition's chain
/// (`config::placement::COPIES_MAX`).
pub fn plan_create(
    schema: &Schema,
    bytes: &[u8],
    default_partitions: u32,
    data_nodes: usize,
) -> Result<Plan, Refusal> {
    let mut table = decode(bytes)?;
    if table.fully_replicated && data_nodes > config::placement::COPIES_MAX {
        return Err(refuse(
            BAD_DEFINITION,
            format!(
                "table `{}`: FULLY_REPLICATED needs a copy on each of the {data_nodes} data nodes; \
                 at most {} are supported",
                table.name,
                config::placement::COPIES_MAX
            ),
        ));
    }
    if table.partitions == 0 {
        table.partitions = default_partitions;
    }
    if table.id != 0 {
        return Err(refuse(
            BAD_DEFINITION,
            format!(
                "table `{}`: id {} given; the dictionary assigns ids (send 0)",
                table.name, table.id
            ),
        ));
    }
    if table.name.starts_with(HIDDEN_NAME_PREFIX) {
        return Err(refuse(
            BAD_DEFINITION,
            format!(
                "table `{}`: names starting with `{HIDDEN_NAME_PREFIX}` are kept for hidden tables",
                table.name
            ),
        ));
    }
    if schema.table_by_name(&table.name).is_some() {
        return Err(refuse(
            ALREADY_EXISTS,
            format!("table `{}` already exists", table.name),
        ));
    }
    let mut ids = Ids {
        next: schema.next_object_id(),
    };
    table.id = ids.take()?;
    table.version = 1;
    for index in &mut table.indexes {
        index.id = ids.take()?;
    }
    let table = table.build().map_err(bad_definition)?;
    let group = with_hidden_tables(table, None, None, &mut ids)?;
    check_count(schema, &group)?;
    Ok(Plan {
        op: SchemaOp::CreateTable,
        table_id: group.base().id,
        table_version: group.base().version,
        group: Some(group),
        next_object_id: ids.next,
    })
}

/// Plans `ALTER TABLE`: `bytes` is the new definition, made from version
/// `current.version` of the table; only a new table name (not taken),
/// renamed columns, added columns (nullable or with a
/// default, since existing rows need a value), added ordered indexes,
/// dropped indexes and changed SQL metadata are allowed (adding a unique index is refused: its
/// hidden table would need a distributed build from the rows). Kept
/// indexes and BLOB parts tables keep their ids.
pub fn plan_alter(schema: &Schema, table_id: u32, bytes: &[u8]) -> Result<Plan, Refusal> {
    let (current, group) = base_table(schema, table_id)?;
    let mut table = decode(bytes)?;
    if table.id != 0 && table.id != table_id {
        return Err(refuse(
            BAD_DEFINITION,
            format!(
                "alter of table {table_id} carries a definition of table {}",
                table.id
            ),
        ));
    }
    table.id = table_id;
    if table.version != current.version {
        return Err(refuse(
            WRONG_SCHEMA_VERSION,
            format!(
                "table `{}` is at version {}, the alter was made from version {}",
                current.name, current.version, table.version
            ),
        ));
    }
    if table.name != current.name {
        // A rename (NDB renames online too): only the name changes in the
        // data nodes' eyes; fragments, ids and hidden tables stay.
        if table.name.starts_with(HIDDEN_NAME_PREFIX) {
            return Err(refuse(
                BAD_DEFINITION,
                format!(
                    "renaming `{}` to `{}`: names starting with `{HIDDEN_NAME_PREFIX}` are kept \
                     for hidden tables",
                    current.name, table.name
                ),
            ));
        }
        if schema.table_by_name(&table.name).is_some() {
            return Err(refuse(
                ALREADY_EXISTS,
                format!(
                    "renaming `{}`: table `{}` already exists",
                    current.name, table.name
                ),
            ));
        }
    }
    check_alter(current, &table).map_err(|m| {
        refuse(
            UNSUPPORTED_ALTER,
            format!("alter of table `{}`: {m}", current.name),
        )
    })?;
    let mut ids = Ids {
        next: schema.next_object_id(),
    };
    for index in &mut table.indexes {
        index.id = match find_index(current, &index.name) {
            Some(old) => old.id,
            None => ids.take()?,
        };
    }
    table.version = current.version.checked_add(1).ok_or_else(|| {
        refuse(
            UNSUPPORTED_ALTER,
            format!("table `{}` has reached its last version", current.name),
        )
    })?;
    table.validate().map_err(bad_definition)?;
    // A copy taking the replaced table's name: its parts tables replace
    // that table's (below).
    let replaced = (table.replaces != current.replaces)
        .then(|| schema.group(table.replaces))
        .flatten();
    let group = with_hidden_tables(table, Some(group), replaced, &mut ids)?;
    check_count(schema, &group)?;
    Ok(Plan {
        op: SchemaOp::AlterTable,
        table_id,
        table_version: group.base().version,
        group: Some(group),
        next_object_id: ids.next,
    })
}

/// Plans `DROP TABLE`: the table and its hidden tables go.
pub fn plan_drop(schema: &Schema, table_id: u32) -> Result<Plan, Refusal> {
    base_table(schema, table_id)?;
    Ok(Plan {
        op: SchemaOp::DropTable,
        table_id,
        group: None,
        next_object_id: schema.next_object_id(),
        table_version: 0,
    })
}

/// The base table `table_id` and its group, or why there is none.
fn base_table(schema: &Schema, table_id: u32) -> Result<(&TableDef, &TableGroup), Refusal> {
    if let Some(owner) = schema.hidden_owner(table_id) {
        return Err(refuse(
            NO_SUCH_TABLE,
            format!(
                "table {table_id} is a hidden table of `{}`; change `{}` instead",
                owner.name, owner.name
            ),
        ));
    }
    match schema.group(table_id) {
        Some(group) => Ok((group.base(), group)),
        None => Err(refuse(
            NO_SUCH_TABLE,
            format!("no table with id {table_id}"),
        )),
    }
}

fn find_index<'a>(table: &'a TableDef, name: &str) -> Option<&'a IndexDef> {
    table
        .indexes
        .iter()
        .find(|i| i.name.eq_ignore_ascii_case(name))
}

/// Whether `new` differs from `old` only by the changes an online alter
/// may make; the message says what else changed.
fn check_alter(old: &TableDef, new: &TableDef) -> Result<(), String> {
    if new.partitions != old.partitions {
        return Err("the partition count cannot change".into());
    }
    if new.fully_replicated != old.fully_replicated {
        // The fragments a node holds would change without a copy.
        return Err("FULLY_REPLICATED cannot change".into());
    }
    if new.primary_key != old.primary_key {
        return Err("the primary key cannot change".into());
    }
    if new.distribution_key != old.distribution_key {
        return Err("the distribution key cannot change".into());
    }
    if new.columns.len() < old.columns.len() {
        return Err("dropping columns is not supported".into());
    }
    for (old_column, new_column) in old.columns.iter().zip(&new.columns) {
        // A column keeps its position, so it may be renamed: rows, keys
        // and indexes refer to columns by position, never by name.
        if !old_column.same_but_name(new_column) {
            return Err(format!(
                "column `{}` changed; only renaming a column or adding columns at the end is \
                 supported",
                old_column.name
            ));
        }
    }
    let renamed = new.name != old.name
        || old
            .columns
            .iter()
            .zip(&new.columns)
            .any(|(a, b)| a.name != b.name);
    if new.replaces != old.replaces && (new.name == old.name || new.replaces == old.id) {
        // Set by a copying ALTER's swap: its copy takes the old table's
        // name (docs/events.md, "A copying ALTER").
        return Err(format!(
            "the replaced table (id {}) may be named only with a new name, and not the table \
             itself",
            new.replaces
        ));
    }
    let added = &new.columns[old.columns.len()..];
    for column in added {
        if !column.nullable && column.default.is_none() {
            return Err(format!(
                "added column `{}` must be nullable or have a default: existing rows need a value",
                column.name
            ));
        }
    }
    let mut indexes_changed = false;
    for index in &new.indexes {
        match find_index(old, &index.name) {
            Some(existing) => {
                if existing.columns != index.columns || existing.kind != index.kind {
                    return Err(format!(
                        "index `{}` changed; drop it and add it again in another alter",
                        index.name
                    ));
                }
            }
            None if index.kind == schema::IndexKind::Unique => {
                // Its hidden table would need a build from the existing
                // rows, spread by the index key over every LDM instance and
                // node (a distributed build), which is not there yet.
                return Err(format!(
                    "adding unique index `{}` to an existing table is not supported yet; create \
                     the table with it",
                    index.name
                ));
            }
            None => indexes_changed = true,
        }
    }
    if old
        .indexes
        .iter()
        .any(|i| find_index(new, &i.name).is_none())
    {
        indexes_changed = true;
    }
    // The SQL node's metadata is opaque here; it may change alone (a
    // comment, an AUTO_INCREMENT start, ENUM members appended).
    if added.is_empty() && !indexes_changed && !renamed && new.sql_meta == old.sql_meta {
        return Err("the new definition changes nothing".into());
    }
    Ok(())
}

/// The group of `table`: it, then a hidden table per unique index (id =
/// the index's), then one per BLOB/TEXT column (the id it had in `old`,
/// else a new one). A parts table replaces (`TableDef::replaces`) the
/// parts table of the column of the same name in `replaced`, the group of
/// the table `table` takes the name of now, so the change stream follows
/// it as it follows the table (docs/events.md, "A copying ALTER"); else
/// what it replaced in `old`.
fn with_hidden_tables(
    table: TableDef,
    old: Option<&TableGroup>,
    replaced: Option<&TableGroup>,
    ids: &mut Ids,
) -> Result<TableGroup, Refusal> {
    let mut tables = Vec::new();
    for (i, index) in table.indexes.iter().enumerate() {
        if index.kind == schema::IndexKind::Unique {
            tables.push(table.unique_index_table(i));
        }
    }
    for (c, column) in table.columns.iter().enumerate() {
        if column.ty.is_blob() {
            let name = table.blob_parts_table(c, 0).name;
            let existing = old.and_then(|g| g.tables().iter().find(|t| t.name == name));
            let id = match existing {
                Some(existing) => existing.id,
                None => ids.take()?,
            };
            let mut parts = table.blob_parts_table(c, id);
            parts.replaces = match replaced {
                Some(replaced) => parts_of(replaced, &column.name).map_or(0, |t| t.id),
                // The table replaces nothing any more (a RENAME TABLE's
                // swap undone): nor do its parts.
                None if table.replaces == 0 => 0,
                None => existing.map_or(0, |t| t.replaces),
            };
            tables.push(parts);
        }
    }
    for hidden in &tables {
        hidden.validate().map_err(bad_definition)?;
    }
    tables.insert(0, table);
    Ok(TableGroup::from_tables(tables))
}

/// The parts table of `group`'s BLOB/TEXT column named `column`, if it
/// has one.
fn parts_of<'g>(group: &'g TableGroup, column: &str) -> Option<&'g TableDef> {
    let base = group.base();
    let c = base
        .columns
        .iter()
        .position(|c| c.name == column && c.ty.is_blob())?;
    let name = base.blob_parts_table(c, 0).name;
    group.tables().iter().find(|t| t.name == name)
}

fn check_count(schema: &Schema, group: &TableGroup) -> Result<(), Refusal> {
    schema
        .check_install(group)
        .map_err(|m| refuse(TOO_MANY_TABLES, m))?;
    debug_assert!(schema.table_count() <= TABLES_MAX);
    Ok(())
}

#[cfg(test)]
mod tests {
    use schema::{Column, ColumnType};

    use super::*;

    fn everywhere() -> TableDef {
        TableDef::new(
            "everywhere",
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("u", ColumnType::BigInt { unsigned: false }),
            ],
        )
        .primary_key(vec![0])
        .index(IndexDef {
            name: "by_u".into(),
            id: 0,
            columns: vec![1],
            kind: schema::IndexKind::Unique,
        })
        .fully_replicated(true)
    }

    #[test]
    fn fully_replicated_tables_fit_the_cluster_and_keep_the_flag() {
        let schema = Schema::new();
        let bytes = everywhere().to_bytes();
        let too_many = config::placement::COPIES_MAX + 1;
        let refused = plan_create(&schema, &bytes, 4, too_many).expect_err("too many data nodes");
        assert_eq!(refused.code, BAD_DEFINITION);
        assert!(
            refused.message.contains("everywhere"),
            "{}",
            refused.message
        );
        let plan = plan_create(&schema, &bytes, 4, 4).expect("4 data nodes");
        let group = plan.group.expect("a created group");
        assert!(group.base().fully_replicated && group.base().read_backup);
        assert_eq!(group.tables().len(), 2, "the unique index's hidden table");
        assert!(
            group.tables().iter().all(|t| t.fully_replicated),
            "placed like the base table"
        );
        let mut schema = Schema::new();
        schema.install(group.clone());
        let mut altered = group.base().clone();
        altered.fully_replicated = false;
        let refused =
            plan_alter(&schema, plan.table_id, &altered.to_bytes()).expect_err("flag change");
        assert_eq!(refused.code, UNSUPPORTED_ALTER);
        assert!(
            refused.message.contains("FULLY_REPLICATED"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_replaced_table_is_named_only_with_a_new_name() {
        let plan = plan_create(&Schema::new(), &everywhere().to_bytes(), 4, 4).expect("created");
        let mut schema = Schema::new();
        schema.install(plan.group.expect("a created group"));
        let base = schema
            .group(plan.table_id)
            .expect("installed")
            .base()
            .clone();
        let mut same_name = base.clone();
        same_name.replaces = base.id + 100;
        same_name.sql_meta = vec![1];
        let refused = plan_alter(&schema, plan.table_id, &same_name.to_bytes())
            .expect_err("replaces without a rename");
        assert_eq!(refused.code, UNSUPPORTED_ALTER);
        assert!(
            refused.message.contains("replaced table"),
            "{}",
            refused.message
        );
        let mut itself = base.clone();
        itself.name = "everywhere2".into();
        itself.replaces = base.id;
        plan_alter(&schema, plan.table_id, &itself.to_bytes()).expect_err("replaces itself");
        let mut swapped = base.clone();
        swapped.name = "everywhere2".into();
        swapped.replaces = base.id + 100;
        let plan = plan_alter(&schema, plan.table_id, &swapped.to_bytes()).expect("a copy's swap");
        assert_eq!(plan.group.expect("altered").base().replaces, base.id + 100);
    }

    #[test]
    fn a_copys_parts_tables_replace_those_of_the_same_columns() {
        let with_blobs = |name: &str, blobs: &[&str]| {
            let mut columns = vec![Column::new("id", ColumnType::BigInt { unsigned: false })];
            columns.extend(blobs.iter().map(|b| Column {
                nullable: true,
                ..Column::new(*b, ColumnType::Blob)
            }));
            TableDef::new(name, 0, columns).primary_key(vec![0])
        };
        let mut schema = Schema::new();
        let create = |schema: &mut Schema, def: TableDef| {
            let plan = plan_create(schema, &def.to_bytes(), 4, 2).expect("created");
            let group = plan.group.expect("a created group");
            schema.install(group.clone());
            schema.set_counters(0, plan.next_object_id);
            group
        };
        let old = create(&mut schema, with_blobs("t", &["a", "b"]));
        // The copy drops `a`, keeps `b` (now first) and adds `c`.
        let copy = create(&mut schema, with_blobs("#sql-new", &["b", "c"]));
        let old_b = parts_of(&old, "b").expect("old b's parts").id;
        let mut swap = copy.base().clone();
        swap.name = "t2".into();
        swap.replaces = old.base().id;
        let plan = plan_alter(&schema, copy.base().id, &swap.to_bytes()).expect("the swap");
        let swapped = plan.group.expect("altered");
        let replaces = |g: &TableGroup, c: &str| parts_of(g, c).expect("parts").replaces;
        assert_eq!(replaces(&swapped, "b"), old_b, "b's parts follow b's");
        assert_eq!(
            replaces(&swapped, "c"),
            0,
            "a new column's parts replace nothing"
        );
        assert_eq!(
            parts_of(&swapped, "b").map(|t| t.id),
            parts_of(&copy, "b").map(|t| t.id),
            "the parts tables keep their ids"
        );
        // A later alter of the copy keeps what its parts replace.
        schema.install(swapped.clone());
        let mut later = swapped.base().clone();
        later.sql_meta = vec![1];
        let plan = plan_alter(&schema, copy.base().id, &later.to_bytes()).expect("an alter");
        let later = plan.group.expect("altered");
        assert_eq!(replaces(&later, "b"), old_b);
        // The swap undone (renamed back, replacing nothing): nor do its
        // parts.
        schema.install(later.clone());
        let mut back = later.base().clone();
        back.name = "#sql-new".into();
        back.replaces = 0;
        let plan = plan_alter(&schema, copy.base().id, &back.to_bytes()).expect("undone");
        assert_eq!(replaces(&plan.group.expect("altered"), "b"), 0);
    }
}
