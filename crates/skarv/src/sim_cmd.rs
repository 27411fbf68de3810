//! `skarv sim`: replay one deterministic simulation by its seed, or soak
//! through seeds until a time limit and print the first that fails. The
//! default scenario is the whole cluster (`datanode::simulation::cluster`:
//! every block, data, a workload, every fault kind); `--scenario
//! membership` runs the membership-only one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use datanode::simulation::cluster::{whole_scenario, FaultKind, ScenarioOptions, WholeReport};
use datanode::simulation::{random_scenario, ScenarioReport};
use kernel::simulator::Adversary;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Every block, a transactional workload, every fault kind.
    Whole,
    /// Membership blocks only (crash, hang, split, lost signals).
    Membership,
}

#[derive(clap::Args)]
pub struct SimArgs {
    /// The seed to replay.
    #[arg(long, conflicts_with = "soak")]
    seed: Option<u64>,
    #[arg(long, value_enum, default_value_t = Scenario::Whole)]
    scenario: Scenario,
    /// Stop starting fault rounds after this many simulation steps.
    #[arg(long, default_value_t = 5_000_000)]
    steps: u64,
    /// Fault rounds per run.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Whole cluster: the fault kinds rounds pick from, comma-separated
    /// (node-crash, system-restart, isolate, split, latency, link-break,
    /// disk-full, pause); default all.
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Whole cluster: data nodes (with --replicas); default from the seed.
    #[arg(long, requires = "replicas")]
    nodes: Option<u8>,
    #[arg(long, requires = "nodes")]
    replicas: Option<u8>,
    /// Print every step of the run.
    #[arg(long)]
    trace: bool,
    /// Run seed after seed until --seconds pass; print any failing seed.
    #[arg(long)]
    soak: bool,
    /// Time limit of --soak.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Whole cluster: deliver a node's signals in one FIFO instead of per
    /// (sender thread, receiver thread) pair in an order the seed chooses.
    #[arg(long)]
    no_reorder: bool,
    /// Whole cluster: leave the blocks' buggify points off.
    #[arg(long)]
    no_buggify: bool,
    /// Whole cluster: a node that goes down loses no signal in flight;
    /// each arrives late, maybe after its failure was handled.
    #[arg(long)]
    late_signals: bool,
}

fn print_report(report: &ScenarioReport) {
    let verdict = match &report.result {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("FAILED: {e}"),
    };
    println!(
        "seed {}: {verdict} ({} steps, {:.1} s simulated, trace hash {:016x})",
        report.seed,
        report.steps,
        report.sim_time.as_secs_f64(),
        report.trace_hash
    );
}

fn print_whole(report: &WholeReport) {
    for fault in &report.faults {
        println!("  {fault}");
    }
    for (site, times) in &report.buggify_fired {
        println!("  buggify {site}: fired {times} times");
    }
    let s = &report.stats;
    println!(
        "  workload: {} committed, {} aborted ({} retried), {} unknown, {} audits; {} replica checks",
        s.committed, s.aborted, s.retried, s.unknown, s.audits, report.replica_checks
    );
    for o in &report.outages {
        let restart = o
            .restart_gci
            .map_or("no system restart seen".to_owned(), |r| {
                format!("restarted to GCI {r}")
            });
        println!(
            "  cluster down at {:.3} s (GCI {} complete): {restart}",
            o.at.as_nanos() as f64 / 1e9,
            o.complete_gci
        );
    }
    println!(
        "  wait_durable: {} transfers answered durable, {} lost by a system restart",
        s.durable_confirmed, s.durable_lost
    );
    if report.lost_by_restart > 0 {
        println!(
            "  {} acknowledged commits above a restart GCI checked gone",
            report.lost_by_restart
        );
    }
    let verdict = match &report.result {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("FAILED: {e}"),
    };
    println!(
        "seed {}: {} data nodes, {} replicas, {}: {verdict} ({} steps, {:.1} s simulated, trace hash {:016x})",
        report.seed,
        report.data_nodes,
        report.replicas,
        report.adversary,
        report.steps,
        report.sim_time.as_secs_f64(),
        report.trace_hash
    );
}

