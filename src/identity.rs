//! Who am I: the own pod's name, namespace, uid and node, from the Downward API
//! (environment, then a downwardAPI volume), then the hostname and the
//! service-account namespace file.

use std::fs;
use std::path::Path;

use crate::config::IdentityHints;

/// Where a value came from (for log lines and error messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
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

/// The own pod as far as known before asking the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Pod name and where it came from.
    pub name: (String, Source),
    /// Namespace and where it came from.
    pub namespace: (String, Source),
    /// Pod uid, if the Downward API gives it.
    pub uid: Option<String>,
    /// Node name, if the Downward API gives it.
    pub node_name: Option<String>,
}

/// What could not be found, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// No pod name.
    #[error(
        "cannot tell the own pod's name: set POD_NAME from the Downward API \
         (env: - name: POD_NAME, valueFrom: fieldRef: fieldPath: metadata.name)"
    )]
    NoName,
    /// No namespace.
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
        /// "name" or "namespace".
        what: &'static str,
        /// The variable to set instead.
        var: &'static str,
        /// The value found.
        value: String,
        /// Where it was found.
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
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Clock skew allowed between this node and the API server when comparing a pod's
/// creation time with this process's start.
pub const CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(60);

/// Without `POD_UID`, whether a pod read under the own name can be this process's
/// pod: it must have been created before the process started (allowing for
/// [`CLOCK_SKEW`]). A later one is a successor that took the name while the first
/// reads failed (a force deletion and re-creation), and adopting its uid would
/// delete it. An unknown creation time proves nothing either way: refuse.
pub fn may_be_own(
    created: Option<std::time::SystemTime>,
    process_start: std::time::SystemTime,
) -> bool {
    created.is_some_and(|c| c <= selfdestruct_decision::later(process_start, CLOCK_SKEW))
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.len() <= 253 && !s.contains(char::is_whitespace))
}

/// The machine's hostname.
pub fn hostname() -> Option<String> {
    let name = hostname::get().ok()?.into_string().ok()?;
    Some(name.trim().to_string()).filter(|s| !s.is_empty())
}

