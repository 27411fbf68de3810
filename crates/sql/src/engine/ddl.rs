//! Schema statements: databases, tables, indexes.
//!
//! How they map onto the cluster:
//! - `CREATE/DROP DATABASE`: a row of `mysql/def/skarv_databases`; dropping
//!   a database drops its tables first.
//! - `CREATE TABLE`: one `Session::create_table` of `db/def/name`, its SQL
//!   declarations in the definition's `sql_meta` ([`catalog::meta`]). As NDB
//!   does, the primary key also gets an ordered index named `PRIMARY`, and a
//!   `UNIQUE` key `u` is a unique hash index `u$unique` plus an ordered
//!   index `u` (ranges and `ORDER BY` on it); `KEY`/`INDEX` is an ordered
//!   index.
//! - `ALTER TABLE`, `CREATE/DROP INDEX`, `RENAME TABLE`: one
//!   `Session::alter_table` with the new definition when the dictionary can
//!   make it online (a new name, renamed columns, columns added at the end,
//!   indexes added or dropped, metadata changed); else a copy of the rows
//!   into a new table (`alter_copy`); a change of the primary key is 1105.
//! - `TRUNCATE`: drop and create again with the same definition, as NDB
//!   does: one schema change instead of deleting every row, and the
//!   auto-increment restarts (the new table has a new id). Not atomic with
//!   concurrent DML on other SQL nodes, which may see 1146 for a moment.
//!
//! Character sets: values are stored as UTF-8 under one of the storage's
//! two collations. `utf8mb4`/`utf8`/`utf8mb3` and their `_bin` and
//! `_general_ci` collations map exactly; their other collations
//! (`utf8mb4_0900_ai_ci`, `_unicode_ci`, …) map to `utf8mb4_general_ci` with
//! a warning; `latin1`/`ascii` are stored as utf8mb4 with a warning (every
//! latin1 value is representable); `binary` makes the binary types; any
//! other character set is 1115, any other collation 1273.

use schema::{Collation, Column, IndexDef, IndexKind, TableDef, Value};
use sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnOption, CreateTable, CreateTableOptions,
    DataType, ExactNumberInfo, Expr, ObjectName, ObjectType, SqlOption, Statement, TableConstraint,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::catalog::{self, meta, BlobSize, FixedDigits, SqlType, TableInfo};
use super::expr::Dec;
use super::{Answered, Conn};
use crate::backend::OkInfo;
use crate::error::{codes, SqlError, SqlResult};

/// Name of the ordered index NDB gives a primary key, and MySQL's name of
/// the primary key in SHOW INDEX.
pub const PRIMARY: &str = "PRIMARY";
/// Suffix of the unique hash index of a UNIQUE key (NDB's `u$unique`); the
/// key's ordered index has the key's own name.
pub const UNIQUE_SUFFIX: &str = "$unique";
/// Longest ENUM or SET member, in characters (MySQL's).
const ENUM_MEMBER_CHARS_MAX: usize = 255;
/// Most ENUM members (MySQL's), and most SET members (a bit each in 64).
const ENUM_MEMBERS_MAX: usize = 65_535;
const SET_MEMBERS_MAX: usize = 64;
/// Longest CHAR and BINARY, VARCHAR and VARBINARY the storage holds.
const CHAR_CHARS_MAX: u64 = 255;
const VARCHAR_CHARS_MAX: u64 = 65_535;
/// DECIMAL's limits (MySQL's): precision and scale.
const DECIMAL_PRECISION_MAX: u64 = 65;
const DECIMAL_SCALE_MAX: i64 = super::expr::value::DECIMAL_SCALE_MAX as i64;
/// Most fractional-second digits.
const FSP_MAX: u64 = 6;
/// Most BIT bits.
const BIT_BITS_MAX: u64 = 64;
/// Longest table or column comment, in characters (MySQL's).
const COMMENT_CHARS_MAX: usize = 2_048;

fn err(code: u16, state: &'static str, message: impl Into<String>) -> SqlError {
    SqlError {
        code,
        state,
        message: message.into(),
    }
}

/// The parts of an object name: `(database, name)`.
pub fn object_name(name: &ObjectName) -> SqlResult<(Option<String>, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p.as_ident() {
            Some(ident) => Ok(ident.value.clone()),
            None => Err(SqlError::unsupported(format_args!("the name `{name}`"))),
        })
        .collect::<SqlResult<_>>()?;
    match parts.as_slice() {
        [name] => Ok((None, name.clone())),
        [db, name] => Ok((Some(db.clone()), name.clone())),
        _ => Err(SqlError::syntax(format_args!("near '{name}'"))),
    }
}

/// The database a statement means: the one it names, else the current one
/// (1046 when neither).
fn database_of(conn: &Conn<'_>, db: Option<String>) -> SqlResult<String> {
    db.or_else(|| conn.session.database.clone())
        .ok_or_else(|| SqlError::new(codes::NO_DB, "No database selected"))
}

fn access_denied(db: &str) -> SqlError {
    SqlError::new(
        codes::DBACCESS_DENIED,
        format!("Access denied for user to database '{db}'"),
    )
}

fn ok() -> SqlResult<Answered> {
    Ok(Answered::Ok(OkInfo::default()))
}

/// MariaDB's answer to an ALTER TABLE (and CREATE/DROP INDEX): the rows
/// a copying ALTER copied as affected, and its info line.
fn altered(conn: &Conn<'_>, rows: u64) -> SqlResult<Answered> {
    Ok(Answered::Ok(OkInfo {
        affected_rows: rows,
        info: format!(
            "Records: {rows}  Duplicates: 0  Warnings: {}",
            conn.session.warning_count()
        ),
        ..OkInfo::default()
    }))
}

fn ok_rows(rows: u64) -> SqlResult<Answered> {
    Ok(Answered::Ok(OkInfo {
        affected_rows: rows,
        ..OkInfo::default()
    }))
}

// ---- what sqlparser does not parse ----

/// What `CREATE TABLE … SELECT` does with a row whose key is taken:
/// fails the statement, or (`IGNORE`) skips it, or (`REPLACE`) replaces
/// the row, as `INSERT`'s forms do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Duplicates {
    /// Neither: 1062 ends the statement.
    #[default]
    Error,
    /// `IGNORE`.
    Ignore,
    /// `REPLACE`.
    Replace,
}

/// A schema statement recognised before `sqlparser` parses (see
/// [`recognise`]).
#[derive(Clone, Debug)]
pub enum CatalogStmt {
    /// `CREATE TABLE` with `PARTITION BY KEY (cols) [PARTITIONS n]` and/or
    /// a double-quoted table comment, which sqlparser refuses: the
    /// statement parsed without them, and what they said.
    CreateTable {
        /// The statement, parsed.
        statement: Box<Statement>,
        /// `PARTITION BY KEY (…)`'s columns.
        partition_key: Vec<String>,
        /// `PARTITIONS n`.
        partitions: Option<u32>,
        /// `IGNORE` or `REPLACE` before `[AS] SELECT`.
        duplicates: Duplicates,
    },
    /// `SHOW CREATE DATABASE|SCHEMA [IF NOT EXISTS] name`.
    ShowCreateDatabase {
        /// The database.
        name: String,
        /// `IF NOT EXISTS` (shown in the answer, as MySQL does).
        if_not_exists: bool,
    },
    /// `ALTER TABLE t` with table options only (`COMMENT`, `ENGINE`,
    /// `AUTO_INCREMENT`), which sqlparser refuses in ALTER.
    AlterTableOptions {
        /// The table's database, if named.
        db: Option<String>,
        /// The table.
        table: String,
        /// `COMMENT [=] '…'`.
        comment: Option<String>,
        /// `ENGINE [=] name`.
        engine: Option<String>,
        /// `AUTO_INCREMENT [=] n`.
        auto_increment: Option<u64>,
        /// `DISABLE KEYS` / `ENABLE KEYS` (a dump's, around its INSERTs):
        /// nothing to do, the indexes are kept as rows are written.
        keys: bool,
    },
    /// `ALTER TABLE` with MySQL's `DROP CHECK name` or `RENAME INDEX a TO
    /// b`, which sqlparser does not parse (`alter_mended`).
    AlterTable {
        /// The statement, parsed (`DROP CONSTRAINT` for `DROP CHECK`).
        statement: Box<Statement>,
        /// The indexes renamed (old, new), taken out of the statement.
        index_renames: Vec<(String, String)>,
    },
    /// `SHOW TABLE STATUS [FROM|IN db] [LIKE 'pattern']`.
    ShowTableStatus {
        /// The database named.
        db: Option<String>,
        /// The LIKE pattern.
        like: Option<String>,
        /// The WHERE condition's text.
        filter: Option<String>,
    },
}

/// Whether [`recognise`] may take a statement whose first two words are
/// these (upper case): for any other statement the caller skips it and
/// the text it reads (an INSERT of many rows would pay for both).
pub fn may_recognise(first: &str, second: &str) -> bool {
    matches!(
        (first, second),
        ("SHOW", "CREATE" | "TABLE") | ("CREATE" | "ALTER", "TABLE")
    )
}

/// Recognises the schema statements `sqlparser` does not parse, from one
/// statement's text (a trailing `;` allowed): None for every other
/// statement, which the caller parses as usual. The session's
/// `parse_query` calls it before parsing each statement and runs a
/// recognised one with [`run`].
pub fn recognise(sql: &str) -> Option<SqlResult<CatalogStmt>> {
    let tokens = Tokenizer::new(&MySqlDialect {}, sql).tokenize().ok()?;
    let words: Vec<(usize, &Token)> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t, Token::Whitespace(_)))
        .collect();
    let word = |i: usize| match words.get(i) {
        Some((_, Token::Word(w))) => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let first = word(0)?;
    let second = word(1);
    if !may_recognise(&first, second.as_deref().unwrap_or("")) {
        return None;
    }
    match (first.as_str(), second.as_deref()) {
        ("SHOW", Some("CREATE")) if matches!(word(2).as_deref(), Some("DATABASE" | "SCHEMA")) => {
            let mut at = 3;
            let mut if_not_exists = false;
            if word(3).as_deref() == Some("IF")
                && word(4).as_deref() == Some("NOT")
                && word(5).as_deref() == Some("EXISTS")
            {
                if_not_exists = true;
                at = 6;
            }
            let name = match words.get(at) {
                Some((_, Token::Word(w))) => w.value.clone(),
                _ => return Some(Err(SqlError::syntax("SHOW CREATE DATABASE needs a name"))),
            };
            if !rest_is_empty(&words[at + 1..]) {
                return Some(Err(SqlError::syntax(format_args!("near '{name}'"))));
            }
            Some(Ok(CatalogStmt::ShowCreateDatabase {
                name,
                if_not_exists,
            }))
        }
        ("SHOW", Some("TABLE")) if word(2).as_deref() == Some("STATUS") => {
            let mut at = 3;
            let mut db = None;
            let mut like = None;
            if matches!(word(at).as_deref(), Some("FROM" | "IN")) {
                match words.get(at + 1) {
                    Some((_, Token::Word(w))) => db = Some(w.value.clone()),
                    _ => return Some(Err(SqlError::syntax("SHOW TABLE STATUS FROM needs a name"))),
                }
                at += 2;
            }
            if word(at).as_deref() == Some("LIKE") {
                match words.get(at + 1) {
                    Some((_, Token::SingleQuotedString(s) | Token::DoubleQuotedString(s))) => {
                        like = Some(s.clone())
                    }
                    _ => return Some(Err(SqlError::syntax("LIKE needs a string"))),
                }
                at += 2;
            } else if word(at).as_deref() == Some("WHERE") {
                let Some((from, _)) = words.get(at + 1) else {
                    return Some(Err(SqlError::syntax("WHERE needs a condition")));
                };
                let text: String = tokens[*from..].iter().map(|t| t.to_string()).collect();
                let text = text.trim_end().trim_end_matches(';').to_owned();
                return Some(Ok(CatalogStmt::ShowTableStatus {
                    db,
                    like,
                    filter: Some(text),
                }));
            }
            if !rest_is_empty(&words[at.min(words.len())..]) {
                return Some(Err(SqlError::syntax("near the end of SHOW TABLE STATUS")));
            }
            Some(Ok(CatalogStmt::ShowTableStatus {
                db,
                like,
                filter: None,
            }))
        }
        ("CREATE", Some("TABLE")) => create_table_extras(sql, &tokens),
        ("ALTER", Some("TABLE")) => {
            alter_table_options(&words[2..]).or_else(|| alter_mended(&tokens))
        }
        _ => None,
    }
}

/// `[db.]t option [,] option …` after `ALTER TABLE`, where every option
/// is a table option sqlparser does not take in ALTER; None otherwise.
fn alter_table_options(words: &[(usize, &Token)]) -> Option<SqlResult<CatalogStmt>> {
    let ident = |t: &Token| match t {
        Token::Word(w) => Some(w.value.clone()),
        _ => None,
    };
    let (db, table, mut at) = match words {
        [(_, a), (_, Token::Period), (_, b), ..] => (Some(ident(a)?), ident(b)?, 3),
        [(_, a), ..] => (None, ident(a)?, 1),
        [] => return None,
    };
    let mut comment = None;
    let mut engine = None;
    let mut auto_increment = None;
    let mut keys = false;
    let mut any = false;
    while at < words.len() {
        let token = words[at].1;
        if matches!(token, Token::Comma) {
            at += 1;
            continue;
        }
        if matches!(token, Token::SemiColon | Token::EOF) {
            break;
        }
        let Token::Word(w) = token else {
            return None;
        };
        let key = w.value.to_ascii_uppercase();
        let next_is_keys = matches!(words.get(at + 1), Some((_, Token::Word(k))) if k.value.eq_ignore_ascii_case("KEYS"));
        if matches!(key.as_str(), "DISABLE" | "ENABLE") && next_is_keys {
            keys = true;
            any = true;
            at += 2;
            continue;
        }
        if !matches!(key.as_str(), "COMMENT" | "ENGINE" | "AUTO_INCREMENT") {
            return None;
        }
        at += 1;
        if matches!(words.get(at), Some((_, Token::Eq))) {
            at += 1;
        }
        let value = match words.get(at) {
            Some((_, Token::SingleQuotedString(v) | Token::DoubleQuotedString(v))) => v.clone(),
            Some((_, Token::Word(v))) => v.value.clone(),
            Some((_, Token::Number(n, _))) => n.clone(),
            _ => return Some(Err(SqlError::syntax(format_args!("{key} needs a value")))),
        };
        at += 1;
        any = true;
        match key.as_str() {
            "COMMENT" => comment = Some(value),
            "ENGINE" => engine = Some(value),
            _ => match value.parse::<u64>() {
                Ok(n) => auto_increment = Some(n),
                Err(_) => {
                    return Some(Err(SqlError::syntax(format_args!(
                        "AUTO_INCREMENT={value}"
                    ))))
                }
            },
        }
    }
    if !any {
        return None;
    }
    Some(Ok(CatalogStmt::AlterTableOptions {
        db,
        table,
        comment,
        engine,
        auto_increment,
        keys,
    }))
}

/// `ALTER TABLE …` with clauses of MySQL's that sqlparser does not parse;
/// None when there is none:
///
/// - `DROP CHECK name` (MySQL 8's, which Django sends to a server that
///   says MySQL): parsed as `DROP CONSTRAINT`. Django names a check that
///   is named after its one column (MariaDB's name for a column's CHECK,
///   which Skarv gives) `__unnamed_constraint_<n>__` and drops it by that
///   name before it redefines the column: that DROP becomes `DROP
///   CONSTRAINT IF EXISTS` (a note, as Django's MariaDB backend sends),
///   and the redefinition drops the column's check.
/// - `RENAME {INDEX|KEY} old TO new` (GORM's `RenameIndex`): taken out of
///   the statement and kept beside it (`CatalogStmt::AlterTable`'s
///   `index_renames`); a statement left with no clause gets `ALGORITHM =
///   DEFAULT`, which changes nothing.
fn alter_mended(tokens: &[Token]) -> Option<SqlResult<CatalogStmt>> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len() + 4);
    let mut depth = 0i32;
    let mut after_drop = false;
    let mut changed = false;
    let mut index_renames = Vec::new();
    let significant = |from: usize| {
        tokens[from..]
            .iter()
            .enumerate()
            .filter(|(_, t)| !matches!(t, Token::Whitespace(_)))
            .map(move |(i, t)| (from + i, t))
    };
    let mut skip_to = 0;
    for (at, token) in tokens.iter().enumerate() {
        if at < skip_to {
            continue;
        }
        match token {
            Token::Whitespace(_) => {
                out.push(token.clone());
                continue;
            }
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && w.keyword == Keyword::RENAME => {
                let next: Vec<(usize, &Token)> = significant(at + 1).take(5).collect();
                let word = |i: usize| match next.get(i) {
                    Some((_, Token::Word(w))) => Some(w),
                    _ => None,
                };
                let is = |i: usize, k: &str| {
                    word(i)
                        .is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k))
                };
                if (is(0, "INDEX") || is(0, "KEY")) && is(2, "TO") {
                    if let (Some(old), Some(new)) = (word(1), word(3)) {
                        index_renames.push((old.value.clone(), new.value.clone()));
                        changed = true;
                        // The clause and the comma after it go, or the one
                        // before it when it is the last.
                        skip_to = next[3].0 + 1;
                        if matches!(next.get(4), Some((_, Token::Comma))) {
                            skip_to = next[4].0 + 1;
                        } else if let Some(comma) = out
                            .iter()
                            .rposition(|t| !matches!(t, Token::Whitespace(_)))
                            .filter(|&i| matches!(out[i], Token::Comma))
                        {
                            out.truncate(comma);
                        }
                        continue;
                    }
                }
            }
            Token::Word(w) if depth == 0 && after_drop && w.keyword == Keyword::CHECK => {
                out.push(Token::make_keyword("CONSTRAINT"));
                let name = tokens[at + 1..]
                    .iter()
                    .find(|t| !matches!(t, Token::Whitespace(_)));
                if matches!(name, Some(Token::Word(n)) if is_djangos_unnamed(&n.value)) {
                    out.push(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
                    out.push(Token::make_keyword("IF"));
                    out.push(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
                    out.push(Token::make_keyword("EXISTS"));
                }
                changed = true;
                after_drop = false;
                continue;
            }
            _ => {}
        }
        out.push(token.clone());
        after_drop = depth == 0 && matches!(token, Token::Word(w) if w.keyword == Keyword::DROP);
    }
    if !changed {
        return None;
    }
    // `ALTER TABLE [db.]t` and nothing after: a clause that does nothing.
    let words: Vec<&Token> = out
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon))
        .collect();
    let bare = matches!(
        &words[2..],
        [Token::Word(_)] | [Token::Word(_), Token::Period, Token::Word(_)]
    );
    if bare {
        let space = || Token::Whitespace(sqlparser::tokenizer::Whitespace::Space);
        out.extend([
            space(),
            Token::make_keyword("ALGORITHM"),
            space(),
            Token::Eq,
            space(),
            Token::make_keyword("DEFAULT"),
        ]);
    }
    let text: String = out.iter().map(token_text).collect();
    Some(match super::parse(&text) {
        Ok(mut statements) if statements.len() == 1 => Ok(CatalogStmt::AlterTable {
            statement: Box::new(statements.remove(0)),
            index_renames,
        }),
        Ok(_) => Err(SqlError::syntax("one ALTER TABLE expected")),
        Err(e) => Err(e),
    })
}

