//! The SQL engine tests' sandbox (`testkit::sandbox`), and an engine over it
//! with a connection logged in as root.
#![allow(dead_code)] // each test file uses its own part

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use skarv_client::{Cluster, ClusterOptions};
use sql::backend::Backend;
use sql::engine::{Conn, Engine};

pub use testkit::sandbox::*;

/// An engine on `sandbox`'s cluster (requests time out after 10 s rather
/// than hang a test).
pub fn engine_on(sandbox: &Sandbox) -> Arc<Engine> {
    let options = ClusterOptions {
        request_timeout: Duration::from_secs(10),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&sandbox.connect, options).expect("connects");
    Engine::start(cluster).expect("engine")
}

/// Logs `conn` in as root@localhost, without a database.
pub fn log_in_root(conn: &mut Conn<'_>) {
    let root = sql::backend::Login {
        user: "root",
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        database: None,
    };
    conn.logged_in(&root).expect("root@localhost logs in");
}
