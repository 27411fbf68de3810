//! The one list of the blocks that make a data node, and how they are
//! connected: membership, dictionary, distribution, the TC instances and
//! the LDM instances, each told the addresses of the others it serves.
//!
//! The data node process ([`crate::node`]), the simulator
//! ([`crate::simulation::cluster`]) and every test build their data nodes
//! here, so what the simulator and the tests run is what a real node runs.
//! What differs between them is data, in [`NodeSpec`] (timings, limits,
//! sizes, the data directory) and the [`Disk`] given to
//! [`data_node_blocks`]; a test that needs a block of its own in place of a
//! real one swaps it with [`replace_block`] after the wiring, at the same
//! address. Runtime-only parts (transport, pollers, the mgm session) stay in
//! `node.rs`.

use std::path::PathBuf;
use std::time::Duration;

use config::Placement;
use kernel::runtime::BlockPlacement;
use kernel::thread_config::ThreadRole;
use kernel::Block;
use signal::{BlockNumber, BlockRef, NodeId};
use storage::disk::Disk;
use storage::instance::LdmConfig;

use crate::dictionary::{self, Dictionary, DictionaryConfig};
use crate::distribution::{Distribution, DistributionConfig};
use crate::ldm::{LdmBlock, LdmBlockConfig};
use crate::membership::{Membership, MembershipConfig};
use crate::subscription::{SubscriptionBlock, SubscriptionConfig};
use crate::tc::{TcBlock, TcConfig};

/// Everything that differs between one data node incarnation and another:
/// production fills it from the configuration ([`NodeSpec::from_config`]),
/// the simulator and the tests from [`NodeSpec::simulated`].
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub node: NodeId,
    /// Every data node of the cluster.
    pub data_nodes: Vec<NodeId>,
    /// The management server that arbitrates and hears status reports;
    /// `None`: no arbitrator (a tie goes on).
    pub mgmd: Option<NodeId>,
    /// Node groups and LDM instances per node (the same on every node).
    pub placement: Placement,
    /// TC instances of this node (the same on every node).
    pub tc_instances: u32,
    /// `DataDir`: the node's files are under `<data_dir>/ndb_<node>_fs`.
    pub data_dir: PathBuf,
    /// Tells this incarnation apart from earlier ones of the node.
    pub start_id: u64,
    pub pid: u32,
    /// `HeartbeatIntervalDbDb`.
    pub heartbeat_interval: Duration,
    /// `HeartbeatIntervalDbApi`.
    pub api_heartbeat_interval: Duration,
    /// `StartPartialTimeout`.
    pub start_partial_timeout: Duration,
    /// `ArbitrationTimeout`.
    pub arbitration_timeout: Duration,
    /// `TimeBetweenGlobalCheckpoints`.
    pub gcp_interval: Duration,
    /// `TimeBetweenGlobalCheckpointsTimeout`: zero never excludes.
    pub gcp_stop_timeout: Duration,
    /// `TimeBetweenEpochs`: zero runs no micro-GCPs.
    pub epoch_interval: Duration,
    /// `TransactionDeadlockDetectionTimeout`.
    pub deadlock_timeout: Duration,
    /// `MaxBufferedEpochs`: epochs the subscription block keeps for a
    /// subscriber that has not acknowledged them.
    pub max_buffered_epochs: u32,
    /// `MaxBufferedEpochBytes`: bytes of row changes it holds at most.
    pub max_buffered_epoch_bytes: u64,
    /// `MaxNoOfConcurrentTransactions`, per TC instance.
    pub transactions_max: u32,
    /// `MaxNoOfConcurrentOperations`, per TC instance.
    pub operations_max: u32,
    /// `MaxNoOfConcurrentScans`, per TC instance.
    pub scans_max: u32,
    /// How often an LDM instance with changes starts a local checkpoint.
    pub lcp_interval: Duration,
    /// `DataMemory` of the node: each LDM instance gets an even share.
    pub data_memory_bytes: u64,
    /// `FragmentLogFileSize`.
    pub redo_file_size_bytes: u64,
    /// `NoOfFragmentLogParts` of the node, shared out by [`log_parts_of`].
    pub redo_log_parts: u32,
    /// `NoOfFragmentLogFiles`: files of one redo log part.
    pub redo_files_per_part: u32,
    /// Blocks not built. A real node leaves out none; a test of one block
    /// leaves out those it plays itself or does not need (the dictionary's
    /// tests run membership and dictionary alone), and the blocks built
    /// are told only of those there are.
    pub left_out: Vec<BlockNumber>,
}

