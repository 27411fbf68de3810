//! Prometheus `/metrics` of the management server (docs/operations.md,
//! "Metrics"): a small HTTP/1.1 server on a thread of its own, and the
//! text exposition format (version 0.0.4) written from the rows the data
//! nodes answer ndbinfo scans with.
//!
//! Why the mgmd and not every data node: it already holds a session to
//! every data node, so a scrape is one `DbinfoScanReq` per table to each of
//! them over that session, answered on the node's main thread from the
//! figures its threads publish; the cluster is one scrape target, whose
//! figures are those `SELECT * FROM ndbinfo.<table>` shows, and a node that
//! does not answer is a sample (`skarv_data_node_answered 0`), not a missing
//! target. Nothing of this runs on a data node's data threads.
//!
//! Written here rather than with the `prometheus-client` crate: that crate
//! is not in the offline registry this project builds from, and the text
//! format needs only escaping and a line per sample.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use signal::dbinfo::{self, ColumnKind, TableDef};
use signal::{DbinfoRow, NodeId};

/// The most a request (line and headers) may take; a scraper sends a few
/// hundred bytes.
pub const REQUEST_MAX_BYTES: usize = 8192;
/// A client that sends its request or takes the answer slower than this is
/// dropped: scrapes are served one at a time.
pub const CLIENT_TIMEOUT_MS: u64 = 2_000;
/// How long a scrape waits for the data nodes' answers to each table.
pub const SCAN_TIMEOUT_MS: u64 = 2_000;

/// The tables a scrape reads, in the order their families are written.
pub const TABLES: [&TableDef; 9] = [
    &dbinfo::NODES,
    &dbinfo::MEMORYUSAGE,
    &dbinfo::LOGSPACES,
    &dbinfo::LOGBUFFERS,
    &dbinfo::COUNTERS,
    &dbinfo::THREADSTAT,
    &dbinfo::TRANSPORTERS,
    &dbinfo::TABLE_FRAGMENTS,
    &dbinfo::TC_LATENCY,
];

/// What one scrape gathered: per table name, per data node that answered,
/// its rows; and every configured data node.
#[derive(Debug, Default)]
pub struct Gathered {
    pub tables: BTreeMap<&'static str, BTreeMap<NodeId, Vec<DbinfoRow>>>,
    pub data_nodes: Vec<NodeId>,
}

/// Answers one HTTP connection: `GET /metrics` gets `body()`, anything
/// else a 404 or 405 that says what is served.
pub fn answer(stream: &mut TcpStream, body: impl FnOnce() -> String) -> io::Result<()> {
    let timeout = Some(Duration::from_millis(CLIENT_TIMEOUT_MS));
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    let request = read_request(stream)?;
    let (status, content_type, text) = match parse_request_line(&request) {
        Ok(("GET" | "HEAD", "/metrics")) => {
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body())
        }
        Ok(("GET" | "HEAD", path)) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            format!("no page {path}: the metrics are at /metrics\n"),
        ),
        Ok((method, _)) => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            format!("method {method} is not served: use GET /metrics\n"),
        ),
        Err(reason) => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            format!("{reason}\n"),
        ),
    };
    let head_only = request.starts_with("HEAD ");
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        text.len()
    );
    if !head_only {
        response.push_str(&text);
    }
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

/// The request up to the blank line after its headers (no body is read:
/// none is served).
fn read_request(stream: &mut TcpStream) -> io::Result<String> {
    let mut request = Vec::with_capacity(512);
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && !request.ends_with(b"\n\n") {
        if request.len() > REQUEST_MAX_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("request longer than {REQUEST_MAX_BYTES} bytes"),
            ));
        }
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        request.extend_from_slice(&buffer[..read]);
    }
    Ok(String::from_utf8_lossy(&request).into_owned())
}

/// The method and path of `request`'s first line (the query string is
/// dropped).
fn parse_request_line(request: &str) -> Result<(&str, &str), String> {
    let line = request.lines().next().unwrap_or("");
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(method), Some(target), Some(version)) if version.starts_with("HTTP/") => {
            Ok((method, target.split('?').next().unwrap_or(target)))
        }
        _ => Err(format!(
            "not an HTTP request line: {:?}",
            line.chars().take(80).collect::<String>()
        )),
    }
}

/// One row of `def`, read by column name.
struct Row<'a> {
    def: &'static TableDef,
    row: &'a DbinfoRow,
}

