//! The shipped image as a real container: `image/build.sh` builds the OCI image
//! (FROM scratch, the static release binaries, USER 65534:65534) with umoci, and
//! each test runs it with runc under the placeholder manifest's security
//! settings: uid 65534, read-only root, no capabilities, no new privileges, a
//! RuntimeDefault-like seccomp filter. It shows the image matches the
//! Dockerfile, pauses as PID 1, exits 0 on `runc kill TERM`, reaps an orphan,
//! runs the entrypoint wrapper, runs the node gate and the schedule by their own
//! binaries (and by the agent's old subcommands) and, against the fake API server on
//! loopback, deletes its own pod with the uid precondition.
//!
//! Needs root, `runc` and `umoci` (Debian: `apt-get install runc umoci`;
//! `.ci/run` installs them). Where they are missing every test here fails with
//! the reason: it is never skipped. The static binary is built by
//! `image/build.sh` itself (release profile, the Dockerfile's RUSTFLAGS; cargo
//! reuses it when nothing changed), or taken from `SELFDESTRUCT_IMAGE_BINARY`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::cluster::{NS, Scene};
use common::*;
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The image's binaries: the agent (the entrypoint), the node gate, the schedule.
const BINARIES: [&str; 3] = [
    "selfdestruct",
    "selfdestruct-node-gate",
    "selfdestruct-schedule",
];

/// The image built once for this test process, unpacked.
struct Image {
    /// `layout:tag`, as image/build.sh printed it.
    reference: String,
    /// The image's config (the OCI config blob).
    config: Value,
    /// How many layers, and their compressed bytes.
    layers: Vec<u64>,
    /// The unpacked root filesystem (shared by the containers, mounted read-only).
    rootfs: PathBuf,
    /// The runtime config umoci derived from the image (user, args, env).
    runtime: Value,
    /// runc's state folder for this test process.
    state: PathBuf,
    /// Each binary's own `--version` line.
    versions: Vec<String>,
}

fn tool_ok(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Builds and unpacks the image once; panics with the reason when this machine
/// cannot (no root, no runc, no umoci, a failed build).
fn image() -> &'static Image {
    static IMAGE: OnceLock<Result<Image, String>> = OnceLock::new();
    match IMAGE.get_or_init(build_image) {
        Ok(image) => image,
        Err(why) => panic!("the image test cannot run here: {why}"),
    }
}

fn build_image() -> Result<Image, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("it needs root (runc creates the container's namespaces and mounts)".into());
    }
    for tool in ["runc", "umoci"] {
        if !tool_ok(tool) {
            return Err(format!(
                "`{tool}` is not installed (Debian: apt-get install runc umoci; .ci/run installs them)"
            ));
        }
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    // The folders of earlier runs whose process is gone.
    for entry in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(pid) = name.strip_prefix("image-")
            && pid.parse::<u32>().is_ok()
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let work = tmp.join(format!("image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("mkdir {}: {e}", work.display()))?;
    let layout = work.join("oci");
    // The target folder of this build: the binary lands where bench/run.sh looks.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or("CARGO_TARGET_TMPDIR has no parent")?;
    let mut build = Command::new("bash");
    build
        .arg(Path::new(ROOT).join("image/build.sh"))
        .arg("--out")
        .arg(&layout)
        .env("CARGO_TARGET_DIR", &target)
        .stderr(Stdio::inherit());
    // What cargo sets for this test's crate is not for the nested build: ring's
    // build script tracks CARGO_MANIFEST_DIR, so inheriting it would rebuild
    // the release binary every time a shell and a test take turns.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key == "CARGO_MANIFEST_DIR"
            || key == "CARGO_MANIFEST_PATH"
            || key == "CARGO_CRATE_NAME"
            || key == "CARGO_PRIMARY_PACKAGE"
            || key == "CARGO_TARGET_TMPDIR"
            || key == "OUT_DIR"
            || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_")
        {
            build.env_remove(&*key);
        }
    }
    if let Some(binary) = std::env::var_os("SELFDESTRUCT_IMAGE_BINARY") {
        build.arg("--binary").arg(binary);
    }
    let t = Instant::now();
    let out = build
        .output()
        .map_err(|e| format!("cannot run image/build.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!("image/build.sh failed: {}", out.status));
    }
    let reference = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    eprintln!("image: built {reference} in {:.1?}", t.elapsed());
    let (config, layers) = read_layout(&layout)?;

    // Unpacked once; every container mounts this root read-only.
    let bundle = work.join("unpacked");
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--image", &reference])
            .arg(&bundle),
    )?;
    let rootfs = bundle.join("rootfs");
    let runtime: Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.join("config.json"))
            .map_err(|e| format!("umoci's config.json: {e}"))?,
    )
    .map_err(|e| format!("umoci's config.json: {e}"))?;
    let mut versions = Vec::new();
    for name in BINARIES {
        let binary = rootfs.join(name);
        let out = Command::new(&binary).arg("--version").output();
        let out = out.map_err(|e| format!("{}: {e}", binary.display()))?;
        versions.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let state = work.join("runc");
    Ok(Image {
        reference,
        config,
        layers,
        rootfs,
        runtime,
        state,
        versions,
    })
}

