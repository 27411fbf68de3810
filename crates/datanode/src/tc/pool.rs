//! A fixed-capacity pool of records with a free list: the TC's transaction
//! and scan records. Every record is made at start and reused, so a busy
//! TC allocates no records (and the `Vec`s inside a record keep their
//! capacity from one use to the next); a full pool refuses at once.

/// Records of type `T` addressed by a slot index below the capacity.
pub(crate) struct Pool<T> {
    records: Vec<T>,
    used: Vec<bool>,
    /// Free slots; the last one is handed out next.
    free: Vec<u32>,
}

impl<T: Default> Pool<T> {
    /// A pool of `capacity` records, all made now.
    pub(crate) fn new(capacity: u32) -> Pool<T> {
        let n = capacity as usize;
        Pool {
            records: (0..n).map(|_| T::default()).collect(),
            used: vec![false; n],
            // Slot 0 first, for readable traces.
            free: (0..capacity).rev().collect(),
        }
    }

    /// A free slot, or `None` when every record is in use. The record
    /// holds whatever its last user left: the caller resets it.
    pub(crate) fn allocate(&mut self) -> Option<u32> {
        let slot = self.free.pop()?;
        assert!(
            !self.used[slot as usize],
            "slot {slot} on the free list is in use"
        );
        self.used[slot as usize] = true;
        Some(slot)
    }

    pub(crate) fn release(&mut self, slot: u32) {
        assert!(self.used[slot as usize], "slot {slot} released twice");
        self.used[slot as usize] = false;
        self.free.push(slot);
    }

    pub(crate) fn get(&self, slot: u32) -> &T {
        debug_assert!(self.used[slot as usize], "slot {slot} is free");
        &self.records[slot as usize]
    }

    pub(crate) fn get_mut(&mut self, slot: u32) -> &mut T {
        debug_assert!(self.used[slot as usize], "slot {slot} is free");
        &mut self.records[slot as usize]
    }

    pub(crate) fn in_use(&self) -> usize {
        self.records.len() - self.free.len()
    }

    /// Panics when the free list and the used marks disagree: a slot on
    /// the free list in use, or a used count that is not the pool less the
    /// free list. O(capacity): for the simulator's small pools.
    pub(crate) fn check_invariants(&self, what: &str) {
        let used = self.used.iter().filter(|u| **u).count();
        assert_eq!(
            used + self.free.len(),
            self.records.len(),
            "{what} pool: {used} records marked in use and {} free, of {}",
            self.free.len(),
            self.records.len()
        );
        for &slot in &self.free {
            assert!(
                !self.used[slot as usize],
                "{what} pool: slot {slot} is on the free list and in use"
            );
        }
    }

    /// The slots in use, in slot order.
    pub(crate) fn used_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.used
            .iter()
            .enumerate()
            .filter(|(_, u)| **u)
            .map(|(i, _)| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_pool_refuses_and_a_released_slot_is_reused() {
        let mut pool: Pool<u32> = Pool::new(2);
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        assert_ne!(a, b);
        assert_eq!(pool.allocate(), None);
        assert_eq!(pool.in_use(), 2);
        *pool.get_mut(a) = 7;
        pool.release(a);
        assert_eq!(pool.in_use(), 1);
        assert_eq!(pool.used_slots().collect::<Vec<_>>(), vec![b]);
        let c = pool.allocate().unwrap();
        assert_eq!(c, a);
        assert_eq!(*pool.get(c), 7, "the caller resets a reused record");
    }
}
