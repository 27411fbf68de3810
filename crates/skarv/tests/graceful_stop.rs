//! Real processes: a graceful stop of the whole cluster (`skarv sandbox
//! --stop`, which asks the management server to shut down) keeps every
//! committed row, though no global checkpoint would have made the last
//! commits durable before it (`TimeBetweenGlobalCheckpoints` at 30 s): the
//! stopping TCs hurry the GCP of their last commits and wait for it
//! (docs/transactions.md, "Stopping a node on purpose").

mod common;

use std::time::Duration;

use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{Cluster, ExecMode, ScanOptions, Value};

use common::{skarv, text, Sandbox};

const ROWS: i64 = 200;
/// Attempts of the read while the restarted cluster comes up.
const READ_ATTEMPTS_MAX: u32 = 300;

fn bigint(name: &str) -> Column {
    Column::new(name, ColumnType::BigInt { unsigned: false })
}

/// Every row of `gs_rows` as (id, value), read in one scan; retried while
/// the cluster comes back.
fn read_rows(connect: &str) -> Vec<(i64, i64)> {
    let mut last = String::new();
    for _ in 0..READ_ATTEMPTS_MAX {
        let attempt = || -> skarv_client::Result<Vec<(i64, i64)>> {
            let cluster = Cluster::connect(connect)?;
            let session = cluster.session()?;
            let table = session.table("gs_rows")?;
            let tx = session.begin()?;
            let mut rows = Vec::new();
            for row in tx.scan(&table, ScanOptions::default())? {
                let row = row?;
                let int = |column: &str| match row.get(column) {
                    Some(Value::Int(v)) => *v,
                    other => panic!("column {column}: {other:?}"),
                };
                rows.push((int("id"), int("v")));
            }
            tx.execute(ExecMode::Commit)?;
            rows.sort_unstable();
            Ok(rows)
        };
        match attempt() {
            Ok(rows) => return rows,
            Err(error) => last = error.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the restarted cluster did not serve a scan: {last}");
}

#[test]
fn a_graceful_stop_of_the_whole_cluster_keeps_every_commit() {
    let sandbox = Sandbox::start_configured(
        "gracefulstop",
        32_000,
        2,
        &["--set", "TimeBetweenGlobalCheckpoints=30000"],
    );
    {
        let cluster = Cluster::connect(&sandbox.connect).expect("connect");
        let session = cluster.session().expect("session");
        let def = TableDef::new("gs_rows", 0, vec![bigint("id"), bigint("v")])
            .primary_key(vec![0])
            .partitions(0);
        session.create_table(&def).expect("create gs_rows");
        let table = session.table("gs_rows").expect("gs_rows");
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(50) {
            let tx = session.begin().expect("begin");
            for &id in chunk {
                tx.insert(&table, &[("id", Value::Int(id)), ("v", Value::Int(id * 3))])
                    .expect("insert");
            }
            let outcome = tx.execute(ExecMode::Commit).expect("commit");
            assert!(outcome.committed);
        }
    }
    let dir = sandbox.dir.to_str().expect("UTF-8").to_owned();
    let stopped = skarv(&["sandbox", "--stop", "--dir", &dir]);
    assert!(stopped.status.success(), "{}", text(&stopped));
    let base = sandbox
        .connect
        .rsplit(':')
        .next()
        .expect("host:port")
        .to_owned();
    let started = skarv(&[
        "sandbox",
        "--detach",
        "--dir",
        &dir,
        "--data-nodes",
        "2",
        "--replicas",
        "2",
        "--base-port",
        &base,
        "--set",
        "TimeBetweenGlobalCheckpoints=30000",
        "--sql-nodes",
        "0",
    ]);
    assert!(started.status.success(), "{}", text(&started));
    let expected: Vec<(i64, i64)> = (0..ROWS).map(|id| (id, id * 3)).collect();
    assert_eq!(read_rows(&sandbox.connect), expected);
}
