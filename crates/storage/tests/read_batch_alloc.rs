//! A warm `ReadBatch` makes `Fragment::read_batch` allocate nothing: the
//! transaction coordinator hands the LDM batch after batch, so an
//! allocation here would be one per batch. Counted with a global allocator
//! that counts the allocations of the current thread (tests run in
//! parallel). Rows with and without variable-size parts.

use schema::{Collation, Column, ColumnType, TableDef, Value};
use storage::fragment::{Fragment, Outcome, ReadBatch, RedoNeed, RedoSink, READ_BATCH_KEYS_MAX};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::redo::RedoError;
use storage::Gci;

use testkit::allocations;

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

const ROWS: u64 = 5_000;

struct NullSink;

impl RedoSink for NullSink {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, _gci: Gci, _record: &[u8]) -> Result<(), RedoError> {
        Ok(())
    }
}

fn check_warm_batches_do_not_allocate(table: TableDef, row: fn(u64) -> Vec<Value>) {
    let mut pool = PagePool::new(1_024);
    let mut fragment = Fragment::new(&table, 0);
    let mut grants: Vec<Grant> = Vec::new();
    for k in 0..ROWS {
        let outcome = fragment
            .insert(&mut pool, TxId(1), OpId(k as u32), &row(k))
            .unwrap();
        assert_eq!(outcome, Outcome::Done);
    }
    fragment
        .commit(&mut pool, TxId(1), 1, &mut NullSink, &mut grants)
        .unwrap();
    // Batches of every size up to the limit, a fifth of the keys missing;
    // the values are made before counting (they are the caller's).
    let batches: Vec<Vec<Value>> = [1, 8, 63, 64, 500, READ_BATCH_KEYS_MAX]
        .iter()
        .map(|&n| {
            (0..n as u64)
                .map(|i| Value::UInt(i * 7919 % (ROWS + ROWS / 4)))
                .collect()
        })
        .collect();
    let mut out = ReadBatch::new();
    // Warm: the buffers grow to the largest batch.
    fragment
        .read_batch(&pool, batches.last().unwrap(), &mut out)
        .unwrap();
    let before = allocations();
    let mut found = 0;
    for _ in 0..20 {
        for keys in &batches {
            fragment.read_batch(&pool, keys, &mut out).unwrap();
            assert_eq!(out.len(), keys.len());
            found += out.found();
        }
    }
    assert_eq!(allocations() - before, 0, "allocations by warm batches");
    assert!(
        found > 20 * READ_BATCH_KEYS_MAX * 3 / 4,
        "{found} rows found"
    );
}

#[test]
fn warm_batches_of_fixed_size_rows_do_not_allocate() {
    let columns = (0..25)
        .map(|i| Column::new(format!("c{i}"), ColumnType::Int { unsigned: true }))
        .collect();
    let table = TableDef::new("flex", 1, columns)
        .primary_key(vec![0])
        .build()
        .unwrap();
    check_warm_batches_do_not_allocate(table, |k| {
        (0..25u64)
            .map(|c| Value::UInt(if c == 0 { k } else { k ^ c }))
            .collect()
    });
}

#[test]
fn warm_batches_of_rows_with_var_parts_do_not_allocate() {
    let note = ColumnType::VarChar {
        max: 300,
        collation: Collation::Utf8mb4Bin,
    };
    let table = TableDef::new(
        "notes",
        2,
        vec![
            Column::new("k", ColumnType::Int { unsigned: true }),
            Column::new("note", note),
        ],
    )
    .primary_key(vec![0])
    .build()
    .unwrap();
    check_warm_batches_do_not_allocate(table, |k| {
        vec![
            Value::UInt(k),
            Value::String("x".repeat((k % 250) as usize)),
        ]
    });
}
