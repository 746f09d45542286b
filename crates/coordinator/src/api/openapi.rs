//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of the routes this API
//! serves, written by hand as data (`openapi.json` next to this file). The
//! `openapi` integration test fails when the document and the router's table
//! ([`super::endpoints`]) disagree.
//!
//! Anyone gets the generic document. A caller whose bearer token
//! authenticates gets the document of this deployment
//! ([`for_deployment`]): `AdmitRequest` is one variant per active workflow
//! the caller may admit — its name, its active revision and its input
//! schema — and a supplied `runId` is described with the window of
//! timestamps the service accepts as of the moment the document is served
//! ([`run_id_window`]), so that a request valid by the document is one the
//! service admits.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use coordinator_core::model::runtime::Role;
use serde_json::{Map, Value, json};

use super::ApiState;
use super::auth::optional_caller;
use crate::auth::access::Principal;
use crate::engine::Engine;
use crate::engine::run_id::{MAX_AGE_MS, MAX_AHEAD_MS};

/// The document, as served.
pub(super) const DOCUMENT: &str = include_str!("openapi.json");

/// How much narrower than the service's own the described window is at each
/// end, so that an id generated from the document stays valid while a client
/// uses it (a test run, a batch): ten minutes.
const WINDOW_MARGIN_MS: i64 = 10 * 60 * 1000;

/// `200` with the generic document, or this deployment's for an authenticated caller.
pub(super) async fn document(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let own = match optional_caller(&headers, &state).await {
        Some(caller) => for_deployment(&state.engine, &caller).await,
        None => None,
    };
    match own.and_then(|doc| serde_json::to_string(&doc).ok()) {
        Some(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        None => ([(header::CONTENT_TYPE, "application/json")], DOCUMENT).into_response(),
    }
}

/// The generic document, parsed once.
fn generic() -> Option<&'static Value> {
    static PARSED: OnceLock<Option<Value>> = OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(DOCUMENT).ok()).as_ref()
}

/// The document for `caller`: `None` (the generic one) when it may admit no
/// active workflow, or when the deployment's workflows cannot be read now.
async fn for_deployment(engine: &Engine, caller: &Principal) -> Option<Value> {
    let mut variants = Vec::new();
    let mut inputs = Map::new();
    for active in engine.store().active_revisions().await.ok()? {
        if !caller.holds(Role::Admit, &active.workflow) {
            continue;
        }
        let workflow = engine.workflow(&active.revision).await.ok()?;
        let component = format!("Input-{}", active.workflow);
        inputs.insert(component.clone(), relocated(&workflow.definition.input, &component));
        variants.push(variant(&active.workflow, &active.revision, &component, engine.now()));
    }
    if variants.is_empty() {
        return None;
    }
    let mut doc = generic()?.clone();
    let schemas = doc.pointer_mut("/components/schemas")?.as_object_mut()?;
    schemas.extend(inputs);
    schemas.insert(
        "AdmitRequest".into(),
        json!({
            "description": "One variant per active workflow this caller may admit: its name, its active revision and its input schema (this deployment's document, as of when it was served).",
            "oneOf": variants,
        }),
    );
    Some(doc)
}

/// One workflow's admission.
fn variant(workflow: &str, revision: &str, input: &str, now: i64) -> Value {
    let window = run_id_window(now - MAX_AGE_MS + WINDOW_MARGIN_MS, now + MAX_AHEAD_MS - WINDOW_MARGIN_MS);
    json!({
        "type": "object",
        "required": ["workflow", "revision", "input"],
        "additionalProperties": false,
        "properties": {
            "workflow": {"const": workflow},
            "revision": {"const": revision, "description": "The active revision."},
            "input": {"$ref": format!("#/components/schemas/{input}")},
            "idempotencyKey": {"anyOf": [{"$ref": "#/components/schemas/Name"}, {"type": "null"}], "description": "Scoped to the caller and workflow; null is the same as absent (no key)."},
            "runId": {
                "anyOf": [{"type": "string", "format": "uuid", "pattern": window}, {"type": "null"}],
                "description": "A UUIDv7 chosen by the caller whose timestamp lies within the last 24 h and at most 1 h ahead of the service's clock; the pattern is that window as of when this document was served, ten minutes narrower at each end. null is the same as absent."
            }
        }
    })
}

/// `schema` placed at `#/components/schemas/{component}`: its own `#…`
/// references rewritten to point there, and a root `$id` dropped (it would
/// make them resolve elsewhere).
fn relocated(schema: &Value, component: &str) -> Value {
    fn walk(value: &mut Value, prefix: &str) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get_mut("$ref")
                    && let Some(pointer) = target.strip_prefix('#')
                {
                    *target = format!("{prefix}{pointer}");
                }
                map.values_mut().for_each(|v| walk(v, prefix));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, prefix)),
            _ => {}
        }
    }
    let mut schema = schema.clone();
    if let Value::Object(map) = &mut schema {
        map.remove("$id");
    }
    walk(&mut schema, &format!("#/components/schemas/{component}"));
    schema
}

