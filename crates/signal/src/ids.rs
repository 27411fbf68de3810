//! Identities of nodes and blocks, and the node bitmask used by membership.

use std::fmt;

/// A node id, 1–255 as in NDB. Zero is never a valid node id.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct NodeId(u8);

impl NodeId {
    pub const MIN: u8 = 1;
    pub const MAX: u8 = 255;

    /// Returns `None` for 0, the only value that is not a node id.
    pub const fn new(value: u8) -> Option<NodeId> {
        if value == 0 {
            None
        } else {
            Some(NodeId(value))
        }
    }

    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Nodes a write goes on to after the one that has it, at most: a node
/// group's replicas but the first (`config::placement::REPLICAS_MAX`, 4).
pub const CHAIN_MAX: usize = 3;

/// The replicas a write request goes on to after the node that has it,
/// in order (NDB: the replica list of LQHKEYREQ). Kept inline, at most
/// [`CHAIN_MAX`], so that building, sending and receiving a request
/// allocates nothing for it (a `Vec` cost a malloc at the TC and a free
/// at the receiver per request). On the wire as a list of node ids: a
/// `u32` count, then a byte per node.
#[derive(Copy, Clone, Default, Eq, PartialEq, Hash)]
pub struct Chain {
    len: u8,
    nodes: [u8; CHAIN_MAX],
}

impl Chain {
    pub const fn new() -> Chain {
        Chain {
            len: 0,
            nodes: [0; CHAIN_MAX],
        }
    }

    /// Appends `node`.
    ///
    /// # Panics
    /// When the chain holds `CHAIN_MAX` nodes already (a node group has
    /// at most `CHAIN_MAX + 1` replicas).
    pub fn push(&mut self, node: NodeId) {
        let at = self.len as usize;
        assert!(at < CHAIN_MAX, "a chain of more than {CHAIN_MAX} nodes");
        self.nodes[at] = node.get();
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The node at `at`.
    ///
    /// # Panics
    /// When `at` is not below `len()`.
    pub fn get(&self, at: usize) -> NodeId {
        assert!(at < self.len(), "chain index {at} of {}", self.len);
        NodeId(self.nodes[at])
    }

    pub fn first(&self) -> Option<NodeId> {
        (self.len > 0).then(|| NodeId(self.nodes[0]))
    }

    /// The chain without its first node.
    pub fn rest(&self) -> Chain {
        self.iter().skip(1).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes[..self.len()].iter().map(|&n| NodeId(n))
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.iter().any(|n| n == node)
    }

    /// Keeps the nodes for which `keep` holds, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(NodeId) -> bool) {
        *self = self.iter().filter(|&n| keep(n)).collect();
    }
}

impl FromIterator<NodeId> for Chain {
    /// # Panics
    /// On more than `CHAIN_MAX` nodes.
    fn from_iter<I: IntoIterator<Item = NodeId>>(nodes: I) -> Chain {
        let mut chain = Chain::new();
        for node in nodes {
            chain.push(node);
        }
        chain
    }
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The number of a block kind. Numbers are part of the wire format: never reuse one.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Debug)]
pub struct BlockNumber(pub u8);

impl BlockNumber {
    /// Membership: heartbeats, failure detection, the president (NDB: QMGR/NDBCNTR).
    pub const MEMBERSHIP: BlockNumber = BlockNumber(1);
    /// Distribution: partition map, GCP and LCP rounds (NDB: DBDIH). Reserved.
    pub const DISTRIBUTION: BlockNumber = BlockNumber(2);
    /// Dictionary: schema (NDB: DBDICT). Reserved.
    pub const DICTIONARY: BlockNumber = BlockNumber(3);
    /// Transaction coordinator (NDB: DBTC). Reserved.
    pub const TRANSACTION_COORDINATOR: BlockNumber = BlockNumber(4);
    /// Local data manager (NDB: DBLQH+DBACC+DBTUP+DBTUX). Reserved.
    pub const LOCAL_DATA_MANAGER: BlockNumber = BlockNumber(5);
    /// The subscription manager: the change stream (NDB: SUMA), on the
    /// `rep` thread.
    pub const SUBSCRIPTION: BlockNumber = BlockNumber(6);
    /// The management server's request handler.
    pub const MANAGEMENT: BlockNumber = BlockNumber(64);
    /// The cluster manager of an API node (NDB API: ClusterMgr).
    pub const API_CLUSTER: BlockNumber = BlockNumber(65);
    /// The process glue of a node outside any block (mgm session, angel control).
    pub const PROCESS: BlockNumber = BlockNumber(66);
    /// The node's file system service on its `io` threads, the sender of
    /// `FsConf` (NDB: NDBFS). Not a block: the runtime runs file requests.
    pub const FILE_SYSTEM: BlockNumber = BlockNumber(67);

