//! Unique indexes: operations by unique key and the upkeep of the index
//! tables by the TC, checked against a model.
//!
//! The cluster is the shared test harness (`common`: data nodes wired as
//! a real node, an API node that records every answer) with the TC
//! tests' calls (`common/transactions.rs`).

mod common;
#[path = "common/transactions.rs"]
mod transactions;

use common::*;
use transactions::*;

/// The unique-index test table `people (id BIGINT, u INT NULL, s VARCHAR(20)
/// utf8mb4_general_ci NULL, n INT NULL)` with unique indexes `by_u (u)` and
/// `by_s (s)`, and its hidden tables.
struct PeopleTables {
    base: TableDef,
    by_u: TableDef,
    by_s: TableDef,
}

impl PeopleTables {
    fn index_id(&self, name: &str) -> u32 {
        self.base
            .indexes
            .iter()
            .find(|i| i.name == name)
            .expect("an index of people")
            .id
    }
}

/// One key operation on `people`: by primary key (`by: None`, key = id) or
/// by a unique index (key = the index's value).
#[derive(Clone, Debug)]
struct KeyOp {
    kind: OpKind,
    lock: LockMode,
    by: Option<&'static str>,
    key: Value,
    /// Written columns: (1 = u, 2 = s, 3 = n).
    values: Vec<(u16, Value)>,
    flags: u8,
}

impl KeyOp {
    fn read(by: Option<&'static str>, key: Value) -> KeyOp {
        KeyOp {
            kind: OpKind::Read,
            lock: LockMode::Shared,
            by,
            key,
            values: Vec::new(),
            flags: 0,
        }
    }

    fn insert(id: i64, u: Option<i64>, s: Option<&str>, n: i64) -> KeyOp {
        KeyOp::write(OpKind::Insert, id, u, s, n)
    }

    fn write(kind: OpKind, id: i64, u: Option<i64>, s: Option<&str>, n: i64) -> KeyOp {
        KeyOp {
            kind,
            lock: LockMode::Exclusive,
            by: None,
            key: Value::Int(id),
            values: vec![(1, opt_int(u)), (2, opt_str(s)), (3, Value::Int(n))],
            flags: 0,
        }
    }

    fn update(by: Option<&'static str>, key: Value, values: Vec<(u16, Value)>) -> KeyOp {
        KeyOp {
            kind: OpKind::Update,
            lock: LockMode::Exclusive,
            by,
            key,
            values,
            flags: 0,
        }
    }

    fn delete(by: Option<&'static str>, key: Value) -> KeyOp {
        KeyOp {
            kind: OpKind::Delete,
            lock: LockMode::Exclusive,
            by,
            key,
            values: Vec::new(),
            flags: 0,
        }
    }

    fn ignoring(mut self) -> KeyOp {
        self.flags |= IGNORE_ERROR;
        self
    }
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| Value::String(s.to_string()))
}

/// A row of the model.
#[derive(Clone, Debug, PartialEq)]
struct Person {
    u: Option<i64>,
    s: Option<String>,
    n: i64,
}

impl Person {
    fn row(&self, id: i64) -> Vec<Value> {
        vec![
            Value::Int(id),
            opt_int(self.u),
            opt_str(self.s.as_deref()),
            Value::Int(self.n),
        ]
    }

    fn set(&mut self, values: &[(u16, Value)]) {
        for (c, v) in values {
            match (c, v) {
                (1, Value::Int(u)) => self.u = Some(*u),
                (1, Value::Null) => self.u = None,
                (2, Value::String(s)) => self.s = Some(s.clone()),
                (2, Value::Null) => self.s = None,
                (3, Value::Int(n)) => self.n = *n,
                other => panic!("not a value of people: {other:?}"),
            }
        }
    }
}

type People = BTreeMap<i64, Person>;

