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
//!
//! Every [`CPU_WINDOW`] it also takes each thread's CPU window for
//! ndbinfo's `cpustat` (NDB's THRMAN does this each second): the CPU the
//! kernel charged to the thread and the time the thread spent asleep,
//! spinning and held by full queues, as differences from the last window.
//! Off the data threads: they only keep running totals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::os::{os_thread_figures, OsThreadFigures};
use super::shared::{CpuWindow, Shared, ThreadShared, CPU_WINDOW};
use super::NodeControl;

/// What the watchdog last saw of one thread.
struct Observed {
    progress: u64,
    /// When the watchdog first saw the thread busy at this progress.
    since: Instant,
    /// Stuck time at which the next report is due.
    report_after: Duration,
}

/// One thread's running totals at one moment.
#[derive(Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// `None` before the thread has started, or when `/proc` has no
    /// figures for it.
    os: Option<OsThreadFigures>,
    sleep_ns: u64,
    spin_ns: u64,
    buffer_full_ns: u64,
}

impl CpuSample {
    fn take(thread: &ThreadShared, at: Instant) -> CpuSample {
        let figure = thread.figure();
        CpuSample {
            at,
            os: os_thread_figures(figure.os_tid),
            sleep_ns: figure.sleep_ns,
            spin_ns: figure.spin_ns,
            buffer_full_ns: figure.buffer_full_ns,
        }
    }

    /// The window from `self` to `later`; `None` unless both saw the thread.
    fn window_to(&self, later: &CpuSample) -> Option<CpuWindow> {
        let (os, later_os) = (self.os?, later.os?);
        let us = |from: u64, to: u64| to.saturating_sub(from) / 1_000;
        Some(CpuWindow {
            elapsed_us: later.at.saturating_duration_since(self.at).as_micros() as u64,
            os_user_us: later_os.utime_us.saturating_sub(os.utime_us),
            os_system_us: later_os.stime_us.saturating_sub(os.stime_us),
            sleep_us: us(self.sleep_ns, later.sleep_ns),
            spin_us: us(self.spin_ns, later.spin_ns),
            buffer_full_us: us(self.buffer_full_ns, later.buffer_full_ns),
        })
    }
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
        let mut samples = self.cpu_samples(start);
        let mut next_window = start + CPU_WINDOW;
        while !self.shared.stopping() {
            let now = Instant::now();
            let due = next_check.min(next_window);
            if now < due {
                std::thread::park_timeout(due - now);
                continue;
            }
            if now >= next_window {
                next_window = now + CPU_WINDOW;
                let latest = self.cpu_samples(now);
                let windows = samples
                    .iter()
                    .zip(&latest)
                    .map(|(earlier, later)| earlier.window_to(later))
                    .collect();
                *self.shared.cpu.lock().unwrap_or_else(|e| e.into_inner()) = windows;
                samples = latest;
            }
            if now >= next_check {
                next_check = now + self.interval;
                self.check(now, &mut observed);
            }
        }
    }

    fn cpu_samples(&self, at: Instant) -> Vec<CpuSample> {
        self.shared
            .threads
            .iter()
            .map(|thread| CpuSample::take(thread, at))
            .collect()
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
