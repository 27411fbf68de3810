//! The watchdog (NDB's WatchDog thread): every `watchdog_interval_ms` it
//! looks at each execution thread, and one that is busy but has not moved
//! on — no signal finished, no sleep — for `watchdog_stuck_ms` is reported
//! to the node and logged as an error. A block stuck in `execute`, or
//! threads waiting on each other's full queues, show up this way. A
//! sleeping thread is never stuck.
//!
//! A thread stuck for long is reported again each time its stuck time has
//! doubled since the last report, so the log shows that it stays stuck
//! without repeating every interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::NodeControl;

/// What the watchdog last saw of one thread.
struct Observed {
    progress: u64,
    /// When the watchdog first saw the thread busy at this progress.
    since: Instant,
    /// Stuck time at which the next report is due.
    report_after: Duration,
}

pub(crate) struct Watchdog {
    pub(crate) shared: Arc<Shared>,
    pub(crate) control: Arc<dyn NodeControl>,
    pub(crate) interval: Duration,
    pub(crate) stuck: Duration,
}

impl Watchdog {
    pub(crate) fn run(self) {
        assert!(!self.interval.is_zero());
        assert!(!self.stuck.is_zero());
        let start = Instant::now();
        let mut observed: Vec<Observed> = self
            .shared
            .threads
            .iter()
            .map(|thread| Observed {
                progress: thread.progress(),
                since: start,
                report_after: self.stuck,
            })
            .collect();
        let mut next_check = start + self.interval;
        while !self.shared.stopping() {
            let now = Instant::now();
            if now < next_check {
                std::thread::park_timeout(next_check - now);
                continue;
            }
            next_check = now + self.interval;
            self.check(now, &mut observed);
        }
    }

    fn check(&self, now: Instant, observed: &mut [Observed]) {
        for (thread, seen) in self.shared.threads.iter().zip(observed.iter_mut()) {
            let busy = thread.is_busy();
            let progress = thread.progress();
            if !busy || progress != seen.progress {
                seen.progress = progress;
                seen.since = now;
                seen.report_after = self.stuck;
                continue;
            }
            let stuck_for = now.duration_since(seen.since);
            if stuck_for < seen.report_after {
                continue;
            }
            tracing::error!(
                thread = %thread.name,
                role = %thread.role,
                stuck_ms = stuck_for.as_millis() as u64,
                "execution thread made no progress"
            );
            self.control
                .watchdog_report(&thread.name, thread.role, stuck_for);
            seen.report_after = stuck_for.saturating_mul(2);
        }
    }
}
