//! SQL over the native API. A statement is parsed by `sqlparser`
//! (MySQL dialect), lowered into Skarv's own plan types (`plan`), and run
//! by the executors (`exec`) with a `skarv_client::Session`; nothing is run
//! by interpreting the parser's tree directly.
//!
//! Who owns what:
//! - [`Engine`]: one per SQL node — the cluster connection, the registry of
//!   connections (`SHOW PROCESSLIST`, `KILL`), global variables.
//! - [`Conn`]: one per client connection, borrowing the connection
//!   thread's `Session`; it implements [`Backend`] for the protocol.
//! - `catalog`: databases, tables and their mapping onto cluster tables
//!   (`db/def/name`, as NDB names them), MySQL column metadata of a table.
//! - `users`: accounts and grants, kept in cluster tables.
//! - `session`: session variables, `SET`, warnings.
//! - `ddl`, `show`: schema statements, `SHOW` and `information_schema`.
//! - `expr`, `plan`, `exec`, `txn`, `prepared`: queries, writes,
//!   transactions and prepared statements.

pub mod alter_copy;
pub mod catalog;
mod create_select;
pub mod ddl;
pub mod dialect;
pub mod exec;
pub mod expr;
pub(crate) mod foreign;
pub(crate) mod group_order;
pub mod maintenance;
pub mod plan;
pub mod prepared;
pub mod server_info;
pub mod session;
pub mod show;
pub mod sql_words;
pub mod stats;
pub mod status;
pub mod txn;
pub mod user_locks;
pub mod users;
pub mod views;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use skarv_client::{Cluster, Session};
use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::backend::{Backend, Credentials, Login, OkInfo, Prepared, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{ColumnMeta, SqlValue};

/// Longest statement text accepted, in bytes (MySQL's default
/// `max_allowed_packet`, which bounds it there too).
pub const STATEMENT_BYTES_MAX: usize = 64 << 20;

/// What the whole SQL node shares.
pub struct Engine {
    /// The cluster connection.
    pub cluster: Cluster,
    /// Live connections by id.
    pub connections: Mutex<HashMap<u32, Arc<ConnInfo>>>,
    next_connection_id: AtomicU32,
    /// Global variables (`SET GLOBAL`), by lowercase name.
    pub globals: Mutex<session::Variables>,
    /// The catalog's shared caches.
    pub catalog: catalog::Shared,
    /// The accounts and grants this SQL node read last.
    pub accounts: users::Cache,
    /// When the SQL node started (`Uptime`).
    pub started: Instant,
    /// Status counters of closed connections, the slow query log.
    pub status: status::Global,
    /// `GET_LOCK`'s locks, the SQL node's own (as each mysqld's in NDB).
    pub user_locks: Arc<user_locks::UserLocks>,
    /// Prepared statements held, all connections together
    /// (`Prepared_stmt_count`; `max_prepared_stmt_count` bounds it).
    pub prepared_count: Arc<std::sync::atomic::AtomicUsize>,
}

/// `wait_timeout`'s default, in seconds (MariaDB's and MySQL's).
pub const WAIT_TIMEOUT_S_DEFAULT: u64 = 28_800;
/// How often the idle reaper looks for connections idle past their
/// `wait_timeout`, in ms: a connection closes at most this late.
pub const IDLE_SWEEP_INTERVAL_MS: u64 = 1_000;

/// A `wait_timeout` value in seconds (its default when unset or bad).
pub(crate) fn seconds_of(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or(WAIT_TIMEOUT_S_DEFAULT)
}

/// The idle reaper (MariaDB's `wait_timeout`): every
/// [`IDLE_SWEEP_INTERVAL_MS`], each connection that waits for its client's
/// next command (`Sleep`) since longer than its session's `wait_timeout`
/// is closed: its socket is shut, as `KILL` does, and the connection ends
/// as if the client had gone (its open transaction rolled back). A client
/// that comes back finds the connection lost (2013), as with MariaDB.
/// Ends when the engine is gone.
fn reap_idle(engine: std::sync::Weak<Engine>) {
    loop {
        thread::sleep(Duration::from_millis(IDLE_SWEEP_INTERVAL_MS));
        let Some(engine) = engine.upgrade() else {
            return;
        };
        for info in engine.connection_list() {
            let limit = Duration::from_secs(info.idle_limit_s.load(Ordering::Relaxed));
            let idle = {
                let state = info.state.lock().unwrap_or_else(|p| p.into_inner());
                state.command == "Sleep" && state.since.is_some_and(|s| s.elapsed() >= limit)
            };
            if !idle {
                continue;
            }
            if info.shut_socket() {
                engine
                    .status
                    .aborted_clients
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    connection = info.id,
                    host = %info.host,
                    "closed after {} s idle (wait_timeout)",
                    limit.as_secs()
                );
            }
        }
    }
}

/// What `SHOW PROCESSLIST` and `KILL` see of a connection.
#[derive(Debug)]
pub struct ConnInfo {
    /// The connection id.
    pub id: u32,
    /// The client's address.
    pub host: IpAddr,
    /// User, database, command and statement text, as the connection
    /// updates them.
    pub state: Mutex<ConnState>,
    /// `KILL` (the connection ends after its statement).
    pub killed: AtomicBool,
    /// `KILL QUERY` (the running statement stops with 1317).
    pub query_killed: AtomicBool,
    /// The client's socket (a second handle), which `KILL` shuts so that a
    /// connection waiting for its client's next command ends at once.
    pub socket: Mutex<Option<std::net::TcpStream>>,
    /// The session's `wait_timeout` in seconds: the idle reaper closes the
    /// connection once its client has sent nothing for that long.
    pub idle_limit_s: AtomicU64,
    /// Its status counters (`SHOW GLOBAL STATUS` sums them).
    pub status: status::Published,
}

