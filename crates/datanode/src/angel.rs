//! The angel: a small parent process that watches the data node process and
//! starts it again when it dies (NDB's angel process). The node tells the
//! angel its node id and `StopOnError` in one line on stdout once it has its
//! configuration; every other line of the node's stdout is passed through.
//!
//! Exit of the node process, and what the angel does:
//! - status 0: stopped on purpose → the angel exits 0;
//! - status [`EXIT_RESTART`]: asked to restart (restart order, excluded) → start again;
//! - anything else (a crash, SIGKILL): start again, unless `StopOnError=1`,
//!   in which case the angel exits 1 and the node stays down.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::node::{ANGEL_CONTROL_PREFIX, EXIT_RESTART};

/// Pause before starting a node that died, so a node that dies at once does not spin.
pub const RESTART_DELAY: Duration = Duration::from_millis(300);
/// How often the angel looks at its child and at termination requests.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// After forwarding SIGTERM, how long to wait before SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_secs(10);

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

/// What the node told its angel.
#[derive(Default)]
struct Told {
    node_id: AtomicU32,
    stop_on_error: AtomicU8,
}

/// Runs the node command (`program` with `args`) under the angel until it
/// stops for good. `initial_args` are used for the first start only (e.g. `--initial`).
pub fn run(
    program: &std::path::Path,
    args: &[String],
    initial_args: &[String],
) -> Result<(), String> {
    let handler = on_terminate as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
    let told = Arc::new(Told::default());
    let mut starts = 0u32;
    loop {
        let mut command = Command::new(program);
        command.args(args);
        if starts == 0 {
            command.args(initial_args);
        } else if let Some(node) = told.node_id() {
            // Come back as the same node.
            if !args.iter().any(|a| a == "--node-id") {
                command.args(["--node-id", &node.to_string()]);
            }
        }
        command.stdout(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("angel: cannot start {}: {e}", program.display()))?;
        starts += 1;
        eprintln!(
            "angel: started data node process {} (start {starts})",
            child.id()
        );
        pass_stdout(&mut child, Arc::clone(&told));
        let status = wait(&mut child)?;
        if TERMINATE.load(Ordering::SeqCst) {
            eprintln!(
                "angel: terminated; data node process ended with {}",
                describe(status)
            );
            return Ok(());
        }
        match status.code() {
            Some(0) => {
                eprintln!("angel: data node stopped");
                return Ok(());
            }
            Some(EXIT_RESTART) => {
                eprintln!("angel: data node asked for a restart");
            }
            _ => {
                let node = told
                    .node_id()
                    .map_or_else(|| "?".to_owned(), |n| n.to_string());
                if told.stop_on_error.load(Ordering::SeqCst) == 1 {
                    return Err(format!(
                        "data node {node} {} and StopOnError=1: staying down",
                        describe(status)
                    ));
                }
                eprintln!(
                    "angel: data node {node} {}; restarting it",
                    describe(status)
                );
            }
        }
        std::thread::sleep(RESTART_DELAY);
    }
}

impl Told {
    fn node_id(&self) -> Option<u32> {
        match self.node_id.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
        }
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".to_owned(),
    }
}

/// Reads the node's stdout: the control line is for us, the rest is passed on.
fn pass_stdout(child: &mut Child, told: Arc<Told>) {
    let Some(stdout) = child.stdout.take() else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("angel-stdout".to_owned())
        .spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else {
                    return;
                };
                if let Some(rest) = line.strip_prefix(ANGEL_CONTROL_PREFIX) {
                    for field in rest.split_whitespace() {
                        if let Some(id) = field.strip_prefix("node_id=") {
                            if let Ok(id) = id.parse::<u32>() {
                                told.node_id.store(id, Ordering::SeqCst);
                            }
                        } else if let Some(flag) = field.strip_prefix("stop_on_error=") {
                            told.stop_on_error
                                .store(u8::from(flag == "1"), Ordering::SeqCst);
                        }
                    }
                } else {
                    println!("{line}");
                }
            }
        });
    if let Err(error) = spawned {
        eprintln!("angel: cannot read the data node's output: {error}");
    }
}

/// Waits for the child; on SIGTERM/SIGINT forwards SIGTERM and waits a grace period.
fn wait(child: &mut Child) -> Result<ExitStatus, String> {
    let mut forwarded_at = None;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("angel: wait: {e}"))? {
            return Ok(status);
        }
        if TERMINATE.load(Ordering::SeqCst) {
            match forwarded_at {
                None => {
                    // SAFETY: plain kill(2) on our own child's pid.
                    unsafe {
                        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
                    }
                    forwarded_at = Some(std::time::Instant::now());
                }
                Some(at) if at.elapsed() > TERMINATE_GRACE => {
                    let _ = child.kill();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
