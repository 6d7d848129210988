//! `--arrivals` and `--recommend`: both file formats, bad lines, the origin filter, the seeded
//! minute spreading, and the replica count `--recommend` finds on a trace whose answer is known.

use std::path::{Path, PathBuf};
use std::process::Command;

use selfdestruct_sim::recommend::{Target, recommend};
use selfdestruct_sim::scenario::{
    HOUR, MIN, Peer, Resources, Row, SEC, Scenario, Setup, agent_defaults, standard_rows,
};
use selfdestruct_sim::trace::{DAY, ReadOptions, Trace, TraceError};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/launches-sample.jsonl");

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-replay-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn read(files: &[&Path], opts: &ReadOptions) -> Result<Trace, TraceError> {
    Trace::read(files, opts)
}

fn simulate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_simulate"))
        .args(args)
        .output()
        .expect("runs")
}

/// Every schema version's fields, unknown fields, other statuses and another schema's event.
const ARCHIVE: &str = r#"{"timestamp": "2018-11-03T00:00:00+00:00", "schema": "binderhub.jupyter.org/launch", "version": 1, "provider": "GitHub", "spec": "owner/repo/master", "status": "success"}
{"timestamp": "2018-11-03T00:01:00+00:00", "schema": "binderhub.jupyter.org/launch", "version": 2, "provider": "GitHub", "spec": "a/b/HEAD", "status": "success", "origin": "gke.mybinder.org"}

{"timestamp": "2018-11-03T00:01:00+00:00", "schema": "binderhub.jupyter.org/launch", "version": 3, "provider": "Gist", "spec": "x/y/HEAD", "status": "failure", "origin": "gke.mybinder.org", "ref": "abc"}
{"timestamp": "2018-11-03T12:30:00+00:00", "schema": "binderhub.jupyter.org/launch", "version": 4, "provider": "GitHub", "spec": "a/b/HEAD", "status": "success", "origin": "ovh.mybinder.org", "ref": "abc", "resolved_ref": "abc", "repo": "https://github.com/a/b", "new_field": {"nested": [1, 2]}}
{"schema": "some.other/event", "note": "not a launch"}
{"timestamp": "2018-11-03T23:59:00Z", "schema": "binderhub.jupyter.org/launch", "version": 3, "status": "success", "origin": "gke.mybinder.org"}
"#;

#[test]
fn archives_of_any_version_keep_only_successful_launches() {
    let dir = scratch("versions");
    let f = write(&dir, "events-2018-11-03.jsonl", ARCHIVE);
    let t = read(&[&f], &ReadOptions::default()).expect("reads");
    let s = &t.files[0];
    assert_eq!(
        (s.lines, s.launches, s.not_successful, s.not_launches),
        (7, 4, 1, 1),
        "{s:?}"
    );
    assert_eq!((t.days, s.first_day.as_str()), (1, "2018-11-03"));
    let at: Vec<u64> = t.launches.iter().map(|l| l.at).collect();
    assert_eq!(at, [0, MIN, 12 * HOUR + 30 * MIN, DAY - MIN]);
    assert!(t.launches.iter().all(|l| l.spread && l.session_ms == 0));

    let gke = read(
        &[&f],
        &ReadOptions {
            origin: Some("gke.mybinder.org".into()),
            ..ReadOptions::default()
        },
    )
    .expect("reads");
    // The version-1 event has no origin: it is not gke's.
    assert_eq!(gke.launches.len(), 2);
    assert_eq!(gke.files[0].other_origin, 2);
    let none = read(
        &[&f],
        &ReadOptions {
            origin: Some("nowhere.example".into()),
            ..ReadOptions::default()
        },
    );
    match none {
        Err(TraceError::Empty { why, .. }) => {
            assert!(why.contains("gke.mybinder.org 2"), "{why}");
            assert!(why.contains("ovh.mybinder.org 1"), "{why}");
        }
        other => panic!("an origin without launches is an error: {other:?}"),
    }
}