/// Django's name for a constraint named after its column:
/// `__unnamed_constraint_<n>__`.
fn is_djangos_unnamed(name: &str) -> bool {
    name.strip_prefix("__unnamed_constraint_")
        .and_then(|rest| rest.strip_suffix("__"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn rest_is_empty(rest: &[(usize, &Token)]) -> bool {
    rest.iter()
        .all(|(_, t)| matches!(t, Token::SemiColon | Token::EOF))
}

/// `CREATE TABLE` with `PARTITION BY KEY` or `COMMENT "…"`: rewritten
/// without them (the comment single-quoted) and parsed.
fn create_table_extras(_sql: &str, tokens: &[Token]) -> Option<SqlResult<CatalogStmt>> {
    let mut depth = 0i32;
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut partition_key = Vec::new();
    let mut partitions = None;
    let mut duplicates = Duplicates::Error;
    // The query began: its parentheses are its own.
    let mut query_started = false;
    let mut changed = false;
    let mut i = 0;
    let significant = |from: usize| {
        tokens[from..]
            .iter()
            .enumerate()
            .find(|(_, t)| !matches!(t, Token::Whitespace(_)))
            .map(|(k, t)| (from + k, t))
    };
    let is_kw = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth == 0
            && (is_kw(token, Keyword::SELECT)
                || is_kw(token, Keyword::WITH)
                || is_kw(token, Keyword::AS))
        {
            query_started = true;
        }
        if depth == 1 && matches!(token, Token::LParen) && !query_started {
            // `CREATE TABLE t [(…)] (SELECT …)`: the query parses after AS.
            let query = significant(i + 1)
                .is_some_and(|(_, t)| is_kw(t, Keyword::SELECT) || is_kw(t, Keyword::WITH));
            let after_as = out
                .iter()
                .rev()
                .find(|t| !matches!(t, Token::Whitespace(_)))
                .is_some_and(|t| is_kw(t, Keyword::AS));
            if query && !after_as {
                out.push(Token::make_keyword("AS"));
                out.push(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
                changed = true;
            }
        }
        if depth == 0 && is_kw(token, Keyword::COMMENT) {
            // COMMENT [=] "text" → COMMENT [=] 'text'
            out.push(token.clone());
            i += 1;
            if let Some((k, t)) = significant(i) {
                let (k, t) = if matches!(t, Token::Eq) {
                    out.extend(tokens[i..=k].iter().cloned());
                    i = k + 1;
                    match significant(i) {
                        Some(x) => x,
                        None => break,
                    }
                } else {
                    (k, t)
                };
                if let Token::DoubleQuotedString(s) = t {
                    out.extend(tokens[i..k].iter().cloned());
                    out.push(Token::SingleQuotedString(s.clone()));
                    i = k + 1;
                    changed = true;
                }
            }
            continue;
        }
        if depth == 0
            && !query_started
            && (is_kw(token, Keyword::IGNORE) || is_kw(token, Keyword::REPLACE))
        {
            // `IGNORE | REPLACE [AS] SELECT`: taken out, and kept.
            let next = significant(i + 1).map(|(_, t)| t);
            let parenthesised = next.is_some_and(|t| matches!(t, Token::LParen));
            let query_follows = parenthesised
                || next.is_some_and(|t| {
                    is_kw(t, Keyword::AS) || is_kw(t, Keyword::SELECT) || is_kw(t, Keyword::WITH)
                });
            if query_follows && duplicates == Duplicates::Error {
                duplicates = if is_kw(token, Keyword::IGNORE) {
                    Duplicates::Ignore
                } else {
                    Duplicates::Replace
                };
                if parenthesised {
                    // `(SELECT …)` parses after an AS.
                    out.push(Token::make_keyword("AS"));
                }
                i += 1;
                changed = true;
                continue;
            }
        }
        if depth == 0 && is_kw(token, Keyword::PARTITION) {
            let Some((k1, by)) = significant(i + 1) else {
                break;
            };
            let Some((k2, key)) = significant(k1 + 1) else {
                break;
            };
            if !is_kw(by, Keyword::BY) {
                break;
            }
            let linear = matches!(key, Token::Word(w) if w.value.eq_ignore_ascii_case("LINEAR"));
            let (k2, key) = if linear {
                match significant(k2 + 1) {
                    Some(x) => x,
                    None => break,
                }
            } else {
                (k2, key)
            };
            if !is_kw(key, Keyword::KEY) {
                let what = match key {
                    Token::Word(w) => w.value.to_ascii_uppercase(),
                    other => other.to_string(),
                };
                return Some(Err(SqlError::unsupported(format_args!(
                    "PARTITION BY {what} (only PARTITION BY KEY, the cluster's distribution)"
                ))));
            }
            let Some((k3, open)) = significant(k2 + 1) else {
                break;
            };
            if !matches!(open, Token::LParen) {
                return Some(Err(SqlError::syntax("PARTITION BY KEY needs ( columns )")));
            }
            let mut k = k3 + 1;
            loop {
                match significant(k) {
                    Some((at, Token::Word(w))) => {
                        partition_key.push(w.value.clone());
                        k = at + 1;
                    }
                    Some((at, Token::Comma)) => k = at + 1,
                    Some((at, Token::RParen)) => {
                        k = at + 1;
                        break;
                    }
                    _ => return Some(Err(SqlError::syntax("PARTITION BY KEY (columns"))),
                }
            }
            if let Some((at, t)) = significant(k) {
                if is_kw(t, Keyword::PARTITIONS) {
                    match significant(at + 1) {
                        Some((n_at, Token::Number(n, _))) => match n.parse::<u32>() {
                            Ok(n) if n > 0 => {
                                partitions = Some(n);
                                k = n_at + 1;
                            }
                            _ => {
                                return Some(Err(SqlError::syntax(format_args!("PARTITIONS {n}"))))
                            }
                        },
                        _ => return Some(Err(SqlError::syntax("PARTITIONS needs a number"))),
                    }
                }
            }
            i = k;
            changed = true;
            continue;
        }
        out.push(token.clone());
        i += 1;
    }
    if !changed {
        return None;
    }
    let text: String = out.iter().map(token_text).collect();
    let statement = match super::parse(&text) {
        Ok(mut statements) if statements.len() == 1 => statements.remove(0),
        Ok(_) => return Some(Err(SqlError::syntax("one CREATE TABLE expected"))),
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(CatalogStmt::CreateTable {
        statement: Box::new(statement),
        partition_key,
        partitions,
        duplicates,
    }))
}

/// A token as SQL text again: strings quoted and escaped (the tokenizer
/// took their escapes out, and its `Display` does not put them back).
fn token_text(token: &Token) -> String {
    let escape = |s: &str| s.replace('\\', "\\\\").replace('\'', "''");
    match token {
        Token::SingleQuotedString(s) => format!("'{}'", escape(s)),
        Token::DoubleQuotedString(s) => {
            format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\"\""))
        }
        other => other.to_string(),
    }
}

/// Runs a statement [`recognise`] made.
pub fn run(
    conn: &mut Conn<'_>,
    statement: &CatalogStmt,
    more: bool,
    sink: &mut dyn crate::backend::ResultSink,
) -> SqlResult<Answered> {
    let temporary = matches!(statement, CatalogStmt::CreateTable { statement, .. }
        if matches!(&**statement, Statement::CreateTable(c) if c.temporary));
    if !temporary
        && matches!(
            statement,
            CatalogStmt::CreateTable { .. }
                | CatalogStmt::AlterTableOptions { .. }
                | CatalogStmt::AlterTable { .. }
        )
    {
        // MySQL's implicit commit of a schema statement.
        super::txn::commit(conn)?;
    }
    match statement {
        CatalogStmt::CreateTable {
            statement,
            partition_key,
            partitions,
            duplicates,
        } => match &**statement {
            Statement::CreateTable(create) => {
                create_table(conn, create, partition_key, *partitions, *duplicates)
            }
            other => Err(SqlError::unsupported(format_args!("`{other}`"))),
        },
        CatalogStmt::ShowCreateDatabase {
            name,
            if_not_exists,
        } => super::show::show_create_database(conn, name, *if_not_exists, more, sink),
        CatalogStmt::AlterTableOptions {
            db,
            table,
            comment,
            engine,
            auto_increment,
            keys,
        } => {
            let info = catalog::table(conn, db.as_deref(), table)?;
            if comment.is_none() && engine.is_none() && auto_increment.is_none() {
                // Only DISABLE/ENABLE KEYS: MariaDB's note for an engine
                // without the option, and no change.
                if *keys {
                    catalog::note(
                        conn,
                        1031,
                        format!(
                            "Storage engine ndbcluster of the table `{}`.`{}` doesn't have this option",
                            info.db, info.name
                        ),
                    );
                }
                return Ok(Answered::Ok(crate::backend::OkInfo::default()));
            }
            let mut change = Change::new(&info);
            if let Some(comment) = comment {
                if comment.chars().count() > COMMENT_CHARS_MAX {
                    return Err(err(
                        1628,
                        "HY000",
                        format!(
                            "Comment for table '{table}' is too long (max = {COMMENT_CHARS_MAX})"
                        ),
                    ));
                }
                let (read_backup, fully_replicated) = ndb_table_options(conn, comment)?;
                if read_backup != change.def.read_backup
                    || fully_replicated != change.def.fully_replicated
                {
                    return Err(SqlError::unsupported(
                        "changing NDB_TABLE=READ_BACKUP/FULLY_REPLICATED of an existing table",
                    ));
                }
                change.sql.comment = comment.clone();
            }
            if let Some(engine) = engine {
                change.sql.engine = match engine.to_ascii_lowercase().as_str() {
                    "ndb" | "ndbcluster" => "ndbcluster".to_owned(),
                    "innodb" => "InnoDB".to_owned(),
                    _ => {
                        catalog::warn(
                            conn,
                            codes::WARN_USING_OTHER_HANDLER,
                            format!("Using storage engine ndbcluster for table '{table}'"),
                        );
                        change.sql.engine.clone()
                    }
                };
            }
            change.auto_increment = *auto_increment;
            let rows = change.apply(conn)?;
            altered(conn, rows)
        }
        CatalogStmt::AlterTable {
            statement,
            index_renames,
        } => match &**statement {
            Statement::AlterTable(alter) => {
                alter_table_renaming(conn, &alter.name, &alter.operations, index_renames)
            }
            other => Err(SqlError::unsupported(format_args!("`{other}`"))),
        },
        CatalogStmt::ShowTableStatus { db, like, filter } => {
            let Some(filter) = filter else {
                return super::show::show_table_status(
                    conn,
                    db.as_deref(),
                    like.as_deref(),
                    more,
                    sink,
                );
            };
            let cond = sqlparser::parser::Parser::new(&super::dialect::SkarvDialect)
                .try_with_sql(filter)
                .and_then(|mut p| p.parse_expr())
                .map_err(SqlError::syntax)?;
            super::show::filtered(conn, &cond, sink, |conn, sink| {
                super::show::show_table_status(conn, db.as_deref(), like.as_deref(), more, sink)
            })
        }
    }
}

// ---- the statements ----

/// Runs a schema statement.
pub fn statement(conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    match statement {
        Statement::CreateDatabase {
            db_name,
            if_not_exists,
            default_charset,
            default_collation,
            ..
        } => {
            let (None, name) = object_name(db_name)? else {
                return Err(SqlError::syntax(format_args!("near '{db_name}'")));
            };
            create_database(
                conn,
                &name,
                *if_not_exists,
                default_charset.as_deref(),
                default_collation.as_deref(),
            )
        }
        Statement::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => {
            let name = match schema_name {
                sqlparser::ast::SchemaName::Simple(name) => match object_name(name)? {
                    (None, name) => name,
                    _ => return Err(SqlError::syntax(format_args!("near '{name}'"))),
                },
                other => return Err(SqlError::unsupported(format_args!("CREATE SCHEMA {other}"))),
            };
            create_database(conn, &name, *if_not_exists, None, None)
        }
        Statement::CreateTable(create) => create_table(conn, create, &[], None, Duplicates::Error),
        Statement::CreateIndex(index) => {
            let (db, table) = object_name(&index.table_name)?;
            let Some(name) = &index.name else {
                return Err(SqlError::syntax("CREATE INDEX needs a name"));
            };
            let (_, name) = object_name(name)?;
            let columns = index_columns(&index.columns)?;
            let info = catalog::table(conn, db.as_deref(), &table)?;
            let mut change = Change::new(&info);
            change.add_index(Some(name), columns, index.unique)?;
            let rows = change.apply(conn)?;
            altered(conn, rows)
        }
        Statement::AlterTable(alter) => alter_table(conn, &alter.name, &alter.operations),
        Statement::Drop {
            object_type,
            if_exists,
            names,
            table,
            temporary,
            ..
        } => match object_type {
            ObjectType::Database | ObjectType::Schema => {
                let [name] = names.as_slice() else {
                    return Err(SqlError::syntax("DROP DATABASE takes one name"));
                };
                let (None, name) = object_name(name)? else {
                    return Err(SqlError::syntax(format_args!("near '{name}'")));
                };
                drop_database(conn, &name, *if_exists)
            }
            ObjectType::Table => drop_tables(conn, names, *if_exists, *temporary),
            ObjectType::Index => {
                let Some(table) = table else {
                    return Err(SqlError::syntax("DROP INDEX needs ON table"));
                };
                let (db, table) = object_name(table)?;
                let info = catalog::table(conn, db.as_deref(), &table)?;
                let mut change = Change::new(&info);
                for name in names {
                    let (_, name) = object_name(name)?;
                    change.drop_index(&name)?;
                }
                // (Dropping an index renames no column.)
                alter_foreign_keys(conn, &mut change, Vec::new())?;
                let rows = change.apply(conn)?;
                altered(conn, rows)
            }
            other => Err(SqlError::unsupported(format_args!("DROP {other}"))),
        },
        Statement::Truncate(truncate) => {
            for target in &truncate.table_names {
                let (db, name) = object_name(&target.name)?;
                truncate_table(conn, db.as_deref(), &name)?;
            }
            ok()
        }
        Statement::RenameTable(pairs) => rename_tables(conn, pairs),
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

// ---- databases ----

/// A character set's or collation's name as written, quoted or not
/// (`COLLATE 'utf8mb4_bin'`, which knex sends, is `utf8mb4_bin`).
fn charset_name(name: &sqlparser::ast::ObjectName) -> String {
    crate::engine::expr::name_parts(name).join(".")
}

/// The character set and collation a database or table declares, checked
/// and mapped: `(charset, collation name, storage collation)`.
fn charset_collation(
    conn: &mut Conn<'_>,
    charset: Option<&str>,
    collation: Option<&str>,
    inherited: (&str, &str),
) -> SqlResult<(String, String)> {
    let charset = charset.map(str::to_ascii_lowercase);
    let collation = collation.map(str::to_ascii_lowercase);
    let charset = match (&charset, &collation) {
        (Some(c), _) => c.clone(),
        (None, Some(coll)) => {
            let cs = coll.split('_').next().unwrap_or("");
            if !matches!(
                cs,
                "utf8mb4" | "utf8" | "utf8mb3" | "latin1" | "ascii" | "binary"
            ) {
                return Err(SqlError::new(
                    codes::UNKNOWN_COLLATION,
                    format!("Unknown collation: '{coll}'"),
                ));
            }
            cs.to_owned()
        }
        (None, None) => return Ok((inherited.0.to_owned(), inherited.1.to_owned())),
    };
    let charset = match charset.as_str() {
        "utf8mb4" | "utf8" | "utf8mb3" => "utf8mb4".to_owned(),
        "latin1" | "ascii" => {
            catalog::warn(
                conn,
                codes::UNKNOWN,
                format!("character set '{charset}' is stored as utf8mb4 in Skarv"),
            );
            "utf8mb4".to_owned()
        }
        "binary" => "binary".to_owned(),
        other => {
            return Err(SqlError::new(
                codes::UNKNOWN_CHARACTER_SET,
                format!("Unknown character set: '{other}'"),
            ))
        }
    };
    let collation = match collation {
        None if charset == "binary" => "binary".to_owned(),
        None => "utf8mb4_general_ci".to_owned(),
        Some(coll) => {
            let (cs, rest) = coll.split_once('_').unwrap_or((coll.as_str(), ""));
            let known_charset = matches!(cs, "utf8mb4" | "utf8" | "utf8mb3" | "latin1" | "ascii");
            if coll == "binary" {
                "binary".to_owned()
            } else if !known_charset || rest.is_empty() {
                return Err(SqlError::new(
                    codes::UNKNOWN_COLLATION,
                    format!("Unknown collation: '{coll}'"),
                ));
            } else if rest == "bin" {
                "utf8mb4_bin".to_owned()
            } else if rest == "general_ci" && matches!(cs, "utf8mb4" | "utf8" | "utf8mb3") {
                "utf8mb4_general_ci".to_owned()
            } else {
                catalog::warn(
                    conn,
                    codes::UNKNOWN,
                    format!("collation '{coll}' is stored as utf8mb4_general_ci in Skarv"),
                );
                "utf8mb4_general_ci".to_owned()
            }
        }
    };
    Ok((charset, collation))
}

fn storage_collation(name: &str) -> Collation {
    if name == "utf8mb4_bin" {
        Collation::Utf8mb4Bin
    } else {
        Collation::Utf8mb4GeneralCi
    }
}

fn create_database(
    conn: &mut Conn<'_>,
    name: &str,
    if_not_exists: bool,
    charset: Option<&str>,
    collation: Option<&str>,
) -> SqlResult<Answered> {
    catalog::check_name(name, true)?;
    let exists = || {
        SqlError::new(
            codes::DB_CREATE_EXISTS,
            format!("Can't create database '{name}'; database exists"),
        )
    };
    if name.eq_ignore_ascii_case("performance_schema") {
        return Err(SqlError::unsupported(
            "performance_schema: Skarv has none and cannot create one",
        ));
    }
    let (charset, collation) = charset_collation(
        conn,
        charset,
        collation,
        (catalog::DEFAULT_CHARSET, catalog::DEFAULT_COLLATION),
    )?;
    let created = if catalog::is_virtual_db(name) || name == catalog::SYSTEM_DB {
        false
    } else {
        catalog::insert_database(
            conn,
            &catalog::Database {
                name: name.to_owned(),
                charset,
                collation,
            },
        )?
    };
    if created {
        return ok_rows(1);
    }
    if if_not_exists {
        let e = exists();
        catalog::note(conn, e.code, e.message);
        return ok();
    }
    Err(exists())
}

fn drop_database(conn: &mut Conn<'_>, name: &str, if_exists: bool) -> SqlResult<Answered> {
    if catalog::is_virtual_db(name) || name == catalog::SYSTEM_DB {
        return Err(access_denied(name));
    }
    let missing = || {
        SqlError::new(
            codes::DB_DROP_EXISTS,
            format!("Can't drop database '{name}'; database doesn't exist"),
        )
    };
    if !catalog::database_exists(conn, name)? {
        if if_exists {
            let e = missing();
            catalog::note(conn, e.code, e.message);
            return ok();
        }
        return Err(missing());
    }
    let tables = catalog::table_names(conn, name)?;
    for table in &tables {
        drop_one(conn, name, table)?;
    }
    super::views::drop_database(conn, name)?;
    catalog::delete_database(conn, name)?;
    if conn.session.database.as_deref() == Some(name) {
        conn.session.database = None;
    }
    ok_rows(tables.len() as u64)
}

// ---- tables ----

/// Drops one table and its sequence; `Ok(false)` when it did not exist.
/// 1044 for the SQL node's own tables (`mysql.skarv_*`): dropping or
/// changing them would break every SQL node.
fn check_not_system(db: &str, name: &str) -> SqlResult<()> {
    let cluster = catalog::cluster_name(db, name);
    if cluster == catalog::DATABASES_TABLE || cluster == catalog::SEQUENCES_TABLE {
        return Err(SqlError::new(
            codes::DBACCESS_DENIED,
            format!("Access denied to '{db}.{name}': a system table of the SQL nodes"),
        ));
    }
    Ok(())
}

/// Drops `db`.`name`: the connection's temporary table of the name if it
/// has one, else the table. False: there is none.
pub(super) fn drop_one(conn: &mut Conn<'_>, db: &str, name: &str) -> SqlResult<bool> {
    check_not_system(db, name)?;
    let info = match catalog::table(conn, Some(db), name) {
        Ok(info) => info,
        Err(e) if e.code == codes::TABLE_NOT_FOUND => return Ok(false),
        Err(e) => return Err(e),
    };
    if info.is_temporary() {
        conn.temporary.remove(db, name);
    }
    match conn.native.drop_table(&info.native.def().name) {
        Ok(()) => {}
        Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => return Ok(false),
        Err(e) => return Err(catalog::native_error(&e)),
    }
    catalog::drop_sequence(conn, info.id())?;
    if !info.sql.foreign_keys.is_empty() {
        super::foreign::dropped(conn, &info);
    }
    Ok(true)
}

/// DROP [TEMPORARY] TABLE: `temporary` drops only the connection's
/// temporary tables (another name is unknown).
fn drop_tables(
    conn: &mut Conn<'_>,
    names: &[ObjectName],
    if_exists: bool,
    temporary: bool,
) -> SqlResult<Answered> {
    let mut missing = Vec::new();
    let mut dropped: Vec<(String, String)> = Vec::with_capacity(names.len());
    for name in names {
        let (db, table) = object_name(name)?;
        dropped.push((database_of(conn, db)?, table));
    }
    if conn.session.foreign_key_checks() && !temporary {
        // A parent goes only with every table that references it.
        for (db, table) in &dropped {
            let Ok(info) = catalog::table(conn, Some(db), table) else {
                continue;
            };
            if info.is_temporary() || info.sql.referenced_by.is_empty() {
                continue;
            }
            let children = super::foreign::children_of(conn, &info)?;
            if children
                .iter()
                .any(|(c, _)| !dropped.iter().any(|(d, t)| *d == c.db && *t == c.name))
            {
                return Err(SqlError::new(
                    codes::ROW_IS_REFERENCED_2,
                    "Cannot delete or update a parent row: a foreign key constraint fails",
                ));
            }
        }
    }
    for (db, table) in dropped {
        if catalog::is_virtual_db(&db) {
            return Err(access_denied(&db));
        }
        if temporary && conn.temporary.find(&db, &table).is_none() {
            missing.push(format!("{db}.{table}"));
            continue;
        }
        if !drop_one(conn, &db, &table)? {
            missing.push(format!("{db}.{table}"));
        }
    }
    if missing.is_empty() {
        return ok();
    }
    let e = SqlError::new(
        codes::BAD_TABLE,
        format!("Unknown table '{}'", missing.join(",")),
    );
    if if_exists {
        catalog::note(conn, e.code, e.message);
        return ok();
    }
    Err(e)
}

fn truncate_table(conn: &mut Conn<'_>, db: Option<&str>, name: &str) -> SqlResult<()> {
    let info = catalog::table(conn, db, name)?;
    check_not_system(&info.db, &info.name)?;
    if conn.session.foreign_key_checks() && !info.sql.referenced_by.is_empty() {
        let children = super::foreign::children_of(conn, &info)?;
        if let Some((child, fk)) = children
            .iter()
            .find(|(c, _)| !(c.db == info.db && c.name == info.name))
        {
            return Err(SqlError::new(
                codes::TRUNCATE_ILLEGAL_FK,
                format!(
                    "Cannot truncate a table referenced in a foreign key constraint \
                     (`{}`.`{}`, {})",
                    child.db,
                    child.name,
                    super::foreign::describe(&child.db, fk, true)
                ),
            ));
        }
    }
    // The cluster table's own name: a temporary table's is hidden.
    let cluster = info.native.def().name.clone();
    let mut def = info.native.def().clone();
    def.id = 0;
    def.version = 0;
    for index in &mut def.indexes {
        index.id = 0;
    }
    conn.native
        .drop_table(&cluster)
        .map_err(|e| catalog::native_error(&e))?;
    catalog::drop_sequence(conn, info.id())?;
    conn.native
        .create_table(&def)
        .map_err(|e| catalog::native_error(&e))?;
    Ok(())
}

/// What a column declares beyond its type.
struct ColumnSpec {
    column: Column,
    meta: meta::ColumnMeta,
    primary: bool,
    unique: bool,
    /// Its CHECK conditions as SQL text (a JSON column's is MariaDB's
    /// implicit `json_valid(col)`).
    checks: Vec<String>,
}

pub(super) fn create_table(
    conn: &mut Conn<'_>,
    create: &CreateTable,
    partition_key: &[String],
    partitions: Option<u32>,
    duplicates: Duplicates,
) -> SqlResult<Answered> {
    let (db, name) = object_name(&create.name)?;
    let db = database_of(conn, db)?;
    if catalog::is_virtual_db(&db) {
        return Err(access_denied(&db));
    }
    catalog::check_name(&name, false)?;
    let database = catalog::database(conn, &db)?;
    if create.or_replace {
        return Err(SqlError::unsupported("CREATE OR REPLACE TABLE"));
    }
    let exists = || {
        SqlError::new(
            codes::TABLE_EXISTS,
            format!("Table '{name}' already exists"),
        )
    };
    // A temporary table's name is taken only by the connection's others;
    // a table's by tables (a temporary one hides it, and may stay).
    let has_temporary = conn.temporary.find(&db, &name).is_some();
    let taken = if create.temporary {
        has_temporary
    } else {
        conn.native
            .table(&catalog::cluster_name(&db, &name))
            .is_ok()
    };
    // MySQL answers IF NOT EXISTS before looking at the definition.
    if create.if_not_exists && taken {
        let e = exists();
        catalog::note(conn, e.code, e.message);
        return ok();
    }
    if create.temporary && taken {
        return Err(exists());
    }
    if create.temporary && conn.temporary.len() >= catalog::TEMPORARY_TABLES_MAX {
        return Err(SqlError::unsupported(format_args!(
            "more than {} temporary tables in one connection",
            catalog::TEMPORARY_TABLES_MAX
        )));
    }
    if let Some(query) = &create.query {
        if create.like.is_some() {
            return Err(SqlError::syntax("CREATE TABLE … LIKE takes no SELECT"));
        }
        if taken {
            return Err(exists());
        }
        if has_temporary {
            // Its rows would go to the temporary table of the name.
            return Err(SqlError::unsupported(format_args!(
                "CREATE TABLE … SELECT of a table named as a temporary table ('{name}') of \
                 the connection"
            )));
        }
        return super::create_select::run(
            conn,
            create,
            query,
            (&db, &name),
            partition_key,
            partitions,
            duplicates,
        );
    }
    let def = if let Some(like) = &create.like {
        let source = match like {
            sqlparser::ast::CreateTableLikeKind::Plain(l)
            | sqlparser::ast::CreateTableLikeKind::Parenthesized(l) => &l.name,
        };
        let (sdb, sname) = object_name(source)?;
        let source = catalog::table(conn, sdb.as_deref(), &sname)?;
        let mut def = source.native.def().clone();
        def.name = catalog::cluster_name(&db, &name);
        def.id = 0;
        def.version = 0;
        for index in &mut def.indexes {
            index.id = 0;
        }
        // As InnoDB's, LIKE copies no FOREIGN KEY (nor the parent's list
        // of its children).
        if !source.sql.foreign_keys.is_empty() || !source.sql.referenced_by.is_empty() {
            let mut sql = source.sql.clone();
            sql.foreign_keys.clear();
            sql.referenced_by.clear();
            def.sql_meta = sql.encode();
        }
        def
    } else {
        table_def(
            conn,
            create,
            &db,
            &name,
            &database,
            partition_key,
            partitions,
        )?
    };
    let mut def = def;
    if create.temporary {
        let node = u32::from(conn.engine.cluster.node_id().get());
        def.name = conn.temporary.new_cluster_name(&db, node, conn.info.id);
    }
    let fks = if create.temporary {
        Vec::new()
    } else {
        meta::TableMeta::decode(&def.sql_meta)
            .map(|m| m.foreign_keys)
            .unwrap_or_default()
    };
    super::foreign::note_children(conn, (&db, &name), &fks)?;
    match conn.native.create_table(&def) {
        Ok(_) if !create.temporary => {
            super::foreign::adopt_children(conn, (&db, &name))?;
            ok()
        }
        Ok(_) if create.temporary => {
            conn.temporary.add(catalog::Temporary {
                db: db.clone(),
                name: name.clone(),
                cluster: def.name.clone(),
            });
            ok()
        }
        Ok(_) => ok(),
        Err(e) if e.code == skarv_client::codes::ALREADY_EXISTS => {
            if create.if_not_exists {
                let e = exists();
                catalog::note(conn, e.code, e.message);
                ok()
            } else {
                Err(exists())
            }
        }
        Err(e) => Err(catalog::native_error(&e)),
    }
}

/// Table options of CREATE TABLE.
struct TableOptions {
    engine: String,
    comment: String,
    charset: Option<String>,
    collation: Option<String>,
    auto_increment: Option<u64>,
}

fn table_options_list(create: &CreateTable) -> &[SqlOption] {
    match &create.table_options {
        CreateTableOptions::None => &[],
        CreateTableOptions::Plain(o)
        | CreateTableOptions::With(o)
        | CreateTableOptions::Options(o)
        | CreateTableOptions::TableProperties(o) => o,
    }
}

fn table_options(conn: &mut Conn<'_>, create: &CreateTable, name: &str) -> SqlResult<TableOptions> {
    let mut out = TableOptions {
        engine: "ndbcluster".to_owned(),
        comment: String::new(),
        charset: None,
        collation: None,
        auto_increment: None,
    };
    let options = table_options_list(create);
    if let Some(comment) = &create.comment {
        out.comment = comment_text(comment);
    }
    for option in options {
        match option {
            SqlOption::Comment(c) => out.comment = comment_text(c),
            SqlOption::NamedParenthesizedList(list) if list.key.value == "ENGINE" => {
                let engine = list
                    .name
                    .as_ref()
                    .map(|n| n.value.clone())
                    .unwrap_or_default();
                match engine.to_ascii_lowercase().as_str() {
                    "ndb" | "ndbcluster" => out.engine = "ndbcluster".to_owned(),
                    "innodb" => out.engine = "InnoDB".to_owned(),
                    _ => catalog::warn(
                        conn,
                        codes::WARN_USING_OTHER_HANDLER,
                        format!("Using storage engine ndbcluster for table '{name}'"),
                    ),
                }
            }
            SqlOption::NamedParenthesizedList(list) => {
                return Err(SqlError::unsupported(format_args!(
                    "the table option {}",
                    list.key.value
                )))
            }
            SqlOption::KeyValue { key, value } => {
                let key = key.to_string().to_ascii_uppercase();
                let text = match value {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::Value(v) => match &v.value {
                        sqlparser::ast::Value::SingleQuotedString(s)
                        | sqlparser::ast::Value::DoubleQuotedString(s)
                        | sqlparser::ast::Value::Number(s, _) => s.clone(),
                        other => other.to_string(),
                    },
                    other => other.to_string(),
                };
                match key.as_str() {
                    "DEFAULT CHARSET" | "CHARSET" | "DEFAULT CHARACTER SET" | "CHARACTER SET" => {
                        out.charset = Some(text)
                    }
                    "DEFAULT COLLATE" | "COLLATE" => out.collation = Some(text),
                    "AUTO_INCREMENT" => {
                        out.auto_increment =
                            Some(text.parse::<u64>().map_err(|_| {
                                SqlError::syntax(format_args!("AUTO_INCREMENT={text}"))
                            })?)
                    }
                    "ROW_FORMAT" | "KEY_BLOCK_SIZE" | "PACK_KEYS" | "STATS_AUTO_RECALC"
                    | "STATS_PERSISTENT" | "STATS_SAMPLE_PAGES" | "MAX_ROWS" | "MIN_ROWS"
                    | "AVG_ROW_LENGTH" | "CHECKSUM" | "DELAY_KEY_WRITE" => catalog::warn(
                        conn,
                        codes::UNKNOWN,
                        format!("the table option {key} is ignored by Skarv"),
                    ),
                    other => {
                        return Err(SqlError::unsupported(format_args!(
                            "the table option {other}"
                        )))
                    }
                }
            }
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the table option `{other}`"
                )))
            }
        }
    }
    if out.comment.chars().count() > COMMENT_CHARS_MAX {
        return Err(err(
            1628,
            "HY000",
            format!("Comment for table '{name}' is too long (max = {COMMENT_CHARS_MAX})"),
        ));
    }
    Ok(out)
}

