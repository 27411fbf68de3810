//! From sections to a [`ClusterConfig`]: default sections applied, node ids
//! placed, and the rules that span nodes checked (one `NoOfReplicas`, full
//! node groups, enough redo log parts for the ldm threads).
//!
//! Decisions beyond NDB's file format:
//! - default sections apply to every node of their kind wherever they stand
//!   in the file; a parameter set in two default sections of one kind is an
//!   error, as within one section;
//! - a data node without `ServerPort` listens on the first management
//!   server's `PortNumber` plus its node id;
//! - `NoOfFragmentLogParts` not given is the larger of 4 and the ldm thread
//!   count; given, it must be at least the ldm thread count.

use std::path::PathBuf;

use kernel::thread_config::{
    counts_for_max_execution_threads, SpinMethod, ThreadLayout, ThreadRole,
};
use signal::NodeId;

use crate::error::{ConfigError, ConfigErrorKind};
use crate::parameters::{self as p, Fallback, Parameter, Value};
use crate::syntax::{Section, SectionKind};
use crate::{ApiNode, ClusterConfig, DataNode, DataNodeParams, ManagementNode};

/// One parameter as a section set it.
#[derive(Debug)]
struct Setting {
    parameter: &'static Parameter,
    value: Value,
    line: usize,
}

/// The parameters one section (or all default sections of a kind) set.
#[derive(Debug, Default)]
struct Settings {
    items: Vec<Setting>,
}

impl Settings {
    fn get(&self, parameter: &Parameter) -> Option<&Setting> {
        self.items
            .iter()
            .find(|s| s.parameter.name == parameter.name)
    }
}

/// A node's own section.
#[derive(Debug)]
struct NodeSection {
    kind: SectionKind,
    header: String,
    line: usize,
    settings: Settings,
}

/// What a node sees: its own settings over its kind's defaults over the
/// built-in defaults.
struct View<'a> {
    own: &'a Settings,
    defaults: &'a Settings,
    section_line: usize,
}

impl View<'_> {
    fn setting(&self, parameter: &Parameter) -> Option<&Setting> {
        self.own
            .get(parameter)
            .or_else(|| self.defaults.get(parameter))
    }

    /// The line that set `parameter`, or the section's own line.
    fn line(&self, parameter: &Parameter) -> usize {
        self.setting(parameter)
            .map_or(self.section_line, |s| s.line)
    }

    fn number(&self, parameter: &Parameter) -> u64 {
        match (self.setting(parameter), parameter.default) {
            (
                Some(Setting {
                    value: Value::Number(n),
                    ..
                }),
                _,
            ) => *n,
            (None, Fallback::Number(n)) => n,
            (other, default) => panic!(
                "{} is not a number: {other:?} / {default:?}",
                parameter.name
            ),
        }
    }

    /// For parameters whose range fits in 32 bits.
    fn number_u32(&self, parameter: &Parameter) -> u32 {
        let n = self.number(parameter);
        u32::try_from(n).unwrap_or_else(|_| panic!("{} range fits u32: {n}", parameter.name))
    }

    fn flag(&self, parameter: &Parameter) -> bool {
        match (self.setting(parameter), parameter.default) {
            (
                Some(Setting {
                    value: Value::Bool(b),
                    ..
                }),
                _,
            ) => *b,
            (None, Fallback::Bool(b)) => b,
            (other, default) => panic!("{} is not a flag: {other:?} / {default:?}", parameter.name),
        }
    }

    fn text(&self, parameter: &Parameter) -> Option<String> {
        match (self.setting(parameter), parameter.default) {
            (
                Some(Setting {
                    value: Value::Text(t),
                    ..
                }),
                _,
            ) => Some(t.clone()),
            (None, Fallback::Text(t)) => Some(t.to_string()),
            (None, Fallback::None) => None,
            (other, default) => panic!("{} is not text: {other:?} / {default:?}", parameter.name),
        }
    }
}

