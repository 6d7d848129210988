//! The settings layer (the `clap` feature): the parser every typed setting goes
//! through ([`Setting`]), the shared value parsers, and the policy settings
//! ([`PolicySettings`]) that the agent and `simulate` both take, with their defaults
//! and the lifetime-range rule. Nothing here knows the agent.
//!
//! A setting that may be unset is typed `std::option::Option<T>` (the spelling with
//! which clap's derive leaves the whole type to the parser; `std::vec::Vec` likewise)
//! with a hidden empty default: its parser sees every value and reads an empty one (a
//! chart's unset value) as unset.

use std::ffi::OsStr;
use std::time::Duration;

use clap::builder::{BoolishValueParser, TypedValueParser};
use clap::error::ErrorKind;

use crate::Policy;
use crate::duration;
use crate::images::{self, ImageRef};

/// An invalid setting: its name (`VARIABLE (--flag)`, or the flag alone), the value
/// given and the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {setting} = {value:?}: expected {expected}")]
pub struct SettingError {
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
pub struct Setting<P>(pub P);

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
            let error = SettingError {
                setting,
                value: shown(&value.to_string_lossy(), SHOWN_CHARS),
                expected: shown(&expected, REASON_CHARS),
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

/// The longest value a refusal repeats, and the longest reason: longer is cut, with its
/// length said (a reason may quote the value).
const SHOWN_CHARS: usize = 200;
const REASON_CHARS: usize = 1000;

/// `value` as a refusal repeats it: cut at `limit` characters.
fn shown(value: &str, limit: usize) -> String {
    match value.char_indices().nth(limit) {
        Some((end, _)) => format!(
            "{}... ({} characters)",
            &value[..end],
            value.chars().count()
        ),
        None => value.to_string(),
    }
}

/// The longest duration accepted anywhere (100 years, `100y`: humantime's year is
/// 365.25 days): longer is a typo.
const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

const DURATION_FORM: &str = "a duration such as 90s, 15m or 1h30m";

/// A duration of at most 100 years.
pub fn duration(value: &str) -> Result<Duration, String> {
    match duration::parse(value) {
        Ok(d) if d > MAX_DURATION => Err(format!("{DURATION_FORM}, at most 100 years (100y)")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{DURATION_FORM} ({e})")),
    }
}

/// `parse`, or unset if the value is empty.
pub fn unset_or<T>(
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

/// Comma-separated image references.
pub fn image_list(value: &str) -> Result<Vec<ImageRef>, String> {
    images::parse_list(value).map_err(|e| {
        format!("comma-separated image references such as quay.io/jupyter/scipy-notebook:2024-05-01 ({e})")
    })
}

/// The images a node must hold: the agent's new-node trigger and `node-gate` both read it.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ImageSettings {
    /// Comma-separated images a new node must hold before it counts (node-gate: before
    /// the gate opens) [default: none]
    #[arg(long, env = "SELFDESTRUCT_REQUIRED_IMAGES", value_name = "IMAGES", default_value = "",
          hide_default_value = true, value_parser = Setting(image_list))]
    pub required_images: std::vec::Vec<ImageRef>,
}

/// The decision policy's settings, as the agent and `simulate` take them. The
/// required images are apart ([`ImageSettings`]): the simulator has no image names.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct PolicySettings {
    /// Shortest lifetime, counted from the pod's start [0 or unset: no timer]
    #[arg(long, env = "SELFDESTRUCT_MIN_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub min_lifetime: std::option::Option<Duration>,
    /// Longest lifetime; the lifetime is drawn uniformly from [min, max]
    #[arg(long, env = "SELFDESTRUCT_MAX_LIFETIME", value_name = "DURATION", default_value = "",
          hide_default_value = true, value_parser = Setting(unset_or(duration)))]
    pub max_lifetime: std::option::Option<Duration>,
    /// Move when a newer node is Ready (needs read access to Nodes)
    #[arg(long, env = "SELFDESTRUCT_MOVE_TO_NEW_NODES", value_name = "BOOL",
          default_value_t = Policy::DEFAULT_MOVE_TO_NEW_NODES, hide_possible_values = true, action = clap::ArgAction::Set,
          value_parser = Setting(BoolishValueParser::new()))]
    pub move_to_new_nodes: bool,
    /// How long a new node must be Ready before it counts
    #[arg(long, env = "SELFDESTRUCT_NODE_SETTLE", value_name = "DURATION",
          default_value = Policy::DEFAULT_NODE_SETTLE, value_parser = Setting(duration))]
    pub node_settle: Duration,
    /// Random delay before acting on a trigger, re-checked after it
    #[arg(long, env = "SELFDESTRUCT_MOVE_JITTER", value_name = "DURATION",
          default_value = Policy::DEFAULT_MOVE_JITTER, value_parser = Setting(duration))]
    pub move_jitter: Duration,
    /// Cap on own eviction attempts per hour [0: no cap]
    #[arg(long, env = "SELFDESTRUCT_MAX_MOVES_PER_HOUR", value_name = "N",
          default_value_t = Policy::DEFAULT_MAX_MOVES_PER_HOUR,
          value_parser = Setting(whole_number))]
    pub max_moves_per_hour: u32,
    /// No move while the own pod is younger than this
    #[arg(long, env = "SELFDESTRUCT_MIN_AGE", value_name = "DURATION",
          default_value = Policy::DEFAULT_MIN_AGE, value_parser = Setting(duration))]
    pub min_age: Duration,
    /// No move to a node the cluster autoscaler marks as a deletion candidate (its soft
    /// DeletionCandidateOfClusterAutoscaler taint)
    #[arg(long, env = "SELFDESTRUCT_AVOID_DELETION_CANDIDATES", value_name = "BOOL",
          default_value_t = Policy::DEFAULT_AVOID_DELETION_CANDIDATES, hide_possible_values = true,
          action = clap::ArgAction::Set, value_parser = Setting(BoolishValueParser::new()))]
    pub avoid_deletion_candidates: bool,
}

