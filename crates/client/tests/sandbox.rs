//! The client against a real cluster: a `skarv sandbox` of one data node
//! (the `skarv` binary built next to this test: `cargo build -p skarv`
//! first, or set `SKARV_BIN`). Every operation type and scan type is
//! checked against a model (a `BTreeMap`), then lock conflicts, a
//! 1,000-operation batch in one round trip, bad input, and the two
//! examples run as processes.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use skarv_client::schema_types::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};
use skarv_client::{
    codes, Cluster, ClusterOptions, CmpOp, ExecMode, Filter, LinkKind, LockMode, Op, Row,
    ScanOptions, Session, Value,
};

mod common;
use common::*;

fn int(v: i64) -> Value {
    Value::Int(v)
}

/// Table `accounts`: id (key), owner (unique), balance (ordered index), note (nullable).
fn create_accounts(session: &Session) {
    let def = TableDef::new(
        "accounts",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new(
                "owner",
                ColumnType::VarChar {
                    max: 32,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
            Column::new("balance", ColumnType::BigInt { unsigned: false }),
            Column::new(
                "note",
                ColumnType::VarChar {
                    max: 16,
                    collation: Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_owner".into(),
        id: 1,
        columns: vec![1],
        kind: IndexKind::Unique,
    })
    .index(IndexDef {
        name: "by_balance".into(),
        id: 2,
        columns: vec![2],
        kind: IndexKind::Ordered,
    })
    .partitions(0);
    session.create_table(&def).expect("create accounts");
}

type Model = BTreeMap<i64, (String, i64)>;

fn scan_all(session: &Session, options: ScanOptions<'_>) -> Vec<(i64, i64)> {
    let accounts = session.table("accounts").expect("table");
    let tx = session.begin().expect("begin");
    let rows: Vec<(i64, i64)> = tx
        .scan(&accounts, options)
        .expect("scan")
        .map(|r| {
            let r = r.expect("row");
            let id = match r.get("id") {
                Some(Value::Int(v)) => *v,
                other => panic!("id {other:?}"),
            };
            let balance = match r.get("balance") {
                Some(Value::Int(v)) => *v,
                other => panic!("balance {other:?}"),
            };
            (id, balance)
        })
        .collect();
    tx.execute(ExecMode::Commit).expect("commit");
    rows
}

fn operations_match_a_model(session: &Session) {
    let accounts = session.table("accounts").expect("table");
    let mut model = Model::new();
    let tx = session.begin().expect("begin");
    for id in 0..100i64 {
        let owner = format!("owner{id}");
        tx.insert(
            &accounts,
            &[
                ("id", int(id)),
                ("owner", Value::String(owner.clone())),
                ("balance", int(id * 3)),
            ],
        )
        .expect("insert");
        model.insert(id, (owner, id * 3));
    }
    tx.execute(ExecMode::Commit).expect("insert 100");
    let tx = session
        .begin_with_hint(&accounts, &[int(7)])
        .expect("begin");
    tx.update(&accounts, &[int(7)], &[("balance", int(1_000))])
        .expect("update");
    tx.write(
        &accounts,
        &[
            ("id", int(200)),
            ("owner", Value::String("new".into())),
            ("balance", int(5)),
        ],
    )
    .expect("write");
    tx.delete(&accounts, &[int(8)]).expect("delete");
    tx.execute(ExecMode::Commit).expect("mixed batch");
    model.get_mut(&7).expect("7").1 = 1_000;
    model.insert(200, ("new".into(), 5));
    model.remove(&8);
    // Reads by key and by unique key, and a missing row with ignore_error.
    let tx = session.begin().expect("begin");
    let by_key = tx
        .read(&accounts, &[int(7)], LockMode::Committed)
        .expect("read");
    let owner = [Value::String("owner9".into())];
    let by_owner = tx
        .define(Op::read(&accounts, &owner).index("by_owner"))
        .expect("read by owner");
    let gone = tx
        .define(Op::read(&accounts, &[int(8)]).ignore_error())
        .expect("read gone");
    let outcome = tx.execute(ExecMode::Commit).expect("reads");
    assert_eq!(
        outcome.row(by_key).and_then(|r| r.get("balance")),
        Some(&int(1_000))
    );
    assert_eq!(
        outcome.row(by_owner).and_then(|r| r.get("id")),
        Some(&int(9))
    );
    assert_eq!(
        outcome.error(gone).map(|e| e.code),
        Some(codes::NO_SUCH_ROW)
    );
    // A failing op aborts the transaction and leaves nothing behind.
    let tx = session.begin().expect("begin");
    tx.update(&accounts, &[int(1)], &[("balance", int(-1))])
        .expect("update");
    tx.insert(
        &accounts,
        &[
            ("id", int(2)),
            ("owner", Value::String("dup".into())),
            ("balance", int(0)),
        ],
    )
    .expect("insert of an existing key");
    let error = tx.execute(ExecMode::Commit).expect_err("duplicate key");
    assert_eq!(error.code, codes::DUPLICATE_KEY, "{error}");
    // Full scan, range scan on the ordered index, filter, pruned scan.
    let full = scan_all(session, ScanOptions::default());
    let mut expected: Vec<(i64, i64)> = model.iter().map(|(k, (_, b))| (*k, *b)).collect();
    let mut sorted = full.clone();
    sorted.sort();
    assert_eq!(
        sorted, expected,
        "full scan = model (the aborted update left nothing)"
    );
    let range = scan_all(
        session,
        ScanOptions {
            index: Some("by_balance"),
            lower: Some((vec![int(30)], true)),
            upper: Some((vec![int(60)], false)),
            ..ScanOptions::default()
        },
    );
    let in_range: Vec<i64> = range.iter().map(|(_, b)| *b).collect();
    let mut model_range: Vec<i64> = model
        .values()
        .map(|(_, b)| *b)
        .filter(|b| (30..60).contains(b))
        .collect();
    model_range.sort();
    assert_eq!(in_range, model_range, "range scan in index order");
    let balance = accounts.column("balance").expect("column") as u16;
    let filtered = scan_all(
        session,
        ScanOptions {
            filter: Some(Filter::Cmp {
                column: balance,
                op: CmpOp::Gt,
                value: int(250),
            }),
            ..Default::default()
        },
    );
    expected.retain(|(_, b)| *b > 250);
    let mut filtered_sorted = filtered;
    filtered_sorted.sort();
    assert_eq!(filtered_sorted, expected, "pushed-down filter");
    let pruned = scan_all(
        session,
        ScanOptions {
            partition_key: Some(vec![int(7)]),
            ..Default::default()
        },
    );
    assert!(
        pruned.contains(&(7, 1_000)),
        "the pruned scan holds its key's row"
    );
    assert!(pruned.len() < model.len() || session.cluster().placement().default_partitions() == 1);
}

/// `Row::each_value` hands out what `Row::values` holds, for rows still in
/// their reply's bytes (a scan's, a read's) and for rows already decoded:
/// strings, NULLs and a projection's order included.
fn rows_lend_their_values(session: &Session) {
    let accounts = session.table("accounts").expect("table");
    let tx = session.begin().expect("begin");
    for id in [300i64, 301, 302] {
        let note = match id {
            301 => Value::Null,
            _ => Value::String(format!("note ü{id}")),
        };
        tx.insert(
            &accounts,
            &[
                ("id", int(id)),
                ("owner", Value::String(format!("lender{id}"))),
                ("balance", int(-id)),
                ("note", note),
            ],
        )
        .expect("insert");
    }
    tx.execute(ExecMode::Commit).expect("insert 3");
    let lent = |r: &Row| {
        let mut values = Vec::new();
        r.each_value(|v| values.push(v.to_value()));
        values
    };
    let tx = session.begin().expect("begin");
    let options = ScanOptions {
        index: Some("by_balance"),
        upper: Some((vec![int(-300)], true)),
        projection: Some(vec!["note", "id", "owner"]),
        ..ScanOptions::default()
    };
    let mut seen = Vec::new();
    for r in tx.scan(&accounts, options).expect("scan") {
        let r = r.expect("row");
        let before = lent(&r);
        assert_eq!(before, r.values(), "a scanned row, lent, then decoded");
        assert_eq!(lent(&r), r.values(), "a decoded row lends the same");
        seen.push(before);
    }
    let note = |id: i64| Value::String(format!("note ü{id}"));
    let owner = |id: i64| Value::String(format!("lender{id}"));
    assert_eq!(
        seen,
        [
            vec![note(302), int(302), owner(302)],
            vec![Value::Null, int(301), owner(301)],
            vec![note(300), int(300), owner(300)],
        ],
        "the projection's order, by balance"
    );
    let read = tx
        .read(&accounts, &[int(302)], LockMode::Committed)
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("commit");
    let read = outcome.row(read).expect("row 302");
    assert_eq!(lent(read), [int(302), owner(302), int(-302), note(302)]);
    assert_eq!(lent(read), read.values());
    let tx = session.begin().expect("begin");
    for id in [300i64, 301, 302] {
        tx.delete(&accounts, &[int(id)]).expect("delete");
    }
    tx.execute(ExecMode::Commit).expect("delete 3");
}

fn a_thousand_ops_in_one_round_trip(session: &Session) {
    let accounts = session.table("accounts").expect("table");
    let before = session.cluster().stats().tc_key_reqs_sent;
    let tx = session.begin().expect("begin");
    for id in 1_000..2_000i64 {
        tx.insert(
            &accounts,
            &[
                ("id", int(id)),
                ("owner", Value::String(format!("o{id}"))),
                ("balance", int(0)),
            ],
        )
        .expect("insert");
    }
    assert!(
        tx.execute(ExecMode::Commit)
            .expect("1,000 inserts")
            .committed
    );
    assert_eq!(
        session.cluster().stats().tc_key_reqs_sent - before,
        1,
        "one request for 1,000 ops"
    );
}

fn locks_conflict(cluster: &Cluster) {
    let reader = cluster.session().expect("session");
    let accounts = reader.table("accounts").expect("table");
    let tx = reader.begin().expect("begin");
    tx.read(&accounts, &[int(1)], LockMode::Shared)
        .expect("shared read");
    tx.execute(ExecMode::NoCommit).expect("lock taken");
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let session = cluster.session().expect("session");
            let accounts = session.table("accounts").expect("table");
            // A committed read never waits for the lock.
            let read = session.begin().expect("begin");
            let h = read
                .read(&accounts, &[int(1)], LockMode::Committed)
                .expect("read");
            let started = Instant::now();
            let out = read.execute(ExecMode::Commit).expect("committed read");
            assert!(out.row(h).is_some());
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "a committed read does not wait"
            );
            let write = session.begin().expect("begin");
            write
                .update(&accounts, &[int(1)], &[("balance", int(77))])
                .expect("update");
            write.execute(ExecMode::Commit)
        });
        // The writer waits for the shared lock until the reader ends
        // (well inside TransactionDeadlockDetectionTimeout, 1.2 s).
        std::thread::sleep(Duration::from_millis(300));
        assert!(!writer.is_finished(), "a writer waits for a shared lock");
        tx.execute(ExecMode::Commit).expect("reader commits");
        let result = writer.join().expect("writer thread");
        assert!(
            result.is_ok(),
            "the writer goes on once the lock is free: {result:?}"
        );
    });
    let check = reader.begin().expect("begin");
    let h = check
        .read(&accounts, &[int(1)], LockMode::Committed)
        .expect("read");
    let out = check.execute(ExecMode::Commit).expect("read back");
    assert_eq!(out.row(h).and_then(|r| r.get("balance")), Some(&int(77)));
}

