//! Decodes `workflow.yaml` into [`WorkflowFile`], field by field.

use crate::diagnostic::Span;
use crate::model::workflow::{
    CallStep, ChooseStep, CompletionRef, FinishStep, Mapping, OperationBinding, Overlap, ProjectMeta, RetryPolicy,
    Schedule, ScheduleInput, SearchKey, Source, Step, Trigger, WaitForStep, WaitUntilStep, WorkflowFile, WorkflowKind,
    WorkflowMeta,
};
use crate::model::{API_VERSION, ApiVersion};
use crate::yaml::{Key, Node};

use super::{Decoder, qualified};

const TOP: &[&str] = &[
    "apiVersion",
    "kind",
    "workflow",
    "project",
    "functions",
    "deadlineSeconds",
    "input",
    "operations",
    "triggers",
    "searchKeys",
    "schedules",
    "start",
    "steps",
    "outcomes",
];
const TOP_REQUIRED: &[&str] = &[
    "apiVersion",
    "kind",
    "workflow",
    "functions",
    "deadlineSeconds",
    "input",
    "operations",
    "start",
    "steps",
    "outcomes",
];

/// Decodes a parsed `workflow.yaml`. `None` when any part of it is wrong (see the diagnostics).
pub fn decode(d: &mut Decoder<'_>, root: &Node) -> Option<WorkflowFile> {
    let f = d.object(root, "the workflow file", Span::at(1, 1), TOP, TOP_REQUIRED)?;
    let api_version = f.get("apiVersion").and_then(|n| d.one_of(n, "apiVersion", &[(API_VERSION, ApiVersion::V1)]));
    let kind = f.get("kind").and_then(|n| d.one_of(n, "kind", &[("Workflow", WorkflowKind::Workflow)]));
    let workflow = f.get("workflow").and_then(|n| meta(d, n, f.key_span("workflow")));
    let project = match f.get("project") {
        None => Some(None),
        Some(n) => project(d, n, f.key_span("project")).map(Some),
    };
    let functions = f.get("functions").and_then(|n| relative_path(d, n));
    let deadline_seconds = f.get("deadlineSeconds").and_then(|n| d.uint(n, "deadlineSeconds", 1));
    let input = f.get("input").map(|n| d.json(n));
    let operations = f.get("operations").and_then(|n| d.map_of(n, "operation alias", true, binding));
    let triggers = match f.get("triggers") {
        None => Some(Default::default()),
        Some(n) => d.map_of(n, "trigger", true, trigger),
    };
    let search_keys = match f.get("searchKeys") {
        None => Some(Default::default()),
        Some(n) => d.map_of(n, "search key", true, search_key),
    };
    let schedules = match f.get("schedules") {
        None => Some(Vec::new()),
        Some(n) => d.seq_of(n, "schedules", |d, _, item| schedule(d, item)),
    };
    let start = f.get("start").and_then(|n| d.name(n, "start"));
    let steps = f.get("steps").and_then(|n| d.map_of(n, "step id", true, step));
    let outcomes = f.get("outcomes").and_then(|n| d.map_of(n, "outcome", true, |d, _, v| Some(d.json(v))));
    Some(WorkflowFile {
        api_version: api_version?,
        kind: kind?,
        workflow: workflow?,
        project: project?,
        functions: functions?,
        deadline_seconds: deadline_seconds?,
        input: input?,
        operations: operations?,
        triggers: triggers?,
        search_keys: search_keys?,
        schedules: schedules?,
        start: start?,
        steps: steps?,
        outcomes: outcomes?,
    })
}

