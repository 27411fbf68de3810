//! Pushed joins (NDB's SPJ, "AQL"): a query tree that the TC runs as one
//! request (see `docs/pushed-joins.md`).
//!
//! The root is a scan ([`ScanSpec`], committed read, no key info); each
//! child is a table read by its whole primary key, whose key values come
//! from columns of its parent's returned row (or constants). The TC scans
//! the root and, for every batch of root rows, reads the children by key
//! wherever their rows live, level by level, and returns joined rows.
//!
//! # Query tree layout
//!
//! ```text
//! "QT"          magic, 2 bytes
//! u8            format version (QUERY_TREE_FORMAT_VERSION = 1)
//! u32 n, n bytes  the root's scan spec (crate::scan)
//! u8            child count, at most QUERY_CHILDREN_MAX
//! per child:    u8 parent (0 = the root, k = child k), below its own number
//!               u8 flags: bit 0 outer (a missing row gives NULLs, the row stays)
//!               u32 table_id, u32 table_version
//!               u16 key count, per key value: u8 source (0 = column of the
//!                 parent's returned row: u16 position; 1 = constant: a value)
//!               u16 n, n × u16 projection column positions (none = every column)
//! ```
//!
//! # Joined rows
//!
//! The TC answers with ordinary row batches (`TcScanConf`); each row holds
//! one value `found` (UInt: bit k set when child k was found; the root is
//! always found) and then the values of the root and of every child in
//! tree order, a child not found giving NULL for each of its columns. A
//! child that is not `outer` and not found drops the row; so do its
//! descendants' rows (a child of a missing row is missing).

use schema::{TableDef, Value};

use crate::ops::{check_table, column_at, LockMode, BATCH_BYTES_MAX};
use crate::scan::ScanSpec;
use crate::value::{check_value, get_value, put_value, Reader};
use crate::ProtoError;

/// The two bytes a query tree starts with.
pub const QUERY_TREE_MAGIC: [u8; 2] = *b"QT";
pub const QUERY_TREE_FORMAT_VERSION: u8 = 1;
/// Most children of one query tree (NDB pushes at most 32 tables; a tree
/// this size already reads 16 tables per root row).
pub const QUERY_CHILDREN_MAX: usize = 15;
/// Most root rows per batch of a pushed scan: each becomes up to one key
/// read per child, and the joined rows of a batch must fit one row batch.
pub const QUERY_BATCH_ROWS_MAX: u32 = 256;

const FLAG_OUTER: u8 = 1;
const FLAGS_KNOWN: u8 = 1;
const SOURCE_COLUMN: u8 = 0;
const SOURCE_CONSTANT: u8 = 1;

/// Where one key value of a child comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum KeySource {
    /// A column of the parent's returned row (position in it).
    Column(u16),
    /// A constant.
    Constant(Value),
}

/// A table read by primary key from its parent's row.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryChild {
    /// 0: the root; k: child k (numbered from 1 in order).
    pub parent: u8,
    /// A missing row gives NULLs instead of dropping the joined row.
    pub outer: bool,
    pub table_id: u32,
    pub table_version: u32,
    /// One source per primary-key column, in key order.
    pub key: Vec<KeySource>,
    /// Columns to return; empty = every column.
    pub projection: Vec<u16>,
}

/// A pushed join (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct QueryTree {
    pub root: ScanSpec,
    pub children: Vec<QueryChild>,
}

