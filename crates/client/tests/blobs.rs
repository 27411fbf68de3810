//! BLOB and TEXT values of any size against a real cluster (a `skarv
//! sandbox` of one data node; `cargo build -p skarv` first, or set
//! `SKARV_BIN`): inserts, reads by primary and unique key, updates to
//! longer and shorter values, writes, deletes, scans, a rollback, values
//! over the limit, and the asynchronous path — each checked against a
//! model, and the hidden parts tables checked to hold exactly the parts
//! the model's values need (no stray part after a shrink or a delete).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skarv_client::schema_types::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};
use skarv_client::{
    codes, Cluster, ClusterOptions, ExecMode, LockMode, Op, OpResult, ScanOptions, Session, Table,
    Value, BLOB_BYTES_MAX,
};

mod common;
use common::*;

/// Bytes inline in the row and bytes per part (schema).
const INLINE: usize = 256;
const PART: usize = 8_000;

/// A row of the model: BLOB `b`, TEXT `t`, INT `n` (unique).
#[derive(Clone, Debug, PartialEq)]
struct Doc {
    b: Option<Vec<u8>>,
    t: Option<String>,
    n: i64,
}

type Model = BTreeMap<i64, Doc>;

/// Table `docs`: id (key), b BLOB, t TEXT, n INT with a unique index.
fn create_docs(session: &Session) -> Arc<Table> {
    let def = TableDef::new(
        "docs",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("b", ColumnType::Blob).nullable(),
            Column::new(
                "t",
                ColumnType::Text {
                    collation: Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
            Column::new("n", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_n".into(),
        id: 1,
        columns: vec![3],
        kind: IndexKind::Unique,
    })
    .partitions(0);
    session.create_table(&def).expect("create docs");
    let docs = session.table("docs").expect("docs");
    assert!(docs.has_blobs());
    assert!(docs.blob_parts_table("b").is_some() && docs.blob_parts_table("t").is_some());
    assert!(docs.blob_parts_table("n").is_none());
    docs
}

/// `len` bytes that differ with `seed` and position.
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Text of about `len` bytes: "ab" then 3-byte characters, so that the
/// inline head (256 bytes) and the part boundaries (every 8,000 bytes
/// after it) fall inside a character.
fn text_of(len: usize, seed: u32) -> String {
    let mut s = String::from("ab");
    let chars = ['€', 'ᚠ', '∑'];
    let mut i = seed as usize;
    while s.len() + 3 <= len.max(2) {
        s.push(chars[i % 3]);
        i += 1;
    }
    s
}

fn row_of(id: i64, doc: &Doc) -> Vec<(&'static str, Value)> {
    vec![
        ("id", Value::Int(id)),
        ("b", doc.b.clone().map_or(Value::Null, Value::Bytes)),
        ("t", doc.t.clone().map_or(Value::Null, Value::String)),
        ("n", Value::Int(doc.n)),
    ]
}

fn doc_of(values: &skarv_client::Row) -> Doc {
    let b = match values.get("b") {
        Some(Value::Bytes(b)) => Some(b.clone()),
        Some(Value::Null) => None,
        other => panic!("b read back as {other:?}"),
    };
    let t = match values.get("t") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Null) => None,
        other => panic!("t read back as {other:?}"),
    };
    let n = match values.get("n") {
        Some(Value::Int(n)) => *n,
        other => panic!("n read back as {other:?}"),
    };
    Doc { b, t, n }
}

fn parts_needed(len: usize) -> usize {
    len.saturating_sub(INLINE).div_ceil(PART)
}

/// The (id, part) rows of a parts table, by a scan of it.
fn parts_of(session: &Session, docs: &Table, column: &str) -> BTreeSet<(i64, u64)> {
    let parts = docs
        .blob_parts_table(column)
        .expect("a blob column")
        .clone();
    let tx = session.begin().expect("begin");
    let found = tx
        .scan(
            &parts,
            ScanOptions {
                projection: Some(vec!["id", "$PART"]),
                ..ScanOptions::default()
            },
        )
        .expect("scan parts")
        .map(|row| {
            let row = row.expect("part row");
            match (row.get("id"), row.get("$PART")) {
                (Some(Value::Int(id)), Some(Value::UInt(part))) => (*id, *part),
                other => panic!("part row {other:?}"),
            }
        })
        .collect();
    tx.execute(ExecMode::Commit).expect("commit the scan");
    found
}

