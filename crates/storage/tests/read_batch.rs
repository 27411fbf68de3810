//! Batched committed reads (`Fragment::read_batch`) against the one-by-one
//! path: for random batches of keys — rows that exist, keys that were
//! never inserted, uncommitted inserts, rows with a pending update or
//! delete — every result equals what `Fragment::read` with
//! `ReadMode::Committed` returns. Two tables, one per way of comparing a
//! key with a row: an INT key (compared in place) and a case-insensitive
//! VARCHAR + INT key with variable-size parts (compared encoded). Enough
//! rows that many hash buckets have overflow buckets.

use schema::{Collation, Column, ColumnType, TableDef, Value};
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadBatch, ReadMode, RedoNeed, RedoSink, RowBuf,
    READ_BATCH_KEYS_MAX,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::redo::RedoError;
use storage::Gci;

/// Rows committed before the reads.
const ROWS: u64 = 12_000;
/// Keys are drawn from `0..KEY_SPACE`: about a third were never inserted.
const KEY_SPACE: u64 = 18_000;

struct NullSink;

impl RedoSink for NullSink {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, _gci: Gci, _record: &[u8]) -> Result<(), RedoError> {
        Ok(())
    }
}

/// xorshift64: deterministic, seeded.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A table and how its rows and keys are made from a number.
struct Shape {
    table: TableDef,
    row: fn(u64, u64) -> Vec<Value>,
    key: fn(u64) -> Vec<Value>,
    /// A change of a non-key column, for pending updates.
    change: fn(u64) -> (usize, Value),
}

fn int_key_shape() -> Shape {
    let columns = (0..6)
        .map(|i| Column::new(format!("c{i}"), ColumnType::Int { unsigned: true }))
        .collect();
    Shape {
        table: TableDef::new("ints", 1, columns)
            .primary_key(vec![0])
            .build()
            .unwrap(),
        row: |k, version| {
            (0..6u64)
                .map(|c| Value::UInt(if c == 0 { k } else { k * 7 + c + version }))
                .collect()
        },
        key: |k| vec![Value::UInt(k)],
        change: |k| (3, Value::UInt(k + 1)),
    }
}

fn string_key_shape() -> Shape {
    let name = ColumnType::VarChar {
        max: 40,
        collation: Collation::Utf8mb4GeneralCi,
    };
    let note = ColumnType::VarChar {
        max: 200,
        collation: Collation::Utf8mb4Bin,
    };
    Shape {
        table: TableDef::new(
            "people",
            2,
            vec![
                Column::new("name", name),
                Column::new("n", ColumnType::BigInt { unsigned: false }),
                Column::new("note", note).nullable(),
                Column::new("x", ColumnType::Double),
            ],
        )
        .primary_key(vec![0, 1])
        .build()
        .unwrap(),
        row: |k, version| {
            vec![
                Value::String(format!("user-{}", k % 97)),
                Value::Int(k as i64 - 9_000),
                if k % 5 == 0 {
                    Value::Null
                } else {
                    Value::String("n".repeat((k % 37 + version) as usize))
                },
                Value::Double(k as f64 / 4.0),
            ]
        },
        // Upper case: equal to the stored lower-case names under the
        // column's collation.
        key: |k| {
            vec![
                Value::String(format!("USER-{}", k % 97)),
                Value::Int(k as i64 - 9_000),
            ]
        },
        change: |k| (2, Value::String(format!("changed {k}"))),
    }
}

