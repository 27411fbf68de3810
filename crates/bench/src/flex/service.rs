//! The gap in service: how long, at worst, no transaction of a phase
//! completed successfully — what a client sees of a node failure (issue 6:
//! reads and writes succeed again within 1 s of a SIGKILL of a data node).
//!
//! Each thread keeps a [`ServiceLog`] of its own: the intervals between its
//! successive successes that are at least its resolution long, and its
//! successes per second. Nothing is shared while the phase runs (no lock,
//! no allocation per transaction: the lists grow at most once per second or
//! per long gap). At the end [`merge`] intersects the threads' gaps: a time
//! when no thread had a success is inside a gap of every thread, so every
//! cluster-wide gap at least as long as the coarsest thread's resolution is
//! found exactly.
//!
//! A thread's gap before its first success counts from the phase's start
//! (a cluster that does not answer at all is a gap too), and the one after
//! its last success runs to the phase's end.

use std::time::{Duration, Instant};

/// Gaps shorter than this are not kept at first.
pub const GAP_RESOLUTION_START_US: u64 = 1_000;
/// Gaps a thread keeps; when full, its resolution doubles and the gaps
/// below it are dropped (so a thread keeps O(1) work per success).
pub const GAPS_PER_THREAD_MAX: usize = 1_024;
/// Seconds counted in `per_second` (a day); later successes count in the last.
pub const SECONDS_COUNTED_MAX: usize = 86_400;
/// The longest gaps reported, so a script can tell the one after a kill
/// from the pauses of a loaded machine.
pub const GAPS_REPORTED_MAX: usize = 8;

/// An interval without a success of one thread (or, merged, of any).
/// `None` ends are open: before the first success, after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Gap {
    from: Option<Instant>,
    to: Option<Instant>,
}

impl Gap {
    fn open(&self) -> bool {
        self.from.is_none() || self.to.is_none()
    }

    fn length(&self) -> Option<Duration> {
        Some(self.to?.saturating_duration_since(self.from?))
    }

    /// Where two gaps overlap, if they do for a positive time.
    fn intersect(&self, other: &Gap) -> Option<Gap> {
        let from = self.from.max(other.from);
        let to = match (self.to, other.to) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (from, to) {
            (Some(from), Some(to)) if to <= from => None,
            _ => Some(Gap { from, to }),
        }
    }
}

/// One thread's record of its successes (see the module doc).
pub(super) struct ServiceLog {
    started: Instant,
    last_success: Option<Instant>,
    resolution: Duration,
    gaps: Vec<Gap>,
    per_second: Vec<u64>,
    /// The instant of the previous success and its second: completions
    /// taken together share their instant, and the second success at an
    /// instant only counts (no gap ends at it: the last success is at
    /// least that instant).
    previous: Option<(Instant, usize)>,
}

impl ServiceLog {
    pub(super) fn new(started: Instant, seconds: usize) -> ServiceLog {
        ServiceLog {
            started,
            last_success: None,
            resolution: Duration::from_micros(GAP_RESOLUTION_START_US),
            gaps: Vec::with_capacity(GAPS_PER_THREAD_MAX),
            per_second: Vec::with_capacity(seconds.min(SECONDS_COUNTED_MAX)),
            previous: None,
        }
    }

    /// A transaction completed successfully `at`.
    pub(super) fn success(&mut self, at: Instant) {
        if let Some((previous, second)) = self.previous {
            if previous == at {
                debug_assert!(self.last_success.is_some_and(|last| last >= at));
                self.per_second[second] += 1;
                return;
            }
        }
        self.success_general(at);
    }

    /// [`ServiceLog::success`] without its shortcut for a repeated instant.
    fn success_general(&mut self, at: Instant) {
        let since_start = at.saturating_duration_since(self.started);
        let second = (since_start.as_secs() as usize).min(SECONDS_COUNTED_MAX - 1);
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
        self.previous = Some((at, second));
        let long = match self.last_success {
            None => true,
            Some(last) => at.saturating_duration_since(last) >= self.resolution,
        };
        if long {
            self.push(Gap {
                from: self.last_success,
                to: Some(at),
            });
        }
        self.last_success = Some(at.max(self.last_success.unwrap_or(at)));
    }