/// The parts tables hold exactly the parts of the model's values, and
/// every row reads back (by key, one batch) as the model has it.
fn check(session: &Session, docs: &Arc<Table>, model: &Model, when: &str) {
    let mut want_b = BTreeSet::new();
    let mut want_t = BTreeSet::new();
    for (id, doc) in model {
        let b = doc.b.as_ref().map_or(0, Vec::len);
        want_b.extend((0..parts_needed(b) as u64).map(|p| (*id, p)));
        let t = doc.t.as_ref().map_or(0, String::len);
        want_t.extend((0..parts_needed(t) as u64).map(|p| (*id, p)));
    }
    assert_eq!(parts_of(session, docs, "b"), want_b, "{when}: parts of b");
    assert_eq!(parts_of(session, docs, "t"), want_t, "{when}: parts of t");
    let keys: Vec<[Value; 1]> = model.keys().map(|id| [Value::Int(*id)]).collect();
    let tx = session.begin().expect("begin");
    let handles: Vec<_> = keys
        .iter()
        .map(|key| tx.read(docs, key, LockMode::Committed).expect("read"))
        .collect();
    let outcome = tx.execute(ExecMode::Commit).expect("read back");
    assert!(outcome.committed);
    for ((id, doc), handle) in model.iter().zip(handles) {
        let row = outcome
            .row(handle)
            .unwrap_or_else(|| panic!("{when}: row {id} missing"));
        let got = doc_of(row);
        if got != *doc {
            let diff =
                |a: &[u8], b: &[u8]| (a.len(), b.len(), a.iter().zip(b).position(|(x, y)| x != y));
            panic!(
                "{when}: row {id} differs from the model: b (got, want, first difference) {:?}, t {:?}, n {} {}",
                diff(got.b.as_deref().unwrap_or_default(), doc.b.as_deref().unwrap_or_default()),
                diff(
                    got.t.as_deref().unwrap_or_default().as_bytes(),
                    doc.t.as_deref().unwrap_or_default().as_bytes()
                ),
                got.n,
                doc.n
            );
        }
    }
}

/// Sizes around the inline head and the parts, and one over several requests.
const SIZES: [usize; 8] = [
    0,
    1,
    255,
    256,
    257,
    INLINE + PART,
    INLINE + 2 * PART + 100,
    2_000_000,
];

fn inserts_reads_updates_writes_deletes(session: &Session, docs: &Arc<Table>, model: &mut Model) {
    // Insert every size, BLOB and TEXT, NULLs on two rows; one commit.
    let tx = session.begin().expect("begin");
    for (i, &size) in SIZES.iter().enumerate() {
        let id = i as i64;
        let doc = Doc {
            b: (i != 2).then(|| bytes(size, i as u8)),
            t: (i != 5).then(|| text_of(size, i as u32)),
            n: 100 + id,
        };
        tx.insert(docs, &row_of(id, &doc)).expect("insert");
        model.insert(id, doc);
    }
    let outcome = tx.execute(ExecMode::Commit).expect("insert every size");
    assert!(outcome.committed && outcome.epoch.is_some());
    check(session, docs, model, "after the inserts");

    // Update to longer and shorter values (rotate the sizes), some to NULL.
    let tx = session.begin().expect("begin");
    let updates: Vec<(i64, Doc)> = model
        .iter()
        .map(|(id, doc)| {
            let k = *id as usize;
            let b_len = SIZES[(k + 3) % SIZES.len()];
            let t_len = SIZES[(k + 5) % SIZES.len()];
            let new = Doc {
                b: (k != 4).then(|| bytes(b_len, 7 + k as u8)),
                t: (k != 6).then(|| text_of(t_len, 11 + k as u32)),
                n: doc.n,
            };
            (*id, new)
        })
        .collect();
    for (id, doc) in &updates {
        let changes = [
            ("b", doc.b.clone().map_or(Value::Null, Value::Bytes)),
            ("t", doc.t.clone().map_or(Value::Null, Value::String)),
        ];
        tx.update(docs, &[Value::Int(*id)], &changes)
            .expect("update");
    }
    tx.execute(ExecMode::Commit).expect("updates");
    model.extend(updates);
    check(session, docs, model, "after the updates");

    // Write (upsert): two existing rows change size, one new row.
    let tx = session.begin().expect("begin");
    for (id, size) in [(1, INLINE + 3 * PART), (7, 10), (20, INLINE + PART + 1)] {
        let doc = Doc {
            b: Some(bytes(size, 3)),
            t: Some(text_of(size / 2, 5)),
            n: model.get(&id).map_or(200 + id, |d| d.n),
        };
        tx.write(docs, &row_of(id, &doc)).expect("write");
        model.insert(id, doc);
    }
    tx.execute(ExecMode::Commit).expect("writes");
    check(session, docs, model, "after the writes");

    // Delete a long row and a short one.
    let tx = session.begin().expect("begin");
    for id in [6, 3] {
        tx.delete(docs, &[Value::Int(id)]).expect("delete");
        model.remove(&id);
    }
    tx.execute(ExecMode::Commit).expect("deletes");
    check(session, docs, model, "after the deletes");
}

