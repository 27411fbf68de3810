//! The page pool: the `DataMemory` budget of one LDM instance as 32 KiB pages.
//!
//! Pages are allocated from the system lazily, the first time the budget is
//! drawn that far, and a freed page goes on a free list and is handed out
//! again (zeroed) rather than returned to the system: a data node keeps the
//! memory it was configured for, as NDB does, and a page once warm stays
//! warm. The budget is the only limit; running into it is
//! [`MemoryError::DataMemoryExhausted`], after which every page already
//! handed out keeps working and the next free makes room again.

use super::MemoryError;

/// Bytes of one page: NDB's page size. Rows, variable-size parts and hash
/// buckets all live in pages of this size.
pub const PAGE_BYTES: usize = 32 * 1024;

/// The most pages one pool may have: 2 TiB of `DataMemory` per LDM instance.
/// Keeps page ids well inside `u32` with room for markers.
pub const POOL_PAGES_MAX: u32 = 1 << 26;

/// A page of the pool. Aligned to a cache line so that 64-byte hash buckets
/// at 64-byte offsets never straddle two lines.
#[repr(C, align(64))]
struct Page([u8; PAGE_BYTES]);

/// The number of a page in its pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId(pub u32);

/// The `DataMemory` of one LDM instance. Single-threaded: the structures
/// that draw from it take it by reference for each operation.
pub struct PagePool {
    /// Every page ever taken from the system, in use or free.
    pages: Vec<Box<Page>>,
    /// Pages taken from the system and now free.
    free: Vec<PageId>,
    /// `in_use[id]`: whether the page is handed out (catches double frees and
    /// use after free in tests; not consulted on the hot path in release).
    in_use: Vec<bool>,
    budget_pages: u32,
}

impl std::fmt::Debug for PagePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagePool")
            .field("budget_pages", &self.budget_pages)
            .field("used_pages", &self.used_pages())
            .field("allocated_pages", &self.pages.len())
            .finish()
    }
}

impl PagePool {
    /// A pool of at most `budget_pages` pages.
    pub fn new(budget_pages: u32) -> PagePool {
        assert!(
            budget_pages <= POOL_PAGES_MAX,
            "DataMemory of {budget_pages} pages is more than the {POOL_PAGES_MAX} pages a pool may have"
        );
        PagePool {
            pages: Vec::new(),
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
        (self.pages.len() - self.free.len()) as u32
    }

    pub fn used_bytes(&self) -> u64 {
        u64::from(self.used_pages()) * PAGE_BYTES as u64
    }

    /// Pages that may still be handed out before the budget is reached.
    pub fn available_pages(&self) -> u32 {
        self.budget_pages - self.used_pages()
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
                self.pages[id.0 as usize].0.fill(0);
                id
            }
            None => {
                let id = PageId(self.pages.len() as u32);
                self.pages.push(Box::new(Page([0; PAGE_BYTES])));
                self.in_use.push(false);
                id
            }
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
        let slot = &mut self.in_use[id.0 as usize];
        assert!(*slot, "page {} freed but not in use", id.0);
        *slot = false;
        self.free.push(id);
    }

    #[inline]
    pub fn page(&self, id: PageId) -> &[u8; PAGE_BYTES] {
        debug_assert!(self.in_use[id.0 as usize], "page {} read while free", id.0);
        &self.pages[id.0 as usize].0
    }

    #[inline]
    pub fn page_mut(&mut self, id: PageId) -> &mut [u8; PAGE_BYTES] {
        debug_assert!(
            self.in_use[id.0 as usize],
            "page {} written while free",
            id.0
        );
        &mut self.pages[id.0 as usize].0
    }
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
    #[should_panic(expected = "freed but not in use")]
    fn double_free_is_caught() {
        let mut pool = PagePool::new(1);
        let a = pool.alloc_page().unwrap();
        pool.free_page(a);
        pool.free_page(a);
    }
}