/// Default settings of each node kind.
#[derive(Default)]
struct Defaults {
    data: Settings,
    mgm: Settings,
    api: Settings,
    tcp: Settings,
}

impl Defaults {
    fn of(&mut self, kind: SectionKind) -> &mut Settings {
        match kind {
            SectionKind::DataDefault | SectionKind::Data => &mut self.data,
            SectionKind::MgmDefault | SectionKind::Mgm => &mut self.mgm,
            SectionKind::ApiDefault | SectionKind::Api { .. } => &mut self.api,
            SectionKind::TcpDefault => &mut self.tcp,
        }
    }
}

pub(crate) fn assemble(
    sections: Vec<Section>,
    source_name: &str,
) -> Result<ClusterConfig, ConfigError> {
    let mut defaults = Defaults::default();
    let mut nodes: Vec<NodeSection> = Vec::new();
    for section in &sections {
        if section.kind.is_default() {
            read_settings(section, defaults.of(section.kind), source_name)?;
        } else {
            let mut settings = Settings::default();
            read_settings(section, &mut settings, source_name)?;
            nodes.push(NodeSection {
                kind: section.kind,
                header: section.header.clone(),
                line: section.line,
                settings,
            });
        }
    }
    require_section(&nodes, SectionKind::Mgm, "management server", source_name)?;
    require_section(&nodes, SectionKind::Data, "data node", source_name)?;
    let ids = assign_node_ids(&nodes, source_name)?;

    let mut config = ClusterConfig {
        source_name: source_name.to_string(),
        management_nodes: Vec::new(),
        data_nodes: Vec::new(),
        api_nodes: Vec::new(),
    };
    for (node, &node_id) in nodes.iter().zip(&ids) {
        match node.kind {
            SectionKind::Mgm => {
                config
                    .management_nodes
                    .push(management_node(node, node_id, &defaults.mgm))
            }
            SectionKind::Api { mysqld } => {
                config
                    .api_nodes
                    .push(api_node(node, node_id, mysqld, &defaults.api))
            }
            _ => {}
        }
    }
    let mgmd_port = config.management_nodes[0].port;
    for (node, &node_id) in nodes.iter().zip(&ids) {
        if node.kind == SectionKind::Data {
            let data_node = data_node(node, node_id, &defaults.data, mgmd_port, source_name)?;
            config.data_nodes.push(data_node);
        }
    }
    assign_node_groups(&mut config, &nodes, &defaults.data, source_name)?;
    check_ports(&config, source_name)?;
    Ok(config)
}

/// The host a listening port is taken on: the loopback names (and an
/// empty `HostName`, which is this machine) are one host.
fn port_host(host: &str) -> String {
    match host.to_ascii_lowercase().as_str() {
        "" | "localhost" | "localhost.localdomain" | "127.0.0.1" | "::1" => "localhost".to_owned(),
        other => other.to_owned(),
    }
}

/// No two nodes listen on one port of one host: the second would fail to
/// bind at start (or, with `SO_REUSEPORT`, share the first's connections),
/// far from the line that caused it.
fn check_ports(config: &ClusterConfig, source_name: &str) -> Result<(), ConfigError> {
    let mgmds = config
        .management_nodes
        .iter()
        .map(|m| (m.node_id, port_host(&m.host_name), m.port, "PortNumber"));
    let data = config.data_nodes.iter().map(|d| {
        (
            d.node_id,
            port_host(&d.host_name),
            d.server_port,
            "ServerPort",
        )
    });
    let listeners: Vec<_> = mgmds.chain(data).collect();
    for (i, (node, host, port, what)) in listeners.iter().enumerate() {
        if let Some((other, _, _, other_what)) = listeners[..i]
            .iter()
            .find(|(_, h, p, _)| h == host && p == port)
        {
            return Err(ConfigError::whole_file(
                source_name,
                ConfigErrorKind::PortClash {
                    node_id: node.get(),
                    parameter: what,
                    other_node_id: other.get(),
                    other_parameter: other_what,
                    host: host.clone(),
                    port: *port,
                },
            ));
        }
    }
    Ok(())
}

