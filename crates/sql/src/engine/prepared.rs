//! Prepared statements (`COM_STMT_PREPARE` / `EXECUTE`): the text is
//! parsed once, its `?` placeholders located, and each EXECUTE runs the
//! parsed statement with the bound values. `BEGIN`/`COMMIT` prepare too
//! (sysbench prepares them).

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sqlparser::ast::Statement;
use sqlparser::tokenizer::Location;

use super::{exec, Conn, Stmt};
use crate::backend::{Prepared, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, ColumnMeta, ColumnType, SqlValue};

/// Most prepared statements a connection holds, and the default of
/// `max_prepared_stmt_count`, which bounds the whole SQL node's (MySQL's
/// default and rule).
pub const PREPARED_STATEMENTS_MAX: usize = 16_382;

/// One prepared statement.
struct Entry {
    statement: Arc<Stmt>,
    text: Arc<str>,
    placeholders: Arc<[Location]>,
    /// A query without locking clauses that has not yet turned out to be
    /// anything but a read of one row by key: a thread-pool worker may
    /// start it and send its read with other connections'.
    deferrable: bool,
    /// Its plan, kept between executes while what it was made under holds
    /// (`select::KeptPlan`); never for a text naming a variable (`@x`,
    /// `@@x`: their values are planned in).
    plan: Option<exec::KeptPlan>,
    may_keep_plan: bool,
}

/// A connection's prepared statements.
pub struct Statements {
    by_id: foldhash::HashMap<u32, Entry>,
    /// The SQL node's count of prepared statements, all connections
    /// together (`Prepared_stmt_count`), which `max_prepared_stmt_count`
    /// bounds: this connection's are in it while it holds them.
    count: Arc<AtomicUsize>,
    /// The statements of SQL's `PREPARE name FROM …`, by name (lowercase:
    /// names are not case-sensitive), among `by_id`.
    by_name: foldhash::HashMap<String, u32>,
    next_id: u32,
    /// Placeholders of the statement executing now (shared with its
    /// entry: no copy per execute).
    running: Option<Arc<[Location]>>,
}

impl Statements {
    /// None yet, counted in the SQL node's `count`.
    pub fn new(count: Arc<AtomicUsize>) -> Statements {
        Statements {
            by_id: foldhash::HashMap::default(),
            count,
            by_name: foldhash::HashMap::default(),
            next_id: 0,
            running: None,
        }
    }

    /// Forgets a statement.
    pub fn close(&mut self, id: u32) {
        self.remove(id);
        self.by_name.retain(|_, named| *named != id);
    }

    /// Takes one of the SQL node's `max` statements for a new one: 1461
    /// when all are taken (MySQL's and MariaDB's count is the server's).
    fn reserve(&self, max: usize) -> SqlResult<()> {
        if self.count.fetch_add(1, Ordering::Relaxed) >= max {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(SqlError::new(
                1461,
                format!(
                    "Can't create more than max_prepared_stmt_count statements \
                     (current value: {max})"
                ),
            ));
        }
        Ok(())
    }