/// A scan returns whole values, committed-read or locking.
fn scans_return_whole_values(session: &Session, docs: &Arc<Table>, model: &Model) {
    for lock in [None, Some(LockMode::Exclusive)] {
        let tx = session.begin().expect("begin");
        let scanned: Model = tx
            .scan(
                docs,
                ScanOptions {
                    lock,
                    batch_rows: 2,
                    ..ScanOptions::default()
                },
            )
            .expect("scan")
            .map(|row| {
                let row = row.expect("row");
                let id = match row.get("id") {
                    Some(Value::Int(id)) => *id,
                    other => panic!("id {other:?}"),
                };
                assert_eq!(
                    row.key().is_empty(),
                    lock.is_none(),
                    "key info only when asked"
                );
                (id, doc_of(&row))
            })
            .collect();
        tx.execute(ExecMode::Commit).expect("commit the scan");
        assert!(
            scanned == *model,
            "scan with {lock:?} returns the model's whole values"
        );
    }
    // A projection without the blobs reads heads of nothing and needs no lock.
    let tx = session.begin().expect("begin");
    let ns: Vec<i64> = tx
        .scan(
            docs,
            ScanOptions {
                projection: Some(vec!["n"]),
                ..ScanOptions::default()
            },
        )
        .expect("scan")
        .map(|r| match r.expect("row").get("n") {
            Some(Value::Int(n)) => *n,
            other => panic!("n {other:?}"),
        })
        .collect();
    tx.execute(ExecMode::Commit).expect("commit");
    assert_eq!(ns.len(), model.len());
}