fn meta(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<WorkflowMeta> {
    let f = d.object(node, "`workflow`", owner, &["id", "title", "description"], &["id"])?;
    let id = f.get("id").and_then(|n| d.name(n, "the workflow id"));
    let title = optional(f.get("title"), |n| d.string(n, "title"));
    let description = optional(f.get("description"), |n| d.string(n, "description"));
    Some(WorkflowMeta { id: id?, title: title?, description: description? })
}

fn project(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<ProjectMeta> {
    let f = d.object(node, "`project`", owner, &["version"], &[])?;
    let version = optional(f.get("version"), |n| match &n.value {
        crate::yaml::NodeValue::Number(num) => Some(num.to_string()),
        _ => d.string(n, "project.version"),
    });
    Some(ProjectMeta { version: version? })
}

/// `Some(None)` when absent, `Some(Some(v))` when present and valid, `None` when invalid.
fn optional<T>(node: Option<&Node>, decode: impl FnOnce(&Node) -> Option<T>) -> Option<Option<T>> {
    match node {
        None => Some(None),
        Some(n) => decode(n).map(Some),
    }
}

fn relative_path(d: &mut Decoder<'_>, node: &Node) -> Option<String> {
    let path = d.string(node, "functions")?;
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.split('/').any(|part| part == ".." || part.is_empty());
    if bad {
        d.invalid(
            node.span,
            "`functions` must be a path inside the project directory",
            "write a relative path such as `functions.rhai`",
        );
        return None;
    }
    Some(path)
}

fn binding(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<OperationBinding> {
    let what = format!("operation alias `{}`", key.text);
    let f = d.object(node, &what, key.span, &["operation", "connection"], &["operation", "connection"])?;
    let operation = f.get("operation").and_then(|n| operation_name(d, n, "operation"));
    let connection = f.get("connection").and_then(|n| d.name(n, "connection"));
    Some(OperationBinding { operation: operation?, connection: connection? })
}

/// A `<product>.<name>/v<N>` string.
fn operation_name(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<String> {
    let text = d.string(node, what)?;
    if qualified(&text).is_none() {
        d.invalid(
            node.span,
            format!("`{}` is not a versioned host name", text.escape_default()),
            "write `<product>.<name>/v<N>`, e.g. `breg.read-record/v1`",
        );
        return None;
    }
    Some(text)
}

fn trigger(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<Trigger> {
    let what = format!("trigger `{}`", key.text);
    let fields = ["connection", "event", "input", "idempotencyKey"];
    let f = d.object(node, &what, key.span, &fields, &fields)?;
    let connection = f.get("connection").and_then(|n| d.name(n, "connection"));
    let event = f.get("event").and_then(|n| operation_name(d, n, "event"));
    let input = f.get("input").and_then(|n| mapping(d, n, &format!("the input of {what}"), f.key_span("input"), true));
    let idempotency_key = f
        .get("idempotencyKey")
        .and_then(|n| mapping(d, n, &format!("the idempotencyKey of {what}"), f.key_span("idempotencyKey"), true));
    Some(Trigger { connection: connection?, event: event?, input: input?, idempotency_key: idempotency_key? })
}

fn search_key(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<SearchKey> {
    let what = format!("search key `{}`", key.text);
    let f = d.object(node, &what, key.span, &["function", "notSecret", "description"], &["function", "notSecret"])?;
    let function = f.get("function").and_then(|n| d.string(n, "function"));
    let not_secret = f.get("notSecret").and_then(|n| d.boolean(n, "notSecret"));
    if let (Some(false), Some(n)) = (not_secret, f.get("notSecret")) {
        d.invalid(
            n.span,
            format!("{what} is stored and shown in clear, so it must be declared `notSecret: true`"),
            "declare `notSecret: true` only for a value that is not secret, or remove the key",
        );
        return None;
    }
    let description = optional(f.get("description"), |n| d.string(n, "description"));
    Some(SearchKey { function: function?, not_secret: not_secret?, description: description? })
}

const SCHEDULE_FIELDS: &[&str] =
    &["id", "cron", "timeZone", "intervalSeconds", "anchor", "input", "overlap", "catchUpSeconds", "description"];

fn schedule(d: &mut Decoder<'_>, node: &Node) -> Option<Schedule> {
    let f = d.object(node, "a schedule", node.span, SCHEDULE_FIELDS, &["id", "input"])?;
    let id = f.get("id").and_then(|n| d.name(n, "the schedule id"));
    let cron = optional(f.get("cron"), |n| d.string(n, "cron"));
    let time_zone = optional(f.get("timeZone"), |n| d.string(n, "timeZone"));
    let interval_seconds = optional(f.get("intervalSeconds"), |n| d.uint(n, "intervalSeconds", 1));
    let anchor = optional(f.get("anchor"), |n| d.string(n, "anchor"));
    let input = f.get("input").and_then(|n| {
        let g = d.object(n, "a schedule's `input`", f.key_span("input"), &["function"], &["function"])?;
        let function = g.get("function").and_then(|n| d.string(n, "function"));
        Some(ScheduleInput { function: function? })
    });
    let overlap = optional(f.get("overlap"), |n| {
        d.one_of(
            n,
            "overlap",
            &[("skip", Overlap::Skip), ("allow", Overlap::Allow), ("one-pending", Overlap::OnePending)],
        )
    });
    let catch_up_seconds = optional(f.get("catchUpSeconds"), |n| d.uint(n, "catchUpSeconds", 0));
    let description = optional(f.get("description"), |n| d.string(n, "description"));
    let (cron, time_zone, interval_seconds, anchor) = (cron?, time_zone?, interval_seconds?, anchor?);
    let span = node.span;
    match (&cron, interval_seconds) {
        (Some(_), Some(_)) => {
            let at = f.get("intervalSeconds").map_or(span, |n| n.span);
            d.invalid(
                at,
                "a schedule has `cron` or `intervalSeconds`, not both",
                "keep the one that says when it fires",
            );
            return None;
        }
        (None, None) => {
            d.report(
                crate::diagnostic::Code::SchemaMissingField,
                span,
                "a schedule needs `cron` or `intervalSeconds`",
                "add `cron: \"0 8 * * MON-FRI\"` (with `timeZone`) or `intervalSeconds: 3600`",
            );
            return None;
        }
        (Some(_), None) if anchor.is_some() => {
            let at = f.get("anchor").map_or(span, |n| n.span);
            d.invalid(at, "`anchor` belongs to an interval; a cron schedule has none", "remove `anchor`");
            return None;
        }
        (None, Some(_)) if time_zone.is_some() => {
            let at = f.get("timeZone").map_or(span, |n| n.span);
            d.invalid(at, "an interval counts in UTC; `timeZone` belongs to `cron`", "remove `timeZone`");
            return None;
        }
        _ => {}
    }
    Some(Schedule {
        id: id?,
        cron,
        time_zone,
        interval_seconds,
        anchor,
        input: input?,
        overlap: overlap?,
        catch_up_seconds: catch_up_seconds?,
        description: description?,
    })
}

/// A mapping `{function, arguments}`; `in_trigger` allows `{type: event}` and forbids `{type: step}`.
pub fn mapping(d: &mut Decoder<'_>, node: &Node, what: &str, owner: Span, in_trigger: bool) -> Option<Mapping> {
    let f = d.object(node, what, owner, &["function", "arguments"], &["function"])?;
    let function = f.get("function").and_then(|n| d.string(n, "function"));
    let arguments = match f.get("arguments") {
        None => Some(Vec::new()),
        Some(n) => d.seq_of(n, "arguments", |d, _, item| source(d, item, in_trigger)),
    };
    Some(Mapping { function: function?, arguments: arguments? })
}

const SOURCE_TYPES: &[&str] = &["input", "step", "literal", "run", "event"];

fn source(d: &mut Decoder<'_>, node: &Node, in_trigger: bool) -> Option<Source> {
    let kind = match node.get("type") {
        Some(t) => {
            d.one_of(t, "the source type", &[("input", 0), ("step", 1), ("literal", 2), ("run", 3), ("event", 4)])
        }
        None => {
            d.object(node, "an argument", node.span, &["type", "step", "value"], &["type"]);
            return None;
        }
    };
    let kind = kind?;
    let what = format!("a `{}` argument", SOURCE_TYPES[kind]);
    if in_trigger && (kind == 0 || kind == 3) {
        d.invalid(
            node.span,
            format!("a trigger cannot read `{{type: {}}}`: it runs before the run exists", SOURCE_TYPES[kind]),
            "use `{type: event}` or `{type: literal}`",
        );
        return None;
    }
    match kind {
        0 => d.object(node, &what, node.span, &["type"], &[]).map(|_| Source::Input),
        1 => {
            let f = d.object(node, &what, node.span, &["type", "step"], &["step"])?;
            if in_trigger {
                d.invalid(
                    node.span,
                    "a trigger cannot read a step: it runs before the run exists",
                    "use `{type: event}` or `{type: literal}`",
                );
                return None;
            }
            f.get("step").and_then(|n| d.name(n, "the step")).map(|step| Source::Step { step })
        }
        2 => {
            let f = d.object(node, &what, node.span, &["type", "value"], &["value"])?;
            f.get("value").map(|n| Source::Literal { value: d.json(n) })
        }
        3 => d.object(node, &what, node.span, &["type"], &[]).map(|_| Source::Run),
        _ => {
            d.object(node, &what, node.span, &["type"], &[])?;
            if !in_trigger {
                d.invalid(node.span, "`{type: event}` is only available in a trigger's mappings", "read the event in the trigger's `input` mapping and pass what the steps need through the run input");
                return None;
            }
            Some(Source::Event)
        }
    }
}

const STEP_TYPES: &[(&str, usize)] = &[("call", 0), ("choose", 1), ("wait-until", 2), ("wait-for", 3), ("finish", 4)];

fn step(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<Step> {
    let what = format!("step `{}`", key.text);
    let kind = match node.get("type") {
        Some(t) => d.one_of(t, &format!("the type of {what}"), STEP_TYPES)?,
        None => {
            d.object(node, &what, key.span, &["type"], &["type"]);
            return None;
        }
    };
    match kind {
        0 => call(d, &what, key.span, node).map(Step::Call),
        1 => choose(d, &what, key.span, node).map(Step::Choose),
        2 => wait_until(d, &what, key.span, node).map(Step::WaitUntil),
        3 => wait_for(d, &what, key.span, node).map(Step::WaitFor),
        _ => finish(d, &what, key.span, node).map(Step::Finish),
    }
}

fn target(d: &mut Decoder<'_>, node: Option<&Node>, what: &str) -> Option<String> {
    node.and_then(|n| d.name(n, what))
}

fn call(d: &mut Decoder<'_>, what: &str, owner: Span, node: &Node) -> Option<CallStep> {
    let known = ["type", "operation", "input", "next", "onDeclaredRefusal", "retry"];
    let f = d.object(node, &format!("call {what}"), owner, &known, &["operation", "input", "next"])?;
    let operation = f.get("operation").and_then(|n| d.name(n, "operation alias"));
    let input = f.get("input").and_then(|n| mapping(d, n, &format!("the input of {what}"), f.key_span("input"), false));
    let next = target(d, f.get("next"), "next");
    let on_declared_refusal = match f.get("onDeclaredRefusal") {
        None => Some(Default::default()),
        Some(n) => d.map_of(n, "onDeclaredRefusal", false, |d, _, v| d.name(v, "the refusal route")),
    };
    let retry = optional(f.get("retry"), |n| retry(d, n, f.key_span("retry")));
    Some(CallStep {
        operation: operation?,
        input: input?,
        next: next?,
        on_declared_refusal: on_declared_refusal?,
        retry: retry?,
    })
}

fn retry(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<RetryPolicy> {
    let known = ["maxAttempts", "initialIntervalSeconds", "backoffCoefficient", "maxIntervalSeconds"];
    let f = d.object(node, "`retry`", owner, &known, &[])?;
    let max_attempts =
        optional(f.get("maxAttempts"), |n| d.uint(n, "maxAttempts", 1).and_then(|v| u32::try_from(v).ok()));
    let initial = optional(f.get("initialIntervalSeconds"), |n| d.uint(n, "initialIntervalSeconds", 1));
    let coefficient = optional(f.get("backoffCoefficient"), |n| d.number(n, "backoffCoefficient", 1.0));
    let max_interval = optional(f.get("maxIntervalSeconds"), |n| d.uint(n, "maxIntervalSeconds", 1));
    let policy = RetryPolicy {
        max_attempts: max_attempts?,
        initial_interval_seconds: initial?,
        backoff_coefficient: coefficient?,
        max_interval_seconds: max_interval?,
    };
    if let (Some(first), Some(most)) = (policy.initial_interval_seconds, policy.max_interval_seconds)
        && most < first
    {
        let span = f.get("maxIntervalSeconds").map_or(node.span, |n| n.span);
        d.invalid(
            span,
            "maxIntervalSeconds is shorter than initialIntervalSeconds",
            "make maxIntervalSeconds at least initialIntervalSeconds",
        );
        return None;
    }
    Some(policy)
}

fn choose(d: &mut Decoder<'_>, what: &str, owner: Span, node: &Node) -> Option<ChooseStep> {
    let f = d.object(node, &format!("choose {what}"), owner, &["type", "choose", "cases"], &["choose", "cases"])?;
    let choose = f
        .get("choose")
        .and_then(|n| mapping(d, n, &format!("the choose mapping of {what}"), f.key_span("choose"), false));
    let cases = f.get("cases").and_then(|n| {
        let cases = d.map_of(n, "cases", false, |d, _, v| d.name(v, "the case route"))?;
        if cases.is_empty() {
            d.invalid(n.span, format!("{what} has no cases"), "add at least one `VALUE: STEP` case");
            return None;
        }
        Some(cases)
    });
    Some(ChooseStep { choose: choose?, cases: cases? })
}

fn wait_until(d: &mut Decoder<'_>, what: &str, owner: Span, node: &Node) -> Option<WaitUntilStep> {
    let f = d.object(
        node,
        &format!("wait-until {what}"),
        owner,
        &["type", "until", "next", "onCancel"],
        &["until", "next"],
    )?;
    let until =
        f.get("until").and_then(|n| mapping(d, n, &format!("the until mapping of {what}"), f.key_span("until"), false));
    let next = target(d, f.get("next"), "next");
    let on_cancel = optional(f.get("onCancel"), |n| d.name(n, "onCancel"));
    Some(WaitUntilStep { until: until?, next: next?, on_cancel: on_cancel? })
}

fn wait_for(d: &mut Decoder<'_>, what: &str, owner: Span, node: &Node) -> Option<WaitForStep> {
    let known = ["type", "completion", "timeoutSeconds", "next", "onTimeout", "onCancel", "observeEverySeconds"];
    let f = d.object(node, &format!("wait-for {what}"), owner, &known, &["completion", "timeoutSeconds", "next"])?;
    let completion = f.get("completion").and_then(|n| {
        let c = d.object(n, "`completion`", f.key_span("completion"), &["step", "name"], &["step", "name"])?;
        let step = c.get("step").and_then(|n| d.name(n, "completion.step"));
        let name = c.get("name").and_then(|n| d.name(n, "completion.name"));
        Some(CompletionRef { step: step?, name: name? })
    });
    let timeout_seconds = f.get("timeoutSeconds").and_then(|n| d.uint(n, "timeoutSeconds", 1));
    let next = target(d, f.get("next"), "next");
    let on_timeout = optional(f.get("onTimeout"), |n| d.name(n, "onTimeout"));
    let on_cancel = optional(f.get("onCancel"), |n| d.name(n, "onCancel"));
    let observe = optional(f.get("observeEverySeconds"), |n| d.uint(n, "observeEverySeconds", 1));
    Some(WaitForStep {
        completion: completion?,
        timeout_seconds: timeout_seconds?,
        next: next?,
        on_timeout: on_timeout?,
        on_cancel: on_cancel?,
        observe_every_seconds: observe?,
    })
}

fn finish(d: &mut Decoder<'_>, what: &str, owner: Span, node: &Node) -> Option<FinishStep> {
    let f = d.object(node, &format!("finish {what}"), owner, &["type", "outcome", "output"], &["outcome"])?;
    let outcome = f.get("outcome").and_then(|n| d.name(n, "outcome"));
    let output =
        optional(f.get("output"), |n| mapping(d, n, &format!("the output of {what}"), f.key_span("output"), false));
    Some(FinishStep { outcome: outcome?, output: output? })
}
