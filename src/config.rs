//! Configuration: every setting is an environment variable and a flag, typed by clap.
//! Each value goes through a `Setting` parser, so an invalid one fails with exit code 2
//! and a message naming the variable, the flag, the value and the accepted form.
//! [`Config::from_args`] adds what clap cannot say: the lifetime range, the grace
//! period's force opt-in and the `RUST_LOG` fallback.
//!
//! The agent's settings are here; as in kubert, a module with settings of its own
//! declares them beside the code they tune and `Cli` flattens them in: the own pod's
//! identity ([`crate::identity::IdentityHints`]) and `node-gate`'s
//! ([`crate::node_gate::GateConfig`]).
//!
//! A setting that may be unset is typed `std::option::Option<T>` (the spelling with
//! which clap's derive leaves the whole type to the parser; `std::vec::Vec` likewise)
//! with a hidden empty default: its parser sees every value and reads an empty one (a
//! chart's unset value) as unset.

use std::ffi::OsStr;
use std::time::Duration;

use clap::builder::{BoolishValueParser, EnumValueParser, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Parser, Subcommand, ValueEnum};
use tracing::level_filters::LevelFilter;

use selfdestruct_decision::Policy;
use selfdestruct_decision::duration;
use selfdestruct_decision::images::{self, ImageRef};
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
    NodeGate(crate::node_gate::GateConfig),
    /// Check agent settings given as VARIABLE=VALUE with the agent's own rules; exit 2 naming a bad one
    ///
    /// Prints them as container env entries, one JSON object a line. Only the arguments are
    /// checked; run it with a clean environment (`env -i`), as zero-to-jupyterhub's
    /// post-renderer does, since an invalid agent setting in its own environment fails first.
    CheckSettings(CheckSettings),
}

/// `selfdestruct check-settings VARIABLE=VALUE...` (zero-to-jupyterhub's post-renderer runs it).
#[derive(clap::Args, Debug, Clone)]
pub struct CheckSettings {
    /// The agent's settings, each named by its environment variable
    #[arg(value_name = "VARIABLE=VALUE")]
    pub settings: Vec<String>,
}

/// Checks agent settings given as `VARIABLE=VALUE` exactly as the agent would read them
/// from its environment (the same declarations and parsers, then [`Config::from_args`]),
/// and nothing else: the process's own environment is not read. Returns the settings as
/// (variable, value), or the message the agent would exit 2 with, naming the variable.
pub fn check_settings(settings: &[String]) -> Result<Vec<(String, String)>, String> {
    let cli = <Cli as clap::CommandFactory>::command();
    let mut given: Vec<(String, String)> = Vec::new();
    let mut argv = vec!["selfdestruct".to_string()];
    for setting in settings {
        let Some((var, value)) = setting.split_once('=') else {
            return Err(format!("expected VARIABLE=VALUE, not {setting:?}"));
        };
        let arg = cli
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == var))
            .ok_or_else(|| format!("unknown setting {var}: no agent setting has this variable"))?;
        if given.iter().any(|(v, _)| v == var) {
            return Err(format!("{var} is given twice"));
        }
        let flag = arg.get_long().unwrap_or_default();
        argv.push(format!("--{flag}={value}"));
        given.push((var.to_string(), value.to_string()));
    }
    // Variables not given are not read from this process's environment.
    let cli = cli.mut_args(|a| match a.get_env() {
        Some(e) if given.iter().any(|(v, _)| e == v.as_str()) => a,
        _ => a.env(None),
    });
    let parsed = cli
        .try_get_matches_from(argv)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
        .map_err(|e| {
            let e = e.to_string();
            e.trim_end().trim_start_matches("error: ").to_string()
        })?;
    Config::from_args(&parsed.agent, None).map_err(|e| e.to_string())?;
    Ok(given)
}

