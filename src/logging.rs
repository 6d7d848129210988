//! Log set-up: text or JSON lines on stderr, one level.

use crate::config::LogFormat;
use tracing::level_filters::LevelFilter;

/// Installs the global subscriber (once, at start-up).
pub fn init(format: LogFormat, level: LevelFilter) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
