//! Percentiles of latency samples.

/// The `p`-quantile (0 < p <= 1) of `samples` by the nearest-rank method:
/// the smallest sample with at least a fraction `p` of the samples at or
/// below it. `None` for no samples.
///
/// With few samples a high quantile is the maximum (P99.9 of 400 samples
/// is the largest), which is what nearest-rank promises: never a value
/// that was not observed.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some(percentile_sorted(&sorted, p))
}

/// [`percentile`] of samples already sorted ascending, at least one.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    // Rank ceil(p * n), 1-based, clamped to [1, n]. The small epsilon keeps
    // p * n that is an integer in exact arithmetic (0.99 * 100) from
    // rounding up to the next rank.
    let rank = ((p * n as f64) - 1e-9).ceil().clamp(1.0, n as f64) as usize;
    sorted[rank - 1]
}

/// P50, P99 and P99.9 of `samples` (0 for no samples).
pub fn tail(samples: &[f64]) -> (f64, f64, f64) {
    let q = |p| percentile(samples, p).unwrap_or(0.0);
    (q(0.50), q(0.99), q(0.999))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.50), Some(50.0));
        assert_eq!(percentile(&hundred, 0.99), Some(99.0));
        assert_eq!(percentile(&hundred, 0.999), Some(100.0));
        assert_eq!(percentile(&hundred, 1.0), Some(100.0));
        assert_eq!(percentile(&hundred, 0.001), Some(1.0));
        let thousand: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&thousand, 0.999), Some(999.0));
        assert_eq!(percentile(&[3.5], 0.99), Some(3.5));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[f64::NAN, 2.0], 0.5), Some(2.0));
        assert_eq!(tail(&[]), (0.0, 0.0, 0.0));
        assert_eq!(tail(&[1.0, 2.0, 3.0, 4.0]), (2.0, 4.0, 4.0));
    }
}
