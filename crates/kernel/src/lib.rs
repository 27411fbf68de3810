//! The block runtime.
//!
//! - [`block`]: the `Block` trait and the `Context` through which a block
//!   reaches time, randomness and other blocks.
//! - [`thread_config`]: NDB's `ThreadConfig` syntax and the
//!   `MaxNoOfExecutionThreads` table, resolved into a thread layout.
//! - [`runtime`]: the real runtime — threads by role, bounded lock-free
//!   queues between them drained in batches, spin-then-sleep, timers, and
//!   the watchdog.
//! - [`simulator`]: the deterministic runtime — the same blocks in one
//!   process under a seeded scheduler with a simulated clock and network.

pub mod block;
pub mod random;
pub mod runtime;
pub mod simulator;
pub mod thread_config;
pub mod time;

pub use block::{Block, Context, IoJob, IoRequest, Output};
pub use random::Rng;
pub use time::{Clock, Instant, MonotonicClock};