fn comment_text(c: &sqlparser::ast::CommentDef) -> String {
    match c {
        sqlparser::ast::CommentDef::WithEq(s) | sqlparser::ast::CommentDef::WithoutEq(s) => {
            s.clone()
        }
    }
}

/// `NDB_TABLE=READ_BACKUP=1,FULLY_REPLICATED=1` in a table comment:
/// `(read_backup, fully_replicated)`.
fn ndb_table_options(conn: &mut Conn<'_>, comment: &str) -> SqlResult<(bool, bool)> {
    let mut read_backup = false;
    let mut fully_replicated = false;
    let Some(start) = comment.find("NDB_TABLE=") else {
        return Ok((false, false));
    };
    let options = comment[start + "NDB_TABLE=".len()..]
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("");
    for option in options.split(',').filter(|o| !o.is_empty()) {
        let (key, value) = option.split_once('=').unwrap_or((option, ""));
        let on = match value {
            "1" | "TRUE" | "true" => true,
            "0" | "FALSE" | "false" => false,
            _ => {
                return Err(err(
                    1478,
                    "HY000",
                    format!(
                        "Table storage engine 'ndbcluster' does not support the create option \
                         '{option}'"
                    ),
                ))
            }
        };
        match key.to_ascii_uppercase().as_str() {
            "READ_BACKUP" => read_backup = on,
            "FULLY_REPLICATED" => fully_replicated = on,
            "NOLOGGING" | "PARTITION_BALANCE" => catalog::warn(
                conn,
                codes::UNKNOWN,
                format!("NDB_TABLE option {key} is ignored by Skarv"),
            ),
            _ => {
                return Err(err(
                    1478,
                    "HY000",
                    format!(
                        "Table storage engine 'ndbcluster' does not support the create option \
                         '{option}'"
                    ),
                ))
            }
        }
    }
    Ok((read_backup, fully_replicated))
}

#[allow(clippy::too_many_arguments)]
fn table_def(
    conn: &mut Conn<'_>,
    create: &CreateTable,
    db: &str,
    name: &str,
    database: &catalog::Database,
    partition_key: &[String],
    partitions: Option<u32>,
) -> SqlResult<TableDef> {
    let options = table_options(conn, create, name)?;
    let (charset, collation) = charset_collation(
        conn,
        options.charset.as_deref(),
        options.collation.as_deref(),
        (&database.charset, &database.collation),
    )?;
    if create.columns.is_empty() {
        return Err(err(1113, "42000", "A table must have at least 1 column"));
    }
    let mut specs = Vec::with_capacity(create.columns.len());
    for column in &create.columns {
        specs.push(column_spec(conn, column, &collation, specs.len())?);
    }
    for (k, spec) in specs.iter().enumerate() {
        if specs[..k]
            .iter()
            .any(|s| s.column.name.eq_ignore_ascii_case(&spec.column.name))
        {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{}'", spec.column.name),
            ));
        }
    }
    let position = |specs: &[ColumnSpec], column: &str| {
        specs
            .iter()
            .position(|s| s.column.name.eq_ignore_ascii_case(column))
            .ok_or_else(|| {
                SqlError::new(
                    codes::KEY_COLUMN_DOES_NOT_EXIST,
                    format!("Key column '{column}' doesn't exist in table"),
                )
            })
    };
    let mut primary: Option<Vec<usize>> = None;
    let multiple_primary =
        || SqlError::new(codes::MULTIPLE_PRI_KEY, "Multiple primary key defined");
    for (at, spec) in specs.iter().enumerate() {
        if spec.primary {
            if primary.is_some() {
                return Err(multiple_primary());
            }
            primary = Some(vec![at]);
        }
    }
    // (name or None, columns, unique)
    let mut keys: Vec<(Option<String>, Vec<usize>, bool)> = Vec::new();
    for (at, spec) in specs.iter().enumerate() {
        if spec.unique {
            keys.push((Some(spec.column.name.clone()), vec![at], true));
        }
    }
    // The table's CHECKs as declared (None: unnamed), named once all are
    // known: MariaDB's generated names skip the declared ones.
    let mut table_checks: Vec<(Option<String>, String)> = Vec::new();
    let mut foreign_keys: Vec<super::foreign::Declared> = Vec::new();
    for constraint in &create.constraints {
        match constraint {
            TableConstraint::PrimaryKey(pk) => {
                if primary.is_some() {
                    return Err(multiple_primary());
                }
                let columns = index_columns(&pk.columns)?;
                primary = Some(
                    columns
                        .iter()
                        .map(|c| position(&specs, c))
                        .collect::<SqlResult<_>>()?,
                );
            }
            TableConstraint::Unique(u) => {
                let columns = index_columns(&u.columns)?;
                let name = u
                    .index_name
                    .as_ref()
                    .or(u.name.as_ref())
                    .map(|n| n.value.clone());
                let positions = columns
                    .iter()
                    .map(|c| position(&specs, c))
                    .collect::<SqlResult<_>>()?;
                keys.push((name, positions, true));
            }
            TableConstraint::Index(i) => {
                let columns = index_columns(&i.columns)?;
                let positions = columns
                    .iter()
                    .map(|c| position(&specs, c))
                    .collect::<SqlResult<_>>()?;
                keys.push((i.name.as_ref().map(|n| n.value.clone()), positions, false));
            }
            TableConstraint::ForeignKey(fk) => {
                if create.temporary {
                    return Err(super::foreign::malformed(
                        conn,
                        db,
                        name,
                        "a temporary table takes no FOREIGN KEY",
                    ));
                }
                foreign_keys.push(super::foreign::declared(fk, db)?);
            }
            TableConstraint::Check(c) if c.enforced == Some(false) => {}
            TableConstraint::Check(c) => {
                table_checks.push((c.name.as_ref().map(|n| n.value.clone()), c.expr.to_string()))
            }
            TableConstraint::FulltextOrSpatial(_) => {
                return Err(SqlError::unsupported("FULLTEXT and SPATIAL indexes"))
            }
            #[allow(unreachable_patterns)]
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the constraint `{other}`"
                )))
            }
        }
    }
    // Primary-key columns are NOT NULL, as MySQL makes them.
    if let Some(pk) = &primary {
        for &c in pk {
            specs[c].column.nullable = false;
            if specs[c].meta.default.is_none() && !specs[c].meta.auto_increment {
                // A NULL default of a nullable column the key made NOT NULL.
                specs[c].column.default = None;
            }
        }
    }
    // A FOREIGN KEY's columns lead an index (InnoDB makes one when no
    // key does), and are checked against the parent.
    let named = |cols: &[usize]| -> Vec<String> {
        cols.iter().map(|&c| specs[c].column.name.clone()).collect()
    };
    let mut key_names: Vec<Vec<String>> = primary.iter().map(|pk| named(pk)).collect();
    key_names.extend(keys.iter().map(|(_, cols, _)| named(cols)));
    for d in &foreign_keys {
        if super::foreign::needs_index(&d.columns, &key_names) {
            let positions = d
                .columns
                .iter()
                .map(|c| position(&specs, c))
                .collect::<SqlResult<Vec<_>>>()?;
            let index = d.index_name.clone().or_else(|| d.name.clone());
            key_names.push(named(&positions));
            keys.push((index, positions, false));
        }
    }
    let unique_names: Vec<Vec<String>> = primary
        .iter()
        .map(|pk| named(pk))
        .chain(keys.iter().filter(|k| k.2).map(|(_, cols, _)| named(cols)))
        .collect();
    let foreign_keys = if foreign_keys.is_empty() {
        Vec::new()
    } else {
        let columns: Vec<super::foreign::ChildColumn<'_>> = specs
            .iter()
            .map(|s| super::foreign::ChildColumn {
                name: &s.column.name,
                ty: &s.meta.ty,
                nullable: s.column.nullable,
            })
            .collect();
        super::foreign::resolve(conn, (db, name), &columns, &unique_names, &[], foreign_keys)?
    };
    // AUTO_INCREMENT: one column, and a key's first column.
    let autos: Vec<usize> = (0..specs.len())
        .filter(|&c| specs[c].meta.auto_increment)
        .collect();
    let wrong_auto = || {
        SqlError::new(
            codes::WRONG_AUTO_KEY,
            "Incorrect table definition; there can be only one auto column and it must be \
             defined as a key",
        )
    };
    if autos.len() > 1 {
        return Err(wrong_auto());
    }
    if let Some(&auto) = autos.first() {
        let keyed = primary.as_ref().is_some_and(|pk| pk.first() == Some(&auto))
            || keys.iter().any(|(_, cols, _)| cols.first() == Some(&auto));
        if !keyed {
            return Err(wrong_auto());
        }
    }
    let columns: Vec<Column> = specs.iter().map(|s| s.column.clone()).collect();
    let mut def = TableDef::new(catalog::cluster_name(db, name), 0, columns);
    let mut index_names: Vec<String> = Vec::new();
    if let Some(pk) = &primary {
        // The distribution key must lead the native primary key: put the
        // PARTITION BY KEY columns first.
        let mut native_pk = pk.clone();
        if !partition_key.is_empty() {
            let mut dist = Vec::with_capacity(partition_key.len());
            for column in partition_key {
                let at = position(&specs, column)?;
                if !pk.contains(&at) {
                    return Err(err(
                        1503,
                        "HY000",
                        "A PRIMARY KEY must include all columns in the table's partitioning \
                         function",
                    ));
                }
                if !dist.contains(&at) {
                    dist.push(at);
                }
            }
            native_pk = dist.clone();
            native_pk.extend(pk.iter().filter(|c| !dist.contains(c)));
            def = def.distribution_key(dist);
        }
        def = def.primary_key(native_pk);
        def = def.index(IndexDef {
            name: PRIMARY.to_owned(),
            id: 0,
            columns: pk.clone(),
            kind: IndexKind::Ordered,
        });
        index_names.push(PRIMARY.to_owned());
    } else if !partition_key.is_empty() {
        return Err(SqlError::unsupported(
            "PARTITION BY KEY of a table without a primary key (it is distributed by its \
             hidden key)",
        ));
    }
    for (name, columns, unique) in keys {
        let name = match name {
            Some(name) => {
                if index_names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                    return Err(SqlError::new(
                        codes::DUP_KEYNAME,
                        format!("Duplicate key name '{name}'"),
                    ));
                }
                name
            }
            None => auto_index_name(&specs[columns[0]].column.name, &index_names),
        };
        for index in index_defs(&name, columns, unique)? {
            def = def.index(index);
        }
        index_names.push(name);
    }
    if let Some(n) = partitions {
        def = def.partitions(n);
    } else {
        def = def.partitions(0);
    }
    let (read_backup, fully_replicated) = ndb_table_options(conn, &options.comment)?;
    def = def
        .read_backup(read_backup)
        .fully_replicated(fully_replicated);
    // Column constraints first, in column order, then the table's: the
    // order MariaDB tests them in.
    let mut checks: Vec<meta::CheckMeta> = specs
        .iter()
        .flat_map(|s| {
            s.checks.iter().map(|expr| meta::CheckMeta {
                name: s.column.name.clone(),
                column: Some(s.column.name.clone()),
                expr: expr.clone(),
            })
        })
        .collect();
    add_table_checks(&mut checks, table_checks)?;
    let column_names: Vec<&str> = specs.iter().map(|s| s.column.name.as_str()).collect();
    for check in &checks {
        check_columns_exist(check, &column_names)?;
    }
    let defaults: Vec<(&str, Option<&str>)> = specs
        .iter()
        .map(|s| {
            let text = s.meta.default.as_deref().filter(|_| s.meta.default_expr);
            (s.column.name.as_str(), text)
        })
        .collect();
    default_columns_checked(&defaults)?;
    let table_meta = meta::TableMeta {
        engine: options.engine,
        comment: options.comment,
        charset,
        collation,
        auto_increment_start: options.auto_increment.unwrap_or(1).max(1),
        columns: specs.into_iter().map(|s| s.meta).collect(),
        copy: None,
        checks,
        foreign_keys,
        referenced_by: Vec::new(),
    };
    def = def.sql_meta(table_meta.encode());
    // Validate here for MySQL's errors; the dictionary checks again.
    check_def(&def)
        .build()
        .map_err(|e| schema_error(&e, name))?;
    Ok(def)
}

/// A definition to validate here, for MySQL's errors before the
/// dictionary's: what the dictionary fills in (partitions, the ids of new
/// indexes) filled with stand-ins.
/// `def` checked as the dictionary will, with MySQL's errors.
pub(super) fn validate(def: &TableDef, table: &str) -> SqlResult<()> {
    check_def(def)
        .validate()
        .map_err(|e| schema_error(&e, table))
}

fn check_def(def: &TableDef) -> TableDef {
    let mut check = def.clone();
    check.partitions = check.partitions.max(1);
    let mut next = check.indexes.iter().map(|i| i.id).max().unwrap_or(0) + 1;
    for index in &mut check.indexes {
        if index.id == 0 {
            index.id = next;
            next += 1;
        }
    }
    check
}

/// The native indexes of a key: an ordered index, and for a UNIQUE key
/// also its unique hash index `name$unique`.
fn index_defs(name: &str, columns: Vec<usize>, unique: bool) -> SqlResult<Vec<IndexDef>> {
    if name.len() > schema::NAME_BYTES_MAX {
        return Err(SqlError::new(
            codes::TOO_LONG_IDENT,
            format!("Identifier name '{name}' is too long"),
        ));
    }
    let mut out = vec![IndexDef {
        name: name.to_owned(),
        id: 0,
        columns: columns.clone(),
        kind: IndexKind::Ordered,
    }];
    if unique {
        let hash = format!("{name}{UNIQUE_SUFFIX}");
        // The dictionary takes the suffix beyond a key name's 64 bytes.
        debug_assert!(hash.len() <= schema::INDEX_NAME_BYTES_MAX);
        out.push(IndexDef {
            name: hash,
            id: 0,
            columns,
            kind: IndexKind::Unique,
        });
    }
    Ok(out)
}

/// MySQL's name for an unnamed key: its first column, then `_2`, `_3`, ….
fn auto_index_name(column: &str, taken: &[String]) -> String {
    let free = |n: &str| !taken.iter().any(|t| t.eq_ignore_ascii_case(n));
    if free(column) && !column.eq_ignore_ascii_case(PRIMARY) {
        return column.to_owned();
    }
    (2..)
        .map(|k| format!("{column}_{k}"))
        .find(|n| free(n))
        .unwrap_or_else(|| column.to_owned())
}

