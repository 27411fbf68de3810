//! What can go wrong in the management server and its client, with the
//! context (file, address, node) a user needs to act on it.

use std::io;
use std::path::PathBuf;

use signal::{DecodeError, EncodeError, NodeId};

#[derive(Debug, thiserror::Error)]
pub enum MgmError {
    #[error("cannot read the cluster configuration {path}: {source}")]
    ReadConfig { path: PathBuf, source: io::Error },

    #[error("the cluster configuration {path} is larger than {max_bytes} bytes")]
    ConfigTooLarge { path: PathBuf, max_bytes: usize },

    /// The parser's own message, which names the file and line.
    #[error("{0}")]
    Config(String),

    #[error("{path} configures no [ndb_mgmd] section: a management server needs one")]
    NoManagementNode { path: PathBuf },

    #[error("node id {node} is not a management node in {path}")]
    NotManagementNode { node: NodeId, path: PathBuf },

    #[error("cannot listen on {address}: {source}")]
    Bind { address: String, source: io::Error },

    #[error("cannot create the data directory {path}: {source}")]
    DataDir { path: PathBuf, source: io::Error },

    #[error("cannot open the cluster log {path}: {source}")]
    ClusterLog { path: PathBuf, source: io::Error },

    #[error("cannot start the management server's {thread} thread: {source}")]
    Spawn {
        thread: &'static str,
        source: io::Error,
    },

    #[error("cannot reach the management server at {address}: {reason}")]
    Connect { address: String, reason: String },

    #[error("connection to the management server at {address} failed: {source}")]
    Io { address: String, source: io::Error },

    #[error("the management server at {address} closed the connection")]
    Closed { address: String },

    #[error(
        "no answer from the management server at {address} to {request} within {timeout_ms} ms"
    )]
    Timeout {
        address: String,
        request: &'static str,
        timeout_ms: u64,
    },

    #[error("bad data from the management server at {address}: {source}")]
    Decode {
        address: String,
        source: DecodeError,
    },

    #[error("unexpected answer from the management server at {address}: {message}")]
    Protocol { address: String, message: String },

    /// The management server refused a request; its message says why.
    #[error("{message}")]
    Refused { message: String },

    #[error("cannot send to the management server: {0}")]
    Encode(#[from] EncodeError),
}
