//! A connection's session: system and user variables, `SET`, `USE`,
//! warnings, `SHOW VARIABLES/STATUS/WARNINGS/ERRORS/PROCESSLIST`, `KILL`,
//! and the front end that turns statement text into [`Stmt`]s.
//!
//! The front end tokenizes with `sqlparser` and mends, token by token, the
//! MySQL spellings its parser does not take (double-quoted strings,
//! `LOCK IN SHARE MODE`), then parses from the tokens; statements it does
//! not parse at all (`SHOW CREATE DATABASE`, account statements) are
//! recognised from their leading words ([`Extra`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlparser::ast::{
    ContextModifier, Expr, Set, ShowStatementFilter, Statement, Value as AstValue,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::expr::eval::{Deadline, TimeLimit};
use super::expr::Val;
use super::{send_rows, Answered, Conn, Stmt};
use crate::backend::{status, OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, ColumnMeta, ColumnType, SqlValue};

/// Most warnings `max_error_count` may keep per statement (its largest
/// value, as MariaDB's); more are counted but not listed.
pub const WARNINGS_KEPT_MAX: usize = 65_535;
/// Statements in one multi-statement `COM_QUERY`.
pub const STATEMENTS_PER_QUERY_MAX: usize = 10_000;

/// The kind of a system variable's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// ON/OFF, shown as 1/0 by `SELECT @@x`.
    Bool,
    /// An unsigned integer within bounds.
    Int { min: u64, max: u64 },
    /// Free text.
    Text,
    /// Seconds with a fraction (`long_query_time`), shown with six decimals.
    Seconds,
}

/// Where a system variable may be set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// Session and global.
    Both,
    /// Global only (`SET GLOBAL`).
    Global,
    /// Nobody sets it.
    ReadOnly,
}

/// One system variable the SQL node knows.
struct SysVar {
    name: &'static str,
    kind: Kind,
    scope: Scope,
    default: &'static str,
}

const fn var(name: &'static str, kind: Kind, scope: Scope, default: &'static str) -> SysVar {
    SysVar {
        name,
        kind,
        scope,
        default,
    }
}

const BOOL: Kind = Kind::Bool;
const TEXT: Kind = Kind::Text;
const fn int(min: u64, max: u64) -> Kind {
    Kind::Int { min, max }
}

/// The server version clients see (`@@version`, the handshake's).
pub const VERSION: &str = crate::protocol::SERVER_VERSION;

/// Every system variable the SQL node knows, sorted by name (`SHOW
/// VARIABLES` lists them in this order). Setting an unknown one is 1193.
const SYSTEM_VARIABLES: &[SysVar] = &[
    var("auto_increment_increment", int(1, 65_535), Scope::Both, "1"),
    var("auto_increment_offset", int(1, 65_535), Scope::Both, "1"),
    var("autocommit", BOOL, Scope::Both, "ON"),
    // Where the binary lies (publish_settings), as a tool reads it.
    var("basedir", TEXT, Scope::ReadOnly, ""),
    // No binary log yet (log_bin is OFF); ROW is NDB's.
    var("binlog_format", TEXT, Scope::ReadOnly, "ROW"),
    var("character_set_client", TEXT, Scope::Both, "utf8mb4"),
    var("character_set_connection", TEXT, Scope::Both, "utf8mb4"),
    var("character_set_database", TEXT, Scope::Both, "utf8mb4"),
    var("character_set_results", TEXT, Scope::Both, "utf8mb4"),
    var("character_set_server", TEXT, Scope::Both, "utf8mb4"),
    var("character_set_system", TEXT, Scope::ReadOnly, "utf8mb3"),
    var(
        "collation_connection",
        TEXT,
        Scope::Both,
        "utf8mb4_general_ci",
    ),
    var(
        "collation_database",
        TEXT,
        Scope::Both,
        "utf8mb4_general_ci",
    ),
    var("collation_server", TEXT, Scope::Both, "utf8mb4_general_ci"),
    // MySQL's limit of a recursive CTE's iterations (error 3636 past it).
    var(
        "cte_max_recursion_depth",
        int(0, u32::MAX as u64),
        Scope::Both,
        "1000",
    ),
    // The SQL node keeps no data: the directory it writes its files in
    // (the slow query log), set at start.
    var("datadir", TEXT, Scope::ReadOnly, ""),
    var("default_storage_engine", TEXT, Scope::Both, "ndbcluster"),
    var("div_precision_increment", int(0, 30), Scope::Both, "4"),
    var("event_scheduler", TEXT, Scope::ReadOnly, "OFF"),
    var("explicit_defaults_for_timestamp", BOOL, Scope::Both, "ON"),
    var("foreign_key_checks", BOOL, Scope::Both, "ON"),
    var("general_log", BOOL, Scope::ReadOnly, "OFF"),
    var(
        "group_concat_max_len",
        int(4, u32::MAX as u64),
        Scope::Both,
        // MariaDB 10.11's default (MySQL 8's is 1024).
        "1048576",
    ),
    var("gtid_mode", TEXT, Scope::ReadOnly, "OFF"),
    var("have_query_cache", TEXT, Scope::ReadOnly, "NO"),
    var("have_ssl", TEXT, Scope::ReadOnly, "DISABLED"),
    // Read by Connector/J at connect; the SQL node runs no init_connect.
    var("init_connect", TEXT, Scope::ReadOnly, ""),
    var(
        "innodb_lock_wait_timeout",
        int(1, 1_073_741_824),
        Scope::Both,
        "50",
    ),
    var(
        "interactive_timeout",
        int(1, 31_536_000),
        Scope::Both,
        "28800",
    ),
    var("license", TEXT, Scope::ReadOnly, "Apache-2.0"),
    var("local_infile", BOOL, Scope::Global, "ON"),
    var(
        "lock_wait_timeout",
        int(1, 31_536_000),
        Scope::Both,
        "31536000",
    ),
    var("log_bin", BOOL, Scope::ReadOnly, "OFF"),
    var("log_queries_not_using_indexes", BOOL, Scope::Global, "OFF"),
    var("long_query_time", Kind::Seconds, Scope::Both, "10.000000"),
    var("lower_case_file_system", BOOL, Scope::ReadOnly, "OFF"),
    var("lower_case_table_names", int(0, 2), Scope::ReadOnly, "0"),
    var(
        "max_allowed_packet",
        int(1024, 1_073_741_824),
        Scope::Global,
        "67108864",
    ),
    var("max_connections", int(1, 100_000), Scope::Global, "8192"),
    var("max_error_count", int(0, 65_535), Scope::Both, "64"),
    var(
        "max_execution_time",
        int(0, u32::MAX as u64),
        Scope::Both,
        "0",
    ),
    var(
        "max_prepared_stmt_count",
        int(0, 4_194_304),
        Scope::Global,
        "16382",
    ),
    var("max_statement_time", Kind::Seconds, Scope::Both, "0.000000"),
    var("max_user_connections", int(0, 0), Scope::ReadOnly, "0"),
    var("min_examined_row_limit", int(0, u64::MAX), Scope::Both, "0"),
    var(
        "ndb_autoincrement_prefetch_sz",
        int(1, 65_536),
        Scope::Both,
        "512",
    ),
    var(
        "ndb_batch_size",
        int(0, 2_147_483_648),
        Scope::Both,
        "32768",
    ),
    var(
        "ndb_cluster_connection_pool",
        int(1, 63),
        Scope::ReadOnly,
        "1",
    ),
    var(
        "ndb_cluster_connection_pool_nodeids",
        TEXT,
        Scope::ReadOnly,
        "",
    ),
    var("ndb_join_pushdown", BOOL, Scope::Both, "ON"),
    var("ndb_use_exact_count", BOOL, Scope::Both, "OFF"),
    var(
        "net_buffer_length",
        int(1024, 1_048_576),
        Scope::Both,
        "16384",
    ),
    var("net_read_timeout", int(1, 31_536_000), Scope::Both, "30"),
    var("net_write_timeout", int(1, 31_536_000), Scope::Both, "60"),
    var("performance_schema", BOOL, Scope::ReadOnly, "OFF"),
    var("port", int(0, 65_535), Scope::ReadOnly, "3306"),
    var("protocol_version", int(0, 255), Scope::ReadOnly, "10"),
    var("query_cache_size", int(0, 0), Scope::ReadOnly, "0"),
    var("query_cache_type", TEXT, Scope::ReadOnly, "OFF"),
    var("read_only", BOOL, Scope::ReadOnly, "OFF"),
    var("secure_file_priv", TEXT, Scope::ReadOnly, ""),
    var("server_id", int(0, u32::MAX as u64), Scope::Global, "1"),
    // Session state tracking (`CLIENT_SESSION_TRACK`): what OK packets
    // report, MariaDB's defaults; the state change and the transaction's
    // characteristics are not tracked (OFF only).
    var("session_track_schema", BOOL, Scope::Both, "ON"),
    var("session_track_state_change", BOOL, Scope::Both, "OFF"),
    var(
        "session_track_system_variables",
        TEXT,
        Scope::Both,
        "autocommit,character_set_client,character_set_connection,character_set_results,time_zone",
    ),
    var("session_track_transaction_info", TEXT, Scope::Both, "OFF"),
    // Accounts' hosts match addresses; the SQL node looks up no names.
    var("skip_name_resolve", BOOL, Scope::ReadOnly, "ON"),
    var("skip_networking", BOOL, Scope::ReadOnly, "OFF"),
    var("slow_query_log", BOOL, Scope::Global, "OFF"),
    // The default is the SQL node's (`Engine::set_slow_log_file`).
    var("slow_query_log_file", TEXT, Scope::Global, ""),
    // The SQL node listens on TCP only.
    var("socket", TEXT, Scope::ReadOnly, ""),
    // An ORDER BY sorts this many bytes of rows in memory, runs on disk
    // past it (exec::select::filesort; at least its 32 KiB). MariaDB
    // 10.11's default and bounds.
    var(
        "sort_buffer_size",
        int(1024, u64::MAX),
        Scope::Both,
        "2097152",
    ),
    var("sql_auto_is_null", BOOL, Scope::Both, "OFF"),
    // Set by dumps of servers with a binary log (`SET @@SESSION.SQL_LOG_BIN
    // = 0`); Skarv has none to write.
    var("sql_log_bin", BOOL, Scope::Both, "ON"),
    var(
        "sql_mode",
        TEXT,
        Scope::Both,
        "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION",
    ),
    var("sql_notes", BOOL, Scope::Both, "ON"),
    var("sql_quote_show_create", BOOL, Scope::Both, "ON"),
    var("sql_safe_updates", BOOL, Scope::Both, "OFF"),
    var(
        "sql_select_limit",
        int(0, u64::MAX),
        Scope::Both,
        "18446744073709551615",
    ),
    var("sql_warnings", BOOL, Scope::Both, "OFF"),
    var("super_read_only", BOOL, Scope::ReadOnly, "OFF"),
    var("system_time_zone", TEXT, Scope::ReadOnly, "UTC"),
    var("thread_handling", TEXT, Scope::ReadOnly, "pool-of-threads"),
    var(
        "thread_pool_max_threads",
        int(1, 65_536),
        Scope::ReadOnly,
        "65536",
    ),
    var("thread_pool_size", int(1, 256), Scope::ReadOnly, "1"),
    var(
        "thread_pool_stall_limit",
        int(1, u32::MAX as u64),
        Scope::ReadOnly,
        "500",
    ),
    var("time_zone", TEXT, Scope::Both, "SYSTEM"),
    // Where sort runs go: the SQL node's temporary directory ($TMPDIR,
    // else /tmp; server.rs publishes it).
    var("tmpdir", TEXT, Scope::ReadOnly, "/tmp"),
    var("transaction_allow_batching", BOOL, Scope::Both, "OFF"),
    var("transaction_isolation", TEXT, Scope::Both, "READ-COMMITTED"),
    var("transaction_read_only", BOOL, Scope::Both, "OFF"),
    var("tx_isolation", TEXT, Scope::Both, "READ-COMMITTED"),
    var("tx_read_only", BOOL, Scope::Both, "OFF"),
    var("unique_checks", BOOL, Scope::Both, "ON"),
    var("version", TEXT, Scope::ReadOnly, VERSION),
    var(
        "version_comment",
        TEXT,
        Scope::ReadOnly,
        "Skarv SQL node (MySQL Cluster compatible)",
    ),
    var(
        "version_compile_machine",
        TEXT,
        Scope::ReadOnly,
        std::env::consts::ARCH,
    ),
    var(
        "version_compile_os",
        TEXT,
        Scope::ReadOnly,
        std::env::consts::OS,
    ),
    var("wait_timeout", int(1, 31_536_000), Scope::Both, "28800"),
];

fn sys_var(name: &str) -> Option<&'static SysVar> {
    SYSTEM_VARIABLES
        .binary_search_by(|v| v.name.cmp(name))
        .ok()
        .map(|at| &SYSTEM_VARIABLES[at])
}

/// System variables by lowercase name, their values as text (ON/OFF for
/// booleans, as `SHOW VARIABLES` shows them).
///
/// A session starts from the globals of the moment it connects and keeps
/// only what it sets itself: the globals' map is shared (`base`, copied
/// only when `SET GLOBAL` changes it while sessions hold it), so a
/// connection costs no copy of 120 names and values, and 8,192 idle
/// connections no 8,192 maps. The values statements read each time they
/// run are kept decoded in [`Hot`], so the hot path does no lookup by name
/// in a map that, with thousands of connections, is cold in the cache.
#[derive(Clone, Debug, Default)]
pub struct Variables {
    /// The values this scope started from (for the globals: all of them).
    base: Arc<BTreeMap<String, String>>,
    /// Values set since, over `base`.
    own: BTreeMap<String, String>,
    hot: Hot,
    /// Values set in this scope so far: a plan kept by a prepared
    /// statement is good while this is what it was made under.
    changes: u64,
}

/// The variables every statement reads, decoded; [`Variables::set`] keeps
/// them equal to the text values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hot {
    /// `character_set_client` is latin1.
    pub latin1_client: bool,
    /// `character_set_results` is latin1.
    pub latin1_results: bool,
    /// `ndb_join_pushdown`.
    pub join_pushdown: bool,
    /// `transaction_allow_batching`.
    pub transaction_allow_batching: bool,
    /// `sql_notes`.
    pub sql_notes: bool,
    /// `sql_mode` has STRICT_TRANS_TABLES or STRICT_ALL_TABLES.
    pub strict: bool,
    /// `sql_mode` has NO_ZERO_DATE.
    pub no_zero_date: bool,
    /// `sql_mode` has NO_ZERO_IN_DATE.
    pub no_zero_in_date: bool,
    /// `max_execution_time`, in ms (0: none).
    pub max_execution_time_ms: u64,
    /// `max_statement_time`, in µs (0: none).
    pub max_statement_time_us: u64,
    /// `time_zone` in seconds east of UTC (`SYSTEM`: the SQL node's, UTC).
    pub time_zone_secs: i64,
    /// `max_error_count`: the warnings a statement keeps for SHOW WARNINGS
    /// (MariaDB's default 64; more are counted, not listed).
    pub max_error_count: usize,
    /// `foreign_key_checks`.
    pub foreign_key_checks: bool,
    /// `sql_safe_updates`.
    pub safe_updates: bool,
    /// `sql_select_limit`: the rows a top-level SELECT sends at most
    /// (None: its default, no limit).
    pub select_limit: Option<u64>,
    /// `auto_increment_increment` and `auto_increment_offset`.
    pub auto_increment: (u64, u64),
    /// `transaction_read_only` (= `tx_read_only`).
    pub read_only: bool,
}

/// The variables [`Hot`] decodes: setting any other leaves it as it is.
const HOT_VARIABLES: [&str; 16] = [
    "foreign_key_checks",
    "transaction_read_only",
    "sql_safe_updates",
    "sql_select_limit",
    "auto_increment_increment",
    "auto_increment_offset",
    "max_error_count",
    "character_set_client",
    "character_set_results",
    "ndb_join_pushdown",
    "transaction_allow_batching",
    "sql_notes",
    "sql_mode",
    "max_execution_time",
    "max_statement_time",
    "time_zone",
];

