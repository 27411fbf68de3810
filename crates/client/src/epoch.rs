//! A commit's epoch, as the commit reply carries it (docs/transactions.md,
//! "Global checkpoints"): why a type of its own — the 64 bits hold two
//! numbers that mean different things, and only one of them is what
//! durability waits for.
//!
//! `hi` is the global checkpoint (GCI) the commit belongs to: the unit of
//! durability, what [`crate::Session::wait_durable`] waits for and what a
//! system restart restores to. `lo` counts the micro-GCPs the cluster runs
//! inside a global checkpoint every `TimeBetweenEpochs` (0 when that is 0).
//! Epochs order commits: one that read or overwrote another's row has an
//! epoch at least that one's.

use std::fmt;

/// A commit's epoch: `(hi << 32) | lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(u64);

impl Epoch {
    /// The epoch `(hi, lo)`.
    pub const fn new(hi: u32, lo: u32) -> Epoch {
        Epoch(signal::epoch::make(hi, lo))
    }

    /// The epoch of its 64-bit form.
    pub const fn from_u64(epoch: u64) -> Epoch {
        Epoch(epoch)
    }

    /// Its 64-bit form.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Its global checkpoint (GCI): the unit of durability.
    pub const fn hi(self) -> u32 {
        signal::epoch::hi(self.0)
    }

    /// Its micro-GCP within the global checkpoint.
    pub const fn lo(self) -> u32 {
        signal::epoch::lo(self.0)
    }
}

impl From<Epoch> for u64 {
    fn from(epoch: Epoch) -> u64 {
        epoch.0
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.hi(), self.lo())
    }
}
