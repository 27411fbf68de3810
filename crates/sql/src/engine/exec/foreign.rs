//! What FOREIGN KEYs do to rows (`engine/foreign.rs` declares them).
//!
//! The SQL node enforces them inside the statement's native transaction:
//!
//! - A child row written (inserted, or updated in its key's columns) with
//!   no NULL in the key needs its parent: one key read of the parent per
//!   distinct key, with a shared lock held to the end of the transaction,
//!   all of a batch's reads in one round trip, before the rows are
//!   written. A missing parent is 1452.
//! - A parent row deleted, or updated in the referenced columns, has its
//!   children looked for by a scan of the child's index on the key (every
//!   child row it finds locked exclusively): RESTRICT and NO ACTION refuse
//!   (1451); CASCADE deletes them or gives them the new key; SET NULL sets
//!   their key to NULL. What a cascade changes is itself a parent's change
//!   of the child, to a depth of [`FK_CASCADE_DEPTH_MAX`].
//!
//! Why it is safe with many SQL nodes: a child's check holds a shared lock
//! on the parent row, and a parent's delete or key update holds an
//! exclusive one on it before it looks for children. Either the child's
//! writer locked first (and the parent's writer then waits for it to end,
//! and its scan sees the committed child), or the parent's did (and the
//! child's check waits, then finds no parent).
//!
//! With `foreign_key_checks=0` nothing here runs (as MariaDB's).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use schema::Value;
use skarv_client::{ExecMode, LockMode, Op, OpHandle, Outcome, Transaction};

use super::convert::{self, Target};
use super::{fetch, RowLock, OPS_PER_EXECUTE_MAX};
use crate::engine::catalog::{meta, TableInfo};
use crate::engine::expr::{CmpOp, Ctx, Expr, InList, Val};
use crate::engine::foreign::{children_of, column_positions, no_parent, parent_key, referenced};
use crate::engine::session::statement_deadline;
use crate::engine::{catalog, plan, txn, Conn};
use crate::error::{codes, SqlError, SqlResult};

/// How deep CASCADE and SET NULL go (InnoDB's limit).
pub const FK_CASCADE_DEPTH_MAX: usize = 15;

/// A child's FOREIGN KEY, its parent resolved.
pub(crate) struct ChildCheck {
    fk: meta::ForeignKeyMeta,
    /// The child's columns (SQL positions), in the key's order.
    columns: Vec<usize>,
    /// The parent and how a row of it is found: its table, the parent's
    /// column (SQL position) of each lookup key column, in lookup order,
    /// with the FOREIGN KEY column that gives its value, and the unique
    /// index (None: the primary key). None: the parent does not exist
    /// (declared with `foreign_key_checks=0`): every key fails.
    parent: Option<ParentLookup>,
    /// The child is its own parent.
    own: bool,
}

/// A parent table, the (parent column, FOREIGN KEY column) of each of
/// its lookup key's columns, and its unique index (None: primary key).
type ParentLookup = (Arc<TableInfo>, Vec<(usize, usize)>, Option<String>);

/// A parent row changed: (old row, its primary key, new row; None when
/// it is deleted).
pub(crate) type ParentChange<'r> = (&'r [Val], &'r [Value], Option<&'r [Val]>);

