//! What the agent knows about the cluster: small summaries of its own pod, of
//! nodes and of sibling placeholders. Summaries are built from the JSON the API
//! server sends, keeping only the fields the decision reads, so memory does not
//! grow with the size of a Node object. Every Kubernetes field is optional here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::Deserialize;

use crate::images::ImageRef;
use crate::selector::Requirement;

/// The kubelet reports at most this many images per node (`--node-status-max-images`).
pub const KUBELET_MAX_IMAGES: usize = 50;

/// A taint on a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Taint {
    /// Taint key.
    #[serde(default)]
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: String,
}

/// A toleration of the own pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Toleration {
    /// Empty key with `Exists` tolerates everything.
    pub key: Option<String>,
    /// `Exists` or `Equal` (the default).
    pub operator: Option<String>,
    /// Value compared with `Equal`.
    pub value: Option<String>,
    /// Empty matches every effect.
    pub effect: Option<String>,
}

impl Toleration {
    /// The scheduler's `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect.as_deref().filter(|e| !e.is_empty()) {
            if effect != taint.effect {
                return false;
            }
        }
        let key = self.key.as_deref().unwrap_or("");
        if !key.is_empty() && key != taint.key {
            return false;
        }
        match self.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            "Equal" | "" => {
                !key.is_empty()
                    && self.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
            }
            _ => false,
        }
    }
}

/// One `nodeSelectorTerm` of a required node affinity: all its requirements must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeTerm {
    /// `matchExpressions` on node labels.
    pub labels: Vec<Requirement>,
    /// `matchFields` (only `metadata.name` exists).
    pub fields: Vec<Requirement>,
}

/// What the agent knows about its own pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnPod {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod uid, used as the precondition of every delete and eviction.
    pub uid: String,
    /// Node the pod runs on.
    pub node_name: Option<String>,
    /// `status.startTime`: the lifetime counts from here (not from a container restart).
    pub started_at: Option<SystemTime>,
    /// When the pod was bound to its node (the PodScheduled condition).
    pub scheduled_at: Option<SystemTime>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity terms (ORed); empty = no constraint.
    pub affinity: Vec<NodeTerm>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Set when the pod is already being deleted.
    pub terminating: bool,
}

impl OwnPod {
    /// Builds the summary from the own pod as read from the API server.
    pub fn from_pod(pod: &OwnPodLite) -> Self {
        let meta = &pod.metadata;
        let (spec, status) = (&pod.spec, &pod.status);
        let scheduled_at = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(time_of);
        let started_at = status
            .start_time
            .as_ref()
            .or(meta.creation_timestamp.as_ref())
            .map(time_of);
        let affinity = spec
            .affinity
            .node_affinity
            .required_during_scheduling_ignored_during_execution
            .node_selector_terms
            .iter()
            .map(|t| NodeTerm {
                labels: t
                    .match_expressions
                    .iter()
                    .map(SelectorRequirement::to_requirement)
                    .collect(),
                fields: t
                    .match_fields
                    .iter()
                    .map(SelectorRequirement::to_requirement)
                    .collect(),
            })
            .collect();
        OwnPod {
            name: meta.name.clone(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            started_at,
            scheduled_at: scheduled_at.or(started_at),
            labels: meta.labels.clone().unwrap_or_default(),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            affinity,
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            terminating: meta.deletion_timestamp.is_some(),
        }
    }

    /// The node label keys the pod's placement rules read: a node summary needs no others.
    pub fn label_keys_of_interest(&self) -> BTreeSet<String> {
        let mut keys: BTreeSet<String> = self.node_selector.keys().cloned().collect();
        for term in &self.affinity {
            keys.extend(term.labels.iter().map(|r| r.key().to_string()));
        }
        keys
    }

    /// Whether the pod's nodeSelector and required node affinity accept a node.
    pub fn accepts_node(&self, node: &NodeSummary) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v));
        let name_fields: BTreeMap<String, String> =
            [("metadata.name".to_string(), node.name.clone())].into();
        let affinity_ok = self.affinity.is_empty()
            || self.affinity.iter().any(|t| {
                (!t.labels.is_empty() || !t.fields.is_empty())
                    && t.labels.iter().all(|r| r.matches(&node.labels))
                    && t.fields.iter().all(|r| r.matches(&name_fields))
            });
        selector_ok && affinity_ok
    }

    /// The first NoSchedule/NoExecute taint of `node` that the pod does not tolerate.
    pub fn untolerated_taint<'n>(&self, node: &'n NodeSummary) -> Option<&'n Taint> {
        node.taints.iter().find(|t| {
            (t.effect == "NoSchedule" || t.effect == "NoExecute")
                && !self.tolerations.iter().any(|tol| tol.tolerates(t))
        })
    }
}

