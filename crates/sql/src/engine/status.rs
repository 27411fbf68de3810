//! Status counters (`SHOW [GLOBAL|SESSION] STATUS`,
//! `information_schema.GLOBAL_STATUS`/`SESSION_STATUS`) and the slow
//! query log.
//!
//! Counting costs no lock and no shared cache line: a connection's
//! counters ([`Published`]) are atomics that only its own thread writes
//! (a relaxed load and store, a plain `mov` on x86, never a locked
//! read-modify-write), and `SHOW GLOBAL STATUS` sums them over the live
//! connections plus what closed connections left ([`Global`]). The native
//! API's counters (`Ndb_api_*`) are the native session's own
//! ([`skarv_client::SessionStats`]): a statement's share is the difference
//! of the session's counters at its end and its start, added to the
//! connection's, so they stay right when a session serves several
//! connections (a thread pool).
//!
//! The slow query log writes MariaDB's layout (the project's reference;
//! MySQL 5.6's too, which Debian's `mysqldumpslow` and `pt-query-digest`
//! read): a header when the file is opened, then per statement `# Time:`,
//! `# User@Host:`, `# Thread_id: … Schema: … QC_hit: No`, `# Query_time:
//! … Lock_time: … Rows_sent: … Rows_examined: …`, `# Rows_affected: …`,
//! `use db;` when the database changed since the last entry of this
//! connection, `SET timestamp=…;` and the statement. While the log is off,
//! a statement pays one relaxed load for it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use skarv_client::SessionStats;
use sqlparser::ast::{ObjectType, Statement};

