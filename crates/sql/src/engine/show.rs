//! `SHOW`, `DESCRIBE`, `COM_FIELD_LIST` and `information_schema`.
//!
//! Every answer is made from the catalog (the cluster's dictionary and the
//! tables' SQL metadata) with MySQL's column names. Row counts and sizes
//! (`SHOW TABLE STATUS`, `information_schema.TABLES`) are the cluster's
//! statistics (`engine::stats`, at most `STATS_REFRESH_MS` old), and
//! `Cardinality` is `ANALYZE TABLE`'s (0 before it; a unique key's is the
//! row count).
//!
//! `SHOW VARIABLES`, `STATUS`, `WARNINGS`, `PROCESSLIST`, `GRANTS` and
//! `KILL` are the session's and the accounts' (`session`, `users`).

use std::io;
use std::sync::Arc;

use sqlparser::ast::{
    Ident, ShowStatementFilter, ShowStatementFilterPosition, ShowStatementOptions, Statement,
};

use super::catalog::{self, BlobSize, SqlColumn, SqlType, TableInfo};
use super::ddl::{self, PRIMARY};
use super::{Answered, Conn};
use crate::backend::{OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta, ColumnType, SqlValue};

/// The tables of `information_schema` this SQL node answers. Result
/// layouts follow MariaDB's (the project's reference), which differs from
/// MySQL 8's in places (`Ignored` instead of `Visible` in SHOW INDEX,
/// `current_timestamp()`, unquoted numeric defaults).
/// (`server_info` answers those about the server rather than its tables.)
pub const INFORMATION_SCHEMA_TABLES: &[&str] = &[
    "CHARACTER_SETS",
    "CHECK_CONSTRAINTS",
    "COLLATIONS",
    "COLLATION_CHARACTER_SET_APPLICABILITY",
    "COLUMNS",
    "COLUMN_PRIVILEGES",
    "ENGINES",
    "EVENTS",
    "FILES",
    "GLOBAL_STATUS",
    "GLOBAL_VARIABLES",
    "KEYWORDS",
    "KEY_COLUMN_USAGE",
    "PARAMETERS",
    "PARTITIONS",
    "PLUGINS",
    "PROCESSLIST",
    "REFERENTIAL_CONSTRAINTS",
    "ROUTINES",
    "SCHEMATA",
    "SCHEMA_PRIVILEGES",
    "SESSION_STATUS",
    "SESSION_VARIABLES",
    "SQL_FUNCTIONS",
    "STATISTICS",
    "TABLES",
    "TABLE_CONSTRAINTS",
    "TABLE_PRIVILEGES",
    "TRIGGERS",
    "USER_PRIVILEGES",
    "VIEWS",
];

/// The `TABLE_CATALOG` of every table (MySQL's).
const CATALOG: &str = "def";

fn io_error(e: io::Error) -> SqlError {
    SqlError::new(codes::UNKNOWN, format!("sending the result: {e}"))
}

/// A text column of a result (`chars` characters of utf8mb4).
fn text_col(name: &str, chars: u32) -> ColumnMeta {
    ColumnMeta::expr(
        name,
        ColumnType::VarString,
        charset::UTF8MB4_GENERAL_CI,
        chars * 4,
    )
}

/// An unsigned integer column of a result.
fn int_col(name: &str) -> ColumnMeta {
    let mut meta = ColumnMeta::expr(name, ColumnType::LongLong, charset::BINARY, 21);
    meta.flags = flags::UNSIGNED | flags::NUM;
    meta
}

fn text(s: impl Into<String>) -> SqlValue {
    SqlValue::Bytes(s.into().into_bytes())
}

fn opt_text(s: Option<impl Into<String>>) -> SqlValue {
    s.map_or(SqlValue::Null, text)
}

/// Sends a whole result set.
fn send(
    sink: &mut dyn ResultSink,
    columns: &[ColumnMeta],
    rows: &[Vec<SqlValue>],
    more: bool,
) -> SqlResult<Answered> {
    sink.columns(columns).map_err(io_error)?;
    for row in rows {
        sink.row(row).map_err(io_error)?;
    }
    sink.end_rows(&OkInfo {
        more_results: more,
        ..OkInfo::default()
    })
    .map_err(io_error)?;
    Ok(Answered::Done)
}

/// MySQL's LIKE: `%` any run, `_` one character, `\` escapes.
pub fn like(pattern: &str, value: &str, case_insensitive: bool) -> bool {
    let fold = |s: &str| {
        if case_insensitive {
            s.to_lowercase()
        } else {
            s.to_owned()
        }
    };
    let p: Vec<char> = fold(pattern).chars().collect();
    let v: Vec<char> = fold(value).chars().collect();
    fn go(p: &[char], v: &[char]) -> bool {
        match p.first() {
            None => v.is_empty(),
            Some('%') => (0..=v.len()).any(|k| go(&p[1..], &v[k..])),
            Some('_') => !v.is_empty() && go(&p[1..], &v[1..]),
            Some('\\') if p.len() > 1 => v.first() == Some(&p[1]) && go(&p[2..], &v[1..]),
            Some(c) => v.first() == Some(c) && go(&p[1..], &v[1..]),
        }
    }
    go(&p, &v)
}

fn like_of(options: &ShowStatementOptions) -> SqlResult<Option<String>> {
    match &options.filter_position {
        None => Ok(None),
        Some(ShowStatementFilterPosition::Suffix(f) | ShowStatementFilterPosition::Infix(f)) => {
            filter_like(f)
        }
    }
}

fn filter_like(filter: &ShowStatementFilter) -> SqlResult<Option<String>> {
    match filter {
        ShowStatementFilter::Like(p) | ShowStatementFilter::ILike(p) => Ok(Some(p.clone())),
        // `with_where` filters the rows.
        ShowStatementFilter::Where(_) => Ok(None),
        ShowStatementFilter::NoKeyword(p) => Ok(Some(p.clone())),
    }
}

fn in_name(options: &ShowStatementOptions) -> SqlResult<Option<(Option<String>, String)>> {
    match &options.show_in {
        None => Ok(None),
        Some(show_in) => match &show_in.parent_name {
            None => Ok(None),
            Some(name) => ddl::object_name(name).map(Some),
        },
    }
}

