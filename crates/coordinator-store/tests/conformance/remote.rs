//! Remote workers' side of the outbox (`Store::offer`, `acquire`, `renew`,
//! `relane`, `clear_lanes`, `offered_work`, `apply_reported`,
//! `journal_report`, `report_journaled`): rows are written in the lanes a
//! decision lists, in-process claims leave waiting lane rows alone but take
//! those whose lease ran out, an offer counts no claim and an acquire does,
//! a report applies only on an acquired lease and is journaled with it.

use std::collections::BTreeSet;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_store::{Admission, Claim, ClaimLimits, Decision, Store, StoreError, WorkItem, WorkKind, WorkScope};

use super::support::{T0, TestDb, deciding, first, new_run, raw_count, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// The assignment window of an offer.
const WINDOW_MS: i64 = 5_000;
/// The lease an acquire takes.
const TTL_MS: i64 = 60_000;
/// The first step of reviewed-notice, and the one after it.
const READ: &str = "read-application";
const REVIEW: &str = "request-review";

fn lanes(of: &[(&str, &str)]) -> Vec<(String, String)> {
    of.iter().map(|(step, lane)| ((*step).to_owned(), (*lane).to_owned())).collect()
}

fn breg() -> Vec<String> {
    vec!["breg".to_owned()]
}

/// Admits run `n` (at `T0 + n`), its first attempt in `lane` when given.
async fn admit_in(store: &Store, wf: &Workflow, n: u32, lane: Option<&str>) -> String {
    let new = new_run(wf, &run_id(n), "alice", None, T0 + i64::from(n));
    let laned = lane.map(|lane| lanes(&[(READ, lane)])).unwrap_or_default();
    match store.admit(&new, || Ok::<_, StoreError>(Decision { lanes: laned, ..first(wf, &new) })).await {
        Ok(Admission::Created(id)) => id,
        other => panic!("admission of run {n}: {other:?}"),
    }
}

/// `deciding` with `lanes` listed in the decision.
fn deciding_in<'a>(
    wf: &'a Workflow,
    event: &'a Event,
    now: i64,
    lanes: &'a [(String, String)],
) -> impl FnOnce(&[u8]) -> Result<Decision, String> + 'a {
    move |snapshot| deciding(wf, event, now)(snapshot).map(|d| Decision { lanes: lanes.to_vec(), ..d })
}

/// Whether the outbox row of `run` and `step` is in `lane` (`None`: in-process).
async fn in_lane(db: &TestDb, run: &str, step: &str, lane: Option<&str>) -> bool {
    let lane = lane.map_or_else(|| "lane IS NULL".to_owned(), |lane| format!("lane = '{lane}'"));
    let sql = format!("SELECT count(*) FROM outbox WHERE run_id = '{run}' AND step = '{step}' AND {lane}");
    raw_count(db, &sql).await == 1
}

/// The one row an offer of `breg` at `now` hands `to`.
async fn offer_one(store: &Store, now: i64, to: &str) -> WorkItem {
    let offered = ok(store.offer(&breg(), now, to, WINDOW_MS, 10).await, "offer");
    match offered.as_slice() {
        [(item, _)] => item.clone(),
        other => panic!("one row offered to {to} at {now}: {other:?}"),
    }
}

fn steps(items: &[WorkItem]) -> Vec<(String, bool, i64)> {
    items.iter().map(|w| (w.run_id.clone(), w.reclaimed, w.claims)).collect()
}

