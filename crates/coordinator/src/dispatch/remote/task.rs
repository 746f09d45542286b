//! The task a worker sees: an outbox row with what its request needs (the
//! prepared command, the completion reference), and the task id that names
//! it across calls: `<run>.<kind>.<attempt>.<step>`.

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::run::Run;
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::workflow::Step;
use coordinator_products::Sending;
use coordinator_proto::v1;
use coordinator_store::{WorkItem, WorkKind};

use crate::engine::error::EngineError;

/// A task id that does not name an outbox row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task_id must be `<run>.<kind>.<attempt>.<step>` as PollTasks gave it")]
pub struct BadTaskId;

/// The task id of an outbox row.
pub(crate) fn task_id(item: &WorkItem) -> String {
    format!("{}.{}.{}.{}", item.run_id, item.kind.as_str(), item.attempt, item.step)
}

/// The outbox row a task id names (`reclaimed` and `claims` unknown: false and 0).
pub(crate) fn parse_task_id(id: &str) -> Result<WorkItem, BadTaskId> {
    let mut parts = id.splitn(4, '.');
    let (Some(run_id), Some(kind), Some(attempt), Some(step)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadTaskId);
    };
    let kind = WorkKind::parse(kind).ok_or(BadTaskId)?;
    let attempt: i64 = attempt.parse().map_err(|_| BadTaskId)?;
    if run_id.is_empty() || step.is_empty() || attempt < 0 {
        return Err(BadTaskId);
    }
    Ok(WorkItem { run_id: run_id.to_owned(), step: step.to_owned(), kind, attempt, reclaimed: false, claims: 0 })
}

/// The proto kind of a row.
pub(crate) fn kind(kind: WorkKind) -> v1::TaskKind {
    match kind {
        WorkKind::Attempt => v1::TaskKind::Attempt,
        WorkKind::Receipt => v1::TaskKind::Receipt,
        WorkKind::Observation => v1::TaskKind::Observation,
    }
}

/// What an offered row asks, for its worker.
pub(crate) struct Described {
    /// The task.
    pub(crate) task: v1::Task,
    /// The effect of the call (attempts and receipts), to judge a reclaimed attempt.
    pub(crate) effect: Option<Effect>,
}

/// Describes an offered row of `run` (opened from the claim's snapshot).
pub(crate) fn describe(
    wf: &Workflow,
    run: &Run,
    item: &WorkItem,
    connection: &str,
    trace_parent: Option<&str>,
    offered_until_ms: i64,
) -> Result<Described, EngineError> {
    let mut task = v1::Task {
        task_id: task_id(item),
        run_id: item.run_id.clone(),
        step: item.step.clone(),
        kind: kind(item.kind).into(),
        attempt: item.attempt,
        connection: connection.to_owned(),
        traceparent: trace_parent.unwrap_or_default().to_owned(),
        offered_until_ms,
        ..v1::Task::default()
    };
    let mut effect = None;
    match item.kind {
        WorkKind::Attempt | WorkKind::Receipt => {
            let (_, pinned) = wf.operation_of(&item.step).ok_or_else(|| missing(item, "call step"))?;
            let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
            effect = Some(pinned.descriptor.effect);
            task.operation =
                pinned.operation.split_once('.').map_or(pinned.operation.as_str(), |(_, op)| op).to_owned();
            // Keyed as an in-process attempt is (`Sending`); the remote worker turns it back into `Sending`.
            task.send_idempotency_key = Sending::from(pinned.descriptor.effect) == Sending::Keyed;
            task.command = serde_json::to_vec(&call.command).map_err(|e| {
                EngineError::Corrupt(format!("the command of run {} step {}: {e}", item.run_id, item.step))
            })?;
        }
        WorkKind::Observation => {
            let Some(Step::WaitFor(wait)) = wf.step(&item.step) else { return Err(missing(item, "wait-for step")) };
            let record = run.wait(&item.step).ok_or_else(|| missing(item, "wait"))?;
            task.completion = wait.completion.name.clone();
            task.reference = record.reference.clone();
        }
    }
    Ok(Described { task, effect })
}

fn missing(item: &WorkItem, what: &str) -> EngineError {
    EngineError::Corrupt(format!("run {} has no {what} for step {} ({})", item.run_id, item.step, item.kind.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_names_its_row_and_nothing_else() {
        let item = WorkItem {
            run_id: "0190a0e0-0000-7000-8000-000000000001".into(),
            step: "send.notice".into(),
            kind: WorkKind::Attempt,
            attempt: 3,
            reclaimed: true,
            claims: 2,
        };
        let parsed = parse_task_id(&task_id(&item));
        assert_eq!(parsed, Ok(WorkItem { reclaimed: false, claims: 0, ..item }));
        for bad in [
            "",
            "run",
            "run.attempt.3",
            "run.nothing.3.step",
            "run.attempt.x.step",
            "run.attempt.-1.step",
            ".attempt.1.s",
        ] {
            assert_eq!(parse_task_id(bad), Err(BadTaskId), "{bad:?}");
        }
    }
}
