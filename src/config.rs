//! Configuration: every setting is an environment variable and a flag. Values are
//! taken as text and validated here, so an invalid one fails with exit code 2 and a
//! message naming the variable, the value and the accepted form.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use selfdestruct_decision::Policy;
use selfdestruct_decision::duration;
use selfdestruct_decision::images;
use selfdestruct_decision::selector::Selector;

/// The command line: the agent's flags, or a subcommand.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "selfdestruct",
    version,
    about = "A pause container for Kubernetes placeholder pods that evicts its own pod \
             when moving it helps: on a jittered lifetime, or when a newer node is ready.",
    long_about = None,
    after_help = "Durations: 90s, 15m, 1h30m, 0 (off). Without API access it behaves like the \
                  pause container. Exit codes: 0 on SIGTERM/SIGINT, 2 on invalid configuration.\n\n\
                  Entrypoint wrapper: `selfdestruct [OPTIONS] -- CMD [ARGS...]` runs CMD as its child, \
                  forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it, reaps zombies as PID 1, \
                  exits with the child's code (128+N if killed by signal N) and applies the same \
                  lifetime and new-node triggers to the pod around it."
)]
pub struct Cli {
    /// Another mode of the same binary.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The agent's settings.
    #[command(flatten)]
    pub agent: Args,
    /// Entrypoint wrapper: the command (after `--`) to run as the child
    #[arg(last = true, value_name = "CMD")]
    pub exec: Vec<std::ffi::OsString>,
}

/// Subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Image-puller mode: remove a startup taint from the own node once its images are pulled
    NodeGate(GateArgs),
}

/// Settings of `selfdestruct node-gate`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// Own node (Downward API spec.nodeName)
    #[arg(long, env = "NODE_NAME", value_name = "NODE")]
    pub node_name: Option<String>,
    /// Taint to remove from the own node
    #[arg(long, env = "SELFDESTRUCT_GATE_TAINT", value_name = "KEY",
          default_value = crate::node_gate::DEFAULT_TAINT)]
    pub gate_taint: String,
    /// Open the gate anyway after this long (fail-open)
    #[arg(
        long,
        env = "SELFDESTRUCT_GATE_TIMEOUT",
        value_name = "DURATION",
        default_value = "15m"
    )]
    pub gate_timeout: String,
    /// How often to re-read the node while waiting for images
    #[arg(
        long,
        env = "SELFDESTRUCT_GATE_POLL",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub gate_poll: String,
    /// Comma-separated images the node must report before the gate opens [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES")]
    pub required_images: Option<String>,
}

impl GateArgs {
    /// Validates the gate's settings.
    pub fn to_config(&self) -> Result<crate::node_gate::GateConfig, ConfigError> {
        let node_name = non_empty(&self.node_name)
            .ok_or_else(|| {
                err(
                    "NODE_NAME",
                    "--node-name",
                    "",
                    "the own node's name from the Downward API (valueFrom: fieldRef: fieldPath: spec.nodeName)",
                )
            })?
            .to_string();
        check_name("NODE_NAME", "--node-name", &node_name, Name::Subdomain)?;
        let taint_key = self.gate_taint.trim().to_string();
        Selector::parse(&taint_key)
            .ok()
            .filter(|s| matches!(s.0.as_slice(), [selfdestruct_decision::selector::Requirement::Exists(_)]))
            .ok_or_else(|| {
                err(
                    "SELFDESTRUCT_GATE_TAINT",
                    "--gate-taint",
                    &self.gate_taint,
                    "a taint key such as startup-taint.cluster-autoscaler.kubernetes.io/images-pending",
                )
            })?;
        let required_images = images::parse_list(non_empty(&self.required_images).unwrap_or(""))
            .map_err(|e| {
                err(
                    "SELFDESTRUCT_REQUIRED_IMAGES",
                    "--required-images",
                    self.required_images.as_deref().unwrap_or_default(),
                    format!("comma-separated image references ({e})"),
                )
            })?;
        Ok(crate::node_gate::GateConfig {
            node_name,
            taint_key,
            required_images,
            timeout: parse_duration(
                "SELFDESTRUCT_GATE_TIMEOUT",
                "--gate-timeout",
                &self.gate_timeout,
            )?,
            poll: parse_duration("SELFDESTRUCT_GATE_POLL", "--gate-poll", &self.gate_poll)?
                .max(Duration::from_secs(1)),
        })
    }
}