pub(crate) async fn lanes_are_written_for_the_listed_steps_only(db: &TestDb) {
    let wf = workflow();
    let laned = admit_in(db, &wf, 1, Some("breg")).await;
    let plain = admit_in(db, &wf, 2, None).await;
    let batched = admit_in(db, &wf, 3, None).await;
    assert!(in_lane(db, &laned, READ, Some("breg")).await, "the admission's row is in its lane");
    assert!(in_lane(db, &plain, READ, None).await, "a step not listed is served in-process");

    // A single apply: the listed step's row is in the lane, any other not.
    let (now, event) = (T0 + 100, accepted_read());
    let review_in_casework = lanes(&[(REVIEW, "casework")]);
    ok(db.apply(&plain, now, deciding_in(&wf, &event, now, &review_in_casework)).await, "apply");
    assert!(in_lane(db, &plain, REVIEW, Some("casework")).await);
    let read_only = lanes(&[(READ, "breg")]);
    ok(db.apply(&laned, now, deciding_in(&wf, &event, now, &read_only)).await, "apply, review not listed");
    assert!(in_lane(db, &laned, REVIEW, None).await);

    // A batch of reports (set-based on PostgreSQL) writes the lanes too.
    let claimed = ok(db.claim_work(now, "w", LEASE_MS, 10).await, "claim");
    let Some(item) = claimed.iter().find(|w| w.run_id == batched) else { panic!("not claimed: {claimed:?}") };
    let mut decide = Some(deciding_in(&wf, &event, now, &review_in_casework));
    let outcome = ok(
        db.apply_fenced_batch(&[Claim::Work(item.clone())], "w", now, |_, snapshot| match decide.take() {
            Some(decide) => decide(snapshot),
            None => Err("decided twice".to_owned()),
        })
        .await,
        "batch",
    );
    assert!(matches!(outcome.as_slice(), [Ok(2)]), "{outcome:?}");
    assert!(in_lane(db, &batched, REVIEW, Some("casework")).await);

    // Queueing a row again (the next attempt) sets its lane afresh.
    let requeued = admit_in(db, &wf, 4, Some("breg")).await;
    let retry = Event::CallAnswered {
        step: READ.into(),
        attempt: 1,
        answer: CallAnswer::Retryable { retry_after_seconds: None },
    };
    ok(db.apply(&requeued, now, deciding(&wf, &retry, now)).await, "retry, no lanes");
    let work = ok(db.work_of(&requeued).await, "work");
    assert!(work.outbox.iter().any(|o| o.0 == READ && o.2 == 2), "attempt 2 queued: {work:?}");
    assert!(in_lane(db, &requeued, READ, None).await, "attempt 2 is served in-process");
}

