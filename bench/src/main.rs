//! Footprint and API-cost benchmark of `selfdestruct` against two baselines, a
//! static C `pause` (bench/pause.c) and `sleep infinity` (coreutils). Run it
//! through `bench/run.sh` (it builds the three binaries first); it prints one
//! table. Figures only: nothing here asserts on timings.
//!
//! Every API figure is measured against the in-repo fake kube-apiserver
//! (tests/fake-apiserver), which runs in this process.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fake_apiserver::{Config, FakeCluster, NodeBuilder, PodTemplate, RecordedRequest};

const NS: &str = "placeholders";
const TOKEN: &str = "bench";
/// Bookmark period of a real kube-apiserver's watch cache (about once a minute).
const BOOKMARKS: Duration = Duration::from_secs(60);

struct Opts {
    quick: bool,
    /// The agent's binary as shipped (static); the node gate's and the schedule's beside it.
    selfdestruct: PathBuf,
    /// The agent's binary as `cargo build --release` builds it (the size target's).
    release: Option<PathBuf>,
    /// The image's OCI layout and tag (`LAYOUT:TAG`, image/build.sh's).
    image: Option<String>,
    pause: PathBuf,
    sleep: PathBuf,
    idle: Duration,
    scales: Vec<usize>,
    runs: usize,
    /// The busy-decisions case: heartbeat window and agents (one SIGTERM each).
    busy_window: Duration,
    busy_agents: usize,
    fleet: usize,
    cycle_window: Duration,
    cycle_scale: u64,
    work: PathBuf,
    /// Extra environment for every selfdestruct process (experiments, e.g. GLIBC_TUNABLES).
    agent_env: Vec<(String, String)>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut quick, mut sd, mut pause, mut sleep) = (false, None, None, None);
    let (mut release, mut image) = (None, None);
    let mut only: Option<String> = None;
    let mut agent_env = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => only = args.next(),
            "--selfdestruct" => sd = args.next().map(PathBuf::from),
            "--release" => release = args.next().map(PathBuf::from),
            "--image" => image = args.next(),
            "--pause" => pause = args.next().map(PathBuf::from),
            "--sleep" => sleep = args.next().map(PathBuf::from),
            "--agent-env" => {
                let kv = args.next().unwrap_or_default();
                let (k, v) = kv.split_once('=').unwrap_or((&kv, ""));
                agent_env.push((k.to_string(), v.to_string()));
            }
            other => {
                eprintln!("usage: selfdestruct-bench [--quick] [--only sizes|idle|nodes|wire|busy|latency|requests|fleet[,...]] [--agent-env K=V]... [--release BIN] [--image LAYOUT:TAG] --selfdestruct BIN --pause BIN --sleep BIN (got {other})");
                std::process::exit(2);
            }
        }
    }
    let work = std::env::temp_dir().join(format!("selfdestruct-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("mkdir work dir");
    let o = Opts {
        quick,
        selfdestruct: sd.expect("--selfdestruct"),
        release,
        image,
        pause: pause.expect("--pause"),
        sleep: sleep.unwrap_or_else(|| "/usr/bin/sleep".into()),
        idle: Duration::from_secs(if quick { 5 } else { 60 }),
        scales: if quick { vec![100, 1000] } else { vec![100, 1000, 5000] },
        runs: if quick { 10 } else { 30 },
        busy_window: Duration::from_secs(if quick { 10 } else { 30 }),
        busy_agents: if quick { 2 } else { 5 },
        fleet: if quick { 50 } else { 200 },
        cycle_window: Duration::from_secs(if quick { 20 } else { 90 }),
        // 600-660 s watches become 12-13 s: longer than the 5 s under which a
        // watch counts as cut (src/connect.rs MIN_WATCH_LIFE).
        cycle_scale: 50,
        work,
        agent_env,
    };
    let started = Instant::now();
    let mut t = Table::default();
    // --only nodes,wire runs only those cases.
    let run = |case: &str| only.as_deref().is_none_or(|o| o.split(',').any(|c| c == case));
    if run("sizes") {
        sizes(&o, &mut t);
    }
    if run("idle") {
        idle(&o, &mut t);
    }
    if run("nodes") {
        node_watch(&o, &mut t);
    }
    if run("wire") {
        wire(&o, &mut t);
    }
    if run("busy") {
        busy_decisions(&o, &mut t);
    }
    if run("latency") {
        latency(&o, &mut t);
    }
    let notes = if run("requests") { requests_per_hour(&o, &mut t) } else { Vec::new() };
    let fleet_notes = if run("fleet") { fleet(&o, &mut t) } else { Vec::new() };
    let _ = std::fs::remove_dir_all(&o.work);
    println!();
    println!(
        "selfdestruct footprint benchmark ({} run, {} s; {})",
        if o.quick { "--quick" } else { "full" },
        started.elapsed().as_secs(),
        host()
    );
    t.print();
    for n in notes.iter().chain(fleet_notes.iter()) {
        println!("{n}");
    }
}

fn host() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs, {model}")
}

// ---------------------------------------------------------------- the table

#[derive(Default)]
struct Table {
    rows: Vec<[String; 6]>,
}

impl Table {
    fn section(&mut self, title: &str) {
        self.rows.push([format!("## {title}"), String::new(), String::new(), String::new(), String::new(), String::new()]);
    }
    fn row(&mut self, what: &str, sd: String, pause: String, sleep: String, target: &str, met: Option<bool>) {
        let met = match met {
            Some(true) => "met",
            Some(false) => "NOT MET",
            None => "",
        };
        self.rows.push([what.into(), sd, pause, sleep, target.into(), met.into()]);
    }
    fn print(&self) {
        let head = ["figure", "selfdestruct", "pause (C, static)", "sleep infinity", "target", ""];
        let mut w = head.map(str::len);
        for r in &self.rows {
            if r[0].starts_with("## ") {
                continue;
            }
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &[String; 6]| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i].saturating_sub(c.chars().count());
                if i == 0 {
                    let _ = write!(s, "{c}{}", " ".repeat(pad));
                } else if i == 5 {
                    let _ = write!(s, "  {c}");
                } else {
                    let _ = write!(s, "  {}{c}", " ".repeat(pad));
                }
            }
            s.trim_end().to_string()
        };
        println!("{}", line(&head.map(String::from)));
        println!("{}", "-".repeat(w.iter().sum::<usize>() + 10));
        for r in &self.rows {
            if let Some(t) = r[0].strip_prefix("## ") {
                println!("{t}");
            } else {
                println!("{}", line(r));
            }
        }
    }
}

fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

fn bytes_h(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.2} MiB", b as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1000.0;
    if m < 10.0 { format!("{m:.2} ms") } else { format!("{m:.0} ms") }
}

fn dash() -> String {
    "-".into()
}

// ---------------------------------------------------------------- /proc

#[derive(Clone, Copy, Default, Debug)]
struct Sample {
    rss_kib: u64,
    hwm_kib: u64,
    anon_kib: u64,
    file_kib: u64,
    vol_cs: u64,
    invol_cs: u64,
    /// utime+stime from /proc/PID/stat, in clock ticks converted to ns.
    cpu_ns: u64,
    /// On-CPU time from /proc/PID/schedstat (ns resolution).
    sched_ns: u64,
}

