//! The dictionary in the deterministic simulator: data nodes of the shared
//! harness (`common`) with membership and dictionary alone, a simulated
//! disk per node, and the API node's recorder, through which the tests
//! send schema requests and read the answers. Each test ends by checking that every data node holds the same
//! schema, in memory and on its disk, to the byte.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use datanode::dictionary::{
    schema_dir, Dictionary, DictionaryConfig, DictionaryError, FIRST_OBJECT_ID, SCHEMA_QUEUE_MAX,
};
use proto::error;
use schema::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};

fn data_dir() -> &'static Path {
    Path::new("/data")
}

/// What a request got back.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Conf { table_id: u32, version: u32 },
    Ref { code: u32, message: String },
}

impl Cluster {
    /// `n` data nodes (ids 2…), started and agreed on a view.
    fn start(seed: u64, n: u8) -> Cluster {
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let placement = Placement::new(vec![data_nodes], 1);
        let tune = |spec: &mut NodeSpec| {
            // The schema files the tests read are where the node keeps them.
            assert_eq!(spec.data_dir, data_dir());
            // The dictionary alone: schema transactions among the nodes.
            spec.left_out = vec![
                BlockNumber::DISTRIBUTION,
                BlockNumber::TRANSACTION_COORDINATOR,
                BlockNumber::LOCAL_DATA_MANAGER,
            ];
        };
        let mut cluster = Cluster::wire(seed, placement, tune, |_| {});
        cluster.sim.run_for(START_TIME);
        cluster.check_agreement().unwrap();
        for &id in &cluster.data_nodes {
            assert!(cluster.dict(id).is_synced(), "node {id} is not synced");
        }
        assert!(cluster.dict(node(2)).is_master());
        cluster
    }

    fn dict(&self, id: NodeId) -> &Dictionary {
        self.sim
            .block::<Dictionary>(BlockRef::new(id, BlockNumber::DICTIONARY, 0))
            .unwrap_or_else(|| panic!("node {id} is down"))
    }

    fn up(&self) -> Vec<NodeId> {
        self.data_nodes
            .iter()
            .copied()
            .filter(|n| self.sim.is_up(*n))
            .collect()
    }

    /// Sends the request `body` makes of a new request id to the dictionary
    /// of `via`.
    fn request(&mut self, via: NodeId, body: impl FnOnce(u32) -> SignalBody) -> u32 {
        let request_id = self.request_id();
        let dict = BlockRef::new(via, BlockNumber::DICTIONARY, 0);
        self.send(dict, body(request_id));
        request_id
    }

    fn create(&mut self, via: NodeId, table: &TableDef) -> u32 {
        let bytes = table.to_bytes();
        self.request(via, |request_id| SignalBody::DictCreateTableReq {
            request_id,
            table: bytes,
        })
    }

    fn alter(&mut self, via: NodeId, table: &TableDef) -> u32 {
        let bytes = table.to_bytes();
        let table_id = table.id;
        self.request(via, |request_id| SignalBody::DictAlterTableReq {
            request_id,
            table_id,
            table: bytes,
        })
    }

    fn drop_table(&mut self, via: NodeId, table_id: u32) -> u32 {
        self.request(via, |request_id| SignalBody::DictDropTableReq {
            request_id,
            table_id,
        })
    }

    fn outcome(&self, request_id: u32) -> Option<Outcome> {
        let answers = self.got.lock().unwrap();
        let mine: Vec<Outcome> = answers
            .iter()
            .filter_map(|signal| match signal.body.clone() {
                SignalBody::DictCreateTableConf {
                    request_id: r,
                    table_id,
                    version,
                }
                | SignalBody::DictAlterTableConf {
                    request_id: r,
                    table_id,
                    version,
                } if r == request_id => Some(Outcome::Conf { table_id, version }),
                SignalBody::DictDropTableConf {
                    request_id: r,
                    table_id,
                } if r == request_id => Some(Outcome::Conf {
                    table_id,
                    version: 0,
                }),
                SignalBody::DictCreateTableRef {
                    request_id: r,
                    code,
                    message,
                }
                | SignalBody::DictAlterTableRef {
                    request_id: r,
                    code,
                    message,
                }
                | SignalBody::DictDropTableRef {
                    request_id: r,
                    code,
                    message,
                } if r == request_id => Some(Outcome::Ref { code, message }),
                _ => None,
            })
            .collect();
        assert!(
            mine.len() <= 1,
            "request {request_id} answered twice: {mine:?}"
        );
        mine.into_iter().next()
    }