/// A native schema refusal as MySQL's error.
fn schema_error(e: &schema::SchemaError, table: &str) -> SqlError {
    use schema::SchemaError as E;
    match e {
        E::RowTooLarge { .. } => SqlError::new(
            codes::TOO_BIG_ROWSIZE,
            format!(
                "Row size too large. The maximum row size for the used table type, not counting \
                 BLOBs, is {}: {e}",
                schema::ROW_BYTES_MAX
            ),
        ),
        E::KeyTooLong { .. } => SqlError::new(
            codes::TOO_LONG_KEY,
            format!(
                "Specified key was too long; max key length is {} bytes",
                schema::KEY_BYTES_MAX
            ),
        ),
        E::ColumnCount { .. } => err(1117, "HY000", "Too many columns"),
        E::TooManyIndexes { .. } => err(
            1069,
            "42000",
            format!(
                "Too many keys specified; max {} keys allowed",
                schema::INDEXES_MAX
            ),
        ),
        E::UnkeyableColumn { column, .. } => err(
            1170,
            "42000",
            format!("BLOB/TEXT column '{column}' used in key specification without a key length"),
        ),
        E::BadName { name, .. } => SqlError::new(
            codes::TOO_LONG_IDENT,
            format!("Identifier name '{name}' is too long"),
        ),
        E::BadTableName { .. } => SqlError::new(
            codes::WRONG_TABLE_NAME,
            format!("Incorrect table name '{table}'"),
        ),
        E::BadDefault { column, .. } | E::BlobDefault { column, .. } => SqlError::new(
            codes::INVALID_DEFAULT,
            format!("Invalid default value for '{column}'"),
        ),
        E::DuplicateKeyColumn { column, .. } => SqlError::new(
            codes::DUP_FIELDNAME,
            format!("Duplicate column name '{column}'"),
        ),
        E::BadColumnType {
            column, problem, ..
        } => SqlError::new(
            codes::TOO_BIG_FIELDLENGTH,
            format!("Column length too big for column '{column}': {problem}"),
        ),
        other => SqlError::unsupported(other),
    }
}

fn index_columns(columns: &[sqlparser::ast::IndexColumn]) -> SqlResult<Vec<String>> {
    if columns.is_empty() {
        return Err(SqlError::syntax("a key needs at least one column"));
    }
    columns
        .iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) => Ok(i.value.clone()),
            Expr::Function(f) => Err(SqlError::unsupported(format_args!(
                "index prefixes (`{f}`): Skarv indexes whole values"
            ))),
            other => Err(SqlError::unsupported(format_args!(
                "the index part `{other}`"
            ))),
        })
        .collect()
}

// ---- columns ----

fn length_of(len: &Option<sqlparser::ast::CharacterLength>) -> SqlResult<Option<u64>> {
    match len {
        None => Ok(None),
        Some(sqlparser::ast::CharacterLength::IntegerLength { length, .. }) => Ok(Some(*length)),
        Some(sqlparser::ast::CharacterLength::Max) => Err(SqlError::unsupported("a length of MAX")),
    }
}

fn too_big(column: &str, max: u64, what: &str) -> SqlError {
    SqlError::new(
        codes::TOO_BIG_FIELDLENGTH,
        format!(
            "Column length too big for column '{column}' (max = {max}); use BLOB or TEXT instead \
             ({what})"
        ),
    )
}

/// Most digits of a FLOAT(M,D) or DOUBLE(M,D) (MariaDB's display width).
const FIXED_DIGITS_MAX: u64 = 255;

/// The (M,D) of a FLOAT(M,D) or DOUBLE(M,D), checked as MariaDB checks
/// them; `None` for (0,0), which MariaDB takes as no (M,D).
fn fixed_digits(column: &str, m: u64, d: i64) -> SqlResult<Option<FixedDigits>> {
    if d < 0 || d as u64 > m {
        return Err(err(
            1427,
            "42000",
            format!(
                "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '{column}')"
            ),
        ));
    }
    if d > DECIMAL_SCALE_MAX {
        return Err(err(
            1425,
            "42000",
            format!("Too big scale specified for '{column}'. Maximum is {DECIMAL_SCALE_MAX}"),
        ));
    }
    if m > FIXED_DIGITS_MAX {
        return Err(err(
            1439,
            "42000",
            format!("Display width out of range for '{column}' (max = {FIXED_DIGITS_MAX})"),
        ));
    }
    if m == 0 {
        return Ok(None);
    }
    Ok(Some(FixedDigits {
        m: m as u8,
        d: d as u8,
    }))
}

/// A FLOAT, DOUBLE or DECIMAL made UNSIGNED (another type as it is).
fn unsigned(ty: SqlType) -> SqlType {
    match ty {
        SqlType::Float { digits, .. } => SqlType::Float {
            digits,
            unsigned: true,
        },
        SqlType::Double { digits, .. } => SqlType::Double {
            digits,
            unsigned: true,
        },
        SqlType::Decimal {
            precision, scale, ..
        } => SqlType::Decimal {
            precision,
            scale,
            unsigned: true,
        },
        other => other,
    }
}

/// The declared type and display width of a column declared as `text`
/// (`bigint(12)`, `varchar(3) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`):
/// a computed result column's, as CREATE TABLE … SELECT would declare it.
pub(super) fn declared_type(text: &str) -> SqlResult<(SqlType, Option<u16>)> {
    let create = format!("CREATE TABLE t (c {text})");
    let def = match super::parse(&create)?.pop() {
        Some(Statement::CreateTable(CreateTable { mut columns, .. })) if columns.len() == 1 => {
            columns.remove(0)
        }
        _ => {
            return Err(SqlError::unsupported(format_args!(
                "the column type `{text}`"
            )))
        }
    };
    let collation = def.options.iter().find_map(|o| match &o.option {
        ColumnOption::Collation(c) => Some(charset_name(c)),
        _ => None,
    });
    let storage = storage_collation(collation.as_deref().unwrap_or("utf8mb4_general_ci"));
    let (ty, width, _) = sql_type("c", &def.data_type, storage, false)?;
    Ok((ty, width))
}

/// The declared type: `(type, display width, zerofill)`.
fn sql_type(
    column: &str,
    data_type: &DataType,
    collation: Collation,
    binary: bool,
) -> SqlResult<(SqlType, Option<u16>, bool)> {
    use DataType as D;
    let width = |w: &Option<u64>| w.map(|w| w.min(255) as u16);
    let char_len = |len: Option<u64>, max: u64, what: &str| -> SqlResult<u16> {
        let len = len.unwrap_or(1);
        if len > max {
            return Err(too_big(column, max, what));
        }
        Ok(len as u16)
    };
    let decimal = |info: &ExactNumberInfo| -> SqlResult<SqlType> {
        let (precision, scale) = match info {
            ExactNumberInfo::None => (10, 0),
            ExactNumberInfo::Precision(p) => (*p, 0),
            ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
        };
        if precision > DECIMAL_PRECISION_MAX || precision == 0 {
            return Err(err(
                1426,
                "42000",
                format!(
                    "Too big precision {precision} specified for '{column}'. Maximum is \
                     {DECIMAL_PRECISION_MAX}."
                ),
            ));
        }
        if !(0..=DECIMAL_SCALE_MAX).contains(&scale) {
            return Err(err(
                1425,
                "42000",
                format!(
                    "Too big scale {scale} specified for '{column}'. Maximum is \
                     {DECIMAL_SCALE_MAX}."
                ),
            ));
        }
        if scale as u64 > precision {
            return Err(err(
                1427,
                "42000",
                format!(
                    "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column \
                     '{column}')."
                ),
            ));
        }
        Ok(SqlType::Decimal {
            precision: precision as u8,
            scale: scale as u8,
            unsigned: false,
        })
    };
    let float = |info: &ExactNumberInfo| -> SqlResult<SqlType> {
        Ok(match info {
            // FLOAT(p): p > 24 is a DOUBLE, as MySQL's.
            ExactNumberInfo::Precision(p) if *p > 24 => SqlType::Double {
                digits: None,
                unsigned: false,
            },
            ExactNumberInfo::PrecisionAndScale(m, d) => SqlType::Float {
                digits: fixed_digits(column, *m, *d)?,
                unsigned: false,
            },
            _ => SqlType::Float {
                digits: None,
                unsigned: false,
            },
        })
    };
    let fsp = |f: &Option<u64>| -> SqlResult<u8> {
        let f = f.unwrap_or(0);
        if f > FSP_MAX {
            return Err(err(
                1426,
                "42000",
                format!("Too big precision {f} specified for '{column}'. Maximum is {FSP_MAX}."),
            ));
        }
        Ok(f as u8)
    };
    let text = |size: BlobSize| {
        if binary {
            SqlType::Blob { size }
        } else {
            SqlType::Text { size, collation }
        }
    };
    let ty = match data_type {
        D::Zerofill(inner) => {
            let (ty, w, _) = sql_type(column, inner, collation, binary)?;
            let ty = match ty {
                SqlType::TinyInt { .. } => SqlType::TinyInt { unsigned: true },
                SqlType::SmallInt { .. } => SqlType::SmallInt { unsigned: true },
                SqlType::MediumInt { .. } => SqlType::MediumInt { unsigned: true },
                SqlType::Int { .. } => SqlType::Int { unsigned: true },
                SqlType::BigInt { .. } => SqlType::BigInt { unsigned: true },
                // ZEROFILL is UNSIGNED for every number, as MariaDB's.
                other => unsigned(other),
            };
            return Ok((ty, w, true));
        }
        D::TinyInt(w) => return Ok((SqlType::TinyInt { unsigned: false }, width(w), false)),
        D::TinyIntUnsigned(w) => return Ok((SqlType::TinyInt { unsigned: true }, width(w), false)),
        D::SmallInt(w) => return Ok((SqlType::SmallInt { unsigned: false }, width(w), false)),
        D::SmallIntUnsigned(w) => {
            return Ok((SqlType::SmallInt { unsigned: true }, width(w), false))
        }
        D::MediumInt(w) => return Ok((SqlType::MediumInt { unsigned: false }, width(w), false)),
        D::MediumIntUnsigned(w) => {
            return Ok((SqlType::MediumInt { unsigned: true }, width(w), false))
        }
        D::Int(w) | D::Integer(w) => {
            return Ok((SqlType::Int { unsigned: false }, width(w), false))
        }
        D::IntUnsigned(w) | D::IntegerUnsigned(w) => {
            return Ok((SqlType::Int { unsigned: true }, width(w), false))
        }
        D::BigInt(w) => return Ok((SqlType::BigInt { unsigned: false }, width(w), false)),
        D::BigIntUnsigned(w) => return Ok((SqlType::BigInt { unsigned: true }, width(w), false)),
        D::Bool | D::Boolean => return Ok((SqlType::TinyInt { unsigned: false }, Some(1), false)),
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => decimal(info)?,
        D::DecimalUnsigned(info) | D::DecUnsigned(info) => unsigned(decimal(info)?),
        D::Float(info) => float(info)?,
        D::FloatUnsigned(info) => unsigned(float(info)?),
        // DOUBLE(M) (and REAL(M), DOUBLE PRECISION(M), mended into it) is
        // no type in MariaDB's grammar: FLOAT(p) alone takes one number.
        D::Double(ExactNumberInfo::Precision(_))
        | D::DoubleUnsigned(ExactNumberInfo::Precision(_)) => {
            return Err(SqlError::syntax(format_args!(
                "DOUBLE of '{column}' takes (M,D) or nothing"
            )));
        }
        D::Double(ExactNumberInfo::PrecisionAndScale(m, d)) => SqlType::Double {
            digits: fixed_digits(column, *m, *d)?,
            unsigned: false,
        },
        D::DoubleUnsigned(ExactNumberInfo::PrecisionAndScale(m, d)) => SqlType::Double {
            digits: fixed_digits(column, *m, *d)?,
            unsigned: true,
        },
        D::Double(_) | D::DoublePrecision | D::Real => SqlType::Double {
            digits: None,
            unsigned: false,
        },
        D::DoubleUnsigned(_) | D::DoublePrecisionUnsigned | D::RealUnsigned => SqlType::Double {
            digits: None,
            unsigned: true,
        },
        D::Char(len) | D::Character(len) => {
            let length = char_len(length_of(len)?, CHAR_CHARS_MAX, "CHAR")?;
            if binary {
                SqlType::Binary { length }
            } else {
                SqlType::Char { length, collation }
            }
        }
        D::Varchar(len) | D::CharVarying(len) | D::CharacterVarying(len) | D::Nvarchar(len) => {
            let Some(max) = length_of(len)? else {
                return Err(SqlError::syntax(format_args!(
                    "VARCHAR of '{column}' needs a length"
                )));
            };
            let max = char_len(Some(max), VARCHAR_CHARS_MAX, "VARCHAR")?;
            if binary {
                SqlType::VarBinary { max }
            } else {
                SqlType::VarChar { max, collation }
            }
        }
        D::Binary(len) => SqlType::Binary {
            length: char_len(*len, CHAR_CHARS_MAX, "BINARY")?,
        },
        D::Varbinary(len) => {
            let max = match len {
                Some(sqlparser::ast::BinaryLength::IntegerLength { length }) => *length,
                _ => {
                    return Err(SqlError::syntax(format_args!(
                        "VARBINARY of '{column}' needs a length"
                    )))
                }
            };
            SqlType::VarBinary {
                max: char_len(Some(max), VARCHAR_CHARS_MAX, "VARBINARY")?,
            }
        }
        D::TinyText => text(BlobSize::Tiny),
        D::Text => text(BlobSize::Normal),
        D::MediumText => text(BlobSize::Medium),
        D::LongText => text(BlobSize::Long),
        D::TinyBlob => SqlType::Blob {
            size: BlobSize::Tiny,
        },
        D::Blob(len) => SqlType::Blob {
            size: blob_size(*len),
        },
        D::MediumBlob => SqlType::Blob {
            size: BlobSize::Medium,
        },
        D::LongBlob => SqlType::Blob {
            size: BlobSize::Long,
        },
        D::Date => SqlType::Date,
        D::Time(f, _) => SqlType::Time { fsp: fsp(f)? },
        D::Datetime(f) => SqlType::DateTime { fsp: fsp(f)? },
        D::Timestamp(f, _) => SqlType::Timestamp { fsp: fsp(f)? },
        D::Bit(bits) => {
            let bits = bits.unwrap_or(1);
            if bits == 0 || bits > BIT_BITS_MAX {
                return Err(too_big(column, BIT_BITS_MAX, "BIT"));
            }
            SqlType::Bit { bits: bits as u8 }
        }
        D::Enum(members, _) => {
            let members: Vec<String> = members
                .iter()
                .map(|m| match m {
                    sqlparser::ast::EnumMember::Name(n) => n.clone(),
                    sqlparser::ast::EnumMember::NamedValue(n, _) => n.clone(),
                })
                .collect();
            check_members(column, &members, ENUM_MEMBERS_MAX, "ENUM")?;
            SqlType::Enum(members)
        }
        D::Set(members) => {
            check_members(column, members, SET_MEMBERS_MAX, "SET")?;
            SqlType::Set(members.clone())
        }
        // MariaDB's JSON: LONGTEXT in utf8mb4_bin (MariaDB adds a CHECK of
        // JSON_VALID, which Skarv does not: docs/sql.md).
        D::JSON => SqlType::Text {
            size: BlobSize::Long,
            collation: Collation::Utf8mb4Bin,
        },
        D::JSONB => {
            return Err(SqlError::unsupported(format_args!(
                "the JSONB type (column '{column}'); use JSON"
            )))
        }
        D::Custom(name, modifiers) => {
            let type_name = name.to_string().to_ascii_uppercase();
            match (type_name.as_str(), modifiers.as_slice()) {
                ("YEAR", []) => SqlType::Year,
                ("YEAR", [sqlparser::ast::TypeModifier::Number(n, _)]) if n == "4" => SqlType::Year,
                ("SERIAL", []) => {
                    // BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE: the
                    // caller adds the rest.
                    return Ok((SqlType::BigInt { unsigned: true }, None, false));
                }
                ("TEXT" | "BLOB", [sqlparser::ast::TypeModifier::Number(n, _)]) => {
                    let n = n.parse::<u64>().ok();
                    if type_name == "TEXT" {
                        // TEXT(M) is the smallest TEXT that holds M
                        // characters of 4 bytes (utf8mb4), as MySQL's.
                        text(blob_size(n.map(|n| n.saturating_mul(4))))
                    } else {
                        SqlType::Blob { size: blob_size(n) }
                    }
                }
                _ => {
                    return Err(SqlError::unsupported(format_args!(
                        "the type {data_type} (column '{column}')"
                    )))
                }
            }
        }
        other => {
            return Err(SqlError::unsupported(format_args!(
                "the type {other} (column '{column}')"
            )))
        }
    };
    Ok((ty, None, false))
}

fn blob_size(len: Option<u64>) -> BlobSize {
    match len {
        None => BlobSize::Normal,
        Some(n) if n < 256 => BlobSize::Tiny,
        Some(n) if n < 65_536 => BlobSize::Normal,
        Some(n) if n < 16_777_216 => BlobSize::Medium,
        Some(_) => BlobSize::Long,
    }
}

fn check_members(column: &str, members: &[String], max: usize, what: &str) -> SqlResult<()> {
    if members.is_empty() || members.len() > max {
        return Err(err(
            1097,
            "HY000",
            format!("Too many strings for column {column} and SET"),
        ));
    }
    for (k, m) in members.iter().enumerate() {
        if m.chars().count() > ENUM_MEMBER_CHARS_MAX {
            return Err(err(
                1097,
                "HY000",
                format!("{what} member of column {column} is longer than {ENUM_MEMBER_CHARS_MAX}"),
            ));
        }
        if what == "SET" && m.contains(',') {
            return Err(err(
                1367,
                "HY000",
                format!("Illegal SET '{m}' value found during parsing"),
            ));
        }
        if members[..k].iter().any(|o| o.eq_ignore_ascii_case(m)) {
            return Err(err(
                1291,
                "HY000",
                format!("Column '{column}' has duplicated value '{m}' in {what}"),
            ));
        }
    }
    Ok(())
}

/// A column definition: its storage column and its SQL metadata.
fn column_spec(
    conn: &mut Conn<'_>,
    def: &sqlparser::ast::ColumnDef,
    table_collation: &str,
    position: usize,
) -> SqlResult<ColumnSpec> {
    let name = def.name.value.clone();
    check_column_name(&name)?;
    let mut charset = None;
    let mut collation = None;
    for option in &def.options {
        match &option.option {
            ColumnOption::CharacterSet(c) => charset = Some(charset_name(c)),
            ColumnOption::Collation(c) => collation = Some(charset_name(c)),
            _ => {}
        }
    }
    let (charset, collation) = charset_collation(
        conn,
        charset.as_deref(),
        collation.as_deref(),
        (
            table_collation.split('_').next().unwrap_or("utf8mb4"),
            table_collation,
        ),
    )?;
    let binary = charset == "binary";
    let storage = storage_collation(&collation);
    let (ty, width, zerofill) = sql_type(&name, &def.data_type, storage, binary)?;
    if zerofill {
        catalog::warn(
            conn,
            1681,
            "The ZEROFILL attribute is deprecated; Skarv keeps it but does not pad values",
        );
    }
    let serial = matches!(&def.data_type, DataType::Custom(n, m) if m.is_empty()
        && n.to_string().eq_ignore_ascii_case("SERIAL"));
    let mut nullable = !serial;
    let mut primary = false;
    let mut unique = serial;
    let mut auto_increment = serial;
    let mut default: Option<Option<Expr>> = None;
    let mut on_update_now = false;
    let mut comment = String::new();
    let mut checks = Vec::new();
    if matches!(def.data_type, DataType::JSON) {
        // MariaDB's JSON column carries this check.
        checks.push(format!("json_valid(`{name}`)"));
    }
    for option in &def.options {
        match &option.option {
            // NOT ENFORCED (MySQL's) is kept by MySQL and not tested; so
            // it is not kept here either.
            ColumnOption::Check(c) if c.enforced == Some(false) => {}
            ColumnOption::Check(c) => checks.push(c.expr.to_string()),
            ColumnOption::Null => nullable = true,
            ColumnOption::NotNull => nullable = false,
            ColumnOption::Default(expr) => default = Some(Some(expr.clone())),
            ColumnOption::PrimaryKey(_) => primary = true,
            ColumnOption::Unique(_) => unique = true,
            ColumnOption::Comment(c) => comment = c.clone(),
            ColumnOption::CharacterSet(_) | ColumnOption::Collation(_) => {}
            ColumnOption::OnUpdate(expr) => {
                if is_now(expr)
                    && matches!(ty, SqlType::DateTime { .. } | SqlType::Timestamp { .. })
                {
                    on_update_now = true;
                } else {
                    return Err(SqlError::new(
                        codes::INVALID_DEFAULT,
                        format!("Invalid ON UPDATE clause for '{name}' column"),
                    ));
                }
            }
            ColumnOption::DialectSpecific(tokens) if is_auto_increment(tokens) => {
                auto_increment = true
            }
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the column option `{other}` (column '{name}')"
                )))
            }
        }
    }
    if primary || auto_increment {
        // MariaDB makes a key column and an AUTO_INCREMENT one NOT NULL.
        nullable = false;
    }
    if auto_increment && !ty.is_integer() {
        return Err(SqlError::new(
            codes::INVALID_DEFAULT,
            format!("Incorrect column specifier for column '{name}'"),
        ));
    }
    let mut meta = meta::ColumnMeta {
        native: position as u16,
        ty: ty.clone(),
        auto_increment,
        zerofill,
        default_now: false,
        default_expr: false,
        on_update_now,
        width,
        default: None,
        comment,
    };
    let mut column = Column::new(name.clone(), ty.native());
    column.nullable = nullable;
    set_default(conn, default.flatten().as_ref(), &mut column, &mut meta)?;
    Ok(ColumnSpec {
        column,
        meta,
        primary,
        unique,
        checks,
    })
}

