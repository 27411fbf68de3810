//! The property test of issue 3: an LDM instance against a model, through
//! crashes.
//!
//! Random transactions (insert, write, update, delete, locking and
//! committed reads, committed scans; commit or abort) run on one to three
//! tables of different column types (integers, a VARCHAR with a
//! case-insensitive collation — in one table part of the primary key —,
//! DECIMAL, DATE, nullable columns; one table with two fragments in the
//! instance), while a GCI counter advances, GCIs are flushed at random
//! points, local checkpoint rounds start and step, and the simulated disk
//! crashes at random points, tearing or losing what was not synced. After
//! each crash the instance is opened again with `restore_gci` = the last
//! GCI flushed, and must equal the model at that GCI — checked by reads of
//! every key, a full scan and an ordered scan of every index — and the run
//! goes on (several crash cycles per case). The redo log is small, so it
//! fills: a commit refused for lack of redo space is retried after a
//! checkpoint round, as the transaction coordinator will.
//!
//! The model: per table, the list of committed changes with their GCI; the
//! state at any GCI is that list replayed up to it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::RngSeed;
use schema::{
    distribution_hash, partition_of, Collation, Column, ColumnType, Date, Decimal, IndexDef,
    IndexKind, KeyEncoder, TableDef, Value,
};
use storage::disk::SimDisk;
use storage::fragment::{
    FragmentError, Outcome, ReadMode, RowBuf, ScanBatch, ScanCursor, ScanProgress, ScanRange,
    ScanSpec,
};
use storage::instance::{LcpProgress, LdmConfig, LdmError, LdmInstance};
use storage::locks::{OpId, TxId};
use storage::ordered_index::Direction;
use storage::Gci;

const DIR: &str = "/data/ndb_2_fs/ldm1";
/// Keys per table: few, so that inserts and deletes collide.
const KEYS: u64 = 10;

/// The three tables a case draws from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// `k BIGINT UNSIGNED` key, `a INT NULL`, `s VARCHAR(400) ci NULL`; two
    /// fragments; ordered indexes on `s` and `a`.
    A,
    /// `k INT` key, `d DECIMAL(8,2)`, `dt DATE NULL`; ordered indexes on
    /// `d` and `dt`.
    B,
    /// Key (`name VARCHAR(12) ci`, `n SMALLINT`), `v BIGINT`; ordered index
    /// on `v`.
    C,
}

impl Kind {
    fn table(self) -> TableDef {
        let ci = Collation::Utf8mb4GeneralCi;
        let index = |name: &str, id: u32, columns: Vec<usize>| IndexDef {
            name: name.into(),
            id,
            columns,
            kind: IndexKind::Ordered,
        };
        let mut table = match self {
            Kind::A => TableDef::new(
                "a",
                1,
                vec![
                    Column::new("k", ColumnType::BigInt { unsigned: true }),
                    Column::new("a", ColumnType::Int { unsigned: false }).nullable(),
                    Column::new(
                        "s",
                        ColumnType::VarChar {
                            max: 400,
                            collation: ci,
                        },
                    )
                    .nullable(),
                ],
            )
            .primary_key(vec![0])
            .index(index("s", 11, vec![2]))
            .index(index("a", 12, vec![1]))
            .partitions(2),
            Kind::B => TableDef::new(
                "b",
                2,
                vec![
                    Column::new("k", ColumnType::Int { unsigned: false }),
                    Column::new(
                        "d",
                        ColumnType::Decimal {
                            precision: 8,
                            scale: 2,
                        },
                    ),
                    Column::new("dt", ColumnType::Date).nullable(),
                ],
            )
            .primary_key(vec![0])
            .index(index("d", 21, vec![1]))
            .index(index("dt", 22, vec![2])),
            Kind::C => TableDef::new(
                "c",
                3,
                vec![
                    Column::new(
                        "name",
                        ColumnType::VarChar {
                            max: 12,
                            collation: ci,
                        },
                    ),
                    Column::new("n", ColumnType::SmallInt { unsigned: false }),
                    Column::new("v", ColumnType::BigInt { unsigned: false }),
                ],
            )
            .primary_key(vec![0, 1])
            .index(index("v", 31, vec![2])),
        }
        .build()
        .unwrap();
        table.version = 1;
        table
    }

