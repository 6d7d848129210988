//! Builders for realistic Node and Pod objects (as a kubelet and the control plane
//! would have written them: the test puts them in place), ids and timestamps.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{
    Container, ContainerImage, ContainerState, ContainerStateRunning, ContainerStatus,
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements, Taint, Toleration,
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
    // Twenty repositories, eight tags.
    let repos: Vec<&str> = "quay.io/jupyter/scipy-notebook quay.io/jupyter/datascience-notebook quay.io/jupyter/pytorch-notebook quay.io/jupyter/tensorflow-notebook quay.io/jupyter/r-notebook quay.io/jupyter/minimal-notebook quay.io/jupyterhub/k8s-network-tools quay.io/jupyterhub/k8s-image-awaiter quay.io/jupyterhub/configurable-http-proxy docker.io/library/python docker.io/library/nginx docker.io/rocker/rstudio ghcr.io/example/analysis-env ghcr.io/example/gpu-workbench registry.k8s.io/kube-proxy registry.k8s.io/coredns/coredns registry.k8s.io/pause gcr.io/k8s-staging/csi-node-driver-registrar us-docker.pkg.dev/example/images/course-env europe-docker.pkg.dev/example/images/workshop".split(' ').collect();
    let tags: Vec<&str> = "2026-11-01 latest v4.2.1 3.12-slim 1.33.2 2025.10 main-8f3c1d2 3.10"
        .split(' ')
        .collect();

    let mut rng = Rng::new(seed ^ 0x1a6e5_u64.wrapping_mul(7));
    let mut images: Vec<ContainerImage> = (0..n)
        .map(|i| {
            let repo = repos[i % repos.len()];
            let tag = if i < repos.len() {
                tags[i % tags.len()].to_string()
            } else {
                format!(
                    "{}-r{}",
                    tags[(i / repos.len()) % tags.len()],
                    i / repos.len()
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
        let h =
            (self.name.bytes()).fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let ip = format!("10.0.{}.{}", (h >> 8) % 250, h % 250 + 2);
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

/// A pod's spec and labels, and the pods built from them: a running pod as the
/// scheduler and a kubelet would have left it ([`PodTemplate::running_pod`]).
#[derive(Clone, Debug, Default)]
pub struct PodTemplate {
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// CPU and memory requests of the (single) container.
    pub requests: BTreeMap<String, Quantity>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
}

impl PodTemplate {
    /// No labels, no requests.
    pub fn new() -> Self {
        Self::default()
    }

    /// The selfdestruct placeholder as in the fixtures: labels
    /// `app.kubernetes.io/name=selfdestruct`, `app.kubernetes.io/instance={instance}`,
    /// requests `cpu`/`memory`.
    pub fn placeholder(instance: &str, cpu: &str, memory: &str) -> Self {
        Self::new()
            .label("app.kubernetes.io/name", "selfdestruct")
            .label("app.kubernetes.io/instance", instance)
            .requests(cpu, memory)
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// CPU and memory requests (`""` leaves one out).
    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        for (k, v) in [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
        {
            self.requests.insert(k.into(), quantity(v));
        }
        self
    }

    /// Adds a nodeSelector entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Pod `name` in `namespace`, bound to `node`, Running and Ready since `at` (its
    /// start time, its conditions' transitions; its creation too, unless the store sets
    /// one later): what the agent reads of its own pod and its siblings.
    pub fn running_pod(&self, namespace: &str, name: &str, node: &str, at: SystemTime) -> Pod {
        let t = time_of(at);
        let condition = |type_: &str| PodCondition {
            type_: type_.into(),
            status: "True".into(),
            last_transition_time: Some(t.clone()),
            ..PodCondition::default()
        };
        let conditions = [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
            "PodScheduled",
        ];
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                labels: Some(self.labels.clone()),
                creation_timestamp: Some(t.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                containers: vec![Container {
                    name: "placeholder".into(),
                    image: Some("ghcr.io/selfdestruct/selfdestruct:0.1.0".into()),
                    resources: Some(ResourceRequirements {
                        requests: Some(self.requests.clone()),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                node_selector: (!self.node_selector.is_empty()).then(|| self.node_selector.clone()),
                tolerations: (!self.tolerations.is_empty()).then(|| self.tolerations.clone()),
                termination_grace_period_seconds: Some(30),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(conditions.map(condition).to_vec()),
                start_time: Some(t.clone()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "placeholder".into(),
                    ready: true,
                    started: Some(true),
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(t),
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }
}