/// The agent's flags, each backed by an environment variable.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// Shortest lifetime, counted from the pod's start [0 or unset: no timer]
    #[arg(long, env = "SELFDESTRUCT_MIN_LIFETIME", value_name = "DURATION")]
    pub min_lifetime: Option<String>,
    /// Longest lifetime; the lifetime is drawn uniformly from [min, max]
    #[arg(long, env = "SELFDESTRUCT_MAX_LIFETIME", value_name = "DURATION")]
    pub max_lifetime: Option<String>,
    /// How to remove the own pod: evict (honours PodDisruptionBudgets) or delete
    #[arg(
        long,
        env = "SELFDESTRUCT_MODE",
        value_name = "evict|delete",
        default_value = "evict"
    )]
    pub mode: String,
    /// Log decisions but never delete or evict anything
    #[arg(long, env = "SELFDESTRUCT_DRY_RUN", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false")]
    pub dry_run: String,
    /// Grace period of the deletion, rounded up to whole seconds, at least 1s
    /// [default: the pod's terminationGracePeriodSeconds]
    #[arg(long, env = "SELFDESTRUCT_GRACE_PERIOD", value_name = "DURATION")]
    pub grace_period: Option<String>,
    /// Let SELFDESTRUCT_GRACE_PERIOD=0 force-delete the pod (the StatefulSet may then start
    /// its successor while this container still runs)
    #[arg(long, env = "SELFDESTRUCT_FORCE_DELETE", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false")]
    pub force_delete: String,
    /// Log format
    #[arg(
        long,
        env = "SELFDESTRUCT_LOG_FORMAT",
        value_name = "text|json",
        default_value = "text"
    )]
    pub log_format: String,
    /// Log level: error, warn, info, debug, trace or off [default: RUST_LOG, else info]
    #[arg(long, env = "SELFDESTRUCT_LOG_LEVEL", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Own pod name (Downward API metadata.name) [fallback: podinfo dir, hostname]
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,
    /// Own namespace (Downward API metadata.namespace) [fallback: podinfo dir, service account]
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Own pod uid (Downward API metadata.uid) [fallback: podinfo dir, one GET of the pod]
    #[arg(long, env = "POD_UID", value_name = "UID")]
    pub pod_uid: Option<String>,
    /// Own node (Downward API spec.nodeName) [fallback: the pod's spec.nodeName]
    #[arg(long, env = "NODE_NAME", value_name = "NODE")]
    pub node_name: Option<String>,
    /// downwardAPI volume folder with files name, namespace, uid
    #[arg(
        long,
        env = "SELFDESTRUCT_PODINFO_DIR",
        value_name = "DIR",
        default_value = "/etc/podinfo"
    )]
    pub podinfo_dir: PathBuf,
    /// Service-account folder (token, namespace) of in-cluster access
    #[arg(
        long,
        env = "SELFDESTRUCT_SERVICE_ACCOUNT_DIR",
        value_name = "DIR",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount",
        hide = true
    )]
    pub service_account_dir: PathBuf,
    /// Kubeconfig file [default: KUBECONFIG, else ~/.kube/config, else the in-cluster account]
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Move when a newer node is Ready (needs read access to Nodes)
    #[arg(
        long,
        env = "SELFDESTRUCT_MOVE_TO_NEW_NODES",
        value_name = "BOOL",
        default_value = "true"
    )]
    pub move_to_new_nodes: String,
    /// Label selector of the nodes to watch [default: all nodes]
    #[arg(long, env = "SELFDESTRUCT_NODE_SELECTOR", value_name = "SELECTOR")]
    pub node_selector: Option<String>,
    /// How long a new node must be Ready before it counts
    #[arg(
        long,
        env = "SELFDESTRUCT_NODE_SETTLE",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub node_settle: String,
    /// Comma-separated images a new node must hold before it counts [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES")]
    pub required_images: Option<String>,
    /// Random delay before acting on a trigger, re-checked after it
    #[arg(
        long,
        env = "SELFDESTRUCT_MOVE_JITTER",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub move_jitter: String,
    /// Cap on own eviction attempts per hour [0: no cap]
    #[arg(
        long,
        env = "SELFDESTRUCT_MAX_MOVES_PER_HOUR",
        value_name = "N",
        default_value = "12"
    )]
    pub max_moves_per_hour: String,
    /// No move while the own pod is younger than this
    #[arg(
        long,
        env = "SELFDESTRUCT_MIN_AGE",
        value_name = "DURATION",
        default_value = "2m"
    )]
    pub min_age: String,
    /// Random delay before the first node and sibling list, so a fleet that starts
    /// together does not list together (costs nothing below the 2m min age)
    #[arg(
        long,
        env = "SELFDESTRUCT_START_JITTER",
        value_name = "DURATION",
        default_value = "30s"
    )]
    pub start_jitter: String,
    /// Label selector of sibling placeholders ("none" disables) [default: the own pod's
    /// app.kubernetes.io/name and app.kubernetes.io/instance labels]
    #[arg(long, env = "SELFDESTRUCT_SIBLING_SELECTOR", value_name = "SELECTOR")]
    pub sibling_selector: Option<String>,
    /// Entrypoint wrapper only: when CMD exits, exit with its code (exit), or first delete the
    /// own pod (uid precondition) so its controller re-creates it elsewhere (delete)
    #[arg(
        long,
        env = "SELFDESTRUCT_ON_EXIT",
        value_name = "exit|delete",
        default_value = "exit"
    )]
    pub on_exit: String,
}

