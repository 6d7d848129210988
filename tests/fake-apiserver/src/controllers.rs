//! The cluster's behaviour: StatefulSet controller, default scheduler (filters +
//! LeastAllocated), a kubelet that starts and stops pods, the node-lifecycle
//! controller's not-ready taint, the eviction subresource and PDB accounting.
//! Everything runs under the state mutex, driven by [`State::reconcile`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, HostIP, Node, Pod, PodCondition, PodIP,
    PodSpec, PodStatus, Taint, Toleration,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::objects::{NodeBuilder, PodTemplate, ready_condition, set_not_ready_taint, time_of};
use crate::quantity;
use crate::selector::node_requirement_matches;
use crate::status::Status;
use crate::store::{Action, Key, PdbState, State, StatefulSetState, pod_key, statefulset_owner};

/// DeleteOptions that matter to the fake.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeleteOpts {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub grace: Option<i64>,
    pub dry_run: bool,
}

/// A PDB's computed status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PdbCalc {
    pub expected: i32,
    pub desired: i32,
    pub current: i32,
    pub allowed: i32,
    pub disrupted: BTreeMap<String, SystemTime>,
}

pub(crate) fn pod_ready(pod: &Pod) -> bool {
    condition_true(pod, "Ready")
}

fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Upserts a pod condition; the transition time changes only with the status.
fn set_condition(
    status: &mut PodStatus,
    type_: &str,
    value: bool,
    reason: Option<&str>,
    message: Option<&str>,
    t: &Time,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let value = if value { "True" } else { "False" };
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != value {
            c.last_transition_time = Some(t.clone());
        }
        c.status = value.to_string();
        c.reason = reason.map(str::to_string);
        c.message = message.map(str::to_string);
    } else {
        conditions.push(PodCondition {
            type_: type_.to_string(),
            status: value.to_string(),
            last_transition_time: Some(t.clone()),
            reason: reason.map(str::to_string),
            message: message.map(str::to_string),
            ..PodCondition::default()
        });
    }
}

/// The scheduler's `Toleration.ToleratesTaint`.
pub(crate) fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Sum of container requests: (millicores, bytes); `nonzero` applies the
/// scheduler's defaults (100m, 200Mi) for scoring.
fn pod_requests(spec: Option<&PodSpec>, nonzero: bool) -> (i64, i64) {
    let mut cpu = 0;
    let mut mem = 0;
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or(&[]) {
        let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let get = |name: &str| req.and_then(|r| r.get(name)).map(|q| q.0.as_str());
        match get("cpu").and_then(quantity::cpu_millis) {
            Some(v) => cpu += v,
            None if nonzero => cpu += 100,
            None => {}
        }
        match get("memory").and_then(quantity::whole_units) {
            Some(v) => mem += v,
            None if nonzero => mem += 200 * 1024 * 1024,
            None => {}
        }
    }
    (cpu, mem)
}

fn qos_class(spec: &PodSpec) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for c in &spec.containers {
        let r = c.resources.as_ref();
        let req = r.and_then(|r| r.requests.as_ref());
        let lim = r.and_then(|r| r.limits.as_ref());
        if req.is_some_and(|m| !m.is_empty()) || lim.is_some_and(|m| !m.is_empty()) {
            any = true;
        }
        for name in ["cpu", "memory"] {
            let l = lim.and_then(|m| m.get(name));
            let q = req.and_then(|m| m.get(name)).or(l);
            if l.is_none() || q != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_alloc(node: &Node, name: &str) -> Option<i64> {
    let q = node.status.as_ref()?.allocatable.as_ref()?.get(name)?;
    if name == "cpu" {
        quantity::cpu_millis(&q.0)
    } else {
        quantity::whole_units(&q.0)
    }
}

fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').trim().parse().unwrap_or(0);
            ((pct * i64::from(total) + 99) / 100) as i32
        }
    }
}

