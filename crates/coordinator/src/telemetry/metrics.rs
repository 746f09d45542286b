//! Prometheus metrics of one engine
//! (docs/internals/engine.md#one-event-one-transaction; `GET /metrics`:
//! docs/reference/service.md#health-readiness-metrics).
//!
//! Every engine owns its own recorder (`PrometheusBuilder::build_recorder`) and
//! records through [`metrics::with_local_recorder`], so several engines in one
//! process (tests) never mix their numbers and nothing is installed globally.
//! Counters are recorded only after the transaction that decided them
//! committed (or, for an ignored or refused event, after nothing was written).
//!
//! **Invariant:** a label carries only a name from a closed vocabulary (event
//! kind, classification, run state, admission result, attention reason) or
//! one the deployment and its definitions fix (workflow, connection,
//! operation) — never a run id, an input, a command, a product response or
//! any other payload.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_core::model::run::RunState;
use coordinator_store::{AttentionCount, QueueHeads};
use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// Admissions, by `result` (`created`, `existing`).
pub const ADMISSIONS: &str = "coordinator_admissions_total";
/// Events decided, by `event` (kind) and `outcome` (`applied`, `ignored`, `refused`).
pub const EVENTS: &str = "coordinator_events_total";
/// Attempts queued for dispatch to a product.
pub const DISPATCHES: &str = "coordinator_dispatches_total";
/// Classified product answers to call attempts, by `classification`.
pub const CALL_ANSWERS: &str = "coordinator_call_answers_total";
/// Runs that ended, by `state`.
pub const RUNS_ENDED: &str = "coordinator_runs_ended_total";
/// Seconds from the start of a decision to its commit, by `event` (kind).
pub const DECISION_SECONDS: &str = "coordinator_decision_seconds";
/// Gauge: runs in the database by state (`state`), read at scrape time.
pub const RUNS: &str = "coordinator_runs";
/// Gauge: runs in `attention`, by `workflow` and `reason` (`unknown-effect`, `restore-hold`), read at scrape time.
pub const RUNS_ATTENTION: &str = "coordinator_runs_attention";
/// Gauge: seconds since the oldest due and claimable outbox row became due (0: none), read at scrape time.
pub const OLDEST_DUE_WORK: &str = "coordinator_oldest_due_work_seconds";
/// Gauge: seconds since the oldest due and claimable timer became due (0: none), read at scrape time.
pub const OLDEST_DUE_TIMER: &str = "coordinator_oldest_due_timer_seconds";
/// Seconds one claim round took (one `claim_due` statement).
pub const CLAIM_ROUND_SECONDS: &str = "coordinator_claim_round_seconds";
/// Seconds a product request took, by `request` (`attempt`, `receipt`, `observation`),
/// `connection`, `operation` and the classified `answer`.
pub const PRODUCT_REQUEST_SECONDS: &str = "coordinator_product_request_seconds";
/// Seconds from when work became due (its `not_before`) to its claim, by
/// `path` (`in-process`: claimed by this process's worker; `remote`: offered
/// to a remote worker, which acquires it in the next round trip).
pub const DISPATCH_DELAY_SECONDS: &str = "coordinator_dispatch_delay_seconds";
/// Gauge: 1 while the process drains (stopping: admitting and claiming nothing), else 0.
pub const DRAINING: &str = "coordinator_draining";
/// Lookups of a compiled workflow by revision, by `result` (`hit`, `load`: read, opened and compiled).
pub const DEFINITION_CACHE: &str = "coordinator_definition_cache_total";
/// Gauge: 1 while the restore fence holds in this process (it tripped; nothing is claimed), else 0.
pub const FENCED: &str = "coordinator_fenced";
/// Gauge: 1 while an operator has paused the connection (`connection`), else 0, read at scrape time.
pub const CONNECTION_PAUSED: &str = "coordinator_connection_paused";
/// Gauge: the connection's breaker (`connection`): 0 closed, 1 open, 2 half-open, read at scrape time.
pub const CONNECTION_STATE: &str = "coordinator_connection_state";

/// A schedule's nominal instants, by `workflow`, `schedule` and `result`
/// (`fired`: a run admitted; `skipped`: overlap, catch-up or a refused input;
/// `held`: kept pending by `one-pending`).
pub const SCHEDULE_INSTANTS: &str = "coordinator_schedule_instants_total";

/// Histogram buckets of [`DECISION_SECONDS`] and [`CLAIM_ROUND_SECONDS`].
const DECISION_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
/// Histogram buckets of [`PRODUCT_REQUEST_SECONDS`] (up to a long request timeout).
const REQUEST_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Decisions recorded between two upkeeps of the recorder (drains histogram samples
/// even when nobody scrapes, so memory stays bounded).
const UPKEEP_EVERY: u32 = 256;

/// What an event's decision became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Applied and committed.
    Applied,
    /// Ignored by the machine: nothing was written.
    Ignored,
    /// Refused by the machine's rules: nothing was written.
    Refused,
}

