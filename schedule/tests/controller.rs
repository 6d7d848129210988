//! `selfdestruct-schedule`, the real binary, against two loopback stubs local to this
//! test (the fake API server serves no `scale` subresource and does not grow): an API
//! stub that serves one StatefulSet's `scale` and takes Events, and a calendar server
//! that answers well, answers 500, hangs, sends 100 MB, or sends a malformed calendar.
//! The replicas follow the calendar; every bad answer keeps the last good schedule; the
//! memory stays bounded (VmHWM printed); a bad setting exits 2 naming it.

#[allow(dead_code)]
#[path = "../../tests/common/process.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

/// One HTTP/1.1 request as the stub reads it.
struct Req {
    method: String,
    path: String,
    body: Vec<u8>,
}

/// Reads one request from a kept-alive connection; `None` at its end.
fn read_req(r: &mut BufReader<TcpStream>) -> Option<Req> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut len = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Req { method, path, body })
}

fn respond(s: &mut TcpStream, code: u16, body: &str) -> std::io::Result<()> {
    write!(
        s,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Serves each connection of `listener` on its own thread with `handle`.
fn serve(listener: TcpListener, handle: impl Fn(TcpStream) + Send + Sync + 'static) {
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let h = Arc::clone(&handle);
            std::thread::spawn(move || h(s));
        }
    });
}

/// The API stub: statefulset `ph`'s scale in namespace `ns`, and Events.
struct Api {
    url: String,
    replicas: Arc<AtomicU32>,
    patches: Arc<AtomicUsize>,
    events: Arc<Mutex<Vec<String>>>,
}

fn api() -> Api {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let replicas = Arc::new(AtomicU32::new(0));
    let patches = Arc::new(AtomicUsize::new(0));
    let events = Arc::new(Mutex::new(Vec::new()));
    let (r, patched, e) = (replicas.clone(), patches.clone(), events.clone());
    serve(l, move |s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut s = s;
        while let Some(req) = read_req(&mut reader) {
            let scale_path = "/apis/apps/v1/namespaces/ns/statefulsets/ph/scale";
            let scale = |n: u32| {
                format!(
                    r#"{{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{{"name":"ph","namespace":"ns","uid":"u-1"}},"spec":{{"replicas":{n}}}}}"#
                )
            };
            let ok = match (req.method.as_str(), req.path.as_str()) {
                ("GET", p) if p.starts_with(scale_path) => {
                    respond(&mut s, 200, &scale(r.load(Ordering::SeqCst)))
                }
                ("PATCH", p) if p.starts_with(scale_path) => {
                    let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
                    let n = v["spec"]["replicas"].as_u64().unwrap() as u32;
                    r.store(n, Ordering::SeqCst);
                    patched.fetch_add(1, Ordering::SeqCst);
                    respond(&mut s, 200, &scale(n))
                }
                (_, path) if path.contains("/events") => {
                    e.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&req.body).into_owned());
                    respond(&mut s, 201, &String::from_utf8_lossy(&req.body))
                }
                _ => respond(
                    &mut s,
                    404,
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
                ),
            };
            if ok.is_err() {
                return;
            }
        }
    });
    Api {
        url,
        replicas,
        patches,
        events,
    }
}

/// What the calendar server answers.
#[derive(Clone)]
enum Answer {
    Calendar(String),
    Status500,
    Hang,
    Huge,
    /// Headers, then a byte a second until the client hangs up.
    Drip,
}

/// The calendar server: answers each request as `answer` says now; counts requests.
struct CalendarServer {
    url: String,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<AtomicUsize>,
}

