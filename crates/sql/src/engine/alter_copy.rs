//! Copying ALTER TABLE: what the dictionary cannot change online (a
//! dropped, moved or retyped column, a NOT NULL column without a default,
//! an AUTO_INCREMENT column, a UNIQUE key on existing rows) is done as NDB's
//! SQL node does it: a new table of the new definition, the rows copied
//! into it, then the new table takes the old one's name.
//!
//! The steps, and what holds at each (docs/sql.md, "Copying ALTER TABLE"):
//! 1. Create the new table `db/def/#sql-new-<node>-<ms>`; the SQL nodes
//!    never list or open `#sql-` names.
//! 2. Lock the old table: an online alter puts a [`CopyLock`] in its SQL
//!    metadata. The dictionary's alter waits until no transaction holds a
//!    lock or change on the table, and operations of the old version get
//!    241 after it, so from here every SQL node that writes to the table
//!    reads the lock first and waits ([`wait_writable`]). Reads go on.
//! 3. Copy: one committed-read scan of the old table, each row converted
//!    to the new columns as an INSERT would convert it (strict mode:
//!    errors stop the ALTER), inserted in transactions of
//!    [`COPY_BATCH_ROWS`] rows.
//! 4. Swap: rename the old table to `#sql-old-<node>-<ms>`, the new one to
//!    the final name, then drop the old one. Between the two renames the
//!    name is briefly unknown (1146) to other SQL nodes.
//!
//! A failure before the swap drops the new table and removes the lock. A
//! SQL node that dies mid-way leaves the lock (writers wait, then 1205)
//! and `#sql-` tables; when it starts again, [`recover`] finishes or
//! undoes what it left. The copy does not block writers that are not SQL
//! nodes (native API programs): they must not write a table being altered.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use schema::Value;
use skarv_client::{ExecMode, Op, ScanOptions, Session};

use super::catalog::meta::CopyLock;
use super::catalog::{self, SqlColumn, SqlType, TableInfo};
use super::ddl::Change;
use super::exec::convert::{self, Target};
use super::exec::LoweredDefault;
use super::expr::{Ctx, Expr, Val};
use super::{txn, Conn, Engine};
use crate::error::{codes, SqlError, SqlResult};

/// Rows per copy transaction: one round trip each, and far below the
/// cluster's operation records per transaction.
pub const COPY_BATCH_ROWS: usize = 256;
/// How often a writer waiting for a copy reads the table's definition
/// again, in milliseconds.
const COPY_WAIT_POLL_MS: u64 = 20;
/// The prefix of the tables a copy makes; SHOW and lookups skip them.
pub const TEMP_PREFIX: &str = "#sql-";

/// Whether `name` (a table's SQL name) is a copy's table.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The error for a change of a table that a copy holds.
pub fn being_copied(info: &TableInfo, lock: &CopyLock) -> SqlError {
    SqlError::unsupported(format_args!(
        "changing table '{}.{}' while SQL node {} copies it for an ALTER TABLE (since {} ms \
         after the epoch); if that SQL node failed, start it again: it finishes or undoes the \
         copy",
        info.db, info.name, lock.owner, lock.started_ms
    ))
}

