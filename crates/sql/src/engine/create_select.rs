//! `CREATE TABLE t [(declarations)] [IGNORE | REPLACE] [AS] SELECT …`: a
//! table made of the query's result columns, filled with its rows.
//!
//! As MariaDB makes it: the declared columns first, then each result
//! column no declared one names, in the query's order. A result column
//! that is a table's column as it is (same type and length) copies that
//! column's declaration (type, collation, default, ON UPDATE, comment;
//! not AUTO_INCREMENT, keys or CHECKs), NULL-able where the query makes it
//! so (the inner side of an outer join); any other takes its type from the
//! result's metadata (`Scope::meta`: MariaDB's lengths, so `i + 1` is a
//! BIGINT(12), `CONCAT(s, 'x')` of a VARCHAR(20) a VARCHAR(21), text past
//! 512 characters a TEXT). The rows then go in as `INSERT [IGNORE] |
//! REPLACE INTO t (columns) SELECT …` would put them, in one transaction;
//! when that fails the table is dropped again, so the statement leaves
//! either the whole table or none (MariaDB's CREATE … SELECT is atomic
//! too). Another session may see the empty table for that moment, and
//! could write to it: the table is not locked as MariaDB's is.

use sqlparser::ast::{CreateTable, Query, Statement};

use super::catalog::{self, SqlColumn};
use super::ddl::Duplicates;
use super::show::quote_ident;
use super::{Answered, Conn};
use crate::error::{SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta, ColumnType, NOT_FIXED_DECIMALS};

/// Most characters of a text result made a VARCHAR; a longer one is a
/// TEXT of its bytes (MariaDB's `CONVERT_IF_BIGGER_TO_BLOB`).
const VARCHAR_CHARS_MAX: u32 = 512;
/// Bytes a TEXT (BLOB) holds; past it a MEDIUMTEXT, then a LONGTEXT.
const TEXT_BYTES_MAX: u32 = 65_535;
const MEDIUMTEXT_BYTES_MAX: u32 = 16_777_215;
/// MariaDB's widest integer display width.
const INT_WIDTH_MAX: u32 = 255;
/// A DECIMAL's most digits, most of them after the point.
const DECIMAL_PRECISION_MAX: u32 = 65;
const DECIMAL_SCALE_MAX: u32 = 30;
/// Most BIT bits.
const BIT_BITS_MAX: u32 = 64;

/// Runs the statement: `create` with its query, the table not there yet
/// (`ddl::create_table` answered IF NOT EXISTS before this).
pub(super) fn run(
    conn: &mut Conn<'_>,
    create: &CreateTable,
    query: &Query,
    (db, name): (&str, &str),
    partition_key: &[String],
    partitions: Option<u32>,
    duplicates: Duplicates,
) -> SqlResult<Answered> {
    // MariaDB commits what is open before a CREATE … SELECT (the
    // statement's dispatch did: its implicit commit), and the rows it
    // writes commit with it; a temporary table's are the open
    // transaction's, as any INSERT's.
    let temporary = create.temporary;
    debug_assert!(
        temporary || conn.tx.tx.is_none(),
        "a schema statement starts with nothing open"
    );
    let described = super::exec::describe_for_create(conn, query)?;
    let mut declared = Vec::with_capacity(described.len());
    for (meta, width) in &described {
        let named = create
            .columns
            .iter()
            .any(|c| c.name.value.eq_ignore_ascii_case(&meta.name));
        if !named {
            declared.push(column_of(conn, meta, *width)?);
        }
    }
    let metas: Vec<&ColumnMeta> = described.iter().map(|(m, _)| m).collect();
    let mut table = create.clone();
    table.query = None;
    if !declared.is_empty() {
        let text = format!("CREATE TABLE t ({})", declared.join(", "));
        match super::parse(&text)?.pop() {
            Some(Statement::CreateTable(made)) => table.columns.extend(made.columns),
            _ => return Err(SqlError::syntax(format_args!("near '{text}'"))),
        }
    }
    super::ddl::create_table(conn, &table, partition_key, partitions, Duplicates::Error)?;
    let columns: Vec<String> = metas.iter().map(|m| quote_ident(&m.name)).collect();
    let text = format!(
        "INSERT INTO {}.{} ({}) SELECT 1",
        quote_ident(db),
        quote_ident(name),
        columns.join(", ")
    );
    let mut statement = super::parse(&text)?
        .pop()
        .ok_or_else(|| SqlError::syntax(format_args!("near '{text}'")))?;
    if let Statement::Insert(insert) = &mut statement {
        insert.source = Some(Box::new(query.clone()));
        insert.ignore = duplicates == Duplicates::Ignore;
        insert.replace_into = duplicates == Duplicates::Replace;
    }
    let filled = super::exec::write(conn, &statement, &[]).and_then(|a| {
        if !temporary {
            super::txn::commit(conn)?;
        }
        Ok(a)
    });
    match filled {
        Ok(answered) => Ok(answered),
        Err(e) => {
            if !temporary {
                super::txn::rollback(conn);
            }
            // The error is the statement's; a table that will not drop
            // now is left as it is (DROP TABLE removes it).
            let _ = super::ddl::drop_one(conn, db, name);
            Err(e)
        }
    }
}

