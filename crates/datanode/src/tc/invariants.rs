//! The TC's own consistency check ([`TcBlock::check_invariants`]), run by
//! the simulator after every signal in debug builds. Each record the TC
//! keeps is counted in more than one place (the pool, the id maps, the
//! operation records, the commits in progress per epoch, the GCI queue);
//! a path that updates one of them and forgets another leaks or double
//! frees only much later, so the check compares them all after each step,
//! where the signal that broke them is still the one being run.
//!
//! Cost: O(transactions and scans in use, and their ops and participants).

use super::transaction::TxState;
use super::{TcBlock, GCI_WAITERS_MAX};

impl TcBlock {
    /// Panics, naming the transaction or count at fault, when the TC's
    /// records disagree with each other (see the module doc).
    pub(crate) fn check_tc_invariants(&self) {
        self.transactions.check_invariants("transaction");
        self.scans.check_invariants("scan");
        self.check_transactions();
        self.check_scans();
        self.check_gcp();
    }

    /// Pool against the id map, operation records, and each transaction's
    /// state against its counts.
    fn check_transactions(&self) {
        let me = self.me;
        assert_eq!(
            self.transactions.in_use(),
            self.by_tx_id.len(),
            "{me}: transaction records in use against transaction ids known"
        );
        let mut op_records = 0u32;
        let mut scans = 0u32;
        let mut waiting_for_gci = 0usize;
        // (epoch, commits in progress) of the transactions, for `commits_in_progress`.
        let mut in_progress: Vec<u64> = Vec::new();
        for (&tx_id, &slot) in &self.by_tx_id {
            let tx = self.transactions.get(slot);
            assert_eq!(
                tx.tx_id, tx_id,
                "{me}: transaction {tx_id:#x} maps to slot {slot}, which holds {:#x}",
                tx.tx_id
            );
            op_records += tx.op_records();
            scans += tx.scans;
            tx.check_state(me);
            if tx.state == TxState::WaitingForGci {
                waiting_for_gci += 1;
            }
            if tx.commit_counted() {
                in_progress.push(tx.epoch());
            }
        }
        assert_eq!(
            op_records, self.operations_used,
            "{me}: operation records held by transactions against the count in use"
        );
        assert!(
            self.operations_used <= self.config.operations_max,
            "{me}: {} operation records in use, above MaxNoOfConcurrentOperations {}",
            self.operations_used,
            self.config.operations_max
        );
        assert_eq!(
            scans as usize,
            self.scans.in_use(),
            "{me}: scans counted by their transactions against scan records in use"
        );
        assert_eq!(
            waiting_for_gci,
            self.waiting_for_gci.len(),
            "{me}: transactions in WaitingForGci against the GCI queue"
        );
        for &slot in &self.waiting_for_gci {
            let state = self.transactions.get(slot).state;
            assert_eq!(
                state,
                TxState::WaitingForGci,
                "{me}: slot {slot} queued for a GCI in state {state:?}"
            );
        }
        in_progress.sort_unstable();
        let counted = self.commits_in_progress.counts();
        let mut expected: Vec<(u64, u32)> = Vec::new();
        for epoch in in_progress {
            match expected.last_mut() {
                Some((e, n)) if *e == epoch => *n += 1,
                _ => expected.push((epoch, 1)),
            }
        }
        assert_eq!(
            counted, expected,
            "{me}: commits in progress per epoch against the committing transactions"
        );
    }

