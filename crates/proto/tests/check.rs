//! `check` refuses what does not fit the table, with errors that name the
//! table and the column, and maps each to its error code.

mod common;

use common::*;
use proto::error;
use proto::{
    Bound, CheckPlan, CmpOp, Filter, LockMode, OpBatchReader, OpHeader, OpKind, ProtoError,
    ScanSpec, KEY_INFO, NO_INDEX, NO_PARTITION,
};
use schema::{Collation, Column, ColumnType, TableDef, Value};

fn header(kind: OpKind) -> OpHeader {
    OpHeader {
        op_index: 0,
        table_id: 7,
        table_version: 0,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind,
        lock: LockMode::Committed,
        flags: 0,
    }
}

fn op(header: OpHeader, keys: Vec<Value>, values: Vec<(u16, Value)>, projection: Vec<u16>) -> Op {
    Op {
        header,
        keys,
        values,
        projection,
    }
}

/// `check` against `accounts()`, which `check_with` its plan must agree with.
fn check(op: Op) -> Result<(), ProtoError> {
    check_in(&accounts(), op)
}

fn check_in(table: &TableDef, op: Op) -> Result<(), ProtoError> {
    let bytes = write_ops(&[op]);
    let reader = OpBatchReader::new(&bytes).unwrap();
    let view = reader.iter().next().unwrap();
    let checked = view.check(table);
    assert_eq!(view.check_with(table, &CheckPlan::new(table)), checked);
    checked
}

#[test]
fn integer_writes_are_checked_alike_with_a_plan() {
    let table = TableDef::new(
        "ints",
        7,
        vec![
            Column::new("k", ColumnType::Int { unsigned: true }),
            Column::new("t", ColumnType::TinyInt { unsigned: false }),
            Column::new("u", ColumnType::Int { unsigned: true }).nullable(),
            Column::new("m", ColumnType::MediumInt { unsigned: false }),
            Column::new("b", ColumnType::BigInt { unsigned: true }),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 4,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
        ],
    )
    .primary_key(vec![0])
    .build()
    .unwrap();
    let update = |values: Vec<(u16, Value)>| {
        check_in(
            &table,
            op(header(OpKind::Update), vec![Value::UInt(1)], values, vec![]),
        )
    };
    assert!(update(vec![
        (1, Value::Int(-128)),
        (2, Value::UInt(u64::from(u32::MAX)))
    ])
    .is_ok());
    assert!(update(vec![
        (3, Value::Int(-(1 << 23))),
        (4, Value::UInt(u64::MAX))
    ])
    .is_ok());
    assert!(update(vec![(1, Value::UInt(127)), (3, Value::UInt((1 << 23) - 1))]).is_ok());
    assert!(update(vec![(2, Value::Null), (5, Value::String("ab".into()))]).is_ok());
    expect_err(
        update(vec![(1, Value::Int(128))]),
        error::BAD_VALUE,
        &["ints", "t"],
    );
    expect_err(
        update(vec![(1, Value::UInt(128))]),
        error::BAD_VALUE,
        &["ints", "t"],
    );
    expect_err(
        update(vec![(2, Value::Int(-1))]),
        error::BAD_VALUE,
        &["ints", "u"],
    );
    expect_err(
        update(vec![(2, Value::UInt(1 << 32))]),
        error::BAD_VALUE,
        &["ints", "u"],
    );
    expect_err(
        update(vec![(3, Value::Int(1 << 23))]),
        error::BAD_VALUE,
        &["ints", "m"],
    );
    expect_err(
        update(vec![(0, Value::UInt(2))]),
        error::PRIMARY_KEY_UPDATE,
        &["ints", "k"],
    );
    expect_err(
        update(vec![(1, Value::Int(1)), (1, Value::Int(2))]),
        error::BAD_OPERATION,
        &["ints", "t"],
    );
    expect_err(
        update(vec![(9, Value::Int(1))]),
        error::NO_SUCH_COLUMN,
        &["ints"],
    );
}

