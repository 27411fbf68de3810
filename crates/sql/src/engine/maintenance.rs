//! The maintenance statements: `ANALYZE`, `OPTIMIZE`, `CHECK`, `REPAIR`
//! and `CHECKSUM TABLE`, which `mysqlcheck` and GUI tools send, and
//! `FLUSH` ([`flush`]).
//!
//! Each takes a list of tables and answers a row (or a few) per table, as
//! MySQL does: a table that does not exist, or a view where a base table
//! is needed, is a row saying so, not an error of the statement, so the
//! other tables are still done.
//!
//! What each does in a cluster whose rows live in data nodes:
//! - ANALYZE counts the rows and samples every ordered index
//!   (`stats::analyze_one`); OPTIMIZE says it cannot compact and analyzes.
//! - CHECK reads every row through the primary key and every ordered
//!   index entry, so every partition of each must be readable. It does not
//!   compare their counts (the cluster has no snapshot, so a concurrent
//!   write would read as a mismatch), nor look for child rows without a
//!   parent (which `foreign_key_checks=0` allows; InnoDB's does not
//!   either). CHECK of a view reads its query.
//! - REPAIR has nothing to repair (replicas are rebuilt by node restarts):
//!   MySQL's note for an engine without it.
//! - CHECKSUM reads every row through the SQL node and sums a CRC-32 of
//!   each row's values: order-independent, so the same rows give the same
//!   checksum on any SQL node and in any table of the same columns. The
//!   value is Skarv's own (MariaDB's sums its record format), and QUICK is
//!   NULL, as for an engine that keeps no live checksum.

use sqlparser::tokenizer::{Token, Tokenizer};

use super::catalog::TableInfo;
use super::{send_rows, Answered, Conn};
use crate::backend::{OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta, ColumnType, SqlValue};

/// `FLUSH …`, which MySQL's RELOAD privilege allows (SUPER here):
/// - PRIVILEGES: the SQL node reads the accounts and grants again (it
///   does so anyway once they change, `users::snapshot`);
/// - STATUS: this connection's counters start from 0 (`status::flush_status`);
/// - LOGS and SLOW LOGS: the slow query log's file is opened again by its
///   name, so a log rotated by renaming starts a new file;
/// - TABLES [t, …], HOSTS, USER_RESOURCES, OPTIMIZER_COSTS and the other
///   logs: nothing to do (the SQL node caches no table data, and keeps
///   none of those);
/// - TABLES WITH READ LOCK and FOR EXPORT: refused; a cluster-wide read
///   lock would stop every SQL node's writes (backups take a consistent
///   snapshot without one: `skarv backup`, `mysqldump --single-transaction`).
pub fn flush(conn: &mut Conn<'_>, statement: &sqlparser::ast::Statement) -> SqlResult<Answered> {
    use sqlparser::ast::{FlushType as F, Statement};
    let Statement::Flush {
        object_type,
        read_lock,
        export,
        ..
    } = statement
    else {
        return Err(SqlError::syntax("expected FLUSH"));
    };
    if *read_lock || *export {
        return Err(SqlError::unsupported(
            "FLUSH TABLES WITH READ LOCK | FOR EXPORT (no global read lock in a cluster: \
             `skarv backup` or `mysqldump --single-transaction` read a consistent snapshot)",
        ));
    }
    if conn.grants.global & super::users::privilege::SUPER == 0 {
        return Err(SqlError::new(
            codes::SPECIFIC_ACCESS_DENIED,
            "Access denied; you need (at least one of) the RELOAD privilege(s) for this operation",
        ));
    }
    // An implicit commit, as MySQL's FLUSH.
    super::txn::commit(conn)?;
    match object_type {
        F::Privileges => conn.engine.accounts.forget(),
        F::Status => super::status::flush_status(conn),
        F::Logs | F::SlowLogs => conn.engine.status.slow_log.reopen()?,
        F::Tables
        | F::Hosts
        | F::UserResources
        | F::OptimizerCosts
        | F::BinaryLogs
        | F::EngineLogs
        | F::ErrorLogs
        | F::GeneralLogs
        | F::RelayLogs => {}
    }
    Ok(Answered::Ok(OkInfo::default()))
}

