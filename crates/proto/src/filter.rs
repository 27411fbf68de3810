//! Pushed-down scan filters: the part of a WHERE clause the LDM evaluates
//! on each row it scans, so that rows that do not match never leave the
//! data node (NDB's interpreted programs / `NdbScanFilter`).
//!
//! A filter compares a column with a value or with another column, tests
//! for NULL, matches a LIKE prefix, and combines these with AND, OR and
//! NOT. Evaluation follows SQL's three-valued logic: a comparison with NULL
//! is unknown, NOT unknown is unknown, AND/OR combine as SQL says, and a
//! row passes only if the whole filter is true. Values compare in their
//! column type's SQL order; strings under the column's collation, through
//! the schema's own [`schema::Collation::compare`] (the order that
//! `KeyEncoder` turns into key bytes), so a filter and an ordered index
//! never disagree.
//!
//! # Layout
//!
//! A filter is its root node; a node is a tag byte and its payload (nodes
//! of AND/OR/NOT follow their parent, depth first):
//!
//! | tag | node | payload |
//! | --- | --- | --- |
//! | 1 | column op value | `u8` op, `u16` column, value (crate::value) |
//! | 2 | column op column | `u8` op, `u16` left column, `u16` right column |
//! | 3 | IS NULL | `u16` column |
//! | 4 | IS NOT NULL | `u16` column |
//! | 5 | LIKE 'prefix%' | `u16` column, `u32` length, UTF-8 prefix |
//! | 6 | AND | `u16` n, then n nodes (AND of none is true) |
//! | 7 | OR | `u16` n, then n nodes (OR of none is false) |
//! | 8 | NOT | one node |
//!
//! Ops: 0 `=`, 1 `<>`, 2 `<`, 3 `<=`, 4 `>`, 5 `>=`. A filter nests at
//! most [`FILTER_DEPTH_MAX`] levels and has at most [`FILTER_NODES_MAX`]
//! nodes; the decoder refuses more before it allocates for them.

use std::cmp::Ordering;

use schema::{Collation, ColumnType, Decimal, TableDef, Value, ValueRef};

use crate::ops::column_at;
use crate::value::{check_value, get_value, put_value, Reader};
use crate::ProtoError;

/// Deepest nesting of a filter (the root is level 1): bounds the
/// recursion of decoding and evaluation.
pub const FILTER_DEPTH_MAX: usize = 32;
/// Most nodes of a filter: bounds decoding and per-row evaluation work.
pub const FILTER_NODES_MAX: usize = 1_024;

const TAG_CMP: u8 = 1;
const TAG_CMP_COLUMNS: u8 = 2;
const TAG_IS_NULL: u8 = 3;
const TAG_IS_NOT_NULL: u8 = 4;
const TAG_LIKE_PREFIX: u8 = 5;
const TAG_AND: u8 = 6;
const TAG_OR: u8 = 7;
const TAG_NOT: u8 = 8;
/// Fewest bytes a node takes (IS NULL: a tag and a column), to bound a
/// claimed child count by the bytes left.
const NODE_BYTES_MIN: usize = 3;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq = 0,
    Ne = 1,
    Lt = 2,
    Le = 3,
    Gt = 4,
    Ge = 5,
}

impl CmpOp {
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    fn from_u8(v: u8) -> Option<CmpOp> {
        CmpOp::ALL.into_iter().find(|op| *op as u8 == v)
    }

    /// Whether `left op right` holds, given how left compares to right.
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            CmpOp::Eq => ordering == Ordering::Equal,
            CmpOp::Ne => ordering != Ordering::Equal,
            CmpOp::Lt => ordering == Ordering::Less,
            CmpOp::Le => ordering != Ordering::Greater,
            CmpOp::Gt => ordering == Ordering::Greater,
            CmpOp::Ge => ordering != Ordering::Less,
        }
    }
}

/// A pushed-down filter (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    Cmp {
        column: u16,
        op: CmpOp,
        value: Value,
    },
    CmpColumns {
        left: u16,
        op: CmpOp,
        right: u16,
    },
    IsNull(u16),
    IsNotNull(u16),
    /// `column LIKE 'prefix%'`, under the column's collation.
    LikePrefix {
        column: u16,
        prefix: String,
    },
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
}

