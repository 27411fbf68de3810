//! Benchmarks that show Skarv's speed and memory goals (never timed
//! assertions in tests: figures come from these, run on purpose).
//!
//! - [`ldm`]: one LDM instance's storage in-process — insert, primary-key
//!   lookup and ordered-scan rates, and memory per row.

pub mod ldm;
