//! Unit tests of the library's public items, one module per source module (they were
//! inline `#[cfg(test)]` modules).

mod api {
    use http::StatusCode;
    use selfdestruct::api::*;
    use std::time::Duration;

    use selfdestruct::logging::quote;
    use selfdestruct_decision::Outcome;

    /// A captured answer (the in-repo copy of the captures, which the fake
    /// API server's tests replay too): its status code and body.
    fn fixture_status(name: &str) -> (u16, Vec<u8>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fake-apiserver/fixtures")
            .join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v: serde_json::Value = serde_json::from_str(&text).expect("a JSON capture");
        let code = v["status"].as_u64().and_then(|c| u16::try_from(c).ok());
        (
            code.expect("a status code"),
            v["body"].to_string().into_bytes(),
        )
    }

    #[test]
    fn outcomes_of_real_server_answers() {
        let table = [
            ("eviction-429-pdb.json", Outcome::Busy { retry_after: None }),
            ("eviction-409-uid-precondition.json", Outcome::Gone),
            ("pod-delete-409-uid-precondition.json", Outcome::Gone),
            ("pod-get-404.json", Outcome::Gone),
            ("pod-delete-403-other-namespace.json", Outcome::Denied),
            ("eviction-422-admission-policy.json", Outcome::Denied),
        ];
        for (file, want) in table {
            let (code, body) = fixture_status(file);
            let status = StatusCode::from_u16(code).expect("valid code");
            let e = status_error(status, &body, None);
            assert_eq!(outcome_of(&Err(e.clone())), want, "{file}: {e}");
            if let ApiError::Status {
                message, reason, ..
            } = &e
            {
                assert!(!message.is_empty() && !reason.is_empty(), "{file}");
            }
        }
        assert_eq!(outcome_of(&Ok(())), Outcome::Done);
    }

    #[test]
    fn retry_after_from_header_or_details() {
        let body = br#"{"kind":"Status","reason":"TooManyRequests","message":"slow down","details":{"retryAfterSeconds":3}}"#;
        let e = status_error(StatusCode::TOO_MANY_REQUESTS, body, None);
        assert_eq!(
            outcome_of(&Err(e)),
            Outcome::Busy {
                retry_after: Some(Duration::from_secs(3))
            }
        );
        let e = status_error(
            StatusCode::TOO_MANY_REQUESTS,
            b"",
            Some(Duration::from_secs(9)),
        );
        assert_eq!(
            outcome_of(&Err(e)),
            Outcome::Busy {
                retry_after: Some(Duration::from_secs(9))
            }
        );
    }

    #[test]
    fn server_text_is_quoted_escaped_and_cut() {
        assert_eq!(quote("plain: ünïcode"), "plain: ünïcode");
        assert_eq!(
            quote("\x1b[31mred\r\nInjected: line\t."),
            "\\u{1b}[31mred\\r\\nInjected: line\\t."
        );
        let long = "é".repeat(60_000);
        let q = quote(&long);
        assert!(
            q.len() < selfdestruct::logging::QUOTE_LIMIT + 40,
            "{}",
            q.len()
        );
        assert!(q.ends_with("... (120000 bytes in all)"), "{q}");
        let e = status_error(StatusCode::INTERNAL_SERVER_ERROR, long.as_bytes(), None);
        assert!(e.to_string().len() < selfdestruct::logging::QUOTE_LIMIT + 80);
    }

