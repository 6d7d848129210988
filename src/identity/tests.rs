//! Unit tests of `identity` (a child module: they see its private items).

use super::*;
use std::fs;
use std::path::PathBuf;
use std::time::SystemTime;

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
    let hints = IdentitySettings {
        namespace: Some("placeholders".into()),
        podinfo_dir: dir.clone(),
        service_account_dir: dir.join("none"),
        ..IdentitySettings::default()
    };
    assert!(matches!(
        resolve(&hints, None, None),
        Err(IdentityError::Invalid {
            what: "name",
            from: Source::PodInfo,
            ..
        })
    ));
    let hints = IdentitySettings {
        pod_name: Some("p".into()),
        podinfo_dir: dir.join("nope"),
        service_account_dir: dir.join("none"),
        ..IdentitySettings::default()
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
    let mut hints = IdentitySettings {
        pod_name: Some("from-env".into()),
        podinfo_dir: dir.clone(),
        service_account_dir: dir.join("none"),
        ..IdentitySettings::default()
    };
    let id = resolve(&hints, Some("host".into()), None).expect("resolves");
    assert_eq!((id.name.as_str(), id.name_from), ("from-env", Source::Env));
    assert_eq!(
        (id.namespace.as_str(), id.namespace_from),
        ("ns-file", Source::PodInfo)
    );
    assert_eq!(id.uid.as_deref(), Some("uid-file"));
    hints.pod_name = None;
    assert_eq!(
        resolve(&hints, Some("host".into()), None)
            .expect("ok")
            .name_from,
        Source::PodInfo
    );
    fs::remove_file(dir.join("name")).expect("rm");
    assert_eq!(
        resolve(&hints, Some("host".into()), None).map(|id| (id.name, id.name_from)),
        Ok(("host".into(), Source::Hostname))
    );
    assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoName));
}

#[test]
fn namespace_falls_back_to_service_account_then_kubeconfig() {
    let dir = tmpdir("ns");
    let sa = dir.join("sa");
    fs::create_dir_all(&sa).expect("mkdir");
    let hints = IdentitySettings {
        pod_name: Some("p".into()),
        podinfo_dir: dir.join("nope"),
        service_account_dir: sa.clone(),
        ..IdentitySettings::default()
    };
    assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
    assert_eq!(
        resolve(&hints, None, Some("ctx")).map(|id| (id.namespace, id.namespace_from)),
        Ok(("ctx".into(), Source::Kubeconfig))
    );
    fs::write(sa.join("namespace"), "placeholders").expect("write");
    assert_eq!(
        resolve(&hints, None, Some("ctx")).map(|id| (id.namespace, id.namespace_from)),
        Ok(("placeholders".into(), Source::ServiceAccount))
    );
    // blank and garbage files are ignored
    fs::write(sa.join("namespace"), "  \n").expect("write");
    assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
    fs::write(sa.join("namespace"), "two words").expect("write");
    assert_eq!(resolve(&hints, None, None), Err(IdentityError::NoNamespace));
    assert!(IdentityError::NoName.to_string().contains("POD_NAME"));
}