fn run_ok(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    layout.join("blobs").join(alg).join(hex)
}

/// The image config and the compressed sizes of its layers, from the layout's
/// one manifest.
fn read_layout(layout: &Path) -> Result<(Value, Vec<u64>), String> {
    let index = read_json(&layout.join("index.json"))?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let [manifest] = manifests.as_slice() else {
        return Err(format!("expected one manifest in the layout: {index}"));
    };
    let digest = manifest["digest"].as_str().ok_or("manifest digest")?;
    let manifest = read_json(&blob(layout, digest))?;
    let config = read_json(&blob(
        layout,
        manifest["config"]["digest"]
            .as_str()
            .ok_or("config digest")?,
    ))?;
    let layers = manifest["layers"]
        .as_array()
        .ok_or("manifest layers")?
        .iter()
        .map(|l| l["size"].as_u64().unwrap_or(0))
        .collect();
    Ok((config, layers))
}

// ---- the Dockerfile ---------------------------------------------------------

/// What the Dockerfile's `image` stage sets: labels (with `${VERSION}`
/// replaced by the ARG default), USER and ENTRYPOINT.
#[derive(Debug, Default)]
struct Stage {
    labels: Vec<(String, String)>,
    user: Option<String>,
    entrypoint: Option<Vec<String>>,
    version: Option<String>,
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn dockerfile_instructions() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).expect("Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(part) = trimmed.strip_suffix('\\') {
            current.push_str(part);
            current.push(' ');
        } else {
            current.push_str(trimmed);
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

/// Splits `k="v" k2="v 2"` into pairs (the Dockerfile's LABEL form).
fn label_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').expect("closing quote in LABEL");
            (&quoted[..end], &quoted[end + 1..])
        } else {
            after.split_once(' ').unwrap_or((after, ""))
        };
        out.push((key.trim().to_string(), value.to_string()));
        rest = tail.trim();
    }
    out
}

fn image_stage() -> Stage {
    let mut stage = Stage::default();
    let mut inside = false;
    for ins in dockerfile_instructions() {
        let (word, args) = ins.split_once(' ').unwrap_or((&ins, ""));
        match word.to_ascii_uppercase().as_str() {
            "FROM" => inside = args.trim() == "scratch AS image",
            _ if !inside => {}
            "ARG" => {
                if let Some(v) = args.trim().strip_prefix("VERSION=") {
                    stage.version = Some(v.to_string());
                }
            }
            "LABEL" => stage.labels.extend(label_pairs(args)),
            "USER" => stage.user = Some(args.trim().to_string()),
            "ENTRYPOINT" => {
                stage.entrypoint = Some(
                    serde_json::from_str::<Vec<String>>(args.trim())
                        .expect("ENTRYPOINT in exec form"),
                )
            }
            _ => {}
        }
    }
    let version = stage.version.clone().unwrap_or_default();
    for (_, v) in stage.labels.iter_mut() {
        *v = v.replace("${VERSION}", &version);
    }
    stage
}