pub(crate) async fn in_process_claims_leave_waiting_lane_rows_and_take_expired_ones(db: &TestDb) {
    let wf = workflow();
    let laned = admit_in(db, &wf, 1, Some("breg")).await;
    let plain = admit_in(db, &wf, 2, None).await;
    let now = T0 + 10;
    let claimed = ok(db.claim_work(now, "w", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.iter().map(|w| w.run_id.clone()).collect::<Vec<_>>(), vec![plain], "the lane row waits");
    let due = ok(db.claim_due(WorkScope::All, now, "w", LEASE_MS, ClaimLimits::NONE).await, "next due").next;
    assert_eq!(due, Some(now + LEASE_MS + 1), "a waiting lane row is not in-process work");

    // An offer that runs out unacquired is claimed in-process: not reclaimed, nothing was sent.
    let offered = offer_one(db, now, "offer:w1").await;
    assert_eq!((offered.claims, offered.reclaimed), (0, false));
    let later = now + WINDOW_MS + 1;
    let taken = ok(db.claim_work(later, "engine", LEASE_MS, 10).await, "claim the offer that ran out");
    assert_eq!(steps(&taken), vec![(laned.clone(), false, 1)]);
    assert_eq!(ok(db.acquire(&offered, "offer:w1", "w1", later, TTL_MS).await, "acquire"), None, "offer gone");

    // The engine gives it back to its lane: unleased, its claim given back, offered again.
    assert!(!ok(db.relane(&taken[0], "someone else", Some("breg")).await, "not theirs"));
    assert!(ok(db.relane(&taken[0], "engine", Some("breg")).await, "relane"));
    assert!(in_lane(db, &laned, READ, Some("breg")).await);
    assert_eq!(ok(db.claim_work(later, "engine", LEASE_MS, 10).await, "claim"), vec![], "it waits again");
    let again = offer_one(db, later, "offer:w2").await;
    assert_eq!((again.claims, again.reclaimed), (0, false));

    // Given to no lane, it is in-process work from then on.
    let at = later + WINDOW_MS + 1;
    let taken = ok(db.claim_work(at, "engine", LEASE_MS, 10).await, "claim");
    assert!(ok(db.relane(&taken[0], "engine", None).await, "in-process"));
    assert!(in_lane(db, &laned, READ, None).await);
    let mine = ok(db.claim_work(at, "engine", LEASE_MS, 10).await, "claim in-process");
    assert_eq!(steps(&mine), vec![(laned, false, 1)]);
}

pub(crate) async fn an_acquired_offer_reports_and_is_journaled(db: &TestDb) {
    let wf = workflow();
    let id = admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let offered = ok(db.offer(&breg(), now, "offer:w1", WINDOW_MS, 10).await, "offer");
    let Some((item, run)) = offered.first().cloned() else { panic!("nothing offered") };
    let row = ok(db.load(&id).await, "load").unwrap_or_else(|| panic!("run"));
    assert_eq!((run.revision, run.snapshot), (row.revision, row.snapshot), "the run as the offer read it");
    let expected = WorkItem {
        run_id: id.clone(),
        step: READ.into(),
        kind: WorkKind::Attempt,
        attempt: 1,
        reclaimed: false,
        claims: 0,
    };
    assert_eq!(item, expected);

    let acquired = ok(db.acquire(&item, "offer:w1", "w1", now + 1, TTL_MS).await, "acquire");
    assert_eq!(acquired, Some(WorkItem { claims: 1, ..expected.clone() }));
    let claim = Claim::Work(acquired.unwrap_or_else(|| panic!("acquired")));
    let detail = "attempt 1 accepted (200)";
    let (at, event) = (now + 2, accepted_read());
    let version = db.apply_reported(&claim, "w1", at, Some("worker:alice"), detail, deciding(&wf, &event, at)).await;
    assert_eq!(ok(version, "report"), 2);
    assert!(ok(db.report_journaled(&id, READ, detail).await, "journaled, pending"), "a pending entry is found");
    assert!(!ok(db.report_journaled(&id, READ, "attempt 1 refused").await, "another detail"));
    assert!(!ok(db.report_journaled(&id, REVIEW, detail).await, "another step"));
    ok(db.seal_audit(100).await, "seal");
    assert!(ok(db.report_journaled(&id, READ, detail).await, "journaled, sealed"));
    let page = ok(db.audit(Some(&id), 0, 100).await, "journal");
    let reports: Vec<_> = page.entries.iter().filter(|e| e.kind == "report").collect();
    assert_eq!(reports.len(), 1, "{:?}", page.entries);
    let report = reports[0];
    assert_eq!(
        (report.step.as_deref(), report.actor.as_deref(), report.detail.as_str(), report.at),
        (Some(READ), Some("worker:alice"), detail, at)
    );
    assert_eq!(page.entries.last().map(|e| e.kind.as_str()), Some("report"), "after the decision's entries");

    // The same report again: the lease is gone; the journal says it applied.
    let again =
        db.apply_reported(&claim, "w1", at + 1, Some("worker:alice"), detail, deciding(&wf, &event, at + 1)).await;
    assert!(matches!(again, Err(StoreError::LeaseLost { .. })), "{again:?}");
    // A report not applied is journaled on its own, as evidence.
    let stale = "attempt 1 reported again: stale";
    ok(db.journal_report(&id, READ, at + 1, "worker:alice", stale).await, "evidence");
    assert!(ok(db.report_journaled(&id, READ, stale).await, "the evidence"));
    ok(db.journal_report(&run_id(9), READ, at + 1, "worker:alice", stale).await, "a run the store does not hold");
}

pub(crate) async fn an_offer_that_ran_out_is_offered_again_as_it_was(db: &TestDb) {
    let wf = workflow();
    admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let first = offer_one(db, now, "offer:w1").await;
    assert!(ok(db.offer(&breg(), now + WINDOW_MS, "offer:w2", WINDOW_MS, 10).await, "live").is_empty());
    let later = now + WINDOW_MS + 1;
    let second = offer_one(db, later, "offer:w2").await;
    assert_eq!(second, first, "the same claims, not reclaimed: nothing was sent");
    assert_eq!(ok(db.acquire(&first, "offer:w1", "w1", later, TTL_MS).await, "w1's offer"), None, "taken");
    assert_eq!(ok(db.acquire(&second, "offer:w3", "w3", later, TTL_MS).await, "not w3's"), None);
    let end = later + WINDOW_MS;
    let acquired = ok(db.acquire(&second, "offer:w2", "w2", end, TTL_MS).await, "at the window's end");
    assert_eq!(acquired.map(|w| (w.claims, w.reclaimed)), Some((1, false)));

    // A window that ran out cannot be acquired, even when nobody took the row.
    let id = admit_in(db, &wf, 2, Some("breg")).await;
    let offered = offer_one(db, end, "offer:w4").await;
    assert_eq!(offered.run_id, id);
    assert_eq!(ok(db.acquire(&offered, "offer:w4", "w4", end + WINDOW_MS + 1, TTL_MS).await, "late"), None);
    // Nor a row that was queued again (another attempt).
    let moved = WorkItem { attempt: 2, ..offered.clone() };
    assert_eq!(ok(db.acquire(&moved, "offer:w4", "w4", end, TTL_MS).await, "another attempt"), None);
}

pub(crate) async fn an_acquire_that_ran_out_is_offered_reclaimed(db: &TestDb) {
    let wf = workflow();
    let id = admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let offered = offer_one(db, now, "offer:w1").await;
    let acquired = ok(db.acquire(&offered, "offer:w1", "w1", now, TTL_MS).await, "acquire");
    let acquired = acquired.unwrap_or_else(|| panic!("acquired"));
    assert!(ok(db.offer(&breg(), now + TTL_MS, "offer:w2", WINDOW_MS, 10).await, "leased").is_empty());
    // w1 never reports: the next offer says an earlier lease may have acted.
    let later = now + TTL_MS + 1;
    let again = offer_one(db, later, "offer:w2").await;
    assert_eq!((again.claims, again.reclaimed), (1, true));
    let taken = ok(db.acquire(&again, "offer:w2", "w2", later, TTL_MS).await, "acquire again");
    assert_eq!(taken.clone().map(|w| (w.claims, w.reclaimed)), Some((2, true)));
    let (at, event) = (later + 1, accepted_read());
    let lost =
        db.apply_reported(&Claim::Work(acquired), "w1", at, Some("worker:a"), "late", deciding(&wf, &event, at)).await;
    assert!(matches!(lost, Err(StoreError::LeaseLost { .. })), "{lost:?}");
    assert!(!ok(db.report_journaled(&id, READ, "late").await, "nothing written"));
    let claim = Claim::Work(taken.unwrap_or_else(|| panic!("taken")));
    ok(
        db.apply_reported(&claim, "w2", at, Some("worker:a"), "in time", deciding(&wf, &event, at)).await,
        "w2's report",
    );
}

pub(crate) async fn the_report_fence_refuses_an_offer_alone(db: &TestDb) {
    let wf = workflow();
    let id = admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let offered = offer_one(db, now, "offer:w1").await;
    let (work, row) = (ok(db.work_of(&id).await, "work"), ok(db.load(&id).await, "load"));
    let (at, event) = (now + 1, accepted_read());
    // The worker reports without acquiring: its owner holds nothing yet.
    let claim = Claim::Work(WorkItem { claims: 1, ..offered.clone() });
    let refused = db.apply_reported(&claim, "w1", at, Some("worker:a"), "early", deciding(&wf, &event, at)).await;
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "not acquired: {refused:?}");
    assert_eq!((ok(db.work_of(&id).await, "work"), ok(db.load(&id).await, "load")), (work, row), "nothing written");
    assert!(!ok(db.report_journaled(&id, READ, "early").await, "not journaled"));
    let acquired = ok(db.acquire(&offered, "offer:w1", "w1", at, TTL_MS).await, "acquire");
    let claim = Claim::Work(acquired.unwrap_or_else(|| panic!("acquired")));
    ok(db.apply_reported(&claim, "w1", at, Some("worker:a"), "acquired", deciding(&wf, &event, at)).await, "report");
}

