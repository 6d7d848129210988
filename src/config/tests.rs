//! Unit tests of `config` (a child module: they see its private items).

use super::*;

use std::time::Duration;

use crate::api::Mode;
use tracing::level_filters::LevelFilter;

use crate::logging::LogFormat;

use selfdestruct_decision::selector::Selector;

fn cli(flags: &[&str]) -> Result<Cli, String> {
    let argv = std::iter::once("selfdestruct").chain(flags.iter().copied());
    Cli::parse_mode(argv).map_err(|e| e.to_string())
}

/// Flags and their values.
type Pairs<'a> = &'a [(&'a str, &'a str)];

/// The agent's configuration, and the settings of every mode (logging), from `pairs`.
fn parse(pairs: Pairs) -> Result<(Config, SharedSettings), String> {
    let flags: Vec<String> = pairs.iter().map(|(f, v)| format!("--{f}={v}")).collect();
    let cli = cli(&flags.iter().map(String::as_str).collect::<Vec<_>>())?;
    Ok((
        Config::from_cli(&cli).map_err(|e| e.to_string())?,
        cli.shared,
    ))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

// Every setting's variable, a bad value of each and the form its message names:
// tests/startup.rs walks them all through the binary.

#[test]
fn defaults_are_sane() {
    let (c, shared) = parse(&[]).expect("defaults are valid");
    // The core's `Policy::default()` (which the simulator runs as "the agent's
    // defaults") is exactly what the flags' defaults give.
    assert_eq!(c.policy, selfdestruct_decision::Policy::default());
    assert_eq!(
        (c.grace_period, shared.level(None)),
        (None, LevelFilter::INFO)
    );
    assert_eq!(
        (c.mode, c.dry_run, shared.log_format, c.on_exit),
        (Mode::Evict, false, LogFormat::Text, OnExit::Exit)
    );
    assert_eq!(c.siblings, Siblings::FromLabels);
    assert!(c.node_selector.is_empty() && c.identity.pod_name.is_none());
}

#[test]
fn wrapper_command_and_on_exit() {
    let wrapped = cli(&["--on-exit=delete", "--", "sh", "-x"]).expect("flags");
    assert_eq!(wrapped.exec, ["sh", "-x"]);
    assert_eq!(wrapped.agent.on_exit, OnExit::Delete);
    assert!(cli(&["--max-lifetime=1h"]).expect("ok").exec.is_empty());
    // The gate and the schedule are binaries of their own (`forward` runs them).
    assert!(cli(&["node-gate", "--node-name=n"]).is_err());
}

#[test]
fn valid_forms_trimmed_and_in_any_case() {
    #[rustfmt::skip]
    let (c, shared) = parse(&[
        ("min-lifetime", "1h"), ("max-lifetime", "1h30m"), ("mode", " Delete "),
        ("dry-run", "yes"), ("grace-period", "5s"), ("log-format", "JSON"),
        ("log-level", "debug"), ("node-selector", "pool=user,zone in (a,b)"),
        ("required-images", "jupyter/scipy-notebook:2024, quay.io/x/y:1"),
        ("max-moves-per-hour", " 0 "), ("sibling-selector", "app=x"),
        ("move-to-new-nodes", "off"), ("pod-name", "user-placeholder-3"),
        ("pod-namespace", "jhub"), ("pod-uid", "0b1f-77"), ("node-name", "ip-10.ec2.internal"),
    ])
    .expect("valid");
    let p = &c.policy;
    let images =
        selfdestruct_decision::images::parse_list("jupyter/scipy-notebook:2024,quay.io/x/y:1");
    assert_eq!(p.lifetime, Some((secs(3600), secs(5400))));
    assert_eq!(p.required_images, images.expect("valid"));
    assert!(p.max_moves_per_hour == 0 && !p.move_to_new_nodes);
    let given = (
        c.grace_period,
        shared.level(None),
        c.mode,
        c.dry_run,
        shared.log_format,
    );
    let want = (Some(secs(5)), LevelFilter::DEBUG, Mode::Delete, true);
    assert_eq!(given, (want.0, want.1, want.2, want.3, LogFormat::Json));
    let id = &c.identity;
    let names = [&id.pod_name, &id.namespace, &id.uid, &id.node_name].map(|n| n.as_deref());
    let want = [
        "user-placeholder-3",
        "jhub",
        "0b1f-77",
        "ip-10.ec2.internal",
    ];
    assert_eq!(names, want.map(Some));
    let selector = |s| Selector::parse(s).expect("valid");
    assert_eq!(c.node_selector, selector("pool=user,zone in (a,b)"));
    assert_eq!(c.siblings, Siblings::Selector(selector("app=x")));
    // a bare boolean flag means true
    assert!(cli(&["--dry-run"]).expect("flag").agent.dry_run);
}

#[test]
fn lifetime_bounds_and_unset_values() {
    let lifetime = |pairs: Pairs| parse(pairs).expect("valid").0.policy.lifetime;
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
        let (c, _) = parse(&[("sibling-selector", none)]).expect("valid");
        assert_eq!(c.siblings, Siblings::Off);
    }
    let e = parse(&[("min-lifetime", "2h"), ("max-lifetime", "1h")]).expect_err("min > max");
    let want = "invalid SELFDESTRUCT_MIN_LIFETIME (--min-lifetime) = \"2h\": expected at \
                most SELFDESTRUCT_MAX_LIFETIME (1h)";
    assert_eq!(e, want);
}

#[test]
fn grace_period_is_whole_seconds_and_never_a_silent_force_delete() {
    let grace = |pairs: Pairs| parse(pairs).expect("valid").0.grace_period;
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
    let a = cli(&[]).expect("flags");
    let level = |rust_log| a.shared.level(Some(rust_log));
    assert_eq!((level("error"), level("garbage")), (L::ERROR, L::INFO));
    let flag = cli(&["--log-level=warn"]).expect("flags");
    let given = flag.shared.level(Some("error"));
    assert_eq!(given, L::WARN, "the setting wins over RUST_LOG");
}

/// `RUST_LOG` of any content (moved from tests/parser_fuzz.rs).
mod fuzz {
    use proptest::prelude::*;

    use crate::testing::props::proptest_config;
    use clap::CommandFactory;

    proptest! {
        #![proptest_config(proptest_config(128))]

        #[test]
        fn rust_log_of_any_content_is_a_fallback_never_an_error(value in prop_oneof![
            any::<String>(),
            "((selfdestruct|kube|[a-z_:]{1,8})=)?(trace|debug|info|warn|warning|error|off|INFO|x)?(,[a-z=]{0,12}){0,3}",
        ]) {
            use clap::FromArgMatches;
            let matches = crate::config::Cli::command().mut_args(|a| a.env(None)).try_get_matches_from(["selfdestruct"]).expect("defaults");
            let cli = crate::config::Cli::from_arg_matches(&matches).expect("defaults");
            prop_assert!(crate::config::Config::from_cli(&cli).is_ok());
            let level = crate::config::parse_level(&value);
            let want = level.unwrap_or(tracing::level_filters::LevelFilter::INFO);
            prop_assert_eq!(cli.shared.level(Some(&value)), want, "RUST_LOG={:?}", value);
            // `selfdestruct=LEVEL` first wins over the rest of the list.
            let ours = format!("selfdestruct=debug,{value}");
            prop_assert_eq!(crate::config::parse_level(&ours), Some(tracing::level_filters::LevelFilter::DEBUG));
        }
    }
}
