//! Fuzzing (with proptest) of every parser that reads input from outside the
//! process. None may panic on any input; where a printed form exists, printing
//! and parsing again gives the same value; where the result has an invariant
//! (an error names its variable, a summary keeps only what it may), it holds.
//! Case counts are small for CI (`PROPTEST_CASES` raises them locally).
//!
//! The parsers here are those of the public API: every setting (environment
//! variables and flags), every argument of the agent's `Cli::command()` and the node
//! gate's, through clap and `Task::from_cli` (`node_gate::Cli::config`), so the list cannot fall
//! behind the settings; and, within them, `duration::parse`,
//! `images::parse_list` / `ImageRef::parse`, `Selector::parse` (node and sibling
//! selectors, the gate's taint key), the booleans, modes and Kubernetes names; and the
//! calendar of `selfdestruct-schedule` (the filter, the parse and the expansion), which
//! must read the same calendar however it is folded, cased or cut into pieces.
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

/// The agent's command line (`gate` false) or the node gate's (`gate` true), built (so
/// that it holds the shared, global settings too).
fn command_of(gate: bool) -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = if gate {
        selfdestruct::node_gate::Cli::command()
    } else {
        selfdestruct::Cli::command()
    };
    cmd.build();
    cmd
}

/// Every setting of the agent (`gate` false) or of the node gate (`gate` true):
/// its long flag and environment variable.
fn settings(gate: bool) -> Vec<(String, String)> {
    command_of(gate)
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env()?.to_string_lossy().to_string();
            Some((long.to_string(), env))
        })
        .collect()
}

/// Parses the settings of the agent or the gate from `argv` (after the program name)
/// as its `main` does, with no environment variables (only the flags count); `Err` is
/// the message, which must name `names`.
fn parse_settings(gate: bool, argv: &[String]) -> Result<(), String> {
    use clap::FromArgMatches;
    let command = command_of(gate).mut_args(|a| a.env(None));
    let mut full = vec![command.get_name().to_string()];
    full.extend_from_slice(argv);
    let matches = command
        .try_get_matches_from(full)
        .map_err(|e| e.to_string())?;
    if gate {
        let cli = selfdestruct::node_gate::Cli::from_arg_matches(&matches);
        cli.map_err(|e| e.to_string())?
            .config()
            .map_err(|e| e.to_string())?;
    } else {
        let cli = selfdestruct::Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        selfdestruct::Task::from_cli(&cli).map_err(|e| e.to_string())?;
    }
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
            if let Err(e) = parse_settings(false, &argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "--{long}={value:?}: {e}");
            }
        }
        for (long, env) in settings(true) {
            let mut argv = vec![format!("--{long}={value}")];
            if long != "node-name" {
                argv.push("--node-name=n1".into());
            }
            if let Err(e) = parse_settings(true, &argv) {
                prop_assert!(e.contains(&env) || e.contains(&format!("--{long}")), "selfdestruct-node-gate --{long}={value:?}: {e}");
            }
        }
    }

}

// ---------------------------------------------------------------------------------------
// The calendar of `selfdestruct-schedule`: the filter (`selfdestruct_schedule::Filter`)
// and the parse and expansion of what it keeps, on calendars in the forms calendar apps
// write (issue 46): names in any case, folded lines, VTIMEZONEs with IANA, Windows,
// prefixed and custom TZIDs, dates, floating, zoned and UTC times (some in a gap), UNTIL
// in each form, prose mentions of the word, bad counts. 64 cases each by default: each
// case reads, parses and expands one or two calendars.

use selfdestruct_schedule::{Calendar, CalendarError, Filter, Tz};

