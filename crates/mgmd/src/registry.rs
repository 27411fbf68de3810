//! The management server's view of every configured node: who holds which
//! node id, in what state each node is, and when a data node was last heard
//! from.
//!
//! This is the decision logic of the management server, kept free of I/O so
//! it can be tested on its own: the server feeds it what arrives on the
//! connections and does what it answers (reply, send a stop order, close a
//! connection). What it decides worth keeping is queued as cluster-log lines
//! and taken with [`Registry::take_log`].
//!
//! A data node moves through these states:
//!
//! ```text
//! NotConnected/Failed/Restarting --alloc--> Starting --report Started--> Started
//! any connected --session closes, no order--> Failed         (ALERT)
//! any connected --no report for 4 heartbeat intervals--> Failed (ALERT)
//! any connected --stop order--> Stopping --session closes--> NotConnected
//! any connected --restart order--> Restarting --session closes--> Restarting
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use config::ClusterConfig;
use signal::{
    EventCategory, EventKind, NodeBitmask, NodeId, NodeState, NodeStatusEntry, NodeType, Severity,
    NO_NODE_GROUP,
};

use crate::cluster_log::Event;

/// Identifies one TCP connection for as long as the server runs.
pub(crate) type ConnectionId = u64;

/// Status reports a data node may miss before it is declared failed.
pub const HEARTBEATS_MISSED_MAX: u32 = 4;

/// A configured node as the registry needs it.
#[derive(Clone, Debug)]
pub(crate) struct NodeSlotConfig {
    pub node: NodeId,
    pub node_type: NodeType,
    pub host: String,
    pub node_group: u32,
    /// Data nodes: `HeartbeatIntervalDbApi` of that node.
    pub heartbeat_interval_ms: Option<u32>,
    /// A `[mysqld]` slot.
    pub mysqld: bool,
}

/// What a node says about itself when it asks for a node id.
#[derive(Clone, Debug)]
pub(crate) struct AllocRequest {
    pub requested: Option<NodeId>,
    pub node_type: NodeType,
    pub version: u32,
    pub pid: u32,
    pub hostname: String,
    /// The IP address the request came from.
    pub address: String,
}

/// The fields of one `MgmNodeStatusRep`.
#[derive(Clone, Debug)]
pub(crate) struct StatusReport {
    pub state: NodeState,
    pub pid: u32,
    pub version: u32,
    pub view_id: u32,
    pub members: NodeBitmask,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum StopOrder {
    Stop,
    Restart,
}

#[derive(Debug)]
struct Session {
    connection: ConnectionId,
    last_heard: Instant,
    order: Option<StopOrder>,
}

#[derive(Debug)]
struct Slot {
    config: NodeSlotConfig,
    state: NodeState,
    pid: u32,
    version: u32,
    start_count: u32,
    view_id: u32,
    members: NodeBitmask,
    session: Option<Session>,
    /// Where the node holding the slot connected from.
    address: String,
}

impl Slot {
    fn heartbeat_timeout(&self) -> Option<Duration> {
        self.config
            .heartbeat_interval_ms
            .map(|ms| Duration::from_millis(u64::from(ms) * u64::from(HEARTBEATS_MISSED_MAX)))
    }

    /// Ends the session (if any) and forgets what belonged to the process.
    fn end_session(&mut self, state: NodeState) -> Option<Session> {
        let session = self.session.take();
        self.state = state;
        self.pid = 0;
        self.view_id = 0;
        self.members = NodeBitmask::new();
        self.address.clear();
        session
    }
}

/// A cluster-log line the registry decided on, about `node`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogLine {
    pub(crate) node: NodeId,
    pub(crate) severity: Severity,
    pub(crate) category: EventCategory,
    pub(crate) level: u8,
    pub(crate) text: String,
}

impl LogLine {
    pub(crate) fn event(&self) -> Event<'_> {
        Event {
            node: self.node,
            severity: self.severity,
            category: self.category,
            level: self.level,
            text: &self.text,
        }
    }
}

