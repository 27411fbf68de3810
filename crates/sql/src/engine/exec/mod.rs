//! The executors: queries and writes run with the native API.

mod claim;
pub mod convert;
pub(crate) mod correlated;
pub mod cte;
pub(crate) mod derived;
pub(crate) mod foreign;
mod from;
pub mod join;
pub(crate) mod json_table;
pub mod load;
mod merge;
mod multi;
pub mod outfile;
pub mod pushed;
mod select;
mod semi;
pub mod subquery;
pub(crate) mod through_view;
mod window;
mod write;
pub(crate) use write::{
    check_row_of, duplicate_error, failed_op, lower_checks_as, lower_defaults, now_value,
    LoweredDefault,
};

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use schema::Value;
use skarv_client::{ExecMode, Filter, LockMode, LockWait, Op, OpResult, ScanOptions, Transaction};
use sqlparser::ast::Statement;
use sqlparser::tokenizer::Location;

use super::catalog::{SqlType, TableInfo};
use super::expr::{Ctx, Env, Expr, Scope, ScopeColumn, Val};
use super::plan::Access;
use super::{txn, Answered, Conn};
use crate::backend::ResultSink;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::SqlValue;

pub(crate) use multi::{is_multi_delete, is_multi_update};
pub use select::{describe, describe_for_create};

/// Key reads or writes defined per execute (one round trip each).
pub const OPS_PER_EXECUTE_MAX: usize = 256;
/// Most rows one table access keeps in the SQL node (what it sorts,
/// groups or changes); past it the statement fails rather than exhaust
/// the node's memory.
pub const FETCH_ROWS_MAX: usize = 10_000_000;

/// `DO expr, …` (parsed as the SELECT of its expressions): they are
/// evaluated, their warnings and errors the statement's
/// ([`select::run_do`]); the answer is an OK.
pub fn run_do(conn: &mut Conn<'_>, select: &Statement) -> SqlResult<Answered> {
    super::users::authorize(conn, select)?;
    let (q, params, placeholders) = query_start(conn, select, &[])?;
    select::run_do(conn, q, &params, &placeholders)?;
    Ok(Answered::Ok(crate::engine::OkInfo {
        warnings: conn.session.warning_count(),
        ..crate::engine::OkInfo::default()
    }))
}

/// Runs a query (`SELECT`, `UNION`, …), its rows to `sink`.
pub fn query(
    conn: &mut Conn<'_>,
    statement: &Statement,
    params: &[SqlValue],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let (q, params, placeholders) = query_start(conn, statement, params)?;
    if select::has_into(q) {
        return select::run_into(conn, q, &params, &placeholders);
    }
    match select_limit(conn, q) {
        Some(left) => {
            let mut limited = SelectLimit { sink, left };
            select::run(conn, q, &params, &placeholders, more, &mut limited)
        }
        None => select::run(conn, q, &params, &placeholders, more, sink),
    }
}

/// `sql_select_limit` of a top-level query: the rows it sends at most,
/// unless it has a LIMIT of its own (which wins, as in MariaDB).
pub(crate) fn select_limit(conn: &Conn<'_>, q: &sqlparser::ast::Query) -> Option<u64> {
    let limit = conn.session.vars.hot().select_limit?;
    q.limit_clause.is_none().then_some(limit)
}

/// A client's sink that passes on the first `left` rows of a result set
/// and drops the rest ([`select_limit`]). The query still reads them; the
/// variable is a guard for interactive sessions, not a plan.
struct SelectLimit<'a> {
    sink: &'a mut dyn ResultSink,
    left: u64,
}

impl ResultSink for SelectLimit<'_> {
    fn columns(&mut self, columns: &[crate::value::ColumnMeta]) -> std::io::Result<()> {
        self.sink.columns(columns)
    }
    fn row(&mut self, values: &[SqlValue]) -> std::io::Result<()> {
        if self.left == 0 {
            return Ok(());
        }
        self.left -= 1;
        self.sink.row(values)
    }
    fn end_rows(&mut self, info: &crate::backend::OkInfo) -> std::io::Result<()> {
        self.sink.end_rows(info)
    }
    fn ok(&mut self, info: &crate::backend::OkInfo) -> std::io::Result<()> {
        self.sink.ok(info)
    }
    fn error(&mut self, error: &SqlError) -> std::io::Result<()> {
        self.sink.error(error)
    }
}

/// What running a query starts with: the query, its parameters as
/// values, its placeholders.
type QueryStart<'q> = (&'q sqlparser::ast::Query, Vec<Val>, Arc<[Location]>);

/// The [`QueryStart`] of `statement`.
fn query_start<'q>(
    conn: &mut Conn<'_>,
    statement: &'q Statement,
    params: &[SqlValue],
) -> SqlResult<QueryStart<'q>> {
    conn.subqueries.clear();
    let Statement::Query(q) = statement else {
        return Err(SqlError::unsupported(format_args!("`{statement}`")));
    };
    let params: Vec<Val> = params.iter().map(convert::from_sql).collect();
    let placeholders = placeholder_locations(conn, statement);
    Ok((q, params, placeholders))
}

