//! Statistics: HDR latency histograms, completions per time bucket, medians of runs, CPU
//! time per operation, and the recovery time after a fault.

use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Width of one throughput bucket (the kill-primary timeline).
pub const BUCKET: Duration = Duration::from_millis(100);
/// Largest latency recorded exactly (longer ones saturate): one minute, in µs.
const LATENCY_US_MAX: u64 = 60_000_000;

/// What one run measured.
pub struct Recorder {
    start: Instant,
    /// Latencies (µs) of the measured operations.
    pub latency_us: Histogram<u64>,
    /// Completions per [`BUCKET`] since `start`, measured or not (the timeline).
    pub buckets: Vec<u64>,
    /// Measured operations.
    pub ops: u64,
    /// Wall time of the measured part (timed runs: the window; counted runs: the whole run).
    pub wall: Duration,
}

impl Recorder {
    pub fn new(start: Instant) -> anyhow::Result<Recorder> {
        Ok(Recorder {
            start,
            latency_us: Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)?,
            buckets: Vec::new(),
            ops: 0,
            wall: Duration::ZERO,
        })
    }

    pub fn completed(&mut self, at: Instant, latency: Duration, measured: bool) {
        let b = ((at - self.start).as_micros() / BUCKET.as_micros()) as usize;
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        if measured {
            let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            self.latency_us
                .saturating_record(us.clamp(1, LATENCY_US_MAX));
            self.ops += 1;
        }
    }

    pub fn finish(&mut self, end: Instant, window: Option<(Instant, Instant)>) {
        self.wall = match window {
            Some((from, until)) => until.saturating_duration_since(from),
            None => end - self.start,
        };
    }

    pub fn throughput(&self) -> f64 {
        if self.wall.is_zero() {
            0.0
        } else {
            self.ops as f64 / self.wall.as_secs_f64()
        }
    }

    /// Latency quantile in µs.
    pub fn latency_us(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64
    }
}

/// One measured point (one run, or the median of several).
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    pub throughput_ops_s: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub latency_us_mean: f64,
    /// CPU time of all server processes per measured operation.
    pub server_cpu_us_per_op: f64,
    /// CPU time of the benchmark process (the clients) per measured operation.
    pub client_cpu_us_per_op: f64,
    pub ops: u64,
}

impl Point {
    pub fn of(rec: &Recorder, server_cpu: Duration, client_cpu: Duration) -> Point {
        let per_op = |d: Duration| {
            if rec.ops == 0 {
                0.0
            } else {
                d.as_secs_f64() * 1e6 / rec.ops as f64
            }
        };
        Point {
            throughput_ops_s: rec.throughput(),
            latency_us_p50: rec.latency_us(0.5),
            latency_us_p99: rec.latency_us(0.99),
            latency_us_mean: rec.latency_us.mean(),
            server_cpu_us_per_op: per_op(server_cpu),
            client_cpu_us_per_op: per_op(client_cpu),
            ops: rec.ops,
        }
    }
}

/// The median of `runs` field by field, and the largest relative deviation of the median
/// latency from its median (the seed reports "maximum deviation from the median").
pub fn median(runs: &[Point]) -> (Point, f64) {
    fn med(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }
    let field = |f: fn(&Point) -> f64| med(runs.iter().map(f).collect());
    let p = Point {
        throughput_ops_s: field(|p| p.throughput_ops_s),
        latency_us_p50: field(|p| p.latency_us_p50),
        latency_us_p99: field(|p| p.latency_us_p99),
        latency_us_mean: field(|p| p.latency_us_mean),
        server_cpu_us_per_op: field(|p| p.server_cpu_us_per_op),
        client_cpu_us_per_op: field(|p| p.client_cpu_us_per_op),
        ops: runs.iter().map(|p| p.ops).sum(),
    };
    let spread = runs
        .iter()
        .map(|r| (r.latency_us_p50 - p.latency_us_p50).abs() / p.latency_us_p50.max(1.0))
        .fold(0.0, f64::max);
    (p, spread)
}

/// Recovery after a fault at `fault` (offset from the run's start): the baseline is the
/// mean throughput of the buckets in `[fault - before, fault)`; throughput has recovered at
/// the start of the first window of `window` buckets after the fault whose mean reaches
/// `fraction` of the baseline. Returns `(baseline ops/s, recovery time)`; `None` if it
/// never recovered within the run.
pub fn recovery(
    buckets: &[u64],
    fault: Duration,
    before: Duration,
    window: usize,
    fraction: f64,
) -> (f64, Option<Duration>) {
    let per_s = 1.0 / BUCKET.as_secs_f64();
    let fault_b = (fault.as_micros() / BUCKET.as_micros()) as usize;
    let from_b = fault_b.saturating_sub((before.as_micros() / BUCKET.as_micros()) as usize);
    let pre = buckets
        .get(from_b..fault_b.min(buckets.len()))
        .unwrap_or(&[]);
    if pre.is_empty() {
        return (0.0, None);
    }
    let baseline = pre.iter().sum::<u64>() as f64 / pre.len() as f64 * per_s;
    let window = window.max(1);
    // Start after the fault's own bucket (it mixes before and after).
    for b in fault_b + 1..buckets.len().saturating_sub(window - 1) {
        let mean = buckets[b..b + window].iter().sum::<u64>() as f64 / window as f64 * per_s;
        if mean >= fraction * baseline {
            let at = BUCKET * b as u32;
            return (baseline, Some(at.saturating_sub(fault)));
        }
    }
    (baseline, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_finds_the_first_full_window() {
        // 10 buckets at 10, fault at 1.0 s, 0 for 3 buckets, then 5, then 10s.
        let mut b = vec![10u64; 10];
        b.extend([0, 0, 0, 5, 10, 10, 10, 10, 10]);
        let (base, rec) = recovery(&b, Duration::from_secs(1), Duration::from_secs(1), 3, 0.8);
        assert_eq!(base, 100.0);
        // The window starting at 1.3 s (5, 10, 10: 83 ops/s) is the first at 80 %.
        assert_eq!(rec, Some(Duration::from_millis(300)));
        let (_, never) = recovery(
            &b[..13],
            Duration::from_secs(1),
            Duration::from_secs(1),
            3,
            0.8,
        );
        assert_eq!(never, None);
    }

    #[test]
    fn median_of_three() {
        let p = |l| Point {
            latency_us_p50: l,
            ..Point::default()
        };
        let (m, spread) = median(&[p(100.0), p(300.0), p(110.0)]);
        assert_eq!(m.latency_us_p50, 110.0);
        assert!((spread - 190.0 / 110.0).abs() < 1e-9);
    }
}