    #[test]
    fn a_2xx_carrying_a_failure_status_is_its_code() {
        let failure = |code: u16| {
            format!(
                r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","message":"m","code":{code}}}"#
            )
        };
        let code = failure_carried(failure(429).as_bytes());
        assert_eq!(code, Some(StatusCode::TOO_MANY_REQUESTS));
        let e = status_error(code.expect("a code"), failure(429).as_bytes(), None);
        assert_eq!(outcome_of(&Err(e)), Outcome::Busy { retry_after: None });
        // No error code carried: a server error.
        assert_eq!(
            failure_carried(failure(0).as_bytes()),
            Some(StatusCode::INTERNAL_SERVER_ERROR)
        );
        assert_eq!(
            failure_carried(failure(200).as_bytes()),
            Some(StatusCode::INTERNAL_SERVER_ERROR)
        );
        // Success, a Pod (whose status is an object), garbage: no error.
        let success = br#"{"kind":"Status","apiVersion":"v1","status":"Success","code":201}"#;
        assert_eq!(failure_carried(success), None);
        let pod = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"status":{"phase":"Running"}}"#;
        assert_eq!(failure_carried(pod), None);
        assert_eq!(failure_carried(b"<html>"), None);
    }

    #[test]
    fn names_are_one_escaped_path_segment() {
        assert_eq!(segment("placeholder-0"), "placeholder-0");
        assert_eq!(segment("n?x=1"), "n%3Fx%3D1");
        assert_eq!(segment("../nodes/node-a"), "..%2Fnodes%2Fnode-a");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("Place holder/0"), "Place%20holder%2F0");
        let req = pods("a/b")
            .get(&segment("p?q#r"), &kube::api::GetParams::default())
            .expect("request");
        assert_eq!(req.uri().path(), "/api/v1/namespaces/a%2Fb/pods/p%3Fq%23r");
        assert_eq!(req.uri().query(), None);
    }

    #[test]
    fn only_a_uid_conflict_means_replaced() {
        let conflict = |message: &str| ApiError::Status {
            code: 409,
            reason: "Conflict".into(),
            message: message.into(),
            retry_after: None,
        };
        let pdb_race = conflict(
            "Operation cannot be fulfilled on poddisruptionbudgets.policy \"placeholder\": \
             the object has been modified; please apply your changes to the latest version and try again",
        );
        assert_eq!(outcome_of(&Err(pdb_race)), Outcome::Failed);
        assert_eq!(outcome_of(&Err(conflict(""))), Outcome::Failed);
        let replaced = conflict(
            "Operation cannot be fulfilled on Pod \"placeholder-0\": the UID in the precondition (a) \
             does not match the UID in record (b). The object might have been deleted and then recreated",
        );
        assert_eq!(outcome_of(&Err(replaced)), Outcome::Gone);
    }

    #[test]
    fn garbage_bodies_still_classify() {
        for (code, want) in [
            (500, Outcome::Failed),
            (503, Outcome::Failed),
            (504, Outcome::Failed),
            (400, Outcome::Failed),
            (410, Outcome::Failed),
            (401, Outcome::Failed),
            (403, Outcome::Denied),
        ] {
            let e = status_error(
                StatusCode::from_u16(code).expect("code"),
                b"<html>oops",
                None,
            );
            assert!(e.to_string().contains("oops"));
            assert_eq!(outcome_of(&Err(e)), want, "{code}");
        }
        assert_eq!(
            outcome_of(&Err(ApiError::Timeout(REQUEST_TIMEOUT))),
            Outcome::Failed
        );
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            outcome_of(&Err(ApiError::transport(refused))),
            Outcome::Failed
        );
        // The client layer's time limit comes back as itself, not as a transport error.
        let layer = kube::Error::Service(Box::new(ApiError::Timeout(REQUEST_TIMEOUT)));
        assert!(matches!(from_kube(layer), ApiError::Timeout(t) if t == REQUEST_TIMEOUT));
    }
}

mod identity {
    use k8s_openapi::api::core::v1::Pod;
    use selfdestruct::identity::*;
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
}

mod pdb {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use selfdestruct::pdb::*;
    use std::collections::BTreeMap;