#[test]
fn csv_with_durations_and_several_files_on_consecutive_days() {
    let dir = scratch("csv");
    let a = write(
        &dir,
        "a.csv",
        "origin,timestamp,duration\nhub,2026-03-02T08:00:00.250+01:00,27m\nhub,2026-03-02T07:10:00Z,\nhub,2026-03-02T09:00:00Z,90\n",
    );
    // Taken on another date: replayed as the next day all the same.
    let b = write(&dir, "b.csv", "timestamp\n2026-05-01T00:00:30Z\n");
    let t = read(&[&a, &b], &ReadOptions::default()).expect("reads");
    assert_eq!(t.days, 2);
    assert_eq!(t.files[1].replayed_from_day, 1);
    let got: Vec<(u64, u32, bool)> = t
        .launches
        .iter()
        .map(|l| (l.at, l.session_ms, l.spread))
        .collect();
    assert_eq!(
        got,
        [
            (7 * HOUR + 250, 27 * 60_000, false),
            (7 * HOUR + 10 * MIN, 0, false),
            (9 * HOUR, 90_000, false),
            (DAY + 30 * SEC, 0, false),
        ]
    );
    // Durations from the file, the scenario's model for the empty cell; no minute spreading.
    let mut sc = Scenario::small();
    t.apply(&mut sc, None);
    assert_eq!(sc.measured, 2 * DAY);
    let arrivals = t.arrivals(&sc, 1);
    let measured: Vec<_> = arrivals.iter().filter(|x| x.at >= sc.warmup).collect();
    assert_eq!(measured.len(), 4);
    assert_eq!(measured[0].at, sc.warmup + 7 * HOUR + 250);
    assert_eq!(measured[0].session, 27 * 60_000);
    assert!(measured[1].session >= MIN && measured[1].session <= sc.session_cap);

    let no_ts = write(&dir, "c.csv", "time,duration\n2026-03-02T08:00:00Z,1m\n");
    let err = read(&[&no_ts], &ReadOptions::default()).expect_err("no timestamp column");
    assert!(err.to_string().contains("no `timestamp` column"), "{err}");
}