/// The checks a write of `table`'s rows needs (none with
/// `foreign_key_checks=0`).
pub(crate) fn child_checks(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<Vec<ChildCheck>> {
    if table.sql.foreign_keys.is_empty() || !conn.session.foreign_key_checks() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(table.sql.foreign_keys.len());
    for fk in &table.sql.foreign_keys {
        let Some(columns) = column_positions(table, &fk.columns) else {
            return Err(SqlError::new(
                codes::UNKNOWN,
                format!(
                    "FOREIGN KEY '{}' of '{}' names a column the table no longer has",
                    fk.name, table.name
                ),
            ));
        };
        let own = fk.parent_db == table.db && fk.parent_table == table.name;
        let parent = match catalog::table(conn, Some(&fk.parent_db), &fk.parent_table) {
            Ok(p) => Some(p),
            Err(e) if e.code == codes::TABLE_NOT_FOUND => None,
            Err(e) => return Err(e),
        };
        let parent = parent.and_then(|p| {
            let at = column_positions(&p, &fk.parent_columns)?;
            let key = parent_key(&p, &at)?;
            // Lookup order: the key's columns (the native primary key's
            // order for a read by primary key, which puts a PARTITION BY
            // KEY column first), each given by the FOREIGN KEY's column
            // in the same place as its parent column.
            let columns = if key.primary {
                &p.native.def().primary_key
            } else {
                &key.columns
            };
            let order: Vec<(usize, usize)> = columns
                .iter()
                .filter_map(|native| {
                    let pc = p.sql_column(*native)?;
                    let k = at.iter().position(|&a| a == pc)?;
                    Some((pc, k))
                })
                .collect();
            let index = if key.primary { None } else { key.hash.clone() };
            Some((Arc::clone(&p), order, index))
        });
        out.push(ChildCheck {
            fk: fk.clone(),
            columns,
            parent,
            own,
        });
    }
    Ok(out)
}

/// The statement's child rows `rows` (each new, with its old values for
/// an update: only a key that changed is checked), against their parents:
/// per row, the first FOREIGN KEY that fails (1452), else None. `rows`
/// are written after this returns; a table that is its own parent takes
/// a parent from the statement's earlier rows (and the row itself), as
/// InnoDB, which checks each row after writing it.
pub(crate) fn missing_parents(
    tx: &Transaction<'_>,
    table: &TableInfo,
    checks: &[ChildCheck],
    rows: &[(&[Val], Option<&[Val]>)],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Option<SqlError>>> {
    let mut failed: Vec<Option<SqlError>> = (0..rows.len()).map(|_| None).collect();
    if checks.is_empty() {
        return Ok(failed);
    }
    // Each distinct (constraint, key) read once.
    let mut reads: HashMap<(usize, Vec<u8>), Read> = HashMap::new();
    let mut pending: Vec<(usize, Vec<u8>)> = Vec::new();
    let warned = ctx.warnings.len();
    // Per constraint of a table that is its own parent: the parent keys
    // the statement's rows so far hold (as text).
    let mut own_keys: Vec<HashSet<Vec<String>>> = vec![HashSet::new(); checks.len()];
    for (n, (new, old)) in rows.iter().enumerate() {
        for (f, check) in checks.iter().enumerate() {
            if let (true, Some((_, lookup, _))) = (check.own, &check.parent) {
                let held: Vec<String> = lookup.iter().map(|&(pc, _)| new[pc].to_text()).collect();
                if lookup.iter().all(|&(pc, _)| !new[pc].is_null()) {
                    own_keys[f].insert(held);
                }
            }
        }
        for (f, check) in checks.iter().enumerate() {
            let values: Vec<&Val> = check.columns.iter().map(|&c| &new[c]).collect();
            if values.iter().any(|v| v.is_null()) {
                continue;
            }
            if let Some(old) = old {
                if check.columns.iter().all(|&c| same(&old[c], &new[c])) {
                    continue;
                }
            }
            let fail = |failed: &mut [Option<SqlError>]| {
                failed[n].get_or_insert_with(|| no_parent(&table.db, &table.name, &check.fk));
            };
            let Some((parent, lookup, index)) = &check.parent else {
                fail(&mut failed);
                continue;
            };
            if check.own {
                // This row or an earlier one of the statement.
                let wanted: Vec<String> =
                    lookup.iter().map(|&(_, k)| values[k].to_text()).collect();
                if own_keys[f].contains(&wanted) {
                    continue;
                }
            }
            let mut key = Vec::with_capacity(lookup.len());
            let mut fits = true;
            for &(pc, k) in lookup {
                let target = Target {
                    column: &parent.columns[pc],
                    db: &parent.db,
                    table: &parent.name,
                    row: n + 1,
                    tz_secs: ctx.env.tz_secs,
                };
                match convert::store(values[k], &target, ctx) {
                    Ok(v) => key.push(v),
                    Err(_) => fits = false,
                }
            }
            if !fits || ctx.warnings.len() > warned {
                // A value the parent's column cannot hold: no parent has it.
                ctx.warnings.truncate(warned);
                fail(&mut failed);
                continue;
            }
            let id = (f, super::write::key_bytes(parent.native.def(), &key));
            match reads.get_mut(&id) {
                Some(Read::Found) => {}
                Some(Read::Missing) => fail(&mut failed),
                Some(Read::Pending(_, waiting)) => waiting.push(n),
                None => {
                    let mut op = Op::read(&parent.native, &key)
                        .lock(LockMode::Shared)
                        .ignore_error();
                    if let Some(index) = index {
                        op = op.index(index);
                    }
                    let handle = tx
                        .define(op)
                        .map_err(|e| txn::native_error_in(&e, &parent.name))?;
                    reads.insert(id.clone(), Read::Pending(handle, vec![n]));
                    pending.push(id);
                    if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
                        send(tx, (checks, table), &mut reads, &mut pending, &mut failed)?;
                    }
                }
            }
        }
    }
    if !pending.is_empty() {
        send(tx, (checks, table), &mut reads, &mut pending, &mut failed)?;
    }
    Ok(failed)
}

/// A parent key's read: sent (with the rows waiting for it), or its
/// answer, which stands to the end of the transaction (the shared lock).
enum Read {
    Pending(OpHandle, Vec<usize>),
    Found,
    Missing,
}

fn execute(tx: &Transaction<'_>, table: &TableInfo) -> SqlResult<Outcome> {
    tx.execute(ExecMode::NoCommit)
        .map_err(|e| txn::native_error_in(&e, &table.name))
}

/// Sends the pending reads (and whatever else the transaction has
/// pending) and answers them: the rows of a parent not found fail.
fn send(
    tx: &Transaction<'_>,
    (checks, table): (&[ChildCheck], &TableInfo),
    reads: &mut HashMap<(usize, Vec<u8>), Read>,
    pending: &mut Vec<(usize, Vec<u8>)>,
    failed: &mut [Option<SqlError>],
) -> SqlResult<()> {
    let outcome = execute(tx, table)?;
    for id in pending.drain(..) {
        let Some(read) = reads.get_mut(&id) else {
            continue;
        };
        let Read::Pending(handle, waiting) = read else {
            continue;
        };
        let (parent, ..) = checks[id.0]
            .parent
            .as_ref()
            .expect("read only when resolved");
        let found = super::found_row(parent, outcome.result(*handle))?.is_some();
        if !found {
            for &n in waiting.iter() {
                failed[n]
                    .get_or_insert_with(|| no_parent(&table.db, &table.name, &checks[id.0].fk));
            }
        }
        *read = if found { Read::Found } else { Read::Missing };
    }
    Ok(())
}

fn same(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Null, _) | (_, Val::Null) => false,
        _ => a.to_text() == b.to_text(),
    }
}

