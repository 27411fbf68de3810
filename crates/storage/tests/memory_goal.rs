//! The memory goal of issue 3 for rows and the hash index: bytes per row
//! for 1,000,000 rows of 104 bytes (a flexAsynch row). Speed is measured by
//! `skarv bench ldm`, never by a test.

use storage::hash_index::HashIndex;
use storage::memory::{PagePool, RowStore};
use storage::RowId;

const ROWS: u64 = 1_000_000;
const ROW_BYTES: usize = 104;
/// The goal: 1.2 × the 100 bytes of column data of a flexAsynch row.
const BYTES_PER_ROW_MAX: f64 = 120.0;

fn mix(mut x: u64) -> u64 {
    // splitmix64: stands in for the distribution hash.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn fill_row(buf: &mut [u8; ROW_BYTES], key: u64) {
    buf[..8].copy_from_slice(&key.to_le_bytes());
    for (i, chunk) in buf[8..].chunks_mut(8).enumerate() {
        let v = mix(key ^ i as u64).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// One partition with `ROWS` rows, keyed by their first 8 bytes.
fn load() -> (PagePool, RowStore, HashIndex) {
    let mut pool = PagePool::with_budget_bytes(1 << 30);
    let mut store = RowStore::new(ROW_BYTES);
    let mut index = HashIndex::new();
    let mut buf = [0u8; ROW_BYTES];
    for key in 0..ROWS {
        fill_row(&mut buf, key);
        let row = store.insert(&mut pool, &buf, &[]).unwrap();
        index.insert(&mut pool, mix(key), row).unwrap();
    }
    (pool, store, index)
}

#[inline]
fn lookup(pool: &PagePool, store: &RowStore, index: &HashIndex, key: u64) -> Option<RowId> {
    let want = key.to_le_bytes();
    index.find(pool, mix(key), |row| store.fixed(pool, row)[..8] == want)
}

#[test]
fn bytes_per_row_for_a_million_104_byte_rows() {
    let (pool, store, index) = load();
    let rows = store.memory_bytes() as f64 / ROWS as f64;
    let hash = index.memory_bytes() as f64 / ROWS as f64;
    let total = pool.used_bytes() as f64 / ROWS as f64;
    println!(
        "bytes_per_row: {total:.2} (rows {rows:.2}, hash index {hash:.2}; {} buckets, {} overflow)",
        index.buckets(),
        index.overflow_buckets()
    );
    assert_eq!(
        pool.used_bytes(),
        store.memory_bytes() + index.memory_bytes()
    );
    assert!(
        total <= BYTES_PER_ROW_MAX,
        "{total:.2} bytes per row, goal {BYTES_PER_ROW_MAX}"
    );
    for key in (0..ROWS).step_by(9973) {
        let row = lookup(&pool, &store, &index, key).expect("every key is found");
        assert_eq!(store.fixed(&pool, row)[..8], key.to_le_bytes());
    }
    assert_eq!(lookup(&pool, &store, &index, ROWS + 1), None);
}
