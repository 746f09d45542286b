//! Trigger events (docs/reference/runs.md#admission: an event id is deduplicated): which run each
//! product event admitted, per workflow and trigger. The row is written in the
//! admission's own transaction (`Store::admit_event` in `runs`), so a crash
//! cannot leave an admitted run without its event or an event without its run.
//! Only the event's id is stored, never its body.

use crate::db::{Arg, Tx};
use crate::types::TriggerEvent;
use crate::{Store, StoreError};

const FIND_EVENT: &str =
    "SELECT run_id FROM trigger_events WHERE workflow = $1 AND trigger_name = $2 AND event_id = $3";
const RECORD_EVENT: &str = "INSERT INTO trigger_events (workflow, trigger_name, event_id, run_id, received_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workflow, trigger_name, event_id) DO NOTHING RETURNING run_id";

impl Store {
    /// The run an event of `workflow`'s trigger admitted, if it was seen before.
    pub async fn event_run(&self, workflow: &str, event: &TriggerEvent) -> Result<Option<String>, StoreError> {
        find(&mut self.pool.begin_read().await?, workflow, event).await
    }
}

/// The run recorded for the event, inside a transaction.
pub(crate) async fn find(tx: &mut Tx, workflow: &str, event: &TriggerEvent) -> Result<Option<String>, StoreError> {
    let args: Vec<Arg> = vec![workflow.into(), event.trigger.as_str().into(), event.event_id.as_str().into()];
    tx.fetch_optional(FIND_EVENT, args).await?.map(|row| row.get(0)).transpose()
}

/// Records that the event admitted (or led to) `run_id`. `false` when another
/// transaction recorded the same event first: the caller rolls back and reads it.
pub(crate) async fn record(
    tx: &mut Tx,
    workflow: &str,
    event: &TriggerEvent,
    run_id: &str,
    at: i64,
) -> Result<bool, StoreError> {
    let args: Vec<Arg> = vec![
        workflow.into(),
        event.trigger.as_str().into(),
        event.event_id.as_str().into(),
        Arg::id(run_id),
        at.into(),
    ];
    Ok(tx.fetch_optional(RECORD_EVENT, args).await?.is_some())
}