use super::session::Extra;
use super::{Conn, Stmt};
use crate::backend::{OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::SqlValue;

/// `long_query_time`'s default, in seconds (MySQL's).
pub const LONG_QUERY_TIME_DEFAULT_SECS: f64 = 10.0;
/// The largest value of a variable in seconds (`long_query_time`,
/// `max_statement_time`), MariaDB's: a year.
pub const SECONDS_VAR_MAX_SECS: f64 = 31_536_000.0;
/// Longest statement text the slow log writes, in bytes (a longer one is
/// cut there, at a character boundary).
pub const SLOW_LOG_STATEMENT_BYTES_MAX: usize = 1 << 20;

/// The `Com_*` counters, by name after `Com_`, sorted (MySQL's names).
pub const COM_NAMES: &[&str] = &[
    "alter_table",
    "alter_user",
    "begin",
    "change_db",
    "commit",
    "create_db",
    "create_index",
    "create_table",
    "create_user",
    "dealloc_sql",
    "delete",
    "delete_multi",
    "do",
    "drop_db",
    "drop_index",
    "drop_table",
    "drop_user",
    "execute_sql",
    "grant",
    "insert",
    "insert_select",
    "kill",
    "load",
    "prepare_sql",
    "rename_table",
    "replace",
    "replace_select",
    "revoke",
    "rollback",
    "select",
    "set_option",
    "show_charsets",
    "show_collations",
    "show_create_db",
    "show_create_table",
    "show_create_user",
    "show_databases",
    "show_errors",
    "show_fields",
    "show_grants",
    "show_keys",
    "show_processlist",
    "show_status",
    "show_storage_engines",
    "show_table_status",
    "show_tables",
    "show_variables",
    "show_warnings",
    "stmt_close",
    "stmt_execute",
    "stmt_prepare",
    "stmt_reprepare",
    "truncate",
    "update",
    "update_multi",
];

/// How many `Com_*` counters there are.
const COMS: usize = COM_NAMES.len();
/// How many native counters a session has.
const NATIVE: usize = SessionStats::NAMES.len();

/// The position of `Com_<name>`, for constants (a name not in
/// [`COM_NAMES`] fails the build).
const fn com_index(name: &str) -> usize {
    let mut i = 0;
    while i < COMS {
        let (a, b) = (COM_NAMES[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("not a Com_ counter")
}

/// A counter only its connection's thread writes (see the module doc).
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one (the owner's thread only: a load and a store).
    #[inline]
    pub fn bump(&self) {
        self.set(self.get().wrapping_add(1));
    }

    /// Adds `n` (the owner's thread only).
    #[inline]
    pub fn add(&self, n: u64) {
        self.set(self.get().wrapping_add(n));
    }

    /// The value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

/// One connection's counters, as others may read them.
#[derive(Debug)]
pub struct Published {
    /// `Questions` (and `Queries`): statements run.
    pub questions: Counter,
    /// `Slow_queries`: statements that took longer than `long_query_time`.
    pub slow_queries: Counter,
    /// `Subquery_cache_hit`: a correlated subquery's result found kept
    /// for the outer values (MariaDB's name).
    pub subquery_cache_hit: Counter,
    /// `Subquery_cache_miss`: a correlated subquery run for outer values
    /// not seen before in the statement.
    pub subquery_cache_miss: Counter,
    /// `Sort_merge_passes`: merges of an ORDER BY's runs on disk (none
    /// while its rows fit in `sort_buffer_size`).
    pub sort_merge_passes: Counter,
    com: [Counter; COMS],
    native: [Counter; NATIVE],
}

impl Default for Published {
    fn default() -> Published {
        Published {
            questions: Counter::default(),
            slow_queries: Counter::default(),
            subquery_cache_hit: Counter::default(),
            subquery_cache_miss: Counter::default(),
            sort_merge_passes: Counter::default(),
            com: std::array::from_fn(|_| Counter::default()),
            native: std::array::from_fn(|_| Counter::default()),
        }
    }
}

/// Counts of many connections summed (closed ones, or a whole SQL node).
#[derive(Clone, Debug)]
struct Totals {
    questions: u64,
    slow_queries: u64,
    subquery_cache_hit: u64,
    subquery_cache_miss: u64,
    sort_merge_passes: u64,
    com: [u64; COMS],
    native: [u64; NATIVE],
}

impl Default for Totals {
    fn default() -> Totals {
        Totals {
            questions: 0,
            slow_queries: 0,
            subquery_cache_hit: 0,
            subquery_cache_miss: 0,
            sort_merge_passes: 0,
            com: [0; COMS],
            native: [0; NATIVE],
        }
    }
}

impl Totals {
    fn add(&mut self, p: &Published) {
        self.questions += p.questions.get();
        self.slow_queries += p.slow_queries.get();
        self.subquery_cache_hit += p.subquery_cache_hit.get();
        self.subquery_cache_miss += p.subquery_cache_miss.get();
        self.sort_merge_passes += p.sort_merge_passes.get();
        for (t, c) in self.com.iter_mut().zip(&p.com) {
            *t += c.get();
        }
        for (t, c) in self.native.iter_mut().zip(&p.native) {
            *t += c.get();
        }
    }

    fn of(p: &Published) -> Totals {
        let mut t = Totals::default();
        t.add(p);
        t
    }
}

/// What the SQL node keeps for every connection together.
#[derive(Default)]
pub struct Global {
    /// The counts connections left when they closed.
    closed: Mutex<Totals>,
    /// Connection threads started (`Threads_created`).
    pub threads_created: AtomicU64,
    /// Connections that never logged in (`Aborted_connects`).
    pub aborted_connects: AtomicU64,
    /// Connections closed for idling past their `wait_timeout`
    /// (`Aborted_clients`, where MariaDB counts them among others).
    pub aborted_clients: AtomicU64,
    /// `log_queries_not_using_indexes`.
    pub log_not_using_indexes: AtomicBool,
    /// The slow query log.
    pub slow_log: SlowLog,
    /// Batches of deferred key reads thread-pool workers sent
    /// (`Threadpool_batches`).
    pub pool_batches: AtomicU64,
    /// Statements whose read went in such a batch
    /// (`Threadpool_batched_reads`).
    pub pool_batched_reads: AtomicU64,
}

/// A connection's own side of the counters.
#[derive(Debug)]
pub struct ConnStatus {
    /// The native session's counters when the running statement started
    /// (`SessionStats::NAMES` order).
    native_start: [u64; NATIVE],
    /// The connection's native counts (its statements' shares).
    native: [u64; NATIVE],
    /// `long_query_time` of the session, in nanoseconds.
    pub long_query_nanos: u64,
    /// `min_examined_row_limit` of the session.
    pub min_examined_rows: u64,
    /// The database of this connection's last slow-log entry.
    logged_db: Option<String>,
    /// The connection logged in (else its end counts `Aborted_connects`).
    pub logged_in: bool,
}

impl ConnStatus {
    /// Takes `long_query_time` and `min_examined_row_limit` from the
    /// global values again (`COM_RESET_CONNECTION`, `COM_CHANGE_USER`).
    pub fn reset(&mut self, globals: &super::session::Variables) {
        let fresh = ConnStatus::new(
            globals.get("long_query_time"),
            globals.get("min_examined_row_limit"),
        );
        self.long_query_nanos = fresh.long_query_nanos;
        self.min_examined_rows = fresh.min_examined_rows;
    }

    /// A new connection's, with the global `long_query_time` and
    /// `min_examined_row_limit` (as text, as the variables keep them).
    pub fn new(long_query_time: Option<&str>, min_examined: Option<&str>) -> ConnStatus {
        ConnStatus {
            native_start: [0; NATIVE],
            native: [0; NATIVE],
            long_query_nanos: long_query_time
                .and_then(|t| t.parse::<f64>().ok())
                .map_or(secs_to_nanos(LONG_QUERY_TIME_DEFAULT_SECS), secs_to_nanos),
            min_examined_rows: min_examined.and_then(|m| m.parse().ok()).unwrap_or(0),
            logged_db: None,
            logged_in: false,
        }
    }
}

fn secs_to_nanos(secs: f64) -> u64 {
    (secs * 1e9) as u64
}

/// What a statement's end needs of its start.
pub struct Mark {
    started: Instant,
    /// The slow log was on at the start: rows are counted.
    logging: bool,
}

impl Mark {
    /// Whether the statement's rows are to be counted for the slow log.
    pub fn logs(&self) -> bool {
        self.logging
    }
}

/// Counts a statement that starts: `Questions`, its `Com_*`, and notes the
/// native counters and the time.
pub fn statement_start(conn: &mut Conn<'_>, statement: &Stmt) -> Mark {
    let published = &conn.info.status;
    published.questions.bump();
    if let Some(at) = com_of(statement) {
        published.com[at].bump();
    }
    conn.status.native_start = conn.native.stats().values();
    let started = Instant::now();
    conn.statement_started = started;
    Mark {
        started,
        logging: conn.engine.status.slow_log.enabled.load(Ordering::Relaxed),
    }
}

/// `Com_stmt_prepare`'s position.
pub const COM_STMT_PREPARE: usize = com_index("stmt_prepare");
/// `Com_stmt_execute`'s position.
pub const COM_STMT_EXECUTE: usize = com_index("stmt_execute");
/// `Com_stmt_close`'s position.
pub const COM_STMT_CLOSE: usize = com_index("stmt_close");
/// `Com_stmt_reprepare`'s position: a prepared statement's kept plan made
/// again because what it was made under changed (MySQL counts the same
/// after a table's metadata changed).
pub const COM_STMT_REPREPARE: usize = com_index("stmt_reprepare");

/// Counts a command that is no statement (`COM_STMT_PREPARE`, …): `at`
/// is its counter's position (`COM_STMT_…`).
pub fn count_command(conn: &Conn<'_>, at: usize) {
    if let Some(counter) = conn.info.status.com.get(at) {
        counter.bump();
    }
}

/// Counts rows and affected rows for the slow log, passing all on.
pub struct CountingSink<'a> {
    inner: &'a mut dyn ResultSink,
    /// Rows sent.
    pub rows: u64,
    /// Affected rows of the OK.
    pub affected: u64,
    /// A result set was sent (its columns).
    pub result_set: bool,
    /// An error was sent.
    pub failed: bool,
}

impl<'a> CountingSink<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn ResultSink) -> CountingSink<'a> {
        CountingSink {
            inner,
            rows: 0,
            affected: 0,
            result_set: false,
            failed: false,
        }
    }

    /// What `FOUND_ROWS()` and `ROW_COUNT()` of the next statement give,
    /// as MySQL: a result set's rows (and -1 rows changed), a write's
    /// affected rows, -1 after an error.
    pub fn note(&self, session: &mut super::session::SessionState) {
        let calculated = session.calc_found_rows.take();
        if self.failed {
            session.row_count = -1;
        } else if self.result_set {
            session.found_rows = calculated.unwrap_or(self.rows);
            session.row_count = -1;
        } else {
            session.row_count = i64::try_from(self.affected).unwrap_or(i64::MAX);
        }
    }
}

impl ResultSink for CountingSink<'_> {
    fn columns(&mut self, columns: &[crate::value::ColumnMeta]) -> io::Result<()> {
        self.result_set = true;
        self.inner.columns(columns)
    }
    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        self.rows += 1;
        self.inner.row(values)
    }
    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()> {
        self.inner.end_rows(info)
    }
    fn ok(&mut self, info: &OkInfo) -> io::Result<()> {
        self.affected = info.affected_rows;
        self.inner.ok(info)
    }
    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.failed = true;
        self.inner.error(error)
    }
    fn local_infile(&mut self, name: &str) -> io::Result<Option<Box<dyn io::Read + '_>>> {
        self.inner.local_infile(name)
    }
}

