//! `scenarios.yaml`: scripted cases that `coordinatorctl test` runs with a
//! virtual clock through the same state machine as the service
//! (docs/reference/scenarios.md).
//!
//! Plain data only. Whether the step ids a case names exist in the workflow, and
//! whether the replies fit the steps, is the runner's business.
//!
//! Absent versus `null` in `expect`: `outcome`, `output` and `failure` are
//! compared only when written, and `null` is an expectation of its own ("the run
//! did not finish", "no failure"). They are `Option<Option<String>>` (and
//! `Option<Value>` for `output`, where `Some(Value::Null)` is a written `null`):
//! the outer `None` means "not compared".

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::ApiVersion;
use super::run::{EffectState, RunState};

/// `kind: Scenarios`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum ScenariosKind {
    /// The only kind of `scenarios.yaml`.
    #[default]
    Scenarios,
}

/// A whole `scenarios.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Coordinator scenarios (scenarios.yaml)")]
pub struct ScenariosFile {
    /// Always `coordinator/v1`.
    pub api_version: ApiVersion,
    /// Always `Scenarios`.
    pub kind: ScenariosKind,
    /// The cases, run in this order; their ids are unique.
    #[serde(default)]
    pub cases: Vec<Case>,
    /// Schedule cases: a schedule's firings between two instants of the
    /// virtual clock, and the input of each (ids unique among all cases).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firings: Vec<FiringsCase>,
}

/// A schedule followed on the virtual clock: which nominal instants it fires
/// at from `from` (exclusive) to `until` (inclusive), and with which input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FiringsCase {
    /// The case id (a name), unique in the file.
    pub id: String,
    /// The schedule's id in `workflow.yaml`.
    pub schedule: String,
    /// Where the virtual clock starts, RFC 3339.
    #[schemars(extend("format" = "date-time"))]
    pub from: String,
    /// Where it stops, RFC 3339.
    #[schemars(extend("format" = "date-time"))]
    pub until: String,
    /// Every firing in between, in order (an empty list: none).
    pub expect: Vec<ExpectedFiring>,
}

/// One expected firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedFiring {
    /// The nominal instant, RFC 3339 (compared as an instant, any offset).
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// The run input it admits (compared only when written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// One scripted run: its admission, the products' replies, the operator's
/// actions, and what the run must look like where it stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    /// The case id (a name), unique in the file.
    pub id: String,
    /// The admission instant, RFC 3339 (`2026-10-09T09:00:00Z`); virtual time starts here.
    #[schemars(extend("format" = "date-time"))]
    pub admitted_at: String,
    /// The run input, validated against the workflow's input schema.
    pub input: Value,
    /// Step id -> replies consumed in order: one per attempt of a call (and per
    /// reconcile), one per observation of a `wait-for`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replies: BTreeMap<String, Vec<Reply>>,
    /// Step id -> what the operator does when the run needs attention there,
    /// each action applied once, in order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operator: BTreeMap<String, OperatorActions>,
    /// Cancel requested at this many virtual seconds after admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_at_seconds: Option<u64>,
    /// Completion notifications that bring a wait's next observation forward.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<Notification>,
    /// What the run must look like where it stops; fields left out are not compared.
    pub expect: Expect,
}

/// One scripted product answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum Reply {
    /// The call succeeded (effect `accepted`).
    Accepted {
        /// The operation's output, validated against its output schema.
        output: Value,
        /// Completion name -> reference the product exposes for it.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        completions: BTreeMap<String, String>,
    },
    /// The product refused with this code.
    Refused {
        /// The refusal code (declared no-effect or not).
        code: String,
    },
    /// A definite "not done" (429/503): the same command is resent with backoff.
    Retryable {
        /// The product's `Retry-After`, in seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u64>,
        /// Use this reply this many times in a row (default 1): a product that stays
        /// unavailable, or a review that stays pending for days.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    /// The command may have reached the product and no answer came (effect `unknown`).
    Uncertain {
        /// Use this reply this many times in a row (default 1): a product that stays
        /// unavailable, or a review that stays pending for days.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    /// A `wait-for` observation: not complete yet.
    Pending {
        /// Use this reply this many times in a row (default 1): a product that stays
        /// unavailable, or a review that stays pending for days.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    /// A `wait-for` observation: complete with this value.
    Complete {
        /// The completion value.
        value: Value,
    },
    /// The answer to a receipt lookup (a `reconcile`).
    Receipt {
        /// What the product says about the original idempotency key.
        result: ReceiptResult,
        /// The original call's output: required when `result` is `found`, not allowed otherwise.
        // A written `null` is `Some(Value::Null)`, not `None`.
        #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
        #[schemars(with = "Option<Value>")]
        output: Option<Value>,
        /// Completion name -> reference, as the original answer exposed them.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        completions: BTreeMap<String, String>,
    },
}

impl Reply {
    /// How many times the reply is used (`times`, default 1).
    pub fn times(&self) -> u32 {
        match self {
            Reply::Retryable { times, .. } | Reply::Uncertain { times } | Reply::Pending { times } => {
                times.unwrap_or(1)
            }
            Reply::Accepted { .. } | Reply::Refused { .. } | Reply::Complete { .. } | Reply::Receipt { .. } => 1,
        }
    }

    /// The `type` as written in YAML.
    pub fn type_name(&self) -> &'static str {
        match self {
            Reply::Accepted { .. } => "accepted",
            Reply::Refused { .. } => "refused",
            Reply::Retryable { .. } => "retryable",
            Reply::Uncertain { .. } => "uncertain",
            Reply::Pending { .. } => "pending",
            Reply::Complete { .. } => "complete",
            Reply::Receipt { .. } => "receipt",
        }
    }
}

/// What a receipt lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptResult {
    /// The product shows the original key's result: the effect was accepted.
    Found,
    /// No result for the key; this never proves that nothing happened.
    NotFound,
    /// The receipt is gone; this never proves that nothing happened.
    Expired,
    /// The lookup itself failed.
    Unavailable,
}

