//! Property tests of the schema as a whole: key order against a model of
//! SQL order for every column type, row round trips for random tables, and
//! the update path against re-encoding.
//!
//! The model comparator is written here from the definitions (numeric
//! order, case-folded PAD SPACE order, calendar order), not from the code
//! under test.

use std::cmp::Ordering;

use proptest::prelude::*;

use super::*;

const BIN: Collation = Collation::Utf8mb4Bin;
const CI: Collation = Collation::Utf8mb4GeneralCi;

/// Characters that exercise case folding, PAD SPACE (space and below-space
/// characters), multi-byte UTF-8 and folds that change length.
const ALPHABET: &[char] = &[
    'a', 'A', 'b', 'B', 'z', ' ', '\t', '\0', '~', '\u{7f}', 'é', 'É', 'ß', 'İ', 'i', 'ı', 'K',
    '\u{212A}', 'k', 'Ⱥ', 'ⱥ', '😀',
];

fn arb_collation() -> impl Strategy<Value = Collation> {
    prop_oneof![Just(BIN), Just(CI)]
}

/// Column types that can be in a key, with small lengths.
fn arb_key_type() -> BoxedStrategy<ColumnType> {
    use ColumnType as T;
    prop_oneof![
        any::<bool>().prop_map(|unsigned| T::TinyInt { unsigned }),
        any::<bool>().prop_map(|unsigned| T::SmallInt { unsigned }),
        any::<bool>().prop_map(|unsigned| T::MediumInt { unsigned }),
        any::<bool>().prop_map(|unsigned| T::Int { unsigned }),
        any::<bool>().prop_map(|unsigned| T::BigInt { unsigned }),
        Just(T::Float),
        Just(T::Double),
        (1u8..=65)
            .prop_flat_map(|p| (Just(p), 0..=p.min(30)))
            .prop_map(|(precision, scale)| T::Decimal { precision, scale }),
        (0u16..=6, arb_collation()).prop_map(|(len, collation)| T::Char { len, collation }),
        (0u16..=20, arb_collation()).prop_map(|(max, collation)| T::VarChar { max, collation }),
        (0u16..=6).prop_map(|len| T::Binary { len }),
        (0u16..=12).prop_map(|max| T::VarBinary { max }),
        Just(T::Date),
        (0u8..=6).prop_map(|fsp| T::DateTime { fsp }),
        (0u8..=6).prop_map(|fsp| T::Timestamp { fsp }),
        (1u8..=64).prop_map(|bits| T::Bit { bits }),
    ]
    .boxed()
}

/// Every column type, BLOB and TEXT included.
fn arb_type() -> BoxedStrategy<ColumnType> {
    prop_oneof![
        6 => arb_key_type(),
        1 => Just(ColumnType::Blob),
        1 => arb_collation().prop_map(|collation| ColumnType::Text { collation }),
    ]
    .boxed()
}

fn arb_string(max_chars: usize) -> BoxedStrategy<String> {
    prop::collection::vec(prop::sample::select(ALPHABET), 0..=max_chars)
        .prop_map(|chars| chars.into_iter().collect())
        .boxed()
}

