//! Carrying one offered task: acquire, request, report.
//!
//! Everything that can fail before the lease is acquired (an unknown
//! connection, a command that does not decode, the acquire itself) sends
//! nothing: the offer lapses and the coordinator offers the task again. Once
//! acquired, the request is made and its classified answer reported; a report
//! the coordinator cannot take now (`UNAVAILABLE`, a broken connection) is
//! sent again, the same, until it is answered or [`REPORT_PERSISTENCE`] has
//! passed. The coordinator answers the same report the same way, so a report
//! whose answer was lost is simply sent again.

use std::time::Duration;

use coordinator_core::machine::run::Command;
use coordinator_core::pace::Health;
use coordinator_products::{AnswerKind, Connection, Explained, Sending, Traceparent};
use coordinator_proto::v1::{
    AcquireTaskLeaseRequest, ProductHealth, RenewTaskLeaseRequest, ReportTaskResultRequest, Task, TaskKind,
};
use tonic::Code;

use super::{Shared, backoff};

/// How long a report is retried while the coordinator cannot take it.
pub const REPORT_PERSISTENCE: Duration = Duration::from_secs(600);
/// What a lease allows beyond the requests themselves (reporting, a slow coordinator).
const LEASE_MARGIN: Duration = Duration::from_secs(10);

/// What a task asks, decoded before anything is acquired.
enum Ask {
    Attempt { command: Command, attempt: u32 },
    Receipt { idempotency_key: String },
    Observation,
}

/// Acquires, does and reports one task (see the module docs).
pub(crate) async fn carry(shared: &Shared, task: Task) {
    let Some(connection) = shared.connections.get(&task.connection) else {
        tracing::warn!(connection = %task.connection, "a task of a connection this worker has not configured: not taken");
        return;
    };
    let ask = match ask(&task) {
        Ok(ask) => ask,
        Err(why) => {
            tracing::error!(run_id = %task.run_id, step = %task.step, problem = why, "a task that cannot be done: not taken");
            return;
        }
    };
    let ttl = lease(connection);
    let mut client = shared.client.clone();
    let acquire = AcquireTaskLeaseRequest {
        task_id: task.task_id.clone(),
        owner: shared.owner.clone(),
        ttl_seconds: ttl_seconds(ttl),
        run_id: task.run_id.clone(),
    };
    let attempt = match client.acquire_task_lease(acquire).await {
        Ok(acquired) => acquired.into_inner().attempt,
        Err(status) => {
            // Nothing was sent: the coordinator offers the task again.
            tracing::info!(run_id = %task.run_id, step = %task.step, code = ?status.code(), "task not acquired; nothing sent");
            return;
        }
    };
    tracing::debug!(run_id = %task.run_id, step = %task.step, attempt, "task acquired; sending");
    let started = std::time::Instant::now();
    let Answered { answer, kind, reason, health, retry_after_ms } = request(shared, connection, &task, ask).await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let report = ReportTaskResultRequest {
        task_id: task.task_id.clone(),
        run_id: task.run_id.clone(),
        step: task.step.clone(),
        attempt,
        owner: shared.owner.clone(),
        answer,
        reason,
        elapsed_ms,
        health: health.into(),
        retry_after_ms: retry_after_ms.unwrap_or(0),
    };
    send_report(shared, report, kind, ttl).await;
}

/// Decodes what the task asks.
fn ask(task: &Task) -> Result<Ask, &'static str> {
    match TaskKind::try_from(task.kind) {
        Ok(TaskKind::Attempt) => {
            let command: Command = serde_json::from_slice(&task.command).map_err(|_| "its command does not decode")?;
            let attempt = u32::try_from(task.attempt).map_err(|_| "its attempt number is out of range")?;
            Ok(Ask::Attempt { command, attempt })
        }
        Ok(TaskKind::Receipt) => {
            let command: Command = serde_json::from_slice(&task.command).map_err(|_| "its command does not decode")?;
            Ok(Ask::Receipt { idempotency_key: command.idempotency_key })
        }
        Ok(TaskKind::Observation) if !task.completion.is_empty() => Ok(Ask::Observation),
        Ok(TaskKind::Observation) => Err("an observation without a completion"),
        Ok(TaskKind::Unspecified) | Err(_) => Err("an unknown kind of task"),
    }
}

/// A classified answer as a report carries it.
struct Answered {
    /// The answer as JSON.
    answer: Vec<u8>,
    /// Its kind (`accepted`, `pending`, …).
    kind: &'static str,
    /// The classifier's reason (never a payload).
    reason: String,
    /// What it says of the product's health.
    health: ProductHealth,
    /// The product's `Retry-After` (ms), when it asked to slow down.
    retry_after_ms: Option<i64>,
}

