//! Whole `config.ini` files: every parameter, defaults, aliases, automatic
//! node ids, and every kind of refusal with its message.

use std::path::PathBuf;

use config::{parse, ClusterConfig, ConfigErrorKind};
use kernel::thread_config::ThreadRole;
use signal::{NodeId, NodeType};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

fn ok(text: &str) -> ClusterConfig {
    match parse(text, "config.ini") {
        Ok(config) => config,
        Err(error) => panic!("should parse: {error}\n{text}"),
    }
}

fn refused(text: &str) -> String {
    match parse(text, "config.ini") {
        Ok(config) => panic!("should be refused:\n{text}\nparsed as {config:?}"),
        Err(error) => error.to_string(),
    }
}

fn node(id: u8) -> NodeId {
    NodeId::new(id).expect("test ids are not 0")
}

const MINIMAL: &str = "[ndb_mgmd]\n[ndbd]\n[ndbd]\n";

#[test]
fn a_full_file_with_every_parameter() {
    let text = "\
# A cluster of two data nodes.
[ndbd default]
NoOfReplicas=2
DataMemory=2G
ThreadConfig=ldm={count=4,cpubind=0-3},tc={count=2,cpuset=4-5,spintime=50},recv,send,main,rep,io,wd
MaxNoOfExecutionThreads=8
NoOfFragmentLogParts=8
HeartbeatIntervalDbDb=1000
HeartbeatIntervalDbApi=1200
TimeBetweenGlobalCheckpoints=1000
TimeBetweenEpochs=50
TransactionDeadlockDetectionTimeout=2000
StartPartialTimeout=5000
FragmentLogFileSize=64M
NoOfFragmentLogFiles=4
LockPagesInMainMemory=1
StopOnError=true
BatchScheduling=1
UseShm=0
DataDir=/var/lib/skarv

[ndb_mgmd default]
DataDir=/var/lib/skarv/mgmd

[ndb_mgmd]
NodeId=1
HostName=mgm.example
PortNumber=2186

[ndbd]
NodeId=3
HostName=db1.example
ServerPort=3000
DataDir=/data/3

[ndbd]
NodeId=4
HostName=db2.example

[api default]
HostName=app.example

[mysqld]
NodeId=10
HostName=sql.example

[api]
NodeId=11
";
    let config = ok(text);
    assert_eq!(config.source_name, "config.ini");

    assert_eq!(config.management_nodes.len(), 1);
    let mgmd = config.mgmd();
    assert_eq!(mgmd.node_id, node(1));
    assert_eq!(mgmd.host_name, "mgm.example");
    assert_eq!(mgmd.port, 2186);
    assert_eq!(mgmd.data_dir, PathBuf::from("/var/lib/skarv/mgmd"));

    assert_eq!(config.data_nodes.len(), 2);
    let db3 = &config.data_nodes[0];
    assert_eq!(db3.node_id, node(3));
    assert_eq!(db3.host_name, "db1.example");
    assert_eq!(db3.server_port, 3000);
    assert_eq!(db3.data_dir, PathBuf::from("/data/3"));
    assert_eq!(db3.node_group, 0);
    let db4 = &config.data_nodes[1];
    assert_eq!(db4.server_port, 2186 + 4, "PortNumber + node id");
    assert_eq!(db4.data_dir, PathBuf::from("/var/lib/skarv"));
    assert_eq!(db4.node_group, 0);

    for data in &config.data_nodes {
        let params = &data.params;
        assert_eq!(params.no_of_replicas, 2);
        assert_eq!(params.data_memory_bytes, 2 * GIB);
        assert_eq!(params.threads.count(ThreadRole::Ldm), 4);
        assert_eq!(params.threads.count(ThreadRole::Tc), 2);
        assert_eq!(params.threads.threads[0].cpubind, Some(0));
        assert!(params
            .thread_config
            .as_deref()
            .is_some_and(|t| t.starts_with("ldm={count=4")));
        assert_eq!(params.max_no_of_execution_threads, 8);
        assert_eq!(params.no_of_fragment_log_parts, 8);
        assert_eq!(params.heartbeat_interval_db_db_ms, 1000);
        assert_eq!(params.heartbeat_interval_db_api_ms, 1200);
        assert_eq!(params.time_between_global_checkpoints_ms, 1000);
        assert_eq!(params.time_between_epochs_ms, 50);
        assert_eq!(params.transaction_deadlock_detection_timeout_ms, 2000);
        assert_eq!(params.start_partial_timeout_ms, 5000);
        assert_eq!(params.fragment_log_file_size_bytes, 64 << 20);
        assert_eq!(params.no_of_fragment_log_files, 4);
        assert_eq!(params.lock_pages_in_memory, 1);
        assert!(params.stop_on_error);
        assert!(params.threads.threads.iter().all(|t| t.batch));
        assert!(!params.use_shm);
    }

    assert_eq!(config.api_nodes.len(), 2);
    assert_eq!(config.api_nodes[0].node_id, node(10));
    assert!(config.api_nodes[0].mysqld);
    assert_eq!(
        config.api_nodes[0].host_name.as_deref(),
        Some("sql.example")
    );
    assert_eq!(config.api_nodes[1].node_id, node(11));
    assert!(!config.api_nodes[1].mysqld);
    assert_eq!(
        config.api_nodes[1].host_name.as_deref(),
        Some("app.example")
    );

    assert_eq!(config.node_type(node(1)), Some(NodeType::Management));
    assert_eq!(config.node_type(node(3)), Some(NodeType::Data));
    assert_eq!(config.node_type(node(10)), Some(NodeType::Api));
    assert_eq!(config.node_type(node(2)), None);
    assert_eq!(config.data_node(node(4)).map(|n| n.server_port), Some(2190));
    assert!(config.data_node(node(1)).is_none());
}

