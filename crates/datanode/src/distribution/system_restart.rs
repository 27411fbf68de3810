//! System restart: a cluster starting from all data nodes down comes back at
//! one GCI the cluster completed (NDB: DIH's restart GCI from the sysfile,
//! and the start phases that restore every node to it). See
//! `docs/recovery.md`, "System restart".
//!
//! Why: each node's redo log is complete to its own newest flushed GCI, and
//! nodes differ (one flushed GCI 57, another crashed before it did; 57 was
//! never declared complete). Restoring each to its own would leave replicas
//! that differ. Every member keeps in its sysfile the newest GCI the master
//! declared complete and the nodes that were serving then (`GcpKeepReq`,
//! written before any TC hears the GCI is complete), so:
//!
//! 1. A master with no node states heard (a start from all nodes down)
//!    asks every member's distribution block what it keeps
//!    (`RestartInfoReq`) and waits until every configured data node
//!    answered, or `RESTART_WAIT` passed.
//! 2. The restart GCI R is the highest GCI any member kept; the nodes that
//!    restore it are the members that the sysfile holding R names serving
//!    (each saved R, and held every row). Every node group must have one
//!    (else the master waits, logging which node group lacks one: its
//!    data is not on any node present).
//! 3. `RestartGciReq { R }` to every LDM instance of those nodes: each
//!    restores exactly to R, voiding durably what its redo log holds above
//!    R. One that cannot (its log does not reach R) answers so, and its
//!    node starts empty and copies, as every other member does (node
//!    restart).
//! 4. The node states follow (`running`: later joiners copy), then the
//!    first GCP, above every GCI any LDM or TC reported (`GcpStartConf`),
//!    in a new cluster incarnation (`super::incarnation`): the GCIs above
//!    R that the last one handed out are handed out again, and a client's
//!    wait for one of the last incarnation's is judged against R.
//!
//! A master that takes over a running cluster (it heard node states, or a
//! TC reports a GCI in use) skips all of it. A client told that GCI g is
//! durable (`TcWaitGciConf`) has g ≤ R: g was kept by every member of its
//! time before any TC heard it complete, and one of them is present.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kernel::Context;
use signal::{BlockRef, NodeBitmask, NodeId, SignalBody};

use super::{sysfile, Distribution, TIMER_KEEP_RETRY, TIMER_RESTART};

/// How long a system restart waits for every configured data node before
/// it goes on with those present (when each node group has one that holds
/// the restart GCI).
pub const RESTART_WAIT: Duration = Duration::from_secs(3);

/// Where the master's system restart stands.
#[derive(Debug)]
pub(super) enum Phase {
    /// Asking the members what they keep.
    Gathering {
        kept: BTreeMap<NodeId, sysfile::Kept>,
        /// `RESTART_WAIT` passed: go on without the absent nodes.
        waited: bool,
        /// The last refusal logged (logged again only when it changes).
        refused: Option<String>,
    },
    /// The LDMs of `restoring` restore to `gci`, which incarnation
    /// `previous` completed.
    Restoring {
        gci: u32,
        previous: u32,
        waiting: BTreeSet<BlockRef>,
        restoring: NodeBitmask,
    },
    /// No node of a node group could restore the restart GCI: the
    /// cluster does not start.
    Refused {
        message: String,
    },
    Done,
}

