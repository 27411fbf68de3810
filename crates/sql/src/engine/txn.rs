//! Transactions: autocommit, `BEGIN`/`COMMIT`/`ROLLBACK`, and the native
//! API's errors as MySQL errors.
//!
//! (Stub: filled in by the query work of issue 20.)

use std::marker::PhantomData;

use sqlparser::ast::Statement;

use super::{Answered, Conn};
use crate::error::{codes, SqlError, SqlResult};

/// A connection's transaction state.
#[derive(Default)]
pub struct TxState<'s> {
    _session: PhantomData<&'s ()>,
}

impl TxState<'_> {
    /// `status::IN_TRANS` while a transaction is open.
    pub fn status_flags(&self) -> u16 {
        0
    }
}

/// `BEGIN`, `COMMIT`, `ROLLBACK`.
pub fn statement(_conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// Rolls back whatever is open, ignoring errors (the connection is going).
pub fn rollback_quietly(_conn: &mut Conn<'_>) {}

/// A native API error as the MySQL error a client understands.
pub fn native_error(error: &skarv_client::Error) -> SqlError {
    SqlError::new(codes::UNKNOWN, error.to_string())
}

/// `SET autocommit`: turning it on commits an open transaction.
pub fn set_autocommit(conn: &mut Conn<'_>, on: bool) -> SqlResult<()> {
    conn.session.autocommit = on;
    Ok(())
}
