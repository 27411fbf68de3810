//! Unique indexes in the TC, NDB's way: a unique index is a hidden table
//! (key = the index columns, one value column `$BASE_PK` = the base row's
//! primary key as `KeyEncoder::primary_key` encodes it), and the TC reads
//! and writes it as an ordinary table inside the same transaction (see
//! `docs/transactions.md`, "Key operations" item 5).
//!
//! A request with an operation by unique key, or a write that must keep a
//! unique index up to date, is *planned*: its operations are cut into
//! segments of consecutive operations, and each segment runs in up to
//! three rounds, each round at most one `LdmKeyReq` per LDM instance:
//!
//! 1. *Lookup*: the index row of every operation by unique key (same lock
//!    mode as the operation; exclusive for an update or delete, so the
//!    entry cannot change under it), giving the base row's primary key.
//! 2. *Base*: every operation of the segment in request order on its base
//!    table by primary key. A write that maintains indexes and may find an
//!    old row (update of an indexed column, delete, write) is preceded, in
//!    the same batch, by an exclusive read of the old row's indexed
//!    columns: the LDM runs the two back to back, so the read returns the
//!    values the write replaces.
//! 3. *Index*: for every write that succeeded, in request order, the
//!    index rows of old values that went away are deleted and those of new
//!    values inserted (an existing one is a unique violation, 893, which
//!    aborts the transaction: the base write has already happened). NULL
//!    in an index column makes no index row.
//! 4. *Undo*: an insert with `IGNORE_ERROR` that met a unique violation
//!    is taken back instead: its base row and the index rows it did insert
//!    are deleted, and it answers 893 while the transaction goes on (as a
//!    duplicate primary key does). The rows are still locked by this
//!    transaction, so nothing saw them. An update or write that meets one
//!    still aborts: taking it back would need its whole old row.
//!
//! Why segments: rounds reorder work (the lookups of a segment run before
//! its base writes, its index writes after them). An operation by unique
//! key must not look up an index that an earlier operation of its segment
//! changes in a way the lookup could see: an insert of the same value (its
//! key hashes are kept), or an update or write that may move a row off a
//! value. Such an operation starts a new segment. A delete needs no cut:
//! the lookup may still find the entry, but the base operation then finds
//! the row gone (626), which is what running in order gives. Reads of a
//! hidden table itself start a new segment after any write of its base
//! table. In the worst case every operation is its own segment: in order,
//! correct, slower.
//!
//! Locks: base rows and index rows are locked exclusively by the writing
//! transaction until it ends, so two transactions inserting one value meet
//! on the index row: the second waits, then gets 893 (the first committed)
//! or goes on (it aborted).
//!
//! This path keeps each operation's key values between rounds (`Value`s):
//! it allocates per operation, which the plain path does not.

use std::collections::HashSet;

use kernel::Context;
use proto::error;
use proto::{
    LockMode, OpBatchReader, OpBatchWriter, OpHeader, OpKind, OpResult, OpView, ResultReader,
    ResultWriter,
};
use proto::{IGNORE_ERROR, NO_INDEX, NO_PARTITION, NO_WAIT, SKIP_LOCKED};
use schema::{
    distribution_hash, partition_of, ColumnType, RowLayout, Storage, TableDef, Value, ValueRef,
    STRING_KEY_CHUNK_BYTES,
};
use signal::BlockRef;

use super::transaction::{group_in, route, OpError, TxState};
use super::{Scratch, TcBlock, TcTable};

/// A unique index of a base table, as the TC maintains it.
#[derive(Clone, Debug)]
pub(crate) struct UniqueIndex {
    /// The index's id, which is also its hidden table's id.
    pub(crate) id: u32,
    pub(crate) name: String,
    /// Positions of the indexed columns in the base table, in index order.
    pub(crate) columns: Vec<usize>,
    /// Where each indexed column is in the base table's `unique_columns`.
    pub(crate) at: Vec<usize>,
}

/// The round of a segment in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Round {
    #[default]
    Lookup,
    Base,
    Index,
    Undo,
}

/// What an operation sent to an LDM does for its client operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Reads the index row: the base row's primary key.
    Lookup,
    /// Reads the old row's indexed columns, exclusively.
    PreRead,
    /// The client's operation on its base table.
    Base,
    /// Deletes the index row of an old value (unique index number).
    IndexDelete(u16),
    /// Inserts the index row of a new value (unique index number).
    IndexInsert(u16),
    /// Deletes the base row of an insert taken back.
    UndoBase,
    /// Deletes the index row an insert taken back inserted (unique index
    /// number).
    UndoIndex(u16),
}

/// An operation sent to an LDM; its position in `Plan::subs` is its
/// `op_index` towards the LDMs.
#[derive(Clone, Copy, Debug)]
struct Sub {
    /// The client operation (position in the request).
    owner: u32,
    role: Role,
    /// The LDM group of its round.
    group: u16,
    answered: bool,
}

/// A client operation of a planned request.
#[derive(Clone, Debug)]
struct PlanOp {
    op_index: u32,
    table_id: u32,
    kind: OpKind,
    lock: LockMode,
    /// The unique index it goes by, or `NO_INDEX`.
    by_index: u32,
    ignore_error: bool,
    /// It writes its table's unique indexes.
    maintain: bool,
    /// It reads the old row first.
    pre_read: bool,
    /// The partition of its index row (an op by unique key, before the
    /// lookup), then of its base row.
    partition: u32,
    /// The result the TC decided (not sent on, or failed on the way), or 0.
    code: u32,
    /// No further rounds for it.
    done: bool,
    /// The base row's primary key: for an op by unique key (from the
    /// lookup) and for an op that maintains indexes.
    base_pk: Vec<Value>,
    /// The old row's `unique_columns` values, if `had_old`.
    old: Vec<Value>,
    had_old: bool,
    /// Its `Role::Base` sub, or `u32::MAX`.
    base_sub: u32,
    base_ok: bool,
    /// The unique indexes (bit per index number) whose row of its new
    /// value it inserted.
    inserted: u64,
    /// An insert with `IGNORE_ERROR` that met a unique violation: the
    /// Undo round takes it back.
    undo: bool,
}

