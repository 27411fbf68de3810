//! `--subscribe`: one change-stream subscriber on the flex table during a
//! phase (issue 22's cost and lag figures). A thread of its own takes the
//! stream (minimal images: the key and the changed columns) and notes when
//! each epoch arrived; the workers note the epoch and the answer's instant
//! of one committed transaction in [`LAG_SAMPLE_EVERY`]. A sample's lag is
//! its epoch's arrival at the subscriber less its commit's answer at the
//! client: commit to delivery, the time a replica or a cache stays behind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use skarv_client::{Cluster, Error, Event, Images, SubscribeOptions};

use super::histogram::Histogram;
use super::Latency;

/// One committed transaction in this many is sampled for the lag.
pub(super) const LAG_SAMPLE_EVERY: u64 = 16;
/// Samples a worker thread keeps at most in a phase (16 bytes each).
pub(super) const LAG_SAMPLES_PER_THREAD_MAX: usize = 1 << 20;
/// How long the end of a phase waits for the subscriber to receive the
/// last sampled commit's epoch.
const DRAIN_MAX: Duration = Duration::from_secs(10);
/// The subscriber's poll slice: how soon it sees that it must stop.
const POLL_SLICE: Duration = Duration::from_millis(20);
/// The subscription's buffer in the client (its `max_alloc`).
const BUFFER_BYTES: usize = 256 << 20;

/// What the subscriber took in a phase (in a phase's `--json` object).
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamReport {
    /// Row changes received.
    pub changes: u64,
    /// Changes received per second of the phase.
    pub changes_per_s: f64,
    /// Epochs received (empty ones included).
    pub epochs: u64,
    /// Commit (the client's answer) to the epoch's arrival at the
    /// subscriber, of the sampled commits whose epoch arrived.
    pub lag_us: Latency,
    /// Commits sampled.
    pub sampled: u64,
    /// Sampled commits of epochs before the subscription's first: the
    /// stream begins with the epoch after the one open when it was asked
    /// for, so the phase's first commits may fall before it.
    pub before_start: u64,
    /// Sampled commits of later epochs that never arrived (a gap, the
    /// subscription ended, or not within the drain after the phase).
    pub undelivered: u64,
    /// Gaps the subscription reported; the subscription ended, if so.
    pub gaps: u64,
    pub ended: bool,
}

/// What the subscriber thread hands back.
struct Taken {
    arrived: BTreeMap<u64, Instant>,
    changes: u64,
    gaps: u64,
    ended: bool,
}

/// The running subscriber of one phase.
pub(super) struct Watch {
    /// The epoch to wait for before stopping; 0 while the phase runs.
    until: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Taken, Error>>,
    started: Instant,
}

/// Subscribes to `table` and starts taking its stream.
pub(super) fn watch(cluster: &Cluster, table: &str) -> Result<Watch, Error> {
    let session = cluster.session()?;
    let options = SubscribeOptions {
        images: Images::Minimal,
        columns: None,
        hidden_columns: false,
        max_alloc: BUFFER_BYTES,
    };
    let mut subscription = session.subscribe(&[table], options)?;
    let until = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (until_seen, stop_seen) = (Arc::clone(&until), Arc::clone(&stop));
    let handle = std::thread::Builder::new()
        .name("flex-subscriber".to_owned())
        .spawn(move || {
            // The session stays open as long as its subscription.
            let _session = session;
            let mut taken = Taken {
                arrived: BTreeMap::new(),
                changes: 0,
                gaps: 0,
                ended: false,
            };
            let mut last = 0u64;
            loop {
                let wanted = until_seen.load(Ordering::Acquire);
                if stop_seen.load(Ordering::Acquire) || (wanted != 0 && last >= wanted) {
                    break;
                }
                match subscription.next_timeout(POLL_SLICE)? {
                    Some(Event::Epoch(epoch)) => {
                        last = epoch.epoch.get();
                        taken.arrived.insert(last, Instant::now());
                        taken.changes += epoch.changes.len() as u64;
                    }
                    Some(Event::Gap { .. }) => taken.gaps += 1,
                    // The cluster restarted from disk: a gap too, and the
                    // epochs are numbered anew.
                    Some(Event::Restart { resumed, .. }) => {
                        taken.gaps += 1;
                        last = resumed.get();
                    }
                    // Ended, and every event taken: a subscription ends as
                    // its gap is queued, behind the epochs before it, so
                    // stopping at `ended` alone lost the gap.
                    None if subscription.state().ended => {
                        taken.ended = true;
                        break;
                    }
                    None => {}
                }
            }
            Ok(taken)
        })
        .map_err(|e| Error::new(0, format!("starting the subscriber thread: {e}")))?;
    Ok(Watch {
        until,
        stop,
        handle,
        started: Instant::now(),
    })
}

