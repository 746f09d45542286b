//! Flow control where work is handed out, beyond one claim round: a remote
//! connection's lane is offered within its limits — runtime.yaml's
//! (`Store::set_offer_limits`) and the polling worker's own, the stricter
//! bound of each — counted over every process, an offer holding its permit
//! until it is acquired or lapses; a lane held back by a `Retry-After` or an
//! open breaker is offered nothing but the breaker's one probe, also by a
//! process that has not heard of it yet. And fairness under a flood: with
//! 10 000 of one workflow's rows due on a limited connection, another
//! workflow's run is claimed in the first round.

use std::collections::BTreeMap;

use coordinator_core::pace::{Health, Limits};
use coordinator_store::{Decision, GuardedAdmission, Store, StoreError, WorkItem, WorkScope, workflow_lane};

use super::connections::{FLAGSHIP, READ, admit_to, runs_of, two_failures, work};
use super::support::{T0, TestDb, first, new_run, put_flagship_package, raw_count, run_id, workflow};
use super::{LEASE_MS, ok};

/// An offer's assignment window.
const WINDOW_MS: i64 = 5_000;

fn breg() -> Vec<String> {
    vec!["breg".to_owned()]
}

fn concurrency(n: u32) -> Limits {
    Limits { concurrency: Some(n), ..Limits::default() }
}

/// Two handles on one database (two processes), both offering `breg` under `limits`.
async fn two_offering(db: &TestDb, limits: Limits) -> Store {
    let other = ok(Store::connect(&db.url).await, "second handle");
    for store in [&db.store, &other] {
        store.set_offer_limits(std::iter::once(("breg".to_owned(), limits)).collect());
    }
    other
}

async fn offer(store: &Store, now: i64, to: &str) -> Vec<WorkItem> {
    ok(store.offer(&breg(), now, to, WINDOW_MS, 10).await, "offer").into_iter().map(|(item, _)| item).collect()
}

pub(crate) async fn a_remote_lane_is_offered_within_its_limit_across_processes(db: &TestDb) {
    let wf = workflow();
    for n in 1..=5 {
        admit_to(db, &wf, n, "breg", Some("breg")).await;
    }
    let other = two_offering(db, concurrency(2)).await;
    let t = T0 + 100;
    let offered = offer(db, t, "offer:w1").await;
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered.iter().all(|item| item.claims == 0 && !item.reclaimed), "an offer counts no claim");
    assert!(offer(&other, t, "offer:w2").await.is_empty(), "the limit is the deployment's");

    // An acquired offer keeps its permit as a lease; one that lapses gives it back.
    let acquired = ok(db.acquire(&offered[0], "offer:w1", "w1", t + 1, LEASE_MS).await, "acquire");
    assert!(acquired.is_some());
    let after_window = t + WINDOW_MS + 1;
    let again = offer(&other, after_window, "offer:w2").await;
    assert_eq!(again.len(), 1, "one permit came back with the lapsed offer: {again:?}");
    assert!(offer(db, after_window, "offer:w3").await.is_empty(), "two in flight again");
    let in_flight =
        raw_count(db, &format!("SELECT count(*) FROM outbox WHERE lane = 'breg' AND lease_until >= {after_window}"))
            .await;
    assert_eq!(in_flight, 2);
}

