//! The SQL engine tests' sandbox (`testkit::sandbox`), and an engine over it
//! with a connection logged in as root.
#![allow(dead_code)] // each test file uses its own part

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use skarv_client::{Cluster, ClusterOptions};
use sql::backend::{Backend, OkInfo, ResultSink};
use sql::engine::{Conn, Engine};
use sql::error::SqlError;
use sql::value::{ColumnMeta, SqlValue};

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
        found_rows: false,
        interactive: false,
    };
    conn.logged_in(&root).expect("root@localhost logs in");
}

/// Key requests a statistics refresh of a join's two tables may add: each
/// table's statistics transaction ends with one rollback request, at most
/// once per `STATS_REFRESH_MS` and table (`engine::stats`).
pub const STATS_REFRESH_KEY_REQS: u64 = 2;

/// Keeps the rows and the error of one statement.
#[derive(Default)]
pub struct RowsSink {
    pub rows: Vec<Vec<SqlValue>>,
    pub error: Option<SqlError>,
}

impl ResultSink for RowsSink {
    fn columns(&mut self, _columns: &[ColumnMeta]) -> io::Result<()> {
        Ok(())
    }
    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        self.rows.push(values.to_vec());
        Ok(())
    }
    fn end_rows(&mut self, _info: &OkInfo) -> io::Result<()> {
        Ok(())
    }
    fn ok(&mut self, _info: &OkInfo) -> io::Result<()> {
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.error = Some(error.clone());
        Ok(())
    }
}

/// The rows of a statement as text, or its error.
pub fn try_q(conn: &mut Conn<'_>, sql: &str) -> Result<Vec<Vec<String>>, SqlError> {
    let mut sink = RowsSink::default();
    conn.query(sql, false, &mut sink).expect("sink never fails");
    if let Some(e) = sink.error {
        return Err(e);
    }
    Ok(sink
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    SqlValue::Null => "NULL".to_owned(),
                    SqlValue::Int(i) => i.to_string(),
                    SqlValue::UInt(u) => u.to_string(),
                    SqlValue::Decimal(d) => d.clone(),
                    SqlValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .collect())
}

/// The rows of a statement as text; panics on an error.
pub fn q(conn: &mut Conn<'_>, sql: &str) -> Vec<Vec<String>> {
    try_q(conn, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Key-request batches (`TcKeyReq`) and scan requests one statement sent.
pub fn cost(engine: &Engine, conn: &mut Conn<'_>, sql: &str) -> (Vec<Vec<String>>, u64, u64) {
    let before = engine.cluster.stats();
    let rows = q(conn, sql);
    let after = engine.cluster.stats();
    (
        rows,
        after.tc_key_reqs_sent - before.tc_key_reqs_sent,
        after.scan_reqs_sent - before.scan_reqs_sent,
    )
}
