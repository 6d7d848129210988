//! Log set-up: text or JSON lines on stderr. The level applies to this crate;
//! libraries (kube, hyper) log only warnings and errors, so `debug` stays readable.
//! kube's watcher logs only errors: its warnings (a raw "watch list error with
//! 403: Api(Status ...)" on every denied list) repeat the agent's own line.
//! [`Chain`] formats an error with its causes, once, where it is logged.

use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use crate::api::quote_to;
use crate::config::LogFormat;

/// kube's watcher: its warnings repeat what the agent logs about the same error.
pub const QUIET_LIBRARY: &str = "kube_runtime::watcher";

/// Installs the global subscriber (once, at start-up).
pub fn init(format: LogFormat, level: LevelFilter) {
    let filter = Targets::new()
        .with_target("selfdestruct", level)
        .with_target(QUIET_LIBRARY, level.min(LevelFilter::ERROR))
        .with_default(level.min(LevelFilter::WARN));
    let base = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false);
    let layer = match format {
        LogFormat::Json => base
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
        LogFormat::Text => base.with_filter(filter).boxed(),
    };
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// An error and its causes, as one line for the log ("request failed:
/// ServiceError: client error (Connect): invalid peer certificate:
/// UnknownIssuer"): each level's text once (a cause whose text its error
/// already shows is not repeated), control characters escaped and each level
/// cut at 4 KiB as [`crate::api::quote`] does (causes may carry server text:
/// kube's `Api` error shows the whole `Status`).
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

/// The most bytes of one level of a [`Chain`]: more than an [`ApiError`]'s
/// quoted server text, which is never cut twice.
///
/// [`ApiError`]: crate::api::ApiError
const LEVEL_LIMIT: usize = 4 * crate::api::QUOTE_LIMIT;

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&quote_to(&shown, LEVEL_LIMIT))?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !shown.contains(&text) {
                write!(f, ": {}", quote_to(&text, LEVEL_LIMIT))?;
            }
            shown = text;
            cause = c.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiError;

    #[test]
    fn a_chain_shows_each_cause_once_and_escaped() {
        let io = std::io::Error::other("tcp connect error\r\nInjected: line");
        let e = ApiError::transport(io);
        assert_eq!(
            Chain(&e).to_string(),
            "request failed: tcp connect error\\r\\nInjected: line"
        );
        let kube = kube::Error::Service(Box::new(std::io::Error::other("refused")));
        let e = ApiError::transport(kube);
        assert_eq!(
            Chain(&e).to_string(),
            "request failed: ServiceError: refused"
        );
    }
}