/// The agent's flags, each backed by an environment variable.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// Shortest lifetime, counted from the pod's start [0 or unset: no timer]
    #[arg(long, env = "SELFDESTRUCT_MIN_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub min_lifetime: std::option::Option<Duration>,
    /// Longest lifetime; the lifetime is drawn uniformly from [min, max]
    #[arg(long, env = "SELFDESTRUCT_MAX_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub max_lifetime: std::option::Option<Duration>,
    /// How to remove the own pod: evict (honours PodDisruptionBudgets) or delete
    #[arg(long, env = "SELFDESTRUCT_MODE", value_name = "evict|delete", default_value = "evict",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<Mode>::new()))]
    pub mode: Mode,
    /// Log decisions but never delete or evict anything
    #[arg(long, env = "SELFDESTRUCT_DRY_RUN", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting(BoolishValueParser::new()))]
    pub dry_run: bool,
    /// Grace period of the deletion, rounded up to whole seconds, at least 1s
    /// [default: the pod's terminationGracePeriodSeconds]
    #[arg(long, env = "SELFDESTRUCT_GRACE_PERIOD", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub grace_period: std::option::Option<Duration>,
    /// Let SELFDESTRUCT_GRACE_PERIOD=0 force-delete the pod (the StatefulSet may then start
    /// its successor while this container still runs)
    #[arg(long, env = "SELFDESTRUCT_FORCE_DELETE", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting(BoolishValueParser::new()))]
    pub force_delete: bool,
    /// Log format
    #[arg(long, env = "SELFDESTRUCT_LOG_FORMAT", value_name = "text|json", default_value = "text",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<LogFormat>::new()))]
    pub log_format: LogFormat,
    /// Log level: error, warn, info, debug, trace or off [default: RUST_LOG, else info]
    #[arg(long, env = "SELFDESTRUCT_LOG_LEVEL", value_name = "LEVEL", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(log_level)))]
    pub log_level: std::option::Option<LevelFilter>,
    /// The own pod's identity settings.
    #[command(flatten)]
    pub identity: crate::identity::IdentityHints,
    /// Move when a newer node is Ready (needs read access to Nodes)
    #[arg(long, env = "SELFDESTRUCT_MOVE_TO_NEW_NODES", value_name = "BOOL",
          default_value = "true", hide_possible_values = true, action = clap::ArgAction::Set,
          value_parser = Setting(BoolishValueParser::new()))]
    pub move_to_new_nodes: bool,
    /// Label selector of the nodes to watch [default: all nodes]
    #[arg(long, env = "SELFDESTRUCT_NODE_SELECTOR", value_name = "SELECTOR", default_value = "",
          hide_default_value = true, value_parser = Setting(node_selector))]
    pub node_selector: Selector,
    /// How long a new node must be Ready before it counts
    #[arg(long, env = "SELFDESTRUCT_NODE_SETTLE", value_name = "DURATION",
          default_value = "10s", value_parser = Setting(duration))]
    pub node_settle: Duration,
    /// Comma-separated images a new node must hold before it counts [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES", default_value = "",
          hide_default_value = true, value_parser = Setting(image_list))]
    pub required_images: std::vec::Vec<ImageRef>,
    /// Random delay before acting on a trigger, re-checked after it
    #[arg(long, env = "SELFDESTRUCT_MOVE_JITTER", value_name = "DURATION",
          default_value = "10s", value_parser = Setting(duration))]
    pub move_jitter: Duration,
    /// Cap on own eviction attempts per hour [0: no cap]
    #[arg(long, env = "SELFDESTRUCT_MAX_MOVES_PER_HOUR", value_name = "N", default_value = "12",
          value_parser = Setting(whole_number))]
    pub max_moves_per_hour: u32,
    /// No move while the own pod is younger than this
    #[arg(long, env = "SELFDESTRUCT_MIN_AGE", value_name = "DURATION",
          default_value = "2m", value_parser = Setting(duration))]
    pub min_age: Duration,
    /// Random delay before the first node and sibling list, so a fleet that starts
    /// together does not list together (costs nothing below the 2m min age)
    #[arg(long, env = "SELFDESTRUCT_START_JITTER", value_name = "DURATION",
          default_value = "30s", value_parser = Setting(duration))]
    pub start_jitter: Duration,
    /// Label selector of sibling placeholders ("none" disables) [default: the own pod's
    /// app.kubernetes.io/name and app.kubernetes.io/instance labels]
    #[arg(long, env = "SELFDESTRUCT_SIBLING_SELECTOR", value_name = "SELECTOR",
          default_value = "", hide_default_value = true, value_parser = Setting(siblings))]
    pub sibling_selector: Siblings,
    /// Entrypoint wrapper only: when CMD exits, exit with its code (exit), or first delete the
    /// own pod (uid precondition) so its controller re-creates it elsewhere (delete)
    #[arg(long, env = "SELFDESTRUCT_ON_EXIT", value_name = "exit|delete", default_value = "exit",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<OnExit>::new()))]
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