fn calendar_server(first: Answer) -> CalendarServer {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/class.ics", l.local_addr().unwrap());
    let answer = Arc::new(Mutex::new(first));
    let requests = Arc::new(AtomicUsize::new(0));
    let (a, n) = (answer.clone(), requests.clone());
    serve(l, move |s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut s = s;
        while read_req(&mut reader).is_some() {
            n.fetch_add(1, Ordering::SeqCst);
            let answer = a.lock().unwrap().clone();
            let ok = match answer {
                Answer::Calendar(text) => write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/calendar\r\nContent-Length: {}\r\n\r\n{text}",
                    text.len()
                ),
                Answer::Status500 => respond(&mut s, 500, "oops"),
                Answer::Hang => {
                    // Headers, then nothing: the read must give up on its own.
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nBEGIN:");
                    std::thread::sleep(Duration::from_secs(600));
                    return;
                }
                Answer::Drip => {
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
                    while s.write_all(b"B").and_then(|()| s.flush()).is_ok() {
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    return;
                }
                Answer::Huge => {
                    // 100 MB without a Content-Length, until the client hangs up.
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nBEGIN:VCALENDAR\r\n"
                    );
                    let chunk = "X-FILLER:".to_string() + &"a".repeat(1014) + "\r\n";
                    for _ in 0..(100 << 10) {
                        if s.write_all(chunk.as_bytes()).is_err() {
                            break;
                        }
                    }
                    return;
                }
            };
            if ok.is_err() {
                return;
            }
        }
    });
    CalendarServer {
        url,
        answer,
        requests,
    }
}

/// A calendar with one event running now (from a minute ago, for an hour) asking for `n`.
fn class_now(n: u32, summary: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let fmt = |t: i64| {
        selfdestruct_schedule::chrono::DateTime::from_timestamp(t, 0)
            .unwrap()
            .format("%Y%m%dT%H%M%SZ")
            .to_string()
    };
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:lab\r\n\
         DTSTAMP:20260101T000000Z\r\nSUMMARY:{summary}\r\nDESCRIPTION:placeholders: {n}\r\n\
         DTSTART:{}\r\nDTEND:{}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        fmt(now - 60),
        fmt(now + 3600)
    )
}

/// A shared calendar just under the 4 MiB read bound: events without a count, and classes
/// running now with one (the largest `n`), their text just under the 128 KiB bound.
fn shared_calendar(n: u32) -> String {
    shared_calendar_with(n, |_| "")
}

/// [`shared_calendar`], the class `k` with the recurrence rule `rule(k)`.
fn shared_calendar_with(n: u32, rule: impl Fn(usize) -> &'static str) -> String {
    let class = class_now(n, "Class");
    let (head, rest) = class.split_once("BEGIN:VEVENT").unwrap();
    let event = format!("BEGIN:VEVENT{}", rest.trim_end_matches("END:VCALENDAR\r\n"));
    let mut events = String::new();
    let mut k = 0;
    while events.len() + event.len() < 120 << 10 {
        let count = if k == 0 { n } else { 1 + k % n };
        let rule = match rule(k as usize) {
            "" => String::new(),
            r => format!("{r}\r\n"),
        };
        events.push_str(
            &event
                .replace("UID:lab", &format!("UID:class-{k}"))
                .replace(
                    &format!("placeholders: {n}"),
                    &format!("placeholders: {count}"),
                )
                .replace("DTSTART:", &format!("{rule}DTSTART:")),
        );
        k += 1;
    }
    let seminar = "BEGIN:VEVENT\r\nUID:seminar\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:Seminar\r\n\
                   DESCRIPTION:a seminar of the department with coffee and a long text to fill the line\r\n\
                   DTSTART:20260302T100000Z\r\nDTEND:20260302T110000Z\r\nEND:VEVENT\r\n";
    let mut text = head.to_string();
    while text.len() + seminar.len() + events.len() + 64 < (4 << 20) - (64 << 10) {
        text.push_str(seminar);
    }
    text.push_str(&events);
    text.push_str("END:VCALENDAR\r\n");
    text
}

fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The CPU time of process `pid` so far, user and system, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    tick(11) + tick(12)
}

fn start(api: &Api, calendar: &str, home: &std::path::Path) -> Proc {
    start_with(api, calendar, home, &[])
}

fn start_with(api: &Api, calendar: &str, home: &std::path::Path, more: &[(&str, &str)]) -> Proc {
    let kubeconfig = home.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_with_user(&api.url, "token: t", "ns"),
    )
    .unwrap();
    let k = kubeconfig.to_str().unwrap().to_string();
    let mut env = vec![
        ("KUBECONFIG", k.as_str()),
        ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph"),
        ("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2"),
        ("SELFDESTRUCT_SCHEDULE_CALENDAR", calendar),
        ("SELFDESTRUCT_SCHEDULE_REFRESH", "1s"),
        ("SELFDESTRUCT_SCHEDULE_TICK", "1s"),
        ("SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", "2s"),
    ];
    env.extend_from_slice(more);
    // SELFDESTRUCT_SCHEDULE_TEST_BIN: another build of the binary (the release build, for
    // the memory figure this test prints).
    Proc::spawn(command(&bin(), &[], &env, home))
}

