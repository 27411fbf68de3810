//! What `skarv bench flex` writes and expects: the table's shape, the
//! value every attribute of every row holds, and the check of a row read.
//!
//! Values are a function of (key, attribute, generation): an insert writes
//! the generation the marker table calls current, each update phase writes
//! the next one. The marker (`<table>_generations`, one row) records the
//! range `low..=high` of generations rows may hold: an update phase first
//! raises `high`, and raises `low` to it only when it updated every row and
//! every update committed (a run cut short, a failure, or a `--duration`
//! phase that stopped before some rows leaves a range that still describes
//! every row). A
//! verified read accepts a row whose attribute 1 matches a generation in
//! the range when every other attribute matches that same generation and
//! the key; anything else is a mismatch.

use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{Table, Value};

/// Most generations a verified read tries per row: a wider range means
/// several update phases were cut short, and the table should be rebuilt.
pub const GENERATION_SPREAD_MAX: u64 = 8;
/// The single row of the marker table.
pub const MARKER_KEY: u64 = 0;

/// The name of the marker table of `table`.
pub fn marker_table_name(table: &str) -> String {
    format!("{table}_generations")
}

/// The name of attribute `index` (0 is the primary key).
pub fn attribute_name(index: usize) -> String {
    format!("a{index}")
}

/// The shape of the bench table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Attributes, the key included.
    pub attributes: usize,
    /// 32-bit words per non-key attribute.
    pub words: usize,
    /// The key is a BIGINT UNSIGNED (more than `u32::MAX` keys), else an INT UNSIGNED.
    pub big_key: bool,
}

impl Shape {
    fn attribute_type(&self) -> ColumnType {
        if self.words == 1 {
            ColumnType::Int { unsigned: true }
        } else {
            ColumnType::Binary {
                len: (4 * self.words) as u16,
            }
        }
    }

    fn key_type(&self) -> ColumnType {
        if self.big_key {
            ColumnType::BigInt { unsigned: true }
        } else {
            ColumnType::Int { unsigned: true }
        }
    }

    /// The table definition (partitions: the cluster's default).
    pub fn table_def(&self, name: &str) -> TableDef {
        let mut columns = vec![Column::new(attribute_name(0), self.key_type())];
        for a in 1..self.attributes {
            columns.push(Column::new(attribute_name(a), self.attribute_type()));
        }
        TableDef::new(name, 0, columns)
            .primary_key(vec![0])
            .partitions(0)
    }

    /// Whether an existing table has this shape (the key may be either
    /// width as long as `keys` fit in it); an error says how it differs.
    pub fn check(&self, table: &Table, keys: u64) -> Result<(), String> {
        let columns = table.columns();
        let name = table.name();
        if columns.len() != self.attributes || table.primary_key() != [0] {
            return Err(format!(
                "table `{name}` exists with {} columns (key {:?}); this run asks for -a {}",
                columns.len(),
                table.primary_key(),
                self.attributes
            ));
        }
        let key_fits = match columns[0].ty {
            ColumnType::Int { unsigned: true } => keys <= u64::from(u32::MAX) + 1,
            ColumnType::BigInt { unsigned: true } => true,
            _ => false,
        };
        if !key_fits {
            return Err(format!(
                "table `{name}`: key column `{}` is {:?}, which cannot hold {keys} keys",
                columns[0].name, columns[0].ty
            ));
        }
        let wanted = self.attribute_type();
        if let Some(bad) = columns[1..].iter().find(|c| c.ty != wanted) {
            return Err(format!(
                "table `{name}`: column `{}` is {:?}; this run (-s {}) writes {wanted:?}",
                bad.name, bad.ty, self.words
            ));
        }
        Ok(())
    }
}

/// splitmix64's finaliser: every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Word `word` of attribute `attribute` of row `key` in `generation`.
/// One mix of the three inputs spread by odd multipliers and a rotation
/// (the client computes this for every value it writes: three mixes were
/// a tenth of its work per update).
pub fn word(key: u64, attribute: usize, generation: u64, word: usize) -> u32 {
    let place = ((attribute as u64) << 32 | word as u64).wrapping_mul(0x632B_E59B_D9B4_E019);
    let x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ place.rotate_left(29)
        ^ generation.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (mix(x) >> 32) as u32
}

/// The value attribute `attribute` (1 or more) of row `key` holds in `generation`.
pub fn value(shape: &Shape, key: u64, attribute: usize, generation: u64) -> Value {
    debug_assert!(attribute >= 1 && attribute < shape.attributes);
    if shape.words == 1 {
        Value::UInt(u64::from(word(key, attribute, generation, 0)))
    } else {
        let mut bytes = Vec::with_capacity(4 * shape.words);
        for w in 0..shape.words {
            bytes.extend_from_slice(&word(key, attribute, generation, w).to_le_bytes());
        }
        Value::Bytes(bytes)
    }
}

