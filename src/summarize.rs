//! The API objects as the decision sees them: turns the k8s-openapi Pod and
//! Node objects into the core's small summaries as they arrive, keeping only
//! the fields the decision reads, so memory does not grow with the size of a
//! Node object. A Node's metadata is bounded as it is decoded ([`NodeObject`]).
//! Every Kubernetes field is optional here.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    ContainerImage, Node, NodeAffinity, NodeCondition, NodeSelectorRequirement, Pod, PodCondition,
    Taint as TaintObject, Toleration as TolerationObject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use selfdestruct_decision::images::ImageRef;
use selfdestruct_decision::model::{
    KUBELET_MAX_IMAGES, NodeSummary, NodeTerm, OwnPod, Readiness, Sibling, Taint, Toleration,
};
use selfdestruct_decision::selector::Requirement;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A Pod as the agent reads it (its own, and its siblings in a watch): the fields the
/// summaries below read, every other one skipped unread. A pod's containers, volumes and
/// statuses are most of its bytes and, decoded into k8s-openapi's `Pod`, about a tenth of the
/// binary (issue 48).
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct PodObject {
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    pub(crate) spec: Option<PodSpecRead>,
    pub(crate) status: Option<PodStatusRead>,
}

/// The part of a pod's spec the agent reads.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSpecRead {
    pub(crate) node_name: Option<String>,
    pub(crate) node_selector: Option<BTreeMap<String, String>>,
    pub(crate) affinity: Option<AffinityRead>,
    pub(crate) tolerations: Option<Vec<TolerationObject>>,
}

/// The node affinity of a pod's affinity (its pod affinities are not read).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AffinityRead {
    pub(crate) node_affinity: Option<NodeAffinity>,
}

/// The part of a pod's status the agent reads.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodStatusRead {
    pub(crate) phase: Option<String>,
    pub(crate) conditions: Option<Vec<PodCondition>>,
    pub(crate) start_time: Option<Time>,
}

impl Resource for PodObject {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The own pod's summary, from the pod as read from the API server.
pub(crate) fn own_pod(pod: &PodObject) -> OwnPod {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let scheduled_at = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(time_of);
    let started_at = status
        .and_then(|s| s.start_time.as_ref())
        .or(meta.creation_timestamp.as_ref())
        .map(time_of);
    let affinity = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|t| NodeTerm {
            labels: t
                .match_expressions
                .iter()
                .flatten()
                .map(requirement)
                .collect(),
            fields: t.match_fields.iter().flatten().map(requirement).collect(),
        })
        .collect();
    OwnPod {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        node_name: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        started_at,
        scheduled_at: scheduled_at.or(started_at),
        labels: meta.labels.clone().unwrap_or_default(),
        node_selector: spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        affinity,
        tolerations: spec
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        terminating: meta.deletion_timestamp.is_some(),
    }
}

tokio::task_local! {
    /// The label keys a [`NodeObject`] decoded in this task keeps ([`keeping_labels`]).
    static LABEL_KEYS: BTreeSet<String>;
}

/// `task` (a node watch), its [`NodeObject`]s decoded keeping only the labels in `keys`.
pub(crate) async fn keeping_labels<F: Future>(keys: BTreeSet<String>, task: F) -> F::Output {
    LABEL_KEYS.scope(keys, task).await
}

/// A Node as the agent lists and watches it, its metadata bounded as it is decoded:
/// the name, the resourceVersion (a watch resumes from it), the creation time and the
/// labels of the decoding task's [`keeping_labels`] (all outside one); the other
/// labels, the annotations and the managed fields are skipped unread, so a node of
/// 10,000 labels costs what one of a few does. `META`: lists and watches the metadata
/// only (`PartialObjectMetadata`); else the spec and status come in full.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct NodeObject<const META: bool> {
    #[serde(default, deserialize_with = "bounded_metadata")]
    pub(crate) metadata: ObjectMeta,
    pub(crate) spec: Option<NodeSpecRead>,
    pub(crate) status: Option<NodeStatusRead>,
}

/// The part of a node's spec the agent reads.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct NodeSpecRead {
    pub(crate) unschedulable: Option<bool>,
    pub(crate) taints: Option<Vec<TaintObject>>,
}

/// The part of a node's status the agent reads (not its addresses, capacity, system info or
/// volumes).
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct NodeStatusRead {
    pub(crate) conditions: Option<Vec<NodeCondition>>,
    pub(crate) images: Option<Vec<ContainerImage>>,
}