#[test]
fn the_image_is_the_dockerfiles_image() {
    let img = image();
    let stage = image_stage();
    eprintln!("Dockerfile `image` stage: {stage:?}");
    let config = &img.config["config"];
    // The same user, entrypoint and labels as the Dockerfile's `image` stage.
    assert_eq!(stage.user.as_deref(), Some("65534:65534"));
    assert_eq!(config["User"], stage.user.as_deref().unwrap_or_default());
    assert_eq!(
        config["Entrypoint"],
        json!(stage.entrypoint.clone().expect("ENTRYPOINT"))
    );
    assert!(
        config["Cmd"].is_null() || config["Cmd"] == json!([]),
        "no CMD: {config}"
    );
    let labels: Vec<(String, String)> = config["Labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mut want = stage.labels.clone();
    want.sort();
    assert!(!want.is_empty(), "the Dockerfile's image stage has labels");
    assert_eq!(labels, want, "image/build.sh and the Dockerfile disagree");
    // The Dockerfile's VERSION default is the crate's version, which each binary prints.
    let want: Vec<String> = BINARIES
        .iter()
        .map(|b| format!("{b} {}", env!("CARGO_PKG_VERSION")))
        .collect();
    assert_eq!(img.versions, want);
    assert_eq!(stage.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    // Both Dockerfile targets are that stage plus the binaries.
    let froms: Vec<String> = dockerfile_instructions()
        .into_iter()
        .filter(|i| i.starts_with("FROM "))
        .collect();
    assert!(
        froms.iter().any(|f| f == "FROM image AS prebuilt"),
        "{froms:?}"
    );
    assert_eq!(froms.last().map(String::as_str), Some("FROM image"));
    assert_eq!(img.config["os"], "linux");
    assert_eq!(img.config["architecture"], "amd64");
    // FROM scratch: one layer, holding the binaries and nothing else.
    assert_eq!(img.layers.len(), 1, "{:?}", img.layers);
    let mut names: Vec<String> = std::fs::read_dir(&img.rootfs)
        .expect("rootfs")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !["proc", "dev", "sys", "var"].contains(&n.as_str()))
        .collect();
    names.sort();
    assert_eq!(names, BINARIES, "the image holds the binaries alone");
    // umoci's runtime config for it: the image's user and entrypoint.
    assert_eq!(img.runtime["process"]["user"]["uid"], 65534);
    assert_eq!(img.runtime["process"]["user"]["gid"], 65534);
    assert_eq!(img.runtime["process"]["args"], json!(["/selfdestruct"]));
    eprintln!(
        "image {}: {} layer(s), {} bytes compressed",
        img.reference,
        img.layers.len(),
        img.layers.iter().sum::<u64>()
    );
}

// ---- containers --------------------------------------------------------------

/// The syscalls the container runtimes' default seccomp profile
/// (RuntimeDefault: containerd's and Docker's) refuses a container without
/// extra capabilities, refused here with EPERM; clone3 fails with ENOSYS as
/// there, so the C library falls back to clone.
const DENIED_SYSCALLS: &[&str] = &[
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "get_mempolicy",
    "init_module",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "mount",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "query_module",
    "quotactl",
    "reboot",
    "request_key",
    "set_mempolicy",
    "setns",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "sysfs",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
];

fn seccomp() -> Value {
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            { "names": DENIED_SYSCALLS, "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EPERM },
            { "names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::ENOSYS },
        ],
    })
}

