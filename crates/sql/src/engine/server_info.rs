//! `SHOW` and `information_schema` answers about the server rather than
//! its tables, for the tools that ask on connecting (DBeaver, MySQL
//! Workbench, DataGrip, phpMyAdmin, `mysqldump --routines`, ORMs'
//! introspection):
//! - what Skarv has not (stored routines, triggers, events, a binary log,
//!   replicas, profiling): empty answers with MySQL's columns, so a tool
//!   finds nothing rather than an error; `SHOW CREATE` of such an object
//!   is MySQL's "does not exist" error, `SHOW BINARY LOGS` its 1381;
//! - what it has: the engines, character sets, collations, plugins and
//!   privileges it knows, the accounts' privileges
//!   (`USER_PRIVILEGES`, `SCHEMA_PRIVILEGES`), and each table's partitions
//!   with their rows and memory (`PARTITIONS`, from `ndbinfo.table_fragments`).
//!
//! Layouts are MariaDB 10.11's (the project's reference).

use sqlparser::ast::Ident;

use super::{Answered, Conn};
use crate::backend::ResultSink;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta, ColumnType, SqlValue};

/// One column of an answer, as MariaDB types it.
#[derive(Clone, Copy)]
enum Col {
    /// VARCHAR of this many characters.
    Text(&'static str, u32),
    /// LONGTEXT.
    Blob(&'static str),
    /// DATETIME.
    DateTime(&'static str),
    /// BIGINT of this display width.
    BigInt(&'static str, u32),
    /// INT of this display width.
    Int(&'static str, u32),
    /// DOUBLE.
    Double(&'static str),
    /// DECIMAL.
    Decimal(&'static str),
}

fn metas(spec: &[Col]) -> Vec<ColumnMeta> {
    spec.iter()
        .map(|c| match *c {
            Col::Text(n, chars) => ColumnMeta::expr(
                n,
                ColumnType::VarString,
                charset::UTF8MB4_GENERAL_CI,
                chars * 4,
            ),
            Col::Blob(n) => {
                ColumnMeta::expr(n, ColumnType::Blob, charset::UTF8MB4_GENERAL_CI, u32::MAX)
            }
            Col::DateTime(n) => {
                let mut m = ColumnMeta::expr(n, ColumnType::DateTime, charset::BINARY, 19);
                m.flags = flags::BINARY;
                m
            }
            Col::BigInt(n, width) | Col::Int(n, width) => {
                let ty = if matches!(c, Col::BigInt(..)) {
                    ColumnType::LongLong
                } else {
                    ColumnType::Long
                };
                let mut m = ColumnMeta::expr(n, ty, charset::BINARY, width);
                m.flags = flags::NUM;
                m
            }
            Col::Double(n) => {
                let mut m = ColumnMeta::expr(n, ColumnType::Double, charset::BINARY, 8);
                m.flags = flags::NUM;
                m.decimals = 6;
                m
            }
            Col::Decimal(n) => {
                let mut m = ColumnMeta::expr(n, ColumnType::NewDecimal, charset::BINARY, 11);
                m.flags = flags::NUM;
                m.decimals = 6;
                m
            }
        })
        .collect()
}

fn text(s: impl Into<String>) -> SqlValue {
    SqlValue::Bytes(s.into().into_bytes())
}

/// Columns of `SHOW PROCEDURE|FUNCTION STATUS`.
const ROUTINE_STATUS: &[Col] = &[
    Col::Text("Db", 64),
    Col::Text("Name", 64),
    Col::Text("Type", 13),
    Col::Text("Definer", 384),
    Col::DateTime("Modified"),
    Col::DateTime("Created"),
    Col::Text("Security_type", 7),
    Col::Blob("Comment"),
    Col::Text("character_set_client", 32),
    Col::Text("collation_connection", 64),
    Col::Text("Database Collation", 64),
];

/// Columns of `SHOW TRIGGERS`.
const TRIGGERS: &[Col] = &[
    Col::Text("Trigger", 64),
    Col::Text("Event", 6),
    Col::Text("Table", 64),
    Col::Blob("Statement"),
    Col::Text("Timing", 6),
    Col::DateTime("Created"),
    Col::Text("sql_mode", 8192),
    Col::Text("Definer", 384),
    Col::Text("character_set_client", 32),
    Col::Text("collation_connection", 64),
    Col::Text("Database Collation", 64),
];

/// Columns of `SHOW EVENTS`.
const EVENTS: &[Col] = &[
    Col::Text("Db", 64),
    Col::Text("Name", 64),
    Col::Text("Definer", 384),
    Col::Text("Time zone", 64),
    Col::Text("Type", 9),
    Col::DateTime("Execute at"),
    Col::Text("Interval value", 256),
    Col::Text("Interval field", 18),
    Col::DateTime("Starts"),
    Col::DateTime("Ends"),
    Col::Text("Status", 18),
    Col::BigInt("Originator", 10),
    Col::Text("character_set_client", 32),
    Col::Text("collation_connection", 64),
    Col::Text("Database Collation", 64),
];

/// Columns of `SHOW SLAVE|REPLICA STATUS` (MariaDB's).
const REPLICA_STATUS: &[Col] = &[
    Col::Text("Slave_IO_State", 30),
    Col::Text("Master_Host", 766),
    Col::Text("Master_User", 385),
    Col::Int("Master_Port", 7),
    Col::Int("Connect_Retry", 10),
    Col::Text("Master_Log_File", 512),
    Col::BigInt("Read_Master_Log_Pos", 10),
    Col::Text("Relay_Log_File", 512),
    Col::BigInt("Relay_Log_Pos", 10),
    Col::Text("Relay_Master_Log_File", 512),
    Col::Text("Slave_IO_Running", 3),
    Col::Text("Slave_SQL_Running", 3),
    Col::Text("Replicate_Do_DB", 20),
    Col::Text("Replicate_Ignore_DB", 20),
    Col::Text("Replicate_Do_Table", 20),
    Col::Text("Replicate_Ignore_Table", 23),
    Col::Text("Replicate_Wild_Do_Table", 24),
    Col::Text("Replicate_Wild_Ignore_Table", 28),
    Col::Int("Last_Errno", 4),
    Col::Text("Last_Error", 20),
    Col::Int("Skip_Counter", 10),
    Col::BigInt("Exec_Master_Log_Pos", 10),
    Col::BigInt("Relay_Log_Space", 10),
    Col::Text("Until_Condition", 6),
    Col::Text("Until_Log_File", 512),
    Col::BigInt("Until_Log_Pos", 10),
    Col::Text("Master_SSL_Allowed", 7),
    Col::Text("Master_SSL_CA_File", 512),
    Col::Text("Master_SSL_CA_Path", 512),
    Col::Text("Master_SSL_Cert", 512),
    Col::Text("Master_SSL_Cipher", 512),
    Col::Text("Master_SSL_Key", 512),
    Col::BigInt("Seconds_Behind_Master", 10),
    Col::Text("Master_SSL_Verify_Server_Cert", 3),
    Col::Int("Last_IO_Errno", 4),
    Col::Text("Last_IO_Error", 20),
    Col::Int("Last_SQL_Errno", 4),
    Col::Text("Last_SQL_Error", 20),
    Col::Text("Replicate_Ignore_Server_Ids", 512),
    Col::Int("Master_Server_Id", 8),
    Col::Text("Master_SSL_Crl", 512),
    Col::Text("Master_SSL_Crlpath", 512),
    Col::Text("Using_Gtid", 11),
    Col::Text("Gtid_IO_Pos", 30),
    Col::Text("Replicate_Do_Domain_Ids", 512),
    Col::Text("Replicate_Ignore_Domain_Ids", 512),
    Col::Text("Parallel_Mode", 12),
    Col::Int("SQL_Delay", 10),
    Col::Int("SQL_Remaining_Delay", 8),
    Col::Text("Slave_SQL_Running_State", 20),
    Col::BigInt("Slave_DDL_Groups", 20),
    Col::BigInt("Slave_Non_Transactional_Groups", 20),
    Col::BigInt("Slave_Transactional_Groups", 20),
    Col::Text("Replicate_Rewrite_DB", 23),
];

/// Columns of `SHOW ENGINE … STATUS|MUTEX`.
const ENGINE_STATUS: &[Col] = &[
    Col::Text("Type", 10),
    Col::Text("Name", 512),
    Col::Text("Status", 10),
];

/// Columns of `SHOW BINLOG|RELAYLOG EVENTS`.
const LOG_EVENTS: &[Col] = &[
    Col::Text("Log_name", 20),
    Col::BigInt("Pos", 21),
    Col::Text("Event_type", 20),
    Col::Int("Server_id", 10),
    Col::BigInt("End_log_pos", 21),
    Col::Text("Info", 20),
];

/// The privileges Skarv's accounts have, as `SHOW PRIVILEGES` lists them
/// (MySQL's words; RELOAD is granted as SUPER).
const PRIVILEGES: &[(&str, &str, &str)] = &[
    ("Alter", "Tables", "To alter the table"),
    (
        "Create",
        "Databases,Tables,Indexes",
        "To create new databases and tables",
    ),
    ("Create user", "Server Admin", "To create new users"),
    ("Delete", "Tables", "To delete existing rows"),
    (
        "Drop",
        "Databases,Tables",
        "To drop databases, tables, and views",
    ),
    (
        "Grant option",
        "Databases,Tables,Functions,Procedures",
        "To give to other users those privileges you possess",
    ),
    ("Index", "Tables", "To create or drop indexes"),
    ("Insert", "Tables", "To insert data into tables"),
    (
        "Process",
        "Server Admin",
        "To view the plain text of currently executing queries",
    ),
    ("Select", "Tables", "To retrieve rows from table"),
    (
        "Super",
        "Server Admin",
        "To use KILL thread, SET GLOBAL, FLUSH, etc.",
    ),
    ("Update", "Tables", "To update existing rows"),
];

/// The engines: (name, support, comment). InnoDB (and MyISAM, which
/// dumps name) are accepted in CREATE TABLE and make cluster tables.
pub const ENGINES: &[(&str, &str, &str)] = &[
    (
        "ndbcluster",
        "DEFAULT",
        "Clustered, fault-tolerant tables (Skarv)",
    ),
    (
        "InnoDB",
        "YES",
        "An alias of ndbcluster: its tables live in the cluster",
    ),
];

/// The character sets: (name, default collation, description, most bytes
/// per character).
pub const CHARSETS: &[(&str, &str, &str, u64)] = &[
    ("binary", "binary", "Binary pseudo charset", 1),
    ("utf8mb4", "utf8mb4_general_ci", "UTF-8 Unicode", 4),
];

/// The collations: (name, character set, id, default of its set).
pub const COLLATIONS: &[(&str, &str, u16, bool)] = &[
    ("binary", "binary", charset::BINARY, true),
    ("utf8mb4_bin", "utf8mb4", charset::UTF8MB4_BIN, false),
    (
        "utf8mb4_general_ci",
        "utf8mb4",
        charset::UTF8MB4_GENERAL_CI,
        true,
    ),
];

/// The plugins: (name, type, version, description). The authentication
/// methods are those the protocol speaks (`protocol::auth`).
const PLUGINS: &[(&str, &str, &str, &str)] = &[
    (
        "mysql_native_password",
        "AUTHENTICATION",
        "1.0",
        "Native MySQL authentication",
    ),
    (
        "caching_sha2_password",
        "AUTHENTICATION",
        "1.0",
        "Caching sha2 authentication (fast authentication)",
    ),
    (
        "ndbcluster",
        "STORAGE ENGINE",
        "1.0",
        "Clustered, fault-tolerant tables (Skarv)",
    ),
    (
        "ndbinfo",
        "STORAGE ENGINE",
        "1.0",
        "The cluster's own figures, as tables (ndbinfo database)",
    ),
];

/// Sends an answer.
fn send(
    sink: &mut dyn ResultSink,
    spec: &[Col],
    rows: Vec<Vec<SqlValue>>,
    more: bool,
) -> SqlResult<Answered> {
    super::send_rows(sink, &metas(spec), rows, more)?;
    Ok(Answered::Done)
}

/// The database a `SHOW … [FROM|IN db]` names at `at` of `words`, else the
/// session's; 1046 without either, 1049 for one that does not exist.
fn database_of(conn: &Conn<'_>, words: &[String], upper: &[&str], at: usize) -> SqlResult<String> {
    let db = match upper.get(at) {
        Some(&("FROM" | "IN")) => words.get(at + 1).cloned(),
        _ => conn.session.database.clone(),
    };
    let Some(db) = db else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    if !super::catalog::database_exists(conn, &db)? {
        return Err(SqlError::new(
            codes::BAD_DB,
            format!("Unknown database '{db}'"),
        ));
    }
    Ok(db)
}

/// Whether `SHOW first second …` (upper case) is one of [`show`]'s (SHOW
/// INDEX too, for its WHERE, which the parser does not take).
pub fn is_server_show(first: &str, second: &str) -> bool {
    matches!(
        (first, second),
        ("PROCEDURE" | "FUNCTION", "STATUS")
            | (
                "TRIGGERS" | "EVENTS" | "PROFILES" | "PROFILE" | "PLUGINS" | "PRIVILEGES",
                _
            )
            | ("OPEN", "TABLES")
            | ("MASTER" | "BINLOG", "STATUS" | "LOGS")
            | ("BINARY", "LOG" | "LOGS")
            | ("BINLOG" | "RELAYLOG", "EVENTS")
            | ("SLAVE" | "REPLICA", "STATUS" | "HOSTS")
            | ("REPLICAS", _)
            | ("ALL", "SLAVES" | "REPLICAS")
            | ("ENGINE", _)
            | ("INDEX" | "INDEXES" | "KEYS", "FROM" | "IN")
    )
}

/// The column a `SHOW … LIKE 'pattern'` matches, by the SHOW's first word.
fn like_column(first: &str) -> &'static str {
    match first {
        "TRIGGERS" | "OPEN" => "Table",
        "PRIVILEGES" => "Privilege",
        _ => "Name",
    }
}

/// `SHOW …` of the server ([`is_server_show`]) from its text: its words,
/// then `LIKE 'pattern'` or `WHERE condition`, which filter the rows as
/// MySQL's do (`show::filtered`).
pub fn show(
    conn: &mut Conn<'_>,
    sql: &str,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, sql)
        .tokenize()
        .map_err(SqlError::syntax)?;
    let mut words = Vec::new();
    let mut filter = None;
    let mut rest = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon));
    // SHOW itself.
    rest.next();
    let mut at_where = None;
    while let Some(t) = rest.next() {
        match t {
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("LIKE") => {
                let pattern = match rest.next() {
                    Some(Token::SingleQuotedString(p) | Token::DoubleQuotedString(p)) => p.clone(),
                    _ => return Err(SqlError::syntax("LIKE needs a string")),
                };
                filter = Some(pattern);
                if rest.next().is_some() {
                    return Err(SqlError::syntax("near the end of the SHOW"));
                }
                break;
            }
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("WHERE") => {
                at_where = Some(());
                break;
            }
            Token::Word(w) => words.push(w.value.clone()),
            Token::Period | Token::Number(..) => {}
            other => return Err(SqlError::syntax(format_args!("near '{other}' in SHOW"))),
        }
    }
    let condition = if at_where.is_some() {
        let text: String = rest.map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
        Some(
            sqlparser::parser::Parser::new(&super::dialect::SkarvDialect)
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr())
                .map_err(SqlError::syntax)?,
        )
    } else {
        None
    };
    let upper_owned: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper_owned.iter().map(String::as_str).collect();
    let condition = match (condition, filter) {
        (Some(c), _) => Some(c),
        (None, Some(pattern)) => Some(sqlparser::ast::Expr::Like {
            negated: false,
            any: false,
            expr: Box::new(sqlparser::ast::Expr::Identifier(Ident::new(like_column(
                upper.first().copied().unwrap_or(""),
            )))),
            pattern: Box::new(sqlparser::ast::Expr::Value(
                sqlparser::ast::Value::SingleQuotedString(pattern).into(),
            )),
            escape_char: None,
        }),
        (None, None) => None,
    };
    let run =
        |conn: &mut Conn<'_>, sink: &mut dyn ResultSink| answer(conn, &words, &upper, more, sink);
    match &condition {
        Some(c) => super::show::filtered(conn, c, sink, run),
        None => run(conn, sink),
    }
}

/// The answer of `SHOW words…`.
fn answer(
    conn: &mut Conn<'_>,
    words: &[String],
    upper: &[&str],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    match upper {
        ["INDEX" | "INDEXES" | "KEYS", "FROM" | "IN", ..] => {
            super::show::show_index_words(conn, words, upper, more, sink)
        }
        ["PROCEDURE" | "FUNCTION", "STATUS", ..] => send(sink, ROUTINE_STATUS, Vec::new(), more),
        ["TRIGGERS", ..] => {
            database_of(conn, words, upper, 1).and_then(|_| send(sink, TRIGGERS, Vec::new(), more))
        }
        ["EVENTS", ..] => {
            database_of(conn, words, upper, 1).and_then(|_| send(sink, EVENTS, Vec::new(), more))
        }
        ["OPEN", "TABLES", ..] => send(
            sink,
            &[
                Col::Text("Database", 64),
                Col::Text("Table", 64),
                Col::BigInt("In_use", 1),
                Col::BigInt("Name_locked", 4),
            ],
            Vec::new(),
            more,
        ),
        ["MASTER" | "BINLOG", "STATUS"] | ["BINARY", "LOG", "STATUS"] => send(
            sink,
            &[
                Col::Text("File", 512),
                Col::BigInt("Position", 20),
                Col::Text("Binlog_Do_DB", 255),
                Col::Text("Binlog_Ignore_DB", 255),
            ],
            Vec::new(),
            more,
        ),
        ["BINARY" | "MASTER", "LOGS"] => Err(SqlError::new(
            codes::NO_BINARY_LOGGING,
            "You are not using binary logging",
        )),
        ["BINLOG" | "RELAYLOG", "EVENTS", ..] => send(sink, LOG_EVENTS, Vec::new(), more),
        ["SLAVE" | "REPLICA", "STATUS", ..] => send(sink, REPLICA_STATUS, Vec::new(), more),
        ["ALL", "SLAVES" | "REPLICAS", "STATUS"] => {
            let mut spec = vec![Col::Text("Connection_name", 256)];
            spec.extend_from_slice(REPLICA_STATUS);
            send(sink, &spec, Vec::new(), more)
        }
        ["SLAVE" | "REPLICA", "HOSTS"] | ["REPLICAS"] => send(
            sink,
            &[
                Col::Int("Server_id", 10),
                Col::Text("Host", 20),
                Col::Int("Port", 7),
                Col::Int("Master_id", 10),
            ],
            Vec::new(),
            more,
        ),
        ["PROFILES"] => send(
            sink,
            &[
                Col::Int("Query_ID", 10),
                Col::Double("Duration"),
                Col::Text("Query", 40),
            ],
            Vec::new(),
            more,
        ),
        ["PROFILE", ..] => send(
            sink,
            &[Col::Text("Status", 30), Col::Decimal("Duration")],
            Vec::new(),
            more,
        ),
        ["PLUGINS"] => {
            let rows = PLUGINS
                .iter()
                .map(|(name, kind, _, _)| {
                    vec![
                        text(*name),
                        text("ACTIVE"),
                        text(*kind),
                        SqlValue::Null,
                        text("GPL"),
                    ]
                })
                .collect();
            send(
                sink,
                &[
                    Col::Text("Name", 64),
                    Col::Text("Status", 16),
                    Col::Text("Type", 80),
                    Col::Text("Library", 64),
                    Col::Text("License", 80),
                ],
                rows,
                more,
            )
        }
        ["PRIVILEGES"] => {
            let rows = PRIVILEGES
                .iter()
                .map(|(p, c, m)| vec![text(*p), text(*c), text(*m)])
                .collect();
            send(
                sink,
                &[
                    Col::Text("Privilege", 10),
                    Col::Text("Context", 15),
                    Col::Text("Comment", 64),
                ],
                rows,
                more,
            )
        }
        ["ENGINE", _, "STATUS" | "MUTEX", ..] | ["ENGINES", "STATUS"] => {
            let engine = words.get(1).map(String::as_str).unwrap_or("");
            engine_status(conn, engine, upper.get(2) == Some(&"STATUS"), more, sink)
        }
        _ => Err(SqlError::unsupported(format_args!(
            "SHOW {}",
            words.join(" ")
        ))),
    }
}

/// `SHOW ENGINE name STATUS|MUTEX`: ndbcluster's connection to the
/// cluster (MySQL Cluster's `connection` row); InnoDB, an alias, has none
/// of its own; another name is 1286.
fn engine_status(
    conn: &Conn<'_>,
    engine: &str,
    status: bool,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let known = |n: &str| ENGINES.iter().any(|(e, ..)| e.eq_ignore_ascii_case(n));
    let ndb = engine.eq_ignore_ascii_case("ndb") || engine.eq_ignore_ascii_case("ndbcluster");
    if !ndb && !known(engine) {
        return Err(SqlError::new(
            codes::UNKNOWN_STORAGE_ENGINE,
            format!("Unknown storage engine '{engine}'"),
        ));
    }
    let mut rows = Vec::new();
    if ndb && status {
        let cluster = conn.native.cluster();
        let config = cluster.config();
        let (host, port) = config
            .management_nodes
            .first()
            .map_or((String::new(), 0), |m| (m.host_name.clone(), m.port));
        rows.push(vec![
            text("ndbcluster"),
            text("connection"),
            text(format!(
                "cluster_node_id={}, connected_host={host}, connected_port={port}, \
                 number_of_data_nodes={}, number_of_ready_data_nodes={}",
                cluster.node_id(),
                config.data_nodes.len(),
                cluster.live_nodes().len()
            )),
        ]);
    }
    send(sink, ENGINE_STATUS, rows, more)
}

/// `SHOW CREATE PROCEDURE|FUNCTION|TRIGGER|EVENT name`: none exists.
pub fn show_create_missing(kind: &str, name: &str) -> SqlError {
    match kind {
        "TRIGGER" => SqlError::new(codes::TRG_DOES_NOT_EXIST, "Trigger does not exist"),
        "EVENT" => SqlError::new(
            codes::EVENT_DOES_NOT_EXIST,
            format!("Unknown event '{name}'"),
        ),
        _ => SqlError::new(
            codes::SP_DOES_NOT_EXIST,
            format!("{kind} {name} does not exist"),
        ),
    }
}

/// The columns of `information_schema.<upper>` (upper case), if it is
/// one of this module's.
pub fn columns(upper: &str) -> Option<Vec<ColumnMeta>> {
    use Col::*;
    let spec: &[Col] = match upper {
        "CHARACTER_SETS" => &[
            Text("CHARACTER_SET_NAME", 32),
            Text("DEFAULT_COLLATE_NAME", 64),
            Text("DESCRIPTION", 60),
            BigInt("MAXLEN", 3),
        ],
        "COLLATIONS" => &[
            Text("COLLATION_NAME", 64),
            Text("CHARACTER_SET_NAME", 32),
            BigInt("ID", 11),
            Text("IS_DEFAULT", 3),
            Text("IS_COMPILED", 3),
            BigInt("SORTLEN", 3),
        ],
        "COLLATION_CHARACTER_SET_APPLICABILITY" => &[
            Text("COLLATION_NAME", 64),
            Text("CHARACTER_SET_NAME", 32),
            Text("FULL_COLLATION_NAME", 64),
            BigInt("ID", 11),
            Text("IS_DEFAULT", 3),
        ],
        // MariaDB's WORD, and MySQL 8's RESERVED, which Connector/J reads
        // for `DatabaseMetaData.getSQLKeywords` from a server that says 8.0.
        "KEYWORDS" => &[Text("WORD", 64), Int("RESERVED", 1)],
        "SQL_FUNCTIONS" => &[Text("FUNCTION", 64)],
        "ENGINES" => &[
            Text("ENGINE", 64),
            Text("SUPPORT", 8),
            Text("COMMENT", 160),
            Text("TRANSACTIONS", 3),
            Text("XA", 3),
            Text("SAVEPOINTS", 3),
        ],
        "PLUGINS" => &[
            Text("PLUGIN_NAME", 64),
            Text("PLUGIN_VERSION", 20),
            Text("PLUGIN_STATUS", 16),
            Text("PLUGIN_TYPE", 80),
            Text("PLUGIN_TYPE_VERSION", 20),
            Text("PLUGIN_LIBRARY", 64),
            Text("PLUGIN_LIBRARY_VERSION", 20),
            Text("PLUGIN_AUTHOR", 64),
            Blob("PLUGIN_DESCRIPTION"),
            Text("PLUGIN_LICENSE", 80),
            Text("LOAD_OPTION", 64),
            Text("PLUGIN_MATURITY", 12),
            Text("PLUGIN_AUTH_VERSION", 80),
        ],
        "USER_PRIVILEGES" => &[
            Text("GRANTEE", 385),
            Text("TABLE_CATALOG", 512),
            Text("PRIVILEGE_TYPE", 64),
            Text("IS_GRANTABLE", 3),
        ],
        "SCHEMA_PRIVILEGES" => &[
            Text("GRANTEE", 385),
            Text("TABLE_CATALOG", 512),
            Text("TABLE_SCHEMA", 64),
            Text("PRIVILEGE_TYPE", 64),
            Text("IS_GRANTABLE", 3),
        ],
        "TABLE_PRIVILEGES" => &[
            Text("GRANTEE", 385),
            Text("TABLE_CATALOG", 512),
            Text("TABLE_SCHEMA", 64),
            Text("TABLE_NAME", 64),
            Text("PRIVILEGE_TYPE", 64),
            Text("IS_GRANTABLE", 3),
        ],
        "COLUMN_PRIVILEGES" => &[
            Text("GRANTEE", 385),
            Text("TABLE_CATALOG", 512),
            Text("TABLE_SCHEMA", 64),
            Text("TABLE_NAME", 64),
            Text("COLUMN_NAME", 64),
            Text("PRIVILEGE_TYPE", 64),
            Text("IS_GRANTABLE", 3),
        ],
        "ROUTINES" => &[
            Text("SPECIFIC_NAME", 64),
            Text("ROUTINE_CATALOG", 512),
            Text("ROUTINE_SCHEMA", 64),
            Text("ROUTINE_NAME", 64),
            Text("ROUTINE_TYPE", 13),
            Text("DATA_TYPE", 64),
            Int("CHARACTER_MAXIMUM_LENGTH", 21),
            Int("CHARACTER_OCTET_LENGTH", 21),
            Int("NUMERIC_PRECISION", 21),
            Int("NUMERIC_SCALE", 21),
            BigInt("DATETIME_PRECISION", 21),
            Text("CHARACTER_SET_NAME", 64),
            Text("COLLATION_NAME", 64),
            Blob("DTD_IDENTIFIER"),
            Text("ROUTINE_BODY", 8),
            Blob("ROUTINE_DEFINITION"),
            Text("EXTERNAL_NAME", 64),
            Text("EXTERNAL_LANGUAGE", 64),
            Text("PARAMETER_STYLE", 8),
            Text("IS_DETERMINISTIC", 3),
            Text("SQL_DATA_ACCESS", 64),
            Text("SQL_PATH", 64),
            Text("SECURITY_TYPE", 7),
            DateTime("CREATED"),
            DateTime("LAST_ALTERED"),
            Text("SQL_MODE", 8192),
            Blob("ROUTINE_COMMENT"),
            Text("DEFINER", 384),
            Text("CHARACTER_SET_CLIENT", 32),
            Text("COLLATION_CONNECTION", 64),
            Text("DATABASE_COLLATION", 64),
        ],
        "PARAMETERS" => &[
            Text("SPECIFIC_CATALOG", 512),
            Text("SPECIFIC_SCHEMA", 64),
            Text("SPECIFIC_NAME", 64),
            Int("ORDINAL_POSITION", 21),
            Text("PARAMETER_MODE", 5),
            Text("PARAMETER_NAME", 64),
            Text("DATA_TYPE", 64),
            Int("CHARACTER_MAXIMUM_LENGTH", 21),
            Int("CHARACTER_OCTET_LENGTH", 21),
            Int("NUMERIC_PRECISION", 21),
            Int("NUMERIC_SCALE", 21),
            BigInt("DATETIME_PRECISION", 21),
            Text("CHARACTER_SET_NAME", 64),
            Text("COLLATION_NAME", 64),
            Blob("DTD_IDENTIFIER"),
            Text("ROUTINE_TYPE", 9),
        ],
        "EVENTS" => &[
            Text("EVENT_CATALOG", 64),
            Text("EVENT_SCHEMA", 64),
            Text("EVENT_NAME", 64),
            Text("DEFINER", 384),
            Text("TIME_ZONE", 64),
            Text("EVENT_BODY", 8),
            Blob("EVENT_DEFINITION"),
            Text("EVENT_TYPE", 9),
            DateTime("EXECUTE_AT"),
            Text("INTERVAL_VALUE", 256),
            Text("INTERVAL_FIELD", 18),
            Text("SQL_MODE", 8192),
            DateTime("STARTS"),
            DateTime("ENDS"),
            Text("STATUS", 18),
            Text("ON_COMPLETION", 12),
            DateTime("CREATED"),
            DateTime("LAST_ALTERED"),
            DateTime("LAST_EXECUTED"),
            Text("EVENT_COMMENT", 64),
            BigInt("ORIGINATOR", 10),
            Text("CHARACTER_SET_CLIENT", 32),
            Text("COLLATION_CONNECTION", 64),
            Text("DATABASE_COLLATION", 64),
        ],
        "FILES" => &[
            BigInt("FILE_ID", 4),
            Text("FILE_NAME", 512),
            Text("FILE_TYPE", 20),
            Text("TABLESPACE_NAME", 64),
            Text("TABLE_CATALOG", 64),
            Text("TABLE_SCHEMA", 64),
            Text("TABLE_NAME", 64),
            Text("LOGFILE_GROUP_NAME", 64),
            BigInt("LOGFILE_GROUP_NUMBER", 4),
            Text("ENGINE", 64),
            Text("FULLTEXT_KEYS", 64),
            BigInt("DELETED_ROWS", 4),
            BigInt("UPDATE_COUNT", 4),
            BigInt("FREE_EXTENTS", 4),
            BigInt("TOTAL_EXTENTS", 4),
            BigInt("EXTENT_SIZE", 4),
            BigInt("INITIAL_SIZE", 21),
            BigInt("MAXIMUM_SIZE", 21),
            BigInt("AUTOEXTEND_SIZE", 21),
            DateTime("CREATION_TIME"),
            DateTime("LAST_UPDATE_TIME"),
            DateTime("LAST_ACCESS_TIME"),
            BigInt("RECOVER_TIME", 4),
            BigInt("TRANSACTION_COUNTER", 4),
            BigInt("VERSION", 21),
            Text("ROW_FORMAT", 10),
            BigInt("TABLE_ROWS", 21),
            BigInt("AVG_ROW_LENGTH", 21),
            BigInt("DATA_LENGTH", 21),
            BigInt("MAX_DATA_LENGTH", 21),
            BigInt("INDEX_LENGTH", 21),
            BigInt("DATA_FREE", 21),
            DateTime("CREATE_TIME"),
            DateTime("UPDATE_TIME"),
            DateTime("CHECK_TIME"),
            BigInt("CHECKSUM", 21),
            Text("STATUS", 20),
            Text("EXTRA", 255),
        ],
        "PARTITIONS" => &[
            Text("TABLE_CATALOG", 512),
            Text("TABLE_SCHEMA", 64),
            Text("TABLE_NAME", 64),
            Text("PARTITION_NAME", 64),
            Text("SUBPARTITION_NAME", 64),
            BigInt("PARTITION_ORDINAL_POSITION", 21),
            BigInt("SUBPARTITION_ORDINAL_POSITION", 21),
            Text("PARTITION_METHOD", 18),
            Text("SUBPARTITION_METHOD", 12),
            Blob("PARTITION_EXPRESSION"),
            Blob("SUBPARTITION_EXPRESSION"),
            Blob("PARTITION_DESCRIPTION"),
            BigInt("TABLE_ROWS", 21),
            BigInt("AVG_ROW_LENGTH", 21),
            BigInt("DATA_LENGTH", 21),
            BigInt("MAX_DATA_LENGTH", 21),
            BigInt("INDEX_LENGTH", 21),
            BigInt("DATA_FREE", 21),
            DateTime("CREATE_TIME"),
            DateTime("UPDATE_TIME"),
            DateTime("CHECK_TIME"),
            BigInt("CHECKSUM", 21),
            Text("PARTITION_COMMENT", 80),
            Text("NODEGROUP", 12),
            Text("TABLESPACE_NAME", 64),
        ],
        _ => return None,
    };
    Some(metas(spec))
}

/// The rows of `information_schema.<upper>`, one of this module's.
pub fn rows(conn: &mut Conn<'_>, upper: &str) -> SqlResult<Vec<Vec<SqlValue>>> {
    let yes = |b: bool| text(if b { "Yes" } else { "" });
    Ok(match upper {
        "CHARACTER_SETS" => CHARSETS
            .iter()
            .map(|(name, collation, description, max)| {
                vec![
                    text(*name),
                    text(*collation),
                    text(*description),
                    SqlValue::UInt(*max),
                ]
            })
            .collect(),
        "COLLATIONS" => COLLATIONS
            .iter()
            .map(|(name, set, id, default)| {
                vec![
                    text(*name),
                    text(*set),
                    SqlValue::UInt(u64::from(*id)),
                    yes(*default),
                    text("Yes"),
                    SqlValue::UInt(1),
                ]
            })
            .collect(),
        "COLLATION_CHARACTER_SET_APPLICABILITY" => COLLATIONS
            .iter()
            .map(|(name, set, id, default)| {
                vec![
                    text(*name),
                    text(*set),
                    text(*name),
                    SqlValue::UInt(u64::from(*id)),
                    yes(*default),
                ]
            })
            .collect(),
        "KEYWORDS" => super::sql_words::KEYWORDS
            .iter()
            .map(|w| {
                let reserved = super::sql_words::RESERVED.binary_search(w).is_ok();
                vec![text(*w), SqlValue::Int(i64::from(reserved))]
            })
            .collect(),
        "SQL_FUNCTIONS" => super::sql_words::SQL_FUNCTIONS
            .iter()
            .map(|w| vec![text(*w)])
            .collect(),
        "ENGINES" => ENGINES
            .iter()
            .map(|(name, support, comment)| {
                vec![
                    text(*name),
                    text(*support),
                    text(*comment),
                    text("YES"),
                    text("NO"),
                    text("NO"),
                ]
            })
            .collect(),
        "PLUGINS" => PLUGINS
            .iter()
            .map(|(name, kind, version, description)| {
                vec![
                    text(*name),
                    text(*version),
                    text("ACTIVE"),
                    text(*kind),
                    text(*version),
                    SqlValue::Null,
                    SqlValue::Null,
                    text("Skarv"),
                    text(*description),
                    text("GPL"),
                    text("FORCE"),
                    text("Stable"),
                    text(super::session::VERSION),
                ]
            })
            .collect(),
        "USER_PRIVILEGES" | "SCHEMA_PRIVILEGES" => {
            super::users::privilege_rows(conn, upper == "SCHEMA_PRIVILEGES")?
                .into_iter()
                .map(|(grantee, db, privilege, grantable)| {
                    let mut row = vec![text(grantee), text("def")];
                    if let Some(db) = db {
                        row.push(text(db));
                    }
                    row.push(text(privilege));
                    row.push(text(if grantable { "YES" } else { "NO" }));
                    row
                })
                .collect()
        }
        "PARTITIONS" => partitions(conn)?,
        // Skarv has no stored routines, events, table or column grants,
        // nor tablespace files.
        _ => Vec::new(),
    })
}

/// A row per partition of every table: Skarv partitions each table by
/// KEY over its distribution key (the primary key unless `PARTITION BY
/// KEY` named others), and a partition's rows and memory are its primary
/// replica's (`ndbinfo.table_fragments`).
fn partitions(conn: &mut Conn<'_>) -> SqlResult<Vec<Vec<SqlValue>>> {
    let tables = super::show::all_tables(conn)?;
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    // (native name, fragment) -> (rows, data bytes, index bytes)
    let mut fragments = std::collections::HashMap::new();
    let (columns, frag_rows) = super::show::ndbinfo_rows(conn, "table_fragments")?;
    let at = |name: &str| columns.iter().position(|c| &*c.name == name);
    let (Some(fq), Some(num), Some(replica), Some(count), Some(data), Some(hash)) = (
        at("fq_name"),
        at("fragment_num"),
        at("replica"),
        at("fixed_elem_count"),
        at("data_memory_bytes"),
        at("hash_index_alloc_bytes"),
    ) else {
        return Err(SqlError::new(
            codes::UNKNOWN,
            "ndbinfo.table_fragments lacks a column PARTITIONS reads",
        ));
    };
    let uint = |v: &SqlValue| match v {
        SqlValue::UInt(n) => *n,
        _ => 0,
    };
    let bytes = |v: &SqlValue| match v {
        SqlValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    for row in &frag_rows {
        if bytes(&row[replica]) != "PRIMARY" {
            continue;
        }
        fragments.insert(
            (bytes(&row[fq]), uint(&row[num])),
            (uint(&row[count]), uint(&row[data]), uint(&row[hash])),
        );
    }
    let mut out = Vec::new();
    for info in tables {
        let def = info.native.def();
        let expression = def
            .distribution_key
            .iter()
            .filter_map(|&c| def.columns.get(c))
            .map(|c| super::show::quote_ident(&c.name))
            .collect::<Vec<_>>()
            .join(",");
        let native_name = info.native.name().to_owned();
        for p in 0..def.partitions {
            let (rows, data, index) = fragments
                .get(&(native_name.clone(), u64::from(p)))
                .copied()
                .unwrap_or_default();
            let mut row = vec![
                text("def"),
                text(info.db.clone()),
                text(info.name.clone()),
                text(format!("p{p}")),
                SqlValue::Null,
                SqlValue::UInt(u64::from(p) + 1),
                SqlValue::Null,
                text("KEY"),
                SqlValue::Null,
                text(expression.clone()),
                SqlValue::Null,
                SqlValue::Null,
                SqlValue::UInt(rows),
                SqlValue::UInt(data.checked_div(rows).unwrap_or(0)),
                SqlValue::UInt(data),
                SqlValue::Null,
                SqlValue::UInt(index),
                SqlValue::UInt(0),
            ];
            row.extend([
                SqlValue::Null,
                SqlValue::Null,
                SqlValue::Null,
                SqlValue::Null,
            ]);
            row.extend([text(""), text("default"), SqlValue::Null]);
            out.push(row);
        }
    }
    Ok(out)
}

/// The grantee as `information_schema` writes it.
pub fn grantee(user: &str, host: &str) -> String {
    format!("'{user}'@'{host}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_columns_and_unique_names() {
        for t in super::super::show::INFORMATION_SCHEMA_TABLES {
            assert!(
                super::super::show::information_schema_columns(t).is_some(),
                "{t} has no columns"
            );
        }
        assert!(columns("NO_SUCH").is_none());
        // Names are unique in each answer.
        for spec in [
            ROUTINE_STATUS,
            TRIGGERS,
            EVENTS,
            REPLICA_STATUS,
            ENGINE_STATUS,
        ] {
            let names: std::collections::HashSet<_> =
                metas(spec).iter().map(|m| m.name.clone()).collect();
            assert_eq!(names.len(), spec.len());
        }
    }
}
