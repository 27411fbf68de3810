//! `skarv`: one binary, one subcommand per process kind (DESIGN.md §1).

mod admin;
mod bench_cmd;
mod data_cmd;
mod events_cmd;
mod mgmd_cmd;
mod sandbox;
mod sim_cmd;
mod sql_cmd;

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: the SQL node allocates per statement
/// (plans, rows, packets), and glibc's allocator took about a tenth of its
/// CPU under sysbench (`perf`, issue 21); the data node preallocates its
/// memory and barely notices. `--no-default-features` builds with glibc's.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "skarv",
    version,
    about = "Skarv: a distributed in-memory transactional database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the management server (configuration, node ids, cluster log, arbitration).
    Mgmd(mgmd_cmd::MgmdArgs),
    /// Run a data node (under its angel, which restarts it when it dies).
    Data(data_cmd::DataArgs),
    /// Administer a running cluster (NDB's ndb_mgm).
    Admin(admin::AdminArgs),
    /// Start a whole local cluster with defaults.
    Sandbox(sandbox::SandboxArgs),
    /// Replay one deterministic simulation.
    Sim(sim_cmd::SimArgs),
    /// Run a benchmark.
    Bench(bench_cmd::BenchArgs),
    /// Run a SQL node: an API node that speaks MySQL's protocol (NDB's mysqld).
    Sql(sql_cmd::SqlArgs),
    /// Print the committed row changes of tables, epoch by epoch (the
    /// change stream; NDB's event API).
    Events(events_cmd::EventsArgs),
}

/// Logs to stderr; `SKARV_LOG` sets the filter (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SKARV_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// For commands whose output is read by pipes (`skarv sim --trace | head`):
/// end quietly when the reader goes away, as other command-line tools do.
/// Servers keep Rust's default (ignored), so a closed socket is an error
/// to handle, never a signal that kills the process.
pub fn die_quietly_on_broken_pipe() {
    // SAFETY: setting a signal disposition to the default is always sound.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mgmd(args) => mgmd_cmd::run(args),
        Command::Data(args) => data_cmd::run(args),
        Command::Admin(args) => admin::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Sql(args) => sql_cmd::run(args),
        Command::Events(args) => events_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("skarv: {message}");
            ExitCode::FAILURE
        }
    }
}