    /// The captured answer, as the agent's error text carries it.
    fn captured() -> (u16, String) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fake-apiserver/fixtures/eviction-500-two-pdbs.json");
        let text = std::fs::read_to_string(path).expect("fixture");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let code = v["status"].as_u64().and_then(|c| u16::try_from(c).ok());
        let message = v["body"]["message"].as_str().expect("message");
        (code.expect("status"), format!("HTTP 500 : {message}"))
    }

    #[test]
    fn the_real_answer_is_recognised_and_nothing_else() {
        let (code, text) = captured();
        assert!(is_multiple_pdbs(Some(code), &text));
        // Other 500s, the same words on another status, no answer at all.
        assert!(!is_multiple_pdbs(
            Some(500),
            "HTTP 500 InternalError: etcdserver: request timed out"
        ));
        assert!(!is_multiple_pdbs(Some(429), &text));
        assert!(!is_multiple_pdbs(None, &text));
    }

    #[test]
    fn the_message_names_the_pod_its_labels_and_the_fix() {
        let labels: BTreeMap<String, String> = [
            ("component", "user-placeholder"),
            ("app", "jupyterhub"),
            ("release", "jhub"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let m = multiple_pdbs_message("jhub", "user-placeholder-0", &labels, None);
        for part in [
            "jhub/user-placeholder-0",
            "two or more PodDisruptionBudgets",
            "app=jupyterhub,component=user-placeholder,release=jhub",
            "kubectl -n jhub get poddisruptionbudgets",
            "post-render.sh",
        ] {
            assert!(m.contains(part), "{part:?} in {m}");
        }
        // An Event message must stay well under the API's 1 KiB note limit.
        assert!(m.len() < 1024, "{}", m.len());
        let names = [
            "jhub-user-placeholder".to_string(),
            "selfdestruct".to_string(),
        ];
        let m = multiple_pdbs_message("jhub", "user-placeholder-0", &labels, Some(&names));
        assert!(
            m.contains("the PodDisruptionBudgets jhub-user-placeholder and selfdestruct select it"),
            "{m}"
        );
        assert!(m.len() < 1024, "{}", m.len());
    }

    #[test]
    fn the_budgets_that_select_the_pod() {
        let pdb = |name: &str, selector: serde_json::Value| -> PodDisruptionBudget {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"maxUnavailable": 1, "selector": selector}
            }))
            .expect("a budget")
        };
        let mut none: PodDisruptionBudget = pdb("no-selector", serde_json::json!({}));
        if let Some(spec) = none.spec.as_mut() {
            spec.selector = None;
        }
        let pdbs = [
            pdb(
                "chart",
                serde_json::json!({"matchLabels": {"component": "user-placeholder", "release": "jhub"}}),
            ),
            pdb(
                "ours",
                serde_json::json!({"matchExpressions": [{"key": "component", "operator": "In", "values": ["user-placeholder"]}]}),
            ),
            pdb(
                "users",
                serde_json::json!({"matchLabels": {"component": "singleuser-server"}}),
            ),
            pdb("everything", serde_json::json!({})),
            none,
        ];
        let labels: BTreeMap<String, String> =
            [("component", "user-placeholder"), ("release", "jhub")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(selecting(&pdbs, &labels), ["chart", "ours", "everything"]);
    }
}

mod summarize {
    use selfdestruct::summarize::*;
    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::{Node, Pod};

    #[test]
    fn own_pod_summary_never_needs_optional_fields() {
        let empty = own_pod(&Pod::default());
        assert_eq!(empty.name, "");
        assert_eq!(empty.started_at, None);
        assert!(empty.affinity.is_empty());
        let from_fixture: Pod = serde_json::from_value(serde_json::json!({
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
        let own = own_pod(&from_fixture);
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
        let object: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"pool": "user", "noise": "x"}, "annotations": {"big": "..."}},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T04:26:05Z"}],
                       "images": [{"names": ["docker.io/library/nginx:1.25"], "sizeBytes": 1}]}
        }))
        .expect("valid node");
        let required =
            selfdestruct_decision::images::parse_list("nginx:1.25,busybox").expect("valid");
        let s = node(object, &["pool".to_string()].into(), &required);
        assert_eq!(s.labels.len(), 1);
        // PreferNoSchedule too: the decision reads untolerated soft taints.
        assert_eq!(s.taints.len(), 2);
        assert!(s.ready.ready && s.ready.since.is_some());
        assert_eq!(s.images_present, vec![0]);
        assert!(!s.images_truncated);
        let bare = node(Node::default(), &BTreeSet::new(), &required);
        assert!(!bare.ready.ready);
    }

    #[test]
    fn sibling_pending_states() {
        let lite = |node: Option<&str>, phase: Option<&str>| Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: node.map(Into::into),
                ..Default::default()
            }),
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: phase.map(Into::into),
                ..Default::default()
            }),
            ..Pod::default()
        };
        assert!(sibling(lite(None, Some("Pending"))).pending);
        assert!(sibling(lite(Some("n"), Some("Pending"))).pending);
        assert!(sibling(lite(Some("n"), None)).pending);
        assert!(!sibling(lite(Some("n"), Some("Running"))).pending);
    }
}