pub(crate) async fn concurrent_offers_never_hand_out_a_row_twice(db: &TestDb) {
    let wf = workflow();
    const RUNS: u32 = 40;
    for n in 1..=RUNS {
        admit_in(db, &wf, n, Some(if n % 2 == 0 { "breg" } else { "casework" })).await;
    }
    let both = vec!["breg".to_owned(), "casework".to_owned()];
    let now = T0 + 1_000;
    let mut tasks = Vec::new();
    for w in 0..4 {
        let (store, both) = (db.store.clone(), both.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let offered = store.offer(&both, now, &format!("offer:w{w}"), TTL_MS, 3).await?;
                if offered.is_empty() {
                    return Ok::<_, StoreError>(mine);
                }
                mine.extend(offered.into_iter().map(|(item, _)| item.run_id));
            }
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(ok(task.await.unwrap_or_else(|e| panic!("task: {e}")), "concurrent offers"));
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!((all.len(), distinct.len()), (40, 40), "every row once: {all:?}");
    assert!(ok(db.offer(&both, now, "offer:late", TTL_MS, 10).await, "after").is_empty());
}

pub(crate) async fn a_lease_is_renewed_by_its_owner_only(db: &TestDb) {
    let wf = workflow();
    admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let offered = offer_one(db, now, "offer:w1").await;
    let acquired = ok(db.acquire(&offered, "offer:w1", "w1", now, TTL_MS).await, "acquire");
    let acquired = acquired.unwrap_or_else(|| panic!("acquired"));
    assert!(!ok(db.renew(&acquired, "w2", now + 1, TTL_MS).await, "not w2's"));
    assert!(ok(db.renew(&acquired, "w1", now + 1, TTL_MS).await, "renew"));
    let old_end = now + TTL_MS + 1;
    assert!(ok(db.offer(&breg(), old_end, "offer:w2", WINDOW_MS, 10).await, "renewed").is_empty());
    assert_eq!(ok(db.claim_work(old_end, "engine", LEASE_MS, 10).await, "renewed"), vec![]);
    assert_eq!(ok(db.offered_work(&breg(), now).await, "next"), Some(now + 1 + TTL_MS + 1));
    let stale = WorkItem { attempt: 2, ..acquired.clone() };
    assert!(!ok(db.renew(&stale, "w1", now + 2, TTL_MS).await, "another attempt"));
}

pub(crate) async fn rows_of_connections_no_longer_remote_go_in_process(db: &TestDb) {
    let wf = workflow();
    let breg_run = admit_in(db, &wf, 1, Some("breg")).await;
    let casework_run = admit_in(db, &wf, 2, Some("casework")).await;
    let plain = admit_in(db, &wf, 3, None).await;
    assert_eq!(ok(db.clear_lanes(&breg(), &[]).await, "clear"), 1, "casework's row only");
    assert!(in_lane(db, &breg_run, READ, Some("breg")).await);
    assert!(in_lane(db, &casework_run, READ, None).await && in_lane(db, &plain, READ, None).await);
    let claimed = ok(db.claim_work(T0 + 10, "engine", LEASE_MS, 10).await, "claim");
    let runs: BTreeSet<String> = claimed.into_iter().map(|w| w.run_id).collect();
    assert_eq!(runs, [casework_run, plain].into_iter().collect());
    assert_eq!(ok(db.clear_lanes(&breg(), &[]).await, "again"), 0);
    assert_eq!(ok(db.clear_lanes(&[], &[]).await, "no remote connection"), 1);
    assert!(in_lane(db, &breg_run, READ, None).await);
}

pub(crate) async fn offered_work_says_when_a_lane_has_work_next(db: &TestDb) {
    let wf = workflow();
    let casework = vec!["casework".to_owned()];
    assert_eq!(ok(db.offered_work(&breg(), T0).await, "empty"), None);
    assert_eq!(ok(db.offered_work(&[], T0).await, "no lanes"), None);
    let id = admit_in(db, &wf, 1, Some("breg")).await;
    admit_in(db, &wf, 2, None).await;
    assert_eq!(ok(db.offered_work(&breg(), T0).await, "ahead"), Some(T0 + 1), "the row's due time");
    assert_eq!(ok(db.offered_work(&breg(), T0 + 10).await, "due"), Some(T0 + 10), "due already: now");
    assert_eq!(ok(db.offered_work(&casework, T0 + 10).await, "other lane"), None);
    let heads = ok(db.queue_heads(T0 + 10).await, "queue heads");
    assert_eq!(heads.oldest_due_work, Some(T0 + 1), "a lane row waiting counts as due work");
    offer_one(db, T0 + 10, "offer:w1").await;
    assert_eq!(ok(db.offered_work(&breg(), T0 + 10).await, "offered"), Some(T0 + 10 + WINDOW_MS + 1));

    // A run under a restore hold offers nothing but receipt lookups.
    let hold = Event::RestoreHoldPlaced;
    ok(db.apply(&id, T0 + 11, deciding(&wf, &hold, T0 + 11)).await, "hold");
    let later = T0 + 20 + WINDOW_MS;
    assert_eq!(ok(db.offered_work(&breg(), later).await, "held"), None);
    assert!(ok(db.offer(&breg(), later, "offer:w2", WINDOW_MS, 10).await, "held").is_empty());
}

pub(crate) async fn offers_and_acquires_are_refused_while_the_fence_holds(db: &TestDb) {
    let wf = workflow();
    admit_in(db, &wf, 1, Some("breg")).await;
    let now = T0 + 10;
    let offered = offer_one(db, now, "offer:w1").await;
    assert_eq!(ok(db.arm_fence(now).await, "arm"), None);
    db.trip_fence("the timeline changed from 1 to 2".into());
    let refused = db.offer(&breg(), now, "offer:w2", WINDOW_MS, 10).await;
    assert!(matches!(refused, Err(StoreError::Fenced(ref e)) if e.contains("timeline")), "{refused:?}");
    assert!(matches!(db.offer(&[], now, "offer:w2", WINDOW_MS, 10).await, Err(StoreError::Fenced(_))));
    let refused = db.acquire(&offered, "offer:w1", "w1", now, TTL_MS).await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    ok(db.accept_database(now + 1).await, "release");
    let acquired = ok(db.acquire(&offered, "offer:w1", "w1", now + 1, TTL_MS).await, "after the release");
    assert!(acquired.is_some(), "the offer was still live");
}