    /// The thread is done: the gap after its last success stays open.
    pub(super) fn finish(&mut self) {
        self.push(Gap {
            from: self.last_success,
            to: None,
        });
    }

    fn push(&mut self, gap: Gap) {
        while self.gaps.len() >= GAPS_PER_THREAD_MAX {
            self.resolution *= 2;
            let resolution = self.resolution;
            self.gaps
                .retain(|g| g.open() || g.length().is_some_and(|l| l >= resolution));
        }
        // Successes come in time order (a thread's completions are filed
        // as they are taken), so the gaps are sorted and disjoint.
        debug_assert!(self
            .gaps
            .last()
            .is_none_or(|last| last.to.is_some_and(|to| gap.from.is_some_and(|f| f >= to))));
        self.gaps.push(gap);
    }
}

/// The threads' logs of a phase, merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct ServiceSummary {
    /// The longest time without a success (from the phase's start or the
    /// last success to the next success or the phase's end).
    pub(super) gap_max: Duration,
    /// When it began, from the phase's start.
    pub(super) gap_at: Duration,
    /// The longest gaps (at most [`GAPS_REPORTED_MAX`]), longest first:
    /// when each began, from the phase's start, and its length.
    pub(super) gaps: Vec<(Duration, Duration)>,
    /// Gaps shorter than this may have been missed.
    pub(super) resolution: Duration,
    /// Successes in each second of the phase.
    pub(super) per_second: Vec<u64>,
}

/// Merges the logs of a phase that ran from `start` to `end` (see the
/// module doc).
pub(super) fn merge(logs: &[&ServiceLog], start: Instant, end: Instant) -> ServiceSummary {
    assert!(end >= start, "a phase ends after it starts");
    let resolution = logs
        .iter()
        .map(|l| l.resolution)
        .max()
        .unwrap_or(Duration::from_micros(GAP_RESOLUTION_START_US));
    let mut per_second = Vec::new();
    for log in logs {
        if per_second.len() < log.per_second.len() {
            per_second.resize(log.per_second.len(), 0);
        }
        for (total, count) in per_second.iter_mut().zip(&log.per_second) {
            *total += count;
        }
    }
    let kept = |log: &ServiceLog| -> Vec<Gap> {
        log.gaps
            .iter()
            .copied()
            .filter(|g| g.open() || g.length().is_some_and(|l| l >= resolution))
            .collect()
    };
    // No thread: nothing was served, the whole phase is a gap.
    let mut common = vec![Gap {
        from: None,
        to: None,
    }];
    for log in logs {
        common = intersect(&common, &kept(log));
    }
    let mut summary = ServiceSummary {
        resolution,
        per_second,
        ..ServiceSummary::default()
    };
    let mut gaps: Vec<(Duration, Duration)> = common
        .iter()
        .map(|gap| {
            let from = gap.from.unwrap_or(start).clamp(start, end);
            let to = gap.to.unwrap_or(end).clamp(start, end);
            (
                from.saturating_duration_since(start),
                to.saturating_duration_since(from),
            )
        })
        .filter(|(_, length)| !length.is_zero())
        .collect();
    // Longest first; of equal ones, the earliest.
    gaps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    gaps.truncate(GAPS_REPORTED_MAX);
    if let Some(&(at, length)) = gaps.first() {
        summary.gap_at = at;
        summary.gap_max = length;
    }
    summary.gaps = gaps;
    summary
}

