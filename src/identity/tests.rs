//! Unit tests of `identity` (a child module: they see its private items).

use super::*;
use k8s_openapi::api::core::v1::Pod;
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
    let pod = |uid: &str, created: &str| -> Pod {
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
