//! The subscription block's buffers, apart from signals so that they can
//! be tested alone: the epochs still open on this node (changes captured,
//! mark not yet from every LDM instance), and the complete epochs kept
//! until every subscriber acknowledged them.
//!
//! An epoch is complete on this node once every LDM instance passed on
//! its mark: each instance passes its changes on before the mark, so no
//! change of the epoch can come after. Complete epochs come out in
//! ascending order, each once, with the changes in the order they were
//! handed in (per LDM instance, its commit order; a row lives on one
//! instance, so one row's changes keep their commit order). An epoch with
//! no change still comes out, empty.
//!
//! The complete epochs stay here, with their bytes, until every
//! subscriber acknowledged them: what a resend after a node failure reads
//! from (docs/events.md, "Take-over and resend"). They count against
//! `MaxBufferedEpochBytes`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The changes of one epoch (`signal::sub_change` entries back to back).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochData {
    pub epoch: u64,
    pub count: u32,
    pub changes: Vec<u8>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct EpochBuffer {
    /// The last mark from each LDM instance of the node.
    marks: Vec<u64>,
    /// Epochs marked by some instance but not yet by all.
    marked: BTreeSet<u64>,
    /// Changes of epochs not yet complete.
    open: BTreeMap<u64, EpochData>,
    /// Complete epochs not yet acknowledged by every subscriber, ascending;
    /// shared with what [`EpochBuffer::mark`] handed out to be sent (a
    /// copy of every epoch's changes cost as much as capturing them).
    kept: VecDeque<Arc<EpochData>>,
    /// The last epoch complete here (0: none yet).
    complete: u64,
    /// Bytes of changes in `open` and `kept`.
    bytes: u64,
    /// Changes handed in for an epoch already complete: dropped, counted.
    /// Not expected (a taken-over commit is filed in the epoch its other
    /// replicas committed in, which the master keeps open until the
    /// takeover is done); the simulator's crash tests assert it stays 0.
    late: u64,
    /// Entries (and their count) that go first in the next epoch to
    /// complete (`add_to_next`).
    next_front: (u32, Vec<u8>),
    /// Bytes the last complete epoch held, at most
    /// [`EPOCH_PRESIZE_BYTES_MAX`]: a new epoch's buffer starts that large,
    /// so that it is not grown (and copied) step by step as changes come.
    presize: usize,
}

/// The most bytes a new epoch's buffer is given before its first change.
pub const EPOCH_PRESIZE_BYTES_MAX: usize = 4 << 20;

impl EpochBuffer {
    /// A buffer fed by `ldm_instances` LDM instances.
    pub fn new(ldm_instances: usize) -> EpochBuffer {
        EpochBuffer {
            marks: vec![0; ldm_instances],
            marked: BTreeSet::new(),
            open: BTreeMap::new(),
            kept: VecDeque::new(),
            complete: 0,
            bytes: 0,
            late: 0,
            next_front: (0, Vec::new()),
            presize: 0,
        }
    }

    /// The last epoch complete on this node (0: none yet).
    pub fn complete(&self) -> u64 {
        self.complete
    }

    /// Bytes of changes held, open and kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Changes dropped for coming after their epoch was complete.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// The complete epochs kept, ascending.
    pub fn kept(&self) -> &VecDeque<Arc<EpochData>> {
        &self.kept
    }

    /// Epochs open (changes here, not complete yet).
    pub fn open_epochs(&self) -> usize {
        self.open.len()
    }

    /// `count` changes of `epoch` (entries in `changes`); false (dropped)
    /// when the epoch is already complete here.
    pub fn add(&mut self, epoch: u64, count: u32, changes: &[u8]) -> bool {
        if epoch <= self.complete {
            self.late += u64::from(count);
            return false;
        }
        let presize = self.presize;
        let data = self.open.entry(epoch).or_insert_with(|| EpochData {
            epoch,
            count: 0,
            changes: Vec::with_capacity(presize),
        });
        data.count += count;
        data.changes.extend_from_slice(changes);
        self.bytes += changes.len() as u64;
        true
    }