    fn remove(&mut self, id: u32) {
        if self.by_id.remove(&id).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether `id` is prepared.
    pub fn contains(&self, id: u32) -> bool {
        self.by_id.contains_key(&id)
    }

    /// The placeholders of the statement executing now (none for a text
    /// query).
    pub fn running_placeholders(&self) -> &[Location] {
        self.running.as_deref().unwrap_or(&[])
    }

    /// The same, shared.
    pub fn running_shared(&self) -> Option<Arc<[Location]>> {
        self.running.clone()
    }
}

impl Drop for Statements {
    /// A connection's statements leave the SQL node's count with it (or
    /// with `COM_RESET_CONNECTION`).
    fn drop(&mut self) {
        self.count.fetch_sub(self.by_id.len(), Ordering::Relaxed);
    }
}

/// Prepares a statement.
pub fn prepare(conn: &mut Conn<'_>, sql: &str) -> SqlResult<Prepared> {
    if conn.prepared.by_id.len() >= PREPARED_STATEMENTS_MAX {
        return Err(SqlError::new(
            1461,
            format!(
                "Can't create more than max_prepared_stmt_count statements \
                 (current value: {PREPARED_STATEMENTS_MAX})"
            ),
        ));
    }
    let placeholders = super::expr::placeholders(sql)?;
    // Parsed with locations (the placeholders are found by them); what
    // sqlparser does not parse, the session's splitter may recognise
    // (`SHOW WARNINGS`, …), without placeholders.
    let statement = match super::parse(sql) {
        // ANALYZE TABLE runs from its text (the parser takes one table);
        // so do the SHOWs the parser takes for words (`SHOW WARNINGS`,
        // `SHOW ERRORS`, `SHOW GRANTS`), as the text protocol runs them,
        // and `SET [SESSION] TRANSACTION …` (whose scope word the parser
        // drops and the text's reading keeps).
        Ok(statements)
            if matches!(
                statements.as_slice(),
                [Statement::Analyze(_)
                    | Statement::ShowVariable { .. }
                    | Statement::Set(sqlparser::ast::Set::SetTransaction { .. })]
            ) =>
        {
            super::session::parse_text(sql, false)?
                .into_iter()
                .next()
                .ok_or_else(|| SqlError::new(codes::EMPTY_QUERY, "Query was empty"))??
        }
        Ok(mut statements) if statements.len() == 1 => Stmt::Sql(Box::new(statements.remove(0))),
        Ok(statements) if statements.is_empty() => {
            return Err(SqlError::new(codes::EMPTY_QUERY, "Query was empty"))
        }
        Ok(_) => {
            return Err(SqlError::new(
                codes::UNSUPPORTED_PS,
                "This command is not supported in the prepared statement protocol yet",
            ))
        }
        Err(error) => {
            let mut parsed = super::session::parse_text(sql, false)?;
            match (parsed.len(), placeholders.is_empty()) {
                (1, true) => parsed.remove(0)?,
                _ => return Err(error),
            }
        }
    };
    if is_prepare_command(&statement) {
        // MySQL's PREPARE, EXECUTE and DEALLOCATE do not prepare.
        return Err(SqlError::new(
            codes::UNSUPPORTED_PS,
            "This command is not supported in the prepared statement protocol yet",
        ));
    }
    let columns = match &statement {
        Stmt::Sql(q) if matches!(**q, Statement::Query(_)) => {
            let Statement::Query(q) = &**q else {
                return Err(SqlError::unsupported("a query"));
            };
            conn.prepared.running = Some(Arc::from(placeholders.as_slice()));
            conn.set_command("Prepare", Some(sql));
            let described = exec::describe(conn, q, &placeholders);
            conn.set_command("Sleep", None);
            conn.prepared.running = None;
            described?
        }
        Stmt::Extra(super::session::Extra::ShowWarnings {
            errors,
            count: true,
            ..
        }) => vec![super::session::show_count_column(*errors)],
        Stmt::Sql(w)
            if matches!(
                &**w,
                Statement::Insert(sqlparser::ast::Insert {
                    returning: Some(_),
                    ..
                }) | Statement::Delete(sqlparser::ast::Delete {
                    returning: Some(_),
                    ..
                })
            ) =>
        {
            exec::describe_returning(conn, w, &placeholders)?
        }
        _ => Vec::new(),
    };
    let params = placeholders
        .iter()
        .map(|_| {
            let mut m = ColumnMeta::expr("?", ColumnType::VarString, charset::BINARY, 0);
            m.flags = crate::value::flags::BINARY;
            m
        })
        .collect();
    let max = conn
        .engine
        .globals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get("max_prepared_stmt_count")
        .and_then(|v| v.parse().ok())
        .unwrap_or(PREPARED_STATEMENTS_MAX);
    conn.prepared.reserve(max)?;
    conn.prepared.next_id = conn.prepared.next_id.wrapping_add(1).max(1);
    let id = conn.prepared.next_id;
    // A read that may go in a thread-pool batch: no lock, no INTO.
    let deferrable = match &statement {
        Stmt::Sql(s) => {
            matches!(&**s, Statement::Query(q) if q.locks.is_empty() && !exec::has_into(q))
        }
        Stmt::Extra(_) => false,
    };
    let replaced = conn.prepared.by_id.insert(
        id,
        Entry {
            statement: Arc::new(statement),
            text: Arc::from(sql),
            placeholders: Arc::from(placeholders),
            deferrable,
            plan: None,
            may_keep_plan: !sql.contains('@'),
        },
    );
    debug_assert!(replaced.is_none(), "a new statement id");
    Ok(Prepared {
        id,
        params,
        columns,
    })
}

/// Whether `statement` is SQL's PREPARE, EXECUTE or DEALLOCATE.
fn is_prepare_command(statement: &Stmt) -> bool {
    match statement {
        Stmt::Sql(s) => matches!(
            **s,
            Statement::Execute { .. } | Statement::Deallocate { .. } | Statement::Prepare { .. }
        ),
        Stmt::Extra(extra) => matches!(extra, super::session::Extra::Prepare { .. }),
    }
}

/// SQL's `PREPARE name FROM 'text'` or `FROM @variable`: the text
/// prepared as `COM_STMT_PREPARE` prepares it, under `name` (a statement
/// of that name is dropped first, so a text that fails leaves none, as in
/// MySQL). "Statement prepared".
pub fn prepare_sql(
    conn: &mut Conn<'_>,
    name: &str,
    source: &super::session::PrepareSource,
) -> SqlResult<super::Answered> {
    let text = match source {
        super::session::PrepareSource::Text(text) => text.clone(),
        super::session::PrepareSource::Var(var) => match conn.session.user_vars.get(var) {
            None | Some(SqlValue::Null) => "NULL".to_owned(),
            Some(value) => exec::convert::from_sql(value).to_text(),
        },
    };
    let name = name.to_owned();
    if let Some(old) = conn.prepared.by_name.remove(&name) {
        conn.prepared.remove(old);
    }
    let prepared = prepare(conn, &text)?;
    conn.prepared.by_name.insert(name, prepared.id);
    Ok(super::Answered::Ok(crate::backend::OkInfo {
        info: "Statement prepared".to_owned(),
        ..Default::default()
    }))
}

/// SQL's `EXECUTE name [USING v, …]`: the statement `PREPARE` named, run
/// with the values (user variables or any constant expression) in place
/// of its `?`s; its answer is the statement's own.
pub fn execute_sql(
    conn: &mut Conn<'_>,
    name: &sqlparser::ast::ObjectName,
    using: &[sqlparser::ast::ExprWithAlias],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<super::Answered> {
    let shown = name.to_string();
    let Some(&id) = conn.prepared.by_name.get(&shown.to_ascii_lowercase()) else {
        return Err(SqlError::new(
            codes::UNKNOWN_STMT_HANDLER,
            format!("Unknown prepared statement handler ({shown}) given to EXECUTE"),
        ));
    };
    let mut params = Vec::with_capacity(using.len());
    for value in using {
        params.push(exec::eval_constant(conn, &value.expr, true)?);
    }
    let entry = &conn.prepared.by_id[&id];
    if params.len() != entry.placeholders.len() {
        return Err(SqlError::new(
            codes::WRONG_ARGUMENTS,
            "Incorrect arguments to EXECUTE",
        ));
    }
    let statement = Arc::clone(&entry.statement);
    let text = Arc::clone(&entry.text);
    conn.prepared.running = Some(Arc::clone(&entry.placeholders));
    // The statement answers for itself (rows, OK or its error), as the
    // statement it is: its own counters and slow-log entry, and its own
    // text (its columns are named by it).
    let outer = exec::statement_text(conn);
    conn.set_command_shared("Query", Some(Arc::clone(&text)));
    let result = conn.run_statement(&statement, &params, more, sink, &text);
    conn.set_command_shared("Query", Some(outer));
    conn.prepared.running = None;
    result.map_err(|e| SqlError::new(codes::UNKNOWN, format!("sending the answer: {e}")))?;
    Ok(super::Answered::Done)
}

/// SQL's `DEALLOCATE PREPARE name`.
pub fn deallocate_sql(conn: &mut Conn<'_>, name: &str) -> SqlResult<super::Answered> {
    match conn.prepared.by_name.remove(&name.to_ascii_lowercase()) {
        Some(id) => {
            conn.prepared.remove(id);
            Ok(super::Answered::Ok(Default::default()))
        }
        None => Err(SqlError::new(
            codes::UNKNOWN_STMT_HANDLER,
            format!("Unknown prepared statement handler ({name}) given to DEALLOCATE PREPARE"),
        )),
    }
}

/// Executes a prepared statement.
pub fn execute(
    conn: &mut Conn<'_>,
    id: u32,
    params: &[SqlValue],
    sink: &mut dyn ResultSink,
) -> io::Result<()> {
    let Some(entry) = conn.prepared.by_id.get(&id) else {
        return sink.error(&SqlError::new(
            codes::UNKNOWN_STMT_HANDLER,
            format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
        ));
    };
    if params.len() != entry.placeholders.len() {
        return sink.error(&SqlError::new(
            codes::WRONG_ARGUMENTS,
            "Incorrect arguments to mysqld_stmt_execute",
        ));
    }
    let statement = Arc::clone(&entry.statement);
    conn.prepared.running = Some(Arc::clone(&entry.placeholders));
    let text = Arc::clone(&entry.text);
    // A query runs by its kept plan (planned at its first execute, and
    // again only when what it was made under changed): planning each
    // execute was 4 % of the SQL node's instructions under sysbench's
    // oltp_read_write, whose ranges are not deferred.
    let query = matches!(&*statement, Stmt::Sql(s) if matches!(**s, Statement::Query(_)));
    let keeps = entry.may_keep_plan && query;
    conn.set_command_shared("Execute", Some(Arc::clone(&text)));
    let result = if keeps {
        let mut kept = conn.prepared.by_id.get_mut(&id).and_then(|e| e.plan.take());
        let result = conn.begin_deferred(statement, params, sink, text, Some(&mut kept), false);
        if let Some(entry) = conn.prepared.by_id.get_mut(&id) {
            entry.plan = kept;
        }
        result.map(|_| ())
    } else {
        conn.run_statement(&statement, params, false, sink, &text)
            .map(|_| ())
    };
    conn.set_command("Sleep", None);
    conn.prepared.running = None;
    result
}

/// Whether statement `id` may be started for a thread-pool batch now (see
/// [`execute_deferrable`]): a prepared query that reads one row by key (as
/// far as is known).
pub fn may_defer(conn: &Conn<'_>, id: u32) -> bool {
    conn.prepared.by_id.get(&id).is_some_and(|e| e.deferrable) && conn.deferred.is_none()
}

/// Executes a prepared statement as [`execute`] does, except that a query
/// reading one row by key without a lock (read committed) only has its
/// read's request built, unsent: true, and [`finish_deferred`] answers it
/// once the worker sent it with other connections' requests. False:
/// answered to `sink`.
pub fn execute_deferrable(
    conn: &mut Conn<'_>,
    id: u32,
    params: &[SqlValue],
    sink: &mut dyn ResultSink,
) -> io::Result<bool> {
    let ready = conn
        .prepared
        .by_id
        .get(&id)
        .filter(|e| e.placeholders.len() == params.len());
    let Some(entry) = ready.filter(|_| may_defer(conn, id)) else {
        return execute(conn, id, params, sink).map(|()| false);
    };
    let statement = Arc::clone(&entry.statement);
    conn.prepared.running = Some(Arc::clone(&entry.placeholders));
    let text = Arc::clone(&entry.text);
    let may_keep = entry.may_keep_plan;
    let mut kept = conn.prepared.by_id.get_mut(&id).and_then(|e| e.plan.take());
    conn.set_command_shared("Execute", Some(Arc::clone(&text)));
    let deferred = conn.begin_deferred(
        statement,
        params,
        sink,
        text,
        may_keep.then_some(&mut kept),
        true,
    )?;
    if let Some(entry) = conn.prepared.by_id.get_mut(&id) {
        entry.plan = kept;
    }
    if !deferred {
        // Not a read of one row by key: the next executes run as usual.
        if let Some(entry) = conn.prepared.by_id.get_mut(&id) {
            entry.deferrable = false;
        }
        conn.set_command("Sleep", None);
        conn.prepared.running = None;
    }
    Ok(deferred)
}

/// Answers the statement [`execute_deferrable`] deferred.
pub fn finish_deferred(conn: &mut Conn<'_>, sink: &mut dyn ResultSink) -> io::Result<()> {
    let result = conn.finish_deferred(sink);
    conn.set_command("Sleep", None);
    conn.prepared.running = None;
    result
}