/// Issue 46, item 20: two launches 1,000 years apart made one file of 365,244 days, replayed
/// day by day (513 MiB and still running at 40 s). The span is bounded, a year with the files
/// before: the library says so, and the binary exits 2 naming the file and the bound.
#[test]
fn a_replay_of_more_than_a_year_is_refused_naming_the_file() {
    let dir = scratch("span");
    let year = write(
        &dir,
        "year.csv",
        "timestamp\n2025-01-01T00:00:00Z\n2025-12-31T23:00:00Z\n",
    );
    assert_eq!(
        read(&[&year], &ReadOptions::default())
            .expect("a year")
            .days,
        365
    );
    let far = write(
        &dir,
        "far.csv",
        "timestamp\n1026-03-02T08:00:00Z\n2026-03-02T08:00:00Z\n",
    );
    let err = read(&[&far], &ReadOptions::default()).expect_err("1,000 years");
    assert!(
        matches!(err, TraceError::Span { days: 365_244, .. }),
        "{err}"
    );
    // A year, and one day more in the next file.
    let day = write(&dir, "day.csv", "timestamp\n2026-01-01T00:00:00Z\n");
    let err = read(&[&year, &day, &day], &ReadOptions::default()).expect_err("367 days");
    assert!(matches!(err, TraceError::Span { days: 367, .. }), "{err}");

    let out = simulate(&[
        "--arrivals",
        far.to_str().unwrap_or_default(),
        "--only",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("far.csv: launches from 1026-03-02 to 2026-03-02, 365244 days")
            && stderr.contains(&format!("at most {}", selfdestruct_sim::trace::MAX_DAYS)),
        "{stderr}"
    );
}

#[test]
fn a_byte_order_mark_is_no_content_in_json_lines_as_in_csv() {
    let dir = scratch("bom");
    let plain = read(
        &[&write(&dir, "plain.jsonl", ARCHIVE)],
        &ReadOptions::default(),
    )
    .expect("reads");
    // Named .jsonl, and named so that the first character decides the format.
    for name in ["bom.jsonl", "bom-events.log"] {
        let f = write(&dir, name, &format!("\u{feff}{ARCHIVE}"));
        let t = read(&[&f], &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: a BOM is refused: {e}"));
        assert_eq!(t.launches, plain.launches, "{name}");
        assert_eq!(t.files[0].format, plain.files[0].format, "{name}");
    }
    let csv = "timestamp,duration\n2026-03-02T08:00:00Z,27m\n";
    let plain = read(&[&write(&dir, "plain.csv", csv)], &ReadOptions::default()).expect("csv");
    let bom = read(
        &[&write(&dir, "bom.csv", &format!("\u{feff}{csv}"))],
        &ReadOptions::default(),
    )
    .expect("a CSV with a BOM");
    assert_eq!(bom.launches, plain.launches);
}

#[test]
fn a_bad_line_names_file_and_line_unless_skipped() {
    let dir = scratch("bad");
    let good = r#"{"timestamp": "2018-11-03T10:00:00+00:00", "status": "success"}"#;
    let text = format!(
        "{good}\n{good}\n{{\"timestamp\": \"yesterday\", \"status\": \"success\"}}\n{good}\nnot json at all\n{{\"status\": \"success\"}}\n"
    );
    let f = write(&dir, "events.jsonl", &text);
    let err = read(&[&f], &ReadOptions::default()).expect_err("a bad line fails");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}:3: timestamp \"yesterday\"", f.display())),
        "{msg}"
    );
    let skip = ReadOptions {
        skip_bad_lines: true,
        ..ReadOptions::default()
    };
    let t = read(&[&f], &skip).expect("skips");
    assert_eq!((t.launches.len(), t.skipped), (3, 3));
    assert!(t.skipped_examples[1].contains("events.jsonl:5:"), "{t:?}");
    assert!(t.skipped_examples[2].contains(":6: no `timestamp` field"));

    let csv = write(
        &dir,
        "bad.csv",
        "timestamp,duration\n2026-03-02T08:00:00Z,1m\n2026-03-02T08:01:00Z,1m,extra\n2026-03-02T08:02:00Z,ages\n",
    );
    let msg = read(&[&csv], &ReadOptions::default())
        .expect_err("bad record")
        .to_string();
    assert!(
        msg.contains("bad.csv:3: 3 fields, the header has 2"),
        "{msg}"
    );
    let t = read(&[&csv], &skip).expect("skips");
    assert_eq!((t.launches.len(), t.skipped), (1, 2));
    assert!(t.skipped_examples[1].contains("bad.csv:4: duration \"ages\""));

    // Empty, all bad, nothing successful: errors, never an empty day.
    let empty = write(&dir, "empty.jsonl", "");
    let all_bad = write(&dir, "all-bad.jsonl", "{}\n[]\n");
    let failed = write(
        &dir,
        "failed.jsonl",
        r#"{"timestamp": "2018-11-03T10:00:00+00:00", "status": "failure"}"#,
    );
    for f in [&empty, &all_bad, &failed] {
        let err = read(&[f.as_path()], &skip).expect_err("no launches");
        assert!(
            matches!(err, TraceError::Empty { .. }),
            "{}: {err}",
            f.display()
        );
    }

    // The binary: exit 2 with file:line; with --skip-bad-lines, the count at the end.
    let out = simulate(&[
        "--arrivals",
        f.to_str().unwrap_or_default(),
        "--only",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("events.jsonl:3:"), "{stderr}");
    let out = simulate(&[
        "--arrivals",
        f.to_str().unwrap_or_default(),
        "--skip-bad-lines",
        "--only",
        "none",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped 3 bad lines"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("3 launches replayed"), "{stdout}");
    assert!(stdout.contains("3 bad lines skipped"), "{stdout}");
}

#[test]
fn minute_spreading_is_seeded() {
    let t = read(&[Path::new(SAMPLE)], &ReadOptions::default()).expect("the sample reads");
    let mut sc = Scenario::small();
    t.apply(&mut sc, None);
    let a = t.arrivals(&sc, 7);
    let b = t.arrivals(&sc, 7);
    let c = t.arrivals(&sc, 8);
    assert_eq!(a, b, "same seed, same arrivals");
    assert_eq!(a.len(), c.len());
    let a_times: Vec<u64> = a.iter().map(|x| x.at).collect();
    let c_times: Vec<u64> = c.iter().map(|x| x.at).collect();
    assert_ne!(a_times, c_times, "another seed spreads differently");
    // Spread within the minute: every arrival stays in its launch's minute, and the seconds are
    // spread over it, not stacked at :00.
    let measured: Vec<u64> = a
        .iter()
        .map(|x| x.at)
        .filter(|&at| at >= sc.warmup)
        .map(|at| at - sc.warmup)
        .collect();
    let minutes: Vec<u64> = t.launches.iter().map(|l| l.at / MIN).collect();
    let mut spread_minutes: Vec<u64> = measured.iter().map(|at| at / MIN).collect();
    spread_minutes.sort_unstable();
    assert_eq!(spread_minutes, minutes);
    let at_zero = measured.iter().filter(|at| *at % MIN < SEC).count();
    assert!(
        at_zero * 10 < measured.len(),
        "{at_zero} of {}",
        measured.len()
    );
    let late = measured.iter().filter(|at| *at % MIN >= 30 * SEC).count();
    let half = measured.len() / 2;
    assert!(
        late.abs_diff(half) * 5 < half,
        "{late} of {}",
        measured.len()
    );
    // The warm-up replays the end of the day.
    let warm = a.iter().filter(|x| x.at < sc.warmup).count();
    let tail = t
        .launches
        .iter()
        .filter(|l| l.at >= DAY - sc.warmup)
        .count();
    assert_eq!(warm, tail);
}

#[test]
fn the_sample_says_it_is_synthetic_and_filters_by_origin() {
    let head = std::fs::read_to_string(SAMPLE).expect("sample");
    let first = head.lines().next().unwrap_or_default();
    assert!(first.contains("SYNTHETIC") && first.contains("not real launches"));
    let all = read(&[Path::new(SAMPLE)], &ReadOptions::default()).expect("reads");
    let gesis = read(
        &[Path::new(SAMPLE)],
        &ReadOptions {
            origin: Some("gesis.mybinder.org".into()),
            ..ReadOptions::default()
        },
    )
    .expect("reads");
    assert!(gesis.launches.len() * 4 < all.launches.len());
    assert!(!gesis.launches.is_empty());
    assert_eq!(
        gesis.launches.len() as u64 + gesis.files[0].other_origin,
        all.launches.len() as u64
    );
    let out = simulate(&[
        "--arrivals",
        SAMPLE,
        "--origin",
        "gesis.mybinder.org",
        "--scenario",
        "small",
        "--only",
        "static",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        doc["scenario"]["load"]["launches"].as_u64(),
        Some(gesis.launches.len() as u64)
    );
    assert_eq!(
        doc["scenario"]["load"]["origin"].as_str(),
        Some("gesis.mybinder.org")
    );
}

#[test]
fn recommend_prints_a_table_the_manifest_line_and_json() {
    let args = [
        "--arrivals",
        SAMPLE,
        "--scenario",
        "small",
        "--recommend",
        "--only",
        "configured",
        "--sweep-replicas",
        "0..40",
        "--seeds",
        "2",
    ];
    let out = simulate(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no user waits for room"), "{text}");
    // Progress on stderr, a line per count run.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("simulate: recommend: none with 0 replicas:")
            && stderr.contains("simulate: recommend: configured with "),
        "{stderr}"
    );
    let line = text
        .lines()
        .skip_while(|l| !l.starts_with("manifests/statefulset.yaml"))
        .nth(1)
        .unwrap_or_default();
    let n: u32 = line
        .trim()
        .strip_prefix("replicas: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a replicas line: {text}"));
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = simulate(&json_args);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["manifest_line"].as_str(), Some(line.trim()));
    let configured = &doc["policies"][0];
    assert_eq!(configured["policy"].as_str(), Some("configured"));
    assert_eq!(configured["replicas"].as_u64(), Some(u64::from(n)));
    assert_eq!(configured["results"]["delayed"].as_u64(), Some(0));
    assert!(configured["below"]["delayed"].as_u64().unwrap_or(0) > 0);

    let out = simulate(&["--recommend", "--target-cold", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    let out = simulate(&["--target-wait", "1"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--target-wait needs --recommend"
    );
    let out = simulate(&["--arrivals", SAMPLE, "--hours", "2"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a replay's length is the files'"
    );
}

/// Launches every 10 s (at :05, :15, ...) for 3 hours, sessions longer than the run.
fn constant_rate_csv(dir: &Path) -> PathBuf {
    let mut text = String::from("timestamp,duration\n");
    for i in 0..(3 * 360) {
        let s = 5 + 10 * i;
        text.push_str(&format!(
            "2026-02-02T{:02}:{:02}:{:02}Z,30h\n",
            s / 3600,
            s / 60 % 60,
            s % 60
        ));
    }
    write(dir, "constant.csv", &text)
}

#[test]
fn recommend_finds_the_knee_of_a_constant_launch_rate() {
    let dir = scratch("knee");
    let t = read(&[&constant_rate_csv(&dir)], &ReadOptions::default()).expect("reads");
    let mut sc = Scenario::small();
    sc.node = Resources::new(25.0, 50.0);
    sc.user = Resources::new(0.5, 1.0); // 50 pods a node
    sc.node_ready = 5 * MIN;
    sc.image_pull = MIN;
    sc.delay_spread = 0.0;
    sc.warmup = 0;
    sc.autoscaler.min_nodes = 1;
    sc.autoscaler.max_nodes = 40;
    t.apply(&mut sc, None);
    let configured = Setup {
        name: "configured".into(),
        row: Row::Configured,
        replicas: 0,
        policy: agent_defaults(),
        gate: false,
        peer: Peer::Selfdestruct,
        pin: false,
    };
    let rows: Vec<Setup> = standard_rows(&sc, configured)
        .into_iter()
        .filter(|r| ["static", "new-node", "gate"].contains(&r.name.as_str()))
        .collect();
    let seeds = [1];
    let arrivals = vec![t.arrivals(&sc, 1)];
    let target = Target {
        max_waiting: Some(0),
        max_cold_pct: None,
    };
    let rec = recommend(
        &sc,
        &rows,
        (0, 48),
        &seeds,
        &arrivals,
        target,
        true,
        &|_: &str| {},
    );
    let got = |name: &str| {
        let f = rec
            .policies
            .iter()
            .find(|f| f.policy == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert!(
            f.results.violations.is_empty(),
            "{:?}",
            f.results.violations
        );
        (f.replicas.unwrap_or_else(|| panic!("{name}: not met")), f)
    };
    // Users arrive at lambda = 0.1/s; the cluster fills, and each time its free room runs out a
    // user preempts a placeholder. The placeholder is re-created 2 s later, Pending; the
    // autoscaler's next scan (every 10 s) asks for a node, Ready T = 300 s later; only then do
    // users get room again. Every user arriving from the first preemption until that node is
    // Ready needs a placeholder: lambda x T = 30 (the rule of thumb), plus those arriving during
    // the re-creation and the wait for the scan, lambda x (2 s + 0..10 s) = 0.2..1.2. So the
    // knee is at 30..=32 (31 with this phase: preemption at :x5, Pending at :x7, scan at :x0,
    // Ready 305 s after the preemption: 31 launches), whatever the number of cycles.
    let (st, st_found) = got("static");
    assert!(
        (30..=32).contains(&st),
        "static: {st} ({:?})",
        st_found.tried
    );
    assert_eq!(st_found.results.delayed, 0);
    let below = st_found.below.as_ref().expect("one fewer was run");
    assert!(below.delayed > 0, "one fewer placeholder lets users wait");
    // Moving to new nodes changes nothing here: the moved placeholders are all Pending when
    // the node comes, so the same count.
    let (nn, _) = got("new-node");
    assert!(nn.abs_diff(st) <= 1, "new-node {nn}, static {st}");
    // The gate keeps users off the new node until its image is pulled (60 s) and the taint is
    // gone (0-10 s later): lambda x (60..70 s) = 6..7 more users need a placeholder.
    let (g, _) = got("gate");
    assert!((st + 5..=st + 8).contains(&g), "gate {g}, static {st}");
    eprintln!(
        "knee: static {st} new-node {nn} gate {g} tried {:?}",
        st_found.tried
    );
    // The search ran far fewer counts than the range holds.
    assert!(st_found.tried.len() <= 9, "{:?}", st_found.tried);
}
