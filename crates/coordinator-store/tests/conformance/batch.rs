//! Group commit (`Store::apply_fenced_batch`): many runs' fenced reports in
//! one transaction, each exactly as a single `apply_fenced` would apply it —
//! the listing columns included —, the ones that cannot apply left alone.

use coordinator_core::machine::action::{Action, AuditKind};
use coordinator_core::machine::event::{CallAnswer, Event, Timer};
use coordinator_core::machine::time::Instant;
use coordinator_core::model::run::RunState;
use coordinator_store::{Claim, ClaimedRun, Decision, Store, StoreError, WorkItem, WorkScope};

use super::columns::{decide, listed, not_reviewable, review_answer};
use super::support::{T0, admit, deciding, decode, run_id, with_actions, workflow};
use super::{LEASE_MS, accepted_read, ok};

pub async fn a_batch_applies_each_report_as_a_single_apply_would(store: &Store) {
    let wf = workflow();
    let ids: Vec<String> = (1..=5).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
    }
    let claimed = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.len(), 5, "{claimed:?}");
    let claim_of = |id: &str| -> Claim {
        let item = claimed.iter().find(|w| w.run_id == id).cloned();
        Claim::Work(item.unwrap_or_else(|| panic!("no claim of {id}")))
    };
    let event = accepted_read();

    // Run 5 alone, as before; runs 1 and 2 in a batch beside a report whose
    // fence is wrong (run 3) and one whose decision fails (run 4).
    ok(store.apply_fenced(&claim_of(&ids[4]), "w1", T0 + 1, deciding(&wf, &event, T0 + 1)).await, "single");
    let stale = match claim_of(&ids[2]) {
        Claim::Work(w) => Claim::Work(WorkItem { attempt: 7, ..w }),
        other => other,
    };
    let batch = vec![claim_of(&ids[1]), stale, claim_of(&ids[0]), claim_of(&ids[3])];
    let before = (ok(store.work_of(&ids[2]).await, "work 3"), ok(store.work_of(&ids[3]).await, "work 4"));
    let rows_before = (ok(store.load(&ids[2]).await, "run 3"), ok(store.load(&ids[3]).await, "run 4"));
    let mut decides: Vec<Option<_>> = (0..4).map(|_| Some(deciding(&wf, &event, T0 + 1))).collect();
    let outcome = ok(
        store
            .apply_fenced_batch(&batch, "w1", T0 + 1, |i, snapshot| {
                if i == 3 {
                    return Err("this decision fails".to_owned());
                }
                match decides[i].take() {
                    Some(decide) => decide(snapshot),
                    None => Err("decided twice".to_owned()),
                }
            })
            .await,
        "batch",
    );
    assert!(matches!(outcome[0], Ok(2)), "{outcome:?}");
    assert!(matches!(outcome[1], Err(StoreError::LeaseLost { .. })), "{outcome:?}");
    assert!(matches!(outcome[2], Ok(2)), "{outcome:?}");
    assert!(matches!(outcome[3], Err(StoreError::Rejected(_))), "{outcome:?}");

    let single = ok(store.work_of(&ids[4]).await, "work 5");
    let single_row = ok(store.load(&ids[4]).await, "run 5").unwrap_or_else(|| panic!("run 5"));
    for id in &ids[..2] {
        assert_eq!(ok(store.work_of(id).await, "work"), single, "run {id} as the single apply left run 5");
        let row = ok(store.load(id).await, "run").unwrap_or_else(|| panic!("run {id}"));
        assert_eq!((row.state, row.version, row.updated_at), (single_row.state, 2, T0 + 1));
        let listed = |r: &coordinator_store::RunRow| (r.outcome.clone(), r.attention_step.clone(), r.attention_since);
        assert_eq!(listed(&row), listed(&single_row));
    }
    assert_eq!((ok(store.work_of(&ids[2]).await, "work 3"), ok(store.work_of(&ids[3]).await, "work 4")), before);
    assert_eq!((ok(store.load(&ids[2]).await, "run 3"), ok(store.load(&ids[3]).await, "run 4")), rows_before);
}

