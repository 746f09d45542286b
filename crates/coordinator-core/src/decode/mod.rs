//! Decoding YAML node trees into the project model, reporting every problem.
//!
//! Owns the field-by-field conversion with `schema.*` diagnostics at exact
//! positions. Decoding continues past errors so that all independent problems
//! are reported at once; a value with an error decodes to `None`. Does not
//! check cross-references (steps, functions, operations): that is [`check`](crate::check).

pub mod catalog;
pub mod runtime;
pub mod scenarios;
pub mod worker;
pub mod workflow;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic, Span};
use crate::yaml::{Key, Node, NodeValue};

/// Collects diagnostics while decoding one file.
pub struct Decoder<'f> {
    /// The file name used in diagnostics.
    pub file: &'f str,
    /// What was found so far.
    pub diagnostics: Vec<Diagnostic>,
}

/// The fields of a mapping that passed the known/required checks.
pub struct Fields<'n> {
    node: &'n Node,
}

impl<'n> Fields<'n> {
    /// The value of a field, if present.
    pub fn get(&self, name: &str) -> Option<&'n Node> {
        self.node.get(name)
    }

    /// The span of a field's key (where a problem inside its value that has no
    /// position of its own, such as a missing field, is reported).
    pub fn key_span(&self, name: &str) -> Span {
        self.node.entry(name).map_or(self.node.span, |(k, _)| k.span)
    }
}

impl<'f> Decoder<'f> {
    /// A decoder for `file`.
    pub fn new(file: &'f str) -> Self {
        Decoder { file, diagnostics: Vec::new() }
    }

    /// Reports a problem.
    pub fn report(&mut self, code: Code, span: Span, message: impl Into<String>, help: impl Into<String>) {
        self.diagnostics.push(Diagnostic::error(code, self.file, span, message, help));
    }

    /// Reports `schema.invalid-value`.
    pub fn invalid(&mut self, span: Span, message: impl Into<String>, help: impl Into<String>) {
        self.report(Code::SchemaInvalidValue, span, message, help);
    }