/// Runs a `SHOW`-like statement.
pub fn statement(
    conn: &mut Conn<'_>,
    statement: &Statement,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    match statement {
        Statement::ShowDatabases { show_options, .. }
        | Statement::ShowSchemas { show_options, .. } => {
            let pattern = like_of(show_options)?;
            show_databases(conn, pattern.as_deref(), more, sink)
        }
        Statement::ShowTables {
            full, show_options, ..
        } => {
            let db = match in_name(show_options)? {
                Some((None, db)) => Some(db),
                Some((Some(_), _)) => return Err(SqlError::syntax("SHOW TABLES FROM db")),
                None => None,
            };
            let pattern = like_of(show_options)?;
            show_tables(conn, db, *full, pattern.as_deref(), more, sink)
        }
        Statement::ShowColumns {
            full, show_options, ..
        } => {
            let Some((db, table)) = in_name(show_options)? else {
                return Err(SqlError::syntax("SHOW COLUMNS needs FROM table"));
            };
            let pattern = like_of(show_options)?;
            if let Some(answer) =
                virtual_columns(conn, db.as_deref(), &table, pattern.as_deref(), more, sink)
            {
                return answer;
            }
            match catalog::table(conn, db.as_deref(), &table) {
                Ok(info) => show_columns(&info, *full, pattern.as_deref(), more, sink),
                Err(e) => view_columns(conn, db, &table, e, *full, pattern.as_deref(), more, sink),
            }
        }
        Statement::ExplainTable { table_name, .. } => {
            let (db, table) = ddl::object_name(table_name)?;
            if let Some(answer) = virtual_columns(conn, db.as_deref(), &table, None, more, sink) {
                return answer;
            }
            match catalog::table(conn, db.as_deref(), &table) {
                Ok(info) => show_columns(&info, false, None, more, sink),
                Err(e) => view_columns(conn, db, &table, e, false, None, more, sink),
            }
        }
        Statement::ShowCreate { obj_type, obj_name } => match obj_type {
            sqlparser::ast::ShowCreateObject::Table => {
                let (db, table) = ddl::object_name(obj_name)?;
                let info = match catalog::table(conn, db.as_deref(), &table) {
                    // MySQL shows a view's definition here too.
                    Err(e)
                        if e.code == codes::TABLE_NOT_FOUND
                            && super::views::for_name(conn, obj_name)?.is_some() =>
                    {
                        return super::views::show_create(conn, obj_name, more, sink);
                    }
                    other => other?,
                };
                let create = show_create_table(conn, &info)?;
                send(
                    sink,
                    &[text_col("Table", 64), text_col("Create Table", 1024)],
                    &[vec![text(info.name.clone()), text(create)]],
                    more,
                )
            }
            sqlparser::ast::ShowCreateObject::Procedure
            | sqlparser::ast::ShowCreateObject::Function
            | sqlparser::ast::ShowCreateObject::Trigger
            | sqlparser::ast::ShowCreateObject::Event => {
                Err(super::server_info::show_create_missing(
                    &obj_type.to_string(),
                    &ddl::object_name(obj_name)?.1,
                ))
            }
            other => Err(SqlError::unsupported(format_args!("SHOW CREATE {other}"))),
        },
        Statement::ShowCollation { filter } => {
            let pattern = match filter {
                Some(f) => filter_like(f)?,
                None => None,
            };
            show_collation(pattern.as_deref(), more, sink)
        }
        Statement::ShowCharset(show) => {
            let pattern = match &show.filter {
                Some(f) => filter_like(f)?,
                None => None,
            };
            show_charset(pattern.as_deref(), more, sink)
        }
        Statement::ShowVariable { variable } => show_words(conn, variable, more, sink),
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

/// `SHOW ENGINES`, `SHOW TABLE STATUS` (without its LIKE, which sqlparser
/// drops: `ddl::recognise` keeps it), which sqlparser hands over as words.
fn show_words(
    conn: &mut Conn<'_>,
    words: &[Ident],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let upper: Vec<String> = words.iter().map(|w| w.value.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    match upper.as_slice() {
        ["ENGINES"] | ["STORAGE", "ENGINES"] => show_engines(more, sink),
        ["TABLE", "STATUS", rest @ ..] => {
            let db = match rest {
                ["FROM" | "IN", ..] => words.get(3).map(|w| w.value.clone()),
                _ => None,
            };
            show_table_status(conn, db.as_deref(), None, more, sink)
        }
        _ => Err(SqlError::unsupported(format_args!(
            "SHOW {}",
            words
                .iter()
                .map(|w| w.value.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ))),
    }
}

fn show_databases(
    conn: &mut Conn<'_>,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let name = match pattern {
        Some(p) => format!("Database ({p})"),
        None => "Database".to_owned(),
    };
    let rows: Vec<Vec<SqlValue>> = catalog::databases(conn)?
        .into_iter()
        .filter(|d| pattern.is_none_or(|p| like(p, &d.name, false)))
        .map(|d| vec![text(d.name)])
        .collect();
    send(sink, &[text_col(&name, 64)], &rows, more)
}

fn show_tables(
    conn: &mut Conn<'_>,
    db: Option<String>,
    full: bool,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let Some(db) = db.or_else(|| conn.session.database.clone()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    catalog::database(conn, &db)?;
    let mut name = format!("Tables_in_{db}");
    if let Some(p) = pattern {
        name.push_str(&format!(" ({p})"));
    }
    let kind = if catalog::is_virtual_db(&db) {
        "SYSTEM VIEW"
    } else {
        "BASE TABLE"
    };
    let mut names: Vec<(String, &str)> = catalog::table_names(conn, &db)?
        .into_iter()
        .map(|t| (t, kind))
        .collect();
    if !catalog::is_virtual_db(&db) {
        names.extend(
            super::views::list(conn, Some(&db))?
                .into_iter()
                .map(|v| (v.name, "VIEW")),
        );
        names.sort();
    }
    let rows: Vec<Vec<SqlValue>> = names
        .into_iter()
        .filter(|(t, _)| pattern.is_none_or(|p| like(p, t, false)))
        .map(|(t, kind)| {
            let mut row = vec![text(t)];
            if full {
                row.push(text(kind));
            }
            row
        })
        .collect();
    let mut columns = vec![text_col(&name, 64)];
    if full {
        columns.push(text_col("Table_type", 64));
    }
    send(sink, &columns, &rows, more)
}

/// MySQL's `COLUMN_TYPE`: `int(11) unsigned`, `varchar(20)`,
/// `enum('a','b')`, …
pub fn column_type(column: &SqlColumn) -> String {
    let width = |default: u16| column.width.unwrap_or(default);
    let int = |name: &str, signed: u16, unsigned: bool| {
        let w = width(if unsigned { signed - 1 } else { signed });
        let mut s = format!("{name}({w})");
        if unsigned {
            s.push_str(" unsigned");
        }
        if column.zerofill {
            s.push_str(" zerofill");
        }
        s
    };
    let members = |m: &[String]| {
        m.iter()
            .map(|m| format!("'{}'", m.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(",")
    };
    // FLOAT, DOUBLE and DECIMAL show UNSIGNED and ZEROFILL after their
    // (M,D), as MariaDB's.
    let real = |mut s: String, unsigned: bool| {
        if unsigned {
            s.push_str(" unsigned");
        }
        if column.zerofill {
            s.push_str(" zerofill");
        }
        s
    };
    let fixed = |name: &str, digits: &Option<catalog::FixedDigits>, unsigned: bool| {
        let s = match digits {
            Some(f) => format!("{name}({},{})", f.m, f.d),
            None => name.to_owned(),
        };
        real(s, unsigned)
    };
    let fsp = |name: &str, fsp: u8| {
        if fsp > 0 {
            format!("{name}({fsp})")
        } else {
            name.to_owned()
        }
    };
    let blob = |prefix: &str, size: BlobSize| {
        let size = match size {
            BlobSize::Tiny => "tiny",
            BlobSize::Normal => "",
            BlobSize::Medium => "medium",
            BlobSize::Long => "long",
        };
        format!("{size}{prefix}")
    };
    match &column.ty {
        SqlType::TinyInt { unsigned } => int("tinyint", 4, *unsigned),
        SqlType::SmallInt { unsigned } => int("smallint", 6, *unsigned),
        SqlType::MediumInt { unsigned } => int("mediumint", 9, *unsigned),
        SqlType::Int { unsigned } => int("int", 11, *unsigned),
        SqlType::BigInt { unsigned } => {
            let w = width(20);
            let mut s = format!("bigint({w})");
            if *unsigned {
                s.push_str(" unsigned");
            }
            if column.zerofill {
                s.push_str(" zerofill");
            }
            s
        }
        SqlType::Float { digits, unsigned } => fixed("float", digits, *unsigned),
        SqlType::Double { digits, unsigned } => fixed("double", digits, *unsigned),
        SqlType::Decimal {
            precision,
            scale,
            unsigned,
        } => real(format!("decimal({precision},{scale})"), *unsigned),
        SqlType::Char { length, .. } => format!("char({length})"),
        SqlType::VarChar { max, .. } => format!("varchar({max})"),
        SqlType::Binary { length } => format!("binary({length})"),
        SqlType::VarBinary { max } => format!("varbinary({max})"),
        SqlType::Text { size, .. } => blob("text", *size),
        SqlType::Blob { size } => blob("blob", *size),
        SqlType::Date => "date".to_owned(),
        SqlType::Time { fsp: f } => fsp("time", *f),
        SqlType::DateTime { fsp: f } => fsp("datetime", *f),
        SqlType::Timestamp { fsp: f } => fsp("timestamp", *f),
        SqlType::Year => "year(4)".to_owned(),
        SqlType::Bit { bits } => format!("bit({bits})"),
        SqlType::Enum(m) => format!("enum({})", members(m)),
        SqlType::Set(m) => format!("set({})", members(m)),
    }
}

/// MySQL's `DATA_TYPE`: the type's name alone.
fn data_type(column: &SqlColumn) -> String {
    let full = column_type(column);
    full.split(['(', ' ']).next().unwrap_or("").to_owned()
}

fn collation_name(ty: &SqlType) -> Option<&'static str> {
    let c = match ty {
        SqlType::Char { collation, .. }
        | SqlType::VarChar { collation, .. }
        | SqlType::Text { collation, .. } => *collation,
        SqlType::Enum(_) | SqlType::Set(_) => schema::Collation::Utf8mb4GeneralCi,
        _ => return None,
    };
    Some(match c {
        schema::Collation::Utf8mb4Bin => "utf8mb4_bin",
        schema::Collation::Utf8mb4GeneralCi => "utf8mb4_general_ci",
    })
}

/// `PRI`, `UNI`, `MUL` or "" (MySQL's `COLUMN_KEY`).
fn column_key(info: &TableInfo, column: &SqlColumn) -> &'static str {
    let def = info.native.def();
    if !info.hidden_key && def.primary_key.contains(&column.native) {
        return "PRI";
    }
    let mut key = "";
    for index in &def.indexes {
        if index.columns.first() != Some(&column.native) || index.name == PRIMARY {
            continue;
        }
        if index.kind == schema::IndexKind::Unique && index.columns.len() == 1 {
            return "UNI";
        }
        key = "MUL";
    }
    key
}

/// `CURRENT_TIMESTAMP` as MariaDB (the reference) shows it as a DEFAULT or
/// ON UPDATE: `current_timestamp(n)` for a column of n fractional digits,
/// `current_timestamp()` for none.
fn now_sql(ty: &SqlType) -> String {
    match ty {
        SqlType::Timestamp { fsp } | SqlType::DateTime { fsp } if *fsp > 0 => {
            format!("current_timestamp({fsp})")
        }
        _ => "current_timestamp()".to_owned(),
    }
}

fn extra(column: &SqlColumn) -> String {
    let mut parts = Vec::new();
    if column.auto_increment {
        parts.push("auto_increment".to_owned());
    }
    if column.on_update_now {
        parts.push(format!("on update {}", now_sql(&column.ty)));
    }
    parts.join(" ")
}

/// A default as SHOW COLUMNS shows it: unquoted, BIT as `b'…'`.
fn default_shown(column: &SqlColumn) -> Option<String> {
    if column.default_now {
        return Some(now_sql(&column.ty));
    }
    match (&column.ty, &column.default) {
        (SqlType::Bit { .. }, Some(d)) => Some(default_sql(column, d)),
        // An expression as SHOW CREATE TABLE writes it (a TEXT column's
        // string quoted), as MariaDB shows it here too.
        (_, d) => d.clone(),
    }
}

/// A default as `information_schema.COLUMNS.COLUMN_DEFAULT` shows it, in
/// MySQL 8's form, which clients of a server that says it is MySQL 8
/// parse (TypeORM's `mysql` driver, Prisma, knex, Django): a literal as
/// its bare value (`abc`, `1.50`, `b'101'`), an expression as SHOW CREATE
/// TABLE writes it, SQL NULL for no default or a NULL one. (MariaDB since
/// 10.2.7 quotes strings and writes the word `NULL`: docs/sql.md,
/// "information_schema".)
fn default_literal(column: &SqlColumn) -> Option<String> {
    if column.default_now {
        return Some(now_sql(&column.ty));
    }
    let default = column.default.as_deref()?;
    if column.default_expr {
        return Some(default.to_owned());
    }
    Some(match &column.ty {
        SqlType::Bit { .. } => default_sql(column, default),
        _ => default.to_owned(),
    })
}

/// A default as SHOW CREATE TABLE writes it: numbers bare, BIT as
/// `b'…'`, the rest quoted (MariaDB's spelling).
fn default_sql(column: &SqlColumn, default: &str) -> String {
    if column.default_expr {
        return default.to_owned();
    }
    match &column.ty {
        ty if ty.is_number() => default.to_owned(),
        SqlType::Year => default.to_owned(),
        SqlType::Bit { .. } if default.starts_with("b'") => default.to_owned(),
        SqlType::Bit { .. } => match default.parse::<u64>() {
            Ok(v) => format!("b'{v:b}'"),
            Err(_) => quote_string(default),
        },
        _ => quote_string(default),
    }
}

fn show_columns(
    info: &TableInfo,
    full: bool,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    columns_answer(
        &info.columns,
        |c| column_key(info, c),
        full,
        pattern,
        more,
        sink,
    )
}

/// SHOW [FULL] COLUMNS' answer of these columns (`key`: each one's Key).
fn columns_answer<'c>(
    of: &'c [SqlColumn],
    key: impl Fn(&'c SqlColumn) -> &'static str,
    full: bool,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let mut columns = vec![text_col("Field", 64), text_col("Type", 256)];
    if full {
        columns.push(text_col("Collation", 64));
    }
    columns.extend([
        text_col("Null", 3),
        text_col("Key", 3),
        text_col("Default", 256),
        text_col("Extra", 256),
    ]);
    if full {
        columns.push(text_col("Privileges", 80));
        columns.push(text_col("Comment", 1024));
    }
    let rows: Vec<Vec<SqlValue>> = of
        .iter()
        .filter(|c| pattern.is_none_or(|p| like(p, &c.name, true)))
        .map(|c| {
            let mut row = vec![text(c.name.clone()), text(column_type(c))];
            if full {
                row.push(opt_text(collation_name(&c.ty)));
            }
            row.extend([
                text(if c.nullable { "YES" } else { "NO" }),
                text(key(c)),
                opt_text(default_shown(c)),
                text(extra(c)),
            ]);
            if full {
                row.push(text("select,insert,update,references"));
                row.push(text(c.comment.clone()));
            }
            row
        })
        .collect();
    send(sink, &columns, &rows, more)
}

/// SHOW COLUMNS and DESCRIBE of a view (`missing`, the error of no
/// table of the name, when there is no view either).
#[allow(clippy::too_many_arguments)]
fn view_columns(
    conn: &mut Conn<'_>,
    db: Option<String>,
    name: &str,
    missing: SqlError,
    full: bool,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    if missing.code != codes::TABLE_NOT_FOUND {
        return Err(missing);
    }
    let Some(db) = db.or_else(|| conn.session.database.clone()) else {
        return Err(missing);
    };
    let Some(view) = super::views::find(conn, &db, name)? else {
        return Err(missing);
    };
    let columns = view_sql_columns(conn, &view)?;
    columns_answer(&columns, |_| "", full, pattern, more, sink)
}

/// A view's columns as MariaDB describes them (its query planned, no
/// rows read): a column that is a table's column as declared is that
/// column (its type, collation, default and comment); another has the
/// type CREATE TABLE … SELECT would give it and, when it cannot be NULL,
/// its type's zero as its default. No view column is a key.
fn view_sql_columns(conn: &mut Conn<'_>, view: &super::views::View) -> SqlResult<Vec<SqlColumn>> {
    let metas = super::exec::derived::view_columns(conn, view)?;
    // A UNION's column is no table's, whatever its first SELECT's is.
    let union = matches!(
        *view.query()?.body,
        sqlparser::ast::SetExpr::SetOperation { .. }
    );
    let mut columns = Vec::with_capacity(metas.len());
    for (at, m) in metas.into_iter().enumerate() {
        let nullable = m.flags & flags::NOT_NULL == 0;
        let source = (!union)
            .then(|| super::create_select::source_column(conn, &m))
            .flatten();
        let column = match source {
            Some(c) => SqlColumn {
                name: m.name.to_string(),
                native: at,
                nullable,
                auto_increment: false,
                meta: m,
                ..c
            },
            None => {
                let (ty, width) = ddl::declared_type(&super::create_select::type_of(&m)?)?;
                SqlColumn {
                    name: m.name.to_string(),
                    native: at,
                    ty,
                    nullable,
                    auto_increment: false,
                    default: (!nullable).then(|| zero_of(&m)),
                    meta: m,
                    default_now: false,
                    default_expr: false,
                    on_update_now: false,
                    zerofill: false,
                    width,
                    comment: String::new(),
                }
            }
        };
        columns.push(column);
    }
    Ok(columns)
}

/// The zero of a computed column's type, MariaDB's default for a view
/// column that cannot be NULL: `0`, `0.00`, `0000-00-00`, `''`.
fn zero_of(m: &ColumnMeta) -> String {
    match m.ty {
        ColumnType::Decimal | ColumnType::NewDecimal if m.decimals > 0 => {
            format!("0.{}", "0".repeat(usize::from(m.decimals)))
        }
        ColumnType::Date => "0000-00-00".to_owned(),
        ColumnType::DateTime | ColumnType::Timestamp => "0000-00-00 00:00:00".to_owned(),
        ColumnType::Time => "00:00:00".to_owned(),
        ColumnType::Year => "0000".to_owned(),
        ColumnType::Tiny
        | ColumnType::Short
        | ColumnType::Int24
        | ColumnType::Long
        | ColumnType::LongLong
        | ColumnType::Float
        | ColumnType::Double
        | ColumnType::Decimal
        | ColumnType::NewDecimal
        | ColumnType::Bit => "0".to_owned(),
        // Text, bytes, ENUM and SET, JSON, a NULL's column: empty.
        _ => String::new(),
    }
}

/// `DESCRIBE` of an `information_schema` table (GUI tools ask): None when
/// the table is not in the virtual database.
fn virtual_columns(
    conn: &Conn<'_>,
    db: Option<&str>,
    table: &str,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> Option<SqlResult<Answered>> {
    let db = db
        .map(str::to_owned)
        .or_else(|| conn.session.database.clone())?;
    if !catalog::is_virtual_db(&db) {
        return None;
    }
    let metas = if catalog::is_ndbinfo(&db) {
        ndbinfo_columns(table).map(|(_, metas)| metas)
    } else {
        information_schema_columns(table)
    };
    let metas = match metas {
        Some(metas) => metas,
        None => {
            return Some(Err(SqlError::new(
                codes::TABLE_NOT_FOUND,
                format!("Table '{db}.{table}' doesn't exist"),
            )))
        }
    };
    let rows: Vec<Vec<SqlValue>> = metas
        .iter()
        .filter(|m| pattern.is_none_or(|p| like(p, &m.name, true)))
        .map(|m| {
            let ty = if m.ty == ColumnType::LongLong {
                "bigint(21) unsigned".to_owned()
            } else {
                format!("varchar({})", m.length / 4)
            };
            vec![
                text(m.name.to_string()),
                text(ty),
                text("YES"),
                text(""),
                SqlValue::Null,
                text(""),
            ]
        })
        .collect();
    let columns = [
        text_col("Field", 64),
        text_col("Type", 256),
        text_col("Null", 3),
        text_col("Key", 3),
        text_col("Default", 256),
        text_col("Extra", 256),
    ];
    Some(send(sink, &columns, &rows, more))
}

/// The columns of an `information_schema` table, without reading rows.
pub(crate) fn information_schema_columns(table: &str) -> Option<Vec<ColumnMeta>> {
    Some(match table.to_ascii_uppercase().as_str() {
        "SCHEMATA" => schemata_columns(),
        "TABLES" => tables_columns(),
        "VIEWS" => views_columns(),
        "TRIGGERS" => triggers_columns(),
        "COLUMNS" => columns_columns(),
        "STATISTICS" => statistics_columns(),
        "KEY_COLUMN_USAGE" => key_column_usage_columns(),
        "CHECK_CONSTRAINTS" => check_constraints_columns(),
        "REFERENTIAL_CONSTRAINTS" => referential_constraints_columns(),
        "TABLE_CONSTRAINTS" => table_constraints_columns(),
        "PROCESSLIST" => super::session::processlist_columns(true, true),
        "GLOBAL_STATUS" | "SESSION_STATUS" | "GLOBAL_VARIABLES" | "SESSION_VARIABLES" => {
            status_columns()
        }
        other => return super::server_info::columns(other),
    })
}

/// One row per index column: `(name, non_unique, seq, column, nullable,
/// type)`.
type IndexRow = (String, bool, usize, String, bool, &'static str, u64);

/// Distinct values of the first `seq` columns of `key` (MySQL's
/// Cardinality): `ANALYZE TABLE`'s for its ordered index; for the whole of
/// a unique key, the row count; else 0.
fn key_cardinality(info: &TableInfo, key: &catalog::KeyInfo, seq: usize) -> u64 {
    let analyzed = key
        .ordered
        .as_deref()
        .and_then(|index| info.stats.cardinality(index, seq));
    match analyzed {
        Some(c) => c,
        None if key.unique && seq == key.columns.len() => info.stats.rows().unwrap_or(0),
        None => 0,
    }
}

/// The table's keys as SQL sees them (`TableInfo::keys`), a row per column.
fn index_rows(info: &TableInfo) -> Vec<IndexRow> {
    let def = info.native.def();
    let name_of = |c: usize| {
        def.columns
            .get(c)
            .map(|c| c.name.clone())
            .unwrap_or_default()
    };
    let nullable = |c: usize| def.columns.get(c).is_some_and(|c| c.nullable);
    let mut out = Vec::new();
    for key in &info.keys {
        let kind = if key.ordered.is_some() || key.primary {
            "BTREE"
        } else {
            "HASH"
        };
        for (k, &c) in key.columns.iter().enumerate() {
            out.push((
                key.name.clone(),
                !key.unique,
                k + 1,
                name_of(c),
                nullable(c),
                kind,
                key_cardinality(info, key, k + 1),
            ));
        }
    }
    out
}

/// `SHOW INDEX|INDEXES|KEYS FROM t [FROM db]` from its words, which have
/// lost their dots: `FROM db.t` is [INDEX, FROM, db, t], `FROM t FROM db`
/// [INDEX, FROM, t, FROM, db] (its WHERE is `server_info::show`'s).
pub(crate) fn show_index_words(
    conn: &mut Conn<'_>,
    words: &[String],
    upper: &[&str],
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let table = words.get(2).cloned().unwrap_or_default();
    let (db, table) = match (upper.get(3), words.get(3), words.get(4)) {
        (Some(&("FROM" | "IN")), _, Some(db)) if words.len() == 5 => (Some(db.clone()), table),
        (None, ..) => (None, table),
        (Some(_), Some(t), None) => (Some(table), t.clone()),
        _ => return Err(SqlError::syntax("SHOW INDEX FROM [db.]t [FROM db]")),
    };
    let info = catalog::table(conn, db.as_deref(), &table)?;
    super::stats::refresh(conn, &info);
    show_index(&info, more, sink)
}

fn show_index(info: &TableInfo, more: bool, sink: &mut dyn ResultSink) -> SqlResult<Answered> {
    let columns = [
        text_col("Table", 64),
        int_col("Non_unique"),
        text_col("Key_name", 64),
        int_col("Seq_in_index"),
        text_col("Column_name", 64),
        text_col("Collation", 1),
        int_col("Cardinality"),
        int_col("Sub_part"),
        text_col("Packed", 10),
        text_col("Null", 3),
        text_col("Index_type", 16),
        text_col("Comment", 16),
        text_col("Index_comment", 1024),
        text_col("Ignored", 3),
    ];
    let rows: Vec<Vec<SqlValue>> = index_rows(info)
        .into_iter()
        .map(|(name, non_unique, seq, column, nullable, kind, card)| {
            vec![
                text(info.name.clone()),
                SqlValue::UInt(u64::from(non_unique)),
                text(name),
                SqlValue::UInt(seq as u64),
                text(column),
                text(if kind == "HASH" { "" } else { "A" }),
                SqlValue::UInt(card),
                SqlValue::Null,
                SqlValue::Null,
                text(if nullable { "YES" } else { "" }),
                text(kind),
                text(""),
                text(""),
                text("NO"),
            ]
        })
        .collect();
    send(sink, &columns, &rows, more)
}

pub(crate) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

pub(crate) fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `SHOW CREATE TABLE`'s text, in MySQL's layout; it creates the same
/// table again.
pub fn show_create_table(conn: &Conn<'_>, info: &TableInfo) -> SqlResult<String> {
    let def = info.native.def();
    let table_collation = info.sql.collation.as_str();
    let mut lines = Vec::new();
    for c in &info.columns {
        let mut line = format!("  {}", column_definition(c, table_collation));
        // A column's CHECK follows it, as MariaDB shows it.
        for check in info.sql.checks.iter().filter(|k| {
            k.column
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(&c.name))
        }) {
            line.push_str(&format!(" CHECK ({})", ddl::check_clause(&check.expr)));
        }
        lines.push(line);
    }
    let mut keys: Vec<(String, bool, Vec<String>)> = Vec::new();
    for (name, non_unique, seq, column, _, _, _) in index_rows(info) {
        if seq == 1 {
            keys.push((name, !non_unique, vec![column]));
        } else if let Some(last) = keys.last_mut() {
            last.2.push(column);
        }
    }
    for (name, unique, columns) in keys {
        let columns = columns
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(",");
        if name == PRIMARY {
            lines.push(format!("  PRIMARY KEY ({columns})"));
        } else if unique {
            lines.push(format!("  UNIQUE KEY {} ({columns})", quote_ident(&name)));
        } else {
            lines.push(format!("  KEY {} ({columns})", quote_ident(&name)));
        }
    }
    for fk in &info.sql.foreign_keys {
        lines.push(format!(
            "  {}",
            super::foreign::describe(&info.db, fk, false)
        ));
    }
    for check in info.sql.checks.iter().filter(|k| k.column.is_none()) {
        lines.push(format!(
            "  CONSTRAINT {} CHECK ({})",
            quote_ident(&check.name),
            ddl::check_clause(&check.expr)
        ));
    }
    let mut out = format!(
        "CREATE {}TABLE {} (\n{}\n) ENGINE=ndbcluster",
        if info.is_temporary() {
            "TEMPORARY "
        } else {
            ""
        },
        quote_ident(&info.name),
        lines.join(",\n")
    );
    if info.auto_increment_column().is_some() {
        let next = catalog::peek_auto_increment(conn, info)?;
        if next > 1 {
            out.push_str(&format!(" AUTO_INCREMENT={next}"));
        }
    }
    out.push_str(&format!(
        " DEFAULT CHARSET={} COLLATE={}",
        info.sql.charset, info.sql.collation
    ));
    if !info.sql.comment.is_empty() {
        out.push_str(&format!(" COMMENT={}", quote_string(&info.sql.comment)));
    }
    if !info.hidden_key && def.distribution_key.len() != def.primary_key.len() {
        let columns = def
            .distribution_key
            .iter()
            .filter_map(|&c| def.columns.get(c))
            .map(|c| quote_ident(&c.name))
            .collect::<Vec<_>>()
            .join(",");
        out.push_str(&format!("\nPARTITION BY KEY ({columns})"));
    }
    Ok(out)
}

/// A column's definition as SHOW CREATE TABLE writes it, without its
/// CHECKs: name, type, a collation other than the table's, NULL-ness,
/// default, ON UPDATE, AUTO_INCREMENT, comment.
pub(crate) fn column_definition(c: &SqlColumn, table_collation: &str) -> String {
    let mut line = format!("{} {}", quote_ident(&c.name), column_type(c));
    if let Some(coll) = collation_name(&c.ty) {
        if coll != table_collation && !matches!(c.ty, SqlType::Enum(_) | SqlType::Set(_)) {
            line.push_str(&format!(" CHARACTER SET utf8mb4 COLLATE {coll}"));
        }
    }
    let is_timestamp = matches!(c.ty, SqlType::Timestamp { .. });
    if !c.nullable {
        line.push_str(" NOT NULL");
    } else if is_timestamp {
        line.push_str(" NULL");
    }
    if c.default_now {
        line.push_str(&format!(" DEFAULT {}", now_sql(&c.ty)));
    } else if let Some(d) = &c.default {
        line.push_str(&format!(" DEFAULT {}", default_sql(c, d)));
    } else if c.nullable {
        line.push_str(" DEFAULT NULL");
    }
    if c.on_update_now {
        line.push_str(&format!(" ON UPDATE {}", now_sql(&c.ty)));
    }
    if c.auto_increment {
        line.push_str(" AUTO_INCREMENT");
    }
    if !c.comment.is_empty() {
        line.push_str(&format!(" COMMENT {}", quote_string(&c.comment)));
    }
    line
}

/// `SHOW CREATE DATABASE`.
pub fn show_create_database(
    conn: &mut Conn<'_>,
    name: &str,
    if_not_exists: bool,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let db = catalog::database(conn, name)?;
    let create = format!(
        "CREATE DATABASE {}{} /*!40100 DEFAULT CHARACTER SET {} COLLATE {} */",
        if if_not_exists {
            "/*!32312 IF NOT EXISTS*/ "
        } else {
            ""
        },
        quote_ident(&db.name),
        db.charset,
        db.collation
    );
    send(
        sink,
        &[text_col("Database", 64), text_col("Create Database", 1024)],
        &[vec![text(db.name), text(create)]],
        more,
    )
}

fn show_engines(more: bool, sink: &mut dyn ResultSink) -> SqlResult<Answered> {
    let columns = [
        text_col("Engine", 64),
        text_col("Support", 8),
        text_col("Comment", 80),
        text_col("Transactions", 3),
        text_col("XA", 3),
        text_col("Savepoints", 3),
    ];
    let rows: Vec<Vec<SqlValue>> = super::server_info::ENGINES
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
        .collect();
    send(sink, &columns, &rows, more)
}

fn show_collation(
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let columns = [
        text_col("Collation", 64),
        text_col("Charset", 64),
        int_col("Id"),
        text_col("Default", 3),
        text_col("Compiled", 3),
        int_col("Sortlen"),
    ];
    let rows: Vec<Vec<SqlValue>> = super::server_info::COLLATIONS
        .iter()
        .filter(|(name, ..)| pattern.is_none_or(|p| like(p, name, true)))
        .map(|(name, set, id, default)| {
            vec![
                text(*name),
                text(*set),
                SqlValue::UInt(u64::from(*id)),
                text(if *default { "Yes" } else { "" }),
                text("Yes"),
                SqlValue::UInt(1),
            ]
        })
        .collect();
    send(sink, &columns, &rows, more)
}

fn show_charset(
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let columns = [
        text_col("Charset", 64),
        text_col("Description", 64),
        text_col("Default collation", 64),
        int_col("Maxlen"),
    ];
    let rows: Vec<Vec<SqlValue>> = super::server_info::CHARSETS
        .iter()
        .filter(|(name, ..)| pattern.is_none_or(|p| like(p, name, true)))
        .map(|(name, collation, description, max)| {
            vec![
                text(*name),
                text(*description),
                text(*collation),
                SqlValue::UInt(*max),
            ]
        })
        .collect();
    send(sink, &columns, &rows, more)
}

/// `SHOW TABLE STATUS`: rows and sizes from the cluster's statistics.
pub fn show_table_status(
    conn: &mut Conn<'_>,
    db: Option<&str>,
    pattern: Option<&str>,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let Some(db) = db
        .map(str::to_owned)
        .or_else(|| conn.session.database.clone())
    else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    catalog::database(conn, &db)?;
    let columns = [
        text_col("Name", 64),
        text_col("Engine", 64),
        int_col("Version"),
        text_col("Row_format", 10),
        int_col("Rows"),
        int_col("Avg_row_length"),
        int_col("Data_length"),
        int_col("Max_data_length"),
        int_col("Index_length"),
        int_col("Data_free"),
        int_col("Auto_increment"),
        text_col("Create_time", 19),
        text_col("Update_time", 19),
        text_col("Check_time", 19),
        text_col("Collation", 64),
        int_col("Checksum"),
        text_col("Create_options", 256),
        text_col("Comment", 2048),
        int_col("Max_index_length"),
        text_col("Temporary", 1),
    ];
    let mut rows = Vec::new();
    for name in catalog::table_names(conn, &db)? {
        if pattern.is_some_and(|p| !like(p, &name, false)) || catalog::is_virtual_db(&db) {
            continue;
        }
        let info = match catalog::table(conn, Some(&db), &name) {
            Ok(info) => info,
            Err(e) if e.code == codes::TABLE_NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        let auto = if info.auto_increment_column().is_some() {
            SqlValue::UInt(catalog::peek_auto_increment(conn, &info)?)
        } else {
            SqlValue::Null
        };
        super::stats::refresh(conn, &info);
        let mut row = vec![text(name)];
        row.extend(status_fields(&info, auto));
        row.extend([SqlValue::UInt(0), text("N")]);
        rows.push(row);
    }
    send(sink, &columns, &rows, more)
}

fn create_options(info: &TableInfo) -> String {
    let def = info.native.def();
    if def.distribution_key.len() != def.primary_key.len() && !info.hidden_key {
        "partitioned".to_owned()
    } else {
        String::new()
    }
}

/// `COM_FIELD_LIST`: the columns of a table of the current database.
pub fn field_list(conn: &mut Conn<'_>, table: &str) -> SqlResult<Vec<ColumnMeta>> {
    let info = catalog::table(conn, None, table)?;
    Ok(info.columns.iter().map(|c| c.meta.clone()).collect())
}

// ---- information_schema ----

/// Whether `name` is a virtual database (`information_schema`).
pub fn is_virtual_db(name: &str) -> bool {
    catalog::is_virtual_db(name)
}

/// The columns and rows of virtual table `db.table_name` (`db` one that
/// `is_virtual_db` names): every row (the executor filters).
pub fn virtual_rows(
    conn: &mut Conn<'_>,
    db: &str,
    table_name: &str,
) -> SqlResult<(Vec<ColumnMeta>, Vec<Vec<SqlValue>>)> {
    if catalog::is_ndbinfo(db) {
        ndbinfo_rows(conn, table_name)
    } else {
        information_schema_rows(conn, table_name)
    }
}

/// The columns of `ndbinfo.<table_name>`, if it has that table.
fn ndbinfo_columns(
    table_name: &str,
) -> Option<(&'static signal::dbinfo::TableDef, Vec<ColumnMeta>)> {
    let def = signal::dbinfo::table(table_name)?;
    let columns = def
        .columns
        .iter()
        .map(|(name, kind)| {
            let mut meta = match kind {
                signal::dbinfo::ColumnKind::Int => int_col(name),
                signal::dbinfo::ColumnKind::Text => text_col(name, 512),
            };
            meta.schema = catalog::NDBINFO.into();
            meta.table = def.name.into();
            meta.org_table = Arc::clone(&meta.table);
            meta.org_name = Arc::clone(&meta.name);
            meta
        })
        .collect();
    Some((def, columns))
}

/// The columns and rows of `ndbinfo.<table_name>`: the rows every live
/// data node has now (a node down is left out). 1146 for a table
/// ndbinfo has not.
pub fn ndbinfo_rows(conn: &Conn<'_>, table_name: &str) -> SqlResult<Rows> {
    let Some((def, columns)) = ndbinfo_columns(table_name) else {
        return Err(SqlError::new(
            codes::TABLE_NOT_FOUND,
            format!("Table 'ndbinfo.{table_name}' doesn't exist"),
        ));
    };
    let answer = catalog::retry(|| conn.native.dbinfo(def.name))?;
    let rows = answer
        .rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|v| match v {
                    skarv_client::Value::UInt(n) => SqlValue::UInt(n),
                    skarv_client::Value::String(s) => text(s),
                    _ => SqlValue::Null,
                })
                .collect()
        })
        .collect();
    Ok((columns, rows))
}

/// The columns and rows of `information_schema.<table_name>` (any case):
/// every row (the executor filters). 1109 for a table it has not.
pub fn information_schema_rows(
    conn: &mut Conn<'_>,
    table_name: &str,
) -> SqlResult<(Vec<ColumnMeta>, Vec<Vec<SqlValue>>)> {
    let upper = table_name.to_ascii_uppercase();
    let (columns, rows) = match upper.as_str() {
        "SCHEMATA" => schemata(conn)?,
        "TABLES" => tables(conn)?,
        "VIEWS" => views(conn)?,
        // Skarv has no triggers (mysqldump asks for each table's).
        "TRIGGERS" => (triggers_columns(), Vec::new()),
        "COLUMNS" => columns(conn)?,
        "STATISTICS" => statistics(conn)?,
        "KEY_COLUMN_USAGE" => key_column_usage(conn)?,
        "CHECK_CONSTRAINTS" => check_constraints(conn)?,
        "REFERENTIAL_CONSTRAINTS" => referential_constraints(conn)?,
        "TABLE_CONSTRAINTS" => table_constraints(conn)?,
        // This SQL node's connections only (as SHOW PROCESSLIST).
        "PROCESSLIST" => super::session::processlist(conn, true, true),
        "GLOBAL_VARIABLES" | "SESSION_VARIABLES" => {
            let global = upper == "GLOBAL_VARIABLES";
            let rows = super::session::variable_rows(conn, global)
                .into_iter()
                .map(|(name, value)| {
                    vec![
                        SqlValue::Bytes(name.to_ascii_uppercase().into_bytes()),
                        SqlValue::Bytes(value.into_bytes()),
                    ]
                })
                .collect();
            (status_columns(), rows)
        }
        "GLOBAL_STATUS" | "SESSION_STATUS" => {
            let global = upper == "GLOBAL_STATUS";
            let rows = super::status::rows(conn, global)
                .into_iter()
                .map(|(name, value)| {
                    vec![
                        SqlValue::Bytes(name.to_ascii_uppercase().into_bytes()),
                        SqlValue::Bytes(value.into_bytes()),
                    ]
                })
                .collect();
            (status_columns(), rows)
        }
        other => match super::server_info::columns(other) {
            Some(columns) => (columns, super::server_info::rows(conn, other)?),
            None => {
                return Err(SqlError::new(
                    codes::UNKNOWN_TABLE,
                    format!("Unknown table '{table_name}' in information_schema"),
                ))
            }
        },
    };
    let columns = columns
        .into_iter()
        .map(|mut c| {
            c.schema = catalog::INFORMATION_SCHEMA.into();
            c.table = upper.as_str().into();
            c.org_table = Arc::clone(&c.table);
            c.org_name = Arc::clone(&c.name);
            c
        })
        .collect();
    Ok((columns, rows))
}

type Rows = (Vec<ColumnMeta>, Vec<Vec<SqlValue>>);

/// `information_schema.GLOBAL_STATUS`/`SESSION_STATUS` and
/// `GLOBAL_VARIABLES`/`SESSION_VARIABLES`: MariaDB's layout (names in
/// capitals).
fn status_columns() -> Vec<ColumnMeta> {
    let text = |n: &str, length: u32| {
        ColumnMeta::expr(
            n,
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            length,
        )
    };
    vec![text("VARIABLE_NAME", 256), text("VARIABLE_VALUE", 8192)]
}

/// Every SQL table of every database, skipping ones dropped meanwhile.
pub(crate) fn all_tables(conn: &Conn<'_>) -> SqlResult<Vec<std::sync::Arc<TableInfo>>> {
    let mut out = Vec::new();
    for db in catalog::databases(conn)? {
        if catalog::is_virtual_db(&db.name) {
            continue;
        }
        for name in catalog::table_names(conn, &db.name)? {
            match catalog::table(conn, Some(&db.name), &name) {
                Ok(info) => out.push(info),
                Err(e) if e.code == codes::TABLE_NOT_FOUND => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(out)
}

fn schemata_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("CATALOG_NAME", 64),
        text_col("SCHEMA_NAME", 64),
        text_col("DEFAULT_CHARACTER_SET_NAME", 64),
        text_col("DEFAULT_COLLATION_NAME", 64),
        text_col("SQL_PATH", 512),
    ]
}

fn schemata(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = schemata_columns();
    let rows = catalog::databases(conn)?
        .into_iter()
        .map(|d| {
            vec![
                text(CATALOG),
                text(d.name),
                text(d.charset),
                text(d.collation),
                SqlValue::Null,
            ]
        })
        .collect();
    Ok((columns, rows))
}

fn tables_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("TABLE_CATALOG", 64),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("TABLE_TYPE", 64),
        text_col("ENGINE", 64),
        int_col("VERSION"),
        text_col("ROW_FORMAT", 10),
        int_col("TABLE_ROWS"),
        int_col("AVG_ROW_LENGTH"),
        int_col("DATA_LENGTH"),
        int_col("MAX_DATA_LENGTH"),
        int_col("INDEX_LENGTH"),
        int_col("DATA_FREE"),
        int_col("AUTO_INCREMENT"),
        text_col("CREATE_TIME", 19),
        text_col("UPDATE_TIME", 19),
        text_col("CHECK_TIME", 19),
        text_col("TABLE_COLLATION", 64),
        int_col("CHECKSUM"),
        text_col("CREATE_OPTIONS", 256),
        text_col("TABLE_COMMENT", 2048),
    ]
}

fn tables(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = tables_columns();
    let mut rows = Vec::new();
    for name in INFORMATION_SCHEMA_TABLES {
        let mut row = vec![
            text(CATALOG),
            text(catalog::INFORMATION_SCHEMA),
            text(*name),
            text("SYSTEM VIEW"),
        ];
        row.extend(std::iter::repeat_n(SqlValue::Null, 13));
        row.extend([
            text("utf8mb4_general_ci"),
            SqlValue::Null,
            text(""),
            text(""),
        ]);
        rows.push(row);
    }
    for info in all_tables(conn)? {
        let auto = if info.auto_increment_column().is_some() {
            SqlValue::UInt(catalog::peek_auto_increment(conn, &info)?)
        } else {
            SqlValue::Null
        };
        let mut row = vec![
            text(CATALOG),
            text(info.db.clone()),
            text(info.name.clone()),
            text("BASE TABLE"),
        ];
        super::stats::refresh(conn, &info);
        row.extend(status_fields(&info, auto));
        rows.push(row);
    }
    for view in super::views::list(conn, None)? {
        let mut row = vec![text(CATALOG), text(view.db), text(view.name), text("VIEW")];
        row.extend(std::iter::repeat_n(SqlValue::Null, 16));
        row.push(text("VIEW"));
        rows.push(row);
    }
    Ok((columns, rows))
}

/// `information_schema.VIEWS`'s columns (MariaDB's, with ALGORITHM).
/// MariaDB's columns of `information_schema.TRIGGERS`.
fn triggers_columns() -> Vec<ColumnMeta> {
    let mut columns = Vec::new();
    for name in [
        "TRIGGER_CATALOG",
        "TRIGGER_SCHEMA",
        "TRIGGER_NAME",
        "EVENT_MANIPULATION",
        "EVENT_OBJECT_CATALOG",
        "EVENT_OBJECT_SCHEMA",
        "EVENT_OBJECT_TABLE",
    ] {
        columns.push(text_col(name, 64));
    }
    columns.push(ColumnMeta::expr(
        "ACTION_ORDER",
        ColumnType::LongLong,
        charset::BINARY,
        4,
    ));
    for name in [
        "ACTION_CONDITION",
        "ACTION_STATEMENT",
        "ACTION_ORIENTATION",
        "ACTION_TIMING",
        "ACTION_REFERENCE_OLD_TABLE",
        "ACTION_REFERENCE_NEW_TABLE",
        "ACTION_REFERENCE_OLD_ROW",
        "ACTION_REFERENCE_NEW_ROW",
        "CREATED",
        "SQL_MODE",
        "DEFINER",
        "CHARACTER_SET_CLIENT",
        "COLLATION_CONNECTION",
        "DATABASE_COLLATION",
    ] {
        columns.push(text_col(name, 64));
    }
    columns
}

fn views_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("TABLE_CATALOG", 512),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("VIEW_DEFINITION", 4096),
        text_col("CHECK_OPTION", 8),
        text_col("IS_UPDATABLE", 3),
        text_col("DEFINER", 384),
        text_col("SECURITY_TYPE", 7),
        text_col("CHARACTER_SET_CLIENT", 32),
        text_col("COLLATION_CONNECTION", 64),
        text_col("ALGORITHM", 10),
    ]
}

