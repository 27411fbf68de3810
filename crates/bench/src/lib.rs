//! Benchmarks that show Skarv's speed and memory goals (never timed
//! assertions in tests: figures come from these, run on purpose).
//!
//! - [`ldm`]: one LDM instance's storage in-process — insert, primary-key
//!   lookup and ordered-scan rates, and memory per row.
//! - [`flex`]: NDB's flexAsynch on the native API against a running
//!   cluster — insert, read, update and delete rates and latencies, with
//!   `--verify` and seed 004's executor threads.
//! - [`sql`]: sysbench's point select over thousands of MySQL connections
//!   that a few threads drive (the thread pool's bench).

pub mod flex;
pub mod ldm;
pub mod sql;