/// The state of a planned request (kept in its transaction record).
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) active: bool,
    /// The client's op batch.
    request: Vec<u8>,
    ops: Vec<PlanOp>,
    subs: Vec<Sub>,
    /// Start of each segment (positions in `ops`), then `ops.len()`.
    segments: Vec<u32>,
    segment: usize,
    round: Round,
    /// The round's operations, before they are split by LDM instance.
    stage: Vec<u8>,
}

impl Plan {
    /// [`Plan::finish`] of a plan in use, its op batch kept for reuse
    /// (`Scratch::recycle`). A plan not in use is finished already: only
    /// `start_plan` makes one active, and only `finish` ends it. Inlined:
    /// every request ends its plan, and most have none.
    #[inline]
    pub(crate) fn end(&mut self, scratch: &mut Scratch) {
        if self.active {
            scratch.recycle(self.finish());
        }
        debug_assert!(
            self.request.is_empty()
                && self.ops.is_empty()
                && self.subs.is_empty()
                && self.segments.is_empty()
                && self.stage.is_empty(),
            "a plan not in use is finished"
        );
    }

    /// Forgets the request; its op batch goes back to the caller for reuse.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.active = false;
        self.ops.clear();
        self.subs.clear();
        self.segments.clear();
        self.segment = 0;
        self.round = Round::Lookup;
        self.stage.clear();
        std::mem::take(&mut self.request)
    }
}

/// What the segment being cut has done to the unique indexes so far.
#[derive(Default)]
struct SegmentEffects {
    /// (index id, hash of the key) of values inserted.
    inserted: HashSet<(u32, u64)>,
    /// Indexes an update or write may have moved a row off a value in.
    moved: Vec<u32>,
    /// Indexes whose base table was written.
    touched: Vec<u32>,
    /// (table id, hash of the primary key) of inserts the Undo round may
    /// take back: a later op on that row sees it in a later segment (it
    /// finds the row gone, as running in order gives).
    undoable: HashSet<(u32, u64)>,
    /// The tables `undoable` names (few: an op is tested against the set
    /// only when its table is here).
    undoable_tables: Vec<u32>,
}

impl SegmentEffects {
    fn clear(&mut self) {
        self.inserted.clear();
        self.undoable.clear();
        self.undoable_tables.clear();
        self.moved.clear();
        self.touched.clear();
    }
}

/// Whether an op writes its table's unique indexes.
pub(crate) fn maintains(table: &TcTable, op: &OpView<'_>) -> bool {
    if table.unique.is_empty() {
        return false;
    }
    match op.header.kind {
        OpKind::Read => false,
        OpKind::Insert | OpKind::Write | OpKind::Delete => true,
        OpKind::Update => op
            .values()
            .any(|(c, _)| table.unique_columns.contains(&usize::from(c))),
    }
}