fn full_row() -> Vec<(u16, Value)> {
    vec![
        (1, Value::String("ann".into())),
        (2, Value::Int(10)),
        (3, Value::Null),
        (4, Value::Null),
        (5, Value::Null),
    ]
}

fn expect_err(result: Result<(), ProtoError>, code: u32, words: &[&str]) {
    let err = result.unwrap_err();
    let text = err.to_string();
    for word in words {
        assert!(text.contains(word), "`{text}` does not mention {word}");
    }
    assert_eq!(err.code(), code, "{text}");
}

#[test]
fn good_ops_pass() {
    let t = accounts();
    let ok = [
        op(
            header(OpKind::Insert),
            vec![Value::Int(1)],
            full_row(),
            vec![],
        ),
        op(
            header(OpKind::Write),
            vec![Value::Int(1)],
            full_row(),
            vec![],
        ),
        op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(2, Value::Int(5))],
            vec![],
        ),
        op(
            header(OpKind::Read),
            vec![Value::Int(1)],
            vec![],
            vec![2, 1],
        ),
        op(
            OpHeader {
                flags: KEY_INFO,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        ),
        op(header(OpKind::Delete), vec![Value::Int(1)], vec![], vec![]),
        op(
            OpHeader {
                index_id: 20,
                ..header(OpKind::Read)
            },
            vec![Value::String("ANN".into())],
            vec![],
            vec![],
        ),
        op(
            OpHeader {
                partition: 3,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        ),
    ];
    for o in ok {
        let bytes = write_ops(std::slice::from_ref(&o));
        let reader = OpBatchReader::new(&bytes).unwrap();
        let view = reader.iter().next().unwrap();
        assert!(view.check(&t).is_ok(), "{o:?}: {:?}", view.check(&t));
    }
}

#[test]
fn only_a_locking_read_may_refuse_to_wait() {
    let with = |kind: OpKind, lock: LockMode, flags: u8| {
        let values = match kind {
            OpKind::Update => vec![(2, Value::Int(5))],
            _ => vec![],
        };
        check(op(
            OpHeader {
                lock,
                flags,
                ..header(kind)
            },
            vec![Value::Int(1)],
            values,
            vec![],
        ))
    };
    for flag in [proto::NO_WAIT, proto::SKIP_LOCKED] {
        for lock in [LockMode::Shared, LockMode::Exclusive] {
            assert!(with(OpKind::Read, lock, flag).is_ok());
        }
        expect_err(
            with(OpKind::Read, LockMode::Committed, flag),
            error::BAD_OPERATION,
            &["accounts", "locking read"],
        );
        for kind in [OpKind::Update, OpKind::Delete] {
            expect_err(
                with(kind, LockMode::Exclusive, flag),
                error::BAD_OPERATION,
                &["accounts", "locking read"],
            );
        }
    }
    expect_err(
        with(
            OpKind::Read,
            LockMode::Exclusive,
            proto::NO_WAIT | proto::SKIP_LOCKED,
        ),
        error::BAD_OPERATION,
        &["NO_WAIT and SKIP_LOCKED"],
    );
}

#[test]
fn bad_values_name_table_and_column() {
    let mut row = full_row();
    row[0].1 = Value::String("much too long a name".into());
    expect_err(
        check(op(header(OpKind::Insert), vec![Value::Int(1)], row, vec![])),
        error::VALUE_TOO_LONG,
        &["accounts", "owner"],
    );
    expect_err(
        check(op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(2, Value::String("x".into()))],
            vec![],
        )),
        error::BAD_VALUE,
        &["accounts", "balance"],
    );
    expect_err(
        check(op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(1, Value::Null)],
            vec![],
        )),
        error::NULL_NOT_ALLOWED,
        &["accounts", "owner"],
    );
    expect_err(
        check(op(
            header(OpKind::Read),
            vec![Value::Int(1i64 << 40)],
            vec![],
            vec![],
        )),
        error::BAD_VALUE,
        &["accounts", "id", "out of its range"],
    );
}

