//! `JSON_TABLE(doc, path COLUMNS (…)) AS alias`: the rows a JSON
//! document's path reaches, as a table. It may name the columns of the
//! tables written before it (`FROM t, JSON_TABLE(t.doc, …) jt`), so it runs
//! per row of them, as a `LATERAL` derived table does (`select.rs` plans it
//! as one); alone in FROM it runs once.
//!
//! Its columns are MariaDB's: `name FOR ORDINALITY` (the row's number,
//! from 1, per row path or NESTED PATH), `name type PATH 'p' [on empty]
//! [on error]` (the value at `p` from the row's value, stored as into a
//! column of that type: a conversion that does not fit warns 1366/1265
//! naming `*any*`.`json_table`, as MariaDB's), `name type EXISTS PATH 'p'`
//! (1 or 0) and `NESTED PATH 'p' COLUMNS (…)`: the rows of each NESTED PATH
//! are joined to their parent's row, sibling NESTED PATHs give their rows
//! one after the other (the other's columns NULL), a row whose NESTED PATHs
//! give none is kept with them NULL.

use std::collections::HashMap;

use sqlparser::ast;

use crate::engine::catalog::{self, SqlColumn, SqlType};
use crate::engine::expr::json::{self, Json, Leg};
use crate::engine::expr::{Ctx, Expr, ScopeColumn, Val};
use crate::error::{SqlError, SqlResult};

use super::convert::{self, Target};
use super::{Conn, Location};

/// Columns a JSON_TABLE may declare, nested ones included.
pub const JSON_TABLE_COLUMNS_MAX: usize = 4096;

/// A planned JSON_TABLE.
#[derive(Debug)]
pub struct JsonTable {
    /// The document, over the row of the tables before it.
    doc: Expr,
    /// The row path and its columns, with the NESTED PATHs under it.
    root: Node,
    /// Its columns, in the order written (nested ones in their place).
    columns: Vec<Column>,
    /// Its alias, for MariaDB's errors.
    alias: String,
    /// Whether a column is JSON: values are then given back as written.
    wants_text: bool,
}

/// A row path (the table's, or a NESTED PATH's) and the columns it fills.
#[derive(Debug)]
struct Node {
    path: Vec<Leg>,
    /// Positions in [`JsonTable::columns`] of its own columns.
    own: Vec<usize>,
    nested: Vec<Node>,
}

#[derive(Debug)]
struct Column {
    name: String,
    what: What,
}

#[derive(Debug)]
enum What {
    Ordinality,
    Path {
        path: Vec<Leg>,
        exists: bool,
        on_empty: OnMisfit,
        on_error: OnMisfit,
        /// Declared JSON: the value as written, arrays and objects too.
        json: bool,
        /// The column it is stored as (type, name for the warnings).
        sql: Box<SqlColumn>,
    },
}

/// `NULL | DEFAULT 'v' | ERROR ON EMPTY` (or `ON ERROR`).
#[derive(Debug)]
enum OnMisfit {
    Null,
    Default(String),
    Error,
}

/// Why a PATH column has no value of its own.
enum Misfit {
    Empty,
    /// An array or an object for a column that is not JSON.
    NotScalar,
    /// The path reached several values.
    Several,
}

/// MariaDB's 4177.
const TABLE_FUNCTION_ALIAS: u16 = 4177;
/// MariaDB's 4176: ERROR ON EMPTY.
const FIELD_NOT_SET: u16 = 4176;
/// MariaDB's 4178: ERROR ON ERROR of an array or object.
const NOT_SCALAR: u16 = 4178;
/// MariaDB's 4179: ERROR ON ERROR of several values.
const SEVERAL_MATCHES: u16 = 4179;

/// The function's name in MariaDB's messages.
const NAME: &str = "JSON_TABLE";

