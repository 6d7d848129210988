//! A fake cluster holding running placeholder pods (as a StatefulSet, the scheduler
//! and a kubelet would have left them), and the real `selfdestruct` binary run for one.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_apiserver::{
    FakeCluster, FaultResponse, Matcher, NodeBuilder, PodTemplate, RecordedRequest, RequestInfo,
};

use super::{Proc, bin, command, tempdir};

pub const NS: &str = "placeholders";

/// Where the agent posts its Events: kube's `Recorder` speaks events.k8s.io/v1.
#[allow(dead_code)]
pub fn events_path() -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{NS}/events")
}

/// Whether `r` creates (POST) or updates as a series (PATCH) an Event about `pod`.
#[allow(dead_code)]
pub fn is_event_about(r: &RecordedRequest, pod: &str) -> bool {
    let events = events_path();
    let path_ok = match r.method.as_str() {
        "POST" => r.path == events,
        "PATCH" => r
            .path
            .strip_prefix(&format!("{events}/"))
            .is_some_and(|n| n.starts_with(&format!("{pod}."))),
        _ => false,
    };
    path_ok
        && r.body
            .as_ref()
            .is_some_and(|b| b["regarding"]["name"] == pod)
}

/// A fake cluster holding `replicas` placeholders of the StatefulSet `placeholder`.
pub struct Scene {
    pub fake: FakeCluster,
    pub home: PathBuf,
}

impl Scene {
    /// `replicas` placeholders on `node-0` (no Node object).
    pub fn placeholders(replicas: i32) -> Scene {
        Self::with_nodes(
            replicas,
            &[],
            PodTemplate::placeholder("placeholder", "1", "4Gi"),
        )
    }

    /// The same on the given nodes.
    pub fn with_nodes(replicas: i32, nodes: &[NodeBuilder], template: PodTemplate) -> Scene {
        Self::set_up(FakeCluster::start(), replicas, nodes, template)
    }

    /// The same on a given fake (in-process too): the nodes, an hour old, and
    /// `placeholder-0..replicas` Running and Ready on them in turn, started now.
    pub fn set_up(
        fake: FakeCluster,
        replicas: i32,
        nodes: &[NodeBuilder],
        template: PodTemplate,
    ) -> Scene {
        let now = fake.clock().wall();
        for n in nodes {
            let mut n = n.clone();
            n.created = n.created.or(Some(now - Duration::from_secs(3600)));
            fake.add_node(n);
        }
        for i in 0..replicas.max(0) as usize {
            let node = nodes
                .get(i % nodes.len().max(1))
                .map_or("node-0", |n| n.name.as_str());
            fake.add_pod(template.running_pod(NS, &format!("placeholder-{i}"), node, now));
        }
        Scene {
            fake,
            home: tempdir("scene"),
        }
    }

    /// A fresh token for `pod`'s agent, known to the fake.
    pub fn token_for(&self, pod: &str) -> String {
        let token = format!("token-{pod}-{}", self.fake.resource_version());
        self.fake.add_token(&token);
        token
    }

    /// A kubeconfig with a fresh token for `pod`.
    pub fn kubeconfig_for(&self, pod: &str) -> PathBuf {
        self.kubeconfig(&self.token_for(pod))
    }

    /// A kubeconfig with `token`.
    pub fn kubeconfig(&self, token: &str) -> PathBuf {
        let dir = self.home.join(token);
        std::fs::create_dir_all(&dir).expect("mkdir");
        self.fake.write_kubeconfig(&dir, token, NS)
    }

    /// The pod's `status.startTime` as the API server has it (second precision).
    pub fn started_at(&self, pod: &str) -> Option<std::time::SystemTime> {
        let t = self.fake.get_pod(NS, pod)?.status?.start_time?;
        Some(std::time::UNIX_EPOCH + Duration::from_secs(t.0.as_second().unsigned_abs()))
    }

    pub fn uid(&self, pod: &str) -> String {
        self.fake
            .get_pod(NS, pod)
            .and_then(|p| p.metadata.uid)
            .expect("pod exists with a uid")
    }

    /// The pod's uid and node (empty if unscheduled): its Downward API values.
    pub fn uid_and_node(&self, pod: &str) -> (String, String) {
        let p = self.fake.get_pod(NS, pod).expect("pod exists");
        let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
        (p.metadata.uid.unwrap_or_default(), node)
    }

    /// Starts the agent of `pod` with the Downward API env, fast test settings and
    /// `env` on top.
    pub fn agent(&self, pod: &str, env: &[(&str, &str)]) -> Proc {
        self.agent_with_kubeconfig(pod, &self.kubeconfig_for(pod), env)
    }

    /// [`Scene::agent`] with the API access of the kubeconfig `kubeconfig`.
    pub fn agent_with_kubeconfig(
        &self,
        pod: &str,
        kubeconfig: &Path,
        env: &[(&str, &str)],
    ) -> Proc {
        let (uid, node) = self.uid_and_node(pod);
        let kc = kubeconfig.to_string_lossy().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("KUBECONFIG", &kc),
            ("POD_NAME", pod),
            ("POD_NAMESPACE", NS),
            ("POD_UID", &uid),
            ("NODE_NAME", &node),
            ("SELFDESTRUCT_MIN_AGE", "0"),
            ("SELFDESTRUCT_MOVE_JITTER", "0"),
            ("SELFDESTRUCT_START_JITTER", "0"),
            ("SELFDESTRUCT_LOG_LEVEL", "debug"),
        ];
        all.extend_from_slice(env);
        Proc::spawn(command(bin(), &[], &all, &self.home))
    }

    /// Every request that changed something.
    pub fn mutations(&self) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }

    pub fn evictions(&self) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.is_eviction())
            .collect()
    }

    /// Asserts that every mutating request targets one of `pods` (by path) or
    /// creates an Event about it, and carries that pod's uid as precondition.
    pub fn assert_only_own_mutations(&self, allowed: &[(&str, &str)]) {
        for r in self.mutations() {
            let ok = match r.method.as_str() {
                "POST" | "PATCH" if r.path.starts_with(&events_path()) => {
                    allowed.iter().any(|(p, _)| is_event_about(&r, p))
                }
                "POST" | "DELETE" => allowed.iter().any(|(pod, uid)| {
                    let own = format!("/api/v1/namespaces/{NS}/pods/{pod}");
                    let body = r.body.clone().unwrap_or_default();
                    let pre = if r.method == "POST" {
                        body["deleteOptions"]["preconditions"]["uid"].clone()
                    } else {
                        body["preconditions"]["uid"].clone()
                    };
                    (r.path == own || r.path == format!("{own}/eviction")) && pre == *uid
                }),
                _ => false,
            };
            assert!(
                ok,
                "unexpected mutation {} {} {:?}",
                r.method, r.path, r.body
            );
        }
    }
}

/// The requests of `token` that `what` names answer 403 Forbidden, as RBAC words it
/// (`nodes-list-403.json`): a service account without that permission.
pub fn forbid(
    fake: &FakeCluster,
    token: &str,
    what: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
) {
    let token = token.to_string();
    let matcher = Matcher::custom(move |r| r.token == Some(token.as_str()) && what(r));
    fake.fail_next(
        matcher,
        FaultResponse::captured("nodes-list-403.json"),
        usize::MAX,
    );
}

/// Requests for `resource` (`pods`, `nodes`, `poddisruptionbudgets`, `eviction`, `events`):
/// a path segment.
pub fn on(resource: &'static str) -> impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static {
    move |r| r.path.split('/').any(|s| s == resource)
}