pub async fn a_batch_of_due_timers_ends_every_run(store: &Store) {
    let wf = workflow();
    let ids: Vec<String> = (1..=40).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
    }
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    let timers = ok(store.claim_timers(deadline, "w1", LEASE_MS, 100).await, "claim");
    assert_eq!(timers.len(), 40);
    assert!(timers.iter().all(|t| t.revision == wf.revision), "claims carry the pinned revision");
    let claims: Vec<Claim> = timers.into_iter().map(Claim::Timer).collect();
    let fired = Event::TimerDue { timer: Timer::RunDeadline };
    let outcome = ok(
        store
            .apply_fenced_batch(&claims, "w1", deadline, |_, snapshot| deciding(&wf, &fired, deadline)(snapshot))
            .await,
        "fire",
    );
    assert!(outcome.iter().all(|o| matches!(o, Ok(2))), "{outcome:?}");
    for id in &ids {
        let work = ok(store.work_of(id).await, "work");
        assert!(work.outbox.is_empty() && work.timers.is_empty(), "EndRun removes all work: {work:?}");
        assert!(!work.audit.is_empty());
        assert_eq!(ok(store.load(id).await, "load").map(|r| r.state), Some(RunState::Expired));
    }
    assert_eq!(super::next_due(store, WorkScope::All).await, None);
}