#[test]
fn defaults_are_ndbs() {
    let config = ok("[ndb_mgmd]\n[ndbd]\n[ndbd]\n[api]\n");
    let mgmd = config.mgmd();
    assert_eq!(mgmd.node_id, node(1));
    assert_eq!(mgmd.host_name, "localhost");
    assert_eq!(mgmd.port, 1186);
    assert_eq!(mgmd.data_dir, PathBuf::from("."));
    let ids: Vec<u8> = config.data_nodes.iter().map(|n| n.node_id.get()).collect();
    assert_eq!(ids, [2, 3]);
    for data in &config.data_nodes {
        assert_eq!(data.host_name, "localhost");
        assert_eq!(data.data_dir, PathBuf::from("."));
        assert_eq!(data.server_port, 1186 + u16::from(data.node_id.get()));
        let params = &data.params;
        assert_eq!(params.no_of_replicas, 2);
        assert_eq!(params.data_memory_bytes, 98 * MIB);
        assert_eq!(params.thread_config, None);
        assert_eq!(params.max_no_of_execution_threads, 2);
        assert_eq!(params.threads.count(ThreadRole::Ldm), 1);
        assert_eq!(params.threads.count(ThreadRole::Tc), 0);
        assert_eq!(params.no_of_fragment_log_parts, 4);
        assert_eq!(params.heartbeat_interval_db_db_ms, 250);
        assert_eq!(params.heartbeat_interval_db_api_ms, 1500);
        assert_eq!(params.time_between_global_checkpoints_ms, 2000);
        assert_eq!(params.time_between_epochs_ms, 100);
        assert_eq!(params.transaction_deadlock_detection_timeout_ms, 1200);
        assert_eq!(params.max_no_of_concurrent_transactions, 4096);
        assert_eq!(params.max_no_of_concurrent_operations, 32768);
        assert_eq!(params.max_no_of_concurrent_scans, 256);
        assert_eq!(params.start_partial_timeout_ms, 30000);
        assert_eq!(params.arbitration_timeout_ms, 7500);
        assert_eq!(params.fragment_log_file_size_bytes, 16 << 20);
        assert_eq!(params.no_of_fragment_log_files, 16);
        assert_eq!(params.lock_pages_in_memory, 0);
        assert!(!params.stop_on_error);
        // Not NDB's default (off): local links skip the loopback TCP stack.
        assert!(params.use_shm);
        assert!(params
            .threads
            .threads
            .iter()
            .all(|t| !t.batch && !t.realtime));
    }
    assert_eq!(config.data_nodes[0].node_group, 0);
    assert_eq!(config.data_nodes[1].node_group, 0);
    assert_eq!(config.api_nodes[0].node_id, node(4));
    assert_eq!(config.api_nodes[0].host_name, None);
}