/// An API timestamp: RFC 3339 in UTC, as the API server writes `Time` and
/// `MicroTime` (`2026-11-22T04:26:01Z`, `...01.123456Z`). Read with humantime
/// rather than `k8s_openapi`'s jiff-based `Time`, which would add a calendar
/// library to the binary for a few fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time(pub SystemTime);

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        parse_time(&text).map(Time).ok_or_else(|| {
            serde::de::Error::custom(format_args!("not an RFC 3339 UTC time: {text:?}"))
        })
    }
}

/// Parses an API timestamp; times before 1970 clamp to the epoch.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    match humantime::parse_rfc3339(text) {
        Ok(t) => Some(t),
        Err(humantime::TimestampError::OutOfRange) if text.get(..4)? < "1970" => {
            Some(SystemTime::UNIX_EPOCH)
        }
        Err(_) => None,
    }
}

/// The time of an API timestamp.
pub fn time_of(t: &Time) -> SystemTime {
    t.0
}

impl SelectorRequirement {
    /// As a selector requirement (an unknown operator or an unparsable Gt/Lt
    /// value matches nothing, as in the scheduler).
    pub fn to_requirement(&self) -> Requirement {
        let (key, values) = (self.key.clone(), self.values.clone().unwrap_or_default());
        let num = || values.first().and_then(|v| v.parse::<i64>().ok());
        match self.operator.as_str() {
            "In" => Requirement::In(key, values),
            "NotIn" => Requirement::NotIn(key, values),
            "Exists" => Requirement::Exists(key),
            "DoesNotExist" => Requirement::DoesNotExist(key),
            "Gt" => num().map_or(Requirement::In(key.clone(), vec![]), |n| {
                Requirement::Gt(key.clone(), n)
            }),
            "Lt" => num().map_or(Requirement::In(key.clone(), vec![]), |n| {
                Requirement::Lt(key.clone(), n)
            }),
            _ => Requirement::In(key, vec![]),
        }
    }
}

/// The Ready condition of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Ready=True.
    pub ready: bool,
    /// `lastTransitionTime` of the Ready condition.
    pub since: Option<SystemTime>,
}

/// What the agent keeps of one Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSummary {
    /// Node name.
    pub name: String,
    /// `metadata.creationTimestamp`: a node is new only if it was created after the own
    /// pod was scheduled (a Ready blip of an old node is not a new node).
    pub created: Option<SystemTime>,
    /// Only the labels the own pod's placement rules read.
    pub labels: BTreeMap<String, String>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// NoSchedule/NoExecute taints.
    pub taints: Vec<Taint>,
    /// The Ready condition.
    pub ready: Readiness,
    /// Which of the required images the node reports (indexes into the required list).
    pub images_present: Vec<usize>,
    /// The node's image list was full (the kubelet truncates it to the largest 50).
    pub images_truncated: bool,
}

/// A sibling placeholder pod (same StatefulSet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sibling {
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<SystemTime>,
    /// `spec.nodeName`, once scheduled.
    pub node_name: Option<String>,
    /// Phase Pending, or not yet bound to a node.
    pub pending: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

// ----- the minimal JSON shapes read from list and watch responses -----

/// Object metadata, only the fields read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaLite {
    /// name
    #[serde(default)]
    pub name: String,
    /// namespace
    #[serde(default)]
    pub namespace: Option<String>,
    /// uid
    #[serde(default)]
    pub uid: String,
    /// resourceVersion
    #[serde(default)]
    pub resource_version: Option<String>,
    /// labels
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// creationTimestamp
    #[serde(default)]
    pub creation_timestamp: Option<Time>,
    /// deletionTimestamp
    #[serde(default)]
    pub deletion_timestamp: Option<Time>,
}

/// A Node as far as the agent reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeLite {
    /// metadata
    #[serde(default)]
    pub metadata: MetaLite,
    /// spec
    #[serde(default)]
    pub spec: NodeSpecLite,
    /// status
    #[serde(default)]
    pub status: NodeStatusLite,
}

/// Node spec fields read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeSpecLite {
    /// spec.unschedulable
    #[serde(default)]
    pub unschedulable: Option<bool>,
    /// spec.taints
    #[serde(default)]
    pub taints: Option<Vec<Taint>>,
}

