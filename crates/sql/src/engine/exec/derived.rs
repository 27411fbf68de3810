//! Derived tables (`FROM (SELECT …) AS d`) and the rows of subqueries:
//! a query run once per statement, its rows kept in the SQL node
//! (materialised), then read as a table whose rows are at hand.
//!
//! The rows kept are bounded by [`DERIVED_ROWS_MAX`] and
//! [`DERIVED_BYTES_MAX`]; past either the statement fails with 1114 ("The
//! table '…' is full", MySQL's answer when its temporary table fills),
//! naming the limit.

use std::sync::Arc;

use schema::TableDef;
use skarv_client::Table;
use sqlparser::ast;
use sqlparser::tokenizer::Location;

use crate::engine::catalog::{meta::TableMeta, SqlColumn, SqlType, TableInfo};
use crate::engine::expr::{DefaultOf, Kind, Members, ScopeColumn, Val};
use crate::engine::Conn;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::ColumnMeta;

/// Most rows one derived table or subquery result keeps in the SQL node.
pub const DERIVED_ROWS_MAX: usize = 1_000_000;
/// Most bytes (an estimate of the values' size) one derived table or
/// subquery result keeps in the SQL node.
pub const DERIVED_BYTES_MAX: usize = 256 * 1024 * 1024;
/// The estimated bytes of one value besides its text or bytes.
const VALUE_OVERHEAD_BYTES: usize = 24;

/// A query's result kept in the SQL node.
#[derive(Clone, Debug, Default)]
pub struct Materialised {
    /// Its columns' metadata (names as the query gives them).
    pub metas: Vec<ColumnMeta>,
    /// Its columns' kinds.
    pub kinds: Vec<Kind>,
    /// Whether each column may be NULL.
    pub nullable: Vec<bool>,
    /// What `DEFAULT(col)` of each column reads: a plain column's of the
    /// table it comes from, none for an expression's (MariaDB's 1364);
    /// empty when unknown (a UNION's).
    pub defaults: Vec<Option<DefaultOf>>,
    /// An ENUM's or SET's members for each column that is a plain such
    /// column of a table (it stays one: sorts by its index, reads as a
    /// number in a numeric context); empty when unknown (a UNION's).
    pub members: Vec<Option<Members>>,
    /// The rows (empty when only planned, for PREPARE).
    pub rows: Vec<Vec<Val>>,
    /// A correlated subquery's aggregates of its outer query's columns
    /// (`SUM(t.a)`), by text: the outer query computes them
    /// ([`crate::engine::expr::OuterRow::aggs`]).
    pub outer_aggs: Vec<(String, sqlparser::ast::Expr)>,
}

/// A derived table ready to be read: its alias, its columns as a scope
/// and as a table, and its rows.
pub(crate) struct Derived {
    /// Its alias.
    pub alias: String,
    /// Its columns for expressions.
    pub columns: Vec<ScopeColumn>,
    /// Its shape as a table (no keys, in no cluster).
    pub table: Arc<TableInfo>,
    /// Its rows.
    pub rows: Arc<Vec<Vec<Val>>>,
}

/// Checks the rows a query keeps against the limits (`what`: the name
/// the error gives).
pub(crate) fn check_kept(rows: &[Vec<Val>], what: &str) -> SqlResult<()> {
    let full = |limit: String| {
        SqlError::new(
            codes::RECORD_FILE_FULL,
            format!("The table '{what}' is full (the SQL node keeps at most {limit})"),
        )
    };
    if rows.len() > DERIVED_ROWS_MAX {
        return Err(full(format!("{DERIVED_ROWS_MAX} rows: DERIVED_ROWS_MAX")));
    }
    let mut bytes = 0usize;
    for row in rows {
        for v in row {
            bytes += VALUE_OVERHEAD_BYTES
                + match v {
                    Val::Str(s) => s.len(),
                    _ => 0,
                };
        }
        if bytes > DERIVED_BYTES_MAX {
            return Err(full(format!(
                "{DERIVED_BYTES_MAX} bytes: DERIVED_BYTES_MAX"
            )));
        }
    }
    Ok(())
}