    /// Runs until the request is answered (or a simulated second passed).
    fn wait(&mut self, request_id: u32) -> Outcome {
        for _ in 0..1000 {
            if let Some(outcome) = self.outcome(request_id) {
                return outcome;
            }
            self.sim.run_for(Duration::from_millis(1));
        }
        panic!("request {request_id} was not answered");
    }

    fn crash(&mut self, id: NodeId) {
        self.sim.crash(id);
        self.disks[&id].crash();
    }

    /// Time for a restarted node to rejoin and take the schema.
    fn rejoin(&mut self) {
        self.sim.run_for(Duration::from_secs(2));
    }

    fn group_file(&self, table_id: u32, on: NodeId) -> PathBuf {
        schema_dir(data_dir(), on).join(format!("table_{table_id}.def"))
    }

    /// Every up data node holds the same schema: the same version, the same
    /// tables with the same bytes, the same durable files.
    fn check_agreement(&self) -> Result<(), String> {
        let up = self.up();
        let Some(&first) = up.first() else {
            return Ok(());
        };
        let reference = self.snapshot(first);
        for &other in &up[1..] {
            let snapshot = self.snapshot(other);
            if snapshot != reference {
                return Err(format!(
                    "seed {}: node {first} holds {reference:?}, node {other} holds {snapshot:?}",
                    self.sim.seed()
                ));
            }
        }
        Ok(())
    }

    /// (schema version, per table: id, encoding; per group: file bytes).
    #[allow(clippy::type_complexity)]
    fn snapshot(&self, id: NodeId) -> (u32, Vec<(u32, Vec<u8>)>, Vec<Option<Vec<u8>>>) {
        let dict = self.dict(id);
        let tables: Vec<(u32, Vec<u8>)> = dict
            .tables()
            .map(|t| (t.id, dict.encoded(t.id).unwrap().to_vec()))
            .collect();
        let files = dict
            .schema()
            .groups()
            .map(|g| self.disks[&id].durable_contents(&self.group_file(g.base().id, id)))
            .collect();
        (dict.schema_version(), tables, files)
    }
}

fn int(name: &str) -> Column {
    Column::new(name, ColumnType::Int { unsigned: false })
}

/// A table with a unique index and a BLOB: three tables in its group.
fn orders(name: &str) -> TableDef {
    TableDef::new(
        name,
        0,
        vec![
            int("id"),
            Column::new(
                "customer",
                ColumnType::VarChar {
                    max: 40,
                    collation: Collation::Utf8mb4GeneralCi,
                },
            )
            .nullable(),
            Column::new("notes", ColumnType::Blob).nullable(),
        ],
    )
    .primary_key(vec![0])
    .partitions(4)
    .index(IndexDef {
        name: "u_customer".into(),
        id: 0,
        columns: vec![1],
        kind: IndexKind::Unique,
    })
}

fn conf(outcome: Outcome) -> (u32, u32) {
    match outcome {
        Outcome::Conf { table_id, version } => (table_id, version),
        other => panic!("expected a Conf, got {other:?}"),
    }
}