/// Starts a query that a thread-pool worker may send together with other
/// connections' statements: when it reads one row by key outside a
/// transaction, its read is prepared in the connection's session, unsent
/// (Some; [`finish_deferred`] answers it once sent; only with
/// `may_defer`); otherwise it runs to `sink` as [`query`] runs it (None),
/// by the plan kept in `kept` when that still holds.
pub(crate) fn begin_deferred<'s>(
    conn: &mut Conn<'s>,
    statement: &Statement,
    params: &[SqlValue],
    sink: &mut dyn ResultSink,
    kept: Option<&mut Option<select::KeptPlan>>,
    may_defer: bool,
) -> SqlResult<Option<select::Deferred<'s>>> {
    let (q, params, placeholders) = query_start(conn, statement, params)?;
    if select::has_into(q) {
        if let Answered::Ok(mut info) = select::run_into(conn, q, &params, &placeholders)? {
            info.warnings = conn.session.warning_count();
            sink.ok(&info)
                .map_err(|e| SqlError::new(codes::UNKNOWN, format!("sending OK: {e}")))?;
        }
        return Ok(None);
    }
    if let Some(left) = select_limit(conn, q) {
        // Not deferred: its row would be sent past this sink.
        let mut limited = SelectLimit { sink, left };
        return select::begin_deferred(conn, q, params, &placeholders, &mut limited, kept, false);
    }
    select::begin_deferred(conn, q, params, &placeholders, sink, kept, may_defer)
}

pub(crate) use select::{has_into, last_select_mut};

pub(crate) use select::{finish_deferred, Deferred, KeptPlan};

/// Runs `EXPLAIN [ANALYZE | FORMAT=…]` of a query.
pub fn explain(
    conn: &mut Conn<'_>,
    statement: &Statement,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    use sqlparser::ast::{AnalyzeFormat as F, AnalyzeFormatKind as K};
    conn.subqueries.clear();
    let Statement::Explain {
        statement: inner,
        analyze,
        format,
        ..
    } = statement
    else {
        return Err(SqlError::unsupported(format_args!("`{statement}`")));
    };
    super::users::authorize(conn, inner)?;
    let format = match (analyze, format) {
        (true, _) => select::Format::Analyze,
        (false, None | Some(K::Keyword(F::TRADITIONAL) | K::Assignment(F::TRADITIONAL))) => {
            select::Format::Traditional
        }
        (false, Some(K::Keyword(F::JSON) | K::Assignment(F::JSON))) => select::Format::Json,
        (false, Some(K::Keyword(F::TREE) | K::Assignment(F::TREE))) => select::Format::Tree,
        (false, Some(other)) => {
            return Err(SqlError::unsupported(format_args!("EXPLAIN {other}")));
        }
    };
    match &**inner {
        Statement::Query(q) => select::explain(conn, q, format, more, sink),
        Statement::Update(_) | Statement::Delete(_) => {
            write::explain(conn, inner, format, more, sink)
        }
        _ => Err(SqlError::unsupported(format_args!(
            "EXPLAIN of `{}`",
            super::stdx_truncate(&inner.to_string(), 60)
        ))),
    }
}

/// Runs `INSERT`, `REPLACE`, `UPDATE` or `DELETE`.
pub fn write(
    conn: &mut Conn<'_>,
    statement: &Statement,
    params: &[SqlValue],
) -> SqlResult<Answered> {
    let writes_before = conn.tx.writes;
    start_write(conn)?;
    let params: Vec<Val> = params.iter().map(convert::from_sql).collect();
    let placeholders = placeholder_locations(conn, statement);
    let answered = write_as_run(conn, statement, &params, &placeholders);
    if answered.is_err() {
        // A failed write that left the transaction open took back what it
        // wrote (one that did not ended the transaction, `writes` 0): a
        // `ROLLBACK TO SAVEPOINT` after it passes no write (Django's
        // savepoint around a create that fails with 1062).
        conn.tx.writes = conn.tx.writes.min(writes_before);
    }
    answered
}

/// [`write::run`], through the view it names when it names one.
fn write_as_run(
    conn: &mut Conn<'_>,
    statement: &Statement,
    params: &[Val],
    placeholders: &[Location],
) -> SqlResult<Answered> {
    match write::run(conn, statement, params, placeholders) {
        // The target is a view (`table_of`): the statement of its table,
        // when it is updatable; checked only once a write fails so.
        Err(e) if e.code == codes::NON_UPDATABLE_TABLE => {
            match through_view::rewrite(conn, statement)? {
                Some((rewritten, checks)) => {
                    // The views' CHECK OPTIONs hold for this write only.
                    conn.view_checks = checks;
                    let answered = write::run(conn, &rewritten, params, placeholders);
                    conn.view_checks.clear();
                    answered
                }
                None => Err(e),
            }
        }
        answered => answered,
    }
}

/// Runs an `INSERT`, `REPLACE` or single-table `DELETE` with `RETURNING`
/// (MariaDB's): the list is planned first, the write runs with its rows
/// collected (`Conn::returned`), and its answer is the list's values of
/// each row inserted (not those IGNORE left out) or deleted, in the order
/// written, as a result set.
pub fn write_returning(
    conn: &mut Conn<'_>,
    statement: &Statement,
    params: &[SqlValue],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let placeholders = placeholder_locations(conn, statement);
    let returning = write::plan_returning(conn, statement, &placeholders)?;
    conn.returned = Some(Vec::new());
    let answered = write(conn, statement, params);
    let rows = conn.returned.take().unwrap_or_default();
    answered?;
    let values: Vec<Val> = params.iter().map(convert::from_sql).collect();
    let environment = env(conn);
    let mut ctx = Ctx::new(&values, &environment);
    let out = rows
        .iter()
        .map(|row| returning.row(row, &mut ctx))
        .collect::<SqlResult<Vec<_>>>();
    keep_warnings(conn, &mut ctx);
    let out = out?;
    let io = |e: std::io::Error| SqlError::new(codes::UNKNOWN, format!("writing the result: {e}"));
    sink.columns(&returning.metas).map_err(io)?;
    for row in &out {
        sink.row(row).map_err(io)?;
    }
    // The write's warnings and the list's, counted in the result's end.
    let info = crate::backend::OkInfo {
        more_results: more,
        warnings: conn.session.warning_count(),
        ..crate::backend::OkInfo::default()
    };
    sink.end_rows(&info).map_err(io)?;
    Ok(Answered::Done)
}

