//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;

use crate::proc::{self, Proc};
use crate::wait::until_blocking;
use crate::{Error, kube_bin};

/// Timers and switches of the control plane.
#[derive(Clone, Debug)]
pub struct ControlPlaneOptions {
    /// The binaries' folder; `None`: [`crate::KUBE_BIN_VAR`].
    pub bin_dir: Option<PathBuf>,
    /// How long to wait for each component's health endpoint.
    pub ready_timeout: Duration,
    /// The controller-manager's `--node-monitor-grace-period` (a node without heartbeats for
    /// this long goes NotReady).
    pub node_monitor_grace_period: Duration,
    /// The apiserver's audit policy (JSON or YAML). `None`: no audit log.
    pub audit_policy: Option<String>,
    /// More kube-apiserver flags.
    pub apiserver_args: Vec<String>,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        ControlPlaneOptions {
            bin_dir: None,
            ready_timeout: Duration::from_secs(90),
            node_monitor_grace_period: Duration::from_secs(40),
            audit_policy: None,
            apiserver_args: Vec::new(),
        }
    }
}

/// A running control plane. Dropping it stops every process and removes its folder.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    bin: PathBuf,
    procs: Vec<Proc>,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The apiserver's port.
    pub port: u16,
    /// The cluster CA (PEM): it signs the serving and client certificates.
    pub ca_pem: String,
    ca: Issuer<'static, KeyPair>,
}

/// A free loopback port (bound and released: good enough on one machine).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(Error::io(format!("write {}", path.display())))
}

