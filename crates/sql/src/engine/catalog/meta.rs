//! The SQL node's metadata of a table, kept in the table definition
//! (`schema::TableDef::sql_meta`, opaque to the data nodes) so that it
//! changes atomically with the table, as NDB keeps MySQL's `.frm`.
//!
//! Layout (little-endian; `str` is a `u16` byte length and UTF-8 bytes):
//!
//! ```text
//! "SQ"            magic
//! u8              format version (SQL_META_FORMAT_VERSION = 1)
//! str engine, str comment, str charset, str collation   (as declared)
//! u64             AUTO_INCREMENT start (the table option; 1 by default)
//! u16             column count, then per column:
//!     u16         position in the native table
//!     type        u8 tag and parameters (below)
//!     u8          flags: 1 AUTO_INCREMENT, 2 ZEROFILL, 4 DEFAULT
//!                 CURRENT_TIMESTAMP, 8 ON UPDATE CURRENT_TIMESTAMP,
//!                 16 has a default (the str follows), 32 has a display width
//!     [u16]       the display width (flag 32)
//!     [str]       the default as SQL shows it, unquoted (flag 16)
//!     str         comment
//! [copy lock]     format version 2: u32 owner SQL node id, u64 start
//!                 (Unix ms), str the table's name when it was locked;
//!                 version 3: u8 present (0 or 1), then the same
//! [checks]        format version 3 and later: u16 count, then per CHECK
//!                 constraint: str name, str column (empty for one of the
//!                 table), str expression (SQL text)
//! ```
//!
//! A table without a copy lock or CHECK constraints is written as version
//! 1, one with a copy lock and no checks as version 2, one with checks as
//! version 3, so that a SQL node that reads only older versions still
//! reads every table that needs nothing newer. Version 4 is version 3's
//! layout with the type tags 23 and 24 allowed; it is written only for a
//! table with a FLOAT(M,D) or DOUBLE(M,D) column, which an older build
//! would show without its (M,D) and store unrounded. Version 5 is version
//! 4's with the tag 25 allowed; it is written only for a table with an
//! UNSIGNED FLOAT, DOUBLE or DECIMAL column, which an older build would
//! let take a negative value. Version 6 is version 5's followed by the
//! table's FOREIGN KEYs and the tables that reference it; it is written
//! only for a table with either, which an older build would write to
//! without the checks:
//!
//! ```text
//! [foreign keys]  u16 count, then per FOREIGN KEY: str name, u8 column
//!                 count n, n × str column, str parent database, str
//!                 parent table, n × str parent column, u8 ON DELETE,
//!                 u8 ON UPDATE (0 RESTRICT, 1 CASCADE, 2 SET NULL,
//!                 3 NO ACTION)
//! [referenced by] u16 count, then per table that may reference this
//!                 one: str database, str table
//! ```
//!
//! Type tags: 1 TINYINT … 5 BIGINT (`u8` unsigned), 6 FLOAT, 7 DOUBLE,
//! 8 DECIMAL (`u8` precision, `u8` scale), 9 CHAR and 10 VARCHAR (`u16`
//! length, `u8` collation: 1 utf8mb4_bin, 2 utf8mb4_general_ci), 11 BINARY
//! and 12 VARBINARY (`u16`), 13 TEXT (`u8` size 0–3: tiny…long, `u8`
//! collation), 14 BLOB (`u8` size), 15 DATE, 16 TIME, 17 DATETIME and
//! 18 TIMESTAMP (`u8` fsp), 19 YEAR, 20 BIT (`u8` bits), 21 ENUM and 22 SET
//! (`u16` n, n × str), 23 FLOAT(M,D) and 24 DOUBLE(M,D) (`u8` M, `u8` D;
//! version 4 and later), 25 UNSIGNED: the tag of a FLOAT, DOUBLE or
//! DECIMAL (6, 7, 8, 23, 24) follows, and the type is UNSIGNED (version 5
//! and later).
//!
//! [`TableMeta::decode`] reads bytes from the cluster: it checks every
//! length, refuses unknown tags, flags and versions, and never panics.

use schema::Collation;

use super::{BlobSize, FixedDigits, SqlType};

/// The newest format version [`TableMeta::encode`] writes and reads.
pub const SQL_META_FORMAT_VERSION: u8 = 6;
/// The version a table without FOREIGN KEYs or tables referencing it, but
/// with an UNSIGNED FLOAT, DOUBLE or DECIMAL, is written with.
const SQL_META_FORMAT_VERSION_UNSIGNED: u8 = 5;
/// The version a table with a FLOAT(M,D) or DOUBLE(M,D) and no UNSIGNED
/// FLOAT, DOUBLE or DECIMAL is written with.
const SQL_META_FORMAT_VERSION_FIXED: u8 = 4;
/// The version a table with CHECK constraints and no FLOAT(M,D) or
/// DOUBLE(M,D) is written with.
const SQL_META_FORMAT_VERSION_CHECKS: u8 = 3;
/// The version a table with a copy lock and no CHECK is written with.
const SQL_META_FORMAT_VERSION_COPY: u8 = 2;
/// The version a table without a copy lock is written with.
const SQL_META_FORMAT_VERSION_PLAIN: u8 = 1;
const SQL_META_MAGIC: [u8; 2] = *b"SQ";
/// The tag before an UNSIGNED FLOAT, DOUBLE or DECIMAL's (version 5).
const UNSIGNED_TAG: u8 = 25;

