//! Eager leases of a limited connection's rows: a batch of reports leases
//! the rows its decisions queue on a limited connection at once — on
//! PostgreSQL, as far as the connection's pace grants in the batch's own
//! transaction beyond `CLAIM_ROOM` permits and tokens left for the claims
//! (its concurrency counted over every process, its bucket's tokens spent),
//! so rows due before them keep their turn; never waiting for the
//! connection's lock. SQLite leases none of them (a claim takes them).

use coordinator_core::pace::Limits;
use coordinator_store::{
    Batched, CLAIM_ROOM, Claim, ClaimLimits, ClaimedRun, Decision, EagerLease, Guarded, Store, StoreError, WorkItem,
    WorkScope, workflow_lane,
};
use sqlx::{Connection, PgConnection};

use super::connections::{FLAGSHIP, READ, admit_to};
use super::support::{
    T0, TestDb, admit, deciding, first, new_run, put_flagship_package, raw, raw_count, run_id, workflow,
};
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

pub(crate) async fn a_batch_leases_a_limited_connections_rows_beyond_the_claims_room(db: &TestDb) {
    // Room for the claims and two more.
    let (claims, other) = claimed(db, 1, 3, Limits { concurrency: Some(CLAIM_ROOM + 2), ..Limits::default() }).await;
    let at = T0 + 10;
    let batched = report(db, &claims, at).await;
    if db.is_postgres() {
        assert_eq!(batched.leased.len(), 2, "two beyond the claims' room: {:?}", ids(&batched.leased));
        assert_eq!(in_flight(db, at).await, 2);
    } else {
        assert!(batched.leased.is_empty(), "SQLite leases no lane's rows at commit: {:?}", ids(&batched.leased));
    }
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(10)).await, "another process");
    assert_eq!(batched.leased.len() + due.work.len(), 3, "the rest is claimed: {:?}", ids(&due.work));
    assert_eq!(in_flight(db, at).await, 3);
}

pub(crate) async fn a_batch_near_the_limit_leaves_every_permit_to_the_claims(db: &TestDb) {
    let wf = workflow();
    // Run 9's first step waits on breg (due at T0 + 9, before the batch's rows).
    let waiting = admit_to(db, &wf, 9, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    let (claims, other) = claimed(db, 1, 2, Limits { concurrency: Some(CLAIM_ROOM), ..Limits::default() }).await;
    let at = T0 + 10;
    let batched = report(db, &claims, at).await;
    assert!(batched.leased.is_empty(), "any more would leave the claims less than their room");
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(1)).await, "claim");
    assert_eq!(ids(&due.work), vec![waiting.as_str()], "the earlier row first");
}

pub(crate) async fn a_batch_counts_the_permits_of_every_process(db: &TestDb) {
    let wf = workflow();
    // Another process holds 30 permits of 34 (its claims of breg's rows).
    for n in 101..=130 {
        admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    }
    let (claims, other) = claimed(db, 1, 3, Limits { concurrency: Some(CLAIM_ROOM + 2), ..Limits::default() }).await;
    let at = T0 + 200;
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(30)).await, "claim");
    assert_eq!(due.work.len(), 30);
    let batched = report(db, &claims, at).await;
    assert!(batched.leased.is_empty(), "4 permits left, fewer than the claims' room: {:?}", ids(&batched.leased));
    assert_eq!(in_flight(db, at).await, 30);
}

pub(crate) async fn a_batch_spends_the_connections_tokens(db: &TestDb) {
    let rate = Limits { rate_per_second: Some(1.0), burst: Some(CLAIM_ROOM + 2), ..Limits::default() };
    let (claims, other) = claimed(db, 1, 3, rate).await;
    let at = T0 + 10;
    let batched = report(db, &claims, at).await;
    if db.is_postgres() {
        assert_eq!(batched.leased.len(), 2, "{:?}", ids(&batched.leased));
    }
    // What is left of the burst is the claims' room: the third row, and nothing more.
    let due = ok(other.claim_due(WorkScope::All, at, "w2", LEASE_MS, all(10)).await, "another process");
    assert_eq!(batched.leased.len() + due.work.len(), 3, "{:?}", ids(&due.work));
    let tokens = raw_count(db, "SELECT tokens / 1000000 FROM connections WHERE name = 'breg'").await;
    assert_eq!(tokens, i64::from(CLAIM_ROOM + 2) - 3, "three tokens spent, leased or claimed");
}

/// PostgreSQL: a batch never waits for a connection row another
/// transaction holds (a claim taking permits); it leases none of its rows.
pub(crate) async fn a_batch_does_not_wait_for_a_locked_connection(db: &TestDb) {
    if !db.is_postgres() {
        return;
    }
    let (claims, _other) = claimed(db, 1, 2, Limits { concurrency: Some(100), ..Limits::default() }).await;
    raw(db, "INSERT INTO connections (name) VALUES ('breg') ON CONFLICT (name) DO NOTHING").await;
    let mut holder = PgConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let mut tx = holder.begin().await.unwrap_or_else(|e| panic!("begin: {e}"));
    sqlx::raw_sql("SELECT 1 FROM connections WHERE name = 'breg' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    let batched = report(db, &claims, T0 + 10).await;
    assert!(batched.leased.is_empty(), "{:?}", ids(&batched.leased));
    tx.rollback().await.unwrap_or_else(|e| panic!("rollback: {e}"));
    // Unlocked, the same leases at once.
    let (more, _) = claimed(db, 3, 2, Limits { concurrency: Some(100), ..Limits::default() }).await;
    let batched = report(db, &more, T0 + 20).await;
    assert_eq!(batched.leased.len(), 2, "{:?}", ids(&batched.leased));
}

/// `Store::admit_guarded_leasing`: on PostgreSQL an admission leases its
/// first step on a limited connection as a batch does (in a transaction
/// holding the connection's row), beyond the claims' room; SQLite leases
/// nothing at admission.
pub(crate) async fn an_admission_leases_a_limited_first_step_beyond_the_claims_room(db: &TestDb) {
    let wf = workflow();
    put_flagship_package(db, &wf).await;
    ok(db.activate(FLAGSHIP, &wf.revision, T0, None).await, "activate");
    db.set_limits(
        std::iter::once(("breg".to_owned(), Limits { concurrency: Some(CLAIM_ROOM + 1), ..Limits::default() }))
            .collect(),
    );
    let mut leased = Vec::new();
    for n in 1..=2 {
        let new = new_run(&wf, &run_id(n), "alice", None, T0 + i64::from(n));
        let decision = Decision {
            connections: vec![(READ.to_owned(), "breg".to_owned())],
            lanes: vec![(READ.to_owned(), workflow_lane("breg", FLAGSHIP))],
            ..first(&wf, &new)
        };
        let lease = EagerLease { scope: WorkScope::All, until: T0 + LEASE_MS, rows: 10 };
        let admitted = db.admit_guarded_leasing(&new, Some(("w1", lease)), || Ok::<_, StoreError>(decision)).await;
        let (guarded, rows) = ok(admitted, "admit");
        assert!(matches!(guarded, Guarded::Created));
        leased.push(rows.len());
    }
    let expected = if db.is_postgres() { vec![1, 0] } else { vec![0, 0] };
    assert_eq!(leased, expected, "one permit beyond the claims' room, then none");
    let due = ok(db.claim_due(WorkScope::All, T0 + 10, "w2", LEASE_MS, all(10)).await, "claim");
    assert_eq!(leased.iter().sum::<usize>() + due.work.len(), 2, "the rest is claimed: {:?}", ids(&due.work));
}
