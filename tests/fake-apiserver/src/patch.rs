//! RFC 6902 JSON patch and RFC 7386 JSON merge patch on `serde_json::Value`.

use serde_json::Value;

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// Malformed patch document or unknown op (kube-apiserver: 400).
    BadRequest(String),
    /// A well-formed operation failed (`test` failed, missing path; 422).
    Failed(String),
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| PatchError::Failed(format!("invalid JSON pointer: {path:?}")))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn parent_and_last<'a>(
    doc: &'a mut Value,
    path: &str,
) -> Result<(&'a mut Value, String), PatchError> {
    let mut tokens = split_pointer(path)?;
    let last = tokens
        .pop()
        .ok_or_else(|| PatchError::Failed("cannot operate on the whole document".into()))?;
    let mut cur = doc;
    for t in &tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| {
            PatchError::Failed(format!("doc is missing path: \"{path}\": missing value"))
        })?;
    }
    Ok((cur, last))
}

fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(doc);
    }
    doc.pointer(path)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent_and_last(doc, path)?;
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let idx = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(|| {
                        PatchError::Failed(format!("Unable to access invalid index: {last}"))
                    })?
            };
            a.insert(idx, value);
            Ok(())
        }
        _ => Err(PatchError::Failed(format!(
            "doc is missing path: \"{path}\": missing value"
        ))),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parent, last) = parent_and_last(doc, path)?;
    let missing = || PatchError::Failed(format!("doc is missing path: \"{path}\": missing value"));
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let idx = last
                .parse::<usize>()
                .ok()
                .filter(|i| *i < a.len())
                .ok_or_else(missing)?;
            Ok(a.remove(idx))
        }
        _ => Err(missing()),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let target = doc.pointer_mut(path).ok_or_else(|| {
        PatchError::Failed(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        ))
    })?;
    *target = value;
    Ok(())
}

/// Applies an RFC 6902 JSON patch (ops add, remove, replace, move, copy, test).
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = patch.as_array().ok_or_else(|| {
        PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        )
    })?;
    for op in ops {
        let obj = op.as_object().ok_or_else(|| {
            PatchError::BadRequest(
                "json: cannot unmarshal into Go value of type jsonpatch.Operation".into(),
            )
        })?;
        let kind = obj.get("op").and_then(Value::as_str).unwrap_or("");
        let path = obj
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| PatchError::BadRequest(format!("operation missing path: {op}")))?;
        let value = || {
            obj.get("value")
                .cloned()
                .ok_or_else(|| PatchError::BadRequest(format!("operation missing value: {op}")))
        };
        let from = || {
            obj.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| PatchError::BadRequest(format!("operation missing from: {op}")))
        };
        match kind {
            "add" => add(doc, path, value()?)?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => replace(doc, path, value()?)?,
            "move" => {
                let v = remove(doc, from()?)?;
                add(doc, path, v)?;
            }
            "copy" => {
                let v = get(doc, from()?).cloned().ok_or_else(|| {
                    PatchError::Failed(format!(
                        "copy operation does not apply: doc is missing from path: {}",
                        from().unwrap_or("")
                    ))
                })?;
                add(doc, path, v)?;
            }
            "test" => {
                let want = value()?;
                if get(doc, path) != Some(&want) {
                    return Err(PatchError::Failed(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => return Err(PatchError::BadRequest(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(())
}

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(doc: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !doc.is_object() {
                *doc = Value::Object(serde_json::Map::new());
            }
            if let Value::Object(d) = doc {
                for (k, v) in p {
                    if v.is_null() {
                        d.remove(k);
                    } else {
                        merge_patch(d.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *doc = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops() {
        let mut doc =
            json!({"metadata": {"labels": {"a": "1"}}, "spec": {"taints": [{"key": "x"}]}});
        let patch = json!([
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "3"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "y"}},
            {"op": "remove", "path": "/spec/taints/0"},
            {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/c"},
            {"op": "move", "from": "/metadata/labels/c", "path": "/metadata/labels/d"}
        ]);
        json_patch(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a": "3", "b/c": "2", "d": "3"}}, "spec": {"taints": [{"key": "y"}]}})
        );
    }

    #[test]
    fn test_failure_and_unknown_op() {
        let mut doc = json!({"a": 1});
        assert_eq!(
            json_patch(&mut doc, &json!([{"op": "test", "path": "/a", "value": 2}])),
            Err(PatchError::Failed(
                "testing value /a failed: test failed".into()
            ))
        );
        assert!(matches!(
            json_patch(&mut doc, &json!([{"op": "frobnicate", "path": "/a"}])),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            json_patch(&mut doc, &json!({"op": "add"})),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])),
            Err(PatchError::Failed(_))
        ));
    }

    #[test]
    fn merge() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(&mut doc, &json!({"a": {"b": null, "e": 3}, "d": [2]}));
        assert_eq!(doc, json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }
}