pub(crate) struct Registry {
    own: NodeId,
    own_pid: u32,
    /// The configuration file's name, for messages.
    config_name: String,
    slots: BTreeMap<NodeId, Slot>,
    log: Vec<LogLine>,
}

impl Registry {
    pub(crate) fn new(
        own: NodeId,
        own_pid: u32,
        config_name: &str,
        nodes: impl IntoIterator<Item = NodeSlotConfig>,
    ) -> Registry {
        let mut slots = BTreeMap::new();
        for config in nodes {
            let node = config.node;
            let previous = slots.insert(
                node,
                Slot {
                    config,
                    state: NodeState::NotConnected,
                    pid: 0,
                    version: 0,
                    start_count: 0,
                    view_id: 0,
                    members: NodeBitmask::new(),
                    session: None,
                    address: String::new(),
                },
            );
            assert!(previous.is_none(), "node id {node} configured twice");
        }
        let own_slot = slots.get(&own).map(|slot| slot.config.node_type);
        assert_eq!(own_slot, Some(NodeType::Management), "own node id {own}");
        Registry {
            own,
            own_pid,
            config_name: config_name.to_owned(),
            slots,
            log: Vec::new(),
        }
    }

    pub(crate) fn from_config(
        own: NodeId,
        own_pid: u32,
        config_name: &str,
        config: &ClusterConfig,
    ) -> Registry {
        let management = config.management_nodes.iter().map(|m| NodeSlotConfig {
            node: m.node_id,
            node_type: NodeType::Management,
            host: m.host_name.clone(),
            node_group: NO_NODE_GROUP,
            heartbeat_interval_ms: None,
            mysqld: false,
        });
        let data = config.data_nodes.iter().map(|d| NodeSlotConfig {
            node: d.node_id,
            node_type: NodeType::Data,
            host: d.host_name.clone(),
            node_group: d.node_group,
            heartbeat_interval_ms: Some(d.params.heartbeat_interval_db_api_ms),
            mysqld: false,
        });
        let api = config.api_nodes.iter().map(|a| NodeSlotConfig {
            node: a.node_id,
            node_type: NodeType::Api,
            host: a.host_name.clone().unwrap_or_default(),
            node_group: NO_NODE_GROUP,
            heartbeat_interval_ms: None,
            mysqld: a.mysqld,
        });
        Registry::new(own, own_pid, config_name, management.chain(data).chain(api))
    }

    /// Cluster-log lines decided since the last call, oldest first.
    pub(crate) fn take_log(&mut self) -> Vec<LogLine> {
        std::mem::take(&mut self.log)
    }

    fn log(&mut self, severity: Severity, kind: EventKind, node: NodeId, text: String) {
        self.log.push(LogLine {
            node,
            severity,
            category: kind.category(),
            level: kind.level(),
            text: format!("Node {node}: {text}"),
        });
    }

    /// Grants a node id to the node on `connection`, or says why not.
    pub(crate) fn alloc(
        &mut self,
        request: &AllocRequest,
        connection: ConnectionId,
        now: Instant,
    ) -> Result<NodeId, String> {
        if request.node_type == NodeType::Management {
            return Err("management servers do not get their node id from another \
                        management server: start it with --node-id"
                .to_owned());
        }
        let node = match request.requested {
            Some(node) => self.check_requested(node, request.node_type)?,
            None => self.lowest_free(request.node_type)?,
        };
        let slot = self.slots.get_mut(&node).expect("checked above");
        assert!(slot.session.is_none());
        assert_eq!(slot.config.node_type, request.node_type);
        slot.session = Some(Session {
            connection,
            last_heard: now,
            order: None,
        });
        slot.start_count += 1;
        slot.pid = request.pid;
        slot.version = request.version;
        slot.view_id = 0;
        slot.members = NodeBitmask::new();
        slot.address.clone_from(&request.address);
        let what = if request.node_type == NodeType::Data {
            slot.state = NodeState::Starting;
            "starting"
        } else {
            // API nodes report nothing more to the management server.
            slot.state = NodeState::Started;
            "API node connected"
        };
        let text = format!(
            "{what} (pid {}, host {}, version {}, start {})",
            request.pid,
            display_host(&request.hostname),
            signal::version_string(request.version),
            slot.start_count
        );
        let kind = if request.node_type == NodeType::Data {
            EventKind::DataNodeRegistered
        } else {
            EventKind::ApiConnected
        };
        self.log(Severity::Info, kind, node, text);
        Ok(node)
    }

