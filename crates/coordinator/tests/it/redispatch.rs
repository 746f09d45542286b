//! Safe re-dispatch after a lost lease (docs/reference/runs.md#effects,
//! docs/internals/engine.md#leases-and-fencing): a worker that claimed a
//! mutation's attempt and died may have sent it, so the worker that takes the
//! row over after the lease ran out does not send it again. It reports the
//! effect uncertain and the run waits in `attention` for an operator.

use std::time::{Duration, Instant};

use coordinator_sim::{EffectCount, FaultKind, FaultRequest};
use coordinator_store::WorkKind;

use crate::support::{GUARD, admit, on_runtime, settled, start};

/// The lease of the dead worker's claim: short, so the real worker takes over soon.
const DEAD_LEASE_MS: i64 = 500;
/// The mutation whose attempt the dead worker holds.
const REVIEW: &str = "submit-review-request/v1";

fn review_requests(effects: &[EffectCount]) -> Vec<EffectCount> {
    effects.iter().filter(|e| e.operation == REVIEW).cloned().collect()
}

#[test]
fn a_mutation_claimed_by_a_dead_worker_is_reported_uncertain_not_resent() {
    on_runtime(async {
        let dev = start().await;
        // The review request's first attempt is "not done" (503): attempt 2 waits out its backoff,
        // which leaves time for the dead worker to claim it before the real one does.
        let fault = FaultRequest {
            operation: Some(REVIEW.into()),
            fault: FaultKind::Unavailable,
            code: None,
            count: Some(1),
            delay_seconds: None,
            status: None,
            retry_after_seconds: None,
        };
        assert!(dev.sims.casework.control(&fault).is_ok(), "fault injected");
        let run = admit(&dev.url(), &dev.revision, "redispatch-1").await;
        let store = dev.engine.store();

        let started = Instant::now();
        let not_before = loop {
            let work = store.work_of(&run).await.unwrap_or_else(|e| panic!("work: {e}"));
            let second = work.outbox.iter().find(|o| o.0 == "request-review" && o.1 == WorkKind::Attempt && o.2 == 2);
            if let Some(row) = second {
                break row.3;
            }
            assert!(started.elapsed() < GUARD, "attempt 2 was never queued: {work:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };

        // A worker claims attempt 2 (as of its due time) and dies without reporting.
        let dead = store.claim_work(not_before, "dead-worker", DEAD_LEASE_MS, 10).await;
        let dead = dead.unwrap_or_else(|e| panic!("dead claim: {e}"));
        let claimed: Vec<_> = dead.iter().map(|w| (w.step.as_str(), w.kind, w.attempt, w.reclaimed)).collect();
        assert_eq!(claimed, vec![("request-review", WorkKind::Attempt, 2, false)], "the dead worker holds attempt 2");
        let before = review_requests(&dev.sims.casework.effects());
        assert_eq!(before.len(), 1, "one idempotency key: {before:?}");

        // The real worker takes the row over once the dead lease ran out.
        let view = settled(&dev.url(), &run).await;
        assert_eq!(view["state"], "attention", "{view}");
        assert_eq!(
            review_requests(&dev.sims.casework.effects()),
            before,
            "no second request reached the product for the key"
        );
        let audit = store.work_of(&run).await.unwrap_or_else(|e| panic!("work: {e}")).audit;
        assert!(
            audit.iter().any(|a| a.1.as_deref() == Some("request-review") && a.2 == "attempt 2: effect unknown"),
            "the effect is unknown: {audit:?}"
        );
    });
}
