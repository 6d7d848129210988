//! The `simulate` binary: flags, exit codes, outputs.

use std::process::Command;

fn simulate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args(args)
        .output()
        .expect("runs")
}

/// Runs `simulate` with `args`, which must succeed (else its stderr is shown); its JSON output.
fn simulate_json(args: &[&str]) -> serde_json::Value {
    let out = simulate(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
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

/// Flags that size the work are bounded: exit 2 at once, naming the flag (before, `--replicas
/// 100000` and `--rate-high 10000000` ran for good and printed nothing).
#[test]
fn flags_that_size_the_work_are_bounded() {
    for (bad, names) in [
        (vec!["--replicas", "100000"], "--replicas"),
        (
            vec!["--replicas", "2001", "--max-nodes", "5000"],
            "--replicas",
        ),
        (
            vec!["--replicas", "200", "--scenario", "small"],
            "--max-nodes 10",
        ),
        (vec!["--rate-high", "10000000"], "--rate-high"),
        (
            vec!["--rate-low", "1000000", "--rate-high", "1000000"],
            "--rate-low, --rate-high",
        ),
        (
            vec!["--scenario", "burst", "--class-size", "50000000"],
            "--class-size",
        ),
        (vec!["--max-nodes", "100000"], "--max-nodes"),
        (
            vec![
                "--node-cpu",
                "10000",
                "--user-cpu",
                "0.01",
                "--node-mem-gib",
                "100000",
                "--user-mem-gib",
                "0.1",
            ],
            "--max-pods",
        ),
        (vec!["--sweep-replicas", "0..100000"], "--sweep-replicas"),
        (
            vec!["--sweep-replicas", "0..2000", "--sweep-step", "1"],
            "--sweep-step",
        ),
        (vec!["--warmup", "100d"], "--warmup"),
        (
            vec!["--rebalancer-interval", "1ms"],
            "--rebalancer-interval",
        ),
        (vec!["--only", ""], "--only"),
        (vec!["--only", " , "], "--only"),
        // The compressed replay's timers (bench/coldstart).
        (vec!["--scan-interval", "0s"], "--scan-interval"),
        (vec!["--scan-interval", "11m"], "--scan-interval"),
        (
            vec!["--scale-down-delay-after-add", "2d"],
            "--scale-down-delay-after-add",
        ),
        (
            vec!["--unremovable-node-recheck-timeout", "500ms"],
            "--unremovable-node-recheck-timeout",
        ),
        (vec!["--new-pod-hold", "1h"], "--new-pod-hold"),
        (vec!["--created-resolution", "0s"], "--created-resolution"),
        (vec!["--created-resolution", "1h"], "--created-resolution"),
        (vec!["--gate-lag", "2h"], "--gate-lag"),
        (vec!["--image-size-gib", "0"], "--image-size-gib"),
        (vec!["--image-size-gib", "NaN"], "--image-size-gib"),
    ] {
        let out = simulate(&bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{bad:?}");
        assert!(stderr.contains(names), "{bad:?}: {stderr}");
    }
}

/// More launches at once than `--max-nodes` can ever start before the run gives up on them:
/// the input's fault (exit 2, saying so), not "invariant violated" (exit 1, the model's).
#[test]
fn launches_beyond_the_clusters_room_are_blamed_on_the_input() {
    let dir = std::env::temp_dir().join(format!("sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let csv = dir.join("at-once.csv");
    let mut text = String::from("timestamp\n");
    for _ in 0..50_000 {
        text.push_str("2026-02-02T10:00:00Z\n");
    }
    std::fs::write(&csv, text).expect("write");
    let csv = csv.to_string_lossy().into_owned();
    for args in [
        vec![
            "--arrivals",
            csv.as_str(),
            "--scenario",
            "small",
            "--seeds",
            "1",
            "--only",
            "static",
        ],
        vec![
            "--scenario",
            "burst",
            "--class-size",
            "50000",
            "--seeds",
            "1",
            "--only",
            "static",
        ],
    ] {
        let out = simulate(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("the launches need more room than the cluster has")
                && stderr.contains("--max-nodes"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("invariant violated"), "{stderr}");
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
        Some(16),
        "the peer rows and issue 45's policy rows too"
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

/// The compressed replay's timers (bench/coldstart passes the real stack's timers times its
/// factor) reach the scenario the run uses: its JSON echoes each one.
#[test]
fn the_real_stack_benchs_timers_set_the_scenario() {
    let mut args = QUICK.to_vec();
    args.extend([
        "--only",
        "static",
        "--json",
        "--scan-interval",
        "15s",
        "--scale-down-delay-after-add",
        "20m",
        "--unremovable-node-recheck-timeout",
        "10m",
        "--new-pod-hold",
        "30s",
        "--created-resolution",
        "15s",
        "--node-delete-delay-after-taint",
        "75s",
        "--eviction-retry",
        "150s",
        "--max-pod-eviction-time",
        "30m",
        "--gate-lag",
        "15s",
        "--image-size-gib",
        "2",
    ]);
    let v = simulate_json(&args);
    let sc = &v["scenario"];
    assert_eq!(sc["autoscaler"]["scan"], 15_000);
    assert_eq!(sc["autoscaler"]["delay_after_add"], 1_200_000);
    assert_eq!(sc["autoscaler"]["unremovable_recheck"], 600_000);
    assert_eq!(sc["autoscaler"]["new_pod_hold"], 30_000);
    assert_eq!(sc["autoscaler"]["created_resolution"], 15_000);
    assert_eq!(sc["autoscaler"]["delete_delay_after_taint"], 75_000);
    assert_eq!(sc["autoscaler"]["eviction_retry"], 150_000);
    assert_eq!(sc["autoscaler"]["max_pod_eviction_time"], 1_800_000);
    assert_eq!(sc["gate_lag"], 15_000);
    assert_eq!(sc["image_size_mib"], 2_048);
}

/// `--users-out` (the real-stack bench's per-user comparison) writes each row's users and nodes:
/// as many users as the run had, cold exactly where the summary counts cold, and a cold user bound
/// to a node before its image was there.
#[test]
fn users_out_lists_every_user_and_why_it_was_cold() {
    let dir = std::env::temp_dir().join(format!("simulate-users-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("users.json");
    let mut args = QUICK.to_vec();
    let p = path.display().to_string();
    args.extend([
        "--only",
        "static,buffer",
        "--warmup",
        "0",
        "--json",
        "--users-out",
        &p,
    ]);
    let v = simulate_json(&args);
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("--users-out's file"))
            .expect("its JSON");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let summary = v["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|s| s["results"]["policy"] == r["row"])
            .expect("the row in the table");
        let seed0 = &summary["per_seed"][0];
        let users = r["users"].as_array().expect("users");
        let nodes = r["nodes"].as_array().expect("nodes");
        let cold: Vec<&serde_json::Value> = users.iter().filter(|u| u["cold"] == true).collect();
        assert_eq!(users.len() as u64, seed0["users"].as_u64().expect("users"));
        assert_eq!(cold.len() as u64, seed0["cold"].as_u64().expect("cold"));
        let added: u64 = r["scale_ups"]
            .as_array()
            .expect("scale-ups")
            .iter()
            .map(|s| s[1].as_u64().expect("nodes added"))
            .sum();
        let provisioned = nodes.iter().filter(|n| n["ready"] != n["created"]).count();
        assert_eq!(added, provisioned as u64);
        assert!(added > 0, "the test wants a run that scales up");
        for u in cold {
            let n = nodes
                .iter()
                .find(|n| n["name"] == u["node"])
                .expect("a cold user's node");
            assert!(u["bound"].as_f64() < n["image"].as_f64(), "{u} on {n}");
        }
    }
}
