//! The [`TaskService`] handlers (the life of a task: `coordinator-proto`'s
//! worker.proto). Every handler authenticates first ([`auth`]); store failures
//! are `UNAVAILABLE` (the database unreachable, or the fence holding: the
//! worker tries again) or `INTERNAL`; a bad request is `INVALID_ARGUMENT`
//! naming the field, never echoing a payload.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coordinator_core::machine::event::{CallAnswer, Event, Observation, ReceiptAnswer};
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::runtime::Rate;
use coordinator_core::pace::{Health, Limits};
use coordinator_products::AnswerKind;
use coordinator_proto::v1::task_service_server::TaskService;
use coordinator_proto::v1::{
    AcquireTaskLeaseRequest, AcquireTaskLeaseResponse, ConnectionLimits, PollTasksRequest, PollTasksResponse,
    ProductHealth, RenewTaskLeaseRequest, RenewTaskLeaseResponse, ReportTaskResultRequest, ReportTaskResultResponse,
    Task,
};
use coordinator_store::{Claim, StoreError, WorkItem, WorkKind};
use tonic::{Request, Response, Status};

use crate::auth::access::{Access, Principal};
use crate::dispatch::remote::task::{self, describe};
use crate::dispatch::remote::{MAX_LEASE, MAX_POLL_TASKS, MAX_POLL_WAIT, OFFER_WINDOW, auth, lease_owner, offer_owner};
use crate::engine::Engine;
use crate::engine::commit_hooks::Note;
use crate::engine::error::EngineError;

/// The longest a waiting poll goes without looking at the store (other
/// processes' commits wake nobody here, unless Redis dispatch hints do: then
/// [`hints::SWEEP`](crate::dispatch::hints::SWEEP) while they reach Redis).
const POLL_RECHECK: Duration = Duration::from_millis(250);
/// The longest owner id and reason taken.
const MAX_TEXT: usize = 200;
/// How soon a waiting poll looks again at work that is due but was not
/// offered (a limit holds it back), unless woken earlier.
const LIMITED_RECHECK_MS: i64 = 100;
/// The longest hold a worker's report of a `Retry-After` places (a day).
const MAX_HOLD_MS: i64 = 86_400_000;

/// The task service of one engine.
pub(crate) struct TaskApi {
    engine: Arc<Engine>,
    access: Arc<Access>,
}

impl TaskApi {
    pub(crate) fn new(engine: Arc<Engine>, access: Arc<Access>) -> TaskApi {
        TaskApi { engine, access }
    }

    /// Offers up to `max` due tasks of `lanes` (under the worker's own
    /// limits, `asked`, as well as the deployment's); reclaimed attempts that
    /// must not be resent are settled instead.
    async fn offer(
        &self,
        subject: &str,
        owner: &str,
        lanes: &[String],
        asked: &BTreeMap<String, Limits>,
        max: u32,
    ) -> Result<Vec<Task>, Status> {
        let engine = &self.engine;
        let offered_to = offer_owner(subject, owner);
        let now = engine.now();
        let window = millis(OFFER_WINDOW);
        let offered =
            engine.store.offer_within(lanes, asked, now, &offered_to, window, max).await.map_err(store_status)?;
        let mut tasks = Vec::with_capacity(offered.len());
        for (item, claimed) in offered {
            engine.metrics().dispatch_delay("remote", claimed.due_at, now);
            match self.offered(&offered_to, item, &claimed, now.saturating_add(window)).await {
                Ok(Some(task)) => tasks.push(task),
                Ok(None) => {}
                // Its offer lapses; the row stays queued and is logged each time it comes round.
                Err(e) => tracing::error!(error = %e, "an offered task could not be described; not handed out"),
            }
        }
        Ok(tasks)
    }