fn read_settings(
    section: &Section,
    settings: &mut Settings,
    source_name: &str,
) -> Result<(), ConfigError> {
    for entry in &section.entries {
        let error = |kind| ConfigError::at(source_name, entry.line, kind);
        let parameter = p::lookup(section.kind, &entry.name).ok_or_else(|| {
            error(ConfigErrorKind::UnknownParameter {
                parameter: entry.name.clone(),
                section: section.header.clone(),
            })
        })?;
        if parameter.per_node && section.kind.is_default() {
            return Err(error(ConfigErrorKind::NotInDefault {
                parameter: parameter.name,
                node_section: section.kind.node_section_name(),
                section: section.header.clone(),
            }));
        }
        if let Some(first) = settings.get(parameter) {
            return Err(error(ConfigErrorKind::DuplicateParameter {
                parameter: parameter.name,
                section: section.header.clone(),
                first_line: first.line,
            }));
        }
        let value = parameter.parse(&entry.value).map_err(error)?;
        settings.items.push(Setting {
            parameter,
            value,
            line: entry.line,
        });
    }
    Ok(())
}

fn require_section(
    nodes: &[NodeSection],
    kind: SectionKind,
    what: &'static str,
    source_name: &str,
) -> Result<(), ConfigError> {
    if nodes.iter().any(|n| n.kind == kind) {
        return Ok(());
    }
    Err(ConfigError::whole_file(
        source_name,
        ConfigErrorKind::MissingSection {
            section: kind.node_section_name(),
            what,
        },
    ))
}

/// Explicit `NodeId`s first (a repeated one is an error naming both lines),
/// then, in file order, the lowest free id for each node without one (NDB).
fn assign_node_ids(nodes: &[NodeSection], source_name: &str) -> Result<Vec<NodeId>, ConfigError> {
    // Which node section holds an id, and the line that gave it.
    let mut holder: Vec<Option<(usize, usize)>> = vec![None; 256];
    let mut ids: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let Some(setting) = node.settings.get(&p::NODE_ID) else {
            continue;
        };
        let Value::Number(n) = setting.value else {
            panic!("NodeId is a number: {:?}", setting.value);
        };
        let id = u8::try_from(n).ok().and_then(NodeId::new);
        let id = id.unwrap_or_else(|| panic!("NodeId range is 1..=255: {n}"));
        if let Some((other, other_line)) = holder[n as usize] {
            return Err(ConfigError::at(
                source_name,
                setting.line,
                ConfigErrorKind::DuplicateNodeId {
                    node_id: id.get(),
                    other_section: nodes[other].header.clone(),
                    other_line,
                },
            ));
        }
        holder[n as usize] = Some((i, setting.line));
        ids[i] = Some(id);
    }
    let mut next_free = 1usize;
    for (i, node) in nodes.iter().enumerate() {
        if ids[i].is_some() {
            continue;
        }
        while next_free <= usize::from(NodeId::MAX) && holder[next_free].is_some() {
            next_free += 1;
        }
        let id = u8::try_from(next_free).ok().and_then(NodeId::new);
        let Some(id) = id else {
            return Err(ConfigError::at(
                source_name,
                node.line,
                ConfigErrorKind::NoFreeNodeId {
                    section: node.header.clone(),
                    section_line: node.line,
                },
            ));
        };
        holder[next_free] = Some((i, node.line));
        ids[i] = Some(id);
    }
    let ids: Vec<NodeId> = ids.into_iter().flatten().collect();
    assert_eq!(ids.len(), nodes.len(), "every node has an id");
    Ok(ids)
}

