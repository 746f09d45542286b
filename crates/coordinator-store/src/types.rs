//! The values that cross the store's interface: what a caller hands in (a new
//! run, a decision) and what it gets back (rows, claims, pages).
//!
//! Plain data only; no SQL and no decisions live here. A leaf: it imports no
//! other module of the crate (every layer, `db` included, may use it), so a
//! value another module needs in its signature lives here, not there — the
//! claims' [`WorkScope`], eager dispatch's [`EagerLease`], monitoring's
//! [`AttentionReason`].

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::Timer;
use coordinator_core::model::run::RunState;

/// A package as stored: the sealed bytes of one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The revision id (content-derived, unique).
    pub revision: String,
    /// The workflow it is a revision of.
    pub workflow: String,
    /// The digest of `bytes`.
    pub digest: String,
    /// The package bytes.
    pub bytes: Vec<u8>,
}

/// A run about to be admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// The run id (UUIDv7 text).
    pub id: String,
    /// The workflow.
    pub workflow: String,
    /// The revision it is pinned to.
    pub revision: String,
    /// The admitting subject.
    pub owner: String,
    /// The caller's idempotency key, scoped to owner and workflow.
    pub idempotency_key: Option<String>,
    /// The digest of the validated input (compared on a repeated key).
    pub input_digest: String,
    /// When it is admitted, in ms since the epoch.
    pub admitted_at: i64,
    /// The W3C `traceparent` the admitting caller sent (validated by the
    /// service; the store keeps it opaque), if any.
    pub trace_parent: Option<String>,
    /// Its search keys (name, value), computed from the input by the
    /// workflow's declared functions; stored in clear and indexed.
    pub search_keys: Vec<(String, String)>,
}

/// The product event a trigger admits a run from, as deduplicated: the
/// trigger's name and the event's id (its `eventId`), per workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerEvent {
    /// The trigger.
    pub trigger: String,
    /// The event's id.
    pub event_id: String,
}

/// What a decision changes: the actions to persist and the run after them.
///
/// The snapshot is opaque to the store (the service seals the JSON of
/// `machine::run::Run`); `state`, `held`, `outcome` and `attention_step` are
/// copied into columns for listing and claiming, so they must agree with the
/// snapshot. The column `attention_since` (when the run entered attention) is
/// the store's own: it compares the new state with the stored one.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The actions, in the order the machine emitted them.
    pub actions: Vec<Action>,
    /// The run's new snapshot.
    pub snapshot: Vec<u8>,
    /// The run's state after the actions.
    pub state: RunState,
    /// Whether a restore hold is placed after the actions.
    pub held: bool,
    /// The outcome of the finish the run reached, once it ended there (`Run::outcome`).
    pub outcome: Option<String>,
    /// The call step whose effect is unknown while the run is in attention for
    /// it (`Attention::UnknownEffect`); `None` otherwise, also under a restore hold.
    pub attention_step: Option<String>,
    /// (step, lane) for the steps whose outbox rows this decision queues
    /// belong to a remote connection: a row queued for a listed step (any
    /// kind) is written in that lane (the connection's name) and is offered
    /// to remote workers only (`Store::offer`); every other row is served
    /// in-process (no lane).
    pub lanes: Vec<(String, String)>,
    /// (step, connection) for the steps whose outbox rows this decision
    /// queues: a row queued for a listed step names its connection, which
    /// an operator's pause holds back ([`Store::pause_connection`](crate::Store::pause_connection)).
    pub connections: Vec<(String, String)>,
}

/// The run an idempotency key admitted, as an admission's first read finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedRun {
    /// The run.
    pub id: String,
    /// Its revision.
    pub revision: String,
    /// The digest of its input.
    pub input_digest: String,
}

