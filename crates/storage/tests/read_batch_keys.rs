//! Batched and single committed reads by primary key against a model, for
//! the key shapes of the integer fast paths: the key encoder's integer
//! path (`KeyEncoder::encode`) and the three ways a row's key is compared
//! (one span of the fixed part, column by column in place, encoded).
//!
//! For each shape, a fragment gets random rows (signed keys with negative
//! values among them), some committed and some left as uncommitted inserts
//! of an open transaction; then random batches of present, missing and
//! uncommitted keys are read with `read_batch` and one by one with `read`,
//! and every result must be the model's: the committed row, or not found.
//! Enough rows that hash chains have overflow buckets, so the pipeline's
//! overflow step is taken.

use std::collections::BTreeMap;

use schema::{Collation, Column, ColumnType, TableDef, Value, ValueRef};
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadBatch, ReadMode, RedoNeed, RedoSink, RowBuf,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::redo::RedoError;
use storage::Gci;

/// Committed rows of each shape.
const ROWS: usize = 6_000;
/// Uncommitted inserts left pending.
const UNCOMMITTED_ROWS: usize = 400;
/// The payload of uncommitted inserts (never a committed row's).
const UNCOMMITTED_PAYLOAD: i64 = 1_999_999_999;
/// Random batches read per shape.
const BATCHES: usize = 60;

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
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A table, its key columns (table positions, key order), and how a key
/// value of each key column is drawn.
struct Shape {
    table: TableDef,
    key_columns: Vec<usize>,
    draw: fn(&mut Random, usize) -> Value,
}

fn table(name: &str, columns: Vec<Column>, key: Vec<usize>) -> TableDef {
    TableDef::new(name, 1, columns)
        .primary_key(key)
        .build()
        .unwrap()
}

/// BIGINT and SMALLINT signed, declared in key order: the key is one span
/// of the fixed part (10 bytes), values of either sign.
fn signed_span_shape() -> Shape {
    let columns = vec![
        Column::new("a", ColumnType::BigInt { unsigned: false }),
        Column::new("b", ColumnType::SmallInt { unsigned: false }),
        Column::new("v", ColumnType::Int { unsigned: false }),
    ];
    Shape {
        table: table("span", columns, vec![0, 1]),
        key_columns: vec![0, 1],
        draw: |random, column| match column {
            0 => Value::Int(random.below(200) as i64 - 100),
            _ => Value::Int(random.below(120) as i64 - 60),
        },
    }
}

/// Key columns in the other order than the table's: compared column by
/// column in place; TINYINT unsigned and MEDIUMINT signed.
fn reversed_shape() -> Shape {
    let columns = vec![
        Column::new("m", ColumnType::MediumInt { unsigned: false }),
        Column::new("v", ColumnType::Int { unsigned: true }),
        Column::new("t", ColumnType::TinyInt { unsigned: true }),
    ];
    Shape {
        table: table("reversed", columns, vec![2, 0]),
        key_columns: vec![2, 0],
        draw: |random, column| match column {
            2 => Value::UInt(random.below(256)),
            _ => Value::Int(random.below(100) as i64 - 8_388_608 + 40),
        },
    }
}

/// An integer and a case-insensitive string: compared encoded.
fn encoded_shape() -> Shape {
    let columns = vec![
        Column::new("i", ColumnType::Int { unsigned: false }),
        Column::new(
            "s",
            ColumnType::VarChar {
                max: 16,
                collation: Collation::Utf8mb4GeneralCi,
            },
        ),
        Column::new("v", ColumnType::Int { unsigned: false }),
    ];
    Shape {
        table: table("encoded", columns, vec![0, 1]),
        key_columns: vec![0, 1],
        draw: |random, column| match column {
            0 => Value::Int(random.below(100) as i64 - 50),
            _ => Value::String(format!("k{}", random.below(150))),
        },
    }
}

/// A random key of `shape`, as key values.
fn draw_key(shape: &Shape, random: &mut Random) -> Vec<Value> {
    shape
        .key_columns
        .iter()
        .map(|&c| (shape.draw)(random, c))
        .collect()
}

/// A whole row with key `key` and payload `v`.
fn row_of(shape: &Shape, key: &[Value], v: i64) -> Vec<Value> {
    let columns = shape.table.columns.len();
    let mut row: Vec<Value> = (0..columns)
        .map(|c| match shape.table.columns[c].ty {
            ColumnType::Int { unsigned: true } => Value::UInt(v as u64),
            _ => Value::Int(v),
        })
        .collect();
    for (&c, value) in shape.key_columns.iter().zip(key) {
        row[c] = value.clone();
    }
    row
}

/// The model's form of a key: a value's debug form, which tells apart
/// what the table tells apart for these shapes (the strings are drawn in
/// lowercase only).
fn model_key(key: &[Value]) -> String {
    format!("{key:?}")
}