/// One row per view; IS_UPDATABLE as `exec::through_view` decides.
fn views(conn: &Conn<'_>) -> SqlResult<Rows> {
    let rows = super::views::list(conn, None)?
        .into_iter()
        .map(|v| {
            let updatable = super::exec::through_view::is_updatable(&v);
            vec![
                text(CATALOG),
                text(v.db),
                text(v.name),
                text(v.body),
                text(v.check.word()),
                text(if updatable { "YES" } else { "NO" }),
                text(v.definer.replace('`', "")),
                text(v.security),
                text("utf8mb4"),
                text("utf8mb4_general_ci"),
                text(v.algorithm),
            ]
        })
        .collect();
    Ok((views_columns(), rows))
}

/// `(CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION,
/// NUMERIC_SCALE, DATETIME_PRECISION)` of a column.
fn lengths(c: &SqlColumn) -> [Option<u64>; 5] {
    let blob = |s: BlobSize| match s {
        BlobSize::Tiny => 255,
        BlobSize::Normal => 65_535,
        BlobSize::Medium => 16_777_215,
        BlobSize::Long => 4_294_967_295,
    };
    match &c.ty {
        SqlType::TinyInt { .. } => [None, None, Some(3), Some(0), None],
        SqlType::SmallInt { .. } => [None, None, Some(5), Some(0), None],
        SqlType::MediumInt { .. } => [None, None, Some(7), Some(0), None],
        SqlType::Int { .. } => [None, None, Some(10), Some(0), None],
        SqlType::BigInt { unsigned } => {
            [None, None, Some(19 + u64::from(*unsigned)), Some(0), None]
        }
        SqlType::Float { digits: None, .. } => [None, None, Some(12), None, None],
        SqlType::Double { digits: None, .. } => [None, None, Some(22), None, None],
        SqlType::Float {
            digits: Some(f), ..
        }
        | SqlType::Double {
            digits: Some(f), ..
        } => [None, None, Some(u64::from(f.m)), Some(u64::from(f.d)), None],
        SqlType::Decimal {
            precision, scale, ..
        } => [
            None,
            None,
            Some(u64::from(*precision)),
            Some(u64::from(*scale)),
            None,
        ],
        SqlType::Char { length, .. } => [
            Some(u64::from(*length)),
            Some(u64::from(*length) * 4),
            None,
            None,
            None,
        ],
        SqlType::VarChar { max, .. } => [
            Some(u64::from(*max)),
            Some(u64::from(*max) * 4),
            None,
            None,
            None,
        ],
        SqlType::Binary { length } => [
            Some(u64::from(*length)),
            Some(u64::from(*length)),
            None,
            None,
            None,
        ],
        SqlType::VarBinary { max } => [
            Some(u64::from(*max)),
            Some(u64::from(*max)),
            None,
            None,
            None,
        ],
        // A TEXT's maximum in characters is its bytes, as MySQL's.
        SqlType::Text { size, .. } => [Some(blob(*size)), Some(blob(*size)), None, None, None],
        SqlType::Blob { size } => [Some(blob(*size)), Some(blob(*size)), None, None, None],
        SqlType::Bit { bits } => [None, None, Some(u64::from(*bits)), None, None],
        SqlType::Time { fsp } | SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => {
            [None, None, None, None, Some(u64::from(*fsp))]
        }
        SqlType::Date => [None, None, None, None, None],
        SqlType::Year => [None, None, None, None, None],
        SqlType::Enum(m) | SqlType::Set(m) => {
            let n = m
                .iter()
                .map(|m| m.chars().count() as u64)
                .max()
                .unwrap_or(0);
            [Some(n), Some(n * 4), None, None, None]
        }
    }
}