/// The declaration of a result column: a table column's copied, or one
/// made of its metadata (an integer of `width` where that is known).
fn column_of(conn: &Conn<'_>, meta: &ColumnMeta, width: Option<u32>) -> SqlResult<String> {
    let nullable = meta.flags & flags::NOT_NULL == 0;
    if let Some(column) = source_column(conn, meta) {
        let mut column = column;
        column.name = meta.name.to_string();
        if column.auto_increment {
            // MariaDB's copy: the counter is not, its default 0.
            column.auto_increment = false;
            if column.default.is_none() {
                column.default = Some("0".to_owned());
            }
        }
        column.nullable |= nullable;
        // The collation always written: the new table's default may be
        // another.
        return Ok(super::show::column_definition(&column, ""));
    }
    let mut sized = meta.clone();
    if let Some(width) = width {
        sized.length = width;
    }
    let mut text = format!("{} {}", quote_ident(&meta.name), type_of(&sized)?);
    if !nullable {
        text.push_str(" NOT NULL");
    } else if meta.ty == ColumnType::Timestamp {
        text.push_str(" NULL");
    }
    Ok(text)
}

/// The table column a result column is, when its values are that
/// column's as declared (a UNION's or a CASE's may be wider).
pub(super) fn source_column(conn: &Conn<'_>, meta: &ColumnMeta) -> Option<SqlColumn> {
    if meta.org_table.is_empty() || meta.org_name.is_empty() {
        return None;
    }
    let db = (!meta.schema.is_empty()).then_some(&*meta.schema);
    let info = catalog::table(conn, db, &meta.org_table).ok()?;
    let column = info
        .columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(&meta.org_name))?;
    let same = column.meta.ty == meta.ty
        && column.meta.length == meta.length
        && column.meta.decimals == meta.decimals
        && column.meta.charset == meta.charset;
    same.then(|| column.clone())
}

/// The SQL type of a computed result column, from its metadata.
pub(super) fn type_of(meta: &ColumnMeta) -> SqlResult<String> {
    let unsigned = meta.flags & flags::UNSIGNED != 0;
    let sign = if unsigned { " unsigned" } else { "" };
    let width = meta.length.clamp(1, INT_WIDTH_MAX);
    let fsp = |name: &str| match meta.decimals {
        0 => name.to_owned(),
        d => format!("{name}({})", d.min(6)),
    };
    Ok(match meta.ty {
        ColumnType::Tiny => format!("tinyint({width}){sign}"),
        ColumnType::Short => format!("smallint({width}){sign}"),
        ColumnType::Int24 => format!("mediumint({width}){sign}"),
        ColumnType::Long => format!("int({width}){sign}"),
        ColumnType::LongLong => format!("bigint({width}){sign}"),
        ColumnType::Decimal | ColumnType::NewDecimal => {
            let scale = u32::from(meta.decimals).min(DECIMAL_SCALE_MAX);
            let point = u32::from(scale > 0);
            let precision = meta
                .length
                .saturating_sub(point + u32::from(!unsigned))
                .clamp(scale.max(1), DECIMAL_PRECISION_MAX);
            format!("decimal({precision},{scale}){sign}")
        }
        // Of fixed decimals: DOUBLE(M,D), as MariaDB's field for it.
        ColumnType::Float | ColumnType::Double if meta.decimals < NOT_FIXED_DECIMALS => {
            let name = if meta.ty == ColumnType::Float {
                "float"
            } else {
                "double"
            };
            let m = meta
                .length
                .clamp(u32::from(meta.decimals).max(1), DECIMAL_PRECISION_MAX);
            format!("{name}({m},{}){sign}", meta.decimals)
        }
        ColumnType::Float => format!("float{sign}"),
        ColumnType::Double => format!("double{sign}"),
        // MariaDB's column for a NULL: no bytes.
        ColumnType::Null => "binary(0)".to_owned(),
        ColumnType::Date => "date".to_owned(),
        ColumnType::DateTime => fsp("datetime"),
        ColumnType::Time => fsp("time"),
        ColumnType::Timestamp => fsp("timestamp"),
        ColumnType::Year => "year".to_owned(),
        ColumnType::Bit => format!("bit({})", meta.length.clamp(1, BIT_BITS_MAX)),
        ColumnType::VarChar
        | ColumnType::VarString
        | ColumnType::String
        | ColumnType::Enum
        | ColumnType::Set
        | ColumnType::Json
        | ColumnType::TinyBlob
        | ColumnType::Blob
        | ColumnType::MediumBlob
        | ColumnType::LongBlob => text_type(meta),
        ColumnType::Geometry => {
            return Err(SqlError::unsupported(format_args!(
                "a spatial column `{}` in CREATE TABLE … SELECT",
                meta.name
            )))
        }
    })
}

