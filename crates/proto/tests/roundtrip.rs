//! Everything written reads back the same: values of every type, op
//! batches (also after the TC's copy), results, scan specs, row batches
//! and filters.

mod common;

use common::*;
use proptest::prelude::*;
use proto::{
    get_value, put_value, Bound, Filter, OpBatchReader, OpBatchWriter, Reader, ResultReader,
    ResultWriter, RowBatchReader, RowBatchWriter, ScanSpec, NO_INDEX, NO_PARTITION,
};
use schema::Value;

proptest! {
    #[test]
    fn values_round_trip(values in proptest::collection::vec(arb_value(), 0..20)) {
        let mut out = Vec::new();
        for v in &values {
            put_value(&mut out, v.as_ref());
        }
        let mut r = Reader::new(&out, "test");
        for v in &values {
            prop_assert_eq!(&get_value(&mut r).unwrap().to_value(), v);
        }
        prop_assert!(r.is_empty());
    }

    #[test]
    fn op_batches_round_trip(ops in proptest::collection::vec(arb_op(), 0..10)) {
        let bytes = write_ops(&ops);
        let reader = OpBatchReader::new(&bytes).unwrap();
        prop_assert_eq!(reader.len(), ops.len());
        for (view, op) in reader.iter().zip(&ops) {
            prop_assert_eq!(view.key_count(), op.keys.len());
            prop_assert_eq!(view.value_count(), op.values.len());
            prop_assert_eq!(view.projection_count(), op.projection.len());
        }
        prop_assert_eq!(read_ops(&bytes).unwrap(), ops);
    }

    #[test]
    fn copied_ops_keep_their_bytes(ops in proptest::collection::vec(arb_op(), 1..10), partition in any::<u32>()) {
        let bytes = write_ops(&ops);
        let reader = OpBatchReader::new(&bytes).unwrap();
        let mut copied = Vec::new();
        let mut w = OpBatchWriter::new(&mut copied);
        for view in &reader {
            let header = proto::OpHeader { partition, ..view.header };
            w.copy(&header, &view).unwrap();
        }
        drop(w);
        let expected: Vec<Op> = ops
            .into_iter()
            .map(|op| Op { header: proto::OpHeader { partition, ..op.header }, ..op })
            .collect();
        prop_assert_eq!(read_ops(&copied).unwrap(), expected);
    }

    #[test]
    fn results_round_trip(
        results in proptest::collection::vec(
            (any::<u32>(), 0u8..3, 1u32.., proptest::collection::vec(arb_value(), 0..5),
             proptest::collection::vec(arb_value(), 0..3)),
            0..10,
        )
    ) {
        let mut out = Vec::new();
        let mut w = ResultWriter::new(&mut out);
        for (op_index, kind, code, values, keys) in &results {
            match kind {
                0 => w.ok(*op_index).unwrap(),
                1 => w.error(*op_index, *code).unwrap(),
                _ => {
                    w.row(*op_index);
                    values.iter().for_each(|v| w.value(v.as_ref()));
                    keys.iter().for_each(|v| w.key(v.as_ref()));
                    w.end_row().unwrap();
                }
            }
        }
        drop(w);
        let reader = ResultReader::new(&out).unwrap();
        prop_assert_eq!(reader.len(), results.len());
        for (result, (op_index, kind, code, values, keys)) in reader.iter().zip(&results) {
            prop_assert_eq!(result.op_index, *op_index);
            prop_assert_eq!(result.code, if *kind == 1 { *code } else { 0 });
            prop_assert_eq!(result.has_row, *kind == 2);
            let (values, keys) = if *kind == 2 { (values.clone(), keys.clone()) } else { (vec![], vec![]) };
            prop_assert_eq!(result.values().map(|v| v.to_value()).collect::<Vec<_>>(), values);
            prop_assert_eq!(result.keys().map(|v| v.to_value()).collect::<Vec<_>>(), keys);
        }
    }

    #[test]
    fn row_batches_round_trip(
        rows in proptest::collection::vec(
            (proptest::collection::vec(arb_value(), 0..5), proptest::collection::vec(arb_value(), 0..3)),
            0..10,
        )
    ) {
        let mut out = Vec::new();
        let mut w = RowBatchWriter::new(&mut out);
        for (values, keys) in &rows {
            w.row();
            values.iter().for_each(|v| w.value(v.as_ref()));
            keys.iter().for_each(|v| w.key(v.as_ref()));
            w.end_row().unwrap();
        }
        drop(w);
        let reader = RowBatchReader::new(&out).unwrap();
        prop_assert_eq!(reader.len(), rows.len());
        for (row, (values, keys)) in reader.iter().zip(&rows) {
            prop_assert_eq!(&row.values().map(|v| v.to_value()).collect::<Vec<_>>(), values);
            prop_assert_eq!(&row.keys().map(|v| v.to_value()).collect::<Vec<_>>(), keys);
            // Kept encoded and decoded later as trusted (a client's rows):
            // the same values, strings included.
            row.check().unwrap();
            let ((nv, vb), (nk, kb)) = (row.encoded_values(), row.encoded_keys());
            // SAFETY: the parts just passed `check`, and are borrowed unchanged.
            let (tv, tk) = unsafe {
                (proto::value::trusted_values(vb, nv), proto::value::trusted_values(kb, nk))
            };
            prop_assert_eq!(&tv.map(|v| v.to_value()).collect::<Vec<_>>(), values);
            prop_assert_eq!(&tk.map(|v| v.to_value()).collect::<Vec<_>>(), keys);
        }
    }

    #[test]
    fn filters_round_trip(filter in arb_filter()) {
        prop_assert_eq!(Filter::decode(&filter.to_bytes()).unwrap(), filter);
    }

    #[test]
    fn scan_specs_round_trip(spec in arb_scan_spec()) {
        prop_assert_eq!(ScanSpec::decode(&spec.to_bytes()).unwrap(), spec);
    }
}

