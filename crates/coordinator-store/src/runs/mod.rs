//! Runs: activating a stored package's revision, applying a decision under
//! the run lock, and reading one run (admitting one is `admit`'s, pages of
//! runs are `listing`'s).
//!
//! Every change to a run goes through one transaction: lock the run row, call
//! the caller's decide closure on the snapshot, persist the actions
//! (`persist`), update the run row where its version is still the one decided
//! on, write the decision's audit entries ([`audit::append`](crate::audit::append); the sealer chains
//! them after commit), commit. Many runs' fenced reports in one transaction
//! are `batch`'s. The run row's listing columns are written with it: the
//! decision's `outcome` and `attention_step`, and `attention_since`, which the
//! statement itself keeps (`attention_since_sql!`). This module must not interpret
//! snapshots or actions; it only moves them.

mod admit;

use crate::audit::{self, Line};
use crate::db::{Arg, Dialect, Tx, Writer};
use crate::listing::{run_columns, run_row};
use crate::packages::fetch_package;
use crate::persist::persist;
use crate::types::{Claim, Decision, RunMeta, RunRow};
use crate::{Store, StoreError, claims, snapshot_frame};

const ACTIVATE: &str = "INSERT INTO active_revisions (workflow, revision) VALUES ($1, $2) \
     ON CONFLICT (workflow) DO UPDATE SET revision = excluded.revision";
const ACTIVE: &str = "SELECT revision FROM active_revisions WHERE workflow = $1";
/// The audit kind of a package activation (a deployment-level entry).
const ACTIVATION: &str = "activation";

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
        let applied = apply_locked(&mut tx, run_id, at, expected, fence, actor, decide).await;
        tx.settle(applied).await
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
    let journal = persist(tx, run_id, at, &decision.actions, &decision.lanes, &decision.connections).await?;
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

#[cfg(test)]
mod tests {
    use coordinator_core::model::run::RunState;

    use super::*;

    #[test]
    fn the_attention_literal_of_the_run_writes_is_the_attention_state() {
        let attention = format!("= '{}'", RunState::Attention.as_str());
        for sql in [admit::INSERT_RUN, UPDATE_RUN, crate::admissions_pg::ADMIT_PG] {
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