/// What the slow log says of a statement besides its time.
#[derive(Default)]
pub struct Sent {
    /// Rows of its result.
    pub rows: u64,
    /// Affected rows.
    pub affected: u64,
}

/// Counts a statement that ended: its native share, `Slow_queries`, and
/// the slow log. `text`: the statement as the client sent it, when known.
pub fn statement_end(conn: &mut Conn<'_>, mark: Mark, statement: &Stmt, text: &str, sent: Sent) {
    let elapsed = mark.started.elapsed();
    let now = conn.native.stats().values();
    let start = conn.status.native_start;
    let published = &conn.info.status;
    let mut share = [0u64; NATIVE];
    for i in 0..NATIVE {
        share[i] = now[i].wrapping_sub(start[i]);
        let total = conn.status.native[i].wrapping_add(share[i]);
        conn.status.native[i] = total;
        published.native[i].set(total);
    }
    // Between statements the running share is nothing.
    conn.status.native_start = now;
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    let slow = nanos > conn.status.long_query_nanos;
    if slow {
        published.slow_queries.bump();
    }
    if !mark.logging || !conn.engine.status.slow_log.enabled.load(Ordering::Relaxed) {
        return;
    }
    let figure = |name: &str| native_index(name).map_or(0, |i| share[i]);
    let no_index = figure("table_scan") > 0
        && conn
            .engine
            .status
            .log_not_using_indexes
            .load(Ordering::Relaxed);
    let examined = figure("read_row");
    if !(slow || no_index) || examined < conn.status.min_examined_rows {
        return;
    }
    let entry = Entry {
        elapsed,
        rows_sent: sent.rows,
        rows_examined: examined,
        rows_affected: sent.affected,
    };
    write_entry(conn, statement, text, &entry);
}

