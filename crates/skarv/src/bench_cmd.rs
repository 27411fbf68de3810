//! `skarv bench …`: the benchmarks that show the speed and memory goals.

use std::time::Duration;

use bench::flex::{FlexOptions, Phase};
use bench::ldm::{LdmBenchOptions, LdmBenchReport};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(clap::Subcommand)]
enum Which {
    /// One LDM instance's storage in-process: insert, lookup, ordered scan, memory per row.
    Ldm(LdmArgs),
    /// NDB's flexAsynch against a running cluster: insert, read, update, delete rates and latencies.
    Flex(FlexArgs),
    /// sysbench's point select over many MySQL connections that a few threads drive.
    Sql(SqlArgs),
}

/// `skarv bench sql` (see `bench::sql`: why not sysbench at thousands of connections).
#[derive(clap::Args)]
struct SqlArgs {
    /// The MySQL server (a Skarv SQL node, or a peer).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long)]
    port: u16,
    #[arg(long, default_value = "root")]
    user: String,
    #[arg(long, default_value = "")]
    password: String,
    #[arg(long, default_value = "sbtest")]
    database: String,
    /// A table sysbench's `prepare` made, with ids 1..=--table-size.
    #[arg(long, default_value = "sbtest1")]
    table: String,
    #[arg(long, default_value_t = 10_000)]
    table_size: u64,
    /// Connections, each with one query in flight.
    #[arg(short = 'c', long, default_value_t = 32)]
    connections: usize,
    /// Threads that drive them (default: 2, or fewer when fewer connections).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    seconds: Duration,
    /// Seconds run before measuring.
    #[arg(long, default_value = "3", value_parser = parse_seconds)]
    warmup: Duration,
    /// Seed of the keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Driving threads when --threads is not given: two keep the client's
/// share of a small machine small while one `epoll` set per thread stays
/// short enough to serve.
const SQL_THREADS_DEFAULT: usize = 2;

fn run_sql(args: SqlArgs) -> Result<(), String> {
    let options = bench::sql::SqlOptions {
        host: args.host,
        port: args.port,
        user: args.user,
        password: args.password,
        database: args.database,
        table: args.table,
        table_size: args.table_size,
        connections: args.connections,
        threads: args
            .threads
            .unwrap_or(SQL_THREADS_DEFAULT.min(args.connections.max(1))),
        warmup: args.warmup,
        duration: args.seconds,
        seed: args.seed,
    };
    let report = bench::sql::run(&options).map_err(|e| format!("bench sql: {e}"))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", bench::sql::render(&report));
    }
    Ok(())
}