impl KeyedRun {
    /// What admitting `new` with the same key gives: this run when the
    /// revision and input are the same ([`Admission::Existing`]), else
    /// [`StoreError::KeyReused`](crate::StoreError::KeyReused).
    pub fn admission_for(&self, new: &NewRun) -> Result<Admission, crate::StoreError> {
        if self.revision == new.revision && self.input_digest == new.input_digest {
            Ok(Admission::Existing(self.id.clone()))
        } else {
            Err(crate::StoreError::KeyReused { run_id: self.id.clone() })
        }
    }
}

/// Which work a claimer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkScope {
    /// Everything due: attempts, receipt lookups, observations, timers.
    All,
    /// Receipt lookups only (`coordinator serve --recovery-only`: they only read).
    ReceiptsOnly,
}

/// A lease a batch gives the work it queues to its committing worker (eager
/// dispatch, `commit_leases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EagerLease {
    /// Which work the worker takes (receipts only in recovery-only mode).
    pub scope: WorkScope,
    /// When the lease ends (ms), as a claim's `now + lease_ms`.
    pub until: i64,
    /// The most rows the batch leases (the worker's room for more work).
    pub rows: usize,
}

/// One admission of [`crate::Store::admit_guarded_batch`]: the new run, its
/// first decision, and the lease its at-once rows may be taken under (eager
/// dispatch; none: nothing is leased).
#[derive(Debug)]
pub struct GuardedAdmission {
    /// The run to create.
    pub new: NewRun,
    /// Its first decision.
    pub decision: Decision,
    /// What of it may be leased at once.
    pub lease: Option<EagerLease>,
}

/// What became of [`crate::Store::admit_guarded`].
#[derive(Debug)]
pub enum Guarded {
    /// The run was created with its first transition.
    Created,
    /// Nothing was written (see `admit_guarded`): the decision, to admit with
    /// once the gate is read.
    Closed(Decision),
}

/// What an admission checks first, in one read ([`crate::Store::admission_gate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionGate {
    /// The workflow's active revision, if any.
    pub active: Option<String>,
    /// Whether a restore hold is placed.
    pub held: bool,
    /// The run the caller's idempotency key admitted before, if any.
    pub keyed: Option<KeyedRun>,
}

/// What became of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The run was created with its first transition.
    Created(String),
    /// The same key, revision and input were admitted before: that run.
    Existing(String),
}

impl Admission {
    /// The run id, whichever it is.
    pub fn run_id(&self) -> &str {
        match self {
            Admission::Created(id) | Admission::Existing(id) => id,
        }
    }
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// The run id.
    pub id: String,
    /// The workflow.
    pub workflow: String,
    /// The pinned revision.
    pub revision: String,
    /// The admitting subject.
    pub owner: String,
    /// The idempotency key it was admitted with.
    pub idempotency_key: Option<String>,
    /// The digest of its input.
    pub input_digest: String,
    /// Its state (denormalised from the snapshot).
    pub state: RunState,
    /// Whether a restore hold is placed (denormalised from the snapshot).
    pub held: bool,
    /// Admission time, ms.
    pub admitted_at: i64,
    /// Last change, ms.
    pub updated_at: i64,
    /// Bumped by every applied decision (1 after admission).
    pub version: i64,
    /// The opaque snapshot.
    pub snapshot: Vec<u8>,
    /// The `traceparent` it was admitted with (NULL for runs admitted before migration 0010).
    pub trace_parent: Option<String>,
    /// The finish outcome of an ended run (denormalised; NULL for runs last
    /// changed before migration 0011).
    pub outcome: Option<String>,
    /// The step of the unknown effect the run is in attention for (denormalised;
    /// `None` when not in attention, under a restore hold, or for a run that
    /// entered attention before migration 0011).
    pub attention_step: Option<String>,
    /// When the run last entered state attention, ms; `None` when it is not in
    /// attention (kept by the store from the state it writes).
    pub attention_since: Option<i64>,
}

