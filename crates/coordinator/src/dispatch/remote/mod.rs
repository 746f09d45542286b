//! Remote connections (runtime.yaml `dispatch: remote`): their product
//! requests are made by `coordinator worker` processes next to the product,
//! over the gRPC API of `coordinator-proto`; this process keeps the runs,
//! decides as for any other connection, and holds none of the product's
//! credentials.
//!
//! The outbox rows of a remote connection are in its **lane** (the
//! connection's name, written when the decision queues them: [`lanes`]). The
//! in-process worker never sends them: a row it claims after a lease ran out
//! is reported uncertain when it was a mutation or evaluation attempt, and
//! otherwise goes back to its lane ([`crate::dispatch::perform`]). Workers take lane rows
//! in two steps ([`service`]): an offer for [`OFFER_WINDOW`] (nothing sent; an
//! offer not acquired lapses without counting as a claim), then an acquire
//! that commits the lease before anything is sent. Reports are applied under
//! that lease's fence and journaled (kind `report`), so a late report of an
//! old attempt is acknowledged, ignored and kept as evidence.
//!
//! - [`task`]: the task a worker sees, and its id.
//! - [`auth`]: the worker's bearer token and which connections it may serve.
//! - [`service`]: the [`TaskService`] handlers.
//! - [`server`]: the gRPC listener with health and reflection.
//!
//! [`TaskService`]: coordinator_proto::v1::task_service_server::TaskService

pub(crate) mod auth;
pub(crate) mod server;
pub(crate) mod service;
pub(crate) mod task;

use std::collections::HashMap;
use std::time::Duration;

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::model::workflow::Step;

/// How long an offered task waits to be acquired before it goes back.
pub const OFFER_WINDOW: Duration = Duration::from_secs(5);
/// The longest lease a worker may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);
/// The longest a poll waits for a task.
pub const MAX_POLL_WAIT: Duration = Duration::from_secs(30);
/// The most tasks one poll hands out.
pub const MAX_POLL_TASKS: u32 = 256;

/// The remote connections: name → the subjects that may serve it.
pub type RemoteConnections = HashMap<String, Vec<String>>;

/// The connection a queued row of `step` goes to: a call's own, or for a
/// `wait-for` step the connection of the call whose completion it observes.
pub(crate) fn connection_of<'a>(wf: &'a Workflow, step: &str) -> Option<&'a str> {
    let call = call_of(wf, step)?;
    wf.operation_of(call).map(|(_, pinned)| pinned.connection.as_str())
}

/// The call step whose operation a queued row of `step` uses: the step
/// itself, or the call a `wait-for` step observes.
pub(crate) fn call_of<'a>(wf: &'a Workflow, step: &'a str) -> Option<&'a str> {
    match wf.step(step)? {
        Step::WaitFor(wait) => Some(wait.completion.step.as_str()),
        Step::Call(_) => Some(step),
        _ => None,
    }
}

/// The (step, lane) of every row `actions` queue for a connection that
/// `lane_of` puts in a lane (a remote one, or one claimed under limits: the
/// workflow's lane of it, `coordinator_store::workflow_lane`).
pub(crate) fn lanes(
    lane_of: impl Fn(&str) -> Option<String>,
    wf: &Workflow,
    actions: &[Action],
) -> Vec<(String, String)> {
    let mut lanes: Vec<(String, String)> = Vec::new();
    for action in actions {
        let step = match action {
            Action::Dispatch { step, .. } | Action::RequestReceipt { step } | Action::Observe { step, .. } => step,
            _ => continue,
        };
        let Some(lane) = connection_of(wf, step).and_then(&lane_of) else { continue };
        if !lanes.iter().any(|(s, _)| s == step) {
            lanes.push((step.clone(), lane));
        }
    }
    lanes
}

/// The lease owner of a worker's acquired tasks (`subject` authenticated, `owner` its process id).
pub(crate) fn lease_owner(subject: &str, owner: &str) -> String {
    format!("worker:{subject}:{owner}")
}

/// The lease owner of tasks offered to a worker and not acquired yet.
pub(crate) fn offer_owner(subject: &str, owner: &str) -> String {
    format!("offer:{subject}:{owner}")
}
