//! What the agent's tests rely on the fake for: lists paged and selected, watches as
//! kube-apiserver streams them, tokens, the scripted faults and outages, virtual time,
//! and the same over TCP.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use fake_apiserver::{FakeCluster, FaultResponse, Matcher, NodeBuilder};
use serde_json::json;

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn lists_are_paged_and_selected_by_labels_and_fields() {
    let c = cluster();
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    let (_, first) = call(&c, "GET", &format!("{pods}?limit=2"), None).await;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let (_, rest) = call(&c, "GET", &format!("{pods}?limit=2&continue={token}"), None).await;
    assert_eq!(rest["items"][0]["metadata"]["name"], "placeholder-2");
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert!(rest["metadata"].get("continue").is_none());
    let count = |q: &str| {
        let path = format!("{pods}?{q}");
        let c = &c;
        async move {
            call(c, "GET", &path, None).await.1["items"]
                .as_array()
                .map_or(0, Vec::len)
        }
    };
    assert_eq!(
        count("labelSelector=app.kubernetes.io%2Finstance%3Dplaceholder").await,
        3
    );
    assert_eq!(
        count("labelSelector=app.kubernetes.io%2Finstance+in+%28other%29").await,
        0
    );
    assert_eq!(
        count("fieldSelector=metadata.name%3Dplaceholder-1").await,
        1
    );
    assert_eq!(
        count("fieldSelector=metadata.name!%3Dplaceholder-1").await,
        2
    );
    let (code, _) = call(&c, "GET", &format!("{pods}?labelSelector=a+in+x"), None).await;
    assert_eq!(code, 400);
}