fn sample(pid: u32) -> Sample {
    let mut s = Sample::default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    for l in status.lines() {
        let v = || l.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
        if l.starts_with("VmRSS:") {
            s.rss_kib = v();
        } else if l.starts_with("VmHWM:") {
            s.hwm_kib = v();
        } else if l.starts_with("RssAnon:") {
            s.anon_kib = v();
        } else if l.starts_with("RssFile:") {
            s.file_kib = v();
        } else if l.starts_with("voluntary_ctxt_switches:") {
            s.vol_cs = v();
        } else if l.starts_with("nonvoluntary_ctxt_switches:") {
            s.invol_cs = v();
        }
    }
    // Threads: sum over /proc/PID/task/*/ (stat of the process already sums them).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    if let Some(rest) = stat.rsplit_once(')').map(|x| x.1) {
        let f: Vec<&str> = rest.split_whitespace().collect();
        // fields after ')' start at field 3 (state): utime is field 14, stime 15.
        let tick = |i: usize| f.get(i - 3).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        s.cpu_ns = (tick(14) + tick(15)) * 1_000_000_000 / hz.max(1);
    }
    // Context switches and schedstat of every thread (status covers only the main one).
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        let (mut vol, mut invol, mut sched) = (0, 0, 0);
        for t in tasks.flatten() {
            let p = t.path();
            let st = std::fs::read_to_string(p.join("status")).unwrap_or_default();
            for l in st.lines() {
                let v = || l.split_whitespace().nth(1).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
                if l.starts_with("voluntary_ctxt_switches:") {
                    vol += v();
                } else if l.starts_with("nonvoluntary_ctxt_switches:") {
                    invol += v();
                }
            }
            sched += std::fs::read_to_string(p.join("schedstat"))
                .ok()
                .and_then(|x| x.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
                .unwrap_or(0);
        }
        s.vol_cs = vol;
        s.invol_cs = invol;
        s.sched_ns = sched;
    }
    s
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0)
}

// ---------------------------------------------------------------- processes

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.log().contains(needle))
    }
    /// SIGTERM, then the time until the process has exited (waitpid returned).
    fn term(mut self) -> (Duration, Option<i32>) {
        let t0 = Instant::now();
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().ok();
        (t0.elapsed(), st.and_then(|s| s.code()))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn spawn(o: &Opts, tag: &str, program: &Path, args: &[&str], env: &[(String, String)]) -> Proc {
    let log = o.work.join(format!("{tag}.log"));
    let f = std::fs::File::create(&log).expect("create log");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &o.work)
        .env("SELFDESTRUCT_PODINFO_DIR", o.work.join("no-podinfo"))
        .env("SELFDESTRUCT_SERVICE_ACCOUNT_DIR", o.work.join("no-serviceaccount"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(f);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if program == o.selfdestruct {
        for (k, v) in &o.agent_env {
            cmd.env(k, v);
        }
    }
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    Proc { child, log }
}

// ---------------------------------------------------------------- scenes

/// `GET path` on the fake over HTTP/1.1 with the bench's token (`Connection: close`):
/// the connection, its answer to be read.
fn raw_get(fake: &FakeCluster, path: &str) -> std::io::Result<std::net::TcpStream> {
    let mut s = std::net::TcpStream::connect(fake.addr())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: fake\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut s, request.as_bytes())?;
    Ok(s)
}

/// A fake cluster with `replicas` placeholders and `nodes` realistic nodes
/// (`images` images each), a kubeconfig with the bench's token (the fake checks
/// no RBAC: every read the agent makes is answered), realistic bookmarks.
struct Scene {
    fake: FakeCluster,
    kubeconfig: PathBuf,
}

fn scene(o: &Opts, tag: &str, replicas: i32, nodes: usize, images: usize, bookmarks: Duration) -> Scene {
    let fake = FakeCluster::start_with(Config {
        bookmark_interval: bookmarks,
        seed: Some(42),
        ..Config::default()
    });
    // Created a day before the placeholders are scheduled: old nodes, as on a
    // running cluster (a node created since counts as new, and is read in full).
    let day_ago = SystemTime::now() - Duration::from_secs(86_400);
    for i in 0..nodes {
        let mut node = NodeBuilder::new(&format!("node-{i:05}")).cpu("64").memory("256Gi").pods(250).realistic_images(images);
        node.created = Some(day_ago);
        fake.add_node(node);
    }
    // The placeholders as the StatefulSet, the scheduler and the kubelets left them.
    let template = PodTemplate::placeholder("placeholder", "10m", "16Mi");
    for i in 0..replicas.max(0) as usize {
        let node = if nodes == 0 { "node-0".to_string() } else { format!("node-{:05}", i % nodes) };
        fake.add_pod(template.running_pod(NS, &format!("placeholder-{i}"), &node, SystemTime::now()));
    }
    fake.add_token(TOKEN);
    let dir = o.work.join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let kubeconfig = fake.write_kubeconfig(&dir, TOKEN, NS);
    Scene { fake, kubeconfig }
}

impl Scene {
    /// The Downward-API environment of pod `pod`, this scene's kubeconfig, and `extra`.
    fn env(&self, pod: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        self.env_with(pod, &self.kubeconfig, extra)
    }
    fn env_with(&self, pod: &str, kubeconfig: &Path, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let p = self.fake.get_pod(NS, pod).expect("pod exists");
        let mut v: Vec<(String, String)> = vec![
            ("KUBECONFIG".into(), kubeconfig.display().to_string()),
            ("POD_NAME".into(), pod.into()),
            ("POD_NAMESPACE".into(), NS.into()),
            ("POD_UID".into(), p.metadata.uid.clone().unwrap_or_default()),
            (
                "NODE_NAME".into(),
                p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
            ),
        ];
        v.extend(extra.iter().map(|(k, val)| (k.to_string(), val.to_string())));
        v
    }
}

/// Timer mode: a lifetime of 1h, no node watch, no sibling watch.
const TIMER: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_LIFETIME", "1h"),
    ("SELFDESTRUCT_MAX_LIFETIME", "1h"),
    ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
    ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
];

// ---------------------------------------------------------------- sizes

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn gzip_size(p: &Path) -> u64 {
    Command::new("gzip")
        .args(["-9", "-c"])
        .arg(p)
        .output()
        .map(|o| o.stdout.len() as u64)
        .unwrap_or(0)
}

fn linkage(p: &Path) -> String {
    let out = Command::new("file").arg("-L").arg(p).output().map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    let mut s = Vec::new();
    if out.contains("statically linked") || out.contains("static-pie") {
        s.push("static");
    } else if out.contains("dynamically linked") {
        s.push("dynamic");
    }
    if out.contains("not stripped") {
        s.push("NOT stripped");
    } else if out.contains("stripped") {
        s.push("stripped");
    }
    s.join(", ")
}

/// The image's layers' compressed bytes, from its OCI layout (`LAYOUT:TAG`).
fn image_layers(reference: &str) -> Option<Vec<u64>> {
    let layout = Path::new(reference.rsplit_once(':').map_or(reference, |(l, _)| l));
    let json = |p: PathBuf| -> Option<serde_json::Value> { serde_json::from_slice(&std::fs::read(p).ok()?).ok() };
    let blob = |digest: &str| {
        let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        layout.join("blobs").join(alg).join(hex)
    };
    let index = json(layout.join("index.json"))?;
    let manifest = json(blob(index["manifests"][0]["digest"].as_str()?))?;
    manifest["layers"].as_array()?.iter().map(|l| l["size"].as_u64()).collect()
}

