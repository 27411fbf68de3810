//! Real processes: a data node whose files are damaged (issue 25, item 7).
//! A sandbox of 2 data nodes × 2 replicas (one node group) gets rows; node
//! 3 is killed with its angel, and a byte of each of its redo control files
//! is flipped. Then:
//! - `skarv data` for node 3 stops at once and for good: its angel exits
//!   non-zero (it used to exit 0) and the message names `--discard-corrupt`;
//! - `skarv data --discard-corrupt` moves its files into `discarded-<time>/`
//!   (with a `REASON`), restarts the node empty, and it copies every row
//!   from node 2: with node 2 killed afterwards, node 3 serves them all.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use skarv_client::{Cluster, ExecMode, Value};

use common::{id_value_table, sigkill, wait_for, walk, Sandbox, SKARV};

const TABLE: &str = "damaged_rows";
const ROWS: u64 = 300;
/// The damaged node without the flag must have stopped for good by then.
const STOP_MAX: Duration = Duration::from_secs(30);
/// The damaged node with the flag must serve again by then (two starts
/// and a copy of `ROWS` rows).
const RESTART_MAX: Duration = Duration::from_secs(120);
/// Attempts of a read or a write while nodes come and go.
const ATTEMPTS_MAX: u32 = 400;
/// Pause between attempts, so that a node that answers at once does not spin.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
const DAMAGED: u64 = 3;
const PARTNER: u64 = 2;

/// `skarv data` for node `DAMAGED` with `more`, its output in `log`.
fn start_data_node(sandbox: &Sandbox, more: &[&str], log: &Path) -> Child {
    start_node(sandbox, DAMAGED, more, log)
}

/// `skarv data` for node `node` with `more`, its output in `log`.
fn start_node(sandbox: &Sandbox, node: u64, more: &[&str], log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("a log file");
    Command::new(SKARV)
        .args([
            "data",
            "--connect",
            &sandbox.connect,
            "--node-id",
            &node.to_string(),
        ])
        .args(more)
        .stdout(out.try_clone().expect("the log file"))
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .expect("start skarv data")
}

/// An angel this test started: stopped on drop with SIGTERM (it passes
/// it on to its node), so a failing test leaves no process behind.
struct Angel(Child);

impl Drop for Angel {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe {
                libc::kill(self.0.id() as i32, libc::SIGTERM);
            }
            let _ = self.0.wait();
        }
    }
}

/// Runs `attempt` until it succeeds, retrying any error (nodes come and go).
fn retrying<T>(what: &str, mut attempt: impl FnMut() -> skarv_client::Result<T>) -> T {
    let mut last = String::new();
    for _ in 0..ATTEMPTS_MAX {
        match attempt() {
            Ok(value) => return value,
            Err(error) => last = error.to_string(),
        }
        std::thread::sleep(RETRY_PAUSE);
    }
    panic!("{what}: {ATTEMPTS_MAX} attempts failed, the last with: {last}");
}

/// Node 3's redo control files under `sandbox`, damaged in place (its
/// process must be down).
fn damage_control_files(sandbox: &Sandbox) -> PathBuf {
    let fs_dir = walk(&sandbox.dir)
        .into_iter()
        .find(|p| p.to_string_lossy().contains(&format!("ndb_{DAMAGED}_fs")))
        .and_then(|p| {
            p.ancestors()
                .find(|a| a.ends_with(format!("ndb_{DAMAGED}_fs")))
                .map(Path::to_path_buf)
        })
        .expect("node 3's file system");
    let controls: Vec<PathBuf> = walk(&fs_dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "control"))
        .collect();
    assert!(
        !controls.is_empty(),
        "no redo control file in {}",
        fs_dir.display()
    );
    for control in &controls {
        let mut bytes = std::fs::read(control).expect("read a control file");
        bytes[0] ^= 0xff;
        std::fs::write(control, bytes).expect("damage a control file");
    }
    fs_dir
}

/// `StartPartialTimeout` of the sandbox (NDB's default, 30 s): a node
/// that waited for the damaged one would start only after it.
const START_PARTIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Issue 25, item 7: the whole cluster crashed, node 3's files are
/// damaged, and node 3 is started first: it stops as failed, and its
/// notice reaches no data node (none is up). Node 2, started after node 3
/// ended, hears it from the mgmd (`MgmNotJoiningRep`) and starts alone at
/// once, rather than after `StartPartialTimeout`.
#[test]
fn a_node_started_after_a_damaged_one_stopped_does_not_wait_for_it() {
    let sandbox = Sandbox::start("late-starter", 27_100);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    session
        .create_table(&id_value_table(TABLE))
        .expect("create the table");
    drop(session);
    drop(cluster);
    for node in [PARTNER, DAMAGED] {
        sigkill(sandbox.angel_pid(node));
        sigkill(sandbox.pid(node));
    }
    wait_for(
        "both data nodes to be down",
        Duration::from_secs(20),
        || sandbox.state(PARTNER) != "started" && sandbox.state(DAMAGED) != "started",
    );
    damage_control_files(&sandbox);

    let log = sandbox.dir.join("node3-first.log");
    let mut damaged = Angel(start_data_node(&sandbox, &[], &log));
    let mut status = None;
    wait_for("node 3 to stop as failed", STOP_MAX, || {
        status = damaged.0.try_wait().expect("wait for skarv data");
        status.is_some()
    });
    assert!(
        !status.expect("ended").success(),
        "node 3 stopped as failed"
    );

    let log = sandbox.dir.join("node2-late.log");
    let began = Instant::now();
    let _late = Angel(start_node(&sandbox, PARTNER, &[], &log));
    wait_for("node 2 to start alone", START_PARTIAL_TIMEOUT * 2, || {
        sandbox.state(PARTNER) == "started"
    });
    let took = began.elapsed();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("node 2 started alone after {took:?}");
    assert!(
        took < START_PARTIAL_TIMEOUT,
        "node 2 waited {took:?} for a node that will not come\n{output}"
    );
    assert!(
        output.contains("node 3 will not take part in this start"),
        "node 2 was told why:\n{output}"
    );
}

