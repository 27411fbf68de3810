//! A fast hasher for the ids the hot paths look up in maps: transaction
//! ids, table ids, scan ids, request keys. Shared by the data node (TC,
//! LDM) and the client's sessions.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by ids (transaction ids, table ids, request keys) looked up
/// for every operation: [`IdHasher`] instead of SipHash.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A set of ids; see [`IdMap`].
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// A multiply-and-fold hasher for integer ids (FxHash's step, its high
/// bits folded down since hashbrown takes the bucket from the low bits).
/// It is not keyed: ids come from API nodes and data nodes of the cluster,
/// not from its users, so collisions are not an attack surface here, and
/// SipHash cost a visible share of every key operation.
#[derive(Clone, Copy, Default)]
pub struct IdHasher(u64);

impl IdHasher {
    const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::MULTIPLIER);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The product's high bits depend on every input bit, its low bits
        // only on the input's low bits: shift the high ones down onto them
        // (keeping the top bits, from which hashbrown takes its tags).
        self.0 ^ (self.0 >> 20) ^ (self.0 >> 40)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::IdHasher;

    /// Buckets come from the low bits of the hash: transaction ids (node in
    /// the high byte, a counter below) and ids differing in their high bits
    /// only must both spread over them.
    #[test]
    fn ids_spread_over_the_low_bits() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let buckets = |ids: &mut dyn Iterator<Item = u64>| {
            let mut seen: Vec<u64> = ids.map(|id| build.hash_one(id) & 1023).collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        };
        let counters = buckets(&mut (0..1024u64).map(|c| (3u64 << 56) | c));
        let high = buckets(&mut (0..1024u64).map(|n| n << 40));
        // Random hashes fill about 63 % of 1024 buckets with 1024 keys.
        assert!(counters > 600, "{counters} of 1024 buckets");
        assert!(high > 600, "{high} of 1024 buckets");
        assert_ne!(build.hash_one((1u64, 2u32)), build.hash_one((2u64, 1u32)));
    }
}