/// The columns a write's `RETURNING` answers with (for a prepared
/// statement's description).
pub fn describe_returning(
    conn: &Conn<'_>,
    statement: &Statement,
    placeholders: &[Location],
) -> SqlResult<Vec<crate::value::ColumnMeta>> {
    write::plan_returning(conn, statement, placeholders).map(|r| r.metas)
}

/// What every statement that writes rows (INSERT, UPDATE, DELETE, LOAD
/// DATA) does first: 1792 in a READ ONLY transaction; the transaction
/// marked as written (its later reads lock, to see the rows) and its
/// write counted (what `ROLLBACK TO SAVEPOINT` checks).
pub(crate) fn start_write(conn: &mut Conn<'_>) -> SqlResult<()> {
    if super::txn::read_only_now(conn) {
        return Err(SqlError::new(
            1792,
            "Cannot execute statement in a READ ONLY transaction",
        ));
    }
    conn.subqueries.clear();
    conn.tx.wrote = true;
    conn.tx.writes += 1;
    Ok(())
}

/// Placeholders of the statement: a prepared statement's text is known to
/// the prepared-statement module; a text query has none.
fn placeholder_locations(conn: &Conn<'_>, _statement: &Statement) -> Arc<[Location]> {
    static NONE: std::sync::LazyLock<Arc<[Location]>> = std::sync::LazyLock::new(|| Arc::from([]));
    conn.prepared
        .running_shared()
        .unwrap_or_else(|| Arc::clone(&NONE))
}

/// The facts functions read, as of now.
pub fn env(conn: &Conn<'_>) -> Env {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    Env {
        connection_id: conn.info.id,
        database: conn.session.database.clone(),
        user: conn.session.user_host(),
        last_insert_id: Arc::clone(&conn.session.last_insert_id),
        found_rows: conn.session.found_rows,
        row_count: conn.session.row_count,
        now_micros: now,
        tz_secs: super::session::time_zone_secs(conn),
        version: super::session::VERSION,
        join_pushdown: conn.session.vars.hot().join_pushdown,
        no_zero_date: conn.session.vars.hot().no_zero_date,
        no_zero_in_date: conn.session.vars.hot().no_zero_in_date,
        user_locks: Some(std::sync::Arc::clone(&conn.engine.user_locks)),
        rand_states: Default::default(),
        user_vars: Arc::clone(&conn.session.assigned_vars),
        warned_once: Default::default(),
        range_warned: std::sync::Arc::clone(&conn.subqueries.range_warned),
        ignoring: conn.session.ignoring,
        safe_updates: conn.session.vars.hot().safe_updates,
    }
}

/// `@@name`, as the session module answers it.
pub fn variable(conn: &Conn<'_>, name: &str, global: bool) -> SqlResult<Val> {
    super::session::variable(conn, name, global).map(|v| convert::from_sql(&v))
}

/// The value of a constant expression (`SET @x = expr`), in the form its
/// kind's result column takes; `keep_digits`: a DECIMAL keeps every digit
/// it has (a quotient's nine of `1/3`, as a MariaDB user variable keeps
/// them) rather than the kind's shown scale.
pub fn eval_constant(
    conn: &mut Conn<'_>,
    expr: &sqlparser::ast::Expr,
    keep_digits: bool,
) -> SqlResult<SqlValue> {
    let placeholders = conn.prepared.running_placeholders().to_vec();
    conn.subqueries.clear();
    subquery::prepare(conn, expr, 0, &placeholders, Some(&[]))?;
    let (lowered, meta) = with_scope(conn, Vec::new(), &placeholders, |s| {
        let lowered = s.lower(expr)?;
        let meta = s.meta(&lowered, "");
        Ok((lowered, meta))
    })?;
    let environment = env(conn);
    let mut ctx = Ctx::new(&[], &environment);
    let v = lowered.eval(&[], &mut ctx)?;
    keep_warnings(conn, &mut ctx);
    Ok(match v {
        Val::Dec(d) if keep_digits => SqlValue::Decimal(Val::Dec(d).to_text()),
        v => convert::to_sql(&v, &meta),
    })
}