fn arb_bytes(max: usize) -> BoxedStrategy<Vec<u8>> {
    let byte = prop_oneof![
        prop::sample::select(vec![0u8, 1, b' ', 0x7F, 0xFF]),
        any::<u8>()
    ];
    prop::collection::vec(byte, 0..=max).boxed()
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn arb_date() -> BoxedStrategy<Date> {
    let year = prop_oneof![0u16..=9999, 1999u16..=2001];
    (year, 1u8..=12, 1u8..=31)
        .prop_map(|(y, m, d)| Date::new(y, m, d.min(days_in_month(y, m))))
        .boxed()
}

/// Microseconds below a second with no digits beyond `fsp`.
fn arb_fraction(fsp: u8) -> BoxedStrategy<u32> {
    let unit = 10u32.pow(6 - u32::from(fsp));
    prop_oneof![
        Just(0u32),
        (0..1_000_000 / unit).prop_map(move |n| n * unit)
    ]
    .boxed()
}

fn arb_decimal(precision: u8, scale: u8) -> BoxedStrategy<Decimal> {
    let int_digits = usize::from(precision - scale);
    let frac_digits = usize::from(scale);
    let digits = |n: usize| prop::collection::vec(0u8..10, 0..=n);
    prop_oneof![
        1 => prop::sample::select(vec!["0", "1", "-1", "0.5"])
            .prop_filter_map("fits", move |t| {
                let d = Decimal::parse(t).expect("literal");
                d.fits(precision, scale).then_some(d)
            }),
        4 => (any::<bool>(), digits(int_digits), digits(frac_digits)).prop_map(
            |(negative, int, frac)| {
                let digits = |ds: &[u8]| ds.iter().map(|d| char::from(b'0' + d)).collect::<String>();
                let mut text = if negative { "-".to_string() } else { String::new() };
                let int_text = if int.is_empty() { "0".to_string() } else { digits(&int) };
                text.push_str(&int_text);
                if !frac.is_empty() {
                    text.push('.');
                    text.push_str(&digits(&frac));
                }
                Decimal::parse(&text).expect("generated within limits")
            }
        ),
    ]
    .boxed()
}

/// A valid, non-NULL value of a type, in its canonical form (Int for signed
/// integer columns, UInt for unsigned ones); small values often, so that
/// equal values come up.
fn arb_value(ty: ColumnType) -> BoxedStrategy<Value> {
    use ColumnType as T;
    match ty {
        T::TinyInt { .. }
        | T::SmallInt { .. }
        | T::MediumInt { .. }
        | T::Int { .. }
        | T::BigInt { .. } => {
            let (min, max) = ty.integer_range().expect("integer");
            let signed = min < 0;
            prop_oneof![
                (-2i128..=2).prop_map(move |v| v.clamp(min, max)),
                Just(min),
                Just(max),
                (min..=max),
            ]
            .prop_map(move |v| {
                if signed {
                    Value::Int(v as i64)
                } else {
                    Value::UInt(v as u64)
                }
            })
            .boxed()
        }
        T::Float => prop_oneof![
            prop::sample::select(vec![0.0f32, -0.0, 1.0, -1.0, 0.5, f32::MIN, f32::MAX]),
            any::<f32>().prop_filter("finite", |f| f.is_finite()),
        ]
        .prop_map(Value::Float)
        .boxed(),
        T::Double => prop_oneof![
            prop::sample::select(vec![
                0.0f64,
                -0.0,
                1.0,
                -1.0,
                0.5,
                f64::MIN_POSITIVE,
                f64::MAX
            ]),
            any::<f64>().prop_filter("finite", |f| f.is_finite()),
        ]
        .prop_map(Value::Double)
        .boxed(),
        T::Decimal { precision, scale } => arb_decimal(precision, scale)
            .prop_map(Value::Decimal)
            .boxed(),
        T::Char { len, .. } => arb_string(usize::from(len)).prop_map(Value::String).boxed(),
        T::VarChar { max, .. } => arb_string(usize::from(max)).prop_map(Value::String).boxed(),
        T::Text { .. } => arb_string(300).prop_map(Value::String).boxed(),
        T::Binary { len } => arb_bytes(usize::from(len)).prop_map(Value::Bytes).boxed(),
        T::VarBinary { max } => arb_bytes(usize::from(max)).prop_map(Value::Bytes).boxed(),
        T::Blob => arb_bytes(600).prop_map(Value::Bytes).boxed(),
        T::Date => arb_date().prop_map(Value::Date).boxed(),
        T::DateTime { fsp } => (arb_date(), 0u8..24, 0u8..60, 0u8..60, arb_fraction(fsp))
            .prop_map(|(d, h, m, s, us)| Value::DateTime(DateTime::new(d, h, m, s, us)))
            .boxed(),
        T::Timestamp { fsp } => (
            prop_oneof![0i64..=2, 0i64..=i64::from(i32::MAX)],
            arb_fraction(fsp),
        )
            .prop_map(|(s, us)| Value::Timestamp(s * 1_000_000 + i64::from(us)))
            .boxed(),
        T::Bit { bits } => {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            prop_oneof![0u64..=2, any::<u64>()]
                .prop_map(move |v| Value::Bit(v & mask))
                .boxed()
        }
    }
}

/// A value or, for a nullable column, sometimes NULL.
fn arb_cell(ty: ColumnType, nullable: bool) -> BoxedStrategy<Value> {
    if nullable {
        prop_oneof![1 => Just(Value::Null), 4 => arb_value(ty)].boxed()
    } else {
        arb_value(ty)
    }
}

/// The model of collation order: weigh each character (the weights are
/// checked against MariaDB's on their own), drop trailing spaces, pad the
/// shorter with spaces to the longer's length, compare code points.
fn model_string_cmp(collation: Collation, a: &str, b: &str) -> Ordering {
    let fold = |s: &str| -> Vec<char> {
        let mut chars: Vec<char> = match collation {
            Collation::Utf8mb4Bin => s.chars().collect(),
            Collation::Utf8mb4GeneralCi => s.chars().map(crate::general_ci::weight).collect(),
        };
        while chars.last() == Some(&' ') {
            chars.pop();
        }
        chars
    };
    let (mut a, mut b) = (fold(a), fold(b));
    let len = a.len().max(b.len());
    a.resize(len, ' ');
    b.resize(len, ' ');
    a.cmp(&b)
}

/// The model of numeric order of decimals, from their written form.
fn model_decimal_cmp(a: &Decimal, b: &Decimal) -> Ordering {
    let split = |d: &Decimal| {
        let text = d.to_string();
        let negative = text.starts_with('-');
        let text = text.trim_start_matches('-').to_string();
        let (int, frac) = match text.split_once('.') {
            Some((i, f)) => (i.to_string(), f.to_string()),
            None => (text.clone(), String::new()),
        };
        (negative, int.trim_start_matches('0').to_string(), frac)
    };
    let magnitude = |(int_a, frac_a): (&String, &String), (int_b, frac_b): (&String, &String)| {
        let width = frac_a.len().max(frac_b.len());
        int_a
            .len()
            .cmp(&int_b.len())
            .then_with(|| int_a.cmp(int_b))
            .then_with(|| format!("{frac_a:0<width$}").cmp(&format!("{frac_b:0<width$}")))
    };
    let (neg_a, int_a, frac_a) = split(a);
    let (neg_b, int_b, frac_b) = split(b);
    match (neg_a, neg_b) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => magnitude((&int_a, &frac_a), (&int_b, &frac_b)),
        (true, true) => magnitude((&int_b, &frac_b), (&int_a, &frac_a)),
    }
}

/// SQL order of two values of a column type, NULL first.
fn model_cmp(ty: &ColumnType, a: &Value, b: &Value) -> Ordering {
    use Value as V;
    match (a, b) {
        (V::Null, V::Null) => return Ordering::Equal,
        (V::Null, _) => return Ordering::Less,
        (_, V::Null) => return Ordering::Greater,
        _ => {}
    }
    let int = |v: &Value| match v {
        V::Int(i) => i128::from(*i),
        V::UInt(u) => i128::from(*u),
        _ => panic!("not an integer: {v:?}"),
    };
    match (ty, a, b) {
        (_, V::Int(_) | V::UInt(_), _) => int(a).cmp(&int(b)),
        (_, V::Float(x), V::Float(y)) => x.partial_cmp(y).expect("finite"),
        (_, V::Double(x), V::Double(y)) => x.partial_cmp(y).expect("finite"),
        (_, V::Decimal(x), V::Decimal(y)) => model_decimal_cmp(x, y),
        (
            ColumnType::Char { collation, .. } | ColumnType::VarChar { collation, .. },
            V::String(x),
            V::String(y),
        ) => model_string_cmp(*collation, x, y),
        (ColumnType::Binary { len }, V::Bytes(x), V::Bytes(y)) => {
            let pad = |v: &Vec<u8>| {
                let mut v = v.clone();
                v.resize(usize::from(*len), 0);
                v
            };
            pad(x).cmp(&pad(y))
        }
        (_, V::Bytes(x), V::Bytes(y)) => x.cmp(y),
        (_, V::Date(x), V::Date(y)) => (x.year, x.month, x.day).cmp(&(y.year, y.month, y.day)),
        (_, V::DateTime(x), V::DateTime(y)) => (
            (x.date.year, x.date.month, x.date.day),
            (x.hour, x.minute, x.second, x.micros),
        )
            .cmp(&(
                (y.date.year, y.date.month, y.date.day),
                (y.hour, y.minute, y.second, y.micros),
            )),
        (_, V::Timestamp(x), V::Timestamp(y)) => x.cmp(y),
        (_, V::Bit(x), V::Bit(y)) => x.cmp(y),
        _ => panic!("no model for {ty}: {a:?} vs {b:?}"),
    }
}

