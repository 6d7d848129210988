//! The agent's command line: every setting is an environment variable and a flag, parsed
//! by a `Setting` parser (`selfdestruct_decision::settings`), so an invalid one exits 2
//! naming the variable, the flag, the value and the accepted form. As in kubert, each
//! settings struct is declared beside the code it tunes and flattened here: the ones
//! every binary of the image reads ([`SharedSettings`]) and the agent's
//! ([`AgentSettings`], with the decision's [`PolicySettings`]). The node gate and the
//! calendar controller are binaries of their own, with their own command lines
//! (`node_gate::Cli`, `selfdestruct_schedule::controller::Cli`).

use std::ffi::OsString;
use std::time::Duration;

use clap::builder::{BoolishValueParser, EnumValueParser};
use clap::{Args, CommandFactory, FromArgMatches, Subcommand, ValueEnum};
use tracing::level_filters::LevelFilter;

use crate::api::Mode;
use crate::error::{CheckError, Error};
use crate::identity::IdentitySettings;
use crate::logging::LogFormat;
use selfdestruct_decision::Policy;
use selfdestruct_decision::selector::Selector;
use selfdestruct_decision::settings::{
    ImageSettings, PolicySettings, Setting, SettingError, duration, unset_or,
};

/// The agent's command line: the shared and the agent's flags, or `check-settings`.
#[derive(clap::Parser, Debug, Clone)]
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
    /// `check-settings`.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Entrypoint wrapper: the command (after `--`) to run as the child
    #[arg(last = true, value_name = "CMD")]
    pub(crate) exec: Vec<std::ffi::OsString>,
    /// The settings of every binary.
    #[command(
        flatten,
        next_help_heading = "Every binary (logging, identity, API access)"
    )]
    pub(crate) shared: SharedSettings,
    /// The agent's settings (also the entrypoint wrapper's).
    #[command(flatten, next_help_heading = "The agent and the entrypoint wrapper")]
    pub(crate) agent: AgentSettings,
    /// `--` was given ([`Cli::parse_mode`]): the entrypoint wrapper, even with nothing after it.
    #[arg(skip)]
    pub(crate) wrapped: bool,
}

/// Subcommands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum Command {
    /// Check agent settings given as VARIABLE=VALUE with the agent's own rules; exit 2 naming a bad one
    ///
    /// Prints them as container env entries, one JSON object a line. Only the arguments are
    /// checked; run it with a clean environment (`env -i`), as zero-to-jupyterhub's
    /// post-renderer does, since an invalid agent setting in its own environment fails first.
    CheckSettings(CheckSettings),
}

/// `selfdestruct check-settings VARIABLE=VALUE...` (zero-to-jupyterhub's post-renderer runs it).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CheckSettings {
    /// The agent's settings, each named by its environment variable
    #[arg(value_name = "VARIABLE=VALUE")]
    pub(crate) settings: Vec<String>,
}

/// Checks agent settings given as `VARIABLE=VALUE` exactly as the agent reads them from
/// its environment (which is not read here): the settings as (variable, value), or the
/// message the agent would exit 2 with, naming the variable. Only the settings an
/// operator gives ([`AgentSettings`] and [`SharedSettings`], read from the structs
/// themselves) but for the own pod's identity and API access ([`IdentitySettings`]:
/// `POD_NAME`, `SELFDESTRUCT_SERVICE_ACCOUNT_DIR`, ... come from the pod, not from a setting).
pub(crate) fn check_settings(settings: &[String]) -> Result<Vec<(String, String)>, Error> {
    let cli = <Cli as clap::CommandFactory>::command();
    let identity = IdentitySettings::augment_args(clap::Command::new("identity"));
    let mut given: Vec<(String, String)> = Vec::new();
    let mut argv = vec!["selfdestruct".to_string()];
    for setting in settings {
        let Some((var, value)) = setting.split_once('=') else {
            return Err(CheckError::NotASetting(setting.clone()).into());
        };
        let arg = cli
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == var))
            .ok_or_else(|| CheckError::Unknown(var.into()))?;
        if identity
            .get_arguments()
            .any(|a| a.get_env() == arg.get_env())
        {
            return Err(CheckError::NotOperators(var.into()).into());
        }
        if given.iter().any(|(v, _)| v == var) {
            return Err(CheckError::Twice(var.into()).into());
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
        .map_err(CheckError::Parse)?;
    Config::from_cli(&parsed)?;
    Ok(given)
}

