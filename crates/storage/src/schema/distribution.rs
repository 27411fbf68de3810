//! The distribution hash: which partition a row belongs to.
//!
//! Data nodes and clients compute it alike (the client sends a primary-key
//! operation straight to the node holding the partition's primary), and
//! every stored row sits in the partition it names, so this function is
//! fixed forever: changing it moves every row. The test vectors in
//! `docs/distribution-hash.md` pin it; a test checks them.
//!
//! - `distribution_hash(key)` is XXH3-64 with seed
//!   [`DISTRIBUTION_HASH_SEED`] of the distribution key encoded by
//!   [`super::key::KeyEncoder::distribution_key`] (canonical, so values
//!   equal under their collation hash alike).
//! - `partition_of(hash, partitions)` is the **high 32 bits** of the hash
//!   modulo the partition count (DESIGN.md §3's "hash mod partitions"). The
//!   high bits pick the partition so that the low bits, which a
//!   partition's hash index uses for its buckets, stay uniform within a
//!   partition: rows of partition 3 of 8 would otherwise all have the same
//!   low three bits.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the distribution hash: "skarv" in ASCII. Fixed forever.
pub const DISTRIBUTION_HASH_SEED: u64 = 0x0000_0073_6B61_7276;

/// The hash of an encoded distribution key.
pub fn distribution_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, DISTRIBUTION_HASH_SEED)
}