/// A FOREIGN KEY that names `table` as its parent, its child resolved.
pub(crate) struct ParentAction {
    child: Arc<TableInfo>,
    fk: meta::ForeignKeyMeta,
    /// The child's columns (SQL positions), in the key's order.
    child_columns: Vec<usize>,
    /// The parent's referenced columns (SQL positions), same order.
    parent_columns: Vec<usize>,
}

/// What a delete or key update of `table`'s rows must look at (none with
/// `foreign_key_checks=0`).
pub(crate) fn parent_actions(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<Vec<ParentAction>> {
    if !conn.session.foreign_key_checks() || !is_parent(table) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (child, fk) in children_of(conn, table)? {
        let (Some(child_columns), Some(parent_cols)) = (
            column_positions(&child, &fk.columns),
            column_positions(table, &fk.parent_columns),
        ) else {
            // Never silently unchecked: the write fails, naming why.
            return Err(SqlError::new(
                codes::UNKNOWN,
                format!(
                    "FOREIGN KEY '{}' of '{}' names a column that '{}' or '{}' no longer has",
                    fk.name, child.name, child.name, table.name
                ),
            ));
        };
        out.push(ParentAction {
            child,
            fk,
            child_columns,
            parent_columns: parent_cols,
        });
    }
    Ok(out)
}

/// Whether [`parent_changed`] may write child rows for these actions
/// (a CASCADE or SET NULL, on delete or on update): a statement that
/// fails after it has writes of other tables to take back
/// ([`crate::engine::txn::mark_statement`]).
pub(crate) fn actions_write(actions: &[ParentAction]) -> bool {
    actions.iter().any(|a| {
        [a.fk.on_delete, a.fk.on_update].iter().any(|rule| {
            matches!(
                rule,
                Some(meta::FkAction::Cascade | meta::FkAction::SetNull)
            )
        })
    })
}

/// Whether a write of `table` may need [`parent_changed`]: it is a
/// parent. (Asked before the statement resolves its children.)
pub(crate) fn is_parent(table: &TableInfo) -> bool {
    !table.sql.referenced_by.is_empty()
        || table
            .sql
            .foreign_keys
            .iter()
            .any(|f| f.parent_db == table.db && f.parent_table == table.name)
}

/// [`parent_changed`] of a statement's own rows (depth 0); nothing to do
/// (and no rows collected) when no FOREIGN KEY names `table`.
pub(crate) fn statement_changed<'r>(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    (table, actions): (&TableInfo, &[ParentAction]),
    rows: impl Iterator<Item = ParentChange<'r>>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<bool> {
    if actions.is_empty() {
        return Ok(false);
    }
    let rows: Vec<ParentChange<'r>> = rows.collect();
    parent_changed(conn, tx, table, actions, &rows, ctx, 0)
}