impl Filter {
    /// Appends the encoding. Panics on an AND/OR of more than 65,535
    /// children or a prefix over 4 GiB, which [`Filter::check`] refuses.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Filter::Cmp { column, op, value } => {
                out.extend_from_slice(&[TAG_CMP, *op as u8]);
                out.extend_from_slice(&column.to_le_bytes());
                put_value(out, value.as_ref());
            }
            Filter::CmpColumns { left, op, right } => {
                out.extend_from_slice(&[TAG_CMP_COLUMNS, *op as u8]);
                out.extend_from_slice(&left.to_le_bytes());
                out.extend_from_slice(&right.to_le_bytes());
            }
            Filter::IsNull(column) | Filter::IsNotNull(column) => {
                out.push(if matches!(self, Filter::IsNull(_)) {
                    TAG_IS_NULL
                } else {
                    TAG_IS_NOT_NULL
                });
                out.extend_from_slice(&column.to_le_bytes());
            }
            Filter::LikePrefix { column, prefix } => {
                out.push(TAG_LIKE_PREFIX);
                out.extend_from_slice(&column.to_le_bytes());
                let len = u32::try_from(prefix.len()).expect("a LIKE prefix under 4 GiB");
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(prefix.as_bytes());
            }
            Filter::And(children) | Filter::Or(children) => {
                out.push(if matches!(self, Filter::And(_)) {
                    TAG_AND
                } else {
                    TAG_OR
                });
                let n =
                    u16::try_from(children.len()).expect("an AND/OR of at most 65,535 children");
                out.extend_from_slice(&n.to_le_bytes());
                for child in children {
                    child.encode(out);
                }
            }
            Filter::Not(child) => {
                out.push(TAG_NOT);
                child.encode(out);
            }
        }
    }

    /// The encoded filter.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes a whole buffer as one filter.
    pub fn decode(bytes: &[u8]) -> Result<Filter, ProtoError> {
        let mut r = Reader::new(bytes, "filter");
        let filter = Filter::get(&mut r)?;
        r.finish()?;
        Ok(filter)
    }

    /// Reads one filter from a reader (inside a scan spec).
    pub(crate) fn get(r: &mut Reader<'_>) -> Result<Filter, ProtoError> {
        let mut nodes = 0;
        get_node(r, 1, &mut nodes)
    }

    /// Nesting depth and node count.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Filter::And(children) | Filter::Or(children) => children
                .iter()
                .map(Filter::shape)
                .fold((1, 1), |(d, n), (cd, cn)| (d.max(cd + 1), n + cn)),
            Filter::Not(child) => {
                let (d, n) = child.shape();
                (d + 1, n + 1)
            }
            _ => (1, 1),
        }
    }

    /// Checks the filter against its table: the limits, every column
    /// exists, a compared value fits its column, column-to-column
    /// comparisons are between comparable types, and LIKE is on a
    /// character column. BLOB and TEXT columns only take IS NULL and IS NOT NULL (a
    /// scanned row holds only a blob's head). Errors name the table and
    /// column.
    pub fn check(&self, table: &TableDef) -> Result<(), ProtoError> {
        let (depth, nodes) = self.shape();
        for (field, value, max) in [
            ("filter depth", depth, FILTER_DEPTH_MAX),
            ("filter nodes", nodes, FILTER_NODES_MAX),
        ] {
            if value > max {
                return Err(ProtoError::OverLimit {
                    what: "filter",
                    field,
                    value: value as u64,
                    max: max as u64,
                });
            }
        }
        self.check_node(table)
    }

    fn check_node(&self, table: &TableDef) -> Result<(), ProtoError> {
        let not_filterable = |c: &schema::Column, operation| ProtoError::NotFilterable {
            table: table.name.clone(),
            column: c.name.clone(),
            ty: c.ty.to_string(),
            operation,
        };
        match self {
            Filter::Cmp { column, value, .. } => {
                let c = column_at(table, "the filter", *column)?;
                if c.ty.is_blob() {
                    return Err(not_filterable(c, "a comparison"));
                }
                // NULL compares to unknown, whatever the column.
                if !value.is_null() {
                    check_value(&table.name, c, value.as_ref())?;
                }
            }
            Filter::CmpColumns { left, right, .. } => {
                let l = column_at(table, "the filter", *left)?;
                let r = column_at(table, "the filter", *right)?;
                if !comparable(&l.ty, &r.ty) {
                    return Err(ProtoError::Incomparable {
                        table: table.name.clone(),
                        left: l.name.clone(),
                        left_ty: l.ty.to_string(),
                        right: r.name.clone(),
                        right_ty: r.ty.to_string(),
                    });
                }
            }
            Filter::IsNull(column) | Filter::IsNotNull(column) => {
                column_at(table, "the filter", *column)?;
            }
            Filter::LikePrefix { column, .. } => {
                let c = column_at(table, "the filter", *column)?;
                if !matches!(c.ty, ColumnType::Char { .. } | ColumnType::VarChar { .. }) {
                    return Err(not_filterable(c, "LIKE"));
                }
            }
            Filter::And(children) | Filter::Or(children) => {
                for child in children {
                    child.check_node(table)?;
                }
            }
            Filter::Not(child) => child.check_node(table)?,
        }
        Ok(())
    }

    /// Whether a row passes: true only if the filter is true for it (not
    /// false, not unknown). `column(c)` gives the row's value of column
    /// `c`. A filter that did not pass [`Filter::check`] for this table
    /// (an unknown column, a value of another type) evaluates such parts
    /// to unknown rather than panic.
    pub fn eval<'a>(&self, table: &TableDef, mut column: impl FnMut(u16) -> ValueRef<'a>) -> bool {
        self.eval3(table, &mut column) == Some(true)
    }

    /// Three-valued evaluation: `None` is SQL's unknown.
    fn eval3<'a, F: FnMut(u16) -> ValueRef<'a>>(
        &self,
        table: &TableDef,
        column: &mut F,
    ) -> Option<bool> {
        match self {
            Filter::Cmp {
                column: c,
                op,
                value,
            } => {
                let ty = &table.columns.get(usize::from(*c))?.ty;
                let ordering = compare(column(*c), value.as_ref(), ty.collation(), is_binary(ty))?;
                Some(op.holds(ordering))
            }
            Filter::CmpColumns { left, op, right } => {
                let lt = &table.columns.get(usize::from(*left))?.ty;
                let rt = &table.columns.get(usize::from(*right))?.ty;
                let pad = is_binary(lt) && is_binary(rt);
                let ordering = compare(column(*left), column(*right), lt.collation(), pad)?;
                Some(op.holds(ordering))
            }
            Filter::IsNull(c) => Some(column(*c).is_null()),
            Filter::IsNotNull(c) => Some(!column(*c).is_null()),
            Filter::LikePrefix { column: c, prefix } => {
                let collation = table.columns.get(usize::from(*c))?.ty.collation()?;
                match column(*c) {
                    ValueRef::Str(s) => Some(like_prefix(collation, s, prefix)),
                    _ => None,
                }
            }
            Filter::And(children) => {
                // False wins over unknown, unknown over true.
                let mut result = Some(true);
                for child in children {
                    match child.eval3(table, column) {
                        Some(false) => return Some(false),
                        None => result = None,
                        Some(true) => {}
                    }
                }
                result
            }
            Filter::Or(children) => {
                let mut result = Some(false);
                for child in children {
                    match child.eval3(table, column) {
                        Some(true) => return Some(true),
                        None => result = None,
                        Some(false) => {}
                    }
                }
                result
            }
            Filter::Not(child) => child.eval3(table, column).map(|b| !b),
        }
    }
}

