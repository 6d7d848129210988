//! The YAML that kubeconfig files are written in: block mappings and sequences
//! (sequences may sit at their key's indentation, as kubectl writes them),
//! plain, single- and double-quoted scalars, empty flow collections (`{}`, `[]`)
//! and comments. A file whose first character is `{` is read as JSON. Anything
//! else (anchors, tags, block scalars, non-empty flow collections) is refused
//! with its line number rather than misread: a full YAML parser would double
//! the size of the binary for a file that only local runs read.

use std::fmt;

/// A parsed YAML value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Yaml {
    /// A scalar, unquoted and unescaped (`true` and `8` stay strings).
    Str(String),
    /// A sequence.
    Seq(Vec<Yaml>),
    /// A mapping, in file order.
    Map(Vec<(String, Yaml)>),
    /// An empty value, `null` or `~`.
    Null,
}

impl Yaml {
    /// The value under `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The scalar, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items of a sequence (none for anything else).
    pub fn items(&self) -> &[Yaml] {
        match self {
            Yaml::Seq(items) => items,
            _ => &[],
        }
    }
}

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct YamlError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong there.
    pub what: String,
}

struct Line {
    no: usize,
    indent: usize,
    text: String,
}

/// Parses one document.
pub fn parse(text: &str) -> Result<Yaml, YamlError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| YamlError {
            line: e.line(),
            what: format!("invalid JSON: {e}"),
        })?;
        return Ok(from_json(value));
    }
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let content = strip_comment(raw);
        let trimmed = content.trim_start_matches(' ');
        if trimmed.starts_with('\t') {
            return Err(err(no, "a tab in the indentation"));
        }
        let body = trimmed.trim_end();
        if body.is_empty() || (lines.is_empty() && body == "---") {
            continue;
        }
        if body == "---" || body == "..." {
            // A second document: kubeconfig files have one.
            break;
        }
        lines.push(Line {
            no,
            indent: content.len() - trimmed.len(),
            text: body.to_string(),
        });
    }
    if lines.is_empty() {
        return Ok(Yaml::Null);
    }
    let mut p = Parser { lines, at: 0 };
    let indent = p.lines[0].indent;
    let value = p.block(indent)?;
    if let Some(l) = p.lines.get(p.at) {
        return Err(err(l.no, "unexpected indentation"));
    }
    Ok(value)
}

fn err(line: usize, what: &str) -> YamlError {
    YamlError {
        line,
        what: what.to_string(),
    }
}

fn from_json(v: serde_json::Value) -> Yaml {
    use serde_json::Value;
    match v {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Str(b.to_string()),
        Value::Number(n) => Yaml::Str(n.to_string()),
        Value::String(s) => Yaml::Str(s),
        Value::Array(a) => Yaml::Seq(a.into_iter().map(from_json).collect()),
        Value::Object(o) => Yaml::Map(o.into_iter().map(|(k, v)| (k, from_json(v))).collect()),
    }
}

/// Cuts a comment: `#` at the start or after white space, outside quotes.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let after_space = i == 0 || matches!(bytes[i - 1], b' ' | b'\t');
        match quote {
            Some(b'"') if b == b'\\' => i += 1,
            Some(q) if b == q => {
                if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                    i += 1;
                } else {
                    quote = None;
                }
            }
            Some(_) => {}
            None if b == b'#' && after_space => return &line[..i],
            // A quote opens a scalar only where a scalar starts.
            None if (b == b'"' || b == b'\'')
                && (after_space || matches!(bytes[i - 1], b':' | b'-' | b'[' | b'{' | b',')) =>
            {
                quote = Some(b);
            }
            None => {}
        }
        i += 1;
    }
    line
}

struct Parser {
    lines: Vec<Line>,
    at: usize,
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

impl Parser {
    fn block(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        match self.lines.get(self.at) {
            Some(l) if is_item(&l.text) => self.seq(indent),
            Some(l) if split_key(&l.text, l.no)?.is_some() => self.map(indent),
            Some(l) => {
                let (no, text) = (l.no, l.text.clone());
                self.at += 1;
                self.plain_continued(scalar(&text, no)?, indent.saturating_sub(1))
            }
            None => Ok(Yaml::Null),
        }
    }

    /// The value after `key:` or `-` with nothing on its line: a nested block, or null.
    fn nested(&mut self, parent: usize, seq_allowed_at_parent: bool) -> Result<Yaml, YamlError> {
        match self.lines.get(self.at) {
            Some(l) if l.indent > parent => self.block(l.indent),
            Some(l) if seq_allowed_at_parent && l.indent == parent && is_item(&l.text) => {
                self.seq(parent)
            }
            _ => Ok(Yaml::Null),
        }
    }

