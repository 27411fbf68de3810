//! How long an execution thread spins before it sleeps (NDB's
//! `SpinMethod`, see [`SpinMethod`]).
//!
//! A sleeping thread is slow to wake: on the virtual machines Skarv was
//! measured on, a signal or a frame for a sleeping thread costs 30-50 µs
//! more than one for a thread that is awake, per hop (a 2-replica update
//! crosses six: its p50 fell from 230 to 38 µs with the data nodes
//! spinning). Spinning trades CPU time for that latency. The trade pays
//! only when work comes back soon after the thread ran out of it, which
//! depends on the load, so an adaptive method measures it: the length of
//! every idle period (from running out of work to the next signal, whether
//! the thread spun through it or slept) goes into a histogram, and every
//! [`DECIDE_EVERY_GAPS`] periods the thread picks the longest spin, up to
//! its bound, whose CPU cost (the idle periods it would spin through, each
//! for its length or the whole spin) is at most `1.3 + overhead / 100`
//! times the wake-ups it saves (the periods shorter than the spin, each
//! [`WAKE_UP_COST_US`]); older periods weigh half at each decision. An
//! adaptive thread starts without spinning, as NDB's does.
//!
//! An idle period measured while asleep includes the wake-up itself, so
//! it reads long: [`WAKE_UP_COST_US`] is taken off it. And threads that
//! wait on each other (a TC and the LDM of another node, a client and its
//! TC) each see short idle periods when the others spin and long ones when
//! they sleep: both "all spin" and "none spins" hold once reached. So a
//! thread that chose no spin [`PROBE_AFTER_DECISIONS`] times in a row spins
//! its bound for the next [`DECIDE_EVERY_GAPS`] periods, a probe of what
//! the periods are like then (on an idle node, 64 timer periods' spin every
//! few seconds).
//!
//! Spinning pays only for a CPU that would otherwise idle. Where every CPU
//! has runnable threads (a small machine shared with the clients, under
//! load), a spinning thread's yields hand its CPU to them and take it back:
//! it costs them CPU time and context switches and saves no wake-up that
//! matters (on 2 CPUs, `oltp_point_select` at 32 threads ran 18 % faster
//! with the data node not spinning). So a yield that kept the thread off
//! its CPU for [`YIELD_CONTENDED_US`] or more marks its idle period as
//! *contended*; when at least one in [`CONTENDED_SHARE_DIVISOR`] of a
//! decision's periods is, the thread stops spinning, and only its probes
//! (which spin) look again whether the CPUs are still contended. An
//! execution thread bound to a CPU of its own (`cpubind`) owns it, as in
//! NDB, and does not watch. A client's poll owner counts a contended period
//! only when its spin still missed the reply: on a 2 × 2 sandbox with bound
//! data nodes, a client's yields went to the data node thread doing its own
//! request, and the spin then caught the reply (counting those periods
//! raised its read p50 from 24-49 µs to 61-130 µs).

use std::time::Duration;

use crate::thread_config::{SpinMethod, ThreadSpec, SPINTIME_MAX_US};

/// The latency one avoided wake-up saves, in microseconds: what the
/// adaptive methods weigh the CPU time of spinning against. Measured as
/// the difference between a sleeping and a spinning peer on this project's
/// 2-CPU virtual machines (30-50 µs); bare metal wakes faster, and there an
/// adaptive thread spins somewhat more than it should (within its bound).
pub const WAKE_UP_COST_US: u64 = 40;

/// Decisions without a spin in a row after which an adaptive thread probes
/// (spins its bound for one decision's periods).
pub const PROBE_AFTER_DECISIONS: u32 = 8;

/// Idle periods between two decisions of an adaptive thread.
pub const DECIDE_EVERY_GAPS: u32 = 64;

/// A yield that kept the thread off its CPU this long gave the CPU to
/// another runnable thread (one that returns at once takes about 1 µs).
pub const YIELD_CONTENDED_US: u64 = 20;

/// A decision whose idle periods were contended in at least one in this
/// many stops spinning until a probe finds the CPUs free again.
pub const CONTENDED_SHARE_DIVISOR: u32 = 4;

/// Yields the CPU; true when that gave it to another thread for at least
/// [`YIELD_CONTENDED_US`] (the caller's idle period was contended).
pub fn yield_contended() -> bool {
    let before = std::time::Instant::now();
    std::thread::yield_now();
    before.elapsed() >= Duration::from_micros(YIELD_CONTENDED_US)
}

/// Upper ends of the histogram's buckets of idle periods, in microseconds;
/// a last bucket holds the longer ones. The spins an adaptive thread picks
/// from are these ends up to its bound, and the bound.
const BUCKET_ENDS_US: [u32; 8] = [5, 10, 20, 40, 80, 160, 320, SPINTIME_MAX_US];