/// The table a write is about to use, once no copy holds it: waits while
/// one does (reading the definition again every [`COPY_WAIT_POLL_MS`]), up
/// to `innodb_lock_wait_timeout` (then 1205), as MySQL's writers wait for
/// an ALTER TABLE's metadata lock. `KILL QUERY` ends the wait (1317).
pub fn wait_writable(conn: &Conn<'_>, info: Arc<TableInfo>) -> SqlResult<Arc<TableInfo>> {
    if info.sql.copy.is_none() {
        return Ok(info);
    }
    let timeout_s = super::session::variable(conn, "innodb_lock_wait_timeout", false)
        .ok()
        .and_then(|v| match v {
            crate::value::SqlValue::Int(i) => u64::try_from(i).ok(),
            crate::value::SqlValue::UInt(u) => Some(u),
            _ => None,
        })
        .unwrap_or(50);
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let (db, name) = (info.db.clone(), info.name.clone());
    let mut last = Ok(info);
    loop {
        match &last {
            Ok(info) if info.sql.copy.is_none() => return last,
            _ => {}
        }
        interrupted(conn)?;
        if Instant::now() >= deadline {
            return match last {
                Err(e) => Err(e),
                Ok(_) => Err(SqlError::new(
                    codes::LOCK_WAIT_TIMEOUT,
                    "Lock wait timeout exceeded; try restarting transaction",
                )),
            };
        }
        std::thread::sleep(Duration::from_millis(COPY_WAIT_POLL_MS));
        conn.native.forget_table(&catalog::cluster_name(&db, &name));
        last = catalog::table(conn, Some(&db), &name);
        match &last {
            // The name is unknown between the swap's two renames: wait on.
            Err(e) if e.code == codes::TABLE_NOT_FOUND => {}
            Err(_) => return last,
            Ok(_) => {}
        }
    }
}

/// 1317 once `KILL [QUERY]` asked the connection's statement to stop.
fn interrupted(conn: &Conn<'_>) -> SqlResult<()> {
    if conn.info.query_killed.load(Ordering::Relaxed) || conn.info.killed.load(Ordering::Relaxed) {
        return Err(SqlError::new(
            codes::QUERY_INTERRUPTED,
            "Query execution was interrupted",
        ));
    }
    Ok(())
}

/// `info`'s definition with its copy lock set to `lock` (None: cleared).
fn with_lock(info: &TableInfo, lock: Option<CopyLock>) -> schema::TableDef {
    let mut sql = info.sql.clone();
    sql.copy = lock;
    let mut def = info.native.def().clone();
    def.sql_meta = sql.encode();
    def
}

/// Sets (or with `None` clears) the copy lock of the table named
/// `cluster` by an online alter of its SQL metadata.
fn set_lock(conn: &Conn<'_>, cluster: &str, lock: Option<CopyLock>) -> SqlResult<()> {
    conn.native.forget_table(cluster);
    let native = conn
        .native
        .table(cluster)
        .map_err(|e| catalog::native_error(&e))?;
    let (db, name) = catalog::split_cluster_name(cluster).unwrap_or(("", cluster));
    let info = catalog::table_info(db, name, native);
    if info.sql.copy == lock {
        return Ok(());
    }
    conn.native
        .alter_table(with_lock(&info, lock))
        .map_err(|e| catalog::native_error(&e))
}

/// Renames the table `from` to `to` (cluster names) online; `replaces`:
/// the copy takes the old table's name, and names it (by id) as the table
/// it replaces, which the change stream follows (docs/events.md, "A
/// copying ALTER").
fn rename_native(conn: &Conn<'_>, from: &str, to: &str, replaces: Option<u32>) -> SqlResult<()> {
    conn.native.forget_table(from);
    let native = conn
        .native
        .table(from)
        .map_err(|e| catalog::native_error(&e))?;
    let mut def = native.def().clone();
    def.name = to.to_owned();
    if let Some(replaced) = replaces {
        def.replaces = replaced;
    }
    let (db, table) = catalog::split_cluster_name(to).unwrap_or(("", to));
    super::ddl::alter_native(conn, def, Some(&(db.to_owned(), table.to_owned())))
}

fn drop_native(conn: &Conn<'_>, cluster: &str) -> SqlResult<()> {
    match conn.native.drop_table(cluster) {
        Ok(()) => Ok(()),
        Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => Ok(()),
        Err(e) => Err(catalog::native_error(&e)),
    }
}

