//! Ordered indexes of one partition (NDB: DBTUX): the rows of a table in the
//! order of some of its columns, for range scans in both directions.
//!
//! An index maps memcomparable keys (the schema's key encoder: byte order
//! equals SQL order of the index columns) to row ids. The fragment's keys
//! end with the primary key's columns the index does not hold
//! (`KeyEncoder::ordered_index`), so rows equal in the index's columns come
//! in primary key order and no two rows share a key; the index does not
//! rely on it: an entry is the pair (key, row) and the order is by key, then
//! by row id, so duplicates are distinct and always scanned in the same
//! order, which is what lets a batched scan resume after the last (key, row)
//! it returned ([`OrderedIndex::scan_from`]).
//!
//! The [`OrderedIndex`] trait is the interface the LDM uses;
//! [`BTreeOrderedIndex`] is the first implementation, over the standard
//! `BTreeSet` (DESIGN: start from a B-tree over memcomparable keys behind a
//! trait, and replace it with a tree of our own when measurements ask).
//!
//! Keys of up to [`KEY_INLINE_BYTES`] bytes are stored inside the tree node,
//! so inserting one allocates nothing but the occasional node; longer keys
//! take one heap allocation each.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::btree_set::{self, BTreeSet};
use std::ops::Bound;

use crate::RowId;

/// The longest key an ordered index takes. Any key built from one row (at
/// most 30,000 bytes of column data) fits, with room for the encoder's
/// escaping and column terminators; the length also fits in a `u16`.
pub const KEY_BYTES_MAX: usize = 65_535;

/// Keys up to this length live inside the tree's nodes without a heap
/// allocation. Chosen so that an entry is 24 bytes (checked in the tests):
/// an encoded integer or date column, or a few of them, fits.
pub const KEY_INLINE_BYTES: usize = 18;

/// The direction of a scan.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    Ascending,
    Descending,
}

/// The keys a scan visits. A bound may be a whole key or a *prefix*: the
/// encoding of the first k index columns only. A prefix bound `P` means:
///
/// - lower `Included(P)`: keys whose first k columns are ≥ P (all keys that
///   start with P are in);
/// - lower `Excluded(P)`: keys whose first k columns are > P (every key that
///   starts with P is out);
/// - upper `Included(P)`: keys whose first k columns are ≤ P (all keys that
///   start with P are in);
/// - upper `Excluded(P)`: keys whose first k columns are < P.
///
/// In bytes: "starts with P" is byte-prefix; otherwise keys compare with P
/// byte-wise. This equals the column meaning because of the encoder's
/// promise that the encoding of a column value is never a proper prefix of
/// the encoding of another value of that column (each column's encoding is
/// terminated), so one key is a byte-prefix of another only when its columns
/// equal the other's first columns. An empty prefix is a prefix of every key:
/// lower `Excluded(&[])` and upper `Excluded(&[])` select nothing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KeyRange<'k> {
    pub lower: Bound<&'k [u8]>,
    pub upper: Bound<&'k [u8]>,
}

impl<'k> KeyRange<'k> {
    /// Every key.
    pub const ALL: KeyRange<'static> = KeyRange {
        lower: Bound::Unbounded,
        upper: Bound::Unbounded,
    };

    pub fn new(lower: Bound<&'k [u8]>, upper: Bound<&'k [u8]>) -> KeyRange<'k> {
        KeyRange { lower, upper }
    }

    /// Every key that starts with `prefix` (equality on the first columns).
    pub fn prefix(prefix: &'k [u8]) -> KeyRange<'k> {
        KeyRange {
            lower: Bound::Included(prefix),
            upper: Bound::Included(prefix),
        }
    }

    /// Whether the range holds `key` (a whole key), with the prefix
    /// meaning of the bounds above.
    pub fn holds(&self, key: &[u8]) -> bool {
        use std::cmp::Ordering::{Greater, Less};
        // The key's first columns against a prefix bound.
        let cmp = |bound: &[u8]| key.iter().take(bound.len()).cmp(bound.iter());
        let above = match self.lower {
            Bound::Unbounded => true,
            Bound::Included(p) => cmp(p) != Less,
            Bound::Excluded(p) => cmp(p) == Greater,
        };
        let below = match self.upper {
            Bound::Unbounded => true,
            Bound::Included(p) => cmp(p) != Greater,
            Bound::Excluded(p) => cmp(p) == Less,
        };
        above && below
    }
}