/// The binary under test: `SELFDESTRUCT_SCHEDULE_TEST_BIN`, another build of it (the
/// release build, for the memory figure this test prints), else this build's.
fn bin() -> String {
    std::env::var("SELFDESTRUCT_SCHEDULE_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_selfdestruct-schedule").into())
}

/// Runs the binary to completion and returns (exit code, combined output).
fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    run_program_to_exit(&bin(), args, env)
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn bad_calendar_answers_keep_the_last_schedule_and_memory_bounded() {
    let api = api();
    let cal = calendar_server(Answer::Calendar(class_now(7, "Lab 1")));
    let home = tempdir("schedule");
    let mut p = start(&api, &cal.url, &home);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 7),
        "replicas never reached the event's 7:\n{}",
        p.log()
    );
    assert!(
        wait_until(WAIT, || api
            .events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("-> 7")
                && e.contains("Lab 1")
                && e.contains("StatefulSet"))),
        "no Event naming the calendar event: {:?}",
        api.events.lock().unwrap()
    );
    let patches = api.patches.load(Ordering::SeqCst);
    let rss_before = vm(p.pid(), "VmRSS:");
    let (anon_before, file_before) = (vm(p.pid(), "RssAnon:"), vm(p.pid(), "RssFile:"));

    // Each bad answer, in turn: logged, retried, the replicas held.
    let bad_at = |answer: Answer, log: &str, held: u32| {
        let seen = p.count_log(log);
        let asked = cal.requests.load(Ordering::SeqCst);
        *cal.answer.lock().unwrap() = answer;
        assert!(
            wait_until(WAIT, || p.count_log(log) >= seen + 2
                && cal.requests.load(Ordering::SeqCst) >= asked + 2),
            "no {log:?} twice:\n{}",
            p.log()
        );
        assert_eq!(api.replicas.load(Ordering::SeqCst), held, "{}", p.log());
    };
    let bad = |answer: Answer, log: &str| bad_at(answer, log, 7);
    bad(Answer::Status500, "the server answered HTTP 500");
    bad(Answer::Hang, "no complete answer within 2s");
    bad(Answer::Huge, "longer than 4194304 bytes");
    let peak = vm(p.pid(), "VmHWM:");
    bad(
        Answer::Calendar("<html>502 Bad Gateway</html>".into()),
        "no BEGIN:VCALENDAR",
    );
    assert!(p.log().contains("keeping the last good calendar"));
    assert_eq!(
        api.patches.load(Ordering::SeqCst),
        patches,
        "a bad calendar changed the replicas"
    );
    // A readable calendar whose one event is bad: that event is skipped with its line and
    // reason, the others (none) count: the baseline.
    *cal.answer.lock().unwrap() =
        Answer::Calendar(class_now(7, "Lab 1").replace("placeholders: 7", "placeholders: lots"));
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 2),
        "{}",
        p.log()
    );
    assert!(
        p.log().contains("calendar event skipped")
            && p.log().contains("line 8")
            && p.log().contains("not followed by a whole number"),
        "the skip names no line and reason:\n{}",
        p.log()
    );
    bad_at(Answer::Status500, "the server answered HTTP 500", 2);
    println!(
        "schedule mode memory: VmRSS {rss_before} KiB after start-up (RssAnon {anon_before}, \
         RssFile {file_before}), VmHWM {peak} KiB after 100 MB were offered (limit 4 MiB), \
         VmRSS {} KiB (RssAnon {}) after the bad answers",
        vm(p.pid(), "VmRSS:"),
        vm(p.pid(), "RssAnon:")
    );
    assert!(
        peak < 40 << 10,
        "VmHWM {peak} KiB: the 100 MB answer was not cut short"
    );

    // A good calendar again: followed, and said (issue 46 item 21: recovery was silent).
    *cal.answer.lock().unwrap() = Answer::Calendar(class_now(9, "Lab 2"));
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 9),
        "{}",
        p.log()
    );
    assert!(p.wait_for_log("calendar read again", WAIT), "{}", p.log());
    // A shared calendar near the read bound (4 MiB), its events with a count near theirs
    // (128 KiB): followed, and the memory figure at its largest legitimate input.
    let shared = shared_calendar(11);
    let size = shared.len();
    *cal.answer.lock().unwrap() = Answer::Calendar(shared);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 11),
        "{}",
        p.log()
    );
    println!(
        "schedule mode memory: VmHWM {} KiB after a {size}-byte shared calendar (its events \
         with a count near the 128 KiB bound), VmRSS {} KiB (RssAnon {})",
        vm(p.pid(), "VmHWM:"),
        vm(p.pid(), "VmRSS:"),
        vm(p.pid(), "RssAnon:")
    );
    // The same at the bounds with the worst rules: every second (its span cut at 50,000
    // occurrences held), every minute, or never in a form the parse cannot see (stepped
    // through to rrule's loop limit, the expansion cut at its 2 s budget).
    let worst = [
        "RRULE:FREQ=SECONDLY",
        "RRULE:FREQ=MINUTELY",
        "RRULE:FREQ=DAILY;BYSETPOS=2",
    ];
    let hostile = shared_calendar_with(13, |k| worst[k % 3]);
    let (size, cpu) = (hostile.len(), cpu_ticks(p.pid()));
    *cal.answer.lock().unwrap() = Answer::Calendar(hostile);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 13),
        "{}",
        p.log()
    );
    println!(
        "schedule mode at the bounds: VmHWM {} KiB, {:.2} s of CPU to read, parse and expand \
         a {size}-byte calendar whose 128 KiB of events with a count each occur every second, \
         every minute or never (and the 1 s re-reads of it till then), VmRSS {} KiB after",
        vm(p.pid(), "VmHWM:"),
        (cpu_ticks(p.pid()) - cpu) as f64 / 100.0,
        vm(p.pid(), "VmRSS:"),
    );
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
}

