//! The master's side of node restart (docs/recovery.md, "Node restart";
//! NDB: DIH's node states, START_MEREQ, COPY_FRAGREQ via START_COPYREQ).
//!
//! Why here: which data nodes may serve is one cluster-wide decision, and
//! the distribution master (the president) already follows every view. A
//! member of the view is in one of three states:
//!
//! - *serving*: primary work and reads go to it;
//! - *starting*: in the view, nothing routed to it. Its LDMs empty their
//!   fragments before they confirm a state that lists it so (it will copy
//!   everything: see `ldm::copy`);
//! - *receiving*: starting, and the last backup of every write of its
//!   partitions.
//!
//! Steps, each a new state sent to every member's distribution block, TCs
//! and LDMs (`NodeStateReq`), all TCs and LDMs answering (`NodeStateConf`):
//!
//! 1. A node that joins a *running* cluster (a GCI was handed out: its
//!    data may be stale) is starting; before that (a first start) it
//!    serves at once.
//! 2. Once a state listing it starting is confirmed (its fragments are
//!    empty), it becomes receiving.
//! 3. Once a state listing it receiving is confirmed (every TC routes its
//!    writes to it, and the transactions older than that have ended), the
//!    master asks its LDMs to copy (`NodeCopyReq`).
//! 4. When every LDM of it answers `NodeCopyConf` (copied, and a local
//!    checkpoint holds the copy), it serves.
//!
//! Invariants: serving and receiving never share a node; a serving set
//! never loses a node but by a view; every member that is not starting
//! serves. A new master takes over the states it last heard (`running`
//! included) and asks for the copies again: a repeated `NodeCopyReq` is
//! answered when the copy in progress ends.

use std::collections::{BTreeMap, BTreeSet};

use kernel::Context;
use signal::{BlockNumber, BlockRef, NodeBitmask, NodeId, SignalBody};

use super::Distribution;
use crate::live_map::NodeStates;

/// The master's node states and the step in progress.
#[derive(Debug, Default)]
pub(super) struct StateMaster {
    state_id: u32,
    running: bool,
    serving: NodeBitmask,
    receiving: NodeBitmask,
    /// Starting nodes whose LDMs confirmed a state listing them starting.
    emptied: NodeBitmask,
    /// Receiving nodes asked to copy, with their LDMs still to answer.
    copying: BTreeMap<NodeId, BTreeSet<BlockRef>>,
    /// TCs and LDMs that have not confirmed the last state.
    waiting: BTreeSet<BlockRef>,
    /// The starting and receiving nodes of the last state.
    sent_starting: NodeBitmask,
    sent_receiving: NodeBitmask,
}

impl Distribution {
    /// The node states this block last heard from a master.
    pub fn node_states(&self) -> Option<NodeStates> {
        self.known_states
    }

    pub(super) fn members(&self) -> NodeBitmask {
        self.view.as_ref().map(|v| v.bitmask()).unwrap_or_default()
    }

    /// After a view is installed on the master: forgets the nodes that
    /// left, places the ones that joined, and sends the new state.
    pub(super) fn states_on_view(&mut self, ctx: &mut Context<'_>) {
        let members = self.members();
        let known = self.known_states;
        let first_done = self.master.as_ref().is_some_and(|m| m.first_done);
        let states = self.states.get_or_insert_with(|| {
            // A new master goes on from the states it last heard.
            let mut states = StateMaster::default();
            if let Some(known) = known {
                states.state_id = known.version.1;
                states.running = known.running;
                states.serving = known.serving;
                states.receiving = known.receiving;
            }
            states
        });
        states.running |= first_done;
        states.serving = states.serving.intersection(&members);
        states.receiving = states.receiving.intersection(&members);
        states.emptied = states.emptied.intersection(&members);
        states.copying.retain(|n, _| members.contains(*n));
        if !states.running {
            // A first start: nothing was committed, nobody has to copy.
            states.serving = members.difference(&states.receiving);
        }
        self.send_states(ctx);
    }

    /// The serving nodes the master decided (none before it decided).
    pub(super) fn serving_now(&self) -> NodeBitmask {
        self.states
            .as_ref()
            .map_or(NodeBitmask::new(), |s| s.serving)
    }

    /// A system restart restored `serving` to the restart GCI: they serve,
    /// every other member is starting (empties and copies), and a node
    /// joining later copies too.
    pub(super) fn start_after_system_restart(
        &mut self,
        serving: NodeBitmask,
        ctx: &mut Context<'_>,
    ) {
        let states = self.states.get_or_insert_with(StateMaster::default);
        states.running = true;
        states.serving = serving;
        states.receiving = NodeBitmask::new();
        self.states_on_view(ctx);
    }

    /// The first GCI is handed out: from now on a joining node copies.
    pub(super) fn note_running(&mut self, ctx: &mut Context<'_>) {
        let first_done = self.master.as_ref().is_some_and(|m| m.first_done);
        if first_done && self.states.as_ref().is_some_and(|s| !s.running) {
            self.states.as_mut().expect("checked").running = true;
            self.send_states(ctx);
        }
    }

    /// After a view (master or not): on the master, the members new to
    /// it begin a restart and the members gone fail theirs
    /// (`ndbinfo.restart_info`); a node no longer master shows none.
    pub(super) fn restarts_on_view(&mut self, old: NodeBitmask, ctx: &mut Context<'_>) {
        if self.master.is_none() {
            if !self.restarts.is_empty() {
                self.restarts.clear();
                self.publish_restarts();
            }
            return;
        }
        let members = self.members();
        let now = ctx.now();
        for node in members.difference(&old).iter() {
            self.restarts.insert(
                node,
                crate::dbinfo::RestartFigure {
                    node,
                    joined: now,
                    receiving: None,
                    serving: None,
                    failed: None,
                },
            );
        }
        for node in old.difference(&members).iter() {
            if let Some(restart) = self.restarts.get_mut(&node) {
                restart.failed.get_or_insert(now);
            }
        }
        self.publish_restarts();
    }

