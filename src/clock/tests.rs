//! Unit tests of `clock` (a child module: they see its private items).

use super::*;
use std::time::Duration;
use std::time::SystemTime;

#[tokio::test(start_paused = true)]
async fn a_clock_following_tokio_moves_only_with_tokio_time() {
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let clock = Clock::following_tokio(wall, tokio::time::Instant::now());
    assert_eq!(clock.now(), wall);
    tokio::time::advance(Duration::from_secs(90)).await;
    assert_eq!(clock.now(), wall + Duration::from_secs(90));
}
