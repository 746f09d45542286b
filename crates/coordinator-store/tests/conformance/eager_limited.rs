//! Eager leases of a limited connection's rows: a batch of reports (or an
//! admission) leases the rows its decisions queue on a limited connection
//! at once — on PostgreSQL, as far as its process's allowance of the
//! connection grants: taken by the process's claim rounds under the
//! connection's lock while the limit leaves more than `CLAIM_ROOM` free,
//! counted as in flight by every other process, lapsing after
//! `ALLOWANCE_MS`; with a rate, tokens taken out of the bucket with it.
//! SQLite leases none of them (a claim takes them).

use coordinator_core::pace::Limits;
use coordinator_store::{
    ALLOWANCE_MS, Batched, CLAIM_ROOM, Claim, ClaimLimits, ClaimedRun, Decision, EagerLease, Guarded, Store,
    StoreError, WorkItem, WorkScope, workflow_lane,
};

use super::connections::{FLAGSHIP, READ, admit_to};
use super::support::{T0, TestDb, admit, deciding, first, new_run, put_flagship_package, raw_count, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// The step each batch's decision queues next, on `breg`.
const REVIEW: &str = "request-review";

/// Admits runs `first..first + n` (their first step on no connection),
/// claims that step for `w1`, and puts `breg` under `limits` in this
/// process and in a second one (returned).
async fn claimed(db: &TestDb, first: u32, n: u32, limits: Limits) -> (Vec<Claim>, Store) {
    let wf = workflow();
    for k in first..first + n {
        admit(db, &wf, &run_id(k), T0).await;
    }
    let claimed = ok(db.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.len(), n as usize, "{claimed:?}");
    let other = ok(Store::connect(&db.url).await, "second handle");
    for store in [&db.store, &other] {
        store.set_limits(std::iter::once(("breg".to_owned(), limits)).collect());
    }
    (claimed.into_iter().map(Claim::Work).collect(), other)
}

/// Reports `claims` at `at`, each decision queueing `request-review` on
/// `breg` in the flagship's lane, under a lease with room for ten rows.
async fn report(db: &TestDb, claims: &[Claim], at: i64) -> Batched {
    let wf = workflow();
    let lease = Some(EagerLease { scope: WorkScope::All, until: at + LEASE_MS, rows: 10 });
    let event = accepted_read();
    let batched = db
        .apply_fenced_batch_leasing(claims, "w1", at, lease, |_, snapshot| {
            let decision = deciding(&wf, &event, at)(snapshot)?;
            Ok::<_, String>(Decision {
                connections: vec![(REVIEW.to_owned(), "breg".to_owned())],
                lanes: vec![(REVIEW.to_owned(), workflow_lane("breg", FLAGSHIP))],
                ..decision
            })
        })
        .await;
    let batched = ok(batched, "batch");
    assert!(batched.results.iter().all(|r| matches!(r, Ok(2))), "{:?}", batched.results);
    assert!(
        batched.leased.iter().all(|(item, _)| item.step == REVIEW && item.claims == 1),
        "{:?}",
        ids(&batched.leased)
    );
    batched
}

/// The runs of `work`, to say what was taken.
fn ids(work: &[(WorkItem, ClaimedRun)]) -> Vec<&str> {
    work.iter().map(|(item, _)| item.run_id.as_str()).collect()
}

/// How many of `breg`'s rows are leased at `now`.
async fn in_flight(db: &TestDb, now: i64) -> i64 {
    raw_count(db, &format!("SELECT count(*) FROM outbox WHERE lane LIKE 'breg/%' AND lease_until >= {now}")).await
}

fn all(n: u32) -> ClaimLimits {
    ClaimLimits { timers: 0, work: n }
}

/// Queues the first step of runs `numbers` on `breg`, in the flagship's lane.
async fn waiting(db: &TestDb, numbers: std::ops::RangeInclusive<u32>) -> Vec<String> {
    let wf = workflow();
    let mut runs = Vec::new();
    for n in numbers {
        runs.push(admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await);
    }
    runs
}

/// A claim round of `w1` at `at` taking `n` of breg's rows: it takes `w1`'s allowance too.
async fn claim_round(db: &TestDb, at: i64, n: u32) -> usize {
    ok(db.claim_due(WorkScope::All, at, "w1", LEASE_MS, all(n)).await, "claim round").work.len()
}

pub(crate) async fn a_batch_spends_its_processs_allowance(db: &TestDb) {
    waiting(db, 9..=9).await;
    let (claims, other) = claimed(db, 1, 3, Limits { concurrency: Some(CLAIM_ROOM + 3), ..Limits::default() }).await;
    let at = T0 + 10;
    // The claim takes run 9's row and an allowance of 3 (the limit less the claims' room), one of them in use.
    assert_eq!(claim_round(db, at, 10).await, 1);
    let batched = report(db, &claims, at).await;
    let expected = if db.is_postgres() { 2 } else { 0 };
    assert_eq!(batched.leased.len(), expected, "what the allowance leaves: {:?}", ids(&batched.leased));
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(10)).await, "another process");
    assert_eq!(1 + batched.leased.len() + due.work.len(), 4, "the rest is claimed: {:?}", ids(&due.work));
}