/// The position of a native counter in `SessionStats::NAMES`.
fn native_index(name: &str) -> Option<usize> {
    SessionStats::NAMES.iter().position(|n| *n == name)
}

/// The `Com_*` counter of a statement.
fn com_of(statement: &Stmt) -> Option<usize> {
    use Statement as S;
    // Positions resolved at compile time: no name lookup per statement.
    macro_rules! c {
        ($name:literal) => {
            const { com_index($name) }
        };
    }
    let at = match statement {
        Stmt::Sql(s) => match &**s {
            S::Query(_) => c!("select"),
            S::Insert(i) => match (i.replace_into, i.source.as_ref().map(|q| &*q.body)) {
                (true, Some(sqlparser::ast::SetExpr::Values(_)) | None) => c!("replace"),
                (true, Some(_)) => c!("replace_select"),
                (false, Some(sqlparser::ast::SetExpr::Values(_)) | None) => c!("insert"),
                (false, Some(_)) => c!("insert_select"),
            },
            S::Update(u) if super::exec::is_multi_update(u) => c!("update_multi"),
            S::Update(_) => c!("update"),
            S::Delete(d) if super::exec::is_multi_delete(d) => c!("delete_multi"),
            S::Delete(_) => c!("delete"),
            S::StartTransaction { .. } => c!("begin"),
            S::Commit { .. } => c!("commit"),
            S::Rollback { .. } => c!("rollback"),
            S::Set(_) => c!("set_option"),
            S::Use(_) => c!("change_db"),
            S::CreateDatabase { .. } | S::CreateSchema { .. } => c!("create_db"),
            S::CreateTable(_) => c!("create_table"),
            S::CreateIndex(_) => c!("create_index"),
            S::AlterTable { .. } => c!("alter_table"),
            S::Drop { object_type, .. } => match object_type {
                ObjectType::Table => c!("drop_table"),
                ObjectType::Index => c!("drop_index"),
                ObjectType::Database | ObjectType::Schema => c!("drop_db"),
                _ => return None,
            },
            S::Truncate(_) => c!("truncate"),
            S::RenameTable(_) => c!("rename_table"),
            S::ShowVariables { .. } | S::ShowVariable { .. } => c!("show_variables"),
            S::ShowStatus { .. } => c!("show_status"),
            S::ShowProcessList { .. } => c!("show_processlist"),
            S::Kill { .. } => c!("kill"),
            S::ShowTables { .. } => c!("show_tables"),
            S::ShowColumns { .. } | S::ExplainTable { .. } => c!("show_fields"),
            S::ShowDatabases { .. } | S::ShowSchemas { .. } => c!("show_databases"),
            S::ShowCreate {
                obj_type: sqlparser::ast::ShowCreateObject::Table,
                ..
            } => c!("show_create_table"),
            S::ShowCollation { .. } => c!("show_collations"),
            S::ShowCharset(_) => c!("show_charsets"),
            S::Execute { .. } => c!("execute_sql"),
            S::Deallocate { .. } => c!("dealloc_sql"),
            _ => return None,
        },
        Stmt::Extra(Extra::ShowWarnings { errors, .. }) => {
            if *errors {
                c!("show_errors")
            } else {
                c!("show_warnings")
            }
        }
        Stmt::Extra(Extra::Prepare { .. }) => c!("prepare_sql"),
        Stmt::Extra(Extra::LoadData(_)) => c!("load"),
        Stmt::Extra(Extra::SelectOutfile(_)) => c!("select"),
        Stmt::Extra(Extra::Begin { .. }) => c!("begin"),
        Stmt::Extra(Extra::Do(_)) => c!("do"),
        // Counted as the statement it runs.
        Stmt::Extra(Extra::SetStatement { inner, .. }) => return com_of(inner),
        Stmt::Extra(Extra::CheckedView(..)) => return None,
        Stmt::Extra(Extra::Catalog(c)) => match &**c {
            super::ddl::CatalogStmt::CreateTable { .. } => c!("create_table"),
            super::ddl::CatalogStmt::ShowCreateDatabase { .. } => c!("show_create_db"),
            super::ddl::CatalogStmt::AlterTableOptions { .. }
            | super::ddl::CatalogStmt::AlterTable { .. } => c!("alter_table"),
            super::ddl::CatalogStmt::ShowTableStatus { .. } => c!("show_table_status"),
        },
        Stmt::Extra(Extra::Text { head, .. }) => {
            let head = head.as_str();
            let starts = |p: &str| head.starts_with(p);
            if starts("SHOW CREATE DATABASE") || starts("SHOW CREATE SCHEMA") {
                c!("show_create_db")
            } else if starts("SHOW ENGINES") || starts("SHOW STORAGE ENGINES") {
                c!("show_storage_engines")
            } else if starts("SHOW TABLE STATUS") {
                c!("show_table_status")
            } else if starts("SHOW INDEX") || starts("SHOW KEYS") || starts("SHOW INDEXES") {
                c!("show_keys")
            } else if starts("SHOW GRANTS") {
                c!("show_grants")
            } else if starts("SHOW CREATE USER") {
                c!("show_create_user")
            } else if starts("CREATE USER") {
                c!("create_user")
            } else if starts("DROP USER") {
                c!("drop_user")
            } else if starts("ALTER USER") || starts("SET PASSWORD") {
                c!("alter_user")
            } else if starts("GRANT") {
                c!("grant")
            } else if starts("REVOKE") {
                c!("revoke")
            } else if starts("CREATE TABLE") {
                c!("create_table")
            } else {
                return None;
            }
        }
    };
    Some(at)
}

