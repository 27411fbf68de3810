//! The decoder against valid, random, truncated and corrupted input.

use proptest::prelude::*;
use signal::frame::{check_header, FRAME_HEADER_BYTES, FRAME_PAYLOAD_MAX_BYTES};
use signal::*;

fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

fn addr(n: u8, block: BlockNumber, instance: u16) -> BlockRef {
    BlockRef::new(node(n), block, instance)
}

fn change_example() -> Vec<u8> {
    let mut out = Vec::new();
    signal::sub_change::push(
        &mut out,
        &signal::sub_change::Entry {
            kind: signal::sub_change::UPDATE,
            flags: 0,
            table: 7,
            version: 1,
            partition: 2,
            before: &[1, 2, 3],
            after: &[1, 2, 4],
        },
    );
    out
}

#[test]
fn row_change_entries_round_trip_and_refuse_short_ones() {
    let mut bytes = change_example();
    let delete = signal::sub_change::Entry {
        kind: signal::sub_change::DELETE,
        flags: 0,
        table: 9,
        version: 4,
        partition: 0,
        before: &[9; 20],
        after: &[],
    };
    signal::sub_change::push(&mut bytes, &delete);
    let entries: Vec<_> = signal::sub_change::entries(&bytes)
        .collect::<Result<_, _>>()
        .expect("whole entries");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].after, &[1, 2, 4]);
    assert_eq!(entries[1], delete);
    assert_eq!(
        signal::sub_change::size(&delete),
        bytes.len() - change_example().len()
    );
    // Every cut short, and an unknown kind, is an error, never a panic.
    for cut in 1..bytes.len() {
        let parsed: Result<Vec<_>, _> = signal::sub_change::entries(&bytes[..cut]).collect();
        if cut != change_example().len() {
            assert!(parsed.is_err(), "cut at {cut}");
        }
    }
    let mut unknown = change_example();
    unknown[0] = 9;
    assert!(signal::sub_change::entries(&unknown).any(|e| e.is_err()));
}

