//! Graceful stop (`skarv admin stop N` / `restart N`, a rolling restart):
//! the node leaves only once its TCs have ended their transactions.
//!
//! Why: a node that simply exits takes its TCs' transactions with it. Those
//! still executing are aborted by the survivors (286, temporary), but a
//! client whose commit was in flight gets 4010, an unknown result, which a
//! rolling restart must not cause. So membership first sends each local TC
//! `TcShutdownReq`: from then on the TC starts no new transaction (280,
//! temporary: the client retries on another node) and lets the ones it has
//! finish; when none is left it answers `TcShutdownConf`, and membership
//! leaves the cluster. Membership waits at most `STOP_DRAIN_MAX` (an idle
//! client transaction must not hold a stop forever); what is left then ends
//! as at a node failure. The TC checks on a timer, not on every
//! transaction's end, to keep the hot path as it is.
//!
//! Drained, the TC answers only once the GCI its commits are in (the
//! current one when it drained: every commit of this TC is in a GCI up to
//! it) is durable cluster-wide, and hurries that GCI's GCP (`GcpHurryReq` to its node's
//! distribution block, as a filling redo log does). Why: a commit is
//! durable once its GCI is; a stop of the whole cluster (`skarv admin
//! shutdown`, `skarv sandbox --stop`) would otherwise lose the commits of
//! the last `TimeBetweenGlobalCheckpoints`, since the restart restores the
//! GCIs every node completed. Invariant: a TC answers `TcShutdownConf` only
//! with no transaction left and `durable_gci` at least the GCI of its last
//! commit. Bounded like the drain (`STOP_DRAIN_MAX`).
//!
//! The GCI waited for is fixed when the TC drains, not read again at each
//! check: the hurried GCP opens the next GCI at once, so a target taken
//! from the current epoch moves up with every GCP it completes and is
//! never reached (every stop ran into `STOP_DRAIN_MAX`, ~370 fsyncing GCPs
//! a second meanwhile).

use std::time::Duration;

use kernel::Context;
use proto::error;
use signal::{epoch, BlockNumber, BlockRef, SignalBody};

use super::TcBlock;

/// The TC timer that checks whether a stopping TC has drained.
pub(super) const TIMER_SHUTDOWN: u32 = 3;
/// How often a stopping TC looks for its last transaction to end.
const SHUTDOWN_POLL: Duration = Duration::from_millis(2);

/// A stop in progress: who to tell when drained.
#[derive(Debug, Default)]
pub(crate) struct Shutdown {
    membership: Option<BlockRef>,
    answered: bool,
    /// The GCI this TC waits to be durable, fixed when it drained (the
    /// open GCI then: no commit of this TC is in a later one).
    needed: Option<u32>,
}

impl TcBlock {
    pub(crate) fn on_shutdown_req(&mut self, from: BlockRef, ctx: &mut Context<'_>) {
        if self.shutdown.membership.is_none() {
            tracing::info!(
                tc = %self.me,
                "stopping: no new transaction; {} still running",
                self.transactions.in_use()
            );
        }
        self.shutdown.membership = Some(from);
        self.check_shutdown(ctx);
    }

    pub(crate) fn on_shutdown_timer(&mut self, ctx: &mut Context<'_>) {
        self.check_shutdown(ctx);
    }

    fn check_shutdown(&mut self, ctx: &mut Context<'_>) {
        let Some(membership) = self.shutdown.membership else {
            return;
        };
        if self.shutdown.answered {
            return;
        }
        if self.transactions.in_use() == 0 && self.scans.in_use() == 0 {
            // Drained: every commit of this TC is in a GCI up to the one
            // open now, and no later commit comes.
            let first = self.shutdown.needed.is_none();
            let needed = *self.shutdown.needed.get_or_insert(epoch::hi(self.epoch));
            if self.durable_gci >= needed {
                self.shutdown.answered = true;
                ctx.send(membership, SignalBody::TcShutdownConf {});
                return;
            }
            if first {
                tracing::info!(
                    tc = %self.me,
                    "stopping: drained; waiting for GCI {needed} to be durable (durable: {})",
                    self.durable_gci
                );
                let distribution = BlockRef::new(self.me.node, BlockNumber::DISTRIBUTION, 0);
                ctx.send(distribution, SignalBody::GcpHurryReq { gci: needed });
            }
        }
        ctx.set_timer(SHUTDOWN_POLL, TIMER_SHUTDOWN);
    }

    /// The refusal of a new transaction while stopping, if stopping.
    pub(crate) fn refuse_while_stopping(&self) -> Option<(u32, String)> {
        self.shutdown.membership.map(|_| {
            (
                error::NODE_SHUTDOWN,
                format!("{}: the data node is stopping", self.me),
            )
        })
    }
}