/// Equal under `utf8mb4_general_ci` (ASCII here): case and trailing
/// spaces do not count.
fn same_text(a: &str, b: &str) -> bool {
    a.trim_end().eq_ignore_ascii_case(b.trim_end())
}

/// What running `op` on `model` gives, in order: `Ok((code, row))` and the
/// model changed, or `Err(())` for a unique violation (the transaction
/// aborts).
fn model_apply(model: &mut People, op: &KeyOp) -> Result<(u32, Option<Vec<Value>>), ()> {
    let id = match (op.by, &op.key) {
        (None, Value::Int(id)) => Some(*id),
        (Some("by_u"), Value::Int(u)) => model
            .iter()
            .find(|(_, p)| p.u == Some(*u))
            .map(|(id, _)| *id),
        (Some("by_s"), Value::String(s)) => model
            .iter()
            .find(|(_, p)| p.s.as_deref().is_some_and(|t| same_text(t, s)))
            .map(|(id, _)| *id),
        (_, Value::Null) => None,
        other => panic!("bad op {other:?}"),
    };
    let violates = |model: &People, id: i64, p: &Person| {
        model.iter().any(|(other, q)| {
            *other != id
                && ((p.u.is_some() && p.u == q.u)
                    || p.s
                        .as_deref()
                        .is_some_and(|s| q.s.as_deref().is_some_and(|t| same_text(t, s))))
        })
    };
    let found = id.and_then(|id| model.get(&id).cloned().map(|p| (id, p)));
    match (op.kind, found) {
        (OpKind::Read, Some((id, p))) => Ok((0, Some(p.row(id)))),
        (OpKind::Read | OpKind::Update | OpKind::Delete, None) => Ok((error::NO_SUCH_ROW, None)),
        (OpKind::Insert, Some(_)) => Ok((error::DUPLICATE_KEY, None)),
        (OpKind::Insert | OpKind::Write, None) => {
            let id = id.expect("by primary key");
            let mut p = Person {
                u: None,
                s: None,
                n: 0,
            };
            p.set(&op.values);
            if violates(model, id, &p) {
                // An insert that ignores errors is taken back and answers
                // 893; anything else aborts the transaction.
                if op.kind == OpKind::Insert && op.flags & IGNORE_ERROR != 0 {
                    return Ok((error::UNIQUE_VIOLATION, None));
                }
                return Err(());
            }
            model.insert(id, p);
            Ok((0, None))
        }
        (OpKind::Update | OpKind::Write, Some((id, mut p))) => {
            p.set(&op.values);
            if violates(model, id, &p) {
                return Err(());
            }
            model.insert(id, p);
            Ok((0, None))
        }
        (OpKind::Delete, Some((id, _))) => {
            model.remove(&id);
            Ok((0, None))
        }
    }
}

