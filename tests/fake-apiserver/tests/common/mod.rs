//! Requests to a fake served in-process (on the paused runtime of the test), and the
//! cluster the fixtures were captured from.
#![allow(dead_code)]

use std::time::{Duration, SystemTime};

use fake_apiserver::in_process::ServiceBody;
use fake_apiserver::{Config, FakeCluster, NodeBuilder, PodTemplate};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;
use tower_service::Service;

pub const NS: &str = "placeholders";
/// kube's `metadata_watcher` lists with this `Accept` (and watches with `as=PartialObjectMetadata`).
pub const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
pub const METADATA_WATCH: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// Node `node-a` and the StatefulSet's three running placeholders on it, an hour old;
/// token `t`. In-process: call from a `#[tokio::test]`.
pub fn cluster() -> FakeCluster {
    let c = FakeCluster::in_process(Config {
        seed: Some(42),
        ..Config::default()
    });
    c.add_token("t");
    c.add_node(
        NodeBuilder::new("node-a")
            .label("hub.jupyter.org/node-purpose", "user")
            .realistic_images(2),
    );
    let template = PodTemplate::placeholder("placeholder", "100m", "128Mi");
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..3 {
        c.add_pod(template.running_pod(NS, &format!("placeholder-{i}"), "node-a", hour_ago));
    }
    c
}

/// The response to `method path` (with `accept` and a JSON `body`) as token `t`.
pub async fn response(
    c: &FakeCluster,
    method: &str,
    path: &str,
    accept: &str,
    body: Option<Value>,
) -> (u16, ServiceBody) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("accept", accept);
    let req = req.body(Full::new(Bytes::from(body))).expect("a request");
    let resp = c.service(Some("t")).call(req).await.expect("served");
    (resp.status().as_u16(), resp.into_body())
}

/// `method path` as token `t`: the status and the JSON body.
pub async fn call(c: &FakeCluster, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    call_as(c, method, path, "application/json", body).await
}

/// [`call`] with `accept`.
pub async fn call_as(
    c: &FakeCluster,
    method: &str,
    path: &str,
    accept: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (code, body) = response(c, method, path, accept, body).await;
    let bytes = body.collect().await.expect("a body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// A watch's event lines.
pub struct Watch(pub ServiceBody, pub Vec<u8>);

impl Watch {
    pub async fn open(c: &FakeCluster, path: &str, accept: &str) -> Watch {
        let (code, body) = response(c, "GET", path, accept, None).await;
        assert_eq!(code, 200, "{path}");
        Watch(body, Vec::new())
    }

    /// The next event, or `None` once the stream ended, failed or sent nothing for `limit`.
    pub async fn next(&mut self, limit: Duration) -> Option<Value> {
        loop {
            if let Some(i) = self.1.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.1.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).expect("a JSON line"));
            }
            match tokio::time::timeout(limit, self.0.frame()).await {
                Ok(Some(Ok(frame))) => self
                    .1
                    .extend_from_slice(&frame.into_data().unwrap_or_default()),
                _ => return None,
            }
        }
    }

    /// The types of every event until the stream ends (or is quiet for a minute).
    pub async fn types(&mut self) -> Vec<String> {
        let mut types = Vec::new();
        while let Some(e) = self.next(Duration::from_secs(60)).await {
            types.push(e["type"].as_str().unwrap_or_default().to_string());
        }
        types
    }
}
