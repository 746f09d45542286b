//! Packages and runs: storing and activating packages, admitting a run with its
//! first transition, applying a decision under the run lock, and reading one
//! run (pages of runs are `listing`'s).
//!
//! Every change to a run goes through one transaction: lock the run row, call
//! the caller's decide closure on the snapshot, persist the actions
//! (`persist`), update the run row where its version is still the one decided
//! on, write the decision's audit entries (`audit::append`; the sealer chains
//! them after commit), commit. Many runs' fenced reports in one transaction
//! are `batch`'s. The run row's listing columns are written with it: the
//! decision's `outcome` and `attention_step`, and `attention_since`, which the
//! statement itself keeps (`attention_since_sql!`). This module must not interpret
//! snapshots or actions; it only moves them.

use crate::at_once::{self, AtOnce};
use crate::audit::{self, Line};
use crate::db::{Arg, Dialect, Pool, Tx, Writer};
use crate::eager::EagerLease;
use crate::listing::{run_columns, run_row};
use crate::packages::fetch_package;
use crate::persist::persist;
use crate::types::{
    Admission, AdmissionGate, Claim, ClaimedRun, Decision, Guarded, GuardedAdmission, KeyedRun, NewRun, RunMeta,
    RunRow, TriggerEvent, WorkItem,
};
use crate::{Store, StoreError, claims, events, snapshot_frame};

/// How often an admission re-reads after losing an insert race before giving up.
const ADMISSION_ROUNDS: usize = 3;

const ACTIVATE: &str = "INSERT INTO active_revisions (workflow, revision) VALUES ($1, $2) \
     ON CONFLICT (workflow) DO UPDATE SET revision = excluded.revision";
const ACTIVE: &str = "SELECT revision FROM active_revisions WHERE workflow = $1";
/// `$1` workflow, `$2` owner, `$3` idempotency key (NULL: none, so no run matches).
const GATE: &str = "SELECT (SELECT revision FROM active_revisions WHERE workflow = $1), \
     EXISTS (SELECT 1 FROM restore_hold WHERE singleton = 1), k.id, k.revision, k.input_digest \
     FROM (SELECT 1) AS one \
     LEFT JOIN admission_keys ak ON ak.owner = $2 AND ak.workflow = $1 AND ak.idempotency_key = $3 \
     LEFT JOIN runs k ON k.id = ak.run_id";
/// The audit kind of a package activation (a deployment-level entry).
const ACTIVATION: &str = "activation";

const FIND_KEY: &str = "SELECT r.id, r.revision, r.input_digest FROM admission_keys k JOIN runs r ON r.id = k.run_id \
     WHERE k.owner = $1 AND k.workflow = $2 AND k.idempotency_key = $3";
/// Takes an idempotency key for a new run (`$1` owner, `$2` workflow, `$3` key,
/// `$4` run id); no row back: the key was taken first. Keys live in their own
/// table (migration 0013): a partitioned `runs` cannot keep them unique.
const INSERT_KEY: &str = "INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING run_id";
/// A new run's row: `run_args` are `$1`–`$13` and the snapshot's base `$14`;
/// a run admitted in attention entered it at admission. The key is not
/// checked here: `admission_keys` holds it (`INSERT_KEY`). Many at once, in
/// one statement with their first decisions, are `at_once`'s.
/// `'attention'` is `RunState::Attention.as_str()` (a test below keeps them equal).
const INSERT_RUN: &str = "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, \
     held, admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, \
     snapshot_base) \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9, 1, $10, $11, $12, $13, CASE WHEN $7 = 'attention' THEN $9 END, $14 \
     RETURNING id";

/// The `SET` of `attention_since` in an update of the run row to the state
/// `$new_state` at `$now`: the stored instant while the run stays in
/// attention, `$now` when it enters attention, NULL out of attention. The
/// right-hand side reads the stored row (`$old` prefixes its columns: `r.` in
/// the batch's `UPDATE … FROM`), so `state` there is the state before. Each
/// update statement passes its own placeholders; this is the one rule.
macro_rules! attention_since_sql {
    ($new_state:literal, $old:literal, $now:literal) => {
        concat!(
            "attention_since = CASE WHEN ",
            $new_state,
            " = 'attention' THEN COALESCE(CASE WHEN ",
            $old,
            "state = 'attention' THEN ",
            $old,
            "attention_since END, ",
            $now,
            ") END"
        )
    };
}
pub(crate) use attention_since_sql;