impl Cluster {
    /// Creates `people` and reads back its group (base and hidden tables).
    fn create_people(&mut self) -> PeopleTables {
        let ci = schema::Collation::Utf8mb4GeneralCi;
        let table = TableDef::new(
            "people",
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("u", ColumnType::Int { unsigned: false }).nullable(),
                Column::new(
                    "s",
                    ColumnType::VarChar {
                        max: 20,
                        collation: ci,
                    },
                )
                .nullable(),
                Column::new("n", ColumnType::Int { unsigned: false }).nullable(),
            ],
        )
        .primary_key(vec![0])
        .index(IndexDef {
            name: "by_u".into(),
            id: 0,
            columns: vec![1],
            kind: IndexKind::Unique,
        })
        .index(IndexDef {
            name: "by_s".into(),
            id: 0,
            columns: vec![2],
            kind: IndexKind::Unique,
        })
        .partitions(PARTITIONS);
        let tables = self.create_table_group(table);
        let base = tables[0].clone();
        let hidden = |name: &str| {
            let id = base.indexes.iter().find(|i| i.name == name).unwrap().id;
            tables
                .iter()
                .find(|t| t.id == id)
                .expect("the index's hidden table")
                .clone()
        };
        PeopleTables {
            by_u: hidden("by_u"),
            by_s: hidden("by_s"),
            base,
        }
    }

    fn people_batch(&self, people: &PeopleTables, ops: &[KeyOp]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, op) in ops.iter().enumerate() {
            w.begin(&OpHeader {
                op_index: 100 + i as u32,
                table_id: people.base.id,
                table_version: people.base.version,
                index_id: op.by.map_or(NO_INDEX, |name| people.index_id(name)),
                partition: NO_PARTITION,
                kind: op.kind,
                lock: op.lock,
                flags: op.flags,
            });
            w.key(op.key.as_ref());
            for (c, v) in &op.values {
                w.value(*c, v.as_ref());
            }
            w.end().unwrap();
        }
        drop(w);
        out
    }

    fn submit_people(&mut self, people: &PeopleTables, tx: u64, flags: u32, ops: &[KeyOp]) {
        let ops = self.people_batch(people, ops);
        let tc = tc_of(self.data_nodes[0]);
        self.send(
            tc,
            SignalBody::TcKeyReq {
                tx_id: tx,
                flags,
                ops,
            },
        );
    }

    fn execute_people(
        &mut self,
        people: &PeopleTables,
        tx: u64,
        flags: u32,
        ops: &[KeyOp],
    ) -> Reply {
        self.submit_people(people, tx, flags, ops);
        self.reply_within(tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"))
    }

    fn commit_people(&mut self, people: &PeopleTables, ops: &[KeyOp]) -> Reply {
        let tx = self.tx_id();
        self.execute_people(people, tx, tc_flags::START | tc_flags::COMMIT, ops)
    }

    /// Every row of a table, by a full scan.
    fn scan_table(&mut self, table: &TableDef) -> Vec<Vec<Value>> {
        self.scan(&full_scan_spec(table)).expect("a full scan").0
    }

    /// The table and both unique indexes hold exactly the model.
    fn check_people(&mut self, people: &PeopleTables, model: &People) {
        let mut rows = self.scan_table(&people.base);
        rows.sort_by_key(|r| int(&r[0]));
        let expected: Vec<Vec<Value>> = model.iter().map(|(id, p)| p.row(*id)).collect();
        assert_eq!(rows, expected, "the base table holds the model");
        let base_key = |id: i64| {
            let mut bytes = Vec::new();
            KeyEncoder::primary_key(&people.base)
                .encode(&[Value::Int(id)], &mut bytes)
                .unwrap();
            Value::Bytes(bytes)
        };
        let mut by_u: Vec<(i64, Value)> = self
            .scan_table(&people.by_u)
            .into_iter()
            .map(|r| (int(&r[0]), r[1].clone()))
            .collect();
        by_u.sort_by_key(|(u, _)| *u);
        let mut expected_u: Vec<(i64, Value)> = model
            .iter()
            .filter_map(|(id, p)| p.u.map(|u| (u, base_key(*id))))
            .collect();
        expected_u.sort_by_key(|(u, _)| *u);
        assert_eq!(
            by_u, expected_u,
            "unique index by_u holds the model's index"
        );
        let mut by_s: Vec<(String, Value)> = self
            .scan_table(&people.by_s)
            .into_iter()
            .map(|r| match &r[0] {
                Value::String(s) => (
                    schema::Collation::Utf8mb4GeneralCi.sort_key(s),
                    r[1].clone(),
                ),
                other => panic!("not a string: {other:?}"),
            })
            .collect();
        by_s.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected_s: Vec<(String, Value)> = model
            .iter()
            .filter_map(|(id, p)| {
                p.s.as_ref().map(|s| {
                    (
                        schema::Collation::Utf8mb4GeneralCi.sort_key(s),
                        base_key(*id),
                    )
                })
            })
            .collect();
        expected_s.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            by_s, expected_s,
            "unique index by_s holds the model's index"
        );
    }
}

