//! `GET /v1/audit` (docs/reference/protection.md#the-audit-journal): the
//! hash-chained audit journal, page by page, by chain position. Entries are
//! shown exactly as chained ([`coordinator_core::audit::Entry`]), with the
//! journal's head, so any client can recompute every hash (`coordinatorctl
//! audit verify`). The journal holds no protected payload: kinds, steps,
//! subjects, and the machine's details.
//!
//! Entries are written pending and chained in the background
//! ([`crate::process::audit_chain`]); before reading, the handler seals
//! whatever is still pending ([`Store::seal_audit`] until a batch comes back
//! short), in every mode (recovery-only included, where the audit chain task
//! does not run), so a reader sees every entry committed before its request,
//! chained.
//!
//! Access: the whole journal (deployment-level entries included) needs
//! `operate` for every workflow (a grant with workflow `*`); `?run=ID` needs
//! `operate` for that run's workflow, like its inspection.
//!
//! [`Store::seal_audit`]: coordinator_store::Store::seal_audit

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use coordinator_core::model::runtime::Role;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::auth::{Caller, run_for};
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// Entries per page when `limit` is not given.
const DEFAULT_LIMIT: u32 = 100;
/// The largest page.
const MAX_LIMIT: u32 = 1000;

/// `GET /v1/audit` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    run: Option<String>,
    after: Option<i64>,
    limit: Option<u32>,
}

/// Seals every entry pending now, a batch at a time.
async fn seal_pending(engine: &Engine) -> Result<(), ApiError> {
    crate::process::audit_chain::seal_pending(engine).await.map_err(|e| EngineError::from(e).into())
}

/// `200 {entries, next, head}`: up to `limit` entries after position `after`
/// (default 0), by position; `next` is the `after` of the next page when this
/// one is full, else `null`; `head` is the journal's last position and hash
/// when the page was read (no entry beyond it is shown); `checkpoint` is the
/// last entry a retention cut removed (`null` when none was): the journal,
/// and its verification, start after it.
pub(super) async fn list(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let usage = "the query parameters are run, after (a position, 0 or more) and limit (1-1000)";
    let Query(query) = query.map_err(|_| ApiError::bad_request(usage))?;
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if after < 0 || !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(usage));
    }
    let mut query = query;
    match &query.run {
        Some(run) => {
            // The run's own spelling of its id from here on.
            query.run = Some(run_for(&engine, &caller, run, Role::Operate).await?.id);
        }
        None if caller.holds_everywhere(Role::Operate) => {}
        None => return Err(ApiError::forbidden(Role::Operate, Some("*"))),
    }
    seal_pending(&engine).await?;
    let page = engine.store().audit(query.run.as_deref(), after, limit).await.map_err(EngineError::from)?;
    Ok(Json(json!({
        "entries": page.entries,
        "next": page.next,
        "head": {"position": page.head.position, "hash": page.head.hash},
        "checkpoint": page.checkpoint.map(|c| json!({"position": c.position, "hash": c.hash})),
    })))
}
