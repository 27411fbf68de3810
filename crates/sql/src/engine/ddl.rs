//! Schema statements: databases, tables, indexes.
//!
//! (Stub: filled in by the catalog work of issue 20.)

use sqlparser::ast::Statement;

use super::{Answered, Conn};
use crate::error::{SqlError, SqlResult};

/// Runs a schema statement.
pub fn statement(_conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}
