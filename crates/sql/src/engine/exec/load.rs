//! `LOAD DATA [LOCAL] INFILE`: a text file's rows into a table.
//!
//! The file is read as a stream, from the SQL node's disk or, with
//! `LOCAL`, from the client (which sends it in packets once asked), and
//! cut into rows of fields by the statement's `FIELDS` and `LINES`
//! clauses: by default MySQL's tab-separated fields, lines ended by a
//! newline, `\` escapes and `\N` for NULL. Rows go to the table
//! [`LOAD_ROWS_PER_WRITE`] at a time (fewer when their values pass
//! [`LOAD_CHUNK_BYTES_MAX`]) through INSERT's writer, which sends a chunk
//! as it sends a multi-row INSERT's rows. Outside a transaction each chunk commits
//! on its own, as NDB's LOAD DATA commits in batches: a file larger than
//! one transaction may hold (`MaxNoOfConcurrentOperations`) loads, and a
//! load that fails part way keeps the chunks committed before. Inside a
//! transaction every chunk joins it.

use std::io::{self, Read};
use std::sync::atomic::Ordering;

use sqlparser::ast::{self, ObjectName};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::write::{add_target, is_default_word, write_rows, Given, Rows, Written};
use super::{env, table_of, table_scope, with_scope};
use crate::backend::{OkInfo, ResultSink};
use crate::engine::expr::{Ctx, Expr, Val};
use crate::engine::{txn, users, Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::SqlValue;

/// Rows written to the data nodes together (and, outside a transaction,
/// committed together).
pub const LOAD_ROWS_PER_WRITE: usize = 1_000;
/// The most bytes of field values one chunk holds: rows with large
/// values (TEXT, BLOB) go in smaller chunks, so a load's memory stays
/// bounded whatever its rows.
pub const LOAD_CHUNK_BYTES_MAX: usize = 4 << 20;
/// Bytes read from the file at a time.
pub const LOAD_READ_BYTES: usize = 64 << 10;
/// The longest row (line) of a file: a longer one is refused rather than
/// buffered without end (a file without its line terminator).
pub const LOAD_ROW_BYTES_MAX: usize = 16 << 20;

/// A parsed `LOAD DATA` statement.
#[derive(Clone, Debug)]
pub struct LoadData {
    /// `LOCAL`: the client sends the file.
    pub local: bool,
    /// The file's name, as given.
    pub file: String,
    /// `REPLACE` or `IGNORE`.
    pub duplicates: Duplicates,
    /// The table loaded.
    pub table: ObjectName,
    /// `CHARACTER SET`: the file's character set (None: utf8mb4).
    pub charset: Option<String>,
    /// How rows and fields are cut.
    pub format: Format,
    /// `IGNORE n LINES`.
    pub ignore_lines: u64,
    /// The column list (None: every column, in order).
    pub targets: Option<Vec<Field>>,
    /// `SET col = expr`.
    pub set: Vec<(String, ast::Expr)>,
}

/// What a row that repeats a key does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duplicates {
    /// Fails the statement (a server file), as INSERT.
    Error,
    /// Replaces the stored row.
    Replace,
    /// Is skipped with a warning.
    Ignore,
}

/// Where one field of a row goes.
#[derive(Clone, Debug)]
pub enum Field {
    /// A column, by name.
    Column(String),
    /// A user variable (lowercase, without `@`), for `SET` to read.
    Var(String),
}

/// `FIELDS` and `LINES`: how a file is cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// `FIELDS TERMINATED BY` (a tab).
    pub field_end: Vec<u8>,
    /// `[OPTIONALLY] ENCLOSED BY` (none).
    pub enclosed: Option<u8>,
    /// `OPTIONALLY`: INTO OUTFILE encloses only strings (LOAD DATA reads
    /// either the same).
    pub enclosed_optionally: bool,
    /// `ESCAPED BY` (`\`; `''`: none).
    pub escape: Option<u8>,
    /// `LINES STARTING BY` (nothing): text before it on a line is skipped,
    /// and a line without it.
    pub line_start: Vec<u8>,
    /// `LINES TERMINATED BY` (a newline).
    pub line_end: Vec<u8>,
}

impl Default for Format {
    fn default() -> Format {
        Format {
            field_end: b"\t".to_vec(),
            enclosed: None,
            enclosed_optionally: false,
            escape: Some(b'\\'),
            line_start: Vec::new(),
            line_end: b"\n".to_vec(),
        }
    }
}