/// The columns of a table as an expression scope.
pub fn table_scope(table: &TableInfo, alias: &str) -> Vec<ScopeColumn> {
    table
        .columns
        .iter()
        .map(|c| {
            let mut meta = c.meta.clone();
            // The table's own name (the usual alias) is shared, not copied.
            if *meta.table != *alias {
                meta.table = alias.into();
            }
            ScopeColumn {
                name: Arc::clone(&meta.org_name),
                table: Arc::clone(&meta.table),
                kind: convert::column_kind(&c.ty),
                nullable: c.nullable,
                meta,
                // A TIMESTAMP's literal default is kept in UTC and read in
                // the session's zone, which the scope does not know: the
                // statement's evaluation converts it.
                default: Some(match &table.native.def().columns[c.native].default {
                    Some(Value::Timestamp(micros)) if !c.default_now && !c.default_expr => {
                        let fsp = match c.ty {
                            SqlType::Timestamp { fsp } => fsp,
                            _ => 0,
                        };
                        crate::engine::expr::DefaultOf::Utc {
                            micros: *micros,
                            fsp,
                        }
                    }
                    _ => column_default(table, c, 0),
                }),
                members: match &c.ty {
                    SqlType::Enum(names) | SqlType::Set(names) => {
                        Some(crate::engine::expr::Members {
                            set: matches!(c.ty, SqlType::Set(_)),
                            joined: names.join("\0").into(),
                        })
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

/// Column `c`'s default as an INSERT fills it (`DEFAULT(c)`, `SET c =
/// DEFAULT`); `tz_secs`: the session's zone, for a TIMESTAMP's.
pub(crate) fn column_default(
    table: &TableInfo,
    c: &crate::engine::catalog::SqlColumn,
    tz_secs: i64,
) -> crate::engine::expr::DefaultOf {
    use crate::engine::expr::DefaultOf;
    if c.default_now {
        let fsp = match c.ty {
            SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => fsp,
            _ => 0,
        };
        return DefaultOf::Now(fsp);
    }
    if let (true, Some(text)) = (c.default_expr, &c.default) {
        return DefaultOf::Expr(text.as_str().into());
    }
    match &table.native.def().columns[c.native].default {
        Some(d) => DefaultOf::Value(convert::from_native(d, &c.ty, tz_secs)),
        None if c.nullable => DefaultOf::Value(Val::Null),
        None => DefaultOf::Missing,
    }
}

/// A lowering scope over `columns` with the session's variables.
pub fn with_scope<R>(
    conn: &Conn<'_>,
    columns: Vec<ScopeColumn>,
    placeholders: &[Location],
    f: impl FnOnce(&mut Scope<'_>) -> SqlResult<R>,
) -> SqlResult<R> {
    let var = |name: &str, global: bool| variable(conn, name, global);
    let user_var = |name: &str| {
        conn.session
            .user_vars
            .get(name)
            .map_or(Val::Null, convert::from_sql)
    };
    let mut scope = Scope::new(columns, placeholders, &var, &user_var);
    scope.subqueries = Some(&conn.subqueries.results);
    scope.correlated = Some(&conn.subqueries.correlated);
    scope.outer = &conn.subqueries.outer;
    scope.assigning = conn.session.assigning;
    scope.ignoring = conn.session.ignoring;
    scope.database.clone_from(&conn.session.database);
    f(&mut scope)
}

/// The native names of the columns of `table` that `exprs` name, with
/// the primary key's (what a read of only those must ask for), or None
/// when they name every column.
pub(crate) fn columns_named<'t, 'e>(
    table: &'t TableInfo,
    exprs: impl IntoIterator<Item = &'e Expr>,
) -> Option<Vec<&'t str>> {
    let mut used = vec![false; table.columns.len()];
    let mut columns = Vec::new();
    for e in exprs {
        columns.clear();
        crate::engine::plan::join::columns(e, &mut columns);
        for &at in &columns {
            // A position outside the table's columns: read them all.
            *used.get_mut(at)? = true;
        }
    }
    columns_used(table, &used)
}

/// The native names of the columns of `table` marked in `used` (one per
/// SQL column), with the primary key's, or None when every one is.
pub(crate) fn columns_used<'t>(table: &'t TableInfo, used: &[bool]) -> Option<Vec<&'t str>> {
    if used.iter().all(|u| *u) {
        return None;
    }
    let def = table.native.def();
    let mut names: Vec<&str> = table
        .columns
        .iter()
        .zip(used)
        .filter(|(_, used)| **used)
        .filter_map(|(c, _)| def.columns.get(c.native).map(|n| n.name.as_str()))
        .collect();
    for &k in &def.primary_key {
        let name = def.columns.get(k)?.name.as_str();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Some(names)
}

/// A key's values as bytes equal for equal values (of one type each):
/// what sets of keys hold, cheaper than their text.
pub(crate) fn key_bytes(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 9);
    for v in values {
        proto::value::put_value(&mut out, v.as_ref());
    }
    out
}

/// A table row as SQL values, from a native row of all columns.
pub(crate) fn sql_row(
    table: &TableInfo,
    values: &[Value],
    positions: &[usize],
    tz_secs: i64,
) -> Vec<Val> {
    place_row(table, values, positions, |v, ty| {
        convert::from_native(v, ty, tz_secs)
    })
}

/// [`sql_row`] of a native row, its values converted as they are decoded
/// (`Row::each_value`): no native copy of the row between.
pub(crate) fn sql_row_of(table: &TableInfo, r: &skarv_client::Row, tz_secs: i64) -> Vec<Val> {
    let mut row = Vec::with_capacity(table.columns.len());
    row.resize_with(table.columns.len(), || Val::Null);
    let mut positions = r.columns().iter();
    r.each_value(|v| {
        let Some(pos) = positions.next() else {
            return;
        };
        if let Some(at) = table.sql_column(*pos) {
            row[at] = convert::from_native_ref(v, &table.columns[at].ty, tz_secs);
        }
    });
    row
}

/// Each value converted into the place of its column (by the table
/// position in `positions`); the columns not read are NULL.
fn place_row<V>(
    table: &TableInfo,
    values: impl IntoIterator<Item = V>,
    positions: &[usize],
    mut to_val: impl FnMut(V, &SqlType) -> Val,
) -> Vec<Val> {
    let mut row = Vec::with_capacity(table.columns.len());
    row.resize_with(table.columns.len(), || Val::Null);
    for (v, pos) in values.into_iter().zip(positions) {
        if let Some(at) = table.sql_column(*pos) {
            row[at] = to_val(v, &table.columns[at].ty);
        }
    }
    row
}

/// The rows a plan finds that pass the condition, with their primary
/// keys when `lock` is set (for updates and deletes). `stop_after`: enough
/// rows were seen (a LIMIT without ORDER BY). `commit`: key reads may
/// commit the transaction with their execute (an autocommit read); the
/// flag says they did. `columns`: when given, only those (native names;
/// the primary key among them) of each row are read: the data nodes send,
/// and the SQL node converts, only what the statement uses (NDB's mysqld
/// reads only the columns a query needs too). The other columns of the
/// rows are NULL.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch<'c>(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<Filter>,
    lock: Option<RowLock>,
    descending: bool,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'c>,
    stop_after: Option<usize>,
    commit: Option<&mut bool>,
    columns: Option<&[&str]>,
) -> SqlResult<Vec<(Vec<Val>, Vec<Value>)>> {
    // A locking read that stops after a few rows asks for batches of that
    // many: every row a batch brings is locked to the transaction's end,
    // read or not (the default batch is 256 rows from each partition).
    let batch_rows = match (lock, stop_after) {
        (Some(_), Some(n)) => locking_batch_rows(n),
        _ => 0,
    };
    let shape = ScanShape {
        batch_rows,
        ..ScanShape::default()
    };
    let (read, commit) = (Read { lock, descending }, commit);
    fetch_kept(
        tx, table, access, filter, read, cond, ctx, stop_after, commit, columns, shape,
    )
}

/// How [`fetch_kept`] locks and in which direction it reads an index.
#[derive(Clone, Copy)]
struct Read {
    lock: Option<RowLock>,
    descending: bool,
}

/// [`fetch_each`]'s rows kept (at most `FETCH_ROWS_MAX`), up to
/// `stop_after`.
#[allow(clippy::too_many_arguments)]
fn fetch_kept<'c>(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<Filter>,
    read: Read,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'c>,
    stop_after: Option<usize>,
    commit: Option<&mut bool>,
    columns: Option<&[&str]>,
    shape: ScanShape<'_>,
) -> SqlResult<Vec<(Vec<Val>, Vec<Value>)>> {
    let mut out = Vec::new();
    let each = |row: Vec<Val>, key: Vec<Value>, _: &mut Ctx<'c>| -> SqlResult<bool> {
        if out.len() >= FETCH_ROWS_MAX {
            return Err(SqlError::unsupported(format_args!(
                "statements that keep more than {FETCH_ROWS_MAX} rows in the SQL node"
            )));
        }
        out.push((row, key));
        Ok(stop_after.is_none_or(|n| out.len() < n))
    };
    let Read { lock, descending } = read;
    fetch_each(
        tx, table, access, filter, lock, descending, cond, ctx, commit, columns, shape, each,
    )?;
    Ok(out)
}

/// [`fetch`]'s rows read without a lock, each with its primary key (which
/// a committed scan's rows otherwise go without): a claim's candidates.
/// `order`: one partition only, read in its index order (descending or
/// not).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_keyed(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<Filter>,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'_>,
    stop_after: Option<usize>,
    columns: Option<&[&str]>,
    order: Option<(u32, bool)>,
) -> SqlResult<Vec<(Vec<Val>, Vec<Value>)>> {
    // Batches no larger than the rows wanted: a partition's first batch
    // would bring 256 rows for the 16 a claim looks at.
    let shape = ScanShape {
        keyed: true,
        partition: order.map(|(partition, _)| partition),
        batch_rows: stop_after.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        ..ScanShape::default()
    };
    let read = Read {
        lock: None,
        descending: order.is_some_and(|(_, descending)| descending),
    };
    fetch_kept(
        tx, table, access, filter, read, cond, ctx, stop_after, None, columns, shape,
    )
}

