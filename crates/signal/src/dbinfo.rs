//! The ndbinfo tables a data node answers `DbinfoScanReq` for: their names
//! and columns, shared by the data node that fills the rows and the API
//! that reads them (docs/operations.md, "ndbinfo", describes each column).
//! Names follow NDB's ndbinfo where NDB has the table or column.

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// An unsigned integer (`DbinfoRow::ints`).
    Int,
    /// Text (`DbinfoRow::texts`).
    Text,
}

/// One ndbinfo table.
#[derive(Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub columns: &'static [(&'static str, ColumnKind)],
}

impl TableDef {
    /// How many columns are of `kind`: a row has that many values of it.
    pub fn count(&self, kind: ColumnKind) -> usize {
        self.columns.iter().filter(|(_, k)| *k == kind).count()
    }

    /// Where integer column `column` is in a row's `ints`; None when the
    /// table has no such integer column.
    pub fn int_at(&self, column: &str) -> Option<usize> {
        self.columns
            .iter()
            .filter(|(_, k)| *k == Int)
            .position(|(name, _)| *name == column)
    }
}

/// Fills `client_block_ref` of `cluster_operations` rows from the
/// `cluster_transactions` rows of the same transactions (by `transid`).
/// An LDM does not learn its transactions' client (only their TC: the
/// client's block would cost every request to the LDMs four bytes), so
/// the reader joins what the TCs know when it answers. A row whose
/// transaction the TCs did not show (ended since, its TC's node down, or
/// beyond its TC's `IN_FLIGHT_ROWS_MAX`) keeps 0. Rows not of the tables'
/// layouts are left as they are.
pub fn join_client_block_refs<'a, 'b>(
    operations: impl IntoIterator<Item = &'a mut crate::DbinfoRow>,
    transactions: impl IntoIterator<Item = &'b crate::DbinfoRow>,
) {
    let at = |def: &TableDef, column| def.int_at(column).expect("a column of the table");
    let (tx_transid, tx_client) = (
        at(&CLUSTER_TRANSACTIONS, "transid"),
        at(&CLUSTER_TRANSACTIONS, "client_block_ref"),
    );
    let clients: std::collections::HashMap<u64, u64> = transactions
        .into_iter()
        .filter_map(|t| Some((*t.ints.get(tx_transid)?, *t.ints.get(tx_client)?)))
        .filter(|&(_, client)| client != 0)
        .collect();
    if clients.is_empty() {
        return;
    }
    let (op_transid, op_client) = (
        at(&CLUSTER_OPERATIONS, "transid"),
        at(&CLUSTER_OPERATIONS, "client_block_ref"),
    );
    for op in operations {
        let Some(&transid) = op.ints.get(op_transid) else {
            continue;
        };
        if let (Some(&client), Some(slot)) = (clients.get(&transid), op.ints.get_mut(op_client)) {
            *slot = client;
        }
    }
}

use ColumnKind::{Int, Text};

pub const MEMORYUSAGE: TableDef = TableDef {
    name: "memoryusage",
    columns: &[
        ("node_id", Int),
        ("memory_type", Text),
        ("used", Int),
        ("used_pages", Int),
        ("total", Int),
        ("total_pages", Int),
    ],
};

pub const COUNTERS: TableDef = TableDef {
    name: "counters",
    columns: &[
        ("node_id", Int),
        ("block_name", Text),
        ("block_instance", Int),
        ("counter_id", Int),
        ("counter_name", Text),
        ("val", Int),
    ],
};

pub const NODES: TableDef = TableDef {
    name: "nodes",
    columns: &[
        ("node_id", Int),
        ("uptime", Int),
        ("status", Text),
        ("start_phase", Int),
    ],
};

pub const THREADSTAT: TableDef = TableDef {
    name: "threadstat",
    columns: &[
        ("node_id", Int),
        ("thr_no", Int),
        ("thr_nm", Text),
        ("role", Text),
        ("c_loop", Int),
        ("c_exec", Int),
        ("c_wait", Int),
        ("c_wake", Int),
        ("queue_depth", Int),
        ("os_tid", Int),
        ("os_now", Int),
        ("os_ru_utime", Int),
        ("os_ru_stime", Int),
        ("os_ru_nvcsw", Int),
        ("os_ru_nivcsw", Int),
        ("sleep_us", Int),
        ("spin_us", Int),
        ("buffer_full_us", Int),
        ("spin_limit_us", Int),
    ],
};