/// Ops by unique key, several ops on one row in one batch, a read of an
/// uncommitted value, rollback, ignore_error, the limit.
fn in_one_transaction(session: &Session, docs: &Arc<Table>, model: &mut Model) {
    // By unique key: read, update (longer), read again, then delete.
    let id = 0;
    let n = model[&id].n;
    let key = [Value::Int(n)];
    let long = bytes(INLINE + 2 * PART + 5, 42);
    let changes = [("b", Value::Bytes(long.clone()))];
    let tx = session.begin().expect("begin");
    tx.define(Op::update(docs, &key, &changes).index("by_n"))
        .expect("update by unique key");
    let read = tx
        .define(Op::read(docs, &key).index("by_n"))
        .expect("read by unique key");
    let outcome = tx
        .execute(ExecMode::Commit)
        .expect("update and read by unique key");
    let row = outcome.row(read).expect("row by unique key");
    assert_eq!(row.get("b"), Some(&Value::Bytes(long.clone())));
    assert!(
        row.key().is_empty(),
        "key info asked for the blobs is not the user's"
    );
    model.get_mut(&id).expect("row 0").b = Some(long);
    check(session, docs, model, "after the update by unique key");

    // Insert, update shorter, read, in one batch; then read the
    // uncommitted value in the same transaction; commit.
    let id = 30;
    let first = Doc {
        b: Some(bytes(INLINE + 4 * PART, 1)),
        t: Some(text_of(INLINE + PART + 2, 2)),
        n: 330,
    };
    let shorter = bytes(INLINE + PART - 1, 9);
    let tx = session.begin().expect("begin");
    tx.insert(docs, &row_of(id, &first)).expect("insert");
    tx.update(
        docs,
        &[Value::Int(id)],
        &[("b", Value::Bytes(shorter.clone()))],
    )
    .expect("update");
    let read = tx
        .read(docs, &[Value::Int(id)], LockMode::Committed)
        .expect("read");
    let outcome = tx
        .execute(ExecMode::NoCommit)
        .expect("one batch on one row");
    let expected = Doc {
        b: Some(shorter),
        ..first
    };
    assert!(doc_of(outcome.row(read).expect("row")) == expected);
    let again = tx
        .read(docs, &[Value::Int(id)], LockMode::Shared)
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("read and commit");
    assert!(outcome.committed);
    assert!(doc_of(outcome.row(again).expect("row")) == expected);
    model.insert(id, expected);
    check(session, docs, model, "after one batch on one row");

    // A short insert, then an update to a long value of the same row, in
    // one batch: the update's pre-read must see the insert.
    let id = 31;
    let long = text_of(INLINE + PART + 40, 4);
    let tx = session.begin().expect("begin");
    let short = Doc {
        b: None,
        t: Some("short".into()),
        n: 331,
    };
    tx.insert(docs, &row_of(id, &short)).expect("insert");
    tx.update(
        docs,
        &[Value::Int(id)],
        &[("t", Value::String(long.clone()))],
    )
    .expect("update");
    tx.execute(ExecMode::Commit)
        .expect("insert short, update long");
    model.insert(
        id,
        Doc {
            t: Some(long),
            ..short
        },
    );
    check(
        session,
        docs,
        model,
        "after a short insert and a long update of one row",
    );

    // Rollback of a long insert leaves no parts.
    let tx = session.begin().expect("begin");
    let doc = Doc {
        b: Some(bytes(3 * PART, 5)),
        t: Some(text_of(2 * PART, 1)),
        n: 440,
    };
    tx.insert(docs, &row_of(40, &doc)).expect("insert");
    tx.execute(ExecMode::NoCommit).expect("insert, no commit");
    let outcome = tx.execute(ExecMode::Rollback).expect("rollback");
    assert!(outcome.rolled_back);
    check(session, docs, model, "after a rolled-back insert");

    // Delete by unique key removes the parts.
    let tx = session.begin().expect("begin");
    let key = [Value::Int(330)];
    tx.define(Op::delete(docs, &key).index("by_n"))
        .expect("delete by unique key");
    tx.execute(ExecMode::Commit).expect("delete by unique key");
    model.remove(&30);
    check(session, docs, model, "after a delete by unique key");

    // An insert of an existing key with ignore_error writes no parts; the
    // transaction goes on.
    let existing = *model.keys().next().expect("a row");
    let dup = Doc {
        b: Some(bytes(INLINE + 2 * PART, 77)),
        t: None,
        n: 999,
    };
    let row = row_of(existing, &dup);
    let tx = session.begin().expect("begin");
    let h = tx
        .define(Op::insert(docs, &row).ignore_error())
        .expect("insert");
    let outcome = tx.execute(ExecMode::Commit).expect("an ignored duplicate");
    match outcome.result(h) {
        Some(OpResult::Failed(e)) => assert_eq!(e.code, codes::DUPLICATE_KEY, "{e}"),
        other => panic!("duplicate insert: {other:?}"),
    }
    check(session, docs, model, "after an ignored duplicate");

    // Over the limit: a permanent error at define; the transaction and
    // the session stay usable.
    let huge = vec![0u8; BLOB_BYTES_MAX + 1];
    let tx = session.begin().expect("begin");
    let error = tx
        .insert(
            docs,
            &[
                ("id", Value::Int(50)),
                ("b", Value::Bytes(huge)),
                ("n", Value::Int(550)),
            ],
        )
        .expect_err("over the limit");
    assert_eq!(error.code, codes::VALUE_TOO_LONG, "{error}");
    assert!(error.is_permanent());
    assert!(
        error.message.contains("`docs`") && error.message.contains("`b`"),
        "{error}"
    );
    let read = tx
        .read(docs, &[Value::Int(existing)], LockMode::Committed)
        .expect("read");
    let outcome = tx
        .execute(ExecMode::Commit)
        .expect("usable after the refusal");
    assert!(doc_of(outcome.row(read).expect("row")) == model[&existing]);
}