proptest! {
    /// An op's values read through `integer_prefix` and then the iterator
    /// are the values the iterator alone reads: the prefix takes the
    /// leading integers up to the one refused, in order, and leaves the
    /// rest.
    #[test]
    fn integer_prefix_then_iterator_reads_every_value(
        header in arb_header(),
        values in proptest::collection::vec((any::<u16>(), prop_oneof![
            3 => any::<i64>().prop_map(Value::Int),
            3 => any::<u64>().prop_map(Value::UInt),
            1 => arb_value(),
        ]), 0..12),
        accept in 0usize..14,
    ) {
        let op = Op { header, keys: Vec::new(), values, projection: Vec::new() };
        let bytes = write_ops(std::slice::from_ref(&op));
        let reader = OpBatchReader::new(&bytes).unwrap();
        let view = reader.iter().next().unwrap();
        let mut values = view.values();
        let mut read = Vec::new();
        values.integer_prefix(|c, v| {
            if read.len() == accept {
                return false;
            }
            read.push((c, v.map_or_else(Value::UInt, Value::Int)));
            true
        });
        let taken = read.len();
        let leading = op.values.iter().take_while(|(_, v)| matches!(v, Value::Int(_) | Value::UInt(_))).count();
        prop_assert_eq!(taken, leading.min(accept));
        read.extend(values.map(|(c, v)| (c, v.to_value())));
        prop_assert_eq!(read, op.values);
    }
}

fn arb_bound() -> impl Strategy<Value = Option<Bound>> {
    proptest::option::of(
        (proptest::collection::vec(arb_value(), 0..3), any::<bool>())
            .prop_map(|(values, inclusive)| Bound { values, inclusive }),
    )
}

