//! Where a transaction goes: its id, and the data node and TC instance
//! that coordinate it.
//!
//! Pure functions of the configuration, so that they are unit-tested
//! without a cluster. docs/transactions.md: a transaction id holds the API
//! node's id in its top 16 bits and a counter (from a random start) in the
//! low 48; a transaction started with a key hint goes to the node holding
//! the primary replica of the key's partition, TC instance
//! `tx_id mod tc_instances` of that node. A transaction hinted as a
//! committed read of a `READ_BACKUP` or fully replicated table may start
//! on any live replica instead ([`read_replica_of`]): its TC serves the
//! read from its own node.

use config::Placement;
use schema::{distribution_hash, partition_of, KeyEncoder, TableDef, Value};
use signal::NodeId;

use crate::error::{Error, Result};

pub use signal::ids::{tx_node, TX_COUNTER_BITS};
const TX_COUNTER_MASK: u64 = (1 << TX_COUNTER_BITS) - 1;

/// The transaction id of `counter` on API node `node`.
pub fn tx_id(node: NodeId, counter: u64) -> u64 {
    (u64::from(node.get()) << TX_COUNTER_BITS) | (counter & TX_COUNTER_MASK)
}

/// The TC instance of a node with `tc_instances` instances for `tx_id`.
pub fn tc_instance(tx_id: u64, tc_instances: u32) -> u16 {
    assert!(tc_instances > 0, "a data node has at least one TC instance");
    (tx_id % u64::from(tc_instances)) as u16
}

/// The partition of a key: `key` holds the primary-key values in key order
/// (at least the distribution key's, which is a prefix of it).
pub fn partition_of_key(table: &TableDef, key: &[Value], scratch: &mut Vec<u8>) -> Result<u32> {
    let encoder = KeyEncoder::distribution_key(table);
    let needed = encoder.column_count();
    if key.len() < needed {
        return Err(Error::new(
            proto::error::KEY_MISSING,
            format!(
                "table `{}`: the distribution key has {needed} columns, {} values given",
                table.name,
                key.len()
            ),
        ));
    }
    scratch.clear();
    encoder.encode(&key[..needed], scratch).map_err(|e| {
        Error::from(proto::ProtoError::Value {
            table: table.name.clone(),
            source: e,
        })
    })?;
    Ok(partition_of(distribution_hash(scratch), table.partitions))
}

/// The node holding the primary replica of `partition`.
pub fn primary_of(placement: &Placement, partition: u32) -> NodeId {
    placement.home(partition).primary()
}

/// The node serving `partition` as primary while only the nodes for which
/// `live` holds are reachable: its first live replica in placement order,
/// as the data nodes route once a failed node has left their view
/// (docs/transactions.md, "Node failure"); `None` when no replica is.
pub fn live_primary_of(
    placement: &Placement,
    partition: u32,
    live: impl Fn(NodeId) -> bool,
) -> Option<NodeId> {
    placement.home(partition).replicas().find(|&n| live(n))
}

/// The node to start a transaction on whose hint is a committed read of
/// `partition` of a `READ_BACKUP` (or, `fully_replicated`, a fully
/// replicated) table: the `turn`-th, modulo their count, of the
/// partition's replicas for which `live` holds, in placement order (every
/// data node for a fully replicated table); `None` when none is. Any
/// serving replica answers such a read on its own node, so spreading the
/// turns spreads the reads of one partition over its replicas. No
/// allocation: it runs per hinted transaction.
pub fn read_replica_of(
    placement: &Placement,
    partition: u32,
    fully_replicated: bool,
    turn: u32,
    live: impl Fn(NodeId) -> bool,
) -> Option<NodeId> {
    let home = placement.home_of(partition, fully_replicated);
    let count = home.replicas().filter(|&n| live(n)).count();
    if count == 0 {
        return None;
    }
    let pick = home
        .replicas()
        .filter(|&n| live(n))
        .nth(turn as usize % count);
    pick
}

#[cfg(test)]
mod tests {
    use schema::{Column, ColumnType};

    use super::*;

    fn n(id: u8) -> NodeId {
        NodeId::new(id).expect("node id")
    }

