//! Pushed joins (NDB's SPJ; `docs/pushed-joins.md`): [`Transaction::pushed_scan`]
//! sends a scan of a root table and children read by primary key from
//! their parent's row as ONE request; the TC joins where the rows live and
//! returns joined rows, one round trip per batch of root rows whatever the
//! number of tables.
//!
//! The reads are committed reads; BLOB/TEXT columns are not returned by a
//! pushed join (their parts would need reads of their own).

use std::sync::Arc;

use proto::query::{KeySource, QueryChild, QueryTree, QUERY_BATCH_ROWS_MAX};
use proto::{ScanSpec, NO_INDEX, NO_PARTITION};
use schema::{IndexKind, Value};
use signal::{tc_flags, Signal, SignalBody};

use crate::error::{Error, Result};
use crate::scan::{ScanIter, ScanOptions, SCAN_BATCH_ROWS_DEFAULT};
use crate::schema::Table;
use crate::session::tc_ref;
use crate::stats;
use crate::transaction::{LockMode, Transaction};

/// Where one primary-key value of a child comes from.
#[derive(Clone, Debug)]
pub enum PushedKey {
    /// The parent's column of this name.
    Column(String),
    /// A constant.
    Value(Value),
}

/// A table of a pushed join read by its primary key.
#[derive(Clone, Debug)]
pub struct PushedChild {
    /// 0: the root; k: the k-th child (1-based), which comes before it.
    pub parent: usize,
    /// The table.
    pub table: Arc<Table>,
    /// One source per primary-key column, in key order.
    pub key: Vec<PushedKey>,
    /// A missing row gives `None` for it (LEFT JOIN) instead of dropping
    /// the joined row (inner join).
    pub outer: bool,
}

/// One joined row: per node (the root first, then the children in order)
/// its values, every column of its table; `None` where a child was not
/// found (an outer child, or a descendant of one).
pub type JoinedRow = Vec<Option<Vec<Value>>>;

/// The joined rows of a pushed join.
pub struct PushedIter<'t, 's> {
    scan: ScanIter<'t, 's>,
    widths: Vec<usize>,
}

impl<'s> Transaction<'s> {
    /// Runs a pushed join in this transaction: a committed-read scan of
    /// `root` (`options` as for [`Transaction::scan`]: index, bounds,
    /// filter, partition; every column is returned; lock and projection
    /// must be left unset) and `children` read by primary key from their
    /// parent's rows. At most `proto::QUERY_CHILDREN_MAX` children.
    pub fn pushed_scan(
        &self,
        root: &Arc<Table>,
        options: ScanOptions<'_>,
        children: &[PushedChild],
    ) -> Result<PushedIter<'_, 's>> {
        let refuse =
            |what: String| Error::new(proto::error::BAD_OPERATION, format!("pushed join: {what}"));
        if options.lock.is_some_and(|l| l != LockMode::Committed) || options.projection.is_some() {
            return Err(refuse("the root is read committed, every column".into()));
        }
        let tables: Vec<&Arc<Table>> = std::iter::once(root)
            .chain(children.iter().map(|c| &c.table))
            .collect();
        if let Some(t) = tables.iter().find(|t| t.has_blobs()) {
            return Err(refuse(format!(
                "table `{}` has BLOB/TEXT columns",
                t.name()
            )));
        }
        let index_id = match options.index {
            Some(name) => root.require_index(name, IndexKind::Ordered)?.id,
            None => NO_INDEX,
        };
        let partition = match &options.partition_key {
            Some(key) => root.partition_of_key(key, &mut Vec::new())?,
            None => NO_PARTITION,
        };
        let batch_rows = match options.batch_rows {
            0 => SCAN_BATCH_ROWS_DEFAULT,
            n => n,
        }
        .min(QUERY_BATCH_ROWS_MAX);
        let (lower, upper, more_ranges) =
            crate::scan::spec_ranges(options.lower, options.upper, options.more_ranges);
        let spec = ScanSpec {
            table_id: root.id(),
            table_version: root.version(),
            index_id,
            lower,
            upper,
            more_ranges,
            descending: options.descending,
            lock: proto::LockMode::Committed,
            lock_wait: proto::LockWait::Wait,
            partition,
            batch_rows,
            projection: Vec::new(),
            filter: options.filter,
            key_info: false,
            stats: false,
            partitions: Vec::new(),
            distinct_prefix: 0,
            count: false,
            aggregates: Vec::new(),
            group_by: Vec::new(),
        };
        let mut nodes = Vec::with_capacity(children.len());
        for (k, c) in children.iter().enumerate() {
            if c.parent > k {
                return Err(refuse(format!("child {} has parent {}", k + 1, c.parent)));
            }
            let parent = tables[c.parent];
            let key = c
                .key
                .iter()
                .map(|source| match source {
                    PushedKey::Column(name) => parent
                        .require_column(name)
                        .and_then(|at| {
                            u16::try_from(at).map_err(|_| refuse(format!("column {at}")))
                        })
                        .map(KeySource::Column),
                    PushedKey::Value(v) => Ok(KeySource::Constant(v.clone())),
                })
                .collect::<Result<Vec<_>>>()?;
            nodes.push(QueryChild {
                parent: c.parent as u8,
                outer: c.outer,
                table_id: c.table.id(),
                table_version: c.table.version(),
                key,
                projection: Vec::new(),
            });
        }
        let tree = QueryTree {
            root: spec,
            children: nodes,
        };
        let defs: Vec<&schema::TableDef> = tables.iter().map(|t| t.def()).collect();
        let lookup = |id: u32| defs.iter().copied().find(|d| d.id == id);
        tree.check(lookup)?;
        let widths = tree.widths(lookup);
        let (tx_id, link, scan_id, starts, _) = self.scan_start(false)?;
        let session = self.session;
        let counts = &session.counts;
        stats::bump(if index_id == NO_INDEX {
            &counts.table_scan
        } else {
            &counts.range_scan
        });
        if partition != NO_PARTITION {
            stats::bump(&counts.pruned_scan);
        }
        stats::bump(&counts.pushed_queries_defined);
        stats::bump(&counts.pushed_queries_executed);
        let flags = tc_flags::PUSHED | if starts { tc_flags::START } else { 0 };
        let signal = Signal {
            receiver: tc_ref(session.shared(), link, tx_id),
            sender: session.own_ref(),
            body: SignalBody::TcScanReq {
                tx_id,
                scan_id,
                flags,
                spec: tree.to_bytes(),
            },
        };
        session.send_scan_signal(link, tx_id, scan_id, signal)?;
        let width = 1 + widths.iter().sum::<usize>();
        let scan = ScanIter::pushed(self, root, tx_id, link, scan_id, width);
        Ok(PushedIter { scan, widths })
    }
}

impl Iterator for PushedIter<'_, '_> {
    type Item = Result<JoinedRow>;

    fn next(&mut self) -> Option<Result<JoinedRow>> {
        let row = match self.scan.next()? {
            Ok(row) => row,
            Err(e) => return Some(Err(e)),
        };
        let values = row.values();
        let found = match values.first() {
            Some(Value::UInt(m)) => *m,
            _ => {
                return Some(Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    "pushed join: a joined row without its found mask",
                )))
            }
        };
        let mut at = 1;
        let mut out = Vec::with_capacity(self.widths.len());
        for (k, &w) in self.widths.iter().enumerate() {
            let part = &values[at..at + w];
            at += w;
            out.push((found & (1 << k) != 0).then(|| part.to_vec()));
        }
        let session = self.scan.session();
        stats::add(&session.counts.pushed_reads, found.count_ones().into());
        Some(Ok(out))
    }
}