    /// The name NDB gives the block that does this one's work (ndbinfo's
    /// `block_name`: `DBTC`, `DBLQH`, ...; docs/glossary.md), or `None`
    /// for a number no block has.
    pub const fn ndb_name(self) -> Option<&'static str> {
        Some(match self {
            BlockNumber::MEMBERSHIP => "QMGR",
            BlockNumber::DISTRIBUTION => "DBDIH",
            BlockNumber::DICTIONARY => "DBDICT",
            BlockNumber::TRANSACTION_COORDINATOR => "DBTC",
            BlockNumber::LOCAL_DATA_MANAGER => "DBLQH",
            BlockNumber::SUBSCRIPTION => "SUMA",
            BlockNumber::MANAGEMENT => "MGM",
            BlockNumber::API_CLUSTER => "CLUSTERMGR",
            BlockNumber::PROCESS => "PROCESS",
            BlockNumber::FILE_SYSTEM => "NDBFS",
            _ => return None,
        })
    }
}

/// Bits of a transaction id that count; the bits above hold the id of the
/// API node that made it (docs/transactions.md): every node can tell a
/// transaction's client from its id alone.
pub const TX_COUNTER_BITS: u32 = 48;

/// The API node that made transaction id `tx_id`.
pub fn tx_node(tx_id: u64) -> u8 {
    (tx_id >> TX_COUNTER_BITS) as u8
}

/// The LDM instances a commit still goes through after the one it is sent
/// to (`LdmCommitChainReq::next`): inline for the usual chain, so that
/// sending a commit allocates nothing and neither does receiving it (a
/// `Vec` cost a malloc at the TC and a free at each receiver per
/// two-phase commit). On the wire as a list of block references.
pub type RefChain = smallvec::SmallVec<[BlockRef; REF_CHAIN_INLINE]>;

/// Block references a [`RefChain`] holds without allocating: a chain of
/// four LDM instances after the first.
pub const REF_CHAIN_INLINE: usize = 4;

/// Address of one block instance on one node.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Debug)]
pub struct BlockRef {
    pub node: NodeId,
    pub block: BlockNumber,
    pub instance: u16,
}

impl BlockRef {
    pub const fn new(node: NodeId, block: BlockNumber, instance: u16) -> BlockRef {
        BlockRef {
            node,
            block,
            instance,
        }
    }
}

impl BlockRef {
    /// NDB's 32-bit block reference of this address: the block number
    /// (low 9 bits) and instance above it in the high half, the node in the
    /// low half (ndbinfo's `client_block_ref`). An instance above 127 does
    /// not fit and is cut to its low 7 bits.
    pub fn ndb_number(self) -> u32 {
        let block = u32::from(self.block.0) | (u32::from(self.instance & 0x7f) << 9);
        (block << 16) | u32::from(self.node.get())
    }
}

impl fmt::Display for BlockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.node, self.block.0, self.instance)
    }
}

/// A set of node ids (bit i = node i; bit 0 is never set).
#[derive(Copy, Clone, Eq, PartialEq, Hash, Default)]
pub struct NodeBitmask(pub [u64; 4]);

impl NodeBitmask {
    pub const BYTES: usize = 32;

    pub const fn new() -> NodeBitmask {
        NodeBitmask([0; 4])
    }

    pub fn insert(&mut self, node: NodeId) {
        let n = node.get() as usize;
        self.0[n / 64] |= 1 << (n % 64);
    }

    pub fn remove(&mut self, node: NodeId) {
        let n = node.get() as usize;
        self.0[n / 64] &= !(1 << (n % 64));
    }

    pub fn contains(&self, node: NodeId) -> bool {
        let n = node.get() as usize;
        self.0[n / 64] & (1 << (n % 64)) != 0
    }

    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The nodes in `self` or in `other`.
    pub fn union(&self, other: &NodeBitmask) -> NodeBitmask {
        let mut out = *self;
        for (w, o) in out.0.iter_mut().zip(other.0) {
            *w |= o;
        }
        out
    }

    /// The nodes in `self` and not in `other`.
    pub fn difference(&self, other: &NodeBitmask) -> NodeBitmask {
        let mut out = *self;
        for (w, o) in out.0.iter_mut().zip(other.0) {
            *w &= !o;
        }
        out
    }

    /// The nodes in both.
    pub fn intersection(&self, other: &NodeBitmask) -> NodeBitmask {
        let mut out = *self;
        for (w, o) in out.0.iter_mut().zip(other.0) {
            *w &= o;
        }
        out
    }

    /// Whether a node is in both.
    pub fn intersects(&self, other: &NodeBitmask) -> bool {
        self.0.iter().zip(other.0).any(|(w, o)| w & o != 0)
    }

    /// Node ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        (1..=255u8)
            .filter_map(NodeId::new)
            .filter(move |n| self.contains(*n))
    }
}

impl fmt::Debug for NodeBitmask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(|n| n.get())).finish()
    }
}

impl FromIterator<NodeId> for NodeBitmask {
    fn from_iter<T: IntoIterator<Item = NodeId>>(iter: T) -> Self {
        let mut mask = NodeBitmask::new();
        for node in iter {
            mask.insert(node);
        }
        mask
    }
}