#[tokio::test(start_paused = true)]
async fn watches_replay_stream_bookmark_expire_and_end() {
    let c = cluster();
    let nodes = "/api/v1/nodes?watch=true";
    // From "0": the current objects as ADDED; from a resourceVersion: what changed since.
    let mut all = Watch::open(&c, &format!("{nodes}&timeoutSeconds=1"), "application/json").await;
    assert_eq!(all.types().await, ["ADDED"]);
    let rv = c.resource_version();
    c.set_node_ready("node-a", false);
    let path = format!("{nodes}&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3");
    let mut w = Watch::open(&c, &path, "application/json").await;
    c.add_node(NodeBuilder::new("node-b"));
    // Then a bookmark a second (and one at the timeout), and the end.
    let types = w.types().await;
    assert_eq!(types[..2], ["MODIFIED", "ADDED"]);
    assert!(
        types.len() >= 4 && types[2..].iter().all(|t| t == "BOOKMARK"),
        "{types:?}"
    );
    // A history compacted past the version asked for: 410 Expired.
    c.compact();
    let mut w = Watch::open(
        &c,
        &format!("{nodes}&resourceVersion={rv}"),
        "application/json",
    )
    .await;
    let e = w.next(SECOND).await.expect("an ERROR");
    assert_eq!(
        (e["type"].as_str(), e["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
    // A label change moves a pod in and out of a selected watch.
    let selected = format!(
        "/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={}&labelSelector=tier%3Dweb&timeoutSeconds=5",
        c.resource_version()
    );
    let mut w = Watch::open(&c, &selected, "application/json").await;
    let label = |on: bool| {
        move |p: &mut k8s_openapi::api::core::v1::Pod| {
            let labels = p.metadata.labels.get_or_insert_with(Default::default);
            if on {
                labels.insert("tier".into(), "web".into());
            } else {
                labels.remove("tier");
            }
        }
    };
    c.modify_pod(NS, "placeholder-0", label(true));
    c.modify_pod(NS, "placeholder-0", |p| {
        p.metadata.annotations = Some([("a".into(), "b".into())].into())
    });
    c.modify_pod(NS, "placeholder-0", label(false));
    c.modify_pod(NS, "placeholder-1", |p| {
        p.metadata.annotations = Some([("a".into(), "b".into())].into())
    });
    assert_eq!(w.types().await, ["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test(start_paused = true)]
async fn stalled_and_dropped_watches() {
    let c = cluster();
    let path = format!(
        "/api/v1/nodes?watch=true&resourceVersion={}",
        c.resource_version()
    );
    let mut w = Watch::open(&c, &path, "application/json").await;
    c.stall_watches();
    c.set_node_ready("node-a", false);
    assert_eq!(
        w.next(Duration::from_secs(600)).await,
        None,
        "nothing while stalled"
    );
    assert_eq!(c.open_watches(), 1, "the connection stays");
    c.resume_watches();
    assert_eq!(w.next(SECOND).await.expect("resumed")["type"], "MODIFIED");
    c.drop_watches_mid_line();
    assert_eq!(w.next(SECOND).await, None, "cut");
    let cut = String::from_utf8_lossy(&w.1).into_owned();
    assert!(
        cut.starts_with("{\"type\":\"MODIFIED\"") && !cut.ends_with('\n'),
        "{cut}"
    );
}

#[tokio::test(start_paused = true)]
async fn tokens_deletions_events_and_scripted_answers() {
    let c = cluster();
    let pod = format!("/api/v1/namespaces/{NS}/pods/placeholder-0");
    c.remove_token("t");
    assert_eq!(call(&c, "GET", &pod, None).await.0, 401);
    assert_eq!(
        call(&c, "GET", "/version", None).await.0,
        200,
        "version asks no token"
    );
    c.add_token("t");
    // A scripted answer for the next two matching requests, then the fake's own.
    c.fail_next(Matcher::new("GET", &pod), FaultResponse::throttled(3), 2);
    let codes = [
        call(&c, "GET", &pod, None).await.0,
        call(&c, "GET", &pod, None).await.0,
    ];
    assert_eq!(codes, [429, 429]);
    assert_eq!(call(&c, "GET", &pod, None).await.0, 200);
    assert_eq!(c.counters().faults_injected, 2);
    // A PATCH answers the node as stored (no patch is applied).
    let node = call(&c, "GET", "/api/v1/nodes/node-a", None).await;
    assert_eq!(
        call(
            &c,
            "PATCH",
            "/api/v1/nodes/node-a",
            Some(json!([{"op": "remove", "path": "/spec"}]))
        )
        .await,
        node
    );
    // An Event is stored as posted, named after its generateName.
    let events = format!("/apis/events.k8s.io/v1/namespaces/{NS}/events");
    let (code, e) = call(
        &c,
        "POST",
        &events,
        Some(json!({"metadata": {"generateName": "placeholder-0."}, "reason": "SelfDestruct"})),
    )
    .await;
    assert_eq!(code, 201);
    assert!(
        e["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("placeholder-0.") && n.len() == 19)
    );
    assert_eq!(c.events(NS), [e]);
    // Latency and an outage, in-process.
    c.set_latency(Duration::from_secs(7));
    let t = tokio::time::Instant::now();
    call(&c, "GET", &pod, None).await;
    assert!(t.elapsed() >= Duration::from_secs(7));
    c.set_latency(Duration::ZERO);
    c.set_outage(true);
    let req = hyper::Request::get(&pod)
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .expect("a request");
    let refused = tower_service::Service::call(&mut c.service(Some("t")), req).await;
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused)
    );
    c.set_outage(false);
    assert_eq!(call(&c, "GET", &pod, None).await.0, 200);
}

#[tokio::test(start_paused = true)]
async fn timestamps_follow_virtual_time() {
    let c = cluster();
    let created = |c: &FakeCluster| {
        c.get_node("node-b")
            .and_then(|n| n.metadata.creation_timestamp)
    };
    tokio::time::sleep(Duration::from_secs(3600)).await;
    c.add_node(NodeBuilder::new("node-b"));
    let a = c
        .get_node("node-a")
        .and_then(|n| n.metadata.creation_timestamp)
        .expect("a time");
    let b = created(&c).expect("a time");
    assert_eq!(b.0.as_second() - a.0.as_second(), 3600);
}

#[test]
fn over_tcp_with_an_outage_on_the_same_port() {
    let c = FakeCluster::start();
    let get = |path: &str| -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect(c.addr())?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    };
    assert!(get("/version").expect("served").starts_with("HTTP/1.1 200"));
    assert!(
        get("/api/v1/nodes")
            .expect("served")
            .starts_with("HTTP/1.1 401")
    );
    c.set_outage(true);
    assert!(get("/version").is_err(), "refused");
    c.set_outage(false);
    assert!(
        get("/version")
            .expect("the same port again")
            .starts_with("HTTP/1.1 200")
    );
    assert!(
        c.wait_for_request(|r| r.path == "/api/v1/nodes" && r.status == 401, SECOND)
            .is_some()
    );
}