impl Cli {
    /// Parses `argv` and the environment, and whether `--` was given (the wrapper).
    pub fn parse_mode<T: Into<OsString> + Clone>(
        argv: impl IntoIterator<Item = T>,
    ) -> Result<Cli, clap::Error> {
        let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
        let wrapped = argv.iter().skip(1).any(|a| a == "--");
        let cli = Cli::from_arg_matches(&Cli::command().try_get_matches_from(argv)?)?;
        Ok(Cli { wrapped, ..cli })
    }
}

/// The settings every binary of the image reads: logging, and the own pod's identity and
/// API access.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct SharedSettings {
    /// Log format
    #[arg(global = true, long, env = "SELFDESTRUCT_LOG_FORMAT", value_name = "text|json", default_value = "text",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<LogFormat>::new()))]
    pub(crate) log_format: LogFormat,
    /// Log level: error, warn, info, debug, trace or off [default: RUST_LOG, else info]
    #[arg(global = true, long, env = "SELFDESTRUCT_LOG_LEVEL", value_name = "LEVEL", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(log_level)))]
    pub(crate) log_level: std::option::Option<LevelFilter>,
    /// The own pod's identity and API access.
    #[command(flatten)]
    pub identity: IdentitySettings,
}

impl SharedSettings {
    /// The log level: the setting, else `rust_log` (the `RUST_LOG` variable), else info.
    pub(crate) fn level(&self, rust_log: Option<&str>) -> LevelFilter {
        self.log_level
            .or_else(|| rust_log.and_then(parse_level))
            .unwrap_or(LevelFilter::INFO)
    }
}

/// The agent's flags, each backed by an environment variable.
#[derive(Args, Debug, Clone, PartialEq)]
pub(crate) struct AgentSettings {
    /// The decision policy's settings (shared with `simulate`).
    #[command(flatten)]
    pub(crate) policy: PolicySettings,
    /// How to remove the own pod: evict (honours PodDisruptionBudgets) or delete
    #[arg(long, env = "SELFDESTRUCT_MODE", value_name = "evict|delete", default_value = "evict",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<Mode>::new()))]
    pub(crate) mode: Mode,
    /// Log decisions but never delete or evict anything
    #[arg(long, env = "SELFDESTRUCT_DRY_RUN", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting(BoolishValueParser::new()))]
    pub(crate) dry_run: bool,
    /// Grace period of the deletion, rounded up to whole seconds, at least 1s
    /// [default: the pod's terminationGracePeriodSeconds]
    #[arg(long, env = "SELFDESTRUCT_GRACE_PERIOD", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub(crate) grace_period: std::option::Option<Duration>,
    /// Let SELFDESTRUCT_GRACE_PERIOD=0 force-delete the pod (the StatefulSet may then start
    /// its successor while this container still runs)
    #[arg(long, env = "SELFDESTRUCT_FORCE_DELETE", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", default_value = "false", hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting(BoolishValueParser::new()))]
    pub(crate) force_delete: bool,
    /// Label selector of the nodes to watch [default: all nodes]
    #[arg(long, env = "SELFDESTRUCT_NODE_SELECTOR", value_name = "SELECTOR", default_value = "",
          hide_default_value = true, value_parser = Setting(node_selector))]
    pub(crate) node_selector: Selector,
    /// The images a new node must hold.
    #[command(flatten)]
    pub(crate) images: ImageSettings,
    /// Random delay before the first node and sibling list, so a fleet that starts
    /// together does not list together (costs nothing below the 2m min age)
    #[arg(long, env = "SELFDESTRUCT_START_JITTER", value_name = "DURATION",
          default_value = "30s", value_parser = Setting(duration))]
    pub(crate) start_jitter: Duration,
    /// Label selector of sibling placeholders ("none" disables) [default: the own pod's
    /// app.kubernetes.io/name and app.kubernetes.io/instance labels]
    #[arg(long, env = "SELFDESTRUCT_SIBLING_SELECTOR", value_name = "SELECTOR",
          default_value = "", hide_default_value = true, value_parser = Setting(siblings))]
    pub(crate) sibling_selector: Siblings,
    /// Entrypoint wrapper only: when CMD exits, exit with its code (exit), or first delete the
    /// own pod (uid precondition) so its controller re-creates it elsewhere (delete)
    #[arg(long, env = "SELFDESTRUCT_ON_EXIT", value_name = "exit|delete", default_value = "exit",
          ignore_case = true, hide_possible_values = true,
          value_parser = Setting(EnumValueParser::<OnExit>::new()))]
    pub(crate) on_exit: OnExit,
}