fn join(nodes: &[NodeId]) -> String {
    nodes
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Distribution {
    /// The phase a new master starts in: gathering when it keeps a sysfile
    /// and heard no node states (the cluster starts from all nodes down).
    pub(super) fn first_restart_phase(&self, ctx: &mut Context<'_>) -> Phase {
        if self.sysfile.is_none() || self.known_states.is_some() {
            return Phase::Done;
        }
        ctx.set_timer(RESTART_WAIT, TIMER_RESTART);
        Phase::Gathering {
            kept: BTreeMap::new(),
            waited: false,
            refused: None,
        }
    }

    pub(super) fn restart_done(&self) -> bool {
        matches!(self.restart, None | Some(Phase::Done))
    }

    pub(super) fn restart_gathering(&self) -> bool {
        matches!(self.restart, Some(Phase::Gathering { .. }))
    }

    /// The GCI the system restart this master led restored (`None`: it
    /// led none).
    pub fn restart_gci(&self) -> Option<u32> {
        self.restarted_to
    }

    /// Why the system restart does not go on (a node group with no node
    /// holding the restart GCI), while it waits.
    pub fn restart_refusal(&self) -> Option<&str> {
        match &self.restart {
            Some(Phase::Gathering { refused, .. }) => refused.as_deref(),
            Some(Phase::Refused { message }) => Some(message),
            _ => None,
        }
    }

    /// The cluster was running after all (a master takeover).
    pub(super) fn restart_not_needed(&mut self, ctx: &mut Context<'_>) {
        if self.restart_gathering() {
            tracing::info!(node = %self.config.node, "a TC uses a GCI: no system restart (master takeover)");
            self.restart = Some(Phase::Done);
            self.states_on_view(ctx);
        }
    }

    pub(super) fn on_restart_info(
        &mut self,
        from: NodeId,
        answer: sysfile::Kept,
        ctx: &mut Context<'_>,
    ) {
        if let Some(Phase::Gathering { kept, .. }) = &mut self.restart {
            kept.insert(from, answer);
            self.try_decide(ctx);
        }
    }

    pub(super) fn on_restart_timer(&mut self, ctx: &mut Context<'_>) {
        if let Some(Phase::Gathering { waited, .. }) = &mut self.restart {
            *waited = true;
            self.try_decide(ctx);
            if self.restart_gathering() {
                ctx.set_timer(RESTART_WAIT, TIMER_RESTART);
            }
        }
    }

    /// Chooses the restart GCI and the nodes that restore it, once every
    /// configured node answered (or the wait ran out and every node group
    /// has such a node).
    fn try_decide(&mut self, ctx: &mut Context<'_>) {
        let members = self.members();
        let groups = self
            .sysfile
            .as_ref()
            .map(|s| s.node_groups.clone())
            .unwrap_or_default();
        let Some(Phase::Gathering {
            kept,
            waited,
            refused,
        }) = &mut self.restart
        else {
            return;
        };
        kept.retain(|n, _| members.contains(*n));
        let all_here = groups.iter().flatten().all(|n| kept.contains_key(n));
        if !all_here && !*waited {
            return;
        }
        if kept.is_empty() {
            return;
        }
        let gci = kept.values().map(|k| k.gci).max().expect("not empty");
        // The incarnation that completed `gci`: one GCP's keep step writes
        // one incarnation, and GCIs above a restart GCI are only completed
        // in the incarnation after it, so every sysfile keeping `gci`
        // names the same one (0 when no GCI was completed).
        let previous = kept
            .values()
            .find(|k| k.gci == gci)
            .expect("the max")
            .incarnation;
        if kept
            .values()
            .any(|k| k.gci == gci && k.incarnation != previous)
        {
            // Only after an earlier restart went on without the node that
            // kept the highest GCI (RESTART_WAIT): two incarnations kept
            // the same number, and their rows may differ.
            tracing::warn!(
                node = %self.config.node,
                "GCI {gci} is kept by more than one cluster incarnation: {kept:?}"
            );
        }
        let answered: NodeBitmask = kept.keys().copied().collect();
        let restoring = if gci == 0 {
            // No GCI was ever completed: every node restores the empty state.
            answered
        } else {
            let serving = kept
                .values()
                .find(|k| k.gci == gci)
                .expect("the max")
                .serving;
            serving.intersection(&answered)
        };
        let missing: Vec<(usize, &Vec<NodeId>)> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.iter().any(|n| restoring.contains(*n)))
            .collect();
        if !missing.is_empty() {
            let message = missing
                .iter()
                .map(|(i, g)| {
                    format!(
                        "node group {i} (nodes {}) has no node present that holds GCI {gci}",
                        join(g)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            let message = format!(
                "system restart to GCI {gci} cannot start: {message} (serving at GCI {gci}: {:?}; present: {:?}); \
                 start one of its nodes that was serving",
                kept.values().find(|k| k.gci == gci).map(|k| k.serving).unwrap_or_default(),
                answered
            );
            if refused.as_deref() != Some(&message) {
                tracing::error!(node = %self.config.node, "{message}");
                *refused = Some(message);
            }
            return;
        }
        tracing::info!(
            node = %self.config.node,
            "system restart to GCI {gci}: nodes {restoring:?} restore it, the other members {:?} start empty and copy",
            members.difference(&restoring)
        );
        let waiting: BTreeSet<BlockRef> = restoring.iter().flat_map(|n| self.ldms_of(n)).collect();
        for &ldm in &waiting {
            ctx.send(ldm, SignalBody::RestartGciReq { gci });
        }
        self.restart = Some(Phase::Restoring {
            gci,
            previous,
            waiting,
            restoring,
        });
    }

    /// A new view: a node that left no longer answers.
    pub(super) fn restart_on_view(&mut self, ctx: &mut Context<'_>) {
        match &self.restart {
            Some(Phase::Gathering { .. }) => self.try_decide(ctx),
            Some(Phase::Restoring { .. }) => self.finish_restoring(ctx),
            _ => {}
        }
    }

    pub(super) fn on_restart_gci_conf(
        &mut self,
        from: BlockRef,
        gci: u32,
        restored: bool,
        ctx: &mut Context<'_>,
    ) {
        let Some(Phase::Restoring {
            gci: asked,
            waiting,
            restoring,
            ..
        }) = &mut self.restart
        else {
            return;
        };
        if *asked != gci || !waiting.remove(&from) {
            return;
        }
        if !restored {
            tracing::warn!(
                node = %self.config.node,
                "node {} cannot restore GCI {gci} (LDM instance {}): it starts empty and copies",
                from.node,
                from.instance
            );
            restoring.remove(from.node);
        }
        self.finish_restoring(ctx);
    }

    /// Once every LDM still a member answered: the restored nodes serve.
    fn finish_restoring(&mut self, ctx: &mut Context<'_>) {
        let members = self.members();
        let Some(Phase::Restoring {
            gci,
            previous,
            waiting,
            restoring,
        }) = &mut self.restart
        else {
            return;
        };
        let (gci, previous) = (*gci, *previous);
        waiting.retain(|b| members.contains(b.node));
        if !waiting.is_empty() {
            return;
        }
        let serving = restoring.intersection(&members);
        let groups = self
            .sysfile
            .as_ref()
            .map_or(&[][..], |s| &s.node_groups[..]);
        let lost: Vec<String> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.iter().any(|n| serving.contains(*n)))
            .map(|(i, g)| format!("node group {i} (nodes {})", join(g)))
            .collect();
        if !lost.is_empty() {
            // Its nodes could not restore GCI `gci` after all (damaged or
            // short redo): no node could copy to them.
            let message = format!(
                "system restart to GCI {gci} cannot start: no node of {} could restore it; \
                 their data must come from a backup",
                lost.join(", ")
            );
            tracing::error!(node = %self.config.node, "{message}");
            self.restart = Some(Phase::Refused { message });
            return;
        }
        tracing::info!(node = %self.config.node, "system restart to GCI {gci} done: {serving:?} serve");
        self.restart = Some(Phase::Done);
        self.restarted_to = Some(gci);
        self.start_after_system_restart(serving, ctx);
        if let Some(master) = self.master.as_mut() {
            master.due = true;
            // A new incarnation: the GCIs above `gci` that the last one
            // handed out are handed out again, and a wait for one of the
            // last incarnation's must not be answered by this one's.
            let id = super::incarnation::Incarnation::fresh_id(previous, || ctx.random());
            tracing::info!(
                node = %self.config.node,
                "cluster incarnation {id:#x}: after {previous:#x}, restored to GCI {gci}"
            );
            master.incarnation = Some(super::incarnation::Incarnation {
                id,
                previous,
                restart_gci: gci,
            });
        }
        self.advance(ctx);
    }

    /// Every member: keeps `gci` complete (the sysfile, durably), tells the
    /// local LDMs, answers the master. The sysfile is written (two fsyncs)
    /// on an `io` thread, so that this thread — which with `ldm=0` runs the
    /// LDM instance too — goes on meanwhile; the LDMs and the master hear
    /// of `gci` only once it is durable ([`Distribution::on_keep_written`]).
    pub(super) fn on_keep_req(
        &mut self,
        from: BlockRef,
        kept: sysfile::Kept,
        ctx: &mut Context<'_>,
    ) {
        let gci = kept.gci;
        if self.keep_write.is_some() {
            if self.keeps_waiting.len() >= KEEPS_WAITING_MAX {
                self.keeps_waiting.remove(0);
            }
            self.keeps_waiting.push((from, kept));
            return;
        }
        if gci > self.kept.gci {
            if self.sysfile.is_some() {
                let request = self.submit_keep_write(kept, ctx);
                self.keep_write = Some(KeepWrite {
                    request,
                    kept,
                    from,
                    failures: 0,
                });
                return;
            }
            self.kept = kept;
        }
        self.keep_done(from, gci, ctx);
    }

    /// Hands the write of `kept` to an `io` thread; its `FsConf` carries
    /// the returned request id.
    fn submit_keep_write(&mut self, kept: sysfile::Kept, ctx: &mut Context<'_>) -> u64 {
        let config = self.sysfile.as_ref().expect("a sysfile to write");
        let disk = std::sync::Arc::clone(&config.disk);
        let fs_dir = config.fs_dir.clone();
        let request = self.next_io_request;
        self.next_io_request += 1;
        ctx.io(
            request,
            Box::new(move || {
                let disk = disk
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                sysfile::write(&**disk, &fs_dir, &kept)
            }),
        );
        request
    }

    /// `FsConf` of the sysfile write in flight.
    ///
    /// A failed write (a full disk, most often) is no reason to restart:
    /// the sysfile is replaced whole, so the one on disk still holds the
    /// GCI kept before, and a restart would meet the same disk. The write
    /// is tried again after a pause that doubles up to
    /// [`KEEP_RETRY_DELAY_MAX`], with an alarm in the cluster log; global
    /// checkpoints wait for this node meanwhile (commits go on until the
    /// redo logs fill and refuse writes with 410), and resume by
    /// themselves once a write succeeds.
    pub(super) fn on_keep_written(&mut self, request: u64, error: String, ctx: &mut Context<'_>) {
        let Some(mut write) = self.keep_write.take_if(|w| w.request == request) else {
            tracing::warn!(node = %self.config.node, "FsConf of unknown file request {request}");
            return;
        };
        if !error.is_empty() {
            write.failures += 1;
            let delay = keep_retry_delay(write.failures);
            if write.failures == 1 {
                let text = format!(
                    "node {}: {error}; global checkpoints wait for this node until its disk has \
                     room (retrying, every {} s at most); it keeps serving reads",
                    self.config.node,
                    KEEP_RETRY_DELAY_MAX.as_secs()
                );
                self.cluster_log(
                    signal::EventKind::CheckpointStopped,
                    signal::Severity::Alert,
                    text,
                    ctx,
                );
            } else {
                tracing::warn!(node = %self.config.node, "sysfile write failed again (try {}): {error}", write.failures);
            }
            self.keep_write = Some(write);
            ctx.set_timer(delay, TIMER_KEEP_RETRY);
            return;
        }
        if write.failures > 0 {
            let text = format!(
                "node {}: sysfile written after {} failed tries; global checkpoints resume",
                self.config.node, write.failures
            );
            self.cluster_log(
                signal::EventKind::CheckpointResumed,
                signal::Severity::Info,
                text,
                ctx,
            );
        }
        assert!(write.kept.gci > self.kept.gci, "the kept GCI only grows");
        self.kept = write.kept;
        self.keep_done(write.from, write.kept.gci, ctx);
        for (from, kept) in std::mem::take(&mut self.keeps_waiting) {
            self.on_keep_req(from, kept, ctx);
        }
    }

    /// The pause after a failed sysfile write ran out: write it again.
    pub(super) fn on_keep_retry_timer(&mut self, ctx: &mut Context<'_>) {
        let Some(kept) = self.keep_write.as_ref().map(|w| w.kept) else {
            return;
        };
        let request = self.submit_keep_write(kept, ctx);
        self.keep_write.as_mut().expect("checked above").request = request;
    }

    /// `gci` is kept (durably, with a sysfile): the local LDMs and the
    /// master hear of it.
    fn keep_done(&mut self, from: BlockRef, gci: u32, ctx: &mut Context<'_>) {
        assert!(self.kept.gci >= gci, "GCI {gci} reported kept before it is");
        for ldm in self.ldms_of(self.config.node) {
            ctx.send(ldm, SignalBody::GcpCompleteRep { gci });
        }
        ctx.send(from, SignalBody::GcpKeepConf { gci });
    }
}

/// `GcpKeepReq`s held while a sysfile write is in flight.
const KEEPS_WAITING_MAX: usize = 64;

/// First pause before a failed sysfile write is tried again; doubled per
/// failed try up to [`KEEP_RETRY_DELAY_MAX`].
pub const KEEP_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The longest pause between tries of a failing sysfile write.
pub const KEEP_RETRY_DELAY_MAX: Duration = Duration::from_secs(5);

/// The pause after `failures` (≥ 1) failed tries of a sysfile write.
fn keep_retry_delay(failures: u32) -> Duration {
    assert!(failures > 0, "a pause follows a failure");
    KEEP_RETRY_DELAY
        .saturating_mul(1 << (failures - 1).min(16))
        .min(KEEP_RETRY_DELAY_MAX)
}

/// A sysfile write on an `io` thread (or waiting to be tried again after
/// `failures` failed tries): what it keeps, for whom.
#[derive(Debug)]
pub(super) struct KeepWrite {
    request: u64,
    kept: sysfile::Kept,
    from: BlockRef,
    failures: u32,
}
