//! `workflow.yaml`: one workflow's steps, operations, triggers and outcomes
//! (docs/reference/project.md#workflowyaml).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ApiVersion;

/// `kind: Workflow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum WorkflowKind {
    /// The only kind of `workflow.yaml`.
    #[default]
    Workflow,
}

/// A whole `workflow.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Coordinator workflow (workflow.yaml)")]
pub struct WorkflowFile {
    /// Always `coordinator/v1`.
    pub api_version: ApiVersion,
    /// Always `Workflow`.
    pub kind: WorkflowKind,
    /// The workflow's identity and human description.
    pub workflow: WorkflowMeta,
    /// The author's own version label; it does not change the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectMeta>,
    /// Path of the Rhai functions file, relative to the project directory.
    pub functions: String,
    /// The run deadline in seconds, counted from admission.
    pub deadline_seconds: u64,
    /// JSON Schema (2020-12) of the input the workflow accepts.
    pub input: Value,
    /// Alias -> host operation and logical connection.
    pub operations: BTreeMap<String, OperationBinding>,
    /// Signed product events that admit runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub triggers: BTreeMap<String, Trigger>,
    /// Named values computed from the input at admission, stored in clear and
    /// indexed, so runs can be found by them (`GET /v1/runs?key.NAME=VALUE`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub search_keys: BTreeMap<String, SearchKey>,
    /// Runs admitted on the calendar (docs/reference/project.md#schedules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
    /// The first step.
    pub start: String,
    /// The steps by id.
    pub steps: BTreeMap<String, Step>,
    /// Outcome name -> JSON Schema of the output a finish publishes (`{type: "null"}` for none).
    pub outcomes: BTreeMap<String, Value>,
}

/// `workflow:` — identity and description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowMeta {
    /// The workflow id (lowercase letters, digits and `-`).
    pub id: String,
    /// A human title; no effect on the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A human description; no effect on the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `project:` — the author's bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectMeta {
    /// Free-form version label; no effect on the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An operation alias: exactly one versioned host operation on one logical connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationBinding {
    /// `<product>.<name>/v<N>`.
    pub operation: String,
    /// The logical connection (configured in `runtime.yaml`).
    pub connection: String,
}

/// A signed product event that admits runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Trigger {
    /// The connection whose event-signing secret verifies the event.
    pub connection: String,
    /// `<product>.<event>/v<N>`.
    pub event: String,
    /// Computes the run input from the event.
    pub input: Mapping,
    /// Computes the admission idempotency key from the event.
    pub idempotency_key: Mapping,
}

/// A search key: a pure function of the run input whose result is stored in
/// clear beside the run and indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchKey {
    /// A function of `functions.rhai` taking one parameter, the run input, and
    /// returning a string of at most 128 characters without control
    /// characters, or `()` when the run has no value for this key.
    pub function: String,
    /// Must be `true`: the author declares the value not secret, since it is
    /// stored and shown in clear.
    pub not_secret: bool,
    /// What the key identifies, for people; no effect on the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A schedule: runs admitted on the calendar, one per nominal instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// The schedule's id (lowercase letters, digits and `-`), unique in the workflow.
    pub id: String,
    /// A cron expression (five fields, or six with seconds first; `@daily` and
    /// the other nicknames), matched against local time in `timeZone`.
    /// Exactly one of `cron` and `intervalSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone `cron` is read in (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Fires every so many seconds from `anchor` (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    /// The instant an interval counts from (RFC 3339; default the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// The run input: a function of `functions.rhai` taking the nominal
    /// instant (RFC 3339, UTC) and the schedule id.
    pub input: ScheduleInput,
    /// What happens at an instant while the schedule's previous run has not
    /// ended: `skip` (default), `allow`, or `one-pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// Instants missed while no process ran are fired when they are at most
    /// this many seconds old, oldest first (default 3600); older ones are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_seconds: Option<u64>,
    /// What the schedule is for, for people; no effect on the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A schedule's run input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleInput {
    /// A function of `functions.rhai` with two parameters: the nominal instant
    /// and the schedule id; it returns the run input.
    pub function: String,
}

/// What a schedule does at an instant while its previous run has not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// Admit nothing for this instant (journaled as skipped).
    #[default]
    Skip,
    /// Admit the run anyway.
    Allow,
    /// Keep this instant pending and admit it once the previous run ends;
    /// a later instant while one is pending replaces nothing and is skipped.
    OnePending,
}