fn get_node(r: &mut Reader<'_>, depth: usize, nodes: &mut usize) -> Result<Filter, ProtoError> {
    r.limit("filter depth", depth, FILTER_DEPTH_MAX)?;
    *nodes += 1;
    r.limit("filter nodes", *nodes, FILTER_NODES_MAX)?;
    let at = r.position();
    let tag = r.u8()?;
    let op = |r: &mut Reader<'_>| {
        let op_at = r.position();
        let op = r.u8()?;
        CmpOp::from_u8(op).ok_or_else(|| r.bad_field(op_at, "comparison op", u64::from(op)))
    };
    Ok(match tag {
        TAG_CMP => {
            let op = op(r)?;
            let column = r.u16()?;
            let value = get_value(r)?.to_value();
            Filter::Cmp { column, op, value }
        }
        TAG_CMP_COLUMNS => {
            let op = op(r)?;
            let left = r.u16()?;
            let right = r.u16()?;
            Filter::CmpColumns { left, op, right }
        }
        TAG_IS_NULL => Filter::IsNull(r.u16()?),
        TAG_IS_NOT_NULL => Filter::IsNotNull(r.u16()?),
        TAG_LIKE_PREFIX => {
            let column = r.u16()?;
            let text_at = r.position() + 4;
            let bytes = r.len32_bytes()?;
            let prefix = std::str::from_utf8(bytes).map_err(|_| ProtoError::BadUtf8 {
                what: r.what(),
                offset: text_at,
            })?;
            Filter::LikePrefix {
                column,
                prefix: prefix.to_string(),
            }
        }
        TAG_AND | TAG_OR => {
            let n = usize::from(r.u16()?);
            if n * NODE_BYTES_MIN > r.remaining() {
                return Err(ProtoError::Truncated {
                    what: r.what(),
                    offset: r.position(),
                    needed: n * NODE_BYTES_MIN,
                    available: r.remaining(),
                });
            }
            r.limit("filter nodes", *nodes + n, FILTER_NODES_MAX)?;
            let mut children = Vec::with_capacity(n);
            for _ in 0..n {
                children.push(get_node(r, depth + 1, nodes)?);
            }
            if tag == TAG_AND {
                Filter::And(children)
            } else {
                Filter::Or(children)
            }
        }
        TAG_NOT => Filter::Not(Box::new(get_node(r, depth + 1, nodes)?)),
        other => return Err(r.bad_field(at, "filter node tag", u64::from(other))),
    })
}

