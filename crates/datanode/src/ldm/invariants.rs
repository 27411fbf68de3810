//! The LDM block's own consistency check ([`LdmBlock::check_ldm_invariants`]),
//! run by the simulator after every signal in debug builds: the request
//! and scan records against their counts and maps, each transaction's
//! request queue against the records, the transactions of each fragment
//! against the block's transaction records (a commit or abort reaches a
//! fragment only through them: a fragment transaction without one holds
//! its locks for ever), and every so often the storage's own checks of
//! every fragment.
//!
//! Cost: O(requests, transactions and fragments) per step; the storage
//! walk, O(rows), every [`FULL_CHECK_EVERY`] steps of the block.

use storage::disk::Disk;

use super::{LdmBlock, LDM_SCANS_MAX, LDM_TRANSACTIONS_MAX};

/// Steps of one block between two walks of every row of its fragments.
const FULL_CHECK_EVERY: u32 = 64;

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// Panics, naming the record or count at fault, when the block's
    /// records disagree with each other (see the module doc).
    pub(super) fn check_ldm_invariants(&self) {
        let me = self.me;
        self.requests.check_invariants(me);
        self.scans.check_invariants(me);
        assert!(
            self.txs.len() <= LDM_TRANSACTIONS_MAX && self.scans.len() <= LDM_SCANS_MAX,
            "{me}: {} transactions and {} scans, above {LDM_TRANSACTIONS_MAX} and {LDM_SCANS_MAX}",
            self.txs.len(),
            self.scans.len()
        );
        let mut queued = 0usize;
        for (&tx_id, record) in &self.txs {
            assert!(
                record.tc.is_some(),
                "{me}: transaction {tx_id:#x} has a record without its TC"
            );
            assert!(
                !record.fragments.is_empty()
                    || !record.queue.is_empty()
                    || self.scans.has_tx(tx_id),
                "{me}: transaction {tx_id:#x} keeps a record with nothing here (leaked)"
            );
            for (position, &slot) in record.queue.iter().enumerate() {
                self.requests.check_queued(me, tx_id, slot, position == 0);
            }
            queued += record.queue.len();
        }
        assert_eq!(
            queued,
            self.requests.len(),
            "{me}: requests queued by transactions against request records in use"
        );
        let Some(instance) = &self.instance else {
            assert!(
                self.txs.is_empty() && self.requests.len() == 0,
                "{me}: transactions before the instance is open"
            );
            return;
        };
        let checks = self.checks.get().wrapping_add(1);
        self.checks.set(checks);
        let full = checks.is_multiple_of(FULL_CHECK_EVERY);
        for (table_id, fragment_id) in instance.fragment_ids() {
            let (fragment, pool) = instance
                .fragment_with_pool(table_id, fragment_id)
                .expect("a fragment id names a fragment");
            for tx in fragment.transaction_ids() {
                assert!(
                    self.txs.contains_key(&tx.0) || self.restart_owns(tx.0),
                    "{me}: transaction {:#x} has rows in fragment {table_id}/{fragment_id} \
                     but no record here: its commit or abort never reaches them",
                    tx.0
                );
            }
            if full {
                fragment.check_invariants(pool);
            }
        }
    }

    /// Whether `tx_id` is a copy from here to a starting node (node
    /// restart): it locks the rows it sends under its own id, outside the
    /// transaction records.
    fn restart_owns(&self, tx_id: u64) -> bool {
        self.copy_slot_of(tx_id).is_some()
    }
}
