//! A connection's session: variables, `SET`, `USE`, warnings, and the
//! statement splitter that recognises what `sqlparser` does not parse.
//!
//! (Stub: filled in by the catalog work of issue 20.)

use std::collections::BTreeMap;

use sqlparser::ast::Statement;

use super::{Answered, Conn, Stmt};
use crate::backend::{status, ResultSink};
use crate::error::{SqlError, SqlResult};

/// Variables by lowercase name.
#[derive(Clone, Debug, Default)]
pub struct Variables {
    /// Name → value as text.
    pub values: BTreeMap<String, String>,
}

impl Variables {
    /// The server's defaults.
    pub fn defaults() -> Variables {
        Variables::default()
    }
}

/// Statements `sqlparser` does not parse, recognised before it.
#[derive(Clone, Debug)]
pub enum Extra {}

/// A connection's session state.
pub struct SessionState {
    /// Session variables.
    pub vars: Variables,
    /// Current database.
    pub database: Option<String>,
    warnings: u16,
}

impl SessionState {
    /// A fresh session with the global variables' values.
    pub fn new(globals: Variables) -> SessionState {
        SessionState {
            vars: globals,
            database: None,
            warnings: 0,
        }
    }

    /// A statement starts: the last one's warnings are cleared.
    pub fn start_statement(&mut self) {
        self.warnings = 0;
    }

    /// The statement failed with `error` (`SHOW ERRORS` lists it).
    pub fn note_error(&mut self, _error: &SqlError) {}

    /// Warnings of the last statement.
    pub fn warning_count(&self) -> u16 {
        self.warnings
    }

    /// `status::AUTOCOMMIT` and the like.
    pub fn status_flags(&self) -> u16 {
        status::AUTOCOMMIT
    }
}

/// Splits and parses `COM_QUERY` text.
pub fn parse_query(_conn: &mut Conn<'_>, sql: &str, _multi: bool) -> SqlResult<Vec<Stmt>> {
    Ok(super::parse(sql)?
        .into_iter()
        .map(|s| Stmt::Sql(Box::new(s)))
        .collect())
}

/// Runs an [`Extra`] statement.
pub fn extra(
    _conn: &mut Conn<'_>,
    extra: &Extra,
    _more: bool,
    _sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    match *extra {}
}

/// `SET …`.
pub fn set(_conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// `USE db`.
pub fn use_statement(_conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// `COM_INIT_DB`.
pub fn use_database(conn: &mut Conn<'_>, database: &str) -> SqlResult<()> {
    conn.session.database = Some(database.to_owned());
    Ok(())
}

/// `COM_RESET_CONNECTION`'s session part.
pub fn reset(conn: &mut Conn<'_>) {
    let globals = conn
        .engine
        .globals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let database = conn.session.database.take();
    conn.session = SessionState::new(globals);
    conn.session.database = database;
}