const FLAG_AUTO_INCREMENT: u8 = 1;
const FLAG_ZEROFILL: u8 = 2;
const FLAG_DEFAULT_NOW: u8 = 4;
const FLAG_ON_UPDATE_NOW: u8 = 8;
const FLAG_DEFAULT: u8 = 16;
const FLAG_WIDTH: u8 = 32;
/// The default is an expression (`default` its text), evaluated by the
/// SQL node at each insert.
const FLAG_DEFAULT_EXPR: u8 = 64;
const FLAGS_KNOWN: u8 = 127;

/// What SQL declared of a table beyond its storage definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// The engine as declared (`ndbcluster`, `InnoDB`, …).
    pub engine: String,
    /// `COMMENT='…'`.
    pub comment: String,
    /// The table's default character set (`utf8mb4`).
    pub charset: String,
    /// The table's default collation.
    pub collation: String,
    /// `AUTO_INCREMENT=n`: the first value of the sequence.
    pub auto_increment_start: u64,
    /// Per visible column.
    pub columns: Vec<ColumnMeta>,
    /// Set while a copying ALTER TABLE runs on the table
    /// (`engine::alter_copy`): writers wait until it is gone.
    pub copy: Option<CopyLock>,
    /// CHECK constraints, column ones first (in column order), then the
    /// table's, as MariaDB tests them.
    pub checks: Vec<CheckMeta>,
    /// FOREIGN KEY constraints of this table (the child), as declared.
    pub foreign_keys: Vec<ForeignKeyMeta>,
    /// Tables (database, name) whose FOREIGN KEYs may name this one as
    /// their parent: where a write of this table looks for its children.
    /// A name may be stale (the table dropped, or its key dropped): the
    /// child's own FOREIGN KEYs are what counts, this list only says
    /// where to look. Kept sorted, each once.
    pub referenced_by: Vec<(String, String)>,
}

/// What a FOREIGN KEY does to the child rows of a parent row deleted or
/// whose referenced columns change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FkAction {
    /// Refuse the parent's change (1451); also the default.
    Restrict,
    /// Delete the child rows, or give them the parent's new values.
    Cascade,
    /// Set the child rows' columns to NULL.
    SetNull,
    /// As RESTRICT (checks are not deferred), shown as written.
    NoAction,
}

impl FkAction {
    fn code(self) -> u8 {
        match self {
            FkAction::Restrict => 0,
            FkAction::Cascade => 1,
            FkAction::SetNull => 2,
            FkAction::NoAction => 3,
        }
    }

    fn of_code(code: u8) -> Option<FkAction> {
        Some(match code {
            0 => FkAction::Restrict,
            1 => FkAction::Cascade,
            2 => FkAction::SetNull,
            3 => FkAction::NoAction,
            _ => return None,
        })
    }

    /// As SQL writes it (`SET NULL`).
    pub fn sql(self) -> &'static str {
        match self {
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
            FkAction::SetNull => "SET NULL",
            FkAction::NoAction => "NO ACTION",
        }
    }
}

/// A FOREIGN KEY constraint as declared on its child table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKeyMeta {
    /// The constraint's name (`t_ibfk_1` when none was given).
    pub name: String,
    /// The child's columns, in the key's order.
    pub columns: Vec<String>,
    /// The parent table's database and name (it may not exist: created
    /// with `foreign_key_checks=0`).
    pub parent_db: String,
    pub parent_table: String,
    /// The parent's columns, one per child column: its primary key or a
    /// UNIQUE key (NDB's rule).
    pub parent_columns: Vec<String>,
    pub on_delete: Option<FkAction>,
    pub on_update: Option<FkAction>,
}

/// A CHECK constraint as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckMeta {
    /// Its name: the column's for a column constraint (MariaDB's error
    /// calls it `table.column`), `CONSTRAINT_<n>` when the table's is
    /// unnamed.
    pub name: String,
    /// The column it was declared on (None: the table's).
    pub column: Option<String>,
    /// The condition, as SQL text.
    pub expr: String,
}

/// Who is copying a table (a copying ALTER TABLE) and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyLock {
    /// The SQL node (API node id) running the copy.
    pub owner: u32,
    /// When the copy began, Unix milliseconds.
    pub started_ms: u64,
    /// The table's cluster name when the copy began (the copy renames it
    /// away before it drops it).
    pub from: String,
}

