//! Admitting a run with its first transition (docs/reference/runs.md#admission), in one transaction:
//! the gate read ([`Store::admission_gate`]), one admission, many decided
//! ones at once (PostgreSQL: one statement, `admissions_pg`; SQLite: `admissions_sqlite`),
//! and an admission from a product event. The idempotency key's rule is
//! here: the same owner, workflow and key give the run admitted before, or
//! `KeyReused`; keys live in `admission_keys`, taken before the run row.

use crate::admissions_pg::{self, AtOnce};
use crate::audit;
use crate::batch::Governing;
use crate::db::{Arg, Pool, Tx, Writer};
use crate::persist::persist;
use crate::types::{
    Admission, AdmissionGate, ClaimedRun, Decision, EagerLease, Guarded, GuardedAdmission, KeyedRun, NewRun,
    TriggerEvent, WorkItem,
};
use crate::{Store, StoreError, events, snapshot_frame};

/// How often an admission re-reads after losing an insert race before giving up.
const ADMISSION_ROUNDS: usize = 3;
/// `$1` workflow, `$2` owner, `$3` idempotency key (NULL: none, so no run matches).
const GATE: &str = "SELECT (SELECT revision FROM active_revisions WHERE workflow = $1), \
     EXISTS (SELECT 1 FROM restore_hold WHERE singleton = 1), k.id, k.revision, k.input_digest \
     FROM (SELECT 1) AS one \
     LEFT JOIN admission_keys ak ON ak.owner = $2 AND ak.workflow = $1 AND ak.idempotency_key = $3 \
     LEFT JOIN runs k ON k.id = ak.run_id";

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
/// one statement with their first decisions, are `admissions_pg`'s.
/// `'attention'` is `RunState::Attention.as_str()` (a test below keeps them equal).
pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, \
     held, admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, \
     snapshot_base) \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9, 1, $10, $11, $12, $13, CASE WHEN $7 = 'attention' THEN $9 END, $14 \
     RETURNING id";

impl Store {
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

    /// Admits a run with its first transition, in one transaction (docs/reference/runs.md#admission).
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
    /// first decision queues for at once (eager dispatch, `commit_leases`; at most
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

    /// How many statements of new runs (`Store::admit_guarded_batch`) a
    /// caller should have in flight at once on this backend: on PostgreSQL
    /// two, so an admission that comes while one commits is sent at once
    /// (the server commits both together) instead of waiting for it; on
    /// SQLite one, as its only write lock would make a second wait anyway.
    pub fn statements_in_flight(&self) -> usize {
        match self.pool {
            Pool::Pg(..) => 2,
            Pool::Sqlite(..) => 1,
        }
    }

    /// [`Store::admit_guarded_leasing`] for many admissions at once, each
    /// decided already: on PostgreSQL one statement (one round trip, one
    /// commit) for all of them (`admissions_pg`), on SQLite one transaction with a
    /// statement per table (`admissions_sqlite`; nothing is leased there, as its
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
            let runs: Vec<admissions_pg::Admitting<'_>> = admissions
                .iter()
                .map(|a| admissions_pg::Admitting { new: &a.new, decision: &a.decision, lease: None })
                .collect();
            let mut tx = self.pool.begin().await?;
            let created = crate::admissions_sqlite::admit(&mut tx, &runs).await?;
            tx.commit().await?;
            return Ok(created.into_iter().map(|c| c.then(Vec::new)).collect());
        }
        // A limited connection's rows are leased at once under its allowance's lock: in a transaction.
        let limited = self.governed_lanes();
        let governed = admissions.iter().any(|a| {
            a.lease.is_some()
                && a.decision.connections.iter().any(|(_, conn)| {
                    limited.contains(conn) && self.connections.allowance_usable(conn, a.new.admitted_at)
                })
        });
        // Without an allowance to spend, the one statement leases none of their rows.
        let limited = if governed { limited } else { Vec::new() };
        let mut conn =
            if governed { self.pool.begin_for(Writer::Request).await? } else { self.pool.begin_read().await? };
        // Read once the connection is taken, as a claim reads it.
        let fenced = crate::fence::refuse(&self.fence).is_err();
        let runs: Vec<admissions_pg::Admitting<'_>> = admissions
            .iter()
            .map(|a| admissions_pg::Admitting {
                new: &a.new,
                decision: &a.decision,
                lease: self.eager(a.lease, a.new.admitted_at).filter(|_| !fenced),
            })
            .collect();
        let governing = Governing { memory: &self.connections, limited };
        let (answers, pending) = admissions_pg::admit(&mut conn, &runs, true, Some(owner), &governing).await?;
        conn.commit().await?;
        // Its grants count as pending until the commit ended.
        drop(pending);
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
                let run = [admissions_pg::Admitting { new, decision, lease: None }];
                let nothing = Governing { memory: &self.connections, limited: Vec::new() };
                match admissions_pg::admit(&mut conn, &run, false, None, &nothing).await?.0.pop() {
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
            crate::search_keys::insert(&mut tx, std::iter::once(new)).await?;
            // Not recorded: a concurrent delivery of the same event committed first
            // (with another key). Dropping the transaction rolls the run back; read it.
            if let Some(event) = event
                && !events::record(&mut tx, &new.workflow, event, &new.id, new.admitted_at).await?
            {
                continue;
            }
            let journal =
                persist(&mut tx, &new.id, new.admitted_at, &decision.actions, &decision.lanes, &decision.connections)
                    .await?;
            // The admitting subject caused every entry of the first transition.
            audit::append(&mut tx, Some(&new.id), new.admitted_at, Some(&new.owner), &journal).await?;
            tx.commit().await?;
            return Ok(Admission::Created(new.id.clone()));
        }
        Err(StoreError::Conflict { what: format!("idempotency key of run {} kept changing hands", new.id) })
    }
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
