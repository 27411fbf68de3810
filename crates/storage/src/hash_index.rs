//! The primary-key hash index of one partition (NDB: DBACC), by linear
//! hashing.
//!
//! Why linear hashing: the index grows and shrinks one bucket at a time as
//! rows come and go, so no insert ever pays for rehashing the whole table
//! (a stop-the-world rehash of millions of entries would stall the LDM
//! thread for tens of milliseconds), and memory follows the row count.
//!
//! # Entries and buckets
//!
//! An entry is 8 bytes: the low 32 bits of the row's 64-bit hash (the
//! *fragment*) and the [`RowId`]. Buckets are 64 bytes, one cache line, 512 to
//! a pool page, and hold 8 entries stored as two arrays: fragments in bytes
//! 0–31, row ids in bytes 32–63 (all `u32` LE), so a lookup compares eight
//! fragments in one line and reads the row only on a fragment match.
//! Entries are packed from slot 0; an unused slot has row id `EMPTY`
//! (`u32::MAX`).
//!
//! A full bucket that needs a ninth entry gets an *overflow bucket* (same
//! 64-byte layout, from pages of overflow buckets): its slot 7 becomes a
//! link — row id `LINK` (`u32::MAX − 1`), fragment = overflow bucket number
//! — and holds 7 entries. A chain is always as short as its entries allow:
//! every bucket but the last holds 7 entries and a link, and a last
//! overflow bucket holds 2 to 8 (removing down to 1 folds it back into the
//! link slot). The row store never hands out `u32::MAX` or `u32::MAX − 1` as
//! row ids ([`crate::memory::FIXED_PAGES_MAX`]).
//!
//! # Addressing
//!
//! The partition of a row is `(hash >> 32) % partitions`
//! (`schema::partition_of`), which depends only on the hash's high bits; the
//! bucket is chosen from the low 32 bits only, so rows of one partition
//! still spread over all buckets. With `N` buckets and level `L` (`2^L ≤ N < 2^(L+1)`), the bucket
//! of fragment `h` is `h mod 2^(L+1)`, or `h mod 2^L` when that is `≥ N`
//! (the classic scheme of Litwin's linear hashing). Because the fragment
//! holds the addressing bits, a split or merge moves entries without
//! reading rows. The fragment also filters: only entries whose 32 bits
//! equal the key's reach `is_match` (at 1M rows, ~15 of those bits are not
//! already implied by the bucket, so about one false candidate in 30,000
//! entries compared).
//!
//! # Growth and shrinkage
//!
//! After an insert that puts the load above [`LOAD_SPLIT_PERCENT`] of
//! 8 entries per bucket, bucket `N − 2^L` is split into itself and new
//! bucket `N`; after a remove that leaves the load below
//! [`LOAD_MERGE_PERCENT`] (counted as if one bucket fewer, so that a split
//! is not undone by the next remove), bucket `N − 1` is merged back into its
//! buddy. One split or merge per operation, so the work per operation is
//! bounded by a chain length. A split needs one new bucket (sometimes a new
//! page); a merge may need a few overflow buckets. When memory is short,
//! the split or merge is skipped (and tried again by the next operation):
//! lookups stay correct, chains just grow.
//!
//! # Memory
//!
//! Every byte of the index is in pool pages, so it counts against
//! `DataMemory`. At 80% load a bucket holds 6.4 entries on average: 10 bytes
//! per entry in primary buckets, plus overflow buckets, mostly for the
//! not-yet-split buckets (which hold twice the average). Measured at
//! 1,000,000 entries: 12.5 bytes per entry (test `memory_goal`).
//!
//! # Speed
//!
//! A lookup reads one bucket line (two when it overflows, ~20% of lookups
//! at 1M entries, ~16% at 10M) and, through `is_match`, the row: two cache
//! misses, the second depending on the first, each with a TLB miss at
//! millions of rows. A caller with a batch of keys can overlap the misses
//! of several lookups: [`HashIndex::prefetch`] starts loading the primary
//! bucket, and [`HashIndex::probe`] (then [`HashIndex::probe_overflow`])
//! reads it once it has arrived and names what to load next, the candidate
//! row (for `RowStore::prefetch`) or the overflow bucket (prefetched), or
//! says that no row has the hash.

use crate::memory::{prefetch, IndexSet, MemoryError, PageId, PagePool, PAGE_BYTES};
use crate::RowId;

/// Bytes of one bucket: one cache line.
pub const BUCKET_BYTES: usize = 64;

/// Entries per bucket.
pub const BUCKET_ENTRIES: usize = 8;

/// Buckets per pool page.
const BUCKETS_PER_PAGE: u32 = (PAGE_BYTES / BUCKET_BYTES) as u32;

const BUCKET_PAGE_SHIFT: u32 = BUCKETS_PER_PAGE.trailing_zeros();

/// Split when the entries exceed this percentage of bucket capacity.
pub const LOAD_SPLIT_PERCENT: u64 = 80;

/// Merge when the entries fall below this percentage of the capacity of
/// one bucket fewer.
pub const LOAD_MERGE_PERCENT: u64 = 50;

