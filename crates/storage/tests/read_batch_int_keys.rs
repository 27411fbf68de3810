//! The integer-key fast path of `Fragment::read_batch` at its edges: keys
//! encoded at a fixed stride and hashed by the short-key hash must find
//! exactly what single reads find, and a batch the fast path gives up on
//! part way (a value out of range or not an integer, a composite key
//! given a value short) must fail as a whole through the general encoder,
//! leaving the batch empty and the next batch unaffected. Values given as
//! `Int` or `UInt` name the same key.

use schema::{Column, ColumnType, TableDef, Value};
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadBatch, ReadMode, RedoNeed, RedoSink, RowBuf,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::redo::RedoError;
use storage::Gci;

/// Rows committed, keys `(k, k * 3)` for `k` in `0..ROWS`.
const ROWS: u64 = 3_000;

struct NullSink;

impl RedoSink for NullSink {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, _gci: Gci, _record: &[u8]) -> Result<(), RedoError> {
        Ok(())
    }
}

/// Key `(a SMALLINT UNSIGNED, b BIGINT)`, six bytes plus eight: the
/// fast path's stride is 10 bytes, its hash the 9–16-byte case.
fn filled() -> (PagePool, Fragment) {
    let table = TableDef::new(
        "pairs",
        1,
        vec![
            Column::new("a", ColumnType::SmallInt { unsigned: true }),
            Column::new("b", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::Int { unsigned: false }),
        ],
    )
    .primary_key(vec![0, 1])
    .build()
    .unwrap();
    let mut pool = PagePool::new(256);
    let mut fragment = Fragment::new(&table, 0);
    let mut grants: Vec<Grant> = Vec::new();
    for k in 0..ROWS {
        let row = [
            Value::UInt(k % 60_000),
            Value::Int(k as i64 * 3 - 4_000),
            Value::Int(k as i64),
        ];
        let outcome = fragment
            .insert(&mut pool, TxId(1), OpId(k as u32), &row)
            .unwrap();
        assert_eq!(outcome, Outcome::Done);
    }
    fragment
        .commit(&mut pool, TxId(1), 1, &mut NullSink, &mut grants)
        .unwrap();
    (pool, fragment)
}

fn key(k: u64) -> [Value; 2] {
    [Value::UInt(k % 60_000), Value::Int(k as i64 * 3 - 4_000)]
}

#[test]
fn composite_integer_keys_read_as_single_reads() {
    let (pool, mut fragment) = filled();
    let mut out = ReadBatch::new();
    let mut one = RowBuf::new();
    // Every third key was never inserted (b off by one).
    let numbers: Vec<u64> = (0..200).map(|i| (i * 37) % (ROWS + 100)).collect();
    let mut keys = Vec::new();
    for (i, &k) in numbers.iter().enumerate() {
        let [a, b] = key(k);
        let b = match b {
            Value::Int(b) if i % 3 == 2 => Value::Int(b + 1),
            b => b,
        };
        keys.extend([a, b]);
    }
    fragment.read_batch(&pool, &keys, &mut out).unwrap();
    assert_eq!(out.len(), numbers.len());
    let mut found = 0;
    for (i, pair) in keys.chunks(2).enumerate() {
        let outcome = fragment
            .read(&pool, pair, ReadMode::Committed, &mut one)
            .unwrap();
        assert_eq!(out.outcome(i), outcome, "key {pair:?}");
        if outcome == Outcome::Done {
            found += 1;
            assert_eq!(out.row(i), Some((one.fixed(), one.var())), "key {pair:?}");
        } else {
            assert_eq!(out.row(i), None, "key {pair:?}");
        }
    }
    assert_eq!(out.found(), found);
    assert!(found > 100 && found < 150, "{found} of 200 found");
}

#[test]
fn int_and_uint_values_name_the_same_key() {
    let (pool, fragment) = filled();
    let mut out = ReadBatch::new();
    let keys = [
        Value::UInt(10),
        Value::Int(26 - 4_000),
        Value::Int(10),
        Value::Int(26 - 4_000),
        Value::UInt(1_500),
        Value::Int(500),
        Value::Int(1_500),
        Value::UInt(500),
    ];
    fragment.read_batch(&pool, &keys, &mut out).unwrap();
    // (10, -3974) was never inserted; (1500, 500) was.
    assert_eq!((out.row(0), out.row(1)), (None, None));
    assert!(out.row(2).is_some());
    assert_eq!(out.row(2), out.row(3));
    assert_eq!(out.found(), 2);
}

#[test]
fn a_batch_the_fast_path_gives_up_on_fails_whole_and_the_next_is_fine() {
    let (pool, fragment) = filled();
    let mut out = ReadBatch::new();
    let good: Vec<Value> = (0..40).flat_map(key).collect();
    fragment.read_batch(&pool, &good, &mut out).unwrap();
    assert_eq!(out.found(), 40);
    let first = out.row(0).map(|(f, v)| (f.to_vec(), v.to_vec()));
    for (wrong, column) in [
        // Out of SMALLINT UNSIGNED's range, after valid keys.
        (Value::UInt(70_000), "a"),
        (Value::Int(-1), "a"),
        (Value::String("7".into()), "a"),
    ] {
        let mut keys = good.clone();
        keys[30] = wrong.clone();
        let error = fragment.read_batch(&pool, &keys, &mut out).unwrap_err();
        assert!(matches!(error, FragmentError::WrongValue(_)), "{error}");
        assert!(error.to_string().contains(column), "{wrong:?}: {error}");
        assert!(out.is_empty(), "{wrong:?}: nothing is read");
    }
    // A value short: the last key has one column.
    let error = fragment
        .read_batch(&pool, &good[..good.len() - 1], &mut out)
        .unwrap_err();
    assert!(matches!(error, FragmentError::WrongValue(_)), "{error}");
    assert!(out.is_empty());
    // A smaller batch after a larger one: the stale slots of the larger
    // one are not results.
    fragment.read_batch(&pool, &good, &mut out).unwrap();
    assert_eq!(
        out.row(0).map(|(f, v)| (f.to_vec(), v.to_vec())),
        first,
        "the same row as before the errors"
    );
    let missing = [Value::UInt(59_999), Value::Int(0)];
    fragment.read_batch(&pool, &missing, &mut out).unwrap();
    assert_eq!((out.len(), out.found(), out.row(0)), (1, 0, None));
}
