//! The last warm-by report of each target, and its count in force, as Prometheus text
//! (`SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS`, off by default): a tiny HTTP/1.1 answer to
//! `GET /metrics`, written here rather than linking a server. One connection at a time,
//! its request read up to 4 KiB and answered within 5 s, then closed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use super::Target;
use super::report::{Due, Report};

/// The most bytes of a request read.
const MAX_REQUEST: usize = 4 << 10;
/// How long one connection may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// What the metrics show.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Each target's count in force, as last applied.
    replicas: BTreeMap<String, u32>,
    /// Each target's last report at each moment (`margin`, `start`), and its time.
    reports: BTreeMap<(String, &'static str), (Report, i64)>,
}

/// The metrics, whoever held them last (they are only numbers).
pub(crate) fn lock(m: &Mutex<Metrics>) -> MutexGuard<'_, Metrics> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    pub(crate) fn replicas(&mut self, target: &Target, count: Option<u32>) {
        if let Some(c) = count {
            self.replicas.insert(target.to_string(), c);
        }
    }

    pub(crate) fn report(&mut self, target: &Target, due: &Due, r: &Report) {
        let key = (target.to_string(), due.moment.label());
        self.reports.insert(key, (r.clone(), due.at.timestamp()));
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, help: &str, rows: Vec<(String, i64)>| {
            if rows.is_empty() {
                return;
            }
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, value) in rows {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        };
        let replicas = self.replicas.iter();
        let replicas = replicas.map(|(t, c)| (format!("target=\"{t}\""), i64::from(*c)));
        family(
            "selfdestruct_schedule_replicas",
            "The count in force last set on the target.",
            replicas.collect(),
        );
        let rows = |value: &dyn Fn(&Report, i64) -> Option<i64>| -> Vec<(String, i64)> {
            let reports = self.reports.iter();
            let labeled = reports
                .map(|((t, at), (r, time))| (format!("target=\"{t}\",at=\"{at}\""), r, *time));
            labeled
                .filter_map(|(l, r, time)| Some((l, value(r, time)?)))
                .collect()
        };
        let number = |n: Option<u32>| n.map(i64::from);
        family(
            "selfdestruct_schedule_warm_by_met",
            "1 when the last warm-by report found all that was asked ready (a Normal Event), 0 on a shortfall (Warning).",
            rows(&|r, _| Some(i64::from(r.met))),
        );
        family(
            "selfdestruct_schedule_warm_by_asked",
            "The count in force at the last warm-by report.",
            rows(&|r, _| Some(i64::from(r.asked))),
        );
        family(
            "selfdestruct_schedule_warm_by_ready",
            "Ready at the last warm-by report: placeholders Ready, or the buffer's status.readyReplicas (absent when unknown).",
            rows(&|r, _| number(r.ready)),
        );
        family(
            "selfdestruct_schedule_warm_by_warm",
            "Ready placeholders on warm nodes at the last warm-by report (absent when not looked at or unknown).",
            rows(&|r, _| number(r.warm)),
        );
        family(
            "selfdestruct_schedule_warm_by_timestamp_seconds",
            "When the last warm-by report was due (Unix time).",
            rows(&|_, time| Some(time)),
        );
        out
    }
}

/// Answers `GET /metrics` on `listener`, one connection at a time, until the runtime ends.
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Mutex<Metrics>>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                let answer = answer(&conn, &metrics);
                let _ = tokio::time::timeout(CONNECTION_TIMEOUT, answer).await;
            }
            // Out of file descriptors, say: not a busy loop.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn answer(conn: &TcpStream, metrics: &Mutex<Metrics>) -> std::io::Result<()> {
    let mut request = vec![0; MAX_REQUEST];
    let mut read = 0;
    while read < MAX_REQUEST && !request[..read].windows(4).any(|w| w == b"\r\n\r\n") {
        conn.readable().await?;
        match conn.try_read(&mut request[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    let (status, body) = match request.starts_with(b"GET /metrics ") {
        true => ("200 OK", lock(metrics).render()),
        false => ("404 Not Found", "GET /metrics\n".to_string()),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut left = answer.as_bytes();
    while !left.is_empty() {
        conn.writable().await?;
        match conn.try_write(left) {
            Ok(n) => left = &left[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