impl Watch {
    /// Waits (at most [`DRAIN_MAX`]) for the epochs of `samples` to
    /// arrive, stops the subscriber and measures `samples`' lag.
    pub(super) fn finish(self, samples: &[(u64, Instant)]) -> Result<StreamReport, Error> {
        let newest = samples.iter().map(|s| s.0).max().unwrap_or(0);
        let phase_s = self.started.elapsed().as_secs_f64();
        // 0 means "running": a phase with no sample stops at once.
        self.until.store(newest.max(1), Ordering::Release);
        let deadline = Instant::now() + DRAIN_MAX;
        while !self.handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(POLL_SLICE);
        }
        self.stop.store(true, Ordering::Release);
        let taken = match self.handle.join() {
            Ok(taken) => taken?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok(measure(&taken, samples, phase_s))
    }
}

/// The report of `taken` against the commits `samples` (epoch, answered).
fn measure(taken: &Taken, samples: &[(u64, Instant)], phase_s: f64) -> StreamReport {
    let mut histogram = Histogram::new();
    let (mut before_start, mut undelivered) = (0, 0);
    let first = taken.arrived.keys().next().copied().unwrap_or(u64::MAX);
    for &(epoch, answered) in samples {
        match taken.arrived.get(&epoch) {
            Some(arrived) => {
                let lag = arrived.saturating_duration_since(answered);
                histogram.record(u64::try_from(lag.as_nanos()).unwrap_or(u64::MAX));
            }
            None if epoch < first => before_start += 1,
            None => undelivered += 1,
        }
    }
    StreamReport {
        changes: taken.changes,
        changes_per_s: if phase_s > 0.0 {
            taken.changes as f64 / phase_s
        } else {
            0.0
        },
        epochs: taken.arrived.len() as u64,
        lag_us: Latency::of(&histogram),
        sampled: samples.len() as u64,
        before_start,
        undelivered,
        gaps: taken.gaps,
        ended: taken.ended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_lags_from_its_answer_to_its_epochs_arrival() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let taken = Taken {
            arrived: BTreeMap::from([(10, at(100)), (11, at(130))]),
            changes: 40,
            gaps: 0,
            ended: false,
        };
        // Epoch 10 answered at 60 and 90 ms: 40 and 10 ms; epoch 11 at
        // 100 ms: 30 ms; epoch 12 never arrived; epoch 9 was before the
        // subscription's first.
        let samples = [
            (9, at(50)),
            (10, at(60)),
            (10, at(90)),
            (11, at(100)),
            (12, at(120)),
        ];
        let report = measure(&taken, &samples, 2.0);
        assert_eq!(
            (report.sampled, report.before_start, report.undelivered),
            (5, 1, 1)
        );
        assert_eq!((report.changes, report.epochs), (40, 2));
        assert_eq!(report.changes_per_s, 20.0);
        let near = |a: f64, b: f64| (a - b).abs() <= b / 50.0;
        assert!(near(report.lag_us.max, 40_000.0), "{:?}", report.lag_us);
        assert!(near(report.lag_us.p50, 30_000.0), "{:?}", report.lag_us);
    }
}