/// A transaction dropped while it holds a lock is rolled back: another
/// one gets the lock at once, and the dropped one's change is not there.
fn a_dropped_transaction_releases_its_locks(cluster: &Cluster) {
    let session = cluster.session().expect("session");
    let accounts = session.table("accounts").expect("table");
    {
        let tx = session.begin().expect("begin");
        tx.update(&accounts, &[int(2)], &[("balance", int(-5))])
            .expect("update");
        tx.execute(ExecMode::NoCommit).expect("lock taken");
        // Dropped without commit or rollback.
    }
    let other = cluster.session().expect("session");
    let write = other.begin().expect("begin");
    let h = write
        .read(&accounts, &[int(2)], LockMode::Exclusive)
        .expect("read");
    let out = write
        .execute(ExecMode::Commit)
        .expect("the lock is free: the dropped transaction was rolled back");
    assert_ne!(out.row(h).and_then(|r| r.get("balance")), Some(&int(-5)));
}

/// Two transactions lock two rows in opposite order: one of them ends with
/// the deadlock timeout (266, temporary), no sooner than the timeout, and
/// the other then gets its lock and commits.
fn deadlock_ends_in_the_timeout_error(cluster: &Cluster) {
    let lock_then = |first: i64, second: i64| {
        let session = cluster.session().expect("session");
        let accounts = session.table("accounts").expect("table");
        let tx = session.begin().expect("begin");
        tx.read(&accounts, &[int(first)], LockMode::Exclusive)
            .expect("read");
        tx.execute(ExecMode::NoCommit).expect("first lock");
        // Both hold their first lock before either asks for its second.
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        tx.update(&accounts, &[int(second)], &[("balance", int(first))])
            .expect("update");
        let result = tx.execute(ExecMode::Commit);
        (result, started.elapsed())
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| lock_then(1, 2));
        let b = scope.spawn(|| lock_then(2, 1));
        (a.join().expect("a"), b.join().expect("b"))
    });
    // Both may time out in the same sweep; at least one must, and a
    // transaction that did not time out committed.
    let outcomes = [&a, &b];
    let timed_out: Vec<_> = outcomes.iter().filter(|(r, _)| r.is_err()).collect();
    assert!(
        !timed_out.is_empty(),
        "a deadlock does not last: {a:?} {b:?}"
    );
    for (result, waited) in timed_out {
        let error = result.as_ref().expect_err("a victim");
        assert_eq!(error.code, codes::LOCK_TIMEOUT, "{error}");
        assert!(error.is_temporary(), "a deadlock victim may retry");
        assert!(
            *waited >= Duration::from_millis(1_000),
            "ended after {waited:?}, before the timeout"
        );
    }
}

