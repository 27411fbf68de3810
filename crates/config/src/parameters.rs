//! The parameters Skarv knows, with NDB's names, defaults and ranges, and how
//! their values are written: numbers with an optional K, M, G or T suffix
//! (powers of 1024, as NDB reads them), booleans in NDB's forms, text.
//!
//! Names are matched case-insensitively, as NDB does. A name Skarv does not
//! know is refused rather than ignored, so that a misspelt parameter never
//! silently leaves its default in force.

use kernel::thread_config::{SpinMethod, ThreadConfig};

use crate::error::ConfigErrorKind;
use crate::syntax::SectionKind;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
const TIB: u64 = 1024 * GIB;

/// The largest value of NDB's 32-bit time parameters (NDB keeps the last
/// 256 values for itself).
const TIME_MAX_MS: u64 = 4_294_967_039;

/// How a parameter's value is written and which values are allowed.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ValueType {
    Integer {
        min: u64,
        max: u64,
    },
    Size {
        min_bytes: u64,
        max_bytes: u64,
    },
    OneOf(&'static [u64]),
    Bool,
    /// `what` describes a good value for messages (`a host name`).
    Text {
        empty_allowed: bool,
        what: &'static str,
    },
    ThreadConfig,
    /// One of these words, in any case (kept as the list spells it).
    Word(&'static [&'static str]),
    /// Known to NDB, accepted so that its files load, not used by Skarv.
    Ignored,
}

/// The value a parameter has when no section sets it.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Fallback {
    /// No default: the parameter is optional, or its default is computed.
    None,
    Number(u64),
    Bool(bool),
    Text(&'static str),
}

#[derive(Debug)]
pub(crate) struct Parameter {
    /// NDB's spelling, used in messages.
    pub name: &'static str,
    /// Other names NDB accepts for it.
    pub aliases: &'static [&'static str],
    pub value_type: ValueType,
    pub default: Fallback,
    /// Names one node, so it may not stand in a default section.
    pub per_node: bool,
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Number(u64),
    Bool(bool),
    Text(String),
    /// An empty `ThreadConfig` means none was given (NDB).
    Threads(Option<(String, ThreadConfig)>),
    Ignored,
}

const fn integer(name: &'static str, min: u64, max: u64, default: u64) -> Parameter {
    Parameter {
        name,
        aliases: &[],
        value_type: ValueType::Integer { min, max },
        default: Fallback::Number(default),
        per_node: false,
    }
}

const fn ignored(name: &'static str) -> Parameter {
    Parameter {
        name,
        aliases: &[],
        value_type: ValueType::Ignored,
        default: Fallback::None,
        per_node: false,
    }
}

pub(crate) const NODE_ID: Parameter = Parameter {
    name: "NodeId",
    aliases: &["Id"],
    value_type: ValueType::Integer { min: 1, max: 255 },
    default: Fallback::None,
    per_node: true,
};

pub(crate) const HOST_NAME: Parameter = Parameter {
    name: "HostName",
    aliases: &[],
    value_type: ValueType::Text {
        empty_allowed: false,
        what: "a host name or address",
    },
    default: Fallback::Text("localhost"),
    per_node: false,
};

/// An API slot without a host name may be taken from any host.
pub(crate) const API_HOST_NAME: Parameter = Parameter {
    name: "HostName",
    aliases: &[],
    value_type: ValueType::Text {
        empty_allowed: true,
        what: "a host name or address",
    },
    default: Fallback::None,
    per_node: false,
};

pub(crate) const DATA_DIR: Parameter = Parameter {
    name: "DataDir",
    aliases: &[],
    value_type: ValueType::Text {
        empty_allowed: false,
        what: "a directory",
    },
    default: Fallback::Text("."),
    per_node: false,
};

/// Skarv's default is computed: the first management server's `PortNumber`
/// plus the node id (NDB picks a free port at run time instead).
pub(crate) const SERVER_PORT: Parameter = Parameter {
    name: "ServerPort",
    aliases: &[],
    value_type: ValueType::Integer { min: 1, max: 65535 },
    default: Fallback::None,
    per_node: false,
};

