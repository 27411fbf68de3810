//! `skarv admin`: the operator's view of a running cluster (NDB's `ndb_mgm`),
//! through the management server: `show`, `stop`, `restart`, `shutdown`.
//!
//! The renderers are public because the sandbox prints the same table.

use std::time::Duration;

use clap::{Args, Subcommand};
use mgmd::MgmClient;
use serde_json::{json, Value};
use signal::{NodeId, NodeState, NodeStatusEntry, NodeType, NO_NODE_GROUP};

/// How long to wait for the management server to accept the connection.
const CONNECT_TIMEOUT_MS: u64 = 5_000;

#[derive(Args)]
pub struct AdminArgs {
    /// The management server, `host:port`.
    #[arg(long, default_value = "localhost:1186", value_name = "HOST:PORT")]
    connect: String,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// List every configured node and its state, then the SQL nodes
    /// (`[mysqld]` slots) as NDB's ndb_mgm lists `[mysqld(API)]`.
    Show {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Stop a data node, or all data nodes (they stay down).
    Stop {
        /// A data node id, or `all`.
        #[arg(value_name = "N|all")]
        target: String,
        /// Stop even the only started node of a node group (the cluster
        /// shuts down).
        #[arg(long, short)]
        force: bool,
    },
    /// Restart a data node, or all data nodes (their angels start them again).
    Restart {
        /// A data node id, or `all`.
        #[arg(value_name = "N|all")]
        target: String,
        /// Restart even the only started node of a node group (the cluster
        /// shuts down and restarts).
        #[arg(long, short)]
        force: bool,
    },
    /// Stop every data node, then the management server.
    Shutdown,
}

pub fn run(args: AdminArgs) -> Result<(), String> {
    crate::die_quietly_on_broken_pipe();
    // Parse the target first: a typo should not need a running cluster to be told.
    let target = match &args.command {
        AdminCommand::Stop { target, .. } | AdminCommand::Restart { target, .. } => {
            parse_target(target)?
        }
        AdminCommand::Show { .. } | AdminCommand::Shutdown => None,
    };
    let mut client = MgmClient::connect(&args.connect, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .map_err(|e| e.to_string())?;
    match args.command {
        AdminCommand::Show { json } => {
            let nodes = client.show().map_err(|e| e.to_string())?;
            if json {
                let document = render_json(client.address(), &nodes);
                let text = serde_json::to_string_pretty(&document)
                    .map_err(|e| format!("cannot render JSON: {e}"))?;
                println!("{text}");
            } else {
                print!("{}", render_table(&nodes));
                let sql = render_sql_nodes(&nodes);
                if !sql.is_empty() {
                    print!("\n{sql}");
                }
            }
        }
        AdminCommand::Stop { force, .. } => {
            let nodes = client
                .stop(target, false, force)
                .map_err(|e| e.to_string())?;
            println!("{}", ordered("Stop", &nodes));
        }
        AdminCommand::Restart { force, .. } => {
            let nodes = client
                .stop(target, true, force)
                .map_err(|e| e.to_string())?;
            println!("{}", ordered("Restart", &nodes));
        }
        AdminCommand::Shutdown => {
            client.shutdown().map_err(|e| e.to_string())?;
            println!("Cluster shut down: data nodes stopped, management server stopped.");
        }
    }
    Ok(())
}

/// `N` → that node; `all` → every data node (`None`).
fn parse_target(text: &str) -> Result<Option<NodeId>, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    text.parse::<u8>()
        .ok()
        .and_then(NodeId::new)
        .map(Some)
        .ok_or_else(|| format!("\"{text}\" is neither a node id (1-255) nor \"all\""))
}

fn ordered(what: &str, nodes: &[NodeId]) -> String {
    match nodes {
        [] => format!("{what} ordered for no node: no data node is connected."),
        [node] => format!("{what} ordered for node {node}."),
        _ => {
            let list: Vec<String> = nodes.iter().map(NodeId::to_string).collect();
            format!("{what} ordered for nodes {}.", list.join(", "))
        }
    }
}

const TABLE_HEADER: [&str; 7] = [
    "id",
    "type",
    "host",
    "node group",
    "state",
    "pid",
    "version",
];

/// "mysqld" for a `[mysqld]` slot, else the node type.
fn type_name(node: &NodeStatusEntry) -> &'static str {
    if node.mysqld {
        "mysqld"
    } else {
        node.node_type.as_str()
    }
}