/// Most primary buckets (2^21 pages, 64 GiB of buckets): the level stays
/// below 31, so addresses fit the 32-bit fragment.
pub const BUCKETS_MAX: u32 = 1 << 30;

/// Most pages of overflow buckets: overflow bucket numbers fit in `u32`.
const OVERFLOW_PAGES_MAX: u32 = 1 << (32 - BUCKET_PAGE_SHIFT);

/// Row id of an unused slot.
const EMPTY: u32 = u32::MAX;

/// Row id of a link slot (slot 7 of a bucket with an overflow bucket).
const LINK: u32 = u32::MAX - 1;

const ROWS_AT: usize = BUCKET_ENTRIES * 4;
const LAST: usize = BUCKET_ENTRIES - 1;

const _: () = assert!(BUCKET_ENTRIES * 8 == BUCKET_BYTES);
const _: () = assert!(PAGE_BYTES.is_multiple_of(BUCKET_BYTES));

/// Where a bucket is: pool page and byte offset.
type Loc = (PageId, usize);

/// The part of the 64-bit hash that the index stores and addresses by.
#[inline]
fn fragment(hash: u64) -> u32 {
    hash as u32
}

#[inline]
fn read(page: &[u8; PAGE_BYTES], at: usize) -> u32 {
    u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]])
}

/// The 64 bytes of the bucket at `at`.
#[inline]
fn bucket(page: &[u8; PAGE_BYTES], at: usize) -> &[u8; BUCKET_BYTES] {
    page[at..]
        .first_chunk()
        .expect("buckets lie inside their page")
}

#[inline]
fn read_at(bucket: &[u8; BUCKET_BYTES], at: usize) -> u32 {
    u32::from_le_bytes([bucket[at], bucket[at + 1], bucket[at + 2], bucket[at + 3]])
}

#[inline]
fn write(page: &mut [u8; PAGE_BYTES], at: usize, v: u32) {
    page[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn entry(page: &[u8; PAGE_BYTES], at: usize, i: usize) -> (u32, u32) {
    (read(page, at + 4 * i), read(page, at + ROWS_AT + 4 * i))
}

#[inline]
fn set_entry(page: &mut [u8; PAGE_BYTES], at: usize, i: usize, (frag, row): (u32, u32)) {
    write(page, at + 4 * i, frag);
    write(page, at + ROWS_AT + 4 * i, row);
}

/// The entries of `bucket` whose fragment is `h`, as a bit mask of slots
/// (row ids, never the link or an empty slot), and the overflow bucket it
/// links to, if any.
///
/// A mask instead of a branch per slot: where in the bucket a key sits is
/// random, so per-slot branches would mispredict and stop the CPU from
/// overlapping the memory accesses of consecutive lookups.
#[inline(always)]
fn fragment_matches(bucket: &[u8; BUCKET_BYTES], h: u32) -> (u32, Option<u32>) {
    let (mut matches, empty) = slot_masks(bucket, h);
    let link_row = read_at(bucket, ROWS_AT + 4 * LAST);
    let link = (link_row == LINK).then(|| read_at(bucket, 4 * LAST));
    if link.is_some() {
        matches &= (1 << LAST) - 1;
    }
    (matches & !empty, link)
}

/// The slots of `bucket` whose fragment is `h`, and those whose row id is
/// `EMPTY`, as bit masks: four compares of four slots at once (SSE2, part
/// of the x86-64 baseline), the bucket's line read once.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn slot_masks(bucket: &[u8; BUCKET_BYTES], h: u32) -> (u32, u32) {
    use std::arch::x86_64::{
        __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_ps,
        _mm_set1_epi32,
    };
    const _: () = assert!(BUCKET_ENTRIES == 8 && ROWS_AT == 32);
    let lane = |at: usize| -> __m128i {
        let bytes: &[u8; 16] = bucket[at..]
            .first_chunk()
            .expect("a lane lies inside its bucket");
        // SAFETY: an unaligned load of the 16 bytes `bytes` borrows.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    };
    // Four u32 LE slots per lane; a lane compare is one bit per slot.
    // SAFETY: SSE2, which these need, is part of the x86_64 baseline; they
    // touch no memory.
    let mask = |lane: __m128i, v: u32| unsafe {
        _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(
            lane,
            _mm_set1_epi32(v as i32),
        ))) as u32
    };
    let matches = mask(lane(0), h) | mask(lane(16), h) << 4;
    let empty = mask(lane(ROWS_AT), EMPTY) | mask(lane(ROWS_AT + 16), EMPTY) << 4;
    (matches, empty)
}

/// [`slot_masks`] slot by slot, where SSE2 is not at hand.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn slot_masks(bucket: &[u8; BUCKET_BYTES], h: u32) -> (u32, u32) {
    let mut matches = 0u32;
    let mut empty = 0u32;
    for i in 0..BUCKET_ENTRIES {
        matches |= u32::from(read_at(bucket, 4 * i) == h) << i;
        empty |= u32::from(read_at(bucket, ROWS_AT + 4 * i) == EMPTY) << i;
    }
    (matches, empty)
}

/// An overflow bucket, as [`Probe::Overflow`] names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OverflowBucket(u32);

