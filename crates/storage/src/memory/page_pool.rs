//! The page pool: the `DataMemory` budget of one LDM instance as 32 KiB pages.
//!
//! Pages are handed out lazily, the first time the budget is drawn that far,
//! and a freed page goes on a free list and is handed out again (zeroed)
//! rather than returned to the system: a data node keeps the memory it was
//! configured for, as NDB does, and a page once warm stays warm. The budget
//! is the only limit; running into it is [`MemoryError::DataMemoryExhausted`],
//! after which every page already handed out keeps working and the next free
//! makes room again.
//!
//! # Huge pages
//!
//! At millions of rows the pool is gigabytes, and a primary-key lookup
//! touches two random places in it (hash bucket, then row). With 4 KiB
//! pages of the system each of those is a TLB miss as well as a cache miss,
//! and the page walk is itself another dependent memory access. So the pool
//! takes its memory in *slabs* of [`SLAB_PAGES`] pages (2 MiB), each aligned
//! to 2 MiB and marked `MADV_HUGEPAGE`, so that the kernel's transparent
//! huge pages back each slab with one TLB entry (this needs THP mode
//! `madvise` or `always`; with `never` everything still works, with small
//! pages).
//!
//! How: at creation the pool reserves address space for its whole budget,
//! rounded up to whole slabs, in one inaccessible mapping
//! (`PROT_NONE`, `MAP_NORESERVE`: no memory, no commit charge). A slab is
//! made readable and writable the first time a page of it is handed out;
//! the kernel gives it memory as it is first touched. Page `i` lies at
//! `base + i × PAGE_BYTES`, so finding a page costs one multiply, and the
//! accessible slabs are one contiguous range (one kernel mapping, however
//! many slabs). The last slab is made accessible only up to the budget, so
//! [`PagePool::mapped_bytes`] never exceeds the budget; it is at most one
//! slab less one page above [`PagePool::used_bytes`] plus the free list.
//!
//! If the system refuses memory for a slab (strict overcommit and too
//! little memory), the node cannot keep the promise its `DataMemory`
//! configuration made, and the pool panics with the reason: as NDB, which
//! takes all of `DataMemory` at start and does not start without it.

use std::ptr::NonNull;

use super::MemoryError;

/// Bytes of one page: NDB's page size. Rows, variable-size parts and hash
/// buckets all live in pages of this size.
pub const PAGE_BYTES: usize = 32 * 1024;

/// The most pages one pool may have: 2 TiB of `DataMemory` per LDM instance.
/// Keeps page ids well inside `u32` with room for markers.
pub const POOL_PAGES_MAX: u32 = 1 << 26;

/// Pages per slab: the unit in which the pool takes memory from the system.
pub const SLAB_PAGES: u32 = 64;

/// Bytes of one slab: one x86-64 huge page (2 MiB).
pub const SLAB_BYTES: usize = SLAB_PAGES as usize * PAGE_BYTES;

const _: () = assert!(SLAB_BYTES == 2 << 20);
const _: () = assert!(POOL_PAGES_MAX.is_multiple_of(SLAB_PAGES));

/// The number of a page in its pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId(pub u32);

/// The pool's address space: `reserved_bytes` from `base`, 2 MiB-aligned,
/// inaccessible except the slabs made accessible so far. Owned: unmapped on
/// drop.
struct Region {
    base: NonNull<u8>,
    reserved_bytes: usize,
}

