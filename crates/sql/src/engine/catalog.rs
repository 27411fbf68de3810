//! The catalog: databases and tables as SQL sees them, kept in the cluster.
//!
//! (Stub: filled in by the catalog work of issue 20.)

use std::sync::Arc;

use skarv_client::Session;

use super::Engine;
use crate::error::SqlResult;

/// Caches the SQL node shares between connections.
#[derive(Default)]
pub struct Shared {}

/// Makes sure the SQL node's system tables exist.
pub fn bootstrap(_engine: &Arc<Engine>, _session: &Session) -> SqlResult<()> {
    Ok(())
}
