//! `skarv bench …`: the benchmarks that show the speed and memory goals.

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
    crate::die_quietly_on_broken_pipe();
    match args.which {
        Which::Ldm(args) => {
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