/// Resolves the identity. `kubeconfig_namespace` is the namespace of the kubeconfig
/// context, used last (local runs).
pub fn resolve(
    hints: &IdentityHints,
    hostname: Option<String>,
    kubeconfig_namespace: Option<&str>,
) -> Result<Identity, IdentityError> {
    let podinfo = |file: &str| read_trimmed(&hints.podinfo_dir.join(file));
    let name = hints
        .pod_name
        .clone()
        .map(|n| (n, Source::Env))
        .or_else(|| podinfo("name").map(|n| (n, Source::PodInfo)))
        .or_else(|| hostname.map(|n| (n, Source::Hostname)))
        .ok_or(IdentityError::NoName)?;
    let namespace = hints
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
    if !is_dns1123_subdomain(&name.0) {
        return Err(IdentityError::Invalid {
            what: "name",
            var: "POD_NAME",
            value: name.0,
            from: name.1,
        });
    }
    if !is_dns1123_label(&namespace.0) {
        return Err(IdentityError::Invalid {
            what: "namespace",
            var: "POD_NAMESPACE",
            value: namespace.0,
            from: namespace.1,
        });
    }
    Ok(Identity {
        name,
        namespace,
        uid: hints.uid.clone().or_else(|| podinfo("uid")),
        node_name: hints.node_name.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "selfdestruct-identity-{tag}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("tmp dir");
        d
    }

    #[test]
    fn a_pod_created_after_the_process_started_is_not_adopted() {
        use std::time::{Duration, SystemTime};
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let at = |s: i64| {
            Some(if s >= 0 {
                start + Duration::from_secs(s.unsigned_abs())
            } else {
                start - Duration::from_secs(s.unsigned_abs())
            })
        };
        assert!(
            may_be_own(at(-3600), start),
            "the pod the container started in"
        );
        assert!(may_be_own(at(0), start));
        assert!(may_be_own(at(60), start), "within the clock skew");
        assert!(
            !may_be_own(at(61), start),
            "a successor under the same name"
        );
        assert!(!may_be_own(None, start));
    }

    #[test]
    fn kubernetes_name_rules() {
        for ok in [
            "a",
            "placeholder-0",
            "user-placeholder-12",
            "0",
            &"a".repeat(63),
        ] {
            assert!(is_dns1123_label(ok), "{ok}");
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for ok in ["node-a.example.com", "ip-10-0-0-1.ec2.internal"] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
            assert!(!is_dns1123_label(ok), "{ok}");
        }
        for bad in [
            "",
            "Place holder/0",
            "../nodes/node-a",
            "n?x=1",
            "-a",
            "a-",
            "A",
            "a_b",
            "a..b",
            ".a",
            "a.",
            "ä",
            &"a".repeat(64),
        ] {
            assert!(!is_dns1123_label(bad), "{bad}");
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        let long = vec!["a".repeat(63); 4].join(".");
        assert!(is_dns1123_subdomain(&long[..253]));
        assert!(!is_dns1123_subdomain(&long));
    }

    #[test]
    fn names_found_in_files_are_checked_too() {
        let dir = tmpdir("invalid");
        fs::write(dir.join("name"), "Place_holder").expect("write");
        let hints = IdentityHints {
            namespace: Some("placeholders".into()),
            podinfo_dir: dir.clone(),
            service_account_dir: dir.join("none"),
            ..IdentityHints::default()
        };
        assert!(matches!(
            resolve(&hints, None, None),
            Err(IdentityError::Invalid {
                what: "name",
                from: Source::PodInfo,
                ..
            })
        ));
        let hints = IdentityHints {
            pod_name: Some("p".into()),
            podinfo_dir: dir.join("nope"),
            service_account_dir: dir.join("none"),
            ..IdentityHints::default()
        };
        assert!(matches!(
            resolve(&hints, None, Some("../x")),
            Err(IdentityError::Invalid {
                what: "namespace",
                ..
            })
        ));
    }

    #[test]
    fn env_wins_then_podinfo_then_hostname() {
        let dir = tmpdir("order");
        fs::write(dir.join("name"), "from-file\n").expect("write");
        fs::write(dir.join("namespace"), "ns-file").expect("write");
        fs::write(dir.join("uid"), "uid-file").expect("write");
        let mut hints = IdentityHints {
            pod_name: Some("from-env".into()),
            podinfo_dir: dir.clone(),
            service_account_dir: dir.join("none"),
            ..IdentityHints::default()
        };
        let id = resolve(&hints, Some("host".into()), None).expect("resolves");
        assert_eq!(id.name, ("from-env".into(), Source::Env));
        assert_eq!(id.namespace, ("ns-file".into(), Source::PodInfo));
        assert_eq!(id.uid.as_deref(), Some("uid-file"));
        hints.pod_name = None;
        assert_eq!(
            resolve(&hints, Some("host".into()), None)
                .expect("ok")
                .name
                .1,
            Source::PodInfo
        );
        fs::remove_file(dir.join("name")).expect("rm");
        assert_eq!(
            resolve(&hints, Some("host".into()), None).expect("ok").name,
            ("host".into(), Source::Hostname)
        );
        assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoName));
    }

    #[test]
    fn namespace_falls_back_to_service_account_then_kubeconfig() {
        let dir = tmpdir("ns");
        let sa = dir.join("sa");
        fs::create_dir_all(&sa).expect("mkdir");
        let hints = IdentityHints {
            pod_name: Some("p".into()),
            podinfo_dir: dir.join("nope"),
            service_account_dir: sa.clone(),
            ..IdentityHints::default()
        };
        assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
        assert_eq!(
            resolve(&hints, None, Some("ctx")).expect("ok").namespace,
            ("ctx".into(), Source::Kubeconfig)
        );
        fs::write(sa.join("namespace"), "placeholders").expect("write");
        assert_eq!(
            resolve(&hints, None, Some("ctx")).expect("ok").namespace,
            ("placeholders".into(), Source::ServiceAccount)
        );
        // blank and garbage files are ignored
        fs::write(sa.join("namespace"), "  \n").expect("write");
        assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
        fs::write(sa.join("namespace"), "two words").expect("write");
        assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
        assert!(IdentityError::NoName.to_string().contains("POD_NAME"));
    }

    #[test]
    fn hostname_is_readable() {
        assert!(hostname().is_some());
    }
}
