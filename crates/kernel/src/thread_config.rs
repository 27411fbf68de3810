//! NDB's `ThreadConfig` syntax and the `MaxNoOfExecutionThreads` table,
//! resolved into a [`ThreadLayout`]: the threads a data node starts, which
//! roles each one runs, and how each is bound to CPUs.
//!
//! (Types settled; the parser and table are filled in by the thread_config work.)

use std::fmt;

/// What a thread does (NDB's thread types).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadRole {
    /// Local data manager instances: the data.
    Ldm,
    /// Transaction coordinator instances.
    Tc,
    /// Distribution, dictionary, membership.
    Main,
    /// Subscriptions (change events).
    Rep,
    /// Socket receive.
    Recv,
    /// Socket send.
    Send,
    /// File I/O.
    Io,
    /// Watchdog and socket setup.
    Watchdog,
}

impl ThreadRole {
    /// The name used in `ThreadConfig` (`wd` for the watchdog).
    pub fn config_name(self) -> &'static str {
        match self {
            ThreadRole::Ldm => "ldm",
            ThreadRole::Tc => "tc",
            ThreadRole::Main => "main",
            ThreadRole::Rep => "rep",
            ThreadRole::Recv => "recv",
            ThreadRole::Send => "send",
            ThreadRole::Io => "io",
            ThreadRole::Watchdog => "wd",
        }
    }
}

impl fmt::Display for ThreadRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.config_name())
    }
}

/// The longest spin NDB allows (and so do we), in microseconds.
pub const SPINTIME_MAX_US: u32 = 500;

/// One thread of the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSpec {
    /// e.g. `ldm0`, `tc1`, `main`, `recv0`.
    pub name: String,
    /// The role this thread was configured as.
    pub role: ThreadRole,
    /// Index among the threads of `role` (0-based).
    pub index: u32,
    /// Every role whose blocks run on this thread: `role` itself, plus roles
    /// that have no thread of their own and are folded in (e.g. `tc` on
    /// `main` when there are no tc threads).
    pub hosts: Vec<ThreadRole>,
    /// Pin to exactly this CPU.
    pub cpubind: Option<usize>,
    /// Allowed to run on any of these CPUs.
    pub cpuset: Option<Vec<usize>>,
    pub realtime: bool,
    pub spintime_us: u32,
}

/// Every thread a data node starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadLayout {
    pub threads: Vec<ThreadSpec>,
}

impl ThreadLayout {
    /// Number of configured threads of `role` (0 when the role is folded into another thread).
    pub fn count(&self, role: ThreadRole) -> u32 {
        self.threads.iter().filter(|t| t.role == role).count() as u32
    }

    /// The thread that runs instance `instance` of a block of `role`:
    /// instances are spread round-robin over the threads hosting the role.
    /// Returns `None` only for roles no thread hosts.
    pub fn thread_for(&self, role: ThreadRole, instance: u32) -> Option<usize> {
        let hosting: Vec<usize> = self
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.hosts.contains(&role))
            .map(|(i, _)| i)
            .collect();
        if hosting.is_empty() {
            return None;
        }
        Some(hosting[instance as usize % hosting.len()])
    }
}
