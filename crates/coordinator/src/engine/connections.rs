//! The deployment's connections as an operator sees and steers them
//! (docs/reference/service.md#connections): each one runtime.yaml names,
//! whether it is served here or by remote workers, which workflows call
//! through it, and an operator's pause.
//!
//! A pause is the store's (`coordinator_store::Store::pause_connection`):
//! every process stops sending the connection's requests at its next claim
//! round. This module only names the connections, finds the workflows that
//! use one (what pausing it needs the `operate` role for) and routes queued
//! rows to their connection ([`routes`]).

use std::collections::BTreeSet;

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::pace::{BreakerChange, BreakerSettings, Health};
use coordinator_store::{PaceView, Pause};

use crate::dispatch::remote::connection_of;
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// The longest reason a pause or resume may carry, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// One connection of the deployment, as `GET /v1/connections` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionView {
    /// Its name in runtime.yaml.
    pub name: String,
    /// `in-process` or `remote`.
    pub dispatch: &'static str,
    /// The workflows whose stored revisions call through it.
    pub workflows: Vec<String>,
    /// The operator's pause, while it is paused.
    pub paused: Option<Pause>,
    /// Its shared pace: the breaker and a product's hold.
    pub pace: PaceView,
}

/// Why a pause or resume was refused before anything was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefusal {
    /// runtime.yaml names no such connection.
    #[error("no connection `{0}` is configured in this deployment")]
    Unknown(String),
    /// The reason is empty or too long.
    #[error("a reason of 1 to {MAX_REASON_CHARS} characters is required")]
    Reason,
}

/// (step, connection) for each step whose rows `actions` queue: the
/// decision's `connections`, which a pause holds back.
pub(crate) fn routes(wf: &Workflow, actions: &[Action]) -> Vec<(String, String)> {
    let mut routes: Vec<(String, String)> = Vec::new();
    for action in actions {
        let step = match action {
            Action::Dispatch { step, .. } | Action::RequestReceipt { step } | Action::Observe { step, .. } => step,
            _ => continue,
        };
        if let Some(connection) = connection_of(wf, step)
            && !routes.iter().any(|(s, _)| s == step)
        {
            routes.push((step.clone(), connection.to_owned()));
        }
    }
    routes
}

