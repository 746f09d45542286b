//! Live updates (`GET /console/live`): a server-sent event stream that says
//! `changed` whenever a decision of this process committed (the engine's
//! after-commit hook bumps [`Engine::changes`](crate::Engine::changes)), at most once a second, and
//! at least every five seconds anyway, so changes committed by another
//! process of the deployment show within that. The page's script then fetches
//! its live regions again; without the stream it polls. The stream ends when
//! the process begins draining, so no connection holds a stop back.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;

use super::Viewer;
use crate::api::ApiState;

/// The longest time between two `changed` events.
const TICK: Duration = Duration::from_secs(5);
/// The shortest time between two `changed` events.
const SPACING: Duration = Duration::from_secs(1);

/// `GET /console/live`.
pub(super) async fn events(_viewer: Viewer, State(state): State<ApiState>) -> Response {
    let engine = state.engine;
    let changes = engine.changes();
    let stream = stream::unfold((engine, changes, true), |(engine, mut changes, first)| async move {
        if !first {
            tokio::time::sleep(SPACING).await;
        }
        tokio::select! {
            () = engine.drain.begun() => return None,
            _ = changes.changed() => {}
            () = tokio::time::sleep(if first { Duration::ZERO } else { TICK }) => {}
        }
        changes.borrow_and_update();
        // A browser dispatches no event without data.
        let event = Event::default().event(if first { "ready" } else { "changed" }).data("1");
        Some((Ok::<_, Infallible>(event), (engine, changes, false)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