fn sizes(o: &Opts, t: &mut Table) {
    eprintln!("bench: sizes");
    let size = |p: &Path| file_size(p);
    t.section("size (one binary per product: the agent's is the placeholder's)");
    let (b, c) = (size(&o.pause), size(&o.sleep));
    // The issue-48 target: the placeholder's binary as `cargo build --release` builds it.
    if let Some(release) = &o.release {
        let a = size(release);
        t.row(
            "agent binary, `cargo build --release` (bytes on disk)",
            bytes_h(a),
            dash(),
            dash(),
            "<= 6 MiB",
            Some(a <= 6 << 20),
        );
        for name in ["selfdestruct-node-gate", "selfdestruct-schedule"] {
            let other = release.with_file_name(name);
            t.row(&format!("  {name}, `cargo build --release`"), bytes_h(size(&other)), dash(), dash(), "", None);
        }
    }
    let a = size(&o.selfdestruct);
    t.row(
        "agent binary as shipped (static, bytes on disk)",
        bytes_h(a),
        bytes_h(b),
        format!("{} + libc.so", bytes_h(c)),
        "",
        None,
    );
    let siblings = ["selfdestruct-node-gate", "selfdestruct-schedule"].map(|n| o.selfdestruct.with_file_name(n));
    for other in &siblings {
        let name = other.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        t.row(&format!("  {name} as shipped"), bytes_h(size(other)), dash(), dash(), "", None);
    }
    t.row("  linkage", linkage(&o.selfdestruct), linkage(&o.pause), linkage(&o.sleep), "static", None);
    let gzip: u64 = std::iter::once(&o.selfdestruct).chain(&siblings).map(|p| gzip_size(p)).sum();
    t.row(
        "the three binaries, gzip -9 (each)",
        bytes_h(gzip),
        bytes_h(gzip_size(&o.pause)),
        "n/a (needs libc)".into(),
        "",
        None,
    );
    let layers = o.image.as_deref().and_then(image_layers);
    t.row(
        "image on scratch, compressed (its layers, as pulled)",
        layers.as_ref().map_or_else(|| "not built (no umoci)".into(), |l| format!("{} in {} layer(s)", bytes_h(l.iter().sum()), l.len())),
        dash(),
        dash(),
        "",
        None,
    );
}

// ---------------------------------------------------------------- idle

fn idle(o: &Opts, t: &mut Table) {
    eprintln!("bench: {} s idle (timer mode, pause mode, pause, sleep)", o.idle.as_secs());
    let sc = scene(o, "idle", 1, 0, 0, BOOKMARKS);
    let agent = spawn(o, "timer", &o.selfdestruct, &[], &sc.env("placeholder-0", TIMER));
    let nowatch = spawn(o, "nokube", &o.selfdestruct, &[], &[]);
    let pause = spawn(o, "pause", &o.pause, &[], &[]);
    let sleep = spawn(o, "sleep", &o.sleep, &["infinity"], &[]);
    assert!(agent.wait_log("selfdestruct started", Duration::from_secs(10)), "timer agent did not start: {}", agent.log());
    assert!(nowatch.wait_log("no API access", Duration::from_secs(10)), "pause-mode agent: {}", nowatch.log());
    // The client is built on tokio's blocking pool, whose thread lingers for
    // 10 s after it: measure once only the runtime's thread is left.
    let settled = Instant::now();
    while threads(agent.pid()) > 1 && settled.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let procs = [&agent, &nowatch, &pause, &sleep];
    let before: Vec<Sample> = procs.iter().map(|p| sample(p.pid())).collect();
    let reqs0 = sc.fake.requests().len();
    std::thread::sleep(o.idle);
    let after: Vec<Sample> = procs.iter().map(|p| sample(p.pid())).collect();
    let reqs = sc.fake.requests().len() - reqs0;
    let secs = o.idle.as_secs();
    t.section(&format!("idle {secs} s (agent: timer mode, lifetime 1h, against the fake API server; pause mode: no API access)"));
    let (a, n, p, s) = (after[0], after[1], after[2], after[3]);
    t.row("RSS steady (VmRSS), timer mode", mib(a.rss_kib), mib(p.rss_kib), mib(s.rss_kib), "<= 7 MiB", Some(a.rss_kib <= 7 * 1024));
    t.row("RSS peak (VmHWM), timer mode", mib(a.hwm_kib), mib(p.hwm_kib), mib(s.hwm_kib), "", None);
    let split = |x: Sample| format!("{} + {}", mib(x.anon_kib), mib(x.file_kib));
    t.row("  RSS = anon + file (binary pages), timer mode", split(a), split(p), split(s), "", None);
    t.row("RSS steady, pause mode (no API)", format!("{} ({})", mib(n.rss_kib), split(n)), dash(), dash(), "", None);
    let cpu = |i: usize| {
        let d = after[i].sched_ns.saturating_sub(before[i].sched_ns);
        let tick = after[i].cpu_ns.saturating_sub(before[i].cpu_ns);
        format!("{:.3} ms ({} ms)", d as f64 / 1e6, tick / 1_000_000)
    };
    t.row(&format!("CPU over {secs} s idle, timer mode (schedstat; utime+stime)"), cpu(0), cpu(2), cpu(3), "~0", None);
    t.row(&format!("CPU over {secs} s idle, pause mode"), cpu(1), dash(), dash(), "~0", None);
    // Saturating: a thread that ends in the window takes its counts along.
    let cs = |i: usize| (after[i].vol_cs + after[i].invol_cs).saturating_sub(before[i].vol_cs + before[i].invol_cs);
    t.row(
        &format!("context switches over {secs} s, timer mode"),
        cs(0).to_string(),
        cs(2).to_string(),
        cs(3).to_string(),
        "~0",
        Some(cs(0) <= 2),
    );
    t.row(&format!("context switches over {secs} s, pause mode"), cs(1).to_string(), dash(), dash(), "~0", Some(cs(1) <= 2));
    t.row(
        "threads",
        format!("{} (timer), {} (pause mode)", threads(agent.pid()), threads(nowatch.pid())),
        threads(pause.pid()).to_string(),
        threads(sleep.pid()).to_string(),
        "",
        None,
    );
    t.row(&format!("API requests during the {secs} s idle, timer mode"), reqs.to_string(), dash(), dash(), "0", Some(reqs == 0));
}

// ---------------------------------------------------------------- node watch

struct Watched {
    n: usize,
    images: usize,
    scene: Scene,
    agent: Proc,
}

