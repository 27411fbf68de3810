//! The row store of one partition (NDB: DBTUP's fragment pages).
//!
//! A row is two opaque byte strings: a fixed-size part, the same length for
//! every row of the partition, and an optional variable-size part. The fixed
//! part lives in a *slot* of a fixed-size page; its [`RowId`] is the page and
//! slot and never changes while the row lives, whatever happens to its
//! variable-size part. Variable-size parts live in slotted variable-size
//! pages (see `var_page`) and are named from the row's slot header.
//!
//! # RowId
//!
//! `RowId = page index << ROW_SLOT_BITS | slot`, with `ROW_SLOT_BITS = 12`:
//! 20 bits of page index (page indexes are the partition's own, not pool
//! page ids, so a row keeps its id across a restart that restores it into
//! other pool pages) and 12 bits of slot. Slots are at least
//! [`FIXED_SLOT_BYTES_MIN`] = 8 bytes, so a page has at most 4096. The last
//! page index is never used ([`FIXED_PAGES_MAX`]), so `u32::MAX` and
//! `u32::MAX − 1` are never row ids: the hash index uses them as markers.
//!
//! # Fixed-size page
//!
//! `slots_per_page = PAGE_BYTES / slot_bytes` slots, slot `s` at byte
//! `s · slot_bytes`; the few bytes after the last slot are unused. A slot is
//! a header followed by the fixed part:
//!
//! - partitions without variable-size parts ([`RowStore::new`]): a 1-byte
//!   header ([`FIXED_HEADER_BYTES`]), the flags: bit 0 *in use*, bit 1
//!   *uncommitted insert*;
//! - partitions with variable-size parts ([`RowStore::with_var_parts`]): a
//!   4-byte header ([`FIXED_HEADER_BYTES_WITH_VAR`]), `u32` LE: bits 0–1 the
//!   same flags, bits 2–31 the variable-part reference
//!   `var page index << 12 | directory entry`, all ones when the row has no
//!   variable-size part.
//!
//! A free slot is all zeroes. The allocator's own record of which slots are
//! in use is a bitmap per page kept beside the pages (with the page's change
//! generation), so finding a free slot or iterating rows reads no page.
//! Beside each word of that bitmap lies the word of *changed* marks of the
//! same 64 slots (see below), so that the two share a cache line.
//!
//! # Space reuse
//!
//! A deleted slot is reused by the next insert, preferring the page most
//! recently given a free slot. A page whose last row goes is returned to the
//! pool unless it is the partition's only page with free slots (keeping one
//! avoids taking and returning a page on every insert/delete at a page
//! boundary). Variable-size pages are filed by free space in classes of
//! 256 bytes; a part goes into a page of its size class or the next non-empty
//! class above, else into a new page.
//!
//! # Partial local checkpoints
//!
//! Two levels of change tracking, so that a checkpoint after a few changes
//! spread at random writes those rows and not their pages:
//!
//! - **Pages.** Every change to a row (insert, update of either part,
//!   delete, flag change) stamps its fixed-size page with the current
//!   *generation*; every change to a variable-size page stamps that page.
//!   [`RowStore::mark_checkpoint`] closes a generation, and
//!   [`RowStore::changed_pages_since`] is the cheap filter of which pages a
//!   checkpoint must visit at all. Pages released to the pool are still
//!   listed (as pages with no rows) when they changed.
//! - **Rows.** Every slot has a *changed* mark: set by [`RowStore::insert`],
//!   [`RowStore::update`], [`RowStore::set_uncommitted`] and
//!   [`RowStore::mark_changed`], dropped with the row by
//!   [`RowStore::delete`], and cleared by the checkpoint writer
//!   ([`RowStore::clear_changed`]) when it has written the row. A row put
//!   back by [`RowStore::insert_at`] is *not* marked: restore puts back rows
//!   that are in a checkpoint already. A live row without the mark has its
//!   current image in a checkpoint that cleared the mark, or in the one it
//!   was restored from; that is what lets a partial checkpoint write only
//!   the marked rows of a visited page ([`RowStore::page_changed_rows`]) and
//!   the bitmap of its live committed slots ([`RowStore::committed_slots`]).
//!
//! The marks are one bit per slot beside the page (not in the slot header:
//! the 4-byte header of rows with variable-size parts has no spare bit), so
//! a checkpoint finds the marked rows of a page without reading the page,
//! and clearing a mark needs no access to the pool.

use super::page_pool::{prefetch_lines, PageId, PagePool, PAGE_BYTES};
use super::var_page::{self, VarPage, VAR_CLASSES, VAR_CLASS_BYTES, VAR_DIR_ENTRY_BYTES};
use super::{IndexSet, MemoryError};
use crate::RowId;

/// Bits of the slot number in a [`RowId`].
pub const ROW_SLOT_BITS: u32 = 12;

/// Smallest slot: keeps slots per page within `ROW_SLOT_BITS`. Rows with a
/// smaller fixed part are padded.
pub const FIXED_SLOT_BYTES_MIN: usize = PAGE_BYTES >> ROW_SLOT_BITS;

/// Most fixed-size pages of one partition. Page indexes run from 0 to
/// `FIXED_PAGES_MAX − 1`; the index `FIXED_PAGES_MAX` is never used so that
/// `u32::MAX` and `u32::MAX − 1` are never row ids. 32 GiB of fixed parts.
pub const FIXED_PAGES_MAX: u32 = (1 << (32 - ROW_SLOT_BITS)) - 1;

/// Header bytes of a slot in a partition without variable-size parts.
pub const FIXED_HEADER_BYTES: usize = 1;

/// Header bytes of a slot in a partition with variable-size parts.
pub const FIXED_HEADER_BYTES_WITH_VAR: usize = 4;

/// Bits of the directory entry in a variable-part reference.
const VAR_ENTRY_BITS: u32 = 12;

/// Bits of the variable-size page index in a variable-part reference.
const VAR_PAGE_BITS: u32 = 30 - VAR_ENTRY_BITS;

/// Most variable-size pages of one partition (8 GiB); the last index is
/// never used so that a reference of all ones means "none".
pub const VAR_PAGES_MAX: u32 = (1 << VAR_PAGE_BITS) - 1;

/// Largest variable-size part of one row: one part per page at most.
pub const VAR_PART_BYTES_MAX: usize = PAGE_BYTES - VAR_DIR_ENTRY_BYTES as usize;

const FLAG_IN_USE: u8 = 1;
const FLAG_UNCOMMITTED: u8 = 2;
const FLAGS_MASK: u32 = 3;
const VAR_REF_NONE: u32 = (1 << 30) - 1;

const _: () = assert!(FIXED_SLOT_BYTES_MIN >= FIXED_HEADER_BYTES_WITH_VAR);
const _: () = assert!(VAR_ENTRY_BITS == var_page::VAR_ENTRIES_MAX.trailing_zeros());
const _: () = assert!(VAR_CLASSES <= 128, "the class mask is a u128");

