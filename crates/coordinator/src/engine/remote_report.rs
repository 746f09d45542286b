//! Applying a remote worker's report: one fenced decision, as the in-process
//! worker's reports are, with the report itself journaled (kind `report`)
//! in the same transaction, so that the same report again can be recognised
//! ([`Store::report_journaled`]) and answered the same way.
//!
//! [`Store::report_journaled`]: coordinator_store::Store::report_journaled

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_store::Claim;

use crate::engine::Engine;
use crate::engine::commit_hooks::{After, Note, Told};
use crate::engine::error::EngineError;

impl Engine {
    /// Applies `event` under `claim`'s lease held by `owner`, journaling
    /// `detail` as `actor`'s report (`None`: the coordinator's own) in the
    /// same transaction; the after-commit hooks run as for any decision.
    #[allow(clippy::too_many_arguments, reason = "the parts of one report, each used once")]
    pub(crate) async fn apply_report(
        &self,
        claim: &Claim,
        owner: &str,
        actor: Option<&str>,
        detail: &str,
        event: &Event,
        wf: &Workflow,
        note: &Note,
    ) -> Result<(), EngineError> {
        let run_id = match claim {
            Claim::Work(w) => w.run_id.as_str(),
            Claim::Timer(t) => t.run_id.as_str(),
        };
        let (started, now) = (std::time::Instant::now(), self.now());
        let trace = self.traces.run(run_id, note.trace_parent.as_deref());
        let span = self.decision_span(&trace, event);
        let mut told = None;
        let decide = |snapshot: &[u8]| {
            let (decision, admitted_at) = self.decide_on(wf, run_id, snapshot, event, now)?;
            told = Some(Told::of(event, &decision.actions, now, admitted_at));
            Ok::<_, EngineError>(decision)
        };
        let applied = self.store.apply_reported(claim, owner, now, actor, detail, decide).await;
        let result = applied.map(|_| ()).map_err(EngineError::from_store);
        self.record(After {
            wf,
            run_id,
            event,
            result: &result,
            told,
            elapsed: started.elapsed(),
            reason: note.reason.as_deref(),
            trace,
            span,
        });
        result
    }
}
