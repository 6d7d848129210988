//! Waiting on conditions with a deadline (never on a bare sleep).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::Error;

/// How often a condition is polled.
pub const POLL: Duration = Duration::from_millis(200);

/// Polls `check` until it gives `Some`, or fails after `timeout` naming `what`.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The blocking twin of [`until`], for code outside a runtime.
pub fn until_blocking<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(POLL);
    }
}