    fn indexes(self) -> &'static [u32] {
        match self {
            Kind::A => &[11, 12],
            Kind::B => &[21, 22],
            Kind::C => &[31],
        }
    }
}

/// A model key: the primary key as SQL compares it (case folded).
type Key = String;
type Rows = BTreeMap<Key, Vec<Value>>;
/// A change an operation made to its transaction's view: the key, the new
/// row (or deleted), the fragment.
type Change = (Key, Option<Vec<Value>>, u32);
/// A transaction's pending changes: (table, key) → (new row or deleted,
/// fragment).
type Overlay = BTreeMap<(usize, Key), (Option<Vec<Value>>, u32)>;

/// The key values of a row (the primary-key columns, in key order).
fn key_values(kind: Kind, row: &[Value]) -> Vec<Value> {
    match kind {
        Kind::A | Kind::B => vec![row[0].clone()],
        Kind::C => vec![row[0].clone(), row[1].clone()],
    }
}

fn model_key(kind: Kind, key: &[Value]) -> Key {
    match (kind, key) {
        (Kind::A, [Value::UInt(k)]) => k.to_string(),
        (Kind::B, [Value::Int(k)]) => k.to_string(),
        (Kind::C, [Value::String(name), Value::Int(n)]) => {
            format!("{}|{n}", Collation::Utf8mb4GeneralCi.sort_key(name))
        }
        _ => panic!("{kind:?} key {key:?}"),
    }
}

/// What an ordered index orders by, as the model sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Null,
    Int(i64),
    Str(String),
    Dec(Decimal),
    Date(Date),
}

fn sort_key(index_id: u32, row: &[Value]) -> SortKey {
    let column = match index_id {
        11 => 2,
        12 | 21 => 1,
        22 | 31 => 2,
        _ => panic!("index {index_id}"),
    };
    match &row[column] {
        Value::Null => SortKey::Null,
        Value::Int(v) => SortKey::Int(*v),
        Value::String(s) => SortKey::Str(Collation::Utf8mb4GeneralCi.sort_key(s)),
        Value::Decimal(d) => SortKey::Dec(*d),
        Value::Date(d) => SortKey::Date(*d),
        v => panic!("{v:?}"),
    }
}

// ----- operations -----

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<Value>),
    Write(Vec<Value>),
    /// Key values, then (column, value) changes of non-key columns.
    Update(Vec<Value>, Vec<(usize, Value)>),
    Delete(Vec<Value>),
    /// A read under an exclusive lock (sees the transaction's own writes)
    /// or a committed read.
    Read(Vec<Value>, bool),
    /// A committed full scan of a fragment.
    Scan(u32),
}

#[derive(Clone, Debug)]
enum Step {
    Tx {
        ops: Vec<(usize, Op)>,
        commit: bool,
    },
    NextGci,
    Flush,
    WriteRedo,
    StartLcp,
    LcpSteps(u8),
    Crash,
    /// The next table of the case is created (its fragments added).
    AddTable,
}

fn ci_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["ab", "Ab", "AB", "xyz", "XyZ", "q"]).prop_map(str::to_string)
}

fn string() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(Value::String(String::new())),
        Just(Value::String("a".into())),
        Just(Value::String("A".into())),
        Just(Value::String("b".repeat(30))),
        Just(Value::String("C".repeat(390))),
        Just(Value::String("Ä b".into())),
    ]
}

fn date() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        3 => (1990u16..2030, 1u8..=12, 1u8..=28).prop_map(|(y, m, d)| Value::Date(Date::new(y, m, d))),
    ]
}

fn decimal() -> impl Strategy<Value = Value> {
    (-99_999i128..99_999).prop_map(|m| Value::Decimal(Decimal::from_scaled(m, 2).unwrap()))
}

fn key(kind: Kind) -> BoxedStrategy<Vec<Value>> {
    match kind {
        Kind::A => (0..KEYS).prop_map(|k| vec![Value::UInt(k)]).boxed(),
        Kind::B => (-(KEYS as i64) / 2..KEYS as i64 / 2)
            .prop_map(|k| vec![Value::Int(k)])
            .boxed(),
        Kind::C => (ci_name(), 0i64..2)
            .prop_map(|(name, n)| vec![Value::String(name), Value::Int(n)])
            .boxed(),
    }
}