    #[test]
    fn tx_id_layout_is_node_then_counter() {
        let id = tx_id(n(7), 0x1234_5678_9abc);
        assert_eq!(id, 0x0007_1234_5678_9abc);
        assert_eq!(tx_node(id), 7);
        // The counter wraps within 48 bits, never into the node id.
        let wrapped = tx_id(n(255), u64::MAX);
        assert_eq!(tx_node(wrapped), 255);
        assert_eq!(wrapped & TX_COUNTER_MASK, TX_COUNTER_MASK);
        assert_eq!(tc_instance(id, 4), (id % 4) as u16);
        assert_eq!(tc_instance(id, 1), 0);
    }

    #[test]
    fn a_hint_skips_replicas_that_are_down_and_comes_back() {
        let placement = Placement::new(vec![vec![n(2), n(3)], vec![n(4), n(5)]], 2);
        for p in 0..16 {
            let home = placement.home(p);
            assert_eq!(
                live_primary_of(&placement, p, |_| true),
                Some(home.primary())
            );
            let backup = home.backups().next().expect("two replicas");
            let without = live_primary_of(&placement, p, |node| node != home.primary());
            assert_eq!(without, Some(backup), "partition {p}");
            assert_eq!(live_primary_of(&placement, p, |_| false), None);
        }
    }

    #[test]
    fn read_hints_spread_over_the_live_replicas() {
        let placement = Placement::new(vec![vec![n(2), n(3)], vec![n(4), n(5)]], 2);
        for p in 0..16 {
            let home = placement.home(p);
            let picked: std::collections::BTreeSet<NodeId> = (0..4)
                .filter_map(|turn| read_replica_of(&placement, p, false, turn, |_| true))
                .collect();
            let replicas: std::collections::BTreeSet<NodeId> = home.replicas().collect();
            assert_eq!(
                picked, replicas,
                "partition {p}: READ_BACKUP reads use both replicas"
            );
            let all: std::collections::BTreeSet<NodeId> = (0..8)
                .filter_map(|turn| read_replica_of(&placement, p, true, turn, |_| true))
                .collect();
            assert_eq!(
                all.len(),
                4,
                "partition {p}: fully replicated reads use every node"
            );
            // A node down is skipped; with none live there is no pick.
            let primary = home.primary();
            for turn in 0..4 {
                let got = read_replica_of(&placement, p, false, turn, |node| node != primary);
                assert_eq!(got, home.backups().next(), "partition {p}");
                let got = read_replica_of(&placement, p, true, turn, |node| node != primary);
                assert!(got.is_some_and(|node| node != primary));
            }
            assert_eq!(read_replica_of(&placement, p, true, 0, |_| false), None);
        }
    }

    #[test]
    fn hint_picks_the_primary_of_the_key_partition() {
        let table = TableDef::new(
            "t",
            1,
            vec![
                Column::new("user", ColumnType::Int { unsigned: true }),
                Column::new("item", ColumnType::Int { unsigned: true }),
            ],
        )
        .primary_key(vec![0, 1])
        .distribution_key(vec![0])
        .partitions(8)
        .build()
        .expect("valid table");
        let placement = Placement::new(vec![vec![n(2), n(3)], vec![n(4), n(5)]], 2);
        let mut scratch = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for user in 0..200u64 {
            let key = [Value::UInt(user), Value::UInt(9)];
            let p = partition_of_key(&table, &key, &mut scratch).expect("key fits");
            // Same as the storage crate's own computation.
            let mut encoded = Vec::new();
            KeyEncoder::distribution_key(&table)
                .encode(&key[..1], &mut encoded)
                .expect("fits");
            assert_eq!(p, partition_of(distribution_hash(&encoded), 8));
            // Only the distribution key counts: another item, same partition.
            let other = [Value::UInt(user), Value::UInt(1000)];
            assert_eq!(
                partition_of_key(&table, &other, &mut scratch).expect("fits"),
                p
            );
            let primary = primary_of(&placement, p);
            assert!(placement.home(p).is_replica(primary));
            seen.insert(primary);
        }
        assert_eq!(
            seen.len(),
            4,
            "200 users spread over every node's primaries"
        );
        let short = partition_of_key(&table, &[], &mut scratch).expect_err("no key");
        assert_eq!(short.code, proto::error::KEY_MISSING);
        let wrong = partition_of_key(&table, &[Value::String("x".into())], &mut scratch);
        assert_eq!(wrong.expect_err("wrong type").code, proto::error::BAD_VALUE);
    }
}
