//! Prometheus `/metrics` of the mgmd (issue 23, item 4): a sandbox of 2
//! data nodes × 2 replicas and one SQL node. The test scrapes it over a
//! plain TCP socket as `curl` would, parses the text with the Python
//! `prometheus_client` parser (`.ci/run` installs it), and asserts that
//! - every family of the data nodes' figures is there: memory, block
//!   counters, threads (signals, CPU), links (bytes, frames);
//! - the TCs' commit latency histograms count every commit of an INSERT,
//!   their buckets cumulative up to `+Inf`, which equals their count;
//! - per-table figures: a table's rows summed over the fragments of each
//!   replica equal the rows inserted, and they take memory;
//! - its figures agree with ndbinfo's read through SQL around the scrape
//!   (DataMemory pages, and the TC's commits when no commit came between);
//! - a node that is hung (SIGSTOP) shows as not answering, and costs the
//!   scrape one scan timeout, not one per table; a node that is killed
//!   shows as not answering while the scrape still answers for the other;
//! - other paths get a 404 and a request that is not HTTP a 400.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{connect, sigkill, wait_for, Sandbox, Stopped};
use mysql::prelude::Queryable;
use serde_json::Value as Json;

/// How long a killed node may take to show as not answering.
const NODE_GONE_MAX: Duration = Duration::from_secs(30);
/// A scrape with a hung data node takes one scan timeout (2 s) and the
/// rest; one per table would be 12 s.
const SCRAPE_WITH_HUNG_NODE_MAX: Duration = Duration::from_secs(5);
/// How long per-table figures may take to show inserted rows (published
/// every second).
const TABLE_FIGURES_MAX: Duration = Duration::from_secs(10);
/// Tries to find ndbinfo's figures still between two reads around a scrape.
const STABLE_TRIES_MAX: usize = 20;

/// The raw HTTP answer to `request`.
fn http(port: u16, request: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("metrics port answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("a whole answer");
    answer
}

/// One sample: family name (as the parser names it), labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// `GET /metrics`, checked to be a 200 of the text format, parsed by
/// `prometheus_client.parser.text_string_to_metric_families`.
fn scrape(port: u16) -> Vec<Sample> {
    let answer = http(
        port,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
    );
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let script = r#"
import json, sys
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("NOT INSTALLED: python3 module prometheus_client (pip install prometheus_client; .ci/run installs it)")
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([family.name, family.type, s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the parser refused the text: {}\n{body}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Json = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let labels = s[3]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            (
                s[2].as_str().unwrap().to_owned(),
                labels,
                s[4].as_f64().unwrap(),
            )
        })
        .collect()
}

/// `skarv_tc_commit_latency_seconds` over every TC of the cluster: its
/// buckets as (le, cumulative count) in `le` order, its count and its sum.
fn commit_latency(samples: &[Sample]) -> (Vec<(f64, u64)>, u64, f64) {
    let name = "skarv_tc_commit_latency_seconds";
    let mut buckets: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (n, labels, v) in samples {
        if *n == format!("{name}_bucket") {
            let le = &labels["le"];
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("a number")
            };
            buckets.entry(le.clone()).or_insert((bound, 0)).1 += *v as u64;
        }
    }
    let mut buckets: Vec<(f64, u64)> = buckets.into_values().collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let count = sum(samples, &format!("{name}_count"), &[]) as u64;
    (buckets, count, sum(samples, &format!("{name}_sum"), &[]))
}

/// The value of sample `name` whose labels include `with`.
fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

/// The sum of sample `name` over those whose labels include `with`.
fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
        .sum()
}

/// ndbinfo's figures the scrape is compared with: per node, DataMemory
/// (used pages, total pages) and the TC's commits.
fn ndbinfo(conn: &mut mysql::Conn) -> BTreeMap<u64, (u64, u64, u64)> {
    let memory: Vec<(u64, u64, u64)> = conn
        .query("SELECT node_id, used_pages, total_pages FROM ndbinfo.memoryusage ORDER BY node_id")
        .expect("memoryusage");
    let commits: BTreeMap<u64, u64> = conn
        .query_map(
            "SELECT node_id, SUM(val) FROM ndbinfo.counters \
             WHERE block_name = 'DBTC' AND counter_name = 'COMMITS' GROUP BY node_id",
            |(node, sum): (u64, u64)| (node, sum),
        )
        .expect("counters")
        .into_iter()
        .collect();
    memory
        .into_iter()
        .map(|(node, used, total)| (node, (used, total, commits[&node])))
        .collect()
}

