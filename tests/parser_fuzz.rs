//! Fuzzing (with proptest) of every parser that reads input from outside the
//! process. None may panic on any input; where a printed form exists, printing
//! and parsing again gives the same value; where the result has an invariant
//! (an error names its variable, a summary keeps only what it may), it holds.
//! Case counts are small for CI (`PROPTEST_CASES` raises them locally).
//!
//! The parsers here are those of the public API: every setting (environment
//! variables and flags), every argument of `Cli::command()` (the agent's and
//! `node-gate`'s), through clap and `Task::from_cli`, so the list cannot fall
//! behind the settings; and, within them, `duration::parse`,
//! `images::parse_list` / `ImageRef::parse`, `Selector::parse` (node and sibling
//! selectors, the gate's taint key), the booleans, modes and Kubernetes names.
//!
//! The crate's inner parsers are fuzzed beside their code, in the unit tests'
//! `fuzz` modules: the `RUST_LOG` fallback (`config`), the Downward API files
//! (`identity`), kubeconfig files and in-cluster settings (`access`), error
//! answers and `Retry-After` (`api`), Nodes and Pods as summaries (`summarize`),
//! budgets' selectors (`pdb`) and the node gate's view of its Node (`node_gate`).
//!
//! Not parsers: the wrapper's command and arguments are passed to the child
//! as they are; the watch's error handling looks at the status code only.

mod common;

use common::props::proptest_config;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use selfdestruct_decision::duration;
use selfdestruct_decision::images::{self, ImageRef};
use selfdestruct_decision::selector::Selector;

/// Text that looks like a duration often enough to reach the parser's insides.
fn duration_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9 .+-]{0,4}[0-9]{0,22}[ ]?(ns|us|ms|s|m|h|d|w|M|y|sec|min|hours|days|parsec)?([0-9]{1,4}(s|m|h))?",
        "[0-9]{1,30}y",
    ]
}

fn image_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "([a-zA-Z0-9.:-]{1,12}/){0,3}[a-z0-9._-]{1,12}(:[a-zA-Z0-9._-]{0,10})?(@[a-z0-9+._-]{0,8}:[0-9a-fA-F]{0,70})?",
        "(docker.io|index.docker.io|localhost:5000|quay.io)/[a-z]{1,5}(/[a-z]{1,5})?(:[a-z0-9]{1,5})?",
    ]
}

fn selector_like() -> impl Strategy<Value = String> {
    let key = "([a-z0-9-]{1,8}(\\.[a-z0-9]{1,4})?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?";
    let value = "([A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?)?";
    let term = prop_oneof![
        (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        (key, value).prop_map(|(k, v)| format!("{k} == {v}")),
        (key, value).prop_map(|(k, v)| format!("{k}!={v}")),
        key.prop_map(|k| k.to_string()),
        key.prop_map(|k| format!("!{k}")),
        (key, any::<i64>()).prop_map(|(k, n)| format!("{k}>{n}")),
        (key, any::<i64>()).prop_map(|(k, n)| format!("{k} < {n}")),
        (key, prop::collection::vec(value, 1..4))
            .prop_map(|(k, vs)| format!("{k} in ({})", vs.join(", "))),
        (key, prop::collection::vec(value, 1..4))
            .prop_map(|(k, vs)| format!("{k} notin({})", vs.join(","))),
        "[a-z!=<>(), ]{0,8}",
    ];
    prop_oneof![
        any::<String>(),
        prop::collection::vec(term, 0..5).prop_map(|ts| ts.join(",")),
    ]
}

proptest! {
    #![proptest_config(proptest_config(1000))]

    #[test]
    fn durations_never_panic_and_print_back(input in duration_like()) {
        if let Ok(d) = duration::parse(&input) {
            let printed = duration::format(d);
            // format() keeps whole seconds (or the milliseconds of a sub-second value).
            let back = duration::parse(&printed);
            prop_assert!(back.is_ok(), "{input:?} -> {d:?} -> {printed:?} does not parse");
            let back = back.unwrap_or_default();
            if d.as_secs() > 0 {
                prop_assert_eq!(back, Duration::from_secs(d.as_secs()), "{:?} -> {:?}", input, printed);
            } else {
                prop_assert_eq!(back, Duration::from_millis(u64::from(d.subsec_millis())));
            }
        }
    }

    #[test]
    fn whole_second_durations_round_trip(secs in 0u64..10_000_000_000) {
        let d = Duration::from_secs(secs);
        prop_assert_eq!(duration::parse(&duration::format(d)), Ok(d));
    }

    #[test]
    fn image_references_never_panic_and_normalise_idempotently(input in image_like(), other in image_like()) {
        if let Ok(r) = ImageRef::parse(&input) {
            let printed = r.to_string();
            let again = ImageRef::parse(&printed);
            prop_assert_eq!(again.as_ref(), Ok(&r), "{:?} -> {:?}", input, printed);
            prop_assert!(r.matches(&printed), "{input:?} does not match its own form {printed:?}");
            if r.digest.is_none() {
                prop_assert!(r.matches(&input), "{input:?} does not match itself");
            }
            prop_assert!(!printed.contains(char::is_whitespace));
        }
        // matches() accepts only what parses, and agrees with the normalised forms.
        if let Ok(r) = ImageRef::parse(&input) {
            let m = r.matches(&other);
            if m {
                let o = ImageRef::parse(&other);
                prop_assert!(o.is_ok());
                let o = o.unwrap_or_else(|_| r.clone());
                prop_assert_eq!((&o.domain, &o.path), (&r.domain, &r.path));
            }
        }
        let _ = images::parse_list(&format!("{input},{other}"));
    }

    #[test]
    fn selectors_never_panic_and_round_trip(input in selector_like(), labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z0-9]{0,3}", 0..4)) {
        if let Ok(s) = Selector::parse(&input) {
            let printed = s.to_string();
            let again = Selector::parse(&printed);
            prop_assert_eq!(again.as_ref(), Ok(&s), "{:?} -> {:?}", input, printed);
            // matching never panics and is the same for the re-parsed selector
            prop_assert_eq!(s.matches(&labels), again.map(|a| a.matches(&labels)).unwrap_or(!s.matches(&labels)));
        }
    }

    #[test]
    fn selectors_from_labels_round_trip_and_match_them(
        labels in prop::collection::btree_map(
            "([a-z0-9]{1,6}\\.[a-z]{2,4}/)?[a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?",
            "([a-zA-Z0-9]([a-zA-Z0-9._-]{0,10}[a-zA-Z0-9])?)?",
            0..5,
        )
    ) {
        let s = Selector::from_labels(&labels);
        prop_assert!(s.matches(&labels));
        let printed = s.to_string();
        prop_assert_eq!(Selector::parse(&printed), Ok(s), "{:?}", printed);
    }

}