/// One example of every signal, so every GSN's encoder and decoder meet.
fn one_of_each() -> Vec<SignalBody> {
    let view = MembershipView {
        view_id: 7,
        president: node(2),
        members: vec![node(2), node(3), node(5)],
    };
    let members: NodeBitmask = [node(2), node(3)].into_iter().collect();
    let bodies = vec![
        SignalBody::Timeout { timer_id: 9 },
        SignalBody::NodeConnected { node: node(4) },
        SignalBody::NodeDisconnected { node: node(4) },
        SignalBody::Continue { what: 2 },
        SignalBody::FsConf {
            request: 7,
            error: "fsync of redo file 3 failed".into(),
        },
        SignalBody::CmRegReq {
            node: node(3),
            version: VERSION,
            start_id: u64::MAX,
        },
        SignalBody::CmRegConf { view: view.clone() },
        SignalBody::CmRegRef {
            reason: RegRefReason::NotPresident,
            president: Some(node(2)),
        },
        SignalBody::CmViewChange { view },
        SignalBody::Heartbeat { view_id: 3 },
        SignalBody::FailRep {
            failed: node(3),
            reason: FailReason::HeartbeatMissed,
            view_id: 4,
        },
        SignalBody::ArbitReq {
            view_id: 9,
            members: [node(2), node(5)].into_iter().collect(),
        },
        SignalBody::ArbitConf { view_id: 9 },
        SignalBody::ArbitRef {
            view_id: 0,
            message: "node 3's side holds the vote".to_owned(),
        },
        SignalBody::ApiRegReq { version: VERSION },
        SignalBody::ApiRegConf {
            version: VERSION,
            started: true,
            view_id: 4,
            members,
            heartbeat_interval_ms: 1500,
        },
        SignalBody::ApiRegRef {
            reason: RegRefReason::Starting,
        },
        SignalBody::MgmAllocNodeIdReq {
            requested: None,
            node_type: NodeType::Data,
            version: VERSION,
            pid: 4242,
            hostname: "host-ä".to_owned(),
        },
        SignalBody::MgmAllocNodeIdConf {
            node_id: node(2),
            config_ini: "[ndbd]\nNodeId=2\n".to_owned(),
            config_name: "config.ini".to_owned(),
        },
        SignalBody::MgmAllocNodeIdRef {
            message: "no free data node id".to_owned(),
        },
        SignalBody::MgmNodeStatusRep {
            state: NodeState::Started,
            pid: 1,
            version: VERSION,
            view_id: 2,
            president: Some(node(2)),
            members,
        },
        SignalBody::MgmEventRep {
            severity: Severity::Alert,
            category: signal::EventCategory::Error,
            level: 1,
            text: "node 3 failed".to_owned(),
        },
        SignalBody::MgmClusterLogReq {
            action: signal::ClusterLogAction::Threshold,
            severities: vec![Severity::Info, Severity::Alert],
            nodes: vec![node(2), node(3)],
            category: signal::EventCategory::Startup,
            threshold: 0,
        },
        SignalBody::MgmClusterLogConf {
            enabled: true,
            severities: vec![Severity::Warning],
            thresholds: vec![signal::EventThreshold {
                node: node(2),
                category: signal::EventCategory::Checkpoint,
                threshold: 15,
            }],
        },
        SignalBody::MgmClusterLogRef {
            message: "node 9 does not exist".to_owned(),
        },
        SignalBody::MgmShowReq {},
        SignalBody::MgmShowConf {
            nodes: vec![NodeStatusEntry {
                node: node(1),
                node_type: NodeType::Management,
                host: "localhost".to_owned(),
                node_group: NO_NODE_GROUP,
                state: NodeState::Started,
                pid: 77,
                version: VERSION,
                start_count: 1,
                view_id: 0,
                members: NodeBitmask::new(),
                mysqld: true,
                address: "127.0.0.1".to_owned(),
            }],
        },
        SignalBody::MgmStopReq {
            node: Some(node(3)),
            restart: true,
            force: false,
        },
        SignalBody::MgmStopConf {
            nodes: vec![node(2), node(3)],
        },
        SignalBody::MgmStopRef {
            message: "node 9 is not a data node".to_owned(),
        },
        SignalBody::MgmStopOrd { restart: false },
        SignalBody::MgmShutdownReq {},
        SignalBody::MgmNotJoiningRep {
            node: node(3),
            reason: "damaged redo control file".into(),
        },
        SignalBody::TransportHello {
            from: node(2),
            to: node(3),
            version: VERSION,
        },
        SignalBody::DictCreateTableReq {
            request_id: 1,
            table: vec![b'T', b'D', 1, 0],
        },
        SignalBody::DictCreateTableConf {
            request_id: 1,
            table_id: 16,
            version: 1,
        },
        SignalBody::DictCreateTableRef {
            request_id: 2,
            code: 721,
            message: "table `t` already exists".to_owned(),
        },
        SignalBody::DictDropTableReq {
            request_id: 3,
            table_id: 16,
        },
        SignalBody::DictDropTableConf {
            request_id: 3,
            table_id: 16,
        },
        SignalBody::DictDropTableRef {
            request_id: 4,
            code: 723,
            message: "no table with id 99".to_owned(),
        },
        SignalBody::DictAlterTableReq {
            request_id: 5,
            table_id: 16,
            table: vec![0, 255],
        },
        SignalBody::DictAlterTableConf {
            request_id: 5,
            table_id: 16,
            version: 2,
        },
        SignalBody::DictAlterTableRef {
            request_id: 6,
            code: 741,
            message: "the primary key cannot change".to_owned(),
        },
        SignalBody::DictSchemaPrepare {
            trans_id: u64::MAX - 1,
            op: SchemaOp::AlterTable,
            table_id: 16,
            schema_version: 9,
            next_object_id: 20,
            group: DictTableGroup {
                tables: vec![vec![1, 2, 3], vec![], vec![4]],
            },
        },
        SignalBody::DictSchemaPrepared { trans_id: 7 },
        SignalBody::DictSchemaPrepareRef {
            trans_id: 7,
            message: "disk full".to_owned(),
        },
        SignalBody::DictSchemaCommit { trans_id: 7 },
        SignalBody::DictSchemaCommitted { trans_id: 7 },
        SignalBody::DictSchemaAbort { trans_id: 8 },
        SignalBody::DictGetSchemaReq {},
        SignalBody::DictSchemaRep {
            tables: vec![
                DictTableGroup {
                    tables: vec![vec![9; 5]],
                },
                DictTableGroup { tables: vec![] },
            ],
            version: 9,
            next_object_id: 20,
            last: true,
        },
        SignalBody::DictTakeoverReq { view_id: 4 },
        SignalBody::DictTakeoverConf {
            view_id: 4,
            trans_id: 7,
            state: SchemaTransState::Prepared,
        },
        SignalBody::MembershipViewRep {
            view: MembershipView {
                view_id: 4,
                president: node(3),
                members: vec![node(3), node(4)],
            },
        },
        SignalBody::ApiFailRep { node: node(200) },
        SignalBody::SchemaLoadReq {
            tables: vec![DictTableGroup {
                tables: vec![vec![7; 3]],
            }],
            schema_version: 3,
            cluster_schema: true,
        },
        SignalBody::SchemaLoadConf {
            schema_version: 3,
            code: 0,
            message: String::new(),
        },
        SignalBody::SchemaChangeReq {
            op: SchemaOp::CreateTable,
            table_id: 17,
            schema_version: 4,
            group: DictTableGroup {
                tables: vec![vec![1]],
            },
        },
        SignalBody::SchemaChangeConf {
            table_id: 17,
            schema_version: 4,
            code: 0,
            message: String::new(),
        },
        SignalBody::DictGetTableReq {
            request_id: 9,
            table_id: 0,
            name: "accounts".to_owned(),
        },
        SignalBody::DictGetTableConf {
            request_id: 9,
            group: DictTableGroup {
                tables: vec![vec![2, 2]],
            },
        },
        SignalBody::DictGetTableRef {
            request_id: 9,
            code: 723,
            message: "no table `accounts`".to_owned(),
        },
        SignalBody::TcKeyReq {
            tx_id: 1 << 48 | 5,
            flags: tc_flags::START | tc_flags::COMMIT,
            ops: vec![1, 2, 3, 4],
        },
        SignalBody::TcKeyConf {
            tx_id: 5,
            flags: tc_flags::COMMITTED,
            epoch: (12 << 32) | 3,
            incarnation: 0xdead_beef,
            results: vec![0; 6],
        },
        SignalBody::TcKeyRef {
            tx_id: 5,
            code: 630,
            op_index: 2,
            message: "duplicate key".to_owned(),
        },
        SignalBody::TcScanReq {
            tx_id: 6,
            scan_id: 1,
            flags: tc_flags::START,
            spec: vec![9, 9],
        },
        SignalBody::TcScanConf {
            tx_id: 6,
            scan_id: 1,
            rows: vec![3; 10],
            done: false,
            released: false,
        },
        SignalBody::TcScanNextReq {
            tx_id: 6,
            scan_id: 1,
            close: true,
        },
        SignalBody::TcScanRef {
            tx_id: 6,
            scan_id: 1,
            code: 723,
            message: "no such table".to_owned(),
        },
        SignalBody::TcWaitGciReq {
            gci: 40,
            incarnation: 7,
        },
        SignalBody::TcWaitGciConf {
            gci: 40,
            incarnation: 7,
            durable_gci: 41,
        },
        SignalBody::TcWaitGciRef {
            gci: 40,
            incarnation: 7,
            code: 9006,
            message: "lost".to_owned(),
        },
        SignalBody::LdmKeyReq {
            tx_id: 7,
            tc: BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 1),
            chain: [node(4)].into_iter().collect(),
            ops: vec![5; 7],
        },
        SignalBody::LdmKeyConf {
            tx_id: 7,
            results: vec![1],
            ok_in_order: 1,
        },
        SignalBody::LdmCommitReq {
            tx_id: 7,
            epoch: (12 << 32) | 3,
        },
        SignalBody::LdmCommitChainReq {
            tx_id: 7,
            epoch: (12 << 32) | 3,
            tc: BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 0),
            next: RefChain::from_slice(&[BlockRef::new(
                node(4),
                BlockNumber::LOCAL_DATA_MANAGER,
                1,
            )]),
        },
        SignalBody::LdmCommitConf { tx_id: 7, gci: 12 },
        SignalBody::LdmCommitBatchReq {
            epoch: (12 << 32) | 3,
            tc: BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 0),
            next: RefChain::from_slice(&[BlockRef::new(
                node(4),
                BlockNumber::LOCAL_DATA_MANAGER,
                1,
            )]),
            tx_ids: vec![7, 1 << 50, 9],
        },
        SignalBody::LdmCommitBatchConf {
            gci: 12,
            tx_ids: vec![7, 9],
        },
        SignalBody::LdmKeyCommitReq {
            tx_id: 7,
            tc: BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 0),
            epoch: (12 << 32) | 3,
            chain: [node(4)].into_iter().collect(),
            answer: BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 0),
            ops: vec![5; 7],
        },
        SignalBody::LdmOutcomeReq { tx_id: 7 },
        SignalBody::LdmKeyCommitted {
            tx_id: 7,
            gci: 12,
            pending: 1,
            results: vec![1],
            ok_in_order: 1,
        },
        SignalBody::LdmReadReq {
            tx_id: 7,
            api: BlockRef::new(node(9), BlockNumber(70), 2),
            epoch: (12 << 32) | 3,
            ops: vec![5; 7],
        },
        SignalBody::LdmKeyBatchReq {
            count: 2,
            entries: {
                let tc = BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 0);
                let mut entries = Vec::new();
                key_batch::put_key_req(&mut entries, 7, tc, &signal::Chain::new(), 0, &[5; 7]);
                key_batch::put_key_req(
                    &mut entries,
                    1 << 50,
                    tc,
                    &[node(5)].into_iter().collect(),
                    (12 << 32) | 3,
                    &[6; 3],
                );
                entries
            },
        },
        SignalBody::LdmKeyConfBatch {
            count: 2,
            entries: {
                let mut entries = Vec::new();
                key_batch::put_key_conf(&mut entries, 7, 1, &[1]);
                key_batch::put_key_conf(&mut entries, 9, 0, &[2, 3]);
                entries
            },
        },
        SignalBody::LdmAbortReq { tx_id: 8 },
        SignalBody::LdmAbortConf { tx_id: 8 },
        SignalBody::LdmScanReq {
            tx_id: 9,
            scan_id: 2,
            spec: vec![1, 2],
        },
        SignalBody::LdmScanConf {
            tx_id: 9,
            scan_id: 2,
            partition: 3,
            rows: vec![],
            done: true,
        },
        SignalBody::LdmScanNextReq {
            tx_id: 9,
            scan_id: 2,
            partition: 3,
            close: false,
        },
        SignalBody::LdmScanRef {
            tx_id: 9,
            scan_id: 2,
            partition: 3,
            code: 274,
            message: "scan timed out".to_owned(),
        },
        SignalBody::GcpPrepareReq { epoch: 13 << 32 },
        SignalBody::GcpPrepareConf {
            epoch: (13 << 32) | 2,
        },
        SignalBody::GcpCommitReq {
            epoch: u64::MAX,
            incarnation: 9,
            previous_incarnation: 8,
            restart_gci: 57,
        },
        SignalBody::GcpCommitConf { epoch: 13 },
        SignalBody::SubGcpCompleteRep { epoch: 12 << 32 },
        SignalBody::NodeServingRep { serving: true },
        SignalBody::StartFailedRep {
            reason: "damaged".to_owned(),
        },
        SignalBody::CmNotJoiningRep {
            reason: "damaged".to_owned(),
        },
        SignalBody::DictListTablesReq {
            request_id: 5,
            after_id: 9,
        },
        SignalBody::DictListTablesConf {
            request_id: 5,
            tables: vec![DictTableName {
                id: 7,
                name: "db/def/t1".to_owned(),
            }],
            last: true,
        },
        SignalBody::TcAbortTxReq {
            tx_id: 0x1234_5678_9abc,
            message: "ALTER TABLE of table 16 waited 3000 ms".to_owned(),
        },
        SignalBody::GcpSaveReq { gci: 12 },
        SignalBody::GcpSaveConf { gci: 12 },
        SignalBody::GcpCompleteRep { gci: 12 },
        SignalBody::GcpStartReq {},
        SignalBody::GcpStartConf {
            gci: 11,
            incarnation: 9,
            previous_incarnation: 8,
            restart_gci: 57,
            epoch: 0x0000_000b_0000_0003,
            previous_epoch: 0x0000_000b_0000_0002,
        },
        SignalBody::GcpHurryReq { gci: 12 },
        SignalBody::GcpKeepReq {
            gci: 12,
            serving: NodeBitmask::from_iter([node(2), node(3)]),
            incarnation: 9,
        },
        SignalBody::GcpKeepConf { gci: 12 },
        SignalBody::RestartInfoReq {},
        SignalBody::RestartInfoConf {
            kept_gci: 57,
            serving: NodeBitmask::from_iter([node(2)]),
            incarnation: 8,
        },
        SignalBody::RestartGciReq { gci: 57 },
        SignalBody::RestartGciConf {
            gci: 57,
            restored: true,
        },
        SignalBody::TcTakeOverReq {
            takeover_id: 2,
            failed: NodeBitmask::from_iter([node(3)]),
        },
        SignalBody::TcTakeOverConf {
            takeover_id: 2,
            failed: NodeBitmask::from_iter([node(3)]),
        },
        SignalBody::TcShutdownReq {},
        SignalBody::TcShutdownConf {},
        SignalBody::LdmTakeOverReq {
            takeover_id: 2,
            failed: NodeBitmask::from_iter([node(3), node(4)]),
        },
        SignalBody::LdmTakeOverConf {
            takeover_id: 2,
            tx_ids: vec![7, 8],
            epochs: vec![0, 12 << 32 | 3],
            last: true,
        },
        SignalBody::TakeOverDoneRep {
            failed: NodeBitmask::from_iter([node(3)]),
        },
        SignalBody::NodeStateReq {
            view_id: 4,
            state_id: 2,
            running: true,
            serving: NodeBitmask::from_iter([node(2)]),
            receiving: NodeBitmask::from_iter([node(3)]),
        },
        SignalBody::NodeStateConf { state_id: 2 },
        SignalBody::NodeCopyReq {},
        SignalBody::NodeCopyConf {},
        SignalBody::CopyFragReq {
            copy_id: 1,
            table_id: 5,
            partition: 3,
        },
        SignalBody::CopyFragConf {
            copy_id: 1,
            table_id: 5,
            partition: 3,
            rows: 1_000,
            code: 0,
            message: String::new(),
        },
        SignalBody::SubStartReq {
            sub_id: 3,
            flags: signal::sub_flags::FULL_IMAGES,
            tables: vec![7, 9],
        },
        SignalBody::SubStartConf {
            sub_id: 3,
            start_epoch: (12 << 32) | 1,
            incarnation: 0x5eed_0001,
        },
        SignalBody::SubIncarnationRep {
            incarnation: 0x5eed_0002,
            previous_incarnation: 0x5eed_0001,
            restart_gci: 41,
        },
        SignalBody::SubLostRef {
            sub_id: 3,
            incarnation: 0x5eed_0002,
            previous_incarnation: 0x5eed_0001,
            restart_gci: 41,
            message: "no node of the group kept it".to_owned(),
        },
        SignalBody::SubStartRef {
            sub_id: 3,
            code: 723,
            message: "no such table".to_owned(),
        },
        SignalBody::SubStopReq { sub_id: 3 },
        SignalBody::SubCaptureReq { tables: vec![7] },
        SignalBody::SubCaptureConf {
            max_epoch: 12 << 32,
            followed: vec![7, 9],
        },
        SignalBody::SubTableData {
            epoch: (12 << 32) | 2,
            count: 1,
            changes: change_example(),
        },
        SignalBody::SubEpochData {
            sub_id: 3,
            epoch: (12 << 32) | 2,
            bucket: node(2),
            count: 1,
            changes: change_example(),
            complete: true,
        },
        SignalBody::SubGapRep {
            sub_id: 3,
            from: (12 << 32) | 2,
            to: 13 << 32,
        },
        SignalBody::SubGcpCompleteAck {
            sub_id: 3,
            epoch: (12 << 32) | 2,
        },
        SignalBody::DbinfoScanReq {
            request_id: 8,
            table: "memoryusage".into(),
        },
        SignalBody::DbinfoScanConf {
            request_id: 8,
            rows: vec![DbinfoRow {
                ints: vec![1, 65_536, 2, 1 << 30, 32_768],
                texts: vec!["Data memory".into()],
            }],
        },
        SignalBody::DbinfoScanRef {
            request_id: 8,
            code: 4009,
            message: "no ndbinfo table `nope`".into(),
        },
        SignalBody::SubHolderReq {
            api: addr(9, BlockNumber::API_CLUSTER, 1),
            sub_id: 3,
            start_epoch: (12 << 32) | 2,
        },
        SignalBody::SubHolderConf {
            api: addr(9, BlockNumber::API_CLUSTER, 1),
            sub_id: 3,
            nodes: vec![node(2), node(4)],
            starts: vec![0, (12 << 32) | 2],
        },
        SignalBody::SubHandbackConf {
            api: addr(9, BlockNumber::API_CLUSTER, 1),
            sub_id: 3,
            bucket: node(4),
            last_epoch: (12 << 32) | 3,
        },
        SignalBody::BackupFragReq {
            request_id: 4,
            backup_id: 2,
            table_id: 17,
            table_version: 3,
            partition: 5,
            rows_max: 4_096,
            flags: signal::backup_frag::START,
            path: "/backups/BACKUP-2/T17.P5.data".into(),
        },
        SignalBody::BackupFragConf {
            request_id: 4,
            rows: 1 << 33,
            bytes: 1 << 40,
            done: true,
        },
        SignalBody::BackupFragRef {
            request_id: 4,
            code: 9009,
            message: "node 2: write /backups/BACKUP-2/T17.P5.data: No space left".into(),
        },
        SignalBody::BackupLogReq {
            request_id: 5,
            backup_id: 2,
            flags: signal::backup_log::START,
            stop_epoch: (12 << 32) | 4,
            tables: vec![17, 18],
            path: "/backups/BACKUP-2/L2.0.log".into(),
        },
        SignalBody::BackupLogConf {
            request_id: 5,
            records: 1 << 33,
            bytes: 1 << 40,
            epoch: (12 << 32) | 4,
            done: false,
        },
        SignalBody::BackupLogRef {
            request_id: 5,
            code: 9009,
            message: "table bk was changed during the backup".into(),
        },
    ];
    let mut gsns: Vec<u16> = bodies.iter().map(SignalBody::gsn).collect();
    gsns.sort_unstable();
    assert_eq!(
        gsns,
        SignalBody::ALL_GSNS.to_vec(),
        "one example per signal"
    );
    bodies
}

