//! What the decision knows about the cluster: small summaries of the own pod,
//! of nodes and of sibling placeholders, keeping only the fields the decision
//! reads. The agent builds them from the API objects (`summarize` in the agent
//! crate); the simulator builds them directly. Every Kubernetes field is
//! optional in the API, so every field here has a neutral default.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use crate::selector::Requirement;

/// The node gate's default taint: the cluster autoscaler treats the
/// `startup-taint.cluster-autoscaler.kubernetes.io/` prefix as a startup taint and
/// still scales up for pods that don't tolerate it.
pub const IMAGES_PENDING_TAINT: &str =
    "startup-taint.cluster-autoscaler.kubernetes.io/images-pending";

/// The cluster autoscaler's soft (PreferNoSchedule) taint on the nodes it finds unneeded
/// (`core/scaledown/actuation/softtaint.go`), removed once a node is needed again.
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";

/// The kubelet reports at most this many images per node (`--node-status-max-images`).
pub const KUBELET_MAX_IMAGES: usize = 50;

/// A taint on a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A toleration of the own pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
        if let Some(effect) = self.effect.as_deref().filter(|e| !e.is_empty())
            && effect != taint.effect
        {
            return false;
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
    /// The node label keys the pod's placement rules read: a node summary needs no others.
    pub fn label_keys_of_interest(&self) -> BTreeSet<String> {
        let mut keys: BTreeSet<String> = self.node_selector.keys().cloned().collect();
        for term in &self.affinity {
            keys.extend(term.labels.iter().map(|r| r.key().to_string()));
        }
        keys
    }

    /// Whether the decision needs `node` (as its metadata shows it) in full: not
    /// the own node, created at or after the own pod was scheduled (as
    /// `node_verdict` counts "newer"), and accepted by the placement rules. The
    /// agent reads only these nodes in full.
    pub fn is_candidate(&self, node: &NodeSummary) -> bool {
        self.node_name.as_deref() != Some(node.name.as_str())
            && self
                .scheduled_at
                .is_some_and(|s| node.created.is_some_and(|c| c >= s))
            && self.accepts_node(node)
    }

    /// Whether the pod's nodeSelector and required node affinity accept a node.
    pub fn accepts_node(&self, node: &NodeSummary) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v));
        let affinity_ok = self.affinity.is_empty() || {
            // Built only for a pod with affinity terms: this runs for every node per event.
            let name_fields: BTreeMap<String, String> =
                [("metadata.name".to_string(), node.name.clone())].into();
            self.affinity.iter().any(|t| {
                (!t.labels.is_empty() || !t.fields.is_empty())
                    && t.labels.iter().all(|r| r.matches(&node.labels))
                    && t.fields.iter().all(|r| r.matches(&name_fields))
            })
        };
        selector_ok && affinity_ok
    }

    /// Whether the scheduler could put this pod (or a sibling with the same template)
    /// on `node` now, room aside: Ready, not cordoned, no NoSchedule/NoExecute taint
    /// the pod does not tolerate, and the placement rules accept it.
    pub fn could_run_on(&self, node: &NodeSummary) -> bool {
        node.ready.ready
            && !node.unschedulable
            && self.untolerated_taint(node).is_none()
            && self.accepts_node(node)
    }

    /// The first NoSchedule/NoExecute taint of `node` that the pod does not tolerate.
    pub fn untolerated_taint<'n>(&self, node: &'n NodeSummary) -> Option<&'n Taint> {
        node.taints.iter().find(|t| {
            (t.effect == "NoSchedule" || t.effect == "NoExecute")
                && !self.tolerations.iter().any(|tol| tol.tolerates(t))
        })
    }

    /// The first PreferNoSchedule taint of `node` that the pod does not tolerate
    /// (the cluster autoscaler's `DeletionCandidateOfClusterAutoscaler` on an empty
    /// node, for a pod without its toleration). It blocks nothing, but the
    /// scheduler's TaintToleration score (weight 3 in the default profile: 300
    /// points, more than room, balance and image locality together) ranks the node
    /// below every node without such a taint: a pod re-created while it is there
    /// goes elsewhere if it fits (and a pod that moves frees its own room).
    pub fn untolerated_soft_taint<'n>(&self, node: &'n NodeSummary) -> Option<&'n Taint> {
        node.taints.iter().find(|t| {
            t.effect == "PreferNoSchedule" && !self.tolerations.iter().any(|tol| tol.tolerates(t))
        })
    }

    /// Whether a pod with this template, re-created now, would be placed on `node`
    /// rather than on an old node with room: [`OwnPod::could_run_on`], and no
    /// [`OwnPod::untolerated_soft_taint`] steers it away.
    pub fn would_land_on(&self, node: &NodeSummary) -> bool {
        self.could_run_on(node) && self.untolerated_soft_taint(node).is_none()
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
    /// NoSchedule, NoExecute and PreferNoSchedule taints.
    pub taints: Vec<Taint>,
    /// The Ready condition.
    pub ready: Readiness,
    /// Which of the required images the node reports (indexes into the required list).
    pub images_present: Vec<usize>,
    /// The node's image list was full (the kubelet truncates it to the largest 50).
    pub images_truncated: bool,
}

impl NodeSummary {
    /// The cluster autoscaler marks the node as a deletion candidate
    /// ([`DELETION_CANDIDATE_TAINT`]).
    pub fn is_deletion_candidate(&self) -> bool {
        self.taints
            .iter()
            .any(|t| t.key == DELETION_CANDIDATE_TAINT)
    }
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
}