/// A scan that locks its rows hands each row's key over, so the same
/// transaction updates or deletes the rows it scanned ("take over"), and
/// another transaction's write to a scanned row waits for the commit.
fn scan_and_take_over(cluster: &Cluster, session: &Session) {
    let before: BTreeMap<i64, i64> = scan_all(session, ScanOptions::default())
        .into_iter()
        .collect();
    let accounts = session.table("accounts").expect("table");
    let tx = session.begin().expect("begin");
    let rows: Vec<_> = tx
        .scan(
            &accounts,
            ScanOptions {
                lock: Some(LockMode::Exclusive),
                ..ScanOptions::default()
            },
        )
        .expect("locking scan")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(rows.len(), before.len(), "the scan sees every row");
    let mut expected = before.clone();
    let (mut updated, mut deleted) = (0, 0);
    for row in &rows {
        let id = match row.key() {
            [Value::Int(id)] => *id,
            other => panic!("a locking scan hands over the key: {other:?}"),
        };
        if id % 2 == 0 {
            tx.delete(&accounts, row.key())
                .expect("delete the scanned row");
            expected.remove(&id);
            deleted += 1;
        } else {
            let balance = expected[&id] + 1_000;
            tx.update(&accounts, row.key(), &[("balance", int(balance))])
                .expect("update the scanned row");
            expected.insert(id, balance);
            updated += 1;
        }
    }
    assert!(updated > 0 && deleted > 0, "both kinds of takeover ran");
    tx.execute(ExecMode::NoCommit).expect("takeover operations");
    // Another transaction's write to a scanned row waits for our commit.
    let first = *before.keys().next().expect("a row");
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let other = cluster.session().expect("session");
            let accounts = other.table("accounts").expect("table");
            let w = other.begin().expect("begin");
            w.write(
                &accounts,
                &[
                    ("id", int(first)),
                    ("owner", Value::String(format!("w{first}"))),
                    ("balance", int(-1)),
                    ("note", Value::Null),
                ],
            )
            .expect("write");
            w.execute(ExecMode::Commit)
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !writer.is_finished(),
            "the scanned row is locked until commit"
        );
        tx.execute(ExecMode::Commit).expect("commit the takeover");
        writer
            .join()
            .expect("writer")
            .expect("the writer goes on after the commit");
    });
    expected.insert(first, -1);
    let after: BTreeMap<i64, i64> = scan_all(session, ScanOptions::default())
        .into_iter()
        .collect();
    assert_eq!(
        after, expected,
        "updates and deletes of scanned rows, then the waiting write"
    );
}