/// A pure function applied to sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mapping {
    /// A function of `functions.rhai`.
    pub function: String,
    /// The values passed to it, in order.
    #[serde(default)]
    pub arguments: Vec<Source>,
}

/// Where a mapping argument comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// The whole run input.
    Input,
    /// The saved output of an earlier call, or the completion value of an earlier `wait-for`.
    Step {
        /// The step id.
        step: String,
    },
    /// A constant.
    Literal {
        /// Any JSON value.
        value: Value,
    },
    /// `{runId, admittedAt, revision}`.
    Run,
    /// The product event (triggers only).
    Event,
}

/// One step of the workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Step {
    /// Run one host operation with a prepared, saved command.
    Call(CallStep),
    /// Route on a pure function.
    Choose(ChooseStep),
    /// A durable timer.
    WaitUntil(WaitUntilStep),
    /// Wait for a named completion of an earlier accepted call.
    WaitFor(WaitForStep),
    /// End the run with a declared outcome.
    Finish(FinishStep),
}

impl Step {
    /// The step type as written in YAML.
    pub fn type_name(&self) -> &'static str {
        match self {
            Step::Call(_) => "call",
            Step::Choose(_) => "choose",
            Step::WaitUntil(_) => "wait-until",
            Step::WaitFor(_) => "wait-for",
            Step::Finish(_) => "finish",
        }
    }

    /// Every route out of this step, in a stable order.
    pub fn routes(&self) -> Vec<Route<'_>> {
        let mut routes = Vec::new();
        match self {
            Step::Call(c) => {
                routes.push(Route { kind: RouteKind::Next, target: &c.next, field: vec!["next".into()] });
                for (code, target) in &c.on_declared_refusal {
                    routes.push(Route {
                        kind: RouteKind::Refusal(code),
                        target,
                        field: vec!["onDeclaredRefusal".into(), code.clone()],
                    });
                }
            }
            Step::Choose(c) => {
                for (value, target) in &c.cases {
                    routes.push(Route {
                        kind: RouteKind::Case(value),
                        target,
                        field: vec!["cases".into(), value.clone()],
                    });
                }
            }
            Step::WaitUntil(w) => {
                routes.push(Route { kind: RouteKind::Next, target: &w.next, field: vec!["next".into()] });
                if let Some(t) = &w.on_cancel {
                    routes.push(Route { kind: RouteKind::Cancel, target: t, field: vec!["onCancel".into()] });
                }
            }
            Step::WaitFor(w) => {
                routes.push(Route { kind: RouteKind::Next, target: &w.next, field: vec!["next".into()] });
                if let Some(t) = &w.on_timeout {
                    routes.push(Route { kind: RouteKind::Timeout, target: t, field: vec!["onTimeout".into()] });
                }
                if let Some(t) = &w.on_cancel {
                    routes.push(Route { kind: RouteKind::Cancel, target: t, field: vec!["onCancel".into()] });
                }
            }
            Step::Finish(_) => {}
        }
        routes
    }

    /// Every mapping of the step with the field path that holds it.
    pub fn mappings(&self) -> Vec<(&'static str, &Mapping)> {
        match self {
            Step::Call(c) => vec![("input", &c.input)],
            Step::Choose(c) => vec![("choose", &c.choose)],
            Step::WaitUntil(w) => vec![("until", &w.until)],
            Step::WaitFor(_) => vec![],
            Step::Finish(f) => f.output.iter().map(|m| ("output", m)).collect(),
        }
    }

    /// Whether a `{type: step}` source may name this step (it saves an output or a completion value).
    pub fn has_output(&self) -> bool {
        matches!(self, Step::Call(_) | Step::WaitFor(_))
    }
}

/// One route out of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route<'a> {
    /// What makes the run take it.
    pub kind: RouteKind<'a>,
    /// The step it leads to.
    pub target: &'a String,
    /// The field path (under the step) that names the target.
    pub field: Vec<String>,
}