impl ConnInfo {
    /// Shuts the client's socket, so that a connection waiting for its
    /// client's next command ends at once (`KILL`, the idle reaper);
    /// whether there was one to shut.
    pub fn shut_socket(&self) -> bool {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        socket
            .as_ref()
            .is_some_and(|s| s.shutdown(std::net::Shutdown::Both).is_ok())
    }
}

/// The changing part of [`ConnInfo`].
#[derive(Clone, Debug, Default)]
pub struct ConnState {
    /// Logged-in user ("" before).
    pub user: String,
    /// Current database.
    pub database: Option<String>,
    /// "Sleep", "Query", …
    pub command: &'static str,
    /// The statement running (its whole text, shared with a prepared
    /// statement's entry).
    pub info: Option<Arc<str>>,
    /// Since when in this command.
    pub since: Option<Instant>,
}

impl Engine {
    /// An engine over a connected cluster; makes sure the SQL node's system
    /// tables exist (`catalog::bootstrap`).
    pub fn start(cluster: Cluster) -> SqlResult<Arc<Engine>> {
        let engine = Arc::new(Engine {
            cluster,
            connections: Mutex::new(HashMap::new()),
            next_connection_id: AtomicU32::new(1),
            globals: Mutex::new(session::Variables::defaults()),
            catalog: catalog::Shared::default(),
            accounts: users::Cache::default(),
            started: Instant::now(),
            status: status::Global::default(),
            user_locks: Arc::default(),
            prepared_count: Arc::default(),
        });
        engine.set_slow_log_file(status::default_slow_log_path(), 3306);
        let session = engine
            .cluster
            .session()
            .map_err(|e| txn::native_error(&e))?;
        users::bootstrap(&engine, &session)?;
        catalog::bootstrap(&engine, &session)?;
        alter_copy::recover(&engine, &session)?;
        Ok(engine)
    }

    /// Starts the idle reaper ([`reap_idle`]): the server does, for the
    /// connections it serves.
    pub fn start_idle_reaper(self: &Arc<Engine>) -> io::Result<()> {
        let engine = Arc::downgrade(self);
        thread::Builder::new()
            .name("sql-idle-reaper".into())
            .spawn(move || reap_idle(engine))
            .map(|_| ())
    }

    /// The live connections, as they are now.
    pub fn connection_list(&self) -> Vec<Arc<ConnInfo>> {
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// A connection's SQL side, over its thread's session.
    pub fn open<'s>(self: &Arc<Engine>, session: &'s Session, host: IpAddr) -> Conn<'s> {
        let id = self.next_connection_id.fetch_add(1, Ordering::Relaxed);
        let info = Arc::new(ConnInfo {
            id,
            host,
            state: Mutex::new(ConnState {
                command: "Connect",
                since: Some(Instant::now()),
                ..ConnState::default()
            }),
            killed: AtomicBool::new(false),
            query_killed: AtomicBool::new(false),
            socket: Mutex::new(None),
            idle_limit_s: AtomicU64::new(WAIT_TIMEOUT_S_DEFAULT),
            status: status::Published::default(),
        });
        // One thread per connection: each connection started one.
        self.status.threads_created.fetch_add(1, Ordering::Relaxed);
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&info));
        let globals = self
            .globals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .share();
        info.idle_limit_s
            .store(seconds_of(globals.get("wait_timeout")), Ordering::Relaxed);
        let conn_status = status::ConnStatus::new(
            globals.get("long_query_time"),
            globals.get("min_examined_row_limit"),
        );
        Conn {
            engine: Arc::clone(self),
            native: session,
            info,
            status: conn_status,
            session: session::SessionState::new(globals),
            tx: txn::TxState::default(),
            prepared: prepared::Statements::new(Arc::clone(&self.prepared_count)),
            grants: users::Grants::default(),
            temporary: catalog::Temporaries::default(),
            subqueries: exec::subquery::Cache::default(),
            ctes: exec::cte::Scope::default(),
            view_checks: Vec::new(),
            returned: None,
            deferred: None,
            text_parsed: None,
            statement_started: Instant::now(),
            found_rows: false,
        }
    }
}

/// One client connection's SQL side (see the module doc).
pub struct Conn<'s> {
    /// The SQL node.
    pub engine: Arc<Engine>,
    /// The connection thread's native session.
    pub native: &'s Session,
    /// What others see of this connection.
    pub info: Arc<ConnInfo>,
    /// User, database, variables, warnings.
    pub session: session::SessionState,
    /// The open transaction, if any.
    pub tx: txn::TxState<'s>,
    /// Prepared statements.
    pub prepared: prepared::Statements,
    /// What the logged-in account may do.
    pub grants: users::Grants,
    /// Its status counters and slow-log state.
    pub status: status::ConnStatus,
    /// Its temporary tables.
    pub temporary: catalog::Temporaries,
    /// What the running statement's subqueries gave.
    pub subqueries: exec::subquery::Cache,
    /// The common table expressions in scope (`WITH`).
    pub ctes: exec::cte::Scope,
    /// The WHEREs a write through views WITH CHECK OPTION must keep (set
    /// for that write only: `exec::write`).
    pub view_checks: Vec<exec::through_view::ViewCheck>,
    /// The rows a write with `RETURNING` wrote (inserted, or deleted), as
    /// the table's SQL values, collected for that write only
    /// (`exec::write_returning`); None for any other statement.
    pub returned: Option<Vec<Vec<crate::engine::expr::Val>>>,
    /// A statement whose read a thread-pool worker sends with other
    /// connections' (`Backend::execute_deferrable`).
    pub deferred: Option<DeferredStatement<'s>>,
    /// The text statement `Backend::may_defer_query` parsed, for the
    /// `query_deferrable` that follows (and its text, to tell it is that).
    text_parsed: Option<(Arc<str>, Arc<Stmt>)>,
    /// When the running statement started (`max_statement_time` counts
    /// from it; `status::statement_start` sets it).
    pub statement_started: Instant,
    /// The client asked for `CLIENT_FOUND_ROWS` at login: affected rows
    /// count the rows matched ([`Conn::affected`]).
    pub found_rows: bool,
}