mod config {
    use selfdestruct::config::*;

    use std::time::Duration;

    use selfdestruct::api::Mode;
    use tracing::level_filters::LevelFilter;

    use selfdestruct::logging::LogFormat;

    use selfdestruct_decision::selector::Selector;

    fn cli(flags: &[&str]) -> Result<Cli, String> {
        let argv = std::iter::once("selfdestruct").chain(flags.iter().copied());
        Cli::parse_mode(argv).map_err(|e| e.to_string())
    }

    /// Flags and their values.
    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn parse(pairs: Pairs) -> Result<Config, String> {
        let flags: Vec<String> = pairs.iter().map(|(f, v)| format!("--{f}={v}")).collect();
        let cli = cli(&flags.iter().map(String::as_str).collect::<Vec<_>>())?;
        Config::from_cli(&cli).map_err(|e| e.to_string())
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    // Every setting's variable, a bad value of each and the form its message names:
    // tests/startup.rs walks them all through the binary.

    #[test]
    fn defaults_are_sane() {
        let c = parse(&[]).expect("defaults are valid");
        // The core's `Policy::default()` (which the simulator runs as "the agent's
        // defaults") is exactly what the flags' defaults give.
        assert_eq!(c.policy, selfdestruct_decision::Policy::default());
        assert_eq!(
            (c.grace_period, c.shared.level(None)),
            (None, LevelFilter::INFO)
        );
        let a = &c.args;
        assert_eq!(
            (a.mode, a.dry_run, c.shared.log_format, a.on_exit),
            (Mode::Evict, false, LogFormat::Text, OnExit::Exit)
        );
        assert_eq!(a.sibling_selector, Siblings::FromLabels);
        assert!(a.node_selector.is_empty() && c.shared.identity.pod_name.is_none());
    }

    #[test]
    fn wrapper_command_and_on_exit() {
        let wrapped = cli(&["--on-exit=delete", "--", "sh", "-x"]).expect("flags");
        assert_eq!(wrapped.exec, ["sh", "-x"]);
        assert_eq!(wrapped.agent.on_exit, OnExit::Delete);
        assert!(cli(&["--max-lifetime=1h"]).expect("ok").exec.is_empty());
        assert!(
            cli(&["node-gate", "--node-name=n"])
                .expect("ok")
                .exec
                .is_empty()
        );
    }

    #[test]
    fn valid_forms_trimmed_and_in_any_case() {
        #[rustfmt::skip]
        let c = parse(&[
            ("min-lifetime", "1h"), ("max-lifetime", "1h30m"), ("mode", " Delete "),
            ("dry-run", "yes"), ("grace-period", "5s"), ("log-format", "JSON"),
            ("log-level", "debug"), ("node-selector", "pool=user,zone in (a,b)"),
            ("required-images", "jupyter/scipy-notebook:2024, quay.io/x/y:1"),
            ("max-moves-per-hour", " 0 "), ("sibling-selector", "app=x"),
            ("move-to-new-nodes", "off"), ("pod-name", "user-placeholder-3"),
            ("pod-namespace", "jhub"), ("pod-uid", "0b1f-77"), ("node-name", "ip-10.ec2.internal"),
        ])
        .expect("valid");
        let (p, a) = (&c.policy, &c.args);
        let images =
            selfdestruct_decision::images::parse_list("jupyter/scipy-notebook:2024,quay.io/x/y:1");
        assert_eq!(p.lifetime, Some((secs(3600), secs(5400))));
        assert_eq!(p.required_images, images.expect("valid"));
        assert!(p.max_moves_per_hour == 0 && !p.move_to_new_nodes);
        let given = (
            c.grace_period,
            c.shared.level(None),
            a.mode,
            a.dry_run,
            c.shared.log_format,
        );
        let want = (Some(secs(5)), LevelFilter::DEBUG, Mode::Delete, true);
        assert_eq!(given, (want.0, want.1, want.2, want.3, LogFormat::Json));
        let id = &c.shared.identity;
        let names = [&id.pod_name, &id.namespace, &id.uid, &id.node_name].map(|n| n.as_deref());
        let want = [
            "user-placeholder-3",
            "jhub",
            "0b1f-77",
            "ip-10.ec2.internal",
        ];
        assert_eq!(names, want.map(Some));
        let selector = |s| Selector::parse(s).expect("valid");
        assert_eq!(a.node_selector, selector("pool=user,zone in (a,b)"));
        assert_eq!(a.sibling_selector, Siblings::Selector(selector("app=x")));
        // a bare boolean flag means true
        assert!(cli(&["--dry-run"]).expect("flag").agent.dry_run);
    }

    #[test]
    fn lifetime_bounds_and_unset_values() {
        let lifetime = |pairs: Pairs| parse(pairs).expect("valid").policy.lifetime;
        #[rustfmt::skip]
        let table: &[(Pairs, Option<(u64, u64)>)] = &[
            // one bound alone fixes the lifetime
            (&[("max-lifetime", "2h")], Some((7200, 7200))),
            (&[("min-lifetime", "2h")], Some((7200, 7200))),
            // MAX_LIFETIME=0 is "off", whatever the minimum says
            (&[("min-lifetime", "0"), ("max-lifetime", "0")], None),
            (&[("min-lifetime", "1h"), ("max-lifetime", "0")], None),
            // an empty value (a chart's unset one) is unset
            (&[("min-lifetime", "1h"), ("max-lifetime", " ")], Some((3600, 3600))),
        ];
        for (pairs, want) in table {
            let want = want.map(|(lo, hi)| (secs(lo), secs(hi)));
            assert_eq!(lifetime(pairs), want, "{pairs:?}");
        }
        #[rustfmt::skip]
        let empty = parse(&[
            ("grace-period", ""), ("log-level", ""), ("pod-name", ""), ("node-selector", ""),
            ("sibling-selector", ""), ("required-images", ""), ("log-format", ""), ("on-exit", ""),
        ]);
        assert_eq!(empty, parse(&[]), "empty = unset");
        // `none` in any case turns sibling awareness off
        for none in ["none", "NONE", "None"] {
            let c = parse(&[("sibling-selector", none)]).expect("valid");
            assert_eq!(c.args.sibling_selector, Siblings::Off);
        }
        let e = parse(&[("min-lifetime", "2h"), ("max-lifetime", "1h")]).expect_err("min > max");
        let want = "invalid SELFDESTRUCT_MIN_LIFETIME (--min-lifetime) = \"2h\": expected at \
                    most SELFDESTRUCT_MAX_LIFETIME (1h)";
        assert_eq!(e, want);
    }

    #[test]
    fn grace_period_is_whole_seconds_and_never_a_silent_force_delete() {
        let grace = |pairs: Pairs| parse(pairs).expect("valid").grace_period;
        #[rustfmt::skip]
        let table = [("0", 1), ("0s", 1), ("500ms", 1), ("1500ms", 2), ("30s", 30)];
        for (value, want) in table {
            let given = grace(&[("grace-period", value)]);
            assert_eq!(given, Some(secs(want)), "{value}");
        }
        // 0 (a force deletion) only with the explicit opt-in.
        let forced = grace(&[("grace-period", "0"), ("force-delete", "true")]);
        assert_eq!(forced, Some(Duration::ZERO));
        let rounded = grace(&[("grace-period", "500ms"), ("force-delete", "true")]);
        assert_eq!(rounded, Some(secs(1)), "only an explicit 0 is 0");
    }

    #[test]
    fn a_setting_without_a_variable_is_named_by_its_flag() {
        let no_env = <Cli as clap::CommandFactory>::command().mut_args(|a| a.env(None));
        let e = no_env.try_get_matches_from(["selfdestruct", "--mode=x"]);
        let want = "error: invalid --mode = \"x\": expected evict or delete\n";
        assert_eq!(e.expect_err("bad").to_string(), want);
    }

    #[test]
    fn log_levels_from_rust_log() {
        use LevelFilter as L;
        assert_eq!(parse_level("warn,selfdestruct=trace"), Some(L::TRACE));
        assert_eq!(parse_level("kube=debug"), None);
        let a = cli(&[]).expect("flags");
        let level = |rust_log| a.shared.level(Some(rust_log));
        assert_eq!((level("error"), level("garbage")), (L::ERROR, L::INFO));
        let flag = cli(&["--log-level=warn"]).expect("flags");
        let given = flag.shared.level(Some("error"));
        assert_eq!(given, L::WARN, "the setting wins over RUST_LOG");
    }
}

mod node_gate {
    use selfdestruct::node_gate::*;
    use std::time::Duration;