    /// Puts `changes` (`count` entries) first in the next epoch to
    /// complete, whichever it is (a schema entry whose changes before it
    /// are all in complete epochs).
    pub fn add_to_next(&mut self, count: u32, changes: &[u8]) {
        self.next_front.0 += count;
        self.next_front.1.extend_from_slice(changes);
        self.bytes += changes.len() as u64;
    }

    /// LDM instance `instance` says every change of `epoch` it captured is
    /// here. Returns the epochs that are complete now, ascending; they are
    /// kept (see [`EpochBuffer::acknowledged`]).
    pub fn mark(&mut self, instance: usize, epoch: u64) -> Vec<Arc<EpochData>> {
        let Some(last) = self.marks.get_mut(instance) else {
            return Vec::new();
        };
        if epoch <= *last {
            // Marks come in ascending order; a repeated one changes nothing.
            return Vec::new();
        }
        *last = epoch;
        if epoch > self.complete {
            self.marked.insert(epoch);
        }
        let upto = self.marks.iter().copied().min().unwrap_or(0);
        let mut done = Vec::new();
        while let Some(&first) = self.marked.first() {
            if first > upto {
                break;
            }
            self.marked.pop_first();
            // Open epochs below it that no mark named come out with it, in
            // their order (not expected: every epoch is marked).
            while let Some(entry) = self.open.first_entry() {
                if *entry.key() > first {
                    break;
                }
                done.push(entry.remove());
            }
            if done.last().is_none_or(|d| d.epoch != first) {
                done.push(EpochData {
                    epoch: first,
                    ..EpochData::default()
                });
            }
            if !self.next_front.1.is_empty() {
                let (count, mut front) = std::mem::take(&mut self.next_front);
                let first_done = done.first_mut().expect("one pushed");
                front.extend_from_slice(&first_done.changes);
                first_done.changes = front;
                first_done.count += count;
            }
            self.complete = first;
        }
        if let Some(last) = done.last() {
            self.presize = last.changes.len().min(EPOCH_PRESIZE_BYTES_MAX);
        }
        let done: Vec<Arc<EpochData>> = done.into_iter().map(Arc::new).collect();
        self.kept.extend(done.iter().cloned());
        done
    }

    /// Every subscriber holds every epoch up to `epoch`: the kept ones are
    /// dropped.
    pub fn acknowledged(&mut self, epoch: u64) {
        while self.kept.front().is_some_and(|k| k.epoch <= epoch) {
            let k = self.kept.pop_front().expect("front");
            self.bytes -= k.changes.len() as u64;
        }
    }

    /// Kept epochs above `epoch`: how far behind a subscriber that
    /// acknowledged `epoch` is.
    pub fn kept_above(&self, epoch: u64) -> usize {
        self.kept.len() - self.kept.partition_point(|k| k.epoch <= epoch)
    }

    /// Drops every open epoch (no subscriber is left to want them).
    pub fn drop_open(&mut self) {
        for (_, data) in std::mem::take(&mut self.open) {
            self.bytes -= data.changes.len() as u64;
        }
        let (_, front) = std::mem::take(&mut self.next_front);
        self.bytes -= front.len() as u64;
    }

