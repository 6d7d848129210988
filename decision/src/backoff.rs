//! Capped exponential backoff with jitter, shared by every retry path.

use std::time::Duration;

/// A backoff schedule: `base * 2^failures`, capped, with "equal jitter"
/// (half fixed, half drawn) so a fleet that fails together does not retry together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure (before jitter).
    pub base: Duration,
    /// Upper bound of any delay.
    pub cap: Duration,
}

impl Backoff {
    /// API server errors and outages: 1s, 2s, 4s ... up to 5 minutes.
    pub const TRANSIENT: Backoff = Backoff {
        base: Duration::from_secs(1),
        cap: Duration::from_secs(300),
    };
    /// A PodDisruptionBudget said "not now": another placeholder is moving.
    pub const BUSY: Backoff = Backoff {
        base: Duration::from_secs(10),
        cap: Duration::from_secs(300),
    };
    /// Permission problems (403, admission denials): retry rarely.
    pub const DENIED: Backoff = Backoff {
        base: Duration::from_secs(600),
        cap: Duration::from_secs(3600),
    };

    /// The delay after `failures` consecutive failures (0 = the first), with `draw` in [0, 1).
    pub fn delay(&self, failures: u32, draw: f64) -> Duration {
        let exp = self
            .base
            .checked_mul(1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(self.cap)
            .min(self.cap);
        let half = exp / 2;
        half + crate::scaled(half, draw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_jitters() {
        let b = Backoff::TRANSIENT;
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(b.delay(0, 1.0), Duration::from_secs(1));
        assert_eq!(b.delay(3, 1.0), Duration::from_secs(8));
        assert_eq!(b.delay(3, 0.0), Duration::from_secs(4));
        assert_eq!(b.delay(30, 1.0), Duration::from_secs(300));
        assert_eq!(b.delay(u32::MAX, 0.5), Duration::from_secs(225));
        for failures in 0..40 {
            for draw in [0.0, 0.3, 0.999] {
                let d = b.delay(failures, draw);
                assert!(
                    d >= Duration::from_millis(500) && d <= b.cap,
                    "{failures} {draw} {d:?}"
                );
            }
        }
        assert!(Backoff::DENIED.delay(0, 0.0) >= Duration::from_secs(300));
    }
}