impl Decided {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Applied => "applied",
            Decided::Ignored => "ignored",
            Decided::Refused => "refused",
        }
    }
}

/// What a committed transition did, taken from its actions inside the
/// transaction and recorded once it committed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Committed {
    /// Attempts queued.
    pub dispatches: u64,
    /// The state the run ended in, if it ended.
    pub ended: Option<RunState>,
}

impl Committed {
    /// The summary of a transition's actions.
    pub fn of(actions: &[Action]) -> Committed {
        let mut committed = Committed::default();
        for action in actions {
            match action {
                Action::Dispatch { .. } => committed.dispatches += 1,
                Action::EndRun { state, .. } => committed.ended = Some(*state),
                _ => {}
            }
        }
        committed
    }
}

/// One engine's metrics: its own recorder and the handle that renders it.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    since_upkeep: AtomicU32,
    /// The (workflow, reason) pairs the attention gauge was ever set for, so a pair back to none reads 0.
    attention_labels: Mutex<BTreeSet<(String, &'static str)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh recorder with every metric described.
    pub fn new() -> Metrics {
        let builder = PrometheusBuilder::new();
        // Only an empty bucket list is refused, and this one is not empty.
        let builder = builder
            .set_buckets_for_metric(Matcher::Full(DECISION_SECONDS.to_owned()), &DECISION_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(CLAIM_ROUND_SECONDS.to_owned()), &DECISION_BUCKETS))
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(DISPATCH_DELAY_SECONDS.to_owned()), &DECISION_BUCKETS))
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(PRODUCT_REQUEST_SECONDS.to_owned()), &REQUEST_BUCKETS))
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let metrics = Metrics {
            recorder,
            handle,
            since_upkeep: AtomicU32::new(0),
            attention_labels: Mutex::new(BTreeSet::new()),
        };
        metrics.with(|| {
            describe_counter!(ADMISSIONS, "Admissions, by result (created, existing).");
            describe_counter!(EVENTS, "Events decided, by event kind and outcome (applied, ignored, refused).");
            describe_counter!(DISPATCHES, "Call attempts queued for dispatch to a product.");
            describe_counter!(
                CALL_ANSWERS,
                "Product answers to call attempts, by classification (accepted, refused, retryable, uncertain)."
            );
            describe_counter!(RUNS_ENDED, "Runs that ended, by state.");
            describe_counter!(
                SCHEDULE_INSTANTS,
                "A schedule's nominal instants, by workflow, schedule and result (fired, skipped, held)."
            );
            describe_counter!(
                DEFINITION_CACHE,
                "Lookups of a compiled workflow by revision, by result (hit; load: read, opened and compiled)."
            );
            describe_gauge!(RUNS, "Runs in the database, by state (read at scrape time).");
            describe_gauge!(
                DRAINING,
                "1 while this process drains (stopping: admitting and claiming nothing), else 0."
            );
            gauge!(DRAINING).set(0.0);
            describe_gauge!(
                FENCED,
                "1 while the restore fence holds in this process (the database was restored, promoted or replaced: \
                 nothing is claimed until an operator releases the restore hold), else 0."
            );
            describe_gauge!(
                CONNECTION_PAUSED,
                "1 while an operator has paused the connection (nothing is sent to it), else 0 (read at scrape time)."
            );
            describe_gauge!(
                CONNECTION_STATE,
                "The connection's breaker: 0 closed, 1 open (only a probe is sent), 2 half-open (read at scrape time)."
            );
            describe_histogram!(DECISION_SECONDS, Unit::Seconds, "Decision and commit latency, by event kind.");
            describe_histogram!(
                DISPATCH_DELAY_SECONDS,
                Unit::Seconds,
                "From due to claimed, by path (in-process; remote: offered to a worker)."
            );
        });
        metrics
    }

    /// Records into this engine's recorder.
    pub(crate) fn with(&self, record: impl FnOnce()) {
        metrics::with_local_recorder(&self.recorder, record);
    }

    /// Records `count` instants of `schedule` of `workflow` with `result` (`fired`, `skipped`, `held`).
    pub fn schedule_instants(&self, workflow: &str, schedule: &str, result: &'static str, count: u64) {
        self.with(|| {
            counter!(SCHEDULE_INSTANTS, "workflow" => workflow.to_owned(), "schedule" => schedule.to_owned(), "result" => result)
                .increment(count);
        });
    }

    /// Records an admission that committed (`created`) or found its run (`existing`).
    pub fn admission(&self, created: bool) {
        let result = if created { "created" } else { "existing" };
        self.with(|| counter!(ADMISSIONS, "result" => result).increment(1));
    }

    /// Records one decided event: its outcome, how long deciding and committing
    /// took, and — when it was applied — what the committed transition did.
    pub fn decision(&self, event: &Event, decided: Decided, committed: Option<Committed>, elapsed: Duration) {
        let kind = event_kind(event);
        self.with(|| {
            counter!(EVENTS, "event" => kind, "outcome" => decided.as_str()).increment(1);
            histogram!(DECISION_SECONDS, "event" => kind).record(elapsed.as_secs_f64());
            if decided != Decided::Applied {
                return;
            }
            if let Event::CallAnswered { answer, .. } = event {
                counter!(CALL_ANSWERS, "classification" => classification(answer)).increment(1);
            }
            if let Some(committed) = committed {
                if committed.dispatches > 0 {
                    counter!(DISPATCHES).increment(committed.dispatches);
                }
                if let Some(state) = committed.ended {
                    counter!(RUNS_ENDED, "state" => state.as_str()).increment(1);
                }
            }
        });
        if self.since_upkeep.fetch_add(1, Ordering::Relaxed) + 1 >= UPKEEP_EVERY {
            self.since_upkeep.store(0, Ordering::Relaxed);
            self.handle.run_upkeep();
        }
    }

    /// The admission's first transition, recorded like an applied `admitted` event.
    pub fn admitted(&self, committed: Committed, elapsed: Duration) {
        self.decision(&Event::Admitted, Decided::Applied, Some(committed), elapsed);
    }

    /// Records one claim round's duration.
    pub fn claim_round(&self, elapsed: Duration) {
        self.with(|| histogram!(CLAIM_ROUND_SECONDS).record(elapsed.as_secs_f64()));
    }

    /// Records how long claimed work waited after it became due (`due_at`, ms) until `now`.
    pub fn dispatch_delay(&self, path: &'static str, due_at: i64, now: i64) {
        let seconds = (now.saturating_sub(due_at)).max(0) as f64 / 1000.0;
        self.with(|| histogram!(DISPATCH_DELAY_SECONDS, "path" => path).record(seconds));
    }

    /// Records one product request: its kind, connection, operation (names
    /// from the deployment and the definition) and classified answer.
    pub fn product_request(
        &self,
        request: &'static str,
        connection: &str,
        operation: &str,
        answer: &'static str,
        elapsed: Duration,
    ) {
        let labels = [
            ("request", request.to_owned()),
            ("connection", connection.to_owned()),
            ("operation", operation.to_owned()),
            ("answer", answer.to_owned()),
        ];
        self.with(|| histogram!(PRODUCT_REQUEST_SECONDS, &labels).record(elapsed.as_secs_f64()));
    }

    /// Sets the attention gauge from the store's counts (pairs not among them read 0).
    pub fn attention(&self, counts: &[AttentionCount]) {
        let mut seen = self.attention_labels.lock().unwrap_or_else(PoisonError::into_inner);
        for count in counts {
            seen.insert((count.workflow.clone(), count.reason.as_str()));
        }
        self.with(|| {
            for (workflow, reason) in seen.iter() {
                let n = counts
                    .iter()
                    .find(|c| &c.workflow == workflow && c.reason.as_str() == *reason)
                    .map_or(0, |c| c.runs);
                let labels = [("workflow", workflow.clone()), ("reason", (*reason).to_owned())];
                #[allow(clippy::cast_precision_loss, reason = "a gauge is an f64; run counts stay far below 2^53")]
                gauge!(RUNS_ATTENTION, &labels).set(n as f64);
            }
        });
    }

    /// Sets the queue-age gauges from the store's heads at `now` (ms).
    pub fn queue_heads(&self, heads: QueueHeads, now: i64) {
        #[allow(clippy::cast_precision_loss, reason = "ages in ms stay far below 2^53")]
        let age = |due: Option<i64>| due.map_or(0.0, |due| now.saturating_sub(due).max(0) as f64 / 1000.0);
        self.with(|| {
            gauge!(OLDEST_DUE_WORK).set(age(heads.oldest_due_work));
            gauge!(OLDEST_DUE_TIMER).set(age(heads.oldest_due_timer));
        });
    }

    /// Counts a lookup of a compiled workflow.
    pub(crate) fn definition_lookup(&self, lookup: crate::engine::workflow_cache::Lookup) {
        let result = match lookup {
            crate::engine::workflow_cache::Lookup::Hit => "hit",
            crate::engine::workflow_cache::Lookup::Load => "load",
        };
        self.with(|| counter!(DEFINITION_CACHE, "result" => result).increment(1));
    }

    /// Sets each connection's gauges: `(name, paused, breaker)` (`closed`, `open`, `half-open`).
    pub fn connections(&self, connections: &[(String, bool, &str)]) {
        self.with(|| {
            for (name, paused, breaker) in connections {
                gauge!(CONNECTION_PAUSED, "connection" => name.clone()).set(if *paused { 1.0 } else { 0.0 });
                let state = match *breaker {
                    "open" => 1.0,
                    "half-open" => 2.0,
                    _ => 0.0,
                };
                gauge!(CONNECTION_STATE, "connection" => name.clone()).set(state);
            }
        });
    }

    /// Sets the fence's gauge.
    pub fn fenced(&self, fenced: bool) {
        self.with(|| gauge!(FENCED).set(if fenced { 1.0 } else { 0.0 }));
    }

    /// Sets the draining gauge.
    pub fn draining(&self, draining: bool) {
        self.with(|| gauge!(DRAINING).set(if draining { 1.0 } else { 0.0 }));
    }

    /// Sets the gauge of runs by state (read from the store at scrape time).
    pub fn runs_by_state(&self, counts: &[(RunState, i64)]) {
        self.with(|| {
            for (state, n) in counts {
                #[allow(clippy::cast_precision_loss, reason = "a gauge is an f64; run counts stay far below 2^53")]
                gauge!(RUNS, "state" => state.as_str()).set(*n as f64);
            }
        });
    }

    /// The Prometheus text exposition of everything recorded so far.
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        self.handle.render()
    }
}

