//! The agent's wall clock, injectable: the binary's reads the system's wall clock once,
//! at start, and counts on from there on the monotonic clock (tokio's `Instant`), so a
//! step of the wall clock (an hour back, a manual `date -s`) moves no lifetime or wait;
//! it is warned about, once per step. The in-process test tier follows tokio's
//! (paused, advanced) time from a base the same way.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

/// A difference between the wall clock and the agent's time this large (either way,
/// since the last one reported) is a step, and warned about. Clock slewing (NTP's
/// normal correction) moves both clocks alike and never shows here.
pub(crate) const STEP: Duration = Duration::from_secs(2);

/// Where the agent's `now` comes from.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// This wall time at this tokio instant; `now` is it plus tokio's time since.
    base: (SystemTime, tokio::time::Instant),
    /// The system's wall clock, read to notice its steps (the binary's clock only).
    wall: Option<fn() -> SystemTime>,
}

/// The last difference reported (wall clock less the agent's time, in
/// milliseconds), for [`Clock::system`]'s step warnings.
static REPORTED: AtomicI64 = AtomicI64::new(0);

impl Clock {
    /// The system's wall clock now, counted on on the monotonic clock (what the
    /// binary uses).
    pub(crate) fn system() -> Self {
        Self::reading(SystemTime::now)
    }

    /// A clock that starts at `wall()` and counts on on the monotonic clock,
    /// warning when `wall` steps away from it.
    fn reading(wall: fn() -> SystemTime) -> Self {
        Clock {
            base: (wall(), tokio::time::Instant::now()),
            wall: Some(wall),
        }
    }

    /// A clock that reads `wall` at tokio's instant `at` and moves with tokio's
    /// time from there (under `tokio::time::pause`, only when time is advanced).
    pub fn following_tokio(wall: SystemTime, at: tokio::time::Instant) -> Self {
        Clock {
            base: (wall, at),
            wall: None,
        }
    }

    /// The current wall time, as the agent counts it. Warns (once per step) when
    /// the system's wall clock has stepped away from it.
    pub(crate) fn now(&self) -> SystemTime {
        let (wall, at) = self.base;
        let now = wall + tokio::time::Instant::now().saturating_duration_since(at);
        if let Some(read) = self.wall {
            notice_step(read(), now, &REPORTED);
        }
        now
    }
}

/// Warns when the wall clock (`wall`) is off the agent's time (`now`) by [`STEP`]
/// more or less than when last `reported`; returns the new difference then
/// (milliseconds, positive: the wall clock is ahead).
fn notice_step(wall: SystemTime, now: SystemTime, reported: &AtomicI64) -> Option<i64> {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let off = match wall.duration_since(now) {
        Ok(ahead) => ms(ahead),
        Err(behind) => -ms(behind.duration()),
    };
    let last = reported.load(Ordering::Relaxed);
    let step = off.saturating_sub(last);
    if step.unsigned_abs() < STEP.as_millis() as u64 {
        return None;
    }
    reported.store(off, Ordering::Relaxed);
    let by = selfdestruct_decision::duration::format(Duration::from_millis(step.unsigned_abs()));
    let way = if step < 0 { "back" } else { "forward" };
    tracing::warn!(
        step = %by,
        "the wall clock stepped {way} by {by}: lifetimes and waits go on as counted on the \
         monotonic clock since the start, not with the wall clock"
    );
    Some(off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The wall clock, an hour back once `STEPPED` is set.
    static STEPPED: AtomicBool = AtomicBool::new(false);

    fn stepping_wall() -> SystemTime {
        let now = SystemTime::now();
        if STEPPED.load(Ordering::Relaxed) {
            now - Duration::from_secs(3600)
        } else {
            now
        }
    }

    #[test]
    fn a_wall_clock_stepping_back_an_hour_does_not_move_the_agents_time() {
        // Issue 32, item 11: a 40 s lifetime was pushed back by the hour.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let _in = runtime.enter();
        let clock = Clock::reading(stepping_wall);
        let before = clock.now();
        STEPPED.store(true, Ordering::Relaxed);
        let after = clock.now();
        assert!(
            after >= before,
            "the agent's time went back with the wall clock"
        );
        assert!(after.duration_since(before).expect("later") < Duration::from_secs(60));
    }

    #[test]
    fn a_step_is_reported_once() {
        let reported = AtomicI64::new(0);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let hour = Duration::from_secs(3600);
        assert_eq!(notice_step(now, now, &reported), None);
        assert_eq!(
            notice_step(now + Duration::from_millis(1500), now, &reported),
            None,
            "less than a step"
        );
        assert_eq!(notice_step(now - hour, now, &reported), Some(-3_600_000));
        assert_eq!(notice_step(now - hour, now, &reported), None, "once");
        let later = now + Duration::from_secs(40);
        assert_eq!(
            notice_step(later - hour, later, &reported),
            None,
            "still once"
        );
        assert_eq!(notice_step(later, later, &reported), Some(0), "and back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_only_with_tokio_time() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let clock = Clock::following_tokio(wall, tokio::time::Instant::now());
        assert_eq!(clock.now(), wall);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.now(), wall + Duration::from_secs(90));
    }
}