impl<const META: bool> Resource for NodeObject<META> {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Node::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Node::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Node::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Node::plural(&())
    }
    fn metadata_api() -> bool {
        META
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The metadata a [`NodeObject`] keeps.
fn bounded_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Kept {
        name: Option<String>,
        resource_version: Option<String>,
        creation_timestamp: Option<Time>,
        labels: Option<KeptLabels>,
    }
    let kept = Kept::deserialize(d)?;
    Ok(ObjectMeta {
        name: kept.name,
        resource_version: kept.resource_version,
        creation_timestamp: kept.creation_timestamp,
        labels: kept.labels.map(|l| l.0),
        ..ObjectMeta::default()
    })
}

/// Labels, only those of [`LABEL_KEYS`] kept.
struct KeptLabels(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for KeptLabels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Labels;
        impl<'de> Visitor<'de> for Labels {
            type Value = KeptLabels;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeptLabels, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if LABEL_KEYS.try_with(|keys| keys.contains(&key)) == Ok(false) {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        kept.insert(key, map.next_value()?);
                    }
                }
                Ok(KeptLabels(kept))
            }
        }
        d.deserialize_map(Labels)
    }
}

/// A node's summary from its metadata alone: name, creation time and the labels in
/// `label_keys`. The rest stays at its default: such a node is never Ready to the
/// decision, which needs no more of nodes older than the own pod's scheduling.
pub(crate) fn node_metadata(meta: ObjectMeta, label_keys: &BTreeSet<String>) -> NodeSummary {
    NodeSummary {
        labels: meta
            .labels
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| label_keys.contains(k))
            .collect(),
        name: meta.name.unwrap_or_default(),
        created: meta.creation_timestamp.as_ref().map(time_of),
        ..NodeSummary::default()
    }
}

/// A node's summary, keeping only the labels in `label_keys` and which of `required` images it holds.
pub(crate) fn node(
    node: NodeObject<false>,
    label_keys: &BTreeSet<String>,
    required: &[ImageRef],
) -> NodeSummary {
    let status = node.status.unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| Readiness {
            ready: c.status == "True",
            since: c.last_transition_time.as_ref().map(time_of),
        })
        .unwrap_or_default();
    let images = status.images.unwrap_or_default();
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
    let spec = node.spec.unwrap_or_default();
    NodeSummary {
        unschedulable: spec.unschedulable.unwrap_or(false),
        taints: spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .filter(|t| {
                matches!(
                    t.effect.as_str(),
                    "NoSchedule" | "NoExecute" | "PreferNoSchedule"
                )
            })
            .map(|t| Taint {
                key: t.key,
                value: t.value,
                effect: t.effect,
            })
            .collect(),
        ready,
        images_present,
        images_truncated: images.len() >= KUBELET_MAX_IMAGES,
        ..node_metadata(node.metadata, label_keys)
    }
}

/// A sibling placeholder pod's summary.
pub(crate) fn sibling(pod: PodObject) -> Sibling {
    let node_name = pod.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty());
    let phase = pod.status.and_then(|s| s.phase);
    Sibling {
        pending: node_name.is_none() || phase.as_deref().is_none_or(|p| p == "Pending"),
        name: pod.metadata.name.unwrap_or_default(),
        uid: pod.metadata.uid.unwrap_or_default(),
        created: pod.metadata.creation_timestamp.as_ref().map(time_of),
        node_name,
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

/// The time of an API timestamp.
pub(crate) fn time_of(t: &Time) -> SystemTime {
    SystemTime::from(t.0)
}

/// A node selector requirement as a selector requirement (an unknown operator
/// or an unparsable Gt/Lt value matches nothing, as in the scheduler).
fn requirement(r: &NodeSelectorRequirement) -> Requirement {
    let (key, values) = (r.key.clone(), r.values.clone().unwrap_or_default());
    let num = values.first().and_then(|v| v.parse::<i64>().ok());
    match (r.operator.as_str(), num) {
        ("In", _) => Requirement::In(key, values),
        ("NotIn", _) => Requirement::NotIn(key, values),
        ("Exists", _) => Requirement::Exists(key),
        ("DoesNotExist", _) => Requirement::DoesNotExist(key),
        ("Gt", Some(n)) => Requirement::Gt(key, n),
        ("Lt", Some(n)) => Requirement::Lt(key, n),
        _ => Requirement::In(key, vec![]),
    }
}

#[cfg(test)]
mod tests;