/// The row id of slot `slot` of page `page`.
#[inline]
pub fn row_id(page: u32, slot: u32) -> RowId {
    debug_assert!(page < FIXED_PAGES_MAX && slot < 1 << ROW_SLOT_BITS);
    RowId(page << ROW_SLOT_BITS | slot)
}

/// The partition page index of a row.
#[inline]
pub fn row_page(row: RowId) -> u32 {
    row.0 >> ROW_SLOT_BITS
}

/// The slot of a row in its page.
#[inline]
pub fn row_slot(row: RowId) -> u32 {
    row.0 & ((1 << ROW_SLOT_BITS) - 1)
}

/// `RowStore::page_table` entry of a page index with no pool page.
const NO_POOL_PAGE: PageId = PageId(u32::MAX);

/// Bookkeeping of one fixed-size page of a partition (its pool page is in
/// `RowStore::page_table`, apart, so that lookups read a denser table).
#[derive(Debug, Clone)]
struct FixedPage {
    /// Slots in use.
    used: u32,
    /// Generation of the last change to a row of this page.
    changed: u32,
    /// Live rows of this page marked as uncommitted inserts: when zero, a
    /// checkpoint takes the page's committed rows from the bitmap alone.
    uncommitted: u32,
}

/// The in-use bits and changed marks of 64 slots of one page, side by side
/// (an update reads the first and sets the second: one cache line).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct SlotWord {
    used: u64,
    changed: u64,
}

/// The rows of one partition. See the module documentation for the layout.
#[derive(Debug)]
pub struct RowStore {
    fixed_bytes: usize,
    with_var: bool,
    header_bytes: usize,
    slot_bytes: usize,
    slots_per_page: u32,
    words_per_page: usize,
    /// The pool page of each page index, or `NO_POOL_PAGE` (released): the
    /// row id to address translation of every lookup, so kept apart from
    /// `pages` at 4 bytes a page (124 KiB at 10M rows of 100 bytes: it
    /// stays in the L2 cache while rows stream through).
    page_table: Vec<PageId>,
    pages: Vec<FixedPage>,
    /// `words_per_page` words per page: bit `s` of `used` set when slot `s`
    /// is in use, of `changed` when the row in it is marked changed (never
    /// without `used`).
    slot_words: Vec<SlotWord>,
    /// Pages with a pool page and at least one free slot.
    with_free_slots: IndexSet,
    /// Page indexes without a pool page.
    without_page: IndexSet,
    var_pages: Vec<VarPage>,
    /// `var_classes[c]`: variable-size pages with usable free bytes in
    /// `[c·256, (c+1)·256)` (the last class open-ended).
    var_classes: Vec<IndexSet>,
    /// Bit `c` set when `var_classes[c]` is not empty.
    var_class_mask: u128,
    /// Variable-size page indexes without a pool page.
    var_without_page: Vec<u32>,
    rows: u64,
    /// Rows with the changed mark set.
    changed_rows: u64,
    generation: u32,
    /// Reused by variable-size page compaction.
    scratch: Vec<u16>,
}

impl RowStore {
    /// A row store for rows of `fixed_bytes` without variable-size parts.
    pub fn new(fixed_bytes: usize) -> RowStore {
        RowStore::build(fixed_bytes, false)
    }

    /// A row store for rows of `fixed_bytes` and a variable-size part of
    /// 0 to [`VAR_PART_BYTES_MAX`] bytes.
    pub fn with_var_parts(fixed_bytes: usize) -> RowStore {
        RowStore::build(fixed_bytes, true)
    }

    fn build(fixed_bytes: usize, with_var: bool) -> RowStore {
        let header_bytes = if with_var {
            FIXED_HEADER_BYTES_WITH_VAR
        } else {
            FIXED_HEADER_BYTES
        };
        assert!(
            fixed_bytes + header_bytes <= PAGE_BYTES,
            "fixed-size part of {fixed_bytes} bytes does not fit in a {PAGE_BYTES}-byte page"
        );
        let slot_bytes = (header_bytes + fixed_bytes).max(FIXED_SLOT_BYTES_MIN);
        let slots_per_page = (PAGE_BYTES / slot_bytes) as u32;
        assert!((1..=1 << ROW_SLOT_BITS).contains(&slots_per_page));
        RowStore {
            fixed_bytes,
            with_var,
            header_bytes,
            slot_bytes,
            slots_per_page,
            words_per_page: (slots_per_page as usize).div_ceil(64),
            page_table: Vec::new(),
            pages: Vec::new(),
            slot_words: Vec::new(),
            with_free_slots: IndexSet::default(),
            without_page: IndexSet::default(),
            var_pages: Vec::new(),
            var_classes: vec![IndexSet::default(); VAR_CLASSES as usize],
            var_class_mask: 0,
            var_without_page: Vec::new(),
            rows: 0,
            changed_rows: 0,
            generation: 1,
            scratch: Vec::new(),
        }
    }

    pub fn fixed_bytes(&self) -> usize {
        self.fixed_bytes
    }

    pub fn has_var_parts(&self) -> bool {
        self.with_var
    }

    /// Bytes of one slot (header, fixed part, padding).
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    pub fn slots_per_page(&self) -> u32 {
        self.slots_per_page
    }

    pub fn row_count(&self) -> u64 {
        self.rows
    }

    /// Fixed-size page indexes, with or without a pool page: row ids of this
    /// partition have page indexes below this.
    pub fn page_count(&self) -> u32 {
        self.pages.len() as u32
    }

    /// Pool bytes held by this partition's rows (fixed and variable pages).
    pub fn memory_bytes(&self) -> u64 {
        self.fixed_memory_bytes() + self.var_memory_bytes()
    }

    /// Pool bytes of the pages of the rows' fixed parts.
    pub fn fixed_memory_bytes(&self) -> u64 {
        (self.pages.len() - self.without_page.len()) as u64 * PAGE_BYTES as u64
    }

    /// Pool bytes of the pages of the rows' variable parts.
    pub fn var_memory_bytes(&self) -> u64 {
        (self.var_pages.len() - self.var_without_page.len()) as u64 * PAGE_BYTES as u64
    }

    /// Whether `row` names a row of this store.
    pub fn is_live(&self, row: RowId) -> bool {
        let page = row_page(row) as usize;
        let slot = row_slot(row) as usize;
        page < self.pages.len()
            && slot < self.slots_per_page as usize
            && self.slot_words[page * self.words_per_page + slot / 64].used & (1 << (slot % 64))
                != 0
    }

    // ----- reading -----