fn started_people(seed: u64) -> (Cluster, PeopleTables) {
    let mut cluster = Cluster::start(seed, 1, Limits::default());
    // `accounts` too: the scan helper ends its transaction through it.
    cluster.create_table();
    let people = cluster.create_people();
    (cluster, people)
}

/// Runs `ops` in one committing transaction and checks the reply against
/// the model run in request order.
fn run_against_model(
    cluster: &mut Cluster,
    people: &PeopleTables,
    model: &mut People,
    ops: &[KeyOp],
) {
    let mut next = model.clone();
    let mut expected = Vec::new();
    let mut violation = None;
    for (i, op) in ops.iter().enumerate() {
        match model_apply(&mut next, op) {
            Ok(answer) => expected.push(answer),
            Err(()) => {
                violation = Some(i);
                break;
            }
        }
    }
    let reply = cluster.commit_people(people, ops);
    if let Some(i) = violation {
        match reply {
            Reply::Ref {
                code,
                op_index,
                message,
            } => {
                assert_eq!(code, error::UNIQUE_VIOLATION, "{message} for {ops:?}");
                assert_eq!(op_index, 100 + i as u32, "{message}");
                assert!(message.contains("unique index `by_"), "{message}");
            }
            other => panic!("op {i} violates a unique index: {other:?} for {ops:?}"),
        }
        return;
    }
    let (_, answers) = committed(&reply);
    assert_eq!(answers.len(), ops.len());
    for (i, ((answer, (code, row)), op)) in answers.iter().zip(&expected).zip(ops).enumerate() {
        assert_eq!(answer.op_index, 100 + i as u32, "answers in request order");
        assert_eq!(answer.code, *code, "op {i} {op:?} of {ops:?}");
        assert_eq!(answer.row, *row, "op {i} {op:?} of {ops:?}");
    }
    *model = next;
}

#[test]
fn unique_keys_random_workload_matches_a_model() {
    let (mut cluster, people) = started_people(21);
    let mut rng = Rng::seeded(21);
    let mut model = People::new();
    let mut aborted = 0;
    for _ in 0..60 {
        let n = 1 + rng.below(8) as usize;
        let mut ops = Vec::new();
        for _ in 0..n {
            let id = rng.below(12) as i64;
            let u = (rng.below(4) > 0).then(|| rng.below(10) as i64);
            let s_of = |rng: &mut Rng| {
                let k = rng.below(10);
                if rng.below(2) == 0 {
                    format!("Name{k}")
                } else {
                    format!("name{k} ")
                }
            };
            let s = (rng.below(4) > 0).then(|| s_of(&mut rng));
            let by_u = Value::Int(rng.below(10) as i64);
            let by_s = Value::String(s_of(&mut rng));
            let op = match rng.below(11) {
                0 => KeyOp::read(None, Value::Int(id)),
                1 => KeyOp::read(Some("by_u"), by_u),
                2 => KeyOp::read(Some("by_s"), by_s),
                3 | 4 => KeyOp::insert(id, u, s.as_deref(), rng.below(100) as i64),
                5 => KeyOp::write(OpKind::Write, id, u, s.as_deref(), rng.below(100) as i64),
                6 => KeyOp::update(None, Value::Int(id), vec![(1, opt_int(u))]),
                7 => KeyOp::update(
                    Some("by_u"),
                    by_u,
                    vec![(2, opt_str(s.as_deref())), (3, Value::Int(7))],
                ),
                8 => KeyOp::update(
                    Some("by_s"),
                    by_s,
                    vec![(3, Value::Int(rng.below(100) as i64))],
                ),
                9 => KeyOp::delete(None, Value::Int(id)),
                _ => KeyOp::delete(Some("by_u"), by_u),
            };
            ops.push(op.ignoring());
        }
        let before = model.len();
        run_against_model(&mut cluster, &people, &mut model, &ops);
        if model.len() == before {
            aborted += 1;
        }
    }
    assert!(
        !model.is_empty() && aborted < 60,
        "the workload did something"
    );
    cluster.check_people(&people, &model);
    cluster.check_idle();
}

