//! The angel: a small parent process that watches the data node process and
//! starts it again when it dies (NDB's angel process). The node tells the
//! angel its node id and `StopOnError` in one line on stdout once it has its
//! configuration; every other line of the node's stdout is passed through.
//!
//! Exit of the node process, and what the angel does:
//! - status 0: stopped on purpose → the angel exits 0;
//! - status [`EXIT_RESTART`]: asked to restart (restart order, excluded) → start again;
//! - status [`EXIT_FAILED`]: stopped on a failure a restart would meet again
//!   (files it cannot restore or write) → the angel exits 1, the node stays down;
//! - anything else (a crash, SIGKILL): start again, unless `StopOnError=1`,
//!   in which case the angel exits 1 and the node stays down.
//!
//! Starts again are paced ([`RestartLimits`]): the pause before each grows
//! exponentially while the node keeps dying soon after its start, up to a
//! bound, and after [`RestartLimits::quick_failures_max`] such starts in a
//! row the angel gives up and exits 1 — a node that cannot start (a full
//! disk, a peer it cannot reach) never spins in a restart loop. A run that
//! lasted [`RestartLimits::stable_run`] resets the count.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::node::{ANGEL_CONTROL_PREFIX, EXIT_FAILED, EXIT_RESTART};

/// Pause before the first start again of a node that died soon after its
/// start; doubled for each further such start in a row.
pub const RESTART_DELAY: Duration = Duration::from_millis(300);
/// The longest pause between starts.
pub const RESTART_DELAY_MAX: Duration = Duration::from_secs(30);
/// A run at least this long was not a failed start: the pacing starts over.
pub const STABLE_RUN: Duration = Duration::from_secs(60);
/// Failed starts in a row (each shorter than [`STABLE_RUN`]) after which
/// the angel gives up: with the pauses above, about 40 s of trying.
pub const QUICK_FAILURES_MAX: u32 = 8;

/// How the angel paces starts again and when it gives up.
#[derive(Clone, Debug)]
pub struct RestartLimits {
    /// Pause after the first failed start; doubled per failed start in a row.
    pub delay_first: Duration,
    /// Bound of the pause.
    pub delay_max: Duration,
    /// A run this long resets the count of failed starts.
    pub stable_run: Duration,
    /// Failed starts in a row after which the angel gives up.
    pub quick_failures_max: u32,
}

impl Default for RestartLimits {
    fn default() -> Self {
        RestartLimits {
            delay_first: RESTART_DELAY,
            delay_max: RESTART_DELAY_MAX,
            stable_run: STABLE_RUN,
            quick_failures_max: QUICK_FAILURES_MAX,
        }
    }
}

impl RestartLimits {
    /// The pause before starting again after `quick_failures` (≥ 1) failed
    /// starts in a row; a restart after a stable run waits `delay_first`.
    pub fn delay(&self, quick_failures: u32) -> Duration {
        let doublings = quick_failures.saturating_sub(1).min(16);
        self.delay_first
            .saturating_mul(1 << doublings)
            .min(self.delay_max)
    }
}
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
    run_with(program, args, initial_args, &RestartLimits::default())
}

/// [`run`] with the pacing of starts again given.
pub fn run_with(
    program: &std::path::Path,
    args: &[String],
    initial_args: &[String],
    limits: &RestartLimits,
) -> Result<(), String> {
    assert!(
        limits.quick_failures_max > 0,
        "the angel starts at least once"
    );
    assert!(
        limits.delay_first <= limits.delay_max,
        "the pause bound holds"
    );
    let handler = on_terminate as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
    let told = Arc::new(Told::default());
    let mut starts = 0u32;
    // Starts in a row that ended before `stable_run`.
    let mut quick_failures = 0u32;
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
        let started_at = Instant::now();
        pass_stdout(&mut child, Arc::clone(&told));
        let status = wait(&mut child)?;
        let ran = started_at.elapsed();
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
            Some(EXIT_FAILED) => {
                return Err(format!(
                    "data node {} stopped as failed ({}): a restart would meet the same fault; \
                     staying down (its log above says why and what to do)",
                    told.describe_node(),
                    describe(status)
                ));
            }
            _ => {
                let node = told.describe_node();
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
        if ran >= limits.stable_run {
            quick_failures = 0;
        }
        quick_failures += 1;
        if quick_failures >= limits.quick_failures_max {
            return Err(format!(
                "data node {} ended {quick_failures} starts in a row within {} s of starting \
                 (last: {}); giving up instead of restarting it again (its log above says why)",
                told.describe_node(),
                limits.stable_run.as_secs(),
                describe(status)
            ));
        }
        let delay = limits.delay(quick_failures);
        eprintln!(
            "angel: starting data node {} again in {} ms (failed start {quick_failures} of at most {})",
            told.describe_node(),
            delay.as_millis(),
            limits.quick_failures_max
        );
        if pause(delay) {
            eprintln!("angel: terminated while waiting to restart the data node");
            return Ok(());
        }
    }
}

