//! A latency histogram in the manner of HdrHistogram: exact below
//! [`SUB_BUCKETS`], then every power of two split into `SUB_BUCKETS / 2`
//! equal sub-buckets, so a recorded value is known within 1/64 (1.6 %) of
//! itself at any magnitude. Fixed size (no allocation while recording),
//! merged by adding counts.
//!
//! Written here rather than taken from the `hdrhistogram` crate: the
//! benchmark needs only record, merge and quantiles, in about a hundred
//! lines, and the crate's last release is from 2023 and would pull a new
//! dependency into a workspace that builds offline.

/// Values below this are counted exactly; above, each power of two has
/// half this many sub-buckets.
pub const SUB_BUCKETS: u64 = 128;
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
const HALF: u64 = SUB_BUCKETS / 2;
/// Buckets needed for every `u64`.
const BUCKETS: usize = (SUB_BUCKETS + (64 - SUB_BITS as u64) * HALF) as usize;

/// Counts of values (nanoseconds, for the benchmark's latencies).
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let shift = msb + 1 - SUB_BITS;
    let sub = value >> shift;
    debug_assert!((HALF..SUB_BUCKETS).contains(&sub));
    (SUB_BUCKETS + u64::from(shift - 1) * HALF + (sub - HALF)) as usize
}

/// The highest value that falls in `bucket`.
fn bucket_high(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < SUB_BUCKETS {
        return bucket;
    }
    let shift = (bucket - SUB_BUCKETS) / HALF + 1;
    let sub = (bucket - SUB_BUCKETS) % HALF + HALF;
    // (sub + 1) << shift overflows only for the very last bucket.
    ((sub + 1) << shift).wrapping_sub(1).max(sub << shift)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    pub fn record(&mut self, value: u64) {
        self.counts[bucket_of(value)] += 1;
        self.total += 1;
        self.sum += u128::from(value);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.sum as f64 / self.total as f64
    }

    /// The value at or below which a `quantile` (0 to 1) of the values
    /// lie: the highest value of the bucket it falls in, never above the
    /// largest value recorded. 0 when empty.
    pub fn quantile(&self, quantile: f64) -> u64 {
        assert!((0.0..=1.0).contains(&quantile), "quantile {quantile}");
        if self.total == 0 {
            return 0;
        }
        let rank = ((quantile * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_high(bucket).clamp(self.min, self.max);
            }
        }
        unreachable!("the counts add up to the total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_within_precision() {
        let mut last = 0;
        for (i, value) in (0..10_000u64)
            .chain((0..64).map(|s| 1u64 << s))
            .chain([u64::MAX])
            .enumerate()
        {
            let bucket = bucket_of(value);
            assert!(bucket < BUCKETS, "{value}");
            let high = bucket_high(bucket);
            assert!(high >= value, "{value} in bucket {bucket} up to {high}");
            // The bucket is at most 1/64 of its values wide.
            assert!(
                (high - value) as f64 <= value as f64 / HALF as f64,
                "{value}: {high}"
            );
            if i < 10_000 {
                assert!(bucket >= last, "{value}");
                last = bucket;
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_uniform_run() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.02, "{p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 - 99_000.0).abs() / 99_000.0 < 0.02, "{p99}");
        assert_eq!(h.quantile(1.0), 100_000);
        assert_eq!(h.max(), 100_000);
        assert!((h.mean() - 50_000.5).abs() < 1e-6);
        let mut other = Histogram::new();
        other.record(7);
        h.merge(&other);
        assert_eq!(h.count(), 100_001);
        assert_eq!(h.quantile(0.0), 1);
        // The 7 sits in its own exact bucket below the rest.
        assert_eq!(h.quantile(1.0 / 100_001.0), 1);
        assert_eq!(h.quantile(2.0 / 100_001.0), 2);
        assert_eq!(Histogram::new().quantile(0.5), 0);
    }
}