/// A valid table of the given columns keyed by the hidden `$PK`.
fn table_of(columns: &[(ColumnType, bool)]) -> TableDef {
    let columns = columns
        .iter()
        .enumerate()
        .map(|(i, (ty, nullable))| Column {
            name: format!("c{i}"),
            ty: *ty,
            nullable: *nullable,
            default: None,
        })
        .collect();
    TableDef::new("t", 1, columns)
        .build()
        .expect("generated tables are valid")
}

fn encode_key(encoder: &KeyEncoder, values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    encoder
        .encode(values, &mut out)
        .expect("generated values are valid");
    out
}

/// A value close to `a`: the same, or for strings and bytes `a` with a
/// short tail added or cut or its case changed, so that long common
/// prefixes (where chunk markers and escapes decide) come up often.
fn arb_related(ty: ColumnType, nullable: bool, a: Value) -> BoxedStrategy<Value> {
    let tail_chars = prop::collection::vec(
        prop::sample::select(vec![' ', '\t', '\0', 'a', 'A', 'z', 'é']),
        0..=3,
    );
    let tail_bytes = prop::collection::vec(prop::sample::select(vec![0u8, 1, b' ', 0xFF]), 0..=3);
    match (ty, a.clone()) {
        (
            ColumnType::Char { len: max, .. } | ColumnType::VarChar { max, .. },
            Value::String(text),
        ) => {
            let max = usize::from(max);
            (tail_chars, 0usize..=3, 0u8..3)
                .prop_map(move |(tail, cut, op)| {
                    let mut chars: Vec<char> = text.chars().collect();
                    match op {
                        0 => chars.extend(tail),
                        1 => chars.truncate(chars.len().saturating_sub(cut)),
                        _ => chars = chars.iter().flat_map(|c| c.to_uppercase()).collect(),
                    }
                    chars.truncate(max);
                    Value::String(chars.into_iter().collect())
                })
                .boxed()
        }
        (ColumnType::VarBinary { max } | ColumnType::Binary { len: max }, Value::Bytes(bytes)) => {
            let max = usize::from(max);
            (tail_bytes, 0usize..=3, any::<bool>())
                .prop_map(move |(tail, cut, grow)| {
                    let mut b = bytes.clone();
                    if grow {
                        b.extend(tail);
                    } else {
                        b.truncate(b.len().saturating_sub(cut));
                    }
                    b.truncate(max);
                    Value::Bytes(b)
                })
                .boxed()
        }
        _ => prop_oneof![Just(a), arb_cell(ty, nullable)].boxed(),
    }
}

/// Key columns (type, nullable) and two rows of values for them.
type KeyRows = (Vec<(ColumnType, bool)>, Vec<Value>, Vec<Value>);

/// Columns of a key with two rows of values for them, the second often
/// close to the first.
fn arb_key_rows() -> BoxedStrategy<KeyRows> {
    prop::collection::vec((arb_key_type(), any::<bool>()), 1..=4)
        .prop_flat_map(|columns| {
            let row: Vec<_> = columns
                .iter()
                .map(|(ty, nullable)| arb_cell(*ty, *nullable))
                .collect();
            (Just(columns), row)
        })
        .prop_flat_map(|(columns, a)| {
            let b: Vec<_> = columns
                .iter()
                .zip(&a)
                .map(|((ty, nullable), value)| {
                    prop_oneof![
                        1 => arb_cell(*ty, *nullable),
                        3 => arb_related(*ty, *nullable, value.clone()),
                    ]
                })
                .collect();
            (Just(columns), Just(a), b)
        })
        .boxed()
}

/// A random table with a row of values for it (hidden key included).
fn arb_table_row() -> BoxedStrategy<(TableDef, Vec<Value>)> {
    table_row_of(prop::collection::vec((arb_type(), any::<bool>()), 1..=12))
}

/// A table of the generated (type, nullable) columns and a row of it.
fn table_row_of(
    columns: impl Strategy<Value = Vec<(ColumnType, bool)>> + 'static,
) -> BoxedStrategy<(TableDef, Vec<Value>)> {
    columns
        .prop_flat_map(|columns| {
            let table = table_of(&columns);
            let row: Vec<_> = table
                .columns
                .iter()
                .map(|c| arb_cell(c.ty, c.nullable))
                .collect();
            (Just(table), row)
        })
        .boxed()
}

/// A table of integer columns of every width and sign, some nullable, and
/// a row of it.
fn arb_integer_type() -> impl Strategy<Value = ColumnType> {
    (0..5usize, any::<bool>()).prop_map(|(width, unsigned)| match width {
        0 => ColumnType::TinyInt { unsigned },
        1 => ColumnType::SmallInt { unsigned },
        2 => ColumnType::MediumInt { unsigned },
        3 => ColumnType::Int { unsigned },
        _ => ColumnType::BigInt { unsigned },
    })
}

fn arb_integer_table_row() -> BoxedStrategy<(TableDef, Vec<Value>)> {
    table_row_of(prop::collection::vec(
        (arb_integer_type(), any::<bool>()),
        1..=30,
    ))
}