/// How [`fetch_each`] scans, beyond what it reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanShape<'a> {
    /// Rows per batch from each partition; 0: the default.
    pub batch_rows: u32,
    /// Each row with its primary key, also without a lock.
    pub keyed: bool,
    /// Only this partition (by number): its rows in index order.
    pub partition: Option<u32>,
    /// A distinct scan of the index's first columns
    /// (`ScanOptions::distinct_prefix`): each partition's first row of
    /// each of their values only. 0: every row.
    pub distinct_prefix: u8,
    /// A counting scan (`ScanOptions::count`): rows of one value each, an
    /// `Int` of how many rows passed, which add up to the count. Only
    /// where the filter is the whole condition (no recheck here) and the
    /// ranges cannot overlap.
    pub count: bool,
    /// A counting scan's aggregates (`ScanOptions::aggregates`), per
    /// group of `group_by` (native column names): each row comes to
    /// `each` as the `Int` of its rows counted, with the rest of its
    /// values (the group values, then the aggregates') as its key.
    pub aggregates: &'a [(skarv_client::AggregateFn, &'a str)],
    pub group_by: &'a [&'a str],
}

/// [`fetch`]'s rows handed to `each` as they come, none kept here (a
/// SELECT that sends its rows as it reads them): `each` says whether to
/// go on.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_each<'c>(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<Filter>,
    lock: Option<RowLock>,
    descending: bool,
    cond: Option<&Expr>,
    ctx: &mut Ctx<'c>,
    mut commit: Option<&mut bool>,
    columns: Option<&[&str]>,
    shape: ScanShape<'_>,
    mut each: impl FnMut(Vec<Val>, Vec<Value>, &mut Ctx<'c>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let native = &table.native;
    // A scan whose whole condition went to the data nodes as its filter,
    // in comparisons that mean there what they mean here, returns only
    // rows that pass it: testing each again is work for nothing (7 % of
    // the SQL node's instructions in oltp_read_only). Key reads carry no
    // filter.
    let recheck = recheck_of(table, access, filter.as_ref(), cond, ctx)?;
    let mut keep = |row: Vec<Val>, key: Vec<Value>, ctx: &mut Ctx<'c>| -> SqlResult<bool> {
        ctx.check_killed()?;
        if let Some(c) = recheck {
            if !c.test(&row, ctx)? {
                return Ok(true);
            }
        }
        each(row, key, ctx)
    };
    // Several rows locked by primary key: claimed in its order, so that
    // two statements locking the same rows queue up rather than deadlock.
    if let (Access::Keys(keys), Some(lock)) = (access, lock) {
        if let Some(rows) = claim::claim_keys(tx, table, keys, lock, cond, columns, ctx)? {
            for (row, key) in rows {
                if !each(row, key, ctx)? {
                    break;
                }
            }
            return Ok(());
        }
    }
    match access {
        Access::Nothing => {}
        Access::Keys(keys) | Access::Unique { keys, .. } => {
            let index = match access {
                Access::Unique { index, .. } => Some(index.as_str()),
                _ => None,
            };
            // Two values a collation deems equal find one row once.
            let mut seen = std::collections::HashSet::new();
            for chunk in keys.chunks(OPS_PER_EXECUTE_MAX) {
                let mut handles = Vec::with_capacity(chunk.len());
                for key in chunk {
                    let op = key_read(native, key, lock, index, columns);
                    handles.push(
                        tx.define(op)
                            .map_err(|e| txn::native_error_in(&e, &table.name))?,
                    );
                }
                // An autocommit read of one batch commits with it: one
                // round trip.
                let mode = match (&commit, keys.len() <= OPS_PER_EXECUTE_MAX) {
                    (Some(_), true) => ExecMode::Commit,
                    _ => ExecMode::NoCommit,
                };
                let outcome = tx
                    .execute(mode)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                if mode == ExecMode::Commit {
                    if let Some(flag) = commit.as_deref_mut() {
                        *flag = true;
                    }
                }
                for h in handles {
                    let Some(r) = found_row(table, outcome.result(h))? else {
                        continue;
                    };
                    let key = primary_key_of_row(table, r);
                    // One key finds one row: nothing to compare.
                    if keys.len() > 1 && !seen.insert(key_bytes(&key)) {
                        continue;
                    }
                    let row = sql_row_of(table, r, ctx.env.tz_secs);
                    if !keep(row, key, ctx)? {
                        return Ok(());
                    }
                }
            }
        }
        Access::Range { .. } | Access::Scan => {
            // A condition fixing the distribution key scans the partitions
            // holding its values only (one for `=`, several for `IN`).
            let mut partition_key = None;
            let mut partition_keys = Vec::new();
            match super::plan::partition_keys(table, cond, ctx)? {
                // An IN list of NULLs only: no row (the condition says so
                // too); nothing to prune by.
                Some(keys) if keys.is_empty() => {}
                Some(mut keys) if keys.len() == 1 => partition_key = keys.pop(),
                Some(keys) => partition_keys = keys,
                None => {}
            }
            let mut options = ScanOptions {
                filter,
                lock: lock.map(|l| l.mode),
                lock_wait: RowLock::wait_of(lock),
                partition_key,
                projection: columns.map(<[&str]>::to_vec),
                partition_keys,
                // An autocommit read alone in its statement: its scan is
                // all its transaction does, and the TC ends the
                // transaction with the scan (no commit round trip).
                ends_transaction: commit.is_some(),
                batch_rows: shape.batch_rows,
                partition: shape.partition,
                distinct_prefix: shape.distinct_prefix,
                count: shape.count,
                aggregates: shape.aggregates.to_vec(),
                group_by: shape.group_by.to_vec(),
                ..ScanOptions::default()
            };
            // The ranges to scan: the bounds, or each point of an IN list.
            let mut ranges = Vec::new();
            if let Access::Range {
                index,
                lower,
                upper,
                points,
                ..
            } = access
            {
                options.index = Some(index.as_str());
                options.descending = descending;
                if points.is_empty() {
                    ranges.push((lower.clone(), upper.clone()));
                } else {
                    // Each point an equal range, all in one multi-range
                    // scan: one request and one round trip for the list.
                    let mut each = points
                        .iter()
                        .map(|p| (Some((p.clone(), true)), Some((p.clone(), true))));
                    ranges.extend(each.next());
                    options.more_ranges = each.collect();
                }
            } else {
                ranges.push((None, None));
            }
            // Points a collation deems equal ('a' and 'A') are two ranges
            // over the same rows: each row is kept once.
            let mut seen = (!options.more_ranges.is_empty() && !shape.count)
                .then(std::collections::HashSet::new);
            debug_assert!(
                !shape.count || recheck.is_none(),
                "a counting scan's filter is its whole condition"
            );
            // A scan does not carry the transaction's deferred writes:
            // they go first, so that the scan sees them.
            txn::flush(tx).map_err(|e| txn::native_error_in(&e, &table.name))?;
            // The last range takes the options themselves: a clone (the
            // filter's tree, an IN list's ranges) cost 6 % of the SQL
            // node's instructions for sysbench's select_random_points.
            let mut ranges = ranges.into_iter().peekable();
            'ranges: while let Some((lower, upper)) = ranges.next() {
                let mut options = match ranges.peek() {
                    Some(_) => options.clone(),
                    None => std::mem::take(&mut options),
                };
                options.lower = lower;
                options.upper = upper;
                let scan = tx
                    .scan(native, options)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                for r in scan {
                    let mut r = r.map_err(|e| txn::native_error_in(&e, &table.name))?;
                    if shape.count {
                        let n = match r.values().first() {
                            Some(Value::UInt(n)) => i64::try_from(*n).unwrap_or(i64::MAX),
                            other => {
                                return Err(SqlError::new(
                                    codes::UNKNOWN,
                                    format!(
                                        "a counting scan of table `{}` returned {other:?}",
                                        table.name
                                    ),
                                ))
                            }
                        };
                        let mut rest = Vec::new();
                        if !shape.aggregates.is_empty() || !shape.group_by.is_empty() {
                            rest = r.take_values();
                            rest.remove(0);
                        }
                        if !keep(vec![Val::Int(n)], rest, ctx)? {
                            break 'ranges;
                        }
                        continue;
                    }
                    let mut primary_key = None;
                    if let Some(seen) = &mut seen {
                        let key = primary_key_of_row(table, &r);
                        if !seen.insert(key_bytes(&key)) {
                            continue;
                        }
                        primary_key = Some(key);
                    }
                    let key = if lock.is_some() {
                        r.key().to_vec()
                    } else if shape.keyed {
                        primary_key.unwrap_or_else(|| primary_key_of_row(table, &r))
                    } else {
                        Vec::new()
                    };
                    let row = sql_row_of(table, &r, ctx.env.tz_secs);
                    if !keep(row, key, ctx)? {
                        break 'ranges;
                    }
                }
            }
        }
    }
    Ok(())
}