impl Variables {
    /// The server's defaults.
    pub fn defaults() -> Variables {
        let mut vars = Variables {
            base: Arc::new(
                SYSTEM_VARIABLES
                    .iter()
                    .map(|v| (v.name.to_owned(), v.default.to_owned()))
                    .collect(),
            ),
            own: BTreeMap::new(),
            hot: Hot::default(),
            changes: 0,
        };
        vars.hot = vars.decode_hot();
        vars
    }

    /// A variable's value as text.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.own
            .get(name)
            .or_else(|| self.base.get(name))
            .map(String::as_str)
    }

    /// A boolean variable.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("ON"))
    }

    /// How many values were set in this scope (see [`Variables::changes`]'s
    /// field).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The decoded values statements read.
    pub fn hot(&self) -> &Hot {
        &self.hot
    }

    /// Sets `name` (lowercase, already checked) to `value`.
    pub fn set(&mut self, name: &str, value: String) {
        self.changes += 1;
        match self.own.get_mut(name) {
            Some(v) => *v = value,
            None => {
                self.own.insert(name.to_owned(), value);
            }
        }
        if HOT_VARIABLES.contains(&name) {
            self.hot = self.decode_hot();
        }
    }

    /// A copy for a new session: the values as they are now, sharing this
    /// scope's map. What was set here is folded into the shared map first
    /// (copying it only if sessions still hold the old one), so later
    /// sessions share it too.
    pub fn share(&mut self) -> Variables {
        if !self.own.is_empty() {
            let base = Arc::make_mut(&mut self.base);
            base.append(&mut self.own);
        }
        self.clone()
    }

    fn decode_hot(&self) -> Hot {
        let latin1 = |name| {
            self.get(name)
                .is_some_and(|v| v.eq_ignore_ascii_case("latin1"))
        };
        Hot {
            latin1_client: latin1("character_set_client"),
            latin1_results: latin1("character_set_results"),
            join_pushdown: self.flag("ndb_join_pushdown"),
            transaction_allow_batching: self.flag("transaction_allow_batching"),
            sql_notes: self.flag("sql_notes"),
            foreign_key_checks: self.flag("foreign_key_checks"),
            safe_updates: self.flag("sql_safe_updates"),
            read_only: self.flag("transaction_read_only"),
            select_limit: self
                .get("sql_select_limit")
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n != u64::MAX),
            auto_increment: (
                self.get("auto_increment_increment")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1),
                self.get("auto_increment_offset")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1),
            ),
            strict: self.get("sql_mode").is_some_and(|m| {
                m.split(',')
                    .any(|f| f == "STRICT_TRANS_TABLES" || f == "STRICT_ALL_TABLES")
            }),
            no_zero_date: self
                .get("sql_mode")
                .is_some_and(|m| m.split(',').any(|f| f == "NO_ZERO_DATE")),
            no_zero_in_date: self
                .get("sql_mode")
                .is_some_and(|m| m.split(',').any(|f| f == "NO_ZERO_IN_DATE")),
            max_error_count: self
                .get("max_error_count")
                .and_then(|v| v.parse::<usize>().ok())
                .map_or(64, |n| n.min(WARNINGS_KEPT_MAX)),
            max_execution_time_ms: self
                .get("max_execution_time")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            max_statement_time_us: self
                .get("max_statement_time")
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(0, |secs| (secs * 1e6).round() as u64),
            time_zone_secs: self.get("time_zone").and_then(offset_secs).unwrap_or(0),
        }
    }
}

/// Statements `sqlparser` does not parse, recognised before it.
#[derive(Clone, Debug)]
pub enum Extra {
    /// `SHOW WARNINGS` / `SHOW ERRORS` [`LIMIT [o,] n`]; `count`: `SHOW COUNT(*) …`.
    ShowWarnings {
        /// Errors only.
        errors: bool,
        /// `SHOW COUNT(*) WARNINGS`.
        count: bool,
        /// `LIMIT`'s offset and row count.
        limit: Option<(u64, u64)>,
    },
    /// A schema statement the catalog recognised (`ddl::recognise`).
    Catalog(Box<super::ddl::CatalogStmt>),
    /// An account statement, with its text:
    /// `SHOW CREATE DATABASE`, `SHOW ENGINES`, `SHOW TABLE STATUS`,
    /// `SHOW INDEX`, `SHOW GRANTS`, `CREATE/DROP/ALTER USER`, `CREATE TABLE
    /// … PARTITION BY KEY`.
    Text {
        /// Its leading words, uppercase, single-spaced ("SHOW ENGINES").
        head: String,
        /// The whole statement.
        sql: String,
    },
    /// MariaDB's `SET STATEMENT var = value [, …] FOR statement`: the
    /// variables set for that one statement, then set back.
    SetStatement {
        /// The `SET var = value, …` it makes.
        set: Box<Stmt>,
        /// The statement run with them.
        inner: Box<Stmt>,
    },
    /// `LOAD DATA [LOCAL] INFILE`, which the parser does not take.
    LoadData(Box<super::exec::load::LoadData>),
    /// `START TRANSACTION [READ ONLY | READ WRITE ,] WITH CONSISTENT
    /// SNAPSHOT` (mysqldump's `--single-transaction`, in a version
    /// comment), which the parser does not take.
    Begin {
        /// `READ ONLY` (true), `READ WRITE` (false), neither (None).
        read_only: Option<bool>,
    },
    /// `SELECT … INTO OUTFILE | DUMPFILE` (the parser reads neither).
    SelectOutfile(Box<super::exec::outfile::SelectOutfile>),
    /// `DO expr [, expr …]`: the expressions evaluated and their values
    /// dropped, as the SELECT of them (which the statement is parsed as)
    /// would give them.
    Do(Box<sqlparser::ast::Statement>),
    /// `CREATE | ALTER … VIEW … WITH [CASCADED | LOCAL] CHECK OPTION`: the
    /// statement without its option, which the parser does not read.
    CheckedView(Box<sqlparser::ast::Statement>, super::views::CheckOption),
    /// MySQL's `PREPARE name FROM 'text'` or `FROM @variable`.
    Prepare {
        /// The statement's name, lowercase (names ignore case).
        name: String,
        /// Where its text is.
        source: PrepareSource,
    },
}

/// Where `PREPARE` finds the statement's text.
#[derive(Clone, Debug)]
pub enum PrepareSource {
    /// A string literal.
    Text(String),
    /// A user variable (its name, lowercase, without `@`).
    Var(String),
}

/// A statement's tokens but its spaces and `;`.
fn statement_words(tokens: &[TokenWithSpan]) -> Vec<&Token> {
    tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon))
        .collect()
}

/// `PREPARE name FROM 'text' | @variable` from its tokens.
fn prepare_statement(tokens: &[TokenWithSpan], sql: &str) -> SqlResult<Stmt> {
    let significant = statement_words(tokens);
    let (name, source) = match significant.as_slice() {
        [_, Token::Word(name), Token::Word(from), source] if from.keyword == Keyword::FROM => {
            (name.value.to_ascii_lowercase(), *source)
        }
        _ => {
            return Err(syntax_error(
                sql,
                "Expected: PREPARE name FROM 'statement' or FROM @variable",
            ))
        }
    };
    let source = match source {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => {
            PrepareSource::Text(s.clone())
        }
        Token::Word(w)
            if w.quote_style.is_none() && w.value.len() > 1 && w.value.starts_with('@') =>
        {
            PrepareSource::Var(w.value[1..].to_ascii_lowercase())
        }
        _ => {
            return Err(syntax_error(
                sql,
                "Expected: a string or @variable after PREPARE name FROM",
            ))
        }
    };
    Ok(Stmt::Extra(Extra::Prepare { name, source }))
}

/// `DROP PREPARE name`, MySQL's other spelling of the `DEALLOCATE PREPARE
/// name` the parser takes: as that statement.
fn drop_prepare_statement(tokens: &[TokenWithSpan], sql: &str) -> SqlResult<Stmt> {
    let significant = statement_words(tokens);
    let [_, _, Token::Word(name)] = significant.as_slice() else {
        return Err(syntax_error(sql, "Expected: DROP PREPARE name"));
    };
    Ok(Stmt::Sql(Box::new(Statement::Deallocate {
        name: sqlparser::ast::Ident::new(name.value.clone()),
        prepare: true,
    })))
}

/// A warning or error note of the last statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// "Note", "Warning" or "Error".
    pub level: &'static str,
    /// MySQL's code.
    pub code: u16,
    /// The message.
    pub message: String,
    /// A warning of the statement's planning (a constant condition's),
    /// which strict mode does not make an INSERT … SELECT's error.
    pub planned: bool,
}

/// A connection's session state.
pub struct SessionState {
    /// System variables, session scope.
    pub vars: Variables,
    /// User variables (`@x`), by lowercase name.
    pub user_vars: HashMap<String, SqlValue>,
    /// The user variables the running statement assigns (`@n := @n + 1`),
    /// shared with its [`Env`]s: `user_vars` takes them when it ends
    /// ([`SessionState::take_assigned_vars`]).
    ///
    /// [`Env`]: crate::engine::expr::eval::Env
    pub assigned_vars: std::sync::Arc<crate::engine::expr::eval::UserVarWrites>,
    /// The running statement's text has `:=`: its `@x` reads are made at
    /// each evaluation ([`crate::engine::expr::Scope::assigning`]), not
    /// once as constants, so they see its assignments.
    pub assigning: bool,
    /// The running statement has IGNORE (`INSERT IGNORE`, `UPDATE IGNORE`,
    /// `DELETE IGNORE`): a scalar subquery of more than one row is NULL
    /// with warning 1242, not the statement's error, as MariaDB's IGNORE
    /// makes it ([`ignores_errors`]).
    pub ignoring: bool,
    /// Current database.
    pub database: Option<String>,
    /// The logged-in user and the host it matched ("" before login).
    pub user: String,
    /// The host part of the account.
    pub host: String,
    /// `user@host` (`USER()`), made when they are set ([`SessionState::set_user`]).
    user_host: std::sync::Arc<str>,
    /// Autocommit (`SET autocommit`; `txn::set_autocommit` owns changes).
    pub autocommit: bool,
    /// `LAST_INSERT_ID()`, shared with the statements' [`Env`]s, where
    /// `LAST_INSERT_ID(expr)` sets it.
    ///
    /// [`Env`]: crate::engine::expr::eval::Env
    pub last_insert_id: std::sync::Arc<LastInsertId>,
    /// Rows the last SELECT sent (`FOUND_ROWS()`).
    pub found_rows: u64,
    /// LOCK TABLES ran and UNLOCK TABLES has not (`txn::lock_tables`).
    pub tables_locked: bool,
    /// Rows a `SELECT SQL_CALC_FOUND_ROWS` of the statement running found
    /// before its LIMIT: `found_rows` when the statement ends.
    pub calc_found_rows: Option<u64>,
    /// What the last statement changed (`ROW_COUNT()`): affected rows of
    /// a write, -1 after a result set or an error.
    pub row_count: i64,
    /// The listed notes (`SHOW WARNINGS`): the running statement's, or,
    /// while `stale`, the last statement's that gave any.
    notes: Vec<Note>,
    /// The running statement's warnings (its OK and EOF packets' count).
    warnings: u16,
    /// Some(count) while `notes` are an earlier statement's (that many
    /// warnings): a statement that uses no table keeps them listed until
    /// it gives one of its own, as MariaDB clears the list only for a
    /// statement with tables ([`SessionState::start_statement_of`]).
    stale: Option<u16>,
    /// Changes of the session the running statement made that
    /// `session_track_*` asks to report (its OK packet takes them).
    state_changes: Vec<crate::backend::StateChange>,
}

/// The most state changes one statement reports (a SET of many tracked
/// variables reports each once, so the list is also bounded by them).
const STATE_CHANGES_MAX: usize = 64;

impl SessionState {
    /// A variable was set to `value` (as `@@name` shows it): reported when
    /// `session_track_system_variables` names it (or is `*`).
    pub fn track_variable(&mut self, name: &str, value: &str) {
        use crate::backend::StateChange;
        let tracked = self
            .vars
            .get("session_track_system_variables")
            .is_some_and(|list| list.split(',').any(|v| v.trim() == "*" || v.trim() == name));
        if !tracked {
            return;
        }
        self.state_changes
            .retain(|c| !matches!(c, StateChange::Variable(n, _) if n == name));
        if self.state_changes.len() < STATE_CHANGES_MAX {
            self.state_changes
                .push(StateChange::Variable(name.to_owned(), value.to_owned()));
        }
    }

    /// The current database changed (`session_track_schema`).
    pub fn track_schema(&mut self, database: &str) {
        use crate::backend::StateChange;
        if !self.vars.flag("session_track_schema") {
            return;
        }
        self.state_changes
            .retain(|c| !matches!(c, StateChange::Schema(_)));
        if self.state_changes.len() < STATE_CHANGES_MAX {
            self.state_changes
                .push(StateChange::Schema(database.to_owned()));
        }
    }

    /// The changes to report, taken (each statement's OK reports its own).
    pub fn take_state_changes(&mut self) -> Vec<crate::backend::StateChange> {
        std::mem::take(&mut self.state_changes)
    }
    /// A fresh session with the global variables' values.
    /// The session becomes `user`'s, of account host `host`.
    pub fn set_user(&mut self, user: String, host: String) {
        self.user_host = if user.is_empty() {
            std::sync::Arc::from("")
        } else {
            std::sync::Arc::from(format!("{user}@{host}"))
        };
        self.user = user;
        self.host = host;
    }

    /// Moves the user variables the statement assigned into `user_vars`
    /// (a DECIMAL with every digit it has, a temporal value as text: a
    /// MariaDB user variable's kinds).
    pub fn take_assigned_vars(&mut self) {
        self.assigning = false;
        if self.assigned_vars.is_empty() {
            return;
        }
        for (name, value) in self.assigned_vars.take() {
            let value = match value {
                Val::Null => SqlValue::Null,
                Val::Int(i) => SqlValue::Int(i),
                Val::UInt(u) => SqlValue::UInt(u),
                Val::Double(d) => SqlValue::Double(d),
                Val::Str(b) => SqlValue::Bytes(b),
                v @ Val::Dec(_) => SqlValue::Decimal(v.to_text()),
                v @ (Val::Date(_) | Val::DateTime(..) | Val::Time(_)) => {
                    SqlValue::Bytes(v.to_text().into_bytes())
                }
            };
            self.user_vars.insert(name.to_string(), value);
        }
    }

    /// `user@host` ("" before login), as `USER()` gives it.
    pub fn user_host(&self) -> std::sync::Arc<str> {
        std::sync::Arc::clone(&self.user_host)
    }

    pub fn new(globals: Variables) -> SessionState {
        let autocommit = globals.flag("autocommit");
        SessionState {
            vars: globals,
            user_vars: HashMap::new(),
            assigned_vars: Default::default(),
            assigning: false,
            ignoring: false,
            database: None,
            user: String::new(),
            host: String::new(),
            user_host: std::sync::Arc::from(""),
            autocommit,
            last_insert_id: Default::default(),
            found_rows: 0,
            tables_locked: false,
            calc_found_rows: None,
            row_count: -1,
            notes: Vec::new(),
            warnings: 0,
            stale: None,
            state_changes: Vec::new(),
        }
    }

    /// A statement starts: the last one's warnings are cleared.
    pub fn start_statement(&mut self) {
        self.warnings = 0;
        self.notes.clear();
        self.stale = None;
    }

    /// `statement` starts: the last one's warnings are cleared, unless it
    /// uses no table ([`uses_no_table`]: `SELECT 1`, `SET`, `COMMIT`), which
    /// leaves them listed (and `@@warning_count`) until it gives one of
    /// its own, as MariaDB's does (`SELECT 1/0; SELECT 1; SHOW WARNINGS`
    /// lists the division's warning).
    pub fn start_statement_of(&mut self, statement: &Stmt) {
        // Nothing listed (the common case): nothing to decide, nor walked.
        let listed = self.listed_count();
        if listed > 0 && uses_no_table(statement) {
            self.stale = Some(listed);
            self.warnings = 0;
        } else {
            self.start_statement();
        }
    }

