//! Epochs in real processes (docs/transactions.md, "Global checkpoints"):
//! a 2×2 sandbox with `TimeBetweenEpochs=20` (`skarv sandbox --set`) under
//! `skarv bench flex` updates, while this test updates one row of its own
//! commit after commit. Every commit's epoch comes back in its outcome:
//! they never go back (each commit overwrote the one before), micro-GCPs
//! move lo inside a global checkpoint (lo > 0 seen) and GCPs move hi, and
//! `wait_durable` returns for the last commit's epoch with its GCI durable.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{Cluster, Epoch, ExecMode, Value};

/// `TimeBetweenEpochs` of the sandbox, in ms.
const EPOCH_INTERVAL_MS: u64 = 20;
/// How long the test commits (the sandbox's GCPs are 2 s apart).
const COMMIT_FOR: Duration = Duration::from_secs(5);
/// The bench's update phase; it outlasts the test's commits.
const BENCH_SECONDS: &str = "6";

#[test]
fn commit_epochs_advance_by_micro_gcps_and_wait_durable_returns() {
    let epochs_set = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let sandbox = Sandbox::start_configured("epochs", 29_000, 2, &["--set", &epochs_set]);
    let flex = |ops: &str, duration: Option<&str>| {
        let mut command = Command::new(SKARV);
        command.args(["bench", "flex", "--connect", &sandbox.connect]);
        command.args([
            "-t",
            "1",
            "-p",
            "8",
            "-o",
            "200",
            "--table",
            "flexepochs",
            "--ops",
            ops,
        ]);
        if let Some(seconds) = duration {
            command.args(["--duration", seconds]);
        }
        command
    };
    let insert = flex("insert", None).output().expect("run skarv bench flex");
    assert!(insert.status.success(), "{}", text(&insert));
    let bench = flex("update", Some(BENCH_SECONDS))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skarv bench flex");

    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let def = TableDef::new(
        "counter",
        0,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0]);
    session.create_table(&def).expect("create the table");
    let table = session.table("counter").expect("the table");
    let mut epochs: Vec<Epoch> = Vec::new();
    let until = Instant::now() + COMMIT_FOR;
    let mut v = 0i64;
    while Instant::now() < until {
        let tx = session
            .begin_with_hint(&table, &[Value::Int(1)])
            .expect("begin");
        tx.write(&table, &[("k", Value::Int(1)), ("v", Value::Int(v))])
            .expect("a valid write");
        let outcome = tx.execute(ExecMode::Commit).expect("committed");
        assert!(outcome.committed);
        let epoch = outcome.epoch.expect("a committed outcome has its epoch");
        assert_eq!(outcome.gci(), Some(epoch.hi()));
        if let Some(last) = epochs.last() {
            assert!(
                epoch >= *last,
                "commit {v} overwrote the one before yet is in an earlier epoch: {epoch} after {last}"
            );
        }
        epochs.push(epoch);
        v += 1;
        std::thread::sleep(Duration::from_millis(2));
    }

    let last = *epochs.last().expect("commits");
    let durable = session.wait_durable(last).expect("wait_durable");
    assert!(
        durable >= last.hi(),
        "wait_durable({last}) returned GCI {durable}, below the commit's"
    );
    let bench = bench.wait_with_output().expect("skarv bench flex ends");
    assert!(bench.status.success(), "{}", text(&bench));

    let with_lo = epochs.iter().filter(|e| e.lo() > 0).count();
    let mut distinct = epochs.clone();
    distinct.dedup();
    let his = {
        let mut his: Vec<u32> = epochs.iter().map(|e| e.hi()).collect();
        his.dedup();
        his.len()
    };
    // 5 s of commits: about 250 micro-GCPs and 2 or 3 GCPs; a loaded
    // machine stretches both, so the bounds are loose.
    assert!(
        with_lo * 2 > epochs.len(),
        "most commits are in a micro-GCP's epoch (lo > 0): {with_lo} of {}",
        epochs.len()
    );
    assert!(
        distinct.len() >= 20,
        "epochs advance every {EPOCH_INTERVAL_MS} ms: {} distinct in {} commits",
        distinct.len(),
        epochs.len()
    );
    assert!(his >= 2, "GCIs advance: {his} distinct (last {last})");
}