pub(crate) async fn without_an_allowance_a_batch_leaves_its_rows_to_the_claims(db: &TestDb) {
    let (claims, other) = claimed(db, 1, 3, Limits { concurrency: Some(100), ..Limits::default() }).await;
    let at = T0 + 10;
    let batched = report(db, &claims, at).await;
    assert!(batched.leased.is_empty(), "no claim round took an allowance yet: {:?}", ids(&batched.leased));
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(10)).await, "claim");
    assert_eq!(due.work.len(), 3, "{:?}", ids(&due.work));
}

pub(crate) async fn a_batch_near_the_limit_leaves_every_permit_to_the_claims(db: &TestDb) {
    let early = waiting(db, 8..=9).await;
    let (claims, other) = claimed(db, 1, 2, Limits { concurrency: Some(CLAIM_ROOM + 1), ..Limits::default() }).await;
    let at = T0 + 10;
    // One in flight: the limit leaves no more than the claims' room, so no allowance.
    assert_eq!(claim_round(db, at, 1).await, 1);
    let batched = report(db, &claims, at).await;
    assert!(batched.leased.is_empty(), "near the limit: {:?}", ids(&batched.leased));
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(1)).await, "claim");
    assert_eq!(ids(&due.work), vec![early[1].as_str()], "the earlier row first");
}

pub(crate) async fn another_process_counts_an_allowance_as_in_flight(db: &TestDb) {
    waiting(db, 100..=150).await;
    let limit = CLAIM_ROOM + 10;
    let (_, other) = claimed(db, 1, 1, Limits { concurrency: Some(limit), ..Limits::default() }).await;
    let at = T0 + 200;
    // w1 takes one row and an allowance of 10.
    assert_eq!(claim_round(db, at, 1).await, 1);
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(100)).await, "another process");
    let expected = if db.is_postgres() { limit - 10 } else { limit - 1 };
    assert_eq!(due.work.len(), expected as usize, "w1's allowance is counted in flight");
    // Lapsed, it is removed by the next claim and counts no more (w1's leased row still does).
    let later = at + ALLOWANCE_MS + 1;
    let due = ok(other.claim_due(WorkScope::All, later, "w2", LEASE_MS, all(100)).await, "after it lapsed");
    assert_eq!(due.work.len(), (limit - 1) as usize - expected as usize, "{:?}", ids(&due.work));
    let left = raw_count(db, "SELECT count(*) FROM connection_allowances WHERE owner = 'w1'").await;
    assert_eq!(left, 0, "the lapsed allowance is removed");
    assert_eq!(in_flight(db, later).await, i64::from(limit));
}