fn node_watch(o: &Opts, t: &mut Table) {
    let mut set: Vec<(usize, usize)> = o.scales.iter().map(|&n| (n, 50)).collect();
    // The same nodes without images: memory must not depend on the Node object size.
    set.push((1000, 0));
    if o.scales.contains(&5000) {
        set.push((5000, 0));
    }
    let mut runs = Vec::new();
    for (n, images) in set {
        eprintln!("bench: node watch over {n} nodes with {images} images each: setting up");
        let sc = scene(o, &format!("nodes-{n}-{images}"), 3, n, images, BOOKMARKS);
        let agent = spawn(o, &format!("nodes-{n}-{images}"), &o.selfdestruct, &[], &sc.env("placeholder-0", &[]));
        let needle = format!("count={n}");
        assert!(
            wait_until(Duration::from_secs(60), || agent.log().lines().any(|l| l.contains("watching nodes") && l.contains(&needle))),
            "agent did not list {n} nodes: {}",
            agent.log()
        );
        assert!(agent.wait_log("watching sibling", Duration::from_secs(10)));
        runs.push(Watched { n, images, scene: sc, agent });
    }
    eprintln!("bench: node watch: {} s idle", o.idle.as_secs());
    let before: Vec<Sample> = runs.iter().map(|r| sample(r.agent.pid())).collect();
    std::thread::sleep(o.idle);
    let after: Vec<Sample> = runs.iter().map(|r| sample(r.agent.pid())).collect();
    let secs = o.idle.as_secs();
    t.section(&format!("node watch + sibling watch (default config), {secs} s idle after the initial list; bookmarks every 60 s"));
    for (i, r) in runs.iter().enumerate() {
        let node_bytes = node_json_size(&r.scene.fake);
        let (a, b) = (before[i], after[i]);
        let big = r.n >= 5000 && r.images > 0;
        let target = if big { "<= 16 MiB" } else { "" };
        let met = big.then_some(a.rss_kib <= 16 * 1024 && b.rss_kib <= 16 * 1024);
        t.row(
            &format!("RSS steady, {} nodes x {} images ({} per Node)", r.n, r.images, bytes_h(node_bytes)),
            format!("{} ({} anon)", mib(b.rss_kib), mib(b.anon_kib)),
            dash(),
            dash(),
            target,
            met,
        );
        t.row(
            &format!("RSS peak (the list: {} in pages*)", bytes_h(node_bytes * r.n as u64)),
            mib(b.hwm_kib),
            dash(),
            dash(),
            if big { "<= 64 MiB" } else { "" },
            big.then_some(b.hwm_kib <= 64 * 1024),
        );
        let cs = b.vol_cs + b.invol_cs - a.vol_cs - a.invol_cs;
        t.row(
            &format!("  CPU / context switches over {secs} s idle"),
            format!("{:.2} ms / {cs}", (b.sched_ns - a.sched_ns) as f64 / 1e6),
            dash(),
            dash(),
            "",
            None,
        );
    }
    // Memory must not grow with the size of a Node object.
    for n in [1000, 5000] {
        let with = runs.iter().position(|r| r.n == n && r.images == 50);
        let without = runs.iter().position(|r| r.n == n && r.images == 0);
        if let (Some(w), Some(wo)) = (with, without) {
            let d = after[w].anon_kib as i64 - after[wo].anon_kib as i64;
            t.row(
                &format!("RSS anon steady: {n} Nodes with 50 images minus without"),
                format!("{d:+} KiB"),
                dash(),
                dash(),
                "<= +256 KiB",
                Some(d <= 256),
            );
        }
    }
    // 1,000 node-status updates (heartbeat bump of the Ready condition).
    t.section("1,000 node-status updates on the watch (Ready condition's lastHeartbeatTime bumped)");
    for r in runs.iter().filter(|r| r.images > 0) {
        eprintln!("bench: 1,000 node updates over {} nodes", r.n);
        let a = sample(r.agent.pid());
        let t0 = Instant::now();
        for i in 0..1000 {
            let name = format!("node-{:05}", (i * 7919) % r.n);
            heartbeat(&r.scene.fake, &name);
        }
        // Wait until the agent has drained the stream: its CPU time stops moving.
        let mut last = sample(r.agent.pid()).sched_ns;
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = sample(r.agent.pid()).sched_ns;
            if now == last || t0.elapsed() > Duration::from_secs(60) {
                break;
            }
            last = now;
        }
        let b = sample(r.agent.pid());
        let cpu = (b.sched_ns - a.sched_ns) as f64 / 1e6;
        let tick = (b.cpu_ns - a.cpu_ns) / 1_000_000;
        t.row(
            &format!("CPU per 1,000 updates, {} nodes (schedstat; utime+stime)", r.n),
            format!("{cpu:.1} ms ({tick} ms)"),
            dash(),
            dash(),
            "",
            None,
        );
        t.row(
            "  RSS steady / peak after the updates",
            format!("{} / {}", mib(b.rss_kib), mib(b.hwm_kib)),
            dash(),
            dash(),
            "",
            None,
        );
    }
}

// ---------------------------------------------------------------- bytes on the wire

/// `metadata.managedFields` of a Node as kube-apiserver v1.36.2 reported it
/// (node-a of shared/k8s-fixtures/nodes-list-metadata-200.json: the kubelet's,
/// the controller manager's and kubectl's entries, 1,474 bytes). The fake
/// keeps no managedFields of its own; they are most of a metadata-only event.
const MANAGED_FIELDS: &str = include_str!("../node-managed-fields.json");

/// New nodes (created after the placeholders were scheduled) in the wire scenes.
const CANDIDATES: usize = 3;

