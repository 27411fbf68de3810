//! Filter evaluation against a straightforward model: integers, strings
//! under a case-insensitive collation, NULLs with SQL's three-valued logic,
//! LIKE prefixes; plus the corner cases of padding and collations.

use proptest::prelude::*;
use proto::{CmpOp, Filter};
use schema::{Collation, Column, ColumnType, TableDef, Value, ValueRef};

/// `t(id, a INT NULL, b INT NULL, s VARCHAR ci NULL, u VARCHAR ci NULL)`.
fn table() -> TableDef {
    let ci = ColumnType::VarChar {
        max: 10,
        collation: Collation::Utf8mb4GeneralCi,
    };
    TableDef::new(
        "t",
        1,
        vec![
            Column::new("id", ColumnType::Int { unsigned: false }),
            Column::new("a", ColumnType::Int { unsigned: false }).nullable(),
            Column::new("b", ColumnType::Int { unsigned: false }).nullable(),
            Column::new("s", ci).nullable(),
            Column::new("u", ci).nullable(),
        ],
    )
    .primary_key(vec![0])
    .build()
    .unwrap()
}

#[derive(Clone, Debug)]
struct Row {
    a: Option<i64>,
    b: Option<i64>,
    s: Option<String>,
    u: Option<String>,
}

impl Row {
    fn value(&self, c: u16) -> ValueRef<'_> {
        let int = |v: Option<i64>| v.map_or(ValueRef::Null, ValueRef::Int);
        let text = match c {
            3 => &self.s,
            4 => &self.u,
            0 => return ValueRef::Int(0),
            1 => return int(self.a),
            _ => return int(self.b),
        };
        text.as_deref().map_or(ValueRef::Null, ValueRef::Str)
    }
}

fn small_int() -> impl Strategy<Value = Option<i64>> {
    proptest::option::of(-3i64..3)
}

fn text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-cA-C]{0,3}")
}

fn arb_row() -> impl Strategy<Value = Row> {
    (small_int(), small_int(), text(), text()).prop_map(|(a, b, s, u)| Row { a, b, s, u })
}

