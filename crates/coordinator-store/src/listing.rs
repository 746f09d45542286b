//! Pages of runs, read from the columns of `runs` (never from a snapshot):
//! the API's oldest-first pages (`Store::list_runs`) and the operator
//! console's newest-first pages with filters (`Store::list_runs_newest`);
//! `inbox` builds the attention inbox on the same filters. Pages are keyset
//! pages — a cursor names the last run shown, never an offset — and nothing
//! here counts the matching runs. It reads, never writes.
//!
//! Each statement is assembled for the filters present ([`db::Query`](crate::db::Query)): which
//! filters are given decides the text, their values are bound. A catch-all
//! statement (`$n IS NULL OR column = $n`) got PostgreSQL's generic plan, a
//! sequential scan of every run (250–660 ms a page at 1 M runs), whatever the
//! filter. Each filter's fragment is written so that the index serving it
//! (`migrations/*/0011_listing.sql`) is the one the planners take:
//! - a state is a literal, never bound, so a partial index's predicate can be
//!   proven from it; every state but `finished` also names
//!   `state <> 'finished'`, the predicate of `runs_state_listing`, since SQLite
//!   uses a partial index only when the query names its predicate;
//! - on PostgreSQL `runs_revision_listing` keys a run by its revision's first
//!   16 characters, `revision_key!` (migration 0019: narrower entries, less
//!   WAL per run); a revision is the closed range of that key, `key >= $n
//!   AND key <= $n`, with the key leading the `ORDER BY`, and the whole
//!   revision as an equality besides. As an equality the key would leave the order to
//!   `(admitted_at, id)`, which the planner then reads from `runs_listing`,
//!   filtering — it cannot know that a revision's runs are clustered in time,
//!   so an old revision's page stepped over every newer run (170–240 ms at
//!   1 M runs) instead of reading `runs_revision_listing` (0.06 ms). SQLite
//!   takes its whole-revision index for the equality, and could not position
//!   a scan of the range at a cursor, so it gets the equality.

use coordinator_core::model::run::RunState;

use crate::db::{Arg, Dialect, Query, Row};
use crate::types::{AttentionReason, Cursor, ListFilter, Page, RunFilter, RunRow};
use crate::{Store, StoreError};

/// The columns of a run row, in `run_row`'s order (a macro, so statements can
/// `concat!` it).
macro_rules! run_columns {
    () => {
        "id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at, updated_at, \
         version, snapshot, trace_parent, outcome, attention_step, attention_since, snapshot_base"
    };
}
pub(crate) use run_columns;

/// The key of a run in PostgreSQL's `runs_revision_listing`: its revision's
/// first 16 characters (`sha256:` and 9 hex digits; migration 0019 indexes
/// this very expression).
macro_rules! revision_key {
    () => {
        "substr(revision, 1, 16)"
    };
}

/// The head of every listing: filters follow as ` AND …`.
pub(crate) const SELECT_RUNS: &str = concat!("SELECT ", run_columns!(), " FROM runs WHERE TRUE");

impl Store {
    /// Runs matching `filter`, oldest first, `limit` at a time, after `cursor`.
    /// The cursor is stable: runs admitted later never shift earlier pages.
    pub async fn list_runs(&self, filter: &RunFilter, cursor: Option<&Cursor>, limit: u32) -> Result<Page, StoreError> {
        let filter = ListFilter {
            workflow: filter.workflow.clone(),
            state: filter.state,
            owner: filter.owner.clone(),
            keys: filter.keys.clone(),
            idempotency_key: filter.idempotency_key.clone(),
            ..ListFilter::default()
        };
        let mut q = Query::new(SELECT_RUNS);
        if limit == 0 || push_filter(&mut q, &filter, Revision::Equal).is_none() {
            return Ok(Page { runs: Vec::new(), next: None });
        }
        if let Some(c) = cursor {
            q.push(" AND (admitted_at, id) > (").bind(c.admitted_at).push(", ").bind(Arg::id(&c.id)).push(")");
        }
        q.push(" ORDER BY admitted_at, id LIMIT ").bind(i64::from(limit));
        let runs = run_rows(self.pool.begin_read().await?.fetch_query(q).await?)?;
        let full = runs.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
        let next = if full { runs.last().map(cursor_of) } else { None };
        Ok(Page { runs, next })
    }