impl QueryTree {
    /// The encoded tree. Panics on more than 255 children or 65,535 key
    /// values or projected columns, which [`QueryTree::check`] refuses.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&QUERY_TREE_MAGIC);
        out.push(QUERY_TREE_FORMAT_VERSION);
        let root = self.root.to_bytes();
        let n = u32::try_from(root.len()).expect("a scan spec under 4 GiB");
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&root);
        out.push(u8::try_from(self.children.len()).expect("at most 255 children"));
        for c in &self.children {
            out.push(c.parent);
            out.push(if c.outer { FLAG_OUTER } else { 0 });
            out.extend_from_slice(&c.table_id.to_le_bytes());
            out.extend_from_slice(&c.table_version.to_le_bytes());
            let n = u16::try_from(c.key.len()).expect("at most 65,535 key values");
            out.extend_from_slice(&n.to_le_bytes());
            for k in &c.key {
                match k {
                    KeySource::Column(at) => {
                        out.push(SOURCE_COLUMN);
                        out.extend_from_slice(&at.to_le_bytes());
                    }
                    KeySource::Constant(v) => {
                        out.push(SOURCE_CONSTANT);
                        put_value(&mut out, v.as_ref());
                    }
                }
            }
            let n = u16::try_from(c.projection.len()).expect("at most 65,535 columns");
            out.extend_from_slice(&n.to_le_bytes());
            for p in &c.projection {
                out.extend_from_slice(&p.to_le_bytes());
            }
        }
        out
    }

    /// Decodes a whole buffer as a query tree (shape only; see
    /// [`QueryTree::check`] for the tables).
    pub fn decode(bytes: &[u8]) -> Result<QueryTree, ProtoError> {
        let mut r = Reader::new(bytes, "query tree");
        r.limit("query tree bytes", bytes.len(), BATCH_BYTES_MAX)?;
        r.header(QUERY_TREE_MAGIC, QUERY_TREE_FORMAT_VERSION)?;
        let n = r.u32()? as usize;
        let root = ScanSpec::decode(r.bytes(n)?)?;
        let count = usize::from(r.u8()?);
        r.limit("query tree children", count, QUERY_CHILDREN_MAX)?;
        let mut children = Vec::with_capacity(count);
        for k in 0..count {
            let at = r.position();
            let parent = r.u8()?;
            if usize::from(parent) > k {
                return Err(r.bad_field(at, "parent of a query tree child", u64::from(parent)));
            }
            let flags = r.u8()?;
            if flags & !FLAGS_KNOWN != 0 {
                return Err(r.bad_field(at + 1, "query tree child flags", u64::from(flags)));
            }
            let table_id = r.u32()?;
            let table_version = r.u32()?;
            let keys = usize::from(r.u16()?);
            let mut key = Vec::with_capacity(keys.min(64));
            for _ in 0..keys {
                let at = r.position();
                match r.u8()? {
                    SOURCE_COLUMN => key.push(KeySource::Column(r.u16()?)),
                    SOURCE_CONSTANT => key.push(KeySource::Constant(get_value(&mut r)?.to_value())),
                    other => return Err(r.bad_field(at, "key value source", u64::from(other))),
                }
            }
            let n = usize::from(r.u16()?);
            let projection = r
                .bytes(2 * n)?
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            children.push(QueryChild {
                parent,
                outer: flags & FLAG_OUTER != 0,
                table_id,
                table_version,
                key,
                projection,
            });
        }
        r.finish()?;
        Ok(QueryTree { root, children })
    }

    /// Checks the tree against its tables (`table` finds a table by id):
    /// the root's spec, a committed read without key info and batches of
    /// at most [`QUERY_BATCH_ROWS_MAX`] rows; each child's table and
    /// version, a source for every primary-key column, each source column
    /// in its parent's returned row and of the key column's type, each
    /// constant a value of it, each projected column in the table.
    pub fn check<'t>(&self, table: impl Fn(u32) -> Option<&'t TableDef>) -> Result<(), ProtoError> {
        let missing = |id: u32| ProtoError::BadOperation {
            table: format!("#{id}"),
            problem: format!("no table with id {id} on this node"),
        };
        let root_table = table(self.root.table_id).ok_or_else(|| missing(self.root.table_id))?;
        let bad = |t: &TableDef, problem: String| ProtoError::BadOperation {
            table: t.name.clone(),
            problem,
        };
        if self.root.distinct_prefix != 0 || self.root.count {
            return Err(bad(
                root_table,
                "a pushed join joins every root row: no distinct prefix, no counting".into(),
            ));
        }
        self.root.check(root_table)?;
        if self.root.lock != LockMode::Committed || self.root.key_info {
            return Err(bad(
                root_table,
                "a pushed join reads committed rows without their keys".into(),
            ));
        }
        if self.root.batch_rows > QUERY_BATCH_ROWS_MAX {
            return Err(bad(
                root_table,
                format!(
                    "a pushed join's batch of {} root rows: at most {QUERY_BATCH_ROWS_MAX}",
                    self.root.batch_rows
                ),
            ));
        }
        if self.children.len() > QUERY_CHILDREN_MAX {
            return Err(bad(
                root_table,
                format!(
                    "a pushed join of {} children: at most {QUERY_CHILDREN_MAX}",
                    self.children.len()
                ),
            ));
        }
        // Each node's table and returned columns, by node number.
        let mut nodes: Vec<(&TableDef, Vec<usize>)> =
            vec![(root_table, returned(root_table, &self.root.projection))];
        for (k, c) in self.children.iter().enumerate() {
            let t = table(c.table_id).ok_or_else(|| missing(c.table_id))?;
            check_table(t, c.table_id, c.table_version)?;
            if usize::from(c.parent) > k {
                return Err(bad(t, format!("child {} has parent {}", k + 1, c.parent)));
            }
            if c.key.len() != t.primary_key.len() {
                return Err(ProtoError::KeyCount {
                    table: t.name.clone(),
                    key: "the primary key".into(),
                    expected: t.primary_key.len(),
                    given: c.key.len(),
                });
            }
            let (pt, parent_cols) = &nodes[usize::from(c.parent)];
            for (source, &kc) in c.key.iter().zip(&t.primary_key) {
                let key_col = &t.columns[kc];
                match source {
                    KeySource::Column(at) => {
                        let Some(&pc) = parent_cols.get(usize::from(*at)) else {
                            return Err(bad(
                                t,
                                format!(
                                    "key column `{}` comes from value {at} of a parent row of {}",
                                    key_col.name,
                                    parent_cols.len()
                                ),
                            ));
                        };
                        let from = &pt.columns[pc];
                        if from.ty != key_col.ty {
                            return Err(bad(
                                t,
                                format!(
                                    "key column `{}` ({:?}) comes from `{}`.`{}` of another \
                                     type ({:?})",
                                    key_col.name, key_col.ty, pt.name, from.name, from.ty
                                ),
                            ));
                        }
                    }
                    KeySource::Constant(v) => check_value(&t.name, key_col, v.as_ref())?,
                }
            }
            for &p in &c.projection {
                column_at(t, "the projection", p)?;
            }
            nodes.push((t, returned(t, &c.projection)));
        }
        Ok(())
    }

    /// The number of values each node returns, root first (`table` as in
    /// [`QueryTree::check`], which must have passed).
    pub fn widths<'t>(&self, table: impl Fn(u32) -> Option<&'t TableDef>) -> Vec<usize> {
        let width = |id: u32, p: &[u16]| {
            if p.is_empty() {
                table(id).map_or(0, |t| t.columns.len())
            } else {
                p.len()
            }
        };
        std::iter::once(width(self.root.table_id, &self.root.projection))
            .chain(
                self.children
                    .iter()
                    .map(|c| width(c.table_id, &c.projection)),
            )
            .collect()
    }
}

