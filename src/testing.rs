//! Helpers shared by the unit-test modules (`#[cfg(test)]` only).

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

// The proptest configuration of the decision's property tests (`PROPTEST_CASES`).
#[path = "../decision/tests/common/mod.rs"]
pub(crate) mod props;

/// A fresh temporary folder for one test (unique within and across test processes).
pub(crate) fn tempdir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "selfdestruct-unit-{tag}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Polls `f` until it holds or `timeout` passes; whether it held.
pub(crate) fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `f` on a fresh current-thread runtime.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Arbitrary JSON, a few levels deep.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        prop_oneof![
            Just("2026-11-22T04:26:05Z"),
            Just("0000-01-01T00:00:00Z"),
            Just("1969-12-31T23:59:59Z"),
            Just("9999-12-31T23:59:59.999999999Z"),
            Just("True"),
            Just("Ready"),
            Just("NoSchedule"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-zA-Z]{1,8}",
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("conditions".to_string()),
                    Just("images".to_string()),
                    Just("names".to_string()),
                    Just("taints".to_string()),
                    Just("lastTransitionTime".to_string()),
                    Just("creationTimestamp".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Replaces the value at one path of `v` (chosen by `pick`) with `with`.
pub(crate) fn mutate(v: &mut Value, pick: usize, with: Value) {
    let mut paths: Vec<String> = Vec::new();
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    walk(x, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    walk(v, String::new(), &mut paths);
    let path = &paths[pick % paths.len()];
    if let Some(slot) = v.pointer_mut(path) {
        *slot = with;
    }
}

/// A temporary folder of the fuzz tests, one per thread.
pub(crate) fn fuzz_dir() -> std::path::PathBuf {
    thread_local! {
        static DIR: std::path::PathBuf = {
            let d = std::env::temp_dir().join(format!(
                "selfdestruct-unit-fuzz-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).expect("temp dir");
            d
        };
    }
    DIR.with(Clone::clone)
}