/// The partition (0-based) of a row whose distribution key hashes to `hash`.
pub fn partition_of(hash: u64, partitions: u32) -> u32 {
    assert!(partitions > 0, "a table has at least one partition");
    ((hash >> 32) % u64::from(partitions)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{
        Collation, Column, ColumnType, Date, DateTime, Decimal, KeyEncoder, TableDef, Value,
    };

    /// One test vector: a distribution key's columns and values.
    struct Vector {
        name: &'static str,
        columns: Vec<ColumnType>,
        values: Vec<Value>,
    }

    fn vectors() -> Vec<Vector> {
        use ColumnType as T;
        let bin = Collation::Utf8mb4Bin;
        let ci = Collation::Utf8mb4GeneralCi;
        let v = |name, columns, values| Vector {
            name,
            columns,
            values,
        };
        vec![
            v(
                "int-0",
                vec![T::Int { unsigned: false }],
                vec![Value::Int(0)],
            ),
            v(
                "int-1",
                vec![T::Int { unsigned: false }],
                vec![Value::Int(1)],
            ),
            v(
                "int-minus-1",
                vec![T::Int { unsigned: false }],
                vec![Value::Int(-1)],
            ),
            v(
                "uint-1",
                vec![T::Int { unsigned: true }],
                vec![Value::UInt(1)],
            ),
            v(
                "bigint-unsigned-max",
                vec![T::BigInt { unsigned: true }],
                vec![Value::UInt(u64::MAX)],
            ),
            v(
                "hidden-pk-42",
                vec![T::BigInt { unsigned: true }],
                vec![Value::UInt(42)],
            ),
            v(
                "tinyint-minus-128",
                vec![T::TinyInt { unsigned: false }],
                vec![Value::Int(-128)],
            ),
            v(
                "mediumint-1000",
                vec![T::MediumInt { unsigned: false }],
                vec![Value::Int(1000)],
            ),
            v("double-1.5", vec![T::Double], vec![Value::Double(1.5)]),
            v("double-minus-0", vec![T::Double], vec![Value::Double(-0.0)]),
            v("float-minus-2", vec![T::Float], vec![Value::Float(-2.0)]),
            v(
                "decimal-10-2",
                vec![T::Decimal {
                    precision: 10,
                    scale: 2,
                }],
                vec![Value::Decimal(
                    Decimal::parse("-12345.67").expect("literal"),
                )],
            ),
            v(
                "varchar-bin-abc",
                vec![T::VarChar {
                    max: 20,
                    collation: bin,
                }],
                vec![Value::String("abc".into())],
            ),
            v(
                "varchar-ci-ABC",
                vec![T::VarChar {
                    max: 20,
                    collation: ci,
                }],
                vec![Value::String("ABC  ".into())],
            ),
            v(
                "varchar-ci-long",
                vec![T::VarChar {
                    max: 20,
                    collation: ci,
                }],
                vec![Value::String("Skarv Cluster".into())],
            ),
            v(
                "char-empty",
                vec![T::Char {
                    len: 4,
                    collation: bin,
                }],
                vec![Value::String("".into())],
            ),
            v(
                "varbinary",
                vec![T::VarBinary { max: 8 }],
                vec![Value::Bytes(vec![0x00, 0x01, 0xFF])],
            ),
            v(
                "binary-4",
                vec![T::Binary { len: 4 }],
                vec![Value::Bytes(vec![0xAB])],
            ),
            v(
                "date",
                vec![T::Date],
                vec![Value::Date(Date::new(2024, 2, 29))],
            ),
            v(
                "datetime-6",
                vec![T::DateTime { fsp: 6 }],
                vec![Value::DateTime(DateTime::new(
                    Date::new(1999, 12, 31),
                    23,
                    59,
                    59,
                    999_999,
                ))],
            ),
            v(
                "timestamp-3",
                vec![T::Timestamp { fsp: 3 }],
                vec![Value::Timestamp(1_700_000_000_123_000)],
            ),
            v("bit-12", vec![T::Bit { bits: 12 }], vec![Value::Bit(0xABC)]),
            v(
                "int-varchar",
                vec![
                    T::Int { unsigned: true },
                    T::VarChar {
                        max: 10,
                        collation: ci,
                    },
                ],
                vec![Value::UInt(7), Value::String("user".into())],
            ),
            v(
                "bigint-date",
                vec![T::BigInt { unsigned: false }, T::Date],
                vec![Value::Int(-5), Value::Date(Date::new(1970, 1, 1))],
            ),
        ]
    }

    /// The encoded key of a vector (all its columns are the distribution key).
    fn encode(vector: &Vector) -> Vec<u8> {
        let columns = vector
            .columns
            .iter()
            .enumerate()
            .map(|(i, ty)| Column::new(format!("k{i}"), *ty))
            .collect();
        let key: Vec<usize> = (0..vector.columns.len()).collect();
        let table = TableDef::new("v", 1, columns)
            .primary_key(key)
            .build()
            .expect("vector tables are valid");
        let mut out = Vec::new();
        KeyEncoder::distribution_key(&table)
            .encode(&vector.values, &mut out)
            .expect("vector values are valid");
        out
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The rows of the table in docs/distribution-hash.md: name, key hex,
    /// hash hex, partition of 8.
    fn documented() -> Vec<(String, String, String, u32)> {
        let doc = include_str!("../../../../docs/distribution-hash.md");
        doc.lines()
            .filter(|line| line.starts_with("| `"))
            .map(|line| {
                let cells: Vec<&str> = line
                    .split('|')
                    .map(|c| c.trim().trim_matches('`'))
                    .collect();
                // | name | columns | values | key | hash | partition |
                (
                    cells[1].to_string(),
                    cells[4].to_string(),
                    cells[5].trim_start_matches("0x").to_string(),
                    cells[6].parse().expect("partition is a number"),
                )
            })
            .collect()
    }

    #[test]
    fn documented_vectors_hold() {
        let documented = documented();
        let vectors = vectors();
        assert_eq!(
            documented.len(),
            vectors.len(),
            "every vector is documented"
        );
        for (vector, (name, key_hex, hash_hex, partition)) in vectors.iter().zip(&documented) {
            assert_eq!(vector.name, name);
            let key = encode(vector);
            let hash = distribution_hash(&key);
            assert_eq!(&hex(&key), key_hex, "{name}: key");
            assert_eq!(&format!("{hash:016x}"), hash_hex, "{name}: hash");
            assert_eq!(partition_of(hash, 8), *partition, "{name}: partition");
        }
    }

    #[test]
    fn equal_keys_under_collation_hash_alike() {
        let vectors = vectors();
        let by_name = |n: &str| encode(vectors.iter().find(|v| v.name == n).expect("vector"));
        // "ABC  " in a CI column is the key of "abc".
        let ci = Vector {
            name: "abc",
            columns: vec![ColumnType::VarChar {
                max: 20,
                collation: Collation::Utf8mb4GeneralCi,
            }],
            values: vec![Value::String("abc".into())],
        };
        assert_eq!(encode(&ci), by_name("varchar-ci-ABC"));
        let zero = Vector {
            name: "0",
            columns: vec![ColumnType::Double],
            values: vec![Value::Double(0.0)],
        };
        assert_eq!(
            distribution_hash(&encode(&zero)),
            distribution_hash(&by_name("double-minus-0"))
        );
    }

    #[test]
    fn partitions_spread_evenly() {
        let mut counts = [0u32; 8];
        let mut key = Vec::new();
        for i in 0..80_000u64 {
            key.clear();
            key.extend_from_slice(&i.to_be_bytes());
            counts[partition_of(distribution_hash(&key), 8) as usize] += 1;
        }
        for count in counts {
            assert!((9_500..10_500).contains(&count), "{counts:?}");
        }
        assert_eq!(partition_of(u64::MAX, 1), 0);
    }

    /// A value as the documentation shows it.
    fn shown(value: &Value) -> String {
        match value {
            Value::Int(v) => v.to_string(),
            Value::UInt(v) => v.to_string(),
            Value::Float(v) => format!("{v:?}"),
            Value::Double(v) => format!("{v:?}"),
            Value::Decimal(v) => v.to_string(),
            Value::String(v) => format!("'{v}'"),
            Value::Bytes(v) => format!("x'{}'", hex(v)),
            Value::Date(v) => v.to_string(),
            Value::DateTime(v) => v.to_string(),
            Value::Timestamp(v) => format!("{v} µs"),
            Value::Bit(v) => format!("b'{v:b}'"),
            other => format!("{other:?}"),
        }
    }

    /// The vector table of docs/distribution-hash.md is exactly what the
    /// function computes (a changed hash or key format fails here; to
    /// regenerate the table, print `lines` from this test).
    #[test]
    fn the_documented_vectors_are_the_computed_ones() {
        let doc = include_str!("../../../../docs/distribution-hash.md");
        let mut lines = Vec::new();
        for vector in vectors() {
            let key = encode(&vector);
            let hash = distribution_hash(&key);
            let columns: Vec<String> = vector.columns.iter().map(|c| c.to_string()).collect();
            let values: Vec<String> = vector.values.iter().map(shown).collect();
            lines.push(format!(
                "| `{}` | {} | `{}` | `{}` | `0x{hash:016x}` | {} |",
                vector.name,
                columns.join(", "),
                values.join(", "),
                hex(&key),
                partition_of(hash, 8)
            ));
        }
        let documented: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
        assert_eq!(documented, lines, "docs/distribution-hash.md's vectors");
    }
}
