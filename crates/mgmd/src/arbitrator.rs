//! The arbitrator (NDB: the arbitration part of the management server): when
//! the data nodes split and a side cannot tell on its own whether it may go
//! on (a tie: it holds exactly half of the nodes and no node group decides,
//! see `docs/membership.md`), the president of that side asks here. At most
//! one side of a split is let go on; the other shuts down. Kept free of I/O
//! so that the management server and the simulator's stand-in run the same
//! decision.
//!
//! The rule. The arbitrator remembers the *vote holder*: the members of the
//! side it last let go on, that side's president, and the view id the side
//! split from. A request from president `p` for the side `members` is
//! granted when there is no holder yet, or when `p` is one of the holder's
//! members; the side asking then becomes the holder. Every other request is
//! refused. The holder follows its cluster as nodes rejoin it: a status
//! report from a president of a newer view than the holder's replaces the
//! holder's members when that president is the holder's president, or a
//! holder member that took over from it (its view no longer lists the old
//! president).
//!
//! Invariant: two live sides that share no node are never both granted.
//! The two sides of one split are disjoint and each side's president is on
//! its own side: once the first is granted it is the holder, so the second
//! side's president is not a holder member and is refused. The holder moves
//! only to views made after the grant by a president inside it, so it never
//! comes to list the other side's president while that side still asks.
//!
//! A node of the holder's side that is given its node id again (a new
//! process: `node_restarted`) leaves the holder: the process that was part
//! of the side that went on is gone. A holder left with no member is no
//! holder (every process of the side that went on is gone), so that after
//! a whole-cluster crash whose last survivor won the vote, the others may
//! start without it (issue 25: a survivor whose files are then damaged
//! would otherwise keep every partial start refused).
//!
//! Limits, as in NDB: a restarted management server has no holder and grants
//! the first side that asks; after a whole-cluster restart view ids begin
//! again, so the holder stays as it was until its next grant (a tie is then
//! won only by a side whose president it lists: never two sides, possibly
//! none). With the arbitrator down or out of reach, no side wins a tie.

use signal::{NodeBitmask, NodeId};

/// The side that holds the vote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteHolder {
    pub members: NodeBitmask,
    /// The president of the holder's latest view the arbitrator knows.
    pub president: NodeId,
    /// The view the side split from (0: a partial start), or the holder's
    /// latest view the arbitrator heard of.
    pub view_id: u32,
}

/// The answer to one `ArbitReq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArbitDecision {
    Granted,
    /// Refused; the text says why (for the asker's log and the cluster log).
    Refused(String),
}

/// The arbitrator's state: who holds the vote.
#[derive(Clone, Debug, Default)]
pub struct Arbitrator {
    holder: Option<VoteHolder>,
}

impl Arbitrator {
    pub fn new() -> Arbitrator {
        Arbitrator::default()
    }

    pub fn holder(&self) -> Option<&VoteHolder> {
        self.holder.as_ref()
    }

    /// President `asker` asks whether the side `members`, split from view
    /// `view_id`, may go on.
    pub fn request(&mut self, asker: NodeId, view_id: u32, members: &NodeBitmask) -> ArbitDecision {
        if !members.contains(asker) {
            return ArbitDecision::Refused(format!(
                "node {asker} asked for the side {members:?}, which does not include it"
            ));
        }
        if let Some(holder) = &self.holder {
            if !holder.members.contains(asker) {
                return ArbitDecision::Refused(format!(
                    "the side of node {} (members {:?}, view {}) holds the vote",
                    holder.president, holder.members, holder.view_id
                ));
            }
        }
        self.holder = Some(VoteHolder {
            members: *members,
            president: asker,
            view_id,
        });
        ArbitDecision::Granted
    }

    /// Data node `node` was given its node id again: a new process. It
    /// leaves the holder's side; an empty side holds no vote.
    pub fn node_restarted(&mut self, node: NodeId) {
        let Some(holder) = &mut self.holder else {
            return;
        };
        if !holder.members.contains(node) {
            return;
        }
        holder.members.remove(node);
        if holder.members.is_empty() {
            self.holder = None;
        } else if holder.president == node {
            // Informational only (messages, successor checks): the lowest
            // member left stands for the side.
            holder.president = holder.members.iter().next().expect("not empty");
        }
    }