// ---- SHOW STATUS ----

/// The status rows, sorted by name: the session's figures (`global`:
/// false) or the SQL node's.
pub fn rows(conn: &Conn<'_>, global: bool) -> Vec<(String, String)> {
    let engine = &conn.engine;
    // One look at the registry: the closed connections' counts and the
    // live ones' (a closing connection moves from one to the other under
    // this lock, `connection_closed`).
    let (threads_connected, threads_running, totals, mut node_native) = {
        let connections = engine.connections.lock().unwrap_or_else(|p| p.into_inner());
        let running = connections
            .values()
            .filter(|c| c.state.lock().unwrap_or_else(|p| p.into_inner()).command != "Sleep")
            .count();
        let mut node = engine
            .status
            .closed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for c in connections.values() {
            node.add(&c.status);
        }
        let native = node.native;
        let totals = if global {
            node
        } else {
            Totals::of(&conn.info.status)
        };
        (connections.len(), running, totals, native)
    };
    // The session's native figures include the running statement's share
    // so far (a SHOW after a statement sees it).
    let session_native: [u64; NATIVE] = {
        let now = conn.native.stats().values();
        let start = conn.status.native_start;
        std::array::from_fn(|i| conn.status.native[i].wrapping_add(now[i].wrapping_sub(start[i])))
    };
    // This session's running statement is not published yet.
    let own = conn.info.status.native.iter().map(Counter::get);
    for ((x, own), s) in node_native.iter_mut().zip(own).zip(session_native) {
        *x = x.wrapping_sub(own).wrapping_add(s);
    }
    let node = |name: &str| native_index(name).map_or(0, |i| node_native[i]);
    let mut out: Vec<(String, String)> = Vec::with_capacity(128);
    let mut put = |name: &str, value: String| out.push((name.to_owned(), value));
    put(
        "Aborted_clients",
        engine
            .status
            .aborted_clients
            .load(Ordering::Relaxed)
            .to_string(),
    );
    put(
        "Aborted_connects",
        engine
            .status
            .aborted_connects
            .load(Ordering::Relaxed)
            .to_string(),
    );
    for (name, n) in COM_NAMES.iter().zip(totals.com) {
        put(&format!("Com_{name}"), n.to_string());
    }
    put(
        "Connections",
        u64::from(engine.connections_opened()).to_string(),
    );
    for (i, name) in SessionStats::NAMES.iter().enumerate() {
        if *name == "exec" || name.starts_with("pushed_") {
            continue;
        }
        put(&format!("Ndb_api_{name}_count"), node_native[i].to_string());
        put(
            &format!("Ndb_api_{name}_count_session"),
            session_native[i].to_string(),
        );
        // No replication applier in Skarv: its figures are 0.
        put(&format!("Ndb_api_{name}_count_slave"), "0".to_owned());
    }
    put("Ndb_execute_count", node("exec").to_string());
    for name in [
        "pushed_queries_defined",
        "pushed_queries_dropped",
        "pushed_queries_executed",
        "pushed_reads",
    ] {
        put(&format!("Ndb_{name}"), node(name).to_string());
    }
    put("Ndb_pruned_scan_count", node("pruned_scan").to_string());
    put(
        "Ndb_scan_count",
        (node("table_scan") + node("range_scan")).to_string(),
    );
    put(
        "Prepared_stmt_count",
        engine.prepared_count.load(Ordering::Relaxed).to_string(),
    );
    put("Queries", totals.questions.to_string());
    put("Questions", totals.questions.to_string());
    put("Slow_queries", totals.slow_queries.to_string());
    put("Sort_merge_passes", totals.sort_merge_passes.to_string());
    put("Ssl_cipher", String::new());
    put("Subquery_cache_hit", totals.subquery_cache_hit.to_string());
    put(
        "Subquery_cache_miss",
        totals.subquery_cache_miss.to_string(),
    );
    put("Threads_connected", threads_connected.to_string());
    put(
        "Threads_created",
        engine
            .status
            .threads_created
            .load(Ordering::Relaxed)
            .to_string(),
    );
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed).to_string();
    put(
        "Threadpool_batched_reads",
        load(&engine.status.pool_batched_reads),
    );
    put("Threadpool_batches", load(&engine.status.pool_batches));
    put("Threads_running", threads_running.to_string());
    put("Uptime", engine.started.elapsed().as_secs().to_string());
    out.sort_by_key(|(name, _)| name.to_ascii_lowercase());
    out
}