#[test]
fn the_own_pod_is_built_once_and_the_downward_uid_wins() {
    use std::time::Duration;
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let id = Identity {
        name: "placeholder-0".into(),
        name_from: Source::Env,
        namespace: "placeholders".into(),
        namespace_from: Source::Env,
        uid: None,
        node_name: Some("node-a".into()),
    };
    // `start` is 2027-01-15T08:00:00Z; `created` is an hour-of-day then.
    let pod = |uid: &str, created: &str| -> crate::summarize::PodObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "placeholder-0", "namespace": "placeholders", "uid": uid,
                         "creationTimestamp": format!("2027-01-15T{created}:00:00Z")},
            "spec": {"containers": []}
        }))
        .expect("valid pod")
    };
    // Without POD_UID: the uid as read, unless the pod is younger than the process.
    let own = id.own_pod(&pod("u1", "08"), start).expect("ours");
    assert_eq!(
        (own.uid.as_str(), own.node_name.as_deref()),
        ("u1", Some("node-a"))
    );
    assert_eq!(
        id.own_pod(&pod("u2", "09"), start),
        Err(NotOurs::CreatedLater { read: "u2".into() })
    );
    // With POD_UID: it wins, and a pod read with another uid is a successor.
    let with_uid = Identity {
        uid: Some("u1".into()),
        ..id.clone()
    };
    assert_eq!(
        with_uid.own_pod(&pod("u1", "09"), start).map(|o| o.uid),
        Ok("u1".into())
    );
    assert_eq!(
        with_uid.own_pod(&pod("u2", "08"), start),
        Err(NotOurs::OtherUid {
            ours: "u1".into(),
            read: "u2".into()
        })
    );
    // A pod read without a uid (a minimal answer) takes the Downward API's.
    assert_eq!(
        with_uid.own_pod(&pod("", "08"), start).map(|o| o.uid),
        Ok("u1".into())
    );
    assert!(
        NotOurs::CreatedLater { read: "u2".into() }
            .to_string()
            .contains("a successor, not ours")
    );
}

#[test]
fn hostname_is_readable() {
    assert!(hostname().is_some());
}

/// The Downward API files of any content (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;

    use crate::identity::{self, IdentitySettings};
    use crate::testing::fuzz_dir;
    use crate::testing::props::proptest_config;

    proptest! {
        // Each case writes three files: fewer cases.
        #![proptest_config(proptest_config(256))]

        #[test]
        fn downward_api_files_of_any_content_never_panic(
            name in prop::collection::vec(any::<u8>(), 0..300),
            namespace in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
            uid in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
            text_name in prop::option::of("[ \t\n]{0,2}[a-z0-9.-]{0,270}[ \t\n]{0,2}"),
            // what identity::hostname() can return: trimmed, never empty
            host in prop::option::of("[!-~]([ -~]{0,62}[!-~])?"),
            // the service account's namespace file, and the kubeconfig context's namespace
            sa_namespace in prop::option::of(prop::collection::vec(any::<u8>(), 0..80)),
            kubeconfig_namespace in prop::option::of(prop_oneof![any::<String>(), "[a-z0-9-]{0,64}"]),
        ) {
            let dir = fuzz_dir();
            let write = |file: &str, content: Option<&[u8]>| match content {
                Some(c) => std::fs::write(dir.join(file), c).expect("write"),
                None => {
                    let _ = std::fs::remove_file(dir.join(file));
                }
            };
            write("name", Some(text_name.as_ref().map_or(name.as_slice(), |t| t.as_bytes())));
            write("namespace", namespace.as_deref());
            write("uid", uid.as_deref());
            std::fs::create_dir_all(dir.join("sa")).expect("mkdir");
            write("sa/namespace", sa_namespace.as_deref());
            let hints = IdentitySettings {
                podinfo_dir: dir.clone(),
                service_account_dir: dir.join("sa"),
                ..IdentitySettings::default()
            };
            match identity::resolve(&hints, host.clone(), kubeconfig_namespace.as_deref()) {
                Ok(id) => {
                    // Whatever the source, what comes out is a Kubernetes name.
                    prop_assert!(identity::is_dns1123_subdomain(&id.name), "{id:?}");
                    prop_assert!(identity::is_dns1123_label(&id.namespace), "{id:?}");
                    if let Some(u) = &id.uid {
                        prop_assert!(!u.is_empty() && !u.contains(char::is_whitespace), "{id:?}");
                    }
                }
                Err(e) => {
                    // The error names the variable that fixes it.
                    let text = e.to_string();
                    prop_assert!(text.contains("POD_NAME") || text.contains("POD_NAMESPACE"), "{text}");
                }
            }
        }
    }
}
