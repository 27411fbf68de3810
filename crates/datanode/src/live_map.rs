//! The live partition map: where a partition is served while nodes are down.
//!
//! Why: `config::Placement` is the placement of a cluster with every node
//! alive. When membership removes a data node from the view, the blocks that
//! route (the TC for key operations and scans) must stop sending to it: the
//! primary of a partition becomes the first *live* replica in placement
//! order and a write's chain the other live replicas. Membership's view is
//! the source of truth; the distribution block passes every view it installs
//! on to the local TC and LDM instances (`MembershipViewRep`), and each keeps
//! a `LiveMap` (see docs/transactions.md, "Node failure").
//!
//! A node is *down* once a view no longer holds it after an earlier view did,
//! and live again when a view holds it. Nodes that never were in a view
//! (still joining at the first start) are not down: the first views of a
//! starting cluster hold one node and grow, and routing to a joining node
//! fails as before with "not started" rather than moving every primary.
//! With this rule a partition always has a live replica: membership stops
//! a side that has lost every view member of a node group.
//!
//! **Starting nodes** (docs/recovery.md, "Node restart"). Being in the
//! view is not enough to serve: a node that (re)joins a running cluster
//! has stale or no data until it has copied its fragments from a live
//! replica. The distribution master decides which members *serve* and
//! which starting ones *receive* writes, and tells every TC and LDM
//! (`NodeStateReq`). Once a state is known, a partition's primary is its
//! first serving replica, its chain the other serving replicas followed
//! by the receiving ones (the last backups); a starting node that does
//! not receive gets nothing. A node that leaves a view loses its serving
//! and receiving marks here at once, so that when it comes back it is
//! starting until a newer state says otherwise. Before the first state
//! (a fresh node) every member not down serves, as at a first start; the
//! TC refuses transactions until it has a state.

use config::placement::PartitionHome;
use config::Placement;
use signal::{MembershipView, NodeBitmask, NodeId};

/// The master's node states, as this block last heard them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeStates {
    /// (view id, state id) of the state: states are ordered by it.
    pub version: (u32, u32),
    /// The cluster has handed out a GCI.
    pub running: bool,
    pub serving: NodeBitmask,
    pub receiving: NodeBitmask,
}

impl NodeStates {
    /// The states a `NodeStateReq` carries (`None` for any other signal).
    pub fn of(body: &signal::SignalBody) -> Option<NodeStates> {
        match *body {
            signal::SignalBody::NodeStateReq {
                view_id,
                state_id,
                running,
                serving,
                receiving,
            } => Some(NodeStates {
                version: (view_id, state_id),
                running,
                serving,
                receiving,
            }),
            _ => None,
        }
    }
}

/// The placement and the nodes that left the view.
#[derive(Clone, Debug)]
pub struct LiveMap {
    placement: Placement,
    /// Members of the last view (empty before the first).
    members: NodeBitmask,
    /// Nodes that left a view and have not come back.
    down: NodeBitmask,
    view_id: u32,
    /// The last node states from the distribution master.
    states: Option<NodeStates>,
    /// Every data node of the placement.
    all: NodeBitmask,
    /// Whether routing is the plain placement (nobody down or starting):
    /// the common case, answered without filtering.
    plain: bool,
}

impl LiveMap {
    pub fn new(placement: Placement) -> LiveMap {
        let all = placement.node_groups().iter().flatten().copied().collect();
        LiveMap {
            placement,
            members: NodeBitmask::new(),
            down: NodeBitmask::new(),
            view_id: 0,
            states: None,
            all,
            plain: true,
        }
    }

    /// The node states last heard, if any.
    pub fn states(&self) -> Option<&NodeStates> {
        self.states.as_ref()
    }

    /// Whether `node` serves reads and primary work now.
    pub fn is_serving(&self, node: NodeId) -> bool {
        !self.down.contains(node) && self.states.is_none_or(|s| s.serving.contains(node))
    }

    /// Whether `node` is a starting node that receives writes.
    pub fn is_receiving(&self, node: NodeId) -> bool {
        !self.down.contains(node) && self.states.is_some_and(|s| s.receiving.contains(node))
    }

    /// Follows a node state of the master; returns the nodes that receive
    /// writes now and did not before (none for an old or repeated state).
    pub fn on_states(&mut self, states: NodeStates) -> Option<NodeBitmask> {
        if self.states.is_some_and(|s| s.version >= states.version) {
            return None;
        }
        assert!(
            !states.serving.intersects(&states.receiving),
            "a node both serves and receives: {states:?}"
        );
        let before = self.states.map(|s| s.receiving).unwrap_or_default();
        self.states = Some(states);
        self.update_plain();
        Some(states.receiving.difference(&before))
    }

