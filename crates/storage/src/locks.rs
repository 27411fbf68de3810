//! Row locks of one partition (NDB: the lock queues of DBACC).
//!
//! Reads take no lock by default (DESIGN.md §4); `LOCK IN SHARE MODE`,
//! `FOR UPDATE` and every write take a row lock that is held until the
//! transaction commits or aborts. This module decides who holds a row and who
//! waits for it, and hands back, on every release, the waiting operations
//! that may now run. It knows nothing of operation records, timers or
//! deadlocks: the LDM maps an [`OpId`] back to its operation, and the
//! transaction coordinator ends a deadlock by timing a waiter out, which
//! reaches this module as [`LockTable::cancel`].
//!
//! Rules:
//! - Shared locks are compatible with each other; an exclusive lock with
//!   nothing held by another transaction.
//! - Waiters are served first in, first out, and a request that finds anyone
//!   waiting waits too, even a shared request that the holders would allow:
//!   a stream of readers cannot starve a writer.
//! - A transaction that already holds the row gets `AlreadyHeld` for the same
//!   or a weaker mode. Asking for `Exclusive` while holding `Shared` is an
//!   *upgrade*: granted at once when the transaction is the only holder, else
//!   it waits *ahead of* every ordinary waiter (behind earlier upgrades). NDB
//!   gives upgrades this priority because the upgrading transaction already
//!   holds the row: making it wait behind a writer that in turn waits for it
//!   would be a certain deadlock.
//! - One request per transaction and row may wait. Further operations of the
//!   same transaction on the row wait in the LDM's own chain of operations,
//!   as NDB's parallel queue does; asking again here is refused.
//!
//! Invariants (checked by [`LockTable::check_invariants`] in tests): an entry
//! exists exactly for the rows with at least one holder; an exclusive holder
//! is the only holder; a row with waiters has holders, and its first waiter
//! cannot be granted (else it would have been). Lock entries of rows that
//! become free are removed, so the table does not grow with the rows ever
//! locked.
//!
//! Memory and speed: the map holds one small entry per locked row with the
//! first holder inline, which is all an uncontended lock needs. Further
//! shared holders and all waiters are nodes of one pool, linked by index and
//! recycled through a free list. Neither the map nor the pool shrinks, so a
//! warm table locks and unlocks without allocating.

use std::collections::hash_map::{Entry, HashMap};
use stdx::IdMap;

use crate::RowId;

/// How many requests may wait in one lock table, all rows together. A full
/// table refuses new waiters with [`LockError::TooManyWaiters`], a temporary
/// error upstream, instead of growing without bound (DESIGN.md §2, overload).
pub const LOCK_WAITERS_MAX: u32 = 16_384;

/// A transaction, as the transaction coordinator names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u64);

/// The operation that asked for a lock; the LDM maps it back to its
/// operation record when the lock is granted.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

/// The strength of a row lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// The answer to [`LockTable::acquire`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The transaction now holds the row in the mode asked for.
    Granted,
    /// The request waits; a later release or cancel returns it as a [`Grant`].
    Queued,
    /// The transaction already held the row in this mode or a stronger one;
    /// nothing changed.
    AlreadyHeld,
    /// [`LockTable::try_acquire`] only: the request would have waited (the
    /// row is held in a conflicting mode, or others wait for it); nothing
    /// changed, nothing is queued.
    Busy,
}

/// A lock request: one holder or one waiter of a row.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LockRequest {
    pub tx: TxId,
    /// The operation that was granted the lock (for a holder) or waits (for a
    /// waiter).
    pub op: OpId,
    pub mode: LockMode,
}

/// A waiting request that has just been granted: the LDM resumes `op`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub row: RowId,
    pub tx: TxId,
    pub op: OpId,
    pub mode: LockMode,
}

/// Why a lock request was refused. Nothing changed in the table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error(
        "too many lock waiters: {waiters_max} requests already wait in this lock table; \
         {tx:?} ({op:?}) cannot wait for {row:?}; retry the transaction later"
    )]
    TooManyWaiters {
        row: RowId,
        tx: TxId,
        op: OpId,
        waiters_max: u32,
    },
    #[error(
        "{tx:?} asked for {row:?} with {op:?} while its {waiting_op:?} still waits for that \
         row; only one request per transaction and row may wait"
    )]
    AlreadyWaiting {
        row: RowId,
        tx: TxId,
        op: OpId,
        waiting_op: OpId,
    },
}

/// The row locks of one partition. Single-threaded: the LDM instance that
/// owns the partition owns its lock table.
pub struct LockTable {
    entries: IdMap<RowId, LockEntry>,
    pool: NodePool,
    /// Requests waiting, all rows together; at most `waiters_max`.
    waiters: u32,
    waiters_max: u32,
}

/// "No node": the end of a list in [`NodePool`].
const NIL: u32 = u32::MAX;

/// The lock state of one locked row. Exists only while the row has a holder.
#[derive(Clone, Copy, Debug)]
struct LockEntry {
    /// The first holder, inline because most locked rows have exactly one.
    /// `None` only for a moment inside a release, before a waiter or another
    /// holder takes its place.
    first: Option<LockRequest>,
    /// Further holders (all shared), a list of pool nodes in no order.
    more: u32,
    /// Waiters, a list of pool nodes in the order they will be served.
    waiters_head: u32,
    waiters_tail: u32,
}

/// A holder or a waiter beyond the one inline in [`LockEntry`].
#[derive(Clone, Copy, Debug)]
struct LockNode {
    request: LockRequest,
    /// A waiter that already holds the row shared and waits to hold it
    /// exclusively.
    upgrade: bool,
    next: u32,
}

