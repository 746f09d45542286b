//! Decodes `scenarios.yaml` into [`ScenariosFile`], field by field.
//!
//! Checks the shape of every case: known and required fields, types, allowed
//! values, unique case ids, RFC 3339 admission instants, and receipts that carry
//! an output exactly when found. Does not check that the steps, outcomes and
//! replies a case names fit the workflow: that needs the workflow and belongs to
//! the scenario runner.

use std::collections::BTreeMap;

use chrono::DateTime;

use crate::diagnostic::{Code, Span};
use crate::model::run::{EffectState, RunState};
use crate::model::scenarios::{
    Case, Expect, ExpectedFiring, FiringsCase, Notification, OperatorAction, OperatorActions, ReceiptResult, Reply,
    ScenariosFile, ScenariosKind,
};
use crate::model::{API_VERSION, ApiVersion};
use crate::yaml::{Key, Node, NodeValue};

use super::{Decoder, optional};

const CASE_FIELDS: &[&str] =
    &["id", "admittedAt", "input", "replies", "operator", "cancelAtSeconds", "notifications", "expect"];
const CASE_REQUIRED: &[&str] = &["id", "admittedAt", "input", "expect"];
const EXPECT_FIELDS: &[&str] =
    &["path", "state", "outcome", "output", "failure", "elapsedSeconds", "effects", "observations"];
const REPLY_FIELDS: &[&str] =
    &["type", "output", "completions", "code", "retryAfterSeconds", "value", "result", "times"];

/// The `type` of a reply, before its fields are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyType {
    Accepted,
    Refused,
    Retryable,
    Uncertain,
    Pending,
    Complete,
    Receipt,
}

const REPLY_TYPES: &[(&str, ReplyType)] = &[
    ("accepted", ReplyType::Accepted),
    ("refused", ReplyType::Refused),
    ("retryable", ReplyType::Retryable),
    ("uncertain", ReplyType::Uncertain),
    ("pending", ReplyType::Pending),
    ("complete", ReplyType::Complete),
    ("receipt", ReplyType::Receipt),
];
const RECEIPT_RESULTS: &[(&str, ReceiptResult)] = &[
    ("found", ReceiptResult::Found),
    ("not-found", ReceiptResult::NotFound),
    ("expired", ReceiptResult::Expired),
    ("unavailable", ReceiptResult::Unavailable),
];
const OPERATOR_ACTIONS: &[(&str, OperatorAction)] = &[
    ("reconcile", OperatorAction::Reconcile),
    ("retry-same", OperatorAction::RetrySame),
    ("cancel", OperatorAction::Cancel),
];

/// Decodes a parsed `scenarios.yaml`. `None` when a value is wrong or missing; an
/// unknown field is reported without making the result `None`, so any error
/// diagnostic refuses the file.
pub fn decode(d: &mut Decoder<'_>, root: &Node) -> Option<ScenariosFile> {
    let top = ["apiVersion", "kind", "cases", "firings"];
    let f = d.object(root, "the scenarios file", Span::at(1, 1), &top, &top[..2])?;
    let api_version = f.get("apiVersion").and_then(|n| d.one_of(n, "apiVersion", &[(API_VERSION, ApiVersion::V1)]));
    let kind = f.get("kind").and_then(|n| d.one_of(n, "kind", &[("Scenarios", ScenariosKind::Scenarios)]));
    // Case id -> line of its first use, for the duplicate message (one namespace for both lists).
    let mut seen = BTreeMap::new();
    let cases = match f.get("cases") {
        None => Some(Vec::new()),
        Some(n) => cases(d, n, &mut seen),
    };
    let firings = match f.get("firings") {
        None => Some(Vec::new()),
        Some(n) => d.seq_of(n, "`firings`", |d, _, item| firings_case(d, item, &mut seen)),
    };
    if f.get("cases").is_none() && f.get("firings").is_none() {
        d.report(
            Code::SchemaMissingField,
            Span::at(1, 1),
            "the scenarios file has neither `cases` nor `firings`",
            "add `cases` (runs) or `firings` (a schedule's firings); a file without either tests nothing",
        );
        return None;
    }
    Some(ScenariosFile { api_version: api_version?, kind: kind?, cases: cases?, firings: firings? })
}

const FIRINGS_FIELDS: &[&str] = &["id", "schedule", "from", "until", "expect"];