    use serde_json::{Value, json};

    use selfdestruct::api::ApiError;

    use selfdestruct::identity::IdentitySettings;
    use selfdestruct_decision::settings::ImageSettings;

    #[test]
    fn the_node_name_is_one_escaped_segment() {
        assert_eq!(node_url("node-a"), "/api/v1/nodes/node-a");
        assert_eq!(node_url("n?x=1"), "/api/v1/nodes/n%3Fx%3D1");
        assert_eq!(node_url("../pods"), "/api/v1/nodes/..%2Fpods");
    }

    #[test]
    fn settings_default_and_the_own_node_is_required() {
        /// The gate's settings and the shared identity, as `node-gate` reads them.
        #[derive(clap::Parser)]
        struct Gate {
            #[command(flatten)]
            gate: GateSettings,
            #[command(flatten)]
            identity: IdentitySettings,
        }
        let gate = |flags: &[&str]| {
            let argv = [&["node-gate"][..], flags].concat();
            let g = <Gate as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
            GateConfig::new(&g.gate, &g.identity).map_err(|e| e.to_string())
        };
        let c = gate(&["--node-name=n1", "--gate-poll=10ms"]).expect("valid");
        assert_eq!(c.gate.taint_key, DEFAULT_TAINT);
        assert_eq!(c.gate.timeout, Duration::from_secs(900));
        assert_eq!(c.gate.poll, Duration::from_secs(1), "at least 1s");
        // Missing is reported as invalid, naming the variable and the Downward API field.
        for missing in [&[][..], &["--node-name= "]] {
            let e = gate(missing).expect_err("no node name");
            assert!(e.contains("invalid NODE_NAME (--node-name)") && e.contains("nodeName"));
        }
    }

