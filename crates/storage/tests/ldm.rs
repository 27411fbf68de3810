//! The LDM instance: redo, local checkpoint rounds, trims, and restart from
//! disk, scenario by scenario, with the faults of issue 3 (a flipped byte in
//! a redo or checkpoint file, a truncated file, a full disk, a failed
//! fsync) and a full redo log. Every scenario runs on `SimDisk` and checks
//! the state a restart gives against the committed changes up to the GCI
//! it reports. The random workload with crashes is `ldm_model.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef, Value};
use storage::checkpoint::CheckpointError;
use storage::disk::{Disk, SimDisk};
use storage::fragment::{
    FragmentError, Outcome, ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec,
};
use storage::instance::{LcpProgress, LdmConfig, LdmError, LdmInstance, RecoveryReport};
use storage::locks::{OpId, TxId};
use storage::redo::RedoError;
use storage::Gci;

mod redo_format_1;

const DIR: &str = "/data/ndb_1_fs/ldm0";
const REDO_FILE_BYTES: u64 = 64 << 10;

fn table(id: u32, version: u32) -> TableDef {
    let mut table = TableDef::new(
        format!("t{id}"),
        id,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: true }),
            Column::new("n", ColumnType::Int { unsigned: false }),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 2000,
                    collation: Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "n".into(),
        id: 1000 + id,
        columns: vec![1],
        kind: IndexKind::Ordered,
    })
    .build()
    .unwrap();
    table.version = version;
    table
}

fn config(redo_files: u32) -> LdmConfig {
    LdmConfig {
        instance: 0,
        dir: PathBuf::from(DIR),
        data_memory_bytes: 16 << 20,
        redo_file_size_bytes: REDO_FILE_BYTES,
        redo_files,
        redo_earlier_files: None,
        lcp_pages_per_step: 4,
    }
}

type Row = (i64, Option<String>);
type Rows = BTreeMap<u64, Row>;

/// One LDM instance on a simulated disk, and what was committed to it.
struct Node {
    disk: SimDisk,
    config: LdmConfig,
    tables: Vec<TableDef>,
    ldm: Option<LdmInstance>,
    next_tx: u64,
    /// The GCI of the next commit.
    gci: Gci,
    /// Every committed change: (GCI, table, key, new row or deleted).
    history: Vec<(Gci, u32, u64, Option<Row>)>,
}

impl Node {
    fn new(seed: u64, redo_files: u32, tables: Vec<TableDef>) -> Node {
        let mut node = Node {
            disk: SimDisk::new(seed),
            config: config(redo_files),
            tables,
            ldm: None,
            next_tx: 1,
            gci: 1,
            history: Vec::new(),
        };
        let report = node.open(None).unwrap();
        assert!(report.redo_created && report.recovered_gci.is_none());
        node
    }

    fn open(&mut self, restore_gci: Option<Gci>) -> Result<RecoveryReport, LdmError> {
        let fragments: Vec<(TableDef, u32)> = self.tables.iter().map(|t| (t.clone(), 0)).collect();
        let (ldm, report) = LdmInstance::open(
            self.disk.clone(),
            self.config.clone(),
            &fragments,
            restore_gci,
        )?;
        self.ldm = Some(ldm);
        Ok(report)
    }

    fn ldm(&mut self) -> &mut LdmInstance {
        self.ldm.as_mut().expect("the instance is open")
    }

    /// Runs one transaction on `table` (upserts and deletes) and commits it
    /// in the current GCI; on an error the transaction is aborted.
    fn commit(&mut self, table: u32, changes: &[(u64, Option<Row>)]) -> Result<(), LdmError> {
        let tx = self.stage(table, changes);
        let gci = self.gci;
        let mut grants = Vec::new();
        let result = self.ldm().commit(table, 0, tx, gci, &mut grants);
        if result.is_err() {
            self.ldm().abort(table, 0, tx, &mut grants).unwrap();
        } else {
            self.record(table, changes);
        }
        assert!(grants.is_empty());
        result
    }

    /// The operations of a transaction, not committed.
    fn stage(&mut self, table: u32, changes: &[(u64, Option<Row>)]) -> TxId {
        self.next_tx += 1;
        let tx = TxId(self.next_tx);
        let (fragment, pool) = self.ldm().fragment(table, 0).unwrap();
        for (i, (k, row)) in changes.iter().enumerate() {
            let op = OpId(i as u32 + 1);
            let outcome = match row {
                Some((n, s)) => {
                    let s = s.clone().map_or(Value::Null, Value::String);
                    let values = [Value::UInt(*k), Value::Int(*n), s];
                    fragment.write(pool, tx, op, &values).unwrap()
                }
                None => fragment.delete(pool, tx, op, &[Value::UInt(*k)]).unwrap(),
            };
            assert_ne!(outcome, Outcome::Waiting);
        }
        tx
    }

    fn record(&mut self, table: u32, changes: &[(u64, Option<Row>)]) {
        for (k, row) in changes {
            self.history.push((self.gci, table, *k, row.clone()));
        }
    }