/// Plans `JSON_TABLE(…)` over the `before` columns (those of the tables
/// written before it; `visible` names them, any other column of the row
/// cannot be named: MariaDB's 1054): the table and its columns for the
/// query's scope.
pub(super) fn plan(
    conn: &Conn<'_>,
    factor: &ast::TableFactor,
    before: &[ScopeColumn],
    visible: &[String],
    placeholders: &[Location],
) -> SqlResult<(JsonTable, Vec<ScopeColumn>)> {
    let ast::TableFactor::JsonTable {
        json_expr,
        json_path,
        columns,
        alias,
    } = factor
    else {
        return Err(SqlError::unsupported(format_args!("FROM {factor}")));
    };
    let Some(alias) = alias else {
        return Err(SqlError::new(
            TABLE_FUNCTION_ALIAS,
            "Every table function must have an alias.",
        ));
    };
    let alias = alias.name.value.clone();
    let mut table = JsonTable {
        doc: Expr::Lit(Val::Null),
        root: Node {
            path: path_of(json_path)?,
            own: Vec::new(),
            nested: Vec::new(),
        },
        columns: Vec::new(),
        alias: alias.clone(),
        wants_text: false,
    };
    let mut root = Node {
        path: std::mem::take(&mut table.root.path),
        own: Vec::new(),
        nested: Vec::new(),
    };
    flatten(columns, &mut root, &mut table)?;
    table.root = root;
    // The tables written after it are in the row too (planned first):
    // their columns are masked, so that naming one is 1054 as in MariaDB.
    let masked: Vec<ScopeColumn> = before
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if !visible.iter().any(|v| v.eq_ignore_ascii_case(&c.table)) {
                c.name = "".into();
                c.table = "".into();
            }
            c
        })
        .collect();
    table.doc = super::with_scope(conn, masked, placeholders, |scope| {
        scope.clause = NAME;
        scope.lower(json_expr)
    })?;
    let scope = table
        .columns
        .iter()
        .map(|c| {
            let ty = match &c.what {
                What::Ordinality => SqlType::Int { unsigned: false },
                What::Path { sql, .. } => sql.ty.clone(),
            };
            let mut meta = catalog::column_meta(&ty, true);
            meta.name = c.name.as_str().into();
            meta.org_name = c.name.as_str().into();
            meta.table = alias.as_str().into();
            meta.org_table = alias.as_str().into();
            ScopeColumn {
                name: c.name.as_str().into(),
                table: alias.as_str().into(),
                kind: convert::column_kind(&ty),
                nullable: true,
                meta,
                default: None,
                members: None,
            }
        })
        .collect();
    Ok((table, scope))
}

/// The columns of one COLUMNS list into `table.columns`, under `node`.
fn flatten(
    columns: &[ast::JsonTableColumn],
    node: &mut Node,
    table: &mut JsonTable,
) -> SqlResult<()> {
    for c in columns {
        let (name, what) = match c {
            ast::JsonTableColumn::Nested(n) => {
                let mut child = Node {
                    path: path_of(&n.path)?,
                    own: Vec::new(),
                    nested: Vec::new(),
                };
                flatten(&n.columns, &mut child, table)?;
                node.nested.push(child);
                continue;
            }
            ast::JsonTableColumn::ForOrdinality(name) => (name.value.clone(), What::Ordinality),
            ast::JsonTableColumn::Named(c) => {
                let json = matches!(c.r#type, ast::DataType::JSON);
                let (ty, width) = crate::engine::ddl::declared_type(&c.r#type.to_string())?;
                let mut meta = catalog::column_meta(&ty, true);
                meta.name = c.name.value.as_str().into();
                let sql = SqlColumn {
                    name: c.name.value.clone(),
                    native: 0,
                    ty,
                    nullable: true,
                    auto_increment: false,
                    meta,
                    default: None,
                    default_now: false,
                    default_expr: false,
                    on_update_now: false,
                    zerofill: false,
                    width,
                    comment: String::new(),
                };
                table.wants_text |= json;
                let what = What::Path {
                    path: path_of(&c.path)?,
                    exists: c.exists,
                    on_empty: on_misfit(c.on_empty.as_ref()),
                    on_error: on_misfit(c.on_error.as_ref()),
                    json,
                    sql: Box::new(sql),
                };
                (c.name.value.clone(), what)
            }
        };
        if table
            .columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&name))
        {
            return Err(SqlError::new(
                crate::error::codes::DUP_FIELDNAME,
                format!("Duplicate column name '{name}'"),
            ));
        }
        if table.columns.len() >= JSON_TABLE_COLUMNS_MAX {
            return Err(SqlError::unsupported(format_args!(
                "a JSON_TABLE of more than {JSON_TABLE_COLUMNS_MAX} columns"
            )));
        }
        node.own.push(table.columns.len());
        table.columns.push(Column { name, what });
    }
    Ok(())
}