fn management_node(node: &NodeSection, node_id: NodeId, defaults: &Settings) -> ManagementNode {
    let view = View {
        own: &node.settings,
        defaults,
        section_line: node.line,
    };
    let port = view.number(&p::PORT_NUMBER);
    ManagementNode {
        node_id,
        host_name: view.text(&p::HOST_NAME).unwrap_or_default(),
        port: u16::try_from(port).unwrap_or_else(|_| panic!("PortNumber range fits u16: {port}")),
        data_dir: PathBuf::from(view.text(&p::DATA_DIR).unwrap_or_default()),
    }
}

fn api_node(node: &NodeSection, node_id: NodeId, mysqld: bool, defaults: &Settings) -> ApiNode {
    let view = View {
        own: &node.settings,
        defaults,
        section_line: node.line,
    };
    ApiNode {
        node_id,
        host_name: view.text(&p::API_HOST_NAME).filter(|h| !h.is_empty()),
        mysqld,
    }
}

fn data_node(
    node: &NodeSection,
    node_id: NodeId,
    defaults: &Settings,
    mgmd_port: u16,
    source_name: &str,
) -> Result<DataNode, ConfigError> {
    let view = View {
        own: &node.settings,
        defaults,
        section_line: node.line,
    };
    let server_port = match view.setting(&p::SERVER_PORT) {
        Some(_) => {
            let port = view.number(&p::SERVER_PORT);
            let port = u16::try_from(port);
            Some(port.unwrap_or_else(|_| panic!("ServerPort range fits u16")))
        }
        None => mgmd_port.checked_add(u16::from(node_id.get())),
    };
    let server_port = server_port.ok_or_else(|| {
        ConfigError::at(
            source_name,
            node.line,
            ConfigErrorKind::ServerPortOverflow {
                node_id: node_id.get(),
                port_number: mgmd_port,
            },
        )
    })?;
    let max_no_of_execution_threads = view.number_u32(&p::MAX_NO_OF_EXECUTION_THREADS);
    let (thread_config, threads) = match view.setting(&p::THREAD_CONFIG) {
        Some(Setting {
            value: Value::Threads(Some((text, config))),
            ..
        }) => (Some(text.clone()), ThreadLayout::from_thread_config(config)),
        _ => (
            None,
            ThreadLayout::from_counts(counts_for_max_execution_threads(
                max_no_of_execution_threads,
            )),
        ),
    };
    let mut threads = threads;
    let spin_method = view.text(&p::SPIN_METHOD).unwrap_or_default();
    threads.set_spin_method(
        SpinMethod::from_name(&spin_method).expect("SpinMethod is checked as one of its names"),
    );
    threads.set_batch_scheduling(view.flag(&p::BATCH_SCHEDULING));
    let ldm = threads.count(ThreadRole::Ldm);
    let no_of_fragment_log_parts = match view.setting(&p::NO_OF_FRAGMENT_LOG_PARTS) {
        Some(setting) => {
            let parts = view.number_u32(&p::NO_OF_FRAGMENT_LOG_PARTS);
            if parts < ldm {
                return Err(ConfigError::at(
                    source_name,
                    setting.line,
                    ConfigErrorKind::TooFewLogParts {
                        node_id: node_id.get(),
                        parts,
                        ldm,
                    },
                ));
            }
            parts
        }
        // Every allowed ldm count from 4 up is an allowed log part count.
        None => ldm.max(view.number_u32(&p::NO_OF_FRAGMENT_LOG_PARTS)),
    };
    let params = DataNodeParams {
        no_of_replicas: view.number_u32(&p::NO_OF_REPLICAS),
        data_memory_bytes: view.number(&p::DATA_MEMORY),
        threads,
        thread_config,
        max_no_of_execution_threads,
        no_of_fragment_log_parts,
        fragment_log_file_size_bytes: view.number(&p::FRAGMENT_LOG_FILE_SIZE),
        no_of_fragment_log_files: view.number_u32(&p::NO_OF_FRAGMENT_LOG_FILES),
        heartbeat_interval_db_db_ms: view.number_u32(&p::HEARTBEAT_INTERVAL_DB_DB),
        heartbeat_interval_db_api_ms: view.number_u32(&p::HEARTBEAT_INTERVAL_DB_API),
        time_between_global_checkpoints_ms: view.number_u32(&p::TIME_BETWEEN_GLOBAL_CHECKPOINTS),
        time_between_global_checkpoints_timeout_ms: view
            .number_u32(&p::TIME_BETWEEN_GLOBAL_CHECKPOINTS_TIMEOUT),
        time_between_epochs_ms: view.number_u32(&p::TIME_BETWEEN_EPOCHS),
        max_buffered_epochs: view.number_u32(&p::MAX_BUFFERED_EPOCHS),
        max_buffered_epoch_bytes: view.number_u32(&p::MAX_BUFFERED_EPOCH_BYTES),
        transaction_deadlock_detection_timeout_ms: view
            .number_u32(&p::TRANSACTION_DEADLOCK_DETECTION_TIMEOUT),
        max_no_of_concurrent_transactions: view.number_u32(&p::MAX_NO_OF_CONCURRENT_TRANSACTIONS),
        max_no_of_concurrent_operations: view.number_u32(&p::MAX_NO_OF_CONCURRENT_OPERATIONS),
        max_no_of_concurrent_scans: view.number_u32(&p::MAX_NO_OF_CONCURRENT_SCANS),
        start_partial_timeout_ms: view.number_u32(&p::START_PARTIAL_TIMEOUT),
        arbitration_timeout_ms: view.number_u32(&p::ARBITRATION_TIMEOUT),
        lock_pages_in_memory: view.number_u32(&p::LOCK_PAGES_IN_MAIN_MEMORY),
        stop_on_error: view.flag(&p::STOP_ON_ERROR),
        use_shm: view.flag(&p::USE_SHM),
    };
    assert!(params.no_of_fragment_log_parts >= ldm);
    Ok(DataNode {
        node_id,
        host_name: view.text(&p::HOST_NAME).unwrap_or_default(),
        server_port,
        data_dir: PathBuf::from(view.text(&p::DATA_DIR).unwrap_or_default()),
        node_group: 0,
        params,
    })
}

