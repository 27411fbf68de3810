//! Reading an op batch allocates nothing: validation, iteration over ops,
//! keys, values and projections, and the TC's copy into a buffer that has
//! room. (This binary's global allocator counts allocations per thread.)

mod common;

use common::{write_ops, Op};
use proto::{
    LockMode, OpBatchReader, OpBatchWriter, OpHeader, OpKind, ResultReader, ResultWriter, NO_INDEX,
};
use schema::{Date, DateTime, Decimal, Value};
use testkit::allocations;

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

fn batch() -> Vec<u8> {
    let values = vec![
        Value::Null,
        Value::Int(-5),
        Value::UInt(7),
        Value::Float(1.5),
        Value::Double(-2.25),
        Value::Decimal(Decimal::parse("-12345678901234567890.123456789").unwrap()),
        Value::String("grüße".into()),
        Value::Bytes(vec![0, 1, 2]),
        Value::Date(Date::new(2024, 2, 29)),
        Value::DateTime(DateTime::new(Date::new(2024, 2, 29), 23, 59, 59, 999_999)),
        Value::Timestamp(1_700_000_000_000_000),
        Value::Bit(0b1011),
        Value::BlobHead {
            total_bytes: 3,
            inline: vec![1, 2, 3],
        },
    ];
    let ops: Vec<Op> = (0..100)
        .map(|i| Op {
            header: OpHeader {
                op_index: i,
                table_id: 1,
                table_version: 0,
                index_id: NO_INDEX,
                partition: 0,
                kind: OpKind::Write,
                lock: LockMode::Exclusive,
                flags: 0,
            },
            keys: vec![Value::Int(i64::from(i)), Value::String("k".into())],
            values: values
                .iter()
                .cloned()
                .enumerate()
                .map(|(c, v)| (c as u16, v))
                .collect(),
            projection: vec![1, 2, 3],
        })
        .collect();
    write_ops(&ops)
}

#[test]
fn reading_an_op_batch_allocates_nothing() {
    let bytes = batch();
    let mut copy = Vec::with_capacity(2 * bytes.len());
    let before = allocations();
    let reader = OpBatchReader::new(&bytes).unwrap();
    let mut seen = 0usize;
    let mut writer = OpBatchWriter::new(&mut copy);
    for op in &reader {
        seen += op.keys().filter(|k| !k.is_null()).count();
        seen += op.values().filter(|(_, v)| !v.is_null()).count();
        seen += op.projection().count();
        writer
            .copy(
                &OpHeader {
                    partition: 1,
                    ..op.header
                },
                &op,
            )
            .unwrap();
    }
    drop(writer);
    let copied = OpBatchReader::new(&copy).unwrap();
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "reading allocated {} times",
        after - before
    );
    assert_eq!(seen, 100 * (2 + 12 + 3));
    assert_eq!(copied.len(), 100);
}

#[test]
fn reading_results_allocates_nothing() {
    let mut out = Vec::new();
    let mut w = ResultWriter::new(&mut out);
    for i in 0..50 {
        w.row(i);
        w.value(Value::String("value".into()).as_ref());
        w.value(Value::Int(1).as_ref());
        w.end_row().unwrap();
        w.error(i + 100, 626).unwrap();
    }
    drop(w);
    let before = allocations();
    let reader = ResultReader::new(&out).unwrap();
    let values: usize = reader.iter().map(|r| r.values().count()).sum();
    assert_eq!(allocations() - before, 0);
    assert_eq!(values, 100);
}
