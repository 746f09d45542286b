//! The completion-reference index: which open wait-for observes a reference,
//! so a completion notification finds its run without opening snapshots.
//!
//! The rows are written by `persist` (`StartWait` opens one, `ResolveWait` and
//! `EndRun` remove them); this module only reads them. It must not decide
//! whether a notification applies: the machine does, under the run lock.

use crate::{Store, StoreError};

const WAITING_ON: &str = "SELECT run_id, step FROM waits WHERE reference = $1 ORDER BY run_id, step";

impl Store {
    /// The open waits observing `reference`: (run id, wait-for step), ordered.
    /// References are the products' own ids, so several runs (on different
    /// connections) may share one; the caller checks which wait it concerns.
    pub async fn waiting_on(&self, reference: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.waiting_on_any(&[reference.to_owned()]).await
    }

    /// [`Store::waiting_on`] for any of `references` (the index of one
    /// reference under several keys), each wait once, sorted.
    pub async fn waiting_on_any(&self, references: &[String]) -> Result<Vec<(String, String)>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut waits = Vec::new();
        for reference in references {
            for row in tx.fetch_all(WAITING_ON, vec![reference.as_str().into()]).await? {
                waits.push((row.get(0)?, row.get(1)?));
            }
        }
        waits.sort();
        waits.dedup();
        Ok(waits)
    }
}
