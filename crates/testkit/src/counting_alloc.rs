//! A global allocator that counts, per thread, the allocations made and
//! the bytes allocated and not yet freed. Per thread because tests run in
//! parallel threads of one process: a test reads its own thread's counts
//! before and after the code it measures.
//!
//! A test binary installs it with
//! `#[global_allocator] static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;`
//! (a library cannot choose the allocator of every binary that links it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each thread's allocations; see the
/// module doc.
pub struct CountingAllocator;

thread_local! {
    /// Allocations and reallocations made by this thread.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes this thread allocated less those it freed (a thread may free
    /// what another allocated, so this alone may go below zero).
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
}

/// Counts one allocation of `bytes` more (or fewer, when negative) live
/// bytes. `try_with`: a thread's last frees may come after its
/// thread-locals are gone, and are not counted then.
fn count(allocation: bool, bytes: i64) {
    if allocation {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    }
    let _ = LIVE_BYTES.try_with(|live| live.set(live.get() + bytes));
}

fn size(bytes: usize) -> i64 {
    i64::try_from(bytes).expect("an allocation fits in i64")
}

// SAFETY: every call goes to `System` with the caller's arguments
// unchanged; counting touches only const-initialized thread-locals, which
// do not allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(true, size(layout.size()));
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(true, size(layout.size()));
        // SAFETY: as above, for `alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(false, -size(layout.size()));
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(true, size(new_size) - size(layout.size()));
        // SAFETY: as above, for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) this thread made so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Bytes this thread allocated and has not freed.
pub fn live_bytes() -> i64 {
    LIVE_BYTES.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::{allocations, live_bytes, CountingAllocator};

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_this_threads_allocations_and_live_bytes() {
        let (count, live) = (allocations(), live_bytes());
        let buffer: Vec<u8> = std::hint::black_box(Vec::with_capacity(1_000));
        assert_eq!(allocations() - count, 1);
        assert_eq!(live_bytes() - live, 1_000);
        drop(buffer);
        assert_eq!(live_bytes(), live);
        assert_eq!(allocations() - count, 1, "a free is no allocation");
    }
}
