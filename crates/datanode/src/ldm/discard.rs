//! A restore that finds this node's files damaged (`LdmError::is_damage`:
//! a checksum that fails, a redo log out of step with the checkpoints).
//!
//! Why not just refuse: a node that joins a running cluster empties every
//! fragment and copies it from a serving replica anyway (docs/recovery.md,
//! "Node restart"), so its damaged files cost it nothing but the operator's
//! time. So:
//! - without `skarv data --discard-corrupt`, the node stops as failed, and
//!   the message says how to recover;
//! - with it, once the master's node states say the cluster is running and
//!   another node of this node's group serves (it holds every row this node
//!   would restore), the instance asks the node process to move the files
//!   aside ([`DiscardCorrupt`]) and restart: it comes back empty and copies
//!   everything. With no serving partner (a system restart, the partner
//!   down) the files may hold the only copy of the data: the flag is
//!   refused and the node stops as failed, its files untouched. States not
//!   heard within [`DISCARD_DECISION_WAIT`] count as no partner.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kernel::Context;
use signal::{BlockNumber, BlockRef, NodeId, SignalBody};
use storage::disk::Disk;
use storage::instance::LdmError;

use super::LdmBlock;

/// How long a damaged instance waits for the master's node states before
/// it refuses `--discard-corrupt` (a joining node hears them within a few
/// heartbeats).
pub const DISCARD_DECISION_WAIT: Duration = Duration::from_secs(10);
/// Timer: the wait for the node states ran out.
pub(super) const TIMER_DISCARD_DECISION: u32 = 7;

/// Shared by a node's LDM instances and its process (`node.rs`): the
/// reasons of the instances that asked to discard the node's files. The
/// process moves them aside once its threads have stopped.
#[derive(Clone, Debug, Default)]
pub struct DiscardCorrupt(Arc<Mutex<Vec<String>>>);

impl DiscardCorrupt {
    fn request(&self, reason: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(reason);
    }

    /// Why instances asked to discard the files (empty: none asked).
    pub fn requested(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A damaged restore waiting for the node states to decide.
#[derive(Debug)]
pub(super) struct DamagedRestore {
    sender: BlockRef,
    schema_version: u32,
    message: String,
}

/// What the node states allow.
enum Verdict {
    Discard { partner: NodeId },
    Refuse(String),
    NoStatesYet,
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// The restore at the first schema load failed with `error`.
    pub(super) fn on_restore_failed(
        &mut self,
        sender: BlockRef,
        schema_version: u32,
        error: &LdmError,
        ctx: &mut Context<'_>,
    ) {
        let message = format!(
            "LDM instance {} of node {} cannot restore its data: {error}",
            self.config.instance, self.config.node
        );
        if !error.is_damage() {
            return self.refuse_restore(
                sender,
                schema_version,
                format!("{message}; stopping the node"),
                ctx,
            );
        }
        if self.discard.is_none() {
            let message = format!(
                "{message}; stopping the node. If another node of its node group serves, start this \
                 node with `skarv data --discard-corrupt`: it moves this node's files aside (into \
                 discarded-<time>/ in its data directory) and copies everything from that node \
                 (docs/recovery.md, \"Damaged files\")"
            );
            return self.refuse_restore(sender, schema_version, message, ctx);
        }
        self.damaged = Some(DamagedRestore {
            sender,
            schema_version,
            message,
        });
        ctx.set_timer(DISCARD_DECISION_WAIT, TIMER_DISCARD_DECISION);
        self.decide_discard(false, ctx);
    }

    /// Decides a damaged restore once the node states allow it, or as a
    /// refusal when `waited` out.
    pub(super) fn decide_discard(&mut self, waited: bool, ctx: &mut Context<'_>) {
        if self.damaged.is_none() || self.failed {
            return;
        }
        let refusal = match self.discard_verdict() {
            Verdict::NoStatesYet if !waited => return,
            Verdict::NoStatesYet => format!(
                "no node states came from the master within {} s, so no node is known to serve \
                 this data",
                DISCARD_DECISION_WAIT.as_secs()
            ),
            Verdict::Refuse(why) => why,
            Verdict::Discard { partner } => {
                let damaged = self.damaged.take().expect("checked above");
                let reason = format!(
                    "{}; --discard-corrupt: node {partner} of its node group serves, so this \
                     node's files are moved aside and it restarts empty to copy everything from it",
                    damaged.message
                );
                tracing::warn!(node = %self.config.node, "{reason}");
                self.discard
                    .as_ref()
                    .expect("a damaged restore waits only with the flag")
                    .request(reason.clone());
                ctx.send(
                    damaged.sender,
                    SignalBody::SchemaLoadConf {
                        schema_version: damaged.schema_version,
                        code: proto::error::NOT_STARTED,
                        message: reason.clone(),
                    },
                );
                self.failed = true;
                ctx.shutdown(true, reason);
                return;
            }
        };
        let damaged = self.damaged.take().expect("checked above");
        let message = format!(
            "{}; --discard-corrupt refused: {refusal}; the files stay as they are; stopping the node",
            damaged.message
        );
        self.refuse_restore(damaged.sender, damaged.schema_version, message, ctx);
    }

    fn discard_verdict(&self) -> Verdict {
        let me = self.config.node;
        let Some(states) = self.live.states() else {
            return Verdict::NoStatesYet;
        };
        if !states.running {
            return Verdict::Refuse(
                "the cluster is not running (a system restart): these files may hold the only \
                 copy of their data; start the cluster without this node, then start this node \
                 again with the flag"
                    .to_owned(),
            );
        }
        let group = self
            .config
            .placement
            .node_groups()
            .iter()
            .find(|g| g.contains(&me))
            .cloned()
            .unwrap_or_default();
        match group
            .iter()
            .copied()
            .find(|&n| n != me && states.serving.contains(n) && !self.live.is_down(n))
        {
            Some(partner) => Verdict::Discard { partner },
            None => Verdict::Refuse(format!(
                "no other node of its node group ({group:?}) serves: these files may hold the \
                 only copy of their data"
            )),
        }
    }

    /// Stops the node as failed after a restore it cannot get past.
    fn refuse_restore(
        &mut self,
        sender: BlockRef,
        schema_version: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        ctx.send(
            sender,
            SignalBody::SchemaLoadConf {
                schema_version,
                code: proto::error::NOT_STARTED,
                message: message.clone(),
            },
        );
        // Membership stops the node as failed, once it has told the other
        // starting nodes not to wait for this one (a whole-cluster restart
        // would otherwise wait `StartPartialTimeout` for it).
        tracing::error!(node = %self.config.node, instance = self.config.instance, "{message}");
        if !self.failed {
            self.failed = true;
            let membership = BlockRef::new(self.config.node, BlockNumber::MEMBERSHIP, 0);
            ctx.send(membership, SignalBody::StartFailedRep { reason: message });
        }
    }
}
