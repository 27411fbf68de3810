//! The bit layout of the lock-owner ids (`OpId`) an LDM instance gives its
//! fragments, in one place. A lock grant comes back with the id it was
//! asked under, and the id alone must say which record resumes: a request
//! record, a scan record or an outgoing copy.
//!
//! ```text
//!  bit 31      30 .. 16       15 .. 0
//! [ scan ] [ generation ] [    slot    ]
//! ```
//!
//! - `scan` clear: a request record (`requests::Requests`), its slot below.
//! - `scan` set, slot below [`COPY_SLOT_BASE`]: a scan record.
//! - `scan` set, slot at or above [`COPY_SLOT_BASE`]: the outgoing copy
//!   `slot - COPY_SLOT_BASE` of a node restart (`copy`), which reads rows
//!   under locks as a scan does.
//!
//! The generation goes up each time a slot is handed out again, so that a
//! late grant for an earlier user of the slot is told apart and dropped.

use storage::locks::OpId;

/// Bits of the slot: the record's index.
const SLOT_BITS: u32 = 16;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Bit 31: a scan's (or copy's) op rather than a request's.
const SCAN_BIT: u32 = 1 << 31;
/// The generation takes the 15 bits between the slot and the scan bit.
const GENERATION_MASK: u32 = (1 << (31 - SLOT_BITS)) - 1;
/// Copy slots live in the scan space, above every scan slot.
pub(super) const COPY_SLOT_BASE: u32 = 0x8000;
/// Most slots of each kind the layout can name.
pub(super) const REQUEST_SLOTS_MAX: usize = 1 << SLOT_BITS;
pub(super) const SCAN_SLOTS_MAX: usize = COPY_SLOT_BASE as usize;
pub(super) const COPY_SLOTS_MAX: usize = (SLOT_MASK - COPY_SLOT_BASE) as usize;

/// The generation after `generation`, within its bits.
#[inline]
pub(super) fn next_generation(generation: u32) -> u32 {
    (generation + 1) & GENERATION_MASK
}

#[inline]
pub(super) fn request(generation: u32, slot: u32) -> OpId {
    debug_assert!(generation <= GENERATION_MASK && slot <= SLOT_MASK);
    OpId(generation << SLOT_BITS | slot)
}

#[inline]
pub(super) fn scan(generation: u32, slot: u32) -> OpId {
    debug_assert!(generation <= GENERATION_MASK && slot < COPY_SLOT_BASE);
    OpId(SCAN_BIT | generation << SLOT_BITS | slot)
}

#[inline]
pub(super) fn copy(generation: u32, slot: u32) -> OpId {
    debug_assert!(generation <= GENERATION_MASK && (slot as usize) < COPY_SLOTS_MAX);
    OpId(SCAN_BIT | generation << SLOT_BITS | (COPY_SLOT_BASE + slot))
}

/// Whether `op` is a scan's or a copy's (not a request's).
#[inline]
pub(super) fn is_scan_space(op: OpId) -> bool {
    op.0 & SCAN_BIT != 0
}

/// Whether `op` is an outgoing copy's.
#[inline]
pub(super) fn is_copy(op: OpId) -> bool {
    is_scan_space(op) && op.0 & SLOT_MASK >= COPY_SLOT_BASE
}

/// The record slot `op` names, within its kind's slots.
#[inline]
pub(super) fn slot(op: OpId) -> u32 {
    let slot = op.0 & SLOT_MASK;
    if is_copy(op) {
        slot - COPY_SLOT_BASE
    } else {
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kinds_are_told_apart_and_round_trip() {
        for generation in [0, 1, GENERATION_MASK] {
            for s in [0, 1, 0x7FFF] {
                let r = request(generation, s);
                assert!(!is_scan_space(r) && !is_copy(r));
                assert_eq!(slot(r), s);
                let sc = scan(generation, s);
                assert!(is_scan_space(sc) && !is_copy(sc));
                assert_eq!(slot(sc), s);
                assert_ne!(r, sc);
            }
            for s in [0, (COPY_SLOTS_MAX - 1) as u32] {
                let c = copy(generation, s);
                assert!(is_scan_space(c) && is_copy(c));
                assert_eq!(slot(c), s);
            }
        }
        assert_eq!(next_generation(GENERATION_MASK), 0);
        assert_ne!(request(1, 5), request(2, 5));
    }
}
