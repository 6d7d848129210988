//! `fake-apiserver`: serves a small demo cluster until killed.
//!
//! ```text
//! fake-apiserver [--nodes 3] [--placeholders 4] [--token demo]
//!                [--kubeconfig PATH] [--add-node-after 20s]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fake_apiserver::{Config, FakeCluster, NodeBuilder, PodTemplate, Subject};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NAMESPACE: &str = "placeholders";

struct Args {
    nodes: usize,
    placeholders: i32,
    token: String,
    kubeconfig: Option<PathBuf>,
    add_node_after: Option<Duration>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit in {s:?} (use ms, s, m or h)"
            ));
        }
    };
    Ok(Duration::from_secs_f64(secs))
}

fn usage() -> &'static str {
    "usage: fake-apiserver [--nodes N] [--placeholders N] [--token TOKEN] [--kubeconfig PATH] [--add-node-after DURATION]"
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: 3,
        placeholders: 4,
        token: "demo".into(),
        kubeconfig: None,
        add_node_after: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (flag, None),
        };
        if flag == "-h" || flag == "--help" {
            return Err(usage().into());
        }
        let value = match inline.or_else(|| it.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value\n{}", usage())),
        };
        match flag.as_str() {
            "--nodes" => {
                args.nodes = value
                    .parse()
                    .map_err(|_| format!("invalid --nodes {value:?}"))?
            }
            "--placeholders" => {
                args.placeholders = value
                    .parse()
                    .map_err(|_| format!("invalid --placeholders {value:?}"))?;
            }
            "--token" => args.token = value,
            "--kubeconfig" => args.kubeconfig = Some(PathBuf::from(value)),
            "--add-node-after" => args.add_node_after = Some(parse_duration(&value)?),
            other => return Err(format!("unknown flag {other}\n{}", usage())),
        }
    }
    Ok(args)
}

fn user_pod(name: &str, node: &str, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("users".into()),
            labels: Some(
                [
                    ("app".to_string(), "jupyterhub".to_string()),
                    ("component".to_string(), "singleuser-server".to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            containers: vec![Container {
                name: "notebook".into(),
                image: Some("quay.io/jupyter/scipy-notebook:2026-11-01".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), Quantity(cpu.into())),
                            ("memory".to_string(), Quantity("8Gi".into())),
                        ]
                        .into(),
                    ),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cluster = FakeCluster::start_with(Config {
        log_requests: true,
        recreate_delay: Duration::from_millis(800),
        start_delay: Duration::from_millis(500),
        termination_delay: Duration::from_secs(1),
        pdb_disruption_expiry: Duration::from_secs(120),
        bookmark_interval: Duration::from_secs(60),
        ..Config::default()
    });
    for i in 1..=args.nodes {
        let name = format!("node-{i}");
        cluster.add_node(
            NodeBuilder::new(&name)
                .cpu("8")
                .memory("32Gi")
                .label("hub.jupyter.org/node-purpose", "user")
                .realistic_images(50),
        );
        // Users hold half of every old node.
        cluster.add_pod(user_pod(&format!("jupyter-user{i}"), &name, "4"));
    }
    cluster.add_statefulset(
        NAMESPACE,
        "placeholder",
        args.placeholders,
        PodTemplate::placeholder("placeholder", "1", "1Gi"),
    );
    cluster.add_pdb(
        NAMESPACE,
        "placeholder",
        "app.kubernetes.io/instance=placeholder",
        1,
    );
    cluster.add_token(
        &args.token,
        Subject::placeholder_agent(NAMESPACE, "placeholder"),
    );
    if let Some(delay) = args.add_node_after {
        let name = format!("node-{}", args.nodes + 1);
        cluster.add_node_after(
            NodeBuilder::new(&name)
                .cpu("8")
                .memory("32Gi")
                .label("hub.jupyter.org/node-purpose", "user")
                .ready(false),
            delay,
        );
        cluster.set_node_ready_after(&name, true, delay + Duration::from_secs(2));
        eprintln!("node {name} joins after {delay:?} and becomes Ready 2s later");
    }
    println!("fake-apiserver listening on {}", cluster.url());
    if let Some(path) = &args.kubeconfig {
        if let Err(e) = std::fs::write(path, cluster.kubeconfig_yaml(&args.token, NAMESPACE)) {
            eprintln!("cannot write kubeconfig {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("kubeconfig written to {}", path.display());
    }
    println!(
        "namespace {NAMESPACE}, statefulset placeholder ({} replicas), token {:?}",
        args.placeholders, args.token
    );
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("x").is_err());
    }
}
