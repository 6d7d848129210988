//! Behaviour of the fake beyond the captured fixtures.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fake_apiserver::{
    FakeCluster, FaultResponse, Matcher, NodeBuilder, PodTemplate, Status, Subject,
};
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

fn pod_names(v: &serde_json::Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn version_health_and_unknown_paths() {
    let c = FakeCluster::start_with(fast_config());
    let r = c.client(None).get("/version").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["gitVersion"], "v1.36.2");
    assert_eq!(c.client(Some("nope")).get("/version").unwrap().status, 401);
    c.add_token("admin", Subject::admin());
    let r = c.client(Some("admin")).get("/api/v1/configmaps").unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["reason"], "NotFound");
    assert_eq!(
        r.json()["message"],
        "the server could not find the requested resource"
    );
    let r = c
        .client(Some("admin"))
        .request("PUT", "/api/v1/namespaces/x/pods", None, None)
        .unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(c.client(None).get("/readyz").unwrap().text(), "ok");
}

#[test]
fn unauthorized_401() {
    let c = fixture_cluster();
    for token in [None, Some("unknown")] {
        let r = c.client(token).get(&pod_path("placeholder-0")).unwrap();
        assert_eq!(r.status, 401);
        assert_eq!(r.json(), Status::unauthorized().to_value());
        assert_eq!(
            r.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
}

#[test]
fn rbac_403_messages() {
    let c = fixture_cluster();
    let p0 = c.client(Some("p0"));
    let r = p0.get("/api/v1/nodes?watch=true").unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        format!(
            "nodes is forbidden: User \"{SA_USER}\" cannot watch resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    let r = p0.get("/api/v1/nodes/node-a").unwrap();
    assert_eq!(
        r.json()["message"],
        format!(
            "nodes \"node-a\" is forbidden: User \"{SA_USER}\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    let r = p0.get("/api/v1/namespaces/kube-system/pods").unwrap();
    assert_eq!(
        r.json()["message"],
        format!(
            "pods is forbidden: User \"{SA_USER}\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\""
        )
    );
    let r = p0
        .post(
            "/api/v1/namespaces/default/pods/x/eviction",
            &json!({"metadata": {"name": "x"}}),
        )
        .unwrap();
    assert_eq!(
        r.json()["message"],
        format!(
            "pods \"x\" is forbidden: User \"{SA_USER}\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"default\""
        )
    );
    assert_eq!(r.json()["details"], json!({"name": "x", "kind": "pods"}));
    // The agent's full permissions include nodes.
    c.add_token("agent", Subject::placeholder_agent(NS, "placeholder"));
    assert_eq!(
        c.client(Some("agent")).get("/api/v1/nodes").unwrap().status,
        200
    );
}

#[test]
fn own_pod_only_policy_422() {
    let c = fixture_cluster();
    c.own_pod_only_policy(true);
    let evict = |token: &str, name: &str| {
        c.client(Some(token))
            .post(
                &format!("{}/eviction", pod_path(name)),
                &eviction_body(name, None),
            )
            .unwrap()
    };
    assert_eq!(evict("p0", "placeholder-1").status, 422);
    assert_eq!(evict("unbound", "placeholder-0").status, 422);
    assert_eq!(
        c.client(Some("unbound"))
            .delete(&pod_path("placeholder-0"), None)
            .unwrap()
            .status,
        422
    );
    // Own pod: allowed.
    let uid = uid_of(&c, "placeholder-0");
    let r = c
        .client(Some("p0"))
        .delete(
            &pod_path("placeholder-0"),
            Some(&json!({"preconditions": {"uid": uid}})),
        )
        .unwrap();
    assert_eq!(r.status, 200);
    // Admins are not service accounts: the policy does not apply.
    assert_eq!(
        c.client(Some("admin"))
            .delete(&pod_path("placeholder-2"), None)
            .unwrap()
            .status,
        200
    );
    c.own_pod_only_policy(false);
    assert_ne!(evict("p0", "placeholder-1").status, 422);
}

#[test]
fn list_with_label_and_field_selectors() {
    let c = fixture_cluster();
    let admin = c.client(Some("admin"));
    c.add_pod(Pod {
        metadata: ObjectMeta {
            name: Some("user-1".into()),
            namespace: Some(NS.into()),
            labels: Some([("app".to_string(), "jupyter".to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec::default()),
        status: None,
    });
    let list = |q: &str| {
        let r = admin
            .get(&format!("/api/v1/namespaces/{NS}/pods?{q}"))
            .unwrap();
        assert_eq!(r.status, 200, "{q}: {}", r.text());
        let v = r.json();
        assert!(
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .is_ok()
        );
        pod_names(&v)
    };
    let all3 = vec!["placeholder-0", "placeholder-1", "placeholder-2"];
    assert_eq!(
        list("labelSelector=app.kubernetes.io%2Finstance%3Dplaceholder&limit=500"),
        all3
    );
    assert_eq!(
        list("labelSelector=app.kubernetes.io/instance==placeholder"),
        all3
    );
    assert_eq!(
        list("labelSelector=app!=jupyter,app.kubernetes.io/name"),
        all3
    );
    assert_eq!(list("labelSelector=app%20in%20(jupyter,x)"), vec!["user-1"]);
    assert_eq!(list("labelSelector=app+notin+(jupyter)"), all3);
    assert_eq!(list("labelSelector=!app"), all3);
    assert_eq!(list("labelSelector=app"), vec!["user-1"]);
    assert_eq!(
        list(
            "labelSelector=statefulset.kubernetes.io/pod-name%20in%20(placeholder-0,placeholder-2)"
        ),
        vec!["placeholder-0", "placeholder-2"]
    );
    assert_eq!(
        list("fieldSelector=metadata.name%3Dplaceholder-1"),
        vec!["placeholder-1"]
    );
    assert_eq!(list("fieldSelector=spec.nodeName%3Dnode-a").len(), 4);
    assert!(list("fieldSelector=spec.nodeName%3Dnode-z").is_empty());
    // All namespaces.
    assert_eq!(
        pod_names(&admin.get("/api/v1/pods").unwrap().json()).len(),
        4
    );
    // Errors.
    let r = admin
        .get(&format!(
            "/api/v1/namespaces/{NS}/pods?labelSelector=a%20in%20x"
        ))
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["reason"], "BadRequest");
    let r = admin
        .get(&format!(
            "/api/v1/namespaces/{NS}/pods?fieldSelector=spec.foo%3Dx"
        ))
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "field label not supported: spec.foo");
}

#[test]
fn malformed_bodies_are_400() {
    let c = fixture_cluster();
    let admin = c.client(Some("admin"));
    let path = format!("{}/eviction", pod_path("placeholder-0"));
    let r = admin
        .request("POST", &path, Some("application/json"), Some(b"{not json"))
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["reason"], "BadRequest");
    let r = admin
        .request(
            "DELETE",
            &pod_path("placeholder-0"),
            Some("application/json"),
            Some(b"{\"preconditions\": 5}"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    let r = admin
        .request(
            "POST",
            &format!("/api/v1/namespaces/{NS}/events"),
            Some("application/json"),
            Some(b"[]"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    let r = admin
        .post(&path, &json!({"metadata": {"name": "placeholder-1"}}))
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "name in URL does not match name in Eviction object"
    );
    assert_eq!(c.pods(NS).len(), 3, "nothing was deleted");
}

#[test]
fn delete_preconditions_dry_run_and_grace() {
    let c = fixture_cluster();
    let admin = c.client(Some("admin"));
    let pod = c.get_pod(NS, "placeholder-0").unwrap();
    let rv = pod.metadata.resource_version.clone().unwrap();
    let r = admin
        .delete(
            &pod_path("placeholder-0"),
            Some(&json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .unwrap();
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        format!(
            "Operation cannot be fulfilled on Pod \"placeholder-0\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    // Dry run: the answer looks like a deletion, nothing changes.
    for (query, body) in [
        ("?dryRun=All", None),
        ("", Some(json!({"dryRun": ["All"]}))),
    ] {
        let r = admin
            .delete(
                &format!("{}{query}", pod_path("placeholder-0")),
                body.as_ref(),
            )
            .unwrap();
        assert_eq!(r.status, 200);
        assert!(r.json()["metadata"]["deletionTimestamp"].is_string());
        let now = c.get_pod(NS, "placeholder-0").unwrap();
        assert_eq!(now.metadata.resource_version.as_deref(), Some(rv.as_str()));
        assert!(now.metadata.deletion_timestamp.is_none());
    }
    // A long grace period keeps the pod terminating for termination_delay.
    c.set_termination_delay(Duration::from_millis(300));
    let r = admin
        .delete(
            &format!("{}?gracePeriodSeconds=30", pod_path("placeholder-1")),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(
        c.get_pod(NS, "placeholder-1")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(c.wait_for(
        |c| {
            c.get_pod(NS, "placeholder-1")
                .is_none_or(|p| p.metadata.deletion_timestamp.is_none())
        },
        Duration::from_secs(3)
    ));
    assert_eq!(admin.delete(&pod_path("nope"), None).unwrap().status, 404);
}

#[test]
fn statefulset_recreates_with_new_uid() {
    let c = fixture_cluster();
    let old = uid_of(&c, "placeholder-1");
    let rv = c.resource_version();
    let r = c
        .client(Some("p1"))
        .post(
            &format!("{}/eviction", pod_path("placeholder-1")),
            &eviction_body("placeholder-1", Some(&old)),
        )
        .unwrap();
    assert_eq!(r.status, 201);
    assert!(c.wait_for(
        |c| {
            c.get_pod(NS, "placeholder-1").is_some_and(|p| {
                p.metadata.uid.as_deref() != Some(old.as_str())
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        },
        Duration::from_secs(3)
    ));
    let new = c.get_pod(NS, "placeholder-1").unwrap();
    let owner = &new.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("StatefulSet", Some(true))
    );
    assert_eq!(
        new.metadata.labels.as_ref().unwrap()["statefulset.kubernetes.io/pod-name"],
        "placeholder-1"
    );
    assert_eq!(
        new.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-a")
    );
    // The watch history tells the story.
    let mut w = c
        .client(Some("admin"))
        .watch(&format!("/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=metadata.name%3Dplaceholder-1"))
        .unwrap();
    let events = w.collect_until_end(Duration::from_secs(3)).unwrap();
    let seq: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["uid"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let deleted = seq
        .iter()
        .position(|(t, u)| t == "DELETED" && *u == old)
        .expect("DELETED of the old pod");
    let added = seq
        .iter()
        .position(|(t, u)| t == "ADDED" && *u != old)
        .expect("ADDED of the new pod");
    assert!(deleted < added, "{seq:?}");
    assert_eq!(events[added]["object"]["status"]["phase"], "Pending");
    assert!(events[added]["object"]["spec"].get("nodeName").is_none());
}

#[test]
fn pdb_budget_and_expiry() {
    let c = fixture_cluster();
    c.set_pdb_disruption_expiry(Duration::from_millis(300));
    let evict = |name: &str, uid: Option<&str>| {
        c.client(Some("admin"))
            .post(
                &format!("{}/eviction", pod_path(name)),
                &eviction_body(name, uid),
            )
            .unwrap()
            .status
    };
    let pdb = c.get_pdb(NS, "placeholder").unwrap();
    let st = pdb.status.unwrap();
    assert_eq!(
        (
            st.expected_pods,
            st.desired_healthy,
            st.current_healthy,
            st.disruptions_allowed
        ),
        (3, 2, 3, 1)
    );
    // Dry run consumes nothing.
    let r = c
        .client(Some("admin"))
        .post(
            &format!("{}/eviction?dryRun=All", pod_path("placeholder-0")),
            &eviction_body("placeholder-0", None),
        )
        .unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(
        c.get_pdb(NS, "placeholder")
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        1
    );
    // A failed eviction (409) uses up the budget until the entry expires.
    assert_eq!(
        evict(
            "placeholder-0",
            Some("00000000-0000-0000-0000-000000000000")
        ),
        409
    );
    assert_eq!(evict("placeholder-1", None), 429);
    assert_eq!(c.counters().evictions_refused, 1);
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(evict("placeholder-1", None), 201);
    // While placeholder-1 is gone / not Ready, nothing else may go.
    assert_eq!(evict("placeholder-2", None), 429);
    assert!(c.wait_pods_ready(NS, 3, Duration::from_secs(3)));
    assert_eq!(evict("placeholder-2", None), 201);
}

#[test]
fn scheduler_least_allocated_filters_and_retry() {
    let c = FakeCluster::start_with(fast_config());
    c.add_node(NodeBuilder::new("busy").cpu("4").memory("16Gi"));
    c.add_node(NodeBuilder::new("empty").cpu("4").memory("16Gi"));
    c.add_node(NodeBuilder::new("tainted").cpu("64").memory("256Gi").taint(
        "dedicated",
        "gpu",
        "NoSchedule",
    ));
    c.add_node(
        NodeBuilder::new("cordoned")
            .cpu("64")
            .memory("256Gi")
            .unschedulable(true),
    );
    c.add_node(
        NodeBuilder::new("notready")
            .cpu("64")
            .memory("256Gi")
            .ready(false),
    );
    // Users hold 3 of 4 CPUs on "busy".
    c.add_pod(Pod {
        metadata: ObjectMeta {
            name: Some("user".into()),
            namespace: Some("users".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("busy".into()),
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "c".into(),
                resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(
                        [(
                            "cpu".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("3".into()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    });
    assert!(
        c.get_node("notready")
            .unwrap()
            .spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/not-ready")
    );
    c.add_statefulset("ns", "ph", 2, PodTemplate::placeholder("ph", "1", "1Gi"));
    assert!(c.wait_pods_ready("ns", 2, Duration::from_secs(3)));
    let node_of = |name: &str| {
        c.get_pod("ns", name)
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .unwrap()
    };
    assert_eq!(node_of("ph-0"), "empty");
    assert_eq!(
        node_of("ph-1"),
        "empty",
        "empty has 2 CPUs left, busy has 1"
    );
    // Third replica: empty (2 CPUs free) beats busy (1 free); fourth: busy (1 free, more memory) beats empty (1 free).
    c.scale_statefulset("ns", "ph", 4);
    assert!(c.wait_pods_ready("ns", 4, Duration::from_secs(3)));
    assert_eq!(node_of("ph-2"), "empty");
    assert_eq!(node_of("ph-3"), "busy");
    // The fifth fills "empty"; nothing fits a sixth: Unschedulable, retried
    // when a node becomes Ready.
    c.scale_statefulset("ns", "ph", 6);
    assert_eq!(node_of("ph-4"), "empty");
    let pending = c.get_pod("ns", "ph-5").unwrap();
    let cond = pending.status.unwrap().conditions.unwrap();
    let sched = cond.iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(
        (sched.status.as_str(), sched.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    let msg = sched.message.clone().unwrap();
    assert!(msg.starts_with("0/5 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable."), "{msg}");
    c.set_node_ready("notready", true);
    assert!(c.wait_pods_ready("ns", 6, Duration::from_secs(3)));
    assert_eq!(node_of("ph-5"), "notready");
}

#[test]
fn scheduler_node_selector_affinity_and_tolerations() {
    let c = FakeCluster::start_with(fast_config());
    c.add_node(
        NodeBuilder::new("a")
            .label("pool", "user")
            .label("zone", "z1"),
    );
    c.add_node(
        NodeBuilder::new("b")
            .label("pool", "user")
            .label("zone", "z2")
            .taint("hub.jupyter.org/dedicated", "user", "NoSchedule"),
    );
    c.add_node(NodeBuilder::new("c").label("pool", "core"));
    let affinity = |op: &str, values: &[&str]| Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: op.into(),
                        values: Some(values.iter().map(|s| s.to_string()).collect()),
                    }]),
                    match_fields: None,
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    };
    c.add_statefulset(
        "ns",
        "sel",
        1,
        PodTemplate::new().node_selector("pool", "core"),
    );
    c.add_statefulset(
        "ns",
        "aff",
        1,
        PodTemplate::new()
            .affinity(affinity("In", &["z2"]))
            .tolerate("hub.jupyter.org/dedicated", "NoSchedule"),
    );
    c.add_statefulset(
        "ns",
        "notin",
        1,
        PodTemplate::new()
            .affinity(affinity("NotIn", &["z2"]))
            .node_selector("pool", "user"),
    );
    c.add_statefulset(
        "ns",
        "blocked",
        1,
        PodTemplate::new().affinity(affinity("In", &["z2"])),
    );
    assert!(c.wait_pods_ready("ns", 3, Duration::from_secs(3)));
    let node_of = |name: &str| c.get_pod("ns", name).unwrap().spec.unwrap().node_name;
    assert_eq!(node_of("sel-0").as_deref(), Some("c"));
    assert_eq!(node_of("aff-0").as_deref(), Some("b"));
    assert_eq!(node_of("notin-0").as_deref(), Some("a"));
    assert_eq!(node_of("blocked-0"), None);
}

#[test]
fn simple_mode_without_nodes() {
    let c = FakeCluster::start_with(fast_config());
    c.add_statefulset("ns", "ph", 2, PodTemplate::placeholder("ph", "100", "1Ti"));
    assert!(c.wait_pods_ready("ns", 2, Duration::from_secs(3)));
    for p in c.pods("ns") {
        assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-0"));
        let s = p.status.unwrap();
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert!(s.start_time.is_some());
        assert!(s.container_statuses.unwrap()[0].ready);
    }
}

#[test]
fn node_patch_json_patch_and_merge_patch() {
    let c = fixture_cluster();
    let admin = c.client(Some("admin"));
    let path = "/api/v1/nodes/node-a";
    let rv0 = c
        .get_node("node-a")
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = admin
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={rv0}"))
        .unwrap();
    let r = admin
        .patch(
            path,
            "application/json-patch+json",
            &json!([
                {"op": "test", "path": "/metadata/name", "value": "node-a"},
                {"op": "add", "path": "/metadata/labels/example.com~1pool", "value": "spare"},
                {"op": "replace", "path": "/status/images", "value": []},
                {"op": "remove", "path": "/metadata/annotations/node.alpha.kubernetes.io~1ttl"}
            ]),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let node = c.get_node("node-a").unwrap();
    assert_eq!(
        node.metadata.labels.as_ref().unwrap()["example.com/pool"],
        "spare"
    );
    assert_ne!(
        node.metadata.resource_version.as_deref(),
        Some(rv0.as_str())
    );
    let ev = w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(
        ev["object"]["metadata"]["labels"]["example.com/pool"],
        "spare"
    );
    // A failed test is 422 like kube-apiserver; nothing changes.
    let rv1 = c.resource_version();
    let r = admin
        .patch(path, "application/json-patch+json", &json!([{"op": "test", "path": "/metadata/labels/example.com~1pool", "value": "other"}, {"op": "add", "path": "/metadata/labels/x", "value": "y"}]))
        .unwrap();
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "the server rejected our request due to an error in our request",
               "reason": "Invalid",
               "details": {"causes": [{"reason": "UnexpectedServerResponse", "message": "testing value /metadata/labels/example.com~1pool failed: test failed"}]},
               "code": 422})
    );
    assert_eq!(c.resource_version(), rv1);
    let r = admin
        .patch(
            path,
            "application/json-patch+json",
            &json!([{"op": "explode", "path": "/x"}]),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    let r = admin
        .request(
            "PATCH",
            path,
            Some("application/json-patch+json"),
            Some(b"[{"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    // Merge patch, with optimistic locking.
    let r = admin
        .patch(
            path,
            "application/merge-patch+json",
            &json!({"spec": {"unschedulable": true}}),
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        c.get_node("node-a").unwrap().spec.unwrap().unschedulable,
        Some(true)
    );
    let r = admin
        .patch(
            path,
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": null}}),
        )
        .unwrap();
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["reason"], "Conflict");
    assert_eq!(
        admin
            .patch(path, "application/yaml", &json!({}))
            .unwrap()
            .status,
        415
    );
    assert_eq!(
        admin
            .patch(
                "/api/v1/nodes/nope",
                "application/merge-patch+json",
                &json!({})
            )
            .unwrap()
            .status,
        404
    );
}

#[test]
fn node_mutators_emit_events() {
    let c = FakeCluster::start_with(fast_config());
    c.add_node(NodeBuilder::new("n").realistic_images(50));
    let images = c.get_node("n").unwrap().status.unwrap().images.unwrap();
    assert_eq!(images.len(), 50);
    for i in &images {
        let names = i.names.as_ref().unwrap();
        assert_eq!(names.len(), 2);
        assert!(names[0].contains("@sha256:") && names[0].len() > 64);
        assert!(names[1].contains(':') && !names[1].contains('@'));
        assert!(i.size_bytes.unwrap() > 0);
    }
    let rv = c.resource_version();
    c.set_node_ready("n", false);
    let n = c.get_node("n").unwrap();
    assert!(
        n.spec
            .as_ref()
            .unwrap()
            .taints
            .as_ref()
            .unwrap()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule")
    );
    let ready = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    c.set_node_ready("n", true);
    assert!(c.get_node("n").unwrap().spec.unwrap().taints.is_none());
    c.set_node_images("n", vec![]);
    c.set_node_unschedulable("n", true);
    c.set_node_taints("n", vec![]);
    c.modify_node("n", |n| {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("x".into(), "y".into());
    });
    assert!(c.remove_node("n"));
    assert!(!c.remove_node("n"));
    let w = c
        .client(None)
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .unwrap();
    assert_eq!(w.status(), 401);
    c.add_token("admin", Subject::admin());
    let mut w = c
        .client(Some("admin"))
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .unwrap();
    let types: Vec<String> = w
        .collect_until_end(Duration::from_secs(3))
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        types,
        [
            "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED",
            "DELETED"
        ]
    );
}

#[test]
fn fault_injection() {
    let c = fixture_cluster();
    let p0 = c.client(Some("p0"));
    let path = pod_path("placeholder-0");
    c.fail_next(
        Matcher::new("GET", &path),
        FaultResponse::internal_error(),
        2,
    );
    assert_eq!(p0.get(&path).unwrap().status, 500);
    assert_eq!(p0.get(&path).unwrap().status, 500);
    assert_eq!(p0.get(&path).unwrap().status, 200);
    c.fail_next(Matcher::any(), FaultResponse::throttled(3), 1);
    let r = p0.get(&path).unwrap();
    assert_eq!((r.status, r.header("retry-after")), (429, Some("3")));
    assert_eq!(r.json()["details"]["retryAfterSeconds"], 3);
    c.fail_next(
        Matcher::new("GET", "/api/v1/namespaces/"),
        FaultResponse::truncated_json(),
        1,
    );
    let r = p0.get(&path).unwrap();
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<serde_json::Value>(&r.body).is_err());
    c.fail_next(
        Matcher::any(),
        FaultResponse::json(
            200,
            json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "wrong"}}),
        ),
        1,
    );
    assert_eq!(p0.get(&path).unwrap().json()["kind"], "Node");
    c.fail_next(
        Matcher::custom(|r| r.method == "POST" && r.path.ends_with("/eviction")),
        FaultResponse::CloseConnection,
        1,
    );
    assert!(
        p0.post(
            &format!("{path}/eviction"),
            &eviction_body("placeholder-0", None)
        )
        .is_err()
    );
    assert_eq!(c.pods(NS).len(), 3);
    assert_eq!(c.counters().faults_injected, 6);
    let recorded = c.requests();
    assert_eq!(recorded.last().unwrap().status, 0);
    assert_eq!(recorded.last().unwrap().user.as_deref(), Some(SA_USER));
    assert!(recorded.last().unwrap().is_eviction());
    // Latency.
    c.set_latency(Duration::from_millis(150));
    let t = Instant::now();
    assert_eq!(p0.get(&path).unwrap().status, 200);
    assert!(t.elapsed() >= Duration::from_millis(150));
    c.set_latency(Duration::ZERO);
    // wait_for_request sees earlier requests and records bodies.
    let r = c
        .wait_for_request(|r| r.is_eviction(), Duration::from_millis(10))
        .unwrap();
    assert_eq!(r.body.unwrap()["metadata"]["name"], "placeholder-0");
    c.clear_requests();
    assert!(c.requests().is_empty());
    assert_eq!(c.counters().requests, 0);
}

#[test]
fn outage_keeps_the_port() {
    let c = fixture_cluster();
    let url = c.url();
    let p0 = c.client(Some("p0"));
    let mut w = p0
        .watch(&format!(
            "/api/v1/namespaces/{NS}/pods?watch=true&timeoutSeconds=30"
        ))
        .unwrap();
    for _ in 0..3 {
        w.next_event(Duration::from_secs(2)).unwrap().unwrap();
    }
    c.set_outage(true);
    assert!(p0.get(&pod_path("placeholder-0")).is_err());
    assert!(
        std::net::TcpStream::connect(c.addr()).is_err(),
        "connections are refused"
    );
    assert!(
        !matches!(w.next_event(Duration::from_secs(2)), Ok(Some(_))),
        "open watches are cut"
    );
    c.set_outage(false);
    assert_eq!(c.url(), url);
    assert_eq!(p0.get(&pod_path("placeholder-0")).unwrap().status, 200);
    c.set_outage_mode(Some(fake_apiserver::OutageMode::AcceptAndClose));
    assert!(p0.get(&pod_path("placeholder-0")).is_err());
    c.set_outage_mode(None);
    assert_eq!(p0.get(&pod_path("placeholder-0")).unwrap().status, 200);
}

#[test]
fn kubeconfig_and_pod_creation() {
    let c = fixture_cluster();
    let dir = std::env::temp_dir().join(format!("fake-apiserver-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = c.write_kubeconfig(&dir, "p0", NS);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("server: \"{}\"", c.url())));
    assert!(text.contains("token: \"p0\""));
    assert!(text.contains("namespace: \"placeholders\""));
    assert!(text.contains("current-context: fake"));
    let _ = std::fs::remove_dir_all(&dir);
    // POST a bare pod: it is scheduled and started.
    let admin = c.client(Some("admin"));
    let r = admin
        .post(
            "/api/v1/namespaces/users/pods",
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "jupyter-"}, "spec": {"containers": [{"name": "nb", "image": "x"}]}}),
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let name = r.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert!(c.wait_pods_ready("users", 1, Duration::from_secs(3)));
    assert_eq!(
        c.get_pod("users", &name)
            .unwrap()
            .status
            .unwrap()
            .qos_class
            .as_deref(),
        Some("BestEffort")
    );
    let r = admin
        .post(
            "/api/v1/namespaces/users/pods",
            &json!({"metadata": {"name": name}, "spec": {"containers": []}}),
        )
        .unwrap();
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["reason"], "AlreadyExists");
}

#[test]
fn lists_page_at_limit_with_a_continue_token_as_the_real_server() {
    let c = FakeCluster::start_with(fast_config());
    c.add_token("admin", Subject::admin());
    for i in 0..5 {
        c.add_node(fake_apiserver::NodeBuilder::new(&format!("node-{i}")));
    }
    let client = c.client(Some("admin"));
    let first = client.get("/api/v1/nodes?limit=2").unwrap().json();
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"].clone();
    let mut names = Vec::new();
    let mut page = first;
    loop {
        for item in page["items"].as_array().unwrap() {
            names.push(item["metadata"]["name"].as_str().unwrap().to_string());
        }
        // Every page of one list carries the first page's resourceVersion.
        assert_eq!(page["metadata"]["resourceVersion"], rv);
        let Some(token) = page["metadata"]["continue"].as_str() else {
            assert!(page["metadata"].get("remainingItemCount").is_none());
            break;
        };
        let token: String = token
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        page = client
            .get(&format!("/api/v1/nodes?limit=2&continue={token}"))
            .unwrap()
            .json();
    }
    assert_eq!(names, ["node-0", "node-1", "node-2", "node-3", "node-4"]);
    let bad = client
        .get("/api/v1/nodes?limit=2&continue=garbage")
        .unwrap();
    assert_eq!(bad.status, 400);
    let all = client.get("/api/v1/nodes").unwrap().json();
    assert_eq!(all["items"].as_array().map(Vec::len), Some(5));
    assert!(all["metadata"].get("continue").is_none());
}
