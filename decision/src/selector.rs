//! Label selectors in the API's string form (`a=b,c!=d,e in (x,y),!f`), parsed to
//! validate configuration before any request and to match labels locally.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a label selector (also used for node-affinity expressions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key in (v1, v2)`, `key=v`, `key==v`
    In(String, Vec<String>),
    /// `key notin (v1)`, `key!=v`
    NotIn(String, Vec<String>),
    /// `key`
    Exists(String),
    /// `!key`
    DoesNotExist(String),
    /// `key > n` (node affinity `Gt`)
    Gt(String, i64),
    /// `key < n` (node affinity `Lt`)
    Lt(String, i64),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement, with the API server's semantics.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }

    /// The label key this requirement reads.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::Gt(k, _)
            | Requirement::Lt(k, _) => k,
        }
    }
}

/// A label selector: all requirements must hold. The empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

impl Selector {
    /// Parses the string form used by `?labelSelector=` and `kubectl -l`.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_terms(input)? {
            let term = term.trim();
            if term.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err("empty requirement between commas".into());
            }
            reqs.push(parse_term(term)?);
        }
        Ok(Selector(reqs))
    }

    /// A selector of `key=value` requirements.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        Selector(
            labels
                .iter()
                .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
                .collect(),
        )
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// True when the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                Requirement::In(k, vs) if vs.len() == 1 => format!("{k}={}", vs[0]),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) if vs.len() == 1 => format!("{k}!={}", vs[0]),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
                Requirement::Gt(k, n) => format!("{k}>{n}"),
                Requirement::Lt(k, n) => format!("{k}<{n}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
                }
            }
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    out.push(&input[start..]);
    Ok(out)
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_ok(key.trim())?));
    }
    for (op, make) in [
        (
            "!=",
            Requirement::NotIn as fn(String, Vec<String>) -> Requirement,
        ),
        ("==", Requirement::In),
        ("=", Requirement::In),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            return Ok(make(key_ok(k.trim())?, vec![value_ok(v.trim())?]));
        }
    }
    for (op, gt) in [(">", true), ("<", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let n = v
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("{:?} is not an integer", v.trim()))?;
            let k = key_ok(k.trim())?;
            return Ok(if gt {
                Requirement::Gt(k, n)
            } else {
                Requirement::Lt(k, n)
            });
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        let (op, set) = rest
            .split_once(char::is_whitespace)
            .map(|(o, s)| (o, s.trim()))
            .or_else(|| rest.find('(').map(|i| (rest[..i].trim(), &rest[i..])))
            .ok_or_else(|| format!("{term:?}: expected 'in (..)' or 'notin (..)'"))?;
        let inner = set
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("{term:?}: values must be in parentheses"))?;
        let values = inner
            .split(',')
            .map(|v| value_ok(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if values.iter().all(String::is_empty) {
            return Err(format!("{term:?}: empty value set"));
        }
        let key = key_ok(words[0])?;
        return match op {
            "in" => Ok(Requirement::In(key, values)),
            "notin" => Ok(Requirement::NotIn(key, values)),
            other => Err(format!("{term:?}: unknown operator {other:?}")),
        };
    }
    Ok(Requirement::Exists(key_ok(term)?))
}

/// Label keys: optional DNS-subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn key_ok(key: &str) -> Result<String, String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            return Err(format!("{key:?}: prefix must be a DNS subdomain"));
        }
    }
    if name.is_empty() || !name_ok(name) {
        return Err(format!("{key:?} is not a valid label key"));
    }
    Ok(key.to_string())
}

fn value_ok(value: &str) -> Result<String, String> {
    if value.is_empty() || name_ok(value) {
        Ok(value.to_string())
    } else {
        Err(format!("{value:?} is not a valid label value"))
    }
}

fn name_ok(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_form() {
        let s = Selector::parse("a=b,c==d,e!=f,g in (x, y),h notin (z),i,!j").expect("valid");
        assert_eq!(
            s.0,
            vec![
                Requirement::In("a".into(), vec!["b".into()]),
                Requirement::In("c".into(), vec!["d".into()]),
                Requirement::NotIn("e".into(), vec!["f".into()]),
                Requirement::In("g".into(), vec!["x".into(), "y".into()]),
                Requirement::NotIn("h".into(), vec!["z".into()]),
                Requirement::Exists("i".into()),
                Requirement::DoesNotExist("j".into()),
            ]
        );
        assert!(Selector::parse("").expect("empty is valid").is_empty());
        assert!(Selector::parse("  ").expect("blank is valid").is_empty());
        let prefixed = Selector::parse("hub.jupyter.org/node-purpose=user").expect("valid");
        assert_eq!(prefixed.to_string(), "hub.jupyter.org/node-purpose=user");
        assert_eq!(
            Selector::parse("a in (x,y)").expect("valid").to_string(),
            "a in (x,y)"
        );
    }

    #[test]
    fn refuses_invalid_selectors() {
        for bad in [
            "a=b,,c=d",
            "a in x",
            "a in (x",
            "a)",
            "a foo (x)",
            "-a=b",
            "a=-b",
            "Prefix_/a=b",
            "a=b c",
            "/a",
            "a>x",
            "a in ()",
            "!",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn matches_like_the_api_server() {
        let l = labels(&[("a", "b"), ("n", "5")]);
        let cases = [
            ("a=b", true),
            ("a!=b", false),
            ("a!=c", true),
            ("x!=c", true),
            ("a in (b,c)", true),
            ("a notin (b)", false),
            ("x notin (b)", true),
            ("a", true),
            ("!a", false),
            ("!x", true),
            ("a=b,x", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(Selector::parse(sel).expect(sel).matches(&l), want, "{sel}");
        }
        assert!(Requirement::Gt("n".into(), 4).matches(&l));
        assert!(!Requirement::Gt("n".into(), 5).matches(&l));
        assert!(Requirement::Lt("n".into(), 6).matches(&l));
        assert!(!Requirement::Lt("a".into(), 6).matches(&l));
    }
}
