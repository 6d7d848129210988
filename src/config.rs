//! Configuration: every setting is an environment variable and a flag, typed by clap.
//! Each value goes through a `Setting` parser, so an invalid one fails with exit code 2
//! and a message naming the variable, the flag, the value and the accepted form.
//! [`Config::from_args`] adds what clap cannot say: the lifetime range, the grace
//! period's force opt-in and the `RUST_LOG` fallback.
//!
//! A setting that may be unset is typed `std::option::Option<T>` (the spelling with
//! which clap's derive leaves the whole type to the parser; `std::vec::Vec` likewise)
//! with a hidden empty default: its parser sees every value and reads an empty one (a
//! chart's unset value) as unset.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{BoolishValueParser, EnumValueParser, RangedU64ValueParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use tracing::level_filters::LevelFilter;

use selfdestruct_decision::Policy;
use selfdestruct_decision::duration;
use selfdestruct_decision::images::{self, ImageRef};
use selfdestruct_decision::selector::{Requirement, Selector};

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
    NodeGate(GateConfig),
}

/// Settings of `selfdestruct node-gate`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct GateConfig {
    /// Own node (Downward API spec.nodeName)
    // Required: its parser refuses the hidden empty default, so a missing NODE_NAME is
    // reported like an invalid one, naming the variable and the form.
    #[arg(long, env = "NODE_NAME", value_name = "NODE", default_value = "",
          hide_default_value = true, value_parser = Setting::new(gate_node_name))]
    pub node_name: String,
    /// Taint to remove from the own node
    #[arg(long = "gate-taint", env = "SELFDESTRUCT_GATE_TAINT", value_name = "KEY",
          default_value = crate::node_gate::DEFAULT_TAINT, value_parser = Setting::new(taint_key))]
    pub taint_key: String,
    /// Open the gate anyway after this long (fail-open)
    #[arg(long = "gate-timeout", env = "SELFDESTRUCT_GATE_TIMEOUT", value_name = "DURATION",
          default_value = "15m", value_parser = Setting::new(duration))]
    pub timeout: Duration,
    /// How often to re-read the node while waiting for images (at least 1s)
    #[arg(long = "gate-poll", env = "SELFDESTRUCT_GATE_POLL", value_name = "DURATION",
          default_value = "10s", value_parser = Setting::new(poll_interval))]
    pub poll: Duration,
    /// Comma-separated images the node must report before the gate opens [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES", default_value = "",
          hide_default_value = true, value_parser = Setting::new(image_list))]
    pub required_images: std::vec::Vec<ImageRef>,
}