/// Gives `column` (and its SQL side, `meta`) the DEFAULT `default` (None:
/// none, which a nullable column reads as NULL), checked against its type,
/// nullability and AUTO_INCREMENT as MariaDB checks it.
fn set_default(
    conn: &mut Conn<'_>,
    default: Option<&Expr>,
    column: &mut Column,
    meta: &mut meta::ColumnMeta,
) -> SqlResult<()> {
    column.default = None;
    meta.default = None;
    meta.default_now = false;
    let (name, ty, nullable) = (column.name.as_str(), &meta.ty, column.nullable);
    let invalid = || {
        SqlError::new(
            codes::INVALID_DEFAULT,
            format!("Invalid default value for '{name}'"),
        )
    };
    match default {
        None => {}
        Some(expr) if is_now(expr) => {
            if matches!(ty, SqlType::DateTime { .. } | SqlType::Timestamp { .. }) {
                meta.default_now = true;
            } else if meta.auto_increment {
                return Err(invalid());
            } else {
                // Any other column takes it as an expression (MariaDB's):
                // an INT the time as a number, out of range at insert.
                meta.default = Some("current_timestamp()".to_owned());
                meta.default_expr = true;
            }
        }
        Some(expr) if !is_literal(expr) => {
            if meta.auto_increment {
                return Err(invalid());
            }
            meta.default = Some(expression_default(expr, name)?);
            meta.default_expr = true;
        }
        Some(expr) => {
            if meta.auto_increment {
                return Err(invalid());
            }
            match literal(expr)? {
                None if !nullable => return Err(invalid()),
                None => {}
                Some(text) => {
                    if matches!(ty, SqlType::Text { .. } | SqlType::Blob { .. }) {
                        // The data nodes keep no BLOB/TEXT default: the
                        // SQL node fills it, as it does an expression's.
                        meta.default = Some(super::show::quote_string(&text));
                        meta.default_expr = true;
                        return Ok(());
                    }
                    let Some(value) = default_value(ty, &text) else {
                        if let Some((code, message)) = refused_default_warning(ty, name, &text) {
                            catalog::warn(conn, code, message);
                        }
                        return Err(invalid());
                    };
                    if value.check(column).is_err() {
                        // A string longer than the column (the storage's
                        // own check, made here to warn as MariaDB does).
                        catalog::warn(
                            conn,
                            codes::WARN_DATA_TRUNCATED,
                            format!("Data truncated for column '{name}' at row 0"),
                        );
                        return Err(invalid());
                    }
                    if decimal_default(ty, &text).is_some_and(|(_, rounded)| rounded) {
                        // MariaDB's note of a default it rounded to the
                        // scale (its "row" of a default is 0).
                        catalog::note(
                            conn,
                            codes::WARN_DATA_TRUNCATED,
                            format!("Data truncated for column '{name}' at row 0"),
                        );
                    }
                    meta.default = Some(canonical_default(ty, &text));
                    column.default = Some(value);
                }
            }
        }
    }
    Ok(())
}

/// An expression DEFAULT's text (`expression_default`), parsed.
pub(crate) fn parse_default(text: &str) -> SqlResult<Expr> {
    parse_kept_expr(text, "DEFAULT")
}

/// Words an expression reads as values, not columns (`DEFAULT
/// (CURRENT_DATE)`).
const NOT_COLUMNS: [&str; 5] = [
    "CURRENT_TIMESTAMP",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "CURRENT_DATE",
    "CURRENT_TIME",
];

/// The columns an expression DEFAULT's text names (empty for a literal's
/// text or an expression naming none).
fn default_columns(text: &str) -> Vec<String> {
    parse_default(text).map_or_else(|_| Vec::new(), |expr| columns_named(&expr))
}