    /// The steps the master's last state shows: receiving (copying) and
    /// serving (restart complete).
    fn restarts_on_states(&mut self, ctx: &mut Context<'_>) {
        let Some(states) = self.states.as_ref() else {
            return;
        };
        let now = ctx.now();
        let mut changed = false;
        for restart in self.restarts.values_mut() {
            if restart.failed.is_some() {
                continue;
            }
            if restart.receiving.is_none()
                && restart.serving.is_none()
                && states.receiving.contains(restart.node)
            {
                restart.receiving = Some(now);
                changed = true;
            }
            if restart.serving.is_none() && states.serving.contains(restart.node) {
                restart.serving = Some(now);
                changed = true;
            }
        }
        if changed {
            self.publish_restarts();
        }
    }

    /// Copies the restarts to the figures; a reader holding them now gets
    /// the copy at the next GCP timer.
    pub(super) fn publish_restarts(&mut self) {
        let Some(figures) = &self.figures else {
            return;
        };
        let restarts = &self.restarts;
        self.restarts_unpublished = !figures
            .restarts()
            .try_publish(|rows| rows.extend(restarts.values().copied()));
    }

    fn send_states(&mut self, ctx: &mut Context<'_>) {
        let members = self.members();
        let view_id = self.view.as_ref().map_or(0, |v| v.view_id);
        let blocks: Vec<BlockRef> = members
            .iter()
            .flat_map(|n| self.tcs_of(n).chain(self.ldms_of(n)))
            .collect();
        let states = self.states.as_mut().expect("on the master");
        states.state_id += 1;
        states.sent_receiving = states.receiving;
        states.sent_starting = members
            .difference(&states.serving)
            .difference(&states.receiving);
        assert!(
            !states.serving.intersects(&states.receiving),
            "node states: {states:?}"
        );
        let body = SignalBody::NodeStateReq {
            view_id,
            state_id: states.state_id,
            running: states.running,
            serving: states.serving,
            receiving: states.receiving,
        };
        tracing::info!(
            node = %self.config.node,
            "node states {view_id}.{}: serving {:?}, receiving {:?}, starting {:?}",
            states.state_id,
            states.serving,
            states.receiving,
            states.sent_starting
        );
        states.waiting = blocks.iter().copied().collect();
        for member in members.iter() {
            ctx.send(Self::address(member), body.clone());
        }
        for block in blocks {
            ctx.send(block, body.clone());
        }
        self.restarts_on_states(ctx);
    }

    pub(super) fn on_state_conf(&mut self, from: BlockRef, state_id: u32, ctx: &mut Context<'_>) {
        let Some(states) = self.states.as_mut() else {
            return;
        };
        if state_id != states.state_id || !states.waiting.remove(&from) {
            return;
        }
        if states.waiting.is_empty() {
            self.state_confirmed(ctx);
        }
    }

    /// Every TC and LDM follows the last state: take the next steps.
    fn state_confirmed(&mut self, ctx: &mut Context<'_>) {
        let ldms: Vec<(NodeId, Vec<BlockRef>)> = {
            let states = self.states.as_ref().expect("on the master");
            states
                .sent_receiving
                .iter()
                .filter(|n| !states.copying.contains_key(n))
                .map(|n| (n, self.ldms_of(n).collect()))
                .collect()
        };
        let states = self.states.as_mut().expect("on the master");
        states.emptied = states.emptied.union(&states.sent_starting);
        for (node, ldms) in ldms {
            tracing::info!(node = %self.config.node, "node {node} receives every write: copying to it");
            for &ldm in &ldms {
                ctx.send(ldm, SignalBody::NodeCopyReq {});
            }
            states.copying.insert(node, ldms.into_iter().collect());
        }
        let ready = states.emptied.intersection(&states.sent_starting);
        if !ready.is_empty() {
            states.receiving = states.receiving.union(&ready);
            states.emptied = states.emptied.difference(&ready);
            self.send_states(ctx);
        }
    }

    pub(super) fn on_copy_conf(&mut self, from: BlockRef, ctx: &mut Context<'_>) {
        let Some(states) = self.states.as_mut() else {
            return;
        };
        let Some(waiting) = states.copying.get_mut(&from.node) else {
            return;
        };
        waiting.remove(&from);
        if !waiting.is_empty() {
            return;
        }
        states.copying.remove(&from.node);
        assert!(
            states.receiving.contains(from.node),
            "node {} copied without receiving writes",
            from.node
        );
        states.receiving.remove(from.node);
        states.serving.insert(from.node);
        tracing::info!(node = %self.config.node, "node {} has caught up: it serves", from.node);
        self.send_states(ctx);
    }

    /// A state from the master (this block's own included): kept, so that
    /// a new master goes on from it.
    pub(super) fn on_states(&mut self, states: NodeStates, ctx: &mut Context<'_>) {
        if self.known_states.is_none_or(|k| k.version < states.version) {
            self.known_states = Some(states);
            let serving = states.serving.contains(self.config.node);
            if self.told_serving != Some(serving) {
                self.told_serving = Some(serving);
                let membership = BlockRef::new(self.config.node, BlockNumber::MEMBERSHIP, 0);
                ctx.send(membership, SignalBody::NodeServingRep { serving });
            }
        }
    }
}