impl State {
    /// Runs due timers and the scheduler until nothing changes.
    pub(crate) fn reconcile(&mut self, now: Instant) {
        for _ in 0..10_000 {
            let mut progressed = false;
            while let Some(action) = self.pop_due(now) {
                self.fire(action, now);
                progressed = true;
            }
            if self.schedule_pending(now) > 0 {
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
    }

    fn fire(&mut self, action: Action, now: Instant) {
        match action {
            Action::StartPod { key, uid } => self.start_pod(&key, &uid),
            Action::RemovePod { key, uid } => {
                let terminating = self.pods.get(&key).is_some_and(|p| {
                    p.metadata.uid.as_deref() == Some(uid.as_str())
                        && p.metadata.deletion_timestamp.is_some()
                });
                if terminating {
                    self.remove_pod(&key, now);
                }
            }
            Action::Recreate {
                namespace,
                sts,
                ordinal,
            } => {
                let name = format!("{sts}-{ordinal}");
                let wanted = self
                    .statefulsets
                    .get(&(namespace.clone(), sts.clone()))
                    .is_some_and(|s| ordinal < s.replicas);
                if wanted && !self.pods.contains_key(&(namespace.clone(), name)) {
                    self.create_sts_pod(&namespace, &sts, ordinal);
                }
            }
            Action::SetNodeReady { name, ready } => {
                self.set_node_ready(&name, ready);
            }
            Action::AddNode(builder) => {
                self.add_node(&builder);
            }
        }
    }

    // ---- nodes ----

    pub(crate) fn add_node(&mut self, builder: &NodeBuilder) -> Node {
        self.insert_node(builder.build_at(self.clock.wall()))
    }

    /// Like the kubelet + node-lifecycle controller: the Ready condition changes
    /// (one MODIFIED), then the not-ready NoSchedule taint follows (another).
    pub(crate) fn set_node_ready(&mut self, name: &str, ready: bool) -> bool {
        let t = time_of(self.clock.wall());
        let found = self
            .modify_node(name, |n| {
                let status = n.status.get_or_insert_with(Default::default);
                let conditions = status.conditions.get_or_insert_with(Vec::new);
                let new = ready_condition(ready, t.clone());
                match conditions.iter_mut().find(|c| c.type_ == "Ready") {
                    Some(c) if c.status == new.status => c.last_heartbeat_time = Some(t.clone()),
                    Some(c) => *c = new,
                    None => conditions.push(new),
                }
            })
            .is_some();
        self.modify_node(name, |n| {
            let spec = n.spec.get_or_insert_with(Default::default);
            let mut taints = spec.taints.take().unwrap_or_default();
            set_not_ready_taint(&mut taints, !ready);
            spec.taints = (!taints.is_empty()).then_some(taints);
        });
        found
    }

    // ---- pods ----

    /// Defaults a new pod the way admission does: default NoExecute
    /// tolerations, Pending status, QoS class.
    pub(crate) fn admit_pod(&mut self, pod: &mut Pod) {
        let spec = pod.spec.get_or_insert_with(Default::default);
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let has = tolerations.iter().any(|t| {
                t.key.as_deref() == Some(key)
                    && t.effect.as_deref().is_none_or(|e| e == "NoExecute")
            });
            if !has {
                tolerations.push(Toleration {
                    key: Some(key.into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(300),
                    value: None,
                });
            }
        }
        let qos = qos_class(spec).to_string();
        let status = pod.status.get_or_insert_with(Default::default);
        if status.phase.is_none() {
            status.phase = Some("Pending".into());
        }
        if status.qos_class.is_none() {
            status.qos_class = Some(qos);
        }
        if pod.metadata.namespace.is_none() {
            pod.metadata.namespace = Some("default".into());
        }
        if pod.metadata.generation.is_none() {
            pod.metadata.generation = Some(1);
        }
    }

    /// Adds a pod; a pod created with a nodeName is started by the kubelet.
    pub(crate) fn add_pod(&mut self, mut pod: Pod, now: Instant) -> Pod {
        self.admit_pod(&mut pod);
        let pod = self.insert_pod(pod);
        if node_name(&pod).is_some() && phase(&pod) == "Pending" {
            self.after_bind(
                &pod_key(&pod),
                pod.metadata.uid.clone().unwrap_or_default(),
                now,
            );
        }
        pod
    }

    pub(crate) fn add_statefulset(
        &mut self,
        namespace: &str,
        name: &str,
        replicas: i32,
        template: PodTemplate,
        now: Instant,
    ) {
        let uid = self.rng.uuid();
        let revision = format!("{name}-{}", self.rng.hex(9));
        self.statefulsets.insert(
            (namespace.to_string(), name.to_string()),
            StatefulSetState {
                uid,
                replicas,
                template,
                revision,
            },
        );
        self.scale_statefulset(namespace, name, replicas, now);
    }

    /// Sets replicas; creates missing ordinals, deletes surplus ones (highest first).
    pub(crate) fn scale_statefulset(
        &mut self,
        namespace: &str,
        name: &str,
        replicas: i32,
        now: Instant,
    ) -> bool {
        let Some(sts) = self
            .statefulsets
            .get_mut(&(namespace.to_string(), name.to_string()))
        else {
            return false;
        };
        sts.replicas = replicas;
        for ordinal in 0..replicas {
            if !self
                .pods
                .contains_key(&(namespace.to_string(), format!("{name}-{ordinal}")))
            {
                self.create_sts_pod(namespace, name, ordinal);
            }
        }
        let surplus: Vec<Key> = self
            .pods
            .iter()
            .filter(|(k, p)| {
                k.0 == namespace
                    && statefulset_owner(p).is_some_and(|(s, o)| s == name && o >= replicas)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in surplus.into_iter().rev() {
            let _ = self.delete_pod(&key, &DeleteOpts::default(), now);
        }
        true
    }

    fn create_sts_pod(&mut self, namespace: &str, sts_name: &str, ordinal: i32) -> Option<Pod> {
        let sts = self
            .statefulsets
            .get(&(namespace.to_string(), sts_name.to_string()))?
            .clone();
        let pod_name = format!("{sts_name}-{ordinal}");
        let mut labels = sts.template.labels.clone();
        labels.insert(
            "statefulset.kubernetes.io/pod-name".into(),
            pod_name.clone(),
        );
        labels.insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string());
        labels.insert("controller-revision-hash".into(), sts.revision.clone());
        let mut spec = sts.template.to_pod_spec();
        spec.hostname = Some(pod_name.clone());
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some(pod_name),
                generate_name: Some(format!("{sts_name}-")),
                namespace: Some(namespace.to_string()),
                labels: Some(labels),
                annotations: (!sts.template.annotations.is_empty())
                    .then(|| sts.template.annotations.clone()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: sts_name.to_string(),
                    uid: sts.uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        };
        self.admit_pod(&mut pod);
        Some(self.insert_pod(pod))
    }

    /// The kubelet: a bound Pending pod becomes Running and Ready.
    fn start_pod(&mut self, key: &Key, uid: &str) {
        let Some(pod) = self.pods.get(key) else {
            return;
        };
        if pod.metadata.uid.as_deref() != Some(uid)
            || pod.metadata.deletion_timestamp.is_some()
            || phase(pod) != "Pending"
        {
            return;
        }
        let Some(node) = node_name(pod).map(str::to_string) else {
            return;
        };
        let host_ip = self
            .nodes
            .get(&node)
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone())
            .unwrap_or_else(|| "127.0.0.1".into());
        let n = self.next_pod_ip;
        self.next_pod_ip += 1;
        let pod_ip = format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 1);
        let container_ids: Vec<String> = (0..pod.spec.as_ref().map_or(0, |s| s.containers.len()))
            .map(|_| self.rng.hex(64))
            .collect();
        let t = time_of(self.clock.wall());
        self.modify_pod(key, |p| {
            let containers = p
                .spec
                .as_ref()
                .map(|s| s.containers.clone())
                .unwrap_or_default();
            let status = p.status.get_or_insert_with(Default::default);
            status.phase = Some("Running".into());
            for c in [
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready",
                "PodScheduled",
            ] {
                set_condition(status, c, true, None, None, &t);
            }
            status.host_ip = Some(host_ip.clone());
            status.host_ips = Some(vec![HostIP { ip: host_ip }]);
            status.pod_ip = Some(pod_ip.clone());
            status.pod_ips = Some(vec![PodIP { ip: pod_ip }]);
            status.start_time = Some(t.clone());
            status.container_statuses = Some(
                containers
                    .iter()
                    .zip(container_ids)
                    .map(|(c, id)| {
                        let image = c.image.clone().unwrap_or_default();
                        let repo = image.split(':').next().unwrap_or("").to_string();
                        ContainerStatus {
                            name: c.name.clone(),
                            state: Some(ContainerState {
                                running: Some(ContainerStateRunning {
                                    started_at: Some(t.clone()),
                                }),
                                ..ContainerState::default()
                            }),
                            last_state: Some(ContainerState::default()),
                            ready: true,
                            restart_count: 0,
                            image_id: format!("{repo}@sha256:{}", &id[..64.min(id.len())]),
                            image,
                            container_id: Some(format!("containerd://{id}")),
                            started: Some(true),
                            ..ContainerStatus::default()
                        }
                    })
                    .collect(),
            );
        });
    }

    /// Flips a pod's readiness (Ready and ContainersReady conditions, container statuses).
    pub(crate) fn set_pod_ready(&mut self, key: &Key, ready: bool) -> bool {
        let t = time_of(self.clock.wall());
        self.modify_pod(key, |p| {
            let status = p.status.get_or_insert_with(Default::default);
            set_condition(
                status,
                "ContainersReady",
                ready,
                (!ready).then_some("ContainersNotReady"),
                None,
                &t,
            );
            set_condition(
                status,
                "Ready",
                ready,
                (!ready).then_some("ContainersNotReady"),
                None,
                &t,
            );
            for cs in status.container_statuses.iter_mut().flatten() {
                cs.ready = ready;
            }
        })
        .is_some()
    }

    fn after_bind(&mut self, key: &Key, uid: String, now: Instant) {
        let when = now + self.cfg.start_delay;
        self.add_timer(
            when,
            Action::StartPod {
                key: key.clone(),
                uid,
            },
        );
    }

    // ---- scheduler ----

    /// Binds every schedulable Pending pod; returns how many were bound.
    fn schedule_pending(&mut self, now: Instant) -> usize {
        let mut pending: Vec<(i32, String, u64, Key)> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                node_name(p).is_none()
                    && p.metadata.deletion_timestamp.is_none()
                    && phase(p) == "Pending"
            })
            .map(|(k, p)| {
                let prio = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
                let created = p
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default();
                let rv = p
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                (-prio, created, rv, k.clone())
            })
            .collect();
        pending.sort();
        let mut bound = 0;
        for (_, _, _, key) in pending {
            let Some(pod) = self.pods.get(&key) else {
                continue;
            };
            let t = time_of(self.clock.wall());
            match self.pick_node(pod) {
                Ok(node) => {
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    self.modify_pod(&key, |p| {
                        p.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
                        let status = p.status.get_or_insert_with(Default::default);
                        set_condition(status, "PodScheduled", true, None, None, &t);
                    });
                    self.counters.bindings += 1;
                    self.after_bind(&key, uid, now);
                    bound += 1;
                }
                Err(message) => {
                    self.modify_pod(&key, |p| {
                        let status = p.status.get_or_insert_with(Default::default);
                        set_condition(
                            status,
                            "PodScheduled",
                            false,
                            Some("Unschedulable"),
                            Some(&message),
                            &t,
                        );
                    });
                }
            }
        }
        bound
    }

    /// Filters (unschedulable, taints, readiness, nodeSelector/affinity, pod
    /// count, cpu, memory) and LeastAllocated scoring; ties go to the first name.
    fn pick_node(&self, pod: &Pod) -> Result<String, String> {
        if self.nodes.is_empty() {
            return Ok("node-0".into());
        }
        let spec = pod.spec.as_ref();
        let (cpu_req, mem_req) = pod_requests(spec, false);
        let (cpu_score_req, mem_score_req) = pod_requests(spec, true);
        // usage per node: (cpu, mem, cpu nonzero, mem nonzero, pods)
        let mut usage: BTreeMap<&str, (i64, i64, i64, i64, i64)> = BTreeMap::new();
        for p in self.pods.values() {
            let Some(n) = node_name(p) else { continue };
            if matches!(phase(p), "Succeeded" | "Failed") {
                continue;
            }
            let (c, m) = pod_requests(p.spec.as_ref(), false);
            let (cz, mz) = pod_requests(p.spec.as_ref(), true);
            let u = usage.entry(n).or_default();
            u.0 += c;
            u.1 += m;
            u.2 += cz;
            u.3 += mz;
            u.4 += 1;
        }
        let tolerations: &[Toleration] = spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut best: Option<(i64, &str)> = None;
        for (name, node) in &self.nodes {
            let u = usage.get(name.as_str()).copied().unwrap_or_default();
            let verdict = self.node_fits(pod, node, tolerations, u, cpu_req, mem_req);
            match verdict {
                Err(reason) => *reasons.entry(reason).or_default() += 1,
                Ok(()) => {
                    let cpu_alloc = node_alloc(node, "cpu").unwrap_or(0);
                    let mem_alloc = node_alloc(node, "memory").unwrap_or(0);
                    let score_of = |alloc: i64, used: i64| {
                        if alloc <= 0 {
                            0
                        } else {
                            ((alloc - used).max(0) * 100) / alloc
                        }
                    };
                    let score = (score_of(cpu_alloc, u.2 + cpu_score_req)
                        + score_of(mem_alloc, u.3 + mem_score_req))
                        / 2;
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, name));
                    }
                }
            }
        }
        if let Some((_, name)) = best {
            return Ok(name.to_string());
        }
        let n = self.nodes.len();
        let summary: Vec<String> = reasons.iter().map(|(r, c)| format!("{c} {r}")).collect();
        Err(format!(
            "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
            summary.join(", ")
        ))
    }

    fn node_fits(
        &self,
        pod: &Pod,
        node: &Node,
        tolerations: &[Toleration],
        usage: (i64, i64, i64, i64, i64),
        cpu_req: i64,
        mem_req: i64,
    ) -> Result<(), String> {
        let node_spec = node.spec.as_ref();
        if node_spec.and_then(|s| s.unschedulable).unwrap_or(false) {
            let taint = Taint {
                key: "node.kubernetes.io/unschedulable".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            };
            if !tolerations.iter().any(|t| tolerates(t, &taint)) {
                return Err("node(s) were unschedulable".into());
            }
        }
        for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
            if taint.effect == "PreferNoSchedule" {
                continue;
            }
            if !tolerations.iter().any(|t| tolerates(t, taint)) {
                return Err(format!(
                    "node(s) had untolerated taint {{{}: {}}}",
                    taint.key,
                    taint.value.as_deref().unwrap_or("")
                ));
            }
        }
        if !node_ready(node) {
            return Err("node(s) were not ready".into());
        }
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let spec = pod.spec.as_ref();
        let selector_ok = spec
            .and_then(|s| s.node_selector.as_ref())
            .is_none_or(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
        let node_name = node.metadata.name.as_deref().unwrap_or("");
        let affinity_ok = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .is_none_or(|required| {
                required.node_selector_terms.iter().any(|term| {
                    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
                    let fields = term.match_fields.as_deref().unwrap_or(&[]);
                    if exprs.is_empty() && fields.is_empty() {
                        return false;
                    }
                    let name_labels =
                        BTreeMap::from([("metadata.name".to_string(), node_name.to_string())]);
                    exprs.iter().all(|e| node_requirement_matches(e, labels))
                        && fields
                            .iter()
                            .all(|f| node_requirement_matches(f, &name_labels))
                })
            });
        if !selector_ok || !affinity_ok {
            return Err("node(s) didn't match Pod's node affinity/selector".into());
        }
        if let Some(max_pods) = node_alloc(node, "pods")
            && usage.4 + 1 > max_pods
        {
            return Err("Too many pods".into());
        }
        if let Some(cpu) = node_alloc(node, "cpu")
            && cpu_req > 0
            && usage.0 + cpu_req > cpu
        {
            return Err("Insufficient cpu".into());
        }
        if let Some(mem) = node_alloc(node, "memory")
            && mem_req > 0
            && usage.1 + mem_req > mem
        {
            return Err("Insufficient memory".into());
        }
        Ok(())
    }

    // ---- deletion and eviction ----

    /// DELETE semantics: preconditions, graceful deletion (deletionTimestamp,
    /// the kubelet removes the pod later), immediate removal of unscheduled or
    /// finished pods, dry run.
    pub(crate) fn delete_pod(
        &mut self,
        key: &Key,
        opts: &DeleteOpts,
        now: Instant,
    ) -> Result<Pod, Box<Status>> {
        let pod = self
            .pods
            .get(key)
            .ok_or_else(|| Box::new(Status::not_found("pods", "", &key.1)))?
            .clone();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if let Some(want) = &opts.uid
            && *want != uid
        {
            return Err(Box::new(Status::conflict_uid(&key.1, want, &uid)));
        }
        if let Some(want) = &opts.resource_version {
            let have = pod.metadata.resource_version.clone().unwrap_or_default();
            if *want != have {
                return Err(Box::new(Status::conflict_resource_version(
                    &key.1, want, &have,
                )));
            }
        }
        let immediate = node_name(&pod).is_none() || matches!(phase(&pod), "Succeeded" | "Failed");
        let mut grace = opts
            .grace
            .or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .max(0);
        if immediate {
            grace = 0;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Already terminating: a zero grace period forces removal now.
            if !opts.dry_run && opts.grace == Some(0) {
                self.remove_pod(key, now);
            }
            return Ok(pod);
        }
        let deletion = time_of(self.clock.wall() + Duration::from_secs(grace as u64));
        let mark = |p: &mut Pod| {
            p.metadata.deletion_timestamp = Some(deletion.clone());
            p.metadata.deletion_grace_period_seconds = Some(grace);
            p.metadata.generation = Some(p.metadata.generation.unwrap_or(1) + 1);
        };
        if opts.dry_run {
            let mut out = pod;
            mark(&mut out);
            return Ok(out);
        }
        self.counters.pod_deletions += 1;
        if immediate {
            if let Some(p) = self.pods.get_mut(key) {
                mark(p);
            }
            return Ok(self.remove_pod(key, now).unwrap_or(pod));
        }
        let updated = self.modify_pod(key, mark).unwrap_or(pod);
        let delay = Duration::from_secs(grace as u64).min(self.cfg.termination_delay);
        self.add_timer(
            now + delay,
            Action::RemovePod {
                key: key.clone(),
                uid,
            },
        );
        Ok(updated)
    }

    /// The eviction subresource (policy/v1): PDB check, then delete.
    pub(crate) fn evict_pod(
        &mut self,
        key: &Key,
        opts: &DeleteOpts,
        now: Instant,
    ) -> Result<(), Box<Status>> {
        let pod = self
            .pods
            .get(key)
            .ok_or_else(|| Box::new(Status::not_found("pods", "", &key.1)))?
            .clone();
        let ignore_pdb = matches!(phase(&pod), "Pending" | "Succeeded" | "Failed")
            || pod.metadata.deletion_timestamp.is_some();
        if !ignore_pdb {
            let matching: Vec<Key> = self
                .pdbs
                .iter()
                .filter(|(k, p)| {
                    k.0 == key.0 && p.selector.matches_opt(pod.metadata.labels.as_ref())
                })
                .map(|(k, _)| k.clone())
                .collect();
            if matching.len() > 1 {
                return Err(Box::new(Status::multiple_pdbs()));
            }
            if let Some(pdb_key) = matching.first() {
                let calc = self.pdb_status(pdb_key, now);
                let unhealthy_ok =
                    !pod_ready(&pod) && calc.current >= calc.desired && calc.desired > 0;
                if !unhealthy_ok {
                    if calc.allowed <= 0 {
                        self.counters.evictions_refused += 1;
                        return Err(Box::new(Status::pdb_violation(
                            &pdb_key.1,
                            calc.desired,
                            calc.current,
                        )));
                    }
                    if !opts.dry_run
                        && let Some(p) = self.pdbs.get_mut(pdb_key)
                    {
                        // Recorded before the delete: a delete that then
                        // fails (409) still uses up the budget, as observed.
                        p.disrupted.insert(key.1.clone(), (now, self.clock.wall()));
                    }
                }
            }
        }
        self.delete_pod(key, opts, now)?;
        self.counters.evictions_allowed += 1;
        Ok(())
    }

    // ---- PDBs ----

    pub(crate) fn add_pdb(&mut self, mut pdb: PodDisruptionBudget) -> Result<(), String> {
        let selector = crate::selector::Selector::from_label_selector(
            &pdb.spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .unwrap_or_default(),
        )?;
        let ns = pdb
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pdb.metadata.name.clone().unwrap_or_default();
        pdb.metadata.namespace = Some(ns.clone());
        self.new_meta(&mut pdb.metadata);
        pdb.metadata.generation = Some(1);
        let rv = self.next_rv();
        pdb.metadata.resource_version = Some(rv.to_string());
        self.pdbs.insert(
            (ns, name),
            PdbState {
                pdb,
                selector,
                disrupted: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// The disruption controller's view of a PDB right now.
    pub(crate) fn pdb_status(&self, key: &Key, now: Instant) -> PdbCalc {
        let Some(pdb) = self.pdbs.get(key) else {
            return PdbCalc {
                expected: 0,
                desired: 0,
                current: 0,
                allowed: 0,
                disrupted: BTreeMap::new(),
            };
        };
        let ns = &key.0;
        let selected: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|(k, p)| k.0 == *ns && pdb.selector.matches_opt(p.metadata.labels.as_ref()))
            .map(|(_, p)| p)
            .collect();
        let mut counted = BTreeSet::new();
        let mut expected = 0i32;
        for ((sns, sname), sts) in &self.statefulsets {
            if sns == ns && pdb.selector.matches(&sts.template.labels) {
                expected += sts.replicas;
                counted.insert(sname.clone());
            }
        }
        for p in &selected {
            if !statefulset_owner(p).is_some_and(|(s, _)| counted.contains(&s)) {
                expected += 1;
            }
        }
        let expiry = self.cfg.pdb_disruption_expiry;
        let disrupted: BTreeMap<String, SystemTime> = pdb
            .disrupted
            .iter()
            .filter(|(name, (at, _))| {
                now < *at + expiry
                    && selected.iter().any(|p| {
                        p.metadata.name.as_deref() == Some(name.as_str())
                            && p.metadata.deletion_timestamp.is_none()
                    })
            })
            .map(|(name, (_, t))| (name.clone(), *t))
            .collect();
        let current = selected
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && !p
                        .metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| disrupted.contains_key(n))
                    && pod_ready(p)
            })
            .count() as i32;
        let spec = pdb.pdb.spec.as_ref();
        let desired = if let Some(mu) = spec.and_then(|s| s.max_unavailable.as_ref()) {
            (expected - scaled(mu, expected)).max(0)
        } else if let Some(ma) = spec.and_then(|s| s.min_available.as_ref()) {
            scaled(ma, expected)
        } else {
            expected
        };
        PdbCalc {
            expected,
            desired,
            current,
            allowed: (current - desired).max(0),
            disrupted,
        }
    }

    /// The PDB object with a freshly computed status.
    pub(crate) fn pdb_object(&self, key: &Key, now: Instant) -> Option<PodDisruptionBudget> {
        let mut pdb = self.pdbs.get(key)?.pdb.clone();
        let calc = self.pdb_status(key, now);
        let t = time_of(self.clock.wall());
        let allowed = calc.allowed > 0;
        pdb.status = Some(PodDisruptionBudgetStatus {
            conditions: Some(vec![Condition {
                type_: "DisruptionAllowed".into(),
                status: if allowed { "True" } else { "False" }.into(),
                reason: if allowed {
                    "SufficientPods"
                } else {
                    "InsufficientPods"
                }
                .into(),
                message: String::new(),
                last_transition_time: t,
                observed_generation: Some(1),
            }]),
            current_healthy: calc.current,
            desired_healthy: calc.desired,
            disrupted_pods: (!calc.disrupted.is_empty()).then(|| {
                calc.disrupted
                    .iter()
                    .map(|(k, v)| (k.clone(), time_of(*v)))
                    .collect()
            }),
            disruptions_allowed: calc.allowed,
            expected_pods: calc.expected,
            observed_generation: Some(1),
        });
        Some(pdb)
    }
}