/// A statement started and not yet answered: its read waits to be sent.
pub struct DeferredStatement<'s> {
    select: exec::Deferred<'s>,
    mark: status::Mark,
    statement: Arc<Stmt>,
    text: Arc<str>,
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        self.disconnect();
        // Its GET_LOCK locks go with it, as MySQL's.
        self.engine.user_locks.release_all(self.info.id);
        // Leaves the registry, its counts folded into the SQL node's.
        status::connection_closed(self);
    }
}

impl Engine {
    /// Connections opened since the SQL node started (`Connections`).
    pub fn connections_opened(&self) -> u32 {
        self.next_connection_id
            .load(Ordering::Relaxed)
            .saturating_sub(1)
    }

    /// Sets the slow query log's file (`slow_query_log_file`) and the port
    /// its header names.
    pub fn set_slow_log_file(&self, path: std::path::PathBuf, port: u16) {
        self.globals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set("slow_query_log_file", path.display().to_string());
        self.status.slow_log.configure(path, port);
    }
}

/// Parses statement text (MySQL dialect). A parse error is 1064 naming
/// where the parser stopped.
pub fn parse(sql: &str) -> SqlResult<Vec<Statement>> {
    if sql.len() > STATEMENT_BYTES_MAX {
        return Err(SqlError::new(
            codes::NET_PACKET_TOO_LARGE,
            format!(
                "statement of {} bytes: at most {STATEMENT_BYTES_MAX} allowed",
                sql.len()
            ),
        ));
    }
    let mut tokens = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize_with_location()
        .map_err(SqlError::syntax)?;
    session::mend_words(&mut tokens);
    let group_order = group_order::strip(&mut tokens);
    // DUAL is checked and the tree walked for it only when the word is
    // there at all.
    let dual = mentions_dual(&tokens);
    if dual {
        check_dual(&tokens, sql)?;
    }
    let mut statements = Parser::new(&dialect::SkarvDialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(SqlError::syntax)?;
    if dual {
        statements.iter_mut().for_each(dual_as_no_table);
    }
    for statement in &mut statements {
        values_as_selects(statement, sql);
    }
    if let Some(order) = &group_order {
        for s in &mut statements {
            group_order::apply(order, s)?;
        }
    }
    Ok(statements)
}

/// MariaDB's table value constructor in a query, `VALUES (1, 'a'), (2,
/// 'b')` (alone, in a UNION, or as a derived table: `FROM (VALUES …) AS
/// v`), as the `SELECT 1, 'a' UNION ALL SELECT 2, 'b'` it equals: the
/// columns named by the first row, typed by all of them. An INSERT's
/// VALUES is left as it is.
/// Only a query whose text has the word is walked (`sql`: the text).
pub(crate) fn values_as_selects(statement: &mut Statement, sql: &str) {
    use sqlparser::ast::{Query, SetExpr, SetOperator, SetQuantifier, VisitMut, VisitorMut};
    use std::ops::ControlFlow;
    if !matches!(statement, Statement::Query(_))
        || !sql
            .as_bytes()
            .windows(6)
            .any(|w| w.eq_ignore_ascii_case(b"values"))
    {
        return;
    }
    /// `SELECT 1`, whose projection each row replaces (no place in the
    /// text: the items are named by their own).
    fn select_of(row: Vec<sqlparser::ast::Expr>) -> Option<SetExpr> {
        let parsed = Parser::parse_sql(&MySqlDialect {}, "SELECT 1").ok()?;
        let Some(Statement::Query(q)) = parsed.into_iter().next() else {
            return None;
        };
        let SetExpr::Select(mut select) = *q.body else {
            return None;
        };
        select.select_token.0.span = sqlparser::tokenizer::Span::empty();
        select.projection = row
            .into_iter()
            .map(sqlparser::ast::SelectItem::UnnamedExpr)
            .collect();
        Some(SetExpr::Select(select))
    }
    fn rewrite(body: &mut SetExpr) {
        match body {
            SetExpr::Values(values) if !values.rows.is_empty() => {
                let mut rows = std::mem::take(&mut values.rows).into_iter();
                let Some(first) = rows.next().and_then(|r| select_of(r.content)) else {
                    return;
                };
                let mut union = first;
                for row in rows {
                    let Some(next) = select_of(row.content) else {
                        return;
                    };
                    union = SetExpr::SetOperation {
                        op: SetOperator::Union,
                        set_quantifier: SetQuantifier::All,
                        left: Box::new(union),
                        right: Box::new(next),
                    };
                }
                *body = union;
            }
            SetExpr::SetOperation { left, right, .. } => {
                rewrite(left);
                rewrite(right);
            }
            _ => {}
        }
    }
    struct Rows;
    impl VisitorMut for Rows {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            rewrite(&mut q.body);
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Rows);
}

/// Whether the text has the word DUAL unquoted (then [`check_dual`] and
/// [`dual_as_no_table`] have work to do).
pub(crate) fn mentions_dual(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|t| {
        matches!(&t.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("dual"))
    })
}

