//! The hasher for maps keyed by bytes made from users' data: the SQL
//! node's GROUP BY, DISTINCT and hash-join keys (one insert or lookup a
//! row). SipHash, std's default, took 5 % of the SQL node's instructions
//! in sysbench oltp_read_only; xxh3 (the crate the distribution hash
//! already uses) hashes a short key in a few dozen instructions.
//!
//! Unlike [`crate::IdHasher`] it is keyed: users choose these values, so
//! keys that collide must not be preparable in advance (HashDoS). The
//! seed is drawn once per process from std's `RandomState`.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A map keyed by user data's bytes: [`KeyHasher`] instead of SipHash.
pub type KeyMap<K, V> = HashMap<K, V, KeyState>;

/// A set of user data's bytes; see [`KeyMap`].
pub type KeySet<K> = HashSet<K, KeyState>;

/// Builds [`KeyHasher`]s seeded with the process's seed.
#[derive(Clone, Copy, Debug)]
pub struct KeyState {
    seed: u64,
}

impl Default for KeyState {
    fn default() -> KeyState {
        static SEED: OnceLock<u64> = OnceLock::new();
        KeyState {
            seed: *SEED.get_or_init(|| RandomState::new().hash_one(0x5eed_u64)),
        }
    }
}

impl BuildHasher for KeyState {
    type Hasher = KeyHasher;

    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.seed)
    }
}

/// Each write is hashed whole by xxh3, seeded with the state so far: a
/// `Vec<u8>` key (its length, then its bytes) costs one xxh3 call.
#[derive(Clone, Copy, Debug)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }

    /// A length prefix: folded into the seed of the bytes that follow
    /// (which xxh3 then mixes), not hashed on its own.
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = self.0.rotate_left(29) ^ n as u64;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(state: &KeyState, key: &[u8]) -> u64 {
        state.hash_one(key)
    }

    #[test]
    fn equal_keys_hash_equal_and_different_ones_apart() {
        let state = KeyState::default();
        assert_eq!(hash(&state, b"abc"), hash(&state, b"abc"));
        let keys: Vec<Vec<u8>> = (0u32..10_000).map(|i| i.to_le_bytes().to_vec()).collect();
        let hashes: HashSet<u64> = keys.iter().map(|k| hash(&state, k)).collect();
        assert_eq!(hashes.len(), keys.len(), "no collision among 10,000 keys");
        // The length counts: a key and its prefix padded differ.
        assert_ne!(hash(&state, b"a"), hash(&state, b"a\0"));
        assert_ne!(hash(&state, b""), hash(&state, b"\0"));
    }

    #[test]
    fn low_bits_spread_for_keys_that_differ_in_one_byte() {
        // hashbrown takes buckets from the low bits: 256 keys that differ
        // in their last byte fill most of 256 buckets.
        let state = KeyState::default();
        let buckets: HashSet<u64> = (0u8..=255)
            .map(|b| hash(&state, &[7, 7, 7, b]) & 0xff)
            .collect();
        assert!(buckets.len() > 140, "{} of 256 buckets", buckets.len());
    }

    #[test]
    fn a_key_map_finds_what_it_holds() {
        let mut map: KeyMap<Vec<u8>, usize> = KeyMap::default();
        for i in 0..1000usize {
            map.insert(i.to_string().into_bytes(), i);
        }
        assert_eq!(map.get(b"417".as_slice()), Some(&417));
        assert_eq!(map.get(b"1000".as_slice()), None);
    }
}