/// An ordered index added to a table that holds rows covers every row at
/// once; dropped, it is gone; a unique index cannot be added by ALTER.
fn indexes_on_live_data(session: &Session) {
    let mut expected = scan_all(session, ScanOptions::default());
    assert!(!expected.is_empty(), "the table holds rows");
    expected.sort_by_key(|&(id, balance)| (balance, id));
    session
        .create_index(
            "accounts",
            "by_balance_id",
            &["balance", "id"],
            IndexKind::Ordered,
        )
        .expect("add an ordered index");
    let accounts = session.table("accounts").expect("table");
    assert!(accounts.index("by_balance_id").is_some());
    let in_order = scan_all(
        session,
        ScanOptions {
            index: Some("by_balance_id"),
            ..ScanOptions::default()
        },
    );
    assert_eq!(
        in_order, expected,
        "the new index orders every existing row"
    );
    let refused = session
        .create_index("accounts", "by_note", &["note"], IndexKind::Unique)
        .expect_err("a unique index is not added to a table by ALTER");
    assert!(refused.is_permanent(), "{refused}");
    session
        .drop_index("accounts", "by_balance_id")
        .expect("drop the index");
    let accounts = session.table("accounts").expect("table");
    assert!(accounts.index("by_balance_id").is_none());
    let tx = session.begin().expect("begin");
    let scan = tx.scan(
        &accounts,
        ScanOptions {
            index: Some("by_balance_id"),
            ..ScanOptions::default()
        },
    );
    assert!(scan.is_err(), "a dropped index cannot be scanned");
    tx.execute(ExecMode::Rollback).expect("rollback");
}

fn bad_input(session: &Session) {
    let accounts = session.table("accounts").expect("table");
    assert_eq!(
        session.table("no_such_table").expect_err("unknown").code,
        codes::NO_SUCH_TABLE
    );
    let tx = session.begin().expect("begin");
    let wrong_type = tx.insert(
        &accounts,
        &[
            ("id", Value::String("x".into())),
            ("owner", int(1)),
            ("balance", int(0)),
        ],
    );
    assert!(wrong_type.expect_err("wrong type").is_permanent());
    let long = "x".repeat(100);
    let too_long = tx.insert(
        &accounts,
        &[
            ("id", int(5_000)),
            ("owner", Value::String(long)),
            ("balance", int(0)),
        ],
    );
    assert_eq!(too_long.expect_err("too long").code, codes::VALUE_TOO_LONG);
    let unknown = tx
        .update(&accounts, &[int(1)], &[("nope", int(1))])
        .expect_err("unknown column");
    assert!(
        unknown.message.contains("nope") && unknown.message.contains("accounts"),
        "{unknown}"
    );
    tx.read(&accounts, &[int(1)], LockMode::Committed)
        .expect("still usable");
    tx.execute(ExecMode::Commit).expect("commits");
}

fn run_example(connect: &str, name: &str, extra: &[&str]) {
    let bin = profile_dir().join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing (cargo test builds the examples)",
        bin.display()
    );
    let output = Command::new(&bin)
        .args(["--connect", connect])
        .args(extra)
        .output()
        .expect("run example");
    assert!(output.status.success(), "example {name}: {}", text(&output));
    assert!(
        !output.stdout.is_empty(),
        "example {name} prints what it did"
    );
}

/// Partitions of the table `parts`, rows, and the ids a scan lists.
const PARTS: u32 = 8;
const PARTS_ROWS: i64 = 200;
const PARTS_KEYS: [i64; 4] = [1, 5, 9, 13];

