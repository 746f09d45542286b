//! Eager dispatch (`Store::apply_fenced_batch_leasing`): the work a batch
//! queues for at once is leased to the committing worker in the batch's
//! transaction — with its run as committed, counted as one claim, fenced as
//! a claim is — and only what a claim at that instant would take.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::time::Instant;
use coordinator_store::{
    Claim, ClaimLimits, ClaimedRun, Decision, EagerLease, Guarded, Store, StoreError, WorkItem, WorkKind, WorkScope,
};

use super::columns::{not_reviewable, review_answer};
use super::support::{
    T0, TestDb, admit, deciding, decode, first, new_run, put_flagship_package, run_id, with_actions, workflow,
};
use super::{LEASE_MS, accepted_read, ok};

/// Admits `n` runs and claims their first attempt (`read-application`) for `w1`.
async fn claimed_runs(store: &Store, n: u32) -> (Vec<String>, Vec<Claim>) {
    let wf = workflow();
    let ids: Vec<String> = (1..=n).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
    }
    let mut claimed = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    claimed.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    assert_eq!(claimed.len(), ids.len(), "{claimed:?}");
    (ids, claimed.into_iter().map(Claim::Work).collect())
}

fn lease(scope: WorkScope, at: i64) -> Option<EagerLease> {
    Some(EagerLease { scope, until: at + LEASE_MS, rows: 10 })
}

pub async fn a_batch_leases_the_work_it_queues_to_its_worker(store: &Store) {
    let wf = workflow();
    let (ids, claims) = claimed_runs(store, 3).await;
    let (event, at) = (accepted_read(), T0 + 1);
    // Run 2's decision also places a restore hold: its next attempt waits.
    let batched = ok(
        store
            .apply_fenced_batch_leasing(&claims, "w1", at, lease(WorkScope::All, at), |i, snapshot| {
                let mut decision: Decision = deciding(&wf, &event, at)(snapshot)?;
                decision.held = i == 1;
                Ok::<_, String>(decision)
            })
            .await,
        "batch",
    );
    assert!(batched.results.iter().all(|r| matches!(r, Ok(2))), "{:?}", batched.results);
    let leased_runs: Vec<&str> = batched.leased.iter().map(|(item, _)| item.run_id.as_str()).collect();
    assert_eq!(leased_runs, vec![ids[0].as_str(), ids[2].as_str()], "the held run's attempt is not leased");
    for (item, run) in &batched.leased {
        let expected = WorkItem {
            run_id: item.run_id.clone(),
            step: "request-review".into(),
            kind: WorkKind::Attempt,
            attempt: 1,
            reclaimed: false,
            claims: 1,
        };
        assert_eq!(item, &expected);
        let row = ok(store.load(&item.run_id).await, "load").unwrap_or_else(|| panic!("run {}", item.run_id));
        let committed =
            ClaimedRun { revision: wf.revision.clone(), snapshot: row.snapshot, trace_parent: None, due_at: at };
        assert_eq!(run, &committed, "the run as its batch committed it");
    }

    // Another claimer finds nothing to take: the leased rows are leased, the held run's waits.
    let limits = ClaimLimits { timers: 0, work: 10 };
    let other = ok(store.claim_due(WorkScope::All, at, "w2", LEASE_MS, limits).await, "other claimer");
    assert!(other.work.is_empty(), "{:?}", other.work);
    assert_eq!(other.next, Some(at + LEASE_MS + 1), "the leases' end is when work is next due");

    // The leased work reports under its lease, as a claim's does.
    let (item, _) = &batched.leased[0];
    let answered = review_answer(1, not_reviewable());
    let applied = store.apply_fenced(&Claim::Work(item.clone()), "w1", at + 2, deciding(&wf, &answered, at + 2)).await;
    assert!(matches!(applied, Ok(3)), "{applied:?}");
    let stranger = Claim::Work(batched.leased[1].0.clone());
    let refused = store.apply_fenced(&stranger, "w2", at + 2, deciding(&wf, &answered, at + 2)).await;
    assert!(refused.is_err(), "a lease is its owner's: {refused:?}");
}

