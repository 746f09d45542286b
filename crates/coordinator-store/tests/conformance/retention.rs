//! Retention (`Store::retain`): ended runs go as a prefix of days — on
//! PostgreSQL whole day partitions (`Store::prepare_partitions` made them), on
//! SQLite the same rows deleted — with their admission keys and journal
//! entries; a day holding a run that has not ended is kept, with every day
//! after it; the journal still verifies from its checkpoint; a second cut
//! with nothing more to remove removes nothing.

use coordinator_core::audit::{Entry, Head, Verifier};
use coordinator_core::machine::event::{Event, Timer};
use coordinator_store::{Admission, DAY_MS, NewRun, Store, StoreError, day_of, run_id_bound};

use super::ok;
use super::support::{TestDb, deciding, first, new_run, workflow};

/// A moment after reviewed-notice's run deadline (30 days), ms.
const DEADLINE: i64 = 30 * DAY_MS + 60_000;

/// A UUIDv7-shaped run id made at `ms`.
fn id_at(ms: i64, n: u32) -> String {
    format!("{}-7000-8000-{n:012}", &run_id_bound(ms)[..13])
}

/// The whole sealed journal after `after`, and the head.
async fn journal_after(store: &Store, mut after: i64) -> (Vec<Entry>, Head) {
    let mut entries = Vec::new();
    loop {
        let page = ok(store.audit(None, after, 100).await, "audit page");
        entries.extend(page.entries);
        match page.next {
            Some(next) => after = next,
            None => return (entries, page.head),
        }
    }
}

/// The start of today (UTC), ms: days from it on are made ahead by `prepare_partitions`.
fn today() -> i64 {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    day_of(i64::try_from(now_ms).unwrap_or(0))
}

async fn seal_all(store: &Store) {
    while ok(store.seal_audit(100).await, "seal") == 100 {}
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    super::support::raw_count(db, sql).await
}

/// Admits `new` (with a key), then ends it at `ended_at` when given (its
/// deadline fires: it expires).
async fn run(store: &Store, new: &NewRun, ended_at: Option<i64>) {
    let wf = workflow();
    match store.admit(new, || Ok::<_, StoreError>(first(&wf, new))).await {
        Ok(Admission::Created(_)) => {}
        other => panic!("admission of {}: {other:?}", new.id),
    }
    if let Some(at) = ended_at {
        let deadline = Event::TimerDue { timer: Timer::RunDeadline };
        ok(store.apply(&new.id, at, deciding(&wf, &deadline, at)).await, "deadline");
        let row = ok(store.load(&new.id).await, "load").unwrap_or_else(|| panic!("{} is gone", new.id));
        assert!(row.state.is_terminal(), "the deadline ends the run: {:?}", row.state);
    }
}

/// `new` with a search key of its own.
fn keyed(new: NewRun) -> NewRun {
    NewRun { search_keys: vec![("applicationId".into(), new.id.clone())], ..new }
}