const LOCK_RUN_SQLITE: &str = "SELECT version, snapshot, snapshot_base FROM runs WHERE id = $1";
const LOCK_RUN_PG: &str = "SELECT version, snapshot, snapshot_base FROM runs WHERE id = $1 FOR UPDATE";
const UPDATE_RUN: &str = concat!(
    "UPDATE runs SET snapshot = $1, state = $2, held = $3, updated_at = $4, version = version + 1, \
     outcome = $7, attention_step = $8, snapshot_base = $9, ",
    attention_since_sql!("$2", "", "$4"),
    " WHERE id = $5 AND version = $6"
);
const LOAD_RUN: &str = concat!("SELECT ", run_columns!(), " FROM runs WHERE id = $1");
const RUN_META: &str = "SELECT revision, trace_parent FROM runs WHERE id = $1";

impl Store {
    /// Makes a stored revision the one new admissions of its workflow get.
    /// A change is journaled (kind `activation`, no run) at `at`, caused by
    /// `actor` (`None`: the coordinator itself, e.g. `serve` pinning its package).
    pub async fn activate(
        &self,
        workflow: &str,
        revision: &str,
        at: i64,
        actor: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let refused = match fetch_package(&mut tx, revision).await? {
            None => Some(StoreError::NotFound { what: format!("package {revision}") }),
            Some(p) if p.workflow != workflow => {
                Some(StoreError::Conflict { what: format!("revision {revision} is of workflow {}", p.workflow) })
            }
            Some(_) => None,
        };
        if let Some(refused) = refused {
            tx.abandon().await?;
            return Err(refused);
        }
        let before: Option<String> =
            tx.fetch_optional(ACTIVE, vec![workflow.into()]).await?.map(|r| r.get(0)).transpose()?;
        if before.as_deref() != Some(revision) {
            tx.execute(ACTIVATE, vec![workflow.into(), revision.into()]).await?;
            let detail = match before {
                Some(old) => format!("workflow {workflow}: revision {revision} activated (was {old})"),
                None => format!("workflow {workflow}: revision {revision} activated"),
            };
            let line = Line { kind: ACTIVATION, step: None, detail: detail.into() };
            audit::append(&mut tx, None, at, actor, &[line]).await?;
        }
        tx.commit().await
    }