/// What every event on a run needs to know of it besides its snapshot
/// (`Store::run_meta`): both are fixed at admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    /// The revision the run is pinned to.
    pub revision: String,
    /// The `traceparent` it was admitted with, if any.
    pub trace_parent: Option<String>,
}

/// Which runs `Store::list_runs` lists (oldest first); `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only this state.
    pub state: Option<RunState>,
    /// Only runs of this owner.
    pub owner: Option<String>,
    /// Only runs with each of these search keys (name, value), exactly.
    pub keys: Vec<(String, String)>,
    /// Only runs admitted with this idempotency key (by any caller).
    pub idempotency_key: Option<String>,
}

/// Which runs the console lists (`Store::list_runs_newest`,
/// `Store::attention_runs`): every filter given must match, `None` matches
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only this state.
    pub state: Option<RunState>,
    /// Only runs of this owner (a caller who may read only its own runs).
    pub owner: Option<String>,
    /// Only runs pinned to this revision.
    pub revision: Option<String>,
    /// Only runs in attention for this reason (implies state attention; the
    /// `held` column decides the reason, as in `Store::attention_by_reason`).
    pub attention: Option<AttentionReason>,
    /// Only runs in attention for an unknown effect of this step (implies
    /// state attention).
    pub step: Option<String>,
    /// Only runs admitted at or after this instant, ms.
    pub admitted_from: Option<i64>,
    /// Only runs admitted before this instant, ms.
    pub admitted_to: Option<i64>,
    /// Only the run with this id.
    pub run_id: Option<String>,
    /// Only runs with each of these search keys (name, value), exactly.
    pub keys: Vec<(String, String)>,
    /// Only runs admitted with this idempotency key (by any caller).
    pub idempotency_key: Option<String>,
    /// Only these runs (canonical ids); an empty list matches none.
    pub run_ids: Option<Vec<String>>,
}

/// Why runs wait for an operator, as monitoring counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttentionReason {
    /// A call's effect is unknown (the run is in attention and not held).
    UnknownEffect,
    /// A restore hold is placed on the run (it is in attention and held).
    RestoreHold,
}

impl AttentionReason {
    /// The spelling in metrics labels: `unknown-effect`, `restore-hold`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionReason::UnknownEffect => "unknown-effect",
            AttentionReason::RestoreHold => "restore-hold",
        }
    }

    /// The reason of a run in attention, from its `held` column: the machine
    /// places a hold only with attention `RestoreHold` (`Run::apply`), and the
    /// only other reason is an unknown effect.
    pub(crate) fn of_held(held: bool) -> AttentionReason {
        if held { AttentionReason::RestoreHold } else { AttentionReason::UnknownEffect }
    }
}

/// Where a page of runs continues: after this (admitted_at, id) in the
/// page's order (later for `Store::list_runs`, earlier for
/// `Store::list_runs_newest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Admission time of the last run of the previous page.
    pub admitted_at: i64,
    /// Its id (breaks ties between runs admitted in the same millisecond).
    pub id: String,
}

/// One page of runs, in the order of the listing that returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The runs.
    pub runs: Vec<RunRow>,
    /// The cursor of the next page: from `Store::list_runs` when this one was
    /// full, from `Store::list_runs_newest` only when another run follows.
    pub next: Option<Cursor>,
}

/// Runs in attention for one reason, of one workflow, at one step
/// (`Store::attention_groups`): a row of the operator's inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionGroup {
    /// Why they wait.
    pub reason: AttentionReason,
    /// Their workflow.
    pub workflow: String,
    /// The step of their unknown effect (`None` under a restore hold, and for
    /// runs that entered attention before migration 0011).
    pub step: Option<String>,
    /// How many runs.
    pub runs: i64,
    /// When the group's longest-waiting run entered attention, ms.
    pub oldest_since: i64,
}

/// Where a page of `Store::attention_runs` continues: after this
/// (attention_since, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionCursor {
    /// When the last run of the previous page entered attention, ms.
    pub since: i64,
    /// Its id (breaks ties between runs that entered attention in the same millisecond).
    pub id: String,
}