    /// Runs matching `filter`, newest first — by `(admitted_at, id)`
    /// descending —, `limit` at a time, continuing after `cursor` (older
    /// than it). The page's `next` is set only when another run follows.
    /// Runs admitted later never shift the pages after the first. One
    /// statement, assembled for the filters given (see the module doc). A
    /// page reads an index in its order and stops once the page is full: by
    /// admission (`runs_listing`), by revision or by a state other than
    /// `finished` (`runs_state_listing`); the filters that lead no index
    /// (workflow, owner, a reason or step, a second filter) are checked on
    /// the rows read, so they step over the runs they do not match.
    pub async fn list_runs_newest(
        &self,
        filter: &ListFilter,
        cursor: Option<&Cursor>,
        limit: u32,
    ) -> Result<Page, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let revision = match tx.dialect() {
            Dialect::Pg => Revision::Range,
            Dialect::Sqlite => Revision::Equal,
        };
        let mut q = Query::new(SELECT_RUNS);
        if limit == 0 || push_filter(&mut q, filter, revision).is_none() {
            return Ok(Page { runs: Vec::new(), next: None });
        }
        if let Some(c) = cursor {
            q.push(" AND (admitted_at, id) < (").bind(c.admitted_at).push(", ").bind(Arg::id(&c.id)).push(")");
        }
        q.push(match (revision, &filter.revision) {
            (Revision::Range, Some(_)) => concat!(" ORDER BY ", revision_key!(), " DESC, admitted_at DESC, id DESC"),
            (Revision::Range | Revision::Equal, _) => " ORDER BY admitted_at DESC, id DESC",
        });
        // One more than the page: whether another run follows.
        q.push(" LIMIT ").bind(i64::from(limit) + 1);
        let mut runs = run_rows(tx.fetch_query(q).await?)?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let next = if runs.len() > limit {
            runs.truncate(limit);
            runs.last().map(cursor_of)
        } else {
            None
        };
        Ok(Page { runs, next })
    }
}

/// How a revision filter is written (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revision {
    /// `revision = $n`.
    Equal,
    /// The range of the revision's key (its first 16 characters) and the
    /// revision itself, for a statement ordering by the key first (PostgreSQL).
    Range,
}

/// Appends the conditions of `filter` to `q` (` AND …` each). `None`: no run
/// can match (the filter asks for attention and for another state), and
/// nothing was appended.
pub(crate) fn push_filter(q: &mut Query, filter: &ListFilter, revision: Revision) -> Option<()> {
    let in_attention = filter.attention.is_some() || filter.step.is_some();
    let state = match (filter.state, in_attention) {
        (Some(RunState::Attention) | None, true) => Some(RunState::Attention),
        (Some(_), true) => return None,
        (state, false) => state,
    };
    if let Some(state) = state {
        q.push(state_condition(state));
    }
    match filter.attention {
        Some(AttentionReason::UnknownEffect) => q.push(" AND held = FALSE"),
        Some(AttentionReason::RestoreHold) => q.push(" AND held = TRUE"),
        None => q,
    };
    if let Some(step) = &filter.step {
        q.push(" AND attention_step = ").bind(step.as_str());
    }
    if let Some(workflow) = &filter.workflow {
        q.push(" AND workflow = ").bind(workflow.as_str());
    }
    if let Some(owner) = &filter.owner {
        q.push(" AND owner = ").bind(owner.as_str());
    }
    match (&filter.revision, revision) {
        (Some(r), Revision::Equal) => q.push(" AND revision = ").bind(r.as_str()),
        (Some(r), Revision::Range) => q
            .push(concat!(" AND ", revision_key!(), " >= substr("))
            .bind(r.as_str())
            .push(concat!(", 1, 16) AND ", revision_key!(), " <= substr("))
            .bind(r.as_str())
            .push(", 1, 16) AND revision = ")
            .bind(r.as_str()),
        (None, _) => q,
    };
    if let Some(from) = filter.admitted_from {
        q.push(" AND admitted_at >= ").bind(from);
    }
    if let Some(to) = filter.admitted_to {
        q.push(" AND admitted_at < ").bind(to);
    }
    if let Some(id) = &filter.run_id {
        q.push(" AND id = ").bind(Arg::id(id));
    }
    if let Some(ids) = &filter.run_ids {
        let (first, rest) = ids.split_first()?;
        q.push(" AND id IN (").bind(Arg::id(first));
        for id in rest {
            q.push(", ").bind(Arg::id(id));
        }
        q.push(")");
    }
    // Found through their own index (`run_keys`' and `admission_keys_by_key`), then joined by id.
    for (name, value) in &filter.keys {
        q.push(" AND id IN (SELECT run_id FROM run_keys WHERE name = ").bind(name.as_str());
        q.push(" AND value = ").bind(value.as_str()).push(")");
    }
    if let Some(key) = &filter.idempotency_key {
        q.push(" AND id IN (SELECT run_id FROM admission_keys WHERE idempotency_key = ").bind(key.as_str()).push(")");
    }
    Some(())
}