#[test]
fn ops_by_unique_key_see_earlier_ops_of_their_request() {
    let (mut cluster, people) = started_people(22);
    let mut model = People::new();
    let ops = [
        KeyOp::insert(1, Some(5), Some("Ann"), 10),
        KeyOp::read(Some("by_u"), Value::Int(5)),
        KeyOp::update(Some("by_u"), Value::Int(5), vec![(1, Value::Int(6))]),
        KeyOp::read(Some("by_u"), Value::Int(5)).ignoring(),
        KeyOp::read(Some("by_u"), Value::Int(6)),
        KeyOp::read(Some("by_s"), Value::String("ANN".into())),
        KeyOp::insert(2, Some(5), Some("Bob"), 20),
        KeyOp::delete(Some("by_s"), Value::String("ann".into())),
        KeyOp::insert(3, Some(6), Some("aNN"), 30),
        KeyOp::update(None, Value::Int(3), vec![(2, Value::String("Cid".into()))]),
        KeyOp::read(Some("by_s"), Value::String("cid".into())),
    ];
    run_against_model(&mut cluster, &people, &mut model, &ops);
    assert_eq!(model.len(), 2);
    cluster.check_people(&people, &model);
    // Committed reads by unique key in a later transaction.
    let reads = [
        KeyOp {
            lock: LockMode::Committed,
            ..KeyOp::read(Some("by_u"), Value::Int(6))
        },
        KeyOp {
            lock: LockMode::Committed,
            ..KeyOp::read(Some("by_u"), Value::Int(99))
        }
        .ignoring(),
    ];
    run_against_model(&mut cluster, &people, &mut model, &reads);
    // Without IGNORE_ERROR a lookup that finds nothing fails the request.
    match cluster.commit_people(&people, &[KeyOp::delete(Some("by_u"), Value::Int(42))]) {
        Reply::Ref { code, op_index, .. } => {
            assert_eq!((code, op_index), (error::NO_SUCH_ROW, 100));
        }
        other => panic!("{other:?}"),
    }
    cluster.check_idle();
}

