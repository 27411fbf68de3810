//! `skarv mgmd`: runs the management server until it is shut down (by
//! `skarv admin shutdown`) or told to stop by SIGINT or SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread;

use mgmd::{MgmServer, ServerOptions};
use signal::NodeId;

#[derive(clap::Args)]
pub struct MgmdArgs {
    /// The cluster configuration (NDB's config.ini syntax).
    #[arg(long, value_name = "FILE")]
    config_file: PathBuf,
    /// Listen on this port instead of the configured PortNumber (0: any free port).
    #[arg(long)]
    port: Option<u16>,
    /// Keep the cluster log here instead of the configured DataDir.
    #[arg(long, value_name = "DIR")]
    datadir: Option<PathBuf>,
    /// Which [ndb_mgmd] of the configuration this is (default: the first).
    #[arg(long, value_name = "N", value_parser = parse_node_id)]
    node_id: Option<NodeId>,
    /// Serve Prometheus metrics at http://<host>:PORT/metrics (0: any free
    /// port); not served without it.
    #[arg(long, value_name = "PORT")]
    metrics_port: Option<u16>,
}

fn parse_node_id(text: &str) -> Result<NodeId, String> {
    text.parse::<u8>()
        .ok()
        .and_then(NodeId::new)
        .ok_or_else(|| format!("\"{text}\" is not a node id (1-255)"))
}

pub fn run(args: MgmdArgs) -> Result<(), String> {
    crate::init_logging();
    // Before any thread starts, so that every thread inherits the mask and
    // only the waiting thread below ever sees these signals.
    let stop_signals = block_stop_signals()?;
    let server = MgmServer::start(ServerOptions {
        config_path: args.config_file,
        port: args.port,
        data_dir: args.datadir,
        node_id: args.node_id,
        metrics_port: args.metrics_port,
    })
    .map_err(|e| e.to_string())?;
    let server = Arc::new(server);
    println!(
        "skarv mgmd: node {} listening on {}, cluster log {}",
        server.node_id(),
        server.local_addr(),
        server.cluster_log_path().display()
    );
    if let Some(addr) = server.metrics_addr() {
        println!("skarv mgmd: metrics: http://{addr}/metrics");
    }
    let waiter = Arc::clone(&server);
    thread::Builder::new()
        .name("mgmd-signals".to_owned())
        .spawn(move || {
            if let Some(number) = wait_for(&stop_signals) {
                tracing::info!("signal {number} received: shutting down");
                waiter.shutdown();
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    server.wait();
    Ok(())
}

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread it
/// starts afterwards); returns the set, for `wait_for`.
fn block_stop_signals() -> Result<libc::sigset_t, String> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t owned by this frame; the pointers
    // passed are to it, and the old mask is not asked for (null).
    let rc = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(format!(
            "cannot block SIGINT and SIGTERM: {}",
            std::io::Error::from_raw_os_error(rc)
        ));
    }
    Ok(set)
}

/// Waits for one of the signals in `set`; `None` if waiting failed.
fn wait_for(set: &libc::sigset_t) -> Option<i32> {
    let mut number: libc::c_int = 0;
    // SAFETY: `set` was initialised by sigemptyset/sigaddset and `number`
    // is a valid place for the result.
    let rc = unsafe { libc::sigwait(set, &mut number) };
    if rc != 0 {
        tracing::error!(
            "cannot wait for SIGINT/SIGTERM: {}",
            std::io::Error::from_raw_os_error(rc)
        );
        return None;
    }
    Some(number)
}