/// The nodes of all rows' lists, recycled through a free list so that a warm
/// table does not allocate.
struct NodePool {
    nodes: Vec<LockNode>,
    free: u32,
}

impl NodePool {
    fn alloc(&mut self, request: LockRequest, upgrade: bool) -> u32 {
        let node = LockNode {
            request,
            upgrade,
            next: NIL,
        };
        if self.free != NIL {
            let index = self.free;
            self.free = self.nodes[index as usize].next;
            self.nodes[index as usize] = node;
            index
        } else {
            let index = u32::try_from(self.nodes.len()).expect("lock node pool exceeds u32");
            assert!(index != NIL, "lock node pool exhausted the index space");
            self.nodes.push(node);
            index
        }
    }

    fn free(&mut self, index: u32) {
        debug_assert!((index as usize) < self.nodes.len());
        self.nodes[index as usize].next = self.free;
        self.free = index;
    }

    fn get(&self, index: u32) -> &LockNode {
        &self.nodes[index as usize]
    }

    fn get_mut(&mut self, index: u32) -> &mut LockNode {
        &mut self.nodes[index as usize]
    }
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable::new()
    }
}

impl LockTable {
    /// An empty table that allows [`LOCK_WAITERS_MAX`] waiters.
    pub fn new() -> LockTable {
        LockTable::with_waiters_max(LOCK_WAITERS_MAX)
    }

    /// An empty table that allows `waiters_max` waiters (tests use a small
    /// bound).
    pub fn with_waiters_max(waiters_max: u32) -> LockTable {
        assert!(waiters_max > 0, "a lock table must allow a waiter");
        LockTable {
            entries: HashMap::default(),
            pool: NodePool {
                nodes: Vec::new(),
                free: NIL,
            },
            waiters: 0,
            waiters_max,
        }
    }

    /// Makes room for `rows` locked rows and `nodes` extra holders and
    /// waiters, so that the table does not allocate until it holds more.
    pub fn reserve(&mut self, rows: usize, nodes: usize) {
        self.entries.reserve(rows);
        self.pool.nodes.reserve(nodes);
    }

    /// Asks for `row` in `mode` on behalf of operation `op` of transaction
    /// `tx`. See the module documentation for the rules. On `Queued`, the
    /// request comes back as a [`Grant`] from a later [`release_tx`],
    /// [`release_all`] or [`cancel`] (or never, if the transaction
    /// coordinator cancels it first).
    ///
    /// [`release_tx`]: LockTable::release_tx
    /// [`release_all`]: LockTable::release_all
    /// [`cancel`]: LockTable::cancel
    pub fn acquire(
        &mut self,
        row: RowId,
        tx: TxId,
        op: OpId,
        mode: LockMode,
    ) -> Result<Acquire, LockError> {
        self.acquire_or_not(row, tx, op, mode, true)
    }

    /// [`LockTable::acquire`] for a request that must not wait (`FOR UPDATE
    /// NOWAIT`, `SKIP LOCKED`): where `acquire` would queue it, `Busy`, and
    /// the table is as it was. Never `Queued`; `TooManyWaiters` cannot
    /// happen, `AlreadyWaiting` can (the transaction's earlier request
    /// waits).
    pub fn try_acquire(
        &mut self,
        row: RowId,
        tx: TxId,
        op: OpId,
        mode: LockMode,
    ) -> Result<Acquire, LockError> {
        self.acquire_or_not(row, tx, op, mode, false)
    }

    fn acquire_or_not(
        &mut self,
        row: RowId,
        tx: TxId,
        op: OpId,
        mode: LockMode,
        wait: bool,
    ) -> Result<Acquire, LockError> {
        let request = LockRequest { tx, op, mode };
        let entry = match self.entries.entry(row) {
            Entry::Vacant(vacant) => {
                vacant.insert(LockEntry {
                    first: Some(request),
                    more: NIL,
                    waiters_head: NIL,
                    waiters_tail: NIL,
                });
                return Ok(Acquire::Granted);
            }
            Entry::Occupied(occupied) => occupied.into_mut(),
        };
        let first = entry
            .first
            .expect("a lock entry between calls has a first holder");
        let held = if first.tx == tx {
            Some(first.mode)
        } else {
            find_tx(&self.pool, entry.more, tx).map(|index| self.pool.get(index).request.mode)
        };
        let upgrade = match held {
            Some(LockMode::Exclusive) => return Ok(Acquire::AlreadyHeld),
            Some(LockMode::Shared) if mode == LockMode::Shared => return Ok(Acquire::AlreadyHeld),
            Some(LockMode::Shared) => true,
            None => false,
        };
        if let Some(waiting) = find_tx(&self.pool, entry.waiters_head, tx) {
            return Err(LockError::AlreadyWaiting {
                row,
                tx,
                op,
                waiting_op: self.pool.get(waiting).request.op,
            });
        }
        if upgrade {
            if first.tx == tx && entry.more == NIL {
                // The only holder has nobody to wait for, whoever else waits.
                entry.first = Some(request);
                return Ok(Acquire::Granted);
            }
        } else if entry.waiters_head == NIL
            && mode == LockMode::Shared
            && first.mode == LockMode::Shared
        {
            // All holders are shared (an exclusive holder is alone) and no
            // writer waits.
            let node = self.pool.alloc(request, false);
            self.pool.get_mut(node).next = entry.more;
            entry.more = node;
            return Ok(Acquire::Granted);
        }
        if !wait {
            return Ok(Acquire::Busy);
        }
        if self.waiters >= self.waiters_max {
            return Err(LockError::TooManyWaiters {
                row,
                tx,
                op,
                waiters_max: self.waiters_max,
            });
        }
        let node = self.pool.alloc(request, upgrade);
        if upgrade {
            enqueue_upgrade(&mut self.pool, entry, node);
        } else {
            enqueue_back(&mut self.pool, entry, node);
        }
        self.waiters += 1;
        debug_assert!(self.waiters <= self.waiters_max);
        Ok(Acquire::Queued)
    }

