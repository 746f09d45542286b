//! Decoding `scenarios.yaml`: a full valid file decodes to the same value serde
//! reads from it, and every kind of mistake is reported at once, each at its
//! exact line and column.

use coordinator_core::decode::scenarios::decode;
use coordinator_core::model::run::{EffectState, RunState};
use coordinator_core::model::scenarios::{OperatorAction, ReceiptResult, Reply, ScenariosFile};
use serde_json::{Value, json};

/// The decoded file and the diagnostics as `line:column code`, in reading order.
fn decoded(text: &str) -> (Option<ScenariosFile>, Vec<String>) {
    let (file, diagnostics) = crate::support::decode_file("scenarios.yaml", text, decode);
    (file, crate::support::positions(&diagnostics))
}

#[test]
fn the_sample_file_decodes_to_what_serde_reads() {
    let file = crate::support::like_serde("scenarios.yaml", &crate::support::fixture("scenarios.yaml"), decode);

    let [approved, cancelled] = file.cases.as_slice() else { panic!("two cases expected") };
    assert_eq!(approved.id, "approved-after-two-reads");
    assert_eq!(
        approved.replies["await-review"],
        [Reply::Pending { times: None }, Reply::Complete { value: json!({"decision": "approved"}) }]
    );
    assert_eq!(
        approved.replies["send-notice"][1],
        Reply::Receipt {
            result: ReceiptResult::Found,
            output: Some(json!({"messageId": "m-1"})),
            completions: Default::default()
        }
    );
    assert_eq!(approved.operator["send-notice"].actions(), [OperatorAction::Reconcile]);
    assert_eq!(approved.expect.state, Some(RunState::Finished));
    assert_eq!(approved.expect.failure, Some(None), "a written null is an expectation");
    assert_eq!(approved.expect.observations.as_ref().map(|o| o["await-review"]), Some(2));
    assert_eq!(
        cancelled.operator["withdraw-on-cancel"].actions(),
        [OperatorAction::Reconcile, OperatorAction::RetrySame]
    );
    assert_eq!(cancelled.cancel_at_seconds, Some(1000));
    assert_eq!(cancelled.expect.output, Some(Value::Null));
    assert_eq!(cancelled.expect.failure, None, "a field left out is not compared");
    assert_eq!(cancelled.expect.effects.as_ref().map(|e| e["send-notice"]), Some(EffectState::None));
}

const HEAD: &str = "apiVersion: coordinator/v1\nkind: Scenarios\ncases:\n";

/// One case with `body` as its lines after the id (indented by two spaces).
fn one_case(body: &str) -> String {
    format!("{HEAD}- id: c\n  admittedAt: \"2026-10-09T09:00:00Z\"\n  input: {{}}\n{body}")
}

#[test]
fn every_independent_mistake_is_reported_at_once() {
    let text = "\
apiVersion: coordinator/v2
kind: Scenario
cases:
- id: first
  admittedAt: \"2026-02-29T09:00:00Z\"
  input: {}
  replys: {}
  expect: {state: done}
- id: first
  input: {}
  replies:
    send-notice:
    - {type: receipt, result: found}
    - {type: accepted}
    - {type: refused, code: x, extra: 1}
    - {type: teleport}
  operator: {send-notice: [reconcile, resend]}
";
    let (file, diagnostics) = decoded(text);
    assert!(file.is_none());
    assert_eq!(
        diagnostics,
        [
            "1:13 schema.invalid-value",
            "2:7 schema.invalid-value",
            "5:15 schema.invalid-value",
            "7:3 schema.unknown-field",
            "8:19 schema.invalid-value",
            "9:3 schema.missing-field",
            "9:3 schema.missing-field",
            "9:7 schema.invalid-value",
            "13:7 schema.missing-field",
            "14:7 schema.missing-field",
            "15:32 schema.unknown-field",
            "16:14 schema.invalid-value",
            "17:39 schema.invalid-value",
        ]
    );
}