    /// A warning of the running statement.
    pub fn warn(&mut self, code: u16, message: String) {
        self.note("Warning", code, message);
    }

    /// A warning of the running statement's planning ([`Note::planned`]).
    pub fn warn_planned(&mut self, code: u16, message: String) {
        self.note("Warning", code, message);
        if let Some(last) = self.notes.last_mut() {
            last.planned = true;
        }
    }

    /// An error (level "Error") of the running statement that did not
    /// fail it (CHECKSUM TABLE of a table that is not there).
    pub fn error_note(&mut self, code: u16, message: String) {
        self.note("Error", code, message);
    }

    /// A note (level "Note") of the running statement.
    pub fn note_only(&mut self, code: u16, message: String) {
        if self.vars.hot().sql_notes {
            self.note("Note", code, message);
        }
    }

    fn note(&mut self, level: &'static str, code: u16, message: String) {
        // The statement's first note replaces an earlier statement's.
        if self.stale.take().is_some() {
            self.notes.clear();
        }
        self.warnings = self.warnings.saturating_add(1);
        if self.notes.len() < self.vars.hot().max_error_count {
            self.notes.push(Note {
                level,
                code,
                message,
                planned: false,
            });
        }
    }

    /// Where the running statement's diagnostics stand: (warning count,
    /// notes kept), for [`SessionState::rewind_diagnostics`].
    pub fn diagnostics_mark(&self) -> (u16, usize) {
        let kept = if self.stale.is_some() {
            0
        } else {
            self.notes.len()
        };
        (self.warnings, kept)
    }

    /// Forgets the diagnostics left since `mark` (a warning that became
    /// the statement's error).
    pub fn rewind_diagnostics(&mut self, mark: (u16, usize)) {
        self.warnings = mark.0;
        // Still an earlier statement's: none were left since.
        if self.stale.is_none() {
            self.notes.truncate(mark.1);
        }
    }

    /// The statement failed with `error` (`SHOW ERRORS` lists it).
    pub fn note_error(&mut self, error: &SqlError) {
        self.note("Error", error.code, error.message.clone());
    }

    /// Warnings (and errors) of the running (or last) statement, as its
    /// OK and EOF packets count them.
    pub fn warning_count(&self) -> u16 {
        self.warnings
    }

    /// Warnings (and errors) of the listed notes (`@@warning_count`): an
    /// earlier statement's while a statement without tables keeps them.
    pub fn listed_count(&self) -> u16 {
        self.stale.unwrap_or(self.warnings)
    }

    /// The notes of the last statement.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Whether `sql_mode` makes bad values errors (STRICT_TRANS_TABLES or
    /// STRICT_ALL_TABLES), rather than warnings.
    pub fn sql_mode_strict(&self) -> bool {
        self.vars.hot().strict
    }

    /// `foreign_key_checks`: FOREIGN KEYs are checked and acted on.
    pub fn foreign_key_checks(&self) -> bool {
        self.vars.hot().foreign_key_checks
    }

    /// `status::AUTOCOMMIT` when on.
    pub fn status_flags(&self) -> u16 {
        if self.autocommit {
            status::AUTOCOMMIT
        } else {
            0
        }
    }
}

/// Splits and parses statement text; the first statement that does not
/// parse fails the whole (for `COM_STMT_PREPARE`, which takes one).
pub fn parse_query(_conn: &mut Conn<'_>, sql: &str, multi: bool) -> SqlResult<Vec<Stmt>> {
    parse_text(sql, multi)?.into_iter().collect()
}

/// Splits `COM_QUERY` text into statements, each parsed on its own (see
/// the module doc): as MySQL runs a multi-statement, the statements before
/// one that does not parse still run, and the run stops at it. The outer
/// error is for the text as a whole (too long, not tokenizable, empty, or
/// several statements when the client did not enable multi-statements:
/// 1064, as MySQL answers).
pub fn parse_text(sql: &str, multi: bool) -> SqlResult<Vec<SqlResult<Stmt>>> {
    if sql.len() > super::STATEMENT_BYTES_MAX {
        return Err(SqlError::new(
            codes::NET_PACKET_TOO_LARGE,
            format!(
                "statement of {} bytes: at most {} allowed",
                sql.len(),
                super::STATEMENT_BYTES_MAX
            ),
        ));
    }
    let dialect = MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(SqlError::syntax)?;
    let pieces = split_statements(tokens);
    if pieces.is_empty() {
        return Err(SqlError::new(codes::EMPTY_QUERY, "Query was empty"));
    }
    if pieces.len() > STATEMENTS_PER_QUERY_MAX {
        return Err(SqlError::unsupported(format_args!(
            "{} statements in one query: at most {STATEMENTS_PER_QUERY_MAX}",
            pieces.len()
        )));
    }
    if pieces.len() > 1 && !multi {
        let second = pieces[1]
            .iter()
            .map(ToString::to_string)
            .collect::<String>();
        return Err(SqlError::syntax(format_args!(
            "near '{}' (several statements, and the client did not enable multi-statements)",
            super::stdx_truncate(second.trim(), 40)
        )));
    }
    Ok(pieces
        .into_iter()
        .map(|piece| parse_piece(piece, sql))
        .collect())
}

/// One statement's tokens (whitespace and comments kept out of the ends)
/// per `;`-separated piece; empty pieces dropped.
fn split_statements(tokens: Vec<TokenWithSpan>) -> Vec<Vec<TokenWithSpan>> {
    let significant = |piece: &[TokenWithSpan]| {
        piece
            .iter()
            .any(|t| !matches!(t.token, Token::Whitespace(_)))
    };
    let mut pieces = Vec::new();
    let mut piece: Vec<TokenWithSpan> = Vec::new();
    for mut token in tokens {
        match token.token {
            Token::SemiColon => {
                if significant(&piece) {
                    pieces.push(std::mem::take(&mut piece));
                } else {
                    piece.clear();
                }
            }
            // MySQL reads "text" as a string unless ANSI_QUOTES is set.
            Token::DoubleQuotedString(s) => {
                token.token = Token::SingleQuotedString(s);
                piece.push(token);
            }
            _ => piece.push(token),
        }
    }
    if significant(&piece) {
        pieces.push(piece);
    }
    pieces
}

/// The uppercase leading words of a statement's tokens, at most `n`.
fn head_words(tokens: &[TokenWithSpan], n: usize) -> Vec<String> {
    tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .take(n)
        .map(|t| match t {
            Token::Word(w) => w.value.to_ascii_uppercase(),
            other => other.to_string(),
        })
        .collect()
}

/// `SHOW WARNINGS|ERRORS [LIMIT [offset,] count | LIMIT count OFFSET
/// offset]` and `SHOW COUNT(*) WARNINGS|ERRORS`, which the parser does not
/// take: anything else after them is 1064 near the first token that does
/// not fit, as MariaDB's grammar refuses it (a LIMIT would otherwise be
/// ignored and show every note).
fn show_warnings_statement(spanned: &[TokenWithSpan], sql: &str) -> SqlResult<Stmt> {
    let tokens: Vec<&TokenWithSpan> = spanned
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let mut at = 1;
    let misfit = |at: usize| -> SqlError {
        match tokens.get(at) {
            Some(t) => syntax_error(
                sql,
                &format!(
                    "Expected: SHOW WARNINGS or SHOW ERRORS [LIMIT], found: {} at Line: {}, Column: {}",
                    t.token, t.span.start.line, t.span.start.column
                ),
            ),
            None => SqlError::syntax_near(
                "",
                tokens.last().map_or(1, |t| t.span.end.line),
                "Expected: more of SHOW WARNINGS, found: end of statement",
            ),
        }
    };
    let is_word = |at: usize, word: &str| {
        matches!(tokens.get(at), Some(t) if matches!(&t.token, Token::Word(w)
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word)))
    };
    let count = is_word(at, "COUNT");
    if count {
        at += 1;
        for expected in [Token::LParen, Token::Mul, Token::RParen] {
            if tokens.get(at).map(|t| &t.token) != Some(&expected) {
                return Err(misfit(at));
            }
            at += 1;
        }
    }
    let errors = match () {
        () if is_word(at, "WARNINGS") => false,
        () if is_word(at, "ERRORS") => true,
        () => return Err(misfit(at)),
    };
    at += 1;
    let number = |at: usize| -> Option<u64> {
        match tokens.get(at).map(|t| &t.token) {
            Some(Token::Number(n, _)) if n.bytes().all(|b| b.is_ascii_digit()) => {
                // Past u64 it is no smaller limit: every note.
                Some(n.parse().unwrap_or(u64::MAX))
            }
            _ => None,
        }
    };
    let mut limit = None;
    if !count && is_word(at, "LIMIT") {
        let first = number(at + 1).ok_or_else(|| misfit(at + 1))?;
        at += 2;
        limit = Some((0, first));
        if tokens.get(at).map(|t| &t.token) == Some(&Token::Comma) {
            limit = Some((first, number(at + 1).ok_or_else(|| misfit(at + 1))?));
            at += 2;
        } else if is_word(at, "OFFSET") {
            limit = Some((number(at + 1).ok_or_else(|| misfit(at + 1))?, first));
            at += 2;
        }
    }
    if at < tokens.len() {
        return Err(misfit(at));
    }
    Ok(Stmt::Extra(Extra::ShowWarnings {
        errors,
        count,
        limit,
    }))
}

/// `SET STATEMENT a = 1, b = 2 FOR statement`: the SET and the statement,
/// split at the first FOR outside parentheses (1064 without one).
fn set_statement(spanned: &[TokenWithSpan], sql: &str) -> SqlResult<Stmt> {
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let statement_at = spanned
        .iter()
        .position(|t| is(&t.token, "STATEMENT"))
        .unwrap_or(0);
    let mut depth = 0i32;
    let mut for_at = None;
    for (at, t) in spanned.iter().enumerate().skip(statement_at + 1) {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            token if depth == 0 && is(token, "FOR") => {
                for_at = Some(at);
                break;
            }
            _ => {}
        }
    }
    let Some(for_at) = for_at else {
        return Err(syntax_error(sql, "SET STATEMENT … without FOR statement"));
    };
    let text = |tokens: &[TokenWithSpan]| {
        tokens
            .iter()
            .map(|t| t.token.to_string())
            .collect::<String>()
    };
    let set_text = format!("SET {}", text(&spanned[statement_at + 1..for_at]));
    let inner_text = text(&spanned[for_at + 1..]);
    let one = |sql: &str| -> SqlResult<Stmt> {
        let mut parsed = parse_text(sql, false)?;
        match parsed.len() {
            1 => parsed.remove(0),
            _ => Err(syntax_error(sql, "one statement after SET STATEMENT … FOR")),
        }
    };
    let set = one(&set_text)?;
    if !matches!(&set, Stmt::Sql(s) if matches!(**s, Statement::Set(_))) {
        return Err(syntax_error(sql, "SET STATEMENT's assignments"));
    }
    let inner = one(inner_text.trim())?;
    if matches!(&inner, Stmt::Extra(Extra::SetStatement { .. })) {
        return Err(syntax_error(sql, "SET STATEMENT inside SET STATEMENT"));
    }
    Ok(Stmt::Extra(Extra::SetStatement {
        set: Box::new(set),
        inner: Box::new(inner),
    }))
}

/// Runs SET STATEMENT's assignments (SESSION scope only: GLOBAL is 1105).
fn set_statement_vars(conn: &mut Conn<'_>, assign: &Statement) -> SqlResult<Answered> {
    if assign.to_string().to_ascii_uppercase().contains("GLOBAL") {
        return Err(SqlError::unsupported("SET STATEMENT of a GLOBAL variable"));
    }
    set(conn, assign)
}

/// The session variables a SET statement assigns (not user variables).
fn assigned_names(set: &Stmt) -> Vec<String> {
    let Stmt::Sql(s) = set else {
        return Vec::new();
    };
    let strip = |name: String| {
        let lower = name.to_ascii_lowercase();
        lower
            .trim_start_matches("@@")
            .trim_start_matches("session.")
            .trim_start_matches("local.")
            .to_owned()
    };
    match &**s {
        Statement::Set(Set::SingleAssignment { variable, .. }) => vec![strip(variable.to_string())],
        Statement::Set(Set::MultipleAssignments { assignments }) => assignments
            .iter()
            .map(|a| strip(a.name.to_string()))
            .collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|n| !n.starts_with('@'))
    .collect()
}