fn frame_of(bodies: &[SignalBody]) -> (Vec<Signal>, Vec<u8>) {
    let signals: Vec<Signal> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| Signal {
            receiver: addr(3, BlockNumber::MEMBERSHIP, i as u16),
            sender: addr(2, BlockNumber::MEMBERSHIP, 0),
            body: body.clone(),
        })
        .collect();
    let mut bytes = Vec::new();
    encode_frame(&signals, &mut bytes).unwrap();
    (signals, bytes)
}

fn decode_all(bytes: &[u8]) -> Result<Option<Vec<Signal>>, DecodeError> {
    match decode_frame(bytes)? {
        None => Ok(None),
        Some((frame, used)) => {
            assert_eq!(used, bytes.len());
            frame.signals().collect::<Result<Vec<_>, _>>().map(Some)
        }
    }
}

#[test]
fn every_signal_round_trips() {
    let (signals, bytes) = frame_of(&one_of_each());
    assert_eq!(decode_all(&bytes).unwrap().unwrap(), signals);
}

#[test]
fn two_frames_back_to_back_decode_one_at_a_time() {
    let (first, mut bytes) = frame_of(&one_of_each()[..3]);
    let (second, more) = frame_of(&one_of_each()[3..]);
    let first_len = bytes.len();
    bytes.extend_from_slice(&more);
    let (frame, used) = decode_frame(&bytes).unwrap().unwrap();
    assert_eq!(used, first_len);
    assert_eq!(
        frame.signals().collect::<Result<Vec<_>, _>>().unwrap(),
        first
    );
    assert_eq!(decode_all(&bytes[used..]).unwrap().unwrap(), second);
}

