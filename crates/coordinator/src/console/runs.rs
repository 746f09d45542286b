//! The run list (`/console/runs`: newest first, filters in the URL, a cursor
//! to older pages, no counting) and the attention inbox (`/console/attention`:
//! runs in `attention` grouped by reason, workflow and step, oldest first,
//! and one group's runs). A viewer sees exactly what `GET /v1/runs` would
//! show them ([`Principal::listing`]); the inbox is for those who operate.
//!
//! [`Principal::listing`]: crate::auth::access::Principal::listing

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::run::RunState;
use coordinator_core::model::runtime::Role;
use coordinator_store::{AttentionCursor, AttentionReason, Cursor, ListFilter, RunRow};
use serde::Deserialize;

use super::{Chrome, Page, Viewer, forbidden, page, problem, rfc3339};
use crate::api::ApiState;
use crate::engine::error::EngineError;

/// Runs per page.
const PAGE: u32 = 50;

/// The filters of the run list, as the URL carries them (empty means absent).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    step: String,
    #[serde(default)]
    revision: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    run: String,
    /// A search key filter, `NAME=VALUE`.
    #[serde(default)]
    key: String,
    #[serde(default, rename = "idempotencyKey")]
    idempotency_key: String,
    #[serde(default)]
    cursor: String,
    #[serde(default)]
    fragment: String,
    /// Any other parameter: named on the page as a filter the list does not know.
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, String>,
}

/// The filters the run list knows, for a page that names one it does not.
const RUN_FILTERS: &str =
    "the run list filters by workflow, state, reason, step, revision, from, to, run, key and idempotencyKey";

/// `Err` naming the first parameter of `unknown`, when there is one.
pub(super) fn no_unknown(unknown: &std::collections::BTreeMap<String, String>, known: &str) -> Result<(), String> {
    match unknown.keys().next() {
        Some(name) => Err(format!("`{}` is not a filter: {known}", name.escape_default())),
        None => Ok(()),
    }
}

fn present(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A run of a list, as a row shows it.
#[derive(Debug, Clone)]
pub(crate) struct RowView {
    pub(crate) id: String,
    pub(crate) workflow: String,
    pub(crate) revision: String,
    pub(crate) state: &'static str,
    /// The outcome of an ended run, or the attention's reason and step.
    pub(crate) detail: String,
    pub(crate) admitted: String,
    pub(crate) updated: String,
}

impl RowView {
    pub(crate) fn of(row: &RunRow) -> RowView {
        let detail = match (row.state, &row.outcome, &row.attention_step) {
            (RunState::Attention, _, Some(step)) => format!("unknown effect at {step}"),
            (RunState::Attention, _, None) if row.held => "restore hold".to_owned(),
            (_, Some(outcome), _) => outcome.clone(),
            _ => String::new(),
        };
        RowView {
            id: row.id.clone(),
            workflow: row.workflow.clone(),
            revision: short(&row.revision),
            state: row.state.as_str(),
            detail,
            admitted: rfc3339(row.admitted_at),
            updated: rfc3339(row.updated_at),
        }
    }
}

/// `sha256:` and the first 12 digits.
pub(crate) fn short(revision: &str) -> String {
    revision.get(..19).map_or_else(|| revision.to_owned(), |s| format!("{s}…"))
}

/// The table of the run list (also served alone as the live fragment).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunsTable {
    pub(crate) rows: Vec<RowView>,
    /// The query string of the next (older) page, if there is one.
    pub(crate) older: Option<String>,
    /// Whether this is not the first page.
    pub(crate) paged: bool,
}

#[derive(askama::Template)]
#[template(path = "console/runs.html")]
struct RunsPage {
    chrome: Chrome,
    filters: ListQuery,
    states: Vec<&'static str>,
    /// The workflows the viewer may list runs of (the filter's own among them).
    workflows: Vec<String>,
    /// The filters' query string when the viewer may start a batch over every matching run.
    batch: Option<String>,
    table: RunsTable,
    /// Why a filter is not usable: text, with the names written as code (`true`).
    problem: Option<Vec<(bool, String)>>,
    live: String,
}

