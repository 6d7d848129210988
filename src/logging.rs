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

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    #[value(alias = "")]
    Text,
    /// One JSON object per line.
    Json,
}

/// kube's watcher: its warnings repeat what the agent logs about the same error.
pub(crate) const QUIET_LIBRARY: &str = "kube_runtime::watcher";

/// What is logged: this crate at `level`, libraries at most warnings, kube's
/// watcher at most errors.
pub(crate) fn filter(level: LevelFilter) -> Targets {
    Targets::new()
        .with_target("selfdestruct", level)
        .with_target(QUIET_LIBRARY, level.min(LevelFilter::ERROR))
        .with_default(level.min(LevelFilter::WARN))
}

/// Installs the global subscriber (once, at start-up).
pub(crate) fn init(format: LogFormat, level: LevelFilter) {
    let filter = filter(level);
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

/// The most bytes of server text (a `Status` message, a body) an error keeps.
pub(crate) const QUOTE_LIMIT: usize = 1024;

/// Server text as a log line may show it: control characters escaped (`\n`,
/// `\r`, `\u{1b}`: no forged lines, no terminal escapes), cut after
/// [`QUOTE_LIMIT`] bytes with the full length noted.
pub(crate) fn quote(text: &str) -> String {
    quote_to(text, QUOTE_LIMIT)
}

/// [`quote`] with another limit.
fn quote_to(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len().min(limit) + 32);
    for c in text.chars() {
        if out.len() >= limit {
            out.push_str(&format!("... ({} bytes in all)", text.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// An error and its causes as one log line ("request failed: ServiceError: client
/// error (Connect): invalid peer certificate: UnknownIssuer"): each level's text once,
/// escaped and cut at [`LEVEL_LIMIT`] as [`quote`] does (causes may carry server text).
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

/// The most bytes of one level of a [`Chain`]: more than an error's [`quote`]d
/// server text, which is never cut twice.
pub(crate) const LEVEL_LIMIT: usize = 4 * QUOTE_LIMIT;

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
mod tests;