/// The agent's flags, each backed by an environment variable.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// Shortest lifetime, counted from the pod's start [0 or unset: no timer]
    #[arg(long, env = "SELFDESTRUCT_MIN_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(duration)))]
    pub min_lifetime: std::option::Option<Duration>,
    /// Longest lifetime; the lifetime is drawn uniformly from [min, max]
    #[arg(long, env = "SELFDESTRUCT_MAX_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(duration)))]
    pub max_lifetime: std::option::Option<Duration>,
    /// How to remove the own pod: evict (honours PodDisruptionBudgets) or delete
    #[arg(long, env = "SELFDESTRUCT_MODE", value_name = "evict|delete", default_value = "evict",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting::new(EnumValueParser::<Mode>::new()))]
    pub mode: Mode,
    /// Log decisions but never delete or evict anything
    #[arg(long, env = "SELFDESTRUCT_DRY_RUN", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting::new(BoolishValueParser::new()))]
    pub dry_run: bool,
    /// Grace period of the deletion, rounded up to whole seconds, at least 1s
    /// [default: the pod's terminationGracePeriodSeconds]
    #[arg(long, env = "SELFDESTRUCT_GRACE_PERIOD", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(duration)))]
    pub grace_period: std::option::Option<Duration>,
    /// Let SELFDESTRUCT_GRACE_PERIOD=0 force-delete the pod (the StatefulSet may then start
    /// its successor while this container still runs)
    #[arg(long, env = "SELFDESTRUCT_FORCE_DELETE", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting::new(BoolishValueParser::new()))]
    pub force_delete: bool,
    /// Log format
    #[arg(long, env = "SELFDESTRUCT_LOG_FORMAT", value_name = "text|json", default_value = "text",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting::new(EnumValueParser::<LogFormat>::new()))]
    pub log_format: LogFormat,
    /// Log level: error, warn, info, debug, trace or off [default: RUST_LOG, else info]
    #[arg(long, env = "SELFDESTRUCT_LOG_LEVEL", value_name = "LEVEL", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(log_level)))]
    pub log_level: std::option::Option<LevelFilter>,
    /// The own pod's identity settings.
    #[command(flatten)]
    pub identity: IdentityHints,
    /// Move when a newer node is Ready (needs read access to Nodes)
    #[arg(long, env = "SELFDESTRUCT_MOVE_TO_NEW_NODES", value_name = "BOOL",
          default_value = "true", hide_possible_values = true, action = clap::ArgAction::Set,
          value_parser = Setting::new(BoolishValueParser::new()))]
    pub move_to_new_nodes: bool,
    /// Label selector of the nodes to watch [default: all nodes]
    #[arg(long, env = "SELFDESTRUCT_NODE_SELECTOR", value_name = "SELECTOR", default_value = "",
          hide_default_value = true, value_parser = Setting::new(node_selector))]
    pub node_selector: Selector,
    /// How long a new node must be Ready before it counts
    #[arg(long, env = "SELFDESTRUCT_NODE_SETTLE", value_name = "DURATION",
          default_value = "10s", value_parser = Setting::new(duration))]
    pub node_settle: Duration,
    /// Comma-separated images a new node must hold before it counts [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES", default_value = "",
          hide_default_value = true, value_parser = Setting::new(image_list))]
    pub required_images: std::vec::Vec<ImageRef>,
    /// Random delay before acting on a trigger, re-checked after it
    #[arg(long, env = "SELFDESTRUCT_MOVE_JITTER", value_name = "DURATION",
          default_value = "10s", value_parser = Setting::new(duration))]
    pub move_jitter: Duration,
    /// Cap on own eviction attempts per hour [0: no cap]
    #[arg(long, env = "SELFDESTRUCT_MAX_MOVES_PER_HOUR", value_name = "N", default_value = "12",
          value_parser = Setting::new(RangedU64ValueParser::<u32>::new())
              .form("a whole number (0 for no cap)"))]
    pub max_moves_per_hour: u32,
    /// No move while the own pod is younger than this
    #[arg(long, env = "SELFDESTRUCT_MIN_AGE", value_name = "DURATION",
          default_value = "2m", value_parser = Setting::new(duration))]
    pub min_age: Duration,
    /// Random delay before the first node and sibling list, so a fleet that starts
    /// together does not list together (costs nothing below the 2m min age)
    #[arg(long, env = "SELFDESTRUCT_START_JITTER", value_name = "DURATION",
          default_value = "30s", value_parser = Setting::new(duration))]
    pub start_jitter: Duration,
    /// Label selector of sibling placeholders ("none" disables) [default: the own pod's
    /// app.kubernetes.io/name and app.kubernetes.io/instance labels]
    #[arg(long, env = "SELFDESTRUCT_SIBLING_SELECTOR", value_name = "SELECTOR",
          default_value = "", hide_default_value = true, value_parser = Setting::new(siblings))]
    pub sibling_selector: Siblings,
    /// Entrypoint wrapper only: when CMD exits, exit with its code (exit), or first delete the
    /// own pod (uid precondition) so its controller re-creates it elsewhere (delete)
    #[arg(long, env = "SELFDESTRUCT_ON_EXIT", value_name = "exit|delete", default_value = "exit",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting::new(EnumValueParser::<OnExit>::new()))]
    pub on_exit: OnExit,
}

/// What the entrypoint wrapper does when its child exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnExit {
    /// Exit with the child's code (the kubelet restarts the container in place).
    #[value(alias = "")]
    Exit,
    /// Delete the own pod (uid precondition), then exit with the child's code.
    Delete,
}

