//! The deployment's active revisions (one per workflow) with their package
//! digests, for the operator console's deployment page, and what each stored
//! revision still holds (its runs not ended, by state, and the oldest one's
//! admission), so an operator sees when an old revision has drained. It
//! reads, never decides; activation lives in `runs` (`Store::activate`).

use std::collections::BTreeMap;

use coordinator_core::model::run::RunState;

use crate::{Store, StoreError};

/// Every stored revision of `$1` (NULL: of every workflow), whether active.
const REVISIONS: &str = "SELECT p.workflow, p.revision, a.revision IS NOT NULL FROM packages p \
     LEFT JOIN active_revisions a ON a.workflow = p.workflow AND a.revision = p.revision \
     WHERE $1 IS NULL OR p.workflow = $1";
/// The runs not ended of `$1` (NULL: every workflow) by revision and state,
/// with the oldest admission. The states are literals (`UNFINISHED`), and name
/// `state <> 'finished'`, so the partial index `runs_state_listing` serves it.
const UNFINISHED: &str = "SELECT workflow, revision, state, count(*), min(admitted_at) FROM runs \
     WHERE state IN ('running', 'attention', 'cancel-requested') AND state <> 'finished' \
     AND ($1 IS NULL OR workflow = $1) GROUP BY workflow, revision, state";

/// What one stored revision of a workflow still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionHolding {
    /// The workflow.
    pub workflow: String,
    /// The revision.
    pub revision: String,
    /// Whether new admissions get it.
    pub active: bool,
    /// Its runs not ended, by state (every state that has not ended is listed, 0 included).
    pub unfinished: BTreeMap<RunState, u64>,
    /// When its oldest run not ended was admitted, ms (`None`: it holds none).
    pub oldest_unfinished: Option<i64>,
}

impl RevisionHolding {
    /// Its runs not ended, all states together.
    pub fn unfinished_total(&self) -> u64 {
        self.unfinished.values().sum()
    }
}

const ACTIVE_REVISIONS: &str = "SELECT a.workflow, a.revision, p.digest FROM active_revisions a \
     JOIN packages p ON p.revision = a.revision ORDER BY a.workflow";

/// A workflow's active revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRevision {
    /// The workflow.
    pub workflow: String,
    /// The revision new admissions get.
    pub revision: String,
    /// Its package's digest.
    pub digest: String,
}

impl Store {
    /// Every workflow's active revision, by workflow name.
    pub async fn active_revisions(&self) -> Result<Vec<ActiveRevision>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut active = Vec::new();
        for row in tx.fetch_all(ACTIVE_REVISIONS, Vec::new()).await? {
            active.push(ActiveRevision { workflow: row.get(0)?, revision: row.get(1)?, digest: row.get(2)? });
        }
        Ok(active)
    }

    /// What each stored revision of `workflow` (`None`: of every workflow)
    /// still holds, by workflow, the active revision first, then the oldest
    /// unfinished admission first, then by revision.
    pub async fn revision_holdings(&self, workflow: Option<&str>) -> Result<Vec<RevisionHolding>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut holdings: BTreeMap<(String, String), RevisionHolding> = BTreeMap::new();
        let empty = || RunState::ALL.into_iter().filter(|s| !s.is_terminal()).map(|s| (s, 0)).collect();
        for row in tx.fetch_all(REVISIONS, vec![workflow.into()]).await? {
            let (workflow, revision): (String, String) = (row.get(0)?, row.get(1)?);
            let holding = RevisionHolding {
                workflow: workflow.clone(),
                revision: revision.clone(),
                active: row.get(2)?,
                unfinished: empty(),
                oldest_unfinished: None,
            };
            holdings.insert((workflow, revision), holding);
        }
        for row in tx.fetch_all(UNFINISHED, vec![workflow.into()]).await? {
            let (workflow, revision, state): (String, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let Some(state) = RunState::ALL.into_iter().find(|s| s.as_str() == state) else {
                return Err(StoreError::Corrupt(format!("unknown run state `{state}`")));
            };
            let (count, oldest): (i64, i64) = (row.get(3)?, row.get(4)?);
            let holding = holdings.entry((workflow.clone(), revision.clone())).or_insert_with(|| RevisionHolding {
                workflow,
                revision,
                active: false,
                unfinished: empty(),
                oldest_unfinished: None,
            });
            holding.unfinished.insert(state, u64::try_from(count).unwrap_or(0));
            holding.oldest_unfinished = Some(holding.oldest_unfinished.map_or(oldest, |o| o.min(oldest)));
        }
        let mut list: Vec<RevisionHolding> = holdings.into_values().collect();
        list.sort_by(|a, b| {
            let order = |h: &RevisionHolding| (!h.active, h.oldest_unfinished.is_none(), h.oldest_unfinished);
            a.workflow.cmp(&b.workflow).then(order(a).cmp(&order(b))).then(a.revision.cmp(&b.revision))
        });
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::model::run::RunState;

    #[test]
    fn the_unfinished_states_are_the_ones_not_terminal() {
        let listed: Vec<&str> = RunState::ALL.into_iter().filter(|s| !s.is_terminal()).map(RunState::as_str).collect();
        let literals = super::UNFINISHED.split("state IN (").nth(1).and_then(|r| r.split(')').next()).unwrap_or("");
        let quoted: Vec<String> = listed.iter().map(|s| format!("'{s}'")).collect();
        assert_eq!(literals, quoted.join(", "));
    }
}
