//! The cluster configuration, read from `config.ini` in NDB's syntax.
//!
//! The management server reads the file and hands the result to every node;
//! a file written for NDB (7.x and later) should mean the same here, or be
//! refused with a message naming the line, the parameter and what is allowed.
//!
//! - [`parse`] / [`load`]: text or file to a [`ClusterConfig`].
//! - `syntax`: sections and `name=value` lines, with line numbers.
//! - `parameters`: the parameters, NDB's defaults and ranges, value forms.
//! - `cluster`: defaults applied, node ids placed, cross-node rules checked.
//! - [`placement`]: where each partition lives (node group, replicas, LDM
//!   instance), shared by data nodes and clients.
//!
//! Sections: `[ndbd default]`, `[ndbd]`, `[ndb_mgmd default]`, `[ndb_mgmd]`,
//! `[api default]`, `[api]`, `[mysqld default]`, `[mysqld]` and NDB's aliases
//! `[db ...]`, `[mgm ...]`; `[tcp default]` is accepted with NDB's transporter
//! parameters, which Skarv does not use. A cluster needs at least one
//! `[ndb_mgmd]` and one `[ndbd]`.

mod cluster;
mod error;
mod parameters;
pub mod placement;
mod syntax;

use std::io::Read;
use std::path::{Path, PathBuf};

use kernel::thread_config::ThreadLayout;
use signal::{NodeId, NodeType};

pub use error::{ConfigError, ConfigErrorKind};

pub use placement::{PartitionHome, Placement};

/// The largest configuration file [`load`] reads: far above any real
/// `config.ini`, small enough that a wrong path (a disk image) is refused.
pub const CONFIG_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Parses `text`, the contents of a `config.ini`; `source_name` names it in
/// messages (`config.ini:12: ...`). Returns the first problem found.
pub fn parse(text: &str, source_name: &str) -> Result<ClusterConfig, ConfigError> {
    let sections = syntax::parse_sections(text, source_name)?;
    let config = cluster::assemble(sections, source_name)?;
    assert!(!config.management_nodes.is_empty() && !config.data_nodes.is_empty());
    Ok(config)
}

/// Reads and parses the file at `path`; messages name it as given.
pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
    let source_name = path.display().to_string();
    let io_error = |error| ConfigError::whole_file(&source_name, ConfigErrorKind::Io(error));
    let file = std::fs::File::open(path).map_err(io_error)?;
    let mut text = String::new();
    file.take(CONFIG_FILE_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io_error)?;
    if text.len() as u64 > CONFIG_FILE_MAX_BYTES {
        return Err(ConfigError::whole_file(
            &source_name,
            ConfigErrorKind::TooLarge {
                max_bytes: CONFIG_FILE_MAX_BYTES,
            },
        ));
    }
    parse(&text, &source_name)
}

