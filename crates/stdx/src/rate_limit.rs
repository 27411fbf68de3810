//! A bound on how often something is logged: a flood of bad input (a fuzzer,
//! a port scan) must not turn into a flood of log lines (one fuzz run wrote
//! 29 MB of WARN lines, one per refused frame). The `tracing` crates offer
//! no such filter, and this one needs no dependency.

use std::time::{Duration, Instant};

/// Lets `per_window` events through per `window`; counts the rest, and the
/// next event let through reports how many were suppressed before it.
#[derive(Debug)]
pub struct RateLimit {
    per_window: u32,
    window: Duration,
    window_start: Option<Instant>,
    admitted: u32,
    suppressed: u64,
}

impl RateLimit {
    pub const fn new(per_window: u32, window: Duration) -> RateLimit {
        assert!(per_window > 0);
        RateLimit {
            per_window,
            window,
            window_start: None,
            admitted: 0,
            suppressed: 0,
        }
    }

    /// One event at `now`: `Some(suppressed)` when it may be logged, with
    /// the count of events suppressed since the last one logged; `None`
    /// when it is to be suppressed.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        let fresh = self
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if fresh {
            self.window_start = Some(now);
            self.admitted = 0;
        }
        if self.admitted >= self.per_window {
            self.suppressed += 1;
            return None;
        }
        self.admitted += 1;
        assert!(self.admitted <= self.per_window);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_limit_and_the_next_window_reports_the_rest() {
        let mut limit = RateLimit::new(3, Duration::from_secs(1));
        let start = Instant::now();
        let logged: Vec<Option<u64>> = (0..100)
            .map(|i| limit.admit(start + Duration::from_millis(i)))
            .collect();
        assert_eq!(&logged[..3], &[Some(0), Some(0), Some(0)]);
        assert!(logged[3..].iter().all(Option::is_none), "{logged:?}");
        assert_eq!(limit.admit(start + Duration::from_secs(1)), Some(97));
        assert_eq!(limit.admit(start + Duration::from_secs(1)), Some(0));
    }
}