/// A table of integers where, half the time, no column is nullable.
fn arb_maybe_not_null_integer_table_row() -> BoxedStrategy<(TableDef, Vec<Value>)> {
    let column = (arb_integer_type(), any::<bool>());
    let columns = (prop::collection::vec(column, 1..=30), any::<bool>()).prop_map(
        |(columns, not_null)| -> Vec<(ColumnType, bool)> {
            columns
                .into_iter()
                .map(|(ty, nullable)| (ty, nullable && !not_null))
                .collect()
        },
    );
    table_row_of(columns)
}

/// [`ColumnChanges`] that hand their leading integers through
/// `integer_prefix`, as an op's do.
#[derive(Clone)]
struct Prefixed<'v>(std::slice::Iter<'v, (usize, Value)>);

impl<'v> Iterator for Prefixed<'v> {
    type Item = (usize, ValueRef<'v>);

    fn next(&mut self) -> Option<(usize, ValueRef<'v>)> {
        self.0.next().map(|(c, v)| (*c, v.as_ref()))
    }
}

impl<'v> ColumnChanges<'v> for Prefixed<'v> {
    fn integer_prefix(&mut self, mut apply: impl FnMut(usize, Result<i64, u64>) -> bool) {
        while let Some((c, v)) = self.0.as_slice().first() {
            let value = match *v {
                Value::Int(x) => Ok(x),
                Value::UInt(x) => Err(x),
                _ => break,
            };
            if !apply(*c, value) {
                break;
            }
            self.0.next();
        }
    }
}

/// [`update_both`] of `changes` to row `old` of `table`.
fn update_both_from(table: &TableDef, old: &[Value], changes: &[(usize, Value)]) {
    let layout = RowLayout::new(table);
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout.encode(old, &mut fixed, &mut var).unwrap();
    let _ = update_both(&layout, (&fixed, &var), changes);
}

/// `RowLayout::update` of `changes`, checked to agree with the same
/// changes handed through `integer_prefix`: the same bytes or the same
/// error.
fn update_both(
    layout: &RowLayout,
    (fixed, var): (&[u8], &[u8]),
    changes: &[(usize, Value)],
) -> Result<(Vec<u8>, Vec<u8>), ValueError> {
    let (mut new_fixed, mut new_var) = (Vec::new(), Vec::new());
    let listed = layout.update(fixed, var, changes, &mut new_fixed, &mut new_var);
    let (mut prefix_fixed, mut prefix_var) = (vec![7], vec![7]);
    let prefixed = layout.update_refs(
        fixed,
        var,
        Prefixed(changes.iter()),
        &mut prefix_fixed,
        &mut prefix_var,
    );
    assert_eq!(listed, prefixed, "{changes:?}");
    assert_eq!(
        (&new_fixed, &new_var),
        (&prefix_fixed, &prefix_var),
        "{changes:?}"
    );
    listed.map(|()| (new_fixed, new_var))
}

/// Changes for `table`: columns in and past it, key columns, columns named
/// twice; integers in and out of range of either kind, NULL.
fn arb_changes(columns: usize) -> impl Strategy<Value = Vec<(usize, Value)>> {
    let value = prop_oneof![
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        (-300i64..300).prop_map(Value::Int),
        (0u64..70_000).prop_map(Value::UInt),
        Just(Value::Null),
    ];
    prop::collection::vec((0..columns + 2, value), 0..12)
}

/// `RowLayout::update` of the `mask`ed columns of `old` to `new` gives the
/// bytes of encoding the merged row; a key column among the changes is
/// refused and leaves the image empty.
fn update_matches_reencoding(
    table: &TableDef,
    old: &[Value],
    new: &[Value],
    mask: &[bool],
) -> Result<(), TestCaseError> {
    let layout = RowLayout::new(table);
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout.encode(old, &mut fixed, &mut var).unwrap();
    let mut changes: Vec<(usize, Value)> = Vec::new();
    let mut merged = old.to_vec();
    for (col, changed) in mask.iter().enumerate() {
        if *changed && !table.primary_key.contains(&col) {
            if changes.is_empty() {
                // Named twice: the last value counts.
                changes.push((col, old[col].clone()));
            }
            changes.push((col, new[col].clone()));
            merged[col] = new[col].clone();
        }
    }
    let (new_fixed, new_var) = update_both(&layout, (&fixed, &var), &changes).unwrap();
    let (mut want_fixed, mut want_var) = (Vec::new(), Vec::new());
    layout
        .encode(&merged, &mut want_fixed, &mut want_var)
        .unwrap();
    prop_assert_eq!(&new_fixed, &want_fixed);
    prop_assert_eq!(&new_var, &want_var);
    // A primary-key column among the changes is refused, wherever it
    // comes, and leaves the new image empty.
    let key = table.primary_key[0];
    changes.push((key, old[key].clone()));
    let (mut new_fixed, mut new_var) = (Vec::new(), Vec::new());
    let refused = layout.update(&fixed, &var, &changes, &mut new_fixed, &mut new_var);
    prop_assert!(
        matches!(refused, Err(ValueError::KeyColumn { .. })),
        "{:?}",
        refused
    );
    prop_assert!(new_fixed.is_empty() && new_var.is_empty());
    prop_assert_eq!(
        update_both(&layout, (&fixed, &var), &changes),
        refused.map(|()| (new_fixed, new_var))
    );
    Ok(())
}

/// What decoding a stored value gives back: CHAR without trailing spaces,
/// BINARY padded, BLOB/TEXT as their head.
fn stored_form(ty: &ColumnType, value: &Value) -> Value {
    match (ty, value) {
        (ColumnType::Char { .. }, Value::String(s)) => {
            Value::String(s.trim_end_matches(' ').to_string())
        }
        (ColumnType::Binary { len }, Value::Bytes(b)) => {
            let mut b = b.clone();
            b.resize(usize::from(*len), 0);
            Value::Bytes(b)
        }
        (ColumnType::Blob, Value::Bytes(b)) => Value::BlobHead {
            total_bytes: b.len() as u64,
            inline: b[..b.len().min(BLOB_INLINE_BYTES)].to_vec(),
        },
        (ColumnType::Text { .. }, Value::String(s)) => Value::BlobHead {
            total_bytes: s.len() as u64,
            inline: s.as_bytes()[..s.len().min(BLOB_INLINE_BYTES)].to_vec(),
        },
        _ => value.clone(),
    }
}