    /// Checks that `node` is a mapping with only `known` fields and all `required` ones.
    /// `what` names the mapping in messages; `owner` is where a missing field is reported
    /// (usually the key that holds the mapping).
    pub fn object<'n>(
        &mut self,
        node: &'n Node,
        what: &str,
        owner: Span,
        known: &[&str],
        required: &[&str],
    ) -> Option<Fields<'n>> {
        let NodeValue::Map(entries) = &node.value else {
            self.invalid(
                node.span,
                format!("{what} must be a mapping, found {}", node.kind()),
                format!("write {what} as `key: value` lines; its fields are: {}", known.join(", ")),
            );
            return None;
        };
        let mut misspelled = Vec::new();
        for (key, _) in entries {
            if !known.contains(&key.text.as_str()) {
                misspelled.extend(closest(&key.text, known));
                let hint = match closest(&key.text, known) {
                    Some(near) => format!("did you mean `{near}`? The fields of {what} are: {}", known.join(", ")),
                    None => format!("remove it; the fields of {what} are: {}", known.join(", ")),
                };
                self.report(
                    Code::SchemaUnknownField,
                    key.span,
                    format!("unknown field `{}` in {what}", key.text),
                    hint,
                );
            }
        }
        for name in required {
            // A misspelled key already has its diagnostic ("did you mean …?"); saying the
            // field is missing too would report one mistake twice.
            if node.get(name).is_none() && !misspelled.contains(name) {
                self.report(
                    Code::SchemaMissingField,
                    owner,
                    format!("{what} has no `{name}`"),
                    format!("add the required field `{name}`"),
                );
            }
        }
        Some(Fields { node })
    }

    /// A string value.
    pub fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match &node.value {
            NodeValue::String(s) => Some(s.clone()),
            _ => {
                self.invalid(
                    node.span,
                    format!("{what} must be a string, found {}", node.kind()),
                    "quote the value if it is meant as text",
                );
                None
            }
        }
    }

    /// A string naming something: letters, digits, `-` and `_`, at most 64 characters.
    pub fn name(&mut self, node: &Node, what: &str) -> Option<String> {
        let text = self.string(node, what)?;
        self.check_name(&text, node.span, what).then_some(text)
    }

    /// Reports a name that is not a valid identifier; returns whether it is valid.
    pub fn check_name(&mut self, text: &str, span: Span, what: &str) -> bool {
        if is_name(text) {
            return true;
        }
        self.invalid(
            span,
            format!("{what} `{}` is not a valid name", text.escape_default()),
            "use 1 to 64 letters, digits, `-` or `_`, starting with a letter or digit",
        );
        false
    }

    /// A non-negative integer at least `min`.
    pub fn uint(&mut self, node: &Node, what: &str, min: u64) -> Option<u64> {
        let value = match &node.value {
            NodeValue::Number(n) => n.as_u64(),
            _ => None,
        };
        match value {
            Some(v) if v >= min => Some(v),
            _ => {
                self.invalid(
                    node.span,
                    format!("{what} must be a whole number of at least {min}, found {}", node.kind()),
                    format!("write a whole number such as {}", min.max(1)),
                );
                None
            }
        }
    }

    /// A number at least `min`.
    pub fn number(&mut self, node: &Node, what: &str, min: f64) -> Option<f64> {
        let value = match &node.value {
            NodeValue::Number(n) => n.as_f64(),
            _ => None,
        };
        match value {
            Some(v) if v >= min => Some(v),
            _ => {
                self.invalid(
                    node.span,
                    format!("{what} must be a number of at least {min}, found {}", node.kind()),
                    format!("write a number such as {min}"),
                );
                None
            }
        }
    }

    /// Any number, whole or not (YAML `1` and `1.0` alike), for the caller to
    /// check the range of.
    pub fn float(&mut self, node: &Node, what: &str) -> Option<f64> {
        let value = match &node.value {
            NodeValue::Number(n) => n.as_f64(),
            _ => None,
        };
        match value {
            Some(v) => Some(v),
            None => {
                self.invalid(
                    node.span,
                    format!("{what} must be a number, found {}", node.kind()),
                    "write a number without quotes, such as 0.5",
                );
                None
            }
        }
    }

    /// A boolean.
    pub fn boolean(&mut self, node: &Node, what: &str) -> Option<bool> {
        match &node.value {
            NodeValue::Bool(b) => Some(*b),
            _ => {
                self.invalid(
                    node.span,
                    format!("{what} must be `true` or `false`, found {}", node.kind()),
                    "write `true` or `false`",
                );
                None
            }
        }
    }

    /// One of a fixed set of strings.
    pub fn one_of<T: Copy>(&mut self, node: &Node, what: &str, options: &[(&str, T)]) -> Option<T> {
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        if let NodeValue::String(s) = &node.value {
            if let Some((_, v)) = options.iter().find(|(n, _)| n == s) {
                return Some(*v);
            }
            let hint = match closest(s, &names) {
                Some(near) => format!("did you mean `{near}`? Allowed: {}", names.join(", ")),
                None => format!("allowed: {}", names.join(", ")),
            };
            self.invalid(node.span, format!("{what} `{}` is not one of the allowed values", s.escape_default()), hint);
        } else {
            self.invalid(
                node.span,
                format!("{what} must be a string, found {}", node.kind()),
                format!("allowed: {}", names.join(", ")),
            );
        }
        None
    }

    /// Any value, as JSON.
    pub fn json(&mut self, node: &Node) -> Value {
        node.to_json()
    }

    /// A mapping of named entries, each decoded by `entry`. Keys must be valid names
    /// when `names` is set. `None` if the node is not a mapping or any entry failed.
    pub fn map_of<'n, T>(
        &mut self,
        node: &'n Node,
        what: &str,
        names: bool,
        mut entry: impl FnMut(&mut Self, &'n Key, &'n Node) -> Option<T>,
    ) -> Option<BTreeMap<String, T>> {
        let NodeValue::Map(entries) = &node.value else {
            self.invalid(
                node.span,
                format!("{what} must be a mapping, found {}", node.kind()),
                format!("write {what} as `name: value` lines"),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (key, value) in entries {
            if names && !self.check_name(&key.text, key.span, what) {
                ok = false;
            }
            match entry(self, key, value) {
                Some(v) => {
                    out.insert(key.text.clone(), v);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A sequence, each item decoded by `item`.
    pub fn seq_of<'n, T>(
        &mut self,
        node: &'n Node,
        what: &str,
        mut item: impl FnMut(&mut Self, usize, &'n Node) -> Option<T>,
    ) -> Option<Vec<T>> {
        let NodeValue::Seq(items) = &node.value else {
            self.invalid(
                node.span,
                format!("{what} must be a sequence, found {}", node.kind()),
                format!("write {what} as a list (`- …` lines or `[…]`)"),
            );
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, node) in items.iter().enumerate() {
            match item(self, i, node) {
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// Decodes an optional field: `Some(None)` when absent, `Some(Some(v))` when present
/// and valid, `None` when present and invalid (the decoder has reported why).
pub fn optional<T>(node: Option<&Node>, decode: impl FnOnce(&Node) -> Option<T>) -> Option<Option<T>> {
    match node {
        None => Some(None),
        Some(n) => decode(n).map(Some),
    }
}

/// Whether `text` is a valid name (ids of steps, aliases, outcomes, connections…).
pub fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && text.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Splits `<name>/v<N>`; `None` if the text does not have that shape.
pub fn versioned(text: &str) -> Option<(&str, u32)> {
    let (name, version) = text.rsplit_once("/v")?;
    let version: u32 = version.parse().ok().filter(|v| *v >= 1)?;
    let lower_name = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    lower_name.then_some((name, version))
}

/// Splits `<product>.<name>/v<N>` into product and `<name>/v<N>`.
pub fn qualified(text: &str) -> Option<(&str, &str)> {
    let (product, rest) = text.split_once('.')?;
    let product_ok = product.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && product.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (product_ok && versioned(rest).is_some()).then_some((product, rest))
}

/// The candidate nearest to `word` by edit distance, if it is close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 4).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_operation_names() {
        assert!(is_name("send-notice"));
        assert!(!is_name("-x"));
        assert!(!is_name("a b"));
        assert_eq!(qualified("breg.read-record/v1"), Some(("breg", "read-record/v1")));
        assert_eq!(qualified("breg.read-record"), None);
        assert_eq!(qualified("Breg.read-record/v1"), None);
        assert_eq!(versioned("read/v0"), None);
    }

    #[test]
    fn typos_find_their_field() {
        assert_eq!(closest("nxt", &["next", "input", "operation"]), Some("next"));
        assert_eq!(closest("zzzzzz", &["next", "input"]), None);
    }
}
