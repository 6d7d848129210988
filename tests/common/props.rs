//! Shared scaffolding of the property tests (tests/decision_props.rs,
//! tests/parser_fuzz.rs): the proptest configuration and the decision's
//! snapshot, owned.

use std::time::{Duration, SystemTime};

use proptest::test_runner::Config as PtConfig;
use selfdestruct::decision::{Decision, Memory, Policy, Snapshot, decide};
use selfdestruct::model::{NodeSummary, OwnPod, Sibling};

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

pub const T0: u64 = 1_800_000_000;
pub const HOUR: Duration = Duration::from_secs(3600);
pub const OWN: &str = "placeholder-0";
pub const OWN_UID: &str = "uid-own";

pub fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_secs(secs)
}

/// Everything a snapshot borrows, owned.
#[derive(Clone, Debug)]
pub struct World {
    pub now: SystemTime,
    pub own: OwnPod,
    pub nodes: Option<Vec<NodeSummary>>,
    pub siblings: Option<Vec<Sibling>>,
    pub policy: Policy,
    pub memory: Memory,
    pub draw: f64,
}

impl World {
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            now: self.now,
            own: &self.own,
            nodes: self.nodes.as_deref(),
            siblings: self.siblings.as_deref(),
            policy: &self.policy,
            memory: &self.memory,
            draw: self.draw,
        }
    }

    pub fn decide(&self) -> Decision {
        decide(&self.snapshot())
    }

    pub fn sibling_busy(&self) -> bool {
        self.siblings.iter().flatten().any(|s| {
            let is_self = s.name == self.own.name || (!s.uid.is_empty() && s.uid == self.own.uid);
            !is_self && (s.pending || s.terminating)
        })
    }

    pub fn recent_attempts(&self) -> usize {
        self.memory
            .attempts
            .iter()
            .filter(|t| self.now.duration_since(**t).is_ok_and(|d| d < HOUR) || **t > self.now)
            .count()
    }
}