/// Why an entry was not inserted. Nothing changed in the index.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderedIndexError {
    #[error(
        "the ordered index key of {row:?} is {len} bytes long; \
         allowed: at most {KEY_BYTES_MAX} bytes"
    )]
    KeyTooLong { row: RowId, len: usize },
    #[error("{row:?} is already in the ordered index under the same key")]
    AlreadyPresent { row: RowId },
}

/// An ordered index of one partition: entries (key, row), ordered by key
/// bytes, then by row id.
pub trait OrderedIndex {
    /// A running scan: (key, row) in scan order. It borrows the index, so the
    /// index cannot change under it; a scan fetched in batches ends its
    /// iterator at each batch and resumes with [`scan_from`].
    ///
    /// [`scan_from`]: OrderedIndex::scan_from
    type Scan<'a>: Iterator<Item = (&'a [u8], RowId)>
    where
        Self: 'a;

    /// Adds the entry (key, row).
    fn insert(&mut self, key: &[u8], row: RowId) -> Result<(), OrderedIndexError>;

    /// Removes the entry (key, row); returns whether it was there.
    fn remove(&mut self, key: &[u8], row: RowId) -> bool;

    /// The entries in `range`, in `direction`.
    fn scan<'a>(&'a self, range: KeyRange<'_>, direction: Direction) -> Self::Scan<'a> {
        self.scan_from(range, direction, None)
    }

    /// The entries in `range`, in `direction`, that come after the entry
    /// `after` in that direction (which need not be in the index any more):
    /// the continuation of a scan whose last returned entry was `after`.
    fn scan_from<'a>(
        &'a self,
        range: KeyRange<'_>,
        direction: Direction,
        after: Option<(&[u8], RowId)>,
    ) -> Self::Scan<'a>;

    /// How many entries the index holds.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An estimate of the memory the index uses, in bytes.
    fn memory_bytes(&self) -> usize;
}

/// An ordered index over the standard B-tree.
#[derive(Default)]
pub struct BTreeOrderedIndex {
    entries: BTreeSet<IndexEntry>,
    /// Bytes of keys stored outside the tree (longer than
    /// [`KEY_INLINE_BYTES`]).
    heap_key_bytes: usize,
}

impl BTreeOrderedIndex {
    pub fn new() -> BTreeOrderedIndex {
        BTreeOrderedIndex::default()
    }

    /// Whether the entry (key, row) is in the index.
    pub fn contains(&self, key: &[u8], row: RowId) -> bool {
        let probe = Probe {
            key,
            terminal: Terminal::Row(row),
        };
        self.entries.contains(&probe as &dyn Position)
    }
}

impl OrderedIndex for BTreeOrderedIndex {
    type Scan<'a> = BTreeScan<'a>;

    fn insert(&mut self, key: &[u8], row: RowId) -> Result<(), OrderedIndexError> {
        if key.len() > KEY_BYTES_MAX {
            return Err(OrderedIndexError::KeyTooLong {
                row,
                len: key.len(),
            });
        }
        if !self.entries.insert(IndexEntry::new(key, row)) {
            return Err(OrderedIndexError::AlreadyPresent { row });
        }
        if key.len() > KEY_INLINE_BYTES {
            self.heap_key_bytes += key.len();
        }
        Ok(())
    }

    fn remove(&mut self, key: &[u8], row: RowId) -> bool {
        let probe = Probe {
            key,
            terminal: Terminal::Row(row),
        };
        let removed = self.entries.remove(&probe as &dyn Position);
        if removed && key.len() > KEY_INLINE_BYTES {
            debug_assert!(self.heap_key_bytes >= key.len());
            self.heap_key_bytes -= key.len();
        }
        removed
    }