/// Node status fields read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeStatusLite {
    /// status.conditions
    #[serde(default)]
    pub conditions: Option<Vec<ConditionLite>>,
    /// status.images
    #[serde(default)]
    pub images: Option<Vec<ImageLite>>,
}

/// A status condition.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLite {
    /// type
    #[serde(default, rename = "type")]
    pub type_: String,
    /// status
    #[serde(default)]
    pub status: String,
    /// lastTransitionTime
    #[serde(default)]
    pub last_transition_time: Option<Time>,
}

/// One entry of status.images.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ImageLite {
    /// names
    #[serde(default)]
    pub names: Option<Vec<String>>,
}

/// The own pod as far as the agent reads it (one GET at start-up): metadata,
/// placement rules and start time. `k8s_openapi`'s full `Pod` would add its
/// deserializer (every volume type, container field...) to the binary.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct OwnPodLite {
    /// metadata
    pub metadata: MetaLite,
    /// spec
    pub spec: OwnSpecLite,
    /// status
    pub status: OwnStatusLite,
}

/// Own pod spec fields read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OwnSpecLite {
    /// spec.nodeName
    pub node_name: Option<String>,
    /// spec.nodeSelector
    pub node_selector: Option<BTreeMap<String, String>>,
    /// spec.tolerations
    pub tolerations: Option<Vec<Toleration>>,
    /// spec.affinity (only nodeAffinity is read)
    pub affinity: AffinityLite,
}

/// spec.affinity
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AffinityLite {
    /// nodeAffinity
    pub node_affinity: NodeAffinityLite,
}

/// spec.affinity.nodeAffinity
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeAffinityLite {
    /// requiredDuringSchedulingIgnoredDuringExecution
    pub required_during_scheduling_ignored_during_execution: NodeSelectorLite,
}

/// A NodeSelector: its terms are ORed.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSelectorLite {
    /// nodeSelectorTerms
    pub node_selector_terms: Vec<NodeSelectorTermLite>,
}

/// A NodeSelectorTerm: its requirements are ANDed.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSelectorTermLite {
    /// matchExpressions (node labels)
    pub match_expressions: Vec<SelectorRequirement>,
    /// matchFields (node fields)
    pub match_fields: Vec<SelectorRequirement>,
}

/// A NodeSelectorRequirement.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct SelectorRequirement {
    /// key
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt
    pub operator: String,
    /// values
    pub values: Option<Vec<String>>,
}

/// Own pod status fields read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OwnStatusLite {
    /// status.startTime
    pub start_time: Option<Time>,
    /// status.conditions
    pub conditions: Option<Vec<ConditionLite>>,
}

/// A Pod as far as the sibling watch reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodLite {
    /// metadata
    #[serde(default)]
    pub metadata: MetaLite,
    /// spec
    #[serde(default)]
    pub spec: PodSpecLite,
    /// status
    #[serde(default)]
    pub status: PodStatusLite,
}

/// Pod spec fields read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecLite {
    /// spec.nodeName
    #[serde(default)]
    pub node_name: Option<String>,
}

/// Pod status fields read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodStatusLite {
    /// status.phase
    #[serde(default)]
    pub phase: Option<String>,
}

impl NodeSummary {
    /// Summarises a node, keeping only the labels in `label_keys` and which of `required` images it holds.
    pub fn from_lite(node: NodeLite, label_keys: &BTreeSet<String>, required: &[ImageRef]) -> Self {
        let ready = node
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| Readiness {
                ready: c.status == "True",
                since: c.last_transition_time.as_ref().map(time_of),
            })
            .unwrap_or_default();
        let images = node.status.images.unwrap_or_default();
        let images_present = required
            .iter()
            .enumerate()
            .filter(|(_, want)| {
                images
                    .iter()
                    .flat_map(|i| i.names.iter().flatten())
                    .any(|name| want.matches(name))
            })
            .map(|(i, _)| i)
            .collect();
        NodeSummary {
            labels: node
                .metadata
                .labels
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| label_keys.contains(k))
                .collect(),
            name: node.metadata.name,
            created: node.metadata.creation_timestamp.as_ref().map(time_of),
            unschedulable: node.spec.unschedulable.unwrap_or(false),
            taints: node
                .spec
                .taints
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                .collect(),
            ready,
            images_present,
            images_truncated: images.len() >= KUBELET_MAX_IMAGES,
        }
    }
}

