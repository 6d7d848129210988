//! Shared scaffolding of the property tests (decision/tests/decision_props.rs,
//! and the root crate's tests/parser_fuzz.rs, which includes this file as its
//! `common::props`): the proptest configuration. The decision's inputs come from
//! the core's builder (`selfdestruct_decision::builder`).

use proptest::test_runner::Config as PtConfig;

/// `default` cases, or `PROPTEST_CASES` (small for CI, raised for a longer local run).
pub fn proptest_config(default: u32) -> PtConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    }
}