/// Runs the copying ALTER `change` describes (its `def` and `sql` final,
/// slots mapped): see the module doc.
/// Returns the rows copied.
pub(super) fn run(conn: &mut Conn<'_>, change: Change) -> SqlResult<u64> {
    let old = Arc::clone(&change.info);
    tracing::info!(
        table = %format_args!("{}.{}", old.db, old.name),
        "copying ALTER TABLE: {}",
        change.copy.as_deref().unwrap_or("a change the dictionary cannot make online")
    );
    let me = u32::from(conn.engine.cluster.node_id().get());
    let stamp = now_ms();
    let old_cluster = old.native.def().name.clone();
    let final_cluster = change.def.name.clone();
    let temp_name = format!("{TEMP_PREFIX}new-{me}-{stamp}");
    let temp = catalog::cluster_name(&old.db, &temp_name);
    let parked = catalog::cluster_name(&old.db, &format!("{TEMP_PREFIX}old-{me}-{stamp}"));
    if final_cluster != old_cluster && conn.native.table(&final_cluster).is_ok() {
        let shown = catalog::split_cluster_name(&final_cluster).map_or("", |(_, t)| t);
        return Err(SqlError::new(
            codes::TABLE_EXISTS,
            format!("Table '{shown}' already exists"),
        ));
    }

    // 1. The new table.
    let mut def = change.def.clone();
    def.name = temp.clone();
    def.id = 0;
    def.version = 0;
    // Named when it takes the old table's name (step 4), not before.
    def.replaces = 0;
    for index in &mut def.indexes {
        index.id = 0;
    }
    def.sql_meta = change.sql.encode();
    super::ddl::validate(&def, &old.name)?;
    conn.native
        .create_table(&def)
        .map_err(|e| catalog::native_error(&e))?;
    let undo_new = |conn: &Conn<'_>| {
        if let Err(e) = drop_native(conn, &temp) {
            tracing::warn!(table = %temp, error = %e.message, "ALTER TABLE: could not drop the copy");
        }
    };

    // 2. Lock the old table.
    let lock = CopyLock {
        owner: me,
        started_ms: stamp,
        from: old_cluster.clone(),
    };
    if let Err(e) = set_lock(conn, &old_cluster, Some(lock)) {
        undo_new(conn);
        return Err(e);
    }
    // The lock made a new version: scan the table at it.
    conn.native.forget_table(&old_cluster);
    let old = match conn.native.table(&old_cluster) {
        Ok(native) => Arc::new(catalog::table_info(&old.db, &old.name, native)),
        Err(e) => {
            undo_new(conn);
            return Err(catalog::native_error(&e));
        }
    };
    let unlock = |conn: &Conn<'_>| {
        if let Err(e) = set_lock(conn, &old_cluster, None) {
            tracing::warn!(table = %old_cluster, error = %e.message, "ALTER TABLE: could not unlock");
        }
    };

    // 3. Copy.
    let copied = conn
        .native
        .table(&temp)
        .map_err(|e| catalog::native_error(&e))
        .and_then(|native| {
            let new = catalog::table_info(&old.db, &temp_name, native);
            copy_rows(conn, &old, &new, &change.sources(), &change).map(|done| (new, done))
        });
    let (new, (top, rows)) = match copied {
        Ok(done) => done,
        Err(e) => {
            undo_new(conn);
            unlock(conn);
            return Err(e);
        }
    };
    // The sequence goes on past the old table's and every copied value.
    if new.hidden_key || new.auto_increment_column().is_some() {
        let old_next = if old.hidden_key || old.auto_increment_column().is_some() {
            catalog::peek_auto_increment(conn, &old).unwrap_or(1)
        } else {
            1
        };
        let next = old_next
            .max(top.saturating_add(1))
            .max(change.auto_increment.unwrap_or(1));
        if let Err(e) = catalog::set_auto_increment(conn, new.id(), next, false) {
            undo_new(conn);
            unlock(conn);
            return Err(e);
        }
    }

    // 4. Swap.
    if let Err(e) = rename_native(conn, &old_cluster, &parked, None) {
        undo_new(conn);
        unlock(conn);
        return Err(e);
    }
    if let Err(e) = rename_native(conn, &temp, &final_cluster, Some(old.id())) {
        // Put the old table back where it was.
        if rename_native(conn, &parked, &old_cluster, None).is_ok() {
            unlock(conn);
        }
        undo_new(conn);
        return Err(e);
    }
    conn.native.forget_table(&parked);
    drop_native(conn, &parked)?;
    catalog::drop_sequence(conn, old.id())?;
    conn.native.forget_table(&old_cluster);
    conn.native.forget_table(&final_cluster);
    Ok(rows)
}

