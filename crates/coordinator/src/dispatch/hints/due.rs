//! What a committed decision made claimable, and which lanes to announce it
//! on: a timer set, or a row queued for a step whose connection is
//! in-process, goes on the in-process stream; a row queued for a remote
//! connection's step on that connection's lane.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;

use super::stream::Lane;
use crate::dispatch::remote::RemoteConnections;

/// What a decision queued, gathered from its actions inside its transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Due {
    /// Whether it set a timer due soon (`TIMER_WAKE_HORIZON_MS`: a later
    /// one is found by a round before it is due).
    timers: bool,
    /// The step of each row it queued (attempts, receipt lookups,
    /// observations), in order, as often as rows were queued for it.
    rows: Vec<String>,
}

impl Due {
    /// What `actions`, committed at `now`, queue (the same actions the store
    /// writes as queued rows and timers, and wakes workers for).
    pub(crate) fn of(actions: &[Action], now: i64) -> Due {
        let mut due = Due::default();
        for action in actions {
            match action {
                Action::Dispatch { step, .. } | Action::RequestReceipt { step } | Action::Observe { step, .. } => {
                    due.rows.push(step.clone());
                }
                Action::ScheduleTimer { at, .. } => {
                    due.timers |= coordinator_store::timer_wakes(at.0, now);
                }
                _ => {}
            }
        }
        due
    }

    /// Leaves out one queued row of each step in `leased` (leased to this
    /// process's worker as it committed: nobody need look for it).
    pub(crate) fn take_leased<'a>(&mut self, leased: impl IntoIterator<Item = &'a str>) {
        for step in leased {
            if let Some(at) = self.rows.iter().position(|row| row == step) {
                self.rows.remove(at);
            }
        }
    }

    /// Whether nothing was queued.
    pub(crate) fn is_empty(&self) -> bool {
        !self.timers && self.rows.is_empty()
    }

    /// The lanes to announce on, each once, in-process first.
    pub(crate) fn lanes(&self, wf: &Workflow, remote: &RemoteConnections) -> Vec<Lane> {
        let mut lanes = Vec::new();
        if self.timers {
            lanes.push(Lane::InProcess);
        }
        for step in &self.rows {
            let lane = match crate::dispatch::remote::connection_of(wf, step) {
                Some(connection) if remote.contains_key(connection) => Lane::Remote(connection.to_owned()),
                _ => Lane::InProcess,
            };
            if !lanes.contains(&lane) {
                lanes.push(lane);
            }
        }
        lanes.sort();
        lanes
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::event::Timer;
    use coordinator_core::machine::time::Instant;

    use super::*;

    #[test]
    fn queued_rows_and_timers_are_due_and_nothing_else() {
        let actions = [
            Action::Dispatch { step: "notify".into(), attempt: 1, not_before: Instant(5) },
            Action::RequestReceipt { step: "notify".into() },
            Action::ScheduleTimer { timer: Timer::RunDeadline, at: Instant(9) },
            Action::CancelTimer { timer: Timer::RunDeadline },
        ];
        let due = Due::of(&actions, 5);
        assert_eq!(due, Due { timers: true, rows: vec!["notify".into(), "notify".into()] });
        assert!(!due.is_empty());
        assert!(Due::of(&[Action::CancelTimer { timer: Timer::RunDeadline }], 5).is_empty());
    }

    #[test]
    fn a_timer_due_beyond_the_horizon_wakes_nobody() {
        let horizon = coordinator_store::TIMER_WAKE_HORIZON_MS;
        let at = |ms: i64| [Action::ScheduleTimer { timer: Timer::RunDeadline, at: Instant(ms) }];
        assert!(!Due::of(&at(1_000 + horizon - 1), 1_000).is_empty(), "due within the horizon: a wake-up");
        assert!(Due::of(&at(1_000 + horizon), 1_000).is_empty(), "a round finds it before it is due");
        assert!(Due::of(&at(1_000 + 86_400_000), 1_000).is_empty(), "a run's deadline, a day away");
    }

    #[test]
    fn every_worker_looks_for_due_work_within_the_horizon() {
        let longest = i64::try_from(crate::dispatch::hints::SWEEP.max(crate::dispatch::worker::MAX_SLEEP).as_millis())
            .unwrap_or(i64::MAX);
        assert!(longest <= coordinator_store::TIMER_WAKE_HORIZON_MS, "a worker could sleep past a timer");
    }

    #[test]
    fn work_leased_as_it_was_queued_is_left_out_row_by_row() {
        let actions = [
            Action::Dispatch { step: "notify".into(), attempt: 1, not_before: Instant(5) },
            Action::RequestReceipt { step: "notify".into() },
        ];
        let mut due = Due::of(&actions, 5);
        due.take_leased(["notify"]);
        assert!(!due.is_empty(), "one of the step's two rows is still to be claimed");
        due.take_leased(["notify", "other"]);
        assert!(due.is_empty());
        let mut timer = Due::of(&[Action::ScheduleTimer { timer: Timer::RunDeadline, at: Instant(9) }], 5);
        timer.take_leased(["notify"]);
        assert!(!timer.is_empty(), "a timer is never leased this way");
    }
}
