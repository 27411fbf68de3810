//! The row store and the hash index against a model: random inserts,
//! updates, deletes, lookups and checkpoints on a small `DataMemory`, with
//! keys whose hashes collide on purpose, checked after every step against a
//! `BTreeMap<RowId, (fixed, var)>` and a `HashMap<key, RowId>`. The
//! checkpoint tracking too: pages changed since the last checkpoint, and
//! the rows marked changed (a checkpoint here clears the marks of the rows
//! of the changed pages, as the checkpoint writer does; none may be left).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use storage::hash_index::HashIndex;
use storage::memory::{row_page, MemoryError, PagePool, RowStore};
use storage::RowId;

/// Fixed-size parts: small (many rows per page) or large (16 per page, so
/// that a few hundred rows fill many pages and the budget).
const FIXED_BYTES: [usize; 2] = [24, 2000];
const KEYS: u16 = 300;
const VAR_BYTES_MAX: usize = 3000;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Keys in groups of three share the 32 bits the index stores; within a
/// group, 0 and 1 also share the whole 64-bit hash.
fn hash(key: u16) -> u64 {
    let high = mix(u64::from(key / 3)) & 0xFFFF_FFFF_0000_0000;
    high | u64::from(key % 3 / 2)
}

fn fixed_part(len: usize, key: u16, seed: u8) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len).map(|i| seed.wrapping_mul(i as u8)).collect();
    bytes[..2].copy_from_slice(&key.to_le_bytes());
    bytes
}

fn var_part(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed ^ (i as u8)).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Insert { key: u16, var_len: usize, seed: u8 },
    Update { key: u16, var_len: usize, seed: u8 },
    Delete { key: u16 },
    Get { key: u16 },
    Checkpoint,
}

fn var_len() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), 1..40usize, 40..VAR_BYTES_MAX]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS, var_len(), any::<u8>()).prop_map(|(key, var_len, seed)| Op::Insert { key, var_len, seed }),
        2 => (0..KEYS, var_len(), any::<u8>()).prop_map(|(key, var_len, seed)| Op::Update { key, var_len, seed }),
        2 => (0..KEYS).prop_map(|key| Op::Delete { key }),
        2 => (0..KEYS).prop_map(|key| Op::Get { key }),
        1 => Just(Op::Checkpoint),
    ]
}

struct World {
    pool: PagePool,
    store: RowStore,
    index: HashIndex,
    rows: BTreeMap<RowId, (Vec<u8>, Vec<u8>)>,
    keys: HashMap<u16, RowId>,
    /// Pages whose rows changed since the last checkpoint, and that
    /// checkpoint's generation.
    touched: BTreeSet<u32>,
    checkpoint: u32,
    /// Rows changed since a checkpoint cleared their mark.
    marked: BTreeSet<RowId>,
    exhausted: u32,
}

impl World {
    fn new(with_var: bool, fixed_bytes: usize, budget_pages: u32) -> World {
        World {
            pool: PagePool::new(budget_pages),
            store: if with_var {
                RowStore::with_var_parts(fixed_bytes)
            } else {
                RowStore::new(fixed_bytes)
            },
            index: HashIndex::new(),
            rows: BTreeMap::new(),
            keys: HashMap::new(),
            touched: BTreeSet::new(),
            checkpoint: 0,
            marked: BTreeSet::new(),
            exhausted: 0,
        }
    }

