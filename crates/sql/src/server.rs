//! The listener: accepts MySQL connections and serves each on a thread of
//! its own with a native session.
//!
//! (Stub: filled in by the protocol work of issue 20.)

use std::net::IpAddr;

use crate::error::SqlError;

/// How `skarv sql` runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The management server, `host:port`.
    pub connect: String,
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on (MySQL's 3306 by default).
    pub port: u16,
    /// The `[mysqld]`/`[api]` slot to take; None: any free one.
    pub node_id: Option<u16>,
    /// Most client connections at once (MySQL's `max_connections`).
    pub max_connections: u32,
}

/// Connects to the cluster and serves MySQL clients until the process is
/// stopped.
pub fn serve(options: ServerOptions) -> Result<(), SqlError> {
    let _ = options;
    Err(SqlError::unsupported("serving"))
}
