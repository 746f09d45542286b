//! The engine: every input to a run becomes an event that goes through the store's one transaction
//! — lock the run, open its sealed snapshot, [`decide`](coordinator_core::machine::decide), apply
//! the actions to the snapshot, seal it again, persist, commit
//! (docs/internals/engine.md#one-event-one-transaction).
//!
//! The snapshot is the JSON of [`machine::run::Run`](coordinator_core::machine::run::Run), sealed
//! under [`Purpose::Snapshot`](coordinator_seal::Purpose::Snapshot) (a base) and
//! [`Purpose::SnapshotDelta`](coordinator_seal::Purpose::SnapshotDelta) (a head, what changed since
//! the base; [`sealed`]), both bound to its run id: it carries the input, every prepared command,
//! product output and completion value, so nothing protected reaches the database in clear.
//! Compiled workflows are cached per revision (immutable; bounded, [`workflow_cache`]). After every
//! commit that may have queued work the worker is woken ([`Engine::wake`]); the worker itself lives
//! in [`worker`](crate::dispatch::worker).
//!
//! After-commit hooks (docs/internals/engine.md#one-event-one-transaction):
//! every decision goes through [`Engine::handle`] (API events) or
//! [`Engine::apply_claimed`] (the worker's fenced reports), which record the
//! engine's [`Metrics`] once the store committed, or once an ignored or refused
//! event wrote nothing. Activating a package ([`Engine::activate`]) and the
//! operator's inspection ([`Engine::inspect`]) live here too.
//!
//! The folder, along a run's path (every `impl Engine` is here):
//! - [`admit`] and [`admission_queue`]: a request becomes a run with its first
//!   transition; plain admissions are grouped into one statement.
//! - [`trigger`]: runs admitted from signed product events.
//! - [`nudge`]: completion notifications nudging a run's wait.
//! - [`commit_hooks`]: what is told after a commit (metrics, log lines, spans,
//!   the worker's wake-up, hints).
//! - [`remote_report`]: a remote worker's report, applied as one fenced decision.
//! - [`snapshot`]: the sealed form of a run and the cache of decoded runs.
//! - [`workflow_cache`], [`run_id`], [`wait_index`], [`error`], [`clock`] (`Engine::now`).
//! - [`recovery`]: inspection, preview, the restore hold and the fence.
//! - [`batches`]: durable batches of operator commands, worked by any process.
//! - [`schedules`]: runs admitted on the calendar, one per nominal instant; pause, resume.
//! - [`package`]: activation and packages sealed at rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use coordinator_core::machine::action::{Action, AuditKind};
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition, advance};
use coordinator_core::model::run::RunState;
use coordinator_functions::Limits;
use coordinator_products::{Connection, ProductClient};
use coordinator_seal::Keyring;
use coordinator_store::{Claim, Decision, RunRow, Store};
use serde_json::Value;
use tokio::sync::Notify;

use crate::engine::commit_hooks::{After, Note, Told};
use crate::engine::error::EngineError;
pub use crate::engine::package::activation::{Activation, ActivationError};
use crate::engine::recovery::inspection::{self, Inspection};
use crate::engine::snapshot::sealed::{self, Base};
use crate::process::drain::Drain;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::traces::Traces;

mod admission_queue;
mod admit;
pub mod batches;
mod clock;
pub(crate) mod commit_hooks;
pub mod connections;
pub mod error;
pub mod nudge;
pub mod package;
pub mod recovery;
mod remote_report;
pub mod run_id;
pub mod schedules;
pub(crate) mod snapshot;
pub mod trigger;
pub(crate) mod wait_index;
pub(crate) mod workflow_cache;
pub use admit::{AdmitRequest, AdmitResult};
pub use clock::now_ms;

/// A run as the API may show it: no input, commands or product responses.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    /// The run id.
    pub run_id: String,
    /// The workflow.
    pub workflow: String,
    /// The pinned revision.
    pub revision: String,
    /// The run's state.
    pub state: RunState,
    /// The outcome of the finish reached, if any.
    pub outcome: Option<String>,
    /// The published output (only of a finished run).
    pub output: Option<Value>,
    /// Why it failed or expired (code, step and a message without values).
    pub failure: Option<coordinator_core::machine::run::Failure>,
}