impl<'a> Row<'a> {
    /// The index among the columns of the same kind as `name`'s.
    fn position(&self, name: &str, kind: ColumnKind) -> usize {
        let mut position = 0;
        for (column, k) in self.def.columns {
            if *column == name {
                assert_eq!(*k, kind, "{}.{name} kind", self.def.name);
                return position;
            }
            if *k == kind {
                position += 1;
            }
        }
        panic!("{} has no column {name}", self.def.name)
    }

    fn int(&self, name: &str) -> u64 {
        self.row.ints[self.position(name, ColumnKind::Int)]
    }

    fn text(&self, name: &str) -> &'a str {
        &self.row.texts[self.position(name, ColumnKind::Text)]
    }

    /// The labels of a row about one redo log part (`logspaces`,
    /// `logbuffers`): node, log type and part.
    fn redo_part_labels(&self) -> String {
        let (node, part) = (
            self.int("node_id").to_string(),
            self.int("log_part").to_string(),
        );
        labels(&[
            ("node", &node),
            ("log_type", self.text("log_type")),
            ("part", &part),
        ])
    }
}

/// One metric family being written: its samples follow its HELP and TYPE.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, u64)>,
}

/// One sample per `(family, column)`: `row`'s integer in that column,
/// under `labels`.
fn push_columns(families: &mut [Family], labels: &str, row: &Row<'_>, columns: &[(usize, &str)]) {
    for &(family, column) in columns {
        families[family]
            .samples
            .push((labels.to_owned(), row.int(column)));
    }
}

/// `{a="x",b="y"}` with the values escaped as the text format asks.
fn labels(pairs: &[(&str, &str)]) -> String {
    let mut out = String::from("{");
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(out, "{name}=\"{escaped}\"");
    }
    out.push('}');
    out
}