    /// Pool page and byte offset of the slot of a live row.
    #[inline]
    fn locate(&self, row: RowId) -> (PageId, usize) {
        debug_assert!(self.is_live(row), "{row:?} is not a row of this store");
        let pool_page = self.page_table[row_page(row) as usize];
        if pool_page == NO_POOL_PAGE {
            no_pool_page(row);
        }
        (pool_page, row_slot(row) as usize * self.slot_bytes)
    }

    /// The pool page of page index `page`, if it has one.
    #[inline]
    fn pool_page(&self, page: u32) -> Option<PageId> {
        Some(self.page_table[page as usize]).filter(|&p| p != NO_POOL_PAGE)
    }

    /// The fixed-size part of a live row.
    #[inline]
    pub fn fixed<'p>(&self, pool: &'p PagePool, row: RowId) -> &'p [u8] {
        let (page, at) = self.locate(row);
        let start = at + self.header_bytes;
        &pool.page(page)[start..start + self.fixed_bytes]
    }

    /// Starts loading every cache line of a live row's slot (header and
    /// fixed-size part) into the cache (batched lookups; see
    /// [`crate::hash_index::HashIndex::prefetch`]): a 101-byte slot spans
    /// three lines more often than not.
    #[inline(always)]
    pub fn prefetch(&self, pool: &PagePool, row: RowId) {
        let (page, at) = self.locate(row);
        prefetch_lines(&pool.page(page)[at..at + self.header_bytes + self.fixed_bytes]);
    }

    /// The variable-size part of a live row (empty when it has none).
    /// Inlined for the test of a store without variable-size parts (an
    /// update of a table of integers asks four times): no call for them.
    #[inline(always)]
    pub fn var<'p>(&self, pool: &'p PagePool, row: RowId) -> &'p [u8] {
        if !self.with_var {
            return &[];
        }
        self.var_stored(pool, row)
    }

    /// [`RowStore::var`] of a store with variable-size parts.
    fn var_stored<'p>(&self, pool: &'p PagePool, row: RowId) -> &'p [u8] {
        let var_ref = self.var_ref(pool, row);
        if var_ref == VAR_REF_NONE {
            return &[];
        }
        let (vp, entry) = split_var_ref(var_ref);
        let Some(page) = self.var_pages[vp as usize].pool else {
            panic!("{row:?} names variable-size page {vp}, which holds no page");
        };
        let bytes = pool.page(page);
        let (offset, len) = var_page::dir_entry(bytes, entry);
        debug_assert!(len > 0, "{row:?} names a free variable-size entry");
        &bytes[offset..offset + len]
    }

    /// The fixed-size part of a live row, or `None` when the row is an
    /// insert not yet committed: what a committed read sees of it, with
    /// one translation of the row id (the batched lookup's last step).
    #[inline(always)]
    pub fn fixed_if_committed<'p>(&self, pool: &'p PagePool, row: RowId) -> Option<&'p [u8]> {
        let (page, at) = self.locate(row);
        let slot = &pool.page(page)[at..at + self.header_bytes + self.fixed_bytes];
        debug_assert!(slot[0] & FLAG_IN_USE != 0, "{row:?} header says free");
        (slot[0] & FLAG_UNCOMMITTED == 0).then(|| &slot[self.header_bytes..])
    }

    /// Whether a live row is an insert not yet committed.
    pub fn is_uncommitted(&self, pool: &PagePool, row: RowId) -> bool {
        let (page, at) = self.locate(row);
        pool.page(page)[at] & FLAG_UNCOMMITTED != 0
    }

    fn var_ref(&self, pool: &PagePool, row: RowId) -> u32 {
        if !self.with_var {
            return VAR_REF_NONE;
        }
        let (page, at) = self.locate(row);
        let bytes = pool.page(page);
        let header = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        debug_assert!(header as u8 & FLAG_IN_USE != 0, "{row:?} header says free");
        header >> 2
    }

    /// Live rows in row id order (for scans and checkpoints).
    pub fn rows(&self) -> Rows<'_> {
        Rows::new(&self.slot_words, self.words_per_page, 0, false)
    }

    /// Live rows of one page in slot order (for scans and checkpoints).
    pub fn page_rows(&self, page: u32) -> PageRows<'_> {
        Rows::new(self.page_words(page), self.words_per_page, page, false)
    }

    /// The slot words of a page; empty for a page index beyond the last.
    fn page_words(&self, page: u32) -> &[SlotWord] {
        if (page as usize) < self.pages.len() {
            let start = page as usize * self.words_per_page;
            &self.slot_words[start..start + self.words_per_page]
        } else {
            &[]
        }
    }

    // ----- checkpoints -----

    /// The generation changes are stamped with now.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Live rows with the changed mark set (committed or not).
    pub fn changed_rows(&self) -> u64 {
        self.changed_rows
    }

    /// Whether a live row has the changed mark set.
    pub fn is_changed(&self, row: RowId) -> bool {
        debug_assert!(self.is_live(row), "{row:?} is not a row of this store");
        let slot = row_slot(row) as usize;
        let word = &self.slot_words[row_page(row) as usize * self.words_per_page + slot / 64];
        word.changed & (1 << (slot % 64)) != 0
    }

    /// Live rows of one page with the changed mark set, in slot order (what
    /// a partial checkpoint writes of a page it visits). Reads no page.
    pub fn page_changed_rows(&self, page: u32) -> PageRows<'_> {
        Rows::new(self.page_words(page), self.words_per_page, page, true)
    }

    /// Sets `out` to the bitmap of the page's live *committed* rows: word
    /// `w`, bit `b` for slot `64·w + b`; `words_per_page` words, bits past
    /// the last slot zero. Reads the page only when it holds uncommitted
    /// inserts.
    pub fn committed_slots(&self, pool: &PagePool, page: u32, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.page_words(page).iter().map(|w| w.used));
        out.resize(self.words_per_page, 0);
        let Some(meta) = self.pages.get(page as usize) else {
            return;
        };
        if meta.uncommitted == 0 {
            return;
        }
        for row in self.page_rows(page) {
            if self.is_uncommitted(pool, row) {
                let slot = row_slot(row) as usize;
                out[slot / 64] &= !(1 << (slot % 64));
            }
        }
    }

    /// Sets the changed mark of a live row and stamps its page: its image
    /// is in no checkpoint. For rows put back by [`RowStore::insert_at`]
    /// that are *not* from a checkpoint (redo replay by row id); every other
    /// change marks the row itself.
    pub fn mark_changed(&mut self, row: RowId) {
        assert!(self.is_live(row), "mark of {row:?}, which is not a row");
        self.set_changed(row);
        self.pages[row_page(row) as usize].changed = self.generation;
    }

    /// Clears the changed mark of a live row: the checkpoint writer has
    /// written its current image. Stamps nothing.
    pub fn clear_changed(&mut self, row: RowId) {
        debug_assert!(self.is_live(row), "{row:?} is not a row of this store");
        let slot = row_slot(row) as usize;
        let word = &mut self.slot_words[row_page(row) as usize * self.words_per_page + slot / 64];
        let bit = 1u64 << (slot % 64);
        if word.changed & bit != 0 {
            word.changed &= !bit;
            self.changed_rows -= 1;
        }
    }

    /// Sets the changed mark of a live row.
    #[inline]
    fn set_changed(&mut self, row: RowId) {
        let slot = row_slot(row) as usize;
        let word = &mut self.slot_words[row_page(row) as usize * self.words_per_page + slot / 64];
        let bit = 1u64 << (slot % 64);
        debug_assert!(word.used & bit != 0, "{row:?} is not a row of this store");
        if word.changed & bit == 0 {
            word.changed |= bit;
            self.changed_rows += 1;
        }
    }

    /// Closes the current generation and returns it: pages changed from now
    /// on are stamped with a later one. A checkpoint keeps the returned value
    /// and asks the next one for `changed_pages_since(it)`.
    pub fn mark_checkpoint(&mut self) -> u32 {
        let closed = self.generation;
        self.generation = closed
            .checked_add(1)
            .expect("checkpoint generations run out");
        closed
    }

    /// Fixed-size page indexes changed after generation `generation` was
    /// closed, ascending. `changed_pages_since(0)` lists every page ever
    /// used.
    pub fn changed_pages_since(&self, generation: u32) -> impl Iterator<Item = u32> + '_ {
        (0..self.pages.len() as u32).filter(move |&p| self.pages[p as usize].changed > generation)
    }

    /// Variable-size page indexes changed after generation `generation` was
    /// closed, ascending.
    pub fn changed_var_pages_since(&self, generation: u32) -> impl Iterator<Item = u32> + '_ {
        (0..self.var_pages.len() as u32)
            .filter(move |&p| self.var_pages[p as usize].changed > generation)
    }

    // ----- changing -----

    fn check_row(&self, fixed: &[u8], var: &[u8]) -> Result<(), MemoryError> {
        assert_eq!(
            fixed.len(),
            self.fixed_bytes,
            "fixed-size part of {} bytes for rows of {} bytes",
            fixed.len(),
            self.fixed_bytes
        );
        if !var.is_empty() {
            assert!(
                self.with_var,
                "variable-size part for a partition without them"
            );
            if var.len() > VAR_PART_BYTES_MAX {
                return Err(MemoryError::VarPartTooLarge {
                    bytes: var.len(),
                    bytes_max: VAR_PART_BYTES_MAX,
                });
            }
        }
        Ok(())
    }

    /// Inserts a committed row. On error nothing has changed.
    pub fn insert(
        &mut self,
        pool: &mut PagePool,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<RowId, MemoryError> {
        self.check_row(fixed, var)?;
        let page = self.with_free_slots.last();
        if page.is_none() && self.without_page.len() == 0 {
            self.check_fixed_pages(self.pages.len() as u32)?;
        }
        let var_page = self.var_page_for(var)?;
        let (fixed_pool, var_pool) = alloc_pages(pool, page.is_none(), var_page == Some(None))?;
        // Nothing fails from here on.
        let page = match (page, fixed_pool) {
            (Some(page), _) => page,
            (None, Some(p)) => {
                let page = self.without_page.last().unwrap_or(self.pages.len() as u32);
                self.install_fixed_page(page, p);
                page
            }
            (None, None) => unreachable!("a page was allocated"),
        };
        let slot = self.free_slot(page);
        let row = row_id(page, slot);
        self.take_slot(row);
        let var_ref = self.store_var(pool, var_page, var_pool, var);
        self.write_slot(pool, row, fixed, var_ref, FLAG_IN_USE);
        self.set_changed(row);
        Ok(row)
    }

    /// Inserts a row at a given row id, which must be free (restoring a
    /// checkpoint puts every row back where it was). On error nothing has
    /// changed. The row is *not* marked changed (it is in the checkpoint it
    /// came from); a caller putting back a row that is in no checkpoint
    /// (redo replay by row id) calls [`RowStore::mark_changed`] after.
    pub fn insert_at(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<(), MemoryError> {
        self.check_row(fixed, var)?;
        let page = row_page(row);
        assert!(
            row_slot(row) < self.slots_per_page,
            "{row:?}: slot beyond the {} of a page",
            self.slots_per_page
        );
        assert!(!self.is_live(row), "{row:?} is already in use");
        self.check_fixed_pages(page)?;
        let need_page = self
            .page_table
            .get(page as usize)
            .is_none_or(|&p| p == NO_POOL_PAGE);
        let var_page = self.var_page_for(var)?;
        let (fixed_pool, var_pool) = alloc_pages(pool, need_page, var_page == Some(None))?;
        if let Some(p) = fixed_pool {
            self.install_fixed_page(page, p);
        }
        self.take_slot(row);
        let var_ref = self.store_var(pool, var_page, var_pool, var);
        self.write_slot(pool, row, fixed, var_ref, FLAG_IN_USE);
        Ok(())
    }

    /// Replaces both parts of a live row; its row id stays. On error
    /// nothing has changed.
    pub fn update(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<(), MemoryError> {
        assert!(self.is_live(row), "update of {row:?}, which is not a row");
        self.check_row(fixed, var)?;
        let old = self.var_ref(pool, row);
        let new = if var.is_empty() {
            if old != VAR_REF_NONE {
                self.free_var(pool, old);
            }
            VAR_REF_NONE
        } else if old != VAR_REF_NONE && self.var_fits_in_place(pool, old, var.len()) {
            self.resize_var(pool, old, var);
            old
        } else {
            // The old page has no room (else the branch above): any page
            // found has room, and is another page.
            let var_page = self.var_page_for(var)?;
            let (_, var_pool) = alloc_pages(pool, false, var_page == Some(None))?;
            let new = self.store_var(pool, var_page, var_pool, var);
            if old != VAR_REF_NONE {
                self.free_var(pool, old);
            }
            new
        };
        let (page, at) = self.locate(row);
        let flags = pool.page(page)[at] & (FLAG_IN_USE | FLAG_UNCOMMITTED);
        self.write_slot(pool, row, fixed, new, flags);
        self.pages[row_page(row) as usize].changed = self.generation;
        self.set_changed(row);
        Ok(())
    }

    /// Deletes a live row; its slot (and variable-size space) is free for
    /// reuse.
    pub fn delete(&mut self, pool: &mut PagePool, row: RowId) {
        assert!(self.is_live(row), "delete of {row:?}, which is not a row");
        let old = self.var_ref(pool, row);
        if old != VAR_REF_NONE {
            self.free_var(pool, old);
        }
        let (pool_page, at) = self.locate(row);
        let was_uncommitted = pool.page(pool_page)[at] & FLAG_UNCOMMITTED != 0;
        pool.page_mut(pool_page)[at..at + self.slot_bytes].fill(0);
        let page = row_page(row);
        let slot = row_slot(row) as usize;
        let word = &mut self.slot_words[page as usize * self.words_per_page + slot / 64];
        let bit = 1u64 << (slot % 64);
        if word.changed & bit != 0 {
            self.changed_rows -= 1;
        }
        word.used &= !bit;
        word.changed &= !bit;
        self.rows -= 1;
        let meta = &mut self.pages[page as usize];
        meta.used -= 1;
        meta.uncommitted -= u32::from(was_uncommitted);
        meta.changed = self.generation;
        let others_with_room =
            self.with_free_slots.len() > usize::from(self.with_free_slots.contains(page));
        if meta.used == 0 && others_with_room {
            pool.free_page(pool_page);
            self.page_table[page as usize] = NO_POOL_PAGE;
            self.with_free_slots.remove(page);
            self.without_page.insert(page);
        } else {
            self.with_free_slots.insert(page);
        }
    }

    /// Marks a live row as an uncommitted insert, or as committed. Either
    /// way the row enters or leaves the committed state a checkpoint
    /// stands for, so it is marked changed.
    pub fn set_uncommitted(&mut self, pool: &mut PagePool, row: RowId, uncommitted: bool) {
        assert!(self.is_live(row), "{row:?} is not a row");
        let (page, at) = self.locate(row);
        let flags = &mut pool.page_mut(page)[at];
        let was = *flags & FLAG_UNCOMMITTED != 0;
        if uncommitted {
            *flags |= FLAG_UNCOMMITTED;
        } else {
            *flags &= !FLAG_UNCOMMITTED;
        }
        let meta = &mut self.pages[row_page(row) as usize];
        match (was, uncommitted) {
            (false, true) => meta.uncommitted += 1,
            (true, false) => meta.uncommitted -= 1,
            _ => {}
        }
        debug_assert!(meta.uncommitted <= meta.used);
        meta.changed = self.generation;
        self.set_changed(row);
    }

    /// Gives every page back to the pool (the partition is dropped).
    pub fn release(&mut self, pool: &mut PagePool) {
        for &p in self.page_table.iter().filter(|&&p| p != NO_POOL_PAGE) {
            pool.free_page(p);
        }
        for p in self.var_pages.iter().filter_map(|p| p.pool) {
            pool.free_page(p);
        }
        let (fixed_bytes, with_var) = (self.fixed_bytes, self.with_var);
        *self = RowStore::build(fixed_bytes, with_var);
    }

    // ----- fixed-size slots -----

    fn check_fixed_pages(&self, page: u32) -> Result<(), MemoryError> {
        if page >= FIXED_PAGES_MAX {
            return Err(MemoryError::FixedPagesExhausted {
                pages_max: FIXED_PAGES_MAX,
            });
        }
        Ok(())
    }

    /// Puts pool page `pool_page` at page index `page`, growing the
    /// directory if needed.
    fn install_fixed_page(&mut self, page: u32, pool_page: PageId) {
        while self.pages.len() <= page as usize {
            self.without_page.insert(self.pages.len() as u32);
            self.page_table.push(NO_POOL_PAGE);
            self.pages.push(FixedPage {
                used: 0,
                changed: 0,
                uncommitted: 0,
            });
            self.slot_words.resize(
                self.slot_words.len() + self.words_per_page,
                SlotWord::default(),
            );
        }
        let meta = &mut self.pages[page as usize];
        assert!(meta.used == 0 && meta.uncommitted == 0);
        assert_eq!(self.page_table[page as usize], NO_POOL_PAGE);
        assert_ne!(pool_page, NO_POOL_PAGE, "pool page ids stay below u32::MAX");
        self.page_table[page as usize] = pool_page;
        meta.changed = self.generation;
        self.without_page.remove(page);
        self.with_free_slots.insert(page);
    }

    /// The lowest free slot of a page that has one.
    fn free_slot(&self, page: u32) -> u32 {
        for (w, word) in self.page_words(page).iter().enumerate() {
            if word.used != u64::MAX {
                // Bits past the last slot are never set, so the lowest free
                // bit is a real slot whenever the page has a free slot.
                let slot = (w * 64) as u32 + (!word.used).trailing_zeros();
                assert!(slot < self.slots_per_page, "page {page} has no free slot");
                return slot;
            }
        }
        panic!("page {page} has no free slot");
    }

    fn take_slot(&mut self, row: RowId) {
        let page = row_page(row);
        let slot = row_slot(row) as usize;
        let word = &mut self.slot_words[page as usize * self.words_per_page + slot / 64];
        debug_assert!(
            word.used & (1 << (slot % 64)) == 0 && word.changed & (1 << (slot % 64)) == 0
        );
        word.used |= 1 << (slot % 64);
        self.rows += 1;
        let meta = &mut self.pages[page as usize];
        meta.used += 1;
        meta.changed = self.generation;
        if meta.used == self.slots_per_page {
            self.with_free_slots.remove(page);
        }
    }

    fn write_slot(&self, pool: &mut PagePool, row: RowId, fixed: &[u8], var_ref: u32, flags: u8) {
        let (page, at) = self.locate(row);
        let bytes = pool.page_mut(page);
        if self.with_var {
            let header = u32::from(flags) & FLAGS_MASK | var_ref << 2;
            bytes[at..at + 4].copy_from_slice(&header.to_le_bytes());
        } else {
            debug_assert_eq!(var_ref, VAR_REF_NONE);
            bytes[at] = flags;
        }
        let start = at + self.header_bytes;
        bytes[start..start + fixed.len()].copy_from_slice(fixed);
    }

    // ----- variable-size parts -----

    /// Where a new variable-size part of `var` would go: `None` for no part,
    /// `Some(Some(page))` for an existing page, `Some(None)` for a new page
    /// (the directory has room for one).
    fn var_page_for(&self, var: &[u8]) -> Result<Option<Option<u32>>, MemoryError> {
        if var.is_empty() {
            return Ok(None);
        }
        if let Some(page) = self.find_var_page(var.len() as u32) {
            return Ok(Some(Some(page)));
        }
        if self.var_without_page.is_empty() && self.var_pages.len() as u32 >= VAR_PAGES_MAX {
            return Err(MemoryError::VarPagesExhausted {
                pages_max: VAR_PAGES_MAX,
            });
        }
        Ok(Some(None))
    }

    /// A variable-size page with room for `len` bytes, if one is filed.
    fn find_var_page(&self, len: u32) -> Option<u32> {
        let start = (len / VAR_CLASS_BYTES).min(VAR_CLASSES - 1);
        if let Some(page) = self.var_classes[start as usize].last() {
            if self.var_pages[page as usize].usable_bytes() >= len {
                return Some(page);
            }
        }
        let above = self.var_class_mask.checked_shr(start + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let class = start + 1 + above.trailing_zeros();
        let page = self.var_classes[class as usize].last();
        debug_assert!(page.is_some_and(|p| self.var_pages[p as usize].usable_bytes() >= len));
        page
    }

    /// Takes a variable-size page out of its free-space class.
    fn unfile_var_page(&mut self, page: u32) {
        let meta = &mut self.var_pages[page as usize];
        if let Some(old) = meta.class.take() {
            let set = &mut self.var_classes[old as usize];
            set.remove(page);
            if set.len() == 0 {
                self.var_class_mask &= !(1u128 << old);
            }
        }
    }

    /// Files a variable-size page under the class its free space calls for.
    fn refile_var_page(&mut self, page: u32) {
        let wanted = self.var_pages[page as usize].wanted_class();
        if wanted == self.var_pages[page as usize].class {
            return;
        }
        self.unfile_var_page(page);
        if let Some(new) = wanted {
            self.var_classes[new as usize].insert(page);
            self.var_class_mask |= 1u128 << new;
        }
        self.var_pages[page as usize].class = wanted;
    }

    /// Stores a variable-size part where `var_page_for` said, in the page
    /// `var_pool` if a new one was needed. Returns the reference.
    fn store_var(
        &mut self,
        pool: &mut PagePool,
        var_page: Option<Option<u32>>,
        var_pool: Option<PageId>,
        var: &[u8],
    ) -> u32 {
        let page = match (var_page, var_pool) {
            (None, _) => return VAR_REF_NONE,
            (Some(Some(page)), None) => page,
            (Some(None), Some(p)) => {
                let meta = VarPage::new(p, self.generation);
                match self.var_without_page.pop() {
                    Some(page) => {
                        self.var_pages[page as usize] = meta;
                        page
                    }
                    None => {
                        self.var_pages.push(meta);
                        self.var_pages.len() as u32 - 1
                    }
                }
            }
            _ => unreachable!("a new variable-size page comes with a pool page"),
        };
        let meta = &mut self.var_pages[page as usize];
        let Some(pool_page) = meta.pool else {
            unreachable!("variable-size page {page} is filed but holds no page");
        };
        let entry = meta.alloc(pool.page_mut(pool_page), var, &mut self.scratch);
        meta.changed = self.generation;
        self.refile_var_page(page);
        page << VAR_ENTRY_BITS | entry
    }

    fn var_fits_in_place(&self, pool: &PagePool, var_ref: u32, len: usize) -> bool {
        let (page, entry) = split_var_ref(var_ref);
        let meta = &self.var_pages[page as usize];
        meta.pool
            .is_some_and(|p| meta.can_resize(pool.page(p), entry, len))
    }

    fn resize_var(&mut self, pool: &mut PagePool, var_ref: u32, var: &[u8]) {
        let (page, entry) = split_var_ref(var_ref);
        let meta = &mut self.var_pages[page as usize];
        let Some(pool_page) = meta.pool else {
            unreachable!("variable-size page {page} holds no page");
        };
        meta.resize(pool.page_mut(pool_page), entry, var, &mut self.scratch);
        meta.changed = self.generation;
        self.refile_var_page(page);
    }

    fn free_var(&mut self, pool: &mut PagePool, var_ref: u32) {
        let (page, entry) = split_var_ref(var_ref);
        let meta = &mut self.var_pages[page as usize];
        let Some(pool_page) = meta.pool else {
            unreachable!("variable-size page {page} holds no page");
        };
        let empty = meta.free(pool.page_mut(pool_page), entry);
        meta.changed = self.generation;
        if !empty {
            self.refile_var_page(page);
            return;
        }
        // An empty page goes back to the pool unless it is the only one
        // with room (then it is kept for the next part).
        self.unfile_var_page(page);
        if self.var_class_mask != 0 {
            pool.free_page(pool_page);
            self.var_pages[page as usize] = VarPage::empty_slot(self.generation);
            self.var_without_page.push(page);
        } else {
            self.refile_var_page(page);
        }
    }

    /// Checks every structure against every other (tests; O(pages · slots)).
    pub fn check_invariants(&self, pool: &PagePool) {
        let mut rows = 0u64;
        let mut changed = 0u64;
        assert_eq!(
            self.page_table.len(),
            self.pages.len(),
            "page table vs pages"
        );
        for (p, meta) in self.pages.iter().enumerate() {
            let words = self.page_words(p as u32);
            let used: u32 = words.iter().map(|w| w.used.count_ones()).sum();
            assert_eq!(used, meta.used, "page {p}: used count");
            assert!(
                words.iter().all(|w| w.changed & !w.used == 0),
                "page {p}: a free slot is marked changed"
            );
            changed += words
                .iter()
                .map(|w| u64::from(w.changed.count_ones()))
                .sum::<u64>();
            rows += u64::from(used);
            match self.pool_page(p as u32) {
                None => {
                    assert_eq!(used, 0, "page {p} without a pool page has rows");
                    assert!(self.without_page.contains(p as u32));
                }
                Some(pool_page) => {
                    assert!(!self.without_page.contains(p as u32));
                    assert_eq!(
                        self.with_free_slots.contains(p as u32),
                        used < self.slots_per_page,
                        "page {p}: free-slot list"
                    );
                    let bytes = pool.page(pool_page);
                    let mut uncommitted = 0u32;
                    for slot in 0..self.slots_per_page as usize {
                        let in_use = words[slot / 64].used & (1 << (slot % 64)) != 0;
                        let flags = bytes[slot * self.slot_bytes];
                        assert_eq!(flags & FLAG_IN_USE != 0, in_use, "page {p} slot {slot}");
                        uncommitted += u32::from(flags & FLAG_UNCOMMITTED != 0);
                    }
                    assert_eq!(uncommitted, meta.uncommitted, "page {p}: uncommitted count");
                }
            }
        }
        assert_eq!(rows, self.rows);
        assert_eq!(changed, self.changed_rows, "changed marks vs their count");
        let mut var_entries = 0u64;
        for (p, meta) in self.var_pages.iter().enumerate() {
            if meta.pool.is_some() {
                var_entries += u64::from(meta.live);
            }
            assert_eq!(meta.class, meta.wanted_class(), "var page {p}: class");
        }
        let with_var_part = self
            .rows()
            .filter(|&r| self.var_ref(pool, r) != VAR_REF_NONE)
            .count() as u64;
        assert_eq!(var_entries, with_var_part, "variable-size entries vs rows");
    }
}

#[cold]
#[inline(never)]
fn no_pool_page(row: RowId) -> ! {
    panic!("{row:?} is in a page that holds no rows");
}

#[inline]
fn split_var_ref(var_ref: u32) -> (u32, u32) {
    debug_assert_ne!(var_ref, VAR_REF_NONE);
    (
        var_ref >> VAR_ENTRY_BITS,
        var_ref & ((1 << VAR_ENTRY_BITS) - 1),
    )
}

/// Allocates the pages an operation needs, all or none.
fn alloc_pages(
    pool: &mut PagePool,
    fixed: bool,
    var: bool,
) -> Result<(Option<PageId>, Option<PageId>), MemoryError> {
    Ok(match (fixed, var) {
        (true, true) => {
            let (a, b) = pool.alloc_pages_2()?;
            (Some(a), Some(b))
        }
        (true, false) => (Some(pool.alloc_page()?), None),
        (false, true) => (None, Some(pool.alloc_page()?)),
        (false, false) => (None, None),
    })
}

/// Iterator over live rows (or live rows marked changed) in row id order;
/// see [`RowStore::rows`], [`RowStore::page_rows`] and
/// [`RowStore::page_changed_rows`].
#[derive(Debug, Clone)]
pub struct Rows<'a> {
    words: &'a [SlotWord],
    words_per_page: usize,
    first_page: u32,
    changed_only: bool,
    word: usize,
    current: u64,
}

/// Iterator over the rows of one page; see [`RowStore::page_rows`].
pub type PageRows<'a> = Rows<'a>;

impl<'a> Rows<'a> {
    fn new(
        words: &'a [SlotWord],
        words_per_page: usize,
        first_page: u32,
        changed_only: bool,
    ) -> Rows<'a> {
        let mut rows = Rows {
            words,
            words_per_page,
            first_page,
            changed_only,
            word: 0,
            current: 0,
        };
        rows.current = words.first().map_or(0, |w| rows.bits(w));
        rows
    }

    #[inline]
    fn bits(&self, word: &SlotWord) -> u64 {
        if self.changed_only {
            word.used & word.changed
        } else {
            word.used
        }
    }
}

impl Iterator for Rows<'_> {
    type Item = RowId;

    fn next(&mut self) -> Option<RowId> {
        while self.current == 0 {
            self.word += 1;
            self.current = self.bits(self.words.get(self.word)?);
        }
        let bit = self.current.trailing_zeros();
        self.current &= self.current - 1;
        let page = self.first_page + (self.word / self.words_per_page) as u32;
        let slot = (self.word % self.words_per_page) as u32 * 64 + bit;
        Some(row_id(page, slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: u32, len: usize) -> Vec<u8> {
        let mut bytes: Vec<u8> = (0..len).map(|i| (key as usize * 31 + i) as u8).collect();
        let n = len.min(4);
        bytes[..n].copy_from_slice(&key.to_le_bytes()[..n]);
        bytes
    }

    #[test]
    fn row_id_bit_split() {
        let r = row_id(5, 7);
        assert_eq!(r, RowId(5 << 12 | 7));
        assert_eq!((row_page(r), row_slot(r)), (5, 7));
        let last = row_id(FIXED_PAGES_MAX - 1, (1 << ROW_SLOT_BITS) - 1);
        assert!(last.0 < u32::MAX - 1, "markers are never row ids");
    }

    #[test]
    fn slot_layout_for_104_byte_rows() {
        let store = RowStore::new(104);
        assert_eq!(store.slot_bytes(), 105);
        assert_eq!(store.slots_per_page(), 312);
        let store = RowStore::with_var_parts(104);
        assert_eq!(store.slot_bytes(), 108);
        let tiny = RowStore::new(1);
        assert_eq!(tiny.slot_bytes(), FIXED_SLOT_BYTES_MIN);
        assert_eq!(tiny.slots_per_page(), 4096);
    }

    #[test]
    fn exact_budget_insert_fails_cleanly_delete_frees() {
        let mut pool = PagePool::new(2);
        let mut store = RowStore::new(104);
        let mut ids = Vec::new();
        for key in 0..624 {
            ids.push(store.insert(&mut pool, &row(key, 104), &[]).unwrap());
        }
        assert_eq!(pool.used_bytes(), pool.budget_bytes());
        let err = store.insert(&mut pool, &row(9999, 104), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "table is full: DataMemory exhausted (65536 bytes)"
        );
        assert_eq!(store.row_count(), 624);
        store.check_invariants(&pool);
        for (key, &id) in ids.iter().enumerate() {
            assert_eq!(store.fixed(&pool, id), &row(key as u32, 104)[..]);
        }
        store.delete(&mut pool, ids[300]);
        let again = store.insert(&mut pool, &row(7777, 104), &[]).unwrap();
        assert_eq!(again, ids[300], "the freed slot is reused");
        assert_eq!(store.fixed(&pool, again), &row(7777, 104)[..]);
        store.check_invariants(&pool);
    }

    #[test]
    fn var_parts_grow_shrink_move_and_keep_row_id() {
        let mut pool = PagePool::new(16);
        let mut store = RowStore::with_var_parts(20);
        let a = store.insert(&mut pool, &row(1, 20), &row(100, 50)).unwrap();
        let b = store.insert(&mut pool, &row(2, 20), &[]).unwrap();
        assert_eq!(store.var(&pool, b), &[] as &[u8]);
        // Grow a beyond what its page has room for next to a 30000-byte part.
        let big = row(3, 30_000);
        store.update(&mut pool, b, &row(2, 20), &big).unwrap();
        store
            .update(&mut pool, a, &row(1, 20), &row(101, 20_000))
            .unwrap();
        assert_eq!(store.var(&pool, a), &row(101, 20_000)[..]);
        assert_eq!(store.var(&pool, b), &big[..]);
        store
            .update(&mut pool, a, &row(11, 20), &row(102, 10))
            .unwrap();
        assert_eq!(store.var(&pool, a), &row(102, 10)[..]);
        assert_eq!(store.fixed(&pool, a), &row(11, 20)[..]);
        store.update(&mut pool, b, &row(2, 20), &[]).unwrap();
        assert_eq!(store.var(&pool, b), &[] as &[u8]);
        store.check_invariants(&pool);
        let too_big = vec![0u8; VAR_PART_BYTES_MAX + 1];
        assert!(matches!(
            store.update(&mut pool, a, &row(1, 20), &too_big),
            Err(MemoryError::VarPartTooLarge { .. })
        ));
        assert_eq!(store.var(&pool, a), &row(102, 10)[..]);
        store.delete(&mut pool, a);
        store.delete(&mut pool, b);
        store.check_invariants(&pool);
        assert_eq!(store.row_count(), 0);
        assert!(store.memory_bytes() <= 2 * PAGE_BYTES as u64);
    }

    #[test]
    fn delete_then_insert_does_not_grow() {
        let mut pool = PagePool::new(64);
        let mut store = RowStore::with_var_parts(30);
        let mut ids = Vec::new();
        for key in 0..2000 {
            let var = row(key, 1 + (key as usize * 7) % 300);
            ids.push(store.insert(&mut pool, &row(key, 30), &var).unwrap());
        }
        let used = pool.used_bytes();
        for round in 0..3 {
            for id in ids.iter_mut().step_by(2) {
                store.delete(&mut pool, *id);
            }
            for (i, id) in ids.iter_mut().enumerate().step_by(2) {
                let var = row(i as u32 + round, 1 + (i * 13 + round as usize) % 300);
                *id = store.insert(&mut pool, &row(i as u32, 30), &var).unwrap();
            }
            store.check_invariants(&pool);
            assert!(pool.used_bytes() <= used, "round {round}: pages grew");
        }
    }

    #[test]
    fn empty_pages_go_back_to_the_pool() {
        let mut pool = PagePool::new(64);
        let mut store = RowStore::new(104);
        let ids: Vec<RowId> = (0..312 * 5)
            .map(|k| store.insert(&mut pool, &row(k, 104), &[]).unwrap())
            .collect();
        assert_eq!(pool.used_pages(), 5);
        for &id in &ids {
            store.delete(&mut pool, id);
        }
        assert_eq!(
            pool.used_pages(),
            1,
            "one empty page is kept for the next insert"
        );
        store.check_invariants(&pool);
        store.release(&mut pool);
        assert_eq!(pool.used_pages(), 0);
    }

    #[test]
    fn dirty_pages_since_checkpoint() {
        let mut pool = PagePool::new(64);
        let mut store = RowStore::with_var_parts(100);
        let ids: Vec<RowId> = (0..300 * 3)
            .map(|k| store.insert(&mut pool, &row(k, 100), &[]).unwrap())
            .collect();
        assert_eq!(store.changed_pages_since(0).count(), 3);
        let first = store.mark_checkpoint();
        assert_eq!(store.changed_pages_since(first).count(), 0);
        // Update in page 1, delete in page 2, flag change in page 0.
        let in_page = |p: u32| ids.iter().copied().filter(move |&r| row_page(r) == p);
        let r1 = in_page(1).nth(3).unwrap();
        store
            .update(&mut pool, r1, &row(5, 100), &row(6, 700))
            .unwrap();
        let r2 = in_page(2).nth(10).unwrap();
        store.delete(&mut pool, r2);
        assert_eq!(store.changed_pages_since(first).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            store.changed_var_pages_since(first).collect::<Vec<_>>(),
            [0]
        );
        assert!(
            !store.page_rows(2).any(|r| r == r2),
            "the deleted row is absent"
        );
        assert_eq!(store.page_rows(2).count(), in_page(2).count() - 1);
        let second = store.mark_checkpoint();
        let r0 = in_page(0).next().unwrap();
        store.set_uncommitted(&mut pool, r0, true);
        assert!(store.is_uncommitted(&pool, r0));
        assert_eq!(store.changed_pages_since(second).collect::<Vec<_>>(), [0]);
        assert_eq!(
            store.changed_pages_since(first).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(store.changed_var_pages_since(second).count(), 0);
        // Rows iterate in row id order.
        let all: Vec<RowId> = store.rows().collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(all.len(), ids.len() - 1);
    }

    #[test]
    fn changed_marks_per_row() {
        let mut pool = PagePool::new(16);
        let mut store = RowStore::with_var_parts(40);
        let ids: Vec<RowId> = (0..100)
            .map(|k| store.insert(&mut pool, &row(k, 40), &row(k, 10)).unwrap())
            .collect();
        assert_eq!(store.changed_rows(), 100, "inserts are marked");
        assert!(store.page_changed_rows(0).eq(ids.iter().copied()));
        for &id in &ids {
            store.clear_changed(id);
        }
        store.clear_changed(ids[0]);
        assert_eq!(store.changed_rows(), 0);
        assert_eq!(store.page_changed_rows(0).count(), 0);
        store
            .update(&mut pool, ids[7], &row(7, 40), &row(8, 300))
            .unwrap();
        store.delete(&mut pool, ids[9]);
        store.set_uncommitted(&mut pool, ids[11], true);
        assert!(store.page_changed_rows(0).eq([ids[7], ids[11]]));
        assert_eq!(
            store.changed_rows(),
            2,
            "a deleted row takes its mark along"
        );
        // The committed slots: live, less the uncommitted insert.
        let mut bits = Vec::new();
        store.committed_slots(&pool, 0, &mut bits);
        assert_eq!(bits.len(), store.slots_per_page().div_ceil(64) as usize);
        let committed: Vec<u32> = (0..store.slots_per_page())
            .filter(|&s| bits[s as usize / 64] & (1 << (s % 64)) != 0)
            .collect();
        let expected: Vec<u32> = ids
            .iter()
            .filter(|&&r| r != ids[9] && r != ids[11])
            .map(|&r| row_slot(r))
            .collect();
        assert_eq!(committed, expected);
        store.committed_slots(&pool, 5, &mut bits);
        assert!(bits.iter().all(|&w| w == 0), "a page beyond the last");
        store.check_invariants(&pool);
        // Reuse of the deleted slot: a new row, marked.
        let again = store.insert(&mut pool, &row(99, 40), &[]).unwrap();
        assert_eq!(again, ids[9]);
        assert!(store.is_changed(again));
        store.delete(&mut pool, ids[11]);
        store.check_invariants(&pool);
        // A restored row is not marked; mark_changed marks it and stamps
        // its page.
        let generation = store.mark_checkpoint();
        let restored = row_id(2, 5);
        store
            .insert_at(&mut pool, restored, &row(5, 40), &[])
            .unwrap();
        assert!(!store.is_changed(restored));
        let generation2 = store.mark_checkpoint();
        assert_eq!(store.changed_pages_since(generation2).count(), 0);
        store.mark_changed(restored);
        assert!(store.is_changed(restored));
        assert_eq!(
            store.changed_pages_since(generation2).collect::<Vec<_>>(),
            [2]
        );
        assert_eq!(
            store.changed_pages_since(generation).collect::<Vec<_>>(),
            [2]
        );
        store.check_invariants(&pool);
    }

    #[test]
    fn insert_at_restores_row_ids() {
        let mut pool = PagePool::new(16);
        let mut store = RowStore::with_var_parts(40);
        let target = row_id(3, 17);
        store
            .insert_at(&mut pool, target, &row(1, 40), &row(2, 90))
            .unwrap();
        assert!(store.is_live(target));
        assert_eq!(store.var(&pool, target), &row(2, 90)[..]);
        assert_eq!(store.page_count(), 4);
        let next = store.insert(&mut pool, &row(3, 40), &[]).unwrap();
        assert_eq!(
            row_page(next),
            3,
            "free slots of the restored page are used first"
        );
        store.check_invariants(&pool);
        assert_eq!(store.rows().collect::<Vec<_>>(), [row_id(3, 0), target]);
    }
}