#[test]
fn every_prefix_asks_for_more_and_never_fails() {
    let (_, bytes) = frame_of(&one_of_each());
    for cut in 0..bytes.len() {
        assert_eq!(decode_all(&bytes[..cut]), Ok(None), "prefix of {cut} bytes");
    }
}

#[test]
fn every_flipped_bit_is_refused() {
    let (_, bytes) = frame_of(&one_of_each()[..6]);
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            match decode_all(&bad) {
                Err(_) => {}
                // A flipped length bit may make the frame look longer: it waits for bytes that never come.
                Ok(None) => assert!((8..12).contains(&i), "byte {i} bit {bit}"),
                Ok(Some(_)) => panic!("corruption at byte {i} bit {bit} was accepted"),
            }
        }
    }
}

#[test]
fn oversized_length_is_refused_from_the_header_alone() {
    let mut header = vec![b'S', b'K', signal::frame::WIRE_VERSION, 0, 1, 0, 0, 0];
    header.extend_from_slice(&((FRAME_PAYLOAD_MAX_BYTES + 1) as u32).to_le_bytes());
    header.extend_from_slice(&[0; 4]);
    assert_eq!(header.len(), FRAME_HEADER_BYTES);
    assert!(matches!(
        check_header(&header),
        Err(DecodeError::FrameTooLarge { .. })
    ));
    assert!(decode_frame(&header).is_err());
}