fn columns_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("TABLE_CATALOG", 64),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("COLUMN_NAME", 64),
        int_col("ORDINAL_POSITION"),
        text_col("COLUMN_DEFAULT", 1024),
        text_col("IS_NULLABLE", 3),
        text_col("DATA_TYPE", 64),
        int_col("CHARACTER_MAXIMUM_LENGTH"),
        int_col("CHARACTER_OCTET_LENGTH"),
        int_col("NUMERIC_PRECISION"),
        int_col("NUMERIC_SCALE"),
        int_col("DATETIME_PRECISION"),
        text_col("CHARACTER_SET_NAME", 64),
        text_col("COLLATION_NAME", 64),
        text_col("COLUMN_TYPE", 1024),
        text_col("COLUMN_KEY", 3),
        text_col("EXTRA", 256),
        text_col("PRIVILEGES", 80),
        text_col("COLUMN_COMMENT", 1024),
        text_col("GENERATION_EXPRESSION", 1024),
    ]
}

fn columns(conn: &mut Conn<'_>) -> SqlResult<Rows> {
    let columns = columns_columns();
    let mut rows = Vec::new();
    // (database, name, the table, or a view's columns).
    type Listed = (String, String, Option<Arc<TableInfo>>, Vec<SqlColumn>);
    let mut of: Vec<Listed> = Vec::new();
    for info in all_tables(conn)? {
        of.push((info.db.clone(), info.name.clone(), Some(info), Vec::new()));
    }
    // A view's columns, as DESCRIBE shows them; a view whose query no
    // longer plans (a table dropped) has none here, as in MariaDB (which
    // warns).
    for view in super::views::list(conn, None)? {
        if let Ok(columns) = view_sql_columns(conn, &view) {
            of.push((view.db.clone(), view.name.clone(), None, columns));
        }
    }
    of.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (db, name, info, view) in &of {
        let listed = info.as_ref().map_or(&view[..], |i| &i.columns[..]);
        for (k, c) in listed.iter().enumerate() {
            // A JSON column (MariaDB's LONGTEXT with its `json_valid`
            // check) as MySQL 8's json, as the protocol describes it: no
            // character set, no lengths.
            let json = c.meta.json;
            let collation = collation_name(&c.ty).filter(|_| !json);
            let mut row = vec![
                text(CATALOG),
                text(db.clone()),
                text(name.clone()),
                text(c.name.clone()),
                SqlValue::UInt(k as u64 + 1),
                opt_text(default_literal(c)),
                text(if c.nullable { "YES" } else { "NO" }),
                text(if json {
                    "json".to_owned()
                } else {
                    data_type(c)
                }),
            ];
            let lengths = if json { [None; 5] } else { lengths(c) };
            row.extend(lengths.map(|v| v.map_or(SqlValue::Null, SqlValue::UInt)));
            row.extend([
                opt_text(collation.map(|_| "utf8mb4")),
                opt_text(collation),
                text(if json {
                    "json".to_owned()
                } else {
                    column_type(c)
                }),
                text(info.as_ref().map_or("", |i| column_key(i, c))),
                text(extra(c)),
                text("select,insert,update,references"),
                text(c.comment.clone()),
                text(""),
            ]);
            rows.push(row);
        }
    }
    Ok((columns, rows))
}