fn parse_piece(mut spanned: Vec<TokenWithSpan>, sql: &str) -> SqlResult<Stmt> {
    mend_words(&mut spanned);
    let group_order = super::group_order::strip(&mut spanned);
    // DUAL is checked and the tree walked for it only when the word is
    // there at all.
    let dual = super::mentions_dual(&spanned);
    if dual {
        super::check_dual(&spanned, sql)?;
    }
    // The tokens are read in place: an INSERT of many rows would
    // otherwise pay a clone, and a display, of every token.
    let words = head_words(&spanned, 4);
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    let text = |spanned: &[TokenWithSpan]| {
        spanned
            .iter()
            .map(|t| t.token.to_string())
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let extra_text = |head: &str, sql: String| {
        Ok(Stmt::Extra(Extra::Text {
            head: head.to_owned(),
            sql,
        }))
    };
    // `DO …` is parsed as `SELECT …` (which the parser takes).
    let is_do = word(0) == "DO";
    // Where a DO's clause starts (`FROM`, `ORDER BY`, …: outside any
    // parentheses), which MariaDB's grammar refuses there.
    let mut do_clause = None;
    if is_do {
        let mut depth = 0usize;
        do_clause = spanned.iter().find_map(|t| {
            match &t.token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Word(w) if depth == 0 && w.quote_style.is_none() => {
                    use sqlparser::keywords::Keyword as K;
                    if matches!(
                        w.keyword,
                        K::FROM
                            | K::WHERE
                            | K::GROUP
                            | K::HAVING
                            | K::ORDER
                            | K::LIMIT
                            | K::UNION
                            | K::INTO
                            | K::WINDOW
                            | K::EXCEPT
                            | K::INTERSECT
                    ) {
                        return Some(t.span.start);
                    }
                }
                _ => {}
            }
            None
        });
        if let Some(first) = spanned
            .iter_mut()
            .find(|t| !matches!(t.token, Token::Whitespace(_)))
        {
            first.token = Token::make_keyword("SELECT");
        }
    }
    match (word(0), word(1), word(2)) {
        ("SET", "STATEMENT", _) => return set_statement(&spanned, sql),
        ("SHOW", "WARNINGS" | "ERRORS" | "COUNT", _) => {
            return show_warnings_statement(&spanned, sql)
        }
        ("SHOW", "GRANTS", _) => return extra_text("SHOW GRANTS", text(&spanned)),
        ("SHOW", "CREATE", "USER") => return extra_text("SHOW CREATE USER", text(&spanned)),
        // SHOW of routines, triggers, events, logs, replicas, plugins, …:
        // the server's (`server_info`), with their LIKE and WHERE.
        ("SHOW", first, second) if super::server_info::is_server_show(first, second) => {
            return extra_text("SHOW SERVER", text(&spanned))
        }
        ("CREATE" | "DROP" | "ALTER" | "RENAME", "USER", _) => {
            let head = format!("{} USER", word(0));
            return extra_text(&head, text(&spanned));
        }
        ("SET", "PASSWORD", _) => return extra_text("SET PASSWORD", text(&spanned)),
        // MySQL's `PREPARE name FROM …` (the parser takes PostgreSQL's
        // `PREPARE name AS …`) and `DROP PREPARE name`.
        ("PREPARE", _, _) => return prepare_statement(&spanned, sql),
        ("DROP", "PREPARE", _) => return drop_prepare_statement(&spanned, sql),
        ("GRANT", _, _) => return extra_text("GRANT", text(&spanned)),
        ("REVOKE", _, _) => return extra_text("REVOKE", text(&spanned)),
        // ANALYZE, OPTIMIZE, CHECK, REPAIR and CHECKSUM TABLE, of several
        // tables, which the parser does not take.
        (first, second, _) if super::maintenance::is_maintenance(first, second) => {
            return extra_text("MAINTENANCE", text(&spanned))
        }
        // Only a statement with the word SNAPSHOT pays for reading them
        // all: every transaction of some drivers starts here.
        ("START", "TRANSACTION", _)
            if spanned.iter().any(
                |t| matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case("SNAPSHOT")),
            ) =>
        {
            // The words, wherever they stand (a `/*!40100 … */` comment's
            // are the statement's).
            let upper: Vec<String> = spanned
                .iter()
                .filter_map(|t| match &t.token {
                    Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
                    _ => None,
                })
                .collect();
            let has = |seq: &[&str]| upper.windows(seq.len()).any(|w| w == seq);
            if has(&["WITH", "CONSISTENT", "SNAPSHOT"]) {
                let read_only = if has(&["READ", "ONLY"]) {
                    Some(true)
                } else if has(&["READ", "WRITE"]) {
                    Some(false)
                } else {
                    None
                };
                return Ok(Stmt::Extra(Extra::Begin { read_only }));
            }
        }
        ("LOAD", "DATA", _) => {
            return super::exec::load::parse(spanned)
                .map(|load| Stmt::Extra(Extra::LoadData(Box::new(load))))
                .map_err(|e| syntax_error(sql, &e.to_string()))
        }
        _ => {}
    }
    // Schema statements the parser does not take (PARTITION BY KEY, SHOW
    // CREATE DATABASE, SHOW TABLE STATUS's LIKE, ALTER TABLE of table
    // options only): the catalog recognises them from the text.
    if super::ddl::may_recognise(word(0), word(1)) {
        if let Some(recognised) = super::ddl::recognise(&text(&spanned)) {
            return Ok(Stmt::Extra(Extra::Catalog(Box::new(recognised?))));
        }
    }
    let mut outfile = None;
    if matches!(word(0), "SELECT" | "WITH" | "(") {
        outfile = super::exec::outfile::take_into(&mut spanned)
            .map_err(|e| syntax_error(sql, &e.to_string()))?;
    }
    let mut trailing_into = None;
    if matches!(word(0), "SELECT" | "(") && outfile.is_none() {
        mend_lock_wait(&mut spanned);
        mend_lock_in_share_mode(&mut spanned);
        trailing_into = take_trailing_into(&mut spanned);
    }
    if word(0) == "SET" {
        mend_set_assignments(&mut spanned);
        if let Some(assignments) = names_as_assignments(&spanned) {
            spanned = Tokenizer::new(&MySqlDialect {}, &assignments)
                .tokenize_with_location()
                .map_err(SqlError::syntax)?;
        }
    }
    // A view's `WITH [CASCADED | LOCAL] CHECK OPTION`, which the parser
    // does not read: taken off, and kept beside the statement.
    let view_check = if matches!(word(0), "CREATE" | "ALTER") {
        take_check_option(&mut spanned)
    } else {
        None
    };
    let mut parser = Parser::new(&super::dialect::SkarvDialect).with_tokens_with_locations(spanned);
    let mut statement = parser
        .parse_statement()
        .map_err(|e| syntax_error(sql, &e.to_string()))?;
    // `parse_statement` stops after one statement: anything after it but
    // its `;` is a syntax error (`SELECT … WHERE id = 1 ORDER` ran once).
    let _ = parser.consume_token(&Token::SemiColon);
    let rest = parser.peek_token();
    if rest.token != Token::EOF {
        let at = rest.span.start;
        return Err(syntax_error(
            sql,
            &format!(
                "Expected: end of statement, found: {} at Line: {}, Column: {}",
                rest.token, at.line, at.column
            ),
        ));
    }
    if let Some(check) = view_check {
        use sqlparser::ast::Statement as S;
        if !matches!(statement, S::CreateView(_) | S::AlterView(_)) {
            return Err(syntax_error(
                sql,
                "WITH CHECK OPTION outside CREATE or ALTER VIEW",
            ));
        }
        return Ok(Stmt::Extra(Extra::CheckedView(Box::new(statement), check)));
    }
    if dual {
        super::dual_as_no_table(&mut statement);
    }
    super::values_as_selects(&mut statement, sql);
    if let Some(order) = &group_order {
        super::group_order::apply(order, &mut statement)?;
    }
    if is_do {
        // Expressions only: no FROM, WHERE, UNION, ORDER BY or LIMIT.
        let only_expressions = match &statement {
            sqlparser::ast::Statement::Query(q) => {
                q.order_by.is_none()
                    && q.limit_clause.is_none()
                    && q.with.is_none()
                    && matches!(&*q.body, sqlparser::ast::SetExpr::Select(s)
                        if s.from.is_empty() && s.selection.is_none() && s.having.is_none()
                            && s.distinct.is_none()
                            && matches!(&s.group_by, sqlparser::ast::GroupByExpr::Expressions(g, _) if g.is_empty()))
            }
            _ => false,
        };
        return match do_clause {
            None if only_expressions && outfile.is_none() && trailing_into.is_none() => {
                Ok(Stmt::Extra(Extra::Do(Box::new(statement))))
            }
            Some(at) => Err(syntax_error(
                sql,
                &format!(
                    "DO takes expressions only at Line: {}, Column: {}",
                    at.line, at.column
                ),
            )),
            None => Err(syntax_error(sql, "DO takes expressions only")),
        };
    }
    if let Statement::Set(Set::SetTransaction { session, modes, .. }) = &mut statement {
        // MySQL's `SET [SESSION | GLOBAL] TRANSACTION …`: the parser drops
        // the scope word (its `session` is PostgreSQL's CHARACTERISTICS).
        match word(1) {
            "SESSION" | "LOCAL" => *session = true,
            "GLOBAL" if super::txn::access_mode(modes).is_some() => {
                return Err(SqlError::unsupported(
                    "SET GLOBAL TRANSACTION READ ONLY|READ WRITE (set \
                     @@global.transaction_read_only)",
                ))
            }
            _ => {}
        }
    }
    if let Some(into) = outfile {
        if !matches!(statement, sqlparser::ast::Statement::Query(_)) {
            return Err(SqlError::unsupported("INTO OUTFILE outside a SELECT"));
        }
        return Ok(Stmt::Extra(Extra::SelectOutfile(Box::new(
            super::exec::outfile::SelectOutfile {
                query: Box::new(statement),
                into,
            },
        ))));
    }
    if let Some(targets) = trailing_into {
        // A UNION's INTO is its last SELECT's.
        let select = match &mut statement {
            sqlparser::ast::Statement::Query(q) => super::exec::last_select_mut(&mut q.body),
            _ => None,
        };
        let Some(select) = select.filter(|s| s.into.is_none()) else {
            return Err(SqlError::unsupported("this SELECT … INTO"));
        };
        select.into = Some(sqlparser::ast::SelectInto {
            temporary: false,
            unlogged: false,
            table: false,
            targets,
        });
    }
    Ok(Stmt::Sql(Box::new(statement)))
}

/// `SELECT … FROM … INTO @a, @b` (the INTO last, which MariaDB still
/// takes): the INTO's tokens taken off the end, its variables returned for
/// the parsed SELECT (the parser takes INTO only before FROM). None, and
/// the tokens as they were, for any other statement.
fn take_trailing_into(tokens: &mut Vec<TokenWithSpan>) -> Option<Vec<sqlparser::ast::Expr>> {
    let significant: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_) | Token::SemiColon))
        .map(|(at, _)| at)
        .collect();
    // Backwards: `@v` (`, @v`)* then INTO.
    let mut targets = Vec::new();
    let mut at = significant.len();
    loop {
        at = at.checked_sub(1)?;
        match &tokens[significant[at]].token {
            Token::Word(w) if w.quote_style.is_none() && w.value.starts_with('@') => {
                targets.push(trailing_into_target(&w.value));
            }
            _ => return None,
        }
        at = at.checked_sub(1)?;
        match &tokens[significant[at]].token {
            Token::Comma => continue,
            Token::Word(w) if w.keyword == sqlparser::keywords::Keyword::INTO => break,
            _ => return None,
        }
    }
    // The INTO of `SELECT … INTO @v FROM` is not last; one right after
    // the select list (`SELECT 1 INTO @v`) parses as is.
    if !into_is_trailing(tokens, significant[at]) {
        return None;
    }
    targets.reverse();
    tokens.truncate(significant[at]);
    Some(targets)
}

/// Whether the INTO at token `into` stands at the end of its query (after
/// FROM, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT, a locking clause, a
/// UNION's second SELECT or a parenthesised query), the form MariaDB deprecates (warning 1287),
/// rather than right after the select list. Only the query's own level
/// counts: a subquery's FROM in the select list does not.
pub(crate) fn into_is_trailing(tokens: &[TokenWithSpan], into: usize) -> bool {
    let mut depth = 0i32;
    let mut parenthesised = None;
    for t in &tokens[..into] {
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && super::expr::ends_select_list(w) => {
                return true;
            }
            _ => {}
        }
        parenthesised.get_or_insert(t.token == Token::LParen);
    }
    // `(SELECT …) INTO`: after the parenthesis closed.
    parenthesised == Some(true) && depth == 0
}

/// A variable of an INTO taken off the end of a query
/// ([`take_trailing_into`]). It comes from no place in the parsed text,
/// so its span is empty: that is how [`is_trailing_into`] tells the form
/// MariaDB warns about from an INTO the parser took after the select list.
fn trailing_into_target(name: &str) -> sqlparser::ast::Expr {
    sqlparser::ast::Expr::Identifier(sqlparser::ast::Ident::new(name))
}

/// Whether the INTO of `q` (its last SELECT's, `into`) stands at the end
/// of the query: taken off the end ([`trailing_into_target`]), or after a
/// UNION, whose last SELECT the parser may give an INTO after its select
/// list (`SELECT 5 UNION SELECT 5 INTO @x`, prepared).
pub(crate) fn is_trailing_into(
    q: &sqlparser::ast::Query,
    into: &sqlparser::ast::SelectInto,
) -> bool {
    let taken_off = into.targets.iter().all(|t| {
        matches!(t, sqlparser::ast::Expr::Identifier(i) if i.span == sqlparser::tokenizer::Span::empty())
    });
    taken_off || matches!(*q.body, sqlparser::ast::SetExpr::SetOperation { .. })
}

/// A `SET` of several items one of which is `NAMES cs [COLLATE c]` (MariaDB
/// Connector/J's `SET autocommit=1, sql_mode=…, NAMES utf8mb4`), which the
/// parser takes only alone: the text with that item as the assignments
/// `SET NAMES` makes. None for any other statement.
fn names_as_assignments(tokens: &[TokenWithSpan]) -> Option<String> {
    let mut items: Vec<Vec<&Token>> = vec![Vec::new()];
    let mut depth = 0i32;
    for t in tokens
        .iter()
        .map(|t| &t.token)
        .skip_while(|t| !matches!(t, Token::Word(_)))
        .skip(1)
    {
        match t {
            Token::SemiColon => continue,
            // Kept inside an item (`@@session . x` would not do), not ahead.
            Token::Whitespace(_) if items.last().is_some_and(Vec::is_empty) => continue,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                items.push(Vec::new());
                continue;
            }
            _ => {}
        }
        items.last_mut()?.push(t);
    }
    let is_names = |item: &[&Token]| matches!(item.first(), Some(Token::Word(w)) if w.keyword == Keyword::NAMES);
    if items.len() < 2 || !items.iter().any(|i| is_names(i)) {
        return None;
    }
    let name = |t: &Token| match t {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        _ => None,
    };
    let mut out = Vec::new();
    for item in &items {
        if !is_names(item) {
            out.push(item.iter().map(|t| t.to_string()).collect::<String>());
            continue;
        }
        let item: Vec<&Token> = item
            .iter()
            .copied()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        let charset = name(item.get(1)?)?;
        if charset.eq_ignore_ascii_case("DEFAULT") {
            continue;
        }
        check_charset(&charset.to_ascii_lowercase()).ok()?;
        let collation = match item.get(2..) {
            Some([Token::Word(w), c]) if w.keyword == Keyword::COLLATE => name(c)?,
            Some([]) => "utf8mb4_general_ci".to_owned(),
            _ => return None,
        };
        let quote = |v: &str| format!("'{}'", v.replace('\'', "''"));
        for var in [
            "character_set_client",
            "character_set_connection",
            "character_set_results",
        ] {
            out.push(format!("{var} = {}", quote(&charset)));
        }
        out.push(format!("collation_connection = {}", quote(&collation)));
    }
    Some(format!("SET {}", out.join(", ")))
}

/// A compound INTERVAL unit as the two fields the parser reads for it.
/// `SECOND_MICROSECOND` is `MICROSECOND TO SECOND`: the parser takes no
/// `TO` after `SECOND`, and no unit is that pair the other way round.
fn compound_interval_unit(word: &str) -> Option<(&'static str, &'static str)> {
    const UNITS: [(&str, &str, &str); 11] = [
        ("SECOND_MICROSECOND", "MICROSECOND", "SECOND"),
        ("MINUTE_MICROSECOND", "MINUTE", "MICROSECOND"),
        ("MINUTE_SECOND", "MINUTE", "SECOND"),
        ("HOUR_MICROSECOND", "HOUR", "MICROSECOND"),
        ("HOUR_SECOND", "HOUR", "SECOND"),
        ("HOUR_MINUTE", "HOUR", "MINUTE"),
        ("DAY_MICROSECOND", "DAY", "MICROSECOND"),
        ("DAY_SECOND", "DAY", "SECOND"),
        ("DAY_MINUTE", "DAY", "MINUTE"),
        ("DAY_HOUR", "DAY", "HOUR"),
        ("YEAR_MONTH", "YEAR", "MONTH"),
    ];
    if !word.contains('_') {
        return None;
    }
    UNITS
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(word))
        .map(|(_, lead, last)| (*lead, *last))
}

/// The comment hint `DELETE IGNORE` is mended to (see [`mend_words`]): a
/// prefix the parser keeps apart from a user's `/*+ … */` hints.
pub const DELETE_IGNORE_HINT: &str = "skarv+IGNORE";

/// Whether a DELETE was written `DELETE IGNORE` ([`DELETE_IGNORE_HINT`]).
pub fn delete_ignore(del: &sqlparser::ast::Delete) -> bool {
    del.optimizer_hints
        .iter()
        .any(|h| Some((h.prefix.as_str(), h.text.as_str())) == DELETE_IGNORE_HINT.split_once('+'))
}

/// A multi-table DELETE's `t.*` in its list of tables (`DELETE a.*, b.*
/// FROM a JOIN b …`, `DELETE FROM a.* USING …`), which the parser does not
/// read, as the `t` it means: the `.*` after a name goes, in the list from
/// `from` (the token after DELETE and its modifiers) to its FROM (or, for
/// the USING form, its USING).
fn drop_table_stars(tokens: &mut Vec<TokenWithSpan>, from: usize) {
    let mut at = from;
    let mut first = true;
    while at < tokens.len() {
        match &tokens[at].token {
            Token::Whitespace(_) => {}
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::FROM && first => {}
            Token::Word(w)
                if w.quote_style.is_none()
                    && matches!(w.keyword, Keyword::FROM | Keyword::USING | Keyword::WHERE) =>
            {
                return
            }
            Token::Period if tokens.get(at + 1).is_some_and(|t| t.token == Token::Mul) => {
                tokens.drain(at..at + 2);
                continue;
            }
            Token::Word(_) | Token::Comma | Token::Period => {}
            _ => return,
        }
        if !matches!(tokens[at].token, Token::Whitespace(_)) {
            first = false;
        }
        at += 1;
    }
}