/// Parent rows of `table` about to be deleted (`new` None) or updated:
/// each as (old row, its primary key, new row). Refuses (1451) or acts
/// on their children as each FOREIGN KEY says, inside `tx`, before the
/// parent's own writes are sent. True when it changed a child row. A
/// statement cannot take such writes back by itself, and it may fail
/// after them (here too, deeper down): inside a transaction its caller
/// takes a [`crate::engine::txn::mark_statement`] first (which it does
/// when [`actions_write`]), and goes back to it on failure.
pub(crate) fn parent_changed(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    table: &TableInfo,
    actions: &[ParentAction],
    rows: &[ParentChange<'_>],
    ctx: &mut Ctx<'_>,
    depth: usize,
) -> SqlResult<bool> {
    let mut wrote = false;
    if actions.is_empty() || rows.is_empty() {
        return Ok(wrote);
    }
    for action in actions {
        // Old key → new key (None: deleted), each old key once.
        let mut keys: Vec<(Vec<Val>, Option<Vec<Val>>)> = Vec::new();
        let mut seen: HashMap<Vec<String>, ()> = HashMap::new();
        for (old, _, new) in rows {
            let before: Vec<Val> = action
                .parent_columns
                .iter()
                .map(|&c| old[c].clone())
                .collect();
            if before.iter().any(Val::is_null) {
                continue;
            }
            let after = match new {
                None => None,
                Some(new) => {
                    let after: Vec<Val> = action
                        .parent_columns
                        .iter()
                        .map(|&c| new[c].clone())
                        .collect();
                    if before.iter().zip(&after).all(|(a, b)| same(a, b)) {
                        continue;
                    }
                    Some(after)
                }
            };
            let id: Vec<String> = before.iter().map(|v| v.to_text()).collect();
            if seen.insert(id, ()).is_none() {
                keys.push((before, after));
            }
        }
        if keys.is_empty() {
            continue;
        }
        let deleting = rows.first().is_some_and(|r| r.2.is_none());
        let rule = if deleting {
            action.fk.on_delete
        } else {
            action.fk.on_update
        };
        let rule = rule.unwrap_or(meta::FkAction::Restrict);
        if depth >= FK_CASCADE_DEPTH_MAX && rule != meta::FkAction::Restrict {
            return Err(SqlError::new(
                codes::ROW_IS_REFERENCED_2,
                format!(
                    "Foreign key cascade delete/update exceeds max depth of \
                     {FK_CASCADE_DEPTH_MAX}"
                ),
            ));
        }
        let child = &action.child;
        // A table that references itself: a DELETE takes the statement's
        // own rows too, so they are not children that hold the parent; an
        // UPDATE's CASCADE or SET NULL of its own table acts as RESTRICT
        // (MySQL's rule: InnoDB refuses a cascade back into the table it
        // updates), which also keeps it from rows the statement then
        // writes from their old values.
        let same_table = Arc::ptr_eq(&child.native, &table.native);
        let own_keys: Vec<&[Value]> = if same_table && deleting {
            rows.iter().map(|r| r.1).collect()
        } else {
            Vec::new()
        };
        let mut found: Vec<Child> = Vec::new();
        let olds: Vec<&[Val]> = keys.iter().map(|(before, _)| before.as_slice()).collect();
        for (row, key, k) in children(tx, child, &action.child_columns, &olds, ctx)? {
            if own_keys.contains(&key.as_slice()) {
                continue;
            }
            found.push((row, key, k));
        }
        if same_table && !deleting && !found.is_empty() {
            return Err(referenced(&child.db, &child.name, &action.fk));
        }
        if found.is_empty() {
            continue;
        }
        match rule {
            meta::FkAction::Restrict | meta::FkAction::NoAction => {
                return Err(referenced(&child.db, &child.name, &action.fk));
            }
            meta::FkAction::Cascade if deleting => {
                let grand = parent_actions(conn, child)?;
                let gone: Vec<ParentChange<'_>> = found
                    .iter()
                    .map(|(row, key, _)| (row.as_slice(), key.as_slice(), None))
                    .collect();
                parent_changed(conn, tx, child, &grand, &gone, ctx, depth + 1)?;
                wrote = true;
                for (_, key, _) in &found {
                    // A row reached twice (two constraints of one child,
                    // or two paths of a cascade) is deleted once: the
                    // second finds it gone, which is no error.
                    tx.define(Op::delete(&child.native, key).ignore_error())
                        .map_err(|e| txn::native_error_in(&e, &child.name))?;
                    if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
                        execute(tx, child)?;
                    }
                }
            }
            meta::FkAction::Cascade | meta::FkAction::SetNull => {
                let new_rows: Vec<Vec<Val>> = found
                    .iter()
                    .map(|(row, _, k)| {
                        let mut new = row.clone();
                        for (i, &c) in action.child_columns.iter().enumerate() {
                            new[c] = match (&rule, &keys[*k].1) {
                                (meta::FkAction::Cascade, Some(after)) => after[i].clone(),
                                _ => Val::Null,
                            };
                        }
                        new
                    })
                    .collect();
                let grand = parent_actions(conn, child)?;
                let changed: Vec<ParentChange<'_>> = found
                    .iter()
                    .zip(&new_rows)
                    .map(|((row, key, _), new)| {
                        (row.as_slice(), key.as_slice(), Some(new.as_slice()))
                    })
                    .collect();
                parent_changed(conn, tx, child, &grand, &changed, ctx, depth + 1)?;
                wrote = true;
                for ((_, key, _), new) in found.iter().zip(&new_rows) {
                    let mut set: Vec<(usize, Value)> =
                        Vec::with_capacity(action.child_columns.len());
                    for &c in &action.child_columns {
                        let column = &child.columns[c];
                        let target = Target {
                            column,
                            db: &child.db,
                            table: &child.name,
                            row: 1,
                            tz_secs: ctx.env.tz_secs,
                        };
                        set.push((column.native, convert::store(&new[c], &target, ctx)?));
                    }
                    let pk = &child.native.def().primary_key;
                    if set.iter().any(|(c, _)| pk.contains(c)) {
                        return Err(SqlError::unsupported(format_args!(
                            "FOREIGN KEY '{}': CASCADE or SET NULL of a column of the \
                             primary key of '{}'",
                            action.fk.name, child.name
                        )));
                    }
                    tx.define(Op::update_at(&child.native, key, &set))
                        .map_err(|e| txn::native_error_in(&e, &child.name))?;
                    if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
                        execute(tx, child)?;
                    }
                }
            }
        }
    }
    Ok(wrote)
}

