//! A transaction's journal of before-images: what lets a client take back
//! the writes made after a point of a transaction and keep the ones before
//! it (SQL's `ROLLBACK TO SAVEPOINT`). The data nodes have no such thing:
//! a native transaction's writes stay until it commits or aborts whole,
//! as in NDB.
//!
//! Once [`Transaction::journal_mark`] turns it on, every write the
//! transaction defines by primary key is noted, and the execute that sends
//! such writes first reads each noted row with an exclusive lock, in one
//! request of its own: the row as it was before the writes, or its
//! absence. The journal keeps these images in write order; a mark is a
//! position in it, always between two requests (taking one sends what is
//! pending), so that no request both writes a row before a mark and has
//! its image read for a write after it. [`Transaction::rollback_to_mark`] puts back, for every
//! row written after a mark, its image from before the first of those
//! writes: it deletes every such row (one request), then inserts every
//! image that was a row (one more), BLOB/TEXT values whole.
//!
//! Why the result is the transaction as it was at the mark:
//! - a row written after the mark has been locked exclusively by this
//!   transaction since its image was read, so its image is what it was at
//!   the mark, unless an earlier write of this transaction after the mark
//!   changed it, and then the earlier image is the one put back;
//! - a row not written after the mark is as it was then (this transaction
//!   did not touch it, and others do not see its uncommitted state);
//! - deleting every written row before inserting any means no image put
//!   back meets a unique value that another one still holds; the unique
//!   values the transaction gave up are still locked by it (a deleted
//!   index row stays locked until the end), so no other transaction took
//!   one meanwhile.
//!
//! A write by unique key (whose primary key is known only at the data
//! node) is noted as one the journal cannot take back: a rollback to a
//! mark before it is refused ([`Transaction::journal_covers`]), and the
//! caller rolls back the whole transaction instead.
//!
//! Cost: nothing while off; while on, one read per write and one more
//! request per execute that sends writes (an execute that commits reads
//! nothing: no rollback to a mark can follow it).

use std::collections::HashMap;
use std::sync::Arc;

use proto::{error as codes, LockMode, BATCH_BYTES_MAX};
use schema::{KeyEncoder, Value};

use crate::blob::RESULT_BYTES_BUDGET;
use crate::error::{Error, Result};
use crate::schema::Table;
use crate::transaction::{ExecMode, Op, OpResult, Transaction};

/// Bytes a read's result takes beyond its row's, for sizing requests.
const RESULT_OVERHEAD_BYTES: usize = 64;

/// Operations per request of the journal's reads, deletes and inserts,
/// well under `proto::OPS_PER_BATCH_MAX`.
const OPS_PER_REQUEST_MAX: usize = 1_024;

/// Bytes of row images one transaction's journal keeps (about: each
/// value's bytes and 16 more) unless [`Transaction::journal_bytes_max`]
/// says otherwise. Past it, later writes are noted as not taken back
/// (and not read): a rollback to a mark before them is refused, so the
/// caller rolls back the whole transaction.
pub const JOURNAL_BYTES_MAX: usize = 64 << 20;

/// The journal of one transaction (see the module doc).
#[derive(Debug)]
pub(crate) struct Journal {
    /// Writes defined and not yet sent: table and primary key (None:
    /// written by unique key). Their images are read before they go.
    pending: Vec<(Arc<Table>, Option<Vec<Value>>)>,
    /// Each write's image, oldest first.
    entries: Vec<Entry>,
    /// Bytes of the images in `entries`, and their limit.
    bytes: usize,
    bytes_max: usize,
    /// The rollback's own writes are not noted.
    replaying: bool,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal {
            pending: Vec::new(),
            entries: Vec::new(),
            bytes: 0,
            bytes_max: JOURNAL_BYTES_MAX,
            replaying: false,
        }
    }
}

#[derive(Debug)]
struct Entry {
    table: Arc<Table>,
    key: Vec<Value>,
    before: Before,
}