/// The label of an event's kind (its serde tag).
pub fn event_kind(event: &Event) -> &'static str {
    match event {
        Event::Admitted => "admitted",
        Event::CallAnswered { .. } => "call-answered",
        Event::ReceiptAnswered { .. } => "receipt-answered",
        Event::CompletionObserved { .. } => "completion-observed",
        Event::TimerDue { .. } => "timer-due",
        Event::CompletionNotified { .. } => "completion-notified",
        Event::CancelRequested => "cancel-requested",
        Event::RetrySameRequested { .. } => "retry-same-requested",
        Event::ReconcileRequested { .. } => "reconcile-requested",
        Event::RestoreHoldPlaced => "restore-hold-placed",
        Event::RestoreHoldReleased => "restore-hold-released",
    }
}

/// The label of a call answer's classification (docs/reference/runs.md#calls-and-prepared-commands).
pub fn classification(answer: &CallAnswer) -> &'static str {
    match answer {
        CallAnswer::Accepted { .. } => "accepted",
        CallAnswer::Refused { .. } => "refused",
        CallAnswer::Retryable { .. } => "retryable",
        CallAnswer::Uncertain => "uncertain",
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::event::Timer;

    use super::*;

    #[test]
    fn event_kinds_are_the_serde_tags() {
        let events = [
            Event::Admitted,
            Event::CallAnswered { step: "s".into(), attempt: 1, answer: CallAnswer::Uncertain },
            Event::TimerDue { timer: Timer::RunDeadline },
            Event::CancelRequested,
            Event::RetrySameRequested { step: "s".into() },
            Event::ReconcileRequested { step: "s".into() },
            Event::RestoreHoldPlaced,
        ];
        for event in events {
            let tag = serde_json::to_value(&event).ok().and_then(|v| v["type"].as_str().map(str::to_owned));
            assert_eq!(tag.as_deref(), Some(event_kind(&event)));
        }
    }

    #[test]
    fn engines_keep_their_own_numbers() {
        let (one, two) = (Metrics::new(), Metrics::new());
        one.admission(true);
        one.admission(true);
        two.admission(false);
        let answered = Event::CallAnswered { step: "s".into(), attempt: 1, answer: CallAnswer::Uncertain };
        let committed = Committed { dispatches: 2, ended: Some(RunState::Finished) };
        one.decision(&answered, Decided::Applied, Some(committed), Duration::from_millis(3));
        let (a, b) = (one.render(), two.render());
        assert!(a.contains("coordinator_admissions_total{result=\"created\"} 2"), "{a}");
        assert!(!a.contains("result=\"existing\""), "{a}");
        assert!(b.contains("coordinator_admissions_total{result=\"existing\"} 1"), "{b}");
        assert!(a.contains("coordinator_call_answers_total{classification=\"uncertain\"} 1"), "{a}");
        assert!(a.contains("coordinator_dispatches_total 2"), "{a}");
        assert!(a.contains("coordinator_runs_ended_total{state=\"finished\"} 1"), "{a}");
        assert!(a.contains("coordinator_decision_seconds_bucket{event=\"call-answered\",le=\"0.005\"} 1"), "{a}");
        assert!(!b.contains("coordinator_dispatches_total 2"), "{b}");
    }
}