#[derive(askama::Template)]
#[template(path = "console/runs_fragment.html")]
struct RunsFragment {
    table: RunsTable,
}

impl Page for RunsPage {}
impl Page for RunsFragment {}

/// Why a filter is not usable (shown on the page).
pub(super) fn filters(query: &ListQuery) -> Result<(ListFilter, Option<Cursor>), String> {
    no_unknown(&query.unknown, RUN_FILTERS)?;
    let state = match present(&query.state) {
        None => None,
        Some(text) => Some(
            RunState::ALL
                .into_iter()
                .find(|s| s.as_str() == text)
                .ok_or_else(|| format!("`{text}` is not a run state; pick one from the list"))?,
        ),
    };
    let attention = match present(&query.reason).as_deref() {
        None => None,
        Some("unknown-effect") => Some(AttentionReason::UnknownEffect),
        Some("restore-hold") => Some(AttentionReason::RestoreHold),
        Some(_) => return Err("the attention reason is `unknown-effect` or `restore-hold`".to_owned()),
    };
    let instant = |text: &str, what: &str| -> Result<Option<i64>, String> {
        match present(text) {
            None => Ok(None),
            Some(text) => parse_instant(&text).map(|i| Some(i.0)).ok_or_else(|| {
                format!("`{what}` is not a date (2026-12-01), a time (2026-12-01T10:42) or an RFC 3339 instant")
            }),
        }
    };
    let filter = ListFilter {
        workflow: present(&query.workflow),
        state,
        owner: None,
        revision: match present(&query.revision) {
            Some(r) if !is_revision(&r) => {
                return Err(
                    "`revision` is a whole revision: `sha256:` and 64 hex digits (the deployment page lists them)"
                        .to_owned(),
                );
            }
            r => r,
        },
        attention,
        step: present(&query.step),
        admitted_from: instant(&query.from, "admitted from")?,
        admitted_to: instant(&query.to, "admitted before")?,
        run_id: match present(&query.run) {
            Some(run) if uuid::Uuid::try_parse(&run).is_err() => {
                return Err("`run` is a run id: a UUID such as 0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10".to_owned());
            }
            run => run,
        },
        keys: match present(&query.key) {
            None => Vec::new(),
            Some(text) => vec![search_key(&text)?],
        },
        idempotency_key: present(&query.idempotency_key),
        run_ids: None,
    };
    if let (Some(from), Some(to)) = (filter.admitted_from, filter.admitted_to)
        && from >= to
    {
        return Err("`admitted from` must be before `admitted before`".to_owned());
    }
    let cursor = match present(&query.cursor) {
        None => None,
        Some(text) => Some(parse_cursor(&text).ok_or("the page cursor is not one this console gave")?),
    };
    Ok((filter, cursor))
}

