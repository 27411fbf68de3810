//! One variable-size page: a slotted page that holds the variable-size parts
//! of rows (NDB: DBTUP's var pages).
//!
//! Why slotted: a row names its variable-size part by (page, entry), and the
//! entry number never changes while the part stays in the page, so the page
//! may move bytes around (compaction) without touching any row. Space freed
//! by a shrinking or deleted part is reused by compacting the page when a
//! new part would not otherwise fit in the contiguous gap.
//!
//! Layout of the page's `PAGE_BYTES`:
//!
//! ```text
//! 0                4·dir_len         data_start                PAGE_BYTES
//! | directory ...  | contiguous free  | data of entries (and holes)   |
//! ```
//!
//! - Directory entry `i` (4 bytes at `4·i`): `offset: u16` LE, `len: u16` LE
//!   of entry `i`'s bytes. A live entry has `len ≥ 1` (empty parts are not
//!   stored). A free entry has `len = 0` and `offset = next free entry + 1`
//!   (0 ends the list), so free entries are reused before the directory
//!   grows.
//! - Data grows down from the end of the page; deleted or shrunk parts leave
//!   holes until the next compaction.
//!
//! The bookkeeping (`VarPage`) lives beside the page, not in it: the page
//! bytes are only the directory and the data.

use super::page_pool::{PageId, PAGE_BYTES};

/// Most directory entries per variable-size page: entry numbers have 12 bits
/// in a row's variable-part reference.
pub(super) const VAR_ENTRIES_MAX: u32 = 1 << 12;

/// Bytes of one directory entry.
pub(super) const VAR_DIR_ENTRY_BYTES: u32 = 4;

/// Width of a free-space class: pages are kept in lists by usable free bytes
/// in steps of this many bytes, so finding a page for a part of `n` bytes
/// looks at one class and then jumps to the next non-empty one.
pub(super) const VAR_CLASS_BYTES: u32 = 256;

/// Number of free-space classes.
pub(super) const VAR_CLASSES: u32 = PAGE_BYTES as u32 / VAR_CLASS_BYTES;

const FREE_END: u16 = u16::MAX;

/// Bookkeeping of one variable-size page of a partition.
#[derive(Debug, Clone)]
pub(super) struct VarPage {
    /// The pool page, or `None` when this directory slot holds no page.
    pub pool: Option<PageId>,
    /// Directory entries, live and free.
    pub dir_len: u32,
    /// Live entries.
    pub live: u32,
    /// First free directory entry, or `FREE_END`.
    free_dir_head: u16,
    /// Lowest byte of the data area.
    data_start: u32,
    /// `PAGE_BYTES − 4·dir_len − Σ live lengths`: free bytes, holes included.
    pub free_bytes: u32,
    /// Generation of the last change (see `RowStore::mark_checkpoint`).
    pub changed: u32,
    /// The free-space class the page is filed under, if any.
    pub class: Option<u32>,
}

