//! The restore fence's store side (`Store::arm_fence`, `check_fence`,
//! `accept_database`, `place_fence_hold`, `attempt_known`): what a process
//! remembers trips only on what the database forgot, a release's acceptance
//! tells every process to start over, a tripped fence refuses claims, and a
//! report's claim is judged against the outbox row. (Restoring a real
//! backup and promoting a standby are the service's drills, tests/it/fence.rs.)

use coordinator_store::{ClaimLimits, Store, StoreError, WorkItem, WorkScope};

use super::support::{T0, TestDb, admit, deciding, raw, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

async fn claim_round(store: &Store) -> Result<(), StoreError> {
    let limits = ClaimLimits { timers: 10, work: 10 };
    store.claim_due(WorkScope::All, T0, "w", LEASE_MS, limits).await.map(|_| ())
}

pub(crate) async fn the_fence_trips_only_on_what_the_database_forgot(db: &TestDb) {
    db.trip_fence("not armed".into());
    assert_eq!(db.fence_tripped(), None, "an unarmed process never trips");
    assert_eq!(ok(db.arm_fence(T0).await, "arm"), None, "the first start records the database");
    ok(db.check_fence(T0 + 1).await, "read");
    assert_eq!(db.fence_tripped(), None, "a database that moved on is fine");
    let other = ok(Store::connect(&db.url).await, "another process");
    assert_eq!(ok(other.arm_fence(T0 + 2).await, "arm the other"), None, "the same database at a later start");

    // An operator's release elsewhere (generation 1) tells this process to start over: no trip.
    ok(other.accept_database(T0 + 3).await, "accept");
    ok(db.check_fence(T0 + 4).await, "read after the acceptance");
    assert_eq!(db.fence_tripped(), None);

    // The database as it was before that release (a restore): both trip, and claims are refused.
    raw(db, "UPDATE fence SET generation = 0").await;
    ok(db.check_fence(T0 + 5).await, "read the restored");
    let evidence = db.fence_tripped().unwrap_or_default();
    assert!(evidence.contains("generation went back from 1 to 0"), "{evidence}");
    assert!(matches!(claim_round(db).await, Err(StoreError::Fenced(e)) if e == evidence), "claims are refused");
    ok(db.check_fence(T0 + 6).await, "read again");
    assert_eq!(db.fence_tripped(), Some(evidence), "the fence holds until a release");

    // The release accepts the database as it is: claims go on.
    ok(db.accept_database(T0 + 7).await, "accept the restored");
    assert_eq!(db.fence_tripped(), None);
    ok(claim_round(db).await, "claims after the release");

    if db.is_postgres() {
        // The recorded identity is not the server's (as after a promotion): a fresh start names the difference.
        raw(db, "UPDATE fence SET timeline = timeline + 7").await;
        let fresh = ok(Store::connect(&db.url).await, "a fresh process");
        let evidence = ok(fresh.arm_fence(T0 + 8).await, "arm").unwrap_or_default();
        assert!(
            evidence.contains("is not the one the deployment recorded") && evidence.contains("timeline"),
            "{evidence}"
        );
    } else {
        // A copy of the file from before (its epoch behind what this process read).
        raw(db, "UPDATE fence SET epoch = 0").await;
        ok(db.check_fence(T0 + 8).await, "read the copy");
        let evidence = db.fence_tripped().unwrap_or_default();
        assert!(evidence.contains("commit epoch went back"), "{evidence}");
    }
}

pub(crate) async fn the_fence_places_the_hold_with_its_evidence(db: &TestDb) {
    assert!(ok(db.place_fence_hold(T0, "the timeline changed from 1 to 2").await, "place"));
    let hold = ok(db.hold().await, "hold").unwrap_or_else(|| panic!("no hold"));
    assert_eq!(
        (hold.placed_by.as_str(), hold.reason.as_deref()),
        ("coordinator", Some("the timeline changed from 1 to 2"))
    );
    assert!(!ok(db.place_fence_hold(T0 + 1, "again").await, "kept"), "a placed hold is kept");
    ok(db.seal_audit(100).await, "seal");
    let page = ok(db.audit(None, 0, 100).await, "journal");
    let lines: Vec<(String, Option<String>)> = page.entries.iter().map(|e| (e.kind.clone(), e.actor.clone())).collect();
    let fences = page.entries.iter().filter(|e| e.kind == "fence").count();
    assert_eq!(fences, 2, "every trip is journaled: {lines:?}");
    assert!(page.entries.iter().all(|e| e.actor.is_none()), "as the coordinator's: {lines:?}");
    assert!(
        page.entries.iter().any(|e| e.kind == "fence" && e.detail.contains("the timeline changed from 1 to 2")),
        "{lines:?}"
    );
}

pub(crate) async fn a_claim_the_database_does_not_know_is_named(db: &TestDb) {
    let wf = workflow();
    let id = admit(db, &wf, &run_id(1), T0).await;
    let claimed = ok(db.claim_work(T0, "w", LEASE_MS, 1).await, "claim");
    let mine = claimed.first().cloned().unwrap_or_else(|| panic!("nothing claimed"));
    assert!(ok(db.attempt_known(&mine).await, "known"), "the claim committed");
    let cases = [
        (WorkItem { attempt: mine.attempt + 1, ..mine.clone() }, "a later attempt"),
        (WorkItem { claims: mine.claims + 1, ..mine.clone() }, "a claim the row does not count"),
        (WorkItem { run_id: run_id(9), ..mine.clone() }, "a run the database does not hold"),
    ];
    for (item, what) in cases {
        assert!(!ok(db.attempt_known(&item).await, what), "{what} is unknown");
    }
    let event = accepted_read();
    let claim = coordinator_store::Claim::Work(mine.clone());
    ok(db.apply_fenced(&claim, "w", T0 + 1, deciding(&wf, &event, T0 + 1)).await, "report");
    assert!(ok(db.attempt_known(&mine).await, "done"), "a row gone means the run moved on ({id})");
}