#[test]
fn max_execution_threads_picks_the_layout_and_log_parts_follow() {
    let config = ok("[ndbd default]\nMaxNoOfExecutionThreads=16\n[ndb_mgmd]\n[ndbd]\n[ndbd]\n");
    let params = &config.data_nodes[0].params;
    assert_eq!(params.threads.count(ThreadRole::Ldm), 8);
    assert_eq!(params.threads.count(ThreadRole::Tc), 3);
    assert_eq!(params.threads.count(ThreadRole::Send), 1);
    assert_eq!(params.threads.count(ThreadRole::Recv), 2);
    assert_eq!(
        params.no_of_fragment_log_parts, 8,
        "raised to the ldm count"
    );
    // ThreadConfig wins over MaxNoOfExecutionThreads; an empty one is none.
    let config = ok(
        "[ndbd default]\nMaxNoOfExecutionThreads=16\nThreadConfig=ldm={count=2}\n\
                     [ndb_mgmd]\n[ndbd]\nThreadConfig=\n[ndbd]\n",
    );
    assert_eq!(config.data_nodes[0].params.thread_config, None);
    assert_eq!(
        config.data_nodes[0].params.threads.count(ThreadRole::Ldm),
        8
    );
    assert_eq!(
        config.data_nodes[1].params.threads.count(ThreadRole::Ldm),
        2
    );
    assert_eq!(config.data_nodes[1].params.no_of_fragment_log_parts, 4);
}

#[test]
fn sizes_syntax_and_case() {
    let text = "\
; NDB's other comment form
[NDBD DEFAULT]
datamemory: 512M   # trailing comment
noofreplicas = 1
STOPONERROR=Yes
[NDB_MGMD]
[NDBD]
[ndbd]
DataMemory=3g
";
    let config = ok(text);
    assert_eq!(config.data_nodes[0].params.data_memory_bytes, 512 * MIB);
    assert_eq!(config.data_nodes[1].params.data_memory_bytes, 3 * GIB);
    assert!(config.data_nodes[0].params.stop_on_error);
    let groups: Vec<u32> = config.data_nodes.iter().map(|n| n.node_group).collect();
    assert_eq!(groups, [0, 1], "one replica: one node per group");
}

#[test]
fn ndb_section_aliases() {
    let text = "[DB DEFAULT]\nNoOfReplicas=1\n[MGM DEFAULT]\nPortNumber=4000\n[MGM]\nId=7\n\
                [DB]\n[TCP DEFAULT]\nSendBufferMemory=8M\n[mysqld default]\nHostName=h\n\
                [API]\n[mysqld]\n";
    let config = ok(text);
    assert_eq!(config.mgmd().node_id, node(7));
    assert_eq!(config.mgmd().port, 4000);
    assert_eq!(config.data_nodes[0].node_id, node(1));
    assert_eq!(config.data_nodes[0].server_port, 4001);
    let api: Vec<(u8, bool, Option<&str>)> = config
        .api_nodes
        .iter()
        .map(|n| (n.node_id.get(), n.mysqld, n.host_name.as_deref()))
        .collect();
    assert_eq!(api, [(2, false, Some("h")), (3, true, Some("h"))]);
}

