//! Counts for monitoring: how many runs are in each state, read at scrape
//! time (`GET /metrics`). One `GROUP BY` over the runs table; it reads, never
//! decides.

use coordinator_core::model::run::RunState;

use crate::{Store, StoreError};

const RUNS_BY_STATE: &str = "SELECT state, COUNT(*) FROM runs GROUP BY state";

impl Store {
    /// How many runs are in each state (every state, zero included), in `RunState::ALL` order.
    pub async fn runs_by_state(&self) -> Result<Vec<(RunState, i64)>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut counts: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
        for row in tx.fetch_all(RUNS_BY_STATE, Vec::new()).await? {
            let state: String = row.get(0)?;
            let n: i64 = row.get(1)?;
            let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == state) else {
                return Err(StoreError::Corrupt(format!("run state `{state}`")));
            };
            slot.1 = n;
        }
        Ok(counts)
    }
}