#[inline]
fn read_u16(page: &[u8; PAGE_BYTES], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

#[inline]
fn write_u16(page: &mut [u8; PAGE_BYTES], at: usize, v: u16) {
    page[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// (offset, len) of directory entry `entry`.
#[inline]
pub(super) fn dir_entry(page: &[u8; PAGE_BYTES], entry: u32) -> (usize, usize) {
    let at = (entry * VAR_DIR_ENTRY_BYTES) as usize;
    (read_u16(page, at) as usize, read_u16(page, at + 2) as usize)
}

fn set_dir_entry(page: &mut [u8; PAGE_BYTES], entry: u32, offset: usize, len: usize) {
    debug_assert!(offset < PAGE_BYTES && len < PAGE_BYTES);
    let at = (entry * VAR_DIR_ENTRY_BYTES) as usize;
    write_u16(page, at, offset as u16);
    write_u16(page, at + 2, len as u16);
}

impl VarPage {
    /// Bookkeeping of a fresh (zeroed) page.
    pub fn new(pool: PageId, generation: u32) -> VarPage {
        VarPage {
            pool: Some(pool),
            dir_len: 0,
            live: 0,
            free_dir_head: FREE_END,
            data_start: PAGE_BYTES as u32,
            free_bytes: PAGE_BYTES as u32,
            changed: generation,
            class: None,
        }
    }

    /// The directory slot with no page in it (after the page was released).
    pub fn empty_slot(generation: u32) -> VarPage {
        VarPage {
            pool: None,
            dir_len: 0,
            live: 0,
            free_dir_head: FREE_END,
            data_start: PAGE_BYTES as u32,
            free_bytes: 0,
            changed: generation,
            class: None,
        }
    }

    /// Largest part a new entry in this page may have.
    pub fn usable_bytes(&self) -> u32 {
        if self.pool.is_none() {
            0
        } else if self.free_dir_head != FREE_END {
            self.free_bytes
        } else if self.dir_len < VAR_ENTRIES_MAX {
            self.free_bytes.saturating_sub(VAR_DIR_ENTRY_BYTES)
        } else {
            0
        }
    }

    /// The class this page belongs in, by its usable bytes.
    pub fn wanted_class(&self) -> Option<u32> {
        let usable = self.usable_bytes();
        (usable > 0).then(|| (usable / VAR_CLASS_BYTES).min(VAR_CLASSES - 1))
    }

    fn contiguous_bytes(&self) -> u32 {
        self.data_start - self.dir_len * VAR_DIR_ENTRY_BYTES
    }

    /// Stores `data` as a new entry; the caller checked `usable_bytes()`.
    pub fn alloc(
        &mut self,
        page: &mut [u8; PAGE_BYTES],
        data: &[u8],
        scratch: &mut Vec<u16>,
    ) -> u32 {
        let len = data.len() as u32;
        assert!(
            len >= 1 && len <= self.usable_bytes(),
            "var part of {len} bytes does not fit"
        );
        let new_dir = self.free_dir_head == FREE_END;
        let need = len + if new_dir { VAR_DIR_ENTRY_BYTES } else { 0 };
        if self.contiguous_bytes() < need {
            self.compact(page, scratch);
        }
        let entry = if new_dir {
            self.dir_len += 1;
            self.free_bytes -= VAR_DIR_ENTRY_BYTES;
            self.dir_len - 1
        } else {
            let entry = u32::from(self.free_dir_head);
            let (next, len0) = dir_entry(page, entry);
            debug_assert_eq!(len0, 0, "free directory entry {entry} has a length");
            self.free_dir_head = if next == 0 {
                FREE_END
            } else {
                (next - 1) as u16
            };
            entry
        };
        self.place(page, entry, data);
        self.live += 1;
        entry
    }

    /// Writes `data` at the bottom of the contiguous gap as entry `entry`.
    fn place(&mut self, page: &mut [u8; PAGE_BYTES], entry: u32, data: &[u8]) {
        let len = data.len() as u32;
        debug_assert!(self.contiguous_bytes() >= len);
        self.data_start -= len;
        let at = self.data_start as usize;
        page[at..at + data.len()].copy_from_slice(data);
        set_dir_entry(page, entry, at, data.len());
        self.free_bytes -= len;
    }

    /// Gives back the bytes of `entry` without freeing its directory slot.
    fn release_bytes(&mut self, page: &mut [u8; PAGE_BYTES], entry: u32) {
        let (offset, len) = dir_entry(page, entry);
        debug_assert!(len > 0, "entry {entry} is not live");
        if offset == self.data_start as usize {
            self.data_start += len as u32;
        }
        self.free_bytes += len as u32;
        set_dir_entry(page, entry, 0, 0);
    }

    /// Frees `entry`. Returns whether the page is now empty.
    pub fn free(&mut self, page: &mut [u8; PAGE_BYTES], entry: u32) -> bool {
        assert!(entry < self.dir_len && self.live > 0);
        self.release_bytes(page, entry);
        let next = if self.free_dir_head == FREE_END {
            0
        } else {
            usize::from(self.free_dir_head) + 1
        };
        set_dir_entry(page, entry, next, 0);
        self.free_dir_head = entry as u16;
        self.live -= 1;
        if self.live == 0 {
            // Nothing left: forget the directory, the whole page is free.
            self.dir_len = 0;
            self.free_dir_head = FREE_END;
            self.data_start = PAGE_BYTES as u32;
            self.free_bytes = PAGE_BYTES as u32;
            return true;
        }
        false
    }

    /// Whether `entry` can take `new_len` bytes without leaving the page.
    pub fn can_resize(&self, page: &[u8; PAGE_BYTES], entry: u32, new_len: usize) -> bool {
        let (_, len) = dir_entry(page, entry);
        self.free_bytes as usize + len >= new_len
    }

    /// Replaces the bytes of `entry` with `data`, keeping the entry number.
    /// The caller checked `can_resize`.
    pub fn resize(
        &mut self,
        page: &mut [u8; PAGE_BYTES],
        entry: u32,
        data: &[u8],
        scratch: &mut Vec<u16>,
    ) {
        assert!(!data.is_empty() && self.can_resize(page, entry, data.len()));
        let (offset, len) = dir_entry(page, entry);
        if data.len() <= len {
            page[offset..offset + data.len()].copy_from_slice(data);
            set_dir_entry(page, entry, offset, data.len());
            self.free_bytes += (len - data.len()) as u32;
            return;
        }
        self.release_bytes(page, entry);
        if self.contiguous_bytes() < data.len() as u32 {
            self.compact(page, scratch);
        }
        self.place(page, entry, data);
    }

    /// Moves every live entry to the end of the page, in place, so that all
    /// free bytes become one contiguous gap.
    fn compact(&mut self, page: &mut [u8; PAGE_BYTES], scratch: &mut Vec<u16>) {
        scratch.clear();
        for entry in 0..self.dir_len {
            if dir_entry(page, entry).1 > 0 {
                scratch.push(entry as u16);
            }
        }
        // Highest offset first: each entry moves up (or stays) into space
        // that no unmoved entry occupies.
        scratch.sort_unstable_by_key(|&e| std::cmp::Reverse(dir_entry(page, u32::from(e)).0));
        let mut top = PAGE_BYTES;
        for &e in scratch.iter() {
            let (offset, len) = dir_entry(page, u32::from(e));
            let to = top - len;
            debug_assert!(to >= offset);
            page.copy_within(offset..offset + len, to);
            set_dir_entry(page, u32::from(e), to, len);
            top = to;
        }
        self.data_start = top as u32;
        assert_eq!(
            self.free_bytes,
            self.contiguous_bytes(),
            "var page accounting is off after compaction"
        );
    }

    /// Checks the accounting against the page bytes (tests).
    #[cfg(test)]
    pub fn check(&self, page: &[u8; PAGE_BYTES]) {
        let mut live = 0;
        let mut used = 0;
        for entry in 0..self.dir_len {
            let (offset, len) = dir_entry(page, entry);
            if len > 0 {
                live += 1;
                used += len as u32;
                assert!(offset >= self.data_start as usize && offset + len <= PAGE_BYTES);
            }
        }
        assert_eq!(live, self.live);
        assert_eq!(
            self.free_bytes,
            PAGE_BYTES as u32 - self.dir_len * VAR_DIR_ENTRY_BYTES - used
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    #[test]
    fn alloc_free_resize_compact_keep_entries_intact() {
        let mut page = Box::new([0u8; PAGE_BYTES]);
        let mut meta = VarPage::new(PageId(0), 1);
        let mut scratch = Vec::new();
        let mut live: Vec<(u32, Vec<u8>)> = Vec::new();
        // Fill with 1000-byte parts, free every other one, then store parts
        // that only fit after compaction.
        while meta.usable_bytes() >= 1000 {
            let data = bytes(live.len() as u8, 1000);
            let e = meta.alloc(&mut page, &data, &mut scratch);
            live.push((e, data));
        }
        assert_eq!(live.len(), 32);
        let mut kept = Vec::new();
        for (i, (e, data)) in live.into_iter().enumerate() {
            if i % 2 == 0 {
                assert!(!meta.free(&mut page, e));
            } else {
                kept.push((e, data));
            }
        }
        meta.check(&page);
        let big = bytes(200, 3000);
        assert!(meta.usable_bytes() >= 3000);
        let e = meta.alloc(&mut page, &big, &mut scratch);
        kept.push((e, big));
        // Grow one entry in place (needs compaction again) and shrink another.
        let grown = bytes(9, 2500);
        meta.resize(&mut page, kept[0].0, &grown, &mut scratch);
        kept[0].1 = grown;
        let shrunk = bytes(4, 10);
        meta.resize(&mut page, kept[1].0, &shrunk, &mut scratch);
        kept[1].1 = shrunk;
        meta.check(&page);
        for (e, data) in &kept {
            let (offset, len) = dir_entry(&page, *e);
            assert_eq!(&page[offset..offset + len], &data[..]);
        }
        for (e, _) in &kept[..kept.len() - 1] {
            assert!(!meta.free(&mut page, *e));
        }
        assert!(meta.free(&mut page, kept.last().unwrap().0));
        assert_eq!(meta.free_bytes, PAGE_BYTES as u32);
    }

    #[test]
    fn free_directory_entries_are_reused() {
        let mut page = Box::new([0u8; PAGE_BYTES]);
        let mut meta = VarPage::new(PageId(0), 1);
        let mut scratch = Vec::new();
        let a = meta.alloc(&mut page, b"aaaa", &mut scratch);
        let b = meta.alloc(&mut page, b"bbbb", &mut scratch);
        meta.free(&mut page, a);
        let c = meta.alloc(&mut page, b"cc", &mut scratch);
        assert_eq!(c, a);
        assert_eq!(meta.dir_len, 2);
        assert_ne!(b, c);
        meta.check(&page);
    }
}