fn statistics_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("TABLE_CATALOG", 64),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        int_col("NON_UNIQUE"),
        text_col("INDEX_SCHEMA", 64),
        text_col("INDEX_NAME", 64),
        int_col("SEQ_IN_INDEX"),
        text_col("COLUMN_NAME", 64),
        text_col("COLLATION", 1),
        int_col("CARDINALITY"),
        int_col("SUB_PART"),
        text_col("PACKED", 10),
        text_col("NULLABLE", 3),
        text_col("INDEX_TYPE", 16),
        text_col("COMMENT", 16),
        text_col("INDEX_COMMENT", 1024),
        text_col("IGNORED", 3),
    ]
}

fn statistics(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = statistics_columns();
    let mut rows = Vec::new();
    for info in all_tables(conn)? {
        super::stats::refresh(conn, &info);
        for (name, non_unique, seq, column, nullable, kind, card) in index_rows(&info) {
            rows.push(vec![
                text(CATALOG),
                text(info.db.clone()),
                text(info.name.clone()),
                SqlValue::UInt(u64::from(non_unique)),
                text(info.db.clone()),
                text(name),
                SqlValue::UInt(seq as u64),
                text(column),
                text(if kind == "HASH" { "" } else { "A" }),
                SqlValue::UInt(card),
                SqlValue::Null,
                SqlValue::Null,
                text(if nullable { "YES" } else { "" }),
                text(kind),
                text(""),
                text(""),
                text("NO"),
            ]);
        }
    }
    Ok((columns, rows))
}