impl Region {
    /// Reserves `bytes` (a multiple of [`SLAB_BYTES`]) of address space
    /// aligned to a slab, without memory. No reservation for zero bytes.
    fn reserve(bytes: usize) -> Region {
        assert!(bytes.is_multiple_of(SLAB_BYTES));
        if bytes == 0 {
            return Region {
                base: NonNull::<[u8; SLAB_BYTES]>::dangling().cast(),
                reserved_bytes: 0,
            };
        }
        // mmap aligns to the system page only: take one slab more and cut
        // the unaligned head and the rest of the tail off again.
        let padded = bytes + SLAB_BYTES;
        // SAFETY: a new anonymous mapping at an address the kernel picks;
        // no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                padded,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            panic!(
                "DataMemory: could not reserve {bytes} bytes of address space: {}",
                std::io::Error::last_os_error()
            );
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(SLAB_BYTES);
        let head = aligned - start;
        let tail = padded - head - bytes;
        // SAFETY: both ranges lie inside the mapping just made and outside
        // [aligned, aligned + bytes); nothing refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + bytes) as *mut libc::c_void, tail);
            }
        }
        Region {
            base: NonNull::new(aligned as *mut u8).expect("mmap does not return address 0"),
            reserved_bytes: bytes,
        }
    }

    /// Makes `bytes` from slab `slab` readable and writable (zero-filled:
    /// the range was never accessible before) and asks for huge pages.
    fn map(&mut self, slab: u32, bytes: usize) {
        let offset = slab as usize * SLAB_BYTES;
        assert!(bytes > 0 && bytes <= SLAB_BYTES && offset + bytes <= self.reserved_bytes);
        // SAFETY: the range lies inside the reservation, which this region
        // owns; it was inaccessible, so no reference into it exists.
        let addr = unsafe { self.base.as_ptr().add(offset) }.cast::<libc::c_void>();
        // SAFETY: as above; mprotect changes only the range's protection.
        let made = unsafe { libc::mprotect(addr, bytes, libc::PROT_READ | libc::PROT_WRITE) };
        if made != 0 {
            panic!(
                "DataMemory: the system refused memory for slab {slab} ({bytes} bytes): {}",
                std::io::Error::last_os_error()
            );
        }
        #[cfg(target_os = "linux")]
        if bytes == SLAB_BYTES {
            // A hint: without transparent huge pages (mode `never`, or none
            // free) the slab gets small pages and everything still works,
            // so a refusal is not an error.
            // SAFETY: madvise with MADV_HUGEPAGE changes no contents.
            let _ = unsafe { libc::madvise(addr, bytes, libc::MADV_HUGEPAGE) };
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.reserved_bytes > 0 {
            // SAFETY: the whole reservation is ours, and every reference
            // into it borrowed the pool, which is being dropped.
            let result = unsafe { libc::munmap(self.base.as_ptr().cast(), self.reserved_bytes) };
            debug_assert_eq!(result, 0, "munmap of the DataMemory reservation");
        }
    }
}

/// The `DataMemory` of one LDM instance. Single-threaded: the structures
/// that draw from it take it by reference for each operation.
pub struct PagePool {
    region: Region,
    /// Pages ever handed out: ids `0..fresh_pages` are in accessible slabs,
    /// in use or free.
    fresh_pages: u32,
    /// Slabs made accessible.
    mapped_slabs: u32,
    /// Pages handed out before and now free.
    free: Vec<PageId>,
    /// `in_use[id]`: whether the page is handed out (catches double frees,
    /// and use after free in debug builds).
    in_use: Vec<bool>,
    budget_pages: u32,
}

// SAFETY: the pool owns its region outright (no other handle to the memory
// exists), so moving it to another thread moves the memory with it; it
// holds no thread-bound state.
unsafe impl Send for PagePool {}
// SAFETY: through `&PagePool` pages are only read (`page`); writing needs
// `&mut PagePool` (`page_mut`), as with a `Vec`.
unsafe impl Sync for PagePool {}

impl std::fmt::Debug for PagePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagePool")
            .field("budget_pages", &self.budget_pages)
            .field("used_pages", &self.used_pages())
            .field("allocated_pages", &self.fresh_pages)
            .field("mapped_bytes", &self.mapped_bytes())
            .finish()
    }
}

impl PagePool {
    /// A pool of at most `budget_pages` pages. Takes address space for the
    /// budget now and memory only as pages are handed out.
    pub fn new(budget_pages: u32) -> PagePool {
        assert!(
            budget_pages <= POOL_PAGES_MAX,
            "DataMemory of {budget_pages} pages is more than the {POOL_PAGES_MAX} pages a pool may have"
        );
        let slabs = budget_pages.div_ceil(SLAB_PAGES);
        PagePool {
            region: Region::reserve(slabs as usize * SLAB_BYTES),
            fresh_pages: 0,
            mapped_slabs: 0,
            free: Vec::new(),
            in_use: Vec::new(),
            budget_pages,
        }
    }