/// Reads `LOAD DATA` from its tokens. Grammar (MariaDB's, less
/// `PARTITION`):
///
/// ```text
/// LOAD DATA [LOW_PRIORITY | CONCURRENT] [LOCAL] INFILE 'file'
///   [REPLACE | IGNORE] INTO TABLE t [CHARACTER SET cs]
///   [{FIELDS | COLUMNS} [TERMINATED BY 's'] [[OPTIONALLY] ENCLOSED BY 'c'] [ESCAPED BY 'c']]
///   [LINES [STARTING BY 's'] [TERMINATED BY 's']]
///   [IGNORE n {LINES | ROWS}] [(col | @var, …)] [SET col = expr, …]
/// ```
pub fn parse(tokens: Vec<TokenWithSpan>) -> Result<LoadData, ParserError> {
    let mut p =
        Parser::new(&crate::engine::dialect::SkarvDialect).with_tokens_with_locations(tokens);
    expect(&mut p, "LOAD")?;
    expect(&mut p, "DATA")?;
    let _ = eat(&mut p, "LOW_PRIORITY") || eat(&mut p, "CONCURRENT");
    let local = eat(&mut p, "LOCAL");
    expect(&mut p, "INFILE")?;
    let file = p.parse_literal_string()?;
    let duplicates = if eat(&mut p, "REPLACE") {
        Duplicates::Replace
    } else if eat(&mut p, "IGNORE") {
        Duplicates::Ignore
    } else {
        Duplicates::Error
    };
    expect(&mut p, "INTO")?;
    expect(&mut p, "TABLE")?;
    let table = p.parse_object_name(false)?;
    let mut charset = None;
    if eat(&mut p, "CHARACTER") {
        expect(&mut p, "SET")?;
        charset = Some(charset_name(&mut p)?);
    } else if eat(&mut p, "CHARSET") {
        charset = Some(charset_name(&mut p)?);
    }
    let mut format = Format::default();
    parse_format(&mut p, &mut format)?;
    let mut ignore_lines = 0;
    if eat(&mut p, "IGNORE") {
        ignore_lines = p.parse_literal_uint()?;
        if !eat(&mut p, "LINES") {
            expect(&mut p, "ROWS")?;
        }
    }
    let mut targets = None;
    if p.consume_token(&Token::LParen) {
        let mut fields = Vec::new();
        if !p.consume_token(&Token::RParen) {
            loop {
                fields.push(match p.next_token().token {
                    Token::Word(w)
                        if w.quote_style.is_none()
                            && w.value.len() > 1
                            && w.value.starts_with('@') =>
                    {
                        Field::Var(w.value[1..].to_ascii_lowercase())
                    }
                    Token::Word(w) => Field::Column(w.value),
                    other => {
                        return p.expected("a column or @variable", TokenWithSpan::wrap(other))
                    }
                });
                if p.consume_token(&Token::RParen) {
                    break;
                }
                p.expect_token(&Token::Comma)?;
            }
        }
        targets = Some(fields);
    }
    let mut set = Vec::new();
    if eat(&mut p, "SET") {
        loop {
            let column = p.parse_identifier()?;
            p.expect_token(&Token::Eq)?;
            set.push((column.value, p.parse_expr()?));
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
    }
    let _ = p.consume_token(&Token::SemiColon);
    if p.peek_token().token != Token::EOF {
        return p.expected("end of statement", p.peek_token());
    }
    Ok(LoadData {
        local,
        file,
        duplicates,
        table,
        charset,
        format,
        ignore_lines,
        targets,
        set,
    })
}

/// `[{FIELDS | COLUMNS} …] [LINES …]`, LOAD DATA's and SELECT … INTO
/// OUTFILE's, into `format`.
pub(crate) fn parse_format(p: &mut Parser<'_>, format: &mut Format) -> Result<(), ParserError> {
    if eat(p, "FIELDS") || eat(p, "COLUMNS") {
        options(p, "TERMINATED, ENCLOSED or ESCAPED", |p| {
            if by(p, "TERMINATED")? {
                format.field_end = p.parse_literal_string()?.into_bytes();
            } else if eat(p, "OPTIONALLY") {
                expect(p, "ENCLOSED")?;
                expect(p, "BY")?;
                format.enclosed = one_char(p)?;
                format.enclosed_optionally = true;
            } else if by(p, "ENCLOSED")? {
                format.enclosed = one_char(p)?;
            } else if by(p, "ESCAPED")? {
                format.escape = one_char(p)?;
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
    }
    if eat(p, "LINES") {
        options(p, "STARTING or TERMINATED", |p| {
            if by(p, "STARTING")? {
                format.line_start = p.parse_literal_string()?.into_bytes();
            } else if by(p, "TERMINATED")? {
                format.line_end = p.parse_literal_string()?.into_bytes();
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
    }
    Ok(())
}

/// A clause's options, read by `one` until it finds none (false); at
/// least one must be there, else the parser's error naming `expected`.
fn options(
    p: &mut Parser<'_>,
    expected: &str,
    mut one: impl FnMut(&mut Parser<'_>) -> Result<bool, ParserError>,
) -> Result<(), ParserError> {
    if !one(p)? {
        return p.expected(expected, p.peek_token());
    }
    while one(p)? {}
    Ok(())
}

/// `word BY`: whether `word` was there (then BY must follow).
fn by(p: &mut Parser<'_>, word: &str) -> Result<bool, ParserError> {
    if !eat(p, word) {
        return Ok(false);
    }
    expect(p, "BY")?;
    Ok(true)
}

/// Takes the next token when it is the unquoted word `word`.
pub(crate) fn eat(p: &mut Parser<'_>, word: &str) -> bool {
    match &p.peek_token().token {
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word) => {
            p.next_token();
            true
        }
        _ => false,
    }
}

pub(crate) fn expect(p: &mut Parser<'_>, word: &str) -> Result<(), ParserError> {
    if eat(p, word) {
        Ok(())
    } else {
        p.expected(word, p.peek_token())
    }
}

pub(crate) fn charset_name(p: &mut Parser<'_>) -> Result<String, ParserError> {
    match p.next_token().token {
        Token::Word(w) => Ok(w.value.to_ascii_lowercase()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s.to_ascii_lowercase()),
        other => p.expected("a character set", TokenWithSpan::wrap(other)),
    }
}

/// `ENCLOSED BY` and `ESCAPED BY`: one byte, or `''` for none.
fn one_char(p: &mut Parser<'_>) -> Result<Option<u8>, ParserError> {
    let s = p.parse_literal_string()?;
    match s.as_bytes() {
        [] => Ok(None),
        [c] => Ok(Some(*c)),
        _ => Err(ParserError::ParserError(format!(
            "ENCLOSED BY and ESCAPED BY take one character, not '{s}'"
        ))),
    }
}

/// Runs `LOAD DATA`; `sink` brings the client's file for `LOCAL`.
pub fn run(conn: &mut Conn<'_>, load: &LoadData, sink: &mut dyn ResultSink) -> SqlResult<Answered> {
    if load.format.field_end.is_empty() || load.format.line_end.is_empty() {
        return Err(SqlError::unsupported(
            "LOAD DATA with an empty FIELDS or LINES TERMINATED BY (fixed-width rows)",
        ));
    }
    super::start_write(conn)?;
    let decode = Decode::named(load.charset.as_deref())?;
    let table = crate::engine::alter_copy::wait_writable(conn, table_of(conn, &load.table)?)?;
    let replace = load.duplicates == Duplicates::Replace;
    users::authorize_table(conn, &table.db, &table.name, replace)?;
    // The fields' places: a column's position among the targets, or a
    // variable.
    let fields: Vec<Field> = match &load.targets {
        Some(fields) => fields.clone(),
        None => table
            .columns
            .iter()
            .map(|c| Field::Column(c.name.clone()))
            .collect(),
    };
    let mut targets: Vec<usize> = Vec::new();
    let mut place = |name: &str, what: &str| add_target(&table, &mut targets, name, what);
    let mut slots: Vec<Slot> = Vec::with_capacity(fields.len());
    for field in &fields {
        slots.push(match field {
            // MariaDB's words for a column of the list it does not know.
            Field::Column(name) => Slot::Target(place(name, "SELECT")?),
            Field::Var(name) => Slot::Var(name.clone()),
        });
    }
    let set_at: Vec<usize> = load
        .set
        .iter()
        .map(|(name, _)| place(name, "field list"))
        .collect::<SqlResult<_>>()?;
    let uses_vars = slots.iter().any(|s| matches!(s, Slot::Var(_)));
    // SET's expressions over the table's columns: lowered once, or for
    // each row when they may read the row's variables (a user variable is
    // read when its expression is lowered).
    let scope = table_scope(&table, &table.name);
    let lower_set = |conn: &Conn<'_>| -> SqlResult<Vec<Option<Expr>>> {
        with_scope(conn, scope.clone(), &[], |s| {
            load.set
                .iter()
                .map(|(_, e)| {
                    if is_default_word(e) {
                        Ok(None)
                    } else {
                        s.lower(e).map(Some)
                    }
                })
                .collect()
        })
    };
    let mut set_exprs = lower_set(conn)?;

    let ignore = load.duplicates == Duplicates::Ignore || (load.local && !replace);
    let strict = conn.session.sql_mode_strict() && !ignore;
    let mut source = open(conn, load, sink)?;
    let mut rows = RowReader::new(&mut *source, &load.format);
    for _ in 0..load.ignore_lines {
        if !rows.next_row()? {
            break;
        }
    }
    let environment = env(conn);
    let mut ctx = Ctx::new(&[], &environment);
    ctx.strict = strict;
    ctx.ignore = ignore;
    let send_now = txn::in_transaction(conn);
    let mut chunk: Vec<Vec<Given>> = Vec::with_capacity(LOAD_ROWS_PER_WRITE);
    let mut chunk_bytes = 0usize;
    let mut evaluated: Vec<Vec<(u16, String)>> = Vec::with_capacity(LOAD_ROWS_PER_WRITE);
    let mut records = 0usize;
    let mut total = Written::default();
    let mut sql_row: Vec<Val> = vec![Val::Null; table.columns.len()];
    loop {
        let more = rows.next_row()?;
        if more {
            records += 1;
            let mut row: Vec<Given> = Vec::with_capacity(targets.len());
            row.resize_with(targets.len(), || Given::Missing);
            let got = rows.fields.len();
            // One warning for each field missing (MariaDB's).
            for _ in got..slots.len() {
                short_row(
                    &mut ctx,
                    strict,
                    records,
                    "doesn't contain data for all columns",
                    codes::WARN_TOO_FEW_RECORDS,
                )?;
            }
            if got > slots.len() {
                short_row(
                    &mut ctx,
                    strict,
                    records,
                    "was truncated; it contained more data than there were input columns",
                    codes::WARN_TOO_MANY_RECORDS,
                )?;
            }
            chunk_bytes += rows.fields.iter().flatten().map(Vec::len).sum::<usize>();
            // The fields are taken (the reader refills them for the next
            // row); past the last one a slot has none.
            let fields = rows.fields.drain(..).map(Some);
            for (slot, field) in slots
                .iter()
                .zip(fields.chain(std::iter::repeat_with(|| None)))
            {
                let value = field.map(|f| decode.value(f));
                match slot {
                    Slot::Target(i) => {
                        if let Some(v) = value {
                            row[*i] = Given::Value(v);
                        }
                    }
                    Slot::Var(name) => {
                        let v = match value {
                            Some(Val::Str(bytes)) => SqlValue::Bytes(bytes),
                            _ => SqlValue::Null,
                        };
                        conn.session.user_vars.insert(name.clone(), v);
                    }
                }
            }
            if !load.set.is_empty() {
                if uses_vars {
                    set_exprs = lower_set(conn)?;
                }
                sql_row.fill(Val::Null);
                for (i, &at) in targets.iter().enumerate() {
                    if let Given::Value(v) = &row[i] {
                        sql_row[at] = v.clone();
                    }
                }
                for (expr, &i) in set_exprs.iter().zip(&set_at) {
                    row[i] = match expr {
                        Some(e) => Given::Value(e.eval(&sql_row, &mut ctx)?),
                        None => Given::Default,
                    };
                }
            }
            chunk.push(row);
            evaluated.push(std::mem::take(&mut ctx.warnings));
        }
        let full = chunk.len() == LOAD_ROWS_PER_WRITE || chunk_bytes >= LOAD_CHUNK_BYTES_MAX;
        if full || (!more && !chunk.is_empty()) {
            if conn.info.query_killed.load(Ordering::Relaxed) {
                return Err(SqlError::new(
                    codes::QUERY_INTERRUPTED,
                    "Query execution was interrupted",
                ));
            }
            let written = write_rows(
                conn,
                Rows {
                    table: &table,
                    targets: &targets,
                    rows: &chunk,
                    evaluated: std::mem::take(&mut evaluated),
                    replace,
                    ignore,
                    odku: &[],
                    row_base: records - chunk.len(),
                    send_now,
                },
                &mut ctx,
            )?;
            total.affected += written.affected;
            total.duplicates += written.duplicates;
            total.check_skipped += written.check_skipped;
            if total.first_auto == 0 {
                total.first_auto = written.first_auto;
            }
            chunk.clear();
            chunk_bytes = 0;
        }
        if !more {
            break;
        }
    }
    drop(rows);
    drop(source);
    if total.first_auto > 0 {
        conn.session.last_insert_id.set(total.first_auto);
    }
    let (deleted, skipped) = if replace {
        (total.duplicates, total.check_skipped as u64)
    } else {
        (0, total.duplicates + total.check_skipped as u64)
    };
    Ok(Answered::Ok(OkInfo {
        affected_rows: total.affected,
        last_insert_id: total.first_auto,
        info: format!(
            "Records: {records}  Deleted: {deleted}  Skipped: {skipped}  Warnings: {}",
            conn.session.warning_count()
        ),
        ..OkInfo::default()
    }))
}

/// Where a field of the file goes.
enum Slot {
    /// The row's value at this place of the targets.
    Target(usize),
    /// A user variable.
    Var(String),
}

/// A row with fewer or more fields than the list: an error in strict
/// mode (the statement's rows so far stay as they are), else a warning.
fn short_row(ctx: &mut Ctx<'_>, strict: bool, row: usize, what: &str, code: u16) -> SqlResult<()> {
    let message = format!("Row {row} {what}");
    if strict {
        return Err(SqlError::new(code, message));
    }
    ctx.warn(code, message);
    Ok(())
}

/// The file: the client's (`LOCAL`, asked for through the sink) or one on
/// the SQL node's disk.
fn open<'a>(
    conn: &Conn<'_>,
    load: &LoadData,
    sink: &'a mut dyn ResultSink,
) -> SqlResult<Box<dyn Read + 'a>> {
    if load.local {
        let refused = || {
            SqlError::new(
                codes::LOCAL_INFILE_DISABLED,
                "The used command is not allowed because the MariaDB server or client has \
                 disabled the local infile capability",
            )
        };
        let enabled = conn
            .engine
            .globals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .flag("local_infile");
        if !enabled {
            return Err(refused());
        }
        return match sink.local_infile(&load.file) {
            Ok(Some(reader)) => Ok(reader),
            Ok(None) => Err(refused()),
            Err(e) => Err(SqlError::new(
                codes::NET_READ_ERROR,
                format!(
                    "Got an error reading the client's file '{}': {e}",
                    load.file
                ),
            )),
        };
    }
    let path = server_file(conn, &load.file)?;
    match std::fs::File::open(path) {
        Ok(file) if file.metadata().is_ok_and(|m| m.is_dir()) => Err(SqlError::new(
            codes::FILE_NOT_FOUND,
            format!("File '{}' not found: it is a directory", load.file),
        )),
        Ok(file) => Ok(Box::new(file)),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            let what = match e.kind() {
                io::ErrorKind::NotFound => "No such file or directory".to_owned(),
                io::ErrorKind::PermissionDenied => "Permission denied".to_owned(),
                _ => e.to_string(),
            };
            Err(SqlError::new(
                codes::CANT_GET_STAT,
                format!(
                    "Can't get stat of '{}' (Errcode: {errno} \"{what}\")",
                    load.file
                ),
            ))
        }
    }
}

/// A file on the SQL node's host that LOAD DATA reads or SELECT … INTO
/// OUTFILE writes, checked: MySQL's FILE privilege (which Skarv's accounts
/// do not have: SUPER stands for it), a whole path (the SQL node has no
/// data directory to read a relative name in), and `secure_file_priv`.
pub(crate) fn server_file<'f>(conn: &Conn<'_>, file: &'f str) -> SqlResult<&'f std::path::Path> {
    users::require(conn, users::privilege::SUPER, "FILE (SUPER in Skarv)")?;
    let path = std::path::Path::new(file);
    if !path.is_absolute() {
        return Err(SqlError::new(
            codes::FILE_NOT_FOUND,
            format!(
                "File '{file}' not found (Errcode: 2 \"No such file or directory\"): the SQL \
                 node has no data directory to find a relative name in; give the whole path \
                 (or, for LOAD DATA, use LOCAL to send a client's file)"
            ),
        ));
    }
    let secure = conn
        .engine
        .globals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get("secure_file_priv")
        .unwrap_or("")
        .to_owned();
    if !secure.is_empty() {
        // A file still to be written is placed by its directory.
        let real = std::fs::canonicalize(path).or_else(|_| {
            let parent = path.parent().unwrap_or(path);
            std::fs::canonicalize(parent).map(|d| d.join(path.file_name().unwrap_or_default()))
        });
        if !real.is_ok_and(|p| p.starts_with(std::path::Path::new(&secure))) {
            return Err(SqlError::new(
                codes::OPTION_PREVENTS_STATEMENT,
                format!(
                    "The MariaDB server is running with the --secure-file-priv option so it \
                     cannot execute this statement (files under '{secure}' only)"
                ),
            ));
        }
    }
    Ok(path)
}

/// The file's character set, as fields are turned into values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decode {
    /// utf8mb4 (and utf8, ascii): the bytes as they are, checked where a
    /// text column stores them.
    Utf8,
    /// latin1: each byte one character.
    Latin1,
    /// binary: the bytes, unchecked.
    Binary,
}

impl Decode {
    fn named(name: Option<&str>) -> SqlResult<Decode> {
        Ok(match name {
            None | Some("utf8mb4" | "utf8" | "utf8mb3" | "ascii" | "default") => Decode::Utf8,
            Some("latin1") => Decode::Latin1,
            Some("binary") => Decode::Binary,
            Some(other) => {
                return Err(SqlError::new(
                    codes::UNKNOWN_CHARACTER_SET,
                    format!(
                        "Unknown character set: '{other}' (LOAD DATA reads utf8mb4, utf8, \
                         ascii, latin1 or binary files)"
                    ),
                ))
            }
        })
    }

    /// A field's value, taking its bytes (no copy where they are kept).
    fn value(self, field: Option<Vec<u8>>) -> Val {
        let Some(bytes) = field else {
            return Val::Null;
        };
        match self {
            // A text column checks the bytes as it stores them (1366,
            // each bad byte '?'); a binary one keeps them.
            Decode::Utf8 | Decode::Binary => Val::Str(bytes),
            Decode::Latin1 => Val::Str(crate::protocol::latin1::decode(&bytes).into_bytes()),
        }
    }
}

/// Cuts a stream into rows of fields. A row is parsed from the buffered
/// bytes; when they end inside it, more are read and it is parsed again
/// (rows are short beside [`LOAD_READ_BYTES`], so that is rare).
pub struct RowReader<'a, R: Read + ?Sized> {
    source: &'a mut R,
    format: &'a Format,
    buf: Vec<u8>,
    /// Where the unparsed bytes start.
    at: usize,
    eof: bool,
    /// The last row's fields (None: NULL).
    pub fields: Vec<Option<Vec<u8>>>,
}

/// Why a row could not be parsed from the buffered bytes.
enum Cut {
    /// It continues past them.
    More,
    /// No row is left.
    End,
}

impl<'a, R: Read + ?Sized> RowReader<'a, R> {
    pub fn new(source: &'a mut R, format: &'a Format) -> RowReader<'a, R> {
        RowReader {
            source,
            format,
            buf: Vec::new(),
            at: 0,
            eof: false,
            fields: Vec::new(),
        }
    }

    /// Reads the next row into [`RowReader::fields`]; false at the end.
    pub fn next_row(&mut self) -> SqlResult<bool> {
        loop {
            match self.parse() {
                Ok(used) => {
                    self.at += used;
                    return Ok(true);
                }
                Err(Cut::End) => return Ok(false),
                Err(Cut::More) => self.fill()?,
            }
        }
    }

    fn fill(&mut self) -> SqlResult<()> {
        if self.at > 0 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        if self.buf.len() > LOAD_ROW_BYTES_MAX {
            return Err(SqlError::new(
                codes::UNKNOWN,
                format!(
                    "A row of the file is longer than {LOAD_ROW_BYTES_MAX} bytes: check its \
                     LINES TERMINATED BY and ENCLOSED BY"
                ),
            ));
        }
        let old = self.buf.len();
        self.buf.resize(old + LOAD_READ_BYTES, 0);
        let read = loop {
            match self.source.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(SqlError::new(
                        codes::NET_READ_ERROR,
                        format!("Error reading the file of LOAD DATA: {e}"),
                    ));
                }
            }
        };
        self.buf.truncate(old + read);
        if read == 0 {
            self.eof = true;
        }
        Ok(())
    }

    /// Parses one row from the buffered bytes: the bytes it used.
    fn parse(&mut self) -> Result<usize, Cut> {
        let f = self.format;
        let data = &self.buf[self.at..];
        let eof = self.eof;
        // Whether `data[i..]` starts with `pat`: None when it might but the
        // bytes end first.
        let starts = |i: usize, pat: &[u8]| -> Option<bool> {
            let rest = &data[i..];
            if rest.len() >= pat.len() {
                Some(rest.starts_with(pat))
            } else if !eof && pat.starts_with(rest) {
                None
            } else {
                Some(false)
            }
        };
        let mut i = 0;
        if !f.line_start.is_empty() {
            // Up to and past the prefix; a line without it is skipped.
            match find(data, &f.line_start) {
                Some(p) => i = p + f.line_start.len(),
                None if eof => return Err(Cut::End),
                None => return Err(Cut::More),
            }
        } else if data.is_empty() {
            return Err(if eof { Cut::End } else { Cut::More });
        }
        self.fields.clear();
        let mut field = Vec::new();
        loop {
            field.clear();
            let mut enclosed = false;
            let mut escaped_null = false;
            if let Some(q) = f.enclosed.filter(|&q| data.get(i) == Some(&q)) {
                enclosed = true;
                i += 1;
                loop {
                    let Some(&c) = data.get(i) else {
                        if eof {
                            break; // An unclosed field ends with the file.
                        }
                        return Err(Cut::More);
                    };
                    if Some(c) == f.escape && c != q {
                        let (byte, used) = escaped(data, i, eof)?;
                        field.push(byte);
                        i += used;
                    } else if c == q {
                        if data.get(i + 1) == Some(&q) {
                            field.push(q);
                            i += 2;
                            continue;
                        }
                        // A quote closes the field only before a field or
                        // line end (or the file's end); elsewhere it is text.
                        let after = i + 1;
                        if after == data.len() && !eof {
                            return Err(Cut::More);
                        }
                        match (starts(after, &f.field_end), starts(after, &f.line_end)) {
                            (None, _) | (_, None) => return Err(Cut::More),
                            (Some(true), _) | (_, Some(true)) => {
                                i = after;
                                break;
                            }
                            _ if after == data.len() => {
                                i = after;
                                break;
                            }
                            _ => {
                                field.push(c);
                                i += 1;
                            }
                        }
                    } else {
                        field.push(c);
                        i += 1;
                    }
                }
            } else {
                loop {
                    if i == data.len() {
                        if eof {
                            break;
                        }
                        return Err(Cut::More);
                    }
                    match (starts(i, &f.field_end), starts(i, &f.line_end)) {
                        (None, _) | (_, None) => return Err(Cut::More),
                        (Some(true), _) | (_, Some(true)) => break,
                        _ => {}
                    }
                    let c = data[i];
                    if Some(c) == f.escape {
                        let (byte, used) = escaped(data, i, eof)?;
                        // `\N` first in the field (an escaped `N` comes only from `N`).
                        if used == 2 && byte == b'N' && field.is_empty() {
                            escaped_null = true;
                        }
                        field.push(byte);
                        i += used;
                    } else {
                        field.push(c);
                        i += 1;
                    }
                }
            }
            // `\N` alone is NULL; so is the word NULL unquoted when fields
            // may be quoted (MySQL's).
            let null = !enclosed
                && ((escaped_null && field == b"N") || (f.enclosed.is_some() && field == b"NULL"));
            self.fields
                .push(if null { None } else { Some(field.clone()) });
            // The field's end: another field, or the row's.
            if i == data.len() {
                debug_assert!(eof);
                return Ok(i);
            }
            if starts(i, &f.field_end) == Some(true) {
                i += f.field_end.len();
                continue;
            }
            if starts(i, &f.line_end) == Some(true) {
                return Ok(i + f.line_end.len());
            }
            // An enclosed field's closing quote is followed by one of the
            // two (or the end), and an unenclosed field stops only there.
            unreachable!("a field ends at a terminator or at the end");
        }
    }
}

