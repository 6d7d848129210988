//! Label selectors (`a=b,c!=d,e in (x,y),!f`), field selectors, `LabelSelector`
//! objects and node-affinity `NodeSelectorRequirement`s.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// Operator of one requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `a=b`, `a==b`
    Equals,
    /// `a!=b` (also true when the label is missing)
    NotEquals,
    /// `a in (x,y)`
    In,
    /// `a notin (x,y)` (also true when the label is missing)
    NotIn,
    /// `a`
    Exists,
    /// `!a`
    DoesNotExist,
    /// `a>3` (integer compare)
    Gt,
    /// `a<3` (integer compare)
    Lt,
}

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: Op,
    /// Values (one for `=`/`!=`/`>`/`<`, a set for `in`/`notin`, none otherwise).
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.op {
            Op::Equals | Op::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Op::NotEquals | Op::NotIn => value.is_none_or(|v| self.values.iter().all(|x| x != v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt | Op::Lt => {
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Op::Gt {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// A parsed label selector: all requirements must hold (comma = AND).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// The requirements.
    pub requirements: Vec<Requirement>,
}

fn valid_key(key: &str) -> bool {
    if key.is_empty() || key.len() > 317 {
        return false;
    }
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'))
    {
        return false;
    }
    valid_value(name) && !name.is_empty()
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && value
            .chars()
            .next()
            .is_none_or(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .last()
            .is_none_or(|c| c.is_ascii_alphanumeric())
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    format!("unable to parse requirement: unbalanced ')' in {input:?}")
                })?;
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!(
            "unable to parse requirement: unbalanced '(' in {input:?}"
        ));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            format!("unable to parse requirement: found '{rest}', expected: '(' in {whole:?}")
        })?;
    let mut values = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        if !valid_value(v) {
            return Err(format!(
                "unable to parse requirement: invalid label value: {v:?}"
            ));
        }
        values.push(v.to_string());
    }
    Ok(values)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        if !valid_key(key) {
            return Err(format!(
                "unable to parse requirement: invalid label key {key:?}"
            ));
        }
        return Ok(Requirement {
            key: key.to_string(),
            op: Op::DoesNotExist,
            values: vec![],
        });
    }
    let key_end = part
        .find(|c: char| c.is_whitespace() || matches!(c, '=' | '!' | '(' | '<' | '>'))
        .unwrap_or(part.len());
    let (key, rest) = part.split_at(key_end);
    if !valid_key(key) {
        return Err(format!(
            "unable to parse requirement: invalid label key {key:?}"
        ));
    }
    let key = key.to_string();
    let rest = rest.trim_start();
    let single = |op: Op, value: &str| -> Result<Requirement, String> {
        let value = value.trim();
        if !valid_value(value) {
            return Err(format!(
                "unable to parse requirement: invalid label value: {value:?}"
            ));
        }
        if matches!(op, Op::Gt | Op::Lt) && value.parse::<i64>().is_err() {
            return Err(format!(
                "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {value:?}"
            ));
        }
        Ok(Requirement {
            key: key.clone(),
            op,
            values: vec![value.to_string()],
        })
    };
    if rest.is_empty() {
        return Ok(Requirement {
            key,
            op: Op::Exists,
            values: vec![],
        });
    }
    if let Some(v) = rest.strip_prefix("!=") {
        return single(Op::NotEquals, v);
    }
    if let Some(v) = rest.strip_prefix("==") {
        return single(Op::Equals, v);
    }
    if let Some(v) = rest.strip_prefix('=') {
        return single(Op::Equals, v);
    }
    if let Some(v) = rest.strip_prefix('>') {
        return single(Op::Gt, v);
    }
    if let Some(v) = rest.strip_prefix('<') {
        return single(Op::Lt, v);
    }
    for (word, op) in [("notin", Op::NotIn), ("in", Op::In)] {
        if let Some(v) = rest.strip_prefix(word)
            && v.starts_with(|c: char| c.is_whitespace() || c == '(')
        {
            return Ok(Requirement {
                key,
                op,
                values: parse_set(v, part)?,
            });
        }
    }
    Err(format!(
        "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
    ))
}