/// The placeholder StatefulSet's security settings, as they read in the
/// manifest: what `runtime_config` applies.
#[test]
fn the_manifest_sets_what_the_containers_here_run_with() {
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("manifests/statefulset.yaml"))
        .expect("manifests/statefulset.yaml");
    let lines: Vec<&str> = manifest
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    for want in [
        "runAsNonRoot: true",
        "runAsUser: 65534",
        "runAsGroup: 65534",
        "type: RuntimeDefault",
        "allowPrivilegeEscalation: false",
        "readOnlyRootFilesystem: true",
        "- ALL",
    ] {
        assert!(
            lines.contains(&want),
            "manifests/statefulset.yaml no longer says `{want}`: update tests/image.rs to match"
        );
    }
}

/// umoci's runtime config of the image with the pod's settings on top: uid
/// 65534 (from the image), read-only root, no capabilities, no new
/// privileges, seccomp, the host's network (the fake API server listens on
/// its loopback), no terminal; `env` added, `args` replacing the entrypoint
/// when given (a pod's `command`), `mounts` as (host dir, container dir)
/// bound read-only.
fn runtime_config(
    id: &str,
    args: Option<&[&str]>,
    env: &[(&str, &str)],
    mounts: &[(&Path, &str)],
) -> Value {
    let img = image();
    let mut c = img.runtime.clone();
    c["process"]["terminal"] = json!(false);
    if let Some(args) = args {
        c["process"]["args"] = json!(args);
    }
    let mut all_env: Vec<Value> = c["process"]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|v| !v.as_str().is_some_and(|s| s.starts_with("TERM=")))
        .collect();
    // What the kubelet sets for a uid without a passwd entry.
    all_env.push(json!("HOME=/"));
    all_env.push(json!(format!("HOSTNAME={id}")));
    all_env.extend(env.iter().map(|(k, v)| json!(format!("{k}={v}"))));
    c["process"]["env"] = json!(all_env);
    c["process"]["capabilities"] = json!({
        "bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []
    });
    c["process"]["noNewPrivileges"] = json!(true);
    c["root"] = json!({ "path": img.rootfs, "readonly": true });
    c["hostname"] = json!(id);
    c["linux"]["seccomp"] = seccomp();
    if let Some(ns) = c["linux"]["namespaces"].as_array_mut() {
        ns.retain(|n| n["type"] != "network");
    }
    if let Some(m) = c["mounts"].as_array_mut() {
        for (source, destination) in mounts {
            m.push(json!({
                "destination": destination,
                "type": "bind",
                "source": source,
                "options": ["rbind", "ro", "nosuid", "nodev", "noexec"],
            }));
        }
    }
    c
}

/// A container run in the foreground by `runc run` (its exit code is the
/// container's), with its output collected. Killed and deleted on drop.
struct Container {
    id: String,
    proc: Proc,
    pid_file: PathBuf,
}

fn runc(img: &Image) -> Command {
    let mut cmd = Command::new("runc");
    cmd.arg("--root").arg(&img.state);
    cmd
}

