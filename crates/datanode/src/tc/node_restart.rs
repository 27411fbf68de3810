//! Node restart, the TC's side (docs/recovery.md, "Node restart"; NDB:
//! DBTC following DIH's fragment states).
//!
//! Why: a starting data node must get every write of its partitions from
//! some point on, before its copy of them begins, or a write that commits
//! behind the copy's scan would never reach it. The master tells every TC
//! which nodes serve and which starting ones receive writes
//! (`NodeStateReq`); the TC routes by it at once ([`crate::live_map`]),
//! and answers `NodeStateConf` only when no transaction is left that
//! began before it first saw a receiving node: such a transaction may have
//! written a partition without the new last backup. Once every TC has
//! answered, every write in flight reaches the starting node.
//!
//! The wait is a poll (every [`DRAIN_CHECK_INTERVAL`]) of the transaction
//! ids noted when the state came, so the transaction paths stay as they
//! are; those ids are bounded by `MaxNoOfConcurrentTransactions`. It is
//! bounded in time too: a client may keep a transaction open and idle
//! for as long as it likes, and the restart must not wait for it. After
//! [`DRAIN_WAIT_MAX`] the older transactions still idle or executing are
//! aborted with the temporary error 286 (their clients retry); those
//! committing or aborting end on their own.

use std::time::Duration;

use kernel::{Context, Instant};
use signal::{BlockRef, NodeBitmask, SignalBody};

use super::transaction::TxState;
use super::TcBlock;
use crate::live_map::NodeStates;

/// How often a TC checks whether the transactions older than a new
/// receiving node have ended.
pub const DRAIN_CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// Timer of that check.
pub(super) const TIMER_DRAIN: u32 = 2;
/// Longest a TC waits for transactions older than a receiving node before
/// it aborts those that are not committing or aborting already.
pub const DRAIN_WAIT_MAX: Duration = Duration::from_secs(2);

/// The transactions a state's answer waits for, and the answer.
#[derive(Debug, Default)]
pub(crate) struct Drain {
    /// Transactions alive when a node began to receive writes.
    older: Vec<u64>,
    /// The answer owed once `older` have ended: (master, state id).
    owed: Option<(BlockRef, u32)>,
    armed: bool,
    /// When the wait for `older` began (the first state that noted some).
    since: Option<Instant>,
}

impl TcBlock {
    pub(crate) fn on_node_states(
        &mut self,
        master: BlockRef,
        states: NodeStates,
        ctx: &mut Context<'_>,
    ) {
        let state_id = states.version.1;
        let Some(gained) = self.map.on_states(states) else {
            // An old or repeated state: answer it, routing is newer.
            ctx.send(master, SignalBody::NodeStateConf { state_id });
            return;
        };
        if !gained.is_empty() {
            self.note_older_transactions(gained);
            self.drain.since.get_or_insert(ctx.now());
        }
        self.drain.owed = Some((master, state_id));
        self.check_drain(ctx);
    }

    fn note_older_transactions(&mut self, gained: NodeBitmask) {
        let before = self.drain.older.len();
        self.drain.older.extend(self.by_tx_id.keys().copied());
        self.drain.older.sort_unstable();
        self.drain.older.dedup();
        assert!(
            self.drain.older.len() <= self.config.transactions_max as usize + before,
            "{}: more transactions noted than records exist",
            self.me
        );
        tracing::info!(
            tc = %self.me,
            "nodes {gained:?} receive writes: waiting for {} older transactions",
            self.drain.older.len()
        );
    }

    /// Answers the owed state once the older transactions have ended.
    fn check_drain(&mut self, ctx: &mut Context<'_>) {
        let by_tx_id = &self.by_tx_id;
        self.drain
            .older
            .retain(|tx_id| by_tx_id.contains_key(tx_id));
        if !self.drain.older.is_empty()
            && self
                .drain
                .since
                .is_some_and(|since| ctx.now().saturating_since(since) >= DRAIN_WAIT_MAX)
        {
            self.abort_older_transactions(ctx);
        }
        if !self.drain.older.is_empty() {
            if !self.drain.armed {
                self.drain.armed = true;
                ctx.set_timer(DRAIN_CHECK_INTERVAL, TIMER_DRAIN);
            }
            return;
        }
        self.drain.since = None;
        if let Some((master, state_id)) = self.drain.owed.take() {
            ctx.send(master, SignalBody::NodeStateConf { state_id });
        }
    }

    /// The wait ran out: ends the older transactions that would not end by
    /// themselves soon (idle ones may stay open for ever).
    fn abort_older_transactions(&mut self, ctx: &mut Context<'_>) {
        let why = format!(
            "a data node is restarting and waited {} ms for the transactions older than it",
            DRAIN_WAIT_MAX.as_millis()
        );
        for i in 0..self.drain.older.len() {
            let tx_id = self.drain.older[i];
            let Some(&slot) = self.by_tx_id.get(&tx_id) else {
                continue;
            };
            if matches!(
                self.transactions.get(slot).state,
                TxState::Idle | TxState::Executing { .. }
            ) {
                tracing::warn!(tc = %self.me, "transaction {tx_id:#x}: {why}; aborting it");
                self.cluster_change_abort(slot, &why, ctx);
            }
        }
        let by_tx_id = &self.by_tx_id;
        self.drain
            .older
            .retain(|tx_id| by_tx_id.contains_key(tx_id));
    }

    pub(crate) fn on_drain_timer(&mut self, ctx: &mut Context<'_>) {
        self.drain.armed = false;
        self.check_drain(ctx);
    }

    /// Whether this TC has heard the master's node states (it starts no
    /// transaction before: it could route to a stale replica).
    pub(crate) fn knows_node_states(&self) -> bool {
        self.map.states().is_some()
    }
}
