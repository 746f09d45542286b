//! Completion notifications (`POST /v1/completions/{connection}`,
//! docs/reference/products.md#from-the-product-to-the-coordinator,
//! docs/reference/runs.md#waits): a product's nudge that a reference it was
//! asked about may have changed. The nudge only asks the engine to observe now;
//! it never carries a result.

use coordinator_core::machine::event::Event;
use coordinator_core::model::run::RunState;
use coordinator_core::model::workflow::Step;

use crate::engine::Engine;
use crate::engine::error::EngineError;

/// Sends `CompletionNotified` to each running run whose open wait-for observes
/// `reference` through a call on `connection`. The runs are found through the
/// store's wait index ([`Store::waiting_on`]), without opening any snapshot; a
/// reference another connection handed out is not this connection's to nudge.
///
/// # Errors
/// The store's or the engine's error while looking up or applying the event
/// (the first one; every matching wait is still tried).
///
/// [`Store::waiting_on`]: coordinator_store::Store::waiting_on
pub async fn nudge(engine: &Engine, connection: &str, reference: &str) -> Result<(), EngineError> {
    if engine.recovery_only {
        return Ok(());
    }
    let mut first_error = None;
    let lookups = crate::engine::wait_index::lookups(&engine.keyring, reference);
    for (run_id, step) in engine.store().waiting_on_any(&lookups).await? {
        let Some(row) = engine.store().load(&run_id).await? else { continue };
        if row.state != RunState::Running {
            continue;
        }
        let wf = engine.workflow(&row.revision).await?;
        let Some(Step::WaitFor(wait)) = wf.step(&step) else { continue };
        let on_connection = wf.operation_of(&wait.completion.step).is_some_and(|(_, op)| op.connection == connection);
        if !on_connection {
            continue;
        }
        if let Err(e) = engine.handle(&run_id, &Event::CompletionNotified { step }, engine.now()).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