/// Checks that every data node has the same `NoOfReplicas` and that they
/// fill whole node groups, then numbers the groups in configuration order.
fn assign_node_groups(
    config: &mut ClusterConfig,
    nodes: &[NodeSection],
    defaults: &Settings,
    source_name: &str,
) -> Result<(), ConfigError> {
    let data_sections = nodes.iter().filter(|n| n.kind == SectionKind::Data);
    assert_eq!(data_sections.clone().count(), config.data_nodes.len());
    let first = &config.data_nodes[0];
    let (first_node_id, replicas) = (first.node_id, first.params.no_of_replicas);
    for (node, section) in config.data_nodes.iter().zip(data_sections) {
        if node.params.no_of_replicas != replicas {
            let view = View {
                own: &section.settings,
                defaults,
                section_line: section.line,
            };
            return Err(ConfigError::at(
                source_name,
                view.line(&p::NO_OF_REPLICAS),
                ConfigErrorKind::ReplicasDiffer {
                    node_id: node.node_id.get(),
                    replicas: node.params.no_of_replicas,
                    first_node_id: first_node_id.get(),
                    first_replicas: replicas,
                },
            ));
        }
    }
    assert!(replicas >= 1);
    if !config.data_nodes.len().is_multiple_of(replicas as usize) {
        return Err(ConfigError::whole_file(
            source_name,
            ConfigErrorKind::ReplicasDoNotDivide {
                data_nodes: config.data_nodes.len(),
                replicas,
            },
        ));
    }
    for (position, node) in config.data_nodes.iter_mut().enumerate() {
        node.node_group = position as u32 / replicas;
    }
    Ok(())
}