/// Round trips: a value over one request's bytes takes several; a short
/// value takes one; an update of a blob takes the pre-read's one more.
fn requests_per_execute(
    cluster: &Cluster,
    session: &Session,
    docs: &Arc<Table>,
    model: &mut Model,
) {
    let sent = || cluster.stats().tc_key_reqs_sent;
    let big = Doc {
        b: Some(bytes(2_000_000, 8)),
        t: None,
        n: 1_100,
    };
    // 250 parts of 8,000 bytes: 121 fit a 960 KiB request.
    let before = sent();
    let tx = session.begin().expect("begin");
    tx.insert(docs, &row_of(100, &big)).expect("insert");
    assert!(tx.execute(ExecMode::Commit).expect("insert 2 MB").committed);
    assert_eq!(sent() - before, 3, "a 2 MB insert takes 3 requests");
    model.insert(100, big.clone());
    // The read, then 250 part reads of at most 113 per request (result bytes).
    let before = sent();
    let tx = session.begin().expect("begin");
    let read = tx
        .read(docs, &[Value::Int(100)], LockMode::Committed)
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("read 2 MB");
    assert!(outcome.committed);
    assert!(doc_of(outcome.row(read).expect("row")) == big);
    assert_eq!(sent() - before, 4, "a 2 MB read takes 1 + 3 requests");
    // A short value: one request; its update: a pre-read first.
    let short = Doc {
        b: Some(bytes(INLINE, 1)),
        t: Some("short".into()),
        n: 1_101,
    };
    let before = sent();
    let tx = session.begin().expect("begin");
    tx.insert(docs, &row_of(101, &short)).expect("insert");
    tx.execute(ExecMode::Commit).expect("insert short");
    assert_eq!(sent() - before, 1, "a short insert is one request");
    let before = sent();
    let tx = session.begin().expect("begin");
    tx.update(
        docs,
        &[Value::Int(100)],
        &[("b", Value::Bytes(vec![1, 2, 3]))],
    )
    .expect("update");
    tx.execute(ExecMode::Commit)
        .expect("shrink 2 MB to 3 bytes");
    assert_eq!(
        sent() - before,
        2,
        "pre-read, then the update with 250 part deletes"
    );
    model.insert(
        100,
        Doc {
            b: Some(vec![1, 2, 3]),
            ..big
        },
    );
    model.insert(101, short);
    check(session, docs, model, "after the 2 MB value shrank");
}