/// Makes the request and returns the classified answer.
async fn request(shared: &Shared, connection: &Connection, task: &Task, ask: Ask) -> Answered {
    let trace = Traceparent::parse(&task.traceparent);
    let products = &shared.products;
    match ask {
        Ask::Attempt { command, attempt } => {
            let explained = products
                .call_traced(
                    connection,
                    &task.operation,
                    &command,
                    &task.run_id,
                    attempt,
                    if task.send_idempotency_key { Sending::Keyed } else { Sending::Read },
                    trace,
                )
                .await;
            let retry_after_ms = coordinator_products::retry_after_ms(&explained.answer);
            encoded(explained, retry_after_ms)
        }
        Ask::Receipt { idempotency_key } => {
            encoded(products.receipt_traced(connection, &idempotency_key, trace).await, None)
        }
        Ask::Observation => {
            encoded(products.observe_traced(connection, &task.completion, &task.reference, trace).await, None)
        }
    }
}

fn encoded<T: AnswerKind + serde::Serialize>(explained: Explained<T>, retry_after_ms: Option<i64>) -> Answered {
    let kind = explained.answer.kind();
    // The machine's answer types always encode.
    let answer = serde_json::to_vec(&explained.answer).unwrap_or_default();
    let health = match explained.reason.health(retry_after_ms) {
        Some(Health::Healthy) => ProductHealth::Healthy,
        Some(Health::SlowDown { .. }) => ProductHealth::SlowDown,
        Some(Health::Failed) => ProductHealth::Failed,
        None => ProductHealth::Unspecified,
    };
    Answered { answer, kind, reason: explained.reason.to_string(), health, retry_after_ms }
}

/// Sends a report until the coordinator answers it (or [`REPORT_PERSISTENCE`] passes).
/// While it retries, the lease (`ttl` long) is renewed before each attempt,
/// so a coordinator that comes back before the lease ran out still finds the
/// task the worker's.
async fn send_report(shared: &Shared, report: ReportTaskResultRequest, kind: &'static str, ttl: Duration) {
    let started = tokio::time::Instant::now();
    let mut failures = 0;
    loop {
        let mut client = shared.client.clone();
        match client.report_task_result(report.clone()).await {
            Ok(answer) => {
                let accepted = answer.into_inner().accepted;
                if accepted {
                    tracing::info!(run_id = %report.run_id, step = %report.step, attempt = report.attempt, answer = kind, "reported");
                } else {
                    tracing::warn!(
                        run_id = %report.run_id,
                        step = %report.step,
                        attempt = report.attempt,
                        answer = kind,
                        "the report was stale (the lease was taken over): acknowledged, not applied"
                    );
                }
                return;
            }
            Err(status) if retryable(status.code()) && started.elapsed() < REPORT_PERSISTENCE => {
                tracing::warn!(
                    run_id = %report.run_id,
                    step = %report.step,
                    code = ?status.code(),
                    "the coordinator could not take the report; sending it again"
                );
                tokio::time::sleep(backoff(failures)).await;
                failures = failures.saturating_add(1);
                renew(shared, &report, ttl).await;
            }
            Err(status) => {
                tracing::error!(
                    run_id = %report.run_id,
                    step = %report.step,
                    code = ?status.code(),
                    message = status.message(),
                    "the report was not taken; its lease runs out and the coordinator settles the task"
                );
                return;
            }
        }
    }
}

/// Extends the lease of a task whose report is being retried (a failure changes nothing: the report is sent anyway).
async fn renew(shared: &Shared, report: &ReportTaskResultRequest, ttl: Duration) {
    let request = RenewTaskLeaseRequest {
        task_id: report.task_id.clone(),
        owner: report.owner.clone(),
        ttl_seconds: ttl_seconds(ttl),
        run_id: report.run_id.clone(),
        attempt: report.attempt,
    };
    let mut client = shared.client.clone();
    if let Ok(answer) = client.renew_task_lease(request).await
        && !answer.into_inner().renewed
    {
        tracing::warn!(run_id = %report.run_id, step = %report.step, "the lease ran out while the report waited; sending it anyway");
    }
}

/// Codes after which the same report may be taken later.
fn retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::Unknown
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::ResourceExhausted
            | Code::Aborted
    )
}

/// A lease length as the API takes it (whole seconds, at most an hour).
fn ttl_seconds(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_secs()).unwrap_or(3600).min(3600)
}

/// The lease a task of `connection` asks for: a token request and the
/// request itself each take at most connect + request timeout, plus a margin.
pub(crate) fn lease(connection: &Connection) -> Duration {
    connection.connect_timeout.saturating_add(connection.request_timeout).saturating_mul(2).saturating_add(LEASE_MARGIN)
}