/// What one bucket of a chain says about a hash: [`HashIndex::probe`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The first entry of the bucket with the hash's fragment: the row of
    /// the key, unless another key has the same fragment (the caller
    /// compares keys, and on a mismatch falls back to `find`).
    Row(RowId),
    /// No entry of the bucket has the fragment; the chain goes on in this
    /// overflow bucket, which has started loading into the cache.
    Overflow(OverflowBucket),
    /// No entry of the rest of the chain has the fragment: no row has the
    /// hash.
    Absent,
}

/// Overflow buckets needed by a chain of `entries`.
fn overflow_needed(entries: usize) -> usize {
    entries
        .saturating_sub(BUCKET_ENTRIES)
        .div_ceil(BUCKET_ENTRIES - 1)
}

/// Bookkeeping of one page of overflow buckets.
#[derive(Debug, Clone)]
struct OverflowPage {
    pool: Option<PageId>,
    used: u32,
    used_bits: [u64; BUCKETS_PER_PAGE as usize / 64],
}

/// The hash index of one partition. See the module documentation.
#[derive(Debug)]
pub struct HashIndex {
    len: u64,
    /// `N`: primary buckets.
    buckets: u32,
    /// `L`: `2^L ≤ N < 2^(L+1)`.
    level: u32,
    /// Pool pages of primary buckets, 512 buckets each; empty until the
    /// first insert.
    primary_pages: Vec<PageId>,
    overflow_pages: Vec<OverflowPage>,
    /// Overflow pages with a pool page and a free bucket.
    overflow_with_free: IndexSet,
    /// Overflow page indexes without a pool page.
    overflow_without_page: Vec<u32>,
    overflow_buckets: u64,
    /// Reused by splits and merges.
    scratch_entries: Vec<(u32, u32)>,
    scratch_moved: Vec<(u32, u32)>,
    scratch_buckets: Vec<u32>,
}

impl Default for HashIndex {
    fn default() -> Self {
        HashIndex::new()
    }
}

impl HashIndex {
    /// An empty index; it takes its first page on the first insert.
    pub fn new() -> HashIndex {
        HashIndex {
            len: 0,
            buckets: 1,
            level: 0,
            primary_pages: Vec::new(),
            overflow_pages: Vec::new(),
            overflow_with_free: IndexSet::default(),
            overflow_without_page: Vec::new(),
            overflow_buckets: 0,
            scratch_entries: Vec::new(),
            scratch_moved: Vec::new(),
            scratch_buckets: Vec::new(),
        }
    }

    /// Entries in the index.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Primary buckets (`N`).
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Overflow buckets in use.
    pub fn overflow_buckets(&self) -> u64 {
        self.overflow_buckets
    }

    /// Pool bytes held by the index.
    pub fn memory_bytes(&self) -> u64 {
        let overflow = self.overflow_pages.len() - self.overflow_without_page.len();
        (self.primary_pages.len() + overflow) as u64 * PAGE_BYTES as u64
    }

    /// The primary bucket of fragment `h`.
    #[inline]
    fn address(&self, h: u32) -> u32 {
        let high = ((2u64 << self.level) - 1) as u32;
        let a = h & high;
        if a < self.buckets {
            a
        } else {
            h & (high >> 1)
        }
    }

    #[inline]
    fn primary_loc(&self, bucket: u32) -> Loc {
        (
            self.primary_pages[(bucket >> BUCKET_PAGE_SHIFT) as usize],
            (bucket & (BUCKETS_PER_PAGE - 1)) as usize * BUCKET_BYTES,
        )
    }

    #[inline]
    fn overflow_loc(&self, overflow: u32) -> Loc {
        let page = &self.overflow_pages[(overflow >> BUCKET_PAGE_SHIFT) as usize];
        let Some(pool_page) = page.pool else {
            panic!("overflow bucket {overflow} is in a released page");
        };
        (
            pool_page,
            (overflow & (BUCKETS_PER_PAGE - 1)) as usize * BUCKET_BYTES,
        )
    }

    /// The row whose hash is `hash` and for which `is_match` says yes (the
    /// caller compares the key). `is_match` sees only rows whose stored
    /// fragment equals the key's.
    #[inline]
    pub fn find(
        &self,
        pool: &PagePool,
        hash: u64,
        mut is_match: impl FnMut(RowId) -> bool,
    ) -> Option<RowId> {
        if self.primary_pages.is_empty() {
            return None;
        }
        let h = fragment(hash);
        let (mut page, mut at) = self.primary_loc(self.address(h));
        loop {
            let bucket = bucket(pool.page(page), at);
            let (mut matches, link) = fragment_matches(bucket, h);
            while matches != 0 {
                let i = matches.trailing_zeros() as usize;
                matches &= matches - 1;
                let row = read_at(bucket, ROWS_AT + 4 * i);
                if is_match(RowId(row)) {
                    return Some(RowId(row));
                }
            }
            // The end of the chain: no row has this key.
            (page, at) = self.overflow_loc(link?);
        }
    }

    /// Starts loading the primary bucket of `hash` into the cache. A
    /// caller looking up a batch of keys calls it a few keys ahead, so that
    /// the cache misses of several lookups overlap instead of following one
    /// another.
    #[inline]
    pub fn prefetch(&self, pool: &PagePool, hash: u64) {
        if !self.primary_pages.is_empty() {
            let (page, at) = self.primary_loc(self.address(fragment(hash)));
            prefetch(&pool.page(page)[at..]);
        }
    }