/// 1064 where the unquoted word DUAL is used as anything but MariaDB's
/// `FROM DUAL` of a SELECT: DUAL is a reserved word of MariaDB's grammar,
/// so `FROM dual AS d`, `FROM t, dual`, `DELETE FROM dual`, `SHOW TABLES
/// FROM dual` or a column named dual are syntax errors there, which the
/// parser would take for a table or a column (and Skarv answer 1146).
/// As in MariaDB's lexer, the word joined to a `.` (`db.dual`, `dual.c`)
/// is a name, and `@dual` a variable. The error is near the word, or near
/// what follows `FROM DUAL` when that is no clause a SELECT may go on with.
pub(crate) fn check_dual(tokens: &[TokenWithSpan], sql: &str) -> SqlResult<()> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&at| !matches!(tokens[at].token, Token::Whitespace(_)))
        .collect();
    let word = |at: usize| match &tokens[at].token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let near = |at: Option<&usize>| match at {
        Some(&at) => {
            let start = tokens[at].span.start;
            session::syntax_error(
                sql,
                &format!(
                    "Expected: FROM DUAL alone, found: {} at Line: {}, Column: {}",
                    tokens[at].token, start.line, start.column
                ),
            )
        }
        None => SqlError::syntax_near("", 1, "Expected: FROM DUAL alone, found: end of statement"),
    };
    // The first word of the statement, at each depth of parentheses (a
    // DELETE's or SHOW's own FROM takes a table, a subquery's a DUAL).
    let mut depth = 0usize;
    let mut first_word: Vec<Option<String>> = vec![None];
    for (k, &at) in significant.iter().enumerate() {
        match &tokens[at].token {
            Token::LParen => {
                depth += 1;
                first_word.truncate(depth);
                first_word.push(None);
                continue;
            }
            Token::RParen => {
                depth = depth.saturating_sub(1);
                first_word.truncate(depth + 1);
                continue;
            }
            Token::SemiColon => {
                first_word = vec![None];
                depth = 0;
                continue;
            }
            _ => {}
        }
        let this = word(at);
        if first_word[depth].is_none() {
            first_word[depth] = Some(this.clone().unwrap_or_default());
        }
        if this.as_deref() != Some("DUAL") {
            continue;
        }
        let joined = |t: Option<&TokenWithSpan>| {
            matches!(t.map(|t| &t.token), Some(Token::Period | Token::AtSign))
        };
        if joined(at.checked_sub(1).map(|b| &tokens[b])) || joined(tokens.get(at + 1)) {
            continue;
        }
        let after_from = k > 0 && word(significant[k - 1]).as_deref() == Some("FROM");
        let owner = first_word[depth].as_deref().unwrap_or("");
        if !after_from || (depth == 0 && matches!(owner, "DELETE" | "SHOW")) {
            return Err(near(Some(&at)));
        }
        let next = significant.get(k + 1);
        let goes_on = match next.map(|&n| &tokens[n].token) {
            None | Some(Token::RParen | Token::SemiColon) => true,
            Some(_) => match word(*next.expect("a token follows")).as_deref() {
                Some("ON") => significant
                    .get(k + 2)
                    .is_some_and(|&n| word(n).as_deref() == Some("DUPLICATE")),
                Some(w) => matches!(
                    w,
                    "WHERE"
                        | "GROUP"
                        | "HAVING"
                        | "ORDER"
                        | "LIMIT"
                        | "UNION"
                        | "EXCEPT"
                        | "INTERSECT"
                        | "WINDOW"
                        | "INTO"
                        | "FOR"
                        | "LOCK"
                        | "PROCEDURE"
                        | "FETCH"
                ),
                None => false,
            },
        };
        if !goes_on {
            return Err(near(next));
        }
    }
    Ok(())
}

/// `FROM DUAL` made no FROM at all, in every SELECT of `statement`
/// (subqueries, UNION's sides, INSERT … SELECT): DUAL is a keyword of
/// MariaDB's, the table of one row that `SELECT 1 FROM DUAL WHERE …`
/// reads, where the parser takes it for a table named `dual`. Only the
/// unquoted word alone in FROM is DUAL: `` `dual` `` and `db.dual` are
/// tables (1146 where there is none), as in MariaDB.
pub(crate) fn dual_as_no_table(statement: &mut Statement) {
    use sqlparser::ast::{Query, SetExpr, TableFactor, VisitMut, VisitorMut};
    use std::ops::ControlFlow;
    fn is_dual(from: &[sqlparser::ast::TableWithJoins]) -> bool {
        let [only] = from else {
            return false;
        };
        let TableFactor::Table {
            name,
            alias: None,
            args: None,
            partitions,
            ..
        } = &only.relation
        else {
            return false;
        };
        let word = match name.0.as_slice() {
            [part] => part.as_ident(),
            _ => None,
        };
        only.joins.is_empty()
            && partitions.is_empty()
            && word.is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case("dual"))
    }
    fn strip(body: &mut SetExpr) {
        match body {
            SetExpr::Select(s) if is_dual(&s.from) => s.from.clear(),
            SetExpr::SetOperation { left, right, .. } => {
                strip(left);
                strip(right);
            }
            _ => {}
        }
    }
    struct Dual;
    impl VisitorMut for Dual {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            strip(&mut query.body);
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Dual);
}

/// Whether a statement's text may assign user variables (`@n := @n + 1`),
/// and so reads them at each evaluation: a false yes (a `:=` in a string,
/// or SET's) costs only constant folding of its `@x` reads.
fn assigns_user_vars(text: &str) -> bool {
    text.contains(":=")
}