impl Selector {
    /// Parses the `labelSelector` query syntax. An empty string selects everything.
    pub fn parse(input: &str) -> Result<Self, String> {
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        let requirements = split_top_level(input)?
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { requirements })
    }

    /// A selector from a `metav1.LabelSelector` (matchLabels and matchExpressions).
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (k, v) in ls.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: k.clone(),
                op: Op::Equals,
                values: vec![v.clone()],
            });
        }
        for e in ls.match_expressions.iter().flatten() {
            let op = match e.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(Requirement {
                key: e.key.clone(),
                op,
                values: e.values.clone().unwrap_or_default(),
            });
        }
        Ok(Self { requirements })
    }

    /// Converts back into a `metav1.LabelSelector` (`=` becomes matchLabels).
    pub fn to_label_selector(&self) -> LabelSelector {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let mut match_labels = BTreeMap::new();
        let mut exprs = Vec::new();
        for r in &self.requirements {
            let (operator, values) = match r.op {
                Op::Equals => {
                    match_labels
                        .insert(r.key.clone(), r.values.first().cloned().unwrap_or_default());
                    continue;
                }
                Op::In => ("In", Some(r.values.clone())),
                Op::NotEquals | Op::NotIn => ("NotIn", Some(r.values.clone())),
                Op::Exists => ("Exists", None),
                Op::DoesNotExist => ("DoesNotExist", None),
                Op::Gt | Op::Lt => continue,
            };
            exprs.push(LabelSelectorRequirement {
                key: r.key.clone(),
                operator: operator.to_string(),
                values,
            });
        }
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Like [`Selector::matches`] for optional labels.
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.matches(labels.unwrap_or(&EMPTY))
    }

    /// Matches the `metadata.labels` of an object in JSON form.
    pub fn matches_json(&self, object: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels: BTreeMap<String, String> = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches(&labels)
    }

    /// True when the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// One `fieldSelector` requirement (`spec.nodeName=x`, `metadata.name!=y`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Field path, e.g. `spec.nodeName`.
    pub field: String,
    /// `true` for `!=`.
    pub negated: bool,
    /// Value compared against.
    pub value: String,
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// Requirements, all must hold.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a field selector, accepting only `supported` field paths.
    pub fn parse(input: &str, supported: &[&str]) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, negated, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                negated,
                value: value.trim().to_string(),
            });
        }
        Ok(Self { requirements })
    }

    /// Matches an object in JSON form (missing fields compare as "").
    pub fn matches_json(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let pointer = format!("/{}", r.field.replace('.', "/"));
            let have = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (have == r.value) != r.negated
        })
    }
}

/// Node affinity `matchExpressions` requirement against node labels.
pub fn node_requirement_matches(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let op = match req.operator.as_str() {
        "In" => Op::In,
        "NotIn" => Op::NotIn,
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        "Gt" => Op::Gt,
        "Lt" => Op::Lt,
        _ => return false,
    };
    Requirement {
        key: req.key.clone(),
        op,
        values: req.values.clone().unwrap_or_default(),
    }
    .matches(labels)
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
    fn full_syntax() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("env", "prod")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "missing!=x",
            "app in (web,db)",
            "app in (web)",
            "tier notin (back)",
            "missing notin (x)",
            "app",
            "!missing",
            "app=web,tier=front",
            "app in (db, web),env,!missing",
            " app = web , tier in ( front ) ",
            "app.kubernetes.io/name notin (x)",
        ];
        for s in yes {
            let sel = Selector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(sel.matches(&l), "{s} should match");
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db,x)",
            "tier notin (front)",
            "missing",
            "!app",
            "app=web,tier=back",
        ];
        for s in no {
            let sel = Selector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(!sel.matches(&l), "{s} should not match");
        }
    }

    #[test]
    fn gt_lt() {
        let l = labels(&[("n", "5")]);
        assert!(Selector::parse("n>3").unwrap().matches(&l));
        assert!(!Selector::parse("n<3").unwrap().matches(&l));
    }

    #[test]
    fn rejects_bad_syntax() {
        for bad in [
            "a in x",
            "a in (x",
            "=x",
            "a=b=c",
            "a notin",
            "a in (x),(",
            "a b",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn label_selector_round_trip() {
        let sel = Selector::parse("app=web,tier in (a,b),!x,y").unwrap();
        let ls = sel.to_label_selector();
        let back = Selector::from_label_selector(&ls).unwrap();
        let l = labels(&[("app", "web"), ("tier", "a"), ("y", "")]);
        assert!(back.matches(&l));
        assert!(!back.matches(&labels(&[("app", "web"), ("tier", "c"), ("y", "")])));
    }

    #[test]
    fn field_selector() {
        let f = FieldSelector::parse(
            "spec.nodeName=node-a,metadata.name!=x",
            &["spec.nodeName", "metadata.name"],
        )
        .unwrap();
        let obj = serde_json::json!({"metadata": {"name": "p"}, "spec": {"nodeName": "node-a"}});
        assert!(f.matches_json(&obj));
        let obj = serde_json::json!({"metadata": {"name": "x"}, "spec": {"nodeName": "node-a"}});
        assert!(!f.matches_json(&obj));
        let empty = FieldSelector::parse("spec.nodeName=", &["spec.nodeName"]).unwrap();
        assert!(empty.matches_json(&serde_json::json!({"spec": {}})));
        assert_eq!(
            FieldSelector::parse("spec.foo=x", &["spec.nodeName"]).unwrap_err(),
            "field label not supported: spec.foo"
        );
    }
}