/// What of `cond` the SQL node tests on each row a read of `access`
/// returns: nothing when the read is a scan whose filter is all of it in
/// comparisons that mean there what they mean here (`plan::pushed_exactly`),
/// else the whole condition. Key reads carry no filter.
pub(crate) fn recheck_of<'e>(
    table: &TableInfo,
    access: &Access,
    filter: Option<&Filter>,
    cond: Option<&'e Expr>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<&'e Expr>> {
    Ok(match (access, filter, cond) {
        (Access::Range { .. } | Access::Scan, Some(_), Some(c))
            if super::plan::pushed_exactly(table, c, ctx)? =>
        {
            None
        }
        _ => cond,
    })
}

/// The scan batch of a locking read that needs `rows` rows at most
/// (0: the default): no more rows locked per partition than it can use.
pub(crate) fn locking_batch_rows(rows: usize) -> u32 {
    u32::try_from(rows)
        .unwrap_or(u32::MAX)
        .clamp(1, skarv_client::SCAN_BATCH_ROWS_DEFAULT)
}

/// A statement's row lock (`FOR UPDATE`, `FOR SHARE`, the reads of an
/// UPDATE or DELETE): its mode, and what it does about a row another
/// transaction holds (`NOWAIT`, `SKIP LOCKED`; else it waits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowLock {
    pub mode: LockMode,
    pub wait: LockWait,
}