proptest! {
    // Seeded: a failure reproduces on every run; the seed is in the
    // failure message's shrunk input anyway, so nothing is persisted.
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x736b_6172_7603),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Byte order of keys is the model's order of the values, column by
    /// column, NULLs first; equal keys are exactly equal values.
    #[test]
    fn key_order_is_sql_order((columns, a, b) in arb_key_rows()) {
        let table = table_of(&columns);
        let key: Vec<usize> = (0..columns.len()).collect();
        let encoder = KeyEncoder::new(&table, &key);
        let (ka, kb) = (encode_key(&encoder, &a), encode_key(&encoder, &b));
        let model = columns
            .iter()
            .zip(a.iter().zip(&b))
            .map(|((ty, _), (x, y))| model_cmp(ty, x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal);
        prop_assert_eq!(ka.cmp(&kb), model, "keys {:02x?} {:02x?}", ka, kb);
        prop_assert!(ka.len() <= encoder.max_encoded_bytes());
        // The key of a prefix of the columns is a byte prefix of the key.
        let mut prefix = Vec::new();
        encoder.encode_prefix(&a[..1], &mut prefix).unwrap();
        prop_assert!(ka.starts_with(&prefix));
    }

    /// Strings and byte strings alone, with the second value usually a close
    /// relative of the first: where chunk markers and escapes decide.
    #[test]
    fn string_keys_order_as_the_model(
        (ty, a, b) in prop_oneof![
            (1u16..=24, arb_collation()).prop_map(|(max, collation)| ColumnType::VarChar { max, collation }),
            (1u16..=6, arb_collation()).prop_map(|(len, collation)| ColumnType::Char { len, collation }),
            (1u16..=24).prop_map(|max| ColumnType::VarBinary { max }),
        ]
        .prop_flat_map(|ty| (Just(ty), arb_value(ty)))
        .prop_flat_map(|(ty, a)| (Just(ty), Just(a.clone()), arb_related(ty, false, a)))
    ) {
        let table = table_of(&[(ty, false)]);
        let encoder = KeyEncoder::new(&table, &[0]);
        let (ka, kb) = (
            encode_key(&encoder, std::slice::from_ref(&a)),
            encode_key(&encoder, std::slice::from_ref(&b)),
        );
        prop_assert_eq!(ka.cmp(&kb), model_cmp(&ty, &a, &b), "keys {:02x?} {:02x?}", ka, kb);
    }

    /// The library's collation comparison is the model's.
    #[test]
    fn collation_compare_is_the_model(collation in arb_collation(), a in arb_string(10), b in arb_string(10)) {
        prop_assert_eq!(collation.compare(&a, &b), model_string_cmp(collation, &a, &b));
    }

    /// Decoding every column of an encoded row gives the values back, the
    /// row validates, and the key read from the row is the key of the values.
    #[test]
    fn rows_round_trip((table, row) in arb_table_row()) {
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        prop_assert_eq!(fixed.len(), layout.fixed_bytes());
        prop_assert!(var.len() <= layout.max_var_bytes());
        prop_assert!(fixed.len() + var.len() <= table.max_row_bytes());
        layout.validate_row(&fixed, &var).unwrap();
        for (col, (column, value)) in table.columns.iter().zip(&row).enumerate() {
            let decoded = layout.decode_column(&fixed, &var, col);
            prop_assert_eq!(decoded.to_value(), stored_form(&column.ty, value), "column {}", col);
            prop_assert_eq!(layout.is_null(&fixed, col), value.is_null());
        }
        // Re-encoding what was decoded gives the same bytes.
        let decoded: Vec<Value> = (0..row.len()).map(|c| layout.decode_column(&fixed, &var, c).to_value()).collect();
        let (mut fixed2, mut var2) = (Vec::new(), Vec::new());
        layout.encode(&decoded, &mut fixed2, &mut var2).unwrap();
        prop_assert_eq!(&fixed2, &fixed);
        prop_assert_eq!(&var2, &var);
        // Keys from the stored row equal keys from the values.
        let keyable: Vec<usize> = (0..table.columns.len()).filter(|&c| !table.columns[c].ty.is_blob()).rev().collect();
        let encoder = KeyEncoder::new(&table, &keyable);
        let (mut from_row, mut from_values) = (Vec::new(), Vec::new());
        encoder.encode_from_row(&layout, &fixed, &var, &mut from_row);
        encoder.encode_from_values(&row, &mut from_values).unwrap();
        prop_assert_eq!(from_row, from_values);
    }

    /// An integer column read without building a value reads what
    /// `decode_column` reads; other columns and NULLs are left to it.
    #[test]
    fn integer_columns_read_as_decoded((table, row) in arb_table_row()) {
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        for (c, column) in table.columns.iter().enumerate() {
            let decoded = layout.decode_column(&fixed, &var, c);
            match layout.integer_column(&fixed, c) {
                Some(Ok(v)) => prop_assert_eq!(decoded, ValueRef::Int(v)),
                Some(Err(v)) => prop_assert_eq!(decoded, ValueRef::UInt(v)),
                None => prop_assert!(
                    column.ty.integer_range().is_none() || decoded == ValueRef::Null,
                    "column {} ({}) is an integer, not NULL: {:?}", c, column.ty, decoded
                ),
            }
        }
    }

    /// A text column read as bytes reads the bytes `decode_column`'s string
    /// has; other columns and NULLs are left to it.
    #[test]
    fn text_columns_read_as_decoded((table, row) in arb_table_row()) {
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        for (c, column) in table.columns.iter().enumerate() {
            let decoded = layout.decode_column(&fixed, &var, c);
            match layout.text_column(&fixed, &var, c) {
                Some(bytes) => prop_assert_eq!(ValueRef::Str(std::str::from_utf8(bytes).unwrap()), decoded),
                None => prop_assert!(
                    !matches!(decoded, ValueRef::Str(_)),
                    "column {} ({}) is text, not NULL: {:?}", c, column.ty, decoded
                ),
            }
        }
    }

    /// `integer_fits` decides what `integer_range` does, for every integer
    /// type, at and around each type's bounds and anywhere else.
    #[test]
    fn integer_fits_agrees_with_integer_range(
        width in 0..5usize,
        unsigned in any::<bool>(),
        signed_value in any::<i64>(),
        unsigned_value in any::<u64>(),
        near in -2i128..=2,
    ) {
        let ty = match width {
            0 => ColumnType::TinyInt { unsigned },
            1 => ColumnType::SmallInt { unsigned },
            2 => ColumnType::MediumInt { unsigned },
            3 => ColumnType::Int { unsigned },
            _ => ColumnType::BigInt { unsigned },
        };
        let (min, max) = ty.integer_range().expect("an integer type");
        let mut candidates = vec![i128::from(signed_value), i128::from(unsigned_value)];
        candidates.extend([min + near, max + near, near]);
        for v in candidates {
            let expected = (min..=max).contains(&v);
            if let Ok(x) = i64::try_from(v) {
                prop_assert_eq!(ty.integer_fits(ValueRef::Int(x)), expected, "{} as Int in {}", v, ty);
            }
            if let Ok(x) = u64::try_from(v) {
                prop_assert_eq!(ty.integer_fits(ValueRef::UInt(x)), expected, "{} as UInt in {}", v, ty);
            }
        }
        prop_assert!(!ColumnType::Double.integer_fits(ValueRef::UInt(1)));
    }

    /// A row of a table of integers only, read in one pass
    /// (`integer_cells`), reads what `decode_column` reads, NULLs included;
    /// a table with any other column has no such pass.
    #[test]
    fn integer_cells_read_as_decoded((table, row) in arb_integer_table_row()) {
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        let cells: Vec<IntegerCell> = layout.integer_cells(&fixed).expect("integers only").collect();
        prop_assert_eq!(cells.len(), table.columns.len());
        for (c, cell) in cells.into_iter().enumerate() {
            let decoded = layout.decode_column(&fixed, &var, c);
            let read = match cell {
                IntegerCell::Null => ValueRef::Null,
                IntegerCell::Int(v) => ValueRef::Int(v),
                IntegerCell::UInt(v) => ValueRef::UInt(v),
            };
            prop_assert_eq!(read, decoded, "column {}", c);
        }
        let mut mixed = table.columns.iter().map(|c| (c.ty, c.nullable)).collect::<Vec<_>>();
        mixed.push((ColumnType::VarChar { max: 4, collation: Collation::Utf8mb4Bin }, true));
        let mixed = RowLayout::new(&table_of(&mixed));
        prop_assert!(mixed.integer_cells(&vec![0; mixed.fixed_bytes()]).is_none());
    }

    /// `integer_reads` exists exactly for tables of NOT NULL integers (of
    /// rows up to INTEGER_READ_ROW_BYTES_MAX fixed bytes), and each
    /// column's load reads what `decode_column` reads.
    #[test]
    fn integer_reads_load_as_decoded((table, row) in arb_maybe_not_null_integer_table_row()) {
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        let eligible = table.columns.iter().all(|c| !c.nullable)
            && layout.fixed_bytes() <= INTEGER_READ_ROW_BYTES_MAX;
        let Some(reads) = layout.integer_reads() else {
            prop_assert!(!eligible, "a table of NOT NULL integers has integer reads");
            return Ok(());
        };
        prop_assert!(eligible, "a nullable column or a long row has no integer reads");
        prop_assert_eq!(reads.len(), table.columns.len());
        let padded = layout.padded(&fixed);
        for (c, read) in reads.iter().enumerate() {
            let x = read.load(&padded);
            let loaded = if read.signed() { ValueRef::Int(x as i64) } else { ValueRef::UInt(x) };
            prop_assert_eq!(loaded, layout.decode_column(&fixed, &var, c), "column {}", c);
        }
    }

    /// Updating some columns gives the bytes of encoding the updated row.
    #[test]
    fn update_equals_reencoding(
        ((table, old), new, mask) in arb_table_row().prop_flat_map(|(table, old)| {
            let new: Vec<_> = table.columns.iter().map(|c| arb_cell(c.ty, c.nullable)).collect();
            let mask = prop::collection::vec(any::<bool>(), table.columns.len());
            (Just((table, old)), new, mask)
        })
    ) {
        update_matches_reencoding(&table, &old, &new, &mask)?;
    }

    /// The same for tables of integers only, whose updates take the
    /// compact slots' path.
    #[test]
    fn integer_update_equals_reencoding(
        ((table, old), new, mask) in arb_integer_table_row().prop_flat_map(|(table, old)| {
            let new: Vec<_> = table.columns.iter().map(|c| arb_cell(c.ty, c.nullable)).collect();
            let mask = prop::collection::vec(any::<bool>(), table.columns.len());
            (Just((table, old)), new, mask)
        })
    ) {
        update_matches_reencoding(&table, &old, &new, &mask)?;
        let layout = RowLayout::new(&table);
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        layout.encode(&old, &mut fixed, &mut var).unwrap();
        // A value given as the other integer kind (a non-negative Int for an
        // unsigned column, a UInt for a signed one) writes the same bytes.
        let swapped = |v: &Value| match *v {
            Value::Int(x) if x >= 0 => Value::UInt(x as u64),
            Value::UInt(x) if x <= i64::MAX as u64 => Value::Int(x as i64),
            ref other => other.clone(),
        };
        let writable = |c: &usize| !table.primary_key.contains(c);
        let changes: Vec<(usize, Value)> = (0..new.len()).filter(writable).map(|c| (c, new[c].clone())).collect();
        let other_kind: Vec<(usize, Value)> = changes.iter().map(|(c, v)| (*c, swapped(v))).collect();
        let (want_fixed, _) = update_both(&layout, (&fixed, &var), &changes).unwrap();
        let (got_fixed, _) = update_both(&layout, (&fixed, &var), &other_kind).unwrap();
        prop_assert_eq!(got_fixed, want_fixed);
        // A value out of its column's range is refused there too.
        let narrow = (0..table.columns.len()).find(|c| {
            !table.primary_key.contains(c)
                && !matches!(table.columns[*c].ty, ColumnType::BigInt { .. })
        });
        if let Some(c) = narrow {
            let refused = update_both(&layout, (&fixed, &var), &[(c, Value::UInt(u64::MAX))]);
            prop_assert!(matches!(refused, Err(ValueError::OutOfRange { .. })), "{:?}", refused);
            let refused = update_both(&layout, (&fixed, &var), &[(c, Value::Int(i64::MIN))]);
            prop_assert!(matches!(refused, Err(ValueError::OutOfRange { .. })), "{:?}", refused);
        }
    }

    /// Any changes of a table of integers, handed through
    /// `integer_prefix` or the iterator alone, give the same image or the
    /// same error (values in and out of range, key columns, unknown
    /// columns, columns named twice).
    #[test]
    fn integer_prefix_agrees_with_iterator(
        ((table, old), changes) in arb_integer_table_row().prop_flat_map(|(table, old)| {
            let changes = arb_changes(table.columns.len());
            (Just((table, old)), changes)
        })
    ) {
        update_both_from(&table, &old, &changes);
    }

    /// The same for tables of any columns (integers into other types are
    /// refused by both).
    #[test]
    fn integer_prefix_agrees_with_iterator_any_table(
        ((table, old), changes) in arb_table_row().prop_flat_map(|(table, old)| {
            let changes = arb_changes(table.columns.len());
            (Just((table, old)), changes)
        })
    ) {
        update_both_from(&table, &old, &changes);
    }

    /// Decimals: the binary format orders as the numbers do and reads back.
    #[test]
    fn decimal_binary_order(
        (precision, scale, a, b) in (1u8..=65)
            .prop_flat_map(|p| (Just(p), 0..=p.min(30)))
            .prop_flat_map(|(p, s)| (Just(p), Just(s), arb_decimal(p, s), arb_decimal(p, s)))
    ) {
        let width = types::decimal_bytes(precision, scale);
        let (mut ba, mut bb) = (vec![0; width], vec![0; width]);
        a.write_binary(precision, scale, &mut ba);
        b.write_binary(precision, scale, &mut bb);
        prop_assert_eq!(ba.cmp(&bb), model_decimal_cmp(&a, &b));
        prop_assert_eq!(a.cmp(&b), model_decimal_cmp(&a, &b));
        prop_assert_eq!(Decimal::read_binary(precision, scale, &ba), Some(a));
        prop_assert_eq!(Decimal::parse(&a.to_string()).unwrap(), a);
    }
}