    /// A data node's status report: keeps the holder's members up to date
    /// as nodes rejoin its cluster. `president` is the president of the
    /// reported view, `members` its members.
    pub fn view_report(
        &mut self,
        node: NodeId,
        view_id: u32,
        president: Option<NodeId>,
        members: &NodeBitmask,
    ) {
        let Some(holder) = &mut self.holder else {
            return;
        };
        if president != Some(node) || !members.contains(node) || view_id <= holder.view_id {
            return;
        }
        let successor = node != holder.president
            && holder.members.contains(node)
            && !members.contains(holder.president);
        if node == holder.president || successor {
            holder.members = *members;
            holder.president = node;
            holder.view_id = view_id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: u8) -> NodeId {
        NodeId::new(n).expect("non-zero")
    }

    fn set(nodes: &[u8]) -> NodeBitmask {
        nodes.iter().map(|n| node(*n)).collect()
    }

    #[test]
    fn the_first_side_of_a_split_wins_and_the_other_is_refused() {
        let mut a = Arbitrator::new();
        assert_eq!(a.request(node(2), 7, &set(&[2, 4])), ArbitDecision::Granted);
        let refused = a.request(node(3), 7, &set(&[3, 5]));
        assert!(
            matches!(&refused, ArbitDecision::Refused(text) if text.contains("node 2")),
            "{refused:?}"
        );
        // Asking again (a further failure on the winning side) is granted.
        assert_eq!(a.request(node(2), 7, &set(&[2])), ArbitDecision::Granted);
        assert_eq!(a.holder().map(|h| h.members), Some(set(&[2])));
        // A request for a side without the asker is malformed.
        assert!(matches!(
            Arbitrator::new().request(node(2), 1, &set(&[3])),
            ArbitDecision::Refused(_)
        ));
    }

    #[test]
    fn the_holder_follows_its_cluster_and_ignores_other_presidents() {
        let mut a = Arbitrator::new();
        assert_eq!(a.request(node(2), 7, &set(&[2])), ArbitDecision::Granted);
        // A stale report of the view before the split changes nothing.
        a.view_report(node(2), 7, Some(node(2)), &set(&[2, 3]));
        assert_eq!(a.holder().map(|h| h.members), Some(set(&[2])));
        // The refused side's president: not the holder.
        a.view_report(node(3), 9, Some(node(3)), &set(&[3]));
        assert_eq!(a.holder().map(|h| h.members), Some(set(&[2])));
        // A member that is not the president of its view.
        a.view_report(node(3), 9, Some(node(2)), &set(&[2, 3]));
        assert_eq!(a.holder().map(|h| h.members), Some(set(&[2])));
        // Node 3 restarted and rejoined node 2's cluster.
        a.view_report(node(2), 9, Some(node(2)), &set(&[2, 3]));
        assert_eq!(a.holder().map(|h| h.members), Some(set(&[2, 3])));
        // A new split of that cluster: node 3 may win it now.
        assert_eq!(a.request(node(3), 9, &set(&[3])), ArbitDecision::Granted);
        assert!(matches!(
            a.request(node(2), 9, &set(&[2])),
            ArbitDecision::Refused(_)
        ));
        // Node 3's successor after node 3 left (a view without it).
        a.view_report(node(3), 10, Some(node(3)), &set(&[3, 4]));
        a.view_report(node(4), 11, Some(node(4)), &set(&[4]));
        assert_eq!(
            a.holder(),
            Some(&VoteHolder {
                members: set(&[4]),
                president: node(4),
                view_id: 11
            })
        );
        // A member that lists the holder's president did not succeed it.
        let mut b = Arbitrator::new();
        b.request(node(2), 3, &set(&[2, 4]));
        b.view_report(node(4), 5, Some(node(4)), &set(&[4, 2, 5]));
        assert_eq!(b.holder().map(|h| h.members), Some(set(&[2, 4])));
    }

    #[test]
    fn a_side_whose_every_process_restarted_holds_no_vote() {
        let mut a = Arbitrator::new();
        // Node 3 won after node 2 died, then died too (a cascade).
        assert_eq!(a.request(node(3), 2, &set(&[3])), ArbitDecision::Granted);
        assert!(matches!(
            a.request(node(2), 0, &set(&[2])),
            ArbitDecision::Refused(_)
        ));
        // A node of another side restarting changes nothing.
        a.node_restarted(node(2));
        assert!(matches!(
            a.request(node(2), 0, &set(&[2])),
            ArbitDecision::Refused(_)
        ));
        // Node 3's process is gone once its id is given again.
        a.node_restarted(node(3));
        assert_eq!(a.holder(), None);
        assert_eq!(a.request(node(2), 0, &set(&[2])), ArbitDecision::Granted);
    }

    #[test]
    fn a_side_keeps_the_vote_while_one_of_its_processes_lives() {
        let mut a = Arbitrator::new();
        assert_eq!(a.request(node(3), 2, &set(&[3, 5])), ArbitDecision::Granted);
        a.node_restarted(node(3));
        assert_eq!(
            a.holder().map(|h| (h.members, h.president)),
            Some((set(&[5]), node(5)))
        );
        assert!(matches!(
            a.request(node(2), 0, &set(&[2, 4])),
            ArbitDecision::Refused(_)
        ));
        assert_eq!(a.request(node(5), 0, &set(&[5])), ArbitDecision::Granted);
    }
}