/// Bytes on the wire for the node view: every node's kubelet posts its status
/// once (one 5-minute round at the kubelet's rate when nothing changes, 12 an
/// hour), measured on the agent's metadata watch and its candidates' full
/// watches, and on a full watch of every Node (what the agent did before) open
/// beside them in the same run.
fn wire(o: &Opts, t: &mut Table) {
    let scales: Vec<usize> = if o.quick { vec![500] } else { vec![500, 5000] };
    let managed: serde_json::Value = serde_json::from_str(MANAGED_FIELDS).expect("managedFields JSON");
    let managed: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry> =
        serde_json::from_value(managed).expect("managedFields entries");
    t.section(&format!(
        "bytes on the wire: one status update of every Node (a kubelet round; 12 an hour), {CANDIDATES} of them new; Nodes of 50 images with managedFields as captured"
    ));
    for n in scales {
        eprintln!("bench: bytes on the wire over {n} nodes: setting up");
        let sc = scene(o, &format!("wire-{n}"), 3, n, 50, BOOKMARKS);
        for node in sc.fake.nodes() {
            let name = node.metadata.name.clone().unwrap_or_default();
            sc.fake.modify_node(&name, |node| node.metadata.managed_fields = Some(managed.clone()));
        }
        let agent = spawn(o, &format!("wire-{n}"), &o.selfdestruct, &[], &sc.env("placeholder-0", &[]));
        let needle = format!("count={n}");
        assert!(
            wait_until(Duration::from_secs(120), || agent.log().lines().any(|l| l.contains("watching nodes") && l.contains(&needle))),
            "agent did not list {n} nodes: {}",
            agent.log()
        );
        let meta_list: u64 = sum_bytes(&sc.fake, |r| r.metadata_only && !r.watch);
        let full_list = raw_get(&sc.fake, "/api/v1/nodes")
            .and_then(|mut s| {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut s, &mut out)?;
                Ok(out)
            })
            .map(|out| out.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |at| out.len() - at - 4) as u64)
            .unwrap_or(0);
        for i in 0..CANDIDATES {
            sc.fake.add_node(NodeBuilder::new(&format!("new-{i}")).cpu("64").memory("256Gi").pods(250).realistic_images(50));
            let name = format!("new-{i}");
            sc.fake.modify_node(&name, |node| node.metadata.managed_fields = Some(managed.clone()));
        }
        let candidate = |r: &RecordedRequest| r.watch && !r.metadata_only && r.query_param("fieldSelector").is_some();
        assert!(
            wait_until(Duration::from_secs(60), || sc.fake.count_requests(candidate) >= CANDIDATES),
            "the agent did not watch the {CANDIDATES} new nodes in full: {}",
            agent.log()
        );
        // The full watch of every Node, as the agent made it before: drained
        // by a thread (the fake stops sending to a reader that stops reading).
        let rv = sc.fake.resource_version();
        let mut full = raw_get(&sc.fake, &format!("/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=3600"))
            .expect("full watch");
        full.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
        let drain = std::thread::spawn(move || {
            let mut buf = vec![0; 64 << 10];
            while std::io::Read::read(&mut full, &mut buf).is_ok_and(|n| n > 0) {}
        });
        std::thread::sleep(Duration::from_millis(500));
        let meta_watch = |r: &RecordedRequest| r.watch && r.metadata_only;
        let full_watch = |r: &RecordedRequest| r.watch && !r.metadata_only && r.query_param("fieldSelector").is_none();
        let before = [sum_bytes(&sc.fake, meta_watch), sum_bytes(&sc.fake, candidate), sum_bytes(&sc.fake, full_watch)];
        let (agent_cpu0, t0) = (sample(agent.pid()), Instant::now());
        let mut names: Vec<String> = (0..n).map(|i| format!("node-{i:05}")).collect();
        names.extend((0..CANDIDATES).map(|i| format!("new-{i}")));
        for name in &names {
            heartbeat(&sc.fake, name);
        }
        // Until every watch has sent the round: the byte counts stop moving.
        let mut last = [0u64; 3];
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = [sum_bytes(&sc.fake, meta_watch), sum_bytes(&sc.fake, candidate), sum_bytes(&sc.fake, full_watch)];
            if now == last || t0.elapsed() > Duration::from_secs(120) {
                break;
            }
            last = now;
        }
        let agent_cpu = (sample(agent.pid()).sched_ns - agent_cpu0.sched_ns) as f64 / 1e6;
        let events = names.len() as u64;
        let meta = last[0] - before[0];
        let cand = last[1] - before[1];
        let fullb = last[2] - before[2];
        let per_meta = meta / events;
        t.row(
            &format!("{n} Nodes: bytes per status update, metadata watch (every Node)"),
            bytes_h(per_meta),
            dash(),
            dash(),
            "<= 4 KB (4,000 B)",
            Some(per_meta <= 4000),
        );
        t.row(
            &format!("  per status update of a new node, its full watch ({CANDIDATES} new nodes)"),
            bytes_h(cand / CANDIDATES as u64),
            dash(),
            dash(),
            "",
            None,
        );
        t.row("  per status update, the full watch of every Node (before)", bytes_h(fullb / events), dash(), dash(), "", None);
        t.row(
            "  per agent-hour: two tiers / full watch (x12)",
            format!("{} / {}", bytes_h(12 * (meta + cand)), bytes_h(12 * fullb)),
            dash(),
            dash(),
            "",
            None,
        );
        t.row(
            "  initial list: metadata (agent, pages of 100) / full (one list)",
            format!("{} / {}", bytes_h(meta_list), bytes_h(full_list)),
            dash(),
            dash(),
            "",
            None,
        );
        t.row(&format!("  agent CPU for the round of {events} updates"), format!("{agent_cpu:.1} ms"), dash(), dash(), "", None);
        drop(agent);
        drop(sc);
        let _ = drain.join();
    }
}

/// Bytes sent on the requests matching `pred` (a watch's so far).
fn sum_bytes(fake: &FakeCluster, pred: impl Fn(&RecordedRequest) -> bool) -> u64 {
    fake.requests()
        .iter()
        .filter(|r| pred(r))
        .map(|r| r.bytes_sent.load(Ordering::Relaxed))
        .sum()
}

/// Size of one Node as JSON (the first node of the scene).
fn node_json_size(fake: &FakeCluster) -> u64 {
    fake.nodes()
        .first()
        .map(|n| fake_apiserver_json_len(n))
        .unwrap_or(0)
}

fn fake_apiserver_json_len(n: &k8s_openapi::api::core::v1::Node) -> u64 {
    // k8s-openapi implements Serialize; serde_json is a dependency of the fake.
    let v = serde_json_to_vec(n);
    v as u64
}

