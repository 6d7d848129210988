//! Who am I: the own pod's name, namespace, uid and node, from the Downward API
//! (environment, then a downwardAPI volume), then the hostname and the
//! service-account namespace file. The identity settings ([`IdentitySettings`]) and the
//! Kubernetes name rules their values follow are here too.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::summarize::PodObject;
use selfdestruct_decision::model::OwnPod;

use selfdestruct_decision::settings::{Setting, unset_or};

/// The own pod's identity and API access: what the Downward API and the environment say.
#[rustfmt::skip] // the clap attributes are laid out as in the other settings structs
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentitySettings {
    /// Own pod name (Downward API metadata.name) [fallback: podinfo dir, hostname]
    #[arg(global = true, long = "pod-name", env = "POD_NAME", value_name = "NAME", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(subdomain)))]
    pub(crate) pod_name: std::option::Option<String>,
    /// Own namespace (Downward API metadata.namespace) [fallback: podinfo dir, service account]
    #[arg(global = true, long = "pod-namespace", env = "POD_NAMESPACE", value_name = "NAMESPACE",
          default_value = "", hide_default_value = true,
          value_parser = Setting(unset_or(label)))]
    pub namespace: std::option::Option<String>,
    /// Own pod uid (Downward API metadata.uid) [fallback: podinfo dir, one GET of the pod]
    #[arg(global = true, long = "pod-uid", env = "POD_UID", value_name = "UID", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(uid)))]
    pub(crate) uid: std::option::Option<String>,
    /// Own node (Downward API spec.nodeName) [fallback: the pod's spec.nodeName]
    #[arg(global = true, long, env = "NODE_NAME", value_name = "NODE", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(subdomain)))]
    pub(crate) node_name: std::option::Option<String>,
    /// downwardAPI volume folder with files name, namespace, uid
    #[arg(global = true, long, env = "SELFDESTRUCT_PODINFO_DIR", value_name = "DIR",
          default_value = "/etc/podinfo")]
    pub(crate) podinfo_dir: PathBuf,
    /// Service-account folder (token, namespace) of in-cluster access
    #[arg(global = true, long, env = "SELFDESTRUCT_SERVICE_ACCOUNT_DIR", value_name = "DIR", hide = true,
          default_value = "/var/run/secrets/kubernetes.io/serviceaccount")]
    pub service_account_dir: PathBuf,
    /// Kubeconfig file [default: KUBECONFIG, else ~/.kube/config, else the in-cluster account]
    #[arg(global = true, long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

/// `value` if it passes `valid`, else what is expected.
fn checked(valid: bool, value: &str, expected: &str) -> Result<String, String> {
    valid
        .then(|| value.to_string())
        .ok_or_else(|| expected.to_string())
}

/// `value` if it is a DNS-1123 subdomain (a pod or node name), else what is expected.
pub fn subdomain(value: &str) -> Result<String, String> {
    let expected = "a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and \
                    ending with a letter or digit, at most 253 characters (the Downward API value)";
    checked(is_dns1123_subdomain(value), value, expected)
}

fn label(value: &str) -> Result<String, String> {
    let expected = "a DNS-1123 label: lower-case letters, digits and '-', starting and ending \
                    with a letter or digit, at most 63 characters (the Downward API value)";
    checked(is_dns1123_label(value), value, expected)
}

fn uid(value: &str) -> Result<String, String> {
    let valid = value.len() <= 128 && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    checked(valid, value, "the pod's metadata.uid from the Downward API")
}

/// Where a value came from (for log lines and error messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// An environment variable or flag.
    Env,
    /// A file of the downwardAPI volume.
    PodInfo,
    /// The hostname (a pod's hostname is its name, truncated to 63 characters).
    Hostname,
    /// The service-account namespace file.
    ServiceAccount,
    /// The kubeconfig context.
    Kubeconfig,
}

/// The own pod as far as known before asking the API server: enough to read it.
/// [`Identity::own_pod`] then makes the one own-pod value the agent works with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) name: String,
    pub(crate) name_from: Source,
    pub(crate) namespace: String,
    pub(crate) namespace_from: Source,
    /// Pod uid, if the Downward API gives it.
    pub(crate) uid: Option<String>,
    /// Node name, if the Downward API gives it.
    pub(crate) node_name: Option<String>,
}

/// Why the pod read under the own name is not this process's pod (a successor
/// the StatefulSet created under the same name): nothing may be done to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotOurs {
    /// `POD_UID` names another pod.
    #[error(
        "the pod under this name (uid {read}) is a successor, not ours (POD_UID {ours}): nothing to do"
    )]
    OtherUid { ours: String, read: String },
    /// Without `POD_UID`: the pod was created after this process started.
    #[error(
        "the pod under this name (uid {read}) was created after this process started: a successor, \
         not ours; doing nothing to it (set POD_UID from the Downward API: fieldPath: metadata.uid)"
    )]
    CreatedLater { read: String },
}