/// The columns a parsed expression DEFAULT names.
pub(crate) fn columns_named(expr: &Expr) -> Vec<String> {
    let mut names = Vec::new();
    let _ = sqlparser::ast::visit_expressions(expr, |e| {
        if let Expr::Identifier(i) = e {
            if !i.value.starts_with('@')
                && !NOT_COLUMNS.iter().any(|w| w.eq_ignore_ascii_case(&i.value))
            {
                names.push(i.value.clone());
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    names
}

/// MariaDB's checks of DEFAULTs naming columns, over a table's columns
/// in order (name, expression DEFAULT text): each column named exists
/// (1054), and is not one whose own DEFAULT names columns and comes at or
/// after the naming column (4029): at an insert, those DEFAULTs are
/// evaluated in column order after every other value is in place.
fn default_columns_checked(columns: &[(&str, Option<&str>)]) -> SqlResult<()> {
    let names_columns: Vec<bool> = columns
        .iter()
        .map(|(_, text)| text.is_some_and(|t| !default_columns(t).is_empty()))
        .collect();
    for (at, (name, text)) in columns.iter().enumerate() {
        let Some(text) = text else { continue };
        for named in default_columns(text) {
            let Some(other) = columns
                .iter()
                .position(|(n, _)| n.eq_ignore_ascii_case(&named))
            else {
                return Err(SqlError::new(
                    codes::BAD_FIELD,
                    format!("Unknown column '{named}' in 'DEFAULT'"),
                ));
            };
            if other >= at && names_columns[other] {
                return Err(SqlError::new(
                    codes::EXPRESSION_REFERS_TO_UNINIT_FIELD,
                    format!(
                        "Expression for field `{name}` is referring to uninitialized field `{}`",
                        columns[other].0
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A CHECK condition's text, parsed.
pub(crate) fn parse_check(text: &str) -> SqlResult<Expr> {
    parse_kept_expr(text, "CHECK condition")
}

/// An expression the SQL metadata keeps as text (`what` names it in the
/// error), parsed.
fn parse_kept_expr(text: &str, what: &str) -> SqlResult<Expr> {
    let error =
        |e: &dyn std::fmt::Display| SqlError::syntax(format_args!("the {what} {text}: {e}"));
    let mut tokens =
        sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, text)
            .tokenize_with_location()
            .map_err(|e| error(&e))?;
    // As a statement's words are mended (MariaDB's print form of a
    // default writes a compound INTERVAL unit, `hour_minute`).
    super::session::mend_words(&mut tokens);
    sqlparser::parser::Parser::new(&super::dialect::SkarvDialect)
        .with_tokens_with_locations(tokens)
        .parse_expr()
        .map_err(|e| error(&e))
}

/// A CHECK condition as MariaDB shows it (SHOW CREATE TABLE,
/// `CHECK_CONSTRAINTS.CHECK_CLAUSE`): its names backquoted. MariaDB
/// prints its own form of the whole expression (keywords in lower case,
/// `NOT (a = 2)` as `a <> 2`); this is sqlparser's, names aside.
pub(crate) fn check_clause(text: &str) -> String {
    let Ok(mut expr) = parse_check(text) else {
        return text.to_owned();
    };
    let quote = |i: &mut sqlparser::ast::Ident| i.quote_style = Some('`');
    let _ = sqlparser::ast::visit_expressions_mut(&mut expr, |e| {
        match e {
            Expr::Identifier(i) => quote(i),
            Expr::CompoundIdentifier(parts) => parts.iter_mut().for_each(quote),
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    expr.to_string()
}

/// Appends table CHECKs (`(name, condition)`, None for an unnamed one)
/// to `checks`, naming the unnamed ones as MariaDB does
/// (`make_unique_constraint_name`): `CONSTRAINT_<n>`, n counting from 1
/// over the statement and skipping every name a table CHECK of the result
/// has. 1826 when a name is taken (by a table CHECK or a column's, in any
/// case).
fn add_table_checks(
    checks: &mut Vec<meta::CheckMeta>,
    added: Vec<(Option<String>, String)>,
) -> SqlResult<()> {
    let mut taken: Vec<String> = checks
        .iter()
        .filter(|c| c.column.is_none())
        .map(|c| c.name.clone())
        .chain(added.iter().filter_map(|(n, _)| n.clone()))
        .collect();
    let mut nr = 1usize;
    for (name, expr) in added {
        let name = match name {
            Some(n) => {
                if checks.iter().any(|c| c.name.eq_ignore_ascii_case(&n)) {
                    return Err(SqlError::new(
                        codes::DUP_CONSTRAINT_NAME,
                        format!("Duplicate CHECK constraint name '{n}'"),
                    ));
                }
                n
            }
            None => loop {
                let candidate = format!("CONSTRAINT_{nr}");
                nr += 1;
                if !taken.iter().any(|t| t.eq_ignore_ascii_case(&candidate)) {
                    taken.push(candidate.clone());
                    break candidate;
                }
            },
        };
        checks.push(meta::CheckMeta {
            name,
            column: None,
            expr,
        });
    }
    Ok(())
}

/// 1054 unless every column `check` names is one of `columns`.
fn check_columns_exist(check: &meta::CheckMeta, columns: &[&str]) -> SqlResult<()> {
    let expr = parse_check(&check.expr)?;
    let mut missing = None;
    let _ = sqlparser::ast::visit_expressions(&expr, |e| {
        let name = match e {
            Expr::Identifier(i) => Some(&i.value),
            Expr::CompoundIdentifier(parts) => parts.last().map(|p| &p.value),
            _ => None,
        };
        if let Some(n) = name {
            if !columns.iter().any(|c| c.eq_ignore_ascii_case(n)) && missing.is_none() {
                missing = Some(n.clone());
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    match missing {
        Some(n) => Err(SqlError::new(
            codes::BAD_FIELD,
            format!("Unknown column '{n}' in 'CHECK'"),
        )),
        None => Ok(()),
    }
}

fn is_auto_increment(tokens: &[Token]) -> bool {
    matches!(tokens, [Token::Word(w)] if w.keyword == Keyword::AUTO_INCREMENT)
}

fn is_now(expr: &Expr) -> bool {
    match expr {
        Expr::Function(f) => {
            let n = f.name.to_string().to_ascii_uppercase();
            matches!(
                n.as_str(),
                "CURRENT_TIMESTAMP" | "NOW" | "LOCALTIMESTAMP" | "LOCALTIME"
            )
        }
        Expr::Identifier(i) => matches!(
            i.value.to_ascii_uppercase().as_str(),
            "CURRENT_TIMESTAMP" | "LOCALTIMESTAMP" | "LOCALTIME"
        ),
        _ => false,
    }
}

/// Whether a DEFAULT is a literal (a value, signed, parenthesized), which
/// the data nodes keep; anything else is an expression the SQL node
/// evaluates at each insert.
fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Value(_) => true,
        Expr::UnaryOp {
            op: sqlparser::ast::UnaryOperator::Minus | sqlparser::ast::UnaryOperator::Plus,
            expr,
        } => is_literal(expr),
        Expr::Nested(inner) => is_literal(inner),
        _ => false,
    }
}

/// An expression DEFAULT's text as MariaDB shows it (SHOW CREATE TABLE,
/// SHOW COLUMNS, `COLUMN_DEFAULT`): a function call as it is, in lower
/// case (`uuid()`, NOW as `current_timestamp()`), anything else in
/// parentheses (`(1 + 1)`). A column named in it is not supported (MariaDB
/// evaluates such a default after the row's given values); neither is a
/// subquery, which MariaDB refuses too.
fn expression_default(expr: &Expr, column: &str) -> SqlResult<String> {
    use sqlparser::ast::ObjectNamePart;
    let mut expr = expr.clone();
    while let Expr::Nested(inner) = expr {
        expr = *inner;
    }
    let mut refused = None;
    let _ = sqlparser::ast::visit_expressions_mut(&mut expr, |e| {
        if is_now(e) {
            *e = super::expr::ast_call("current_timestamp", []);
            return std::ops::ControlFlow::Continue(());
        }
        match e {
            // A column of the row (`default_columns_checked` checks it),
            // kept quoted as MariaDB shows it (`a` * 10); a variable (`@x`,
            // `@@x`) is read at the insert.
            Expr::Identifier(i)
                if !i.value.starts_with('@')
                    && !NOT_COLUMNS.iter().any(|w| w.eq_ignore_ascii_case(&i.value)) =>
            {
                i.quote_style = Some('`');
            }
            Expr::Identifier(_) => {}
            Expr::CompoundIdentifier(_) => refused = Some(e.to_string()),
            Expr::Subquery(_) | Expr::Exists { .. } => refused = Some("select ...".to_owned()),
            Expr::Function(f) => {
                for part in &mut f.name.0 {
                    if let ObjectNamePart::Identifier(i) = part {
                        i.value = i.value.to_ascii_lowercase();
                    }
                }
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    if let Some(what) = refused {
        return Err(SqlError::new(
            codes::FUNCTION_NOT_DEFAULT,
            format!("Function or expression '{what}' cannot be used in the DEFAULT clause of `{column}`"),
        ));
    }
    // A call stands alone, as MariaDB shows it; anything else (an
    // operator, a DATE_ADD shown as one) in parentheses.
    let call = match &expr {
        Expr::Function(f) => date_arithmetic(f).is_none(),
        Expr::Substring { .. } | Expr::Trim { .. } => true,
        _ => false,
    };
    let text = mariadb_form(&expr);
    Ok(if call { text } else { format!("({text})") })
}

/// MariaDB's print form of an expression DEFAULT (what SHOW CREATE TABLE
/// and information_schema show, and what is kept and parsed again when
/// the default is used): function names in lower case under MariaDB's
/// own names (`ucase`, `lcase`, `substr`), arguments separated by a bare
/// comma, `interval n unit` in lower case with a compound unit joined by
/// `_`, DATE_ADD/DATE_SUB as `d + interval …`, `%` as `MOD`, CASE in
/// lower case. Forms it does not know are written as the parser writes them.
fn mariadb_form(e: &Expr) -> String {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments, ObjectNamePart};
    match e {
        Expr::Function(f) => {
            if let Some((date, sign, interval)) = date_arithmetic(f) {
                return format!("{} {sign} {}", mariadb_form(date), mariadb_form(interval));
            }
            let name = match f.name.0.as_slice() {
                [ObjectNamePart::Identifier(i)] => i.value.to_ascii_lowercase(),
                _ => return e.to_string(),
            };
            let plain = f.filter.is_none()
                && f.over.is_none()
                && f.null_treatment.is_none()
                && f.within_group.is_empty()
                && matches!(f.parameters, FunctionArguments::None);
            let args: Option<Vec<String>> = match &f.args {
                FunctionArguments::List(list)
                    if plain && list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
                {
                    list.args
                        .iter()
                        .map(|a| match a {
                            FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Some(mariadb_form(x)),
                            _ => None,
                        })
                        .collect()
                }
                _ => None,
            };
            let Some(args) = args else {
                return e.to_string();
            };
            let name = match name.as_str() {
                "upper" => "ucase",
                "lower" => "lcase",
                "substring" => "substr",
                other => other,
            };
            format!("{name}({})", args.join(","))
        }
        Expr::Interval(i)
            if i.leading_precision.is_none() && i.fractional_seconds_precision.is_none() =>
        {
            let unit = match (&i.leading_field, &i.last_field) {
                (Some(unit), None) => unit.to_string(),
                (Some(first), Some(last)) => format!("{first}_{last}"),
                _ => return e.to_string(),
            };
            format!(
                "interval {} {}",
                mariadb_form(&i.value),
                unit.to_ascii_lowercase()
            )
        }
        Expr::BinaryOp { left, op, right } => {
            let op = match op {
                sqlparser::ast::BinaryOperator::Modulo => "MOD".to_owned(),
                other => other.to_string(),
            };
            format!("{} {op} {}", mariadb_form(left), mariadb_form(right))
        }
        Expr::Nested(inner) => format!("({})", mariadb_form(inner)),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let mut text = "case".to_owned();
            if let Some(operand) = operand {
                text = format!("{text} {}", mariadb_form(operand));
            }
            for c in conditions {
                text = format!(
                    "{text} when {} then {}",
                    mariadb_form(&c.condition),
                    mariadb_form(&c.result)
                );
            }
            if let Some(e) = else_result {
                text = format!("{text} else {}", mariadb_form(e));
            }
            format!("{text} end")
        }
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            let mut args = vec![mariadb_form(expr)];
            args.extend(substring_from.iter().map(|x| mariadb_form(x)));
            args.extend(substring_for.iter().map(|x| mariadb_form(x)));
            format!("substr({})", args.join(","))
        }
        Expr::Trim {
            trim_where: None,
            trim_what: None,
            expr,
            trim_characters: None,
        } => format!("trim({})", mariadb_form(expr)),
        other => other.to_string(),
    }
}

/// `DATE_ADD(d, INTERVAL …)` / `DATE_SUB` (and ADDDATE/SUBDATE with an
/// interval), which MariaDB shows as `d + interval …`: the date, the
/// sign and the interval.
fn date_arithmetic(f: &sqlparser::ast::Function) -> Option<(&Expr, char, &Expr)> {
    use sqlparser::ast::{FunctionArg as A, FunctionArgExpr as X, FunctionArguments};
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [A::Unnamed(X::Expr(date)), A::Unnamed(X::Expr(interval @ Expr::Interval(_)))] =
        list.args.as_slice()
    else {
        return None;
    };
    let name = f.name.to_string().to_ascii_lowercase();
    let sign = match name.as_str() {
        "date_add" | "adddate" => '+',
        "date_sub" | "subdate" => '-',
        _ => return None,
    };
    Some((date, sign, interval))
}

/// A default's literal text: `None` for NULL.
fn literal(expr: &Expr) -> SqlResult<Option<String>> {
    use sqlparser::ast::Value as V;
    match expr {
        Expr::Value(v) => match &v.value {
            V::Null => Ok(None),
            V::Number(n, _) => Ok(Some(n.clone())),
            V::SingleQuotedString(s) | V::DoubleQuotedString(s) => Ok(Some(s.clone())),
            V::Boolean(b) => Ok(Some(if *b { "1" } else { "0" }.to_owned())),
            // A bit-value literal (`b'101'`) is a number: 5 in a BIT column
            // (shown b'101') and in a numeric one, as MariaDB reads it.
            V::SingleQuotedByteStringLiteral(bits) => u64::from_str_radix(bits, 2)
                .map(|v| Some(v.to_string()))
                .map_err(|_| SqlError::unsupported(format_args!("the default b'{bits}'"))),
            V::HexStringLiteral(h) => {
                let bytes = (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or("0"), 16).unwrap_or(0))
                    .collect::<Vec<u8>>();
                Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
            }
            other => Err(SqlError::unsupported(format_args!("the default {other}"))),
        },
        Expr::UnaryOp { op, expr } => {
            let inner = literal(expr)?.unwrap_or_default();
            match op {
                sqlparser::ast::UnaryOperator::Minus => Ok(Some(format!("-{inner}"))),
                sqlparser::ast::UnaryOperator::Plus => Ok(Some(inner)),
                _ => Err(SqlError::unsupported(format_args!("the default {expr}"))),
            }
        }
        Expr::Nested(inner) => literal(inner),
        other => Err(SqlError::unsupported(format_args!(
            "the default expression {other} (literals and CURRENT_TIMESTAMP only)"
        ))),
    }
}

/// The warning MariaDB gives before 1067 for a default `text` its column
/// cannot hold ("at row 0": a default is no row): a number out of range
/// 1264, one with text after it or a string or date that does not fit
/// 1265, no number at all 1366 (naming an empty database and table, as
/// MariaDB's does); none for an ENUM or SET member that is not one.
fn refused_default_warning(ty: &SqlType, name: &str, text: &str) -> Option<(u16, String)> {
    let truncated = || {
        (
            codes::WARN_DATA_TRUNCATED,
            format!("Data truncated for column '{name}' at row 0"),
        )
    };
    let kind = match ty {
        SqlType::Decimal { .. } => "decimal",
        SqlType::Float { .. } | SqlType::Double { .. } => "double",
        SqlType::Bit { .. } | SqlType::Year => "integer",
        ty if ty.is_number() => "integer",
        SqlType::Enum(_) | SqlType::Set(_) => return None,
        _ => return Some(truncated()),
    };
    match super::expr::value::str_number_prefix(text) {
        ("", _) => Some((
            codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
            format!("Incorrect {kind} value: '{text}' for column ``.``.`{name}` at row 0"),
        )),
        (_, false) => Some(truncated()),
        (_, true) => Some((
            codes::OUT_OF_RANGE,
            format!("Out of range value for column '{name}' at row 0"),
        )),
    }
}

/// A default as SQL shows it (ENUM and SET members in their declared
/// spelling).
fn canonical_default(ty: &SqlType, text: &str) -> String {
    match ty {
        SqlType::Enum(members) => members
            .iter()
            .find(|m| m.eq_ignore_ascii_case(text))
            .cloned()
            .unwrap_or_default(),
        // Members once each, in their declared order and spelling
        // (`'z,x,x'` is `'x,z'`), as MariaDB keeps a SET's value.
        SqlType::Set(members) => members
            .iter()
            .filter(|m| text.split(',').any(|t| m.eq_ignore_ascii_case(t)))
            .cloned()
            .collect::<Vec<_>>()
            .join(","),
        _ => text.to_owned(),
    }
}

/// A DECIMAL column's default as MariaDB stores it: rounded half away
/// from zero to the column's scale, and whether that changed it (MariaDB's
/// note 1265). None where it is no number, negative in an UNSIGNED
/// column (before rounding), or past (M,D) once rounded: 1067, as
/// MariaDB's. Not a DECIMAL: None.
fn decimal_default(ty: &SqlType, text: &str) -> Option<(Dec, bool)> {
    let SqlType::Decimal {
        precision,
        scale,
        unsigned,
    } = ty
    else {
        return None;
    };
    let text = text.trim();
    // One with an exponent (`1.234e0`) is a double to MariaDB, rounded
    // from its shortest digits (1.235e0 is 1.24).
    let exact = Dec::parse(text).or_else(|| Dec::of_double(text.parse().ok()?))?;
    if *unsigned && exact.mantissa < 0 {
        return None;
    }
    use super::expr::value::DECIMAL_SCALE_MAX as DEC_SCALE_MAX;
    let mut rounded = exact.rescale(*scale)?;
    // Digits past the 30 a decimal holds, which `Dec::parse` drops: they
    // make it rounded, and at scale 30 the first of them rounds it.
    let dropped = text
        .split_once('.')
        .map(|(_, frac)| frac)
        .filter(|frac| frac.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|frac| frac.get(usize::from(DEC_SCALE_MAX)..))
        .unwrap_or("");
    if *scale == DEC_SCALE_MAX && dropped.as_bytes().first().is_some_and(|d| *d >= b'5') {
        let away = if text.starts_with('-') { -1i128 } else { 1 };
        rounded = Dec::new(rounded.mantissa.checked_add(away.into())?, rounded.scale);
    }
    if rounded.whole_digits() > u32::from(precision.saturating_sub(*scale)) {
        return None;
    }
    let cut = dropped.bytes().any(|d| d != b'0');
    Some((rounded, cut || rounded.cmp_dec(exact).is_ne()))
}

/// A default literal as the native value the storage holds.
pub fn default_value(ty: &SqlType, text: &str) -> Option<Value> {
    let text = text.trim();
    let int = |unsigned: bool, min: i128, max: i128| -> Option<Value> {
        let v: i128 = text
            .parse::<i128>()
            .ok()
            .or_else(|| text.parse::<f64>().ok().map(|f| f.round() as i128))?;
        if v < min || v > max {
            return None;
        }
        Some(if unsigned {
            Value::UInt(v as u64)
        } else {
            Value::Int(v as i64)
        })
    };
    match ty {
        SqlType::TinyInt { unsigned: false } => int(false, -128, 127),
        SqlType::TinyInt { unsigned: true } => int(true, 0, 255),
        SqlType::SmallInt { unsigned: false } => int(false, -32_768, 32_767),
        SqlType::SmallInt { unsigned: true } => int(true, 0, 65_535),
        SqlType::MediumInt { unsigned: false } => int(false, -8_388_608, 8_388_607),
        SqlType::MediumInt { unsigned: true } => int(true, 0, 16_777_215),
        SqlType::Int { unsigned: false } => int(false, i32::MIN.into(), i32::MAX.into()),
        SqlType::Int { unsigned: true } => int(true, 0, u32::MAX.into()),
        SqlType::BigInt { unsigned: false } => int(false, i64::MIN.into(), i64::MAX.into()),
        SqlType::BigInt { unsigned: true } => int(true, 0, u64::MAX.into()),
        // A negative default of an UNSIGNED one, or one past (M,D), is
        // 1067 as in MariaDB; (M,D) rounds it as a stored value.
        SqlType::Float { digits, unsigned } | SqlType::Double { digits, unsigned } => {
            let f = text.parse::<f64>().ok()?;
            if *unsigned && f < 0.0 {
                return None;
            }
            let f = match digits {
                Some(d) => Some(d.round(f)).filter(|r| r.abs() <= d.max())?,
                None => f,
            };
            Some(match (ty, digits) {
                // A FLOAT's own parse unless (M,D) rounded it.
                (SqlType::Float { .. }, None) => Value::Float(text.parse::<f32>().ok()?),
                (SqlType::Float { .. }, Some(_)) => Value::Float(f as f32),
                _ => Value::Double(f),
            })
        }
        SqlType::Decimal { .. } => {
            let (d, _) = decimal_default(ty, text)?;
            schema::Decimal::parse(&d.to_text())
                .ok()
                .map(Value::Decimal)
        }
        SqlType::Char { .. } | SqlType::VarChar { .. } => Some(Value::String(text.to_owned())),
        SqlType::Binary { .. } | SqlType::VarBinary { .. } => {
            Some(Value::Bytes(text.as_bytes().to_vec()))
        }
        SqlType::Text { .. } | SqlType::Blob { .. } => None,
        SqlType::Date => {
            let (y, m, d) = parse_date(text)?;
            Some(Value::Date(schema::Date::new(y, m, d)))
        }
        SqlType::DateTime { .. } => {
            let (date, time) = text.split_once([' ', 'T']).unwrap_or((text, "00:00:00"));
            let (y, mo, d) = parse_date(date)?;
            let (negative, h, mi, s, us) = parse_time(time)?;
            if negative || h > 23 {
                return None;
            }
            Some(Value::DateTime(schema::DateTime::new(
                schema::Date::new(y, mo, d),
                h as u8,
                mi,
                s,
                us,
            )))
        }
        SqlType::Timestamp { .. } => {
            // In UTC: the session time zone is the query helper's (its
            // default, like the server's, is UTC).
            let (date, time) = text.split_once([' ', 'T']).unwrap_or((text, "00:00:00"));
            let (y, mo, d) = parse_date(date)?;
            let (negative, h, mi, s, us) = parse_time(time)?;
            if negative || h > 23 {
                return None;
            }
            if (y, mo, d) == (0, 0, 0) {
                return Some(Value::Timestamp(0));
            }
            let days = days_from_civil(i64::from(y), i64::from(mo), i64::from(d));
            let secs = days * 86_400 + i64::from(h) * 3_600 + i64::from(mi) * 60 + i64::from(s);
            Some(Value::Timestamp(secs * 1_000_000 + i64::from(us)))
        }
        SqlType::Time { .. } => {
            let (negative, h, mi, s, us) = parse_time(text)?;
            let micros = ((i64::from(h) * 60 + i64::from(mi)) * 60 + i64::from(s)) * 1_000_000
                + i64::from(us);
            Some(Value::Int(if negative { -micros } else { micros }))
        }
        SqlType::Year => {
            let y: u32 = text.parse().ok()?;
            let y = match y {
                0 if text.len() < 4 => 2000,
                0 => 0,
                1..=69 => 2000 + y,
                70..=99 => 1900 + y,
                1901..=2155 => y,
                _ => return None,
            };
            Some(Value::UInt(u64::from(y)))
        }
        SqlType::Bit { bits } => {
            let v: u64 = if let Some(b) = text.strip_prefix("b'").and_then(|t| t.strip_suffix('\''))
            {
                u64::from_str_radix(b, 2).ok()?
            } else {
                text.parse().ok()?
            };
            if *bits < 64 && v >> bits != 0 {
                return None;
            }
            Some(Value::Bit(v))
        }
        SqlType::Enum(members) => {
            if text.is_empty() {
                return None;
            }
            let at = members.iter().position(|m| m.eq_ignore_ascii_case(text))?;
            Some(Value::UInt(at as u64 + 1))
        }
        SqlType::Set(members) => {
            let mut bits = 0u64;
            for part in text.split(',').filter(|p| !p.is_empty()) {
                let at = members.iter().position(|m| m.eq_ignore_ascii_case(part))?;
                bits |= 1 << at;
            }
            Some(Value::UInt(bits))
        }
    }
}

fn parse_date(text: &str) -> Option<(u16, u8, u8)> {
    let mut parts = text.split('-');
    let y: u16 = parts.next()?.trim().parse().ok()?;
    let m: u8 = parts.next()?.trim().parse().ok()?;
    let d: u8 = parts.next()?.trim().parse().ok()?;
    if parts.next().is_some() || y > 9999 || m > 12 || d > 31 {
        return None;
    }
    if (m == 0 || d == 0) && (y, m, d) != (0, 0, 0) {
        return None;
    }
    if m > 0 && d > days_in_month(y, m) {
        return None;
    }
    Some((y, m, d))
}

fn days_in_month(y: u16, m: u8) -> u8 {
    match m {
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `[-]H:MM:SS[.ffffff]`: `(negative, hours, minutes, seconds, micros)`.
fn parse_time(text: &str) -> Option<(bool, u32, u8, u8, u32)> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (hms, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut parts = hms.split(':');
    let h: u32 = parts.next()?.trim().parse().ok()?;
    let m: u8 = parts.next().unwrap_or("0").trim().parse().ok()?;
    let s: u8 = parts.next().unwrap_or("0").trim().parse().ok()?;
    if parts.next().is_some() || m > 59 || s > 59 || h > 838 {
        return None;
    }
    if frac.len() > 6 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let micros = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().ok()?
    };
    Some((negative, h, m, s, micros))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// ---- ALTER TABLE, CREATE/DROP INDEX, RENAME TABLE ----

/// A change of a table's definition: one native alter when the dictionary
/// can make it online (docs/dictionary.md: a rename, columns renamed or
/// added at the end, indexes added or dropped, metadata), else a copy of
/// the rows into a new table ([`super::alter_copy`]).
///
/// While the change is built, the columns that keys, indexes and the SQL
/// metadata name are *slots*, not positions: a column of the table keeps
/// its position as its slot, an added one gets the next free slot. So
/// columns can be added anywhere, dropped and moved without renumbering
/// every reference at each step; [`Change::finish`] maps slots to the
/// final positions once.
pub(super) struct Change {
    pub(super) info: std::sync::Arc<TableInfo>,
    pub(super) def: TableDef,
    pub(super) sql: meta::TableMeta,
    pub(super) auto_increment: Option<u64>,
    /// The slot of each column of `def`, in order.
    slots: Vec<usize>,
    /// The next slot for an added column.
    next_slot: usize,
    /// A column was added at the end by this change (the next goes after
    /// it).
    added: bool,
    /// Why the change needs a copy of the rows, if it does.
    pub(super) copy: Option<String>,
    /// The table's new database and name (`RENAME`), if it gets one.
    pub(super) rename: Option<(String, String)>,
}

impl Change {
    fn new(info: &std::sync::Arc<TableInfo>) -> Change {
        let def = info.native.def().clone();
        let mut sql = info.sql.clone();
        if sql.columns.is_empty() {
            // A table made outside SQL: describe its columns as they are,
            // so the metadata added now covers every column.
            sql.columns = info
                .columns
                .iter()
                .map(|c| meta::ColumnMeta {
                    native: c.native as u16,
                    ty: c.ty.clone(),
                    auto_increment: false,
                    zerofill: false,
                    default_now: false,
                    default_expr: false,
                    on_update_now: false,
                    width: None,
                    default: c.default.clone(),
                    comment: String::new(),
                })
                .collect();
        }
        let columns = def.columns.len();
        Change {
            info: std::sync::Arc::clone(info),
            def,
            sql,
            auto_increment: None,
            slots: (0..columns).collect(),
            next_slot: columns,
            added: false,
            copy: None,
            rename: None,
        }
    }

    /// The change needs a copy of the rows, for `why`.
    fn copy_for(&mut self, why: impl Into<String>) {
        if self.copy.is_none() {
            self.copy = Some(why.into());
        }
    }

    fn index_names(&self) -> Vec<String> {
        self.def
            .indexes
            .iter()
            .filter(|i| !i.name.ends_with(UNIQUE_SUFFIX))
            .map(|i| i.name.clone())
            .collect()
    }

    /// The index in `def.columns` of the visible column `column`.
    fn find(&self, column: &str) -> Option<usize> {
        self.def.columns.iter().position(|c| {
            c.name.eq_ignore_ascii_case(column) && c.name != schema::HIDDEN_PRIMARY_KEY_COLUMN
        })
    }

    /// The slot of a key column, or 1072.
    fn position(&self, column: &str) -> SqlResult<usize> {
        self.find(column).map(|at| self.slots[at]).ok_or_else(|| {
            SqlError::new(
                codes::KEY_COLUMN_DOES_NOT_EXIST,
                format!("Key column '{column}' doesn't exist in table"),
            )
        })
    }

    /// The index of column `column` for a statement that changes it, or
    /// 1054.
    fn existing(&self, column: &str) -> SqlResult<usize> {
        self.find(column).ok_or_else(|| {
            SqlError::new(
                codes::BAD_FIELD,
                format!("Unknown column '{column}' in '{}'", self.info.name),
            )
        })
    }

    fn check_new_name(&self, name: &str, except: Option<usize>) -> SqlResult<()> {
        if let Some(at) = self.find(name) {
            if Some(at) != except {
                return Err(SqlError::new(
                    codes::DUP_FIELDNAME,
                    format!("Duplicate column name '{name}'"),
                ));
            }
        }
        Ok(())
    }

    fn add_index(
        &mut self,
        name: Option<String>,
        columns: Vec<String>,
        unique: bool,
    ) -> SqlResult<()> {
        let positions = columns
            .iter()
            .map(|c| self.position(c))
            .collect::<SqlResult<Vec<_>>>()?;
        let taken = self.index_names();
        let name = match name {
            Some(n) if taken.iter().any(|t| t.eq_ignore_ascii_case(&n)) => {
                return Err(SqlError::new(
                    codes::DUP_KEYNAME,
                    format!("Duplicate key name '{n}'"),
                ))
            }
            Some(n) => n,
            None => {
                let first = self
                    .slots
                    .iter()
                    .position(|s| *s == positions[0])
                    .map_or("key", |at| self.def.columns[at].name.as_str());
                auto_index_name(first, &taken)
            }
        };
        if unique {
            // The dictionary cannot build a unique index's hidden table
            // from existing rows; a new table built by the copy can.
            self.copy_for(format!("adding UNIQUE key '{name}'"));
        }
        for index in index_defs(&name, positions, unique)? {
            self.def.indexes.push(index);
        }
        Ok(())
    }

    /// `RENAME {INDEX|KEY} old TO new`: MySQL renames in the dictionary
    /// only; here the cluster's index is dropped and built again under the
    /// new name (a UNIQUE one by a copy, as any UNIQUE key added).
    fn rename_index(&mut self, old: &str, new: &str) -> SqlResult<()> {
        if old.eq_ignore_ascii_case(PRIMARY) || new.eq_ignore_ascii_case(PRIMARY) {
            return Err(err(
                1280,
                "42000",
                format!(
                    "Incorrect index name '{}'",
                    if old.eq_ignore_ascii_case(PRIMARY) {
                        old
                    } else {
                        new
                    }
                ),
            ));
        }
        let Some(index) = self
            .def
            .indexes
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(old))
            .cloned()
        else {
            return Err(err(
                1176,
                "42000",
                format!("Key '{old}' doesn't exist in table '{}'", self.info.name),
            ));
        };
        let hash = format!("{old}{UNIQUE_SUFFIX}");
        let unique = self
            .def
            .indexes
            .iter()
            .any(|i| i.name.eq_ignore_ascii_case(&hash));
        let columns: Vec<String> = index
            .columns
            .iter()
            .map(|&c| self.def.columns[c].name.clone())
            .collect();
        // In the old one's place, as SHOW INDEX lists keys in order.
        let at = self
            .def
            .indexes
            .iter()
            .position(|i| i.name.eq_ignore_ascii_case(old) || i.name.eq_ignore_ascii_case(&hash))
            .expect("found above");
        self.drop_index(old)?;
        let kept = self.def.indexes.len();
        self.add_index(Some(new.to_owned()), columns, unique)?;
        let added: Vec<IndexDef> = self.def.indexes.drain(kept..).collect();
        self.def.indexes.splice(at..at, added);
        Ok(())
    }

    fn drop_index(&mut self, name: &str) -> SqlResult<()> {
        if name.eq_ignore_ascii_case(PRIMARY) {
            return Err(SqlError::unsupported(
                "dropping the primary key: the cluster cannot change a table's key",
            ));
        }
        let hash = format!("{name}{UNIQUE_SUFFIX}");
        let before = self.def.indexes.len();
        self.def
            .indexes
            .retain(|i| !i.name.eq_ignore_ascii_case(name) && !i.name.eq_ignore_ascii_case(&hash));
        if self.def.indexes.len() == before {
            return Err(SqlError::new(
                codes::CANT_DROP_FIELD_OR_KEY,
                format!("Can't DROP INDEX `{name}`; check that it exists"),
            ));
        }
        Ok(())
    }

    /// Where `position` puts a column: the index in `def.columns`, and
    /// whether that is the end (an online add).
    fn place(
        &self,
        position: &Option<sqlparser::ast::MySQLColumnPosition>,
        skip: Option<usize>,
    ) -> SqlResult<(usize, bool)> {
        use sqlparser::ast::MySQLColumnPosition as P;
        match position {
            None => Ok((self.def.columns.len(), true)),
            Some(P::First) => Ok((0, false)),
            Some(P::After(c)) => {
                let at = self.existing(&c.value)?;
                if Some(at) == skip {
                    // MySQL: a column placed after itself is unknown there.
                    return Err(SqlError::new(
                        codes::BAD_FIELD,
                        format!("Unknown column '{}' in '{}'", c.value, self.info.name),
                    ));
                }
                let last = self
                    .def
                    .columns
                    .iter()
                    .rposition(|c| c.name != schema::HIDDEN_PRIMARY_KEY_COLUMN);
                if Some(at) == last && !self.added && skip.is_none() {
                    // After the last column: at the very end (behind a
                    // hidden key), which the dictionary adds online.
                    Ok((self.def.columns.len(), true))
                } else {
                    Ok((at + 1, false))
                }
            }
        }
    }

    /// Puts `column` (SQL metadata `meta`) at index `at` of the columns
    /// with slot `slot`.
    fn insert_column(
        &mut self,
        at: usize,
        slot: usize,
        column: Column,
        mut meta: meta::ColumnMeta,
    ) {
        meta.native = slot as u16;
        // The SQL metadata lists the visible columns in table order.
        let before = self.slots[..at]
            .iter()
            .filter(|s| {
                self.sql
                    .columns
                    .iter()
                    .any(|m| usize::from(m.native) == **s)
            })
            .count();
        self.sql
            .columns
            .insert(before.min(self.sql.columns.len()), meta);
        self.def.columns.insert(at, column);
        self.slots.insert(at, slot);
    }

    /// Takes the column at index `at` out, with its metadata and slot.
    fn take_column(&mut self, at: usize) -> (Column, Option<meta::ColumnMeta>, usize) {
        let slot = self.slots.remove(at);
        let column = self.def.columns.remove(at);
        let meta = self
            .sql
            .columns
            .iter()
            .position(|m| usize::from(m.native) == slot)
            .map(|i| self.sql.columns.remove(i));
        (column, meta, slot)
    }

    fn add_column(
        &mut self,
        conn: &mut Conn<'_>,
        column: &sqlparser::ast::ColumnDef,
        position: &Option<sqlparser::ast::MySQLColumnPosition>,
    ) -> SqlResult<()> {
        self.check_new_name(&column.name.value, None)?;
        let (at, at_end) = self.place(position, None)?;
        let spec = column_spec(conn, column, &self.sql.collation.clone(), at)?;
        if spec.primary {
            return Err(SqlError::unsupported(
                "adding a PRIMARY KEY column: the cluster cannot change a table's key",
            ));
        }
        self.set_column_checks(None, &spec);
        if !at_end {
            self.copy_for(format!(
                "adding column '{}' before others",
                spec.column.name
            ));
        }
        if spec.meta.auto_increment {
            if self.sql.columns.iter().any(|c| c.auto_increment) {
                return Err(err(
                    1075,
                    "42000",
                    "Incorrect table definition; there can be only one auto column and it must \
                     be defined as a key",
                ));
            }
            self.copy_for(format!(
                "adding AUTO_INCREMENT column '{}'",
                spec.column.name
            ));
        }
        if spec.meta.default_expr {
            // Existing rows get it evaluated, each its own (uuid()).
            self.copy_for(format!(
                "adding column '{}' whose DEFAULT the SQL node evaluates",
                spec.column.name
            ));
        }
        if !spec.column.nullable && spec.column.default.is_none() && !spec.meta.default_expr {
            // MySQL fills existing rows with the type's implicit default;
            // the copy does so (the dictionary needs a stored default).
            self.copy_for(format!(
                "adding NOT NULL column '{}' without a DEFAULT",
                spec.column.name
            ));
        }
        let unique = spec.unique;
        let name = spec.column.name.clone();
        let slot = self.next_slot;
        self.next_slot += 1;
        self.insert_column(at, slot, spec.column, spec.meta);
        self.added |= at_end;
        if unique {
            self.add_index(None, vec![name], true)?;
        }
        Ok(())
    }

    /// A column added (`old` None) or redefined (`old` its name before):
    /// its CHECK constraints become the definition's, after the other
    /// columns' and before the table's.
    fn set_column_checks(&mut self, old: Option<&str>, spec: &ColumnSpec) {
        if let Some(old) = old {
            self.sql.checks.retain(|c| {
                !c.column
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(old))
            });
        }
        let at = self
            .sql
            .checks
            .iter()
            .position(|c| c.column.is_none())
            .unwrap_or(self.sql.checks.len());
        let name = &spec.column.name;
        for (k, expr) in spec.checks.iter().enumerate() {
            self.sql.checks.insert(
                at + k,
                meta::CheckMeta {
                    name: name.clone(),
                    column: Some(name.clone()),
                    expr: expr.clone(),
                },
            );
        }
    }

    /// `DROP CONSTRAINT name`: a table CHECK the table had before the
    /// statement (MariaDB resolves the drops before the adds, and a
    /// column's CHECK is not a constraint it drops by name), else a UNIQUE
    /// key, as MariaDB's DROP CONSTRAINT drops one. 1091 for neither.
    fn drop_constraint(&mut self, name: &str) -> SqlResult<()> {
        let named = |c: &meta::CheckMeta| c.column.is_none() && c.name.eq_ignore_ascii_case(name);
        if self.info.sql.checks.iter().any(named) {
            if let Some(at) = self.sql.checks.iter().position(named) {
                self.sql.checks.remove(at);
                return Ok(());
            }
        }
        let hash = format!("{name}{UNIQUE_SUFFIX}");
        if self
            .def
            .indexes
            .iter()
            .any(|i| i.name.eq_ignore_ascii_case(&hash))
        {
            return self.drop_index(name);
        }
        Err(SqlError::new(
            codes::CANT_DROP_FIELD_OR_KEY,
            format!("Can't DROP CONSTRAINT `{name}`; check that it exists"),
        ))
    }

    /// The table's column names after the changes so far, the hidden
    /// primary key left out (what a CHECK may name).
    fn column_names(&self) -> Vec<String> {
        self.def
            .columns
            .iter()
            .filter(|c| c.name != schema::HIDDEN_PRIMARY_KEY_COLUMN)
            .map(|c| c.name.clone())
            .collect()
    }

    /// `ADD [CONSTRAINT name] CHECK (cond)`s, after the statement's other
    /// changes: named as MariaDB names them (1826 for a name taken), their
    /// columns there (1054). The rows must pass them, so the change copies
    /// them ([`super::alter_copy`] tests every row against the table's
    /// CHECKs, with writers held off, as MariaDB's copying ALTER does).
    fn add_checks(&mut self, added: Vec<(Option<String>, String)>) -> SqlResult<()> {
        let names = self.column_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let from = self.sql.checks.len();
        add_table_checks(&mut self.sql.checks, added)?;
        for check in &self.sql.checks[from..] {
            check_columns_exist(check, &names)?;
        }
        self.copy_for("a CHECK constraint added: every row is tested against it");
        Ok(())
    }

    /// After the changes: a column constraint whose column went goes with
    /// it (as in MariaDB); any other constraint must name only columns
    /// that are still there.
    fn keep_valid_checks(&mut self) -> SqlResult<()> {
        let defaults: Vec<(&str, Option<&str>)> = self
            .def
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name != schema::HIDDEN_PRIMARY_KEY_COLUMN)
            .map(|(at, c)| {
                let text = self
                    .sql
                    .columns
                    .iter()
                    .find(|m| usize::from(m.native) == at)
                    .filter(|m| m.default_expr)
                    .and_then(|m| m.default.as_deref());
                (c.name.as_str(), text)
            })
            .collect();
        default_columns_checked(&defaults)?;
        let names = self.column_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.sql.checks.retain(|c| {
            c.column
                .as_deref()
                .is_none_or(|col| names.iter().any(|n| n.eq_ignore_ascii_case(col)))
        });
        for check in &self.sql.checks {
            if check_columns_exist(check, &names).is_err() {
                return Err(SqlError::unsupported(format_args!(
                    "changing or dropping a column the CHECK constraint `{}` ({}) names",
                    check.name, check.expr
                )));
            }
        }
        Ok(())
    }

    fn drop_column(&mut self, name: &str) -> SqlResult<()> {
        let Some(at) = self.find(name) else {
            return Err(SqlError::new(
                codes::CANT_DROP_FIELD_OR_KEY,
                format!("Can't DROP COLUMN `{name}`; check that it exists"),
            ));
        };
        let slot = self.slots[at];
        if self.def.primary_key.contains(&slot) {
            return Err(SqlError::unsupported(format_args!(
                "dropping primary key column '{name}': the cluster cannot change a table's key"
            )));
        }
        let visible = self
            .def
            .columns
            .iter()
            .filter(|c| c.name != schema::HIDDEN_PRIMARY_KEY_COLUMN)
            .count();
        if visible == 1 {
            return Err(err(
                1090,
                "42000",
                "You can't delete all columns with ALTER TABLE; use DROP TABLE instead",
            ));
        }
        self.take_column(at);
        // As MySQL: the column leaves every index; an index left without a
        // column goes (a UNIQUE key's hash index with its ordered one).
        for index in &mut self.def.indexes {
            index.columns.retain(|c| *c != slot);
        }
        self.def.indexes.retain(|i| !i.columns.is_empty());
        self.copy_for(format!("dropping column '{name}'"));
        Ok(())
    }

    fn rename_column(&mut self, old: &str, new: &str) -> SqlResult<()> {
        let at = self.existing(old)?;
        self.check_new_name(new, Some(at))?;
        check_column_name(new)?;
        self.def.columns[at].name = new.to_owned();
        Ok(())
    }

    /// `CHANGE old new type …` / `MODIFY col type …`: a rename alone is
    /// online; a changed type, nullability, default or place is a copy.
    fn change_column(
        &mut self,
        conn: &mut Conn<'_>,
        old: &str,
        column: &sqlparser::ast::ColumnDef,
        position: &Option<sqlparser::ast::MySQLColumnPosition>,
    ) -> SqlResult<()> {
        let at = self.existing(old)?;
        self.check_new_name(&column.name.value, Some(at))?;
        let slot = self.slots[at];
        let mut spec = column_spec(conn, column, &self.sql.collation.clone(), slot)?;
        self.set_column_checks(Some(old), &spec);
        let in_key = self.def.primary_key.contains(&slot);
        if spec.primary && !in_key {
            return Err(SqlError::unsupported(
                "making a column the PRIMARY KEY: the cluster cannot change a table's key",
            ));
        }
        if in_key {
            // MySQL: primary key columns are NOT NULL.
            spec.column.nullable = false;
        }
        let old_meta = self
            .sql
            .columns
            .iter()
            .find(|m| usize::from(m.native) == slot)
            .cloned();
        let same = self.def.columns[at].same_but_name(&spec.column)
            && old_meta.as_ref() == Some(&spec.meta);
        if let Some(p) = position {
            let (to, _) = self.place(&Some(p.clone()), Some(at))?;
            let (mut taken, meta, _) = self.take_column(at);
            let to = if to > at { to - 1 } else { to };
            if same {
                taken.name = spec.column.name.clone();
                self.insert_column(to, slot, taken, meta.unwrap_or(spec.meta));
            } else {
                self.insert_column(to, slot, spec.column.clone(), spec.meta);
            }
            if to != at {
                self.copy_for(format!("moving column '{old}'"));
            }
        } else if same {
            self.def.columns[at].name = spec.column.name.clone();
        } else {
            if in_key && self.def.columns[at].ty != spec.column.ty {
                return Err(SqlError::unsupported(format_args!(
                    "changing the type of primary key column '{old}'"
                )));
            }
            self.take_column(at);
            self.insert_column(at, slot, spec.column.clone(), spec.meta);
        }
        if !same {
            self.copy_for(format!("changing column '{old}'"));
        }
        if spec.unique {
            self.add_index(None, vec![spec.column.name.clone()], true)?;
        }
        Ok(())
    }

    /// `ALTER COLUMN c SET DEFAULT v` (`Some(v)`) or `DROP DEFAULT`
    /// (`None`; a nullable column's default is then NULL, as MariaDB's).
    ///
    /// A copy, not a change of the dictionary alone: rows stored before a
    /// column was added online read it as the column's default (redo
    /// replay converts their old images so), so a new default must not
    /// reach them; the copy rewrites every row whole.
    fn alter_default(
        &mut self,
        conn: &mut Conn<'_>,
        name: &str,
        default: Option<&Expr>,
    ) -> SqlResult<()> {
        let at = self.existing(name)?;
        let slot = self.slots[at];
        let m = self
            .sql
            .columns
            .iter()
            .position(|m| usize::from(m.native) == slot)
            .expect("every column has its SQL metadata once a change starts");
        let mut column = self.def.columns[at].clone();
        let mut meta = self.sql.columns[m].clone();
        set_default(conn, default, &mut column, &mut meta)?;
        if column == self.def.columns[at] && meta == self.sql.columns[m] {
            return Ok(());
        }
        self.def.columns[at] = column;
        self.sql.columns[m] = meta;
        self.copy_for(format!("changing the default of column '{name}'"));
        Ok(())
    }

    /// Maps slots to the final positions (see the type's doc).
    fn finish(&mut self) {
        let position = |slots: &[usize], slot: usize| {
            slots
                .iter()
                .position(|s| *s == slot)
                .expect("every slot a key or index names is a column of the table")
        };
        let slots = self.slots.clone();
        for c in self
            .def
            .primary_key
            .iter_mut()
            .chain(self.def.distribution_key.iter_mut())
        {
            *c = position(&slots, *c);
        }
        for index in &mut self.def.indexes {
            for c in &mut index.columns {
                *c = position(&slots, *c);
            }
        }
        for m in &mut self.sql.columns {
            m.native = position(&slots, usize::from(m.native)) as u16;
        }
        self.sql.columns.sort_by_key(|m| m.native);
    }

    /// Per column of the final definition, its position in the table as
    /// it is (None for an added column). Valid after [`Change::finish`].
    pub(super) fn sources(&self) -> Vec<Option<usize>> {
        let old = self.info.native.def().columns.len();
        self.slots
            .iter()
            .map(|s| (*s < old).then_some(*s))
            .collect()
    }

    /// Makes the change; returns the rows a copying ALTER copied (0 for
    /// one the dictionary made online).
    fn apply(mut self, conn: &mut Conn<'_>) -> SqlResult<u64> {
        check_not_system(&self.info.db, &self.info.name)?;
        if self.info.is_temporary() {
            if let Some((db, name)) = self.rename.take() {
                // Its cluster table keeps its hidden name: the connection
                // finds it by the new one.
                if conn.temporary.find(&db, &name).is_some() {
                    return Err(SqlError::new(
                        codes::TABLE_EXISTS,
                        format!("Table '{name}' already exists"),
                    ));
                }
                let (old_db, old_name) = (self.info.db.clone(), self.info.name.clone());
                let rows = self.apply(conn)?;
                let mut table = conn
                    .temporary
                    .remove(&old_db, &old_name)
                    .expect("a temporary table is the connection's");
                (table.db, table.name) = (db, name);
                conn.temporary.add(table);
                return Ok(rows);
            }
        }
        if let Some(lock) = &self.info.sql.copy {
            return Err(super::alter_copy::being_copied(&self.info, lock));
        }
        let old_columns = self.info.native.def().columns.len();
        if let Some(m) = self
            .sql
            .columns
            .iter()
            .find(|m| m.auto_increment && usize::from(m.native) >= old_columns)
        {
            // MySQL: an AUTO_INCREMENT column leads a key.
            let slot = usize::from(m.native);
            let keyed = self.def.primary_key.first() == Some(&slot)
                || self
                    .def
                    .indexes
                    .iter()
                    .any(|i| i.columns.first() == Some(&slot));
            if !keyed {
                return Err(err(
                    1075,
                    "42000",
                    "Incorrect table definition; there can be only one auto column and it must \
                     be defined as a key",
                ));
            }
        }
        self.finish();
        self.keep_valid_checks()?;
        if let Some((db, name)) = &self.rename {
            self.def.name = catalog::cluster_name(db, name);
        }
        if self.copy.is_some() {
            return super::alter_copy::run(conn, self);
        }
        let encoded = self.sql.encode();
        let before = self.info.native.def();
        let renamed = self.def.name != before.name
            || self
                .def
                .columns
                .iter()
                .zip(&before.columns)
                .any(|(a, b)| a.name != b.name);
        let changed = encoded != before.sql_meta
            || self.def.columns.len() != before.columns.len()
            || self.def.indexes != before.indexes
            || renamed;
        if changed {
            self.def.sql_meta = encoded;
            check_def(&self.def)
                .validate()
                .map_err(|e| schema_error(&e, &self.info.name))?;
            alter_native(conn, self.def, self.rename.as_ref())?;
        }
        if let Some(n) = self.auto_increment {
            catalog::set_auto_increment(conn, self.info.id(), n.max(1), false)?;
        }
        Ok(0)
    }
}

/// One native alter, its refusals as MySQL's errors: 1412 when another SQL
/// node altered the table meanwhile, 1050 when a new name is taken.
pub(super) fn alter_native(
    conn: &Conn<'_>,
    def: TableDef,
    rename: Option<&(String, String)>,
) -> SqlResult<()> {
    let name = def.name.clone();
    match conn.native.alter_table(def) {
        Ok(()) => Ok(()),
        Err(e) if e.code == skarv_client::codes::WRONG_SCHEMA_VERSION => {
            // Another SQL node altered the table since this one read it:
            // read it again next time.
            conn.native.forget_table(&name);
            Err(err(
                1412,
                "HY000",
                format!(
                    "Table definition has changed, please retry transaction ({})",
                    e.message
                ),
            ))
        }
        Err(e) if e.code == skarv_client::codes::ALREADY_EXISTS => {
            let shown = rename.map_or(name.clone(), |(_, t)| t.clone());
            Err(SqlError::new(
                codes::TABLE_EXISTS,
                format!("Table '{shown}' already exists"),
            ))
        }
        Err(e) => Err(catalog::native_error(&e)),
    }
}

fn check_column_name(name: &str) -> SqlResult<()> {
    if name.is_empty()
        || name.chars().count() > catalog::IDENTIFIER_CHARS_MAX
        || name.ends_with(' ')
    {
        return Err(SqlError::new(
            codes::WRONG_COLUMN_NAME,
            format!("Incorrect column name '{name}'"),
        ));
    }
    Ok(())
}

/// The database and name a `RENAME` gives, checked: the database must
/// exist (1049) and the session may create there (1142 via authorize).
fn rename_target(conn: &mut Conn<'_>, name: &ObjectName) -> SqlResult<(String, String)> {
    let (db, table) = object_name(name)?;
    let db = database_of(conn, db)?;
    catalog::check_name(&table, false)?;
    if catalog::is_virtual_db(&db) {
        return Err(access_denied(&db));
    }
    if !catalog::database_exists(conn, &db)? {
        return Err(SqlError::new(
            codes::BAD_DB,
            format!("Unknown database '{db}'"),
        ));
    }
    check_not_system(&db, &table)?;
    Ok((db, table))
}

/// (database, table).
type QualifiedName = (String, String);

/// `RENAME TABLE a TO b[, c TO d …]`: each an online rename, in order;
/// when one fails, the ones done are renamed back (as MySQL, the
/// statement changes all or nothing, though another SQL node may see the
/// names in between). A table that takes the name of one the statement
/// parks (`RENAME TABLE t TO t_old, t_new TO t`) names it as the table it
/// replaces, which the change stream follows ([`replaced_by_rename`]).
fn rename_tables(
    conn: &mut Conn<'_>,
    pairs: &[sqlparser::ast::RenameTable],
) -> SqlResult<Answered> {
    let names = pairs
        .iter()
        .map(|pair| {
            let (from_db, from) = object_name(&pair.old_name)?;
            let (to_db, to) = object_name(&pair.new_name)?;
            Ok((
                (database_of(conn, from_db)?, from),
                (database_of(conn, to_db)?, to),
            ))
        })
        .collect::<SqlResult<Vec<_>>>()?;
    let replaced = replaced_by_rename(&names);
    // The cluster id of the table each pair renamed (set by then: a pair
    // replaces only an earlier one's).
    let mut ids = vec![0u32; pairs.len()];
    // (from, to, whether it set `replaces`) of each pair done.
    let mut done: Vec<(QualifiedName, QualifiedName, bool)> = Vec::new();
    let mut result = Ok(());
    for (i, pair) in pairs.iter().enumerate() {
        let step = (|| {
            let (db, table) = object_name(&pair.old_name)?;
            let info = catalog::table(conn, db.as_deref(), &table)?;
            ids[i] = info.id();
            let target = rename_target(conn, &pair.new_name)?;
            let mut change = Change::new(&info);
            change.rename = Some(target.clone());
            if let Some(parked) = replaced[i] {
                debug_assert!(
                    parked < i && ids[parked] != 0,
                    "a pair replaces an earlier one's"
                );
                change.def.replaces = ids[parked];
            }
            change.apply(conn)?;
            if has_foreign_keys(&info) {
                super::foreign::renamed(conn, (&info.db, &info.name), (&target.0, &target.1))?;
            }
            Ok((
                (info.db.clone(), info.name.clone()),
                target,
                replaced[i].is_some(),
            ))
        })();
        match step {
            Ok(d) => done.push(d),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result {
        for (from, to, replacing) in done.into_iter().rev() {
            let undo = catalog::table(conn, Some(&to.0), &to.1).and_then(|info| {
                let mut change = Change::new(&info);
                change.rename = Some(from.clone());
                if replacing {
                    // Back under its own name it replaces nothing: the
                    // data nodes forget the pair, so a later subscription
                    // to the table taken back does not get this one's
                    // changes (docs/events.md, "A swap by hand").
                    change.def.replaces = 0;
                }
                let fks = has_foreign_keys(&info);
                change.apply(conn)?;
                if fks {
                    super::foreign::renamed(conn, (&to.0, &to.1), (&from.0, &from.1))?;
                }
                Ok(())
            });
            if let Err(u) = undo {
                tracing::warn!(error = %u.message, "RENAME TABLE: could not rename back");
            }
        }
        return Err(e);
    }
    ok()
}

/// Whether a table takes part in a FOREIGN KEY (a rename must tell the
/// other side).
fn has_foreign_keys(info: &TableInfo) -> bool {
    !info.sql.foreign_keys.is_empty() || !info.sql.referenced_by.is_empty()
}

/// A `RENAME TABLE`'s pairs (`(database, table)` from, to): for each, the
/// earlier pair whose table it replaces, if any. A table replaces another
/// when it takes the name that table had when the statement began, and
/// that table ends the statement under a name no table of the statement
/// began with: parked, as in `RENAME TABLE t TO t_old, t_new TO t`, the
/// swap of pt-online-schema-change and gh-ost. A swap of two names
/// (`a TO tmp, b TO a, tmp TO b`) replaces nothing: each table keeps its
/// own subscribers (docs/events.md, "A copying ALTER").
fn replaced_by_rename<N: Eq + std::hash::Hash>(pairs: &[(N, N)]) -> Vec<Option<usize>> {
    use std::collections::{HashMap, HashSet};
    let began: HashSet<&N> = pairs.iter().map(|(from, _)| from).collect();
    // Each table is known by the first pair that renamed it (its origin);
    // `at`: where each origin is now.
    let mut at: HashMap<&N, usize> = HashMap::new();
    let mut origins = Vec::with_capacity(pairs.len());
    for (i, (from, to)) in pairs.iter().enumerate() {
        let origin = at.remove(from).unwrap_or(i);
        at.insert(to, origin);
        origins.push(origin);
    }
    let ends: HashMap<usize, &N> = at.iter().map(|(name, &origin)| (origin, *name)).collect();
    pairs
        .iter()
        .enumerate()
        .map(|(j, (_, to))| {
            let parked = (0..j).find(|&i| origins[i] == i && pairs[i].0 == *to)?;
            let parked_at = ends.get(&parked)?;
            (origins[j] != parked && !began.contains(parked_at)).then_some(parked)
        })
        .collect()
}

fn alter_table(
    conn: &mut Conn<'_>,
    name: &ObjectName,
    operations: &[AlterTableOperation],
) -> SqlResult<Answered> {
    alter_table_renaming(conn, name, operations, &[])
}

/// [`alter_table`], with MySQL's `RENAME {INDEX|KEY} old TO new` clauses
/// (`alter_mended`) applied first.
fn alter_table_renaming(
    conn: &mut Conn<'_>,
    name: &ObjectName,
    operations: &[AlterTableOperation],
    index_renames: &[(String, String)],
) -> SqlResult<Answered> {
    let (db, table) = object_name(name)?;
    let info = catalog::table(conn, db.as_deref(), &table)?;
    check_not_system(&info.db, &info.name)?;
    let mut change = Change::new(&info);
    for (old, new) in index_renames {
        change.rename_index(old, new)?;
    }
    let column_def = |name: &sqlparser::ast::Ident,
                      data_type: &DataType,
                      options: &[ColumnOption]| sqlparser::ast::ColumnDef {
        name: name.clone(),
        data_type: data_type.clone(),
        options: options
            .iter()
            .map(|o| sqlparser::ast::ColumnOptionDef {
                name: None,
                option: o.clone(),
            })
            .collect(),
    };
    // CHECKs added, named after the other changes (MariaDB's generated
    // names skip every name the table keeps).
    let mut added_checks: Vec<(Option<String>, String)> = Vec::new();
    let mut added_fks: Vec<super::foreign::Declared> = Vec::new();
    for op in operations {
        match op {
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::ForeignKey(fk),
                ..
            } => {
                if info.is_temporary() {
                    return Err(super::foreign::malformed(
                        conn,
                        &info.db,
                        &info.name,
                        "a temporary table takes no FOREIGN KEY",
                    ));
                }
                added_fks.push(super::foreign::declared(fk, &info.db)?);
            }
            AlterTableOperation::DropForeignKey { name, .. } => {
                let before = change.sql.foreign_keys.len();
                change
                    .sql
                    .foreign_keys
                    .retain(|f| !f.name.eq_ignore_ascii_case(&name.value));
                if change.sql.foreign_keys.len() == before {
                    return Err(SqlError::new(
                        codes::CANT_DROP_FIELD_OR_KEY,
                        format!(
                            "Can't DROP FOREIGN KEY `{}`; check that it exists",
                            name.value
                        ),
                    ));
                }
            }
            AlterTableOperation::AddColumn {
                column_def,
                column_position,
                if_not_exists,
                ..
            } => {
                if *if_not_exists && change.find(&column_def.name.value).is_some() {
                    continue;
                }
                change.add_column(conn, column_def, column_position)?
            }
            AlterTableOperation::AddConstraint { constraint, .. } => match constraint {
                TableConstraint::Index(i) => change.add_index(
                    i.name.as_ref().map(|n| n.value.clone()),
                    index_columns(&i.columns)?,
                    false,
                )?,
                TableConstraint::Unique(u) => change.add_index(
                    u.index_name
                        .as_ref()
                        .or(u.name.as_ref())
                        .map(|n| n.value.clone()),
                    index_columns(&u.columns)?,
                    true,
                )?,
                TableConstraint::PrimaryKey(_) => {
                    return Err(SqlError::unsupported(
                        "ADD PRIMARY KEY: the cluster cannot change a table's key",
                    ))
                }
                // NOT ENFORCED (MySQL's) is not kept, as in CREATE TABLE.
                TableConstraint::Check(c) if c.enforced == Some(false) => {}
                TableConstraint::Check(c) => added_checks
                    .push((c.name.as_ref().map(|n| n.value.clone()), c.expr.to_string())),
                other => return Err(SqlError::unsupported(format_args!("ADD {other}"))),
            },
            AlterTableOperation::DropConstraint {
                if_exists, name, ..
            } => {
                if let Err(e) = change.drop_constraint(&name.value) {
                    if !*if_exists {
                        return Err(e);
                    }
                    catalog::note(conn, e.code, e.message);
                }
            }
            AlterTableOperation::DropIndex { name } => change.drop_index(&name.value)?,
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for c in column_names {
                    if *if_exists && change.find(&c.value).is_none() {
                        catalog::note(
                            conn,
                            codes::CANT_DROP_FIELD_OR_KEY,
                            format!("Can't DROP COLUMN `{}`; check that it exists", c.value),
                        );
                        continue;
                    }
                    change.drop_column(&c.value)?;
                }
            }
            AlterTableOperation::DropPrimaryKey { .. } => {
                return Err(SqlError::unsupported(
                    "DROP PRIMARY KEY: the cluster cannot change a table's key",
                ))
            }
            AlterTableOperation::RenameTable { table_name } => {
                let (sqlparser::ast::RenameTableNameKind::To(n)
                | sqlparser::ast::RenameTableNameKind::As(n)) = table_name;
                change.rename = Some(rename_target(conn, n)?);
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => change.rename_column(&old_column_name.value, &new_column_name.value)?,
            AlterTableOperation::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                column_position,
            } => change.change_column(
                conn,
                &old_name.value,
                &column_def(new_name, data_type, options),
                column_position,
            )?,
            AlterTableOperation::ModifyColumn {
                col_name,
                data_type,
                options,
                column_position,
            } => change.change_column(
                conn,
                &col_name.value,
                &column_def(col_name, data_type, options),
                column_position,
            )?,
            AlterTableOperation::AlterColumn { column_name, op } => match op {
                AlterColumnOperation::SetDefault { value } => {
                    change.alter_default(conn, &column_name.value, Some(value))?
                }
                AlterColumnOperation::DropDefault => {
                    change.alter_default(conn, &column_name.value, None)?
                }
                other => {
                    return Err(SqlError::unsupported(format_args!(
                        "ALTER TABLE … ALTER COLUMN {column_name} {other} (MODIFY COLUMN changes \
                         a column's type and nullability)"
                    )))
                }
            },
            AlterTableOperation::AutoIncrement { value, .. } => {
                let text = value.value.to_string();
                change.auto_increment = Some(
                    text.parse::<u64>()
                        .map_err(|_| SqlError::syntax(format_args!("AUTO_INCREMENT={text}")))?,
                );
            }
            AlterTableOperation::Algorithm { .. } | AlterTableOperation::Lock { .. } => {}
            other => return Err(SqlError::unsupported(format_args!("ALTER TABLE … {other}"))),
        }
    }
    if !added_checks.is_empty() {
        change.add_checks(added_checks)?;
    }
    let children_renamed = alter_foreign_keys(conn, &mut change, added_fks)?;
    let renamed = change.rename.clone();
    let info_fks = has_foreign_keys(&info) || !change.sql.foreign_keys.is_empty();
    let rows = change.apply(conn)?;
    super::foreign::parent_columns_renamed(conn, &children_renamed)?;
    if let (Some(to), true) = (renamed, info_fks) {
        super::foreign::renamed(conn, (&info.db, &info.name), (&to.0, &to.1))?;
    }
    // A rename alone says nothing more, as in MariaDB.
    if operations
        .iter()
        .all(|op| matches!(op, AlterTableOperation::RenameTable { .. }))
    {
        return ok();
    }
    altered(conn, rows)
}

/// ALTER TABLE's FOREIGN KEYs: those added get an index when none leads
/// with their columns, are checked against their parents (and, with
/// `foreign_key_checks=1`, the table's rows against them), and their
/// parents note the table; a column a FOREIGN KEY names may not go.
fn alter_foreign_keys(
    conn: &mut Conn<'_>,
    change: &mut Change,
    added: Vec<super::foreign::Declared>,
) -> SqlResult<Vec<super::foreign::ParentRenamed>> {
    let mut edits = Vec::new();
    if added.is_empty()
        && change.sql.foreign_keys.is_empty()
        && !super::exec::foreign::is_parent(&change.info)
    {
        return Ok(edits);
    }
    let (db, table) = (change.info.db.clone(), change.info.name.clone());
    // A column of the table as it was, by name: its name after the
    // change (None: dropped). Columns are known by their slot, which a
    // rename keeps (an original column's slot is its position).
    let info = std::sync::Arc::clone(&change.info);
    let old_def = info.native.def();
    let now: Vec<(usize, String)> = change
        .slots
        .iter()
        .zip(&change.def.columns)
        .map(|(&slot, c)| (slot, c.name.clone()))
        .collect();
    let renamed_to = |name: &str| -> Option<String> {
        let slot = old_def
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))?;
        now.iter().find(|(s, _)| *s == slot).map(|(_, n)| n.clone())
    };
    // The constraints' own columns follow a rename (MariaDB's); a column
    // dropped is MariaDB's 1828 (after 1553 for an index it led, below).
    let mut gone: Option<(String, String)> = None;
    let own = |f: &meta::ForeignKeyMeta| f.parent_db == db && f.parent_table == table;
    let mut fks = std::mem::take(&mut change.sql.foreign_keys);
    for fk in &mut fks {
        let is_own = own(fk);
        for c in fk.columns.iter_mut() {
            match renamed_to(c) {
                Some(n) => *c = n,
                None => {
                    gone.get_or_insert((c.clone(), fk.name.clone()));
                }
            }
        }
        if is_own {
            for c in fk.parent_columns.iter_mut() {
                if let Some(n) = renamed_to(c) {
                    *c = n;
                }
            }
        }
    }
    change.sql.foreign_keys = fks;
    // Keys and the SQL metadata name columns by slot; `def.columns` is
    // in column order (`Change::slots` maps one onto the other).
    let slots = change.slots.clone();
    let name_of = |def: &TableDef, slot: usize| {
        slots
            .iter()
            .position(|&s| s == slot)
            .map(|at| def.columns[at].name.clone())
            .unwrap_or_default()
    };
    let keys = |def: &TableDef, unique_only: bool| -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = Vec::new();
        if !def.has_hidden_primary_key() {
            out.push(def.primary_key.iter().map(|&c| name_of(def, c)).collect());
        }
        for index in &def.indexes {
            let unique = index.kind == IndexKind::Unique;
            if index.name == PRIMARY || (unique_only && !unique) {
                continue;
            }
            out.push(index.columns.iter().map(|&c| name_of(def, c)).collect());
        }
        out
    };
    for d in &added {
        if super::foreign::needs_index(&d.columns, &keys(&change.def, false)) {
            let index = d.index_name.clone().or_else(|| d.name.clone());
            change.add_index(index, d.columns.clone(), false)?;
        }
    }
    let columns_now: Vec<(String, SqlType, bool)> = change
        .sql
        .columns
        .iter()
        .filter_map(|m| {
            let at = slots.iter().position(|&s| s == usize::from(m.native))?;
            let column = &change.def.columns[at];
            Some((column.name.clone(), m.ty.clone(), column.nullable))
        })
        .collect();
    // An index a FOREIGN KEY needs may not go (MariaDB's 1553): the
    // child's on its columns, the parent's unique key it references.
    let old_name = |slot: usize| old_def.columns.get(slot).map(|c| c.name.clone());
    let dropped = |cols: &[String], unique: bool| -> Option<String> {
        old_def
            .indexes
            .iter()
            .filter(|i| i.name != PRIMARY && (!unique || i.kind == IndexKind::Unique))
            .filter(|i| {
                let names: Vec<String> = i.columns.iter().filter_map(|&c| old_name(c)).collect();
                if unique {
                    super::foreign::same_columns(&names, cols)
                } else {
                    super::foreign::leads_with(&names, cols)
                }
            })
            .map(|i| {
                i.name
                    .strip_suffix(UNIQUE_SUFFIX)
                    .unwrap_or(&i.name)
                    .to_owned()
            })
            .find(|n| !change.def.indexes.iter().any(|i| i.name == *n))
    };
    let needed = |name: String| {
        SqlError::new(
            1553,
            format!("Cannot drop index '{name}': needed in a foreign key constraint"),
        )
    };
    let now_keys = keys(&change.def, false);
    for fk in &change.sql.foreign_keys {
        if super::foreign::needs_index(&fk.columns, &now_keys) {
            if let Some(name) = dropped(&fk.columns, false) {
                return Err(needed(name));
            }
        }
    }
    if let Some((c, name)) = gone {
        return Err(SqlError::new(
            1828,
            format!("Cannot drop column '{c}': needed in a foreign key constraint '{name}'"),
        ));
    }
    // A parent's referenced columns: renamed, its children's constraints
    // follow (written once the change is made); dropped, 1829.
    if super::exec::foreign::is_parent(&change.info) && conn.session.foreign_key_checks() {
        let unique_now = keys(&change.def, true);
        for (child, fk) in super::foreign::children_of(conn, &change.info)? {
            if std::sync::Arc::ptr_eq(&child.native, &change.info.native) {
                continue;
            }
            let mut now = Vec::with_capacity(fk.parent_columns.len());
            for c in &fk.parent_columns {
                match renamed_to(c) {
                    Some(n) => now.push(n),
                    None => {
                        return Err(SqlError::new(
                            1829,
                            format!(
                                "Cannot drop column '{c}': needed in a foreign key constraint \
                                 '{}' of table `{}`.`{}`",
                                fk.name, child.db, child.name
                            ),
                        ))
                    }
                }
            }
            if !unique_now
                .iter()
                .any(|k| super::foreign::same_columns(k, &now))
            {
                if let Some(name) = dropped(&fk.parent_columns, true) {
                    return Err(needed(name));
                }
            }
            if now != fk.parent_columns {
                edits.push(super::foreign::ParentRenamed {
                    child: (child.db.clone(), child.name.clone()),
                    constraint: fk.name.clone(),
                    columns: now,
                });
            }
        }
    }
    if added.is_empty() {
        return Ok(edits);
    }
    let columns: Vec<super::foreign::ChildColumn<'_>> = columns_now
        .iter()
        .map(|(name, ty, nullable)| super::foreign::ChildColumn {
            name,
            ty,
            nullable: *nullable,
        })
        .collect();
    let unique = keys(&change.def, true);
    let existing = change.sql.foreign_keys.clone();
    let fks = super::foreign::resolve(conn, (&db, &table), &columns, &unique, &existing, added)?;
    if conn.session.foreign_key_checks() {
        // The rows as they are, against the new constraints (one on a
        // column this ALTER adds has only the column's default there,
        // which the rows get after the check: not checked).
        let mut probe = (*change.info).clone();
        probe.sql.foreign_keys = fks
            .iter()
            .filter(|f| f.columns.iter().all(|c| probe.column(c).is_some()))
            .cloned()
            .collect();
        super::exec::foreign::check_existing(conn, probe)?;
    }
    super::foreign::note_children(conn, (&db, &table), &fks)?;
    change.sql.foreign_keys.extend(fks);
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_replaces_only_a_table_it_parks() {
        let replaced = |pairs: &[(&str, &str)]| replaced_by_rename(pairs);
        // pt-online-schema-change's and gh-ost's swap.
        assert_eq!(replaced(&[("t", "t_old"), ("t_new", "t")]), [None, Some(0)]);
        // Through a name the statement passes through first.
        assert_eq!(
            replaced(&[("t", "tmp"), ("tmp", "t_old"), ("t_new", "t")]),
            [None, None, Some(0)]
        );
        // A swap of two names: each table keeps its own.
        assert_eq!(
            replaced(&[("a", "tmp"), ("b", "a"), ("tmp", "b")]),
            [None, None, None]
        );
        // Renamed away and back: itself.
        assert_eq!(replaced(&[("t", "tmp"), ("tmp", "t")]), [None, None]);
        // Plain renames, and a name no table had.
        assert_eq!(replaced(&[("a", "b"), ("c", "d")]), [None, None]);
        assert_eq!(replaced(&[("a", "b"), ("b", "c")]), [None, None]);
    }

    #[test]
    fn partition_by_key_and_double_quoted_comments_are_recognised() {
        let sql = "CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b)) ENGINE=NDB \
                   COMMENT=\"NDB_TABLE=READ_BACKUP=1\" PARTITION BY KEY (b) PARTITIONS 4;";
        let Some(Ok(CatalogStmt::CreateTable {
            statement,
            partition_key,
            partitions,
            duplicates: Duplicates::Error,
        })) = recognise(sql)
        else {
            panic!("not recognised: {:?}", recognise(sql));
        };
        assert_eq!(partition_key, vec!["b".to_owned()]);
        assert_eq!(partitions, Some(4));
        let text = statement.to_string();
        assert!(
            text.contains("COMMENT = 'NDB_TABLE=READ_BACKUP=1'") || text.contains("COMMENT 'NDB"),
            "{text}"
        );
        // Strings keep their quotes and backslashes through the rewrite.
        let quoted = "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(9) DEFAULT 'it''s \\\\') \
                      COMMENT \"say \"\"hi\"\"\" PARTITION BY KEY (a)";
        let Some(Ok(CatalogStmt::CreateTable { statement, .. })) = recognise(quoted) else {
            panic!("not recognised: {:?}", recognise(quoted));
        };
        let Statement::CreateTable(create) = &*statement else {
            panic!("{statement}");
        };
        let ColumnOption::Default(default) = &create.columns[1].options[0].option else {
            panic!("{statement}");
        };
        assert_eq!(literal(default).unwrap().as_deref(), Some("it's \\"));
        let options = table_options_list(create);
        assert!(
            matches!(options, [SqlOption::Comment(c)] if comment_text(c) == "say \"hi\""),
            "{options:?}"
        );
        // As mysqldump writes it, in a versioned comment.
        let dumped = "CREATE TABLE t (a INT PRIMARY KEY) ENGINE=ndbcluster\n\
                      /*!50100 PARTITION BY KEY (a) */";
        assert!(
            matches!(
                recognise(dumped),
                Some(Ok(CatalogStmt::CreateTable { ref partition_key, .. }))
                    if partition_key == &["a".to_owned()]
            ),
            "{:?}",
            recognise(dumped)
        );
        assert!(recognise("CREATE TABLE t (a INT)").is_none());
        assert!(recognise("SELECT 1").is_none());
        assert!(matches!(
            recognise("CREATE TABLE t (a INT) PARTITION BY RANGE (a)"),
            Some(Err(e)) if e.code == codes::UNKNOWN
        ));
    }

    #[test]
    fn create_select_ignore_and_replace_are_recognised() {
        for (sql, want) in [
            (
                "CREATE TABLE t (a INT) IGNORE SELECT 1 a",
                Duplicates::Ignore,
            ),
            ("create table t replace as select 1 a", Duplicates::Replace),
            (
                "CREATE TABLE t IGNORE AS WITH w AS (SELECT 1 a) SELECT a FROM w",
                Duplicates::Ignore,
            ),
            (
                "CREATE TABLE t (PRIMARY KEY (a)) REPLACE (SELECT 1 a)",
                Duplicates::Replace,
            ),
        ] {
            let Some(Ok(CatalogStmt::CreateTable {
                statement,
                duplicates,
                ..
            })) = recognise(sql)
            else {
                panic!("not recognised: {sql}: {:?}", recognise(sql));
            };
            assert_eq!(duplicates, want, "{sql}");
            let Statement::CreateTable(create) = &*statement else {
                panic!("{statement}");
            };
            assert!(create.query.is_some(), "{sql}");
        }
        // A column named so is no keyword here, and a plain CTAS is
        // sqlparser's own.
        assert!(recognise("CREATE TABLE t (`ignore` INT)").is_none());
        assert!(recognise("CREATE TABLE t SELECT 1 a").is_none());
        // The query in parentheses, after the declarations or alone.
        for sql in [
            "CREATE TABLE t (SELECT 1 a)",
            "CREATE TABLE t (b INT) (SELECT 1 a)",
            "CREATE TABLE t (WITH w AS (SELECT 1 a) SELECT a FROM w)",
        ] {
            let Some(Ok(CatalogStmt::CreateTable { statement, .. })) = recognise(sql) else {
                panic!("not recognised: {sql}: {:?}", recognise(sql));
            };
            let Statement::CreateTable(create) = &*statement else {
                panic!("{statement}");
            };
            assert!(create.query.is_some(), "{sql}");
        }
        // A query's own parentheses, and its REPLACE(), are left to
        // sqlparser.
        assert!(recognise("CREATE TABLE t SELECT * FROM (SELECT 1 a) d").is_none());
        assert!(
            recognise("CREATE TABLE t SELECT 1 a FROM d WHERE REPLACE(b, 'a', 'z') = ''").is_none()
        );
        assert!(recognise("CREATE TABLE t SELECT REPLACE(b, 'a', 'z') c FROM d").is_none());
        assert!(recognise("CREATE TABLE t (b INT) AS SELECT * FROM (SELECT 1 a) d").is_none());
    }

    #[test]
    fn show_statements_sqlparser_lacks_are_recognised() {
        assert!(matches!(
            recognise("SHOW CREATE DATABASE IF NOT EXISTS d"),
            Some(Ok(CatalogStmt::ShowCreateDatabase { name, if_not_exists: true })) if name == "d"
        ));
        assert!(matches!(
            recognise("show table status from d like 't%'"),
            Some(Ok(CatalogStmt::ShowTableStatus { db: Some(d), like: Some(l), filter: None }))
                if d == "d" && l == "t%"
        ));
    }

    #[test]
    fn mysqls_drop_check_is_drop_constraint() {
        let Some(Ok(CatalogStmt::AlterTable { statement, .. })) =
            recognise("ALTER TABLE t ADD CHECK (a > 0), DROP CHECK c1, DROP COLUMN `check`")
        else {
            panic!("DROP CHECK not recognised");
        };
        let Statement::AlterTable(alter) = *statement else {
            panic!("not an ALTER TABLE");
        };
        assert!(matches!(
            alter.operations.as_slice(),
            [
                AlterTableOperation::AddConstraint { .. },
                AlterTableOperation::DropConstraint { name, .. },
                AlterTableOperation::DropColumn { .. },
            ] if name.value == "c1"
        ));
        // c1 must exist; Django's made-up name for a column's check may not.
        let if_exists = |sql: &str| {
            let Some(Ok(CatalogStmt::AlterTable { statement, .. })) = recognise(sql) else {
                panic!("DROP CHECK not recognised: {sql}");
            };
            let Statement::AlterTable(alter) = *statement else {
                panic!("not an ALTER TABLE");
            };
            match alter.operations.as_slice() {
                [AlterTableOperation::DropConstraint { if_exists, .. }] => *if_exists,
                other => panic!("{other:?}"),
            }
        };
        assert!(!if_exists("ALTER TABLE t DROP CHECK c1"));
        assert!(if_exists(
            "ALTER TABLE `t` DROP CHECK `__unnamed_constraint_12__`"
        ));
        assert!(!if_exists(
            "ALTER TABLE t DROP CHECK __unnamed_constraint___"
        ));
        // Without DROP CHECK, sqlparser parses the statement itself.
        assert!(recognise("ALTER TABLE t ADD CHECK (a > 0)").is_none());
    }

    #[test]
    fn generated_check_names_skip_the_names_taken() {
        let mut checks = Vec::new();
        let added = vec![
            (None, "a > 0".to_owned()),
            (Some("CONSTRAINT_1".to_owned()), "a < 9".to_owned()),
            (None, "a <> 3".to_owned()),
        ];
        add_table_checks(&mut checks, added).unwrap();
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["CONSTRAINT_2", "CONSTRAINT_1", "CONSTRAINT_3"]);
        let again = add_table_checks(&mut checks, vec![(Some("constraint_2".into()), "1".into())]);
        assert_eq!(again.unwrap_err().code, codes::DUP_CONSTRAINT_NAME);
    }

    #[test]
    fn check_clauses_backquote_their_names() {
        assert_eq!(
            check_clause("a >= 0 AND t.b < 5"),
            "`a` >= 0 AND `t`.`b` < 5"
        );
        assert_eq!(check_clause("json_valid(`j`)"), "json_valid(`j`)");
    }

    proptest::proptest! {
        /// The recogniser takes statement text from any client: it answers
        /// or declines, and never panics.
        #[test]
        fn recognise_never_panics(
            head in proptest::sample::select(vec![
                "CREATE TABLE ", "ALTER TABLE ", "SHOW CREATE DATABASE ", "SHOW TABLE STATUS ",
                "SHOW CREATE SCHEMA IF NOT EXISTS ", "",
            ]),
            tail in proptest::collection::vec(
                proptest::sample::select(vec![
                    "t", "(", ")", ",", "a", "INT", "PARTITION", "BY", "KEY", "PARTITIONS", "4",
                    "COMMENT", "=", "\"x\"", "'y'", "ENGINE", "AUTO_INCREMENT", "LIKE", "FROM",
                    ".", ";", "LINEAR", "-1", "99999999999",
                ]),
                0..16,
            ),
        ) {
            let sql = format!("{head}{}", tail.join(" "));
            let _ = recognise(&sql);
        }

        #[test]
        fn defaults_never_panic(text in ".{0,24}") {
            for ty in [
                SqlType::Time { fsp: 0 },
                SqlType::DateTime { fsp: 6 },
                SqlType::Timestamp { fsp: 0 },
                SqlType::Date,
                SqlType::Year,
                SqlType::Bit { bits: 3 },
                SqlType::Set(vec!["a".into()]),
                SqlType::Decimal {
                    precision: 5,
                    scale: 2,
                    unsigned: false,
                },
                SqlType::BigInt { unsigned: true },
            ] {
                let _ = default_value(&ty, &text);
            }
        }
    }

    #[test]
    fn defaults_convert_to_what_the_storage_holds() {
        assert_eq!(
            default_value(&SqlType::Time { fsp: 0 }, "-01:00:01"),
            Some(Value::Int(-3_601_000_000))
        );
        assert_eq!(
            default_value(&SqlType::Enum(vec!["a".into(), "b".into()]), "B"),
            Some(Value::UInt(2))
        );
        assert_eq!(
            default_value(&SqlType::Set(vec!["a".into(), "b".into()]), "a,b"),
            Some(Value::UInt(3))
        );
        assert_eq!(
            default_value(&SqlType::TinyInt { unsigned: false }, "128"),
            None
        );
        assert_eq!(
            default_value(&SqlType::Timestamp { fsp: 0 }, "1970-01-02 00:00:01"),
            Some(Value::Timestamp(86_401_000_000))
        );
        assert_eq!(default_value(&SqlType::Year, "69"), Some(Value::UInt(2069)));
        assert_eq!(default_value(&SqlType::Date, "2023-02-29"), None);
    }

    #[test]
    fn decimal_defaults_round_to_the_scale_as_mariadb_does() {
        let dec = |precision, scale, unsigned| SqlType::Decimal {
            precision,
            scale,
            unsigned,
        };
        let shown =
            |ty: &SqlType, text: &str| decimal_default(ty, text).map(|(d, r)| (d.to_text(), r));
        let d52 = dec(5, 2, false);
        assert_eq!(shown(&d52, "1.234"), Some(("1.23".into(), true)));
        assert_eq!(shown(&d52, "1.235"), Some(("1.24".into(), true)));
        assert_eq!(shown(&d52, "1.235e0"), Some(("1.24".into(), true)));
        assert_eq!(shown(&d52, "1.2300"), Some(("1.23".into(), false)));
        assert_eq!(shown(&d52, "-0.001"), Some(("0.00".into(), true)));
        assert_eq!(shown(&d52, "-999.994"), Some(("-999.99".into(), true)));
        assert_eq!(shown(&d52, "999.995"), None);
        assert_eq!(shown(&d52, "1.2x"), None);
        assert_eq!(
            shown(&dec(3, 3, false), "0.9994"),
            Some(("0.999".into(), true))
        );
        assert_eq!(shown(&dec(3, 3, false), "0.9995"), None);
        assert_eq!(shown(&dec(5, 2, true), "-0.001"), None);
        assert_eq!(
            default_value(&d52, "1.234"),
            Some(Value::Decimal(
                schema::Decimal::parse("1.23").expect("a decimal")
            ))
        );
    }
}