impl PolicySettings {
    /// The policy these settings give with `required_images`. The lifetime range:
    /// `MAX_LIFETIME=0` is off, one bound alone fixes it, and the minimum may not
    /// exceed the maximum.
    pub fn policy(&self, required_images: Vec<ImageRef>) -> Result<Policy, SettingError> {
        let lifetime = match (self.min_lifetime, self.max_lifetime) {
            (None, None) => None,
            (_, Some(hi)) if hi.is_zero() => None,
            (Some(m), None) | (None, Some(m)) => Some((m, m)),
            (Some(lo), Some(hi)) if lo > hi => {
                return Err(SettingError {
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
        Ok(Policy {
            lifetime,
            move_to_new_nodes: self.move_to_new_nodes,
            node_settle: self.node_settle,
            required_images,
            move_jitter: self.move_jitter,
            max_moves_per_hour: self.max_moves_per_hour,
            min_age: self.min_age,
            avoid_deletion_candidates: self.avoid_deletion_candidates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46, item 18: a 100,000-character value is not repeated whole.
    #[test]
    fn a_refusal_repeats_at_most_200_characters_of_the_value() {
        assert_eq!(shown("abc", SHOWN_CHARS), "abc");
        let cut = shown(&"é".repeat(100_000), SHOWN_CHARS);
        assert_eq!(cut, format!("{}... (100000 characters)", "é".repeat(200)));
    }

    /// Issue 46, item 18: `100y` was refused as more than 100 years (humantime's year is
    /// 365.25 days, the cap counted 365).
    #[test]
    fn a_hundred_years_is_the_longest_duration() {
        assert_eq!(duration("100y"), Ok(Duration::from_secs(3_155_760_000)));
        assert_eq!(duration("36525d"), duration("100y"));
        for longer in ["100y 1s", "36526d", "101y"] {
            let refused = duration(longer).expect_err(longer);
            assert!(refused.ends_with("at most 100 years (100y)"), "{refused}");
        }
    }

    /// Issue 46, item 18: a duration or a 100,000-character name was taken as an image.
    #[test]
    fn required_images_are_image_references() {
        for bad in ["-5s", &"a".repeat(100_000), "nginx,-5s"] {
            let refused = image_list(bad).expect_err("not an image reference");
            assert!(
                refused.starts_with("comma-separated image references"),
                "{refused}"
            );
            assert!(refused.len() < 300, "{} bytes", refused.len());
        }
    }
}
