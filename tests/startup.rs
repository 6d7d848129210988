//! Start-up outcomes (what a user meets first) and the kubeconfigs
//! kube accepts: a `KUBECONFIG` (or `--kubeconfig`) that cannot be used exits 2
//! with one message naming the file and the cause, before anything else; no API
//! access at all is a plain pause; a flow-style kubeconfig, an `exec` user and a
//! `proxy-url` work against the fake API server.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::cluster::{NS, Scene};
use common::*;

/// Settings that move the own pod at once on its lifetime.
const MOVE_NOW: &[(&str, &str)] = &[
    ("SELFDESTRUCT_MIN_LIFETIME", "1s"),
    ("SELFDESTRUCT_MAX_LIFETIME", "1s"),
    ("SELFDESTRUCT_MOVE_TO_NEW_NODES", "false"),
    ("SELFDESTRUCT_SIBLING_SELECTOR", "none"),
];

fn unusable(name: &str, text: Option<&str>) -> std::path::PathBuf {
    let dir = tempdir("startup");
    let path = dir.join(name);
    if let Some(t) = text {
        std::fs::write(&path, t).expect("write kubeconfig");
    }
    path
}

const CLUSTER: &str = "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n";
const USER: &str = "users:\n- name: u\n  user:\n    token: t\n";

#[test]
fn a_kubeconfig_that_cannot_be_used_exits_2_naming_the_file_and_the_cause() {
    let no_context =
        format!("{CLUSTER}{USER}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n");
    let missing_cluster = format!(
        "{USER}contexts:\n- name: x\n  context:\n    cluster: nope\n    user: u\ncurrent-context: x\n"
    );
    let missing_user = format!(
        "{CLUSTER}contexts:\n- name: x\n  context:\n    cluster: c\n    user: nobody\ncurrent-context: x\n"
    );
    let cases = [
        ("missing", None, "No such file"),
        ("invalid", Some("clusters: [1\n"), "kubeconfig"),
        ("no-context", Some(no_context.as_str()), "context"),
        ("missing-cluster", Some(missing_cluster.as_str()), "nope"),
        ("missing-user", Some(missing_user.as_str()), "nobody"),
    ];
    for (name, text, cause) in cases {
        let path = unusable(name, text);
        let shown = path.display().to_string();
        for via_flag in [false, true] {
            let env = [
                ("KUBECONFIG", shown.as_str()),
                ("SELFDESTRUCT_LOG_LEVEL", "debug"),
            ];
            let (code, out) = if via_flag {
                run_to_exit(&["--kubeconfig", &shown], &env[1..])
            } else {
                run_to_exit(&[], &env)
            };
            assert_eq!(code, Some(2), "{name} (flag: {via_flag}):\n{out}");
            let lines: Vec<&str> = out
                .lines()
                .filter(|l| l.starts_with("selfdestruct:"))
                .collect();
            assert_eq!(lines.len(), 1, "one message ({name}):\n{out}");
            let line = lines[0];
            assert!(line.contains(&shown), "names the file ({name}): {line}");
            assert!(
                line.contains(cause),
                "names the cause {cause:?} ({name}): {line}"
            );
            let var = if via_flag {
                "--kubeconfig"
            } else {
                "KUBECONFIG"
            };
            assert!(line.contains(var), "names {var} ({name}): {line}");
            // Before anything else: no log line of the agent (the runtime, the signal handlers).
            assert!(
                !out.contains("running as a plain pause") && !out.contains("selfdestruct started"),
                "{out}"
            );
        }
    }
}

#[test]
fn the_wrapper_and_the_gate_exit_2_too_and_run_nothing() {
    let path = unusable("missing", None);
    let shown = path.display().to_string();
    let marker = tempdir("wrapped").join("ran");
    let touch = format!("touch {}", marker.display());
    let (code, out) = run_to_exit(&["--", "sh", "-c", &touch], &[("KUBECONFIG", &shown)]);
    assert_eq!(code, Some(2), "{out}");
    assert!(!marker.exists(), "the command was not started");
    let (code, out) = run_program_to_exit(
        &gate_bin(),
        &[],
        &[("KUBECONFIG", &shown), ("NODE_NAME", "node-a")],
    );
    assert_eq!(code, Some(2), "{out}");
}

/// Settings that take any text, so no value of theirs is invalid (with the reason).
const ANY_TEXT: &[(&str, &str)] = &[
    (
        "SELFDESTRUCT_PODINFO_DIR",
        "a folder, read only if present (a missing one is a fallback, not an error)",
    ),
    (
        "SELFDESTRUCT_SERVICE_ACCOUNT_DIR",
        "a folder, read only if present (a missing one means no in-cluster access)",
    ),
];