fn key_column_usage_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("CONSTRAINT_CATALOG", 64),
        text_col("CONSTRAINT_SCHEMA", 64),
        text_col("CONSTRAINT_NAME", 64),
        text_col("TABLE_CATALOG", 64),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("COLUMN_NAME", 64),
        int_col("ORDINAL_POSITION"),
        int_col("POSITION_IN_UNIQUE_CONSTRAINT"),
        text_col("REFERENCED_TABLE_SCHEMA", 64),
        text_col("REFERENCED_TABLE_NAME", 64),
        text_col("REFERENCED_COLUMN_NAME", 64),
    ]
}

fn key_column_usage(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = key_column_usage_columns();
    let mut rows = Vec::new();
    for info in all_tables(conn)? {
        super::stats::refresh(conn, &info);
        for (name, non_unique, seq, column, _, _, _) in index_rows(&info) {
            if non_unique {
                continue;
            }
            rows.push(vec![
                text(CATALOG),
                text(info.db.clone()),
                text(name),
                text(CATALOG),
                text(info.db.clone()),
                text(info.name.clone()),
                text(column),
                SqlValue::UInt(seq as u64),
                SqlValue::Null,
                SqlValue::Null,
                SqlValue::Null,
                SqlValue::Null,
            ]);
        }
        for fk in &info.sql.foreign_keys {
            for (k, (column, parent)) in fk.columns.iter().zip(&fk.parent_columns).enumerate() {
                rows.push(vec![
                    text(CATALOG),
                    text(info.db.clone()),
                    text(fk.name.clone()),
                    text(CATALOG),
                    text(info.db.clone()),
                    text(info.name.clone()),
                    text(column.clone()),
                    SqlValue::UInt(k as u64 + 1),
                    SqlValue::UInt(k as u64 + 1),
                    text(fk.parent_db.clone()),
                    text(fk.parent_table.clone()),
                    text(parent.clone()),
                ]);
            }
        }
    }
    Ok((columns, rows))
}