fn firings_case(d: &mut Decoder<'_>, node: &Node, seen: &mut BTreeMap<String, usize>) -> Option<FiringsCase> {
    let f = d.object(node, "a firings case", node.span, FIRINGS_FIELDS, FIRINGS_FIELDS)?;
    let id = f.get("id").and_then(|n| case_id(d, n, seen));
    let schedule = f.get("schedule").and_then(|n| d.name(n, "the schedule id"));
    let from = f.get("from").and_then(|n| instant(d, n, "from"));
    let until = f.get("until").and_then(|n| instant(d, n, "until"));
    let expect = f.get("expect").and_then(|n| {
        d.seq_of(n, "`expect`", |d, _, item| {
            let g = d.object(item, "an expected firing", item.span, &["at", "input"], &["at"])?;
            let at = g.get("at").and_then(|n| instant(d, n, "at"));
            let input = g.get("input").map(|n| d.json(n));
            Some(ExpectedFiring { at: at?, input })
        })
    });
    Some(FiringsCase { id: id?, schedule: schedule?, from: from?, until: until?, expect: expect? })
}

fn cases(d: &mut Decoder<'_>, node: &Node, seen: &mut BTreeMap<String, usize>) -> Option<Vec<Case>> {
    let cases = d.seq_of(node, "`cases`", |d, _, item| case(d, item, seen))?;
    if cases.is_empty() {
        d.invalid(node.span, "`cases` is empty", "add at least one case; a file without cases tests nothing");
        return None;
    }
    Some(cases)
}

fn case(d: &mut Decoder<'_>, node: &Node, seen: &mut BTreeMap<String, usize>) -> Option<Case> {
    let what = match node.get("id").map(|n| &n.value) {
        Some(NodeValue::String(id)) => format!("case `{}`", id.escape_default()),
        _ => "a case".to_owned(),
    };
    let f = d.object(node, &what, node.span, CASE_FIELDS, CASE_REQUIRED)?;
    let id = f.get("id").and_then(|n| case_id(d, n, seen));
    let admitted_at = f.get("admittedAt").and_then(|n| instant(d, n, "admittedAt"));
    let input = f.get("input").map(|n| d.json(n));
    let replies = optional(f.get("replies"), |n| {
        by_step(d, n, "`replies`", |d, key, v| {
            d.seq_of(v, &format!("the replies of step `{}`", key.text), |d, i, r| reply(d, &key.text, i, r))
        })
    });
    let operator = optional(f.get("operator"), |n| by_step(d, n, "`operator`", operator_actions));
    let cancel_at_seconds = optional(f.get("cancelAtSeconds"), |n| d.uint(n, "cancelAtSeconds", 0));
    let notifications =
        optional(f.get("notifications"), |n| d.seq_of(n, "`notifications`", |d, _, item| notification(d, item)));
    let expect = f.get("expect").and_then(|n| expect(d, n, f.key_span("expect")));
    Some(Case {
        id: id?,
        admitted_at: admitted_at?,
        input: input?,
        replies: replies?.unwrap_or_default(),
        operator: operator?.unwrap_or_default(),
        cancel_at_seconds: cancel_at_seconds?,
        notifications: notifications?.unwrap_or_default(),
        expect: expect?,
    })
}

fn case_id(d: &mut Decoder<'_>, node: &Node, seen: &mut BTreeMap<String, usize>) -> Option<String> {
    let id = d.name(node, "the case id")?;
    if let Some(first) = seen.get(&id) {
        d.invalid(
            node.span,
            format!("the case id `{id}` is used twice (first at line {first})"),
            "give every case its own id",
        );
        return None;
    }
    seen.insert(id.clone(), node.span.start.line);
    Some(id)
}

