//! A transaction's journal (`Transaction::journal_mark`,
//! `rollback_to_mark`: what SQL's `ROLLBACK TO SAVEPOINT` runs on)
//! against a real cluster (a `skarv sandbox` of two data nodes with two
//! replicas; `cargo build -p skarv` first, or set `SKARV_BIN`).
//!
//! Random transactions insert, update, write and delete rows of two
//! tables (one with a unique index and a TEXT column long enough to have
//! parts, one of integers), several operations on one row in a batch
//! included, inserts that fail on the primary or the unique key with
//! `ignore_error` included; they set marks and roll back to random ones.
//! A model keeps each mark's rows. After every rollback the transaction's
//! own view (a locking scan, and a read by unique key of every row) must
//! equal the model at the mark; at the end the transaction commits or
//! rolls back to a mark first, and a new transaction must read the model.
//! Each seed is printed; the same seed replays the same run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use skarv_client::schema_types::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};
use skarv_client::{
    Cluster, ClusterOptions, ExecMode, LockMode, Op, OpResult, ScanOptions, Session, Table,
    Transaction, Value,
};
use testkit::Rng;

mod common;
use common::*;

/// Keys drawn from `0..KEYS`, so that operations meet the same rows.
const KEYS: i64 = 24;
/// Transactions per run, and steps per transaction.
const TRANSACTIONS: u64 = 12;
const STEPS: u64 = 40;

/// A row of `docs`: unique `n`, TEXT `t`, `v`.
#[derive(Clone, PartialEq)]
struct Doc {
    n: i64,
    t: Option<String>,
    v: i64,
}

impl std::fmt::Debug for Doc {
    /// A long text as its length and first character.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self
            .t
            .as_ref()
            .map(|t| format!("{}×{}", t.len(), t.chars().next().unwrap_or(' ')));
        write!(f, "(n {}, t {t:?}, v {})", self.n, self.v)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    docs: BTreeMap<i64, Doc>,
    nums: BTreeMap<i64, i64>,
}

fn bigint(name: &str) -> Column {
    Column::new(name, ColumnType::BigInt { unsigned: false })
}

