//! The transactional fragment, case by case: copy-on-write versions, lock
//! waits and their retries, inserts racing for a key, own reads of own
//! writes, table full, redo full, redo replay, restore, and scans.

use std::ops::Bound;
use std::path::PathBuf;

use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef, Value};
use storage::disk::SimDisk;
use storage::fragment::{
    Fragment, FragmentError, HeldOperation, Outcome, ReadMode, RedoKind, RedoNeed, RedoRecord,
    RedoSink, RowBuf, ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::ordered_index::Direction;
use storage::redo::{RedoConfig, RedoError, RedoLog};
use storage::Gci;

fn table() -> TableDef {
    TableDef::new(
        "orders",
        40,
        vec![
            Column::new("k", ColumnType::Int { unsigned: true }),
            Column::new("a", ColumnType::Int { unsigned: false }).nullable(),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 800,
                    collation: Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_a".into(),
        id: 1,
        columns: vec![1],
        kind: IndexKind::Ordered,
    })
    .index(IndexDef {
        name: "by_s".into(),
        id: 2,
        columns: vec![2, 1],
        kind: IndexKind::Ordered,
    })
    .partitions(4)
    .build()
    .unwrap()
}

fn row(k: u64, a: i64, s: &str) -> Vec<Value> {
    vec![Value::UInt(k), Value::Int(a), Value::String(s.into())]
}

fn key(k: u64) -> Vec<Value> {
    vec![Value::UInt(k)]
}

const T1: TxId = TxId(1);
const T2: TxId = TxId(2);
const T3: TxId = TxId(3);
const OP: OpId = OpId(1);

struct World {
    pool: PagePool,
    fragment: Fragment,
    redo: Vec<(Gci, Vec<u8>)>,
    grants: Vec<Grant>,
    gci: Gci,
}

impl World {
    fn new(budget_pages: u32) -> World {
        World {
            pool: PagePool::new(budget_pages),
            fragment: Fragment::new(&table(), 1),
            redo: Vec::new(),
            grants: Vec::new(),
            gci: 10,
        }
    }

    /// The row as `mode` sees it: `None` if not found; panics on Waiting.
    fn read(&mut self, k: u64, mode: ReadMode) -> Option<Vec<Value>> {
        let mut out = RowBuf::new();
        match self
            .fragment
            .read(&self.pool, &key(k), mode, &mut out)
            .unwrap()
        {
            Outcome::Done => Some(
                (0..3)
                    .map(|c| out.value(self.fragment.layout(), c).to_value())
                    .collect(),
            ),
            Outcome::NotFound => None,
            Outcome::Waiting => panic!("read of {k} waits"),
        }
    }

    fn committed(&mut self, k: u64) -> Option<Vec<Value>> {
        self.read(k, ReadMode::Committed)
    }

    fn insert(&mut self, tx: TxId, values: Vec<Value>) -> Result<Outcome, FragmentError> {
        self.fragment.insert(&mut self.pool, tx, OP, &values)
    }

    fn update_s(&mut self, tx: TxId, k: u64, s: &str) -> Result<Outcome, FragmentError> {
        self.fragment.update(
            &mut self.pool,
            tx,
            OP,
            &key(k),
            &[(2, Value::String(s.into()))],
        )
    }

    fn delete(&mut self, tx: TxId, k: u64) -> Result<Outcome, FragmentError> {
        self.fragment.delete(&mut self.pool, tx, OP, &key(k))
    }

    fn commit(&mut self, tx: TxId) {
        self.gci += 1;
        self.fragment
            .commit(
                &mut self.pool,
                tx,
                self.gci,
                &mut self.redo,
                &mut self.grants,
            )
            .unwrap();
        self.fragment.check_invariants(&self.pool);
    }

    fn abort(&mut self, tx: TxId) {
        self.fragment.abort(&mut self.pool, tx, &mut self.grants);
        self.fragment.check_invariants(&self.pool);
    }

    fn granted(&mut self) -> Vec<TxId> {
        self.grants.drain(..).map(|g| g.tx).collect()
    }
}

#[test]
fn pending_writes_keep_the_committed_image_for_committed_reads() {
    let mut w = World::new(64);
    assert_eq!(w.insert(T1, row(1, 10, "one")).unwrap(), Outcome::Done);
    // The insert is pending: others do not see it, its own transaction does.
    assert_eq!(w.committed(1), None);
    let own = ReadMode::Shared { tx: T1, op: OP };
    assert_eq!(w.read(1, own), Some(row(1, 10, "one")));
    assert_eq!(w.fragment.row_count(), 0);
    w.commit(T1);
    assert_eq!(w.committed(1), Some(row(1, 10, "one")));
    assert_eq!(w.fragment.row_count(), 1);

    // An update builds on its own pending image; committed reads still see
    // the old image.
    assert_eq!(w.update_s(T2, 1, "two").unwrap(), Outcome::Done);
    let changes = [(1, Value::Int(20))];
    let outcome = w.fragment.update(&mut w.pool, T2, OP, &key(1), &changes);
    assert_eq!(outcome.unwrap(), Outcome::Done);
    assert_eq!(w.committed(1), Some(row(1, 10, "one")));
    let own = ReadMode::Exclusive { tx: T2, op: OP };
    assert_eq!(w.read(1, own), Some(row(1, 20, "two")));
    w.fragment.check_invariants(&w.pool);

    // A locking read by another transaction waits for the writer.
    let mut out = RowBuf::new();
    let t3 = ReadMode::Shared {
        tx: T3,
        op: OpId(7),
    };
    let outcome = w.fragment.read(&w.pool, &key(1), t3, &mut out).unwrap();
    assert_eq!(outcome, Outcome::Waiting);
    w.commit(T2);
    assert_eq!(
        w.grants,
        vec![Grant {
            row: w.grants[0].row,
            tx: T3,
            op: OpId(7),
            mode: storage::locks::LockMode::Shared
        }]
    );
    w.grants.clear();
    // The retry finds the lock held and reads the new committed image.
    assert_eq!(w.read(1, t3), Some(row(1, 20, "two")));
    assert_eq!(w.committed(1), Some(row(1, 20, "two")));
    w.abort(T3);
    assert!(w.fragment.locks().is_empty());
    assert_eq!(w.fragment.transactions(), 0);
}

/// What `tx` holds, sorted (the fragment lists rows in no set order).
fn held(w: &World, tx: TxId, rows_max: usize) -> Vec<String> {
    let mut out: Vec<HeldOperation> = Vec::new();
    w.fragment.held_operations(tx, rows_max, &mut out);
    let mut held: Vec<String> = out.iter().map(|h| format!("{h:?}")).collect();
    held.sort();
    held
}

#[test]
fn held_operations_name_each_row_a_transaction_holds_once() {
    let mut w = World::new(64);
    for k in 1..=4 {
        assert_eq!(w.insert(T1, row(k, 1, "x")).unwrap(), Outcome::Done);
    }
    w.commit(T1);
    // T2 inserts 5, updates 1 (twice: one row), deletes 2, reads 4 under
    // a shared lock and 3 under a shared then an exclusive one (the row
    // listed twice: one operation).
    assert_eq!(w.insert(T2, row(5, 1, "x")).unwrap(), Outcome::Done);
    assert_eq!(w.update_s(T2, 1, "a").unwrap(), Outcome::Done);
    assert_eq!(w.update_s(T2, 1, "b").unwrap(), Outcome::Done);
    assert_eq!(w.delete(T2, 2).unwrap(), Outcome::Done);
    let shared = ReadMode::Shared { tx: T2, op: OP };
    assert!(w.read(4, shared).is_some());
    assert!(w.read(3, shared).is_some());
    let exclusive = ReadMode::Exclusive { tx: T2, op: OP };
    assert!(w.read(3, exclusive).is_some());
    // T3 waits for T2's exclusive lock of 3.
    let mut out = RowBuf::new();
    let t3 = ReadMode::Shared { tx: T3, op: OP };
    let outcome = w.fragment.read(&w.pool, &key(3), t3, &mut out).unwrap();
    assert_eq!(outcome, Outcome::Waiting);

    assert_eq!(
        held(&w, T2, 100),
        ["Delete", "Insert", "ReadExclusive", "ReadShared", "Update"]
    );
    assert_eq!(held(&w, T3, 100), ["WaitLock(Shared)"]);
    // Bounded: only the first entries of the transaction's list are looked at.
    assert_eq!(held(&w, T2, 2).len(), 2);
    assert_eq!(held(&w, T1, 100), Vec::<String>::new(), "T1 ended");
    w.commit(T2);
    assert_eq!(held(&w, T2, 100), Vec::<String>::new(), "T2 ended");
    // T3's retry holds the row it waited for: named once, though listed
    // for the wait and for the lock.
    assert_eq!(w.granted(), vec![T3]);
    assert!(w.read(3, t3).is_some());
    assert_eq!(held(&w, T3, 100), ["ReadShared"]);
}

#[test]
fn a_second_insert_of_a_key_waits_for_the_first() {
    let mut w = World::new(64);
    assert_eq!(w.insert(T1, row(5, 1, "a")).unwrap(), Outcome::Done);
    assert_eq!(w.insert(T2, row(5, 2, "b")).unwrap(), Outcome::Waiting);
    // The first aborts: the waiter is granted, its retry inserts.
    w.abort(T1);
    assert_eq!(w.granted(), vec![T2]);
    assert!(
        w.fragment.locks().is_empty(),
        "no lock outlives the removed row"
    );
    assert_eq!(w.insert(T2, row(5, 2, "b")).unwrap(), Outcome::Done);
    // A third waits for the second, which commits: the retry finds the key.
    assert_eq!(w.insert(T3, row(5, 3, "c")).unwrap(), Outcome::Waiting);
    w.commit(T2);
    assert_eq!(w.granted(), vec![T3]);
    let err = w.insert(T3, row(5, 3, "c")).unwrap_err();
    assert!(matches!(err, FragmentError::DuplicateKey { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "table orders: a row with this primary key already exists"
    );
    w.abort(T3);
    assert_eq!(w.committed(5), Some(row(5, 2, "b")));
}

#[test]
fn waiters_on_a_deleted_row_are_released_and_find_no_row() {
    let mut w = World::new(64);
    w.insert(T1, row(1, 1, "x")).unwrap();
    w.commit(T1);
    assert_eq!(w.delete(T1, 1).unwrap(), Outcome::Done);
    assert_eq!(w.update_s(T2, 1, "y").unwrap(), Outcome::Waiting);
    let t3 = ReadMode::Exclusive { tx: T3, op: OP };
    let mut out = RowBuf::new();
    assert_eq!(
        w.fragment.read(&w.pool, &key(1), t3, &mut out).unwrap(),
        Outcome::Waiting
    );
    w.commit(T1);
    assert_eq!(w.granted(), vec![T2, T3]);
    assert!(w.fragment.locks().is_empty());
    assert_eq!(w.update_s(T2, 1, "y").unwrap(), Outcome::NotFound);
    assert_eq!(w.read(1, t3), None);
    // The freed row id is reused by a new insert, which is not blocked.
    assert_eq!(w.insert(TxId(4), row(2, 2, "z")).unwrap(), Outcome::Done);
    w.commit(TxId(4));
    w.commit(T2);
    w.commit(T3);
    assert_eq!(w.committed(2), Some(row(2, 2, "z")));
}

#[test]
fn own_deletes_and_reinserts() {
    let mut w = World::new(64);
    w.insert(T1, row(1, 1, "old")).unwrap();
    w.commit(T1);
    // Delete then insert in one transaction: an update.
    assert_eq!(w.delete(T2, 1).unwrap(), Outcome::Done);
    assert_eq!(w.delete(T2, 1).unwrap(), Outcome::NotFound);
    assert_eq!(w.update_s(T2, 1, "x").unwrap(), Outcome::NotFound);
    assert_eq!(w.insert(T2, row(1, 2, "new")).unwrap(), Outcome::Done);
    assert!(matches!(
        w.insert(T2, row(1, 3, "again")),
        Err(FragmentError::DuplicateKey { .. })
    ));
    assert_eq!(w.committed(1), Some(row(1, 1, "old")));
    w.redo.clear();
    w.commit(T2);
    assert_eq!(w.committed(1), Some(row(1, 2, "new")));
    assert_eq!(w.redo.len(), 1);
    let record = RedoRecord::decode(&w.redo[0].1).unwrap();
    assert_eq!(record.kind, RedoKind::Update);
    assert_eq!(
        (record.table_id, record.fragment_id, w.redo[0].0),
        (40, 1, w.gci)
    );

    // Insert, update, delete and insert again of a new key, then commit:
    // one insert record with the last image.
    w.redo.clear();
    w.insert(T3, row(9, 1, "a")).unwrap();
    w.update_s(T3, 9, "b").unwrap();
    assert_eq!(w.delete(T3, 9).unwrap(), Outcome::Done);
    assert_eq!(w.committed(9), None);
    assert_eq!(w.read(9, ReadMode::Shared { tx: T3, op: OP }), None);
    assert_eq!(w.insert(T3, row(9, 4, "d")).unwrap(), Outcome::Done);
    w.commit(T3);
    assert_eq!(w.committed(9), Some(row(9, 4, "d")));
    let kinds: Vec<RedoKind> = w
        .redo
        .iter()
        .map(|r| RedoRecord::decode(&r.1).unwrap().kind)
        .collect();
    assert_eq!(kinds, [RedoKind::Insert]);

    // Insert then delete of a new key: nothing at all.
    w.redo.clear();
    w.insert(T3, row(10, 1, "a")).unwrap();
    w.delete(T3, 10).unwrap();
    w.commit(T3);
    assert_eq!(w.committed(10), None);
    assert!(w.redo.is_empty());
    assert_eq!(w.fragment.row_count(), 2);
}

#[test]
fn write_is_an_upsert_and_bad_input_is_refused() {
    let mut w = World::new(64);
    let outcome = w
        .fragment
        .write(&mut w.pool, T1, OP, &row(3, 1, "first"))
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    w.commit(T1);
    w.fragment
        .write(&mut w.pool, T2, OP, &row(3, 2, "second"))
        .unwrap();
    w.commit(T2);
    assert_eq!(w.committed(3), Some(row(3, 2, "second")));

    let err = w
        .fragment
        .update(&mut w.pool, T1, OP, &key(3), &[(0, Value::UInt(4))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "table orders: column `k` is part of the primary key and cannot be updated"
    );
    // Refused in the pass that writes the other columns: nothing of the
    // columns before it stays in the transaction's image.
    let err = w
        .fragment
        .update(
            &mut w.pool,
            T1,
            OP,
            &key(3),
            &[(1, Value::Int(9)), (0, Value::UInt(4))],
        )
        .unwrap_err();
    assert!(
        matches!(err, FragmentError::PrimaryKeyUpdate { .. }),
        "{err}"
    );
    assert_eq!(
        w.read(3, ReadMode::Exclusive { tx: T1, op: OP }),
        Some(row(3, 2, "second"))
    );
    let err = w
        .fragment
        .insert(&mut w.pool, T1, OP, &[Value::UInt(1)])
        .unwrap_err();
    assert!(matches!(err, FragmentError::WrongValue(_)), "{err}");
    let err = w.update_s(T1, 3, &"x".repeat(801)).unwrap_err();
    assert!(err.to_string().contains("column `s`"), "{err}");
    // The lock of the refused update is held to the end of T1.
    w.abort(T1);
    assert_eq!(w.committed(3), Some(row(3, 2, "second")));
}

#[test]
fn table_full_leaves_nothing_half_done_and_deletes_make_room() {
    // Two pages: one of fixed slots, one of var parts; the hash index needs
    // a third.
    let mut w = World::new(3);
    let long = "x".repeat(700);
    let mut inserted = 0;
    let err = loop {
        match w.insert(T1, row(inserted, 0, &long)) {
            Ok(Outcome::Done) => inserted += 1,
            Ok(other) => panic!("{other:?}"),
            Err(e) => break e,
        }
        w.commit(T1);
    };
    assert!(inserted > 5, "{inserted}");
    assert_eq!(
        err.to_string(),
        "table orders is full: DataMemory exhausted (98304 bytes)"
    );
    assert_eq!(w.fragment.row_count(), inserted);
    assert_eq!(w.committed(inserted), None);
    assert_eq!(w.fragment.pending_rows(), 0);
    w.fragment.check_invariants(&w.pool);
    w.commit(T1);

    // An update whose var part grows needs a reserve page: refused. As the
    // row's first change, it leaves no pending change behind; after
    // another, that one's image intact.
    let err = w.update_s(T2, 0, &"x".repeat(780)).unwrap_err();
    assert!(matches!(err, FragmentError::TableFull { .. }), "{err}");
    assert_eq!(w.fragment.pending_rows(), 0);
    w.fragment.check_invariants(&w.pool);
    w.update_s(T2, 0, "short").unwrap();
    let err = w.update_s(T2, 0, &"x".repeat(780)).unwrap_err();
    assert!(matches!(err, FragmentError::TableFull { .. }), "{err}");
    let own = ReadMode::Shared { tx: T2, op: OP };
    assert_eq!(w.read(0, own), Some(row(0, 0, "short")));
    w.commit(T2);
    assert_eq!(w.committed(0), Some(row(0, 0, "short")));

    // Deleting rows makes room again.
    for k in 1..4 {
        w.delete(T3, k).unwrap();
    }
    w.commit(T3);
    assert_eq!(w.insert(T1, row(1000, 0, &long)).unwrap(), Outcome::Done);
    w.commit(T1);
    assert_eq!(w.committed(1000), Some(row(1000, 0, &long)));
}

#[test]
fn a_growing_update_commits_on_the_page_it_reserved() {
    let mut w = World::new(64);
    for k in 0..20 {
        w.insert(T1, row(k, 0, "s")).unwrap();
    }
    w.commit(T1);
    let long = "y".repeat(790);
    for k in 0..20 {
        w.update_s(T2, k, &long).unwrap();
    }
    let held = w.pool.used_pages();
    // The rest of the pool goes to another fragment.
    let mut other = Fragment::new(&table(), 2);
    let mut k = 0;
    while other.insert(&mut w.pool, T3, OP, &row(k, 0, &long)).is_ok() {
        k += 1;
    }
    assert_eq!(w.pool.available_pages(), 0);
    assert!(held >= 20, "{held} pages: a reserve per growing update");
    w.commit(T2);
    for k in 0..20 {
        assert_eq!(w.committed(k), Some(row(k, 0, &long)));
    }
    other.abort(&mut w.pool, T3, &mut w.grants);
    other.check_invariants(&w.pool);
}

/// A sink that takes only so many bytes.
struct SmallSink {
    room: usize,
    records: Vec<Vec<u8>>,
}

impl RedoSink for SmallSink {
    fn check_room(&self, need: RedoNeed) -> Result<(), RedoError> {
        if need.payload_bytes > self.room {
            return Err(RedoError::Full {
                part: 0,
                used_bytes: 0,
                capacity_bytes: self.room as u64,
            });
        }
        Ok(())
    }

    fn append(&mut self, _gci: Gci, record: &[u8]) -> Result<(), RedoError> {
        assert!(record.len() <= self.room, "append after check_room");
        self.room -= record.len();
        self.records.push(record.to_vec());
        Ok(())
    }
}

#[test]
fn redo_full_refuses_the_commit_before_anything_changes() {
    let mut w = World::new(64);
    for k in 0..10 {
        w.insert(T1, row(k, k as i64, "v")).unwrap();
    }
    let mut sink = SmallSink {
        room: 100,
        records: Vec::new(),
    };
    let err = w
        .fragment
        .commit(&mut w.pool, T1, 5, &mut sink, &mut w.grants)
        .unwrap_err();
    assert!(err.is_temporary(), "{err}");
    assert!(matches!(err, FragmentError::RedoFull { .. }), "{err}");
    assert!(sink.records.is_empty());
    assert_eq!(w.fragment.row_count(), 0);
    assert_eq!(w.fragment.pending_rows(), 10);
    w.fragment.check_invariants(&w.pool);
    sink.room = 10_000;
    w.fragment
        .commit(&mut w.pool, T1, 5, &mut sink, &mut w.grants)
        .unwrap();
    assert_eq!(sink.records.len(), 10);
    assert_eq!(w.fragment.row_count(), 10);
}

#[test]
fn commits_through_a_real_redo_log_replay_into_an_equal_fragment() {
    let disk = SimDisk::new(7);
    let config = RedoConfig {
        dir: PathBuf::from("/node/redo"),
        part: 0,
        file_size_bytes: 64 << 10,
        files: 2,
        earlier_files: None,
    };
    let (mut log, _) = RedoLog::open(Box::new(disk.clone()), config.clone()).unwrap();
    let mut w = World::new(256);
    let text = "z".repeat(500);
    let mut gci = 1;
    let mut committed = 0u64;
    let full = loop {
        let tx = TxId(100 + gci as u64);
        for k in 0..4 {
            let k = committed + k;
            w.insert(tx, row(k, k as i64 % 7, &text)).unwrap();
        }
        w.delete(tx, committed / 2).unwrap();
        match w
            .fragment
            .commit(&mut w.pool, tx, gci, &mut log, &mut w.grants)
        {
            Ok(()) => committed += 4,
            Err(e) => {
                w.fragment.abort(&mut w.pool, tx, &mut w.grants);
                break e;
            }
        }
        log.flush(gci).unwrap();
        gci += 1;
    };
    assert!(matches!(full, FragmentError::RedoFull { .. }), "{full}");
    assert!(committed > 50, "{committed} rows before the log filled");
    w.fragment.check_invariants(&w.pool);

    drop(log);
    let (log, recovered) = RedoLog::open(Box::new(disk.clone()), config).unwrap();
    let mut replayed = Fragment::new(&table(), 1);
    let mut pool = PagePool::new(256);
    let mut replay = log.replay(&recovered, gci);
    while let Some(record) = replay.next_record().unwrap() {
        replayed.apply_redo(&mut pool, record.payload).unwrap();
    }
    replayed.check_invariants(&pool);
    assert_eq!(replayed.row_count(), w.fragment.row_count());
    assert_eq!(full_scan(&replayed, &pool), full_scan(&w.fragment, &w.pool));
}

/// Every committed row of a fragment as values, by key.
fn full_scan(fragment: &Fragment, pool: &PagePool) -> Vec<Vec<Value>> {
    let spec = ScanSpec {
        range: ScanRange::Full,
        columns: vec![0, 1, 2],
    };
    let mut rows = scan_all(fragment, pool, &spec, 7);
    rows.sort_by_key(|r| match r[0] {
        Value::UInt(k) => k,
        _ => unreachable!(),
    });
    rows
}

fn scan_all(
    fragment: &Fragment,
    pool: &PagePool,
    spec: &ScanSpec,
    batch: usize,
) -> Vec<Vec<Value>> {
    let mut cursor = ScanCursor::new();
    let mut out = ScanBatch::new();
    let mut rows = Vec::new();
    loop {
        let progress = fragment
            .scan(pool, spec, &mut cursor, batch, &mut out)
            .unwrap();
        assert!(out.len() <= batch);
        for i in 0..out.len() {
            rows.push(
                (0..spec.columns.len())
                    .map(|j| out.value(fragment.layout(), i, j).to_value())
                    .collect(),
            );
        }
        if progress == ScanProgress::Done {
            assert!(cursor.is_done());
            return rows;
        }
        assert_eq!(out.len(), batch);
    }
}

#[test]
fn redo_replay_is_idempotent_and_checks_its_records() {
    let mut w = World::new(64);
    w.insert(T1, row(1, 1, "a")).unwrap();
    w.insert(T1, row(2, 2, "b")).unwrap();
    w.commit(T1);
    w.update_s(T2, 1, "aa").unwrap();
    w.delete(T2, 2).unwrap();
    w.commit(T2);
    let mut pool = PagePool::new(64);
    let mut replayed = Fragment::new(&table(), 1);
    // Twice over: the second pass changes nothing.
    for _ in 0..2 {
        for (_, record) in &w.redo {
            replayed.apply_redo(&mut pool, record).unwrap();
        }
        replayed.check_invariants(&pool);
        assert_eq!(full_scan(&replayed, &pool), vec![row(1, 1, "aa")]);
    }
    let other_fragment = Fragment::new(&table(), 2);
    let mut wrong = replayed;
    let err = wrong.apply_redo(&mut pool, &w.redo[0].1[..10]).unwrap_err();
    assert!(err.to_string().contains("bad redo record"), "{err}");
    let mut other = other_fragment;
    let err = other.apply_redo(&mut pool, &w.redo[0].1).unwrap_err();
    assert!(err.to_string().contains("fragment 1"), "{err}");
    // A record whose image is not a row of the table.
    let mut bad = w.redo[0].1.clone();
    let last = bad.len() - 1;
    bad[last] = 0xFF;
    let err = wrong.apply_redo(&mut pool, &bad).unwrap_err();
    assert!(matches!(err, FragmentError::BadRow { .. }), "{err}");
    wrong.check_invariants(&pool);
}

#[test]
fn restore_and_rebuild_give_the_same_fragment() {
    let mut w = World::new(64);
    for k in 0..300 {
        w.insert(T1, row(k, (k % 13) as i64, &format!("s{}", k % 17)))
            .unwrap();
    }
    w.commit(T1);
    for k in (0..300).step_by(3) {
        w.delete(T2, k).unwrap();
    }
    w.commit(T2);
    // A pending insert is not part of what a checkpoint restores.
    w.insert(T3, row(1000, 0, "pending")).unwrap();

    let mut pool = PagePool::new(64);
    let mut restored = Fragment::new(&table(), 1);
    let source = w.fragment.row_store();
    for r in source.rows() {
        if source.is_uncommitted(&w.pool, r) {
            continue;
        }
        restored
            .restore_row(
                &mut pool,
                r,
                source.fixed(&w.pool, r),
                source.var(&w.pool, r),
            )
            .unwrap();
    }
    restored.rebuild_indexes(&mut pool).unwrap();
    restored.check_invariants(&pool);
    assert_eq!(restored.row_count(), 200);
    assert_eq!(full_scan(&restored, &pool), full_scan(&w.fragment, &w.pool));
    let spec = ScanSpec {
        range: ScanRange::Ordered {
            index_id: 2,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            direction: Direction::Descending,
        },
        columns: vec![2, 0],
    };
    assert_eq!(
        scan_all(&restored, &pool, &spec, 5),
        scan_all(&w.fragment, &w.pool, &spec, 5)
    );

    // A row id that cannot exist, and bytes that are not a row.
    let err = restored
        .restore_row(&mut pool, storage::RowId(u32::MAX), &[0; 9], &[])
        .unwrap_err();
    assert!(matches!(err, FragmentError::BadRestore { .. }), "{err}");
    let err = restored
        .restore_row(&mut pool, storage::RowId(5000), &[0; 3], &[])
        .unwrap_err();
    assert!(matches!(err, FragmentError::BadRow { .. }), "{err}");
    // Two rows with one key: a damaged checkpoint.
    let first = restored.row_store().rows().next().unwrap();
    let (fixed, var) = {
        let store = restored.row_store();
        (
            store.fixed(&pool, first).to_vec(),
            store.var(&pool, first).to_vec(),
        )
    };
    restored
        .restore_row(&mut pool, storage::memory::row_id(3, 0), &fixed, &var)
        .unwrap();
    let err = restored.rebuild_indexes(&mut pool).unwrap_err();
    assert!(err.to_string().contains("primary key of row"), "{err}");
    restored.release(&mut pool);
    assert_eq!(pool.used_pages(), 0);
}

#[test]
fn scans_see_committed_rows_in_batches_both_ways() {
    let mut w = World::new(64);
    for k in 0..100u64 {
        w.insert(T1, row(k, (k % 10) as i64, &format!("{:03}", 99 - k)))
            .unwrap();
    }
    w.commit(T1);
    // Pending changes are invisible to scans.
    w.insert(T2, row(500, 5, "pending")).unwrap();
    w.update_s(T2, 0, "changed").unwrap();
    w.delete(T2, 1).unwrap();

    let all = full_scan(&w.fragment, &w.pool);
    assert_eq!(all.len(), 100);
    assert_eq!(all[0], row(0, 0, "099"));
    assert_eq!(all[1], row(1, 1, "098"));

    // a in [3, 5): rows with a = 3 and a = 4, ascending by a.
    let spec = |lower, upper, direction| ScanSpec {
        range: ScanRange::Ordered {
            index_id: 1,
            lower,
            upper,
            direction,
        },
        columns: vec![1, 0],
    };
    let a = |v: i64| vec![Value::Int(v)];
    let rows = scan_all(
        &w.fragment,
        &w.pool,
        &spec(
            Bound::Included(a(3)),
            Bound::Excluded(a(5)),
            Direction::Ascending,
        ),
        3,
    );
    assert_eq!(rows.len(), 20);
    assert!(rows[..10].iter().all(|r| r[0] == Value::Int(3)));
    assert!(rows[10..].iter().all(|r| r[0] == Value::Int(4)));
    let down = scan_all(
        &w.fragment,
        &w.pool,
        &spec(
            Bound::Excluded(a(7)),
            Bound::Unbounded,
            Direction::Descending,
        ),
        4,
    );
    assert_eq!(down.len(), 20);
    assert!(down[..10].iter().all(|r| r[0] == Value::Int(9)));
    assert!(down[10..].iter().all(|r| r[0] == Value::Int(8)));
    // Within one key, row ids ascend one way and descend the other.
    let up = scan_all(
        &w.fragment,
        &w.pool,
        &spec(
            Bound::Included(a(9)),
            Bound::Included(a(9)),
            Direction::Ascending,
        ),
        2,
    );
    let mut reversed = down[..10].to_vec();
    reversed.reverse();
    assert_eq!(up, reversed);

    // The index on (s, a) with a prefix bound on s.
    let by_s = ScanSpec {
        range: ScanRange::Ordered {
            index_id: 2,
            lower: Bound::Included(vec![Value::String("090".into())]),
            upper: Bound::Unbounded,
            direction: Direction::Ascending,
        },
        columns: vec![2],
    };
    let rows = scan_all(&w.fragment, &w.pool, &by_s, 100);
    let strings: Vec<Value> = rows.into_iter().map(|mut r| r.remove(0)).collect();
    let expected: Vec<Value> = (90..100)
        .map(|i| Value::String(format!("{i:03}")))
        .collect();
    assert_eq!(strings, expected);

    // Bad specs.
    let no_index = spec(Bound::Unbounded, Bound::Unbounded, Direction::Ascending);
    let no_index = ScanSpec {
        range: match no_index.range {
            ScanRange::Ordered {
                lower,
                upper,
                direction,
                ..
            } => ScanRange::Ordered {
                index_id: 9,
                lower,
                upper,
                direction,
            },
            ScanRange::Full => unreachable!(),
        },
        columns: vec![0],
    };
    let mut cursor = ScanCursor::new();
    let mut out = ScanBatch::new();
    let err = w
        .fragment
        .scan(&w.pool, &no_index, &mut cursor, 10, &mut out)
        .unwrap_err();
    assert!(matches!(
        err,
        FragmentError::NoSuchIndex { index_id: 9, .. }
    ));
    let bad_bound = spec(
        Bound::Included(vec![Value::String("x".into())]),
        Bound::Unbounded,
        Direction::Ascending,
    );
    let err = w
        .fragment
        .scan(&w.pool, &bad_bound, &mut cursor, 10, &mut out)
        .unwrap_err();
    assert!(matches!(err, FragmentError::WrongValue(_)), "{err}");
    let bad_column = ScanSpec {
        range: ScanRange::Full,
        columns: vec![3],
    };
    let err = w
        .fragment
        .scan(&w.pool, &bad_column, &mut cursor, 10, &mut out)
        .unwrap_err();
    assert!(matches!(err, FragmentError::NoSuchColumn { column: 3, .. }));
}

#[test]
fn rows_equal_in_an_ordered_index_come_in_primary_key_order() {
    let mut w = World::new(64);
    // Row ids follow the inserts, not the keys.
    for k in [250u64, 220, 240, 210, 230] {
        w.insert(T1, row(k, 42, "same")).unwrap();
    }
    w.insert(T1, row(1, 41, "same")).unwrap();
    w.commit(T1);
    let spec = |direction| ScanSpec {
        range: ScanRange::Ordered {
            index_id: 1,
            lower: Bound::Included(vec![Value::Int(42)]),
            upper: Bound::Included(vec![Value::Int(42)]),
            direction,
        },
        columns: vec![0],
    };
    let keys =
        |rows: Vec<Vec<Value>>| -> Vec<Value> { rows.into_iter().map(|r| r[0].clone()).collect() };
    let up = keys(scan_all(
        &w.fragment,
        &w.pool,
        &spec(Direction::Ascending),
        2,
    ));
    let expected: Vec<Value> = [210u64, 220, 230, 240, 250].map(Value::UInt).to_vec();
    assert_eq!(up, expected);
    let down = keys(scan_all(
        &w.fragment,
        &w.pool,
        &spec(Direction::Descending),
        3,
    ));
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(down, reversed);
    // An index of (s, a) ends with k too: "same" rows by a, then k.
    let by_s = ScanSpec {
        range: ScanRange::Ordered {
            index_id: 2,
            lower: Bound::Included(vec![Value::String("same".into())]),
            upper: Bound::Included(vec![Value::String("same".into())]),
            direction: Direction::Ascending,
        },
        columns: vec![0],
    };
    let rows = keys(scan_all(&w.fragment, &w.pool, &by_s, 4));
    let expected: Vec<Value> = [1u64, 210, 220, 230, 240, 250].map(Value::UInt).to_vec();
    assert_eq!(rows, expected);
}

#[test]
fn a_read_that_must_not_wait_is_refused_and_leaves_nothing_behind() {
    let mut w = World::new(64);
    for k in 1..=2 {
        w.insert(T1, row(k, 1, "a")).unwrap();
    }
    w.commit(T1);
    // T2 holds 1 exclusively (an update) and 2 shared.
    w.update_s(T2, 1, "b").unwrap();
    assert!(w.read(2, ReadMode::Shared { tx: T2, op: OP }).is_some());
    let mut out = RowBuf::new();
    let mut no_wait = |w: &mut World, k: u64, mode: ReadMode| {
        w.fragment.read_no_wait(&w.pool, &key(k), mode, &mut out)
    };
    for mode in [
        ReadMode::Shared { tx: T3, op: OP },
        ReadMode::Exclusive { tx: T3, op: OP },
    ] {
        let err = no_wait(&mut w, 1, mode).unwrap_err();
        assert!(matches!(err, FragmentError::LockBusy { .. }), "{err}");
        assert!(err.to_string().contains("locked by another transaction"));
    }
    // A shared lock is compatible with T2's; an exclusive one is not.
    let t3_shared = ReadMode::Shared { tx: T3, op: OP };
    assert_eq!(no_wait(&mut w, 2, t3_shared).unwrap(), Outcome::Done);
    let t3_exclusive = ReadMode::Exclusive {
        tx: T3,
        op: OpId(2),
    };
    let err = no_wait(&mut w, 2, t3_exclusive).unwrap_err();
    assert!(matches!(err, FragmentError::LockBusy { .. }), "{err}");
    // Its own rows: T2 reads what it holds at once, its own image.
    let own = ReadMode::Exclusive {
        tx: T2,
        op: OpId(3),
    };
    assert_eq!(no_wait(&mut w, 1, own).unwrap(), Outcome::Done);
    // Nothing waits: T2's end grants nobody, and T3 then locks 1.
    assert_eq!(w.fragment.locks().waiting(), 0);
    w.commit(T2);
    assert!(w.grants.is_empty(), "the refused reads queued nothing");
    let t3 = ReadMode::Exclusive {
        tx: T3,
        op: OpId(4),
    };
    assert_eq!(no_wait(&mut w, 1, t3).unwrap(), Outcome::Done);
    w.abort(T3);
    assert!(w.fragment.locks().is_empty());
}

#[test]
fn lock_waiters_full_is_temporary_and_chained_requests_are_refused() {
    let mut w = World::new(64);
    w.insert(T1, row(1, 1, "a")).unwrap();
    w.commit(T1);
    w.update_s(T1, 1, "b").unwrap();
    assert_eq!(w.update_s(T2, 1, "c").unwrap(), Outcome::Waiting);
    let err = w.delete(T2, 1).unwrap_err();
    assert!(matches!(err, FragmentError::AlreadyWaiting { .. }), "{err}");
    w.abort(T2);
    w.abort(T1);
    assert!(w.grants.is_empty());
    assert!(w.fragment.locks().is_empty());
}
