//! FOREIGN KEY constraints: their declaration, checks of the definition,
//! and the bookkeeping that lets a parent find its children
//! (`TableMeta::referenced_by`). What they do to rows is
//! `exec/foreign.rs`.
//!
//! As NDB's, a FOREIGN KEY must name its parent's PRIMARY KEY or a
//! UNIQUE key (InnoDB also takes any index's leading columns): every
//! check of a child row is then one key read of its parent, batched with
//! the statement's other reads. A child gets an index on its columns when
//! none leads with them (InnoDB's rule), so finding a parent's children is
//! a range scan.
//!
//! Where the constraint lives: on the child (`TableMeta::foreign_keys`),
//! as declared, the parent by database and name. The parent keeps the
//! names of the tables that may reference it: added before the child's
//! definition is written (so a crash in between leaves a name too many,
//! which is harmless: the child's own constraints are what counts),
//! never relied on to be exact. A parent created after its children (a
//! dump restored with `foreign_key_checks=0`) looks for them when it is
//! created.

use sqlparser::ast::{ForeignKeyConstraint, ReferentialAction};

use super::catalog::{self, meta, SqlType, TableInfo};
use super::Conn;
use crate::error::{codes, SqlError, SqlResult};

/// Columns in one FOREIGN KEY (MySQL's key parts limit).
pub const FK_COLUMNS_MAX: usize = 16;

/// A FOREIGN KEY as written, before it is checked against its parent.
#[derive(Clone, Debug)]
pub(crate) struct Declared {
    /// `CONSTRAINT name` (None: generated).
    pub name: Option<String>,
    /// `FOREIGN KEY idx (…)`: the name of the index made for it.
    pub index_name: Option<String>,
    pub columns: Vec<String>,
    pub parent_db: String,
    pub parent_table: String,
    pub parent_columns: Vec<String>,
    pub on_delete: Option<meta::FkAction>,
    pub on_update: Option<meta::FkAction>,
}

/// A child's column as the checks need it.
pub(crate) struct ChildColumn<'a> {
    pub name: &'a str,
    pub ty: &'a SqlType,
    pub nullable: bool,
}

/// The statement's parse of `FOREIGN KEY`, its database defaulted to
/// `db` (the child's).
pub(crate) fn declared(fk: &ForeignKeyConstraint, db: &str) -> SqlResult<Declared> {
    let action = |a: &Option<ReferentialAction>| -> SqlResult<Option<meta::FkAction>> {
        Ok(match a {
            None => None,
            Some(ReferentialAction::Restrict) => Some(meta::FkAction::Restrict),
            Some(ReferentialAction::Cascade) => Some(meta::FkAction::Cascade),
            Some(ReferentialAction::SetNull) => Some(meta::FkAction::SetNull),
            Some(ReferentialAction::NoAction) => Some(meta::FkAction::NoAction),
            Some(ReferentialAction::SetDefault) => {
                return Err(SqlError::unsupported(
                    "ON DELETE / ON UPDATE SET DEFAULT (as NDB; use RESTRICT, \
                     CASCADE or SET NULL)",
                ))
            }
        })
    };
    let parts = super::expr::name_parts(&fk.foreign_table);
    let (parent_db, parent_table) = match parts.as_slice() {
        [t] => (db.to_owned(), t.clone()),
        [d, t] => (d.clone(), t.clone()),
        _ => {
            return Err(SqlError::syntax(format_args!(
                "bad table name {}",
                fk.foreign_table
            )))
        }
    };
    let columns: Vec<String> = fk.columns.iter().map(|c| c.value.clone()).collect();
    let parent_columns: Vec<String> = fk
        .referred_columns
        .iter()
        .map(|c| c.value.clone())
        .collect();
    if columns.len() > FK_COLUMNS_MAX {
        return Err(SqlError::new(
            codes::TOO_MANY_KEY_PARTS,
            format!("Too many key parts specified; max {FK_COLUMNS_MAX} parts allowed"),
        ));
    }
    Ok(Declared {
        name: fk.name.as_ref().map(|n| n.value.clone()),
        index_name: fk.index_name.as_ref().map(|n| n.value.clone()),
        columns,
        parent_db,
        parent_table,
        parent_columns,
        on_delete: action(&fk.on_delete)?,
        on_update: action(&fk.on_update)?,
    })
}

