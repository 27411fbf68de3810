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

/// mimalloc, with sizes rounded up to their alignment.
///
/// Word-aligned layouts (bytes, strings, most vectors) go to `mi_malloc`
/// itself: every mimalloc block is at least word-aligned.
///
/// A 16-byte aligned type (anything holding an `i128`: the SQL node's
/// values and decimals) has its size rounded up to a multiple of 16 and
/// goes to `mi_malloc` too: mimalloc's size classes from 16 bytes up are
/// multiples of 16 and its pages start 16-byte aligned
/// (`MI_MAX_ALIGN_SIZE`, what C's `malloc` owes any object), so the block
/// is aligned; the pointer is checked, and a block that is not goes back
/// for the aligned entry point. That entry point sends any size above its
/// small-object limit (1 KiB: row vectors of `Val`, sort buffers) through
/// its generic path, which over-allocates and adjusts: 4.3 % of the SQL
/// node's instructions under sysbench oltp_read_only
/// (bench/sql-instructions.sh), before this.
#[cfg(feature = "mimalloc")]
struct Allocator;

/// mimalloc's option calls, linked from `libmimalloc-sys` (whose own
/// declarations of them come with a feature that pulls in another crate).
#[cfg(feature = "mimalloc")]
mod mimalloc_options {
    use std::ffi::{c_int, c_long};

    extern "C" {
        pub fn mi_option_set_default(option: c_int, value: c_long);
        #[cfg(test)]
        pub fn mi_option_get(option: c_int) -> c_long;
        #[cfg(test)]
        pub fn mi_version() -> c_int;
    }
}

#[cfg(feature = "mimalloc")]
impl Allocator {
    /// Alignments up to this come from rounding alone (mimalloc's
    /// `MI_MAX_ALIGN_SIZE`); larger ones take mimalloc's aligned path.
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

    fn aligned(ptr: *mut u8, align: usize) -> bool {
        (ptr as usize) & (align - 1) == 0
    }

    /// mimalloc v3's `mi_option_purge_delay`: its place in `mi_option_t`
    /// (mimalloc.h), which the `libmimalloc-sys` crate does not name.
    const OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    /// How long freed memory stays mapped before mimalloc hands it back to
    /// the kernel, in ms (its default is 1,000). A change-stream subscriber
    /// frees an epoch's decoded changes and allocates the next epoch's
    /// within that second over and over: with the default, `skarv bench
    /// flex --subscribe` at 80,000 changes/s took 12,000-98,000 page
    /// faults in 8 s, each a page the kernel zeroes again (a whole 2 MiB
    /// one where transparent huge pages back mimalloc's arenas; the
    /// subscriber then spent most of its time in `clear_page`, fell behind
    /// and was cut off); at 10 s it took 500. An idle process still
    /// returns what it freed, 10 s later.
    const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

    /// Sets mimalloc's options where the environment (`MIMALLOC_...`) did
    /// not: called first thing in `main`.
    fn configure() {
        // SAFETY: sets an option's value; any value is valid for this one.
        unsafe {
            mimalloc_options::mi_option_set_default(Self::OPTION_PURGE_DELAY, Self::PURGE_DELAY_MS);
        }
    }

    /// A block for `layout` from `plain` (`mi_malloc` or `mi_zalloc`) when
    /// it serves that alignment, else from `aligned` (mimalloc's aligned
    /// entry point of the same kind).
    ///
    /// # Safety
    /// `GlobalAlloc::alloc`'s contract for `layout`.
    unsafe fn allocate(
        layout: std::alloc::Layout,
        plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
        aligned: impl FnOnce(std::alloc::Layout) -> *mut u8,
    ) -> *mut u8 {
        let align = layout.align();
        if align <= Self::PLAIN_ALIGN_MAX {
            // SAFETY: mimalloc's malloc; its blocks are word-aligned.
            return unsafe { plain(layout.size()) }.cast();
        }
        let layout = Self::layout(layout);
        if align <= Self::ROUNDED_ALIGN_MAX {
            // SAFETY: mimalloc's malloc, of the rounded size.
            let ptr: *mut u8 = unsafe { plain(layout.size()) }.cast();
            if ptr.is_null() || Self::aligned(ptr, align) {
                return ptr;
            }
            // SAFETY: a mimalloc block, not handed out.
            unsafe { libmimalloc_sys::mi_free(ptr.cast()) };
        }
        aligned(layout)
    }
}

