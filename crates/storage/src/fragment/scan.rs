//! Scans of one fragment: the whole row store, or a range of an ordered
//! index, in batches that resume from a cursor.
//!
//! Scans read committed rows only, without locks (read committed, as
//! committed reads by key): uncommitted inserts are skipped, and a row with
//! a pending update or delete is returned as last committed. Ordered
//! indexes hold committed keys only, so an index range is the committed
//! state too. A locking scan (the LDM's) reads each row with its lock, so
//! a row its transaction changed comes as changed, and then visits that
//! transaction's own changes the committed rows lack
//! ([`Fragment::scan_own_inserts`]).
//!
//! Between batches the fragment changes; a batch never sees a half-applied
//! change (batches run between operations of the single LDM thread), and a
//! resumed scan continues after the last row it returned: after its row id
//! for a full scan, after its (key, row id) for an ordered one. Rows that
//! commit behind the cursor are not seen; rows ahead of it are.

use std::ops::Bound;

use crate::memory::{row_page, row_slot, PagePool};
use crate::ordered_index::{Direction, KeyRange, OrderedIndex};
use crate::RowId;
use schema::{RowLayout, Value, ValueRef};

use super::{Fragment, FragmentError, PendingKind};
use crate::locks::TxId;

/// Most rows one scan batch may ask for: bounds the memory of a batch
/// (rows of up to 30,000 bytes) and the time the LDM thread spends in one
/// call.
pub const SCAN_BATCH_ROWS_MAX: usize = 4_096;

/// Which rows a scan visits.
#[derive(Clone, Debug, PartialEq)]
pub enum ScanRange {
    /// Every committed row, in row id order.
    Full,
    /// The committed rows whose key in ordered index `index_id` (the
    /// dictionary's index id) lies between the bounds. A bound is the
    /// values of a prefix of the index columns, as
    /// [`crate::ordered_index::KeyRange`] explains: `Included(prefix)` as
    /// the lower bound takes every key that starts with the prefix.
    Ordered {
        index_id: u32,
        lower: Bound<Vec<Value>>,
        upper: Bound<Vec<Value>>,
        direction: Direction,
    },
}

/// A scan: the rows to visit and the columns the reader wants.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanSpec {
    pub range: ScanRange,
    /// Positions of the columns [`ScanBatch::value`] reads, in order. The
    /// batch keeps whole row images (a copy of stored bytes is cheaper than
    /// decoding); the projection says which columns a reader of the batch
    /// (the wire encoding, issue 4) takes out of them.
    pub columns: Vec<usize>,
}

/// Where a scan stands between batches. Start with [`ScanCursor::new`];
/// each [`Fragment::scan`] call moves it on. Its buffer is reused, so a
/// scan allocates nothing per batch once warm.
#[derive(Clone, Debug, Default)]
pub struct ScanCursor {
    state: CursorState,
    /// The last row returned.
    row: Option<RowId>,
    /// Its index key (ordered scans).
    key: Vec<u8>,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
enum CursorState {
    #[default]
    Start,
    Running,
    Done,
}

impl ScanCursor {
    /// A cursor at the start of a scan.
    pub fn new() -> ScanCursor {
        ScanCursor::default()
    }

    /// Back to the start (for another scan), keeping the buffer.
    pub fn reset(&mut self) {
        self.state = CursorState::Start;
        self.row = None;
        self.key.clear();
    }

    /// Whether the scan has returned its last row.
    pub fn is_done(&self) -> bool {
        self.state == CursorState::Done
    }
}

/// What a [`Fragment::scan`] call left to do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScanProgress {
    /// The batch is full and more rows may follow: call again with the
    /// same cursor.
    More,
    /// The scan has returned every row.
    Done,
}