    fn cfg(images: &str) -> GateConfig {
        GateConfig {
            node_name: "n1".into(),
            gate: GateSettings {
                taint_key: DEFAULT_TAINT.into(),
                images: ImageSettings {
                    required_images: selfdestruct_decision::images::parse_list(images)
                        .expect("valid"),
                },
                timeout: Duration::from_secs(900),
                poll: Duration::from_secs(10),
            },
        }
    }

    #[test]
    fn patch_removes_only_the_gate_taint_and_tests_the_rest() {
        let node = json!({
            "spec": {"taints": [
                {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"},
                {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"}
            ]},
            "status": {"images": [{"names": ["docker.io/jupyter/scipy-notebook:1"]}]}
        });
        let v = view(&node, &cfg("jupyter/scipy-notebook:1"));
        assert_eq!(v.gate_indices, vec![1]);
        assert!(v.missing.is_empty());
        let patch = removal_patch(&v).expect("has the taint");
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[0]["value"], node["spec"]["taints"]);
        assert_eq!(patch[1], json!({"op": "remove", "path": "/spec/taints/1"}));
    }

    /// Applies `remove` operations of a JSON patch after checking its `test`.
    fn apply(taints: &Value, patch: &Value) -> Vec<Value> {
        let ops = patch.as_array().expect("a JSON patch");
        assert_eq!(ops[0]["op"], "test");
        assert_eq!(&ops[0]["value"], taints, "tests the list as read");
        let mut list = taints.as_array().cloned().unwrap_or_default();
        for op in &ops[1..] {
            assert_eq!(op["op"], "remove");
            let path = op["path"].as_str().expect("path");
            let i: usize = path
                .strip_prefix("/spec/taints/")
                .and_then(|i| i.parse().ok())
                .expect("an index");
            list.remove(i);
        }
        list
    }

    #[test]
    fn every_taint_with_the_key_goes_in_one_guarded_patch() {
        let taints = json!([
            {"key": DEFAULT_TAINT, "value": "true", "effect": "NoSchedule"},
            {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
            {"key": DEFAULT_TAINT, "effect": "NoExecute"},
            {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"},
            {"key": DEFAULT_TAINT, "value": "other", "effect": "PreferNoSchedule"},
        ]);
        let node = json!({"spec": {"taints": taints}});
        let v = view(&node, &cfg(""));
        assert_eq!(v.gate_indices, vec![0, 2, 4]);
        let patch = removal_patch(&v).expect("has the taint");
        assert_eq!(patch.as_array().map(Vec::len), Some(4), "{patch}");
        // Last index first, so each one still names the taint read there.
        let paths: Vec<&str> = patch
            .as_array()
            .into_iter()
            .flatten()
            .skip(1)
            .filter_map(|o| o["path"].as_str())
            .collect();
        assert_eq!(
            paths,
            ["/spec/taints/4", "/spec/taints/2", "/spec/taints/0"]
        );
        let left = apply(&taints, &patch);
        assert_eq!(
            left,
            vec![
                json!({"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}),
                json!({"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}),
            ],
            "every other taint stays, in order"
        );
        assert_eq!(
            gate_taints_left(&json!({"spec": {"taints": left}}), DEFAULT_TAINT),
            0
        );
        assert_eq!(gate_taints_left(&node, DEFAULT_TAINT), 3);
        assert_eq!(gate_taints_left(&json!({"spec": {}}), DEFAULT_TAINT), 0);
        assert_eq!(
            gate_taints_left(&json!({"kind": "Status"}), DEFAULT_TAINT),
            0
        );
    }

    #[test]
    fn no_taint_no_patch_and_missing_images_are_named() {
        let node = json!({"spec": {}, "status": {}});
        let v = view(&node, &cfg("quay.io/x/y:2"));
        assert!(v.gate_indices.is_empty());
        assert_eq!(removal_patch(&v), None);
        assert_eq!(v.missing, vec!["quay.io/x/y:2".to_string()]);
    }

    #[test]
    fn a_failed_test_is_a_conflict_an_admission_denial_is_not() {
        let status = |code: u16, message: &str| ApiError::Status {
            code,
            reason: "Invalid".into(),
            message: message.into(),
            retry_after: None,
        };
        assert!(is_conflict(&status(
            422,
            "the server rejected our request due to an error in our request"
        )));
        assert!(is_conflict(&status(409, "Operation cannot be fulfilled")));
        assert!(!is_conflict(&status(
            422,
            "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'selfdestruct-node-gate' with binding 'selfdestruct-node-gate' denied request: no"
        )));
        assert!(!is_conflict(&status(403, "forbidden")));
        assert!(!is_conflict(&ApiError::Timeout(Duration::from_secs(30))));
    }
}

mod clock {
    use selfdestruct::clock::*;
    use std::time::Duration;
    use std::time::SystemTime;

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_only_with_tokio_time() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let clock = Clock::following_tokio(wall, tokio::time::Instant::now());
        assert_eq!(clock.now(), wall);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.now(), wall + Duration::from_secs(90));
    }
}

mod agent {
    use selfdestruct::agent::*;
    use selfdestruct_decision::builder::{World, at, ready_node, running_sibling};
    use selfdestruct_decision::evaluate;
    use std::collections::BTreeSet;

    /// A new node reported full is reported once, and forgotten when it leaves the
    /// node view: the set of reported names does not grow with every node ever seen.
    #[test]
    fn full_nodes_are_reported_once_and_forgotten_with_the_node() {
        let mut w = World::new();
        w.nodes = Some(vec![
            ready_node("old", 0),
            ready_node("new-a", 500),
            ready_node("new-b", 500),
        ]);
        // Created after both were Ready, it still went to the old node: both are full.
        let mut late = running_sibling("placeholder-1", "old");
        late.created = Some(at(700));
        w.siblings = Some(vec![late]);
        // As the agent's loop does: the nodes found full by the one evaluation.
        let report = |w: &World, reported: &mut BTreeSet<String>| {
            let s = w.snapshot();
            report_full_nodes(s.nodes, &evaluate(&s).full, reported);
        };
        let mut reported = BTreeSet::new();
        report(&w, &mut reported);
        assert_eq!(reported, BTreeSet::from(["new-a".into(), "new-b".into()]));
        // new-a is scaled down: its name goes too.
        w.nodes = Some(vec![ready_node("old", 0), ready_node("new-b", 500)]);
        report(&w, &mut reported);
        assert_eq!(reported, BTreeSet::from(["new-b".to_string()]));
        // Also when nothing else is reported (siblings no longer watched) or the
        // node view is gone.
        w.siblings = None;
        w.nodes = Some(vec![ready_node("old", 0)]);
        report(&w, &mut reported);
        assert!(reported.is_empty(), "{reported:?}");
        reported.insert("new-c".into());
        w.nodes = None;
        report(&w, &mut reported);
        assert!(reported.is_empty(), "{reported:?}");
    }
}

mod logging {
    use selfdestruct::logging::*;
    use tracing::level_filters::LevelFilter;

    #[test]
    fn a_chain_shows_each_cause_once_and_escaped() {
        let io = std::io::Error::other("tcp connect error\r\nInjected: line");
        let e = kube::Error::Service(Box::new(io));
        assert_eq!(
            Chain(&e).to_string(),
            "ServiceError: tcp connect error\\r\\nInjected: line"
        );
        let long = kube::Error::Service(Box::new(std::io::Error::other("z".repeat(10_000))));
        let text = Chain(&long).to_string();
        assert!(text.len() < LEVEL_LIMIT + 40, "{}", text.len());
        assert!(text.ends_with("(10014 bytes in all)"), "{text}");
    }

    #[test]
    fn kube_watcher_warnings_are_not_logged_its_errors_are() {
        use tracing::Level;
        let f = filter(LevelFilter::DEBUG);
        assert!(!f.would_enable(QUIET_LIBRARY, &Level::WARN));
        assert!(f.would_enable(QUIET_LIBRARY, &Level::ERROR));
        assert!(f.would_enable("kube_client::client", &Level::WARN));
        assert!(f.would_enable("selfdestruct::agent", &Level::DEBUG));
        assert!(!filter(LevelFilter::OFF).would_enable(QUIET_LIBRARY, &Level::ERROR));
    }
}

mod watch {
    use kube::core::Status;
    use kube::runtime::watcher;
    use selfdestruct::watch::*;

    fn status(code: u16) -> Status {
        Status {
            code,
            message: format!("m{code}"),
            ..Status::default()
        }
    }

    #[test]
    fn a_410_on_opening_a_watch_lists_again_and_denials_are_reported() {
        let open = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(410))));
        assert_eq!(classify(&open), Failure::Transient { relist: true });
        let event = watcher::Error::WatchError(Box::new(status(410)));
        assert_eq!(classify(&event), Failure::Transient { relist: false });
        let denied = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(403))));
        assert_eq!(classify(&denied), Failure::Denied("m403".into()));
        let denied = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(403))));
        assert_eq!(classify(&denied), Failure::Denied("m403".into()));
        // Expired credentials: kube reads a token file again within a minute.
        let expired = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(401))));
        assert_eq!(classify(&expired), Failure::Transient { relist: false });
        // An ERROR in an open watch's stream lists again and keeps the view.
        for code in [401, 403] {
            let event = watcher::Error::WatchError(Box::new(status(code)));
            assert_eq!(classify(&event), Failure::Transient { relist: true });
        }
        assert_eq!(
            classify(&watcher::Error::NoResourceVersion),
            Failure::Transient { relist: false }
        );
    }
}
