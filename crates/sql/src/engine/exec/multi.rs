//! Multi-table `UPDATE` and `DELETE`: `UPDATE a JOIN b ON … SET a.x =
//! b.y, b.z = … WHERE …`, `UPDATE a, b SET …`, `DELETE a, b FROM a JOIN b
//! …`, `DELETE FROM a, b USING a JOIN b …`.
//!
//! The FROM list is joined as a SELECT's is (`from::join_from`,
//! `plan::join`, `join::run_each`), in the statement's transaction with
//! every row it reads locked exclusively. Then, a joined row at a time in
//! the order of the first target's primary key (or ORDER BY's, cut at
//! LIMIT: an UPDATE's only, as MariaDB's grammar has them; a DELETE's
//! order changes nothing), each target table's row in it is changed
//! once: the first joined row it is in decides its values, later ones
//! leave it (MariaDB's "each matching row is updated once"). A target
//! NULL-extended by an outer join has no row there. The values are
//! computed from the rows as the join read them, none of the statement's
//! changes seen (an assignment sees the same row's earlier assignments,
//! as a single-table UPDATE's); every row is evaluated before any is
//! written, then the writes go out by primary key in batches, with the
//! commit. A target table needs a primary key (a table without one has
//! only the hidden `$PK`, which a joined row does not carry).

use std::collections::HashSet;
use std::sync::Arc;

use schema::Value;
use skarv_client::{codes as native, ExecMode, Op, Transaction};
use sqlparser::ast;
use sqlparser::tokenizer::Location;

use super::convert::Target;
use super::write::{
    changes_counted, changes_keys, default_assigned, define_update, finish_write, first_duplicate,
    for_column, has_unique, is_default_word, key_bytes, key_taken, limit_of, lower_checks,
    order_targets, stored_again, update_duplicate, with_per_row, write_ctx, Check, ReplayedKeys,
    Targets,
};
use super::{env, table_scope, with_scope, RowLock, FETCH_ROWS_MAX, OPS_PER_EXECUTE_MAX};
use crate::backend::OkInfo;
use crate::engine::catalog::TableInfo;
use crate::engine::expr::{name_parts, Ctx, Expr, SubTest, Val};
use crate::engine::plan;
use crate::engine::plan::join::{JoinSpec, JoinTable};
use crate::engine::session::statement_deadline;
use crate::engine::{txn, Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};

/// One table an UPDATE changes: its place in the join and its
/// assignments (a column of the table, its value over the joined row).
struct UpdateTarget {
    at: usize,
    assignments: Vec<(usize, Expr)>,
    checks: Vec<Check>,
}

/// A row to change: its target, its values as read, its primary key and
/// its changes.
type Changed = (usize, Vec<Val>, Vec<Value>, Vec<(usize, Value)>);

/// `SELECT * FROM tables WHERE selection`: the rows a multi-table
/// statement joins (its SELECT for `from::join_from`, its query for
/// EXPLAIN).
fn query_of(
    tables: Vec<ast::TableWithJoins>,
    selection: Option<ast::Expr>,
) -> SqlResult<ast::Query> {
    let parsed = sqlparser::parser::Parser::parse_sql(
        &crate::engine::dialect::SkarvDialect,
        "SELECT * FROM x",
    )
    .map_err(SqlError::syntax)?;
    let Some(ast::Statement::Query(mut q)) = parsed.into_iter().next() else {
        return Err(SqlError::new(
            codes::UNKNOWN,
            "the join template did not parse",
        ));
    };
    let ast::SetExpr::Select(s) = q.body.as_mut() else {
        return Err(SqlError::new(
            codes::UNKNOWN,
            "the join template is no SELECT",
        ));
    };
    s.from = tables;
    s.selection = selection;
    Ok(*q)
}

/// The SELECT of [`query_of`].
fn select_of(
    tables: Vec<ast::TableWithJoins>,
    selection: Option<ast::Expr>,
) -> SqlResult<ast::Select> {
    match *query_of(tables, selection)?.body {
        ast::SetExpr::Select(s) => Ok(*s),
        _ => unreachable!("query_of makes a SELECT"),
    }
}

/// The tables a multi-table UPDATE joins (None: a single-table one).
fn update_tables(up: &ast::Update) -> Option<Vec<ast::TableWithJoins>> {
    let more = match &up.from {
        Some(
            ast::UpdateTableFromKind::BeforeSet(more) | ast::UpdateTableFromKind::AfterSet(more),
        ) => more.as_slice(),
        None if up.table.joins.is_empty() => return None,
        None => &[],
    };
    let mut tables = vec![up.table.clone()];
    tables.extend(more.iter().cloned());
    Some(tables)
}

/// Whether an UPDATE joins several tables (`Com_update_multi`).
pub(crate) fn is_multi_update(up: &ast::Update) -> bool {
    !up.table.joins.is_empty() || up.from.is_some()
}

/// Whether a DELETE is of the multi-table form (`Com_delete_multi`):
/// all but `DELETE FROM t …` and `DELETE t FROM t …`.
pub(crate) fn is_multi_delete(del: &ast::Delete) -> bool {
    super::write::delete_target(del).is_none()
}

/// `EXPLAIN` of a multi-table UPDATE or DELETE: the
/// plan of the join it reads, as its SELECT's (MariaDB's rows for it are
/// a SELECT's too).
pub(super) fn explained_query(statement: &ast::Statement) -> SqlResult<Option<ast::Query>> {
    match statement {
        ast::Statement::Update(up) => match update_tables(up) {
            Some(tables) => Ok(Some(query_of(tables, up.selection.clone())?)),
            None => Ok(None),
        },
        ast::Statement::Delete(del) => {
            let from = match &del.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            let tables = del.using.as_ref().unwrap_or(from).clone();
            Ok(Some(query_of(tables, del.selection.clone())?))
        }
        _ => Ok(None),
    }
}