#[test]
fn integer_values_encode_alike_whatever_their_variant() {
    let table = table_of(&[
        (ColumnType::Int { unsigned: true }, false),
        (ColumnType::BigInt { unsigned: false }, false),
    ]);
    let encoder = KeyEncoder::new(&table, &[0, 1]);
    assert_eq!(
        encode_key(&encoder, &[Value::Int(5), Value::UInt(7)]),
        encode_key(&encoder, &[Value::UInt(5), Value::Int(7)])
    );
}

#[test]
fn flexasynch_row_is_100_bytes() {
    // The benchmark row: 25 INT UNSIGNED NOT NULL, the first the key.
    let columns = (0..25)
        .map(|i| Column::new(format!("c{i}"), ColumnType::Int { unsigned: true }))
        .collect();
    let table = TableDef::new("flex", 1, columns)
        .primary_key(vec![0])
        .build()
        .unwrap();
    let layout = RowLayout::new(&table);
    let row: Vec<Value> = (0..25).map(|i| Value::UInt(i * 1_000_003)).collect();
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout.encode(&row, &mut fixed, &mut var).unwrap();
    assert_eq!(fixed.len() + var.len(), 100);
    assert_eq!(layout.fixed_bytes(), 100);
    assert!(var.is_empty());
    let mut key = Vec::new();
    KeyEncoder::primary_key(&table).encode_from_row(&layout, &fixed, &var, &mut key);
    assert_eq!(key, 0u32.to_be_bytes());
}

