//! The cluster configuration, read from `config.ini` in NDB's syntax.
//!
//! (Types settled; the parser is filled in by the config work.)

use std::path::PathBuf;

use kernel::thread_config::ThreadLayout;
use signal::NodeId;

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
    /// `ServerPort`: where this node listens for other nodes.
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
    pub no_of_fragment_log_parts: u32,
    pub heartbeat_interval_db_db_ms: u32,
    pub heartbeat_interval_db_api_ms: u32,
    pub time_between_global_checkpoints_ms: u32,
    pub time_between_epochs_ms: u32,
    pub transaction_deadlock_detection_timeout_ms: u32,
    pub lock_pages_in_memory: u32,
    /// Skarv's default is false: the angel restarts a failed node.
    pub stop_on_error: bool,
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