/// The label maps generated above are valid by construction; a sanity check
/// that the generator is not vacuous.
#[test]
fn generators_reach_valid_inputs() {
    // A fixed seed: the count is a property of the generators, not of the draw (with a
    // fresh seed each run, about 10% valid selectors sat at the bound now and then).
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        proptest_config(300),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let (mut sel_ok, mut img_ok, mut dur_ok) = (0, 0, 0);
    for _ in 0..300 {
        let s = selector_like()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        sel_ok += usize::from(Selector::parse(&s).is_ok_and(|s| !s.is_empty()));
        let i = image_like().new_tree(&mut runner).expect("tree").current();
        img_ok += usize::from(ImageRef::parse(&i).is_ok());
        let d = duration_like()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        dur_ok += usize::from(duration::parse(&d).is_ok());
    }
    eprintln!("valid of 300: selectors {sel_ok}, images {img_ok}, durations {dur_ok}");
    assert!(sel_ok > 30 && img_ok > 30 && dur_ok > 30);
}

/// A value for any setting: anything, or close to the accepted forms.
fn setting_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        duration_like(),
        "(true|false|yes|no|on|off|1|0|TRUE|False|maybe|)",
        "(evict|delete|eviction|exit|text|json|none|info|debug|off|warning|x)",
        "[a-z0-9=,!() ./:@-]{0,24}",
        image_like(),
        selector_like(),
    ]
}

/// `Cli::command()` with no environment variables: only the flags count.
fn cli_without_env() -> clap::Command {
    use clap::CommandFactory;
    selfdestruct::Cli::command()
        .mut_args(|a| a.env(None))
        .mut_subcommand("node-gate", |c| c.mut_args(|a| a.env(None)))
}

/// Every setting of the agent (`gate` false) or of `node-gate` (`gate` true):
/// its long flag and environment variable.
fn settings(gate: bool) -> Vec<(String, String)> {
    use clap::CommandFactory;
    let mut cmd = selfdestruct::Cli::command();
    // Built, so that the subcommand holds the shared (global) settings too.
    cmd.build();
    let cmd = if gate {
        cmd.find_subcommand("node-gate")
            .cloned()
            .expect("the node-gate subcommand")
    } else {
        cmd
    };
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env()?.to_string_lossy().to_string();
            Some((long.to_string(), env))
        })
        .collect()
}

/// Parses the settings from `argv` (after the program name) as `main` does;
/// `Err` is the message, which must name `names`.
fn parse_settings(argv: &[String]) -> Result<(), String> {
    use clap::FromArgMatches;
    let mut full = vec!["selfdestruct".to_string()];
    full.extend_from_slice(argv);
    let matches = cli_without_env()
        .try_get_matches_from(full)
        .map_err(|e| e.to_string())?;
    let cli = selfdestruct::Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    selfdestruct::Task::from_cli(&cli).map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn the_settings_walk_finds_every_kind_of_setting() {
    // The walk below finds the settings in clap's description: it is not empty,
    // and it reaches the ones named in the README's tables.
    let agent = settings(false);
    let gate = settings(true);
    for var in [
        "SELFDESTRUCT_MIN_LIFETIME",
        "SELFDESTRUCT_NODE_SELECTOR",
        "SELFDESTRUCT_REQUIRED_IMAGES",
        "SELFDESTRUCT_SIBLING_SELECTOR",
        "POD_UID",
        "SELFDESTRUCT_LOG_LEVEL",
    ] {
        assert!(agent.iter().any(|(_, e)| e == var), "{var}: {agent:?}");
    }
    for var in [
        "SELFDESTRUCT_GATE_TAINT",
        "SELFDESTRUCT_GATE_TIMEOUT",
        "NODE_NAME",
    ] {
        assert!(gate.iter().any(|(_, e)| e == var), "{var}: {gate:?}");
    }
    assert!(agent.len() >= 20, "{agent:?}");
}

proptest! {
    // Each case parses every setting (about 30) once.
    #![proptest_config(proptest_config(128))]

    #[test]
    fn any_value_of_any_setting_parses_or_names_its_variable(value in setting_value()) {
        for (long, env) in settings(false) {
            let argv = [format!("--{long}={value}")];
            if let Err(e) = parse_settings(&argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "--{long}={value:?}: {e}");
            }
        }
        for (long, env) in settings(true) {
            let mut argv = vec!["node-gate".to_string(), format!("--{long}={value}")];
            if long != "node-name" {
                argv.push("--node-name=n1".into());
            }
            if let Err(e) = parse_settings(&argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "node-gate --{long}={value:?}: {e}");
            }
        }
    }

}