/// A calendar close to what calendar apps write, often enough valid to reach the parse.
fn calendar_like() -> impl Strategy<Value = String> {
    let zone = prop_oneof![
        Just("Europe/Berlin"),
        Just("europe/berlin"),
        Just("/mozilla.org/20070129_1/Europe/Berlin"),
        Just("W. Europe Standard Time"),
        Just("Customized Time Zone"),
        Just("Asia/Beirut"),
        Just("Mars/Olympus"),
    ];
    let day = "2026(02(2[0-8])|03(0[1-9]|[12][0-9]|3[01]))";
    // DTSTART and DTEND in one form (a date, UTC, floating or zoned; some times in
    // Berlin's gap), the end 1 to 3 hours (or days) on; now and then anything.
    let times = (
        0..5usize,
        zone.clone(),
        day,
        0u32..21,
        1u32..4,
        "[:;][0-9TZ=A-Z]{0,16}",
    )
        .prop_map(|(form, zone, day, hour, long, junk)| {
            let at = |h: u32| match form {
                0 => format!(";VALUE=DATE:{}", &day[..6]) + &format!("{:02}", h % 28 + 1),
                1 => format!(":{day}T{h:02}0000Z"),
                2 => format!(":{day}T{h:02}3000"),
                3 => format!(";TZID={zone}:{day}T{h:02}3000"),
                _ => junk.clone(),
            };
            (
                format!("DTSTART{}", at(hour)),
                format!("DTEND{}", at(hour + long)),
            )
        });
    let until = prop_oneof![
        Just(String::new()),
        day.prop_map(|d| format!(";UNTIL={d}")),
        day.prop_map(|d| format!(";UNTIL={d}T120000")),
        day.prop_map(|d| format!(";UNTIL={d}T120000Z")),
        Just(";COUNT=3".to_string()),
    ];
    let by = prop_oneof![
        Just(""),
        Just(";BYDAY=MO,WE,FR"),
        Just(";BYMONTH=2;BYMONTHDAY=30"),
        Just(";BYSETPOS=2"),
        Just(";BYDAY=-1SU;BYMONTH=3"),
        Just(";INTERVAL=0"),
    ];
    let rule = (
        "(SECONDLY|MINUTELY|HOURLY|DAILY|WEEKLY|MONTHLY|YEARLY|SOMETIMES)",
        until,
        by,
    )
        .prop_map(|(f, u, b)| format!("RRULE:FREQ={f}{u}{b}"));
    let summary =
        "[A-Za-z ]{0,8}(placeholders|PLACEHOLDERS)( ?[:=] ?[0-9]{1,3}| in Kubernetes|: lots)"
            .prop_map(|s| format!("SUMMARY:{s}"));
    let extra = prop_oneof![
        4 => rule,
        1 => (zone.clone(), day).prop_map(|(z, d)| format!("EXDATE;TZID={z}:{d}T023000")),
        2 => "DESCRIPTION:[a-z\\\\,;: ]{0,20}",
        2 => "[A-Z-]{1,10}[:;][ -~]{0,20}",
        1 => any::<String>().prop_map(|s| s.replace(['\r', '\n'], " ")),
    ];
    let event = (
        summary,
        times,
        prop::collection::vec(extra, 0..3),
        0..8usize,
    )
        .prop_map(|(summary, (start, end), extras, drop)| {
            let mut ls = vec![summary, start, end];
            ls.extend(extras);
            // Now and then without one of the three.
            if drop < 3 {
                ls.remove(drop);
            }
            format!("BEGIN:VEVENT\r\n{}END:VEVENT\r\n", lines(&ls))
        });
    let offset = "[+-](0[0-9]|1[0-4])[0-5]0";
    let observance = (
        "(STANDARD|DAYLIGHT)",
        offset,
        offset,
        "(0[1-9]|1[0-2])",
        "(-1|1|2)SU",
    )
        .prop_map(|(kind, from, to, month, day)| {
            format!(
                "BEGIN:{kind}\r\nDTSTART:19700101T020000\r\nTZOFFSETFROM:{from}\r\n\
                 TZOFFSETTO:{to}\r\nRRULE:FREQ=YEARLY;BYMONTH={month};BYDAY={day}\r\nEND:{kind}\r\n"
            )
        });
    let vtimezone = (zone, prop::collection::vec(observance, 0..3)).prop_map(|(z, os)| {
        format!(
            "BEGIN:VTIMEZONE\r\nTZID:{z}\r\n{}END:VTIMEZONE\r\n",
            os.concat()
        )
    });
    let component = prop_oneof![3 => event, 1 => vtimezone, 1 => "[A-Z:]{0,12}\r\n"];
    prop::collection::vec(component, 0..6).prop_map(|cs| {
        format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{}END:VCALENDAR\r\n",
            cs.concat()
        )
    })
}

