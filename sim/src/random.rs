//! Seeded random numbers: one independent stream per purpose, so that every
//! policy row sees the same user arrivals and the same node delays.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What a stream is used for; each purpose gets its own seed.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// User arrivals and session lengths.
    Arrivals,
    /// Node provisioning and image pull delays.
    Nodes,
    /// The draws handed to the decision (jitter, lifetimes, backoff).
    Agents,
}

/// A seeded generator with the few samplers the simulation needs.
#[derive(Clone, Debug)]
pub struct Random(SmallRng);

impl Random {
    /// The stream `which` of run `seed`.
    pub fn new(seed: u64, which: Stream) -> Self {
        let salt: u64 = match which {
            Stream::Arrivals => 0x9e37_79b9_7f4a_7c15,
            Stream::Nodes => 0xc2b2_ae3d_27d4_eb4f,
            Stream::Agents => 0x1656_67b1_9e37_79f9,
        };
        Random(SmallRng::seed_from_u64(seed ^ salt))
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// Uniform in [lo, hi).
    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Lognormal with the given mean (of the lognormal itself) and shape `sigma`.
    pub fn lognormal(&mut self, mean: f64, sigma: f64) -> f64 {
        let mu = mean.ln() - sigma * sigma / 2.0;
        (mu + sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_have_the_right_means() {
        let mut r = Random::new(7, Stream::Arrivals);
        let n = 200_000;
        let exp: f64 = (0..n).map(|_| r.exponential(3.0)).sum::<f64>() / n as f64;
        let logn: f64 = (0..n).map(|_| r.lognormal(27.0, 0.9)).sum::<f64>() / n as f64;
        assert!((exp - 3.0).abs() < 0.05, "{exp}");
        assert!((logn - 27.0).abs() < 0.5, "{logn}");
    }

    #[test]
    fn streams_are_seeded_and_independent() {
        let a: Vec<f64> = {
            let mut r = Random::new(1, Stream::Nodes);
            (0..4).map(|_| r.uniform()).collect()
        };
        let b: Vec<f64> = {
            let mut r = Random::new(1, Stream::Nodes);
            (0..4).map(|_| r.uniform()).collect()
        };
        let c: Vec<f64> = {
            let mut r = Random::new(1, Stream::Agents);
            (0..4).map(|_| r.uniform()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
