//! The ordered index against a model: a sorted vector of entries, filtered
//! by the *meaning* of each bound rather than by its bytes.
//!
//! Two kinds of keys. Multi-column keys, in a tiny terminated encoding of our
//! own (each column: its bytes, all nonzero, then a 0), whose model compares
//! the decoded columns, so that prefix bounds are checked against what they
//! mean in SQL. And raw byte strings, where keys may be byte-prefixes of each
//! other, whose model applies the byte rules of `KeyRange` directly.

use std::cmp::Ordering;
use std::ops::Bound;

use proptest::prelude::*;
use storage::ordered_index::{
    BTreeOrderedIndex, Direction, KeyRange, OrderedIndex, OrderedIndexError,
};
use storage::RowId;

const COLUMNS: usize = 3;
const ROWS: u32 = 24;

type Columns = Vec<Vec<u8>>;

fn encode(columns: &[Vec<u8>]) -> Vec<u8> {
    let mut key = Vec::new();
    for column in columns {
        assert!(!column.contains(&0), "0 terminates a column");
        key.extend_from_slice(column);
        key.push(0);
    }
    key
}

/// A column value: 0 to 2 bytes from a tiny alphabet that includes 0xFF, so
/// that "prefix followed by 0xFF" tricks would be caught out.
fn column() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(prop::sample::select(vec![1u8, 2, 0xFF]), 0..=2)
}

fn columns(count: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Columns> + Clone {
    prop::collection::vec(column(), count)
}

/// A bound over the first k columns: 0 Unbounded, 1 Included, 2 Excluded.
fn bound() -> impl Strategy<Value = (u8, Columns)> + Clone {
    (0u8..3, columns(0..=COLUMNS))
}

fn to_bound(kind: u8, bytes: &[u8]) -> Bound<&[u8]> {
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(bytes),
        _ => Bound::Excluded(bytes),
    }
}

/// Whether `key`'s first columns satisfy a lower or upper bound, by column
/// comparison (SQL meaning).
fn column_bound_admits(key: &Columns, kind: u8, bound: &Columns, lower: bool) -> bool {
    let order = key[..bound.len()].cmp(&bound[..]);
    match (kind, lower) {
        (0, _) => true,
        (1, true) => order != Ordering::Less,
        (_, true) => order == Ordering::Greater,
        (1, false) => order != Ordering::Greater,
        (_, false) => order == Ordering::Less,
    }
}

#[derive(Clone, Debug)]
enum Step<K> {
    Insert(K, u32),
    /// Removes an existing entry (by index into the model) or, past the
    /// model's end, a made-up one.
    Remove(usize, K, u32),
    Scan {
        lower: (u8, K),
        upper: (u8, K),
        descending: bool,
        /// Batch sizes for a scan fetched in batches.
        batch: usize,
        /// A resume point that need not be an entry.
        after: Option<(K, u32)>,
    },
}

fn steps<K: Clone + std::fmt::Debug>(
    key: impl Strategy<Value = K> + Clone,
    bound: impl Strategy<Value = (u8, K)> + Clone,
) -> impl Strategy<Value = Vec<Step<K>>> {
    let step = prop_oneof![
        6 => (key.clone(), 0..ROWS).prop_map(|(key, row)| Step::Insert(key, row)),
        2 => (0usize..64, key.clone(), 0..ROWS).prop_map(|(i, key, row)| Step::Remove(i, key, row)),
        3 => (bound.clone(), bound, any::<bool>(), 1usize..5, prop::option::of((key, 0..ROWS)))
            .prop_map(|(lower, upper, descending, batch, after)| Step::Scan {
                lower,
                upper,
                descending,
                batch,
                after,
            }),
    ];
    prop::collection::vec(step, 1..80)
}