impl Container {
    fn run(tag: &str, config: impl FnOnce(&str) -> Value) -> Container {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("selfdestruct-{tag}-{}-{n}", std::process::id());
        let bundle = tempdir(&format!("bundle-{tag}"));
        let config = config(&id);
        std::fs::write(
            bundle.join("config.json"),
            serde_json::to_string_pretty(&config).expect("config json"),
        )
        .expect("write config.json");
        let pid_file = bundle.join("pid");
        let img = image();
        let mut cmd = runc(img);
        cmd.arg("run")
            .arg("--bundle")
            .arg(&bundle)
            .arg("--pid-file")
            .arg(&pid_file)
            .arg(&id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Container {
            id,
            proc: Proc::spawn(cmd),
            pid_file,
        }
    }

    /// The host pid of the container's PID 1, once runc has started it.
    fn pid(&mut self) -> u32 {
        let mut pid = None;
        let started = wait_until(Duration::from_secs(30), || {
            pid = std::fs::read_to_string(&self.pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            pid.is_some() || !self.proc.is_running()
        });
        match pid {
            Some(pid) => pid,
            None => panic!(
                "runc did not start the container (started: {started}):\n{}",
                self.proc.log()
            ),
        }
    }

    fn kill(&self, signal: &str) {
        let out = runc(image())
            .args(["kill", &self.id, signal])
            .output()
            .expect("run runc kill");
        assert!(
            out.status.success(),
            "runc kill {signal}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `runc kill TERM`, then the container's exit code and how long it took.
    fn terminate(&mut self) -> (Option<i32>, Duration) {
        let t = Instant::now();
        self.kill("TERM");
        let status = self.proc.wait_exit(Duration::from_secs(30));
        (status.and_then(|s| s.code()), t.elapsed())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let img = image();
        let _ = runc(img)
            .args(["kill", &self.id, "KILL"])
            .stderr(Stdio::null())
            .status();
        let _ = self.proc.wait_exit(Duration::from_secs(10));
        let _ = runc(img)
            .args(["delete", "--force", &self.id])
            .stderr(Stdio::null())
            .status();
    }
}

/// `/proc/<pid>/status` as (key, value) lines.
fn status_of(pid: u32) -> Vec<(String, String)> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn status_field(pid: u32, key: &str) -> String {
    status_of(pid)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0)
}

/// Whether every thread of `pid` is asleep in a system call.
fn asleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        let dir = t.path();
        let state = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_string()))
            .and_then(|r| r.chars().next());
        let syscall = std::fs::read_to_string(dir.join("syscall")).unwrap_or_default();
        state == Some('S') && !syscall.starts_with("running") && !syscall.is_empty()
    })
}

/// Asserts the container's PID 1 runs as the pod spec says.
fn assert_confined(pid: u32) {
    let ns_pid = status_field(pid, "NSpid");
    assert_eq!(
        ns_pid.split_whitespace().last(),
        Some("1"),
        "PID 1 of its namespace: NSpid {ns_pid}"
    );
    assert_eq!(status_field(pid, "Uid"), "65534\t65534\t65534\t65534");
    assert_eq!(status_field(pid, "Gid"), "65534\t65534\t65534\t65534");
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(pid, caps), "0000000000000000", "{caps}");
    }
    assert_eq!(status_field(pid, "NoNewPrivs"), "1");
    assert_eq!(status_field(pid, "Seccomp"), "2", "seccomp filter mode");
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
    let root = mountinfo
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(4) == Some(&"/"))
        .expect("a root mount");
    assert!(
        root[5].split(',').any(|o| o == "ro"),
        "read-only root: {root:?}"
    );
}

#[test]
fn pauses_as_pid_1_without_api_access_idles_and_exits_0_on_sigterm() {
    let mut c = Container::run("pause", |id| {
        runtime_config(id, None, &[("SELFDESTRUCT_LOG_LEVEL", "debug")], &[])
    });
    let pid = c.pid();
    assert!(
        c.proc
            .wait_for_log("released idle memory", Duration::from_secs(30)),
        "no idle pause:\n{}",
        c.proc.log()
    );
    let log = c.proc.log();
    assert!(log.contains("plain pause container"), "{log}");
    assert!(
        log.contains("no kubeconfig and no in-cluster service account"),
        "{log}"
    );
    assert!(!log.contains("not PID 1"), "it is PID 1 here: {log}");
    assert_confined(pid);

    // Idle: once every thread sleeps in a system call, no CPU over 2 s.
    assert!(
        wait_until(Duration::from_secs(10), || asleep(pid)),
        "the pause never went to sleep"
    );
    let (ticks, switches) = (cpu_ticks(pid), status_field(pid, "voluntary_ctxt_switches"));
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - ticks;
    let woke = status_field(pid, "voluntary_ctxt_switches");
    let rss = status_field(pid, "VmRSS");
    eprintln!(
        "idle in the container: {used} CPU ticks in 2 s, voluntary switches {switches} -> {woke}, VmRSS {rss}"
    );
    assert_eq!(used, 0, "the idle pause used CPU");
    assert!(c.proc.is_running());

    let (code, took) = c.terminate();
    eprintln!("runc kill TERM -> container exit {code:?} in {took:.1?}");
    assert_eq!(code, Some(0), "{}", c.proc.log());
    assert!(c.proc.log().contains("exiting"), "{}", c.proc.log());
}