    fn check_requested(&self, node: NodeId, node_type: NodeType) -> Result<NodeId, String> {
        let Some(slot) = self
            .slots
            .get(&node)
            .filter(|s| s.config.node_type == node_type)
        else {
            return Err(format!(
                "node id {node} is not {} in {} ({})",
                with_article(node_type),
                self.config_name,
                self.what_is(node)
            ));
        };
        if slot.session.is_some() {
            return Err(format!(
                "node id {node} is already connected (pid {})",
                slot.pid
            ));
        }
        Ok(node)
    }

    fn lowest_free(&self, node_type: NodeType) -> Result<NodeId, String> {
        let mut configured = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.config.node_type == node_type);
        if let Some((node, _)) = configured.clone().find(|(_, slot)| slot.session.is_none()) {
            return Ok(*node);
        }
        let held: Vec<String> = configured.by_ref().map(|(n, _)| n.to_string()).collect();
        let why = if held.is_empty() {
            format!("none is configured in {}", self.config_name)
        } else {
            format!("{} connected", held.join(", "))
        };
        Err(format!("no free {} node id ({why})", node_type.as_str()))
    }

    /// "it is an api node" / "it is not configured".
    fn what_is(&self, node: NodeId) -> String {
        match self.slots.get(&node) {
            Some(slot) => format!("it is {}", with_article(slot.config.node_type)),
            None => "it is not configured".to_owned(),
        }
    }

    /// True while `connection` is the session of `node`.
    pub(crate) fn holds(&self, node: NodeId, connection: ConnectionId) -> bool {
        self.session(node)
            .is_some_and(|session| session.connection == connection)
    }

    fn session(&self, node: NodeId) -> Option<&Session> {
        self.slots.get(&node).and_then(|slot| slot.session.as_ref())
    }

    /// A data node's report of itself (and its heartbeat). `Err` means the
    /// session broke the protocol and is to be closed.
    pub(crate) fn status_report(
        &mut self,
        node: NodeId,
        connection: ConnectionId,
        report: &StatusReport,
        now: Instant,
    ) -> Result<(), String> {
        if !self.holds(node, connection) {
            // The heartbeat monitor ended it between the signal's arrival and now.
            return Err(format!("the session of node {node} was ended"));
        }
        let slot = self.slots.get_mut(&node).expect("held above");
        if slot.config.node_type != NodeType::Data {
            return Err(format!(
                "node {node} is {}: only data nodes send status reports",
                with_article(slot.config.node_type)
            ));
        }
        if !matches!(
            report.state,
            NodeState::Starting | NodeState::Started | NodeState::Stopping
        ) {
            return Err(format!(
                "node {node} reported state \"{}\", which a running node cannot be in",
                report.state.as_str()
            ));
        }
        let session = slot.session.as_mut().expect("held above");
        session.last_heard = now;
        let ordered = session.order.is_some();
        slot.pid = report.pid;
        slot.version = report.version;
        slot.view_id = report.view_id;
        slot.members = report.members;
        // While an order is pending, the order's state is what the user asked
        // to see; the node may still report its old state until it acts.
        if ordered || slot.state == report.state {
            return Ok(());
        }
        slot.state = report.state;
        let text = match report.state {
            NodeState::Started => format!(
                "started (view {}, members {:?})",
                report.view_id, report.members
            ),
            other => other.as_str().to_owned(),
        };
        self.log(Severity::Info, EventKind::NodeStarted, node, text);
        Ok(())
    }

    /// The session of `node` on `connection` closed.
    pub(crate) fn session_closed(&mut self, node: NodeId, connection: ConnectionId) {
        if !self.holds(node, connection) {
            // Already ended (declared failed) by the heartbeat check.
            return;
        }
        let slot = self.slots.get(&node).expect("held above");
        let node_type = slot.config.node_type;
        let order = slot.session.as_ref().and_then(|s| s.order);
        let (state, severity, text) = match (node_type, order) {
            (NodeType::Data, None) => (
                NodeState::Failed,
                Severity::Alert,
                "lost connection (process died?)",
            ),
            (NodeType::Data, Some(StopOrder::Stop)) => {
                (NodeState::NotConnected, Severity::Info, "stopped")
            }
            (NodeType::Data, Some(StopOrder::Restart)) => {
                (NodeState::Restarting, Severity::Info, "stopped for restart")
            }
            _ => (
                NodeState::NotConnected,
                Severity::Info,
                "API node disconnected",
            ),
        };
        let kind = match (node_type, order) {
            (NodeType::Data, None) => EventKind::NodeLost,
            (NodeType::Data, Some(_)) => EventKind::NodeStopped,
            _ => EventKind::ApiDisconnected,
        };
        let slot = self.slots.get_mut(&node).expect("held above");
        slot.end_session(state);
        self.log(severity, kind, node, text.to_owned());
    }

    /// Orders `target` (or every connected data node) to stop or restart.
    /// Returns the nodes ordered with their sessions, for the server to send
    /// the orders on.
    pub(crate) fn order_stop(
        &mut self,
        target: Option<NodeId>,
        restart: bool,
        force: bool,
    ) -> Result<Vec<(NodeId, ConnectionId)>, String> {
        let targets: Vec<NodeId> = match target {
            Some(node) => {
                let slot = self
                    .slots
                    .get(&node)
                    .filter(|slot| slot.config.node_type == NodeType::Data);
                let Some(slot) = slot else {
                    return Err(format!(
                        "node {node} is not a data node ({})",
                        self.what_is(node)
                    ));
                };
                if slot.session.is_none() {
                    return Err(match slot.state {
                        NodeState::NotConnected => format!("node {node} is not connected"),
                        state => format!("node {node} is not connected (it is {})", state.as_str()),
                    });
                }
                if !force {
                    self.check_group_keeps_serving(node, restart)?;
                }
                vec![node]
            }
            None => self
                .slots
                .iter()
                .filter(|(_, s)| s.config.node_type == NodeType::Data && s.session.is_some())
                .map(|(node, _)| *node)
                .collect(),
        };
        let (order, state, verb) = if restart {
            (StopOrder::Restart, NodeState::Restarting, "restart ordered")
        } else {
            (StopOrder::Stop, NodeState::Stopping, "stop ordered")
        };
        let mut ordered = Vec::with_capacity(targets.len());
        for node in targets {
            let slot = self.slots.get_mut(&node).expect("chosen above");
            let session = slot.session.as_mut().expect("chosen above");
            session.order = Some(order);
            ordered.push((node, session.connection));
            slot.state = state;
            self.log(
                Severity::Info,
                EventKind::StopOrdered,
                node,
                verb.to_owned(),
            );
        }
        Ok(ordered)
    }

    /// What `node` is, as far as the cluster knows: a data node that says
    /// it is started but was left out of a newer view that a started data
    /// node reported is failed. Why: a hung node sends nothing, so its own
    /// last report stands until `HEARTBEATS_MISSED_MAX` of its heartbeat
    /// intervals pass (6 s by default), while the data nodes declare it
    /// dead in about 1 s and report their new view at once; `admin show`
    /// would disagree with the cluster meanwhile. Only what is shown and
    /// judged changes: the node's session stays until its heartbeats stop.
    fn effective_state(&self, node: NodeId) -> NodeState {
        let slot = &self.slots[&node];
        if slot.config.node_type != NodeType::Data || slot.state != NodeState::Started {
            return slot.state;
        }
        let left_out = self.slots.values().any(|other| {
            other.config.node_type == NodeType::Data
                && other.state == NodeState::Started
                && other.view_id > slot.view_id
                && !other.members.contains(node)
        });
        if left_out {
            NodeState::Failed
        } else {
            slot.state
        }
    }

    /// Refuses to stop `node` when it is the only started (serving) node of
    /// its node group (NDB: "Node shutdown would cause system crash"):
    /// the group's rows would then be on no serving node and the whole
    /// cluster would shut down. The trap this closes is a rolling restart
    /// that stops the copy source of a partner still starting.
    fn check_group_keeps_serving(&self, node: NodeId, restart: bool) -> Result<(), String> {
        let slot = &self.slots[&node];
        let group = slot.config.node_group;
        if self.effective_state(node) != NodeState::Started || group == NO_NODE_GROUP {
            return Ok(());
        }
        let partners: Vec<(NodeId, NodeState)> = self
            .slots
            .iter()
            .filter(|(n, s)| {
                **n != node && s.config.node_type == NodeType::Data && s.config.node_group == group
            })
            .map(|(n, _)| (*n, self.effective_state(*n)))
            .collect();
        if partners
            .iter()
            .any(|(_, state)| *state == NodeState::Started)
        {
            return Ok(());
        }
        let verb = if restart { "restart" } else { "stop" };
        let others = if partners.is_empty() {
            "it has no other node".to_owned()
        } else {
            partners
                .iter()
                .map(|(n, state)| format!("node {n} is {}", state.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(format!(
            "node {node} is the only started node of node group {group} ({others}): \
             to {verb} it would leave the group with no serving node and shut the cluster \
             down; wait until another node of the group is started, or force it (--force)"
        ))
    }

    /// Ends the sessions of data nodes not heard from for
    /// `HEARTBEATS_MISSED_MAX` heartbeat intervals; returns their
    /// connections, for the server to close.
    pub(crate) fn expire_silent(&mut self, now: Instant) -> Vec<ConnectionId> {
        let mut expired = Vec::new();
        let mut lines = Vec::new();
        for (node, slot) in self.slots.iter_mut() {
            let (Some(timeout), Some(session)) = (slot.heartbeat_timeout(), &slot.session) else {
                continue;
            };
            let silent = now.saturating_duration_since(session.last_heard);
            if silent <= timeout {
                continue;
            }
            let order = session.order;
            let connection = session.connection;
            let interval_ms = timeout.as_millis() / u128::from(HEARTBEATS_MISSED_MAX);
            let (state, severity, what) = match order {
                None => (NodeState::Failed, Severity::Alert, "declared failed"),
                Some(StopOrder::Stop) => (
                    NodeState::NotConnected,
                    Severity::Warning,
                    "taken as stopped",
                ),
                Some(StopOrder::Restart) => (
                    NodeState::Restarting,
                    Severity::Warning,
                    "taken as stopped for restart",
                ),
            };
            slot.end_session(state);
            expired.push(connection);
            lines.push(LogLine {
                node: *node,
                severity,
                category: EventKind::HeartbeatsMissed.category(),
                level: EventKind::HeartbeatsMissed.level(),
                text: format!(
                    "Node {node}: no status report for {} ms \
                     ({HEARTBEATS_MISSED_MAX} heartbeats of {interval_ms} ms missed), {what}",
                    silent.as_millis()
                ),
            });
        }
        self.log.extend(lines);
        expired
    }

    pub(crate) fn is_data_node(&self, node: NodeId) -> bool {
        self.slots
            .get(&node)
            .is_some_and(|slot| slot.config.node_type == NodeType::Data)
    }

    /// Data nodes that still hold a session.
    pub(crate) fn data_sessions(&self) -> Vec<NodeId> {
        self.slots
            .iter()
            .filter(|(_, s)| s.config.node_type == NodeType::Data && s.session.is_some())
            .map(|(node, _)| *node)
            .collect()
    }

    /// Every configured data node, and the connection of its session if it
    /// holds one.
    pub(crate) fn data_node_sessions(&self) -> Vec<(NodeId, Option<ConnectionId>)> {
        self.slots
            .iter()
            .filter(|(_, s)| s.config.node_type == NodeType::Data)
            .map(|(node, s)| (*node, s.session.as_ref().map(|s| s.connection)))
            .collect()
    }

    /// Every configured node, in node id order.
    pub(crate) fn show(&self) -> Vec<NodeStatusEntry> {
        self.slots
            .iter()
            .map(|(node, slot)| {
                let own = *node == self.own;
                NodeStatusEntry {
                    node: *node,
                    node_type: slot.config.node_type,
                    host: slot.config.host.clone(),
                    node_group: slot.config.node_group,
                    state: if own {
                        NodeState::Started
                    } else {
                        self.effective_state(*node)
                    },
                    pid: if own { self.own_pid } else { slot.pid },
                    version: if own { signal::VERSION } else { slot.version },
                    start_count: if own { 1 } else { slot.start_count },
                    view_id: slot.view_id,
                    members: slot.members,
                    mysqld: slot.config.mysqld,
                    address: slot.address.clone(),
                }
            })
            .collect()
    }
}

fn with_article(node_type: NodeType) -> &'static str {
    match node_type {
        NodeType::Data => "a data node",
        NodeType::Management => "a management node",
        NodeType::Api => "an api node",
    }
}

fn display_host(hostname: &str) -> &str {
    if hostname.is_empty() {
        "unknown"
    } else {
        hostname
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u8) -> NodeId {
        NodeId::new(id).expect("non-zero")
    }

    fn slot(id: u8, node_type: NodeType) -> NodeSlotConfig {
        NodeSlotConfig {
            node: node(id),
            node_type,
            host: "localhost".to_owned(),
            node_group: if node_type == NodeType::Data {
                0
            } else {
                NO_NODE_GROUP
            },
            heartbeat_interval_ms: (node_type == NodeType::Data).then_some(100),
            mysqld: false,
        }
    }

    /// mgmd 1, data 2 and 3, api 7.
    fn registry() -> Registry {
        Registry::new(
            node(1),
            4242,
            "config.ini",
            [
                slot(1, NodeType::Management),
                slot(2, NodeType::Data),
                slot(3, NodeType::Data),
                slot(7, NodeType::Api),
            ],
        )
    }

    fn request(requested: Option<u8>, node_type: NodeType, pid: u32) -> AllocRequest {
        AllocRequest {
            requested: requested.map(node),
            node_type,
            version: signal::VERSION,
            pid,
            hostname: "h".to_owned(),
            address: "192.0.2.1".to_owned(),
        }
    }

    fn state(registry: &Registry, id: u8) -> NodeState {
        let entries = registry.show();
        let entry = entries.iter().find(|e| e.node == node(id));
        entry.expect("configured").state
    }

    fn report(state: NodeState) -> StatusReport {
        StatusReport {
            state,
            pid: 1000,
            version: signal::VERSION,
            view_id: 3,
            members: [node(2), node(3)].into_iter().collect(),
        }
    }

    /// [`registry`] with data nodes 2 and 3 holding sessions on
    /// connections 1 and 2.
    fn with_both_data_nodes(now: Instant) -> Registry {
        let mut r = registry();
        r.alloc(&request(Some(2), NodeType::Data, 10), 1, now)
            .expect("free");
        r.alloc(&request(Some(3), NodeType::Data, 11), 2, now)
            .expect("free");
        r
    }

    #[test]
    fn alloc_grants_requested_then_lowest_free() {
        let mut r = registry();
        let now = Instant::now();
        assert_eq!(
            r.alloc(&request(Some(3), NodeType::Data, 10), 1, now),
            Ok(node(3))
        );
        assert_eq!(
            r.alloc(&request(None, NodeType::Data, 11), 2, now),
            Ok(node(2))
        );
        assert_eq!(
            r.alloc(&request(None, NodeType::Data, 12), 3, now),
            Err("no free data node id (2, 3 connected)".to_owned())
        );
        assert_eq!(
            r.alloc(&request(Some(2), NodeType::Data, 12), 3, now),
            Err("node id 2 is already connected (pid 11)".to_owned())
        );
        assert_eq!(
            r.alloc(&request(Some(7), NodeType::Data, 12), 3, now),
            Err("node id 7 is not a data node in config.ini (it is an api node)".to_owned())
        );
        assert_eq!(
            r.alloc(&request(Some(9), NodeType::Api, 12), 3, now),
            Err("node id 9 is not an api node in config.ini (it is not configured)".to_owned())
        );
        assert_eq!(
            r.alloc(&request(None, NodeType::Api, 12), 3, now),
            Ok(node(7))
        );
        assert_eq!(state(&r, 2), NodeState::Starting);
        assert_eq!(state(&r, 7), NodeState::Started);
    }

    #[test]
    fn report_started_then_session_lost_is_failed() {
        let mut r = registry();
        let now = Instant::now();
        r.alloc(&request(Some(2), NodeType::Data, 10), 1, now)
            .expect("free");
        r.status_report(node(2), 1, &report(NodeState::Started), now)
            .expect("valid");
        let entry = &r.show()[1];
        assert_eq!(
            (entry.state, entry.pid, entry.view_id),
            (NodeState::Started, 1000, 3)
        );
        assert_eq!(entry.address, "192.0.2.1");
        r.take_log();
        r.session_closed(node(2), 1);
        assert_eq!(state(&r, 2), NodeState::Failed);
        // Where a node connected from is forgotten with its session.
        assert_eq!(r.show()[1].address, "");
        let log = r.take_log();
        assert_eq!(
            log.iter()
                .map(|l| (l.severity, l.category, l.text.as_str()))
                .collect::<Vec<_>>(),
            [(
                Severity::Alert,
                EventCategory::Error,
                "Node 2: lost connection (process died?)"
            )]
        );
        // A stale close of an older connection changes nothing.
        r.alloc(&request(Some(2), NodeType::Data, 11), 5, now)
            .expect("free again");
        r.session_closed(node(2), 1);
        assert_eq!(state(&r, 2), NodeState::Starting);
        assert_eq!(r.show()[1].start_count, 2);
    }

    #[test]
    fn stop_and_restart_orders() {
        let now = Instant::now();
        let mut r = with_both_data_nodes(now);
        assert_eq!(
            r.order_stop(Some(node(7)), false, false),
            Err("node 7 is not a data node (it is an api node)".to_owned())
        );
        assert_eq!(
            r.order_stop(Some(node(2)), false, false),
            Ok(vec![(node(2), 1)])
        );
        assert_eq!(state(&r, 2), NodeState::Stopping);
        // The node's own report does not hide the order.
        r.status_report(node(2), 1, &report(NodeState::Started), now)
            .expect("valid");
        assert_eq!(state(&r, 2), NodeState::Stopping);
        r.session_closed(node(2), 1);
        assert_eq!(state(&r, 2), NodeState::NotConnected);
        assert_eq!(
            r.order_stop(Some(node(2)), false, false),
            Err("node 2 is not connected".to_owned())
        );
        assert_eq!(r.order_stop(None, true, false), Ok(vec![(node(3), 2)]));
        assert_eq!(state(&r, 3), NodeState::Restarting);
        r.session_closed(node(3), 2);
        assert_eq!(state(&r, 3), NodeState::Restarting);
        assert!(r.data_sessions().is_empty());
    }

    /// A node group whose other node is still starting (copying): its
    /// only started node is not stopped or restarted unless forced.
    #[test]
    fn the_only_started_node_of_a_group_is_stopped_only_by_force() {
        let now = Instant::now();
        let mut r = with_both_data_nodes(now);
        r.status_report(node(2), 1, &report(NodeState::Started), now)
            .expect("valid");
        r.status_report(node(3), 2, &report(NodeState::Starting), now)
            .expect("valid");
        let refused = r.order_stop(Some(node(2)), true, false).unwrap_err();
        assert!(
            refused.contains("node 2 is the only started node of node group 0")
                && refused.contains("node 3 is starting"),
            "{refused}"
        );
        assert_eq!(state(&r, 2), NodeState::Started, "nothing was ordered");
        // The starting node itself may go, and once both serve either may.
        assert_eq!(
            r.order_stop(Some(node(3)), false, false),
            Ok(vec![(node(3), 2)])
        );
        r.session_closed(node(3), 2);
        r.alloc(&request(Some(3), NodeType::Data, 12), 3, now)
            .expect("free again");
        r.status_report(node(3), 3, &report(NodeState::Started), now)
            .expect("valid");
        assert_eq!(
            r.order_stop(Some(node(2)), true, false),
            Ok(vec![(node(2), 1)])
        );
        // With its partner restarting, node 3 is the only one left: forced only.
        assert!(r.order_stop(Some(node(3)), false, false).is_err());
        assert_eq!(
            r.order_stop(Some(node(3)), false, true),
            Ok(vec![(node(3), 3)])
        );
    }

    /// A hung node reports nothing; the others' new view without it makes
    /// it show failed at once, not after its heartbeats time out.
    #[test]
    fn a_node_left_out_of_a_newer_view_shows_failed_at_once() {
        let now = Instant::now();
        let mut r = with_both_data_nodes(now);
        for (n, connection) in [(2, 1), (3, 2)] {
            r.status_report(node(n), connection, &report(NodeState::Started), now)
                .expect("valid");
        }
        assert_eq!(state(&r, 3), NodeState::Started);
        // Node 3 hangs; node 2 reports view 4 without it.
        let without_3 = StatusReport {
            view_id: 4,
            members: [node(2)].into_iter().collect(),
            ..report(NodeState::Started)
        };
        r.status_report(node(2), 1, &without_3, now).expect("valid");
        assert_eq!(state(&r, 3), NodeState::Failed);
        assert_eq!(state(&r, 2), NodeState::Started);
        // It rejoins: view 5 holds it again.
        let both = StatusReport {
            view_id: 5,
            ..report(NodeState::Started)
        };
        r.status_report(node(2), 1, &both, now).expect("valid");
        r.status_report(node(3), 2, &both, now).expect("valid");
        assert_eq!(state(&r, 3), NodeState::Started);
    }

    #[test]
    fn silent_data_node_is_declared_failed() {
        let mut r = registry();
        let start = Instant::now();
        r.alloc(&request(Some(2), NodeType::Data, 10), 1, start)
            .expect("free");
        r.alloc(&request(Some(7), NodeType::Api, 11), 2, start)
            .expect("free");
        let interval = Duration::from_millis(100);
        r.status_report(node(2), 1, &report(NodeState::Started), start + interval)
            .expect("valid");
        assert!(r.expire_silent(start + interval * 5).is_empty());
        assert_eq!(r.expire_silent(start + interval * 6), vec![1]);
        assert_eq!(state(&r, 2), NodeState::Failed);
        assert!(!r.holds(node(2), 1));
        // API nodes send no reports and never expire.
        assert!(r.holds(node(7), 2));
        let log = r.take_log();
        assert_eq!(log.last().map(|l| l.severity), Some(Severity::Alert));
    }

    #[test]
    fn bad_reports_are_refused() {
        let mut r = registry();
        let now = Instant::now();
        r.alloc(&request(Some(2), NodeType::Data, 10), 1, now)
            .expect("free");
        r.alloc(&request(Some(7), NodeType::Api, 11), 2, now)
            .expect("free");
        assert!(r
            .status_report(node(2), 1, &report(NodeState::Failed), now)
            .is_err());
        assert!(r
            .status_report(node(7), 2, &report(NodeState::Started), now)
            .is_err());
    }

    #[test]
    fn show_lists_every_node_with_own_process() {
        let r = registry();
        let entries = r.show();
        let ids: Vec<u8> = entries.iter().map(|e| e.node.get()).collect();
        assert_eq!(ids, vec![1, 2, 3, 7]);
        assert_eq!(entries[0].state, NodeState::Started);
        assert_eq!(entries[0].pid, 4242);
        assert_eq!(entries[3].node_group, NO_NODE_GROUP);
        assert_eq!(entries[1].state, NodeState::NotConnected);
    }
}