/// An RFC 3339 instant, kept as written.
fn instant(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<String> {
    let text = d.string(node, what)?;
    if let Err(reason) = check_instant(&text) {
        d.invalid(
            node.span,
            format!("{what} `{}` is not an RFC 3339 instant: {reason}", text.escape_default()),
            "write a date, `T`, a time and an offset, e.g. `2026-10-09T09:00:00Z` or `2026-10-09T11:00:00+02:00`",
        );
        return None;
    }
    Some(text)
}

/// Checks `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` with real calendar dates.
///
/// Parsing is chrono's, the same parser the machine uses for instants, so a
/// decoded `admittedAt` is always usable; on top of it the date and time must be
/// separated by `T` (chrono also takes a space, which RFC 3339's grammar does not).
/// A leap second (`23:59:60`) is accepted, as RFC 3339 and chrono allow.
fn check_instant(text: &str) -> Result<(), String> {
    if text.len() > 10 && !matches!(text.as_bytes().get(10), Some(b'T' | b't')) {
        return Err("the date and the time must be separated by `T`".to_owned());
    }
    DateTime::parse_from_rfc3339(text).map(|_| ()).map_err(|e| e.to_string())
}

/// A mapping keyed by step ids: each key must be a name; every entry is decoded
/// even when its key is bad, so all problems are reported.
fn by_step<'n, T>(
    d: &mut Decoder<'_>,
    node: &'n Node,
    what: &str,
    mut entry: impl FnMut(&mut Decoder<'_>, &'n Key, &'n Node) -> Option<T>,
) -> Option<BTreeMap<String, T>> {
    d.map_of(node, what, false, |d, key, value| {
        let named = d.check_name(&key.text, key.span, "the step id");
        entry(d, key, value).filter(|_| named)
    })
}

/// Reply `index` (0-based) of `step`.
fn reply(d: &mut Decoder<'_>, step: &str, index: usize, node: &Node) -> Option<Reply> {
    let number = index + 1;
    let kind = match node.get("type") {
        Some(t) => d.one_of(t, "the reply type", REPLY_TYPES)?,
        None => {
            d.object(node, &format!("reply {number} of step `{step}`"), node.span, REPLY_FIELDS, &["type"]);
            return None;
        }
    };
    let name = REPLY_TYPES.iter().find(|(_, k)| *k == kind).map_or("", |(n, _)| n);
    let what = format!("reply {number} (`{name}`) of step `{step}`");
    let span = node.span;
    match kind {
        ReplyType::Accepted => {
            let f = d.object(node, &what, span, &["type", "output", "completions"], &["output"])?;
            let output = f.get("output").map(|n| d.json(n));
            let completions = optional(f.get("completions"), |n| completions(d, n));
            Some(Reply::Accepted { output: output?, completions: completions?.unwrap_or_default() })
        }
        ReplyType::Refused => {
            let f = d.object(node, &what, span, &["type", "code"], &["code"])?;
            let code = f.get("code").and_then(|n| d.name(n, "the refusal code"));
            Some(Reply::Refused { code: code? })
        }
        ReplyType::Retryable => {
            let f = d.object(node, &what, span, &["type", "retryAfterSeconds", "times"], &[])?;
            let after = optional(f.get("retryAfterSeconds"), |n| d.uint(n, "retryAfterSeconds", 0));
            let times = times(d, f.get("times"));
            Some(Reply::Retryable { retry_after_seconds: after?, times: times? })
        }
        ReplyType::Uncertain => {
            let f = d.object(node, &what, span, &["type", "times"], &[])?;
            times(d, f.get("times")).map(|times| Reply::Uncertain { times })
        }
        ReplyType::Pending => {
            let f = d.object(node, &what, span, &["type", "times"], &[])?;
            times(d, f.get("times")).map(|times| Reply::Pending { times })
        }
        ReplyType::Complete => {
            let f = d.object(node, &what, span, &["type", "value"], &["value"])?;
            f.get("value").map(|n| Reply::Complete { value: d.json(n) })
        }
        ReplyType::Receipt => receipt(d, &what, node),
    }
}

fn receipt(d: &mut Decoder<'_>, what: &str, node: &Node) -> Option<Reply> {
    let f = d.object(node, what, node.span, &["type", "result", "output", "completions"], &["result"])?;
    let result = f.get("result").and_then(|n| d.one_of(n, "the receipt result", RECEIPT_RESULTS));
    let output = f.get("output").map(|n| d.json(n));
    let completions = optional(f.get("completions"), |n| completions(d, n));
    let result = result?;
    if result == ReceiptResult::Found && output.is_none() {
        d.report(
            Code::SchemaMissingField,
            node.span,
            format!("{what} is a `found` receipt without `output`"),
            "add the original call's `output`: a found receipt shows it",
        );
        return None;
    }
    if result != ReceiptResult::Found {
        let extra = ["output", "completions"].into_iter().find(|field| f.get(field).is_some());
        if let Some(field) = extra {
            d.invalid(
                f.key_span(field),
                format!("{what} is `{}`, so it carries no `{field}`", result.as_str()),
                format!("remove `{field}`, or make the result `found`"),
            );
            return None;
        }
    }
    Some(Reply::Receipt { result, output, completions: completions?.unwrap_or_default() })
}

/// Completion name -> reference.
fn completions(d: &mut Decoder<'_>, node: &Node) -> Option<BTreeMap<String, String>> {
    d.map_of(node, "`completions`", false, |d, key, value| {
        let named = d.check_name(&key.text, key.span, "the completion name");
        d.string(value, "a completion reference").filter(|_| named)
    })
}

fn operator_actions(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<OperatorActions> {
    match &node.value {
        NodeValue::Seq(_) => d
            .seq_of(node, "the operator actions", |d, _, n| d.one_of(n, "the operator action", OPERATOR_ACTIONS))
            .map(OperatorActions::Many),
        NodeValue::String(_) => d.one_of(node, "the operator action", OPERATOR_ACTIONS).map(OperatorActions::One),
        _ => {
            d.invalid(
                node.span,
                format!(
                    "the operator action for step `{}` must be an action or a list of actions, found {}",
                    key.text,
                    node.kind()
                ),
                "write `reconcile`, `retry-same` or `cancel`, or a list such as `[reconcile, retry-same]`",
            );
            None
        }
    }
}

fn notification(d: &mut Decoder<'_>, node: &Node) -> Option<Notification> {
    let fields = ["atSeconds", "step"];
    let f = d.object(node, "a notification", node.span, &fields, &fields)?;
    let at_seconds = f.get("atSeconds").and_then(|n| d.uint(n, "atSeconds", 0));
    let step = f.get("step").and_then(|n| d.name(n, "the notified step"));
    Some(Notification { at_seconds: at_seconds?, step: step? })
}

fn expect(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Expect> {
    let f = d.object(node, "`expect`", owner, EXPECT_FIELDS, &[])?;
    let states: Vec<(&str, RunState)> = RunState::ALL.iter().map(|s| (s.as_str(), *s)).collect();
    let effects: Vec<(&str, EffectState)> = EffectState::ALL.iter().map(|e| (e.as_str(), *e)).collect();
    let path = optional(f.get("path"), |n| d.seq_of(n, "`expect.path`", |d, _, s| d.name(s, "a step id")));
    let state = optional(f.get("state"), |n| d.one_of(n, "the run state", &states));
    let outcome = optional(f.get("outcome"), |n| nullable(n, |n| d.name(n, "the outcome")));
    let output = f.get("output").map(|n| d.json(n));
    let failure = optional(f.get("failure"), |n| nullable(n, |n| failure_code(d, n)));
    let elapsed_seconds = optional(f.get("elapsedSeconds"), |n| d.uint(n, "elapsedSeconds", 0));
    let effects = optional(f.get("effects"), |n| {
        by_step(d, n, "`expect.effects`", |d, _, v| d.one_of(v, "the effect", &effects))
    });
    let observations = optional(f.get("observations"), |n| {
        by_step(d, n, "`expect.observations`", |d, _, v| count(d, v, "the observation count"))
    });
    Some(Expect {
        path: path?,
        state: state?,
        outcome: outcome?,
        output,
        failure: failure?,
        elapsed_seconds: elapsed_seconds?,
        effects: effects?,
        observations: observations?,
    })
}

/// `Some(None)` for a written `null`, otherwise the decoded value.
fn nullable<T>(node: &Node, decode: impl FnOnce(&Node) -> Option<T>) -> Option<Option<T>> {
    match node.value {
        NodeValue::Null => Some(None),
        _ => decode(node).map(Some),
    }
}

/// A failure code: dot-separated parts of lowercase letters, digits and `-` (`wait.timed-out`).
fn failure_code(d: &mut Decoder<'_>, node: &Node) -> Option<String> {
    let code = d.string(node, "the failure")?;
    let part_ok = |part: &str| {
        part.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !code.split('.').all(part_ok) {
        d.invalid(
            node.span,
            format!("the failure `{}` is not a failure code", code.escape_default()),
            "write a code such as `product-refused`, `wait.timed-out` or `function.failed`, or `null` for none",
        );
        return None;
    }
    Some(code)
}

fn count(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<u32> {
    let value = d.uint(node, what, 0)?;
    match u32::try_from(value) {
        Ok(v) => Some(v),
        Err(_) => {
            d.invalid(node.span, format!("{what} is too large"), format!("write at most {}", u32::MAX));
            None
        }
    }
}

/// `times: N` of a repeatable reply: 1 to 100 000.
fn times(d: &mut Decoder<'_>, node: Option<&Node>) -> Option<Option<u32>> {
    optional(node, |n| {
        let value = d.uint(n, "times", 1)?;
        if value > 100_000 {
            d.invalid(n.span, "times must be at most 100000", "script fewer repetitions");
            return None;
        }
        u32::try_from(value).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::check_instant;

    #[test]
    fn rfc3339_instants_are_accepted() {
        for ok in [
            "2026-10-09T09:00:00Z",
            "2026-10-09T09:00:00.5Z",
            "2026-10-09T09:00:00.123456789+02:00",
            "2026-10-09t09:00:00z",
            "2028-02-29T23:59:59-23:59",
            "0001-01-01T00:00:00Z",
        ] {
            assert_eq!(check_instant(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn malformed_or_impossible_instants_are_refused() {
        for bad in [
            "",
            "2026-10-09",
            "2026-10-09T09:00Z",
            "2026-10-09T09:00:00",
            "2026-10-09 09:00:00Z",
            "2026-13-09T09:00:00Z",
            "2026-02-29T09:00:00Z",
            "2026-04-31T09:00:00Z",
            "2026-10-09T24:00:00Z",
            "2026-10-09T09:60:00Z",
            "2026-10-09T09:00:61Z",
            "2026-10-09T09:00:00.Z",
            "2026-10-09T09:00:00+24:00",
            "2026-10-09T09:00:00+02",
            "2026-10-09T09:00:00+0200",
            "26-10-09T09:00:00Z",
            "2026-10-09T09:00:00Z trailing",
        ] {
            assert!(check_instant(bad).is_err(), "{bad}");
        }
    }
}