#[test]
fn unreachable_calendar_at_start_runs_on_the_baseline() {
    let api = api();
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    // Its secret (a password, a `private-` path, a token) is never logged.
    let url = format!(
        "http://me:hunter2@{}/calendar/private-0123abcd/basic.ics?key=s3cr3t",
        closed.local_addr().unwrap()
    );
    drop(closed);
    let home = tempdir("schedule-unreachable");
    let mut p = start_with(&api, &url, &home, &[("SELFDESTRUCT_LOG_FORMAT", "json")]);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 2),
        "{}",
        p.log()
    );
    assert!(
        p.wait_for_log("running on the baseline alone", WAIT),
        "{}",
        p.log()
    );
    assert!(
        wait_until(WAIT, || api
            .events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("baseline window `* = 2`"))),
        "{:?}",
        api.events.lock().unwrap()
    );
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    for secret in ["hunter2", "private-", "s3cr3t"] {
        assert!(!p.log().contains(secret), "{secret} logged:\n{}", p.log());
    }
    // Issue 46 item 21: the replicas before are a JSON number, not `"Some(0)"`.
    let set = p
        .log()
        .lines()
        .find(|l| l.contains("replicas set"))
        .map(str::to_string);
    let set: serde_json::Value = serde_json::from_str(&set.unwrap_or_default()).unwrap();
    assert_eq!(set["from"], 0, "{set}");
}

