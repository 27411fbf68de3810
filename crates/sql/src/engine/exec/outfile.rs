//! `SELECT … INTO OUTFILE 'file'` and `INTO DUMPFILE 'file'`: a query's
//! rows written to a new file on the SQL node's host, in the text format
//! LOAD DATA reads (`load::Format`: tab-separated fields, newline-ended
//! lines, `\` escapes, `\N` for NULL by default), or one row's bytes as
//! they are (DUMPFILE).

use std::io::{self, BufWriter, Write};

use sqlparser::ast::Statement;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::load::{self, Format};
use crate::backend::{OkInfo, ResultSink};
use crate::engine::{users, Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{ColumnMeta, ColumnType, SqlValue};

/// Bytes buffered before they are written to the file.
pub const OUTFILE_BUFFER_BYTES: usize = 64 << 10;

/// Where a query's rows go.
#[derive(Clone, Debug)]
pub struct Outfile {
    /// The file, which must not exist.
    pub file: String,
    /// `DUMPFILE`: one row, its values' bytes back to back.
    pub dump: bool,
    /// How rows and fields are written.
    pub format: Format,
    /// The INTO came after FROM (MariaDB warns 1287: deprecated).
    pub trailing: bool,
}

/// A parsed `SELECT … INTO OUTFILE | DUMPFILE`.
#[derive(Clone, Debug)]
pub struct SelectOutfile {
    /// The query, without its INTO.
    pub query: Box<Statement>,
    /// Its INTO.
    pub into: Outfile,
}

/// Takes `INTO OUTFILE 'file' [CHARACTER SET cs] [FIELDS …] [LINES …]` or
/// `INTO DUMPFILE 'file'` out of a query's tokens (where it stands: after
/// the select list, or at the end), which then parse as the query alone.
/// None when there is none.
pub fn take_into(tokens: &mut Vec<TokenWithSpan>) -> Result<Option<Outfile>, ParserError> {
    let is_into_word = |t: &TokenWithSpan| {
        matches!(&t.token, Token::Word(w) if w.quote_style.is_none()
            && (w.value.eq_ignore_ascii_case("OUTFILE") || w.value.eq_ignore_ascii_case("DUMPFILE")))
    };
    // Every SELECT comes here: one pass without allocating for the many
    // that have no such word.
    if !tokens.iter().any(is_into_word) {
        return Ok(None);
    }
    let significant = crate::engine::session::significant(tokens);
    let word = |at: usize, w: &str| {
        let Token::Word(x) = &tokens[at].token else {
            return false;
        };
        x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w)
    };
    let Some(at) = significant
        .windows(2)
        .find(|w| word(w[0], "INTO") && (word(w[1], "OUTFILE") || word(w[1], "DUMPFILE")))
        .map(|w| w[0])
    else {
        return Ok(None);
    };
    let trailing = crate::engine::session::into_is_trailing(tokens, at);
    let mut p = Parser::new(&crate::engine::dialect::SkarvDialect)
        .with_tokens_with_locations(tokens[at..].to_vec());
    load::expect(&mut p, "INTO")?;
    let dump = load::eat(&mut p, "DUMPFILE");
    if !dump {
        load::expect(&mut p, "OUTFILE")?;
    }
    let file = p.parse_literal_string()?;
    let mut format = Format::default();
    if !dump {
        if load::eat(&mut p, "CHARACTER") {
            load::expect(&mut p, "SET")?;
            check_charset(&load::charset_name(&mut p)?)?;
        } else if load::eat(&mut p, "CHARSET") {
            check_charset(&load::charset_name(&mut p)?)?;
        }
        load::parse_format(&mut p, &mut format)?;
    }
    // The tokens the INTO took (the parser's index is past its last).
    let used = p.get_current_index() + 1;
    tokens.drain(at..at + used);
    Ok(Some(Outfile {
        file,
        dump,
        format,
        trailing,
    }))
}

/// The file is written in UTF-8 (the rows' own bytes): a character set
/// that writes the same is taken, another refused.
fn check_charset(name: &str) -> Result<(), ParserError> {
    match name {
        "utf8mb4" | "utf8" | "utf8mb3" | "binary" => Ok(()),
        other => Err(ParserError::ParserError(format!(
            "INTO OUTFILE writes utf8mb4 (or binary), not {other}"
        ))),
    }
}

/// MariaDB's warning for an INTO at the end of its query.
pub(crate) fn warn_trailing_into(conn: &mut Conn<'_>) {
    conn.session.warn(
        codes::WARN_DEPRECATED_SYNTAX,
        "'<select expression> INTO <destination>;' is deprecated and will be removed in a \
         future release. Please use 'SELECT <select list> INTO <destination> FROM...' instead"
            .to_owned(),
    );
}

/// Runs the query and writes its rows to the new file: "N rows affected".
/// A query that fails leaves no file.
pub fn run(conn: &mut Conn<'_>, select: &SelectOutfile) -> SqlResult<Answered> {
    users::authorize(conn, &select.query)?;
    let into = &select.into;
    if into.trailing {
        warn_trailing_into(conn);
    }
    let path = load::server_file(conn, &into.file)?;
    let file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(SqlError::new(
                codes::FILE_EXISTS,
                format!("File '{}' already exists", into.file),
            ))
        }
        Err(e) => return Err(cant_write(&into.file, &e)),
    };
    let mut sink = FileSink {
        out: BufWriter::with_capacity(OUTFILE_BUFFER_BYTES, file),
        format: &into.format,
        dump: into.dump,
        columns: Vec::new(),
        rows: 0,
        scratch: Vec::new(),
        escaped: escaped_bytes(&into.format),
        failure: None,
    };
    let result = super::query(conn, &select.query, &[], false, &mut sink);
    let finished = match (result, sink.failure.take()) {
        (_, Some(Failure::TooManyRows)) => Err(SqlError::new(
            codes::TOO_MANY_ROWS,
            "Result consisted of more than one row",
        )),
        (_, Some(Failure::Io(e))) => Err(cant_write(&into.file, &e)),
        (Err(e), None) => Err(e),
        (Ok(_), None) => sink.out.flush().map_err(|e| cant_write(&into.file, &e)),
    };
    let rows = sink.rows;
    drop(sink);
    if let Err(e) = finished {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(Answered::Ok(OkInfo {
        affected_rows: rows,
        ..OkInfo::default()
    }))
}