impl NodeSpec {
    /// Node `node` of `placement` as the simulator runs it: one TC, small
    /// memory and redo log (16 MiB of `DataMemory` and four 1 MiB redo
    /// files per LDM instance), no arbitrator, files under `/data`. The
    /// caller sets the timings it tests and the start id of each
    /// incarnation.
    pub fn simulated(node: NodeId, placement: Placement) -> NodeSpec {
        let ldm_instances = placement.ldm_instances();
        let mut data_nodes: Vec<NodeId> =
            placement.node_groups().iter().flatten().copied().collect();
        data_nodes.sort_unstable();
        assert!(
            data_nodes.contains(&node),
            "{node} is no data node of {placement:?}"
        );
        NodeSpec {
            node,
            data_nodes,
            mgmd: None,
            placement,
            tc_instances: 1,
            data_dir: PathBuf::from("/data"),
            start_id: 0,
            pid: 1000 + u32::from(node.get()),
            heartbeat_interval: Duration::from_millis(100),
            api_heartbeat_interval: Duration::from_millis(100),
            start_partial_timeout: Duration::from_secs(1),
            arbitration_timeout: Duration::from_millis(500),
            gcp_interval: Duration::from_millis(50),
            gcp_stop_timeout: Duration::from_secs(2),
            epoch_interval: Duration::ZERO,
            deadlock_timeout: Duration::from_millis(300),
            max_buffered_epochs: 100,
            max_buffered_epoch_bytes: 26_214_400,
            transactions_max: 256,
            operations_max: 4_096,
            scans_max: 8,
            lcp_interval: Duration::from_secs(5),
            data_memory_bytes: u64::from(ldm_instances) * (16 << 20),
            redo_file_size_bytes: 1 << 20,
            // One part per instance: four files each.
            redo_log_parts: ldm_instances,
            redo_files_per_part: 4,
            left_out: Vec::new(),
        }
    }

    /// Node `me` of `config` as the configuration describes it.
    ///
    /// # Errors
    /// When the node's `ThreadConfig` runs another LDM count than the
    /// cluster's placement (every data node must run the same).
    pub fn from_config(
        me: &config::DataNode,
        config: &config::ClusterConfig,
        start_id: u64,
        pid: u32,
    ) -> Result<NodeSpec, String> {
        let node = me.node_id;
        let placement = Placement::of(config);
        let params = &me.params;
        let instances = config::placement::ldm_instances_of(&params.threads);
        if instances != placement.ldm_instances() {
            // Partitions are placed on LDM instance numbers that every node
            // and client compute alike.
            return Err(format!(
                "node {node} runs {instances} LDM threads, the first data node {}: \
                 every data node must run the same number (ThreadConfig ldm count)",
                placement.ldm_instances()
            ));
        }
        let ms = |ms: u32| Duration::from_millis(u64::from(ms));
        Ok(NodeSpec {
            node,
            data_nodes: config.data_nodes.iter().map(|d| d.node_id).collect(),
            mgmd: Some(config.mgmd().node_id),
            placement,
            tc_instances: params.threads.count(ThreadRole::Tc).max(1),
            data_dir: me.data_dir.clone(),
            start_id,
            pid,
            heartbeat_interval: ms(params.heartbeat_interval_db_db_ms),
            api_heartbeat_interval: ms(params.heartbeat_interval_db_api_ms),
            start_partial_timeout: ms(params.start_partial_timeout_ms),
            arbitration_timeout: ms(params.arbitration_timeout_ms),
            gcp_interval: ms(params.time_between_global_checkpoints_ms),
            gcp_stop_timeout: ms(params.time_between_global_checkpoints_timeout_ms),
            epoch_interval: ms(params.time_between_epochs_ms),
            deadlock_timeout: ms(params.transaction_deadlock_detection_timeout_ms),
            max_buffered_epochs: params.max_buffered_epochs,
            max_buffered_epoch_bytes: u64::from(params.max_buffered_epoch_bytes),
            transactions_max: params.max_no_of_concurrent_transactions,
            operations_max: params.max_no_of_concurrent_operations,
            scans_max: params.max_no_of_concurrent_scans,
            lcp_interval: crate::ldm::LCP_INTERVAL_DEFAULT,
            data_memory_bytes: params.data_memory_bytes,
            redo_file_size_bytes: params.fragment_log_file_size_bytes,
            redo_log_parts: params.no_of_fragment_log_parts,
            redo_files_per_part: params.no_of_fragment_log_files,
            left_out: Vec::new(),
        })
    }

