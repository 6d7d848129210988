//! Node pools and the shipped placeholder set, for tests/cluster.rs and the cold-start bench:
//! each scenario (or bench row) keeps to a pool of nodes that carry [`POOL`] as a label and as
//! a NoSchedule taint only its own pods tolerate.

use std::path::Path;

use serde_json::{Value, json};

use crate::{ControlPlane, Error};

/// The pool label and taint key.
pub const POOL: &str = "realstack.selfdestruct.io/pool";

/// Puts a pod spec onto `pool`'s nodes (selector and toleration).
pub fn in_pool(spec: &mut Value, pool: &str) {
    spec["nodeSelector"][POOL] = json!(pool);
    let tol = json!({"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"});
    match spec["tolerations"].as_array_mut() {
        Some(t) => t.push(tol),
        None => spec["tolerations"] = json!([tol]),
    }
}

/// Sets (or replaces) env entries of a container.
pub fn set_env<K: AsRef<str>, V: AsRef<str>>(c: &mut Value, env: &[(K, V)]) {
    let list = c["env"].as_array_mut().expect("env");
    for (k, v) in env {
        list.retain(|e| e["name"] != k.as_ref());
        list.push(json!({"name": k.as_ref(), "value": v.as_ref()}));
    }
}

/// The placeholder set of `repo`'s `manifests/` (with `rbac/node-reader` and
/// `rbac/admission-policy`), moved into namespace `ns`: cluster-scoped names get the
/// namespace, the admission policy names the namespace's account, the StatefulSet gets
/// `replicas`, the pool's selector and toleration and `env`. The StatefulSet comes last (its
/// agents find their permissions in place).
pub fn placeholder_set<K: AsRef<str>, V: AsRef<str>>(
    cp: &ControlPlane,
    repo: &Path,
    ns: &str,
    pool: &str,
    replicas: u32,
    env: &[(K, V)],
) -> Result<Vec<Value>, Error> {
    let mut docs = cp.kustomize(&repo.join("manifests"))?;
    docs.extend(cp.kustomize(&repo.join("rbac/node-reader"))?);
    docs.extend(cp.kustomize(&repo.join("rbac/admission-policy"))?);
    let cluster_scoped = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ];
    // Each cluster-scoped object but the PriorityClass (one for all) is named for `ns`, and
    // every reference to it follows.
    let renames: Vec<(String, String)> = docs
        .iter()
        .filter(|d| cluster_scoped.contains(&d["kind"].as_str().unwrap_or_default()))
        .filter_map(|d| d["metadata"]["name"].as_str())
        .map(|n| (format!("\"{n}\""), format!("\"{n}-{ns}\"")))
        .collect();
    let mut out = Vec::new();
    for mut d in docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Namespace" => d["metadata"]["name"] = json!(ns),
            // One PriorityClass for all (the same object).
            "PriorityClass" => {}
            k if cluster_scoped.contains(&k) => {}
            _ => d["metadata"]["namespace"] = json!(ns),
        }
        let mut text = d.to_string().replace(
            "system:serviceaccount:placeholders:",
            &format!("system:serviceaccount:{ns}:"),
        );
        for (from, to) in &renames {
            text = text.replace(from, to);
        }
        let mut d: Value = serde_json::from_str(&text).expect("json re-read");
        if kind == "ClusterRoleBinding" || kind == "RoleBinding" {
            for s in d["subjects"].as_array_mut().into_iter().flatten() {
                s["namespace"] = json!(ns);
            }
        }
        if kind == "StatefulSet" {
            d["spec"]["replicas"] = json!(replicas);
            let spec = &mut d["spec"]["template"]["spec"];
            in_pool(spec, pool);
            set_env(&mut spec["containers"][0], env);
        }
        out.push(d);
    }
    out.sort_by_key(|d| d["kind"] == "StatefulSet");
    Ok(out)
}