#[test]
fn a_table_created_through_any_node_is_identical_on_every_node_and_disk() {
    let mut cluster = Cluster::start(1, 3);
    let request = cluster.create(node(3), &orders("shop/def/orders"));
    let (table_id, version) = conf(cluster.wait(request));
    assert_eq!((table_id, version), (FIRST_OBJECT_ID, 1));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for id in cluster.up() {
        let dict = cluster.dict(id);
        assert_eq!(dict.schema_version(), 1);
        let table = dict.table_by_name("shop/def/orders").unwrap();
        assert_eq!(table.id, table_id);
        assert_eq!(table.version, 1);
        assert_eq!(
            table.indexes[0].id,
            table_id + 1,
            "index ids are handed out"
        );
        let unique = dict
            .table_by_name(&format!("$unique/{table_id}/u_customer"))
            .unwrap();
        assert_eq!(unique.id, table_id + 1);
        let blob = dict.table_by_name(&format!("$blob/{table_id}/2")).unwrap();
        assert_eq!(blob.id, table_id + 2);
        assert_eq!(dict.tables().count(), 3);
        let file = cluster.disks[&id]
            .durable_contents(&cluster.group_file(table_id, id))
            .expect("the group is durable on every node");
        assert_eq!(&file[..4], b"SKDF");
    }
}

#[test]
fn alters_add_a_column_add_an_index_drop_an_index_and_bump_the_version() {
    let mut cluster = Cluster::start(2, 3);
    let request = cluster.create(node(4), &orders("t"));
    let (id, _) = conf(cluster.wait(request));

    // Add a column and an ordered index on it, through a non-master.
    let mut table = cluster.dict(node(3)).table(id).unwrap().clone();
    table.columns.push(int("extra").nullable());
    table.indexes.push(IndexDef {
        name: "o_extra".into(),
        id: 0,
        columns: vec![3],
        kind: IndexKind::Ordered,
    });
    let request = cluster.alter(node(3), &table);
    assert_eq!(conf(cluster.wait(request)), (id, 2));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    let altered = cluster.dict(node(4)).table(id).unwrap().clone();
    assert_eq!(altered.version, 2);
    assert_eq!(altered.columns.len(), 4);
    assert_eq!(altered.indexes[1].name, "o_extra");
    assert_eq!(altered.indexes[0].id, id + 1, "the kept index keeps its id");
    let ordered_id = altered.indexes[1].id;
    assert!(ordered_id >= id + 3, "a new id: {ordered_id}");
    let blob = cluster
        .dict(node(2))
        .table_by_name(&format!("$blob/{id}/2"));
    assert_eq!(blob.map(|t| (t.id, t.version)), Some((id + 2, 2)));

    // Drop the unique index: its hidden table goes everywhere.
    let mut table = altered.clone();
    table.indexes.remove(0);
    let request = cluster.alter(node(2), &table);
    assert_eq!(conf(cluster.wait(request)), (id, 3));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for n in cluster.up() {
        let dict = cluster.dict(n);
        assert_eq!(dict.schema_version(), 3);
        assert_eq!(dict.table(id).unwrap().version, 3);
        assert!(
            dict.table(id + 1).is_none(),
            "node {n} kept the unique table"
        );
        assert_eq!(dict.tables().count(), 2);
    }

    // An alter made from an old version, one that changes a column, and
    // one that changes nothing are refused.
    let request = cluster.alter(node(3), &altered);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::WRONG_SCHEMA_VERSION,
            ..
        }
    ));
    let mut changed = cluster.dict(node(3)).table(id).unwrap().clone();
    changed.columns[0].ty = ColumnType::BigInt { unsigned: false };
    let request = cluster.alter(node(3), &changed);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::UNSUPPORTED_ALTER);
            assert!(message.contains("column `id` changed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let same = cluster.dict(node(3)).table(id).unwrap().clone();
    let request = cluster.alter(node(3), &same);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::UNSUPPORTED_ALTER,
            ..
        }
    ));
    let mut not_null = same.clone();
    not_null.columns.push(int("required"));
    let request = cluster.alter(node(3), &not_null);
    match cluster.wait(request) {
        Outcome::Ref { message, .. } => assert!(message.contains("nullable or have a default")),
        other => panic!("{other:?}"),
    }
    assert_eq!(cluster.dict(node(2)).schema_version(), 3);
}

