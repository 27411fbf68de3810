//! The executors: queries and writes run with the native API.
//!
//! (Stub: filled in by the query work of issue 20.)

use sqlparser::ast::Statement;

use super::{Answered, Conn};
use crate::backend::ResultSink;
use crate::error::{SqlError, SqlResult};
use crate::value::SqlValue;

/// Runs a query (`SELECT`, `UNION`, …), its rows to `sink`.
pub fn query(
    _conn: &mut Conn<'_>,
    statement: &Statement,
    _params: &[SqlValue],
    _more: bool,
    _sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// Runs `INSERT`, `REPLACE`, `UPDATE` or `DELETE`.
pub fn write(
    _conn: &mut Conn<'_>,
    statement: &Statement,
    _params: &[SqlValue],
) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// The value of a constant expression (`SET @x = expr`).
pub fn eval_constant(_conn: &mut Conn<'_>, expr: &sqlparser::ast::Expr) -> SqlResult<SqlValue> {
    Err(SqlError::unsupported(format_args!(
        "the expression `{expr}`"
    )))
}