fn on_misfit(h: Option<&ast::JsonTableColumnErrorHandling>) -> OnMisfit {
    match h {
        None | Some(ast::JsonTableColumnErrorHandling::Null) => OnMisfit::Null,
        Some(ast::JsonTableColumnErrorHandling::Default(v)) => OnMisfit::Default(literal(v)),
        Some(ast::JsonTableColumnErrorHandling::Error) => OnMisfit::Error,
    }
}

/// A literal's text, unquoted.
fn literal(v: &ast::ValueWithSpan) -> String {
    match &v.value {
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A path literal, parsed; a bad one is MariaDB's error (4041, 4042),
/// which names it argument 2 wherever it is written.
fn path_of(v: &ast::ValueWithSpan) -> SqlResult<Vec<Leg>> {
    let text = literal(v);
    json::parse_path(&text).map_err(|at| {
        let (code, message) = json::position_error(NAME, "path", (4041, 4042), 2, &text, at);
        SqlError::new(code, message)
    })
}

impl JsonTable {
    /// Its alias.
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The rows it gives for `row` (of the tables before it); `stored`
    /// counts the rows given so far in the statement (for the warnings'
    /// `at row N`).
    pub fn rows(
        &self,
        row: &[Val],
        stored: &mut usize,
        ctx: &mut Ctx<'_>,
    ) -> SqlResult<Vec<Vec<Val>>> {
        let doc = self.doc.eval(row, ctx)?;
        if doc.is_null() {
            return Ok(Vec::new());
        }
        let text = doc.to_text();
        let parsed = if self.wants_text {
            json::parse_with_spans(&text).map(|(j, spans)| (j, Some(spans)))
        } else {
            json::parse(&text).map(|j| (j, None))
        };
        let (doc, spans) = parsed.map_err(|at| {
            let (code, message) = json::position_error(NAME, "text", (4037, 4038), 1, &text, at);
            SqlError::new(code, message)
        })?;
        // Where each value was written, for the JSON columns.
        let written: HashMap<*const Json, (usize, usize)> = match spans {
            Some(spans) => {
                let mut all = Vec::with_capacity(spans.len());
                json::preorder(&doc, &mut all);
                debug_assert_eq!(all.len(), spans.len(), "a span per value");
                all.into_iter()
                    .map(|j| j as *const Json)
                    .zip(spans)
                    .collect()
            }
            None => HashMap::new(),
        };
        let source = Source {
            text: &text,
            written: &written,
        };
        let mut out = Vec::new();
        self.node_rows(&self.root, &doc, &source, stored, ctx, &mut out)?;
        Ok(out)
    }

    /// The rows `node` gives for the value `at`, of the table's width
    /// with only `node`'s columns (and its NESTED PATHs') set.
    fn node_rows(
        &self,
        node: &Node,
        at: &Json,
        source: &Source<'_>,
        stored: &mut usize,
        ctx: &mut Ctx<'_>,
        out: &mut Vec<Vec<Val>>,
    ) -> SqlResult<()> {
        let mut found = Vec::new();
        json::select(at, &node.path, &mut found);
        for (i, item) in found.into_iter().enumerate() {
            ctx.check_killed()?;
            let mut own = vec![Val::Null; self.columns.len()];
            // The row's number, for its warnings: the next one given.
            let row_number = *stored + 1;
            for &c in &node.own {
                own[c] = self.value(&self.columns[c], i + 1, item, source, row_number, ctx)?;
            }
            let from = out.len();
            for n in &node.nested {
                self.node_rows(n, item, source, stored, ctx, out)?;
            }
            if out.len() == from {
                out.push(own);
                *stored += 1;
            } else {
                for r in &mut out[from..] {
                    for &c in &node.own {
                        r[c] = own[c].clone();
                    }
                }
            }
            if out.len() > super::select::ROWS_IN_MEMORY_MAX {
                return Err(SqlError::unsupported(format_args!(
                    "queries of more than {} rows",
                    super::select::ROWS_IN_MEMORY_MAX
                )));
            }
        }
        Ok(())
    }

    /// Column `c`'s value for the row of `item`, the `ordinal`th of its
    /// path.
    fn value(
        &self,
        c: &Column,
        ordinal: usize,
        item: &Json,
        source: &Source<'_>,
        row: usize,
        ctx: &mut Ctx<'_>,
    ) -> SqlResult<Val> {
        let What::Path {
            path,
            exists,
            on_empty,
            on_error,
            json,
            sql,
        } = &c.what
        else {
            return Ok(Val::Int(ordinal as i64));
        };
        let mut found = Vec::new();
        json::select(item, path, &mut found);
        if *exists {
            return self.store(Val::Int(i64::from(!found.is_empty())), sql, row, ctx);
        }
        let misfit = match found.as_slice() {
            [] => Misfit::Empty,
            [_, _, ..] => Misfit::Several,
            [one] if *json => {
                let text = source
                    .written
                    .get(&(*one as *const Json))
                    .map_or_else(|| json::write(one), |&(a, b)| source.text[a..b].to_owned());
                return self.store(Val::str(text), sql, row, ctx);
            }
            [Json::Array(_) | Json::Object(_)] => Misfit::NotScalar,
            [Json::Null] => return Ok(Val::Null),
            [Json::String(s)] => return self.store(Val::str(s.clone()), sql, row, ctx),
            [Json::Bool(b)] => {
                let v = if matches!(
                    convert::column_kind(&sql.ty),
                    crate::engine::expr::Kind::Str { .. }
                ) {
                    Val::str(if *b { "true" } else { "false" })
                } else {
                    Val::Int(i64::from(*b))
                };
                return self.store(v, sql, row, ctx);
            }
            [Json::Number(n)] => return self.store(number(n), sql, row, ctx),
        };
        let handling = match misfit {
            Misfit::Empty => on_empty,
            Misfit::NotScalar | Misfit::Several => on_error,
        };
        match handling {
            OnMisfit::Null => Ok(Val::Null),
            OnMisfit::Default(text) => self.store(Val::str(text.clone()), sql, row, ctx),
            OnMisfit::Error => {
                let (code, message) = match misfit {
                    Misfit::Empty => (
                        FIELD_NOT_SET,
                        format!("Field '{}' can't be set for JSON_TABLE '{}'.", c.name, self.alias),
                    ),
                    Misfit::NotScalar => (
                        NOT_SCALAR,
                        format!(
                            "Can't store an array or an object in the scalar column '{}' of JSON_TABLE '{}'.",
                            c.name, self.alias
                        ),
                    ),
                    Misfit::Several => (
                        SEVERAL_MATCHES,
                        format!(
                            "Can't store multiple matches of the path in the column '{}' of JSON_TABLE '{}'.",
                            c.name, self.alias
                        ),
                    ),
                };
                Err(SqlError::new(code, message))
            }
        }
    }

    /// `v` as column `sql` keeps it: converted as a write outside strict
    /// mode converts it (what does not fit is adjusted, with a warning
    /// naming MariaDB's `*any*`.`json_table`).
    fn store(&self, v: Val, sql: &SqlColumn, row: usize, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        let tz_secs = ctx.env.tz_secs;
        let target = Target {
            column: sql,
            db: "*any*",
            table: "json_table",
            row,
            tz_secs,
        };
        let strict = std::mem::replace(&mut ctx.strict, false);
        let before = ctx.warnings.len();
        let stored = convert::store(&v, &target, ctx);
        ctx.strict = strict;
        // Given as the table function fills its table: no strict mode of
        // a statement that writes its rows makes them its error.
        for (code, _) in &mut ctx.warnings[before..] {
            *code |= crate::engine::expr::eval::PLANNED_BIT;
        }
        Ok(convert::from_native_owned(stored?, &sql.ty, tz_secs))
    }
}

/// The document a table's rows come from, as written.
struct Source<'a> {
    text: &'a str,
    /// Each value's byte range in `text` (only when a column is JSON).
    written: &'a HashMap<*const Json, (usize, usize)>,
}

/// A JSON number as SQL reads it: an integer, a decimal, or (with an
/// exponent, or too long for a decimal) a double.
fn number(text: &str) -> Val {
    if let Ok(i) = text.parse::<i64>() {
        return Val::Int(i);
    }
    if !text.contains(['e', 'E']) {
        if let Some(d) = crate::engine::expr::Dec::parse(text) {
            return Val::Dec(d);
        }
    }
    text.parse::<f64>().map_or(Val::Null, Val::Double)
}