/// The parser of every typed setting: trims the value and parses it with the inner
/// parser; a refused value fails naming the variable, the flag, the value and the
/// accepted form (the possible values, else the parser's reason).
#[derive(Clone)]
pub(crate) struct Setting<P>(pub(crate) P);

impl<P: TypedValueParser> TypedValueParser for Setting<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<P::Value, clap::Error> {
        let trimmed = value.to_str().map_or(value, |v| OsStr::new(v.trim()));
        self.0.parse_ref(cmd, arg, trimmed).map_err(|e| {
            let choices = self.0.possible_values().into_iter().flatten();
            let choices: Vec<_> = choices.filter(|v| !v.is_hide_set()).collect();
            let expected = match (choices.split_last(), std::error::Error::source(&e)) {
                (Some((last, rest)), _) if !rest.is_empty() => {
                    let rest: Vec<_> = rest.iter().map(|v| v.get_name()).collect();
                    format!("{} or {}", rest.join(", "), last.get_name())
                }
                (_, Some(why)) => why.to_string(),
                _ => "UTF-8 text".to_string(),
            };
            let flag = arg.and_then(clap::Arg::get_long).unwrap_or_default();
            let setting = match arg.and_then(clap::Arg::get_env) {
                Some(var) => format!("{} (--{flag})", var.to_string_lossy()),
                None => format!("--{flag}"),
            };
            let value = value.to_string_lossy().into_owned();
            let error = ConfigError {
                setting,
                value,
                expected,
            };
            clap::Error::raw(ErrorKind::ValueValidation, format!("{error}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        self.0.possible_values()
    }
}

/// The longest duration accepted anywhere (100 years): longer is a typo.
const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

const DURATION_FORM: &str = "a duration such as 90s, 15m or 1h30m";

/// A duration of at most [`MAX_DURATION`].
pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    match duration::parse(value) {
        Ok(d) if d > MAX_DURATION => Err(format!("{DURATION_FORM}, at most 100 years")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{DURATION_FORM} ({e})")),
    }
}

/// `parse`, or unset if the value is empty.
pub(crate) fn unset_or<T>(
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

fn whole_number(value: &str) -> Result<u32, String> {
    value
        .parse()
        .map_err(|_| "a whole number (0 for no cap)".into())
}

fn log_level(value: &str) -> Result<LevelFilter, String> {
    parse_level(value).ok_or_else(|| "one of error, warn, info, debug, trace, off".into())
}

pub(crate) fn image_list(value: &str) -> Result<Vec<ImageRef>, String> {
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

    // Every setting's variable, a bad value of each and the form its message names:
    // tests/startup.rs walks them all through the binary.

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
        let images = images::parse_list("jupyter/scipy-notebook:2024,quay.io/x/y:1");
        assert_eq!(p.lifetime, Some((secs(3600), secs(5400))));
        assert_eq!(p.required_images, images.expect("valid"));
        assert!(p.max_moves_per_hour == 0 && !p.move_to_new_nodes);
        let given = (c.grace_period, c.log_level, a.mode, a.dry_run, a.log_format);
        let want = (Some(secs(5)), LevelFilter::DEBUG, Mode::Delete, true);
        assert_eq!(given, (want.0, want.1, want.2, want.3, LogFormat::Json));
        let id = &a.identity;
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
