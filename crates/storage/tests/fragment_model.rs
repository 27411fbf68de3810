//! The fragment against a model: random operations of several interleaved
//! transactions, random commits and aborts, on few keys (so that they
//! collide and wait) and, in some cases, a `DataMemory` small enough to
//! run out. The model is a `BTreeMap` of committed rows plus one overlay
//! of pending changes per transaction; a lock wait is "retry later": the
//! operation is parked and retried when the fragment grants its lock.
//!
//! Checked after every step: committed reads of every key equal the
//! model's committed state, an operation that completes sees the
//! transaction's own writes, and every invariant between the fragment's
//! parts holds. At the end (all transactions over): the fragment equals the
//! model through reads, a full scan and ordered scans over both indexes in
//! both directions, and replaying the captured redo into a fresh fragment
//! gives the same rows.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef, Value};
use storage::fragment::{
    Fragment, FragmentError, Outcome, ReadMode, RowBuf, ScanBatch, ScanCursor, ScanProgress,
    ScanRange, ScanSpec,
};
use storage::locks::{Grant, OpId, TxId};
use storage::memory::PagePool;
use storage::ordered_index::Direction;
use storage::Gci;

const KEYS: u64 = 10;
const TXS: usize = 4;
const INDEX_A: u32 = 1;
const INDEX_S: u32 = 2;

fn table() -> TableDef {
    TableDef::new(
        "model",
        3,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: true }),
            Column::new("a", ColumnType::SmallInt { unsigned: false }).nullable(),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 400,
                    collation: Collation::Utf8mb4GeneralCi,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "a".into(),
        id: INDEX_A,
        columns: vec![1],
        kind: IndexKind::Ordered,
    })
    .index(IndexDef {
        name: "s".into(),
        id: INDEX_S,
        columns: vec![2],
        kind: IndexKind::Ordered,
    })
    .build()
    .unwrap()
}

/// The non-key columns of a row.
type Row = (Option<i64>, Option<String>);

fn values(k: u64, row: &Row) -> Vec<Value> {
    vec![
        Value::UInt(k),
        row.0.map_or(Value::Null, Value::Int),
        row.1.clone().map_or(Value::Null, Value::String),
    ]
}

fn from_values(values: &[Value]) -> (u64, Row) {
    let Value::UInt(k) = values[0] else {
        panic!("{values:?}")
    };
    let a = match values[1] {
        Value::Null => None,
        Value::Int(a) => Some(a),
        ref v => panic!("{v:?}"),
    };
    let s = match &values[2] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        v => panic!("{v:?}"),
    };
    (k, (a, s))
}

#[derive(Clone, Debug)]
enum TxOp {
    Insert(u64, Row),
    Write(u64, Row),
    /// New values for some of the non-key columns.
    Update(u64, Option<Option<i64>>, Option<Option<String>>),
    Delete(u64),
    Read(u64, bool),
}

#[derive(Clone, Debug)]
enum Step {
    Op(usize, TxOp),
    Commit(usize),
    Abort(usize),
}

fn string() -> impl Strategy<Value = Option<String>> {
    // Short and long, so that var parts grow and shrink; case differences
    // that the collation equates.
    prop_oneof![
        Just(None),
        Just(Some(String::new())),
        Just(Some("a".to_string())),
        Just(Some("A".to_string())),
        Just(Some("b".repeat(40))),
        Just(Some("c".repeat(400))),
    ]
}

fn row() -> impl Strategy<Value = Row> {
    (prop::option::of(-3..3i64), string())
}