#[test]
fn bad_settings_exit_2_naming_the_variable() {
    for (env, var) in [
        (
            vec![("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2")],
            "SELFDESTRUCT_SCHEDULE_TARGET",
        ),
        (
            vec![
                ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph"),
                ("SELFDESTRUCT_SCHEDULE_BASELINE", "Mon-Fri 18:00-08:00 = 3"),
            ],
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
        (
            vec![
                ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph"),
                ("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2"),
                ("SELFDESTRUCT_SCHEDULE_TIME_ZONE", "Europe/Atlantis"),
            ],
            "SELFDESTRUCT_SCHEDULE_TIME_ZONE",
        ),
        (
            vec![
                ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph"),
                ("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2"),
                ("SELFDESTRUCT_SCHEDULE_MIN", "9"),
                ("SELFDESTRUCT_SCHEDULE_MAX", "3"),
            ],
            "SELFDESTRUCT_SCHEDULE_MIN",
        ),
        (
            vec![("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph")],
            "SELFDESTRUCT_SCHEDULE_BASELINE",
        ),
    ] {
        let mut args = vec![("SELFDESTRUCT_LOG_LEVEL", "info")];
        args.extend(env);
        let (code, out) = run_to_exit(&[], &args);
        assert_eq!(code, Some(2), "{args:?}: {out}");
        assert!(out.contains(var), "{args:?}: {out}");
    }
    // An agent setting is none of the schedule's business.
    let home = tempdir("schedule-agent-setting");
    let mut p = Proc::spawn(command(
        &bin(),
        &[],
        &[
            ("SELFDESTRUCT_MODE", "bogus"),
            ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/ph"),
            ("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2"),
        ],
        &home,
    ));
    assert!(p.wait_for_log("no API access", WAIT), "{}", p.log());
    assert_eq!(p.terminate().0.and_then(|s| s.code()), Some(0));
}

/// A TLS front on a free port forwarding each connection to `backend`, with a
/// self-signed certificate for 127.0.0.1; returns the port and the certificate's PEM.
fn tls_front(backend: std::net::SocketAddr) -> (u16, String) {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let key: PrivateKeyDer<'static> =
        PrivatePkcs8KeyDer::from(c.signing_key.serialize_der()).into();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![c.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    (port, c.cert.pem())
}

#[test]
fn an_https_calendar_is_read_and_its_certificate_checked() {
    let api = api();
    let cal = calendar_server(Answer::Calendar(class_now(5, "Seminar")));
    let backend = cal
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (port, pem) = tls_front(backend);
    let url = format!("https://127.0.0.1:{port}/class.ics");
    // Not trusted: refused, the baseline holds.
    let home = tempdir("schedule-https-untrusted");
    let mut p = start(&api, &url, &home);
    assert!(
        p.wait_for_log("cannot read the calendar", WAIT),
        "{}",
        p.log()
    );
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 2),
        "{}",
        p.log()
    );
    assert_eq!(p.terminate().0.and_then(|s| s.code()), Some(0));
    // Trusted through SSL_CERT_FILE (the system's roots, as rustls-native-certs reads them).
    let home = tempdir("schedule-https");
    let ca = home.join("ca.pem");
    std::fs::write(&ca, pem).unwrap();
    let ca = ca.to_str().unwrap().to_string();
    let mut p = start_with(&api, &url, &home, &[("SSL_CERT_FILE", &ca)]);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 5),
        "{}",
        p.log()
    );
    assert_eq!(p.terminate().0.and_then(|s| s.code()), Some(0));
}

#[test]
fn the_baseline_is_applied_at_once_while_a_read_drips() {
    // Issue 46 item 15: a server sending a byte a second held the first count back for the
    // read's whole timeout (30 s).
    let api = api();
    let cal = calendar_server(Answer::Drip);
    let home = tempdir("schedule-drip");
    let timeout = [("SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", "10m")];
    let mut p = start_with(&api, &cal.url, &home, &timeout);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 2),
        "the baseline waited for the read:\n{}",
        p.log()
    );
    assert!(
        wait_until(WAIT, || cal.requests.load(Ordering::SeqCst) == 1),
        "{}",
        p.log()
    );
    assert!(!p.log().contains("calendar read"), "{}", p.log());
    let (status, took) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
    println!("SIGTERM to exit with a read dripping: {took:?}");
    // Replicas above the baseline at start (a restart during an event) are not lowered
    // before the first read has ended: then they are.
    api.replicas.store(9, Ordering::SeqCst);
    let timeout = [("SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", "3s")];
    let mut p = start_with(&api, &cal.url, &home, &timeout);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 2),
        "{}",
        p.log()
    );
    assert!(p.wait_for_log("replicas set", WAIT), "{}", p.log());
    let log = p.log();
    let at = |what: &str| log.lines().position(|l| l.contains(what));
    assert!(
        at("cannot read the calendar") < at("replicas set"),
        "lowered before the read ended:\n{log}"
    );
    assert_eq!(p.terminate().0.and_then(|s| s.code()), Some(0));
}

/// The threads of `pid` waiting to open or read a FIFO.
fn fifo_waiters(pid: u32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .filter(|t| {
            let wchan = std::fs::read_to_string(t.path().join("wchan")).unwrap_or_default();
            // Opening it (no writer yet), or reading it.
            wchan == "wait_for_partner" || wchan.contains("pipe")
        })
        .count()
}

