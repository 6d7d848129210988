//! The chart's `schedule` section (`charts/selfdestruct/templates/schedule.yaml`),
//! rendered by Helm's own engine (`ci/render-chart.py`, the venv of
//! `ci/validate-manifests.sh`, as in tests/chart.rs): a one-replica Deployment running
//! `selfdestruct-schedule` whose settings the binary's own parser accepts, a Role that
//! may get/patch only the scaled object (by resourceNames) and create Events, its
//! binding; and the values the mode would refuse are refused before they reach a
//! cluster, by the schema or the template, each with a message.

use std::path::Path;
use std::process::{Command, Output};

use selfdestruct_schedule::controller::Cli;
use serde_json::{Value, json};

const CHART: &str = "charts/selfdestruct";

/// The repository.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn render_output(set: &str) -> Output {
    render_args(&["--set-json", set])
}

/// The chart rendered with `helm template`'s value flags `args`.
fn render_args(args: &[&str]) -> Output {
    let python = std::env::temp_dir().join("selfdestruct-validate-venv/bin/python");
    Command::new(&python)
        .current_dir(root())
        .args(["ci/render-chart.py", CHART, "hub", "hub-ns", "--json"])
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "needs {} (run `bash ci/validate-manifests.sh` once): {e}",
                python.display()
            )
        })
}

fn render(set: &str) -> Vec<Value> {
    let out = render_output(set);
    assert!(
        out.status.success(),
        "{set}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == "hub-schedule")
        .unwrap_or_else(|| panic!("no {kind} hub-schedule"))
}

/// The container's env as (name, value) with the Downward API ones left out.
fn env_of(deployment: &Value) -> Vec<(String, String)> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect()
}

/// The binary's own parser, on exactly these settings (none from this process).
fn mode_accepts(env: &[(String, String)]) -> Result<(), String> {
    use clap::{CommandFactory, FromArgMatches};
    let cli = Cli::command();
    let mut argv = vec!["selfdestruct-schedule".to_string()];
    for (k, v) in env {
        let flag = cli
            .get_arguments()
            .find(|a| a.get_env().and_then(|e| e.to_str()) == Some(k.as_str()))
            .and_then(|a| a.get_long())
            .ok_or_else(|| format!("{k} is no setting of the schedule"))?;
        argv.push(format!("--{flag}={v}"));
    }
    let parsed = cli
        .mut_args(|a| a.env(None))
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| e.to_string())?;
    parsed.check().map_err(|e| e.to_string())
}

/// `--flag` of the schedule's setting `var`.
fn selfdestruct_flag(var: &str) -> String {
    use clap::CommandFactory;
    let cli = Cli::command();
    let long = cli
        .get_arguments()
        .find(|a| a.get_env().and_then(|e| e.to_str()) == Some(var))
        .and_then(|a| a.get_long())
        .unwrap();
    format!("--{long} ")
}

#[test]
fn the_schedule_renders_a_deployment_with_a_role_for_its_one_object() {
    // Off by default: nothing of it.
    let default = render("schedule={}");
    assert!(
        !default
            .iter()
            .any(|d| d["metadata"]["name"] == "hub-schedule")
    );

    let timetable = json!({
        "enabled": true,
        "baseline": "Mon-Fri 08:00-18:00 = 12; * = 2",
        "calendar": {"configMap": "timetable", "key": "class.ics"},
        "timeZone": "Europe/Berlin",
        "leadTime": "15m",
        "min": 1,
        "max": 40,
    });
    let docs = render(&format!("schedule={timetable}"));
    let d = find(&docs, "Deployment");
    assert_eq!(d["spec"]["replicas"], 1);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "hub-schedule");
    // Its own binary, named by the Deployment (the image's entrypoint is the agent's).
    assert_eq!(
        pod["containers"][0]["command"],
        json!(["/selfdestruct-schedule"])
    );
    assert!(pod["containers"][0]["args"].is_null());
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "timetable");
    let env = env_of(d);
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    // The target is the release's own StatefulSet, as the chart names it (the set's name
    // alone named another release's, or none).
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "StatefulSet" && d["metadata"]["name"] == "hub-placeholder"),
        "the release's StatefulSet"
    );
    assert_eq!(
        get("SELFDESTRUCT_SCHEDULE_TARGET"),
        Some("statefulset/hub-placeholder")
    );
    assert_eq!(
        get("SELFDESTRUCT_SCHEDULE_CALENDAR"),
        Some("/etc/selfdestruct/calendar/class.ics")
    );
    mode_accepts(&env).unwrap();

    let role = find(&docs, "Role");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["apps"], "resources": ["statefulsets/scale"],
             "resourceNames": ["hub-placeholder"], "verbs": ["get", "patch"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        ])
    );
    // No warm label (no node gate in the release) nor images: no node is read.
    assert!(!docs.iter().any(
        |d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "hub-schedule-nodes.hub-ns"
    ));
    let binding = find(&docs, "RoleBinding");
    assert_eq!(binding["roleRef"]["name"], "hub-schedule");
    assert_eq!(binding["subjects"][0]["name"], "hub-schedule");

    // A CapacityBuffer from a URL.
    let buffer = json!({
        "enabled": true,
        "target": "capacitybuffer/user-headroom",
        "calendar": {"url": "webcal://calendar.example.edu/classes.ics"},
    });
    let docs = render(&format!("schedule={buffer}"));
    assert_eq!(
        find(&docs, "Role")["rules"][0],
        json!({"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["capacitybuffers"],
               "resourceNames": ["user-headroom"], "verbs": ["get", "patch"]})
    );
    let env = env_of(find(&docs, "Deployment"));
    assert!(env.contains(&(
        "SELFDESTRUCT_SCHEDULE_CALENDAR".into(),
        "webcal://calendar.example.edu/classes.ics".into()
    )));
    mode_accepts(&env).unwrap();
}