    /// The task of one offered row, or `None` when the row was settled here.
    async fn offered(
        &self,
        offered_to: &str,
        item: WorkItem,
        claimed: &coordinator_store::ClaimedRun,
        offered_until_ms: i64,
    ) -> Result<Option<Task>, EngineError> {
        let engine = &self.engine;
        let wf = engine.workflow(&claimed.revision).await?;
        let run = engine.open(&item.run_id, &claimed.snapshot)?;
        let connection = crate::dispatch::remote::connection_of(&wf, &item.step).unwrap_or_default().to_owned();
        let described = describe(&wf, &run, &item, &connection, claimed.trace_parent.as_deref(), offered_until_ms)?;
        let resendable = matches!(described.effect, Some(Effect::Read));
        if item.kind == WorkKind::Attempt && item.reclaimed && !resendable {
            // An earlier worker acquired it and never reported: it may have sent it.
            let attempt = u32::try_from(item.attempt).map_err(|_| EngineError::Corrupt("attempt number".into()))?;
            tracing::warn!(
                run_id = %item.run_id,
                step = %item.step,
                attempt,
                "attempt acquired before and never reported: not offered again, its effect is unknown"
            );
            let event = Event::CallAnswered { step: item.step.clone(), attempt, answer: CallAnswer::Uncertain };
            let detail = format!(
                "attempt {attempt} of step {}: acquired by a worker whose lease ran out without a report; not sent again",
                item.step
            );
            let reason = Some("acquired before and never reported; not sent again".to_owned());
            let note = Note { trace_parent: claimed.trace_parent.clone(), reason, remark: None, batch: None };
            let applied = engine.apply_report(&Claim::Work(item), offered_to, None, &detail, &event, &wf, &note).await;
            match applied {
                Ok(()) | Err(EngineError::Ignored(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(described.task))
    }
}

#[tonic::async_trait]
impl TaskService for TaskApi {
    async fn poll_tasks(&self, request: Request<PollTasksRequest>) -> Result<Response<PollTasksResponse>, Status> {
        let principal = auth::worker(&self.access, &request).await?;
        let request = request.into_inner();
        let owner = owner_id(&request.owner)?;
        let lanes = auth::lanes(&self.engine.remote, principal.subject(), &request.connections)?;
        if request.max_tasks == 0 || request.max_tasks > MAX_POLL_TASKS {
            return Err(Status::invalid_argument(format!("max_tasks must be 1 to {MAX_POLL_TASKS}")));
        }
        let asked = asked_limits(&request.limits, &lanes)?;
        let wait = Duration::from_millis(u64::from(request.wait_ms));
        if wait > MAX_POLL_WAIT {
            return Err(Status::invalid_argument(format!("wait_ms must be 0 to {}", MAX_POLL_WAIT.as_millis())));
        }
        if self.engine.recovery_only {
            // Nothing is dispatched under review
            // (docs/reference/recovery.md#recovery-only-mode): not even to a
            // worker.
            return Err(Status::unavailable(
                "the coordinator runs recovery-only: nothing is dispatched until it is started normally",
            ));
        }
        let deadline = tokio::time::Instant::now() + wait;
        // Woken by this process's commits that queue lane work, not by every commit.
        let mut changes = self.engine.lane_work();
        let mut hinted = self.engine.hints.polling(&lanes);
        loop {
            if self.engine.is_draining() {
                return Err(Status::unavailable("the coordinator is draining: poll another one, or again later"));
            }
            let tasks = hinted.offer(self.offer(principal.subject(), owner, &lanes, &asked, request.max_tasks)).await?;
            let now = tokio::time::Instant::now();
            if !tasks.is_empty() || now >= deadline || lanes.is_empty() {
                return Ok(Response::new(PollTasksResponse { tasks }));
            }
            let at = self.engine.now();
            let next = self.engine.store.offered_work(&lanes, at).await.map_err(store_status)?;
            // Due now and nothing offered: a limit holds it back (its permits come back as answers commit).
            let until_due = next.map(|due| due.saturating_sub(at).max(LIMITED_RECHECK_MS));
            let until_due = until_due.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
            let recheck = self.engine.hints.interval(POLL_RECHECK);
            let sleep = until_due.unwrap_or(recheck).min(recheck).min(deadline - now);
            tokio::select! {
                _ = changes.changed() => {}
                () = hinted.next() => {}
                () = self.engine.drain.begun() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    async fn acquire_task_lease(
        &self,
        request: Request<AcquireTaskLeaseRequest>,
    ) -> Result<Response<AcquireTaskLeaseResponse>, Status> {
        let principal = auth::worker(&self.access, &request).await?;
        let request = request.into_inner();
        let owner = owner_id(&request.owner)?;
        let item = named(&request.task_id, &request.run_id)?;
        let ttl = lease_ttl(request.ttl_seconds)?;
        let now = self.engine.now();
        let (offered_to, holder) = (offer_owner(principal.subject(), owner), lease_owner(principal.subject(), owner));
        match self.engine.store.acquire(&item, &offered_to, &holder, now, ttl).await.map_err(store_status)? {
            Some(acquired) => {
                tracing::debug!(run_id = %acquired.run_id, step = %acquired.step, attempt = acquired.attempt, "task acquired");
                Ok(Response::new(AcquireTaskLeaseResponse {
                    attempt: acquired.attempt,
                    lease_until_ms: now.saturating_add(ttl),
                }))
            }
            None => Err(Status::failed_precondition("the offer lapsed or the task changed: send nothing, poll again")),
        }
    }

    async fn renew_task_lease(
        &self,
        request: Request<RenewTaskLeaseRequest>,
    ) -> Result<Response<RenewTaskLeaseResponse>, Status> {
        let principal = auth::worker(&self.access, &request).await?;
        let request = request.into_inner();
        let owner = owner_id(&request.owner)?;
        let mut item = named(&request.task_id, &request.run_id)?;
        if request.attempt != item.attempt {
            return Err(Status::invalid_argument("attempt must be the one AcquireTaskLease returned for this task"));
        }
        item.attempt = request.attempt;
        let ttl = lease_ttl(request.ttl_seconds)?;
        let now = self.engine.now();
        let holder = lease_owner(principal.subject(), owner);
        let renewed = self.engine.store.renew(&item, &holder, now, ttl).await.map_err(store_status)?;
        let lease_until_ms = if renewed { now.saturating_add(ttl) } else { 0 };
        Ok(Response::new(RenewTaskLeaseResponse { renewed, lease_until_ms }))
    }

    async fn report_task_result(
        &self,
        request: Request<ReportTaskResultRequest>,
    ) -> Result<Response<ReportTaskResultResponse>, Status> {
        let principal = auth::worker(&self.access, &request).await?;
        let request = request.into_inner();
        let owner = owner_id(&request.owner)?;
        let item = named(&request.task_id, &request.run_id)?;
        if request.step != item.step || request.attempt != item.attempt {
            return Err(Status::invalid_argument("step and attempt must be the task's (as PollTasks gave them)"));
        }
        let (event, answered) = answer_event(&item, &request.answer)?;
        let reason = plain(&request.reason);
        let detail = format!(
            "{} of step {}, attempt {}, reported by `{}` ({owner}): {answered}{}",
            item.kind.as_str(),
            item.step,
            item.attempt,
            principal.subject(),
            if reason.is_empty() { String::new() } else { format!("; {reason}") },
        );
        let took = Took {
            answered,
            elapsed: Duration::from_millis(request.elapsed_ms),
            health: health_of(request.health, request.retry_after_ms),
        };
        let accepted = self.report(&principal, owner, item, event, &detail, reason, took).await?;
        Ok(Response::new(ReportTaskResultResponse { accepted }))
    }
}

impl TaskApi {
    /// Applies a report under the lease's fence; says whether it was (now or before) applied.
    #[allow(clippy::too_many_arguments, reason = "the parts of one report, each used once")]
    async fn report(
        &self,
        principal: &Principal,
        owner: &str,
        item: WorkItem,
        event: Event,
        detail: &str,
        reason: String,
        took: Took,
    ) -> Result<bool, Status> {
        let engine = &self.engine;
        let (run_id, step) = (item.run_id.clone(), item.step.clone());
        let Some(row) = engine.store.load(&run_id).await.map_err(store_status)? else {
            tracing::warn!(run_id = %run_id, step = %step, "a report for a run that does not exist: ignored");
            return Ok(false);
        };
        let wf = engine.workflow(&row.revision).await.map_err(engine_status)?;
        if let Some(health) = took.health
            && let Some(connection) = crate::dispatch::remote::connection_of(&wf, &item.step)
        {
            // What the answer says of the product, taken in before its decision queues a retry (as
            // for an in-process answer): a failure that opens the breaker holds that retry back too.
            // A report sent again after its answer was lost counts again: one more failure, at worst.
            engine.pace_health(connection, health, &reason).await;
        }
        let note = Note { trace_parent: row.trace_parent.clone(), reason: Some(reason), remark: None, batch: None };
        let holder = lease_owner(principal.subject(), owner);
        let request = (request_kind(item.kind), crate::dispatch::remote::call_of(&wf, &item.step).map(str::to_owned));
        let applied = engine
            .apply_report(&Claim::Work(item), &holder, Some(principal.subject()), detail, &event, &wf, &note)
            .await;
        let why = match applied {
            Ok(()) => {
                if let (kind, Some(call)) = request
                    && let Some(target) = wf.operation_of(&call).map(|(_, pinned)| pinned)
                {
                    let operation = target.operation.split_once('.').map_or(target.operation.as_str(), |(_, op)| op);
                    engine.metrics().product_request(kind, &target.connection, operation, took.answered, took.elapsed);
                }
                return Ok(true);
            }
            Err(EngineError::Store(StoreError::LeaseLost { .. })) => {
                if engine.store.report_journaled(&run_id, &step, detail).await.map_err(store_status)? {
                    // The same report again (its answer was lost on the way back): the same answer.
                    return Ok(true);
                }
                "the worker does not hold this task's lease (it ran out and was taken over, or was never acquired)"
                    .to_owned()
            }
            Err(EngineError::Ignored(reason)) => format!("the run did not take it ({reason})"),
            Err(e) => return Err(engine_status(e)),
        };
        tracing::info!(run_id = %run_id, step = %step, "a stale report acknowledged and ignored");
        let evidence = format!("not applied, {why}: {detail}");
        engine
            .store
            .journal_report(&run_id, &step, engine.now(), principal.subject(), &evidence)
            .await
            .map_err(store_status)?;
        Ok(false)
    }
}

/// What a worker said of its request: what it took and what it says of the product.
struct Took {
    /// The answer's kind (`accepted`, `pending`, …).
    answered: &'static str,
    /// The request's duration.
    elapsed: Duration,
    /// What the answer says of the product's health (`None`: the worker did not say).
    health: Option<Health>,
}

/// The `request` label of the product request metric.
fn request_kind(kind: WorkKind) -> &'static str {
    match kind {
        WorkKind::Attempt => "attempt",
        WorkKind::Receipt => "receipt",
        WorkKind::Observation => "observation",
    }
}

/// The event a report's answer makes, and the answer's kind in words.
fn answer_event(item: &WorkItem, answer: &[u8]) -> Result<(Event, &'static str), Status> {
    let step = item.step.clone();
    let bad = |what: &str, e: serde_json::Error| {
        // serde's message may quote the answer: say where, not what.
        Status::invalid_argument(format!(
            "answer must be {what} as JSON ({:?} error at line {}, column {}; docs/workers.md)",
            e.classify(),
            e.line(),
            e.column()
        ))
    };
    let number = |n: i64| u32::try_from(n).map_err(|_| Status::invalid_argument("attempt is out of range"));
    Ok(match item.kind {
        WorkKind::Attempt => {
            let answer: CallAnswer = serde_json::from_slice(answer).map_err(|e| bad("a call answer", e))?;
            let kind = answer.kind();
            (Event::CallAnswered { step, attempt: number(item.attempt)?, answer }, kind)
        }
        WorkKind::Receipt => {
            let answer: ReceiptAnswer = serde_json::from_slice(answer).map_err(|e| bad("a receipt answer", e))?;
            let kind = answer.kind();
            (Event::ReceiptAnswered { step, answer }, kind)
        }
        WorkKind::Observation => {
            let answer: Observation = serde_json::from_slice(answer).map_err(|e| bad("an observation", e))?;
            let kind = answer.kind();
            (Event::CompletionObserved { step, seq: number(item.attempt)?, answer }, kind)
        }
    })
}

/// What a report says of the product's health (`None`: nothing, as from a
/// worker that does not say).
fn health_of(health: i32, retry_after_ms: i64) -> Option<Health> {
    match ProductHealth::try_from(health) {
        Ok(ProductHealth::Healthy) => Some(Health::Healthy),
        Ok(ProductHealth::SlowDown) => {
            Some(Health::SlowDown { retry_after_ms: (retry_after_ms > 0).then(|| retry_after_ms.min(MAX_HOLD_MS)) })
        }
        Ok(ProductHealth::Failed) => Some(Health::Failed),
        Ok(ProductHealth::Unspecified) | Err(_) => None,
    }
}

/// A poll's own limits, by connection: each of the poll's connections at
/// most once, a rate above 0 and at most [`Rate::MAX`] (0: none).
fn asked_limits(asked: &[ConnectionLimits], lanes: &[String]) -> Result<BTreeMap<String, Limits>, Status> {
    let mut limits = BTreeMap::new();
    for one in asked {
        if !lanes.contains(&one.connection) {
            return Err(Status::invalid_argument(
                "limits must name connections the poll lists in `connections`, each once",
            ));
        }
        let rate = match Rate::new(one.rate_per_second) {
            Ok(rate) => Some(rate.get()),
            Err(_) if one.rate_per_second == 0.0 => None,
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "limits.rate_per_second must be above 0 and at most {} (0: no rate limit)",
                    Rate::MAX
                )));
            }
        };
        let nonzero = |n: u32| (n > 0).then_some(n);
        let these = Limits { concurrency: nonzero(one.concurrency), rate_per_second: rate, burst: nonzero(one.burst) };
        if limits.insert(one.connection.clone(), these).is_some() {
            return Err(Status::invalid_argument(
                "limits must name connections the poll lists in `connections`, each once",
            ));
        }
    }
    Ok(limits)
}

/// The outbox row a request names (its run id, when given, must be the task's).
fn named(task_id: &str, run_id: &str) -> Result<WorkItem, Status> {
    let item = task::parse_task_id(task_id).map_err(|e| Status::invalid_argument(e.to_string()))?;
    if !run_id.is_empty() && run_id != item.run_id {
        return Err(Status::invalid_argument("run_id is not the run of task_id"));
    }
    Ok(item)
}

/// A worker's process id: 1 to 200 printable characters.
fn owner_id(owner: &str) -> Result<&str, Status> {
    let ok = !owner.is_empty() && owner.len() <= MAX_TEXT && owner.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(owner)
    } else {
        Err(Status::invalid_argument(format!(
            "owner must be 1 to {MAX_TEXT} printable ASCII characters without spaces (the worker process's id)"
        )))
    }
}

