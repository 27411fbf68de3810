//! Prepared statements (`COM_STMT_PREPARE` / `EXECUTE`).
//!
//! (Stub: filled in by the query work of issue 20.)

use std::io;

use super::Conn;
use crate::backend::{Prepared, ResultSink};
use crate::error::{SqlError, SqlResult};
use crate::value::SqlValue;

/// A connection's prepared statements.
#[derive(Default)]
pub struct Statements {}

impl Statements {
    /// Forgets a statement.
    pub fn close(&mut self, _id: u32) {}

    /// Whether `id` is prepared.
    pub fn contains(&self, _id: u32) -> bool {
        false
    }
}

/// Prepares a statement.
pub fn prepare(_conn: &mut Conn<'_>, _sql: &str) -> SqlResult<Prepared> {
    Err(SqlError::unsupported("prepared statements"))
}

/// Executes a prepared statement.
pub fn execute(
    _conn: &mut Conn<'_>,
    id: u32,
    _params: &[SqlValue],
    sink: &mut dyn ResultSink,
) -> io::Result<()> {
    sink.error(&SqlError::new(
        crate::error::codes::UNKNOWN_STMT_HANDLER,
        format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
    ))
}