/// `information_schema.REFERENTIAL_CONSTRAINTS`'s columns (MariaDB's).
fn referential_constraints_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("CONSTRAINT_CATALOG", 512),
        text_col("CONSTRAINT_SCHEMA", 64),
        text_col("CONSTRAINT_NAME", 64),
        text_col("UNIQUE_CONSTRAINT_CATALOG", 512),
        text_col("UNIQUE_CONSTRAINT_SCHEMA", 64),
        text_col("UNIQUE_CONSTRAINT_NAME", 64),
        text_col("MATCH_OPTION", 64),
        text_col("UPDATE_RULE", 64),
        text_col("DELETE_RULE", 64),
        text_col("TABLE_NAME", 64),
        text_col("REFERENCED_TABLE_NAME", 64),
    ]
}

/// One row per FOREIGN KEY; the parent's key is named when the parent
/// exists (NULL otherwise, as MariaDB's).
fn referential_constraints(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = referential_constraints_columns();
    let mut rows = Vec::new();
    for info in all_tables(conn)? {
        for fk in &info.sql.foreign_keys {
            let key = catalog::table(conn, Some(&fk.parent_db), &fk.parent_table)
                .ok()
                .and_then(|p| {
                    let at = super::foreign::column_positions(&p, &fk.parent_columns)?;
                    super::foreign::parent_key(&p, &at).map(|k| k.name.clone())
                });
            let rule = |a: Option<catalog::meta::FkAction>| {
                text(a.unwrap_or(catalog::meta::FkAction::Restrict).sql())
            };
            rows.push(vec![
                text(CATALOG),
                text(info.db.clone()),
                text(fk.name.clone()),
                text(CATALOG),
                text(fk.parent_db.clone()),
                key.map_or(SqlValue::Null, text),
                text("NONE"),
                rule(fk.on_update),
                rule(fk.on_delete),
                text(info.name.clone()),
                text(fk.parent_table.clone()),
            ]);
        }
    }
    Ok((columns, rows))
}

/// `information_schema.TABLE_CONSTRAINTS`'s columns (MariaDB's).
fn table_constraints_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("CONSTRAINT_CATALOG", 512),
        text_col("CONSTRAINT_SCHEMA", 64),
        text_col("CONSTRAINT_NAME", 64),
        text_col("TABLE_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("CONSTRAINT_TYPE", 64),
    ]
}

