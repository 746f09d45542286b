//! Masks what might be a secret in the text of `runtime.yaml` (and of
//! `worker.yaml`, whose secrets are written the same way) shown in excerpts.
//!
//! A secret belongs in the environment or a file, but a user may still paste one
//! into the file, under the right key or a wrong one. Diagnostics never repeat
//! values; this keeps the source excerpts beside them from doing so. Works on the
//! parsed node tree, so it can only run on text that parses.

use crate::diagnostic::{Position, Span};
use crate::model::runtime::SecretRef;
use crate::yaml::{Node, NodeValue};

/// Fields whose values are safe to show in an excerpt (unless they are URLs with
/// credentials). Every other value that is not a valid reference is masked: it
/// may be a secret written in the wrong place or under a misspelled key.
const SHOWN: &[&str] = &[
    "apiVersion",
    "kind",
    "active",
    "listen",
    "path",
    "digest",
    "product",
    "dispatch",
    "workers",
    "baseUrl",
    "type",
    "tokenEndpoint",
    "clientId",
    "keyId",
    "scope",
    "connectSeconds",
    "requestSeconds",
    "observeFloorSeconds",
    "scheduleFloorSeconds",
    "shutdownGraceSeconds",
    "endedRunsDays",
    "filter",
    "format",
    "endpoint",
    "protocol",
    "serviceName",
    "sampleRatio",
    "subject",
    "roles",
    "issuer",
    "audience",
    "jwks",
    "workflow",
    "address",
    "concurrency",
];

/// The text of `runtime.yaml` or `worker.yaml` for excerpts, with every value that might be a
/// secret replaced by `*` (one per character, so lines and columns do not move).
/// Shown: references, and the values of [`SHOWN`] fields; the entries of
/// `payloadKeys.keys` are always secrets.
pub fn redact(root: &Node, text: &str) -> String {
    let mut masked = Vec::new();
    mask(root, None, false, &mut masked);
    let mut out = String::with_capacity(text.len());
    let (mut line, mut column) = (1, 1);
    for c in text.chars() {
        let here = Position { line, column };
        let hidden = !c.is_whitespace() && masked.iter().any(|s: &Span| s.start <= here && here < s.end);
        out.push(if hidden { '*' } else { c });
        if c == '\n' {
            (line, column) = (line + 1, 1);
        } else {
            column += 1;
        }
    }
    out
}

/// Collects the spans to mask under `node`, the value of the field `key`.
fn mask(node: &Node, key: Option<&str>, secret: bool, out: &mut Vec<Span>) {
    match &node.value {
        NodeValue::Map(entries) => {
            let keys = key == Some("keys");
            for (k, v) in entries {
                mask(v, Some(&k.text), keys, out);
            }
        }
        NodeValue::Seq(items) => items.iter().for_each(|item| mask(item, key, secret, out)),
        NodeValue::String(s) if SecretRef::parse(s).is_ok() => {}
        NodeValue::String(s) if has_credentials(s) => out.push(node.span),
        _ if secret || key.is_some_and(|k| !SHOWN.contains(&k)) => out.push(node.span),
        _ => {}
    }
}

/// Whether a string is a URL carrying credentials (it is masked in excerpts).
fn has_credentials(text: &str) -> bool {
    text.split_once("://").is_some_and(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default().contains('@'))
}

#[cfg(test)]
mod tests {
    use super::has_credentials;

    #[test]
    fn urls_with_user_information_carry_credentials() {
        assert!(has_credentials("postgres://u:p@h/db"));
        assert!(has_credentials("https://token@h"));
        assert!(!has_credentials("https://h/a@b"));
        assert!(!has_credentials("env:A@B"));
    }
}