#[derive(Copy, Clone, Debug, Default)]
struct Bucket {
    /// Idle periods in the bucket (halved at each decision).
    count: u64,
    /// Their total length, in microseconds.
    sum_us: u64,
}

/// One thread's spin: fixed, or adapted to the idle periods it measures.
/// The runtime's execution threads keep one each; so does a client's poll
/// owner (`skarv-client`'s receiver), for the wait for its replies.
#[derive(Debug)]
pub struct SpinPolicy {
    method: SpinMethod,
    /// The longest spin, in microseconds.
    bound_us: u32,
    /// The spin in force, in microseconds.
    limit_us: u32,
    buckets: [Bucket; BUCKET_ENDS_US.len() + 1],
    /// Idle periods since the last decision.
    gaps: u32,
    /// Decisions in a row that chose no spin (a probe resets it).
    still: u32,
    /// Idle periods since the last decision that were contended.
    contended: u32,
    /// The last decision that could tell found the CPUs contended: no spin
    /// until a probe finds them free.
    crowded: bool,
    /// Contended periods count (see the module doc): not for an execution
    /// thread bound to a CPU of its own.
    watches_contention: bool,
}

impl SpinPolicy {
    /// An execution thread's, as its layout entry says. A thread bound to
    /// a CPU of its own (`cpubind`) spins as its method says whatever else
    /// runs; one that shares CPUs watches contention.
    pub(super) fn of_thread(spec: &ThreadSpec) -> SpinPolicy {
        let mut policy = SpinPolicy::new(spec.spin_method, spec.spintime_us);
        policy.watches_contention = spec.cpubind.is_none();
        policy
    }

    /// `method` bounded by `bound_us` (at most [`SPINTIME_MAX_US`]): a
    /// static method spins `bound_us`, an adaptive one starts at 0.
    pub fn new(method: SpinMethod, bound_us: u32) -> SpinPolicy {
        let bound_us = bound_us.min(SPINTIME_MAX_US);
        SpinPolicy {
            method,
            bound_us,
            limit_us: if method.is_adaptive() { 0 } else { bound_us },
            buckets: [Bucket::default(); BUCKET_ENDS_US.len() + 1],
            gaps: 0,
            still: 0,
            contended: 0,
            crowded: false,
            watches_contention: true,
        }
    }

    /// How long to spin now before sleeping.
    pub fn limit(&self) -> Duration {
        Duration::from_micros(u64::from(self.limit_us))
    }

    /// Whether idle periods are measured (an adaptive method that may spin).
    pub fn measures(&self) -> bool {
        self.method.is_adaptive() && self.bound_us > 0
    }

    /// One idle period of `gap` ended (work came), after a sleep or not,
    /// and `contended` if a yield of its spin gave the CPU away (see
    /// [`yield_contended`]); every [`DECIDE_EVERY_GAPS`] of them, the spin
    /// is chosen again.
    pub fn record(&mut self, gap: Duration, slept: bool, contended: bool) {
        if !self.measures() {
            return;
        }
        self.contended += u32::from(contended && self.watches_contention);
        let mut gap_us = u64::try_from(gap.as_micros()).unwrap_or(u64::MAX);
        if slept {
            // What spinning would have seen: the period without the wake-up.
            gap_us = gap_us.saturating_sub(WAKE_UP_COST_US);
        }
        let bucket = BUCKET_ENDS_US
            .iter()
            .position(|&end| gap_us <= u64::from(end))
            .unwrap_or(BUCKET_ENDS_US.len());
        let b = &mut self.buckets[bucket];
        b.count += 1;
        b.sum_us = b.sum_us.saturating_add(gap_us);
        self.gaps += 1;
        if self.gaps >= DECIDE_EVERY_GAPS {
            self.decide();
        }
    }

    /// Picks the longest spin that pays (see the module documentation),
    /// then halves what was measured.
    fn decide(&mut self) {
        debug_assert!(self.contended <= self.gaps, "a period is contended once");
        // Only a decision that spun can see contention: one that did not
        // keeps what the last that could tell found, until a probe.
        if self.contended.saturating_mul(CONTENDED_SHARE_DIVISOR) >= self.gaps {
            self.crowded = true;
        } else if self.limit_us > 0 {
            self.crowded = false;
        }
        self.contended = 0;
        let best = if self.crowded {
            0
        } else {
            self.longest_paying_spin()
        };
        debug_assert!(best <= self.bound_us, "a spin within its bound");
        self.still = if best == 0 { self.still + 1 } else { 0 };
        self.limit_us = best;
        if self.still >= PROBE_AFTER_DECISIONS {
            self.still = 0;
            self.limit_us = self.bound_us;
        }
        for b in &mut self.buckets {
            b.count /= 2;
            b.sum_us /= 2;
        }
        self.gaps = 0;
    }

