//! An aggregating scan's groups (`proto::scan`'s counting and aggregating
//! scans; RonDB's pushed aggregation): the rows that passed since the
//! scan's last batch, counted and aggregated per group of equal values of
//! the group columns, written out as one row per group when the batch
//! goes.
//!
//! Numbers are summed and compared as i128: an integer as itself, a
//! DECIMAL as its value times 10^scale (`Decimal::to_scaled`); dates and
//! datetimes (least and greatest only) packed in their order. A batch
//! examines at most `SCAN_ROWS_EXAMINED_MAX` rows and a DECIMAL summed has
//! at most `SCAN_SUM_DECIMAL_DIGITS_MAX` digits (the spec's check), so a
//! batch's sum never overflows; it is checked anyway, and an overflow
//! fails the scan rather than return a wrong sum.

use proto::scan::{AggregateFn, ScanAggregate};
use proto::value::{put_uint, put_value};
use schema::{ColumnType, Date, DateTime, Decimal, RowLayout, TableDef, ValueRef};

use super::encoded::{put_column, Gathered, RowSink};

/// One aggregate's running state in one group.
#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// Values not NULL folded in.
    values: u64,
    /// Their sum, least or greatest (as i128, see the module doc).
    acc: i128,
}

/// The groups of one scan since its last batch.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// A group's key (its columns' values in the wire encoding) → its
    /// number (xxh3, keyed: users choose the values; `stdx::KeyMap`). Empty without group columns: the one group is number 0.
    index: stdx::KeyMap<Vec<u8>, u32>,
    /// Per group in order of first row: its key.
    keys: Vec<Vec<u8>>,
    /// Per group: rows counted.
    rows: Vec<u64>,
    /// Per group, per aggregate: its state (groups × aggregates).
    states: Vec<State>,
    /// Bytes of the groups' keys (`SCAN_GROUP_KEY_BYTES_MAX` at most).
    key_bytes: usize,
    /// Reused: the key of the row being added.
    scratch: Vec<u8>,
}

/// Why a row was not added ([`Groups::add`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NotAdded {
    /// Its group is new and the batch holds `batch_rows` groups (or
    /// `SCAN_GROUP_KEY_BYTES_MAX` bytes of their values) already: the
    /// batch goes first.
    Full,
    /// A sum left the i128 it is kept in (cannot happen within the
    /// spec's limits).
    Overflow { column: usize },
}

impl Groups {
    /// Forgets every group (a scan opened, or its batch written).
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.keys.clear();
        self.rows.clear();
        self.states.clear();
        self.key_bytes = 0;
    }

    /// Folds a row that passed into its group; a new group only while
    /// fewer than `groups_max` are held.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        table: &TableDef,
        aggregates: &[ScanAggregate],
        group_by: &[u16],
        layout: &RowLayout,
        fixed: &[u8],
        var: &[u8],
        groups_max: usize,
    ) -> Result<(), NotAdded> {
        let group = if group_by.is_empty() {
            if self.rows.is_empty() {
                self.new_group(Vec::new(), aggregates.len());
            }
            0
        } else {
            self.scratch.clear();
            for &c in group_by {
                put_column(&mut self.scratch, layout, fixed, var, usize::from(c));
            }
            match self.index.get(self.scratch.as_slice()) {
                Some(&g) => g as usize,
                None => {
                    let bytes = self.key_bytes + self.scratch.len();
                    if self.rows.len() >= groups_max
                        || (bytes > proto::scan::SCAN_GROUP_KEY_BYTES_MAX && !self.rows.is_empty())
                    {
                        return Err(NotAdded::Full);
                    }
                    self.key_bytes = bytes;
                    let key = self.scratch.clone();
                    let g = self.new_group(key.clone(), aggregates.len());
                    self.index.insert(key, g as u32);
                    g
                }
            }
        };
        self.rows[group] += 1;
        let states = &mut self.states[group * aggregates.len()..][..aggregates.len()];
        for (a, st) in aggregates.iter().zip(states) {
            let c = usize::from(a.column);
            let x = match layout.integer_column(fixed, c) {
                Some(Ok(v)) => i128::from(v),
                Some(Err(v)) => i128::from(v),
                None => match layout.decode_column(fixed, var, c) {
                    ValueRef::Null => continue,
                    ValueRef::Decimal(d) => {
                        let scale = decimal_scale(&table.columns[c].ty);
                        // A value of its column fits the column's scale.
                        d.to_scaled(scale).unwrap_or_default()
                    }
                    // Min and Max only (the spec's check): in the order
                    // of their packed form.
                    ValueRef::Date(d) => packed_date(d),
                    ValueRef::DateTime(dt) => packed_datetime(dt),
                    _ => {
                        // Count takes any column; the others numeric ones
                        // only (the spec's check).
                        debug_assert_eq!(a.func, AggregateFn::Count);
                        0
                    }
                },
            };
            st.acc = if st.values == 0 {
                match a.func {
                    AggregateFn::Count => 0,
                    _ => x,
                }
            } else {
                match a.func {
                    AggregateFn::Count => 0,
                    AggregateFn::Sum => st
                        .acc
                        .checked_add(x)
                        .ok_or(NotAdded::Overflow { column: c })?,
                    AggregateFn::Min => st.acc.min(x),
                    AggregateFn::Max => st.acc.max(x),
                }
            };
            st.values += 1;
        }
        Ok(())
    }

    fn new_group(&mut self, key: Vec<u8>, aggregates: usize) -> usize {
        self.keys.push(key);
        self.rows.push(0);
        self.states
            .resize(self.states.len() + aggregates, State::default());
        self.rows.len() - 1
    }

    /// Writes one row per group into `out` (the count, the group values,
    /// the aggregates), and forgets them. Without group columns one row
    /// always, of count 0 when no row passed.
    pub(super) fn write(
        &mut self,
        table: &TableDef,
        aggregates: &[ScanAggregate],
        group_by: &[u16],
        out: &mut Gathered,
    ) {
        if group_by.is_empty() && self.rows.is_empty() {
            self.new_group(Vec::new(), aggregates.len());
        }
        let width = proto::scan::COUNT_ROW_COLUMNS + group_by.len() + aggregates.len();
        for (g, key) in self.keys.iter().enumerate() {
            let states = &self.states[g * aggregates.len()..][..aggregates.len()];
            out.begin_row();
            out.values(width, |bytes| {
                put_uint(bytes, self.rows[g]);
                bytes.extend_from_slice(key);
                for (a, st) in aggregates.iter().zip(states) {
                    put_result(bytes, a, st, &table.columns[usize::from(a.column)].ty);
                }
            });
            out.end_row(0);
        }
        self.clear();
    }
}

