//! A warm fragment reads, prefetches, updates, inserts, deletes, commits and
//! aborts without touching the heap: these run once per operation on the LDM
//! thread, so an allocation here would be one per operation. Counted with a
//! global allocator that counts the allocations of the current thread
//! (tests run in parallel).
//!
//! The rows are NDB's flexAsynch rows: 25 INT UNSIGNED columns, the first
//! the primary key. Ordered indexes are left out: the standard B-tree they
//! use allocates a node now and then when keys change (see
//! `ordered_index`).

use schema::{Column, ColumnType, TableDef, Value};
use storage::fragment::{Fragment, Outcome, ReadMode, RedoNeed, RedoSink, RowBuf};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::redo::RedoError;
use storage::Gci;

use testkit::allocations;

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

const COLUMNS: usize = 25;
const ROWS: u64 = 2_000;

/// A redo sink that keeps only the last commit's bytes, in a buffer that
/// stops growing.
struct ReusedSink {
    bytes: Vec<u8>,
    records: u64,
}

impl RedoSink for ReusedSink {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, _gci: Gci, record: &[u8]) -> Result<(), RedoError> {
        self.bytes.clear();
        self.bytes.extend_from_slice(record);
        self.records += 1;
        Ok(())
    }
}

fn table() -> TableDef {
    let columns = (0..COLUMNS)
        .map(|i| Column::new(format!("c{i}"), ColumnType::Int { unsigned: true }))
        .collect();
    TableDef::new("flex", 1, columns)
        .primary_key(vec![0])
        .build()
        .unwrap()
}

struct World {
    pool: PagePool,
    fragment: Fragment,
    sink: ReusedSink,
    grants: Vec<Grant>,
    out: RowBuf,
    /// Values of one row and one key, reused.
    row: Vec<Value>,
    key: Vec<Value>,
    changes: Vec<(usize, Value)>,
    gci: Gci,
}

impl World {
    fn set_row(&mut self, k: u64, seed: u64) {
        self.row[0] = Value::UInt(k);
        for (i, value) in self.row.iter_mut().enumerate().skip(1) {
            *value = Value::UInt((k * 31 + seed + i as u64) & 0xFFFF_FFFF);
        }
    }

    fn insert_all(&mut self, tx: TxId) {
        for k in 0..ROWS {
            self.set_row(k, 1);
            let outcome = self
                .fragment
                .insert(&mut self.pool, tx, OpId(k as u32), &self.row)
                .unwrap();
            assert_eq!(outcome, Outcome::Done);
        }
        self.commit(tx);
    }

    fn delete_all(&mut self, tx: TxId) {
        for k in 0..ROWS {
            self.key[0] = Value::UInt(k);
            let outcome = self
                .fragment
                .delete(&mut self.pool, tx, OpId(1), &self.key)
                .unwrap();
            assert_eq!(outcome, Outcome::Done);
        }
        self.commit(tx);
    }

    fn commit(&mut self, tx: TxId) {
        self.gci += 1;
        self.fragment
            .commit(
                &mut self.pool,
                tx,
                self.gci,
                &mut self.sink,
                &mut self.grants,
            )
            .unwrap();
    }

    fn committed_reads(&mut self) -> u64 {
        let mut sum = 0;
        for k in 0..ROWS {
            self.key[0] = Value::UInt(k);
            let outcome = self
                .fragment
                .read(&self.pool, &self.key, ReadMode::Committed, &mut self.out)
                .unwrap();
            assert_eq!(outcome, Outcome::Done);
            sum += u64::from(self.out.fixed()[7]);
        }
        sum
    }

    /// Each row updated by its own transaction (two columns, one of them
    /// twice), read back under its lock, committed; then one aborted. The
    /// next row's bucket and row are prefetched first, as the LDM does a
    /// few ops ahead in a batch of writes.
    fn update_cycle(&mut self, round: u64) {
        for k in 0..ROWS {
            let tx = TxId(round * ROWS + k + 10);
            self.key[0] = Value::UInt((k + 1) % ROWS);
            let hash = self.fragment.prefetch_key(&self.pool, &self.key);
            self.fragment
                .prefetch_row(&self.pool, hash.expect("an INT key encodes"));
            self.key[0] = Value::UInt(k);
            self.changes[0].1 = Value::UInt(round);
            self.changes[1].1 = Value::UInt(k + round);
            let outcome = self
                .fragment
                .update(&mut self.pool, tx, OpId(1), &self.key, &self.changes)
                .unwrap();
            assert_eq!(outcome, Outcome::Done);
            let mode = ReadMode::Exclusive { tx, op: OpId(2) };
            let outcome = self
                .fragment
                .read(&self.pool, &self.key, mode, &mut self.out)
                .unwrap();
            assert_eq!(outcome, Outcome::Done);
            if k % 10 == 0 {
                self.fragment.abort(&mut self.pool, tx, &mut self.grants);
            } else {
                self.commit(tx);
            }
        }
    }
}

#[test]
fn a_warm_fragment_does_not_allocate() {
    let mut w = World {
        pool: PagePool::new(1_024),
        fragment: Fragment::new(&table(), 0),
        sink: ReusedSink {
            bytes: Vec::new(),
            records: 0,
        },
        grants: Vec::with_capacity(64),
        out: RowBuf::new(),
        row: vec![Value::Null; COLUMNS],
        key: vec![Value::Null],
        changes: vec![(3, Value::Null), (7, Value::Null), (3, Value::Null)],
        gci: 1,
    };
    w.changes[2].1 = Value::UInt(9);
    // Warm up: every buffer, map and pool page reaches its size.
    w.insert_all(TxId(1));
    w.update_cycle(1);
    w.committed_reads();
    w.delete_all(TxId(2));
    w.insert_all(TxId(3));
    w.fragment.check_invariants(&w.pool);

    let before = allocations();
    let sum = w.committed_reads();
    assert_eq!(allocations() - before, 0, "allocations in committed reads");
    assert!(sum > 0);

    let before = allocations();
    let records = w.sink.records;
    for round in 2..5 {
        w.update_cycle(round);
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations in prefetch, update, locking read, commit and abort"
    );
    assert_eq!(w.sink.records - records, 3 * (ROWS - ROWS / 10));

    let before = allocations();
    for round in 0..3 {
        w.delete_all(TxId(100 + round));
        w.insert_all(TxId(200 + round));
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations in delete and insert"
    );

    w.fragment.check_invariants(&w.pool);
    // The counter works at all.
    let boxed = Box::new(1u8);
    assert!(allocations() > before, "{boxed}");
}
