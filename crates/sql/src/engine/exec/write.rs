//! `INSERT`, `REPLACE`, `UPDATE` and `DELETE`.

use std::sync::Arc;

use schema::Value;
use skarv_client::{codes as native, ExecMode, LockMode, Op, OpResult, Transaction};
use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Location;

use super::convert::{to_native, Target};
use super::{
    claim, env, fetch, keep_warning, keep_warnings, table_of, table_scope, with_scope, RowLock,
    OPS_PER_EXECUTE_MAX,
};
use crate::backend::OkInfo;
use crate::engine::catalog::{self, TableInfo};
use crate::engine::expr::eval::compare;
use crate::engine::expr::{CastTo, Ctx, Expr, Val};
use crate::engine::plan;
use crate::engine::session::statement_deadline;
use crate::engine::{txn, Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};

/// Runs a write statement.
pub fn run(
    conn: &mut Conn<'_>,
    statement: &Statement,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    // RETURNING answers with rows: only where the rows written are
    // collected for it (`exec::write_returning`), never run and answered
    // with an OK alone.
    let collecting = conn.returned.is_some();
    let refused = match statement {
        Statement::Insert(ins) if ins.returning.is_some() && !collecting => {
            Some("INSERT … RETURNING here")
        }
        Statement::Update(up) if up.returning.is_some() => Some("UPDATE … RETURNING"),
        Statement::Delete(del) if del.returning.is_some() && !collecting => {
            Some("DELETE … RETURNING here")
        }
        _ => None,
    };
    if let Some(what) = refused {
        return Err(SqlError::unsupported(what));
    }
    // `LAST_INSERT_ID(expr)` of this statement, not an earlier one's.
    conn.session.last_insert_id.take_called();
    match statement {
        Statement::Insert(ins) => insert(conn, ins, params, placeholders),
        Statement::Update(up) => {
            let mut answered = update(conn, up, params, placeholders)?;
            // MySQL's UPDATE answers with the value `LAST_INSERT_ID(expr)`
            // set, when it ran.
            if let Answered::Ok(info) = &mut answered {
                if conn.session.last_insert_id.take_called() {
                    info.last_insert_id = conn.session.last_insert_id.get();
                }
            }
            Ok(answered)
        }
        Statement::Delete(del) => delete(conn, del, params, placeholders),
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

/// A row to insert: its stored values by native position, and the same
/// row as SQL values (what `VALUES(col)` reads).
type NativeRow = (Vec<(usize, Value)>, Vec<Val>);

/// One value of an INSERT row.
pub(crate) enum Given {
    /// An expression's value.
    Value(Val),
    /// DEFAULT.
    Default,
    /// A LOAD DATA field missing from its row: the default, and no 1364
    /// for a column without one outside strict mode (the row's 1261 said
    /// it), as MariaDB's.
    Missing,
}

fn insert(
    conn: &mut Conn<'_>,
    ins: &ast::Insert,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT INTO TABLE FUNCTION"));
    };
    let table = crate::engine::alter_copy::wait_writable(conn, table_of(conn, name)?)?;
    if ins.priority == Some(ast::MysqlInsertPriority::Delayed) {
        return Err(SqlError::new(
            codes::DELAYED_NOT_SUPPORTED,
            format!("DELAYED option not supported for table '{}'", table.name),
        ));
    }
    // Subqueries of VALUES (or SET) and of ON DUPLICATE KEY UPDATE run
    // first, once, so one that reads the table written reads it as it
    // was; INSERT … SELECT's run with its query. MariaDB runs them row by
    // row, so a later row's sees the rows written before it: where that
    // can differ (several rows) such a subquery is refused rather than
    // answered otherwise.
    let values = ins.source.as_ref().and_then(|s| match &*s.body {
        ast::SetExpr::Values(v) => Some(v),
        _ => None,
    });
    let one_row = ins.source.is_none() || values.is_some_and(|v| v.rows.len() == 1);
    if !one_row
        && (values.is_some_and(|v| super::subquery::reads_target(conn, v, &table))
            || ins
                .on
                .as_ref()
                .is_some_and(|on| super::subquery::reads_target(conn, on, &table)))
    {
        return Err(SqlError::unsupported(format_args!(
            "a subquery reading the table '{}' that an INSERT of several rows writes \
             (MariaDB reads it again for each row)",
            table.name
        )));
    }
    if let Some(source) = &ins.source {
        if matches!(&*source.body, ast::SetExpr::Values(_)) {
            super::subquery::prepare(conn, source, 1, placeholders, Some(params))?;
        }
    }
    for a in &ins.assignments {
        super::subquery::prepare(conn, &a.value, 0, placeholders, Some(params))?;
    }
    if let Some(on) = &ins.on {
        super::subquery::prepare(conn, on, 0, placeholders, Some(params))?;
    }
    let replace = ins.replace_into;
    let ignore = ins.ignore;
    // Target columns, as SQL positions.
    let mut targets: Vec<usize> = Vec::new();
    let names: Vec<String> = if !ins.assignments.is_empty() {
        ins.assignments
            .iter()
            .map(|a| match &a.target {
                ast::AssignmentTarget::ColumnName(n) => Ok(last_ident(n)),
                other => Err(SqlError::unsupported(format_args!("SET {other}"))),
            })
            .collect::<SqlResult<_>>()?
    } else if ins.columns.is_empty() && first_row_is_empty(ins) {
        // `VALUES ()` (and `() VALUES ()`): every column takes its
        // default, as in MySQL; later rows must be empty too.
        Vec::new()
    } else if ins.columns.is_empty() {
        table.columns.iter().map(|c| c.name.clone()).collect()
    } else {
        ins.columns.iter().map(last_ident).collect()
    };
    for n in &names {
        add_target(&table, &mut targets, n, "INSERT INTO")?;
    }
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    // INSERT IGNORE stores a value that does not fit as a non-strict
    // sql_mode would (clipped, cut, a bad number as 0) with its error as a
    // warning, as MariaDB's IGNORE turns the statement's errors into
    // warnings.
    ctx.strict = conn.session.sql_mode_strict() && !ignore;
    ctx.ignore = ignore;
    // The rows, evaluated before anything is written, and the warnings
    // each one's values left.
    let mut rows: Vec<Vec<Given>> = Vec::new();
    let mut evaluated: Vec<Vec<(u16, String)>> = Vec::new();
    let mut row_by_row: Option<&ast::Query> = None;
    if !ins.assignments.is_empty() {
        let values: Vec<&ast::Expr> = ins.assignments.iter().map(|a| &a.value).collect();
        rows.push(eval_row(
            conn,
            (&table, &targets),
            &values,
            placeholders,
            &mut ctx,
        )?);
        evaluated.push(abort_on_warning(
            ctx.strict,
            std::mem::take(&mut ctx.warnings),
        )?);
    } else if let Some(source) = &ins.source {
        match &*source.body {
            ast::SetExpr::Values(v) => {
                for (n, row) in v.rows.iter().enumerate() {
                    let exprs: Vec<&ast::Expr> = row.content.iter().collect();
                    if exprs.len() != targets.len() {
                        return Err(SqlError::new(
                            codes::WRONG_VALUE_COUNT_ON_ROW,
                            format!("Column count doesn't match value count at row {}", n + 1),
                        ));
                    }
                    rows.push(eval_row(
                        conn,
                        (&table, &targets),
                        &exprs,
                        placeholders,
                        &mut ctx,
                    )?);
                    evaluated.push(abort_on_warning(
                        ctx.strict,
                        std::mem::take(&mut ctx.warnings),
                    )?);
                }
            }
            _ => {
                let mut sink = Collect::default();
                let mark = conn.session.diagnostics_mark();
                let keyed = source_in_key_order(conn, source);
                // The query MariaDB would run row by row, for its error.
                if keyed.is_some() && ctx.strict && ins.on.is_none() {
                    row_by_row = Some(source);
                }
                let source = keyed.as_ref().unwrap_or(source);
                let ran = super::select::run(conn, source, params, placeholders, false, &mut sink);
                // A value error the SELECT met (1690) may be of a row after
                // one whose warning MariaDB, running row by row, fails on.
                if let (Err(error), Some(q)) = (&ran, row_by_row) {
                    if VALUE_ERRORS.contains(&error.code) {
                        conn.session.rewind_diagnostics(mark);
                        let replayed = first_error_row_by_row(
                            conn,
                            q,
                            params,
                            placeholders,
                            (&table, &targets),
                            replace,
                        );
                        return Err(replayed.unwrap_or_else(|| error.clone()));
                    }
                }
                ran?;
                if ctx.strict {
                    // The SELECT's warnings went to the session already.
                    let first = conn.session.notes()[mark.1..]
                        .iter()
                        .find(|n| n.level == "Warning" && !n.planned)
                        .map(|n| SqlError::new(n.code, n.message.clone()));
                    if let Some(error) = first {
                        conn.session.rewind_diagnostics(mark);
                        let replayed = row_by_row.and_then(|q| {
                            first_error_row_by_row(
                                conn,
                                q,
                                params,
                                placeholders,
                                (&table, &targets),
                                replace,
                            )
                        });
                        return Err(replayed.unwrap_or(error));
                    }
                }
                for r in sink.into_rows() {
                    if r.len() != targets.len() {
                        return Err(SqlError::new(
                            codes::WRONG_VALUE_COUNT_ON_ROW,
                            "Column count doesn't match value count at row 1",
                        ));
                    }
                    rows.push(r.into_iter().map(Given::Value).collect());
                }
            }
        }
    } else {
        return Err(SqlError::unsupported("INSERT without values"));
    }
    // ON DUPLICATE KEY UPDATE assignments, over the table's columns with
    // VALUES(col) reading the row being inserted.
    let odku: Vec<(usize, Expr)> = match &ins.on {
        Some(ast::OnInsert::DuplicateKeyUpdate(assignments)) => {
            let columns = table_scope(&table, &table.name);
            let environment = env(conn);
            with_scope(conn, columns.clone(), placeholders, |scope| {
                scope.insert_values = Some(columns);
                assignments
                    .iter()
                    .map(|a| {
                        let ast::AssignmentTarget::ColumnName(n) = &a.target else {
                            return Err(SqlError::unsupported("tuple assignments"));
                        };
                        let c = scope.resolve(None, &last_ident(n))?;
                        if is_default_word(&a.value) {
                            return Ok((c, default_assigned(scope, &table, c, &environment)?));
                        }
                        let ty = table.columns.get(c).map(|column| &column.ty);
                        let lowered = scope.lower(&a.value)?;
                        let value = scope.stored(lowered);
                        Ok((c, for_column(ty, &a.value, value)))
                    })
                    .collect::<SqlResult<Vec<_>>>()
            })?
        }
        Some(other) => return Err(SqlError::unsupported(format_args!("{other}"))),
        None => Vec::new(),
    };
    let written = write_rows(
        conn,
        Rows {
            table: &table,
            targets: &targets,
            rows: &rows,
            evaluated,
            replace,
            ignore,
            odku: &odku,
            row_base: 0,
            send_now: false,
        },
        &mut ctx,
    );
    let written = match (written, row_by_row) {
        (Err(error), Some(q)) if VALUE_ERRORS.contains(&error.code) => {
            let mark = conn.session.diagnostics_mark();
            let replayed =
                first_error_row_by_row(conn, q, params, placeholders, (&table, &targets), replace);
            conn.session.rewind_diagnostics(mark);
            return Err(replayed.unwrap_or(error));
        }
        (written, _) => written?,
    };
    let Written {
        affected,
        duplicates,
        check_skipped,
        first_auto,
        last_auto,
    } = written;
    if first_auto > 0 {
        conn.session.last_insert_id.set(first_auto);
    }
    // MySQL's id in the OK packet: the value generated for the first row
    // inserted; else what `LAST_INSERT_ID(expr)` set in the statement;
    // else the AUTO_INCREMENT column's value of the last row inserted or
    // updated (an explicit value, a row ON DUPLICATE KEY UPDATE found).
    let id = if first_auto > 0 {
        first_auto
    } else if conn.session.last_insert_id.take_called() {
        conn.session.last_insert_id.get()
    } else {
        last_auto
    };
    // MariaDB's info: for more than one row of VALUES, and for any
    // INSERT … SELECT.
    let selected = ins
        .source
        .as_ref()
        .is_some_and(|s| !matches!(&*s.body, ast::SetExpr::Values(_)));
    let info = if rows.len() > 1 || selected {
        format!(
            "Records: {}  Duplicates: {}  Warnings: {}",
            rows.len() - check_skipped,
            duplicates,
            conn.session.warning_count()
        )
    } else {
        String::new()
    };
    Ok(Answered::Ok(OkInfo {
        affected_rows: affected,
        last_insert_id: id,
        info,
        ..OkInfo::default()
    }))
}

/// The evaluated rows of an INSERT-like statement (INSERT, REPLACE, a
/// chunk of LOAD DATA's) and how to write them.
pub(crate) struct Rows<'a> {
    pub table: &'a Arc<TableInfo>,
    /// The columns given, as SQL positions.
    pub targets: &'a [usize],
    /// Per row, a value (or DEFAULT) per target.
    pub rows: &'a [Vec<Given>],
    /// Per row, the warnings its values left.
    pub evaluated: Vec<Vec<(u16, String)>>,
    pub replace: bool,
    pub ignore: bool,
    /// ON DUPLICATE KEY UPDATE's assignments.
    pub odku: &'a [(usize, Expr)],
    /// Rows of the statement before these (warnings say "at row N").
    pub row_base: usize,
    /// Send each batch now, even in autocommit or under
    /// `transaction_allow_batching` (LOAD DATA: its chunks in one open
    /// transaction, none kept pending).
    pub send_now: bool,
}

/// What [`write_rows`] did.
#[derive(Default)]
pub(crate) struct Written {
    pub affected: u64,
    pub duplicates: u64,
    /// Rows INSERT IGNORE left out for a failed CHECK.
    pub check_skipped: usize,
    /// The AUTO_INCREMENT value generated for the first row inserted
    /// (0: none; a value generated for a row IGNORE left out, or that ON
    /// DUPLICATE KEY UPDATE made an update, is not one).
    pub first_auto: u64,
    /// The AUTO_INCREMENT column's value of the last row inserted or
    /// updated (0: none, or no such column).
    pub last_auto: u64,
}

/// What became of a row of an INSERT-like statement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum RowDone {
    /// Not written: IGNORE left it out (or the statement failed).
    #[default]
    Left,
    Inserted,
    /// ON DUPLICATE KEY UPDATE changed the row it found for it, whose
    /// AUTO_INCREMENT value (after the update) this is (a row found and
    /// left as it was counts as left out, as in MySQL).
    Updated(u64),
}

/// An AUTO_INCREMENT column's value as a number (0 for none).
fn auto_value(v: &Val) -> u64 {
    match v {
        Val::Int(i) => u64::try_from(*i).unwrap_or(0),
        Val::UInt(u) => *u,
        Val::Null => 0,
        other => other.to_text().parse().unwrap_or(0),
    }
}