    /// `<data dir>/ndb_<node>_fs`: the sysfile and the LDM instances' files.
    pub fn fs_dir(&self) -> PathBuf {
        self.data_dir.join(format!("ndb_{}_fs", self.node))
    }

    fn builds(&self, block: BlockNumber) -> bool {
        !self.left_out.contains(&block)
    }

    pub(crate) fn tc_addresses(&self) -> Vec<BlockRef> {
        if !self.builds(BlockNumber::TRANSACTION_COORDINATOR) {
            return Vec::new();
        }
        (0..self.tc_instances)
            .map(|instance| TcBlock::address(self.node, instance))
            .collect()
    }

    pub(crate) fn ldm_addresses(&self) -> Vec<BlockRef> {
        if !self.builds(BlockNumber::LOCAL_DATA_MANAGER) {
            return Vec::new();
        }
        (0..self.placement.ldm_instances())
            .map(|instance| {
                BlockRef::new(self.node, BlockNumber::LOCAL_DATA_MANAGER, instance as u16)
            })
            .collect()
    }
}

/// The blocks of one data node incarnation, each with the thread role it
/// runs on: membership, dictionary and distribution on `main`, an LDM per
/// `ldm` thread and a TC per `tc` thread (the runtime puts them on
/// `main` when there are none), the subscription block on `rep`. Every block that keeps files keeps them on
/// `disk`, under [`NodeSpec::fs_dir`].
///
/// # Errors
/// When the dictionary cannot load its schema or the distribution block
/// its sysfile (the message names the file).
pub fn data_node_blocks<D: Disk + Clone + Send + 'static>(
    spec: &NodeSpec,
    disk: D,
) -> Result<Vec<BlockPlacement>, String> {
    data_node_blocks_with(spec, disk, None, None)
}