fn tx_op() -> impl Strategy<Value = TxOp> {
    prop_oneof![
        3 => (0..KEYS, row()).prop_map(|(k, r)| TxOp::Insert(k, r)),
        1 => (0..KEYS, row()).prop_map(|(k, r)| TxOp::Write(k, r)),
        3 => (0..KEYS, prop::option::of(prop::option::of(-3..3i64)), prop::option::of(string()))
            .prop_map(|(k, a, s)| TxOp::Update(k, a, s)),
        2 => (0..KEYS).prop_map(TxOp::Delete),
        2 => (0..KEYS, any::<bool>()).prop_map(|(k, x)| TxOp::Read(k, x)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (0..TXS, tx_op()).prop_map(|(t, op)| Step::Op(t, op)),
        2 => (0..TXS).prop_map(Step::Commit),
        1 => (0..TXS).prop_map(Step::Abort),
    ]
}

struct Tx {
    id: TxId,
    overlay: BTreeMap<u64, Option<Row>>,
    /// The operation waiting for a lock, and its op id.
    parked: Option<(TxOp, OpId)>,
}

struct World {
    pool: PagePool,
    fragment: Fragment,
    committed: BTreeMap<u64, Row>,
    txs: Vec<Tx>,
    next_tx: u64,
    next_op: u32,
    gci: Gci,
    redo: Vec<(Gci, Vec<u8>)>,
    grants: Vec<Grant>,
    buf: RowBuf,
}

impl World {
    fn new(budget_pages: u32) -> World {
        let mut world = World {
            pool: PagePool::new(budget_pages),
            fragment: Fragment::new(&table(), 0),
            committed: BTreeMap::new(),
            txs: Vec::new(),
            next_tx: 1,
            next_op: 1,
            gci: 1,
            redo: Vec::new(),
            grants: Vec::new(),
            buf: RowBuf::new(),
        };
        for _ in 0..TXS {
            let tx = world.new_tx();
            world.txs.push(tx);
        }
        world
    }

    fn new_tx(&mut self) -> Tx {
        self.next_tx += 1;
        Tx {
            id: TxId(self.next_tx),
            overlay: BTreeMap::new(),
            parked: None,
        }
    }

    /// What transaction `t` sees of key `k`.
    fn view(&self, t: usize, k: u64) -> Option<Row> {
        match self.txs[t].overlay.get(&k) {
            Some(pending) => pending.clone(),
            None => self.committed.get(&k).cloned(),
        }
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Op(t, op) => {
                if self.txs[*t].parked.is_none() {
                    self.next_op += 1;
                    self.run(*t, op.clone(), OpId(self.next_op));
                }
            }
            Step::Commit(t) => {
                if self.txs[*t].parked.is_none() {
                    self.commit(*t);
                }
            }
            Step::Abort(t) => self.abort(*t),
        }
        self.check_committed();
        self.fragment.check_invariants(&self.pool);
    }

    /// Runs an operation of transaction `t`, parks it if it waits, and
    /// checks and applies its result otherwise.
    fn run(&mut self, t: usize, op: TxOp, op_id: OpId) {
        let tx = self.txs[t].id;
        let pool = &mut self.pool;
        let f = &mut self.fragment;
        let key = |k: u64| vec![Value::UInt(k)];
        let result = match &op {
            TxOp::Insert(k, row) => f.insert(pool, tx, op_id, &values(*k, row)),
            TxOp::Write(k, row) => f.write(pool, tx, op_id, &values(*k, row)),
            TxOp::Update(k, a, s) => {
                let mut changes = Vec::new();
                if let Some(a) = a {
                    changes.push((1, a.map_or(Value::Null, Value::Int)));
                }
                if let Some(s) = s {
                    changes.push((2, s.clone().map_or(Value::Null, Value::String)));
                }
                f.update(pool, tx, op_id, &key(*k), &changes)
            }
            TxOp::Delete(k) => f.delete(pool, tx, op_id, &key(*k)),
            TxOp::Read(k, exclusive) => {
                let mode = if *exclusive {
                    ReadMode::Exclusive { tx, op: op_id }
                } else {
                    ReadMode::Shared { tx, op: op_id }
                };
                f.read(pool, &key(*k), mode, &mut self.buf)
            }
        };
        if let Ok(Outcome::Waiting) = result {
            self.txs[t].parked = Some((op, op_id));
            return;
        }
        self.check_result(t, &op, result);
    }

    fn check_result(&mut self, t: usize, op: &TxOp, result: Result<Outcome, FragmentError>) {
        let k = match op {
            TxOp::Insert(k, _)
            | TxOp::Write(k, _)
            | TxOp::Update(k, ..)
            | TxOp::Delete(k)
            | TxOp::Read(k, _) => *k,
        };
        let seen = self.view(t, k);
        // Running out of memory changes nothing; only operations that may
        // take memory may run out.
        if let Err(FragmentError::TableFull { .. }) = result {
            assert!(
                matches!(op, TxOp::Insert(..) | TxOp::Write(..) | TxOp::Update(..)),
                "{op:?}: table full"
            );
            return;
        }
        let new = match (op, &seen) {
            (TxOp::Insert(_, _), Some(_)) => {
                assert!(
                    matches!(result, Err(FragmentError::DuplicateKey { .. })),
                    "{op:?} over {seen:?}: {result:?}"
                );
                return;
            }
            (TxOp::Insert(_, row) | TxOp::Write(_, row), _) => Some(Some(row.clone())),
            (TxOp::Update(_, a, s), Some(old)) => Some(Some((
                a.unwrap_or(old.0),
                s.clone().unwrap_or_else(|| old.1.clone()),
            ))),
            (TxOp::Delete(_), Some(_)) => Some(None),
            (TxOp::Update(..) | TxOp::Delete(_), None) => None,
            (TxOp::Read(..), _) => {
                let outcome = result.unwrap();
                match &seen {
                    None => assert_eq!(outcome, Outcome::NotFound, "{op:?}"),
                    Some(row) => {
                        assert_eq!(outcome, Outcome::Done, "{op:?}");
                        assert_eq!(
                            self.read_buf(),
                            (k, row.clone()),
                            "{op:?} sees its own writes"
                        );
                    }
                }
                return;
            }
        };
        let outcome = result.unwrap_or_else(|e| panic!("{op:?} over {seen:?}: {e}"));
        match new {
            None => assert_eq!(outcome, Outcome::NotFound, "{op:?} over nothing"),
            Some(row) => {
                assert_eq!(outcome, Outcome::Done, "{op:?} over {seen:?}");
                self.txs[t].overlay.insert(k, row);
            }
        }
    }

    fn read_buf(&self) -> (u64, Row) {
        let layout = self.fragment.layout();
        let values: Vec<Value> = (0..3)
            .map(|c| self.buf.value(layout, c).to_value())
            .collect();
        from_values(&values)
    }

    fn commit(&mut self, t: usize) {
        self.gci += 1;
        let tx = self.txs[t].id;
        self.fragment
            .commit(
                &mut self.pool,
                tx,
                self.gci,
                &mut self.redo,
                &mut self.grants,
            )
            .unwrap();
        let ended = std::mem::replace(&mut self.txs[t], Tx::placeholder());
        for (k, row) in ended.overlay {
            match row {
                Some(row) => self.committed.insert(k, row),
                None => self.committed.remove(&k),
            };
        }
        self.txs[t] = self.new_tx();
        self.retry_granted();
    }

    fn abort(&mut self, t: usize) {
        let tx = self.txs[t].id;
        self.fragment.abort(&mut self.pool, tx, &mut self.grants);
        self.txs[t] = self.new_tx();
        self.retry_granted();
    }

    /// Retries the parked operations whose locks were granted.
    fn retry_granted(&mut self) {
        while let Some(grant) = self.grants.pop() {
            let Some(t) = self.txs.iter().position(|tx| tx.id == grant.tx) else {
                panic!("{grant:?} for a transaction that is over");
            };
            let (op, op_id) = self.txs[t].parked.take().expect("a granted tx waits");
            assert_eq!(op_id, grant.op, "the grant names the waiting operation");
            self.run(t, op, op_id);
        }
    }

    fn check_committed(&mut self) {
        for k in 0..KEYS {
            let outcome = self
                .fragment
                .read(
                    &self.pool,
                    &[Value::UInt(k)],
                    ReadMode::Committed,
                    &mut self.buf,
                )
                .unwrap();
            match self.committed.get(&k) {
                None => assert_eq!(outcome, Outcome::NotFound, "committed read of {k}"),
                Some(row) => {
                    assert_eq!(outcome, Outcome::Done, "committed read of {k}");
                    assert_eq!(self.read_buf(), (k, row.clone()), "committed read of {k}");
                }
            }
        }
    }

    /// Ends every transaction: commits those that do not wait (which may
    /// grant the waiting ones), and when only waiting ones are left aborts
    /// one of them (a deadlock's timeout); then commits what is left.
    fn finish(&mut self) {
        loop {
            for t in 0..TXS {
                if self.txs[t].parked.is_none() {
                    self.commit(t);
                    self.check_committed();
                }
            }
            match (0..TXS).find(|&t| self.txs[t].parked.is_some()) {
                Some(t) => self.abort(t),
                None => break,
            }
            self.check_committed();
            self.fragment.check_invariants(&self.pool);
        }
        for t in 0..TXS {
            self.commit(t);
        }
        self.check_committed();
        assert_eq!(self.fragment.transactions(), 0);
        assert_eq!(self.fragment.pending_rows(), 0);
        assert!(self.fragment.locks().is_empty());
    }
}