/// What makes a run take a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind<'a> {
    /// The step completed (a call accepted, a wait ended).
    Next,
    /// A call was refused with this declared no-effect code.
    Refusal(&'a str),
    /// A choose function returned this value.
    Case(&'a str),
    /// A wait-for timed out.
    Timeout,
    /// The run was cancelled during the wait.
    Cancel,
}

impl RouteKind<'_> {
    /// Whether the step from which the route leaves produced its output on this route.
    pub fn produces_output(&self) -> bool {
        matches!(self, RouteKind::Next)
    }

    /// A short label: `next`, `refusal: slot-taken`, `case: approved`, `timeout`, `cancel`.
    pub fn label(&self) -> String {
        match self {
            RouteKind::Next => "next".to_owned(),
            RouteKind::Refusal(code) => format!("refusal: {code}"),
            RouteKind::Case(value) => format!("case: {value}"),
            RouteKind::Timeout => "timeout".to_owned(),
            RouteKind::Cancel => "cancel".to_owned(),
        }
    }
}

/// `type: call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallStep {
    /// An alias declared under `operations`.
    pub operation: String,
    /// Computes the command sent to the product.
    pub input: Mapping,
    /// Where the run continues once the effect is accepted.
    pub next: String,
    /// Declared no-effect refusal code -> step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub on_declared_refusal: BTreeMap<String, String>,
    /// How retryable answers are retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
}

/// `retry:` of a call. Unset fields take the defaults of docs/reference/runs.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; unset means unlimited within the run deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Seconds before the second attempt (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_interval_seconds: Option<u64>,
    /// Multiplier between intervals (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_coefficient: Option<f64>,
    /// Largest interval (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval_seconds: Option<u64>,
}

/// `type: choose`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChooseStep {
    /// Returns one of the `cases` keys.
    pub choose: Mapping,
    /// Value -> step.
    pub cases: BTreeMap<String, String>,
}

/// `type: wait-until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitUntilStep {
    /// Returns an RFC 3339 instant.
    pub until: Mapping,
    /// Where the run continues when the instant is reached.
    pub next: String,
    /// Where the run goes if cancelled during the wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cancel: Option<String>,
}

/// `type: wait-for`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitForStep {
    /// The completion waited for.
    pub completion: CompletionRef,
    /// How long to wait; shorter than the run deadline.
    pub timeout_seconds: u64,
    /// Where the run continues with the completion value.
    pub next: String,
    /// Where the run goes on timeout (without it: failed with `wait.timed-out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
    /// Where the run goes if cancelled during the wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cancel: Option<String>,
    /// Overrides the completion's observation interval (never below the deployment floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_every_seconds: Option<u64>,
}

/// `completion: {step, name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletionRef {
    /// The call step whose accepted answer exposed the completion.
    pub step: String,
    /// The completion's name in the operation descriptor.
    pub name: String,
}

/// `type: finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishStep {
    /// A declared outcome.
    pub outcome: String,
    /// Computes the published output; omitted only when the outcome's schema is `{type: "null"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Mapping>,
}

/// The observation floor when the deployment sets none (docs/reference/runs.md#waits).
pub const DEFAULT_OBSERVE_FLOOR_SECONDS: u64 = 30;

/// A retry policy with the defaults of docs/reference/runs.md#retries filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EffectiveRetry {
    /// Attempts in all, the first included; `None` is unlimited within the run deadline.
    pub max_attempts: Option<u32>,
    /// Seconds before the second attempt.
    pub initial_interval_seconds: u64,
    /// Multiplier between intervals.
    pub backoff_coefficient: f64,
    /// Largest interval.
    pub max_interval_seconds: u64,
}

impl EffectiveRetry {
    /// Default first interval.
    pub const INITIAL_INTERVAL_SECONDS: u64 = 1;
    /// Default coefficient.
    pub const BACKOFF_COEFFICIENT: f64 = 2.0;
    /// Default largest interval.
    pub const MAX_INTERVAL_SECONDS: u64 = 300;

    /// The step's policy with defaults for what it leaves unset.
    pub fn of(policy: Option<&RetryPolicy>) -> Self {
        EffectiveRetry {
            max_attempts: policy.and_then(|p| p.max_attempts),
            initial_interval_seconds: policy
                .and_then(|p| p.initial_interval_seconds)
                .unwrap_or(Self::INITIAL_INTERVAL_SECONDS),
            backoff_coefficient: policy.and_then(|p| p.backoff_coefficient).unwrap_or(Self::BACKOFF_COEFFICIENT),
            max_interval_seconds: policy.and_then(|p| p.max_interval_seconds).unwrap_or(Self::MAX_INTERVAL_SECONDS),
        }
    }
}