/// The statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Analyze,
    Optimize,
    Check,
    Repair,
    /// `CHECKSUM TABLE … [QUICK | EXTENDED]`.
    Checksum {
        quick: bool,
    },
}

impl Op {
    /// The `Op` column's word.
    fn word(self) -> &'static str {
        match self {
            Op::Analyze => "analyze",
            Op::Optimize => "optimize",
            Op::Check => "check",
            Op::Repair => "repair",
            Op::Checksum { .. } => "checksum",
        }
    }

    /// The options it takes after its table names.
    fn options(self) -> &'static [&'static str] {
        match self {
            Op::Check => &[
                "FOR", "UPGRADE", "QUICK", "FAST", "MEDIUM", "EXTENDED", "CHANGED",
            ],
            Op::Repair => &["QUICK", "EXTENDED", "USE_FRM", "FORCE"],
            Op::Checksum { .. } => &["QUICK", "EXTENDED"],
            Op::Analyze | Op::Optimize => &[],
        }
    }
}

/// Whether a statement starting with these words (upper case) is one of
/// this module's.
pub fn is_maintenance(first: &str, second: &str) -> bool {
    matches!(
        (first, second),
        ("ANALYZE" | "OPTIMIZE" | "CHECK" | "REPAIR" | "CHECKSUM", _)
    ) && (first != "CHECK" || matches!(second, "TABLE" | "TABLES"))
}

/// Runs `sql`, one of the statements this module answers.
pub fn run(
    conn: &mut Conn<'_>,
    sql: &str,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let (op, names) = parse(sql)?;
    let mut rows = Vec::new();
    for (db, name) in &names {
        let db = db.clone().or_else(|| conn.session.database.clone());
        let shown = format!("{}.{}", db.as_deref().unwrap_or(""), name);
        authorize(conn, db.as_deref(), name)?;
        let found = match db.as_deref() {
            Some(db) => table_or_view(conn, db, name),
            None => Err(SqlError::new(codes::NO_DB, "No database selected")),
        };
        if let Op::Checksum { quick } = op {
            let sum = match found {
                Ok(Found::Table(info)) if !quick => {
                    SqlValue::UInt(u64::from(checksum(conn, &info)?))
                }
                Ok(Found::Table(_)) => SqlValue::Null,
                Ok(Found::View) => {
                    conn.session
                        .error_note(codes::WRONG_OBJECT, not_base_table(&shown));
                    SqlValue::Null
                }
                Err(e) => {
                    conn.session.error_note(e.code, e.message);
                    SqlValue::Null
                }
            };
            rows.push(vec![SqlValue::Bytes(shown.into_bytes()), sum]);
            continue;
        }
        let row = |kind: &str, text: String| {
            vec![
                SqlValue::Bytes(shown.clone().into_bytes()),
                SqlValue::Bytes(op.word().as_bytes().to_vec()),
                SqlValue::Bytes(kind.as_bytes().to_vec()),
                SqlValue::Bytes(text.into_bytes()),
            ]
        };
        let failed = |rows: &mut Vec<Vec<SqlValue>>, message: String| {
            rows.push(row("Error", message));
            rows.push(row("status", "Operation failed".into()));
        };
        let info = match found {
            Ok(Found::Table(info)) => info,
            // CHECK of a view checks that its definition still reads
            // (MySQL's); the others need a base table.
            Ok(Found::View) if op == Op::Check => {
                let checked = view_reads(conn, db.as_deref().unwrap_or(""), name);
                match checked {
                    Ok(()) => rows.push(row("status", "OK".into())),
                    // MySQL's three rows: the cause, 1356's text, Corrupt.
                    Err(e) => {
                        rows.push(row("Error", e.message));
                        rows.push(row(
                            "Error",
                            format!(
                                "View '{shown}' references invalid table(s) or column(s) or \
                                 function(s) or definer/invoker of view lack rights to use them"
                            ),
                        ));
                        rows.push(row("error", "Corrupt".into()));
                    }
                }
                continue;
            }
            Ok(Found::View) => {
                failed(&mut rows, not_base_table(&shown));
                continue;
            }
            Err(e) => {
                failed(&mut rows, e.message);
                continue;
            }
        };
        let done = match op {
            Op::Analyze => super::stats::analyze_one(conn, &info),
            Op::Optimize => {
                rows.push(row(
                    "note",
                    "Table does not support optimize, doing analyze instead".into(),
                ));
                super::stats::analyze_one(conn, &info)
            }
            Op::Check => check(conn, &info),
            Op::Repair => {
                rows.push(row(
                    "note",
                    "The storage engine for the table doesn't support repair".into(),
                ));
                continue;
            }
            Op::Checksum { .. } => unreachable!("answered above"),
        };
        match done {
            Ok(()) => rows.push(row("status", "OK".into())),
            Err(e) => failed(&mut rows, e.message),
        }
    }
    let text =
        |n: &str| ColumnMeta::expr(n, ColumnType::VarString, charset::UTF8MB4_GENERAL_CI, 512);
    if let Op::Checksum { .. } = op {
        let mut sum = ColumnMeta::expr("Checksum", ColumnType::LongLong, charset::BINARY, 21);
        sum.flags = flags::UNSIGNED | flags::NUM;
        // The rows' errors counted at the end, as a SELECT's warnings.
        let io =
            |e: std::io::Error| SqlError::new(codes::UNKNOWN, format!("writing the result: {e}"));
        sink.columns(&[text("Table"), sum]).map_err(io)?;
        for row in &rows {
            sink.row(row).map_err(io)?;
        }
        sink.end_rows(&OkInfo {
            more_results: more,
            warnings: conn.session.warning_count(),
            ..OkInfo::default()
        })
        .map_err(io)?;
    } else {
        let columns = [
            text("Table"),
            text("Op"),
            text("Msg_type"),
            text("Msg_text"),
        ];
        send_rows(sink, &columns, rows, more)?;
    }
    Ok(Answered::Done)
}

