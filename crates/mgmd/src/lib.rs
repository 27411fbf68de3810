//! The management server (NDB's `ndb_mgmd`) and its client.
//!
//! The management server holds the cluster configuration, hands out node
//! ids, tracks the state of every configured node, collects the cluster log
//! and answers `skarv admin`. It speaks the *mgm protocol*: frames of
//! signals (the same wire format as between data nodes) over plain TCP.
//!
//! The protocol is connection-oriented: the server answers on the connection
//! a request came in on.
//!
//! | request | answer | who |
//! | --- | --- | --- |
//! | `MgmAllocNodeIdReq` | `MgmAllocNodeIdConf` (node id, config.ini text) / `MgmAllocNodeIdRef` | data and API nodes |
//! | `MgmShowReq` | `MgmShowConf` (every configured node, in id order) | anyone |
//! | `MgmStopReq` | `MgmStopConf` (nodes ordered) / `MgmStopRef` | anyone |
//! | `MgmShutdownReq` | `MgmStopConf`, then the server stops | anyone |
//! | `MgmNodeStatusRep` | none; it is also the node's heartbeat; to a node that reports itself starting, one `MgmNotJoiningRep` per data node that said it will not come | sessions of data nodes |
//! | `CmNotJoiningRep` | none; the node will not take part in a start (damaged files) until it is given a node id again | sessions of data nodes |
//! | `MgmEventRep` | none; one cluster-log line, if the `CLUSTERLOG` filter lets it through | sessions |
//! | `MgmClusterLogReq` | `MgmClusterLogConf` (the filter after the change) / `MgmClusterLogRef` | anyone |
//! | `ArbitReq` | `ArbitConf` / `ArbitRef`: the arbitrator's vote after a split ([`arbitrator`]) | sessions of data nodes |
//! | (server) `MgmStopOrd` | the node stops, or restarts under its angel | to sessions of data nodes |
//!
//! On a connection that holds no node id, addresses are ignored (a client
//! does not know the server's node id yet). Once a node id is granted the
//! connection is that node's *session*: every signal on it must carry the
//! node id as its sender, else the server closes it; when it closes, the node
//! is gone (failed, unless it was ordered to stop). A data node that sends no
//! status report for `HEARTBEATS_MISSED_MAX` × `HeartbeatIntervalDbApi` is
//! declared failed and its session closed.
//!
//! - [`server`]: [`MgmServer`], the listener and a thread per connection.
//! - `registry`: the decisions — node ids, node states, heartbeats.
//! - [`client`]: [`MgmClient`] and the two halves of a session.
//! - [`cluster_log`]: the cluster log file.
//! - [`arbitrator`]: which side of a split data-node cluster goes on.

pub mod arbitrator;
pub mod client;
pub mod cluster_log;
mod error;
pub mod metrics;
mod registry;
pub mod server;
mod wire;

pub use arbitrator::{ArbitDecision, Arbitrator, VoteHolder};
pub use client::{Allocation, MgmClient, SessionReader, SessionWriter};
pub use error::MgmError;
pub use registry::HEARTBEATS_MISSED_MAX;
pub use server::{MgmServer, ServerOptions, CONNECTIONS_MAX, UNREGISTERED_IDLE_TIMEOUT_MS};
