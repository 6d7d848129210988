//! Unit tests of `logging` (a child module: they see its private items).

use super::*;
use tracing::level_filters::LevelFilter;

#[test]
fn a_chain_shows_each_cause_once_and_escaped() {
    let io = std::io::Error::other("tcp connect error\r\nInjected: line");
    let e = kube::Error::Service(Box::new(io));
    assert_eq!(
        Chain(&e).to_string(),
        "ServiceError: tcp connect error\\r\\nInjected: line"
    );
    let long = kube::Error::Service(Box::new(std::io::Error::other("z".repeat(10_000))));
    let text = Chain(&long).to_string();
    assert!(text.len() < LEVEL_LIMIT + 40, "{}", text.len());
    assert!(text.ends_with("(10014 bytes in all)"), "{text}");
}

#[test]
fn kube_watcher_warnings_are_not_logged_its_errors_are() {
    use tracing::Level;
    let f = filter(LevelFilter::DEBUG);
    assert!(!f.would_enable(QUIET_LIBRARY, &Level::WARN));
    assert!(f.would_enable(QUIET_LIBRARY, &Level::ERROR));
    assert!(f.would_enable("kube_client::client", &Level::WARN));
    assert!(f.would_enable("selfdestruct::agent", &Level::DEBUG));
    assert!(!filter(LevelFilter::OFF).would_enable(QUIET_LIBRARY, &Level::ERROR));
}