#[test]
fn keys_must_be_whole() {
    expect_err(
        check(op(header(OpKind::Read), vec![], vec![], vec![])),
        error::KEY_MISSING,
        &["accounts", "primary key"],
    );
    expect_err(
        check(op(
            OpHeader {
                index_id: 20,
                ..header(OpKind::Read)
            },
            vec![],
            vec![],
            vec![],
        )),
        error::KEY_MISSING,
        &["accounts", "by_owner"],
    );
    expect_err(
        check(op(
            OpHeader {
                index_id: 21,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        )),
        error::NO_SUCH_INDEX,
        &["accounts", "21"],
    );
}

#[test]
fn written_columns_are_checked() {
    expect_err(
        check(op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(0, Value::Int(2))],
            vec![],
        )),
        error::PRIMARY_KEY_UPDATE,
        &["accounts", "`id`"],
    );
    expect_err(
        check(op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(9, Value::Int(2))],
            vec![],
        )),
        error::NO_SUCH_COLUMN,
        &["accounts", "column 9"],
    );
    expect_err(
        check(op(
            header(OpKind::Update),
            vec![Value::Int(1)],
            vec![(2, Value::Int(2)), (2, Value::Int(3))],
            vec![],
        )),
        error::BAD_OPERATION,
        &["accounts", "balance", "twice"],
    );
    let mut row = full_row();
    row.remove(1);
    expect_err(
        check(op(header(OpKind::Insert), vec![Value::Int(1)], row, vec![])),
        error::BAD_OPERATION,
        &["accounts", "balance", "missing"],
    );
    expect_err(
        check(op(
            header(OpKind::Read),
            vec![Value::Int(1)],
            vec![(2, Value::Int(2))],
            vec![],
        )),
        error::BAD_OPERATION,
        &["accounts", "read"],
    );
    expect_err(
        check(op(
            header(OpKind::Read),
            vec![Value::Int(1)],
            vec![],
            vec![6],
        )),
        error::NO_SUCH_COLUMN,
        &["accounts", "projection", "column 6"],
    );
    expect_err(
        check(op(
            OpHeader {
                index_id: 20,
                ..header(OpKind::Insert)
            },
            vec![Value::String("a".into())],
            full_row(),
            vec![],
        )),
        error::BAD_OPERATION,
        &["accounts", "by_owner"],
    );
}