pub(crate) async fn a_workers_own_limits_hold_with_the_deployments(db: &TestDb) {
    let wf = workflow();
    for n in 1..=6 {
        admit_to(db, &wf, n, "breg", Some("breg")).await;
    }
    db.set_offer_limits(std::iter::once(("breg".to_owned(), concurrency(3))).collect());
    let asked: BTreeMap<String, Limits> = std::iter::once(("breg".to_owned(), concurrency(1))).collect();
    let t = T0 + 100;
    let offered = ok(db.offer_within(&breg(), &asked, t, "offer:w1", WINDOW_MS, 10).await, "stricter worker");
    assert_eq!(offered.len(), 1, "the worker's own bound is the lower: {offered:?}");
    let offered = offer(db, t, "offer:w2").await;
    assert_eq!(offered.len(), 2, "the deployment's bound for a worker without one: {offered:?}");

    // A worker's limits alone govern a lane the deployment does not limit.
    db.set_offer_limits(BTreeMap::new());
    let rate: BTreeMap<String, Limits> = std::iter::once((
        "breg".to_owned(),
        Limits { rate_per_second: Some(1.0), burst: Some(1), ..Limits::default() },
    ))
    .collect();
    let later = t + WINDOW_MS + 1;
    let offered = ok(db.offer_within(&breg(), &rate, later, "offer:w3", WINDOW_MS, 10).await, "rate");
    assert_eq!(offered.len(), 1, "one token: {offered:?}");
    let offered = ok(db.offer_within(&breg(), &rate, later + 10, "offer:w4", WINDOW_MS, 10).await, "no token");
    assert!(offered.is_empty(), "{offered:?}");
}

pub(crate) async fn a_held_or_open_remote_lane_is_offered_only_its_probe(db: &TestDb) {
    let wf = workflow();
    for n in 1..=3 {
        admit_to(db, &wf, n, "breg", Some("breg")).await;
    }
    // Another process, which has not read the connections since, offers too.
    let unaware = ok(Store::connect(&db.url).await, "second handle");
    let t = T0 + 100;
    let slow = Health::SlowDown { retry_after_ms: Some(5_000) };
    ok(db.record_answer("breg", slow, &two_failures(), "HTTP 429", t).await, "429");
    assert!(offer(db, t + 1, "offer:w1").await.is_empty(), "held by the Retry-After");
    assert!(offer(&unaware, t + 1, "offer:w2").await.is_empty(), "held for a process that has not heard of it");
    assert_eq!(ok(unaware.offered_work(&breg(), t + 1).await, "due"), None, "a held lane wakes no poll");

    // The second failure in a row opens the breaker: after the hold, only the probe is offered.
    ok(db.record_answer("breg", Health::Failed, &two_failures(), "HTTP 503", t + 5_000).await, "503");
    assert!(offer(db, t + 6_000, "offer:w1").await.is_empty(), "open");
    assert!(offer(&unaware, t + 6_000, "offer:w2").await.is_empty(), "open, for the other process too");
    let probe_at = t + 5_000 + 10_000;
    let probe = offer(db, probe_at, "offer:w1").await;
    assert_eq!(probe.len(), 1, "one probe: {probe:?}");
    assert_eq!(probe[0].run_id, run_id(1), "the lane's next due row");
    assert!(offer(db, probe_at + 1, "offer:w3").await.is_empty(), "one probe at a time");
    let states = ok(db.connection_states().await, "states");
    assert_eq!(states.iter().map(|s| s.pace.breaker).collect::<Vec<_>>(), vec!["half-open"]);

    ok(db.record_answer("breg", Health::Healthy, &two_failures(), "HTTP 200", probe_at + 2).await, "closed");
    ok(unaware.refresh_connections(probe_at + 3).await, "refresh");
    let rest = offer(&unaware, probe_at + 3, "offer:w2").await;
    assert_eq!(rest.len(), 2, "closed: the rest is offered: {rest:?}");
}

/// How many of one workflow's runs flood the connection.
const FLOOD: u32 = 10_000;

