//! Accounts and grants, kept in cluster tables so every SQL node agrees.
//!
//! (Stub: filled in by the catalog work of issue 20.)

use sqlparser::ast::Statement;

use super::{Answered, Conn};
use crate::backend::{Credentials, Login};
use crate::error::{SqlError, SqlResult};

/// `CREATE USER`, `GRANT`, `REVOKE`.
pub fn statement(_conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    Err(SqlError::unsupported(format_args!("`{statement}`")))
}

/// The stored credentials of an account (stub: root without a password).
pub fn credentials(_conn: &mut Conn<'_>, _login: &Login<'_>) -> SqlResult<Credentials> {
    Ok(Credentials {
        empty: true,
        native: [0; 20],
        sha2: [0; 32],
    })
}

/// Authentication passed.
pub fn logged_in(_conn: &mut Conn<'_>, _login: &Login<'_>) -> SqlResult<()> {
    Ok(())
}