/// What the entrypoint wrapper does when its child exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnExit {
    /// Exit with the child's code (the kubelet restarts the container in place).
    Exit,
    /// Delete the own pod (uid precondition), then exit with the child's code.
    Delete,
}

/// How the own pod is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// POST pods/{name}/eviction: honours PodDisruptionBudgets.
    Evict,
    /// DELETE pods/{name}.
    Delete,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// How sibling placeholders are found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Siblings {
    /// Derive from the own pod's labels.
    FromLabels,
    /// This selector.
    Selector(Selector),
    /// Sibling awareness off.
    Off,
}

/// What the Downward API and the environment say about the own pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentityHints {
    /// POD_NAME
    pub pod_name: Option<String>,
    /// POD_NAMESPACE
    pub namespace: Option<String>,
    /// POD_UID
    pub uid: Option<String>,
    /// NODE_NAME
    pub node_name: Option<String>,
    /// downwardAPI volume folder
    pub podinfo_dir: PathBuf,
    /// service-account folder
    pub service_account_dir: PathBuf,
    /// `--kubeconfig`
    pub kubeconfig: Option<PathBuf>,
}

/// The validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The decision policy.
    pub policy: Policy,
    /// Evict or delete.
    pub mode: Mode,
    /// Log only.
    pub dry_run: bool,
    /// Deletion grace period.
    pub grace_period: Option<Duration>,
    /// Log format.
    pub log_format: LogFormat,
    /// Log level.
    pub log_level: tracing::level_filters::LevelFilter,
    /// Own pod identity hints.
    pub identity: IdentityHints,
    /// Which nodes to watch.
    pub node_selector: Selector,
    /// Which pods are siblings.
    pub siblings: Siblings,
    /// Random delay before the first list of nodes and siblings.
    pub start_jitter: Duration,
    /// Entrypoint wrapper: what to do when the child exits.
    pub on_exit: OnExit,
}

/// An invalid setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The environment variable.
    pub var: &'static str,
    /// The flag.
    pub flag: &'static str,
    /// The value given.
    pub value: String,
    /// The accepted form, and what was wrong.
    pub expected: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} ({}) = {:?}: expected {}",
            self.var, self.flag, self.value, self.expected
        )
    }
}

const DURATION_FORM: &str = "a duration such as 90s, 15m or 1h30m";

/// Which Kubernetes name rule a value follows.
#[derive(Clone, Copy)]
enum Name {
    /// DNS-1123 subdomain (pod and node names).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
}