    /// The active revision of a workflow.
    pub async fn active(&self, workflow: &str) -> Result<Option<String>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        tx.fetch_optional(ACTIVE, vec![workflow.into()]).await?.map(|r| r.get(0)).transpose()
    }

    /// What an admission of `workflow` by `owner` checks first, in one read:
    /// the active revision (if any), whether a restore hold is placed, and the
    /// run `key` admitted before (if any). A caller that found no such run may
    /// admit with [`Store::admit_checked`], which does not read the key again.
    pub async fn admission_gate(
        &self,
        workflow: &str,
        owner: &str,
        key: Option<&str>,
    ) -> Result<AdmissionGate, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let row = tx
            .fetch_optional(GATE, vec![workflow.into(), owner.into(), key.into()])
            .await?
            .ok_or_else(|| StoreError::Corrupt("the admission gate read no row".into()))?;
        let id: Option<String> = row.get(2)?;
        let keyed = match id {
            Some(id) => Some(KeyedRun { id, revision: row.get(3)?, input_digest: row.get(4)? }),
            None => None,
        };
        Ok(AdmissionGate { active: row.get(0)?, held: row.get(1)?, keyed })
    }

    /// Admits a run with its first transition, in one transaction (SPEC §3).
    ///
    /// With an idempotency key already used by the same owner for the same
    /// workflow: the same revision and input digest give that run
    /// ([`Admission::Existing`], nothing written); another revision or input is
    /// [`StoreError::KeyReused`]. Otherwise the run row is inserted with the
    /// snapshot `first` returns and its actions are persisted, so a run never
    /// exists without its first work. `first` is called at most once, and only
    /// when the run is created.
    pub async fn admit<E>(
        &self,
        new: &NewRun,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<Admission, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.admit_in(new, None, false, first).await
    }

    /// [`Store::admit`] for a caller whose [`Store::admission_gate`] found
    /// the key unused a moment ago: on PostgreSQL the key is not read again
    /// before the insert (one round trip fewer); a key taken since is still
    /// found (the insert does nothing and the key is read then), so the
    /// outcome is the same as [`Store::admit`]'s.
    pub async fn admit_checked<E>(
        &self,
        new: &NewRun,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<Admission, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.admit_in(new, None, true, first).await
    }

    /// An admission that checks its own gate, for a caller that has not read
    /// it ([`Store::admission_gate`]): the run is inserted with `first`'s
    /// decision only if no restore hold is placed, `new.revision` is the
    /// workflow's active revision and the idempotency key is unused — the gate
    /// read and the insert in one statement on PostgreSQL (one round trip),
    /// in one transaction on SQLite. Unlike
    /// [`Store::admit`], `first` is called before anything is read (a request
    /// repeating a used key is decided, and the decision dropped).
    /// [`Guarded::Closed`] when nothing was written — the gate was closed,
    /// the key taken, or the decision cannot be written this way
    /// (a first decision whose writes must keep their order): the
    /// caller reads the gate and goes on with [`Store::admit_checked`] and the
    /// decision handed back.
    pub async fn admit_guarded<E>(
        &self,
        new: &NewRun,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<Guarded, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Ok(self.admit_guarded_leasing(new, None, first).await?.0)
    }

    /// [`Store::admit_guarded`] that also leases to `lease`'s owner what the
    /// first decision queues for at once (eager dispatch, `eager`; at most
    /// the lease's rows, nothing while the restore fence holds): returned
    /// with the run as committed, in claim order, when the run was created.
    pub async fn admit_guarded_leasing<E>(
        &self,
        new: &NewRun,
        lease: Option<(&str, EagerLease)>,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<(Guarded, Vec<(WorkItem, ClaimedRun)>), StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let decision = first().map_err(|e| StoreError::Rejected(e.into()))?;
        let (owner, lease) = match lease {
            Some((owner, lease)) => (owner, Some(lease)),
            None => ("", None),
        };
        let [admitting] = [GuardedAdmission { new: new.clone(), decision, lease }];
        let answer = self.admit_guarded_batch(owner, std::slice::from_ref(&admitting)).await?.pop().flatten();
        Ok(match answer {
            Some(leased) => (Guarded::Created, leased),
            None => (Guarded::Closed(admitting.decision), Vec::new()),
        })
    }

    /// [`Store::admit_guarded_leasing`] for many admissions at once, each
    /// decided already: on PostgreSQL one statement (one round trip, one
    /// commit) for all of them (`at_once`), on SQLite one transaction with a
    /// statement per table (`together`; nothing is leased there, as its
    /// batches lease nothing), each run inserted only while its own gate is
    /// open and its key unused; what is leased is leased to `owner`. One
    /// answer per admission, in order: the rows leased at once when its run
    /// was created, `None` when nothing was written for it (see
    /// `admit_guarded`). `Err` when the statement failed as a whole; then
    /// none of them was written, unless the connection broke while it
    /// committed (as for a single admission).
    pub async fn admit_guarded_batch(
        &self,
        owner: &str,
        admissions: &[GuardedAdmission],
    ) -> Result<Vec<Option<Vec<(WorkItem, ClaimedRun)>>>, StoreError> {
        if !matches!(self.pool, Pool::Pg(..)) {
            let runs: Vec<at_once::Admitting<'_>> = admissions
                .iter()
                .map(|a| at_once::Admitting { new: &a.new, decision: &a.decision, lease: None })
                .collect();
            let mut tx = self.pool.begin().await?;
            let created = crate::together::admit(&mut tx, &runs).await?;
            tx.commit().await?;
            return Ok(created.into_iter().map(|c| c.then(Vec::new)).collect());
        }
        let mut conn = self.pool.begin_read().await?;
        // Read once the connection is taken, as a claim reads it.
        let fenced = crate::fence::refuse(&self.fence).is_err();
        let runs: Vec<at_once::Admitting<'_>> = admissions
            .iter()
            .map(|a| at_once::Admitting { new: &a.new, decision: &a.decision, lease: a.lease.filter(|_| !fenced) })
            .collect();
        let answers = at_once::admit(&mut conn, &runs, true, Some(owner)).await?;
        Ok(answers
            .into_iter()
            .map(|answer| match answer {
                AtOnce::Created(leased) => Some(leased),
                AtOnce::KeyTaken | AtOnce::NotThisWay => None,
            })
            .collect())
    }

    /// [`Store::admit`] for a run a trigger admits from a product event: in
    /// the same transaction, the event is looked up and recorded (per workflow
    /// and trigger). An event seen before gives the run it led to
    /// ([`Admission::Existing`], nothing written, whatever the key); otherwise
    /// the key rule applies, and the event is recorded with the run it led to
    /// (the new one, or the one the same key admitted before). A run admitted
    /// from an event never exists without its event row, nor the row without it.
    pub async fn admit_event<E>(
        &self,
        new: &NewRun,
        event: &TriggerEvent,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<Admission, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.admit_in(new, Some(event), false, first).await
    }

    async fn admit_in<E>(
        &self,
        new: &NewRun,
        event: Option<&TriggerEvent>,
        key_checked: bool,
        first: impl FnOnce() -> Result<Decision, E>,
    ) -> Result<Admission, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut first = Some(first);
        let mut key_checked = key_checked;
        let mut decision: Option<Decision> = None;
        if event.is_none() && matches!(self.pool, Pool::Pg(..)) {
            // One statement, its own transaction (`first`): the common case.
            for _ in 0..ADMISSION_ROUNDS {
                let mut conn = self.pool.begin_read().await?;
                // `first` only runs for a run that will be created: a used key is read first
                // (unless the caller just did).
                if !std::mem::take(&mut key_checked)
                    && let Some(existing) = find_key(&mut conn, new).await?
                {
                    return existing;
                }
                let decision = first_decision(&mut decision, &mut first)?;
                let run = [at_once::Admitting { new, decision, lease: None }];
                match at_once::admit(&mut conn, &run, false, None).await?.pop() {
                    Some(AtOnce::Created(_)) => return Ok(Admission::Created(new.id.clone())),
                    Some(AtOnce::KeyTaken) => {
                        if let Some(existing) = find_key(&mut conn, new).await? {
                            return existing;
                        }
                    }
                    Some(AtOnce::NotThisWay) | None => break,
                }
            }
        }
        for _ in 0..ADMISSION_ROUNDS {
            let mut tx = self.pool.begin().await?;
            if let Some(event) = event
                && let Some(run_id) = events::find(&mut tx, &new.workflow, event).await?
            {
                tx.abandon().await?;
                return Ok(Admission::Existing(run_id));
            }
            if let Some(existing) = find_key(&mut tx, new).await? {
                if let (Some(event), Ok(Admission::Existing(run_id))) = (event, &existing) {
                    // Another delivery of the same key: remember this event id too.
                    if !events::record(&mut tx, &new.workflow, event, run_id, new.admitted_at).await? {
                        continue;
                    }
                    tx.commit().await?;
                } else {
                    tx.abandon().await?;
                }
                return existing;
            }
            let decision = first_decision(&mut decision, &mut first)?;
            // No row back: a concurrent admission with the same key committed first. Read it.
            if !take_key(&mut tx, new).await? {
                continue;
            }
            let (mut args, base) = run_args(new, decision)?;
            args.push(base);
            if tx.fetch_optional(INSERT_RUN, args).await?.is_none() {
                return Err(StoreError::Corrupt(format!("run {} was not inserted", new.id)));
            }
            // Not recorded: a concurrent delivery of the same event committed first
            // (with another key). Dropping the transaction rolls the run back; read it.
            if let Some(event) = event
                && !events::record(&mut tx, &new.workflow, event, &new.id, new.admitted_at).await?
            {
                continue;
            }
            let journal = persist(&mut tx, &new.id, new.admitted_at, &decision.actions, &decision.lanes).await?;
            // The admitting subject caused every entry of the first transition.
            audit::append(&mut tx, Some(&new.id), new.admitted_at, Some(&new.owner), &journal).await?;
            tx.commit().await?;
            return Ok(Admission::Created(new.id.clone()));
        }
        Err(StoreError::Conflict { what: format!("idempotency key of run {} kept changing hands", new.id) })
    }

    /// Applies one decision to a run: lock, decide on the stored snapshot,
    /// persist the actions, bump the version, commit. Returns the new version.
    /// If anything fails (the closure, a write, a moved version) nothing is written.
    pub async fn apply<E>(
        &self,
        run_id: &str,
        at: i64,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.apply_in(run_id, at, None, None, None, decide).await
    }

    /// [`Store::apply`] on behalf of `actor`, the authenticated subject whose
    /// request this is (an operator's command, a hold change): its audit
    /// entries record the actor (those of [`Store::apply`] record none).
    pub async fn apply_as<E>(
        &self,
        run_id: &str,
        at: i64,
        actor: &str,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.apply_in(run_id, at, None, None, Some(actor), decide).await
    }

    /// [`Store::apply`] for a caller that read the run at `version` earlier
    /// (an operator's `If-Match`): [`StoreError::Stale`] if it moved since.
    pub async fn apply_expecting<E>(
        &self,
        run_id: &str,
        version: i64,
        at: i64,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.apply_in(run_id, at, Some(version), None, None, decide).await
    }

    /// [`Store::apply`] for a worker reporting on a claim: inside the run's
    /// transaction, the claimed row must still be leased to `owner` (and, for
    /// outbox work, carry the same attempt), or the decision is not applied
    /// ([`StoreError::LeaseLost`]). An expired lease nobody took over still counts.
    pub async fn apply_fenced<E>(
        &self,
        claim: &Claim,
        owner: &str,
        at: i64,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let run_id = match claim {
            Claim::Work(w) => &w.run_id,
            Claim::Timer(t) => &t.run_id,
        };
        self.apply_in(run_id, at, None, Some((claim, owner)), None, decide).await
    }

    async fn apply_in<E>(
        &self,
        run_id: &str,
        at: i64,
        expected: Option<i64>,
        fence: Option<(&Claim, &str)>,
        actor: Option<&str>,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // A fenced report is the worker's; anything else answers a request.
        let writer = if fence.is_some() { Writer::Background } else { Writer::Request };
        let mut tx = self.pool.begin_for(writer).await?;
        match apply_locked(&mut tx, run_id, at, expected, fence, actor, decide).await {
            Ok(version) => {
                tx.commit().await?;
                Ok(version)
            }
            Err(e) => {
                tx.abandon().await?;
                Err(e)
            }
        }
    }

    /// A run's row.
    pub async fn load(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        tx.fetch_optional(LOAD_RUN, vec![Arg::id(run_id)]).await?.map(|r| run_row(&r)).transpose()
    }

    /// The revision a run is pinned to (immutable), without reading its snapshot.
    pub async fn revision_of(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.run_meta(run_id).await?.map(|meta| meta.revision))
    }

    /// What an event on a run needs besides its snapshot, in one read: its
    /// revision and the `traceparent` it was admitted with (both immutable).
    /// `None`: no such run.
    pub async fn run_meta(&self, run_id: &str) -> Result<Option<RunMeta>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        match tx.fetch_optional(RUN_META, vec![Arg::id(run_id)]).await? {
            Some(row) => Ok(Some(RunMeta { revision: row.get(0)?, trace_parent: row.get(1)? })),
            None => Ok(None),
        }
    }
}