/// How the own pod is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// POST pods/{name}/eviction: honours PodDisruptionBudgets.
    #[value(alias = "eviction")]
    Evict,
    /// DELETE pods/{name}.
    Delete,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[value(alias = "")]
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
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentityHints {
    /// Own pod name (Downward API metadata.name) [fallback: podinfo dir, hostname]
    #[arg(long = "pod-name", env = "POD_NAME", value_name = "NAME", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(subdomain)))]
    pub pod_name: std::option::Option<String>,
    /// Own namespace (Downward API metadata.namespace) [fallback: podinfo dir, service account]
    #[arg(long = "pod-namespace", env = "POD_NAMESPACE", value_name = "NAMESPACE",
          default_value = "", hide_default_value = true,
          value_parser = Setting::new(unset_or(label)))]
    pub namespace: std::option::Option<String>,
    /// Own pod uid (Downward API metadata.uid) [fallback: podinfo dir, one GET of the pod]
    #[arg(long = "pod-uid", env = "POD_UID", value_name = "UID", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(uid)))]
    pub uid: std::option::Option<String>,
    /// Own node (Downward API spec.nodeName) [fallback: the pod's spec.nodeName]
    #[arg(long, env = "NODE_NAME", value_name = "NODE", default_value = "",
          hide_default_value = true, value_parser = Setting::new(unset_or(subdomain)))]
    pub node_name: std::option::Option<String>,
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
        hide = true,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount"
    )]
    pub service_account_dir: PathBuf,
    /// Kubeconfig file [default: KUBECONFIG, else ~/.kube/config, else the in-cluster account]
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// The validated configuration: what the settings say together, and the settings as given.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The decision policy (the lifetime range and the node trigger's settings).
    pub policy: Policy,
    /// The deletion grace period as sent: whole seconds, 0 only with `--force-delete`.
    pub grace_period: Option<Duration>,
    /// The log level: the setting, else `RUST_LOG`, else info.
    pub log_level: LevelFilter,
    /// Every setting as given.
    pub args: Args,
}

/// An invalid setting: its name (`VARIABLE (--flag)`, or the flag alone), the value
/// given and the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {setting} = {value:?}: expected {expected}")]
pub struct ConfigError {
    /// The environment variable and the flag.
    pub setting: String,
    /// The value given.
    pub value: String,
    /// The accepted form, and what was wrong.
    pub expected: String,
}

/// The parser of every typed setting: trims the value and parses it with `P`; a value
/// `P` refuses fails naming the variable, the flag, the value and the accepted form
/// (`form`, else its possible values, else the reason the parser gives).
#[derive(Clone)]
struct Setting<P> {
    parser: P,
    form: &'static str,
}

impl<P: TypedValueParser> Setting<P> {
    fn new(parser: P) -> Self {
        Setting { parser, form: "" }
    }

    fn form(self, form: &'static str) -> Self {
        Setting { form, ..self }
    }
}