    /// Flushes the current GCI and moves to the next.
    fn flush(&mut self) {
        let gci = self.gci;
        self.ldm().flush_gci(gci).unwrap();
        self.gci += 1;
    }

    fn model_at(&self, table: u32, gci: Option<Gci>) -> Rows {
        let mut rows = Rows::new();
        for (g, t, k, row) in &self.history {
            if *t != table || gci.is_none_or(|gci| *g > gci) {
                continue;
            }
            match row {
                Some(row) => rows.insert(*k, row.clone()),
                None => rows.remove(k),
            };
        }
        rows
    }

    /// The committed rows of a table, by a full scan (and checked against
    /// an ordered scan and the fragment's invariants).
    fn rows(&mut self, table: u32) -> Rows {
        let (fragment, pool) = self.ldm().fragment(table, 0).unwrap();
        fragment.check_invariants(pool);
        let mut all = Vec::new();
        for range in [
            ScanRange::Full,
            ScanRange::Ordered {
                index_id: 1000 + table,
                lower: std::ops::Bound::Unbounded,
                upper: std::ops::Bound::Unbounded,
                direction: storage::ordered_index::Direction::Ascending,
            },
        ] {
            let spec = ScanSpec {
                range,
                columns: vec![0, 1, 2],
            };
            let (mut cursor, mut batch) = (ScanCursor::new(), ScanBatch::new());
            let mut rows = Rows::new();
            loop {
                let progress = fragment
                    .scan(pool, &spec, &mut cursor, 64, &mut batch)
                    .unwrap();
                for i in 0..batch.len() {
                    let layout = fragment.layout();
                    let k = match batch.value(layout, i, 0).to_value() {
                        Value::UInt(k) => k,
                        v => panic!("{v:?}"),
                    };
                    let n = match batch.value(layout, i, 1).to_value() {
                        Value::Int(n) => n,
                        v => panic!("{v:?}"),
                    };
                    let s = match batch.value(layout, i, 2).to_value() {
                        Value::Null => None,
                        Value::String(s) => Some(s),
                        v => panic!("{v:?}"),
                    };
                    assert!(rows.insert(k, (n, s)).is_none(), "key {k} twice");
                }
                if progress == ScanProgress::Done {
                    break;
                }
            }
            all.push(rows);
        }
        assert_eq!(all[0], all[1], "full scan and ordered scan");
        all.pop().unwrap()
    }

    /// Power failure, then a restart to the last flushed GCI; the state
    /// must equal the committed changes up to the GCI recovered.
    fn restart(&mut self) -> RecoveryReport {
        self.ldm = None;
        self.disk.crash();
        let flushed = self.gci.checked_sub(1).filter(|&g| g > 0);
        let report = self.open(flushed).unwrap();
        self.after_restart(&report);
        report
    }

    fn after_restart(&mut self, report: &RecoveryReport) {
        let recovered = report.recovered_gci;
        self.history
            .retain(|(g, ..)| recovered.is_some_and(|r| *g <= r));
        for t in self.tables.clone() {
            let expected = self.model_at(t.id, recovered);
            assert_eq!(self.rows(t.id), expected, "table {} after restart", t.id);
        }
        let floor = report.redo_complete_gci.max(recovered).unwrap_or(0);
        self.gci = floor + 1;
    }

    /// Runs a whole LCP round, flushing when it waits for a GCI.
    fn run_lcp(&mut self) -> LcpProgress {
        self.ldm().start_lcp().unwrap();
        for _ in 0..10_000 {
            match self.ldm().lcp_step().unwrap() {
                done @ LcpProgress::Completed { .. } => return done,
                LcpProgress::AwaitingGci { gci, .. } => {
                    assert!(gci >= self.gci - 1);
                    self.flush();
                }
                LcpProgress::Writing { .. } => {}
                LcpProgress::Idle => panic!("the round vanished"),
                LcpProgress::Syncing { .. } => panic!("lcp_step syncs on its own thread"),
            }
        }
        panic!("the LCP round did not complete");
    }