#[test]
fn a_table_and_its_columns_are_renamed_online_and_names_stay_unique() {
    let mut cluster = Cluster::start(5, 3);
    let request = cluster.create(node(2), &orders("a"));
    let (a, _) = conf(cluster.wait(request));
    let request = cluster.create(node(2), &orders("b"));
    conf(cluster.wait(request));

    // Rename the table and the column of its unique index, through a
    // non-master: ids stay, the hidden tables follow, the old name is free.
    let mut table = cluster.dict(node(3)).table(a).unwrap().clone();
    table.name = "a2".into();
    table.columns[1].name = "buyer".into();
    let request = cluster.alter(node(3), &table);
    assert_eq!(conf(cluster.wait(request)), (a, 2));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for n in cluster.up() {
        let dict = cluster.dict(n);
        assert!(
            dict.table_by_name("a").is_none(),
            "node {n} kept the old name"
        );
        let renamed = dict.table_by_name("a2").expect("the new name");
        assert_eq!((renamed.id, renamed.version), (a, 2));
        assert_eq!(renamed.columns[1].name, "buyer");
        let unique = dict.table(a + 1).expect("the unique index's table stays");
        assert_eq!(
            (unique.columns[0].name.as_str(), unique.version),
            ("buyer", 2)
        );
    }
    let request = cluster.create(node(4), &orders("a"));
    conf(cluster.wait(request));

    // A taken name, a hidden table's name, and a changed column are refused.
    let current = cluster.dict(node(3)).table(a).unwrap().clone();
    let mut taken = current.clone();
    taken.name = "b".into();
    let request = cluster.alter(node(2), &taken);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::ALREADY_EXISTS);
            assert!(message.contains("`b` already exists"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let mut hidden = current.clone();
    hidden.name = "$x".into();
    let request = cluster.alter(node(2), &hidden);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::BAD_DEFINITION,
            ..
        }
    ));
    let mut retyped = current.clone();
    retyped.columns[1].name = "again".into();
    retyped.columns[1].nullable = false;
    let request = cluster.alter(node(2), &retyped);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::UNSUPPORTED_ALTER);
            assert!(message.contains("column `buyer` changed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let mut twice = current.clone();
    twice.columns[2].name = "buyer".into();
    let request = cluster.alter(node(2), &twice);
    assert!(matches!(cluster.wait(request), Outcome::Ref { .. }));
    assert_eq!(cluster.dict(node(2)).table(a).unwrap().version, 2);
}

#[test]
fn a_drop_removes_the_table_its_hidden_tables_and_its_file_everywhere() {
    let mut cluster = Cluster::start(3, 3);
    let request = cluster.create(node(2), &orders("a"));
    let (a, _) = conf(cluster.wait(request));
    let request = cluster.create(node(3), &orders("b"));
    let (b, _) = conf(cluster.wait(request));
    let request = cluster.drop_table(node(4), a);
    assert_eq!(conf(cluster.wait(request)), (a, 0));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for n in cluster.up() {
        let dict = cluster.dict(n);
        assert!(dict.table_by_name("a").is_none());
        assert!(dict.table(a + 1).is_none() && dict.table(a + 2).is_none());
        assert!(dict.table_by_name("b").is_some());
        assert_eq!(dict.schema_version(), 3);
        assert_eq!(
            cluster.disks[&n].durable_contents(&cluster.group_file(a, n)),
            None
        );
    }
    // Ids are never reused; the hidden tables cannot be dropped alone; a
    // dropped table is gone.
    let request = cluster.create(node(2), &orders("a"));
    assert!(conf(cluster.wait(request)).0 > b);
    let request = cluster.drop_table(node(3), b + 1);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::NO_SUCH_TABLE);
            assert!(message.contains("hidden table of `b`"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let request = cluster.drop_table(node(3), a);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::NO_SUCH_TABLE,
            ..
        }
    ));
}