fn serde_json_to_vec<T: serde::Serialize>(v: &T) -> usize {
    struct Counter(usize);
    impl Write for Counter {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

// ---------------------------------------------------------------- busy decisions

/// Bumps the Ready condition's lastHeartbeatTime of `name` (a kubelet's status update).
fn heartbeat(fake: &FakeCluster, name: &str) {
    fake.modify_node(name, |node| {
        if let Some(cs) = node.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            for c in cs.iter_mut() {
                c.last_heartbeat_time = Some(fake_apiserver::objects::time_of(SystemTime::now()));
            }
        }
    });
}

/// On-CPU time of this thread (ns), from /proc/thread-self/schedstat.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|x| x.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The agent's work per event without the process around it: the busy case's world
/// built with the decision's own builder (`old` + `new` nodes, the same 100
/// placeholders), then the CPU time of one `evaluate` and of one
/// `Memory::observe_nodes`, each averaged over 3 s of repeats (this binary's
/// release profile, not the agent's size-optimised one).
fn decision_cost(old: usize, new: usize) -> (Duration, Duration) {
    use selfdestruct_decision::builder::{World, at, ready_node, running_sibling};
    eprintln!("bench: busy decisions: one evaluation in-process");
    let mut w = World::new();
    w.policy = selfdestruct_decision::Policy::default();
    w.own.scheduled_at = Some(at(100));
    w.own.started_at = Some(at(100));
    w.own.node_name = Some("old-00000".into());
    let nodes = (0..old).map(|i| ready_node(&format!("old-{i:05}"), 50));
    w.nodes = Some(nodes.chain((0..new).map(|i| ready_node(&format!("new-{i:05}"), 500))).collect());
    let mut siblings: Vec<_> = (0..50).map(|i| running_sibling(&format!("placeholder-{i}"), &format!("old-{:05}", i * 17))).collect();
    siblings[0].uid = w.own.uid.clone();
    for i in 0..49 {
        let mut s = running_sibling(&format!("moved-{i}"), &format!("new-{i:05}"));
        s.created = Some(at(700));
        siblings.push(s);
    }
    let mut pending = running_sibling("pending-0", "");
    (pending.node_name, pending.pending, pending.created) = (None, true, Some(at(800)));
    siblings.push(pending);
    w.siblings = Some(siblings);
    // The agent saw the new nodes usable when they appeared (t=500).
    w.memory.observe_nodes(at(500), &w.own, w.nodes.as_deref());
    w.now = at(1000);
    let per = |f: &mut dyn FnMut()| {
        let (t0, c0, mut n) = (Instant::now(), thread_cpu_ns(), 0u64);
        while t0.elapsed() < Duration::from_secs(3) || n < 3 {
            f();
            n += 1;
        }
        Duration::from_nanos((thread_cpu_ns() - c0) / n)
    };
    let s = w.snapshot();
    let evaluation = per(&mut || {
        std::hint::black_box(selfdestruct_decision::evaluate(&s));
    });
    let observe = per(&mut || w.memory.observe_nodes(w.now, &w.own, w.nodes.as_deref()));
    (evaluation, observe)
}

/// Every decision over a big node view with many siblings (issue 27, item 2):
/// 4,800 old nodes and 200 new ones (50 images each), 100 placeholder pods (50 on
/// old nodes, the agents' own among them; 49 created onto the new nodes after the
/// agents saw them, which the "full" rule reads; 1 Pending, which holds every move),
/// node heartbeats at 20 a second. Each agent decides on every heartbeat. Printed: the agents' CPU per
/// heartbeat and their share of a core, and SIGTERM to exit while the heartbeats go on.
fn busy_decisions(o: &Opts, t: &mut Table) {
    let (old, new, rate) = (4800, 200, 20u32);
    eprintln!("bench: busy decisions: {old} + {new} nodes, 100 siblings, {rate} heartbeats/s: setting up");
    let fake = FakeCluster::start_with(Config {
        bookmark_interval: BOOKMARKS,
        seed: Some(42),
        ..Config::default()
    });
    let node = |name: &str| NodeBuilder::new(name).cpu("64").memory("256Gi").pods(250).realistic_images(50);
    for i in 0..old {
        fake.add_node(node(&format!("old-{i:05}")));
    }
    // Old to the placeholders: created in an earlier second than they are scheduled in.
    std::thread::sleep(Duration::from_millis(1100));
    let template = PodTemplate::placeholder("placeholder", "10m", "16Mi");
    for i in 0..50 {
        fake.add_pod(template.running_pod(NS, &format!("placeholder-{i}"), &format!("old-{:05}", i * 17), SystemTime::now()));
    }
    // The Pending sibling: same labels, not scheduled.
    let mut pending = template.running_pod(NS, "pending-0", "", SystemTime::now());
    let status = pending.status.as_mut().expect("a status");
    (status.phase, status.conditions) = (Some("Pending".into()), None);
    fake.add_pod(pending);
    for i in 0..new {
        fake.add_node(node(&format!("new-{i:05}")).label("example.com/pool", "new"));
    }
    fake.add_token(TOKEN);
    let dir = o.work.join("busy");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let sc = Scene { kubeconfig: fake.write_kubeconfig(&dir, TOKEN, NS), fake };
    let settings = [("SELFDESTRUCT_START_JITTER", "0"), ("SELFDESTRUCT_NODE_SETTLE", "1s"), ("SELFDESTRUCT_MIN_AGE", "0s")];
    let agents: Vec<Proc> = (0..o.busy_agents)
        .map(|i| spawn(o, &format!("busy-{i}"), &o.selfdestruct, &[], &sc.env(&format!("placeholder-{i}"), &settings)))
        .collect();
    for a in &agents {
        // Held by the Pending sibling once a new node has settled: every decision
        // now runs the full rule over the new nodes.
        assert!(a.wait_log("sibling pending-0 is Pending", Duration::from_secs(120)), "agent did not hold: {}", a.log());
    }
    // Creation times have second precision: the next second is after the agents
    // noted the new nodes usable.
    std::thread::sleep(Duration::from_millis(1100));
    // 49 siblings created after the agents saw the new nodes, placed on them (as
    // the scheduler places re-created placeholders: the new nodes are the emptiest;
    // the agents read only where a sibling runs).
    for i in 0..49 {
        sc.fake.add_pod(template.running_pod(NS, &format!("moved-{i}"), &format!("new-{i:05}"), SystemTime::now()));
    }
    let on_new = sc.fake.pods(NS).iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| n.starts_with("new-"))).count();
    std::thread::sleep(Duration::from_secs(2));
    let names: Vec<String> = (0..old).map(|i| format!("old-{i:05}")).chain((0..new).map(|i| format!("new-{i:05}"))).collect();
    let period = Duration::from_secs(1) / rate;
    let stop = AtomicBool::new(false);
    let sent = std::sync::atomic::AtomicUsize::new(0);
    let pids: Vec<u32> = agents.iter().map(|a| a.pid()).collect();
    let cpu = |pids: &[u32]| -> Vec<u64> { pids.iter().map(|p| sample(*p).sched_ns).collect() };
    let beats = |until: &AtomicBool| {
        let t0 = Instant::now();
        let mut n = 0u32;
        while !until.load(Ordering::SeqCst) {
            let i = sent.fetch_add(1, Ordering::SeqCst);
            heartbeat(&sc.fake, &names[(i * 7919) % names.len()]);
            n += 1;
            if let Some(wait) = (t0 + period * n).checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    };
    let (window, cpu_window, cpu_drained, drained, latencies) = std::thread::scope(|scope| {
        // 1. CPU: heartbeats for the window, then until the agents have drained the stream.
        eprintln!("bench: busy decisions: {} s of heartbeats", o.busy_window.as_secs());
        let c0 = cpu(&pids);
        let w = scope.spawn(|| beats(&stop));
        std::thread::sleep(o.busy_window);
        stop.store(true, Ordering::SeqCst);
        w.join().expect("heartbeats");
        let window = sent.load(Ordering::SeqCst);
        let c1 = cpu(&pids);
        let mut last = c1.clone();
        let drained = wait_until(Duration::from_secs(30), || {
            std::thread::sleep(Duration::from_millis(500));
            let now = cpu(&pids);
            let still = now == last;
            last = now;
            still
        });
        // 2. SIGTERM, one agent a second, while the heartbeats go on.
        eprintln!("bench: busy decisions: SIGTERM during heartbeats");
        let again = AtomicBool::new(false);
        let latencies = std::thread::scope(|inner| {
            let w = inner.spawn(|| beats(&again));
            // A static C pause beside each agent: the floor of SIGTERM to exit on
            // this machine under the same load.
            let pauses: Vec<Proc> = (0..agents.len()).map(|i| spawn(o, &format!("busy-pause-{i}"), &o.pause, &[], &[])).collect();
            let mut latencies = Vec::new();
            for (a, p) in agents.into_iter().zip(pauses) {
                std::thread::sleep(Duration::from_millis(1000 + 37 * latencies.len() as u64));
                latencies.push((a.term(), p.term().0));
            }
            again.store(true, Ordering::SeqCst);
            w.join().expect("heartbeats");
            latencies
        });
        let per = |a: &[u64], b: &[u64]| -> Vec<u64> { a.iter().zip(b).map(|(x, y)| y - x).collect() };
        (window, per(&c0, &c1), per(&c0, &last), drained, latencies)
    });
    let (evaluation, observe) = decision_cost(old, new);
    t.section(&format!(
        "busy decisions: {old} old + {new} new nodes (50 images each), 100 placeholders ({on_new} on new nodes, 1 Pending), {rate} heartbeats/s; {} agents",
        cpu_window.len()
    ));
    let median_ms = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort();
        v[v.len() / 2] as f64 / 1e6
    };
    let secs = o.busy_window.as_secs_f64();
    let share: Vec<u64> = cpu_window.iter().map(|c| (*c as f64 / 1e6 / secs / 10.0).round() as u64).collect();
    t.row(
        &format!("CPU per heartbeat, median agent ({window} heartbeats in {secs:.0} s)"),
        // Not drained: the agents are behind, the figure so far is a lower bound.
        format!("{}{:.3} ms", if drained { "" } else { "not drained after 30 s: >= " }, median_ms(&cpu_drained) / window as f64),
        dash(),
        dash(),
        "",
        None,
    );
    t.row(
        "  in-process: one evaluation (decide + full nodes) / Memory::observe_nodes",
        format!("{:.3} ms / {:.3} ms", evaluation.as_secs_f64() * 1e3, observe.as_secs_f64() * 1e3),
        dash(),
        dash(),
        "",
        None,
    );
    t.row("  share of a core during the heartbeats, per agent", format!("{share:?} %"), dash(), dash(), "", None);
    let times: Vec<Duration> = latencies.iter().map(|((d, _), _)| *d).collect();
    let floor: Vec<Duration> = latencies.iter().map(|(_, d)| *d).collect();
    let codes_ok = latencies.iter().all(|((_, c), _)| *c == Some(0));
    let max = times.iter().max().copied().unwrap_or_default();
    let floor_max = floor.iter().max().copied().unwrap_or_default();
    t.row(
        "SIGTERM to exit during the heartbeats: median (max)",
        format!("{} ({}), exit 0: {codes_ok}", ms(median(times.clone())), ms(max)),
        format!("{} ({})", ms(median(floor.clone())), ms(floor_max)),
        dash(),
        "<= 5 ms",
        Some(median(times.clone()) <= Duration::from_millis(5)),
    );
}