/// The join of a multi-table `statement`'s `tables` and WHERE, its
/// uncorrelated subqueries run first (once), as a SELECT's. With
/// `strict_update` (a strict multi-table UPDATE, strict from before its
/// optimizer runs them, as MariaDB's), a warning of those subqueries is
/// the statement's error (`EXISTS (SELECT … WHERE x = 1 + '1z')`).
fn join_of(
    conn: &mut Conn<'_>,
    statement: &impl ast::Visit,
    (tables, selection): (Vec<ast::TableWithJoins>, &Option<ast::Expr>),
    placeholders: &[Location],
    params: &[Val],
    strict_update: bool,
) -> SqlResult<super::from::JoinFrom> {
    let select = select_of(tables, selection.clone())?;
    let mark = conn.session.diagnostics_mark();
    super::subquery::prepare(conn, statement, 0, placeholders, Some(params))?;
    // (Only when the subqueries left notes: before the first, the list
    // may still be an earlier statement's.)
    if strict_update && conn.session.warning_count() > mark.0 {
        let first = conn.session.notes()[mark.1.min(conn.session.notes().len())..]
            .iter()
            .find(|n| n.level == "Warning")
            .map(|n| SqlError::new(n.code, n.message.clone()));
        if let Some(error) = first {
            conn.session.rewind_diagnostics(mark);
            return Err(error);
        }
    }
    super::from::join_from(conn, &select, placeholders, Some(params))
}

/// Waits, as a single-table write waits, while an ALTER TABLE copy holds
/// one of the `targets` (places in `spec`); true when it waited, and the
/// statement then starts again with the tables' new definitions.
fn waited_for_copies(
    conn: &Conn<'_>,
    spec: &JoinSpec,
    targets: impl Iterator<Item = usize>,
) -> SqlResult<bool> {
    let mut waited = false;
    for at in targets {
        let t = &spec.tables[at].table;
        if t.sql.copy.is_some() {
            crate::engine::alter_copy::wait_writable(conn, Arc::clone(t))?;
            waited = true;
        }
    }
    Ok(waited)
}

/// A target table must be a table of the cluster with a primary key.
fn writable(t: &JoinTable, statement: &str) -> SqlResult<()> {
    if t.rows.is_some() || t.semi.is_some() {
        return Err(SqlError::new(
            codes::NON_UPDATABLE_TABLE,
            format!(
                "The target table {} of the {statement} is not updatable",
                t.alias
            ),
        ));
    }
    if t.table.hidden_key {
        return Err(SqlError::unsupported(format_args!(
            "a multi-table {statement} of table '{}' (as '{}'), which has no PRIMARY KEY: \
             add one, or change its rows with a single-table {statement}",
            t.table.name, t.alias
        )));
    }
    Ok(())
}

/// The primary key of `t`'s row in the joined row `row` (None: the
/// table is NULL-extended there, no row of it).
fn key_in(t: &JoinTable, row: &[Val], tz_secs: i64) -> SqlResult<Option<Vec<Value>>> {
    let table = &t.table;
    let mut key = Vec::new();
    for native in &table.native.def().primary_key {
        let Some(at) = table.columns.iter().position(|c| c.native == *native) else {
            return Ok(None);
        };
        let v = &row[t.offset + at];
        if v.is_null() {
            return Ok(None);
        }
        let target = Target {
            column: &table.columns[at],
            db: &table.db,
            table: &table.name,
            row: 1,
            tz_secs,
        };
        key.push(stored_again(v, &target)?);
    }
    Ok(Some(key))
}

/// The WHERE lowered over the joined row, split into what the join tests
/// and what runs correlated subqueries (tested after, per row, with the
/// ON's such conjuncts `late_on`). A conjunct written after one that runs
/// a subquery inside an expression is tested after it too unless it
/// cannot warn: MariaDB tests such a row's conjuncts in written order, so
/// it never compares a row that conjunct rejects (DML seed 291: `EXISTS
/// (…) XOR … AND b IN ('apple', 3)` warned of every b, and a strict
/// UPDATE failed). A conjunct that is an `EXISTS` or `x IN (SELECT …)`
/// alone does not hold the others back: MariaDB runs it as a semi-join,
/// after the table's own conditions. One that cannot warn (`t.id = 5`)
/// still picks the rows the join reads.
fn split_where(
    spec: &JoinSpec,
    cond: Option<Expr>,
    late_on: Vec<Expr>,
) -> (Option<Expr>, Option<Expr>) {
    let kind = |e: &Expr| match e {
        Expr::Col(i) => spec
            .columns
            .get(*i)
            .map_or(crate::engine::expr::Kind::Null, |c| c.kind),
        Expr::Lit(v) => crate::engine::expr::eval::val_kind(v),
        _ => crate::engine::expr::Kind::Null,
    };
    let semi_join = |c: &Expr| matches!(c, Expr::Sub(s) if matches!(s.test, SubTest::Exists(false) | SubTest::In(_, false)));
    let mut holds_back = late_on.iter().any(|c| !semi_join(c));
    let (mut early, mut late) = (Vec::new(), late_on);
    for c in cond.as_ref().map(Expr::conjuncts).unwrap_or_default() {
        if c.has_sub() {
            holds_back |= !semi_join(c);
            late.push(c.clone());
        } else if holds_back && !plan::quiet(c, &kind) {
            late.push(c.clone());
        } else {
            early.push(c.clone());
        }
    }
    (Expr::and_of(early), Expr::and_of(late))
}