#[test]
fn frame_writer_refuses_what_does_not_fit_and_leaves_the_buffer_intact() {
    let big = SignalBody::MgmEventRep {
        severity: Severity::Info,
        category: signal::EventCategory::Info,
        level: 7,
        text: "x".repeat(FRAME_PAYLOAD_MAX_BYTES / 2),
    };
    let signal = Signal {
        receiver: addr(1, BlockNumber::MANAGEMENT, 0),
        sender: addr(2, BlockNumber::MEMBERSHIP, 0),
        body: big,
    };
    let mut out = Vec::new();
    let mut writer = FrameWriter::new(&mut out);
    writer.push(&signal).unwrap();
    let before = writer.payload_bytes();
    assert!(matches!(
        writer.push(&signal),
        Err(EncodeError::FrameFull { .. })
    ));
    assert_eq!(writer.payload_bytes(), before);
    let len = writer.finish();
    assert_eq!(
        decode_all(&out[..len]).unwrap().unwrap(),
        vec![signal.clone()]
    );

    let huge = Signal {
        body: SignalBody::MgmEventRep {
            severity: Severity::Info,
            category: signal::EventCategory::Info,
            level: 7,
            text: "x".repeat(FRAME_PAYLOAD_MAX_BYTES + 1),
        },
        ..signal
    };
    let mut out = Vec::new();
    let mut writer = FrameWriter::new(&mut out);
    assert!(matches!(
        writer.push(&huge),
        Err(EncodeError::SignalTooLarge { .. })
    ));
    assert_eq!(writer.finish(), 0);
    assert!(out.is_empty());
}