pub(crate) const PORT_NUMBER: Parameter = integer("PortNumber", 1, 65535, 1186);

pub(crate) const NO_OF_REPLICAS: Parameter = integer("NoOfReplicas", 1, 4, 2);

pub(crate) const DATA_MEMORY: Parameter = Parameter {
    name: "DataMemory",
    aliases: &[],
    value_type: ValueType::Size {
        min_bytes: MIB,
        max_bytes: 16 * TIB,
    },
    default: Fallback::Number(98 * MIB),
    per_node: false,
};

pub(crate) const THREAD_CONFIG: Parameter = Parameter {
    name: "ThreadConfig",
    aliases: &[],
    value_type: ValueType::ThreadConfig,
    default: Fallback::None,
    per_node: false,
};

/// How execution threads spin before sleeping (NDB's names;
/// `kernel::thread_config::SpinMethod`). Skarv's default is adaptive where
/// NDB's is `StaticSpinning` with no spin: on the virtual machines Skarv
/// runs on, a thread woken from sleep costs each hop 30-50 µs, and a cost
/// model that stops spinning when it does not pay leaves an idle node idle.
pub(crate) const SPIN_METHOD: Parameter = Parameter {
    name: "SpinMethod",
    aliases: &[],
    value_type: ValueType::Word(&SpinMethod::NAMES),
    default: Fallback::Text("CostBasedSpinning"),
    per_node: false,
};

/// Whether the data node's threads run under the OS's batch policy
/// (Linux `SCHED_BATCH`; `kernel::runtime::use_batch_scheduling` says
/// when it pays). Not NDB's: its `RealtimeScheduler` goes the other way,
/// for hosts whose CPUs belong to the data node. A thread given
/// `realtime` in ThreadConfig keeps it. Off by default: it helps a data
/// node sharing its CPUs with a SQL node (with the SQL node's own switch
/// on) and costs native API clients on the same CPUs 3-12 %.
pub(crate) const BATCH_SCHEDULING: Parameter = Parameter {
    name: "BatchScheduling",
    aliases: &[],
    value_type: ValueType::Bool,
    default: Fallback::Bool(false),
    per_node: false,
};

pub(crate) const MAX_NO_OF_EXECUTION_THREADS: Parameter =
    integer("MaxNoOfExecutionThreads", 2, 72, 2);

/// The default (4) is raised to the ldm thread count when that is larger:
/// see `cluster`.
pub(crate) const NO_OF_FRAGMENT_LOG_PARTS: Parameter = Parameter {
    name: "NoOfFragmentLogParts",
    aliases: &[],
    value_type: ValueType::OneOf(&[4, 6, 8, 12, 16, 24, 32]),
    default: Fallback::Number(4),
    per_node: false,
};

/// NDB's default is 5000 ms: a hung data node is declared dead after four
/// missed heartbeats, 20 s in which every commit touching it stalls.
/// 250 ms bounds that stall near 1 s; the real-process tests run at 100 ms
/// on 2 loaded cores without false suspicions.
pub(crate) const HEARTBEAT_INTERVAL_DB_DB: Parameter =
    integer("HeartbeatIntervalDbDb", 10, TIME_MAX_MS, 250);

pub(crate) const HEARTBEAT_INTERVAL_DB_API: Parameter =
    integer("HeartbeatIntervalDbApi", 100, TIME_MAX_MS, 1500);

pub(crate) const TIME_BETWEEN_GLOBAL_CHECKPOINTS: Parameter =
    integer("TimeBetweenGlobalCheckpoints", 20, 32000, 2000);