    /// A pool for a `DataMemory` of `budget_bytes`, rounded down to whole
    /// pages.
    pub fn with_budget_bytes(budget_bytes: u64) -> PagePool {
        let pages = budget_bytes / PAGE_BYTES as u64;
        PagePool::new(u32::try_from(pages).unwrap_or(u32::MAX).min(POOL_PAGES_MAX))
    }

    pub fn budget_pages(&self) -> u32 {
        self.budget_pages
    }

    pub fn budget_bytes(&self) -> u64 {
        u64::from(self.budget_pages) * PAGE_BYTES as u64
    }

    /// Pages handed out and not yet freed.
    pub fn used_pages(&self) -> u32 {
        self.fresh_pages - self.free.len() as u32
    }

    pub fn used_bytes(&self) -> u64 {
        u64::from(self.used_pages()) * PAGE_BYTES as u64
    }

    /// Pages that may still be handed out before the budget is reached.
    pub fn available_pages(&self) -> u32 {
        self.budget_pages - self.used_pages()
    }

    /// Bytes made accessible so far: whole slabs, the last one cut at the
    /// budget. What the pool may hold of the system's memory (the kernel
    /// gives a slab memory as it is touched; a huge page backs a whole
    /// slab at once), so at most [`PagePool::budget_bytes`].
    pub fn mapped_bytes(&self) -> u64 {
        let pages = (u64::from(self.mapped_slabs) * u64::from(SLAB_PAGES))
            .min(u64::from(self.budget_pages));
        pages * PAGE_BYTES as u64
    }

    fn exhausted(&self) -> MemoryError {
        MemoryError::DataMemoryExhausted {
            budget_bytes: self.budget_bytes(),
        }
    }

    /// Hands out a zeroed page, or fails without any change when the budget
    /// is used up.
    pub fn alloc_page(&mut self) -> Result<PageId, MemoryError> {
        if self.used_pages() >= self.budget_pages {
            return Err(self.exhausted());
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.page_mut_unchecked(id).fill(0);
                id
            }
            None => self.fresh_page(),
        };
        assert!(
            !self.in_use[id.0 as usize],
            "page {} handed out twice",
            id.0
        );
        self.in_use[id.0 as usize] = true;
        debug_assert!(self.used_pages() <= self.budget_pages);
        Ok(id)
    }

    /// The next never-used page, mapping its slab when it is the slab's
    /// first. Fresh memory is zero.
    fn fresh_page(&mut self) -> PageId {
        let id = self.fresh_pages;
        assert!(id < self.budget_pages, "fresh page {id} beyond the budget");
        if id.is_multiple_of(SLAB_PAGES) {
            let slab = id / SLAB_PAGES;
            assert_eq!(slab, self.mapped_slabs, "slabs are mapped in order");
            let pages = SLAB_PAGES.min(self.budget_pages - id);
            self.region.map(slab, pages as usize * PAGE_BYTES);
            self.mapped_slabs += 1;
        }
        self.fresh_pages += 1;
        self.in_use.push(false);
        debug_assert_eq!(self.in_use.len(), self.fresh_pages as usize);
        PageId(id)
    }

    /// Hands out two pages, or none: for operations that need both.
    pub fn alloc_pages_2(&mut self) -> Result<(PageId, PageId), MemoryError> {
        if self.available_pages() < 2 {
            return Err(self.exhausted());
        }
        let first = self.alloc_page()?;
        let second = self.alloc_page()?;
        Ok((first, second))
    }

    /// Takes a page back. Its contents are dead from now on.
    pub fn free_page(&mut self, id: PageId) {
        let slot = self
            .in_use
            .get_mut(id.0 as usize)
            .unwrap_or_else(|| panic!("page {} freed but never handed out", id.0));
        assert!(*slot, "page {} freed but not in use", id.0);
        *slot = false;
        self.free.push(id);
    }

    #[inline]
    pub fn page(&self, id: PageId) -> &[u8; PAGE_BYTES] {
        self.check(id);
        debug_assert!(self.in_use[id.0 as usize], "page {} read while free", id.0);
        // SAFETY: `check` made sure the page lies in an accessible slab of
        // the region, which lives as long as `self`; writers need
        // `&mut self`, so no mutable reference to it exists now.
        unsafe { &*self.page_ptr(id) }
    }

    #[inline]
    pub fn page_mut(&mut self, id: PageId) -> &mut [u8; PAGE_BYTES] {
        debug_assert!(
            self.in_use.get(id.0 as usize) == Some(&true),
            "page {} written while free",
            id.0
        );
        self.page_mut_unchecked(id)
    }

    /// A page whether in use or free.
    #[inline]
    fn page_mut_unchecked(&mut self, id: PageId) -> &mut [u8; PAGE_BYTES] {
        self.check(id);
        // SAFETY: as in `page`; `&mut self` makes this the only reference
        // into the pool's memory, and distinct pages do not overlap.
        unsafe { &mut *self.page_ptr(id) }
    }

    /// Panics unless `id` is a page handed out at some time (and so in an
    /// accessible slab): what keeps `page` and `page_mut` sound.
    #[inline(always)]
    fn check(&self, id: PageId) {
        if id.0 >= self.fresh_pages {
            page_out_of_range(id, self.fresh_pages);
        }
    }

    #[inline(always)]
    fn page_ptr(&self, id: PageId) -> *mut [u8; PAGE_BYTES] {
        debug_assert!(id.0 < self.fresh_pages);
        // SAFETY (of the arithmetic): fresh pages lie inside the
        // reservation (`fresh_pages <= budget_pages <= slabs × SLAB_PAGES`),
        // so the offset stays inside one allocation.
        unsafe { self.region.base.as_ptr().add(id.0 as usize * PAGE_BYTES) }.cast()
    }
}