impl ReceiptResult {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptResult::Found => "found",
            ReceiptResult::NotFound => "not-found",
            ReceiptResult::Expired => "expired",
            ReceiptResult::Unavailable => "unavailable",
        }
    }
}

/// One operator action, or several applied in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OperatorActions {
    /// `send-notice: reconcile`.
    One(OperatorAction),
    /// `send-notice: [reconcile, retry-same]`.
    Many(Vec<OperatorAction>),
}

impl OperatorActions {
    /// The actions in the order they are applied.
    pub fn as_slice(&self) -> &[OperatorAction] {
        match self {
            OperatorActions::One(action) => std::slice::from_ref(action),
            OperatorActions::Many(actions) => actions,
        }
    }

    /// The actions in the order they are applied, owned.
    pub fn actions(&self) -> Vec<OperatorAction> {
        self.as_slice().to_vec()
    }
}

/// What an operator does with a run that needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OperatorAction {
    /// Look up the original key's receipt (only where the operation has receipts).
    Reconcile,
    /// Resend the original saved command with the original key.
    RetrySame,
    /// Cancel the run.
    Cancel,
}

impl OperatorAction {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorAction::Reconcile => "reconcile",
            OperatorAction::RetrySame => "retry-same",
            OperatorAction::Cancel => "cancel",
        }
    }
}

/// A completion notification at a virtual instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Notification {
    /// Virtual seconds after admission.
    pub at_seconds: u64,
    /// The `wait-for` step whose completion is nudged.
    pub step: String,
}

/// What the run must look like where the case stops. Fields left out are not compared.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Every step the run entered, in order, including the one where it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<String>>,
    /// The run state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// The recorded outcome; `null` where the run did not finish.
    // `None`: not compared; `Some(None)`: a written `null`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Option<String>")]
    pub outcome: Option<Option<String>>,
    /// The published output; `null` for none.
    // `None`: not compared; `Some(Value::Null)`: a written `null`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Value")]
    pub output: Option<Value>,
    /// The failure code (`product-refused`, `wait.timed-out`, `function.failed`, …); `null` for none.
    // `None`: not compared; `Some(None)`: a written `null`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Option<String>")]
    pub failure: Option<Option<String>>,
    /// Virtual seconds from admission to where the run stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_seconds: Option<u64>,
    /// Call step id -> its effect; only the listed steps are compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<BTreeMap<String, EffectState>>,
    /// `wait-for` step id -> observations made, the completing one included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<BTreeMap<String, u32>>,
}

/// Deserializes a field that is present (possibly `null`) as `Some`, so that a
/// written `null` is not confused with an absent field (which `default` makes `None`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(value: Value) -> Option<Expect> {
        serde_json::from_value(value).ok()
    }

    #[test]
    fn absent_and_null_expectations_differ() {
        let absent = expect(json!({}));
        assert_eq!(absent, Some(Expect::default()));
        let null = expect(json!({"outcome": null, "output": null, "failure": null}));
        let null = null.unwrap_or_default();
        assert_eq!((null.outcome, null.output, null.failure), (Some(None), Some(Value::Null), Some(None)));
        let set = expect(json!({"outcome": "notice-sent", "failure": "product-refused"})).unwrap_or_default();
        assert_eq!(set.outcome, Some(Some("notice-sent".to_owned())));
        assert_eq!(set.failure, Some(Some("product-refused".to_owned())));
    }

    #[test]
    fn written_nulls_survive_a_round_trip() {
        let e = Expect { outcome: Some(None), output: Some(Value::Null), ..Expect::default() };
        let text = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(text, json!({"outcome": null, "output": null}));
        assert_eq!(expect(text), Some(e));
    }

    #[test]
    fn operator_takes_one_action_or_a_list() {
        let one: Option<OperatorActions> = serde_json::from_value(json!("reconcile")).ok();
        assert_eq!(one.map(|a| a.actions()), Some(vec![OperatorAction::Reconcile]));
        let many: Option<OperatorActions> = serde_json::from_value(json!(["retry-same", "cancel"])).ok();
        assert_eq!(many.map(|a| a.actions()), Some(vec![OperatorAction::RetrySame, OperatorAction::Cancel]));
    }

    #[test]
    fn replies_are_tagged_by_type() {
        let r: Option<Reply> = serde_json::from_value(json!({"type": "retryable", "retryAfterSeconds": 5})).ok();
        assert_eq!(r, Some(Reply::Retryable { retry_after_seconds: Some(5), times: None }));
        let r: Option<Reply> = serde_json::from_value(json!({"type": "uncertain"})).ok();
        assert_eq!(r.map(|r| r.type_name()), Some("uncertain"));
        let bad: Result<Reply, _> = serde_json::from_value(json!({"type": "refused", "code": "x", "extra": 1}));
        assert!(bad.is_err());
    }
}