// ---------------------------------------------------------------- latency

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn p90(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get((v.len() * 9 / 10).min(v.len().saturating_sub(1))).copied().unwrap_or_default()
}

fn latency(o: &Opts, t: &mut Table) {
    eprintln!("bench: exec-to-first-request and SIGTERM-to-exit, {} runs each", o.runs);
    let sc = scene(o, "latency", 1, 10, 50, BOOKMARKS);
    // SIGTERM is timed with both watches open: no start-up jitter to wait out.
    let env = sc.env("placeholder-0", &[("SELFDESTRUCT_START_JITTER", "0")]);
    let (mut first, mut term_agent, mut term_nokube, mut term_pause, mut term_sleep) = (vec![], vec![], vec![], vec![], vec![]);
    let mut codes = Vec::new();
    for i in 0..o.runs {
        sc.fake.clear_requests();
        let t0 = SystemTime::now();
        let p = spawn(o, &format!("lat-{i}"), &o.selfdestruct, &[], &env);
        let r = sc.fake.wait_for_request(|_| true, Duration::from_secs(10)).expect("a first request");
        first.push(r.time.duration_since(t0).unwrap_or_default());
        assert!(
            sc.fake.wait_for(|c| c.open_watches() >= 2, Duration::from_secs(10)),
            "agent did not open its watches: {}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(20));
        let (d, code) = p.term();
        term_agent.push(d);
        codes.push(code);
        let p = spawn(o, &format!("latn-{i}"), &o.selfdestruct, &[], &[]);
        assert!(p.wait_log("no API access", Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(20));
        let (d, code) = p.term();
        term_nokube.push(d);
        codes.push(code);
        let p = spawn(o, &format!("latp-{i}"), &o.pause, &[], &[]);
        std::thread::sleep(Duration::from_millis(30));
        let (d, code) = p.term();
        term_pause.push(d);
        codes.push(code);
        let p = spawn(o, &format!("lats-{i}"), &o.sleep, &["infinity"], &[]);
        std::thread::sleep(Duration::from_millis(30));
        term_sleep.push(p.term().0);
    }
    let all_zero = codes.iter().all(|c| *c == Some(0));
    t.section(&format!("latency, median (p90) of {} runs", o.runs));
    let mp = |v: &Vec<Duration>| format!("{} ({})", ms(median(v.clone())), ms(p90(v.clone())));
    t.row("exec to first API request", mp(&first), dash(), dash(), "<= 20 ms", Some(median(first.clone()) <= Duration::from_millis(20)));
    t.row(
        "SIGTERM to exit, agent mode (2 watches open)",
        mp(&term_agent),
        mp(&term_pause),
        mp(&term_sleep),
        "<= 5 ms",
        Some(median(term_agent.clone()) <= Duration::from_millis(5)),
    );
    t.row(
        "SIGTERM to exit, pause mode (no API)",
        mp(&term_nokube),
        dash(),
        dash(),
        "<= 5 ms",
        Some(median(term_nokube.clone()) <= Duration::from_millis(5)),
    );
    t.row("  exit code 0 on SIGTERM (selfdestruct, pause)", all_zero.to_string(), dash(), "(killed by signal)".into(), "0", Some(all_zero));
}

// ---------------------------------------------------------------- requests per hour

/// A TCP proxy that divides every `timeoutSeconds=N` in requests by `scale`
/// (same number of digits, zero-padded, so no length changes), recording the
/// original values: the agent's 15-30 min watches then end within seconds.
fn time_lapse_proxy(upstream: std::net::SocketAddr, scale: u64, seen: Arc<Mutex<Vec<u64>>>, stop: Arc<AtomicBool>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(c) = c else { continue };
            let Ok(u) = TcpStream::connect(upstream) else { continue };
            let (mut c2, mut u2) = (c.try_clone().expect("clone"), u.try_clone().expect("clone"));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = u2.read(&mut buf) {
                    if n == 0 || c2.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = c2.shutdown(std::net::Shutdown::Both);
            });
            let seen = seen.clone();
            let (mut c, mut u) = (c, u);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let b = &mut buf[..n];
                    let key = b"timeoutSeconds=";
                    let mut i = 0;
                    while i + key.len() < b.len() {
                        if &b[i..i + key.len()] == key {
                            let s = i + key.len();
                            let mut e = s;
                            while e < b.len() && b[e].is_ascii_digit() {
                                e += 1;
                            }
                            if let Ok(v) = std::str::from_utf8(&b[s..e]).unwrap_or("").parse::<u64>() {
                                seen.lock().expect("lock").push(v);
                                let nv = format!("{:0w$}", (v / scale).max(1), w = e - s);
                                if nv.len() == e - s {
                                    b[s..e].copy_from_slice(nv.as_bytes());
                                }
                            }
                            i = e;
                        } else {
                            i += 1;
                        }
                    }
                    if u.write_all(b).is_err() {
                        break;
                    }
                }
                let _ = u.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://{addr}")
}