/// Makes the stored rows (defaults, AUTO_INCREMENT, CHECKs) and writes
/// them in the statement's transaction (committed with it outside one).
pub(crate) fn write_rows(
    conn: &mut Conn<'_>,
    w: Rows<'_>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Written> {
    let Rows {
        table,
        targets,
        rows,
        mut evaluated,
        replace,
        ignore,
        odku,
        row_base,
        send_now,
    } = w;
    let environment = ctx.env;
    // Auto-increment values: one reservation for the statement.
    let auto_col = table.columns.iter().position(|c| c.auto_increment);
    let need_auto = rows
        .iter()
        .filter(
            |r| match auto_col.and_then(|c| targets.iter().position(|t| *t == c)) {
                Some(at) => match &r[at] {
                    Given::Default | Given::Missing => true,
                    Given::Value(v) => v.is_null() || matches!(v, Val::Int(0) | Val::UInt(0)),
                },
                None => auto_col.is_some(),
            },
        )
        .count() as u64;
    // `auto_increment_increment` and `_offset`: the values are offset + k ×
    // increment, each the first such above the one before; the statement
    // reserves enough consecutive values to hold them (the rest is a gap).
    let (auto_step, auto_offset) = conn.session.vars.hot().auto_increment;
    let mut next_auto = if need_auto > 0 {
        let first = catalog::next_auto_increment(conn, table, need_auto.saturating_mul(auto_step))?;
        auto_increment_at(first, auto_step, auto_offset)
    } else {
        0
    };
    // The largest value given explicitly to the AUTO_INCREMENT column.
    let mut explicit_auto = 0u64;
    let mut next_hidden = if table.hidden_key {
        catalog::next_auto_increment(conn, table, rows.len() as u64)?
    } else {
        0
    };
    let def = table.native.def();
    let hidden_pos = def
        .columns
        .iter()
        .position(|c| c.name == schema::HIDDEN_PRIMARY_KEY_COLUMN);
    let checks = lower_checks(conn, table)?;
    let defaults = lower_defaults(conn, table)?;
    let fk_checks = super::foreign::child_checks(conn, table)?;
    // Columns in the order their values are made: those given in the
    // statement's order (the first that does not fit is the error, as
    // MariaDB stores them), then the others in column order; an
    // expression DEFAULT naming columns reads the row's other values, so
    // such columns come last (as MariaDB evaluates them).
    let mut order: Vec<usize> = targets.to_vec();
    order.extend((0..table.columns.len()).filter(|at| !targets.contains(at)));
    order.sort_by_key(|&at| {
        defaults
            .get(at)
            .is_some_and(|d| d.as_ref().is_some_and(|d| d.names_columns))
    });
    let mut warnings = RowWarnings::default();
    // Rows INSERT IGNORE left out for a failed CHECK: not in "Records",
    // as MariaDB counts them.
    let mut check_skipped = 0;
    // Full native rows.
    let mut native_rows: Vec<NativeRow> = Vec::with_capacity(rows.len());
    // Per native row: its AUTO_INCREMENT value, and whether it was
    // generated.
    let mut autos: Vec<(u64, bool)> = Vec::with_capacity(rows.len());
    let made = (|| {
        for (n, row) in rows.iter().enumerate() {
            if let Some(w) = evaluated.get_mut(n) {
                ctx.warnings.append(w);
            }
            let mut out = Vec::with_capacity(table.columns.len() + 1);
            let mut sql_row = vec![Val::Null; table.columns.len()];
            let mut generated = false;
            for &at in &order {
                let col = &table.columns[at];
                let given = targets.iter().position(|t| *t == at).map(|i| &row[i]);
                let mut value = match given {
                    Some(Given::Value(v)) => Some(v.clone()),
                    _ => None,
                };
                let missing = matches!(given, Some(Given::Missing));
                // DEFAULT CURRENT_TIMESTAMP: the statement's time.
                if value.is_none() && col.default_now {
                    value = Some(now_value(environment.now_micros, environment.tz_secs));
                }
                // An expression DEFAULT: evaluated for each row (uuid(), rand()).
                if let Some(default) = defaults.get(at).and_then(Option::as_ref) {
                    if value.is_none() {
                        value = Some(default.expr.eval(&sql_row, ctx)?);
                    }
                }
                if Some(at) == auto_col
                    && value
                        .as_ref()
                        .is_none_or(|v| v.is_null() || matches!(v, Val::Int(0) | Val::UInt(0)))
                {
                    value = Some(Val::UInt(next_auto));
                    next_auto = next_auto.saturating_add(auto_step);
                    generated = true;
                } else if Some(at) == auto_col {
                    explicit_auto = explicit_auto.max(value.as_ref().map_or(0, auto_value));
                }
                let target = Target {
                    column: col,
                    db: &table.db,
                    table: &table.name,
                    row: row_base + n + 1,
                    tz_secs: ctx.env.tz_secs,
                };
                match value {
                    Some(v) => {
                        let stored = super::convert::store(&v, &target, ctx)?;
                        sql_row[at] =
                            super::convert::from_native(&stored, &col.ty, environment.tz_secs);
                        out.push((col.native, stored));
                    }
                    None => {
                        let native_col = &def.columns[col.native];
                        match &native_col.default {
                            Some(d) => {
                                sql_row[at] =
                                    super::convert::from_native(d, &col.ty, environment.tz_secs);
                                // The data node fills a column left out with
                                // its default, but a key column's value must
                                // come with the row: it places it.
                                if def.primary_key.contains(&col.native) {
                                    out.push((col.native, d.clone()));
                                }
                            }
                            None if col.nullable => {}
                            // An ENUM NOT NULL without a DEFAULT takes its
                            // first member, even in strict mode (MariaDB's).
                            None if matches!(col.ty, super::SqlType::Enum(_)) => {
                                let first = Value::UInt(1);
                                sql_row[at] = super::convert::from_native(
                                    &first,
                                    &col.ty,
                                    environment.tz_secs,
                                );
                                out.push((col.native, first));
                            }
                            None => {
                                let error = SqlError::new(
                                    codes::NO_DEFAULT_FOR_FIELD,
                                    format!("Field '{}' doesn't have a default value", col.name),
                                );
                                // Outside strict mode (or under IGNORE) the
                                // type's zero, with the error as a warning
                                // once a statement (MariaDB checks the
                                // columns given, not each row).
                                let Some(zero) =
                                    super::convert::implicit_zero(&col.ty).filter(|_| !ctx.strict)
                                else {
                                    return Err(error);
                                };
                                if !missing && row_base + n == 0 {
                                    ctx.warn(error.code, error.message);
                                }
                                let stored = to_native(&zero, &target, false)?;
                                sql_row[at] = super::convert::from_native(
                                    &stored,
                                    &col.ty,
                                    environment.tz_secs,
                                );
                                out.push((col.native, stored));
                            }
                        }
                    }
                }
            }
            if let (true, Some(pos)) = (table.hidden_key, hidden_pos) {
                out.push((pos, Value::UInt(next_hidden)));
                next_hidden += 1;
            }
            if let Err(e) = check_row(&checks, table, &sql_row, ctx) {
                if ignore {
                    // INSERT IGNORE: the row is left out with a warning.
                    ctx.warn(e.code, e.message);
                    check_skipped += 1;
                    continue;
                }
                return Err(e);
            }
            autos.push((auto_col.map_or(0, |c| auto_value(&sql_row[c])), generated));
            native_rows.push((out, sql_row));
            warnings.rows.push(std::mem::take(&mut ctx.warnings));
        }
        Ok(())
    })();
    if let Err(error) = made {
        if !native_rows.is_empty() && !odku.is_empty() && !replace {
            return upsert_then_fail(conn, table, &native_rows, odku, ctx.params, ignore, error);
        }
        if native_rows.is_empty() || replace || ignore || !odku.is_empty() {
            return Err(error);
        }
        let tx = txn::take(conn)?;
        let error = match earlier_duplicate(&tx, table, &native_rows) {
            Ok(Some(duplicate)) => duplicate,
            _ => error,
        };
        return txn::finish(conn, tx, Err(error));
    }
    // Those of rows left out after the last one written.
    warnings.rows.push(std::mem::take(&mut ctx.warnings));
    if explicit_auto > 0 {
        catalog::note_explicit_auto_increment(conn, table, explicit_auto)
            .inspect_err(|_| warnings.rest(conn))?;
    }
    let tx = txn::take(conn).inspect_err(|_| warnings.rest(conn))?;
    // FOREIGN KEYs: every row's parents, read before any row is written
    // (ON DUPLICATE KEY UPDATE checks a row once it is inserted: one that
    // becomes an update is not inserted).
    if !fk_checks.is_empty() && odku.is_empty() {
        let rows: Vec<(&[Val], Option<&[Val]>)> = native_rows
            .iter()
            .map(|(_, sql)| (sql.as_slice(), None))
            .collect();
        let failed = match super::foreign::missing_parents(&tx, table, &fk_checks, &rows, ctx) {
            Ok(failed) => failed,
            Err(e) => {
                warnings.rest(conn);
                return txn::finish(conn, tx, Err(e));
            }
        };
        if !ignore {
            // The first row's failure is the statement's.
            if let Some(error) = failed.into_iter().flatten().next() {
                warnings.rest(conn);
                return txn::finish(conn, tx, Err(error));
            }
        } else {
            for (n, error) in failed.into_iter().enumerate().rev() {
                let Some(error) = error else { continue };
                // INSERT IGNORE: the row is left out with the error as a
                // warning, after the row's own.
                native_rows.remove(n);
                autos.remove(n);
                let mut own = warnings.rows.remove(n);
                own.push((error.code, error.message));
                own.append(&mut warnings.rows[n]);
                warnings.rows[n] = own;
            }
        }
    }
    // REPLACE into a parent: the rows it replaces are deleted first, their
    // children refused, deleted or set NULL as each FOREIGN KEY says (as
    // InnoDB's, whose REPLACE deletes and inserts).
    let mut mark = None;
    if replace && conn.session.foreign_key_checks() && super::foreign::is_parent(table) {
        let actions = match super::foreign::parent_actions(conn, table) {
            Ok(actions) => actions,
            Err(e) => {
                warnings.rest(conn);
                return txn::finish(conn, tx, Err(e));
            }
        };
        let replaced = replaced_rows(&tx, table, &native_rows, ctx).and_then(|old| {
            txn::mark_statement(&*conn, &tx, (&actions, old.len()), &mut mark)?;
            let gone: Vec<super::foreign::ParentChange<'_>> = old
                .iter()
                .map(|(row, key)| (row.as_slice(), key.as_slice(), None))
                .collect();
            super::foreign::parent_changed(&*conn, &tx, table, &actions, &gone, ctx, 0)
        });
        if let Err(e) = replaced {
            txn::end_statement(&tx, mark, true);
            warnings.rest(conn);
            return txn::finish(conn, tx, Err(e));
        }
    }
    // A plain INSERT either commits with its last batch (autocommit: one
    // round trip for a single-row insert), or defers its writes
    // (`transaction_allow_batching`), or sends them now.
    // RETURNING's rows are those the data nodes took: never deferred.
    let returning_in_tx = conn.returned.is_some() && txn::in_transaction(conn);
    let how = if replace || ignore || !odku.is_empty() || send_now || returning_in_tx {
        Send::Now
    } else if !txn::in_transaction(conn) {
        Send::WithCommit
    } else if txn::batching(conn) {
        Send::Deferred
    } else {
        Send::Now
    };
    let mut committed = false;
    let mut done = vec![RowDone::Left; native_rows.len()];
    let result = if !odku.is_empty() {
        // Inside a transaction a failed statement takes back its rows.
        let mut undo = Vec::new();
        let in_tx = txn::in_transaction(conn);
        if let Err(e) = upsert_mark(conn, &tx, table, &mut mark) {
            warnings.rest(conn);
            return txn::finish(conn, tx, Err(e));
        }
        let upserted = upsert_rows(
            conn,
            &tx,
            table,
            &native_rows,
            odku,
            ctx.params,
            ignore,
            &mut warnings,
            in_tx.then_some(&mut undo),
            &mut done,
        );
        if upserted.is_err() && mark.is_none() {
            undo_statement(&tx, table, &undo);
        }
        upserted
    } else {
        insert_rows(
            conn,
            &tx,
            table,
            &native_rows,
            replace,
            ignore,
            how,
            &mut committed,
            &mut warnings,
            &mut done,
        )
    };
    warnings.rest(conn);
    txn::end_statement(&tx, mark, result.is_err());
    let (affected, duplicates) = if committed {
        conn.tx.wrote = false;
        result?
    } else if how == Send::WithCommit
        && native_rows.len() > 1
        && matches!(&result, Err(e) if e.code == codes::DUP_ENTRY)
    {
        // The batch failed at whichever duplicate the data nodes answered
        // first; MariaDB names the first in row order. The transaction
        // is aborted, so nothing was written: the rows are sent again
        // (the error path only) in batches with per-row results, so that
        // the first is found (a unique index's duplicate too: the data
        // nodes take that row back and go on).
        let _ = txn::finish(conn, tx, result);
        let tx = txn::take(conn)?;
        let again = insert_rows(
            conn,
            &tx,
            table,
            &native_rows,
            false,
            false,
            Send::Now,
            &mut committed,
            &mut warnings,
            &mut done,
        );
        txn::finish(conn, tx, again)?
    } else {
        txn::finish(conn, tx, result)?
    };
    // RETURNING's rows: those inserted, as stored (ON DUPLICATE KEY
    // UPDATE's went in turn, with the rows it updated).
    if let (Some(returned), true) = (conn.returned.as_mut(), odku.is_empty()) {
        returned.extend(
            native_rows
                .iter()
                .zip(&done)
                .filter(|(_, d)| **d == RowDone::Inserted)
                .map(|((_, sql), _)| sql.clone()),
        );
    }
    let first_auto = autos
        .iter()
        .zip(&done)
        .find(|((_, generated), d)| *generated && **d == RowDone::Inserted)
        .map_or(0, |((value, _), _)| *value);
    let last_auto = autos
        .iter()
        .zip(&done)
        .rev()
        .find_map(|((value, _), d)| match d {
            RowDone::Left => None,
            RowDone::Inserted => Some(*value),
            RowDone::Updated(value) => Some(*value),
        })
        .unwrap_or(0);
    Ok(Written {
        affected,
        duplicates,
        check_skipped,
        first_auto,
        last_auto,
    })
}

/// Adds column `name` of `table` to an INSERT-like statement's targets
/// (SQL positions): its place among them, 1054 for a column the table has
/// not (`clause` names where, in MariaDB's words), 1110 for one given
/// twice.
pub(crate) fn add_target(
    table: &TableInfo,
    targets: &mut Vec<usize>,
    name: &str,
    clause: &str,
) -> SqlResult<usize> {
    let at = table.column(name).ok_or_else(|| {
        SqlError::new(
            codes::BAD_FIELD,
            format!("Unknown column '{name}' in '{clause}'"),
        )
    })?;
    if targets.contains(&at) {
        return Err(SqlError::new(
            codes::FIELD_SPECIFIED_TWICE,
            format!("Column '{name}' specified twice"),
        ));
    }
    targets.push(at);
    Ok(targets.len() - 1)
}

/// Whether an INSERT's first `VALUES` row is `()`.
fn first_row_is_empty(ins: &ast::Insert) -> bool {
    ins.source
        .as_ref()
        .is_some_and(|source| match &*source.body {
            ast::SetExpr::Values(v) => v.rows.first().is_some_and(|row| row.content.is_empty()),
            _ => false,
        })
}

pub(super) fn last_ident(n: &ast::ObjectName) -> String {
    n.0.last()
        .map(|p| match p.as_ident() {
            Some(i) => i.value.clone(),
            None => p.to_string(),
        })
        .unwrap_or_default()
}

/// `exprs` evaluated, each for the column of `table` at the same place
/// of `targets`.
fn eval_row(
    conn: &Conn<'_>,
    (table, targets): (&TableInfo, &[usize]),
    exprs: &[&ast::Expr],
    placeholders: &[Location],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<Given>> {
    let mut out = Vec::with_capacity(exprs.len());
    for (at, e) in exprs.iter().enumerate() {
        if is_default_word(e) {
            out.push(Given::Default);
            continue;
        }
        let mut lowered = with_scope(conn, Vec::new(), placeholders, |s| {
            let lowered = s.lower(e)?;
            Ok(s.stored(lowered))
        })?;
        if let Some(column) = targets.get(at).and_then(|&c| table.columns.get(c)) {
            lowered = for_column(Some(&column.ty), e, lowered);
        }
        if matches!(lowered, Expr::Cast(_, CastTo::FixedDouble(_))) {
            // MariaDB names a value's note by its text, as a select item.
            let name = crate::engine::expr::item_name(e, &super::statement_text(conn));
            crate::engine::expr::name_cast(&mut lowered, &name);
        }
        out.push(Given::Value(lowered.eval(&[], ctx)?));
    }
    Ok(out)
}

/// `value`, lowered from `written`, to be stored in a column of type
/// `ty`: a bit-value or 0x literal is its number in a numeric column, as
/// MariaDB stores it (`SET flags = 0x05` is 5, not the byte 0x05).
pub(super) fn for_column(ty: Option<&super::SqlType>, written: &ast::Expr, value: Expr) -> Expr {
    if ty.is_some_and(|ty| ty.is_number() || matches!(ty, super::SqlType::Year)) {
        crate::engine::expr::as_number_literal(written, value)
    } else {
        value
    }
}

/// The text of a duplicate key for 1062: the key's values joined by '-',
/// and the key's name (PRIMARY, or the unique index the error names).
/// The 1062 of an insert the data nodes answered with a duplicate, the
/// transaction still open: an operation's 893 (an insert taken back) does
/// not name the unique index, so the index is found by reading which one
/// holds a value of the row (the transaction's own rows included).
fn duplicate_of_op(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    row: &[(usize, Value)],
    error: &skarv_client::Error,
) -> SqlResult<SqlError> {
    if error.code == native::UNIQUE_VIOLATION && !error.message.contains("unique index `") {
        if let Some((found, _)) = unique_holder(tx, table, row)? {
            return Ok(found);
        }
    }
    Ok(duplicate_error(table, row, error))
}

pub(crate) fn duplicate_error(
    table: &TableInfo,
    row: &[(usize, Value)],
    error: &skarv_client::Error,
) -> SqlError {
    let def = table.native.def();
    let named = error
        .message
        .split("unique index `")
        .nth(1)
        .and_then(|rest| rest.split('`').next());
    let index = def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
        .find(|i| named.is_none_or(|n| n == i.name));
    // A UNIQUE key `u` is served by the native unique index `u$unique`.
    let (key_name, columns): (String, Vec<usize>) = match index {
        Some(i) if error.code == native::UNIQUE_VIOLATION => {
            let name = i.name.strip_suffix("$unique").unwrap_or(&i.name);
            (name.to_owned(), i.columns.clone())
        }
        _ => ("PRIMARY".into(), def.primary_key.clone()),
    };
    let text: Vec<String> = columns
        .iter()
        .map(|c| {
            row.iter()
                .find(|(p, _)| p == c)
                .map_or_else(String::new, |(p, v)| {
                    let ty = table
                        .columns
                        .iter()
                        .find(|sc| sc.native == *p)
                        .map(|sc| sc.ty.clone());
                    match ty {
                        // Shown as stored (a TIMESTAMP in UTC).
                        Some(ty) => super::convert::from_native(v, &ty, 0).to_text(),
                        // The hidden `$PK` (no SQL column): its number.
                        None => match v {
                            Value::UInt(n) => n.to_string(),
                            Value::Int(n) => n.to_string(),
                            other => format!("{other:?}"),
                        },
                    }
                })
        })
        .collect();
    SqlError::new(
        codes::DUP_ENTRY,
        format!("Duplicate entry '{}' for key '{key_name}'", text.join("-")),
    )
}

/// An INSERT's warnings by row, each row's kept as the statement's once
/// its write is done, so that SHOW WARNINGS lists them in row order as
/// MariaDB's: a row's value and conversion warnings, then its 1062 under
/// IGNORE (or the warnings of its ON DUPLICATE KEY UPDATE), then the next
/// row's.
#[derive(Default)]
struct RowWarnings {
    /// Per row to write (by its place among them), its warnings and those
    /// of rows left out before it; one more for rows left out after the
    /// last.
    rows: Vec<Vec<(u16, String)>>,
    /// How many of `rows` are kept.
    kept: usize,
}

impl RowWarnings {
    /// Keeps the warnings of the rows to write up to `row` (0-based).
    fn through(&mut self, conn: &mut Conn<'_>, row: usize) {
        let end = row.saturating_add(1).min(self.rows.len());
        while self.kept < end {
            for (code, message) in self.rows[self.kept].drain(..) {
                keep_warning(conn, code, message);
            }
            self.kept += 1;
        }
    }

    /// Keeps every warning left.
    fn rest(&mut self, conn: &mut Conn<'_>) {
        self.through(conn, usize::MAX);
    }
}

/// When an INSERT's operations go to the data nodes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Send {
    /// Each batch is executed at once; a duplicate is found per row
    /// (the operations ignore errors), so that a statement inside a
    /// transaction can be taken back alone.
    Now,
    /// Autocommit: the last batch goes with the commit, in one round trip.
    /// A duplicate aborts the whole transaction, which is all the
    /// statement's.
    WithCommit,
    /// `transaction_allow_batching`: defined and left pending; errors
    /// come with whatever sends them.
    Deferred,
}