#[test]
fn of_two_concurrent_creates_of_one_name_exactly_one_succeeds() {
    for seed in 10..20 {
        let mut cluster = Cluster::start(seed, 3);
        let mut first = orders("same");
        first.columns.push(int("from_3").nullable());
        let mut second = orders("same");
        second.columns.push(int("from_4").nullable());
        let r3 = cluster.create(node(3), &first);
        let r4 = cluster.create(node(4), &second);
        let a = cluster.wait(r3);
        let b = cluster.wait(r4);
        let (winner, loser) = match (&a, &b) {
            (Outcome::Conf { .. }, Outcome::Ref { .. }) => ("from_3", b),
            (Outcome::Ref { .. }, Outcome::Conf { .. }) => ("from_4", a),
            _ => panic!("seed {seed}: {a:?} and {b:?}"),
        };
        assert_eq!(
            loser,
            Outcome::Ref {
                code: error::ALREADY_EXISTS,
                message: "table `same` already exists".into()
            }
        );
        cluster.sim.run_for(Duration::from_millis(10));
        cluster.check_agreement().unwrap();
        let table = cluster.dict(node(2)).table_by_name("same").unwrap();
        assert_eq!(table.columns[3].name, winner);
        assert_eq!(cluster.dict(node(4)).schema_version(), 1);
    }
}

#[test]
fn invalid_tables_are_refused_with_the_limit_named() {
    let mut cluster = Cluster::start(4, 2);
    let wide = TableDef::new("wide", 0, (0..600).map(|i| int(&format!("c{i}"))).collect())
        .primary_key(vec![0]);
    let request = cluster.create(node(3), &wide);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::BAD_DEFINITION);
            assert!(
                message.contains("600 columns") && message.contains("512"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let long = TableDef::new(
        "long",
        0,
        vec![
            int("id"),
            Column::new(
                "v",
                ColumnType::VarChar {
                    max: 7_600,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
        ],
    )
    .primary_key(vec![0]);
    let request = cluster.create(node(2), &long);
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::BAD_DEFINITION);
            assert!(
                message.contains("30406 bytes") && message.contains("at most 30000"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Bytes that are no table definition, a given id, a reserved name.
    let request = cluster.request(node(3), |request_id| SignalBody::DictCreateTableReq {
        request_id,
        table: vec![1, 2, 3],
    });
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::BAD_DEFINITION,
            ..
        }
    ));
    let mut with_id = orders("x");
    with_id.id = 99;
    let request = cluster.create(node(3), &with_id);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::BAD_DEFINITION,
            ..
        }
    ));
    let request = cluster.create(node(3), &orders("$sneaky"));
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::BAD_DEFINITION,
            ..
        }
    ));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    assert_eq!(cluster.dict(node(2)).schema_version(), 0);
    assert_eq!(cluster.dict(node(3)).tables().count(), 0);
}