/// Runs `steps` against the index and a model of sorted (K, row) entries;
/// `admits(key, lower, upper)` is the model's meaning of a range.
fn check<K: Ord + Clone + std::fmt::Debug>(
    steps: Vec<Step<K>>,
    encode: impl Fn(&K) -> Vec<u8>,
    admits: impl Fn(&K, &(u8, K), &(u8, K)) -> bool,
) -> Result<(), TestCaseError> {
    let mut index = BTreeOrderedIndex::new();
    let mut model: Vec<(K, u32)> = Vec::new();
    for step in steps {
        match step {
            Step::Insert(key, row) => {
                let got = index.insert(&encode(&key), RowId(row));
                match model.binary_search(&(key.clone(), row)) {
                    Ok(_) => prop_assert_eq!(
                        got,
                        Err(OrderedIndexError::AlreadyPresent { row: RowId(row) })
                    ),
                    Err(at) => {
                        prop_assert_eq!(got, Ok(()));
                        model.insert(at, (key, row));
                    }
                }
            }
            Step::Remove(i, key, row) => {
                let (key, row) = model.get(i).cloned().unwrap_or((key, row));
                let present = match model.binary_search(&(key.clone(), row)) {
                    Ok(at) => {
                        model.remove(at);
                        true
                    }
                    Err(_) => false,
                };
                prop_assert_eq!(index.remove(&encode(&key), RowId(row)), present);
            }
            Step::Scan {
                lower,
                upper,
                descending,
                batch,
                after,
            } => {
                let direction = if descending {
                    Direction::Descending
                } else {
                    Direction::Ascending
                };
                let (lower_bytes, upper_bytes) = (encode(&lower.1), encode(&upper.1));
                let range = KeyRange::new(
                    to_bound(lower.0, &lower_bytes),
                    to_bound(upper.0, &upper_bytes),
                );
                let mut expected: Vec<(Vec<u8>, u32)> = model
                    .iter()
                    .filter(|(key, _)| admits(key, &lower, &upper))
                    .map(|(key, row)| (encode(key), *row))
                    .collect();
                if descending {
                    expected.reverse();
                }
                let whole: Vec<(Vec<u8>, u32)> = index
                    .scan(range, direction)
                    .map(|(key, row)| (key.to_vec(), row.0))
                    .collect();
                prop_assert_eq!(&whole, &expected);
                // The same scan in batches, each resuming after the last entry.
                let mut batched: Vec<(Vec<u8>, u32)> = Vec::new();
                loop {
                    let resume = batched.last().map(|(key, row)| (key.clone(), RowId(*row)));
                    let after = resume.as_ref().map(|(key, row)| (&key[..], *row));
                    let before = batched.len();
                    batched.extend(
                        index
                            .scan_from(range, direction, after)
                            .take(batch)
                            .map(|(key, row)| (key.to_vec(), row.0)),
                    );
                    if batched.len() < before + batch {
                        break;
                    }
                }
                prop_assert_eq!(&batched, &expected);
                // Resuming after an arbitrary point.
                if let Some((key, row)) = after {
                    let after_bytes = encode(&key);
                    let point = (key, row);
                    let rest: Vec<(Vec<u8>, u32)> = model
                        .iter()
                        .filter(|entry| admits(&entry.0, &lower, &upper))
                        .filter(|entry| {
                            if descending {
                                **entry < point
                            } else {
                                **entry > point
                            }
                        })
                        .map(|(key, row)| (encode(key), *row))
                        .collect::<Vec<_>>();
                    let rest: Vec<(Vec<u8>, u32)> = if descending {
                        rest.into_iter().rev().collect()
                    } else {
                        rest
                    };
                    let got: Vec<(Vec<u8>, u32)> = index
                        .scan_from(range, direction, Some((&after_bytes, RowId(point.1))))
                        .map(|(key, row)| (key.to_vec(), row.0))
                        .collect();
                    prop_assert_eq!(got, rest);
                }
            }
        }
        prop_assert_eq!(index.len(), model.len());
    }
    Ok(())
}

/// The byte meaning of a bound (see `KeyRange`).
fn byte_bound_admits(key: &[u8], kind: u8, bound: &[u8], lower: bool) -> bool {
    match (kind, lower) {
        (0, _) => true,
        (1, true) => key >= bound,
        (_, true) => key > bound && !key.starts_with(bound),
        (1, false) => key <= bound || key.starts_with(bound),
        (_, false) => key < bound,
    }
}

fn raw_key() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7F, 0xFF]), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn multi_column_scans_follow_the_model(
        steps in steps(columns(COLUMNS..=COLUMNS), bound())
    ) {
        check(
            steps,
            |columns: &Columns| encode(columns),
            |key, lower, upper| {
                column_bound_admits(key, lower.0, &lower.1, true)
                    && column_bound_admits(key, upper.0, &upper.1, false)
            },
        )?;
    }

    #[test]
    fn raw_byte_scans_follow_the_model(
        steps in steps(raw_key(), (0u8..3, raw_key()))
    ) {
        check(
            steps,
            |key: &Vec<u8>| key.clone(),
            |key, lower, upper| {
                byte_bound_admits(key, lower.0, &lower.1, true)
                    && byte_bound_admits(key, upper.0, &upper.1, false)
            },
        )?;
    }
}

#[test]
fn prefix_bounds_select_whole_groups_of_the_first_column() {
    let mut index = BTreeOrderedIndex::new();
    let mut row = 0;
    for first in [&[1u8][..], &[1, 1], &[2], &[2, 0xFF], &[0xFF]] {
        for second in [&[][..], &[1u8], &[0xFF, 0xFF]] {
            index
                .insert(&encode(&[first.to_vec(), second.to_vec()]), RowId(row))
                .expect("new entry");
            row += 1;
        }
    }
    let two = encode(&[vec![2]]);
    let firsts = |range: KeyRange<'_>, direction: Direction| -> Vec<u32> {
        index.scan(range, direction).map(|(_, row)| row.0).collect()
    };
    assert_eq!(
        firsts(KeyRange::prefix(&two), Direction::Ascending),
        vec![6, 7, 8]
    );
    assert_eq!(
        firsts(KeyRange::prefix(&two), Direction::Descending),
        vec![8, 7, 6]
    );
    assert_eq!(
        firsts(
            KeyRange::new(Bound::Excluded(&two), Bound::Unbounded),
            Direction::Ascending
        ),
        vec![9, 10, 11, 12, 13, 14],
        "(2) excluded skips every key whose first column is 2, but not (2,0xFF)"
    );
    assert_eq!(
        firsts(
            KeyRange::new(Bound::Unbounded, Bound::Excluded(&two)),
            Direction::Descending
        ),
        vec![5, 4, 3, 2, 1, 0]
    );
    assert_eq!(
        firsts(
            KeyRange::new(Bound::Unbounded, Bound::Included(&two)),
            Direction::Ascending
        ),
        (0..9).collect::<Vec<_>>()
    );
}