/// A text result's type: a VARCHAR (VARBINARY) up to 512 characters, else
/// the TEXT (BLOB) that holds its bytes, under the result's collation.
fn text_type(meta: &ColumnMeta) -> String {
    let bytes = meta.length;
    if meta.charset == charset::BINARY {
        return match bytes {
            b if b <= VARCHAR_CHARS_MAX => format!("varbinary({b})"),
            b if b <= TEXT_BYTES_MAX => "blob".to_owned(),
            b if b <= MEDIUMTEXT_BYTES_MAX => "mediumblob".to_owned(),
            _ => "longblob".to_owned(),
        };
    }
    let chars = bytes.div_ceil(super::expr::UTF8MB4_BYTES_PER_CHAR);
    let ty = match chars {
        // MariaDB's column of '' (a VARCHAR of no characters is no type).
        0 => "char(0)".to_owned(),
        c if c <= VARCHAR_CHARS_MAX => format!("varchar({c})"),
        _ if bytes <= TEXT_BYTES_MAX => "text".to_owned(),
        _ if bytes <= MEDIUMTEXT_BYTES_MAX => "mediumtext".to_owned(),
        _ => "longtext".to_owned(),
    };
    let collation = if meta.charset == charset::UTF8MB4_BIN {
        "utf8mb4_bin"
    } else {
        "utf8mb4_general_ci"
    };
    format!("{ty} CHARACTER SET utf8mb4 COLLATE {collation}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ty: ColumnType, charset: u16, length: u32, decimals: u8, flags: u16) -> ColumnMeta {
        let mut m = ColumnMeta::expr("x", ty, charset, length);
        m.decimals = decimals;
        m.flags = flags;
        m
    }

    /// The types MariaDB 10.11 makes of these results (SHOW CREATE TABLE
    /// after CREATE TABLE … SELECT), from the metadata it sends for them.
    #[test]
    fn types_as_mariadb() {
        let num = flags::BINARY | flags::NUM;
        for (m, want) in [
            // i + 1 of an INT: BIGINT of 12.
            (meta(ColumnType::LongLong, 63, 12, 0, num), "bigint(12)"),
            // 1: INT(1).
            (meta(ColumnType::Long, 63, 1, 0, num), "int(1)"),
            // d / 3 of a DECIMAL(10,2): 16 long, 6 decimals.
            (
                meta(ColumnType::NewDecimal, 63, 16, 6, num),
                "decimal(14,6)",
            ),
            // SUM(i) of an INT: 33 long.
            (
                meta(ColumnType::NewDecimal, 63, 33, 0, num),
                "decimal(32,0)",
            ),
            (meta(ColumnType::Double, 63, 22, 31, num), "double"),
            // SUM(TRUNCATE(text, 1)): fixed decimals.
            (meta(ColumnType::Double, 63, 18, 1, num), "double(18,1)"),
            (meta(ColumnType::Null, 63, 0, 0, flags::BINARY), "binary(0)"),
            (
                meta(ColumnType::DateTime, 63, 19, 0, flags::BINARY),
                "datetime",
            ),
            (meta(ColumnType::Time, 63, 12, 1, flags::BINARY), "time(1)"),
            // CONCAT(s, 'x') of a VARCHAR(20): 84 bytes.
            (
                meta(ColumnType::VarString, 45, 84, 31, 0),
                "varchar(21) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            ),
            (
                meta(ColumnType::VarString, 46, 8, 31, 0),
                "varchar(2) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            ),
            // GROUP_CONCAT: a MEDIUMTEXT.
            (
                meta(ColumnType::Blob, 45, 4_194_304, 0, 0),
                "mediumtext CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            ),
            (
                meta(ColumnType::VarString, 45, 2_052, 31, 0),
                "text CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            ),
            (
                meta(ColumnType::VarString, 63, 40, 0, flags::BINARY),
                "varbinary(40)",
            ),
        ] {
            assert_eq!(type_of(&m).expect("a type"), want, "{m:?}");
        }
        let geometry = meta(ColumnType::Geometry, 63, 0, 0, 0);
        assert!(type_of(&geometry).is_err());
    }

    #[test]
    fn varchar_up_to_512_characters() {
        let at = |chars: u32| text_type(&meta(ColumnType::VarString, 45, chars * 4, 31, 0));
        assert!(at(512).starts_with("varchar(512)"));
        assert!(at(513).starts_with("text"));
        assert!(at(16_384).starts_with("mediumtext"));
        assert!(at(4_194_304).starts_with("longtext"));
    }
}