/// Each execution thread over the last second (NDB's `cpustat`): whole
/// percentages of the window, and the window's length in microseconds.
/// NDB's `thread_send` is not kept apart: sending is in `thread_exec`.
pub const CPUSTAT: TableDef = TableDef {
    name: "cpustat",
    columns: &[
        ("node_id", Int),
        ("thr_no", Int),
        ("OS_user", Int),
        ("OS_system", Int),
        ("OS_idle", Int),
        ("thread_exec", Int),
        ("thread_sleeping", Int),
        ("thread_spinning", Int),
        ("thread_buffer_full", Int),
        ("elapsed_time", Int),
    ],
};

pub const TRANSPORTERS: TableDef = TableDef {
    name: "transporters",
    columns: &[
        ("node_id", Int),
        ("remote_node_id", Int),
        ("status", Text),
        ("connect_count", Int),
        ("bytes_sent", Int),
        ("bytes_received", Int),
        ("frames_sent", Int),
        ("frames_received", Int),
        // NDB's `transporter_details.type`: 'TCP', or 'UNIX' for a local
        // socket (`UseShm`; NDB's would say 'SHM').
        ("type", Text),
    ],
};

pub const LOGSPACES: TableDef = TableDef {
    name: "logspaces",
    columns: &[
        ("node_id", Int),
        ("log_type", Text),
        ("log_id", Int),
        ("log_part", Int),
        ("total", Int),
        ("used", Int),
    ],
};

/// The redo log's memory buffer per LDM instance (NDB's `logbuffers`,
/// with Skarv's `high_water` and `unsynced`).
pub const LOGBUFFERS: TableDef = TableDef {
    name: "logbuffers",
    columns: &[
        ("node_id", Int),
        ("log_type", Text),
        ("log_id", Int),
        ("log_part", Int),
        ("total", Int),
        ("used", Int),
        ("high_water", Int),
        ("unsynced", Int),
    ],
};

pub const CLUSTER_TRANSACTIONS: TableDef = TableDef {
    name: "cluster_transactions",
    columns: &[
        ("node_id", Int),
        ("block_instance", Int),
        ("transid", Int),
        ("state", Text),
        ("count_operations", Int),
        ("outstanding_operations", Int),
        ("inactive_seconds", Int),
        ("client_node_id", Int),
        ("client_block_ref", Int),
    ],
};

pub const CLUSTER_OPERATIONS: TableDef = TableDef {
    name: "cluster_operations",
    columns: &[
        ("node_id", Int),
        ("block_instance", Int),
        ("transid", Int),
        ("operation_type", Text),
        ("state", Text),
        ("tableid", Int),
        ("fragmentid", Int),
        ("client_node_id", Int),
        ("client_block_ref", Int),
        ("tc_node_id", Int),
        ("tc_block_no", Int),
        ("tc_block_instance", Int),
    ],
};

pub const TABLE_FRAGMENTS: TableDef = TableDef {
    name: "table_fragments",
    columns: &[
        ("node_id", Int),
        ("block_instance", Int),
        ("table_id", Int),
        ("fq_name", Text),
        ("fragment_num", Int),
        ("replica", Text),
        ("fixed_elem_count", Int),
        ("fixed_elem_size_bytes", Int),
        ("fixed_elem_alloc_bytes", Int),
        ("var_elem_alloc_bytes", Int),
        ("hash_index_alloc_bytes", Int),
        ("data_memory_bytes", Int),
    ],
};

/// Skarv's: a TC instance's request latencies as a histogram of log2
/// buckets (docs/operations.md, "ndbinfo").
pub const TC_LATENCY: TableDef = TableDef {
    name: "tc_latency",
    columns: &[
        ("node_id", Int),
        ("block_instance", Int),
        ("request", Text),
        ("bucket", Int),
        ("le_us", Int),
        ("count", Int),
        ("sum_us", Int),
        ("total", Int),
    ],
};

