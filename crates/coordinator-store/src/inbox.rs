//! The operator's attention inbox: the runs in attention grouped by reason,
//! workflow and step, longest-waiting group first (`Store::attention_groups`),
//! and the runs of a group (or any filter), longest waiting first
//! (`Store::attention_runs`). Both read only runs in attention, from the
//! partial index `runs_attention (workflow, held, attention_since, id,
//! attention_step) WHERE state = 'attention'` (migration 0011): a group's runs
//! in the order the index holds them, the groups from the index alone
//! (PostgreSQL reads table rows only for an owner restriction). Like
//! `listing`, whose filters it shares, it reads and never writes, and counts
//! only the runs in attention.

use coordinator_core::model::run::RunState;

use crate::db::{Arg, Query};
use crate::listing::{Revision, SELECT_RUNS, push_filter, run_rows};
use crate::types::{AttentionCursor, AttentionGroup, AttentionReason, ListFilter, RunRow};
use crate::{Store, StoreError};

/// The groups, by hold (the reason), workflow and step. `'attention'` is
/// `RunState::Attention.as_str()` and the predicate of `runs_attention`, a
/// literal so the index serves it (a test in `stats` keeps them equal).
pub(crate) const GROUPS: &str = "SELECT held, workflow, attention_step, COUNT(*), MIN(attention_since) FROM runs \
     WHERE state = 'attention'";

impl Store {
    /// The runs in attention, grouped by reason (from `held`, as in
    /// [`Store::attention_by_reason`]), workflow and step of the unknown
    /// effect, the group whose runs have waited longest first (then by
    /// reason, workflow and step). `workflow` keeps one workflow's groups,
    /// `owner` only that owner's runs (a caller who may read only its own).
    /// One `GROUP BY` over the runs in attention, never the whole table.
    pub async fn attention_groups(
        &self,
        workflow: Option<&str>,
        owner: Option<&str>,
    ) -> Result<Vec<AttentionGroup>, StoreError> {
        let mut q = Query::new(GROUPS);
        if let Some(workflow) = workflow {
            q.push(" AND workflow = ").bind(workflow);
        }
        if let Some(owner) = owner {
            q.push(" AND owner = ").bind(owner);
        }
        q.push(" GROUP BY held, workflow, attention_step");
        let mut groups = Vec::new();
        for row in self.pool.begin_read().await?.fetch_query(q).await? {
            let (workflow, step): (String, Option<String>) = (row.get(1)?, row.get(2)?);
            let Some(oldest_since) = row.get::<Option<i64>>(4)? else {
                return Err(StoreError::Corrupt(format!("runs of {workflow} in attention without attention_since")));
            };
            groups.push(AttentionGroup {
                reason: AttentionReason::of_held(row.get(0)?),
                workflow,
                step,
                runs: row.get(3)?,
                oldest_since,
            });
        }
        // In Rust, not SQL: the same (byte) order whatever the database's collation.
        groups.sort_by(|a, b| {
            (a.oldest_since, a.reason, &a.workflow, &a.step).cmp(&(b.oldest_since, b.reason, &b.workflow, &b.step))
        });
        Ok(groups)
    }

    /// Runs in attention matching `filter` — for a group: its `workflow`,
    /// `attention` (reason) and `step`; `owner` for a caller who may read
    /// only its own —, longest waiting first, by `(attention_since, id)`,
    /// `limit` at a time after `after`. Returns the page and, when another
    /// run follows, where the next page continues. A filter on another state
    /// matches nothing.
    pub async fn attention_runs(
        &self,
        filter: &ListFilter,
        after: Option<&AttentionCursor>,
        limit: u32,
    ) -> Result<(Vec<RunRow>, Option<AttentionCursor>), StoreError> {
        if limit == 0 || filter.state.is_some_and(|s| s != RunState::Attention) {
            return Ok((Vec::new(), None));
        }
        let filter = ListFilter { state: Some(RunState::Attention), ..filter.clone() };
        let mut q = Query::new(SELECT_RUNS);
        if push_filter(&mut q, &filter, Revision::Equal).is_none() {
            return Ok((Vec::new(), None));
        }
        if let Some(c) = after {
            q.push(" AND (attention_since, id) > (").bind(c.since).push(", ").bind(Arg::id(&c.id)).push(")");
        }
        // One more than the page: whether another run follows.
        q.push(" ORDER BY attention_since, id LIMIT ").bind(i64::from(limit) + 1);
        let mut runs = run_rows(self.pool.begin_read().await?.fetch_query(q).await?)?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if runs.len() <= limit {
            return Ok((runs, None));
        }
        runs.truncate(limit);
        let next = match runs.last() {
            Some(last) => match last.attention_since {
                Some(since) => Some(AttentionCursor { since, id: last.id.clone() }),
                None => {
                    return Err(StoreError::Corrupt(format!("run {} in attention without attention_since", last.id)));
                }
            },
            None => None,
        };
        Ok((runs, next))
    }
}