    fn find(&self, key: u16) -> Option<RowId> {
        let (store, pool) = (&self.store, &self.pool);
        self.index.find(pool, hash(key), |row| {
            store.fixed(pool, row)[..2] == key.to_le_bytes()
        })
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Insert { key, var_len, seed } => {
                if self.keys.contains_key(&key) {
                    assert!(self.find(key).is_some());
                    return;
                }
                let var_len = if self.store.has_var_parts() {
                    var_len
                } else {
                    0
                };
                let (fixed, var) = (
                    fixed_part(self.store.fixed_bytes(), key, seed),
                    var_part(var_len, seed),
                );
                let used = self.pool.used_bytes();
                let row = match self.store.insert(&mut self.pool, &fixed, &var) {
                    Ok(row) => row,
                    Err(e) => {
                        assert!(matches!(e, MemoryError::DataMemoryExhausted { .. }));
                        assert_eq!(self.pool.used_bytes(), used, "a failed insert took memory");
                        self.exhausted += 1;
                        return;
                    }
                };
                if let Err(e) = self.index.insert(&mut self.pool, hash(key), row) {
                    // What the LDM does: undo the row.
                    assert!(matches!(e, MemoryError::DataMemoryExhausted { .. }));
                    self.store.delete(&mut self.pool, row);
                    self.touched.insert(row_page(row));
                    self.exhausted += 1;
                    return;
                }
                assert!(!self.rows.contains_key(&row), "{row:?} handed out twice");
                self.rows.insert(row, (fixed, var));
                self.keys.insert(key, row);
                self.touched.insert(row_page(row));
                self.marked.insert(row);
            }
            Op::Update { key, var_len, seed } => {
                let Some(&row) = self.keys.get(&key) else {
                    return;
                };
                let var_len = if self.store.has_var_parts() {
                    var_len
                } else {
                    0
                };
                let (fixed, var) = (
                    fixed_part(self.store.fixed_bytes(), key, seed),
                    var_part(var_len, seed),
                );
                match self.store.update(&mut self.pool, row, &fixed, &var) {
                    Ok(()) => {
                        self.rows.insert(row, (fixed, var));
                        self.touched.insert(row_page(row));
                        self.marked.insert(row);
                    }
                    Err(e) => {
                        assert!(matches!(e, MemoryError::DataMemoryExhausted { .. }));
                        self.exhausted += 1;
                    }
                }
            }
            Op::Delete { key } => match self.keys.remove(&key) {
                Some(row) => {
                    assert!(self.index.remove(&mut self.pool, hash(key), row));
                    self.store.delete(&mut self.pool, row);
                    self.rows.remove(&row);
                    self.touched.insert(row_page(row));
                    self.marked.remove(&row);
                }
                None => assert_eq!(self.find(key), None),
            },
            Op::Get { key } => assert_eq!(self.find(key), self.keys.get(&key).copied()),
            Op::Checkpoint => {
                let changed: BTreeSet<u32> =
                    self.store.changed_pages_since(self.checkpoint).collect();
                assert_eq!(changed, self.touched, "pages changed since the checkpoint");
                // What the writer does: write (here: check) the marked rows
                // of the changed pages, and clear their marks.
                let mut bits = Vec::new();
                for &page in &changed {
                    let marked: Vec<RowId> = self.store.page_changed_rows(page).collect();
                    let expected = self.marked.iter().filter(|r| row_page(**r) == page);
                    assert!(marked.iter().eq(expected), "page {page}: marked rows");
                    for row in marked {
                        self.store.clear_changed(row);
                        self.marked.remove(&row);
                    }
                    // No uncommitted rows here: the committed slots are the
                    // live ones.
                    self.store.committed_slots(&self.pool, page, &mut bits);
                    let live = (0..bits.len() * 64)
                        .filter(|s| bits[s / 64] & (1 << (s % 64)) != 0)
                        .map(|s| storage::memory::row_id(page, s as u32));
                    assert!(live.eq(self.store.page_rows(page)), "page {page}: bitmap");
                }
                assert!(
                    self.marked.is_empty() && self.store.changed_rows() == 0,
                    "a marked row outside the changed pages: {:?}",
                    self.marked
                );
                self.checkpoint = self.store.mark_checkpoint();
                self.touched.clear();
            }
        }
    }

    fn check(&self) {
        self.store.check_invariants(&self.pool);
        self.index.check_invariants(&self.pool);
        assert_eq!(self.store.row_count(), self.rows.len() as u64);
        assert_eq!(self.index.len(), self.keys.len() as u64);
        assert!(self.store.rows().eq(self.rows.keys().copied()));
        for (&row, (fixed, var)) in &self.rows {
            assert_eq!(self.store.fixed(&self.pool, row), &fixed[..]);
            assert_eq!(self.store.var(&self.pool, row), &var[..]);
            assert_eq!(self.store.is_changed(row), self.marked.contains(&row));
        }
        assert_eq!(self.store.changed_rows(), self.marked.len() as u64);
        for (&key, &row) in &self.keys {
            assert_eq!(self.find(key), Some(row), "key {key}");
        }
        assert_eq!(
            self.pool.used_bytes(),
            self.store.memory_bytes() + self.index.memory_bytes()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn row_store_and_index_follow_the_model(
        with_var in any::<bool>(),
        fixed_bytes in proptest::sample::select(FIXED_BYTES.to_vec()),
        budget_pages in 3u32..24,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mut world = World::new(with_var, fixed_bytes, budget_pages);
        for op in &ops {
            world.apply(op);
            world.check();
        }
        // Everything deleted: the memory goes back, except the few pages
        // kept warm for the next insert.
        let keys: Vec<u16> = world.keys.keys().copied().collect();
        for key in keys {
            world.apply(&Op::Delete { key });
        }
        world.check();
        prop_assert!(world.store.memory_bytes() <= 2 * storage::memory::PAGE_BYTES as u64);
    }
}

/// A full `DataMemory`: the insert that does not fit fails with the "table
/// is full" error and changes nothing; a delete makes room; the insert then
/// succeeds.
#[test]
fn exhaustion_fails_cleanly_and_delete_makes_room() {
    let mut world = World::new(false, FIXED_BYTES[0], 3);
    let mut key = 0u16;
    let error = loop {
        let fixed = fixed_part(FIXED_BYTES[0], key, 1);
        let row = match world.store.insert(&mut world.pool, &fixed, &[]) {
            Ok(row) => row,
            Err(e) => break e,
        };
        match world.index.insert(&mut world.pool, hash(key), row) {
            Ok(()) => {
                world.rows.insert(row, (fixed, Vec::new()));
                world.keys.insert(key, row);
                world.marked.insert(row);
            }
            Err(e) => {
                world.store.delete(&mut world.pool, row);
                break e;
            }
        }
        key += 1;
    };
    assert_eq!(
        error.to_string(),
        format!(
            "table is full: DataMemory exhausted ({} bytes)",
            3 * storage::memory::PAGE_BYTES
        )
    );
    world.check();
    assert_eq!(world.pool.used_pages(), 3);
    // Other operations keep working.
    world.apply(&Op::Update {
        key: 0,
        var_len: 0,
        seed: 9,
    });
    world.apply(&Op::Get { key: 5 });
    world.check();
    // Deletes make room: keys of the failed key's group first (same
    // bucket, so its chain gets a free slot), then others (freeing row slots
    // and overflow buckets).
    let victims = (key - key % 3..key).rev().chain((0..key - key % 3).rev());
    let mut deleted = 0;
    for victim in victims {
        world.apply(&Op::Delete { key: victim });
        deleted += 1;
        world.apply(&Op::Insert {
            key,
            var_len: 0,
            seed: 2,
        });
        if world.keys.contains_key(&key) {
            break;
        }
        assert!(deleted < 20, "20 deletes did not make room for one insert");
    }
    assert!(
        world.keys.contains_key(&key),
        "the insert succeeds after a delete"
    );
    world.check();
}
