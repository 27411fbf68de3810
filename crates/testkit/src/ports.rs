//! Port ranges for the tests that start real servers on fixed ports.
//!
//! Each test asks for its own stretch of ports, but stretches of different
//! test binaries overlap, and `.ci/run` runs several test binaries at once.
//! A range found free by binding can still be taken by another process in
//! the moment before its servers bind it (a sandbox takes a second to
//! start, and a node a restart takes down frees its port for a while). So
//! a base port is also *reserved*: an exclusive `flock` on a file named by
//! the port, held until the test process exits. Another test process, or
//! another test in the same one, skips a reserved base.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;

/// Where Linux takes the local ports of outgoing connections and of binds
/// to port 0 (`ip_local_port_range`'s default). A connection closed in the
/// last minute holds its port there (TIME_WAIT), so fixed ranges stay out.
const EPHEMERAL_PORTS: std::ops::Range<u16> = 32_768..61_000;
/// How far a range asked inside [`EPHEMERAL_PORTS`] moves down.
const EPHEMERAL_SHIFT: u16 = 30_000;
/// Bases are this far apart inside a range.
const BASE_STEP_PORTS: u16 = 10;

/// The reservations this process holds: dropped (and released) only when
/// it exits, since a server a test started may outlive the test's frame.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("skarv-test-ports")
}

/// Takes the reservation of one block of [`BASE_STEP_PORTS`] ports
/// starting at `block`; `None` when another holds it.
fn reserve_block(block: u16) -> Option<File> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("create the port lock directory {}: {e}", dir.display()));
    let path = dir.join(format!("{block}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open the port lock {}: {e}", path.display()));
    file.try_lock().ok().map(|()| file)
}

/// Reserves every block `base..base + count` touches, or none of them.
fn reserve(base: u16, count: u16) -> bool {
    let blocks = count.div_ceil(BASE_STEP_PORTS);
    let mut taken = Vec::with_capacity(usize::from(blocks));
    for i in 0..blocks {
        match reserve_block(base + i * BASE_STEP_PORTS) {
            Some(file) => taken.push(file),
            // Dropping `taken` releases what was reserved.
            None => return false,
        }
    }
    HELD.lock().unwrap_or_else(|e| e.into_inner()).extend(taken);
    true
}

/// A base port in `range_start..range_start + span` whose next `count`
/// ports are free and reserved by no other test. The search starts at a
/// point that depends on the process id, so test processes spread out.
/// A range asked inside the ephemeral ports is moved below them.
pub fn free_base_port(range_start: u16, span: u16, count: u16) -> u16 {
    let range_start = if EPHEMERAL_PORTS.contains(&range_start) {
        range_start - EPHEMERAL_SHIFT
    } else {
        range_start
    };
    let bases = span / BASE_STEP_PORTS;
    let offset = (std::process::id() % u32::from(bases)) as u16;
    (0..bases)
        .map(|i| range_start + ((offset + i) % bases) * BASE_STEP_PORTS)
        .find(|&base| {
            (0..count).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok())
                && reserve(base, count)
        })
        .unwrap_or_else(|| {
            panic!(
                "no free port range of {count} in {range_start}..{}",
                range_start + span
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing binds the ports between the two calls, as when a sandbox
    /// is still starting: only the reservation keeps them apart.
    #[test]
    fn a_reserved_range_is_not_handed_out_again() {
        let first = free_base_port(20_000, 200, 12);
        let second = free_base_port(20_000, 200, 12);
        assert!(
            second.abs_diff(first) >= 12,
            "ranges {first}..+12 and {second}..+12 overlap"
        );
    }
}