fn is_binary(ty: &ColumnType) -> bool {
    matches!(ty, ColumnType::Binary { .. })
}

/// Kinds of values that compare with each other.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// Integers and DECIMAL: exact numbers.
    Exact,
    Approximate,
    Text(Collation),
    Binary,
    Date,
    DateTime,
    Timestamp,
    Bit,
}

fn family(ty: &ColumnType) -> Option<Family> {
    use ColumnType as T;
    Some(match *ty {
        T::TinyInt { .. }
        | T::SmallInt { .. }
        | T::MediumInt { .. }
        | T::Int { .. }
        | T::BigInt { .. } => Family::Exact,
        T::Decimal { .. } => Family::Exact,
        T::Float | T::Double => Family::Approximate,
        T::Char { collation, .. } | T::VarChar { collation, .. } => Family::Text(collation),
        T::Binary { .. } | T::VarBinary { .. } => Family::Binary,
        T::Date => Family::Date,
        T::DateTime { .. } => Family::DateTime,
        T::Timestamp { .. } => Family::Timestamp,
        T::Bit { .. } => Family::Bit,
        T::Blob | T::Text { .. } => return None,
    })
}

/// Whether two column types compare: the same family of values, and for
/// strings the same collation (SQL would have to pick one otherwise).
pub fn comparable(a: &ColumnType, b: &ColumnType) -> bool {
    matches!((family(a), family(b)), (Some(x), Some(y)) if x == y)
}

/// How `a` compares with `b` in SQL order; `None` when either is NULL or
/// the two are not comparable values (unknown). Strings compare under
/// `collation` (binary when none); `zero_pad` compares byte strings as
/// BINARY(n) does, as if the shorter were padded with zero bytes.
pub fn compare(
    a: ValueRef<'_>,
    b: ValueRef<'_>,
    collation: Option<Collation>,
    zero_pad: bool,
) -> Option<Ordering> {
    use ValueRef as V;
    let int = |v: ValueRef<'_>| match v {
        V::Int(x) => Some(i128::from(x)),
        V::UInt(x) => Some(i128::from(x)),
        _ => None,
    };
    match (a, b) {
        (V::Null, _) | (_, V::Null) => None,
        (V::Int(_) | V::UInt(_), V::Int(_) | V::UInt(_)) => Some(int(a)?.cmp(&int(b)?)),
        (V::Float(_) | V::Double(_), V::Float(_) | V::Double(_)) => {
            approximate(a)?.partial_cmp(&approximate(b)?)
        }
        (V::Decimal(x), V::Decimal(y)) => Some(x.cmp(&y)),
        (V::Decimal(x), V::Int(_) | V::UInt(_)) => Some(x.cmp(&Decimal::from_scaled(int(b)?, 0)?)),
        (V::Int(_) | V::UInt(_), V::Decimal(y)) => Some(Decimal::from_scaled(int(a)?, 0)?.cmp(&y)),
        (V::Str(x), V::Str(y)) => Some(collation.unwrap_or(Collation::Utf8mb4Bin).compare(x, y)),
        (V::Bytes(x), V::Bytes(y)) if zero_pad => Some(compare_zero_padded(x, y)),
        (V::Bytes(x), V::Bytes(y)) => Some(x.cmp(y)),
        (V::Date(x), V::Date(y)) => Some(x.cmp(&y)),
        (V::DateTime(x), V::DateTime(y)) => Some(x.cmp(&y)),
        (V::Timestamp(x), V::Timestamp(y)) => Some(x.cmp(&y)),
        (V::Bit(x), V::Bit(y)) => Some(x.cmp(&y)),
        _ => None,
    }
}

fn approximate(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Float(x) => Some(f64::from(x)),
        ValueRef::Double(x) => Some(x),
        _ => None,
    }
}

/// BINARY(n) order: a row holds the value padded with zero bytes to n, so
/// `'a'` and `'a\0'` are the same value.
fn compare_zero_padded(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        other => return other,
    }
    let a_rest_zero = a[common..].iter().all(|&x| x == 0);
    let b_rest_zero = b[common..].iter().all(|&x| x == 0);
    match (a_rest_zero, b_rest_zero) {
        (true, true) => Ordering::Equal,
        (false, _) => Ordering::Greater,
        (_, false) => Ordering::Less,
    }
}

/// `s LIKE 'prefix%'`: the first as many characters of `s` as the prefix
/// has are equal to it under the collation. LIKE compares character by
/// character (trailing spaces count), which the collation's PAD SPACE
/// comparison of two strings of the same character count is.
fn like_prefix(collation: Collation, s: &str, prefix: &str) -> bool {
    let chars = prefix.chars().count();
    let head_end = match s.char_indices().nth(chars) {
        Some((end, _)) => end,
        None if s.chars().count() == chars => s.len(),
        None => return false,
    };
    collation.equal(&s[..head_end], prefix)
}
