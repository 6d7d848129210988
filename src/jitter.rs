//! The random draws of the I/O shell (the decision core takes its draws as
//! arguments and has no randomness of its own).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A uniform random number in [0, 1) from a freshly seeded generator (for the
/// rare retry paths; hot paths keep their own generator).
pub fn draw() -> f64 {
    SmallRng::from_os_rng().random()
}