/// Milliseconds a global checkpoint may wait for one node's flush or
/// sysfile write (a full or failing disk) before the master excludes that
/// node, when another node of its group serves: a GCP stop ends with the
/// slow node failed rather than the whole cluster's durability stalled.
/// 0 never excludes. NDB's default.
pub(crate) const TIME_BETWEEN_GLOBAL_CHECKPOINTS_TIMEOUT: Parameter = integer(
    "TimeBetweenGlobalCheckpointsTimeout",
    0,
    TIME_MAX_MS,
    120_000,
);

/// Milliseconds between micro-GCPs: the epoch's lo advances inside a global
/// checkpoint (docs/transactions.md, "Global checkpoints"); 0 runs none.
pub(crate) const TIME_BETWEEN_EPOCHS: Parameter = integer("TimeBetweenEpochs", 0, 32000, 100);

/// Epochs a data node keeps for a change-stream subscriber that has not
/// acknowledged them (docs/events.md); a subscriber further behind
/// is cut off with a gap, so that the cluster is not slowed down. NDB's
/// name and default.
pub(crate) const MAX_BUFFERED_EPOCHS: Parameter = integer("MaxBufferedEpochs", 1, 100_000, 100);

/// Bytes of row changes a data node's subscription block holds at most
/// (epochs not yet complete, and complete ones not yet acknowledged by
/// every subscriber); beyond it the subscriber furthest behind is cut off
/// with a gap. NDB's name and default (25 MiB); the minimum is ours (1 MiB:
/// small enough for tests, NDB's minimum is its default).
pub(crate) const MAX_BUFFERED_EPOCH_BYTES: Parameter =
    integer("MaxBufferedEpochBytes", 1 << 20, 4_294_967_039, 26_214_400);

pub(crate) const TRANSACTION_DEADLOCK_DETECTION_TIMEOUT: Parameter =
    integer("TransactionDeadlockDetectionTimeout", 50, TIME_MAX_MS, 1200);

/// Transaction records of each TC instance (NDB: MaxNoOfConcurrentTransactions).
pub(crate) const MAX_NO_OF_CONCURRENT_TRANSACTIONS: Parameter =
    integer("MaxNoOfConcurrentTransactions", 32, 4_294_967_039, 4096);

/// Operation records of each TC instance (NDB: MaxNoOfConcurrentOperations).
pub(crate) const MAX_NO_OF_CONCURRENT_OPERATIONS: Parameter =
    integer("MaxNoOfConcurrentOperations", 32, 4_294_967_039, 32768);

/// Scans in progress on each TC instance (NDB: MaxNoOfConcurrentScans).
pub(crate) const MAX_NO_OF_CONCURRENT_SCANS: Parameter =
    integer("MaxNoOfConcurrentScans", 2, 500, 256);

/// Size of one redo log file (NDB: FragmentLogFileSize).
pub(crate) const FRAGMENT_LOG_FILE_SIZE: Parameter = Parameter {
    name: "FragmentLogFileSize",
    aliases: &[],
    value_type: ValueType::Size {
        min_bytes: 4 * MIB,
        max_bytes: GIB,
    },
    default: Fallback::Number(16 * MIB),
    per_node: false,
};

/// Redo log files per log part (NDB: NoOfFragmentLogFiles). NDB allows
/// up to 4,294,967,039; every file is created when a node starts
/// initially, so a count past 65,536 (1 TiB per part at the default file
/// size) is a typo that would fill the disk, not a plan.
pub(crate) const NO_OF_FRAGMENT_LOG_FILES: Parameter =
    integer("NoOfFragmentLogFiles", 3, 65_536, 16);

/// How long starting data nodes wait for all of them before a partial start.
pub(crate) const START_PARTIAL_TIMEOUT: Parameter =
    integer("StartPartialTimeout", 0, TIME_MAX_MS, 30000);

/// How long the president of a side that needs the arbitrator's vote waits
/// for it before the side shuts down (NDB: ArbitrationTimeout).
pub(crate) const ARBITRATION_TIMEOUT: Parameter =
    integer("ArbitrationTimeout", 10, TIME_MAX_MS, 7500);

