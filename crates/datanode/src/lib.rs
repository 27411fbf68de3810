//! The data node: its blocks, and the process that runs them.
//!
//! - [`membership`]: heartbeats, failure detection, the president (NDB: QMGR).
//! - [`dictionary`]: the schema, changed by schema transactions and
//!   persisted on every node (NDB: DBDICT).
//! - [`node`]: the data node process — configuration from the mgmd, the
//!   runtime, the transport, and the wiring between them.
//! - [`angel`]: the parent process that restarts the data node when it dies.
//! - [`simulation`]: whole clusters of these blocks in the deterministic simulator.

pub mod angel;
pub mod dictionary;
pub mod membership;
pub mod node;
pub mod simulation;
