//! Strategies and tables shared by the proto tests.
#![allow(dead_code)]

use proptest::prelude::*;
use proto::{CmpOp, Filter, LockMode, OpHeader, OpKind, NO_INDEX, NO_PARTITION};
use schema::{Date, DateTime, Decimal, Value};

/// Any value of any type (finite floats, so that equality holds).
pub fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        (-1.0e30f32..1.0e30f32).prop_map(Value::Float),
        (-1.0e300f64..1.0e300f64).prop_map(Value::Double),
        (any::<i64>(), 0u8..=30)
            .prop_map(|(m, s)| Value::Decimal(Decimal::from_scaled(i128::from(m), s).unwrap())),
        "[a-zA-Z0-9 éß漢]{0,20}".prop_map(Value::String),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bytes),
        (0u16..=9999, 1u8..=12, 1u8..=28).prop_map(|(y, m, d)| Value::Date(Date::new(y, m, d))),
        (
            0u16..=9999,
            1u8..=12,
            1u8..=28,
            0u8..24,
            0u8..60,
            0u8..60,
            0u32..1_000_000
        )
            .prop_map(|(y, mo, d, h, mi, s, us)| Value::DateTime(DateTime::new(
                Date::new(y, mo, d),
                h,
                mi,
                s,
                us
            ))),
        any::<i64>().prop_map(Value::Timestamp),
        any::<u64>().prop_map(Value::Bit),
        (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..20)).prop_map(
            |(total_bytes, inline)| Value::BlobHead {
                total_bytes,
                inline
            }
        ),
    ]
}

pub fn arb_kind() -> impl Strategy<Value = OpKind> {
    proptest::sample::select(OpKind::ALL.to_vec())
}

pub fn arb_lock() -> impl Strategy<Value = LockMode> {
    proptest::sample::select(LockMode::ALL.to_vec())
}

pub fn arb_header() -> impl Strategy<Value = OpHeader> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        prop_oneof![Just(NO_INDEX), any::<u32>()],
        prop_oneof![Just(NO_PARTITION), any::<u32>()],
        arb_kind(),
        arb_lock(),
        0u8..4,
    )
        .prop_map(
            |(op_index, table_id, table_version, index_id, partition, kind, lock, flags)| {
                OpHeader {
                    op_index,
                    table_id,
                    table_version,
                    index_id,
                    partition,
                    kind,
                    lock,
                    flags,
                }
            },
        )
}

/// An operation as plain data: header, keys, (column, value)s, projection.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub header: OpHeader,
    pub keys: Vec<Value>,
    pub values: Vec<(u16, Value)>,
    pub projection: Vec<u16>,
}

pub fn arb_op() -> impl Strategy<Value = Op> {
    (
        arb_header(),
        proptest::collection::vec(arb_value(), 0..4),
        proptest::collection::vec((any::<u16>(), arb_value()), 0..4),
        proptest::collection::vec(any::<u16>(), 0..4),
    )
        .prop_map(|(header, keys, values, projection)| Op {
            header,
            keys,
            values,
            projection,
        })
}

pub fn write_ops(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = proto::OpBatchWriter::new(&mut out);
    for op in ops {
        w.begin(&op.header);
        for k in &op.keys {
            w.key(k.as_ref());
        }
        for (c, v) in &op.values {
            w.value(*c, v.as_ref());
        }
        for c in &op.projection {
            w.project(*c);
        }
        w.end().unwrap();
    }
    drop(w);
    out
}

pub fn read_ops(bytes: &[u8]) -> Result<Vec<Op>, proto::ProtoError> {
    let reader = proto::OpBatchReader::new(bytes)?;
    Ok(reader
        .iter()
        .map(|op| Op {
            header: op.header,
            keys: op.keys().map(|v| v.to_value()).collect(),
            values: op.values().map(|(c, v)| (c, v.to_value())).collect(),
            projection: op.projection().collect(),
        })
        .collect())
}

pub fn arb_cmp_op() -> impl Strategy<Value = CmpOp> {
    proptest::sample::select(CmpOp::ALL.to_vec())
}

pub fn arb_filter() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        (any::<u16>(), arb_cmp_op(), arb_value()).prop_map(|(column, op, value)| Filter::Cmp {
            column,
            op,
            value
        }),
        (any::<u16>(), arb_cmp_op(), any::<u16>())
            .prop_map(|(left, op, right)| Filter::CmpColumns { left, op, right }),
        any::<u16>().prop_map(Filter::IsNull),
        any::<u16>().prop_map(Filter::IsNotNull),
        (any::<u16>(), "[a-zA-Zé ]{0,6}")
            .prop_map(|(column, prefix)| Filter::LikePrefix { column, prefix }),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Filter::And),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};

/// `accounts(id INT PK, owner VARCHAR(10) ci, balance BIGINT, note VARCHAR(20) NULL,
/// code BINARY(4) NULL, body TEXT NULL)`, unique index `by_owner`, ordered
/// index `by_balance`, 4 partitions.
pub fn accounts() -> TableDef {
    let ci = Collation::Utf8mb4GeneralCi;
    TableDef::new(
        "accounts",
        7,
        vec![
            Column::new("id", ColumnType::Int { unsigned: false }),
            Column::new(
                "owner",
                ColumnType::VarChar {
                    max: 10,
                    collation: ci,
                },
            ),
            Column::new("balance", ColumnType::BigInt { unsigned: false }),
            Column::new(
                "note",
                ColumnType::VarChar {
                    max: 20,
                    collation: ci,
                },
            )
            .nullable(),
            Column::new("code", ColumnType::Binary { len: 4 }).nullable(),
            Column::new("body", ColumnType::Text { collation: ci }).nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "by_owner".into(),
        id: 20,
        columns: vec![1],
        kind: IndexKind::Unique,
    })
    .index(IndexDef {
        name: "by_balance".into(),
        id: 21,
        columns: vec![2, 0],
        kind: IndexKind::Ordered,
    })
    .partitions(4)
    .build()
    .unwrap()
}