pub(crate) const LOCK_PAGES_IN_MAIN_MEMORY: Parameter = Parameter {
    aliases: &["LockPagesInMemory"],
    ..integer("LockPagesInMainMemory", 0, 2, 0)
};

/// Skarv's default is false, unlike NDB's: the angel restarts a failed node.
pub(crate) const STOP_ON_ERROR: Parameter = Parameter {
    name: "StopOnError",
    aliases: &[],
    value_type: ValueType::Bool,
    default: Fallback::Bool(false),
    per_node: false,
};

/// Links to nodes on the same host (API and data nodes) run on a
/// Unix-domain socket instead of loopback TCP (`transport::stream`): a
/// message that wakes its receiver skips the TCP stack (a 2-replica update
/// one at a time is 7-16 % faster). NDB's name, for its shared-memory
/// transporter; NDB's default is off, Skarv's on (nothing to size or tune,
/// and a node that cannot take its socket falls back to TCP).
pub(crate) const USE_SHM: Parameter = Parameter {
    name: "UseShm",
    aliases: &[],
    value_type: ValueType::Bool,
    default: Fallback::Bool(true),
    per_node: false,
};

const DATA_NODE_PARAMETERS: &[&Parameter] = &[
    &NODE_ID,
    &HOST_NAME,
    &DATA_DIR,
    &SERVER_PORT,
    &NO_OF_REPLICAS,
    &DATA_MEMORY,
    &THREAD_CONFIG,
    &SPIN_METHOD,
    &BATCH_SCHEDULING,
    &MAX_NO_OF_EXECUTION_THREADS,
    &NO_OF_FRAGMENT_LOG_PARTS,
    &FRAGMENT_LOG_FILE_SIZE,
    &NO_OF_FRAGMENT_LOG_FILES,
    &HEARTBEAT_INTERVAL_DB_DB,
    &HEARTBEAT_INTERVAL_DB_API,
    &TIME_BETWEEN_GLOBAL_CHECKPOINTS,
    &TIME_BETWEEN_GLOBAL_CHECKPOINTS_TIMEOUT,
    &TIME_BETWEEN_EPOCHS,
    &MAX_BUFFERED_EPOCHS,
    &MAX_BUFFERED_EPOCH_BYTES,
    &TRANSACTION_DEADLOCK_DETECTION_TIMEOUT,
    &MAX_NO_OF_CONCURRENT_TRANSACTIONS,
    &MAX_NO_OF_CONCURRENT_OPERATIONS,
    &MAX_NO_OF_CONCURRENT_SCANS,
    &START_PARTIAL_TIMEOUT,
    &ARBITRATION_TIMEOUT,
    &LOCK_PAGES_IN_MAIN_MEMORY,
    &STOP_ON_ERROR,
    &USE_SHM,
];

const MANAGEMENT_NODE_PARAMETERS: &[&Parameter] = &[&NODE_ID, &HOST_NAME, &PORT_NUMBER, &DATA_DIR];

const API_NODE_PARAMETERS: &[&Parameter] = &[&NODE_ID, &API_HOST_NAME];

/// NDB's transporter parameters: Skarv's transport sizes its own buffers.
const TCP_PARAMETERS: &[&Parameter] = &[
    &ignored("SendBufferMemory"),
    &ignored("ReceiveBufferMemory"),
    &ignored("OverloadLimit"),
    &ignored("Checksum"),
    &ignored("SendSignalId"),
    &ignored("TCP_SND_BUF_SIZE"),
    &ignored("TCP_RCV_BUF_SIZE"),
    &ignored("TCP_MAXSEG_SIZE"),
    &ignored("TcpBind_INADDR_ANY"),
    &ignored("PreferIPVersion"),
    &ignored("Group"),
];