impl Tx {
    fn placeholder() -> Tx {
        Tx {
            id: TxId(0),
            overlay: BTreeMap::new(),
            parked: None,
        }
    }
}

fn scan(fragment: &Fragment, pool: &PagePool, range: ScanRange, batch: usize) -> Vec<(u64, Row)> {
    let spec = ScanSpec {
        range,
        columns: vec![0, 1, 2],
    };
    let mut cursor = ScanCursor::new();
    let mut out = ScanBatch::new();
    let mut rows = Vec::new();
    loop {
        let progress = fragment
            .scan(pool, &spec, &mut cursor, batch, &mut out)
            .unwrap();
        for i in 0..out.len() {
            let values: Vec<Value> = (0..3)
                .map(|j| out.value(fragment.layout(), i, j).to_value())
                .collect();
            rows.push(from_values(&values));
        }
        if progress == ScanProgress::Done {
            return rows;
        }
    }
}

fn ordered(index_id: u32, direction: Direction) -> ScanRange {
    ScanRange::Ordered {
        index_id,
        lower: Bound::Unbounded,
        upper: Bound::Unbounded,
        direction,
    }
}

/// The sort key of a row in index `s` (utf8mb4_general_ci, NULL first).
fn s_order(row: &Row) -> Option<String> {
    row.1
        .as_ref()
        .map(|s| Collation::Utf8mb4GeneralCi.sort_key(s))
}