/// The overlaps of two sorted lists of disjoint gaps, sorted.
fn intersect(a: &[Gap], b: &[Gap]) -> Vec<Gap> {
    let mut out = Vec::with_capacity(a.len().min(b.len()) + 1);
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if let Some(both) = a[i].intersect(&b[j]) {
            out.push(both);
        }
        // The one that ends first can overlap nothing further in the other.
        let a_ends_first = match (a[i].to, b[j].to) {
            (Some(x), Some(y)) => x <= y,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if a_ends_first {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A log with successes at these milliseconds after `t0`.
    fn log(t0: Instant, successes_ms: &[u64]) -> ServiceLog {
        let mut log = ServiceLog::new(t0, 4);
        for &at in successes_ms {
            log.success(t0 + ms(at));
        }
        log.finish();
        log
    }

    /// Successes at repeated instants (completions taken together) leave
    /// the log the general path leaves.
    #[test]
    fn a_repeated_instant_counts_as_the_general_path_does() {
        let t0 = Instant::now();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let mut fast = ServiceLog::new(t0, 4);
            let mut general = ServiceLog::new(t0, 4);
            let mut at_ms = 0u64;
            for _ in 0..next(300) {
                // Mostly forward (by 0 to 2.5 s), at times a step back.
                match next(10) {
                    0 => at_ms = at_ms.saturating_sub(next(5)),
                    1..=4 => {}
                    _ => at_ms += next(2_500),
                }
                let at = t0 + Duration::from_micros(at_ms * 100);
                fast.success(at);
                general.success_general(at);
            }
            fast.finish();
            general.finish();
            assert_eq!(fast.gaps, general.gaps);
            assert_eq!(fast.per_second, general.per_second);
            assert_eq!(fast.last_success, general.last_success);
            assert_eq!(fast.resolution, general.resolution);
        }
    }

    #[test]
    fn the_gap_is_where_no_thread_had_a_success() {
        let t0 = Instant::now();
        // Thread a stops at 100 ms and resumes at 900; thread b has a
        // success at 500 (inside a's gap) and then resumes at 1,200.
        let a = log(t0, &[1, 50, 100, 900, 1_000, 1_500]);
        let b = log(t0, &[2, 60, 110, 500, 1_200, 1_500]);
        let summary = merge(&[&a, &b], t0, t0 + ms(1_501));
        // a: 100..900; b: 110..500 and 500..1200 → no success 110..500
        // (390 ms) and 500..900 (400 ms).
        assert_eq!(summary.gap_max, ms(400));
        assert_eq!(summary.gap_at, ms(500));
        assert_eq!(summary.gaps[..2], [(ms(500), ms(400)), (ms(110), ms(390))]);
        assert!(summary.gaps.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(summary.per_second, vec![8, 4]);
        assert_eq!(summary.resolution, ms(1));
    }

    #[test]
    fn open_ends_count_to_the_phase_edges() {
        let t0 = Instant::now();
        // Nothing after 300 ms until the phase ends at 2 s: a trailing gap.
        let trailing = merge(&[&log(t0, &[5, 300])], t0, t0 + ms(2_000));
        assert_eq!(trailing.gap_max, ms(1_700));
        assert_eq!(trailing.gap_at, ms(300));
        // No success at all: the whole phase.
        let none = merge(&[&log(t0, &[])], t0, t0 + ms(700));
        assert_eq!(none.gap_max, ms(700));
        assert_eq!(none.gap_at, Duration::ZERO);
        assert!(none.per_second.is_empty());
        // A success every millisecond: no gap longer than that.
        let steady: Vec<u64> = (0..1_000).collect();
        let busy = merge(&[&log(t0, &steady)], t0, t0 + ms(999));
        assert!(busy.gap_max <= ms(1), "{:?}", busy.gap_max);
    }

    #[test]
    fn a_full_log_coarsens_but_keeps_the_long_gaps() {
        let t0 = Instant::now();
        let mut log = ServiceLog::new(t0, 1);
        // 3,000 gaps of 2 ms each, and one of 50 ms in the middle.
        let mut at = t0;
        for i in 0..3_000u32 {
            at += if i == 1_500 { ms(50) } else { ms(2) };
            log.success(at);
        }
        log.finish();
        assert!(log.gaps.len() <= GAPS_PER_THREAD_MAX);
        assert!(log.resolution > ms(2), "{:?}", log.resolution);
        let summary = merge(&[&log], t0, at);
        assert_eq!(summary.gap_max, ms(50));
        assert!(summary.resolution <= ms(50));
        assert_eq!(summary.per_second.iter().sum::<u64>(), 3_000);
    }
}
