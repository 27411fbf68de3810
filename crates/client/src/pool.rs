//! [`ClusterPool`]: several cluster connections in one process.
//!
//! One connection's receive thread and sockets carry only so much (seed
//! 003: about one connection per 8 CPU cores), so a busy process opens
//! several; each is an API node of its own. Sessions are spread over the
//! connections round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cluster::{Cluster, ClusterOptions};
use crate::error::Result;
use crate::session::Session;

/// Most connections in one pool (an API node id each).
pub const POOL_SIZE_MAX: usize = 64;

/// A pool of cluster connections (see the module doc).
pub struct ClusterPool {
    connections: Vec<Cluster>,
    next: AtomicUsize,
}

impl ClusterPool {
    /// Opens `options.pool_size` connections (at least one) to the cluster.
    pub fn connect(connect_string: &str, options: ClusterOptions) -> Result<ClusterPool> {
        let size = options.pool_size.clamp(1, POOL_SIZE_MAX);
        // A node id names one slot: the first connection takes the one
        // asked for, the others any free one. All share one cache of
        // table definitions, so a table one drops is read again by all.
        let table_cache = options.table_cache.clone().unwrap_or_default();
        let connections = (0..size)
            .map(|index| {
                let node_id = if index == 0 { options.node_id } else { None };
                Cluster::connect_with(
                    connect_string,
                    ClusterOptions {
                        node_id,
                        table_cache: Some(table_cache.clone()),
                        ..options.clone()
                    },
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ClusterPool {
            connections,
            next: AtomicUsize::new(0),
        })
    }

    /// A session on the next connection, round-robin.
    pub fn session(&self) -> Result<Session> {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[at].session()
    }

    /// The pool's connections.
    pub fn connections(&self) -> &[Cluster] {
        &self.connections
    }
}
