//! The change stream's capture (docs/events.md): the LDM's side of
//! the subscription block ([`crate::subscription`]).
//!
//! The subscription block tells each LDM instance of its node which tables
//! to capture (`SubCaptureReq`, the whole set). The instance marks their
//! fragments here; every commit then leaves one `signal::sub_change` entry
//! per changed row in the storage instance, with both images, and the
//! block hands them to the subscription block as `SubTableData` tagged
//! with the commit's epoch, right after the fragment's commit. The
//! master's epoch-complete marks (`SubGcpCompleteRep`) reach every LDM
//! instance and go on to the subscription block the same way: one queue
//! from this thread to that one, so an epoch's mark from an instance comes
//! after every change of the epoch it captured (NDB's LQH → SUMA path).
//!
//! With no table captured a commit costs one test of an empty list here
//! and one test per fragment in storage: no lock, no allocation.
//!
//! The commits of a millisecond of the LDM thread go as one `SubTableData`
//! (one signal, one queue push and at most one wake-up of the `rep`
//! thread, not one per commit nor per round): changes gather in `pending`
//! until the flush timer, set at the first one, fires
//! [`CAPTURE_FLUSH_DELAY`] later; a change of another epoch, an epoch's
//! mark and a schema entry flush first (so the order the subscription
//! block relies on holds), and so does [`CAPTURE_BATCH_BYTES_MAX`] of
//! changes.

use std::time::Duration;

use kernel::Context;
use signal::{sub_change, BlockRef, SignalBody};
use storage::instance::LdmInstance;

/// How long captured changes wait for more before they go. Nothing
/// needs them sooner: the subscription block sends an epoch only once it
/// is complete (`TimeBetweenEpochs`, 100 ms by default), and the epoch's
/// mark flushes what is pending first. At zero (the next round) the `rep`
/// thread was woken for every LDM round with a commit: on a 2 x 2 sandbox
/// under `skarv bench flex -p 8` updates with a subscriber, about 10,000
/// futex wake-ups a second per node, 7 % of the machine's CPU; at 1 ms,
/// 30 times fewer.
pub const CAPTURE_FLUSH_DELAY: Duration = Duration::from_millis(1);
/// Bytes of captured changes that go at once, without waiting for the
/// timer: bounds one `SubTableData` (and the memory it holds).
pub const CAPTURE_BATCH_BYTES_MAX: usize = 256 * 1024;
/// (replaced table, copy) pairs an LDM instance remembers: of the copying
/// ALTERs it applied ([`Capture::follow`]) and of the definitions it
/// loaded at its start. Past it the oldest are forgotten: a copy whose
/// pair is gone is captured once the subscription block asks for it by
/// name, which it does after the `REPLACE` entry, so only a node restarted
/// after more than this many copies, subscribed again by an API that has
/// not seen the entry, would miss it.
pub const FOLLOWED_MAX: usize = 1_024;

/// What an LDM instance captures, and for whom.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    /// The node's subscription block; `None` when the node runs none (a
    /// test's node): nothing is captured nor passed on.
    pub to: Option<BlockRef>,
    /// Table ids captured, ascending.
    pub tables: Vec<u32>,
    /// (replaced table, its copy) of the copying ALTERs of captured tables
    /// applied here, oldest first (at most [`FOLLOWED_MAX`]): the copy is
    /// captured whenever the table it replaced is asked for.
    followed: Vec<(u32, u32)>,
    /// The highest epoch of a commit run on this instance: an epoch above
    /// what this was when capture started is captured whole here.
    pub max_epoch: u64,
    /// Captured changes not handed over yet, all of `pending_epoch`.
    pending: Vec<u8>,
    pending_count: u32,
    pending_epoch: u64,
    /// The flush timer is set (its id is the LDM block's).
    pub flush_armed: bool,
    /// What a commit captured while a backup log is open: the log takes
    /// it all, the subscription block its subscribed tables' part.
    taken: Vec<u8>,
}

impl Capture {
    /// Whether any table is captured.
    #[inline]
    pub fn on(&self) -> bool {
        !self.tables.is_empty()
    }