/// The condition selecting the runs in `state`: a literal, so that the
/// planners can prove a partial index's predicate from it (every state but
/// `finished` names `state <> 'finished'` as well, for SQLite). A test keeps the
/// literals equal to `RunState::as_str`.
fn state_condition(state: RunState) -> &'static str {
    match state {
        RunState::Running => " AND state = 'running' AND state <> 'finished'",
        RunState::Attention => " AND state = 'attention' AND state <> 'finished'",
        RunState::CancelRequested => " AND state = 'cancel-requested' AND state <> 'finished'",
        RunState::Finished => " AND state = 'finished'",
        RunState::Failed => " AND state = 'failed' AND state <> 'finished'",
        RunState::Cancelled => " AND state = 'cancelled' AND state <> 'finished'",
        RunState::CancelledAfterEffect => " AND state = 'cancelled-after-effect' AND state <> 'finished'",
        RunState::Expired => " AND state = 'expired' AND state <> 'finished'",
    }
}

fn cursor_of(run: &RunRow) -> Cursor {
    Cursor { admitted_at: run.admitted_at, id: run.id.clone() }
}

/// Decodes rows selected with `run_columns!`.
pub(crate) fn run_rows(rows: Vec<Row>) -> Result<Vec<RunRow>, StoreError> {
    rows.iter().map(run_row).collect()
}

/// Decodes a row selected with `run_columns!`.
pub(crate) fn run_row(row: &Row) -> Result<RunRow, StoreError> {
    let state: String = row.get(6)?;
    let Some(state) = RunState::ALL.into_iter().find(|s| s.as_str() == state) else {
        return Err(StoreError::Corrupt(format!("unknown run state `{state}`")));
    };
    Ok(RunRow {
        id: row.get(0)?,
        workflow: row.get(1)?,
        revision: row.get(2)?,
        owner: row.get(3)?,
        idempotency_key: row.get(4)?,
        input_digest: row.get(5)?,
        state,
        held: row.get(7)?,
        admitted_at: row.get(8)?,
        updated_at: row.get(9)?,
        version: row.get(10)?,
        snapshot: crate::snapshot_frame::read(row, 11, 16)?,
        trace_parent: row.get(12)?,
        outcome: row.get(13)?,
        attention_step: row.get(14)?,
        attention_since: row.get(15)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The predicate of the partial index `runs_state_listing` (migration 0011).
    const UNFINISHED: &str = "state <> 'finished'";

    #[test]
    fn state_literals_are_the_states_and_name_the_partial_index_predicate() {
        let index = format!("runs_state_listing ON runs (state, admitted_at, id) WHERE {UNFINISHED};");
        for migration in
            [include_str!("../migrations/pg/0011_listing.sql"), include_str!("../migrations/sqlite/0011_listing.sql")]
        {
            assert!(migration.contains(&index), "{migration}");
        }
        for state in RunState::ALL {
            let condition = state_condition(state);
            assert!(condition.starts_with(&format!(" AND state = '{}'", state.as_str())), "{condition}");
            let unfinished = condition.contains(&format!(" AND {UNFINISHED}"));
            assert_eq!(unfinished, state != RunState::Finished, "{condition}");
        }
    }

    #[test]
    fn values_are_bound_and_only_present_filters_are_written() {
        let mut q = Query::new(SELECT_RUNS);
        let filter = ListFilter {
            workflow: Some("w'; DROP TABLE runs; --".into()),
            revision: Some("r".into()),
            attention: Some(AttentionReason::RestoreHold),
            admitted_to: Some(5),
            ..ListFilter::default()
        };
        assert_eq!(push_filter(&mut q, &filter, Revision::Range), Some(()));
        let tail = q.sql().strip_prefix(SELECT_RUNS).unwrap_or_default().to_owned();
        assert_eq!(
            tail,
            " AND state = 'attention' AND state <> 'finished' AND held = TRUE AND workflow = $1 \
             AND substr(revision, 1, 16) >= substr($2, 1, 16) AND substr(revision, 1, 16) <= substr($3, 1, 16) \
             AND revision = $4 AND admitted_at < $5"
        );
        let mut q = Query::new(SELECT_RUNS);
        let contradiction = ListFilter { state: Some(RunState::Running), step: Some("s".into()), ..filter };
        assert_eq!(push_filter(&mut q, &contradiction, Revision::Equal), None);
        assert_eq!(q.sql(), SELECT_RUNS, "nothing appended");
    }
}