#[test]
fn repeated_sections_get_the_lowest_free_ids_in_file_order() {
    let text = "\
[ndb_mgmd]
[ndbd]
NodeId=2
[ndbd]
[ndbd]
NodeId=5
[ndbd]
[api]
[api]
NodeId=1
[api]
";
    let config = ok(text);
    assert_eq!(config.mgmd().node_id, node(3), "1 and 2 are taken");
    let data: Vec<u8> = config.data_nodes.iter().map(|n| n.node_id.get()).collect();
    assert_eq!(data, [2, 4, 5, 6]);
    let groups: Vec<u32> = config.data_nodes.iter().map(|n| n.node_group).collect();
    assert_eq!(groups, [0, 0, 1, 1]);
    let api: Vec<u8> = config.api_nodes.iter().map(|n| n.node_id.get()).collect();
    assert_eq!(api, [7, 1, 8]);
}

#[test]
fn many_api_slots_up_to_255() {
    let mut text = String::from(MINIMAL);
    for _ in 0..252 {
        text.push_str("[api]\n");
    }
    let config = ok(&text);
    assert_eq!(config.api_nodes.last().map(|n| n.node_id.get()), Some(255));
    text.push_str("[api]\n");
    let message = refused(&text);
    assert!(
        message.ends_with(
            "[api] section starting at line 256 gets no node id: all of 1..=255 are taken"
        ),
        "{message}"
    );
}

#[test]
fn unknown_parameter_names_it_and_the_section() {
    assert_eq!(
        refused("[ndb_mgmd]\n[ndbd]\nHostName=a\n\n\n\nDataMemroy=1G\n[ndbd]\n"),
        "config.ini:7: unknown parameter \"DataMemroy\" in [ndbd]"
    );
    assert_eq!(
        refused("[ndb_mgmd]\nDataMemory=1G\n[ndbd]\n[ndbd]\n"),
        "config.ini:2: unknown parameter \"DataMemory\" in [ndb_mgmd]"
    );
}

#[test]
fn bad_values_name_the_parameter_and_line() {
    let mut text = String::from("[ndb_mgmd]\n[ndbd]\n[ndbd]\n");
    for _ in 0..7 {
        text.push_str("# padding\n");
    }
    text.push_str("[ndbd default]\nNoOfReplicas=banana\n");
    assert_eq!(
        refused(&text),
        "config.ini:12: NoOfReplicas=banana: not a number; allowed: an integer 1..=4"
    );
    assert_eq!(
        refused("[ndb_mgmd]\n[ndbd default]\nDataMemory=0\n[ndbd]\n"),
        "config.ini:3: DataMemory=0: out of range; allowed 1M..16T"
    );
    let cases = [
        (
            "[ndbd default]\nStopOnError=maybe\n",
            "config.ini:2: StopOnError=maybe: not a boolean",
        ),
        (
            "[ndbd default]\nNoOfReplicas=5\n",
            "config.ini:2: NoOfReplicas=5: out of range; allowed 1..=4",
        ),
        (
            "[ndbd default]\nNoOfFragmentLogParts=5\n",
            "config.ini:2: NoOfFragmentLogParts=5: out of range",
        ),
        (
            "[ndbd default]\nTimeBetweenEpochs=32001\n",
            "config.ini:2: TimeBetweenEpochs=32001: out of range; allowed 0..=32000",
        ),
        (
            "[ndbd default]\nMaxNoOfExecutionThreads=100\n",
            "allowed 2..=72",
        ),
        (
            "[ndbd]\nNodeId=256\n",
            "config.ini:2: NodeId=256: out of range; allowed 1..=255",
        ),
        ("[ndbd]\nNodeId=0\n", "NodeId=0: out of range"),
        (
            "[ndbd]\nHostName=\n",
            "config.ini:2: HostName=: empty; allowed: a host name or address",
        ),
        (
            "[ndb_mgmd]\nPortNumber=70000\n",
            "PortNumber=70000: out of range; allowed 1..=65535",
        ),
        (
            "[ndbd default]\nDataMemory=1M\nDataMemory=2M\n",
            "config.ini:3: DataMemory is given twice for [ndbd default] (first at line 2)",
        ),
        (
            "[ndbd default]\nDataMemory=1M\n[ndbd default]\ndatamemory=2M\n",
            "config.ini:4: DataMemory is given twice",
        ),
        (
            "[ndbd default]\nNodeId=3\n",
            "config.ini:2: NodeId names one node, so it belongs in [ndbd], not in [ndbd default]",
        ),
        (
            "[ndbd]\nfoo bar\n",
            "config.ini:2: expected \"[section]\", \"name=value\" or a comment, found \"foo bar\"",
        ),
        (
            "[computer]\n",
            "config.ini:1: unknown section [computer]; allowed: [ndbd default]",
        ),
        (
            "[tcp default]\nPortNumber=1\n",
            "config.ini:2: unknown parameter \"PortNumber\" in [tcp default]",
        ),
        (
            "DataMemory=1M\n",
            "config.ini:1: parameter \"DataMemory\" comes before any section",
        ),
    ];
    for (body, expected) in cases {
        let text = format!("{body}[ndb_mgmd]\n[ndbd]\n[ndbd]\n");
        let message = refused(&text);
        assert!(
            message.contains(expected),
            "{body:?}: {message:?} lacks {expected:?}"
        );
        assert!(message.starts_with("config.ini:"), "{message}");
    }
}

