//! `memory_bytes` of the B-tree ordered index is an estimate (the standard
//! B-tree does not say how much it allocated); here it is held against the
//! bytes actually allocated, counted by a global allocator, and scans are
//! checked to allocate nothing.

use storage::ordered_index::{BTreeOrderedIndex, Direction, KeyRange, OrderedIndex};
use storage::RowId;
use testkit::{allocations, live_bytes};

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

const ENTRIES: u32 = 50_000;

/// A small deterministic generator (xorshift) for key order.
fn shuffled(seed: u64) -> impl Iterator<Item = u32> {
    let mut state = seed;
    (0..ENTRIES).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u32
    })
}

/// Builds an index from `keys` and returns (estimate, measured) in bytes.
fn measure(keys: impl Iterator<Item = Vec<u8>>) -> (usize, i64) {
    let keys: Vec<Vec<u8>> = keys.collect();
    let before = live_bytes();
    let mut index = BTreeOrderedIndex::new();
    for (row, key) in keys.iter().enumerate() {
        // Random keys may repeat; the row id keeps entries distinct.
        index.insert(key, RowId(row as u32)).expect("new entry");
    }
    let measured = live_bytes() - before;
    (index.memory_bytes(), measured)
}

fn assert_close(name: &str, (estimate, measured): (usize, i64)) {
    let ratio = estimate as f64 / measured as f64;
    println!("{name}: estimate {estimate} bytes, allocated {measured} bytes, ratio {ratio:.2}");
    assert!(
        (0.75..=1.33).contains(&ratio),
        "{name}: estimate {estimate} vs allocated {measured}"
    );
}

#[test]
fn the_memory_estimate_is_within_a_third_of_what_was_allocated() {
    assert_close(
        "random 8-byte keys",
        measure(shuffled(7).map(|k| u64::from(k).to_be_bytes().to_vec())),
    );
    assert_close(
        "ascending 8-byte keys",
        measure((0..u64::from(ENTRIES)).map(|k| k.to_be_bytes().to_vec())),
    );
    assert_close(
        "random 40-byte keys",
        measure(shuffled(9).map(|k| [k.to_be_bytes(); 10].concat())),
    );
}

#[test]
fn scans_and_lookups_do_not_allocate() {
    let mut index = BTreeOrderedIndex::new();
    for row in 0..10_000u32 {
        index
            .insert(&(row / 3).to_be_bytes(), RowId(row))
            .expect("new entry");
    }
    let lower = 100u32.to_be_bytes();
    let upper = 2_000u32.to_be_bytes();
    let range = KeyRange::new(
        std::ops::Bound::Excluded(&lower),
        std::ops::Bound::Included(&upper),
    );
    let before = allocations();
    let mut seen = 0;
    for direction in [Direction::Ascending, Direction::Descending] {
        seen += index.scan(range, direction).count();
        let after = Some((&upper[..], RowId(0)));
        seen += index.scan_from(range, direction, after).count();
    }
    let found = index.contains(&5u32.to_be_bytes(), RowId(15));
    assert_eq!(allocations() - before, 0, "allocations in scans");
    assert!(found);
    // Keys 101..=2000, three rows each: twice the whole range, then the
    // rows of key 2000 after row 0 (all three) ascending, and everything
    // below key 2000 descending.
    assert_eq!(seen, 2 * 1_900 * 3 + 3 + 1_899 * 3);
}