/// What an outbox row asks a worker to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkKind {
    /// Send an attempt of a call.
    Attempt,
    /// Look up a call's receipt.
    Receipt,
    /// Observe a wait-for's completion.
    Observation,
}

impl WorkKind {
    /// The spelling in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::Attempt => "attempt",
            WorkKind::Receipt => "receipt",
            WorkKind::Observation => "observation",
        }
    }

    /// Reads the `kind` column.
    pub fn parse(text: &str) -> Option<WorkKind> {
        [WorkKind::Attempt, WorkKind::Receipt, WorkKind::Observation].into_iter().find(|k| k.as_str() == text)
    }
}

/// An outbox row claimed by a worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkItem {
    /// The run.
    pub run_id: String,
    /// The step.
    pub step: String,
    /// What to do.
    pub kind: WorkKind,
    /// The fencing token: the attempt number (the sequence number of an observation; 0 for a receipt).
    pub attempt: i64,
    /// The row had been claimed before and that claim neither finished nor was
    /// released (its lease ran out): an earlier worker may have done the work.
    pub reclaimed: bool,
    /// How many times the row had been claimed, this claim included (the
    /// fence compares it with the database's count: `Store::attempt_known`).
    pub claims: i64,
}

/// The run of a claimed outbox row, as the claim read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRun {
    /// The revision the run is pinned to.
    pub revision: String,
    /// The run's sealed snapshot.
    pub snapshot: Vec<u8>,
    /// The `traceparent` the run was admitted with, if any.
    pub trace_parent: Option<String>,
    /// When the claimed row became due (its `not_before`, ms): the claim's
    /// delay after it is the dispatch delay.
    pub due_at: i64,
}

/// How many rows of each kind one `Store::claim_due` takes at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimits {
    /// Due timers.
    pub timers: u32,
    /// Due outbox rows.
    pub work: u32,
}

impl ClaimLimits {
    /// Claims nothing: only when work is next due.
    pub const NONE: ClaimLimits = ClaimLimits { timers: 0, work: 0 };
}

/// What one `Store::claim_due` took, and when work is due after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Due {
    /// Due timers claimed, in firing order (due time, then the precedence of docs/reference/runs.md#waits).
    pub timers: Vec<TimerItem>,
    /// Due outbox rows claimed, with their runs, in claim order.
    pub work: Vec<(WorkItem, ClaimedRun)>,
    /// The earliest instant a further claim could return something: the first
    /// row left unclaimed, or the first lease to run out (those just taken
    /// included). It may be in the past (more is due than the limits took, or
    /// another claimer holds due rows). `None`: nothing is queued.
    pub next: Option<i64>,
}

/// A timer row claimed by a worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimerItem {
    /// The run.
    pub run_id: String,
    /// Which timer.
    pub timer: Timer,
    /// When it is due, ms.
    pub due_at: i64,
    /// The revision the run is pinned to (read with the claim, so firing
    /// needs no lookup of its own; the fence does not depend on it).
    pub revision: String,
    /// The `traceparent` the run was admitted with, if any (read with the
    /// claim like `revision`; the fence does not depend on it).
    pub trace_parent: Option<String>,
}

/// A claim whose lease must still be held for a decision to be applied
/// ([`crate::Store::apply_fenced`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// An outbox row.
    Work(WorkItem),
    /// A timer row.
    Timer(TimerItem),
}

/// The outbox and timer rows of one run, for inspection and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunWork {
    /// Outbox rows: (step, kind, attempt, not_before), ordered by step and kind.
    pub outbox: Vec<(String, WorkKind, i64, i64)>,
    /// Timers and when they are due, ordered by timer.
    pub timers: Vec<(Timer, i64)>,
    /// Audit rows: (kind, step, detail), in journal order.
    pub audit: Vec<(String, Option<String>, String)>,
}