#[test]
fn bad_thread_config_names_the_token_and_line() {
    let message = refused("[ndb_mgmd]\n[ndbd default]\nThreadConfig=ldm={count=4},ldn\n[ndbd]\n");
    assert_eq!(
        message,
        "config.ini:3: ThreadConfig: unknown thread type \"ldn\" at position 14; \
         allowed: ldm, tc, main, rep, recv, send, io, wd"
    );
    let error = parse("[ndb_mgmd]\n[ndbd]\nThreadConfig=ldm={count=3}\n", "c.ini");
    match error {
        Err(error) => {
            assert_eq!(error.line, Some(3));
            assert!(matches!(error.kind, ConfigErrorKind::ThreadConfig(_)));
            assert!(error
                .to_string()
                .contains("3 ldm threads; allowed counts: 0, 1, 2, 4"));
        }
        Ok(config) => panic!("parsed {config:?}"),
    }
}

#[test]
fn duplicate_node_ids_name_both_lines() {
    let text = "[ndb_mgmd]\nNodeId=1\n[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n[api]\nNodeId=2\n";
    assert_eq!(
        refused(text),
        "config.ini:8: NodeId=2 is already used by the [ndbd] section at line 4"
    );
}

#[test]
fn missing_sections_are_named() {
    assert_eq!(
        refused("[ndbd]\n[ndbd]\n"),
        "config.ini: no [ndb_mgmd] section; allowed: a cluster with at least one management server"
    );
    assert_eq!(
        refused("[ndb_mgmd]\n[api]\n"),
        "config.ini: no [ndbd] section; allowed: a cluster with at least one data node"
    );
    assert!(refused("").contains("no [ndb_mgmd] section"));
    assert!(refused("[ndbd default]\nNoOfReplicas=1\n[ndb_mgmd]\n").contains("no [ndbd] section"));
}

#[test]
fn replicas_must_divide_the_data_nodes_and_agree() {
    assert_eq!(
        refused("[ndb_mgmd]\n[ndbd]\n[ndbd]\n[ndbd]\n"),
        "config.ini: 3 data node(s) with NoOfReplicas=2; allowed: a multiple of NoOfReplicas \
         data nodes, so that every node group is full"
    );
    let message = refused("[ndb_mgmd]\n[ndbd]\n[ndbd]\nNoOfReplicas=1\n");
    assert_eq!(
        message,
        "config.ini:4: NoOfReplicas=1 for node 3 differs from NoOfReplicas=2 for node 2; \
         allowed: the same value for every data node"
    );
    let config = ok("[ndbd default]\nNoOfReplicas=3\n[ndb_mgmd]\n[ndbd]\n[ndbd]\n[ndbd]\n[ndbd]\n[ndbd]\n[ndbd]\n");
    let groups: Vec<u32> = config.data_nodes.iter().map(|n| n.node_group).collect();
    assert_eq!(groups, [0, 0, 0, 1, 1, 1]);
}