impl<P: TypedValueParser> TypedValueParser for Setting<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<P::Value, clap::Error> {
        let parsed = match value.to_str() {
            Some(v) => self.parser.parse_ref(cmd, arg, OsStr::new(v.trim())),
            None => Err(clap::Error::new(clap::error::ErrorKind::InvalidUtf8)),
        };
        parsed.map_err(|e| {
            let choices: Vec<String> = self
                .parser
                .possible_values()
                .into_iter()
                .flatten()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            let expected = match (self.form, choices.as_slice(), std::error::Error::source(&e)) {
                ("", [rest @ .., last], _) if !rest.is_empty() => {
                    format!("{} or {last}", rest.join(", "))
                }
                ("", _, Some(why)) => why.to_string(),
                ("", _, None) => "UTF-8 text".to_string(),
                (form, _, _) => form.to_string(),
            };
            let flag = arg.and_then(clap::Arg::get_long).unwrap_or_default();
            let error = ConfigError {
                setting: match arg.and_then(clap::Arg::get_env) {
                    Some(var) => format!("{} (--{flag})", var.to_string_lossy()),
                    None => format!("--{flag}"),
                },
                value: value.to_string_lossy().into_owned(),
                expected,
            };
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{error}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        self.parser.possible_values()
    }
}

/// The longest duration accepted anywhere (100 years): longer is a typo.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

const DURATION_FORM: &str = "a duration such as 90s, 15m or 1h30m";

/// A duration of at most [`MAX_DURATION`].
fn duration(value: &str) -> Result<Duration, String> {
    match duration::parse(value) {
        Ok(d) if d > MAX_DURATION => Err(format!("{DURATION_FORM}, at most 100 years")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{DURATION_FORM} ({e})")),
    }
}

/// A duration, raised to at least 1s.
fn poll_interval(value: &str) -> Result<Duration, String> {
    duration(value).map(|d| d.max(Duration::from_secs(1)))
}

/// `parse`, or unset if the value is empty.
fn unset_or<T>(
    parse: fn(&str) -> Result<T, String>,
) -> impl Fn(&str) -> Result<Option<T>, String> + Clone + Send + Sync + 'static
where
    T: 'static,
{
    move |value| match value {
        "" => Ok(None),
        v => parse(v).map(Some),
    }
}

fn log_level(value: &str) -> Result<LevelFilter, String> {
    parse_level(value).ok_or_else(|| "one of error, warn, info, debug, trace, off".into())
}

/// `value` if it passes `valid`, else what is expected.
fn checked(valid: bool, value: &str, expected: &str) -> Result<String, String> {
    valid
        .then(|| value.to_string())
        .ok_or_else(|| expected.to_string())
}

fn subdomain(value: &str) -> Result<String, String> {
    let expected = "a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and \
                    ending with a letter or digit, at most 253 characters (the Downward API value)";
    checked(
        crate::identity::is_dns1123_subdomain(value),
        value,
        expected,
    )
}

fn label(value: &str) -> Result<String, String> {
    let expected = "a DNS-1123 label: lower-case letters, digits and '-', starting and ending \
                    with a letter or digit, at most 63 characters (the Downward API value)";
    checked(crate::identity::is_dns1123_label(value), value, expected)
}

fn uid(value: &str) -> Result<String, String> {
    let valid = value.len() <= 128 && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    checked(valid, value, "the pod's metadata.uid from the Downward API")
}

/// The node-gate's own node: required.
fn gate_node_name(value: &str) -> Result<String, String> {
    match value {
        "" => Err("the own node's name from the Downward API \
                   (valueFrom: fieldRef: fieldPath: spec.nodeName)"
            .into()),
        v => subdomain(v),
    }
}

fn taint_key(value: &str) -> Result<String, String> {
    let key = Selector::parse(value).is_ok_and(|s| matches!(s.0[..], [Requirement::Exists(_)]));
    let expected =
        "a taint key such as startup-taint.cluster-autoscaler.kubernetes.io/images-pending";
    checked(key, value, expected)
}

fn image_list(value: &str) -> Result<Vec<ImageRef>, String> {
    images::parse_list(value).map_err(|e| {
        format!("comma-separated image references such as quay.io/jupyter/scipy-notebook:2024-05-01 ({e})")
    })
}

fn node_selector(value: &str) -> Result<Selector, String> {
    Selector::parse(value)
        .map_err(|e| format!("a label selector such as pool=user,zone in (a,b) ({e})"))
}

fn siblings(value: &str) -> Result<Siblings, String> {
    match value {
        "" => Ok(Siblings::FromLabels),
        v if v.eq_ignore_ascii_case("none") => Ok(Siblings::Off),
        v => Selector::parse(v).map(Siblings::Selector).map_err(|e| {
            format!(
                "a label selector such as app.kubernetes.io/instance=placeholder, or none ({e})"
            )
        }),
    }
}

/// The grace period as the API takes it: whole seconds, rounded up. For pods, 0 is a
/// force deletion (the object goes at once, the StatefulSet may start the successor
/// while this container still runs), so it is sent only with `force` (as kubectl
/// sends 1 for `--grace-period=0` without `--force`).
pub(crate) fn whole_grace_seconds(grace: Duration, force: bool) -> Duration {
    let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
    if secs == 0 && force {
        Duration::ZERO
    } else {
        Duration::from_secs(secs.max(1))
    }
}

/// Parses a level name (`info`) or a `RUST_LOG`-style list (`warn,selfdestruct=debug`).
pub fn parse_level(value: &str) -> Option<LevelFilter> {
    let mut found = None;
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("selfdestruct", level)) => return level.trim().parse().ok(),
            Some(_) => {}
            None => found = Some(part.parse().ok()?),
        }
    }
    found
}