/// [`data_node_blocks`] of a node run with `--discard-corrupt`: its LDM
/// instances ask through `discard` to move damaged files aside. The blocks
/// publish their ndbinfo figures into `figures` (sized for `spec`'s TC and
/// LDM instances) where given, so that the node can add the runtime's and
/// the transport's; into figures of their own otherwise.
pub fn data_node_blocks_with<D: Disk + Clone + Send + 'static>(
    spec: &NodeSpec,
    disk: D,
    discard: Option<crate::ldm::DiscardCorrupt>,
    figures: Option<std::sync::Arc<crate::dbinfo::NodeFigures>>,
) -> Result<Vec<BlockPlacement>, String> {
    assert!(
        spec.builds(BlockNumber::MEMBERSHIP),
        "a data node has a membership block"
    );
    assert!(spec.tc_instances >= 1 && spec.placement.ldm_instances() >= 1);
    let node = spec.node;
    let tcs = spec.tc_addresses();
    let ldms = spec.ldm_addresses();
    let figures = figures
        .unwrap_or_else(|| crate::dbinfo::NodeFigures::new(tcs.len() as u32, ldms.len() as u32));
    let mut blocks = Vec::new();
    let mut push = |address: BlockRef, role: ThreadRole, block: Box<dyn Block>| {
        blocks.push(BlockPlacement {
            address,
            role,
            block,
        });
    };

    let membership = Membership::new(MembershipConfig {
        node,
        data_nodes: spec.data_nodes.clone(),
        mgmd: spec.mgmd,
        heartbeat_interval: spec.heartbeat_interval,
        api_heartbeat_interval: spec.api_heartbeat_interval,
        start_partial_timeout: spec.start_partial_timeout,
        start_id: spec.start_id,
        pid: spec.pid,
    })
    // Membership ends the transactions of a failed API node on these.
    .with_local_tcs(tcs.clone())
    // A side of a split that lacks a whole node group stops (it cannot
    // hold all data); see docs/membership.md.
    .with_node_groups(spec.placement.node_groups().to_vec())
    // Arbitration after a split waits ArbitrationTimeout (docs/membership.md).
    .with_arbitration_timeout(spec.arbitration_timeout)
    // It answers ndbinfo scans from the figures the TCs and LDMs publish.
    .with_figures(figures.clone());
    // A subscription of an API node that stays gone ends (docs/events.md).
    let membership = if spec.builds(BlockNumber::SUBSCRIPTION) {
        membership.with_subscription(SubscriptionBlock::address(node))
    } else {
        membership
    };
    push(
        BlockRef::new(node, BlockNumber::MEMBERSHIP, 0),
        ThreadRole::Main,
        Box::new(membership),
    );

    if spec.builds(BlockNumber::DICTIONARY) {
        // The blocks that hold the schema besides the dictionary.
        let local_schema_blocks: Vec<BlockRef> = ldms.iter().chain(&tcs).copied().collect();
        let dictionary = Dictionary::new(
            DictionaryConfig {
                node,
                schema_dir: dictionary::schema_dir(&spec.data_dir, node),
            },
            Box::new(disk.clone()),
        )
        .map_err(|e| format!("dictionary: {e}"))?
        .with_local_blocks(local_schema_blocks, spec.placement.default_partitions())
        .with_data_nodes(spec.placement.data_nodes());
        push(
            BlockRef::new(node, BlockNumber::DICTIONARY, 0),
            ThreadRole::Main,
            Box::new(dictionary),
        );
    }

    if spec.builds(BlockNumber::DISTRIBUTION) {
        let distribution = Distribution::new(DistributionConfig {
            node,
            gcp_interval: spec.gcp_interval,
            gcp_stop_timeout: spec.gcp_stop_timeout,
            epoch_interval: spec.epoch_interval,
            tc_instances: tcs.len() as u32,
            ldm_instances: ldms.len() as u32,
        })
        .with_cluster_log(spec.mgmd)
        // As master it publishes the restarts it sees (restart_info).
        .with_figures(figures.clone())
        .with_sysfile(
            Box::new(disk.clone()),
            spec.fs_dir(),
            spec.placement.node_groups().to_vec(),
        )?;
        push(
            Distribution::address(node),
            ThreadRole::Main,
            Box::new(distribution),
        );
    }

    let instances = spec.placement.ldm_instances();
    for (instance, &address) in (0u32..).zip(&ldms) {
        let ldm = LdmBlock::new(
            LdmBlockConfig {
                node,
                instance,
                placement: spec.placement.clone(),
                ldm: ldm_config(spec, instance, instances),
                lcp_interval: spec.lcp_interval,
            },
            disk.clone(),
        );
        let ldm = ldm
            .with_cluster_log(spec.mgmd)
            .with_figures(crate::dbinfo::FigureSlot::ldm(&figures, instance));
        let ldm = if spec.builds(BlockNumber::SUBSCRIPTION) {
            ldm.with_subscription(SubscriptionBlock::address(node))
        } else {
            ldm
        };
        let ldm = match &discard {
            Some(discard) => ldm.with_discard_corrupt(discard.clone()),
            None => ldm,
        };
        debug_assert_eq!(ldm.address(), address);
        push(address, ThreadRole::Ldm, Box::new(ldm));
    }

    for (instance, &address) in (0u32..).zip(&tcs) {
        let tc = TcBlock::new(TcConfig {
            node,
            instance,
            placement: spec.placement.clone(),
            tc_instances: spec.tc_instances,
            transactions_max: spec.transactions_max,
            operations_max: spec.operations_max,
            scans_max: spec.scans_max,
            deadlock_timeout: spec.deadlock_timeout,
        })
        .with_figures(crate::dbinfo::FigureSlot::tc(&figures, instance));
        let tc = if spec.builds(BlockNumber::SUBSCRIPTION) {
            tc.with_subscription(SubscriptionBlock::address(node))
        } else {
            tc
        };
        push(address, ThreadRole::Tc, Box::new(tc));
    }

    if spec.builds(BlockNumber::SUBSCRIPTION) {
        // The change stream, on the `rep` thread as NDB's SUMA: apart from
        // the LDM and TC threads whose work it must not slow down.
        let subscription = SubscriptionBlock::new(SubscriptionConfig {
            node,
            ldms: ldms.clone(),
            placement: spec.placement.clone(),
            max_buffered_epochs: spec.max_buffered_epochs,
            max_buffered_epoch_bytes: spec.max_buffered_epoch_bytes,
        });
        push(
            SubscriptionBlock::address(node),
            ThreadRole::Rep,
            Box::new(subscription),
        );
    }
    Ok(blocks)
}