/// The rows of `child` whose `columns` hold one of the keys `values`
/// (none NULL), each with the key it holds (its place in `values`), read
/// by the child's index on the columns and locked exclusively: a key of
/// one column as one scan of up to [`KEYS_PER_SCAN_MAX`] points, a key of
/// several a scan each. Pending writes go first, so the scans see them.
fn children(
    tx: &Transaction<'_>,
    child: &Arc<TableInfo>,
    columns: &[usize],
    values: &[&[Val]],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Child>> {
    txn::flush(tx).map_err(|e| txn::native_error_in(&e, &child.name))?;
    let collations: Vec<Option<schema::Collation>> = columns
        .iter()
        .map(|&c| child.columns[c].ty.collation())
        .collect();
    let mut out = Vec::new();
    let warned = ctx.warnings.len();
    if let [c] = columns {
        for (chunk_at, chunk) in values.chunks(KEYS_PER_SCAN_MAX).enumerate() {
            let list: Vec<Expr> = chunk.iter().map(|v| Expr::Lit(v[0].clone())).collect();
            let cond = Expr::In(
                Box::new(Expr::Col(*c)),
                list,
                false,
                collations[0],
                InList::Written,
            );
            for (row, key) in scan(tx, child, &cond, ctx)? {
                // The key it holds: the same text, else (a collation that
                // ignores case) the same but for case.
                let held = &row[*c];
                let k = chunk
                    .iter()
                    .position(|v| same(&v[0], held))
                    .or_else(|| {
                        let text = held.to_text();
                        chunk
                            .iter()
                            .position(|v| v[0].to_text().eq_ignore_ascii_case(&text))
                    })
                    .unwrap_or(0);
                out.push((row, key, chunk_at * KEYS_PER_SCAN_MAX + k));
            }
        }
    } else {
        for (k, key) in values.iter().enumerate() {
            let mut cond: Option<Expr> = None;
            for ((&c, v), collation) in columns.iter().zip(key.iter()).zip(&collations) {
                let eq = Expr::Cmp(
                    CmpOp::Eq,
                    Box::new(Expr::Col(c)),
                    Box::new(Expr::Lit(v.clone())),
                    *collation,
                );
                cond = Some(match cond {
                    None => eq,
                    Some(prev) => Expr::And(Box::new(prev), Box::new(eq)),
                });
            }
            let Some(cond) = cond else { continue };
            for (row, pk) in scan(tx, child, &cond, ctx)? {
                out.push((row, pk, k));
            }
        }
    }
    // The lookups' own conversions are not the statement's warnings.
    ctx.warnings.truncate(warned);
    Ok(out)
}

/// A child row found: its row, its primary key, and the place of the
/// parent key it holds among those looked for.
type Child = (Vec<Val>, Vec<Value>, usize);

/// Keys of one column looked for in one scan of a child's index: as many
/// as the planner turns into one scan's points.
const KEYS_PER_SCAN_MAX: usize = plan::INDEX_POINTS_MAX;

/// The rows of `child` that meet `cond`, by the access the planner picks
/// (the index on the FOREIGN KEY's columns), locked exclusively.
fn scan(
    tx: &Transaction<'_>,
    child: &Arc<TableInfo>,
    cond: &Expr,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<(Vec<Val>, Vec<Value>)>> {
    let (access, filter) = plan::access(child, Some(cond), ctx)?;
    fetch(
        tx,
        child,
        &access,
        filter,
        Some(RowLock::EXCLUSIVE),
        false,
        Some(cond),
        ctx,
        None,
        None,
        None,
    )
}

/// ALTER TABLE … ADD FOREIGN KEY of a table with rows: each row's parent
/// must be there (1452 names the first constraint a row fails), read in
/// a transaction of its own that holds the parents' shared locks until
/// the check ends. `probe`: the table as it is, with only the new
/// constraints.
pub(crate) fn check_existing(conn: &mut Conn<'_>, probe: TableInfo) -> SqlResult<()> {
    let checks = child_checks(conn, &probe)?;
    if checks.is_empty() {
        return Ok(());
    }
    let probe = Arc::new(probe);
    let environment = super::env(conn);
    let info = Arc::clone(&conn.info);
    let mut ctx = super::write::write_ctx(
        &[],
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        false,
        false,
    );
    let tx = conn.native.begin().map_err(|e| txn::native_error(&e))?;
    let result = (|| {
        let rows = fetch(
            &tx,
            &probe,
            &plan::Access::Scan,
            None,
            None,
            false,
            None,
            &mut ctx,
            None,
            None,
            None,
        )?;
        let checked: Vec<(&[Val], Option<&[Val]>)> =
            rows.iter().map(|(row, _)| (row.as_slice(), None)).collect();
        let failed = missing_parents(&tx, &probe, &checks, &checked, &mut ctx)?;
        match failed.into_iter().flatten().next() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    })();
    let _ = tx.execute(ExecMode::Rollback);
    result
}

/// A write of one row (ON DUPLICATE KEY UPDATE's update) of `table`,
/// `old` to `new`: its parents' and its children's FOREIGN KEYs. True
/// when a child row was changed (see [`parent_changed`]).
pub(crate) fn row_updated(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    table: &TableInfo,
    (checks, actions): (&[ChildCheck], &[ParentAction]),
    (old, key, new): (&[Val], &[Value], &[Val]),
    ctx: &mut Ctx<'_>,
) -> SqlResult<bool> {
    let wrote = parent_changed(conn, tx, table, actions, &[(old, key, Some(new))], ctx, 0)?;
    let failed = missing_parents(tx, table, checks, &[(new, Some(old))], ctx)?;
    match failed.into_iter().flatten().next() {
        Some(error) => Err(error),
        None => Ok(wrote),
    }
}