/// The engine's collaborators and caches. Shared as `Arc<Engine>`.
pub struct Engine {
    pub(crate) store: Store,
    pub(crate) keyring: Keyring,
    pub(crate) products: ProductClient,
    /// Connection name → how to reach the product (in-process connections).
    pub(crate) connections: HashMap<String, Connection>,
    /// Remote connection name → the subjects allowed to serve it ([`crate::dispatch::remote`]).
    pub(crate) remote: crate::dispatch::remote::RemoteConnections,
    /// Connection name → its breaker's settings, where runtime.yaml sets them ([`crate::engine::connections`]).
    pub(crate) breakers: HashMap<String, coordinator_core::pace::BreakerSettings>,
    /// In-process connection name → its limits, where runtime.yaml sets
    /// them: their rows are queued in the connection's lane and claimed under
    /// the limits (`coordinator_store::Store::set_limits`). A remote
    /// connection's limits apply where its lane is offered
    /// (`coordinator_store::Store::set_offer_limits`).
    pub(crate) limits: HashMap<String, coordinator_core::pace::Limits>,
    settings: Settings,
    /// Compiled workflows by revision, bounded ([`crate::engine::workflow_cache`]).
    pub(crate) workflows: crate::engine::workflow_cache::Definitions,
    /// The runs this engine sealed last, opened ([`crate::engine::snapshot::cache`]).
    opened: crate::engine::snapshot::cache::Opened,
    /// Woken after every commit that may have queued work.
    pub(crate) wake: Notify,
    /// Redis dispatch hints: announced after such commits, read to wake the worker ([`crate::dispatch::hints`]).
    pub(crate) hints: crate::dispatch::hints::Hints,
    /// This process's lease owner id.
    pub(crate) owner: String,
    /// Where plain admissions queue to be admitted together ([`crate::engine::admission_queue`]),
    /// started by the first one.
    admissions: std::sync::OnceLock<crate::engine::admission_queue::Admissions>,
    /// This engine's metrics (its own recorder).
    metrics: Metrics,
    /// `serve --recovery-only`: admit nothing, dispatch nothing, fire no timer.
    pub(crate) recovery_only: bool,
    /// runtime.yaml `retention.endedRunsDays`: how long ended runs are kept (`None`: forever).
    pub(crate) retention_days: Option<u32>,
    /// Connection name → its `eventSigningSecret` (set by
    /// [`with_event_secrets`](Engine::with_event_secrets), in [`trigger`]).
    pub(crate) event_secrets: HashMap<String, coordinator_products::Secret>,
    /// The event schemas triggers are validated against (the built-in catalog's; see [`trigger`]).
    pub(crate) event_schemas: std::collections::BTreeMap<String, Value>,
    /// How far [`Engine::now`] is ahead of the system clock, ms (0 unless a test advanced it).
    clock_offset_ms: AtomicI64,
    /// The shortest spacing of a schedule's firings a package may have (runtime.yaml `scheduleFloorSeconds`).
    pub(crate) schedule_floor_seconds: u64,
    /// Whether the service is stopping (nothing admitted or claimed), and its requests in flight.
    pub(crate) drain: Drain,
    /// Where spans go (nowhere unless `telemetry` is configured).
    pub(crate) traces: Traces,
    /// Bumped after every committed decision (the console's live updates).
    changes: tokio::sync::watch::Sender<u64>,
    /// Bumped after a commit that queued work in a remote connection's lane
    /// (it wakes `PollTasks` waiting in this process, [`crate::dispatch::remote`]).
    lane_work: tokio::sync::watch::Sender<u64>,
    /// The restore fence's watch ([`crate::engine::recovery::fence`]).
    pub(crate) fence: crate::engine::recovery::fence::Watch,
    /// Where admissions hand the work they lease to this process's worker,
    /// while it runs (eager dispatch, [`crate::dispatch::handoff`]).
    handoff: std::sync::Mutex<Option<crate::dispatch::handoff::Handoff>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("owner", &self.owner).field("settings", &self.settings).finish()
    }
}

