//! The deployment's active revisions (one per workflow) with their package
//! digests, for the operator console's deployment page. It reads, never
//! decides; activation lives in `runs` (`Store::activate`).

use crate::{Store, StoreError};

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
}