/// Whether `text` is a whole revision (`sha256:` and 64 lowercase hex digits).
fn is_revision(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// A search key filter `NAME=VALUE` (the value exact).
fn search_key(text: &str) -> Result<(String, String), String> {
    let usage = "the search key filter is `NAME=VALUE`, NAME one of the workflow's `searchKeys` (the value exact)";
    let (name, value) = text.split_once('=').ok_or(usage)?;
    let (name, value) = (name.trim(), value.trim());
    if !coordinator_core::decode::is_name(name) || value.is_empty() {
        return Err(usage.to_owned());
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// A date, a `datetime-local` value (both UTC) or an RFC 3339 instant.
pub(crate) fn parse_instant(text: &str) -> Option<Instant> {
    match text.len() {
        10 => Instant::parse_rfc3339(&format!("{text}T00:00:00Z")),
        16 => Instant::parse_rfc3339(&format!("{text}:00Z")),
        _ => Instant::parse_rfc3339(text),
    }
}

fn parse_cursor(text: &str) -> Option<Cursor> {
    let (at, id) = text.split_once('.')?;
    Some(Cursor { admitted_at: at.parse().ok()?, id: id.to_owned() }).filter(|c| !c.id.is_empty())
}

/// The URL query of `filters` with `cursor`.
fn query_string(query: &ListQuery, cursor: Option<&str>) -> String {
    let mut out: Vec<String> = query.pairs().iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    if let Some(cursor) = cursor {
        out.push(format!("cursor={}", encode(cursor)));
    }
    out.join("&")
}

impl ListQuery {
    /// The filters given (name, trimmed value), in the page's order.
    pub(super) fn pairs(&self) -> Vec<(&'static str, String)> {
        let pairs = [
            ("workflow", &self.workflow),
            ("state", &self.state),
            ("reason", &self.reason),
            ("step", &self.step),
            ("revision", &self.revision),
            ("from", &self.from),
            ("to", &self.to),
            ("run", &self.run),
            ("key", &self.key),
            ("idempotencyKey", &self.idempotency_key),
        ];
        pairs.iter().filter(|(_, v)| !v.trim().is_empty()).map(|(k, v)| (*k, v.trim().to_owned())).collect()
    }

    /// The query string of the filters given (no cursor).
    pub(super) fn filters_query(&self) -> String {
        query_string(self, None)
    }
}

/// Percent-encodes a query value.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `GET /console/runs`.
pub(super) async fn list(viewer: Viewer, State(state): State<ApiState>, Query(query): Query<ListQuery>) -> Response {
    let engine = &state.engine;
    let (filter, cursor) = match filters(&query) {
        Ok(parsed) => parsed,
        Err(message) => {
            let chrome = Chrome::of(engine, &viewer, "runs").await;
            let live = format!("/console/runs?{}", query_string(&query, None));
            let workflows = workflows(engine, &viewer, &query.workflow).await;
            let page_view = RunsPage {
                chrome,
                filters: query,
                states: states(),
                workflows,
                batch: None,
                table: RunsTable::default(),
                problem: Some(message.split('`').enumerate().map(|(i, t)| (i % 2 == 1, t.to_owned())).collect()),
                live,
            };
            return page(&page_view, StatusCode::BAD_REQUEST);
        }
    };
    let Some(slices) = viewer.principal.listing(filter.workflow.as_deref()) else {
        return forbidden(Role::Read, filter.workflow.as_deref());
    };
    // The union of the slices' first pages, newest first, cut to the page:
    // each of the union's first runs is among the first of its slice.
    let mut rows: Vec<RunRow> = Vec::new();
    for slice in slices {
        let filter =
            ListFilter { workflow: slice.workflow.or(filter.workflow.clone()), owner: slice.owner, ..filter.clone() };
        match engine.store().list_runs_newest(&filter, cursor.as_ref(), PAGE).await {
            Ok(page) => rows.extend(page.runs),
            Err(e) => return internal(e.into()),
        }
    }
    rows.sort_by(|a, b| (b.admitted_at, &b.id).cmp(&(a.admitted_at, &a.id)));
    rows.dedup_by(|a, b| a.id == b.id);
    let limit = usize::try_from(PAGE).unwrap_or(usize::MAX);
    rows.truncate(limit);
    let older = (rows.len() >= limit)
        .then(|| rows.last().map(|r| query_string(&query, Some(&format!("{}.{}", r.admitted_at, r.id)))))
        .flatten();
    let table = RunsTable { rows: rows.iter().map(RowView::of).collect(), older, paged: cursor.is_some() };
    if !query.fragment.is_empty() {
        return page(&RunsFragment { table }, StatusCode::OK);
    }
    let chrome = Chrome::of(engine, &viewer, "runs").await;
    let live = format!("/console/runs?{}", query_string(&query, present(&query.cursor).as_deref()));
    let workflows = workflows(engine, &viewer, &query.workflow).await;
    let may_batch = match &filter.workflow {
        Some(workflow) => viewer.principal.holds(Role::Operate, workflow),
        None => viewer.principal.holds_everywhere(Role::Operate),
    };
    let batch = may_batch.then(|| query.filters_query());
    let view = RunsPage { chrome, filters: query, states: states(), workflows, batch, table, problem: None, live };
    page(&view, StatusCode::OK)
}

/// The workflows of stored revisions whose runs the viewer may list, and
/// `chosen` (the filter as given) when it is not among them.
async fn workflows(engine: &crate::engine::Engine, viewer: &Viewer, chosen: &str) -> Vec<String> {
    let mut names: Vec<String> = match engine.store().workflow_names().await {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(error = %e, "the workflows could not be read for the runs page's filter");
            Vec::new()
        }
    };
    names.retain(|w| viewer.principal.listing(Some(w.as_str())).is_some());
    let chosen = chosen.trim();
    if !chosen.is_empty() && !names.iter().any(|w| w == chosen) {
        names.push(chosen.to_owned());
    }
    names
}

fn states() -> Vec<&'static str> {
    RunState::ALL.iter().map(|s| s.as_str()).collect()
}

pub(crate) fn internal(error: EngineError) -> Response {
    tracing::error!(error = %error, "a console page could not be completed");
    problem(StatusCode::INTERNAL_SERVER_ERROR, "The page could not be completed; the log says why.")
}

/// One group of the inbox.
#[derive(Debug, Clone)]
pub(crate) struct GroupView {
    pub(crate) reason: &'static str,
    pub(crate) workflow: String,
    pub(crate) step: String,
    pub(crate) runs: i64,
    pub(crate) since: String,
    /// The query string that opens the group.
    pub(crate) query: String,
}

/// The inbox's query: which group to open, and where its page continues.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct InboxQuery {
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    step: String,
    #[serde(default)]
    after: String,
    #[serde(default)]
    fragment: String,
    /// Any other parameter: named on a 400 page.
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, String>,
}