    /// Lines indented deeper than `parent` after a plain scalar continue it.
    fn plain_continued(&mut self, value: Yaml, parent: usize) -> Result<Yaml, YamlError> {
        let Yaml::Str(mut s) = value else {
            return Ok(value);
        };
        while let Some(l) = self.lines.get(self.at).filter(|l| l.indent > parent) {
            if l.text.starts_with(['"', '\'']) || split_key(&l.text, l.no)?.is_some() {
                return Err(err(l.no, "unexpected indentation"));
            }
            s.push(' ');
            s.push_str(&l.text);
            self.at += 1;
        }
        Ok(Yaml::Str(s))
    }

    fn map(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        while let Some(l) = self.lines.get(self.at) {
            if l.indent < indent || (l.indent == indent && is_item(&l.text)) {
                break;
            }
            if l.indent > indent {
                return Err(err(l.no, "unexpected indentation"));
            }
            let no = l.no;
            let Some((key, rest)) = split_key(&l.text, no)? else {
                return Err(err(no, "expected `key: value`"));
            };
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(err(no, &format!("duplicate key {key:?}")));
            }
            self.at += 1;
            let value = if rest.is_empty() {
                self.nested(indent, true)?
            } else {
                let v = scalar(&rest, no)?;
                self.plain_continued_if_plain(v, &rest, indent)?
            };
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }

    fn plain_continued_if_plain(
        &mut self,
        v: Yaml,
        raw: &str,
        indent: usize,
    ) -> Result<Yaml, YamlError> {
        if raw.starts_with(['"', '\'', '{', '[']) {
            Ok(v)
        } else {
            self.plain_continued(v, indent)
        }
    }

    fn seq(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        let mut items = Vec::new();
        while let Some(l) = self.lines.get(self.at) {
            if l.indent != indent || !is_item(&l.text) {
                if l.indent > indent {
                    return Err(err(l.no, "unexpected indentation"));
                }
                break;
            }
            let rest = l.text[1..].trim_start_matches(' ');
            if rest.is_empty() {
                self.at += 1;
                items.push(self.nested(indent, false)?);
                continue;
            }
            // `- key: value` or `- - x`: the rest is a block at its own column.
            let column = indent + (l.text.len() - rest.len());
            let (no, rest) = (l.no, rest.to_string());
            if is_item(&rest) || split_key(&rest, no)?.is_some() {
                self.lines[self.at] = Line {
                    no,
                    indent: column,
                    text: rest,
                };
                items.push(self.block(column)?);
            } else {
                self.at += 1;
                let v = scalar(&rest, no)?;
                items.push(self.plain_continued_if_plain(v, &rest, indent)?);
            }
        }
        Ok(Yaml::Seq(items))
    }
}

/// `key: rest` (rest may be empty), or `None` when the line is not a mapping entry.
fn split_key(text: &str, no: usize) -> Result<Option<(String, String)>, YamlError> {
    let (key, after) = if text.starts_with(['"', '\'']) {
        let (key, used) = quoted(text, no)?;
        let after = &text[used..];
        match after.strip_prefix(':') {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => (key, rest),
            _ => return Ok(None),
        }
    } else {
        let colon = text
            .match_indices(':')
            .map(|(i, _)| i)
            .find(|&i| text[i + 1..].is_empty() || text[i + 1..].starts_with(' '));
        match colon {
            Some(i) => (text[..i].trim_end().to_string(), &text[i + 1..]),
            None => return Ok(None),
        }
    };
    if key.starts_with(['?', '&', '*', '!', '{', '[']) {
        return Err(err(no, "complex keys, anchors and tags are not supported"));
    }
    Ok(Some((key, after.trim().to_string())))
}

/// A scalar value (the whole rest of a line).
fn scalar(text: &str, no: usize) -> Result<Yaml, YamlError> {
    match text {
        "{}" => return Ok(Yaml::Map(Vec::new())),
        "[]" => return Ok(Yaml::Seq(Vec::new())),
        "~" | "null" | "Null" | "NULL" => return Ok(Yaml::Null),
        _ => {}
    }
    if text.starts_with(['"', '\'']) {
        let (s, used) = quoted(text, no)?;
        if !text[used..].trim().is_empty() {
            return Err(err(no, "text after a quoted scalar"));
        }
        return Ok(Yaml::Str(s));
    }
    if text.starts_with(['{', '[']) {
        return Err(err(
            no,
            "flow collections other than {} and [] are not supported: write the block form",
        ));
    }
    if text.starts_with(['&', '*', '!', '|', '>', '%', '@', '`']) {
        return Err(err(
            no,
            "anchors, aliases, tags and block scalars are not supported",
        ));
    }
    Ok(Yaml::Str(text.to_string()))
}

/// A quoted scalar at the start of `text`: the string and the bytes used.
fn quoted(text: &str, no: usize) -> Result<(String, usize), YamlError> {
    let q = text.as_bytes()[0];
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' if q == b'\'' => {
                if text[i + 1..].starts_with('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok((out, i + 1));
                }
            }
            '"' if q == b'"' => return Ok((out, i + 1)),
            '\\' if q == b'"' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '"' | '\\' | '/' | ' ' => out.push(e),
                    'u' | 'x' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = chars.by_ref().take(len).map(|(_, c)| c).collect();
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == len)
                            .and_then(char::from_u32)
                            .ok_or_else(|| err(no, "invalid escape"))?;
                        out.push(c);
                    }
                    _ => return Err(err(no, "invalid escape")),
                }
            }
            c => out.push(c),
        }
    }
    Err(err(
        no,
        "unterminated quoted scalar (multi-line quotes are not supported)",
    ))
}