/// The parameter `name` (case-insensitive, aliases included) of a section of
/// `kind`, if that section may have it.
pub(crate) fn lookup(kind: SectionKind, name: &str) -> Option<&'static Parameter> {
    let table = match kind {
        SectionKind::DataDefault | SectionKind::Data => DATA_NODE_PARAMETERS,
        SectionKind::MgmDefault | SectionKind::Mgm => MANAGEMENT_NODE_PARAMETERS,
        SectionKind::ApiDefault | SectionKind::Api { .. } => API_NODE_PARAMETERS,
        SectionKind::TcpDefault => TCP_PARAMETERS,
    };
    table.iter().copied().find(|p| {
        p.name.eq_ignore_ascii_case(name) || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// Why text is not a number.
enum NumberError {
    NotANumber,
    TooLarge,
}

/// Digits with an optional K, M, G or T suffix (× 1024ⁿ, case-insensitive).
fn parse_number(text: &str) -> Result<u64, NumberError> {
    let (digits, multiplier) = match text.char_indices().last() {
        Some((at, suffix)) if suffix.is_ascii_alphabetic() => {
            let multiplier = match suffix.to_ascii_uppercase() {
                'K' => KIB,
                'M' => MIB,
                'G' => GIB,
                'T' => TIB,
                _ => return Err(NumberError::NotANumber),
            };
            (&text[..at], multiplier)
        }
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberError::NotANumber);
    }
    let number: u64 = digits.parse().map_err(|_| NumberError::TooLarge)?;
    number.checked_mul(multiplier).ok_or(NumberError::TooLarge)
}

/// A size as NDB writes it: the largest exact unit (`98M`, `16T`).
pub(crate) fn size_text(bytes: u64) -> String {
    for (unit, suffix) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

fn one_of_text(values: &[u64]) -> String {
    let values: Vec<String> = values.iter().map(u64::to_string).collect();
    format!("one of {}", values.join(", "))
}

const BOOL_ALLOWED: &str = "1, 0, true, false, yes, no, y, n, on, off";

impl Parameter {
    /// Parses `text` (already trimmed) as this parameter's value.
    pub(crate) fn parse(&self, text: &str) -> Result<Value, ConfigErrorKind> {
        let bad_value = |problem: &'static str, allowed: String| ConfigErrorKind::BadValue {
            parameter: self.name,
            value: text.to_string(),
            problem,
            allowed,
        };
        let out_of_range = |allowed: String| ConfigErrorKind::OutOfRange {
            parameter: self.name,
            value: text.to_string(),
            allowed,
        };
        match self.value_type {
            ValueType::Integer { min, max } => {
                let range = format!("{min}..={max}");
                match parse_number(text) {
                    Ok(n) if (min..=max).contains(&n) => Ok(Value::Number(n)),
                    Ok(_) | Err(NumberError::TooLarge) => Err(out_of_range(range)),
                    Err(NumberError::NotANumber) => {
                        Err(bad_value("not a number", format!("an integer {range}")))
                    }
                }
            }
            ValueType::Size {
                min_bytes,
                max_bytes,
            } => {
                let range = format!("{}..{}", size_text(min_bytes), size_text(max_bytes));
                match parse_number(text) {
                    Ok(n) if (min_bytes..=max_bytes).contains(&n) => Ok(Value::Number(n)),
                    Ok(_) | Err(NumberError::TooLarge) => Err(out_of_range(range)),
                    Err(NumberError::NotANumber) => Err(bad_value(
                        "not a size",
                        format!("a size {range} (bytes, or a number with suffix K, M, G or T)"),
                    )),
                }
            }
            ValueType::OneOf(values) => match parse_number(text) {
                Ok(n) if values.contains(&n) => Ok(Value::Number(n)),
                Ok(_) | Err(NumberError::TooLarge) => Err(out_of_range(one_of_text(values))),
                Err(NumberError::NotANumber) => Err(bad_value("not a number", one_of_text(values))),
            },
            ValueType::Bool => match text.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "y" | "on" => Ok(Value::Bool(true)),
                "0" | "false" | "no" | "n" | "off" => Ok(Value::Bool(false)),
                _ => Err(bad_value("not a boolean", BOOL_ALLOWED.to_string())),
            },
            ValueType::Text {
                empty_allowed,
                what,
            } => {
                if text.is_empty() && !empty_allowed {
                    return Err(bad_value("empty", what.to_string()));
                }
                Ok(Value::Text(text.to_string()))
            }
            ValueType::ThreadConfig => {
                if text.is_empty() {
                    return Ok(Value::Threads(None));
                }
                let config = ThreadConfig::parse(text).map_err(ConfigErrorKind::ThreadConfig)?;
                Ok(Value::Threads(Some((text.to_string(), config))))
            }
            ValueType::Word(words) => match words.iter().find(|w| w.eq_ignore_ascii_case(text)) {
                Some(word) => Ok(Value::Text(word.to_string())),
                None => Err(bad_value(
                    "not a known value",
                    format!("one of {}", words.join(", ")),
                )),
            },
            ValueType::Ignored => Ok(Value::Ignored),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(parameter: &Parameter, text: &str) -> Value {
        match parameter.parse(text) {
            Ok(value) => value,
            Err(error) => panic!("{}={text}: {error}", parameter.name),
        }
    }

    fn refused(parameter: &Parameter, text: &str) -> String {
        match parameter.parse(text) {
            Ok(value) => panic!("{}={text} parsed as {value:?}", parameter.name),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn numbers_take_ndb_suffixes() {
        assert_eq!(value(&DATA_MEMORY, "2G"), Value::Number(2 * GIB));
        assert_eq!(value(&DATA_MEMORY, "512m"), Value::Number(512 * MIB));
        assert_eq!(value(&DATA_MEMORY, "16T"), Value::Number(16 * TIB));
        assert_eq!(value(&DATA_MEMORY, "1048576"), Value::Number(MIB));
        assert_eq!(value(&DATA_MEMORY, "4096k"), Value::Number(4 * MIB));
        assert_eq!(
            value(&HEARTBEAT_INTERVAL_DB_DB, "4294967039"),
            Value::Number(TIME_MAX_MS)
        );
        assert_eq!(value(&TIME_BETWEEN_EPOCHS, "0"), Value::Number(0));
        assert_eq!(value(&MAX_BUFFERED_EPOCHS, "10"), Value::Number(10));
        assert!(matches!(
            MAX_BUFFERED_EPOCH_BYTES.default,
            Fallback::Number(26_214_400)
        ));
        assert!(matches!(
            MAX_BUFFERED_EPOCHS.value_type,
            ValueType::Integer { min: 1, .. }
        ));
    }

    #[test]
    fn ranges_and_shapes_are_enforced() {
        assert_eq!(
            refused(&DATA_MEMORY, "0"),
            "DataMemory=0: out of range; allowed 1M..16T"
        );
        assert_eq!(
            refused(&DATA_MEMORY, "17T"),
            "DataMemory=17T: out of range; allowed 1M..16T"
        );
        assert!(refused(&DATA_MEMORY, "lots").starts_with("DataMemory=lots: not a size;"));
        assert!(refused(&DATA_MEMORY, "2X").contains("not a size"));
        assert!(refused(&DATA_MEMORY, "99999999999999999999").contains("out of range"));
        assert!(refused(&DATA_MEMORY, "99999999T").contains("out of range"));
        assert_eq!(
            refused(&NO_OF_REPLICAS, "banana"),
            "NoOfReplicas=banana: not a number; allowed: an integer 1..=4"
        );
        assert_eq!(
            refused(&NO_OF_REPLICAS, "5"),
            "NoOfReplicas=5: out of range; allowed 1..=4"
        );
        assert!(refused(&NO_OF_REPLICAS, "-1").contains("not a number"));
        assert!(refused(&NO_OF_REPLICAS, "").contains("not a number"));
        assert_eq!(
            refused(&NO_OF_FRAGMENT_LOG_PARTS, "5"),
            "NoOfFragmentLogParts=5: out of range; allowed one of 4, 6, 8, 12, 16, 24, 32"
        );
        assert!(refused(&HEARTBEAT_INTERVAL_DB_DB, "9").contains("allowed 10..=4294967039"));
        assert!(refused(&HEARTBEAT_INTERVAL_DB_API, "99").contains("allowed 100..="));
        assert!(refused(&TIME_BETWEEN_GLOBAL_CHECKPOINTS, "32001").contains("20..=32000"));
        assert!(refused(&TRANSACTION_DEADLOCK_DETECTION_TIMEOUT, "49").contains("50..="));
        assert!(refused(&LOCK_PAGES_IN_MAIN_MEMORY, "3").contains("0..=2"));
        assert!(refused(&MAX_NO_OF_EXECUTION_THREADS, "73").contains("2..=72"));
        assert!(refused(&MAX_NO_OF_EXECUTION_THREADS, "1").contains("2..=72"));
        assert!(refused(&PORT_NUMBER, "65536").contains("1..=65535"));
        assert!(refused(&HOST_NAME, "").contains("HostName=: empty; allowed: a host name"));
        assert_eq!(value(&API_HOST_NAME, ""), Value::Text(String::new()));
    }

    #[test]
    fn spin_method_takes_ndb_names_in_any_case() {
        assert_eq!(
            value(&SPIN_METHOD, "costbasedspinning"),
            Value::Text("CostBasedSpinning".into())
        );
        let message = refused(&SPIN_METHOD, "Fast");
        assert!(
            message.contains("StaticSpinning, CostBasedSpinning, LatencyOptimisedSpinning"),
            "{message}"
        );
    }

    #[test]
    fn booleans_in_ndb_forms() {
        for text in ["1", "true", "TRUE", "Yes", "y", "on"] {
            assert_eq!(value(&STOP_ON_ERROR, text), Value::Bool(true), "{text}");
        }
        for text in ["0", "false", "No", "N", "off"] {
            assert_eq!(value(&STOP_ON_ERROR, text), Value::Bool(false), "{text}");
        }
        assert!(refused(&STOP_ON_ERROR, "2").starts_with("StopOnError=2: not a boolean; allowed:"));
    }

    #[test]
    fn thread_config_values_are_parsed_and_errors_kept() {
        assert_eq!(value(&THREAD_CONFIG, ""), Value::Threads(None));
        match value(&THREAD_CONFIG, "ldm={count=2},main") {
            Value::Threads(Some((text, config))) => {
                assert_eq!(text, "ldm={count=2},main");
                assert_eq!(config.groups.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        let message = refused(&THREAD_CONFIG, "ldn");
        assert!(
            message.starts_with("ThreadConfig: unknown thread type \"ldn\""),
            "{message}"
        );
    }

    #[test]
    fn lookup_is_case_insensitive_and_per_section() {
        let data = SectionKind::Data;
        assert_eq!(
            lookup(data, "datamemory").map(|p| p.name),
            Some("DataMemory")
        );
        assert_eq!(lookup(data, "ID").map(|p| p.name), Some("NodeId"));
        assert_eq!(
            lookup(data, "LockPagesInMemory").map(|p| p.name),
            Some("LockPagesInMainMemory")
        );
        assert!(lookup(SectionKind::Mgm, "DataMemory").is_none());
        assert!(lookup(SectionKind::Api { mysqld: true }, "DataDir").is_none());
        assert_eq!(
            lookup(SectionKind::Mgm, "portnumber").map(|p| p.name),
            Some("PortNumber")
        );
        assert!(lookup(SectionKind::TcpDefault, "SendBufferMemory").is_some());
        assert!(lookup(data, "DataMemroy").is_none());
    }

    #[test]
    fn sizes_are_written_in_their_largest_unit() {
        assert_eq!(size_text(98 * MIB), "98M");
        assert_eq!(size_text(16 * TIB), "16T");
        assert_eq!(size_text(1536 * KIB), "1536K");
        assert_eq!(size_text(1000), "1000");
    }
}