impl Config {
    /// Adds what the flags cannot say alone: the lifetime range (`MAX_LIFETIME=0` is off,
    /// one bound alone fixes it), the grace period's force opt-in and, without a log
    /// level, `rust_log` (the `RUST_LOG` variable).
    pub fn from_args(a: &Args, rust_log: Option<&str>) -> Result<Config, ConfigError> {
        let lifetime = match (a.min_lifetime, a.max_lifetime) {
            (None, None) => None,
            (_, Some(hi)) if hi.is_zero() => None,
            (Some(m), None) | (None, Some(m)) => Some((m, m)),
            (Some(lo), Some(hi)) if lo > hi => {
                return Err(ConfigError {
                    setting: "SELFDESTRUCT_MIN_LIFETIME (--min-lifetime)".into(),
                    value: duration::format(lo),
                    expected: format!(
                        "at most SELFDESTRUCT_MAX_LIFETIME ({})",
                        duration::format(hi)
                    ),
                });
            }
            (Some(lo), Some(hi)) => Some((lo, hi)),
        }
        .filter(|(_, hi)| !hi.is_zero());
        Ok(Config {
            policy: Policy {
                lifetime,
                move_to_new_nodes: a.move_to_new_nodes,
                node_settle: a.node_settle,
                required_images: a.required_images.clone(),
                move_jitter: a.move_jitter,
                max_moves_per_hour: a.max_moves_per_hour,
                min_age: a.min_age,
            },
            grace_period: a
                .grace_period
                .map(|g| whole_grace_seconds(g, a.force_delete)),
            log_level: a
                .log_level
                .or_else(|| rust_log.and_then(parse_level))
                .unwrap_or(LevelFilter::INFO),
            args: a.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(flags: &[&str]) -> Result<Cli, String> {
        let argv = std::iter::once("selfdestruct").chain(flags.iter().copied());
        Cli::try_parse_from(argv).map_err(|e| e.to_string())
    }

    /// Flags and their values.
    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn parse(pairs: Pairs) -> Result<Config, String> {
        let flags: Vec<String> = pairs.iter().map(|(f, v)| format!("--{f}={v}")).collect();
        let cli = cli(&flags.iter().map(String::as_str).collect::<Vec<_>>())?;
        Config::from_args(&cli.agent, None).map_err(|e| e.to_string())
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn defaults_are_sane() {
        let c = parse(&[]).expect("defaults are valid");
        // The core's `Policy::default()` (which the simulator runs as "the agent's
        // defaults") is exactly what the flags' defaults give.
        assert_eq!(c.policy, selfdestruct_decision::Policy::default());
        assert_eq!((c.grace_period, c.log_level), (None, LevelFilter::INFO));
        let a = &c.args;
        assert_eq!(
            (a.mode, a.dry_run, a.log_format, a.on_exit),
            (Mode::Evict, false, LogFormat::Text, OnExit::Exit)
        );
        assert_eq!(a.sibling_selector, Siblings::FromLabels);
        assert!(a.node_selector.is_empty() && a.identity.pod_name.is_none());
    }

    #[test]
    fn wrapper_command_and_on_exit() {
        let argv = ["--max-lifetime=1h", "--on-exit=delete", "--", "sh", "-x"];
        let wrapped = cli(&argv).expect("flags");
        assert_eq!(wrapped.exec, ["sh", "-x"]);
        let c = Config::from_args(&wrapped.agent, None).expect("valid");
        assert_eq!(
            (c.args.on_exit, c.policy.lifetime),
            (OnExit::Delete, Some((secs(3600), secs(3600))))
        );
        assert!(cli(&["--max-lifetime=1h"]).expect("flags").exec.is_empty());
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
        let selector = |s| Selector::parse(s).expect("valid");
        let images = images::parse_list("jupyter/scipy-notebook:2024,quay.io/x/y:1");
        let p = &c.policy;
        assert_eq!(p.lifetime, Some((secs(3600), secs(5400))));
        assert_eq!(p.required_images, images.expect("valid"));
        assert!(p.max_moves_per_hour == 0 && !p.move_to_new_nodes);
        assert_eq!(
            (c.grace_period, c.log_level),
            (Some(secs(5)), LevelFilter::DEBUG)
        );
        let a = &c.args;
        assert_eq!(
            (a.mode, a.dry_run, a.log_format),
            (Mode::Delete, true, LogFormat::Json)
        );
        let id = &a.identity;
        let names = [&id.pod_name, &id.namespace, &id.uid, &id.node_name];
        let want = [
            "user-placeholder-3",
            "jhub",
            "0b1f-77",
            "ip-10.ec2.internal",
        ];
        assert_eq!(names.map(|n| n.as_deref()), want.map(Some));
        assert_eq!(a.node_selector, selector("pool=user,zone in (a,b)"));
        assert_eq!(a.sibling_selector, Siblings::Selector(selector("app=x")));
        // a bare boolean flag means true
        let bare = cli(&["--dry-run"]).expect("flag").agent;
        assert!(Config::from_args(&bare, None).expect("valid").args.dry_run);
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
            assert_eq!(
                lifetime(pairs),
                want.map(|(lo, hi)| (secs(lo), secs(hi))),
                "{pairs:?}"
            );
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
        for (value, want) in [
            ("0", 1),
            ("0s", 1),
            ("500ms", 1),
            ("1500ms", 2),
            ("30s", 30),
        ] {
            assert_eq!(
                grace(&[("grace-period", value)]),
                Some(secs(want)),
                "{value}"
            );
        }
        // 0 (a force deletion) only with the explicit opt-in.
        let forced = grace(&[("grace-period", "0"), ("force-delete", "true")]);
        assert_eq!(forced, Some(Duration::ZERO));
        let rounded = grace(&[("grace-period", "500ms"), ("force-delete", "true")]);
        assert_eq!(rounded, Some(secs(1)), "only an explicit 0 is 0");
    }

    #[test]
    fn every_invalid_value_names_its_variable_its_flag_and_the_form() {
        #[rustfmt::skip]
        let table: &[(&str, &str, &str, &str)] = &[
            ("min-lifetime", "abc", "SELFDESTRUCT_MIN_LIFETIME", "duration such as"),
            ("min-lifetime", "30", "SELFDESTRUCT_MIN_LIFETIME", "duration such as"),
            ("max-lifetime", "-1h", "SELFDESTRUCT_MAX_LIFETIME", "duration such as"),
            ("max-lifetime", "500000000y", "SELFDESTRUCT_MAX_LIFETIME", "at most 100 years"),
            ("mode", "destroy", "SELFDESTRUCT_MODE", "expected evict or delete"),
            ("dry-run", "maybe", "SELFDESTRUCT_DRY_RUN", "expected true or false"),
            ("dry-run", "", "SELFDESTRUCT_DRY_RUN", "expected true or false"),
            ("grace-period", "soon", "SELFDESTRUCT_GRACE_PERIOD", "duration such as"),
            ("force-delete", "perhaps", "SELFDESTRUCT_FORCE_DELETE", "expected true or false"),
            ("log-format", "xml", "SELFDESTRUCT_LOG_FORMAT", "expected text or json"),
            ("log-level", "loud", "SELFDESTRUCT_LOG_LEVEL", "error, warn, info, debug"),
            ("move-to-new-nodes", "sometimes", "SELFDESTRUCT_MOVE_TO_NEW_NODES", "true or false"),
            ("move-to-new-nodes", "", "SELFDESTRUCT_MOVE_TO_NEW_NODES", "true or false"),
            ("node-selector", "a in x", "SELFDESTRUCT_NODE_SELECTOR", "label selector"),
            ("node-settle", "1 fortnight", "SELFDESTRUCT_NODE_SETTLE", "duration such as"),
            ("node-settle", "", "SELFDESTRUCT_NODE_SETTLE", "duration such as"),
            ("required-images", "Nginx:1", "SELFDESTRUCT_REQUIRED_IMAGES", "image references"),
            ("move-jitter", "x", "SELFDESTRUCT_MOVE_JITTER", "duration such as"),
            ("move-jitter", "99999999999999h", "SELFDESTRUCT_MOVE_JITTER", "duration such as"),
            ("max-moves-per-hour", "-3", "SELFDESTRUCT_MAX_MOVES_PER_HOUR", "whole number"),
            ("max-moves-per-hour", "many", "SELFDESTRUCT_MAX_MOVES_PER_HOUR", "whole number"),
            ("max-moves-per-hour", "5000000000", "SELFDESTRUCT_MAX_MOVES_PER_HOUR", "whole"),
            ("min-age", "old", "SELFDESTRUCT_MIN_AGE", "duration such as"),
            ("start-jitter", "soon", "SELFDESTRUCT_START_JITTER", "duration such as"),
            ("sibling-selector", "a=b,,", "SELFDESTRUCT_SIBLING_SELECTOR", "label selector"),
            ("pod-uid", "a b", "POD_UID", "metadata.uid"),
            ("pod-name", "Place holder/0", "POD_NAME", "DNS-1123 subdomain"),
            ("pod-name", "../nodes/node-a", "POD_NAME", "DNS-1123 subdomain"),
            ("pod-namespace", "a.b", "POD_NAMESPACE", "DNS-1123 label"),
            ("pod-namespace", "Jhub", "POD_NAMESPACE", "DNS-1123 label"),
            ("node-name", "n?x=1", "NODE_NAME", "DNS-1123 subdomain"),
            ("on-exit", "restart", "SELFDESTRUCT_ON_EXIT", "expected exit or delete"),
        ];
        for (flag, value, var, form) in table {
            let e = parse(&[(flag, value)]).expect_err(&format!("{flag}={value} must fail"));
            let head = format!("invalid {var} (--{flag}) = {value:?}: expected ");
            assert!(e.contains(&head) && e.contains(form), "{flag}={value}: {e}");
        }
        // An argument without a variable is named by its flag alone.
        let no_env = <Cli as clap::CommandFactory>::command().mut_args(|a| a.env(None));
        let e = no_env
            .try_get_matches_from(["selfdestruct", "--mode=x"])
            .expect_err("bad");
        let want = "error: invalid --mode = \"x\": expected evict or delete\n";
        assert_eq!(e.to_string(), want);
    }

    #[test]
    fn gate_settings() {
        let gate = |flags: &[&str]| -> Result<GateConfig, String> {
            let argv = [&["node-gate"][..], flags].concat();
            match cli(&argv)?.command {
                Some(Command::NodeGate(g)) => Ok(g),
                None => panic!("node-gate subcommand"),
            }
        };
        let c = gate(&["--node-name=n1", "--gate-poll=10ms"]).expect("valid");
        assert_eq!(c.taint_key, crate::node_gate::DEFAULT_TAINT);
        assert_eq!(c.timeout, Duration::from_secs(900));
        assert_eq!(c.poll, Duration::from_secs(1), "at least 1s");
        #[rustfmt::skip]
        let bad: &[(&[&str], &str)] = &[
            (&[], "NODE_NAME"),
            (&["--node-name= "], "NODE_NAME"),
            (&["--node-name=n", "--gate-taint=a b"], "SELFDESTRUCT_GATE_TAINT"),
            (&["--node-name=n", "--gate-taint=k=v"], "SELFDESTRUCT_GATE_TAINT"),
            (&["--node-name=n", "--gate-timeout=x"], "SELFDESTRUCT_GATE_TIMEOUT"),
            (&["--node-name=n", "--gate-poll=1"], "SELFDESTRUCT_GATE_POLL"),
            (&["--node-name=n", "--required-images=A"], "SELFDESTRUCT_REQUIRED_IMAGES"),
        ];
        for (flags, var) in bad {
            let e = gate(flags).expect_err("invalid");
            let named = e.contains(&format!("invalid {var} (")) && e.contains("expected");
            assert!(named, "{e}");
        }
    }

    #[test]
    fn log_levels_from_rust_log() {
        use LevelFilter as L;
        let lists = [
            ("debug", Some(L::DEBUG)),
            ("warn,selfdestruct=trace", Some(L::TRACE)),
        ];
        for (list, want) in lists
            .into_iter()
            .chain([("kube=debug", None), ("verbose", None)])
        {
            assert_eq!(parse_level(list), want, "{list}");
        }
        let a = cli(&[]).expect("flags").agent;
        let level = |rust_log| Config::from_args(&a, Some(rust_log)).map(|c| c.log_level);
        assert_eq!(
            (level("error"), level("garbage")),
            (Ok(L::ERROR), Ok(L::INFO))
        );
        let flag = cli(&["--log-level=warn"]).expect("flags").agent;
        let given = Config::from_args(&flag, Some("error")).map(|c| c.log_level);
        assert_eq!(given, Ok(L::WARN), "the setting wins over RUST_LOG");
    }
}