    /// Releases everything `tx` has on `row`: its lock and its waiting
    /// request, if any (an abort may come while an operation waits). Appends
    /// the requests that can now be granted to `grants`, in the order they
    /// waited. Returns whether `tx` had anything on the row; releasing a row
    /// it does not hold is allowed and changes nothing, so that an abort can
    /// release every row it might hold.
    pub fn release_tx(&mut self, tx: TxId, row: RowId, grants: &mut Vec<Grant>) -> bool {
        let Entry::Occupied(mut occupied) = self.entries.entry(row) else {
            return false;
        };
        let entry = occupied.get_mut();
        let released_holder = remove_holder(&mut self.pool, entry, tx);
        let released_waiter =
            remove_waiter(&mut self.pool, entry, |request| request.tx == tx).is_some();
        if !released_holder && !released_waiter {
            return false;
        }
        if released_waiter {
            self.waiters -= 1;
        }
        self.waiters -= grant_waiters(&mut self.pool, entry, row, grants);
        if entry.first.is_none() {
            debug_assert!(
                entry.waiters_head == NIL,
                "a row without holders keeps no waiters"
            );
            occupied.remove();
        }
        true
    }

    /// [`release_tx`](LockTable::release_tx) for each of `rows`, typically
    /// every row a committing or aborting transaction touched. Returns how
    /// many of the rows `tx` had anything on.
    pub fn release_all(
        &mut self,
        tx: TxId,
        rows: impl IntoIterator<Item = RowId>,
        grants: &mut Vec<Grant>,
    ) -> usize {
        let mut released = 0;
        for row in rows {
            if self.release_tx(tx, row, grants) {
                released += 1;
            }
        }
        released
    }

    /// Takes the waiting request of operation `op` of `tx` off `row`'s queue
    /// (its wait timed out). A canceled upgrade leaves the shared lock held.
    /// Appends the requests that can now be granted to `grants`. Returns
    /// whether the request was waiting.
    pub fn cancel(&mut self, row: RowId, tx: TxId, op: OpId, grants: &mut Vec<Grant>) -> bool {
        let Some(entry) = self.entries.get_mut(&row) else {
            return false;
        };
        let removed = remove_waiter(&mut self.pool, entry, |request| {
            request.tx == tx && request.op == op
        });
        if removed.is_none() {
            return false;
        }
        self.waiters -= 1;
        self.waiters -= grant_waiters(&mut self.pool, entry, row, grants);
        debug_assert!(
            entry.first.is_some(),
            "canceling a waiter releases no holder"
        );
        true
    }