fn requests_per_hour(o: &Opts, t: &mut Table) -> Vec<String> {
    let scale = o.cycle_scale;
    eprintln!(
        "bench: requests per watch cycle: {} s with the agent's watch timeouts divided by {scale}",
        o.cycle_window.as_secs()
    );
    let sc = scene(o, "cycle", 3, 10, 50, Duration::from_secs(1));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let url = time_lapse_proxy(sc.fake.addr(), scale, seen.clone(), stop.clone());
    let dir = o.work.join("cycle-proxy");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, sc.fake.kubeconfig_yaml(TOKEN, NS).replace(&sc.fake.url(), &url)).expect("write kubeconfig");
    // Watch cycles are counted from the first list: no start-up jitter to wait out.
    let no_jitter = [("SELFDESTRUCT_START_JITTER", "0")];
    let agent = spawn(o, "cycle", &o.selfdestruct, &[], &sc.env_with("placeholder-0", &kc, &no_jitter));
    assert!(sc.fake.wait_for(|c| c.open_watches() >= 2, Duration::from_secs(10)), "no watches: {}", agent.log());
    let start: Vec<RecordedRequest> = sc.fake.requests();
    sc.fake.clear_requests();
    seen.lock().expect("lock").clear();
    std::thread::sleep(o.cycle_window);
    let reqs = sc.fake.requests();
    let timeouts = seen.lock().expect("lock").clone();
    drop(agent);
    stop.store(true, Ordering::SeqCst);
    let _ = TcpStream::connect(url.trim_start_matches("http://"));
    let per = |f: &dyn Fn(&RecordedRequest) -> bool| reqs.iter().filter(|r| f(r)).count();
    let nodes_watch = per(&|r| r.path == "/api/v1/nodes" && r.watch);
    let nodes_all = per(&|r| r.path == "/api/v1/nodes");
    let pods_path = format!("/api/v1/namespaces/{NS}/pods");
    let pods_watch = per(&|r| r.path == pods_path && r.watch);
    let pods_all = per(&|r| r.path == pods_path);
    let other = reqs.len() - nodes_all - pods_all;
    // Watch cycles completed in the window = watch requests (each opens after the previous one ended).
    let mean_timeout = if timeouts.is_empty() { 0.0 } else { timeouts.iter().sum::<u64>() as f64 / timeouts.len() as f64 };
    let per_cycle = |all: usize, w: usize| if w == 0 { 0.0 } else { all as f64 / w as f64 };
    // Steady state: one watch request per cycle; a cycle lasts the requested timeout,
    // uniform in [600, 660] s (WATCH_TIMEOUT 660 s minus up to 60 s of jitter): mean 630 s.
    let model_mean = 630.0;
    let ph = |pc: f64, mean: f64| pc * 3600.0 / mean;
    let n_pc = per_cycle(nodes_all, nodes_watch);
    let p_pc = per_cycle(pods_all, pods_watch);
    let startup: Vec<String> = start
        .iter()
        .map(|r| format!("{} {}{}", r.method, r.path, if r.watch { " (watch)" } else { "" }))
        .collect();
    t.section(&format!(
        "API requests (watch timeouts divided by {scale} through a proxy for {} s = {:.1} simulated h; counted at the fake)",
        o.cycle_window.as_secs(),
        o.cycle_window.as_secs_f64() * scale as f64 / 3600.0
    ));
    t.row("start-up requests (once per process)", format!("{}", start.len()), "0".into(), "0".into(), "", None);
    t.row(
        "requests per watch cycle: nodes / sibling pods",
        format!("{n_pc:.2} / {p_pc:.2} ({nodes_watch} + {pods_watch} cycles)"),
        dash(),
        dash(),
        "1",
        None,
    );
    t.row(
        "requested watch timeout, mean (model: 630 s)",
        format!("{mean_timeout:.0} s ({} watches)", timeouts.len()),
        dash(),
        dash(),
        "",
        None,
    );
    let total = ph(n_pc, model_mean) + ph(p_pc, model_mean);
    t.row(
        "steady-state requests/h: node watch",
        format!("{:.2}", ph(n_pc, model_mean)),
        "0".into(),
        "0".into(),
        "",
        None,
    );
    t.row("steady-state requests/h: sibling watch", format!("{:.2}", ph(p_pc, model_mean)), "0".into(), "0".into(), "", None);
    t.row(
        "steady-state requests/h: total (2 watches)",
        format!("{total:.2} (+{other} other in the window)"),
        "0".into(),
        "0".into(),
        "<= 12 + 1 open watch",
        Some(total <= 12.0 && other == 0),
    );
    t.row(
        "  worst case: stall (600 s) on both watches",
        format!("{:.1}", 2.0 * 3600.0 / 600.0),
        dash(),
        dash(),
        "",
        None,
    );
    vec![
        "* the fake API server pages at the agent's limit (100 objects), as kube-apiserver does.".into(),
        format!("start-up requests: {}", startup.join(", ")),
    ]
}

// ---------------------------------------------------------------- fleet start

fn fleet(o: &Opts, t: &mut Table) -> Vec<String> {
    let n = o.fleet;
    eprintln!("bench: {n} agents started at once");
    let sc = scene(o, "fleet", n as i32, 10, 50, BOOKMARKS);
    let envs: Vec<Vec<(String, String)>> = (0..n).map(|i| sc.env(&format!("placeholder-{i}"), &[])).collect();
    sc.fake.clear_requests();
    let t0 = SystemTime::now();
    let i0 = Instant::now();
    let mut procs = Vec::with_capacity(n);
    for (i, env) in envs.iter().enumerate() {
        procs.push(spawn(o, &format!("fleet-{i}"), &o.selfdestruct, &[], env));
    }
    let spawn_time = i0.elapsed();
    let pods_path = format!("/api/v1/namespaces/{NS}/pods");
    let done = sc.fake.wait_for(
        |c| c.count_requests(|r| r.path == "/api/v1/nodes" && !r.watch) >= n && c.count_requests(|r| r.path == pods_path && !r.watch) >= n,
        Duration::from_secs(60),
    );
    let reqs = sc.fake.requests();
    let firsts = |pred: &dyn Fn(&RecordedRequest) -> bool| -> Vec<f64> {
        let mut v: Vec<f64> = reqs
            .iter()
            .filter(|r| pred(r))
            .map(|r| r.time.duration_since(t0).unwrap_or_default().as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let gets = firsts(&|r: &RecordedRequest| r.method == "GET" && r.path.starts_with(&format!("{pods_path}/")));
    let lists = firsts(&|r: &RecordedRequest| r.path == "/api/v1/nodes" && !r.watch);
    let mut out = Vec::new();
    let max_in = |v: &[f64], w: f64| -> usize {
        let mut best = 0;
        let mut j = 0;
        for i in 0..v.len() {
            while v[i] - v[j] > w {
                j += 1;
            }
            best = best.max(i - j + 1);
        }
        best
    };
    let spread = |v: &[f64]| v.last().copied().unwrap_or(0.0) - v.first().copied().unwrap_or(0.0);
    t.section(&format!("{n} agents started at once (spawned within {}; 10 nodes)", ms(spawn_time)));
    t.row(
        "first request (GET own pod): spread first..last",
        format!("{:.2} s", spread(&gets)),
        dash(),
        dash(),
        "jittered",
        None,
    );
    t.row(
        "node LIST: spread first..last",
        format!("{:.2} s", spread(&lists)),
        dash(),
        dash(),
        "",
        None,
    );
    // A start-up jitter over 0..N s (N >= 10) puts at most about a tenth of the fleet in any second.
    let burst = max_in(&lists, 1.0);
    t.row(
        "node LIST: most in any 1 s window",
        format!("{burst} of {n}"),
        dash(),
        dash(),
        "<= 10% (jitter 0..N s)",
        Some(burst * 10 <= n),
    );
    let hist = |v: &[f64]| -> String {
        let b = 0.1;
        let mut buckets: BTreeMap<u64, usize> = BTreeMap::new();
        for x in v {
            *buckets.entry((x / b) as u64).or_default() += 1;
        }
        buckets.iter().map(|(k, c)| format!("{:.1}s:{c}", *k as f64 * b)).collect::<Vec<_>>().join(" ")
    };
    out.push(format!("{n} agents, first GET own pod per 100 ms after the first spawn: {}", hist(&gets)));
    out.push(format!("{n} agents, node LIST per 100 ms after the first spawn: {}", hist(&lists)));
    if !done {
        out.push(format!("(only {} GETs and {} node LISTs arrived within 60 s)", gets.len(), lists.len()));
    }
    for p in procs {
        unsafe { libc::kill(p.pid() as i32, libc::SIGTERM) };
        drop(p);
    }
    out
}