/// One decision inside `tx`: lock the run, check the fence, decide, persist,
/// move the version on, write the audit entries. Returns the new version. A
/// missing run, a lost lease or a rejected decision fails before anything is
/// written; any later failure leaves `tx` to be rolled back.
pub(crate) async fn apply_locked<E>(
    tx: &mut Tx,
    run_id: &str,
    at: i64,
    expected: Option<i64>,
    fence: Option<(&Claim, &str)>,
    actor: Option<&str>,
    decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
) -> Result<i64, StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (version, journal) = apply_unjournaled(tx, run_id, at, expected, fence, decide).await?;
    audit::append(tx, Some(run_id), at, actor, &journal).await?;
    Ok(version)
}

/// [`apply_locked`] without writing the audit entries: returns them with the
/// new version, for the caller to write in the same transaction.
async fn apply_unjournaled<E>(
    tx: &mut Tx,
    run_id: &str,
    at: i64,
    expected: Option<i64>,
    fence: Option<(&Claim, &str)>,
    decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
) -> Result<(i64, Vec<Line<'static>>), StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let lock = match tx.dialect() {
        Dialect::Sqlite => LOCK_RUN_SQLITE,
        Dialect::Pg => LOCK_RUN_PG,
    };
    let Some(row) = tx.fetch_optional(lock, vec![Arg::id(run_id)]).await? else {
        return Err(StoreError::NotFound { what: format!("run {run_id}") });
    };
    let (version, snapshot): (i64, Vec<u8>) = (row.get(0)?, snapshot_frame::read(&row, 1, 2)?);
    if let Some((claim, owner)) = fence {
        claims::check_lease(tx, claim, owner).await?;
    }
    let decision = decide(&snapshot).map_err(|e| StoreError::Rejected(e.into()))?;
    let journal = persist(tx, run_id, at, &decision.actions, &decision.lanes).await?;
    let expected = expected.unwrap_or(version);
    let (head, base) = snapshot_frame::columns(&decision.snapshot)?;
    let args: Vec<Arg> = vec![
        Arg::Bytes(head),
        decision.state.as_str().into(),
        decision.held.into(),
        at.into(),
        Arg::id(run_id),
        expected.into(),
        decision.outcome.as_deref().into(),
        decision.attention_step.as_deref().into(),
        base.into(),
    ];
    if tx.execute(UPDATE_RUN, args).await? == 0 {
        // The caller drops the transaction: the actions persisted above are rolled back.
        return Err(StoreError::Stale { run_id: run_id.to_owned(), expected });
    }
    Ok((expected + 1, journal.into_iter().map(Line::into_owned).collect()))
}