impl ControlPlane {
    /// Starts etcd, the apiserver, the controller-manager and the scheduler, and waits for
    /// each one's health endpoint. Fails at once when the binaries are missing, and with the
    /// end of the component's log when one exits while starting.
    pub fn start(opts: ControlPlaneOptions) -> Result<ControlPlane, Error> {
        let bin = match &opts.bin_dir {
            Some(b) => b.clone(),
            None => kube_bin()?,
        };
        // Stale folders of earlier runs whose process is gone (a SIGKILLed test run).
        let root = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        remove_stale(&root);
        let dir = root.join(format!(
            "selfdestruct-realstack-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("create {}", dir.display())))?;
        if std::env::var_os("SELFDESTRUCT_REALSTACK_KEEP").is_none() {
            proc::remove_at_exit(&dir);
        }

        // Certificates: one CA for serving and clients.
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "selfdestruct-realstack-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca_pem = ca_cert.pem();
        let ca = Issuer::new(ca_params, ca_key);
        write(&dir.join("ca.crt"), &ca_pem)?;

        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
            "10.96.0.1".to_string(),
        ])?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = KeyPair::generate()?;
        let serving_cert = serving.signed_by(&serving_key, &ca)?;
        write(&dir.join("apiserver.crt"), &serving_cert.pem())?;
        write(&dir.join("apiserver.key"), &serving_key.serialize_pem())?;
        let sa_key = KeyPair::generate()?;
        write(&dir.join("sa.key"), &sa_key.serialize_pem())?;
        write(&dir.join("sa.pub"), &sa_key.public_key_pem())?;

        let etcd_port = free_port();
        let peer_port = free_port();
        let port = free_port();
        let server = format!("https://127.0.0.1:{port}");
        let mut cp = ControlPlane {
            dir: dir.clone(),
            bin: bin.clone(),
            procs: Vec::new(),
            server: server.clone(),
            port,
            ca_pem,
            ca,
        };
        for (name, user, groups) in [
            ("admin", "realstack-admin", vec!["system:masters"]),
            (
                "controller-manager",
                "system:kube-controller-manager",
                vec![],
            ),
            ("scheduler", "system:kube-scheduler", vec![]),
        ] {
            cp.write_kubeconfig(name, user, &groups)?;
        }
        write(
            &dir.join("probe.kubeconfig"),
            &json!({"apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": true}}],
                "users": [{"name": "u", "user": {
                    "client-certificate": dir.join("admin.crt"), "client-key": dir.join("admin.key")}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c"})
            .to_string(),
        )?;

        // etcd (Debian's) from PATH, its data on tmpfs.
        let mut etcd = Command::new("etcd");
        etcd.args([
            "--name=default".to_string(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--log-level=warn".to_string(),
        ]);
        cp.spawn("etcd", etcd)?;

        let d = |f: &str| dir.join(f).display().to_string();
        let mut api = Command::new(bin.join("kube-apiserver"));
        api.args([
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--client-ca-file={}", d("ca.crt")),
            format!("--tls-cert-file={}", d("apiserver.crt")),
            format!("--tls-private-key-file={}", d("apiserver.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            "--authorization-mode=Node,RBAC".to_string(),
            "--enable-admission-plugins=NodeRestriction,ValidatingAdmissionPolicy".to_string(),
            "--service-cluster-ip-range=10.96.0.0/12".to_string(),
            "--endpoint-reconciler-type=none".to_string(),
            format!("--cert-dir={}", d("apiserver-certs")),
        ]);
        if let Some(policy) = &opts.audit_policy {
            write(&dir.join("audit-policy.yaml"), policy)?;
            api.args([
                format!("--audit-policy-file={}", d("audit-policy.yaml")),
                format!("--audit-log-path={}", d("audit.log")),
                "--audit-log-mode=blocking".to_string(),
            ]);
        }
        api.args(&opts.apiserver_args);
        cp.spawn("kube-apiserver", api)?;
        cp.wait_healthy("kube-apiserver", &server, "/readyz", opts.ready_timeout)?;

        let kcm_port = free_port();
        let mut kcm = Command::new(bin.join("kube-controller-manager"));
        kcm.args([
            format!("--kubeconfig={}", d("controller-manager.kubeconfig")),
            format!(
                "--authentication-kubeconfig={}",
                d("controller-manager.kubeconfig")
            ),
            format!(
                "--authorization-kubeconfig={}",
                d("controller-manager.kubeconfig")
            ),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={kcm_port}"),
            format!("--cert-dir={}", d("kcm-certs")),
            "--leader-elect=false".to_string(),
            "--controllers=*".to_string(),
            "--use-service-account-credentials=true".to_string(),
            format!("--service-account-private-key-file={}", d("sa.key")),
            format!("--root-ca-file={}", d("ca.crt")),
            format!(
                "--node-monitor-grace-period={}s",
                opts.node_monitor_grace_period.as_secs()
            ),
            "--node-monitor-period=1s".to_string(),
        ]);
        cp.spawn("kube-controller-manager", kcm)?;

        let sched_port = free_port();
        let config = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": d("scheduler.kubeconfig")},
            "leaderElection": {"leaderElect": false},
            "profiles": [
                {"schedulerName": "default-scheduler"},
                // zero-to-jupyterhub's user scheduler: MostAllocated, and its score weights
                // (NodeResourcesFit 121, ImageLocality 11; the simulator models the same).
                {"schedulerName": "user-scheduler",
                 "plugins": {"score": {"enabled": [
                    {"name": "NodeResourcesFit", "weight": 121},
                    {"name": "ImageLocality", "weight": 11}]}},
                 "pluginConfig": [{
                    "name": "NodeResourcesFit",
                    "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
                        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}
            ]
        });
        write(&dir.join("scheduler.json"), &config.to_string())?;
        let mut sched = Command::new(bin.join("kube-scheduler"));
        sched.args([
            format!("--config={}", d("scheduler.json")),
            format!("--authentication-kubeconfig={}", d("scheduler.kubeconfig")),
            format!("--authorization-kubeconfig={}", d("scheduler.kubeconfig")),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={sched_port}"),
            format!("--cert-dir={}", d("scheduler-certs")),
        ]);
        cp.spawn("kube-scheduler", sched)?;
        cp.wait_healthy(
            "kube-controller-manager",
            &format!("https://127.0.0.1:{kcm_port}"),
            "/healthz",
            opts.ready_timeout,
        )?;
        cp.wait_healthy(
            "kube-scheduler",
            &format!("https://127.0.0.1:{sched_port}"),
            "/healthz",
            opts.ready_timeout,
        )?;
        // The token and service-account controllers run: a namespace gets its account.
        until_blocking(
            "the default ServiceAccount (the controller-manager's controllers)",
            opts.ready_timeout,
            || {
                cp.check_running()?;
                Ok(cp
                    .kubectl()
                    .args(["get", "serviceaccount", "default", "-n", "default"])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|_| ()))
            },
        )?;
        Ok(cp)
    }

    fn write_kubeconfig(&self, name: &str, user: &str, groups: &[&str]) -> Result<(), Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca)?;
        let (crt, key_file) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        write(&crt, &cert.pem())?;
        write(&key_file, &key.serialize_pem())?;
        let kc = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "realstack", "cluster": {
                "server": self.server,
                "certificate-authority": self.dir.join("ca.crt")}}],
            "users": [{"name": user, "user": {
                "client-certificate": crt, "client-key": key_file}}],
            "contexts": [{"name": "realstack", "context": {"cluster": "realstack", "user": user}}],
            "current-context": "realstack"
        });
        write(
            &self.dir.join(format!("{name}.kubeconfig")),
            &kc.to_string(),
        )
    }

    fn spawn(&mut self, name: &str, cmd: Command) -> Result<(), Error> {
        let log = self.dir.join(format!("{name}.log"));
        let p = Proc::spawn(name, cmd, &log).map_err(|source| Error::Spawn {
            what: name.to_string(),
            source,
        })?;
        self.procs.push(p);
        Ok(())
    }

    /// Fails with the component's log when a process of the stack has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        for p in &mut self.procs {
            if let Some(status) = p.try_wait() {
                return Err(Error::Exited {
                    what: p.name.clone(),
                    status: status.to_string(),
                    log: p.log.display().to_string(),
                    tail: p.log_tail(30),
                });
            }
        }
        Ok(())
    }

    fn wait_healthy(
        &mut self,
        what: &str,
        server: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        let probe = self.dir.join("probe.kubeconfig");
        let kubectl = self.bin.join("kubectl");
        let mut last = String::new();
        let r = until_blocking(&format!("{what} {path}"), timeout, || {
            self.check_running()?;
            let out = Command::new(&kubectl)
                .stdin(std::process::Stdio::null())
                .arg(format!("--kubeconfig={}", probe.display()))
                .args([
                    "--server",
                    server,
                    "get",
                    "--raw",
                    path,
                    "--request-timeout=5s",
                ])
                .output()
                .map_err(|source| Error::Spawn {
                    what: "kubectl".into(),
                    source,
                })?;
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Ok(
                (out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok")
                    .then_some(()),
            )
        });
        r.map_err(|e| match e {
            Error::Timeout { what, secs } => Error::Timeout {
                what: format!(
                    "{what} (last answer: {}; the end of {}:\n{})",
                    last.trim(),
                    self.log(&what_log(&what)).display(),
                    crate::proc::tail(&self.log(&what_log(&what)), 20)
                ),
                secs,
            },
            e => e,
        })
    }

    /// The folder holding logs, certificates and kubeconfigs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The binaries' folder.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The admin (system:masters) kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// A kubeconfig for a client-certificate user `user` in `groups` (signed by the CA).
    pub fn user_kubeconfig(
        &self,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> Result<PathBuf, Error> {
        self.write_kubeconfig(name, user, groups)?;
        Ok(self.dir.join(format!("{name}.kubeconfig")))
    }

    /// A client authenticated by a bearer `token` (e.g. a pod-bound service-account token),
    /// through a kubeconfig file `name`.kubeconfig.
    pub async fn token_client(&self, name: &str, token: &str) -> Result<kube::Client, Error> {
        let path = self.dir.join(format!("{name}.kubeconfig"));
        let kc = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "realstack", "cluster": {
                "server": self.server, "certificate-authority": self.dir.join("ca.crt")}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "realstack", "context": {"cluster": "realstack", "user": name}}],
            "current-context": "realstack"
        });
        write(&path, &kc.to_string())?;
        client_from(&path).await
    }

    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new(self.bin.join("kubectl"));
        c.arg(format!("--kubeconfig={}", self.kubeconfig().display()));
        c
    }

    /// Runs `kubectl ARGS` (admin) with `stdin`, its stdout on success.
    pub fn kubectl_run(&self, args: &[&str], stdin: Option<&str>) -> Result<String, Error> {
        kubectl_with(self.kubectl(), args, stdin)
    }

    /// `kubectl kustomize DIR`, as JSON objects ([`ControlPlane::objects`]).
    pub fn kustomize(&self, dir: &Path) -> Result<Vec<serde_json::Value>, Error> {
        let yaml = self.kubectl_run(&["kustomize", &dir.display().to_string()], None)?;
        self.objects(&yaml)
    }

    /// The objects of a YAML stream, as kubectl reads them (client-side dry run), a List's
    /// items one by one.
    pub fn objects(&self, yaml: &str) -> Result<Vec<serde_json::Value>, Error> {
        let out = self.kubectl_run(
            &["create", "--dry-run=client", "-o", "json", "-f", "-"],
            Some(yaml),
        )?;
        let mut docs = Vec::new();
        for v in serde_json::Deserializer::from_str(&out).into_iter::<serde_json::Value>() {
            let v = v.expect("kubectl's JSON");
            match v["kind"].as_str() {
                Some("List") => docs.extend(v["items"].as_array().cloned().unwrap_or_default()),
                _ => docs.push(v),
            }
        }
        Ok(docs)
    }

    /// `kubectl apply --server-side` of `objects`; kubectl's output.
    pub fn apply(&self, objects: &[serde_json::Value]) -> Result<String, Error> {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        self.kubectl_run(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            Some(&list.to_string()),
        )
    }

    /// A client for the admin user, on the caller's runtime.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_from(&self.kubeconfig()).await
    }

    /// Where a component's log is (`etcd`, `kube-apiserver`, ...).
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }
}

