//! The states a run and each of its call steps can be in
//! (docs/reference/runs.md#run-states).
//!
//! Shared vocabulary of the state machine, the store, the API and
//! `scenarios.yaml` expectations. Only the names and their classification live
//! here; which transitions are allowed is the machine's business.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Executing: a call, a timer or a wait is in progress or due.
    Running,
    /// Stopped until an operator settles an unknown effect (or releases a restore hold).
    Attention,
    /// A cancel was requested and the run follows its cancel route or settles an in-flight call.
    CancelRequested,
    /// Reached a `finish` step.
    Finished,
    /// Ended by an error (`product-refused`, `wait.timed-out`, `function.failed`, …).
    Failed,
    /// Cancelled before any mutation's effect was accepted or became unknown.
    Cancelled,
    /// Cancelled after a mutation's effect was accepted or while one is unknown.
    CancelledAfterEffect,
    /// The run deadline passed before it ended (`run.deadline-reached`).
    Expired,
}

impl RunState {
    /// Every state, in the order docs/reference/runs.md#run-states lists them.
    pub const ALL: [RunState; 8] = [
        RunState::Running,
        RunState::Attention,
        RunState::CancelRequested,
        RunState::Finished,
        RunState::Failed,
        RunState::Cancelled,
        RunState::CancelledAfterEffect,
        RunState::Expired,
    ];

    /// The stable spelling (`cancel-requested`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Attention => "attention",
            RunState::CancelRequested => "cancel-requested",
            RunState::Finished => "finished",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::CancelledAfterEffect => "cancelled-after-effect",
            RunState::Expired => "expired",
        }
    }

    /// Whether the run has ended: nothing more is dispatched and no timer fires for it.
    pub fn is_terminal(self) -> bool {
        match self {
            RunState::Running | RunState::Attention | RunState::CancelRequested => false,
            RunState::Finished
            | RunState::Failed
            | RunState::Cancelled
            | RunState::CancelledAfterEffect
            | RunState::Expired => true,
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is known about a call step's effect in its product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EffectState {
    /// The product answered with success (for a read: the read happened).
    Accepted,
    /// The command may have reached the product and no answer settled it.
    Unknown,
    /// The product refused; it did nothing.
    Refused,
    /// The call was never dispatched.
    None,
}

impl EffectState {
    /// Every effect state.
    pub const ALL: [EffectState; 4] =
        [EffectState::Accepted, EffectState::Unknown, EffectState::Refused, EffectState::None];

    /// The stable spelling (`accepted`).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectState::Accepted => "accepted",
            EffectState::Unknown => "unknown",
            EffectState::Refused => "refused",
            EffectState::None => "none",
        }
    }
}

impl std::fmt::Display for EffectState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_match_serde() {
        for state in RunState::ALL {
            assert_eq!(serde_json::to_value(state).ok(), Some(serde_json::Value::from(state.as_str())));
        }
        for effect in EffectState::ALL {
            assert_eq!(serde_json::to_value(effect).ok(), Some(serde_json::Value::from(effect.as_str())));
        }
    }

    #[test]
    fn only_ended_runs_are_terminal() {
        let terminal: Vec<&str> = RunState::ALL.iter().filter(|s| s.is_terminal()).map(|s| s.as_str()).collect();
        assert_eq!(terminal, ["finished", "failed", "cancelled", "cancelled-after-effect", "expired"]);
    }
}
