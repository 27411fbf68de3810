//! ALTER TABLE in storage: a fragment moved to a later table version
//! (columns appended, ordered indexes added and dropped), and an LDM
//! instance that crashes before, during and after alters and must restore
//! the current version exactly.
//!
//! The property test runs random transactions on one table of an instance
//! while GCIs are flushed, local checkpoints run and the simulated disk
//! crashes at random points; two alters happen in the middle (v2 appends
//! `d INT NOT NULL DEFAULT 7` and `e VARCHAR NULL`; v3 appends `f BIGINT
//! NULL DEFAULT -1`, adds an ordered index on `d` and drops the one on
//! `n`). After each crash the instance opens under the newest definition
//! (the dictionary's, which committed the alter before the LDM applied
//! it), so redo records and checkpoints of older versions must be
//! converted: the recovered state must equal the model at the last
//! flushed GCI, with the added columns of older rows at their defaults.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef, Value};
use storage::disk::SimDisk;
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadMode, RowBuf, ScanBatch, ScanCursor, ScanProgress,
    ScanRange, ScanSpec,
};
use storage::instance::{LcpProgress, LdmConfig, LdmError, LdmInstance};
use storage::locks::{OpId, TxId};
use storage::memory::PagePool;
use storage::ordered_index::Direction;
use storage::Gci;

const TABLE: u32 = 7;
const INDEX_N: u32 = 71;
const INDEX_D: u32 = 72;
/// Keys of the property test: few, so that writes and deletes collide.
const KEYS: u64 = 12;

fn varchar(max: u16) -> ColumnType {
    ColumnType::VarChar {
        max,
        collation: Collation::Utf8mb4Bin,
    }
}

fn ordered(name: &str, id: u32, column: usize) -> IndexDef {
    IndexDef {
        name: name.into(),
        id,
        columns: vec![column],
        kind: IndexKind::Ordered,
    }
}

/// The table at `version` (1 to 3), as the dictionary's alters make it.
fn table(version: u32) -> TableDef {
    let mut columns = vec![
        Column::new("k", ColumnType::BigInt { unsigned: true }),
        Column::new("n", ColumnType::Int { unsigned: false }),
        Column::new("s", varchar(40)).nullable(),
    ];
    let mut indexes = vec![ordered("n", INDEX_N, 1)];
    if version >= 2 {
        columns.push(
            Column::new("d", ColumnType::Int { unsigned: false }).with_default(Value::Int(7)),
        );
        columns.push(Column::new("e", varchar(10)).nullable());
    }
    if version >= 3 {
        columns.push(
            Column::new("f", ColumnType::BigInt { unsigned: false })
                .nullable()
                .with_default(Value::Int(-1)),
        );
        indexes = vec![ordered("d", INDEX_D, 3)];
    }
    let mut def = TableDef::new("t", TABLE, columns).primary_key(vec![0]);
    for index in indexes {
        def = def.index(index);
    }
    let mut def = def.build().unwrap();
    def.version = version;
    def
}

/// A row of `version` padded to `columns` with the added columns'
/// defaults: what an older row reads as after the alters.
fn padded(row: &[Value], columns: usize) -> Vec<Value> {
    let defaults = [Value::Int(7), Value::Null, Value::Int(-1)];
    let mut row = row.to_vec();
    while row.len() < columns {
        row.push(defaults[row.len() - 3].clone());
    }
    row
}

fn row_v(k: u64, n: i64, version: u32) -> Vec<Value> {
    let mut row = vec![
        Value::UInt(k),
        Value::Int(n),
        Value::String(format!("s{n}")),
    ];
    if version >= 2 {
        row.push(Value::Int(n * 10));
        row.push(if n % 2 == 0 {
            Value::Null
        } else {
            Value::String(format!("e{n}"))
        });
    }
    if version >= 3 {
        row.push(Value::Int(n * 100));
    }
    row
}

fn read(fragment: &mut Fragment, pool: &PagePool, k: u64) -> Option<Vec<Value>> {
    let mut buf = RowBuf::new();
    match fragment
        .read(pool, &[Value::UInt(k)], ReadMode::Committed, &mut buf)
        .unwrap()
    {
        Outcome::Done => {
            let layout = fragment.layout();
            Some(
                (0..layout.column_count())
                    .map(|c| buf.value(layout, c).to_value())
                    .collect(),
            )
        }
        Outcome::NotFound => None,
        Outcome::Waiting => panic!("a committed read waits"),
    }
}

