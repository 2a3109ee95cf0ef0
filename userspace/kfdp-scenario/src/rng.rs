//! A seeded generator for the arrival process: xorshift64* seeded through
//! splitmix64, and exponential inter-arrival times by inversion. Small and
//! reproducible across platforms and crate versions, which is all a load
//! generator needs.

/// xorshift64* (Vigna), never in the all-zero state.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed` (any value, 0 too).
    pub fn new(seed: u64) -> Self {
        // splitmix64 spreads nearby seeds apart and never yields 0 twice in
        // a row; 0 itself is replaced, as xorshift would stay at 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng {
            state: if z == 0 { 0x2545_F491_4F6C_DD1D } else { z },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform on [0, 1), 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with rate `rate` (mean `1 / rate`), by inversion.
    pub fn exponential(&mut self, rate: f64) -> f64 {
        // 1 - u is in (0, 1]: the logarithm is finite.
        -(1.0 - self.uniform()).ln() / rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_sequences_repeat_and_differ_by_seed() {
        let a: Vec<u64> = (0..5)
            .scan(Rng::new(1), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Rng::new(1), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..5)
            .scan(Rng::new(2), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(Rng::new(0).next_u64(), 0);
    }

    #[test]
    fn exponential_has_the_right_mean_and_spread() {
        let mut r = Rng::new(7);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.exponential(20.0)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.05).abs() < 0.001, "mean {mean}");
        assert!(xs.iter().all(|x| x.is_finite() && *x >= 0.0));
        // P(X > mean) = 1/e for an exponential.
        let above = xs.iter().filter(|x| **x > 0.05).count() as f64 / n as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "{above}");
        let u: Vec<f64> = (0..1000).map(|_| r.uniform()).collect();
        assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    }
}
