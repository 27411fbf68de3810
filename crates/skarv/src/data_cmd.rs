//! `skarv data`: a data node, under its angel unless told otherwise.

use datanode::node::{NodeExit, NodeOptions, EXIT_CRASHED, EXIT_FAILED, EXIT_RESTART};
use signal::NodeId;

#[derive(clap::Args)]
pub struct DataArgs {
    /// The management server, as host:port.
    #[arg(long, default_value = "localhost:1186")]
    connect: String,
    /// This node's id (1–255); by default the mgmd picks a free data node id.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=255))]
    node_id: Option<u8>,
    /// Start with an empty file system (the node's own files are removed).
    #[arg(long)]
    initial: bool,
    /// When the node's redo or checkpoint files turn out damaged at its
    /// start and another node of its node group serves, move them aside
    /// (into `discarded-<time>/` in the data directory) and restart empty,
    /// copying everything from that node. Refused (the node stops, its
    /// files untouched) when no other node of the group serves.
    #[arg(long)]
    discard_corrupt: bool,
    /// Run the node process itself, without an angel (the angel starts it so).
    #[arg(long, hide = true)]
    no_angel: bool,
}

pub fn run(args: DataArgs) -> Result<(), String> {
    if !args.no_angel {
        let program =
            std::env::current_exe().map_err(|e| format!("cannot find the skarv binary: {e}"))?;
        let mut child_args = vec![
            "data".to_owned(),
            "--no-angel".to_owned(),
            "--connect".to_owned(),
            args.connect,
        ];
        if let Some(id) = args.node_id {
            child_args.extend(["--node-id".to_owned(), id.to_string()]);
        }
        if args.discard_corrupt {
            // On every start: it acts only on damage found at a start.
            child_args.push("--discard-corrupt".to_owned());
        }
        let initial: Vec<String> = if args.initial {
            vec!["--initial".to_owned()]
        } else {
            Vec::new()
        };
        return datanode::angel::run(&program, &child_args, &initial);
    }
    crate::init_logging();
    let options = NodeOptions {
        connect: args.connect,
        node_id: args.node_id.and_then(NodeId::new),
        initial: args.initial,
        discard_corrupt: args.discard_corrupt,
    };
    match datanode::node::run(&options).map_err(|e| e.to_string())? {
        NodeExit::Stop => Ok(()),
        NodeExit::Restart => std::process::exit(EXIT_RESTART),
        NodeExit::Crashed => std::process::exit(EXIT_CRASHED),
        NodeExit::Failed => std::process::exit(EXIT_FAILED),
    }
}