/// Where the node connected from when connected, else its configured host.
fn host_cell(node: &NodeStatusEntry) -> String {
    if node.address.is_empty() {
        node.host.clone()
    } else {
        node.address.clone()
    }
}

fn table_row(node: &NodeStatusEntry) -> [String; 7] {
    [
        node.node.to_string(),
        type_name(node).to_owned(),
        host_cell(node),
        if node.node_group == NO_NODE_GROUP {
            "-".to_owned()
        } else {
            node.node_group.to_string()
        },
        node.state.as_str().to_owned(),
        if node.pid == 0 {
            "-".to_owned()
        } else {
            node.pid.to_string()
        },
        if node.version == 0 {
            "-".to_owned()
        } else {
            signal::version_string(node.version)
        },
    ]
}

/// The nodes as an aligned text table, one line per node, header first.
pub fn render_table(nodes: &[NodeStatusEntry]) -> String {
    let rows: Vec<[String; 7]> = nodes.iter().map(table_row).collect();
    let mut widths = TABLE_HEADER.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = TABLE_HEADER.map(str::to_owned);
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The SQL nodes (`[mysqld]` slots), connected or not, one line each, as
/// ndb_mgm's `[mysqld(API)]` section; empty when none is configured.
pub fn render_sql_nodes(nodes: &[NodeStatusEntry]) -> String {
    let sql: Vec<&NodeStatusEntry> = nodes.iter().filter(|node| node.mysqld).collect();
    if sql.is_empty() {
        return String::new();
    }
    let connected = sql.iter().filter(|node| !node.address.is_empty()).count();
    let mut out = format!(
        "[mysqld(API)]  {} node(s), {connected} connected\n",
        sql.len()
    );
    for node in sql {
        if node.address.is_empty() {
            let from = if node.host.is_empty() {
                "any host"
            } else {
                node.host.as_str()
            };
            out.push_str(&format!(
                "id={}  (not connected, accepting connect from {from})\n",
                node.node
            ));
        } else {
            let version = if node.version == 0 {
                "version unknown".to_owned()
            } else {
                format!("skarv {}", signal::version_string(node.version))
            };
            out.push_str(&format!(
                "id={}  @{}  ({version}, pid {})\n",
                node.node, node.address, node.pid
            ));
        }
    }
    out
}

/// The nodes as one JSON document; unknown values (no node group, pid or
/// version) are `null`.
pub fn render_json(connect: &str, nodes: &[NodeStatusEntry]) -> Value {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|node| {
            let members: Vec<u8> = node.members.iter().map(NodeId::get).collect();
            json!({
                "id": node.node.get(),
                "type": node.node_type.as_str(),
                // A [mysqld] slot: a SQL node's.
                "mysqld": node.mysqld,
                "host": node.host,
                // Where the node connected from; null when not connected.
                "address": (!node.address.is_empty()).then_some(&node.address),
                "node_group": (node.node_group != NO_NODE_GROUP).then_some(node.node_group),
                "state": node.state.as_str(),
                // A data node is started only once it serves: a node
                // restart is starting while it copies.
                "serving": node.node_type == NodeType::Data && node.state == NodeState::Started,
                "pid": (node.pid != 0).then_some(node.pid),
                "version": (node.version != 0).then(|| signal::version_string(node.version)),
                "start_count": node.start_count,
                "view_id": node.view_id,
                "members": members,
            })
        })
        .collect();
    json!({ "connect": connect, "nodes": nodes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::{NodeBitmask, NodeState, NodeType};

    fn node(id: u8) -> NodeId {
        NodeId::new(id).expect("non-zero")
    }

    fn entries() -> Vec<NodeStatusEntry> {
        vec![
            NodeStatusEntry {
                node: node(1),
                node_type: NodeType::Management,
                host: "localhost".to_owned(),
                node_group: NO_NODE_GROUP,
                state: NodeState::Started,
                pid: 123,
                version: signal::VERSION,
                start_count: 1,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: false,
                address: String::new(),
            },
            NodeStatusEntry {
                node: node(2),
                node_type: NodeType::Data,
                host: "127.0.0.1".to_owned(),
                node_group: 0,
                state: NodeState::NotConnected,
                pid: 0,
                version: 0,
                start_count: 0,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: false,
                address: String::new(),
            },
            NodeStatusEntry {
                node: node(50),
                node_type: NodeType::Api,
                host: String::new(),
                node_group: NO_NODE_GROUP,
                state: NodeState::NotConnected,
                pid: 0,
                version: 0,
                start_count: 0,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: false,
                address: String::new(),
            },
            NodeStatusEntry {
                node: node(51),
                node_type: NodeType::Api,
                host: "127.0.0.1".to_owned(),
                node_group: NO_NODE_GROUP,
                state: NodeState::Started,
                pid: 4711,
                version: signal::VERSION,
                start_count: 1,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: true,
                address: "127.0.0.1".to_owned(),
            },
            NodeStatusEntry {
                node: node(52),
                node_type: NodeType::Api,
                host: String::new(),
                node_group: NO_NODE_GROUP,
                state: NodeState::NotConnected,
                pid: 0,
                version: 0,
                start_count: 0,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: true,
                address: String::new(),
            },
        ]
    }

    #[test]
    fn table_is_aligned_with_dashes_for_unknowns() {
        let table = render_table(&entries());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            vec![
                "id  type    host       node group  state          pid   version",
                "1   mgmd    localhost  -           started        123   0.1.0",
                "2   data    127.0.0.1  0           not connected  -     -",
                "50  api                -           not connected  -     -",
                "51  mysqld  127.0.0.1  -           started        4711  0.1.0",
                "52  mysqld             -           not connected  -     -",
            ]
        );
    }

    #[test]
    fn sql_nodes_are_listed_as_ndb_mgm_lists_mysqld_slots() {
        let text = render_sql_nodes(&entries());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                "[mysqld(API)]  2 node(s), 1 connected",
                "id=51  @127.0.0.1  (skarv 0.1.0, pid 4711)",
                "id=52  (not connected, accepting connect from any host)",
            ]
        );
        assert_eq!(render_sql_nodes(&entries()[..3]), "");
    }

    #[test]
    fn json_document_shape() {
        let document = render_json("localhost:1186", &entries());
        assert_eq!(document["connect"], "localhost:1186");
        let first = &document["nodes"][0];
        assert_eq!(first["id"], 1);
        assert_eq!(first["type"], "mgmd");
        assert_eq!(first["node_group"], Value::Null);
        assert_eq!(first["state"], "started");
        assert_eq!(first["pid"], 123);
        assert_eq!(first["version"], "0.1.0");
        assert_eq!(first["start_count"], 1);
        let second = &document["nodes"][1];
        assert_eq!(second["node_group"], 0);
        assert_eq!(second["pid"], Value::Null);
        assert_eq!(second["state"], "not connected");
        assert_eq!(second["serving"], false);
        // A management node never serves rows.
        assert_eq!(first["serving"], false);
        assert_eq!(first["mysqld"], false);
        assert_eq!(first["address"], Value::Null);
        let sql = &document["nodes"][3];
        assert_eq!(sql["type"], "api");
        assert_eq!(sql["mysqld"], true);
        assert_eq!(sql["address"], "127.0.0.1");
    }

    #[test]
    fn targets() {
        assert_eq!(parse_target("all"), Ok(None));
        assert_eq!(parse_target("3"), Ok(Some(node(3))));
        assert!(parse_target("0").is_err());
        assert!(parse_target("300").is_err());
        assert!(parse_target("x").is_err());
    }
}
