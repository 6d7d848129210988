//! The real cluster-autoscaler with its kwok cloud provider, as a local process.
//!
//! Node groups come from template Nodes (one group per value of `group_label`); the
//! CapacityBuffer CRD is applied when given. The kwok provider creates nodes from the
//! templates with `Ready=False`: the stand-in kubelet boots them.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use crate::control_plane::{ControlPlane, free_port};
use crate::proc::Proc;
use crate::{Error, wait};

/// The autoscaler's timers and node groups.
#[derive(Clone, Debug)]
pub struct AutoscalerOptions {
    /// Template Nodes; each carries `group_label`, and the kwok annotations
    /// (`cluster-autoscaler.kwok.nodegroup/min-count`, `max-count`, `desired-count`).
    pub templates: Vec<Node>,
    /// The template label naming the node group.
    pub group_label: String,
    /// `--scan-interval`.
    pub scan_interval: Duration,
    /// `--scale-down-unneeded-time`.
    pub scale_down_unneeded_time: Duration,
    /// `--scale-down-delay-after-add`.
    pub scale_down_delay_after_add: Duration,
    /// The CapacityBuffer CRD (YAML), applied before the start. The CapacityBuffer
    /// controller is on: without the CRD in the cluster the autoscaler waits for it and
    /// never turns healthy.
    pub capacity_buffer_crd: Option<String>,
    /// More flags.
    pub args: Vec<String>,
}

impl Default for AutoscalerOptions {
    fn default() -> Self {
        AutoscalerOptions {
            templates: Vec::new(),
            group_label: "realstack.selfdestruct.io/group".into(),
            scan_interval: Duration::from_secs(2),
            scale_down_unneeded_time: Duration::from_secs(10),
            scale_down_delay_after_add: Duration::from_secs(10),
            capacity_buffer_crd: None,
            args: Vec::new(),
        }
    }
}

/// `node` made a kwok node group's template of 1 to `max` nodes (one at the start):
/// without the not-ready taint (with it the autoscaler would think no pod fits; the
/// template's Ready=False condition has the lifecycle controller add it to each new
/// node), with the kwok provider's count annotations.
pub fn group_template(mut node: Node, max: u32) -> Node {
    if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
        taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
    }
    node.metadata.annotations.get_or_insert_default().extend([
        (
            "cluster-autoscaler.kwok.nodegroup/min-count".into(),
            "1".into(),
        ),
        (
            "cluster-autoscaler.kwok.nodegroup/max-count".into(),
            max.to_string(),
        ),
        (
            "cluster-autoscaler.kwok.nodegroup/desired-count".into(),
            "1".into(),
        ),
    ]);
    node
}

/// The running autoscaler; dropping it kills it (SIGKILL: the kwok provider deletes its
/// nodes on SIGTERM, which would disturb the rest of a shared control plane's run).
#[derive(Debug)]
pub struct Autoscaler {
    proc: Proc,
}

impl Autoscaler {
    /// Writes the two kwok ConfigMaps into `kube-system` and starts the autoscaler; returns
    /// once its health endpoint answers.
    pub fn start(cp: &ControlPlane, opts: AutoscalerOptions) -> Result<Autoscaler, Error> {
        let bin = cp.bin_dir().join("cluster-autoscaler");
        if !bin.is_file() {
            return Err(Error::NoBinaries(format!(
                "{} (no cluster-autoscaler there)",
                cp.bin_dir().display()
            )));
        }
        if let Some(crd) = &opts.capacity_buffer_crd {
            cp.kubectl_run(&["apply", "--server-side", "-f", "-"], Some(crd))?;
            cp.kubectl_run(
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd/capacitybuffers.autoscaling.x-k8s.io",
                ],
                None,
            )?;
        }
        let config = format!(
            "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: {:?}\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n",
            opts.group_label
        );
        let templates = json!({"apiVersion": "v1", "kind": "List", "items": opts.templates});
        let cms = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
             "data": {"config": config}},
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "kwok-provider-templates", "namespace": "kube-system"},
             "data": {"templates": templates.to_string()}},
        ]});
        cp.kubectl_run(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            Some(&cms.to_string()),
        )?;
        let port = free_port();
        let secs = |d: Duration| format!("{}s", d.as_secs().max(1));
        let mut cmd = Command::new(&bin);
        cmd.env("POD_NAMESPACE", "kube-system")
            .env("KWOK_PROVIDER_MODE", "local")
            .env("KUBECONFIG", cp.kubeconfig())
            .args([
                "--cloud-provider=kwok".to_string(),
                format!("--kubeconfig={}", cp.kubeconfig().display()),
                "--namespace=kube-system".to_string(),
                "--leader-elect=false".to_string(),
                format!("--scan-interval={}", secs(opts.scan_interval)),
                "--enforce-node-group-min-size=true".to_string(),
                format!(
                    "--scale-down-delay-after-add={}",
                    secs(opts.scale_down_delay_after_add)
                ),
                format!(
                    "--scale-down-unneeded-time={}",
                    secs(opts.scale_down_unneeded_time)
                ),
                "--expendable-pods-priority-cutoff=-10".to_string(),
                // A node found unremovable (a user pod on it) is looked at again soon, not
                // after the default 5 minutes.
                format!(
                    "--unremovable-node-recheck-timeout={}",
                    secs(opts.scale_down_unneeded_time)
                ),
                "--capacity-buffer-controller-enabled=true".to_string(),
                "--capacity-buffer-pod-injection-enabled=true".to_string(),
                format!("--address=127.0.0.1:{port}"),
                "--v=2".to_string(),
            ])
            .args(&opts.args);
        let log = cp.log("cluster-autoscaler");
        let mut proc =
            Proc::spawn("cluster-autoscaler", cmd, &log).map_err(|source| Error::Spawn {
                what: "cluster-autoscaler".into(),
                source,
            })?;
        let url = format!("http://127.0.0.1:{port}/health-check");
        wait::until_blocking(
            "cluster-autoscaler /health-check",
            Duration::from_secs(60),
            || {
                if let Some(status) = proc.try_wait() {
                    return Err(Error::Exited {
                        what: "cluster-autoscaler".into(),
                        status: status.to_string(),
                        log: log.display().to_string(),
                        tail: proc.log_tail(30),
                    });
                }
                Ok(http_get_ok(&url).then_some(()))
            },
        )?;
        Ok(Autoscaler { proc })
    }

    /// The autoscaler's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.proc.log).unwrap_or_default()
    }
}

/// A plain HTTP GET on loopback: true on a 200.
fn http_get_ok(url: &str) -> bool {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).contains(" 200")
}