/// The table positions of the columns a projection returns.
fn returned(t: &TableDef, projection: &[u16]) -> Vec<usize> {
    if projection.is_empty() {
        (0..t.columns.len()).collect()
    } else {
        projection.iter().map(|&p| usize::from(p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use schema::{Column, ColumnType};

    use super::*;
    use crate::NO_INDEX;

    fn int() -> ColumnType {
        ColumnType::Int { unsigned: false }
    }

    /// `a(id, b_id)` (id 1) and `b(id, v)` (id 2).
    fn tables() -> Vec<TableDef> {
        let a = TableDef::new(
            "a",
            1,
            vec![Column::new("id", int()), Column::new("b_id", int())],
        )
        .primary_key(vec![0])
        .build()
        .unwrap();
        let b = TableDef::new(
            "b",
            2,
            vec![Column::new("id", int()), Column::new("v", int())],
        )
        .primary_key(vec![0])
        .build()
        .unwrap();
        vec![a, b]
    }

    fn tree(tables: &[TableDef]) -> QueryTree {
        QueryTree {
            root: ScanSpec {
                table_id: 1,
                table_version: tables[0].version,
                index_id: NO_INDEX,
                lower: None,
                upper: None,
                more_ranges: Vec::new(),
                descending: false,
                lock: LockMode::Committed,
                lock_wait: crate::ops::LockWait::Wait,
                partition: crate::NO_PARTITION,
                batch_rows: 64,
                projection: vec![0, 1],
                filter: None,
                key_info: false,
                stats: false,
                partitions: Vec::new(),
                distinct_prefix: 0,
                count: false,
                aggregates: Vec::new(),
                group_by: Vec::new(),
            },
            children: vec![QueryChild {
                parent: 0,
                outer: true,
                table_id: 2,
                table_version: tables[1].version,
                key: vec![KeySource::Column(1)],
                projection: vec![],
            }],
        }
    }

    fn lookup<'t>(tables: &'t [TableDef]) -> impl Fn(u32) -> Option<&'t TableDef> {
        move |id| tables.iter().find(|t| t.id == id)
    }

    #[test]
    fn a_tree_round_trips_and_checks() {
        let tables = tables();
        let mut t = tree(&tables);
        t.children.push(QueryChild {
            parent: 1,
            outer: false,
            table_id: 2,
            table_version: tables[1].version,
            key: vec![KeySource::Constant(Value::Int(7))],
            projection: vec![1],
        });
        let back = QueryTree::decode(&t.to_bytes()).unwrap();
        assert_eq!(back, t);
        back.check(lookup(&tables)).unwrap();
        let b_width = tables[1].columns.len();
        assert_eq!(back.widths(lookup(&tables)), vec![2, b_width, 1]);
    }

    #[test]
    fn every_truncation_and_bad_byte_is_an_error() {
        let tables = tables();
        let bytes = tree(&tables).to_bytes();
        for n in 0..bytes.len() {
            assert!(QueryTree::decode(&bytes[..n]).is_err(), "truncated at {n}");
        }
        for at in 0..bytes.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                // Never a panic; a decoded tree may still fail its check.
                if let Ok(t) = QueryTree::decode(&b) {
                    let _ = t.check(lookup(&tables));
                }
            }
        }
    }

    #[test]
    fn a_bad_tree_gets_a_clear_error() {
        let tables = tables();
        let check = |t: &QueryTree| t.check(lookup(&tables)).unwrap_err().to_string();
        let mut t = tree(&tables);
        t.children[0].key = vec![KeySource::Column(5)];
        assert!(
            check(&t).contains("comes from value 5 of a parent row of 2"),
            "{}",
            check(&t)
        );
        let mut t = tree(&tables);
        t.children[0].key = vec![];
        assert!(check(&t).contains("key values given"), "{}", check(&t));
        let mut t = tree(&tables);
        t.root.lock = LockMode::Shared;
        assert!(check(&t).contains("reads committed"), "{}", check(&t));
        let mut t = tree(&tables);
        t.root.distinct_prefix = 1;
        assert!(check(&t).contains("no distinct prefix"), "{}", check(&t));
        let mut t = tree(&tables);
        t.root.count = true;
        assert!(check(&t).contains("no counting"), "{}", check(&t));
        let mut t = tree(&tables);
        t.root.batch_rows = QUERY_BATCH_ROWS_MAX + 1;
        assert!(check(&t).contains("at most"), "{}", check(&t));
        let mut t = tree(&tables);
        t.children[0].table_id = 9;
        assert!(check(&t).contains("no table with id 9"), "{}", check(&t));
        let mut t = tree(&tables);
        t.children[0].key = vec![KeySource::Constant(Value::String("x".into()))];
        assert!(t.check(lookup(&tables)).is_err());
        // A child whose parent comes after it.
        let mut b = tree(&tables).to_bytes();
        let parent_at = b.len() - (1 + 1 + 4 + 4 + 2 + 3 + 2);
        b[parent_at] = 1;
        assert!(QueryTree::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("parent"));
    }
}