/// MariaDB's refusal of a FOREIGN KEY that does not fit its tables
/// (errno 150), with a note saying why.
pub(crate) fn malformed(conn: &mut Conn<'_>, db: &str, table: &str, why: &str) -> SqlError {
    catalog::warn(conn, 150, why.to_owned());
    SqlError::new(
        codes::CANT_CREATE_TABLE,
        format!(
            "Can't create table `{db}`.`{table}` (errno: 150 \"Foreign key constraint is \
             incorrectly formed\")"
        ),
    )
}

/// The generated name of a table's `n`-th FOREIGN KEY (InnoDB's).
fn generated_name(table: &str, n: usize) -> String {
    format!("{table}_ibfk_{n}")
}

/// Checks `declared` against the child's columns and the parent, and
/// names each: the constraints to keep. `existing`: the child's
/// constraints already there (ALTER TABLE … ADD). `own_keys`: the
/// child's unique keys (column names), for a table that references
/// itself. With `foreign_key_checks=0` a parent that does not exist yet
/// is taken on trust, as MariaDB takes it (dumps create tables in name
/// order).
pub(crate) fn resolve(
    conn: &mut Conn<'_>,
    (db, table): (&str, &str),
    columns: &[ChildColumn<'_>],
    own_keys: &[Vec<String>],
    existing: &[meta::ForeignKeyMeta],
    declared: Vec<Declared>,
) -> SqlResult<Vec<meta::ForeignKeyMeta>> {
    let mut out: Vec<meta::ForeignKeyMeta> = Vec::with_capacity(declared.len());
    // InnoDB numbers generated names past the highest one there.
    let prefix = format!("{table}_ibfk_");
    let mut next = existing
        .iter()
        .filter_map(|f| f.name.strip_prefix(&prefix)?.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    for d in declared {
        let name = match d.name.clone() {
            Some(name) => name,
            None => {
                let name = generated_name(table, next);
                next += 1;
                name
            }
        };
        let taken = existing.iter().chain(out.iter());
        if taken.clone().any(|f| f.name.eq_ignore_ascii_case(&name)) {
            return Err(SqlError::new(
                codes::DUP_CONSTRAINT_NAME,
                format!("Duplicate FOREIGN KEY constraint name '{name}'"),
            ));
        }
        if d.columns.len() != d.parent_columns.len() || d.columns.is_empty() {
            let why = format!(
                "FOREIGN KEY '{name}' has {} columns and its parent's key {}",
                d.columns.len(),
                d.parent_columns.len()
            );
            return Err(malformed(conn, db, table, &why));
        }
        let mut child: Vec<&ChildColumn<'_>> = Vec::with_capacity(d.columns.len());
        for c in &d.columns {
            match columns.iter().find(|x| x.name.eq_ignore_ascii_case(c)) {
                Some(col) => child.push(col),
                None => {
                    return Err(SqlError::new(
                        codes::KEY_COLUMN_DOES_NOT_EXIST,
                        format!("Key column '{c}' doesn't exist in table"),
                    ))
                }
            }
        }
        let sets_null = d.on_delete == Some(meta::FkAction::SetNull)
            || d.on_update == Some(meta::FkAction::SetNull);
        if let Some(c) = child.iter().find(|c| sets_null && !c.nullable) {
            let why = format!(
                "FOREIGN KEY '{name}' sets column '{}' to NULL, which is NOT NULL",
                c.name
            );
            return Err(malformed(conn, db, table, &why));
        }
        let same_table = d.parent_db == db && d.parent_table == table;
        if same_table {
            let mut parent_types = Vec::with_capacity(d.parent_columns.len());
            for p in &d.parent_columns {
                match columns.iter().find(|x| x.name.eq_ignore_ascii_case(p)) {
                    Some(col) => parent_types.push(col.ty),
                    None => {
                        let why = format!("the parent has no column '{p}' (FOREIGN KEY '{name}')");
                        return Err(malformed(conn, db, table, &why));
                    }
                }
            }
            if !own_keys.iter().any(|k| same_columns(k, &d.parent_columns)) {
                let why = not_unique(&name, table);
                return Err(malformed(conn, db, table, &why));
            }
            check_types(conn, (db, table), &name, &child, &parent_types)?;
        } else {
            match catalog::table(conn, Some(&d.parent_db), &d.parent_table) {
                Ok(parent) => {
                    if parent.is_temporary() {
                        let why = format!("the parent '{}' is a temporary table", d.parent_table);
                        return Err(malformed(conn, db, table, &why));
                    }
                    let Some(at) = column_positions(&parent, &d.parent_columns) else {
                        let why = format!(
                            "the parent '{}' has no column named as FOREIGN KEY '{name}' says",
                            d.parent_table
                        );
                        return Err(malformed(conn, db, table, &why));
                    };
                    if parent_key(&parent, &at).is_none() {
                        let why = not_unique(&name, &d.parent_table);
                        return Err(malformed(conn, db, table, &why));
                    }
                    let types: Vec<&SqlType> = at.iter().map(|&c| &parent.columns[c].ty).collect();
                    check_types(conn, (db, table), &name, &child, &types)?;
                }
                Err(e)
                    if e.code == codes::TABLE_NOT_FOUND && !conn.session.foreign_key_checks() => {}
                Err(e) if e.code == codes::TABLE_NOT_FOUND => {
                    let why = format!(
                        "the parent table `{}`.`{}` of FOREIGN KEY '{name}' does not exist",
                        d.parent_db, d.parent_table
                    );
                    return Err(malformed(conn, db, table, &why));
                }
                Err(e) => return Err(e),
            }
        }
        out.push(meta::ForeignKeyMeta {
            name,
            columns: child.iter().map(|c| c.name.to_owned()).collect(),
            parent_db: d.parent_db,
            parent_table: d.parent_table,
            parent_columns: d.parent_columns,
            on_delete: d.on_delete,
            on_update: d.on_update,
        });
    }
    Ok(out)
}

fn not_unique(name: &str, parent: &str) -> String {
    format!(
        "the columns FOREIGN KEY '{name}' references are not the PRIMARY KEY or a UNIQUE key \
         of '{parent}' (NDB's rule: a parent row is found by its key)"
    )
}

/// Two lists of the same column names, in any order (a unique key's
/// columns as a FOREIGN KEY names them).
pub(crate) fn same_columns(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|x| b.iter().any(|y| y.eq_ignore_ascii_case(x)))
}

/// Whether index `key` (column names, in order) leads with `columns`.
pub(crate) fn leads_with(key: &[String], columns: &[String]) -> bool {
    key.len() >= columns.len()
        && key
            .iter()
            .zip(columns)
            .all(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// A child's and its parent's columns must hold the same values: the
/// same integer type and sign, strings of one collation, otherwise the
/// same type (InnoDB's rule; lengths of strings may differ).
fn check_types(
    conn: &mut Conn<'_>,
    (db, table): (&str, &str),
    name: &str,
    child: &[&ChildColumn<'_>],
    parent: &[&SqlType],
) -> SqlResult<()> {
    for (c, p) in child.iter().zip(parent) {
        if !compatible(c.ty, p) {
            let why = format!(
                "FOREIGN KEY '{name}': column '{}' is not of its parent column's type",
                c.name
            );
            return Err(malformed(conn, db, table, &why));
        }
    }
    Ok(())
}

fn compatible(a: &SqlType, b: &SqlType) -> bool {
    use SqlType as T;
    let text = |t: &SqlType| match t {
        T::Char { collation, .. } | T::VarChar { collation, .. } => Some(*collation),
        _ => None,
    };
    let bytes = |t: &SqlType| matches!(t, T::Binary { .. } | T::VarBinary { .. });
    match (text(a), text(b)) {
        (Some(x), Some(y)) => return x == y,
        (None, None) => {}
        _ => return false,
    }
    if bytes(a) || bytes(b) {
        return bytes(a) && bytes(b);
    }
    if matches!(a, T::Text { .. } | T::Blob { .. }) {
        return false;
    }
    a == b
}

/// Positions (SQL) of `table`'s columns named `names`, in that order
/// (None: one is not there).
pub(crate) fn column_positions(table: &TableInfo, names: &[String]) -> Option<Vec<usize>> {
    names.iter().map(|n| table.column(n)).collect()
}

/// The parent's key made of exactly the columns `at` (SQL positions, any
/// order): the primary key first, else a UNIQUE key with a hash index.
pub(crate) fn parent_key<'t>(parent: &'t TableInfo, at: &[usize]) -> Option<&'t catalog::KeyInfo> {
    let natives: Vec<usize> = at.iter().map(|&c| parent.columns[c].native).collect();
    let fits = |k: &catalog::KeyInfo| {
        k.columns.len() == natives.len() && k.columns.iter().all(|c| natives.contains(c))
    };
    parent
        .keys
        .iter()
        .find(|k| k.primary && !parent.hidden_key && fits(k))
        .or_else(|| {
            parent
                .keys
                .iter()
                .find(|k| !k.primary && k.unique && k.hash.is_some() && fits(k))
        })
}

/// Whether a FOREIGN KEY on `columns` needs an index made for it: no key
/// of the child (`keys`: column names, in order) leads with them.
pub(crate) fn needs_index(columns: &[String], keys: &[Vec<String>]) -> bool {
    !keys.iter().any(|k| leads_with(k, columns))
}

/// Adds `child` to the `referenced_by` of each parent its new FOREIGN
/// KEYs name (other than itself), before the child's definition is
/// written. A parent that does not exist is skipped (it finds its
/// children when it is created: [`adopt_children`]).
pub(crate) fn note_children(
    conn: &mut Conn<'_>,
    (db, table): (&str, &str),
    fks: &[meta::ForeignKeyMeta],
) -> SqlResult<()> {
    let mut parents: Vec<(&str, &str)> = fks
        .iter()
        .map(|f| (f.parent_db.as_str(), f.parent_table.as_str()))
        .filter(|&(d, t)| !(d == db && t == table))
        .collect();
    parents.sort_unstable();
    parents.dedup();
    for (pdb, ptable) in parents {
        let parent = match catalog::table(conn, Some(pdb), ptable) {
            Ok(p) => p,
            Err(e) if e.code == codes::TABLE_NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        add_referenced_by(conn, &parent, (db, table))?;
    }
    Ok(())
}

/// Writes `child` into `parent`'s `referenced_by` (a native alter of its
/// SQL metadata), unless it is there.
pub(crate) fn add_referenced_by(
    conn: &mut Conn<'_>,
    parent: &TableInfo,
    (db, table): (&str, &str),
) -> SqlResult<()> {
    let entry = (db.to_owned(), table.to_owned());
    edit_meta(conn, parent, |sql| {
        if sql.referenced_by.contains(&entry) {
            return false;
        }
        sql.referenced_by.push(entry.clone());
        sql.referenced_by.sort();
        true
    })
}

/// A table just created, `(db, table)`: the existing tables whose
/// FOREIGN KEYs name it (made while it did not exist, with
/// `foreign_key_checks=0`) go into its `referenced_by`.
pub(crate) fn adopt_children(conn: &mut Conn<'_>, (db, table): (&str, &str)) -> SqlResult<()> {
    let all = catalog::retry(|| conn.native.list_tables())?;
    let mut children: Vec<(String, String)> = Vec::new();
    for cluster in &all {
        let Some((cdb, ctable)) = catalog::split_cluster_name(cluster) else {
            continue;
        };
        if (cdb == db && ctable == table) || super::alter_copy::is_temp_name(ctable) {
            continue;
        }
        let Ok(child) = catalog::table(conn, Some(cdb), ctable) else {
            continue;
        };
        if child
            .sql
            .foreign_keys
            .iter()
            .any(|f| f.parent_db == db && f.parent_table == table)
        {
            children.push((cdb.to_owned(), ctable.to_owned()));
        }
    }
    if children.is_empty() {
        return Ok(());
    }
    let parent = catalog::table(conn, Some(db), table)?;
    edit_meta(conn, &parent, |sql| {
        for c in &children {
            if !sql.referenced_by.contains(c) {
                sql.referenced_by.push(c.clone());
            }
        }
        sql.referenced_by.sort();
        true
    })
}

/// The FOREIGN KEYs of other tables that name `parent` as their parent,
/// each with its child: what a write of the parent must look at, and what
/// DROP TABLE and TRUNCATE refuse over.
pub(crate) fn children_of(
    conn: &Conn<'_>,
    parent: &TableInfo,
) -> SqlResult<Vec<(std::sync::Arc<TableInfo>, meta::ForeignKeyMeta)>> {
    let mut out = Vec::new();
    let own = parent
        .sql
        .foreign_keys
        .iter()
        .filter(|f| f.parent_db == parent.db && f.parent_table == parent.name);
    if own.clone().next().is_some() {
        // A table that references itself is its own child.
        let me = catalog::table(conn, Some(&parent.db), &parent.name)?;
        for f in own {
            out.push((std::sync::Arc::clone(&me), f.clone()));
        }
    }
    for (db, table) in &parent.sql.referenced_by {
        if *db == parent.db && *table == parent.name {
            continue;
        }
        let child = match catalog::table(conn, Some(db), table) {
            Ok(c) => c,
            Err(e) if e.code == codes::TABLE_NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        for f in &child.sql.foreign_keys {
            if f.parent_db == parent.db && f.parent_table == parent.name {
                out.push((std::sync::Arc::clone(&child), f.clone()));
            }
        }
    }
    Ok(out)
}

/// How MariaDB's errors describe a constraint: `` CONSTRAINT `fk` FOREIGN
/// KEY (`a`) REFERENCES `p` (`id`) ON DELETE CASCADE ``, the parent's
/// database named when it is not the child's. `qualified`: TRUNCATE's
/// form, the database always named and no actions.
pub(crate) fn describe(child_db: &str, fk: &meta::ForeignKeyMeta, qualified: bool) -> String {
    let list = |cols: &[String]| {
        cols.iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parent = if qualified || fk.parent_db != child_db {
        format!("`{}`.`{}`", fk.parent_db, fk.parent_table)
    } else {
        format!("`{}`", fk.parent_table)
    };
    let mut out = format!(
        "CONSTRAINT `{}` FOREIGN KEY ({}) REFERENCES {parent} ({})",
        fk.name,
        list(&fk.columns),
        list(&fk.parent_columns)
    );
    if qualified {
        return out;
    }
    if let Some(a) = fk.on_delete {
        out.push_str(" ON DELETE ");
        out.push_str(a.sql());
    }
    if let Some(a) = fk.on_update {
        out.push_str(" ON UPDATE ");
        out.push_str(a.sql());
    }
    out
}

/// 1452: a child row whose parent is not there.
pub(crate) fn no_parent(db: &str, table: &str, fk: &meta::ForeignKeyMeta) -> SqlError {
    SqlError::new(
        codes::NO_REFERENCED_ROW_2,
        format!(
            "Cannot add or update a child row: a foreign key constraint fails (`{db}`.`{table}`, \
             {})",
            describe(db, fk, false)
        ),
    )
}

/// 1451: a parent row that child rows still reference.
pub(crate) fn referenced(db: &str, table: &str, fk: &meta::ForeignKeyMeta) -> SqlError {
    SqlError::new(
        codes::ROW_IS_REFERENCED_2,
        format!(
            "Cannot delete or update a parent row: a foreign key constraint fails \
             (`{db}`.`{table}`, {})",
            describe(db, fk, false)
        ),
    )
}

/// Rewrites the SQL metadata of `table` with `edit` (a native alter),
/// when `edit` says it changed something. The definition is read again
/// and the edit redone when another change got there first (1412: this
/// SQL node's copy was older than the dictionary's), up to
/// [`META_EDIT_ATTEMPTS_MAX`] times.
fn edit_meta(
    conn: &mut Conn<'_>,
    table: &TableInfo,
    mut edit: impl FnMut(&mut meta::TableMeta) -> bool,
) -> SqlResult<()> {
    let (db, name) = (table.db.clone(), table.name.clone());
    let mut attempt = 1;
    loop {
        let table = catalog::table(conn, Some(&db), &name)?;
        let mut sql = table.sql.clone();
        if !edit(&mut sql) {
            return Ok(());
        }
        let mut def = table.native.def().clone();
        def.sql_meta = sql.encode();
        match super::ddl::alter_native(conn, def, None) {
            Err(e)
                if e.code == super::txn::TABLE_DEF_CHANGED && attempt < META_EDIT_ATTEMPTS_MAX =>
            {
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// How often [`edit_meta`] reads a table again after losing a race.
const META_EDIT_ATTEMPTS_MAX: usize = 5;

/// A table renamed from `from` to `to` (RENAME TABLE, ALTER TABLE …
/// RENAME): its children now name it by its new name (InnoDB's
/// constraints follow the table), and its parents list it under it.
pub(crate) fn renamed(conn: &mut Conn<'_>, from: (&str, &str), to: (&str, &str)) -> SqlResult<()> {
    let table = catalog::table(conn, Some(to.0), to.1)?;
    let names_from = |f: &meta::ForeignKeyMeta| f.parent_db == from.0 && f.parent_table == from.1;
    let point = |sql: &mut meta::TableMeta| {
        let mut changed = false;
        for f in sql.foreign_keys.iter_mut().filter(|f| names_from(f)) {
            f.parent_db = to.0.to_owned();
            f.parent_table = to.1.to_owned();
            changed = true;
        }
        changed
    };
    // Itself first (a table that references itself), then its children.
    edit_meta(conn, &table, |sql| {
        let mut changed = point(sql);
        // Generated names follow the table's (InnoDB's `t_ibfk_N`).
        let old_prefix = format!("{}_ibfk_", from.1);
        for f in sql.foreign_keys.iter_mut() {
            if let Some(n) = f.name.strip_prefix(&old_prefix) {
                if from.1 != to.1 && n.parse::<usize>().is_ok() {
                    f.name = format!("{}_ibfk_{n}", to.1);
                    changed = true;
                }
            }
        }
        for entry in sql.referenced_by.iter_mut() {
            if entry.0 == from.0 && entry.1 == from.1 {
                *entry = (to.0.to_owned(), to.1.to_owned());
                changed = true;
            }
        }
        sql.referenced_by.sort();
        sql.referenced_by.dedup();
        changed
    })?;
    let children = table.sql.referenced_by.clone();
    for (db, name) in children {
        let Ok(child) = catalog::table(conn, Some(&db), &name) else {
            continue;
        };
        edit_meta(conn, &child, point)?;
    }
    // Its parents list it by its new name.
    let table = catalog::table(conn, Some(to.0), to.1)?;
    for (db, name) in parents_of(&table) {
        let Ok(parent) = catalog::table(conn, Some(&db), &name) else {
            continue;
        };
        edit_meta(conn, &parent, |sql| {
            sql.referenced_by
                .retain(|e| !(e.0 == from.0 && e.1 == from.1));
            let entry = (to.0.to_owned(), to.1.to_owned());
            if !sql.referenced_by.contains(&entry) {
                sql.referenced_by.push(entry);
            }
            sql.referenced_by.sort();
            true
        })?;
    }
    Ok(())
}

/// The tables `table`'s FOREIGN KEYs name as parents, other than itself,
/// each once.
fn parents_of(table: &TableInfo) -> Vec<(String, String)> {
    let mut parents: Vec<(String, String)> = table
        .sql
        .foreign_keys
        .iter()
        .map(|f| (f.parent_db.clone(), f.parent_table.clone()))
        .filter(|(d, t)| !(*d == table.db && *t == table.name))
        .collect();
    parents.sort();
    parents.dedup();
    parents
}

/// A child table dropped: its parents stop listing it (each entry costs
/// every later write of the parent a lookup).
pub(crate) fn dropped(conn: &mut Conn<'_>, table: &TableInfo) {
    for (db, name) in parents_of(table) {
        let Ok(parent) = catalog::table(conn, Some(&db), &name) else {
            continue;
        };
        let result = edit_meta(conn, &parent, |sql| {
            let before = sql.referenced_by.len();
            sql.referenced_by
                .retain(|e| !(e.0 == table.db && e.1 == table.name));
            sql.referenced_by.len() != before
        });
        if let Err(e) = result {
            // Harmless: a name too many is skipped when it is looked up.
            tracing::warn!(parent = %name, error = %e.message, "DROP TABLE: the parent still lists the child");
        }
    }
}

/// A parent's referenced columns renamed by an ALTER TABLE: the child's
/// constraint to rewrite with the new names.
pub(crate) struct ParentRenamed {
    pub child: (String, String),
    pub constraint: String,
    pub columns: Vec<String>,
}

/// Writes [`ParentRenamed`]s into their children, once the parent's
/// change is made (MariaDB renames the columns in the constraint too).
pub(crate) fn parent_columns_renamed(
    conn: &mut Conn<'_>,
    edits: &[ParentRenamed],
) -> SqlResult<()> {
    for edit in edits {
        let Ok(child) = catalog::table(conn, Some(&edit.child.0), &edit.child.1) else {
            continue;
        };
        edit_meta(conn, &child, |sql| {
            let mut changed = false;
            for f in sql.foreign_keys.iter_mut() {
                if f.name == edit.constraint && f.parent_columns != edit.columns {
                    f.parent_columns = edit.columns.clone();
                    changed = true;
                }
            }
            changed
        })?;
    }
    Ok(())
}