/// A fragment with `ROWS` committed rows (keys drawn at random), then
/// open transactions: uncommitted inserts, pending updates and deletes.
fn filled(shape: &Shape, random: &mut Random) -> (PagePool, Fragment) {
    let mut pool = PagePool::new(2_048);
    let mut fragment = Fragment::new(&shape.table, 0);
    let mut grants: Vec<Grant> = Vec::new();
    let mut inserted = 0;
    let mut tx = 1;
    while inserted < ROWS {
        let k = random.below(KEY_SPACE);
        match fragment.insert(&mut pool, TxId(tx), OpId(0), &(shape.row)(k, 0)) {
            Ok(Outcome::Done) => inserted += 1,
            Err(FragmentError::DuplicateKey { .. }) => {}
            other => panic!("insert of {k}: {other:?}"),
        }
        if inserted % 500 == 0 {
            fragment
                .commit(&mut pool, TxId(tx), 1, &mut NullSink, &mut grants)
                .unwrap();
            tx += 1;
        }
    }
    fragment
        .commit(&mut pool, TxId(tx), 1, &mut NullSink, &mut grants)
        .unwrap();
    // Changes left pending: committed reads must not see them.
    let pending = TxId(1_000_000);
    for op in 0..600u32 {
        let k = random.below(KEY_SPACE);
        let outcome = match op % 3 {
            0 => fragment.write(&mut pool, pending, OpId(op), &(shape.row)(k, 5)),
            1 => fragment.update(
                &mut pool,
                pending,
                OpId(op),
                &(shape.key)(k),
                &[(shape.change)(k)],
            ),
            _ => fragment.delete(&mut pool, pending, OpId(op), &(shape.key)(k)),
        };
        assert!(outcome.is_ok(), "pending change of {k}: {outcome:?}");
    }
    fragment.check_invariants(&pool);
    assert!(fragment.pending_rows() > 300);
    assert!(fragment.row_count() == ROWS);
    (pool, fragment)
}

fn check_batches_equal_single_reads(shape: &Shape, seed: u64) {
    let mut random = Random(seed);
    let (pool, mut fragment) = filled(shape, &mut random);
    let mut out = ReadBatch::new();
    let mut one = RowBuf::new();
    let mut keys: Vec<Value> = Vec::new();
    let (mut found, mut missing) = (0, 0);
    for round in 0..120 {
        // Sizes across the pipeline's group edges, up to the limit.
        let batch = match round % 6 {
            0 => 1,
            1 => 7,
            2 => 8,
            3 => 17,
            4 => 64,
            _ => 1 + random.below(300) as usize,
        };
        let batch = if round == 119 {
            READ_BATCH_KEYS_MAX
        } else {
            batch
        };
        keys.clear();
        let numbers: Vec<u64> = (0..batch).map(|_| random.below(KEY_SPACE)).collect();
        for &k in &numbers {
            keys.extend((shape.key)(k));
        }
        fragment.read_batch(&pool, &keys, &mut out).unwrap();
        assert_eq!(out.len(), batch);
        for (i, &k) in numbers.iter().enumerate() {
            let outcome = fragment
                .read(&pool, &(shape.key)(k), ReadMode::Committed, &mut one)
                .unwrap();
            assert_eq!(out.outcome(i), outcome, "key {k}, place {i} of {batch}");
            match outcome {
                Outcome::Done => {
                    found += 1;
                    assert_eq!(out.row(i), Some((one.fixed(), one.var())), "row of key {k}");
                    assert_eq!(
                        out.value(fragment.layout(), i, 1),
                        Some(one.value(fragment.layout(), 1))
                    );
                }
                _ => {
                    missing += 1;
                    assert_eq!(out.row(i), None, "key {k}");
                    assert_eq!(out.value(fragment.layout(), i, 0), None);
                }
            }
        }
        assert_eq!(
            out.found(),
            (0..batch)
                .filter(|&i| out.outcome(i) == Outcome::Done)
                .count()
        );
    }
    assert!(
        found > 4_000 && missing > 2_000,
        "{found} found, {missing} missing"
    );
}

#[test]
fn batches_of_int_keys_equal_single_committed_reads() {
    check_batches_equal_single_reads(&int_key_shape(), 0x5EED_0001);
}

#[test]
fn batches_of_string_keys_equal_single_committed_reads() {
    check_batches_equal_single_reads(&string_key_shape(), 0x5EED_0002);
}