/// What the entrypoint wrapper does when its child exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnExit {
    /// Exit with the child's code (the kubelet restarts the container in place).
    #[value(alias = "")]
    Exit,
    /// Delete the own pod (uid precondition), then exit with the child's code.
    Delete,
}

/// How sibling placeholders are found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Siblings {
    /// Derive from the own pod's labels.
    FromLabels,
    /// This selector.
    Selector(Selector),
    /// Sibling awareness off.
    Off,
}

/// The agent's settings, validated: each one as the agent uses it.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The decision policy (the lifetime range and the node trigger's settings).
    pub(crate) policy: Policy,
    /// The deletion grace period as sent: whole seconds, 0 only with `--force-delete`.
    pub(crate) grace_period: Option<Duration>,
    pub(crate) mode: Mode,
    pub(crate) dry_run: bool,
    pub(crate) node_selector: Selector,
    pub(crate) start_jitter: Duration,
    pub(crate) siblings: Siblings,
    pub(crate) on_exit: OnExit,
    /// The own pod's identity and API access.
    pub(crate) identity: IdentitySettings,
}

fn log_level(value: &str) -> Result<LevelFilter, String> {
    parse_level(value).ok_or_else(|| "one of error, warn, info, debug, trace, off".into())
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

/// Parses a level name (`info`) or a `RUST_LOG`-style list (`warn,selfdestruct=debug`).
pub(crate) fn parse_level(value: &str) -> Option<LevelFilter> {
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
    /// Adds what the flags cannot say alone: the lifetime range
    /// ([`PolicySettings::policy`]) and the grace period's force opt-in.
    pub(crate) fn from_cli(cli: &Cli) -> Result<Config, SettingError> {
        let a = &cli.agent;
        // The grace period as the API takes it: whole seconds, rounded up. For pods, 0 is
        // a force deletion (the object goes at once, the StatefulSet may start the
        // successor while this container still runs), so it is sent only with
        // `--force-delete` (as kubectl sends 1 for `--grace-period=0` without `--force`).
        let whole_seconds = |g: Duration| {
            let secs = g.as_secs() + u64::from(g.subsec_nanos() > 0);
            Duration::from_secs(if a.force_delete { secs } else { secs.max(1) })
        };
        Ok(Config {
            policy: a.policy.policy(a.images.required_images.clone())?,
            grace_period: a.grace_period.map(whole_seconds),
            mode: a.mode,
            dry_run: a.dry_run,
            node_selector: a.node_selector.clone(),
            start_jitter: a.start_jitter,
            siblings: a.sibling_selector.clone(),
            on_exit: a.on_exit,
            identity: cli.shared.identity.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