/// Folds a closing connection's counts into the SQL node's, and counts
/// `Aborted_connects` for one that never logged in. Called with the
/// connection still registered: it leaves the registry under the same
/// lock, so a `SHOW GLOBAL STATUS` counts it exactly once.
pub fn connection_closed(conn: &Conn<'_>) {
    let engine = &conn.engine;
    let mut connections = engine.connections.lock().unwrap_or_else(|p| p.into_inner());
    engine
        .status
        .closed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .add(&conn.info.status);
    connections.remove(&conn.info.id);
    drop(connections);
    if !conn.status.logged_in {
        engine
            .status
            .aborted_connects
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// `FLUSH STATUS`: this connection's counters start again from 0; what
/// they held stays in the SQL node's global figures (as MariaDB's).
pub fn flush_status(conn: &mut Conn<'_>) {
    let engine = &conn.engine;
    {
        // Under the registry's lock, as a closing connection moves its
        // counts: a global SHOW STATUS sees them in one place or the other.
        let _connections = engine.connections.lock().unwrap_or_else(|p| p.into_inner());
        let mut closed = engine
            .status
            .closed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        closed.add(&conn.info.status);
        let p = &conn.info.status;
        for c in [
            &p.questions,
            &p.slow_queries,
            &p.subquery_cache_hit,
            &p.subquery_cache_miss,
            &p.sort_merge_passes,
        ]
        .into_iter()
        .chain(&p.com)
        .chain(&p.native)
        {
            c.set(0);
        }
    }
    conn.status.native = [0; NATIVE];
    conn.status.native_start = conn.native.stats().values();
}

// ---- variables ----

/// Checks and applies a slow-log variable being set (`global`: `SET
/// GLOBAL`); `value` is the normalised text. Other names pass.
pub fn variable_set(conn: &mut Conn<'_>, name: &str, value: &str, global: bool) -> SqlResult<()> {
    // The log's switch and file are the server's: naming a file makes the
    // SQL node append to it, so only an account with SUPER may (MySQL
    // asks SUPER or SYSTEM_VARIABLES_ADMIN of every SET GLOBAL).
    let server_wide = matches!(
        name,
        "slow_query_log" | "slow_query_log_file" | "log_queries_not_using_indexes"
    );
    if global && server_wide && conn.grants.global & super::users::privilege::SUPER == 0 {
        return Err(SqlError::new(
            codes::SPECIFIC_ACCESS_DENIED,
            "Access denied; you need (at least one of) the SUPER privilege(s) for this operation",
        ));
    }
    let engine = &conn.engine;
    match name {
        "long_query_time" if !global => {
            conn.status.long_query_nanos = value.parse::<f64>().map_or(0, secs_to_nanos);
        }
        "min_examined_row_limit" if !global => {
            conn.status.min_examined_rows = value.parse().unwrap_or(0);
        }
        "log_queries_not_using_indexes" => engine
            .status
            .log_not_using_indexes
            .store(value == "ON", Ordering::Relaxed),
        "slow_query_log" => engine.status.slow_log.set_enabled(value == "ON", name)?,
        "slow_query_log_file" => engine.status.slow_log.set_path(value.into(), name)?,
        _ => {}
    }
    Ok(())
}

/// `long_query_time`'s value as MySQL shows it ("10.000000"), or 1231/1232.
pub fn seconds_value(name: &str, value: &str) -> SqlResult<(String, bool)> {
    let secs: f64 = value
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| !s.is_nan())
        .ok_or_else(|| {
            SqlError::new(
                codes::WRONG_TYPE_FOR_VAR,
                format!("Incorrect argument type to variable '{name}'"),
            )
        })?;
    // Out of range: the nearest bound, as MariaDB's (with 1292).
    let clamped = secs.clamp(0.0, SECONDS_VAR_MAX_SECS);
    Ok((format!("{clamped:.6}"), clamped != secs))
}

// ---- the slow query log ----

/// The slow query log: whether it is on (read per statement, relaxed),
/// and its file.
#[derive(Default)]
pub struct SlowLog {
    /// `slow_query_log`.
    pub enabled: AtomicBool,
    file: Mutex<SlowFile>,
}

#[derive(Default)]
struct SlowFile {
    path: PathBuf,
    open: Option<File>,
    /// The port the header names.
    port: u16,
}

impl SlowLog {
    /// Sets the file and the port its header names (at start).
    pub fn configure(&self, path: PathBuf, port: u16) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.path = path;
        file.port = port;
        file.open = None;
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .path
            .clone()
    }

    fn set_enabled(&self, on: bool, name: &str) -> SqlResult<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if on && file.open.is_none() {
            file.reopen()
                .map_err(|e| refused(name, "ON", &file.path, &e))?;
        }
        if !on {
            file.open = None;
        }
        self.enabled.store(on, Ordering::Relaxed);
        Ok(())
    }

    fn set_path(&self, path: PathBuf, name: &str) -> SqlResult<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut file.path, path);
        if self.enabled.load(Ordering::Relaxed) {
            if let Err(e) = file.reopen() {
                let error = refused(name, &file.path.display().to_string(), &file.path, &e);
                file.path = old;
                return Err(error);
            }
        }
        Ok(())
    }

    /// `FLUSH LOGS`: the file is closed and opened again by its name (so
    /// a log rotated by renaming it starts anew), when the log is on.
    pub fn reopen(&self) -> SqlResult<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if file.open.is_none() {
            return Ok(());
        }
        file.open = None;
        file.reopen().map_err(|e| {
            SqlError::new(
                codes::UNKNOWN,
                format!(
                    "FLUSH LOGS: cannot open the slow query log {}: {e}",
                    file.path.display()
                ),
            )
        })
    }

    /// Appends one entry (one write under the lock).
    fn append(&self, entry: &[u8]) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let Some(open) = file.open.as_mut() else {
            return;
        };
        if let Err(error) = open.write_all(entry) {
            tracing::warn!(path = %file.path.display(), "slow query log: {error}");
        }
    }
}