/// The PRIMARY KEY, UNIQUE keys, FOREIGN KEYs and CHECKs of each table.
fn table_constraints(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = table_constraints_columns();
    let mut rows = Vec::new();
    for info in all_tables(conn)? {
        let mut row = |name: &str, kind: &str| {
            rows.push(vec![
                text(CATALOG),
                text(info.db.clone()),
                text(name.to_owned()),
                text(info.db.clone()),
                text(info.name.clone()),
                text(kind.to_owned()),
            ])
        };
        for (name, non_unique, seq, ..) in index_rows(&info) {
            if seq == 1 && !non_unique {
                let kind = if name == PRIMARY {
                    "PRIMARY KEY"
                } else {
                    "UNIQUE"
                };
                row(&name, kind);
            }
        }
        for fk in &info.sql.foreign_keys {
            row(&fk.name, "FOREIGN KEY");
        }
        for check in &info.sql.checks {
            row(&check.name, "CHECK");
        }
    }
    Ok((columns, rows))
}

/// `information_schema.CHECK_CONSTRAINTS`'s columns (MariaDB's).
fn check_constraints_columns() -> Vec<ColumnMeta> {
    vec![
        text_col("CONSTRAINT_CATALOG", 512),
        text_col("CONSTRAINT_SCHEMA", 64),
        text_col("TABLE_NAME", 64),
        text_col("CONSTRAINT_NAME", 64),
        text_col("LEVEL", 6),
        text_col("CHECK_CLAUSE", 65_535),
    ]
}

/// One row per CHECK constraint, in the order they are tested (a
/// column's, named after the column, at `Column` level first).
fn check_constraints(conn: &Conn<'_>) -> SqlResult<Rows> {
    let columns = check_constraints_columns();
    let mut rows = Vec::new();
    for info in all_tables(conn)? {
        for check in &info.sql.checks {
            rows.push(vec![
                text(CATALOG),
                text(info.db.clone()),
                text(info.name.clone()),
                text(check.name.clone()),
                text(if check.column.is_some() {
                    "Column"
                } else {
                    "Table"
                }),
                // In parentheses, as MySQL 8 gives it (MariaDB gives it
                // bare): a client that takes Skarv for MySQL 8 takes them
                // off (Rails' ActiveRecord drops the first and last
                // characters, so a bare clause lost them).
                text(format!("({})", ddl::check_clause(&check.expr))),
            ]);
        }
    }
    Ok((columns, rows))
}

/// The fields `SHOW TABLE STATUS` and `information_schema.TABLES` share,
/// from `Engine` to `Comment`: the cluster keeps no row counts or sizes
/// (0), `auto` is the next AUTO_INCREMENT value or NULL.
fn status_fields(info: &TableInfo, auto: SqlValue) -> Vec<SqlValue> {
    let text = |s: String| SqlValue::Bytes(s.into_bytes());
    let mut fields = vec![
        text("ndbcluster".to_owned()),
        SqlValue::UInt(10),
        text("Dynamic".to_owned()),
    ];
    // Rows, Avg_row_length, Data_length (the primary replicas' memory),
    // Max_data_length, Index_length (counted in Data_length), Data_free.
    let rows = info.stats.rows().unwrap_or(0);
    let memory = info.stats.memory_bytes();
    fields.extend([
        SqlValue::UInt(rows),
        SqlValue::UInt(memory.checked_div(rows).unwrap_or(0)),
        SqlValue::UInt(memory),
    ]);
    fields.extend(std::iter::repeat_n(SqlValue::UInt(0), 3));
    fields.push(auto);
    fields.extend(std::iter::repeat_n(SqlValue::Null, 3));
    fields.extend([
        text(info.sql.collation.clone()),
        SqlValue::Null,
        text(create_options(info)),
        text(info.sql.comment.clone()),
    ]);
    fields
}

// ---- SHOW … WHERE ----

/// The `WHERE` condition of a SHOW that takes one (MySQL's grammar:
/// DATABASES, TABLES, COLUMNS, VARIABLES, STATUS, COLLATION, CHARACTER
/// SET; TABLE STATUS and INDEX are recognised from their text).
pub fn show_where(statement: &Statement) -> Option<&sqlparser::ast::Expr> {
    match statement {
        Statement::ShowDatabases { show_options, .. }
        | Statement::ShowSchemas { show_options, .. }
        | Statement::ShowTables { show_options, .. }
        | Statement::ShowColumns { show_options, .. } => where_of_options(show_options),
        Statement::ShowVariables { filter, .. }
        | Statement::ShowStatus { filter, .. }
        | Statement::ShowCollation { filter } => where_of_filter(filter),
        Statement::ShowCharset(show) => where_of_filter(&show.filter),
        _ => None,
    }
}

fn where_of_options(o: &ShowStatementOptions) -> Option<&sqlparser::ast::Expr> {
    match &o.filter_position {
        Some(
            ShowStatementFilterPosition::Suffix(ShowStatementFilter::Where(e))
            | ShowStatementFilterPosition::Infix(ShowStatementFilter::Where(e)),
        ) => Some(e),
        _ => None,
    }
}

fn where_of_filter(f: &Option<ShowStatementFilter>) -> Option<&sqlparser::ast::Expr> {
    match f {
        Some(ShowStatementFilter::Where(e)) => Some(e),
        _ => None,
    }
}

/// Runs a SHOW with its WHERE, if it has one (see [`filtered`]).
pub fn with_where(
    conn: &mut Conn<'_>,
    statement: &Statement,
    sink: &mut dyn ResultSink,
    run: impl FnOnce(&mut Conn<'_>, &mut dyn ResultSink) -> SqlResult<Answered>,
) -> SqlResult<Answered> {
    match show_where(statement) {
        Some(cond) => filtered(conn, cond, sink, run),
        None => run(conn, sink),
    }
}

/// Runs a SHOW through `run` and passes on only the rows `cond` holds for,
/// `cond` read over the SHOW's own column names (as MySQL evaluates
/// `SHOW … WHERE`). `run` must treat the WHERE as no filter.
pub fn filtered(
    conn: &mut Conn<'_>,
    cond: &sqlparser::ast::Expr,
    sink: &mut dyn ResultSink,
    run: impl FnOnce(&mut Conn<'_>, &mut dyn ResultSink) -> SqlResult<Answered>,
) -> SqlResult<Answered> {
    let env = super::exec::env(conn);
    let mut filter = WhereSink {
        inner: sink,
        cond,
        env,
        lowered: None,
        failure: None,
    };
    let answer = run(conn, &mut filter);
    match filter.failure.take() {
        Some(failure) => Err(failure),
        None => answer,
    }
}

/// A sink that lowers the WHERE once the columns are known and keeps the
/// rows it holds for; what fails is kept for [`filtered`] to return.
struct WhereSink<'a> {
    inner: &'a mut dyn ResultSink,
    cond: &'a sqlparser::ast::Expr,
    env: super::expr::Env,
    lowered: Option<super::expr::Expr>,
    failure: Option<SqlError>,
}

impl WhereSink<'_> {
    fn fail(&mut self, error: SqlError) -> io::Error {
        let message = error.message.clone();
        self.failure = Some(error);
        io::Error::other(message)
    }
}

impl ResultSink for WhereSink<'_> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()> {
        use super::expr::{Kind, Scope, ScopeColumn, Val};
        let scope_columns = columns
            .iter()
            .map(|m| ScopeColumn {
                default: None,
                members: None,
                name: m.name.clone(),
                table: Arc::default(),
                kind: match m.ty {
                    ColumnType::Tiny
                    | ColumnType::Short
                    | ColumnType::Long
                    | ColumnType::Int24
                    | ColumnType::LongLong => Kind::Int {
                        unsigned: m.flags & flags::UNSIGNED != 0,
                    },
                    _ => Kind::Str {
                        collation: Some(schema::Collation::Utf8mb4GeneralCi),
                    },
                },
                nullable: true,
                meta: m.clone(),
            })
            .collect();
        let var = |_: &str, _: bool| -> SqlResult<Val> {
            Err(SqlError::unsupported("system variables in SHOW … WHERE"))
        };
        let user_var = |_: &str| Val::Null;
        let mut scope = Scope::new(scope_columns, &[], &var, &user_var);
        scope.clause = "WHERE";
        match scope.lower(self.cond) {
            Ok(lowered) => self.lowered = Some(lowered),
            Err(e) => return Err(self.fail(e)),
        }
        self.inner.columns(columns)
    }

    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        let row: Vec<super::expr::Val> =
            values.iter().map(super::exec::convert::from_sql).collect();
        let Some(cond) = &self.lowered else {
            return self.inner.row(values);
        };
        let mut ctx = super::expr::Ctx::new(&[], &self.env);
        match cond.test(&row, &mut ctx) {
            Ok(true) => self.inner.row(values),
            Ok(false) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()> {
        self.inner.end_rows(info)
    }

    fn ok(&mut self, info: &OkInfo) -> io::Result<()> {
        self.inner.ok(info)
    }

    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.inner.error(error)
    }
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_matches_as_mysql() {
        assert!(like("t%", "t1", false));
        assert!(like("t_", "t1", false));
        assert!(!like("t_", "t12", false));
        assert!(like("a\\_b", "a_b", false));
        assert!(!like("a\\_b", "axb", false));
        assert!(!like("T%", "t1", false));
        assert!(like("T%", "t1", true));
        assert!(like("%", "", false));
    }
}