/// `tc_latency.request` of transaction commits.
pub const COMMIT: &str = "COMMIT";
/// `tc_latency.request` of requests of an open transaction that do not
/// commit (answered when their operations are).
pub const KEY: &str = "KEY";

/// Buckets of a latency histogram: bucket `i` counts latencies of at most
/// 2^i microseconds above the bucket before (bucket 0: at most 1 us), the
/// last every latency above 2^(LATENCY_BUCKETS - 2) us (about 2.1 s).
pub const LATENCY_BUCKETS: usize = 23;

/// The upper bound (`le`) of latency bucket `bucket`, in microseconds;
/// `u64::MAX` for the last (Prometheus's `+Inf`).
pub fn latency_le_us(bucket: usize) -> u64 {
    assert!(bucket < LATENCY_BUCKETS, "latency bucket {bucket}");
    if bucket == LATENCY_BUCKETS - 1 {
        u64::MAX
    } else {
        1 << bucket
    }
}

/// The bucket of a latency of `us` microseconds: the first whose upper
/// bound is at least `us`.
pub fn latency_bucket(us: u64) -> usize {
    let bucket = if us <= 1 {
        0
    } else {
        (u64::BITS - (us - 1).leading_zeros()) as usize
    };
    bucket.min(LATENCY_BUCKETS - 1)
}

/// `table_fragments.replica` of a fragment whose node holds the
/// partition's primary replica, and of one holding a backup.
pub const PRIMARY: &str = "PRIMARY";
pub const BACKUP: &str = "BACKUP";

/// Rows of `table_fragments` one LDM instance answers at most (its
/// fragments, the hidden tables' included, in table id order).
pub const TABLE_FRAGMENTS_ROWS_MAX: usize = 10_000;

/// Rows of `cluster_transactions` one TC instance answers at most, and of
/// `cluster_operations` one LDM instance answers at most: a node with more
/// in flight shows these many (the oldest slots first), so a scan of a busy
/// node stays one bounded answer.
pub const IN_FLIGHT_ROWS_MAX: usize = 1_000;

/// `logspaces.log_type` of the redo log (NDB's word).
pub const REDO: &str = "REDO";

/// Use of DataMemory or the redo log at which a data node warns in the
/// cluster log, and the mgmd's metrics show the alarm (docs/operations.md,
/// "Alarms").
pub const ALARM_WARNING_PERCENT: u64 = 80;
/// ... and at which it raises an alert: writes fail soon.
pub const ALARM_CRITICAL_PERCENT: u64 = 90;

/// The alarm level of `used` of `total`: 0, or the highest threshold
/// ([`ALARM_WARNING_PERCENT`], [`ALARM_CRITICAL_PERCENT`]) reached. The one
/// rule both the data nodes' cluster-log alarms and the mgmd's metric use.
pub fn alarm_level(used: u64, total: u64) -> u64 {
    let percent = used.saturating_mul(100).checked_div(total).unwrap_or(0);
    if percent >= ALARM_CRITICAL_PERCENT {
        ALARM_CRITICAL_PERCENT
    } else if percent >= ALARM_WARNING_PERCENT {
        ALARM_WARNING_PERCENT
    } else {
        0
    }
}

/// Which blocks each execution thread runs (NDB's `threadblocks`).
pub const THREADBLOCKS: TableDef = TableDef {
    name: "threadblocks",
    columns: &[
        ("node_id", Int),
        ("thr_no", Int),
        ("block_name", Text),
        ("block_instance", Int),
    ],
};

/// The restart of each data node that the distribution master saw join
/// (NDB's `restart_info`, which NDB's master keeps too): its step and how
/// long each took, in NDB's seconds and Skarv's milliseconds.
pub const RESTART_INFO: TableDef = TableDef {
    name: "restart_info",
    columns: &[
        ("node_id", Int),
        ("node_restart_status", Text),
        ("node_restart_status_int", Int),
        ("secs_to_include_node", Int),
        ("secs_to_synchronize_starting_node", Int),
        ("total_restart_secs", Int),
        ("include_node_ms", Int),
        ("synchronize_ms", Int),
        ("total_restart_ms", Int),
    ],
};