/// A character that does not make a reason: a space or a control character,
/// as one explicit set — the OpenAPI document's `ReasonRequest` pattern lists
/// the same code points, since regex engines disagree on what `\s` is.
pub fn is_blank(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{20}'
            | '\u{7f}'..='\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// `reason` as kept: without blanks at either end.
pub fn reason_kept(reason: &str) -> &str {
    reason.trim_matches(is_blank)
}

/// Whether `reason` is one a pause or resume accepts: at most
/// [`MAX_REASON_CHARS`] characters, one of them not [blank](is_blank).
pub fn reason_ok(reason: &str) -> bool {
    reason.chars().count() <= MAX_REASON_CHARS && reason.chars().any(|c| !is_blank(c))
}

impl Engine {
    /// The names of the deployment's connections, in-process and remote.
    pub fn connection_names(&self) -> BTreeSet<String> {
        self.connections.keys().chain(self.remote.keys()).cloned().collect()
    }

    /// Every connection of the deployment with its workflows and pause, by name.
    ///
    /// # Errors
    /// A store failure, or a stored package that cannot be read.
    pub async fn connections_view(&self) -> Result<Vec<ConnectionView>, EngineError> {
        let states = self.store.connection_states().await?;
        let users = self.connection_users().await?;
        Ok(self
            .connection_names()
            .into_iter()
            .map(|name| ConnectionView {
                dispatch: if self.remote.contains_key(&name) { "remote" } else { "in-process" },
                workflows: users.iter().filter(|(_, c)| *c == name).map(|(w, _)| w.clone()).collect(),
                paused: states.iter().find(|s| s.name == name).and_then(|s| s.paused.clone()),
                pace: states.iter().find(|s| s.name == name).map(|s| s.pace.clone()).unwrap_or_default(),
                name,
            })
            .collect())
    }

    /// The workflows whose stored revisions call through connection `name`.
    ///
    /// # Errors
    /// A store failure, or a stored package that cannot be read.
    pub async fn workflows_using(&self, name: &str) -> Result<Vec<String>, EngineError> {
        let users = self.connection_users().await?;
        Ok(users.into_iter().filter(|(_, c)| c == name).map(|(w, _)| w).collect())
    }

    /// Pauses connection `name` (as `by`, for `reason`). A paused one keeps
    /// its pause. Returns the pause in force and whether this call placed it.
    ///
    /// # Errors
    /// [`EngineError::Connection`] for an unknown connection or a missing
    /// reason; a store failure.
    pub async fn pause_connection(&self, name: &str, by: &str, reason: &str) -> Result<(Pause, bool), EngineError> {
        self.check_connection(name, reason)?;
        let (pause, placed) = self.store.pause_connection(name, self.now(), by, reason_kept(reason)).await?;
        if placed {
            tracing::warn!(
                connection = name,
                actor = by,
                "connection paused: nothing is sent to it until it is resumed"
            );
        }
        Ok((pause, placed))
    }

    /// Resumes connection `name` (as `by`, for `reason`); its due work is
    /// claimed at once. Returns the pause it lifted (`None`: it was not paused).
    ///
    /// # Errors
    /// As [`Engine::pause_connection`].
    pub async fn resume_connection(&self, name: &str, by: &str, reason: &str) -> Result<Option<Pause>, EngineError> {
        self.check_connection(name, reason)?;
        let lifted = self.store.resume_connection(name, self.now(), by, reason_kept(reason)).await?;
        if lifted.is_some() {
            tracing::info!(connection = name, actor = by, "connection resumed");
            self.wake.notify_one();
        }
        Ok(lifted)
    }

    fn check_connection(&self, name: &str, reason: &str) -> Result<(), EngineError> {
        if !self.connections.contains_key(name) && !self.remote.contains_key(name) {
            return Err(EngineError::Connection(ConnectionRefusal::Unknown(name.to_owned())));
        }
        if !reason_ok(reason) {
            return Err(EngineError::Connection(ConnectionRefusal::Reason));
        }
        Ok(())
    }

    /// Takes in what an answer of `connection`'s product says of its health
    /// (the connection's shared pace: a `Retry-After` holds it for every run,
    /// failures in a row open its breaker, a healthy answer closes it). A
    /// healthy answer of a connection at full pace writes nothing. A failure
    /// to record it is logged: the run's own answer is reported all the same.
    pub(crate) async fn pace_answered(
        &self,
        connection: &str,
        reason: &coordinator_products::Reason,
        retry_after_ms: Option<i64>,
    ) {
        if let Some(health) = reason.health(retry_after_ms) {
            self.pace_health(connection, health, &reason.to_string()).await;
        }
    }

    /// [`Engine::pace_answered`] for an answer classified elsewhere (a remote
    /// worker's report): `why` is the classifier's reason, never a value.
    pub(crate) async fn pace_health(&self, connection: &str, health: Health, why: &str) {
        if health == Health::Healthy && !self.store.pace_unsettled(connection) {
            return;
        }
        let settings = self.breaker_of(connection);
        match self.store.record_answer(connection, health, &settings, why, self.now()).await {
            Ok((_, Some(BreakerChange::Opened))) => tracing::warn!(
                connection,
                reason = why,
                probe_every_seconds = settings.probe_every_ms / 1000,
                "the connection's breaker opened: only a probe is sent until an answer closes it"
            ),
            Ok((_, Some(BreakerChange::Closed))) => {
                tracing::info!(connection, "the connection's breaker closed: its requests are sent again");
                self.wake.notify_one();
            }
            Ok((_, None)) => {}
            Err(e) => tracing::warn!(connection, error = %e, "the connection's pace could not be recorded"),
        }
    }

    /// The breaker settings of `connection` (runtime.yaml, else the defaults).
    pub(crate) fn breaker_of(&self, connection: &str) -> BreakerSettings {
        self.breakers.get(connection).copied().unwrap_or_default()
    }

    /// (workflow, connection) for every connection a stored revision's
    /// operations name, each pair once.
    async fn connection_users(&self) -> Result<BTreeSet<(String, String)>, EngineError> {
        let mut users = BTreeSet::new();
        for revision in self.store.package_revisions().await? {
            let wf = self.workflow(&revision).await?;
            for op in wf.definition.operations.values() {
                users.insert((wf.definition.workflow.clone(), op.connection.clone()));
            }
        }
        Ok(users)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_required_and_bounded() {
        assert!(reason_ok("Messaging asked us to stop"));
        assert!(!reason_ok("   "), "blank");
        assert!(!reason_ok(""));
        assert!(reason_ok(&"x".repeat(MAX_REASON_CHARS)));
        assert!(!reason_ok(&"x".repeat(MAX_REASON_CHARS + 1)));
        assert!(!reason_ok("\u{85}\u{feff}\u{3000}"), "blank by the document's set");
        assert!(!reason_ok(&format!(" {}", "x".repeat(MAX_REASON_CHARS))), "counted as sent");
        assert!(reason_ok("\u{85}x"));
    }
}