/// The estimated bytes `rows` keep (what [`check_kept`] counts).
pub(crate) fn kept_bytes(rows: &[Vec<Val>]) -> usize {
    rows.iter()
        .flatten()
        .map(|v| {
            VALUE_OVERHEAD_BYTES
                + match v {
                    Val::Str(s) => s.len(),
                    _ => 0,
                }
        })
        .sum()
}

/// Checks running totals of kept rows and bytes against the limits (a
/// recursive CTE counts as its rounds add rows).
pub(crate) fn check_totals(rows: usize, bytes: usize, what: &str) -> SqlResult<()> {
    let limit = if rows > DERIVED_ROWS_MAX {
        format!("{DERIVED_ROWS_MAX} rows: DERIVED_ROWS_MAX")
    } else if bytes > DERIVED_BYTES_MAX {
        format!("{DERIVED_BYTES_MAX} bytes: DERIVED_BYTES_MAX")
    } else {
        return Ok(());
    };
    Err(SqlError::new(
        codes::RECORD_FILE_FULL,
        format!("The table '{what}' is full (the SQL node keeps at most {limit})"),
    ))
}

/// A derived table named `alias` over kept rows (a CTE's, read again).
pub(crate) fn of_rows(
    alias: String,
    names: &[String],
    m: &Materialised,
    rows: Arc<Vec<Vec<Val>>>,
) -> SqlResult<Derived> {
    let columns = shape_columns(&alias, names, m)?;
    let table = Arc::new(table_of(&alias, &columns));
    Ok(Derived {
        alias,
        columns,
        table,
        rows,
    })
}