/// Whether `got` is the value of (key, attribute, generation).
fn matches(shape: &Shape, got: &Value, key: u64, attribute: usize, generation: u64) -> bool {
    match got {
        Value::UInt(v) if shape.words == 1 => *v == u64::from(word(key, attribute, generation, 0)),
        Value::Int(v) if shape.words == 1 => {
            *v >= 0 && *v as u64 == u64::from(word(key, attribute, generation, 0))
        }
        Value::Bytes(bytes) if bytes.len() == 4 * shape.words => {
            bytes.chunks_exact(4).enumerate().all(|(w, chunk)| {
                let stored = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                stored == word(key, attribute, generation, w)
            })
        }
        _ => false,
    }
}

/// An unsigned integer value, as the key comes back.
pub fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::UInt(v) => Some(*v),
        Value::Int(v) if *v >= 0 => Some(*v as u64),
        _ => None,
    }
}

/// Checks the values of a row read for `key` (every attribute, in table
/// order) against generations `low..=high`. Returns why it is wrong.
pub fn verify_row(
    shape: &Shape,
    key: u64,
    values: &[Value],
    low: u64,
    high: u64,
) -> Result<(), String> {
    debug_assert!(low <= high && high - low < GENERATION_SPREAD_MAX);
    if values.len() != shape.attributes {
        return Err(format!(
            "key {key}: {} values read, {} attributes",
            values.len(),
            shape.attributes
        ));
    }
    if as_u64(&values[0]) != Some(key) {
        return Err(format!("key {key}: the row read has key {:?}", values[0]));
    }
    let Some(generation) = (low..=high).find(|g| matches(shape, &values[1], key, 1, *g)) else {
        return Err(format!(
            "key {key}: attribute {} is {:?}, no generation in {low}..={high} wrote it",
            attribute_name(1),
            values[1]
        ));
    };
    for (attribute, got) in values.iter().enumerate().skip(2) {
        if !matches(shape, got, key, attribute, generation) {
            return Err(format!(
                "key {key}: attribute {} is {got:?}, generation {generation} (of attribute {}) \
                 wrote {:?}",
                attribute_name(attribute),
                attribute_name(1),
                value(shape, key, attribute, generation)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_verify_only_with_their_own_key_and_one_generation() {
        for words in [1, 3] {
            let shape = Shape {
                attributes: 5,
                words,
                big_key: false,
            };
            let row = |key: u64, g: &[u64]| -> Vec<Value> {
                let mut values = vec![Value::UInt(key)];
                for a in 1..5 {
                    values.push(value(&shape, key, a, g[a - 1]));
                }
                values
            };
            assert!(verify_row(&shape, 7, &row(7, &[2, 2, 2, 2]), 2, 2).is_ok());
            assert!(verify_row(&shape, 7, &row(7, &[3, 3, 3, 3]), 2, 3).is_ok());
            let old = verify_row(&shape, 7, &row(7, &[1, 1, 1, 1]), 2, 3).expect_err("too old");
            assert!(old.contains("a1") && old.contains("2..=3"), "{old}");
            let torn = verify_row(&shape, 7, &row(7, &[2, 2, 3, 2]), 2, 3).expect_err("mixed");
            assert!(torn.contains("a3"), "{torn}");
            let other = row(8, &[2, 2, 2, 2]);
            assert!(
                verify_row(&shape, 7, &other, 2, 2).is_err(),
                "another row's values"
            );
            let mut wrong_key = row(7, &[2, 2, 2, 2]);
            wrong_key[0] = Value::UInt(9);
            assert!(verify_row(&shape, 7, &wrong_key, 2, 2).is_err());
            assert!(verify_row(&shape, 7, &row(7, &[2, 2, 2, 2])[..4], 2, 2).is_err());
        }
        // Generations, keys and attributes all change the value.
        assert_ne!(word(1, 1, 0, 0), word(1, 1, 1, 0));
        assert_ne!(word(1, 1, 0, 0), word(2, 1, 0, 0));
        assert_ne!(word(1, 1, 0, 0), word(1, 2, 0, 0));
        assert_ne!(word(1, 1, 0, 0), word(1, 1, 0, 1));
        // Across a grid of rows, attributes and generations no two values
        // agree (a value read from the wrong row, column or generation
        // would pass verification otherwise).
        let mut seen = std::collections::HashSet::new();
        for key in 0..400u64 {
            for attribute in 1..25 {
                for generation in 0..4 {
                    assert!(
                        seen.insert(word(key, attribute, generation, 0)),
                        "key {key}, attribute {attribute}, generation {generation}"
                    );
                }
            }
        }
    }
}