pub async fn a_batch_leases_only_what_its_scope_and_lease_allow(store: &Store) {
    let wf = workflow();
    let (_, claims) = claimed_runs(store, 2).await;
    let (event, at) = (accepted_read(), T0 + 1);
    // Run 1 with a recovery-only lease (receipts only), run 2 with none: both queue an attempt.
    let recovery = ok(
        store
            .apply_fenced_batch_leasing(&claims[..1], "w1", at, lease(WorkScope::ReceiptsOnly, at), |_, snapshot| {
                deciding(&wf, &event, at)(snapshot)
            })
            .await,
        "recovery-only batch",
    );
    let plain = ok(
        store
            .apply_fenced_batch_leasing(&claims[1..], "w1", at, None, |_, snapshot| deciding(&wf, &event, at)(snapshot))
            .await,
        "batch without a lease",
    );
    assert!(recovery.leased.is_empty() && plain.leased.is_empty(), "{:?} {:?}", recovery.leased, plain.leased);
    let claimed = ok(store.claim_work(at, "w2", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.len(), 2, "both attempts wait for a claim: {claimed:?}");
    assert!(claimed.iter().all(|w| w.claims == 1 && !w.reclaimed), "{claimed:?}");
}

pub async fn a_batch_leases_no_more_rows_than_the_worker_has_room_for(store: &Store) {
    let wf = workflow();
    let (ids, claims) = claimed_runs(store, 3).await;
    let (event, at) = (accepted_read(), T0 + 1);
    let room = lease(WorkScope::All, at).map(|l| EagerLease { rows: 2, ..l });
    let batched = ok(
        store.apply_fenced_batch_leasing(&claims, "w1", at, room, |_, s| deciding(&wf, &event, at)(s)).await,
        "batch",
    );
    assert!(batched.results.iter().all(|r| matches!(r, Ok(2))), "{:?}", batched.results);
    let leased: Vec<&str> = batched.leased.iter().map(|(item, _)| item.run_id.as_str()).collect();
    assert_eq!(leased.len(), 2, "room for two: {leased:?}");
    // What there was no room for is queued for a claim, as without a lease.
    let claimed = ok(store.claim_work(at, "w2", LEASE_MS, 10).await, "claim");
    let left: Vec<&str> = claimed.iter().map(|w| w.run_id.as_str()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(ids.iter().all(|id| leased.contains(&id.as_str()) != left.contains(&id.as_str())), "{leased:?} {left:?}");
    assert!(claimed.iter().all(|w| w.claims == 1 && !w.reclaimed), "{claimed:?}");
}

pub async fn a_receipt_lookup_is_leased_in_recovery_too(store: &Store) {
    let (ids, claims) = claimed_runs(store, 1).await;
    let at = T0 + 1;
    // A decision queueing an attempt and a receipt lookup, both due now.
    let queue_both = |snapshot: &[u8]| {
        let actions = vec![
            Action::Dispatch { step: "request-review".into(), attempt: 1, not_before: Instant(at) },
            Action::RequestReceipt { step: "send-notice".into() },
        ];
        Ok::<_, String>(with_actions(&decode(snapshot)?, actions))
    };
    let batched = ok(
        store
            .apply_fenced_batch_leasing(&claims, "w1", at, lease(WorkScope::ReceiptsOnly, at), |_, s| queue_both(s))
            .await,
        "batch",
    );
    let leased: Vec<(&str, &str, WorkKind)> =
        batched.leased.iter().map(|(w, _)| (w.run_id.as_str(), w.step.as_str(), w.kind)).collect();
    assert_eq!(
        leased,
        vec![(ids[0].as_str(), "send-notice", WorkKind::Receipt)],
        "the lookup only reads: recovery takes it"
    );
    let claimed = ok(store.claim_work(at, "w2", LEASE_MS, 10).await, "claim");
    let steps: Vec<&str> = claimed.iter().map(|w| w.step.as_str()).collect();
    assert_eq!(steps, vec!["request-review"], "the attempt waits for a claim");
}

/// `Store::admit_guarded_leasing`: on PostgreSQL the one-statement admission
/// inserts its first step leased to the admitting worker (at most the
/// lease's rows) and hands it back with the run; SQLite leases nothing at
/// admission (a claim takes the step).
pub(crate) async fn an_admission_leases_its_first_step_to_its_worker(db: &TestDb) {
    let store: &Store = db;
    let wf = workflow();
    put_flagship_package(store, &wf).await;
    ok(store.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    let admit_leasing = |n: u32, rows: usize| {
        let new = new_run(&wf, &run_id(n), "alice", None, T0);
        let lease = EagerLease { scope: WorkScope::All, until: T0 + LEASE_MS, rows };
        async move {
            let decided = first(&workflow(), &new);
            let outcome = store.admit_guarded_leasing(&new, Some(("w1", lease)), || Ok::<_, StoreError>(decided)).await;
            (new, ok(outcome, "admit"))
        }
    };
    let (new, (guarded, leased)) = admit_leasing(1, 1).await;
    if !db.is_postgres() {
        assert!(matches!(guarded, Guarded::Created) && leased.is_empty(), "SQLite leases nothing at admission");
        let claimed = ok(store.claim_work(T0, "w2", LEASE_MS, 10).await, "claim");
        assert_eq!(claimed.iter().map(|w| w.run_id.as_str()).collect::<Vec<_>>(), vec![new.id.as_str()]);
        return;
    }
    assert!(matches!(guarded, Guarded::Created));
    let expected = WorkItem {
        run_id: new.id.clone(),
        step: "read-application".into(),
        kind: WorkKind::Attempt,
        attempt: 1,
        reclaimed: false,
        claims: 1,
    };
    let row = ok(store.load(&new.id).await, "load").unwrap_or_else(|| panic!("run {}", new.id));
    let committed =
        ClaimedRun { revision: wf.revision.clone(), snapshot: row.snapshot, trace_parent: None, due_at: T0 };
    assert_eq!(leased, vec![(expected.clone(), committed)], "the first step, with the run as committed");
    // Nobody else can claim it; it reports under its lease as a claim's does.
    let other = ok(store.claim_work(T0, "w2", LEASE_MS, 10).await, "other claimer");
    assert!(other.is_empty(), "{other:?}");
    let applied =
        store.apply_fenced(&Claim::Work(expected), "w1", T0 + 1, deciding(&wf, &accepted_read(), T0 + 1)).await;
    assert!(matches!(applied, Ok(2)), "{applied:?}");

    // No room: the first step is queued for a claim.
    let (unleased, (guarded, leased)) = admit_leasing(2, 0).await;
    assert!(matches!(guarded, Guarded::Created) && leased.is_empty(), "{leased:?}");
    let claimed = ok(store.claim_work(T0, "w2", LEASE_MS, 10).await, "claim");
    let claimed: Vec<(&str, i64)> = claimed.iter().map(|w| (w.run_id.as_str(), w.claims)).collect();
    assert_eq!(claimed, vec![(unleased.id.as_str(), 1)]);
}