#[cold]
#[inline(never)]
fn page_out_of_range(id: PageId, fresh_pages: u32) -> ! {
    panic!(
        "page {} is not a page of this pool ({fresh_pages} pages handed out so far)",
        id.0
    )
}

/// Asks the CPU to start loading the cache line that holds `bytes[0]`, so
/// that a later read of it does not wait for memory. Lookups of a batch of
/// keys use it to overlap their cache misses (see
/// `HashIndex::prefetch`). A no-op where the target has no prefetch hint.
#[inline(always)]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it never faults, whatever the address,
    // and changes no memory; the address is a live slice's anyway. SSE, which
    // the instruction needs, is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// [`prefetch`] of every cache line that `bytes` touches (a row image that
/// straddles lines).
///
/// One hint every 64 bytes from the start, and one for the last byte: that
/// covers every line, and the number of hints depends only on the length,
/// not on where `bytes` starts, so the loop's branch is predicted (a row of
/// a partition always has the same length; whether it spans two lines or
/// three does not, and a mispredicted branch would cost more than the
/// redundant hint).
#[inline(always)]
pub fn prefetch_lines(bytes: &[u8]) {
    const LINE_BYTES: usize = 64;
    let Some(last) = bytes.len().checked_sub(1) else {
        return;
    };
    let mut at = 0;
    while at < last {
        prefetch(&bytes[at..]);
        at += LINE_BYTES;
    }
    prefetch(&bytes[last..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_exact_and_freed_pages_are_reused_zeroed() {
        let mut pool = PagePool::new(2);
        assert_eq!(pool.budget_bytes(), 2 * PAGE_BYTES as u64);
        let a = pool.alloc_page().unwrap();
        let b = pool.alloc_page().unwrap();
        assert_eq!(pool.used_bytes(), pool.budget_bytes());
        let err = pool.alloc_page().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "table is full: DataMemory exhausted ({} bytes)",
                2 * PAGE_BYTES
            )
        );
        assert_eq!(pool.used_pages(), 2);
        pool.page_mut(a)[100] = 7;
        pool.free_page(a);
        let c = pool.alloc_page().unwrap();
        assert_eq!(c, a, "a freed page is reused, not a new one taken");
        assert_eq!(pool.page(c)[100], 0, "a reused page comes back zeroed");
        assert_ne!(b, c);
    }

    #[test]
    fn two_pages_or_none() {
        let mut pool = PagePool::new(3);
        pool.alloc_page().unwrap();
        pool.alloc_page().unwrap();
        assert!(pool.alloc_pages_2().is_err());
        assert_eq!(pool.used_pages(), 2);
        assert!(pool.alloc_page().is_ok());
    }

    #[test]
    fn budget_bytes_round_down() {
        let pool = PagePool::with_budget_bytes(3 * PAGE_BYTES as u64 + 100);
        assert_eq!(pool.budget_pages(), 3);
    }

    #[test]
    fn slabs_are_mapped_as_pages_are_first_needed_and_never_past_the_budget() {
        // Two whole slabs and three pages of a third.
        let budget = 2 * SLAB_PAGES + 3;
        let mut pool = PagePool::new(budget);
        assert_eq!(
            pool.mapped_bytes(),
            0,
            "nothing is mapped before a page is needed"
        );
        let first = pool.alloc_page().unwrap();
        assert_eq!(pool.mapped_bytes(), SLAB_BYTES as u64);
        let mut pages = vec![first];
        for _ in 1..SLAB_PAGES {
            pages.push(pool.alloc_page().unwrap());
        }
        assert_eq!(
            pool.mapped_bytes(),
            SLAB_BYTES as u64,
            "one slab holds 64 pages"
        );
        pages.push(pool.alloc_page().unwrap());
        assert_eq!(pool.mapped_bytes(), 2 * SLAB_BYTES as u64);
        while pool.available_pages() > 0 {
            pages.push(pool.alloc_page().unwrap());
        }
        assert_eq!(pages.len() as u32, budget);
        assert_eq!(
            pool.mapped_bytes(),
            pool.budget_bytes(),
            "the last slab stops at the budget"
        );
        assert!(matches!(
            pool.alloc_page(),
            Err(MemoryError::DataMemoryExhausted { .. })
        ));
        // Every page is fresh (zero), its own memory, and writable to its
        // last byte, across slab boundaries.
        for (i, &id) in pages.iter().enumerate() {
            let page = pool.page_mut(id);
            assert!(page.iter().all(|&b| b == 0), "page {i} comes zeroed");
            page[0] = i as u8;
            page[PAGE_BYTES - 1] = !(i as u8);
        }
        for (i, &id) in pages.iter().enumerate() {
            assert_eq!(
                (pool.page(id)[0], pool.page(id)[PAGE_BYTES - 1]),
                (i as u8, !(i as u8))
            );
        }
        // Freed pages of any slab come back zeroed, and the budget stays exact.
        let victim = pages[SLAB_PAGES as usize + 5];
        pool.free_page(victim);
        assert_eq!(pool.available_pages(), 1);
        assert_eq!(pool.alloc_page().unwrap(), victim);
        assert_eq!(pool.page(victim)[0], 0);
        assert!(pool.alloc_page().is_err());
        assert_eq!(pool.mapped_bytes(), pool.budget_bytes());
    }

    #[test]
    fn pages_of_a_slab_are_aligned_for_huge_pages_and_cache_lines() {
        let mut pool = PagePool::new(SLAB_PAGES + 1);
        let a = pool.alloc_page().unwrap();
        assert_eq!(pool.page(a).as_ptr() as usize % SLAB_BYTES, 0);
        let b = pool.alloc_page().unwrap();
        assert_eq!(
            pool.page(b).as_ptr() as usize - pool.page(a).as_ptr() as usize,
            PAGE_BYTES
        );
    }

    #[test]
    fn an_empty_budget_maps_nothing_and_refuses_pages() {
        let mut pool = PagePool::new(0);
        assert!(pool.alloc_page().is_err());
        assert_eq!(pool.mapped_bytes(), 0);
    }

    #[test]
    fn the_pool_moves_to_another_thread() {
        let mut pool = PagePool::new(4);
        let a = pool.alloc_page().unwrap();
        pool.page_mut(a)[9] = 9;
        let pool = std::thread::spawn(move || {
            assert_eq!(pool.page(a)[9], 9);
            pool
        })
        .join()
        .unwrap();
        assert_eq!(pool.page(a)[9], 9);
    }

    #[test]
    #[should_panic(expected = "is not a page of this pool")]
    fn a_page_never_handed_out_is_refused() {
        let mut pool = PagePool::new(SLAB_PAGES);
        pool.alloc_page().unwrap();
        let _ = pool.page(PageId(1));
    }

    #[test]
    #[should_panic(expected = "freed but not in use")]
    fn double_free_is_caught() {
        let mut pool = PagePool::new(1);
        let a = pool.alloc_page().unwrap();
        pool.free_page(a);
        pool.free_page(a);
    }
}