#[test]
fn table_identity_is_checked() {
    expect_err(
        check(op(
            OpHeader {
                table_version: 3,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        )),
        error::WRONG_SCHEMA_VERSION,
        &["accounts", "version 3"],
    );
    expect_err(
        check(op(
            OpHeader {
                table_id: 8,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        )),
        error::NO_SUCH_TABLE,
        &["accounts"],
    );
    expect_err(
        check(op(
            OpHeader {
                partition: 4,
                ..header(OpKind::Read)
            },
            vec![Value::Int(1)],
            vec![],
            vec![],
        )),
        error::BAD_OPERATION,
        &["accounts", "partition 4"],
    );
}

fn scan() -> ScanSpec {
    ScanSpec {
        table_id: 7,
        table_version: 0,
        index_id: 21,
        lower: Some(Bound {
            values: vec![Value::Int(0)],
            inclusive: true,
        }),
        upper: Some(Bound {
            values: vec![Value::Int(100), Value::Int(5)],
            inclusive: false,
        }),
        more_ranges: Vec::new(),
        descending: true,
        lock: LockMode::Shared,
        lock_wait: proto::LockWait::Wait,
        partition: NO_PARTITION,
        batch_rows: 64,
        projection: vec![0, 2],
        filter: Some(Filter::And(vec![
            Filter::Cmp {
                column: 1,
                op: CmpOp::Eq,
                value: Value::String("ann".into()),
            },
            Filter::IsNull(5),
            Filter::CmpColumns {
                left: 0,
                op: CmpOp::Lt,
                right: 2,
            },
            Filter::LikePrefix {
                column: 3,
                prefix: "x".into(),
            },
        ])),
        key_info: true,
        stats: false,
        partitions: Vec::new(),
        distinct_prefix: 0,
        count: false,
        aggregates: Vec::new(),
        group_by: Vec::new(),
    }
}

#[test]
fn scans_are_checked() {
    let t = accounts();
    scan().check(&t).unwrap();
    let full = ScanSpec {
        index_id: NO_INDEX,
        lower: None,
        upper: None,
        descending: false,
        ..scan()
    };
    full.check(&t).unwrap();
    // A counting scan: committed reads of no columns, nothing else asked.
    let counting = ScanSpec {
        lock: LockMode::Committed,
        key_info: false,
        projection: Vec::new(),
        count: true,
        ..scan()
    };
    counting.check(&t).unwrap();
    for refused in [
        ScanSpec {
            lock: LockMode::Shared,
            ..counting.clone()
        },
        ScanSpec {
            key_info: true,
            ..counting.clone()
        },
        ScanSpec {
            projection: vec![0],
            ..counting.clone()
        },
        ScanSpec {
            distinct_prefix: 1,
            ..counting.clone()
        },
    ] {
        let e = refused.check(&t).unwrap_err();
        assert!(e.to_string().contains("counting scan"), "{e}");
    }
    // An aggregating scan: numeric sums, any column counted, grouped by
    // columns that are not BLOB/TEXT.
    use proto::scan::{AggregateFn, ScanAggregate};
    let agg = |func, column| ScanAggregate { func, column };
    let aggregating = ScanSpec {
        aggregates: vec![
            agg(AggregateFn::Sum, 2),
            agg(AggregateFn::Min, 0),
            agg(AggregateFn::Max, 2),
            agg(AggregateFn::Count, 5),
        ],
        group_by: vec![1, 3],
        ..counting.clone()
    };
    aggregating.check(&t).unwrap();
    // A grouped one's batch is of groups, up to SCAN_GROUPS_MAX.
    let groups_max = proto::scan::SCAN_GROUPS_MAX;
    ScanSpec {
        batch_rows: groups_max,
        ..aggregating.clone()
    }
    .check(&t)
    .unwrap();
    for (refused, rows) in [
        (aggregating.clone(), groups_max + 1),
        (
            ScanSpec {
                group_by: Vec::new(),
                ..aggregating.clone()
            },
            proto::scan::SCAN_BATCH_ROWS_MAX + 1,
        ),
    ] {
        let e = ScanSpec {
            batch_rows: rows,
            ..refused
        }
        .check(&t)
        .unwrap_err();
        assert!(e.to_string().contains("scan batch of"), "{e}");
    }
    for (refused, says) in [
        (
            ScanSpec {
                count: false,
                ..aggregating.clone()
            },
            "belong to a counting scan",
        ),
        (
            ScanSpec {
                aggregates: vec![agg(AggregateFn::Sum, 1)],
                ..aggregating.clone()
            },
            "only integers and DECIMALs",
        ),
        (
            ScanSpec {
                group_by: vec![5],
                ..aggregating.clone()
            },
            "grouped by BLOB/TEXT column `body`",
        ),
        (
            ScanSpec {
                aggregates: vec![agg(AggregateFn::Count, 40)],
                ..aggregating.clone()
            },
            "accounts",
        ),
    ] {
        let e = refused.check(&t).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
    let cases: Vec<(ScanSpec, u32, &[&str])> = vec![
        (
            ScanSpec {
                index_id: NO_INDEX,
                ..scan()
            },
            error::BAD_OPERATION,
            &["accounts", "full-table"],
        ),
        (
            ScanSpec {
                index_id: 20,
                ..scan()
            },
            error::NO_SUCH_INDEX,
            &["accounts", "ordered"],
        ),
        (
            ScanSpec {
                batch_rows: 0,
                ..scan()
            },
            error::BAD_OPERATION,
            &["accounts", "batch"],
        ),
        (
            ScanSpec {
                projection: vec![40],
                ..scan()
            },
            error::NO_SUCH_COLUMN,
            &["accounts", "column 40"],
        ),
        (
            ScanSpec {
                lower: Some(Bound {
                    values: vec![Value::String("x".into())],
                    inclusive: true,
                }),
                ..scan()
            },
            error::BAD_VALUE,
            &["accounts", "balance"],
        ),
        (
            ScanSpec {
                lower: Some(Bound {
                    values: vec![Value::Int(1), Value::Int(2), Value::Int(3)],
                    inclusive: true,
                }),
                ..scan()
            },
            error::BAD_OPERATION,
            &["accounts", "by_balance"],
        ),
        (
            ScanSpec {
                filter: Some(Filter::CmpColumns {
                    left: 1,
                    op: CmpOp::Eq,
                    right: 2,
                }),
                ..scan()
            },
            error::BAD_FILTER,
            &["accounts", "owner", "balance"],
        ),
        (
            ScanSpec {
                filter: Some(Filter::LikePrefix {
                    column: 2,
                    prefix: "1".into(),
                }),
                ..scan()
            },
            error::BAD_FILTER,
            &["accounts", "balance", "LIKE"],
        ),
        (
            ScanSpec {
                filter: Some(Filter::Cmp {
                    column: 5,
                    op: CmpOp::Eq,
                    value: Value::String("x".into()),
                }),
                ..scan()
            },
            error::BAD_FILTER,
            &["accounts", "body"],
        ),
        (
            ScanSpec {
                filter: Some(Filter::Cmp {
                    column: 2,
                    op: CmpOp::Eq,
                    value: Value::String("x".into()),
                }),
                ..scan()
            },
            error::BAD_VALUE,
            &["accounts", "balance"],
        ),
        (
            ScanSpec {
                filter: Some(Filter::IsNull(77)),
                ..scan()
            },
            error::NO_SUCH_COLUMN,
            &["accounts", "column 77"],
        ),
    ];
    for (spec, code, words) in cases {
        expect_err(spec.check(&t), code, words);
    }
    let mut deep = Filter::IsNull(0);
    for _ in 0..proto::FILTER_DEPTH_MAX {
        deep = Filter::Not(Box::new(deep));
    }
    expect_err(deep.check(&t), error::REQUEST_TOO_LARGE, &["filter depth"]);
}

/// A TEXT column takes a value that fits its head, or a head; a whole
/// value longer than the head would lose its tail in the row, so it is
/// refused, as is a head that does not match its length.
#[test]
fn blob_columns_take_heads_not_whole_long_values() {
    let with_body = |body: Value| {
        let mut row = full_row();
        row[4] = (5, body);
        op(header(OpKind::Insert), vec![Value::Int(1)], row, vec![])
    };
    assert!(check(with_body(Value::String("short".into()))).is_ok());
    let long = "x".repeat(300);
    expect_err(
        check(with_body(Value::String(long.clone()))),
        error::BAD_OPERATION,
        &["accounts", "body", "300 bytes", "parts table"],
    );
    let head = Value::BlobHead {
        total_bytes: 300,
        inline: long.as_bytes()[..256].to_vec(),
    };
    assert!(check(with_body(head)).is_ok());
    let short_head = Value::BlobHead {
        total_bytes: 300,
        inline: long.as_bytes()[..10].to_vec(),
    };
    expect_err(
        check(with_body(short_head)),
        error::BAD_VALUE,
        &["accounts", "body", "holds 10"],
    );
}