#[test]
fn each_kind_of_mistake_points_at_its_text() {
    // `(body, the text the diagnostic must point at, code)`. Lines 1-6 are the head and
    // the case's id, admittedAt and input, so the first line of `body` is line 7.
    let cases: &[(&str, &str, &str)] = &[
        // Wrong types.
        ("  cancelAtSeconds: soon\n  expect: {}\n", "soon", "schema.invalid-value"),
        ("  replies: [uncertain]\n  expect: {}\n", "[uncertain]", "schema.invalid-value"),
        ("  replies: {send-notice: [uncertain]}\n  expect: {}\n", "uncertain", "schema.invalid-value"),
        ("  operator: {send-notice: {action: cancel}}\n  expect: {}\n", "{action", "schema.invalid-value"),
        (
            "  replies: {request-review: [{type: accepted, output: 1, completions: {result: 17}}]}\n  expect: {}\n",
            "17",
            "schema.invalid-value",
        ),
        ("  expect: {observations: {await-review: 4294967296}}\n", "4294967296", "schema.invalid-value"),
        ("  expect: []\n", "[]", "schema.invalid-value"),
        // Invalid values.
        ("  replies: {Send Notice: [{type: uncertain}]}\n  expect: {}\n", "Send Notice", "schema.invalid-value"),
        (
            "  replies: {send-notice: [{type: receipt, result: expired, output: {}}]}\n  expect: {}\n",
            "output",
            "schema.invalid-value",
        ),
        ("  expect: {failure: Product Refused}\n", "Product Refused", "schema.invalid-value"),
        ("  expect: {effects: {send-notice: done}}\n", "done", "schema.invalid-value"),
        ("  expect: {state: done}\n", "done", "schema.invalid-value"),
        ("  expect: {outcome: 3}\n", "3", "schema.invalid-value"),
        ("  operator: {send-notice: [reconcile, resend]}\n  expect: {}\n", "resend", "schema.invalid-value"),
        // Missing and unknown fields: a missing field is reported at the mapping that lacks it.
        ("  replies: {send-notice: [{code: x}]}\n  expect: {}\n", "{code", "schema.missing-field"),
        ("  replies: {send-notice: [{type: refused}]}\n  expect: {}\n", "{type", "schema.missing-field"),
        ("  notifications: [{atSeconds: 120}]\n  expect: {}\n", "{atSeconds", "schema.missing-field"),
        ("  expect: {outcome: null, exit: 0}\n", "exit", "schema.unknown-field"),
        ("  retries: {}\n  expect: {}\n", "retries", "schema.unknown-field"),
    ];
    for (body, at, code) in cases {
        let first_line = body.lines().next().unwrap_or_default();
        let column = first_line.find(at).map(|byte| first_line[..byte].chars().count() + 1);
        let want = format!("7:{} {code}", column.unwrap_or_default());
        // An unknown field is reported without making the value `None`; only the
        // diagnostics decide whether the file is refused.
        let (_, diagnostics) = decoded(&one_case(body));
        assert_eq!(diagnostics, [want], "{body}");
    }
}

#[test]
fn file_level_mistakes_point_at_their_text() {
    let cases: &[(&str, &[&str])] = &[
        ("apiVersion: coordinator/v1\nkind: Scenarios\n", &["1:1 schema.missing-field"]),
        ("apiVersion: coordinator/v1\nkind: Scenarios\ncases: []\n", &["3:8 schema.invalid-value"]),
        ("- just a list\n", &["1:1 schema.invalid-value"]),
        (
            &format!(
                "{HEAD}- id: \"not an id\"\n  admittedAt: \"2026-10-09T09:00:00Z\"\n  input: {{}}\n  expect: {{}}\n"
            ),
            &["4:7 schema.invalid-value"],
        ),
        (
            &format!("{HEAD}- id: c\n  admittedAt: \"2026-10-09 09:00:00Z\"\n  input: {{}}\n  expect: {{}}\n"),
            &["5:15 schema.invalid-value"],
        ),
        (
            &format!("{HEAD}- id: c\n  admittedAt: 2026-10-09T09:00:00\n  input: {{}}\n  expect: {{}}\n"),
            &["5:15 schema.invalid-value"],
        ),
    ];
    for (text, want) in cases {
        let (file, diagnostics) = decoded(text);
        assert!(file.is_none(), "{text}");
        assert_eq!(diagnostics, *want, "{text}");
    }
}

#[test]
fn absent_and_null_expectations_are_kept_apart() {
    let (file, diagnostics) =
        decoded(&one_case("  expect: {outcome: null, output: null, failure: wait.timed-out, state: failed}\n"));
    assert_eq!(diagnostics, Vec::<String>::new());
    let expect = file.map(|f| f.cases[0].expect.clone()).unwrap_or_default();
    assert_eq!(expect.outcome, Some(None));
    assert_eq!(expect.output, Some(Value::Null));
    assert_eq!(expect.failure, Some(Some("wait.timed-out".to_owned())));
    assert_eq!((expect.path, expect.elapsed_seconds, expect.effects), (None, None, None));
}
