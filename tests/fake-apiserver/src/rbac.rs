//! Bearer tokens, subjects and RBAC-style rules.

/// One RBAC rule: verbs on resources, in one namespace or cluster-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `get`, `list`, `watch`, `delete`, `create`, `patch`, `update` or `*`.
    pub verbs: Vec<String>,
    /// `pods`, `pods/eviction`, `events`, `nodes`, `poddisruptionbudgets` or `*`.
    pub resources: Vec<String>,
    /// `Some(ns)`: a Role in that namespace; `None`: a ClusterRole (also grants
    /// access to cluster-scoped resources such as nodes).
    pub namespace: Option<String>,
    /// `resourceNames`: empty for any object; else only requests that name one
    /// of these, as the kube-apiserver's RBAC authorizer reads them (the name
    /// from the URL, so `create` on a named subresource such as
    /// `pods/NAME/eviction` is limited too; a top-level create or a list/watch
    /// names none and is refused).
    pub resource_names: Vec<String>,
}

impl Rule {
    /// A rule from string slices.
    pub fn new(verbs: &[&str], resources: &[&str], namespace: Option<&str>) -> Self {
        Self {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resources: resources.iter().map(|s| s.to_string()).collect(),
            namespace: namespace.map(str::to_string),
            resource_names: Vec::new(),
        }
    }

    /// The rule limited to objects with these names (`resourceNames`).
    pub fn named(mut self, names: &[&str]) -> Self {
        self.resource_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    fn allows(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let name_ok = self.resource_names.is_empty()
            || (!name.is_empty() && self.resource_names.iter().any(|n| n == name));
        let verb_ok = self.verbs.iter().any(|v| v == "*" || v == verb);
        let resource_ok = self.resources.iter().any(|r| r == "*" || r == resource);
        let ns_ok = match &self.namespace {
            None => true,
            Some(ns) => !namespace.is_empty() && ns == namespace,
        };
        verb_ok && resource_ok && ns_ok && name_ok
    }
}

/// Who a token authenticates as and what it may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// User name, e.g. `system:serviceaccount:placeholders:placeholder`.
    pub user: String,
    /// What the subject may do.
    pub rules: Vec<Rule>,
    /// The pod a service-account token is bound to (`kubectl create token
    /// --bound-object-kind Pod`), surfaced to admission as the
    /// `authentication.kubernetes.io/pod-name` extra.
    pub bound_pod: Option<String>,
}

impl Subject {
    /// A subject with no rules.
    pub fn new(user: &str) -> Self {
        Self {
            user: user.to_string(),
            rules: Vec::new(),
            bound_pod: None,
        }
    }

    /// Everything, cluster-wide (`kubernetes-admin`).
    pub fn admin() -> Self {
        Self::new("kubernetes-admin").rule(Rule::new(&["*"], &["*"], None))
    }

    /// The placeholder agent's permissions as in the project's RBAC manifests:
    /// pods get/list/watch/delete, pods/eviction create and events create (core and events.k8s.io) in
    /// `namespace`; nodes list/watch cluster-wide (rbac/node-reader: the agent
    /// never GETs a node, so every agent test runs without it). User
    /// `system:serviceaccount:{namespace}:{service_account}`.
    pub fn placeholder_agent(namespace: &str, service_account: &str) -> Self {
        Self::new(&format!(
            "system:serviceaccount:{namespace}:{service_account}"
        ))
        .rule(Rule::new(
            &["get", "list", "watch", "delete"],
            &["pods"],
            Some(namespace),
        ))
        .rule(Rule::new(&["create"], &["pods/eviction"], Some(namespace)))
        .rule(Rule::new(
            &["create", "patch"],
            &["events"],
            Some(namespace),
        ))
        .rule(Rule::new(&["list", "watch"], &["nodes"], None))
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Binds the token to a pod.
    pub fn bound_to(mut self, pod: &str) -> Self {
        self.bound_pod = Some(pod.to_string());
        self
    }

    /// Whether the subject is a service account (the own-pod-only admission
    /// policy only matches service accounts).
    pub fn is_service_account(&self) -> bool {
        self.user.starts_with("system:serviceaccount:")
    }

    /// RBAC check. `resource` may carry a subresource (`pods/eviction`);
    /// `namespace` is empty for cluster-scoped requests; `name` is the object
    /// the URL names (empty for a collection).
    pub fn allows(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.allows(verb, resource, namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_limit_named_requests_and_refuse_collections() {
        let s = Subject::new("u")
            .rule(Rule::new(&["get"], &["pods"], Some("ns")).named(&["p-0", "p-1"]))
            .rule(Rule::new(&["create"], &["pods/eviction"], Some("ns")).named(&["p-0"]));
        assert!(s.allows("get", "pods", "ns", "p-1"));
        assert!(!s.allows("get", "pods", "ns", "other"));
        assert!(!s.allows("get", "pods", "other-ns", "p-1"));
        // create on a named subresource is limited by name, as in the kube-apiserver.
        assert!(s.allows("create", "pods/eviction", "ns", "p-0"));
        assert!(!s.allows("create", "pods/eviction", "ns", "p-1"));
        // A request that names no object does not match a named rule.
        assert!(!s.allows("get", "pods", "ns", ""));
        // Without names, any object.
        let any = Subject::new("u").rule(Rule::new(&["get"], &["pods"], Some("ns")));
        assert!(any.allows("get", "pods", "ns", "whatever"));
    }
}
