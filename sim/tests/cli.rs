//! The `simulate` binary: flags, exit codes, outputs.

use std::process::Command;

fn simulate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args(args)
        .output()
        .expect("runs")
}

const QUICK: [&str; 6] = ["--scenario", "small", "--hours", "2", "--seeds", "1"];

#[test]
fn help_and_invalid_flags() {
    let help = simulate(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--sweep-replicas",
        "--plot",
        "--json",
        "--node-settle",
        "--gate",
        "--default-spreading",
        "--arrivals",
        "--origin",
        "--skip-bad-lines",
        "--recommend",
        "--target-wait",
        "--target-cold",
        "--user-placement",
        "--descheduling-interval",
        "--max-pod-lifetime",
    ] {
        assert!(text.contains(flag), "{flag} in --help");
    }
    for bad in [
        vec!["--bogus"],
        vec!["--node-settle", "30"],
        vec!["--scenario", "nope"],
        vec!["--hours", "-1"],
        vec!["--gate", "maybe"],
        vec!["--sweep-replicas", "9..3"],
        vec!["--min-lifetime", "2h", "--max-lifetime", "1h"],
        vec!["--only", "nothing"],
        vec!["--user-cpu", "100"],
        vec!["--user-placement", "spread"],
        vec!["--max-pod-lifetime", "0"],
    ] {
        let out = simulate(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!out.stderr.is_empty(), "{bad:?} explains itself");
    }
}

#[test]
fn table_json_sweep_and_plot() {
    let out = simulate(&QUICK);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for row in [
        "none",
        "static",
        "timer",
        "new-node",
        "new-node+images",
        "gate",
        "gate+new-node",
        "buffer",
        "buffer+gate",
        "rebalancer",
        "node-balloon",
        "podlifetime",
        "configured",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{row} "))),
            "row {row}"
        );
    }
    assert!(text.contains("placed MostAllocated"), "{text}");
    let mut gated = QUICK.to_vec();
    gated.extend([
        "--only",
        "configured",
        "--gate",
        "on",
        "--move-to-new-nodes",
        "false",
        "--required-images",
        "off",
    ]);
    let out = simulate(&gated);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no node trigger, node readiness gate"),
        "{text}"
    );
    let mut args = QUICK.to_vec();
    args.push("--json");
    let a = simulate(&args);
    let b = simulate(&args);
    assert_eq!(a.stdout, b.stdout, "same flags, same bytes");
    let doc: serde_json::Value = serde_json::from_slice(&a.stdout).expect("valid JSON");
    assert_eq!(
        doc["rows"].as_array().map(Vec::len),
        Some(13),
        "the peer rows too"
    );
    // the other placement, the peer rows included: still the same bytes
    let mut least = QUICK.to_vec();
    least.extend(["--user-placement", "least-allocated"]);
    let a = simulate(&least);
    let b = simulate(&least);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout, "same flags, same bytes");
    let text = String::from_utf8_lossy(&a.stdout);
    assert!(text.contains("placed LeastAllocated"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("podlifetime ")));

    let svg = std::env::temp_dir().join(format!("simulate-test-{}.svg", std::process::id()));
    let svg_arg = svg.to_string_lossy().to_string();
    let mut args = QUICK.to_vec();
    args.extend([
        "--sweep-replicas",
        "0..4",
        "--sweep-step",
        "2",
        "--plot",
        &svg_arg,
    ]);
    let out = simulate(&args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rule of thumb"));
    assert!(text.contains("4 configured"));
    let drawn = std::fs::read_to_string(&svg).expect("plot written");
    let _ = std::fs::remove_file(&svg);
    assert!(drawn.starts_with("<svg") && drawn.contains("<polyline"));
}