fn not_base_table(shown: &str) -> String {
    format!("'{shown}' is not of type 'BASE TABLE'")
}

enum Found {
    Table(std::sync::Arc<TableInfo>),
    View,
}

/// The table `db.name`, else whether a view has the name, else the
/// table's error (1146).
fn table_or_view(conn: &mut Conn<'_>, db: &str, name: &str) -> SqlResult<Found> {
    match super::catalog::table(conn, Some(db), name) {
        Ok(info) => Ok(Found::Table(info)),
        Err(e) if e.code == codes::TABLE_NOT_FOUND => match super::views::find(conn, db, name)? {
            Some(_) => Ok(Found::View),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// A table's statement needs its reader's privilege (MySQL's SELECT for
/// CHECK and CHECKSUM; ANALYZE's and the others' too, here).
fn authorize(conn: &Conn<'_>, db: Option<&str>, name: &str) -> SqlResult<()> {
    let stmt = format!("SELECT 1 FROM {}", quoted(db, name));
    if let Ok(parsed) = sqlparser::parser::Parser::parse_sql(&super::dialect::SkarvDialect, &stmt) {
        if let Some(s) = parsed.first() {
            super::users::authorize(conn, s)?;
        }
    }
    Ok(())
}

fn quoted(db: Option<&str>, name: &str) -> String {
    let q = |s: &str| format!("`{}`", s.replace('`', "``"));
    match db {
        Some(db) => format!("{}.{}", q(db), q(name)),
        None => q(name),
    }
}

/// Runs `SELECT … FROM db.name` into `sink`, as the session runs it.
fn select_into(
    conn: &mut Conn<'_>,
    select: &str,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let parsed = sqlparser::parser::Parser::parse_sql(&super::dialect::SkarvDialect, select)
        .map_err(SqlError::syntax)?;
    let statement = parsed
        .first()
        .ok_or_else(|| SqlError::syntax("an empty statement"))?;
    super::exec::query(conn, statement, &[], false, sink)
}

/// CHECK of a view: its query still reads (a table it names may have
/// gone, or lost a column).
fn view_reads(conn: &mut Conn<'_>, db: &str, name: &str) -> SqlResult<()> {
    let mut sink = RowSink;
    select_into(
        conn,
        &format!("SELECT * FROM {} LIMIT 0", quoted(Some(db), name)),
        &mut sink,
    )
    .map(drop)
}

/// CHECK of a table (the module docs say what it reads).
fn check(conn: &Conn<'_>, info: &TableInfo) -> SqlResult<()> {
    let session = conn.native;
    let def = info.native.def();
    let key: Vec<&str> = def
        .primary_key
        .iter()
        .map(|c| def.columns[*c].name.as_str())
        .collect();
    let mut scans = vec![skarv_client::ScanOptions {
        projection: Some(key),
        ..skarv_client::ScanOptions::default()
    }];
    for index in def
        .indexes
        .iter()
        .filter(|i| i.kind == schema::IndexKind::Ordered)
    {
        scans.push(skarv_client::ScanOptions {
            index: Some(index.name.as_str()),
            projection: Some(
                index
                    .columns
                    .iter()
                    .map(|c| def.columns[*c].name.as_str())
                    .collect(),
            ),
            ..skarv_client::ScanOptions::default()
        });
    }
    let native =
        |e: skarv_client::Error| SqlError::new(codes::UNKNOWN, format!("reading the table: {e}"));
    for options in scans {
        let what = options.index.unwrap_or("PRIMARY").to_owned();
        let tx = session.begin().map_err(native)?;
        let read = tx
            .scan(&info.native, options)
            .map_err(native)
            .and_then(|rows| {
                for row in rows {
                    row.map_err(native)?;
                }
                Ok(())
            });
        let _ = tx.execute(skarv_client::ExecMode::Rollback);
        read.map_err(|e| {
            SqlError::new(
                e.code,
                format!("Index '{what}' could not be read: {}", e.message),
            )
        })?;
    }
    Ok(())
}

/// CHECKSUM of a table: the wrapping sum of each row's CRC-32.
fn checksum(conn: &mut Conn<'_>, info: &TableInfo) -> SqlResult<u32> {
    // TIMESTAMPs as their UTC seconds, so the session's time zone does not
    // change the sum.
    let items: Vec<String> = info
        .columns
        .iter()
        .map(|c| {
            let name = quoted(None, &c.name);
            if matches!(c.ty, super::catalog::SqlType::Timestamp { .. }) {
                format!("UNIX_TIMESTAMP({name})")
            } else {
                name
            }
        })
        .collect();
    let select = format!(
        "SELECT {} FROM {}",
        items.join(", "),
        quoted(Some(&info.db), &info.name)
    );
    let mut sink = ChecksumSink::default();
    select_into(conn, &select, &mut sink)?;
    Ok(sink.sum)
}

/// Sums the rows' CRC-32s; each value is hashed with a tag of its kind, so
/// NULL, `''` and `0` differ, and the row's CRC is order-independent only
/// across rows, not across columns.
#[derive(Default)]
struct ChecksumSink {
    sum: u32,
    bytes: Vec<u8>,
}

impl ResultSink for ChecksumSink {
    fn columns(&mut self, _: &[ColumnMeta]) -> std::io::Result<()> {
        Ok(())
    }

    fn row(&mut self, values: &[SqlValue]) -> std::io::Result<()> {
        self.bytes.clear();
        for v in values {
            encode(v, &mut self.bytes);
        }
        self.sum = self.sum.wrapping_add(crc32fast::hash(&self.bytes));
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
}

/// A value as bytes for the checksum: a tag, its length and its form.
fn encode(v: &SqlValue, out: &mut Vec<u8>) {
    let mut put = |tag: u8, bytes: &[u8]| {
        out.push(tag);
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    match v {
        SqlValue::Null => put(0, &[]),
        SqlValue::Int(i) => put(1, &i.to_le_bytes()),
        SqlValue::UInt(u) => put(2, &u.to_le_bytes()),
        SqlValue::Float(f) => put(3, &f.to_le_bytes()),
        SqlValue::Double(d) => put(4, &d.to_le_bytes()),
        SqlValue::Decimal(s) => put(5, s.as_bytes()),
        SqlValue::Bytes(b) => put(6, b),
        // Dates and times by their text, which is exact.
        other => put(7, format!("{other:?}").as_bytes()),
    }
}

/// Keeps nothing: a sink for a read whose rows are not wanted.
struct RowSink;

impl ResultSink for RowSink {
    fn columns(&mut self, _: &[ColumnMeta]) -> std::io::Result<()> {
        Ok(())
    }

    fn row(&mut self, _: &[SqlValue]) -> std::io::Result<()> {
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
}

/// The statement's op and the tables it names: `ANALYZE | OPTIMIZE |
/// REPAIR [NO_WRITE_TO_BINLOG | LOCAL] TABLE a, db.b [options]`, `CHECK
/// TABLE … [options]`, `CHECKSUM TABLE … [QUICK | EXTENDED]`.
type Named = (Op, Vec<(Option<String>, String)>);
fn parse(sql: &str) -> SqlResult<Named> {
    let tokens = Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, sql)
        .tokenize()
        .map_err(SqlError::syntax)?;
    let mut words: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon))
        .collect();
    let bad = || {
        SqlError::syntax(
            "expected ANALYZE | OPTIMIZE | CHECK | REPAIR | CHECKSUM TABLE name [, name …]",
        )
    };
    let keyword = |t: &Token, k: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    let first = words.first().ok_or_else(bad)?;
    let mut op = match first {
        t if keyword(t, "ANALYZE") => Op::Analyze,
        t if keyword(t, "OPTIMIZE") => Op::Optimize,
        t if keyword(t, "CHECK") => Op::Check,
        t if keyword(t, "REPAIR") => Op::Repair,
        t if keyword(t, "CHECKSUM") => Op::Checksum { quick: false },
        _ => return Err(bad()),
    };
    let mut at = 1;
    if matches!(op, Op::Analyze | Op::Optimize | Op::Repair)
        && words
            .get(at)
            .is_some_and(|t| keyword(t, "NO_WRITE_TO_BINLOG") || keyword(t, "LOCAL"))
    {
        at += 1;
    }
    if !words
        .get(at)
        .is_some_and(|t| keyword(t, "TABLE") || keyword(t, "TABLES"))
    {
        return Err(bad());
    }
    // Options after the last name: words, each after a word (a name or
    // another option), never after a dot or a comma.
    while words.len() > at + 2 {
        let n = words.len();
        let last = &words[n - 1];
        let option = op.options().iter().find(|o| keyword(last, o)).copied();
        match option {
            Some(o) if matches!(words[n - 2], Token::Word(_)) => {
                if o == "QUICK" {
                    if let Op::Checksum { quick } = &mut op {
                        *quick = true;
                    }
                }
                words.pop();
            }
            _ => break,
        }
    }
    let rest = &words[at + 1..];
    let mut names = Vec::new();
    for part in rest.split(|t| *t == Token::Comma) {
        let idents: Vec<String> = part
            .iter()
            .filter(|t| **t != Token::Period)
            .map(|t| match t {
                Token::Word(w) => Ok(w.value.clone()),
                _ => Err(bad()),
            })
            .collect::<SqlResult<_>>()?;
        let dots = part.iter().filter(|t| **t == Token::Period).count();
        match (idents.as_slice(), dots) {
            ([t], 0) => names.push((None, t.clone())),
            ([d, t], 1) => names.push((Some(d.clone()), t.clone())),
            _ => return Err(bad()),
        }
    }
    if names.is_empty() {
        return Err(bad());
    }
    Ok((op, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_options() {
        let (op, names) = parse("CHECK TABLE t, db.u QUICK FAST").unwrap();
        assert_eq!(op, Op::Check);
        assert_eq!(names, [(None, "t".into()), (Some("db".into()), "u".into())]);
        // One word is the name, also when it spells an option.
        let (_, names) = parse("CHECK TABLE quick").unwrap();
        assert_eq!(names, [(None, "quick".into())]);
        let (op, names) = parse("CHECKSUM TABLE t QUICK;").unwrap();
        assert_eq!(op, Op::Checksum { quick: true });
        assert_eq!(names, [(None, "t".into())]);
        let (op, _) = parse("checksum table t extended").unwrap();
        assert_eq!(op, Op::Checksum { quick: false });
        let (op, names) = parse("REPAIR NO_WRITE_TO_BINLOG TABLE `a b` USE_FRM").unwrap();
        assert_eq!(op, Op::Repair);
        assert_eq!(names, [(None, "a b".into())]);
        assert!(parse("OPTIMIZE TABLE t QUICK").is_err());
        assert!(parse("CHECK TABLE").is_err());
        assert!(parse("CHECK TABLE t EXTRA").is_err());
        assert!(parse("ANALYZE TABLE a.b.c").is_err());
    }
}