fn cant_write(file: &str, e: &io::Error) -> SqlError {
    SqlError::new(
        codes::CANT_CREATE_FILE_EE,
        format!(
            "Can't create/write to file '{file}' (Errcode: {} \"{e}\")",
            e.raw_os_error().unwrap_or(0)
        ),
    )
}

/// Why the file sink stopped the query.
enum Failure {
    /// DUMPFILE's second row.
    TooManyRows,
    /// Writing failed (a full disk).
    Io(io::Error),
}

/// A result set written to the file instead of the client.
struct FileSink<'f> {
    out: BufWriter<std::fs::File>,
    format: &'f Format,
    dump: bool,
    columns: Vec<ColumnMeta>,
    rows: u64,
    scratch: Vec<u8>,
    /// The bytes a field's text escapes (MySQL's: the escape itself, the
    /// quote or, unquoted, the field terminator's first byte, the line
    /// terminator's first byte, NUL), by byte value.
    escaped: [bool; 256],
    failure: Option<Failure>,
}

/// A number is written unquoted under `OPTIONALLY ENCLOSED BY` (and never
/// escaped: it holds no terminator).
fn numeric(column: &ColumnMeta) -> bool {
    use ColumnType::*;
    matches!(
        column.ty,
        Decimal
            | NewDecimal
            | Tiny
            | Short
            | Long
            | Int24
            | LongLong
            | Float
            | Double
            | Year
            | Null
    )
}

impl FileSink<'_> {
    fn write_row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        let f = self.format;
        if self.dump {
            for (value, column) in values.iter().zip(&self.columns) {
                self.scratch.clear();
                render(value, column, &mut self.scratch);
                self.out.write_all(&self.scratch)?;
            }
            return Ok(());
        }
        self.out.write_all(&f.line_start)?;
        for (i, (value, column)) in values.iter().zip(&self.columns).enumerate() {
            if i > 0 {
                self.out.write_all(&f.field_end)?;
            }
            if matches!(value, SqlValue::Null) {
                match f.escape {
                    Some(e) => self.out.write_all(&[e, b'N'])?,
                    None => self.out.write_all(b"NULL")?,
                }
                continue;
            }
            // Text is written from the value itself, anything else as
            // the client would read it.
            let text: &[u8] = match value {
                SqlValue::Bytes(bytes) => bytes,
                other => {
                    self.scratch.clear();
                    render(other, column, &mut self.scratch);
                    &self.scratch
                }
            };
            let number = numeric(column);
            let enclose = f.enclosed.filter(|_| !(f.enclosed_optionally && number));
            if let Some(q) = enclose {
                self.out.write_all(&[q])?;
            }
            match f.escape.filter(|_| !number) {
                None => self.out.write_all(text)?,
                Some(e) => {
                    let mut from = 0;
                    for (at, &c) in text.iter().enumerate() {
                        if self.escaped[usize::from(c)] {
                            self.out.write_all(&text[from..at])?;
                            self.out.write_all(&[e, if c == 0 { b'0' } else { c }])?;
                            from = at + 1;
                        }
                    }
                    self.out.write_all(&text[from..])?;
                }
            }
            if let Some(q) = enclose {
                self.out.write_all(&[q])?;
            }
        }
        self.out.write_all(&f.line_end)
    }
}

/// [`FileSink::escaped`] of a format. A number is never escaped, and a
/// field that is not a number is enclosed whenever the format encloses.
fn escaped_bytes(f: &Format) -> [bool; 256] {
    let mut escaped = [false; 256];
    if let Some(e) = f.escape {
        let special = f
            .enclosed
            .or_else(|| f.field_end.first().copied())
            .unwrap_or(e);
        let line = f.line_end.first().copied().unwrap_or(e);
        for c in [e, special, line, 0] {
            escaped[usize::from(c)] = true;
        }
    }
    escaped
}

/// A value's text, as the client would read it.
fn render(value: &SqlValue, column: &ColumnMeta, out: &mut Vec<u8>) {
    match value {
        SqlValue::Null => {}
        SqlValue::Bytes(bytes) => out.extend_from_slice(bytes),
        other => crate::protocol::text::render(other, column, out),
    }
}

impl ResultSink for FileSink<'_> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()> {
        self.columns = columns.to_vec();
        Ok(())
    }

    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        if self.failure.is_some() {
            return Err(io::Error::other("the file failed"));
        }
        if self.dump && self.rows == 1 {
            self.failure = Some(Failure::TooManyRows);
            return Err(io::Error::other("more than one row for DUMPFILE"));
        }
        if let Err(e) = self.write_row(values) {
            let message = e.to_string();
            self.failure = Some(Failure::Io(e));
            return Err(io::Error::other(message));
        }
        self.rows += 1;
        Ok(())
    }

    fn end_rows(&mut self, _: &OkInfo) -> io::Result<()> {
        Ok(())
    }

    fn ok(&mut self, _: &OkInfo) -> io::Result<()> {
        Ok(())
    }

    fn error(&mut self, _: &SqlError) -> io::Result<()> {
        Ok(())
    }
}