fn check_name(
    var: &'static str,
    flag: &'static str,
    value: &str,
    rule: Name,
) -> Result<(), ConfigError> {
    let (ok, form) = match rule {
        Name::Subdomain => (
            crate::identity::is_dns1123_subdomain(value),
            "a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending \
             with a letter or digit, at most 253 characters (the Downward API value)",
        ),
        Name::Label => (
            crate::identity::is_dns1123_label(value),
            "a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a \
             letter or digit, at most 63 characters (the Downward API value)",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(err(var, flag, value, form))
    }
}

fn err(
    var: &'static str,
    flag: &'static str,
    value: &str,
    expected: impl Into<String>,
) -> ConfigError {
    ConfigError {
        var,
        flag,
        value: value.to_string(),
        expected: expected.into(),
    }
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The longest duration accepted anywhere (100 years): longer is a typo.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

fn parse_duration(
    var: &'static str,
    flag: &'static str,
    value: &str,
) -> Result<Duration, ConfigError> {
    let d = duration::parse(value)
        .map_err(|e| err(var, flag, value, format!("{DURATION_FORM} ({e})")))?;
    if d > MAX_DURATION {
        return Err(err(
            var,
            flag,
            value,
            format!("{DURATION_FORM}, at most 100 years"),
        ));
    }
    Ok(d)
}

/// The grace period as the API takes it: whole seconds, rounded up. For pods, 0 is a
/// force deletion (the object goes at once, the StatefulSet may start the successor
/// while this container still runs), so it is sent only with `force` (as kubectl
/// sends 1 for `--grace-period=0` without `--force`).
pub fn whole_grace_seconds(grace: Duration, force: bool) -> Duration {
    let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
    if secs == 0 && force {
        Duration::ZERO
    } else {
        Duration::from_secs(secs.max(1))
    }
}

fn parse_bool(var: &'static str, flag: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(err(var, flag, value, "true or false")),
    }
}

/// Parses a level name (`info`) or a `RUST_LOG`-style list (`warn,selfdestruct=debug`).
pub fn parse_level(value: &str) -> Option<tracing::level_filters::LevelFilter> {
    use tracing::level_filters::LevelFilter;
    let level = |s: &str| match s.trim().to_ascii_lowercase().as_str() {
        "off" => Some(LevelFilter::OFF),
        "error" => Some(LevelFilter::ERROR),
        "warn" | "warning" => Some(LevelFilter::WARN),
        "info" => Some(LevelFilter::INFO),
        "debug" => Some(LevelFilter::DEBUG),
        "trace" => Some(LevelFilter::TRACE),
        _ => None,
    };
    let mut found = None;
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((target, l)) if target.trim() == "selfdestruct" => return level(l),
            Some(_) => {}
            None => found = Some(level(part)?),
        }
    }
    found
}