#[test]
fn the_chart_refuses_what_the_mode_refuses() {
    let cases: &[(Value, &str, &str)] = &[
        (
            json!({"baseline": "Monday = 3"}),
            "/schedule/baseline",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"baseline": "Mon 8:00-18:00 = 3"}),
            "/schedule/baseline",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"baseline": "Mon 08:00-18:00 = lots"}),
            "/schedule/baseline",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"baseline": "Mon 08:00-25:00 = 3"}),
            "/schedule/baseline",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"baseline": "* = 100001"}),
            "/schedule/baseline",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"baseline": "Mon 18:00-08:00 = 3"}),
            "must end after it starts",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            json!({"target": "deployment/x", "baseline": "* = 1"}),
            "/schedule/target",
            "SELFDESTRUCT_SCHEDULE_TARGET",
        ),
        (
            json!({"calendar": {"url": "ftp://x/y.ics"}}),
            "/schedule/calendar/url",
            "SELFDESTRUCT_SCHEDULE_CALENDAR",
        ),
        (
            json!({"baseline": "* = 1", "leadTime": "10"}),
            "/schedule/leadTime",
            "SELFDESTRUCT_SCHEDULE_LEAD_TIME",
        ),
        (
            json!({"baseline": "* = 1", "timeZone": "Europe Berlin"}),
            "/schedule/timeZone",
            "SELFDESTRUCT_SCHEDULE_TIME_ZONE",
        ),
        (
            json!({"baseline": "* = 1", "max": 100001}),
            "/schedule/max",
            "SELFDESTRUCT_SCHEDULE_MAX",
        ),
        (
            json!({"baseline": "* = 1", "min": 5, "max": 2}),
            "must be at most schedule.max",
            "SELFDESTRUCT_SCHEDULE_MIN",
        ),
        (
            json!({}),
            "nothing to schedule",
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
    ];
    let mut failures = Vec::new();
    for (values, chart_says, mode_names) in cases {
        let mut v = values.clone();
        v["enabled"] = json!(true);
        let out = render_output(&format!("schedule={v}"));
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains(chart_says) {
            failures.push(format!(
                "{v}: exit {:?}, want {chart_says:?} in: {err}",
                out.status.code()
            ));
        }
        // The mode refuses the same values, naming the variable.
        let mut env = vec![(
            "SELFDESTRUCT_SCHEDULE_TARGET".to_string(),
            "statefulset/placeholder".to_string(),
        )];
        let s = |k: &str| {
            v.get(k)
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
        };
        for (key, var) in [
            ("baseline", "SELFDESTRUCT_SCHEDULE_BASELINE"),
            ("target", "SELFDESTRUCT_SCHEDULE_TARGET"),
            ("leadTime", "SELFDESTRUCT_SCHEDULE_LEAD_TIME"),
            ("timeZone", "SELFDESTRUCT_SCHEDULE_TIME_ZONE"),
            ("min", "SELFDESTRUCT_SCHEDULE_MIN"),
            ("max", "SELFDESTRUCT_SCHEDULE_MAX"),
        ] {
            if let Some(value) = s(key) {
                env.retain(|(k, _)| k != var);
                env.push((var.into(), value));
            }
        }
        if let Some(url) = v["calendar"]["url"].as_str() {
            env.push(("SELFDESTRUCT_SCHEDULE_CALENDAR".into(), url.into()));
        }
        // The variable, or its flag (this parse reads no environment).
        let flag = selfdestruct_flag(mode_names);
        match mode_accepts(&env) {
            Err(e) if e.contains(mode_names) || e.contains(&flag) => {}
            other => failures.push(format!("{v}: the mode says {other:?}, want {mode_names}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_release_of_the_schedule_alone_scales_a_capacity_buffer() {
    // Issue 46 item 22: `placeholders: []` was refused (minItems 1), so a CapacityBuffer
    // could not be scheduled without a placeholder set beside it.
    let buffer = json!({
        "enabled": true,
        "target": "capacitybuffer/user-headroom",
        "baseline": "Mon-Fri 08:00-18:00 = 12; * = 2",
    });
    let schedule = format!("schedule={buffer}");
    let out = render_args(&["--set-json", "placeholders=[]", "--set-json", &schedule]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "PriorityClass",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Deployment"
        ],
        "the schedule's objects (and the PriorityClass a buffer's pods may use) alone"
    );
    mode_accepts(&env_of(find(&docs, "Deployment"))).unwrap();
    // Without a buffer to scale, no set is no release.
    let out = render_args(&["--set-json", "placeholders=[]"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("capacitybuffer/NAME"),
        "{err}"
    );
}

#[test]
fn the_calendar_configmap_is_rendered_from_a_value_or_mounted_optional() {
    // Issue 46 item 22: the chart did not render the calendar's ConfigMap, and its volume
    // was not optional: the pod waited in ContainerCreating until someone guessed the name.
    let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n";
    let inline = json!({"enabled": true, "calendar": {"ics": ics, "key": "classes.ics"}});
    let docs = render(&format!("schedule={inline}"));
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "hub-schedule-calendar")
        .expect("the calendar's ConfigMap");
    assert_eq!(cm["data"]["classes.ics"], ics);
    let d = find(&docs, "Deployment");
    let volume = &d["spec"]["template"]["spec"]["volumes"][0]["configMap"];
    assert_eq!(volume["name"], "hub-schedule-calendar");
    let env = env_of(d);
    assert!(env.contains(&(
        "SELFDESTRUCT_SCHEDULE_CALENDAR".into(),
        "/etc/selfdestruct/calendar/classes.ics".into()
    )));
    mode_accepts(&env).unwrap();
    // One made by hand: optional, so the pod starts without it.
    let own = json!({"enabled": true, "calendar": {"configMap": "timetable"}});
    let docs = render(&format!("schedule={own}"));
    let d = find(&docs, "Deployment");
    let volume = &d["spec"]["template"]["spec"]["volumes"][0]["configMap"];
    assert_eq!(
        (&volume["name"], &volume["optional"]),
        (&json!("timetable"), &json!(true))
    );
    // The command that makes it is in values.yaml, and in docs/schedule.md.
    let command = "kubectl create configmap NAME --from-file=calendar.ics=FILE.ics -n NS";
    for doc in ["charts/selfdestruct/values.yaml", "docs/schedule.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        assert!(text.contains(command), "{doc} does not say {command:?}");
    }
    // Two sources at once are refused.
    let both = json!({"enabled": true, "calendar": {"ics": ics, "url": "https://x.example/c.ics"}});
    let out = render_output(&format!("schedule={both}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("one of url, ics and configMap"),
        "{err}"
    );
}

#[test]
fn values_yaml_says_when_the_object_is_checked_and_which_buffer_api() {
    // Issue 46 item 21: values.yaml said a `helm upgrade` resets the replicas "until the next
    // evaluation, 15 s at most"; the object is checked every `refresh` (5 min). Item 22:
    // nothing said the buffer must be autoscaling.x-k8s.io/v1beta1.
    let values = std::fs::read_to_string(root().join("charts/selfdestruct/values.yaml")).unwrap();
    let target = values
        .split("\nschedule:\n")
        .nth(1)
        .and_then(|s| s.split("  target:").next())
        .unwrap();
    assert!(!target.contains("15 s"), "{target}");
    assert!(target.contains("`refresh` at most"), "{target}");
    assert!(target.contains("autoscaling.x-k8s.io/v1beta1"), "{target}");
}

/// The objects a rendered Role may get and patch, as `kind/name`.
fn scaled_by(role: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let kind = match rule["resources"][0].as_str() {
            Some("statefulsets/scale") => "statefulset",
            Some("capacitybuffers") => "capacitybuffer",
            _ => continue,
        };
        assert_eq!(rule["verbs"], json!(["get", "patch"]), "{rule}");
        for name in rule["resourceNames"].as_array().expect("resourceNames") {
            out.push(format!("{kind}/{}", name.as_str().unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn several_targets_render_one_role_naming_exactly_them() {
    let schedule = json!({
        "enabled": true,
        "baseline": "* = 2",
        "calendar": {"url": "https://calendar.example.edu/classes.ics"},
        "targets": [
            {"name": "gpu", "baseline": "* = 0", "max": 8},
            {"name": "big", "target": "capacitybuffer/big-room", "min": 1},
        ],
        "warmBy": {"images": ["quay.io/jupyter/scipy-notebook:2025-01-06"]},
        "metrics": {"port": 9090},
    });
    let sets = "placeholders=[{\"name\": \"placeholder\"}, {\"name\": \"gpu\"}]";
    let render_with = |schedule: &Value| {
        let out = render_args(&[
            "--set-json",
            sets,
            "--set-json",
            &format!("schedule={schedule}"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        out.status
            .success()
            .then(|| serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap())
            .ok_or(err)
    };
    let docs = render_with(&schedule).unwrap();
    let role = find(&docs, "Role");
    let scaled = [
        "capacitybuffer/big-room",
        "statefulset/hub-gpu",
        "statefulset/hub-placeholder",
    ];
    assert_eq!(scaled_by(role), scaled);
    // The mode scales exactly what the Role names.
    let d = find(&docs, "Deployment");
    let env = env_of(d);
    mode_accepts(&env).unwrap();
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let named: Vec<Value> = serde_json::from_str(&get("SELFDESTRUCT_SCHEDULE_TARGETS")).unwrap();
    let mut mode: Vec<String> = named
        .iter()
        .map(|t| t["target"].as_str().unwrap().to_string())
        .collect();
    mode.push(get("SELFDESTRUCT_SCHEDULE_TARGET"));
    mode.sort();
    assert_eq!(mode, scaled);
    assert_eq!(
        named[0],
        json!({"name": "gpu", "target": "statefulset/hub-gpu", "baseline": "* = 0", "min": 0, "max": 8})
    );
    assert_eq!(
        get("SELFDESTRUCT_SCHEDULE_WARM_IMAGES"),
        "quay.io/jupyter/scipy-notebook:2025-01-06"
    );
    assert_eq!(get("SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS"), ":9090");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"name": "metrics", "containerPort": 9090}])
    );
    // The warm-by report's reads: pods in the namespace, and get (only) on nodes, bound
    // to the schedule's account.
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .contains(&json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}))
    );
    let nodes = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRole" && d["metadata"]["name"] == "hub-schedule-nodes.hub-ns"
        })
        .expect("the nodes' ClusterRole");
    assert_eq!(
        nodes["rules"],
        json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}])
    );
    let binding = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding"
                && d["metadata"]["name"] == "hub-schedule-nodes.hub-ns"
        })
        .unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "hub-schedule", "namespace": "hub-ns"}])
    );
    // Both optional: without them, neither.
    let mut off = schedule.clone();
    off["warmBy"]["readPods"] = json!(false);
    off["warmBy"]["readNodes"] = json!(false);
    let docs = render_with(&off).unwrap();
    assert_eq!(
        find(&docs, "Role")["rules"].as_array().unwrap().len(),
        3,
        "scale, buffers, events"
    );
    assert!(!docs.iter().any(
        |d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "hub-schedule-nodes.hub-ns"
    ));
    // Refused: a named target with no set of that name, an object scaled twice, min > max, a
    // name that is no DNS label.
    for (targets, says) in [
        (
            json!([{"name": "cpu"}]),
            "no placeholder set of this release is named \"cpu\"",
        ),
        (
            json!([{"name": "gpu", "target": "statefulset/hub-placeholder"}]),
            "statefulset/hub-placeholder is scaled by another target already",
        ),
        (
            json!([{"name": "gpu", "min": 9, "max": 8}]),
            "min (9) must be at most max (8)",
        ),
        (json!([{"name": "GPU"}]), "/schedule/targets/0/name"),
        (
            json!([{"name": "gpu", "baseline": "Mon 18:00-08:00 = 3"}]),
            "must end after it starts",
        ),
    ] {
        let mut bad = schedule.clone();
        bad["targets"] = targets.clone();
        let err = render_with(&bad).expect_err(&targets.to_string());
        assert!(err.contains(says), "{targets}: {err}");
    }
}