/// The escape character at `data[at]` and what follows it: the byte the
/// pair stands for and the bytes used (2), or, at the file's end, the
/// escape itself (1).
fn escaped(data: &[u8], at: usize, eof: bool) -> Result<(u8, usize), Cut> {
    match data.get(at + 1) {
        Some(&next) => Ok((unescape(next), 2)),
        None if eof => Ok((data[at], 1)),
        None => Err(Cut::More),
    }
}

/// The byte an escape sequence `\c` stands for (MySQL's).
fn unescape(c: u8) -> u8 {
    match c {
        b'0' => 0,
        b'b' => 8,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'Z' => 26,
        other => other,
    }
}

fn find(data: &[u8], pat: &[u8]) -> Option<usize> {
    data.windows(pat.len()).position(|w| w == pat)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, format: &Format, chunk: usize) -> Vec<Vec<Option<String>>> {
        // A reader that hands out `chunk` bytes at a time, so that rows
        // cross the reads.
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut source = Trickle(text.as_bytes(), chunk);
        let mut reader = RowReader::new(&mut source, format);
        let mut out = Vec::new();
        while reader.next_row().unwrap() {
            out.push(
                reader
                    .fields
                    .iter()
                    .map(|f| f.as_ref().map(|b| String::from_utf8(b.clone()).unwrap()))
                    .collect(),
            );
        }
        out
    }

    fn s(v: &[Option<&str>]) -> Vec<Option<String>> {
        v.iter().map(|f| f.map(str::to_owned)).collect()
    }

    #[test]
    fn tab_separated_rows_with_escapes_and_null() {
        let text = "1\tone\t1.5\n2\t\\N\tx\\ty\n3\t\\\\N\t\n";
        same_at_every_read_size(
            text,
            &Format::default(),
            &[
                &[Some("1"), Some("one"), Some("1.5")],
                &[Some("2"), None, Some("x\ty")],
                &[Some("3"), Some("\\N"), Some("")],
            ],
        );
    }

    /// The rows of `text`, read 1, 2, 3, 7 and 64 Ki bytes at a time.
    fn same_at_every_read_size(text: &str, format: &Format, want: &[&[Option<&str>]]) {
        let want: Vec<_> = want.iter().map(|row| s(row)).collect();
        for chunk in [1, 2, 3, 7, 1 << 16] {
            assert_eq!(rows(text, format, chunk), want, "chunk {chunk}");
        }
    }

    #[test]
    fn csv_with_quotes_doubled_quotes_and_line_ends_inside() {
        let format = Format {
            field_end: b",".to_vec(),
            enclosed: Some(b'"'),
            line_end: b"\r\n".to_vec(),
            ..Format::default()
        };
        let text = "1,\"Smith, J\",\"say \"\"hi\"\"\"\r\n2,NULL,\"NULL\",\"a\r\nb\"\r\n3,\"x\"y\",";
        same_at_every_read_size(
            text,
            &format,
            &[
                &[Some("1"), Some("Smith, J"), Some("say \"hi\"")],
                &[Some("2"), None, Some("NULL"), Some("a\r\nb")],
                &[Some("3"), Some("x\"y"), Some("")],
            ],
        );
    }

    #[test]
    fn lines_starting_by_skips_lines_without_the_prefix() {
        let format = Format {
            field_end: b"|".to_vec(),
            line_start: b"xx>".to_vec(),
            ..Format::default()
        };
        let got = rows("xx>7|seven\njunk\nxx>8|eight\n", &format, 2);
        assert_eq!(
            got,
            vec![
                s(&[Some("7"), Some("seven")]),
                s(&[Some("8"), Some("eight")])
            ]
        );
    }

    #[test]
    fn a_last_line_without_its_terminator_is_a_row_and_an_empty_file_none() {
        assert_eq!(
            rows("a\tb", &Format::default(), 1),
            vec![s(&[Some("a"), Some("b")])]
        );
        assert!(rows("", &Format::default(), 1).is_empty());
        assert_eq!(rows("\n", &Format::default(), 1), vec![s(&[Some("")])]);
    }

    #[test]
    fn the_statement_parses_with_every_clause() {
        let sql = "LOAD DATA LOCAL INFILE '/tmp/x.csv' REPLACE INTO TABLE d.t CHARACTER SET latin1 \
                   FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' \
                   LINES STARTING BY '>' TERMINATED BY '\\r\\n' IGNORE 2 LINES (a, @b) SET c = @b + 1";
        let tokens = |sql: &str| {
            sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, sql)
                .tokenize_with_location()
                .unwrap()
        };
        let load = parse(tokens(sql)).unwrap();
        assert!(load.local);
        assert_eq!(load.file, "/tmp/x.csv");
        assert_eq!(load.duplicates, Duplicates::Replace);
        assert_eq!(load.table.to_string(), "d.t");
        assert_eq!(load.charset.as_deref(), Some("latin1"));
        assert_eq!(
            load.format,
            Format {
                field_end: b",".to_vec(),
                enclosed: Some(b'"'),
                enclosed_optionally: true,
                escape: None,
                line_start: b">".to_vec(),
                line_end: b"\r\n".to_vec(),
            }
        );
        assert_eq!(load.ignore_lines, 2);
        assert!(
            matches!(load.targets.as_deref(), Some([Field::Column(a), Field::Var(b)]) if a == "a" && b == "b")
        );
        assert_eq!(load.set.len(), 1);
        assert!(parse(tokens("LOAD DATA INFILE INTO TABLE t")).is_err());
    }
}
