//! A small seeded pseudo-random generator shared by the cores.
//!
//! The cores take randomness as an argument (ARCHITECTURE.md, rule 1), and the simulator must give
//! the same result bit for bit for the same seed, on every platform and every version of every
//! dependency. So the generator is defined here: xoshiro256** (Blackman and Vigna, 2018), seeded
//! through SplitMix64 as its authors recommend. It is not cryptographic and need not be.

/// xoshiro256** seeded by SplitMix64.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// A child generator for a sub-component (e.g. one per node or per port), derived
    /// deterministically from this generator's seed stream and `stream`.
    pub fn fork(&mut self, stream: u64) -> Rng {
        Rng::new(self.next_u64() ^ stream.wrapping_mul(0xD134_2543_DE82_EF95))
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// A uniform integer in `[0, n)`; `0` when `n == 0`. Uses Lemire's multiply-shift, whose bias
    /// is below 2^-64 · n and irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `value` multiplied by a uniform factor in `[1 - spread, 1 + spread]`, as the QCN sampling
    /// and byte-counter/timer reloads do with spread 0.15 (802.1Q-2011 32.8.4, 32.11.7: "randomized
    /// by ±15 %"). Rounds to the nearest integer.
    pub fn jitter(&mut self, value: u64, spread: f64) -> u64 {
        let f = self.uniform(1.0 - spread, 1.0 + spread);
        (value as f64 * f).round().max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            assert!(r.below(10) < 10);
            let j = r.jitter(150_000, 0.15);
            assert!((127_500..=172_500).contains(&j));
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn mean_is_about_half() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let mean = (0..n).map(|_| r.next_f64()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }
}