#[test]
fn a_calendar_file_that_hangs_is_read_by_one_thread_at_a_time() {
    // Issue 46 item 7: a FIFO nobody writes (a hung mount's stand-in) left a blocked
    // thread behind each timed-out read: 36 after 60 s at a 1 s refresh.
    let api = api();
    let home = tempdir("schedule-fifo");
    let fifo = home.join("calendar.ics");
    mkfifo(&fifo);
    let timeout = [("SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", "1s")];
    let mut p = start_with(&api, fifo.to_str().unwrap(), &home, &timeout);
    let timed_out = "no complete answer within 1s";
    assert!(
        wait_until(WAIT * 2, || p.count_log(timed_out) >= 6),
        "{}",
        p.log()
    );
    assert_eq!(api.replicas.load(Ordering::SeqCst), 2, "{}", p.log());
    let (waiters, threads) = (
        fifo_waiters(p.pid()),
        std::fs::read_dir(format!("/proc/{}/task", p.pid()))
            .unwrap()
            .count(),
    );
    println!("after 6 timed-out reads of a FIFO: {waiters} threads wait on it, {threads} in all");
    assert_eq!(waiters, 1, "{}", p.log());
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
}

#[test]
fn sigterm_exits_at_once_while_the_calendar_is_expanded() {
    // Issue 46 item 6: with a lead time longer than the span the calendar was expanded
    // again at every tick, in a step that did not listen for signals (19.2 s with 40 rules; 400 here
    // that never occur). Rules that never occur in a form the parse cannot see: each is
    // stepped through up to rrule's loop limit.
    let never = "BEGIN:VEVENT\r\nUID:n\r\nSUMMARY:Never placeholders: 5\r\n\
                 DTSTART:20260101T090000Z\r\nDTEND:20260101T100000Z\r\n\
                 RRULE:FREQ=DAILY;BYSETPOS=2\r\nEND:VEVENT\r\n";
    let text = format!("BEGIN:VCALENDAR\r\n{}END:VCALENDAR\r\n", never.repeat(400));
    let api = api();
    let home = tempdir("schedule-expanding");
    let file = home.join("calendar.ics");
    std::fs::write(&file, text).unwrap();
    for when in ["while it is read and expanded", "after it is read"] {
        let lead = [("SELFDESTRUCT_SCHEDULE_LEAD_TIME", "3d")];
        let mut p = start_with(&api, file.to_str().unwrap(), &home, &lead);
        let reading = |p: &Proc| p.log().contains("schedule started");
        let read = |p: &Proc| p.log().contains("calendar read");
        assert!(
            wait_until(WAIT * 2, || if when.starts_with("while") {
                reading(&p)
            } else {
                read(&p)
            }),
            "{when}: {}",
            p.log()
        );
        let (status, took) = p.terminate();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{when}: {}",
            p.log()
        );
        println!("SIGTERM {when}: exit 0 in {took:?}");
    }
}

#[test]
fn a_bad_event_is_skipped_told_once_and_the_others_count() {
    // Issue 46: one bad event refused the whole calendar for good. Now it is skipped, its
    // line and reason logged once (the calendar is read every second here) and an Event
    // posted; the good one counts.
    let good = class_now(6, "Lab");
    let bad = "BEGIN:VEVENT\r\nUID:bad\r\nSUMMARY:Exam placeholders: lots\r\n\
               DTSTART:20260302T090000Z\r\nDTEND:20260302T100000Z\r\nEND:VEVENT\r\n";
    let text = good.replace("END:VCALENDAR", &format!("{bad}END:VCALENDAR"));
    let line = text.lines().position(|l| l.contains("lots")).unwrap() + 1;
    let api = api();
    let cal = calendar_server(Answer::Calendar(text));
    let home = tempdir("schedule-skip");
    let mut p = start(&api, &cal.url, &home);
    assert!(
        wait_until(WAIT, || api.replicas.load(Ordering::SeqCst) == 6),
        "{}",
        p.log()
    );
    assert!(
        wait_until(WAIT, || cal.requests.load(Ordering::SeqCst) >= 4),
        "{}",
        p.log()
    );
    let skipped = "calendar event skipped";
    assert_eq!(p.count_log(skipped), 1, "{}", p.log());
    assert!(p.log().contains(&format!("line {line}")), "{}", p.log());
    assert!(
        wait_until(WAIT, || api.events.lock().unwrap().iter().any(|e| {
            e.contains("CalendarEventSkipped")
                && e.contains(&format!("line {line}"))
                && e.contains("Warning")
        })),
        "{:?}",
        api.events.lock().unwrap()
    );
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
}