#[test]
fn a_crashed_node_reloads_its_schema_from_its_disk() {
    let mut cluster = Cluster::start(5, 3);
    for name in ["a", "b", "c"] {
        let request = cluster.create(node(3), &orders(name));
        conf(cluster.wait(request));
    }
    cluster.sim.run_for(Duration::from_millis(10));
    let before = cluster.snapshot(node(4));
    cluster.crash(node(4));
    cluster.sim.run_for(Duration::from_millis(100));
    cluster.sim.restart(node(4));
    // Loaded at start, before it has rejoined.
    assert!(!cluster.dict(node(4)).is_synced());
    assert_eq!(cluster.snapshot(node(4)), before);
    cluster.rejoin();
    cluster.check_agreement().unwrap();
    let report = cluster.dict(node(4)).last_sync().unwrap().clone();
    assert_eq!(report.from, Some(node(2)));
    assert!(
        report.added.is_empty() && report.changed.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    // And it takes part in the next change.
    let request = cluster.create(node(4), &orders("d"));
    conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
}

#[test]
fn a_node_that_missed_changes_while_down_adopts_them_when_it_joins() {
    let mut cluster = Cluster::start(6, 3);
    let request = cluster.create(node(3), &orders("kept"));
    let (kept, _) = conf(cluster.wait(request));
    let request = cluster.create(node(3), &orders("dropped"));
    let (dropped, _) = conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.crash(node(4));
    cluster.sim.run_for(Duration::from_millis(100));
    let request = cluster.create(node(3), &orders("created"));
    let (created, _) = conf(cluster.wait(request));
    let request = cluster.drop_table(node(2), dropped);
    conf(cluster.wait(request));
    let mut table = cluster.dict(node(3)).table(kept).unwrap().clone();
    table.columns.push(int("added").nullable());
    let request = cluster.alter(node(3), &table);
    conf(cluster.wait(request));
    cluster.sim.restart(node(4));
    assert!(
        cluster.dict(node(4)).table(dropped).is_some(),
        "stale at load"
    );
    cluster.rejoin();
    cluster.check_agreement().unwrap();
    let dict = cluster.dict(node(4));
    assert!(dict.is_synced());
    assert!(dict.table(created).is_some());
    assert!(dict.table(dropped).is_none());
    assert_eq!(dict.table(kept).unwrap().version, 2);
    let report = dict.last_sync().unwrap();
    assert_eq!(report.added, vec!["created".to_string()]);
    assert_eq!(report.changed, vec!["kept".to_string()]);
    assert_eq!(report.removed, vec!["dropped".to_string()]);
    assert_eq!(
        cluster.disks[&node(4)].durable_contents(&cluster.group_file(dropped, node(4))),
        None
    );
    // The adopted schema is durable: a second crash reloads it.
    let adopted = cluster.snapshot(node(4));
    cluster.crash(node(4));
    cluster.sim.restart(node(4));
    assert_eq!(cluster.snapshot(node(4)), adopted);
}

#[test]
fn a_participant_failing_mid_transaction_leaves_the_survivors_to_finish() {
    // Crash the last node at every point of a transaction's life.
    for delay_us in (0..3_000).step_by(150) {
        let mut cluster = Cluster::start(7, 3);
        let request = cluster.create(node(3), &orders("t"));
        cluster.sim.run_for(Duration::from_micros(delay_us));
        cluster.crash(node(4));
        let outcome = cluster.wait(request);
        assert!(
            matches!(outcome, Outcome::Conf { .. }),
            "crash after {delay_us} µs: {outcome:?}"
        );
        cluster.sim.run_for(Duration::from_millis(10));
        cluster.check_agreement().unwrap();
        cluster.sim.restart(node(4));
        cluster.rejoin();
        cluster.check_agreement().unwrap();
        assert!(cluster.dict(node(4)).table_by_name("t").is_some());
    }
}

#[test]
fn a_master_failing_mid_transaction_is_taken_over_consistently() {
    // Crash the master at every point of a transaction's life: the new
    // master commits it everywhere or aborts it everywhere, and the
    // requester hears Conf, or that the outcome is unknown.
    let mut outcomes = BTreeMap::new();
    // Through the prepared and the committed file of every node: each is
    // written by an io thread (the simulator's 20 µs to 2 ms).
    for delay_us in (0..8_000).step_by(200) {
        let mut cluster = Cluster::start(8, 3);
        let request = cluster.create(node(3), &orders("t"));
        cluster.sim.run_for(Duration::from_micros(delay_us));
        cluster.crash(node(2));
        let outcome = cluster.wait(request);
        cluster.sim.run_for(Duration::from_millis(50));
        cluster.check_agreement().unwrap();
        assert!(cluster.dict(node(3)).is_master());
        let exists = cluster.dict(node(4)).table_by_name("t").is_some();
        match &outcome {
            Outcome::Conf { .. } => assert!(exists, "after {delay_us} µs"),
            Outcome::Ref { code, .. } => assert_eq!(*code, error::NODE_FAILURE),
        }
        for n in cluster.up() {
            assert!(!cluster.dict(n).has_prepared(), "node {n} still prepared");
        }
        *outcomes
            .entry((matches!(outcome, Outcome::Conf { .. }), exists))
            .or_insert(0) += 1;
        // The cluster goes on: the old master rejoins and adopts.
        let request = cluster.create(node(4), &orders("after"));
        conf(cluster.wait(request));
        cluster.sim.restart(node(2));
        cluster.rejoin();
        cluster.check_agreement().unwrap();
        assert!(cluster.dict(node(2)).table_by_name("after").is_some());
    }
    // Both ways of ending were met: no table, and the table after takeover.
    assert!(outcomes.contains_key(&(false, false)), "{outcomes:?}");
    assert!(outcomes.contains_key(&(false, true)), "{outcomes:?}");
}

#[test]
fn a_disk_failing_at_prepare_aborts_the_change_everywhere() {
    let mut cluster = Cluster::start(12, 3);
    cluster.disks[&node(4)].fail_next_sync();
    let request = cluster.create(node(3), &orders("t"));
    match cluster.wait(request) {
        Outcome::Ref { code, message } => {
            assert_eq!(code, error::PREPARE_FAILED);
            assert!(message.contains("node 4 could not prepare"), "{message}");
            assert!(message.contains("trans.prepared.tmp"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for n in cluster.up() {
        assert!(!cluster.dict(n).has_prepared());
        assert_eq!(cluster.dict(n).schema_version(), 0);
    }
    // The disk is back: the same request goes through.
    let request = cluster.create(node(3), &orders("t"));
    conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
}

#[test]
fn a_disk_failing_at_commit_restarts_the_node_which_then_adopts_the_schema() {
    let mut cluster = Cluster::start(13, 3);
    let request = cluster.create(node(3), &orders("t"));
    // Prepared, and its prepared file written: the next sync is the commit's.
    while !cluster.dict(node(4)).has_prepared() || cluster.dict(node(4)).disk_busy() {
        assert!(cluster.sim.step());
    }
    cluster.disks[&node(4)].fail_next_sync();
    conf(cluster.wait(request));
    let summary = cluster.sim.summary(node(4)).unwrap();
    assert!(
        summary
            .down_reason
            .as_deref()
            .is_some_and(|r| r.contains("cannot commit schema transaction")),
        "{summary:?}"
    );
    // Its angel starts it again; it rejoins and takes the master's schema.
    cluster.rejoin();
    cluster.check_agreement().unwrap();
    assert!(cluster.dict(node(4)).table_by_name("t").is_some());
}

#[test]
fn a_full_queue_refuses_with_a_temporary_error() {
    let mut cluster = Cluster::start(9, 2);
    let requests: Vec<u32> = (0..SCHEMA_QUEUE_MAX + 8)
        .map(|i| cluster.create(node(2), &orders(&format!("t{i}"))))
        .collect();
    let outcomes: Vec<Outcome> = requests.iter().map(|r| cluster.wait(*r)).collect();
    let busy = outcomes
        .iter()
        .filter(|o| {
            matches!(
                o,
                Outcome::Ref {
                    code: error::BUSY,
                    ..
                }
            )
        })
        .count();
    let done = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Conf { .. }))
        .count();
    // One runs, SCHEMA_QUEUE_MAX wait, the rest are refused.
    assert_eq!((done, busy), (SCHEMA_QUEUE_MAX + 1, 7));
    assert!(datanode::dictionary::error_is_temporary(error::BUSY));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let run = |seed| {
        let mut cluster = Cluster::start(seed, 3);
        let r = cluster.create(node(3), &orders("x"));
        cluster.create(node(4), &orders("x"));
        cluster.wait(r);
        cluster.crash(node(2));
        cluster.sim.run_for(Duration::from_millis(50));
        cluster.sim.trace_hash()
    };
    assert_eq!(run(21), run(21));
}

#[test]
fn a_corrupt_schema_file_stops_the_node_with_the_file_named() {
    let mut cluster = Cluster::start(11, 2);
    let request = cluster.create(node(3), &orders("t"));
    let (id, _) = conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    let disk = cluster.disks[&node(3)].clone();
    let path = cluster.group_file(id, node(3));
    disk.flip_byte(&path, 40).unwrap();
    let error = Dictionary::new(
        DictionaryConfig {
            node: node(3),
            schema_dir: schema_dir(data_dir(), node(3)),
        },
        Box::new(disk.clone()),
    )
    .err()
    .expect("a flipped byte is found");
    assert!(matches!(error, DictionaryError::Corrupt { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("table_16.def") && message.contains("checksum"),
        "{message}"
    );
    disk.truncate(&path, 10).unwrap();
    let error = Dictionary::new(
        DictionaryConfig {
            node: node(3),
            schema_dir: schema_dir(data_dir(), node(3)),
        },
        Box::new(disk),
    )
    .err()
    .expect("a truncated file is found");
    assert!(error.to_string().contains("header"), "{error}");
}

impl Cluster {
    /// Asks `via` for the base tables with an id above `after_id`; runs
    /// until the answer comes.
    fn list_tables(&mut self, via: NodeId, after_id: u32) -> (Vec<(u32, String)>, bool) {
        let request_id = self.request(via, |request_id| SignalBody::DictListTablesReq {
            request_id,
            after_id,
        });
        for _ in 0..1000 {
            let answer =
                self.got
                    .lock()
                    .unwrap()
                    .iter()
                    .find_map(|signal| match signal.body.clone() {
                        SignalBody::DictListTablesConf {
                            request_id: r,
                            tables,
                            last,
                        } if r == request_id => {
                            Some((tables.into_iter().map(|t| (t.id, t.name)).collect(), last))
                        }
                        _ => None,
                    });
            if let Some(answer) = answer {
                return answer;
            }
            self.sim.run_for(Duration::from_millis(1));
        }
        panic!("list request {request_id} was not answered");
    }
}

#[test]
fn any_node_lists_the_base_tables_without_hidden_ones_after_an_id() {
    let mut cluster = Cluster::start(21, 3);
    let request = cluster.create(node(2), &orders("db/def/a"));
    let (a, _) = conf(cluster.wait(request));
    let request = cluster.create(node(3), &orders("db/def/b"));
    let (b, _) = conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    // Each `orders` has a unique-index table and a BLOB parts table too.
    assert_eq!(cluster.dict(node(4)).tables().count(), 6);
    let (all, last) = cluster.list_tables(node(4), 0);
    assert!(last);
    assert_eq!(
        all,
        vec![(a, "db/def/a".to_owned()), (b, "db/def/b".to_owned())]
    );
    let (rest, last) = cluster.list_tables(node(2), a);
    assert!(last);
    assert_eq!(rest, vec![(b, "db/def/b".to_owned())]);
    let request = cluster.drop_table(node(2), a);
    conf(cluster.wait(request));
    cluster.sim.run_for(Duration::from_millis(10));
    let (left, _) = cluster.list_tables(node(3), 0);
    assert_eq!(left, vec![(b, "db/def/b".to_owned())]);
}

#[test]
fn an_alter_may_change_the_sql_metadata_alone() {
    let mut cluster = Cluster::start(22, 2);
    let request = cluster.create(node(2), &orders("db/def/m").sql_meta(vec![1, 2, 3]));
    let (id, _) = conf(cluster.wait(request));
    let mut table = cluster.dict(node(3)).table(id).unwrap().clone();
    assert_eq!(
        table.sql_meta,
        vec![1, 2, 3],
        "the metadata travels with the table"
    );
    // Unchanged: still "changes nothing".
    let request = cluster.alter(node(3), &table);
    assert!(matches!(
        cluster.wait(request),
        Outcome::Ref {
            code: error::UNSUPPORTED_ALTER,
            ..
        }
    ));
    table.sql_meta = vec![9; 100];
    let request = cluster.alter(node(3), &table);
    assert_eq!(conf(cluster.wait(request)), (id, 2));
    cluster.sim.run_for(Duration::from_millis(10));
    cluster.check_agreement().unwrap();
    for node_id in cluster.up() {
        assert_eq!(
            cluster.dict(node_id).table(id).unwrap().sql_meta,
            vec![9; 100]
        );
    }
}