/// The late conjuncts (`split_where`) without the ORs a constant makes
/// hold, folded before any row is read ([`plan::fold_true_disjuncts`]),
/// their strings compared with a BIGINT column read first, as
/// MariaDB prepares them (`plan::join::read_bigint_texts`: a strict
/// UPDATE only warns of `'apple' = t1.f` beside an EXISTS; DML seed 464).
fn fold_late(spec: &JoinSpec, late: Option<Expr>, ctx: &mut Ctx<'_>) -> SqlResult<Option<Expr>> {
    let late = match late {
        Some(l) => match plan::join::read_bigint_texts(spec, &l, ctx) {
            std::borrow::Cow::Owned(read) => Some(read),
            std::borrow::Cow::Borrowed(_) => Some(l),
        },
        None => None,
    };
    Ok(match plan::fold_true_disjuncts(late.as_ref(), ctx)? {
        Some(std::borrow::Cow::Owned(folded)) => Some(folded),
        Some(std::borrow::Cow::Borrowed(_)) => late,
        None => None,
    })
}

/// A joined row and how many warnings its context held when the row was
/// read (its conditions', and those of the rows read before it).
type JoinedRow = (Vec<Val>, usize);

/// The joined rows that pass the join's conditions, each read row locked.
fn read_joined(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    cond: Option<&Expr>,
    stop: Option<usize>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Vec<JoinedRow>> {
    let plan = plan::join::plan(spec, cond, ctx)?;
    // `sql_safe_updates`: no table of a multi-table UPDATE or DELETE may
    // be read whole, as MariaDB's (whose plan would read it ALL).
    let whole =
        |s: &plan::join::Step| matches!(s.access, plan::join::StepAccess::Own(plan::Access::Scan));
    if ctx.env.safe_updates && plan.steps.iter().any(whole) {
        return Err(super::write::safe_updates_error());
    }
    let mut rows = Vec::new();
    super::join::run_each(
        tx,
        spec,
        &plan,
        Some(RowLock::EXCLUSIVE),
        ctx,
        None,
        &mut |row, ctx| {
            if rows.len() >= FETCH_ROWS_MAX {
                return Err(SqlError::unsupported(format_args!(
                    "statements that keep more than {FETCH_ROWS_MAX} rows in the SQL node"
                )));
            }
            rows.push((row, ctx.warnings.len()));
            Ok(stop.is_none_or(|n| rows.len() < n))
        },
    )?;
    Ok(rows)
}

/// The joined rows in the order of `target`'s primary key (rows without
/// its row last; the join's order among equals): the order MariaDB
/// meets them in when it reads the target first, by its clustered key,
/// which decides which of two rows taking one unique value under IGNORE
/// changes, and which row's error a strict UPDATE gives.
fn in_target_order(target: &JoinTable, rows: &mut [JoinedRow], tz_secs: i64) {
    if rows.len() < 2 {
        return;
    }
    let def = target.table.native.def();
    let mut keyed: Vec<(Option<Vec<u8>>, JoinedRow)> = rows
        .iter_mut()
        .map(|r| {
            let key = key_in(target, &r.0, tz_secs).ok().flatten();
            (key.map(|k| key_bytes(def, &k)), std::mem::take(r))
        })
        .collect();
    // Stable: equal keys keep the join's order.
    keyed.sort_by(|a, b| match (&a.0, &b.0) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    for (slot, (_, row)) in rows.iter_mut().zip(keyed) {
        *slot = row;
    }
}

/// A strict multi-table UPDATE's error: the first warning (not a note)
/// of the first `before` its conditions or values left. MariaDB's
/// multi-table UPDATE is strict from before its optimizer runs (its
/// single-table one only for the rows), so a constant's warning (`1 =
/// 'x'`) fails it too; not one of converting a constant when the
/// statement is prepared (`eval::PREPARED_BIT`).
fn first_warning(ctx: &Ctx<'_>, before: usize) -> Option<SqlError> {
    if !ctx.strict {
        return None;
    }
    let held = &ctx.warnings[..before.min(ctx.warnings.len())];
    let (code, message) = failing_warnings(held).next()?;
    Some(SqlError::new(code, message.clone()))
}

/// The `warnings` that fail a strict multi-table UPDATE (not a note, nor
/// one of a conversion made when the statement is prepared), with their
/// codes.
fn failing_warnings(warnings: &[(u16, String)]) -> impl Iterator<Item = (u16, &String)> {
    use crate::engine::expr::eval::{FLAG_BITS, NOTE_BIT, PREPARED_BIT};
    warnings
        .iter()
        .filter(|(code, _)| code & (NOTE_BIT | PREPARED_BIT) == 0)
        .map(|(code, message)| (code & !FLAG_BITS, message))
}

/// The table and column an assignment's name gives: `c`, `t.c` or
/// `db.t.c`.
fn assigned_column(
    scope: &crate::engine::expr::Scope<'_>,
    name: &ast::ObjectName,
) -> SqlResult<usize> {
    let parts = name_parts(name);
    match parts.as_slice() {
        [c] => scope.resolve(None, c),
        [.., t, c] => scope.resolve(Some(t), c),
        [] => Err(SqlError::new(
            codes::BAD_FIELD,
            "Unknown column '' in 'SET'",
        )),
    }
}

/// A multi-table UPDATE (`UPDATE a JOIN b … SET …`, `UPDATE a, b SET …`).
pub(super) fn update(
    conn: &mut Conn<'_>,
    up: &ast::Update,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    let tables = update_tables(up).unwrap_or_else(|| vec![up.table.clone()]);
    let super::from::JoinFrom {
        spec,
        hidden,
        late: late_on,
        ..
    } = {
        let ignore = matches!(up.or, Some(ast::SqliteOnConflict::Ignore));
        let strict = conn.session.sql_mode_strict() && !ignore;
        join_of(
            conn,
            up,
            (tables, &up.selection),
            placeholders,
            params,
            strict,
        )?
    };
    let columns = spec.columns.clone();
    super::correlated::plan(conn, &up.assignments, 0, &columns, &hidden, placeholders)?;
    super::correlated::plan(conn, &up.selection, 0, &columns, &hidden, placeholders)?;
    super::correlated::plan(conn, &up.order_by, 0, &columns, &hidden, placeholders)?;
    let environment = env(conn);
    let (assigned, cond, order, limit) = with_scope(conn, columns, placeholders, |scope| {
        scope.hidden = hidden.clone();
        scope.clause = "SET";
        let mut assigned: Vec<(usize, usize, Option<Expr>)> = Vec::new();
        for a in &up.assignments {
            let ast::AssignmentTarget::ColumnName(n) = &a.target else {
                return Err(SqlError::unsupported("tuple assignments"));
            };
            let p = assigned_column(scope, n)?;
            let Some(at) = plan::join::table_at(&spec, p) else {
                return Err(SqlError::new(
                    codes::BAD_FIELD,
                    format!("Unknown column '{n}' in 'SET'"),
                ));
            };
            let t = &spec.tables[at];
            writable(t, "UPDATE")?;
            let column = p - t.offset;
            // DEFAULT is lowered over its table alone, below.
            let value = if is_default_word(&a.value) {
                None
            } else {
                let ty = t.table.columns.get(column).map(|c| &c.ty);
                let lowered = scope.lower(&a.value)?;
                Some(for_column(ty, &a.value, scope.stored(lowered)))
            };
            assigned.push((at, column, value));
        }
        scope.clause = "WHERE";
        let cond = up
            .selection
            .as_ref()
            .map(|w| {
                let lowered = scope.lower_condition(w)?;
                Ok::<_, SqlError>(super::write::fold_same_column(scope, lowered, true))
            })
            .transpose()?;
        scope.clause = "ORDER BY";
        let order = up
            .order_by
            .iter()
            .map(|o| {
                let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
                Ok((scope.lower(&o.expr)?, desc))
            })
            .collect::<SqlResult<Vec<_>>>()?;
        let limit = up.limit.as_ref().map(|l| scope.lower(l)).transpose()?;
        Ok((assigned, cond, order, limit))
    })?;
    // The targets in the join's written order, each with its assignments
    // in the SET's order.
    let mut targets: Vec<UpdateTarget> = Vec::new();
    for (at, column, value) in assigned {
        let t = &spec.tables[at];
        let value = match value {
            Some(v) => v,
            None => {
                let scope_columns = table_scope(&t.table, &t.alias);
                let d = with_scope(conn, scope_columns, placeholders, |scope| {
                    default_assigned(scope, &t.table, column, &environment)
                })?;
                let offset = t.offset;
                plan::join::map_columns(&d, &|c| c + offset)
            }
        };
        match targets.iter_mut().find(|x| x.at == at) {
            Some(x) => x.assignments.push((column, value)),
            None => targets.push(UpdateTarget {
                at,
                assignments: vec![(column, value)],
                checks: lower_checks(conn, &t.table)?,
            }),
        }
    }
    targets.sort_by_key(|x| x.at);
    if waited_for_copies(conn, &spec, targets.iter().map(|x| x.at))? {
        return update(conn, up, params, placeholders);
    }
    key_conflict(&spec, &targets)?;
    let (cond, late) = split_where(&spec, cond, late_on);
    let per_row = late.is_some()
        || order.iter().any(|(e, _)| e.has_sub())
        || targets
            .iter()
            .any(|x| x.assignments.iter().any(|(_, e)| e.has_sub()));
    let info = Arc::clone(&conn.info);
    // UPDATE IGNORE: a value that does not fit is stored as a non-strict
    // sql_mode would, with a warning; a row that fails a CHECK or would
    // duplicate a unique key is left as it is.
    let ignore = matches!(up.or, Some(ast::SqliteOnConflict::Ignore));
    let strict = conn.session.sql_mode_strict() && !ignore;
    let mut ctx = write_ctx(
        params,
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        strict,
        ignore,
    );
    let late = fold_late(&spec, late, &mut ctx)?;
    let tx = txn::take(conn)?;
    let after = Targets {
        cond: None,
        late,
        order,
        limit: None,
    };
    let mut cut = 0;
    let evaluated = match limit_of(limit.as_ref(), &mut ctx).and_then(|limit| {
        let stop = limit.filter(|_| after.order.is_empty() && after.late.is_none());
        let rows = if limit == Some(0) {
            Vec::new()
        } else {
            read_joined(&tx, &spec, cond.as_ref(), stop, &mut ctx)?
        };
        Ok((rows, limit))
    }) {
        Err(e) => Err((e, Some(tx))),
        Ok((mut rows, limit)) => {
            if after.order.is_empty() {
                if let Some(first) = targets.first() {
                    in_target_order(&spec.tables[first.at], &mut rows, ctx.env.tz_secs);
                }
            }
            with_per_row(conn, tx, per_row, &mut ctx, placeholders, |c| {
                let rows = order_targets(rows, &after, limit, c)?;
                changes_of_joined(&spec, &targets, rows, ignore, c, &mut cut)
            })
        }
    };
    // MariaDB's error, when the statement fails in strict mode: a value's,
    // or a condition's warning its own run counted too, in the order
    // MariaDB meets them. One that run did not count (a warning of a
    // conversion made once when the statement is prepared, given per row
    // when the rows are run again) is not taken.
    let replayable = strict && after.order.is_empty() && !per_row;
    let failed = |conn: &mut Conn<'_>, tx: &Transaction<'_>, e: SqlError, ctx: Ctx<'_>| {
        if !replayable {
            return e;
        }
        let ran = Ran {
            spec: &spec,
            targets: &targets,
            cond: cond.as_ref(),
            limit: limit.as_ref(),
        };
        let met = |r: &SqlError| {
            failing_warnings(&ctx.warnings)
                .any(|(code, message)| code == r.code && *message == r.message)
        };
        match first_error_in_target_order(conn, tx, &ran, params) {
            Some(Replayed::Value(r)) => r,
            Some(Replayed::Condition(r)) if met(&r) => r,
            _ => e,
        }
    };
    let (rows, tx) = match evaluated {
        Ok(done) => done,
        Err((e, Some(tx))) => {
            let e = failed(conn, &tx, e, ctx);
            return txn::finish(conn, tx, Err(e));
        }
        Err((e, None)) => return Err(e),
    };
    // Every row was read and evaluated before anything is written: a
    // strict UPDATE fails on a condition's warning as MariaDB's does
    // (`abort_on_warning`), its DELETE does not.
    if let Some(e) = first_warning(&ctx, usize::MAX) {
        let e = failed(conn, &tx, e, ctx);
        return txn::finish(conn, tx, Err(e));
    }
    let tz_secs = ctx.env.tz_secs;
    let mut mark = None;
    let checked = if !ignore && txn::in_transaction(conn) {
        no_duplicates(&tx, &spec, &rows)
    } else {
        Ok(())
    };
    let result = checked
        .and_then(|()| {
            foreign_keys_of_updates(&*conn, &tx, &spec, rows, ignore, &mut ctx, &mut mark)
        })
        .and_then(|rows| write_changes(&tx, &spec, &rows, ignore, tz_secs));
    txn::end_statement(&tx, mark, result.is_err());
    let (matched, changed) = finish_write(conn, tx, result, ctx)?;
    Ok(Answered::Ok(OkInfo {
        affected_rows: if conn.found_rows { matched } else { changed },
        // MariaDB's multi-table UPDATE counts only the values' warnings
        // here (`cuted_fields`), not a CHECK's or a condition's.
        info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: {cut}"),
        ..OkInfo::default()
    }))
}

/// The FOREIGN KEYs of a multi-table UPDATE's rows, table by table, before
/// any is written: children of changed parent keys refused or changed,
/// parents of changed child keys read. The rows to write (UPDATE IGNORE
/// leaves out, with a warning, a row whose parent is missing).
fn foreign_keys_of_updates(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    rows: Vec<Changed>,
    ignore: bool,
    ctx: &mut Ctx<'_>,
    mark: &mut Option<txn::StatementMark>,
) -> SqlResult<Vec<Changed>> {
    if !conn.session.foreign_key_checks() {
        return Ok(rows);
    }
    let tz_secs = ctx.env.tz_secs;
    let mut tables: Vec<usize> = rows.iter().map(|r| r.0).collect();
    tables.sort_unstable();
    tables.dedup();
    let mut skip = vec![false; rows.len()];
    for at in tables {
        let table = &spec.tables[at].table;
        let checks = super::foreign::child_checks(conn, table)?;
        let actions = super::foreign::parent_actions(conn, table)?;
        if checks.is_empty() && actions.is_empty() {
            continue;
        }
        let mine: Vec<usize> = (0..rows.len())
            .filter(|&n| rows[n].0 == at && !rows[n].3.is_empty())
            .collect();
        let news: Vec<Vec<Val>> = mine
            .iter()
            .map(|&n| super::write::sql_row_after(table, &rows[n].1, &rows[n].3, tz_secs))
            .collect();
        let changed: Vec<super::foreign::ParentChange<'_>> = mine
            .iter()
            .zip(&news)
            .map(|(&n, new)| {
                (
                    rows[n].1.as_slice(),
                    rows[n].2.as_slice(),
                    Some(new.as_slice()),
                )
            })
            .collect();
        txn::mark_statement(conn, tx, (&actions, changed.len()), mark)?;
        super::foreign::parent_changed(conn, tx, table, &actions, &changed, ctx, 0)?;
        let checked: Vec<(&[Val], Option<&[Val]>)> = mine
            .iter()
            .zip(&news)
            .map(|(&n, new)| (new.as_slice(), Some(rows[n].1.as_slice())))
            .collect();
        let failed = super::foreign::missing_parents(tx, table, &checks, &checked, ctx)?;
        for (k, error) in failed.into_iter().enumerate() {
            let Some(error) = error else { continue };
            if !ignore {
                return Err(error);
            }
            ctx.warn(error.code, error.message);
            skip[mine[k]] = true;
        }
    }
    Ok(rows
        .into_iter()
        .zip(skip)
        .filter(|(_, skip)| !skip)
        .map(|(row, _)| row)
        .collect())
}

/// What tells a table apart from another: its database and name (two
/// names of one table in a FROM list are one table).
fn same_table(t: &TableInfo) -> String {
    format!("{}.{}", t.db, t.name)
}

/// MariaDB's 1706: a table updated under two names may not have its
/// primary key changed (one name's change would move the row the other's
/// changes).
fn key_conflict(spec: &JoinSpec, targets: &[UpdateTarget]) -> SqlResult<()> {
    for (i, x) in targets.iter().enumerate() {
        let tx = &spec.tables[x.at];
        for y in &targets[i + 1..] {
            let ty = &spec.tables[y.at];
            if same_table(&tx.table) != same_table(&ty.table) {
                continue;
            }
            let pk = &tx.table.native.def().primary_key;
            let moves = |t: &UpdateTarget| {
                t.assignments
                    .iter()
                    .any(|(c, _)| pk.contains(&tx.table.columns[*c].native))
            };
            if moves(x) || moves(y) {
                return Err(SqlError::new(
                    codes::MULTI_UPDATE_KEY_CONFLICT,
                    format!(
                        "Primary key/partition key update is not allowed since the table is \
                         updated both as '{}' and '{}'",
                        tx.alias, ty.alias
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Most joined rows [`first_error_in_target_order`] reads again: past
/// it, the statement keeps the error its own run found.
const REPLAYED_ROWS_MAX: usize = 100_000;

/// What a multi-table UPDATE ran: its join, targets, WHERE (the part the
/// join tests) and LIMIT.
struct Ran<'a> {
    spec: &'a JoinSpec,
    targets: &'a [UpdateTarget],
    cond: Option<&'a Expr>,
    limit: Option<&'a Expr>,
}

/// Where [`first_error_in_target_order`] found its error.
enum Replayed {
    /// A condition's warning (a constant's, an ON's or the WHERE's).
    Condition(SqlError),
    /// A value that does not fit its column, or a CHECK that fails.
    Value(SqlError),
}

/// The error MariaDB gives for a strict multi-table UPDATE without ORDER
/// BY that failed: it reads its first target by primary key and tests
/// and changes one joined row at a time, so it fails on the first row in
/// that order whose condition warns or whose value does not fit (the row
/// number in its message counts the joined rows read, those WHERE
/// rejected too), or that takes a unique value a row changed before it
/// took or a row not changed yet holds (1062: MariaDB writes each row as
/// it goes when its plan reads the target first, which it mostly does
/// for a target joined by key; when it reads another table first it
/// makes every row's values before it writes any). Skarv's join tests a batch of rows before it hands any
/// over, so a later row's warning came before an earlier row's error:
/// the rows are joined again without the WHERE and run in that order.
/// Only once the statement has failed; None (the caller keeps its
/// error) when nothing fails so, or the join has more than
/// [`REPLAYED_ROWS_MAX`] rows.
fn first_error_in_target_order(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    ran: &Ran<'_>,
    params: &[Val],
) -> Option<Replayed> {
    let mut environment = env(conn);
    // A replay of rows the statement was let read, with no condition.
    environment.safe_updates = false;
    let info = Arc::clone(&conn.info);
    let mut ctx = write_ctx(
        params,
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        true,
        false,
    );
    let ctx = &mut ctx;
    let limit = limit_of(ran.limit, ctx).ok()?;
    // A constant's warning comes first: MariaDB's multi-table UPDATE is
    // strict while its optimizer evaluates the constants.
    plan::join::plan(ran.spec, ran.cond, ctx).ok()?;
    if let Some(e) = first_warning(ctx, usize::MAX) {
        return Some(Replayed::Condition(e));
    }
    let stop = Some(REPLAYED_ROWS_MAX + 1);
    let mut rows = read_joined(tx, ran.spec, None, stop, ctx).ok()?;
    if rows.len() > REPLAYED_ROWS_MAX {
        return None;
    }
    // An ON condition's warning came first.
    if let Some(e) = first_warning(ctx, usize::MAX) {
        return Some(Replayed::Condition(e));
    }
    let first = ran.targets.first()?;
    in_target_order(&ran.spec.tables[first.at], &mut rows, ctx.env.tz_secs);
    let mut seen: Vec<HashSet<Vec<u8>>> = ran.targets.iter().map(|_| HashSet::new()).collect();
    let mut keys: Vec<ReplayedKeys> = ran
        .targets
        .iter()
        .map(|x| ReplayedKeys::new(ran.spec.tables[x.at].table.native.def()))
        .collect();
    let (mut passed, mut cut) = (0usize, 0usize);
    for (n, (row, _)) in rows.into_iter().enumerate() {
        if limit.is_some_and(|l| passed >= l) {
            break;
        }
        let pass = match ran.cond.map_or(Ok(true), |c| c.test(&row, ctx)) {
            // A warning met before the error was MariaDB's error first
            // (strict mode aborts at the warning).
            Err(e) => {
                return Some(Replayed::Condition(
                    first_warning(ctx, usize::MAX).unwrap_or(e),
                ))
            }
            Ok(pass) => pass,
        };
        if let Some(e) = first_warning(ctx, usize::MAX) {
            return Some(Replayed::Condition(e));
        }
        if !pass {
            continue;
        }
        passed += 1;
        for ((x, seen), keys) in ran.targets.iter().zip(&mut seen).zip(&mut keys) {
            let t = &ran.spec.tables[x.at];
            let Some(_) = first_met(t, &row, seen, ctx.env.tz_secs).ok()? else {
                continue;
            };
            let (table, offset) = (&t.table, t.offset);
            let changed = target_changes(x, t, &row, ctx, n + 1, &mut cut);
            let changes = match changed {
                Ok(changes) => changes,
                Err(e) => return Some(Replayed::Value(e)),
            };
            // A key value another row holds fails as the row is written.
            let old = &row[offset..offset + table.columns.len()];
            if let Some(e) = keys.check(tx, table, old, &changes).ok()? {
                return Some(Replayed::Value(e));
            }
        }
    }
    None
}

/// The primary key of target `t`'s row in the joined `row` the first
/// time it is met (`seen` holds those met before); None when the row was
/// met already, or `t` has no row there (NULL-extended).
fn first_met(
    t: &JoinTable,
    row: &[Val],
    seen: &mut HashSet<Vec<u8>>,
    tz_secs: i64,
) -> SqlResult<Option<Vec<Value>>> {
    Ok(key_in(t, row, tz_secs)?.filter(|key| seen.insert(key_bytes(t.table.native.def(), key))))
}

/// The changes target `x` (table `t`) makes to its row of the joined
/// `row`, the joined row's number `n` in warnings; `cut` counts the
/// values' warnings.
fn target_changes(
    x: &UpdateTarget,
    t: &JoinTable,
    row: &[Val],
    ctx: &mut Ctx<'_>,
    n: usize,
    cut: &mut usize,
) -> SqlResult<Vec<(usize, Value)>> {
    changes_counted(
        &t.table,
        row,
        t.offset,
        &x.assignments,
        &x.checks,
        ctx,
        n,
        cut,
    )
}

/// Each target's row of each joined row, the first time it is met, with
/// its changes (a row number in warnings is the joined row's, as
/// MariaDB's), and in `cut` the warnings of storing the values. Strict
/// mode fails on a value's warning as it is given, unless a warning the
/// conditions left by the time its row was read comes first
/// ([`first_warning`]).
fn changes_of_joined(
    spec: &JoinSpec,
    targets: &[UpdateTarget],
    rows: Vec<JoinedRow>,
    ignore: bool,
    c: &mut Ctx<'_>,
    cut: &mut usize,
) -> SqlResult<Vec<Changed>> {
    let mut seen: Vec<HashSet<Vec<u8>>> = targets.iter().map(|_| HashSet::new()).collect();
    let mut out = Vec::new();
    for (n, (row, read)) in rows.into_iter().enumerate() {
        c.check_killed()?;
        for (x, seen) in targets.iter().zip(&mut seen) {
            let t = &spec.tables[x.at];
            let Some(key) = first_met(t, &row, seen, c.env.tz_secs)? else {
                continue;
            };
            let changes = target_changes(x, t, &row, c, n + 1, cut);
            let changes = match changes {
                // Not counted as matched, as MariaDB counts it.
                Err(e) if ignore && e.code == codes::CONSTRAINT_FAILED => {
                    c.warn(e.code, e.message);
                    continue;
                }
                // A condition's warning of a row before (or of this one)
                // failed the statement first in MariaDB, which tests and
                // changes a row at a time.
                Err(e) => return Err(first_warning(c, read).unwrap_or(e)),
                Ok(changes) => changes,
            };
            let old = row[t.offset..t.offset + t.table.columns.len()].to_vec();
            out.push((x.at, old, key, changes));
        }
    }
    Ok(out)
}

/// Writes the changes: rows matched and rows changed.
/// Inside a transaction a duplicate key fails the statement only, as in
/// MariaDB: each target's rows are checked, in the order they are
/// written, before anything is (`write::first_duplicate`), FOREIGN KEY
/// actions included.
fn no_duplicates(tx: &Transaction<'_>, spec: &JoinSpec, rows: &[Changed]) -> SqlResult<()> {
    for (at, target) in spec.tables.iter().enumerate() {
        let own: Vec<_> = rows
            .iter()
            .filter(|(t, ..)| *t == at)
            .map(|(_, old, key, changes)| (old.as_slice(), key.as_slice(), changes.as_slice()))
            .collect();
        if own
            .iter()
            .any(|(.., changes)| changes_keys(&target.table, changes))
        {
            if let Some(error) = first_duplicate(tx, &target.table, &own)? {
                return Err(error);
            }
        }
    }
    Ok(())
}

fn write_changes(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    rows: &[Changed],
    ignore: bool,
    tz_secs: i64,
) -> SqlResult<(u64, u64)> {
    let matched = rows.len() as u64;
    let mut changed = 0u64;
    // The row of each operation of the batch, to name a 1062's value.
    let mut ops: Vec<usize> = Vec::new();
    // A change that may take a key another row holds: a unique index's,
    // or a primary key's (a moved row).
    let may_collide = rows.iter().any(|(at, _, _, changes)| {
        let def = spec.tables[*at].table.native.def();
        has_unique(def) || changes.iter().any(|(p, _)| def.primary_key.contains(p))
    });
    let send = |ops: &mut Vec<usize>| {
        let result = tx.execute(ExecMode::NoCommit).map_err(|e| {
            let failed = super::write::failed_op(&e).and_then(|op| ops.get(op));
            match failed.and_then(|n| rows.get(*n)) {
                Some((at, old, _, changes))
                    if matches!(e.code, native::UNIQUE_VIOLATION | native::DUPLICATE_KEY) =>
                {
                    update_duplicate(&spec.tables[*at].table, old, changes, &e)
                }
                Some((at, ..)) => txn::native_error_in(&e, &spec.tables[*at].table.name),
                None => txn::native_error_in(&e, "the joined tables"),
            }
        });
        ops.clear();
        result
    };
    for (n, (at, old, key, changes)) in rows.iter().enumerate() {
        let table: &Arc<TableInfo> = &spec.tables[*at].table;
        if ignore && !changes.is_empty() {
            // A row at a time, so that each probe sees the rows changed
            // before it; a row that would duplicate a key is left as it is.
            if key_taken(tx, table, old, key, changes)? {
                continue;
            }
            if define_update(tx, table, old, key, changes, tz_secs, n + 1)? {
                changed += 1;
                ops.extend(std::iter::repeat_n(n, tx.pending_ops()));
                send(&mut ops)?;
            }
            continue;
        }
        let before = tx.pending_ops();
        if define_update(tx, table, old, key, changes, tz_secs, n + 1)? {
            changed += 1;
            ops.extend(std::iter::repeat_n(n, tx.pending_ops() - before));
        }
        if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
            send(&mut ops)?;
        }
    }
    // The last batch is sent here when it may collide, so that a 1062
    // names the value; else it goes with the commit.
    if may_collide && tx.pending_ops() > 0 {
        send(&mut ops)?;
    }
    Ok((matched, changed))
}

/// The tables a multi-table DELETE names to delete from, as places in the
/// join: each a table's alias (or name) in the FROM list, `db.t` and
/// `t.*` too.
fn delete_targets(spec: &JoinSpec, named: &[ast::ObjectName]) -> SqlResult<Vec<usize>> {
    let mut out = Vec::new();
    for n in named {
        let parts = name_parts(n);
        let (db, name) = match parts.as_slice() {
            [t] => (None, t.as_str()),
            [d, t] => (Some(d.as_str()), t.as_str()),
            _ => (None, ""),
        };
        let found = spec.tables.iter().position(|t| {
            t.alias.eq_ignore_ascii_case(name)
                && db.is_none_or(|d| t.rows.is_some() || t.table.db.eq_ignore_ascii_case(d))
        });
        let Some(at) = found else {
            return Err(SqlError::new(
                codes::UNKNOWN_TABLE,
                format!("Unknown table '{name}' in MULTI DELETE"),
            ));
        };
        writable(&spec.tables[at], "DELETE")?;
        if !out.contains(&at) {
            out.push(at);
        }
    }
    Ok(out)
}

/// A multi-table DELETE (`DELETE a, b FROM a JOIN b …`, `DELETE FROM a, b
/// USING a JOIN b …`, `DELETE a FROM a, b WHERE …`).
pub(super) fn delete(
    conn: &mut Conn<'_>,
    del: &ast::Delete,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    let from = match &del.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    // `DELETE FROM a, b USING …` names its targets in FROM; `DELETE a, b
    // FROM …` before it.
    let (named, tables): (Vec<ast::ObjectName>, Vec<ast::TableWithJoins>) = match &del.using {
        Some(using) => {
            let mut named = Vec::with_capacity(from.len());
            for twj in from {
                match &twj.relation {
                    ast::TableFactor::Table { name, .. } if twj.joins.is_empty() => {
                        named.push(name.clone());
                    }
                    other => {
                        return Err(SqlError::unsupported(format_args!(
                            "`{other}` as a table to delete from"
                        )))
                    }
                }
            }
            (named, using.clone())
        }
        None => (del.tables.clone(), from.clone()),
    };
    let super::from::JoinFrom {
        spec,
        hidden,
        late: late_on,
        ..
    } = join_of(
        conn,
        del,
        (tables, &del.selection),
        placeholders,
        params,
        false,
    )?;
    let targets = delete_targets(&spec, &named)?;
    if waited_for_copies(conn, &spec, targets.iter().copied())? {
        return delete(conn, del, params, placeholders);
    }
    // MariaDB reads a multi-table DELETE's subqueries while it deletes:
    // one that reads a table deleted from is refused.
    for at in &targets {
        let t = &spec.tables[*at].table;
        if super::subquery::reads_target(conn, &del.selection, t) {
            return Err(SqlError::new(
                codes::UPDATE_TABLE_USED,
                format!(
                    "Table '{}' is specified twice, both as a target for 'DELETE' and as a \
                     separate source for data",
                    spec.tables[*at].alias
                ),
            ));
        }
    }
    let columns = spec.columns.clone();
    super::correlated::plan(conn, &del.selection, 0, &columns, &hidden, placeholders)?;
    let cond = with_scope(conn, columns, placeholders, |scope| {
        scope.hidden = hidden.clone();
        scope.clause = "WHERE";
        del.selection
            .as_ref()
            .map(|w| {
                let lowered = scope.lower_condition(w)?;
                Ok::<_, SqlError>(super::write::fold_same_column(scope, lowered, true))
            })
            .transpose()
    })?;
    let (cond, late) = split_where(&spec, cond, late_on);
    let per_row = late.is_some();
    let environment = env(conn);
    let info = Arc::clone(&conn.info);
    // DELETE IGNORE: the WHERE's errors are warnings.
    let ignore = crate::engine::session::delete_ignore(del);
    let strict = conn.session.sql_mode_strict() && !ignore;
    let mut ctx = write_ctx(
        params,
        &environment,
        &info.query_killed,
        statement_deadline(conn),
        strict,
        ignore,
    );
    let late = fold_late(&spec, late, &mut ctx)?;
    let tx = txn::take(conn)?;
    let after = Targets {
        cond: None,
        late,
        order: Vec::new(),
        limit: None,
    };
    let evaluated = match read_joined(&tx, &spec, cond.as_ref(), None, &mut ctx) {
        Err(e) => Err((e, Some(tx))),
        Ok(rows) => with_per_row(conn, tx, per_row, &mut ctx, placeholders, |c| {
            order_targets(rows, &after, None, c)
        }),
    };
    let (rows, tx) = match evaluated {
        Ok(done) => done,
        Err((e, Some(tx))) => return txn::finish(conn, tx, Err(e)),
        Err((e, None)) => return Err(e),
    };
    let tz_secs = ctx.env.tz_secs;
    let mut mark = None;
    // Per place in the join: what deleting a row of it does to children.
    let mut fk_actions = Vec::with_capacity(spec.tables.len());
    for (at, t) in spec.tables.iter().enumerate() {
        fk_actions.push(if targets.contains(&at) {
            match super::foreign::parent_actions(conn, &t.table) {
                Ok(actions) => actions,
                Err(e) => return txn::finish(conn, tx, Err(e)),
            }
        } else {
            Vec::new()
        });
    }
    let result = (|| {
        // A row is deleted once, however many joined rows (or names of its
        // table) it is in.
        let mut seen: HashSet<(String, Vec<u8>)> = HashSet::new();
        // The rows to delete: (target, the table's row when a FOREIGN KEY
        // needs it, key).
        let mut gone: Vec<(usize, Vec<Val>, Vec<Value>)> = Vec::new();
        for (row, _) in &rows {
            for at in &targets {
                let t = &spec.tables[*at];
                let Some(key) = key_in(t, row, tz_secs)? else {
                    continue;
                };
                let def = t.table.native.def();
                if !seen.insert((same_table(&t.table), key_bytes(def, &key))) {
                    continue;
                }
                let own = if fk_actions[*at].is_empty() {
                    Vec::new()
                } else {
                    row[t.offset..t.offset + t.table.columns.len()].to_vec()
                };
                gone.push((*at, own, key));
            }
        }
        for at in &targets {
            let changes: Vec<super::foreign::ParentChange<'_>> = gone
                .iter()
                .filter(|g| g.0 == *at)
                .map(|(_, row, key)| (row.as_slice(), key.as_slice(), None))
                .collect();
            let table = &spec.tables[*at].table;
            txn::mark_statement(&*conn, &tx, (&fk_actions[*at], changes.len()), &mut mark)?;
            super::foreign::parent_changed(
                &*conn,
                &tx,
                table,
                &fk_actions[*at],
                &changes,
                &mut ctx,
                0,
            )?;
        }
        for (at, _, key) in &gone {
            let t = &spec.tables[*at];
            tx.define(Op::delete(&t.table.native, key))
                .map_err(|e| txn::native_error_in(&e, &t.table.name))?;
            if tx.pending_ops() >= OPS_PER_EXECUTE_MAX {
                tx.execute(ExecMode::NoCommit)
                    .map_err(|e| txn::native_error_in(&e, &t.table.name))?;
            }
        }
        Ok(gone.len() as u64)
    })();
    txn::end_statement(&tx, mark, result.is_err());
    let affected = finish_write(conn, tx, result, ctx)?;
    Ok(Answered::Ok(OkInfo {
        affected_rows: affected,
        ..OkInfo::default()
    }))
}