impl<'s> Conn<'s> {
    /// Runs one parsed statement, its answer to `sink` (`more` sets
    /// `more_results` on it). `text`: the statement as the client sent it
    /// (for the slow log; "" when only the parsed form is at hand).
    /// Returns whether it succeeded, or the sink's I/O error.
    pub fn run_statement(
        &mut self,
        statement: &Stmt,
        params: &[SqlValue],
        more: bool,
        sink: &mut dyn ResultSink,
        text: &str,
    ) -> io::Result<bool> {
        let mark = status::statement_start(self, statement);
        // Counted for FOUND_ROWS() and ROW_COUNT() of the next statement
        // (and the slow log).
        let mut counting = status::CountingSink::new(sink);
        self.session.assigning = assigns_user_vars(text);
        self.session.ignoring = session::ignores_errors(statement);
        let result = self.run_inner(statement, params, more, &mut counting);
        self.session.take_assigned_vars();
        counting.note(&mut self.session);
        let sent = status::Sent {
            rows: counting.rows,
            affected: counting.affected,
        };
        status::statement_end(self, mark, statement, text, sent);
        result
    }

    /// Starts a prepared query as `run_statement` runs it, except that a
    /// read of one row by key without a lock stops with its request built
    /// and unsent (true: [`Conn::finish_deferred`] answers it; only with
    /// `may_defer`); false: the statement was answered to `sink`. A plan
    /// in `kept` that still holds is used, and one that may be kept is
    /// left there.
    fn begin_deferred(
        &mut self,
        statement: Arc<Stmt>,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
        text: Arc<str>,
        kept: Option<&mut Option<exec::KeptPlan>>,
        may_defer: bool,
    ) -> io::Result<bool> {
        let mark = status::statement_start(self, &statement);
        if !session::keeps_warnings(&statement) {
            self.session.start_statement_of(&statement);
        }
        let mut counting = status::CountingSink::new(sink);
        self.session.assigning = assigns_user_vars(&text);
        self.session.ignoring = session::ignores_errors(&statement);
        let begun = match &*statement {
            Stmt::Sql(s) => users::authorize(self, s).and_then(|()| {
                self.subqueries.clear();
                exec::begin_deferred(self, s, params, &mut counting, kept, may_defer)
            }),
            Stmt::Extra(_) => Err(SqlError::unsupported("deferring this statement")),
        };
        match begun {
            Ok(Some(select)) => {
                debug_assert!(may_defer, "a statement deferred where it may not be");
                self.deferred = Some(DeferredStatement {
                    select,
                    mark,
                    statement,
                    text,
                });
                return Ok(true);
            }
            Ok(None) => self.end_deferred(None, counting, mark, &statement, &text)?,
            Err(error) => self.end_deferred(Some(error), counting, mark, &statement, &text)?,
        }
        Ok(false)
    }

    /// Ends a statement of the deferred path as `run_statement` ends one:
    /// its error answered, its counts and slow-log entry.
    fn end_deferred(
        &mut self,
        error: Option<SqlError>,
        mut counting: status::CountingSink<'_>,
        mark: status::Mark,
        statement: &Stmt,
        text: &str,
    ) -> io::Result<()> {
        self.session.take_assigned_vars();
        if let Some(error) = error {
            self.session.note_error(&error);
            counting.error(&error)?;
        }
        counting.note(&mut self.session);
        let sent = status::Sent {
            rows: counting.rows,
            affected: counting.affected,
        };
        status::statement_end(self, mark, statement, text, sent);
        Ok(())
    }

    /// Answers the statement `begin_deferred` left, its read sent.
    fn finish_deferred(&mut self, sink: &mut dyn ResultSink) -> io::Result<()> {
        let Some(deferred) = self.deferred.take() else {
            let error = SqlError::new(
                codes::UNKNOWN,
                "internal error of the SQL node: no statement was started",
            );
            return sink.error(&error);
        };
        let DeferredStatement {
            select,
            mark,
            statement,
            text,
        } = deferred;
        let mut counting = status::CountingSink::new(sink);
        let error = exec::finish_deferred(self, select, false, &mut counting).err();
        self.end_deferred(error, counting, mark, &statement, &text)
    }

    /// Runs the statement (`run_statement` counts around it).
    fn run_inner(
        &mut self,
        statement: &Stmt,
        params: &[SqlValue],
        more: bool,
        sink: &mut dyn ResultSink,
    ) -> io::Result<bool> {
        if !session::keeps_warnings(statement) {
            self.session.start_statement_of(statement);
        }
        // Only this statement's changes are reported with its OK.
        drop(self.session.take_state_changes());
        let outcome = self.dispatch(statement, params, more, sink);
        match outcome {
            Ok(Answered::Done) => Ok(true),
            Ok(Answered::Ok(mut info)) => {
                info.more_results = more;
                info.warnings = self.session.warning_count();
                info.state_changes = self.session.take_state_changes();
                sink.ok(&info)?;
                Ok(true)
            }
            Err(error) => {
                self.session.note_error(&error);
                sink.error(&error)?;
                Ok(false)
            }
        }
    }

