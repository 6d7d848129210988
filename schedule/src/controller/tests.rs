//! Unit tests of the controller (a child module: they see its private items).

use super::*;
use selfdestruct::base::IdentitySettings;

/// A fresh temporary folder for one test (unique within and across test processes).
fn tempdir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "selfdestruct-schedule-unit-{tag}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Runs `f` on a fresh current-thread runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    runtime.expect("runtime").block_on(f)
}

#[test]
fn targets_name_their_url_and_kind() {
    let sts = target("sts/ph").expect("valid").expect("set");
    assert_eq!(sts, Target::StatefulSet("ph".into()));
    assert_eq!(
        sts.url("ns"),
        "/apis/apps/v1/namespaces/ns/statefulsets/ph/scale"
    );
    assert_eq!(sts.to_string(), "statefulset/ph");
    let cb = target("CapacityBuffer/b").expect("valid").expect("set");
    assert_eq!(
        cb.url("ns"),
        "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/ns/capacitybuffers/b"
    );
    assert_eq!(cb.to_string(), "capacitybuffer/b");
    assert_eq!(target(""), Ok(None));
    for bad in ["ph", "deployment/ph", "sts/Not_A_Name"] {
        let e = target(bad).expect_err(bad);
        assert!(e.contains("statefulset/NAME"), "{bad}: {e}");
    }
}

#[test]
fn calendar_sources_are_urls_or_files() {
    let url = |v: &str| match calendar_source(v) {
        Ok(Some(CalendarSource::Url(u))) => u.to_string(),
        other => panic!("{v}: {other:?}"),
    };
    assert_eq!(url("webcal://h.example/c.ics"), "https://h.example/c.ics");
    assert_eq!(url("HTTP://h.example/c.ics"), "http://h.example/c.ics");
    assert_eq!(
        calendar_source("/etc/calendar/c.ics"),
        Ok(Some(CalendarSource::File("/etc/calendar/c.ics".into())))
    );
    assert_eq!(calendar_source(""), Ok(None));
    let e = calendar_source("ftp://h/c.ics").expect_err("ftp");
    assert_eq!(
        e,
        "an http://, https:// or webcal:// URL or a file path, not a ftp:// URL"
    );
    let e = calendar_source("https://exa mple/").expect_err("a space");
    assert!(
        e.starts_with("an http://, https:// or webcal:// URL or a file path ("),
        "{e}"
    );
}