#[test]
fn a_damaged_node_stops_non_zero_and_discard_corrupt_copies_from_its_partner() {
    let sandbox = Sandbox::start("damaged-files", 27_000);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let def = id_value_table(TABLE);
    session.create_table(&def).expect("create the table");
    let table = session.table(TABLE).expect("the table");
    for key in 0..ROWS {
        retrying("insert", || {
            let tx = session.begin_with_hint(&table, &[Value::UInt(key)])?;
            tx.insert(
                &table,
                &[("id", Value::UInt(key)), ("v", Value::UInt(key * 7))],
            )?;
            tx.execute(ExecMode::Commit)
        });
    }

    // Node 3 goes down for good, then its redo control files are damaged.
    let angel = sandbox.angel_pid(DAMAGED);
    let pid = sandbox.pid(DAMAGED);
    sigkill(angel);
    sigkill(pid);
    wait_for("node 3 to be down", Duration::from_secs(20), || {
        sandbox.state(DAMAGED) != "started"
    });
    let fs_dir = walk(&sandbox.dir)
        .into_iter()
        .find(|p| p.to_string_lossy().contains(&format!("ndb_{DAMAGED}_fs")))
        .and_then(|p| {
            p.ancestors()
                .find(|a| a.ends_with(format!("ndb_{DAMAGED}_fs")))
                .map(Path::to_path_buf)
        })
        .expect("node 3's file system");
    let controls: Vec<PathBuf> = walk(&fs_dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "control"))
        .collect();
    assert!(
        !controls.is_empty(),
        "no redo control file in {}",
        fs_dir.display()
    );
    for control in &controls {
        let mut bytes = std::fs::read(control).expect("read a control file");
        bytes[0] ^= 0xff;
        std::fs::write(control, bytes).expect("damage a control file");
    }

    // Without the flag: it stops for good, non-zero, and says what to do.
    let log = sandbox.dir.join("node3-refused.log");
    let began = Instant::now();
    let mut refused = Angel(start_data_node(&sandbox, &[], &log));
    let mut status = None;
    wait_for("node 3 without the flag to end", STOP_MAX, || {
        status = refused.0.try_wait().expect("wait for skarv data");
        status.is_some()
    });
    let status = status.expect("ended");
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !status.success(),
        "a node that cannot restore exits non-zero: {status}\n{output}"
    );
    assert!(
        output.contains("--discard-corrupt"),
        "the way out is named:\n{output}"
    );
    assert_eq!(
        output.matches("started data node process").count(),
        1,
        "one start:\n{output}"
    );
    eprintln!(
        "node 3 without the flag ended {status} after {:?}",
        began.elapsed()
    );
    assert!(fs_dir.exists(), "without the flag the files stay");

    // With the flag: files aside, empty restart, copy from node 2.
    let log = sandbox.dir.join("node3-discard.log");
    let began = Instant::now();
    let discarding = Angel(start_data_node(&sandbox, &["--discard-corrupt"], &log));
    // The president (node 2, the only other node) logs when node 3 has
    // copied everything and serves.
    let president_log = sandbox.dir.join(format!("node{PARTNER}.log"));
    wait_for("node 3 to copy and serve again", RESTART_MAX, || {
        std::fs::read_to_string(&president_log)
            .is_ok_and(|l| l.contains(&format!("node {DAMAGED} has caught up: it serves")))
    });
    eprintln!(
        "node 3 with --discard-corrupt started after {:?}",
        began.elapsed()
    );
    let data_dir = fs_dir.parent().expect("a data directory");
    let aside: Vec<PathBuf> = std::fs::read_dir(data_dir)
        .expect("the data directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("discarded-"))
        })
        .collect();
    assert_eq!(
        aside.len(),
        1,
        "one discarded-<time>/ in {}",
        data_dir.display()
    );
    let reason = std::fs::read_to_string(aside[0].join("REASON")).expect("REASON");
    assert!(reason.contains("control file is damaged"), "{reason}");
    for control in &controls {
        let moved = aside[0].join(control.strip_prefix(data_dir).expect("under the data dir"));
        assert!(
            moved.exists(),
            "{} kept aside as {}",
            control.display(),
            moved.display()
        );
    }

    // The rows are on node 3: with node 2 gone, it serves every one. The
    // copy ends before node 3 counts as started (its LCP included), but
    // the client may need a moment to route to it alone.
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    sigkill(sandbox.angel_pid(PARTNER));
    sigkill(sandbox.pid(PARTNER));
    let session = Cluster::connect(&sandbox.connect)
        .and_then(|c| c.session())
        .expect("a session");
    let table = session.table(TABLE).expect("the table");
    for key in 0..ROWS {
        let value = retrying(&format!("read row {key}"), || {
            let tx = session.begin_with_hint(&table, &[Value::UInt(key)])?;
            let read = tx.read(&table, &[Value::UInt(key)], skarv_client::LockMode::Shared)?;
            let outcome = tx.execute(ExecMode::Commit)?;
            Ok(outcome.row(read).and_then(|row| match row.get("v") {
                Some(Value::UInt(v)) => Some(*v),
                _ => None,
            }))
        });
        assert_eq!(value, Some(key * 7), "row {key} on node 3\n{}", output());
    }
    drop(discarding);
}
