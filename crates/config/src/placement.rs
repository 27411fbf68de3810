//! Where each partition of a table lives: its node group, its replicas
//! (primary first) and the LDM instance that holds it on each replica.
//!
//! Why here: the data nodes (TC routing, LDM ownership) and the clients
//! (the transaction hint: start a transaction on the node that holds the
//! primary replica of its key) must agree on the placement without asking
//! each other, and both already have the cluster configuration. The
//! placement is a pure function of the configuration and the table's
//! partition count, so it is the same everywhere and never stored.
//!
//! The rule, for `G` node groups of `R` replicas and `L` LDM instances per
//! data node, partition `p`:
//!
//! - node group `p mod G`; let `q = p div G`;
//! - LDM instance `q mod L` (on every replica);
//! - primary replica: node number `(q div L) mod R` of its group (nodes of
//!   a group in configuration order); the backups follow it in group order,
//!   wrapping around.
//!
//! With the default partition count `G × R × L` (= data nodes × LDM
//! instances, NDB's one partition per LDM per node) every LDM instance of
//! every data node is the primary of exactly one partition of each table,
//! so primaries, and the work of committed reads, spread evenly.
//!
//! **Fully replicated tables** (`TableDef::fully_replicated`, NDB's
//! `FULLY_REPLICATED=1`): partition `p` lives in every node group, on every
//! data node, each node's copy on the same LDM instance `q mod L`. Its
//! replica chain ([`Placement::home_of`]) is the chain of the normal rule
//! (its own group `p mod G`, primary first), then each other group in
//! group order from `p mod G + 1`, wrapping, each group's nodes in
//! configuration order. Why this order: the primary, which takes every
//! lock and orders the writes of a row, stays where the normal rule puts
//! it, so primaries spread as evenly as for any table; the copies in other
//! groups are only backups. And the chain stays a function of the primary
//! with nodes down too (the TC batches the writes of one primary along one
//! chain): dropping nodes from the own group's cyclic order leaves the
//! cyclic order from the first live one, and the other groups' part does
//! not depend on the partition.
//! Every data node holds the whole table: its memory is the table's size
//! times the data nodes, not times the replicas.
//!
//! Node failure moves primaries: a running node routes by
//! [`PartitionHome::live_only`], the first live replica in this order
//! being the primary (docs/transactions.md, "Node failure").

use signal::NodeId;

use crate::ClusterConfig;

/// Most replicas of a partition (NDB's `NoOfReplicas` limit).
pub const REPLICAS_MAX: usize = 4;
/// Most copies of a partition of a fully replicated table: one per data
/// node, so such a table is refused in a cluster of more data nodes.
pub const COPIES_MAX: usize = 16;
const _: () = assert!(COPIES_MAX >= REPLICAS_MAX);
// A write's chain holds every replica but the first.
const _: () = assert!(signal::CHAIN_MAX + 1 >= REPLICAS_MAX);

/// The node groups of a configuration and the LDM instances per data node.
#[derive(Clone, PartialEq, Eq)]
pub struct Placement {
    /// Node groups in order; each holds its data nodes in configuration order.
    groups: Vec<Vec<NodeId>>,
    ldm_instances: u32,
    /// `home(p)` for `p` below the placement's period (groups × LDM
    /// instances × replicas: every home repeats with it), when that is at
    /// most [`HOMES_CACHED_MAX`]; empty otherwise. Every key operation
    /// routes by it, in the TC and in the client: a lookup there, where
    /// computing a home takes four divisions and a loop.
    homes: Vec<PartitionHome>,
}

/// The longest period whose homes a placement keeps computed (40 bytes each).
pub const HOMES_CACHED_MAX: u32 = 4_096;

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("groups", &self.groups)
            .field("ldm_instances", &self.ldm_instances)
            .finish()
    }
}

/// Where one partition lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionHome {
    pub node_group: u32,
    pub ldm_instance: u32,
    replicas: [Option<NodeId>; COPIES_MAX],
}

impl PartitionHome {
    /// The node holding the primary replica.
    pub fn primary(&self) -> NodeId {
        self.replicas[0].expect("a partition has a primary replica")
    }