/// Operation records a request needs if it must be planned (at most: the
/// lookup, the pre-read, the base op and a delete and an insert per unique
/// index, for each op); `None` when the plain path serves it.
pub(crate) fn plan_records(tables: &stdx::IdMap<u32, TcTable>, ops: &[OpView<'_>]) -> Option<u32> {
    let mut planned = false;
    let mut records = 0u32;
    for op in ops {
        let h = &op.header;
        let Some(table) = tables.get(&h.table_id) else {
            records += 1;
            continue;
        };
        let by_index = h.index_id != NO_INDEX;
        let maintain = maintains(table, op);
        planned |= by_index || maintain;
        records += 1 + u32::from(by_index);
        if maintain {
            records += 1 + 2 * table.unique.len() as u32;
        }
    }
    planned.then_some(records)
}

impl TcBlock {
    /// Checks and routes the ops of a request that needs the unique-index
    /// path, cuts it into segments and starts the first round.
    pub(crate) fn start_plan(&mut self, slot: u32, request: Vec<u8>, ctx: &mut Context<'_>) {
        let mut plan = std::mem::take(&mut self.transactions.get_mut(slot).plan);
        plan.finish();
        plan.request = request;
        plan.active = true;
        let mut effects = SegmentEffects::default();
        let outcome = self.cut(&mut plan, &mut effects);
        self.transactions.get_mut(slot).plan = plan;
        match outcome {
            Ok(()) => self.plan_next(slot, ctx),
            Err((code, op_index, message)) => self.fail(slot, code, op_index, message, ctx),
        }
    }

    /// Builds `plan.ops` and `plan.segments` from the request; the first
    /// error of an op without `IGNORE_ERROR`, as (code, op_index, message).
    fn cut(
        &mut self,
        plan: &mut Plan,
        effects: &mut SegmentEffects,
    ) -> Result<(), (u32, u32, String)> {
        let reader = OpBatchReader::framed(&plan.request).expect("validated by execute_request");
        plan.segments.push(0);
        for (pos, op) in reader.iter().enumerate() {
            let h = op.header;
            let mut p = PlanOp {
                op_index: h.op_index,
                table_id: h.table_id,
                kind: h.kind,
                lock: if h.kind == OpKind::Read {
                    h.lock
                } else {
                    LockMode::Exclusive
                },
                by_index: h.index_id,
                ignore_error: op.has_flag(IGNORE_ERROR),
                maintain: false,
                pre_read: false,
                partition: 0,
                code: 0,
                done: false,
                base_pk: Vec::new(),
                old: Vec::new(),
                had_old: false,
                base_sub: u32::MAX,
                base_ok: false,
                inserted: 0,
                undo: false,
            };
            let checked = self.check_planned(&op, &mut p, effects);
            match checked {
                Ok(conflict) => {
                    if conflict && pos as u32 != *plan.segments.last().expect("pushed above") {
                        plan.segments.push(pos as u32);
                        effects.clear();
                    }
                    if !p.done {
                        self.add_effects(&op, &p, effects);
                    }
                }
                Err((code, message)) => {
                    if !p.ignore_error {
                        return Err((code, h.op_index, message));
                    }
                    p.code = code;
                    p.done = true;
                }
            }
            plan.ops.push(p);
        }
        plan.segments.push(plan.ops.len() as u32);
        Ok(())
    }

    /// Checks one op of a planned request and fills in its plan; whether
    /// it conflicts with the segment so far (must start a new one).
    fn check_planned(
        &mut self,
        op: &OpView<'_>,
        p: &mut PlanOp,
        effects: &SegmentEffects,
    ) -> Result<bool, OpError> {
        let h = op.header;
        if h.index_id == NO_INDEX {
            p.partition = route(&self.tables, &mut self.scratch, op)?.0;
            let table = &self.tables[&h.table_id];
            p.maintain = maintains(table, op);
            p.pre_read = p.maintain && h.kind != OpKind::Insert;
            if p.maintain {
                p.base_pk.extend(op.keys().map(|v| v.to_value()));
            }
            let undone_row = effects.undoable_tables.contains(&h.table_id) && {
                let scratch = &mut self.scratch;
                scratch.key_values.clear();
                scratch.key_values.extend(op.keys().map(|v| v.to_value()));
                scratch.key_bytes.clear();
                table
                    .primary
                    .encode(&scratch.key_values, &mut scratch.key_bytes)
                    .is_err()
                    || effects
                        .undoable
                        .contains(&(h.table_id, distribution_hash(&scratch.key_bytes)))
            };
            // A read of a hidden table sees the index writes of earlier ops
            // only in a later segment.
            return Ok(
                undone_row || (table.unique_of.is_some() && effects.touched.contains(&h.table_id))
            );
        }
        let Some(table) = self.tables.get(&h.table_id) else {
            return Err((
                error::NO_SUCH_TABLE,
                format!("no table with id {} on this node", h.table_id),
            ));
        };
        op.check(&table.def)
            .map_err(|e| (e.code(), e.to_string()))?;
        let index = table
            .unique
            .iter()
            .find(|u| u.id == h.index_id)
            .expect("check() found the unique index");
        let Some(hidden) = self.tables.get(&index.id) else {
            return Err((
                error::NO_SUCH_INDEX,
                format!(
                    "table `{}`: the hidden table of unique index `{}` is not on this node",
                    table.def.name, index.name
                ),
            ));
        };
        p.maintain = maintains(table, op) || (h.kind == OpKind::Delete && !table.unique.is_empty());
        p.pre_read = p.maintain;
        if op.keys().any(|v| v.is_null()) {
            // NULLs are never equal: no index row holds one.
            return Err((
                error::NO_SUCH_ROW,
                format!(
                    "table `{}`, unique index `{}`: a key with NULL matches no row",
                    table.def.name, index.name
                ),
            ));
        }
        let scratch = &mut self.scratch;
        scratch.key_values.clear();
        scratch.key_values.extend(op.keys().map(|v| v.to_value()));
        scratch.key_bytes.clear();
        hidden
            .distribution
            .encode(&scratch.key_values, &mut scratch.key_bytes)
            .map_err(|e| (error::BAD_VALUE, format!("table `{}`: {e}", table.def.name)))?;
        let hash = distribution_hash(&scratch.key_bytes);
        p.partition = partition_of(hash, hidden.def.partitions);
        if h.partition != NO_PARTITION && h.partition != p.partition {
            return Err((
                error::BAD_OPERATION,
                format!(
                    "table `{}`: the operation by unique index `{}` names partition {}, its index row is in \
                     partition {}",
                    table.def.name, index.name, h.partition, p.partition
                ),
            ));
        }
        Ok(effects.moved.contains(&index.id) || effects.inserted.contains(&(index.id, hash)))
    }

    /// Records what a (checked) op does to the unique indexes of its table.
    fn add_effects(&mut self, op: &OpView<'_>, p: &PlanOp, effects: &mut SegmentEffects) {
        if !p.maintain {
            return;
        }
        let table = &self.tables[&p.table_id];
        if p.kind == OpKind::Insert && p.ignore_error {
            self.scratch.key_bytes.clear();
            if table
                .primary
                .encode(&p.base_pk, &mut self.scratch.key_bytes)
                .is_ok()
            {
                effects
                    .undoable
                    .insert((p.table_id, distribution_hash(&self.scratch.key_bytes)));
                if !effects.undoable_tables.contains(&p.table_id) {
                    effects.undoable_tables.push(p.table_id);
                }
            }
        }
        for index in &table.unique {
            if !effects.touched.contains(&index.id) {
                effects.touched.push(index.id);
            }
            let moves = match p.kind {
                OpKind::Write => true,
                OpKind::Update => op
                    .values()
                    .any(|(c, _)| index.columns.contains(&usize::from(c))),
                _ => false,
            };
            if moves && !effects.moved.contains(&index.id) {
                effects.moved.push(index.id);
            }
            if p.kind == OpKind::Insert {
                let values = &mut self.scratch.key_values;
                values.clear();
                new_index_values(&table.def, index, op, &p.base_pk, None, values);
                if values.iter().any(Value::is_null) {
                    continue;
                }
                let hidden = &self.tables[&index.id];
                self.scratch.key_bytes.clear();
                if hidden
                    .distribution
                    .encode(values, &mut self.scratch.key_bytes)
                    .is_ok()
                {
                    effects
                        .inserted
                        .insert((index.id, distribution_hash(&self.scratch.key_bytes)));
                }
            }
        }
    }

    /// Runs the next round that has work, or ends the request.
    fn plan_next(&mut self, slot: u32, ctx: &mut Context<'_>) {
        loop {
            let plan = &self.transactions.get(slot).plan;
            if plan.segment + 1 >= plan.segments.len() {
                return self.request_done(slot, ctx);
            }
            let sent = match self.send_round(slot, ctx) {
                Ok(sent) => sent,
                Err((code, op_index, message)) => {
                    return self.fail(slot, code, op_index, message, ctx)
                }
            };
            if sent > 0 {
                let deadline = self.deadline_from(ctx.now());
                let tx = self.transactions.get_mut(slot);
                tx.outstanding = sent;
                tx.state = TxState::EXECUTING;
                tx.deadline = deadline;
                self.arm_sweep(ctx);
                return;
            }
            self.advance(slot);
        }
    }

    /// Moves to the next round, or the next segment's first.
    fn advance(&mut self, slot: u32) {
        let plan = &mut self.transactions.get_mut(slot).plan;
        plan.round = match plan.round {
            Round::Lookup => Round::Base,
            Round::Base => Round::Index,
            Round::Index => Round::Undo,
            Round::Undo => {
                plan.segment += 1;
                Round::Lookup
            }
        };
    }

    /// Stages the current round's operations and sends them, one
    /// `LdmKeyReq` per LDM instance; how many were sent.
    fn send_round(&mut self, slot: u32, ctx: &mut Context<'_>) -> Result<u32, (u32, u32, String)> {
        let mut plan = std::mem::take(&mut self.transactions.get_mut(slot).plan);
        self.scratch.groups.clear();
        let first_sub = plan.subs.len();
        let staged = self.stage_round(&mut plan);
        let sent = (plan.subs.len() - first_sub) as u32;
        if staged.is_ok() && sent > 0 {
            self.send_staged(slot, &plan, first_sub, ctx);
        }
        self.transactions.get_mut(slot).plan = plan;
        staged.map(|()| sent)
    }

    /// Writes the round's operations to `plan.stage`, in request order.
    fn stage_round(&mut self, plan: &mut Plan) -> Result<(), (u32, u32, String)> {
        let Plan {
            request,
            ops,
            subs,
            segments,
            segment,
            round,
            stage,
            ..
        } = plan;
        let reader = OpBatchReader::framed(request).expect("validated by execute_request");
        let (start, end) = (segments[*segment] as usize, segments[*segment + 1] as usize);
        stage.clear();
        let mut writer = OpBatchWriter::new(stage);
        for (pos, op) in reader.iter().enumerate().skip(start).take(end - start) {
            let p = &mut ops[pos];
            if p.done {
                continue;
            }
            let table = &self.tables[&p.table_id];
            // A unique index's hidden table is placed like its base table.
            let full = table.def.fully_replicated;
            match *round {
                Round::Lookup => {
                    if p.by_index == NO_INDEX {
                        continue;
                    }
                    let hidden = &self.tables[&p.by_index];
                    let header = OpHeader {
                        op_index: subs.len() as u32,
                        table_id: hidden.def.id,
                        table_version: hidden.def.version,
                        index_id: NO_INDEX,
                        partition: p.partition,
                        kind: OpKind::Read,
                        lock: p.lock,
                        // A locking lookup that must not wait does not
                        // wait for the index row either.
                        flags: op.header.flags & (NO_WAIT | SKIP_LOCKED),
                    };
                    writer.begin(&header);
                    for v in op.keys() {
                        writer.key(v);
                    }
                    writer.project(base_key_column(&hidden.def));
                    end_op(&mut writer)?;
                    let group = self.group_of(p.partition, full, OpKind::Read, p.lock);
                    subs.push(sub(pos, Role::Lookup, group));
                }
                Round::Base => {
                    if p.pre_read {
                        begin_by_base_key(&mut writer, &table.def, p, subs.len(), OpKind::Read);
                        for &c in &table.unique_columns {
                            writer.project(c as u16);
                        }
                        end_op(&mut writer)?;
                        let group =
                            self.group_of(p.partition, full, OpKind::Read, LockMode::Exclusive);
                        subs.push(sub(pos, Role::PreRead, group));
                    }
                    let mut header = op.header;
                    header.op_index = subs.len() as u32;
                    header.partition = p.partition;
                    if p.by_index == NO_INDEX {
                        if let Err(e) = writer.copy(&header, &op) {
                            return Err(too_large(p.op_index, &e));
                        }
                    } else {
                        header.index_id = NO_INDEX;
                        writer.begin(&header);
                        for v in &p.base_pk {
                            writer.key(v.as_ref());
                        }
                        for (c, v) in op.values() {
                            writer.value(c, v);
                        }
                        for c in op.projection() {
                            writer.project(c);
                        }
                        end_op(&mut writer)?;
                    }
                    let group = self.group_of(p.partition, full, p.kind, p.lock);
                    p.base_sub = subs.len() as u32;
                    subs.push(sub(pos, Role::Base, group));
                }
                Round::Index => {
                    if !p.maintain || !p.base_ok {
                        continue;
                    }
                    self.stage_index_writes(pos, p, &op, &mut writer, subs, false)?;
                }
                Round::Undo => {
                    if !p.undo {
                        continue;
                    }
                    // Within the records `plan_records` counted for it: an
                    // insert reads no old row and deletes no old value.
                    debug_assert_eq!(p.kind, OpKind::Insert);
                    p.undo = false;
                    p.done = true;
                    begin_by_base_key(&mut writer, &table.def, p, subs.len(), OpKind::Delete);
                    end_op(&mut writer)?;
                    let group =
                        self.group_of(p.partition, full, OpKind::Delete, LockMode::Exclusive);
                    subs.push(sub(pos, Role::UndoBase, group));
                    self.stage_index_writes(pos, p, &op, &mut writer, subs, true)?;
                }
            }
        }
        Ok(())
    }

    /// The index writes of one op that succeeded: per unique index, delete
    /// the old value's row and insert the new value's (nothing when the two
    /// are equal keys, or for a NULL). `undo`: those of an insert taken
    /// back, the rows of its new values it inserted, deleted.
    fn stage_index_writes(
        &mut self,
        pos: usize,
        p: &PlanOp,
        op: &OpView<'_>,
        writer: &mut OpBatchWriter<'_>,
        subs: &mut Vec<Sub>,
        undo: bool,
    ) -> Result<(), (u32, u32, String)> {
        let TcBlock {
            tables,
            map,
            scratch,
            ..
        } = self;
        let table = &tables[&p.table_id];
        let mut old_values: Vec<Value> = Vec::new();
        let mut new_values: Vec<Value> = Vec::new();
        let mut old_key: Vec<u8> = Vec::new();
        let mut new_key: Vec<u8> = Vec::new();
        let mut base_key: Vec<u8> = Vec::new();
        for (u, index) in table.unique.iter().enumerate() {
            if undo && p.inserted & (1 << u) == 0 {
                continue;
            }
            let hidden = &tables[&index.id];
            old_values.clear();
            if p.had_old && !undo {
                old_values.extend(index.at.iter().map(|&i| p.old[i].clone()));
            }
            new_values.clear();
            match p.kind {
                OpKind::Delete | OpKind::Read => {}
                OpKind::Insert | OpKind::Write => {
                    new_index_values(&table.def, index, op, &p.base_pk, None, &mut new_values)
                }
                OpKind::Update => {
                    assert!(p.had_old, "an update that succeeded found its row");
                    new_index_values(
                        &table.def,
                        index,
                        op,
                        &p.base_pk,
                        Some(&old_values),
                        &mut new_values,
                    )
                }
            }
            let has_old = !old_values.is_empty() && !old_values.iter().any(Value::is_null);
            let has_new = !new_values.is_empty() && !new_values.iter().any(Value::is_null);
            old_key.clear();
            new_key.clear();
            let encode_error = |e: schema::ValueError| {
                (
                    error::BAD_VALUE,
                    p.op_index,
                    format!(
                        "table `{}`, unique index `{}`: {e}",
                        table.def.name, index.name
                    ),
                )
            };
            if has_old {
                hidden
                    .distribution
                    .encode(&old_values, &mut old_key)
                    .map_err(encode_error)?;
            }
            if has_new {
                hidden
                    .distribution
                    .encode(&new_values, &mut new_key)
                    .map_err(encode_error)?;
            }
            if has_old && has_new && old_key == new_key {
                continue;
            }
            let u = u16::try_from(u).expect("indexes ≤ INDEXES_MAX");
            if has_old {
                let partition = partition_of(distribution_hash(&old_key), hidden.def.partitions);
                writer.begin(&index_header(
                    &hidden.def,
                    subs.len(),
                    partition,
                    OpKind::Delete,
                ));
                for v in &old_values {
                    writer.key(v.as_ref());
                }
                end_op(writer)?;
                let group = group_in(
                    map,
                    &mut scratch.groups,
                    partition,
                    hidden.def.fully_replicated,
                    OpKind::Delete,
                    LockMode::Exclusive,
                );
                subs.push(sub(pos, Role::IndexDelete(u), group));
            }
            if has_new {
                if base_key.is_empty() && !undo {
                    table
                        .primary
                        .encode(&p.base_pk, &mut base_key)
                        .map_err(encode_error)?;
                }
                let (kind, role) = if undo {
                    (OpKind::Delete, Role::UndoIndex(u))
                } else {
                    (OpKind::Insert, Role::IndexInsert(u))
                };
                let partition = partition_of(distribution_hash(&new_key), hidden.def.partitions);
                writer.begin(&index_header(&hidden.def, subs.len(), partition, kind));
                for v in &new_values {
                    writer.key(v.as_ref());
                }
                if !undo {
                    writer.value(base_key_column(&hidden.def), ValueRef::Bytes(&base_key));
                }
                end_op(writer)?;
                let group = group_in(
                    map,
                    &mut scratch.groups,
                    partition,
                    hidden.def.fully_replicated,
                    kind,
                    LockMode::Exclusive,
                );
                subs.push(sub(pos, role, group));
            }
        }
        Ok(())
    }

    /// Splits the staged round into one `LdmKeyReq` per group.
    fn send_staged(&mut self, slot: u32, plan: &Plan, first_sub: usize, ctx: &mut Context<'_>) {
        let tx_id = self.transactions.get(slot).tx_id;
        let reader = OpBatchReader::framed(&plan.stage).expect("staged by this TC");
        for g in 0..self.scratch.groups.len() {
            let group = self.scratch.groups[g].clone();
            let mut batch = self.scratch.buffer();
            {
                let mut writer = OpBatchWriter::new(&mut batch);
                for (i, op) in reader.iter().enumerate() {
                    if usize::from(plan.subs[first_sub + i].group) == g {
                        if let Err(e) = writer.copy(&op.header, &op) {
                            panic!("a part of a staged batch broke a batch limit: {e}");
                        }
                    }
                }
            }
            self.send_group(slot, tx_id, &group, batch, 0, ctx);
        }
    }

    /// An `LdmKeyConf` of a planned request.
    pub(crate) fn plan_conf(
        &mut self,
        slot: u32,
        from: BlockRef,
        results: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let tx_id = self.transactions.get(slot).tx_id;
        let reader = match ResultReader::new(&results) {
            Ok(reader) => reader,
            Err(e) => {
                tracing::error!(tc = %self.me, "LdmKeyConf from {from} for transaction {tx_id:#x}: {e}");
                let message = format!("a data node answered with a malformed result batch: {e}");
                return self.fail(slot, error::MALFORMED_REQUEST, u32::MAX, message, ctx);
            }
        };
        let mut plan = std::mem::take(&mut self.transactions.get_mut(slot).plan);
        let mut counted = 0u32;
        let mut failure = None;
        for result in reader.iter() {
            let Some(s) = plan.subs.get_mut(result.op_index as usize) else {
                let op = result.op_index;
                tracing::error!(tc = %self.me, "{from} answered op {op} of transaction {tx_id:#x}, which has no such op");
                continue;
            };
            if s.answered {
                tracing::error!(tc = %self.me, "{from} answered op {} of transaction {tx_id:#x} twice", result.op_index);
                continue;
            }
            s.answered = true;
            counted += 1;
            let s = *s;
            if failure.is_none() {
                failure = self
                    .on_sub_result(&mut plan.ops[s.owner as usize], s.role, &result)
                    .err();
            }
        }
        self.transactions.get_mut(slot).plan = plan;
        let tx = self.transactions.get_mut(slot);
        assert!(counted <= tx.outstanding, "every op is answered once");
        tx.outstanding -= counted;
        tx.confs.push(results);
        if let Some((code, op_index, message)) = failure {
            return self.fail(slot, code, op_index, message, ctx);
        }
        if tx.outstanding == 0 {
            self.advance(slot);
            self.plan_next(slot, ctx);
        }
    }

    /// Takes in one result; an error that aborts the transaction.
    fn on_sub_result(
        &mut self,
        p: &mut PlanOp,
        role: Role,
        result: &OpResult<'_>,
    ) -> Result<(), (u32, u32, String)> {
        let table = &self.tables[&p.table_id];
        let name = &table.def.name;
        let index_name = |u: u16| table.unique[usize::from(u)].name.as_str();
        let failed = |code: u32, what: String| {
            (
                code,
                p.op_index,
                format!("table `{name}`, operation {}: {what}", p.op_index),
            )
        };
        match role {
            Role::Lookup => {
                if result.code != 0 || !result.has_row {
                    let code = if result.code == 0 { error::NO_SUCH_ROW } else { result.code };
                    p.code = code;
                    p.done = true;
                    if p.ignore_error {
                        return Ok(());
                    }
                    return Err(failed(code, format!("by unique index {}: {}", p.by_index, error::message(code))));
                }
                let Some(ValueRef::Bytes(key)) = result.values().next() else {
                    return Err(failed(error::BAD_OPERATION, "the unique index row has no base key".into()));
                };
                let decoder = table.key_decoder.as_ref().expect("a table with unique indexes has a key decoder");
                p.base_pk.clear();
                let scratch = &mut self.scratch;
                decoder
                    .decode(key, &mut scratch.key_bytes, &mut p.base_pk)
                    .map_err(|e| failed(error::BAD_OPERATION, format!("the unique index row's base key: {e}")))?;
                let d = table.distribution.column_count();
                scratch.key_bytes.clear();
                table
                    .distribution
                    .encode(&p.base_pk[..d], &mut scratch.key_bytes)
                    .map_err(|e| failed(error::BAD_OPERATION, format!("the unique index row's base key: {e}")))?;
                p.partition = partition_of(distribution_hash(&scratch.key_bytes), table.def.partitions);
                Ok(())
            }
            Role::PreRead => {
                p.old.clear();
                p.had_old = result.code == 0 && result.has_row;
                if p.had_old {
                    p.old.extend(result.values().map(|v| v.to_value()));
                    if p.old.len() != table.unique_columns.len() {
                        return Err(failed(error::BAD_OPERATION, "the old row's indexed columns came back short".into()));
                    }
                    Ok(())
                } else if result.code == 0 || result.code == error::NO_SUCH_ROW {
                    Ok(())
                } else {
                    Err(failed(result.code, format!("reading the old row: {}", error::message(result.code))))
                }
            }
            Role::Base => {
                if result.code == 0 {
                    p.base_ok = true;
                    return Ok(());
                }
                p.done = true;
                if p.ignore_error {
                    return Ok(());
                }
                Err(failed(result.code, error::message(result.code).into()))
            }
            Role::IndexInsert(u) => match result.code {
                0 => {
                    p.inserted |= 1 << u;
                    Ok(())
                }
                // Taken back in the Undo round; the transaction goes on.
                error::DUPLICATE_KEY if p.ignore_error && p.kind == OpKind::Insert => {
                    p.code = error::UNIQUE_VIOLATION;
                    p.undo = true;
                    Ok(())
                }
                error::DUPLICATE_KEY => Err(failed(
                    error::UNIQUE_VIOLATION,
                    format!(
                        "unique index `{}` already holds the value: {}",
                        index_name(u),
                        error::message(error::UNIQUE_VIOLATION)
                    ),
                )),
                code => Err(failed(code, format!("writing unique index `{}`: {}", index_name(u), error::message(code)))),
            },
            Role::UndoBase | Role::UndoIndex(_) => match result.code {
                0 => Ok(()),
                // The rows are this transaction's, locked: not finding one
                // means the transaction's writes cannot be trusted.
                code => Err(failed(
                    if code == error::NO_SUCH_ROW { error::BAD_OPERATION } else { code },
                    format!("taking back an insert that met a unique violation: {}", error::message(code)),
                )),
            },
            Role::IndexDelete(u) => match result.code {
                0 => Ok(()),
                error::NO_SUCH_ROW => Err(failed(
                    error::BAD_OPERATION,
                    format!("unique index `{}` has no entry for the row's old value: the index is inconsistent", index_name(u)),
                )),
                code => Err(failed(code, format!("writing unique index `{}`: {}", index_name(u), error::message(code)))),
            },
        }
    }

    /// The reply's results of a planned request, in request order.
    pub(crate) fn write_plan_results(
        &self,
        slot: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), proto::ProtoError> {
        let tx = self.transactions.get(slot);
        let plan = &tx.plan;
        let mut by_sub: Vec<Option<OpResult<'_>>> = vec![None; plan.subs.len()];
        for conf in &tx.confs {
            let reader = ResultReader::new(conf).expect("validated when it came");
            for result in reader.iter() {
                let i = result.op_index as usize;
                if plan.subs.get(i).is_some_and(|s| s.role == Role::Base) {
                    by_sub[i] = Some(result);
                }
            }
        }
        let mut writer = ResultWriter::new(out);
        for p in &plan.ops {
            if p.code != 0 {
                writer.error(p.op_index, p.code)?;
                continue;
            }
            let result = by_sub
                .get(p.base_sub as usize)
                .copied()
                .flatten()
                .expect("an op that the TC did not answer ran on its base table");
            if result.has_row {
                writer.row(p.op_index);
                for v in result.values() {
                    writer.value(v);
                }
                for k in result.keys() {
                    writer.key(k);
                }
                writer.end_row()?;
            } else if result.code == 0 {
                writer.ok(p.op_index)?;
            } else {
                writer.error(p.op_index, result.code)?;
            }
        }
        Ok(())
    }
}

fn sub(owner: usize, role: Role, group: u16) -> Sub {
    Sub {
        owner: owner as u32,
        role,
        group,
        answered: false,
    }
}

/// The position of `$BASE_PK` in a unique index's hidden table: after its
/// key columns.
fn base_key_column(hidden: &TableDef) -> u16 {
    (hidden.columns.len() - 1) as u16
}

fn index_header(hidden: &TableDef, sub: usize, partition: u32, kind: OpKind) -> OpHeader {
    OpHeader {
        op_index: sub as u32,
        table_id: hidden.id,
        table_version: hidden.version,
        index_id: NO_INDEX,
        partition,
        kind,
        lock: LockMode::Exclusive,
        flags: 0,
    }
}

/// Begins an exclusive `kind` of `p`'s base row by its primary key (the
/// pre-read of its old row, an undo's delete), as sub `sub`.
fn begin_by_base_key(
    writer: &mut OpBatchWriter<'_>,
    def: &TableDef,
    p: &PlanOp,
    sub: usize,
    kind: OpKind,
) {
    writer.begin(&OpHeader {
        op_index: sub as u32,
        table_id: def.id,
        table_version: def.version,
        index_id: NO_INDEX,
        partition: p.partition,
        kind,
        lock: LockMode::Exclusive,
        flags: 0,
    });
    for v in &p.base_pk {
        writer.key(v.as_ref());
    }
}

fn end_op(writer: &mut OpBatchWriter<'_>) -> Result<(), (u32, u32, String)> {
    writer.end().map_err(|e| too_large(u32::MAX, &e))
}

fn too_large(op_index: u32, e: &proto::ProtoError) -> (u32, u32, String) {
    (
        error::REQUEST_TOO_LARGE,
        op_index,
        format!("the unique-index operations of the request do not fit in one batch: {e}"),
    )
}

/// The values of `index`'s columns after `op` (an insert, write or
/// update): a key column from `base_pk`, a written column from the op,
/// another from `old` (the old row's values of the index's columns, in
/// index order), else NULL.
fn new_index_values(
    table: &TableDef,
    index: &UniqueIndex,
    op: &OpView<'_>,
    base_pk: &[Value],
    old: Option<&[Value]>,
    out: &mut Vec<Value>,
) {
    for (k, &c) in index.columns.iter().enumerate() {
        let value = if let Some(i) = table.primary_key.iter().position(|&pk| pk == c) {
            base_pk.get(i).cloned()
        } else if let Some((_, v)) = op.values().find(|&(w, _)| usize::from(w) == c) {
            Some(v.to_value())
        } else {
            old.and_then(|old| old.get(k).cloned())
        };
        out.push(value.unwrap_or(Value::Null));
    }
}

/// How a key column is read back.
#[derive(Clone, Copy, Debug)]
enum KeyPart {
    /// The stored bytes (`width`), also the key bytes.
    Fixed { width: usize },
    /// FLOAT or DOUBLE: IEEE bits with the key's sign trick.
    Float { width: usize },
    /// CHAR/VARCHAR in chunks (a PAD SPACE, possibly case-folded string).
    Chunked,
    /// VARBINARY with escaped zero bytes.
    Escaped,
}

/// Reads a primary key back from the bytes `KeyEncoder::primary_key`
/// wrote (what a unique index row holds in `$BASE_PK`): values that encode
/// to the same key, which is what a lookup needs. A case-insensitive string
/// comes back case-folded and without trailing spaces (equal under its
/// collation); every other value comes back as it was. Fixed-size columns
/// are decoded by a row layout of the key's fixed-size columns alone, so
/// the stored format stays storage's.
pub(crate) struct KeyDecoder {
    table: String,
    parts: Vec<KeyPart>,
    /// The layout of the key's fixed-size columns (NOT NULL, in key order;
    /// their stored bytes back to back), if there are any.
    fixed: Option<RowLayout>,
    /// The key's encoder, to check a decoded key encodes back the same.
    encoder: schema::KeyEncoder,
}

impl KeyDecoder {
    /// The primary key's decoder of a valid table.
    pub(crate) fn primary_key(table: &TableDef) -> KeyDecoder {
        let mut parts = Vec::with_capacity(table.primary_key.len());
        let mut fixed_columns = Vec::new();
        for &c in &table.primary_key {
            let column = &table.columns[c];
            assert!(
                !column.nullable,
                "table `{}`: primary-key column `{}` is NOT NULL",
                table.name, column.name
            );
            let part = match (column.ty, column.ty.storage()) {
                (ColumnType::Float | ColumnType::Double, Storage::Fixed { bytes }) => {
                    KeyPart::Float { width: bytes }
                }
                (ColumnType::Char { .. } | ColumnType::VarChar { .. }, _) => KeyPart::Chunked,
                (ColumnType::VarBinary { .. }, _) => KeyPart::Escaped,
                (_, Storage::Fixed { bytes }) => KeyPart::Fixed { width: bytes },
                (ty, Storage::Var { .. }) => panic!(
                    "table `{}`: primary-key column `{}` is {ty}, which no key holds",
                    table.name, column.name
                ),
            };
            if matches!(part, KeyPart::Fixed { .. } | KeyPart::Float { .. }) {
                let mut column = column.clone();
                column.default = None;
                fixed_columns.push(column);
            }
            parts.push(part);
        }
        let fixed = (!fixed_columns.is_empty()).then(|| {
            RowLayout::new(&TableDef {
                name: table.name.clone(),
                id: table.id,
                version: table.version,
                columns: fixed_columns,
                primary_key: Vec::new(),
                distribution_key: Vec::new(),
                indexes: Vec::new(),
                partitions: table.partitions,
                read_backup: false,
                fully_replicated: false,
                sql_meta: Vec::new(),
                replaces: 0,
            })
        });
        KeyDecoder {
            table: table.name.clone(),
            parts,
            fixed,
            encoder: schema::KeyEncoder::primary_key(table),
        }
    }

    /// Appends the key's values to `out` (in key order); `scratch` is a
    /// reused buffer. An error says what is wrong with the bytes.
    pub(crate) fn decode(
        &self,
        key: &[u8],
        scratch: &mut Vec<u8>,
        out: &mut Vec<Value>,
    ) -> Result<(), String> {
        let bad = |what: &str| {
            format!(
                "table `{}`: a primary key of {} bytes: {what}",
                self.table,
                key.len()
            )
        };
        let start = out.len();
        scratch.clear();
        let mut at = 0usize;
        for part in &self.parts {
            match *part {
                KeyPart::Fixed { width } => {
                    let bytes = key.get(at..at + width).ok_or_else(|| bad("cut short"))?;
                    scratch.extend_from_slice(bytes);
                    at += width;
                    out.push(Value::Null);
                }
                KeyPart::Float { width } => {
                    let bytes = key.get(at..at + width).ok_or_else(|| bad("cut short"))?;
                    let mut word = [0u8; 8];
                    word[8 - width..].copy_from_slice(bytes);
                    let bits = u64::from_be_bytes(word);
                    let sign = 1u64 << (width * 8 - 1);
                    let mask = if width == 8 {
                        u64::MAX
                    } else {
                        (1u64 << (width * 8)) - 1
                    };
                    let stored = if bits & sign != 0 {
                        bits & !sign
                    } else {
                        !bits & mask
                    };
                    scratch.extend_from_slice(&stored.to_be_bytes()[8 - width..]);
                    at += width;
                    out.push(Value::Null);
                }
                KeyPart::Chunked => {
                    let mut text = Vec::new();
                    loop {
                        let chunk = key
                            .get(at..at + STRING_KEY_CHUNK_BYTES + 1)
                            .ok_or_else(|| bad("a string cut short"))?;
                        at += STRING_KEY_CHUNK_BYTES + 1;
                        text.extend_from_slice(&chunk[..STRING_KEY_CHUNK_BYTES]);
                        match chunk[STRING_KEY_CHUNK_BYTES] {
                            0x02 => break,
                            0x01 | 0x03 => {}
                            _ => return Err(bad("a string chunk with a bad marker")),
                        }
                    }
                    while text.last() == Some(&b' ') {
                        text.pop();
                    }
                    let text =
                        String::from_utf8(text).map_err(|_| bad("a string that is not UTF-8"))?;
                    out.push(Value::String(text));
                }
                KeyPart::Escaped => {
                    let mut bytes = Vec::new();
                    loop {
                        let b = *key.get(at).ok_or_else(|| bad("bytes cut short"))?;
                        at += 1;
                        if b != 0 {
                            bytes.push(b);
                            continue;
                        }
                        let next = *key.get(at).ok_or_else(|| bad("bytes cut short"))?;
                        at += 1;
                        match next {
                            0x00 => break,
                            0xFF => bytes.push(0),
                            _ => return Err(bad("a bad escape in bytes")),
                        }
                    }
                    out.push(Value::Bytes(bytes));
                }
            }
        }
        if at != key.len() {
            return Err(bad("bytes after the last column"));
        }
        if let Some(layout) = &self.fixed {
            layout
                .validate_row(scratch, &[])
                .map_err(|e| bad(&e.to_string()))?;
            let mut f = 0;
            for (i, part) in self.parts.iter().enumerate() {
                if matches!(part, KeyPart::Fixed { .. } | KeyPart::Float { .. }) {
                    out[start + i] = layout.decode_column(scratch, &[], f).to_value();
                    f += 1;
                }
            }
        }
        // The values must lead back to this key (a lookup by them finds
        // the row).
        scratch.clear();
        self.encoder
            .encode(&out[start..], scratch)
            .map_err(|e| bad(&e.to_string()))?;
        if scratch.as_slice() != key {
            return Err(bad("the decoded values encode to another key"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::{Collation, Column, Date, DateTime, Decimal, KeyEncoder};

    #[test]
    fn keys_of_every_key_type_decode_to_values_that_encode_the_same() {
        let columns = vec![
            Column::new("i8", ColumnType::TinyInt { unsigned: false }),
            Column::new("u32", ColumnType::Int { unsigned: true }),
            Column::new("i64", ColumnType::BigInt { unsigned: false }),
            Column::new("f", ColumnType::Float),
            Column::new("d", ColumnType::Double),
            Column::new(
                "dec",
                ColumnType::Decimal {
                    precision: 12,
                    scale: 3,
                },
            ),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 30,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
            Column::new(
                "ci",
                ColumnType::Char {
                    len: 10,
                    collation: Collation::Utf8mb4GeneralCi,
                },
            ),
            Column::new("b", ColumnType::VarBinary { max: 16 }),
            Column::new("bin", ColumnType::Binary { len: 3 }),
            Column::new("day", ColumnType::Date),
            Column::new("at", ColumnType::DateTime { fsp: 3 }),
            Column::new("x", ColumnType::Int { unsigned: false }).nullable(),
        ];
        let table = TableDef::new("all", 9, columns)
            .primary_key((0..12).collect())
            .build()
            .unwrap();
        let decoder = KeyDecoder::primary_key(&table);
        let encoder = KeyEncoder::primary_key(&table);
        let rows = [
            vec![
                Value::Int(-128),
                Value::UInt(u64::from(u32::MAX)),
                Value::Int(i64::MIN),
                Value::Float(-1.5),
                Value::Double(-0.0),
                Value::Decimal(Decimal::parse("-123456789.125").unwrap()),
                Value::String("abcdefgh  x\t".into()),
                Value::String("MiXeD ".into()),
                Value::Bytes(vec![0, 0, 1, 0, 255]),
                Value::Bytes(vec![1, 0, 2]),
                Value::Date(Date::new(2024, 2, 29)),
                Value::DateTime(DateTime::new(Date::new(1999, 12, 31), 23, 59, 58, 123_000)),
            ],
            vec![
                Value::Int(127),
                Value::UInt(0),
                Value::Int(42),
                Value::Float(3.25),
                Value::Double(f64::MAX),
                Value::Decimal(Decimal::parse("0.001").unwrap()),
                Value::String(String::new()),
                Value::String("ÅÄÖ".into()),
                Value::Bytes(Vec::new()),
                Value::Bytes(vec![0, 0, 0]),
                Value::Date(Date::new(1000, 1, 1)),
                Value::DateTime(DateTime::new(Date::new(2000, 1, 1), 0, 0, 0, 0)),
            ],
        ];
        let mut scratch = Vec::new();
        for row in &rows {
            let mut key = Vec::new();
            encoder.encode(row, &mut key).unwrap();
            let mut back = vec![Value::Int(7)];
            decoder.decode(&key, &mut scratch, &mut back).unwrap();
            assert_eq!(back[0], Value::Int(7), "appends");
            let back = &back[1..];
            let mut again = Vec::new();
            encoder.encode(back, &mut again).unwrap();
            assert_eq!(again, key, "{back:?}");
            // Exact values, but the case-insensitive string comes back
            // folded and without trailing spaces (equal under its collation).
            for c in (0..12).filter(|&c| c != 7) {
                assert_eq!(back[c], row[c], "column {c}");
            }
            let Value::String(folded) = &row[7] else {
                unreachable!()
            };
            let weights = Collation::Utf8mb4GeneralCi.sort_key(folded);
            assert_eq!(back[7], Value::String(weights));
        }
        let mut key = Vec::new();
        encoder.encode(&rows[0], &mut key).unwrap();
        let mut out = Vec::new();
        assert!(decoder
            .decode(&key[..key.len() - 1], &mut scratch, &mut out)
            .is_err());
        key.push(0);
        out.clear();
        assert!(decoder.decode(&key, &mut scratch, &mut out).is_err());
    }
}