/// Microseconds as seconds, exactly (no float rounding of the integer part).
fn micros_as_seconds(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// The text exposition of what a scrape gathered.
pub fn render(gathered: &Gathered) -> String {
    let mut families: Vec<Family> = Vec::new();
    let mut family = |name, help, kind| {
        families.push(Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        });
        families.len() - 1
    };
    let answered = family(
        "skarv_data_node_answered",
        "1 if the data node answered this scrape's ndbinfo scans, 0 if not (down or too slow)",
        "gauge",
    );
    let uptime = family(
        "skarv_node_uptime_seconds",
        "Seconds since the data node process started (ndbinfo.nodes.uptime)",
        "gauge",
    );
    let start_phase = family(
        "skarv_node_start_phase",
        "0 once started; 1 joining the membership; 2 a member whose data is being copied in",
        "gauge",
    );
    let used = family(
        "skarv_data_memory_used_bytes",
        "DataMemory in use (ndbinfo.memoryusage.used)",
        "gauge",
    );
    let total = family(
        "skarv_data_memory_total_bytes",
        "DataMemory configured (ndbinfo.memoryusage.total)",
        "gauge",
    );
    let used_pages = family(
        "skarv_data_memory_used_pages",
        "DataMemory pages in use (ndbinfo.memoryusage.used_pages)",
        "gauge",
    );
    let total_pages = family(
        "skarv_data_memory_total_pages",
        "DataMemory pages configured (ndbinfo.memoryusage.total_pages)",
        "gauge",
    );
    let redo_used = family(
        "skarv_redo_used_bytes",
        "Redo log in use, per LDM instance's ring (ndbinfo.logspaces.used)",
        "gauge",
    );
    let redo_total = family(
        "skarv_redo_total_bytes",
        "Redo log size, per LDM instance's ring (ndbinfo.logspaces.total)",
        "gauge",
    );
    let redo_unsynced = family(
        "skarv_redo_unsynced_bytes",
        "Redo written and not yet fsynced, per LDM instance: what the next GCP makes durable \
         (ndbinfo.logbuffers.unsynced)",
        "gauge",
    );
    let redo_buffer_high = family(
        "skarv_redo_buffer_high_water_bytes",
        "The most the redo memory buffer held, per LDM instance (ndbinfo.logbuffers.high_water)",
        "gauge",
    );
    let alarm = family(
        "skarv_alarm_level",
        "0, or the threshold (80, 90 percent in use) DataMemory or the redo log passed: \
         DataMemory of the whole node, redo of its fullest ring",
        "gauge",
    );
    let block_counter = family(
        "skarv_block_counter_total",
        "A block instance's counter (ndbinfo.counters; counter names as NDB's)",
        "counter",
    );
    let loops = family(
        "skarv_thread_loops_total",
        "Rounds an execution thread made over its sources (ndbinfo.threadstat.c_loop)",
        "counter",
    );
    let signals = family(
        "skarv_thread_signals_total",
        "Signals an execution thread executed (ndbinfo.threadstat.c_exec)",
        "counter",
    );
    let sleeps = family(
        "skarv_thread_sleeps_total",
        "Times an execution thread slept for want of work (ndbinfo.threadstat.c_wait)",
        "counter",
    );
    let wakes = family(
        "skarv_thread_wakes_total",
        "Times another thread woke a sleeping execution thread (ndbinfo.threadstat.c_wake)",
        "counter",
    );
    let queue_depth = family(
        "skarv_thread_queue_depth",
        "Signals waiting in an execution thread's queues when it last looked (ndbinfo.threadstat.queue_depth)",
        "gauge",
    );
    let cpu = family(
        "skarv_thread_cpu_seconds_total",
        "CPU time of an execution thread, by mode (ndbinfo.threadstat.os_ru_utime, os_ru_stime)",
        "counter",
    );
    let thread_time = family(
        "skarv_thread_time_seconds_total",
        "Time an execution thread spent asleep, spinning idle or held by a full queue, by state \
         (ndbinfo.threadstat.sleep_us, spin_us, buffer_full_us; cpustat shows the last second)",
        "counter",
    );
    let switches = family(
        "skarv_thread_context_switches_total",
        "Context switches of an execution thread, by kind (ndbinfo.threadstat.os_ru_nvcsw, os_ru_nivcsw)",
        "counter",
    );
    let link_up = family(
        "skarv_link_up",
        "1 if the link to the peer is connected (ndbinfo.transporters.status)",
        "gauge",
    );
    let connects = family(
        "skarv_link_connects_total",
        "Connections to the peer that came up (ndbinfo.transporters.connect_count)",
        "counter",
    );
    let bytes_sent = family(
        "skarv_link_sent_bytes_total",
        "Bytes written to the peer (ndbinfo.transporters.bytes_sent)",
        "counter",
    );
    let bytes_received = family(
        "skarv_link_received_bytes_total",
        "Bytes read from the peer (ndbinfo.transporters.bytes_received)",
        "counter",
    );
    let frames_sent = family(
        "skarv_link_sent_frames_total",
        "Frames written to the peer (ndbinfo.transporters.frames_sent)",
        "counter",
    );
    let frames_received = family(
        "skarv_link_received_frames_total",
        "Frames read from the peer (ndbinfo.transporters.frames_received)",
        "counter",
    );
    let table_rows = family(
        "skarv_table_rows",
        "Committed rows of a table's fragments on the node, by replica \
         (ndbinfo.table_fragments.fixed_elem_count summed)",
        "gauge",
    );
    let table_memory = family(
        "skarv_table_memory_bytes",
        "DataMemory of a table's fragments on the node, by replica \
         (ndbinfo.table_fragments.data_memory_bytes summed)",
        "gauge",
    );

    let rows = |def: &'static TableDef| {
        gathered
            .tables
            .get(def.name)
            .into_iter()
            .flat_map(|per_node| per_node.values().flatten())
            .map(move |row| Row { def, row })
    };
    for node in &gathered.data_nodes {
        let answered_all = TABLES.iter().all(|def| {
            gathered
                .tables
                .get(def.name)
                .is_some_and(|per_node| per_node.contains_key(node))
        });
        let node = node.to_string();
        families[answered]
            .samples
            .push((labels(&[("node", &node)]), u64::from(answered_all)));
    }
    for r in rows(&dbinfo::NODES) {
        let node = r.int("node_id").to_string();
        let l = labels(&[("node", &node)]);
        push_columns(
            &mut families,
            &l,
            &r,
            &[(uptime, "uptime"), (start_phase, "start_phase")],
        );
    }
    for r in rows(&dbinfo::MEMORYUSAGE) {
        let node = r.int("node_id").to_string();
        let l = labels(&[("node", &node), ("memory_type", r.text("memory_type"))]);
        push_columns(
            &mut families,
            &l,
            &r,
            &[
                (used, "used"),
                (total, "total"),
                (used_pages, "used_pages"),
                (total_pages, "total_pages"),
            ],
        );
    }
    let mut alarms: BTreeMap<(u64, &str), u64> = BTreeMap::new();
    for r in rows(&dbinfo::MEMORYUSAGE) {
        let level = dbinfo::alarm_level(r.int("used_pages"), r.int("total_pages"));
        let entry = alarms.entry((r.int("node_id"), "DataMemory")).or_default();
        *entry = (*entry).max(level);
    }
    for r in rows(&dbinfo::LOGSPACES) {
        let l = r.redo_part_labels();
        push_columns(
            &mut families,
            &l,
            &r,
            &[(redo_used, "used"), (redo_total, "total")],
        );
        let level = dbinfo::alarm_level(r.int("used"), r.int("total"));
        let entry = alarms.entry((r.int("node_id"), "redo")).or_default();
        *entry = (*entry).max(level);
    }
    for r in rows(&dbinfo::LOGBUFFERS) {
        let l = r.redo_part_labels();
        push_columns(
            &mut families,
            &l,
            &r,
            &[
                (redo_unsynced, "unsynced"),
                (redo_buffer_high, "high_water"),
            ],
        );
    }
    for ((node, resource), level) in alarms {
        let node = node.to_string();
        families[alarm]
            .samples
            .push((labels(&[("node", &node), ("resource", resource)]), level));
    }
    for r in rows(&dbinfo::COUNTERS) {
        let (node, instance) = (
            r.int("node_id").to_string(),
            r.int("block_instance").to_string(),
        );
        let l = labels(&[
            ("node", &node),
            ("block", r.text("block_name")),
            ("instance", &instance),
            ("counter", r.text("counter_name")),
        ]);
        families[block_counter].samples.push((l, r.int("val")));
    }
    let mut cpu_samples = Vec::new();
    let mut time_samples = Vec::new();
    for r in rows(&dbinfo::THREADSTAT) {
        let node = r.int("node_id").to_string();
        let base = [
            ("node", node.as_str()),
            ("thread", r.text("thr_nm")),
            ("role", r.text("role")),
        ];
        let l = labels(&base);
        push_columns(
            &mut families,
            &l,
            &r,
            &[
                (loops, "c_loop"),
                (signals, "c_exec"),
                (sleeps, "c_wait"),
                (wakes, "c_wake"),
                (queue_depth, "queue_depth"),
            ],
        );
        for (mode, column) in [("user", "os_ru_utime"), ("system", "os_ru_stime")] {
            let l = labels(&[base[0], base[1], base[2], ("mode", mode)]);
            cpu_samples.push((l, r.int(column)));
        }
        for (state, column) in [
            ("sleeping", "sleep_us"),
            ("spinning", "spin_us"),
            ("buffer_full", "buffer_full_us"),
        ] {
            let l = labels(&[base[0], base[1], base[2], ("state", state)]);
            time_samples.push((l, r.int(column)));
        }
        for (kind, column) in [
            ("voluntary", "os_ru_nvcsw"),
            ("involuntary", "os_ru_nivcsw"),
        ] {
            let l = labels(&[base[0], base[1], base[2], ("kind", kind)]);
            families[switches].samples.push((l, r.int(column)));
        }
    }
    for r in rows(&dbinfo::TRANSPORTERS) {
        let (node, peer) = (
            r.int("node_id").to_string(),
            r.int("remote_node_id").to_string(),
        );
        let l = labels(&[("node", &node), ("peer", &peer)]);
        let up = u64::from(r.text("status") == dbinfo::CONNECTED);
        families[link_up].samples.push((l.clone(), up));
        push_columns(
            &mut families,
            &l,
            &r,
            &[
                (connects, "connect_count"),
                (bytes_sent, "bytes_sent"),
                (bytes_received, "bytes_received"),
                (frames_sent, "frames_sent"),
                (frames_received, "frames_received"),
            ],
        );
    }
    // Per node, table and replica: the sums over its fragments.
    let mut tables: BTreeMap<(u64, &str, &str), (u64, u64)> = BTreeMap::new();
    for r in rows(&dbinfo::TABLE_FRAGMENTS) {
        let key = (r.int("node_id"), r.text("fq_name"), r.text("replica"));
        let entry = tables.entry(key).or_default();
        entry.0 += r.int("fixed_elem_count");
        entry.1 += r.int("data_memory_bytes");
    }
    for ((node, table, replica), (rows, bytes)) in tables {
        let node = node.to_string();
        let replica = replica.to_ascii_lowercase();
        let l = labels(&[("node", &node), ("table", table), ("replica", &replica)]);
        families[table_rows].samples.push((l.clone(), rows));
        families[table_memory].samples.push((l, bytes));
    }

    let mut out = String::new();
    for (i, f) in families.iter().enumerate() {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        // CPU time is in seconds with a fraction; every other figure whole.
        if i == cpu || i == thread_time {
            let seconds = if i == cpu {
                &cpu_samples
            } else {
                &time_samples
            };
            for (l, us) in seconds {
                let _ = writeln!(out, "{}{l} {}", f.name, micros_as_seconds(*us));
            }
        }
        for (l, value) in &f.samples {
            let _ = writeln!(out, "{}{l} {value}", f.name);
        }
    }
    write_latency(
        &mut out,
        rows(&dbinfo::TC_LATENCY),
        dbinfo::COMMIT,
        "skarv_tc_commit_latency_seconds",
        "Commit latency of a TC instance: from the request that asked to commit to the answer \
         (ndbinfo.tc_latency)",
    );
    write_latency(
        &mut out,
        rows(&dbinfo::TC_LATENCY),
        dbinfo::KEY,
        "skarv_tc_key_latency_seconds",
        "Latency of a TC instance's requests that do not commit: from the request to its answer \
         (ndbinfo.tc_latency, request KEY)",
    );
    out
}

