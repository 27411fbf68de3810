//! Malformed bytes give an error, never a panic: every truncation of a
//! valid buffer is refused, and random corruption either is refused or
//! reads back without panicking (the readers' iterators assert in debug
//! builds that validation left nothing for them to fail on).

mod common;

use common::*;
use proptest::prelude::*;
use proto::{
    Filter, OpBatchReader, ResultReader, ResultWriter, RowBatchReader, RowBatchWriter, ScanSpec,
};

/// Reads everything a reader offers, the way a data node would.
fn consume_ops(bytes: &[u8]) -> bool {
    // The frame check (the LDM's) accepts whatever the full check accepts,
    // and what it accepts can be walked: headers, keys and projections.
    let framed = OpBatchReader::framed(bytes).map(|reader| {
        reader
            .iter()
            .map(|op| op.keys().count() + op.projection().count())
            .sum::<usize>()
    });
    if OpBatchReader::new(bytes).is_ok() {
        assert!(framed.is_ok(), "the frame check refuses a valid batch");
    }
    match OpBatchReader::new(bytes) {
        Ok(reader) => {
            let mut n = 0;
            for op in &reader {
                n += op.keys().count() + op.values().count() + op.projection().count();
            }
            let _ = n;
            true
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    }
}

fn consume_results(bytes: &[u8]) -> bool {
    let checked = ResultReader::new(bytes)
        .map(|reader| {
            reader
                .iter()
                .map(|r| r.values().count() + r.keys().count())
                .sum::<usize>()
        })
        .is_ok();
    // The one-pass way (frames first, each value checked as it is read)
    // accepts exactly what the checking reader accepts.
    let one_pass = ResultReader::framed(bytes).is_ok_and(|reader| {
        reader.iter().all(|r| {
            let mut n = 0;
            r.try_values(|_| n += 1).is_ok() && r.try_keys(|_| n += 1).is_ok()
        })
    });
    assert_eq!(checked, one_pass, "two ways of reading disagree");
    // Checking without decoding (the client's way) accepts the same.
    let check_only = ResultReader::framed(bytes)
        .is_ok_and(|reader| reader.iter().all(|r| r.check_row().is_ok()));
    assert_eq!(checked, check_only, "checking without decoding disagrees");
    checked
}

fn consume_rows(bytes: &[u8]) -> bool {
    let checked = RowBatchReader::new(bytes)
        .map(|reader| {
            reader
                .iter()
                .map(|r| r.values().count() + r.keys().count())
                .sum::<usize>()
        })
        .is_ok();
    // Checking the frame, then each value as it is decoded (the client's
    // way), accepts the same.
    let one_pass = RowBatchReader::framed(bytes).is_ok_and(|reader| {
        reader.iter().all(|r| {
            let mut n = 0;
            r.try_values(|_| n += 1).is_ok() && r.try_keys(|_| n += 1).is_ok()
        })
    });
    assert_eq!(
        checked, one_pass,
        "two ways of reading a row batch disagree"
    );
    checked
}

fn results_bytes(values: &[schema::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ResultWriter::new(&mut out);
    w.ok(1).unwrap();
    w.error(2, 626).unwrap();
    w.row(3);
    values.iter().for_each(|v| w.value(v.as_ref()));
    values.iter().take(1).for_each(|v| w.key(v.as_ref()));
    w.end_row().unwrap();
    drop(w);
    out
}

fn rows_bytes(values: &[schema::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = RowBatchWriter::new(&mut out);
    for _ in 0..2 {
        w.row();
        values.iter().for_each(|v| w.value(v.as_ref()));
        values.iter().take(1).for_each(|v| w.key(v.as_ref()));
        w.end_row().unwrap();
    }
    drop(w);
    out
}

/// A row of integers whose one tag is any byte: checking without decoding
/// (the client's integer fast path, then the general one) accepts exactly
/// what the full check accepts, for each position of the changed tag.
#[test]
fn a_row_of_integers_with_any_tag_is_checked_as_the_full_check_does() {
    use schema::Value;
    // More values than one step of the integer check takes, and a rest.
    let values: Vec<Value> = (0..19u64).map(|x| Value::UInt(x * 1_000_003)).collect();
    let bytes = results_bytes(&values);
    // The batch header, the ok result, the error result, the row's kind,
    // op index and frame come before its values (9 bytes each).
    let values_at = 7 + 5 + 9 + 5 + 12;
    let tag_at = |i: usize| values_at + 9 * i;
    // The key value (the first value again) follows the values.
    for i in 0..=values.len() {
        assert_eq!(bytes[tag_at(i)], 2, "the tag of an unsigned integer");
    }
    let mut accepted = 0;
    for i in 0..=values.len() {
        for tag in 0..=u8::MAX {
            let mut changed = bytes.clone();
            changed[tag_at(i)] = tag;
            // `consume_results` asserts that the ways of checking agree.
            if consume_results(&changed) {
                accepted += 1;
            }
        }
    }
    assert!(
        accepted >= 2 * (values.len() + 1),
        "both integer tags are accepted everywhere"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_truncated_op_batch_is_refused(ops in proptest::collection::vec(arb_op(), 1..5)) {
        let bytes = write_ops(&ops);
        for len in 0..bytes.len() {
            prop_assert!(!consume_ops(&bytes[..len]), "accepted {len} of {} bytes", bytes.len());
        }
        prop_assert!(consume_ops(&bytes));
    }

    #[test]
    fn every_truncated_result_and_row_batch_is_refused(values in proptest::collection::vec(arb_value(), 1..5)) {
        let results = results_bytes(&values);
        for len in 0..results.len() {
            prop_assert!(!consume_results(&results[..len]));
        }
        let rows = rows_bytes(&values);
        for len in 0..rows.len() {
            prop_assert!(!consume_rows(&rows[..len]));
        }
    }

    #[test]
    fn every_truncated_filter_and_scan_spec_is_refused(filter in arb_filter()) {
        let bytes = filter.to_bytes();
        for len in 0..bytes.len() {
            prop_assert!(Filter::decode(&bytes[..len]).is_err());
        }
        let spec = ScanSpec {
            table_id: 1,
            table_version: 2,
            index_id: 3,
            lower: Some(proto::Bound { values: vec![schema::Value::Int(1)], inclusive: true }),
            upper: None,
            more_ranges: Vec::new(),
            descending: true,
            lock: proto::LockMode::Shared,
            lock_wait: proto::LockWait::Wait,
            partition: proto::NO_PARTITION,
            batch_rows: 64,
            projection: vec![0, 2],
            filter: Some(filter),
            key_info: true,
            stats: false,
            partitions: Vec::new(),
            distinct_prefix: 1,
            count: true,
            aggregates: vec![proto::scan::ScanAggregate {
                func: proto::scan::AggregateFn::Sum,
                column: 2,
            }],
            group_by: vec![1, 0],
        };
        let bytes = spec.to_bytes();
        for len in 0..bytes.len() {
            prop_assert!(ScanSpec::decode(&bytes[..len]).is_err());
        }
    }

    #[test]
    fn corrupted_buffers_never_panic(
        ops in proptest::collection::vec(arb_op(), 1..5),
        values in proptest::collection::vec(arb_value(), 1..5),
        filter in arb_filter(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let spec = ScanSpec {
            table_id: 1,
            table_version: 2,
            index_id: proto::NO_INDEX,
            lower: None,
            upper: Some(proto::Bound { values: values.clone(), inclusive: false }),
            more_ranges: Vec::new(),
            descending: false,
            lock: proto::LockMode::Committed,
            lock_wait: proto::LockWait::Wait,
            partition: 0,
            batch_rows: 1,
            projection: vec![1],
            filter: Some(filter.clone()),
            key_info: false,
            stats: false,
            partitions: Vec::new(),
            distinct_prefix: 0,
            count: true,
            aggregates: vec![proto::scan::ScanAggregate {
                func: proto::scan::AggregateFn::Max,
                column: 0,
            }],
            group_by: vec![2],
        };
        let buffers = [write_ops(&ops), results_bytes(&values), rows_bytes(&values), filter.to_bytes(), spec.to_bytes()];
        for (kind, original) in buffers.iter().enumerate() {
            let mut bytes = original.clone();
            for (at, byte) in &flips {
                let i = at.index(bytes.len());
                bytes[i] ^= byte | 1;
            }
            match kind {
                0 => { consume_ops(&bytes); }
                1 => { consume_results(&bytes); }
                2 => { consume_rows(&bytes); }
                3 => { let _ = Filter::decode(&bytes); }
                _ => { let _ = ScanSpec::decode(&bytes); }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        for (magic, version) in [(*b"OB", 1), (*b"RB", 2), (*b"RW", 2), (*b"SS", 1)] {
            let mut framed = magic.to_vec();
            framed.push(version);
            framed.extend_from_slice(&bytes);
            consume_ops(&framed);
            consume_results(&framed);
            consume_rows(&framed);
            let _ = ScanSpec::decode(&framed);
        }
        let _ = Filter::decode(&bytes);
    }
}

#[test]
fn hostile_counts_are_refused_before_allocating() {
    // An op batch claiming u32::MAX ops.
    let mut bytes = b"OB\x01".to_vec();
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let err = OpBatchReader::new(&bytes).unwrap_err();
    assert!(err.to_string().contains("op count"), "{err}");
    // An AND claiming 65,535 children in a few bytes.
    let err = Filter::decode(&[6, 0xFF, 0xFF, 3, 0, 0]).unwrap_err();
    assert!(
        matches!(
            err,
            proto::ProtoError::Truncated { .. } | proto::ProtoError::OverLimit { .. }
        ),
        "{err}"
    );
    // A NOT nested past the depth limit.
    let mut deep = vec![8u8; proto::FILTER_DEPTH_MAX];
    deep.extend_from_slice(&[3, 0, 0]);
    let err = Filter::decode(&deep).unwrap_err();
    assert!(err.to_string().contains("filter depth"), "{err}");
    // A string claiming 4 GiB, in a row whose frame is right.
    let mut bytes = b"RW\x02".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&[1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&[6, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(
        RowBatchReader::new(&bytes),
        Err(proto::ProtoError::Truncated { .. })
    ));
}

#[test]
fn errors_say_where() {
    let mut bytes = b"OB\x02".to_vec();
    bytes.extend_from_slice(&0u32.to_le_bytes());
    let err = OpBatchReader::new(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "op batch: format version 2 is not known (this build reads 1)"
    );
    assert_eq!(err.code(), proto::error::MALFORMED_REQUEST);
    let err = OpBatchReader::new(b"XB\x01\0\0\0\0").unwrap_err();
    assert!(err.to_string().starts_with("op batch: bad magic"), "{err}");
    // A string that is not UTF-8, inside a row.
    let mut bytes = b"RW\x02".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&[1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&[6, 1, 0, 0, 0, 0xFF]);
    let err = RowBatchReader::new(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "row batch: byte 24: text is not valid UTF-8"
    );
    // Read by frame, the same string is refused when its row is decoded.
    let framed = RowBatchReader::framed(&bytes).unwrap();
    let row = framed.iter().next().unwrap();
    let err = row.try_values(|_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        "row values: byte 5: text is not valid UTF-8"
    );
    // A row whose declared value bytes do not match its values.
    let mut bytes = b"RW\x02".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&[0, 0]);
    let err = RowBatchReader::new(&bytes).unwrap_err();
    assert!(err.to_string().contains("row value bytes"), "{err}");
}
