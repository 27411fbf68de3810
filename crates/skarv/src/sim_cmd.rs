//! `skarv sim`: replay one deterministic simulation by its seed, or soak
//! through seeds until a time limit and print the first that fails.

use std::time::{Duration, Instant};

use datanode::simulation::{random_scenario, ScenarioReport};

#[derive(clap::Args)]
pub struct SimArgs {
    /// The seed to replay.
    #[arg(long, conflicts_with = "soak")]
    seed: Option<u64>,
    /// Stop after this many simulation steps.
    #[arg(long, default_value_t = 5_000_000)]
    steps: u64,
    /// Fault rounds per run.
    #[arg(long, default_value_t = 6)]
    rounds: u32,
    /// Print every step of the run.
    #[arg(long)]
    trace: bool,
    /// Run seed after seed until --seconds pass; print any failing seed.
    #[arg(long)]
    soak: bool,
    /// Time limit of --soak.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
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

pub fn run(args: SimArgs) -> Result<(), String> {
    crate::die_quietly_on_broken_pipe();
    if args.soak {
        return soak(&args);
    }
    let seed = args
        .seed
        .ok_or("give --seed N to replay a run, or --soak")?;
    let (report, trace) = random_scenario(seed, args.rounds, args.steps, args.trace);
    for line in &trace {
        println!("{line}");
    }
    for fault in &report.faults {
        println!("  {fault}");
    }
    print_report(&report);
    report
        .result
        .map_err(|e| format!("seed {seed} failed: {e}"))
}

fn soak(args: &SimArgs) -> Result<(), String> {
    let limit = Duration::from_secs(args.seconds);
    let started = Instant::now();
    let first = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .wrapping_mul(1_000_003);
    let mut runs = 0u64;
    while started.elapsed() < limit {
        let seed = first.wrapping_add(runs);
        let (report, _) = random_scenario(seed, args.rounds, args.steps, false);
        runs += 1;
        if report.result.is_err() {
            for fault in &report.faults {
                println!("  {fault}");
            }
            print_report(&report);
            return Err(format!(
                "seed {seed} failed; replay with `skarv sim --seed {seed}`"
            ));
        }
    }
    println!(
        "soak: {runs} seeds passed in {} s",
        started.elapsed().as_secs()
    );
    Ok(())
}