/// Every row of a scan of `range`, in scan order.
fn scan(fragment: &Fragment, pool: &PagePool, range: ScanRange) -> Vec<Vec<Value>> {
    let columns: Vec<usize> = (0..fragment.layout().column_count()).collect();
    let spec = ScanSpec {
        range,
        columns: columns.clone(),
    };
    let mut cursor = ScanCursor::new();
    let mut batch = ScanBatch::new();
    let mut rows = Vec::new();
    loop {
        let progress = fragment
            .scan(pool, &spec, &mut cursor, 7, &mut batch)
            .unwrap();
        for i in 0..batch.len() {
            rows.push(
                (0..columns.len())
                    .map(|j| batch.value(fragment.layout(), i, j).to_value())
                    .collect(),
            );
        }
        if progress == ScanProgress::Done {
            return rows;
        }
    }
}

fn ordered_range(index_id: u32, lower: Bound<i64>, upper: Bound<i64>) -> ScanRange {
    let map = |b: Bound<i64>| match b {
        Bound::Included(v) => Bound::Included(vec![Value::Int(v)]),
        Bound::Excluded(v) => Bound::Excluded(vec![Value::Int(v)]),
        Bound::Unbounded => Bound::Unbounded,
    };
    ScanRange::Ordered {
        index_id,
        lower: map(lower),
        upper: map(upper),
        direction: Direction::Ascending,
    }
}

fn insert_committed(fragment: &mut Fragment, pool: &mut PagePool, tx: u64, rows: &[Vec<Value>]) {
    for (i, row) in rows.iter().enumerate() {
        let outcome = fragment
            .insert(pool, TxId(tx), OpId(i as u32), row)
            .unwrap();
        assert_eq!(outcome, Outcome::Done);
    }
    let mut redo: Vec<(Gci, Vec<u8>)> = Vec::new();
    let mut grants = Vec::new();
    fragment
        .commit(pool, TxId(tx), 1, &mut redo, &mut grants)
        .unwrap();
}