pub async fn retention_removes_ended_days_and_keeps_from_the_first_live_one(db: &TestDb) {
    let store: &Store = db;
    let wf = workflow();
    // Days after today, so their partitions are made ahead (the first in the
    // migration's own partition, the others by `prepare_partitions`).
    let today = today();
    for at in [today, today + 3 * DAY_MS] {
        let prepared = ok(store.prepare_partitions(at).await, "partitions");
        if let Some((name, e)) = prepared.skipped.first() {
            panic!("partition {name} not made: {e}");
        }
    }
    let day = |n: i64| today + n * DAY_MS + 3_600_000;
    let (a, a2, b, c) = (
        keyed(new_run(&wf, &id_at(day(1), 1), "alice", Some("key-a"), day(1))),
        keyed(new_run(&wf, &id_at(day(2), 2), "alice", Some("key-a2"), day(2))),
        keyed(new_run(&wf, &id_at(day(3), 3), "alice", Some("key-b"), day(3))),
        keyed(new_run(&wf, &id_at(day(4), 4), "alice", Some("key-c"), day(4))),
    );
    run(store, &a, Some(day(1) + DEADLINE)).await;
    run(store, &a2, Some(day(2) + DEADLINE)).await;
    run(store, &b, None).await; // still running
    run(store, &c, Some(day(4) + DEADLINE)).await;
    seal_all(store).await;

    // Days after they expired, keeping one day: a and a2 go; b has not ended,
    // so its day and c's stay.
    let now = today + 45 * DAY_MS;
    let cut = ok(store.retain(now, 1).await, "retain");
    assert_eq!(cut.runs, 2, "{cut:?}");
    for gone in [&a, &a2] {
        assert!(ok(store.load(&gone.id).await, "load").is_none(), "{} was kept", gone.id);
    }
    for kept in [&b, &c] {
        assert!(ok(store.load(&kept.id).await, "load").is_some(), "{} was removed", kept.id);
    }
    let keys = count(db, "SELECT count(*) FROM admission_keys").await;
    assert_eq!(keys, 2, "the removed runs' keys go with them");
    let search_keys = count(db, "SELECT count(*) FROM run_keys").await;
    assert_eq!(search_keys, 2, "the removed runs' search keys go with them");
    let runs = count(db, "SELECT count(*) FROM runs").await;
    assert_eq!(runs, 2);

    // The journal before the first kept day, less one, is cut: what was written
    // on day 1 (a's admission) goes, what was written on day 2 (a2's
    // admission) and after (a's expiry) stays; the chain verifies from the
    // checkpoint to the head.
    let checkpoint = cut.checkpoint.clone().unwrap_or_else(|| panic!("no checkpoint: {cut:?}"));
    assert!(cut.entries > 0, "{cut:?}");
    assert_eq!(ok(store.audit_checkpoint().await, "checkpoint"), Some(checkpoint.clone()));
    seal_all(store).await;
    let (entries, head) = journal_after(store, 0).await;
    assert_eq!(
        entries.first().map(|e| e.position),
        Some(checkpoint.position + 1),
        "the journal starts after its checkpoint"
    );
    assert!(entries.iter().all(|e| e.at >= day(2) - 3_600_000), "the entries before day 2 are cut");
    assert!(!entries.iter().any(|e| e.at == day(1)), "a's admission entries are cut");
    assert!(entries.iter().any(|e| e.run_id.as_deref() == Some(a2.id.as_str())), "a2's entries are kept");
    assert!(entries.iter().any(|e| e.kind == "retention"), "the cut is journaled");
    let mut verifier = Verifier::after(Some(checkpoint.clone()));
    for entry in &entries {
        verifier.feed(entry).unwrap_or_else(|t| panic!("the chain breaks after the cut: {t}"));
    }
    let verified = verifier.finish(&head).unwrap_or_else(|t| panic!("{t}"));
    assert_eq!(verified.start, checkpoint);
    // A journal that starts at position 1 no longer verifies: the cut is visible.
    let mut from_start = Verifier::new();
    assert!(entries.iter().try_for_each(|e| from_start.feed(e)).is_err());

    // Nothing more to remove while b runs.
    let again = ok(store.retain(now, 1).await, "retain again");
    assert_eq!((again.runs, again.entries), (0, 0), "{again:?}");
    // a's key is free again: the same request admits a new run.
    let repeat = keyed(new_run(&wf, &id_at(day(5), 5), "alice", Some("key-a"), day(5)));
    match store.admit(&repeat, || Ok::<_, StoreError>(first(&wf, &repeat))).await {
        Ok(Admission::Created(id)) => assert_eq!(id, repeat.id),
        other => panic!("{other:?}"),
    }
}

/// Two processes starting together both make the days ahead: each day is
/// made once, by one of them, and neither reports a day it "could not make"
/// (the service logs such a day as a warning that its rows go to the DEFAULT
/// partition, which would be false and give an operator work for nothing).
pub async fn partitions_made_by_two_processes_at_once_are_made_once_and_none_is_skipped(db: &TestDb) {
    let other = ok(Store::connect(&db.url).await, "a second process");
    let at = today() + 5 * DAY_MS;
    for round in 0..3 {
        let at = at + round * DAY_MS;
        let (mine, theirs) = tokio::join!(db.prepare_partitions(at), other.prepare_partitions(at));
        let (mine, theirs) = (ok(mine, "prepare"), ok(theirs, "prepare in the other process"));
        if let Some((name, e)) = mine.skipped.iter().chain(&theirs.skipped).next() {
            panic!("round {round}: {name} reported as not made: {e}");
        }
        let mut made: Vec<&String> = mine.created.iter().chain(&theirs.created).collect();
        let all = made.len();
        made.sort();
        made.dedup();
        assert_eq!(made.len(), all, "round {round}: a day made twice: {mine:?} {theirs:?}");
    }
    if db.url.starts_with("postgres") {
        let days = count(db, "SELECT count(*) FROM partition_days WHERE tbl = 'audit'").await;
        let distinct = count(db, "SELECT count(DISTINCT lo_ms) FROM partition_days WHERE tbl = 'audit'").await;
        assert_eq!(days, distinct, "each day recorded once");
    }
    other.close().await;
}