/// A pattern matching the hyphenated UUIDv7s (either case) whose timestamp
/// lies in `[from, to]` (ms since the epoch).
pub(crate) fn run_id_window(from: i64, to: i64) -> String {
    let digits = |ms: i64| -> Vec<u8> {
        let ms = u64::try_from(ms.max(0)).unwrap_or(0).min((1 << 48) - 1);
        (0..12).rev().map(|i| u8::try_from((ms >> (4 * i)) & 0xf).unwrap_or(0)).collect()
    };
    let alternatives: Vec<String> = ranges(&digits(from), &digits(to.max(from)))
        .into_iter()
        .map(|classes| {
            let mut text = String::new();
            for (i, class) in classes.iter().enumerate() {
                if i == 8 {
                    text.push('-');
                }
                text.push_str(class);
            }
            text
        })
        .collect();
    let hex = "[0-9a-fA-F]";
    format!("^(?:{})-7{hex}{{3}}-{hex}{{4}}-{hex}{{12}}$", alternatives.join("|"))
}

/// The digit strings from `lo` to `hi` (same length, `lo <= hi`) as
/// alternatives, each a character class per digit.
fn ranges(lo: &[u8], hi: &[u8]) -> Vec<Vec<String>> {
    let (Some((&l, lo_rest)), Some((&h, hi_rest))) = (lo.split_first(), hi.split_first()) else {
        return vec![Vec::new()];
    };
    let prefixed = |digit: String, rest: Vec<Vec<String>>| -> Vec<Vec<String>> {
        rest.into_iter().map(|r| std::iter::once(digit.clone()).chain(r).collect()).collect()
    };
    if l == h {
        return prefixed(class(l, l), ranges(lo_rest, hi_rest));
    }
    let (zeros, fs) = (vec![0; lo_rest.len()], vec![15; hi_rest.len()]);
    let mut out = Vec::new();
    // From `lo` to the end of its first digit; a first digit wholly covered joins the middle.
    let (first, last) = (if lo_rest == zeros { l } else { l + 1 }, if hi_rest == fs { h } else { h - 1 });
    if first != l {
        out.extend(prefixed(class(l, l), ranges(lo_rest, &fs)));
    }
    if first <= last {
        out.extend(prefixed(class(first, last), vec![vec!["[0-9a-fA-F]".to_owned(); lo_rest.len()]]));
    }
    if last != h {
        out.extend(prefixed(class(h, h), ranges(&zeros, hi_rest)));
    }
    out
}

/// A character class of the hex digits `from..=to`, either case.
fn class(from: u8, to: u8) -> String {
    let chars: String = (from..=to)
        .flat_map(|d| {
            let lower = char::from_digit(u32::from(d), 16).unwrap_or('0');
            let upper = lower.to_ascii_uppercase();
            if lower == upper { vec![lower] } else { vec![lower, upper] }
        })
        .collect();
    if chars.chars().count() == 1 { chars } else { format!("[{chars}]") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v7_at(ms: i64) -> String {
        let secs = u64::try_from(ms / 1000).unwrap_or_default();
        let nanos = u32::try_from((ms % 1000) * 1_000_000).unwrap_or_default();
        uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, secs, nanos)).to_string()
    }

    #[test]
    fn the_window_pattern_matches_exactly_the_ids_of_its_window() {
        let now = 1_796_083_200_123_i64;
        let (from, to) = (now - MAX_AGE_MS, now + MAX_AHEAD_MS);
        let schema = json!({"type": "string", "pattern": run_id_window(from, to)});
        let pattern = coordinator_core::json_schema::compile(&schema).unwrap_or_else(|e| panic!("{e}"));
        for ms in [from, from + 1, now, to - 1, to, from + 65_535, from + 65_536, to - 4096] {
            let id = v7_at(ms);
            assert!(pattern.is_valid(&json!(&id)), "{ms}: {id}");
            assert!(pattern.is_valid(&json!(&id.to_uppercase())), "{ms}: upper case");
        }
        for ms in [from - 1, to + 1, 0, now - 2 * MAX_AGE_MS, now + 10 * MAX_AHEAD_MS] {
            assert!(!pattern.is_valid(&json!(&v7_at(ms))), "{ms} is outside");
        }
        let v4 = "0199c8a0-5c2e-4d41-9b3a-6f1e2d4c8a10";
        assert!(!pattern.is_valid(&json!(v4)), "another version");
    }

    #[test]
    fn a_relocated_schema_refers_to_its_new_place() {
        let schema = json!({"$id": "urn:x", "type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}});
        let moved = relocated(&schema, "Input-w");
        assert_eq!(moved["properties"]["a"]["$ref"], "#/components/schemas/Input-w/$defs/a");
        assert!(moved.get("$id").is_none());
    }
}