fn arb_op() -> impl Strategy<Value = CmpOp> {
    proptest::sample::select(CmpOp::ALL.to_vec())
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    let int_column = prop_oneof![Just(1u16), Just(2u16)];
    let text_column = prop_oneof![Just(3u16), Just(4u16)];
    let leaf = prop_oneof![
        (int_column.clone(), arb_op(), small_int()).prop_map(|(column, op, v)| Filter::Cmp {
            column,
            op,
            value: v.map_or(Value::Null, Value::Int)
        }),
        (text_column.clone(), arb_op(), text()).prop_map(|(column, op, v)| Filter::Cmp {
            column,
            op,
            value: v.map_or(Value::Null, Value::String)
        }),
        arb_op().prop_map(|op| Filter::CmpColumns {
            left: 1,
            op,
            right: 2
        }),
        arb_op().prop_map(|op| Filter::CmpColumns {
            left: 3,
            op,
            right: 4
        }),
        (1u16..5).prop_map(Filter::IsNull),
        (1u16..5).prop_map(Filter::IsNotNull),
        (text_column, "[a-cA-C]{0,2}")
            .prop_map(|(column, prefix)| Filter::LikePrefix { column, prefix }),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Filter::And),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

/// The model: SQL three-valued logic written out, case folding by ASCII
/// lowercase (the strings are ASCII letters without spaces).
fn model(f: &Filter, row: &Row) -> Option<bool> {
    let fold = |s: &str| s.to_ascii_lowercase();
    let holds = |op: CmpOp, o: std::cmp::Ordering| op.holds(o);
    match f {
        Filter::Cmp { column, op, value } => match (row.value(*column), value) {
            (ValueRef::Int(x), Value::Int(y)) => Some(holds(*op, x.cmp(y))),
            (ValueRef::Str(x), Value::String(y)) => Some(holds(*op, fold(x).cmp(&fold(y)))),
            _ => None,
        },
        Filter::CmpColumns { left, op, right } => match (row.value(*left), row.value(*right)) {
            (ValueRef::Int(x), ValueRef::Int(y)) => Some(holds(*op, x.cmp(&y))),
            (ValueRef::Str(x), ValueRef::Str(y)) => Some(holds(*op, fold(x).cmp(&fold(y)))),
            _ => None,
        },
        Filter::IsNull(c) => Some(row.value(*c).is_null()),
        Filter::IsNotNull(c) => Some(!row.value(*c).is_null()),
        Filter::LikePrefix { column, prefix } => match row.value(*column) {
            ValueRef::Str(s) => Some(fold(s).starts_with(&fold(prefix))),
            _ => None,
        },
        Filter::And(children) => {
            let results: Vec<_> = children.iter().map(|c| model(c, row)).collect();
            if results.contains(&Some(false)) {
                Some(false)
            } else if results.contains(&None) {
                None
            } else {
                Some(true)
            }
        }
        Filter::Or(children) => {
            let results: Vec<_> = children.iter().map(|c| model(c, row)).collect();
            if results.contains(&Some(true)) {
                Some(true)
            } else if results.contains(&None) {
                None
            } else {
                Some(false)
            }
        }
        Filter::Not(child) => model(child, row).map(|b| !b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn eval_matches_the_model(filter in arb_filter(), rows in proptest::collection::vec(arb_row(), 1..8)) {
        let t = table();
        filter.check(&t).unwrap();
        let decoded = Filter::decode(&filter.to_bytes()).unwrap();
        for row in &rows {
            let expected = model(&filter, row) == Some(true);
            prop_assert_eq!(filter.eval(&t, |c| row.value(c)), expected, "{:?} on {:?}", filter, row);
            prop_assert_eq!(decoded.eval(&t, |c| row.value(c)), expected);
        }
    }
}

#[test]
fn three_valued_logic() {
    let t = table();
    let row = Row {
        a: None,
        b: Some(1),
        s: None,
        u: None,
    };
    let a_is_1 = Filter::Cmp {
        column: 1,
        op: CmpOp::Eq,
        value: Value::Int(1),
    };
    let b_is_1 = Filter::Cmp {
        column: 2,
        op: CmpOp::Eq,
        value: Value::Int(1),
    };
    // a = 1 is unknown: neither it nor its negation passes.
    assert!(!a_is_1.eval(&t, |c| row.value(c)));
    assert!(!Filter::Not(Box::new(a_is_1.clone())).eval(&t, |c| row.value(c)));
    // unknown OR true is true; unknown AND true is unknown.
    assert!(Filter::Or(vec![a_is_1.clone(), b_is_1.clone()]).eval(&t, |c| row.value(c)));
    assert!(!Filter::And(vec![a_is_1.clone(), b_is_1.clone()]).eval(&t, |c| row.value(c)));
    // NOT (unknown AND false) = NOT false = true.
    let b_is_2 = Filter::Cmp {
        column: 2,
        op: CmpOp::Eq,
        value: Value::Int(2),
    };
    assert!(Filter::Not(Box::new(Filter::And(vec![a_is_1, b_is_2]))).eval(&t, |c| row.value(c)));
    // Comparing with a NULL value is unknown even for <>.
    let ne_null = Filter::Cmp {
        column: 2,
        op: CmpOp::Ne,
        value: Value::Null,
    };
    assert!(!ne_null.eval(&t, |c| row.value(c)));
    assert!(Filter::And(vec![]).eval(&t, |c| row.value(c)));
    assert!(!Filter::Or(vec![]).eval(&t, |c| row.value(c)));
}

#[test]
fn strings_follow_the_collation() {
    let t = table();
    let row = Row {
        a: None,
        b: None,
        s: Some("Ärger am Main".into()),
        u: Some("ärger AM main  ".into()),
    };
    let eq = Filter::CmpColumns {
        left: 3,
        op: CmpOp::Eq,
        right: 4,
    };
    assert!(
        eq.eval(&t, |c| row.value(c)),
        "case and trailing spaces do not count"
    );
    let like = |prefix: &str| Filter::LikePrefix {
        column: 3,
        prefix: prefix.into(),
    };
    assert!(like("äRG").eval(&t, |c| row.value(c)));
    assert!(like("").eval(&t, |c| row.value(c)));
    assert!(like("Ärger am Main").eval(&t, |c| row.value(c)));
    assert!(
        !like("Ärger am Main ").eval(&t, |c| row.value(c)),
        "LIKE counts trailing spaces"
    );
    assert!(!like("Ärger  ").eval(&t, |c| row.value(c)));
    assert!(
        !like("Ärger_").eval(&t, |c| row.value(c)),
        "no wildcards inside the prefix"
    );
    let binary = TableDef::new(
        "b",
        2,
        vec![
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 10,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
            Column::new("code", ColumnType::Binary { len: 4 }),
        ],
    )
    .build()
    .unwrap();
    let cmp = |column: u16, value: Value| Filter::Cmp {
        column,
        op: CmpOp::Eq,
        value,
    };
    let values = [ValueRef::Str("Abc"), ValueRef::Bytes(b"ab\0\0")];
    assert!(!cmp(0, Value::String("abc".into())).eval(&binary, |c| values[usize::from(c)]));
    assert!(cmp(0, Value::String("Abc ".into())).eval(&binary, |c| values[usize::from(c)]));
    assert!(
        cmp(1, Value::Bytes(b"ab".to_vec())).eval(&binary, |c| values[usize::from(c)]),
        "BINARY pads with zeros"
    );
    assert!(!cmp(1, Value::Bytes(b"ab\0\x01".to_vec())).eval(&binary, |c| values[usize::from(c)]));
}

#[test]
fn numbers_compare_across_representations() {
    use schema::Decimal;
    let row = [ValueRef::Int(-1), ValueRef::UInt(u64::MAX)];
    let t = TableDef::new(
        "n",
        3,
        vec![
            Column::new("i", ColumnType::BigInt { unsigned: false }),
            Column::new("u", ColumnType::BigInt { unsigned: true }),
        ],
    )
    .build()
    .unwrap();
    let f = Filter::CmpColumns {
        left: 0,
        op: CmpOp::Lt,
        right: 1,
    };
    assert!(
        f.eval(&t, |c| row[usize::from(c)]),
        "-1 < 2^64-1, no wrap-around"
    );
    let less = proto::filter::compare(
        ValueRef::Decimal(Decimal::parse("1.5").unwrap()),
        ValueRef::Int(2),
        None,
        false,
    );
    assert_eq!(less, Some(std::cmp::Ordering::Less));
    assert_eq!(
        proto::filter::compare(ValueRef::Float(-0.0), ValueRef::Double(0.0), None, false),
        Some(std::cmp::Ordering::Equal)
    );
}