#[test]
fn as_pid_1_it_reaps_an_orphan() {
    let mut c = Container::run("reap", |id| runtime_config(id, None, &[], &[]));
    let init = c.pid();
    assert!(
        c.proc
            .wait_for_log("plain pause container", Duration::from_secs(30)),
        "{}",
        c.proc.log()
    );
    // A process in the container (`runc exec`, with the container's user,
    // capabilities and seccomp) that starts a child: the wrapper running a
    // second plain pause. Killing the wrapper orphans that child, and the
    // kernel re-parents it to the container's PID 1.
    let exec_pid_file = tempdir("exec").join("pid");
    let img = image();
    let mut cmd = runc(img);
    cmd.args(["exec", "--pid-file"])
        .arg(&exec_pid_file)
        .args([&c.id, "/selfdestruct", "--", "/selfdestruct"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut exec = Proc::spawn(cmd);
    let mut wrapper = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            wrapper = std::fs::read_to_string(&exec_pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            wrapper.is_some()
        }),
        "runc exec did not start:\n{}",
        exec.log()
    );
    let wrapper = wrapper.expect("wrapper pid");
    let mut orphan = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            orphan = children_of(wrapper).first().map(|(p, _)| *p);
            orphan.is_some() && exec.log().contains("plain pause container")
        }),
        "the wrapper started no child:\n{}",
        exec.log()
    );
    let orphan = orphan.expect("child pid");
    // SAFETY: signalling a process this test started (inside the container).
    unsafe { libc::kill(wrapper as i32, libc::SIGKILL) };
    // (`runc exec` itself lives on: it copies the output of the orphan, which
    // holds its stdout and stderr.)
    assert!(
        wait_until(Duration::from_secs(10), || status_field(orphan, "PPid")
            == init.to_string()),
        "the orphan was not re-parented to the container's PID 1 (PPid {})",
        status_field(orphan, "PPid")
    );
    // The orphan exits; only its parent, PID 1, can reap it.
    // SAFETY: as above.
    unsafe { libc::kill(orphan as i32, libc::SIGTERM) };
    let reaped = wait_until(Duration::from_secs(10), || {
        !Path::new(&format!("/proc/{orphan}")).exists()
    });
    assert!(
        reaped,
        "the orphan is left as a zombie (state {:?}) under PID 1",
        status_field(orphan, "State")
    );
    assert!(
        exec.wait_exit(Duration::from_secs(30)).is_some(),
        "runc exec did not end with the orphan's output"
    );
    assert!(c.proc.is_running(), "PID 1 keeps pausing");
    let (code, took) = c.terminate();
    eprintln!("runc kill TERM -> container exit {code:?} in {took:.1?}");
    assert_eq!(code, Some(0), "{}", c.proc.log());
}

#[test]
fn the_entrypoint_wrapper_runs_in_the_image() {
    // A pod's `command: [/selfdestruct, --, CMD...]`: the image holds only its
    // binaries, so CMD is one of them.
    let mut c = Container::run("wrap", |id| {
        runtime_config(
            id,
            Some(&[
                "/selfdestruct",
                "--",
                "/selfdestruct-node-gate",
                "--version",
            ]),
            &[],
            &[],
        )
    });
    let status = c.proc.wait_exit(Duration::from_secs(60));
    let log = c.proc.log();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    assert!(
        c.proc
            .lines
            .lock()
            .expect("log lock")
            .iter()
            .any(|l| *l == image().versions[1]),
        "the child's --version line:\n{log}"
    );
    // The wrapper exits with its child's code: here 2, a bad setting.
    let mut c = Container::run("wrap-code", |id| {
        runtime_config(
            id,
            Some(&["/selfdestruct", "--", "/selfdestruct", "--mode=nuke"]),
            &[],
            &[],
        )
    });
    let status = c.proc.wait_exit(Duration::from_secs(60));
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{}", c.proc.log());
}