/// A date as an integer in its order: years, then months, then days
/// (the zero date and zero parts, which some SQL modes store, first).
fn packed_date(d: Date) -> i128 {
    (i128::from(d.year) * 16 + i128::from(d.month)) * 32 + i128::from(d.day)
}

fn unpacked_date(x: i128) -> Date {
    Date::new((x / 512) as u16, (x / 32 % 16) as u8, (x % 32) as u8)
}

/// A date and time as an integer in its order ([`packed_date`], then the
/// time of day to the microsecond).
fn packed_datetime(dt: DateTime) -> i128 {
    let seconds = (packed_date(dt.date) * 24 + i128::from(dt.hour)) * 3_600
        + i128::from(dt.minute) * 60
        + i128::from(dt.second);
    seconds * 1_000_000 + i128::from(dt.micros)
}

fn unpacked_datetime(x: i128) -> DateTime {
    let (seconds, micros) = (x / 1_000_000, (x % 1_000_000) as u32);
    let (hours, rest) = (seconds / 3_600, seconds % 3_600);
    DateTime::new(
        unpacked_date(hours / 24),
        (hours % 24) as u8,
        (rest / 60) as u8,
        (rest % 60) as u8,
        micros,
    )
}

/// A DECIMAL column's scale; 0 for an integer.
fn decimal_scale(ty: &ColumnType) -> u8 {
    match *ty {
        ColumnType::Decimal { scale, .. } => scale,
        _ => 0,
    }
}

/// An aggregate's value as the spec says it comes (`proto::scan`).
fn put_result(out: &mut Vec<u8>, a: &ScanAggregate, st: &State, ty: &ColumnType) {
    if a.func == AggregateFn::Count {
        put_uint(out, st.values);
        return;
    }
    if st.values == 0 {
        put_value(out, ValueRef::Null);
        return;
    }
    let decimal = |x: i128| {
        // At most 39 digits at a scale of at most 30: always a Decimal.
        Decimal::from_scaled(x, decimal_scale(ty)).expect("a scan's sum fits a Decimal")
    };
    match (a.func, ty) {
        (_, ColumnType::Date) => put_value(out, ValueRef::Date(unpacked_date(st.acc))),
        (_, ColumnType::DateTime { .. }) => {
            put_value(out, ValueRef::DateTime(unpacked_datetime(st.acc)));
        }
        (AggregateFn::Sum, _) | (_, ColumnType::Decimal { .. }) => {
            put_value(out, ValueRef::Decimal(decimal(st.acc)));
        }
        // Min or Max of an integer column: a value of its own.
        _ if ty.is_signed_integer() => put_value(out, ValueRef::Int(st.acc as i64)),
        _ => put_value(out, ValueRef::UInt(st.acc as u64)),
    }
}
