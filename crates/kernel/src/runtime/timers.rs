//! The timers of one execution thread: a binary heap ordered by (deadline,
//! set order), so timers with equal deadlines fire in the order they were set.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Instant;

/// Room for this many pending timers before the heap first grows.
const TIMERS_PREALLOCATED: usize = 1024;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TimerEntry {
    at: Instant,
    seq: u64,
    slot: usize,
    timer_id: u32,
}

/// A timer that came due: deliver `Timeout { timer_id }` to the block in `slot`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct DueTimer {
    pub(crate) slot: usize,
    pub(crate) timer_id: u32,
}

pub(crate) struct TimerHeap {
    heap: BinaryHeap<Reverse<TimerEntry>>,
    next_seq: u64,
}

impl TimerHeap {
    pub(crate) fn new() -> TimerHeap {
        TimerHeap {
            heap: BinaryHeap::with_capacity(TIMERS_PREALLOCATED),
            next_seq: 0,
        }
    }

    pub(crate) fn set(&mut self, at: Instant, slot: usize, timer_id: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(TimerEntry {
            at,
            seq,
            slot,
            timer_id,
        }));
    }

    /// The earliest timer due at `now`, removed from the heap.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<DueTimer> {
        let Reverse(first) = self.heap.peek()?;
        if first.at > now {
            return None;
        }
        let Reverse(entry) = self.heap.pop()?;
        assert!(entry.at <= now);
        Some(DueTimer {
            slot: entry.slot,
            timer_id: entry.timer_id,
        })
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(entry)| entry.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_in_deadline_then_set_order() {
        let mut timers = TimerHeap::new();
        timers.set(Instant(30), 0, 1);
        timers.set(Instant(10), 1, 2);
        timers.set(Instant(30), 2, 3);
        timers.set(Instant(20), 0, 4);
        assert_eq!(timers.next_deadline(), Some(Instant(10)));
        assert_eq!(timers.pop_due(Instant(9)), None);
        let fired: Vec<u32> = std::iter::from_fn(|| timers.pop_due(Instant(30)))
            .map(|due| due.timer_id)
            .collect();
        assert_eq!(fired, vec![2, 4, 1, 3]);
        assert_eq!(timers.next_deadline(), None);
    }
}