    /// Every replica, the primary first, then the backups in the order a
    /// write passes them.
    pub fn replicas(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.replicas.iter().map_while(|r| *r)
    }

    /// The backups, in the order a write passes them.
    pub fn backups(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.replicas().skip(1)
    }

    pub fn is_replica(&self, node: NodeId) -> bool {
        self.replicas().any(|r| r == node)
    }

    /// The same partition with only the replicas for which `live` holds,
    /// in placement order: the first live replica is the primary, the
    /// others are the backups (docs/transactions.md, "Node failure").
    ///
    /// # Panics
    /// When no replica is live: membership stops a side of the cluster
    /// that lacks a whole node group, so a running node never routes to
    /// such a partition.
    pub fn live_only(&self, live: impl Fn(NodeId) -> bool) -> PartitionHome {
        let mut replicas = [None; COPIES_MAX];
        let mut k = 0;
        for node in self.replicas().filter(|n| live(*n)) {
            replicas[k] = Some(node);
            k += 1;
        }
        assert!(
            k > 0,
            "node group {} has no live replica: {:?}",
            self.node_group,
            self.replicas
        );
        PartitionHome {
            node_group: self.node_group,
            ldm_instance: self.ldm_instance,
            replicas,
        }
    }
}

impl PartitionHome {
    /// The same partition served by the replicas for which `serving`
    /// holds, in placement order (the first is the primary), followed by
    /// those for which only `receiving` holds: starting replicas that get
    /// every write as the last backups but serve nothing yet
    /// (docs/recovery.md, "Node restart"). `None` when no replica serves.
    pub fn serving_then_receiving(
        &self,
        serving: impl Fn(NodeId) -> bool,
        receiving: impl Fn(NodeId) -> bool,
    ) -> Option<PartitionHome> {
        let mut replicas = [None; COPIES_MAX];
        let mut k = 0;
        for node in self.replicas().filter(|n| serving(*n)) {
            replicas[k] = Some(node);
            k += 1;
        }
        if k == 0 {
            return None;
        }
        for node in self.replicas().filter(|n| !serving(*n) && receiving(*n)) {
            replicas[k] = Some(node);
            k += 1;
        }
        Some(PartitionHome {
            node_group: self.node_group,
            ldm_instance: self.ldm_instance,
            replicas,
        })
    }
}

impl Placement {
    /// The placement of a configuration: node groups from the data nodes'
    /// `node_group`, LDM instances from the first data node's thread layout
    /// (every data node of a cluster runs the same count; the TC and the
    /// clients route by it).
    pub fn of(config: &ClusterConfig) -> Placement {
        let mut groups: Vec<Vec<NodeId>> = Vec::new();
        for node in &config.data_nodes {
            let group = node.node_group as usize;
            if groups.len() <= group {
                groups.resize(group + 1, Vec::new());
            }
            groups[group].push(node.node_id);
        }
        groups.retain(|g| !g.is_empty());
        let ldm_instances = config
            .data_nodes
            .first()
            .map_or(1, |n| ldm_instances_of(&n.params.threads));
        Placement::new(groups, ldm_instances)
    }

    /// # Panics
    /// When there is no node group, a group is empty or larger than
    /// [`REPLICAS_MAX`], groups differ in size, or `ldm_instances` is 0.
    pub fn new(groups: Vec<Vec<NodeId>>, ldm_instances: u32) -> Placement {
        assert!(!groups.is_empty(), "a cluster has at least one node group");
        let replicas = groups[0].len();
        assert!(
            (1..=REPLICAS_MAX).contains(&replicas),
            "a node group of {replicas} nodes: 1..={REPLICAS_MAX} allowed"
        );
        assert!(
            groups.iter().all(|g| g.len() == replicas),
            "every node group has NoOfReplicas nodes: {groups:?}"
        );
        assert!(
            ldm_instances > 0,
            "a data node has at least one LDM instance"
        );
        let mut placement = Placement {
            groups,
            ldm_instances,
            homes: Vec::new(),
        };
        let period = placement.default_partitions();
        if period <= HOMES_CACHED_MAX {
            placement.homes = (0..period).map(|p| placement.compute_home(p)).collect();
        }
        placement
    }