fn row(kind: Kind) -> BoxedStrategy<Vec<Value>> {
    match kind {
        Kind::A => (
            key(kind),
            prop_oneof![Just(Value::Null), (-5i64..5).prop_map(Value::Int)],
            string(),
        )
            .prop_map(|(k, a, s)| vec![k[0].clone(), a, s])
            .boxed(),
        Kind::B => (key(kind), decimal(), date())
            .prop_map(|(k, d, dt)| vec![k[0].clone(), d, dt])
            .boxed(),
        Kind::C => (key(kind), -3i64..3)
            .prop_map(|(k, v)| vec![k[0].clone(), k[1].clone(), Value::Int(v)])
            .boxed(),
    }
}

fn changes(kind: Kind) -> BoxedStrategy<Vec<(usize, Value)>> {
    match kind {
        Kind::A => (
            prop::option::of(prop_oneof![
                Just(Value::Null),
                (-5i64..5).prop_map(Value::Int)
            ]),
            prop::option::of(string()),
        )
            .prop_map(|(a, s)| {
                let mut c = Vec::new();
                c.extend(a.map(|a| (1, a)));
                c.extend(s.map(|s| (2, s)));
                c
            })
            .boxed(),
        Kind::B => (prop::option::of(decimal()), prop::option::of(date()))
            .prop_map(|(d, dt)| {
                let mut c = Vec::new();
                c.extend(d.map(|d| (1, d)));
                c.extend(dt.map(|dt| (2, dt)));
                c
            })
            .boxed(),
        Kind::C => (-3i64..3).prop_map(|v| vec![(2, Value::Int(v))]).boxed(),
    }
}

fn op(kind: Kind) -> BoxedStrategy<Op> {
    prop_oneof![
        4 => row(kind).prop_map(Op::Insert),
        2 => row(kind).prop_map(Op::Write),
        3 => (key(kind), changes(kind)).prop_map(|(k, c)| Op::Update(k, c)),
        2 => key(kind).prop_map(Op::Delete),
        2 => (key(kind), any::<bool>()).prop_map(|(k, x)| Op::Read(k, x)),
        1 => (0u32..2).prop_map(Op::Scan),
    ]
    .boxed()
}

/// A transaction that writes every key of table A with a long string: the
/// redo log fills in a few dozen of them.
fn bulk(a: i64) -> Step {
    let ops = (0..KEYS)
        .map(|k| {
            let row = vec![
                Value::UInt(k),
                Value::Int(a),
                Value::String("L".repeat(380)),
            ];
            (0, Op::Write(row))
        })
        .collect();
    Step::Tx { ops, commit: true }
}

fn step(kinds: usize) -> impl Strategy<Value = Step> {
    let tx_op = (0..kinds).prop_flat_map(|t| {
        let kind = [Kind::A, Kind::B, Kind::C][t];
        op(kind).prop_map(move |op| (t, op))
    });
    prop_oneof![
        12 => (prop::collection::vec(tx_op, 1..6), prop::bool::weighted(0.85))
            .prop_map(|(ops, commit)| Step::Tx { ops, commit }),
        2 => (-5i64..5).prop_map(bulk),
        2 => Just(Step::NextGci),
        3 => Just(Step::Flush),
        1 => Just(Step::WriteRedo),
        2 => Just(Step::StartLcp),
        4 => (1u8..8).prop_map(Step::LcpSteps),
        1 => Just(Step::Crash),
        1 => Just(Step::AddTable),
    ]
}

/// A case: how many tables (and how many of them exist at the start; the
/// others are created along the way), whether LCP rounds start on their
/// own (without them the redo log fills, and only a refused commit starts
/// one), the steps, and the disk's seed.
#[derive(Clone, Debug)]
struct Case {
    kinds: usize,
    initial: usize,
    lcps: bool,
    steps: Vec<Step>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, prop::bool::weighted(0.75)).prop_flat_map(|(kinds, lcps)| {
        (
            1..=kinds,
            prop::collection::vec(step(kinds), 40..200),
            any::<u64>(),
        )
            .prop_map(move |(initial, steps, seed)| Case {
                kinds,
                initial,
                lcps,
                steps,
                seed,
            })
    })
}

// ----- the world: an instance and its model -----