    /// The statement dispatch: every statement kind goes to the module
    /// that owns it.
    pub(crate) fn dispatch(
        &mut self,
        statement: &Stmt,
        params: &[SqlValue],
        more: bool,
        sink: &mut dyn ResultSink,
    ) -> SqlResult<Answered> {
        use Statement as S;
        let statement = match statement {
            Stmt::Sql(statement) => &**statement,
            Stmt::Extra(extra) => return session::extra(self, extra, more, sink),
        };
        users::authorize(self, statement)?;
        self.subqueries.clear();
        match statement {
            S::Query(_) => exec::query(self, statement, params, more, sink),
            S::Explain { .. } => exec::explain(self, statement, more, sink),
            S::Insert(sqlparser::ast::Insert {
                returning: Some(_), ..
            })
            | S::Delete(sqlparser::ast::Delete {
                returning: Some(_), ..
            }) => exec::write_returning(self, statement, params, more, sink),
            S::Insert(_) | S::Update(_) | S::Delete(_) => exec::write(self, statement, params),
            S::CreateView(_)
            | S::AlterView(_)
            | S::Drop {
                object_type: sqlparser::ast::ObjectType::View,
                ..
            } => {
                // A schema statement commits what is open first (MySQL's
                // implicit commit), and runs whatever that gives.
                txn::commit(self)?;
                views::statement(self, statement, views::CheckOption::None)
            }
            S::ShowCreate {
                obj_type: sqlparser::ast::ShowCreateObject::View,
                obj_name,
            } => views::show_create(self, obj_name, more, sink),
            S::StartTransaction { .. }
            | S::Commit { .. }
            | S::Rollback { .. }
            | S::Savepoint { .. }
            | S::ReleaseSavepoint { .. } => txn::statement(self, statement),
            S::Flush { .. } => maintenance::flush(self, statement),
            S::LockTables { tables } => txn::lock_tables(self, tables),
            S::UnlockTables => txn::unlock_tables(self),
            S::Set(_) => session::set(self, statement),
            S::Use(_) => session::use_statement(self, statement),
            S::CreateDatabase { .. }
            | S::CreateSchema { .. }
            | S::CreateTable(_)
            | S::CreateIndex(_)
            | S::AlterTable { .. }
            | S::Drop { .. }
            | S::Truncate(_)
            | S::RenameTable(_) => {
                // Not of a temporary table (MySQL's exception).
                let temporary = matches!(statement, S::CreateTable(c) if c.temporary)
                    || matches!(
                        statement,
                        S::Drop {
                            temporary: true,
                            ..
                        }
                    );
                if !temporary {
                    txn::commit(self)?;
                }
                ddl::statement(self, statement)
            }
            S::ShowVariables { filter, global, .. } => {
                show::with_where(self, statement, sink, |conn, sink| {
                    session::show_variables(conn, filter, *global, more, sink)
                })
            }
            S::ShowStatus { filter, global, .. } => {
                show::with_where(self, statement, sink, |conn, sink| {
                    session::show_status(conn, filter, *global, more, sink)
                })
            }
            S::ShowProcessList { full } => session::show_processlist(self, *full, more, sink),
            S::Execute {
                name: Some(name),
                parameters,
                immediate: false,
                into,
                using,
                ..
            } if parameters.is_empty() && into.is_empty() => {
                prepared::execute_sql(self, name, using, more, sink)
            }
            S::Deallocate { name, .. } => prepared::deallocate_sql(self, &name.value),
            S::Kill { modifier, id } => session::kill(
                self,
                *id,
                matches!(modifier, Some(sqlparser::ast::KillType::Query)),
            ),
            S::ShowTables { .. }
            | S::ShowColumns { .. }
            | S::ShowDatabases { .. }
            | S::ShowSchemas { .. }
            | S::ShowCreate { .. }
            | S::ShowVariable { .. }
            | S::ShowCollation { .. }
            | S::ShowCharset(_)
            | S::ExplainTable { .. } => show::with_where(self, statement, sink, |conn, sink| {
                show::statement(conn, statement, more, sink)
            }),
            other => Err(SqlError::unsupported(format_args!(
                "the statement `{}`",
                stdx_truncate(&other.to_string(), 80)
            ))),
        }
    }
}

/// A statement to run: one `sqlparser` parses, or one of MySQL's that it
/// does not (`session::Extra`: `SHOW WARNINGS`, `CREATE USER 'u'@'h'`, …),
/// recognised before parsing.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// Parsed by `sqlparser`.
    Sql(Box<Statement>),
    /// Recognised by `session::parse_query`.
    Extra(session::Extra),
}

/// Whether `statement` has the shape of a read of one row by key: one
/// SELECT of one table (no join, subquery in FROM, GROUP BY, HAVING,
/// lock or WITH) with a WHERE. Only a cheap look at the text's shape, for
/// taking a text command into a thread-pool batch: the planner decides.
fn may_read_one_row(statement: &Stmt) -> bool {
    use sqlparser::ast::{GroupByExpr, SetExpr, TableFactor};
    let Stmt::Sql(statement) = statement else {
        return false;
    };
    let Statement::Query(q) = &**statement else {
        return false;
    };
    let SetExpr::Select(s) = &*q.body else {
        return false;
    };
    let no_group = match &s.group_by {
        GroupByExpr::Expressions(exprs, modifiers) => exprs.is_empty() && modifiers.is_empty(),
        GroupByExpr::All(_) => false,
    };
    q.with.is_none()
        && q.locks.is_empty()
        && s.from.len() == 1
        && s.from[0].joins.is_empty()
        && matches!(s.from[0].relation, TableFactor::Table { .. })
        && s.selection.is_some()
        && no_group
        && s.having.is_none()
        && s.into.is_none()
}

/// What a statement's executor did: answered by itself (a result set
/// written to the sink), or succeeded without rows (the caller sends OK).
pub enum Answered {
    /// The executor wrote its whole answer to the sink.
    Done,
    /// Send this OK (warnings and `more_results` are filled in by the caller).
    Ok(OkInfo),
}