    /// The first row of `hash`'s primary bucket whose fragment matches, if
    /// any, without asking the caller: for prefetching that row. Usually
    /// the row that `find` will return. When the primary bucket has no
    /// such entry but an overflow bucket, that bucket starts loading into
    /// the cache instead (`find` will read it). [`HashIndex::probe`] says
    /// more.
    #[inline]
    pub fn candidate(&self, pool: &PagePool, hash: u64) -> Option<RowId> {
        match self.probe(pool, hash) {
            Probe::Row(row) => Some(row),
            Probe::Overflow(_) | Probe::Absent => None,
        }
    }

    /// The first row of `hash`'s primary bucket whose fragment matches, or
    /// where the search goes on: the step of batched lookups after
    /// [`HashIndex::prefetch`] (the bucket should be in cache by now), so
    /// that the row, or the overflow bucket, can be prefetched in turn.
    /// [`Probe::Absent`] is final: `find` would find no row.
    #[inline]
    pub fn probe(&self, pool: &PagePool, hash: u64) -> Probe {
        if self.primary_pages.is_empty() {
            return Probe::Absent;
        }
        let h = fragment(hash);
        self.probe_bucket(pool, h, self.primary_loc(self.address(h)))
    }

    /// [`HashIndex::probe`] of the overflow bucket a probe named.
    #[inline]
    pub fn probe_overflow(&self, pool: &PagePool, hash: u64, overflow: OverflowBucket) -> Probe {
        self.probe_bucket(pool, fragment(hash), self.overflow_loc(overflow.0))
    }

    #[inline(always)]
    fn probe_bucket(&self, pool: &PagePool, h: u32, (page, at): Loc) -> Probe {
        let bucket = bucket(pool.page(page), at);
        let (matches, link) = fragment_matches(bucket, h);
        if matches != 0 {
            let i = matches.trailing_zeros() as usize;
            return Probe::Row(RowId(read_at(bucket, ROWS_AT + 4 * i)));
        }
        match link {
            Some(overflow) => {
                let (page, at) = self.overflow_loc(overflow);
                prefetch(&pool.page(page)[at..]);
                Probe::Overflow(OverflowBucket(overflow))
            }
            None => Probe::Absent,
        }
    }

    /// Adds an entry. On error (no memory for an overflow bucket) nothing
    /// has changed.
    pub fn insert(
        &mut self,
        pool: &mut PagePool,
        hash: u64,
        row: RowId,
    ) -> Result<(), MemoryError> {
        debug_assert!(row.0 < LINK, "{row:?} is a marker, not a row id");
        if self.primary_pages.is_empty() {
            let page = pool.alloc_page()?;
            self.primary_pages.push(page);
            self.write_chain(pool, 0, &[], &mut Vec::new());
        }
        let h = fragment(hash);
        let (tail, count, _) = self.chain_tail(pool, self.primary_loc(self.address(h)));
        if count < BUCKET_ENTRIES {
            set_entry(pool.page_mut(tail.0), tail.1, count, (h, row.0));
        } else {
            let overflow = self.alloc_overflow(pool)?;
            let (page, at) = self.overflow_loc(overflow);
            let moved = entry(pool.page(tail.0), tail.1, LAST);
            let bytes = pool.page_mut(page);
            set_entry(bytes, at, 0, moved);
            set_entry(bytes, at, 1, (h, row.0));
            for i in 2..BUCKET_ENTRIES {
                set_entry(bytes, at, i, (0, EMPTY));
            }
            set_entry(pool.page_mut(tail.0), tail.1, LAST, (overflow, LINK));
        }
        self.len += 1;
        if self.len * 100 > u64::from(self.buckets) * BUCKET_ENTRIES as u64 * LOAD_SPLIT_PERCENT {
            // Without memory for the split, the index stays as it is and the
            // next insert tries again.
            let _ = self.split(pool);
        }
        Ok(())
    }