    /// The first open epoch, if any.
    pub fn first_open(&self) -> Option<u64> {
        self.open.keys().next().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(done: &[Arc<EpochData>]) -> Vec<u64> {
        done.iter().map(|d| d.epoch).collect()
    }

    #[test]
    fn an_epoch_completes_only_once_every_instance_marked_it() {
        let mut b = EpochBuffer::new(2);
        assert!(b.add(10, 1, b"a"));
        assert!(b.mark(0, 10).is_empty(), "instance 1 has not marked it");
        assert!(b.add(10, 1, b"b"));
        let done = b.mark(1, 10);
        assert_eq!(epochs(&done), [10]);
        assert_eq!(done[0].changes, b"ab", "in the order handed in");
        assert_eq!(done[0].count, 2);
        assert_eq!(b.complete(), 10);
    }

    #[test]
    fn epochs_come_out_ascending_and_empty_ones_too() {
        let mut b = EpochBuffer::new(2);
        b.add(12, 1, b"x");
        for e in [10, 11, 12] {
            assert!(b.mark(0, e).is_empty());
        }
        let done = b.mark(1, 12);
        assert_eq!(
            epochs(&done),
            [10, 11, 12],
            "one mark completes all below it"
        );
        assert!(done[0].changes.is_empty() && done[1].changes.is_empty());
        assert_eq!(done[2].changes, b"x");
        // A repeated or older mark changes nothing; nothing comes twice.
        assert!(b.mark(1, 12).is_empty());
        assert!(b.mark(0, 11).is_empty());
        assert_eq!(epochs(&b.mark(0, 13)), Vec::<u64>::new());
        assert_eq!(epochs(&b.mark(1, 13)), [13]);
    }

    #[test]
    fn a_change_after_its_epoch_completed_is_dropped_and_counted() {
        let mut b = EpochBuffer::new(1);
        b.mark(0, 5);
        assert!(!b.add(5, 2, b"zz"));
        assert!(!b.add(4, 1, b"z"));
        assert_eq!(b.late(), 3);
        assert_eq!(b.bytes(), 0);
    }

    #[test]
    fn entries_added_to_the_next_epoch_go_first_in_it() {
        let mut b = EpochBuffer::new(1);
        b.mark(0, 5);
        b.add(7, 1, b"x");
        b.add_to_next(1, b"s");
        let done = b.mark(0, 6);
        assert_eq!(epochs(&done), [6]);
        assert_eq!(done[0].changes, b"s", "the next epoch, though empty");
        assert_eq!(done[0].count, 1);
        let done = b.mark(0, 7);
        assert_eq!(done[0].changes, b"x", "once only");
        assert_eq!(b.bytes(), 2);
    }

    /// A complete epoch is handed out and kept as one copy, and the next
    /// epoch's buffer starts as large as the last one was.
    #[test]
    fn complete_epochs_are_shared_and_size_the_next() {
        let mut b = EpochBuffer::new(1);
        let changes = vec![7u8; 5_000];
        assert!(b.add(1, 1, &changes));
        let done = b.mark(0, 1);
        assert!(Arc::ptr_eq(&done[0], &b.kept()[0]), "kept, not copied");
        assert!(b.add(2, 1, b"x"));
        assert!(b.open[&2].changes.capacity() >= changes.len());
        // Never more than the bound, however large an epoch was.
        assert!(b.add(3, 1, &vec![0; EPOCH_PRESIZE_BYTES_MAX + 1]));
        b.mark(0, 3);
        assert!(b.add(4, 1, b"x"));
        assert_eq!(b.open[&4].changes.capacity(), EPOCH_PRESIZE_BYTES_MAX);
    }

    #[test]
    fn kept_epochs_count_until_acknowledged() {
        let mut b = EpochBuffer::new(1);
        b.add(1, 1, b"aaaa");
        b.add(2, 1, b"bb");
        b.mark(0, 1);
        b.mark(0, 2);
        b.mark(0, 3);
        assert_eq!(b.bytes(), 6);
        assert_eq!(b.kept_above(0), 3);
        assert_eq!(b.kept_above(1), 2);
        b.acknowledged(1);
        assert_eq!(b.bytes(), 2);
        assert_eq!(b.kept_above(0), 2);
        b.acknowledged(3);
        assert_eq!(b.bytes(), 0);
        assert!(b.kept().is_empty());
    }

    #[test]
    fn dropping_open_epochs_frees_their_bytes() {
        let mut b = EpochBuffer::new(1);
        b.add(7, 1, b"abc");
        assert_eq!(b.first_open(), Some(7));
        b.drop_open();
        assert_eq!(b.bytes(), 0);
        assert_eq!(b.open_epochs(), 0);
        assert_eq!(
            epochs(&b.mark(0, 7)),
            [7],
            "the epoch still completes, empty"
        );
    }
}
