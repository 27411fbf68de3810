//! ALTER TABLE on this instance's fragments: a committed `SchemaChangeReq`
//! of an alter is applied once no transaction holds a lock or a change on
//! the table's fragments here (NDB also quiesces a table for the parts of
//! an alter that change its fragments).
//!
//! Why wait rather than refuse: refusing the alter while transactions run
//! would make schema changes fail under load, and the dictionary has
//! already committed the change (a refusal restarts the node). So the
//! instance holds the answer back and meanwhile refuses new operations and
//! scans on the group's tables (the base table and its hidden tables,
//! before and after the alter) with the temporary error 701 ("busy with a
//! schema operation"); transactions already on them end by commit, abort
//! or the TC's timeouts. Once none is left, the fragments are altered
//! (`storage::instance::LdmInstance::alter_fragment`: rows rewritten when
//! columns were added, ordered indexes built or dropped, the version
//! raised), committed-read scans still open on them are ended with 701
//! (their cursors point into the old rows or indexes), and the answer goes
//! back. Past [`ALTER_ABORT_AFTER`] the instance asks the TCs of the
//! transactions still holding locks there to abort them (`TcAbortTxReq`).
//! The wait is bounded by [`ALTER_WAIT_MAX`]: past it the instance
//! answers with an error and restarts the node, which restores its
//! fragments under the new definition (restore converts what was written
//! before the alter; `docs/recovery.md`).
//!
//! Schema signals that arrive while an alter waits are kept, at most
//! [`SCHEMA_DEFERRED_MAX`], and handled in order after it.

use std::collections::VecDeque;
use std::time::Duration;

use kernel::{Context, Instant};
use proto::error;
use schema::TableDef;
use signal::{BlockRef, DictTableGroup, SchemaOp, SignalBody};
use storage::disk::Disk;

use super::LdmBlock;

/// Longest an alter waits for the transactions on its table to end before
/// the instance gives up and restarts the node. Well above the TC's
/// lock-wait (deadlock) timeout, which ends transactions stuck on locks.
pub const ALTER_WAIT_MAX: Duration = Duration::from_secs(10);
/// How long an alter waits before it asks the TCs of the transactions
/// still holding locks or changes on its table to abort them
/// (`TcAbortTxReq`): an idle open transaction (a client that began one and
/// went quiet) would otherwise hold the alter until [`ALTER_WAIT_MAX`] and
/// restart the node — on every node at once, since every node applies the
/// alter. Well above the TC's lock-wait timeout (1.2 s by default), which
/// ends the transactions that wait on locks themselves.
pub const ALTER_ABORT_AFTER: Duration = Duration::from_secs(3);
/// How often a waiting alter looks again (commits and aborts also make it
/// look at once).
pub const ALTER_CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// Schema signals kept while an alter waits; beyond it one is answered
/// with an error (the dictionary sends one change at a time, so this is
/// never reached in a working cluster).
pub const SCHEMA_DEFERRED_MAX: usize = 16;

/// The timer of a waiting alter.
pub(super) const TIMER_ALTER_CHECK: u32 = 5;

/// An alter waiting for its table's transactions to end.
#[derive(Debug)]
pub(super) struct PendingAlter {
    sender: BlockRef,
    table_id: u32,
    schema_version: u32,
    group: DictTableGroup,
    /// Tables whose operations and scans are refused meanwhile: the
    /// group's tables before and after the alter, sorted.
    tables: Vec<u32>,
    since: Instant,
    /// The holders' TCs were asked to abort them (once per alter).
    aborts_asked: bool,
}

/// A schema signal that came while an alter waited.
#[derive(Debug)]
pub(super) enum DeferredSchema {
    Load {
        sender: BlockRef,
        tables: Vec<DictTableGroup>,
        schema_version: u32,
        cluster_schema: bool,
    },
    Change {
        sender: BlockRef,
        op: SchemaOp,
        table_id: u32,
        schema_version: u32,
        group: DictTableGroup,
    },
}

/// The alter state of an instance.
#[derive(Debug, Default)]
pub(super) struct AlterState {
    pending: Option<PendingAlter>,
    deferred: VecDeque<DeferredSchema>,
    timer_armed: bool,
}

