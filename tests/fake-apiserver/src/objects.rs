//! Builders for realistic Node and Pod objects, ids and timestamps.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, DaemonEndpoint, EnvVar, EnvVarSource, Node, NodeAddress,
    NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo, ObjectFieldSelector,
    PodSpec, ResourceRequirements, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// A small deterministic PRNG (splitmix64) for uids, names and digests.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Seeded from the clock.
    pub fn from_time() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed);
        Self(nanos ^ u64::from(std::process::id()).rotate_left(32))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random RFC 4122 version-4 uuid (`8-4-4-4-12` lowercase hex).
    pub fn uuid(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// `n` characters from kube's name-suffix alphabet (lowercase consonants and
    /// digits, as `generateName` uses).
    pub fn suffix(&mut self, n: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| ALPHABET[(self.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n + 16);
        while s.len() < n {
            s.push_str(&format!("{:016x}", self.next_u64()));
        }
        s.truncate(n);
        s
    }
}

/// A `metav1.Time` for a `SystemTime` (second precision, like the API).
pub fn time_of(t: SystemTime) -> Time {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn quantity(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// `n` realistic entries for `status.images`: each has a digest name
/// (`registry/repo@sha256:...`) and a tag name (`registry/repo:tag`), sizes from
/// a few MB to several GB, largest first as the kubelet reports them.
/// Deterministic for a given `seed`.
pub fn realistic_images(n: usize, seed: u64) -> Vec<ContainerImage> {
    const REPOS: &[&str] = &[
        "quay.io/jupyter/scipy-notebook",
        "quay.io/jupyter/datascience-notebook",
        "quay.io/jupyter/pytorch-notebook",
        "quay.io/jupyter/tensorflow-notebook",
        "quay.io/jupyter/r-notebook",
        "quay.io/jupyter/minimal-notebook",
        "quay.io/jupyterhub/k8s-network-tools",
        "quay.io/jupyterhub/k8s-image-awaiter",
        "quay.io/jupyterhub/configurable-http-proxy",
        "docker.io/library/python",
        "docker.io/library/nginx",
        "docker.io/rocker/rstudio",
        "ghcr.io/example/analysis-env",
        "ghcr.io/example/gpu-workbench",
        "registry.k8s.io/kube-proxy",
        "registry.k8s.io/coredns/coredns",
        "registry.k8s.io/pause",
        "gcr.io/k8s-staging/csi-node-driver-registrar",
        "us-docker.pkg.dev/example/images/course-env",
        "europe-docker.pkg.dev/example/images/workshop",
    ];
    const TAGS: &[&str] = &[
        "2026-11-01",
        "latest",
        "v4.2.1",
        "3.12-slim",
        "1.33.2",
        "2025.10",
        "main-8f3c1d2",
        "3.10",
    ];
    let mut rng = Rng::new(seed ^ 0x1a6e5_u64.wrapping_mul(7));
    let mut images: Vec<ContainerImage> = (0..n)
        .map(|i| {
            let repo = REPOS[i % REPOS.len()];
            let tag = if i < REPOS.len() {
                TAGS[i % TAGS.len()].to_string()
            } else {
                format!(
                    "{}-r{}",
                    TAGS[(i / REPOS.len()) % TAGS.len()],
                    i / REPOS.len()
                )
            };
            let digest = rng.hex(64);
            let size = 5_000_000 + (rng.next_u64() % 6_000_000_000) as i64;
            ContainerImage {
                names: Some(vec![
                    format!("{repo}@sha256:{digest}"),
                    format!("{repo}:{tag}"),
                ]),
                size_bytes: Some(size),
            }
        })
        .collect();
    images.sort_by_key(|i| std::cmp::Reverse(i.size_bytes.unwrap_or(0)));
    images
}

/// Describes a node for [`crate::FakeCluster::add_node`].
#[derive(Clone, Debug)]
pub struct NodeBuilder {
    /// Node name (also `kubernetes.io/hostname`).
    pub name: String,
    /// Allocatable (and capacity) CPU, e.g. `"8"`.
    pub cpu: String,
    /// Allocatable (and capacity) memory, e.g. `"32Gi"`.
    pub memory: String,
    /// Allocatable pod count.
    pub pods: u32,
    /// Extra labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Taints (the not-ready taint is added for a node that is not Ready).
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Ready condition.
    pub ready: bool,
    /// `status.images`.
    pub images: Vec<ContainerImage>,
    /// InternalIP address; derived from the name when `None`.
    pub internal_ip: Option<String>,
    /// Creation time; now when `None`.
    pub created: Option<SystemTime>,
}

impl NodeBuilder {
    /// A Ready 8-CPU / 32Gi / 110-pod node without images.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            pods: 110,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
            ready: true,
            images: Vec::new(),
            internal_ip: None,
            created: None,
        }
    }

    /// Allocatable CPU.
    pub fn cpu(mut self, cpu: &str) -> Self {
        self.cpu = cpu.to_string();
        self
    }

    /// Allocatable memory.
    pub fn memory(mut self, memory: &str) -> Self {
        self.memory = memory.to_string();
        self
    }

    /// Allocatable pods.
    pub fn pods(mut self, pods: u32) -> Self {
        self.pods = pods;
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds a taint (`value` may be empty).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        });
        self
    }

    /// Cordons the node.
    pub fn unschedulable(mut self, unschedulable: bool) -> Self {
        self.unschedulable = unschedulable;
        self
    }

    /// Ready condition (a not-Ready node also gets the not-ready NoSchedule taint).
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = ready;
        self
    }

    /// `status.images`.
    pub fn images(mut self, images: Vec<ContainerImage>) -> Self {
        self.images = images;
        self
    }

    /// `n` images from [`realistic_images`] seeded by the node name.
    pub fn realistic_images(self, n: usize) -> Self {
        let seed = self.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        self.images(realistic_images(n, seed))
    }

    /// InternalIP address.
    pub fn internal_ip(mut self, ip: &str) -> Self {
        self.internal_ip = Some(ip.to_string());
        self
    }

    /// Builds the Node (uid and resourceVersion are assigned by the store).
    pub fn build(&self) -> Node {
        self.build_at(SystemTime::now())
    }

    /// [`NodeBuilder::build`] with `now` as the creation and transition times
    /// unless set.
    pub fn build_at(&self, now: SystemTime) -> Node {
        let created = self.created.unwrap_or(now);
        let t = time_of(created);
        let mut labels = BTreeMap::from([
            ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("kubernetes.io/hostname".to_string(), self.name.clone()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
        ]);
        labels.extend(self.labels.clone());
        let mut annotations =
            BTreeMap::from([("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string())]);
        annotations.extend(self.annotations.clone());
        let mut taints = self.taints.clone();
        if !self.ready {
            set_not_ready_taint(&mut taints, true);
        }
        let resources = BTreeMap::from([
            ("cpu".to_string(), quantity(&self.cpu)),
            ("ephemeral-storage".to_string(), quantity("100Gi")),
            ("memory".to_string(), quantity(&self.memory)),
            ("pods".to_string(), quantity(&self.pods.to_string())),
        ]);
        let ip = self.internal_ip.clone().unwrap_or_else(|| {
            let h = self
                .name
                .bytes()
                .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
            format!("10.0.{}.{}", (h >> 8) % 250, h % 250 + 2)
        });
        let pressure = |type_: &str, reason: &str, message: &str| NodeCondition {
            type_: type_.to_string(),
            status: "False".into(),
            last_heartbeat_time: Some(t.clone()),
            last_transition_time: Some(t.clone()),
            reason: Some(reason.into()),
            message: Some(message.into()),
        };
        let conditions = vec![
            pressure(
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            pressure(
                "DiskPressure",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            pressure(
                "PIDPressure",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            ready_condition(self.ready, t.clone()),
        ];
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                creation_timestamp: Some(t.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                unschedulable: self.unschedulable.then_some(true),
                taints: (!taints.is_empty()).then_some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(resources.clone()),
                allocatable: Some(resources),
                conditions: Some(conditions),
                addresses: Some(vec![
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: ip,
                    },
                    NodeAddress {
                        type_: "Hostname".into(),
                        address: self.name.clone(),
                    },
                ]),
                daemon_endpoints: Some(NodeDaemonEndpoints {
                    kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }),
                }),
                node_info: Some(NodeSystemInfo {
                    machine_id: String::new(),
                    system_uuid: String::new(),
                    boot_id: String::new(),
                    kernel_version: "6.8.0-1024-fake".into(),
                    os_image: "Ubuntu 24.04.2 LTS".into(),
                    container_runtime_version: "containerd://2.0.5".into(),
                    kubelet_version: "v1.36.2".into(),
                    kube_proxy_version: String::new(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    swap: None,
                }),
                images: (!self.images.is_empty()).then(|| self.images.clone()),
                ..NodeStatus::default()
            }),
        }
    }
}

/// The kubelet's Ready condition.
pub(crate) fn ready_condition(ready: bool, t: Time) -> NodeCondition {
    NodeCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        last_heartbeat_time: Some(t.clone()),
        last_transition_time: Some(t),
        reason: Some(if ready { "KubeletReady" } else { "KubeletNotReady" }.into()),
        message: Some(
            if ready {
                "kubelet is posting ready status"
            } else {
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
            }
            .into(),
        ),
    }
}

/// Taint key the node-lifecycle controller uses for not-Ready nodes.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Adds or removes `node.kubernetes.io/not-ready:NoSchedule`.
pub(crate) fn set_not_ready_taint(taints: &mut Vec<Taint>, present: bool) {
    let is_it = |t: &Taint| t.key == NOT_READY_TAINT && t.effect == "NoSchedule";
    if present {
        if !taints.iter().any(is_it) {
            taints.push(Taint {
                key: NOT_READY_TAINT.into(),
                value: None,
                effect: "NoSchedule".into(),
                time_added: None,
            });
        }
    } else {
        taints.retain(|t| !is_it(t));
    }
}

/// The pod template of a StatefulSet (or of a bare pod via [`PodTemplate::to_pod_spec`]).
#[derive(Clone, Debug)]
pub struct PodTemplate {
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// Pod annotations.
    pub annotations: BTreeMap<String, String>,
    /// CPU request of the (single) container.
    pub cpu: Option<String>,
    /// Memory request of the (single) container.
    pub memory: Option<String>,
    /// Tolerations (the default not-ready/unreachable NoExecute tolerations are
    /// added on creation like the DefaultTolerationSeconds admission plugin does).
    pub tolerations: Vec<Toleration>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity`.
    pub affinity: Option<Affinity>,
    /// `spec.topologySpreadConstraints` (kept, not used by the fake scheduler).
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// `spec.priority`.
    pub priority: Option<i32>,
    /// `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// `spec.preemptionPolicy`.
    pub preemption_policy: Option<String>,
    /// Container name.
    pub container_name: String,
    /// Container image.
    pub image: String,
    /// `spec.serviceAccountName`.
    pub service_account: Option<String>,
    /// `spec.terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: i64,
}

impl Default for PodTemplate {
    fn default() -> Self {
        Self::new()
    }
}

impl PodTemplate {
    /// One container `placeholder` running `selfdestruct:dev`, no requests, grace 0.
    pub fn new() -> Self {
        Self {
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            cpu: None,
            memory: None,
            tolerations: Vec::new(),
            node_selector: BTreeMap::new(),
            affinity: None,
            topology_spread_constraints: Vec::new(),
            priority: None,
            priority_class_name: None,
            preemption_policy: None,
            container_name: "placeholder".into(),
            image: "selfdestruct:dev".into(),
            service_account: None,
            termination_grace_period_seconds: 0,
        }
    }

    /// The selfdestruct placeholder as in the fixtures: labels
    /// `app.kubernetes.io/name=selfdestruct`, `app.kubernetes.io/instance={instance}`,
    /// priority -10 (class `placeholder`, preemption Never), service account
    /// `placeholder`, requests `cpu`/`memory`.
    pub fn placeholder(instance: &str, cpu: &str, memory: &str) -> Self {
        Self::new()
            .label("app.kubernetes.io/name", "selfdestruct")
            .label("app.kubernetes.io/instance", instance)
            .requests(cpu, memory)
            .priority(-10, "placeholder")
            .preemption_policy("Never")
            .service_account("placeholder")
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// CPU and memory requests (`""` leaves one out).
    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        self.cpu = (!cpu.is_empty()).then(|| cpu.to_string());
        self.memory = (!memory.is_empty()).then(|| memory.to_string());
        self
    }

    /// Adds a toleration.
    pub fn toleration(mut self, t: Toleration) -> Self {
        self.tolerations.push(t);
        self
    }

    /// Tolerates a taint key (operator Exists, any effect when `effect` is empty).
    pub fn tolerate(self, key: &str, effect: &str) -> Self {
        self.toleration(Toleration {
            key: (!key.is_empty()).then(|| key.to_string()),
            operator: Some("Exists".into()),
            effect: (!effect.is_empty()).then(|| effect.to_string()),
            ..Toleration::default()
        })
    }

    /// Adds a nodeSelector entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Sets the affinity.
    pub fn affinity(mut self, affinity: Affinity) -> Self {
        self.affinity = Some(affinity);
        self
    }

    /// Sets priority and priority class.
    pub fn priority(mut self, priority: i32, class: &str) -> Self {
        self.priority = Some(priority);
        self.priority_class_name = (!class.is_empty()).then(|| class.to_string());
        self
    }

    /// Sets the preemption policy.
    pub fn preemption_policy(mut self, policy: &str) -> Self {
        self.preemption_policy = Some(policy.to_string());
        self
    }

    /// Sets the service account.
    pub fn service_account(mut self, sa: &str) -> Self {
        self.service_account = Some(sa.to_string());
        self
    }

    /// Sets the container image.
    pub fn image(mut self, image: &str) -> Self {
        self.image = image.to_string();
        self
    }

    /// Sets `terminationGracePeriodSeconds`.
    pub fn termination_grace(mut self, seconds: i64) -> Self {
        self.termination_grace_period_seconds = seconds;
        self
    }

    /// The pod spec (unscheduled).
    pub fn to_pod_spec(&self) -> PodSpec {
        let mut requests = BTreeMap::new();
        if let Some(c) = &self.cpu {
            requests.insert("cpu".to_string(), quantity(c));
        }
        if let Some(m) = &self.memory {
            requests.insert("memory".to_string(), quantity(m));
        }
        let env = |name: &str, path: &str| EnvVar {
            name: name.to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: path.to_string(),
                }),
                ..EnvVarSource::default()
            }),
        };
        PodSpec {
            containers: vec![Container {
                name: self.container_name.clone(),
                image: Some(self.image.clone()),
                image_pull_policy: Some("IfNotPresent".into()),
                env: Some(vec![
                    env("POD_NAME", "metadata.name"),
                    env("POD_NAMESPACE", "metadata.namespace"),
                    env("POD_UID", "metadata.uid"),
                    env("NODE_NAME", "spec.nodeName"),
                ]),
                resources: Some(ResourceRequirements {
                    requests: (!requests.is_empty()).then_some(requests),
                    ..ResourceRequirements::default()
                }),
                termination_message_path: Some("/dev/termination-log".into()),
                termination_message_policy: Some("File".into()),
                ..Container::default()
            }],
            restart_policy: Some("Always".into()),
            termination_grace_period_seconds: Some(self.termination_grace_period_seconds),
            dns_policy: Some("ClusterFirst".into()),
            service_account_name: self.service_account.clone(),
            service_account: self.service_account.clone(),
            scheduler_name: Some("default-scheduler".into()),
            tolerations: (!self.tolerations.is_empty()).then(|| self.tolerations.clone()),
            node_selector: (!self.node_selector.is_empty()).then(|| self.node_selector.clone()),
            affinity: self.affinity.clone(),
            topology_spread_constraints: (!self.topology_spread_constraints.is_empty())
                .then(|| self.topology_spread_constraints.clone()),
            priority: self.priority,
            priority_class_name: self.priority_class_name.clone(),
            preemption_policy: self.preemption_policy.clone(),
            enable_service_links: Some(true),
            security_context: Some(Default::default()),
            ..PodSpec::default()
        }
    }
}
