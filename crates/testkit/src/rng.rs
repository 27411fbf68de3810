//! A small deterministic generator for tests that draw many random
//! choices from a seed they print: the same seed gives the same run.

/// xorshift64*: fast, and good enough for workloads and mutations (not
/// for anything that needs real randomness).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is made 1: xorshift never leaves 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index into something of `len` elements (0 when it is empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}