pub async fn a_run_twice_in_one_batch_is_refused_whole(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let claimed = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    let claims: Vec<Claim> = claimed.iter().chain(claimed.iter()).cloned().map(Claim::Work).collect();
    let (work, row) = (ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load"));
    let refused = store.apply_fenced_batch(&claims, "w1", T0, |_, _| Err::<Decision, _>("never decided")).await;
    assert!(matches!(refused, Err(StoreError::Conflict { .. })), "{refused:?}");
    assert_eq!((ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load")), (work, row));
}

pub async fn claims_carry_the_run_as_they_read_it(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let row = ok(store.load(&id).await, "load").unwrap_or_else(|| panic!("run {id}"));
    let claimed = ok(store.claim_work_with_runs(WorkScope::All, T0, "w1", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let (item, run) = &claimed[0];
    assert_eq!(item.run_id, id);
    assert_eq!(
        run,
        &ClaimedRun { revision: wf.revision.clone(), snapshot: row.snapshot, trace_parent: None, due_at: run.due_at }
    );
}

/// How one report of a batch is decided.
type Decide<'a> = Box<dyn FnOnce(&[u8]) -> Result<Decision, String> + 'a>;

/// Applies `claims` in one batch, claim `i` decided by `decides[i]`.
async fn batch_of(store: &Store, claims: &[Claim], at: i64, decides: Vec<Decide<'_>>) {
    let mut decides: Vec<Option<_>> = decides.into_iter().map(Some).collect();
    let outcome = store
        .apply_fenced_batch(claims, "w1", at, |i, snapshot| match decides[i].take() {
            Some(decide) => decide(snapshot),
            None => Err("decided twice".to_owned()),
        })
        .await;
    assert!(ok(outcome, "batch").iter().all(Result::is_ok), "every report applies");
}

/// A decision that leaves the run as it is, journaling a line (as an
/// operator's note would): the run stays in its state.
fn unchanged(snapshot: &[u8]) -> Result<Decision, String> {
    let run = decode(snapshot)?;
    let note = Action::Audit { kind: AuditKind::Operator, step: None, detail: "looked at".into() };
    Ok(with_actions(&run, vec![note]))
}

pub async fn a_batch_writes_the_listing_columns_as_single_applies_do(store: &Store) {
    let wf = workflow();
    let ids: Vec<String> = (1..=4).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
        decide(store, &wf, id, accepted_read(), T0 + 1).await;
    }
    let claimed = ok(store.claim_work(T0 + 1, "w1", LEASE_MS, 10).await, "claim the review requests");
    let claim_of = |id: &str| -> Claim {
        Claim::Work(claimed.iter().find(|w| w.run_id == id).cloned().unwrap_or_else(|| panic!("no claim of {id}")))
    };
    // Runs 1 and 2 in a batch, 3 and 4 alone: 1 and 3 get no answer, 2 and 4 are refused.
    let (lost, refused) = (review_answer(1, CallAnswer::Uncertain), review_answer(1, not_reviewable()));
    let at = T0 + 2;
    batch_of(
        store,
        &[claim_of(&ids[0]), claim_of(&ids[1])],
        at,
        vec![Box::new(deciding(&wf, &lost, at)), Box::new(deciding(&wf, &refused, at))],
    )
    .await;
    ok(store.apply_fenced(&claim_of(&ids[2]), "w1", at, deciding(&wf, &lost, at)).await, "single, lost");
    ok(store.apply_fenced(&claim_of(&ids[3]), "w1", at, deciding(&wf, &refused, at)).await, "single, refused");
    let in_attention = (RunState::Attention, false, None, Some("request-review".to_owned()), Some(at));
    assert_eq!((listed(store, &ids[0]).await, listed(store, &ids[2]).await), (in_attention.clone(), in_attention));
    let finished = (RunState::Finished, false, Some("review-refused".to_owned()), None, None);
    assert_eq!((listed(store, &ids[1]).await, listed(store, &ids[3]).await), (finished.clone(), finished));

    // The run deadlines of runs 1 and 3 (the others ended): a report that
    // keeps a run in attention keeps the instant it entered, the deadline
    // ends it.
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    let timers = ok(store.claim_timers(deadline, "w1", LEASE_MS, 10).await, "claim the deadlines");
    let timer_of = |timers: &[coordinator_store::TimerItem], id: &str| -> Claim {
        Claim::Timer(timers.iter().find(|t| t.run_id == id).cloned().unwrap_or_else(|| panic!("no timer of {id}")))
    };
    batch_of(store, &[timer_of(&timers, &ids[0])], deadline, vec![Box::new(unchanged)]).await;
    ok(store.apply_fenced(&timer_of(&timers, &ids[2]), "w1", deadline, unchanged).await, "single, unchanged");
    let kept = (RunState::Attention, false, None, Some("request-review".to_owned()), Some(at));
    assert_eq!((listed(store, &ids[0]).await, listed(store, &ids[2]).await), (kept.clone(), kept));

    let later = deadline + LEASE_MS + 1;
    let timers = ok(store.claim_timers(later, "w1", LEASE_MS, 10).await, "claim the deadlines again");
    let fired = Event::TimerDue { timer: Timer::RunDeadline };
    batch_of(store, &[timer_of(&timers, &ids[0])], later, vec![Box::new(deciding(&wf, &fired, later))]).await;
    ok(store.apply_fenced(&timer_of(&timers, &ids[2]), "w1", later, deciding(&wf, &fired, later)).await, "single");
    let expired = (RunState::Expired, false, None, None, None);
    assert_eq!((listed(store, &ids[0]).await, listed(store, &ids[2]).await), (expired.clone(), expired));
}

/// Runs `sql` on a connection of its own, committed before it returns, from
/// inside a decision (a closure that cannot await): on a thread with its own
/// runtime. Gives up after 2 s waiting for a lock, and says whether it ran.
fn meanwhile(url: &str, sql: String) -> Result<u64, String> {
    let url = url.to_owned();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        runtime.block_on(async {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(&url).await.map_err(|e| e.to_string())?;
            conn.execute("SET lock_timeout = '2s'").await.map_err(|e| e.to_string())?;
            conn.execute(sql.as_str()).await.map(|done| done.rows_affected()).map_err(|e| e.to_string())
        })
    });
    thread.join().unwrap_or_else(|_| Err("the thread panicked".to_owned()))
}

/// On PostgreSQL a batch reads its runs and leases without locking them and
/// takes them as it writes (no lock record per report). Whatever moved in
/// between — a lease taken by another worker, a run changed by another
/// transaction — fails the batch as a whole with nothing written, so its
/// reports are applied one by one instead. (On SQLite the batch holds the
/// only write lock from its start: nothing can move.)
pub async fn a_batch_fails_whole_when_a_lease_or_a_run_moves_while_it_decides(db: &super::support::TestDb) {
    if !db.is_postgres() {
        return;
    }
    let wf = workflow();
    let ids: Vec<String> = (1..=2).map(run_id).collect();
    for id in &ids {
        admit(db, &wf, id, T0).await;
    }
    let claimed = ok(db.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    let claims: Vec<Claim> = claimed.into_iter().map(Claim::Work).collect();
    assert_eq!(claims.len(), 2);
    let event = accepted_read();
    // The first decision takes run 1's lease; in the second batch (run 1's
    // report now lost on its own) the first decision moves run 2.
    let take_lease = format!("UPDATE outbox SET lease_owner = 'thief' WHERE run_id = '{}'::uuid", ids[0]);
    let move_run = format!("UPDATE runs SET version = version + 1 WHERE id = '{}'::uuid", ids[1]);
    for (sql, expected) in [(take_lease, "lease lost"), (move_run, "stale")] {
        let before: Vec<_> = [ok(db.work_of(&ids[0]).await, "work"), ok(db.work_of(&ids[1]).await, "work")].into();
        let versions = |rows: [Option<coordinator_store::RunRow>; 2]| rows.map(|r| r.map(|r| r.version));
        let versions_before = versions([ok(db.load(&ids[0]).await, "run"), ok(db.load(&ids[1]).await, "run")]);
        let mut moved = None;
        let outcome = db
            .apply_fenced_batch(&claims, "w1", T0 + 1, |_, snapshot| {
                if moved.is_none() {
                    moved = Some(meanwhile(&db.url, sql.clone()));
                }
                deciding(&wf, &event, T0 + 1)(snapshot)
            })
            .await;
        assert_eq!(moved, Some(Ok(1)), "the batch must hold no lock while it decides ({expected}: {outcome:?})");
        match (expected, &outcome) {
            ("lease lost", Err(StoreError::LeaseLost { .. })) | ("stale", Err(StoreError::Stale { .. })) => {}
            _ => panic!("{expected}: the batch must fail whole, got {outcome:?}"),
        }
        // Nothing of the batch was written: the untouched run is as it was.
        let untouched = if expected == "stale" { 0 } else { 1 };
        assert_eq!(ok(db.work_of(&ids[untouched]).await, "work"), before[untouched], "{expected}");
        let after = versions([ok(db.load(&ids[0]).await, "run"), ok(db.load(&ids[1]).await, "run")]);
        assert_eq!(after[untouched], versions_before[untouched], "{expected}");
    }
}

/// `actions` on the run of `snapshot`, as a decision of it.
fn acting(actions: Vec<Action>) -> impl FnOnce(&[u8]) -> Result<Decision, String> {
    move |snapshot| Ok(with_actions(&decode(snapshot)?, actions))
}

/// Every kind of row a decision writes — a finished attempt, queued work,
/// timers set and cleared, a wait opened, then closed with its observation
/// finished — and a decision whose writes must keep their order (a row
/// queued twice): a batch writes them as single applies do.
pub async fn a_batch_writes_every_kind_of_row_as_single_applies_do(store: &Store) {
    let wf = workflow();
    let ids: Vec<String> = (1..=4).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
    }
    let claimed = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    let claim_of = |id: &str| -> Claim {
        Claim::Work(claimed.iter().find(|w| w.run_id == id).cloned().unwrap_or_else(|| panic!("no claim of {id}")))
    };
    let first = claimed.first().unwrap_or_else(|| panic!("nothing claimed"));
    let (step, attempt) = (first.step.clone(), u32::try_from(first.attempt).unwrap_or(0));
    let done = Action::RecordEffect {
        step: step.clone(),
        attempt,
        effect: coordinator_core::model::run::EffectState::Accepted,
        output: None,
        completions: Default::default(),
        refusal: None,
    };
    let wait = |at: i64| Action::StartWait {
        step: "w".into(),
        reference: "ref".into(),
        started_at: Instant(at),
        interval_seconds: 30,
        timeout_at: Instant(at + 1_000),
    };
    let timeout = Timer::WaitTimeout { step: "w".into() };
    // Groupable: every kind of write once.
    let grouped = || {
        acting(vec![
            done.clone(),
            Action::Dispatch { step: "s2".into(), attempt: 1, not_before: Instant(T0 + 5) },
            Action::ScheduleTimer { timer: timeout.clone(), at: Instant(T0 + 1_000) },
            Action::CancelTimer { timer: Timer::RunDeadline },
            wait(T0),
            Action::Observe { step: "w".into(), seq: 1, at: Instant(T0 + 50) },
            Action::Audit { kind: AuditKind::Decision, step: Some("w".into()), detail: "waiting".into() },
        ])
    };
    // Not groupable: the same row queued twice, the second attempt kept.
    let in_order = || {
        acting(vec![
            done.clone(),
            Action::Dispatch { step: "s3".into(), attempt: 1, not_before: Instant(T0 + 5) },
            Action::Dispatch { step: "s3".into(), attempt: 2, not_before: Instant(T0 + 7) },
            wait(T0),
        ])
    };
    batch_of(store, &[claim_of(&ids[0]), claim_of(&ids[1])], T0 + 1, vec![Box::new(grouped()), Box::new(in_order())])
        .await;
    ok(store.apply_fenced(&claim_of(&ids[2]), "w1", T0 + 1, grouped()).await, "single, grouped");
    ok(store.apply_fenced(&claim_of(&ids[3]), "w1", T0 + 1, in_order()).await, "single, in order");
    for (batched, single) in [(&ids[0], &ids[2]), (&ids[1], &ids[3])] {
        let (b, s) = (ok(store.work_of(batched).await, "batched"), ok(store.work_of(single).await, "single"));
        assert_eq!(b, s, "run {batched} as the single apply left run {single}");
    }
    let grouped_work = ok(store.work_of(&ids[0]).await, "work");
    assert!(grouped_work.outbox.iter().any(|(s, _, _, nb)| s == "s2" && *nb == T0 + 5), "{grouped_work:?}");
    assert!(!grouped_work.outbox.iter().any(|(s, _, _, _)| *s == step), "the attempt is done: {grouped_work:?}");
    assert_eq!(grouped_work.timers.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>(), vec![timeout.clone()]);
    let ordered = ok(store.work_of(&ids[1]).await, "work");
    assert!(ordered.outbox.iter().any(|(s, _, a, nb)| s == "s3" && *a == 2 && *nb == T0 + 7), "{ordered:?}");
    let mut waiting: Vec<(String, String)> = ids.iter().map(|id| (id.clone(), "w".to_owned())).collect();
    waiting.sort();
    assert_eq!(ok(store.waiting_on("ref").await, "waits"), waiting);

    // The observations of runs 1 and 3: the wait resolves, its timer is cleared.
    let observed = ok(store.claim_work(T0 + 50, "w1", LEASE_MS, 20).await, "claim the observations");
    let observation_of = |id: &str| -> Claim {
        let found = observed.iter().find(|w| w.run_id == id && w.kind == coordinator_store::WorkKind::Observation);
        Claim::Work(found.cloned().unwrap_or_else(|| panic!("no observation of {id}: {observed:?}")))
    };
    let resolve = || {
        acting(vec![
            Action::ResolveWait {
                step: "w".into(),
                resolution: coordinator_core::machine::action::WaitResolution::Completed,
                value: None,
            },
            Action::CancelTimer { timer: timeout.clone() },
        ])
    };
    batch_of(store, &[observation_of(&ids[0])], T0 + 50, vec![Box::new(resolve())]).await;
    ok(store.apply_fenced(&observation_of(&ids[2]), "w1", T0 + 50, resolve()).await, "single, resolve");
    let (b, s) = (ok(store.work_of(&ids[0]).await, "batched"), ok(store.work_of(&ids[2]).await, "single"));
    assert_eq!(b, s);
    assert!(b.timers.is_empty() && !b.outbox.iter().any(|(s, _, _, _)| s == "w"), "{b:?}");
    assert_eq!(
        ok(store.waiting_on("ref").await, "waits"),
        vec![(ids[1].clone(), "w".to_owned()), (ids[3].clone(), "w".to_owned())]
    );
}