impl Sibling {
    /// Summarises a sibling placeholder pod.
    pub fn from_lite(pod: PodLite) -> Self {
        let node_name = pod.spec.node_name.filter(|n| !n.is_empty());
        Sibling {
            pending: node_name.is_none()
                || pod.status.phase.as_deref().is_none_or(|p| p == "Pending"),
            name: pod.metadata.name,
            uid: pod.metadata.uid,
            created: pod.metadata.creation_timestamp.as_ref().map(time_of),
            node_name,
            terminating: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
        }
    }

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
        }
    }

    #[test]
    fn tolerations_follow_the_scheduler() {
        let t = taint("dedicated", Some("user"), "NoSchedule");
        let cases = [
            (tol(Some("dedicated"), None, Some("user"), None), true),
            (
                tol(
                    Some("dedicated"),
                    Some("Equal"),
                    Some("user"),
                    Some("NoSchedule"),
                ),
                true,
            ),
            (
                tol(Some("dedicated"), Some("Equal"), Some("other"), None),
                false,
            ),
            (tol(Some("dedicated"), Some("Exists"), None, None), true),
            (
                tol(Some("dedicated"), Some("Exists"), None, Some("NoExecute")),
                false,
            ),
            (tol(None, Some("Exists"), None, None), true),
            (tol(None, None, None, None), false),
            (tol(Some("other"), Some("Exists"), None, None), false),
            (
                tol(Some("dedicated"), Some("Bogus"), Some("user"), None),
                false,
            ),
        ];
        for (i, (toleration, want)) in cases.iter().enumerate() {
            assert_eq!(toleration.tolerates(&t), *want, "case {i}: {toleration:?}");
        }
        let no_value = taint("node.kubernetes.io/not-ready", None, "NoSchedule");
        assert!(tol(Some("node.kubernetes.io/not-ready"), None, None, None).tolerates(&no_value));
    }

    #[test]
    fn own_pod_summary_never_needs_optional_fields() {
        let empty = OwnPod::from_pod(&OwnPodLite::default());
        assert_eq!(empty.name, "");
        assert_eq!(empty.started_at, None);
        assert!(empty.affinity.is_empty());
        let from_fixture: OwnPodLite = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "placeholder-0", "namespace": "placeholders", "uid": "u1",
                         "creationTimestamp": "2026-11-22T04:26:01Z", "labels": {"a": "b"}},
            "spec": {"nodeName": "node-a", "containers": [],
                     "tolerations": [{"key": "k", "operator": "Exists"}],
                     "nodeSelector": {"pool": "user"},
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
            "status": {"startTime": "2026-11-22T04:26:05Z",
                       "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T04:26:02Z"}]}
        }))
        .expect("valid pod");
        let own = OwnPod::from_pod(&from_fixture);
        assert_eq!(own.node_name.as_deref(), Some("node-a"));
        assert!(own.started_at > own.scheduled_at);
        assert_eq!(own.tolerations.len(), 1);
        assert_eq!(
            own.label_keys_of_interest(),
            ["pool".to_string(), "zone".to_string()].into()
        );
    }

    #[test]
    fn node_summary_keeps_only_what_is_needed() {
        let node: NodeLite = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"pool": "user", "noise": "x"}, "annotations": {"big": "..."}},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T04:26:05Z"}],
                       "images": [{"names": ["docker.io/library/nginx:1.25"], "sizeBytes": 1}]}
        }))
        .expect("valid node");
        let required = crate::images::parse_list("nginx:1.25,busybox").expect("valid");
        let s = NodeSummary::from_lite(node, &["pool".to_string()].into(), &required);
        assert_eq!(s.labels.len(), 1);
        assert_eq!(s.taints.len(), 1);
        assert!(s.ready.ready && s.ready.since.is_some());
        assert_eq!(s.images_present, vec![0]);
        assert!(!s.images_truncated);
        let bare = NodeSummary::from_lite(NodeLite::default(), &BTreeSet::new(), &required);
        assert!(!bare.ready.ready);
    }

    #[test]
    fn sibling_pending_states() {
        let lite = |node: Option<&str>, phase: Option<&str>| PodLite {
            spec: PodSpecLite {
                node_name: node.map(Into::into),
            },
            status: PodStatusLite {
                phase: phase.map(Into::into),
            },
            ..PodLite::default()
        };
        assert!(Sibling::from_lite(lite(None, Some("Pending"))).pending);
        assert!(Sibling::from_lite(lite(Some("n"), Some("Pending"))).pending);
        assert!(Sibling::from_lite(lite(Some("n"), None)).pending);
        assert!(!Sibling::from_lite(lite(Some("n"), Some("Running"))).pending);
    }
}
