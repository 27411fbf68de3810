//! Read hints against a real sandbox of 4 data nodes (2 node groups × 2
//! replicas; the `skarv` binary of this build: `cargo build -p skarv`
//! first, or set `SKARV_BIN`). A fully replicated table, a `READ_BACKUP`
//! table and a plain one: their options read back from the dictionary,
//! rows written and read back through `begin_with_read_hint`, and where
//! those transactions start: every data node for the fully replicated
//! table, both replicas of the key's partition for the `READ_BACKUP`
//! table, only the primary for the plain one.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{Cluster, ExecMode, LockMode, Session, Value};

mod common;
use common::*;

const ROWS: i64 = 40;
/// Read-hinted transactions per key: enough turns to reach every node.
const READS_PER_KEY: usize = 8;

fn table(name: &str) -> TableDef {
    TableDef::new(
        name,
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .partitions(0)
}

/// Writes `ROWS` rows, then reads each key `READS_PER_KEY` times through
/// read-hinted transactions; the nodes those started on, per key.
fn write_and_read(session: &Session, name: &str) -> Vec<BTreeSet<u8>> {
    let t = session.table(name).expect("table");
    let tx = session.begin().expect("begin");
    for id in 0..ROWS {
        tx.insert(&t, &[("id", Value::Int(id)), ("v", Value::Int(id * 10))])
            .expect("insert");
    }
    tx.execute(ExecMode::Commit).expect("commit the rows");
    (0..ROWS)
        .map(|id| {
            let key = [Value::Int(id)];
            let mut nodes = BTreeSet::new();
            for _ in 0..READS_PER_KEY {
                let tx = session.begin_with_read_hint(&t, &key).expect("begin");
                nodes.insert(tx.node().get());
                let read = tx.read(&t, &key, LockMode::Committed).expect("read");
                let outcome = tx.execute(ExecMode::Commit).expect("read commits");
                let row = outcome.row(read).expect("the row");
                assert_eq!(row.get("v"), Some(&Value::Int(id * 10)), "{name}: key {id}");
            }
            nodes
        })
        .collect()
}

#[test]
fn read_hints_spread_over_the_replicas() {
    let sandbox = Sandbox::start("read-hints", 4, 2, 27000);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let until = Instant::now() + Duration::from_secs(30);
    while cluster.live_nodes().len() < 4 {
        assert!(
            Instant::now() < until,
            "4 live data nodes: {:?}",
            cluster.live_nodes()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let session = cluster.session().expect("session");
    session
        .create_table(&table("everywhere").fully_replicated(true))
        .expect("create the fully replicated table");
    session
        .create_table(&table("backups").read_backup(true))
        .expect("create the READ_BACKUP table");
    session
        .create_table(&table("plain"))
        .expect("create the plain table");

    let everywhere = session.table("everywhere").expect("table");
    assert!(everywhere.def().fully_replicated && everywhere.def().read_backup);
    let backups = session.table("backups").expect("table");
    assert!(backups.def().read_backup && !backups.def().fully_replicated);
    let plain = session.table("plain").expect("table");
    assert!(!plain.def().read_backup && !plain.def().fully_replicated);

    let all: BTreeSet<u8> = cluster.live_nodes().iter().map(|n| n.get()).collect();
    for (id, nodes) in write_and_read(&session, "everywhere").iter().enumerate() {
        assert_eq!(
            nodes, &all,
            "fully replicated, key {id}: every node serves it"
        );
    }
    let placement = cluster.placement().clone();
    let mut scratch = Vec::new();
    for (id, nodes) in write_and_read(&session, "backups").iter().enumerate() {
        let p = backups
            .partition_of_key(&[Value::Int(id as i64)], &mut scratch)
            .expect("key");
        let replicas: BTreeSet<u8> = placement.home(p).replicas().map(|n| n.get()).collect();
        assert_eq!(
            nodes, &replicas,
            "READ_BACKUP, key {id}: both replicas serve it"
        );
    }
    for (id, nodes) in write_and_read(&session, "plain").iter().enumerate() {
        let p = plain
            .partition_of_key(&[Value::Int(id as i64)], &mut scratch)
            .expect("key");
        let primary = placement.home(p).primary().get();
        assert_eq!(
            nodes,
            &BTreeSet::from([primary]),
            "plain, key {id}: the primary only"
        );
    }
    for name in ["everywhere", "backups", "plain"] {
        session.drop_table(name).expect("drop");
    }
}