    /// The holders of `row`: the first holder, then the others in no
    /// particular order.
    pub fn holders(&self, row: RowId) -> impl Iterator<Item = LockRequest> + '_ {
        let entry = self.entries.get(&row);
        let first = entry.and_then(|entry| entry.first);
        let more = entry.map_or(NIL, |entry| entry.more);
        first.into_iter().chain(self.list(more))
    }

    /// The waiters of `row`, in the order they will be served.
    pub fn waiters(&self, row: RowId) -> impl Iterator<Item = LockRequest> + '_ {
        let head = self
            .entries
            .get(&row)
            .map_or(NIL, |entry| entry.waiters_head);
        self.list(head)
    }

    /// The mode in which `tx` holds `row`, if it does.
    pub fn held_mode(&self, row: RowId, tx: TxId) -> Option<LockMode> {
        self.holders(row)
            .find(|holder| holder.tx == tx)
            .map(|holder| holder.mode)
    }

    /// Whether anyone holds `row`.
    pub fn is_locked(&self, row: RowId) -> bool {
        self.entries.contains_key(&row)
    }

    /// How many rows are locked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many requests wait, all rows together.
    pub fn waiting(&self) -> u32 {
        self.waiters
    }

    fn list(&self, head: u32) -> impl Iterator<Item = LockRequest> + '_ {
        let mut index = head;
        std::iter::from_fn(move || {
            if index == NIL {
                return None;
            }
            let node = self.pool.get(index);
            index = node.next;
            Some(node.request)
        })
    }

    /// Checks every invariant of the module documentation; panics on the
    /// first broken one. Walks the whole table: for tests.
    pub fn check_invariants(&self) {
        let mut waiters = 0u32;
        let mut used_nodes = 0usize;
        for (row, entry) in &self.entries {
            let first = entry
                .first
                .unwrap_or_else(|| panic!("{row:?}: entry without a holder"));
            let more: Vec<LockNode> = self.nodes(entry.more).collect();
            used_nodes += more.len();
            if first.mode == LockMode::Exclusive {
                assert!(more.is_empty(), "{row:?}: an exclusive holder is not alone");
            }
            for node in &more {
                assert_eq!(
                    node.request.mode,
                    LockMode::Shared,
                    "{row:?}: a second holder is exclusive"
                );
                assert!(!node.upgrade, "{row:?}: a holder marked as an upgrade");
            }
            let holders: Vec<TxId> = std::iter::once(first.tx)
                .chain(more.iter().map(|node| node.request.tx))
                .collect();
            for (i, tx) in holders.iter().enumerate() {
                assert!(!holders[..i].contains(tx), "{row:?}: {tx:?} holds twice");
            }
            let queue: Vec<LockNode> = self.nodes(entry.waiters_head).collect();
            used_nodes += queue.len();
            waiters += u32::try_from(queue.len()).expect("waiters fit u32");
            let tail = self.nodes_indices(entry.waiters_head).last().unwrap_or(NIL);
            assert_eq!(tail, entry.waiters_tail, "{row:?}: waiter tail is stale");
            let mut upgrades_done = false;
            for (i, node) in queue.iter().enumerate() {
                let tx = node.request.tx;
                assert!(
                    !queue[..i].iter().any(|other| other.request.tx == tx),
                    "{row:?}: {tx:?} waits twice"
                );
                assert_eq!(
                    node.upgrade,
                    holders.contains(&tx),
                    "{row:?}: upgrade flag of {tx:?}"
                );
                if node.upgrade {
                    assert!(
                        !upgrades_done,
                        "{row:?}: an upgrade waits behind an ordinary waiter"
                    );
                    assert_eq!(node.request.mode, LockMode::Exclusive);
                    assert_eq!(
                        first.mode,
                        LockMode::Shared,
                        "{row:?}: upgrade under an exclusive holder"
                    );
                } else {
                    upgrades_done = true;
                }
            }
            if let Some(front) = queue.first() {
                let grantable = if front.upgrade {
                    holders.len() == 1
                } else {
                    front.request.mode == LockMode::Shared && first.mode == LockMode::Shared
                };
                assert!(!grantable, "{row:?}: the first waiter could be granted");
            }
        }
        assert_eq!(waiters, self.waiters, "waiter count");
        assert!(self.waiters <= self.waiters_max, "waiters beyond the bound");
        let free = self.nodes_indices(self.pool.free).count();
        assert_eq!(
            used_nodes + free,
            self.pool.nodes.len(),
            "lock nodes leaked"
        );
    }

    fn nodes_indices(&self, head: u32) -> impl Iterator<Item = u32> + '_ {
        let mut index = head;
        std::iter::from_fn(move || {
            if index == NIL {
                return None;
            }
            let current = index;
            index = self.pool.get(index).next;
            Some(current)
        })
    }

    fn nodes(&self, head: u32) -> impl Iterator<Item = LockNode> + '_ {
        self.nodes_indices(head).map(|index| *self.pool.get(index))
    }
}

/// The node of `tx` in the list (further holders or waiters) starting at
/// `head`.
fn find_tx(pool: &NodePool, head: u32, tx: TxId) -> Option<u32> {
    let mut index = head;
    while index != NIL {
        let node = pool.get(index);
        if node.request.tx == tx {
            return Some(index);
        }
        index = node.next;
    }
    None
}

fn enqueue_back(pool: &mut NodePool, entry: &mut LockEntry, node: u32) {
    debug_assert!(pool.get(node).next == NIL);
    if entry.waiters_tail == NIL {
        entry.waiters_head = node;
    } else {
        pool.get_mut(entry.waiters_tail).next = node;
    }
    entry.waiters_tail = node;
}

/// Queues an upgrade behind earlier upgrades and ahead of every ordinary
/// waiter.
fn enqueue_upgrade(pool: &mut NodePool, entry: &mut LockEntry, node: u32) {
    let mut previous = NIL;
    let mut index = entry.waiters_head;
    while index != NIL && pool.get(index).upgrade {
        previous = index;
        index = pool.get(index).next;
    }
    pool.get_mut(node).next = index;
    if previous == NIL {
        entry.waiters_head = node;
    } else {
        pool.get_mut(previous).next = node;
    }
    if index == NIL {
        entry.waiters_tail = node;
    }
}

/// Removes the holder `tx`, if it holds; a further holder takes the inline
/// place of a removed first holder.
fn remove_holder(pool: &mut NodePool, entry: &mut LockEntry, tx: TxId) -> bool {
    let first = entry
        .first
        .expect("a lock entry between calls has a first holder");
    if first.tx == tx {
        entry.first = None;
        if entry.more != NIL {
            let node = entry.more;
            entry.first = Some(pool.get(node).request);
            entry.more = pool.get(node).next;
            pool.free(node);
        }
        return true;
    }
    let mut previous = NIL;
    let mut index = entry.more;
    while index != NIL {
        let next = pool.get(index).next;
        if pool.get(index).request.tx == tx {
            if previous == NIL {
                entry.more = next;
            } else {
                pool.get_mut(previous).next = next;
            }
            pool.free(index);
            return true;
        }
        previous = index;
        index = next;
    }
    false
}

/// Removes the first waiter that `matches`, returning it.
fn remove_waiter(
    pool: &mut NodePool,
    entry: &mut LockEntry,
    matches: impl Fn(&LockRequest) -> bool,
) -> Option<LockNode> {
    let mut previous = NIL;
    let mut index = entry.waiters_head;
    while index != NIL {
        let node = *pool.get(index);
        if matches(&node.request) {
            if previous == NIL {
                entry.waiters_head = node.next;
            } else {
                pool.get_mut(previous).next = node.next;
            }
            if entry.waiters_tail == index {
                entry.waiters_tail = previous;
            }
            pool.free(index);
            return Some(node);
        }
        previous = index;
        index = node.next;
    }
    None
}