pub(crate) async fn a_batch_spends_the_allowances_tokens(db: &TestDb) {
    waiting(db, 9..=9).await;
    // A bucket of 35: after the claim's token, 34; the allowance takes what exceeds the claims' room, 2.
    let rate = Limits { rate_per_second: Some(1.0), burst: Some(CLAIM_ROOM + 3), ..Limits::default() };
    let (claims, other) = claimed(db, 1, 3, rate).await;
    let at = T0 + 10;
    assert_eq!(claim_round(db, at, 10).await, 1);
    let batched = report(db, &claims, at).await;
    let tokens = raw_count(db, "SELECT tokens / 1000000 FROM connections WHERE name = 'breg'").await;
    if db.is_postgres() {
        assert_eq!(batched.leased.len(), 2, "two tokens taken: {:?}", ids(&batched.leased));
        assert_eq!(tokens, i64::from(CLAIM_ROOM), "the allowance's tokens left the bucket");
    } else {
        assert_eq!(tokens, i64::from(CLAIM_ROOM + 2));
    }
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(10)).await, "another process");
    assert_eq!(batched.leased.len() + due.work.len(), 3, "{:?}", ids(&due.work));
}

/// `Store::admit_guarded_leasing`: on PostgreSQL an admission leases its
/// first step on a limited connection from its process's allowance, as a
/// batch does; SQLite leases nothing at admission.
pub(crate) async fn an_admission_spends_its_processs_allowance(db: &TestDb) {
    let wf = workflow();
    put_flagship_package(db, &wf).await;
    ok(db.activate(FLAGSHIP, &wf.revision, T0, None).await, "activate");
    let limits = Limits { concurrency: Some(CLAIM_ROOM + 2), ..Limits::default() };
    db.set_limits(std::iter::once(("breg".to_owned(), limits)).collect());
    let admit_one = |n: u32| {
        let new = new_run(&wf, &run_id(n), "alice", None, T0 + i64::from(n));
        let decision = Decision {
            connections: vec![(READ.to_owned(), "breg".to_owned())],
            lanes: vec![(READ.to_owned(), workflow_lane("breg", FLAGSHIP))],
            ..first(&wf, &new)
        };
        let lease = EagerLease { scope: WorkScope::All, until: T0 + LEASE_MS, rows: 10 };
        async move {
            let admitted = db.admit_guarded_leasing(&new, Some(("w1", lease)), || Ok::<_, StoreError>(decision)).await;
            let (guarded, rows) = ok(admitted, "admit");
            assert!(matches!(guarded, Guarded::Created));
            rows.len()
        }
    };
    assert_eq!(admit_one(1).await, 0, "no allowance before a claim round");
    assert_eq!(claim_round(db, T0 + 10, 10).await, 1, "the round takes run 1's row and an allowance of 2");
    let leased = [admit_one(2).await, admit_one(3).await];
    let expected = if db.is_postgres() { [1, 0] } else { [0, 0] };
    assert_eq!(leased, expected, "one permit of the allowance free, then none");
}

pub(crate) async fn tokens_held_ahead_are_held_back_from_the_bucket(db: &TestDb) {
    waiting(db, 100..=250).await;
    // A bucket of 100 at 1 000 a second: the claim spends 1, the allowance takes 49 of the 99 left.
    let rate = Limits { rate_per_second: Some(1_000.0), burst: Some(100), ..Limits::default() };
    let (_, other) = claimed(db, 1, 1, rate).await;
    let at = T0 + 300;
    assert_eq!(claim_round(db, at, 1).await, 1);
    let held = raw_count(db, "SELECT coalesce(max(tokens), 0) FROM connection_allowances WHERE owner = 'w1'").await;
    let expected = if db.is_postgres() { 49 } else { 0 };
    assert_eq!(held, expected, "tokens held ahead are recorded with the allowance");
    // Most of a second later the bucket would be full again; it refills only to its size less what w1 holds.
    let later = at + 900;
    let due = ok(other.claim_due(WorkScope::All, later, "w2", LEASE_MS, all(200)).await, "another process");
    assert_eq!(due.work.len(), 100 - expected as usize, "the bucket and the allowance never hold more than 100");
}