/// Runs a prepared kubectl with `args` and `stdin`; its stdout, or its stderr as the error.
pub fn kubectl_with(mut cmd: Command, args: &[&str], stdin: Option<&str>) -> Result<String, Error> {
    use std::io::Write;
    use std::process::Stdio;
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        what: "kubectl".into(),
        source,
    })?;
    let mut input = child.stdin.take().expect("stdin");
    let text = stdin.unwrap_or("").to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().map_err(Error::io("kubectl"))?;
    let _ = writer.join();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            what: format!("kubectl {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// A client from a kubeconfig file, on the caller's runtime.
pub async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| Error::Io {
        what: format!("read {}", path.display()),
        source: std::io::Error::other(e),
    })?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Io {
                what: format!("kubeconfig {}", path.display()),
                source: std::io::Error::other(e),
            })?;
    kube::Client::try_from(config).map_err(Error::kube("a client"))
}

fn what_log(what: &str) -> String {
    what.split(' ').next().unwrap_or_default().to_string()
}

fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("selfdestruct-realstack-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // The autoscaler and kubelet hold their own handles; here: the control plane, in
        // reverse order of start.
        while let Some(mut p) = self.procs.pop() {
            p.kill();
        }
        if std::env::var_os("SELFDESTRUCT_REALSTACK_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