fn arb_scan_spec() -> impl Strategy<Value = ScanSpec> {
    (
        (
            any::<u32>(),
            any::<u32>(),
            prop_oneof![Just(NO_INDEX), any::<u32>()],
        ),
        (arb_bound(), arb_bound(), any::<bool>(), arb_lock()),
        (prop_oneof![Just(NO_PARTITION), any::<u32>()], any::<u32>()),
        (
            proptest::collection::vec(
                (arb_bound(), arb_bound())
                    .prop_map(|(lower, upper)| proto::scan::Range { lower, upper }),
                0..4,
            ),
            proptest::collection::vec(any::<u16>(), 0..5),
            proptest::option::of(arb_filter()),
            any::<bool>(),
            proptest::sample::select(proto::LockWait::ALL.to_vec()),
            (any::<u8>(), any::<bool>()),
            (
                proptest::collection::vec((0u8..4, any::<u16>()), 0..4),
                proptest::collection::vec(any::<u16>(), 0..3),
            ),
        ),
    )
        .prop_map(
            |(
                (table_id, table_version, index_id),
                (lower, upper, descending, lock),
                (partition, batch_rows),
                rest,
            )| {
                let (
                    more_ranges,
                    projection,
                    filter,
                    key_info,
                    lock_wait,
                    (distinct_prefix, count),
                    (aggregates, group_by),
                ) = rest;
                let aggregates = aggregates
                    .into_iter()
                    .map(|(f, column)| proto::scan::ScanAggregate {
                        func: proto::scan::AggregateFn::from_u8(f).expect("0..4"),
                        column,
                    })
                    .collect();
                // Only a locking scan says what it does about a held row.
                let lock_wait = if lock == proto::LockMode::Committed {
                    proto::LockWait::Wait
                } else {
                    lock_wait
                };
                ScanSpec {
                    table_id,
                    table_version,
                    index_id,
                    lower,
                    upper,
                    more_ranges,
                    descending,
                    lock,
                    lock_wait,
                    partition,
                    batch_rows,
                    projection,
                    filter,
                    key_info,
                    stats: false,
                    partitions: Vec::new(),
                    distinct_prefix,
                    count,
                    aggregates,
                    group_by,
                }
            },
        )
}

#[test]
fn an_unended_op_is_not_in_the_batch() {
    let mut out = Vec::new();
    let header = proto::OpHeader {
        op_index: 0,
        table_id: 1,
        table_version: 0,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind: proto::OpKind::Read,
        lock: proto::LockMode::Committed,
        flags: 0,
    };
    {
        let mut w = OpBatchWriter::new(&mut out);
        w.begin(&header);
        w.key(Value::Int(1).as_ref());
        w.end().unwrap();
        w.begin(&header);
        w.key(Value::Int(2).as_ref());
    }
    let reader = OpBatchReader::new(&out).unwrap();
    assert_eq!(reader.len(), 1);
}

#[test]
fn a_full_batch_refuses_the_next_op_and_stays_valid() {
    let mut out = Vec::new();
    let header = proto::OpHeader {
        op_index: 0,
        table_id: 1,
        table_version: 0,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind: proto::OpKind::Read,
        lock: proto::LockMode::Committed,
        flags: 0,
    };
    let mut w = OpBatchWriter::new(&mut out);
    for _ in 0..proto::OPS_PER_BATCH_MAX {
        w.begin(&header);
        w.end().unwrap();
    }
    w.begin(&header);
    let err = w.end().unwrap_err();
    assert!(err.to_string().contains("ops per batch"), "{err}");
    drop(w);
    assert_eq!(
        OpBatchReader::new(&out).unwrap().len(),
        proto::OPS_PER_BATCH_MAX
    );

    let big = vec![0u8; 600 * 1024];
    let mut out = Vec::new();
    let mut w = OpBatchWriter::new(&mut out);
    w.begin(&header);
    w.key(Value::Bytes(big.clone()).as_ref());
    w.end().unwrap();
    w.begin(&header);
    w.key(Value::Bytes(big).as_ref());
    let err = w.end().unwrap_err();
    assert!(err.to_string().contains("batch bytes"), "{err}");
    assert_eq!(err.code(), proto::error::REQUEST_TOO_LARGE);
    drop(w);
    assert_eq!(OpBatchReader::new(&out).unwrap().len(), 1);
}