#[test]
fn encode_and_keys_do_not_allocate_once_warm() {
    // Buffers keep their capacity; a second encode of a same-size row must
    // not move them (a reallocation would).
    let table = table_of(&[
        (
            ColumnType::VarChar {
                max: 10,
                collation: CI,
            },
            false,
        ),
        (ColumnType::Int { unsigned: false }, true),
    ]);
    let layout = RowLayout::new(&table);
    let row = vec![Value::String("Hello".into()), Value::Null, Value::UInt(1)];
    let (mut fixed, mut var, mut key) = (
        Vec::with_capacity(64),
        Vec::with_capacity(64),
        Vec::with_capacity(64),
    );
    let pointers = (fixed.as_ptr(), var.as_ptr(), key.as_ptr());
    let encoder = KeyEncoder::new(&table, &[0, 1]);
    for _ in 0..3 {
        layout.encode(&row, &mut fixed, &mut var).unwrap();
        key.clear();
        encoder.encode_from_row(&layout, &fixed, &var, &mut key);
    }
    assert_eq!((fixed.as_ptr(), var.as_ptr(), key.as_ptr()), pointers);
    assert_eq!(&key[..9], b"HELLO   \x02");
    assert_eq!(key[9..], [0x00]);
}

#[test]
fn row_errors_name_table_and_column() {
    let table = table_of(&[(ColumnType::TinyInt { unsigned: false }, false)]);
    let layout = RowLayout::new(&table);
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    let err = layout
        .encode(&[Value::Int(300), Value::UInt(1)], &mut fixed, &mut var)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "column `c0` is TINYINT: 300 is out of its range"
    );
    assert!(fixed.is_empty());
    let err = layout
        .encode(&[Value::Int(3)], &mut fixed, &mut var)
        .unwrap_err();
    assert_eq!(err.to_string(), "table `t` has 2 columns: 1 values given");
    layout
        .encode(&[Value::Int(3), Value::UInt(1)], &mut fixed, &mut var)
        .unwrap();
    let (mut f2, mut v2) = (Vec::new(), Vec::new());
    let err = layout
        .update(&fixed, &var, &[(9, Value::Null)], &mut f2, &mut v2)
        .unwrap_err();
    assert!(matches!(
        err,
        ValueError::NoSuchColumn {
            column: 9,
            columns: 2,
            ..
        }
    ));
}