/// The first decision of a new run, computed by `first` the first time it is
/// needed and kept for any later round of the same admission.
fn first_decision<'d, E>(
    decision: &'d mut Option<Decision>,
    first: &mut Option<impl FnOnce() -> Result<Decision, E>>,
) -> Result<&'d Decision, StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if let Some(f) = first.take() {
        *decision = Some(f().map_err(|e| StoreError::Rejected(e.into()))?);
    }
    // `first` was taken only by a call that kept its decision (or failed, and the admission with it).
    decision.as_ref().ok_or_else(|| StoreError::Rejected("the first decision failed".into()))
}

/// The new run row's values, `$1`–`$13` of `INSERT_RUN`, and its snapshot's base.
fn run_args(new: &NewRun, decision: &Decision) -> Result<(Vec<Arg>, Arg), StoreError> {
    if uuid::Uuid::try_parse(&new.id).is_err() {
        return Err(StoreError::InvalidRunId(new.id.clone()));
    }
    let (head, base) = snapshot_frame::columns(&decision.snapshot)?;
    let args = vec![
        Arg::id(&new.id),
        new.workflow.as_str().into(),
        new.revision.as_str().into(),
        new.owner.as_str().into(),
        new.idempotency_key.as_deref().into(),
        new.input_digest.as_str().into(),
        decision.state.as_str().into(),
        decision.held.into(),
        new.admitted_at.into(),
        Arg::Bytes(head),
        new.trace_parent.as_deref().into(),
        decision.outcome.as_deref().into(),
        decision.attention_step.as_deref().into(),
    ];
    Ok((args, base.into()))
}