/// Histogram `name` per TC instance from `tc_latency`'s rows of
/// `request`: buckets made cumulative, `le` and the sum in seconds, the
/// count that of the `+Inf` bucket (so that the histogram agrees with
/// itself even where a row was read mid-update).
fn write_latency<'a>(
    out: &mut String,
    rows: impl Iterator<Item = Row<'a>>,
    request: &str,
    name: &str,
    help: &str,
) {
    type Buckets = Vec<(u64, u64)>;
    let mut per_instance: BTreeMap<(u64, u64), (Buckets, u64)> = BTreeMap::new();
    for r in rows.filter(|r| r.text("request") == request) {
        let entry = per_instance
            .entry((r.int("node_id"), r.int("block_instance")))
            .or_default();
        entry.0.push((r.int("le_us"), r.int("count")));
        entry.1 = r.int("sum_us");
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for ((node, instance), (mut buckets, sum_us)) in per_instance {
        buckets.sort_unstable();
        let (node, instance) = (node.to_string(), instance.to_string());
        let mut cumulative = 0u64;
        for (le_us, count) in buckets {
            cumulative += count;
            let le = match le_us {
                u64::MAX => "+Inf".to_owned(),
                us => micros_as_seconds(us),
            };
            let l = labels(&[("node", &node), ("instance", &instance), ("le", &le)]);
            let _ = writeln!(out, "{name}_bucket{l} {cumulative}");
        }
        let l = labels(&[("node", &node), ("instance", &instance)]);
        let _ = writeln!(out, "{name}_sum{l} {}", micros_as_seconds(sum_us));
        let _ = writeln!(out, "{name}_count{l} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u8) -> NodeId {
        NodeId::new(id).unwrap()
    }

    #[test]
    fn request_lines_are_parsed_and_bad_ones_named() {
        assert_eq!(
            parse_request_line("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Ok(("GET", "/metrics"))
        );
        let bad = parse_request_line("hello\r\n\r\n").unwrap_err();
        assert!(bad.contains("not an HTTP request line"), "{bad}");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            labels(&[("a", "x\"y\\z\n"), ("b", "1")]),
            "{a=\"x\\\"y\\\\z\\n\",b=\"1\"}"
        );
        assert_eq!(micros_as_seconds(1_234_567), "1.234567");
        assert_eq!(micros_as_seconds(5), "0.000005");
    }

    #[test]
    fn commit_latencies_are_a_cumulative_histogram_in_seconds() {
        let bucket = |request: &str, bucket: usize, count: u64, total: u64| DbinfoRow {
            ints: vec![
                2,
                0,
                bucket as u64,
                dbinfo::latency_le_us(bucket),
                count,
                1_500,
                total,
            ],
            texts: vec![request.to_owned()],
        };
        // Commits: 1 in bucket 3, 2 in bucket 10; key requests: 5 in
        // bucket 4, each in its own histogram.
        let rows = (0..dbinfo::LATENCY_BUCKETS)
            .map(|b| {
                bucket(
                    dbinfo::COMMIT,
                    b,
                    u64::from(b == 3) + 2 * u64::from(b == 10),
                    3,
                )
            })
            .chain(
                (0..dbinfo::LATENCY_BUCKETS)
                    .map(|b| bucket(dbinfo::KEY, b, 5 * u64::from(b == 4), 5)),
            )
            .collect();
        let mut gathered = Gathered {
            data_nodes: vec![node(2)],
            ..Gathered::default()
        };
        gathered
            .tables
            .insert(dbinfo::TC_LATENCY.name, BTreeMap::from([(node(2), rows)]));
        let text = render(&gathered);
        let name = "skarv_tc_commit_latency_seconds";
        for line in [
            format!("# TYPE {name} histogram\n"),
            format!("{name}_bucket{{node=\"2\",instance=\"0\",le=\"0.000004\"}} 0\n"),
            format!("{name}_bucket{{node=\"2\",instance=\"0\",le=\"0.000008\"}} 1\n"),
            format!("{name}_bucket{{node=\"2\",instance=\"0\",le=\"0.001024\"}} 3\n"),
            format!("{name}_bucket{{node=\"2\",instance=\"0\",le=\"+Inf\"}} 3\n"),
            format!("{name}_sum{{node=\"2\",instance=\"0\"}} 0.001500\n"),
            format!("{name}_count{{node=\"2\",instance=\"0\"}} 3\n"),
            "skarv_tc_key_latency_seconds_bucket{node=\"2\",instance=\"0\",le=\"0.000008\"} 0\n"
                .to_owned(),
            "skarv_tc_key_latency_seconds_bucket{node=\"2\",instance=\"0\",le=\"0.000016\"} 5\n"
                .to_owned(),
            "skarv_tc_key_latency_seconds_count{node=\"2\",instance=\"0\"} 5\n".to_owned(),
        ] {
            assert!(text.contains(&line), "{line} in {text}");
        }
    }

    #[test]
    fn table_figures_are_summed_over_fragments_per_replica() {
        let fragment = |number: u64, replica: &str, rows: u64, bytes: u64| DbinfoRow {
            ints: vec![2, 0, 17, number, rows, 32, 32768, 0, 32768, bytes],
            texts: vec!["db/def/t".to_owned(), replica.to_owned()],
        };
        let mut gathered = Gathered {
            data_nodes: vec![node(2)],
            ..Gathered::default()
        };
        let rows = vec![
            fragment(0, dbinfo::PRIMARY, 3, 65536),
            fragment(1, dbinfo::PRIMARY, 4, 98304),
            fragment(2, dbinfo::BACKUP, 5, 65536),
        ];
        gathered.tables.insert(
            dbinfo::TABLE_FRAGMENTS.name,
            BTreeMap::from([(node(2), rows)]),
        );
        let text = render(&gathered);
        for line in [
            "skarv_table_rows{node=\"2\",table=\"db/def/t\",replica=\"primary\"} 7\n",
            "skarv_table_rows{node=\"2\",table=\"db/def/t\",replica=\"backup\"} 5\n",
            "skarv_table_memory_bytes{node=\"2\",table=\"db/def/t\",replica=\"primary\"} 163840\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn a_node_that_did_not_answer_every_table_is_not_answered() {
        let mut gathered = Gathered {
            data_nodes: vec![node(2), node(3)],
            ..Gathered::default()
        };
        for def in TABLES {
            let mut per_node = BTreeMap::new();
            per_node.insert(node(2), Vec::new());
            gathered.tables.insert(def.name, per_node);
        }
        gathered
            .tables
            .get_mut(dbinfo::MEMORYUSAGE.name)
            .unwrap()
            .insert(
                node(2),
                vec![DbinfoRow {
                    ints: vec![2, 32768, 1, 65536, 2],
                    texts: vec![dbinfo::DATA_MEMORY.to_owned()],
                }],
            );
        let text = render(&gathered);
        assert!(
            text.contains("skarv_data_node_answered{node=\"2\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("skarv_data_node_answered{node=\"3\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "skarv_data_memory_used_pages{node=\"2\",memory_type=\"Data memory\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE skarv_block_counter_total counter\n"));
    }
}
