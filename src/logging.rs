//! Log set-up: text or JSON lines on stderr. The level applies to this crate;
//! libraries (kube, hyper) log only warnings and errors, so `debug` stays readable.

use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use crate::config::LogFormat;

/// Installs the global subscriber (once, at start-up).
pub fn init(format: LogFormat, level: LevelFilter) {
    let filter = Targets::new()
        .with_target("selfdestruct", level)
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