/// LDM instance `instance` of `instances`: its directory
/// `<fs dir>/ldm<i>`, an even share of `DataMemory`, and its share of the
/// redo log ([`log_parts_of`]).
fn ldm_config(spec: &NodeSpec, instance: u32, instances: u32) -> LdmConfig {
    let mut ldm = LdmConfig::new(instance, spec.fs_dir().join(format!("ldm{instance}")));
    ldm.data_memory_bytes = spec.data_memory_bytes / u64::from(instances);
    ldm.redo_file_size_bytes = spec.redo_file_size_bytes;
    let parts = log_parts_of(instance, instances, spec.redo_log_parts);
    let files = spec.redo_files_per_part;
    // Past `u32::MAX` is past the part's file limit too, which its open
    // reports.
    ldm.redo_files = files.saturating_mul(parts);
    ldm.redo_earlier_files = (parts != 1).then_some(files);
    ldm
}

/// The redo log parts of `NoOfFragmentLogParts` (`parts`) that LDM instance
/// `instance` of `instances` has: as in NDB, part `p` belongs to instance
/// `p mod instances`. An instance keeps one ring of files here, holding its
/// parts' files (`NoOfFragmentLogFiles` each), so a node's redo log holds
/// `parts × NoOfFragmentLogFiles × FragmentLogFileSize` bytes whatever its
/// LDM thread count.
pub fn log_parts_of(instance: u32, instances: u32, parts: u32) -> u32 {
    assert!(
        instance < instances && parts >= instances,
        "LDM instance {instance} of {instances} with {parts} redo log parts (the config checks parts >= instances)"
    );
    parts / instances + u32::from(instance < parts % instances)
}

/// Puts the block `with` makes of the block at `address` in its place: a
/// test wraps a real block or stands a recorder in for it.
///
/// # Panics
/// When `blocks` has no block at `address`.
pub fn replace_block(
    blocks: &mut [BlockPlacement],
    address: BlockRef,
    with: impl FnOnce(Box<dyn Block>) -> Box<dyn Block>,
) {
    let placed = blocks
        .iter_mut()
        .find(|b| b.address == address)
        .unwrap_or_else(|| panic!("the data node has no block {address}"));
    // A placeholder while `with` owns the real block.
    let real = std::mem::replace(&mut placed.block, Box::new(Vacant));
    placed.block = with(real);
}

/// Stands in for a block for the length of a [`replace_block`] call.
struct Vacant;

impl Block for Vacant {
    fn execute(&mut self, signal: signal::Signal, _ctx: &mut kernel::Context<'_>) {
        unreachable!("{} reached a block being replaced", signal.body.name());
    }
}

/// The blocks as the simulator takes them: by address (the simulator has
/// no threads).
pub fn for_simulation(blocks: Vec<BlockPlacement>) -> Vec<(BlockRef, Box<dyn Block>)> {
    blocks.into_iter().map(|b| (b.address, b.block)).collect()
}

#[cfg(test)]
mod tests {
    use kernel::thread_config::ThreadRole;
    use signal::{BlockNumber, BlockRef, NodeId};
    use storage::disk::SimDisk;

    use super::{data_node_blocks, log_parts_of, replace_block, NodeSpec};

    fn configured(node: u8) -> NodeSpec {
        let ini = "[ndbd default]\nNoOfReplicas=2\nDataMemory=32M\n\
                   ThreadConfig=ldm={count=2},tc={count=2},main,recv\n\
                   [ndb_mgmd]\n[ndbd]\n[ndbd]\n";
        let config = config::parse(ini, "test.ini").expect("a valid config");
        let me = config
            .data_node(NodeId::new(node).unwrap())
            .expect("a data node");
        NodeSpec::from_config(me, &config, 7, 1).expect("a valid node")
    }

    /// (block, instance, role) of each block built.
    fn layout(spec: &NodeSpec) -> Vec<(BlockNumber, u16, ThreadRole)> {
        let blocks = data_node_blocks(spec, SimDisk::new(1)).expect("wired");
        for b in &blocks {
            assert_eq!(b.address.node, spec.node, "{}", b.address);
        }
        blocks
            .iter()
            .map(|b| (b.address.block, b.address.instance, b.role))
            .collect()
    }

