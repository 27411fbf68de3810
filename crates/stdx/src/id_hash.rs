//! The one hasher for maps keyed by ids that the hot paths look up for
//! every operation: transaction ids, table ids, scan ids, request keys
//! (TC, LDM, client sessions) and row ids (row locks, pending changes of a
//! fragment). SipHash, std's default, cost a visible share of every key
//! operation.
//!
//! It is not keyed: ids are made by the nodes of the cluster, not chosen by
//! its users, so collisions are not an attack surface here. It must still
//! spread ids whose entropy sits in the high bits (a transaction id has its
//! node in the top byte; a row id its page above the slot), because
//! hashbrown takes buckets from the low bits of a hash and tags from the
//! high ones.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by ids: [`IdHasher`] instead of SipHash.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A set of ids; see [`IdMap`].
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Each word is xored into the state and multiplied, 64 × 64 → 128 bits,
/// by an odd constant; the two halves of the product are folded into the
/// new state. Every input bit reaches every output bit in one step, so one
/// word (the common key) costs one multiply and the finish is free.
#[derive(Clone, Copy, Default)]
pub struct IdHasher(u64);

impl IdHasher {
    /// 2^64 / φ, odd: the multiplier of Fibonacci hashing.
    const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

    #[inline]
    fn mix(&mut self, word: u64) {
        let product = u128::from(self.0 ^ word) * u128::from(Self::MULTIPLIER);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::IdHasher;

    fn buckets(ids: impl Iterator<Item = u64>, mask: u64) -> usize {
        let build = BuildHasherDefault::<IdHasher>::default();
        ids.map(|id| build.hash_one(id) & mask)
            .collect::<HashSet<u64>>()
            .len()
    }

    /// Buckets come from the low bits of the hash: transaction ids (node in
    /// the high byte, a counter below) and ids differing in their high bits
    /// only must both spread over them. Random hashes fill about 63 % of
    /// 1024 buckets with 1024 keys.
    #[test]
    fn ids_spread_over_the_low_bits() {
        let counters = buckets((0..1024u64).map(|c| (3u64 << 56) | c), 1023);
        let high = buckets((0..1024u64).map(|n| n << 40), 1023);
        assert!(counters > 600, "{counters} of 1024 buckets");
        assert!(high > 600, "{high} of 1024 buckets");
    }

    /// Row ids keep the page above a 16-bit slot: ids that differ only in
    /// their page must not share bucket bits.
    #[test]
    fn row_ids_spread_page_bits_into_the_low_bits() {
        let distinct = buckets((0..1024u64).map(|page| page << 16), 0xFFF);
        assert!(distinct > 900, "only {distinct} distinct buckets of 1024");
    }

    /// The words of a compound key are not interchangeable.
    #[test]
    fn the_order_of_words_matters() {
        let build = BuildHasherDefault::<IdHasher>::default();
        assert_ne!(build.hash_one((1u64, 2u32)), build.hash_one((2u64, 1u32)));
        assert_ne!(build.hash_one((0u64, 1u64)), build.hash_one((1u64, 0u64)));
    }
}