    /// Every data node, group by group (the change stream's buckets, one
    /// per data node, are named by them).
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.groups.iter().flatten().copied()
    }

    pub fn node_groups(&self) -> &[Vec<NodeId>] {
        &self.groups
    }

    pub fn replicas_per_group(&self) -> u32 {
        self.groups[0].len() as u32
    }

    pub fn ldm_instances(&self) -> u32 {
        self.ldm_instances
    }

    /// Partitions of a table created without a count: one per LDM
    /// instance per data node.
    pub fn default_partitions(&self) -> u32 {
        self.groups.len() as u32 * self.replicas_per_group() * self.ldm_instances
    }

    /// Data nodes of the cluster.
    pub fn data_nodes(&self) -> usize {
        self.groups.iter().map(Vec::len).sum()
    }

    /// Whether the cluster can hold a fully replicated table: a copy per
    /// data node fits a partition's chain ([`COPIES_MAX`]).
    pub fn fully_replicated_fits(&self) -> bool {
        self.data_nodes() <= COPIES_MAX
    }

    /// Where partition `partition` of a table lives: [`Placement::home`],
    /// or for a fully replicated table every data node (see the module
    /// doc for the order).
    ///
    /// # Panics
    /// For a fully replicated table when the cluster has more than
    /// [`COPIES_MAX`] data nodes (the dictionary refuses such a table).
    pub fn home_of(&self, partition: u32, fully_replicated: bool) -> PartitionHome {
        let mut home = self.home(partition);
        if !fully_replicated || self.groups.len() == 1 {
            return home;
        }
        assert!(
            self.fully_replicated_fits(),
            "a fully replicated table in a cluster of {} data nodes (at most {COPIES_MAX})",
            self.data_nodes()
        );
        let group_count = self.groups.len();
        let own = home.node_group as usize;
        let mut k = self.groups[own].len();
        for step in 1..group_count {
            for &node in &self.groups[(own + step) % group_count] {
                home.replicas[k] = Some(node);
                k += 1;
            }
        }
        home
    }

    /// Where partition `partition` lives.
    #[inline]
    pub fn home(&self, partition: u32) -> PartitionHome {
        match self.homes.len() {
            0 => self.compute_home(partition),
            period => self.homes[partition as usize % period],
        }
    }

    fn compute_home(&self, partition: u32) -> PartitionHome {
        let group_count = self.groups.len() as u32;
        let node_group = partition % group_count;
        let q = partition / group_count;
        let ldm_instance = q % self.ldm_instances;
        let group = &self.groups[node_group as usize];
        let replica_count = group.len();
        let primary = (q / self.ldm_instances) as usize % replica_count;
        let mut replicas = [None; COPIES_MAX];
        for (k, slot) in replicas.iter_mut().take(replica_count).enumerate() {
            *slot = Some(group[(primary + k) % replica_count]);
        }
        PartitionHome {
            node_group,
            ldm_instance,
            replicas,
        }
    }

    /// The node group a data node belongs to.
    pub fn group_of(&self, node: NodeId) -> Option<u32> {
        self.groups
            .iter()
            .position(|g| g.contains(&node))
            .map(|g| g as u32)
    }
}