    /// Removes the entry `(hash, row)`. Returns whether it was there.
    pub fn remove(&mut self, pool: &mut PagePool, hash: u64, row: RowId) -> bool {
        if self.primary_pages.is_empty() {
            return false;
        }
        let h = fragment(hash);
        let mut loc = self.primary_loc(self.address(h));
        let mut found = None;
        let mut prev = None;
        let mut tail_overflow = None;
        let count = loop {
            let bytes = pool.page(loc.0);
            let (link_frag, link_row) = entry(bytes, loc.1, LAST);
            let limit = if link_row == LINK {
                LAST
            } else {
                BUCKET_ENTRIES
            };
            let mut count = limit;
            for i in 0..limit {
                let (frag, r) = entry(bytes, loc.1, i);
                if r == EMPTY {
                    count = i;
                    break;
                }
                if r == row.0 && frag == h {
                    found = Some((loc, i));
                }
            }
            if link_row != LINK {
                break count;
            }
            prev = Some(loc);
            tail_overflow = Some(link_frag);
            loc = self.overflow_loc(link_frag);
        };
        let Some((hole, hole_slot)) = found else {
            return false;
        };
        // Fill the hole with the chain's last entry.
        let last = count - 1;
        let moved = entry(pool.page(loc.0), loc.1, last);
        if (hole, hole_slot) != (loc, last) {
            set_entry(pool.page_mut(hole.0), hole.1, hole_slot, moved);
        }
        set_entry(pool.page_mut(loc.0), loc.1, last, (0, EMPTY));
        if let (Some(prev), Some(overflow)) = (prev, tail_overflow) {
            debug_assert!(count >= 2, "an overflow tail holds at least 2 entries");
            if last == 1 {
                // One entry left in the overflow tail: it goes back into the
                // link slot and the bucket is freed.
                let only = entry(pool.page(loc.0), loc.1, 0);
                set_entry(pool.page_mut(prev.0), prev.1, LAST, only);
                self.free_overflow(pool, overflow);
            }
        }
        self.len -= 1;
        if self.buckets > 1
            && self.len * 100
                < u64::from(self.buckets - 1) * BUCKET_ENTRIES as u64 * LOAD_MERGE_PERCENT
        {
            // Without memory for the merge, the index stays as it is.
            let _ = self.merge(pool);
        }
        true
    }

    /// Gives every page back to the pool (the partition is dropped).
    pub fn release(&mut self, pool: &mut PagePool) {
        for &page in &self.primary_pages {
            pool.free_page(page);
        }
        for page in self.overflow_pages.iter().filter_map(|p| p.pool) {
            pool.free_page(page);
        }
        *self = HashIndex::new();
    }

    /// The last bucket of the chain starting at `first`, its entry count,
    /// and its overflow number if it is an overflow bucket.
    fn chain_tail(&self, pool: &PagePool, first: Loc) -> (Loc, usize, Option<u32>) {
        let mut loc = first;
        let mut overflow = None;
        loop {
            let bytes = pool.page(loc.0);
            let (frag, row) = entry(bytes, loc.1, LAST);
            if row == LINK {
                overflow = Some(frag);
                loc = self.overflow_loc(frag);
                continue;
            }
            let count = (0..BUCKET_ENTRIES)
                .find(|&i| read(bytes, loc.1 + ROWS_AT + 4 * i) == EMPTY)
                .unwrap_or(BUCKET_ENTRIES);
            return (loc, count, overflow);
        }
    }

    /// Appends the entries of bucket `bucket`'s chain to `entries` and its
    /// overflow buckets to `overflow`.
    fn gather(
        &self,
        pool: &PagePool,
        bucket: u32,
        entries: &mut Vec<(u32, u32)>,
        overflow: &mut Vec<u32>,
    ) {
        let mut loc = self.primary_loc(bucket);
        loop {
            let bytes = pool.page(loc.0);
            for i in 0..BUCKET_ENTRIES {
                let e = entry(bytes, loc.1, i);
                if e.1 == EMPTY {
                    return;
                }
                if e.1 == LINK {
                    overflow.push(e.0);
                    loc = self.overflow_loc(e.0);
                    break;
                }
                entries.push(e);
                if i == LAST {
                    return;
                }
            }
        }
    }

    /// Writes `entries` as the chain of bucket `bucket`, taking overflow
    /// buckets from `spare` (which has enough).
    fn write_chain(
        &self,
        pool: &mut PagePool,
        bucket: u32,
        entries: &[(u32, u32)],
        spare: &mut Vec<u32>,
    ) {
        let mut loc = self.primary_loc(bucket);
        let mut rest = entries;
        loop {
            let bytes = pool.page_mut(loc.0);
            if rest.len() <= BUCKET_ENTRIES {
                for i in 0..BUCKET_ENTRIES {
                    set_entry(bytes, loc.1, i, rest.get(i).copied().unwrap_or((0, EMPTY)));
                }
                return;
            }
            for (i, &e) in rest[..LAST].iter().enumerate() {
                set_entry(bytes, loc.1, i, e);
            }
            let overflow = spare
                .pop()
                .expect("a chain is written with enough overflow buckets");
            set_entry(bytes, loc.1, LAST, (overflow, LINK));
            loc = self.overflow_loc(overflow);
            rest = &rest[LAST..];
        }
    }

    /// Splits bucket `N − 2^L` into itself and new bucket `N`.
    fn split(&mut self, pool: &mut PagePool) -> Result<(), MemoryError> {
        let new = self.buckets;
        if new >= BUCKETS_MAX {
            return Ok(());
        }
        if new.is_multiple_of(BUCKETS_PER_PAGE) {
            let page = pool.alloc_page()?;
            self.primary_pages.push(page);
        }
        let low = 1u32 << self.level;
        let old = new - low;
        let mut keep = std::mem::take(&mut self.scratch_entries);
        let mut moved = std::mem::take(&mut self.scratch_moved);
        let mut spare = std::mem::take(&mut self.scratch_buckets);
        keep.clear();
        moved.clear();
        spare.clear();
        self.gather(pool, old, &mut keep, &mut spare);
        moved.extend(keep.iter().filter(|&&(h, _)| h & low != 0));
        keep.retain(|&(h, _)| h & low == 0);
        self.buckets += 1;
        if self.buckets == low << 1 {
            self.level += 1;
        }
        // Two chains never need more overflow buckets than the one they
        // came from (a chain is always as short as its entries allow).
        assert!(overflow_needed(keep.len()) + overflow_needed(moved.len()) <= spare.len());
        self.write_chain(pool, old, &keep, &mut spare);
        self.write_chain(pool, new, &moved, &mut spare);
        for &overflow in &spare {
            self.free_overflow(pool, overflow);
        }
        debug_assert!(keep.iter().all(|&(h, _)| self.address(h) == old));
        debug_assert!(moved.iter().all(|&(h, _)| self.address(h) == new));
        self.scratch_entries = keep;
        self.scratch_moved = moved;
        self.scratch_buckets = spare;
        Ok(())
    }