/// Runs (or, with `params` None, only plans) the derived table
/// `subquery AS alias`.
pub(crate) fn derived(
    conn: &mut Conn<'_>,
    subquery: &ast::Query,
    alias: Option<&ast::TableAlias>,
    lateral: bool,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Derived> {
    if lateral {
        return Err(SqlError::unsupported("LATERAL derived tables"));
    }
    let Some(alias) = alias else {
        return Err(SqlError::new(
            codes::DERIVED_MUST_HAVE_ALIAS,
            "Every derived table must have its own alias",
        ));
    };
    let name = alias.name.value.clone();
    let mark = super::select::derived_begin(conn);
    let m = super::select::materialise(conn, subquery, placeholders, params)?;
    super::select::note_derived(conn, mark, &name);
    check_kept(&m.rows, &name)?;
    let names = column_names(alias, &m)?;
    let columns = shape_columns(&name, &names, &m)?;
    let table = Arc::new(table_of(&name, &columns));
    Ok(Derived {
        alias: name,
        columns,
        table,
        rows: Arc::new(m.rows),
    })
}

/// A virtual table (`information_schema.TABLES`, `ndbinfo.…`) read whole
/// as a derived table named by the FROM's alias or the table's name, so
/// that a join or a subquery reads it as it reads kept rows: what tools
/// and ORMs send (Django's constraints, a `KEY_COLUMN_USAGE` joined with
/// `TABLE_CONSTRAINTS`).
pub(crate) fn of_virtual(
    conn: &mut Conn<'_>,
    db: &str,
    table_name: &str,
    alias: Option<&ast::TableAlias>,
) -> SqlResult<Derived> {
    let (metas, rows) = crate::engine::show::virtual_rows(conn, db, table_name)?;
    let alias = alias.map_or_else(|| table_name.to_owned(), |a| a.name.value.clone());
    let columns: Vec<ScopeColumn> = metas
        .into_iter()
        .map(|meta| ScopeColumn {
            default: None,
            name: meta.name.clone(),
            table: alias.as_str().into(),
            kind: super::select::meta_kind(&meta),
            nullable: true,
            meta,
            members: None,
        })
        .collect();
    let rows: Vec<Vec<Val>> = rows
        .iter()
        .map(|r| r.iter().map(super::convert::from_sql).collect())
        .collect();
    let table = Arc::new(table_of(&alias, &columns));
    Ok(Derived {
        alias,
        columns,
        table,
        rows: Arc::new(rows),
    })
}

/// Views inside views, at most (a view naming itself, directly or not,
/// would never end).
pub const VIEW_NESTING_MAX: usize = 32;

/// Runs (or, with `params` None, only plans) a view's query as a derived
/// table named by the FROM's alias or the view's name.
pub(crate) fn of_view(
    conn: &mut Conn<'_>,
    view: &crate::engine::views::View,
    alias: Option<&ast::TableAlias>,
    params: Option<&[Val]>,
) -> SqlResult<Derived> {
    let q = view.query()?;
    let name = alias.map_or_else(|| view.name.clone(), |a| a.name.value.clone());
    if conn.subqueries.view_depth >= VIEW_NESTING_MAX {
        return Err(SqlError::unsupported(format_args!(
            "views nested more than {VIEW_NESTING_MAX} deep ('{}.{}')",
            view.db, view.name
        )));
    }
    conn.subqueries.view_depth += 1;
    let outer_text = conn
        .subqueries
        .view_text
        .replace(Arc::from(view.body.as_str()));
    let mark = super::select::derived_begin(conn);
    // The stored query has no placeholders of the statement's, and sees
    // none of its CTEs.
    let m = super::cte::hidden(conn, |conn| {
        super::select::materialise(conn, &q, &[], params.map(|_| &[][..]))
    });
    conn.subqueries.view_text = outer_text;
    conn.subqueries.view_depth -= 1;
    let m = m?;
    super::select::note_derived(conn, mark, &name);
    check_kept(&m.rows, &name)?;
    let names: Vec<String> = if view.columns.is_empty() {
        m.metas.iter().map(|c| c.name.to_string()).collect()
    } else if view.columns.len() == m.metas.len() {
        view.columns.clone()
    } else {
        return Err(view_invalid(view));
    };
    let columns = shape_columns(&name, &names, &m)?;
    let table = Arc::new(table_of(&name, &columns));
    Ok(Derived {
        alias: name,
        columns,
        table,
        rows: Arc::new(m.rows),
    })
}

/// A view's columns without reading its rows (DESCRIBE, SHOW COLUMNS,
/// information_schema.COLUMNS): its query planned as [`of_view`] runs it,
/// named by the view's list. The statement's own subqueries' state is
/// kept aside meanwhile (it may be planning a query of its own).
pub(crate) fn view_columns(
    conn: &mut Conn<'_>,
    view: &crate::engine::views::View,
) -> SqlResult<Vec<ColumnMeta>> {
    let q = view.query()?;
    let statement = std::mem::take(&mut conn.subqueries);
    conn.subqueries.view_depth = 1;
    conn.subqueries.view_text = Some(Arc::from(view.body.as_str()));
    let metas = super::cte::hidden(conn, |conn| super::select::planned_metas(conn, &q));
    conn.subqueries = statement;
    let mut metas = metas?;
    if !view.columns.is_empty() {
        if view.columns.len() != metas.len() {
            return Err(view_invalid(view));
        }
        for (m, name) in metas.iter_mut().zip(&view.columns) {
            m.name = name.as_str().into();
        }
    }
    Ok(metas)
}

/// 1356: a view whose query no longer fits its column list.
fn view_invalid(view: &crate::engine::views::View) -> SqlError {
    SqlError::new(
        1356,
        format!(
            "View '{}.{}' references invalid table(s) or column(s) or function(s) or \
             definer/invoker of view lack rights to use them",
            view.db, view.name
        ),
    )
}

/// The column names of a derived table, LATERAL table or CTE: its
/// alias's list, else its query's; 1353 for a list of another length.
pub(crate) fn column_names(alias: &ast::TableAlias, m: &Materialised) -> SqlResult<Vec<String>> {
    if alias.columns.is_empty() {
        return Ok(m.metas.iter().map(|c| c.name.to_string()).collect());
    }
    if alias.columns.len() != m.metas.len() {
        return Err(SqlError::new(
            codes::VIEW_WRONG_LIST,
            "In definition of view, derived table or common table expression, SELECT list \
             and column names list have different column counts",
        ));
    }
    Ok(alias.columns.iter().map(|c| c.name.value.clone()).collect())
}

/// The columns of a derived table named `alias`: 1060 for a name twice.
pub(crate) fn shape_columns(
    alias: &str,
    names: &[String],
    m: &Materialised,
) -> SqlResult<Vec<ScopeColumn>> {
    let mut columns: Vec<ScopeColumn> = Vec::with_capacity(names.len());
    for (at, name) in names.iter().enumerate() {
        if columns.iter().any(|c| c.name.eq_ignore_ascii_case(name)) {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{name}'"),
            ));
        }
        let mut meta = m.metas[at].clone();
        meta.schema = Arc::default();
        meta.table = alias.into();
        meta.org_table = Arc::clone(&meta.table);
        meta.name = name.as_str().into();
        meta.org_name = Arc::clone(&meta.name);
        columns.push(ScopeColumn {
            default: m.defaults.get(at).cloned().flatten(),
            name: Arc::clone(&meta.name),
            table: Arc::clone(&meta.table),
            kind: m.kinds.get(at).copied().unwrap_or(Kind::Null),
            nullable: m.nullable.get(at).copied().unwrap_or(true),
            meta,
            members: m.members.get(at).cloned().flatten(),
        });
    }
    Ok(columns)
}