#[test]
fn a_key_that_does_not_fit_fails_the_batch_with_nothing_read() {
    let shape = int_key_shape();
    let mut random = Random(3);
    let (pool, fragment) = filled(&shape, &mut random);
    let mut out = ReadBatch::new();
    fragment
        .read_batch(&pool, &[Value::UInt(1), Value::UInt(2)], &mut out)
        .unwrap();
    assert_eq!(out.len(), 2);
    let wrong = [Value::UInt(1), Value::String("two".into())];
    let error = fragment.read_batch(&pool, &wrong, &mut out).unwrap_err();
    assert!(matches!(error, FragmentError::WrongValue(_)), "{error}");
    assert!(
        error.to_string().contains("c0"),
        "the column is named: {error}"
    );
    assert!(out.is_empty(), "nothing is read");
    // A composite key given a value short.
    let shape = string_key_shape();
    let (pool, fragment) = filled(&shape, &mut random);
    let short = [
        Value::String("user-1".into()),
        Value::Int(1),
        Value::String("x".into()),
    ];
    assert!(fragment.read_batch(&pool, &short, &mut out).is_err());
    assert!(out.is_empty());
    // No keys: no results.
    fragment.read_batch(&pool, &[], &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn an_empty_fragment_finds_nothing() {
    let shape = int_key_shape();
    let pool = PagePool::new(4);
    let fragment = Fragment::new(&shape.table, 0);
    let mut out = ReadBatch::new();
    let keys: Vec<Value> = (0..20).map(Value::UInt).collect();
    fragment.read_batch(&pool, &keys, &mut out).unwrap();
    assert_eq!((out.len(), out.found()), (20, 0));
}

/// Two keys whose hashes share their low 32 bits (the fragment the hash
/// index stores) land in one bucket as equal fragments: the batch's
/// candidate for one of them is the other's row, and the key compare must
/// send it on to the full lookup.
#[test]
fn keys_with_equal_hash_fragments_are_told_apart() {
    use schema::{distribution_hash, KeyEncoder};
    use std::collections::HashMap;

    let shape = int_key_shape();
    let encoder = KeyEncoder::primary_key(&shape.table);
    let mut seen: HashMap<u32, u64> = HashMap::new();
    let mut key = Vec::new();
    let pair = (0..1_000_000u64)
        .find_map(|k| {
            key.clear();
            encoder.encode(&[Value::UInt(k)], &mut key).unwrap();
            let fragment = distribution_hash(&key) as u32;
            seen.insert(fragment, k).map(|other| (other, k))
        })
        .expect("a million keys hold a 32-bit collision");
    let mut pool = PagePool::new(64);
    let mut fragment = Fragment::new(&shape.table, 0);
    let mut grants = Vec::new();
    for (op, k) in [pair.0, pair.1, 5, 6, 7].into_iter().enumerate() {
        let outcome = fragment
            .insert(&mut pool, TxId(1), OpId(op as u32), &(shape.row)(k, 0))
            .unwrap();
        assert_eq!(outcome, Outcome::Done);
    }
    fragment
        .commit(&mut pool, TxId(1), 1, &mut NullSink, &mut grants)
        .unwrap();
    let mut out = ReadBatch::new();
    let keys = [
        Value::UInt(pair.1),
        Value::UInt(pair.0),
        Value::UInt(pair.0 + 1),
    ];
    fragment.read_batch(&pool, &keys, &mut out).unwrap();
    let layout = fragment.layout();
    assert_eq!(
        out.value(layout, 0, 0).map(|v| v.to_value()),
        Some(Value::UInt(pair.1))
    );
    assert_eq!(
        out.value(layout, 1, 0).map(|v| v.to_value()),
        Some(Value::UInt(pair.0))
    );
    assert_eq!(out.outcome(2), Outcome::NotFound);
}