fn lines(ls: &[String]) -> String {
    ls.iter().map(|l| format!("{l}\r\n")).collect()
}

/// `text` as a calendar app may write it: the names of properties and components in lower
/// case (RFC 5545 2.1), every line folded at `width` bytes (3.1).
fn as_written(text: &str, lower: bool, width: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for line in text.split_terminator("\r\n") {
        let mut line = line.to_string();
        if lower {
            let name_end = line.find([':', ';']).unwrap_or(line.len());
            let lowered = line[..name_end].to_ascii_lowercase();
            line.replace_range(..name_end, &lowered);
            if lowered == "begin" || lowered == "end" {
                line = line.to_ascii_lowercase();
            }
        }
        for (i, piece) in line.as_bytes().chunks(width).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\r\n ");
            }
            out.extend_from_slice(piece);
        }
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What a calendar is to the schedule: its events, the reasons of those skipped, and its
/// occurrences over the 40 days the generated times fall in (the expansion's budget
/// counted, not timed, so that it is the same for two equal calendars).
type Read = (Vec<(String, String)>, Vec<String>, Vec<(String, i64, i64)>);

fn read(bytes: &[u8], chunk: usize) -> Result<Read, CalendarError> {
    let mut filter = Filter::new();
    for piece in bytes.chunks(chunk) {
        filter.push(piece)?;
    }
    let cal = Calendar::parse_filtered(&filter.finish()?, Tz::Europe__Berlin)?;
    let from = "2026-02-20T00:00:00Z".parse().unwrap();
    let to = "2026-04-01T00:00:00Z".parse().unwrap();
    let mut asked = 0;
    let e = cal.expand(from, to, &mut || {
        asked += 1;
        asked < 40
    });
    // What an expansion promises.
    assert!(e.occurrences.len() <= selfdestruct_schedule::calendar::MAX_HELD);
    assert!(e.occurrences.is_sorted_by_key(|o| o.start));
    for o in &e.occurrences {
        assert!(
            o.start < e.until && o.start <= to && o.end > from && o.end > o.start,
            "{o:?}"
        );
        assert!(o.count <= selfdestruct_schedule::baseline::MAX_COUNT);
    }
    let events = cal
        .events
        .iter()
        .map(|e| (e.name.to_string(), format!("{:?}", e.counts)))
        .collect();
    let skipped = cal.skipped.iter().chain(&e.skipped);
    let skipped = skipped.map(|s| s.reason.clone()).collect();
    let occurrences = e.occurrences.iter();
    let occurrences =
        occurrences.map(|o| (o.name.to_string(), o.start.timestamp(), o.end.timestamp()));
    Ok((events, skipped, occurrences.collect()))
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn calendars_never_panic(text in calendar_like(), bytes in any::<Vec<u8>>(), chunk in 1usize..300) {
        let _ = read(text.as_bytes(), chunk);
        let _ = read(&bytes, chunk);
    }

    #[test]
    fn a_calendar_folded_in_lower_case_and_read_in_pieces_is_the_same(
        text in calendar_like(),
        lower in any::<bool>(),
        width in 1usize..80,
        chunk in 1usize..300,
    ) {
        let written = as_written(&text, lower, width);
        let (a, b) = (read(text.as_bytes(), 1 << 20), read(&written, chunk));
        prop_assert_eq!(a.map_err(|e| e.reason), b.map_err(|e| e.reason));
    }
}

#[test]
fn the_calendar_generator_reaches_events_that_count() {
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        proptest_config(200),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let (mut counted, mut occurring, mut skipped) = (0, 0, 0);
    for _ in 0..200 {
        let text = calendar_like()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        if let Ok((events, skips, occ)) = read(text.as_bytes(), 4096) {
            counted += usize::from(!events.is_empty());
            occurring += usize::from(!occ.is_empty());
            skipped += usize::from(!skips.is_empty());
        }
    }
    eprintln!(
        "of 200 calendars: {counted} with events that count, {occurring} with occurrences, {skipped} with skipped events"
    );
    assert!(counted > 10 && occurring > 5 && skipped > 10);
}