/// What SQL declared of one column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Its position in the native table.
    pub native: u16,
    /// Its declared type.
    pub ty: SqlType,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
    /// ZEROFILL (kept for SHOW CREATE TABLE; values are not padded).
    pub zerofill: bool,
    /// `DEFAULT CURRENT_TIMESTAMP`.
    pub default_now: bool,
    /// `default` is an expression's text, as MariaDB shows it (`(1 + 1)`,
    /// `uuid()`, a TEXT column's `'xy'`): evaluated at each insert.
    pub default_expr: bool,
    /// `ON UPDATE CURRENT_TIMESTAMP`.
    pub on_update_now: bool,
    /// The declared display width of an integer (`INT(11)`).
    pub width: Option<u16>,
    /// The default as SQL shows it, unquoted (`None`: none, or NULL).
    pub default: Option<String>,
    /// `COMMENT '…'`.
    pub comment: String,
}

impl Default for TableMeta {
    fn default() -> TableMeta {
        TableMeta {
            engine: "ndbcluster".to_owned(),
            comment: String::new(),
            charset: "utf8mb4".to_owned(),
            collation: "utf8mb4_general_ci".to_owned(),
            auto_increment_start: 1,
            columns: Vec::new(),
            copy: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            referenced_by: Vec::new(),
        }
    }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Strings longer than the format's `u16` are cut at a character boundary
/// (only comments can be; MySQL's own limit is 2,048 characters).
fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_u16(out, end as u16);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

fn collation_tag(c: Collation) -> u8 {
    match c {
        Collation::Utf8mb4Bin => 1,
        Collation::Utf8mb4GeneralCi => 2,
    }
}

fn size_tag(s: BlobSize) -> u8 {
    match s {
        BlobSize::Tiny => 0,
        BlobSize::Normal => 1,
        BlobSize::Medium => 2,
        BlobSize::Long => 3,
    }
}

fn put_members(out: &mut Vec<u8>, members: &[String]) {
    put_u16(out, u16::try_from(members.len()).unwrap_or(u16::MAX));
    for m in members.iter().take(usize::from(u16::MAX)) {
        put_str(out, m);
    }
}

/// Tag 25 before an UNSIGNED FLOAT, DOUBLE or DECIMAL's own tag.
fn put_unsigned(out: &mut Vec<u8>, unsigned: bool) {
    if unsigned {
        out.push(UNSIGNED_TAG);
    }
}

fn put_type(out: &mut Vec<u8>, ty: &SqlType) {
    match ty {
        SqlType::TinyInt { unsigned } => out.extend_from_slice(&[1, u8::from(*unsigned)]),
        SqlType::SmallInt { unsigned } => out.extend_from_slice(&[2, u8::from(*unsigned)]),
        SqlType::MediumInt { unsigned } => out.extend_from_slice(&[3, u8::from(*unsigned)]),
        SqlType::Int { unsigned } => out.extend_from_slice(&[4, u8::from(*unsigned)]),
        SqlType::BigInt { unsigned } => out.extend_from_slice(&[5, u8::from(*unsigned)]),
        SqlType::Float { digits, unsigned } => {
            put_unsigned(out, *unsigned);
            match digits {
                None => out.push(6),
                Some(f) => out.extend_from_slice(&[23, f.m, f.d]),
            }
        }
        SqlType::Double { digits, unsigned } => {
            put_unsigned(out, *unsigned);
            match digits {
                None => out.push(7),
                Some(f) => out.extend_from_slice(&[24, f.m, f.d]),
            }
        }
        SqlType::Decimal {
            precision,
            scale,
            unsigned,
        } => {
            put_unsigned(out, *unsigned);
            out.extend_from_slice(&[8, *precision, *scale]);
        }
        SqlType::Char { length, collation } => {
            out.push(9);
            put_u16(out, *length);
            out.push(collation_tag(*collation));
        }
        SqlType::VarChar { max, collation } => {
            out.push(10);
            put_u16(out, *max);
            out.push(collation_tag(*collation));
        }
        SqlType::Binary { length } => {
            out.push(11);
            put_u16(out, *length);
        }
        SqlType::VarBinary { max } => {
            out.push(12);
            put_u16(out, *max);
        }
        SqlType::Text { size, collation } => {
            out.extend_from_slice(&[13, size_tag(*size), collation_tag(*collation)])
        }
        SqlType::Blob { size } => out.extend_from_slice(&[14, size_tag(*size)]),
        SqlType::Date => out.push(15),
        SqlType::Time { fsp } => out.extend_from_slice(&[16, *fsp]),
        SqlType::DateTime { fsp } => out.extend_from_slice(&[17, *fsp]),
        SqlType::Timestamp { fsp } => out.extend_from_slice(&[18, *fsp]),
        SqlType::Year => out.push(19),
        SqlType::Bit { bits } => out.extend_from_slice(&[20, *bits]),
        SqlType::Enum(members) => {
            out.push(21);
            put_members(out, members);
        }
        SqlType::Set(members) => {
            out.push(22);
            put_members(out, members);
        }
    }
}

impl TableMeta {
    /// The encoding (see the module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.columns.len() * 16);
        out.extend_from_slice(&SQL_META_MAGIC);
        let fixed = self.columns.iter().any(|c| {
            matches!(
                c.ty,
                SqlType::Float {
                    digits: Some(_),
                    ..
                } | SqlType::Double {
                    digits: Some(_),
                    ..
                }
            )
        });
        let unsigned = self.columns.iter().any(|c| {
            matches!(
                c.ty,
                SqlType::Float { unsigned: true, .. }
                    | SqlType::Double { unsigned: true, .. }
                    | SqlType::Decimal { unsigned: true, .. }
            )
        });
        let version = if !self.foreign_keys.is_empty() || !self.referenced_by.is_empty() {
            SQL_META_FORMAT_VERSION
        } else if unsigned {
            SQL_META_FORMAT_VERSION_UNSIGNED
        } else if fixed {
            SQL_META_FORMAT_VERSION_FIXED
        } else if !self.checks.is_empty() {
            SQL_META_FORMAT_VERSION_CHECKS
        } else if self.copy.is_some() {
            SQL_META_FORMAT_VERSION_COPY
        } else {
            SQL_META_FORMAT_VERSION_PLAIN
        };
        out.push(version);
        put_str(&mut out, &self.engine);
        put_str(&mut out, &self.comment);
        put_str(&mut out, &self.charset);
        put_str(&mut out, &self.collation);
        out.extend_from_slice(&self.auto_increment_start.to_le_bytes());
        put_u16(
            &mut out,
            u16::try_from(self.columns.len()).unwrap_or(u16::MAX),
        );
        for c in self.columns.iter().take(usize::from(u16::MAX)) {
            put_u16(&mut out, c.native);
            put_type(&mut out, &c.ty);
            let mut flags = 0;
            for (on, flag) in [
                (c.auto_increment, FLAG_AUTO_INCREMENT),
                (c.zerofill, FLAG_ZEROFILL),
                (c.default_now, FLAG_DEFAULT_NOW),
                (c.on_update_now, FLAG_ON_UPDATE_NOW),
                (c.default.is_some(), FLAG_DEFAULT),
                (c.width.is_some(), FLAG_WIDTH),
                (c.default_expr, FLAG_DEFAULT_EXPR),
            ] {
                if on {
                    flags |= flag;
                }
            }
            out.push(flags);
            if let Some(width) = c.width {
                put_u16(&mut out, width);
            }
            if let Some(default) = &c.default {
                put_str(&mut out, default);
            }
            put_str(&mut out, &c.comment);
        }
        if version >= SQL_META_FORMAT_VERSION_CHECKS {
            out.push(u8::from(self.copy.is_some()));
        }
        if let Some(lock) = &self.copy {
            out.extend_from_slice(&lock.owner.to_le_bytes());
            out.extend_from_slice(&lock.started_ms.to_le_bytes());
            put_str(&mut out, &lock.from);
        }
        if version >= SQL_META_FORMAT_VERSION_CHECKS {
            put_u16(
                &mut out,
                u16::try_from(self.checks.len()).unwrap_or(u16::MAX),
            );
            for c in self.checks.iter().take(usize::from(u16::MAX)) {
                put_str(&mut out, &c.name);
                put_str(&mut out, c.column.as_deref().unwrap_or(""));
                put_str(&mut out, &c.expr);
            }
        }
        if version >= SQL_META_FORMAT_VERSION {
            let count = self.foreign_keys.len().min(usize::from(u16::MAX));
            put_u16(&mut out, count as u16);
            for fk in &self.foreign_keys[..count] {
                put_str(&mut out, &fk.name);
                // The DDL allows at most `FK_COLUMNS_MAX` (16) columns, as
                // many on each side.
                debug_assert!(
                    fk.columns.len() == fk.parent_columns.len() && fk.columns.len() <= 255,
                    "FOREIGN KEY '{}': {} columns against {}",
                    fk.name,
                    fk.columns.len(),
                    fk.parent_columns.len()
                );
                let n = fk.columns.len().min(fk.parent_columns.len()).min(255);
                out.push(n as u8);
                for c in &fk.columns[..n] {
                    put_str(&mut out, c);
                }
                put_str(&mut out, &fk.parent_db);
                put_str(&mut out, &fk.parent_table);
                for c in &fk.parent_columns[..n] {
                    put_str(&mut out, c);
                }
                // 255: not written (RESTRICT, shown without a clause).
                out.push(fk.on_delete.map_or(255, FkAction::code));
                out.push(fk.on_update.map_or(255, FkAction::code));
            }
            let count = self.referenced_by.len().min(usize::from(u16::MAX));
            put_u16(&mut out, count as u16);
            for (db, table) in &self.referenced_by[..count] {
                put_str(&mut out, db);
                put_str(&mut out, table);
            }
        }
        out
    }

