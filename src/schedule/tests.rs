//! Unit tests of `schedule` (a child module: they see its private items).

use super::*;
use crate::testing::{block_on, tempdir};

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
