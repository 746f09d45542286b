//! Claim counting, which makes re-dispatch after a lost lease safe: a claim
//! whose lease ran out without a report or a release leaves the row
//! `reclaimed` for every later claim, until the row is queued again (a new
//! attempt) or finished. A released claim did not act and does not count.

use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_store::{Claim, RunMeta, Store, WorkItem, WorkKind, WorkScope};

use super::support::{T0, TestDb, admit, deciding, raw, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// The read's outbox row as its `claims`-th claim returns it.
fn read_attempt(run_id: &str, attempt: i64, claims: i64) -> WorkItem {
    let step = "read-application".into();
    WorkItem { run_id: run_id.to_owned(), step, kind: WorkKind::Attempt, attempt, reclaimed: claims > 1, claims }
}

pub(crate) async fn a_claim_after_a_lost_lease_is_reclaimed(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let first = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    assert_eq!(first, vec![read_attempt(&id, 1, 1)], "a first claim is not reclaimed");
    // w1 never reports: its lease runs out and w2 takes the row over.
    let second = ok(store.claim_work(T0 + LEASE_MS + 1, "w2", LEASE_MS, 10).await, "take over");
    assert_eq!(second, vec![read_attempt(&id, 1, 2)]);
    // So does every later claim while the row is neither queued again nor finished.
    let third = ok(store.claim_work(T0 + 2 * LEASE_MS + 2, "w3", LEASE_MS, 10).await, "again");
    assert_eq!(third, vec![read_attempt(&id, 1, 3)]);
    // The flag is not part of the fence: the current owner still applies its report.
    let event = accepted_read();
    let now = T0 + 2 * LEASE_MS + 3;
    ok(store.apply_fenced(&Claim::Work(third[0].clone()), "w3", now, deciding(&wf, &event, now)).await, "report");
    let next = ok(store.claim_work(now, "w4", LEASE_MS, 10).await, "next step");
    assert_eq!(
        next.iter().map(|w| (w.step.as_str(), w.reclaimed)).collect::<Vec<_>>(),
        vec![("request-review", false)]
    );
}

pub(crate) async fn a_released_claim_does_not_count(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let first = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    assert!(ok(store.release(&Claim::Work(first[0].clone()), "w1").await, "release"));
    let after_release = ok(store.claim_work(T0 + 1, "w2", LEASE_MS, 10).await, "claim again");
    assert_eq!(after_release, vec![read_attempt(&id, 1, 1)], "a released claim did not act");

    // w2's claim runs out; w3 takes over (reclaimed) and releases: w2's lost claim still counts.
    let taken = ok(store.claim_work(T0 + LEASE_MS + 2, "w3", LEASE_MS, 10).await, "take over");
    assert_eq!(taken, vec![read_attempt(&id, 1, 2)]);
    assert!(!ok(store.release(&Claim::Work(taken[0].clone()), "w2").await, "not w2's any more"));
    assert!(ok(store.release(&Claim::Work(taken[0].clone()), "w3").await, "release"));
    let after = ok(store.claim_work(T0 + LEASE_MS + 3, "w4", LEASE_MS, 10).await, "claim after release");
    assert_eq!(after, vec![read_attempt(&id, 1, 2)], "the lost claim is not undone by another's release");
}

pub(crate) async fn a_new_attempt_resets_the_claim_count(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    let now = T0 + LEASE_MS + 1;
    let taken = ok(store.claim_work(now, "w2", LEASE_MS, 10).await, "take over");
    assert_eq!(taken, vec![read_attempt(&id, 1, 2)]);
    // A read is simply done again; a definite "not done" queues attempt 2 on the same row.
    let retry = Event::CallAnswered {
        step: "read-application".into(),
        attempt: 1,
        answer: CallAnswer::Retryable { retry_after_seconds: None },
    };
    ok(store.apply_fenced(&Claim::Work(taken[0].clone()), "w2", now, deciding(&wf, &retry, now)).await, "retry");
    let due = now + 1_000; // reviewed-notice's read retries after 1 s
    let attempt2 = ok(store.claim_work(due, "w3", LEASE_MS, 10).await, "attempt 2");
    assert_eq!(attempt2, vec![read_attempt(&id, 2, 1)], "queueing the row reset its claims");
}

/// A database migrated before claims were counted: a row leased at the upgrade
/// was claimed at least once, so the next claim of it is `reclaimed`.
pub(crate) async fn an_upgrade_counts_claims_taken_before_it(db: &TestDb) {
    let id = run_id(1);
    raw(
        db,
        &format!(
            "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
             admitted_at, updated_at, version, snapshot) \
             VALUES ('{id}', 'w', 'r', 'alice', NULL, 'd', 'running', FALSE, {T0}, {T0}, 1, ''); \
             INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until) \
             VALUES ('{id}', 'a', 'attempt', 1, {T0}, 'old-process', {leased}); \
             INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until) \
             VALUES ('{id}', 'b', 'attempt', 1, {T0}, NULL, NULL);",
            leased = T0 + 5,
        ),
    )
    .await;
    ok(db.migrate().await, "upgrade");
    ok(db.migrate().await, "upgrade again");
    let claimed = ok(db.claim_work_with_runs(WorkScope::All, T0 + 10, "new", LEASE_MS, 10).await, "claim");
    let flags: Vec<_> =
        claimed.iter().map(|(w, run)| (w.step.as_str(), w.reclaimed, run.trace_parent.clone())).collect();
    assert_eq!(flags, vec![("a", true, None), ("b", false, None)], "runs from before 0010 have no trace parent");
    let row = ok(db.load(&id).await, "load");
    assert!(row.is_some_and(|r| r.trace_parent.is_none()), "the run survives the upgrade, with no trace parent");
    let meta = ok(db.run_meta(&id).await, "run meta");
    assert_eq!(meta, Some(RunMeta { revision: "r".into(), trace_parent: None }));
    assert_eq!(ok(db.waiting_on("any").await, "waits"), vec![], "the wait index exists");
}
