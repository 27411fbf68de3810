//! `SHOW`, `DESCRIBE`, `KILL` and `information_schema`.
//!
//! (Stub: filled in by the catalog work of issue 20.)

use sqlparser::ast::Statement;

use super::{Answered, Conn};
use crate::backend::ResultSink;
use crate::error::{SqlError, SqlResult};
use crate::value::ColumnMeta;

/// Runs a `SHOW`-like statement.
pub fn statement(
    _conn: &mut Conn<'_>,
    statement: &Statement,
    _more: bool,
    _sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// `COM_FIELD_LIST`.
pub fn field_list(_conn: &mut Conn<'_>, table: &str) -> SqlResult<Vec<ColumnMeta>> {
    Err(SqlError::unsupported(format_args!(
        "COM_FIELD_LIST of `{table}`"
    )))
}

/// A SHOW statement the parser does not take (`session::Extra::Text`):
/// `head` names it ("SHOW ENGINES", "SHOW CREATE DATABASE", …).
pub fn text_statement(
    _conn: &mut Conn<'_>,
    head: &str,
    _sql: &str,
    _more: bool,
    _sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{head}`")))
}
