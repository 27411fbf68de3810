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

use config::placement::PartitionHome;
use config::Placement;
use signal::{MembershipView, NodeBitmask, NodeId};

/// The placement and the nodes that left the view.
#[derive(Clone, Debug)]
pub struct LiveMap {
    placement: Placement,
    /// Members of the last view (empty before the first).
    members: NodeBitmask,
    /// Nodes that left a view and have not come back.
    down: NodeBitmask,
    view_id: u32,
}

impl LiveMap {
    pub fn new(placement: Placement) -> LiveMap {
        LiveMap {
            placement,
            members: NodeBitmask::new(),
            down: NodeBitmask::new(),
            view_id: 0,
        }
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
        let home = self.placement.home(partition);
        if self.down.is_empty() {
            return home;
        }
        home.live_only(|n| !self.down.contains(n))
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
        left
    }

    /// Marks nodes down that a takeover names before this node's own view
    /// does (the views reach the nodes at different times).
    pub fn mark_down(&mut self, failed: &NodeBitmask) {
        self.down = self.down.union(failed);
        self.members = self.members.difference(failed);
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
}