    fn scan_from<'a>(
        &'a self,
        range: KeyRange<'_>,
        direction: Direction,
        after: Option<(&[u8], RowId)>,
    ) -> BTreeScan<'a> {
        let mut lower = match range.lower {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(key) => Bound::Included(Probe::before(key)),
            Bound::Excluded(key) => Bound::Excluded(Probe::after(key)),
        };
        let mut upper = match range.upper {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(key) => Bound::Included(Probe::after(key)),
            Bound::Excluded(key) => Bound::Excluded(Probe::before(key)),
        };
        if let Some((key, row)) = after {
            let resume = Bound::Excluded(Probe {
                key,
                terminal: Terminal::Row(row),
            });
            match direction {
                Direction::Ascending => lower = tighter(lower, resume, Ordering::Greater),
                Direction::Descending => upper = tighter(upper, resume, Ordering::Less),
            }
        }
        if is_empty_range(&lower, &upper) {
            // `BTreeSet::range` panics on a reversed range.
            return BTreeScan {
                range: btree_set::Range::default(),
                direction,
            };
        }
        let range = self
            .entries
            .range::<dyn Position, _>((as_dyn(&lower), as_dyn(&upper)));
        BTreeScan { range, direction }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn memory_bytes(&self) -> usize {
        estimated_tree_bytes(self.entries.len()) + self.heap_key_bytes
    }
}

/// A scan of a [`BTreeOrderedIndex`].
pub struct BTreeScan<'a> {
    range: btree_set::Range<'a, IndexEntry>,
    direction: Direction,
}

impl<'a> Iterator for BTreeScan<'a> {
    type Item = (&'a [u8], RowId);

    fn next(&mut self) -> Option<(&'a [u8], RowId)> {
        let entry = match self.direction {
            Direction::Ascending => self.range.next(),
            Direction::Descending => self.range.next_back(),
        }?;
        Some((entry.key(), entry.row()))
    }
}

/// Node sizes of the standard B-tree (its `B` is 6: at most 11 entries per
/// node; a node is a header of 16 bytes and its entries, an internal node
/// also 12 child pointers), and its fill: random inserts leave nodes about
/// 70 % full, appends in key order about 55 %; 2/3 is the estimate. Checked
/// against a counting allocator in `tests/ordered_index_memory.rs`.
const TREE_NODE_ENTRIES: usize = 11;
const TREE_NODE_HEADER_BYTES: usize = 16;
const TREE_NODE_CHILDREN_BYTES: usize = 12 * 8;

fn estimated_tree_bytes(entries: usize) -> usize {
    if entries == 0 {
        return 0;
    }
    let leaf_bytes = TREE_NODE_HEADER_BYTES + TREE_NODE_ENTRIES * std::mem::size_of::<IndexEntry>();
    let entries_per_leaf = TREE_NODE_ENTRIES * 2 / 3;
    let leaves = entries.div_ceil(entries_per_leaf);
    // Internal nodes hold one entry per leaf but one: about leaves / 7 of
    // them, each a leaf plus child pointers.
    let internal = leaves / (entries_per_leaf + 1);
    leaves * leaf_bytes + internal * (leaf_bytes + TREE_NODE_CHILDREN_BYTES)
}

/// One entry of a [`BTreeOrderedIndex`]: a key and a row.
#[derive(Clone, Debug)]
enum IndexEntry {
    Inline {
        len: u8,
        bytes: [u8; KEY_INLINE_BYTES],
        row: RowId,
    },
    Heap {
        key: Box<[u8]>,
        row: RowId,
    },
}

impl IndexEntry {
    fn new(key: &[u8], row: RowId) -> IndexEntry {
        if key.len() <= KEY_INLINE_BYTES {
            let mut bytes = [0u8; KEY_INLINE_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            IndexEntry::Inline {
                len: key.len() as u8,
                bytes,
                row,
            }
        } else {
            IndexEntry::Heap {
                key: key.into(),
                row,
            }
        }
    }

    fn key(&self) -> &[u8] {
        match self {
            IndexEntry::Inline { len, bytes, .. } => &bytes[..usize::from(*len)],
            IndexEntry::Heap { key, .. } => key,
        }
    }

    fn row(&self) -> RowId {
        match self {
            IndexEntry::Inline { row, .. } | IndexEntry::Heap { row, .. } => *row,
        }
    }
}

/// What follows the key bytes of a position in the index order. An entry
/// (key, row) sorts as its key followed by `Row(row)`, a symbol below every
/// byte, so that a key sorts before its extensions and duplicates sort by
/// row. Bounds need two more positions: `Before` (below every row: "P and
/// everything after it") and `After` (above every byte: "after everything
/// that starts with P").
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Terminal {
    Before,
    Row(RowId),
    After,
}

/// A position in the index order: key bytes and a terminal. Entries and
/// probes (bounds, resume points, lookups) are both positions, and the tree
/// is searched with a probe through `Borrow<dyn Position>`, which needs no
/// allocation.
trait Position {
    /// The key bytes and the terminal, in one call: comparisons are the
    /// inner loop of every tree search, and each call here is a dynamic one.
    fn position(&self) -> (&[u8], Terminal);
}

impl Position for IndexEntry {
    #[inline]
    fn position(&self) -> (&[u8], Terminal) {
        match self {
            IndexEntry::Inline { len, bytes, row } => {
                (&bytes[..usize::from(*len)], Terminal::Row(*row))
            }
            IndexEntry::Heap { key, row } => (key, Terminal::Row(*row)),
        }
    }
}

struct Probe<'k> {
    key: &'k [u8],
    terminal: Terminal,
}

impl<'k> Probe<'k> {
    fn before(key: &'k [u8]) -> Probe<'k> {
        Probe {
            key,
            terminal: Terminal::Before,
        }
    }

    fn after(key: &'k [u8]) -> Probe<'k> {
        Probe {
            key,
            terminal: Terminal::After,
        }
    }
}

impl Position for Probe<'_> {
    #[inline]
    fn position(&self) -> (&[u8], Terminal) {
        (self.key, self.terminal)
    }
}

/// The index order: key bytes, with the terminal as one last symbol that
/// sorts below every byte (`Before`, `Row`) or above all of them (`After`).
#[inline]
fn compare(a_key: &[u8], a_terminal: Terminal, b_key: &[u8], b_terminal: Terminal) -> Ordering {
    let common = a_key.len().min(b_key.len());
    match a_key[..common].cmp(&b_key[..common]) {
        Ordering::Equal => {}
        unequal => return unequal,
    }
    match a_key.len().cmp(&b_key.len()) {
        Ordering::Equal => a_terminal.cmp(&b_terminal),
        // `a` ends where `b` has another byte.
        Ordering::Less if a_terminal == Terminal::After => Ordering::Greater,
        Ordering::Less => Ordering::Less,
        Ordering::Greater if b_terminal == Terminal::After => Ordering::Less,
        Ordering::Greater => Ordering::Greater,
    }
}

impl<'k> Borrow<dyn Position + 'k> for IndexEntry {
    fn borrow(&self) -> &(dyn Position + 'k) {
        self
    }
}

impl Ord for dyn Position + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        let ((a_key, a_terminal), (b_key, b_terminal)) = (self.position(), other.position());
        compare(a_key, a_terminal, b_key, b_terminal)
    }
}