impl Engine {
    /// An engine over a migrated store.
    pub fn new(store: Store, keyring: Keyring, connections: HashMap<String, Connection>, settings: Settings) -> Self {
        Engine {
            store,
            keyring,
            products: ProductClient::new(),
            connections,
            remote: crate::dispatch::remote::RemoteConnections::new(),
            breakers: HashMap::new(),
            limits: HashMap::new(),
            settings,
            workflows: crate::engine::workflow_cache::Definitions::new(crate::engine::workflow_cache::CAPACITY_BYTES),
            opened: crate::engine::snapshot::cache::Opened::new(crate::engine::snapshot::cache::CAPACITY_BYTES),
            wake: Notify::new(),
            hints: crate::dispatch::hints::Hints::default(),
            owner: crate::dispatch::lease_owner::fresh(),
            admissions: std::sync::OnceLock::new(),
            metrics: Metrics::new(),
            recovery_only: false,
            retention_days: None,
            event_secrets: HashMap::new(),
            event_schemas: coordinator_core::check::catalog::Catalog::builtin_event_schemas(),
            clock_offset_ms: AtomicI64::new(0),
            schedule_floor_seconds: coordinator_core::schedule::MIN_SPACING_SECONDS,
            drain: Drain::new(),
            traces: Traces::off(),
            changes: tokio::sync::watch::Sender::new(0),
            lane_work: tokio::sync::watch::Sender::new(0),
            fence: crate::engine::recovery::fence::Watch::default(),
            handoff: std::sync::Mutex::new(None),
        }
    }

    /// Registers (or, with `None`, withdraws) the worker's hand-over for admissions.
    pub(crate) fn set_handoff(&self, handoff: Option<crate::dispatch::handoff::Handoff>) {
        *self.handoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = handoff;
    }

    /// The same engine in recovery-only mode (`coordinator serve
    /// --recovery-only`, docs/reference/recovery.md#recovery-only-mode): it
    /// admits nothing, and its worker only looks up receipts (reads that settle
    /// unknown effects under review).
    #[must_use]
    pub fn with_recovery_only(mut self, recovery_only: bool) -> Self {
        self.recovery_only = recovery_only;
        self
    }

    /// The same engine with remote connections (runtime.yaml `dispatch:
    /// remote`): name → the subjects allowed to serve it. Their queued work
    /// goes to their lanes, for `coordinator worker` processes ([`crate::dispatch::remote`]).
    #[must_use]
    pub fn with_remote(mut self, remote: crate::dispatch::remote::RemoteConnections) -> Self {
        self.remote = remote;
        self
    }

    /// The same engine with these connections' breaker settings (runtime.yaml
    /// `breaker`; the others have the defaults).
    #[must_use]
    pub fn with_breakers(mut self, breakers: HashMap<String, coordinator_core::pace::BreakerSettings>) -> Self {
        self.breakers = breakers;
        self
    }

    /// The same engine claiming these connections' work under their limits
    /// (runtime.yaml `limits`), deployment-wide: in-process ones where they
    /// are claimed, remote ones (of [`Engine::with_remote`], called first)
    /// where they are offered.
    #[must_use]
    pub fn with_limits(mut self, limits: HashMap<String, coordinator_core::pace::Limits>) -> Self {
        let (remote, in_process): (HashMap<_, _>, HashMap<_, _>) =
            limits.into_iter().partition(|(name, _)| self.remote.contains_key(name));
        self.store.set_limits(in_process.iter().map(|(name, l)| (name.clone(), *l)).collect());
        self.store.set_offer_limits(remote.into_iter().collect());
        self.limits = in_process;
        self
    }

    /// The same engine removing runs that ended more than `days` days ago
    /// (runtime.yaml `retention`; the janitor does it, [`crate::process::janitor`]).
    #[must_use]
    pub fn with_retention(mut self, days: Option<u32>) -> Self {
        self.retention_days = days;
        self
    }

    /// The same engine refusing packages with a schedule that fires closer
    /// together than `seconds` (runtime.yaml `scheduleFloorSeconds`).
    #[must_use]
    pub fn with_schedule_floor(mut self, seconds: u64) -> Self {
        self.schedule_floor_seconds = seconds;
        self
    }

    /// The same engine exporting spans to `traces`.
    #[must_use]
    pub fn with_traces(mut self, traces: Traces) -> Self {
        self.traces = traces;
        self
    }

    /// Where this engine's spans go.
    pub fn traces(&self) -> &Traces {
        &self.traces
    }

    /// Whether the service is draining: it admits nothing and claims nothing more.
    pub fn is_draining(&self) -> bool {
        self.drain.is_draining()
    }

    /// Whether this engine runs in recovery-only mode.
    pub fn is_recovery_only(&self) -> bool {
        self.recovery_only
    }