fn options(args: &SimArgs) -> Result<ScenarioOptions, String> {
    let mut options = ScenarioOptions {
        rounds: args.rounds,
        steps_max: args.steps,
        trace: args.trace,
        adversary: Adversary {
            reorder: !args.no_reorder,
            buggify: !args.no_buggify,
            late_signals: args.late_signals,
        },
        ..ScenarioOptions::default()
    };
    if !args.faults.is_empty() {
        options.kinds = args
            .faults
            .iter()
            .map(|name| {
                FaultKind::parse(name).ok_or_else(|| {
                    let known: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown fault kind {name:?}; known: {}", known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?;
    }
    if let (Some(nodes), Some(replicas)) = (args.nodes, args.replicas) {
        if replicas == 0 || replicas > 4 || nodes == 0 || !nodes.is_multiple_of(replicas) {
            return Err(format!(
                "{nodes} data nodes do not make node groups of {replicas}"
            ));
        }
        options.shape = Some((nodes, replicas));
    }
    Ok(options)
}

/// The command line that replays `seed` with these arguments.
fn replay_command(args: &SimArgs, seed: u64) -> String {
    let mut line = format!(
        "skarv sim --seed {seed} --rounds {} --steps {}",
        args.rounds, args.steps
    );
    if args.scenario == Scenario::Membership {
        line += " --scenario membership";
    }
    if !args.faults.is_empty() {
        line += &format!(" --faults {}", args.faults.join(","));
    }
    if let (Some(nodes), Some(replicas)) = (args.nodes, args.replicas) {
        line += &format!(" --nodes {nodes} --replicas {replicas}");
    }
    if args.no_reorder {
        line += " --no-reorder";
    }
    if args.no_buggify {
        line += " --no-buggify";
    }
    if args.late_signals {
        line += " --late-signals";
    }
    line
}

/// Runs one seed; `Err` carries the failure. Adds the buggify points that
/// fired to `fired`.
/// What a soak sums over its runs.
#[derive(Default)]
struct Tally {
    /// Buggify sites: times fired.
    fired: BTreeMap<String, u64>,
    /// Transfers `wait_durable` answered durable, and lost, that the
    /// final checks held to their rows.
    durable_confirmed: u64,
    durable_lost: u64,
}

fn run_one(
    args: &SimArgs,
    options: &ScenarioOptions,
    seed: u64,
    print: bool,
    tally: &mut Tally,
) -> Result<(), String> {
    match args.scenario {
        Scenario::Whole => {
            let (report, trace) = whole_scenario(seed, options);
            if print || report.result.is_err() {
                for line in &trace {
                    println!("{line}");
                }
                print_whole(&report);
            }
            for (site, times) in &report.buggify_fired {
                *tally.fired.entry(site.clone()).or_default() += times;
            }
            tally.durable_confirmed += report.stats.durable_confirmed;
            tally.durable_lost += report.stats.durable_lost;
            report.result
        }
        Scenario::Membership => {
            let (report, trace) = random_scenario(seed, args.rounds, args.steps, options.trace);
            if print || report.result.is_err() {
                for line in &trace {
                    println!("{line}");
                }
                for fault in &report.faults {
                    println!("  {fault}");
                }
                print_report(&report);
            }
            report.result
        }
    }
}

pub fn run(args: SimArgs) -> Result<(), String> {
    crate::die_quietly_on_broken_pipe();
    // The blocks' own log lines (node states, takeovers) only on request:
    // a soak would print thousands of runs' worth.
    if std::env::var_os("SKARV_LOG").is_some() {
        crate::init_logging();
    }
    let options = options(&args)?;
    if args.soak {
        return soak(&args, &options);
    }
    let seed = args
        .seed
        .ok_or("give --seed N to replay a run, or --soak")?;
    run_one(&args, &options, seed, true, &mut Tally::default())
        .map_err(|e| format!("seed {seed} failed: {e}"))
}

fn soak(args: &SimArgs, options: &ScenarioOptions) -> Result<(), String> {
    let limit = Duration::from_secs(args.seconds);
    let started = Instant::now();
    let first = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .wrapping_mul(1_000_003);
    let mut runs = 0u64;
    let mut tally = Tally::default();
    // A soak prints only the failing run, never a whole trace.
    let quiet = ScenarioOptions {
        trace: false,
        ..options.clone()
    };
    while started.elapsed() < limit {
        let seed = first.wrapping_add(runs);
        runs += 1;
        if run_one(args, &quiet, seed, false, &mut tally).is_err() {
            return Err(format!(
                "seed {seed} failed after {runs} runs; replay with `{}`",
                replay_command(args, seed)
            ));
        }
    }
    println!(
        "soak: {runs} seeds passed ({first} to {}) in {} s ({})",
        first.wrapping_add(runs.saturating_sub(1)),
        started.elapsed().as_secs(),
        options.adversary
    );
    if args.scenario == Scenario::Whole {
        println!(
            "  wait_durable: {} transfers answered durable, {} lost by a system restart, each \
             checked against its row",
            tally.durable_confirmed, tally.durable_lost
        );
    }
    for (site, times) in &tally.fired {
        println!("  buggify {site}: fired {times} times");
    }
    Ok(())
}