impl AlterState {
    /// Whether an alter waits.
    pub(super) fn is_pending(&self) -> bool {
        self.pending.is_some()
    }
}

impl AlterState {
    /// Whether operations on `table_id` are refused: an alter of its group
    /// waits for the transactions on it to end.
    pub(super) fn blocks(&self, table_id: u32) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| p.tables.binary_search(&table_id).is_ok())
    }
}

impl<D> LdmBlock<D> {
    /// [`AlterState::blocks`] of this block's alter.
    pub(super) fn altering(&self, table_id: u32) -> bool {
        self.alter.blocks(table_id)
    }

    /// Whether no transaction holds a lock or change on a fragment of
    /// `tables` here.
    fn quiet(&self, tables: &[u32]) -> bool {
        let Some(instance) = self.instance.as_ref() else {
            return true;
        };
        instance
            .fragment_ids()
            .filter(|(t, _)| tables.binary_search(t).is_ok())
            .all(|(t, p)| {
                instance
                    .fragment_ref(t, p)
                    .is_some_and(|f| f.transactions() == 0)
            })
    }
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// Keeps a schema signal that came while an alter waits, to handle
    /// after it; answers it with an error when too many wait.
    pub(super) fn defer_schema(&mut self, signal: DeferredSchema, ctx: &mut Context<'_>) {
        assert!(self.alter.is_pending(), "deferred behind a waiting alter");
        if self.alter.deferred.len() < SCHEMA_DEFERRED_MAX {
            self.alter.deferred.push_back(signal);
            return;
        }
        let message = format!(
            "LDM instance {}: {SCHEMA_DEFERRED_MAX} schema changes wait behind an ALTER TABLE",
            self.config.instance
        );
        tracing::error!(node = %self.config.node, "{message}");
        match signal {
            DeferredSchema::Load {
                sender,
                schema_version,
                ..
            } => ctx.send(
                sender,
                SignalBody::SchemaLoadConf {
                    schema_version,
                    code: error::BUSY,
                    message,
                },
            ),
            DeferredSchema::Change {
                sender,
                table_id,
                schema_version,
                ..
            } => ctx.send(
                sender,
                SignalBody::SchemaChangeConf {
                    table_id,
                    schema_version,
                    code: error::BUSY,
                    message,
                },
            ),
        }
    }

    /// Starts a committed alter of `table_id` (`group` is the group after
    /// it): applied at once when its table is quiet here, else when the
    /// transactions on it have ended (see the module documentation).
    pub(super) fn start_alter(
        &mut self,
        sender: BlockRef,
        table_id: u32,
        schema_version: u32,
        group: DictTableGroup,
        ctx: &mut Context<'_>,
    ) {
        assert!(!self.alter.is_pending(), "one alter at a time");
        let mut tables: Vec<u32> = self
            .schema
            .groups
            .get(&table_id)
            .cloned()
            .unwrap_or_default();
        for bytes in &group.tables {
            match TableDef::decode(bytes) {
                Ok(table) => tables.push(table.id),
                Err(_) => {
                    // Refused (and reported) by the install.
                    self.finish_schema_change(
                        sender,
                        SchemaOp::AlterTable,
                        table_id,
                        schema_version,
                        group,
                        ctx,
                    );
                    return;
                }
            }
        }
        tables.sort_unstable();
        tables.dedup();
        self.alter.pending = Some(PendingAlter {
            sender,
            table_id,
            schema_version,
            group,
            tables,
            since: ctx.now(),
            aborts_asked: false,
        });
        self.check_alter(ctx);
    }

