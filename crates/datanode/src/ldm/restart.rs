//! The LDM's part in a system restart (docs/recovery.md, "System restart";
//! NDB: DBLQH's restore to the restart GCI and log invalidation).
//!
//! An instance opens (at schema load) to the newest GCI its redo log holds,
//! before the cluster has agreed on the restart GCI. When the master names
//! it (`RestartGciReq { gci }`) and this instance holds a newer complete
//! GCI, it opens again with `restore_gci = gci`: the storage voids,
//! durably, what the log holds above `gci` before anything new is written.
//! Nothing has run on the instance yet (no GCI was handed out), so
//! reopening loses no work. An instance whose log does not reach `gci`
//! answers that it cannot, and its node starts empty and copies.
//!
//! Also here: `GcpCompleteRep` from this node's distribution block, which
//! says the node's sysfile keeps a GCI: local checkpoints may complete (and
//! the redo log be trimmed) up to it and no further
//! ([`LdmInstance::set_kept_gci`]), so that a restore to any GCI at or above
//! the kept one finds its LCP and redo.

use kernel::Context;
use schema::TableDef;
use signal::{BlockRef, SignalBody};
use storage::disk::Disk;
use storage::instance::LdmInstance;

use super::{LdmBlock, LCP_STEP_DELAY};

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// The node's sysfile keeps `gci` complete.
    pub(super) fn on_gci_kept(&mut self, gci: u32, ctx: &mut Context<'_>) {
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        instance.set_kept_gci(gci);
        if instance.lcp_running() {
            self.arm_lcp_step(ctx, LCP_STEP_DELAY);
        }
    }

    /// `RestartGciReq`: restore exactly to `gci`, or say it cannot be done.
    pub(super) fn on_restart_gci(&mut self, master: BlockRef, gci: u32, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        if self.instance.is_none() {
            // Answered once the instance is open (one master asks).
            self.restart_gci_waiter = Some((master, gci));
            return;
        }
        let restored = self.restore_to(gci, ctx);
        if self.failed {
            return;
        }
        ctx.send(master, SignalBody::RestartGciConf { gci, restored });
    }

    /// Called once the instance is open: answers a `RestartGciReq` that
    /// came before.
    pub(super) fn after_open_restart_gci(&mut self, ctx: &mut Context<'_>) {
        if let Some((master, gci)) = self.restart_gci_waiter.take() {
            self.on_restart_gci(master, gci, ctx);
        }
    }

    fn restore_to(&mut self, gci: u32, ctx: &mut Context<'_>) -> bool {
        let instance = self.instance.as_ref().expect("open");
        let durable = instance.durable_gci().unwrap_or(0);
        if durable == gci {
            return true;
        }
        if durable < gci {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: restart GCI {gci} is above the GCI {durable} this redo log part holds",
                self.config.instance
            );
            return false;
        }
        assert!(
            self.txs.is_empty(),
            "node {} LDM instance {}: transactions before the system restart chose its GCI",
            self.config.node,
            self.config.instance
        );
        let fragments: Vec<(TableDef, u32)> = self
            .fragments_of(&self.schema)
            .iter()
            .map(|&(t, p)| (self.schema.tables[&t].clone(), p))
            .collect();
        // No GCI was handed out yet, so no GcpSaveReq came.
        assert!(
            self.redo_flush.is_none(),
            "node {} LDM instance {}: a redo flush before the system restart chose its GCI",
            self.config.node,
            self.config.instance
        );
        // A checkpoint begun since the open (a redo log part half full) is
        // dropped with the instance; a sync of it still running finishes
        // only LCPs of fragments with nothing committed (the kept GCI is 0
        // until the restart, so no other LCP may complete), and its FsConf
        // finds no sync in flight.
        self.lcp_sync = None;
        // Reopening reads and voids files: nothing is served yet.
        let _restore =
            storage::disk::allow_sync("restore to the restart GCI: nothing is served yet");
        // The open instance holds the redo log part's files: close it first.
        self.instance = None;
        let config = self.config.ldm.clone();
        match LdmInstance::open(self.disk.clone(), config.clone(), &fragments, Some(gci)) {
            Ok((mut instance, report)) => {
                tracing::info!(node = %self.config.node, "system restart: {report}");
                instance.set_kept_gci(0);
                let exact = report.recovered_gci == Some(gci);
                self.instance = Some(instance);
                exact
            }
            Err(error) => {
                tracing::warn!(
                    node = %self.config.node,
                    "LDM instance {}: cannot restore to the restart GCI {gci}: {error}; the node starts empty",
                    self.config.instance
                );
                match LdmInstance::open(self.disk.clone(), config, &fragments, None) {
                    Ok((mut instance, _)) => {
                        instance.set_kept_gci(0);
                        self.instance = Some(instance);
                    }
                    Err(error) => {
                        let reason = format!(
                            "LDM instance {} of node {} cannot open again after a failed restore to GCI {gci}: \
                             {error}; stopping the node",
                            self.config.instance, self.config.node
                        );
                        self.fail(ctx, false, reason);
                    }
                }
                false
            }
        }
    }
}