/// Sleeps `delay` in short steps; true when a termination request came.
fn pause(delay: Duration) -> bool {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        if TERMINATE.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(POLL_INTERVAL.min(until.saturating_duration_since(Instant::now())));
    }
    TERMINATE.load(Ordering::SeqCst)
}

impl Told {
    /// The node id for messages, `?` before the node told it.
    fn describe_node(&self) -> String {
        self.node_id()
            .map_or_else(|| "?".to_owned(), |n| n.to_string())
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::mpsc;

    /// Long enough for the few short starts of these tests, short enough
    /// that a restart loop shows as a timeout.
    const ANGEL_WAIT_MAX: Duration = Duration::from_secs(20);

    fn fast_limits() -> RestartLimits {
        RestartLimits {
            delay_first: Duration::from_millis(10),
            delay_max: Duration::from_millis(40),
            stable_run: Duration::from_secs(30),
            quick_failures_max: 4,
        }
    }

    /// Runs the angel over `sh -c script` on a thread; its result, or
    /// `None` when it is still running after `ANGEL_WAIT_MAX` (a loop).
    fn angel_over(script: &str, limits: RestartLimits) -> Option<(Result<(), String>, Duration)> {
        let args = vec!["-c".to_owned(), script.to_owned()];
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let began = Instant::now();
            let result = run_with(Path::new("/bin/sh"), &args, &[], &limits);
            let _ = tx.send((result, began.elapsed()));
        });
        rx.recv_timeout(ANGEL_WAIT_MAX).ok()
    }

    #[test]
    fn the_pause_doubles_per_failed_start_up_to_its_bound() {
        let limits = fast_limits();
        let delays: Vec<u128> = (1..=5).map(|n| limits.delay(n).as_millis()).collect();
        assert_eq!(delays, [10, 20, 40, 40, 40]);
        let limits = RestartLimits::default();
        assert_eq!(limits.delay(1), RESTART_DELAY);
        assert_eq!(limits.delay(u32::MAX), RESTART_DELAY_MAX);
    }

    #[test]
    fn a_node_that_keeps_dying_at_start_is_given_up_not_looped() {
        // Exits as asked for a restart, at once, every time: the restart
        // loop of a node whose disk is full.
        let script = format!("exit {EXIT_RESTART}");
        let (result, took) =
            angel_over(&script, fast_limits()).expect("the angel gave up within the wait");
        let error = result.expect_err("giving up is a failure");
        assert!(error.contains("4 starts in a row"), "{error}");
        assert!(error.contains(&format!("status {EXIT_RESTART}")), "{error}");
        // Three pauses before the fourth start: 10 + 20 + 40 ms at least.
        assert!(took >= Duration::from_millis(70), "paused {took:?} in all");
    }

    #[test]
    fn a_node_that_stopped_as_failed_is_not_started_again() {
        let script = format!("exit {EXIT_FAILED}");
        let (result, _) =
            angel_over(&script, fast_limits()).expect("the angel ended within the wait");
        let error = result.expect_err("a failed node makes the angel fail");
        assert!(error.contains("stopped as failed"), "{error}");
    }

    #[test]
    fn a_stopped_node_ends_the_angel_with_success() {
        let (result, _) = angel_over("exit 0", fast_limits()).expect("the angel ended");
        assert_eq!(result, Ok(()));
    }
}