/// The rows of one batch: whole committed images, copied out of the row
/// store, and the projection to read them with. Reused from batch to batch.
#[derive(Clone, Debug, Default)]
pub struct ScanBatch {
    columns: Vec<usize>,
    fixed_bytes: usize,
    rows: Vec<RowId>,
    fixed: Vec<u8>,
    var: Vec<u8>,
    /// End of each row's var part in `var`.
    var_ends: Vec<u32>,
    /// Encoded bounds of an ordered scan (kept to reuse their buffers).
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl ScanBatch {
    pub fn new() -> ScanBatch {
        ScanBatch::default()
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row id of row `i` (where the row lived when it was scanned).
    pub fn row_id(&self, i: usize) -> RowId {
        self.rows[i]
    }

    /// The fixed and var part of row `i`.
    pub fn image(&self, i: usize) -> (&[u8], &[u8]) {
        let fixed = &self.fixed[i * self.fixed_bytes..(i + 1) * self.fixed_bytes];
        let start = if i == 0 {
            0
        } else {
            self.var_ends[i - 1] as usize
        };
        (fixed, &self.var[start..self.var_ends[i] as usize])
    }

    /// The projection of the scan that filled the batch.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// Projected column `j` of row `i`; `layout` is the fragment's.
    pub fn value<'a>(&'a self, layout: &RowLayout, i: usize, j: usize) -> ValueRef<'a> {
        let (fixed, var) = self.image(i);
        layout.decode_column(fixed, var, self.columns[j])
    }

    fn clear(&mut self, fixed_bytes: usize, columns: &[usize]) {
        self.columns.clear();
        self.columns.extend_from_slice(columns);
        self.fixed_bytes = fixed_bytes;
        self.rows.clear();
        self.fixed.clear();
        self.var.clear();
        self.var_ends.clear();
    }

    fn push(&mut self, row: RowId, fixed: &[u8], var: &[u8]) {
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        self.rows.push(row);
        self.fixed.extend_from_slice(fixed);
        self.var.extend_from_slice(var);
        self.var_ends.push(self.var.len() as u32);
    }
}

impl Fragment {
    /// Fills `out` with up to `batch_rows` committed rows of `spec`, going
    /// on from `cursor`, and moves the cursor past them. Takes no lock and
    /// changes nothing. A bad spec (no such index, a bound value that does
    /// not fit its column, a projected column that does not exist) is an
    /// error that leaves the cursor as it was.
    pub fn scan(
        &self,
        pool: &PagePool,
        spec: &ScanSpec,
        cursor: &mut ScanCursor,
        batch_rows: usize,
        out: &mut ScanBatch,
    ) -> Result<ScanProgress, FragmentError> {
        assert!(
            (1..=SCAN_BATCH_ROWS_MAX).contains(&batch_rows),
            "a scan batch of {batch_rows} rows: 1..={SCAN_BATCH_ROWS_MAX} allowed"
        );
        let columns = self.layout.column_count();
        if let Some(&column) = spec.columns.iter().find(|&&c| c >= columns) {
            return Err(FragmentError::NoSuchColumn {
                table: self.table.clone(),
                column,
                columns,
            });
        }
        out.clear(self.layout.fixed_bytes(), &spec.columns);
        if cursor.state == CursorState::Done {
            return Ok(ScanProgress::Done);
        }
        let progress = match &spec.range {
            ScanRange::Full => self.scan_full(pool, cursor, batch_rows, out),
            ScanRange::Ordered {
                index_id,
                lower,
                upper,
                direction,
            } => self.scan_ordered(
                pool,
                (*index_id, lower, upper, *direction),
                cursor,
                batch_rows,
                out,
            )?,
        };
        cursor.state = match progress {
            ScanProgress::More => CursorState::Running,
            ScanProgress::Done => CursorState::Done,
        };
        debug_assert!(out.len() <= batch_rows);
        Ok(progress)
    }

