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
///
/// Keys of up to [`SHORT_KEY_BYTES_MAX`] bytes (every integer key of one
/// or two columns) take [`short_key_hash`], inlined into the caller: the
/// same XXH3-64 value, a few multiplies, without a call into the general
/// XXH3 function, which is too large to inline and dispatches on the
/// length once more. A test holds the two equal for every length.
#[inline]
pub fn distribution_hash(key: &[u8]) -> u64 {
    if key.len() <= SHORT_KEY_BYTES_MAX {
        short_key_hash(key)
    } else {
        long_key_hash(key)
    }
}

/// Longest key [`short_key_hash`] takes: XXH3's short-input range.
const SHORT_KEY_BYTES_MAX: usize = 16;

#[inline(never)]
fn long_key_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, DISTRIBUTION_HASH_SEED)
}

/// Bytes 0..72 of XXH3's default secret (the XXH3 specification's
/// `kSecret`), the part that inputs of up to 16 bytes use.
const XXH3_SECRET_HEAD: [u8; 72] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb,
];

const fn secret_u32(at: usize) -> u32 {
    let s = &XXH3_SECRET_HEAD;
    u32::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]])
}

const fn secret_u64(at: usize) -> u64 {
    let s = &XXH3_SECRET_HEAD;
    u64::from_le_bytes([
        s[at],
        s[at + 1],
        s[at + 2],
        s[at + 3],
        s[at + 4],
        s[at + 5],
        s[at + 6],
        s[at + 7],
    ])
}

const XXH_PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const XXH_PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const XXH3_AVALANCHE: u64 = 0x1656_6791_9E37_79F9;
const XXH3_RRMXMX: u64 = 0x9FB2_1C65_1E98_DF25;

/// What the seed makes of the secret, per input length class: constants,
/// since the seed is fixed.
const FLIP_0: u64 = DISTRIBUTION_HASH_SEED ^ secret_u64(56) ^ secret_u64(64);
const FLIP_1TO3: u64 =
    ((secret_u32(0) ^ secret_u32(4)) as u64).wrapping_add(DISTRIBUTION_HASH_SEED);
const SEED_4TO8: u64 =
    DISTRIBUTION_HASH_SEED ^ (((DISTRIBUTION_HASH_SEED as u32).swap_bytes() as u64) << 32);
const FLIP_4TO8: u64 = (secret_u64(8) ^ secret_u64(16)).wrapping_sub(SEED_4TO8);
const FLIP_9TO16_LO: u64 = (secret_u64(24) ^ secret_u64(32)).wrapping_add(DISTRIBUTION_HASH_SEED);
const FLIP_9TO16_HI: u64 = (secret_u64(40) ^ secret_u64(48)).wrapping_sub(DISTRIBUTION_HASH_SEED);

#[inline(always)]
fn xxh64_avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(XXH_PRIME64_2);
    h ^= h >> 29;
    h = h.wrapping_mul(XXH_PRIME64_3);
    h ^ (h >> 32)
}

#[inline(always)]
fn xxh3_avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(XXH3_AVALANCHE);
    h ^ (h >> 32)
}

#[inline(always)]
fn xxh3_rrmxmx(mut h: u64, len: u64) -> u64 {
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(XXH3_RRMXMX);
    h ^= (h >> 35).wrapping_add(len);
    h = h.wrapping_mul(XXH3_RRMXMX);
    h ^ (h >> 28)
}

#[inline(always)]
fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

#[inline(always)]
fn le_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

/// XXH3-64 with seed [`DISTRIBUTION_HASH_SEED`] of a key of at most
/// [`SHORT_KEY_BYTES_MAX`] bytes: the short-input algorithm of the XXH3
/// specification (lengths 0, 1–3, 4–8 and 9–16), with what depends only on
/// the seed and the default secret computed at compile time.
#[inline(always)]
fn short_key_hash(key: &[u8]) -> u64 {
    let len = key.len();
    debug_assert!(len <= SHORT_KEY_BYTES_MAX);
    if len > 8 {
        let lo = le_u64(key, 0) ^ FLIP_9TO16_LO;
        let hi = le_u64(key, len - 8) ^ FLIP_9TO16_HI;
        let product = u128::from(lo) * u128::from(hi);
        let acc = (len as u64)
            .wrapping_add(lo.swap_bytes())
            .wrapping_add(hi)
            .wrapping_add(product as u64 ^ (product >> 64) as u64);
        xxh3_avalanche(acc)
    } else if len >= 4 {
        let first = u64::from(le_u32(key, 0));
        let last = u64::from(le_u32(key, len - 4));
        xxh3_rrmxmx(last.wrapping_add(first << 32) ^ FLIP_4TO8, len as u64)
    } else if len > 0 {
        let combo = u32::from(key[0]) << 16
            | u32::from(key[len >> 1]) << 24
            | u32::from(key[len - 1])
            | (len as u32) << 8;
        xxh64_avalanche(u64::from(combo) ^ FLIP_1TO3)
    } else {
        xxh64_avalanche(FLIP_0)
    }
}

/// The partition (0-based) of a row whose distribution key hashes to `hash`.
pub fn partition_of(hash: u64, partitions: u32) -> u32 {
    assert!(partitions > 0, "a table has at least one partition");
    ((hash >> 32) % u64::from(partitions)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
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
                "varchar-ci-accents",
                vec![T::VarChar {
                    max: 20,
                    collation: ci,
                }],
                vec![Value::String("\u{c5}r_stra\u{df}e".into())],
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
        let doc = include_str!("../../../docs/distribution-hash.md");
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

    /// The short-key path is XXH3-64 itself: every length it takes (and
    /// a few beyond, through `distribution_hash`), many random keys each,
    /// against the xxhash crate.
    #[test]
    fn the_short_key_path_is_xxh3() {
        let mut random = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random
        };
        for len in 0..=SHORT_KEY_BYTES_MAX + 8 {
            for round in 0..2_000 {
                let key: Vec<u8> = match round {
                    // The extremes of every byte.
                    0 => vec![0; len],
                    1 => vec![0xFF; len],
                    _ => (0..len).map(|_| next() as u8).collect(),
                };
                let expected = xxh3_64_with_seed(&key, DISTRIBUTION_HASH_SEED);
                assert_eq!(distribution_hash(&key), expected, "key {key:02x?}");
                if len <= SHORT_KEY_BYTES_MAX {
                    assert_eq!(short_key_hash(&key), expected, "key {key:02x?}");
                }
            }
        }
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
        let doc = include_str!("../../../docs/distribution-hash.md");
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
        if std::env::var_os("SKARV_PRINT_VECTORS").is_some() {
            println!("{}", lines.join("\n"));
        }
        assert_eq!(documented, lines, "docs/distribution-hash.md's vectors");
    }
}
