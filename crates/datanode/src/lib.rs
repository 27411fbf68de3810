//! The data node: its blocks, and the process that runs them.
//!
//! - [`membership`]: heartbeats, failure detection, the president (NDB: QMGR).
//! - [`dictionary`]: the schema, changed by schema transactions and
//!   persisted on every node (NDB: DBDICT).
//! - [`ldm`]: the local data manager block: rows, indexes, locks, redo,
//!   checkpoints of the partitions of one `ldm` thread (NDB: DBLQH…).
//! - [`tc`]: the transaction coordinator block (NDB: DBTC).
//! - [`distribution`]: global checkpoints, the views passed to the TC and
//!   LDM instances, and the order to take over a failed node's
//!   transactions (NDB: DBDIH).
//! - [`dbinfo`]: the figures the TC and LDM instances publish and the
//!   ndbinfo rows the membership block answers `DbinfoScanReq` with
//!   (NDB: DBINFO).
//! - [`live_map`]: where partitions are served while nodes are down.
//! - `recently_aborted`: a bounded memory of aborted transaction ids, which
//!   the LDM and the TC blocks each keep their own of.
//! - [`wiring`]: the blocks that make a data node and how they are
//!   connected, the one list that the process, the simulator and the tests
//!   build their data nodes from.
//! - [`node`]: the data node process — configuration from the mgmd, the
//!   runtime, the transport, and the connections between them.
//! - [`angel`]: the parent process that restarts the data node when it dies.
//! - [`simulation`]: whole clusters of these blocks in the deterministic simulator.

pub mod alarm;
pub mod angel;
mod cluster_log;
pub mod dbinfo;
pub mod dictionary;
pub mod distribution;
pub mod ldm;
pub mod live_map;
pub mod membership;
pub mod node;
mod recently_aborted;
pub mod simulation;
pub mod subscription;
pub mod tc;
pub mod wiring;