#[test]
fn metrics_parse_and_agree_with_ndbinfo() {
    // Node 3 is held stopped for a scrape's timeout (2 s) below: with the
    // default heartbeats (250 ms, 4 missed) it was declared failed then,
    // and restarting when the test looked for its process (a race the
    // test lost now and then). 1.5 s heartbeats give it 6 s.
    let sandbox = Sandbox::start_configured(
        "metrics",
        16_000,
        2,
        &["--sql-nodes", "1", "--set", "HeartbeatIntervalDbDb=1500"],
    );
    let port = sandbox.metrics_port();
    let mut conn = connect(sandbox.sql_port());
    conn.query_drop("CREATE DATABASE m").unwrap();
    conn.query_drop("CREATE TABLE m.t (id BIGINT PRIMARY KEY, v VARCHAR(100))")
        .unwrap();
    let commits_before = commit_latency(&scrape(port)).1;
    for i in 0..20 {
        conn.query_drop(format!("INSERT INTO m.t VALUES ({i}, REPEAT('x', 100))"))
            .unwrap();
    }
    // Each INSERT (autocommit) is a commit its client asked for: one
    // latency more in the TCs' histograms.
    wait_for("20 commit latencies more", TABLE_FIGURES_MAX, || {
        let (buckets, count, sum) = commit_latency(&scrape(port));
        let cumulative = buckets.windows(2).all(|w| w[0].1 <= w[1].1);
        assert!(cumulative, "buckets cumulative: {buckets:?}");
        assert_eq!(
            buckets.last().map(|b| b.1),
            Some(count),
            "+Inf is the count"
        );
        assert!(count == 0 || sum > 0.0, "commits take time: {sum}");
        count >= commits_before + 20
    });

    let samples = scrape(port);
    for node in ["2", "3"] {
        let with = [("node", node)];
        assert_eq!(
            value(&samples, "skarv_data_node_answered", &with),
            Some(1.0),
            "node {node} answered"
        );
        assert!(
            sum(&samples, "skarv_thread_signals_total", &with) > 0.0,
            "node {node}'s threads executed signals"
        );
        assert!(
            sum(&samples, "skarv_thread_cpu_seconds_total", &with) > 0.0,
            "node {node}'s threads used CPU"
        );
        assert!(
            sum(
                &samples,
                "skarv_thread_time_seconds_total",
                &[("node", node), ("state", "sleeping")]
            ) > 0.0,
            "node {node}'s threads slept"
        );
        assert!(
            sum(
                &samples,
                "skarv_block_counter_total",
                &[("node", node), ("block", "DBTC"), ("counter", "COMMITS")]
            ) >= 1.0,
            "node {node}'s TC counters"
        );
    }
    // Per-table figures: the 20 rows, on each replica (the fragments'
    // figures are published every second: poll).
    wait_for("m.t's rows in the metrics", TABLE_FIGURES_MAX, || {
        let samples = scrape(port);
        let rows = |replica| {
            sum(
                &samples,
                "skarv_table_rows",
                &[("table", "m/def/t"), ("replica", replica)],
            )
        };
        (rows("primary"), rows("backup")) == (20.0, 20.0)
    });
    let samples = scrape(port);
    for node in ["2", "3"] {
        let with = [("node", node), ("table", "m/def/t")];
        assert!(
            sum(&samples, "skarv_table_memory_bytes", &with) > 0.0,
            "m.t takes memory on node {node}"
        );
    }
    let link = [("node", "2"), ("peer", "3")];
    assert_eq!(value(&samples, "skarv_link_up", &link), Some(1.0));
    for name in [
        "skarv_link_sent_bytes_total",
        "skarv_link_received_bytes_total",
        "skarv_link_sent_frames_total",
        "skarv_link_received_frames_total",
    ] {
        assert!(
            value(&samples, name, &link).is_some_and(|v| v > 0.0),
            "{name} of the link 2 -> 3"
        );
    }

    // ndbinfo read before and after a scrape: where the two reads agree,
    // nothing moved in between, and the scrape must show the same figures.
    let mut compared = false;
    for _ in 0..STABLE_TRIES_MAX {
        let before = ndbinfo(&mut conn);
        let samples = scrape(port);
        let after = ndbinfo(&mut conn);
        if before != after {
            continue;
        }
        for (node, (used, total, commits)) in &before {
            let node = node.to_string();
            let with = [("node", node.as_str())];
            assert_eq!(
                value(&samples, "skarv_data_memory_used_pages", &with),
                Some(*used as f64),
                "node {node}: {before:?}"
            );
            assert_eq!(
                value(&samples, "skarv_data_memory_total_pages", &with),
                Some(*total as f64),
                "node {node}: {before:?}"
            );
            assert_eq!(
                sum(
                    &samples,
                    "skarv_block_counter_total",
                    &[("node", &node), ("block", "DBTC"), ("counter", "COMMITS")]
                ),
                *commits as f64,
                "node {node}: {before:?}"
            );
        }
        compared = true;
        break;
    }
    assert!(
        compared,
        "ndbinfo never held still across a scrape in {STABLE_TRIES_MAX} tries"
    );

    let missing = http(port, "GET /nothing HTTP/1.1\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let bad = http(port, "hello\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");

    {
        let _hung = Stopped::stop(sandbox.pid(3));
        let start = Instant::now();
        let samples = scrape(port);
        let took = start.elapsed();
        assert_eq!(
            value(&samples, "skarv_data_node_answered", &[("node", "3")]),
            Some(0.0),
            "the hung node did not answer"
        );
        assert_eq!(
            value(&samples, "skarv_data_node_answered", &[("node", "2")]),
            Some(1.0)
        );
        assert!(
            took < SCRAPE_WITH_HUNG_NODE_MAX,
            "a scrape with a hung node took {took:?}"
        );
    }

    // Its angel too, so it stays down.
    sigkill(sandbox.angel_pid(3));
    sigkill(sandbox.pid(3));
    wait_for("node 3 to show as not answering", NODE_GONE_MAX, || {
        let samples = scrape(port);
        assert_eq!(
            value(&samples, "skarv_data_node_answered", &[("node", "2")]),
            Some(1.0)
        );
        value(&samples, "skarv_data_node_answered", &[("node", "3")]) == Some(0.0)
    });
}

/// DataMemory of the alarm test's data nodes: small enough to fill fast.
const SMALL_DATA_MEMORY: &str = "DataMemory=4M";
/// Rows per INSERT while filling it, each of `FILL_ROW_BYTES`.
const FILL_ROWS_PER_INSERT: u64 = 50;
const FILL_ROW_BYTES: u64 = 1000;
/// INSERTs at most while filling (far more than 4 MiB of rows).
const FILL_INSERTS_MAX: u64 = 200;
/// How long the cluster log may take to show the warning (the LDM checks
/// every 100 ms).
const ALARM_LOGGED_MAX: Duration = Duration::from_secs(30);

/// The mgmd's cluster log in the sandbox's directory.
fn cluster_log(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.dir.join("mgmd").join("ndb_1_cluster.log"))
        .expect("the mgmd's cluster log")
}