/// A TEXT value whose parts are not UTF-8 (written into the parts table
/// directly) is an error naming the table and column; the session goes on.
fn corrupt_text_is_an_error(session: &Session, docs: &Arc<Table>, model: &Model) {
    let id = *model
        .iter()
        .find(|(_, d)| d.t.as_ref().is_some_and(|t| t.len() > INLINE + 10))
        .expect("a row with a long text")
        .0;
    let parts = docs.blob_parts_table("t").expect("parts of t").clone();
    let tx = session.begin().expect("begin");
    let text = model[&id].t.clone().expect("text");
    let mut part0 = text.as_bytes()[INLINE..(INLINE + PART).min(text.len())].to_vec();
    part0[5] = 0xff;
    tx.write(
        &parts,
        &[
            ("id", Value::Int(id)),
            ("$PART", Value::UInt(0)),
            ("$DATA", Value::Bytes(part0)),
        ],
    )
    .expect("write the part");
    tx.define(Op::read(docs, &[Value::Int(id)]).columns(&["t"]))
        .expect("read");
    let error = tx.execute(ExecMode::NoCommit).expect_err("not UTF-8");
    assert_eq!(error.code, codes::BAD_VALUE, "{error}");
    assert!(
        error.message.contains("`docs`") && error.message.contains("`t`"),
        "{error}"
    );
    assert!(
        tx.execute(ExecMode::Commit).is_err(),
        "the transaction was rolled back"
    );
    check(session, docs, model, "after a corrupt text was refused");
    // Committed with the last part reads: the read's result is the error.
    let tx = session.begin().expect("begin");
    let mut part0 = text.as_bytes()[INLINE..(INLINE + PART).min(text.len())].to_vec();
    part0[5] = 0xff;
    tx.write(
        &parts,
        &[
            ("id", Value::Int(id)),
            ("$PART", Value::UInt(0)),
            ("$DATA", Value::Bytes(part0)),
        ],
    )
    .expect("write the part");
    let read = tx
        .define(Op::read(docs, &[Value::Int(id)]).columns(&["t"]))
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("committed");
    assert!(outcome.committed);
    let error = outcome.error(read).expect("the read failed");
    assert_eq!(error.code, codes::BAD_VALUE, "{error}");
    // Repair it by writing the whole value again.
    let tx = session.begin().expect("begin");
    tx.update(docs, &[Value::Int(id)], &[("t", Value::String(text))])
        .expect("update");
    tx.execute(ExecMode::Commit).expect("repair");
    check(session, docs, model, "after the text was repaired");
}

/// The asynchronous path runs the several requests of blob work from poll.
fn asynchronous(session: &Session, docs: &Arc<Table>, model: &mut Model) {
    let results = Arc::new(Mutex::new(Vec::new()));
    let mut expected = Vec::new();
    for id in 60..64i64 {
        let doc = Doc {
            b: Some(bytes(INLINE + (id as usize - 59) * PART, id as u8)),
            t: Some(text_of(300 + id as usize, 3)),
            n: 600 + id,
        };
        let tx = session.begin().expect("begin");
        tx.write(docs, &row_of(id, &doc)).expect("write");
        let sink = Arc::clone(&results);
        session
            .prepare(tx, ExecMode::Commit, move |r| {
                sink.lock().expect("sink").push(r.map(|o| o.committed))
            })
            .expect("prepare");
        expected.push((id, doc));
    }
    session.send().expect("send");
    let mut completed = 0;
    for _ in 0..100 {
        completed += session.poll(expected.len() - completed, Duration::from_secs(5));
        if completed == expected.len() {
            break;
        }
    }
    assert_eq!(completed, expected.len());
    let results = results.lock().expect("results");
    assert!(results.iter().all(|r| r == &Ok(true)), "{results:?}");
    model.extend(expected);
    // A read through the future.
    let tx = session.begin().expect("begin");
    let read = tx
        .read(docs, &[Value::Int(62)], LockMode::Committed)
        .expect("read");
    let outcome = block_on(tx.execute_async(ExecMode::Commit)).expect("async read");
    assert!(doc_of(outcome.row(read).expect("row")) == model[&62]);
    check(session, docs, model, "after the asynchronous writes");
}

/// A minimal executor: polls the future, parking between wakes.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[test]
fn blobs_of_any_size_against_a_sandbox() {
    let sandbox = Sandbox::start("client-blobs", 1, 1, 26000);
    let options = ClusterOptions {
        request_timeout: Duration::from_secs(20),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&sandbox.connect, options).expect("connects");
    let session = cluster.session().expect("session");
    let docs = create_docs(&session);
    let mut model = Model::new();
    inserts_reads_updates_writes_deletes(&session, &docs, &mut model);
    scans_return_whole_values(&session, &docs, &model);
    in_one_transaction(&session, &docs, &mut model);
    requests_per_execute(&cluster, &session, &docs, &mut model);
    corrupt_text_is_an_error(&session, &docs, &model);
    asynchronous(&session, &docs, &mut model);
    scans_return_whole_values(&session, &docs, &model);
    session.drop_table("docs").expect("drop");
}