/// Arguments that are no setting of their own environment variable (with the reason).
const NO_VARIABLE: &[(&str, &str)] = &[
    (
        "kubeconfig",
        "KUBECONFIG is a list of files that kube reads itself; --kubeconfig names one file",
    ),
    ("exec", "the wrapped command after --"),
    (
        "settings",
        "check-settings' VARIABLE=VALUE arguments, not a setting",
    ),
];

/// Bad values of every typed setting, with a word of the accepted form that the
/// message must name.
#[rustfmt::skip]
const BAD: &[(&str, &[(&str, &str)])] = &[
    ("SELFDESTRUCT_MIN_LIFETIME", &[("abc", "duration such as"), ("30", "duration such as")]),
    ("SELFDESTRUCT_MAX_LIFETIME", &[("-1h", "duration such as"), ("500000000y", "at most 100 years")]),
    ("SELFDESTRUCT_MODE", &[("destroy", "expected evict or delete")]),
    ("SELFDESTRUCT_DRY_RUN", &[("maybe", "expected true or false"), ("", "true or false")]),
    ("SELFDESTRUCT_GRACE_PERIOD", &[("soon", "duration such as")]),
    ("SELFDESTRUCT_FORCE_DELETE", &[("perhaps", "expected true or false")]),
    ("SELFDESTRUCT_LOG_FORMAT", &[("xml", "expected text or json")]),
    ("SELFDESTRUCT_LOG_LEVEL", &[("loud", "error, warn, info, debug")]),
    ("POD_NAME", &[("Place holder/0", "DNS-1123 subdomain"), ("../nodes/node-a", "DNS-1123 subdomain")]),
    ("POD_NAMESPACE", &[("a.b", "DNS-1123 label"), ("Jhub", "DNS-1123 label")]),
    ("POD_UID", &[("a b", "metadata.uid")]),
    ("NODE_NAME", &[("n?x=1", "DNS-1123 subdomain")]),
    ("SELFDESTRUCT_MOVE_TO_NEW_NODES", &[("sometimes", "true or false"), ("", "true or false")]),
    ("SELFDESTRUCT_AVOID_DELETION_CANDIDATES", &[("maybe", "true or false"), ("", "true or false")]),
    ("SELFDESTRUCT_NODE_SELECTOR", &[("a in x", "label selector")]),
    ("SELFDESTRUCT_NODE_SETTLE", &[("1 fortnight", "duration such as"), ("", "duration such as")]),
    ("SELFDESTRUCT_REQUIRED_IMAGES", &[("Nginx:1", "image references"), ("-5s", "image references")]),
    ("SELFDESTRUCT_MOVE_JITTER", &[("x", "duration such as"), ("99999999999999h", "duration such as")]),
    ("SELFDESTRUCT_MAX_MOVES_PER_HOUR", &[("-3", "whole number"), ("many", "whole number"), ("5000000000", "whole number")]),
    ("SELFDESTRUCT_MIN_AGE", &[("old", "duration such as")]),
    ("SELFDESTRUCT_AVOID_DELETION_CANDIDATES", &[("often", "true or false"), ("", "true or false")]),
    ("SELFDESTRUCT_START_JITTER", &[("soon", "duration such as")]),
    ("SELFDESTRUCT_SIBLING_SELECTOR", &[("a=b,,", "label selector")]),
    ("SELFDESTRUCT_ON_EXIT", &[("restart", "expected exit or delete")]),
    ("SELFDESTRUCT_GATE_TAINT", &[("a b", "taint key"), ("k=v", "taint key")]),
    ("SELFDESTRUCT_GATE_TIMEOUT", &[("x", "duration such as")]),
    ("SELFDESTRUCT_GATE_POLL", &[("1", "duration such as")]),
    ("SELFDESTRUCT_GATE_WARM_LABEL", &[("a b", "label key"), ("k=v", "label key")]),
    ("SELFDESTRUCT_SCHEDULE_TARGET", &[("deployment/x", "statefulset/NAME"), ("sts/Bad_Name", "DNS-1123")]),
    ("SELFDESTRUCT_SCHEDULE_BASELINE", &[("Monday = 3", "is no day"), ("Mon 18:00-08:00 = 3", "must end after it starts")]),
    ("SELFDESTRUCT_SCHEDULE_CALENDAR", &[("ftp://x/y.ics", "webcal://")]),
    ("SELFDESTRUCT_SCHEDULE_TARGETS", &[("not json", "a JSON list such as")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_BY_MARGIN", &[("soon", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_LABEL", &[("Bad Label!", "label key such as")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_IMAGES", &[("not an image", "image references such as")]),
    ("SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS", &[("nowhere", "address such as"), (":99999", "address such as")]),
    ("SELFDESTRUCT_SCHEDULE_TIME_ZONE", &[("Mars/Olympus", "IANA time zone")]),
    ("SELFDESTRUCT_SCHEDULE_LEAD_TIME", &[("10", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_MIN", &[("-1", "whole number"), ("100001", "whole number")]),
    ("SELFDESTRUCT_SCHEDULE_MAX", &[("lots", "whole number")]),
    ("SELFDESTRUCT_SCHEDULE_REFRESH", &[("x", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_TICK", &[("soon", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_CALENDAR_TIMEOUT", &[("x", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_TARGETS", &[("[{", "a JSON list"), (r#"[{"name": "Gpu", "target": "sts/g"}]"#, "DNS label")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_BY_MARGIN", &[("soon", "duration such as")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_LABEL", &[("a b", "label key")]),
    ("SELFDESTRUCT_SCHEDULE_WARM_IMAGES", &[("Nginx:1", "image references")]),
    ("SELFDESTRUCT_SCHEDULE_METRICS_ADDRESS", &[("nine", "an address such as :9090")]),
];

/// Walks clap's own description of the command line of each binary of the image (the
/// agent's with its `check-settings`, the node gate's, the schedule's): every setting has
/// an environment variable, and each bad value of it (in `BAD`, which must list every
/// setting that does not take any text) exits 2 naming the variable, its flag, the value
/// and the form.
#[test]
fn every_setting_has_a_variable_and_a_bad_value_in_it_exits_2_naming_it() {
    use clap::CommandFactory;
    let mut cli = selfdestruct::Cli::command();
    cli.build();
    let mut gate = selfdestruct::node_gate::Cli::command();
    gate.build();
    let mut schedule = selfdestruct_schedule::controller::Cli::command();
    schedule.build();
    let (gate_bin, schedule_bin) = (gate_bin(), workspace_binary("selfdestruct-schedule"));
    let schedule_bin = schedule_bin.to_str().expect("utf-8 path");
    let check = cli
        .find_subcommand("check-settings")
        .expect("check-settings");
    let commands = [
        (bin(), &cli),
        (bin(), check),
        (gate_bin.as_str(), &gate),
        (schedule_bin, &schedule),
    ];
    let (mut settings, mut exempt) = (Vec::new(), Vec::new());
    for (program, command) in commands {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let flag = arg.get_long().unwrap_or_default();
            match arg.get_env().and_then(|v| v.to_str()) {
                _ if id == "help" || id == "version" => {}
                None if NO_VARIABLE.iter().any(|(n, _)| *n == id) => exempt.push(id),
                None => panic!("the setting {id} has no environment variable"),
                Some(var) if ANY_TEXT.iter().any(|(n, _)| *n == var) => exempt.push(var),
                Some(var) => settings.push((program, var, flag)),
            }
        }
    }
    // The agent's shared settings come again in `check-settings`: walked once.
    settings.sort();
    settings.dedup();
    let mut listed: Vec<&str> = NO_VARIABLE
        .iter()
        .chain(ANY_TEXT)
        .map(|(n, _)| *n)
        .collect();
    listed.sort();
    exempt.sort();
    // The shared settings are walked in each binary.
    exempt.dedup();
    assert_eq!(exempt, listed, "a listed argument is gone");
    assert!(settings.len() >= 27, "{settings:?}");
    // A valid configuration stops at this kubeconfig (exit 2 naming the file).
    let kubeconfig = unusable("missing", None);
    for (program, var, flag) in settings {
        let Some((_, values)) = BAD.iter().find(|(v, _)| *v == var) else {
            panic!(
                "{var}: list its bad values in BAD, or the reason it takes any text in ANY_TEXT"
            );
        };
        let args = ["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
        for (bad, form) in *values {
            let mut env = vec![(var, *bad)];
            if program != bin() && var != "NODE_NAME" {
                env.push(("NODE_NAME", "node-a"));
            }
            let (code, out) = run_program_to_exit(program, &args, &env);
            let head = format!("invalid {var} (--{flag}) = {bad:?}: expected ");
            let named = out.contains(&head) && out.contains(form);
            assert!(
                code == Some(2) && named,
                "{program} {var}={bad:?}: exit {code:?}: {out}"
            );
        }
    }
    // Any text is accepted by the settings in ANY_TEXT, so the binary goes on to the
    // kubeconfig (the next configuration error, exit 2 naming the file).
    for (var, _) in ANY_TEXT {
        let args = ["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
        let (code, out) = run_to_exit(&args, &[(var, "not valid? \u{7}")]);
        assert!(
            code == Some(2) && !out.contains(&format!("invalid {var}")),
            "{out}"
        );
    }
}

/// Policy values beyond `BAD` that the two binaries must agree on: "0 is off", one
/// bound alone, the range rule, the 100-year cap, unset.
#[rustfmt::skip]
const POLICY_CASES: &[&[(&str, &str)]] = &[
    &[("min-lifetime", "1h"), ("max-lifetime", "0")], &[("min-lifetime", "0"), ("max-lifetime", "0")],
    &[("max-lifetime", "2h")], &[("min-lifetime", "2h"), ("max-lifetime", "1h")],
    &[("max-lifetime", "99y")], &[("max-lifetime", "101y")], &[("min-lifetime", "")],
    &[("max-moves-per-hour", " 0 ")], &[("move-to-new-nodes", "off")], &[("node-settle", "0")],
];

/// Another package's binary `name` (`simulate`, `selfdestruct-schedule`) of this build
/// profile, beside the agent's: built here if stale.
fn workspace_binary(name: &str) -> std::path::PathBuf {
    let agent = std::path::Path::new(bin());
    let mut build = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()));
    // `--workspace`: the features of the workspace's own build, so that one is not redone.
    build.args(["build", "--quiet", "--workspace", "--bin", name]);
    if agent.parent().and_then(|d| d.file_name()) == Some("release".as_ref()) {
        build.arg("--release");
    }
    assert!(
        build.status().is_ok_and(|s| s.success()),
        "cargo build --bin {name}"
    );
    agent.with_file_name(name)
}

/// The policy settings are declared once (`selfdestruct_decision::settings`): every
/// bad value of `BAD` and every case of `POLICY_CASES` is accepted by `simulate` if
/// and only if the agent accepts it, and a refusal names the flag in both.
#[test]
fn simulate_and_the_agent_accept_the_same_policy_settings() {
    use clap::Args;
    let policy =
        selfdestruct_decision::settings::PolicySettings::augment_args(clap::Command::new("p"));
    let mut cases: Vec<Vec<(&str, &str)>> = POLICY_CASES.iter().map(|c| c.to_vec()).collect();
    for arg in policy.get_arguments() {
        let var = arg.get_env().and_then(|v| v.to_str()).expect("a variable");
        let flag = arg.get_long().expect("a flag");
        let (_, values) = BAD
            .iter()
            .find(|(v, _)| *v == var)
            .expect("bad values in BAD");
        cases.extend(values.iter().map(|(bad, _)| vec![(flag, *bad)]));
    }
    assert!(cases.len() >= 20, "{cases:?}");
    let simulate = workspace_binary("simulate");
    let kubeconfig = unusable("missing", None);
    let kubeconfig = kubeconfig.to_str().expect("utf-8 path");
    for case in cases {
        let flags: Vec<String> = case.iter().map(|(f, v)| format!("--{f}={v}")).collect();
        // The agent stops at the kubeconfig once its settings are valid.
        let mut args = vec!["--kubeconfig", kubeconfig];
        args.extend(flags.iter().map(String::as_str));
        let (code, agent) = run_to_exit(&args, &[]);
        assert_eq!(code, Some(2), "{case:?}: {agent}");
        let agent_accepts = !agent.contains("invalid ");
        assert!(
            !agent_accepts || agent.contains(kubeconfig),
            "{case:?}: {agent}"
        );
        // `simulate` stops at --sweep-step 0 (checked after the policy) once they are.
        let out = std::process::Command::new(&simulate)
            .args(&flags)
            .args(["--sweep-step", "0"])
            .env_clear()
            .output()
            .expect("run simulate");
        let sim = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{case:?}: {sim}");
        let sim_accepts = sim.contains("--sweep-step must be at least 1");
        assert!(sim_accepts || sim.contains("invalid "), "{case:?}: {sim}");
        assert_eq!(
            agent_accepts, sim_accepts,
            "{case:?}:\nagent: {agent}\nsimulate: {sim}"
        );
        if !agent_accepts {
            let named = |text: &str| case.iter().any(|(f, _)| text.contains(&format!("--{f})")));
            assert!(named(&agent), "{case:?}: {agent}");
            let named_sim = |text: &str| case.iter().any(|(f, _)| text.contains(&format!("--{f}")));
            assert!(named_sim(&sim), "{case:?}: {sim}");
        }
    }
}

#[test]
fn no_api_access_at_all_is_a_plain_pause() {
    let home = tempdir("no-api");
    let sa = home.join("sa-without-ca");
    std::fs::create_dir_all(&sa).expect("mkdir");
    std::fs::write(sa.join("token"), "t").expect("token");
    let sa_without_ca = sa.display().to_string();
    // Neither KUBECONFIG nor ~/.kube/config nor KUBERNETES_SERVICE_HOST; and in
    // a cluster without a token (automountServiceAccountToken: false).
    for env in [
        vec![("POD_NAME", "p"), ("POD_NAMESPACE", NS)],
        vec![
            ("POD_NAME", "p"),
            ("POD_NAMESPACE", NS),
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "1"),
        ],
        // An empty KUBECONFIG names no file.
        vec![("POD_NAME", "p"), ("POD_NAMESPACE", NS), ("KUBECONFIG", "")],
        // A token but no cluster CA: no client can be built (one error line).
        vec![
            ("POD_NAME", "p"),
            ("POD_NAMESPACE", NS),
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "1"),
            ("SELFDESTRUCT_SERVICE_ACCOUNT_DIR", sa_without_ca.as_str()),
        ],
    ] {
        let mut p = Proc::spawn(command(bin(), &[], &env, &home));
        assert!(
            p.wait_for_log("running as a plain pause", Duration::from_secs(10)),
            "{env:?}:\n{}",
            p.log()
        );
        assert!(p.is_running());
        if env
            .iter()
            .any(|(k, _)| *k == "SELFDESTRUCT_SERVICE_ACCOUNT_DIR")
        {
            assert!(
                p.log().contains("ca.crt"),
                "names the missing CA:\n{}",
                p.log()
            );
        }
        let (status, _) = p.terminate();
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
    }
}

/// A scene whose one placeholder the fake knows by `token`, and its uid.
fn scene_with_token(token: &str) -> (Scene, String) {
    let s = Scene::placeholders(1);
    let uid = s.uid("placeholder-0");
    s.fake.add_token(token);
    (s, uid)
}

/// Writes `kubeconfig` and checks that the agent, given it as `KUBECONFIG`, evicts
/// its own pod (and nothing else), then exits 0 on SIGTERM.
fn evicts_itself_with(s: &Scene, uid: &str, name: &str, kubeconfig: &str) {
    let path = s.home.join(name);
    std::fs::write(&path, kubeconfig).expect("write kubeconfig");
    let kc = path.display().to_string();
    let mut env = vec![("KUBECONFIG", kc.as_str())];
    env.extend_from_slice(MOVE_NOW);
    let mut agent = s.agent("placeholder-0", &env);
    let ev = s
        .fake
        .wait_for_request(|r| r.is_eviction(), Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{name}: no eviction:\n{}", agent.log()));
    // The fake knows only the scene's token: any other is 401.
    assert_eq!(ev.status, 201, "{name}: {}", agent.log());
    s.assert_only_own_mutations(&[("placeholder-0", uid)]);
    let (status, _) = agent.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{name}");
}

#[test]
fn a_flow_style_kubeconfig_works() {
    let token = "flow-token";
    let (s, uid) = scene_with_token(token);
    let kubeconfig = format!(
        "clusters: [{{name: t, cluster: {{server: \"{}\"}}}}]\n\
         users: [{{name: u, user: {{token: {token}}}}}]\n\
         contexts: [{{name: c, context: {{cluster: t, user: u, namespace: {NS}}}}}]\n\
         current-context: c\n",
        s.fake.url()
    );
    evicts_itself_with(&s, &uid, "flow-kubeconfig", &kubeconfig);
}

#[test]
fn a_kubeconfig_with_a_proxy_url_works() {
    // The server's name cannot be resolved: only a request through the proxy arrives.
    let token = "proxied-token";
    let (s, uid) = scene_with_token(token);
    // A CONNECT proxy (what kube's client asks a proxy for) that tunnels to the fake.
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("addr"));
    let fake_addr = s.fake.addr();
    let tunnels = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = tunnels.clone();
    std::thread::spawn(move || {
        for client in proxy.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || tunnel(client, fake_addr, &counted));
        }
    });
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: t\n  cluster:\n    server: http://apiserver.selfdestruct.invalid:6443\n    proxy-url: {proxy_url}\n\
         users:\n- name: u\n  user:\n    token: {token}\n\
         contexts:\n- name: c\n  context:\n    cluster: t\n    user: u\n    namespace: {NS}\n\
         current-context: c\n"
    );
    evicts_itself_with(&s, &uid, "proxy-kubeconfig", &kubeconfig);
    assert!(tunnels.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

/// An `exec` user; and one whose plugin runs on after it printed its credential (issue 46,
/// item 19: it was killed at 30 s, its credential dropped, and run again: no request was
/// ever made), which is used at once and killed.
#[test]
fn a_kubeconfig_with_an_exec_user_works() {
    let token = "token-from-exec-plugin";
    for runs_on in [false, true] {
        let (s, uid) = scene_with_token(token);
        let script = s.home.join("credential-plugin.sh");
        let pidfile = s.home.join("plugin.pid");
        let then = if runs_on { "exec sleep 120\n" } else { "" };
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho $$ > {}\ncat <<EOF\n{{\"apiVersion\": \"client.authentication.k8s.io/v1\", \
                 \"kind\": \"ExecCredential\", \"status\": {{\"token\": \"{token}\"}}}}\nEOF\n{then}",
                pidfile.display()
            ),
        )
        .expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let kubeconfig = kubeconfig_with_user(&s.fake.url(), &exec_user(&script), NS);
        evicts_itself_with(&s, &uid, "exec-kubeconfig", &kubeconfig);
        let gone = wait_until(Duration::from_secs(10), || process_gone(&pidfile));
        kill_plugin(&pidfile);
        assert!(gone, "runs on: {runs_on}: the plugin was left running");
    }
}

/// Whether the process whose pid is in `pidfile` has ended (gone, or a zombie).
fn process_gone(pidfile: &std::path::Path) -> bool {
    let pid = std::fs::read_to_string(pidfile).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    stat.rsplit_once(')')
        .is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// Answers one `CONNECT` with 200 and pipes the connection to `to` both ways.
fn tunnel(
    mut client: std::net::TcpStream,
    to: std::net::SocketAddr,
    tunnels: &std::sync::atomic::AtomicUsize,
) {
    use std::io::{BufRead, BufReader, Write};
    let mut reader = BufReader::new(client.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || !line.starts_with("CONNECT ") {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let Ok(upstream) = std::net::TcpStream::connect(to) else {
        return;
    };
    tunnels.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
    let (mut up_read, mut up_write) = (upstream.try_clone().expect("clone"), upstream);
    let mut down_write = client;
    let pump = std::thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut up_write);
        let _ = up_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut up_read, &mut down_write);
    let _ = down_write.shutdown(std::net::Shutdown::Write);
    let _ = pump.join();
}

/// The identity settings of a pod `p` in the scene's namespace.
const POD: &[(&str, &str)] = &[("POD_NAME", "p"), ("POD_NAMESPACE", NS)];

#[test]
fn a_hanging_exec_plugin_does_not_hold_sigterm() {
    // Issue 27, item 1: the plugin ran on the thread that serves the signals.
    let home = tempdir("hanging-plugin");
    let (kubeconfig, pidfile) = hanging_plugin_kubeconfig(&home);
    let kc = kubeconfig.display().to_string();
    let mut env = vec![("KUBECONFIG", kc.as_str())];
    env.extend_from_slice(POD);
    let mut p = Proc::spawn(command(bin(), &[], &env, &home));
    let started = wait_until(Duration::from_secs(20), || plugin_started(&pidfile));
    let (status, _) = p.terminate();
    // Issue 46, item 19: the plugin was left running (not PID 1: no namespace ends it).
    let gone = wait_until(Duration::from_secs(10), || process_gone(&pidfile));
    kill_plugin(&pidfile);
    assert!(started, "the plugin never ran:\n{}", p.log());
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
    assert!(gone, "the plugin runs on after SIGTERM");
}

/// Whether process `pid` catches `sig` (its handler is installed), from /proc.
fn catches(pid: u32, sig: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

#[test]
fn sigterm_while_the_kubeconfig_is_a_fifo_nobody_writes_exits_0() {
    // Issue 27, item 11: the kubeconfig was read before the handlers were installed.
    use std::os::unix::fs::OpenOptionsExt;
    for args in [&[][..], &["--", "sleep", "60"][..]] {
        let home = tempdir("fifo");
        let fifo = home.join("kubeconfig");
        mkfifo(&fifo);
        let shown = fifo.display().to_string();
        let mut p = Proc::spawn(command(bin(), args, &[("KUBECONFIG", &shown)], &home));
        // It reads the FIFO: a writer can open it without waiting. The writer
        // stays open and writes nothing, so the read goes on.
        let mut writer = None;
        let reading = wait_until(Duration::from_secs(10), || {
            writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .ok();
            writer.is_some()
        });
        assert!(reading, "{args:?}: the FIFO was never opened:\n{}", p.log());
        assert!(
            catches(p.pid(), libc::SIGTERM),
            "{args:?}: reads the kubeconfig before it handles SIGTERM:\n{}",
            p.log()
        );
        let (status, _) = p.terminate();
        drop(writer);
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{args:?}:\n{}",
            p.log()
        );
    }
}

#[test]
fn an_endless_kubeconfig_is_read_only_up_to_the_cap_and_exits_2() {
    // Issue 27, item 11: KUBECONFIG=/dev/zero grew to 5 GB in 4 s.
    use std::os::unix::process::CommandExt;
    let home = tempdir("dev-zero");
    let mut cmd = command(bin(), &[], &[("KUBECONFIG", "/dev/zero")], &home);
    // Bounded memory: with 1 GiB of address space, reading /dev/zero to its end fails.
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut p = Proc::spawn(cmd);
    let status = p
        .wait_exit(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("no exit:\n{}", p.log()));
    assert_eq!(status.code(), Some(2), "{}", p.log());
    let log = p.log();
    let line = log
        .lines()
        .find(|l| l.starts_with("selfdestruct:"))
        .unwrap_or_else(|| panic!("no message:\n{log}"));
    assert!(
        line.contains("KUBECONFIG=/dev/zero") && line.contains("larger than"),
        "names the variable and the cause: {line}"
    );
}

#[test]
fn a_token_file_with_a_trailing_newline_works() {
    // Issue 27, item 12: kube sent the newline, and every request failed.
    let token = "token-from-a-file";
    let (s, uid) = scene_with_token(token);
    let file = s.home.join("token-with-newline");
    std::fs::write(&file, format!("{token}\n")).expect("write");
    let user = format!("tokenFile: {}", file.display());
    let kubeconfig = kubeconfig_with_user(&s.fake.url(), &user, NS);
    evicts_itself_with(&s, &uid, "token-file-kubeconfig", &kubeconfig);
}

#[test]
fn a_failing_exec_plugin_is_one_json_line_with_json_logging() {
    // Issue 27, nit: the plugin's standard error went to ours as raw lines.
    let home = tempdir("plugin-stderr");
    let script = home.join("failing-plugin.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'plugin: first line' >&2\necho 'plugin: second line' >&2\nexit 1\n",
    )
    .expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // ~/.kube/config: not named, so a client that cannot be built is a plain pause.
    std::fs::create_dir_all(home.join(".kube")).expect("mkdir");
    std::fs::write(
        home.join(".kube").join("config"),
        format!(
            "clusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:1\n\
             users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n\
             \x20     command: {}\n\
             contexts:\n- name: c\n  context:\n    cluster: t\n    user: u\n\
             current-context: c\n",
            script.display()
        ),
    )
    .expect("write");
    let mut env = vec![("SELFDESTRUCT_LOG_FORMAT", "json")];
    env.extend_from_slice(POD);
    let mut p = Proc::spawn(command(bin(), &[], &env, &home));
    assert!(
        p.wait_for_log("running as a plain pause", Duration::from_secs(20)),
        "{}",
        p.log()
    );
    let (status, _) = p.terminate();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
    let log = p.log();
    for line in log.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "not a JSON line: {line:?}\n{log}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.contains("plugin: first line") && l.contains("plugin: second line")),
        "the plugin's error is in the log:\n{log}"
    );
}

/// A kubeconfig for a server never reached whose user's `exec` plugin is `script`
/// (shell text), written into `home`.
fn plugin_kubeconfig(home: &std::path::Path, script: &str) -> std::path::PathBuf {
    let plugin = home.join("plugin.sh");
    std::fs::write(&plugin, format!("#!/bin/sh\n{script}")).expect("write the plugin");
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let kubeconfig = home.join("plugin-kubeconfig");
    let text = kubeconfig_with_user("http://127.0.0.1:1", &exec_user(&plugin), NS);
    std::fs::write(&kubeconfig, text).expect("write the kubeconfig");
    kubeconfig
}

/// The binary with `KUBECONFIG` and 1 GiB of address space: reading anything
/// endless to its end fails there.
fn with_1_gib(kubeconfig: &str, home: &std::path::Path) -> Proc {
    use std::os::unix::process::CommandExt;
    let mut env = vec![("KUBECONFIG", kubeconfig)];
    env.extend_from_slice(POD);
    let mut cmd = command(bin(), &[], &env, home);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Proc::spawn(cmd)
}

/// The one `selfdestruct:` line of a run that exited 2.
fn exits_2(p: &mut Proc) -> String {
    let status = p
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no exit:\n{}", p.log()));
    assert_eq!(status.code(), Some(2), "{}", p.log());
    let log = p.log();
    log.lines()
        .find(|l| l.starts_with("selfdestruct:"))
        .unwrap_or_else(|| panic!("no message:\n{log}"))
        .to_string()
}

#[test]
fn an_exec_plugin_that_prints_endlessly_is_read_only_up_to_the_cap() {
    // Issue 32, item 7: an endless printer reached 526 MiB, then the process aborted.
    let home = tempdir("endless-plugin");
    let kubeconfig = plugin_kubeconfig(&home, "exec cat /dev/zero\n");
    let mut p = with_1_gib(&kubeconfig.display().to_string(), &home);
    let line = exits_2(&mut p);
    assert!(
        line.contains("printed more than 1048576 bytes"),
        "names the cause: {line}"
    );
}

#[test]
fn a_token_file_linked_to_dev_zero_is_read_only_up_to_the_cap() {
    // Issue 32, item 6: kube read it without a limit, to 1 GiB, then out of memory.
    let home = tempdir("token-dev-zero");
    let token = home.join("token");
    std::os::unix::fs::symlink("/dev/zero", &token).expect("symlink");
    let kubeconfig = home.join("kubeconfig");
    let user = format!("tokenFile: {}", token.display());
    std::fs::write(
        &kubeconfig,
        kubeconfig_with_user("http://127.0.0.1:1", &user, NS),
    )
    .expect("write");
    let mut p = with_1_gib(&kubeconfig.display().to_string(), &home);
    let line = exits_2(&mut p);
    assert!(
        line.contains(&token.display().to_string()) && line.contains("larger than 65536 bytes"),
        "names the file and the cause: {line}"
    );
}

#[test]
fn an_exec_plugin_whose_child_holds_its_output_is_waited_for_saying_why() {
    // Issue 32, item 12: the build waited for the time limit without a word. The answer
    // is not whole yet (a whole one counts at once: `a_kubeconfig_with_an_exec_user_works`).
    let home = tempdir("plugin-grandchild");
    let child_pidfile = home.join("child.pid");
    let script = format!(
        "sleep 120 &\necho $! > {}\n\
         echo '{{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": \"ExecCredential\",'\n\
         exit 0\n",
        child_pidfile.display()
    );
    let kubeconfig = plugin_kubeconfig(&home, &script);
    let kc = kubeconfig.display().to_string();
    let mut env = vec![("KUBECONFIG", kc.as_str())];
    env.extend_from_slice(POD);
    let mut p = Proc::spawn(command(bin(), &[], &env, &home));
    let told = p.wait_for_log("a process it started holds it", Duration::from_secs(20));
    let (status, _) = p.terminate();
    kill_plugin(&child_pidfile);
    assert!(told, "{}", p.log());
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
}

#[test]
fn sigterm_while_the_token_file_is_a_fifo_nobody_writes_exits_0() {
    // Issue 32, item 5: the token file was read on the thread that serves the signals.
    use std::os::unix::fs::OpenOptionsExt;
    let home = tempdir("token-fifo");
    let fifo = home.join("token");
    mkfifo(&fifo);
    let kubeconfig = home.join("kubeconfig");
    let user = format!("tokenFile: {}", fifo.display());
    std::fs::write(
        &kubeconfig,
        kubeconfig_with_user("http://127.0.0.1:1", &user, NS),
    )
    .expect("write");
    let kc = kubeconfig.display().to_string();
    let mut env = vec![("KUBECONFIG", kc.as_str())];
    env.extend_from_slice(POD);
    let mut p = Proc::spawn(command(bin(), &[], &env, &home));
    // It reads the FIFO once a writer can open it without waiting; the writer
    // writes nothing, so the read goes on.
    let mut writer = None;
    let reading = wait_until(Duration::from_secs(10), || {
        writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .ok();
        writer.is_some()
    });
    assert!(reading, "the token FIFO was never opened:\n{}", p.log());
    let (status, _) = p.terminate();
    drop(writer);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", p.log());
}