impl PartialOrd for dyn Position + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn Position + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Position + '_ {}

// The tree's own order must be the order it is searched with.
impl Ord for IndexEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        let ((a_key, a_terminal), (b_key, b_terminal)) = (self.position(), other.position());
        compare(a_key, a_terminal, b_key, b_terminal)
    }
}

impl PartialOrd for IndexEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for IndexEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for IndexEntry {}

fn compare_probes(a: &Probe<'_>, b: &Probe<'_>) -> Ordering {
    compare(a.key, a.terminal, b.key, b.terminal)
}

/// Of two bounds on the same side, the one that admits less: `wanted` is
/// `Greater` for lower bounds (the larger one wins), `Less` for upper bounds.
fn tighter<'k>(
    current: Bound<Probe<'k>>,
    other: Bound<Probe<'k>>,
    wanted: Ordering,
) -> Bound<Probe<'k>> {
    let (current_probe, other_probe) = match (&current, &other) {
        (Bound::Unbounded, _) => return other,
        (_, Bound::Unbounded) => return current,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            (a, b)
        }
    };
    match compare_probes(other_probe, current_probe) {
        Ordering::Equal if matches!(other, Bound::Excluded(_)) => other,
        Ordering::Equal => current,
        order if order == wanted => other,
        _ => current,
    }
}