/// Words MariaDB reads otherwise than the parser's MySQL dialect, mended
/// in place before the statement is parsed (here and in `engine::parse`):
///
/// - `TOP` is no keyword of MariaDB's (`SELECT 1 AS top`, `SELECT a top`,
///   a column `top`) but the parser reserves it for SQL Server's
///   `SELECT TOP n` in every dialect: an unquoted `top` becomes the
///   identifier `` `top` ``, which it is in MariaDB wherever it can stand.
/// - `REAL(M,D)` and `DOUBLE PRECISION(M,D)` are MariaDB's DOUBLE(M,D),
///   which the parser takes only as `DOUBLE(M,D)`.
/// - `NUMERIC[(p[,s])] UNSIGNED` (or ZEROFILL) is `DECIMAL…`, which
///   the parser takes UNSIGNED after (its NUMERIC it does not).
/// - `UPDATE [LOW_PRIORITY] IGNORE` becomes `UPDATE OR IGNORE`, which the
///   parser takes (as SQLite's conflict clause) where it would read IGNORE
///   as the table.
/// - `DELETE [LOW_PRIORITY] [QUICK] [IGNORE]` loses its modifiers, which the
///   parser would read as the tables of a multi-table DELETE; IGNORE
///   becomes the comment hint `/*skarv+IGNORE*/` ([`DELETE_IGNORE_HINT`]),
///   which the parser keeps in the statement's optimizer hints.
/// - MySQL's compound INTERVAL units (`HOUR_MINUTE`) become the
///   standard's `HOUR TO MINUTE` ([`compound_interval_unit`]).
/// - `a MOD b`, MySQL's operator form of `%`, becomes `a % b`: a MOD
///   after an operand (a number, a string, a name, a `)`) and before one
///   (not `(`, which makes it the function, nor a clause's word, which
///   makes it an alias `mod`).
pub fn mend_words(tokens: &mut Vec<TokenWithSpan>) {
    let next_significant = |tokens: &[TokenWithSpan], from: usize| {
        (from..tokens.len()).find(|&at| !matches!(tokens[at].token, Token::Whitespace(_)))
    };
    let mut at = 0;
    while at < tokens.len() {
        let Token::Word(word) = &tokens[at].token else {
            at += 1;
            continue;
        };
        if word.quote_style.is_some() {
            at += 1;
            continue;
        }
        // MySQL's compound INTERVAL units (`INTERVAL '1:30' HOUR_MINUTE`),
        // which the parser does not know, as the standard's `HOUR TO
        // MINUTE` it does (`expr::interval_unit` reads them back).
        if let Some((lead, last)) = compound_interval_unit(&word.value) {
            let span = tokens[at].span;
            let token = |t: Token| TokenWithSpan::new(t, span);
            let space = || token(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
            tokens.splice(
                at..=at,
                [
                    token(Token::make_keyword(lead)),
                    space(),
                    token(Token::make_keyword("TO")),
                    space(),
                    token(Token::make_keyword(last)),
                ],
            );
            at += 5;
            continue;
        }
        // A bit-value literal `0b0101` (MySQL's, lower-case b only): the
        // tokenizer makes it a word, a name; it is `b'0101'`.
        if let Some(bits) = word
            .value
            .strip_prefix("0b")
            .filter(|bits| !bits.is_empty() && bits.bytes().all(|b| b == b'0' || b == b'1'))
        {
            tokens[at].token = Token::SingleQuotedByteStringLiteral(bits.to_owned());
            at += 1;
            continue;
        }
        if word.value.eq_ignore_ascii_case("MOD") && is_infix_mod(tokens, at) {
            tokens[at].token = Token::Mod;
            at += 1;
            continue;
        }
        match word.keyword {
            Keyword::TOP => {
                let value = word.value.clone();
                tokens[at].token = Token::Word(sqlparser::tokenizer::Word {
                    value,
                    quote_style: Some('`'),
                    keyword: Keyword::NoKeyword,
                });
            }
            Keyword::REAL => {
                let paren = next_significant(tokens, at + 1);
                if paren.is_some_and(|p| tokens[p].token == Token::LParen) {
                    tokens[at].token = Token::make_keyword("DOUBLE");
                }
            }
            Keyword::NUMERIC => {
                let mut after = next_significant(tokens, at + 1);
                if after.is_some_and(|p| tokens[p].token == Token::LParen) {
                    let close = after.and_then(|p| {
                        (p..tokens.len()).find(|&c| tokens[c].token == Token::RParen)
                    });
                    after = close.and_then(|c| next_significant(tokens, c + 1));
                }
                let unsigned = after.is_some_and(|p| {
                    matches!(&tokens[p].token, Token::Word(w)
                        if matches!(w.keyword, Keyword::UNSIGNED | Keyword::ZEROFILL)
                            && w.quote_style.is_none())
                });
                if unsigned {
                    tokens[at].token = Token::make_keyword("DECIMAL");
                }
            }
            Keyword::UPDATE => {
                // LOW_PRIORITY only matters to table-locking engines.
                if let Some(low) = next_significant(tokens, at + 1).filter(|&p| {
                    matches!(&tokens[p].token, Token::Word(w) if w.keyword == Keyword::LOW_PRIORITY
                        && w.quote_style.is_none())
                }) {
                    tokens.drain(at + 1..=low);
                }
                let ignore = next_significant(tokens, at + 1).filter(|&p| {
                    matches!(&tokens[p].token, Token::Word(w) if w.keyword == Keyword::IGNORE
                        && w.quote_style.is_none())
                });
                if let Some(ignore) = ignore {
                    let or = TokenWithSpan {
                        token: Token::make_keyword("OR"),
                        span: tokens[ignore].span,
                    };
                    let space = TokenWithSpan {
                        token: Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
                        span: tokens[ignore].span,
                    };
                    tokens.splice(ignore..ignore, [or, space]);
                }
            }
            Keyword::DELETE => {
                let mut ignore = false;
                let mut last = at;
                while let Some(p) = next_significant(tokens, last + 1) {
                    let Token::Word(w) = &tokens[p].token else {
                        break;
                    };
                    if w.quote_style.is_some() {
                        break;
                    }
                    match w.keyword {
                        Keyword::LOW_PRIORITY => {}
                        Keyword::IGNORE => ignore = true,
                        _ if w.value.eq_ignore_ascii_case("QUICK") => {}
                        _ => break,
                    }
                    last = p;
                }
                if last > at {
                    let span = tokens[at].span;
                    let hint = ignore.then(|| {
                        TokenWithSpan::new(
                            Token::Whitespace(sqlparser::tokenizer::Whitespace::MultiLineComment(
                                DELETE_IGNORE_HINT.into(),
                            )),
                            span,
                        )
                    });
                    tokens.splice(at + 1..=last, hint);
                }
                drop_table_stars(tokens, at + 1);
            }
            Keyword::DOUBLE => {
                let precision = next_significant(tokens, at + 1).filter(|&p| {
                    matches!(&tokens[p].token, Token::Word(w) if w.keyword == Keyword::PRECISION
                        && w.quote_style.is_none())
                });
                if let Some(precision) = precision {
                    let paren = next_significant(tokens, precision + 1);
                    if paren.is_some_and(|p| tokens[p].token == Token::LParen) {
                        tokens.drain(at + 1..=precision);
                    }
                }
            }
            _ => {}
        }
        at += 1;
    }
}

/// Whether the unquoted word MOD at `at` stands between two operands
/// (see [`mend_words`]).
fn is_infix_mod(tokens: &[TokenWithSpan], at: usize) -> bool {
    let before = tokens[..at]
        .iter()
        .rev()
        .find(|t| !matches!(t.token, Token::Whitespace(_)));
    let after = tokens[at + 1..]
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)));
    let ends_operand = before.is_some_and(|t| match &t.token {
        Token::Number(..) | Token::SingleQuotedString(_) | Token::RParen => true,
        Token::Word(w) => w.quote_style.is_some() || w.keyword == Keyword::NoKeyword,
        _ => false,
    });
    let starts_operand = after.is_some_and(|t| match &t.token {
        Token::Number(..) | Token::SingleQuotedString(_) | Token::Minus | Token::Plus => true,
        Token::Word(w) => {
            w.quote_style.is_some()
                || !(super::expr::ends_select_list(w) || matches!(w.keyword, Keyword::AS))
        }
        _ => false,
    });
    ends_operand && starts_operand
}

/// `SET @a := 1, @b := 2`: MySQL's `:=` of a SET's assignments becomes
/// `=`, which the parser takes (a `:=` inside a value stays the operator).
fn mend_set_assignments(tokens: &mut [TokenWithSpan]) {
    let mut depth = 0usize;
    // After SET and after each comma of the list: a target, then its `=`.
    let mut target = true;
    for token in tokens.iter_mut() {
        match &token.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => target = true,
            Token::Eq if depth == 0 => target = false,
            Token::Assignment if depth == 0 && target => {
                token.token = Token::Eq;
                target = false;
            }
            _ => {}
        }
    }
}

/// The positions of the tokens that are not whitespace, after trailing
/// whitespace is dropped.
fn trimmed_significant(tokens: &mut Vec<TokenWithSpan>) -> Vec<usize> {
    while matches!(tokens.last().map(|t| &t.token), Some(Token::Whitespace(_))) {
        tokens.pop();
    }
    significant(tokens)
}

/// The positions of the tokens that are not whitespace.
pub(crate) fn significant(tokens: &[TokenWithSpan]) -> Vec<usize> {
    tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(at, _)| at)
        .collect()
}

/// MariaDB's `… FOR UPDATE WAIT n` (or after `LOCK IN SHARE MODE`, `FOR
/// SHARE`) at the end of a SELECT: `WAIT 0` is `NOWAIT`, as MariaDB's;
/// another `n` is dropped, the lock waited for as any other (up to the
/// cluster's `TransactionDeadlockDetectionTimeout`, as every lock wait:
/// docs/sql.md).
fn mend_lock_wait(tokens: &mut Vec<TokenWithSpan>) {
    let significant = trimmed_significant(tokens);
    let n = significant.len();
    if n < 4 {
        return;
    }
    let (wait, value) = (significant[n - 2], significant[n - 1]);
    let Token::Number(digits, _) = &tokens[value].token else {
        return;
    };
    let before = tokens[significant[n - 3]]
        .token
        .to_string()
        .to_ascii_uppercase();
    if !tokens[wait].token.to_string().eq_ignore_ascii_case("WAIT")
        || !matches!(before.as_str(), "UPDATE" | "SHARE" | "MODE")
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return;
    }
    let zero = digits.bytes().all(|b| b == b'0');
    let span = tokens[wait].span;
    tokens.truncate(wait);
    if zero {
        tokens.push(TokenWithSpan::new(Token::make_keyword("NOWAIT"), span));
    }
}

/// `… LOCK IN SHARE MODE` at the end of a SELECT (or before its `NOWAIT`
/// or `SKIP LOCKED`) becomes `… FOR SHARE`, its MySQL 8 spelling, which
/// the parser takes.
fn mend_lock_in_share_mode(tokens: &mut Vec<TokenWithSpan>) {
    let significant = trimmed_significant(tokens);
    let word = |at: usize| tokens[at].token.to_string().to_ascii_uppercase();
    let n = significant.len();
    // The words after MODE that stay: none, NOWAIT or SKIP LOCKED.
    let after = match n {
        _ if n >= 6
            && word(significant[n - 2]) == "SKIP"
            && word(significant[n - 1]) == "LOCKED" =>
        {
            2
        }
        _ if n >= 5 && word(significant[n - 1]) == "NOWAIT" => 1,
        _ => 0,
    };
    if n < 4 + after {
        return;
    }
    let tail = &significant[n - 4 - after..n - after];
    let spelled: Vec<String> = tail.iter().map(|&at| word(at)).collect();
    if spelled == ["LOCK", "IN", "SHARE", "MODE"] {
        let span = tokens[tail[0]].span;
        let kept = tokens.split_off(tail[3] + 1);
        tokens.truncate(tail[0]);
        for token in [
            Token::make_keyword("FOR"),
            Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
            Token::make_keyword("SHARE"),
        ] {
            tokens.push(TokenWithSpan::new(token, span));
        }
        tokens.extend(kept);
    }
}

/// Runs an [`Extra`] statement.
pub fn extra(
    conn: &mut Conn<'_>,
    extra: &Extra,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    match extra {
        Extra::SetStatement { set, inner } => {
            let names = assigned_names(set);
            // Each variable's value now, to set back whatever happens.
            let saved: Vec<(String, String)> = names
                .iter()
                .filter_map(|n| {
                    let now = conn
                        .session
                        .vars
                        .get(n)
                        .map(str::to_owned)
                        .or_else(|| sys_var(n).map(|v| v.default.to_owned()))?;
                    Some((n.clone(), now))
                })
                .collect();
            let Stmt::Sql(assign) = &**set else {
                return Err(SqlError::unsupported("SET STATEMENT of these variables"));
            };
            let result = set_statement_vars(conn, assign)
                .and_then(|_| conn.dispatch(inner, &[], more, sink));
            for (name, value) in saved {
                conn.session.vars.set(&name, value);
            }
            result
        }
        Extra::ShowWarnings {
            errors,
            count,
            limit,
        } => show_warnings(conn, *errors, *count, *limit, more, sink),
        Extra::Catalog(statement) => super::ddl::run(conn, statement, more, sink),
        Extra::CheckedView(statement, check) => {
            // An implicit commit first, as every schema statement's.
            super::txn::commit(conn)?;
            super::views::statement(conn, statement, *check)
        }
        Extra::Text { head, sql } if head == "SHOW SERVER" => {
            super::server_info::show(conn, sql, more, sink)
        }
        Extra::Text { head, sql } if head == "MAINTENANCE" => {
            super::maintenance::run(conn, sql, more, sink)
        }
        Extra::Prepare { name, source } => super::prepared::prepare_sql(conn, name, source),
        Extra::LoadData(load) => super::exec::load::run(conn, load, sink),
        Extra::SelectOutfile(select) => super::exec::outfile::run(conn, select),
        Extra::Begin { read_only } => super::txn::begin(conn, *read_only, true),
        Extra::Do(query) => super::exec::run_do(conn, query),
        Extra::Text { head, sql } => super::users::text_statement(conn, head, sql, more, sink),
    }
}

/// Takes a trailing `WITH [CASCADED | LOCAL] CHECK OPTION` off a statement
/// that names VIEW (CREATE or ALTER VIEW): the option, when it had one.
fn take_check_option(
    spanned: &mut Vec<sqlparser::tokenizer::TokenWithSpan>,
) -> Option<super::views::CheckOption> {
    use super::views::CheckOption;
    let is = |t: &Token, k: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    if !spanned.iter().any(|t| is(&t.token, "VIEW")) {
        return None;
    }
    // The statement's words from its end, past spaces and a `;`.
    let at: Vec<usize> = (0..spanned.len())
        .rev()
        .filter(|&i| !matches!(spanned[i].token, Token::Whitespace(_) | Token::SemiColon))
        .take(4)
        .collect();
    let word = |k: usize| at.get(k).map(|&i| &spanned[i].token);
    if !(word(0).is_some_and(|t| is(t, "OPTION")) && word(1).is_some_and(|t| is(t, "CHECK"))) {
        return None;
    }
    let (check, with) = match word(2) {
        Some(t) if is(t, "CASCADED") => (CheckOption::Cascaded, 3),
        Some(t) if is(t, "LOCAL") => (CheckOption::Local, 3),
        _ => (CheckOption::Cascaded, 2),
    };
    if !word(with).is_some_and(|t| is(t, "WITH")) {
        return None;
    }
    spanned.truncate(at[with]);
    Some(check)
}

/// The column of `SHOW COUNT(*) WARNINGS|ERRORS`, MariaDB's `SELECT
/// @@session.warning_count` (so its prepare describes it, where a prepared
/// `SHOW WARNINGS` describes no columns).
pub fn show_count_column(errors: bool) -> ColumnMeta {
    let name = if errors {
        "@@session.error_count"
    } else {
        "@@session.warning_count"
    };
    ColumnMeta::expr(name, ColumnType::LongLong, charset::BINARY, 21)
}