impl Identity {
    /// The own pod, built once from this identity and the pod as read under its
    /// name. The Downward API's uid wins: a pod read with another uid is a
    /// successor. Without it, a pod created after `process_start` (beyond
    /// `CLOCK_SKEW`) is one. The Downward API's node name fills in a pod not
    /// yet bound in the API server's answer.
    pub(crate) fn own_pod(
        &self,
        pod: &PodObject,
        process_start: SystemTime,
    ) -> Result<OwnPod, NotOurs> {
        let mut own = crate::summarize::own_pod(pod);
        match &self.uid {
            Some(ours) if !own.uid.is_empty() && own.uid != *ours => {
                return Err(NotOurs::OtherUid {
                    ours: ours.clone(),
                    read: own.uid,
                });
            }
            Some(ours) => own.uid.clone_from(ours),
            None => {
                let created = pod
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(crate::summarize::time_of);
                if !may_be_own(created, process_start) {
                    return Err(NotOurs::CreatedLater { read: own.uid });
                }
            }
        }
        if own.name.is_empty() {
            own.name.clone_from(&self.name);
        }
        if own.namespace.is_empty() {
            own.namespace.clone_from(&self.namespace);
        }
        own.node_name = own.node_name.or_else(|| self.node_name.clone());
        Ok(own)
    }
}

/// What could not be found, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdentityError {
    #[error(
        "cannot tell the own pod's name: set POD_NAME from the Downward API \
         (env: - name: POD_NAME, valueFrom: fieldRef: fieldPath: metadata.name)"
    )]
    NoName,
    #[error(
        "cannot tell the own pod's namespace: set POD_NAMESPACE from the Downward API \
         (env: - name: POD_NAMESPACE, valueFrom: fieldRef: fieldPath: metadata.namespace)"
    )]
    NoNamespace,
    /// A name or namespace from a file, the hostname or the kubeconfig that is not a
    /// Kubernetes name (values from the environment are checked with the settings).
    #[error(
        "the own pod's {what} {value:?} (from {from:?}) is not a valid Kubernetes name: \
         set {var} from the Downward API"
    )]
    Invalid {
        what: &'static str,
        var: &'static str,
        value: String,
        from: Source,
    },
}

/// A DNS-1123 label (RFC 1123, as Kubernetes checks namespace names): 1-63 of
/// `[a-z0-9-]`, starting and ending with a letter or digit. No maintained crate
/// offers Kubernetes' name rules, so they are written out here.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain (pod and node names): at most 253 characters of
/// dot-separated labels.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Clock skew allowed between this node and the API server when comparing a pod's
/// creation time with this process's start.
pub(crate) const CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(60);

/// Without `POD_UID`, whether a pod read under the own name can be this process's
/// pod: it must have been created before the process started (allowing for
/// [`CLOCK_SKEW`]). A later one is a successor that took the name while the first
/// reads failed (a force deletion and re-creation), and adopting its uid would
/// delete it. An unknown creation time proves nothing either way: refuse.
pub(crate) fn may_be_own(created: Option<SystemTime>, process_start: SystemTime) -> bool {
    created.is_some_and(|c| c <= selfdestruct_decision::later(process_start, CLOCK_SKEW))
}

/// A file's text, trimmed, if it is one name (a pod name, a namespace).
pub fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.len() <= 253 && !s.contains(char::is_whitespace))
}

/// The machine's hostname.
pub(crate) fn hostname() -> Option<String> {
    let name = hostname::get().ok()?.into_string().ok()?;
    Some(name.trim().to_string()).filter(|s| !s.is_empty())
}

/// Resolves the identity. `kubeconfig_namespace` is the namespace of the kubeconfig
/// context, used last (local runs).
pub(crate) fn resolve(
    hints: &IdentitySettings,
    hostname: Option<String>,
    kubeconfig_namespace: Option<&str>,
) -> Result<Identity, IdentityError> {
    let podinfo = |file: &str| read_trimmed(&hints.podinfo_dir.join(file));
    let (name, name_from) = hints
        .pod_name
        .clone()
        .map(|n| (n, Source::Env))
        .or_else(|| podinfo("name").map(|n| (n, Source::PodInfo)))
        .or_else(|| hostname.map(|n| (n, Source::Hostname)))
        .ok_or(IdentityError::NoName)?;
    let (namespace, namespace_from) = hints
        .namespace
        .clone()
        .map(|n| (n, Source::Env))
        .or_else(|| podinfo("namespace").map(|n| (n, Source::PodInfo)))
        .or_else(|| {
            read_trimmed(&hints.service_account_dir.join("namespace"))
                .map(|n| (n, Source::ServiceAccount))
        })
        .or_else(|| {
            kubeconfig_namespace
                .filter(|n| !n.is_empty())
                .map(|n| (n.to_string(), Source::Kubeconfig))
        })
        .ok_or(IdentityError::NoNamespace)?;
    if !is_dns1123_subdomain(&name) {
        return Err(IdentityError::Invalid {
            what: "name",
            var: "POD_NAME",
            value: name,
            from: name_from,
        });
    }
    if !is_dns1123_label(&namespace) {
        return Err(IdentityError::Invalid {
            what: "namespace",
            var: "POD_NAMESPACE",
            value: namespace,
            from: namespace_from,
        });
    }
    Ok(Identity {
        name,
        name_from,
        namespace,
        namespace_from,
        uid: hints.uid.clone().or_else(|| podinfo("uid")),
        node_name: hints.node_name.clone(),
    })
}

#[cfg(test)]
mod tests;