fn create_tables(session: &Session) -> (Arc<Table>, Arc<Table>) {
    let docs = TableDef::new(
        "jdocs",
        0,
        vec![
            bigint("id"),
            bigint("n"),
            Column::new(
                "t",
                ColumnType::Text {
                    collation: Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
            bigint("v"),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_n".into(),
        id: 1,
        columns: vec![1],
        kind: IndexKind::Unique,
    })
    .partitions(0);
    session.create_table(&docs).expect("create jdocs");
    let nums = TableDef::new("jnums", 0, vec![bigint("id"), bigint("v")])
        .primary_key(vec![0])
        .partitions(0);
    session.create_table(&nums).expect("create jnums");
    (
        session.table("jdocs").expect("jdocs"),
        session.table("jnums").expect("jnums"),
    )
}

/// A TEXT value: none, short (inline), or long enough for parts.
fn text(rng: &mut Rng) -> Option<String> {
    match rng.below(4) {
        0 => None,
        1 => Some(format!("short {}", rng.below(1_000))),
        _ => {
            let len = 200 + rng.index(20_000);
            let c = char::from(b'a' + rng.below(26) as u8);
            Some(std::iter::repeat_n(c, len).collect())
        }
    }
}

fn doc_row(id: i64, d: &Doc) -> Vec<(&'static str, Value)> {
    vec![
        ("id", Value::Int(id)),
        ("n", Value::Int(d.n)),
        ("t", d.t.clone().map_or(Value::Null, Value::String)),
        ("v", Value::Int(d.v)),
    ]
}

/// A unique value no row of `model` holds.
fn fresh_n(rng: &mut Rng, model: &Model) -> i64 {
    loop {
        let n = 1_000 + rng.below(10_000) as i64;
        if !model.docs.values().any(|d| d.n == n) {
            return n;
        }
    }
}

/// Defines one random write and applies it to `model` as the data nodes
/// will (the operations of a batch run in order).
fn random_op(
    rng: &mut Rng,
    tx: &Transaction<'_>,
    tables: &(Arc<Table>, Arc<Table>),
    model: &mut Model,
) {
    let (docs, nums) = tables;
    let id = rng.below(KEYS as u64) as i64;
    let key = [Value::Int(id)];
    match rng.below(9) {
        // An insert: taken, or refused (and ignored) on either key.
        0 | 1 => {
            let n = if rng.below(3) == 0 && !model.docs.is_empty() {
                let any = rng.index(model.docs.len());
                model.docs.values().nth(any).expect("a row").n
            } else {
                fresh_n(rng, model)
            };
            let doc = Doc {
                n,
                t: text(rng),
                v: rng.below(100) as i64,
            };
            let row = doc_row(id, &doc);
            let taken = !model.docs.contains_key(&id) && !model.docs.values().any(|d| d.n == n);
            if taken {
                tx.define(Op::insert(docs, &row)).expect("insert");
                model.docs.insert(id, doc);
            } else {
                tx.define(Op::insert(docs, &row).ignore_error())
                    .expect("insert ignoring");
            }
        }
        // An update of some columns (a new unique value sometimes).
        2 | 3 if model.docs.contains_key(&id) => {
            let mut changes = vec![("v", Value::Int(rng.below(100) as i64))];
            let doc = model.docs.get_mut(&id).expect("there");
            doc.v = match changes[0].1 {
                Value::Int(v) => v,
                _ => unreachable!(),
            };
            if rng.below(2) == 0 {
                let t = text(rng);
                changes.push(("t", t.clone().map_or(Value::Null, Value::String)));
                model.docs.get_mut(&id).expect("there").t = t;
            }
            if rng.below(3) == 0 {
                let n = fresh_n(rng, model);
                changes.push(("n", Value::Int(n)));
                model.docs.get_mut(&id).expect("there").n = n;
            }
            tx.define(Op::update(docs, &key, &changes)).expect("update");
        }
        // A write (upsert) with a value no other row holds.
        4 => {
            let n = match model.docs.get(&id) {
                Some(d) if rng.below(2) == 0 => d.n,
                _ => fresh_n(rng, model),
            };
            let doc = Doc {
                n,
                t: text(rng),
                v: rng.below(100) as i64,
            };
            tx.define(Op::write(docs, &doc_row(id, &doc)))
                .expect("write");
            model.docs.insert(id, doc);
        }
        5 if model.docs.contains_key(&id) => {
            tx.define(Op::delete(docs, &key)).expect("delete");
            model.docs.remove(&id);
        }
        // The table of integers.
        6 => {
            let v = rng.below(1_000) as i64;
            let row = [("id", Value::Int(id)), ("v", Value::Int(v))];
            tx.define(Op::write(nums, &row)).expect("write num");
            model.nums.insert(id, v);
        }
        7 if model.nums.contains_key(&id) => {
            tx.define(Op::delete(nums, &key)).expect("delete num");
            model.nums.remove(&id);
        }
        _ => {
            let v = rng.below(1_000) as i64;
            let row = [("id", Value::Int(id)), ("v", Value::Int(v))];
            match model.nums.entry(id) {
                std::collections::btree_map::Entry::Occupied(_) => {
                    tx.define(Op::insert(nums, &row).ignore_error())
                        .expect("insert num ignoring");
                }
                std::collections::btree_map::Entry::Vacant(vacant) => {
                    tx.define(Op::insert(nums, &row)).expect("insert num");
                    vacant.insert(v);
                }
            }
        }
    }
}

fn int(row: &skarv_client::Row, column: &str) -> i64 {
    match row.get(column) {
        Some(Value::Int(v)) => *v,
        other => panic!("{column}: {other:?}"),
    }
}

/// What `tx` sees: every row by a locking scan, and each doc again by its
/// unique key (so the index must agree with the rows).
fn seen(tx: &Transaction<'_>, (docs, nums): &(Arc<Table>, Arc<Table>)) -> Model {
    let scan = |table: &Arc<Table>| -> Vec<skarv_client::Row> {
        tx.scan(
            table,
            ScanOptions {
                lock: Some(LockMode::Exclusive),
                ..ScanOptions::default()
            },
        )
        .expect("scan")
        .map(|r| r.expect("row"))
        .collect()
    };
    let mut model = Model::default();
    for row in scan(docs) {
        let t = match row.get("t") {
            Some(Value::String(t)) => Some(t.clone()),
            Some(Value::Null) => None,
            other => panic!("t: {other:?}"),
        };
        let doc = Doc {
            n: int(&row, "n"),
            t,
            v: int(&row, "v"),
        };
        model.docs.insert(int(&row, "id"), doc);
    }
    for row in scan(nums) {
        model.nums.insert(int(&row, "id"), int(&row, "v"));
    }
    let ns: Vec<[Value; 1]> = model.docs.values().map(|d| [Value::Int(d.n)]).collect();
    let handles: Vec<_> = ns
        .iter()
        .map(|n| {
            // Locked: a committed read would not see the transaction's own writes.
            tx.define(
                Op::read(docs, n)
                    .index("by_n")
                    .columns(&["id"])
                    .lock(LockMode::Shared),
            )
            .expect("read by n")
        })
        .collect();
    let outcome = tx.execute(ExecMode::NoCommit).expect("reads by n");
    for ((id, doc), handle) in model.docs.iter().zip(handles) {
        match outcome.result(handle) {
            Some(OpResult::Row(row)) => assert_eq!(int(row, "id"), *id, "n {} names id", doc.n),
            other => panic!("n {} of id {id}: {other:?}", doc.n),
        }
    }
    model
}

fn run(seed: u64, session: &Session, tables: &(Arc<Table>, Arc<Table>)) {
    let mut rng = Rng::new(seed);
    let mut committed = {
        let tx = session.begin().expect("begin");
        seen(&tx, tables)
    };
    let mut rollbacks = 0;
    for t in 0..TRANSACTIONS {
        let tx = session.begin().expect("begin");
        let mut model = committed.clone();
        let mut marks: Vec<(usize, Model)> = Vec::new();
        for step in 0..STEPS {
            let at = format!("seed {seed}, transaction {t}, step {step}");
            match rng.below(10) {
                0 | 1 => marks.push((tx.journal_mark().expect("mark"), model.clone())),
                2 if !marks.is_empty() => {
                    let i = rng.index(marks.len());
                    marks.truncate(i + 1);
                    let (mark, then) = marks[i].clone();
                    tx.rollback_to_mark(mark)
                        .unwrap_or_else(|e| panic!("{at}: rollback to mark {mark}: {e}"));
                    model = then;
                    rollbacks += 1;
                    assert_eq!(
                        seen(&tx, tables),
                        model,
                        "{at}: after a rollback to mark {mark}"
                    );
                }
                // Writes left pending at a mark (deferred, as SQL's
                // transaction_allow_batching leaves them) are before it.
                3 => {
                    random_op(&mut rng, &tx, tables, &mut model);
                    marks.push((tx.journal_mark().expect("mark"), model.clone()));
                }
                _ => {
                    for _ in 0..1 + rng.below(6) {
                        random_op(&mut rng, &tx, tables, &mut model);
                    }
                    tx.execute(ExecMode::NoCommit)
                        .unwrap_or_else(|e| panic!("{at}: execute: {e}"));
                }
            }
        }
        if !marks.is_empty() && rng.below(2) == 0 {
            let (mark, then) = marks.swap_remove(0);
            tx.rollback_to_mark(mark).expect("last rollback");
            model = then;
            rollbacks += 1;
        }
        tx.execute(ExecMode::Commit).expect("commit");
        committed = model;
        let check = session.begin().expect("begin");
        assert_eq!(
            seen(&check, tables),
            committed,
            "seed {seed}: transaction {t} committed"
        );
        check.execute(ExecMode::Commit).expect("end check");
    }
    assert!(
        rollbacks > TRANSACTIONS,
        "seed {seed}: only {rollbacks} rollbacks ran"
    );
}

#[test]
fn rollback_to_a_mark_puts_back_the_rows_as_they_were() {
    let sandbox = Sandbox::start("client-journal", 2, 2, 25500);
    let options = ClusterOptions {
        request_timeout: Duration::from_secs(20),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&sandbox.connect, options).expect("connects");
    let session = cluster.session().expect("session");
    let tables = create_tables(&session);
    let first = std::env::var("JOURNAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for seed in first..first + 4 {
        eprintln!("journal: seed {seed}");
        run(seed, &session, &tables);
    }

    // A write by unique key after a mark is one the journal cannot take
    // back: the rollback is refused before anything is sent (and rolls
    // the transaction back); a mark after it is fine.
    let (docs, _) = &tables;
    let tx = session.begin().expect("begin");
    let before = seen(&tx, &tables);
    let Some((id, doc)) = before.docs.iter().next() else {
        panic!("the runs left rows");
    };
    let mark = tx.journal_mark().expect("mark");
    let n = [Value::Int(doc.n)];
    tx.define(Op::update(docs, &n, &[("v", Value::Int(-1))]).index("by_n"))
        .expect("update by n");
    tx.execute(ExecMode::NoCommit).expect("update by n");
    let later = tx.journal_mark().expect("mark");
    tx.define(Op::update(
        docs,
        &[Value::Int(*id)],
        &[("v", Value::Int(-2))],
    ))
    .expect("update by id");
    tx.rollback_to_mark(later)
        .expect("after the write by unique key");
    let why = tx.journal_covers(mark).expect_err("a write by unique key");
    assert!(why.contains("by unique key"), "{why}");
    assert!(tx.rollback_to_mark(mark).is_err());
    assert!(tx.execute(ExecMode::Commit).is_err(), "rolled back");
    let check = session.begin().expect("begin");
    assert_eq!(seen(&check, &tables), before, "nothing of it committed");
    check.execute(ExecMode::Commit).expect("end check");

    // Past its bytes of images the journal keeps no more: a rollback to a
    // mark before the writes it could not keep is refused.
    let (_, nums) = &tables;
    let tx = session.begin().expect("begin");
    let first = tx.journal_mark().expect("mark");
    tx.journal_bytes_max(100);
    let row = [("id", Value::Int(1_000)), ("v", Value::Int(1))];
    tx.define(Op::write(nums, &row)).expect("write");
    tx.execute(ExecMode::NoCommit).expect("write");
    let second = tx.journal_mark().expect("mark");
    tx.journal_covers(first)
        .expect("an absent row's image is kept");
    for id in 1_001..1_010 {
        let row = [("id", Value::Int(id)), ("v", Value::Int(1))];
        tx.define(Op::write(nums, &row)).expect("write");
        tx.execute(ExecMode::NoCommit).expect("write");
        let row = [("id", Value::Int(id)), ("v", Value::Int(2))];
        tx.define(Op::write(nums, &row)).expect("write");
        tx.execute(ExecMode::NoCommit).expect("write");
    }
    let why = tx
        .journal_covers(second)
        .expect_err("past the journal's bytes");
    assert!(why.contains("JOURNAL_BYTES_MAX"), "{why}");
    tx.execute(ExecMode::Rollback).expect("rollback");

    // A rollback to a mark gives back the bytes of the images it took
    // back: writing a row and rolling it back, again and again, never
    // fills the journal.
    let tx = session.begin().expect("begin");
    let _ = tx.journal_mark().expect("mark");
    tx.journal_bytes_max(100);
    let row = [("id", Value::Int(2_000)), ("v", Value::Int(0))];
    tx.define(Op::write(nums, &row)).expect("write");
    tx.execute(ExecMode::NoCommit).expect("write");
    for round in 1..=10 {
        let mark = tx.journal_mark().expect("mark");
        let row = [("id", Value::Int(2_000)), ("v", Value::Int(round))];
        tx.define(Op::write(nums, &row)).expect("write");
        tx.execute(ExecMode::NoCommit).expect("write");
        tx.rollback_to_mark(mark)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    // Locked: a committed read does not see the transaction's own writes.
    let read = tx
        .define(Op::read(nums, &[Value::Int(2_000)]).lock(LockMode::Shared))
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("commit");
    match outcome.result(read) {
        Some(OpResult::Row(row)) => assert_eq!(int(row, "v"), 0, "as before the rollbacks"),
        other => panic!("row 2000 after the rollbacks: {other:?}"),
    }
}