    /// Merges bucket `N − 1` into its buddy. On error nothing has changed.
    fn merge(&mut self, pool: &mut PagePool) -> Result<(), MemoryError> {
        assert!(self.buckets > 1);
        let level = if self.buckets == 1 << self.level {
            self.level - 1
        } else {
            self.level
        };
        let last = self.buckets - 1;
        let buddy = last - (1 << level);
        let mut entries = std::mem::take(&mut self.scratch_entries);
        let mut spare = std::mem::take(&mut self.scratch_buckets);
        entries.clear();
        spare.clear();
        self.gather(pool, buddy, &mut entries, &mut spare);
        self.gather(pool, last, &mut entries, &mut spare);
        let had = spare.len();
        let mut result = Ok(());
        while spare.len() < overflow_needed(entries.len()) {
            match self.alloc_overflow(pool) {
                Ok(overflow) => spare.push(overflow),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_err() {
            for &overflow in &spare[had..] {
                self.free_overflow(pool, overflow);
            }
        } else {
            self.buckets = last;
            self.level = level;
            self.write_chain(pool, buddy, &entries, &mut spare);
            for &overflow in &spare {
                self.free_overflow(pool, overflow);
            }
            if last.is_multiple_of(BUCKETS_PER_PAGE) {
                let page = self
                    .primary_pages
                    .pop()
                    .expect("the last bucket had a page");
                pool.free_page(page);
            }
            debug_assert!(entries.iter().all(|&(h, _)| self.address(h) == buddy));
        }
        self.scratch_entries = entries;
        self.scratch_buckets = spare;
        result
    }

    fn alloc_overflow(&mut self, pool: &mut PagePool) -> Result<u32, MemoryError> {
        let page = match self.overflow_with_free.last() {
            Some(page) => page,
            None => {
                let pool_page = pool.alloc_page()?;
                let meta = OverflowPage {
                    pool: Some(pool_page),
                    used: 0,
                    used_bits: [0; BUCKETS_PER_PAGE as usize / 64],
                };
                let page = match self.overflow_without_page.pop() {
                    Some(page) => {
                        self.overflow_pages[page as usize] = meta;
                        page
                    }
                    None => {
                        assert!((self.overflow_pages.len() as u32) < OVERFLOW_PAGES_MAX);
                        self.overflow_pages.push(meta);
                        self.overflow_pages.len() as u32 - 1
                    }
                };
                self.overflow_with_free.insert(page);
                page
            }
        };
        let meta = &mut self.overflow_pages[page as usize];
        let (w, word) = meta
            .used_bits
            .iter()
            .enumerate()
            .find(|(_, &w)| w != u64::MAX)
            .expect("a page filed as having a free bucket has one");
        let bit = (!*word).trailing_zeros();
        meta.used_bits[w] |= 1 << bit;
        meta.used += 1;
        if meta.used == BUCKETS_PER_PAGE {
            self.overflow_with_free.remove(page);
        }
        self.overflow_buckets += 1;
        Ok(page << BUCKET_PAGE_SHIFT | (w as u32 * 64 + bit))
    }

    fn free_overflow(&mut self, pool: &mut PagePool, overflow: u32) {
        let page = overflow >> BUCKET_PAGE_SHIFT;
        let slot = overflow & (BUCKETS_PER_PAGE - 1);
        let meta = &mut self.overflow_pages[page as usize];
        let bit = 1u64 << (slot % 64);
        assert!(
            meta.used_bits[slot as usize / 64] & bit != 0,
            "overflow bucket {overflow} freed twice"
        );
        meta.used_bits[slot as usize / 64] &= !bit;
        meta.used -= 1;
        self.overflow_buckets -= 1;
        // An empty page goes back to the pool unless it is the only one
        // with free buckets (then it is kept for the next overflow).
        let others =
            self.overflow_with_free.len() > usize::from(self.overflow_with_free.contains(page));
        if meta.used == 0 && others {
            let pool_page = meta
                .pool
                .take()
                .expect("a page with buckets has a pool page");
            pool.free_page(pool_page);
            self.overflow_with_free.remove(page);
            self.overflow_without_page.push(page);
        } else {
            self.overflow_with_free.insert(page);
        }
    }

    /// Checks every chain against the structure (tests; O(entries)).
    pub fn check_invariants(&self, pool: &PagePool) {
        if self.primary_pages.is_empty() {
            assert_eq!(self.len, 0);
            return;
        }
        assert!(1 << self.level <= self.buckets && u64::from(self.buckets) < 2u64 << self.level);
        assert_eq!(
            self.primary_pages.len(),
            self.buckets.div_ceil(BUCKETS_PER_PAGE) as usize
        );
        let mut entries = Vec::new();
        let mut overflow = Vec::new();
        let mut total = 0;
        let mut overflow_total = 0;
        for bucket in 0..self.buckets {
            entries.clear();
            overflow.clear();
            self.gather(pool, bucket, &mut entries, &mut overflow);
            assert_eq!(
                overflow.len(),
                overflow_needed(entries.len()),
                "bucket {bucket}: chain not minimal"
            );
            for &(h, row) in &entries {
                assert_eq!(
                    self.address(h),
                    bucket,
                    "entry of {row} in the wrong bucket"
                );
                assert!(row < LINK);
            }
            total += entries.len() as u64;
            overflow_total += overflow.len() as u64;
        }
        assert_eq!(total, self.len);
        assert_eq!(overflow_total, self.overflow_buckets);
        let used: u64 = self.overflow_pages.iter().map(|p| u64::from(p.used)).sum();
        assert_eq!(used, self.overflow_buckets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(mut x: u64) -> u64 {
        // splitmix64: a well-spread test hash.
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    #[test]
    fn growth_and_shrink_keep_every_key_findable_at_every_step() {
        let mut pool = PagePool::new(64);
        let mut index = HashIndex::new();
        let n = 2500u32;
        for k in 0..n {
            index
                .insert(&mut pool, mix(u64::from(k)), RowId(k))
                .unwrap();
            if k % 97 == 0 {
                index.check_invariants(&pool);
            }
            for j in (0..=k).step_by(1 + (k as usize / 500)) {
                let found = index.find(&pool, mix(u64::from(j)), |r| r == RowId(j));
                assert_eq!(found, Some(RowId(j)), "key {j} after inserting {k}");
            }
        }
        let grown = index.buckets();
        assert!(grown > 300, "the index split as it grew ({grown} buckets)");
        index.check_invariants(&pool);
        for k in 0..n {
            assert!(index.remove(&mut pool, mix(u64::from(k)), RowId(k)));
            assert!(!index.remove(&mut pool, mix(u64::from(k)), RowId(k)));
            for j in ((k + 1)..n).step_by(1 + ((n - k) as usize / 500)) {
                let found = index.find(&pool, mix(u64::from(j)), |r| r == RowId(j));
                assert_eq!(found, Some(RowId(j)), "key {j} after removing {k}");
            }
            if k % 97 == 0 {
                index.check_invariants(&pool);
            }
        }
        assert!(index.buckets() <= 2, "the index merged as it shrank");
        assert_eq!(index.overflow_buckets(), 0);
        index.check_invariants(&pool);
        // One primary page, and at most one empty overflow page kept.
        assert!(index.memory_bytes() <= 2 * PAGE_BYTES as u64);
        index.release(&mut pool);
        assert_eq!(pool.used_pages(), 0);
    }

    #[test]
    fn identical_hashes_chain_and_are_told_apart_by_is_match() {
        let mut pool = PagePool::new(8);
        let mut index = HashIndex::new();
        let hash = 0xDEAD_BEEF_0000_0001;
        for r in 0..40 {
            index.insert(&mut pool, hash, RowId(r)).unwrap();
        }
        index.check_invariants(&pool);
        assert!(index.overflow_buckets() >= 5);
        for r in 0..40 {
            assert_eq!(index.find(&pool, hash, |x| x == RowId(r)), Some(RowId(r)));
        }
        assert_eq!(index.find(&pool, hash, |x| x == RowId(99)), None);
        assert_eq!(index.find(&pool, hash ^ (1 << 8), |_| true), None);
        for r in (0..40).rev().step_by(3) {
            assert!(index.remove(&mut pool, hash, RowId(r)));
            index.check_invariants(&pool);
        }
        assert!(!index.remove(&mut pool, hash, RowId(39)));
        assert!(!index.remove(&mut pool, hash ^ (1 << 3), RowId(0)));
    }

    #[test]
    fn candidate_is_the_first_fragment_match_of_the_primary_bucket() {
        let mut pool = PagePool::new(8);
        let mut index = HashIndex::new();
        assert_eq!(index.candidate(&pool, 1), None, "an empty index");
        // Fragments that differ above bit 20 share bucket 0 while the
        // index is small: eight of them fill it without an overflow
        // bucket, the last in slot 7.
        let hash = |r: u32| u64::from(r << 24);
        for r in 0..8 {
            index.insert(&mut pool, hash(r), RowId(r)).unwrap();
        }
        assert_eq!(index.overflow_buckets(), 0);
        for r in 0..8 {
            assert_eq!(index.candidate(&pool, hash(r)), Some(RowId(r)), "slot {r}");
        }
        assert_eq!(index.candidate(&pool, hash(9)), None);
        // A ninth entry overflows: the primary bucket keeps 7 and a link.
        index.insert(&mut pool, hash(8), RowId(8)).unwrap();
        assert_eq!(index.overflow_buckets(), 1);
        for r in 0..7 {
            assert_eq!(index.candidate(&pool, hash(r)), Some(RowId(r)));
        }
        // Entries moved to the overflow bucket are not candidates (the
        // overflow bucket is prefetched instead); `find` finds them.
        for r in 7..9 {
            assert_eq!(index.candidate(&pool, hash(r)), None);
            assert_eq!(index.find(&pool, hash(r), |_| true), Some(RowId(r)));
        }
        index.check_invariants(&pool);
    }

    #[test]
    fn out_of_memory_leaves_the_index_as_it_was() {
        let mut pool = PagePool::new(2);
        let mut index = HashIndex::new();
        // 64 distinct fragments: chains grow long, so overflow buckets fill
        // the second page, then the pool is empty.
        let hash = |k: u32| u64::from(k) << 32 | u64::from(k % 64);
        let mut inserted = 0u32;
        let err = loop {
            match index.insert(&mut pool, hash(inserted), RowId(inserted)) {
                Ok(()) => inserted += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, MemoryError::DataMemoryExhausted { .. }));
        assert_eq!(index.len(), u64::from(inserted));
        assert_eq!(pool.used_pages(), 2);
        index.check_invariants(&pool);
        for k in 0..inserted {
            assert_eq!(
                index.find(&pool, hash(k), |r| r == RowId(k)),
                Some(RowId(k))
            );
        }
        assert_eq!(
            index
                .find(&pool, hash(inserted), |_| true)
                .map(|r| r.0 % 64),
            Some(inserted % 64)
        );
        assert_eq!(
            index.find(&pool, hash(inserted), |r| r == RowId(inserted)),
            None
        );
        // Removing an entry of the same chain makes room again.
        let victim = inserted - 64;
        assert!(index.remove(&mut pool, hash(victim), RowId(victim)));
        index
            .insert(&mut pool, hash(inserted), RowId(inserted))
            .unwrap();
        assert_eq!(
            index.find(&pool, hash(inserted), |r| r == RowId(inserted)),
            Some(RowId(inserted))
        );
        index.check_invariants(&pool);
    }

    #[test]
    fn buckets_come_from_the_low_32_bits() {
        let mut pool = PagePool::new(8);
        let mut index = HashIndex::new();
        // Hashes that differ only in the high 32 bits (which choose the
        // partition) all land in one chain.
        for r in 0..30u32 {
            index
                .insert(&mut pool, (u64::from(r) << 32) | 0x1234_5678, RowId(r))
                .unwrap();
        }
        index.check_invariants(&pool);
        assert!(index.overflow_buckets() >= 3);
    }

    /// What the batched lookup makes of `hash` with the index's probes: the
    /// row a chain of at most two probes names, `None` when they say no row
    /// has it, `Some(None)` when the chain goes on (the lookup then falls
    /// back to `find`).
    fn two_probes(index: &HashIndex, pool: &PagePool, hash: u64) -> Option<Option<RowId>> {
        match index.probe(pool, hash) {
            Probe::Row(row) => Some(Some(row)),
            Probe::Absent => None,
            Probe::Overflow(overflow) => match index.probe_overflow(pool, hash, overflow) {
                Probe::Row(row) => Some(Some(row)),
                Probe::Absent => None,
                Probe::Overflow(_) => Some(None),
            },
        }
    }

    #[test]
    fn probes_find_every_key_as_the_index_grows_and_shrinks() {
        let mut pool = PagePool::new(64);
        let mut index = HashIndex::new();
        let n = 3000u32;
        // Distinct fragments, so that a probe's first match is the key's.
        // Returns the keys beyond two probes and the keys checked.
        let check = |index: &HashIndex, pool: &PagePool, live: std::ops::Range<u32>| {
            let mut beyond_two = 0;
            for k in 0..n {
                let probed = two_probes(index, pool, mix(u64::from(k)));
                if live.contains(&k) {
                    match probed {
                        Some(Some(row)) => assert_eq!(row, RowId(k), "key {k}"),
                        Some(None) => beyond_two += 1,
                        None => panic!("key {k} probed absent"),
                    }
                } else {
                    assert!(
                        !matches!(probed, Some(Some(row)) if row == RowId(k)),
                        "removed key {k} still probed"
                    );
                }
            }
            (beyond_two, live.len())
        };
        let (mut beyond_two, mut probed) = (0, 0);
        let mut add = |(beyond, checked): (usize, usize)| {
            beyond_two += beyond;
            probed += checked;
        };
        for k in 0..n {
            index
                .insert(&mut pool, mix(u64::from(k)), RowId(k))
                .unwrap();
            if k % 250 == 0 {
                add(check(&index, &pool, 0..k + 1));
            }
        }
        assert!(index.overflow_buckets() > 0, "chains overflowed");
        add(check(&index, &pool, 0..n));
        for k in 0..n {
            assert!(index.remove(&mut pool, mix(u64::from(k)), RowId(k)));
            if k % 250 == 0 {
                add(check(&index, &pool, k + 1..n));
            }
        }
        // Chains of three buckets are rare at the split load.
        assert!(
            beyond_two * 100 < probed,
            "{beyond_two} of {probed} keys beyond two probes"
        );
        assert_eq!(two_probes(&index, &pool, mix(1)), None);
        index.check_invariants(&pool);
    }
}