    /// Captures `tables` (what the subscription block asks for, sorted)
    /// and the copies that replaced any of them here: the block may ask
    /// before it has filed a copy's `REPLACE` entry and knows the copy, or
    /// (a restarted node) never saw the entry. Returns the (replaced,
    /// copy) pairs so added, for the block to add the copies to the
    /// subscriptions of the replaced tables.
    pub fn set_tables(&mut self, mut tables: Vec<u32>) -> Vec<(u32, u32)> {
        let added: Vec<(u32, u32)> = self
            .followed
            .iter()
            .filter(|(old, new)| {
                tables.binary_search(old).is_ok() && tables.binary_search(new).is_err()
            })
            .copied()
            .collect();
        tables.extend(added.iter().map(|&(_, new)| new));
        tables.sort_unstable();
        tables.dedup();
        self.tables = tables;
        added
    }

    /// A copying ALTER's copy `new` took the name of `old` and replaces it
    /// (`TableDef::replaces`): if `old` is captured here and `new` is not,
    /// `new` is from now on (the caller marks its fragments) and true is
    /// returned: the caller sends the `REPLACE` entry. The copy was
    /// written only by the ALTER until now (every SQL node waits for the
    /// copy to end before it writes the table), so nothing of it is lost.
    pub fn follow(&mut self, old: u32, new: u32) -> bool {
        self.remember(old, new);
        if self.tables.binary_search(&old).is_err() {
            return false;
        }
        let Err(at) = self.tables.binary_search(&new) else {
            return false;
        };
        self.tables.insert(at, new);
        true
    }

    /// Remembers that `new` replaces `old` (an alter applied here, or a
    /// definition loaded at a start): [`Capture::set_tables`] captures it
    /// whenever `old` is asked for.
    pub fn remember(&mut self, old: u32, new: u32) {
        if self.followed.contains(&(old, new)) {
            return;
        }
        if self.followed.len() >= FOLLOWED_MAX {
            self.followed.remove(0);
        }
        self.followed.push((old, new));
    }

    /// `new` no longer replaces `old` (a swap undone).
    pub fn unfollow(&mut self, old: u32, new: u32) {
        self.followed.retain(|&pair| pair != (old, new));
    }

    /// Table `table` was dropped: it is no longer a copy to follow.
    pub fn forget(&mut self, table: u32) {
        self.followed.retain(|&(_, new)| new != table);
    }

    /// Marks the fragments of `instance` as the captured tables ask. Every
    /// replica captures; which node sends a partition's changes is decided
    /// by the subscription block when an epoch is sent (its buckets).
    /// `also`: the tables of the open backup logs (`backup`), sorted.
    pub fn apply(&self, instance: &mut LdmInstance, also: &[u32]) {
        let fragments: Vec<(u32, u32)> = instance.fragment_ids().collect();
        for (t, p) in fragments {
            let on = self.tables.binary_search(&t).is_ok() || also.binary_search(&t).is_ok();
            instance.set_capture(t, p, on.then_some(0));
        }
    }

    /// With a backup log open: takes what `instance` captured (one
    /// fragment's commit) for the log to read; then
    /// [`Capture::hand_over_taken`] passes the subscribed tables' part on.
    pub fn take_for_log(&mut self, instance: &mut LdmInstance) -> &[u8] {
        self.taken.clear();
        instance.take_captured(&mut self.taken);
        &self.taken
    }

    /// [`Capture::hand_over`] of what [`Capture::take_for_log`] took,
    /// less the changes of tables no subscription captures (a backup's
    /// only).
    #[must_use = "true: set the flush timer"]
    pub fn hand_over_taken(&mut self, epoch: u64, ctx: &mut Context<'_>) -> bool {
        let taken = std::mem::take(&mut self.taken);
        let arm = self.pass_on(&taken, epoch, ctx);
        self.taken = taken;
        self.taken.clear();
        arm
    }

    fn pass_on(&mut self, taken: &[u8], epoch: u64, ctx: &mut Context<'_>) -> bool {
        if self.to.is_none() || self.tables.is_empty() || taken.is_empty() {
            return false;
        }
        if self.pending_count > 0 && self.pending_epoch != epoch {
            self.flush(ctx);
        }
        let mut kept = 0;
        for entry in sub_change::entries(taken) {
            let entry = entry.expect("this instance's capture encodes whole entries");
            if self.tables.binary_search(&entry.table).is_ok() {
                sub_change::push(&mut self.pending, &entry);
                kept += 1;
            }
        }
        self.added(kept, epoch, ctx)
    }