    /// Scan records against their two id maps and their transactions.
    fn check_scans(&self) {
        let me = self.me;
        assert_eq!(
            self.scan_by_ldm_id.len(),
            self.scans.in_use(),
            "{me}: scans by LDM scan id against scan records in use"
        );
        assert_eq!(
            self.scan_by_api.len(),
            self.scans.in_use(),
            "{me}: scans by client scan id against scan records in use"
        );
        for (&(tx_id, api_scan_id), &slot) in &self.scan_by_api {
            let scan = self.scans.get(slot);
            assert!(
                scan.tx_id == tx_id && scan.api_scan_id() == api_scan_id,
                "{me}: scan ({tx_id:#x}, {api_scan_id}) maps to slot {slot}, which holds another"
            );
            assert_eq!(
                self.by_tx_id
                    .get(&tx_id)
                    .map(|&tx| self.transactions.get(tx).tx_id),
                Some(tx_id),
                "{me}: scan {api_scan_id} open for transaction {tx_id:#x}, which has ended"
            );
            assert_eq!(
                self.scan_by_ldm_id.get(&scan.ldm_scan_id()),
                Some(&slot),
                "{me}: scan {api_scan_id} of {tx_id:#x} not found by its LDM scan id"
            );
        }
    }

    /// The global checkpoint state: the epoch against the GCI, the hold,
    /// the pending answer and the epochs reported complete.
    fn check_gcp(&self) {
        let me = self.me;
        assert_eq!(
            self.gci,
            signal::epoch::hi(self.epoch),
            "{me}: the GCI is the hi of the epoch {:#x}",
            self.epoch
        );
        if let Some(held) = self.gci_held {
            assert!(
                held > self.epoch,
                "{me}: commits held for epoch {held:#x}, not above the current {:#x}",
                self.epoch
            );
        }
        if !self.waiting_for_gci.is_empty() {
            assert!(
                self.gci == 0 || self.gci_held.is_some(),
                "{me}: {} commits wait for a GCI with GCI {} handed out and none held",
                self.waiting_for_gci.len(),
                self.gci
            );
        }
        if let Some((epoch, _)) = self.commit_pending {
            assert!(
                self.commits_in_progress.any_below(epoch),
                "{me}: GcpCommitReq of epoch {epoch:#x} unanswered with no older commit in progress"
            );
        }
        assert!(
            !self.commits_in_progress.any_up_to(self.complete_epoch),
            "{me}: a commit in progress in epoch {:#x} or below, reported complete",
            self.complete_epoch
        );
        assert!(
            self.gci_waiters.len() <= GCI_WAITERS_MAX,
            "{me}: {} TcWaitGciReq waiting, above {GCI_WAITERS_MAX}",
            self.gci_waiters.len()
        );
        for &(api, gci, _) in &self.gci_waiters {
            assert!(
                gci > self.durable_gci,
                "{me}: {api} waits for GCI {gci}, durable already ({})",
                self.durable_gci
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use config::Placement;
    use signal::NodeId;

    use super::super::{TcBlock, TcConfig};

    fn tc() -> TcBlock {
        let node = NodeId::new(2).expect("a node id");
        TcBlock::new(TcConfig {
            node,
            instance: 0,
            placement: Placement::new(vec![vec![node]], 1),
            tc_instances: 1,
            transactions_max: 4,
            operations_max: 16,
            scans_max: 2,
            deadlock_timeout: Duration::from_millis(100),
        })
    }

    #[test]
    fn a_fresh_tc_is_consistent() {
        tc().check_tc_invariants();
    }

    #[test]
    #[should_panic(expected = "operation records held by transactions against the count in use")]
    fn a_leaked_operation_record_is_caught() {
        let mut tc = tc();
        tc.operations_used += 1;
        tc.check_tc_invariants();
    }

    #[test]
    #[should_panic(expected = "transaction records in use against transaction ids known")]
    fn a_leaked_transaction_record_is_caught() {
        let mut tc = tc();
        tc.transactions.allocate().expect("a free record");
        tc.check_tc_invariants();
    }

    #[test]
    #[should_panic(expected = "the GCI is the hi of the epoch")]
    fn an_epoch_apart_from_its_gci_is_caught() {
        let mut tc = tc();
        tc.epoch = signal::epoch::make(3, 1);
        tc.gci = 2;
        tc.check_tc_invariants();
    }
}