#[test]
fn log_parts_below_the_ldm_count_are_refused() {
    let message = refused(
        "[ndb_mgmd]\n[ndbd default]\nThreadConfig=ldm={count=8}\nNoOfFragmentLogParts=4\n[ndbd]\n[ndbd]\n",
    );
    assert!(
        message.starts_with(
            "config.ini:4: NoOfFragmentLogParts=4 for node 2 is less than its 8 ldm threads"
        ),
        "{message}"
    );
}

#[test]
fn server_port_past_65535_needs_an_explicit_one() {
    let message = refused("[ndb_mgmd]\nPortNumber=65530\n[ndbd]\nNodeId=10\n[ndbd]\n");
    assert!(
        message.starts_with("config.ini:3: node 10 has no ServerPort"),
        "{message}"
    );
    let config = ok("[ndb_mgmd]\nPortNumber=65530\n[ndbd]\nNodeId=10\nServerPort=5000\n[ndbd]\n");
    assert_eq!(config.data_nodes[0].server_port, 5000);
}

#[test]
fn two_nodes_on_one_port_of_one_host_are_refused() {
    let message = refused("[ndb_mgmd]\n[ndbd default]\nServerPort=2202\n[ndbd]\n[ndbd]\n");
    assert_eq!(
        message,
        "config.ini: node 3 listens on localhost:2202 (ServerPort), as node 2 does (ServerPort); \
         allowed: one node per port of a host (set ServerPort, or HostName)"
    );
    // 127.0.0.1 and an empty HostName are the same machine.
    let message = refused(
        "[ndb_mgmd]\nHostName=127.0.0.1\nPortNumber=1188\n[ndbd]\nNodeId=2\nServerPort=1188\n[ndbd]\n",
    );
    assert!(
        message
            .contains("node 2 listens on localhost:1188 (ServerPort), as node 1 does (PortNumber)"),
        "{message}"
    );
    // One port on two hosts is fine.
    let config =
        ok("[ndb_mgmd]\n[ndbd default]\nServerPort=2202\n[ndbd]\nHostName=a\n[ndbd]\nHostName=b\n");
    assert_eq!(config.data_nodes[1].server_port, 2202);
}

#[test]
fn a_redo_log_of_millions_of_files_is_refused() {
    let message = refused("[ndb_mgmd]\n[ndbd default]\nNoOfFragmentLogFiles=4000000\n[ndbd]\n");
    assert!(
        message.starts_with(
            "config.ini:3: NoOfFragmentLogFiles=4000000: out of range; allowed 3..=65536"
        ),
        "{message}"
    );
}

#[test]
fn data_memory_must_fit_the_machine() {
    let config = ok("[ndb_mgmd]\n[ndbd]\nNoOfReplicas=1\nDataMemory=16T\n");
    let params = &config.data_nodes[0].params;
    let message = config::check_fits_machine(node(2), params, 24 << 30).expect_err("refused");
    assert_eq!(
        message,
        "DataMemory=16T of node 2 is more than this machine's 24G of memory: the kernel would \
         kill the node once its rows fill it; allowed: at most the machine's memory"
    );
    assert_eq!(
        config::check_fits_machine(node(2), params, 32 << 40),
        Ok(())
    );
}

#[test]
fn load_reads_a_file_and_names_it() {
    let dir = std::env::temp_dir().join(format!("skarv-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("cluster.ini");
    std::fs::write(&path, MINIMAL).expect("write");
    let config = config::load(&path).expect("loads");
    assert_eq!(config.source_name, path.display().to_string());
    assert_eq!(config.data_nodes.len(), 2);
    std::fs::write(&path, "[ndb_mgmd]\n[ndbd]\nbogus\n").expect("write");
    let message = config::load(&path).expect_err("refused").to_string();
    assert_eq!(
        message,
        format!(
            "{}:3: expected \"[section]\", \"name=value\" or a comment, found \"bogus\"",
            path.display()
        )
    );
    let missing = dir.join("missing.ini");
    let message = config::load(&missing).expect_err("missing").to_string();
    assert!(
        message.starts_with(&format!(
            "{}: cannot read the configuration",
            missing.display()
        )),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}