    /// The longest spin, up to the bound, whose cost the saved wake-ups pay
    /// for; 0 if none does.
    fn longest_paying_spin(&self) -> u32 {
        let candidates = BUCKET_ENDS_US
            .iter()
            .copied()
            .filter(|&end| end < self.bound_us)
            .chain(std::iter::once(self.bound_us));
        let allowed = 130 + u64::from(self.method.overhead_percent());
        let mut best = 0;
        for spin_us in candidates {
            // Periods wholly inside the spin (caught: no wake-up) cost their
            // length; every other one costs the whole spin.
            let (mut caught, mut cost_us) = (0u64, 0u64);
            for (i, b) in self.buckets.iter().enumerate() {
                let inside = BUCKET_ENDS_US.get(i).is_some_and(|&end| end <= spin_us);
                if inside {
                    caught += b.count;
                    cost_us = cost_us.saturating_add(b.sum_us);
                } else {
                    cost_us = cost_us.saturating_add(b.count * u64::from(spin_us));
                }
            }
            let saved_us = caught * WAKE_UP_COST_US;
            if caught > 0 && cost_us.saturating_mul(100) <= allowed.saturating_mul(saved_us) {
                best = spin_us;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_config::ThreadRole;

    fn policy(method: SpinMethod, bound_us: u32) -> SpinPolicy {
        policy_on(method, bound_us, None)
    }

    fn policy_on(method: SpinMethod, bound_us: u32, cpubind: Option<usize>) -> SpinPolicy {
        SpinPolicy::of_thread(&ThreadSpec {
            name: "main".into(),
            role: ThreadRole::Main,
            index: 0,
            hosts: vec![ThreadRole::Main],
            cpubind,
            cpuset: None,
            realtime: false,
            batch: false,
            spintime_us: bound_us,
            spintime_given: true,
            spin_method: method,
        })
    }

    fn feed(p: &mut SpinPolicy, gaps_us: &[u64], rounds: usize) {
        for _ in 0..rounds {
            for &g in gaps_us {
                p.record(Duration::from_micros(g), false, false);
            }
        }
    }

    #[test]
    fn static_spins_its_spintime_and_measures_nothing() {
        let mut p = policy(SpinMethod::Static, 100);
        assert_eq!(p.limit(), Duration::from_micros(100));
        assert!(!p.measures());
        feed(&mut p, &[10_000], 200);
        assert_eq!(p.limit(), Duration::from_micros(100));
    }

    #[test]
    fn adaptive_starts_still_and_spins_its_bound_when_work_comes_back_soon() {
        let mut p = policy(SpinMethod::CostBased, 100);
        assert_eq!(p.limit(), Duration::ZERO);
        feed(&mut p, &[2, 3, 8], 64);
        assert_eq!(p.limit(), Duration::from_micros(100));
    }

    #[test]
    fn adaptive_stops_spinning_when_idle_periods_are_long_and_probes_now_and_then() {
        let mut p = policy(SpinMethod::CostBased, 100);
        feed(&mut p, &[3], 128);
        assert_eq!(p.limit(), Duration::from_micros(100));
        // An idle cluster: timers every few milliseconds. The old short
        // periods fade by half at each decision.
        let mut limits = Vec::new();
        for _ in 0..24 {
            feed(&mut p, &[5_000], 64);
            limits.push(p.limit().as_micros());
        }
        let first_still = limits
            .iter()
            .position(|&l| l == 0)
            .expect("it stops spinning");
        assert!(first_still <= 8, "{limits:?}");
        // Then no spin, but a probe of its bound as the 8th still decision
        // would be, one decision long.
        let after = &limits[first_still..];
        let probes: Vec<usize> = (0..after.len()).filter(|&i| after[i] == 100).collect();
        assert!(!probes.is_empty(), "{limits:?}");
        assert!(
            after.iter().all(|&l| l == 0 || l == 100),
            "only no spin or a probe: {limits:?}"
        );
        assert!(
            probes.windows(2).all(|w| w[1] - w[0] == 8),
            "a probe every 8th decision: {limits:?}"
        );
    }

    #[test]
    fn a_probe_that_finds_short_periods_keeps_spinning() {
        let mut p = policy(SpinMethod::CostBased, 100);
        for _ in 0..8 {
            feed(&mut p, &[5_000], 64);
        }
        assert_eq!(p.limit(), Duration::from_micros(100), "the probe");
        // While it spins, its peers answer at once.
        feed(&mut p, &[4], 64 * 3);
        assert_eq!(p.limit(), Duration::from_micros(100));
    }

    #[test]
    fn a_period_measured_asleep_counts_without_the_wake_up() {
        // 60 µs asleep is 20 µs of waiting: spun for, it costs 20 µs for
        // 40 saved.
        let mut asleep = policy(SpinMethod::CostBased, 100);
        for _ in 0..64 {
            asleep.record(Duration::from_micros(60), true, false);
        }
        assert_eq!(asleep.limit(), Duration::from_micros(100));
        // 160 µs awake is not worth a 40 µs wake-up.
        let mut awake = policy(SpinMethod::CostBased, 100);
        for _ in 0..64 {
            awake.record(Duration::from_micros(160), false, false);
        }
        assert_eq!(awake.limit(), Duration::ZERO);
    }

    #[test]
    fn the_overhead_decides_how_far_a_mixed_load_is_spun() {
        // Half the periods end within 3 µs, half last 10 ms. Spinning 40 µs
        // costs 21.5 µs a period for 15 µs saved (allowed by 2 units of CPU
        // per unit of latency); 80 µs costs 41.5 (not allowed).
        let mut cost_based = policy(SpinMethod::CostBased, 100);
        feed(&mut cost_based, &[3, 10_000], 64);
        assert_eq!(cost_based.limit(), Duration::from_micros(40));
        // 11.3 units allowed: the whole bound.
        let mut latency = policy(SpinMethod::LatencyOptimised, 100);
        feed(&mut latency, &[3, 10_000], 64);
        assert_eq!(latency.limit(), Duration::from_micros(100));
    }

    /// `rounds` decisions' worth of periods of `gap_us`, one in `every`
    /// of them contended (0: none).
    fn feed_contended(p: &mut SpinPolicy, gap_us: u64, every: u32, rounds: usize) {
        for _ in 0..rounds {
            for i in 0..DECIDE_EVERY_GAPS {
                let contended = every > 0 && i % every == 0;
                p.record(Duration::from_micros(gap_us), false, contended);
            }
        }
    }

    #[test]
    fn contended_cpus_stop_the_spin_until_a_probe_finds_them_free() {
        let mut p = policy(SpinMethod::CostBased, 100);
        feed_contended(&mut p, 3, 0, 1);
        assert_eq!(
            p.limit(),
            Duration::from_micros(100),
            "short periods: spins"
        );
        // One period in four found the CPU taken: short periods or not,
        // spinning only takes CPU time from runnable threads.
        feed_contended(&mut p, 3, CONTENDED_SHARE_DIVISOR, 1);
        assert_eq!(p.limit(), Duration::ZERO);
        // Not spinning, it cannot see whether the CPUs are still taken: it
        // stays still, whatever the periods, until its probe.
        // The contended decision was the first still one.
        let mut limits = Vec::new();
        for _ in 1..PROBE_AFTER_DECISIONS {
            feed_contended(&mut p, 3, 0, 1);
            limits.push(p.limit().as_micros());
        }
        let probe = PROBE_AFTER_DECISIONS as usize - 2;
        assert!(limits[..probe].iter().all(|&l| l == 0), "{limits:?}");
        assert_eq!(limits[probe], 100, "the probe spins: {limits:?}");
        // A probe that finds them taken again stops again...
        feed_contended(&mut p, 3, 2, 1);
        assert_eq!(p.limit(), Duration::ZERO);
        for _ in 1..PROBE_AFTER_DECISIONS {
            feed_contended(&mut p, 3, 0, 1);
        }
        assert_eq!(p.limit(), Duration::from_micros(100), "the next probe");
        // ...and one that finds them free keeps spinning.
        feed_contended(&mut p, 3, 0, 3);
        assert_eq!(p.limit(), Duration::from_micros(100));
    }

    #[test]
    fn a_thread_bound_to_its_own_cpu_spins_whatever_else_runs() {
        let mut bound = policy_on(SpinMethod::CostBased, 100, Some(1));
        feed_contended(&mut bound, 3, 1, 4);
        assert_eq!(bound.limit(), Duration::from_micros(100));
        let mut client = SpinPolicy::new(SpinMethod::CostBased, 100);
        feed_contended(&mut client, 3, 1, 4);
        assert_eq!(client.limit(), Duration::ZERO, "a client watches");
    }

    #[test]
    fn a_contended_period_now_and_then_does_not_stop_the_spin() {
        let mut p = policy(SpinMethod::CostBased, 100);
        // One in eight: a timer, a kernel thread, below the share.
        feed_contended(&mut p, 3, 2 * CONTENDED_SHARE_DIVISOR, 4);
        assert_eq!(p.limit(), Duration::from_micros(100));
    }

    #[test]
    fn a_bound_of_zero_turns_adaptive_spinning_off() {
        let mut p = policy(SpinMethod::DatabaseMachine, 0);
        assert!(!p.measures());
        feed(&mut p, &[1], 200);
        assert_eq!(p.limit(), Duration::ZERO);
    }
}