pub(crate) async fn a_flood_of_one_workflow_does_not_starve_another(db: &TestDb) {
    let wf = workflow();
    put_flagship_package(db, &wf).await;
    ok(db.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    let connections = vec![(READ.to_owned(), "breg".to_owned())];
    let lanes = vec![(READ.to_owned(), workflow_lane("breg", FLAGSHIP))];
    let mut n = 1;
    while n <= FLOOD {
        let batch: Vec<GuardedAdmission> = (n..(n + 1_000).min(FLOOD + 1))
            .map(|n| {
                let new = new_run(&wf, &run_id(n), "alice", None, T0 + 1);
                let decision = Decision { connections: lanes.clone(), lanes: lanes.clone(), ..first(&wf, &new) };
                GuardedAdmission { new, decision, lease: None }
            })
            .collect();
        let answers = ok(db.admit_guarded_batch("w0", &batch).await, "the flood");
        assert!(answers.iter().all(Option::is_some));
        n += 1_000;
    }
    // Another workflow's run comes after the whole flood.
    let mut new = new_run(&wf, &run_id(FLOOD + 1), "bob", None, T0 + 2);
    new.workflow = "other-workflow".to_owned();
    let lanes = vec![(READ.to_owned(), workflow_lane("breg", "other-workflow"))];
    let decision = Decision { connections, lanes, ..first(&wf, &new) };
    match db.admit(&new, || Ok::<_, StoreError>(decision)).await {
        Ok(coordinator_store::Admission::Created(_)) => {}
        other => panic!("the other workflow's admission: {other:?}"),
    }
    db.set_limits(std::iter::once(("breg".to_owned(), concurrency(4))).collect());
    let due = ok(db.claim_due(WorkScope::All, T0 + 100, "w1", LEASE_MS, work(32)).await, "claim");
    let claimed = runs_of(&due);
    assert_eq!(claimed.len(), 4, "{claimed:?}");
    let other = run_id(FLOOD + 1);
    assert!(claimed.contains(&other.as_str()), "the other workflow's run, in the first round: {claimed:?}");
}

pub(crate) async fn a_limited_connections_rows_go_to_their_workflows_lane_at_start(db: &TestDb) {
    let wf = workflow();
    admit_to(db, &wf, 1, "breg", None).await;
    admit_to(db, &wf, 2, "breg", Some("breg")).await;
    admit_to(db, &wf, 3, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    let limited = vec!["breg".to_owned()];
    assert_eq!(ok(db.clear_lanes(&[], &limited).await, "clear"), 0, "a limited connection's lanes are kept");
    assert_eq!(ok(db.lane_rows(&limited).await, "lane"), 2, "queued before the limit, or in its own name's lane");
    let laned = raw_count(db, "SELECT count(*) FROM outbox WHERE lane = 'breg/reviewed-notice'").await;
    assert_eq!(laned, 3);
    assert_eq!(ok(db.clear_lanes(&[], &[]).await, "no longer limited"), 3, "served in-process again");
}

pub(crate) async fn a_remote_lane_is_offered_round_robin_across_workflows(db: &TestDb) {
    let wf = workflow();
    for n in 1..=6 {
        admit_to(db, &wf, n, "breg", Some(&workflow_lane("breg", FLAGSHIP))).await;
    }
    let mut new = new_run(&wf, &run_id(7), "alice", None, T0 + 7);
    new.workflow = "other-workflow".to_owned();
    let connections = vec![(READ.to_owned(), "breg".to_owned())];
    let lanes = vec![(READ.to_owned(), workflow_lane("breg", "other-workflow"))];
    let decision = Decision { connections, lanes, ..first(&wf, &new) };
    match db.admit(&new, || Ok::<_, StoreError>(decision)).await {
        Ok(coordinator_store::Admission::Created(_)) => {}
        other => panic!("the other workflow's admission: {other:?}"),
    }
    let t = T0 + 100;
    assert_eq!(ok(db.offered_work(&breg(), t).await, "due"), Some(t), "a connection's lanes are its workflows'");
    db.set_offer_limits(std::iter::once(("breg".to_owned(), concurrency(2))).collect());
    let offered: Vec<String> = offer(db, t, "offer:w1").await.into_iter().map(|item| item.run_id).collect();
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered.contains(&run_id(1)) && offered.contains(&run_id(7)), "each workflow's oldest: {offered:?}");

    // Without limits, every lane of the connection is offered.
    db.set_offer_limits(BTreeMap::new());
    let rest = offer(db, t, "offer:w2").await;
    assert_eq!(rest.len(), 5, "{rest:?}");
}
