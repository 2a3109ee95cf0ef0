//! The simulated node's contention model, replayed offline: the prediction
//! the no-daemon run is judged against (`Documentation/simulated-node.rst`,
//! "Workloads").
//!
//! The node runs one dispatch at a time, first come first served across
//! queues. The LC tenant's requests arrive at the times its seeded Poisson
//! process draws (the very sequence `kfdp-scenario lc` draws with the same
//! seed and rate), each a chain of dispatches published together. The BE
//! tenant keeps one dispatch outstanding and publishes the next `lag_ms`
//! after the previous one retires (its polling interval).

use crate::{results::LcResult, rng::Rng, stats::percentile};

/// The arrival times of `kfdp-scenario lc`, ms from the window's start:
/// exponential gaps at `rate` per second, within `duration_s`.
pub fn arrivals_ms(seed: u64, rate: f64, duration_s: f64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    // As lc.rs: whole nanoseconds per gap, summed.
    let mut gap_ns = || (rng.exponential(rate) * 1e9) as u64;
    let end_ns = (duration_s * 1e9) as u64;
    let mut out = Vec::new();
    let mut t = gap_ns();
    while t < end_ns {
        out.push(t as f64 / 1e6);
        t += gap_ns();
    }
    out
}

/// A saturating BE tenant beside the LC one.
#[derive(Debug, Clone, Copy)]
pub struct Be {
    /// Node time of one dispatch, ms.
    pub work_ms: f64,
    /// Time from a retirement to the next publication, ms.
    pub lag_ms: f64,
}

/// The LC latencies (ms, in arrival order) the model gives for the LC run
/// `lc` describes, alone (`be` None) or beside `be`.
pub fn lc_latencies_ms(lc: &LcResult, be: Option<Be>) -> Vec<f64> {
    let arrivals = arrivals_ms(lc.seed, lc.rate, lc.duration_s);
    let chain = lc.chain.max(1) as usize;
    let mut out = Vec::with_capacity(arrivals.len());
    // The node is free from `t`; BE's next dispatch is published at `be_at`.
    let (mut t, mut be_at) = (0.0f64, 0.0f64);
    let mut next = 0; // the next LC request
    let mut done_in_chain = 0;
    while next < arrivals.len() {
        let lc_at = arrivals[next];
        let first = be.map_or(lc_at, |_| lc_at.min(be_at));
        t = t.max(first);
        // First come, first served; a tie goes to the LC packet.
        if lc_at <= t && (be.is_none() || lc_at <= be_at) {
            t += lc.work_ms;
            done_in_chain += 1;
            if done_in_chain == chain {
                out.push(t - lc_at);
                done_in_chain = 0;
                next += 1;
            }
        } else if let Some(b) = be {
            t += b.work_ms;
            be_at = t + b.lag_ms;
        }
    }
    out
}

/// P99 of the model's LC latencies, ms (NaN if there are none).
pub fn predicted_p99_ms(lc: &LcResult, be: Option<Be>) -> f64 {
    percentile(&lc_latencies_ms(lc, be), 0.99).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(rate: f64, chain: u32, work_ms: f64, duration_s: f64) -> LcResult {
        LcResult {
            role: "lc".into(),
            requests: 0,
            latencies_ms: vec![],
            submit_delay_ms: vec![],
            doorbell_ms: vec![],
            node_wait_ms: vec![],
            p50_ms: 0.0,
            p99_ms: 0.0,
            p999_ms: 0.0,
            work_ms_per_request: f64::from(chain) * work_ms,
            duration_s,
            rate,
            chain,
            gap_ms: 0.0,
            work_ms,
            seed: 7,
            incomplete: 0,
            late_submits: 0,
            node: 0,
            queue_id: 0,
            gpu_id: 0,
            prep_ms: 0.0,
            hints_ns: vec![],
            hints_refused: 0,
            hint_within_ms: 0.0,
        }
    }

    #[test]
    fn arrivals_have_the_rate_asked_for() {
        let a = arrivals_ms(1, 20.0, 100.0);
        assert!((1800..2200).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(*a.last().unwrap() < 100_000.0);
    }

    #[test]
    fn alone_a_sparse_request_takes_its_chain() {
        // One request per 10 s on average: queueing is rare.
        let l = lc_latencies_ms(&lc(0.1, 3, 5.0, 100.0), None);
        assert!(!l.is_empty());
        assert!(l.iter().filter(|&&x| (x - 15.0).abs() < 1e-9).count() >= l.len() - 1);
    }

    #[test]
    fn beside_be_a_request_waits_for_the_running_dispatch() {
        let r = lc(1.0, 1, 1.0, 200.0);
        let be = Be {
            work_ms: 250.0,
            lag_ms: 1.0,
        };
        let l = lc_latencies_ms(&r, Some(be));
        // Never less than its own work, never more than a BE dispatch,
        // the LC backlog aside; on average about half a BE dispatch.
        assert!(l.iter().all(|&x| x >= 1.0 - 1e-9));
        let mean = l.iter().sum::<f64>() / l.len() as f64;
        assert!((90.0..160.0).contains(&mean), "{mean}");
        let p99 = predicted_p99_ms(&r, Some(be));
        assert!((230.0..260.0).contains(&p99), "{p99}");
        // Alone it is just the work.
        assert!((predicted_p99_ms(&r, None) - 1.0).abs() < 1e-9);
    }
}