    #[test]
    fn a_configured_node_runs_every_block_on_its_threads() {
        let spec = configured(2);
        assert_eq!((spec.tc_instances, spec.placement.ldm_instances()), (2, 2));
        assert_eq!(spec.data_memory_bytes, 32 << 20);
        assert_eq!(spec.fs_dir(), spec.data_dir.join("ndb_2_fs"));
        use BlockNumber as B;
        use ThreadRole::{Ldm, Main, Rep, Tc};
        assert_eq!(
            layout(&spec),
            [
                (B::MEMBERSHIP, 0, Main),
                (B::DICTIONARY, 0, Main),
                (B::DISTRIBUTION, 0, Main),
                (B::LOCAL_DATA_MANAGER, 0, Ldm),
                (B::LOCAL_DATA_MANAGER, 1, Ldm),
                (B::TRANSACTION_COORDINATOR, 0, Tc),
                (B::TRANSACTION_COORDINATOR, 1, Tc),
                (B::SUBSCRIPTION, 0, Rep),
            ]
        );
    }

    #[test]
    fn blocks_left_out_are_not_built() {
        let mut spec = NodeSpec::simulated(
            NodeId::new(3).unwrap(),
            config::Placement::new(vec![vec![NodeId::new(3).unwrap()]], 1),
        );
        spec.left_out = vec![
            BlockNumber::TRANSACTION_COORDINATOR,
            BlockNumber::DISTRIBUTION,
            BlockNumber::SUBSCRIPTION,
        ];
        let built: Vec<BlockNumber> = layout(&spec).into_iter().map(|b| b.0).collect();
        assert_eq!(
            built,
            [
                BlockNumber::MEMBERSHIP,
                BlockNumber::DICTIONARY,
                BlockNumber::LOCAL_DATA_MANAGER
            ]
        );
    }

    #[test]
    fn a_node_with_another_ldm_count_is_refused() {
        let ini = "[ndb_mgmd]\n[ndbd]\nThreadConfig=ldm={count=2}\n\
                   [ndbd]\nThreadConfig=ldm={count=1}\n";
        let config = config::parse(ini, "test.ini").expect("a valid config");
        let second = &config.data_nodes[1];
        let error = NodeSpec::from_config(second, &config, 7, 1).expect_err("refused");
        assert!(
            error.contains("every data node must run the same number"),
            "{error}"
        );
    }

    /// A block of a test's own in place of the wired one.
    struct Stand;

    impl kernel::Block for Stand {
        fn execute(&mut self, _signal: signal::Signal, _ctx: &mut kernel::Context<'_>) {}
    }

    #[test]
    fn a_block_is_replaced_at_its_address() {
        let spec = configured(3);
        let mut blocks = data_node_blocks(&spec, SimDisk::new(1)).expect("wired");
        let tc = BlockRef::new(spec.node, BlockNumber::TRANSACTION_COORDINATOR, 1);
        let mut was_tc = false;
        replace_block(&mut blocks, tc, |real| {
            was_tc = real.as_any().is::<crate::tc::TcBlock>();
            Box::new(Stand)
        });
        assert!(was_tc);
        let placed = blocks
            .iter()
            .find(|b| b.address == tc)
            .expect("still there");
        assert!(placed.block.as_any().is::<Stand>());
        assert_eq!(placed.role, ThreadRole::Tc);
    }

    #[test]
    fn redo_log_parts_are_shared_out_round_robin() {
        // NDB's default 4 parts on one LDM instance (the sandbox's layout
        // on a small machine): all four, so 4 × the files of one part.
        assert_eq!(log_parts_of(0, 1, 4), 4);
        assert_eq!(
            (0..2).map(|i| log_parts_of(i, 2, 4)).collect::<Vec<_>>(),
            [2, 2]
        );
        assert_eq!(
            (0..4).map(|i| log_parts_of(i, 4, 6)).collect::<Vec<_>>(),
            [2, 2, 1, 1]
        );
        assert_eq!((0..8).map(|i| log_parts_of(i, 8, 8)).sum::<u32>(), 8);
        for instances in 1..=32 {
            for parts in [4, 6, 8, 12, 16, 24, 32]
                .into_iter()
                .filter(|&p| p >= instances)
            {
                let shares: Vec<u32> = (0..instances)
                    .map(|i| log_parts_of(i, instances, parts))
                    .collect();
                assert_eq!(
                    shares.iter().sum::<u32>(),
                    parts,
                    "{parts} parts on {instances}"
                );
                assert!(shares.iter().all(|&s| s >= 1));
            }
        }
    }
}