    /// Fills `out` with up to `batch_rows` rows of transaction `tx`'s own
    /// uncommitted changes that the committed rows of `spec`'s range lack,
    /// in row id order after `after` (which it moves on): its inserts that
    /// the range holds, and (ordered scans) its updated rows whose new key
    /// the range holds and whose committed key it does not. A locking scan
    /// of `tx` visits them after the committed rows, so that a transaction
    /// sees what it wrote, as its key reads do (the reader takes the row's
    /// pending image with its lock). Ordered indexes hold committed keys
    /// only, so an ordered scan gets these after its range, out of key
    /// order.
    pub fn scan_own_inserts(
        &self,
        pool: &PagePool,
        tx: TxId,
        spec: &ScanSpec,
        after: &mut Option<RowId>,
        batch_rows: usize,
        out: &mut ScanBatch,
    ) -> Result<ScanProgress, FragmentError> {
        out.clear(self.layout.fixed_bytes(), &spec.columns);
        let Some(rows) = self.txs.get(&tx) else {
            return Ok(ScanProgress::Done);
        };
        let mut own: Vec<RowId> = rows
            .iter()
            .copied()
            .filter(|r| after.is_none_or(|a| *r > a))
            .filter(|r| {
                self.pending.get(r).is_some_and(|p| {
                    p.tx == tx && matches!(p.kind, PendingKind::Insert | PendingKind::Update)
                })
            })
            .collect();
        own.sort_unstable();
        own.dedup();
        let mut lower_key = std::mem::take(&mut out.lower);
        let mut upper_key = std::mem::take(&mut out.upper);
        let result = (|| {
            let index = match &spec.range {
                ScanRange::Full => None,
                ScanRange::Ordered {
                    index_id,
                    lower,
                    upper,
                    ..
                } => {
                    let index =
                        self.ordered
                            .iter()
                            .find(|i| i.id == *index_id)
                            .ok_or_else(|| FragmentError::NoSuchIndex {
                                table: self.table.clone(),
                                index_id: *index_id,
                            })?;
                    let lower = encode_bound(&index.encoder, lower, &mut lower_key)
                        .map_err(FragmentError::from)?;
                    let upper = encode_bound(&index.encoder, upper, &mut upper_key)
                        .map_err(FragmentError::from)?;
                    Some((index, lower, upper))
                }
            };
            let mut key = Vec::new();
            for row in own {
                let (fixed, var) = (self.rows.fixed(pool, row), self.rows.var(pool, row));
                let update = self
                    .pending
                    .get(&row)
                    .filter(|p| p.kind == PendingKind::Update);
                match (&index, update) {
                    // A full scan visited the updated row among the
                    // committed ones.
                    (None, Some(_)) => continue,
                    (None, None) => {}
                    (Some((index, lower, upper)), update) => {
                        let range = KeyRange::new(
                            bound_ref(*lower, &lower_key),
                            bound_ref(*upper, &upper_key),
                        );
                        let mut in_range = |fixed: &[u8], var: &[u8]| {
                            key.clear();
                            index
                                .encoder
                                .encode_from_row(&self.layout, fixed, var, &mut key);
                            range.holds(&key)
                        };
                        // An insert: its key is in no index yet. An update
                        // the range missed: its committed key is out of the
                        // range and its new one in it.
                        let missed = match update {
                            None => in_range(fixed, var),
                            Some(p) => {
                                !in_range(fixed, var) && in_range(&p.image.fixed, &p.image.var)
                            }
                        };
                        if !missed {
                            continue;
                        }
                    }
                }
                if out.len() == batch_rows {
                    return Ok(ScanProgress::More);
                }
                out.push(row, fixed, var);
                *after = Some(row);
            }
            Ok(ScanProgress::Done)
        })();
        out.lower = lower_key;
        out.upper = upper_key;
        result
    }