/// The open group's runs, oldest in attention first.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupRuns {
    pub(crate) title: String,
    pub(crate) rows: Vec<RowView>,
    pub(crate) later: Option<String>,
    /// The bulk actions' preview links of this group.
    pub(crate) bulk: Vec<(String, String)>,
    /// The links to a batch over every run of the group (its dry run first).
    pub(crate) batch: Vec<(String, String)>,
}

#[derive(askama::Template)]
#[template(path = "console/attention.html")]
struct InboxPage {
    chrome: Chrome,
    groups: Vec<GroupView>,
    open: Option<GroupRuns>,
    live: String,
}

#[derive(askama::Template)]
#[template(path = "console/attention_fragment.html")]
struct InboxFragment {
    groups: Vec<GroupView>,
    open: Option<GroupRuns>,
}

impl Page for InboxPage {}
impl Page for InboxFragment {}

/// `GET /console/attention`.
pub(super) async fn inbox(viewer: Viewer, State(state): State<ApiState>, Query(query): Query<InboxQuery>) -> Response {
    let engine = &state.engine;
    // Attention is an operator's matter: the workflows this viewer operates.
    let operated = operated(&viewer);
    if operated.is_empty() {
        return forbidden(Role::Operate, None);
    }
    if let Err(message) = no_unknown(&query.unknown, "the attention inbox opens a group by workflow, reason and step") {
        return problem(StatusCode::BAD_REQUEST, message);
    }
    let mut groups = Vec::new();
    for workflow in &operated {
        match engine.store().attention_groups(workflow.as_deref(), None).await {
            Ok(found) => groups.extend(found),
            Err(e) => return internal(e.into()),
        }
    }
    groups.sort_by(|a, b| (a.oldest_since, &a.workflow).cmp(&(b.oldest_since, &b.workflow)));
    let groups: Vec<GroupView> = groups
        .iter()
        .map(|g| {
            let step = g.step.clone().unwrap_or_default();
            let query = format!("workflow={}&reason={}&step={}", encode(&g.workflow), g.reason.as_str(), encode(&step));
            GroupView {
                reason: g.reason.as_str(),
                workflow: g.workflow.clone(),
                step,
                runs: g.runs,
                since: rfc3339(g.oldest_since),
                query,
            }
        })
        .collect();
    let open = match group_runs(&state, &viewer, &query).await {
        Ok(open) => open,
        Err(response) => return response,
    };
    if !query.fragment.is_empty() {
        return page(&InboxFragment { groups, open }, StatusCode::OK);
    }
    let chrome = Chrome::of(engine, &viewer, "attention").await;
    let live = format!(
        "/console/attention?workflow={}&reason={}&step={}&after={}",
        encode(&query.workflow),
        encode(&query.reason),
        encode(&query.step),
        encode(&query.after)
    );
    page(&InboxPage { chrome, groups, open, live }, StatusCode::OK)
}

