//! A bounded memory of recently aborted transaction ids. Each block that
//! needs one keeps its own (no block reaches into another's state):
//!
//! - The LDM: a write reaches a backup replica by way of the primary's LDM
//!   (`LdmKeyReq` forwarded along the chain), while the TC's `LdmAbortReq`
//!   reaches the backup directly. The abort can overtake the forwarded
//!   request; executed after the abort, that request would take locks that
//!   no commit or abort ever releases. Transaction ids are never reused, so
//!   a request for a transaction this instance already aborted is late and
//!   must be dropped.
//! - The TC: transactions aborted by a node failure while no request of
//!   theirs was at the TC; their next request is told so.
//!
//! The memory is bounded ([`ABORTED_REMEMBERED_MAX`]): a request later than
//! that many aborts is not expected — a forwarded request is one hop
//! behind the abort.

use std::collections::VecDeque;

use stdx::IdSet;

/// Aborted transaction ids an instance remembers.
pub const ABORTED_REMEMBERED_MAX: usize = 8192;

#[derive(Debug, Default)]
pub(crate) struct RecentlyAborted {
    order: VecDeque<u64>,
    ids: IdSet<u64>,
}

impl RecentlyAborted {
    pub(crate) fn remember(&mut self, tx_id: u64) {
        if !self.ids.insert(tx_id) {
            return;
        }
        self.order.push_back(tx_id);
        if self.order.len() > ABORTED_REMEMBERED_MAX {
            let oldest = self.order.pop_front().expect("over the limit: not empty");
            self.ids.remove(&oldest);
        }
        debug_assert_eq!(self.order.len(), self.ids.len());
    }

    pub(crate) fn contains(&self, tx_id: u64) -> bool {
        self.ids.contains(&tx_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_newest_aborts_only() {
        let mut aborted = RecentlyAborted::default();
        for id in 0..(ABORTED_REMEMBERED_MAX as u64 + 10) {
            aborted.remember(id);
            aborted.remember(id);
        }
        assert!(!aborted.contains(9));
        assert!(aborted.contains(10));
        assert!(aborted.contains(ABORTED_REMEMBERED_MAX as u64 + 9));
        assert_eq!(aborted.order.len(), ABORTED_REMEMBERED_MAX);
    }
}