/// Grants waiters from the front of the queue for as long as the first one
/// is compatible with the holders. Returns how many were granted.
fn grant_waiters(
    pool: &mut NodePool,
    entry: &mut LockEntry,
    row: RowId,
    grants: &mut Vec<Grant>,
) -> u32 {
    let mut granted = 0;
    while entry.waiters_head != NIL {
        let index = entry.waiters_head;
        let node = *pool.get(index);
        let grantable = match entry.first {
            None => {
                debug_assert!(
                    !node.upgrade,
                    "an upgrade waits while its shared lock is held"
                );
                true
            }
            Some(first) if node.upgrade => entry.more == NIL && first.tx == node.request.tx,
            Some(first) => node.request.mode == LockMode::Shared && first.mode == LockMode::Shared,
        };
        if !grantable {
            break;
        }
        entry.waiters_head = node.next;
        if entry.waiters_head == NIL {
            entry.waiters_tail = NIL;
        }
        if node.upgrade || entry.first.is_none() {
            pool.free(index);
            entry.first = Some(node.request);
        } else {
            // Reuse the waiter's node as a holder's.
            pool.get_mut(index).next = entry.more;
            entry.more = index;
        }
        grants.push(Grant {
            row,
            tx: node.request.tx,
            op: node.request.op,
            mode: node.request.mode,
        });
        granted += 1;
    }
    granted
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    const S: LockMode = LockMode::Shared;
    const X: LockMode = LockMode::Exclusive;
    const R: RowId = RowId(7);

    fn grant(row: RowId, tx: u64, op: u32, mode: LockMode) -> Grant {
        Grant {
            row,
            tx: TxId(tx),
            op: OpId(op),
            mode,
        }
    }

    fn acquire(table: &mut LockTable, tx: u64, op: u32, mode: LockMode) -> Acquire {
        let result = table
            .acquire(R, TxId(tx), OpId(op), mode)
            .expect("request accepted");
        table.check_invariants();
        result
    }

    fn release(table: &mut LockTable, tx: u64) -> Vec<Grant> {
        let mut grants = Vec::new();
        assert!(
            table.release_tx(TxId(tx), R, &mut grants),
            "tx {tx} had something on the row"
        );
        table.check_invariants();
        grants
    }

    fn holder_txs(table: &LockTable) -> Vec<(u64, LockMode)> {
        let mut holders: Vec<(u64, LockMode)> = table
            .holders(R)
            .map(|holder| (holder.tx.0, holder.mode))
            .collect();
        holders.sort();
        holders
    }

    fn waiter_txs(table: &LockTable) -> Vec<(u64, LockMode)> {
        table
            .waiters(R)
            .map(|waiter| (waiter.tx.0, waiter.mode))
            .collect()
    }

    #[test]
    fn an_uncontended_lock_leaves_no_entry_behind() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, X), Acquire::Granted);
        assert!(table.is_locked(R));
        assert_eq!(table.len(), 1);
        assert_eq!(table.held_mode(R, TxId(1)), Some(X));
        assert!(release(&mut table, 1).is_empty());
        assert!(!table.is_locked(R));
        assert!(table.is_empty());
        assert_eq!(table.holders(R).count(), 0);
    }

    #[test]
    fn shared_locks_share_and_exclusive_waits_for_all_of_them() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 3, 30, X), Acquire::Queued);
        assert_eq!(holder_txs(&table), vec![(1, S), (2, S)]);
        assert_eq!(waiter_txs(&table), vec![(3, X)]);
        assert!(
            release(&mut table, 1).is_empty(),
            "tx 2 still holds the row shared"
        );
        assert_eq!(release(&mut table, 2), vec![grant(R, 3, 30, X)]);
        assert_eq!(holder_txs(&table), vec![(3, X)]);
        assert_eq!(table.waiting(), 0);
    }

    #[test]
    fn a_reader_behind_a_waiting_writer_waits_fifo() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, X), Acquire::Queued);
        assert_eq!(
            acquire(&mut table, 3, 30, S),
            Acquire::Queued,
            "no starvation of writers"
        );
        assert_eq!(acquire(&mut table, 4, 40, S), Acquire::Queued);
        assert_eq!(release(&mut table, 1), vec![grant(R, 2, 20, X)]);
        assert_eq!(
            release(&mut table, 2),
            vec![grant(R, 3, 30, S), grant(R, 4, 40, S)],
            "both readers are granted together, in order"
        );
        assert_eq!(holder_txs(&table), vec![(3, S), (4, S)]);
    }

    #[test]
    fn the_same_or_a_weaker_mode_is_already_held() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, X), Acquire::Granted);
        assert_eq!(acquire(&mut table, 1, 11, X), Acquire::AlreadyHeld);
        assert_eq!(acquire(&mut table, 1, 12, S), Acquire::AlreadyHeld);
        assert_eq!(
            table.holders(R).next().map(|holder| holder.op),
            Some(OpId(10))
        );
        assert_eq!(acquire(&mut table, 2, 20, S), Acquire::Queued);
        assert_eq!(acquire(&mut table, 3, 30, S), Acquire::Queued);
        assert!(
            table.acquire(R, TxId(3), OpId(31), S).is_err(),
            "tx 3 already waits"
        );
        // A waiting shared request is not "held": tx 2 waits behind tx 1.
        assert_eq!(table.held_mode(R, TxId(2)), None);
        assert_eq!(waiter_txs(&table), vec![(2, S), (3, S)]);
    }

    #[test]
    fn an_upgrade_by_the_only_holder_is_granted_at_once_even_with_waiters() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, X), Acquire::Queued);
        assert_eq!(acquire(&mut table, 1, 11, X), Acquire::Granted);
        assert_eq!(holder_txs(&table), vec![(1, X)]);
        assert_eq!(
            table.holders(R).next().map(|holder| holder.op),
            Some(OpId(11))
        );
        assert_eq!(release(&mut table, 1), vec![grant(R, 2, 20, X)]);
    }

    #[test]
    fn an_upgrade_waits_ahead_of_ordinary_waiters() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 3, 30, X), Acquire::Queued);
        assert_eq!(acquire(&mut table, 4, 40, S), Acquire::Queued);
        assert_eq!(acquire(&mut table, 1, 11, X), Acquire::Queued);
        assert_eq!(
            acquire(&mut table, 2, 21, X),
            Acquire::Queued,
            "behind the earlier upgrade"
        );
        assert_eq!(waiter_txs(&table), vec![(1, X), (2, X), (3, X), (4, S)]);
        // Both upgrade: a deadlock, which the coordinator ends by timing tx 2 out.
        let mut grants = Vec::new();
        assert!(table.cancel(R, TxId(2), OpId(21), &mut grants));
        assert!(grants.is_empty(), "tx 2 still holds the row shared");
        assert_eq!(holder_txs(&table), vec![(1, S), (2, S)]);
        assert_eq!(release(&mut table, 2), vec![grant(R, 1, 11, X)]);
        assert_eq!(holder_txs(&table), vec![(1, X)]);
        assert_eq!(release(&mut table, 1), vec![grant(R, 3, 30, X)]);
        assert_eq!(release(&mut table, 3), vec![grant(R, 4, 40, S)]);
        assert_eq!(release(&mut table, 4), vec![]);
        assert!(table.is_empty());
    }

    #[test]
    fn canceling_the_first_waiter_grants_the_ones_behind_it() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, X), Acquire::Queued);
        assert_eq!(acquire(&mut table, 3, 30, S), Acquire::Queued);
        assert_eq!(acquire(&mut table, 4, 40, X), Acquire::Queued);
        let mut grants = Vec::new();
        assert!(
            !table.cancel(R, TxId(2), OpId(99), &mut grants),
            "wrong operation"
        );
        assert!(table.cancel(R, TxId(2), OpId(20), &mut grants));
        assert_eq!(grants, vec![grant(R, 3, 30, S)]);
        assert_eq!(waiter_txs(&table), vec![(4, X)]);
        assert!(
            !table.cancel(R, TxId(2), OpId(20), &mut grants),
            "already gone"
        );
        table.check_invariants();
    }

    #[test]
    fn releasing_a_waiting_transaction_takes_it_off_the_queue() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, X), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, X), Acquire::Queued);
        assert_eq!(acquire(&mut table, 3, 30, X), Acquire::Queued);
        assert!(release(&mut table, 2).is_empty(), "aborted while waiting");
        assert_eq!(release(&mut table, 1), vec![grant(R, 3, 30, X)]);
        let mut grants = Vec::new();
        assert!(
            !table.release_tx(TxId(9), R, &mut grants),
            "tx 9 has nothing here"
        );
        assert!(!table.release_tx(TxId(9), RowId(1000), &mut grants));
        assert!(grants.is_empty());
    }

    #[test]
    fn a_request_that_must_not_wait_is_busy_and_changes_nothing() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, S), Acquire::Granted);
        // Compatible: granted as by `acquire`.
        assert_eq!(
            table.try_acquire(R, TxId(2), OpId(20), S),
            Ok(Acquire::Granted)
        );
        // A writer would wait for both readers.
        assert_eq!(
            table.try_acquire(R, TxId(3), OpId(30), X),
            Ok(Acquire::Busy)
        );
        assert!(waiter_txs(&table).is_empty(), "nothing queued");
        // An upgrade past another holder would wait too.
        assert_eq!(
            table.try_acquire(R, TxId(1), OpId(11), X),
            Ok(Acquire::Busy)
        );
        assert_eq!(holder_txs(&table), vec![(1, S), (2, S)]);
        // Behind a queued writer even a compatible reader would wait.
        assert_eq!(acquire(&mut table, 3, 31, X), Acquire::Queued);
        assert_eq!(
            table.try_acquire(R, TxId(4), OpId(40), S),
            Ok(Acquire::Busy)
        );
        assert_eq!(waiter_txs(&table), vec![(3, X)]);
        assert_eq!(
            table.try_acquire(R, TxId(1), OpId(12), S),
            Ok(Acquire::AlreadyHeld)
        );
        table.check_invariants();
    }

    #[test]
    fn a_second_waiting_request_of_one_transaction_is_refused() {
        let mut table = LockTable::new();
        assert_eq!(acquire(&mut table, 1, 10, X), Acquire::Granted);
        assert_eq!(acquire(&mut table, 2, 20, S), Acquire::Queued);
        for mode in [S, X] {
            assert_eq!(
                table.acquire(R, TxId(2), OpId(21), mode),
                Err(LockError::AlreadyWaiting {
                    row: R,
                    tx: TxId(2),
                    op: OpId(21),
                    waiting_op: OpId(20),
                })
            );
        }
        assert_eq!(waiter_txs(&table), vec![(2, S)]);
        table.check_invariants();
    }

    #[test]
    fn a_full_table_refuses_waiters_and_changes_nothing() {
        let mut table = LockTable::with_waiters_max(2);
        let mut grants = Vec::new();
        assert_eq!(
            table.acquire(RowId(1), TxId(1), OpId(1), X),
            Ok(Acquire::Granted)
        );
        assert_eq!(
            table.acquire(RowId(2), TxId(1), OpId(2), S),
            Ok(Acquire::Granted)
        );
        assert_eq!(
            table.acquire(RowId(1), TxId(2), OpId(3), S),
            Ok(Acquire::Queued)
        );
        assert_eq!(
            table.acquire(RowId(2), TxId(3), OpId(4), X),
            Ok(Acquire::Queued)
        );
        let refused = table.acquire(RowId(1), TxId(4), OpId(5), S);
        assert_eq!(
            refused,
            Err(LockError::TooManyWaiters {
                row: RowId(1),
                tx: TxId(4),
                op: OpId(5),
                waiters_max: 2,
            })
        );
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains("RowId(1)") && message.contains("retry"),
            "{message}"
        );
        // Granting does not need a waiter slot.
        assert_eq!(
            table.acquire(RowId(3), TxId(4), OpId(6), X),
            Ok(Acquire::Granted)
        );
        assert_eq!(
            table.acquire(RowId(2), TxId(5), OpId(7), S),
            Err(LockError::TooManyWaiters {
                row: RowId(2),
                tx: TxId(5),
                op: OpId(7),
                waiters_max: 2,
            }),
            "a reader behind a writer must wait, so it is refused"
        );
        assert_eq!(table.waiting(), 2);
        table.check_invariants();
        assert_eq!(
            table.release_all(TxId(1), [RowId(1), RowId(2), RowId(3)], &mut grants),
            2
        );
        assert_eq!(
            grants,
            vec![grant(RowId(1), 2, 3, S), grant(RowId(2), 3, 4, X)]
        );
        assert_eq!(table.waiting(), 0);
        table.check_invariants();
    }

    /// The rules, written as plainly as possible: holders and waiters of a
    /// row as vectors.
    #[derive(Default, Clone, Debug)]
    struct ModelRow {
        holders: Vec<LockRequest>,
        /// (request, is an upgrade)
        queue: Vec<(LockRequest, bool)>,
    }

    #[derive(Default)]
    struct Model {
        rows: BTreeMap<RowId, ModelRow>,
        waiters_max: usize,
    }

    impl Model {
        fn waiting(&self) -> usize {
            self.rows.values().map(|row| row.queue.len()).sum()
        }

        fn acquire(
            &mut self,
            row_id: RowId,
            request: LockRequest,
            wait: bool,
        ) -> Result<Acquire, LockError> {
            let waiting = self.waiting();
            let row = self.rows.entry(row_id).or_default();
            let held = row
                .holders
                .iter()
                .find(|holder| holder.tx == request.tx)
                .map(|holder| holder.mode);
            if held == Some(X) || (held == Some(S) && request.mode == S) {
                return Ok(Acquire::AlreadyHeld);
            }
            if let Some((waiting, _)) = row.queue.iter().find(|(waiter, _)| waiter.tx == request.tx)
            {
                return Err(LockError::AlreadyWaiting {
                    row: row_id,
                    tx: request.tx,
                    op: request.op,
                    waiting_op: waiting.op,
                });
            }
            let upgrade = held.is_some();
            if upgrade && row.holders.len() == 1 {
                row.holders[0] = request;
                return Ok(Acquire::Granted);
            }
            let compatible = row.holders.is_empty()
                || (request.mode == S && row.holders.iter().all(|holder| holder.mode == S));
            if !upgrade && row.queue.is_empty() && compatible {
                row.holders.push(request);
                return Ok(Acquire::Granted);
            }
            if !wait {
                return Ok(Acquire::Busy);
            }
            if waiting >= self.waiters_max {
                if row.holders.is_empty() {
                    self.rows.remove(&row_id);
                }
                return Err(LockError::TooManyWaiters {
                    row: row_id,
                    tx: request.tx,
                    op: request.op,
                    waiters_max: self.waiters_max as u32,
                });
            }
            if upgrade {
                let position = row.queue.iter().take_while(|(_, upgrade)| *upgrade).count();
                row.queue.insert(position, (request, true));
            } else {
                row.queue.push((request, false));
            }
            Ok(Acquire::Queued)
        }

        fn grant(&mut self, row_id: RowId, grants: &mut Vec<Grant>) {
            let row = self.rows.get_mut(&row_id).expect("row in the model");
            while let Some(&(request, upgrade)) = row.queue.first() {
                let grantable = if upgrade {
                    row.holders.len() == 1
                } else if request.mode == X {
                    row.holders.is_empty()
                } else {
                    row.holders.iter().all(|holder| holder.mode == S)
                };
                if !grantable {
                    break;
                }
                row.queue.remove(0);
                if upgrade {
                    assert_eq!(row.holders[0].tx, request.tx);
                    row.holders[0] = request;
                } else {
                    row.holders.push(request);
                }
                grants.push(Grant {
                    row: row_id,
                    tx: request.tx,
                    op: request.op,
                    mode: request.mode,
                });
            }
            if row.holders.is_empty() {
                assert!(row.queue.is_empty());
                self.rows.remove(&row_id);
            }
        }

        fn release(&mut self, tx: TxId, row_id: RowId, grants: &mut Vec<Grant>) -> bool {
            let Some(row) = self.rows.get_mut(&row_id) else {
                return false;
            };
            let before = row.holders.len() + row.queue.len();
            row.holders.retain(|holder| holder.tx != tx);
            row.queue.retain(|(waiter, _)| waiter.tx != tx);
            if before == row.holders.len() + row.queue.len() {
                return false;
            }
            self.grant(row_id, grants);
            true
        }

        fn cancel(&mut self, row_id: RowId, tx: TxId, op: OpId, grants: &mut Vec<Grant>) -> bool {
            let Some(row) = self.rows.get_mut(&row_id) else {
                return false;
            };
            let Some(position) = row
                .queue
                .iter()
                .position(|(waiter, _)| waiter.tx == tx && waiter.op == op)
            else {
                return false;
            };
            row.queue.remove(position);
            self.grant(row_id, grants);
            true
        }

        fn waiting_op(&self, row: RowId, tx: TxId) -> Option<OpId> {
            let row = self.rows.get(&row)?;
            row.queue
                .iter()
                .find(|(waiter, _)| waiter.tx == tx)
                .map(|(waiter, _)| waiter.op)
        }
    }

    #[derive(Clone, Debug)]
    enum Step {
        Acquire {
            row: u32,
            tx: u64,
            exclusive: bool,
            /// `try_acquire` when false.
            wait: bool,
        },
        Release {
            row: u32,
            tx: u64,
        },
        ReleaseAll {
            tx: u64,
        },
        /// Cancels the waiting request of `tx` on `row` (or a made-up one).
        Cancel {
            row: u32,
            tx: u64,
            real: bool,
        },
    }

    const ROWS: u32 = 4;
    const TXS: u64 = 6;

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            5 => (0..ROWS, 0..TXS, any::<bool>(), prop::bool::weighted(0.8))
                .prop_map(|(row, tx, exclusive, wait)| Step::Acquire { row, tx, exclusive, wait }),
            2 => (0..ROWS, 0..TXS).prop_map(|(row, tx)| Step::Release { row, tx }),
            1 => (0..TXS).prop_map(|tx| Step::ReleaseAll { tx }),
            1 => (0..ROWS, 0..TXS, any::<bool>())
                .prop_map(|(row, tx, real)| Step::Cancel { row, tx, real }),
        ]
    }

    fn same_state(table: &LockTable, model: &Model) {
        table.check_invariants();
        assert_eq!(table.len(), model.rows.len());
        assert_eq!(table.waiting() as usize, model.waiting());
        for row in 0..ROWS {
            let row = RowId(row);
            let expected = model.rows.get(&row).cloned().unwrap_or_default();
            let mut holders: Vec<LockRequest> = table.holders(row).collect();
            let mut expected_holders = expected.holders.clone();
            holders.sort_by_key(|holder| holder.tx);
            expected_holders.sort_by_key(|holder| holder.tx);
            assert_eq!(holders, expected_holders, "holders of {row:?}");
            let waiters: Vec<LockRequest> = table.waiters(row).collect();
            let expected_waiters: Vec<LockRequest> =
                expected.queue.iter().map(|(request, _)| *request).collect();
            assert_eq!(waiters, expected_waiters, "waiters of {row:?}");
            assert_eq!(table.is_locked(row), !expected.holders.is_empty());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn the_lock_table_follows_the_model(steps in prop::collection::vec(step(), 1..120)) {
            let waiters_max = 5;
            let mut table = LockTable::with_waiters_max(waiters_max);
            let mut model = Model { waiters_max: waiters_max as usize, ..Model::default() };
            let mut next_op = 0u32;
            let mut grants = Vec::new();
            let mut expected_grants = Vec::new();
            for step in steps {
                grants.clear();
                expected_grants.clear();
                match step {
                    Step::Acquire { row, tx, exclusive, wait } => {
                        next_op += 1;
                        let request = LockRequest {
                            tx: TxId(tx),
                            op: OpId(next_op),
                            mode: if exclusive { X } else { S },
                        };
                        let got = if wait {
                            table.acquire(RowId(row), request.tx, request.op, request.mode)
                        } else {
                            table.try_acquire(RowId(row), request.tx, request.op, request.mode)
                        };
                        prop_assert_eq!(got, model.acquire(RowId(row), request, wait));
                    }
                    Step::Release { row, tx } => {
                        let got = table.release_tx(TxId(tx), RowId(row), &mut grants);
                        let expected = model.release(TxId(tx), RowId(row), &mut expected_grants);
                        prop_assert_eq!(got, expected);
                    }
                    Step::ReleaseAll { tx } => {
                        let got = table.release_all(TxId(tx), (0..ROWS).map(RowId), &mut grants);
                        let expected = (0..ROWS)
                            .filter(|&row| {
                                model.release(TxId(tx), RowId(row), &mut expected_grants)
                            })
                            .count();
                        prop_assert_eq!(got, expected);
                    }
                    Step::Cancel { row, tx, real } => {
                        let op = match model.waiting_op(RowId(row), TxId(tx)) {
                            Some(op) if real => op,
                            _ => OpId(u32::MAX),
                        };
                        let got = table.cancel(RowId(row), TxId(tx), op, &mut grants);
                        let expected = model.cancel(RowId(row), TxId(tx), op, &mut expected_grants);
                        prop_assert_eq!(got, expected);
                    }
                }
                prop_assert_eq!(&grants, &expected_grants);
                same_state(&table, &model);
            }
            // Everyone ends: nothing may be left behind.
            for tx in 0..TXS {
                table.release_all(TxId(tx), (0..ROWS).map(RowId), &mut grants);
            }
            prop_assert!(table.is_empty());
            prop_assert_eq!(table.waiting(), 0);
            table.check_invariants();
        }
    }
}