/// Sends a whole result set (for answers small enough to build first:
/// SHOW, variables). A failed write is returned as an error whose sending
/// fails too, which ends the connection.
pub fn send_rows(
    sink: &mut dyn ResultSink,
    columns: &[ColumnMeta],
    rows: Vec<Vec<SqlValue>>,
    more: bool,
) -> SqlResult<()> {
    let io = |e: io::Error| SqlError::new(codes::UNKNOWN, format!("writing the result: {e}"));
    sink.columns(columns).map_err(io)?;
    for row in &rows {
        sink.row(row).map_err(io)?;
    }
    let info = OkInfo {
        more_results: more,
        ..OkInfo::default()
    };
    sink.end_rows(&info).map_err(io)
}

/// At most `max` characters of `s`, for messages quoting a statement.
pub fn stdx_truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

impl<'s> Backend for Conn<'s> {
    fn connection_id(&self) -> u32 {
        self.info.id
    }

    fn credentials(&mut self, login: &Login<'_>) -> Result<Credentials, SqlError> {
        users::credentials(self, login)
    }

    fn logged_in(&mut self, login: &Login<'_>) -> Result<(), SqlError> {
        users::logged_in(self, login)?;
        if login.interactive {
            // An interactive client's session waits as long as
            // `interactive_timeout` says (MySQL's and MariaDB's rule).
            let limit = self
                .session
                .vars
                .get("interactive_timeout")
                .map(str::to_owned);
            if let Some(limit) = limit {
                self.session.vars.set("wait_timeout", limit);
            }
        }
        self.info.idle_limit_s.store(
            seconds_of(self.session.vars.get("wait_timeout")),
            Ordering::Relaxed,
        );
        self.found_rows = login.found_rows;
        self.status.logged_in = true;
        // Idle from now on, until its first command.
        self.set_command("Sleep", None);
        Ok(())
    }

    fn query(&mut self, sql: &str, multi: bool, sink: &mut dyn ResultSink) -> io::Result<()> {
        self.set_command("Query", Some(sql));
        let result = self.query_inner(sql, multi, sink);
        self.set_command("Sleep", None);
        result
    }

    fn prepare(&mut self, sql: &str) -> Result<Prepared, SqlError> {
        status::count_command(self, status::COM_STMT_PREPARE);
        // A prepare that fails replaces the last statement's notes with its
        // error (SHOW WARNINGS and SHOW ERRORS list it); one that succeeds
        // leaves them, as MariaDB's does.
        prepared::prepare(self, sql).inspect_err(|error| {
            self.session.start_statement();
            self.session.note_error(error);
        })
    }

    fn execute(
        &mut self,
        id: u32,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
    ) -> io::Result<()> {
        status::count_command(self, status::COM_STMT_EXECUTE);
        prepared::execute(self, id, params, sink)
    }

    fn may_defer(&self, id: u32) -> bool {
        prepared::may_defer(self, id)
    }

    fn execute_deferrable(
        &mut self,
        id: u32,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
    ) -> io::Result<bool> {
        status::count_command(self, status::COM_STMT_EXECUTE);
        prepared::execute_deferrable(self, id, params, sink)
    }

    fn may_defer_query(&mut self, sql: &str) -> bool {
        self.text_parsed = None;
        if self.deferred.is_some() {
            return false;
        }
        let Ok(mut statements) = session::parse_text(sql, false) else {
            return false;
        };
        match statements.pop() {
            Some(Ok(statement)) if statements.is_empty() => {
                // Kept either way: taken, `query_deferrable` runs it; not
                // taken, `query` does, without parsing the text again.
                let take = may_read_one_row(&statement);
                self.text_parsed = Some((Arc::from(sql), Arc::new(statement)));
                take
            }
            _ => false,
        }
    }

    fn query_deferrable(&mut self, sql: &str, sink: &mut dyn ResultSink) -> io::Result<bool> {
        let parsed = self.text_parsed.take().filter(|(text, _)| **text == *sql);
        let Some((text, statement)) = parsed else {
            return self.query(sql, false, sink).map(|()| false);
        };
        self.set_command_shared("Query", Some(Arc::clone(&text)));
        let deferred = self.begin_deferred(statement, &[], sink, text, None, true)?;
        if !deferred {
            self.set_command("Sleep", None);
        }
        Ok(deferred)
    }

    fn finish_deferred(&mut self, sink: &mut dyn ResultSink) -> io::Result<()> {
        prepared::finish_deferred(self, sink)
    }

    fn close(&mut self, id: u32) {
        status::count_command(self, status::COM_STMT_CLOSE);
        self.prepared.close(id);
    }

    fn has_statement(&self, id: u32) -> bool {
        self.prepared.contains(id)
    }

    fn use_database(&mut self, database: &str) -> Result<(), SqlError> {
        session::use_database(self, database)
    }

    fn field_list(&mut self, table: &str) -> Result<Vec<ColumnMeta>, SqlError> {
        show::field_list(self, table)
    }

    fn reset(&mut self) {
        txn::rollback_quietly(self);
        catalog::drop_temporaries(self);
        self.prepared = prepared::Statements::new(Arc::clone(&self.engine.prepared_count));
        session::reset(self);
    }

    fn status_flags(&self) -> u16 {
        self.session.status_flags() | self.tx.status_flags()
    }

    fn take_state_changes(&mut self) -> Vec<crate::backend::StateChange> {
        self.session.take_state_changes()
    }

    fn disconnect(&mut self) {
        txn::rollback_quietly(self);
        catalog::drop_temporaries(self);
    }

