//! The fake served in-process on a paused runtime: requests through its
//! `tower::Service`, and its timers and timestamps on virtual time.

use std::time::Duration;

use fake_apiserver::{Config, FakeCluster, PodTemplate, Subject};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use tower_service::Service;

const NS: &str = "placeholders";

async fn get(
    fake: &FakeCluster,
    token: Option<&str>,
    path: &str,
) -> std::io::Result<(u16, serde_json::Value)> {
    let mut svc = fake.service(token);
    let req = hyper::Request::get(path)
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let resp = svc.call(req).await?;
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((code, serde_json::from_slice(&body).unwrap_or_default()))
}

fn seconds(t: &serde_json::Value) -> i64 {
    t.as_str()
        .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn timers_and_timestamps_follow_virtual_time() {
    let fake = FakeCluster::in_process(Config {
        recreate_delay: Duration::from_secs(3600),
        ..Config::default()
    });
    fake.add_token("t", Subject::placeholder_agent(NS, "placeholder"));
    fake.add_statefulset(
        NS,
        "placeholder",
        1,
        PodTemplate::placeholder("placeholder", "1", "1Gi"),
    );
    let path = format!("/api/v1/namespaces/{NS}/pods/placeholder-0");
    let (code, first) = get(&fake, Some("t"), &path).await.expect("served");
    assert_eq!(code, 200, "{first}");
    let created = seconds(&first["metadata"]["creationTimestamp"]);
    assert!(fake.delete_pod(NS, "placeholder-0"));
    // Re-created an hour later, by the virtual clock: not before ...
    tokio::time::sleep(Duration::from_secs(3590)).await;
    let (code, _) = get(&fake, Some("t"), &path).await.expect("served");
    assert_eq!(code, 404);
    // ... and then, stamped an hour after the first.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (code, second) = get(&fake, Some("t"), &path).await.expect("served");
    assert_eq!(code, 200, "{second}");
    let recreated = seconds(&second["metadata"]["creationTimestamp"]);
    assert!(
        (3600..=3612).contains(&(recreated - created)),
        "re-created {}s later",
        recreated - created
    );
    // The recorded requests carry virtual times too.
    let at: Vec<_> = fake.requests().iter().map(|r| r.at).collect();
    assert!(at[2] - at[0] >= Duration::from_secs(3600));
}

#[tokio::test(start_paused = true)]
async fn the_token_is_sent_and_an_outage_refuses() {
    let fake = FakeCluster::in_process(Config::default());
    fake.add_token("t", Subject::placeholder_agent(NS, "placeholder"));
    let path = format!("/api/v1/namespaces/{NS}/pods");
    assert_eq!(get(&fake, None, &path).await.expect("served").0, 401);
    assert_eq!(get(&fake, Some("t"), &path).await.expect("served").0, 200);
    fake.set_outage(true);
    let refused = get(&fake, Some("t"), &path).await.expect_err("refused");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    fake.set_outage(false);
    assert_eq!(get(&fake, Some("t"), &path).await.expect("served").0, 200);
}