    fn lcp_files(&self) -> Vec<String> {
        let dir = self.config.lcp_dir();
        match self.disk.list_dir(&dir) {
            Ok(paths) => paths
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn row(n: i64, len: usize) -> Option<Row> {
    Some((n, (len > 0).then(|| "x".repeat(len))))
}

/// Commits `count` rows from key `first` in the current GCI.
fn fill(node: &mut Node, table: u32, first: u64, count: u64, len: usize) {
    let changes: Vec<(u64, Option<Row>)> = (first..first + count)
        .map(|k| (k, row(k as i64 % 7, len)))
        .collect();
    node.commit(table, &changes).unwrap();
}

#[test]
fn a_restart_restores_every_flushed_gci_and_nothing_after() {
    let mut node = Node::new(1, 4, vec![table(1, 1), table(2, 1)]);
    fill(&mut node, 1, 0, 50, 10);
    fill(&mut node, 2, 0, 20, 0);
    node.flush();
    node.commit(1, &[(3, None), (4, row(-4, 300)), (100, row(1, 1))])
        .unwrap();
    node.flush();
    // Committed but never flushed: lost by the crash.
    node.commit(1, &[(5, None), (6, None)]).unwrap();
    node.ldm().write_redo().unwrap();
    let report = node.restart();
    assert_eq!(report.recovered_gci, Some(2));
    assert_eq!(report.redo_complete_gci, Some(2));
    assert!(!report.redo_created);
    assert_eq!(report.records_replayed, 50 + 20 + 3);
    assert_eq!(report.fragments.len(), 2);
    assert!(report.fragments.iter().all(|f| f.lcp_id.is_none()));
    assert!(node.rows(1).contains_key(&5));
    // The lost GCI 3 is used again, for other changes.
    assert_eq!(node.gci, 3);
    node.commit(1, &[(7, None)]).unwrap();
    node.flush();
    let report = node.restart();
    assert_eq!(report.recovered_gci, Some(3));
    assert!(!node.rows(1).contains_key(&7) && node.rows(1).contains_key(&5));
    assert!(report.to_string().contains("restored to GCI 3"), "{report}");
}

/// An instance whose redo log part a build of format version 1 wrote
/// restarts on it (no initial restart) with every row it committed, logs
/// its new commits after those records in format 2, and a later restart
/// replays both: with a checkpoint taken before the change of format, and
/// without one.
#[test]
fn a_redo_log_of_format_1_restores_the_same_rows_and_goes_on_in_format_2() {
    for checkpoint in [false, true] {
        let mut node = Node::new(16, 4, vec![table(1, 1), table(2, 1)]);
        fill(&mut node, 1, 0, 50, 10);
        fill(&mut node, 2, 0, 20, 0);
        node.flush();
        if checkpoint {
            node.run_lcp();
        }
        node.commit(1, &[(3, None), (4, row(-4, 300)), (100, row(1, 1))])
            .unwrap();
        node.flush();
        node.ldm = None;
        let redo = node.config.redo_config();
        let rewritten = redo_format_1::rewrite_as_format_1(&node.disk, &redo, true);
        assert!(rewritten >= 5, "records of format 1: {rewritten}");
        assert_eq!(redo_format_1::control_version(&node.disk, &redo), 1);
        let report = node.restart();
        assert_eq!(report.recovered_gci, Some(node.gci - 1));
        assert!(!report.redo_created);
        assert!(report.records_replayed >= 3, "{report}");
        assert!(node.rows(1).contains_key(&100) && !node.rows(1).contains_key(&3));

        fill(&mut node, 1, 200, 30, 40);
        node.commit(2, &[(1, None)]).unwrap();
        node.flush();
        let report = node.restart();
        assert_eq!(report.recovered_gci, Some(node.gci - 1));
        assert!(node.rows(1).contains_key(&229) && !node.rows(2).contains_key(&1));
    }
}

/// An instance whose redo log part an earlier build made with fewer files
/// (before a part counted its instance's share of `NoOfFragmentLogParts`)
/// restarts on it as it was made, says so, and keeps logging, checkpointing
/// and restoring exactly around that smaller ring.
#[test]
fn a_redo_part_of_its_earlier_file_count_restarts_as_it_was_made() {
    let mut node = Node::new(17, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 40, 10);
    node.flush();
    let made = node.ldm().redo_capacity_bytes();
    node.config.redo_files = 16;
    node.config.redo_earlier_files = Some(4);
    let report = node.restart();
    assert_eq!(report.redo_files_kept, Some(4));
    assert!(
        report.to_string().contains("kept at the 4 files"),
        "{report}"
    );
    assert_eq!(node.ldm().redo_capacity_bytes(), made);
    assert_eq!(node.rows(1).len(), 40);
    // Several laps of the four files' ring, checkpoints freeing it.
    for round in 0..12u64 {
        fill(&mut node, 1, 1000 + round * 30, 30, 1500);
        node.commit(1, &[(round, None)]).unwrap();
        node.flush();
        if round % 2 == 1 {
            node.run_lcp();
        }
    }
    assert!(node.ldm().redo_head_lsn().0 > 2 * made, "two laps at least");
    let report = node.restart();
    assert_eq!(report.redo_files_kept, Some(4));
    let expected = node.model_at(1, report.recovered_gci);
    assert_eq!(node.rows(1), expected);
    assert_eq!(node.rows(1).len(), 40 - 12 + 12 * 30);
}

#[test]
fn checkpoints_trim_the_redo_and_restore_with_the_redo_after_them() {
    let mut node = Node::new(2, 4, vec![table(1, 1)]);
    for round in 0..6u64 {
        fill(&mut node, 1, round * 40, 40, 200);
        node.commit(1, &[(round * 40 + 1, None)]).unwrap();
        node.flush();
    }
    let used_before = node.ldm().redo_used_bytes();
    let LcpProgress::Completed {
        fragments,
        redo_freed_bytes,
        ..
    } = node.run_lcp()
    else {
        unreachable!()
    };
    assert_eq!(fragments, 1);
    assert!(redo_freed_bytes > 0);
    // Only the last marker is left (the log names the GCI it is complete to).
    assert_eq!(node.ldm().redo_used_bytes(), used_before - redo_freed_bytes);
    assert!(node.ldm().redo_used_bytes() <= 64);
    // Changes after the checkpoint come from the redo.
    node.commit(1, &[(2, None), (3, row(99, 5)), (1000, row(1, 1))])
        .unwrap();
    node.flush();
    let report = node.restart();
    let fragment = &report.fragments[0];
    assert_eq!(fragment.lcp_id, Some(1));
    assert_eq!(fragment.rows_from_lcp, 6 * 39);
    assert_eq!(fragment.records_replayed, 3);
    assert_eq!(report.recovered_gci, Some(7));
    // A second round builds a partial LCP on the first.
    fill(&mut node, 1, 5000, 3, 1);
    node.flush();
    node.run_lcp();
    let report = node.restart();
    assert_eq!(report.fragments[0].lcp_chain, vec![2, 1]);
    assert_eq!(report.records_replayed, 0);
}

#[test]
fn an_lcp_completes_only_once_the_gcis_it_may_hold_are_durable() {
    let mut node = Node::new(3, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 30, 20);
    node.flush();
    fill(&mut node, 1, 30, 30, 20);
    let gci = node.gci;
    node.ldm().start_lcp().unwrap();
    let mut waited = false;
    for _ in 0..100 {
        match node.ldm().lcp_step().unwrap() {
            LcpProgress::AwaitingGci { gci: needed, .. } => {
                assert_eq!(needed, gci);
                waited = true;
                break;
            }
            LcpProgress::Writing { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(waited);
    assert!(
        !node.lcp_files().iter().any(|f| f.ends_with(".ctl")),
        "no complete LCP before its GCI is durable: {:?}",
        node.lcp_files()
    );
    // A crash now: the unfinished LCP is ignored, the unflushed rows lost.
    let report = node.restart();
    assert_eq!(report.recovered_gci, Some(1));
    assert_eq!(report.fragments[0].lcp_id, None);
    assert_eq!(node.rows(1).len(), 30);
    // Again, and this time the GCI is flushed.
    fill(&mut node, 1, 30, 30, 20);
    node.ldm().start_lcp().unwrap();
    while !matches!(
        node.ldm().lcp_step().unwrap(),
        LcpProgress::AwaitingGci { .. }
    ) {}
    node.flush();
    assert!(matches!(
        node.ldm().lcp_step().unwrap(),
        LcpProgress::Completed { .. }
    ));
    assert!(node.lcp_files().iter().any(|f| f.ends_with(".ctl")));
    let report = node.restart();
    assert_eq!(report.fragments[0].rows_from_lcp, 60);
}

#[test]
fn a_full_redo_log_refuses_commits_until_a_checkpoint_frees_it() {
    let mut node = Node::new(4, 2, vec![table(1, 1)]);
    let capacity = node.ldm().redo_capacity_bytes();
    let mut key = 0;
    let error = loop {
        let changes: Vec<(u64, Option<Row>)> = (key..key + 4).map(|k| (k, row(1, 900))).collect();
        match node.commit(1, &changes) {
            Ok(()) => key += 4,
            Err(e) => break e,
        }
        if key % 16 == 0 {
            node.flush();
        }
        assert!(key < 1000, "the log never filled");
    };
    assert!(error.is_temporary(), "{error}");
    assert!(error.to_string().contains("is full"), "{error}");
    assert!(node.ldm().redo_used_bytes() > capacity / 2);
    // The refused transaction left nothing: retry it after a checkpoint.
    node.flush();
    let changes: Vec<(u64, Option<Row>)> = (key..key + 4).map(|k| (k, row(1, 900))).collect();
    let tx = node.stage(1, &changes);
    let mut grants = Vec::new();
    let gci = node.gci;
    let refused = node.ldm().commit(1, 0, tx, gci, &mut grants).unwrap_err();
    assert!(refused.is_temporary());
    assert!(matches!(node.run_lcp(), LcpProgress::Completed { .. }));
    assert!(node.ldm().redo_used_bytes() < capacity / 10);
    node.ldm().commit(1, 0, tx, gci, &mut grants).unwrap();
    node.record(1, &changes);
    node.flush();
    node.restart();
    assert_eq!(node.rows(1).len() as u64, key + 4);
}

#[test]
fn a_fragment_without_a_checkpoint_keeps_its_redo_from_trims() {
    let mut node = Node::new(5, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 20, 50);
    node.flush();
    // A round over table 1 only; table 2 appears before it writes anything
    // and commits in GCI 2, before table 1's LCP starts (in GCI 3): only
    // table 2's own start point keeps its records from the trim.
    node.ldm().start_lcp().unwrap();
    node.tables.push(table(2, 1));
    node.ldm().add_fragment(&table(2, 1), 0).unwrap();
    fill(&mut node, 2, 0, 25, 50);
    node.flush();
    fill(&mut node, 1, 20, 5, 50);
    let fragments = loop {
        match node.ldm().lcp_step().unwrap() {
            LcpProgress::Completed { fragments, .. } => break fragments,
            LcpProgress::AwaitingGci { .. } => node.flush(),
            LcpProgress::Writing { .. } => {}
            LcpProgress::Idle => panic!("the round vanished"),
            LcpProgress::Syncing { .. } => panic!("lcp_step syncs on its own thread"),
        }
    };
    assert_eq!(
        fragments, 1,
        "the round covers the fragments it started with"
    );
    let report = node.restart();
    let t2 = report.fragments.iter().find(|f| f.table_id == 2).unwrap();
    assert_eq!((t2.lcp_id, t2.records_replayed), (None, 25));
    // Its first LCP releases the redo; dropping it removes its files.
    node.run_lcp();
    assert!(node.lcp_files().iter().any(|f| f.starts_with("t2-")));
    node.ldm().drop_fragment(2, 0).unwrap();
    assert!(!node.lcp_files().iter().any(|f| f.starts_with("t2-")));
    node.tables.pop();
    fill(&mut node, 1, 100, 1, 1);
    node.flush();
    node.restart();
}

#[test]
fn dropped_fragments_records_are_skipped_at_restart() {
    let mut node = Node::new(6, 4, vec![table(1, 1), table(2, 1)]);
    fill(&mut node, 2, 0, 10, 5);
    fill(&mut node, 1, 0, 10, 5);
    node.flush();
    node.ldm().drop_fragment(2, 0).unwrap();
    node.tables.retain(|t| t.id != 2);
    let report = node.restart();
    assert_eq!(report.records_of_other_fragments, 10);
    assert_eq!(report.records_replayed, 10);
}

#[test]
fn a_restore_gci_below_the_durable_one_voids_the_gcis_above_it_for_good() {
    let mut node = Node::new(7, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 5, 5);
    node.flush();
    node.flush(); // GCI 2: no changes
    node.ldm = None;
    node.disk.crash();
    let report = node.open(Some(1)).unwrap();
    assert_eq!(
        (report.recovered_gci, report.redo_complete_gci),
        (Some(1), Some(2))
    );
    assert_eq!((report.voided_above, report.records_voided), (Some(1), 0));
    node.after_restart(&report);
    assert_eq!(node.gci, 3);
    fill(&mut node, 1, 5, 5, 5);
    node.commit(1, &[(0, None), (1, row(-1, 9))]).unwrap();
    node.flush();
    fill(&mut node, 1, 10, 5, 5);
    node.flush();
    node.ldm = None;
    node.disk.crash();
    // GCIs 3 and 4 are durable here; the cluster completed only 2 (which,
    // voided, reaches 1): both are voided, durably.
    let report = node.open(Some(2)).unwrap();
    assert_eq!(report.recovered_gci, Some(1));
    assert_eq!((report.voided_above, report.records_voided), (Some(1), 12));
    assert!(
        report
            .to_string()
            .contains("12 redo records of GCIs above 1 voided"),
        "{report}"
    );
    node.after_restart(&report);
    // A crash right after: the void holds (without it GCI 4 comes back).
    node.ldm = None;
    node.disk.crash();
    let report = node.open(None).unwrap();
    assert_eq!(report.recovered_gci, Some(1));
    assert_eq!(report.voided_above, None);
    node.after_restart(&report);
    // The voided GCIs may be used again, for other changes.
    node.gci = 3;
    node.commit(1, &[(2, row(33, 3)), (20, row(20, 0))])
        .unwrap();
    node.flush();
    node.ldm = None;
    node.disk.crash();
    let report = node.open(None).unwrap();
    assert_eq!(report.recovered_gci, Some(3));
    node.after_restart(&report);
    assert_eq!(node.rows(1).len(), 6);
    // Before the first GCI: never trimmed, so the empty state is exact.
    node.ldm = None;
    let report = node.open(Some(0)).unwrap();
    assert_eq!(
        (report.recovered_gci, report.voided_above),
        (Some(0), Some(0))
    );
    node.after_restart(&report);
    assert!(node.rows(1).is_empty());
    // Once trimmed, it is refused.
    node.gci = 4;
    fill(&mut node, 1, 0, 5, 5);
    node.flush();
    node.run_lcp();
    node.ldm = None;
    let error = node.open(Some(0)).unwrap_err();
    assert!(
        matches!(error, LdmError::RestoreGciTooOld { restore_gci: 0, .. }),
        "{error}"
    );
}

#[test]
fn a_crash_during_the_void_leaves_a_restore_that_can_be_asked_again() {
    for fault in 0..3 {
        let mut node = Node::new(70 + fault, 4, vec![table(1, 1)]);
        for g in 0..4u64 {
            fill(&mut node, 1, g * 10, 10, 7);
            node.flush();
        }
        node.ldm = None;
        node.disk.crash();
        match fault {
            0 => node.disk.fail_next_sync(),
            1 => node.disk.fail_writes_after(0),
            _ => {}
        }
        let opened = node.open(Some(2));
        node.disk.clear_faults();
        match fault {
            0 | 1 => assert!(
                opened.is_err(),
                "fault {fault}: the void could not be made durable"
            ),
            _ => assert_eq!(opened.unwrap().voided_above, Some(2)),
        }
        // The crash loses or tears whatever of the marker was not synced.
        node.ldm = None;
        node.disk.crash();
        let report = node.open(Some(2)).unwrap();
        assert_eq!(report.recovered_gci, Some(2), "fault {fault}");
        node.after_restart(&report);
        assert_eq!(node.rows(1).len(), 20, "fault {fault}");
        node.ldm = None;
        node.disk.crash();
        let report = node.open(None).unwrap();
        assert_eq!(
            report.recovered_gci,
            Some(2),
            "fault {fault}: the void is durable"
        );
        node.after_restart(&report);
    }
}

/// The cluster's view of one instance: commits in GCIs, flushes, LCP steps
/// and a kept GCI (the GCI the node's disk records complete cluster-wide)
/// that lags the flushes; crashes; each restart to a GCI the cluster may
/// choose (from the kept GCI to the local durable one) must reach exactly
/// it and equal the model there, and a later restart must not see the GCIs
/// voided by it, even when they are used again.
#[test]
fn random_restarts_to_any_gci_from_the_kept_one_up_are_exact() {
    for seed in 1..=6u64 {
        let mut rng = SplitMix(seed);
        let mut node = Node::new(100 + seed, 4, vec![table(1, 1)]);
        node.ldm().set_kept_gci(0);
        let mut kept: Gci = 0;
        // The GCIs flushed and not voided: those a cluster may complete.
        let mut flushed = std::collections::BTreeSet::from([0]);
        let mut restarts = 0;
        let mut voided = 0;
        for _ in 0..400 {
            match rng.below(100) {
                0..=49 => {
                    let changes: Vec<(u64, Option<Row>)> = (0..1 + rng.below(4))
                        .map(|_| {
                            let k = rng.below(60);
                            let change = if rng.below(4) == 0 {
                                None
                            } else {
                                row(rng.below(1000) as i64, rng.below(50) as usize)
                            };
                            (k, change)
                        })
                        .collect::<BTreeMap<_, _>>()
                        .into_iter()
                        .collect();
                    match node.commit(1, &changes) {
                        Ok(()) => {}
                        Err(e) if e.is_temporary() => {}
                        Err(e) => panic!("seed {seed}: {e}"),
                    }
                }
                50..=64 => {
                    flushed.insert(node.gci);
                    node.flush();
                }
                65..=74 => {
                    // The cluster completes (and the node keeps) a flushed GCI.
                    let above: Vec<Gci> = flushed.range(kept + 1..).copied().collect();
                    if !above.is_empty() {
                        kept = above[rng.below(above.len() as u64) as usize];
                        node.ldm().set_kept_gci(kept);
                    }
                }
                75..=89 => {
                    if !node.ldm().lcp_running() {
                        node.ldm().start_lcp().unwrap();
                    }
                    node.ldm().lcp_step().unwrap();
                }
                90..=94 => node.ldm().write_redo().unwrap(),
                _ => {
                    let durable = node.ldm().durable_gci().unwrap_or(0);
                    node.ldm = None;
                    node.disk.crash();
                    let choices: Vec<Gci> = flushed.range(kept..).copied().collect();
                    let restore = choices[rng.below(choices.len() as u64) as usize];
                    flushed.retain(|&g| g <= restore);
                    let report = node.open(Some(restore)).unwrap_or_else(|e| {
                        panic!("seed {seed}: restore to {restore} (kept {kept}): {e}")
                    });
                    assert_eq!(
                        report.recovered_gci.unwrap_or(0),
                        restore,
                        "seed {seed}: kept {kept}, durable {durable}: {report}"
                    );
                    voided += u32::from(report.voided_above.is_some());
                    node.after_restart(&report);
                    node.ldm().set_kept_gci(kept);
                    if rng.below(2) == 0 {
                        // Use the voided GCIs again.
                        node.gci = restore + 1;
                    }
                    restarts += 1;
                }
            }
        }
        assert!(
            restarts >= 10 && voided >= 3,
            "seed {seed}: {restarts} restarts, {voided} voided"
        );
    }
}

/// A small deterministic generator (the scenario needs no more).
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

#[test]
fn a_flipped_byte_in_the_middle_of_the_redo_refuses_to_open() {
    let mut node = Node::new(8, 4, vec![table(1, 1)]);
    for g in 0..3 {
        fill(&mut node, 1, g * 10, 10, 30);
        node.flush();
    }
    node.ldm = None;
    let redo = node.config.redo_config();
    node.disk.flip_byte(&redo.file_path(0), 4096 + 40).unwrap();
    let error = node.open(Some(3)).unwrap_err();
    assert!(
        matches!(&error, LdmError::Redo { source, .. } if matches!(**source, RedoError::Corrupt { .. })),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("redo-part0-0000.log") && message.contains("offset 4096"),
        "{message}"
    );
}

#[test]
fn a_flipped_byte_in_the_last_flushed_batch_cuts_the_tail() {
    let mut node = Node::new(9, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 10, 30);
    node.flush();
    fill(&mut node, 1, 10, 10, 30);
    node.flush();
    let last_batch = node.ldm().redo_head_lsn();
    node.commit(1, &[(3, None), (11, row(5, 5))]).unwrap();
    node.flush();
    node.ldm = None;
    let redo = node.config.redo_config();
    let (file, offset) = redo.locate(storage::redo::Lsn(last_batch.0 + 40));
    node.disk.flip_byte(&redo.file_path(file), offset).unwrap();
    let report = node.open(Some(3)).unwrap();
    // Media damage in the last batch reads as a torn tail: the state is
    // exact at the GCI before, and the caller sees it is below the one
    // asked for.
    assert_eq!(report.recovered_gci, Some(2));
    let cut = report.redo_cut.as_ref().expect("the cut is reported");
    assert!(cut.reason.contains("torn or damaged"), "{}", cut.reason);
    node.after_restart(&report);
    assert_eq!(node.rows(1).len(), 20);
}

#[test]
fn damaged_or_truncated_checkpoint_files_refuse_to_open() {
    for damage in ["data byte", "control byte", "truncated data"] {
        let mut node = Node::new(10, 4, vec![table(1, 1)]);
        fill(&mut node, 1, 0, 200, 40);
        node.flush();
        node.run_lcp();
        node.ldm = None;
        let lcp_dir = node.config.lcp_dir();
        let data = lcp_dir.join("t1-f0-lcp1.data");
        let control = lcp_dir.join("t1-f0-lcp1.ctl");
        match damage {
            "data byte" => node.disk.flip_byte(&data, 3000).unwrap(),
            "control byte" => node.disk.flip_byte(&control, 50).unwrap(),
            _ => node.disk.truncate(&data, 5000).unwrap(),
        }
        let error = node.open(Some(1)).unwrap_err();
        let message = error.to_string();
        assert!(error.is_damage(), "{message}");
        match damage {
            "control byte" => {
                assert!(
                    matches!(error, LdmError::CheckpointControlDamaged { .. }),
                    "{message}"
                );
                assert!(message.contains("t1-f0-lcp1.ctl"), "{message}");
            }
            _ => {
                let LdmError::Checkpoint { source, .. } = &error else {
                    panic!("{message}")
                };
                assert!(
                    matches!(**source, CheckpointError::Corrupt { .. }),
                    "{message}"
                );
                assert!(
                    message.contains("t1-f0-lcp1.data") && message.contains("offset"),
                    "{message}"
                );
            }
        }
    }
}

#[test]
fn a_full_disk_during_redo_or_checkpoint_writes_loses_nothing() {
    let mut node = Node::new(11, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 50, 100);
    node.disk.fail_writes_after(1000);
    let error = node.ldm().flush_gci(1).unwrap_err();
    assert!(error.to_string().contains("offset"), "{error}");
    node.disk.allow_writes();
    node.flush();
    // A checkpoint that runs out of space is abandoned; the next works.
    fill(&mut node, 1, 50, 50, 100);
    node.flush();
    node.disk.fail_writes_after(2000);
    node.ldm().start_lcp().unwrap();
    let error = loop {
        match node.ldm().lcp_step() {
            Ok(LcpProgress::Completed { .. }) => panic!("the LCP wrote through a full disk"),
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(matches!(error, LdmError::Checkpoint { .. }), "{error}");
    assert!(!error.is_damage(), "a full disk is no damage: {error}");
    assert!(!node.ldm().lcp_running());
    // Commits go on (the redo log has its files).
    node.disk.allow_writes();
    fill(&mut node, 1, 100, 10, 100);
    node.flush();
    node.run_lcp();
    let report = node.restart();
    assert_eq!(report.fragments[0].lcp_id, Some(2));
    assert_eq!(node.rows(1).len(), 110);
}

#[test]
fn checkpoints_abandoned_on_a_full_disk_leave_no_files_behind() {
    let mut node = Node::new(14, 4, vec![table(1, 1), table(2, 1)]);
    fill(&mut node, 1, 0, 50, 100);
    fill(&mut node, 2, 0, 50, 100);
    node.flush();
    let lcp_dir = node.config.lcp_dir();
    let files = |node: &Node| node.disk.list_dir(&lcp_dir).unwrap_or_default();
    let before = files(&node);
    // Each round creates its first fragment's data file, then fails to
    // write it: the disk has no room at all.
    node.disk.fail_writes_after(0);
    for round in 0..3 {
        node.ldm().start_lcp().unwrap();
        let error = loop {
            match node.ldm().lcp_step() {
                Ok(LcpProgress::Completed { .. }) => panic!("the LCP wrote through a full disk"),
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert!(matches!(error, LdmError::Checkpoint { .. }), "{error}");
        assert_eq!(files(&node), before, "round {round} left files behind");
    }
    node.disk.allow_writes();
    node.run_lcp();
    let report = node.restart();
    assert_eq!(node.rows(1).len(), 50);
    assert_eq!(node.rows(2).len(), 50);
    assert!(
        report.fragments.iter().all(|f| f.lcp_id == Some(4)),
        "{report}"
    );
}

#[test]
fn a_failed_fsync_stops_the_instance_and_a_restart_recovers() {
    let mut node = Node::new(12, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 10, 10);
    node.flush();
    fill(&mut node, 1, 10, 10, 10);
    node.disk.fail_next_sync();
    let error = node.ldm().flush_gci(2).unwrap_err();
    assert!(error.to_string().contains("fsync"), "{error}");
    let refused = node.commit(1, &[(0, None)]).unwrap_err();
    assert!(!refused.is_temporary(), "{refused}");
    node.ldm = None;
    node.disk.crash();
    // GCI 2 may or may not have reached the disk.
    let report = node.open(None).unwrap();
    assert!(matches!(report.recovered_gci, Some(1 | 2)), "{report}");
    node.after_restart(&report);
}

#[test]
fn checkpoints_and_records_of_a_newer_table_version_are_refused() {
    // Older versions are converted (tests/alter.rs); a newer one than the
    // definition given cannot be.
    let mut node = Node::new(13, 4, vec![table(1, 2)]);
    fill(&mut node, 1, 0, 10, 10);
    node.flush();
    node.ldm = None;
    node.tables = vec![table(1, 1)];
    let error = node.open(Some(1)).unwrap_err();
    assert!(
        matches!(
            error,
            LdmError::TableVersion {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("redo record"), "{error}");
    node.tables = vec![table(1, 2)];
    node.open(Some(1)).unwrap();
    node.run_lcp();
    node.ldm = None;
    node.tables = vec![table(1, 1)];
    let error = node.open(Some(2)).unwrap_err();
    assert!(error.to_string().contains("local checkpoint 1"), "{error}");
}

#[test]
fn missing_redo_files_under_a_checkpoint_are_refused() {
    let mut node = Node::new(14, 4, vec![table(1, 1)]);
    fill(&mut node, 1, 0, 10, 10);
    node.flush();
    node.run_lcp();
    node.ldm = None;
    let redo = node.config.redo_config();
    for path in (0..4)
        .map(|i| redo.file_path(i))
        .chain([redo.control_path()])
    {
        node.disk.remove_file(&path).unwrap();
    }
    let error = node.open(None).unwrap_err();
    assert!(matches!(error, LdmError::RedoMissing { .. }), "{error}");
}

#[test]
fn operations_on_unknown_fragments_and_duplicates_are_errors() {
    let mut node = Node::new(15, 4, vec![table(1, 1)]);
    let mut grants = Vec::new();
    let error = node
        .ldm()
        .commit(9, 0, TxId(1), 1, &mut grants)
        .unwrap_err();
    assert!(matches!(error, LdmError::NoSuchFragment { .. }), "{error}");
    let error = node.ldm().add_fragment(&table(1, 1), 0).unwrap_err();
    assert!(matches!(error, LdmError::FragmentExists { .. }), "{error}");
    let error = node.ldm().add_fragment(&table(2, 1), 1).unwrap_err();
    assert!(matches!(error, LdmError::NoSuchPartition { .. }), "{error}");
    assert!(node.ldm().fragment(2, 0).is_none());
    node.ldm().drop_fragment(2, 0).unwrap();
    let full = FragmentError::DuplicateKey { table: "t".into() };
    assert!(!full.is_temporary());
}

/// `lcp_step_pages` sets a step's page budget: the same checkpoint takes
/// fewer steps with a larger one (the LDM block quadruples it while the
/// redo log part is half full), and both restore the same rows.
#[test]
fn a_larger_step_budget_writes_the_same_checkpoint_in_fewer_steps() {
    const ROWS: u64 = 60_000;
    let steps_with = |pages: usize| -> usize {
        // A redo log part of 96 small files (about 6 MB) takes the rows.
        let mut node = Node::new(5, 96, vec![table(1, 1)]);
        // A budget counts fixed-size row pages: ROWS short rows fill dozens.
        for first in (0..ROWS).step_by(5_000) {
            fill(&mut node, 1, first, 5_000, 0);
            node.flush();
        }
        node.ldm().start_lcp().unwrap();
        let mut steps = 0;
        loop {
            steps += 1;
            match node.ldm().lcp_step_pages(pages).unwrap() {
                LcpProgress::Writing { .. } => {}
                LcpProgress::AwaitingGci { .. } => node.flush(),
                LcpProgress::Completed { .. } => break,
                LcpProgress::Idle => panic!("the round vanished"),
                LcpProgress::Syncing { .. } => panic!("lcp_step syncs on its own thread"),
            }
        }
        let report = node.restart();
        assert_eq!(report.fragments[0].rows_from_lcp, ROWS);
        steps
    };
    let one = steps_with(1);
    let sixteen = steps_with(16);
    assert!(one >= 30, "a page per step: {one} steps");
    assert!(
        sixteen * 8 <= one,
        "16 pages per step: {sixteen} steps against {one}"
    );
}
