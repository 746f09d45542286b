//! An operator's pause of a connection (`Store::pause_connection`,
//! `resume_connection`, `connection_states`, `refresh_connections`): no claim,
//! offer or eager lease takes a paused connection's rows, which stay as they
//! were (due, unleased, no claim counted); when work is next due is read
//! without them; pausing and resuming are journaled once each. And the shared
//! pace (`Store::record_answer`): failures open the breaker and then only a
//! probe is claimed; a healthy answer closes it; a `Retry-After` holds the
//! connection for every run.

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::pace::{BreakerChange, BreakerSettings, Health, Limits};
use coordinator_store::{
    Admission, Claim, ClaimLimits, ConnectionState, Decision, Due, EagerLease, Guarded, PaceView, Pause, Store,
    StoreError, WorkScope, workflow_lane,
};

use super::support::{T0, TestDb, deciding, first, new_run, put_flagship_package, raw_count, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// The first step of reviewed-notice.
/// The flagship's workflow id, as its limited lanes name it.
pub(crate) const FLAGSHIP: &str = "reviewed-notice";
pub(crate) const READ: &str = "read-application";

/// Admits run `n` (at `T0 + n`), its first attempt routed to `connection`
/// and, when given, in `lane`.
pub(crate) async fn admit_to(store: &Store, wf: &Workflow, n: u32, connection: &str, lane: Option<&str>) -> String {
    let new = new_run(wf, &run_id(n), "alice", None, T0 + i64::from(n));
    let connections = vec![(READ.to_owned(), connection.to_owned())];
    let lanes = lane.map(|lane| vec![(READ.to_owned(), lane.to_owned())]).unwrap_or_default();
    match store.admit(&new, || Ok::<_, StoreError>(Decision { connections, lanes, ..first(wf, &new) })).await {
        Ok(Admission::Created(id)) => id,
        other => panic!("admission of run {n}: {other:?}"),
    }
}

pub(crate) fn work(limit: u32) -> ClaimLimits {
    ClaimLimits { timers: 0, work: limit }
}

/// How many rows of `run` are unleased with no claim counted.
async fn untouched(db: &TestDb, run: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM outbox WHERE run_id = '{run}' AND lease_owner IS NULL AND claims = 0");
    raw_count(db, &sql).await
}

pub(crate) async fn a_paused_connection_is_neither_claimed_nor_due(db: &TestDb) {
    let wf = workflow();
    let paused = admit_to(db, &wf, 1, "breg", None).await;
    let running = admit_to(db, &wf, 2, "casework", None).await;

    let (pause, placed) = ok(db.pause_connection("breg", T0 + 5, "ops", "BReg asked us to stop").await, "pause");
    let expected = Pause { by: "ops".into(), at: T0 + 5, reason: "BReg asked us to stop".into() };
    assert!(placed);
    assert_eq!(pause, expected);
    let (again, placed) = ok(db.pause_connection("breg", T0 + 6, "someone", "again").await, "pause again");
    assert!(!placed, "a paused connection keeps its pause");
    assert_eq!(again, expected);
    assert!(db.any_connection_paused());
    assert!(db.connection_held("breg", T0 + 10) && !db.connection_held("casework", T0 + 10));

    let due = ok(db.claim_due(WorkScope::All, T0 + 10, "w1", LEASE_MS, work(10)).await, "claim");
    let claimed: Vec<&str> = due.work.iter().map(|(item, _)| item.run_id.as_str()).collect();
    assert_eq!(claimed, vec![running.as_str()], "only the running connection's row is claimed");
    assert_eq!(due.next, Some(T0 + 10 + LEASE_MS + 1), "the paused row is not due: only the new lease's end is");
    assert_eq!(untouched(db, &paused).await, 1, "the paused row stays as it was");
    let receipts = ok(db.claim_due(WorkScope::ReceiptsOnly, T0 + 10, "w2", LEASE_MS, work(10)).await, "receipts");
    assert!(receipts.work.is_empty() && receipts.next.is_none(), "no receipt lookup is queued: {receipts:?}");

    let states = ok(db.connection_states().await, "states");
    let pace = PaceView::default();
    assert_eq!(
        states,
        vec![ConnectionState { name: "breg".into(), paused: Some(expected.clone()), pace: pace.clone() }]
    );

    let lifted = ok(db.resume_connection("breg", T0 + 20, "ops", "BReg is back").await, "resume");
    assert_eq!(lifted, Some(expected));
    assert!(!db.any_connection_paused() && !db.connection_held("breg", T0 + 20));
    assert_eq!(ok(db.resume_connection("breg", T0 + 21, "ops", "again").await, "resume again"), None);
    let due = ok(db.claim_due(WorkScope::All, T0 + 22, "w1", LEASE_MS, work(10)).await, "claim after");
    let claimed: Vec<&str> = due.work.iter().map(|(item, _)| item.run_id.as_str()).collect();
    assert_eq!(claimed, vec![paused.as_str()], "resumed: its row is claimed");
    assert!(due.work.iter().all(|(item, _)| !item.reclaimed && item.claims == 1), "no claim counted while paused");
    assert_eq!(
        ok(db.connection_states().await, "states"),
        vec![ConnectionState { name: "breg".into(), paused: None, pace }]
    );

    let journaled = raw_count(db, "SELECT count(*) FROM audit WHERE kind = 'connection' AND run_id IS NULL").await;
    assert_eq!(journaled, 2, "one pause and one resume: the repeated commands changed nothing");
}

pub(crate) async fn a_paused_lane_is_offered_nothing(db: &TestDb) {
    let wf = workflow();
    let laned = admit_to(db, &wf, 1, "breg", Some("breg")).await;
    let lanes = vec!["breg".to_owned()];
    ok(db.pause_connection("breg", T0 + 5, "ops", "stop").await, "pause");
    let offered = ok(db.offer(&lanes, T0 + 10, "offer:w", 5_000, 10).await, "offer");
    assert!(offered.is_empty(), "{offered:?}");
    assert_eq!(ok(db.offered_work(&lanes, T0 + 10).await, "offered work"), None, "nothing of a paused lane is due");
    assert_eq!(untouched(db, &laned).await, 1);

    ok(db.resume_connection("breg", T0 + 20, "ops", "go").await, "resume");
    assert_eq!(ok(db.offered_work(&lanes, T0 + 20).await, "offered work"), Some(T0 + 20));
    let offered = ok(db.offer(&lanes, T0 + 20, "offer:w", 5_000, 10).await, "offer");
    assert_eq!(offered.iter().map(|(item, _)| item.run_id.as_str()).collect::<Vec<_>>(), vec![laned.as_str()]);
}

pub(crate) async fn no_process_leases_eagerly_while_a_connection_is_paused(db: &TestDb) {
    let wf = workflow();
    let id = admit_to(db, &wf, 1, "breg", None).await;
    let claimed = ok(db.claim_work(T0 + 1, "w1", LEASE_MS, 10).await, "claim");
    let claims: Vec<Claim> = claimed.into_iter().map(Claim::Work).collect();
    assert_eq!(claims.len(), 1);

    // Another process pauses a connection; this one learns of it when it reads the pauses.
    let other = ok(Store::connect(&db.url).await, "second handle");
    ok(other.pause_connection("messaging", T0 + 2, "ops", "stop").await, "pause");
    assert!(other.any_connection_paused() && !db.any_connection_paused());
    ok(db.refresh_connections(T0).await, "refresh");
    assert!(db.any_connection_paused());

    let (event, at) = (accepted_read(), T0 + 3);
    let lease = Some(EagerLease { scope: WorkScope::All, until: at + LEASE_MS, rows: 10 });
    let batched =
        ok(db.apply_fenced_batch_leasing(&claims, "w1", at, lease, |_, s| deciding(&wf, &event, at)(s)).await, "batch");
    assert!(matches!(batched.results.as_slice(), [Ok(2)]), "{:?}", batched.results);
    assert!(batched.leased.is_empty(), "nothing is leased at commit while a pause is in force");
    // The queued row (of no paused connection) is claimed as any other.
    let due = ok(db.claim_due(WorkScope::All, at, "w1", LEASE_MS, work(10)).await, "claim");
    assert_eq!(due.work.iter().map(|(item, _)| item.run_id.as_str()).collect::<Vec<_>>(), vec![id.as_str()]);

    // Nor at admission (PostgreSQL's admissions lease their first step; SQLite's never do).
    put_flagship_package(db, &wf).await;
    ok(db.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    let admit_leasing = |n: u32| {
        let new = new_run(&wf, &run_id(n), "alice", None, T0 + 4);
        let lease = EagerLease { scope: WorkScope::All, until: T0 + 4 + LEASE_MS, rows: 10 };
        async move {
            let decided = first(&workflow(), &new);
            ok(db.admit_guarded_leasing(&new, Some(("w1", lease)), || Ok::<_, StoreError>(decided)).await, "admit")
        }
    };
    let (guarded, leased) = admit_leasing(2).await;
    assert!(matches!(guarded, Guarded::Created) && leased.is_empty(), "{leased:?}");

    ok(other.resume_connection("messaging", T0 + 5, "ops", "go").await, "resume");
    ok(db.refresh_connections(T0).await, "refresh");
    assert!(!db.any_connection_paused());
    let (_, leased) = admit_leasing(3).await;
    assert_eq!(leased.len(), usize::from(db.is_postgres()), "resumed: PostgreSQL leases at admission again");
}

/// Opens after two failures, probes every 10 s.
pub(crate) fn two_failures() -> BreakerSettings {
    BreakerSettings { open_after_failures: 2, probe_every_ms: 10_000 }
}

pub(crate) fn runs_of(due: &Due) -> Vec<&str> {
    due.work.iter().map(|(item, _)| item.run_id.as_str()).collect()
}

pub(crate) async fn failures_open_the_breaker_and_then_only_a_probe_is_claimed(db: &TestDb) {
    let wf = workflow();
    let down: Vec<String> = [1, 2, 3].iter().map(|&n| run_id(n)).collect();
    for n in 1..=3 {
        admit_to(db, &wf, n, "breg", None).await;
    }
    let up = admit_to(db, &wf, 4, "casework", None).await;
    let t = T0 + 100;

    let (view, change) = ok(db.record_answer("breg", Health::Failed, &two_failures(), "HTTP 503", t).await, "first");
    assert_eq!((view.breaker, view.failures, change), ("closed", 1, None));
    assert!(db.pace_unsettled("breg"), "a failure leaves the pace unsettled");
    let (view, change) =
        ok(db.record_answer("breg", Health::Failed, &two_failures(), "HTTP 503", t + 1).await, "second");
    assert_eq!((view.breaker, change), ("open", Some(BreakerChange::Opened)));
    assert_eq!((view.since, view.probe_at, view.why.as_deref()), (Some(t + 1), Some(t + 10_001), Some("HTTP 503")));
    assert!(db.any_connection_blocked(t + 2));
    assert!(db.connection_held("breg", t + 2), "work claimed before it opened is not sent");

    let due = ok(db.claim_due(WorkScope::All, t + 2, "w1", LEASE_MS, work(10)).await, "claim while open");
    assert_eq!(runs_of(&due), vec![up.as_str()], "nothing of an open breaker's connection is claimed");
    assert_eq!(due.next, Some(t + 10_001), "the probe is when work is next due: {due:?}");

    let probe = ok(db.claim_due(WorkScope::All, t + 10_001, "w1", LEASE_MS, work(10)).await, "probe");
    assert_eq!(runs_of(&probe), vec![down[0].as_str()], "one probe: the connection's next due row");
    let states = ok(db.connection_states().await, "states");
    assert_eq!(states.iter().map(|s| s.pace.breaker).collect::<Vec<_>>(), vec!["half-open"]);
    assert!(!db.connection_held("breg", t + 10_001), "the probe is sent");
    let other = ok(db.claim_due(WorkScope::All, t + 10_002, "w2", LEASE_MS, work(10)).await, "while probing");
    assert!(other.work.is_empty(), "one probe at a time: {other:?}");

    let (view, change) =
        ok(db.record_answer("breg", Health::Healthy, &two_failures(), "HTTP 200", t + 10_003).await, "ok");
    assert_eq!((view.breaker, change), ("closed", Some(BreakerChange::Closed)));
    let after = ok(db.claim_due(WorkScope::All, t + 10_004, "w2", LEASE_MS, work(10)).await, "closed");
    assert_eq!(runs_of(&after), vec![down[1].as_str(), down[2].as_str()], "closed: the rest is claimed");

    let sql = "SELECT count(*) FROM audit WHERE kind = 'connection' AND run_id IS NULL";
    assert_eq!(raw_count(db, sql).await, 2, "opening and closing are journaled");
}

pub(crate) async fn a_failed_probe_opens_the_breaker_again(db: &TestDb) {
    let wf = workflow();
    admit_to(db, &wf, 1, "breg", None).await;
    admit_to(db, &wf, 2, "breg", None).await;
    let t = T0 + 100;
    for i in 0..2 {
        ok(db.record_answer("breg", Health::Failed, &two_failures(), "no connection", t + i).await, "failure");
    }
    let probe = ok(db.claim_due(WorkScope::All, t + 10_001, "w1", LEASE_MS, work(10)).await, "probe");
    assert_eq!(probe.work.len(), 1);
    let (view, change) =
        ok(db.record_answer("breg", Health::Failed, &two_failures(), "no connection", t + 10_050).await, "failed");
    assert_eq!(
        (view.breaker, change, view.probe_at),
        ("open", None, Some(t + 20_050)),
        "open again, not journaled again"
    );
    assert_eq!(view.since, Some(t + 1), "open since it first opened");
    let due = ok(db.claim_due(WorkScope::All, t + 20_000, "w2", LEASE_MS, work(10)).await, "before the next probe");
    assert!(due.work.is_empty(), "{due:?}");
}

pub(crate) async fn a_retry_after_holds_the_connection_for_everyone(db: &TestDb) {
    let wf = workflow();
    let held = admit_to(db, &wf, 1, "breg", None).await;
    let t = T0 + 100;
    let slow = Health::SlowDown { retry_after_ms: Some(5_000) };
    let (view, change) = ok(db.record_answer("breg", slow, &BreakerSettings::default(), "HTTP 429", t).await, "429");
    assert_eq!((view.breaker, change, view.hold_until), ("closed", None, t + 5_000));
    assert!(db.connection_held("breg", t + 4_999) && !db.connection_held("breg", t + 5_000));
    let due = ok(db.claim_due(WorkScope::All, t + 1, "w1", LEASE_MS, work(10)).await, "held");
    assert!(due.work.is_empty(), "nothing is sent before the hold ends: {due:?}");
    assert_eq!(due.next, Some(t + 5_000), "the hold's end is when work is next due");
    let due = ok(db.claim_due(WorkScope::All, t + 5_000, "w1", LEASE_MS, work(10)).await, "after");
    assert_eq!(runs_of(&due), vec![held.as_str()]);
}

/// Two handles on one database (two processes), both claiming `breg` under `limits`.
async fn two_limited(db: &TestDb, limits: Limits) -> Store {
    let other = ok(Store::connect(&db.url).await, "second handle");
    for store in [&db.store, &other] {
        store.set_limits(std::iter::once(("breg".to_owned(), limits)).collect());
    }
    other
}

/// How many of `breg`'s rows are leased at `now`.
async fn in_flight(db: &TestDb, now: i64) -> i64 {
    raw_count(db, &format!("SELECT count(*) FROM outbox WHERE lane LIKE 'breg/%' AND lease_until >= {now}")).await
}

pub(crate) async fn a_concurrency_limit_holds_across_two_processes(db: &TestDb) {
    let wf = workflow();
    for n in 1..=5 {
        admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    }
    let other = two_limited(db, Limits { concurrency: Some(2), ..Limits::default() }).await;
    let t = T0 + 100;
    let first = ok(db.claim_due(WorkScope::All, t, "w1", LEASE_MS, work(10)).await, "first process");
    assert_eq!(first.work.len(), 2, "{first:?}");
    let second = ok(other.claim_due(WorkScope::All, t, "w2", LEASE_MS, work(10)).await, "second process");
    assert!(second.work.is_empty(), "the limit is the deployment's: {second:?}");
    assert!(second.next.is_some_and(|n| n > t && n <= t + 100), "asked again shortly: {second:?}");
    assert!(other.permits_awaited("breg"), "due work waits for a permit: an answer that frees one wakes the claims");
    assert!(!other.permits_awaited("casework"));
    assert_eq!(in_flight(db, t).await, 2);

    // A permit comes back with its row (here given back unsent): the other process takes it at
    // its next look (the recheck: only an answer committed in the process itself wakes it sooner).
    let (item, _) = &first.work[0];
    assert!(ok(db.release(&Claim::Work(item.clone()), "w1").await, "release"));
    let early = ok(other.claim_due(WorkScope::All, t + 1, "w2", LEASE_MS, work(10)).await, "before the recheck");
    assert!(early.work.is_empty() && early.next == second.next, "{early:?}");
    let recheck = second.next.unwrap_or(t + 100);
    let second = ok(other.claim_due(WorkScope::All, recheck, "w2", LEASE_MS, work(10)).await, "after a permit");
    assert_eq!(second.work.len(), 1, "{second:?}");
    assert_eq!(in_flight(db, recheck).await, 2);
    // An answer committed in the process frees its permit at once.
    other.permit_freed("breg");
    assert!(!other.permits_awaited("breg"));
    // A lease that runs out gives its permit back (a crash keeps it no longer than the lease).
    let later = recheck + LEASE_MS + 1;
    let after = ok(other.claim_due(WorkScope::All, later, "w2", LEASE_MS, work(10)).await, "after the leases");
    assert_eq!(after.work.len(), 2, "{after:?}");
    assert_eq!(in_flight(db, later).await, 2);
}

pub(crate) async fn a_rate_limit_is_one_bucket_for_every_process(db: &TestDb) {
    let wf = workflow();
    for n in 1..=10 {
        admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    }
    let rate = Limits { rate_per_second: Some(2.0), burst: Some(2), ..Limits::default() };
    let other = two_limited(db, rate).await;
    let t = T0 + 100;
    let a = ok(db.claim_due(WorkScope::All, t, "w1", LEASE_MS, work(10)).await, "burst");
    assert_eq!(a.work.len(), 2, "the burst: {a:?}");
    let b = ok(other.claim_due(WorkScope::All, t, "w2", LEASE_MS, work(10)).await, "empty bucket");
    assert!(b.work.is_empty(), "{b:?}");
    assert_eq!(b.next, Some(t + 500), "the next token, at 2 a second");
    let b = ok(other.claim_due(WorkScope::All, t + 500, "w2", LEASE_MS, work(10)).await, "one token");
    assert_eq!(b.work.len(), 1, "{b:?}");
    let a = ok(db.claim_due(WorkScope::All, t + 1_000, "w1", LEASE_MS, work(10)).await, "another");
    assert_eq!(a.work.len(), 1, "{a:?}");
    let sent = raw_count(db, "SELECT count(*) FROM outbox WHERE lane LIKE 'breg/%' AND claims > 0").await;
    assert_eq!(sent, 4, "a burst of 2, then 2 a second over one second");
}

pub(crate) async fn a_paused_limited_connection_is_neither_claimed_nor_due(db: &TestDb) {
    let wf = workflow();
    admit_to(db, &wf, 1, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    db.set_limits(std::iter::once(("breg".to_owned(), Limits { concurrency: Some(2), ..Limits::default() })).collect());
    ok(db.pause_connection("breg", T0 + 5, "ops", "stop").await, "pause");
    let due = ok(db.claim_due(WorkScope::All, T0 + 10, "w1", LEASE_MS, work(10)).await, "paused");
    // Only the run's deadline, days away, is due later: no claim round polls the paused lane.
    assert!(due.work.is_empty() && due.next.is_none_or(|n| n > T0 + 86_400_000), "nothing due while paused: {due:?}");
    ok(db.resume_connection("breg", T0 + 20, "ops", "go").await, "resume");
    let due = ok(db.claim_due(WorkScope::All, T0 + 21, "w1", LEASE_MS, work(10)).await, "resumed");
    assert_eq!(due.work.len(), 1, "{due:?}");
}

pub(crate) async fn a_limit_is_shared_round_robin_across_workflows(db: &TestDb) {
    let wf = workflow();
    // Workflow reviewed-notice floods the connection first; a second workflow's runs come later.
    for n in 1..=8 {
        admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    }
    let mut others = Vec::new();
    for n in 9..=10 {
        let mut new = new_run(&wf, &run_id(n), "alice", None, T0 + i64::from(n));
        new.workflow = "other-workflow".to_owned();
        let connections = vec![(READ.to_owned(), "breg".to_owned())];
        let lanes = vec![(READ.to_owned(), workflow_lane("breg", "other-workflow"))];
        let decision = Decision { connections, lanes, ..first(&wf, &new) };
        match db.admit(&new, || Ok::<_, StoreError>(decision)).await {
            Ok(Admission::Created(id)) => others.push(id),
            other => panic!("admission of run {n}: {other:?}"),
        }
    }
    db.set_limits(std::iter::once(("breg".to_owned(), Limits { concurrency: Some(2), ..Limits::default() })).collect());
    let due = ok(db.claim_due(WorkScope::All, T0 + 100, "w1", LEASE_MS, work(10)).await, "claim");
    let claimed = runs_of(&due);
    assert_eq!(claimed.len(), 2);
    assert!(claimed.contains(&run_id(1).as_str()), "the flood's oldest: {claimed:?}");
    assert!(claimed.contains(&others[0].as_str()), "the other workflow's oldest, in the same turn: {claimed:?}");
}
