//! The change stream's capture (docs/events.md): the LDM's side of
//! the subscription block ([`crate::subscription`]).
//!
//! The subscription block tells each LDM instance of its node which tables
//! to capture (`SubCaptureReq`, the whole set). The instance marks their
//! fragments here; every commit then leaves one `signal::sub_change` entry
//! per changed row in the storage instance, with both images, and the
//! block hands them to the subscription block as `SubTableData` tagged
//! with the commit's epoch, right after the fragment's commit. The
//! master's epoch-complete marks (`SubGcpCompleteRep`) reach every LDM
//! instance and go on to the subscription block the same way: one queue
//! from this thread to that one, so an epoch's mark from an instance comes
//! after every change of the epoch it captured (NDB's LQH → SUMA path).
//!
//! With no table captured a commit costs one test of an empty list here
//! and one test per fragment in storage: no lock, no allocation.

use kernel::Context;
use signal::{sub_change, BlockRef, SignalBody};
use storage::instance::LdmInstance;

/// What an LDM instance captures, and for whom.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    /// The node's subscription block; `None` when the node runs none (a
    /// test's node): nothing is captured nor passed on.
    pub to: Option<BlockRef>,
    /// Table ids captured, ascending.
    pub tables: Vec<u32>,
    /// The highest epoch of a commit run on this instance: an epoch above
    /// what this was when capture started is captured whole here.
    pub max_epoch: u64,
}

impl Capture {
    /// Whether any table is captured.
    #[inline]
    pub fn on(&self) -> bool {
        !self.tables.is_empty()
    }

    /// Marks the fragments of `instance` as the captured tables ask. Every
    /// replica captures; which node sends a partition's changes is decided
    /// by the subscription block when an epoch is sent (its buckets).
    pub fn apply(&self, instance: &mut LdmInstance) {
        let fragments: Vec<(u32, u32)> = instance.fragment_ids().collect();
        for (t, p) in fragments {
            let flags = self.tables.binary_search(&t).is_ok().then_some(0);
            instance.set_capture(t, p, flags);
        }
    }

    /// Hands the subscription block a schema entry: table `table`, which
    /// this instance captures, was altered (`sub_change::ALTER`, its new
    /// `version`) or dropped (`sub_change::DROP`, its last) here. Sent
    /// after every change this instance captured under the old definition
    /// (an alter is applied once no transaction is on the table) and
    /// before any under the new, on the same queue; the block files it in
    /// an epoch once every instance of the node sent it (docs/events.md).
    /// `def`: an alter's new definition (`schema::TableDef::encode`), in
    /// the after image.
    pub fn schema_entry(
        &self,
        kind: u8,
        table: u32,
        version: u32,
        def: &[u8],
        ctx: &mut Context<'_>,
    ) {
        let Some(to) = self.to else {
            return;
        };
        if self.tables.binary_search(&table).is_err() {
            return;
        }
        let mut changes = Vec::new();
        sub_change::push(
            &mut changes,
            &sub_change::Entry {
                kind,
                flags: 0,
                table,
                version,
                partition: sub_change::ALL_PARTITIONS,
                before: &[],
                after: def,
            },
        );
        ctx.send(
            to,
            SignalBody::SubTableData {
                epoch: sub_change::SCHEMA_EPOCH,
                count: 1,
                changes,
            },
        );
    }

    /// Hands what `instance` captured (one fragment's commit) to the
    /// subscription block, as changes of `epoch`.
    pub fn hand_over(&self, instance: &mut LdmInstance, epoch: u64, ctx: &mut Context<'_>) {
        let Some(to) = self.to else {
            return;
        };
        let mut changes = Vec::new();
        let count = instance.take_captured(&mut changes);
        if count > 0 {
            ctx.send(
                to,
                SignalBody::SubTableData {
                    epoch,
                    count,
                    changes,
                },
            );
        }
    }
}
