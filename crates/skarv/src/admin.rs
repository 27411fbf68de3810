//! `skarv admin`: the operator's view of a running cluster (NDB's `ndb_mgm`),
//! through the management server: `show`, `stop`, `restart`, `shutdown`,
//! the backup verbs, `report`, `status` and `clusterlog` (docs/operations.md).
//!
//! The renderers are public because the sandbox prints the same table.

use std::time::Duration;

use clap::{Args, Subcommand};
use mgmd::client::{ClusterLogFilter, ClusterLogRequest};
use mgmd::MgmClient;
use serde_json::{json, Value};
use signal::{
    ClusterLogAction, EventCategory, NodeId, NodeState, NodeStatusEntry, NodeType, Severity,
    EVENT_LEVEL_MAX, EVENT_THRESHOLD_DEFAULT, NO_NODE_GROUP,
};

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
    /// Take an online backup, consistent at one epoch, into
    /// `DIR/BACKUP-<id>/` (NDB's `START BACKUP`; docs/operations.md).
    Backup {
        /// Wait for the backup to complete (otherwise it runs in the
        /// background and `backup-status` follows it).
        #[arg(long)]
        wait: bool,
        /// The directory that holds the backups.
        #[arg(long, default_value = "backups", value_name = "DIR")]
        dir: std::path::PathBuf,
        /// Rows per second the backup's scans read at most (0: no limit).
        #[arg(long, value_name = "ROWS", default_value_t = crate::backup::take::BACKUP_ROWS_PER_SEC_DEFAULT)]
        rate_rows: u64,
        /// The id of a backup directory already made (the background
        /// backup's parent makes it).
        #[arg(long, hide = true)]
        id: Option<u64>,
    },
    /// The state of every backup in a directory: running (with its
    /// progress), complete (stop epoch, rows, bytes), failed or aborted.
    BackupStatus {
        /// The directory that holds the backups.
        #[arg(long, default_value = "backups", value_name = "DIR")]
        dir: std::path::PathBuf,
        /// Print one JSON document instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// A report from the data nodes (NDB's `ALL REPORT ...`):
    /// `memoryusage` (DataMemory per data node, from ndbinfo through the
    /// mgmd), `backupstatus` (as `backup-status`) or `eventlog` (the
    /// cluster log's latest events, from the mgmd).
    Report {
        /// `memoryusage`, `backupstatus` or `eventlog`.
        #[arg(value_name = "WHAT")]
        what: String,
        /// `eventlog`: only events of this severity or worse (`INFO`,
        /// `WARNING`, `ALERT`).
        #[arg(long, value_name = "LEVEL")]
        level: Option<String>,
        /// The directory that holds the backups (`backupstatus`).
        #[arg(long, default_value = "backups", value_name = "DIR")]
        dir: std::path::PathBuf,
        /// Print one JSON document instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The state of a node, or of every data node: `status all`,
    /// `status 2`; `skarv admin all status` and `skarv admin 2 status` say
    /// the same, as NDB's ndb_mgm does.
    Status {
        /// A node id, or `all` (every data node).
        #[arg(value_name = "N|all")]
        target: String,
        /// Print one JSON document instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// What the cluster log writes (NDB's `CLUSTERLOG`): `clusterlog info`
    /// shows it; `clusterlog on|off [SEVERITY ...]` switches severities
    /// (`INFO`, `WARNING`, `ALERT`), or with none the whole log;
    /// `clusterlog toggle [SEVERITY ...]` (or `filter`) flips them.
    /// Thresholds per node and category: `skarv admin <N|all> clusterlog
    /// CATEGORY=THRESHOLD ...` (0 to 15; STARTUP, SHUTDOWN, STATISTICS,
    /// CHECKPOINT, NODERESTART, CONNECTION, INFO, ERROR, CONGESTION, DEBUG,
    /// BACKUP, SCHEMA).
    Clusterlog {
        /// `info`, `on`, `off`, `toggle` or `filter`, then severities.
        #[arg(value_name = "ACTION [SEVERITY ...]", required = true)]
        words: Vec<String>,
        /// Print one JSON document instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// A node's thresholds: `<N|all> clusterlog CATEGORY=THRESHOLD ...`.
    #[command(skip)]
    Thresholds {
        target: String,
        settings: Vec<String>,
        json: bool,
    },
    /// NDB's word order: `<N|all> status [--json]`,
    /// `<N|all> clusterlog CATEGORY=THRESHOLD ...`.
    #[command(external_subcommand)]
    NodeFirst(Vec<String>),
    /// Ask a running backup to stop; it leaves no manifest.
    AbortBackup {
        /// The directory that holds the backups.
        #[arg(long, default_value = "backups", value_name = "DIR")]
        dir: std::path::PathBuf,
        /// The backup's id (default: the newest running one).
        #[arg(long)]
        id: Option<u64>,
    },
}

pub fn run(args: AdminArgs) -> Result<(), String> {
    crate::die_quietly_on_broken_pipe();
    let args = AdminArgs {
        command: node_first(args.command)?,
        ..args
    };
    // Parse the target first: a typo should not need a running cluster to be told.
    let target = match &args.command {
        AdminCommand::Stop { target, .. } | AdminCommand::Restart { target, .. } => {
            parse_target(target)?
        }
        AdminCommand::Show { .. } | AdminCommand::Shutdown => None,
        AdminCommand::Backup {
            wait,
            dir,
            rate_rows,
            id,
        } => return backup(&args.connect, *wait, dir, *rate_rows, *id),
        AdminCommand::BackupStatus { dir, json } => return backup_status(dir, *json),
        AdminCommand::AbortBackup { dir, id } => return abort_backup(dir, *id),
        AdminCommand::Report {
            what,
            level,
            dir,
            json,
        } => {
            let what = what.to_ascii_lowercase();
            if level.is_some() && what != "eventlog" {
                return Err(format!("--level is for `report eventlog`, not `{what}`"));
            }
            return match what.as_str() {
                "backupstatus" => backup_status(dir, *json),
                "memoryusage" => report_memory(&args.connect, *json),
                "eventlog" => report_eventlog(&args.connect, level.as_deref(), *json),
                other => Err(format!(
                    "no report `{other}`: there are memoryusage, backupstatus and eventlog"
                )),
            };
        }
        AdminCommand::Status { target, json } => return status(&args.connect, target, *json),
        AdminCommand::Clusterlog { words, json } => {
            let request = parse_clusterlog(words)?;
            return cluster_log(&args.connect, vec![request], *json);
        }
        AdminCommand::Thresholds {
            target,
            settings,
            json,
        } => {
            let requests = parse_thresholds(target, settings)?;
            return cluster_log(&args.connect, requests, *json);
        }
        AdminCommand::NodeFirst(_) => unreachable!("node_first rewrote it"),
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
        AdminCommand::Backup { .. }
        | AdminCommand::BackupStatus { .. }
        | AdminCommand::AbortBackup { .. }
        | AdminCommand::Report { .. }
        | AdminCommand::Status { .. }
        | AdminCommand::Clusterlog { .. }
        | AdminCommand::Thresholds { .. }
        | AdminCommand::NodeFirst(_) => unreachable!("handled above"),
    }
    Ok(())
}

/// `clusterlog ACTION [SEVERITY ...]`.
fn parse_clusterlog(words: &[String]) -> Result<ClusterLogRequest, String> {
    let (action, names) = words.split_first().expect("clap requires a word");
    let action = match action.to_ascii_lowercase().as_str() {
        "info" => ClusterLogAction::Info,
        "on" => ClusterLogAction::On,
        "off" => ClusterLogAction::Off,
        "toggle" | "filter" => ClusterLogAction::Toggle,
        other => {
            return Err(format!(
                "no clusterlog action `{other}`: there are info, on, off, toggle and filter \
                 (thresholds: `skarv admin <N|all> clusterlog CATEGORY=THRESHOLD`)"
            ))
        }
    };
    if action == ClusterLogAction::Info && !names.is_empty() {
        return Err(format!(
            "`clusterlog info` takes no severity (got {})",
            names.join(" ")
        ));
    }
    if action == ClusterLogAction::Toggle
        && names.is_empty()
        && words[0].eq_ignore_ascii_case("filter")
    {
        return Err("`clusterlog filter` needs a severity: INFO, WARNING or ALERT".to_owned());
    }
    let severities = names
        .iter()
        .map(|name| {
            Severity::parse(name).ok_or_else(|| {
                format!("no severity `{name}`: the cluster log's are INFO, WARNING and ALERT")
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterLogRequest::severities(action, severities))
}

/// `<N|all> clusterlog CATEGORY=THRESHOLD ...`: one request per setting.
fn parse_thresholds(target: &str, settings: &[String]) -> Result<Vec<ClusterLogRequest>, String> {
    let nodes = if target.eq_ignore_ascii_case("all") {
        Vec::new()
    } else {
        let id: u8 = target
            .parse()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| format!("`{target}` is not a node id (1-255) or all"))?;
        vec![NodeId::new(id).expect("nonzero")]
    };
    settings
        .iter()
        .map(|setting| {
            let (name, value) = setting.split_once('=').ok_or_else(|| {
                format!("`{setting}` is not CATEGORY=THRESHOLD (such as STARTUP=7)")
            })?;
            let category = EventCategory::parse(name).ok_or_else(|| {
                let names: Vec<&str> = EventCategory::ALL.iter().map(|c| c.as_str()).collect();
                format!("no event category `{name}`: there are {}", names.join(", "))
            })?;
            let threshold = value
                .parse::<u8>()
                .ok()
                .filter(|t| *t <= EVENT_LEVEL_MAX)
                .ok_or_else(|| {
                    format!("threshold `{value}` for {name}: thresholds are 0 to {EVENT_LEVEL_MAX}")
                })?;
            Ok(ClusterLogRequest {
                action: ClusterLogAction::Threshold,
                severities: Vec::new(),
                nodes: nodes.clone(),
                category,
                threshold,
            })
        })
        .collect()
}

/// Sends `requests` in order and prints the filter the last one leaves.
fn cluster_log(connect: &str, requests: Vec<ClusterLogRequest>, json: bool) -> Result<(), String> {
    let mut client = MgmClient::connect(connect, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .map_err(|e| e.to_string())?;
    let mut filter = None;
    for request in requests {
        filter = Some(client.cluster_log(request).map_err(|e| e.to_string())?);
    }
    let filter = filter.expect("at least one request");
    if json {
        let text = serde_json::to_string_pretty(&render_cluster_log_json(&filter))
            .map_err(|e| format!("cannot render JSON: {e}"))?;
        println!("{text}");
    } else {
        print!("{}", render_cluster_log(&filter));
    }
    Ok(())
}

/// NDB's `CLUSTERLOG INFO` lines, and the thresholds changed from the
/// default.
pub fn render_cluster_log(filter: &ClusterLogFilter) -> String {
    let mut out = format!(
        "Cluster logging is {}.\n",
        if filter.enabled {
            "enabled"
        } else {
            "disabled"
        }
    );
    let severities: Vec<&str> = filter.severities.iter().map(|s| s.as_str()).collect();
    out.push_str(&format!(
        "Severities enabled: {}\n",
        if severities.is_empty() {
            "none".to_owned()
        } else {
            severities.join(" ")
        }
    ));
    let changed: Vec<String> = filter
        .thresholds
        .iter()
        .filter(|t| t.threshold != t.category.default_threshold())
        .map(|t| format!("Node {}: {}={}", t.node, t.category.as_str(), t.threshold))
        .collect();
    // The defaults that differ from the common one, named once.
    let mut others: Vec<(u8, Vec<&str>)> = Vec::new();
    for c in EventCategory::ALL {
        let t = c.default_threshold();
        if t == EVENT_THRESHOLD_DEFAULT {
            continue;
        }
        match others.iter_mut().find(|(v, _)| *v == t) {
            Some((_, names)) => names.push(c.as_str()),
            None => others.push((t, vec![c.as_str()])),
        }
    }
    let others: Vec<String> = others
        .iter()
        .map(|(t, names)| format!("{} {t}", names.join(" and ")))
        .collect();
    let defaults = format!("{EVENT_THRESHOLD_DEFAULT}; {}", others.join(", "));
    if changed.is_empty() {
        out.push_str(&format!("Thresholds: the defaults ({defaults})\n"));
    } else {
        out.push_str(&format!("Thresholds: the defaults ({defaults}) but for\n"));
        for line in changed {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

fn render_cluster_log_json(filter: &ClusterLogFilter) -> Value {
    let thresholds: Vec<Value> = filter
        .thresholds
        .iter()
        .map(|t| json!({"node": t.node.get(), "category": t.category.as_str(), "threshold": t.threshold}))
        .collect();
    json!({
        "enabled": filter.enabled,
        "severities": filter.severities.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "thresholds": thresholds,
    })
}

/// NDB's word order, `<N|all> status [--json]`, as `status <N|all>`; any
/// other command as it is.
fn node_first(command: AdminCommand) -> Result<AdminCommand, String> {
    let AdminCommand::NodeFirst(words) = command else {
        return Ok(command);
    };
    let mut words = words.into_iter();
    let target = words.next().unwrap_or_default();
    let verb = words.next().unwrap_or_default();
    let rest: Vec<String> = words.collect();
    let json = rest.iter().any(|w| w == "--json");
    let unknown: Vec<&String> = rest.iter().filter(|w| *w != "--json").collect();
    if verb.eq_ignore_ascii_case("status") && unknown.is_empty() {
        return Ok(AdminCommand::Status { target, json });
    }
    if verb.eq_ignore_ascii_case("clusterlog") && !unknown.is_empty() {
        return Ok(AdminCommand::Thresholds {
            target,
            settings: unknown.into_iter().cloned().collect(),
            json,
        });
    }
    Err(format!(
        "unknown admin command `{}`: say `{target} status` or `{target} clusterlog \
         CATEGORY=THRESHOLD` (a node id or all), or see `skarv admin --help`",
        std::iter::once(target.clone())
            .chain(std::iter::once(verb))
            .chain(rest)
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
    ))
}

/// Node `target` of `nodes` (`None`: every data node), or an error that
/// names the id and the nodes there are.
fn select_nodes<'a>(
    nodes: &'a [NodeStatusEntry],
    target: &str,
) -> Result<Vec<&'a NodeStatusEntry>, String> {
    let Some(node) = parse_target(target)? else {
        return Ok(nodes
            .iter()
            .filter(|n| n.node_type == NodeType::Data)
            .collect());
    };
    match nodes.iter().find(|n| n.node == node) {
        Some(entry) => Ok(vec![entry]),
        None => {
            let ids: Vec<String> = nodes.iter().map(|n| n.node.to_string()).collect();
            Err(format!(
                "node {node} does not exist: the cluster's nodes are {}",
                ids.join(", ")
            ))
        }
    }
}

/// One line of `status`, as ndb_mgm's: `Node 2: started (skarv 0.1.0)`.
fn status_line(node: &NodeStatusEntry) -> String {
    let mut line = format!("Node {}: {}", node.node, node.state.as_str());
    if node.state != NodeState::NotConnected && node.version != 0 {
        line.push_str(&format!(
            " (skarv {}, pid {})",
            signal::version_string(node.version),
            node.pid
        ));
    }
    if node.node_type == NodeType::Data && node.node_group != NO_NODE_GROUP {
        line.push_str(&format!(", node group {}", node.node_group));
    }
    line
}

/// `admin status <N|all>` (and `<N|all> status`).
fn status(connect: &str, target: &str, json: bool) -> Result<(), String> {
    // A typo is told before a running cluster is needed.
    parse_target(target)?;
    let mut client = MgmClient::connect(connect, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .map_err(|e| e.to_string())?;
    let nodes = client.show().map_err(|e| e.to_string())?;
    let chosen = select_nodes(&nodes, target)?;
    if json {
        let owned: Vec<NodeStatusEntry> = chosen.iter().map(|n| (*n).clone()).collect();
        let document = render_json(client.address(), &owned);
        let text = serde_json::to_string_pretty(&document)
            .map_err(|e| format!("cannot render JSON: {e}"))?;
        println!("{text}");
    } else {
        for node in chosen {
            println!("{}", status_line(node));
        }
    }
    Ok(())
}

/// One data node's DataMemory, from `ndbinfo.memoryusage`.
#[derive(Debug, PartialEq, Eq)]
struct MemoryUsage {
    node: u64,
    used_pages: u64,
    total_pages: u64,
    used_bytes: u64,
    total_bytes: u64,
}

impl MemoryUsage {
    /// The row of `memoryusage` (`signal::dbinfo::MEMORYUSAGE`'s layout).
    fn from_row(row: &signal::DbinfoRow) -> Option<MemoryUsage> {
        match row.ints[..] {
            [node, used_bytes, used_pages, total_bytes, total_pages] => Some(MemoryUsage {
                node,
                used_pages,
                total_pages,
                used_bytes,
                total_bytes,
            }),
            _ => None,
        }
    }

    /// Whole per cent in use, rounded down (NDB's report does so too).
    fn percent(&self) -> u64 {
        (self.used_pages * 100)
            .checked_div(self.total_pages)
            .unwrap_or(0)
    }
}

/// Cluster-log severities from the mildest (`report eventlog --level`).
const SEVERITIES: [&str; 3] = ["INFO", "WARNING", "ALERT"];

/// `admin report eventlog`: the mgmd's latest cluster-log events (at most
/// `mgmd::cluster_log::RECENT_EVENTS_MAX`, since it started), oldest
/// first, as the file's lines; with `level`, only those of that severity
/// or worse.
fn report_eventlog(connect: &str, level: Option<&str>, json: bool) -> Result<(), String> {
    let rank = |severity: &str| {
        SEVERITIES
            .iter()
            .position(|s| s.eq_ignore_ascii_case(severity))
    };
    let least = match level {
        None => 0,
        Some(level) => rank(level)
            .ok_or_else(|| format!("no level `{level}`: there are {}", SEVERITIES.join(", ")))?,
    };
    let mut client = MgmClient::connect(connect, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .map_err(|e| e.to_string())?;
    let rows = client
        .dbinfo(mgmd::cluster_log::EVENTLOG)
        .map_err(|e| e.to_string())?;
    let events: Vec<(u64, &str, &str)> = rows
        .iter()
        .filter_map(|r| match (r.ints.as_slice(), r.texts.as_slice()) {
            ([time], [severity, text]) => Some((*time, severity.as_str(), text.as_str())),
            _ => None,
        })
        .filter(|(_, severity, _)| rank(severity).is_some_and(|r| r >= least))
        .collect();
    if json {
        let entries: Vec<Value> = events
            .iter()
            .map(|(time, severity, text)| {
                json!({
                    "unix_seconds": time,
                    "time": mgmd::cluster_log::format_utc(*time),
                    "severity": severity,
                    "text": text,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "eventlog": entries }))
            .map_err(|e| format!("cannot render JSON: {e}"))?;
        println!("{text}");
    } else {
        for (time, severity, text) in events {
            print!("{}", mgmd::cluster_log::format_event(time, severity, text));
        }
    }
    Ok(())
}

/// `admin report memoryusage`: NDB's "Data usage is N%" line per data node;
/// a data node that did not answer (down) is named as such.
fn report_memory(connect: &str, json: bool) -> Result<(), String> {
    let mut client = MgmClient::connect(connect, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .map_err(|e| e.to_string())?;
    let nodes = client.show().map_err(|e| e.to_string())?;
    let rows = client
        .dbinfo(signal::dbinfo::MEMORYUSAGE.name)
        .map_err(|e| e.to_string())?;
    let usage: Vec<MemoryUsage> = rows.iter().filter_map(MemoryUsage::from_row).collect();
    let data_nodes: Vec<&NodeStatusEntry> = nodes
        .iter()
        .filter(|n| n.node_type == NodeType::Data)
        .collect();
    if json {
        let entries: Vec<Value> = data_nodes
            .iter()
            .map(
                |n| match usage.iter().find(|u| u.node == u64::from(n.node.get())) {
                    Some(u) => json!({
                        "node": n.node.get(),
                        "answered": true,
                        "used_pages": u.used_pages,
                        "total_pages": u.total_pages,
                        "used_bytes": u.used_bytes,
                        "total_bytes": u.total_bytes,
                        "percent": u.percent(),
                    }),
                    None => json!({
                        "node": n.node.get(),
                        "answered": false,
                        "state": n.state.as_str(),
                    }),
                },
            )
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "memoryusage": entries }))
            .map_err(|e| format!("cannot render JSON: {e}"))?;
        println!("{text}");
    } else {
        for n in &data_nodes {
            match usage.iter().find(|u| u.node == u64::from(n.node.get())) {
                Some(u) => println!(
                    "Node {}: Data usage is {}%({} 32K pages of total {})",
                    u.node,
                    u.percent(),
                    u.used_pages,
                    u.total_pages
                ),
                None => println!(
                    "Node {}: no report: the data node is {}",
                    n.node,
                    n.state.as_str()
                ),
            }
        }
    }
    if usage.is_empty() {
        return Err("no data node answered: is any started?".to_owned());
    }
    Ok(())
}

/// `admin backup`: runs the backup here (`--wait`), or in a child process
/// of its own that outlives this one.
fn backup(
    connect: &str,
    wait: bool,
    dir: &std::path::Path,
    rate_rows: u64,
    id: Option<u64>,
) -> Result<(), String> {
    use crate::backup::{backup_dir, take};
    let (id, path) = match id {
        Some(id) => (id, backup_dir(dir, id)),
        None => take::create_backup_dir(dir)?,
    };
    if !wait {
        let log_path = path.join("backup.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("create {}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| format!("find this skarv binary: {e}"))?;
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new(exe)
            .args(["admin", "--connect", connect, "backup", "--wait", "--dir"])
            .arg(dir)
            .args([
                "--rate-rows",
                &rate_rows.to_string(),
                "--id",
                &id.to_string(),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            // Its own process group: a ^C to this shell does not stop it.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("start the backup process: {e}"))?;
        println!(
            "Backup {id} started in {} (pid {}); follow it with `skarv admin backup-status --dir {}`.",
            path.display(),
            child.id(),
            dir.display()
        );
        return Ok(());
    }
    let manifest = take::take(&take::TakeOptions {
        connect,
        dir: path.clone(),
        id,
        rows_per_sec: rate_rows,
    })
    .map_err(|e| {
        format!(
            "backup {id} failed: {e} (no manifest written: {} is not a backup)",
            path.display()
        )
    })?;
    println!(
        "Backup {id} completed in {}: stop epoch {}, {} tables, {} rows, {} log records, {} bytes.",
        path.display(),
        manifest["stop_epoch_text"].as_str().unwrap_or_default(),
        manifest["tables"].as_array().map_or(0, Vec::len),
        manifest["rows"],
        manifest["log"]["records"],
        manifest["bytes"]
    );
    Ok(())
}

/// `admin backup-status`.
fn backup_status(dir: &std::path::Path, json: bool) -> Result<(), String> {
    use crate::backup::{backup_dir, backup_ids, describe};
    let states: Vec<Value> = backup_ids(dir)?
        .into_iter()
        .map(|id| describe(&backup_dir(dir, id), id))
        .collect();
    if json {
        let text = serde_json::to_string_pretty(&json!({ "backups": states }))
            .map_err(|e| format!("cannot render JSON: {e}"))?;
        println!("{text}");
        return Ok(());
    }
    if states.is_empty() {
        println!("No backup in {}.", dir.display());
    }
    for s in &states {
        let mut line = format!("Backup {}: {}", s["id"], s["state"].as_str().unwrap_or("?"));
        for key in [
            "phase",
            "table",
            "stop_epoch",
            "rows",
            "log_records",
            "bytes",
            "error",
        ] {
            let stale_phase = key == "phase" && s["state"] != "running";
            if !s[key].is_null() && !stale_phase {
                line.push_str(&format!(", {key} {}", s[key]));
            }
        }
        println!("{line}");
    }
    Ok(())
}

/// `admin abort-backup`: leaves the abort file the running backup looks for.
fn abort_backup(dir: &std::path::Path, id: Option<u64>) -> Result<(), String> {
    use crate::backup::{backup_dir, backup_ids, describe, ABORT_FILE};
    let running = |id: u64| describe(&backup_dir(dir, id), id)["state"] == "running";
    let id = match id {
        Some(id) => id,
        None => backup_ids(dir)?
            .into_iter()
            .rev()
            .find(|id| running(*id))
            .ok_or_else(|| format!("no backup is running in {}", dir.display()))?,
    };
    if !running(id) {
        return Err(format!(
            "backup {id} in {} is not running ({})",
            dir.display(),
            describe(&backup_dir(dir, id), id)["state"]
        ));
    }
    let path = backup_dir(dir, id).join(ABORT_FILE);
    std::fs::write(&path, b"").map_err(|e| format!("write {}: {e}", path.display()))?;
    println!("Abort of backup {id} ordered; `backup-status` shows when it stopped.");
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
