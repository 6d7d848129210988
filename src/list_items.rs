//! Splits a Kubernetes list response (`{"kind":"NodeList","metadata":{...},"items":[...]}`)
//! into its items as the bytes arrive, so that a list of 5,000 Nodes is never
//! held whole: each item is handed over (and summarised) on its own, and only
//! the list without its items is kept, to read `kind` and `metadata`.

/// A list response being split; feed it the body in any chunks.
#[derive(Debug, Default)]
pub struct ItemSplitter {
    /// The document without the items' contents (`"items":[]`).
    rest: Vec<u8>,
    /// The item being read.
    item: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    expect_key: bool,
    in_key: bool,
    /// The last key of the top-level object.
    key: Vec<u8>,
    in_items: bool,
    items: usize,
    error: Option<String>,
}

impl ItemSplitter {
    /// A splitter at the start of a document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `bytes`, calling `on_item` with each complete item of `items`.
    pub fn feed(&mut self, bytes: &[u8], mut on_item: impl FnMut(&[u8])) {
        for &b in bytes {
            if self.error.is_some() {
                return;
            }
            let in_item = self.in_items && self.depth >= 3;
            if self.in_string {
                self.sink(in_item).push(b);
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.in_key = false;
                } else if self.in_key {
                    self.key.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    if self.in_items && self.depth == 2 {
                        self.error = Some("an item of the list is not an object".into());
                        return;
                    }
                    self.in_string = true;
                    if self.depth == 1 && self.expect_key {
                        self.in_key = true;
                        self.key.clear();
                    }
                    self.sink(in_item).push(b);
                }
                b'[' if self.depth == 1 && !self.expect_key && self.key == b"items" => {
                    self.in_items = true;
                    self.depth = 2;
                    self.rest.push(b);
                }
                b'{' | b'[' => {
                    if self.in_items && self.depth == 2 {
                        self.item.clear();
                    }
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expect_key = true;
                    }
                    let in_item = self.in_items && self.depth >= 3;
                    self.sink(in_item).push(b);
                }
                b'}' | b']' => {
                    if self.depth == 0 {
                        self.error = Some("unbalanced brackets".into());
                        return;
                    }
                    self.sink(in_item).push(b);
                    self.depth -= 1;
                    if self.in_items && self.depth == 2 {
                        on_item(&self.item);
                        self.items += 1;
                        self.item.clear();
                    } else if self.in_items && self.depth == 1 {
                        self.in_items = false;
                    }
                }
                b':' if self.depth == 1 => {
                    self.expect_key = false;
                    self.rest.push(b);
                }
                b',' if self.depth == 1 => {
                    self.expect_key = true;
                    self.rest.push(b);
                }
                // Between items: commas and white space are dropped with the items.
                b',' | b' ' | b'\t' | b'\r' | b'\n' if self.in_items && self.depth == 2 => {}
                _ if self.in_items && self.depth == 2 => {
                    self.error = Some("an item of the list is not an object".into());
                    return;
                }
                _ => self.sink(in_item).push(b),
            }
        }
    }

    fn sink(&mut self, in_item: bool) -> &mut Vec<u8> {
        if in_item {
            &mut self.item
        } else {
            &mut self.rest
        }
    }

    /// How many items were handed over.
    pub fn items(&self) -> usize {
        self.items
    }

    /// The document without its items (`"items":[]`), once it is complete.
    pub fn finish(self) -> Result<Vec<u8>, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.depth != 0 || self.in_string || self.rest.is_empty() {
            return Err("the list response ended early".into());
        }
        Ok(self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn split(doc: &[u8], chunk: usize) -> Result<(Vec<Value>, Value), String> {
        let mut s = ItemSplitter::new();
        let mut items = Vec::new();
        for part in doc.chunks(chunk.max(1)) {
            s.feed(part, |item| {
                items.push(serde_json::from_slice(item).expect("an item is valid JSON"));
            });
        }
        assert_eq!(s.items(), items.len());
        let rest = s.finish()?;
        let rest = serde_json::from_slice(&rest).map_err(|e| e.to_string())?;
        Ok((items, rest))
    }

    fn list() -> Value {
        json!({
            "kind": "NodeList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "42", "continue": "abc", "items": ["not these"]},
            "items": [
                {"metadata": {"name": "n1", "annotations": {"x": "a \"quoted\" } ] { [ string \\"}},
                 "status": {"images": [{"names": ["a", "b"]}, {"names": []}]}},
                {"metadata": {"name": "n2"}, "spec": {}},
                {}
            ],
            "trailing": {"items": [1, 2]}
        })
    }

    #[test]
    fn items_are_handed_over_one_by_one_in_any_chunking() {
        let doc = list();
        for text in [
            serde_json::to_vec(&doc).expect("json"),
            serde_json::to_vec_pretty(&doc).expect("json"),
        ] {
            for chunk in [1, 2, 3, 7, 64, 100_000] {
                let (items, rest) = split(&text, chunk).expect("splits");
                assert_eq!(Value::Array(items), doc["items"], "chunk {chunk}");
                let mut without = doc.clone();
                without["items"] = json!([]);
                assert_eq!(rest, without, "chunk {chunk}");
            }
        }
    }

    #[test]
    fn empty_and_missing_items() {
        let (items, rest) = split(br#"{"kind":"PodList","items":[]}"#, 5).expect("splits");
        assert!(items.is_empty());
        assert_eq!(rest["kind"], "PodList");
        let (items, rest) = split(br#"{"kind":"Status","code":410}"#, 5).expect("splits");
        assert!(items.is_empty());
        assert_eq!(rest["code"], 410);
    }

    #[test]
    fn broken_documents_are_errors() {
        for doc in [
            &br#"{"kind":"NodeList","items":[{"a":1}"#[..],
            br#"{"items":[1,2]}"#,
            br#"{"items":["x"]}"#,
            br#"{"a":"unterminated"#,
            br#"}"#,
            b"",
        ] {
            assert!(
                split(doc, 3).is_err(),
                "{:?} should fail",
                String::from_utf8_lossy(doc)
            );
        }
    }
}
