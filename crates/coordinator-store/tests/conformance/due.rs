//! A worker's claim round (`Store::claim_due`): due timers and due outbox
//! rows claimed together, up to their limits, and the instant the next claim
//! could return something — with the rows just claimed counted by their new
//! leases, not by their due times. And the queue tables' housekeeping
//! (`Store::tidy_queues`).

use std::time::Duration;

use coordinator_core::machine::event::Timer;
use coordinator_store::{ClaimLimits, ClaimedRun, Due, Store, TimerItem, WorkScope};
use sqlx::{Connection, PgConnection};

use super::support::{T0, TestDb, admit, run_id, workflow};
use super::{LEASE_MS, ok};

/// How long tidying may wait beside a held lock before the test fails (a
/// failure guard: skipping takes no time, waiting would take until the lock goes).
const LOCK_GUARD: Duration = Duration::from_secs(10);

/// When work is next due for `scope`, claiming nothing.
pub(crate) async fn next_due(store: &Store, scope: WorkScope) -> Option<i64> {
    ok(store.claim_due(scope, T0, "nobody", LEASE_MS, ClaimLimits::NONE).await, "next due").next
}

fn runs_of(due: &Due) -> Vec<String> {
    due.work.iter().map(|(item, _)| item.run_id.clone()).collect()
}

pub(crate) async fn a_claim_round_takes_both_kinds_and_says_what_is_due_next(store: &Store) {
    let wf = workflow();
    let deadline_ms = i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    for n in 1..=3 {
        admit(store, &wf, &run_id(n), T0 + i64::from(n)).await;
    }
    let limits = |timers, work| ClaimLimits { timers, work };
    assert_eq!(next_due(store, WorkScope::All).await, Some(T0 + 1), "the first attempt");

    // Before the deadlines: attempts only, two of the three due.
    let now = T0 + 10;
    let first = ok(store.claim_due(WorkScope::All, now, "w1", LEASE_MS, limits(10, 2)).await, "first");
    assert!(first.timers.is_empty(), "{first:?}");
    assert_eq!(runs_of(&first), vec![run_id(1), run_id(2)], "the limit, oldest first");
    assert_eq!(first.next, Some(T0 + 3), "the attempt left over is due already");
    for (item, run) in &first.work {
        let row = ok(store.load(&item.run_id).await, "load").unwrap_or_else(|| panic!("run {}", item.run_id));
        assert_eq!(
            run,
            &ClaimedRun { revision: row.revision, snapshot: row.snapshot, trace_parent: None, due_at: run.due_at }
        );
        assert!(!item.reclaimed);
    }

    // The rest: then the first lease to run out is next, not the attempts' due times.
    let second = ok(store.claim_due(WorkScope::All, now, "w2", LEASE_MS, limits(10, 10)).await, "second");
    assert_eq!(runs_of(&second), vec![run_id(3)]);
    assert_eq!(second.next, Some(now + LEASE_MS + 1));
    assert_eq!(next_due(store, WorkScope::All).await, Some(now + LEASE_MS + 1), "read again, the same");

    // At the deadlines: a recovery-only claimer takes no timer and sees none due.
    let at = T0 + 3 + deadline_ms;
    let receipts = ok(store.claim_due(WorkScope::ReceiptsOnly, at, "r", LEASE_MS, limits(10, 10)).await, "receipts");
    assert_eq!(receipts, Due::default(), "no receipt is asked for, and timers are not its business");

    // Two deadlines of three, and no work: the attempts' leases ran out long ago.
    let third = ok(store.claim_due(WorkScope::All, at, "w3", LEASE_MS, limits(2, 0)).await, "third");
    let timer = |n: u32| TimerItem {
        run_id: run_id(n),
        timer: Timer::RunDeadline,
        due_at: T0 + i64::from(n) + deadline_ms,
        revision: wf.revision.clone(),
        trace_parent: None,
    };
    assert_eq!(third.timers, vec![timer(1), timer(2)]);
    assert!(third.work.is_empty());
    assert_eq!(third.next, Some(now + LEASE_MS + 1), "an expired lease makes its row due again");

    let fourth = ok(store.claim_due(WorkScope::All, at, "w4", LEASE_MS, limits(10, 10)).await, "fourth");
    assert_eq!(fourth.timers, vec![timer(3)]);
    assert_eq!(runs_of(&fourth), vec![run_id(1), run_id(2), run_id(3)], "taken over");
    assert!(fourth.work.iter().all(|(item, _)| item.reclaimed));
    assert_eq!(fourth.next, Some(at + LEASE_MS + 1), "everything is leased until then");
}