/// A scan given several distribution-key values reads exactly the rows of
/// their partitions (the TC visits only the listed ones); a statistics
/// scan counts every partition's rows.
fn partition_lists_and_statistics(session: &Session) {
    let def = TableDef::new(
        "parts",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .partitions(PARTS);
    session.create_table(&def).expect("create parts");
    let parts = session.table("parts").expect("table");
    let tx = session.begin().expect("begin");
    for id in 0..PARTS_ROWS {
        tx.insert(&parts, &[("id", int(id)), ("v", int(id * 3))])
            .expect("insert");
    }
    tx.execute(ExecMode::Commit).expect("commit");

    let mut scratch = Vec::new();
    let partition = |id: i64, scratch: &mut Vec<u8>| {
        parts
            .partition_of_key(&[int(id)], scratch)
            .expect("partition")
    };
    let listed: Vec<u32> = PARTS_KEYS
        .iter()
        .map(|k| partition(*k, &mut scratch))
        .collect();
    let mut expected: Vec<i64> = (0..PARTS_ROWS)
        .filter(|id| listed.contains(&partition(*id, &mut scratch)))
        .collect();
    expected.sort_unstable();
    assert!(expected.len() < PARTS_ROWS as usize, "{listed:?}");
    let tx = session.begin().expect("begin");
    let mut found: Vec<i64> = tx
        .scan(
            &parts,
            ScanOptions {
                partition_keys: PARTS_KEYS.iter().map(|k| vec![int(*k)]).collect(),
                ..ScanOptions::default()
            },
        )
        .expect("scan")
        .map(|r| match r.expect("row").get("id") {
            Some(Value::Int(v)) => *v,
            other => panic!("id {other:?}"),
        })
        .collect();
    found.sort_unstable();
    assert_eq!(found, expected, "partitions {listed:?}");

    // One partition by its number: exactly the rows whose key it holds;
    // a number past the table's partitions is refused.
    for only in 0..PARTS {
        let mut found: Vec<i64> = tx
            .scan(
                &parts,
                ScanOptions {
                    partition: Some(only),
                    ..ScanOptions::default()
                },
            )
            .expect("scan")
            .map(|r| match r.expect("row").get("id") {
                Some(Value::Int(v)) => *v,
                other => panic!("id {other:?}"),
            })
            .collect();
        found.sort_unstable();
        let held: Vec<i64> = (0..PARTS_ROWS)
            .filter(|id| partition(*id, &mut scratch) == only)
            .collect();
        assert_eq!(found, held, "partition {only}");
    }
    let refused = tx.scan(
        &parts,
        ScanOptions {
            partition: Some(PARTS),
            ..ScanOptions::default()
        },
    );
    let message = refused.err().expect("an unknown partition").to_string();
    assert!(
        message.contains(&format!("partition {PARTS} of table")),
        "{message}"
    );

    let stats = tx.table_stats(&parts).expect("statistics");
    assert_eq!(stats.rows, PARTS_ROWS as u64);
    assert_eq!(stats.partitions, PARTS);
    assert!(stats.memory_bytes > 0);
    tx.execute(ExecMode::Commit).expect("commit");
    session.drop_table("parts").expect("drop parts");
}

/// Rows of `distinct_scans`' table: five runs of `g`, 480 rows each (60
/// per partition), and three values of `h` within each.
const RUNS_ROWS: i64 = 2_400;

/// A distinct scan (a loose index scan) returns, per partition, the first
/// row of each run of rows equal in the index's first columns that pass
/// the filter and bounds, in index order, each prefix once; long runs are
/// stepped over by seeks (`DISTINCT_SEEK_AFTER_ROWS` in the LDM) and
/// batches of two rows resume mid-run. Locks and too long a prefix are
/// refused.
fn distinct_scans(session: &Session) {
    let def = TableDef::new(
        "runs",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("g", ColumnType::BigInt { unsigned: false }),
            Column::new("h", ColumnType::BigInt { unsigned: false }),
            Column::new("w", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_g_h".into(),
        id: 1,
        columns: vec![1, 2],
        kind: IndexKind::Ordered,
    })
    .partitions(PARTS);
    session.create_table(&def).expect("create runs");
    let runs = session.table("runs").expect("table");
    let row = |id: i64| (id, id / 480, id % 3, id % 11);
    for first in (0..RUNS_ROWS).step_by(400) {
        let tx = session.begin().expect("begin");
        for id in first..first + 400 {
            let (_, g, h, w) = row(id);
            tx.insert(
                &runs,
                &[("id", int(id)), ("g", int(g)), ("h", int(h)), ("w", int(w))],
            )
            .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("commit");
    }
    let mut scratch = Vec::new();
    let value = |v: Option<&Value>| match v {
        Some(Value::Int(v)) => *v,
        other => panic!("{other:?}"),
    };
    let tx = session.begin().expect("begin");
    let scan = |partition: u32, prefix: u8, descending: bool, filtered: bool| {
        let options = ScanOptions {
            index: Some("by_g_h"),
            distinct_prefix: prefix,
            descending,
            partition: Some(partition),
            batch_rows: 2,
            // Runs from g = 2 on, of rows whose w is not 0: a run's
            // first row may fail it.
            lower: filtered.then(|| (vec![int(2)], true)),
            filter: filtered.then_some(Filter::Cmp {
                column: 3,
                op: CmpOp::Ne,
                value: int(0),
            }),
            projection: Some(vec!["g", "h"]),
            ..ScanOptions::default()
        };
        tx.scan(&runs, options)
            .expect("scan")
            .map(|r| {
                let r = r.expect("row");
                (value(r.get("g")), value(r.get("h")))
            })
            .collect::<Vec<(i64, i64)>>()
    };
    for partition in 0..PARTS {
        let held: Vec<(i64, i64, i64, i64)> = (0..RUNS_ROWS)
            .filter(|id| runs.partition_of_key(&[int(*id)], &mut scratch).expect("p") == partition)
            .map(row)
            .collect();
        for (prefix, descending, filtered) in [
            (1, false, false),
            (2, false, false),
            (1, true, false),
            (2, true, true),
            (1, false, true),
        ] {
            let mut expected: Vec<(i64, i64)> = held
                .iter()
                .filter(|(_, g, _, w)| !filtered || (*w != 0 && *g >= 2))
                .map(|&(_, g, h, _)| if prefix == 1 { (g, 0) } else { (g, h) })
                .collect();
            expected.sort_unstable();
            expected.dedup();
            if descending {
                expected.reverse();
            }
            let found: Vec<(i64, i64)> = scan(partition, prefix, descending, filtered)
                .into_iter()
                .map(|(g, h)| if prefix == 1 { (g, 0) } else { (g, h) })
                .collect();
            assert_eq!(
                found, expected,
                "partition {partition}, prefix {prefix}, descending {descending}, filtered {filtered}"
            );
        }
    }
    // Only an ordered index's first columns, read without locks.
    for (prefix, lock, refusal) in [
        (
            3,
            LockMode::Committed,
            "first 3 columns of index `by_g_h` of 2",
        ),
        (
            1,
            LockMode::Shared,
            "a distinct scan reads an ordered index without locks",
        ),
    ] {
        let refused = tx.scan(
            &runs,
            ScanOptions {
                index: Some("by_g_h"),
                distinct_prefix: prefix,
                lock: Some(lock),
                ..ScanOptions::default()
            },
        );
        let message = refused.err().expect("refused").to_string();
        assert!(message.contains(refusal), "{message}");
    }
    tx.execute(ExecMode::Commit).expect("commit");
    session.drop_table("runs").expect("drop runs");
}

/// Rows of the table of [`counting_scans`]: more than one partition's
/// scan batch examines (`SCAN_ROWS_EXAMINED_MAX`, 16,384), so a count
/// comes in several batches.
const COUNTED_ROWS: i64 = 40_000;

/// A counting scan returns the number of rows that pass, in rows of one
/// value that add up to it: the whole table, a range of an index, a
/// filter, one partition; refused with locks or a projection.
fn counting_scans(session: &Session) {
    let def = TableDef::new(
        "counted",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("g", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_g".into(),
        id: 1,
        columns: vec![1],
        kind: IndexKind::Ordered,
    })
    .partitions(2);
    session.create_table(&def).expect("create counted");
    let counted = session.table("counted").expect("table");
    for first in (0..COUNTED_ROWS).step_by(1_000) {
        let tx = session.begin().expect("begin");
        for id in first..first + 1_000 {
            tx.insert(&counted, &[("id", int(id)), ("g", int(id % 7))])
                .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("commit");
    }
    let tx = session.begin().expect("begin");
    let count = |options: ScanOptions<'_>| {
        let mut batches = 0;
        let mut sum = 0;
        for r in tx
            .scan(
                &counted,
                ScanOptions {
                    count: true,
                    ..options
                },
            )
            .expect("scan")
        {
            let r = r.expect("row");
            match r.values().first() {
                Some(Value::UInt(n)) => sum += *n as i64,
                other => panic!("a count row holds {other:?}"),
            }
            batches += 1;
        }
        (sum, batches)
    };
    let (all, batches) = count(ScanOptions::default());
    assert_eq!(all, COUNTED_ROWS);
    assert!(
        batches >= 4,
        "{batches} count rows for 2 partitions of 20,000"
    );
    let threes = (0..COUNTED_ROWS).filter(|id| id % 7 == 3).count() as i64;
    let filter = Some(Filter::Cmp {
        column: 1,
        op: CmpOp::Eq,
        value: int(3),
    });
    let (found, _) = count(ScanOptions {
        filter: filter.clone(),
        ..ScanOptions::default()
    });
    assert_eq!(found, threes);
    let high = (0..COUNTED_ROWS).filter(|id| id % 7 >= 5).count() as i64;
    let (found, _) = count(ScanOptions {
        index: Some("by_g"),
        lower: Some((vec![int(5)], true)),
        ..ScanOptions::default()
    });
    assert_eq!(found, high);
    let mut scratch = Vec::new();
    let in_first = (0..COUNTED_ROWS)
        .filter(|id| id % 7 == 3)
        .filter(|id| {
            counted
                .partition_of_key(&[int(*id)], &mut scratch)
                .expect("p")
                == 0
        })
        .count() as i64;
    let (found, _) = count(ScanOptions {
        index: Some("by_g"),
        lower: Some((vec![int(3)], true)),
        upper: Some((vec![int(3)], true)),
        partition: Some(0),
        ..ScanOptions::default()
    });
    assert_eq!(found, in_first);
    let (none, _) = count(ScanOptions {
        index: Some("by_g"),
        lower: Some((vec![int(7)], true)),
        ..ScanOptions::default()
    });
    assert_eq!(none, 0);
    for refused in [
        ScanOptions {
            lock: Some(LockMode::Shared),
            ..ScanOptions::default()
        },
        ScanOptions {
            projection: Some(vec!["g"]),
            ..ScanOptions::default()
        },
    ] {
        let message = tx
            .scan(
                &counted,
                ScanOptions {
                    count: true,
                    ..refused
                },
            )
            .err()
            .expect("refused")
            .to_string();
        assert!(message.contains("counting scan"), "{message}");
    }
    tx.execute(ExecMode::Commit).expect("commit");
    session.drop_table("counted").expect("drop counted");
}

/// Rows of the aggregating scans' table.
const AGGREGATED_ROWS: i64 = 6_000;

/// Per group key (its values' Debug form): the rows counted and each
/// aggregate's partial values.
type MergedGroups = BTreeMap<String, (u64, Vec<Vec<Value>>)>;

/// An aggregating scan's rows merged: per group key (the group values)
/// the rows counted and each aggregate's partials, as a reader merges
/// them; and how many rows came.
fn merged_aggregates(
    tx: &skarv_client::Transaction<'_>,
    table: &std::sync::Arc<skarv_client::Table>,
    options: ScanOptions<'_>,
) -> (MergedGroups, usize) {
    let groups = options.group_by.len();
    let mut merged = MergedGroups::new();
    let mut rows = 0;
    for r in tx
        .scan(
            table,
            ScanOptions {
                count: true,
                ..options
            },
        )
        .expect("scan")
    {
        let r = r.expect("row");
        rows += 1;
        let values = r.values();
        let Some(Value::UInt(n)) = values.first() else {
            panic!("an aggregate row starts with its count: {values:?}");
        };
        let key = format!("{:?}", &values[1..1 + groups]);
        let entry = merged.entry(key).or_default();
        entry.0 += n;
        let partials = &values[1 + groups..];
        entry.1.resize(partials.len(), Vec::new());
        for (kept, v) in entry.1.iter_mut().zip(partials) {
            kept.push(v.clone());
        }
    }
    (merged, rows)
}

/// The exact sum of partial sums (`Decimal`s; NULL for none), as a
/// scaled integer.
fn sum_of(partials: &[Value], scale: u8) -> Option<i128> {
    let mut sum = None;
    for v in partials {
        match v {
            Value::Null => {}
            Value::Decimal(d) => {
                *sum.get_or_insert(0) += d.to_scaled(scale).expect("scaled");
            }
            other => panic!("a partial sum is {other:?}"),
        }
    }
    sum
}

/// An aggregating scan returns, per group of the rows that pass, their
/// count and each aggregate of them; the reader merges the partitions'
/// and batches' partial rows into the true values: sums exact (DECIMAL
/// and integers, NULLs skipped), least and greatest values of the
/// column's kind, groups of equal bytes; a batch holds at most
/// `batch_rows` groups; refused on a text column's sum and outside a
/// counting scan.
fn aggregating_scans(session: &Session) {
    let def = TableDef::new(
        "aggregated",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("g", ColumnType::Int { unsigned: true }),
            Column::new(
                "amount",
                ColumnType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            Column::new("n", ColumnType::BigInt { unsigned: false }).nullable(),
            Column::new(
                "tag",
                ColumnType::VarChar {
                    max: 8,
                    collation: Collation::Utf8mb4GeneralCi,
                },
            ),
        ],
    )
    .primary_key(vec![0])
    .partitions(2);
    session.create_table(&def).expect("create aggregated");
    let table = session.table("aggregated").expect("table");
    // amount: id * 1.25 negated for odd ids; n: NULL for every third id,
    // else id - 3000; tag 'a' or 'A' (one value under the collation).
    let amount = |id: i64| if id % 2 == 1 { -id * 125 } else { id * 125 };
    let n = |id: i64| (id % 3 != 0).then_some(id - 3_000);
    for first in (0..AGGREGATED_ROWS).step_by(1_000) {
        let tx = session.begin().expect("begin");
        for id in first..first + 1_000 {
            let decimal =
                skarv_client::schema_types::Decimal::from_scaled(i128::from(amount(id)), 2)
                    .expect("decimal");
            tx.insert(
                &table,
                &[
                    ("id", int(id)),
                    ("g", Value::UInt((id % 5) as u64)),
                    ("amount", Value::Decimal(decimal)),
                    ("n", n(id).map_or(Value::Null, int)),
                    (
                        "tag",
                        Value::String(if id % 4 == 0 { "A" } else { "a" }.into()),
                    ),
                ],
            )
            .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("commit");
    }
    use skarv_client::AggregateFn::{Count, Max, Min, Sum};
    let aggregates = vec![
        (Sum, "amount"),
        (Min, "amount"),
        (Max, "amount"),
        (Count, "n"),
        (Sum, "n"),
        (Min, "n"),
        (Max, "g"),
    ];
    let tx = session.begin().expect("begin");
    // Ungrouped, in small batches: many partial rows.
    let (merged, rows) = merged_aggregates(
        &tx,
        &table,
        ScanOptions {
            aggregates: aggregates.clone(),
            ..ScanOptions::default()
        },
    );
    assert!(rows >= 2, "{rows} rows from 2 partitions");
    let (counted, partials) = merged.get("[]").expect("the one group");
    let ids = || 0..AGGREGATED_ROWS;
    assert_eq!(*counted, AGGREGATED_ROWS as u64);
    let expect = |of: &dyn Fn(i64) -> bool| {
        let amounts: Vec<i128> = ids()
            .filter(|i| of(*i))
            .map(|i| i128::from(amount(i)))
            .collect();
        let ns: Vec<i64> = ids().filter(|i| of(*i)).filter_map(n).collect();
        (amounts, ns)
    };
    let check = |partials: &[Vec<Value>], amounts: &[i128], ns: &[i64], what: &str| {
        assert_eq!(
            sum_of(&partials[0], 2),
            Some(amounts.iter().sum()),
            "{what}: SUM(amount)"
        );
        let least = partials[1]
            .iter()
            .filter_map(|v| match v {
                Value::Decimal(d) => d.to_scaled(2),
                _ => None,
            })
            .min();
        assert_eq!(least, amounts.iter().copied().min(), "{what}: MIN(amount)");
        let greatest = partials[2]
            .iter()
            .filter_map(|v| match v {
                Value::Decimal(d) => d.to_scaled(2),
                _ => None,
            })
            .max();
        assert_eq!(
            greatest,
            amounts.iter().copied().max(),
            "{what}: MAX(amount)"
        );
        let count: u64 = partials[3]
            .iter()
            .map(|v| match v {
                Value::UInt(c) => *c,
                other => panic!("{what}: a partial count is {other:?}"),
            })
            .sum();
        assert_eq!(count, ns.len() as u64, "{what}: COUNT(n) skips NULLs");
        let expected = (!ns.is_empty()).then(|| ns.iter().map(|x| i128::from(*x)).sum());
        assert_eq!(sum_of(&partials[4], 0), expected, "{what}: SUM(n)");
        let least = partials[5]
            .iter()
            .filter_map(|v| match v {
                Value::Int(x) => Some(*x),
                Value::Null => None,
                other => panic!("{what}: MIN of a BIGINT is {other:?}"),
            })
            .min();
        assert_eq!(least, ns.iter().copied().min(), "{what}: MIN(n)");
        assert!(
            partials[6].iter().all(|v| matches!(v, Value::UInt(_))),
            "{what}: MAX of an INT UNSIGNED is unsigned"
        );
    };
    let (amounts, ns) = expect(&|_| true);
    check(partials, &amounts, &ns, "ungrouped");
    // Grouped by g, at most 2 groups a batch: 5 groups need several.
    let (merged, rows) = merged_aggregates(
        &tx,
        &table,
        ScanOptions {
            aggregates: aggregates.clone(),
            group_by: vec!["g"],
            batch_rows: 2,
            ..ScanOptions::default()
        },
    );
    assert_eq!(merged.len(), 5, "{:?}", merged.keys());
    // Rows of the 5 groups come mixed: a batch ends at the first row of a
    // third group, every few rows.
    assert!(rows >= 100, "{rows} rows: batches of 2 groups at most");
    for g in 0..5 {
        let (counted, partials) = merged
            .get(&format!("{:?}", [Value::UInt(g)]))
            .expect("group");
        let (amounts, ns) = expect(&|i| i % 5 == g as i64);
        assert_eq!(*counted, amounts.len() as u64);
        check(partials, &amounts, &ns, &format!("g = {g}"));
    }
    // Grouped by a case-blind text: 'a' and 'A' are two groups here.
    let filter = Some(Filter::Cmp {
        column: 1,
        op: CmpOp::Eq,
        value: Value::UInt(2),
    });
    let (merged, _) = merged_aggregates(
        &tx,
        &table,
        ScanOptions {
            aggregates: vec![(Sum, "amount")],
            group_by: vec!["tag", "g"],
            filter,
            ..ScanOptions::default()
        },
    );
    let keys: Vec<&String> = merged.keys().collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let upper = ids().filter(|i| i % 5 == 2 && i % 4 == 0).count() as u64;
    let upper_key = format!("{:?}", [Value::String("A".into()), Value::UInt(2)]);
    assert_eq!(merged.get(&upper_key).map(|g| g.0), Some(upper), "{keys:?}");
    for (refused, says) in [
        (
            ScanOptions {
                count: true,
                aggregates: vec![(Sum, "tag")],
                ..ScanOptions::default()
            },
            "only integers",
        ),
        (
            ScanOptions {
                aggregates: vec![(Sum, "amount")],
                ..ScanOptions::default()
            },
            "counting scan",
        ),
    ] {
        let message = tx.scan(&table, refused).err().expect("refused").to_string();
        assert!(message.contains(says), "{message}");
    }
    tx.execute(ExecMode::Commit).expect("commit");
    session.drop_table("aggregated").expect("drop aggregated");
}

/// The send thread wakes for bytes a socket did not take, and otherwise
/// only on its timer: round trips whose writes the socket takes at once
/// leave it asleep. (A socket watched for room all the time woke it each
/// time the data node read from it, as a local socket reports room then:
/// a turn per round trip.)
fn the_send_thread_sleeps_while_the_sockets_take_every_write(cluster: &Cluster, session: &Session) {
    const ROUND_TRIPS: u64 = 2_000;
    let accounts = session.table("accounts").expect("table");
    // Once it has turned after the connect, it watches what it will.
    let connected = cluster.stats().send_thread_turns;
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.stats().send_thread_turns == connected && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let before = cluster.stats();
    assert!(
        before.send_thread_turns > connected,
        "the send thread turns"
    );
    let started = Instant::now();
    for k in 0..ROUND_TRIPS {
        let tx = session.begin().expect("begin");
        // The rows `a_thousand_ops_in_one_round_trip` inserted.
        let id = 1_000 + (k % 1_000) as i64;
        tx.read(&accounts, &[int(id)], LockMode::Committed)
            .expect("read");
        tx.execute(ExecMode::Commit).expect("executes");
    }
    let after = cluster.stats();
    assert!(after.write_calls - before.write_calls >= ROUND_TRIPS);
    let turns = after.send_thread_turns - before.send_thread_turns;
    // Its idle timer: a turn every 100 ms, and one either side.
    let timer_turns = started.elapsed().as_millis() as u64 / 100 + 2;
    assert!(
        turns <= timer_turns + ROUND_TRIPS / 100,
        "{turns} send thread turns for {ROUND_TRIPS} round trips in {:?}",
        started.elapsed()
    );
}

#[test]
fn the_client_against_a_sandbox() {
    let sandbox = Sandbox::start("client-sandbox", 1, 1, 23000);
    let options = ClusterOptions {
        request_timeout: Duration::from_secs(10),
        ..ClusterOptions::default()
    };
    let cluster =
        Cluster::connect_with(&sandbox.connect, options).expect("connects to the sandbox");
    assert_eq!(cluster.live_nodes().len(), 1);
    // The data node is on this host: its local socket, not loopback TCP.
    assert_eq!(
        cluster.link_kinds(),
        [(cluster.live_nodes()[0], LinkKind::Local)]
    );
    let session = cluster.session().expect("session");
    create_accounts(&session);
    operations_match_a_model(&session);
    rows_lend_their_values(&session);
    a_thousand_ops_in_one_round_trip(&session);
    the_send_thread_sleeps_while_the_sockets_take_every_write(&cluster, &session);
    locks_conflict(&cluster);
    a_dropped_transaction_releases_its_locks(&cluster);
    deadlock_ends_in_the_timeout_error(&cluster);
    indexes_on_live_data(&session);
    scan_and_take_over(&cluster, &session);
    bad_input(&session);
    partition_lists_and_statistics(&session);
    distinct_scans(&session);
    counting_scans(&session);
    aggregating_scans(&session);
    session.drop_table("accounts").expect("drop");
    assert_eq!(
        session.table("accounts").expect_err("dropped").code,
        codes::NO_SUCH_TABLE
    );
    run_example(&sandbox.connect, "kv", &[]);
    run_example(
        &sandbox.connect,
        "async_batch",
        &["--transactions", "2000", "--in-flight", "500"],
    );
}

/// `UseShm=0`: the data node listens on TCP only, and the client, which
/// tries the local socket first, is served over TCP.
#[test]
fn without_use_shm_the_client_is_served_over_tcp() {
    let sandbox = Sandbox::start_with("client-tcp", 1, 1, 23500, &["--set", "UseShm=0"]);
    let cluster = Cluster::connect(&sandbox.connect).expect("connects to the sandbox");
    assert_eq!(cluster.live_nodes().len(), 1);
    assert_eq!(
        cluster.link_kinds(),
        [(cluster.live_nodes()[0], LinkKind::Tcp)]
    );
    let session = cluster.session().expect("session");
    create_accounts(&session);
    operations_match_a_model(&session);
}