/// Rebuilds the header checksum so that corruption reaches the signal decoder.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[0..12]), &bytes[FRAME_HEADER_BYTES..]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_all(&bytes);
    }

    #[test]
    fn random_bytes_behind_a_valid_header_never_panic(
        count in 1u16..8,
        payload in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut bytes = vec![b'S', b'K', 1, 0];
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&[0; 4]);
        bytes.extend_from_slice(&payload);
        reseal(&mut bytes);
        let _ = decode_all(&bytes);
    }

    #[test]
    fn resealed_corruption_is_refused_or_decodes_cleanly(
        position in any::<prop::sample::Index>(),
        value in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let (_, mut bytes) = frame_of(&one_of_each());
        let i = FRAME_HEADER_BYTES + position.index(bytes.len() - FRAME_HEADER_BYTES);
        bytes[i] = value;
        reseal(&mut bytes);
        let _ = decode_all(&bytes);
        // Truncate the payload and fix the header to match: the signal decoder must refuse cleanly.
        let keep = FRAME_HEADER_BYTES + cut.index(bytes.len() - FRAME_HEADER_BYTES);
        bytes.truncate(keep);
        let payload_len = (keep - FRAME_HEADER_BYTES) as u32;
        bytes[8..12].copy_from_slice(&payload_len.to_le_bytes());
        reseal(&mut bytes);
        let _ = decode_all(&bytes);
    }
}