fn show_warnings(
    conn: &mut Conn<'_>,
    errors: bool,
    count: bool,
    limit: Option<(u64, u64)>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    // SHOW WARNINGS must not clear what it shows: take a copy before the
    // dispatch's start_statement of a later statement.
    let notes: Vec<Note> = conn
        .session
        .notes()
        .iter()
        .filter(|n| !errors || n.level == "Error")
        .cloned()
        .collect();
    if count {
        // The count is of every note: `SHOW COUNT(*)` takes no LIMIT, and
        // counts the warnings past `max_error_count` too (@@warning_count).
        let columns = [show_count_column(errors)];
        let n = if errors {
            notes.len() as i64
        } else {
            i64::from(conn.session.listed_count())
        };
        let rows = vec![vec![SqlValue::Int(n)]];
        send_rows(sink, &columns, rows, more)?;
        return Ok(Answered::Done);
    }
    let columns = [
        ColumnMeta::expr(
            "Level",
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            28,
        ),
        ColumnMeta::expr("Code", ColumnType::Long, charset::BINARY, 4),
        ColumnMeta::expr(
            "Message",
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            2048,
        ),
    ];
    let (skip, take) = limit.unwrap_or((0, u64::MAX));
    let rows = notes
        .into_iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(take).unwrap_or(usize::MAX))
        .map(|n| {
            vec![
                SqlValue::Bytes(n.level.as_bytes().to_vec()),
                SqlValue::Int(i64::from(n.code)),
                SqlValue::Bytes(n.message.into_bytes()),
            ]
        })
        .collect();
    send_rows(sink, &columns, rows, more)?;
    Ok(Answered::Done)
}

/// 1064 for a parser error over `sql` (the whole query text): the
/// parser's message ends with "at Line: l, Column: c" (1-based, in the
/// text it tokenized), from which the quoted rest of the text starts; at
/// the end of the text the quote is empty, as MySQL's.
pub(super) fn syntax_error(sql: &str, message: &str) -> SqlError {
    let detail = message
        .trim_start_matches("sql parser error: ")
        .split(" at Line: ")
        .next()
        .unwrap_or(message)
        .to_owned();
    let position = message.rsplit_once(" at Line: ").and_then(|(_, at)| {
        let (line, column) = at.split_once(", Column: ")?;
        Some((
            line.trim().parse::<usize>().ok()?,
            column.trim().parse::<usize>().ok()?,
        ))
    });
    let Some((line, column)) = position.filter(|(l, c)| *l >= 1 && *c >= 1) else {
        return SqlError::syntax_near("", 1, detail);
    };
    let offset: usize = sql
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum::<usize>()
        + sql
            .split_inclusive('\n')
            .nth(line - 1)
            .map_or(0, |l| l.chars().take(column - 1).map(char::len_utf8).sum());
    let near = sql.get(offset.min(sql.len())..).unwrap_or("");
    SqlError::syntax_near(near.trim_end_matches([';', ' ', '\n']), line as u64, detail)
}

/// Whether the statement reads and writes no table (a SELECT without
/// one, SET, a transaction's statements, USE), so that it leaves the last
/// statement's warnings listed ([`SessionState::start_statement_of`]).
/// A subquery's table counts, as a SHOW's does (MariaDB's read
/// `information_schema`), and so does a `JSON_TABLE`, as in MariaDB.
pub fn uses_no_table(statement: &Stmt) -> bool {
    use sqlparser::ast::Statement as S;
    let s = match statement {
        Stmt::Sql(s) | Stmt::Extra(Extra::Do(s)) => s,
        _ => return false,
    };
    let kind = matches!(
        &**s,
        S::Query(_)
            | S::Set(_)
            | S::StartTransaction { .. }
            | S::Commit { .. }
            | S::Rollback { .. }
            | S::Use(_)
            | S::Savepoint { .. }
            | S::ReleaseSavepoint { .. }
    );
    /// Stops at the first `JSON_TABLE`.
    struct TableFunction;
    impl sqlparser::ast::Visitor for TableFunction {
        type Break = ();
        fn pre_visit_table_factor(
            &mut self,
            f: &sqlparser::ast::TableFactor,
        ) -> std::ops::ControlFlow<()> {
            match f {
                sqlparser::ast::TableFactor::JsonTable { .. } => std::ops::ControlFlow::Break(()),
                _ => std::ops::ControlFlow::Continue(()),
            }
        }
    }
    use sqlparser::ast::Visit as _;
    kind && sqlparser::ast::visit_relations(&**s, |_| std::ops::ControlFlow::Break(()))
        .is_continue()
        && s.visit(&mut TableFunction).is_continue()
}

/// Whether the statement has IGNORE, or is a DO ([`SessionState::ignoring`]).
pub fn ignores_errors(statement: &Stmt) -> bool {
    use sqlparser::ast::Statement as S;
    let Stmt::Sql(s) = statement else {
        // A DO's subquery of two rows is NULL with 1242 (`select::run_do`).
        return matches!(statement, Stmt::Extra(Extra::Do(_)));
    };
    match &**s {
        S::Insert(ins) => ins.ignore,
        S::Update(up) => up.or == Some(sqlparser::ast::SqliteOnConflict::Ignore),
        S::Delete(del) => delete_ignore(del),
        _ => false,
    }
}

/// Whether a statement keeps the last statement's warnings (MySQL: `SHOW
/// WARNINGS` and `SHOW ERRORS` do not reset them).
pub fn keeps_warnings(statement: &Stmt) -> bool {
    matches!(statement, Stmt::Extra(Extra::ShowWarnings { .. }))
}

/// The value of `@@name` (`global`: `@@global.name`).
pub fn variable(conn: &Conn<'_>, name: &str, global: bool) -> SqlResult<SqlValue> {
    let name = name.to_ascii_lowercase();
    let name = name.as_str();
    match name {
        "warning_count" | "error_count" => {
            let n = if name == "error_count" {
                conn.session
                    .notes()
                    .iter()
                    .filter(|n| n.level == "Error")
                    .count() as i64
            } else {
                i64::from(conn.session.listed_count())
            };
            return Ok(SqlValue::Int(n));
        }
        "last_insert_id" | "identity" => {
            let id = conn.session.last_insert_id.get();
            return Ok(SqlValue::UInt(id));
        }
        "hostname" => return Ok(SqlValue::Bytes(hostname().into_bytes())),
        _ => {}
    }
    let Some(sys) = sys_var(name) else {
        return Err(SqlError::new(
            codes::UNKNOWN_SYSTEM_VARIABLE,
            format!("Unknown system variable '{name}'"),
        ));
    };
    let text = if global || sys.scope == Scope::Global {
        conn.engine
            .globals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .unwrap_or(sys.default)
            .to_owned()
    } else if name == "autocommit" {
        if conn.session.autocommit { "ON" } else { "OFF" }.to_owned()
    } else {
        conn.session
            .vars
            .get(name)
            .unwrap_or(sys.default)
            .to_owned()
    };
    Ok(match sys.kind {
        Kind::Bool => SqlValue::Int(i64::from(text == "ON")),
        Kind::Int { .. } => text
            .parse::<u64>()
            .map(SqlValue::UInt)
            .unwrap_or(SqlValue::Bytes(text.into_bytes())),
        Kind::Text => SqlValue::Bytes(text.into_bytes()),
        // Shown with its six decimals, as MySQL shows it.
        Kind::Seconds => SqlValue::Decimal(text),
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// A constant of a `SET` right-hand side: a literal, `ON`/`OFF`/`DEFAULT`
/// or another bare word, a signed number, or a user variable.
fn set_value(conn: &mut Conn<'_>, expr: &Expr) -> SqlResult<Option<String>> {
    Ok(Some(match expr {
        Expr::Value(v) => match &v.value {
            AstValue::Number(n, _) => n.clone(),
            AstValue::SingleQuotedString(s) | AstValue::DoubleQuotedString(s) => s.clone(),
            AstValue::Boolean(b) => if *b { "1" } else { "0" }.to_owned(),
            AstValue::Null => return Ok(None),
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the value {other} in SET"
                )))
            }
        },
        Expr::Identifier(ident) if ident.value.eq_ignore_ascii_case("DEFAULT") => return Ok(None),
        Expr::Identifier(ident)
            if ident.value.starts_with('@') && !ident.value.starts_with("@@") =>
        {
            match conn
                .session
                .user_vars
                .get(&ident.value[1..].to_ascii_lowercase())
            {
                Some(SqlValue::Int(i)) => i.to_string(),
                Some(SqlValue::UInt(u)) => u.to_string(),
                Some(SqlValue::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(SqlValue::Double(d)) => d.to_string(),
                Some(SqlValue::Decimal(d)) => d.clone(),
                _ => return Ok(None),
            }
        }
        Expr::Identifier(ident) => ident.value.clone(),
        Expr::UnaryOp { op, expr } if op.to_string() == "-" => match set_value(conn, expr)? {
            Some(v) => format!("-{v}"),
            None => return Err(SqlError::unsupported("SET to -NULL")),
        },
        // An expression (MariaDB Connector/J's `sql_mode =
        // CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')`): its value.
        other => match super::exec::eval_constant(conn, other, false)? {
            SqlValue::Null => return Ok(None),
            SqlValue::Int(i) => i.to_string(),
            SqlValue::UInt(u) => u.to_string(),
            SqlValue::Double(d) => d.to_string(),
            SqlValue::Decimal(d) => d,
            SqlValue::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
            value => {
                return Err(SqlError::unsupported(format_args!(
                    "the value {value:?} of `{other}` in SET of a system variable"
                )))
            }
        },
    }))
}

/// The only `div_precision_increment` Skarv computes with.
const DIV_PRECISION_INCREMENT: i128 = super::expr::value::DIV_PRECISION_INCREMENT_DIGITS as i128;

/// Checks and normalises a value for a system variable: ON/OFF for
/// booleans, a number brought within bounds (true: it was outside them,
/// which MariaDB warns of with 1292), MySQL's error otherwise (1231,
/// 1232).
fn normalise(sys: &SysVar, value: Option<String>) -> SqlResult<(String, bool)> {
    let Some(value) = value else {
        return Ok((sys.default.to_owned(), false));
    };
    let bad = || {
        SqlError::new(
            codes::WRONG_VALUE_FOR_VAR,
            format!(
                "Variable '{}' can't be set to the value of '{value}'",
                sys.name
            ),
        )
    };
    match sys.kind {
        Kind::Bool => match value.to_ascii_uppercase().as_str() {
            "1" | "ON" | "TRUE" => Ok(("ON".to_owned(), false)),
            "0" | "OFF" | "FALSE" => Ok(("OFF".to_owned(), false)),
            _ => Err(bad()),
        },
        Kind::Int { min, max } => {
            let n: i128 = value.parse().map_err(|_| {
                SqlError::new(
                    codes::WRONG_TYPE_FOR_VAR,
                    format!("Incorrect argument type to variable '{}'", sys.name),
                )
            })?;
            // Out of range: the nearest bound, as MariaDB's (with 1292).
            let clamped = n.clamp(i128::from(min), i128::from(max));
            if sys.name == "div_precision_increment" && clamped != DIV_PRECISION_INCREMENT {
                // Not silently ignored: the planner types quotients with
                // the default's digits (`DIV_PRECISION_INCREMENT_DIGITS`).
                return Err(SqlError::new(
                    codes::WRONG_VALUE_FOR_VAR,
                    format!(
                        "Variable 'div_precision_increment' can't be set to the value of \
                         '{value}': Skarv's decimal division keeps \
                         {DIV_PRECISION_INCREMENT} digits (the default) only"
                    ),
                ));
            }
            Ok((clamped.to_string(), clamped != n))
        }
        Kind::Text => Ok((value, false)),
        Kind::Seconds => super::status::seconds_value(sys.name, &value),
    }
}

