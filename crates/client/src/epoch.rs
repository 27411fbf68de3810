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
//!
//! An epoch also names the cluster *incarnation* its commit reply came
//! from: a system restart goes back to the restart GCI R and hands out the
//! numbers above R again, so `(hi, lo)` alone does not tell a commit the
//! restart lost from a later one with the same numbers.
//! [`crate::Session::wait_durable`] sends it back, and the TC answers a
//! wait of an earlier incarnation "durable" only when its GCI is at most
//! R (else error 9006, lost). An epoch made of bare numbers
//! ([`Epoch::new`], [`Epoch::from_u64`]) names none (0) and is waited for
//! as the current incarnation's.

use std::fmt;

/// A commit's epoch: `(hi << 32) | lo`, and the cluster incarnation it
/// belongs to (0: not known).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(u64, u32);

impl Epoch {
    /// The epoch `(hi, lo)`, of no named incarnation.
    pub const fn new(hi: u32, lo: u32) -> Epoch {
        Epoch(signal::epoch::make(hi, lo), 0)
    }

    /// The epoch of its 64-bit form, of no named incarnation.
    pub const fn from_u64(epoch: u64) -> Epoch {
        Epoch(epoch, 0)
    }

    /// This epoch of cluster incarnation `incarnation`.
    pub const fn in_incarnation(self, incarnation: u32) -> Epoch {
        Epoch(self.0, incarnation)
    }

    /// Its 64-bit form.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The cluster incarnation its commit reply named (0: none).
    pub const fn incarnation(self) -> u32 {
        self.1
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
