//! Why a configuration was refused. Every message says where (file and line
//! when there is one), which parameter or section, and what is allowed, so
//! that the person editing `config.ini` can fix it without reading code.

use std::fmt;

use kernel::thread_config::ThreadConfigError;

/// A refused configuration: where, and why. Displays as
/// `<source_name>:<line>: <why>`, or `<source_name>: <why>` when the problem
/// is not on one line (a missing section, a rule across nodes).
#[derive(Debug)]
pub struct ConfigError {
    /// The file name given to [`crate::parse`] or the path given to [`crate::load`].
    pub source_name: String,
    /// 1-based line number, when one line is at fault.
    pub line: Option<usize>,
    pub kind: ConfigErrorKind,
}

impl ConfigError {
    pub(crate) fn at(source_name: &str, line: usize, kind: ConfigErrorKind) -> ConfigError {
        assert!(line >= 1, "line numbers start at 1");
        ConfigError {
            source_name: source_name.to_string(),
            line: Some(line),
            kind,
        }
    }

    pub(crate) fn whole_file(source_name: &str, kind: ConfigErrorKind) -> ConfigError {
        ConfigError {
            source_name: source_name.to_string(),
            line: None,
            kind,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.source_name, line, self.kind),
            None => write!(f, "{}: {}", self.source_name, self.kind),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ConfigErrorKind::Io(error) => Some(error),
            _ => None,
        }
    }
}

/// What is wrong, without the location.
#[derive(Debug, thiserror::Error)]
pub enum ConfigErrorKind {
    #[error("cannot read the configuration: {0}")]
    Io(std::io::Error),
    #[error("the file is larger than {max_bytes} bytes; allowed: at most {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    #[error("expected \"[section]\", \"name=value\" or a comment, found \"{text}\"")]
    Syntax { text: String },
    #[error("section header \"{text}\" has no closing \"]\"")]
    UnclosedHeader { text: String },
    #[error("unknown section [{name}]; allowed: {allowed}")]
    UnknownSection { name: String, allowed: &'static str },
    #[error(
        "parameter \"{parameter}\" comes before any section; \
         allowed: parameters under a section such as [ndbd default]"
    )]
    OutsideSection { parameter: String },
    #[error("unknown parameter \"{parameter}\" in {section}")]
    UnknownParameter { parameter: String, section: String },
    #[error("{parameter} names one node, so it belongs in {node_section}, not in {section}")]
    NotInDefault {
        parameter: &'static str,
        node_section: &'static str,
        section: String,
    },
    #[error("{parameter} is given twice for {section} (first at line {first_line})")]
    DuplicateParameter {
        parameter: &'static str,
        section: String,
        first_line: usize,
    },
    #[error("{parameter}={value}: {problem}; allowed: {allowed}")]
    BadValue {
        parameter: &'static str,
        value: String,
        problem: &'static str,
        allowed: String,
    },
    #[error("{parameter}={value}: out of range; allowed {allowed}")]
    OutOfRange {
        parameter: &'static str,
        value: String,
        allowed: String,
    },
    /// The message of a refused `ThreadConfig`, which names the bad token.
    #[error("{0}")]
    ThreadConfig(ThreadConfigError),
    #[error(
        "NodeId={node_id} is already used by the {other_section} section at line {other_line}"
    )]
    DuplicateNodeId {
        node_id: u8,
        other_section: String,
        other_line: usize,
    },
    #[error(
        "{section} section starting at line {section_line} gets no node id: \
         all of 1..=255 are taken"
    )]
    NoFreeNodeId {
        section: String,
        section_line: usize,
    },
    #[error("no {section} section; allowed: a cluster with at least one {what}")]
    MissingSection {
        section: &'static str,
        what: &'static str,
    },
    #[error(
        "NoOfReplicas={replicas} for node {node_id} differs from NoOfReplicas={first_replicas} \
         for node {first_node_id}; allowed: the same value for every data node"
    )]
    ReplicasDiffer {
        node_id: u8,
        replicas: u32,
        first_node_id: u8,
        first_replicas: u32,
    },
    #[error(
        "{data_nodes} data node(s) with NoOfReplicas={replicas}; allowed: a multiple of \
         NoOfReplicas data nodes, so that every node group is full"
    )]
    ReplicasDoNotDivide { data_nodes: usize, replicas: u32 },
    #[error(
        "NoOfFragmentLogParts={parts} for node {node_id} is less than its {ldm} ldm threads; \
         allowed: at least the ldm thread count (one of 4, 6, 8, 12, 16, 24, 32)"
    )]
    TooFewLogParts { node_id: u8, parts: u32, ldm: u32 },
    #[error(
        "node {node_id} has no ServerPort and PortNumber {port_number} + {node_id} is past \
         65535; allowed: an explicit ServerPort for this node"
    )]
    ServerPortOverflow { node_id: u8, port_number: u16 },
    #[error(
        "node {node_id} listens on {host}:{port} ({parameter}), as node {other_node_id} does \
         ({other_parameter}); allowed: one node per port of a host (set ServerPort, or \
         HostName)"
    )]
    PortClash {
        node_id: u8,
        parameter: &'static str,
        other_node_id: u8,
        other_parameter: &'static str,
        host: String,
        port: u16,
    },
}