#[derive(clap::Args)]
struct LdmArgs {
    /// Rows of 100 bytes (25 INT UNSIGNED columns, the first the key).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// DataMemory of the instance, in bytes or with K/M/G (default: twice what the rows need).
    #[arg(long, value_parser = parse_size)]
    data_memory: Option<u64>,
    /// Seed of the random lookup keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keys per batched lookup (`lookup_per_s`; `lookup_single_per_s` reads one at a time).
    #[arg(long, default_value_t = bench::ldm::LOOKUP_BATCH_KEYS_DEFAULT)]
    batch: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// `skarv bench flex` (see `bench::flex` for the key layout and the `--verify` rule).
#[derive(clap::Args)]
struct FlexArgs {
    /// The management server, `host:port`.
    #[arg(long)]
    connect: String,
    /// Threads (definer threads with --executors).
    #[arg(short = 't', long, default_value_t = 1)]
    threads: usize,
    /// Transactions in flight per thread.
    #[arg(short = 'p', long, default_value_t = 32)]
    parallel: usize,
    /// Transactions per thread in a pass: a phase touches threads × o × b rows.
    #[arg(short = 'o', long, default_value_t = 500)]
    transactions: u64,
    /// Read and update phases run this many seconds, cycling over the rows (insert and delete: one pass).
    #[arg(long, value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Attributes, the first the primary key.
    #[arg(short = 'a', long, default_value_t = 25)]
    attributes: usize,
    /// Size of each other attribute in 32-bit words (1: INT UNSIGNED, more: BINARY(4·s)).
    #[arg(short = 's', long, default_value_t = 1)]
    size: usize,
    /// Operations per transaction.
    #[arg(short = 'b', long, default_value_t = 1)]
    batch: usize,
    /// The phases, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "insert,read,update,delete"
    )]
    ops: Vec<Phase>,
    /// Check every value read against the value its key must hold; any mismatch fails the run.
    #[arg(long)]
    verify: bool,
    /// One JSON object per phase (a line each) instead of text.
    #[arg(long)]
    json: bool,
    /// Drop the table at the end (it is kept by default, for later runs).
    #[arg(long)]
    drop: bool,
    /// Executor threads per data node (seed 004); 0: each thread sends its own transactions.
    #[arg(long, default_value_t = 0)]
    executors: usize,
    /// The table to use (created when missing).
    #[arg(long, default_value = "flex")]
    table: String,
    /// Subscribe to the table's change stream during each phase: report the
    /// subscriber's changes/s and the lag from a commit to its delivery.
    #[arg(long)]
    subscribe: bool,
    /// Run flex's threads under the OS's batch policy (Linux SCHED_BATCH),
    /// as a data node with BatchScheduling=1 runs: with both on one host's
    /// CPUs, reads gained 40-50 % (docs/architecture.md). A benchmark
    /// against another server should give that server the same policy.
    #[arg(long)]
    batch_scheduling: bool,
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\" is not a number of seconds"))?;
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 1e9 {
        return Err(format!("{text}: a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn run_flex(args: FlexArgs) -> Result<(), String> {
    if args.batch_scheduling {
        // Before flex starts its threads: they inherit the policy.
        kernel::runtime::use_batch_scheduling("flex");
    }
    let options = FlexOptions {
        connect: args.connect,
        threads: args.threads,
        parallel: args.parallel,
        transactions: args.transactions,
        duration: args.duration,
        attributes: args.attributes,
        attribute_words: args.size,
        ops_per_transaction: args.batch,
        phases: args.ops,
        verify: args.verify,
        drop: args.drop,
        executors: args.executors,
        table: args.table,
        subscribe: args.subscribe,
    };
    let json = args.json;
    let mut header = false;
    let report = bench::flex::run(&options, &mut |phase| {
        if json {
            match serde_json::to_string(phase) {
                Ok(line) => println!("{line}"),
                Err(e) => eprintln!("skarv: the {} report: {e}", phase.phase.name()),
            }
        } else {
            if !header {
                header = true;
                print!("{}", bench::flex::render_params(&phase.params));
            }
            print!("{}", bench::flex::render_phase(phase));
        }
    })
    .map_err(|e| e.to_string())?;
    for problem in &report.problems {
        eprintln!("flex: {problem}");
    }
    if report.problems_more > 0 {
        eprintln!("flex: … and {} more", report.problems_more);
    }
    match report.failure() {
        Some(failure) => Err(format!("bench flex: {failure}")),
        None => Ok(()),
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last() {
        Some('K' | 'k') => (&text[..text.len() - 1], 10),
        Some('M' | 'm') => (&text[..text.len() - 1], 20),
        Some('G' | 'g') => (&text[..text.len() - 1], 30),
        Some('T' | 't') => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" is not a size (bytes, or a number with K, M, G or T)"))?;
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

pub fn run(args: BenchArgs) -> Result<(), String> {
    match args.which {
        // Not for flex: its client writes to sockets, where a closed peer
        // must be an error, never a signal that kills the run.
        Which::Flex(args) => run_flex(args),
        Which::Sql(args) => run_sql(args),
        Which::Ldm(args) => {
            crate::die_quietly_on_broken_pipe();
            let report: LdmBenchReport = bench::ldm::run(&LdmBenchOptions {
                rows: args.rows,
                data_memory_bytes: args.data_memory,
                seed: args.seed,
                batch: args.batch,
            })
            .map_err(|e| e.to_string())?;
            if args.json {
                let json = serde_json::to_string(&report).map_err(|e| e.to_string())?;
                println!("{json}");
            } else {
                print!("{}", bench::ldm::render(&report));
            }
            Ok(())
        }
    }
}
