//! Test helpers that several crates' tests need, kept once here rather
//! than copied into each crate's `tests/`. A dev-dependency only: nothing
//! that ships links it (`publish = false`).
//!
//! - [`CountingAllocator`]: the global allocator of the tests that show a
//!   warm path allocates nothing, or hold a memory estimate against what
//!   was really allocated.
//! - [`sandbox`]: a `skarv sandbox` of this build for a test, stopped when
//!   dropped (the client's and the SQL engine's tests).
//! - [`Rng`]: a seeded generator for workloads and mutations.
//! - [`ports`]: fixed port ranges, reserved across test processes.

mod counting_alloc;
pub mod ports;
mod rng;
pub mod sandbox;

pub use counting_alloc::{allocations, live_bytes, CountingAllocator};
pub use rng::Rng;