    /// Applies the waiting alter if its table is quiet now; gives up past
    /// [`ALTER_WAIT_MAX`]; else looks again after [`ALTER_CHECK_INTERVAL`].
    pub(super) fn check_alter(&mut self, ctx: &mut Context<'_>) {
        let Some(pending) = self.alter.pending.as_ref() else {
            return;
        };
        if self.failed {
            return;
        }
        if self.quiet(&pending.tables) {
            let pending = self.alter.pending.take().expect("checked");
            self.apply_alter(pending, ctx);
            self.run_deferred(ctx);
            return;
        }
        let waited = Duration::from_nanos(ctx.now().0.saturating_sub(pending.since.0));
        if waited >= ALTER_ABORT_AFTER && !pending.aborts_asked {
            self.abort_holders(waited, ctx);
        }
        if waited >= ALTER_WAIT_MAX {
            let pending = self.alter.pending.take().expect("checked");
            let message = format!(
                "LDM instance {}: ALTER TABLE of table {} to schema version {} waited {waited:?} for \
                 the transactions on it to end; restarting the node, which restores its fragments \
                 under the new definition",
                self.config.instance, pending.table_id, pending.schema_version
            );
            ctx.send(
                pending.sender,
                SignalBody::SchemaChangeConf {
                    table_id: pending.table_id,
                    schema_version: pending.schema_version,
                    code: error::BUSY,
                    message: message.clone(),
                },
            );
            self.fail(ctx, true, message);
            return;
        }
        if !self.alter.timer_armed {
            self.alter.timer_armed = true;
            ctx.set_timer(ALTER_CHECK_INTERVAL, TIMER_ALTER_CHECK);
        }
    }

    /// Asks the TC of each transaction holding a lock or change on the
    /// waiting alter's tables here to abort it (one that is committing
    /// finishes on its own, and the TC ignores the request).
    fn abort_holders(&mut self, waited: Duration, ctx: &mut Context<'_>) {
        let Some(pending) = self.alter.pending.as_mut() else {
            return;
        };
        pending.aborts_asked = true;
        let tables = &pending.tables;
        let mut holders: Vec<(u64, BlockRef)> = self
            .txs
            .iter()
            .filter(|(_, r)| {
                r.fragments
                    .iter()
                    .any(|(t, _)| tables.binary_search(t).is_ok())
            })
            .filter_map(|(tx_id, r)| r.tc.map(|tc| (*tx_id, tc)))
            .collect();
        // Deterministic order (the map's is not).
        holders.sort_unstable_by_key(|(tx_id, _)| *tx_id);
        for (tx_id, tc) in holders {
            let message = format!(
                "ALTER TABLE of table {} waited {} ms for the locks this transaction holds on \
                 it; it is rolled back, retry it",
                pending.table_id,
                waited.as_millis()
            );
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: transaction {tx_id:#x} blocks an ALTER TABLE: asking {tc} to abort it",
                self.config.instance
            );
            ctx.send(tc, SignalBody::TcAbortTxReq { tx_id, message });
        }
    }

    pub(super) fn on_alter_timer(&mut self, ctx: &mut Context<'_>) {
        self.alter.timer_armed = false;
        self.check_alter(ctx);
    }

    /// Ends the scans on the altered tables, then installs the change
    /// (altering the fragments) and answers it.
    fn apply_alter(&mut self, pending: PendingAlter, ctx: &mut Context<'_>) {
        // Their next request finds the new version and is refused.
        self.backups.close_tables(&pending.tables);
        for ((tx_id, scan_id, partition), tc) in self.scans.close_tables(&pending.tables) {
            let message = format!(
                "LDM instance {}: table {} was altered while scan {scan_id} of partition \
                 {partition} was open; run the scan again",
                self.config.instance, pending.table_id
            );
            ctx.send(
                tc,
                SignalBody::LdmScanRef {
                    tx_id,
                    scan_id,
                    partition,
                    code: error::BUSY,
                    message,
                },
            );
            self.release_tx_if_idle(tx_id);
        }
        self.finish_schema_change(
            pending.sender,
            SchemaOp::AlterTable,
            pending.table_id,
            pending.schema_version,
            pending.group,
            ctx,
        );
    }

    /// Handles the schema signals kept while the alter waited, in order,
    /// until one is an alter that must wait in turn.
    fn run_deferred(&mut self, ctx: &mut Context<'_>) {
        while !self.alter.is_pending() && !self.failed {
            let Some(signal) = self.alter.deferred.pop_front() else {
                return;
            };
            match signal {
                DeferredSchema::Load {
                    sender,
                    tables,
                    schema_version,
                    cluster_schema,
                } => self.on_schema_load(sender, tables, schema_version, cluster_schema, ctx),
                DeferredSchema::Change {
                    sender,
                    op,
                    table_id,
                    schema_version,
                    group,
                } => self.on_schema_change(sender, op, table_id, schema_version, group, ctx),
            }
        }
    }
}