#[cfg(feature = "mimalloc")]
// SAFETY: every call goes to mimalloc with a layout of the same alignment
// and a size at least the one asked for; a block is returned only when
// aligned as asked; mimalloc frees by pointer alone.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe {
            Self::allocate(layout, libmimalloc_sys::mi_malloc, |l| {
                mimalloc::MiMalloc.alloc(l)
            })
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe {
            Self::allocate(layout, libmimalloc_sys::mi_zalloc, |l| {
                mimalloc::MiMalloc.alloc_zeroed(l)
            })
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (mimalloc ignores the size).
        unsafe { mimalloc::MiMalloc.dealloc(ptr, Self::layout(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        if align <= Self::PLAIN_ALIGN_MAX {
            // SAFETY: `ptr` is a mimalloc block; the new one is word-aligned.
            return unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size) }.cast();
        }
        let rounded = Self::rounded(new_size, align);
        if align <= Self::ROUNDED_ALIGN_MAX {
            // SAFETY: `ptr` is a mimalloc block of this allocator.
            let moved: *mut u8 = unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), rounded) }.cast();
            if moved.is_null() || Self::aligned(moved, align) {
                return moved;
            }
            // Not aligned (never seen): an aligned block, the bytes
            // copied over, the unaligned one freed.
            let new_layout = std::alloc::Layout::from_size_align(rounded, align)
                .expect("a size rounded up to its alignment is a valid layout");
            // SAFETY: the caller's contract, with a size no smaller.
            let fresh = unsafe { mimalloc::MiMalloc.alloc(new_layout) };
            if fresh.is_null() {
                // The old block is gone (moved), so null would break the
                // caller's contract: out of memory ends the process.
                std::alloc::handle_alloc_error(new_layout);
            }
            // SAFETY: both blocks hold at least `new_size` bytes (the
            // realloc kept the old contents up to it) and differ.
            unsafe { std::ptr::copy_nonoverlapping(moved, fresh, new_size) };
            // SAFETY: a mimalloc block no longer handed out.
            unsafe { libmimalloc_sys::mi_free(moved.cast()) };
            return fresh;
        }
        // SAFETY: as `alloc`; `rounded` as `alloc` rounds.
        unsafe { mimalloc::MiMalloc.realloc(ptr, Self::layout(layout), rounded) }
    }
}

#[cfg(all(test, feature = "mimalloc"))]
mod allocator_tests {
    use std::alloc::{GlobalAlloc, Layout};

    use super::ALLOCATOR;

    /// Every block is aligned as its layout asks, across mimalloc's size
    /// classes (small, above the 1 KiB small-object limit, large), and a
    /// realloc keeps the bytes and the alignment.
    #[test]
    fn blocks_are_aligned_as_asked_and_reallocs_keep_the_bytes() {
        for align in [1, 8, 16, 32, 64] {
            for size in (1..70).chain([1000, 1024, 1025, 1500, 4000, 70_000, 600_000]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; every block is freed below with
                // its layout.
                unsafe {
                    let ptr = ALLOCATOR.alloc(layout);
                    assert!(!ptr.is_null());
                    assert_eq!(ptr as usize % align, 0, "alloc {size} bytes, align {align}");
                    for i in 0..size {
                        *ptr.add(i) = (i % 251) as u8;
                    }
                    let grown = size * 3 + 17;
                    let moved = ALLOCATOR.realloc(ptr, layout, grown);
                    assert_eq!(
                        moved as usize % align,
                        0,
                        "realloc to {grown}, align {align}"
                    );
                    for i in 0..size {
                        assert_eq!(*moved.add(i), (i % 251) as u8, "byte {i} after realloc");
                    }
                    ALLOCATOR.dealloc(moved, Layout::from_size_align(grown, align).unwrap());
                    let zeroed = ALLOCATOR.alloc_zeroed(layout);
                    assert_eq!(
                        zeroed as usize % align,
                        0,
                        "alloc_zeroed {size}, align {align}"
                    );
                    assert!((0..size).all(|i| *zeroed.add(i) == 0));
                    ALLOCATOR.dealloc(zeroed, layout);
                }
            }
        }
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
    #[cfg(feature = "mimalloc")]
    Allocator::configure();
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

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    use super::Allocator;

    /// The option's place is mimalloc v3's: at its default it reads as
    /// v3's purge delay, and `configure` moves it.
    #[test]
    fn the_purge_delay_set_is_mimalloc_v3s() {
        // SAFETY: reads mimalloc's version and an option.
        let (version, before) = unsafe {
            (
                super::mimalloc_options::mi_version(),
                super::mimalloc_options::mi_option_get(Allocator::OPTION_PURGE_DELAY),
            )
        };
        assert_eq!(
            version / 10_000,
            3,
            "mimalloc {version}: its options are numbered otherwise"
        );
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                before,
                1_000,
                "option {} is not the purge delay",
                Allocator::OPTION_PURGE_DELAY
            );
            Allocator::configure();
            // SAFETY: reads an option.
            let after =
                unsafe { super::mimalloc_options::mi_option_get(Allocator::OPTION_PURGE_DELAY) };
            assert_eq!(after, Allocator::PURGE_DELAY_MS);
        }
    }
}