/// A byte string (op batches, results) is a u32 count and the bytes as they
/// are: the bulk copy keeps the layout of the element-by-element encoding.
#[test]
fn byte_strings_are_a_count_and_the_bytes_and_a_lying_count_is_refused() {
    use signal::codec::{Field, Reader};
    let bytes: Vec<u8> = (0..=255u8).collect();
    let mut out = Vec::new();
    bytes.put(&mut out);
    assert_eq!(&out[..4], &256u32.to_le_bytes());
    assert_eq!(&out[4..], &bytes[..]);
    let mut reader = Reader::new(&out);
    assert_eq!(Vec::<u8>::take(&mut reader).unwrap(), bytes);
    assert_eq!(reader.remaining(), 0);
    // A list of another type still goes element by element.
    let words: Vec<u16> = vec![1, 0x0302];
    let mut out = Vec::new();
    words.put(&mut out);
    assert_eq!(out, [2, 0, 0, 0, 1, 0, 2, 3]);
    // One byte fewer than the count claims: truncated, nothing allocated.
    let mut short = 5u32.to_le_bytes().to_vec();
    short.extend_from_slice(&[9; 4]);
    let mut reader = Reader::new(&short);
    assert!(matches!(
        Vec::<u8>::take(&mut reader),
        Err(DecodeError::Truncated {
            needed: 5,
            available: 4
        })
    ));
}