#[test]
fn added_columns_read_as_their_defaults_and_new_rows_carry_them() {
    let mut pool = PagePool::with_budget_bytes(16 << 20);
    let mut fragment = Fragment::new(&table(1), 0);
    let rows: Vec<Vec<Value>> = (0..500).map(|k| row_v(k, k as i64 % 50, 1)).collect();
    insert_committed(&mut fragment, &mut pool, 1, &rows);

    // A transaction on the fragment: the alter is refused, nothing changes.
    let outcome = fragment
        .update(
            &mut pool,
            TxId(2),
            OpId(0),
            &[Value::UInt(3)],
            &[(1, Value::Int(-3))],
        )
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    let error = fragment.alter(&mut pool, &table(2)).unwrap_err();
    assert!(
        matches!(
            error,
            FragmentError::AlterBusy {
                transactions: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.is_temporary());
    assert_eq!(fragment.table_version(), 1);
    let mut grants = Vec::new();
    fragment.abort(&mut pool, TxId(2), &mut grants);

    // A changed column (a rename alone would be allowed): refused.
    let mut changed = table(2);
    changed.columns[1].nullable = !changed.columns[1].nullable;
    let error = fragment.alter(&mut pool, &changed).unwrap_err();
    assert!(matches!(error, FragmentError::BadAlter { .. }), "{error}");
    assert!(error.to_string().contains("appended at the end"), "{error}");

    let outcome = fragment.alter(&mut pool, &table(2)).unwrap();
    assert!(outcome.rows_rewritten);
    assert_eq!(
        (outcome.rows, outcome.indexes_built, outcome.indexes_dropped),
        (500, 0, 0)
    );
    assert_eq!(fragment.table_version(), 2);
    assert_eq!(fragment.layout().column_count(), 5);
    fragment.check_invariants(&pool);
    for k in [0u64, 17, 499] {
        let got = read(&mut fragment, &pool, k).unwrap();
        assert_eq!(got, padded(&rows[k as usize], 5), "key {k}");
    }
    // The kept ordered index still orders the (rewritten) rows.
    let n_7 = scan(
        &fragment,
        &pool,
        ordered_range(INDEX_N, Bound::Included(7), Bound::Included(7)),
    );
    assert_eq!(n_7.len(), 10);
    assert!(n_7
        .iter()
        .all(|r| r[1] == Value::Int(7) && r[3] == Value::Int(7)));

    // New rows carry the new columns; an update changes one of them.
    insert_committed(&mut fragment, &mut pool, 3, &[row_v(1000, 3, 2)]);
    fragment
        .update(
            &mut pool,
            TxId(4),
            OpId(0),
            &[Value::UInt(5)],
            &[(3, Value::Int(55)), (4, Value::String("x".into()))],
        )
        .unwrap();
    fragment
        .commit(&mut pool, TxId(4), 2, &mut Vec::new(), &mut grants)
        .unwrap();
    assert_eq!(read(&mut fragment, &pool, 1000), Some(row_v(1000, 3, 2)));
    let five = read(&mut fragment, &pool, 5).unwrap();
    assert_eq!(five[3..], [Value::Int(55), Value::String("x".into())]);
    // The same definition again changes nothing.
    let again = fragment.alter(&mut pool, &table(2)).unwrap();
    assert!(!again.rows_rewritten);
    assert_eq!(fragment.table_version(), 2);
    fragment.check_invariants(&pool);
    fragment.release(&mut pool);
    assert_eq!(pool.used_bytes(), 0, "every page back in the pool");
}

#[test]
fn an_ordered_index_added_to_a_populated_fragment_scans_right_and_a_dropped_one_frees_memory() {
    let mut pool = PagePool::with_budget_bytes(16 << 20);
    let mut fragment = Fragment::new(&table(2), 0);
    // d = n * 10 for n in 0..100, three rows each.
    let rows: Vec<Vec<Value>> = (0..300).map(|k| row_v(k, k as i64 % 100, 2)).collect();
    insert_committed(&mut fragment, &mut pool, 1, &rows);
    let before = fragment.memory_bytes();
    let pages_before = pool.used_bytes();

    // v3 also appends `f`, so the rows are rewritten; go through an
    // index-only version first to see a build without a rewrite.
    let mut index_only = table(2);
    index_only.version = 3;
    index_only.indexes.push(ordered("d", INDEX_D, 3));
    let outcome = fragment.alter(&mut pool, &index_only).unwrap();
    assert!(!outcome.rows_rewritten, "no column added: rows stay");
    assert_eq!((outcome.indexes_built, outcome.indexes_dropped), (1, 0));
    assert_eq!(pool.used_bytes(), pages_before, "no row moved");
    fragment.check_invariants(&pool);
    let got = scan(
        &fragment,
        &pool,
        ordered_range(INDEX_D, Bound::Included(150), Bound::Excluded(300)),
    );
    let ds: Vec<i64> = got
        .iter()
        .map(|r| match r[3] {
            Value::Int(d) => d,
            ref v => panic!("{v:?}"),
        })
        .collect();
    let mut expected: Vec<i64> = (15..30).flat_map(|n| [n * 10; 3]).collect();
    expected.sort_unstable();
    assert_eq!(ds, expected, "the range of the new index, in order");
    let descending = ScanRange::Ordered {
        index_id: INDEX_D,
        lower: Bound::Unbounded,
        upper: Bound::Included(vec![Value::Int(20)]),
        direction: Direction::Descending,
    };
    let low: Vec<Value> = scan(&fragment, &pool, descending)
        .iter()
        .map(|r| r[3].clone())
        .collect();
    assert_eq!(
        low,
        [20, 20, 20, 10, 10, 10, 0, 0, 0].map(Value::Int).to_vec()
    );
    let with_both = fragment.memory_bytes();
    assert!(with_both > before, "the new index takes memory");

    // Drop the index on `n`: its memory goes.
    let mut dropped = index_only.clone();
    dropped.version = 4;
    dropped.indexes.retain(|i| i.id != INDEX_N);
    let outcome = fragment.alter(&mut pool, &dropped).unwrap();
    assert_eq!((outcome.indexes_built, outcome.indexes_dropped), (0, 1));
    assert!(
        fragment.memory_bytes() < with_both,
        "{} bytes with both indexes, {} after the drop",
        with_both,
        fragment.memory_bytes()
    );
    let error = fragment
        .scan(
            &pool,
            &ScanSpec {
                range: ordered_range(INDEX_N, Bound::Unbounded, Bound::Unbounded),
                columns: vec![0],
            },
            &mut ScanCursor::new(),
            10,
            &mut ScanBatch::new(),
        )
        .unwrap_err();
    assert!(
        matches!(error, FragmentError::NoSuchIndex { .. }),
        "{error}"
    );
    fragment.check_invariants(&pool);
}

// ----- the property test -----

#[derive(Clone, Debug)]
enum Op {
    /// Insert or replace key `k` with a row of `n`.
    Write(u64, i64),
    /// Set `n` (and `d` once it exists) of key `k`.
    Update(u64, i64),
    Delete(u64),
}

#[derive(Clone, Debug)]
enum Step {
    Tx {
        ops: Vec<Op>,
        commit: bool,
    },
    Flush,
    StartLcp,
    LcpSteps(u8),
    /// The next alter (to v2, then v3; none after).
    Alter,
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    let op = prop_oneof![
        3 => (0..KEYS, -20i64..20).prop_map(|(k, n)| Op::Write(k, n)),
        2 => (0..KEYS, -20i64..20).prop_map(|(k, n)| Op::Update(k, n)),
        1 => (0..KEYS).prop_map(Op::Delete),
    ];
    prop_oneof![
        8 => (prop::collection::vec(op, 1..5), prop::bool::weighted(0.85))
            .prop_map(|(ops, commit)| Step::Tx { ops, commit }),
        2 => Just(Step::Flush),
        1 => Just(Step::StartLcp),
        2 => (1u8..6).prop_map(Step::LcpSteps),
        1 => Just(Step::Alter),
        1 => Just(Step::Crash),
    ]
}

/// An instance, the definition the dictionary holds and the model.
struct World {
    disk: SimDisk,
    config: LdmConfig,
    ldm: Option<LdmInstance>,
    version: u32,
    gci: Gci,
    flushed: Option<Gci>,
    /// Committed changes: (GCI, key, row as written, or deleted).
    history: Vec<(Gci, u64, Option<Vec<Value>>)>,
    next_tx: u64,
    crashes: u32,
    alters: u32,
    lcps_completed: u32,
    /// Restarts that converted something of an older version.
    converted_restarts: u32,
}

impl World {
    fn new(seed: u64) -> World {
        let mut world = World {
            disk: SimDisk::new(seed),
            config: LdmConfig {
                instance: 0,
                dir: "/data/ndb_3_fs/ldm0".into(),
                data_memory_bytes: 8 << 20,
                redo_file_size_bytes: 256 << 10,
                redo_files: 4,
                redo_earlier_files: None,
                lcp_pages_per_step: 1,
            },
            ldm: None,
            version: 1,
            gci: 1,
            flushed: None,
            history: Vec::new(),
            next_tx: 1,
            crashes: 0,
            alters: 0,
            lcps_completed: 0,
            converted_restarts: 0,
        };
        world.open();
        world
    }

    fn ldm(&mut self) -> &mut LdmInstance {
        self.ldm.as_mut().expect("open")
    }

    /// The committed rows at `gci` (all when `None`), read as the current
    /// version reads them.
    fn model(&self, upto: Option<Gci>) -> BTreeMap<u64, Vec<Value>> {
        let columns = table(self.version).columns.len();
        let mut rows = BTreeMap::new();
        for (gci, k, row) in &self.history {
            if upto.is_some_and(|g| *gci > g) {
                continue;
            }
            match row {
                Some(row) => rows.insert(*k, padded(row, columns)),
                None => rows.remove(k),
            };
        }
        rows
    }

    /// Opens the instance under the current definition at the last
    /// flushed GCI and checks it against the model there.
    fn open(&mut self) {
        let def = table(self.version);
        let (ldm, report) = LdmInstance::open(
            self.disk.clone(),
            self.config.clone(),
            &[(def, 0)],
            self.flushed,
        )
        .unwrap_or_else(|e| {
            panic!(
                "open at version {} after {} crashes: {e}",
                self.version, self.crashes
            )
        });
        assert_eq!(report.recovered_gci, self.flushed, "{report}");
        self.ldm = Some(ldm);
        let flushed = self.flushed;
        self.history
            .retain(|(g, ..)| flushed.is_some_and(|f| *g <= f));
        self.gci = flushed.unwrap_or(0) + 1;
        self.check();
    }

    /// The fragment equals the model: every key, a full scan, an ordered
    /// scan of every index of the current version, the invariants.
    fn check(&mut self) {
        let model = self.model(None);
        let version = self.version;
        let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(TABLE, 0).unwrap();
        assert_eq!(fragment.table_version(), version);
        fragment.check_invariants(pool);
        for k in 0..KEYS {
            assert_eq!(read(fragment, pool, k), model.get(&k).cloned(), "key {k}");
        }
        let mut full = scan(fragment, pool, ScanRange::Full);
        full.sort_by_key(|r| match r[0] {
            Value::UInt(k) => k,
            _ => unreachable!(),
        });
        assert_eq!(full, model.values().cloned().collect::<Vec<_>>());
        let (index, column) = if version >= 3 {
            (INDEX_D, 3)
        } else {
            (INDEX_N, 1)
        };
        let by_index = scan(
            fragment,
            pool,
            ordered_range(index, Bound::Unbounded, Bound::Unbounded),
        );
        assert_eq!(by_index.len(), model.len());
        let keys: Vec<i64> = by_index
            .iter()
            .map(|r| match r[column] {
                Value::Int(v) => v,
                ref v => panic!("{v:?}"),
            })
            .collect();
        assert!(keys.is_sorted(), "index {index} order: {keys:?}");
    }

    fn flush(&mut self) {
        let gci = self.gci;
        self.ldm().flush_gci(gci).unwrap();
        self.flushed = Some(gci);
        self.gci += 1;
    }

    fn run_lcp(&mut self) {
        self.ldm().start_lcp().unwrap();
        for _ in 0..100_000 {
            match self.ldm().lcp_step().unwrap() {
                LcpProgress::Completed { .. } => {
                    self.lcps_completed += 1;
                    return;
                }
                LcpProgress::AwaitingGci { .. } => self.flush(),
                LcpProgress::Writing { .. } => {}
                LcpProgress::Idle => panic!("the round vanished"),
                LcpProgress::Syncing { .. } => panic!("lcp_step syncs on its own thread"),
            }
        }
        panic!("the LCP round does not end");
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Tx { ops, commit } => self.transaction(ops, *commit),
            Step::Flush => self.flush(),
            Step::StartLcp => self.ldm().start_lcp().unwrap(),
            Step::LcpSteps(n) => {
                for _ in 0..*n {
                    if let LcpProgress::Completed { .. } = self.ldm().lcp_step().unwrap() {
                        self.lcps_completed += 1;
                    }
                }
            }
            Step::Alter => {
                if self.version < 3 {
                    // The dictionary's commit: from now on restarts use it.
                    self.version += 1;
                    self.alters += 1;
                    let def = table(self.version);
                    let outcome = self.ldm().alter_fragment(&def, 0).unwrap();
                    assert_eq!(outcome.rows, self.model(None).len() as u64);
                    assert!(outcome.rows_rewritten, "both alters add columns");
                    self.check();
                }
            }
            Step::Crash => self.crash(),
        }
    }

    fn crash(&mut self) {
        let older_on_disk = self.alters > 0;
        self.ldm = None;
        self.disk.crash();
        self.crashes += 1;
        self.open();
        self.converted_restarts += u32::from(older_on_disk);
    }

    fn transaction(&mut self, ops: &[Op], commit: bool) {
        let tx = TxId(self.next_tx);
        self.next_tx += 1;
        let version = self.version;
        let mut view = self.model(None);
        let mut changed: BTreeMap<u64, Option<Vec<Value>>> = BTreeMap::new();
        let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(TABLE, 0).unwrap();
        for (i, op) in ops.iter().enumerate() {
            let op_id = OpId(i as u32);
            match *op {
                Op::Write(k, n) => {
                    let row = row_v(k, n, version);
                    let outcome = fragment.write(pool, tx, op_id, &row).unwrap();
                    assert_eq!(outcome, Outcome::Done);
                    view.insert(k, row.clone());
                    changed.insert(k, Some(row));
                }
                Op::Update(k, n) => {
                    let mut changes = vec![(1, Value::Int(n))];
                    if version >= 2 {
                        changes.push((3, Value::Int(-n)));
                    }
                    let outcome = fragment
                        .update(pool, tx, op_id, &[Value::UInt(k)], &changes)
                        .unwrap();
                    match view.get_mut(&k) {
                        Some(row) => {
                            assert_eq!(outcome, Outcome::Done);
                            for (c, v) in changes {
                                row[c] = v;
                            }
                            changed.insert(k, Some(row.clone()));
                        }
                        None => assert_eq!(outcome, Outcome::NotFound, "update of absent {k}"),
                    }
                }
                Op::Delete(k) => {
                    let outcome = fragment.delete(pool, tx, op_id, &[Value::UInt(k)]).unwrap();
                    match view.remove(&k) {
                        Some(_) => {
                            assert_eq!(outcome, Outcome::Done);
                            changed.insert(k, None);
                        }
                        None => assert_eq!(outcome, Outcome::NotFound, "delete of absent {k}"),
                    }
                }
            }
        }
        let mut grants = Vec::new();
        if !commit {
            fragment.abort(pool, tx, &mut grants);
            return;
        }
        let gci = self.gci;
        match self.ldm().commit(TABLE, 0, tx, gci, &mut grants) {
            Ok(()) => {}
            Err(e @ LdmError::Fragment { .. }) if e.is_temporary() => {
                panic!("the redo log is sized not to fill: {e}")
            }
            Err(e) => panic!("commit: {e}"),
        }
        for (k, row) in changed {
            self.history.push((gci, k, row));
        }
    }
}

fn case() -> impl Strategy<Value = (u64, Vec<Step>)> {
    (any::<u64>(), prop::collection::vec(step(), 10..60))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        rng_seed: RngSeed::Fixed(0xA17E4),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn recovery_across_alters_equals_the_model_at_the_recovered_gci(
        (seed, steps) in case()
    ) {
        let mut world = World::new(seed);
        for step in &steps {
            world.step(step);
        }
        world.check();
        // Both alters, then a last crash after a final flush: everything
        // committed survives, older rows converted.
        world.step(&Step::Alter);
        world.step(&Step::Alter);
        world.flush();
        let committed = world.model(None);
        world.crash();
        prop_assert_eq!(world.model(None), committed);
        prop_assert_eq!(world.version, 3);
    }
}

/// The cases reach what the test is for: restarts after alters, with
/// checkpoints completed.
#[test]
fn the_workload_crashes_after_alters_and_completes_checkpoints() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        rng_seed: RngSeed::Fixed(0xA17E4),
        ..ProptestConfig::default()
    });
    let (mut converted, mut lcps, mut crashes) = (0, 0, 0);
    for _ in 0..24 {
        let (seed, steps) = case().new_tree(&mut runner).unwrap().current();
        let mut world = World::new(seed);
        for step in &steps {
            world.step(step);
        }
        converted += world.converted_restarts;
        lcps += world.lcps_completed;
        crashes += world.crashes;
    }
    eprintln!("{converted} restarts after alters, {lcps} LCP rounds, {crashes} crashes");
    assert!(
        converted >= 8 && lcps >= 8 && crashes >= 12,
        "{converted} restarts after alters, {lcps} LCP rounds, {crashes} crashes"
    );
}