struct World {
    disk: SimDisk,
    config: LdmConfig,
    kinds: Vec<Kind>,
    tables: Vec<TableDef>,
    /// Tables `..active` exist.
    active: usize,
    /// Whether `StartLcp` steps start rounds.
    lcps: bool,
    ldm: Option<LdmInstance>,
    /// The GCI of the next commit; always above `flushed`.
    gci: Gci,
    flushed: Option<Gci>,
    /// Committed changes: (GCI, table index, key, row or deleted).
    history: Vec<(Gci, usize, Key, Option<Vec<Value>>)>,
    next_tx: u64,
    buf: RowBuf,
    crashes: u32,
    lcps_completed: u32,
    redo_full: u32,
    /// Fragments restored from an LCP, and from a chain with partial LCPs.
    restored_from_lcp: u32,
    restored_from_chain: u32,
    /// Redo records a restart skipped because an LCP held them.
    records_in_checkpoints: u64,
    records_replayed: u64,
}

impl World {
    fn new(case: &Case) -> World {
        let (lcps, seed) = (case.lcps, case.seed);
        let kinds: Vec<Kind> = [Kind::A, Kind::B, Kind::C][..case.kinds].to_vec();
        let mut world = World {
            disk: SimDisk::new(seed),
            config: LdmConfig {
                instance: 1,
                dir: DIR.into(),
                data_memory_bytes: 8 << 20,
                redo_file_size_bytes: 64 << 10,
                redo_files: 1 + u32::from(lcps),
                redo_earlier_files: None,
                lcp_pages_per_step: 1,
            },
            tables: kinds.iter().map(|k| k.table()).collect(),
            kinds,
            active: case.initial,
            lcps,
            ldm: None,
            gci: 1,
            flushed: None,
            history: Vec::new(),
            next_tx: 1,
            buf: RowBuf::new(),
            crashes: 0,
            lcps_completed: 0,
            redo_full: 0,
            restored_from_lcp: 0,
            restored_from_chain: 0,
            records_in_checkpoints: 0,
            records_replayed: 0,
        };
        world.open();
        world
    }

    fn fragments(&self) -> Vec<(TableDef, u32)> {
        self.tables[..self.active]
            .iter()
            .flat_map(|t| (0..t.partitions).map(move |f| (t.clone(), f)))
            .collect()
    }

    /// Opens the instance at the last flushed GCI and checks it against the
    /// model there.
    fn open(&mut self) {
        let (ldm, report) = LdmInstance::open(
            self.disk.clone(),
            self.config.clone(),
            &self.fragments(),
            self.flushed,
        )
        .unwrap_or_else(|e| panic!("open after {} crashes: {e}", self.crashes));
        assert_eq!(report.recovered_gci, self.flushed, "{report}");
        assert_eq!(report.redo_complete_gci, self.flushed, "{report}");
        assert_eq!(report.records_of_other_fragments, 0);
        for f in &report.fragments {
            self.restored_from_lcp += u32::from(f.lcp_id.is_some());
            self.restored_from_chain += u32::from(f.lcp_chain.len() > 1);
        }
        self.records_in_checkpoints += report.records_in_checkpoints;
        self.records_replayed += report.records_replayed;
        self.ldm = Some(ldm);
        let flushed = self.flushed;
        self.history
            .retain(|(g, ..)| flushed.is_some_and(|f| *g <= f));
        // GCIs lost with the crash are used again.
        self.gci = flushed.unwrap_or(0) + 1;
        self.check_all();
    }

    fn ldm(&mut self) -> &mut LdmInstance {
        self.ldm.as_mut().expect("open")
    }

    /// The model's committed rows of table `t` (all GCIs).
    fn model(&self, t: usize) -> Rows {
        let mut rows = Rows::new();
        for (_, table, key, row) in &self.history {
            if *table == t {
                match row {
                    Some(row) => rows.insert(key.clone(), row.clone()),
                    None => rows.remove(key),
                };
            }
        }
        rows
    }

