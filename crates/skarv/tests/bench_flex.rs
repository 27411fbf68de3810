//! `skarv bench flex` against a real sandbox (one data node, one replica):
//! every phase with `--verify` and `--json`, a later invocation reading
//! what an earlier one wrote, the executor architecture with batches, and
//! the failures `--verify` must catch — rows holding values of the wrong
//! generation, and rows that are gone — each ending the run non-zero; and
//! `--subscribe`, a change-stream subscriber's changes and lag.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const SKARV: &str = env!("CARGO_BIN_EXE_skarv");

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A base port in 25xxx with the next `count` ports free and reserved.
fn free_base_port(count: u16) -> u16 {
    testkit::ports::free_base_port(25_000, 1_000, count)
}

struct Sandbox {
    dir: PathBuf,
    connect: String,
}

impl Sandbox {
    fn start() -> Sandbox {
        Sandbox::start_with("flex", &[])
    }

    /// A sandbox named `name` (its directory), `more` passed to `skarv
    /// sandbox`.
    fn start_with(name: &str, more: &[&str]) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("skarv-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let base = free_base_port(8);
        let output = Command::new(SKARV)
            .args(["sandbox", "--detach", "--dir"])
            .arg(&dir)
            .args([
                "--sql-nodes",
                "0",
                "--data-nodes",
                "1",
                "--replicas",
                "1",
                "--base-port",
            ])
            .arg(base.to_string())
            .args(more)
            .output()
            .expect("run skarv sandbox");
        let sandbox = Sandbox {
            dir,
            connect: format!("127.0.0.1:{base}"),
        };
        assert!(output.status.success(), "{}", text(&output));
        sandbox
    }

    /// Runs `skarv bench flex --connect … ARGS`.
    fn flex(&self, args: &[&str]) -> Output {
        Command::new(SKARV)
            .args(["bench", "flex", "--connect", &self.connect])
            .args(args)
            .output()
            .expect("run skarv bench flex")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new(SKARV)
            .args(["sandbox", "--stop", "--dir"])
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `--json` lines of a run, one object per phase.
fn phases(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}\n{}", text(output)))
        })
        .collect()
}

fn names(phases: &[Value]) -> Vec<&str> {
    phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect()
}

/// Every phase did `rows` operations in `transactions` transactions,
/// nothing failed, and reads verified every row.
fn assert_clean(phases: &[Value], rows: u64, transactions: u64, output: &Output) {
    for p in phases {
        assert_eq!(p["ops"], rows, "{p}\n{}", text(output));
        assert_eq!(p["transactions"], transactions, "{p}");
        assert_eq!(p["failed"], 0, "{p}");
        assert_eq!(p["mismatches"], 0, "{p}");
        assert_eq!(p["requests_sent"].as_u64().unwrap(), transactions, "{p}");
        assert!(p["ops_per_s"].as_f64().unwrap() > 0.0, "{p}");
        let latency = &p["latency_us"];
        let p50 = latency["p50"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= latency["p99"].as_f64().unwrap(), "{p}");
        assert!(
            latency["p99"].as_f64().unwrap() <= latency["max"].as_f64().unwrap(),
            "{p}"
        );
        let verified = if p["phase"] == "read" { rows } else { 0 };
        assert_eq!(p["rows_verified"], verified, "{p}");
    }
}