/// Takes `new`'s idempotency key (if it has one) for it; `false`: another
/// admission took it first.
async fn take_key(tx: &mut Tx, new: &NewRun) -> Result<bool, StoreError> {
    let Some(key) = new.idempotency_key.as_deref() else { return Ok(true) };
    let args: Vec<Arg> = vec![new.owner.as_str().into(), new.workflow.as_str().into(), key.into(), Arg::id(&new.id)];
    Ok(tx.fetch_optional(INSERT_KEY, args).await?.is_some())
}

/// Looks up an earlier admission with the same key: its outcome, if there is one.
async fn find_key(tx: &mut Tx, new: &NewRun) -> Result<Option<Result<Admission, StoreError>>, StoreError> {
    let Some(key) = new.idempotency_key.as_deref() else { return Ok(None) };
    let args: Vec<Arg> = vec![new.owner.as_str().into(), new.workflow.as_str().into(), key.into()];
    let Some(row) = tx.fetch_optional(FIND_KEY, args).await? else { return Ok(None) };
    let keyed = KeyedRun { id: row.get(0)?, revision: row.get(1)?, input_digest: row.get(2)? };
    Ok(Some(keyed.admission_for(new)))
}

#[cfg(test)]
mod tests {
    use coordinator_core::model::run::RunState;

    use super::*;

    #[test]
    fn the_attention_literal_of_the_run_writes_is_the_attention_state() {
        let attention = format!("= '{}'", RunState::Attention.as_str());
        for sql in [INSERT_RUN, UPDATE_RUN, at_once::ADMIT_PG] {
            assert!(sql.contains(&attention), "{sql}");
        }
        assert_eq!(
            UPDATE_RUN.split(" WHERE id").next().and_then(|set| set.split(", attention_since = ").nth(1)),
            Some(
                "CASE WHEN $2 = 'attention' THEN COALESCE(CASE WHEN state = 'attention' THEN attention_since END, $4) END"
            )
        );
    }
}