/// `SET …`.
pub fn set(conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    let Statement::Set(set) = statement else {
        return Err(SqlError::unsupported(format_args!("`{statement}`")));
    };
    match set {
        Set::SingleAssignment {
            scope,
            variable,
            values,
            ..
        } => {
            let name = variable.to_string();
            let [value] = values.as_slice() else {
                return Err(SqlError::syntax(format_args!("near '{set}'")));
            };
            assign(conn, scope.as_ref(), &name, value)?;
        }
        Set::MultipleAssignments { assignments } => {
            for a in assignments {
                assign(conn, a.scope.as_ref(), &a.name.to_string(), &a.value)?;
            }
        }
        Set::SetNames {
            charset_name,
            collation_name,
        } => {
            let charset = charset_name.value.to_ascii_lowercase();
            check_charset(&charset)?;
            let collation = match collation_name {
                Some(c) => c.to_ascii_lowercase(),
                None => "utf8mb4_general_ci".to_owned(),
            };
            for name in [
                "character_set_client",
                "character_set_connection",
                "character_set_results",
            ] {
                conn.session.vars.set(name, charset.clone());
                conn.session.track_variable(name, &charset);
            }
            conn.session.vars.set("collation_connection", collation);
        }
        Set::SetNamesDefault {} => {}
        Set::SetTransaction { modes, session, .. } => {
            // `SET SESSION TRANSACTION …` (Connector/J's setReadOnly) sets
            // the session's access mode; `SET TRANSACTION …` that of the
            // next transaction only.
            let session_scope = *session;
            if let Some(read_only) = super::txn::access_mode(modes) {
                if session_scope {
                    // It also ends a `SET TRANSACTION`'s, as MariaDB's.
                    conn.tx.next_read_only = None;
                    let value = if read_only { "ON" } else { "OFF" };
                    conn.session.vars.set("transaction_read_only", value.into());
                    conn.session.vars.set("tx_read_only", value.into());
                } else if super::txn::transaction_open(conn) {
                    return Err(SqlError::new(
                        codes::CANT_CHANGE_TX_CHARACTERISTICS,
                        "Transaction characteristics can't be changed while a transaction is \
                         in progress",
                    ));
                } else {
                    conn.tx.next_read_only = Some(read_only);
                }
            }
            for mode in modes {
                let spelled = mode.to_string().to_ascii_uppercase();
                if spelled.contains("ISOLATION LEVEL") && !spelled.contains("READ COMMITTED") {
                    conn.session.warn(
                        codes::UNKNOWN,
                        format!(
                            "{spelled} is not supported by Skarv: transactions are READ COMMITTED \
                             (as NDB's)"
                        ),
                    );
                }
            }
        }
        Set::SetTimeZone { value, .. } => {
            let value = set_value(conn, value)?;
            let zone = check_time_zone(value)?;
            conn.session.track_variable("time_zone", &zone);
            conn.session.vars.set("time_zone", zone);
        }
        other => return Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
    Ok(Answered::Ok(OkInfo::default()))
}

fn check_charset(charset: &str) -> SqlResult<()> {
    match charset {
        "utf8mb4" | "utf8" | "utf8mb3" | "binary" | "ascii" | "latin1" => Ok(()),
        other => Err(SqlError::new(
            codes::UNKNOWN_CHARACTER_SET,
            format!("Unknown character set: '{other}'"),
        )),
    }
}

/// Collation ids of latin1, as a handshake names them.
const LATIN1_COLLATION_IDS: [u8; 8] = [5, 8, 15, 31, 47, 48, 49, 94];

/// The handshake's character set: a latin1 client gets latin1
/// `character_set_client`/`_connection`/`_results` (MySQL's `SET NAMES`);
/// others keep the utf8mb4 defaults.
pub fn client_collation(conn: &mut Conn<'_>, collation: u8) {
    if !LATIN1_COLLATION_IDS.contains(&collation) {
        return;
    }
    let vars = &mut conn.session.vars;
    for name in [
        "character_set_client",
        "character_set_connection",
        "character_set_results",
    ] {
        vars.set(name, "latin1".to_owned());
    }
    vars.set("collation_connection", "latin1_swedish_ci".to_owned());
}

/// `sort_buffer_size` of the session, in bytes.
pub fn sort_buffer_bytes(conn: &Conn<'_>) -> usize {
    conn.session
        .vars
        .get("sort_buffer_size")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(2 << 20, |v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// When a SELECT starting now must stop: the earlier of MySQL's
/// `max_execution_time` (ms from now; MySQL applies it to read-only
/// SELECTs, which is where the caller asks) and MariaDB's
/// `max_statement_time` ([`statement_deadline`]).
pub fn execution_deadline(conn: &Conn<'_>) -> Option<Deadline> {
    let ms = conn.session.vars.hot().max_execution_time_ms;
    let select = (ms > 0).then(|| Deadline {
        at: Instant::now() + Duration::from_millis(ms),
        limit: TimeLimit::ExecutionTime,
    });
    match (select, statement_deadline(conn)) {
        (Some(a), Some(b)) => Some(if a.at <= b.at { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// When the running statement must stop by MariaDB's
/// `max_statement_time` (seconds from the statement's start, 0: never),
/// for any statement: 1969.
pub fn statement_deadline(conn: &Conn<'_>) -> Option<Deadline> {
    let us = conn.session.vars.hot().max_statement_time_us;
    (us > 0).then(|| Deadline {
        at: conn.statement_started + Duration::from_micros(us),
        limit: TimeLimit::StatementTime,
    })
}

/// The session's time zone in seconds east of UTC. `SYSTEM` is the SQL
/// node's zone, which `system_time_zone` reports as UTC.
pub fn time_zone_secs(conn: &Conn<'_>) -> i64 {
    conn.session.vars.hot().time_zone_secs
}

/// `±HH:MM` in seconds east of UTC (None for a name or a bad offset).
pub fn offset_secs(zone: &str) -> Option<i64> {
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let h: i64 = h.parse().ok()?;
    let m: i64 = m.parse().ok()?;
    if m >= 60 || h * 60 + m > TIME_ZONE_OFFSET_MAX_MINUTES {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

/// The farthest a `±HH:MM` zone may be from UTC, in minutes (MySQL's
/// 14:00; MariaDB refuses -13:00 past 12:59 but accepts it here too).
pub const TIME_ZONE_OFFSET_MAX_MINUTES: i64 = 14 * 60;

/// `SYSTEM`, `UTC` or an offset `±HH:MM`; named zones need tz tables the
/// SQL node does not have (1298, as MySQL without them).
fn check_time_zone(value: Option<String>) -> SqlResult<String> {
    let value = value.unwrap_or_else(|| "SYSTEM".to_owned());
    let upper = value.to_ascii_uppercase();
    if upper == "SYSTEM" || upper == "UTC" {
        return Ok(upper);
    }
    if offset_secs(&value).is_some() {
        Ok(value)
    } else {
        Err(SqlError::new(
            1298,
            format!("Unknown or incorrect time zone: '{value}'"),
        ))
    }
}

fn assign(
    conn: &mut Conn<'_>,
    scope: Option<&ContextModifier>,
    name: &str,
    value: &Expr,
) -> SqlResult<()> {
    // `@@global.x`, `@@session.x`, `@@x`, `@x`, `GLOBAL x`, `x`.
    let mut global = matches!(scope, Some(ContextModifier::Global));
    let lower = name.to_ascii_lowercase();
    let name: &str = if let Some(rest) = lower.strip_prefix("@@global.") {
        global = true;
        rest
    } else if let Some(rest) = lower
        .strip_prefix("@@session.")
        .or_else(|| lower.strip_prefix("@@local."))
        .or_else(|| lower.strip_prefix("@@"))
    {
        rest
    } else if let Some(user_var) = lower.strip_prefix('@') {
        let value = super::exec::eval_constant(conn, value, true)?;
        conn.session.user_vars.insert(user_var.to_owned(), value);
        return Ok(());
    } else {
        &lower
    };
    let Some(sys) = sys_var(name) else {
        return Err(SqlError::new(
            codes::UNKNOWN_SYSTEM_VARIABLE,
            format!("Unknown system variable '{name}'"),
        ));
    };
    match (sys.scope, global) {
        (Scope::ReadOnly, _) => {
            return Err(SqlError::new(
                codes::INCORRECT_GLOBAL_LOCAL_VAR,
                format!("Variable '{name}' is a read only variable"),
            ))
        }
        (Scope::Global, false) => {
            return Err(SqlError::new(
                codes::GLOBAL_VARIABLE,
                format!("Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"),
            ))
        }
        _ => {}
    }
    let value = set_value(conn, value)?;
    let value = if name == "time_zone" {
        check_time_zone(value)?
    } else if name == "sql_mode" {
        // Modes as MySQL keeps them: upper case, each once (drivers append
        // one to `@@sql_mode` whether or not it is there).
        let mut modes: Vec<String> = Vec::new();
        for mode in normalise(sys, value)?.0.split(',') {
            let mode = mode.trim().to_ascii_uppercase();
            if !mode.is_empty() && !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        modes.join(",")
    } else {
        // The value as MariaDB shows it: a number in seconds as the
        // double it read (`1e10` as 10000000000).
        let given = match (sys.kind, value.as_deref().map(str::parse::<f64>)) {
            (Kind::Seconds, Some(Ok(secs))) => secs.to_string(),
            _ => value.clone().unwrap_or_default(),
        };
        let (value, clamped) = normalise(sys, value)?;
        if clamped {
            conn.session.warn(
                codes::TRUNCATED_WRONG_VALUE,
                format!("Truncated incorrect {} value: '{given}'", sys.name),
            );
        }
        value
    };
    if name.starts_with("character_set_") && name != "character_set_system" {
        check_charset(&value.to_ascii_lowercase())?;
    }
    if name == "transaction_isolation" || name == "tx_isolation" {
        let level = value.to_ascii_uppercase().replace(' ', "-");
        if level != "READ-COMMITTED" {
            conn.session.warn(
                codes::UNKNOWN,
                format!(
                    "{level} is not supported by Skarv: transactions are READ-COMMITTED (as NDB's)"
                ),
            );
        }
    }
    // The slow log's variables take effect at once (or are refused).
    super::status::variable_set(conn, name, &value, global)?;
    if global {
        conn.engine
            .globals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(name, value);
        return Ok(());
    }
    conn.session.track_variable(name, &value);
    if name == "autocommit" {
        return super::txn::set_autocommit(conn, value == "ON");
    }
    if name == "transaction_read_only" || name == "tx_read_only" {
        // One setting under MySQL 8's name and MariaDB's.
        conn.session
            .vars
            .set("transaction_read_only", value.clone());
        conn.session.vars.set("tx_read_only", value);
        return Ok(());
    }
    if name == "wait_timeout" {
        // What the idle reaper reads (`engine::reap_idle`).
        let seconds = super::seconds_of(Some(&value));
        conn.info.idle_limit_s.store(seconds, Ordering::Relaxed);
    }
    conn.session.vars.set(name, value);
    Ok(())
}

/// `USE db`.
pub fn use_statement(conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    let Statement::Use(use_) = statement else {
        return Err(SqlError::unsupported(format_args!("`{statement}`")));
    };
    let name = match use_ {
        sqlparser::ast::Use::Object(name) => name.to_string(),
        other => return Err(SqlError::unsupported(format_args!("`USE {other}`"))),
    };
    let name = name.trim_matches('`').to_owned();
    use_database(conn, &name)?;
    Ok(Answered::Ok(OkInfo::default()))
}

/// `COM_INIT_DB` and `USE`: 1049 for an unknown database.
pub fn use_database(conn: &mut Conn<'_>, database: &str) -> SqlResult<()> {
    if !super::catalog::database_exists(conn, database)? {
        return Err(SqlError::new(
            codes::BAD_DB,
            format!("Unknown database '{database}'"),
        ));
    }
    super::users::check_database_access(conn, database)?;
    conn.session.database = Some(database.to_owned());
    conn.session.track_schema(database);
    conn.info
        .state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .database = Some(database.to_owned());
    Ok(())
}

/// `COM_RESET_CONNECTION`'s session part: variables back to the globals',
/// user variables and warnings gone; user and database kept.
pub fn reset(conn: &mut Conn<'_>) {
    let globals = conn
        .engine
        .globals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .share();
    conn.status.reset(&globals);
    let database = conn.session.database.take();
    let user = std::mem::take(&mut conn.session.user);
    let host = std::mem::take(&mut conn.session.host);
    conn.session = SessionState::new(globals);
    conn.session.database = database;
    conn.session.set_user(user, host);
}

fn like_filter(filter: &Option<ShowStatementFilter>) -> SqlResult<Option<String>> {
    match filter {
        None => Ok(None),
        Some(ShowStatementFilter::Like(pattern)) | Some(ShowStatementFilter::ILike(pattern)) => {
            Ok(Some(pattern.clone()))
        }
        // `show::with_where` filters the rows.
        Some(ShowStatementFilter::Where(_)) => Ok(None),
        Some(other) => Err(SqlError::unsupported(format_args!("SHOW … {other}"))),
    }
}

/// MySQL's LIKE for SHOW patterns: `%` any run, `_` one character,
/// case-insensitive, `\` escapes.
pub fn like_matches(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('%', rest)) => (0..=t.len()).any(|skip| go(rest, &t[skip..])),
            Some(('_', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some(('\\', rest)) if !rest.is_empty() => {
                !t.is_empty()
                    && t[0].to_lowercase().eq(rest[0].to_lowercase())
                    && go(&rest[1..], &t[1..])
            }
            Some((c, rest)) => {
                !t.is_empty() && t[0].to_lowercase().eq(c.to_lowercase()) && go(rest, &t[1..])
            }
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

fn name_value_columns() -> [ColumnMeta; 2] {
    [
        ColumnMeta::expr(
            "Variable_name",
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            256,
        ),
        ColumnMeta::expr(
            "Value",
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            4096,
        ),
    ]
}

/// `SHOW [GLOBAL|SESSION] VARIABLES [LIKE 'p']`.
pub fn show_variables(
    conn: &mut Conn<'_>,
    filter: &Option<ShowStatementFilter>,
    global: bool,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let pattern = like_filter(filter)?;
    let rows = variable_rows(conn, global)
        .into_iter()
        .filter(|(name, _)| pattern.as_deref().is_none_or(|p| like_matches(p, name)))
        .map(|(name, value)| {
            vec![
                SqlValue::Bytes(name.as_bytes().to_vec()),
                SqlValue::Bytes(value.into_bytes()),
            ]
        })
        .collect();
    send_rows(sink, &name_value_columns(), rows, more)?;
    Ok(Answered::Done)
}

/// Every system variable and its value (the session's, or `global`),
/// in name order: `SHOW VARIABLES` and `information_schema`'s
/// `SESSION_VARIABLES`/`GLOBAL_VARIABLES`.
pub fn variable_rows(conn: &Conn<'_>, global: bool) -> Vec<(&'static str, String)> {
    let globals = conn
        .engine
        .globals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .share();
    let mut rows = Vec::with_capacity(SYSTEM_VARIABLES.len());
    for sys in SYSTEM_VARIABLES {
        let value = if sys.name == "autocommit" && !global {
            if conn.session.autocommit { "ON" } else { "OFF" }.to_owned()
        } else if global || sys.scope == Scope::Global {
            globals.get(sys.name).unwrap_or(sys.default).to_owned()
        } else {
            conn.session
                .vars
                .get(sys.name)
                .unwrap_or(sys.default)
                .to_owned()
        };
        rows.push((sys.name, value));
    }
    rows
}

/// `SHOW [GLOBAL|SESSION] STATUS [LIKE 'p']` (`engine::status`).
pub fn show_status(
    conn: &mut Conn<'_>,
    filter: &Option<ShowStatementFilter>,
    global: bool,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let pattern = like_filter(filter)?;
    let rows = super::status::rows(conn, global)
        .into_iter()
        .filter(|(name, _)| pattern.as_deref().is_none_or(|p| like_matches(p, name)))
        .map(|(name, value)| {
            vec![
                SqlValue::Bytes(name.into_bytes()),
                SqlValue::Bytes(value.into_bytes()),
            ]
        })
        .collect();
    send_rows(sink, &name_value_columns(), rows, more)?;
    Ok(Answered::Done)
}

/// `SHOW [FULL] PROCESSLIST`.
pub fn show_processlist(
    conn: &mut Conn<'_>,
    full: bool,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let (columns, rows) = processlist(conn, full, false);
    send_rows(sink, &columns, rows, more)?;
    Ok(Answered::Done)
}

/// The columns of [`processlist`].
pub fn processlist_columns(full: bool, upper: bool) -> Vec<ColumnMeta> {
    let full = full || upper;
    let name = |n: &str| {
        if upper {
            n.to_ascii_uppercase()
        } else {
            n.to_owned()
        }
    };
    let text = |n: &str, length: u32| {
        ColumnMeta::expr(
            name(n),
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            length,
        )
    };
    vec![
        ColumnMeta::expr(name("Id"), ColumnType::LongLong, charset::BINARY, 21),
        text("User", 128),
        text("Host", 261),
        text("db", 256),
        text("Command", 64),
        ColumnMeta::expr(name("Time"), ColumnType::Long, charset::BINARY, 7),
        text("State", 120),
        text("Info", if full { 400_000 } else { 400 }),
    ]
}

/// Characters of a statement `SHOW FULL PROCESSLIST` shows.
pub const PROCESSLIST_INFO_CHARS_MAX: usize = 1024;
/// Characters of a statement `SHOW PROCESSLIST` shows (MySQL's 100).
pub const PROCESSLIST_INFO_CHARS_SHORT: usize = 100;

/// The connections of this SQL node, for `SHOW [FULL] PROCESSLIST`
/// (`upper`: false) and `information_schema.PROCESSLIST` (`upper`: its
/// uppercase column names, the whole statement text as FULL gives).
pub fn processlist(
    conn: &Conn<'_>,
    full: bool,
    upper: bool,
) -> (Vec<ColumnMeta>, Vec<Vec<SqlValue>>) {
    let columns = processlist_columns(full, upper);
    let full = full || upper;
    let mut list = conn.engine.connection_list();
    list.sort_by_key(|c| c.id);
    let bytes = |s: &str| SqlValue::Bytes(s.as_bytes().to_vec());
    let rows = list
        .iter()
        .map(|c| {
            let state = c.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
            // FULL (and information_schema) shows the first 1,024
            // characters, as kept before; otherwise the first 100.
            let shown = if full {
                PROCESSLIST_INFO_CHARS_MAX
            } else {
                PROCESSLIST_INFO_CHARS_SHORT
            };
            let info = state
                .info
                .map(|i| i.chars().take(shown).collect::<String>());
            vec![
                SqlValue::Int(i64::from(c.id)),
                bytes(&state.user),
                bytes(&c.host.to_string()),
                state.database.as_deref().map_or(SqlValue::Null, bytes),
                bytes(state.command),
                SqlValue::Int(state.since.map_or(0, |s| s.elapsed().as_secs() as i64)),
                bytes(""),
                info.as_deref().map_or(SqlValue::Null, bytes),
            ]
        })
        .collect();
    (columns, rows)
}

/// `KILL [CONNECTION|QUERY] id`: 1094 for an unknown id. A connection may
/// kill its own statements and connection; others' need the SUPER-like
/// privilege (`users::may_kill`).
pub fn kill(conn: &mut Conn<'_>, id: u64, query_only: bool) -> SqlResult<Answered> {
    let target = u32::try_from(id).ok().and_then(|id| {
        conn.engine
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    });
    let Some(target) = target else {
        return Err(SqlError::new(
            codes::NO_SUCH_THREAD,
            format!("Unknown thread id: {id}"),
        ));
    };
    if target.id != conn.info.id {
        let owner = target
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .user
            .clone();
        super::users::may_kill(conn, &owner, id)?;
    }
    if query_only {
        target.query_killed.store(true, Ordering::Relaxed);
    } else {
        target.killed.store(true, Ordering::Relaxed);
        target.query_killed.store(true, Ordering::Relaxed);
        // A connection blocked reading its client's next command ends now.
        target.shut_socket();
    }
    Ok(Answered::Ok(OkInfo::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_modifiers_are_mended() {
        use sqlparser::ast::{SqliteOnConflict, Statement};
        let one = |sql: &str| crate::engine::parse(sql).expect("parses").remove(0);
        for (sql, ignore, tables) in [
            ("DELETE IGNORE FROM t WHERE a = 1", true, 0),
            ("delete low_priority quick ignore from t", true, 0),
            ("DELETE QUICK IGNORE t FROM t", true, 1),
            // A multi-table DELETE's `t.*` is `t`.
            ("DELETE a.*, b.* FROM a JOIN b ON a.id = b.id", false, 2),
            ("DELETE IGNORE b.* FROM a, b", true, 1),
            ("DELETE LOW_PRIORITY FROM t", false, 0),
            ("DELETE QUICK FROM t", false, 0),
            ("DELETE FROM t", false, 0),
            // A user's hint is not IGNORE.
            ("DELETE /*+ IGNORE */ FROM t", false, 0),
        ] {
            let Statement::Delete(del) = one(sql) else {
                panic!("{sql}: not a DELETE");
            };
            assert_eq!(delete_ignore(&del), ignore, "{sql}");
            assert_eq!(del.tables.len(), tables, "{sql}: {:?}", del.tables);
        }
        for (sql, ignore) in [
            ("UPDATE LOW_PRIORITY t SET a = 1", false),
            ("UPDATE LOW_PRIORITY IGNORE t SET a = 1", true),
        ] {
            let Statement::Update(up) = one(sql) else {
                panic!("{sql}: not an UPDATE");
            };
            assert_eq!(up.table.relation.to_string(), "t", "{sql}");
            assert_eq!(up.or == Some(SqliteOnConflict::Ignore), ignore, "{sql}");
        }
    }

    #[test]
    fn the_prefetch_default_is_the_catalogs() {
        let v = sys_var("ndb_autoincrement_prefetch_sz").map(|v| v.default);
        assert_eq!(
            v.and_then(|d| d.parse::<u64>().ok()),
            Some(crate::engine::catalog::AUTO_INCREMENT_PREFETCH)
        );
    }

    #[test]
    fn system_variables_are_sorted_for_the_binary_search() {
        for pair in SYSTEM_VARIABLES.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        assert!(sys_var("autocommit").is_some());
        assert!(sys_var("no_such_variable").is_none());
    }

    #[test]
    fn like_patterns_match_as_mysql_show() {
        assert!(like_matches("auto%", "autocommit"));
        assert!(like_matches("AUTO%", "autocommit"));
        assert!(like_matches("%commit", "autocommit"));
        assert!(like_matches("a_tocommit", "autocommit"));
        assert!(!like_matches("a_commit", "autocommit"));
        assert!(like_matches("sql\\_mode", "sql_mode"));
        assert!(!like_matches("sql\\_mode", "sqlxmode"));
        assert!(like_matches("%", ""));
    }

    #[test]
    fn set_names_among_other_items_is_its_assignments() {
        let text = |sql: &str| {
            let tokens = Tokenizer::new(&MySqlDialect {}, sql)
                .tokenize_with_location()
                .expect("tokenizes");
            names_as_assignments(&tokens)
        };
        assert_eq!(
            text("set autocommit=1, sql_mode = CONCAT(@@sql_mode,',STRICT'), NAMES utf8mb4")
                .as_deref(),
            Some(
                "SET autocommit=1, sql_mode = CONCAT(@@sql_mode,',STRICT'), \
                 character_set_client = 'utf8mb4', character_set_connection = 'utf8mb4', \
                 character_set_results = 'utf8mb4', collation_connection = 'utf8mb4_general_ci'"
            )
        );
        assert_eq!(
            text("SET NAMES 'latin1' COLLATE latin1_bin, @@session.autocommit = 0").as_deref(),
            Some(
                "SET character_set_client = 'latin1', character_set_connection = 'latin1', \
                 character_set_results = 'latin1', collation_connection = 'latin1_bin', \
                 @@session.autocommit = 0"
            )
        );
        assert_eq!(text("SET NAMES utf8mb4"), None, "alone, the parser's");
        assert_eq!(text("SET a = 1, b = 2"), None);
        assert_eq!(text("SET a = 1, NAMES klingon"), None, "the parser's error");
        for sql in [
            "SET autocommit=1, NAMES utf8mb4",
            "SET NAMES utf8mb4 COLLATE utf8mb4_bin, autocommit = 1",
            "set sql_mode=CONCAT(@@sql_mode,',STRICT_TRANS_TABLES'),NAMES utf8mb4",
        ] {
            let stmts = parse_one(sql, false).unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(matches!(&stmts[0], Stmt::Sql(_)), "{sql}");
        }
    }

    fn parse_one(sql: &str, multi: bool) -> SqlResult<Vec<Stmt>> {
        parse_text(sql, multi)?.into_iter().collect()
    }

    #[test]
    fn the_front_end_mends_what_the_parser_does_not_take() {
        let stmts = parse_one("SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE", false).unwrap();
        let Stmt::Sql(s) = &stmts[0] else {
            panic!("parsed")
        };
        assert!(s.to_string().ends_with("FOR SHARE"), "{s}");
        for (sql, printed) in [
            (
                "SELECT a FROM t LOCK IN SHARE MODE NOWAIT",
                "FOR SHARE NOWAIT",
            ),
            (
                "SELECT a FROM t LOCK IN SHARE MODE WAIT 0",
                "FOR SHARE NOWAIT",
            ),
            ("SELECT a FROM t FOR UPDATE WAIT 00", "FOR UPDATE NOWAIT"),
            ("SELECT a FROM t FOR UPDATE wait 5", "FOR UPDATE"),
            (
                "SELECT a FROM t lock in share mode skip locked",
                "FOR SHARE SKIP LOCKED",
            ),
        ] {
            let stmts = parse_one(sql, false).unwrap();
            let Stmt::Sql(s) = &stmts[0] else {
                panic!("parsed")
            };
            assert!(s.to_string().ends_with(printed), "{s}");
        }

        // `MOD` between operands is `%`; as a call, a name or an alias
        // it stays itself.
        for (sql, printed) in [
            (
                "SELECT 7 MOD 3, a mod b, (1) MOD `c`",
                "SELECT 7 % 3, a % b, (1) % `c`",
            ),
            (
                "SELECT MOD(7, 3), a mod FROM t",
                "SELECT MOD(7, 3), a AS mod FROM t",
            ),
        ] {
            let stmts = parse_one(sql, false).unwrap();
            let Stmt::Sql(s) = &stmts[0] else {
                panic!("parsed")
            };
            assert_eq!(s.to_string(), printed);
        }

        let stmts = parse_one(r#"SELECT "a""#, false).unwrap();
        let Stmt::Sql(s) = &stmts[0] else {
            panic!("parsed")
        };
        assert_eq!(s.to_string(), "SELECT 'a'");

        let stmts = parse_one("show warnings", false).unwrap();
        assert!(matches!(
            &stmts[0],
            Stmt::Extra(Extra::ShowWarnings {
                errors: false,
                count: false,
                limit: None
            })
        ));
        let stmts = parse_one("SHOW ERRORS LIMIT 2 OFFSET 1", false).unwrap();
        assert!(matches!(
            &stmts[0],
            Stmt::Extra(Extra::ShowWarnings {
                errors: true,
                limit: Some((1, 2)),
                ..
            })
        ));
        let stmts = parse_one("show warnings limit 3, 4", false).unwrap();
        assert!(matches!(
            &stmts[0],
            Stmt::Extra(Extra::ShowWarnings {
                limit: Some((3, 4)),
                ..
            })
        ));
        for bad in [
            "SHOW WARNINGS LIMIT",
            "SHOW WARNINGS x",
            "SHOW COUNT(1) WARNINGS",
            "SHOW COUNT(*) WARNINGS LIMIT 1",
            "SHOW WARNINGS LIMIT -1",
            "SHOW WARNINGS LIMIT 1,2,3",
        ] {
            let e = parse_one(bad, false).unwrap_err();
            assert_eq!(e.code, codes::PARSE, "{bad}: {e}");
        }
        let stmts = parse_one("SHOW COUNT(*) ERRORS", false).unwrap();
        assert!(matches!(
            &stmts[0],
            Stmt::Extra(Extra::ShowWarnings {
                errors: true,
                count: true,
                limit: None
            })
        ));

        let stmts = parse_one("CREATE USER 'u'@'%' IDENTIFIED BY 'p'", false).unwrap();
        assert!(
            matches!(&stmts[0], Stmt::Extra(Extra::Text { head, .. }) if head == "CREATE USER")
        );

        let stmts = parse_one("CREATE TABLE t (a INT) PARTITION BY KEY(a)", false).unwrap();
        assert!(matches!(&stmts[0], Stmt::Extra(Extra::Catalog(_))));

        assert_eq!(parse_one("SELECT 1; SELECT 2;", true).unwrap().len(), 2);
        assert!(parse_one("SELECT 1; SELECT 2", false).is_err());
        assert_eq!(
            parse_one(" ; ; ", true).unwrap_err().code,
            codes::EMPTY_QUERY
        );
        // Each statement parses on its own: the ones before a bad one run.
        let run = parse_text("SELECT 1; SELEC 2; SELECT 3", true).unwrap();
        assert!(run[0].is_ok() && run[1].is_err() && run[2].is_ok());
        // A semicolon inside a string is not a separator.
        assert_eq!(parse_one("SELECT 'a;b'", false).unwrap().len(), 1);
    }

    #[test]
    fn syntax_errors_quote_the_text_where_the_parser_stopped() {
        let error = |sql: &str| parse_text(sql, true).unwrap().remove(1).unwrap_err();
        let e = error("SELECT 1;\nSELEC 2");
        assert_eq!(e.code, codes::PARSE);
        assert!(
            e.message.contains("near 'SELEC 2' at line 2"),
            "{}",
            e.message
        );
        let e = error("SELECT 1; SELECT * FROM t WHERE");
        assert!(e.message.contains("near '' at line 1"), "{}", e.message);
        // Words after a whole statement are not dropped.
        let e = error("SELECT 1; SELECT * FROM t WHERE id = 1 ORDER");
        assert_eq!(e.code, codes::PARSE);
        assert!(
            e.message.contains("near 'ORDER' at line 1"),
            "{}",
            e.message
        );
        let e = parse_one("SELECT 1 garbage here", false).unwrap_err();
        assert!(e.message.contains("near 'here' at line 1"), "{}", e.message);
        assert!(
            parse_one("SELECT 1;", false).is_ok(),
            "a statement's own `;`"
        );
    }

    #[test]
    fn values_are_checked_and_normalised_per_kind() {
        let ac = sys_var("autocommit").unwrap();
        assert_eq!(normalise(ac, Some("1".into())).unwrap().0, "ON");
        assert_eq!(normalise(ac, Some("off".into())).unwrap().0, "OFF");
        assert_eq!(normalise(ac, None).unwrap().0, "ON");
        assert_eq!(
            normalise(ac, Some("2".into())).unwrap_err().code,
            codes::WRONG_VALUE_FOR_VAR
        );
        let inc = sys_var("auto_increment_increment").unwrap();
        assert_eq!(
            normalise(inc, Some("7".into())).unwrap(),
            ("7".into(), false)
        );
        // Out of range: the nearest bound, as MariaDB's (with 1292).
        assert_eq!(
            normalise(inc, Some("0".into())).unwrap(),
            ("1".into(), true)
        );
        assert_eq!(
            normalise(inc, Some("x".into())).unwrap_err().code,
            codes::WRONG_TYPE_FOR_VAR
        );
        assert_eq!(check_time_zone(Some("+02:00".into())).unwrap(), "+02:00");
        assert!(check_time_zone(Some("Europe/Oslo".into())).is_err());
    }

    /// Statements MySQL clients send, the seeds of the front end's fuzz.
    const CORPUS: &[&str] = &[
        "SELECT c FROM sbtest1 WHERE id = ?",
        "INSERT INTO t (a, b) VALUES (1, 'x'), (2, \"y\") ON DUPLICATE KEY UPDATE b = VALUES(b)",
        "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(10)) ENGINE=ndb PARTITION BY KEY(a)",
        "SELECT * FROM t WHERE a IN (1, 2) LOCK IN SHARE MODE",
        "CREATE USER 'u'@'%' IDENTIFIED BY 'p'; GRANT ALL ON *.* TO u",
        "SET @@session.autocommit = 0, NAMES utf8mb4",
        "SHOW COUNT(*) WARNINGS",
        "SHOW CREATE DATABASE d",
        "ALTER TABLE t ADD COLUMN c INT DEFAULT 5, AUTO_INCREMENT = 7",
        "UPDATE t SET a = a + 1 WHERE b LIKE 'x%' ORDER BY a DESC LIMIT 3",
    ];

    proptest::proptest! {
        /// Whatever the text, the front end answers statements or an
        /// error; it never panics.
        #[test]
        fn the_front_end_never_panics_on_random_text(text in "[ -~\n\t'\"`;()@*]{0,200}") {
            let _ = parse_text(&text, true);
            let _ = parse_text(&text, false);
        }

        /// Statements of the corpus cut, spliced and with bytes replaced.
        #[test]
        fn the_front_end_never_panics_on_mutated_statements(
            seed in 0..CORPUS.len(),
            other in 0..CORPUS.len(),
            cut in 0usize..200,
            at in 0usize..200,
            byte in 32u8..127,
        ) {
            let base = CORPUS[seed].as_bytes();
            let mut text = base[..cut.min(base.len())].to_vec();
            let splice = CORPUS[other].as_bytes();
            text.extend_from_slice(&splice[at.min(splice.len())..]);
            let len = text.len();
            if len > 0 {
                text[at % len] = byte;
            }
            let text = String::from_utf8_lossy(&text);
            let _ = parse_text(&text, true);
            let _ = parse_text(&text, false);
        }
    }

    #[test]
    fn sessions_share_the_globals_and_keep_their_own_sets() {
        let mut globals = Variables::defaults();
        assert_eq!(*globals.hot(), globals.decode_hot());
        assert!(!globals.hot().latin1_results && globals.hot().sql_notes);
        let mut first = globals.share();
        assert!(
            Arc::ptr_eq(&first.base, &globals.base),
            "a session copies no map"
        );
        first.set("character_set_results", "latin1".into());
        first.set("time_zone", "+02:00".into());
        first.set("max_execution_time", "250".into());
        assert!(first.hot().latin1_results);
        assert_eq!(first.hot().time_zone_secs, 7_200);
        assert_eq!(first.hot().max_execution_time_ms, 250);
        assert_eq!(globals.get("character_set_results"), Some("utf8mb4"));
        // SET GLOBAL after a session began: later sessions see it, the
        // earlier one keeps its values.
        globals.set("sql_notes", "OFF".into());
        globals.set("max_execution_time", "9".into());
        let second = globals.share();
        assert!(globals.own.is_empty(), "sharing folds the globals' sets");
        assert!(!second.hot().sql_notes && second.hot().max_execution_time_ms == 9);
        assert!(first.hot().sql_notes && first.flag("sql_notes"));
        assert_eq!(first.get("max_execution_time"), Some("250"));
        assert_eq!(second.get("character_set_results"), Some("utf8mb4"));
        for vars in [&globals, &first, &second] {
            assert_eq!(*vars.hot(), vars.decode_hot());
        }
    }
}

/// A session's `LAST_INSERT_ID()`: the first AUTO_INCREMENT value its
/// last INSERT generated for a row it inserted, or what
/// `LAST_INSERT_ID(expr)` set, and whether `LAST_INSERT_ID(expr)` ran in
/// the write statement running now (MySQL's
/// `arg_of_last_insert_id_function`: that statement's OK packet carries
/// the value then).
#[derive(Debug, Default)]
pub struct LastInsertId {
    value: std::sync::atomic::AtomicU64,
    called: std::sync::atomic::AtomicBool,
}

impl LastInsertId {
    /// `LAST_INSERT_ID()`.
    pub fn get(&self) -> u64 {
        self.value.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The value an INSERT generated for its first row inserted.
    pub fn set(&self, id: u64) {
        self.value.store(id, std::sync::atomic::Ordering::Relaxed);
    }

    /// `LAST_INSERT_ID(expr)`.
    pub fn call(&self, id: u64) {
        self.set(id);
        self.called
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether `LAST_INSERT_ID(expr)` ran since the last call, which
    /// starts a write statement.
    pub fn take_called(&self) -> bool {
        self.called
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }
}