/// Checks a fragment against the committed model through every way in.
fn check_equal(fragment: &Fragment, pool: &PagePool, model: &BTreeMap<u64, Row>) {
    fragment.check_invariants(pool);
    assert_eq!(fragment.row_count(), model.len() as u64);
    let expected: Vec<(u64, Row)> = model.iter().map(|(k, r)| (*k, r.clone())).collect();
    let mut full = scan(fragment, pool, ScanRange::Full, 3);
    full.sort_by_key(|r| r.0);
    assert_eq!(full, expected, "full scan");
    for direction in [Direction::Ascending, Direction::Descending] {
        let by_a = scan(fragment, pool, ordered(INDEX_A, direction), 2);
        let by_s = scan(fragment, pool, ordered(INDEX_S, direction), 4);
        for (rows, name) in [(&by_a, "a"), (&by_s, "s")] {
            let mut sorted = rows.clone();
            sorted.sort_by_key(|r| r.0);
            assert_eq!(sorted, expected, "scan of index {name} {direction:?}");
        }
        let mut a_keys: Vec<Option<i64>> = by_a.iter().map(|r| r.1 .0).collect();
        let mut s_keys: Vec<Option<String>> = by_s.iter().map(|r| s_order(&r.1)).collect();
        if direction == Direction::Descending {
            a_keys.reverse();
            s_keys.reverse();
        }
        assert!(a_keys.is_sorted(), "index a {direction:?}: {a_keys:?}");
        assert!(s_keys.is_sorted(), "index s {direction:?}");
    }
    // A range: a in [-1, 1], descending.
    let range = ScanRange::Ordered {
        index_id: INDEX_A,
        lower: Bound::Included(vec![Value::Int(-1)]),
        upper: Bound::Included(vec![Value::Int(1)]),
        direction: Direction::Descending,
    };
    let mut in_range = scan(fragment, pool, range, 1);
    in_range.sort_by_key(|r| r.0);
    let expected_range: Vec<(u64, Row)> = expected
        .iter()
        .filter(|(_, r)| r.0.is_some_and(|a| (-1..=1).contains(&a)))
        .cloned()
        .collect();
    assert_eq!(in_range, expected_range, "range scan");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x5EED_F4A6),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn transactions_follow_the_model(
        budget_pages in prop_oneof![Just(3u32), Just(4), Just(256)],
        steps in prop::collection::vec(step(), 1..240),
    ) {
        // 3 pages: a fixed page, a var page and the hash index, so every
        // growing update runs out (its reserve page); 4: the second growing
        // update at a time runs out.
        let mut world = World::new(budget_pages);
        for step in &steps {
            world.step(step);
        }
        world.finish();
        check_equal(&world.fragment, &world.pool, &world.committed);

        let mut replayed = Fragment::new(&table(), 0);
        let mut pool = PagePool::new(256);
        let mut last_gci = 0;
        for (gci, record) in &world.redo {
            assert!(*gci >= last_gci, "records come in commit order");
            last_gci = *gci;
            replayed.apply_redo(&mut pool, record).unwrap();
        }
        check_equal(&replayed, &pool, &world.committed);
    }
}