impl RowLock {
    pub const EXCLUSIVE: RowLock = RowLock {
        mode: LockMode::Exclusive,
        wait: LockWait::Wait,
    };
    pub const SHARED: RowLock = RowLock {
        mode: LockMode::Shared,
        wait: LockWait::Wait,
    };

    /// The mode of an optional lock: none is a committed read.
    pub fn mode_of(lock: Option<RowLock>) -> LockMode {
        lock.map_or(LockMode::Committed, |l| l.mode)
    }

    /// The wait policy of an optional lock: a committed read waits for
    /// nothing anyway.
    pub fn wait_of(lock: Option<RowLock>) -> LockWait {
        lock.map_or(LockWait::Wait, |l| l.wait)
    }
}

/// A read of one row by primary key, or by unique index `index`, that a
/// missing row does not fail; only `columns` when given. Under `SKIP
/// LOCKED` a row another transaction holds is missing too; under
/// `NOWAIT` it fails with `LOCK_BUSY` (the statement's 1205; the
/// transaction goes on).
pub(crate) fn key_read<'a>(
    native: &'a Arc<skarv_client::Table>,
    key: &'a [Value],
    lock: Option<RowLock>,
    index: Option<&'a str>,
    columns: Option<&'a [&'a str]>,
) -> Op<'a> {
    let mut op = Op::read(native, key)
        .lock(RowLock::mode_of(lock))
        .lock_wait(RowLock::wait_of(lock))
        .ignore_error();
    if let Some(name) = index {
        op = op.index(name);
    }
    if let Some(columns) = columns {
        op = op.columns(columns);
    }
    op
}