/// The whole cluster as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// File name the configuration came from, for messages.
    pub source_name: String,
    pub management_nodes: Vec<ManagementNode>,
    /// In configuration order: node groups are formed in this order.
    pub data_nodes: Vec<DataNode>,
    pub api_nodes: Vec<ApiNode>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ManagementNode {
    pub node_id: NodeId,
    pub host_name: String,
    /// `PortNumber`, default 1186.
    pub port: u16,
    pub data_dir: PathBuf,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DataNode {
    pub node_id: NodeId,
    pub host_name: String,
    /// `ServerPort`: where this node listens for other nodes. Default: the
    /// first management server's `PortNumber` plus this node's id.
    pub server_port: u16,
    pub data_dir: PathBuf,
    /// Position in configuration order divided by `NoOfReplicas`.
    pub node_group: u32,
    pub params: DataNodeParams,
}

/// Parameters of one data node (`[ndbd default]` overridden by `[ndbd]`).
#[derive(Clone, Debug, PartialEq)]
pub struct DataNodeParams {
    pub no_of_replicas: u32,
    pub data_memory_bytes: u64,
    /// The threads to start: from `ThreadConfig` if given, else from
    /// `MaxNoOfExecutionThreads`.
    pub threads: ThreadLayout,
    /// The raw `ThreadConfig` string, if one was given.
    pub thread_config: Option<String>,
    pub max_no_of_execution_threads: u32,
    /// Redo log parts; at least the ldm thread count. Default: 4, or the
    /// ldm thread count when that is larger.
    pub no_of_fragment_log_parts: u32,
    /// Size of each redo log file (FragmentLogFileSize).
    pub fragment_log_file_size_bytes: u64,
    /// Redo log files per log part (NoOfFragmentLogFiles).
    pub no_of_fragment_log_files: u32,
    pub heartbeat_interval_db_db_ms: u32,
    pub heartbeat_interval_db_api_ms: u32,
    pub time_between_global_checkpoints_ms: u32,
    /// 0: a stalled GCP never excludes a node.
    pub time_between_global_checkpoints_timeout_ms: u32,
    pub time_between_epochs_ms: u32,
    /// `MaxBufferedEpochs`: epochs kept for a change-stream subscriber.
    pub max_buffered_epochs: u32,
    /// `MaxBufferedEpochBytes`: bytes of row changes a subscription block holds.
    pub max_buffered_epoch_bytes: u32,
    pub transaction_deadlock_detection_timeout_ms: u32,
    /// Transaction records per TC instance.
    pub max_no_of_concurrent_transactions: u32,
    /// Operation records per TC instance.
    pub max_no_of_concurrent_operations: u32,
    /// Scans in progress per TC instance.
    pub max_no_of_concurrent_scans: u32,
    /// How long starting data nodes wait for every data node before they
    /// start without the missing ones (NDB's StartPartialTimeout).
    pub start_partial_timeout_ms: u32,
    /// How long a side that needs the arbitrator's vote after a split waits
    /// for it before shutting down (NDB's ArbitrationTimeout).
    pub arbitration_timeout_ms: u32,
    pub lock_pages_in_memory: u32,
    /// Skarv's default is false: the angel restarts a failed node.
    pub stop_on_error: bool,
    /// `UseShm`: nodes on this host reach this one over a local socket.
    pub use_shm: bool,
}

/// An `[api]` or `[mysqld]` slot.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiNode {
    pub node_id: NodeId,
    /// `None`: any host may take this slot.
    pub host_name: Option<String>,
    /// True for a `[mysqld]` section.
    pub mysqld: bool,
}

impl ClusterConfig {
    /// What `id` is configured as, if it is configured at all.
    pub fn node_type(&self, id: NodeId) -> Option<NodeType> {
        if self.data_node(id).is_some() {
            Some(NodeType::Data)
        } else if self.management_node(id).is_some() {
            Some(NodeType::Management)
        } else if self.api_node(id).is_some() {
            Some(NodeType::Api)
        } else {
            None
        }
    }

    pub fn data_node(&self, id: NodeId) -> Option<&DataNode> {
        self.data_nodes.iter().find(|n| n.node_id == id)
    }

    pub fn management_node(&self, id: NodeId) -> Option<&ManagementNode> {
        self.management_nodes.iter().find(|n| n.node_id == id)
    }

    pub fn api_node(&self, id: NodeId) -> Option<&ApiNode> {
        self.api_nodes.iter().find(|n| n.node_id == id)
    }

    /// The first management server: the one whose `PortNumber` data nodes'
    /// default `ServerPort`s are counted from.
    ///
    /// # Panics
    /// On a hand-built configuration without management servers; [`parse`]
    /// refuses those.
    pub fn mgmd(&self) -> &ManagementNode {
        self.management_nodes
            .first()
            .expect("a cluster configuration has at least one management server")
    }
}

/// Checks at a data node's start what the file cannot know: that the
/// node's `DataMemory` fits the machine it runs on (`machine_memory_bytes`,
/// `MemTotal` of /proc/meminfo). Pages are taken as rows come, so a budget
/// past the machine's memory would not fail at start but when the kernel
/// kills the node under load.
pub fn check_fits_machine(
    node: NodeId,
    params: &DataNodeParams,
    machine_memory_bytes: u64,
) -> Result<(), String> {
    if params.data_memory_bytes > machine_memory_bytes {
        return Err(format!(
            "DataMemory={} of node {node} is more than this machine's {} of memory: the kernel \
             would kill the node once its rows fill it; allowed: at most the machine's memory",
            parameters::size_text(params.data_memory_bytes),
            parameters::size_text(machine_memory_bytes)
        ));
    }
    Ok(())
}