    /// Reads [`TableMeta::encode`]'s bytes; `Err` names what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<TableMeta, String> {
        let mut r = Reader {
            bytes,
            at: 0,
            version: 0,
        };
        let magic = r.take(2, "magic")?;
        if magic != SQL_META_MAGIC {
            return Err("SQL metadata: bad magic".to_owned());
        }
        let version = r.u8("version")?;
        r.version = version;
        if version == 0 || version > SQL_META_FORMAT_VERSION {
            return Err(format!(
                "SQL metadata: format version {version} (this build reads up to \
                 {SQL_META_FORMAT_VERSION})"
            ));
        }
        let engine = r.str("engine")?;
        let comment = r.str("comment")?;
        let charset = r.str("charset")?;
        let collation = r.str("collation")?;
        let auto_increment_start = r.u64("auto_increment")?;
        let count = usize::from(r.u16("column count")?);
        // Every column takes at least 6 bytes: refuse a lying count first.
        if count * 6 > r.remaining() {
            return Err("SQL metadata: column count past the end".to_owned());
        }
        let mut columns = Vec::with_capacity(count);
        for _ in 0..count {
            let native = r.u16("column position")?;
            let ty = r.sql_type()?;
            let flags = r.u8("column flags")?;
            if flags & !FLAGS_KNOWN != 0 {
                return Err(format!("SQL metadata: unknown column flags {flags:#x}"));
            }
            let width = if flags & FLAG_WIDTH != 0 {
                Some(r.u16("width")?)
            } else {
                None
            };
            let default = if flags & FLAG_DEFAULT != 0 {
                Some(r.str("default")?)
            } else {
                None
            };
            let comment = r.str("column comment")?;
            columns.push(ColumnMeta {
                native,
                ty,
                auto_increment: flags & FLAG_AUTO_INCREMENT != 0,
                zerofill: flags & FLAG_ZEROFILL != 0,
                default_now: flags & FLAG_DEFAULT_NOW != 0,
                default_expr: flags & FLAG_DEFAULT_EXPR != 0 && default.is_some(),
                on_update_now: flags & FLAG_ON_UPDATE_NOW != 0,
                width,
                default,
                comment,
            });
        }
        let has_copy = match version {
            SQL_META_FORMAT_VERSION_PLAIN => false,
            SQL_META_FORMAT_VERSION_COPY => true,
            _ => match r.u8("copy lock present")? {
                0 => false,
                1 => true,
                other => return Err(format!("SQL metadata: copy lock flag {other}")),
            },
        };
        let copy = if has_copy {
            let b = r.take(4, "copy owner")?;
            let owner = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let started_ms = r.u64("copy start")?;
            let from = r.str("copy table")?;
            Some(CopyLock {
                owner,
                started_ms,
                from,
            })
        } else {
            None
        };
        let mut checks = Vec::new();
        if version >= SQL_META_FORMAT_VERSION_CHECKS {
            let count = usize::from(r.u16("check count")?);
            // Each takes at least its three lengths.
            if count * 6 > r.remaining() {
                return Err("SQL metadata: check count past the end".to_owned());
            }
            for _ in 0..count {
                let name = r.str("check name")?;
                let column = r.str("check column")?;
                let expr = r.str("check expression")?;
                checks.push(CheckMeta {
                    name,
                    column: (!column.is_empty()).then_some(column),
                    expr,
                });
            }
        }
        let mut foreign_keys = Vec::new();
        let mut referenced_by = Vec::new();
        if version >= SQL_META_FORMAT_VERSION {
            let count = usize::from(r.u16("foreign key count")?);
            // Each takes at least 10 bytes.
            if count * 10 > r.remaining() {
                return Err("SQL metadata: foreign key count past the end".to_owned());
            }
            for _ in 0..count {
                let name = r.str("foreign key name")?;
                let n = usize::from(r.u8("foreign key column count")?);
                let columns = (0..n)
                    .map(|_| r.str("foreign key column"))
                    .collect::<Result<Vec<_>, _>>()?;
                let parent_db = r.str("foreign key parent database")?;
                let parent_table = r.str("foreign key parent table")?;
                let parent_columns = (0..n)
                    .map(|_| r.str("foreign key parent column"))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut action = |what: &str| -> Result<Option<FkAction>, String> {
                    match r.u8(what)? {
                        255 => Ok(None),
                        code => FkAction::of_code(code)
                            .map(Some)
                            .ok_or_else(|| format!("SQL metadata: {what} {code}")),
                    }
                };
                let on_delete = action("foreign key ON DELETE")?;
                let on_update = action("foreign key ON UPDATE")?;
                foreign_keys.push(ForeignKeyMeta {
                    name,
                    columns,
                    parent_db,
                    parent_table,
                    parent_columns,
                    on_delete,
                    on_update,
                });
            }
            let count = usize::from(r.u16("referenced-by count")?);
            if count * 4 > r.remaining() {
                return Err("SQL metadata: referenced-by count past the end".to_owned());
            }
            for _ in 0..count {
                let db = r.str("referencing database")?;
                let table = r.str("referencing table")?;
                referenced_by.push((db, table));
            }
        }
        if r.remaining() != 0 {
            return Err(format!("SQL metadata: {} trailing bytes", r.remaining()));
        }
        Ok(TableMeta {
            engine,
            comment,
            charset,
            collation,
            auto_increment_start,
            columns,
            copy,
            checks,
            foreign_keys,
            referenced_by,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The format version read (the tags it allows).
    version: u8,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.remaining() {
            return Err(format!(
                "SQL metadata: {what} at byte {} is cut short",
                self.at
            ));
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }

    fn bool(&mut self, what: &str) -> Result<bool, String> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("SQL metadata: {what} is {other}, not 0 or 1")),
        }
    }

    fn str(&mut self, what: &str) -> Result<String, String> {
        let n = usize::from(self.u16(what)?);
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| format!("SQL metadata: {what} is not UTF-8"))
    }

    fn collation(&mut self) -> Result<Collation, String> {
        match self.u8("collation")? {
            1 => Ok(Collation::Utf8mb4Bin),
            2 => Ok(Collation::Utf8mb4GeneralCi),
            other => Err(format!("SQL metadata: unknown collation {other}")),
        }
    }

    fn size(&mut self) -> Result<BlobSize, String> {
        match self.u8("size")? {
            0 => Ok(BlobSize::Tiny),
            1 => Ok(BlobSize::Normal),
            2 => Ok(BlobSize::Medium),
            3 => Ok(BlobSize::Long),
            other => Err(format!("SQL metadata: unknown TEXT/BLOB size {other}")),
        }
    }

    fn members(&mut self) -> Result<Vec<String>, String> {
        let n = usize::from(self.u16("member count")?);
        if n * 2 > self.remaining() {
            return Err("SQL metadata: member count past the end".to_owned());
        }
        (0..n).map(|_| self.str("member")).collect()
    }

    fn digits(&mut self) -> Result<FixedDigits, String> {
        let m = self.u8("M")?;
        let d = self.u8("D")?;
        if d > m || d > 30 {
            return Err(format!("SQL metadata: ({m},{d}) is no FLOAT/DOUBLE (M,D)"));
        }
        Ok(FixedDigits { m, d })
    }

    fn sql_type(&mut self) -> Result<SqlType, String> {
        Ok(match self.u8("type")? {
            1 => SqlType::TinyInt {
                unsigned: self.bool("unsigned")?,
            },
            2 => SqlType::SmallInt {
                unsigned: self.bool("unsigned")?,
            },
            3 => SqlType::MediumInt {
                unsigned: self.bool("unsigned")?,
            },
            4 => SqlType::Int {
                unsigned: self.bool("unsigned")?,
            },
            5 => SqlType::BigInt {
                unsigned: self.bool("unsigned")?,
            },
            UNSIGNED_TAG if self.version >= SQL_META_FORMAT_VERSION_UNSIGNED => {
                // One level only: a run of tags is refused, not recursed.
                if self.bytes.get(self.at) == Some(&UNSIGNED_TAG) {
                    return Err("SQL metadata: UNSIGNED twice".to_owned());
                }
                match self.sql_type()? {
                    SqlType::Float {
                        digits,
                        unsigned: false,
                    } => SqlType::Float {
                        digits,
                        unsigned: true,
                    },
                    SqlType::Double {
                        digits,
                        unsigned: false,
                    } => SqlType::Double {
                        digits,
                        unsigned: true,
                    },
                    SqlType::Decimal {
                        precision,
                        scale,
                        unsigned: false,
                    } => SqlType::Decimal {
                        precision,
                        scale,
                        unsigned: true,
                    },
                    other => {
                        return Err(format!("SQL metadata: UNSIGNED before {other:?}"));
                    }
                }
            }
            6 => SqlType::Float {
                digits: None,
                unsigned: false,
            },
            7 => SqlType::Double {
                digits: None,
                unsigned: false,
            },
            23 if self.version >= SQL_META_FORMAT_VERSION_FIXED => SqlType::Float {
                digits: Some(self.digits()?),
                unsigned: false,
            },
            24 if self.version >= SQL_META_FORMAT_VERSION_FIXED => SqlType::Double {
                digits: Some(self.digits()?),
                unsigned: false,
            },
            8 => SqlType::Decimal {
                precision: self.u8("precision")?,
                scale: self.u8("scale")?,
                unsigned: false,
            },
            9 => SqlType::Char {
                length: self.u16("length")?,
                collation: self.collation()?,
            },
            10 => SqlType::VarChar {
                max: self.u16("length")?,
                collation: self.collation()?,
            },
            11 => SqlType::Binary {
                length: self.u16("length")?,
            },
            12 => SqlType::VarBinary {
                max: self.u16("length")?,
            },
            13 => SqlType::Text {
                size: self.size()?,
                collation: self.collation()?,
            },
            14 => SqlType::Blob { size: self.size()? },
            15 => SqlType::Date,
            16 => SqlType::Time {
                fsp: self.u8("fsp")?,
            },
            17 => SqlType::DateTime {
                fsp: self.u8("fsp")?,
            },
            18 => SqlType::Timestamp {
                fsp: self.u8("fsp")?,
            },
            19 => SqlType::Year,
            20 => SqlType::Bit {
                bits: self.u8("bits")?,
            },
            21 => SqlType::Enum(self.members()?),
            22 => SqlType::Set(self.members()?),
            other => return Err(format!("SQL metadata: unknown type tag {other}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> TableMeta {
        let column = |native: u16, ty: SqlType| ColumnMeta {
            native,
            ty,
            auto_increment: false,
            zerofill: false,
            default_now: false,
            default_expr: false,
            on_update_now: false,
            width: None,
            default: None,
            comment: String::new(),
        };
        let gci = Collation::Utf8mb4GeneralCi;
        let types = vec![
            SqlType::TinyInt { unsigned: true },
            SqlType::SmallInt { unsigned: false },
            SqlType::MediumInt { unsigned: true },
            SqlType::Int { unsigned: false },
            SqlType::BigInt { unsigned: true },
            SqlType::Float {
                digits: None,
                unsigned: false,
            },
            SqlType::Double {
                digits: None,
                unsigned: false,
            },
            SqlType::Decimal {
                precision: 10,
                scale: 2,
                unsigned: false,
            },
            SqlType::Char {
                length: 3,
                collation: gci,
            },
            SqlType::VarChar {
                max: 300,
                collation: Collation::Utf8mb4Bin,
            },
            SqlType::Binary { length: 4 },
            SqlType::VarBinary { max: 9 },
            SqlType::Text {
                size: BlobSize::Tiny,
                collation: gci,
            },
            SqlType::Blob {
                size: BlobSize::Medium,
            },
            SqlType::Date,
            SqlType::Time { fsp: 3 },
            SqlType::DateTime { fsp: 6 },
            SqlType::Timestamp { fsp: 0 },
            SqlType::Year,
            SqlType::Bit { bits: 5 },
            SqlType::Enum(vec!["a".into(), "bé".into()]),
            SqlType::Set(vec!["x".into(), String::new()]),
        ];
        let mut columns: Vec<ColumnMeta> = types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| column(i as u16, ty))
            .collect();
        columns[0].auto_increment = true;
        columns[0].zerofill = true;
        columns[0].width = Some(3);
        columns[3].default = Some("-5".into());
        columns[3].comment = "a comment".into();
        columns[17].default_now = true;
        columns[17].on_update_now = true;
        columns[4].default = Some("(1 + 1)".into());
        columns[4].default_expr = true;
        TableMeta {
            engine: "InnoDB".into(),
            comment: "NDB_TABLE=READ_BACKUP=1".into(),
            auto_increment_start: 1000,
            columns,
            ..TableMeta::default()
        }
    }

    #[test]
    fn every_type_and_flag_round_trips() {
        let meta = sample();
        let bytes = meta.encode();
        assert_eq!(
            bytes[2], 1,
            "a table without a copy lock stays at version 1"
        );
        assert_eq!(TableMeta::decode(&bytes), Ok(meta));
    }

    #[test]
    fn a_copy_lock_round_trips_at_version_2() {
        let mut meta = sample();
        meta.copy = Some(CopyLock {
            owner: 49,
            started_ms: 1_790_000_000_123,
            from: "db/def/t".into(),
        });
        let bytes = meta.encode();
        assert_eq!(bytes[2], 2);
        assert_eq!(TableMeta::decode(&bytes), Ok(meta));
        for end in 0..bytes.len() {
            assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
        }
    }

    #[test]
    fn checks_round_trip_at_version_3_with_or_without_a_copy_lock() {
        let mut meta = sample();
        meta.checks = vec![
            CheckMeta {
                name: "a".into(),
                column: Some("a".into()),
                expr: "a >= 0".into(),
            },
            CheckMeta {
                name: "CONSTRAINT_1".into(),
                column: None,
                expr: "b < 100".into(),
            },
        ];
        for copy in [
            None,
            Some(CopyLock {
                owner: 7,
                started_ms: 1,
                from: "db/def/t".into(),
            }),
        ] {
            meta.copy = copy;
            let bytes = meta.encode();
            assert_eq!(bytes[2], 3);
            assert_eq!(TableMeta::decode(&bytes), Ok(meta.clone()));
            for end in 0..bytes.len() {
                assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
            }
        }
        // Without checks, the older versions that older builds read.
        meta.checks.clear();
        meta.copy = None;
        assert_eq!(meta.encode()[2], 1);
    }

    #[test]
    fn fixed_digits_round_trip_at_version_4_and_only_there() {
        let mut meta = sample();
        meta.columns[5].ty = SqlType::Float {
            digits: Some(FixedDigits { m: 7, d: 3 }),
            unsigned: false,
        };
        meta.columns[6].ty = SqlType::Double {
            digits: Some(FixedDigits { m: 255, d: 30 }),
            unsigned: false,
        };
        let bytes = meta.encode();
        assert_eq!(bytes[2], 4);
        assert_eq!(TableMeta::decode(&bytes), Ok(meta.clone()));
        for end in 0..bytes.len() {
            assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
        }
        // A tag 23 or 24 under an older version is refused.
        let mut older = bytes.clone();
        older[2] = 3;
        assert!(TableMeta::decode(&older).is_err());
        // With checks and a copy lock too.
        meta.checks = vec![CheckMeta {
            name: "x".into(),
            column: None,
            expr: "1".into(),
        }];
        meta.copy = Some(CopyLock {
            owner: 1,
            started_ms: 2,
            from: "db/def/t".into(),
        });
        let bytes = meta.encode();
        assert_eq!(bytes[2], 4);
        assert_eq!(TableMeta::decode(&bytes), Ok(meta));
    }

    #[test]
    fn unsigned_reals_round_trip_at_version_5_and_only_there() {
        let fixed = Some(FixedDigits { m: 6, d: 2 });
        for (ty, other) in [
            (
                SqlType::Float {
                    digits: None,
                    unsigned: true,
                },
                SqlType::Double {
                    digits: fixed,
                    unsigned: true,
                },
            ),
            (
                SqlType::Double {
                    digits: None,
                    unsigned: true,
                },
                SqlType::Decimal {
                    precision: 5,
                    scale: 2,
                    unsigned: true,
                },
            ),
            (
                SqlType::Float {
                    digits: fixed,
                    unsigned: true,
                },
                SqlType::Double {
                    digits: None,
                    unsigned: false,
                },
            ),
        ] {
            let mut meta = sample();
            meta.columns[5].ty = ty;
            meta.columns[6].ty = other;
            let bytes = meta.encode();
            assert_eq!(bytes[2], 5);
            assert_eq!(TableMeta::decode(&bytes), Ok(meta.clone()));
            for end in 0..bytes.len() {
                assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
            }
            // The tag 25 under an older version is refused.
            let mut older = bytes.clone();
            older[2] = 4;
            assert!(TableMeta::decode(&older).is_err());
        }
        // UNSIGNED twice, or before a type that has its own, is refused.
        let mut meta = sample();
        meta.columns[5].ty = SqlType::Float {
            digits: None,
            unsigned: true,
        };
        let bytes = meta.encode();
        let at = bytes
            .windows(2)
            .position(|w| w == [UNSIGNED_TAG, 6])
            .expect("the tag");
        let mut twice = bytes.clone();
        twice.insert(at, UNSIGNED_TAG);
        assert!(TableMeta::decode(&twice).is_err());
        let mut int = bytes.clone();
        int[at + 1] = 1;
        assert!(TableMeta::decode(&int).is_err());
        // Without one, the older versions.
        meta.columns[5].ty = SqlType::Float {
            digits: Some(FixedDigits { m: 4, d: 1 }),
            unsigned: false,
        };
        assert_eq!(meta.encode()[2], 4);
    }

    #[test]
    fn foreign_keys_and_their_parents_round_trip_at_version_6() {
        let mut meta = sample();
        meta.foreign_keys = vec![
            ForeignKeyMeta {
                name: "fk1".to_owned(),
                columns: vec!["a".to_owned(), "b".to_owned()],
                parent_db: "shop".to_owned(),
                parent_table: "orders".to_owned(),
                parent_columns: vec!["id".to_owned(), "line".to_owned()],
                on_delete: Some(FkAction::Cascade),
                on_update: None,
            },
            ForeignKeyMeta {
                name: "t_ibfk_2".to_owned(),
                columns: vec!["c".to_owned()],
                parent_db: "db".to_owned(),
                parent_table: "t".to_owned(),
                parent_columns: vec!["u".to_owned()],
                on_delete: Some(FkAction::SetNull),
                on_update: Some(FkAction::NoAction),
            },
        ];
        let bytes = meta.encode();
        assert_eq!(bytes[2], 6);
        assert_eq!(TableMeta::decode(&bytes), Ok(meta.clone()));
        for end in 0..bytes.len() {
            assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
        }
        // A parent only.
        meta.foreign_keys.clear();
        meta.referenced_by = vec![("db".to_owned(), "child".to_owned())];
        let bytes = meta.encode();
        assert_eq!(bytes[2], 6);
        assert_eq!(TableMeta::decode(&bytes), Ok(meta.clone()));
        // An unknown action is refused.
        meta.referenced_by.clear();
        meta.foreign_keys = vec![ForeignKeyMeta {
            name: "f".to_owned(),
            columns: vec!["c".to_owned()],
            parent_db: "d".to_owned(),
            parent_table: "p".to_owned(),
            parent_columns: vec!["i".to_owned()],
            on_delete: Some(FkAction::Restrict),
            on_update: None,
        }];
        let mut bytes = meta.encode();
        // ON DELETE, ON UPDATE, then the referenced-by count (u16).
        let at = bytes.len() - 4;
        assert_eq!(bytes[at..], [0, 255, 0, 0]);
        bytes[at] = 9;
        assert!(TableMeta::decode(&bytes).is_err());
        // Neither: an older version.
        meta.foreign_keys.clear();
        assert!(meta.encode()[2] < 6);
    }

    #[test]
    fn truncations_trailing_bytes_and_unknown_tags_are_refused() {
        let bytes = sample().encode();
        for end in 0..bytes.len() {
            assert!(TableMeta::decode(&bytes[..end]).is_err(), "cut at {end}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(TableMeta::decode(&longer).unwrap_err().contains("trailing"));
        let mut newer = bytes.clone();
        newer[2] = SQL_META_FORMAT_VERSION + 1;
        assert!(TableMeta::decode(&newer).unwrap_err().contains("version"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = TableMeta::decode(&bytes);
        }

        #[test]
        fn corrupted_metadata_never_panics(at in 0usize..400, byte in any::<u8>()) {
            let mut bytes = sample().encode();
            let at = at % bytes.len();
            bytes[at] = byte;
            let _ = TableMeta::decode(&bytes);
        }
    }
}