    /// `count` changes of `epoch` joined `pending`: sends them at once
    /// when the batch is full; true when the flush timer is to be set.
    fn added(&mut self, count: u32, epoch: u64, ctx: &mut Context<'_>) -> bool {
        if count == 0 {
            return false;
        }
        self.pending_epoch = epoch;
        self.pending_count += count;
        if self.pending.len() >= CAPTURE_BATCH_BYTES_MAX {
            self.flush(ctx);
            return false;
        }
        !std::mem::replace(&mut self.flush_armed, true)
    }

    /// Hands the subscription block a schema entry: table `table`, which
    /// this instance captures, was altered (`sub_change::ALTER`, its new
    /// `version`) or dropped (`sub_change::DROP`, its last) here. Sent
    /// after every change this instance captured under the old definition
    /// (an alter is applied once no transaction is on the table) and
    /// before any under the new, on the same queue; the block files it in
    /// an epoch once every instance of the node sent it (docs/events.md).
    /// `def`: an alter's new definition (`schema::TableDef::encode`), in
    /// the after image.
    pub fn schema_entry(
        &mut self,
        kind: u8,
        table: u32,
        version: u32,
        def: &[u8],
        ctx: &mut Context<'_>,
    ) {
        self.send_schema(kind, table, version, &[], def, ctx);
    }

    /// Hands the subscription block a `REPLACE` entry: `table` (version
    /// `version`, definition `def`), a copying ALTER's copy, replaces
    /// `replaced` and is captured from now on ([`Capture::follow`]). Sent
    /// before any change of the copy, on the same queue.
    pub fn replace_entry(
        &mut self,
        replaced: u32,
        table: u32,
        version: u32,
        def: &[u8],
        ctx: &mut Context<'_>,
    ) {
        let before = replaced.to_le_bytes();
        self.send_schema(sub_change::REPLACE, table, version, &before, def, ctx);
    }

    fn send_schema(
        &mut self,
        kind: u8,
        table: u32,
        version: u32,
        before: &[u8],
        def: &[u8],
        ctx: &mut Context<'_>,
    ) {
        let Some(to) = self.to else {
            return;
        };
        if self.tables.binary_search(&table).is_err() {
            return;
        }
        // Behind every change captured under the old definition.
        self.flush(ctx);
        let mut changes = Vec::new();
        sub_change::push(
            &mut changes,
            &sub_change::Entry {
                kind,
                flags: 0,
                table,
                version,
                partition: sub_change::ALL_PARTITIONS,
                before,
                after: def,
            },
        );
        ctx.send(
            to,
            SignalBody::SubTableData {
                epoch: sub_change::SCHEMA_EPOCH,
                count: 1,
                changes,
            },
        );
    }

    /// Takes what `instance` captured (one fragment's commit), changes of
    /// `epoch`, for the subscription block (see the module doc); the
    /// caller sets the flush timer when it returns true.
    #[must_use = "true: set the flush timer"]
    pub fn hand_over(
        &mut self,
        instance: &mut LdmInstance,
        epoch: u64,
        ctx: &mut Context<'_>,
    ) -> bool {
        if self.to.is_none() {
            return false;
        }
        if self.pending_count > 0 && self.pending_epoch != epoch {
            self.flush(ctx);
        }
        let count = instance.take_captured(&mut self.pending);
        self.added(count, epoch, ctx)
    }

    /// Sends the pending changes, if any, as one `SubTableData`.
    pub fn flush(&mut self, ctx: &mut Context<'_>) {
        let Some(to) = self.to else {
            return;
        };
        if self.pending_count == 0 {
            return;
        }
        let mut changes = ctx.buffer();
        std::mem::swap(&mut changes, &mut self.pending);
        // The next batch is likely the size of this one: room for it now
        // rather than growing (and copying) step by step as commits come.
        self.pending
            .reserve(changes.len().min(CAPTURE_BATCH_BYTES_MAX));
        ctx.send(
            to,
            SignalBody::SubTableData {
                epoch: self.pending_epoch,
                count: std::mem::take(&mut self.pending_count),
                changes,
            },
        );
    }
}
