//! Unit tests of `access` (a child module: they see its private items).

/// Kubeconfig files and in-cluster settings of any content (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use crate::testing::block_on;
    use crate::testing::props::proptest_config;
    use crate::testing::{fuzz_dir, json_value, mutate};

    /// A kubeconfig kube and kubectl accept, as JSON (which is YAML).
    fn valid_kubeconfig() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1", "tls-server-name": "k"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
            "current-context": "x",
            "preferences": {}
        })
    }

    /// `access::discover` with `KUBECONFIG` naming a file of `content`: a
    /// kubeconfig asked for is used or refused as a configuration error naming the
    /// variable, never skipped for another source.
    fn discover_kubeconfig(content: &[u8]) -> Result<(), String> {
        let dir = fuzz_dir().join("kube");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("config");
        std::fs::write(&path, content).expect("write");
        let env = |k: &str| match k {
            "KUBECONFIG" => Some(path.clone().into_os_string()),
            _ => None,
        };
        match block_on(crate::access::discover(env, None, &dir.join("no-sa"))) {
            Ok(access) => {
                if !access.named {
                    return Err("a KUBECONFIG kubeconfig is not marked as named".into());
                }
                Ok(())
            }
            Err(e) if e.is_named() && e.to_string().contains("KUBECONFIG=") => Ok(()),
            Err(e) => Err(format!("{e:?}")),
        }
    }

    /// A self-signed CA certificate in PEM, made once.
    fn ca_pem() -> &'static str {
        static PEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        PEM.get_or_init(|| {
            rcgen::generate_simple_self_signed(vec!["kubernetes.default.svc".to_string()])
                .expect("certificate")
                .cert
                .pem()
        })
    }

    proptest! {
        // Each case writes files and builds kube configurations: fewer cases.
        #![proptest_config(proptest_config(128))]

        #[test]
        fn kubeconfig_files_of_any_content_are_used_or_refused_by_name(
            bytes in prop::collection::vec(any::<u8>(), 0..400),
            pick in any::<usize>(),
            with in json_value(),
            cut in any::<usize>(),
        ) {
            prop_assert_eq!(discover_kubeconfig(&bytes), Ok(()), "{:?}", String::from_utf8_lossy(&bytes));
            let mut v = valid_kubeconfig();
            mutate(&mut v, pick, with);
            let text = serde_json::to_vec(&v).unwrap_or_default();
            // No credential plugin: it would run a command.
            prop_assume!(!String::from_utf8_lossy(&text).contains("\"exec\""));
            prop_assert_eq!(discover_kubeconfig(&text), Ok(()), "{}", String::from_utf8_lossy(&text));
            let cut = cut % (text.len() + 1);
            prop_assert_eq!(discover_kubeconfig(&text[..cut]), Ok(()), "{}", String::from_utf8_lossy(&text[..cut]));
        }

        #[test]
        fn in_cluster_settings_and_ca_of_any_content_never_panic(
            host in prop_oneof![any::<String>(), "[0-9a-f.:\\[\\]]{0,20}", Just("10.96.0.1".to_string())],
            port in prop::option::of(prop_oneof![any::<String>(), "[0-9]{0,6}"]),
            ca in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..300),
                any::<usize>().prop_map(|cut| ca_pem().as_bytes()[..cut % (ca_pem().len() + 1)].to_vec()),
                Just(ca_pem().as_bytes().to_vec()),
            ],
        ) {
            let dir = fuzz_dir().join("in-cluster");
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("token"), "a-token").expect("write");
            std::fs::write(dir.join("ca.crt"), &ca).expect("write");
            // A token is there: the account is either usable or refused with the reason.
            match block_on(crate::access::in_cluster(&host, port.as_deref(), &dir)) {
                Ok(access) => prop_assert!(!access.named),
                Err(e) if !e.is_missing() => prop_assert!(!e.to_string().is_empty()),
                Err(e) => prop_assert!(false, "{e:?}"),
            }
        }
    }

    #[test]
    fn the_fuzzed_bases_are_usable() {
        // The kubeconfig and in-cluster bases are usable before they are mutated.
        let dir = fuzz_dir().join("kube-valid");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("config");
        std::fs::write(&path, valid_kubeconfig().to_string()).expect("write");
        let env = |k: &str| (k == "KUBECONFIG").then(|| path.clone().into_os_string());
        let access = block_on(crate::access::discover(env, None, &dir))
            .unwrap_or_else(|e| panic!("the base kubeconfig: {e}"));
        assert_eq!(access.namespace.as_deref(), Some("ns"));
        std::fs::write(dir.join("token"), "a-token").expect("write");
        std::fs::write(dir.join("ca.crt"), ca_pem()).expect("write");
        let access = block_on(crate::access::in_cluster("10.96.0.1", Some("443"), &dir))
            .unwrap_or_else(|e| panic!("the base in-cluster account: {e}"));
        assert_eq!(
            access.config.cluster_url.to_string(),
            "https://10.96.0.1:443/"
        );
    }
}