    fn update_plain(&mut self) {
        let not_serving = match &self.states {
            None => self.down,
            Some(s) => self.all.difference(&s.serving).union(&self.down),
        };
        self.plain = not_serving.is_empty();
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Members of the last view.
    pub fn members(&self) -> NodeBitmask {
        self.members
    }

    /// Nodes down now.
    pub fn down(&self) -> NodeBitmask {
        self.down
    }

    pub fn is_down(&self, node: NodeId) -> bool {
        self.down.contains(node)
    }

    /// Where partition `partition` is served now: its live replicas in
    /// placement order (the primary first).
    pub fn home(&self, partition: u32) -> PartitionHome {
        self.home_of(partition, false)
    }

    /// Where partition `partition` of a table is served now: as
    /// [`LiveMap::home`], over every data node for a fully replicated
    /// table (`config::Placement::home_of`).
    pub fn home_of(&self, partition: u32, fully_replicated: bool) -> PartitionHome {
        let home = self.placement.home_of(partition, fully_replicated);
        if self.plain {
            return home;
        }
        match home.serving_then_receiving(|n| self.is_serving(n), |n| self.is_receiving(n)) {
            Some(home) => home,
            // No serving replica: the node group's serving node failed
            // while another was starting. The starting one shuts down
            // (its copy source is gone) and membership then stops this
            // side; meanwhile route to what is in the view.
            None => home.live_only(|n| !self.down.contains(n)),
        }
    }

    /// Follows a view; returns the nodes that went down with it (empty for
    /// an old or repeated view).
    pub fn on_view(&mut self, view: &MembershipView) -> NodeBitmask {
        if view.view_id <= self.view_id {
            return NodeBitmask::new();
        }
        self.view_id = view.view_id;
        let members: NodeBitmask = view.members.iter().copied().collect();
        let left = self.members.difference(&members);
        self.down = self.down.union(&left).difference(&members);
        self.members = members;
        self.forget_states_of(&left);
        left
    }

    /// A node that left is neither serving nor receiving when it returns,
    /// until a newer state says so.
    fn forget_states_of(&mut self, left: &NodeBitmask) {
        if let Some(s) = self.states.as_mut() {
            s.serving = s.serving.difference(left);
            s.receiving = s.receiving.difference(left);
        }
        self.update_plain();
    }

    /// Marks nodes down that a takeover names before this node's own view
    /// does (the views reach the nodes at different times).
    pub fn mark_down(&mut self, failed: &NodeBitmask) {
        self.down = self.down.union(failed);
        self.members = self.members.difference(failed);
        self.forget_states_of(failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: u8) -> NodeId {
        NodeId::new(n).unwrap()
    }

    fn view(id: u32, members: &[u8]) -> MembershipView {
        MembershipView {
            view_id: id,
            president: node(members[0]),
            members: members.iter().map(|&n| node(n)).collect(),
        }
    }

    #[test]
    fn primaries_move_to_the_first_live_replica_and_back() {
        let placement = Placement::new(vec![vec![node(2), node(3)], vec![node(4), node(5)]], 2);
        let mut map = LiveMap::new(placement.clone());
        // A starting cluster: views grow; nobody is down.
        assert!(map.on_view(&view(1, &[2])).is_empty());
        assert!(map.on_view(&view(2, &[2, 3, 4, 5])).is_empty());
        for p in 0..16 {
            assert_eq!(map.home(p), placement.home(p));
        }
        let left = map.on_view(&view(3, &[2, 4, 5]));
        assert_eq!(left, [node(3)].into_iter().collect());
        for p in 0..16 {
            let home = map.home(p);
            assert!(!home.is_replica(node(3)), "partition {p}: {home:?}");
            assert_eq!(
                home.replicas().count() + usize::from(home.node_group == 0),
                2
            );
            if home.node_group == 0 {
                assert_eq!(home.primary(), node(2));
            }
        }
        // An old view changes nothing; the node coming back is live again.
        assert!(map.on_view(&view(3, &[2, 4])).is_empty());
        assert!(map.on_view(&view(4, &[2, 4, 5, 3])).is_empty());
        assert!(map.down().is_empty());
        assert_eq!(map.home(1), placement.home(1));
    }

    #[test]
    fn a_starting_node_serves_nothing_and_receives_writes_last() {
        let placement = Placement::new(vec![vec![node(2), node(3)]], 1);
        let mut map = LiveMap::new(placement.clone());
        map.on_view(&view(1, &[2, 3]));
        let states = |id, serving: &[u8], receiving: &[u8]| NodeStates {
            version: (1, id),
            running: true,
            serving: serving.iter().map(|&n| node(n)).collect(),
            receiving: receiving.iter().map(|&n| node(n)).collect(),
        };
        map.on_states(states(1, &[2, 3], &[]));
        assert_eq!(map.home(1), placement.home(1));
        // Node 2 fails and comes back: starting, nothing routed to it.
        map.on_view(&view(2, &[3]));
        map.on_view(&view(3, &[3, 2]));
        for p in 0..4 {
            assert_eq!(map.home(p).replicas().collect::<Vec<_>>(), vec![node(3)]);
        }
        // An older state changes nothing.
        assert_eq!(map.on_states(states(1, &[2, 3], &[])), None);
        let gained = map.on_states(NodeStates {
            version: (3, 1),
            ..states(0, &[3], &[2])
        });
        assert_eq!(gained, Some([node(2)].into_iter().collect()));
        for p in 0..4 {
            let home = map.home(p);
            assert_eq!(home.replicas().collect::<Vec<_>>(), vec![node(3), node(2)]);
        }
        map.on_states(NodeStates {
            version: (3, 2),
            ..states(0, &[2, 3], &[])
        });
        assert_eq!(map.home(0), placement.home(0));
    }
}