/// The value of the payload column `v` of every shape.
fn payload(row: ValueRef<'_>) -> i64 {
    match row {
        ValueRef::Int(v) => v,
        ValueRef::UInt(v) => v as i64,
        other => panic!("payload {other:?}"),
    }
}

fn check_shape(shape: &Shape, seed: u64) {
    let mut random = Random(seed);
    let mut pool = PagePool::new(1_024);
    let mut fragment = Fragment::new(&shape.table, 0);
    let mut grants: Vec<Grant> = Vec::new();
    let mut committed: BTreeMap<String, i64> = BTreeMap::new();
    let mut tx = 1;
    while committed.len() < ROWS {
        let key = draw_key(shape, &mut random);
        let v = random.below(1_000_000) as i64;
        match fragment.insert(&mut pool, TxId(tx), OpId(0), &row_of(shape, &key, v)) {
            Ok(Outcome::Done) => {
                committed.insert(model_key(&key), v);
            }
            Err(FragmentError::DuplicateKey { .. }) => {}
            other => panic!("insert of {key:?}: {other:?}"),
        }
        if committed.len().is_multiple_of(300) {
            fragment
                .commit(&mut pool, TxId(tx), 1, &mut NullSink, &mut grants)
                .unwrap();
            tx += 1;
        }
    }
    fragment
        .commit(&mut pool, TxId(tx), 1, &mut NullSink, &mut grants)
        .unwrap();
    // Inserts left uncommitted: not rows for a committed read.
    let open = TxId(1_000_000);
    let mut uncommitted: Vec<Vec<Value>> = Vec::new();
    while uncommitted.len() < UNCOMMITTED_ROWS {
        let key = draw_key(shape, &mut random);
        if committed.contains_key(&model_key(&key)) {
            continue;
        }
        let row = row_of(shape, &key, UNCOMMITTED_PAYLOAD);
        match fragment.insert(&mut pool, open, OpId(0), &row) {
            Ok(Outcome::Done) => uncommitted.push(key),
            Err(FragmentError::DuplicateKey { .. }) => {}
            other => panic!("uncommitted insert of {key:?}: {other:?}"),
        }
    }
    fragment.check_invariants(&pool);

    let mut out = ReadBatch::new();
    let mut one = RowBuf::new();
    let layout = fragment.layout().clone();
    let v_column = shape
        .table
        .columns
        .iter()
        .position(|c| c.name == "v")
        .expect("every shape has a payload column `v`");
    let (mut found, mut not_found, mut pending) = (0, 0, 0);
    for round in 0..BATCHES {
        let batch = [1, 8, 9, 24, 64, 200][round % 6];
        let mut keys: Vec<Vec<Value>> = Vec::with_capacity(batch);
        for _ in 0..batch {
            keys.push(match random.below(4) {
                0 => uncommitted[random.below(uncommitted.len() as u64) as usize].clone(),
                _ => draw_key(shape, &mut random),
            });
        }
        let flat: Vec<Value> = keys.iter().flatten().cloned().collect();
        fragment.read_batch(&pool, &flat, &mut out).unwrap();
        assert_eq!(out.len(), batch);
        for (i, key) in keys.iter().enumerate() {
            let single = fragment
                .read(&pool, key, ReadMode::Committed, &mut one)
                .unwrap();
            match committed.get(&model_key(key)) {
                Some(&v) => {
                    found += 1;
                    assert_eq!(out.outcome(i), Outcome::Done, "{key:?}");
                    assert_eq!(single, Outcome::Done, "{key:?}");
                    let got = out.value(&layout, i, v_column).map(payload);
                    assert_eq!(got, Some(v), "batched row of {key:?}");
                    assert_eq!(payload(one.value(&layout, v_column)), v, "{key:?}");
                    assert_eq!(out.row(i), Some((one.fixed(), one.var())));
                    for (&c, value) in shape.key_columns.iter().zip(key) {
                        assert_eq!(out.value(&layout, i, c), Some(value.as_ref()));
                    }
                }
                None => {
                    if uncommitted.contains(key) {
                        pending += 1;
                    } else {
                        not_found += 1;
                    }
                    assert_eq!(out.outcome(i), Outcome::NotFound, "{key:?}");
                    assert_eq!(single, Outcome::NotFound, "{key:?}");
                    assert_eq!(out.row(i), None);
                }
            }
        }
    }
    assert_eq!(committed.len(), ROWS);
    assert!(
        found > 300 && not_found > 200 && pending > 200,
        "{found} found, {not_found} not found, {pending} uncommitted"
    );
}

#[test]
fn signed_span_keys_read_as_the_model_says() {
    check_shape(&signed_span_shape(), 0x5EED_0001);
}

#[test]
fn reversed_in_place_keys_read_as_the_model_says() {
    check_shape(&reversed_shape(), 0x5EED_0002);
}

#[test]
fn encoded_keys_read_as_the_model_says() {
    check_shape(&encoded_shape(), 0x5EED_0003);
}