impl SlowFile {
    /// Opens the file for appending and writes the header, as mysqld does
    /// each time it opens the log.
    fn reopen(&mut self) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "/skarv".to_owned());
        let header = format!(
            "{exe}, Version: {} (Skarv). started with:\n\
             Tcp port: {}  Unix socket: (none)\n\
             Time                 Id Command    Argument\n",
            super::session::VERSION,
            self.port
        );
        f.write_all(header.as_bytes())?;
        self.open = Some(f);
        Ok(())
    }
}

fn refused(name: &str, value: &str, path: &std::path::Path, error: &io::Error) -> SqlError {
    SqlError::new(
        codes::WRONG_VALUE_FOR_VAR,
        format!(
            "Variable '{name}' can't be set to the value of '{value}' \
             (cannot open {}: {error})",
            path.display()
        ),
    )
}

/// The figures of one slow-log entry.
struct Entry {
    elapsed: Duration,
    rows_sent: u64,
    rows_examined: u64,
    rows_affected: u64,
}

/// Formats and appends a statement's entry.
fn write_entry(conn: &mut Conn<'_>, statement: &Stmt, text: &str, entry: &Entry) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let start = secs.saturating_sub(entry.elapsed.as_secs());
    let (user, host) = (conn.session.user.clone(), conn.info.host);
    let db = conn.session.database.clone();
    let mut out = String::with_capacity(256 + text.len());
    use std::fmt::Write as _;
    let _ = writeln!(out, "# Time: {}", time_line(secs));
    let host_name = if host.is_loopback() { "localhost" } else { "" };
    let _ = writeln!(out, "# User@Host: {user}[{user}] @ {host_name} [{host}]");
    let _ = writeln!(
        out,
        "# Thread_id: {}  Schema: {}  QC_hit: No",
        conn.info.id,
        db.as_deref().unwrap_or("")
    );
    let _ = writeln!(
        out,
        "# Query_time: {:.6}  Lock_time: 0.000000  Rows_sent: {}  Rows_examined: {}",
        entry.elapsed.as_secs_f64(),
        entry.rows_sent,
        entry.rows_examined
    );
    let _ = writeln!(out, "# Rows_affected: {}", entry.rows_affected);
    if db != conn.status.logged_db {
        if let Some(db) = &db {
            if db.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                let _ = writeln!(out, "use {db};");
            } else {
                let _ = writeln!(out, "use `{}`;", db.replace('`', "``"));
            }
        }
        conn.status.logged_db = db;
    }
    let _ = writeln!(out, "SET timestamp={start};");
    let owned;
    let text = if text.is_empty() {
        owned = statement_text(statement);
        owned.as_str()
    } else {
        text
    };
    let mut end = text.len().min(SLOW_LOG_STATEMENT_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = text[..end].trim_end();
    out.push_str(text);
    if !text.ends_with(';') {
        out.push(';');
    }
    out.push('\n');
    conn.engine.status.slow_log.append(out.as_bytes());
}

