//! The agent's wall clock, injectable: the binary reads the system clock; the
//! in-process test tier follows tokio's (paused, advanced) time from a base.

use std::time::SystemTime;

/// Where the agent's `now` comes from.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// `None`: the system clock. `Some`: this wall time at this tokio instant,
    /// and tokio's time since.
    base: Option<(SystemTime, tokio::time::Instant)>,
}

impl Clock {
    /// The system clock (what the binary uses).
    pub(crate) fn system() -> Self {
        Clock { base: None }
    }

    /// A clock that reads `wall` at tokio's instant `at` and moves with tokio's
    /// time from there (under `tokio::time::pause`, only when time is advanced).
    pub fn following_tokio(wall: SystemTime, at: tokio::time::Instant) -> Self {
        Clock {
            base: Some((wall, at)),
        }
    }

    /// The current wall time.
    pub(crate) fn now(&self) -> SystemTime {
        match self.base {
            None => SystemTime::now(),
            Some((wall, at)) => wall + tokio::time::Instant::now().saturating_duration_since(at),
        }
    }
}

#[cfg(test)]
mod tests;