/// A lease length in ms from the request's seconds.
fn lease_ttl(seconds: i64) -> Result<i64, Status> {
    let max = i64::try_from(MAX_LEASE.as_secs()).unwrap_or(i64::MAX);
    if (1..=max).contains(&seconds) {
        Ok(seconds.saturating_mul(1000))
    } else {
        Err(Status::invalid_argument(format!("ttl_seconds must be 1 to {max}")))
    }
}

/// A reason as the journal keeps it: printable, at most [`MAX_TEXT`] characters.
fn plain(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(MAX_TEXT).collect()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A store failure as a status: the worker retries what is `UNAVAILABLE`.
pub(crate) fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::Database(_) | StoreError::Unavailable(_) => {
            Status::unavailable("the database is unavailable; try again")
        }
        StoreError::Fenced(_) => Status::unavailable("the coordinator is fenced (restore hold); try again later"),
        other => {
            tracing::error!(error = %other, "a worker's call failed in the store");
            Status::internal("the coordinator could not do this; see its log")
        }
    }
}

fn engine_status(e: EngineError) -> Status {
    match e {
        EngineError::Store(s) => store_status(s),
        other => {
            tracing::error!(error = %other, "a worker's call failed");
            Status::internal("the coordinator could not do this; see its log")
        }
    }
}