/// Copies every row of `old` into `new`, column `j` of `new` from column
/// `sources[j]` of `old` (None: an added column). Returns the highest
/// value of the AUTO_INCREMENT column or hidden key written, and the
/// rows copied.
fn copy_rows(
    conn: &mut Conn<'_>,
    old: &TableInfo,
    new: &TableInfo,
    sources: &[Option<usize>],
    change: &Change,
) -> SqlResult<(u64, u64)> {
    let env = super::exec::env(conn);
    let mut ctx = Ctx::new(&[], &env);
    ctx.strict = conn.session.sql_mode_strict();
    let old_def = old.native.def();
    let new_def = new.native.def();
    debug_assert_eq!(sources.len(), new_def.columns.len());
    let by_native = |t: &TableInfo, pos: usize| t.columns.iter().find(|c| c.native == pos).cloned();
    // Per new column, how its value is made.
    let defaults = super::exec::lower_defaults(conn, new)?;
    let plans: Vec<Source> = (0..new_def.columns.len())
        .map(|j| {
            let to = by_native(new, j);
            match sources[j] {
                Some(p) => {
                    let from = by_native(old, p);
                    let same = old_def.columns[p].ty == new_def.columns[j].ty
                        && from.as_ref().map(|c| &c.ty) == to.as_ref().map(|c| &c.ty);
                    match (same, from, to) {
                        (false, Some(from), Some(to)) => Source::Convert(Box::new((from, to))),
                        _ => Source::Copy(p),
                    }
                }
                None => match to {
                    Some(to) if to.auto_increment => Source::Counter,
                    Some(to) => {
                        let default = new
                            .columns
                            .iter()
                            .position(|c| c.native == j)
                            .and_then(|at| defaults.get(at).cloned().flatten());
                        Source::Added(Box::new((to, default)))
                    }
                    None => Source::Counter,
                },
            }
        })
        .collect();
    let first = change.auto_increment.unwrap_or(1).max(1);
    let mut counter = first;
    let mut top = 0u64;
    let auto = new.auto_increment_column().map(|c| new.columns[c].native);
    let hidden = new_def
        .columns
        .iter()
        .position(|c| c.name == schema::HIDDEN_PRIMARY_KEY_COLUMN);
    // Every row must pass the new table's CHECKs (an added one's, and
    // any a row added before its column's CHECK may fail: MariaDB's copy
    // tests them all).
    let checks = super::exec::lower_checks_as(conn, new, &old.name)?;
    let reads_row = plans
        .iter()
        .any(|p| matches!(p, Source::Added(added) if reads_row_of(added)));
    let mut sql_row: Vec<Val> = vec![Val::Null; new.columns.len()];
    let scan_tx = conn.native.begin().map_err(|e| txn::native_error(&e))?;
    let mut batch: Vec<Vec<(usize, Value)>> = Vec::with_capacity(COPY_BATCH_ROWS);
    let mut row_number = 0usize;
    let mut old_row: Vec<Value> = vec![Value::Null; old_def.columns.len()];
    let mut copy = || -> SqlResult<()> {
        let scan = scan_tx
            .scan(&old.native, ScanOptions::default())
            .map_err(|e| txn::native_error_in(&e, &old.name))?;
        for r in scan {
            let r = r.map_err(|e| txn::native_error_in(&e, &old.name))?;
            row_number += 1;
            old_row.iter_mut().for_each(|v| *v = Value::Null);
            for (v, p) in r.values().iter().zip(r.columns()) {
                old_row[*p] = v.clone();
            }
            let mut out = Vec::with_capacity(plans.len());
            for (j, plan) in plans.iter().enumerate() {
                let value = match plan {
                    Source::Copy(p) => old_row[*p].clone(),
                    Source::Convert(columns) => {
                        let (from, to) = &**columns;
                        let val =
                            convert::from_native(&old_row[from.native], &from.ty, ctx.env.tz_secs);
                        convert_value(&val, to, old, row_number, &mut ctx)?
                    }
                    Source::Counter => {
                        let v = counter;
                        counter += 1;
                        match &new_def.columns[j].ty {
                            schema::ColumnType::BigInt { unsigned: true } => Value::UInt(v),
                            _ => convert_value(
                                &Val::UInt(v),
                                &by_native(new, j).ok_or_else(|| {
                                    SqlError::unsupported("a counter for a hidden column")
                                })?,
                                old,
                                row_number,
                                &mut ctx,
                            )?,
                        }
                    }
                    Source::Added(added) if reads_row_of(added) => {
                        // Its DEFAULT names columns: made below, from the
                        // row's other values.
                        Value::Null
                    }
                    Source::Added(added) => {
                        let (to, default) = &**added;
                        let native = &new_def.columns[j];
                        let expr = default.as_ref().map(|d| &d.expr);
                        added_value(to, expr, native, old, row_number, &env, &mut ctx)?
                    }
                };
                if Some(j) == auto || Some(j) == hidden {
                    top = top.max(match &value {
                        Value::UInt(u) => *u,
                        Value::Int(i) => u64::try_from(*i).unwrap_or(0),
                        _ => 0,
                    });
                }
                out.push((j, value));
            }
            if reads_row {
                // Added columns whose DEFAULT names columns, in column
                // order, each seeing the values made before it.
                for (at, column) in new.columns.iter().enumerate() {
                    sql_row[at] =
                        convert::from_native(&out[column.native].1, &column.ty, ctx.env.tz_secs);
                }
                for (at, column) in new.columns.iter().enumerate() {
                    let Source::Added(added) = &plans[column.native] else {
                        continue;
                    };
                    let (to, Some(default)) = &**added else {
                        continue;
                    };
                    if !default.names_columns {
                        continue;
                    }
                    let val = default.expr.eval(&sql_row, &mut ctx)?;
                    let value = convert_value(&val, to, old, row_number, &mut ctx)?;
                    sql_row[at] = convert::from_native(&value, &column.ty, ctx.env.tz_secs);
                    out[column.native].1 = value;
                }
            }
            if !checks.is_empty() {
                for (at, column) in new.columns.iter().enumerate() {
                    sql_row[at] =
                        convert::from_native(&out[column.native].1, &column.ty, ctx.env.tz_secs);
                }
                super::exec::check_row_of(&checks, &old.db, &old.name, &sql_row, &mut ctx)?;
            }
            batch.push(out);
            if batch.len() == COPY_BATCH_ROWS {
                insert_batch(conn, new, old, &mut batch)?;
            }
        }
        insert_batch(conn, new, old, &mut batch)
    };
    let copied = copy();
    // End the scan's transaction: one left open would keep its reads of
    // BLOB parts, and the swap's alters would wait for it.
    let ended = scan_tx.execute(ExecMode::Rollback);
    copied?;
    ended.map_err(|e| txn::native_error(&e))?;
    super::exec::keep_warnings(conn, &mut ctx);
    Ok((top, row_number as u64))
}