#[test]
fn preview_prints_each_change_without_a_cluster_and_names_the_line_of_a_broken_event() {
    let home = tempdir("schedule-preview");
    // An event on March `day`, 09:00 to 10:00 UTC.
    let event = |uid: &str, summary: &str, day: u32| {
        format!(
            "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:{summary}\r\n\
             DTSTART:2026030{day}T090000Z\r\nDTEND:2026030{day}T100000Z\r\nEND:VEVENT\r\n"
        )
    };
    let calendar = |events: &str| {
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{events}END:VCALENDAR\r\n")
    };
    let good = event("a", "Lecture placeholders: 40 placeholders[gpu]: 4", 2);
    let path = home.join("classes.ics");
    std::fs::write(&path, calendar(&good)).unwrap();
    let path = path.to_str().unwrap();
    let env = [
        ("SELFDESTRUCT_SCHEDULE_TARGET", "statefulset/hub"),
        ("SELFDESTRUCT_SCHEDULE_BASELINE", "* = 2"),
        ("SELFDESTRUCT_SCHEDULE_CALENDAR", path),
        (
            "SELFDESTRUCT_SCHEDULE_TARGETS",
            r#"[{"name": "gpu", "target": "statefulset/hub-gpu"}]"#,
        ),
        // The shared identity's: no cluster is asked for anything.
        ("KUBECONFIG", "/nonexistent/kubeconfig"),
    ];
    let (code, out) = run_to_exit(&["preview", "2", "--from", "2026-03-02"], &env);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out,
        "# the count in force at each change: 2 day(s) from 2026-03-02 Mon 00:00 (UTC), lead time 10m\n\
         2026-03-02 Mon 00:00       2  statefulset/hub  baseline window `* = 2`\n\
         2026-03-02 Mon 00:00       0  statefulset/hub-gpu  no baseline window (0)\n\
         2026-03-02 Mon 08:50      40  statefulset/hub  calendar event \"Lecture placeholders: 40 placeholders[gpu]: 4\" (Mon 09:00 to 10:00, placeholders: 40), lead time 10m\n\
         2026-03-02 Mon 08:50       4  statefulset/hub-gpu  calendar event \"Lecture placeholders: 40 placeholders[gpu]: 4\" (Mon 09:00 to 10:00, placeholders[gpu]: 4), lead time 10m\n\
         2026-03-02 Mon 10:00       2  statefulset/hub  baseline window `* = 2`\n\
         2026-03-02 Mon 10:00       0  statefulset/hub-gpu  no baseline window (0)\n"
    );
    // A broken count (line 14) and a count for no target (its event, line 18): the others are
    // previewed, then each is named with its line, and the exit is 1.
    let broken = format!(
        "{good}{}{}",
        event("b", "Lab placeholders: lots", 3),
        event("c", "Workshop placeholders[cpu]: 3", 3)
    );
    std::fs::write(path, calendar(&broken)).unwrap();
    let (code, out) = run_to_exit(&["preview", "2", "--from", "2026-03-02"], &env);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("2026-03-02 Mon 08:50      40  statefulset/hub"),
        "{out}"
    );
    assert!(
        out.contains(
            "selfdestruct-schedule: 2 calendar event(s) cannot be read\n  \
             calendar line 14: event \"Lab placeholders: lots\": `placeholders:` is not followed by a whole number from 0 to 100000\n  \
             calendar line 18: event \"Workshop placeholders[cpu]: 3\": placeholders[cpu]: 3 is for no target: SELFDESTRUCT_SCHEDULE_TARGETS names gpu\n"
        ),
        "{out}"
    );
    // No calendar at all: named, exit 1; a bad setting: exit 2, as the controller.
    let missing = [
        ("SELFDESTRUCT_SCHEDULE_CALENDAR", "/nonexistent/classes.ics"),
        env[0],
        env[1],
    ];
    let (code, out) = run_to_exit(&["preview", "1"], &missing);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "selfdestruct-schedule: /nonexistent/classes.ics: cannot read /nonexistent/classes.ics"
        ),
        "{out}"
    );
    let (code, out) = run_to_exit(
        &["preview", "1"],
        &[env[0], ("SELFDESTRUCT_SCHEDULE_BASELINE", "Monday = 3")],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("SELFDESTRUCT_SCHEDULE_BASELINE"), "{out}");
}