#[allow(clippy::too_many_arguments)]
fn insert_rows(
    conn: &mut Conn<'_>,
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
    replace: bool,
    ignore: bool,
    how: Send,
    committed: &mut bool,
    warnings: &mut RowWarnings,
    done: &mut [RowDone],
) -> SqlResult<(u64, u64)> {
    let native_table = &table.native;
    let def = native_table.def();
    if how != Send::Now {
        debug_assert!(!replace && !ignore, "only a plain INSERT sends late");
        let written = insert_plain(tx, table, rows, how, committed)?;
        done.fill(RowDone::Inserted);
        return Ok(written);
    }
    let mut affected = 0u64;
    let per_row = if replace { 2 } else { 1 };
    let mut duplicates = 0u64;
    let mut inserted: Vec<Vec<Value>> = Vec::new();
    let unique = has_unique(def);
    // REPLACE into a table with unique indexes: a row at a time, each
    // first deleting the rows that hold one of its unique values (MariaDB
    // deletes every row the new one conflicts with), so that the next
    // row's lookups see it.
    let replace_unique = replace && unique;
    let chunk_rows = if replace_unique {
        1
    } else {
        (OPS_PER_EXECUTE_MAX / per_row).max(1)
    };
    // INSERT IGNORE: the keys of the rows of the chunk being written, which
    // `unique_holder` cannot see yet (of a unique index conflict among
    // them, the row skipped must be the later one, as in MariaDB).
    let mut written = if ignore && !replace && unique {
        Some(ChunkKeys::new(def))
    } else {
        None
    };
    for (c, all) in rows.chunks(chunk_rows).enumerate() {
        // INSERT IGNORE: each row's 1062, kept after the row's other
        // warnings once the chunk is written.
        let mut duplicate: Vec<Option<SqlError>> = all.iter().map(|_| None).collect();
        // A unique index conflict would abort the transaction, so rows
        // whose values are taken are found first.
        let mut kept: Vec<&NativeRow> = Vec::with_capacity(all.len());
        let mut at: Vec<usize> = Vec::with_capacity(all.len());
        if let Some(written) = written.as_mut() {
            written.clear();
        }
        for (i, r) in all.iter().enumerate() {
            if let Some(written) = written.as_mut() {
                let error = match unique_holder(tx, table, &r.0)? {
                    Some((error, _)) => Some(error),
                    None => written.taken(table, &r.0, false),
                };
                if let Some(error) = error {
                    duplicates += 1;
                    duplicate[i] = Some(error);
                    continue;
                }
            }
            kept.push(r);
            at.push(i);
        }
        let chunk = kept;
        // REPLACE: a locking read of the key tells whether a row went.
        let keys: Vec<Vec<Value>> = chunk.iter().map(|(r, _)| primary_key_of(def, r)).collect();
        let names: Vec<Vec<(&str, Value)>> = if replace {
            chunk
                .iter()
                .map(|(r, _)| {
                    r.iter()
                        .map(|(p, v)| (def.columns[*p].name.as_str(), v.clone()))
                        .collect()
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut handles = Vec::with_capacity(chunk.len());
        for (i, (row, _)) in chunk.iter().enumerate() {
            if replace_unique {
                for holder in unique_holders(tx, table, row)? {
                    tx.define(Op::delete(native_table, &holder))
                        .map_err(|e| txn::native_error_in(&e, &table.name))?;
                    affected += 1;
                    duplicates += 1;
                }
            }
            let h = if replace {
                let read = tx
                    .define(
                        Op::read(native_table, &keys[i])
                            .lock(LockMode::Exclusive)
                            .ignore_error(),
                    )
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                let write = tx
                    .define(Op::write(native_table, &names[i]))
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                (Some(read), write)
            } else {
                let op = Op::insert_at(native_table, row).ignore_error();
                (
                    None,
                    tx.define(op)
                        .map_err(|e| txn::native_error_in(&e, &table.name))?,
                )
            };
            handles.push(h);
        }
        let outcome = tx.execute(ExecMode::NoCommit).map_err(|e| {
            // A unique index violation aborts the transaction: the error
            // names the operation, so the row.
            let row = if replace_unique {
                chunk.first()
            } else {
                failed_op(&e).and_then(|n| chunk.get(n / per_row))
            };
            match row {
                Some((row, _)) if e.code == native::UNIQUE_VIOLATION => {
                    duplicate_error(table, row, &e)
                }
                _ => txn::native_error_in(&e, &table.name),
            }
        })?;
        // Which rows of the chunk went in: the chunk's operations ignore
        // their errors, so a duplicate's later rows are in too, and a
        // statement that fails takes them back as well.
        let went: Vec<bool> = handles
            .iter()
            .map(|(_, write)| !matches!(outcome.result(*write), Some(OpResult::Failed(_))))
            .collect();
        for (n, ((((read, write), (row, _)), key), i)) in handles
            .into_iter()
            .zip(chunk)
            .zip(&keys)
            .zip(at)
            .enumerate()
        {
            if let Some(read) = read {
                // A row replaced by one the same counts once where the
                // primary key is the table's only unique key: MariaDB
                // then updates the record and finds it the same (with
                // another unique key after it, it deletes and inserts).
                if let Some(OpResult::Row(old)) = outcome.result(read) {
                    if unique || !same_row(def, old, row) {
                        affected += 1;
                        duplicates += 1;
                    }
                }
            }
            match outcome.result(write) {
                Some(OpResult::Failed(e))
                    if e.code == native::DUPLICATE_KEY || e.code == native::UNIQUE_VIOLATION =>
                {
                    let err = duplicate_of_op(tx, table, row, e)?;
                    if ignore {
                        duplicates += 1;
                        duplicate[i] = Some(err);
                    } else {
                        let later = (n + 1..keys.len()).filter(|&m| went[m] && !replace);
                        inserted.extend(later.map(|m| keys[m].clone()));
                        undo_inserts(tx, table, &inserted);
                        return Err(err);
                    }
                }
                Some(OpResult::Failed(e)) => return Err(txn::native_error_in(e, &table.name)),
                _ => {
                    affected += 1;
                    done[c * chunk_rows + i] = RowDone::Inserted;
                    if !replace {
                        inserted.push(key.clone());
                    }
                }
            }
        }
        for (i, error) in duplicate.into_iter().enumerate() {
            warnings.through(conn, c * chunk_rows + i);
            if let Some(error) = error {
                txn::warn(conn, error.code, error.message);
            }
        }
    }
    Ok((affected, duplicates))
}

/// A plain INSERT whose operations fail the transaction on a duplicate
/// (see [`Send`]): with the commit, or deferred.
fn insert_plain(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
    how: Send,
    committed: &mut bool,
) -> SqlResult<(u64, u64)> {
    let chunks = rows.len().div_ceil(OPS_PER_EXECUTE_MAX);
    for (n, chunk) in rows.chunks(OPS_PER_EXECUTE_MAX).enumerate() {
        // Deferred operations of earlier statements go in the same batch:
        // an error's operation number counts from them.
        let first = tx.pending_ops();
        for (row, _) in chunk {
            tx.define(Op::insert_at(&table.native, row))
                .map_err(|e| txn::native_error_in(&e, &table.name))?;
        }
        let last = n + 1 == chunks;
        let mode = match how {
            Send::WithCommit if last => ExecMode::Commit,
            Send::Deferred if tx.pending_ops() < OPS_PER_EXECUTE_MAX => continue,
            _ => ExecMode::NoCommit,
        };
        tx.execute(mode).map_err(|e| {
            let row = failed_op(&e)
                .and_then(|op| op.checked_sub(first))
                .and_then(|at| chunk.get(at));
            match row {
                Some((row, _))
                    if e.code == native::DUPLICATE_KEY || e.code == native::UNIQUE_VIOLATION =>
                {
                    duplicate_error(table, row, &e)
                }
                _ if e.is_unknown_result() => txn::commit_error(&e),
                _ => txn::native_error_in(&e, &table.name),
            }
        })?;
        if mode == ExecMode::Commit {
            *committed = true;
        }
    }
    Ok((rows.len() as u64, 0))
}

/// The row holding `row`'s primary key or one of its unique-index values,
/// locked: the 1062 that inserting `row` would give and the holder's
/// primary key. The primary key first, then the unique indexes in order,
/// as InnoDB checks them (MariaDB's IGNORE names `PRIMARY` when both are
/// taken, and its ON DUPLICATE KEY UPDATE updates the primary key's row).
fn unique_holder(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    row: &[(usize, Value)],
) -> SqlResult<Option<(SqlError, Vec<Value>)>> {
    let def = table.native.def();
    let env = crate::engine::expr::Env::default();
    let lock = Some(RowLock::EXCLUSIVE);
    // A hidden primary key is a fresh number: never taken.
    if !table.hidden_key {
        let probe = plan::Access::Keys(vec![primary_key_of(def, row)]);
        let mut ctx = Ctx::new(&[], &env);
        let hit = fetch(
            tx, table, &probe, None, lock, false, None, &mut ctx, None, None, None,
        )?;
        if let Some((_, pk)) = hit.into_iter().next() {
            let error = skarv_client::Error::new(native::DUPLICATE_KEY, "primary key");
            return Ok(Some((duplicate_error(table, row, &error), pk)));
        }
    }
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
    {
        if let Some(pk) = unique_value_holder(tx, table, index, row)? {
            let error = skarv_client::Error::new(
                native::UNIQUE_VIOLATION,
                format!("unique index `{}`", index.name),
            );
            return Ok(Some((duplicate_error(table, row, &error), pk)));
        }
    }
    Ok(None)
}

/// The primary and unique keys (in key form: equal under the column's
/// collation) of the rows of one chunk of an INSERT IGNORE, so that a row
/// whose unique value an earlier row of the same chunk takes is ignored
/// with its 1062 instead of aborting the transaction.
struct ChunkKeys {
    primary: schema::key::KeyEncoder,
    unique: Vec<(usize, schema::key::KeyEncoder)>,
    /// (index position in `unique`, or `usize::MAX` for the primary key;
    /// the key's bytes).
    keys: std::collections::HashSet<(usize, Vec<u8>)>,
}

impl ChunkKeys {
    fn new(def: &schema::TableDef) -> ChunkKeys {
        let unique = def
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, i)| i.kind == schema::IndexKind::Unique)
            .map(|(n, i)| (n, schema::key::KeyEncoder::index(def, i)))
            .collect();
        ChunkKeys {
            primary: schema::key::KeyEncoder::primary_key(def),
            unique,
            keys: std::collections::HashSet::new(),
        }
    }

    fn clear(&mut self) {
        self.keys.clear();
    }

    /// The 1062 of `row` when an earlier row of the chunk holds one of its
    /// unique values; otherwise its keys are recorded and None. A row whose
    /// primary key an earlier one holds is the 1062 naming PRIMARY when
    /// `primary` says so (InnoDB checks the primary key first); else it is
    /// left to the data node, whose insert fails on it without aborting.
    fn taken(
        &mut self,
        table: &TableInfo,
        row: &[(usize, Value)],
        primary_is_error: bool,
    ) -> Option<SqlError> {
        let def = table.native.def();
        let mut bytes = Vec::new();
        let primary = (!table.hidden_key
            && self
                .primary
                .encode(&primary_key_of(def, row), &mut bytes)
                .is_ok())
        .then_some((usize::MAX, bytes));
        if primary.as_ref().is_some_and(|k| self.keys.contains(k)) {
            let error = skarv_client::Error::new(native::DUPLICATE_KEY, "primary key");
            return primary_is_error.then(|| duplicate_error(table, row, &error));
        }
        let mut found = Vec::with_capacity(self.unique.len());
        for (n, encoder) in &self.unique {
            let index = &def.indexes[*n];
            let Some(values) = unique_key_of(index, row) else {
                continue;
            };
            let mut bytes = Vec::new();
            if encoder.encode(&values, &mut bytes).is_err() {
                continue;
            }
            let key = (*n, bytes);
            if self.keys.contains(&key) {
                let error = skarv_client::Error::new(
                    native::UNIQUE_VIOLATION,
                    format!("unique index `{}`", index.name),
                );
                return Some(duplicate_error(table, row, &error));
            }
            found.push(key);
        }
        self.keys.extend(primary);
        self.keys.extend(found);
        None
    }
}

/// An INSERT … ON DUPLICATE KEY UPDATE whose row after `rows` failed to
/// convert with `error`: MariaDB writes (or updates) a row before it
/// converts the next, so the rows before it are written first and their
/// own error, if one fails, is the statement's; then the statement fails
/// and leaves nothing.
fn upsert_then_fail(
    conn: &mut Conn<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
    odku: &[(usize, Expr)],
    params: &[Val],
    ignore: bool,
    error: SqlError,
) -> SqlResult<Written> {
    let tx = txn::take(conn)?;
    let mut undo = Vec::new();
    let mut mark = None;
    if let Err(e) = upsert_mark(conn, &tx, table, &mut mark) {
        return txn::finish(conn, tx, Err(e));
    }
    let mut warnings = RowWarnings::default();
    let upserted = upsert_rows(
        conn,
        &tx,
        table,
        rows,
        odku,
        params,
        ignore,
        &mut warnings,
        Some(&mut undo),
        &mut vec![RowDone::Left; rows.len()],
    );
    // The updates defined are sent: their own errors (a unique value
    // taken) come before the row that did not convert.
    let upserted =
        upserted.and_then(|_| txn::flush(&tx).map_err(|e| txn::native_error_in(&e, &table.name)));
    if txn::in_transaction(conn) && mark.is_none() {
        undo_statement(&tx, table, &undo);
    }
    txn::end_statement(&tx, mark, true);
    txn::finish(conn, tx, upserted.and(Err(error)))
}

/// ON DUPLICATE KEY UPDATE of a parent whose FOREIGN KEY actions write
/// child rows, inside a transaction: the statement's mark, taken before
/// its first row, since a row's update may cascade (its [`Undo`] cannot
/// take that back) and a later row fail.
fn upsert_mark(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    table: &TableInfo,
    mark: &mut Option<txn::StatementMark>,
) -> SqlResult<()> {
    if !txn::in_transaction(conn)
        || !conn.session.foreign_key_checks()
        || !super::foreign::is_parent(table)
    {
        return Ok(());
    }
    let actions = super::foreign::parent_actions(conn, table)?;
    txn::mark_statement(conn, tx, (&actions, 1), mark)
}

/// The 1062 of the first of `rows` (made, not yet written) that an
/// INSERT would fail on: its key is stored, or an earlier one of them
/// takes it. A row after them failed to convert; MariaDB writes a row
/// before it converts the next, so such a duplicate is the error.
fn earlier_duplicate(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
) -> SqlResult<Option<SqlError>> {
    let mut keys = ChunkKeys::new(table.native.def());
    for (row, _) in rows {
        if let Some((error, _)) = unique_holder(tx, table, row)? {
            return Ok(Some(error));
        }
        if let Some(error) = keys.taken(table, row, true) {
            return Ok(Some(error));
        }
    }
    Ok(None)
}

/// The primary keys of the rows other than `row`'s own that hold one of
/// its unique index values, locked, each once: what REPLACE deletes
/// before it writes `row`.
fn unique_holders(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    row: &[(usize, Value)],
) -> SqlResult<Vec<Vec<Value>>> {
    let def = table.native.def();
    let encoder = schema::key::KeyEncoder::primary_key(def);
    let key_bytes = |pk: &[Value]| {
        let mut out = Vec::new();
        encoder.encode(pk, &mut out).ok().map(|_| out)
    };
    let mut seen = vec![key_bytes(&primary_key_of(def, row))];
    let mut holders = Vec::new();
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
    {
        if let Some(pk) = unique_value_holder(tx, table, index, row)? {
            let bytes = key_bytes(&pk);
            if !seen.contains(&bytes) {
                seen.push(bytes);
                holders.push(pk);
            }
        }
    }
    Ok(holders)
}

/// The primary key of the row holding `row`'s value of unique index
/// `index`, locked; None when no row does or the value has a NULL.
fn unique_value_holder(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    index: &schema::IndexDef,
    row: &[(usize, Value)],
) -> SqlResult<Option<Vec<Value>>> {
    let Some(key) = unique_key_of(index, row) else {
        return Ok(None);
    };
    let probe = plan::Access::Unique {
        index: index.name.clone(),
        keys: vec![key],
    };
    let env = crate::engine::expr::Env::default();
    let mut ctx = Ctx::new(&[], &env);
    let lock = Some(RowLock::EXCLUSIVE);
    let hit = fetch(
        tx, table, &probe, None, lock, false, None, &mut ctx, None, None, None,
    )?;
    Ok(hit.into_iter().next().map(|(_, pk)| pk))
}

/// Whether the row `old` a key holds is the row `new` (its given columns,
/// the others their defaults) would write. A BLOB or TEXT longer than the
/// row keeps of it is taken as different.
fn same_row(def: &schema::TableDef, old: &skarv_client::Row, new: &[(usize, Value)]) -> bool {
    // A BLOB's or TEXT's head is the whole value when it is not longer.
    let whole_head = |was: &Value, bytes: &[u8]| match was {
        Value::BlobHead {
            total_bytes,
            inline,
        } => *total_bytes == inline.len() as u64 && inline.as_slice() == bytes,
        _ => false,
    };
    old.columns().len() == def.columns.len()
        && old.columns().iter().zip(old.values()).all(|(c, was)| {
            let given = new.iter().find(|(p, _)| p == c).map(|(_, v)| v);
            match given.or(def.columns[*c].default.as_ref()) {
                None => was.is_null(),
                Some(Value::String(s)) if matches!(was, Value::BlobHead { .. }) => {
                    whole_head(was, s.as_bytes())
                }
                Some(Value::Bytes(b)) if matches!(was, Value::BlobHead { .. }) => {
                    whole_head(was, b)
                }
                // The stored bytes, as MariaDB compares them: -0 is not 0.
                Some(Value::Double(d)) => {
                    matches!(was, Value::Double(w) if w.to_bits() == d.to_bits())
                }
                Some(Value::Float(f)) => {
                    matches!(was, Value::Float(w) if w.to_bits() == f.to_bits())
                }
                Some(now) => was == now,
            }
        })
}

/// Takes back the rows a failed INSERT wrote, so that inside a
/// transaction the statement leaves nothing (MySQL's statement rollback).
/// Best effort: when it fails the caller's error still stands and the
/// transaction is rolled back as unusable.
fn undo_inserts(tx: &Transaction<'_>, table: &TableInfo, keys: &[Vec<Value>]) {
    for chunk in keys.chunks(OPS_PER_EXECUTE_MAX) {
        for key in chunk {
            if tx.define(Op::delete(&table.native, key)).is_err() {
                return;
            }
        }
        if tx.execute(ExecMode::NoCommit).is_err() {
            return;
        }
    }
}

/// INSERT … ON DUPLICATE KEY UPDATE, a row at a time: insert; on a
/// duplicate primary key read the row and update it.
#[allow(clippy::too_many_arguments)]
fn upsert_rows(
    conn: &mut Conn<'_>,
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
    assignments: &[(usize, Expr)],
    params: &[Val],
    ignore: bool,
    warnings: &mut RowWarnings,
    mut undo: Option<&mut Vec<Undo>>,
    done: &mut [RowDone],
) -> SqlResult<(u64, u64)> {
    let native_table = &table.native;
    let def = native_table.def();
    let mut affected = 0;
    // Rows that found their key taken, and those whose update changed
    // the row.
    let mut duplicates = 0;
    let mut changed = 0;
    let unique = has_unique(def);
    // Lowered once for the statement, not per duplicate row.
    let checks = lower_checks(conn, table)?;
    let fk_checks = super::foreign::child_checks(conn, table)?;
    // A parent's children, resolved once for the statement's updates.
    let fk_actions = if conn.session.foreign_key_checks() && super::foreign::is_parent(table) {
        super::foreign::parent_actions(conn, table)?
    } else {
        Vec::new()
    };
    let foreign = (fk_checks.as_slice(), fk_actions.as_slice());
    let environment = env(conn);
    for (n, (row, sql_row)) in rows.iter().enumerate() {
        // The row's own warnings before its update's.
        warnings.through(conn, n);
        // A unique index conflict would abort the transaction: its holder
        // is looked for first.
        let holder = if unique {
            unique_holder(tx, table, row)?
        } else {
            None
        };
        if let Some((_, pk)) = holder {
            duplicates += 1;
            let access = plan::Access::Keys(vec![pk]);
            let upserted = upsert_update(
                conn,
                tx,
                table,
                &access,
                sql_row,
                assignments,
                &checks,
                foreign,
                params,
                n,
                ignore,
                undo.as_deref_mut(),
            )?;
            affected += upserted.affected(conn.found_rows);
            if let Upserted::Changed(auto) = upserted {
                done[n] = RowDone::Updated(auto);
                changed += 1;
            }
            continue;
        }
        let h = tx
            .define(Op::insert_at(native_table, row).ignore_error())
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        let outcome = tx
            .execute(ExecMode::NoCommit)
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        match outcome.result(h) {
            Some(OpResult::Failed(e)) if e.code == native::DUPLICATE_KEY => {}
            Some(OpResult::Failed(e)) => {
                return Err(match e.code {
                    native::UNIQUE_VIOLATION => duplicate_error(table, row, e),
                    _ => txn::native_error_in(e, &table.name),
                })
            }
            _ => {
                if let Some(error) =
                    missing_parent(tx, table, &fk_checks, sql_row, params, &environment)?
                {
                    if !ignore {
                        if let Some(undo) = undo.as_deref_mut() {
                            undo.push(Undo::Delete(primary_key_of(def, row)));
                        }
                        return Err(error);
                    }
                    // IGNORE: the row inserted goes again, with a warning.
                    tx.define(Op::delete(native_table, &primary_key_of(def, row)))
                        .and_then(|_| tx.execute(ExecMode::NoCommit))
                        .map_err(|e| txn::native_error_in(&e, &table.name))?;
                    catalog::warn(conn, error.code, error.message);
                    continue;
                }
                affected += 1;
                done[n] = RowDone::Inserted;
                // RETURNING: each row in turn, inserted or updated.
                if let Some(returned) = conn.returned.as_mut() {
                    returned.push(sql_row.clone());
                }
                if let Some(undo) = undo.as_deref_mut() {
                    undo.push(Undo::Delete(primary_key_of(def, row)));
                }
                continue;
            }
        }
        duplicates += 1;
        let access = plan::Access::Keys(vec![primary_key_of(def, row)]);
        let upserted = upsert_update(
            conn,
            tx,
            table,
            &access,
            sql_row,
            assignments,
            &checks,
            foreign,
            params,
            n,
            ignore,
            undo.as_deref_mut(),
        )?;
        affected += upserted.affected(conn.found_rows);
        if let Upserted::Changed(auto) = upserted {
            done[n] = RowDone::Updated(auto);
            changed += 1;
        }
    }
    // MariaDB's "Duplicates": the rows updated, or under IGNORE the
    // rows neither inserted nor changed.
    let duplicates = if ignore {
        duplicates - changed
    } else {
        changed
    };
    Ok((affected, duplicates))
}

/// A row just inserted by ON DUPLICATE KEY UPDATE: the first of its
/// FOREIGN KEYs whose parent is missing (1452), if any.
fn missing_parent(
    tx: &Transaction<'_>,
    table: &TableInfo,
    checks: &[super::foreign::ChildCheck],
    row: &[Val],
    params: &[Val],
    environment: &crate::engine::expr::Env,
) -> SqlResult<Option<SqlError>> {
    if checks.is_empty() {
        return Ok(None);
    }
    let mut ctx = Ctx::new(params, environment);
    let failed = super::foreign::missing_parents(tx, table, checks, &[(row, None)], &mut ctx)?;
    Ok(failed.into_iter().flatten().next())
}

/// What the update half of ON DUPLICATE KEY UPDATE did to a row.
enum Upserted {
    /// Changed it; its AUTO_INCREMENT value after (0 for none).
    Changed(u64),
    /// Found it, and its new values were its old ones.
    Unchanged,
    /// Left it (it was gone, or IGNORE passed over a FOREIGN KEY error).
    Skipped,
}

impl Upserted {
    /// The row's share of the statement's affected rows: 2 changed, and
    /// under `CLIENT_FOUND_ROWS` 1 found unchanged (MariaDB's).
    fn affected(&self, found_rows: bool) -> u64 {
        match self {
            Upserted::Changed(_) => 2,
            Upserted::Unchanged => u64::from(found_rows),
            Upserted::Skipped => 0,
        }
    }
}

/// The update half of ON DUPLICATE KEY UPDATE: the row `access` finds,
/// with VALUES(col) reading `inserted`.
#[allow(clippy::too_many_arguments)]
fn upsert_update(
    conn: &mut Conn<'_>,
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &plan::Access,
    inserted: &[Val],
    assignments: &[(usize, Expr)],
    checks: &[Check],
    foreign: (
        &[super::foreign::ChildCheck],
        &[super::foreign::ParentAction],
    ),
    params: &[Val],
    n: usize,
    ignore: bool,
    undo: Option<&mut Vec<Undo>>,
) -> SqlResult<Upserted> {
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    // INSERT IGNORE's update converts as its insert does (a warning).
    ctx.strict = conn.session.sql_mode_strict() && !ignore;
    ctx.ignore = ignore;
    let lock = Some(RowLock::EXCLUSIVE);
    let found = fetch(
        tx, table, access, None, lock, false, None, &mut ctx, None, None, None,
    )?;
    let Some((old, key)) = found.into_iter().next() else {
        return Ok(Upserted::Skipped);
    };
    ctx.insert_values = inserted;
    let changes = changes_of(table, &old, 0, assignments, checks, &mut ctx, n + 1)?;
    ctx.warnings = abort_on_warning(ctx.strict, std::mem::take(&mut ctx.warnings))?;
    // A key value another row holds: inside a transaction the data node's
    // refusal would end it, so it is looked for first (as an UPDATE's,
    // `first_duplicate`); IGNORE leaves the row as it is, with a warning.
    if (txn::in_transaction(conn) || ignore) && changes_keys(table, &changes) {
        let row = [(old.as_slice(), key.as_slice(), changes.as_slice())];
        if let Some(error) = first_duplicate(tx, table, &row)? {
            if !ignore {
                return Err(error);
            }
            ctx.warn(error.code, error.message);
            keep_warnings(conn, &mut ctx);
            return Ok(Upserted::Skipped);
        }
    }
    // FOREIGN KEYs of the row's new values, and of its children.
    let mut undo = undo;
    if !changes.is_empty()
        && conn.session.foreign_key_checks()
        && (!table.sql.foreign_keys.is_empty() || super::foreign::is_parent(table))
    {
        let new = sql_row_after(table, &old, &changes, ctx.env.tz_secs);
        match super::foreign::row_updated(&*conn, tx, table, foreign, (&old, &key, &new), &mut ctx)
        {
            Ok(true) => {
                if let Some(undo) = undo.as_deref_mut() {
                    undo.push(Undo::Lost);
                }
            }
            Ok(false) => {}
            Err(e) if ignore && e.code == codes::NO_REFERENCED_ROW_2 => {
                ctx.warn(e.code, e.message);
                keep_warnings(conn, &mut ctx);
                return Ok(Upserted::Skipped);
            }
            Err(e) => return Err(e),
        }
    }
    let changed = define_update(tx, table, &old, &key, &changes, ctx.env.tz_secs, n + 1)?;
    // An update that may take a unique value is sent now, so that its
    // 1062 names the value and the key (the error names the operation).
    let unique = has_unique(table.native.def());
    if changed && unique {
        tx.execute(ExecMode::NoCommit).map_err(|e| match e.code {
            native::UNIQUE_VIOLATION => update_duplicate(table, &old, &changes, &e),
            _ => txn::native_error_in(&e, &table.name),
        })?;
    }
    if let (true, Some(undo)) = (changed, undo) {
        let pk = &table.native.def().primary_key;
        undo.push(Undo::Restore {
            key: key_after(table, &key, &changes),
            old: whole_row(table, &old, ctx.env.tz_secs, n + 1)?,
            moved: changes.iter().any(|(p, _)| pk.contains(p)),
        });
    }
    keep_warnings(conn, &mut ctx);
    // RETURNING: the row found, as the update left it (changed or not,
    // as MariaDB's).
    if let Some(returned) = conn.returned.as_mut() {
        returned.push(sql_row_after(table, &old, &changes, ctx.env.tz_secs));
    }
    if !changed {
        return Ok(Upserted::Unchanged);
    }
    let auto = table
        .columns
        .iter()
        .position(|c| c.auto_increment)
        .map_or(0, |c| {
            let native = table.columns[c].native;
            match changes.iter().find(|(p, _)| *p == native) {
                Some((_, Value::UInt(u))) => *u,
                Some((_, Value::Int(i))) => u64::try_from(*i).unwrap_or(0),
                Some(_) => 0,
                None => auto_value(&old[c]),
            }
        });
    Ok(Upserted::Changed(auto))
}

/// How a statement inside a transaction takes back a row it wrote when a
/// later row fails it (MySQL's statement rollback; the native transaction
/// keeps every write it is sent, so the statement writes the inverse).
pub(crate) enum Undo {
    /// It inserted the row of this primary key.
    Delete(Vec<Value>),
    /// It changed the row now of primary key `key`, which was `old` (its
    /// columns in native form; `moved`: under another primary key).
    Restore {
        key: Vec<Value>,
        old: Vec<(usize, Value)>,
        moved: bool,
    },
    /// A FOREIGN KEY's CASCADE or SET NULL changed child rows, which the
    /// statement does not take back: a failure rolls the whole
    /// transaction back instead. (Not met where the statement took a
    /// [`txn::StatementMark`], which takes such writes back: `upsert_mark`.)
    Lost,
}

/// Writes the inverse of a failed statement's writes, newest first (a
/// row written twice ends as it was), each in its own round trip so that
/// two on one key keep their order. Best effort: when one fails, the
/// caller's error still stands and the transaction is rolled back as
/// unusable (something is left pending).
fn undo_statement(tx: &Transaction<'_>, table: &TableInfo, undo: &[Undo]) {
    if undo.iter().any(|u| matches!(u, Undo::Lost)) {
        // The caller's `txn::finish` then finds the transaction gone.
        let _ = tx.execute(ExecMode::Rollback);
        return;
    }
    if tx.pending_ops() > 0 && tx.execute(ExecMode::NoCommit).is_err() {
        return;
    }
    for step in undo.iter().rev() {
        let defined = match step {
            Undo::Lost => unreachable!("a statement with a lost step is rolled back whole"),
            Undo::Delete(key) => tx.define(Op::delete(&table.native, key)).map(|_| ()),
            Undo::Restore {
                key,
                old,
                moved: false,
            } => {
                let pk = &table.native.def().primary_key;
                let columns: Vec<(usize, Value)> = old
                    .iter()
                    .filter(|(c, _)| !pk.contains(c))
                    .cloned()
                    .collect();
                tx.define(Op::update_at(&table.native, key, &columns))
                    .map(|_| ())
            }
            Undo::Restore { key, old, .. } => tx
                .define(Op::delete(&table.native, key))
                .and_then(|_| tx.execute(ExecMode::NoCommit).map(|_| ()))
                .and_then(|()| tx.define(Op::insert_at(&table.native, old)).map(|_| ())),
        };
        if defined.is_err() || tx.execute(ExecMode::NoCommit).is_err() {
            return;
        }
    }
}

/// The SQL row `old` after `changes` (native column, value).
pub(super) fn sql_row_after(
    table: &TableInfo,
    old: &[Val],
    changes: &[(usize, Value)],
    tz_secs: i64,
) -> Vec<Val> {
    let mut new = old.to_vec();
    for (native, value) in changes {
        if let Some(c) = table.sql_column(*native) {
            new[c] = super::convert::from_native(value, &table.columns[c].ty, tz_secs);
        }
    }
    new
}

/// The primary key of a row of key `key` after `changes`.
fn key_after(table: &TableInfo, key: &[Value], changes: &[(usize, Value)]) -> Vec<Value> {
    let pk = &table.native.def().primary_key;
    pk.iter()
        .zip(key)
        .map(|(p, v)| {
            changes
                .iter()
                .find(|(c, _)| c == p)
                .map_or_else(|| v.clone(), |(_, new)| new.clone())
        })
        .collect()
}

/// Every column of a row read as `old`, in native form.
fn whole_row(
    table: &TableInfo,
    old: &[Val],
    tz_secs: i64,
    row_number: usize,
) -> SqlResult<Vec<(usize, Value)>> {
    let mut row = Vec::with_capacity(table.columns.len());
    for (at, column) in table.columns.iter().enumerate() {
        let target = Target {
            column,
            db: &table.db,
            table: &table.name,
            row: row_number,
            tz_secs,
        };
        row.push((column.native, stored_again(&old[at], &target)?));
    }
    Ok(row)
}

/// A value read from a row, stored as it was: as [`to_native`], but an
/// ENUM's error value '' (index 0, which a non-strict or IGNORE write
/// stores) stays index 0, where a write of '' is 1265. Without it an
/// UPDATE of the primary key (a delete and an insert of the whole row),
/// or a statement's undo, failed on a column it did not write.
pub(super) fn stored_again(v: &Val, target: &Target<'_>) -> SqlResult<Value> {
    if let (super::SqlType::Enum(members), Val::Str(b)) = (&target.column.ty, v) {
        if b.is_empty() && !members.iter().any(String::is_empty) {
            return Ok(Value::UInt(0));
        }
    }
    to_native(v, target, false)
}

/// MariaDB's strict mode for INSERT, REPLACE and UPDATE (not IGNORE, not
/// DELETE): a warning that evaluating the statement's values or conditions
/// leaves (not a note) fails it with the warning's code and message, as
/// MariaDB's `abort_on_warning` does; otherwise the warnings are handed
/// back. The write statements evaluate every row before they write one,
/// so nothing is written when this fails.
pub(crate) fn abort_on_warning(
    strict: bool,
    warnings: Vec<(u16, String)>,
) -> SqlResult<Vec<(u16, String)>> {
    if !strict {
        return Ok(warnings);
    }
    match warnings.iter().find(|(code, _)| {
        code & (crate::engine::expr::eval::NOTE_BIT | crate::engine::expr::eval::PLANNED_BIT) == 0
    }) {
        Some((code, message)) => Err(SqlError::new(*code, message.clone())),
        None => Ok(warnings),
    }
}

/// The warnings from `at` on that rows left, taken out of `warnings`
/// for [`abort_on_warning`]; the planning's among them (a key's constant
/// read by the range optimizer, `PLANNED_BIT`) stay, listed before a
/// statement's error as MariaDB lists them.
fn rows_warnings(warnings: &mut Vec<(u16, String)>, at: usize) -> Vec<(u16, String)> {
    let later = warnings.split_off(at.min(warnings.len()));
    let (planned, rows): (Vec<_>, Vec<_>) = later
        .into_iter()
        .partition(|(code, _)| code & crate::engine::expr::eval::PLANNED_BIT != 0);
    warnings.extend(planned);
    rows
}

/// Whether a row the error replays read again passes the WHERE, or the
/// error its test, or strict mode of a warning of it, gives.
pub(crate) fn replayed_test(
    cond: Option<&Expr>,
    row: &[Val],
    ctx: &mut Ctx<'_>,
) -> SqlResult<bool> {
    ctx.warnings.clear();
    let pass = match cond.map_or(Ok(true), |c| c.test(row, ctx)) {
        // A warning met before the error was MariaDB's error first
        // (strict mode aborts at the warning).
        Err(e) => return Err(strict_error(ctx).unwrap_or(e)),
        Ok(pass) => pass,
    };
    match strict_error(ctx) {
        Some(error) => Err(error),
        None => Ok(pass),
    }
}

/// The error strict mode makes of the first warning `ctx` holds (not a
/// note nor a planning warning); the warnings are taken either way.
pub(crate) fn strict_error(ctx: &mut Ctx<'_>) -> Option<SqlError> {
    abort_on_warning(true, std::mem::take(&mut ctx.warnings)).err()
}

/// Defines the update of one row by its `changes` (none: nothing is
/// defined, false).
pub(super) fn define_update(
    tx: &Transaction<'_>,
    table: &TableInfo,
    old: &[Val],
    key: &[Value],
    changes: &[(usize, Value)],
    tz_secs: i64,
    row_number: usize,
) -> SqlResult<bool> {
    if changes.is_empty() {
        return Ok(false);
    }
    let pk = &table.native.def().primary_key;
    if changes.iter().any(|(p, _)| pk.contains(p)) {
        // A new primary key is a new row: delete the old one and insert
        // the whole row under the new key (as NDB's handler does).
        let mut row = whole_row(table, old, tz_secs, row_number)?;
        for (column, value) in &mut row {
            if let Some((_, new)) = changes.iter().find(|(p, _)| p == column) {
                *value = new.clone();
            }
        }
        tx.define(Op::delete(&table.native, key))
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        tx.define(Op::insert_at(&table.native, &row))
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        return Ok(true);
    }
    tx.define(Op::update_at(&table.native, key, changes))
        .map_err(|e| txn::native_error_in(&e, &table.name))?;
    Ok(true)
}

/// The native row `old` becomes with `changes`.
fn row_after(table: &TableInfo, old: &[Val], changes: &[(usize, Value)]) -> Vec<(usize, Value)> {
    let mut row = Vec::with_capacity(table.columns.len());
    for (at, column) in table.columns.iter().enumerate() {
        let value = match changes.iter().find(|(p, _)| *p == column.native) {
            Some((_, v)) => v.clone(),
            None => {
                let target = Target {
                    column,
                    db: &table.db,
                    table: &table.name,
                    row: 1,
                    // Old values are the session's; 0 keeps them as they are.
                    tz_secs: 0,
                };
                stored_again(&old[at], &target).unwrap_or(Value::Null)
            }
        };
        row.push((column.native, value));
    }
    row
}

/// Whether the row `old` (primary key `key`) with `changes` would take a
/// primary or unique key another row holds (UPDATE IGNORE's test).
pub(super) fn key_taken(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    old: &[Val],
    key: &[Value],
    changes: &[(usize, Value)],
) -> SqlResult<bool> {
    let row = row_after(table, old, changes);
    let def = table.native.def();
    let mut probes = Vec::new();
    let new_key = primary_key_of(def, &row);
    if new_key != key {
        probes.push(plan::Access::Keys(vec![new_key]));
    }
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
    {
        if let Some(values) = unique_key_of(index, &row) {
            probes.push(plan::Access::Unique {
                index: index.name.clone(),
                keys: vec![values],
            });
        }
    }
    let env = crate::engine::expr::Env::default();
    for probe in probes {
        let mut ctx = Ctx::new(&[], &env);
        let lock = Some(RowLock::EXCLUSIVE);
        let hit = fetch(
            tx, table, &probe, None, lock, false, None, &mut ctx, None, None, None,
        )?;
        if hit.iter().any(|(_, pk)| pk.as_slice() != key) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A row an UPDATE writes: its old values, primary key and changes.
pub(super) type UpdatedRow<'r> = (&'r [Val], &'r [Value], &'r [(usize, Value)]);

/// A row's values of one key (encoded), before and after its update.
type KeyMove = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Whether an UPDATE's changes touch a key: the primary key or a column
/// of a unique index (what the data nodes may refuse as a duplicate).
pub(super) fn changes_keys(table: &TableInfo, changes: &[(usize, Value)]) -> bool {
    let def = table.native.def();
    changes.iter().any(|(c, _)| {
        def.primary_key.contains(c)
            || def
                .indexes
                .iter()
                .any(|i| i.kind == schema::IndexKind::Unique && i.columns.contains(c))
    })
}

/// The 1062 an UPDATE's `rows` (each old row, its primary key and its
/// changes, in the order they are written) would meet, found before any
/// is written: each row's new key values against the rows that hold them
/// (read in one batch per key, with a shared lock) and against what the
/// rows before it in the statement gave up and took, as MariaDB meets
/// them row by row. Inside a transaction a duplicate the data nodes meet
/// ends the whole transaction (an update's unique index row is written
/// after its row), where MariaDB fails only the statement: so the
/// statement fails here first, having written nothing. A value another
/// transaction takes between this read and the write still ends the
/// transaction, saying so.
pub(super) fn first_duplicate(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[UpdatedRow<'_>],
) -> SqlResult<Option<SqlError>> {
    use schema::key::KeyEncoder;
    use std::collections::HashMap;
    let def = table.native.def();
    // The keys: the primary key (None), then each unique index.
    let uniques: Vec<&schema::IndexDef> = def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
        .collect();
    let kinds: Vec<(Option<&schema::IndexDef>, KeyEncoder)> =
        std::iter::once((None, KeyEncoder::primary_key(def)))
            .chain(
                uniques
                    .iter()
                    .map(|i| (Some(*i), KeyEncoder::index(def, i))),
            )
            .collect();
    let values_of = |kind: usize, row: &[(usize, Value)]| -> Option<Vec<Value>> {
        match kinds[kind].0 {
            None => Some(primary_key_of(def, row)),
            Some(index) => unique_key_of(index, row),
        }
    };
    let bytes_of = |kind: usize, values: &[Value]| -> Vec<u8> {
        let mut out = Vec::new();
        // A value that does not encode cannot be held by a row either.
        let _ = kinds[kind].1.encode(values, &mut out);
        out
    };
    // Each row's key values (encoded) before and after, per key: (None,
    // None) for a key the row keeps.
    let mut moves: Vec<Vec<KeyMove>> = Vec::new();
    let mut news = Vec::with_capacity(rows.len());
    let mut probes: Vec<Vec<Vec<Value>>> = vec![Vec::new(); kinds.len()];
    let mut probed: std::collections::HashSet<(usize, Vec<u8>)> = Default::default();
    for &(old, _, changes) in rows {
        let before = row_after(table, old, &[]);
        let after = row_after(table, old, changes);
        let mut row_moves = Vec::with_capacity(kinds.len());
        for (kind, probe) in probes.iter_mut().enumerate() {
            let was = values_of(kind, &before).map(|v| bytes_of(kind, &v));
            let will = values_of(kind, &after).map(|v| (bytes_of(kind, &v), v));
            if will.as_ref().map(|(b, _)| b) != was.as_ref() {
                let will = will.map(|(bytes, values)| {
                    if probed.insert((kind, bytes.clone())) {
                        probe.push(values);
                    }
                    bytes
                });
                row_moves.push((was, will));
            } else {
                row_moves.push((None, None));
            }
        }
        moves.push(row_moves);
        news.push(after);
    }
    // Who holds each new value now.
    let mut holders: HashMap<(usize, Vec<u8>), Vec<u8>> = HashMap::new();
    let env = crate::engine::expr::Env::default();
    for (kind, keys) in probes.into_iter().enumerate() {
        if keys.is_empty() {
            continue;
        }
        let access = match kinds[kind].0 {
            None => plan::Access::Keys(keys),
            Some(index) => plan::Access::Unique {
                index: index.name.clone(),
                keys,
            },
        };
        let mut ctx = Ctx::new(&[], &env);
        let lock = Some(RowLock::SHARED);
        for (held, pk) in fetch(
            tx, table, &access, None, lock, false, None, &mut ctx, None, None, None,
        )? {
            let native = row_after(table, &held, &[]);
            if let Some(values) = values_of(kind, &native) {
                holders.insert((kind, bytes_of(kind, &values)), key_bytes(def, &pk));
            }
        }
    }
    // Row by row: a value is held by a row other than this one, unless a
    // row before it in the statement gave it up (None) or took it.
    let mut now: HashMap<(usize, Vec<u8>), Option<Vec<u8>>> = HashMap::new();
    for (((_, key, _), row_moves), after) in rows.iter().zip(&moves).zip(&news) {
        let own = key_bytes(def, key);
        for (kind, (_, will)) in row_moves.iter().enumerate() {
            let Some(bytes) = will else { continue };
            let at = (kind, bytes.clone());
            let holder = match now.get(&at) {
                Some(holder) => holder.as_ref(),
                None => holders.get(&at),
            };
            if holder.is_some_and(|h| *h != own) {
                let error = match kinds[kind].0 {
                    None => skarv_client::Error::new(native::DUPLICATE_KEY, "primary key"),
                    Some(index) => skarv_client::Error::new(
                        native::UNIQUE_VIOLATION,
                        format!("unique index `{}`", index.name),
                    ),
                };
                return Ok(Some(duplicate_error(table, after, &error)));
            }
        }
        let new_key = key_bytes(def, &primary_key_of(def, after));
        for (kind, (was, will)) in row_moves.iter().enumerate() {
            if let Some(was) = was {
                now.insert((kind, was.clone()), None);
            }
            if let Some(bytes) = will {
                now.insert((kind, bytes.clone()), Some(new_key.clone()));
            }
        }
    }
    Ok(None)
}

/// The 1062 of an update that broke a unique index: the row as it was
/// to become, and the index the native error names.
pub(super) fn update_duplicate(
    table: &TableInfo,
    old: &[Val],
    changes: &[(usize, Value)],
    error: &skarv_client::Error,
) -> SqlError {
    let row = row_after(table, old, changes);
    duplicate_error(table, &row, error)
}

/// The operation of its batch a native error names, if it does.
pub(crate) fn failed_op(error: &skarv_client::Error) -> Option<usize> {
    if let Some(op) = error.op {
        return usize::try_from(op).ok();
    }
    error
        .message
        .split("operation ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
}

/// The changes `assignments` (a column of `table`, its value over the
/// row read) make to the row `old` (the table's columns from `offset`:
/// a join's combined row), evaluated left to right, each seeing the
/// values assigned before it; a value equal to the column's is no change.
pub(super) fn changes_of(
    table: &TableInfo,
    old: &[Val],
    offset: usize,
    assignments: &[(usize, Expr)],
    checks: &[Check],
    ctx: &mut Ctx<'_>,
    row_number: usize,
) -> SqlResult<Vec<(usize, Value)>> {
    let mut cut = 0;
    changes_counted(
        table,
        old,
        offset,
        assignments,
        checks,
        ctx,
        row_number,
        &mut cut,
    )
}

/// [`changes_of`], counting in `cut` the warnings of storing the values
/// (MariaDB's `cuted_fields`, which a multi-table UPDATE's info line
/// gives).
#[allow(clippy::too_many_arguments)]
pub(super) fn changes_counted(
    table: &TableInfo,
    old: &[Val],
    offset: usize,
    assignments: &[(usize, Expr)],
    checks: &[Check],
    ctx: &mut Ctx<'_>,
    row_number: usize,
    cut: &mut usize,
) -> SqlResult<Vec<(usize, Value)>> {
    let mut row = old.to_vec();
    let mut changes = Vec::new();
    for (col, e) in assignments {
        let before = ctx.warnings.len();
        let v = e.eval(&row, ctx)?;
        // Strict mode fails on a warning as it is given, so one of making
        // the value comes before storing it (`SET f = IF(b < f, …)` of a
        // text b is 1292, not the stored value's 1264), as MariaDB's.
        if ctx.strict && ctx.warnings.len() > before {
            abort_on_warning(true, ctx.warnings[before..].to_vec())?;
        }
        let column = &table.columns[*col];
        let target = Target {
            column,
            db: &table.db,
            table: &table.name,
            row: row_number,
            tz_secs: ctx.env.tz_secs,
        };
        // Its rounding note whether or not the row changes: the value is
        // stored before it is compared.
        let before = ctx.warnings.len();
        let stored = super::convert::store(&v, &target, ctx)?;
        *cut += ctx.warnings.len() - before;
        let new = super::convert::from_native(&stored, &column.ty, ctx.env.tz_secs);
        let same = match (&new, &row[offset + *col]) {
            (Val::Null, Val::Null) => true,
            (Val::Null, _) | (_, Val::Null) => false,
            // MariaDB compares the stored bytes: -0 and 0 differ.
            (Val::Double(a), Val::Double(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b || (!matches!(a, Val::Str(_)) && compare(a, b, None, ctx).is_eq()),
        };
        if same {
            continue;
        }
        row[offset + *col] = new;
        changes.retain(|(p, _)| *p != column.native);
        changes.push((column.native, stored));
    }
    if !changes.is_empty() {
        check_row(
            checks,
            table,
            &row[offset..offset + table.columns.len()],
            ctx,
        )?;
    }
    // ON UPDATE CURRENT_TIMESTAMP: a changed row takes the statement's
    // time in such columns it does not set itself.
    if !changes.is_empty() {
        for column in &table.columns {
            let assigned = assignments
                .iter()
                .any(|(c, _)| table.columns[*c].native == column.native);
            if column.on_update_now && !assigned {
                let target = Target {
                    column,
                    db: &table.db,
                    table: &table.name,
                    row: row_number,
                    tz_secs: ctx.env.tz_secs,
                };
                let now = to_native(
                    &now_value(ctx.env.now_micros, ctx.env.tz_secs),
                    &target,
                    false,
                )?;
                changes.push((column.native, now));
            }
        }
    }
    Ok(changes)
}

/// A table's CHECK constraint, lowered over its columns (`table_scope`
/// order): the name MariaDB's error gives it and its condition.
pub(crate) struct Check {
    name: String,
    cond: Expr,
    /// The view (database, name) whose CHECK OPTION this is, else None
    /// for a CHECK constraint of the table.
    view: Option<(String, String)>,
}

/// A column's expression DEFAULT, lowered over its table's columns.
#[derive(Clone)]
pub(crate) struct LoweredDefault {
    pub(crate) expr: Expr,
    /// It names columns (`DEFAULT (a + 1)`): made after the row's other
    /// values, in column order (CREATE refused one naming a later such
    /// column, 4029).
    pub(crate) names_columns: bool,
}

/// The expression DEFAULTs of `table`'s columns, lowered once per
/// statement, by column (`TableInfo::columns`); empty when it has none.
pub(crate) fn lower_defaults(
    conn: &Conn<'_>,
    table: &TableInfo,
) -> SqlResult<Vec<Option<LoweredDefault>>> {
    if !table.columns.iter().any(|c| c.default_expr) {
        return Ok(Vec::new());
    }
    table
        .columns
        .iter()
        .map(|c| match c.default.as_deref() {
            Some(text) if c.default_expr => {
                let parsed = crate::engine::ddl::parse_default(text)?;
                let names_columns = !crate::engine::ddl::columns_named(&parsed).is_empty();
                // It may name the row's columns (`DEFAULT (a + 1)`).
                let expr = with_scope(conn, table_scope(table, &table.name), &[], |s| {
                    s.clause = "DEFAULT";
                    s.lower(&parsed)
                })?;
                Ok(Some(LoweredDefault {
                    expr,
                    names_columns,
                }))
            }
            _ => Ok(None),
        })
        .collect()
}

/// The table's CHECK constraints, lowered once per statement.
pub(super) fn lower_checks(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<Vec<Check>> {
    lower_checks_as(conn, table, &table.name)
}

/// `table`'s CHECK constraints, a column's named after the table `shown`
/// (a copying ALTER's new table is the old one to the user).
pub(crate) fn lower_checks_as(
    conn: &Conn<'_>,
    table: &TableInfo,
    shown: &str,
) -> SqlResult<Vec<Check>> {
    if table.sql.checks.is_empty() && conn.view_checks.is_empty() {
        return Ok(Vec::new());
    }
    let columns = table_scope(table, &table.name);
    let mut out = Vec::with_capacity(table.sql.checks.len() + conn.view_checks.len());
    // A write through views WITH CHECK OPTION: theirs first, as MySQL
    // checks the view before the table's constraints.
    for v in &conn.view_checks {
        let cond = with_scope(conn, columns.clone(), &[], |s| {
            s.clause = "WHERE";
            s.lower(&v.cond)
        })?;
        out.push(Check {
            name: v.name.clone(),
            cond,
            view: Some((v.db.clone(), v.name.clone())),
        });
    }
    for c in &table.sql.checks {
        let parsed = crate::engine::ddl::parse_check(&c.expr)?;
        let cond = with_scope(conn, columns.clone(), &[], |s| {
            s.clause = "CHECK";
            s.lower(&parsed)
        })?;
        let name = match &c.column {
            // MariaDB names a column's constraint by table and column.
            Some(column) => format!("{shown}.{column}"),
            None => c.name.clone(),
        };
        out.push(Check {
            name,
            cond,
            view: None,
        });
    }
    Ok(out)
}

/// 4025 (MariaDB's) when `row` fails a CHECK: one that is FALSE; NULL
/// passes, as SQL's CHECK lets it.
fn check_row(checks: &[Check], table: &TableInfo, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<()> {
    check_row_of(checks, &table.db, &table.name, row, ctx)
}

/// [`check_row`] for the table `db`.`name`; `row` in the order of its
/// `TableInfo::columns`.
pub(crate) fn check_row_of(
    checks: &[Check],
    db: &str,
    name: &str,
    row: &[Val],
    ctx: &mut Ctx<'_>,
) -> SqlResult<()> {
    for c in checks {
        let truth = c.cond.eval(row, ctx)?.truth();
        match &c.view {
            // A view shows a row whose WHERE is TRUE only.
            Some((view_db, view)) if truth != Some(true) => {
                return Err(SqlError::new(
                    codes::VIEW_CHECK_FAILED,
                    format!("CHECK OPTION failed `{view_db}`.`{view}`"),
                ));
            }
            None if truth == Some(false) => {
                return Err(SqlError::new(
                    codes::CONSTRAINT_FAILED,
                    format!("CONSTRAINT `{}` failed for `{db}`.`{name}`", c.name),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The unquoted word DEFAULT as a value (`VALUES (DEFAULT)`, `SET c =
/// DEFAULT`).
pub(crate) fn is_default_word(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// `SET c = DEFAULT` of column `at` (of `table.columns`): its default as
/// an INSERT would fill it (the statement's time, an expression's value,
/// the stored default or NULL); 1364 for a NOT NULL column without one,
/// as MariaDB's.
pub(super) fn default_assigned(
    scope: &mut crate::engine::expr::Scope<'_>,
    table: &TableInfo,
    at: usize,
    environment: &crate::engine::expr::Env,
) -> SqlResult<Expr> {
    use crate::engine::expr::DefaultOf;
    let col = &table.columns[at];
    match super::column_default(table, col, environment.tz_secs) {
        DefaultOf::Now(_) => Ok(Expr::Lit(now_value(
            environment.now_micros,
            environment.tz_secs,
        ))),
        DefaultOf::Expr(text) => scope.lower(&crate::engine::ddl::parse_default(&text)?),
        DefaultOf::Value(v) => Ok(Expr::Lit(v)),
        DefaultOf::Utc { micros, fsp } => Ok(crate::engine::expr::utc_default(micros, fsp)),
        DefaultOf::Missing => Err(SqlError::new(
            codes::NO_DEFAULT_FOR_FIELD,
            format!("Field '{}' doesn't have a default value", col.name),
        )),
    }
}

/// The statement's time as a DATETIME value in the session's time zone.
pub(crate) fn now_value(now_micros: i64, tz_secs: i64) -> Val {
    match crate::engine::expr::value::datetime_of_micros(now_micros + tz_secs * 1_000_000) {
        Some((d, t)) => Val::DateTime(d, t),
        None => Val::Null,
    }
}

/// The WHERE (split: what the read tests, and the conjuncts that run
/// correlated subqueries, tested after), ORDER BY and LIMIT of an
/// UPDATE/DELETE, lowered.
pub(super) struct Targets {
    pub cond: Option<Expr>,
    pub late: Option<Expr>,
    pub order: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
}

impl Targets {
    /// Whether a correlated subquery runs in the late conjuncts or the
    /// ORDER BY.
    fn has_sub(&self) -> bool {
        self.late.is_some() || self.order.iter().any(|(e, _)| e.has_sub())
    }
}

fn lower_targets(
    conn: &Conn<'_>,
    table: &Arc<TableInfo>,
    alias: &str,
    selection: Option<&ast::Expr>,
    order_by: &[ast::OrderByExpr],
    limit: Option<&ast::Expr>,
    placeholders: &[Location],
) -> SqlResult<Targets> {
    let columns = table_scope(table, alias);
    with_scope(conn, columns, placeholders, |scope| {
        scope.clause = "WHERE";
        scope.single_table_write = true;
        let cond = selection
            .map(|w| {
                let lowered = scope.lower_write_condition(w)?;
                let c = fold_same_column(scope, lowered, false);
                Ok::<_, SqlError>(table_subquery_conjuncts_per_row(w, c))
            })
            .transpose()?;
        scope.clause = "ORDER BY";
        let order = order_by
            .iter()
            .map(|o| {
                Ok((
                    scope.lower(&o.expr)?,
                    matches!(o.options.sort, Some(ast::OrderBySort::Desc)),
                ))
            })
            .collect::<SqlResult<Vec<_>>>()?;
        let limit = limit.map(|l| scope.lower(l)).transpose()?;
        let (cond, late) = match cond {
            Some(c) if c.has_sub() => {
                // A conjunct after a subquery's that may warn stays after
                // it: MariaDB evaluates them in order, a row at a time, so
                // it is not evaluated for a row the subquery rejects (its
                // warning would fail a strict write).
                let mut after_sub = false;
                let (late, early): (Vec<&Expr>, Vec<&Expr>) =
                    c.conjuncts().into_iter().partition(|x| {
                        after_sub |= x.has_sub();
                        after_sub && (x.has_sub() || !plan::quiet(x, &|e| scope.kind(e)))
                    });
                let and = |items: Vec<&Expr>| Expr::and_of(items.into_iter().cloned());
                (and(early), and(late))
            }
            other => (other, None),
        };
        Ok(Targets {
            cond,
            late,
            order,
            limit,
        })
    })
}

/// An UPDATE's or DELETE's lowered WHERE `cond` (written `written`) with
/// each conjunct (or disjunct of a conjunct's OR:
/// [`table_subquery_per_row`]) that is a constant made of a subquery that
/// reads a table (`12 = (SELECT MAX(x) FROM s)`) tested per row in its
/// place (`Func::PerRow`): MariaDB's UPDATE does not evaluate such a constant
/// before the rows, so `b < a AND 12 = (SELECT …)` tests `b < a` on each
/// row first (and a strict UPDATE fails on its warning). Its SELECT
/// does; so does Skarv's. Conjuncts that do not line up with the written
/// ones (folded away) leave the WHERE as it is, and so does a WHERE of one
/// conjunct, constant: MariaDB reads that one before the rows, its
/// warnings only warnings (`WHERE EXISTS (SELECT … FROM s) XOR 'a' = 5`
/// updates nothing with 1292; DML seed 157), where `… AND 1 = 1` is read
/// per row and fails.
fn table_subquery_conjuncts_per_row(written: &ast::Expr, cond: Expr) -> Expr {
    // Most WHEREs have no constant part left (`WHERE id = ?`): no lists
    // made for them.
    fn any_constant(e: &Expr) -> bool {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => any_constant(a) || any_constant(b),
            other => other.is_constant(),
        }
    }
    if !any_constant(&cond) {
        return cond;
    }
    let mut asts = Vec::new();
    crate::engine::expr::split_and(written, &mut asts);
    if asts.len() == 1 && cond.is_constant() {
        return cond;
    }
    let lowered = cond.conjuncts();
    if lowered.len() != asts.len() {
        return cond;
    }
    let mut changed = false;
    let per_row: Vec<Expr> = lowered
        .into_iter()
        .zip(asts)
        .map(|(c, w)| table_subquery_per_row(c, w, &mut changed))
        .collect();
    if !changed {
        return cond;
    }
    Expr::and_of(per_row).unwrap_or(cond)
}

/// A conjunct `c` (written `written`) of [`table_subquery_conjuncts_per_row`]:
/// as `Func::PerRow` when it is a constant made of a subquery that reads a
/// table, else with each such disjunct of an OR so (DML seed 215: `b < a
/// OR 3 < (SELECT MAX(x) FROM s)` tests `b < a` on each row first, and a
/// strict UPDATE fails on its warning, where folding the subquery's side
/// first never tested it).
fn table_subquery_per_row(c: &Expr, written: &ast::Expr, changed: &mut bool) -> Expr {
    let mut w = written;
    while let ast::Expr::Nested(inner) = w {
        w = inner;
    }
    let reads_table = || {
        super::subquery::find(w, 0)
            .iter()
            .any(|q| match q.body.as_ref() {
                ast::SetExpr::Select(s) => !s.from.is_empty(),
                _ => true,
            })
    };
    match (c, w) {
        (c, _) if c.is_constant() && reads_table() => {
            *changed = true;
            Expr::Func(crate::engine::expr::Func::PerRow, vec![c.clone()])
        }
        (
            Expr::Or(a, b),
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Or,
                right,
            },
        ) => Expr::Or(
            Box::new(table_subquery_per_row(a, left, changed)),
            Box::new(table_subquery_per_row(b, right, changed)),
        ),
        (c, _) => c.clone(),
    }
}

/// A WHERE with a column compared with itself folded as MariaDB's
/// optimizer folds it before any row is read (`remove_eq_conds`): `c <=> c`
/// is true, `c < c`, `c > c`, `c <> c` false (never true: NULL of a NULL
/// `c`, which a WHERE's AND and OR filter as false), and for a NOT NULL
/// column `c = c`, `c <= c`, `c >= c` true; then an OR with a true side is
/// true and an AND with a false side false, so their other side is never
/// evaluated (its warnings, which fail a strict UPDATE or DELETE, never
/// come: `WHERE s IN ('a', 3) OR id >= id` updates every row; DML seed
/// 229: `'Banana' < id AND a < a` of a NULL-able `a` reads nothing). In a
/// join's WHERE (`joined`) `c = c`, `c <= c` and `c >= c` stay: an outer
/// join's NOT NULL column may be NULL there.
pub(super) fn fold_same_column(
    scope: &crate::engine::expr::Scope<'_>,
    e: Expr,
    joined: bool,
) -> Expr {
    use crate::engine::expr::{CmpOp, Val};
    let truth = |t: bool| Expr::Lit(Val::Int(i64::from(t)));
    match e {
        Expr::Cmp(op, a, b, c) => match (&*a, &*b) {
            (Expr::Col(x), Expr::Col(y)) if x == y => match op {
                CmpOp::NullSafeEq => truth(true),
                CmpOp::Lt | CmpOp::Gt | CmpOp::Ne => truth(false),
                _ if joined || scope.nullable(&a) => Expr::Cmp(op, a, b, c),
                CmpOp::Eq | CmpOp::Le | CmpOp::Ge => truth(true),
            },
            _ => Expr::Cmp(op, a, b, c),
        },
        Expr::Or(a, b) => fold_junction(scope, *a, *b, true, Expr::Or, joined),
        Expr::And(a, b) => fold_junction(scope, *a, *b, false, Expr::And, joined),
        // NOT pushed down first, as MariaDB's parser pushes it (its
        // `negate_expression`): `NOT (y = y)` is `y <> y`, false before
        // the rows, and `NOT (… OR y = y)` with it (CREATE … SELECT seed
        // 26 with --nulls).
        Expr::Not(inner) => match crate::engine::plan::pushed_negation(&inner) {
            Some(pushed) => fold_same_column(scope, pushed, joined),
            None => match *inner {
                Expr::Cmp(op, a, b, c) if matches!((&*a, &*b), (Expr::Col(x), Expr::Col(y)) if x == y) =>
                {
                    let opposite = match op {
                        CmpOp::Eq => CmpOp::Ne,
                        CmpOp::Ne => CmpOp::Eq,
                        CmpOp::Lt => CmpOp::Ge,
                        CmpOp::Le => CmpOp::Gt,
                        CmpOp::Gt => CmpOp::Le,
                        CmpOp::Ge => CmpOp::Lt,
                        CmpOp::NullSafeEq => return truth(false),
                    };
                    fold_same_column(scope, Expr::Cmp(opposite, a, b, c), joined)
                }
                other => Expr::Not(Box::new(other)),
            },
        },
        other => other,
    }
}

/// An OR (`absorbing` true: a true side makes it true, a false one is
/// left out) or an AND (`absorbing` false: a false side makes it false, a
/// true one is left out) of `a` and `b`, each folded first
/// ([`fold_same_column`]); `join` makes it when neither side decides.
fn fold_junction(
    scope: &crate::engine::expr::Scope<'_>,
    a: Expr,
    b: Expr,
    absorbing: bool,
    join: fn(Box<Expr>, Box<Expr>) -> Expr,
    joined: bool,
) -> Expr {
    use crate::engine::expr::Val;
    let is = |e: &Expr, t: bool| matches!(e, Expr::Lit(Val::Int(v)) if *v == i64::from(t));
    let (a, b) = (
        fold_same_column(scope, a, joined),
        fold_same_column(scope, b, joined),
    );
    // A side that compares a BIGINT column with a string stays
    // for the WHERE's fold (`plan::fold_constants`) to read that string,
    // as MariaDB converts it before its optimizer drops the side (`'fig'
    // = u OR 1` warns: DML seed 48 with --nulls).
    let reads_text = |e: &Expr| {
        let mut found = false;
        e.each(&mut |x| {
            if let Expr::Cmp(_, l, r, _) = x {
                found |= matches!((&**l, &**r), (Expr::Col(c), Expr::Lit(Val::Str(_)))
                | (Expr::Lit(Val::Str(_)), Expr::Col(c))
                if scope.columns.get(*c).is_some_and(|c| {
                    matches!(c.kind, crate::engine::expr::Kind::Int { .. })
                        && c.meta.ty == crate::value::ColumnType::LongLong
                }));
            }
        });
        found
    };
    // So does one with a constant read before the rows, as MariaDB builds
    // its equalities before it folds (`d = 'x' AND 0` warns).
    let is_time = |c: usize| {
        scope
            .columns
            .get(c)
            .is_some_and(|c| c.meta.ty == crate::value::ColumnType::Time)
    };
    // And a constant one with an IN list, which MariaDB evaluates before
    // it folds the rest (a strict INSERT … SELECT fails on `'x' IN ('a',
    // 3)` beside `b <> b`: CREATE … SELECT seed 52); kept first, so that
    // the fold reads it before the side that decides.
    let constant_in = |e: &Expr| {
        let mut found = false;
        e.each(&mut |x| found |= matches!(x, Expr::In(..)));
        found && e.is_constant()
    };
    let kept = |e: &Expr| {
        reads_text(e) || constant_in(e) || crate::engine::plan::reads_before_rows(e, &is_time)
    };
    if is(&a, absorbing) && kept(&b) {
        join(Box::new(b), Box::new(a))
    } else if is(&b, absorbing) && kept(&a) {
        join(Box::new(a), Box::new(b))
    } else if is(&a, absorbing) || is(&b, absorbing) {
        Expr::Lit(Val::Int(i64::from(absorbing)))
    } else if is(&a, !absorbing) {
        b
    } else if is(&b, !absorbing) {
        a
    } else {
        join(Box::new(a), Box::new(b))
    }
}

/// Whether a table has a unique index besides its primary key.
pub(super) fn has_unique(def: &schema::TableDef) -> bool {
    def.indexes
        .iter()
        .any(|i| i.kind == schema::IndexKind::Unique)
}

/// The evaluation context of an UPDATE or DELETE: KILL QUERY (`killed`)
/// and `max_statement_time` (`deadline`) end its loops, `strict` makes a
/// warning its error, `ignore` (IGNORE) stores what does not fit as a
/// non-strict mode would.
pub(crate) fn write_ctx<'a>(
    params: &'a [Val],
    env: &'a crate::engine::expr::Env,
    killed: &'a std::sync::atomic::AtomicBool,
    deadline: Option<crate::engine::expr::eval::Deadline>,
    strict: bool,
    ignore: bool,
) -> Ctx<'a> {
    let mut ctx = Ctx::new(params, env);
    ctx.killed = Some(killed);
    ctx.deadline = deadline;
    ctx.strict = strict;
    ctx.ignore = ignore;
    ctx
}

/// Ends an UPDATE or DELETE: its transaction finished with `result`
/// (an autocommit statement's committed), then the warnings its context
/// `ctx` holds kept as the statement's.
pub(super) fn finish_write<'s, T>(
    conn: &mut Conn<'s>,
    tx: Transaction<'s>,
    result: SqlResult<T>,
    ctx: Ctx<'_>,
) -> SqlResult<T> {
    let warnings = ctx.warnings;
    let done = txn::finish(conn, tx, result)?;
    for (code, message) in warnings {
        keep_warning(conn, code, message);
    }
    Ok(done)
}

/// An UPDATE's or DELETE's LIMIT as a row count.
pub(super) fn limit_of(limit: Option<&Expr>, ctx: &mut Ctx<'_>) -> SqlResult<Option<usize>> {
    match limit {
        None => Ok(None),
        Some(l) => match l.eval(&[], ctx)? {
            Val::Int(i) if i >= 0 => Ok(Some(i as usize)),
            Val::UInt(u) => Ok(Some(usize::try_from(u).unwrap_or(usize::MAX))),
            _ => Err(SqlError::new(
                codes::WRONG_ARGUMENTS,
                "Incorrect arguments to LIMIT",
            )),
        },
    }
}

/// A row an UPDATE or DELETE touches: its values and its primary key.
pub(super) type TargetRow = (Vec<Val>, Vec<Value>);

/// An UPDATE's or DELETE's WHERE folded as MariaDB's optimizer reads it
/// before the rows: constants first, then the string literals compared
/// with number columns (what its first row reads, their warnings the
/// rows'). Also how many warnings `ctx` holds after the first fold (the
/// planning's).
fn fold_target_cond<'e>(
    table: &TableInfo,
    cond: Option<&'e Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Option<std::borrow::Cow<'e, Expr>>, usize)> {
    use std::borrow::Cow;
    let folded = match plan::fold_constants(table, cond, false, ctx)? {
        Some(Cow::Owned(c)) => Some(c),
        Some(Cow::Borrowed(_)) => None,
        None => return Ok((None, ctx.warnings.len())),
    };
    let planned = ctx.warnings.len();
    let cond = match folded {
        Some(folded) => {
            plan::fold_row_constants(table, Some(&folded), ctx)?.map(|c| Cow::Owned(c.into_owned()))
        }
        None => plan::fold_row_constants(table, cond, ctx)?,
    };
    Ok((cond, planned))
}

/// The rows an UPDATE or DELETE may touch, locked: those its early
/// conjuncts pass (a LIMIT stops the read when nothing is tested or
/// sorted after it), the LIMIT's value, and how many of `ctx`'s warnings
/// the planning left (a constant conjunct's, which MariaDB's optimizer
/// evaluates before strict mode's `abort_on_warning` holds), and whether
/// the WHERE folded to false (MariaDB's "Impossible WHERE", whose UPDATE
/// answers with no info line).
fn fetch_targets(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    targets: &mut Targets,
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Vec<TargetRow>, Option<usize>, usize, bool)> {
    // The late conjuncts' constant parts are evaluated once too, with the
    // others' (`WHERE EXISTS (…) OR 'a' IN ('b', 3)`: MariaDB's optimizer
    // evaluates the constant, its warning not a row's).
    if targets.late.is_some() {
        targets.late = match plan::fold_constants(table, targets.late.as_ref(), false, ctx)? {
            Some(std::borrow::Cow::Borrowed(_)) => targets.late.take(),
            folded => folded.map(std::borrow::Cow::into_owned),
        };
    }
    let Targets {
        cond,
        late,
        order,
        limit,
    } = &*targets;
    let limit = limit_of(limit.as_ref(), ctx)?;
    // LIMIT 0 reads nothing and evaluates no condition (nor warns), as
    // MariaDB's UPDATE and DELETE end before their optimizer runs.
    if limit == Some(0) {
        return Ok((Vec::new(), limit, ctx.warnings.len(), false));
    }
    let (cond, planned) = fold_target_cond(table, cond.as_ref(), ctx)?;
    let impossible = matches!(cond.as_deref(), Some(Expr::Lit(Val::Int(0))));
    let before_access = ctx.warnings.len();
    let (access, filter) = plan::access(table, cond.as_deref(), ctx)?;
    if ctx.env.safe_updates && limit.is_none() && matches!(access, plan::Access::Scan) {
        return Err(safe_updates_error());
    }
    // The range optimizer's (a key's string bound), which MariaDB's UPDATE
    // and DELETE run before strict mode holds: a warning, not the error.
    for (code, _) in &mut ctx.warnings[before_access..] {
        *code |= crate::engine::expr::eval::PLANNED_BIT;
    }
    if let Some(rows) = claimed_targets(
        tx,
        table,
        &access,
        &filter,
        cond.as_deref(),
        targets,
        limit,
        ctx,
    )? {
        return Ok((rows, limit, planned, impossible));
    }
    let stop = if order.is_empty() && late.is_none() {
        limit
    } else {
        None
    };
    let rows = fetch(
        tx,
        table,
        &access,
        filter,
        Some(RowLock::EXCLUSIVE),
        false,
        cond.as_deref(),
        ctx,
        stop,
        None,
        None,
    )?;
    Ok((rows, limit, planned, impossible))
}

/// The rows of a single-table UPDATE or DELETE with a LIMIT over a scan,
/// claimed in its order (`claim`: a job queue's `UPDATE … WHERE owner IS
/// NULL ORDER BY id LIMIT 1`, which a locking scan turns into deadlocks
/// between its workers). None when the statement is not one of those, or
/// its transaction may have written: its own writes are not among a
/// committed read's candidates (then the locking scan, as before).
#[allow(clippy::too_many_arguments)]
fn claimed_targets(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &plan::Access,
    filter: &Option<skarv_client::Filter>,
    cond: Option<&Expr>,
    targets: &Targets,
    limit: Option<usize>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<TargetRow>>> {
    let Some(limit) = limit.filter(|n| *n <= claim::CLAIM_ROWS_MAX) else {
        return Ok(None);
    };
    if targets.late.is_some()
        || !claim::steady(cond)
        || tx.may_hold_locks()
        || !matches!(access, plan::Access::Range { .. } | plan::Access::Scan)
    {
        return Ok(None);
    }
    let order = &targets.order;
    let columns = super::columns_named(table, cond.into_iter().chain(order.iter().map(|(e, _)| e)));
    if !claim::can_claim(table, columns.as_deref()) {
        return Ok(None);
    }
    let c = claim::Claim {
        table,
        lock: RowLock::EXCLUSIVE,
        cond,
        may_unlock: claim::may_unlock(tx, table),
        columns: None,
        tested: true,
    };
    // Under an ORDER BY a scan reads the ordered index that gives it.
    let index_read = match access {
        plan::Access::Scan => plan::ordered_index_for(table, order),
        _ => None,
    };
    let access = index_read.as_ref().unwrap_or(access);
    let from = claim::Candidates {
        table,
        access,
        filter,
        cond,
        columns: columns.as_deref(),
    };
    if order.is_empty() {
        return Ok(Some(claim::claim_unordered(tx, &c, limit, ctx, &from)?));
    }
    // Candidates in ORDER BY's order, ties by primary key (so that every
    // claim orders the same rows alike); each partition's first ones
    // when an ordered index gives the order.
    let def = table.native.def();
    let along = match plan::partition_keys(table, cond, ctx)? {
        None if plan::follows_index(table, order, access) => Some((def.partitions, order[0].1)),
        _ => None,
    };
    let mut in_order = |found: claim::Rows, ctx: &mut Ctx<'_>| {
        let mut keyed = Vec::with_capacity(found.len());
        for (row, key) in found {
            let by = order
                .iter()
                .map(|(e, _)| e.eval(&row, ctx))
                .collect::<SqlResult<Vec<_>>>()?;
            keyed.push((by, key_bytes(def, &key), key));
        }
        keyed.sort_by(|a, b| order_cmp(order, &a.0, &b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(keyed.into_iter().map(|(_, _, key)| key).collect())
    };
    let rows = claim::claim_in_order(tx, &c, limit, ctx, &from, along, &mut in_order)?;
    Ok(Some(rows))
}

/// ORDER BY's comparison of two rows' order values (NULLs first, as
/// MariaDB sorts them ascending).
fn order_cmp(order: &[(Expr, bool)], a: &[Val], b: &[Val]) -> std::cmp::Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let env = crate::engine::expr::eval::Env::default();
        let mut c = Ctx::new(&[], &env);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => compare(x, y, Some(schema::Collation::Utf8mb4GeneralCi), &mut c),
        };
        let o = if order[i].1 { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The first AUTO_INCREMENT value at or above `first` of the form
/// `offset + k × step` (MariaDB's `compute_next_insert_id` of `first - 1`).
/// An offset larger than the step is ignored, as MySQL's manual says
/// (InnoDB's answers then follow no rule: docs/sql.md).
fn auto_increment_at(first: u64, step: u64, offset: u64) -> u64 {
    if step <= 1 {
        return first;
    }
    let offset = if offset > step { 1 } else { offset };
    let last = first.saturating_sub(1);
    (last.saturating_add(step - offset) / step)
        .saturating_mul(step)
        .saturating_add(offset)
}

/// `sql_safe_updates`' refusal of an UPDATE or DELETE that would read a
/// table whole (MariaDB's words, for DELETE too).
pub(super) fn safe_updates_error() -> SqlError {
    SqlError::new(
        codes::UPDATE_WITHOUT_KEY_IN_SAFE_MODE,
        "You are using safe update mode and you tried to update a table without a WHERE \
         that uses a KEY column",
    )
}

/// The errors of a value that does not go into its column (or of making
/// it), after which a failed INSERT … SELECT or UPDATE looks for the one
/// MariaDB meets first ([`first_error_row_by_row`],
/// [`first_update_error_row_by_row`]). Not a duplicate key: Skarv's own
/// run meets one only once every value is made, so no value failed.
const VALUE_ERRORS: [u16; 9] = [
    codes::BAD_NULL,
    codes::OUT_OF_RANGE,
    codes::DATA_OUT_OF_RANGE,
    codes::TRUNCATED_WRONG_VALUE,
    codes::WARN_DATA_TRUNCATED,
    codes::DATA_TOO_LONG,
    codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
    codes::DIVISION_BY_ZERO,
    codes::ILLEGAL_VALUE_FOR_TYPE,
];

/// The error a strict INSERT … SELECT from one table that failed would
/// meet first as MariaDB runs it, row by row in key order, each row's
/// values stored into `targets` as [`write_rows`] stores them
/// ([`super::select::first_error_in_key_order`]). None: not found, and
/// the statement's own error stands.
fn first_error_row_by_row(
    conn: &mut Conn<'_>,
    source: &ast::Query,
    params: &[Val],
    placeholders: &[Location],
    (table, targets): (&Arc<TableInfo>, &[usize]),
    replace: bool,
) -> Option<SqlError> {
    let auto_col = table.columns.iter().position(|c| c.auto_increment);
    let def = table.native.def();
    // A duplicate key is looked for when the row gives every column of
    // the primary key, and of each unique index that one left NULL does
    // not keep out of the way (not REPLACE's).
    let given = |native: &usize| {
        table
            .sql_column(*native)
            .is_some_and(|at| targets.contains(&at) && Some(at) != auto_col)
    };
    let left_null = |native: &usize| {
        table.sql_column(*native).is_some_and(|at| {
            let c = &table.columns[at];
            !targets.contains(&at)
                && c.nullable
                && c.default.is_none()
                && !c.default_now
                && !c.default_expr
        })
    };
    let unique_known = def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
        .all(|i| i.columns.iter().all(given) || i.columns.iter().any(left_null));
    let duplicates =
        !replace && !table.hidden_key && def.primary_key.iter().all(given) && unique_known;
    let mut keys = ChunkKeys::new(def);
    let mut store = |tx: &Transaction<'_>, n: usize, values: Vec<Val>, ctx: &mut Ctx<'_>| {
        if values.len() != targets.len() {
            return Ok(());
        }
        let mut row = Vec::with_capacity(values.len());
        ctx.strict = true;
        let stored = values.iter().zip(targets).try_for_each(|(v, &at)| {
            let column = &table.columns[at];
            let generated =
                Some(at) == auto_col && (v.is_null() || matches!(v, Val::Int(0) | Val::UInt(0)));
            if generated {
                return Ok(());
            }
            let target = Target {
                column,
                db: &table.db,
                table: &table.name,
                row: n + 1,
                tz_secs: ctx.env.tz_secs,
            };
            row.push((column.native, super::convert::store(v, &target, ctx)?));
            Ok(())
        });
        ctx.strict = false;
        stored?;
        if let Some(error) = strict_error(ctx) {
            return Err(error);
        }
        if duplicates {
            if let Some((error, _)) = unique_holder(tx, table, &row)? {
                return Err(error);
            }
            if let Some(error) = keys.taken(table, &row, true) {
                return Err(error);
            }
        }
        Ok(())
    };
    let mark = conn.session.diagnostics_mark();
    let found =
        super::select::first_error_in_key_order(conn, source, params, placeholders, &mut store);
    conn.session.rewind_diagnostics(mark);
    found.ok().flatten()
}

/// The error a strict UPDATE that failed would meet first as MariaDB
/// runs it: row by row in key order, each tested by WHERE and its new
/// values made (`changes_of`) before the next is read, where Skarv's run
/// tests every row first (`WHERE a < f OR b = a` warning of a later
/// row's text before the first row's `MOD(f, 0)`). Run once the
/// statement has failed (it reads the rows again). None: not found, and
/// the statement's own error stands.
fn first_update_error_row_by_row(
    conn: &mut Conn<'_>,
    table: &Arc<TableInfo>,
    targets: &Targets,
    assignments: &[(usize, Expr)],
    checks: &[Check],
    params: &[Val],
) -> Option<SqlError> {
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    ctx.strict = true;
    let mark = conn.session.diagnostics_mark();
    let found = (|| -> SqlResult<Option<SqlError>> {
        let limit = match &targets.limit {
            Some(l) => match l.eval(&[], &mut ctx)? {
                Val::Int(i) if i >= 0 => usize::try_from(i).unwrap_or(usize::MAX),
                Val::UInt(u) => usize::try_from(u).unwrap_or(usize::MAX),
                _ => return Ok(None),
            },
            None => usize::MAX,
        };
        let (cond, planned) = fold_target_cond(table, targets.cond.as_ref(), &mut ctx)?;
        let rows_warnings = ctx.warnings.split_off(planned.min(ctx.warnings.len()));
        if let Err(error) = abort_on_warning(true, rows_warnings) {
            return Ok(Some(error));
        }
        let (access, _) = plan::access(table, cond.as_deref(), &mut ctx)?;
        ctx.warnings.clear();
        let tx = txn::take(conn)?;
        let found = fetch(
            &tx, table, &access, None, None, false, None, &mut ctx, None, None, None,
        )
        .and_then(|mut rows| {
            super::select::in_primary_key_order(table, &mut rows);
            if primary_key_order(table, &targets.order) == Some(true) {
                rows.reverse();
            }
            let updates = (assignments, checks, limit);
            let ordered = !targets.order.is_empty();
            first_update_error_of_rows(
                &tx,
                table,
                (cond.as_deref(), ordered),
                rows,
                updates,
                &mut ctx,
            )
        });
        txn::finish(conn, tx, found)
    })();
    conn.session.rewind_diagnostics(mark);
    found.ok().flatten()
}

/// Whether an UPDATE's ORDER BY is the primary key's order (its first
/// columns, all ascending: `Some(false)`, or all descending:
/// `Some(true)`), in which MariaDB reads and changes the rows one at a
/// time by the key (a filesort of another ORDER BY tests every row's
/// WHERE first). None: another order, or none written.
fn primary_key_order(table: &TableInfo, order: &[(Expr, bool)]) -> Option<bool> {
    let key = &table.native.def().primary_key;
    let (_, first_desc) = order.first()?;
    let on_key = !table.hidden_key
        && order.len() <= key.len()
        && order.iter().zip(key).all(|((e, desc), native)| {
            desc == first_desc && matches!(e, Expr::Col(c) if table.sql_column(*native) == Some(*c))
        });
    on_key.then_some(*first_desc)
}

/// [`first_update_error_row_by_row`] of the rows read, in key order. A
/// row's new key values are held as MariaDB's table holds them by then:
/// the rows before it by their new values (`earlier`), the others as
/// stored, so a value an earlier row took or a later row still holds is
/// the row's 1062. With an ORDER BY (`ordered`) the rows were tested by
/// WHERE before the first was changed, as MariaDB reads them all before
/// it updates one: the condition's warnings are no error then (`WHERE yr
/// > 'abc' ORDER BY id` fails on a value's 1264: DML seed 455).
fn first_update_error_of_rows(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    (cond, ordered): (Option<&Expr>, bool),
    rows: Vec<TargetRow>,
    (assignments, checks, limit): (&[(usize, Expr)], &[Check], usize),
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<SqlError>> {
    let mut keys = ReplayedKeys::new(table.native.def());
    let mut matched = 0usize;
    // A row's number counts the rows read, as MariaDB's does without an
    // ORDER BY (Skarv's own run counts those matched).
    for (read, (old, _)) in rows.into_iter().enumerate() {
        if matched >= limit {
            break;
        }
        let tested = match (cond, ordered) {
            (Some(c), true) => {
                let pass = c.test(&old, ctx);
                ctx.warnings.clear();
                pass
            }
            _ => replayed_test(cond, &old, ctx),
        };
        match tested {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => return Ok(Some(error)),
        }
        matched += 1;
        // Of an ORDER BY's second pass, the rows it updates.
        let row = if ordered { matched } else { read + 1 };
        let changes = match changes_of(table, &old, 0, assignments, checks, ctx, row) {
            Ok(changes) => changes,
            Err(error) => return Ok(Some(error)),
        };
        if let Some(error) = strict_error(ctx) {
            return Ok(Some(error));
        }
        if let Some(error) = keys.check(tx, table, &old, &changes)? {
            return Ok(Some(error));
        }
    }
    Ok(None)
}

/// The key values of an UPDATE's rows replayed one at a time, as MariaDB
/// changes them: the rows changed so far hold their new values
/// (`earlier`), the others their stored ones.
pub(super) struct ReplayedKeys {
    earlier: ChunkKeys,
    /// The rows changed so far, by their primary key's bytes.
    done: std::collections::HashSet<Vec<u8>>,
}

impl ReplayedKeys {
    pub(super) fn new(def: &schema::TableDef) -> ReplayedKeys {
        ReplayedKeys {
            earlier: ChunkKeys::new(def),
            done: std::collections::HashSet::new(),
        }
    }

    /// The 1062 of the row `old` of `table` given `changes` when a value
    /// of its keys a row changed before took, or a row not changed yet
    /// still holds; else the row counts as changed.
    pub(super) fn check(
        &mut self,
        tx: &Transaction<'_>,
        table: &Arc<TableInfo>,
        old: &[Val],
        changes: &[(usize, Value)],
    ) -> SqlResult<Option<SqlError>> {
        let def = table.native.def();
        let row = row_after(table, old, changes);
        let key = primary_key_of(def, &row_after(table, old, &[]));
        if let Some(error) = self.earlier.taken(table, &row, true) {
            return Ok(Some(error));
        }
        if let Some(error) = held_by_later(tx, table, &row, &key, changes, &self.done)? {
            return Ok(Some(error));
        }
        self.done.insert(key_bytes(def, &key));
        Ok(None)
    }
}

/// A primary key's bytes (empty for one that does not encode: read from
/// a row, it does); also the order every claim shares, that ties of an
/// ORDER BY are broken by (two claims lock tied rows alike).
pub(super) fn key_bytes(def: &schema::TableDef, key: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = schema::key::KeyEncoder::primary_key(def).encode(key, &mut bytes);
    bytes
}

/// The 1062 of `row` (primary key `key` before its `changes`) when a row
/// not yet updated (not in `done`) holds one of the key values the
/// changes give it.
fn held_by_later(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    row: &[(usize, Value)],
    key: &[Value],
    changes: &[(usize, Value)],
    done: &std::collections::HashSet<Vec<u8>>,
) -> SqlResult<Option<SqlError>> {
    let def = table.native.def();
    let changed = |columns: &[usize]| columns.iter().any(|c| changes.iter().any(|(p, _)| p == c));
    let mut probes = Vec::new();
    if changed(&def.primary_key) {
        let error = skarv_client::Error::new(native::DUPLICATE_KEY, "primary key");
        probes.push((plan::Access::Keys(vec![primary_key_of(def, row)]), error));
    }
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
    {
        if let (true, Some(values)) = (changed(&index.columns), unique_key_of(index, row)) {
            let access = plan::Access::Unique {
                index: index.name.clone(),
                keys: vec![values],
            };
            let error = skarv_client::Error::new(
                native::UNIQUE_VIOLATION,
                format!("unique index `{}`", index.name),
            );
            probes.push((access, error));
        }
    }
    let env = crate::engine::expr::Env::default();
    for (probe, error) in probes {
        let mut ctx = Ctx::new(&[], &env);
        let lock = Some(RowLock::SHARED);
        let hits = fetch(
            tx, table, &probe, None, lock, false, None, &mut ctx, None, None, None,
        )?;
        if hits
            .iter()
            .any(|(_, pk)| pk.as_slice() != key && !done.contains(&key_bytes(def, pk)))
        {
            return Ok(Some(duplicate_error(table, row, &error)));
        }
    }
    Ok(None)
}

/// An INSERT … SELECT's query over one table that names no order, reading
/// the table in primary key order: MariaDB's InnoDB scans its clustered
/// index, so the auto-increment values the rows get, and which of them
/// REPLACE keeps where they collide, follow the key (Skarv's scan goes
/// partition by partition). None for any other query (joins, grouping,
/// DISTINCT, a union, a view, a table without a primary key).
fn source_in_key_order(conn: &Conn<'_>, source: &ast::Query) -> Option<ast::Query> {
    if source.order_by.is_some() || source.with.is_some() {
        return None;
    }
    let ast::SetExpr::Select(select) = source.body.as_ref() else {
        return None;
    };
    let grouped = !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    if select.from.len() != 1
        || !select.from[0].joins.is_empty()
        || select.distinct.is_some()
        || select.having.is_some()
        || grouped
        || super::cte::has_aggregate(select)
    {
        return None;
    }
    let ast::TableFactor::Table { name, alias, .. } = &select.from[0].relation else {
        return None;
    };
    let table = table_of(conn, name).ok()?;
    if table.hidden_key {
        return None;
    }
    let qualifier = match alias {
        Some(a) => a.name.clone(),
        None => ast::Ident::new(last_ident(name)),
    };
    let def = table.native.def();
    let keys = def
        .primary_key
        .iter()
        .map(|&native| {
            let column = &table.columns[table.sql_column(native)?];
            Some(ast::OrderByExpr {
                expr: ast::Expr::CompoundIdentifier(vec![
                    qualifier.clone(),
                    ast::Ident::with_quote('`', column.name.as_str()),
                ]),
                options: ast::OrderByOptions {
                    sort: None,
                    nulls_first: None,
                },
                with_fill: None,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let mut keyed = source.clone();
    keyed.order_by = Some(ast::OrderBy {
        kind: ast::OrderByKind::Expressions(keys),
        interpolate: None,
    });
    Some(keyed)
}

/// Puts an UPDATE's rows in primary key order, the order MariaDB's
/// InnoDB reads them in: which row an UPDATE IGNORE leaves when two would
/// take one unique value, and which row's error a failing UPDATE reports,
/// are then MariaDB's (the data nodes return a scan's rows in hash order).
fn in_key_order(table: &TableInfo, rows: &mut Vec<TargetRow>) {
    if rows.len() < 2 {
        return;
    }
    let encoder = schema::key::KeyEncoder::primary_key(table.native.def());
    let mut keyed: Vec<(Vec<u8>, usize)> = rows
        .iter()
        .enumerate()
        .map(|(i, (_, key))| {
            let mut bytes = Vec::new();
            // A key that does not encode sorts first; it was read from a
            // row, so it does.
            let _ = encoder.encode(key, &mut bytes);
            (bytes, i)
        })
        .collect();
    keyed.sort_unstable();
    let mut taken: Vec<Option<TargetRow>> = rows.drain(..).map(Some).collect();
    rows.extend(keyed.into_iter().filter_map(|(_, i)| taken[i].take()));
}

/// Of the rows fetched, those the late conjuncts (correlated subqueries)
/// pass, in ORDER BY order, cut at LIMIT (each row with what goes with
/// it: its key, or a joined row's mark).
pub(super) fn order_targets<K>(
    mut rows: Vec<(Vec<Val>, K)>,
    targets: &Targets,
    limit: Option<usize>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<(Vec<Val>, K)>> {
    let Targets { late, order, .. } = targets;
    if let Some(late) = late {
        let mut kept = Vec::with_capacity(rows.len());
        for r in rows {
            ctx.check_killed()?;
            if late.test(&r.0, ctx)? {
                kept.push(r);
            }
        }
        rows = kept;
        if order.is_empty() {
            if let Some(l) = limit {
                rows.truncate(l);
            }
        }
    }
    if !order.is_empty() {
        let mut keyed = Vec::with_capacity(rows.len());
        for r in rows {
            let keys = order
                .iter()
                .map(|(e, _)| e.eval(&r.0, ctx))
                .collect::<SqlResult<Vec<_>>>()?;
            keyed.push((keys, r));
        }
        keyed.sort_by(|a, b| order_cmp(order, &a.0, &b.0));
        rows = keyed.into_iter().map(|(_, r)| r).collect();
        if let Some(l) = limit {
            rows.truncate(l);
        }
    }
    Ok(rows)
}

/// An error of [`with_per_row`], and the statement's transaction unless
/// the error ended it (rolled back).
pub(super) type PerRowError<'s> = (SqlError, Option<Transaction<'s>>);

/// Runs `f` (what an UPDATE/DELETE evaluates after its rows are read and
/// locked: late conjuncts, ORDER BY, SET) with a context whose
/// correlated subqueries run (`per_row`; else `f` gets `ctx` as it is).
///
/// Inside a transaction they read through the statement's own `tx`, lent
/// to the connection meanwhile, so they see its writes as InnoDB's do (a
/// transaction that wrote reads with a shared lock); an autocommit
/// statement's read in transactions of their own (read committed either
/// way). Nothing is written while they run, so a subquery that reads the
/// table changed (which MariaDB 10.3+ allows, MySQL refuses with 1093)
/// reads every row as it was before the statement, as MariaDB's do: it
/// reads them all before it writes.
pub(super) fn with_per_row<'s, R>(
    conn: &mut Conn<'s>,
    tx: Transaction<'s>,
    per_row: bool,
    ctx: &mut Ctx<'_>,
    placeholders: &[Location],
    f: impl FnOnce(&mut Ctx<'_>) -> SqlResult<R>,
) -> Result<(R, Transaction<'s>), PerRowError<'s>> {
    if !per_row {
        return match f(ctx) {
            Ok(v) => Ok((v, tx)),
            Err(e) => Err((e, Some(tx))),
        };
    }
    let params = ctx.params;
    let lend = txn::in_transaction(conn);
    let (loan, mut kept) = if lend {
        (txn::lend(conn, tx), None)
    } else {
        (0, Some(tx))
    };
    let result = {
        let runner = super::correlated::Runner::new(conn, placeholders, params);
        let mut c = ctx.child(params, &[], Some(&runner));
        let result = f(&mut c);
        ctx.absorb(c);
        result
    };
    if lend {
        kept = txn::take_back(conn, loan);
    }
    match (result, kept) {
        (Ok(v), Some(tx)) => Ok((v, tx)),
        (Err(e), tx) => Err((e, tx)),
        // A subquery that succeeded leaves the transaction open.
        (Ok(_), None) => Err((
            SqlError::new(
                codes::UNKNOWN,
                "the transaction ended while a correlated subquery ran",
            ),
            None,
        )),
    }
}

/// The one table a DELETE removes rows of: `DELETE FROM t …`, or the
/// multi-table form naming that table alone (`DELETE t FROM t WHERE …`,
/// which MariaDB runs as the single-table DELETE). None: a multi-table
/// DELETE (`super::multi`).
pub(super) fn delete_target(del: &ast::Delete) -> Option<&ast::TableWithJoins> {
    let from = match &del.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let single = match (del.tables.as_slice(), from.as_slice()) {
        ([], [_]) => true,
        ([named], [only]) => {
            // Compared by their parts' values, the named ones the last of
            // the table's: `t` names `db.t`.
            let named = crate::engine::expr::name_parts(named);
            let names_it = |name: &ast::ObjectName| {
                let parts = crate::engine::expr::name_parts(name);
                parts.len() >= named.len()
                    && parts[parts.len() - named.len()..]
                        .iter()
                        .zip(&named)
                        .all(|(a, b)| a.eq_ignore_ascii_case(b))
            };
            only.joins.is_empty()
                && matches!(&only.relation, ast::TableFactor::Table { name, alias: None, .. }
                    if names_it(name))
        }
        _ => false,
    };
    match from.as_slice() {
        [only] if single && del.using.is_none() && only.joins.is_empty() => Some(only),
        _ => None,
    }
}

/// The name a single-table UPDATE or DELETE knows its table by: its alias
/// (`UPDATE t AS x … WHERE x.id = 1`), else its name.
fn target_alias<'a>(from: &'a ast::TableWithJoins, table: &'a TableInfo) -> &'a str {
    match &from.relation {
        ast::TableFactor::Table {
            alias: Some(alias), ..
        } => &alias.name.value,
        _ => &table.name,
    }
}

fn single_table(from: &ast::TableWithJoins) -> SqlResult<&ast::ObjectName> {
    match &from.relation {
        ast::TableFactor::Table { name, .. } => Ok(name),
        other => Err(SqlError::unsupported(format_args!("{other}"))),
    }
}

fn update(
    conn: &mut Conn<'_>,
    up: &ast::Update,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    if super::multi::is_multi_update(up) {
        return super::multi::update(conn, up, params, placeholders);
    }
    let table =
        crate::engine::alter_copy::wait_writable(conn, table_of(conn, single_table(&up.table)?)?)?;
    let alias = target_alias(&up.table, &table).to_owned();
    super::subquery::prepare(conn, up, 0, placeholders, Some(params))?;
    let columns = table_scope(&table, &alias);
    super::correlated::plan(conn, up, 0, &columns, &[], placeholders)?;
    let environment = env(conn);
    let assignments = with_scope(conn, columns, placeholders, |scope| {
        scope.clause = "SET";
        up.assignments
            .iter()
            .map(|a| {
                let ast::AssignmentTarget::ColumnName(n) = &a.target else {
                    return Err(SqlError::unsupported("tuple assignments"));
                };
                let c = scope.resolve(None, &last_ident(n))?;
                if is_default_word(&a.value) {
                    return Ok((c, default_assigned(scope, &table, c, &environment)?));
                }
                let ty = table.columns.get(c).map(|column| &column.ty);
                let lowered = scope.lower(&a.value)?;
                let value = scope.stored(lowered);
                Ok((c, for_column(ty, &a.value, value)))
            })
            .collect::<SqlResult<Vec<_>>>()
    })?;
    let mut targets = lower_targets(
        conn,
        &table,
        &alias,
        up.selection.as_ref(),
        &up.order_by,
        up.limit.as_ref(),
        placeholders,
    )?;
    let per_row = targets.has_sub() || assignments.iter().any(|(_, e)| e.has_sub());
    // MariaDB's "Impossible WHERE" (a WHERE folded to false): it answers
    // before the update runs, with no info line.
    let mut impossible = matches!(
        targets.cond,
        Some(Expr::Lit(crate::engine::expr::Val::Int(0)))
    );
    let checks = lower_checks(conn, &table)?;
    let fk_checks = super::foreign::child_checks(conn, &table)?;
    let fk_actions = super::foreign::parent_actions(conn, &table)?;
    let info = Arc::clone(&conn.info);
    // UPDATE IGNORE (mended into the parser's `UPDATE OR IGNORE`): a value
    // that does not fit is stored as a non-strict sql_mode would, with a
    // warning; a row that fails a CHECK or would duplicate a unique key
    // is left as it is, as MariaDB's.
    let ignore = matches!(up.or, Some(ast::SqliteOnConflict::Ignore));
    let strict = conn.session.sql_mode_strict() && !ignore;
    let tx = txn::take(conn)?;
    let mut ctx = write_ctx(
        params,
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        strict,
        ignore,
    );
    let assignments: Vec<(usize, Expr)> = assignments
        .into_iter()
        .map(
            |(c, e)| match plan::read_bigint_texts(&table, &e, &mut ctx) {
                std::borrow::Cow::Borrowed(_) => (c, e),
                std::borrow::Cow::Owned(read) => (c, read),
            },
        )
        .collect();
    // The rows, read and locked; then what runs subqueries (see
    // `with_per_row`): the late conjuncts, the order and each row's
    // changes; then the writes.
    let mut planned_warnings = 0;
    let evaluated = match fetch_targets(&tx, &table, &mut targets, &mut ctx) {
        Err(e) => Err((e, Some(tx))),
        Ok((mut rows, limit, planned, folded_false)) => {
            planned_warnings = planned;
            impossible |= folded_false;
            let ordered = !targets.order.is_empty();
            if !ordered {
                in_key_order(&table, &mut rows);
            }
            let planned_warnings = &mut planned_warnings;
            with_per_row(conn, tx, per_row, &mut ctx, placeholders, |c| {
                let rows = order_targets(rows, &targets, limit, c)?;
                // MariaDB sorts an UPDATE … ORDER BY's rows before it
                // updates one: the conditions' warnings are not the
                // rows' then (a strict UPDATE only warns).
                if ordered {
                    *planned_warnings = c.warnings.len();
                }
                let mut out = Vec::with_capacity(rows.len());
                // The conditions' warnings are all in before the first
                // row's values (the read tests every row first); a value's
                // error comes after them, as MariaDB's first row compared
                // gives a constant's (`Func::WarnOnce`) and the rows it
                // read before the failing one gave theirs.
                let assigning = *planned_warnings;
                for (n, (old, key)) in rows.into_iter().enumerate() {
                    c.check_killed()?;
                    let changes = match changes_of(&table, &old, 0, &assignments, &checks, c, n + 1)
                    {
                        // Not counted as matched, as MariaDB counts it.
                        Err(e)
                            if ignore
                                && matches!(
                                    e.code,
                                    codes::CONSTRAINT_FAILED | codes::VIEW_CHECK_FAILED
                                ) =>
                        {
                            c.warn(e.code, e.message);
                            continue;
                        }
                        // A warning an earlier value left (an earlier
                        // row's, or this one's) failed the statement first
                        // in MariaDB, which evaluates and stores a row at
                        // a time.
                        Err(e) => {
                            let later = rows_warnings(&mut c.warnings, assigning);
                            abort_on_warning(c.strict, later)?;
                            return Err(e);
                        }
                        Ok(changes) => changes,
                    };
                    out.push((old, key, changes));
                }
                Ok(out)
            })
        }
    };
    // A strict UPDATE that fails on a value fails on the one MariaDB
    // meets first, row by row (not with an ORDER BY other than the primary
    // key's, nor subqueries per row).
    // Nor when a value assigns a user variable, which a second run would
    // assign again.
    let mut assigns = false;
    for e in assignments.iter().map(|(_, e)| e).chain(&targets.cond) {
        e.each(&mut |x| {
            assigns |= matches!(x, Expr::Func(crate::engine::expr::Func::SetUserVar, _));
        });
    }
    let in_key_order =
        targets.order.is_empty() || primary_key_order(&table, &targets.order).is_some();
    let row_by_row = strict && !per_row && in_key_order && !assigns;
    let failed = |conn: &mut Conn<'_>, error: SqlError| {
        let replayed = (row_by_row && VALUE_ERRORS.contains(&error.code))
            .then(|| {
                first_update_error_row_by_row(conn, &table, &targets, &assignments, &checks, params)
            })
            .flatten();
        Err(replayed.unwrap_or(error))
    };
    // The planning's warnings (a key's constant the range optimizer read)
    // are listed before the error of a statement that fails, as MariaDB's.
    // (The rows' own warnings are dropped: one of them is the error.)
    let planned_before_error = |conn: &mut Conn<'_>, ctx: &mut Ctx<'_>| {
        rows_warnings(&mut ctx.warnings, planned_warnings);
        keep_warnings(conn, ctx);
    };
    let (rows, tx) = match evaluated {
        Ok(done) => done,
        Err((e, Some(tx))) => {
            planned_before_error(conn, &mut ctx);
            let error = txn::finish(conn, tx, Err::<(), _>(e)).expect_err("finished with an error");
            return failed(conn, error);
        }
        Err((e, None)) => {
            planned_before_error(conn, &mut ctx);
            return failed(conn, e);
        }
    };
    // Every row was read and evaluated before anything is written.
    let later = rows_warnings(&mut ctx.warnings, planned_warnings);
    match abort_on_warning(ctx.strict, later) {
        Ok(later) => ctx.warnings.extend(later),
        Err(e) => {
            planned_before_error(conn, &mut ctx);
            drop(ctx);
            let error = txn::finish(conn, tx, Err::<(), _>(e)).expect_err("finished with an error");
            return failed(conn, error);
        }
    }
    let tz_secs = ctx.env.tz_secs;
    let mut mark = None;
    // Inside a transaction a duplicate key fails the statement only, as
    // in MariaDB: it is looked for before anything is written.
    let check_keys = !ignore
        && txn::in_transaction(conn)
        && rows
            .iter()
            .any(|(_, _, changes)| changes_keys(&table, changes));
    let result = (|| {
        if check_keys {
            let refs: Vec<_> = rows
                .iter()
                .map(|(old, key, changes)| (old.as_slice(), key.as_slice(), changes.as_slice()))
                .collect();
            if let Some(error) = first_duplicate(&tx, &table, &refs)? {
                return Err(error);
            }
        }
        let matched = rows.len() as u64;
        let mut changed = 0u64;
        // A unique index an update may break: the batch is sent here so
        // that a 1062 can name the value (the error names the operation).
        let unique = has_unique(table.native.def());
        // The row of each operation of the batch.
        let mut ops: Vec<usize> = Vec::new();
        let count = rows.len();
        // FOREIGN KEYs: the children of changed parent keys, then the
        // parents of changed child keys, before any row is written.
        // UPDATE IGNORE's rows left out for a missing parent (empty, and
        // not allocated, for a table without FOREIGN KEYs).
        let mut skip: Vec<bool> = Vec::new();
        if !fk_checks.is_empty() || !fk_actions.is_empty() {
            skip = vec![false; count];
            let news: Vec<Vec<Val>> = rows
                .iter()
                .map(|(old, _, changes)| sql_row_after(&table, old, changes, tz_secs))
                .collect();
            let changed = rows
                .iter()
                .zip(&news)
                .map(|((old, key, _), new)| (old.as_slice(), key.as_slice(), Some(new.as_slice())));
            txn::mark_statement(&*conn, &tx, (&fk_actions, rows.len()), &mut mark)?;
            let parents = (&*table, fk_actions.as_slice());
            super::foreign::statement_changed(&*conn, &tx, parents, changed, &mut ctx)?;
            let checked: Vec<(&[Val], Option<&[Val]>)> = rows
                .iter()
                .zip(&news)
                .map(|((old, ..), new)| (new.as_slice(), Some(old.as_slice())))
                .collect();
            let failed =
                super::foreign::missing_parents(&tx, &table, &fk_checks, &checked, &mut ctx)?;
            for (n, error) in failed.into_iter().enumerate() {
                let Some(error) = error else { continue };
                if !ignore {
                    return Err(error);
                }
                // UPDATE IGNORE: the row is left as it is, with a warning.
                ctx.warn(error.code, error.message);
                skip[n] = true;
            }
        }
        for (n, (old, key, changes)) in rows.iter().enumerate() {
            if skip.get(n) == Some(&true) {
                continue;
            }
            if ignore && !changes.is_empty() {
                // A row at a time, so that each probe sees the rows
                // updated before it; a row that would duplicate a key is
                // left as it is (MariaDB gives no warning for it).
                if key_taken(&tx, &table, old, key, changes)? {
                    continue;
                }
                if define_update(&tx, &table, old, key, changes, tz_secs, n + 1)? {
                    changed += 1;
                    tx.execute(ExecMode::NoCommit)
                        .map_err(|e| txn::native_error_in(&e, &table.name))?;
                }
                continue;
            }
            let before = tx.pending_ops();
            if define_update(&tx, &table, old, key, changes, tz_secs, n + 1)? {
                changed += 1;
                for _ in before..tx.pending_ops() {
                    ops.push(n);
                }
            }
            let full = tx.pending_ops() >= OPS_PER_EXECUTE_MAX;
            if full || (unique && n + 1 == count && tx.pending_ops() > 0) {
                tx.execute(ExecMode::NoCommit).map_err(|e| {
                    match failed_op(&e)
                        .and_then(|op| ops.get(op))
                        .and_then(|n| rows.get(*n))
                    {
                        Some((old, _, changes)) if e.code == native::UNIQUE_VIOLATION => {
                            update_duplicate(&table, old, changes, &e)
                        }
                        _ => txn::native_error_in(&e, &table.name),
                    }
                })?;
                ops.clear();
            }
        }
        // The last batch goes with the commit (or `txn::finish` sends it).
        Ok((matched, changed))
    })();
    txn::end_statement(&tx, mark, result.is_err());
    let (matched, changed) = finish_write(conn, tx, result, ctx)?;
    let info = if impossible {
        String::new()
    } else {
        format!(
            "Rows matched: {matched}  Changed: {changed}  Warnings: {}",
            conn.session.warning_count()
        )
    };
    Ok(Answered::Ok(OkInfo {
        affected_rows: if conn.found_rows { matched } else { changed },
        info,
        ..OkInfo::default()
    }))
}

fn delete(
    conn: &mut Conn<'_>,
    del: &ast::Delete,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    let Some(target) = delete_target(del) else {
        return super::multi::delete(conn, del, params, placeholders);
    };
    let table =
        crate::engine::alter_copy::wait_writable(conn, table_of(conn, single_table(target)?)?)?;
    let alias = target_alias(target, &table).to_owned();
    super::subquery::prepare(conn, del, 0, placeholders, Some(params))?;
    let columns = table_scope(&table, &alias);
    super::correlated::plan(conn, &del.selection, 0, &columns, &[], placeholders)?;
    super::correlated::plan(conn, &del.order_by, 0, &columns, &[], placeholders)?;
    let mut targets = lower_targets(
        conn,
        &table,
        &alias,
        del.selection.as_ref(),
        &del.order_by,
        del.limit.as_ref(),
        placeholders,
    )?;
    let per_row = targets.has_sub();
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    let fk_actions = super::foreign::parent_actions(conn, &table)?;
    // DELETE IGNORE: the WHERE's errors are warnings.
    let ignore = crate::engine::session::delete_ignore(del);
    let strict = conn.session.sql_mode_strict() && !ignore;
    let tx = txn::take(conn)?;
    let mut ctx = write_ctx(
        params,
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        strict,
        ignore,
    );
    let evaluated = match fetch_targets(&tx, &table, &mut targets, &mut ctx) {
        Err(e) => Err((e, Some(tx))),
        Ok((rows, limit, ..)) => with_per_row(conn, tx, per_row, &mut ctx, placeholders, |c| {
            order_targets(rows, &targets, limit, c)
        }),
    };
    let (rows, tx) = match evaluated {
        Ok(done) => done,
        Err((e, Some(tx))) => return txn::finish(conn, tx, Err(e)),
        Err((e, None)) => return Err(e),
    };
    let mut mark = None;
    let result = (|| {
        txn::mark_statement(&*conn, &tx, (&fk_actions, rows.len()), &mut mark)?;
        let gone = rows
            .iter()
            .map(|(row, key)| (row.as_slice(), key.as_slice(), None));
        let parents = (&*table, fk_actions.as_slice());
        super::foreign::statement_changed(&*conn, &tx, parents, gone, &mut ctx)?;
        for (_, key) in &rows {
            tx.define(Op::delete(&table.native, key))
                .map_err(|e| txn::native_error_in(&e, &table.name))?;
            if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
                tx.execute(ExecMode::NoCommit)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
            }
        }
        Ok(rows.len() as u64)
    })();
    txn::end_statement(&tx, mark, result.is_err());
    let affected = finish_write(conn, tx, result, ctx)?;
    // RETURNING's rows: those deleted, in the ORDER BY's order, else in
    // the primary key's (MariaDB's deletes walk InnoDB's clustered index;
    // the data nodes' scans give each partition's rows apart).
    if conn.returned.is_some() {
        let mut rows = rows;
        if del.order_by.is_empty() {
            in_key_order(&table, &mut rows);
        }
        if let Some(returned) = conn.returned.as_mut() {
            returned.extend(rows.into_iter().map(|(row, _)| row));
        }
    }
    Ok(Answered::Ok(OkInfo {
        affected_rows: affected,
        ..OkInfo::default()
    }))
}

/// A write's `RETURNING` list, planned over its table's columns before
/// the write runs (so that a bad item writes nothing).
pub(super) struct Returning {
    items: Vec<Expr>,
    pub metas: Vec<crate::value::ColumnMeta>,
}

impl Returning {
    /// The list's values of one row written (its table's SQL values).
    pub fn row(&self, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Vec<crate::value::SqlValue>> {
        self.items
            .iter()
            .zip(&self.metas)
            .map(|(e, meta)| Ok(super::convert::to_sql(&e.eval(row, ctx)?, meta)))
            .collect()
    }
}

/// Plans the `RETURNING` list of an INSERT, REPLACE or single-table
/// DELETE: `*`, `t.*`, expressions of the table's columns (aggregates are
/// 1111; subqueries are refused, as MariaDB's reading the table written
/// is 1093).
pub(super) fn plan_returning(
    conn: &Conn<'_>,
    statement: &Statement,
    placeholders: &[Location],
) -> SqlResult<Returning> {
    let (table, alias, list) = match statement {
        Statement::Insert(ins) => {
            let ast::TableObject::TableName(name) = &ins.table else {
                return Err(SqlError::unsupported("INSERT INTO TABLE FUNCTION"));
            };
            let table = table_of(conn, name)?;
            let alias = table.name.clone();
            (table, alias, ins.returning.as_deref())
        }
        Statement::Delete(del) => {
            let Some(target) = delete_target(del) else {
                return Err(SqlError::unsupported(
                    "a DELETE of several tables … RETURNING",
                ));
            };
            let table = table_of(conn, single_table(target)?)?;
            let alias = target_alias(target, &table).to_owned();
            (table, alias, del.returning.as_deref())
        }
        other => return Err(SqlError::unsupported(format_args!("`{other}` … RETURNING"))),
    };
    let sql_text = super::statement_text(conn);
    let list = list.unwrap_or_default();
    let written = returning_texts(&sql_text, list.len());
    let database = conn.session.database.clone().unwrap_or_default();
    with_scope(conn, table_scope(&table, &alias), placeholders, |scope| {
        scope.clause = "RETURNING";
        let mut items = Vec::new();
        let mut metas = Vec::new();
        for (at, item) in list.iter().enumerate() {
            let (e, name) = match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    if let ast::SelectItem::QualifiedWildcard(
                        ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                        _,
                    ) = item
                    {
                        let named = last_ident(name);
                        if !named.eq_ignore_ascii_case(&alias) {
                            return Err(SqlError::new(
                                codes::BAD_TABLE,
                                format!("Unknown table '{database}.{named}'"),
                            ));
                        }
                    }
                    for at in 0..scope.columns.len() {
                        items.push(Expr::Col(at));
                        metas.push(scope.columns[at].meta.clone());
                    }
                    continue;
                }
                // Named as a select item is: a column by its name, a
                // string by its value, anything else by its text.
                ast::SelectItem::UnnamedExpr(
                    e @ (ast::Expr::Identifier(_)
                    | ast::Expr::CompoundIdentifier(_)
                    | ast::Expr::Value(_)),
                ) => (e, crate::engine::expr::item_name(e, "")),
                ast::SelectItem::UnnamedExpr(e) => {
                    let name = written
                        .as_ref()
                        .and_then(|w| w.get(at).cloned())
                        .unwrap_or_else(|| crate::engine::expr::item_name(e, &sql_text));
                    (e, name)
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                other => return Err(SqlError::unsupported(format_args!("RETURNING {other}"))),
            };
            let lowered = scope.lower(e)?;
            if lowered.has_sub() {
                return Err(SqlError::unsupported("a subquery in RETURNING"));
            }
            metas.push(scope.meta(&lowered, &name));
            items.push(lowered);
        }
        Ok(Returning { items, metas })
    })
}

/// The texts of the `n` items of a statement's (last) `RETURNING` list,
/// as written (what names them); None where they cannot be told apart.
fn returning_texts(sql: &str, n: usize) -> Option<Vec<String>> {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = sqlparser::dialect::MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .ok()?;
    let keyword = tokens
        .iter()
        .rev()
        .find(|t| matches!(&t.token, Token::Word(w) if w.keyword == K::RETURNING))?;
    let rest = crate::engine::expr::text_from(sql, keyword.span.end)?;
    let texts = crate::engine::expr::select_item_texts(&format!("SELECT {rest}"))?;
    (texts.len() == n).then_some(texts)
}

/// A sink that keeps the rows (INSERT … SELECT).
#[derive(Default)]
struct Collect {
    rows: Vec<Vec<Val>>,
    /// Which result columns are typed DOUBLE.
    doubles: Vec<bool>,
}

impl Collect {
    /// The rows, each value of a DOUBLE column a double: an IF or
    /// COALESCE typed DOUBLE keeps the integer it took, which MariaDB's
    /// INSERT … SELECT stores as the double (`val_real`), so 2^64 - 1
    /// taken there is out of a BIGINT UNSIGNED column's range.
    fn into_rows(self) -> Vec<Vec<Val>> {
        let Collect { mut rows, doubles } = self;
        if doubles.iter().any(|d| *d) {
            for row in &mut rows {
                for (v, double) in row.iter_mut().zip(&doubles) {
                    if *double && matches!(v, Val::Int(_) | Val::UInt(_) | Val::Dec(_)) {
                        *v = Val::Double(v.to_f64().0);
                    }
                }
            }
        }
        rows
    }
}

impl crate::backend::ResultSink for Collect {
    fn columns(&mut self, columns: &[crate::value::ColumnMeta]) -> std::io::Result<()> {
        self.doubles = columns
            .iter()
            .map(|c| c.ty == crate::value::ColumnType::Double)
            .collect();
        Ok(())
    }
    fn row(&mut self, values: &[crate::value::SqlValue]) -> std::io::Result<()> {
        self.rows
            .push(values.iter().map(super::convert::from_sql).collect());
        Ok(())
    }
    fn end_rows(&mut self, _: &OkInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn ok(&mut self, _: &OkInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn error(&mut self, _: &SqlError) -> std::io::Result<()> {
        Ok(())
    }
    fn values(&mut self) -> Option<&mut Vec<Vec<Val>>> {
        Some(&mut self.rows)
    }
}

/// `EXPLAIN UPDATE …` / `EXPLAIN DELETE …`: the plan `fetch_targets` runs
/// for the statement's table and WHERE (nothing is changed), and the
/// plans of its correlated subqueries (run per row, as `update` and
/// `delete` run them). Uncorrelated subqueries run, as a SELECT's do.
pub fn explain(
    conn: &mut Conn<'_>,
    statement: &Statement,
    format: super::select::Format,
    more: bool,
    sink: &mut dyn crate::backend::ResultSink,
) -> SqlResult<Answered> {
    let params: &[Val] = &[];
    let multi = match statement {
        Statement::Update(up) => super::multi::is_multi_update(up),
        Statement::Delete(del) => super::multi::is_multi_delete(del),
        _ => false,
    };
    if multi {
        if let Some(q) = super::multi::explained_query(statement)? {
            return super::select::explain(conn, &q, format, more, sink);
        }
    }
    let (table, select_type, targets, assignments) = match statement {
        Statement::Update(up) => {
            let table = table_of(conn, single_table(&up.table)?)?;
            let alias = target_alias(&up.table, &table).to_owned();
            super::subquery::prepare(conn, up, 0, &[], Some(params))?;
            let columns = table_scope(&table, &alias);
            super::correlated::plan(conn, up, 0, &columns, &[], &[])?;
            let assignments = with_scope(conn, columns, &[], |scope| {
                scope.clause = "SET";
                up.assignments
                    .iter()
                    .map(|a| scope.lower(&a.value))
                    .collect::<SqlResult<Vec<_>>>()
            })?;
            let targets = lower_targets(
                conn,
                &table,
                &alias,
                up.selection.as_ref(),
                &up.order_by,
                up.limit.as_ref(),
                &[],
            )?;
            (table, "UPDATE", targets, assignments)
        }
        Statement::Delete(del) => {
            let target = delete_target(del)
                .ok_or_else(|| SqlError::unsupported("EXPLAIN of this DELETE"))?;
            let table = table_of(conn, single_table(target)?)?;
            let alias = target_alias(target, &table).to_owned();
            super::subquery::prepare(conn, del, 0, &[], Some(params))?;
            let columns = table_scope(&table, &alias);
            super::correlated::plan(conn, &del.selection, 0, &columns, &[], &[])?;
            super::correlated::plan(conn, &del.order_by, 0, &columns, &[], &[])?;
            let targets = lower_targets(
                conn,
                &table,
                &alias,
                del.selection.as_ref(),
                &del.order_by,
                del.limit.as_ref(),
                &[],
            )?;
            (table, "DELETE", targets, Vec::new())
        }
        other => return Err(SqlError::unsupported(format_args!("EXPLAIN of `{other}`"))),
    };
    let environment = env(conn);
    let mut ctx = Ctx::new(params, &environment);
    let order_exprs: Vec<&Expr> = targets.order.iter().map(|(e, _)| e).collect();
    let set_exprs: Vec<&Expr> = assignments.iter().collect();
    super::select::explain_write(
        conn,
        &table,
        select_type,
        targets.cond.as_ref(),
        targets.late.as_ref(),
        &order_exprs,
        &set_exprs,
        !targets.order.is_empty(),
        format,
        &mut ctx,
        more,
        sink,
    )
}

/// The primary key of `row` (native column, value; NULL for a column it
/// lacks).
fn primary_key_of(def: &schema::TableDef, row: &[(usize, Value)]) -> Vec<Value> {
    def.primary_key
        .iter()
        .map(|k| {
            row.iter()
                .find(|(p, _)| p == k)
                .map_or(Value::Null, |(_, v)| v.clone())
        })
        .collect()
}

/// The rows a REPLACE of `rows` replaces: those holding one of their
/// primary keys or unique values, read and locked exclusively, each once.
fn replaced_rows(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    rows: &[NativeRow],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<TargetRow>> {
    let def = table.native.def();
    let lock = Some(RowLock::EXCLUSIVE);
    let mut accesses = vec![plan::Access::Keys(
        rows.iter()
            .map(|(row, _)| primary_key_of(def, row))
            .collect(),
    )];
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Unique)
    {
        let keys: Vec<Vec<Value>> = rows
            .iter()
            .filter_map(|(row, _)| unique_key_of(index, row))
            .collect();
        if !keys.is_empty() {
            accesses.push(plan::Access::Unique {
                index: index.name.clone(),
                keys,
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for access in &accesses {
        for (row, key) in fetch(
            tx, table, access, None, lock, false, None, ctx, None, None, None,
        )? {
            if seen.insert(key_bytes(def, &key)) {
                out.push((row, key));
            }
        }
    }
    Ok(out)
}

/// The values of unique index `index` in `row` (native column, value),
/// `None` when one is NULL or absent (such a row takes no unique key).
fn unique_key_of(index: &schema::IndexDef, row: &[(usize, Value)]) -> Option<Vec<Value>> {
    index
        .columns
        .iter()
        .map(|k| {
            row.iter()
                .find(|(p, _)| p == k)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_null())
        })
        .collect()
}