impl Config {
    /// Validates the flags. `rust_log` is the `RUST_LOG` variable, used when no level is set.
    pub fn from_args(a: &Args, rust_log: Option<&str>) -> Result<Config, ConfigError> {
        const MIN: (&str, &str) = ("SELFDESTRUCT_MIN_LIFETIME", "--min-lifetime");
        const MAX: (&str, &str) = ("SELFDESTRUCT_MAX_LIFETIME", "--max-lifetime");
        let min = non_empty(&a.min_lifetime)
            .map(|v| parse_duration(MIN.0, MIN.1, v))
            .transpose()?;
        let max = non_empty(&a.max_lifetime)
            .map(|v| parse_duration(MAX.0, MAX.1, v))
            .transpose()?;
        let lifetime = match (min, max) {
            (None, None) => None,
            // SELFDESTRUCT_MAX_LIFETIME=0 turns the timer off, whatever the minimum.
            (_, Some(hi)) if hi.is_zero() => None,
            (Some(m), None) | (None, Some(m)) => Some((m, m)),
            (Some(lo), Some(hi)) if lo > hi => {
                return Err(err(
                    MIN.0,
                    MIN.1,
                    non_empty(&a.min_lifetime).unwrap_or_default(),
                    format!(
                        "at most SELFDESTRUCT_MAX_LIFETIME ({})",
                        non_empty(&a.max_lifetime).unwrap_or_default()
                    ),
                ));
            }
            (Some(lo), Some(hi)) => Some((lo, hi)),
        }
        .filter(|(_, hi)| !hi.is_zero());

        let mode = match a.mode.trim().to_ascii_lowercase().as_str() {
            "evict" | "eviction" => Mode::Evict,
            "delete" => Mode::Delete,
            _ => {
                return Err(err(
                    "SELFDESTRUCT_MODE",
                    "--mode",
                    &a.mode,
                    "evict or delete",
                ));
            }
        };
        let dry_run = parse_bool("SELFDESTRUCT_DRY_RUN", "--dry-run", &a.dry_run)?;
        let force_delete = parse_bool(
            "SELFDESTRUCT_FORCE_DELETE",
            "--force-delete",
            &a.force_delete,
        )?;
        let grace_period = non_empty(&a.grace_period)
            .map(|v| parse_duration("SELFDESTRUCT_GRACE_PERIOD", "--grace-period", v))
            .transpose()?
            .map(|g| whole_grace_seconds(g, force_delete));
        let log_format = match a.log_format.trim().to_ascii_lowercase().as_str() {
            "text" | "" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                return Err(err(
                    "SELFDESTRUCT_LOG_FORMAT",
                    "--log-format",
                    &a.log_format,
                    "text or json",
                ));
            }
        };
        let log_level = match non_empty(&a.log_level) {
            Some(v) => parse_level(v).ok_or_else(|| {
                err(
                    "SELFDESTRUCT_LOG_LEVEL",
                    "--log-level",
                    v,
                    "one of error, warn, info, debug, trace, off",
                )
            })?,
            None => rust_log
                .and_then(parse_level)
                .unwrap_or(tracing::level_filters::LevelFilter::INFO),
        };
        let move_to_new_nodes = parse_bool(
            "SELFDESTRUCT_MOVE_TO_NEW_NODES",
            "--move-to-new-nodes",
            &a.move_to_new_nodes,
        )?;
        let node_selector =
            Selector::parse(non_empty(&a.node_selector).unwrap_or("")).map_err(|e| {
                err(
                    "SELFDESTRUCT_NODE_SELECTOR",
                    "--node-selector",
                    a.node_selector.as_deref().unwrap_or_default(),
                    format!("a label selector such as pool=user,zone in (a,b) ({e})"),
                )
            })?;
        let node_settle =
            parse_duration("SELFDESTRUCT_NODE_SETTLE", "--node-settle", &a.node_settle)?;
        let required_images = images::parse_list(non_empty(&a.required_images).unwrap_or("")).map_err(|e| {
            err(
                "SELFDESTRUCT_REQUIRED_IMAGES",
                "--required-images",
                a.required_images.as_deref().unwrap_or_default(),
                format!("comma-separated image references such as quay.io/jupyter/scipy-notebook:2024-05-01 ({e})"),
            )
        })?;
        let move_jitter =
            parse_duration("SELFDESTRUCT_MOVE_JITTER", "--move-jitter", &a.move_jitter)?;
        let max_moves_per_hour = a.max_moves_per_hour.trim().parse::<u32>().map_err(|_| {
            err(
                "SELFDESTRUCT_MAX_MOVES_PER_HOUR",
                "--max-moves-per-hour",
                &a.max_moves_per_hour,
                "a whole number (0 for no cap)",
            )
        })?;
        let min_age = parse_duration("SELFDESTRUCT_MIN_AGE", "--min-age", &a.min_age)?;
        let start_jitter = parse_duration(
            "SELFDESTRUCT_START_JITTER",
            "--start-jitter",
            &a.start_jitter,
        )?;
        let siblings = match non_empty(&a.sibling_selector) {
            None => Siblings::FromLabels,
            Some(v) if v.eq_ignore_ascii_case("none") => Siblings::Off,
            Some(v) => Siblings::Selector(Selector::parse(v).map_err(|e| {
                err(
                    "SELFDESTRUCT_SIBLING_SELECTOR",
                    "--sibling-selector",
                    v,
                    format!("a label selector such as app.kubernetes.io/instance=placeholder, or none ({e})"),
                )
            })?),
        };
        for (var, flag, value, check) in [
            ("POD_NAME", "--pod-name", &a.pod_name, Name::Subdomain),
            (
                "POD_NAMESPACE",
                "--pod-namespace",
                &a.pod_namespace,
                Name::Label,
            ),
            ("NODE_NAME", "--node-name", &a.node_name, Name::Subdomain),
        ] {
            if let Some(v) = non_empty(value) {
                check_name(var, flag, v, check)?;
            }
        }
        if let Some(uid) = non_empty(&a.pod_uid) {
            if uid.chars().any(|c| c.is_whitespace() || c.is_control()) || uid.len() > 128 {
                return Err(err(
                    "POD_UID",
                    "--pod-uid",
                    uid,
                    "the pod's metadata.uid from the Downward API",
                ));
            }
        }
        let on_exit = match a.on_exit.trim().to_ascii_lowercase().as_str() {
            "exit" | "" => OnExit::Exit,
            "delete" => OnExit::Delete,
            _ => {
                return Err(err(
                    "SELFDESTRUCT_ON_EXIT",
                    "--on-exit",
                    &a.on_exit,
                    "exit or delete",
                ));
            }
        };
        let keep = |v: &Option<String>| non_empty(v).map(str::to_string);
        Ok(Config {
            policy: Policy {
                lifetime,
                move_to_new_nodes,
                node_settle,
                required_images,
                move_jitter,
                max_moves_per_hour,
                min_age,
            },
            mode,
            dry_run,
            grace_period,
            log_format,
            log_level,
            identity: IdentityHints {
                pod_name: keep(&a.pod_name),
                namespace: keep(&a.pod_namespace),
                uid: keep(&a.pod_uid),
                node_name: keep(&a.node_name),
                podinfo_dir: a.podinfo_dir.clone(),
                service_account_dir: a.service_account_dir.clone(),
                kubeconfig: a.kubeconfig.clone(),
            },
            node_selector,
            siblings,
            start_jitter,
            on_exit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> Result<Args, clap::Error> {
        let mut argv = vec!["selfdestruct".to_string()];
        for (flag, value) in pairs {
            argv.push(format!("--{flag}={value}"));
        }
        Cli::try_parse_from(argv).map(|c| c.agent)
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_args(&args(pairs).expect("flags parse"), None)
    }

    #[test]
    fn defaults_are_sane() {
        let c = parse(&[]).expect("defaults are valid");
        // The core's `Policy::default()` (which the simulator runs as "the agent's
        // defaults") is exactly what the flags' defaults give.
        assert_eq!(c.policy, selfdestruct_decision::Policy::default());
        assert_eq!(c.policy.lifetime, None);
        assert_eq!(c.mode, Mode::Evict);
        assert!(!c.dry_run);
        assert!(c.policy.move_to_new_nodes);
        assert_eq!(c.policy.node_settle, Duration::from_secs(10));
        assert_eq!(c.policy.move_jitter, Duration::from_secs(10));
        assert_eq!(c.policy.max_moves_per_hour, 12);
        assert_eq!(c.policy.min_age, Duration::from_secs(120));
        assert!(c.policy.required_images.is_empty());
        assert!(c.node_selector.is_empty());
        assert_eq!(c.siblings, Siblings::FromLabels);
        assert_eq!(c.log_format, LogFormat::Text);
        assert_eq!(c.log_level, tracing::level_filters::LevelFilter::INFO);
        assert_eq!(c.on_exit, OnExit::Exit);
    }

    #[test]
    fn wrapper_command_and_on_exit() {
        let cli = Cli::try_parse_from([
            "selfdestruct",
            "--max-lifetime=1h",
            "--on-exit=delete",
            "--",
            "sh",
            "-c",
            "exit 3",
            "--max-lifetime=2h",
        ])
        .expect("flags");
        assert_eq!(cli.exec, ["sh", "-c", "exit 3", "--max-lifetime=2h"]);
        let c = Config::from_args(&cli.agent, None).expect("valid");
        assert_eq!(c.on_exit, OnExit::Delete);
        assert_eq!(
            c.policy.lifetime,
            Some((Duration::from_secs(3600), Duration::from_secs(3600)))
        );
        let plain = Cli::try_parse_from(["selfdestruct", "--max-lifetime=1h"]).expect("flags");
        assert!(plain.exec.is_empty());
        let gate = Cli::try_parse_from(["selfdestruct", "node-gate", "--node-name=n"]);
        assert!(gate.expect("flags").exec.is_empty());
    }

    #[test]
    fn valid_forms() {
        let c = parse(&[
            ("min-lifetime", "1h"),
            ("max-lifetime", "1h30m"),
            ("mode", "delete"),
            ("dry-run", "true"),
            ("grace-period", "5s"),
            ("log-format", "json"),
            ("log-level", "debug"),
            ("node-selector", "pool=user,zone in (a,b)"),
            (
                "required-images",
                "jupyter/scipy-notebook:2024, quay.io/x/y:1",
            ),
            ("max-moves-per-hour", "0"),
            ("sibling-selector", "none"),
            ("move-to-new-nodes", "false"),
        ])
        .expect("valid");
        assert_eq!(
            c.policy.lifetime,
            Some((Duration::from_secs(3600), Duration::from_secs(5400)))
        );
        assert_eq!(c.mode, Mode::Delete);
        assert!(c.dry_run);
        assert_eq!(c.grace_period, Some(Duration::from_secs(5)));
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.policy.required_images.len(), 2);
        assert_eq!(c.siblings, Siblings::Off);
        assert!(!c.policy.move_to_new_nodes);
        // one bound alone fixes the lifetime; 0 disables it
        let fixed = parse(&[("max-lifetime", "2h")]).expect("valid");
        assert_eq!(
            fixed.policy.lifetime,
            Some((Duration::from_secs(7200), Duration::from_secs(7200)))
        );
        assert_eq!(
            parse(&[("min-lifetime", "0"), ("max-lifetime", "0")])
                .expect("valid")
                .policy
                .lifetime,
            None
        );
        assert_eq!(
            parse(&[("max-lifetime", "")])
                .expect("empty = unset")
                .policy
                .lifetime,
            None
        );
        // a bare --dry-run flag means true
        let bare = Cli::try_parse_from(["selfdestruct", "--dry-run"]).expect("flag");
        assert!(Config::from_args(&bare.agent, None).expect("valid").dry_run);
    }

    #[test]
    fn settings_nits() {
        // MAX_LIFETIME=0 is "off", whatever the minimum says.
        let off = parse(&[("min-lifetime", "1h"), ("max-lifetime", "0")]).expect("0 means off");
        assert_eq!(off.policy.lifetime, None);
        // `none` in any case turns sibling awareness off.
        for none in ["none", "NONE", "None"] {
            assert_eq!(
                parse(&[("sibling-selector", none)])
                    .expect("valid")
                    .siblings,
                Siblings::Off
            );
        }
        // Names from the Downward API.
        let c = parse(&[
            ("pod-name", "user-placeholder-3"),
            ("pod-namespace", "jhub"),
            ("node-name", "ip-10-0-0-1.ec2.internal"),
        ])
        .expect("valid names");
        assert_eq!(c.identity.pod_name.as_deref(), Some("user-placeholder-3"));
    }

    #[test]
    fn grace_period_is_whole_seconds_and_never_a_silent_force_delete() {
        let grace = |pairs: &[(&str, &str)]| parse(pairs).expect("valid").grace_period;
        assert_eq!(grace(&[]), None);
        for (value, want) in [
            ("0", 1),
            ("0s", 1),
            ("500ms", 1),
            ("1s", 1),
            ("1500ms", 2),
            ("30s", 30),
        ] {
            assert_eq!(
                grace(&[("grace-period", value)]),
                Some(Duration::from_secs(want)),
                "{value}"
            );
        }
        // 0 (a force deletion) only with the explicit opt-in.
        assert_eq!(
            grace(&[("grace-period", "0"), ("force-delete", "true")]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            grace(&[("grace-period", "500ms"), ("force-delete", "true")]),
            Some(Duration::from_secs(1)),
            "only an explicit 0 is 0"
        );
    }

    #[test]
    fn every_invalid_value_names_its_variable() {
        let table: &[(&str, &str, &str, &str)] = &[
            (
                "min-lifetime",
                "abc",
                "SELFDESTRUCT_MIN_LIFETIME",
                "duration",
            ),
            (
                "min-lifetime",
                "30",
                "SELFDESTRUCT_MIN_LIFETIME",
                "duration",
            ),
            (
                "max-lifetime",
                "-1h",
                "SELFDESTRUCT_MAX_LIFETIME",
                "duration",
            ),
            ("mode", "destroy", "SELFDESTRUCT_MODE", "evict or delete"),
            ("dry-run", "maybe", "SELFDESTRUCT_DRY_RUN", "true or false"),
            (
                "grace-period",
                "soon",
                "SELFDESTRUCT_GRACE_PERIOD",
                "duration",
            ),
            (
                "log-format",
                "xml",
                "SELFDESTRUCT_LOG_FORMAT",
                "text or json",
            ),
            ("log-level", "loud", "SELFDESTRUCT_LOG_LEVEL", "debug"),
            (
                "move-to-new-nodes",
                "sometimes",
                "SELFDESTRUCT_MOVE_TO_NEW_NODES",
                "true or false",
            ),
            (
                "node-selector",
                "a in x",
                "SELFDESTRUCT_NODE_SELECTOR",
                "label selector",
            ),
            (
                "node-settle",
                "1 fortnight",
                "SELFDESTRUCT_NODE_SETTLE",
                "duration",
            ),
            (
                "required-images",
                "Nginx:1",
                "SELFDESTRUCT_REQUIRED_IMAGES",
                "image references",
            ),
            ("move-jitter", "x", "SELFDESTRUCT_MOVE_JITTER", "duration"),
            (
                "max-moves-per-hour",
                "-3",
                "SELFDESTRUCT_MAX_MOVES_PER_HOUR",
                "whole number",
            ),
            (
                "max-moves-per-hour",
                "many",
                "SELFDESTRUCT_MAX_MOVES_PER_HOUR",
                "whole number",
            ),
            ("min-age", "old", "SELFDESTRUCT_MIN_AGE", "duration"),
            (
                "start-jitter",
                "soon",
                "SELFDESTRUCT_START_JITTER",
                "duration",
            ),
            (
                "max-lifetime",
                "500000000y",
                "SELFDESTRUCT_MAX_LIFETIME",
                "at most 100 years",
            ),
            (
                "move-jitter",
                "99999999999999h",
                "SELFDESTRUCT_MOVE_JITTER",
                "duration",
            ),
            (
                "sibling-selector",
                "a=b,,",
                "SELFDESTRUCT_SIBLING_SELECTOR",
                "label selector",
            ),
            ("pod-uid", "a b", "POD_UID", "metadata.uid"),
            (
                "pod-name",
                "Place holder/0",
                "POD_NAME",
                "DNS-1123 subdomain",
            ),
            (
                "pod-name",
                "../nodes/node-a",
                "POD_NAME",
                "DNS-1123 subdomain",
            ),
            ("pod-namespace", "a.b", "POD_NAMESPACE", "DNS-1123 label"),
            ("pod-namespace", "Jhub", "POD_NAMESPACE", "DNS-1123 label"),
            ("node-name", "n?x=1", "NODE_NAME", "DNS-1123 subdomain"),
            (
                "move-to-new-nodes",
                "",
                "SELFDESTRUCT_MOVE_TO_NEW_NODES",
                "true or false",
            ),
            ("dry-run", "", "SELFDESTRUCT_DRY_RUN", "true or false"),
            (
                "force-delete",
                "perhaps",
                "SELFDESTRUCT_FORCE_DELETE",
                "true or false",
            ),
            (
                "on-exit",
                "restart",
                "SELFDESTRUCT_ON_EXIT",
                "exit or delete",
            ),
        ];
        for (flag, value, var, form) in table {
            let e = parse(&[(flag, value)]).expect_err(&format!("{flag}={value} must fail"));
            assert_eq!(e.var, *var);
            let msg = e.to_string();
            assert!(
                msg.contains(var) && msg.contains(form) && msg.contains(&format!("--{flag}")),
                "{msg}"
            );
        }
        let e = parse(&[("min-lifetime", "2h"), ("max-lifetime", "1h")]).expect_err("min > max");
        assert!(
            e.to_string().contains("SELFDESTRUCT_MIN_LIFETIME")
                && e.to_string().contains("SELFDESTRUCT_MAX_LIFETIME")
        );
    }

    #[test]
    fn gate_settings() {
        let cli =
            Cli::try_parse_from(["selfdestruct", "node-gate", "--node-name=n1"]).expect("flags");
        let Some(Command::NodeGate(g)) = cli.command else {
            panic!("node-gate subcommand")
        };
        let c = g.to_config().expect("valid");
        assert_eq!(c.taint_key, crate::node_gate::DEFAULT_TAINT);
        assert_eq!(c.timeout, Duration::from_secs(900));
        let bad: &[(&[&str], &str)] = &[
            (&["--node-name="], "NODE_NAME"),
            (
                &["--node-name=n", "--gate-taint=a b"],
                "SELFDESTRUCT_GATE_TAINT",
            ),
            (
                &["--node-name=n", "--gate-taint=k=v"],
                "SELFDESTRUCT_GATE_TAINT",
            ),
            (
                &["--node-name=n", "--gate-timeout=x"],
                "SELFDESTRUCT_GATE_TIMEOUT",
            ),
            (
                &["--node-name=n", "--gate-poll=1"],
                "SELFDESTRUCT_GATE_POLL",
            ),
            (
                &["--node-name=n", "--required-images=A"],
                "SELFDESTRUCT_REQUIRED_IMAGES",
            ),
        ];
        for (flags, var) in bad {
            let mut argv = vec!["selfdestruct", "node-gate"];
            argv.extend_from_slice(flags);
            let Some(Command::NodeGate(g)) = Cli::try_parse_from(argv).expect("flags").command
            else {
                panic!("node-gate subcommand")
            };
            let e = g.to_config().expect_err("invalid");
            assert_eq!(e.var, *var, "{flags:?}");
        }
    }

    #[test]
    fn log_levels_from_rust_log() {
        use tracing::level_filters::LevelFilter;
        assert_eq!(parse_level("debug"), Some(LevelFilter::DEBUG));
        assert_eq!(
            parse_level("warn,selfdestruct=trace"),
            Some(LevelFilter::TRACE)
        );
        assert_eq!(parse_level("kube=debug"), None);
        assert_eq!(parse_level("verbose"), None);
        let a = args(&[]).expect("flags");
        assert_eq!(
            Config::from_args(&a, Some("error"))
                .expect("valid")
                .log_level,
            LevelFilter::ERROR
        );
        assert_eq!(
            Config::from_args(&a, Some("garbage"))
                .expect("valid")
                .log_level,
            LevelFilter::INFO
        );
    }
}