#[test]
fn data_memory_past_80_percent_warns_in_the_log_and_the_metrics() {
    let sandbox = Sandbox::start_configured(
        "alarms",
        16_500,
        2,
        &["--sql-nodes", "1", "--set", SMALL_DATA_MEMORY],
    );
    let port = sandbox.metrics_port();
    let mut conn = connect(sandbox.sql_port());
    let level = |samples: &[Sample], node: &str| {
        value(
            samples,
            "skarv_alarm_level",
            &[("node", node), ("resource", "DataMemory")],
        )
    };
    let samples = scrape(port);
    assert_eq!(level(&samples, "2"), Some(0.0), "no alarm at the start");
    assert!(
        value(&samples, "skarv_redo_total_bytes", &[("node", "2")]).is_some_and(|v| v > 0.0),
        "the redo log's size is shown"
    );
    for name in [
        "skarv_redo_unsynced_bytes",
        "skarv_redo_buffer_high_water_bytes",
    ] {
        assert!(
            value(&samples, name, &[("node", "2")]).is_some(),
            "{name} is shown (ndbinfo.logbuffers)"
        );
    }
    assert!(!cluster_log(&sandbox).contains("DataMemory (pages)"));

    conn.query_drop("CREATE DATABASE fill").unwrap();
    conn.query_drop("CREATE TABLE fill.t (id BIGINT PRIMARY KEY, v VARCHAR(1000))")
        .unwrap();
    let mut reached = false;
    for chunk in 0..FILL_INSERTS_MAX {
        let values: Vec<String> = (0..FILL_ROWS_PER_INSERT)
            .map(|i| {
                format!(
                    "({}, REPEAT('x', {FILL_ROW_BYTES}))",
                    chunk * FILL_ROWS_PER_INSERT + i
                )
            })
            .collect();
        // Past 90 % an insert may find the memory full: the alarm came first.
        let _ = conn.query_drop(format!("INSERT INTO fill.t VALUES {}", values.join(",")));
        let samples = scrape(port);
        if level(&samples, "2").is_some_and(|l| l >= 80.0)
            && level(&samples, "3").is_some_and(|l| l >= 80.0)
        {
            reached = true;
            break;
        }
    }
    assert!(reached, "DataMemory past 80 % on both nodes");
    wait_for(
        "the 80 % warning in the cluster log",
        ALARM_LOGGED_MAX,
        || {
            let log = cluster_log(&sandbox);
            log.lines().any(|l| {
                l.contains("WARNING") && l.contains("DataMemory (pages)") && l.contains("past 80%")
            })
        },
    );
}