#[test]
fn flex_runs_every_phase_verifies_across_runs_and_fails_on_wrong_or_missing_rows() {
    let sandbox = Sandbox::start();
    let small = ["-t", "2", "-p", "8", "-o", "50"];

    // All phases in one run: 2 threads × 50 transactions × 1 op = 100 rows.
    let all = sandbox.flex(
        &[
            &small[..],
            &[
                "--ops",
                "insert,read,update,read,delete",
                "--verify",
                "--json",
                "--table",
                "every_phase",
            ],
        ]
        .concat(),
    );
    assert!(all.status.success(), "{}", text(&all));
    let all_phases = phases(&all);
    assert_eq!(
        names(&all_phases),
        ["insert", "read", "update", "read", "delete"]
    );
    assert_clean(&all_phases, 100, 100, &all);
    let params = &all_phases[0]["params"];
    assert_eq!(params["threads"], 2, "{params}");
    assert_eq!(params["parallel"], 8, "{params}");
    assert_eq!(params["rows"], 100, "{params}");
    assert_eq!(params["attributes"], 25, "{params}");
    assert_eq!(params["data_nodes"], 1, "{params}");

    // Insert in one run, read and verify in the next: the table and its
    // generation marker are kept.
    let table = ["--table", "kept"];
    let insert = sandbox.flex(&[&small[..], &table, &["--ops", "insert", "--json"]].concat());
    assert!(insert.status.success(), "{}", text(&insert));
    assert_clean(&phases(&insert), 100, 100, &insert);
    // Under the batch policy (`--batch-scheduling`) as under the normal one.
    let read = sandbox.flex(
        &[
            &small[..],
            &table,
            &["--ops", "read", "--verify", "--json", "--batch-scheduling"],
        ]
        .concat(),
    );
    assert!(read.status.success(), "{}", text(&read));
    assert_clean(&phases(&read), 100, 100, &read);

    // A timed update may stop before some rows: they keep the generation
    // before it, which a verified read still accepts (the marker keeps the range).
    let timed = sandbox.flex(
        &[
            &small[..],
            &table,
            &["--ops", "update", "--duration", "0.2"],
        ]
        .concat(),
    );
    assert!(timed.status.success(), "{}", text(&timed));
    let read =
        sandbox.flex(&[&small[..], &table, &["--ops", "read", "--verify", "--json"]].concat());
    assert!(read.status.success(), "{}", text(&read));
    assert_clean(&phases(&read), 100, 100, &read);

    // One thread updates only its half of the rows: the marker says
    // generation 2, but keys 50..100 still hold generation 1.
    let half = sandbox.flex(&[
        "-t", "1", "-p", "8", "-o", "50", "--table", "kept", "--ops", "update",
    ]);
    assert!(half.status.success(), "{}", text(&half));
    let wrong =
        sandbox.flex(&[&small[..], &table, &["--ops", "read", "--verify", "--json"]].concat());
    assert!(
        !wrong.status.success(),
        "stale values must fail --verify\n{}",
        text(&wrong)
    );
    let wrong_phase = &phases(&wrong)[0];
    assert_eq!(wrong_phase["rows_verified"], 100, "{wrong_phase}");
    assert_eq!(wrong_phase["mismatches"], 50, "{wrong_phase}");
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("no generation in 2..=2 wrote it")
            && stderr.contains("50 rows did not verify"),
        "{}",
        text(&wrong)
    );

    // Rows deleted, then read with --verify: every one is missing.
    let delete = sandbox.flex(&[&small[..], &table, &["--ops", "delete"]].concat());
    assert!(delete.status.success(), "{}", text(&delete));
    let missing =
        sandbox.flex(&[&small[..], &table, &["--ops", "read", "--verify", "--json"]].concat());
    assert!(
        !missing.status.success(),
        "missing rows must fail --verify\n{}",
        text(&missing)
    );
    let missing_phase = &phases(&missing)[0];
    assert_eq!(missing_phase["mismatches"], 100, "{missing_phase}");
    assert_eq!(missing_phase["errors"]["626"], 100, "{missing_phase}");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("the row is missing") && stderr.contains("100 rows did not verify"),
        "{}",
        text(&missing)
    );
    // Without --verify, deleting rows that are gone fails the run too.
    let again = sandbox.flex(&[&small[..], &table, &["--ops", "delete"]].concat());
    assert!(!again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("100 transactions failed"));

    // Executor threads (one for the data node), 4 operations a
    // transaction, the table dropped at the end: 2 × 50 × 4 = 400 rows.
    let exec_args = ["--executors", "1", "-b", "4", "--table", "executors"];
    let executors = sandbox.flex(
        &[
            &small[..],
            &exec_args,
            &[
                "--ops",
                "insert,read,update,read",
                "--verify",
                "--json",
                "--drop",
            ],
        ]
        .concat(),
    );
    assert!(executors.status.success(), "{}", text(&executors));
    let executor_phases = phases(&executors);
    assert_eq!(
        names(&executor_phases),
        ["insert", "read", "update", "read"]
    );
    assert_clean(&executor_phases, 400, 100, &executors);
    assert_eq!(executor_phases[0]["params"]["executors"], 1);
    // Dropped: a new run creates it empty, so verified reads find nothing.
    let after_drop = sandbox.flex(
        &[
            &small[..],
            &exec_args,
            &["--ops", "read", "--verify", "--json", "--drop"],
        ]
        .concat(),
    );
    assert!(!after_drop.status.success(), "{}", text(&after_drop));
    assert_eq!(phases(&after_drop)[0]["mismatches"], 400);

    // --subscribe: a subscriber takes the updates' changes during the
    // phase, and the lag of the commits sampled is measured from their
    // answers to their epochs' arrival (the phase spans several epochs:
    // the stream begins with the epoch after the one open at its start).
    let sub_table = ["--table", "flex_sub"];
    let load = sandbox.flex(&[&small[..], &sub_table, &["--ops", "insert"]].concat());
    assert!(load.status.success(), "{}", text(&load));
    let subscribed = sandbox.flex(
        &[
            &small[..],
            &sub_table,
            &[
                "--ops",
                "update",
                "--duration",
                "1",
                "--subscribe",
                "--json",
                "--drop",
            ],
        ]
        .concat(),
    );
    assert!(subscribed.status.success(), "{}", text(&subscribed));
    let update = &phases(&subscribed)[0];
    let stream = &update["stream"];
    let count = |field: &str| {
        stream[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {update}"))
    };
    let ops = update["ops"].as_u64().unwrap();
    assert!(
        count("changes") > 0 && count("changes") <= ops,
        "the subscriber took some of the {ops} updates: {update}"
    );
    assert!(count("epochs") > 0, "{update}");
    assert!(
        count("sampled") > count("before_start"),
        "commits sampled in the stream's epochs: {update}"
    );
    assert_eq!(count("undelivered"), 0, "{update}");
    assert_eq!(stream["ended"], false, "{update}");
    let p50 = stream["lag_us"]["p50"].as_f64().unwrap();
    assert!(
        p50 > 0.0,
        "a commit reaches the subscriber after its answer: {update}"
    );

    // Bad flags are refused before connecting, naming the flag.
    let bad = sandbox.flex(&["-p", "5000", "--ops", "read"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("-p 5000"),
        "{}",
        text(&bad)
    );
}

/// A subscriber the data nodes cut off (here at once: an epoch of the
/// load holds more than the smallest `MaxBufferedEpochBytes`) is reported
/// with its gap and as ended. (flex used to stop at `ended` and lose a
/// gap queued behind epochs; here the gap comes first, so this run does
/// not tell the two loops apart: bench/events-cost.sh's full-load runs
/// did, 2 epochs and then a gap counted as none.)
#[test]
fn flex_reports_the_gap_of_a_subscriber_cut_off() {
    // Epochs of 500 ms: one holds more than 1 MiB of changes at 5,000
    // updates a second, far below what the slowest machine runs.
    let settings = [
        "--set",
        "MaxBufferedEpochBytes=1M",
        "--set",
        "TimeBetweenEpochs=500",
    ];
    let sandbox = Sandbox::start_with("flex-gap", &settings);
    let table = ["--table", "flex_gap", "-t", "2", "-p", "32", "-o", "5000"];
    let load = sandbox.flex(&[&table[..], &["--ops", "insert"]].concat());
    assert!(load.status.success(), "{}", text(&load));
    let run = sandbox.flex(
        &[
            &table[..],
            &[
                "--ops",
                "update",
                "--duration",
                "2",
                "--subscribe",
                "--json",
            ],
        ]
        .concat(),
    );
    assert!(run.status.success(), "{}", text(&run));
    let update = &phases(&run)[0];
    let stream = &update["stream"];
    assert_eq!(stream["gaps"], 1, "{update}");
    assert_eq!(stream["ended"], true, "{update}");
    assert!(
        stream["changes"].as_u64().unwrap() < update["ops"].as_u64().unwrap(),
        "{update}"
    );
}