/// The workflows the viewer operates (`None`: every workflow).
pub(crate) fn operated(viewer: &Viewer) -> Vec<Option<String>> {
    if viewer.principal.holds_everywhere(Role::Operate) {
        return vec![None];
    }
    viewer.principal.operated_workflows().into_iter().map(Some).collect()
}

async fn group_runs(state: &ApiState, viewer: &Viewer, query: &InboxQuery) -> Result<Option<GroupRuns>, Response> {
    let (Some(workflow), Some(reason)) = (present(&query.workflow), present(&query.reason)) else { return Ok(None) };
    if !viewer.principal.holds(Role::Operate, &workflow) {
        return Err(forbidden(Role::Operate, Some(&workflow)));
    }
    let attention = match reason.as_str() {
        "unknown-effect" => AttentionReason::UnknownEffect,
        "restore-hold" => AttentionReason::RestoreHold,
        _ => return Err(problem(StatusCode::BAD_REQUEST, "the reason is `unknown-effect` or `restore-hold`")),
    };
    let after = match present(&query.after) {
        None => None,
        Some(text) => {
            let parsed = text
                .split_once('.')
                .and_then(|(since, id)| Some(AttentionCursor { since: since.parse().ok()?, id: id.to_owned() }));
            Some(
                parsed
                    .ok_or_else(|| problem(StatusCode::BAD_REQUEST, "the page cursor is not one this console gave"))?,
            )
        }
    };
    let step = present(&query.step);
    let filter = ListFilter {
        workflow: Some(workflow.clone()),
        attention: Some(attention),
        step: step.clone(),
        ..ListFilter::default()
    };
    let (rows, next) =
        state.engine.store().attention_runs(&filter, after.as_ref(), PAGE).await.map_err(|e| internal(e.into()))?;
    let base =
        format!("workflow={}&reason={}&step={}", encode(&workflow), reason, encode(step.as_deref().unwrap_or("")));
    let later = next.map(|c| format!("{base}&after={}", encode(&format!("{}.{}", c.since, c.id))));
    let title = match &step {
        Some(step) => format!("{workflow}: {} at {step}", reason.replace('-', " ")),
        None => format!("{workflow}: {}", reason.replace('-', " ")),
    };
    let mut bulk = Vec::new();
    if attention == AttentionReason::UnknownEffect && step.is_some() {
        let selection = format!(
            "workflow={}&reason=unknown-effect&step={}",
            encode(&workflow),
            encode(step.as_deref().unwrap_or(""))
        );
        for (action, label) in
            [("reconcile", "Reconcile all"), ("retry-same", "Retry all with the same key"), ("cancel", "Cancel all")]
        {
            bulk.push((format!("/console/bulk?action={action}&{selection}"), label.to_owned()));
        }
    }
    let mut batch = Vec::new();
    let mut group = format!("workflow={}&reason={reason}", encode(&workflow));
    if let Some(step) = &step {
        group.push_str(&format!("&step={}", encode(step)));
    }
    let actions: &[(&str, &str)] = match attention {
        AttentionReason::UnknownEffect => {
            &[("reconcile", "Reconcile"), ("retry-same", "Retry with the same key"), ("cancel", "Cancel")]
        }
        AttentionReason::RestoreHold => &[("cancel", "Cancel")],
    };
    for (action, label) in actions {
        batch
            .push((format!("/console/batches/new?action={action}&{group}"), format!("{label} every run of the group")));
    }
    Ok(Some(GroupRuns { title, rows: rows.iter().map(RowView::of).collect(), later, bulk, batch }))
}