#[test]
fn a_calendar_file_is_read_within_its_bounds() {
    let dir = tempdir("schedule-file");
    let read = |name: &str| {
        let source = CalendarSource::File(dir.join(name));
        block_on(async {
            read_calendar(&source, &https_client(), Duration::from_secs(10), &mut None).await
        })
    };
    std::fs::write(
        dir.join("ok.ics"),
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    assert!(read("ok.ics").is_ok());
    let e = read("missing.ics").expect_err("no file");
    assert!(matches!(e, ReadError::Io(..)), "{e:?}");
    assert!(e.to_string().starts_with("cannot read "), "{e}");
    let filler = format!("X-FILLER:{}\r\n", "a".repeat(1014));
    let huge = "BEGIN:VCALENDAR\r\n".to_string() + &filler.repeat(5000);
    std::fs::write(dir.join("huge.ics"), huge).unwrap();
    let e = read("huge.ics").expect_err("too large");
    assert_eq!(e.to_string(), "longer than 4194304 bytes");
    let e = read("").expect_err("a folder");
    assert!(matches!(e, ReadError::Io(..)), "{e:?}");
}

#[test]
fn an_answer_announcing_more_than_the_cap_is_refused_before_its_body() {
    use std::io::{Read, Write};
    // A server that announces 5 MB, sends a line of it and holds the connection open
    // until the client drops it: without the Content-Length check the read would wait
    // for the rest until its timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\nBEGIN:VCALENDAR\r\n";
        conn.write_all(head.as_bytes()).unwrap();
        while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let source = calendar_source(&format!("http://127.0.0.1:{port}/c.ics"))
        .unwrap()
        .unwrap();
    let timeout = Duration::from_secs(60);
    let e = block_on(async {
        let http = https_client();
        let read = read_calendar(&source, &http, timeout, &mut None).await;
        drop(http);
        read
    })
    .expect_err("too large");
    assert!(matches!(e, ReadError::TooLarge), "{e:?}");
    server.join().unwrap();
}

#[test]
fn a_calendar_urls_secret_is_never_shown() {
    // Google's secret address is its path; a password, its userinfo; a token, its query.
    let secret = "https://me:hunter2@calendar.example.com:8443/calendar/ical/x%40group/private-0123abcd/basic.ics?key=s3cr3t";
    let Ok(Some(source)) = calendar_source(secret) else {
        panic!("a URL")
    };
    assert_eq!(source.to_string(), "https://calendar.example.com:8443/…");
    let uri = secret.parse().unwrap();
    for e in [
        ReadError::Io(redact(&uri), "refused".into()),
        redirect(&uri, "https://other.example/private-0123abcd?key=s3cr3t")
            .map_or_else(|e| e, |u| ReadError::Io(redact(&u), "refused".into())),
        redirect(&uri, "ftp://other.example/private-0123abcd").expect_err("ftp"),
    ] {
        let shown = format!("{e} {e:?}");
        for part in ["hunter2", "private-", "s3cr3t", "ical"] {
            assert!(!shown.contains(part), "{shown}");
        }
    }
}

/// The mode's settings from flags alone (none from this process's environment).
fn settings(args: &[&str]) -> Result<ScheduleSettings, String> {
    use clap::{Args, FromArgMatches};
    let cmd = ScheduleSettings::augment_args(clap::Command::new("schedule"));
    let cmd = cmd.mut_args(|a| a.env(None));
    let argv = std::iter::once("schedule").chain(args.iter().copied());
    let m = cmd.try_get_matches_from(argv).map_err(|e| e.to_string())?;
    ScheduleSettings::from_arg_matches(&m).map_err(|e| e.to_string())
}

fn config(args: &[&str]) -> Result<ScheduleConfig, String> {
    ScheduleConfig::new(&settings(args)?, &IdentitySettings::default()).map_err(|e| e.to_string())
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

#[test]
fn named_targets_are_a_json_list_each_with_its_baseline_and_bounds() {
    let gpu = r#"[{"name": "gpu", "target": "sts/hub-gpu", "baseline": "* = 1", "max": 8}]"#;
    let cfg = config(&["--target=sts/hub", "--baseline=* = 2", "--targets", gpu]).unwrap();
    let got: Vec<(Option<&str>, String, String, u32, u32)> = (cfg.targets.iter())
        .map(|t| {
            let s = &t.schedule;
            (
                t.pool.as_deref(),
                t.target.to_string(),
                s.baseline.to_string(),
                s.min,
                s.max,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (None, "statefulset/hub".into(), "* = 2".into(), 0, 1000),
            (
                Some("gpu"),
                "statefulset/hub-gpu".into(),
                "* = 1".into(),
                0,
                8
            ),
        ]
    );
    // Named targets alone, on the calendar alone.
    let cfg = config(&["--calendar=c.ics", "--targets", gpu]).unwrap();
    assert_eq!(cfg.targets.len(), 1);
    for (targets, why) in [
        (r#"{"name": "gpu"}"#, "a JSON list such as"),
        (
            r#"[{"name": "GPU", "target": "sts/a"}]"#,
            "(target 1 \"GPU\": its name is a DNS label",
        ),
        (
            r#"[{"name": "a", "target": "sts/a"}, {"name": "a", "target": "sts/b"}]"#,
            "(target 2 \"a\": the name is given twice)",
        ),
        (
            r#"[{"name": "a", "target": "deployment/a"}]"#,
            "statefulset/NAME or capacitybuffer/NAME",
        ),
        (
            r#"[{"name": "a", "target": "sts/a", "baseline": "Monday = 3"}]"#,
            "is no day",
        ),
        (
            r#"[{"name": "a", "target": "sts/a", "min": 5, "max": 4}]"#,
            "min 5 is above max 4",
        ),
        (
            r#"[{"name": "a", "target": "sts/a", "max": 100001}]"#,
            "a whole number from 0 to 100000",
        ),
        (
            r#"[{"name": "a", "target": "sts/a", "replicas": 3}]"#,
            "unknown field `replicas`",
        ),
    ] {
        let e = config(&["--target=sts/hub", "--baseline=* = 2", "--targets", targets])
            .expect_err(targets);
        assert!(e.contains(why), "{targets}: {e}");
    }
    for (args, why) in [
        (
            vec![
                "--target=sts/hub",
                "--calendar=c.ics",
                "--targets=[{\"name\": \"a\", \"target\": \"sts/hub\"}]",
            ],
            "another object than the default target's (statefulset/hub)",
        ),
        (
            vec![
                "--baseline=* = 2",
                "--targets=[{\"name\": \"a\", \"target\": \"sts/a\"}]",
            ],
            "nothing to schedule",
        ),
        (
            vec!["--baseline=* = 2"],
            "SELFDESTRUCT_SCHEDULE_TARGET (--target)",
        ),
    ] {
        let e = config(&args).expect_err(&args.join(" "));
        assert!(e.contains(why), "{args:?}: {e}");
    }
}

#[test]
fn an_event_whose_count_is_for_no_target_is_named_with_its_line() {
    let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nSUMMARY:Lab\r\n\
                DESCRIPTION:placeholders: 4\\nplaceholders[gpu]: 2\\nplaceholders[gpus]: 1\r\n\
                DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    let cal = Calendar::parse(text, Tz::UTC).unwrap();
    let gpu = r#"--targets=[{"name": "gpu", "target": "sts/g"}]"#;
    let cfg = config(&["--calendar=c.ics", gpu]).unwrap();
    let got: Vec<String> = unknown_pools(&cal, &cfg.targets)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "calendar line 3: event \"Lab\": placeholders: 4 is for no target: SELFDESTRUCT_SCHEDULE_TARGET is unset",
            "calendar line 3: event \"Lab\": placeholders[gpus]: 1 is for no target: SELFDESTRUCT_SCHEDULE_TARGETS names gpu",
        ]
    );
}

fn lecture(start: &str, count: u32, pool: Option<&str>) -> Occurrence {
    let start = utc(start);
    Occurrence {
        name: "Data 8 lecture".into(),
        pool: pool.map(Into::into),
        count,
        start,
        end: start + TimeDelta::minutes(90),
    }
}

#[test]
fn the_preview_names_each_change_its_cause_and_lead_time() {
    let cfg = config(&[
        "--target=sts/hub",
        "--baseline=Mon-Fri 08:00-18:00 = 12; * = 2",
        "--max=30",
        "--time-zone=Europe/Berlin",
    ])
    .unwrap();
    let t = &cfg.targets[0];
    let o = [lecture("2026-03-02T08:00:00Z", 40, None)];
    let from = utc("2026-03-01T23:00:00Z");
    let lines: Vec<String> = (t
        .schedule
        .changes(None, &o, from, from + TimeDelta::days(1))
        .iter())
    .map(|(at, f)| {
        preview_line(
            Tz::Europe__Berlin,
            Duration::from_secs(600),
            &t.target,
            *at,
            f,
        )
    })
    .collect();
    assert_eq!(
        lines,
        [
            "2026-03-02 Mon 00:00       2  statefulset/hub  baseline window `* = 2`",
            "2026-03-02 Mon 08:00      12  statefulset/hub  baseline window `Mon-Fri 08:00-18:00 = 12`",
            "2026-03-02 Mon 08:50      30  statefulset/hub  calendar event \"Data 8 lecture\" (Mon 09:00 to 10:30, placeholders: 40), lead time 10m, 40 capped at the maximum 30",
            "2026-03-02 Mon 10:30      12  statefulset/hub  baseline window `Mon-Fri 08:00-18:00 = 12`",
            "2026-03-02 Mon 18:00       2  statefulset/hub  baseline window `* = 2`",
        ]
    );
}

fn due(moment: report::Moment, at: &str, asked: u32) -> report::Due {
    report::Due {
        target: 0,
        moment,
        at: utc(at),
        occurrence: lecture("2026-03-02T09:00:00Z", asked, None),
        asked,
    }
}

#[test]
fn the_warm_by_report_names_the_shortfall() {
    use report::{Condition, Measured, Moment, judge};
    let margin = Duration::from_secs(300);
    let judged = |d: &report::Due, m: Measured| {
        let r = judge(d, Tz::UTC, margin, &m);
        (r.met, r.note)
    };
    let start = due(Moment::Start, "2026-03-02T09:00:00Z", 40);
    let pods = |ready, warm| Measured::Pods { ready, warm };
    assert_eq!(
        judged(&start, pods(31, Some(Ok(27)))),
        (
            false,
            "at 09:00 event \"Data 8 lecture\": 31 of 40 placeholders ready, 27 on warm nodes"
                .into()
        )
    );
    assert_eq!(
        judged(&start, pods(40, Some(Ok(40)))),
        (
            true,
            "at 09:00 event \"Data 8 lecture\": 40 of 40 placeholders ready, 40 on warm nodes"
                .into()
        )
    );
    // All ready, not all warm: a shortfall; warm not looked at, or unknown: ready decides.
    assert!(!judged(&start, pods(40, Some(Ok(39)))).0);
    assert_eq!(
        judged(&start, pods(40, None)),
        (
            true,
            "at 09:00 event \"Data 8 lecture\": 40 of 40 placeholders ready".into()
        )
    );
    let (met, note) = judged(
        &start,
        pods(
            40,
            Some(Err("the service account may not get nodes".into())),
        ),
    );
    assert!(met, "{note}");
    assert!(note.ends_with("40 of 40 placeholders ready, on warm nodes: unknown (the service account may not get nodes)"), "{note}");
    let r = judge(&start, Tz::UTC, margin, &pods(31, Some(Ok(27))));
    assert_eq!((r.asked, r.ready, r.warm), (40, Some(31), Some(27)));
    // At the margin, in the schedule's zone.
    let before = due(Moment::Margin, "2026-03-02T08:55:00Z", 40);
    let r = judge(&before, Tz::Europe__Berlin, margin, &pods(12, Some(Ok(12))));
    assert_eq!(
        r.note,
        "at 09:55, 5m before event \"Data 8 lecture\" (10:00): 12 of 40 placeholders ready, 12 on warm nodes"
    );
    // Nothing readable.
    assert_eq!(
        judged(&start, Measured::Unknown("the service account may not list pods".into())),
        (false, "at 09:00 event \"Data 8 lecture\": 40 asked, none known ready: the service account may not list pods".into())
    );
    // A CapacityBuffer: its readyReplicas, else its replicas and conditions.
    let buffer = |ready, replicas, conditions: &[(&str, &str, &str)]| Measured::Buffer {
        ready,
        replicas,
        conditions: (conditions.iter())
            .map(|(t, s, r)| Condition {
                type_: t.to_string(),
                status: s.to_string(),
                reason: r.to_string(),
            })
            .collect(),
    };
    let chunks = due(Moment::Start, "2026-03-02T09:00:00Z", 5);
    assert_eq!(
        judged(&chunks, buffer(Some(3), Some(5), &[])),
        (
            false,
            "at 09:00 event \"Data 8 lecture\": 3 of 5 buffer chunks ready".into()
        )
    );
    let provisioning = [
        ("ReadyForProvisioning", "True", "Ready"),
        ("Provisioning", "True", "Provisioning"),
    ];
    assert_eq!(
        judged(&chunks, buffer(None, Some(5), &provisioning)),
        (true, "at 09:00 event \"Data 8 lecture\": 5 buffer chunks asked, no status.readyReplicas: status.replicas 5, ReadyForProvisioning True, Provisioning True".into())
    );
    assert!(!judged(&chunks, buffer(None, Some(4), &provisioning)).0);
    let (met, note) = judged(
        &chunks,
        buffer(
            None,
            None,
            &[("ReadyForProvisioning", "False", "PodTemplateNotFound")],
        ),
    );
    assert!(!met);
    assert!(
        note.ends_with("status.replicas unset, ReadyForProvisioning False (PodTemplateNotFound)"),
        "{note}"
    );
    let mut quota = provisioning.to_vec();
    quota.push(("LimitedByQuotas", "True", "Quota"));
    assert!(!judged(&chunks, buffer(None, Some(5), &quota)).0);
}

#[test]
fn reports_are_due_at_the_margin_and_at_the_start_once_each() {
    let gpu = r#"--targets=[{"name": "gpu", "target": "sts/g", "baseline": "* = 1"}]"#;
    let cfg = config(&[
        "--target=sts/hub",
        "--baseline=* = 2",
        "--warm-by-margin=5m",
        gpu,
    ])
    .unwrap();
    let o = [
        lecture("2026-03-02T09:00:00Z", 40, None),
        lecture("2026-03-02T09:00:00Z", 4, Some("gpu")),
        lecture("2026-03-02T09:00:00Z", 3, Some("other")),
    ];
    // Started after the margin: the start only.
    let mut r = report::Reports::new(utc("2026-03-02T08:56:00Z"));
    assert_eq!(
        r.next(&cfg, &o, utc("2026-03-02T08:56:00Z")),
        Some(utc("2026-03-02T09:00:00Z"))
    );
    assert_eq!(r.due(&cfg, &o, utc("2026-03-02T08:59:59Z")), []);
    let got: Vec<(usize, report::Moment, u32)> =
        (r.due(&cfg, &o, utc("2026-03-02T09:00:10Z")).iter())
            .map(|d| (d.target, d.moment, d.asked))
            .collect();
    assert_eq!(
        got,
        [
            (0, report::Moment::Start, 40),
            (1, report::Moment::Start, 4)
        ]
    );
    assert_eq!(r.due(&cfg, &o, utc("2026-03-02T09:00:20Z")), []);
    assert_eq!(r.next(&cfg, &o, utc("2026-03-02T09:00:20Z")), None);
    // From before the margin: both, in order; the asked count is the one in force then.
    let mut r = report::Reports::new(utc("2026-03-02T08:00:00Z"));
    assert_eq!(
        r.next(&cfg, &o, utc("2026-03-02T08:00:00Z")),
        Some(utc("2026-03-02T08:55:00Z"))
    );
    let got: Vec<(usize, report::Moment, String)> =
        (r.due(&cfg, &o, utc("2026-03-02T09:30:00Z")).iter())
            .map(|d| (d.target, d.moment, d.at.format("%H:%M").to_string()))
            .collect();
    let (m, s) = (report::Moment::Margin, report::Moment::Start);
    assert_eq!(
        got,
        [
            (0, m, "08:55".into()),
            (1, m, "08:55".into()),
            (0, s, "09:00".into()),
            (1, s, "09:00".into())
        ]
    );
    // A margin of 0: the start only.
    let cfg = config(&["--target=sts/hub", "--baseline=* = 2", "--warm-by-margin=0"]).unwrap();
    let mut r = report::Reports::new(utc("2026-03-02T08:00:00Z"));
    assert_eq!(r.due(&cfg, &o, utc("2026-03-02T09:30:00Z")).len(), 1);
}

#[test]
fn the_metrics_keep_the_last_report_of_each_target_and_moment() {
    use report::{Measured, Moment, judge};
    let mut m = metrics::Metrics::default();
    assert_eq!(m.render(), "");
    let hub = Target::StatefulSet("hub".into());
    m.replicas(&hub, Some(40));
    let start = due(Moment::Start, "2026-03-02T09:00:00Z", 40);
    let r = judge(
        &start,
        Tz::UTC,
        Duration::ZERO,
        &Measured::Pods {
            ready: 31,
            warm: Some(Ok(27)),
        },
    );
    m.report(&hub, &start, &r);
    let margin = due(Moment::Margin, "2026-03-02T08:55:00Z", 40);
    let r = judge(
        &margin,
        Tz::UTC,
        Duration::ZERO,
        &Measured::Unknown("no".into()),
    );
    m.report(&hub, &margin, &r);
    let text = m.render();
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        samples,
        [
            "selfdestruct_schedule_replicas{target=\"statefulset/hub\"} 40",
            "selfdestruct_schedule_warm_by_met{target=\"statefulset/hub\",at=\"margin\"} 0",
            "selfdestruct_schedule_warm_by_met{target=\"statefulset/hub\",at=\"start\"} 0",
            "selfdestruct_schedule_warm_by_asked{target=\"statefulset/hub\",at=\"margin\"} 40",
            "selfdestruct_schedule_warm_by_asked{target=\"statefulset/hub\",at=\"start\"} 40",
            "selfdestruct_schedule_warm_by_ready{target=\"statefulset/hub\",at=\"start\"} 31",
            "selfdestruct_schedule_warm_by_warm{target=\"statefulset/hub\",at=\"start\"} 27",
            "selfdestruct_schedule_warm_by_timestamp_seconds{target=\"statefulset/hub\",at=\"margin\"} 1772441700",
            "selfdestruct_schedule_warm_by_timestamp_seconds{target=\"statefulset/hub\",at=\"start\"} 1772442000",
        ]
    );
    assert!(
        text.contains("# TYPE selfdestruct_schedule_warm_by_met gauge\n"),
        "{text}"
    );
    // Served on GET /metrics, 404 elsewhere.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let shared = Arc::new(Mutex::new(m));
    let ask = move |path: &'static str| {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(address).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        answer
    };
    let (found, missing) = block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        tokio::spawn(metrics::serve(listener, shared));
        let found = tokio::task::spawn_blocking(move || (ask("/metrics"), ask("/"))).await;
        found.unwrap()
    });
    assert!(found.starts_with("HTTP/1.1 200 OK\r\n"), "{found}");
    assert!(found.ends_with(&text), "{found}");
    assert!(
        missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{missing}"
    );
}
