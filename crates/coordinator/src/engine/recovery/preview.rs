//! What an operator's command would do, before it is given: the pure
//! machine decides the command on a copy of the run as it stands now (a due
//! run deadline first, as in [`inspection`](super::inspection)), and nothing is written. An
//! applied command is described by the journal lines its transition would
//! write (the machine's own words, no values); a refused one by the rule's
//! code and message; an ignored one by the machine's reason.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings};

use crate::engine::recovery::inspection::{RecoveryAction, Rules};

/// The outcome of a dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preview {
    /// The command would be applied; what it would record, in order.
    Applies {
        /// The journal lines of the transition.
        changes: Vec<String>,
    },
    /// The rules refuse it now.
    Refused {
        /// The machine's stable code.
        code: String,
        /// Why, in words.
        message: String,
    },
    /// It would change nothing.
    Ignored {
        /// Why.
        reason: String,
    },
}

impl Preview {
    /// Whether the command would be applied.
    pub fn applies(&self) -> bool {
        matches!(self, Preview::Applies { .. })
    }
}

/// The event of an operator's command on `step` (a cancel concerns the run).
pub fn command(action: RecoveryAction, step: &str) -> Event {
    match action {
        RecoveryAction::Reconcile => Event::ReconcileRequested { step: step.to_owned() },
        RecoveryAction::RetrySame => Event::RetrySameRequested { step: step.to_owned() },
        RecoveryAction::Cancel => Event::CancelRequested,
    }
}

/// The dry run of `event` on `run` at `now`.
pub fn preview(wf: &Workflow, run: &Run, now: Instant, settings: &Settings, event: &Event) -> Preview {
    let transition = Rules::at(wf, run, now, settings).transition(event);
    match transition.outcome {
        Outcome::Applied => Preview::Applies {
            changes: transition
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Audit { step, detail, .. } => {
                        Some(step.as_ref().map_or_else(|| detail.clone(), |s| format!("{s}: {detail}")))
                    }
                    _ => None,
                })
                .collect(),
        },
        Outcome::Refused { code, message } => Preview::Refused { code, message },
        Outcome::Ignored { reason } => Preview::Ignored { reason },
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::check::check_project;
    use coordinator_core::machine::event::CallAnswer;
    use coordinator_core::machine::{Settings, advance};
    use coordinator_functions::Limits;

    use super::*;
    use crate::process::project_dir::ProjectDir;

    fn flagship() -> Workflow {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/reviewed-notice");
        let checked = match check_project(&ProjectDir::new(dir)).map(|r| r.checked) {
            Ok(Some(checked)) => checked,
            other => panic!("{other:?}"),
        };
        match Workflow::compile(checked.definition, Limits::default()) {
            Ok(wf) => wf,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_dry_run_describes_the_change_or_the_refusal_and_applies_nothing() {
        let wf = flagship();
        let settings = Settings::default();
        let now = Instant(1_000_000);
        let input = match std::fs::read_to_string(
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/reviewed-notice/input.json"),
        )
        .map(|t| serde_json::from_str(&t))
        {
            Ok(Ok(input)) => input,
            other => panic!("{other:?}"),
        };
        let mut run = Run::new("r-1", &wf.revision, now, input);
        let _ = advance(&wf, &mut run, &Event::Admitted, now, &settings);
        let _ = advance(
            &wf,
            &mut run,
            &Event::CallAnswered { step: "read-application".into(), attempt: 1, answer: CallAnswer::Uncertain },
            now,
            &settings,
        );
        let before = run.clone();
        // A read answered uncertain is simply read again: nothing to settle.
        let retry = preview(&wf, &run, now, &settings, &command(RecoveryAction::RetrySame, "read-application"));
        assert!(matches!(retry, Preview::Refused { ref code, .. } if code == "step.effect-not-unknown"), "{retry:?}");
        let cancel = preview(&wf, &run, now, &settings, &command(RecoveryAction::Cancel, ""));
        assert!(cancel.applies(), "{cancel:?}");
        let Preview::Applies { changes } = &cancel else { unreachable!("checked above") };
        assert!(changes.iter().any(|c| c.contains("cancel requested")), "{changes:?}");
        assert_eq!(run, before, "nothing was applied");
    }
}
