//! `skarv`: one binary, one subcommand per process kind (DESIGN.md §1).

mod admin;
mod backup;
mod bench_cmd;
mod data_cmd;
mod events_cmd;
mod mgmd_cmd;
mod restore_cmd;
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
static ALLOCATOR: Allocator = Allocator;

/// mimalloc, with sizes rounded up to their alignment. The `mimalloc`
/// crate asks every allocation for its layout's alignment; a 16-byte
/// aligned type (anything holding an `i128`: the SQL node's values and
/// decimals) of a size that is not a multiple of 16 then misses
/// mimalloc's fast path, whose blocks are aligned only when their size
/// class is a multiple of the alignment, and over-allocates and adjusts
/// instead (5 % of the SQL node's CPU under sysbench read_write). Rounded
/// up, such a size lands in a class of multiples of 16, where every block
/// is aligned.
///
/// Word-aligned layouts (bytes, strings, most vectors) go to `mi_malloc`
/// itself: every mimalloc block is at least word-aligned, and the aligned
/// entry point sends any size over its small-object limit (1 KiB: scan
/// batches, packets, row vectors) through its generic path, which
/// over-allocates and adjusts (5 % of the SQL node's instructions under
/// sysbench oltp_read_only, 1.3 allocations a row).
#[cfg(feature = "mimalloc")]
struct Allocator;

#[cfg(feature = "mimalloc")]
impl Allocator {
    /// Alignments up to this come from rounding alone (mimalloc's
    /// `MI_MAX_ALIGN_SIZE`); larger ones keep mimalloc's aligned path.
    const ROUNDED_ALIGN_MAX: usize = 16;
    /// Alignments up to this are every mimalloc block's (a word).
    const PLAIN_ALIGN_MAX: usize = std::mem::size_of::<usize>();

    fn rounded(size: usize, align: usize) -> usize {
        if align <= Self::ROUNDED_ALIGN_MAX {
            // A layout's size rounded up to its alignment never overflows
            // (`Layout::pad_to_align` holds the same guarantee).
            size.next_multiple_of(align)
        } else {
            size
        }
    }

    fn layout(layout: std::alloc::Layout) -> std::alloc::Layout {
        let size = Self::rounded(layout.size(), layout.align());
        std::alloc::Layout::from_size_align(size, layout.align())
            .expect("a size rounded up to its alignment is a valid layout")
    }
}

#[cfg(feature = "mimalloc")]
// SAFETY: every call goes to mimalloc with a layout of the same alignment
// and a size at least the one asked for; mimalloc frees by pointer alone.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= Self::PLAIN_ALIGN_MAX {
            // SAFETY: mimalloc's malloc; its blocks are word-aligned.
            return unsafe { libmimalloc_sys::mi_malloc(layout.size()) }.cast();
        }
        // SAFETY: the caller's contract, with a size no smaller.
        unsafe { mimalloc::MiMalloc.alloc(Self::layout(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= Self::PLAIN_ALIGN_MAX {
            // SAFETY: as `alloc`.
            return unsafe { libmimalloc_sys::mi_zalloc(layout.size()) }.cast();
        }
        // SAFETY: as `alloc`.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(Self::layout(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (mimalloc ignores the size).
        unsafe { mimalloc::MiMalloc.dealloc(ptr, Self::layout(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= Self::PLAIN_ALIGN_MAX {
            // SAFETY: `ptr` is a mimalloc block; the new one is word-aligned.
            return unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size) }.cast();
        }
        let new_size = Self::rounded(new_size, layout.align());
        // SAFETY: as `alloc`; `new_size` rounded up as `alloc` rounds.
        unsafe { mimalloc::MiMalloc.realloc(ptr, Self::layout(layout), new_size) }
    }
}

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
    /// Restore a backup taken with `skarv admin backup` into a cluster of
    /// any size (NDB's ndb_restore).
    Restore(restore_cmd::RestoreArgs),
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
        Command::Restore(args) => restore_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("skarv: {message}");
            ExitCode::FAILURE
        }
    }
}