/// How a column of the new table gets its value.
enum Source {
    /// The old column's value as stored (same type).
    Copy(usize),
    /// The old column's value, converted as an INSERT would.
    Convert(Box<(SqlColumn, SqlColumn)>),
    /// The next AUTO_INCREMENT value.
    Counter,
    /// An added column: its default (an expression's evaluated for each
    /// row: after the row's other values when it names columns), NULL,
    /// or its type's implicit default.
    Added(Box<(SqlColumn, Option<LoweredDefault>)>),
}

/// Whether an added column's value reads the row's other values.
fn reads_row_of(added: &(SqlColumn, Option<LoweredDefault>)) -> bool {
    added.1.as_ref().is_some_and(|d| d.names_columns)
}

fn convert_value(
    val: &Val,
    to: &SqlColumn,
    old: &TableInfo,
    row: usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Value> {
    let target = Target {
        column: to,
        db: &old.db,
        table: &old.name,
        row,
        tz_secs: ctx.env.tz_secs,
    };
    if val.is_null() && !to.nullable {
        // MariaDB's answer (MySQL 8 says 1138 "Invalid use of NULL value").
        let message = format!("Data truncated for column '{}' at row {row}", to.name);
        if ctx.strict {
            return Err(SqlError::new(codes::WARN_DATA_TRUNCATED, message));
        }
        ctx.warn(codes::WARN_DATA_TRUNCATED, message);
        return implicit_default(to, &target);
    }
    let warned = ctx.warnings.len();
    let stored = convert::to_native_in_mode(val, &target, ctx).map_err(|e| {
        // A string that is not a number: an ALTER's copy reports it as
        // MariaDB's does (an INSERT says 1366).
        let kind = match &to.ty {
            SqlType::TinyInt { .. }
            | SqlType::SmallInt { .. }
            | SqlType::MediumInt { .. }
            | SqlType::Int { .. }
            | SqlType::BigInt { .. } => Some("INTEGER"),
            SqlType::Decimal { .. } => Some("DECIMAL"),
            SqlType::Float { .. } | SqlType::Double { .. } => Some("DOUBLE"),
            _ => None,
        };
        match (e.code, kind, val) {
            (1366, Some(kind), Val::Str(bytes)) => SqlError::new(
                1292,
                format!(
                    "Truncated incorrect {kind} value: '{}'",
                    String::from_utf8_lossy(bytes)
                ),
            ),
            _ => e,
        }
    })?;
    // A DECIMAL narrowed to fewer decimals: MariaDB's copy notes each
    // value it rounds, as an INSERT does (not one already warned of).
    if ctx.warnings.len() == warned && convert::rounded(val, &to.ty) {
        ctx.note(
            codes::WARN_DATA_TRUNCATED,
            format!("Data truncated for column '{}' at row {row}", to.name),
        );
    }
    Ok(stored)
}

/// MySQL's implicit default of a NOT NULL column: 0, '', the first ENUM
/// member, the zero date.
fn implicit_default(to: &SqlColumn, target: &Target<'_>) -> SqlResult<Value> {
    let candidates = match &to.ty {
        SqlType::Enum(members) => vec![Val::Str(
            members.first().cloned().unwrap_or_default().into_bytes(),
        )],
        SqlType::Char { .. }
        | SqlType::VarChar { .. }
        | SqlType::Text { .. }
        | SqlType::Binary { .. }
        | SqlType::VarBinary { .. }
        | SqlType::Blob { .. }
        | SqlType::Set(_) => vec![Val::Str(Vec::new())],
        _ => vec![Val::Int(0), Val::Str(Vec::new())],
    };
    let mut last = None;
    for v in candidates {
        match convert::to_native(&v, target, false) {
            Ok(value) => return Ok(value),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| SqlError::unsupported("an implicit default")))
}

fn added_value(
    to: &SqlColumn,
    default: Option<&Expr>,
    native: &schema::Column,
    old: &TableInfo,
    row: usize,
    env: &super::expr::Env,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Value> {
    if to.default_now {
        let now = super::exec::now_value(env.now_micros, env.tz_secs);
        return convert_value(&now, to, old, row, ctx);
    }
    if let Some(expr) = default {
        let val = expr.eval(&[], ctx)?;
        return convert_value(&val, to, old, row, ctx);
    }
    if let Some(d) = &native.default {
        return Ok(d.clone());
    }
    if to.nullable {
        return Ok(Value::Null);
    }
    implicit_default(
        to,
        &Target {
            column: to,
            db: &old.db,
            table: &old.name,
            row,
            tz_secs: env.tz_secs,
        },
    )
}

fn insert_batch(
    conn: &Conn<'_>,
    new: &TableInfo,
    old: &TableInfo,
    batch: &mut Vec<Vec<(usize, Value)>>,
) -> SqlResult<()> {
    if batch.is_empty() {
        return Ok(());
    }
    interrupted(conn)?;
    let tx = conn.native.begin().map_err(|e| txn::native_error(&e))?;
    for row in batch.iter() {
        tx.define(Op::insert_at(&new.native, row))
            .map_err(|e| txn::native_error_in(&e, &old.name))?;
    }
    tx.execute(ExecMode::Commit).map_err(|e| {
        use skarv_client::codes as native;
        match (e.code, super::exec::failed_op(&e)) {
            (native::DUPLICATE_KEY | native::UNIQUE_VIOLATION, Some(at)) if at < batch.len() => {
                super::exec::duplicate_error(new, &batch[at], &e)
            }
            _ => txn::native_error_in(&e, &old.name),
        }
    })?;
    batch.clear();
    Ok(())
}

/// Finishes or undoes the copies a SQL node with this node id left when
/// it stopped (see the module doc), at its start: its `#sql-new-` tables
/// are dropped; a `#sql-old-` table goes back to its name if nothing took
/// the name (the swap did not finish), else it is dropped; its locks on
/// other tables are removed.
pub fn recover(engine: &Arc<Engine>, session: &Session) -> SqlResult<()> {
    let me = u32::from(engine.cluster.node_id().get());
    let names = session.list_tables().map_err(|e| txn::native_error(&e))?;
    let mine_new = format!("{TEMP_PREFIX}new-{me}-");
    let mine_old = format!("{TEMP_PREFIX}old-{me}-");
    // Temporary tables of its connections, which ended with it.
    let mine_temporary = format!("{}{me}-", catalog::TEMPORARY_PREFIX);
    for cluster in &names {
        let Some((db, name)) = catalog::split_cluster_name(cluster) else {
            continue;
        };
        let table = match session.table(cluster) {
            Ok(t) => t,
            Err(_) => continue,
        };
        let info = catalog::table_info(db, name, table);
        let result = if name.starts_with(&mine_temporary) {
            tracing::info!(table = %cluster, "dropping a temporary table of a connection gone");
            session.drop_table(cluster)
        } else if name.starts_with(&mine_new) {
            tracing::info!(table = %cluster, "dropping the copy of an unfinished ALTER TABLE");
            session.drop_table(cluster)
        } else if name.starts_with(&mine_old) {
            let from = info.sql.copy.as_ref().map(|l| l.from.clone());
            match from {
                Some(from) if session.table(&from).is_err() => {
                    tracing::info!(table = %from, "undoing an unfinished ALTER TABLE");
                    let mut def = with_lock(&info, None);
                    def.name = from;
                    session.alter_table(def)
                }
                _ => session.drop_table(cluster),
            }
        } else if info.sql.copy.as_ref().is_some_and(|l| l.owner == me) {
            tracing::info!(table = %cluster, "removing the lock of an unfinished ALTER TABLE");
            session.alter_table(with_lock(&info, None))
        } else {
            Ok(())
        };
        if let Err(e) = result {
            tracing::warn!(table = %cluster, error = %e, "could not clean up after an ALTER TABLE");
        }
    }
    Ok(())
}