/// The row a key read of `table` found: None when there is none (or the
/// operation has no result); its failure as the statement's error.
pub(crate) fn found_row<'o>(
    table: &TableInfo,
    result: Option<&'o OpResult>,
) -> SqlResult<Option<&'o skarv_client::Row>> {
    match result {
        Some(OpResult::Row(r)) => Ok(Some(r)),
        Some(OpResult::Failed(e)) if e.code == skarv_client::codes::NO_SUCH_ROW => Ok(None),
        Some(OpResult::Failed(e)) => Err(txn::native_error_in(e, &table.name)),
        _ => Ok(None),
    }
}

/// The primary key's values of a native row (NULL for a key column it
/// did not read), only those copied out of it.
pub(crate) fn primary_key_of_row(table: &TableInfo, r: &skarv_client::Row) -> Vec<Value> {
    let pk = &table.native.def().primary_key;
    let mut key = vec![Value::Null; pk.len()];
    let mut found = vec![false; pk.len()];
    let mut positions = r.columns().iter();
    r.each_value(|v| {
        let Some(pos) = positions.next() else {
            return;
        };
        // A column read twice: its first value.
        if let Some(k) = pk.iter().position(|k| k == pos) {
            if !std::mem::replace(&mut found[k], true) {
                key[k] = v.to_value();
            }
        }
    });
    key
}

/// The statement text, for the names MySQL gives unaliased items (the
/// text as written); what `SHOW PROCESSLIST` shows of the statement.
/// While a view's query is planned, the view's text, which its places
/// are in.
pub(crate) fn statement_text(conn: &Conn<'_>) -> Arc<str> {
    if let Some(text) = &conn.subqueries.view_text {
        return Arc::clone(text);
    }
    conn.info
        .state
        .lock()
        .ok()
        .and_then(|s| s.info.clone())
        .unwrap_or_default()
}

/// Moves the warnings of an evaluation to the statement's.
pub(crate) fn keep_warnings(conn: &mut Conn<'_>, ctx: &mut Ctx<'_>) {
    for (code, message) in ctx.warnings.drain(..) {
        keep_warning(conn, code, message);
    }
}

/// Keeps one warning an evaluation left (a note when its code carries
/// `NOTE_BIT`) as the statement's.
pub(crate) fn keep_warning(conn: &mut Conn<'_>, code: u16, message: String) {
    use crate::engine::expr::eval::{FLAG_BITS, NOTE_BIT, PLANNED_BIT};
    if code & NOTE_BIT != 0 {
        conn.session.note_only(code & !FLAG_BITS, message);
    } else if code & PLANNED_BIT != 0 {
        conn.session.warn_planned(code & !FLAG_BITS, message);
    } else {
        txn::warn(conn, code, message);
    }
}

/// The table a name names (`db.t` or `t`) to change or read: a view is
/// 1288, on which `write` writes through it when it can (`through_view`).
fn table_of(conn: &Conn<'_>, name: &sqlparser::ast::ObjectName) -> SqlResult<Arc<TableInfo>> {
    if let Some((db, table)) = select::virtual_table(conn, name) {
        if crate::engine::catalog::is_ndbinfo(&db) {
            // MySQL's answer to a write of an ndbinfo table.
            return Err(SqlError::new(
                codes::OPEN_AS_READONLY,
                format!(
                    "Table '{table}' is read only: ndbinfo shows the data nodes' \
                     figures and cannot be changed"
                ),
            ));
        }
    }
    match source_of(conn, name)? {
        Source::Table(t) => Ok(t),
        // `write` writes through it when it can (`through_view`).
        Source::View(v) => Err(SqlError::new(
            codes::NON_UPDATABLE_TABLE,
            format!(
                "The target table {} of the statement is not updatable",
                v.name
            ),
        )),
        Source::Cte(_) => Err(SqlError::new(
            codes::NON_UPDATABLE_TABLE,
            format!("The target table {name} of the statement is not updatable"),
        )),
    }
}

/// What a FROM name names.
pub(crate) enum Source {
    /// A table.
    Table(Arc<TableInfo>),
    /// A view.
    View(super::views::View),
    /// A common table expression in scope (its place in `Conn::ctes`).
    Cte(usize),
}

/// The table or view a FROM name names: the table first, so that a view
/// costs a read only where no table is.
pub(crate) fn source_of(conn: &Conn<'_>, name: &sqlparser::ast::ObjectName) -> SqlResult<Source> {
    if let Some(at) = cte::find(conn, name) {
        return Ok(Source::Cte(at));
    }
    match table_named(conn, name) {
        Ok(t) => Ok(Source::Table(t)),
        Err(e) if e.code == codes::TABLE_NOT_FOUND => match super::views::for_name(conn, name) {
            Ok(Some(v)) => Ok(Source::View(v)),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

pub(crate) use select::alias_written_names;

/// Runs a query's planning only (a view's query at CREATE VIEW): its
/// result columns.
pub fn plan_only(
    conn: &mut Conn<'_>,
    q: &sqlparser::ast::Query,
) -> SqlResult<Vec<crate::value::ColumnMeta>> {
    conn.subqueries.clear();
    select::describe(conn, q, &[])
}

fn table_named(conn: &Conn<'_>, name: &sqlparser::ast::ObjectName) -> SqlResult<Arc<TableInfo>> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p.as_ident() {
            Some(i) => i.value.clone(),
            None => p.to_string(),
        })
        .collect();
    match parts.as_slice() {
        [t] => super::catalog::table(conn, None, t),
        [db, t] => super::catalog::table(conn, Some(db), t),
        _ => Err(SqlError::unsupported(format_args!("the table name {name}"))),
    }
}