/// A checkpoint taken before an alter, and redo records from both sides of
/// it, restore into the new definition.
#[test]
fn a_checkpoint_of_an_older_version_is_restored_converted() {
    let mut world = World::new(6);
    world.transaction(&[Op::Write(1, 1), Op::Write(2, 2), Op::Write(3, 3)], true);
    world.flush();
    world.run_lcp();
    world.transaction(&[Op::Write(4, 4)], true);
    world.step(&Step::Alter);
    world.transaction(&[Op::Update(2, 9), Op::Delete(3), Op::Write(5, 5)], true);
    world.flush();
    world.ldm = None;
    world.disk.crash();
    let (ldm, report) = LdmInstance::open(
        world.disk.clone(),
        world.config.clone(),
        &[(table(2), 0)],
        world.flushed,
    )
    .unwrap();
    let fragment = &report.fragments[0];
    assert!(
        fragment.lcp_id.is_some(),
        "restored from the version-1 LCP: {report}"
    );
    assert_eq!(fragment.rows_from_lcp, 3, "{report}");
    assert!(
        fragment.records_replayed >= 4,
        "records of both versions: {report}"
    );
    world.ldm = Some(ldm);
    world.check();
    let (fragment, pool) = world.ldm().fragment(TABLE, 0).unwrap();
    assert_eq!(read(fragment, pool, 1), Some(padded(&row_v(1, 1, 1), 5)));
    assert_eq!(
        read(fragment, pool, 2).unwrap()[1..4],
        [Value::Int(9), Value::String("s2".into()), Value::Int(-9)]
    );
    assert_eq!(read(fragment, pool, 3), None);
    assert_eq!(read(fragment, pool, 5), Some(row_v(5, 5, 2)));
}

/// A restart under a definition older than what is on disk cannot convert
/// anything: the open says why.
#[test]
fn a_restart_into_an_older_definition_is_refused() {
    let mut world = World::new(5);
    world.transaction(&[Op::Write(1, 1), Op::Write(2, 2)], true);
    world.step(&Step::Alter);
    world.flush();
    world.run_lcp();
    world.ldm = None;
    let error = LdmInstance::open(
        world.disk.clone(),
        world.config.clone(),
        &[(table(1), 0)],
        world.flushed,
    )
    .unwrap_err();
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
}