/// A statement's text when the client's is not at hand (a statement of a
/// multi-statement query): as the parser prints it.
fn statement_text(statement: &Stmt) -> String {
    match statement {
        Stmt::Sql(s) => s.to_string(),
        Stmt::Extra(Extra::Text { sql, .. }) => sql.clone(),
        Stmt::Extra(Extra::ShowWarnings {
            errors,
            count,
            limit,
        }) => format!(
            "SHOW {}{}{}",
            if *count { "COUNT(*) " } else { "" },
            if *errors { "ERRORS" } else { "WARNINGS" },
            limit.map_or(String::new(), |(o, n)| format!(" LIMIT {o}, {n}"))
        ),
        Stmt::Extra(Extra::Catalog(c)) => format!("{c:?}"),
        Stmt::Extra(Extra::Prepare { name, source }) => match source {
            super::session::PrepareSource::Text(text) => {
                format!("PREPARE {name} FROM '{}'", text.replace('\'', "''"))
            }
            super::session::PrepareSource::Var(var) => format!("PREPARE {name} FROM @{var}"),
        },
        Stmt::Extra(Extra::LoadData(load)) => format!(
            "LOAD DATA {}INFILE '{}' INTO TABLE {}",
            if load.local { "LOCAL " } else { "" },
            load.file.replace('\'', "''"),
            load.table
        ),
        Stmt::Extra(Extra::CheckedView(statement, check)) => {
            format!("{statement} WITH {} CHECK OPTION", check.word())
        }
        // Parsed as its SELECT: `DO` again in front of the expressions.
        Stmt::Extra(Extra::Do(select)) => select.to_string().replacen("SELECT", "DO", 1),
        Stmt::Extra(Extra::SetStatement { set, inner }) => {
            let set = statement_text(set);
            format!(
                "SET STATEMENT {} FOR {}",
                set.strip_prefix("SET ").unwrap_or(&set),
                statement_text(inner)
            )
        }
        Stmt::Extra(Extra::Begin { read_only }) => format!(
            "START TRANSACTION {}WITH CONSISTENT SNAPSHOT",
            match read_only {
                Some(true) => "READ ONLY, ",
                Some(false) => "READ WRITE, ",
                None => "",
            }
        ),
        Stmt::Extra(Extra::SelectOutfile(select)) => format!(
            "{} INTO {} '{}'",
            select.query,
            if select.into.dump {
                "DUMPFILE"
            } else {
                "OUTFILE"
            },
            select.into.file.replace('\'', "''")
        ),
    }
}

/// `YYMMDD HH:MM:SS` in UTC (the SQL node's time zone), the hour padded
/// with a space as MariaDB writes it.
fn time_line(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{:02}{:02}{:02} {:>2}:{:02}:{:02}",
        y.rem_euclid(100),
        m,
        d,
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The default `slow_query_log_file`: `<cwd>/<host>-slow.log`, as mysqld
/// names it in its data directory.
pub fn default_slow_log_path() -> PathBuf {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    dir.join(format!("{host}-slow.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn com_names_are_sorted_and_found() {
        assert!(COM_NAMES.windows(2).all(|w| w[0] < w[1]));
        for (at, name) in COM_NAMES.iter().enumerate() {
            assert_eq!(com_index(name), at);
        }
    }

    #[test]
    fn the_time_line_is_mariadbs() {
        // 2026-11-29 00:11:55 UTC.
        assert_eq!(time_line(1_795_911_115), "261129  0:11:55");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn long_query_time_reads_as_mysql_shows_it() {
        assert_eq!(
            seconds_value("long_query_time", "0.5").unwrap(),
            ("0.500000".into(), false)
        );
        // Out of range: the nearest bound, as MariaDB's (with 1292).
        assert_eq!(
            seconds_value("long_query_time", "-1").unwrap(),
            ("0.000000".into(), true)
        );
        assert_eq!(
            seconds_value("long_query_time", "1e10").unwrap(),
            ("31536000.000000".into(), true)
        );
        assert!(seconds_value("long_query_time", "x").is_err());
    }
}