    /// This process's lease owner id (`coordinator-<uuid>`), in the rows it claims.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The key console sessions are signed with (derived from the active
    /// payload key, so every process of the deployment shares it).
    pub(crate) fn console_key(&self) -> [u8; 32] {
        self.keyring.derive("console-session.v1")
    }

    /// Tells whoever watches that a decision committed.
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Watches committed decisions (a counter that moves on each).
    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Says that work was queued in a remote connection's lane (waiting polls look again).
    pub(crate) fn lane_work_queued(&self) {
        self.lane_work.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes whenever [`Engine::lane_work_queued`] is called.
    pub(crate) fn lane_work(&self) -> tokio::sync::watch::Receiver<u64> {
        self.lane_work.subscribe()
    }

    /// The machine's settings.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A stored run opened: its snapshot and its workflow.
    pub(crate) async fn opened(&self, row: &RunRow) -> Result<(Arc<Run>, Arc<Workflow>), EngineError> {
        let run = self.open(&row.id, &row.snapshot)?;
        let wf = self.workflow(&row.revision).await?;
        Ok((run, wf))
    }

    /// This engine's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The compiled workflow of a stored revision (compiled once, then kept
    /// in the bounded cache while its runs use it).
    ///
    /// # Errors
    /// [`EngineError::Corrupt`] when the package is missing or does not compile.
    pub async fn workflow(&self, revision: &str) -> Result<Arc<Workflow>, EngineError> {
        let (wf, lookup) = self.workflows.get_or_load(revision, self.load_workflow(revision)).await?;
        self.metrics.definition_lookup(lookup);
        Ok(wf)
    }

    /// Reads, opens and compiles the package of `revision`.
    async fn load_workflow(&self, revision: &str) -> Result<crate::engine::workflow_cache::Compiled, EngineError> {
        let stored = self
            .store
            .package(revision)
            .await?
            .ok_or_else(|| EngineError::Corrupt(format!("no package for revision {revision}")))?;
        let bytes = crate::engine::package::at_rest::opened(&self.keyring, &stored)?;
        let package = coordinator_core::package::read(&bytes, Some(&stored.digest))
            .map_err(|e| EngineError::Corrupt(format!("package {revision}: {e}")))?;
        let wf = Workflow::compile(package.definition, Limits::default())
            .and_then(|wf| wf.with_event_schemas(&self.event_schemas))
            .map_err(|e| EngineError::Corrupt(format!("package {revision}: {e}")))?;
        Ok(crate::engine::workflow_cache::Compiled::new(wf, bytes.len()))
    }

    /// Applies one event to a run under its lock (no claim fence: API events).
    ///
    /// # Errors
    /// [`EngineError::Ignored`] / [`EngineError::Refused`] when the machine does
    /// not apply the event (nothing is written), or a store/seal failure.
    pub async fn handle(&self, run_id: &str, event: &Event, now: i64) -> Result<(), EngineError> {
        self.handle_by(run_id, event, now, None).await
    }

    /// [`Engine::handle`] on behalf of `actor`, the authenticated subject
    /// whose request the event is (an operator's command, a hold change): the
    /// audit entries of its transition record the actor. The machine's events
    /// do not carry it: who asked is the journal's business, not the decision's.
    ///
    /// # Errors
    /// As [`Engine::handle`].
    pub async fn handle_as(&self, run_id: &str, event: &Event, now: i64, actor: &str) -> Result<(), EngineError> {
        self.handle_by(run_id, event, now, Some(actor)).await
    }

    /// [`Engine::handle_as`] with the operator's stated reason, journaled with
    /// the command (an `operator` entry `reason given: …`; never logged).
    ///
    /// # Errors
    /// As [`Engine::handle`].
    pub async fn handle_as_because(
        &self,
        run_id: &str,
        event: &Event,
        now: i64,
        actor: &str,
        reason: &str,
    ) -> Result<(), EngineError> {
        let run_id = run_id::canonical(run_id);
        let meta = self.store.run_meta(&run_id).await?.ok_or(EngineError::RunNotFound)?;
        let wf = self.workflow(&meta.revision).await?;
        let note = Note { trace_parent: meta.trace_parent, remark: Some(reason.to_owned()), ..Note::default() };
        self.apply_recorded(None, &run_id, event, now, &wf, Some(actor), &note).await
    }

    async fn handle_by(&self, run_id: &str, event: &Event, now: i64, actor: Option<&str>) -> Result<(), EngineError> {
        // The store finds a run by any spelling of its UUID; its decision names it by its own.
        let run_id = run_id::canonical(run_id);
        let meta = self.store.run_meta(&run_id).await?.ok_or(EngineError::RunNotFound)?;
        let wf = self.workflow(&meta.revision).await?;
        let note = Note { trace_parent: meta.trace_parent, ..Note::default() };
        self.apply_recorded(None, &run_id, event, now, &wf, actor, &note).await
    }

    /// Applies a worker's report on a claimed row (a product's answer, a due
    /// timer) under the claim's fence, then runs the after-commit hooks;
    /// `note` says which trace the run is in and why the answer was classified so.
    ///
    /// # Errors
    /// As [`Engine::handle`]; a report whose lease was taken over is a store
    /// error (`LeaseLost`) and writes nothing.
    pub(crate) async fn apply_claimed(
        &self,
        claim: &Claim,
        run_id: &str,
        event: &Event,
        wf: &Workflow,
        note: &Note,
    ) -> Result<(), EngineError> {
        self.apply_recorded(Some(claim), run_id, event, self.now(), wf, None, note).await
    }

    /// One event through the store's transaction (fenced by `claim` when given,
    /// journaled as `actor`'s when given), with the after-commit hooks run once
    /// it committed or was not applied ([`commit_hooks`]).
    #[allow(clippy::too_many_arguments, reason = "the parts of one decision, each used once")]
    pub(crate) async fn apply_recorded(
        &self,
        claim: Option<&Claim>,
        run_id: &str,
        event: &Event,
        now: i64,
        wf: &Workflow,
        actor: Option<&str>,
        note: &Note,
    ) -> Result<(), EngineError> {
        let started = std::time::Instant::now();
        let trace = self.traces.run(run_id, note.trace_parent.as_deref());
        let span = self.decision_span(&trace, event);
        let mut told = None;
        let decide = |snapshot: &[u8]| {
            let (mut decision, admitted_at) = self.decide_on(wf, run_id, snapshot, event, now)?;
            if let Some(remark) = &note.remark {
                decision.actions.push(Action::Audit {
                    kind: AuditKind::Operator,
                    step: crate::engine::commit_hooks::event_step(event).map(str::to_owned),
                    detail: format!("reason given: {remark}"),
                });
            }
            told = Some(Told::of(event, &decision.actions, now, admitted_at));
            Ok::<_, EngineError>(decision)
        };
        let applied = match (claim, actor, &note.batch) {
            (None, None, _) => self.store.apply(run_id, now, decide).await,
            (None, Some(actor), Some(batch)) => self.store.apply_for_batch(batch, run_id, now, actor, decide).await,
            (None, Some(actor), None) => self.store.apply_as(run_id, now, actor, decide).await,
            (Some(claim), _, _) => self.store.apply_fenced(claim, &self.owner, now, decide).await,
        };
        let result = applied.map(|_| ()).map_err(EngineError::from_store);
        let elapsed = started.elapsed();
        self.record(After {
            wf,
            run_id,
            event,
            result: &result,
            told,
            elapsed,
            reason: note.reason.as_deref(),
            trace,
            span,
        });
        result
    }

    /// The decide closure every apply runs under the run lock: the decision and
    /// when the run was admitted (for the run's span once it ends).
    pub(crate) fn decide_on(
        &self,
        wf: &Workflow,
        run_id: &str,
        snapshot: &[u8],
        event: &Event,
        now: i64,
    ) -> Result<(Decision, Instant), EngineError> {
        let (mut run, base) = self.open_owned(run_id, snapshot)?;
        let admitted_at = run.admitted_at;
        // In place: the run is this decision's own (taken from the cache or opened), so no copy.
        let t = advance(wf, &mut run, event, Instant(now), &self.settings);
        Ok((self.conclude(wf, run, base, &t)?, admitted_at))
    }

    /// Seals a run an applied transition moved on (`advance` applied its
    /// actions in place), against `base`, the run's sealed base, while it
    /// serves; any other outcome (which left the run as it was) writes nothing.
    fn conclude(
        &self,
        wf: &Workflow,
        run: Run,
        base: Option<Arc<Base>>,
        t: &Transition,
    ) -> Result<Decision, EngineError> {
        match &t.outcome {
            Outcome::Applied => {}
            Outcome::Ignored { reason } => return Err(EngineError::Ignored(reason.clone())),
            Outcome::Refused { code, .. } => return Err(EngineError::Refused { code: code.clone() }),
        }
        let (snapshot, base) = sealed::seal(&self.keyring, &run, base)?;
        let attention_step = match &run.attention {
            Some(coordinator_core::machine::run::Attention::UnknownEffect { step }) => Some(step.clone()),
            Some(coordinator_core::machine::run::Attention::RestoreHold) | None => None,
        };
        let decision = Decision {
            actions: crate::engine::wait_index::for_store(&self.keyring, &t.actions),
            snapshot,
            state: run.state,
            held: run.held,
            outcome: run.outcome.clone(),
            attention_step,
            lanes: if self.remote.is_empty() && self.limits.is_empty() {
                Vec::new()
            } else {
                let lane_of = |c: &str| {
                    (self.remote.contains_key(c) || self.limits.contains_key(c))
                        .then(|| coordinator_store::workflow_lane(c, &wf.definition.workflow))
                };
                crate::dispatch::remote::lanes(lane_of, wf, &t.actions)
            },
            connections: crate::engine::connections::routes(wf, &t.actions),
        };
        self.opened.sealed(Arc::new(run), decision.snapshot.clone(), Some(base));
        Ok(decision)
    }

    /// Opens a sealed run snapshot.
    /// Shared with the engine's cache of what it sealed last ([`crate::engine::snapshot::cache`]).
    pub(crate) fn open(&self, run_id: &str, sealed: &[u8]) -> Result<Arc<Run>, EngineError> {
        if let Some(run) = self.opened.get(run_id, sealed) {
            return Ok(run);
        }
        let (run, base) = sealed::open(&self.keyring, run_id, sealed)?;
        let run = Arc::new(run);
        self.opened.sealed(Arc::clone(&run), sealed.to_vec(), base);
        Ok(run)
    }

    /// [`Engine::open`], to decide on: taken out of the cache (the decision's seal puts the next one back).
    fn open_owned(&self, run_id: &str, sealed: &[u8]) -> Result<(Run, Option<Arc<Base>>), EngineError> {
        match self.opened.take(run_id, sealed) {
            Some(opened) => Ok(opened),
            None => sealed::open(&self.keyring, run_id, sealed),
        }
    }

    /// A run as the API shows it.
    ///
    /// # Errors
    /// [`EngineError::RunNotFound`], or a store/seal failure.
    pub async fn view(&self, run_id: &str) -> Result<RunView, EngineError> {
        let row = self.store.load(run_id).await?.ok_or(EngineError::RunNotFound)?;
        let run = self.open(&row.id, &row.snapshot)?;
        let finished = run.state == RunState::Finished;
        Ok(RunView {
            run_id: row.id,
            workflow: row.workflow,
            revision: row.revision,
            state: run.state,
            outcome: run.outcome.clone(),
            output: if finished { run.output.clone() } else { None },
            failure: run.failure.clone(),
        })
    }
}

impl Engine {
    /// The operator's inspection of a run
    /// (docs/reference/recovery.md#inspection): every step, effect and wait,
    /// and the recovery actions the rules accept now. Nothing protected.
    ///
    /// # Errors
    /// [`EngineError::RunNotFound`], or a store/seal failure.
    pub async fn inspect(&self, run_id: &str) -> Result<Inspection, EngineError> {
        let row = self.store.load(run_id).await?.ok_or(EngineError::RunNotFound)?;
        let run = self.open(&row.id, &row.snapshot)?;
        let wf = self.workflow(&row.revision).await?;
        let inspected = inspection::inspect(&wf, &run, Instant(self.now()), &self.settings);
        let paused = self
            .store
            .connection_states()
            .await?
            .into_iter()
            .filter_map(|s| s.paused.map(|pause| (s.name, pause)))
            .collect();
        let mut inspected = inspection::with_pauses(inspected, &paused);
        inspected.idempotency_key = row.idempotency_key;
        inspected.search_keys = self.store.run_search_keys(&row.id).await?.into_iter().collect();
        Ok(inspected)
    }

    /// The same engine announcing and reading dispatch hints ([`Hints::start`](crate::dispatch::hints::Hints::start)).
    #[must_use]
    pub(crate) fn with_hints(mut self, hints: crate::dispatch::hints::Hints) -> Self {
        self.hints = hints;
        self
    }
}