/// LDM instances of a data node with this thread layout: its ldm threads,
/// or one (folded into `main`) when it has none.
pub fn ldm_instances_of(layout: &kernel::thread_config::ThreadLayout) -> u32 {
    layout.count(kernel::thread_config::ThreadRole::Ldm).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: u8) -> NodeId {
        NodeId::new(id).unwrap()
    }

    #[test]
    fn kept_homes_are_the_computed_ones_for_every_partition() {
        // (groups, replicas, LDM instances); the last has a period above
        // HOMES_CACHED_MAX, so it computes every home.
        for (groups, replicas, ldms) in [(1, 1, 1), (2, 2, 4), (3, 3, 2), (4, 1, 3), (24, 2, 100)] {
            let nodes: Vec<Vec<NodeId>> = (0..groups)
                .map(|g| {
                    (0..replicas)
                        .map(|r| n(1 + (g * replicas + r) as u8))
                        .collect()
                })
                .collect();
            let placement = Placement::new(nodes, ldms);
            let period = placement.default_partitions();
            assert_eq!(placement.homes.is_empty(), period > HOMES_CACHED_MAX);
            for p in (0..3 * period.min(HOMES_CACHED_MAX)).chain([u32::MAX - 1, u32::MAX]) {
                assert_eq!(
                    placement.home(p),
                    placement.compute_home(p),
                    "partition {p}"
                );
            }
        }
    }

    #[test]
    fn default_partitions_make_every_ldm_of_every_node_primary_once() {
        let placement = Placement::new(vec![vec![n(1), n(2)], vec![n(3), n(4)]], 4);
        let partitions = placement.default_partitions();
        assert_eq!(partitions, 16);
        let mut primaries = std::collections::BTreeSet::new();
        for p in 0..partitions {
            let home = placement.home(p);
            assert!(primaries.insert((home.primary(), home.ldm_instance)));
            let group = &placement.node_groups()[home.node_group as usize];
            let mut replicas: Vec<NodeId> = home.replicas().collect();
            assert_eq!(replicas.len(), 2);
            replicas.sort();
            assert_eq!(&replicas, group, "partition {p}: replicas are its group");
        }
        assert_eq!(primaries.len(), 16);
    }

    #[test]
    fn a_fully_replicated_partition_lives_on_every_node_own_group_first() {
        let placement = Placement::new(
            vec![vec![n(1), n(2)], vec![n(3), n(4)], vec![n(5), n(6)]],
            2,
        );
        for p in 0..placement.default_partitions() {
            let normal = placement.home(p);
            let full = placement.home_of(p, true);
            assert_eq!(placement.home_of(p, false), normal);
            assert_eq!(
                full.primary(),
                normal.primary(),
                "partition {p}: the primary stays"
            );
            assert_eq!(full.ldm_instance, normal.ldm_instance);
            assert_eq!(full.node_group, normal.node_group);
            let chain: Vec<NodeId> = full.replicas().collect();
            let own: Vec<NodeId> = normal.replicas().collect();
            assert_eq!(&chain[..2], &own[..], "partition {p}: its own group first");
            let mut all = chain.clone();
            all.sort();
            assert_eq!(
                all,
                (1..=6).map(n).collect::<Vec<_>>(),
                "partition {p}: every node once"
            );
        }
        let chain = |p: u32| -> Vec<u8> {
            placement
                .home_of(p, true)
                .replicas()
                .map(NodeId::get)
                .collect()
        };
        // Partition 1 (group 1, primary 3), then groups 2 and 0 in order.
        assert_eq!(chain(1), vec![3, 4, 5, 6, 1, 2]);
        // Partition 7 (group 1, q = 2: primary 4), then groups 2 and 0 in order.
        assert_eq!(chain(7), vec![4, 3, 5, 6, 1, 2]);
        // With a node down, the partitions of one live primary share a chain
        // (the TC sends one primary's writes along one chain).
        let live = |p: u32| -> Vec<NodeId> {
            placement
                .home_of(p, true)
                .live_only(|node| node != n(3))
                .replicas()
                .collect()
        };
        assert_eq!(live(1), live(7), "both have primary 4 once node 3 is down");
        let big: Vec<Vec<NodeId>> = (0..9u8).map(|g| vec![n(2 * g + 1), n(2 * g + 2)]).collect();
        assert!(!Placement::new(big, 1).fully_replicated_fits());
    }

    #[test]
    fn one_node_holds_everything_with_one_replica() {
        let placement = Placement::new(vec![vec![n(5)]], 2);
        assert_eq!(placement.default_partitions(), 2);
        for p in 0..10 {
            let home = placement.home(p);
            assert_eq!(home.primary(), n(5));
            assert_eq!(home.backups().count(), 0);
            assert_eq!(home.ldm_instance, p % 2);
        }
    }

    #[test]
    fn backups_follow_the_primary_in_group_order() {
        let placement = Placement::new(vec![vec![n(1), n(2), n(3)]], 1);
        let chains: Vec<Vec<u8>> = (0..3)
            .map(|p| placement.home(p).replicas().map(NodeId::get).collect())
            .collect();
        assert_eq!(chains, vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
        assert_eq!(placement.group_of(n(3)), Some(0));
        assert_eq!(placement.group_of(n(9)), None);
    }
}