    fn fragment_of(&self, t: usize, key: &[Value]) -> u32 {
        let table = &self.tables[t];
        let mut bytes = Vec::new();
        KeyEncoder::distribution_key(table)
            .encode(key, &mut bytes)
            .unwrap();
        partition_of(distribution_hash(&bytes), table.partitions)
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Tx { ops, commit } => self.transaction(ops, *commit),
            Step::NextGci => self.gci += 1,
            Step::Flush => self.flush(),
            Step::WriteRedo => self.ldm().write_redo().unwrap(),
            Step::StartLcp if self.lcps => self.ldm().start_lcp().unwrap(),
            Step::StartLcp => {}
            Step::LcpSteps(n) => {
                for _ in 0..*n {
                    if let LcpProgress::Completed { .. } = self.ldm().lcp_step().unwrap() {
                        self.lcps_completed += 1;
                    }
                }
            }
            Step::AddTable => {
                if let Some(table) = self.tables.get(self.active).cloned() {
                    for f in 0..table.partitions {
                        self.ldm().add_fragment(&table, f).unwrap();
                    }
                    self.active += 1;
                }
            }
            Step::Crash => {
                self.ldm = None;
                self.disk.crash();
                self.crashes += 1;
                self.open();
            }
        }
    }

    fn flush(&mut self) {
        let gci = self.gci;
        self.ldm().flush_gci(gci).unwrap();
        self.flushed = Some(gci);
        self.gci += 1;
    }

    /// Runs the operations of one transaction against the instance and an
    /// overlay of the model, then commits or aborts it in every fragment it
    /// touched (changed or locked).
    fn transaction(&mut self, ops: &[(usize, Op)], commit: bool) {
        self.next_tx += 1;
        let tx = TxId(self.next_tx);
        let mut overlay = Overlay::new();
        let mut touched: Vec<(usize, u32)> = Vec::new();
        for (i, (t, op)) in ops.iter().enumerate() {
            if *t >= self.active {
                continue;
            }
            let op_id = OpId(i as u32 + 1);
            let (fragment, change) = self.run(tx, op_id, *t, op, &overlay);
            if let Some(f) = fragment {
                if !touched.contains(&(*t, f)) {
                    touched.push((*t, f));
                }
            }
            if let Some((key, row, f)) = change {
                overlay.insert((*t, key), (row, f));
            }
        }
        for &(t, f) in &touched {
            let id = self.tables[t].id;
            if !commit {
                self.ldm().abort(id, f, tx, &mut Vec::new()).unwrap();
                continue;
            }
            self.commit_fragment(tx, t, f);
            // The fragment's changes are committed in the GCI just used.
            let gci = self.gci;
            for ((table, key), (row, fragment)) in &overlay {
                if (*table, *fragment) == (t, f) {
                    self.history.push((gci, t, key.clone(), row.clone()));
                }
            }
        }
    }

    /// Commits one fragment of a transaction; a full redo log is a
    /// temporary error: make room (flush, checkpoint round) and retry in a
    /// new GCI, as a coordinator would.
    fn commit_fragment(&mut self, tx: TxId, t: usize, f: u32) {
        let id = self.tables[t].id;
        for _ in 0..4 {
            let gci = self.gci;
            let mut grants = Vec::new();
            match self.ldm().commit(id, f, tx, gci, &mut grants) {
                Ok(()) => {
                    assert!(grants.is_empty(), "one transaction at a time");
                    return;
                }
                Err(e) if e.is_temporary() => {
                    assert!(matches!(
                        &e,
                        LdmError::Fragment { source, .. }
                            if matches!(**source, FragmentError::RedoFull { .. })
                    ));
                    self.redo_full += 1;
                    self.make_room();
                }
                Err(e) => panic!("commit: {e}"),
            }
        }
        panic!("the redo log stays full after checkpoints");
    }

    fn make_room(&mut self) {
        self.flush();
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

    /// Runs one operation and checks its outcome against the model;
    /// returns the fragment it may have locked and the change it made to
    /// the transaction's view.
    fn run(
        &mut self,
        tx: TxId,
        op_id: OpId,
        t: usize,
        op: &Op,
        overlay: &Overlay,
    ) -> (Option<u32>, Option<Change>) {
        let kind = self.kinds[t];
        let id = self.tables[t].id;
        let committed = self.model(t);
        let view = |key: &Key| match overlay.get(&(t, key.clone())) {
            Some((pending, _)) => pending.clone(),
            None => committed.get(key).cloned(),
        };
        match op {
            Op::Scan(f) => {
                let f = f % self.tables[t].partitions;
                let rows = self.scan(t, f, ScanRange::Full);
                let expected: Rows = committed
                    .into_iter()
                    .filter(|(_, row)| self.fragment_of(t, &key_values(kind, row)) == f)
                    .collect();
                assert_eq!(rows, expected, "committed scan of {kind:?} fragment {f}");
                (None, None)
            }
            Op::Read(key, locking) => {
                let f = self.fragment_of(t, key);
                let mk = model_key(kind, key);
                let mode = if *locking {
                    ReadMode::Exclusive { tx, op: op_id }
                } else {
                    ReadMode::Committed
                };
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                let outcome = fragment.read(pool, key, mode, &mut self.buf).unwrap();
                let seen = (outcome == Outcome::Done).then(|| {
                    let layout = fragment.layout();
                    (0..3)
                        .map(|c| self.buf.value(layout, c).to_value())
                        .collect()
                });
                let expected = if *locking {
                    view(&mk)
                } else {
                    committed.get(&mk).cloned()
                };
                assert_eq!(seen, expected, "read of {kind:?} {key:?}");
                (locking.then_some(f), None)
            }
            Op::Insert(row) | Op::Write(row) => {
                let key = key_values(kind, row);
                let f = self.fragment_of(t, &key);
                let mk = model_key(kind, &key);
                let old = view(&mk);
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                let result = match op {
                    Op::Insert(_) => fragment.insert(pool, tx, op_id, row),
                    _ => fragment.write(pool, tx, op_id, row),
                };
                if matches!(op, Op::Insert(_)) && old.is_some() {
                    assert!(
                        matches!(result, Err(FragmentError::DuplicateKey { .. })),
                        "{op:?} over {old:?}: {result:?}"
                    );
                    return (Some(f), None);
                }
                assert_eq!(result.unwrap(), Outcome::Done, "{op:?}");
                (Some(f), Some((mk, Some(row.clone()), f)))
            }
            Op::Update(key, changes) => {
                let f = self.fragment_of(t, key);
                let mk = model_key(kind, key);
                let old = view(&mk);
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                let outcome = fragment.update(pool, tx, op_id, key, changes).unwrap();
                let Some(mut new) = old else {
                    assert_eq!(outcome, Outcome::NotFound, "{op:?}");
                    return (Some(f), None);
                };
                assert_eq!(outcome, Outcome::Done, "{op:?}");
                for (column, value) in changes {
                    new[*column] = value.clone();
                }
                (Some(f), Some((mk, Some(new), f)))
            }
            Op::Delete(key) => {
                let f = self.fragment_of(t, key);
                let mk = model_key(kind, key);
                let old = view(&mk);
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                let outcome = fragment.delete(pool, tx, op_id, key).unwrap();
                match old {
                    None => {
                        assert_eq!(outcome, Outcome::NotFound, "{op:?}");
                        (Some(f), None)
                    }
                    Some(_) => {
                        assert_eq!(outcome, Outcome::Done, "{op:?}");
                        (Some(f), Some((mk, None, f)))
                    }
                }
            }
        }
    }

    /// The committed rows of one fragment through a scan.
    fn scan(&mut self, t: usize, f: u32, range: ScanRange) -> Rows {
        let kind = self.kinds[t];
        let id = self.tables[t].id;
        let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
        let spec = ScanSpec {
            range,
            columns: vec![0, 1, 2],
        };
        let (mut cursor, mut batch) = (ScanCursor::new(), ScanBatch::new());
        let mut rows = Rows::new();
        let mut order = Vec::new();
        loop {
            let progress = fragment
                .scan(pool, &spec, &mut cursor, 7, &mut batch)
                .unwrap();
            for i in 0..batch.len() {
                let row: Vec<Value> = (0..3)
                    .map(|j| batch.value(fragment.layout(), i, j).to_value())
                    .collect();
                let key = model_key(kind, &key_values(kind, &row));
                order.push(row.clone());
                assert!(rows.insert(key, row).is_none(), "a key twice in a scan");
            }
            if progress == ScanProgress::Done {
                break;
            }
        }
        if let ScanRange::Ordered { index_id, .. } = spec.range {
            let keys: Vec<SortKey> = order.iter().map(|r| sort_key(index_id, r)).collect();
            assert!(keys.is_sorted(), "index {index_id} order: {keys:?}");
        }
        rows
    }

    /// Every table equals the model: reads of every key, a full scan and an
    /// ordered scan of every index, over all its fragments.
    fn check_all(&mut self) {
        for t in 0..self.active {
            let kind = self.kinds[t];
            let id = self.tables[t].id;
            let model = self.model(t);
            for f in 0..self.tables[t].partitions {
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                fragment.check_invariants(pool);
            }
            for range in std::iter::once(ScanRange::Full).chain(kind.indexes().iter().map(|&i| {
                ScanRange::Ordered {
                    index_id: i,
                    lower: std::ops::Bound::Unbounded,
                    upper: std::ops::Bound::Unbounded,
                    direction: Direction::Ascending,
                }
            })) {
                let mut all = Rows::new();
                for f in 0..self.tables[t].partitions {
                    all.extend(self.scan(t, f, range.clone()));
                }
                assert_eq!(
                    all, model,
                    "{kind:?} {range:?} after {} crashes",
                    self.crashes
                );
            }
            let keys: Vec<Vec<Value>> = match kind {
                Kind::A => (0..KEYS).map(|k| vec![Value::UInt(k)]).collect(),
                Kind::B => (-(KEYS as i64)..KEYS as i64)
                    .map(|k| vec![Value::Int(k)])
                    .collect(),
                Kind::C => ["AB", "xyz", "Q", "zz"]
                    .iter()
                    .flat_map(|s| {
                        (0..2).map(move |n| vec![Value::String(s.to_string()), Value::Int(n)])
                    })
                    .collect(),
            };
            for key in keys {
                let f = self.fragment_of(t, &key);
                let (fragment, pool) = self.ldm.as_mut().unwrap().fragment(id, f).unwrap();
                let outcome = fragment
                    .read(pool, &key, ReadMode::Committed, &mut self.buf)
                    .unwrap();
                let seen: Option<Vec<Value>> = (outcome == Outcome::Done).then(|| {
                    let layout = fragment.layout();
                    (0..3)
                        .map(|c| self.buf.value(layout, c).to_value())
                        .collect()
                });
                assert_eq!(
                    seen.as_ref(),
                    model.get(&model_key(kind, &key)),
                    "read of {kind:?} {key:?} after {} crashes",
                    self.crashes
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(0x1D_4EC0),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_recovered_state_equals_the_model_at_the_last_flushed_gci(
        case in case()
    ) {
        let mut world = World::new(&case);
        for step in &case.steps {
            world.step(step);
        }
        world.check_all();
        // A last crash, after a final flush: everything committed survives.
        world.flush();
        world.ldm = None;
        world.disk.crash();
        world.crashes += 1;
        let committed = (0..world.active).map(|t| world.model(t)).collect::<Vec<_>>();
        world.open();
        for (t, rows) in committed.iter().enumerate() {
            prop_assert_eq!(&world.model(t), rows);
        }
    }
}

/// The cases above reach what the test is for: crashes after checkpoints,
/// full redo logs, partial checkpoints restored.
#[test]
fn the_workload_reaches_checkpoints_full_logs_and_crashes() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        rng_seed: RngSeed::Fixed(0x1D_4EC0),
        ..ProptestConfig::default()
    });
    let mut totals = [0u64; 7];
    for _ in 0..48 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let mut world = World::new(&case);
        for step in &case.steps {
            world.step(step);
        }
        let counts = [
            u64::from(world.crashes),
            u64::from(world.lcps_completed),
            u64::from(world.redo_full),
            u64::from(world.restored_from_lcp),
            u64::from(world.restored_from_chain),
            world.records_in_checkpoints,
            world.records_replayed,
        ];
        for (total, count) in totals.iter_mut().zip(counts) {
            *total += count;
        }
    }
    let [crashes, lcps, full, from_lcp, from_chain, skipped, replayed] = totals;
    eprintln!(
        "{crashes} crashes, {lcps} LCP rounds, {full} full redo logs, {from_lcp} fragments \
         restored from an LCP ({from_chain} from a chain), {skipped} records in checkpoints, \
         {replayed} replayed"
    );
    assert!(crashes >= 12 && lcps >= 12 && full >= 1, "{totals:?}");
    assert!(
        from_lcp >= 12 && from_chain >= 3 && skipped > 0 && replayed > 0,
        "{totals:?}"
    );
}