/// Each DaemonSet and Deployment names its binary: the gate's and the schedule's run in
/// the image, and so do the agent's old subcommands (deprecated), which find them beside
/// it. Without their settings each exits 2 naming the variable.
#[test]
fn the_gate_and_the_schedule_run_in_the_image_by_name_and_by_old_subcommand() {
    for (tag, argv, variable) in [
        ("gate", &["/selfdestruct-node-gate"][..], "NODE_NAME"),
        (
            "schedule",
            &["/selfdestruct-schedule"][..],
            "SELFDESTRUCT_SCHEDULE_TARGET",
        ),
        ("old-gate", &["/selfdestruct", "node-gate"][..], "NODE_NAME"),
        (
            "old-schedule",
            &["/selfdestruct", "schedule"][..],
            "SELFDESTRUCT_SCHEDULE_TARGET",
        ),
    ] {
        let mut c = Container::run(tag, |id| runtime_config(id, Some(argv), &[], &[]));
        let status = c.proc.wait_exit(Duration::from_secs(60));
        let log = c.proc.log();
        assert_eq!(status.and_then(|s| s.code()), Some(2), "{argv:?}: {log}");
        assert!(log.contains(variable), "{argv:?}: {log}");
        let old = argv[0] == "/selfdestruct";
        assert_eq!(log.contains("is deprecated"), old, "{argv:?}: {log}");
    }
}

#[test]
fn the_agent_in_the_image_deletes_its_own_pod_with_its_uid() {
    let s = Scene::placeholders(2);
    let pod = "placeholder-0";
    let uid = s.uid(pod);
    let kubeconfig = s.kubeconfig_for(pod);
    let dir = kubeconfig
        .parent()
        .expect("kubeconfig folder")
        .to_path_buf();
    let mut c = Container::run("agent", |id| {
        runtime_config(
            id,
            None,
            &[
                ("KUBECONFIG", "/var/run/selfdestruct/kubeconfig"),
                ("POD_NAME", pod),
                ("POD_NAMESPACE", NS),
                ("POD_UID", &uid),
                ("NODE_NAME", "node-0"),
                ("SELFDESTRUCT_MODE", "delete"),
                ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
                ("SELFDESTRUCT_MAX_LIFETIME", "2s"),
                ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
                ("SELFDESTRUCT_MIN_AGE", "0"),
                ("SELFDESTRUCT_MOVE_JITTER", "0"),
                ("SELFDESTRUCT_START_JITTER", "0"),
                ("SELFDESTRUCT_LOG_LEVEL", "debug"),
            ],
            &[(&dir, "/var/run/selfdestruct")],
        )
    });
    let pid = c.pid();
    let del = s
        .fake
        .wait_for_request(|r| r.is_pod_delete(), Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no delete from the container:\n{}", c.proc.log()));
    assert_eq!(del.path, format!("/api/v1/namespaces/{NS}/pods/{pod}"));
    let body = del.body.clone().expect("delete options");
    assert_eq!(body["preconditions"]["uid"], uid.as_str());
    assert_eq!(del.status, 200, "{}", c.proc.log());
    s.assert_only_own_mutations(&[(pod, &uid)]);
    // It read its pod first, as the pod's own service account.
    assert!(
        s.fake.requests().iter().any(|r| r.method == "GET"
            && r.path == format!("/api/v1/namespaces/{NS}/pods/{pod}")
            && r.status == 200),
        "no read of the own pod"
    );
    assert_confined(pid);
    let (code, took) = c.terminate();
    eprintln!("runc kill TERM -> agent container exit {code:?} in {took:.1?}");
    assert_eq!(code, Some(0), "{}", c.proc.log());
}
