//! The fake's clock. Instants are read from tokio's clock, so an in-process fake
//! on a paused runtime (`tokio::time::pause`) keeps its timers (re-creation and
//! start delays, bookmarks, PDB expiry) on virtual time; outside a paused runtime
//! tokio's clock is the system's monotonic clock. Wall time (creationTimestamp,
//! startTime, deletionTimestamp, Event times, the requests' `time`) is the system
//! clock, or for an in-process fake a base wall time moving with tokio's clock.

use std::time::{Instant, SystemTime};

/// Where the fake's `now` comes from.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: Option<(SystemTime, tokio::time::Instant)>,
}

impl Clock {
    /// The system clock (the fake on its own thread).
    pub fn real() -> Self {
        Clock { base: None }
    }

    /// Wall time from now on follows tokio's clock (virtual when paused).
    pub fn following_tokio() -> Self {
        Clock {
            base: Some((SystemTime::now(), tokio::time::Instant::now())),
        }
    }

    /// The wall time at tokio's instant the clock started from, when it follows
    /// tokio's clock: another clock built from it reads the same time.
    pub fn base(&self) -> Option<(SystemTime, tokio::time::Instant)> {
        self.base
    }

    /// The current instant (tokio's clock).
    pub fn instant(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// The current wall time.
    pub fn wall(&self) -> SystemTime {
        match self.base {
            None => SystemTime::now(),
            Some((wall, at)) => wall + tokio::time::Instant::now().saturating_duration_since(at),
        }
    }
}
