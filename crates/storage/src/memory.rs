//! Memory of one LDM instance: the page pool (NDB's `DataMemory`) and the row
//! store of each partition (NDB: DBTUP's fixed-size and variable-size pages).
//!
//! Why one pool: `DataMemory` is a budget that all partitions of an LDM
//! instance, and their hash indexes, share. Drawing every byte of rows and
//! indexes from one pool of fixed-size pages makes "table is full" a single,
//! exact, testable condition, and makes memory freed by one partition usable
//! by every other.
//!
//! - [`page_pool`]: [`PagePool`], 32 KiB pages allocated lazily up to the
//!   budget, in 2 MiB slabs backed by huge pages, and reused once freed;
//!   [`prefetch`] and [`prefetch_lines`], the cache hints batched lookups
//!   use.
//! - [`row_store`]: [`RowStore`], the rows of one partition as opaque bytes —
//!   a fixed-size part in fixed-size slots and an optional variable-size part
//!   in variable-size pages — with per-page change generations and per-row
//!   changed marks for partial local checkpoints.
//! - `var_page`: the layout of one variable-size page (private to the row
//!   store).
//!
//! The row store never interprets row bytes: the row *format* (columns, NULL
//! bits) belongs to [`schema`]. Every structure here is
//! single-threaded; operations take the pool as `&PagePool` or
//! `&mut PagePool`, so there is no shared ownership and no locking.

pub mod page_pool;
pub mod row_store;
mod var_page;

pub use page_pool::{
    prefetch, prefetch_lines, PageId, PagePool, PAGE_BYTES, POOL_PAGES_MAX, SLAB_BYTES, SLAB_PAGES,
};
pub use row_store::{
    row_id, row_page, row_slot, PageRows, RowStore, Rows, FIXED_HEADER_BYTES,
    FIXED_HEADER_BYTES_WITH_VAR, FIXED_PAGES_MAX, FIXED_SLOT_BYTES_MIN, ROW_SLOT_BITS,
    VAR_PAGES_MAX, VAR_PART_BYTES_MAX,
};

/// Why a memory operation failed. Each failure leaves the structure it was
/// called on exactly as it was before the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The pool has handed out its whole budget. NDB's error 827 (out of
    /// `DataMemory`), which MySQL reports as "table is full".
    #[error("table is full: DataMemory exhausted ({budget_bytes} bytes)")]
    DataMemoryExhausted { budget_bytes: u64 },
    /// The partition already addresses as many fixed-size pages as a
    /// [`crate::RowId`] can name.
    #[error(
        "partition is full: {pages_max} fixed-size pages is the most one partition can address"
    )]
    FixedPagesExhausted { pages_max: u32 },
    /// The partition already addresses as many variable-size pages as a row
    /// header can name.
    #[error(
        "partition is full: {pages_max} variable-size pages is the most one partition can address"
    )]
    VarPagesExhausted { pages_max: u32 },
    /// A variable-size part larger than one variable-size page can hold.
    #[error("variable-size part of {bytes} bytes is larger than the {bytes_max} bytes a row's variable-size part may have")]
    VarPartTooLarge { bytes: usize, bytes_max: usize },
}

/// A set of small integers (page indexes) with O(1) insert, remove and
/// "give me any member". The row store and the hash index use it to find a
/// page with free space without scanning all pages; it allocates only when
/// the largest member seen grows.
#[derive(Debug, Default, Clone)]
pub(crate) struct IndexSet {
    members: Vec<u32>,
    /// `position[x]` is the index of `x` in `members`, or `NOT_MEMBER`.
    position: Vec<u32>,
}

const NOT_MEMBER: u32 = u32::MAX;

impl IndexSet {
    pub(crate) fn insert(&mut self, x: u32) {
        let i = x as usize;
        if i >= self.position.len() {
            self.position.resize(i + 1, NOT_MEMBER);
        }
        if self.position[i] == NOT_MEMBER {
            self.position[i] = self.members.len() as u32;
            self.members.push(x);
        }
        debug_assert_eq!(self.members[self.position[i] as usize], x);
    }

    pub(crate) fn remove(&mut self, x: u32) {
        let i = x as usize;
        let Some(&p) = self.position.get(i) else {
            return;
        };
        if p == NOT_MEMBER {
            return;
        }
        let last = self.members.pop().expect("a member exists");
        if last != x {
            self.members[p as usize] = last;
            self.position[last as usize] = p;
        }
        self.position[i] = NOT_MEMBER;
    }

    pub(crate) fn contains(&self, x: u32) -> bool {
        self.position
            .get(x as usize)
            .is_some_and(|&p| p != NOT_MEMBER)
    }

    /// The most recently inserted member still present (LIFO, so that a
    /// page just given free space is the one filled again: it is warm).
    pub(crate) fn last(&self) -> Option<u32> {
        self.members.last().copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_set_insert_remove_contains() {
        let mut set = IndexSet::default();
        set.insert(5);
        set.insert(1);
        set.insert(5);
        assert_eq!(set.len(), 2);
        assert_eq!(set.last(), Some(1));
        set.remove(1);
        assert_eq!(set.last(), Some(5));
        assert!(set.contains(5) && !set.contains(1) && !set.contains(100));
        set.remove(100);
        set.insert(9);
        set.remove(5);
        assert_eq!(set.last(), Some(9));
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn exhausted_message_names_the_budget() {
        let e = MemoryError::DataMemoryExhausted {
            budget_bytes: 65536,
        };
        assert_eq!(
            e.to_string(),
            "table is full: DataMemory exhausted (65536 bytes)"
        );
    }
}