#[test]
fn the_preview_reads_the_charts_values_through_the_modes_settings() {
    // As docs/schedule.md runs it in CI: the Deployment's env from `helm template`, the
    // calendar from the repository.
    let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:a\r\n\
               DTSTAMP:20260101T000000Z\r\nSUMMARY:Data 8 lecture\r\n\
               DESCRIPTION:placeholders: 40\\nplaceholders[gpu]: 4\r\n\
               DTSTART;TZID=Europe/Berlin:20260302T090000\r\nDTEND;TZID=Europe/Berlin:20260302T103000\r\n\
               END:VEVENT\r\nEND:VCALENDAR\r\n";
    let schedule = json!({
        "enabled": true,
        "baseline": "Mon-Fri 08:00-18:00 = 12; * = 2",
        "timeZone": "Europe/Berlin",
        "leadTime": "15m",
        "calendar": {"ics": ics},
        "targets": [{"name": "gpu", "max": 3}],
    });
    let sets = "placeholders=[{\"name\": \"placeholder\"}, {\"name\": \"gpu\"}]";
    let out = render_args(&[
        "--set-json",
        sets,
        "--set-json",
        &format!("schedule={schedule}"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let dir =
        std::env::temp_dir().join(format!("selfdestruct-chart-preview-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("calendar.ics");
    std::fs::write(&file, ics).unwrap();
    let preview = Command::new(env!("CARGO_BIN_EXE_selfdestruct-schedule"))
        .args(["preview", "1", "--from", "2026-03-02"])
        .env_clear()
        .envs(env_of(find(&docs, "Deployment")))
        .env("SELFDESTRUCT_SCHEDULE_CALENDAR", &file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&preview.stdout);
    assert!(
        preview.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&preview.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "# the count in force at each change: 1 day(s) from 2026-03-02 Mon 00:00 (Europe/Berlin), lead time 15m",
            "2026-03-02 Mon 00:00       2  statefulset/hub-placeholder  baseline window `* = 2`",
            "2026-03-02 Mon 00:00       0  statefulset/hub-gpu  no baseline window (0)",
            "2026-03-02 Mon 08:00      12  statefulset/hub-placeholder  baseline window `Mon-Fri 08:00-18:00 = 12`",
            "2026-03-02 Mon 08:45      40  statefulset/hub-placeholder  calendar event \"Data 8 lecture\" (Mon 09:00 to 10:30, placeholders: 40), lead time 15m",
            "2026-03-02 Mon 08:45       3  statefulset/hub-gpu  calendar event \"Data 8 lecture\" (Mon 09:00 to 10:30, placeholders[gpu]: 4), lead time 15m, 4 capped at the maximum 3",
            "2026-03-02 Mon 10:30      12  statefulset/hub-placeholder  baseline window `Mon-Fri 08:00-18:00 = 12`",
            "2026-03-02 Mon 10:30       0  statefulset/hub-gpu  no baseline window (0)",
            "2026-03-02 Mon 18:00       2  statefulset/hub-placeholder  baseline window `* = 2`",
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/schedule.md's "`selfdestruct-schedule --help`" section is the binary's `--help`,
/// character for character (the other binaries' sections: tests/chart.rs).
#[test]
fn the_docs_help_is_the_binarys() {
    let doc = std::fs::read_to_string(root().join("docs/schedule.md")).unwrap();
    let shown = doc
        .split("## `selfdestruct-schedule --help`\n\n```\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n").next())
        .expect("docs/schedule.md has a \"`selfdestruct-schedule --help`\" code block");
    let out = Command::new(env!("CARGO_BIN_EXE_selfdestruct-schedule"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let first_difference = shown.lines().zip(help.lines()).find(|(a, b)| a != b);
    assert!(
        shown == help,
        "docs/schedule.md's `selfdestruct-schedule --help` block differs from the binary's \
         (paste `cargo run -q --bin selfdestruct-schedule -- --help` there): {first_difference:?}"
    );
}