    fn killed(&self) -> bool {
        self.info.killed.load(Ordering::Relaxed)
    }

    fn touched(&mut self) {
        self.set_command("Sleep", None);
    }

    fn client_collation(&mut self, collation: u8) {
        session::client_collation(self, collation);
    }

    fn latin1_client(&self) -> bool {
        self.session.vars.hot().latin1_client
    }

    fn latin1_results(&self) -> bool {
        self.session.vars.hot().latin1_results
    }
}

impl<'s> Conn<'s> {
    /// Tells `SHOW PROCESSLIST` what this connection does now. A command
    /// with a statement starts here: a `KILL QUERY` of the idle connection
    /// before it is forgotten, and one after (once the statement shows in
    /// the process list) stops it, because the flag is cleared only here,
    /// before the statement shows, never while it runs.
    pub fn set_command(&self, command: &'static str, statement: Option<&str>) {
        self.set_command_shared(command, statement.map(Arc::from));
    }

    /// [`Conn::set_command`] with the text shared (a prepared statement's:
    /// not copied per execute).
    pub fn set_command_shared(&self, command: &'static str, statement: Option<Arc<str>>) {
        if statement.is_some() {
            self.info.query_killed.store(false, Ordering::Relaxed);
        }
        let mut state = self.info.state.lock().unwrap_or_else(|p| p.into_inner());
        state.command = command;
        state.info = statement;
        state.since = Some(Instant::now());
    }

    fn query_inner(&mut self, sql: &str, multi: bool, sink: &mut dyn ResultSink) -> io::Result<()> {
        let refuse = |conn: &mut Conn<'_>, error: &SqlError, sink: &mut dyn ResultSink| {
            conn.session.start_statement();
            conn.session.note_error(error);
            sink.error(error)
        };
        // The one statement `may_defer_query` parsed from this very text.
        if let Some((_, statement)) = self.text_parsed.take().filter(|(text, _)| **text == *sql) {
            return self
                .run_statement(&statement, &[], false, sink, sql)
                .map(|_| ());
        }
        let statements = match session::parse_text(sql, multi) {
            Ok(statements) => statements,
            Err(error) => return refuse(self, &error, sink),
        };
        let count = statements.len();
        // The client's text is the statement's when it is the only one.
        let text = if count == 1 { sql } else { "" };
        for (at, statement) in statements.iter().enumerate() {
            let more = at + 1 < count;
            match statement {
                Ok(statement) => {
                    if !self.run_statement(statement, &[], more, sink, text)? {
                        break;
                    }
                }
                // The statements before it ran; the run stops here.
                Err(error) => return refuse(self, error, sink),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    /// The statement as text once parsed (DUAL dropped or kept).
    fn parsed(sql: &str) -> String {
        parse(sql).expect("parses")[0].to_string()
    }

    #[test]
    fn unquoted_dual_alone_is_no_from() {
        assert_eq!(
            parsed("SELECT 1 FROM dual WHERE 1=1"),
            "SELECT 1 WHERE 1 = 1"
        );
        assert_eq!(parsed("SELECT 1 FROM DUAL LIMIT 1"), "SELECT 1 LIMIT 1");
        assert_eq!(
            parsed("SELECT 1 FROM dual UNION SELECT (SELECT 2 FROM Dual)"),
            "SELECT 1 UNION SELECT (SELECT 2)"
        );
        assert_eq!(
            parsed("INSERT INTO t SELECT 1 FROM dual"),
            "INSERT INTO t SELECT 1"
        );
        assert_eq!(parsed("SELECT 1 FROM `dual`"), "SELECT 1 FROM `dual`");
        assert_eq!(parsed("SELECT 1 FROM db.dual"), "SELECT 1 FROM db.dual");
        assert_eq!(
            parsed("SELECT 1 FROM `dual` AS d"),
            "SELECT 1 FROM `dual` AS d"
        );
        assert_eq!(parsed("SELECT dual.c FROM t"), "SELECT dual.c FROM t");
        assert_eq!(parsed("SET @dual = 1"), "SET @dual = 1");
        assert_eq!(
            parsed("DELETE FROM t WHERE a IN (SELECT 1 FROM dual)"),
            "DELETE FROM t WHERE a IN (SELECT 1)"
        );
    }

    /// MariaDB reserves DUAL: any other use of the unquoted word is 1064,
    /// near the word or near what follows `FROM DUAL`.
    #[test]
    fn dual_elsewhere_is_a_syntax_error() {
        for (sql, near) in [
            ("SELECT 1 FROM dual AS d", "near 'AS d'"),
            ("SELECT 1 FROM dual d WHERE 1", "near 'd WHERE 1'"),
            ("SELECT 1 FROM t, dual", "near 'dual'"),
            ("SELECT 1 FROM dual JOIN t", "near 'JOIN t'"),
            ("SELECT 1 FROM (dual)", "near 'dual)'"),
            ("SELECT 1 FROM db . dual", "near 'dual'"),
            ("DELETE FROM dual", "near 'dual'"),
            ("UPDATE dual SET a = 1", "near 'dual SET a = 1'"),
            ("SHOW TABLES FROM dual", "near 'dual'"),
            ("SELECT 1 AS dual", "near 'dual'"),
            (
                "SELECT 1 FROM t WHERE a IN (SELECT 1 FROM dual x)",
                "near 'x)'",
            ),
        ] {
            let error = parse(sql).expect_err(sql);
            assert_eq!(error.code, super::codes::PARSE, "{sql}");
            assert!(error.message.contains(near), "{sql}: {}", error.message);
        }
    }
}