#[test]
fn a_duplicate_unique_value_aborts_with_893_or_is_taken_back_when_ignored() {
    let (mut cluster, people) = started_people(23);
    let mut model = People::new();
    run_against_model(
        &mut cluster,
        &people,
        &mut model,
        &[KeyOp::insert(1, Some(5), Some("x"), 1)],
    );
    // Without IGNORE_ERROR the transaction aborts, leaving nothing.
    let ops = [
        KeyOp::insert(3, Some(7), Some("z"), 3),
        KeyOp::insert(2, Some(5), Some("y"), 2),
    ];
    match cluster.commit_people(&people, &ops) {
        Reply::Ref {
            code,
            op_index,
            message,
        } => {
            assert_eq!(
                (code, op_index),
                (error::UNIQUE_VIOLATION, 101),
                "{message}"
            );
            assert!(
                message.contains("`by_u`") && message.contains("people"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error::class(error::UNIQUE_VIOLATION),
        proto::ErrorClass::Permanent
    );
    cluster.check_people(&people, &model);
    // With it, the insert is taken back, base row and index rows (by_s's
    // new "y" included), and answers 893; the rest commits. A later op
    // of the request on the row taken back finds it gone: the same id
    // inserts again.
    run_against_model(
        &mut cluster,
        &people,
        &mut model,
        &[
            KeyOp::insert(3, Some(7), Some("z"), 3).ignoring(),
            KeyOp::insert(2, Some(5), Some("y"), 2).ignoring(),
            KeyOp::insert(4, Some(8), Some("X "), 4).ignoring(),
            KeyOp::insert(2, Some(9), Some("w"), 2).ignoring(),
            KeyOp::read(Some("by_s"), Value::String("y".into())).ignoring(),
        ],
    );
    assert_eq!(model.len(), 3, "ids 1, 2 (the second insert) and 3");
    cluster.check_people(&people, &model);
    // An update or write that meets one aborts, IGNORE_ERROR or not.
    run_against_model(
        &mut cluster,
        &people,
        &mut model,
        &[
            KeyOp::delete(None, Value::Int(2)),
            KeyOp::insert(2, Some(6), Some("Y"), 2),
        ],
    );
    for op in [
        KeyOp::update(None, Value::Int(2), vec![(1, Value::Int(5))]),
        KeyOp::update(
            Some("by_u"),
            Value::Int(6),
            vec![(2, Value::String("X ".into()))],
        ),
        KeyOp::write(OpKind::Write, 2, Some(6), Some("x"), 0),
    ] {
        match cluster.commit_people(&people, &[op]) {
            Reply::Ref { code, .. } => assert_eq!(code, error::UNIQUE_VIOLATION),
            other => panic!("{other:?}"),
        }
    }
    cluster.check_people(&people, &model);
    cluster.check_idle();
}

#[test]
fn updates_move_index_entries_deletes_free_them_and_nulls_repeat() {
    let (mut cluster, people) = started_people(24);
    let mut model = People::new();
    let steps: Vec<Vec<KeyOp>> = vec![
        vec![KeyOp::insert(1, Some(1), Some("a"), 0)],
        vec![KeyOp::update(None, Value::Int(1), vec![(1, Value::Int(2))])],
        // The old value is free again, the new one taken.
        vec![KeyOp::insert(2, Some(1), Some("b"), 0)],
        vec![KeyOp::delete(None, Value::Int(1))],
        vec![KeyOp::insert(3, Some(2), Some("a"), 0)],
        // NULLs: many rows, no index entries.
        (10..15)
            .map(|id| KeyOp::insert(id, None, None, id))
            .collect(),
        vec![KeyOp::update(
            None,
            Value::Int(2),
            vec![(1, Value::Null), (2, Value::Null)],
        )],
        vec![KeyOp::update(
            None,
            Value::Int(10),
            vec![(1, Value::Int(1))],
        )],
        // An update of other columns only leaves the entries alone.
        vec![KeyOp::update(
            Some("by_u"),
            Value::Int(1),
            vec![(3, Value::Int(99))],
        )],
        // Write (upsert) over an existing row moves its entries too.
        vec![KeyOp::write(OpKind::Write, 3, Some(4), Some("c"), 5)],
        vec![KeyOp::read(Some("by_u"), Value::Null).ignoring()],
    ];
    for ops in &steps {
        run_against_model(&mut cluster, &people, &mut model, ops);
        cluster.check_people(&people, &model);
    }
    assert_eq!(model.values().filter(|p| p.u.is_none()).count(), 5);
    cluster.check_idle();
}

#[test]
fn two_transactions_inserting_one_value_meet_on_the_index_row() {
    let (mut cluster, people) = started_people(25);
    for (commit_first, id) in [(true, 1), (false, 3)] {
        let first = cluster.tx_id();
        let reply = cluster.execute_people(
            &people,
            first,
            tc_flags::START,
            &[KeyOp::insert(id, Some(9 + id), None, 0)],
        );
        assert!(matches!(reply, Reply::Conf { .. }), "{reply:?}");
        let second = cluster.tx_id();
        cluster.submit_people(
            &people,
            second,
            tc_flags::START | tc_flags::COMMIT,
            &[KeyOp::insert(id + 1, Some(9 + id), None, 0)],
        );
        assert_eq!(
            cluster.reply_within(second, DEADLOCK_TIMEOUT / 2),
            None,
            "the second waits for the index row"
        );
        let end = if commit_first {
            tc_flags::COMMIT
        } else {
            tc_flags::ROLLBACK
        };
        let reply = cluster.execute_people(&people, first, end, &[]);
        assert!(matches!(reply, Reply::Conf { .. }), "{reply:?}");
        let second_reply = cluster
            .reply_within(second, ANSWER_WAIT)
            .expect("the second is answered");
        let mut model = People::new();
        let winner = if commit_first {
            match second_reply {
                Reply::Ref { code, .. } => assert_eq!(code, error::UNIQUE_VIOLATION),
                other => panic!("{other:?}"),
            }
            id
        } else {
            committed(&second_reply);
            id + 1
        };
        model.insert(
            winner,
            Person {
                u: Some(9 + id),
                s: None,
                n: 0,
            },
        );
        cluster.check_people(&people, &model);
        committed(&cluster.commit_people(&people, &[KeyOp::delete(None, Value::Int(winner))]));
    }
    cluster.check_people(&people, &People::new());
    cluster.check_idle();
}

#[test]
fn hidden_index_tables_are_not_written_directly() {
    let (mut cluster, people) = started_people(26);
    let mut ops = Vec::new();
    let mut w = OpBatchWriter::new(&mut ops);
    w.begin(&OpHeader {
        op_index: 0,
        table_id: people.by_u.id,
        table_version: people.by_u.version,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind: OpKind::Insert,
        lock: LockMode::Exclusive,
        flags: 0,
    });
    w.key(Value::Int(1).as_ref());
    w.value(1, Value::Bytes(vec![0; 8]).as_ref());
    w.end().unwrap();
    drop(w);
    let tx = cluster.tx_id();
    let tc = tc_of(cluster.data_nodes[0]);
    cluster.send(
        tc,
        SignalBody::TcKeyReq {
            tx_id: tx,
            flags: tc_flags::START | tc_flags::COMMIT,
            ops,
        },
    );
    match cluster.reply_within(tx, ANSWER_WAIT).expect("answered") {
        Reply::Ref { code, message, .. } => {
            assert_eq!(code, error::BAD_OPERATION);
            assert!(message.contains("base table"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    cluster.check_people(&people, &People::new());
    cluster.check_idle();
}

#[test]
fn unique_key_batches_take_a_few_rounds_not_one_per_op() {
    let (mut cluster, people) = started_people(27);
    let mut model = People::new();
    let instances = u64::from(LDM_INSTANCES);
    let rounds = |cluster: &mut Cluster, model: &mut People, ops: &[KeyOp]| {
        let before = cluster.key_requests();
        run_against_model(cluster, &people, model, ops);
        cluster.key_requests() - before
    };
    let inserts: Vec<KeyOp> = (0..300)
        .map(|id| KeyOp::insert(id, Some(id * 2), Some(&format!("p{id}")), id))
        .collect();
    // Base round, index round: at most one request per LDM instance each.
    assert!(rounds(&mut cluster, &mut model, &inserts) <= 2 * instances);
    let reads: Vec<KeyOp> = (0..300)
        .map(|id| KeyOp::read(Some("by_u"), Value::Int(id * 2)))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &reads) <= 2 * instances);
    let deletes: Vec<KeyOp> = (0..150)
        .map(|id| KeyOp::delete(Some("by_s"), Value::String(format!("P{id}"))))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &deletes) <= 3 * instances);
    let updates: Vec<KeyOp> = (150..300)
        .map(|id| KeyOp::update(None, Value::Int(id), vec![(1, Value::Int(id * 2 + 1))]))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &updates) <= 2 * instances);
    assert_eq!(model.len(), 150);
    cluster.check_people(&people, &model);
    // An op by unique key after an insert of its value runs after it: a
    // second segment, still not one request per op.
    let ordered = [
        KeyOp::insert(1_000, Some(1_000), None, 0),
        KeyOp::read(Some("by_u"), Value::Int(1_000)),
    ];
    let used = rounds(&mut cluster, &mut model, &ordered);
    assert!((2..=4).contains(&used), "{used}");
    cluster.check_people(&people, &model);
    cluster.check_idle();
}