/// `restart_info.node_restart_status` and `_int`, NDB's words and numbers
/// for the steps Skarv's node restart has (docs/operations.md).
pub const RESTART_INCLUDED: (&str, u64) = ("Included in heartbeat protocol", 3);
pub const RESTART_SYNCHRONIZING: (&str, u64) = ("Synchronize start node with live nodes", 13);
pub const RESTART_COMPLETED: (&str, u64) = ("Restart completed", 16);
pub const RESTART_NODE_FAILED: (&str, u64) = ("Node failed", 17);

/// Rows of `restart_info` a master keeps at most (one per data node).
pub const RESTART_INFO_ROWS_MAX: usize = 256;

/// Every ndbinfo table, in the order `SHOW TABLES FROM ndbinfo` lists them.
pub const TABLES: &[&TableDef] = &[
    &CLUSTER_OPERATIONS,
    &CLUSTER_TRANSACTIONS,
    &COUNTERS,
    &CPUSTAT,
    &LOGBUFFERS,
    &LOGSPACES,
    &MEMORYUSAGE,
    &NODES,
    &RESTART_INFO,
    &TABLE_FRAGMENTS,
    &TC_LATENCY,
    &THREADBLOCKS,
    &THREADSTAT,
    &TRANSPORTERS,
];

/// The table named `name` (ASCII case ignored, as MySQL on Linux does not
/// for tables but ndbinfo's names are all lower case).
pub fn table(name: &str) -> Option<&'static TableDef> {
    TABLES
        .iter()
        .copied()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// `transporters.status` of a link that is up, and of one that is not
/// (NDB's words).
pub const CONNECTED: &str = "CONNECTED";
pub const DISCONNECTED: &str = "DISCONNECTED";

/// `memoryusage.memory_type` of the `DataMemory` row (NDB's words).
pub const DATA_MEMORY: &str = "Data memory";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DbinfoRow;

    #[test]
    fn an_operation_gets_the_client_its_transaction_shows() {
        let ints = |v: &[u64]| DbinfoRow {
            ints: v.to_vec(),
            texts: Vec::new(),
        };
        // cluster_transactions: node, instance, transid, ops, outstanding,
        // inactive, client node, client block ref.
        let transactions = [
            ints(&[2, 0, 0x7_0000_0001, 1, 0, 0, 7, 0x1234_0007]),
            ints(&[3, 0, 0x8_0000_0002, 1, 0, 0, 8, 0]),
        ];
        // cluster_operations: node, instance, transid, table, fragment,
        // client node, client block ref, tc node, tc block, tc instance.
        let mut operations = [
            ints(&[2, 0, 0x7_0000_0001, 5, 0, 7, 0, 2, 4, 0]),
            ints(&[3, 1, 0x7_0000_0001, 5, 1, 7, 0, 2, 4, 0]),
            ints(&[3, 1, 0x8_0000_0002, 5, 1, 8, 0, 3, 4, 0]),
            ints(&[3, 1, 0x9_0000_0003, 5, 1, 9, 0, 3, 4, 0]),
            ints(&[3]),
        ];
        join_client_block_refs(&mut operations, &transactions);
        let refs: Vec<Option<u64>> = operations.iter().map(|o| o.ints.get(6).copied()).collect();
        assert_eq!(
            refs,
            [Some(0x1234_0007), Some(0x1234_0007), Some(0), Some(0), None]
        );
    }

    #[test]
    fn a_latency_falls_in_the_first_bucket_that_holds_it() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(1), 0);
        assert_eq!(latency_bucket(2), 1);
        assert_eq!(latency_bucket(3), 2);
        assert_eq!(latency_bucket(4), 2);
        assert_eq!(latency_bucket(5), 3);
        assert_eq!(latency_bucket(1 << 20), 20);
        assert_eq!(latency_bucket((1 << 21) + 1), LATENCY_BUCKETS - 1);
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
        for us in [0, 1, 2, 3, 100, 999_999, 1 << 21, u64::MAX] {
            let bucket = latency_bucket(us);
            assert!(us <= latency_le_us(bucket), "{us} fits bucket {bucket}");
            assert!(
                bucket == 0 || us > latency_le_us(bucket - 1),
                "{us}: the first"
            );
        }
    }
}
