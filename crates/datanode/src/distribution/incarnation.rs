//! Cluster incarnations: what makes a GCI from before a system restart
//! distinguishable from the same number after it (docs/transactions.md,
//! "Global checkpoints").
//!
//! Why: a system restart restores the cluster to the restart GCI R and
//! then hands out GCIs again above the highest any redo log holds. A GCI
//! that was handed out but never reached a disk (commits acknowledged in
//! memory, then every node killed) is handed out again: its number alone
//! cannot say whether a commit in it survived. Each start of the cluster
//! from all nodes down (and its very first start) therefore gets a random
//! id, the *incarnation*; the commit reply names it, `TcWaitGciReq` carries
//! it back, and the TC judges a wait of an earlier incarnation against the
//! restart that ended it ([`Incarnation::judge`]).
//!
//! A random id rather than a counter: a counter would have to be on every
//! member's disk before the first commit of the incarnation (else a
//! restart that completes no GCP is followed by one that reuses its
//! number). The sysfile keeps, with the kept GCI, the id of the incarnation
//! that completed it (written by every GCP's keep step); a system restart
//! takes it as `previous`. An incarnation that completed no GCP is named
//! nowhere: its GCIs are all above the restart GCI, and lost.

/// The cluster incarnation a TC commits in, and the system restart that
/// began it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Incarnation {
    /// This incarnation's id; 0: not known yet (no `GcpCommitReq`).
    pub id: u32,
    /// The incarnation that completed `restart_gci` (0: none, a first
    /// start or a restart of a cluster that never completed a GCI).
    pub previous: u32,
    /// The GCI the system restart that began this incarnation restored
    /// (0 for a first start).
    pub restart_gci: u32,
}

/// How a TC answers `TcWaitGciReq { gci, incarnation }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// The current incarnation (or a client that named none): wait for
    /// `gci` as numbers compare.
    Current,
    /// An earlier incarnation's GCI at or below the restart GCI: restored,
    /// durable.
    Restored,
    /// An earlier incarnation's GCI above the restart GCI: lost.
    Lost,
    /// An incarnation older than the one the restart restored, at or below
    /// the restart GCI: this TC cannot tell whether an intermediate restart
    /// lost it.
    Unknown,
    /// This TC has no incarnation yet (it has not committed anything).
    NotStarted,
}

impl Incarnation {
    /// A fresh id from `random`: nonzero and unlike `previous`.
    pub fn fresh_id(previous: u32, mut random: impl FnMut() -> u64) -> u32 {
        // Bounded: two draws that collide with 0 or `previous` in a row
        // are 2^-31 apart; a third is beyond belief, but bounded anyway.
        for _ in 0..8 {
            let id = random() as u32;
            if id != 0 && id != previous {
                return id;
            }
        }
        previous.wrapping_add(1).max(1)
    }

    /// Judges a wait for `gci` of `incarnation` (0: the client names
    /// none, the numbers of the current incarnation).
    pub fn judge(&self, incarnation: u32, gci: u32) -> Judgement {
        if incarnation == 0 || incarnation == self.id {
            return Judgement::Current;
        }
        if self.id == 0 {
            return Judgement::NotStarted;
        }
        if gci > self.restart_gci {
            // Whatever earlier incarnation it was, the restart that ended
            // it restored at most `restart_gci` (restart GCIs never go
            // down), so `gci` was not restored by it — nor is it this
            // incarnation's, whose id differs.
            return Judgement::Lost;
        }
        if incarnation == self.previous {
            Judgement::Restored
        } else {
            Judgement::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_of_an_earlier_incarnation_is_durable_only_at_or_below_the_restart_gci() {
        let now = Incarnation {
            id: 77,
            previous: 55,
            restart_gci: 10,
        };
        assert_eq!(now.judge(77, 12), Judgement::Current);
        assert_eq!(now.judge(0, 12), Judgement::Current);
        assert_eq!(now.judge(55, 10), Judgement::Restored);
        assert_eq!(now.judge(55, 3), Judgement::Restored);
        assert_eq!(now.judge(55, 11), Judgement::Lost);
        // An incarnation that completed nothing (named nowhere): above R.
        assert_eq!(now.judge(66, 11), Judgement::Lost);
        assert_eq!(now.judge(33, 10), Judgement::Unknown);
        let unknown = Incarnation::default();
        assert_eq!(unknown.judge(55, 1), Judgement::NotStarted);
        assert_eq!(unknown.judge(0, 1), Judgement::Current);
    }

    #[test]
    fn a_fresh_id_is_nonzero_and_new() {
        let mut draws = [0u64, 9, 10].into_iter();
        assert_eq!(Incarnation::fresh_id(9, || draws.next().unwrap()), 10);
        assert_eq!(Incarnation::fresh_id(0, || 0), 1);
    }
}