#[test]
fn corrupt_rows_are_refused() {
    let table = table_of(&[
        (
            ColumnType::VarChar {
                max: 4,
                collation: BIN,
            },
            true,
        ),
        (ColumnType::Date, false),
        (
            ColumnType::Decimal {
                precision: 5,
                scale: 2,
            },
            false,
        ),
        (
            ColumnType::Char {
                len: 4,
                collation: BIN,
            },
            false,
        ),
        (ColumnType::Text { collation: BIN }, false),
    ]);
    let layout = RowLayout::new(&table);
    let row = vec![
        Value::String("abcd".into()),
        Value::Date(Date::new(2020, 1, 31)),
        Value::Decimal(Decimal::parse("-1.5").unwrap()),
        Value::String("xy".into()),
        Value::String("text".into()),
        Value::UInt(1),
    ];
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout.encode(&row, &mut fixed, &mut var).unwrap();
    layout.validate_row(&fixed, &var).unwrap();
    let refused = |fixed: &[u8], var: &[u8]| layout.validate_row(fixed, var).unwrap_err();
    assert!(matches!(
        refused(&fixed[1..], &var),
        RowFormatError::FixedLength { .. }
    ));
    assert!(matches!(
        refused(&fixed, &var[..var.len() - 1]),
        RowFormatError::VarPart { .. }
    ));
    // Unused NULL bits, a NULL with data, a bad date, a bad decimal.
    let mut f = fixed.clone();
    f[0] |= 0x80;
    assert!(matches!(
        refused(&f, &var),
        RowFormatError::NullBitmap { .. }
    ));
    let mut f = fixed.clone();
    f[0] |= 0x01;
    assert!(
        matches!(refused(&f, &var), RowFormatError::Column { ref column, .. } if column == "c0")
    );
    let mut f = fixed.clone();
    let month_13: u32 = 2020 * 512 + 13 * 32 + 1;
    f[1..4].copy_from_slice(&month_13.to_be_bytes()[1..]);
    assert!(
        matches!(refused(&f, &var), RowFormatError::Column { ref column, .. } if column == "c1")
    );
    let mut f = fixed.clone();
    f[4..7].fill(0x7F);
    assert!(
        matches!(refused(&f, &var), RowFormatError::Column { ref column, .. } if column == "c2")
    );
    // Invalid UTF-8 in the VARCHAR; a CHAR with a trailing space.
    let header = layout.var_columns() * 2;
    let mut v = var.clone();
    v[header] = 0xFF;
    assert!(
        matches!(refused(&fixed, &v), RowFormatError::Column { ref column, .. } if column == "c0")
    );
    let mut v = var.clone();
    v[header + 5] = b' ';
    assert!(
        matches!(refused(&fixed, &v), RowFormatError::Column { ref column, .. } if column == "c3")
    );
}

#[test]
fn blob_parts_cover_the_value() {
    let data: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    assert_eq!(blob_part_count(data.len() as u64), 3);
    assert_eq!(blob_part_count(256), 0);
    assert_eq!(blob_part_count(257), 1);
    let parts: Vec<(u32, &[u8])> = blob_parts(&data).collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0].0, 0);
    assert_eq!(parts[0].1.len(), BLOB_PART_BYTES);
    assert_eq!(parts[2].1.len(), 20_000 - 256 - 2 * BLOB_PART_BYTES);
    let mut whole = data[..BLOB_INLINE_BYTES].to_vec();
    for (_, part) in parts {
        whole.extend_from_slice(part);
    }
    assert_eq!(whole, data);
    assert_eq!(blob_parts(&data[..100]).count(), 0);
}

#[test]
fn update_checks_integers_the_way_encode_does() {
    // The update's integer fast path takes only values in range; the rest
    // get the general check and its error.
    let columns = vec![
        Column::new("k", ColumnType::Int { unsigned: true }),
        Column::new("v", ColumnType::TinyInt { unsigned: false }).nullable(),
    ];
    let table = TableDef::new("t", 1, columns)
        .primary_key(vec![0])
        .build()
        .unwrap();
    let layout = RowLayout::new(&table);
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout
        .encode(&[Value::UInt(1), Value::Null], &mut fixed, &mut var)
        .unwrap();
    let (mut new_fixed, mut new_var) = (Vec::new(), Vec::new());
    for bad in [Value::Int(128), Value::Int(-129), Value::UInt(200)] {
        let err = layout
            .update(
                &fixed,
                &var,
                &[(1, bad.clone())],
                &mut new_fixed,
                &mut new_var,
            )
            .unwrap_err();
        assert!(
            matches!(err, ValueError::OutOfRange { .. }),
            "{bad:?}: {err}"
        );
    }
    layout
        .update(
            &fixed,
            &var,
            &[(1, Value::Int(-128))],
            &mut new_fixed,
            &mut new_var,
        )
        .unwrap();
    assert_eq!(
        layout.decode_column(&new_fixed, &new_var, 1),
        ValueRef::Int(-128)
    );
    let (old_fixed, old_var) = (new_fixed.clone(), new_var.clone());
    layout
        .update(
            &old_fixed,
            &old_var,
            &[(1, Value::Null)],
            &mut new_fixed,
            &mut new_var,
        )
        .unwrap();
    assert_eq!(
        layout.decode_column(&new_fixed, &new_var, 1),
        ValueRef::Null
    );
    assert_eq!(
        (new_fixed, new_var),
        (fixed, var),
        "back to the first row's bytes"
    );
}