/// Whether no position lies between `lower` and `upper`; also exactly the
/// cases in which `BTreeSet::range` would panic.
fn is_empty_range(lower: &Bound<Probe<'_>>, upper: &Bound<Probe<'_>>) -> bool {
    let (low, high, both_included) = match (lower, upper) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => return false,
        (Bound::Included(low), Bound::Included(high)) => (low, high, true),
        (
            Bound::Included(low) | Bound::Excluded(low),
            Bound::Included(high) | Bound::Excluded(high),
        ) => (low, high, false),
    };
    match compare_probes(low, high) {
        Ordering::Greater => true,
        Ordering::Equal => !both_included,
        Ordering::Less => false,
    }
}

fn as_dyn<'p, 'k>(bound: &'p Bound<Probe<'k>>) -> Bound<&'p (dyn Position + 'k)> {
    match bound {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(probe) => Bound::Included(probe),
        Bound::Excluded(probe) => Bound::Excluded(probe),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_holds_the_keys_its_prefix_bounds_say() {
        let key: &[u8] = b"bc";
        let holds = |lower, upper| KeyRange::new(lower, upper).holds(key);
        assert!(KeyRange::ALL.holds(key));
        assert!(KeyRange::prefix(b"b").holds(key));
        assert!(!KeyRange::prefix(b"bd").holds(key));
        assert!(holds(Bound::Included(&b"b"[..]), Bound::Unbounded));
        assert!(
            !holds(Bound::Excluded(&b"b"[..]), Bound::Unbounded),
            "starts with b"
        );
        assert!(holds(
            Bound::Excluded(&b"ba"[..]),
            Bound::Excluded(&b"c"[..])
        ));
        assert!(!holds(Bound::Unbounded, Bound::Excluded(&b"bc"[..])));
        assert!(holds(Bound::Unbounded, Bound::Included(&b"bc"[..])));
        assert!(
            !holds(Bound::Included(&b"bca"[..]), Bound::Unbounded),
            "a prefix of the bound"
        );
        assert!(
            !holds(Bound::Excluded(&[][..]), Bound::Unbounded),
            "selects nothing"
        );
    }

    fn keys(
        index: &BTreeOrderedIndex,
        range: KeyRange<'_>,
        direction: Direction,
    ) -> Vec<(Vec<u8>, u32)> {
        index
            .scan(range, direction)
            .map(|(key, row)| (key.to_vec(), row.0))
            .collect()
    }

    #[test]
    fn an_entry_is_24_bytes() {
        assert_eq!(std::mem::size_of::<IndexEntry>(), 24);
    }

    #[test]
    fn the_order_is_key_then_row_and_bounds_surround_prefixes() {
        use Terminal::{After, Before, Row};
        let order = [
            (&b""[..], Before),
            (b"", Row(RowId(0))),
            (b"", Row(RowId(9))),
            (b"\x00", Row(RowId(0))),
            (b"a", Before),
            (b"a", Row(RowId(1))),
            (b"a", Row(RowId(2))),
            (b"a\x00", Before),
            (b"a\x00", Row(RowId(0))),
            (b"a\xff\xff", Row(RowId(0))),
            (b"a\xff\xff", After),
            (b"a", After),
            (b"b", Before),
            (b"\xff", After),
            (b"", After),
        ];
        for (i, &(a_key, a_terminal)) in order.iter().enumerate() {
            for (j, &(b_key, b_terminal)) in order.iter().enumerate() {
                let expected = i.cmp(&j);
                assert_eq!(
                    compare(a_key, a_terminal, b_key, b_terminal),
                    expected,
                    "{a_key:?}/{a_terminal:?} vs {b_key:?}/{b_terminal:?}"
                );
            }
        }
    }

    #[test]
    fn duplicates_of_a_key_are_distinct_and_ordered_by_row() {
        let mut index = BTreeOrderedIndex::new();
        for row in [5, 1, 3] {
            index.insert(b"k", RowId(row)).expect("new entry");
        }
        assert_eq!(
            index.insert(b"k", RowId(3)),
            Err(OrderedIndexError::AlreadyPresent { row: RowId(3) })
        );
        assert_eq!(index.len(), 3);
        let ascending = keys(&index, KeyRange::ALL, Direction::Ascending);
        assert_eq!(
            ascending,
            vec![(b"k".to_vec(), 1), (b"k".to_vec(), 3), (b"k".to_vec(), 5)]
        );
        let descending = keys(&index, KeyRange::prefix(b"k"), Direction::Descending);
        assert_eq!(
            descending,
            vec![(b"k".to_vec(), 5), (b"k".to_vec(), 3), (b"k".to_vec(), 1)]
        );
        assert!(index.remove(b"k", RowId(3)));
        assert!(!index.remove(b"k", RowId(3)));
        assert!(!index.contains(b"k", RowId(3)));
        assert!(index.contains(b"k", RowId(5)));
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn long_keys_live_on_the_heap_and_are_counted() {
        let mut index = BTreeOrderedIndex::new();
        let long = vec![7u8; 100];
        let inline = [7u8; KEY_INLINE_BYTES];
        index.insert(&long, RowId(1)).expect("new entry");
        index.insert(&inline, RowId(1)).expect("new entry");
        assert_eq!(index.heap_key_bytes, 100);
        assert_eq!(
            keys(&index, KeyRange::prefix(&inline), Direction::Ascending).len(),
            2
        );
        assert!(index.remove(&long, RowId(1)));
        assert_eq!(index.heap_key_bytes, 0);
        let too_long = vec![0u8; KEY_BYTES_MAX + 1];
        assert_eq!(
            index.insert(&too_long, RowId(2)),
            Err(OrderedIndexError::KeyTooLong {
                row: RowId(2),
                len: KEY_BYTES_MAX + 1
            })
        );
        assert_eq!(index.len(), 1);
        index
            .insert(&too_long[..KEY_BYTES_MAX], RowId(2))
            .expect("the limit itself is allowed");
    }

    #[test]
    fn reversed_and_empty_ranges_scan_nothing_instead_of_panicking() {
        let mut index = BTreeOrderedIndex::new();
        for (row, key) in [&b"a"[..], b"b", b"c"].into_iter().enumerate() {
            index.insert(key, RowId(row as u32)).expect("new entry");
        }
        let cases: [(KeyRange<'_>, usize); 8] = [
            (
                KeyRange::new(Bound::Included(b"c"), Bound::Included(b"a")),
                0,
            ),
            (
                KeyRange::new(Bound::Excluded(b"b"), Bound::Excluded(b"b")),
                0,
            ),
            (
                KeyRange::new(Bound::Included(b"b"), Bound::Excluded(b"b")),
                0,
            ),
            (
                KeyRange::new(Bound::Excluded(b"b"), Bound::Included(b"b")),
                0,
            ),
            (
                KeyRange::new(Bound::Included(b"b"), Bound::Included(b"b")),
                1,
            ),
            (KeyRange::new(Bound::Excluded(b""), Bound::Unbounded), 0),
            (KeyRange::new(Bound::Unbounded, Bound::Excluded(b"")), 0),
            (KeyRange::new(Bound::Included(b""), Bound::Included(b"")), 3),
        ];
        for (range, expected) in cases {
            for direction in [Direction::Ascending, Direction::Descending] {
                let found = index.scan(range, direction).count();
                assert_eq!(found, expected, "{range:?} {direction:?}");
            }
        }
        // Resuming past the end of the range.
        let after = Some((&b"c"[..], RowId(2)));
        assert_eq!(
            index
                .scan_from(KeyRange::ALL, Direction::Ascending, after)
                .count(),
            0
        );
        let before = Some((&b"a"[..], RowId(0)));
        assert_eq!(
            index
                .scan_from(KeyRange::ALL, Direction::Descending, before)
                .count(),
            0
        );
        let range = KeyRange::new(Bound::Included(b"b"), Bound::Included(b"b"));
        let at_end = Some((&b"b"[..], RowId(1)));
        assert_eq!(
            index.scan_from(range, Direction::Ascending, at_end).count(),
            0
        );
        assert_eq!(
            index
                .scan_from(range, Direction::Descending, at_end)
                .count(),
            0
        );
    }

    #[test]
    fn memory_grows_with_entries_and_long_keys() {
        let mut index = BTreeOrderedIndex::new();
        assert_eq!(index.memory_bytes(), 0);
        for row in 0..1000u32 {
            index
                .insert(&row.to_be_bytes(), RowId(row))
                .expect("new entry");
        }
        let short = index.memory_bytes();
        assert!(short >= 1000 * std::mem::size_of::<IndexEntry>(), "{short}");
        index.insert(&[1u8; 1000], RowId(0)).expect("new entry");
        assert!(index.memory_bytes() >= short + 1000);
    }
}