/// A row before a write.
#[derive(Debug)]
enum Before {
    /// There was none.
    Absent,
    /// This row: each column's position and value.
    Row(Vec<(usize, Value)>),
    /// Not known (why): no rollback to a mark before the write.
    Unknown(String),
}

impl Entry {
    /// The bytes its image counted in [`Journal::bytes`].
    fn image_bytes(&self) -> usize {
        match &self.before {
            Before::Row(image) => image_bytes(image),
            Before::Absent | Before::Unknown(_) => 0,
        }
    }
}

impl Journal {
    /// A write was defined (`Transaction::define`).
    pub(crate) fn note(&mut self, table: &Arc<Table>, key: Option<&[Value]>) {
        if !self.replaying {
            self.pending
                .push((Arc::clone(table), key.map(<[Value]>::to_vec)));
        }
    }

    fn position(&self) -> usize {
        self.entries.len() + self.pending.len()
    }
}

impl Transaction<'_> {
    /// Turns the journal on (when it is not) and returns a mark of this
    /// point of the transaction: [`Transaction::rollback_to_mark`] takes
    /// back what was written after it. Operations still pending are sent
    /// first, so that a mark always falls between two requests: a row's
    /// image is read before the request that writes it, so a write before
    /// the mark in the same request would be missing from the image of a
    /// write after it. An error of theirs ends the transaction, as it
    /// would at their execute.
    pub fn journal_mark(&self) -> Result<usize> {
        if self.pending_ops() > 0 {
            self.execute(ExecMode::NoCommit)?;
        }
        let mut inner = self.inner().borrow_mut();
        let journal = inner.journal.get_or_insert_with(Default::default);
        debug_assert!(journal.pending.is_empty(), "sent above");
        Ok(journal.entries.len())
    }

    /// The bytes of row images the journal keeps ([`JOURNAL_BYTES_MAX`]
    /// unless set here); it applies from the next execute on.
    pub fn journal_bytes_max(&self, bytes: usize) {
        if let Some(journal) = self.inner().borrow_mut().journal.as_deref_mut() {
            journal.bytes_max = bytes;
        }
    }

    /// Whether the journal is on (a mark was taken and not stopped).
    pub fn journal_active(&self) -> bool {
        self.inner().borrow().journal.is_some()
    }

    /// Turns the journal off and forgets it (no mark is needed any more).
    pub fn journal_stop(&self) {
        self.inner().borrow_mut().journal = None;
    }

    /// Whether [`Transaction::rollback_to_mark`] can take back everything
    /// written after `mark`; else why not.
    pub fn journal_covers(&self, mark: usize) -> std::result::Result<(), String> {
        let inner = self.inner().borrow();
        let Some(journal) = inner.journal.as_deref() else {
            return Err("the transaction keeps no journal of its writes".into());
        };
        if mark > journal.position() {
            return Err(format!(
                "mark {mark} is past the journal's end ({})",
                journal.position()
            ));
        }
        let unknown = journal
            .entries
            .iter()
            .skip(mark)
            .find_map(|e| match &e.before {
                Before::Unknown(why) => Some(why.clone()),
                _ => None,
            });
        // Every pending write came after the last mark (`journal_mark`).
        let by_unique_key = journal.pending.iter().find(|(_, key)| key.is_none());
        match (unknown, by_unique_key) {
            (Some(why), _) => Err(why),
            (None, Some((table, _))) => Err(unique_key_write(table)),
            (None, None) => Ok(()),
        }
    }

    /// Takes back every write made after `mark` (see the module doc): the
    /// rows they wrote are as they were at the mark, and the transaction
    /// goes on. Writes still pending are sent first. An error (one the
    /// journal cannot cover, see [`Transaction::journal_covers`], or one
    /// of the data nodes) rolls back the whole transaction.
    pub fn rollback_to_mark(&self, mark: usize) -> Result<()> {
        self.check_open()?;
        if let Err(why) = self.journal_covers(mark) {
            let _ = self.execute(ExecMode::Rollback);
            return Err(Error::usage(format!(
                "cannot roll back to mark {mark}: {why}"
            )));
        }
        let restored = self.restore(mark);
        if let Some(journal) = self.inner().borrow_mut().journal.as_deref_mut() {
            journal.replaying = false;
        }
        if restored.is_err() {
            let _ = self.execute(ExecMode::Rollback);
        }
        restored
    }

    fn restore(&self, mark: usize) -> Result<()> {
        if self.pending_ops() > 0 {
            self.execute(ExecMode::NoCommit)?;
        }
        let entries = {
            let mut inner = self.inner().borrow_mut();
            let journal = inner
                .journal
                .as_deref_mut()
                .expect("journal_covers found one");
            debug_assert!(journal.pending.is_empty(), "the execute above read them");
            journal.replaying = true;
            let dropped = journal.entries.split_off(mark.min(journal.entries.len()));
            // Their images no longer count against the limit.
            let freed: usize = dropped.iter().map(Entry::image_bytes).sum();
            debug_assert!(freed <= journal.bytes, "every kept image was counted");
            journal.bytes -= freed;
            dropped
        };
        // Each row's image from before its first write after the mark.
        let mut encoders: HashMap<u32, KeyEncoder> = HashMap::new();
        let mut seen: std::collections::HashSet<(u32, Vec<u8>)> = Default::default();
        let mut rows: Vec<&Entry> = Vec::new();
        for entry in &entries {
            let encoder = encoders
                .entry(entry.table.id())
                .or_insert_with(|| KeyEncoder::primary_key(entry.table.def()));
            let mut bytes = Vec::new();
            encoder
                .encode(&entry.key, &mut bytes)
                .map_err(|e| Error::new(codes::BAD_VALUE, e.to_string()))?;
            if seen.insert((entry.table.id(), bytes)) {
                rows.push(entry);
            }
        }
        // Every written row goes; a row not there is no error.
        for chunk in rows.chunks(OPS_PER_REQUEST_MAX) {
            for entry in chunk {
                self.define(Op::delete(&entry.table, &entry.key).ignore_error())?;
            }
            let outcome = self.execute(ExecMode::NoCommit)?;
            for result in outcome.results() {
                if let OpResult::Failed(error) = result {
                    if error.code != codes::NO_SUCH_ROW {
                        return Err(error.clone());
                    }
                }
            }
        }
        // Then the rows that were there come back.
        let mut put = 0;
        let mut bytes = 0;
        for entry in rows {
            let Before::Row(row) = &entry.before else {
                continue;
            };
            let row_bytes = entry.table.def().max_row_bytes() + RESULT_OVERHEAD_BYTES;
            if put > 0 && (put == OPS_PER_REQUEST_MAX || bytes + row_bytes > BATCH_BYTES_MAX / 2) {
                self.execute(ExecMode::NoCommit)?;
                (put, bytes) = (0, 0);
            }
            self.define(Op::insert_at(&entry.table, row))?;
            put += 1;
            bytes += row_bytes;
        }
        if put > 0 {
            self.execute(ExecMode::NoCommit)?;
        }
        Ok(())
    }

    /// Before an execute in `mode` sends writes the journal noted: reads
    /// their rows' images, in requests of their own (the defined
    /// operations are set aside meanwhile and keep their handles).
    pub(crate) fn journal_reads(&self, mode: ExecMode) -> Result<()> {
        let pending = {
            let mut inner = self.inner().borrow_mut();
            match inner.journal.as_deref_mut() {
                Some(journal) if !journal.pending.is_empty() => {
                    std::mem::take(&mut journal.pending)
                }
                _ => return Ok(()),
            }
        };
        if mode != ExecMode::NoCommit {
            // Committed or rolled back whole: no mark can be rolled back to.
            return Ok(());
        }
        let room = self
            .inner()
            .borrow()
            .journal
            .as_deref()
            .map_or((0, 0), |j| {
                (j.bytes_max.saturating_sub(j.bytes), j.bytes_max)
            });
        let aside = self.inner().borrow_mut().set_aside();
        let read = self.read_images(&pending, room);
        self.inner().borrow_mut().put_back(aside);
        let (entries, bytes) = read?;
        if let Some(journal) = self.inner().borrow_mut().journal.as_deref_mut() {
            journal.entries.extend(entries);
            journal.bytes += bytes;
        }
        Ok(())
    }

    /// The images of `pending`'s rows, each read with an exclusive lock,
    /// and their bytes: while they fit in `room` (bytes left, limit).
    fn read_images(
        &self,
        pending: &[(Arc<Table>, Option<Vec<Value>>)],
        (room, bytes_max): (usize, usize),
    ) -> Result<(Vec<Entry>, usize)> {
        let mut entries = Vec::with_capacity(pending.len());
        let mut kept = 0;
        let mut at = 0;
        while at < pending.len() {
            if kept >= room {
                // Full: the rest is not read, and not taken back.
                let why = format!(
                    "the transaction's journal holds more than {bytes_max} bytes of row images \
                     (JOURNAL_BYTES_MAX)"
                );
                entries.extend(pending[at..].iter().map(|(table, key)| Entry {
                    table: Arc::clone(table),
                    key: key.clone().unwrap_or_default(),
                    before: Before::Unknown(why.clone()),
                }));
                break;
            }
            let start = at;
            let mut handles = Vec::new();
            let mut bytes = 0;
            while at < pending.len() && handles.len() < OPS_PER_REQUEST_MAX {
                let (table, key) = &pending[at];
                let row_bytes = table.def().max_row_bytes() + RESULT_OVERHEAD_BYTES;
                if !handles.is_empty() && bytes + row_bytes > RESULT_BYTES_BUDGET {
                    break;
                }
                let handle = match key {
                    Some(key) => Some(
                        self.define(
                            Op::read(table, key)
                                .lock(LockMode::Exclusive)
                                .ignore_error(),
                        )?,
                    ),
                    None => None,
                };
                handles.push(handle);
                bytes += row_bytes;
                at += 1;
            }
            let outcome = self.execute(ExecMode::NoCommit)?;
            for ((table, key), handle) in pending[start..at].iter().zip(handles) {
                let before = match handle.map(|h| outcome.result(h)) {
                    None => Before::Unknown(unique_key_write(table)),
                    Some(Some(OpResult::Row(row))) => {
                        let image: Vec<(usize, Value)> = row
                            .columns()
                            .iter()
                            .copied()
                            .zip(row.values().iter().cloned())
                            .collect();
                        kept += image_bytes(&image);
                        Before::Row(image)
                    }
                    Some(Some(OpResult::Failed(e))) if e.code == codes::NO_SUCH_ROW => {
                        Before::Absent
                    }
                    Some(Some(OpResult::Failed(e))) => Before::Unknown(format!(
                        "reading a row of `{}` before its write failed: {e}",
                        table.name()
                    )),
                    Some(other) => Before::Unknown(format!(
                        "reading a row of `{}` before its write answered {other:?}",
                        table.name()
                    )),
                };
                entries.push(Entry {
                    table: Arc::clone(table),
                    key: key.clone().unwrap_or_default(),
                    before,
                });
            }
        }
        Ok((entries, kept))
    }
}

/// About the bytes a row image holds: each value's bytes and 16 more.
fn image_bytes(image: &[(usize, Value)]) -> usize {
    image
        .iter()
        .map(|(_, v)| {
            16 + match v {
                Value::String(s) => s.len(),
                Value::Bytes(b) => b.len(),
                Value::BlobHead { inline, .. } => inline.len(),
                _ => 8,
            }
        })
        .sum()
}

fn unique_key_write(table: &Table) -> String {
    format!(
        "a write of `{}` by unique key, which the journal cannot take back",
        table.name()
    )
}