    fn scan_full(
        &self,
        pool: &PagePool,
        cursor: &mut ScanCursor,
        batch_rows: usize,
        out: &mut ScanBatch,
    ) -> ScanProgress {
        // The first row id not yet visited.
        let (first_page, first_slot) = match cursor.row {
            None => (0, 0),
            Some(last) if row_slot(last) + 1 < self.rows.slots_per_page() => {
                (row_page(last), row_slot(last) + 1)
            }
            Some(last) => (row_page(last) + 1, 0),
        };
        for page in first_page..self.rows.page_count() {
            for row in self.rows.page_rows(page) {
                if page == first_page && row_slot(row) < first_slot {
                    continue;
                }
                if self.rows.is_uncommitted(pool, row) {
                    continue;
                }
                if out.len() == batch_rows {
                    return ScanProgress::More;
                }
                out.push(row, self.rows.fixed(pool, row), self.rows.var(pool, row));
                cursor.row = Some(row);
            }
        }
        ScanProgress::Done
    }

    fn scan_ordered(
        &self,
        pool: &PagePool,
        (index_id, lower, upper, direction): (
            u32,
            &Bound<Vec<Value>>,
            &Bound<Vec<Value>>,
            Direction,
        ),
        cursor: &mut ScanCursor,
        batch_rows: usize,
        out: &mut ScanBatch,
    ) -> Result<ScanProgress, FragmentError> {
        let index = self
            .ordered
            .iter()
            .find(|i| i.id == index_id)
            .ok_or_else(|| FragmentError::NoSuchIndex {
                table: self.table.clone(),
                index_id,
            })?;
        let mut lower_key = std::mem::take(&mut out.lower);
        let mut upper_key = std::mem::take(&mut out.upper);
        let bounds = encode_bound(&index.encoder, lower, &mut lower_key).and_then(|lower| {
            encode_bound(&index.encoder, upper, &mut upper_key).map(|upper| (lower, upper))
        });
        let result = bounds.map(|(lower_kind, upper_kind)| {
            let range = KeyRange::new(
                bound_ref(lower_kind, &lower_key),
                bound_ref(upper_kind, &upper_key),
            );
            let after = cursor.row.map(|row| (cursor.key.as_slice(), row));
            let mut last = None;
            let mut progress = ScanProgress::Done;
            for (key, row) in index.index.scan_from(range, direction, after) {
                if out.len() == batch_rows {
                    progress = ScanProgress::More;
                    break;
                }
                debug_assert!(
                    !self.rows.is_uncommitted(pool, row),
                    "ordered indexes hold committed rows only"
                );
                out.push(row, self.rows.fixed(pool, row), self.rows.var(pool, row));
                last = Some((key, row));
            }
            if let Some((key, row)) = last {
                cursor.key.clear();
                cursor.key.extend_from_slice(key);
                cursor.row = Some(row);
            }
            progress
        });
        out.lower = lower_key;
        out.upper = upper_key;
        result.map_err(FragmentError::from)
    }
}

/// The kind of an encoded bound; its bytes are in a buffer beside it.
#[derive(Copy, Clone)]
enum BoundKind {
    Unbounded,
    Included,
    Excluded,
}

fn encode_bound(
    encoder: &schema::KeyEncoder,
    bound: &Bound<Vec<Value>>,
    out: &mut Vec<u8>,
) -> Result<BoundKind, schema::ValueError> {
    out.clear();
    Ok(match bound {
        Bound::Unbounded => BoundKind::Unbounded,
        Bound::Included(values) => {
            encoder.encode_prefix(values, out)?;
            BoundKind::Included
        }
        Bound::Excluded(values) => {
            encoder.encode_prefix(values, out)?;
            BoundKind::Excluded
        }
    })
}

fn bound_ref(kind: BoundKind, bytes: &[u8]) -> Bound<&[u8]> {
    match kind {
        BoundKind::Unbounded => Bound::Unbounded,
        BoundKind::Included => Bound::Included(bytes),
        BoundKind::Excluded => Bound::Excluded(bytes),
    }
}