/// A table of the derived table's shape: no keys and no native columns
/// (the join planner reads it whole, from the kept rows).
fn table_of(alias: &str, columns: &[ScopeColumn]) -> TableInfo {
    let def = TableDef::new(alias, 0, Vec::new());
    TableInfo {
        db: String::new(),
        name: alias.to_owned(),
        native: Arc::new(Table::detached(def)),
        columns: columns
            .iter()
            .enumerate()
            .map(|(at, c)| SqlColumn {
                name: c.name.to_string(),
                native: at,
                ty: type_of(c.kind),
                nullable: c.nullable,
                auto_increment: false,
                meta: c.meta.clone(),
                default: None,
                default_now: false,
                default_expr: false,
                on_update_now: false,
                zerofill: false,
                width: None,
                comment: String::new(),
            })
            .collect(),
        hidden_key: false,
        sql: TableMeta::default(),
        keys: Vec::new(),
        stats: Arc::default(),
    }
}

/// A declared type for a column of a kind (what `SHOW`-like code reads;
/// the kept values are the kind's).
fn type_of(kind: Kind) -> SqlType {
    match kind {
        Kind::Int { unsigned } => SqlType::BigInt { unsigned },
        Kind::Dec { scale } => SqlType::Decimal {
            precision: 65,
            scale,
            unsigned: false,
        },
        Kind::Double => SqlType::Double {
            digits: None,
            unsigned: false,
        },
        Kind::Date => SqlType::Date,
        Kind::DateTime { fsp } => SqlType::DateTime { fsp },
        Kind::Time { fsp } => SqlType::Time { fsp },
        Kind::Null | Kind::Str { collation: None } => SqlType::VarBinary { max: u16::MAX },
        Kind::Str {
            collation: Some(collation),
        } => SqlType::VarChar {
            max: u16::MAX,
            collation,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_rows_are_bounded() {
        let rows = vec![Vec::new(); DERIVED_ROWS_MAX];
        assert!(check_kept(&rows, "d").is_ok());
        let rows = vec![Vec::new(); DERIVED_ROWS_MAX + 1];
        let e = check_kept(&rows, "d").unwrap_err();
        assert_eq!(e.code, codes::RECORD_FILE_FULL);
        assert!(e.message.contains("DERIVED_ROWS_MAX"), "{}", e.message);
        let big = Val::Str(vec![b'x'; 1024 * 1024]);
        let rows = vec![vec![big]; DERIVED_BYTES_MAX / (1024 * 1024) + 1];
        let e = check_kept(&rows, "d").unwrap_err();
        assert!(e.message.contains("DERIVED_BYTES_MAX"), "{}", e.message);
    }
}