impl fmt::Display for Yaml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Yaml::Str(s) => write!(f, "{s:?}"),
            Yaml::Null => f.write_str("null"),
            Yaml::Seq(items) => f.debug_list().entries(items).finish(),
            Yaml::Map(entries) => f
                .debug_map()
                .entries(entries.iter().map(|(k, v)| (k, v)))
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Yaml {
        Yaml::Str(v.into())
    }

    fn map(entries: &[(&str, Yaml)]) -> Yaml {
        Yaml::Map(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn reads_a_kubeconfig_as_kubectl_writes_it() {
        let text = "\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTg==
    server: https://127.0.0.1:6443 # the API server
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    namespace: \"placeholders\"
    user: 'kind-kind'
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    token: abc#notacomment
";
        let y = parse(text).expect("valid");
        assert_eq!(y.get("current-context"), Some(&s("kind-kind")));
        assert_eq!(y.get("preferences"), Some(&Yaml::Map(vec![])));
        let cluster = &y.get("clusters").expect("clusters").items()[0];
        assert_eq!(
            cluster.get("cluster").and_then(|c| c.get("server")),
            Some(&s("https://127.0.0.1:6443"))
        );
        assert_eq!(cluster.get("name"), Some(&s("kind-kind")));
        let ctx = &y.get("contexts").expect("contexts").items()[0];
        assert_eq!(
            ctx.get("context"),
            Some(&map(&[
                ("cluster", s("kind-kind")),
                ("namespace", s("placeholders")),
                ("user", s("kind-kind")),
            ]))
        );
        let user = &y.get("users").expect("users").items()[0];
        assert_eq!(
            user.get("user").and_then(|u| u.get("token")),
            Some(&s("abc#notacomment"))
        );
    }

    #[test]
    fn indented_sequences_nested_sequences_and_nulls() {
        let y = parse("a:\n  - x\n  -\n    k: v\n  - - 1\n    - 2\nb:\nc: ~\n").expect("valid");
        assert_eq!(
            y.get("a"),
            Some(&Yaml::Seq(vec![
                s("x"),
                map(&[("k", s("v"))]),
                Yaml::Seq(vec![s("1"), s("2")]),
            ]))
        );
        assert_eq!(y.get("b"), Some(&Yaml::Null));
        assert_eq!(y.get("c"), Some(&Yaml::Null));
    }

    #[test]
    fn quoted_scalars_and_escapes() {
        let y = parse(
            "a: \"x: \\\"y\\\" \\u00e9 # not a comment\"\nb: 'it''s'\n\"c d\": 1\nurl: http://h:1/p\n",
        )
        .expect("valid");
        assert_eq!(y.get("a"), Some(&s("x: \"y\" é # not a comment")));
        assert_eq!(y.get("b"), Some(&s("it's")));
        assert_eq!(y.get("c d"), Some(&s("1")));
        assert_eq!(y.get("url"), Some(&s("http://h:1/p")));
    }

    #[test]
    fn plain_scalars_continue_on_deeper_lines() {
        let y = parse("a: one\n  two\nb: x\n").expect("valid");
        assert_eq!(y.get("a"), Some(&s("one two")));
        assert_eq!(y.get("b"), Some(&s("x")));
    }

    #[test]
    fn json_is_read_as_json() {
        let y = parse("{\"a\": [1, true, null], \"b\": {\"c\": \"d\"}}").expect("valid");
        assert_eq!(
            y.get("a"),
            Some(&Yaml::Seq(vec![s("1"), s("true"), Yaml::Null]))
        );
        assert_eq!(y.get("b").and_then(|b| b.get("c")), Some(&s("d")));
    }

    #[test]
    fn documents_and_comments() {
        assert_eq!(parse("").expect("empty"), Yaml::Null);
        assert_eq!(parse("# only a comment\n").expect("empty"), Yaml::Null);
        let y = parse("---\n# c\na: 1 # c\n...\nb: 2\n").expect("valid");
        assert_eq!(y, map(&[("a", s("1"))]));
    }

    #[test]
    fn refuses_what_it_cannot_read_with_the_line() {
        let cases = [
            ("a: &x 1\n", 1),
            ("a: *x\n", 1),
            ("a: |\n  text\n", 1),
            ("a: [1, 2]\n", 1),
            ("a: {b: c}\n", 1),
            ("a: 1\n   b: 2\n", 2),
            ("a: 1\na: 2\n", 2),
            ("a:\n\t- x\n", 2),
            ("a: \"open\n", 1),
            ("- x\nb: 1\n", 2),
            ("a: 'x' y\n", 1),
            ("{\"a\": }", 1),
        ];
        for (text, line) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
    }
}