/// Rows whose lease ran out and rows never leased are claimed together, up
/// to one limit (PostgreSQL reads them from two indexes).
pub(crate) async fn fresh_and_expired_rows_share_one_limit(store: &Store) {
    let wf = workflow();
    for n in 1..=2 {
        admit(store, &wf, &run_id(n), T0).await;
    }
    let first = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "first claim");
    assert_eq!(first.len(), 2);
    let later = T0 + LEASE_MS + 5;
    for n in 3..=4 {
        admit(store, &wf, &run_id(n), later).await;
    }
    let at = later + 1;
    let three = ok(store.claim_work(at, "w2", LEASE_MS, 3).await, "three of four");
    assert_eq!(three.len(), 3, "{three:?}");
    let rest = ok(store.claim_work(at, "w3", LEASE_MS, 10).await, "the rest");
    assert_eq!(rest.len(), 1, "{rest:?}");
    let mut runs: Vec<(String, bool)> = three.iter().chain(&rest).map(|w| (w.run_id.clone(), w.reclaimed)).collect();
    runs.sort();
    let expected: Vec<(String, bool)> = (1..=4).map(|n| (run_id(n), n <= 2)).collect();
    assert_eq!(runs, expected, "each row once; the expired ones are reclaimed");
}

/// How many times PostgreSQL vacuumed `table` by request (not autovacuum).
async fn vacuums(url: &str, table: &str) -> i64 {
    let mut conn = PgConnection::connect(url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    sqlx::query_scalar("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = $1")
        .bind(table)
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("vacuum count of {table}: {e}"))
}

/// `Store::tidy_queues` vacuums the outbox and timers on PostgreSQL, without
/// waiting for a table another session holds (it is skipped until next
/// time); on SQLite it does nothing and succeeds.
pub(crate) async fn the_queue_tables_are_tidied_without_waiting_on_postgres(db: &TestDb) {
    let wf = workflow();
    admit(db, &wf, &run_id(1), T0).await;
    ok(db.claim_due(WorkScope::All, T0, "w1", LEASE_MS, ClaimLimits { timers: 1, work: 1 }).await, "claim");
    if !db.is_postgres() {
        ok(db.tidy_queues().await, "nothing to do on SQLite");
        return;
    }
    // Another session holds the outbox in a mode VACUUM needs: it is skipped, not waited for.
    let mut holder = PgConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let mut lock = holder.begin().await.unwrap_or_else(|e| panic!("begin: {e}"));
    sqlx::raw_sql("LOCK TABLE outbox IN SHARE UPDATE EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap_or_else(|e| panic!("lock: {e}"));
    let skipped = tokio::time::timeout(LOCK_GUARD, db.tidy_queues()).await;
    assert!(matches!(skipped, Ok(Ok(()))), "a locked table is skipped: {skipped:?}");
    assert_eq!((vacuums(&db.url, "outbox").await, vacuums(&db.url, "timers").await), (0, 1));
    lock.rollback().await.unwrap_or_else(|e| panic!("rollback: {e}"));
    ok(db.tidy_queues().await, "tidy");
    assert_eq!((vacuums(&db.url, "outbox").await, vacuums(&db.url, "timers").await), (1, 2));
}
